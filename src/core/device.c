/* device.c — the device table: OLYMPUS_NUM_CPU_DEVICES (default 1) CPU
 * devices, read once. A fact every layer may ask (the executor checks device
 * indices); the runtime (src/rt) builds streams and queues over it. */
#include "internal.h"

#include <errno.h>

#define MAX_CPU_DEVICES 1024

static atomic_int n_devices; /* 0: not read yet */

int oly__parse_device_count(const char *s)
{
    if (!s || !*s) return 1;
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n') end++;
    if (errno != 0 || *end != '\0' || n < 1 || n > MAX_CPU_DEVICES) return 1;
    return (int)n;
}

int oly_device_count(void)
{
    int n = atomic_load_explicit(&n_devices, memory_order_acquire);
    if (n == 0) {
        /* Racing first calls compute the same value; whichever store wins is it. */
        int fresh = oly__parse_device_count(getenv("OLYMPUS_NUM_CPU_DEVICES")), expected = 0;
        if (atomic_compare_exchange_strong(&n_devices, &expected, fresh)) n = fresh;
        else n = expected;
    }
    return n;
}

const char *oly_device_kind(int device)
{
    return device >= 0 && device < oly_device_count() ? "cpu" : NULL;
}

oly_status oly_set_device_count(int n)
{
    if (n < 1 || n > MAX_CPU_DEVICES)
        return oly__error(OLY_ERR_INVALID, "the number of CPU devices must be in [1, %d], got %d",
                          MAX_CPU_DEVICES, n);
    int expected = 0;
    if (atomic_compare_exchange_strong(&n_devices, &expected, n) || expected == n) return OLY_OK;
    return oly__error(OLY_ERR_INVALID,
                      "the number of CPU devices can only be set before the devices are first "
                      "used; %d devices are in use, %d asked",
                      expected, n);
}

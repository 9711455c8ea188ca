/* simd.c — probes once whether the CPU backend's AVX2+FMA loops may run
 * (simd.h). Racing first probes compute the same value. */
#include "cpu/simd.h"

atomic_int oly__cpu_simd_state;

int oly__cpu_simd_probe(void)
{
    bool on = false;
#if defined(__x86_64__) && defined(__GNUC__)
    const char *e = getenv("OLYMPUS_NO_SIMD");
    on = !(e && *e && strcmp(e, "0") != 0) && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
#endif
    int s = on ? 1 : 2;
    atomic_store_explicit(&oly__cpu_simd_state, s, memory_order_relaxed);
    return s;
}

/* error.c — the per-thread error state: a message and an optional payload. */
#include "internal.h"

static _Thread_local char message[2048];
static _Thread_local void *payload;
static _Thread_local void (*payload_free)(void *);
void oly__error_forget(void) { message[0] = '\0'; }

const char *oly_last_error(void) { return message; }

const char *oly_status_name(oly_status s)
{
    static const char *const names[OLY_STATUS_COUNT] = {
        [OLY_OK] = "OLY_OK",
        [OLY_ERR_INVALID] = "OLY_ERR_INVALID",
        [OLY_ERR_TYPE] = "OLY_ERR_TYPE",
        [OLY_ERR_SHAPE] = "OLY_ERR_SHAPE",
        [OLY_ERR_UNSUPPORTED] = "OLY_ERR_UNSUPPORTED",
        [OLY_ERR_NOMEM] = "OLY_ERR_NOMEM",
        [OLY_ERR_CALLBACK] = "OLY_ERR_CALLBACK",
        [OLY_ERR_INTERNAL] = "OLY_ERR_INTERNAL",
        [OLY_ERR_DISTRIBUTED] = "OLY_ERR_DISTRIBUTED",
    };
    return (unsigned)s < OLY_STATUS_COUNT ? names[s] : "OLY_ERR_?";
}

oly_status oly__verror(oly_status status, const char *fmt, va_list ap)
{
    vsnprintf(message, sizeof message, fmt, ap);
    return status;
}

oly_status oly__error(oly_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oly__verror(status, fmt, ap);
    va_end(ap);
    return status;
}

oly_status oly_host_fail(oly_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    oly__verror(status == OLY_OK ? OLY_ERR_CALLBACK : status, fmt, ap);
    va_end(ap);
    return status == OLY_OK ? OLY_ERR_CALLBACK : status;
}

oly_status oly__error_prefix(oly_status status, const char *fmt, ...)
{
    char prefix[512], old[sizeof message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, message, sizeof old);
    size_t np = strlen(prefix), no = strlen(old), cap = sizeof message - 1;
    if (np > cap) np = cap;
    memcpy(message, prefix, np);
    size_t n = np;
    if (n + 2 <= cap) {
        memcpy(message + n, ": ", 2);
        n += 2;
    }
    if (no > cap - n) no = cap - n;
    memcpy(message + n, old, no);
    message[n + no] = '\0';
    return status;
}

void oly_error_set_payload(void *p, void (*free_fn)(void *))
{
    if (payload && payload_free) payload_free(payload);
    payload = p;
    payload_free = free_fn;
}

void *oly_error_take_payload(void (**free_fn)(void *))
{
    void *p = payload;
    if (free_fn) *free_fn = payload_free;
    payload = NULL;
    payload_free = NULL;
    return p;
}

void oly_error_clear(void)
{
    message[0] = '\0';
    oly_error_set_payload(NULL, NULL);
}

void oly__failure_keep(oly_failure *f, oly_status status)
{
    void (*old_free)(void *) = f->free_fn;
    void *old = f->payload;
    f->status = status;
    snprintf(f->msg, sizeof f->msg, "%s", message);
    f->payload = oly_error_take_payload(&f->free_fn);
    if (old && old_free) old_free(old);
}

oly_status oly__failure_report(oly_failure *f)
{
    oly_status st = oly__error(f->status, "%s", f->msg);
    if (f->payload) oly_error_set_payload(f->payload, f->free_fn);
    f->payload = NULL;
    f->free_fn = NULL;
    return st;
}

void oly__failure_clear(oly_failure *f)
{
    if (f->payload && f->free_fn) f->free_fn(f->payload);
    *f = (oly_failure){0};
}

/* host.c — refcounted host functions: a name, a call and the user data it
 * closes over, released (from whichever thread drops the last reference). */
#include "internal.h"

oly_status oly_host_fn_new(const char *name, oly_host_call_fn call, void *user,
                           void (*release)(void *user), oly_host_fn **out)
{
    if (!call) return oly__error(OLY_ERR_INVALID, "oly_host_fn_new: call is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_host_fn_new: out is NULL");
    oly_host_fn *f = oly__malloc(sizeof *f);
    if (!f) return OLY_ERR_NOMEM;
    f->name = oly__strdup(name ? name : "");
    if (!f->name) {
        free(f);
        return OLY_ERR_NOMEM;
    }
    atomic_init(&f->refcount, 1);
    f->call = call;
    f->user = user;
    f->release = release;
    *out = f;
    return OLY_OK;
}

oly_host_fn *oly_host_fn_retain(oly_host_fn *f)
{
    if (f) atomic_fetch_add_explicit(&f->refcount, 1, memory_order_relaxed);
    return f;
}

void oly_host_fn_release(oly_host_fn *f)
{
    if (!f) return;
    if (atomic_fetch_sub_explicit(&f->refcount, 1, memory_order_acq_rel) != 1) return;
    if (f->release) f->release(f->user);
    free(f->name);
    free(f);
}

const char *oly_host_fn_name(const oly_host_fn *f) { return f->name; }
void *oly_host_fn_user(const oly_host_fn *f) { return f->user; }

/* host.c — the refcounted host closure (oly_closure: a name, the user data it
 * closes over, its release from whichever thread drops the last reference)
 * and its two kinds: host functions, called by programs, and custom-rule
 * thunks, traced by transforms (oly_thunk_trace is in src/prims/custom.c,
 * since tracing yields a program). */
#include "internal.h"

/* A closure of size bytes (its kind's struct) with refcount 1, or NULL with the
 * message set. */
static void *closure_new(size_t size, const char *name, void *user, void (*release)(void *))
{
    oly_closure *c = oly__calloc(1, size);
    if (!c) return NULL;
    c->name = oly__strdup(name);
    if (!c->name) {
        free(c);
        return NULL;
    }
    atomic_init(&c->refcount, 1);
    c->user = user;
    c->release = release;
    return c;
}

static void closure_retain(oly_closure *c)
{
    atomic_fetch_add_explicit(&c->refcount, 1, memory_order_relaxed);
}

static void closure_release(oly_closure *c)
{
    if (atomic_fetch_sub_explicit(&c->refcount, 1, memory_order_acq_rel) != 1) return;
    if (c->release) c->release(c->user);
    free(c->name);
    free(c);
}

/* ---------------------------------------------------------------- host functions */

oly_status oly_host_fn_new(const char *name, oly_host_call_fn call, void *user,
                           void (*release)(void *user), oly_host_fn **out)
{
    if (!call) return oly__error(OLY_ERR_INVALID, "oly_host_fn_new: call is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_host_fn_new: out is NULL");
    oly_host_fn *f = closure_new(sizeof *f, name ? name : "", user, release);
    if (!f) return OLY_ERR_NOMEM;
    f->call = call;
    *out = f;
    return OLY_OK;
}

void oly_host_fn_borrow_args(oly_host_fn *f)
{
    if (f) f->borrows_args = true;
}

oly_host_fn *oly_host_fn_retain(oly_host_fn *f)
{
    if (f) closure_retain(&f->c);
    return f;
}

void oly_host_fn_release(oly_host_fn *f)
{
    if (f) closure_release(&f->c);
}

const char *oly_host_fn_name(const oly_host_fn *f) { return f->c.name; }
void *oly_host_fn_user(const oly_host_fn *f) { return f->c.user; }

/* ---------------------------------------------------------------- thunks */

oly_status oly_thunk_new(const char *name, oly_thunk_trace_fn trace, void *user,
                         void (*release)(void *user), oly_thunk **out)
{
    if (!trace || !out)
        return oly__error(OLY_ERR_INVALID, "oly_thunk_new: %s is NULL", trace ? "out" : "trace");
    oly_thunk *t = closure_new(sizeof *t, name ? name : "thunk", user, release);
    if (!t) return OLY_ERR_NOMEM;
    t->trace = trace;
    *out = t;
    return OLY_OK;
}

oly_thunk *oly_thunk_retain(oly_thunk *t)
{
    if (t) closure_retain(&t->c);
    return t;
}

void oly_thunk_release(oly_thunk *t)
{
    if (t) closure_release(&t->c);
}

const char *oly_thunk_name(const oly_thunk *t) { return t ? t->c.name : "(null)"; }
void *oly_thunk_user(const oly_thunk *t) { return t ? t->c.user : NULL; }

/* event.c — waiting: the blocking hooks, and events, the one-shot completions
 * behind arrays whose producer was queued on a device stream.
 *
 * A thread that waits here first calls the blocking hook (the Python extension
 * releases the GIL there), so the thread it waits for may take the GIL to run a
 * Python host function: no deadlock by construction. The hook runs with no
 * lock of ours held.
 *
 * Events are refcounted; the producer completes one exactly once. Every event
 * shares one mutex and condition variable: waits are rare (a reader that got
 * ahead of a queued computation) and a broadcast is sent only when someone
 * waits. A failed event keeps the producer's message and payload; the first
 * waiter takes the payload (say, the Python exception), later ones get the
 * message. */
#include "internal.h"

#include <pthread.h>

static void *(*_Atomic hook_enter)(void);
static void (*_Atomic hook_leave)(void *);

void oly_set_blocking_hooks(void *(*enter)(void), void (*leave)(void *))
{
    atomic_store(&hook_enter, enter);
    atomic_store(&hook_leave, leave);
}

void *oly__blocking_enter(bool *entered)
{
    void *(*enter)(void) = atomic_load(&hook_enter);
    *entered = enter != NULL;
    return enter ? enter() : NULL;
}

void oly__blocking_leave(bool entered, void *token)
{
    void (*leave)(void *) = atomic_load(&hook_leave);
    if (entered && leave) leave(token);
}

struct oly_event {
    atomic_long refcount;
    atomic_bool done;
    oly_failure failure;        /* status OLY_OK when it succeeded; under mu */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t completed = PTHREAD_COND_INITIALIZER;
static int waiters; /* under mu */

oly_event *oly__event_new(void)
{
    oly_event *e = oly__calloc(1, sizeof *e);
    if (!e) return NULL;
    atomic_init(&e->refcount, 1);
    atomic_init(&e->done, false);
    return e;
}

oly_event *oly__event_retain(oly_event *e)
{
    if (e) atomic_fetch_add_explicit(&e->refcount, 1, memory_order_relaxed);
    return e;
}

void oly__event_release(oly_event *e)
{
    if (!e || atomic_fetch_sub_explicit(&e->refcount, 1, memory_order_acq_rel) != 1) return;
    oly__failure_clear(&e->failure);
    free(e);
}

bool oly__event_done(const oly_event *e)
{
    return atomic_load_explicit(&e->done, memory_order_acquire);
}

void oly__event_complete(oly_event *e, oly_status status)
{
    pthread_mutex_lock(&mu);
    if (status != OLY_OK) oly__failure_keep(&e->failure, status);
    atomic_store_explicit(&e->done, true, memory_order_release);
    if (waiters) pthread_cond_broadcast(&completed);
    pthread_mutex_unlock(&mu);
}

void oly__event_sleep(oly_event *e)
{
    if (oly__event_done(e)) return;
    bool entered;
    void *token = oly__blocking_enter(&entered);
    pthread_mutex_lock(&mu);
    waiters++;
    while (!atomic_load_explicit(&e->done, memory_order_acquire)) pthread_cond_wait(&completed, &mu);
    waiters--;
    pthread_mutex_unlock(&mu);
    oly__blocking_leave(entered, token);
}

oly_status oly__event_wait(oly_event *e)
{
    oly__event_sleep(e);
    if (e->failure.status == OLY_OK) return OLY_OK; /* written before done, never after */
    pthread_mutex_lock(&mu);
    oly_failure f = e->failure; /* the payload moves to this waiter */
    e->failure.payload = NULL;
    e->failure.free_fn = NULL;
    pthread_mutex_unlock(&mu);
    return oly__failure_report(&f); /* outside the lock: replacing a payload may run host code */
}

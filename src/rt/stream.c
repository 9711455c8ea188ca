/* stream.c — device streams: where oly_program_run sends a program.
 *
 * Each device has one stream, a FIFO that orders the programs (and so the
 * ordered effects) issued to it. A run goes one of two ways:
 *   - inline: when the stream is idle and the work is short, the calling
 *     thread runs it at once (handing work to another thread costs 50–150 µs,
 *     far above a dispatch). It marks the stream busy meanwhile.
 *   - queued: the run is appended to the stream, whose worker thread (started
 *     on first use) runs queued work in order. Long work (OLY_QUEUE_MIN_BYTES
 *     written), or any work in OLY_DISPATCH_ASYNC mode, returns at once with
 *     futures as outputs: arrays whose buffers wait on the run's event. Short
 *     work that finds the stream busy (another thread runs on it, or work is
 *     queued) is queued too, and the caller waits for its turn: its errors
 *     surface at the call, as inline ones do.
 * A thread already running on a device (a host function called by a program)
 * runs programs for that device inline, nested, rather than queueing behind
 * itself.
 *
 * Threads and ownership. `state` is busy (bit 0) plus twice the number of
 * queued runs; the inline path takes the stream with one compare-and-swap of
 * 0 -> busy and no lock. `owner` names the thread running on the stream, so a
 * nested run (the stream is busy, and with this very thread) is recognised. Queued runs (`task`) own a reference to their program,
 * inputs, outputs and event, dropped by the worker once the event completes.
 * A waiting thread (barrier, reader of a future) goes through the blocking
 * hook, so a worker can take the GIL to run a Python host function. No lock of
 * ours is held while a program runs.
 *
 * Failures. A queued run that fails completes its event with the failure:
 * the first wait on one of its outputs reports it (with the payload, say the
 * Python exception). A failed run with no outputs has nobody to tell, so the
 * stream keeps the failure and the next oly_effects_barrier reports it. */
#include "rt/rt.h"

#include <pthread.h>

/* A run writing at least this many bytes is queued even on an idle stream. */
#define OLY_QUEUE_MIN_BYTES ((size_t)64 << 20)

enum { BUSY = 1, QUEUED_ONE = 2 };

typedef struct task {
    struct task *next;
    oly_program *prog;          /* owned reference */
    const oly_exe *exe;         /* owned by prog */
    oly_event *event;           /* owned reference */
    int n_in, n_out;
    bool waited;                /* its caller waits on the event (OLY_DISPATCH_SYNC) */
    oly_array **arrays;         /* owned references: inputs, then outputs */
} task;

typedef struct stream {
    pthread_mutex_t mu;
    pthread_cond_t work;        /* the worker sleeps here */
    pthread_cond_t drained;     /* barriers sleep here */
    atomic_ulong state;         /* BUSY | QUEUED_ONE * queued runs */
    atomic_ulong owner;         /* pthread_self() of the thread running on it, or 0 */
    task *head, *tail;          /* under mu */
    uint64_t issued, finished;  /* queued runs, under mu */
    int drain_waiters;          /* under mu */
    bool started;               /* the worker runs; under mu */
    pthread_t worker;
    oly_failure failure;        /* of a run with no outputs; under mu */
} stream;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static stream *_Atomic streams; /* oly_device_count() of them, made once */
static int n_streams;
static atomic_int mode = -1;    /* oly_dispatch_mode; -1: not read yet */


static oly_status init_streams(void)
{
    if (atomic_load_explicit(&streams, memory_order_acquire)) return OLY_OK;
    oly__pool_install(); /* the executor may split kernels from now on */
    oly__group_install(); /* and run groups (pmap) */
    pthread_mutex_lock(&init_mu);
    if (!atomic_load(&streams)) {
        int n = oly_device_count();
        stream *s = oly__calloc((size_t)n, sizeof *s);
        for (int i = 0; s && i < n; i++) {
            pthread_mutex_init(&s[i].mu, NULL);
            pthread_cond_init(&s[i].work, NULL);
            pthread_cond_init(&s[i].drained, NULL);
            atomic_init(&s[i].state, 0);
            atomic_init(&s[i].owner, 0);
        }
        if (s) {
            n_streams = n;
            atomic_store_explicit(&streams, s, memory_order_release);
        }
    }
    pthread_mutex_unlock(&init_mu);
    return atomic_load(&streams)
               ? OLY_OK
               : oly__error(OLY_ERR_NOMEM, "out of memory making the device streams");
}

void oly__stream_install(void) { (void)init_streams(); }

/* ---------------------------------------------------------------- dispatch mode */

static int parse_mode(const char *s)
{
    if (!s || !*s || !strcmp(s, "auto")) return OLY_DISPATCH_AUTO;
    if (!strcmp(s, "async") || !strcmp(s, "always") || !strcmp(s, "1")) return OLY_DISPATCH_ASYNC;
    if (!strcmp(s, "sync") || !strcmp(s, "never") || !strcmp(s, "0")) return OLY_DISPATCH_SYNC;
    return OLY_DISPATCH_AUTO;
}

oly_dispatch_mode oly_dispatch_mode_get(void)
{
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m < 0) {
        m = parse_mode(getenv("OLYMPUS_ASYNC_DISPATCH"));
        int expected = -1;
        if (!atomic_compare_exchange_strong(&mode, &expected, m)) m = expected;
    }
    return (oly_dispatch_mode)m;
}

oly_status oly_set_dispatch_mode(oly_dispatch_mode m)
{
    if (m != OLY_DISPATCH_AUTO && m != OLY_DISPATCH_ASYNC && m != OLY_DISPATCH_SYNC)
        return oly__error(OLY_ERR_INVALID,
                          "dispatch mode must be OLY_DISPATCH_AUTO, _ASYNC or _SYNC, got %d",
                          (int)m);
    atomic_store(&mode, (int)m);
    return OLY_OK;
}

/* pthread_self() as a number; never 0 (glibc's is the thread's address). */
static unsigned long self_id(void) { return (unsigned long)pthread_self(); }

/* Whether the calling thread is running a program on s. Only this thread
 * writes its own id there, so it never sees itself by mistake. */
static bool running_here(stream *s)
{
    return atomic_load_explicit(&s->owner, memory_order_relaxed) == self_id();
}

/* ---------------------------------------------------------------- the worker */

static void task_free(task *t)
{
    for (int i = 0; i < t->n_in + t->n_out; i++) oly_array_release(t->arrays[i]);
    oly__event_release(t->event);
    oly_program_release(t->prog);
    free(t);
}

/* Takes the stream for a queued run: only when one is queued and nobody runs. */
static bool take_for_queued(stream *s)
{
    unsigned long v = atomic_load(&s->state);
    while (v >= QUEUED_ONE && !(v & BUSY))
        if (atomic_compare_exchange_weak(&s->state, &v, v | BUSY)) return true;
    return false;
}

/* Gives the stream back after an inline run; wakes the worker if runs were
 * queued meanwhile. */
static void give_back(stream *s)
{
    atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
    if (atomic_fetch_and(&s->state, ~(unsigned long)BUSY) == BUSY) return;
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

static void *worker(void *arg)
{
    stream *s = arg;
    int device = (int)(s - atomic_load(&streams));
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!take_for_queued(s)) pthread_cond_wait(&s->work, &s->mu);
        task *t = s->head;
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        atomic_fetch_sub(&s->state, QUEUED_ONE);
        atomic_store_explicit(&s->owner, self_id(), memory_order_relaxed);
        pthread_mutex_unlock(&s->mu);

        oly__error_forget();
        oly_status st = oly__exec_run_arrays(t->exe, device, t->arrays, t->arrays + t->n_in);
        oly_failure lost = {0};
        if (st != OLY_OK) {
            if (!*oly_last_error())
                oly__error(st, "a computation queued on device %d failed with %s", device,
                           oly_status_name(st));
            for (int k = 0; k < t->n_out; k++) { /* never leave stale bytes behind */
                oly_array *a = t->arrays[t->n_in + k];
                memset(a->buf->data, 0, oly_aval_nbytes(&a->aval));
            }
            if (t->n_out == 0 && !t->waited) oly__failure_keep(&lost, st); /* nobody to tell */
        }
        oly__event_complete(t->event, st);
        task_free(t); /* may run host code (releasing arrays): no lock held */

        pthread_mutex_lock(&s->mu);
        if (lost.status != OLY_OK) {
            oly_failure old = s->failure;
            s->failure = lost;
            lost = old; /* freed below, outside the lock */
        }
        s->finished++;
        atomic_store_explicit(&s->owner, 0, memory_order_relaxed);
        atomic_fetch_and(&s->state, ~(unsigned long)BUSY);
        if (s->drain_waiters) pthread_cond_broadcast(&s->drained);
        if (lost.status != OLY_OK) {
            pthread_mutex_unlock(&s->mu);
            oly__failure_clear(&lost);
            pthread_mutex_lock(&s->mu);
        }
    }
    return NULL; /* not reached: workers live as long as the process */
}

/* Appends a run; its outputs become futures of its event. */
static oly_status enqueue(stream *s, int device, oly_program *p, const oly_exe *exe,
                          oly_array *const *inputs, int n_in, oly_array *const *outputs,
                          int n_out, oly_event **event)
{
    task *t = oly__calloc(1, sizeof *t + (size_t)(n_in + n_out) * sizeof(oly_array *));
    oly_event *e = oly__event_new();
    if (!t || !e) {
        free(t);
        oly__event_release(e);
        return oly__error(OLY_ERR_NOMEM, "out of memory queueing a run on device %d", device);
    }
    t->arrays = (oly_array **)(t + 1);
    t->prog = oly_program_retain(p);
    t->exe = exe;
    t->event = e;
    t->n_in = n_in;
    t->n_out = n_out;
    t->waited = event != NULL;
    if (event) *event = oly__event_retain(e);
    for (int i = 0; i < n_in; i++) t->arrays[i] = oly_array_retain(inputs[i]);
    for (int k = 0; k < n_out; k++) {
        oly__array_set_pending(outputs[k], e);
        t->arrays[n_in + k] = oly_array_retain(outputs[k]);
    }
    pthread_mutex_lock(&s->mu);
    if (!s->started) {
        if (pthread_create(&s->worker, NULL, worker, s) != 0) {
            pthread_mutex_unlock(&s->mu);
            oly_status st = oly__error(OLY_ERR_INTERNAL,
                                       "cannot start the stream thread of device %d", device);
            oly__event_complete(e, st); /* the outputs' readers must not wait forever */
            task_free(t);
            if (event) {
                oly__event_release(*event);
                *event = NULL;
            }
            return st;
        }
        pthread_detach(s->worker);
        s->started = true;
    }
    if (s->tail) s->tail->next = t;
    else s->head = t;
    s->tail = t;
    s->issued++;
    atomic_fetch_add(&s->state, QUEUED_ONE);
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return OLY_OK;
}

/* ---------------------------------------------------------------- running */

oly_status oly_program_run(oly_program *p, int device, oly_array *const *inputs, int n_in,
                           oly_array **outputs, int n_out)
{
    if (n_out > 0 && !outputs)
        return oly__error(OLY_ERR_INVALID, "oly_program_run: outputs is NULL");
    enum { SMALL = 8 };
    oly_array *res_small[SMALL] = {0};
    oly_array **res = n_out <= SMALL ? res_small : oly__calloc((size_t)n_out, sizeof *res);
    if (!res) return OLY_ERR_NOMEM;
    const oly_exe *exe;
    oly_status st = oly__exec_begin(p, device, inputs, n_in, res, n_out, &exe);
    if (st != OLY_OK) goto done;

    if ((st = init_streams()) != OLY_OK) goto done;
    stream *s = &streams[device];
    oly_dispatch_mode m = oly_dispatch_mode_get();
    bool futures = m == OLY_DISPATCH_ASYNC ||
                   (m == OLY_DISPATCH_AUTO && exe->cost_bytes >= OLY_QUEUE_MIN_BYTES);
    unsigned long idle = 0;
    if (!futures && atomic_compare_exchange_strong(&s->state, &idle, BUSY)) {
        atomic_store_explicit(&s->owner, self_id(), memory_order_relaxed);
        st = oly__exec_run_arrays(exe, device, inputs, res);
        give_back(s);
        goto done;
    }
    if (running_here(s)) { /* nested in this thread's run on the device */
        st = oly__exec_run_arrays(exe, device, inputs, res);
        goto done;
    }
    oly_event *e = NULL;
    st = enqueue(s, device, p, exe, inputs, n_in, res, n_out, futures ? NULL : &e);
    if (st == OLY_OK && e) { /* short work on a busy stream: wait for its turn */
        st = oly__event_wait(e);
        oly__event_release(e);
    }

done:
    for (int k = 0; k < n_out; k++) {
        if (st == OLY_OK) outputs[k] = res[k];
        else oly_array_release(res[k]);
    }
    if (res != res_small) free(res);
    return st;
}

/* ---------------------------------------------------------------- barriers */

/* Waits until s has finished the work issued before the call (entering the
 * blocking hooks once it has to wait: *entered, *token for
 * oly__blocking_leave); returns with s->mu held. */
static void drain_locked(stream *s, bool *entered, void **token)
{
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->issued;
    while (s->finished < target) {
        if (!*entered) {
            pthread_mutex_unlock(&s->mu);
            *token = oly__blocking_enter(entered);
            *entered = true;
            pthread_mutex_lock(&s->mu);
            continue;
        }
        s->drain_waiters++;
        pthread_cond_wait(&s->drained, &s->mu);
        s->drain_waiters--;
    }
}

void oly__stream_drain(int device)
{
    if (init_streams() != OLY_OK) return;
    stream *s = &streams[device];
    if (running_here(s)) return; /* work behind this thread's run would wait for it */
    bool entered = false;
    void *token = NULL;
    drain_locked(s, &entered, &token);
    pthread_mutex_unlock(&s->mu);
    oly__blocking_leave(entered, token);
}

int oly__stream_running_device(void)
{
    stream *all = atomic_load_explicit(&streams, memory_order_acquire);
    for (int d = 0; all && d < n_streams; d++)
        if (running_here(&all[d])) return d;
    return -1;
}

oly_status oly_effects_barrier(void)
{
    if (!atomic_load_explicit(&streams, memory_order_acquire)) return OLY_OK; /* nothing ran */
    oly_failure f = {0};
    for (int d = 0; d < n_streams; d++) {
        stream *s = &streams[d];
        if (running_here(s)) continue; /* work behind this thread's run would wait for it */
        bool entered = false;
        void *token = NULL;
        drain_locked(s, &entered, &token);
        oly_failure got = s->failure;
        s->failure = (oly_failure){0};
        pthread_mutex_unlock(&s->mu);
        oly__blocking_leave(entered, token);
        if (got.status != OLY_OK && f.status == OLY_OK) f = got;
        else oly__failure_clear(&got);
    }
    return f.status == OLY_OK ? OLY_OK : oly__failure_report(&f);
}

/* ---------------------------------------------------------------- queued runs */

oly_status oly_program_run_queued(oly_program *p, int device, oly_array *const *inputs, int n_in,
                                  oly_array **outputs, int n_out)
{
    if (n_out > 0 && !outputs)
        return oly__error(OLY_ERR_INVALID, "oly_program_run_queued: outputs is NULL");
    oly_array **res = oly__calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *res);
    if (!res) return OLY_ERR_NOMEM;
    const oly_exe *exe;
    oly_status st = oly__exec_begin(p, device, inputs, n_in, res, n_out, &exe);
    if (st == OLY_OK) st = init_streams();
    if (st == OLY_OK) {
        stream *s = &streams[device];
        if (running_here(s)) st = oly__exec_run_arrays(exe, device, inputs, res);
        else st = enqueue(s, device, p, exe, inputs, n_in, res, n_out, NULL);
    }
    for (int k = 0; k < n_out; k++) {
        if (st == OLY_OK) outputs[k] = res[k];
        else oly_array_release(res[k]);
    }
    free(res);
    return st;
}

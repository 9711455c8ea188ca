/* outfeed.c — the outfeed: how a running program hands values to the host
 * without waiting for the host function (host_callback's taps).
 *
 * Threads and ownership. Each device has one queue and one receiver thread,
 * started by the first send to that device. A sender (whatever thread runs the
 * program) retains the tapped arrays — immutable, so no copy is made — and
 * appends a record; the receiver pops records in the order they were sent and
 * calls the record's host function with the arrays, then drops the record.
 * Records own a reference to their host function and to every array.
 *
 * Bounded: a queue holds at most `capacity` bytes (the arrays' sizes plus a
 * small per-record charge). A sender that would overflow it waits until the
 * receiver frees room (backpressure); nothing is dropped. A record larger than
 * the capacity is admitted when the queue is empty, so it cannot wait forever.
 * The receiver itself never waits for room (a tap function that taps again
 * would wait for itself). While waiting, a sender calls the blocking hooks,
 * which the Python extension uses to release the GIL the receiver needs.
 *
 * Failures: a host function that fails does not stop the receiver; the last
 * failure (message and payload) is kept, and the next oly_outfeed_barrier
 * reports it once. oly_outfeed_barrier waits until every record sent before it,
 * to any device and from any thread, has been consumed.
 *
 * Lock order: a queue's mutex, then `failure_mu`; never the other way. No lock
 * is held while a host function runs or while a blocking hook runs. */
#include "internal.h"

#include <pthread.h>

enum { RECORD_CHARGE = 64 }; /* bytes charged per record besides its arrays */
/* Consumed records go back to their queue (up to SPARE_MAX of them) for the
 * next sends: a steady stream of taps allocates no records. Each has room for
 * at least RECORD_MIN_CAP bytes, enough for a few arrays. */
enum { SPARE_MAX = 1024, RECORD_MIN_CAP = 512 };

typedef struct record {
    struct record *next;
    size_t cap;                 /* bytes allocated for the record and its tables */
    oly_host_fn *fn;
    const char *transforms;
    int n;
    size_t bytes;
    oly_array **arrays;
    const void **data;
    oly_aval *avals;
} record;

typedef struct outq {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a record was added, consumed, or stop was asked */
    record *head, *tail;
    record *spare;          /* consumed records kept for reuse */
    int n_spare;
    size_t bytes, peak;
    uint64_t sent, done;
    bool started, stopping;
    bool receiver_waits;    /* the receiver sleeps on `changed` */
    int senders_waiting;    /* senders sleeping on `changed` for room */
    int barriers_waiting;   /* barriers sleeping on `changed` */
    uint64_t wake_at;       /* the smallest `done` a sleeping barrier waits for */
    pthread_t thread;
} outq;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static outq *_Atomic queues; /* oly_device_count() of them, made once */
static int n_queues;
static _Atomic size_t capacity = 256000000;
static _Thread_local outq *receiving; /* the queue whose receiver this thread is */

static pthread_mutex_t failure_mu = PTHREAD_MUTEX_INITIALIZER;
static oly_failure failure; /* under failure_mu */

static void *(*_Atomic host_acquire)(void);
static void (*_Atomic host_release)(void *);

void oly_set_host_lock_hooks(void *(*acquire)(void), void (*release)(void *))
{
    atomic_store(&host_acquire, acquire);
    atomic_store(&host_release, release);
}

/* Makes the queues on first use; a failed allocation is retried next time. */
static oly_status init_queues(void)
{
    if (atomic_load(&queues)) return OLY_OK;
    pthread_mutex_lock(&init_mu);
    if (!atomic_load(&queues)) {
        int n = oly_device_count();
        outq *q = oly__calloc((size_t)n, sizeof *q);
        for (int i = 0; q && i < n; i++) {
            pthread_mutex_init(&q[i].mu, NULL);
            pthread_cond_init(&q[i].changed, NULL);
        }
        if (q) {
            n_queues = n;
            atomic_store(&queues, q);
        }
    }
    pthread_mutex_unlock(&init_mu);
    return atomic_load(&queues)
               ? OLY_OK
               : oly__error(OLY_ERR_NOMEM, "outfeed: out of memory making the device queues");
}

static oly_status get_queue(int device, outq **out)
{
    OLY_TRY(init_queues());
    if (device < 0 || device >= n_queues)
        return oly__error(OLY_ERR_INVALID, "outfeed: device %d out of range [0, %d)", device,
                          n_queues);
    *out = &queues[device];
    return OLY_OK;
}

/* Waits on q->changed with q->mu held; the first wait of a caller leaves the
 * blocking hook (releasing, say, the GIL) with q->mu dropped meanwhile. *token
 * starts as NULL and *entered as false; call oly__blocking_leave after unlocking.
 * barrier_target: 0 for a sender waiting for room, else the `done` count the
 * waiting barrier needs. */
static void wait_changed(outq *q, bool *entered, void **token, uint64_t barrier_target)
{
    if (!*entered) {
        pthread_mutex_unlock(&q->mu);
        *token = oly__blocking_enter(entered);
        *entered = true; /* asked once, hook or not */
        pthread_mutex_lock(&q->mu);
        return; /* the lock was dropped: the caller re-checks its condition first */
    }
    if (barrier_target) {
        /* The receiver wakes barriers only when `done` reaches wake_at, not
         * per record; a stale (reached) wake_at is replaced. */
        if (!q->barriers_waiting || q->wake_at <= q->done || barrier_target < q->wake_at)
            q->wake_at = barrier_target;
        q->barriers_waiting++;
        pthread_cond_wait(&q->changed, &q->mu);
        q->barriers_waiting--;
    } else {
        q->senders_waiting++;
        pthread_cond_wait(&q->changed, &q->mu);
        q->senders_waiting--;
    }
}

/* Drops what r holds (its arrays, its host function); r itself stays. */
static void record_clear(record *r)
{
    for (int i = 0; i < r->n; i++) oly_array_release(r->arrays[i]);
    oly_host_fn_release(r->fn);
    r->n = 0;
    r->fn = NULL;
}

/* Keeps a cleared record for reuse, or frees it; q->mu held. */
static void record_recycle(outq *q, record *r)
{
    if (q->n_spare >= SPARE_MAX) {
        free(r);
        return;
    }
    r->next = q->spare;
    q->spare = r;
    q->n_spare++;
}

/* Keeps the failure the calling thread's error state describes. */
static void keep_failure(oly_status st)
{
    oly_failure f = {0};
    oly__failure_keep(&f, st); /* outside the lock: freeing a payload may run host code */
    pthread_mutex_lock(&failure_mu);
    oly_failure old = failure;
    failure = f;
    pthread_mutex_unlock(&failure_mu);
    oly__failure_clear(&old);
}

static void consume(int device, record *r)
{
    oly_callback_frame frame = {
        .n_args = r->n,
        .args = r->data,
        .arg_avals = r->avals,
        .arg_arrays = r->arrays,
        .device = device,
        .kind = "outside_call",
        .transforms = r->transforms,
    };
    oly__error_forget();
    oly_status st = r->fn->call(r->fn->c.user, &frame);
    if (st != OLY_OK) {
        if (!*oly_last_error())
            oly__error(st, "outside_call: tap function %s failed with %s", oly_host_fn_name(r->fn),
                       oly_status_name(st));
        keep_failure(st);
    }
}

/* The receiver drains in batches: it takes the host lock (the GIL) once for
 * every record already queued, up to BATCH, instead of once per record. */
enum { BATCH = 4096 };

static void *receiver(void *arg)
{
    outq *q = arg;
    int device = (int)(q - queues);
    receiving = q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stopping) {
            q->receiver_waits = true;
            pthread_cond_wait(&q->changed, &q->mu);
            q->receiver_waits = false;
        }
        record *r = q->head;
        if (!r) break; /* stopping, and nothing left */
        pthread_mutex_unlock(&q->mu);
        void *(*acquire)(void) = atomic_load(&host_acquire);
        void *token = acquire ? acquire() : NULL;
        record *used = NULL; /* the last record consumed, cleared, to recycle */
        for (int k = 0; r && k < BATCH; k++) {
            consume(device, r);
            pthread_mutex_lock(&q->mu);
            if (used) record_recycle(q, used);
            q->head = r->next; /* r is still the head: only the receiver pops */
            if (!q->head) q->tail = NULL;
            q->bytes -= r->bytes;
            q->done++;
            /* a wake costs a syscall: only for a sender waiting for room, or a
             * barrier whose taps are all consumed */
            if (q->senders_waiting || (q->barriers_waiting && q->done >= q->wake_at))
                pthread_cond_broadcast(&q->changed);
            record *next = q->head;
            pthread_mutex_unlock(&q->mu);
            record_clear(r); /* may run host code (a release): no queue lock held */
            used = r;
            r = next;
        }
        void (*release)(void *) = atomic_load(&host_release);
        if (acquire && release) release(token);
        pthread_mutex_lock(&q->mu);
        if (used) record_recycle(q, used);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* A record for fn(arrays): a spare of q's when one is big enough, else new. */
static oly_status record_new(outq *q, oly_host_fn *fn, const char *transforms,
                             oly_array *const *arrays, int n, record **out)
{
    size_t tlen = transforms ? strlen(transforms) + 1 : 0;
    size_t size = sizeof(record) + (size_t)n * (sizeof(oly_array *) + sizeof(void *) +
                                                sizeof(oly_aval)) + tlen;
    record *r = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->spare && q->spare->cap >= size) {
        r = q->spare;
        q->spare = r->next;
        q->n_spare--;
    }
    pthread_mutex_unlock(&q->mu);
    if (!r) {
        size_t cap = size < RECORD_MIN_CAP ? RECORD_MIN_CAP : size;
        if (!(r = oly__malloc(cap)))
            return oly__error(OLY_ERR_NOMEM, "outfeed: out of memory for a record of %d arrays",
                              n);
        r->cap = cap;
    }
    r->next = NULL;
    r->transforms = NULL;
    r->avals = (oly_aval *)(r + 1);
    r->arrays = (oly_array **)(r->avals + n);
    r->data = (const void **)(r->arrays + n);
    r->n = n;
    r->bytes = RECORD_CHARGE;
    for (int i = 0; i < n; i++) {
        r->arrays[i] = oly_array_retain(arrays[i]);
        r->data[i] = oly_array_data(arrays[i]);
        r->avals[i] = *oly_array_aval(arrays[i]);
        r->bytes += oly_aval_nbytes(&r->avals[i]);
    }
    if (tlen) {
        char *t = (char *)(r->data + n);
        memcpy(t, transforms, tlen);
        r->transforms = t;
    }
    r->fn = oly_host_fn_retain(fn);
    *out = r;
    return OLY_OK;
}

oly_status oly_outfeed_send(int device, oly_host_fn *fn, const char *transforms,
                            oly_array *const *arrays, int n)
{
    if (!fn) return oly__error(OLY_ERR_INVALID, "oly_outfeed_send: host function is NULL");
    if (n < 0 || (n > 0 && !arrays))
        return oly__error(OLY_ERR_INVALID, "oly_outfeed_send: %d arrays at %p", n, (void *)arrays);
    for (int i = 0; i < n; i++)
        if (!arrays[i]) return oly__error(OLY_ERR_INVALID, "oly_outfeed_send: array %d is NULL", i);
    outq *q;
    OLY_TRY(get_queue(device, &q));
    record *r = NULL;
    OLY_TRY(record_new(q, fn, transforms, arrays, n, &r));
    size_t cap = atomic_load(&capacity);
    bool entered = false;
    void *token = NULL;
    oly_status st = OLY_OK;
    pthread_mutex_lock(&q->mu);
    if (!q->started) {
        q->stopping = false;
        if (pthread_create(&q->thread, NULL, receiver, q) != 0) {
            st = oly__error(OLY_ERR_INTERNAL, "outfeed: cannot start the receiver of device %d",
                            device);
        } else {
            q->started = true;
        }
    }
    while (st == OLY_OK && q->head && q->bytes + r->bytes > cap && receiving != q)
        wait_changed(q, &entered, &token, 0);
    if (st == OLY_OK) {
        if (q->tail) q->tail->next = r;
        else q->head = r;
        q->tail = r;
        q->bytes += r->bytes;
        if (q->bytes > q->peak) q->peak = q->bytes;
        q->sent++;
        if (q->receiver_waits) pthread_cond_broadcast(&q->changed);
    }
    pthread_mutex_unlock(&q->mu);
    oly__blocking_leave(entered, token);
    if (st != OLY_OK) {
        record_clear(r);
        free(r);
    }
    return st;
}

oly_status oly_outfeed_barrier(void)
{
    if (init_queues() != OLY_OK) {
        oly__error_forget(); /* no queue: nothing was sent */
        return OLY_OK;
    }
    for (int d = 0; d < n_queues; d++) {
        outq *q = &queues[d];
        bool entered = false;
        void *token = NULL;
        pthread_mutex_lock(&q->mu);
        uint64_t target = q->sent;
        bool self = receiving == q && q->done < target;
        while (!self && q->done < target) wait_changed(q, &entered, &token, target);
        pthread_mutex_unlock(&q->mu);
        oly__blocking_leave(entered, token);
        if (self)
            return oly__error(OLY_ERR_INVALID,
                              "barrier_wait: called from a tap function on device %d's receiver "
                              "while taps sent before it wait on that receiver; it would wait "
                              "for itself",
                              d);
    }
    pthread_mutex_lock(&failure_mu);
    oly_failure f = failure;
    failure = (oly_failure){0};
    pthread_mutex_unlock(&failure_mu);
    if (f.status == OLY_OK) return OLY_OK;
    return oly__failure_report(&f);
}

void oly_outfeed_stop(void)
{
    if (init_queues() != OLY_OK) return; /* no queue: no receiver */
    for (int d = 0; d < n_queues; d++) {
        outq *q = &queues[d];
        if (receiving == q) continue; /* a receiver cannot join itself */
        bool entered = false;
        void *token = NULL;
        pthread_mutex_lock(&q->mu);
        bool join = q->started && !q->stopping;
        if (join) {
            q->stopping = true;
            pthread_cond_broadcast(&q->changed);
        }
        pthread_mutex_unlock(&q->mu);
        if (!join) continue;
        token = oly__blocking_enter(&entered);
        pthread_join(q->thread, NULL);
        oly__blocking_leave(entered, token);
        pthread_mutex_lock(&q->mu);
        q->started = false;
        q->stopping = false;
        pthread_mutex_unlock(&q->mu);
    }
}

oly_status oly_outfeed_set_capacity(size_t bytes)
{
    if (bytes == 0) return oly__error(OLY_ERR_INVALID, "outfeed: capacity must be at least 1 byte, got 0");
    atomic_store(&capacity, bytes);
    return OLY_OK;
}

size_t oly_outfeed_capacity(void) { return atomic_load(&capacity); }

size_t oly_outfeed_peak_bytes(int device)
{
    outq *q;
    if (get_queue(device, &q) != OLY_OK) return 0;
    pthread_mutex_lock(&q->mu);
    size_t p = q->peak;
    pthread_mutex_unlock(&q->mu);
    return p;
}

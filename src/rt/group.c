/* group.c — group runs (pmap's launch): one executable run once per member of
 * a device mesh, all members at the same time, each on its member's device.
 *
 * Where members run. The calling thread plays one member (the one on the
 * device it already runs on, if any, else member 0); every other member runs
 * on a member thread of its own. Member threads are a process-wide set that
 * grows so that every queued member has an idle thread to take it: a member
 * never waits behind work queued on a device stream (that work may itself
 * wait for the group: a pmap kernel inside a run on device 0's stream, two
 * threads launching groups at once, a group launched from a member), so no
 * launch can deadlock on another. Members do not take their device's stream:
 * they run beside it, without the executor's per-device spare state
 * (oly_run.shared). A top-level launch first waits for the runs already queued
 * on its devices' streams, and returns only when every member has finished,
 * so effects stay ordered per device for the issuing thread: earlier work
 * first, the members' effects in program order, later work after.
 *
 * Threads: one mutex (mu) guards the job queue, the idle count and every
 * launch's count of members still running; no lock is held while a member
 * runs. Member threads live as long as the process (as the stream workers);
 * an idle one sleeps on `work`. The launcher waits through the blocking hooks
 * (the GIL is released), so a member can run a Python host function.
 *
 * A mesh that spans processes (global device ids, olympus.distributed) is
 * launched in every process; each runs only its own members, and the buffers
 * hold those members alone, in member order. */
#include "rt/rt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef struct launch {
    int running;                /* members not finished; under mu */
} launch;

typedef struct job {
    struct job *next;
    const oly_run *parent;      /* borrowed: the launching run, or NULL */
    const oly_exe *exe;         /* borrowed */
    oly_group *g;               /* borrowed */
    int member;
    const void *const *in;      /* this member's inputs */
    oly_array *const *in_arrays;/* or NULL */
    void *const *out;
    launch *L;                  /* borrowed: the launcher waits for it */
} job;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static job *head, *tail;        /* under mu */
/* Queued jobs, and member threads not running a member (a new thread counts
 * from its creation): idle >= queued after every post, so each queued member
 * has a thread of its own. Under mu. */
static int queued, idle;

static void run_member(const job *j)
{
    oly__error_forget();
    oly_status st = oly__exec_run_member(j->parent, j->exe, j->g, j->member, j->in, j->in_arrays,
                                         j->out);
    if (st != OLY_OK) {
        if (!*oly_last_error())
            oly__error(st, "member %d failed with %s", j->member, oly_status_name(st));
        oly__group_fail(j->g, j->member, st);
    } else {
        oly__group_leave(j->g, j->member);
    }
}

static void *member_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!head) pthread_cond_wait(&work, &mu);
        job *j = head;
        head = j->next;
        if (!head) tail = NULL;
        queued--;
        idle--;
        pthread_mutex_unlock(&mu);
        run_member(j);
        pthread_mutex_lock(&mu);
        if (--j->L->running == 0) pthread_cond_broadcast(&done);
        idle++;
    }
    return NULL; /* not reached: member threads live as long as the process */
}

/* A member run longer than this makes the next launches of its executable
 * wake the member threads at once; the last such executable (only a hint:
 * a freed executable's address reused costs a needless wake-up, nothing
 * more). */
#define SOLO_MAX_NS 50000
static _Atomic(const oly_exe *) long_exe;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether p or a program nested in it holds a collective (a row naming an
 * axis): its members then rendezvous and must run at the same time. */
static bool has_collective(const oly_program *p)
{
    for (int k = 0; k < p->n_eqn; k++) {
        const oly_eqn *e = &p->eqn[k];
        if (e->prim->names_axis) return true;
        for (int j = 0; j < e->n_sub; j++)
            if (has_collective(e->sub[j])) return true;
    }
    return false;
}

/* Takes L's first job still queued off the queue (mu held), or NULL. */
static job *take_one(const launch *L)
{
    job *prev = NULL;
    for (job *j = head; j; prev = j, j = j->next) {
        if (j->L != L) continue;
        if (prev) prev->next = j->next;
        else head = j->next;
        if (tail == j) tail = prev;
        queued--;
        return j;
    }
    return NULL;
}

/* Takes L's jobs still queued off the queue (mu held); returns how many. */
static int unqueue(const launch *L)
{
    int n = 0;
    job **pp = &head;
    tail = NULL;
    while (*pp) {
        if ((*pp)->L == L) {
            *pp = (*pp)->next;
            queued--;
            n++;
        } else {
            tail = *pp;
            pp = &(*pp)->next;
        }
    }
    return n;
}

static oly_status launch_group(const oly_run *parent, const oly_exe *exe, oly_group *g,
                               const void *const *in, oly_array *const *in_arrays,
                               void *const *out)
{
    int n = oly__group_local_size(g), n_in = exe->prog->n_in, n_out = exe->prog->n_out;
    int self = 0, here = parent ? parent->device : oly__stream_running_device();
    for (int i = 0; i < n; i++)
        if (oly__group_device(g, oly__group_local_member(g, i)) == here) {
            self = i;
            break;
        }
    job few[8];                 /* small groups allocate nothing */
    job *jobs = n - 1 <= (int)OLY_ARRAY_LEN(few) ? few
                : oly__calloc((size_t)n - 1, sizeof *jobs);
    if (!jobs) return OLY_ERR_NOMEM;
    launch L = {.running = n - 1};
    for (int k = 0, i = 0; k < n; k++) { /* k: the k-th local member */
        if (k == self) continue;
        jobs[i++] = (job){.parent = parent, .exe = exe, .g = g,
                          .member = oly__group_local_member(g, k),
                          .in = in + (size_t)k * n_in,
                          .in_arrays = in_arrays ? in_arrays + (size_t)k * n_in : NULL,
                          .out = out + (size_t)k * n_out, .L = &L};
    }
    /* A body without collectives whose last launch was short is run by the
     * launcher alone unless a member thread is already awake (see below). */
    bool solo = n > 1 && !has_collective(exe->prog);
    bool wake = !solo || atomic_load_explicit(&long_exe, memory_order_relaxed) == exe;
    bool no_thread = false;
    pthread_mutex_lock(&mu);
    for (int k = 0; k < n - 1; k++) {
        if (tail) tail->next = &jobs[k];
        else head = &jobs[k];
        tail = &jobs[k];
    }
    queued += n - 1;
    while (idle < queued) {
        pthread_t t;
        if (pthread_create(&t, NULL, member_thread, NULL) != 0) {
            no_thread = true;
            break;
        }
        pthread_detach(t);
        idle++;
    }
    if (no_thread) L.running -= unqueue(&L); /* the others may have started */
    if (n > 1 && wake) pthread_cond_broadcast(&work);
    pthread_mutex_unlock(&mu);

    const job me = {.parent = parent, .exe = exe, .g = g,
                    .member = n ? oly__group_local_member(g, self) : 0,
                    .in = in + (size_t)self * n_in,
                    .in_arrays = in_arrays ? in_arrays + (size_t)self * n_in : NULL,
                    .out = out + (size_t)self * n_out, .L = &L};
    if (no_thread) {
        oly__error(OLY_ERR_INTERNAL, "cannot start a thread for a member of a group run");
        oly__group_fail(g, me.member, OLY_ERR_INTERNAL);
    } else {
        uint64_t t0 = solo ? now_ns() : 0;
        run_member(&me);
        if (solo && !wake && now_ns() - t0 > SOLO_MAX_NS) {
            /* long after all: the member threads take their share */
            atomic_store_explicit(&long_exe, exe, memory_order_relaxed);
            pthread_mutex_lock(&mu);
            pthread_cond_broadcast(&work);
            pthread_mutex_unlock(&mu);
        } else if (solo && wake && now_ns() - t0 <= SOLO_MAX_NS) {
            atomic_store_explicit(&long_exe, NULL, memory_order_relaxed);
        }
    }
    /* Members that never meet need not run at the same time: the launcher
     * runs those no member thread has taken yet itself (for a small body,
     * all of them: a woken thread would start 50-150 us later). */
    while (solo && !no_thread) {
        pthread_mutex_lock(&mu);
        job *j = take_one(&L);
        pthread_mutex_unlock(&mu);
        if (!j) break;
        run_member(j);
        pthread_mutex_lock(&mu);
        L.running--;
        pthread_mutex_unlock(&mu);
    }

    bool entered = false;
    void *token = NULL;
    pthread_mutex_lock(&mu);
    while (L.running > 0) {
        if (!entered) {
            pthread_mutex_unlock(&mu);
            token = oly__blocking_enter(&entered);
            entered = true;
            pthread_mutex_lock(&mu);
            continue;
        }
        pthread_cond_wait(&done, &mu);
    }
    pthread_mutex_unlock(&mu);
    oly__blocking_leave(entered, token);
    if (jobs != few) free(jobs);
    return oly__group_report(g);
}

void oly__group_install(void) { oly__exec_set_group(launch_group); }

/* ---------------------------------------------------------------- the public entry */

oly_status oly_program_run_group(oly_program *p, const oly_mesh *mesh, oly_array *const *inputs,
                                 int n_in, oly_array **outputs, int n_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_run_group: program is NULL");
    if (n_out > 0 && !outputs)
        return oly__error(OLY_ERR_INVALID, "oly_program_run_group: outputs is NULL");
    if (n_in > 0 && !inputs)
        return oly__error(OLY_ERR_INVALID, "oly_program_run_group: inputs is NULL");
    oly_group *g;
    OLY_TRY(oly__group_new(mesh, &g));
    int n = oly__group_local_size(g); /* this process's members */
    size_t ni = (size_t)n * (size_t)(n_in > 0 ? n_in : 0), no = (size_t)n * (size_t)(n_out > 0 ? n_out : 0);
    oly_array **res = oly__calloc(no + 1, sizeof *res);
    const void **in = oly__calloc(ni + 1, sizeof *in);
    void **out = oly__calloc(no + 1, sizeof *out);
    oly_status st = OLY_ERR_NOMEM;
    if (!res || !in || !out) goto done;
    oly__stream_install();
    const oly_exe *exe = NULL;
    for (int k = 0; k < n; k++) {
        st = oly__exec_begin(p, oly__group_device(g, oly__group_local_member(g, k)), inputs + (size_t)k * n_in, n_in,
                             res + (size_t)k * n_out, n_out, &exe);
        if (st != OLY_OK) {
            oly__error_prefix(st, "oly_program_run_group: member %d", k);
            goto done;
        }
    }
    for (size_t i = 0; i < ni; i++) {
        if (inputs[i]->buf->pending && (st = oly_array_wait(inputs[i])) != OLY_OK) {
            oly__error_prefix(st, "member %d's input %d was computed by a computation that failed",
                              (int)(i / (size_t)n_in), (int)(i % (size_t)n_in));
            goto done;
        }
        in[i] = inputs[i]->buf->data;
    }
    for (size_t i = 0; i < no; i++) out[i] = res[i]->buf->data;
    /* earlier work on the members' devices first (ordered effects) */
    for (int k = 0; k < n; k++) oly__stream_drain(oly__group_device(g, oly__group_local_member(g, k)));
    st = launch_group(NULL, exe, g, in, inputs, out);

done:
    for (size_t i = 0; i < no && res; i++) {
        if (st == OLY_OK) outputs[i] = res[i];
        else oly_array_release(res[i]);
    }
    free(res);
    free(in);
    free((void *)out);
    oly__group_free(g);
    return st;
}

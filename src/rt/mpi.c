/* mpi.c — collectives between processes on MPI (src/rt/mpi.h).
 *
 * Design. One collective at a time per process (`lock`). Each collective is
 * two phases on two duplicates of MPI_COMM_WORLD:
 *   1. arrival, on `ctrl`: a dissemination barrier of small point-to-point
 *      messages (ceil(log2 P) rounds) that also carries the collective's
 *      identity (sequence number, kind, bytes). Its requests are polled
 *      together with a receive posted at init for failure notices, against a
 *      deadline (OLYMPUS_COLLECTIVE_TIMEOUT): a notice or the deadline cancels
 *      the pending receive (cancellable, unlike a nonblocking collective), so
 *      nothing is left in flight and MPI_Finalize stays possible.
 *   2. data, on `data`: the blocking MPI call (MPI_Allreduce, Allgather,
 *      Alltoall, Isend/Irecv pairs) with OpenMPI's tuned algorithms. Every
 *      process has arrived, so it completes unless a process dies, and then
 *      mpirun ends the job.
 * Failure notices: oly__mpi_fail sends one message to every peer (eager,
 * nonblocking, freed at once) and poisons this process; the first notice
 * received poisons it too. A poisoned process fails every collective at once
 * with the first message. MPI_THREAD_MULTIPLE: oly__mpi_fail may come from
 * any thread while the leader thread polls.
 * Lock order: `lock` (collectives, init, shutdown) before `fail_lock` (the
 * poison message); oly__mpi_fail takes only `fail_lock`. */
#include "rt/mpi.h"

#include <pthread.h>

#define NO_MPI_MSG "olympus was built without MPI (mpicc was not found when it was built: install " \
                   "libopenmpi-dev and openmpi-bin, then rebuild)"

#ifndef OLY_HAVE_MPI

bool oly__mpi_available(void) { return false; }
oly_status oly__mpi_init(void) { return oly__error(OLY_ERR_UNSUPPORTED, NO_MPI_MSG); }
oly_status oly__mpi_shutdown(void) { return OLY_OK; }
bool oly__mpi_active(void) { return false; }
int oly__mpi_rank(void) { return 0; }
int oly__mpi_size(void) { return 1; }
oly_status oly__mpi_allreduce(const void *send, void *recv, int64_t count, oly_dtype t,
                              oly_collective_op op, const char *what)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: " NO_MPI_MSG, what ? what : "allreduce");
}
oly_status oly__mpi_allgather(const void *send, void *recv, int64_t bytes, const char *what)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: " NO_MPI_MSG, what ? what : "allgather");
}
oly_status oly__mpi_alltoall(const void *send, void *recv, int64_t block_bytes, const char *what)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: " NO_MPI_MSG, what ? what : "alltoall");
}
oly_status oly__mpi_ppermute(const void *send, void *recv, int64_t bytes, const int (*pairs)[2],
                             int n_pairs, const char *what)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: " NO_MPI_MSG, what ? what : "ppermute");
}
oly_status oly__mpi_barrier(const char *what)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: " NO_MPI_MSG, what ? what : "barrier");
}
void oly__mpi_fail(const char *message) {}

#else /* OLY_HAVE_MPI */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <time.h>

#include <mpi.h>

enum { TAG_FAIL = 1, TAG_DATA = 2, TAG_ARRIVE = 16 /* + round */ };
enum { NOTICE_BYTES = 512 };
enum kind { K_ALLREDUCE = 1, K_ALLGATHER, K_ALLTOALL, K_PPERMUTE, K_BARRIER };
static const char *const kind_names[] = {"?", "allreduce", "allgather", "alltoall", "ppermute",
                                         "barrier"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum { OFF, ON, DOWN } state; /* under lock; `active` mirrors ON for readers */
static atomic_bool active;
static atomic_int my_rank, n_procs = 1;
static bool we_initialised; /* olympus called MPI_Init (else someone else owns MPI) */
static MPI_Comm ctrl = MPI_COMM_NULL, data = MPI_COMM_NULL;
static double timeout_s = 300;
static int64_t seq; /* collectives begun here; under lock */
static MPI_Request notice_req = MPI_REQUEST_NULL; /* the receive for failure notices */
static char notice_in[NOTICE_BYTES];
static MPI_Op nan_ops[4][2]; /* [f16, bf16, f32, f64][max, min]; sums of f16 / bf16 below */
static MPI_Op half_sum[2];   /* [f16, bf16] */

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool poisoned;
static char poison[NOTICE_BYTES];      /* the first failure; under fail_lock, then frozen */
static char notice_out[NOTICE_BYTES];  /* the notice this process sent (lives for its sends) */

bool oly__mpi_available(void) { return true; }
bool oly__mpi_active(void) { return atomic_load(&active); }
int oly__mpi_rank(void) { return atomic_load(&active) ? atomic_load(&my_rank) : 0; }
int oly__mpi_size(void) { return atomic_load(&active) ? atomic_load(&n_procs) : 1; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An MPI failure as a status: "<what>: MPI_Xxx failed: <MPI's text>". */
static oly_status mpi_error(int rc, const char *what, const char *call)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return oly__error(OLY_ERR_DISTRIBUTED, "%s across processes: %s failed: %s", what, call, text);
}

/* Records the first failure (message as peers will read it); true when this
 * call was the first. */
static bool set_poison(const char *message)
{
    pthread_mutex_lock(&fail_lock);
    bool first = !atomic_load(&poisoned);
    if (first) {
        snprintf(poison, sizeof poison, "%s", message);
        atomic_store(&poisoned, true);
    }
    pthread_mutex_unlock(&fail_lock);
    return first;
}

/* Tells every peer (message already in notice_out). Nonblocking sends of a
 * small message: eager, so they complete without the peer; freed at once. */
static void send_notices(void)
{
    int n = atomic_load(&n_procs), me = atomic_load(&my_rank);
    int len = (int)strlen(notice_out) + 1;
    for (int r = 0; r < n; r++) {
        if (r == me) continue;
        MPI_Request req;
        if (MPI_Isend(notice_out, len, MPI_CHAR, r, TAG_FAIL, ctrl, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

void oly__mpi_fail(const char *message)
{
    if (!atomic_load(&active)) return;
    char text[NOTICE_BYTES];
    snprintf(text, sizeof text, "process %d failed: %s", atomic_load(&my_rank),
             message && *message ? message : "(no message)");
    if (!set_poison(text)) return; /* already failed: peers were told, or told us */
    snprintf(notice_out, sizeof notice_out, "%s", text);
    send_notices();
}

static oly_status poisoned_error(const char *what, bool earlier)
{
    return oly__error(OLY_ERR_DISTRIBUTED, "%s across processes %s: %s", what,
                      earlier ? "refused: the process group failed earlier" : "aborted", poison);
}

/* A notice arrived? Then poison with its text. Caller holds lock. */
static void check_notice(void)
{
    if (notice_req == MPI_REQUEST_NULL) return;
    int got = 0;
    MPI_Test(&notice_req, &got, MPI_STATUS_IGNORE);
    if (got) {
        notice_in[NOTICE_BYTES - 1] = '\0';
        set_poison(notice_in); /* notice_req is MPI_REQUEST_NULL now: no more are read */
    }
}

static void cancel(MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    MPI_Cancel(req);
    MPI_Wait(req, MPI_STATUS_IGNORE);
}

/* Waits for *req (a receive) polling notices and the deadline; on failure the
 * request is cancelled and the group poisoned (a timeout tells the peers). */
static oly_status wait_polled(MPI_Request *req, double deadline, const char *what, int peer)
{
    for (long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_error(rc, what, "MPI_Test");
        if (done) return OLY_OK;
        check_notice();
        if (atomic_load(&poisoned)) {
            cancel(req);
            return poisoned_error(what, false);
        }
        if (now() > deadline) {
            cancel(req);
            char text[NOTICE_BYTES];
            snprintf(text, sizeof text,
                     "process %d timed out after %g s (OLYMPUS_COLLECTIVE_TIMEOUT) waiting for "
                     "process %d at collective #%lld (%s)",
                     atomic_load(&my_rank), timeout_s, peer, (long long)seq, what);
            if (set_poison(text)) {
                snprintf(notice_out, sizeof notice_out, "%s", text);
                send_notices();
            }
            return poisoned_error(what, false);
        }
        /* Spin briefly (a peer usually arrives within microseconds), then
         * sleep in growing steps up to 1 ms so a waiting process leaves its
         * core to the ones still computing. */
        if (spin > 2000) {
            long ns = spin > 12000 ? 1000000 : 50000;
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
        }
    }
}

/* Phase 1: every process is at collective #seq of this kind and size. */
static oly_status arrive(enum kind k, int64_t bytes, const char *what)
{
    if (atomic_load(&poisoned)) return poisoned_error(what, true);
    check_notice();
    if (atomic_load(&poisoned)) return poisoned_error(what, true);
    seq++;
    int n = atomic_load(&n_procs), me = atomic_load(&my_rank);
    double deadline = now() + timeout_s;
    int64_t mine[3] = {seq, k, bytes}, theirs[3];
    for (int round = 0, dist = 1; dist < n; round++, dist *= 2) {
        int to = (me + dist) % n, from = (me - dist + n) % n;
        MPI_Request rreq, sreq;
        int rc = MPI_Irecv(theirs, 3, MPI_INT64_T, from, TAG_ARRIVE + round, ctrl, &rreq);
        if (rc != MPI_SUCCESS) return mpi_error(rc, what, "MPI_Irecv");
        rc = MPI_Isend(mine, 3, MPI_INT64_T, to, TAG_ARRIVE + round, ctrl, &sreq);
        if (rc != MPI_SUCCESS) {
            cancel(&rreq);
            return mpi_error(rc, what, "MPI_Isend");
        }
        oly_status st = wait_polled(&rreq, deadline, what, from);
        if (st != OLY_OK) {
            MPI_Request_free(&sreq);
            return st;
        }
        MPI_Wait(&sreq, MPI_STATUS_IGNORE); /* 24 bytes: eager, already gone */
        if (theirs[0] != mine[0] || theirs[1] != mine[1] || theirs[2] != mine[2]) {
            char text[NOTICE_BYTES];
            unsigned tk = (unsigned)theirs[1] < 6 ? (unsigned)theirs[1] : 0;
            snprintf(text, sizeof text,
                     "collective mismatch: process %d is at collective #%lld, %s of %lld bytes "
                     "(%s); process %d is at collective #%lld, %s of %lld bytes",
                     me, (long long)mine[0], kind_names[k], (long long)mine[2], what, from,
                     (long long)theirs[0], kind_names[tk], (long long)theirs[2]);
            if (set_poison(text)) {
                snprintf(notice_out, sizeof notice_out, "%s", text);
                send_notices();
            }
            return poisoned_error(what, false);
        }
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- user ops */

/* max / min that propagate NaN (as reduce_max / reduce_min and JAX's pmax),
 * and sums of the 16-bit floats MPI has no type for (through float). */
#define NAN_OPS(NAME, T, LOAD, CMP)                                                \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt)                   \
    {                                                                                     \
        const T *a = in;                                                                  \
        T *b = inout;                                                                     \
        for (int i = 0; i < *len; i++) {                                                  \
            double x = LOAD(a[i]), y = LOAD(b[i]);                                        \
            if (isnan(x) || (!isnan(y) && x CMP y)) b[i] = a[i];                          \
        }                                                                                 \
    }
#define ID(x) ((double)(x))
NAN_OPS(max_f16, uint16_t, oly__half_to_float, >)
NAN_OPS(min_f16, uint16_t, oly__half_to_float, <)
NAN_OPS(max_bf16, uint16_t, oly__bf16_to_float, >)
NAN_OPS(min_bf16, uint16_t, oly__bf16_to_float, <)
NAN_OPS(max_f32, float, ID, >)
NAN_OPS(min_f32, float, ID, <)
NAN_OPS(max_f64, double, ID, >)
NAN_OPS(min_f64, double, ID, <)

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = oly__float_to_half(oly__half_to_float(a[i]) + oly__half_to_float(b[i]));
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = oly__float_to_bf16(oly__bf16_to_float(a[i]) + oly__bf16_to_float(b[i]));
}

static int make_ops(void)
{
    MPI_User_function *fns[4][2] = {{max_f16, min_f16}, {max_bf16, min_bf16},
                                    {max_f32, min_f32}, {max_f64, min_f64}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            if (MPI_Op_create(fns[i][j], 1, &nan_ops[i][j]) != MPI_SUCCESS) return -1;
    if (MPI_Op_create(sum_f16, 1, &half_sum[0]) != MPI_SUCCESS) return -1;
    if (MPI_Op_create(sum_bf16, 1, &half_sum[1]) != MPI_SUCCESS) return -1;
    return 0;
}

static void free_ops(void)
{
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            if (nan_ops[i][j] != MPI_OP_NULL) MPI_Op_free(&nan_ops[i][j]);
    for (int i = 0; i < 2; i++)
        if (half_sum[i] != MPI_OP_NULL) MPI_Op_free(&half_sum[i]);
}

/* The MPI datatype and op of (t, op); OLY_ERR_TYPE where none exists. */
static oly_status type_and_op(oly_dtype t, oly_collective_op op, const char *what,
                              MPI_Datatype *dt, MPI_Op *mop)
{
    static const char *const op_names[] = {"sum", "max", "min"};
    int o = (int)op;
    if (o < 0 || o >= OLY_COLLECTIVE_OP_COUNT)
        return oly__error(OLY_ERR_INVALID, "%s: unknown reduction %d (expected sum, max or min)",
                          what, o);
    MPI_Op ordered = op == OLY_COLLECTIVE_SUM ? MPI_SUM : op == OLY_COLLECTIVE_MAX ? MPI_MAX : MPI_MIN;
    switch (t) {
    case OLY_BOOL:
        *dt = MPI_C_BOOL;
        *mop = op == OLY_COLLECTIVE_MIN ? MPI_LAND : MPI_LOR;
        return OLY_OK;
    case OLY_INT8: *dt = MPI_INT8_T; break;
    case OLY_INT16: *dt = MPI_INT16_T; break;
    case OLY_INT32: *dt = MPI_INT32_T; break;
    case OLY_INT64: *dt = MPI_INT64_T; break;
    case OLY_UINT8: *dt = MPI_UINT8_T; break;
    case OLY_UINT16: *dt = MPI_UINT16_T; break;
    case OLY_UINT32: *dt = MPI_UINT32_T; break;
    case OLY_UINT64: *dt = MPI_UINT64_T; break;
    case OLY_FLOAT16:
    case OLY_BFLOAT16: {
        int h = t == OLY_BFLOAT16;
        *dt = MPI_UINT16_T;
        *mop = op == OLY_COLLECTIVE_SUM ? half_sum[h] : nan_ops[h][op == OLY_COLLECTIVE_MIN];
        return OLY_OK;
    }
    case OLY_FLOAT32:
    case OLY_FLOAT64:
        *dt = t == OLY_FLOAT32 ? MPI_FLOAT : MPI_DOUBLE;
        *mop = op == OLY_COLLECTIVE_SUM ? MPI_SUM : nan_ops[2 + (t == OLY_FLOAT64)][op == OLY_COLLECTIVE_MIN];
        return OLY_OK;
    case OLY_COMPLEX64:
    case OLY_COMPLEX128:
        if (op != OLY_COLLECTIVE_SUM)
            return oly__error(OLY_ERR_TYPE, "%s: %s of %s: complex numbers have no order "
                              "(expected sum, or a bool, integer or float dtype)",
                              what, op_names[o], oly_dtype_name(t));
        *dt = t == OLY_COMPLEX64 ? MPI_C_FLOAT_COMPLEX : MPI_C_DOUBLE_COMPLEX;
        *mop = MPI_SUM;
        return OLY_OK;
    default:
        return oly__error(OLY_ERR_TYPE, "%s: dtype %d is not an olympus dtype", what, (int)t);
    }
    *mop = ordered;
    return OLY_OK;
}

/* ---------------------------------------------------------------- lifetime */

static bool launched_by_mpirun(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

static oly_status read_timeout(void)
{
    const char *s = getenv("OLYMPUS_COLLECTIVE_TIMEOUT");
    if (!s || !*s) return OLY_OK;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0) || !isfinite(v))
        return oly__error(OLY_ERR_INVALID, "OLYMPUS_COLLECTIVE_TIMEOUT must be a positive number "
                          "of seconds, got '%s'", s);
    timeout_s = v;
    return OLY_OK;
}

static void finish_locked(void);

static void at_exit(void)
{
    /* A thread blocked in a collective holds the lock: wait at most the
     * timeout for it, then end the job rather than hang at exit. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)ceil(timeout_s);
    if (pthread_mutex_timedlock(&lock, &until) != 0) {
        fprintf(stderr, "olympus: process %d: a collective is still running at exit after %g s "
                "(OLYMPUS_COLLECTIVE_TIMEOUT); aborting the MPI job\n", atomic_load(&my_rank),
                timeout_s);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return;
    }
    if (state == ON) finish_locked();
    pthread_mutex_unlock(&lock);
}

oly_status oly__mpi_init(void)
{
    pthread_mutex_lock(&lock);
    oly_status st = OLY_OK;
    if (state == ON) goto done;
    if (state == DOWN) {
        st = oly__error(OLY_ERR_DISTRIBUTED, "the processes were already shut down; MPI allows "
                        "one initialisation per process");
        goto done;
    }
    if (!launched_by_mpirun()) {
        st = oly__error(OLY_ERR_DISTRIBUTED, "this process was not started by mpirun (no "
                        "OMPI_COMM_WORLD_SIZE or PMIX_RANK in its environment): run the program "
                        "as `mpirun -n <processes> python3 prog.py`");
        goto done;
    }
    if ((st = read_timeout()) != OLY_OK) goto done;
    int inited = 0, provided = 0, rc;
    MPI_Initialized(&inited);
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            st = mpi_error(rc, "initialize", "MPI_Init_thread");
            goto done;
        }
        we_initialised = true;
        static bool registered;
        if (!registered) registered = atexit(at_exit) == 0;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        st = oly__error(OLY_ERR_DISTRIBUTED, "the MPI library provides thread level %d; olympus "
                        "needs MPI_THREAD_MULTIPLE (%d)", provided, MPI_THREAD_MULTIPLE);
        goto done;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &ctrl)) != MPI_SUCCESS ||
        (rc = MPI_Comm_dup(MPI_COMM_WORLD, &data)) != MPI_SUCCESS) {
        st = mpi_error(rc, "initialize", "MPI_Comm_dup");
        goto done;
    }
    MPI_Comm_set_errhandler(ctrl, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
    if (make_ops() < 0) {
        st = oly__error(OLY_ERR_DISTRIBUTED, "initialize: MPI_Op_create failed");
        goto done;
    }
    atomic_store(&my_rank, r);
    atomic_store(&n_procs, n);
    rc = MPI_Irecv(notice_in, NOTICE_BYTES, MPI_CHAR, MPI_ANY_SOURCE, TAG_FAIL, ctrl, &notice_req);
    if (rc != MPI_SUCCESS) {
        st = mpi_error(rc, "initialize", "MPI_Irecv");
        goto done;
    }
    state = ON;
    atomic_store(&active, true);
    /* Global device ids are process * L + local id: every process needs the same L. */
    int local = oly_device_count(), counts[1024];
    int *all = n <= 1024 ? counts : oly__malloc(sizeof(int) * (size_t)n);
    if (!all) {
        st = oly__error(OLY_ERR_NOMEM, "initialize: out of memory for %d processes", n);
    } else if ((rc = MPI_Allgather(&local, 1, MPI_INT, all, 1, MPI_INT, ctrl)) != MPI_SUCCESS) {
        st = mpi_error(rc, "initialize", "MPI_Allgather");
    } else {
        for (int p = 0; p < n; p++)
            if (all[p] != local) {
                st = oly__error(OLY_ERR_DISTRIBUTED, "every process needs the same number of local "
                                "devices (OLYMPUS_NUM_CPU_DEVICES): process %d has %d, process %d "
                                "has %d", p < r ? p : r, p < r ? all[p] : local, p < r ? r : p,
                                p < r ? local : all[p]);
                break;
            }
    }
    if (all != counts) free(all);
    if (st != OLY_OK) finish_locked(); /* every process saw the same counts: all leave */
done:
    pthread_mutex_unlock(&lock);
    return st;
}

/* Leaves the job; caller holds lock and state is ON. */
static void finish_locked(void)
{
    double deadline = now() + timeout_s;
    MPI_Request req;
    int done = 0;
    if (MPI_Ibarrier(ctrl, &req) == MPI_SUCCESS) {
        while (!done && now() < deadline) {
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            if (!done) {
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
            }
        }
    }
    if (!done) {
        fprintf(stderr, "olympus: process %d: the other processes did not shut down within %g s "
                "(OLYMPUS_COLLECTIVE_TIMEOUT); aborting the MPI job\n", atomic_load(&my_rank),
                timeout_s);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cancel(&notice_req);
    free_ops();
    MPI_Comm_free(&ctrl);
    MPI_Comm_free(&data);
    atomic_store(&active, false);
    state = DOWN;
    if (we_initialised) MPI_Finalize();
}

oly_status oly__mpi_shutdown(void)
{
    pthread_mutex_lock(&lock);
    if (state == ON) finish_locked();
    pthread_mutex_unlock(&lock);
    return OLY_OK;
}

/* ---------------------------------------------------------------- collectives */

/* Common entry: checks, the lock, arrival. On OLY_OK the caller holds lock. */
static oly_status enter(enum kind k, int64_t bytes, const char *what)
{
    if (bytes < 0)
        return oly__error(OLY_ERR_INVALID, "%s across processes: negative size %lld", what,
                          (long long)bytes);
    pthread_mutex_lock(&lock);
    if (state != ON) {
        pthread_mutex_unlock(&lock);
        return oly__error(OLY_ERR_DISTRIBUTED, "%s across processes: olympus.distributed is not "
                          "initialized (call olympus.distributed.initialize() under mpirun)", what);
    }
    oly_status st = arrive(k, bytes, what);
    if (st != OLY_OK) pthread_mutex_unlock(&lock);
    return st;
}

static oly_status fits_int(int64_t bytes, const char *what)
{
    if (bytes > INT_MAX)
        return oly__error(OLY_ERR_INVALID, "%s across processes: %lld bytes per process; a block "
                          "carries at most %d bytes", what, (long long)bytes, INT_MAX);
    return OLY_OK;
}

oly_status oly__mpi_allreduce(const void *send, void *recv, int64_t count, oly_dtype t,
                              oly_collective_op op, const char *what)
{
    what = what ? what : "allreduce";
    if (!recv || (!send && count > 0))
        return oly__error(OLY_ERR_INVALID, "%s across processes: %s buffer is NULL", what,
                          recv ? "send" : "receive");
    if ((unsigned)t >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: dtype %d is not an olympus dtype", what, (int)t);
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    if (!atomic_load(&active))
        return enter(K_ALLREDUCE, 0, what); /* the "not initialized" error */
    oly_status st = type_and_op(t, op, what, &dt, &mop);
    if (st != OLY_OK) return st;
    size_t esize = oly_dtype_size(t);
    if ((st = enter(K_ALLREDUCE, count * (int64_t)esize, what)) != OLY_OK) return st;
    /* Counts over INT_MAX go in chunks. */
    const int64_t chunk = (int64_t)1 << 30;
    for (int64_t off = 0; off < count; off += chunk) {
        int c = (int)(count - off < chunk ? count - off : chunk);
        const char *s = send == recv ? MPI_IN_PLACE : (const char *)send + off * (int64_t)esize;
        int rc = MPI_Allreduce(s, (char *)recv + off * (int64_t)esize, c, dt, mop, data);
        if (rc != MPI_SUCCESS) {
            st = mpi_error(rc, what, "MPI_Allreduce");
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return st;
}

oly_status oly__mpi_allgather(const void *send, void *recv, int64_t bytes, const char *what)
{
    what = what ? what : "allgather";
    oly_status st = fits_int(bytes, what);
    if (st != OLY_OK) return st;
    if ((!send || !recv) && bytes > 0)
        return oly__error(OLY_ERR_INVALID, "%s across processes: a buffer is NULL", what);
    if ((st = enter(K_ALLGATHER, bytes, what)) != OLY_OK) return st;
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, data);
    if (rc != MPI_SUCCESS) st = mpi_error(rc, what, "MPI_Allgather");
    pthread_mutex_unlock(&lock);
    return st;
}

oly_status oly__mpi_alltoall(const void *send, void *recv, int64_t block_bytes, const char *what)
{
    what = what ? what : "alltoall";
    oly_status st = fits_int(block_bytes, what);
    if (st != OLY_OK) return st;
    if ((!send || !recv) && block_bytes > 0)
        return oly__error(OLY_ERR_INVALID, "%s across processes: a buffer is NULL", what);
    if ((st = enter(K_ALLTOALL, block_bytes, what)) != OLY_OK) return st;
    int rc = MPI_Alltoall(send, (int)block_bytes, MPI_BYTE, recv, (int)block_bytes, MPI_BYTE, data);
    if (rc != MPI_SUCCESS) st = mpi_error(rc, what, "MPI_Alltoall");
    pthread_mutex_unlock(&lock);
    return st;
}

oly_status oly__mpi_ppermute(const void *send, void *recv, int64_t bytes, const int (*pairs)[2],
                             int n_pairs, const char *what)
{
    what = what ? what : "ppermute";
    oly_status st = fits_int(bytes, what);
    if (st != OLY_OK) return st;
    if ((!send || !recv) && bytes > 0)
        return oly__error(OLY_ERR_INVALID, "%s across processes: a buffer is NULL", what);
    if (n_pairs < 0 || (n_pairs > 0 && !pairs))
        return oly__error(OLY_ERR_INVALID, "%s across processes: %d pairs%s", what, n_pairs,
                          pairs ? "" : " and no pair array");
    int n = oly__mpi_size(), me = oly__mpi_rank(), from = -1, to = -1;
    /* Checked before arrival: every process sees the same pairs, so all fail alike. */
    for (int i = 0; i < n_pairs; i++) {
        for (int j = 0; j < 2; j++)
            if (pairs[i][j] < 0 || pairs[i][j] >= n)
                return oly__error(OLY_ERR_INVALID, "%s across processes: pair (%d, %d) names "
                                  "process %d; processes are 0..%d", what, pairs[i][0],
                                  pairs[i][1], pairs[i][j], n - 1);
        for (int k = 0; k < i; k++)
            if (pairs[k][0] == pairs[i][0] || pairs[k][1] == pairs[i][1])
                return oly__error(OLY_ERR_INVALID, "%s across processes: pairs (%d, %d) and "
                                  "(%d, %d) share a %s; each process sends at most once and "
                                  "receives at most once", what, pairs[k][0], pairs[k][1],
                                  pairs[i][0], pairs[i][1],
                                  pairs[k][0] == pairs[i][0] ? "source" : "destination");
        if (pairs[i][0] == me) to = pairs[i][1];
        if (pairs[i][1] == me) from = pairs[i][0];
    }
    if ((st = enter(K_PPERMUTE, bytes, what)) != OLY_OK) return st;
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_SUCCESS;
    if (from < 0) memset(recv, 0, (size_t)bytes);
    else if (from == me) memmove(recv, send, (size_t)bytes);
    else rc = MPI_Irecv(recv, (int)bytes, MPI_BYTE, from, TAG_DATA, data, &reqs[0]);
    if (rc == MPI_SUCCESS && to >= 0 && to != me)
        rc = MPI_Isend(send, (int)bytes, MPI_BYTE, to, TAG_DATA, data, &reqs[1]);
    if (rc == MPI_SUCCESS) rc = MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) st = mpi_error(rc, what, "MPI_Sendrecv");
    pthread_mutex_unlock(&lock);
    return st;
}

oly_status oly__mpi_barrier(const char *what)
{
    oly_status st = enter(K_BARRIER, 0, what ? what : "barrier");
    if (st == OLY_OK) pthread_mutex_unlock(&lock);
    return st;
}

#endif /* OLY_HAVE_MPI */

/* ---------------------------------------------------------------- public names */

bool oly_distributed_available(void) { return oly__mpi_available(); }
oly_status oly_distributed_initialize(void)
{
    oly_status st = oly__mpi_init();
    if (st == OLY_OK) oly__mpi_group_install(); /* group runs now span processes */
    return st;
}
oly_status oly_distributed_shutdown(void) { return oly__mpi_shutdown(); }
bool oly_distributed_is_initialized(void) { return oly__mpi_active(); }
int oly_process_index(void) { return oly__mpi_rank(); }
int oly_process_count(void) { return oly__mpi_size(); }
void oly_distributed_fail(const char *message) { oly__mpi_fail(message); }

oly_status oly_distributed_allreduce(const void *send, void *recv, int64_t count, oly_dtype t,
                                     oly_collective_op op)
{
    if (count < 0)
        return oly__error(OLY_ERR_INVALID, "allreduce across processes: negative count %lld",
                          (long long)count);
    return oly__mpi_allreduce(send, recv, count, t, op, "allreduce");
}

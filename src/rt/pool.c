/* pool.c — the kernel thread pool: threads that run shares of one big kernel
 * beside the thread that runs the program.
 *
 * The executor decides what to split (src/exec/run.c: a kernel marked
 * `splits` with enough work, split by ith/nth into shares); this file only
 * runs a parallel-for, lent to the executor with oly__exec_set_pool when the
 * streams start. The runtime owns the threads (only src/rt creates threads),
 * so exec stays below rt: it calls through the pointer it was given.
 *
 * Design. One job slot, owned by one caller at a time (`busy`, taken with a
 * compare-and-swap; a caller that finds the pool busy runs its kernel alone,
 * it never waits). The caller publishes the job (work, arg, share count) and
 * bumps `seq`; the workers and the caller then claim shares with a
 * compare-and-swap on `next` (the job's seq in the high half, the next share
 * in the low half, so a late worker can never claim a share of a newer job)
 * and count finished shares in `done`. The caller waits only for shares that
 * were claimed: a worker still asleep when the job starts finds nothing left
 * and goes back to sleep, so a slow wake-up (50-150 µs on these VMs) costs
 * the caller the futex wake, not the wake-up. It spins JOIN_SPIN_NS for the
 * shares still running, then sleeps on `done` (the helper finishing the last
 * share wakes it): a helper descheduled by another process on its core can
 * then be moved to the caller's idle core rather than wait behind a spin. After a job a worker spins for
 * SPIN_NS watching `seq` (a run's next big step usually follows at once),
 * then sleeps on a futex on `seq`; the caller makes the wake system call only
 * when a worker sleeps.
 *
 * Size: one thread per CPU this process may run on (sched_getaffinity), the
 * caller included; OLYMPUS_NUM_THREADS overrides it (1: no pool, every kernel
 * on the calling thread, as before the pool). Workers start on the first
 * split, live as long as the process, and are stopped and joined only when a
 * test changes the size (oly__pool_set_threads: a stop flag, then join).
 * Workers run plain kernels only: never host functions, never Python, never
 * a blocking hook. No lock is held while a kernel runs. */
#include "rt/rt.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define SPIN_NS 100000    /* how long an idle worker watches for the next job */
#define JOIN_SPIN_NS 20000 /* how long a caller spins for its helpers before sleeping */

typedef void (*work_fn)(void *arg, int share);

static struct {
    int threads;                /* wanted, the caller included; 0: not decided yet */
    int n_workers;              /* started (busy holders only) */
    pthread_t workers[MAX_THREADS];
    _Atomic uint32_t seq;       /* futex word: bumped per job, and to stop */
    atomic_int sleepers;        /* workers in (or entering) futex_wait */
    atomic_int busy;            /* a caller owns the job slot (and start/stop) */
    atomic_bool stop;
    /* The job (written by the busy holder before it publishes seq). */
    _Atomic(work_fn) work;
    _Atomic(void *) arg;
    atomic_int n;
    _Atomic uint64_t next;      /* seq << 32 | the next unclaimed share */
    _Atomic uint32_t done;      /* finished shares; futex word of a caller asleep */
    atomic_int joiner;          /* the caller sleeps on done (after JOIN_SPIN_NS) */
} P;

static pthread_mutex_t size_mu = PTHREAD_MUTEX_INITIALIZER; /* guards P.threads */

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Runs shares of job s until none is left. */
static void claim(uint32_t s)
{
    for (;;) {
        uint64_t v = atomic_load_explicit(&P.next, memory_order_acquire);
        if ((uint32_t)(v >> 32) != s) return; /* a newer job, or none */
        int i = (int)(uint32_t)v;
        if (i >= atomic_load_explicit(&P.n, memory_order_relaxed)) return;
        if (!atomic_compare_exchange_weak_explicit(&P.next, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        /* share i of job s is ours, so job s cannot finish (and its fields
         * cannot change) before we count it done */
        work_fn w = atomic_load_explicit(&P.work, memory_order_relaxed);
        w(atomic_load_explicit(&P.arg, memory_order_relaxed), i);
        uint32_t done = atomic_fetch_add(&P.done, 1) + 1;
        /* done then joiner, against the caller's joiner then done (both
         * sequentially consistent): a sleeping caller is always woken */
        if (done == (uint32_t)atomic_load_explicit(&P.n, memory_order_relaxed) &&
            atomic_load(&P.joiner))
            futex_wake(&P.done, 1);
    }
}

/* The caller's wait for the shares helpers claimed: a short spin (they are
 * running), then asleep on done, so that a helper descheduled on a busy core
 * can be moved onto the caller's idle one instead of the caller spinning on
 * it. */
static void join(uint32_t n)
{
    uint64_t t0 = 0;
    for (unsigned i = 1; atomic_load_explicit(&P.done, memory_order_acquire) < n; i++) {
        if (i % 64 == 0) {
            uint64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > JOIN_SPIN_NS) break;
        }
        cpu_relax();
    }
    atomic_store(&P.joiner, 1);
    for (uint32_t d; (d = atomic_load(&P.done)) < n;) futex_wait(&P.done, d);
    atomic_store_explicit(&P.joiner, 0, memory_order_relaxed);
}

/* Waits until seq moves past seen (spinning first, then asleep) and returns it. */
static uint32_t wait_job(uint32_t seen)
{
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        uint32_t s = atomic_load_explicit(&P.seq, memory_order_acquire);
        if (s != seen) return s;
        if (i % 64 == 0) {
            uint64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > SPIN_NS) break;
        }
        cpu_relax();
    }
    for (;;) {
        /* sleepers then seq, against the caller's seq then sleepers (both
         * sequentially consistent): one of the two sees the other */
        atomic_fetch_add(&P.sleepers, 1);
        if (atomic_load(&P.seq) == seen) futex_wait(&P.seq, seen);
        atomic_fetch_sub(&P.sleepers, 1);
        uint32_t s = atomic_load(&P.seq);
        if (s != seen) return s;
    }
}

static void *worker(void *arg)
{
    uint32_t seen = (uint32_t)(uintptr_t)arg;
    for (;;) {
        seen = wait_job(seen);
        if (atomic_load_explicit(&P.stop, memory_order_acquire)) return NULL;
        claim(seen);
    }
}

/* Takes the job slot, waiting for a caller that holds it (start/stop only). */
static void take_busy(void)
{
    int expected = 0;
    while (!atomic_compare_exchange_weak(&P.busy, &expected, 1)) {
        expected = 0;
        sched_yield();
    }
}

/* Starts the workers (the busy holder); false when none could start. */
static bool start_workers(int threads)
{
    atomic_store(&P.stop, false);
    uint32_t s = atomic_load(&P.seq);
    for (int i = P.n_workers; i < threads - 1; i++) {
        if (pthread_create(&P.workers[i], NULL, worker, (void *)(uintptr_t)s) != 0) break;
        P.n_workers = i + 1;
    }
    return P.n_workers > 0;
}

/* Stops and joins the workers (the busy holder). */
static void stop_workers(void)
{
    if (P.n_workers == 0) return;
    atomic_store_explicit(&P.stop, true, memory_order_release);
    atomic_fetch_add(&P.seq, 1);
    futex_wake(&P.seq, INT_MAX);
    for (int i = 0; i < P.n_workers; i++) pthread_join(P.workers[i], NULL);
    P.n_workers = 0;
    atomic_store(&P.stop, false);
}

/* The executor's parallel-for (oly_exec_pool_fn). */
static bool pool_run(void (*work)(void *arg, int share), void *arg, int n)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&P.busy, &expected, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return false; /* another thread's job: the caller runs alone */
    if (P.n_workers == 0 && !start_workers(P.threads)) {
        atomic_store_explicit(&P.busy, 0, memory_order_release);
        return false;
    }
    atomic_store_explicit(&P.work, work, memory_order_relaxed);
    atomic_store_explicit(&P.arg, arg, memory_order_relaxed);
    atomic_store_explicit(&P.n, n, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    uint32_t s = atomic_load_explicit(&P.seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&P.next, (uint64_t)s << 32, memory_order_release);
    atomic_store(&P.seq, s);
    if (atomic_load(&P.sleepers) > 0) futex_wake(&P.seq, n - 1); /* helpers enough for n shares */
    claim(s);
    join((uint32_t)n); /* the shares left are running on workers */
    atomic_store_explicit(&P.busy, 0, memory_order_release);
    return true;
}

/* The default size: the CPUs this process may run on. */
static int default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int oly__pool_parse_threads(const char *s)
{
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 1) return 0;
    return v > MAX_THREADS ? MAX_THREADS : (int)v;
}

/* Hands the executor the pool (or none, for one thread). */
static void publish(int threads)
{
    oly__exec_set_pool(threads > 1 ? pool_run : NULL, threads);
}

void oly__pool_install(void)
{
    pthread_mutex_lock(&size_mu);
    if (P.threads == 0) {
        int t = oly__pool_parse_threads(getenv("OLYMPUS_NUM_THREADS"));
        if (t == 0) t = default_threads();
        P.threads = t < 1 ? 1 : t > MAX_THREADS ? MAX_THREADS : t;
        publish(P.threads);
    }
    pthread_mutex_unlock(&size_mu);
}

int oly__pool_threads(void)
{
    oly__pool_install();
    pthread_mutex_lock(&size_mu);
    int t = P.threads;
    pthread_mutex_unlock(&size_mu);
    return t;
}

void oly__pool_set_threads(int threads)
{
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    oly__pool_install();
    pthread_mutex_lock(&size_mu);
    take_busy(); /* no job runs while the workers change */
    oly__exec_set_pool(NULL, 1);
    stop_workers();
    P.threads = threads;
    atomic_store_explicit(&P.busy, 0, memory_order_release);
    publish(threads);
    pthread_mutex_unlock(&size_mu);
}

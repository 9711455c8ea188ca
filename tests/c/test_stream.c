/* test_stream.c — device streams: queued runs return futures, run in issue
 * order, report failures to their readers (and output-less ones to the
 * barrier), short work on a busy device waits its turn, devices run at the
 * same time, and host functions may run programs on their own device or call
 * the barrier without waiting for themselves. `make test-c` runs these a second
 * time with three devices. */
#include "test.h"
#include "testutil.h"

#include <pthread.h>
#include <time.h>

/* What the host function does: record its argument, wait for a gate, fail. */
typedef struct host_state {
    pthread_mutex_t mu;
    pthread_cond_t changed;
    int calls;
    double seen[256];           /* first element of arg 0, in call order */
    bool gate_open;             /* wait_for_gate: calls sleep until this is set */
    bool wait_for_gate;
    bool entered;               /* a call is inside, before the gate */
    int peer_calls_seen;        /* peer's finished calls when this one ran */
    bool timed_out;             /* a call gave up waiting for the gate (5 s) */
    double fail_on;             /* fail when the argument equals this */
    bool open_peer;             /* open peer's gate before returning */
    struct host_state *peer;
    oly_program *nested;        /* run on the same device, result checked */
    bool nested_ok;
    bool barrier;               /* call oly_effects_barrier */
    oly_status barrier_status;
} host_state;

static void gate_open(host_state *s)
{
    pthread_mutex_lock(&s->mu);
    s->gate_open = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
}

static oly_status host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    double v = *(const float *)f->args[0];
    if (s->peer) {
        pthread_mutex_lock(&s->peer->mu);
        s->peer_calls_seen = s->peer->calls;
        pthread_mutex_unlock(&s->peer->mu);
    }
    pthread_mutex_lock(&s->mu);
    s->entered = true;
    if (s->wait_for_gate) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (!s->gate_open && !s->timed_out)
            if (pthread_cond_timedwait(&s->changed, &s->mu, &until) != 0) s->timed_out = true;
    }
    if (s->calls < OLY_ARRAY_LEN(s->seen)) s->seen[s->calls] = v;
    s->calls++;
    pthread_mutex_unlock(&s->mu);
    if (s->open_peer) gate_open(s->peer);
    if (s->nested) {
        int64_t one = 1;
        oly_array *x = tu_array(OLY_FLOAT32, 1, &one, &v), *y = NULL;
        oly_status st = oly_program_run(s->nested, f->device, &x, 1, &y, 1);
        s->nested_ok = st == OLY_OK && oly_array_wait(y) == OLY_OK && tu_get(y, 0) == -v;
        oly_array_release(x);
        oly_array_release(y);
    }
    if (s->barrier) s->barrier_status = oly_effects_barrier();
    if (v == s->fail_on) return oly_host_fail(OLY_ERR_CALLBACK, "host saw %g", v);
    for (int i = 0; i < f->n_results; i++) memcpy(f->results[i], f->args[0], sizeof(float));
    return OLY_OK;
}

static oly_host_fn *host_fn(host_state *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->fail_on = -12345;
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("stream_host", host, s, NULL, &fn));
    return fn;
}

/* x: f32[1] -> ordered io_callback(x) with n_results results (0 or 1). */
static oly_program *io_program(oly_host_fn *fn, int n_results)
{
    int64_t one = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one);
    oly_builder *b = NULL;
    oly_var *x = NULL, *y = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = n_results,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &pc, NULL, 0, &y, n_results,
                                NULL));
    oly_atom out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, n_results, &p));
    oly_builder_free(b);
    return p;
}

/* x: f32[1] -> -x. */
static oly_program *neg_program(void)
{
    int64_t one = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one);
    oly_builder *b = NULL;
    oly_var *x = NULL, *y = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_neg, &in, 1, NULL, NULL, 0, &y, 1, NULL));
    oly_atom out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    return p;
}

/* Runs p on device with input v; *y gets the output when p has one. */
static oly_status run1(oly_program *p, int device, double v, oly_array **y)
{
    int64_t one = 1;
    oly_array *x = tu_array(OLY_FLOAT32, 1, &one, &v);
    oly_status st = oly_program_run(p, device, &x, 1, y, y ? 1 : 0);
    oly_array_release(x);
    return st;
}

TEST(stream_queued_runs_return_futures)
{
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    host_state s;
    oly_host_fn *fn = host_fn(&s);
    s.wait_for_gate = true;
    oly_program *p = io_program(fn, 1);
    oly_array *y = NULL;
    CHECK_OK(run1(p, 0, 7, &y));
    CHECK(y && !oly_array_ready(y)); /* the host function waits for the gate */
    gate_open(&s);
    CHECK_OK(oly_array_wait(y));
    CHECK(oly_array_ready(y));
    CHECK_EQ(tu_get(y, 0), 7);
    CHECK(!s.timed_out);
    oly_array_release(y);
    oly_program_release(p);
    oly_host_fn_release(fn);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

TEST(stream_runs_in_issue_order_on_each_device)
{
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    int n_dev = oly_device_count();
    host_state s[2];
    oly_host_fn *fn[2] = {host_fn(&s[0]), host_fn(&s[1])};
    oly_program *p[2] = {io_program(fn[0], 0), io_program(fn[1], 0)};
    for (int i = 0; i < 100; i++) /* interleaved: device 0 and the last device */
        for (int k = 0; k < 2; k++) CHECK_OK(run1(p[k], k ? n_dev - 1 : 0, i, NULL));
    CHECK_OK(oly_effects_barrier());
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(s[k].calls, 100);
        for (int i = 0; i < 100; i++) CHECK_EQ(s[k].seen[i], i);
        oly_program_release(p[k]);
        oly_host_fn_release(fn[k]);
    }
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

TEST(stream_failure_reaches_readers_and_consumers)
{
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    host_state s;
    oly_host_fn *fn = host_fn(&s);
    s.fail_on = 3;
    oly_program *p = io_program(fn, 1), *neg = neg_program();
    oly_array *y = NULL, *z = NULL;
    CHECK_OK(run1(p, 0, 3, &y)); /* queued: the failure comes later */
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_SYNC));
    CHECK_ERR(oly_program_run(neg, 0, &y, 1, &z, 1), OLY_ERR_CALLBACK,
              "input 0 was computed by a computation that failed: ");
    CHECK(z == NULL);
    CHECK_ERR(oly_array_wait(y), OLY_ERR_CALLBACK, "host saw 3");
    CHECK_EQ(tu_get(y, 0), 0); /* a failed run's outputs hold zeros, not stale bytes */
    CHECK_OK(oly_effects_barrier()); /* it had an output to carry the failure */
    oly_array_release(y);
    oly_program_release(neg);
    oly_program_release(p);
    oly_host_fn_release(fn);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

TEST(stream_failure_without_outputs_is_reported_by_the_barrier_once)
{
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    host_state s;
    oly_host_fn *fn = host_fn(&s);
    s.fail_on = 1;
    oly_program *p = io_program(fn, 0);
    for (int i = 0; i < 3; i++) CHECK_OK(run1(p, 0, i, NULL));
    CHECK_ERR(oly_effects_barrier(), OLY_ERR_CALLBACK, "host saw 1");
    CHECK_EQ(s.calls, 3); /* the stream went on after the failure */
    CHECK_OK(oly_effects_barrier());
    oly_program_release(p);
    oly_host_fn_release(fn);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

typedef struct {
    oly_program *p;
    int device;
    oly_status st;
} runner;

static void *run_thread(void *arg)
{
    runner *r = arg;
    oly_array *y = NULL;
    r->st = run1(r->p, r->device, 1, &y);
    oly_array_release(y);
    return NULL;
}

/* Starts A's program on another thread and returns once A's host function
 * is inside (waiting for its gate): device 0 is then busy. */
static bool start_busy(host_state *a, oly_program *pa, runner *r, pthread_t *t)
{
    *r = (runner){.p = pa, .device = 0};
    if (pthread_create(t, NULL, run_thread, r) != 0) return false;
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&a->mu);
        bool in = a->entered;
        pthread_mutex_unlock(&a->mu);
        if (in) return true;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return false;
}

static void *open_later(void *arg)
{
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    gate_open(arg);
    return NULL;
}

TEST(stream_work_on_a_busy_device_queues_behind_it)
{
    host_state a, b;
    oly_host_fn *fa = host_fn(&a), *fb = host_fn(&b);
    a.wait_for_gate = true;
    b.peer = &a; /* B records how many calls A had finished when B ran */
    oly_program *pa = io_program(fa, 1), *pb = io_program(fb, 1);
    runner r;
    pthread_t t, opener;

    /* AUTO: short work finds device 0 busy, is queued, and the call returns
     * once it ran, after A. */
    CHECK(start_busy(&a, pa, &r, &t));
    CHECK_EQ(pthread_create(&opener, NULL, open_later, &a), 0);
    oly_array *y = NULL;
    CHECK_OK(run1(pb, 0, 2, &y));
    CHECK(y && oly_array_ready(y));
    CHECK_EQ(b.peer_calls_seen, 1);
    pthread_join(t, NULL);
    pthread_join(opener, NULL);
    CHECK_OK(r.st);
    oly_array_release(y);

    /* ASYNC: the call returns at once with a future; it is computed after A. */
    a.gate_open = false;
    a.entered = false;
    CHECK(start_busy(&a, pa, &r, &t));
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    y = NULL;
    CHECK_OK(run1(pb, 0, 3, &y));
    CHECK(y && !oly_array_ready(y));
    gate_open(&a);
    CHECK_OK(oly_array_wait(y));
    CHECK_EQ(tu_get(y, 0), 3);
    CHECK_EQ(b.peer_calls_seen, 2);
    pthread_join(t, NULL);
    CHECK_OK(r.st);
    CHECK(!a.timed_out);
    oly_array_release(y);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
    oly_program_release(pa);
    oly_program_release(pb);
    oly_host_fn_release(fa);
    oly_host_fn_release(fb);
}

TEST(stream_devices_run_at_the_same_time)
{
    if (oly_device_count() < 2) return; /* make test-c runs it again with three devices */
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    /* Device 0's host function waits for device 1's to open its gate: both
     * finish only if the devices run concurrently. */
    host_state a, b;
    oly_host_fn *fa = host_fn(&a), *fb = host_fn(&b);
    a.wait_for_gate = true;
    b.open_peer = true;
    b.peer = &a;
    oly_program *pa = io_program(fa, 1), *pb = io_program(fb, 1);
    oly_array *ya = NULL, *yb = NULL;
    CHECK_OK(run1(pa, 0, 1, &ya));
    CHECK_OK(run1(pb, 1, 2, &yb));
    CHECK_OK(oly_array_wait(ya));
    CHECK_OK(oly_array_wait(yb));
    CHECK(!a.timed_out);
    CHECK_EQ(oly_array_device(yb), 1);
    oly_array_release(ya);
    oly_array_release(yb);
    oly_program_release(pa);
    oly_program_release(pb);
    oly_host_fn_release(fa);
    oly_host_fn_release(fb);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

TEST(stream_host_functions_run_programs_and_barriers_on_their_own_device)
{
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_ASYNC));
    host_state s;
    oly_host_fn *fn = host_fn(&s);
    s.nested = neg_program();
    s.barrier = true;
    oly_program *p = io_program(fn, 1);
    oly_array *y = NULL;
    CHECK_OK(run1(p, 0, 5, &y)); /* queued behind nothing, run by the stream's thread */
    CHECK_OK(oly_array_wait(y));
    CHECK(s.nested_ok);          /* nested run inline on device 0, not queued behind itself */
    CHECK_OK(s.barrier_status);  /* the barrier skipped its own device */
    oly_array_release(y);
    oly_program_release(s.nested);
    oly_program_release(p);
    oly_host_fn_release(fn);
    CHECK_OK(oly_set_dispatch_mode(OLY_DISPATCH_AUTO));
}

TEST(stream_dispatch_mode_checks_its_argument)
{
    CHECK_ERR(oly_set_dispatch_mode((oly_dispatch_mode)7), OLY_ERR_INVALID, "got 7");
    CHECK_EQ(oly_dispatch_mode_get(), OLY_DISPATCH_AUTO);
}

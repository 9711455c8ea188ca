/* test_outfeed.c — taps through the outfeed: delivery in order, exactly once,
 * outputs equal to inputs, backpressure under a tiny queue with a slow tap
 * function, failures reported once by the barrier, two sending threads, and
 * the transforms a vmapped tap reports. */
#include "test.h"
#include "testutil.h"

#include <pthread.h>
#include <time.h>

typedef struct tap_state {
    pthread_mutex_t mu;
    int calls;
    double seen[4096];          /* arg 0's first element, in call order */
    int slow_us;                /* sleep per call */
    double fail_on;             /* fail when arg 0's first element equals this */
    char transforms[128];
    int device;
} tap_state;

static oly_status tap_host(void *user, oly_callback_frame *f)
{
    tap_state *s = user;
    if (s->slow_us) nanosleep(&(struct timespec){0, (long)s->slow_us * 1000}, NULL);
    double v = f->n_args ? (double)*(const float *)f->args[0] : -1;
    pthread_mutex_lock(&s->mu);
    if (s->calls < 4096) s->seen[s->calls] = v;
    s->calls++;
    snprintf(s->transforms, sizeof s->transforms, "%s", f->transforms ? f->transforms : "");
    s->device = f->device;
    pthread_mutex_unlock(&s->mu);
    if (v == s->fail_on) return oly_host_fail(OLY_ERR_CALLBACK, "tap saw %g", v);
    return OLY_OK;
}

static oly_host_fn *tap_fn(tap_state *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fail_on = -12345;
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("tap_host", tap_host, s, NULL, &fn));
    return fn;
}

/* x -> 2 * tap(x): a program whose tap's output is used. */
static oly_program *tap_program(oly_host_fn *fn, int64_t n)
{
    oly_builder *b = NULL;
    oly_var *x;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_outside_call pc = {.callback = fn, .identity = true, .transforms = ""};
    oly_atom in = oly_atom_var(x);
    oly_var *t = NULL, *yv = NULL;
    int got = 0;
    CHECK_OK(oly_builder_append(b, &oly__prim_outside_call, &in, 1, &pc, NULL, 0, &t, 1, &got));
    oly_atom two = oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .weak = true, .v.f = 2});
    oly_atom args[2] = {oly_atom_var(t), two};
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, args, 2, NULL, NULL, 0, &yv, 1, &got));
    oly_atom y = oly_atom_var(yv);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &y, 1, &p));
    oly_builder_free(b);
    return p;
}

static void run_value(oly_program *p, double v, int64_t n, double *out0)
{
    double vals[8] = {v, v, v, v, v, v, v, v};
    oly_array *x = tu_array(OLY_FLOAT32, 1, &n, vals), *y = NULL;
    CHECK_OK(oly_program_run(p, 0, &x, 1, &y, 1));
    if (y && out0) *out0 = tu_get(y, 0);
    oly_array_release(x);
    oly_array_release(y);
}

TEST(outfeed_taps_arrive_in_order_once)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    oly_program *p = tap_program(fn, 3);
    double out = 0;
    for (int i = 0; i < 500; i++) {
        run_value(p, i, 3, &out);
        CHECK_NEAR(out, 2.0 * i, 0);
    }
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 500);
    for (int i = 0; i < 500; i++) CHECK_NEAR(s.seen[i], i, 0);
    CHECK_STREQ(s.transforms, "");
    CHECK_EQ(s.device, 0);
    CHECK(oly_program_effects(p) & OLY_EFFECT_OUTFEED);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(outfeed_tiny_queue_waits_and_loses_nothing)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    s.slow_us = 200;
    size_t old = oly_outfeed_capacity();
    CHECK_OK(oly_outfeed_set_capacity(300)); /* room for about two records of f32[8] */
    oly_program *p = tap_program(fn, 8);
    for (int i = 0; i < 200; i++) run_value(p, i, 8, NULL);
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 200);
    for (int i = 0; i < 200; i++) CHECK_NEAR(s.seen[i], i, 0);
    CHECK(oly_outfeed_peak_bytes(0) > 0);
    CHECK_OK(oly_outfeed_set_capacity(old));
    CHECK_EQ(oly_outfeed_set_capacity(0), OLY_ERR_INVALID);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(outfeed_failure_is_reported_once_by_the_barrier)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    s.fail_on = 3;
    oly_program *p = tap_program(fn, 2);
    for (int i = 0; i < 6; i++) run_value(p, i, 2, NULL); /* the failure does not stop the run */
    CHECK_EQ(oly_outfeed_barrier(), OLY_ERR_CALLBACK);
    CHECK(strstr(oly_last_error(), "tap saw 3") != NULL);
    CHECK_EQ(s.calls, 6); /* the receiver went on after the failure */
    CHECK_OK(oly_outfeed_barrier()); /* reported once */
    oly_program_release(p);
    oly_host_fn_release(fn);
}

typedef struct sender_arg {
    oly_host_fn *fn;
    int base, count;
} sender_arg;

static void *sender(void *arg)
{
    sender_arg *a = arg;
    int64_t n = 1;
    for (int i = 0; i < a->count; i++) {
        oly_array *x = tu_scalar(OLY_FLOAT32, a->base + i);
        oly_array *v = NULL;
        oly_aval av = tu_aval(OLY_FLOAT32, 1, &n);
        if (oly_array_view(x, &av, &v) == OLY_OK) {
            if (oly_outfeed_send(0, a->fn, NULL, &v, 1) != OLY_OK) CHECK(false);
            oly_array_release(v);
        }
        oly_array_release(x);
    }
    return NULL;
}

TEST(outfeed_two_threads_each_in_order)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    size_t old = oly_outfeed_capacity();
    CHECK_OK(oly_outfeed_set_capacity(1000));
    sender_arg a = {fn, 0, 1000}, b = {fn, 10000, 1000};
    pthread_t ta, tb;
    CHECK_EQ(pthread_create(&ta, NULL, sender, &a), 0);
    CHECK_EQ(pthread_create(&tb, NULL, sender, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 2000);
    double last_a = -1, last_b = 9999;
    int from_a = 0;
    for (int i = 0; i < 2000 && i < 4096; i++) {
        double v = s.seen[i];
        if (v < 10000) {
            CHECK(v > last_a);
            last_a = v;
            from_a++;
        } else {
            CHECK(v > last_b);
            last_b = v;
        }
    }
    CHECK_EQ(from_a, 1000);
    CHECK_OK(oly_outfeed_set_capacity(old));
    oly_outfeed_stop(); /* stops the receiver; the next send starts it again */
    sender_arg c = {fn, 50000, 3};
    sender(&c);
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 2003);
    oly_host_fn_release(fn);
}

TEST(outfeed_vmapped_tap_reports_batch_dims)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    oly_program *p = tap_program(fn, 2), *v = NULL;
    int axes[1] = {1};
    int out_axes[1] = {0};
    CHECK_OK(oly_program_vmap(p, axes, 4, out_axes, &v));
    int64_t dims[2] = {2, 4};
    double vals[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    oly_array *x = tu_array(OLY_FLOAT32, 2, dims, vals), *y = NULL;
    CHECK_OK(oly_program_run(v, 0, &x, 1, &y, 1));
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 1); /* one tap of the whole batch */
    CHECK_STREQ(s.transforms, "batch(1)");
    oly_array_release(x);
    oly_array_release(y);
    oly_program_release(v);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(outfeed_bad_arguments)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    CHECK_EQ(oly_outfeed_send(0, NULL, NULL, NULL, 0), OLY_ERR_INVALID);
    CHECK_EQ(oly_outfeed_send(99999, fn, NULL, NULL, 0), OLY_ERR_INVALID);
    CHECK(strstr(oly_last_error(), "out of range") != NULL);
    CHECK_EQ(oly_outfeed_send(0, fn, NULL, NULL, 2), OLY_ERR_INVALID);
    oly_host_fn_release(fn);
}

/* Every allocation of a send failing in turn: a clean NOMEM, nothing queued,
 * and the next send works. */
/* Only the sending thread's allocations are failed and counted: the
 * receiver delivering an earlier tap must not use up the count. Each send's
 * transforms text is longer than any before it, so no consumed record the
 * receiver recycled (when it does is a matter of timing) can hold it: every
 * send allocates its record, as the counted one did. */
static const char *longer_transforms(char *buf, size_t cap, long k)
{
    size_t n = 600 + 64 * (size_t)(k + 1);
    if (n >= cap) n = cap - 1;
    memset(buf, ' ', n);
    memcpy(buf, "batch(0)", 8);
    buf[n] = '\0';
    return buf;
}

TEST(outfeed_allocation_failures_are_clean)
{
    tap_state s;
    oly_host_fn *fn = tap_fn(&s);
    oly_array *x = tu_scalar(OLY_FLOAT32, 5);
    char t[8192];
    CHECK_OK(oly_outfeed_barrier());
    oly_fault_inject_alloc_this_thread(1L << 40);
    CHECK_OK(oly_outfeed_send(0, fn, longer_transforms(t, sizeof t, -1), &x, 1));
    long used = (1L << 40) - oly_fault_inject_left();
    oly_fault_inject_alloc(-1);
    CHECK(used >= 1);
    int failed = 0;
    for (long k = 0; k < used; k++) {
        const char *tk = longer_transforms(t, sizeof t, k);
        oly_fault_inject_alloc_this_thread(k);
        oly_status st = oly_outfeed_send(0, fn, tk, &x, 1);
        oly_fault_inject_alloc(-1);
        if (st != OLY_OK) {
            CHECK_EQ(st, OLY_ERR_NOMEM);
            failed++;
        }
    }
    CHECK(failed >= 1);
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 1 + (int)used - failed);
    oly_array_release(x);
    oly_host_fn_release(fn);
}

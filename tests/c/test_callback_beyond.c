/* test_callback_beyond.c — issue 16's additions to the callback rows: the
 * gufunc-signature vmap rule of pure_callback (what the host function sees,
 * against a per-element loop, and the shape rule's errors), callback
 * statistics (counts, bytes, failures, the table under threads) and the gated
 * tap of progress bars. */
#include "test.h"
#include "testutil.h"
#include "rulecheck.h"
#include "trans/trans.h"
#include "exec/exec.h"

/* ---------------------------------------------------------------- a broadcasting gufunc */

/* Element offset of loop index idx (of the result's loop rank `lr`) in an argument of
 * shape dims[0..rank) whose last `core` dims are core dims: NumPy's
 * broadcasting, right-aligned, size-1 dims read index 0. */
static int64_t loop_offset(const int64_t *idx, int lr, const int64_t *dims, int rank, int core)
{
    int al = rank - core; /* the argument's loop rank */
    int64_t off = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (d < al) {
            int64_t i = idx[lr - al + d];
            off += (dims[d] == 1 ? 0 : i) * stride;
        }
        stride *= dims[d];
    }
    return off;
}

typedef struct gucount {
    int calls;
    oly_aval last[2]; /* the arguments of the last call */
} gucount;

/* "(n),(n)->()" in float64: result[loop] = sum_k a[loop, k] * b[loop, k],
 * broadcasting the loop dims as a NumPy gufunc does. */
static oly_status gu_dot(void *user, oly_callback_frame *f)
{
    gucount *c = user;
    c->calls++;
    if (f->n_args != 2 || f->n_results != 1)
        return oly_host_fail(OLY_ERR_CALLBACK, "gu_dot: 2 arguments and 1 result");
    c->last[0] = f->arg_avals[0];
    c->last[1] = f->arg_avals[1];
    const oly_aval *a = &f->arg_avals[0], *b = &f->arg_avals[1], *r = &f->result_avals[0];
    int64_t n = a->dims[a->rank - 1];
    if (b->dims[b->rank - 1] != n) return oly_host_fail(OLY_ERR_CALLBACK, "gu_dot: core sizes");
    int64_t idx[OLY_MAX_RANK] = {0};
    int64_t total = oly_aval_size(r);
    const double *pa = f->args[0], *pb = f->args[1];
    double *out = f->results[0];
    for (int64_t e = 0; e < total; e++) {
        int64_t oa = loop_offset(idx, r->rank, a->dims, a->rank, 1);
        int64_t ob = loop_offset(idx, r->rank, b->dims, b->rank, 1);
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += pa[oa + k] * pb[ob + k];
        out[e] = s;
        for (int d = r->rank - 1; d >= 0; d--) {
            if (++idx[d] < r->dims[d]) break;
            idx[d] = 0;
        }
    }
    return OLY_OK;
}

/* vmap of the signature rule agrees with a loop over the batch, whichever
 * inputs are batched and on whichever axis (rulecheck), with and without
 * loop dims at the top level. */
TEST(beyond_signature_vmap_agrees_with_a_loop)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_aval r0 = RC_F64(2);
    oly_params_callback pc = {.callback = fn, .result_avals = &r0, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE, .signature = "(n),(n)->()"};
    /* a: loop (2,), b: no loop dims: they broadcast to (2,) */
    rc_case k = {.prim = "pure_callback", .params = &pc, .n_in = 2, .in = {RC_F64(2, 3), RC_F64(3)}};
    CHECK(rc_check_vmap(&k));
    oly_aval r1 = RC_SCALAR(OLY_FLOAT64);
    pc.result_avals = &r1;
    rc_case k1 = {.prim = "pure_callback", .params = &pc, .n_in = 2, .in = {RC_F64(4), RC_F64(4)}};
    CHECK(rc_check_vmap(&k1));
    CHECK(c.calls > 0);
    oly_host_fn_release(fn);
}

/* What the host function sees: one call; the batched argument has the batch
 * axis first, the unbatched one a size-1 axis there, and an argument with
 * fewer loop dims is padded after the batch axis. Nested vmap: one call per
 * level. */
TEST(beyond_signature_vmap_shapes_and_calls)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval ain = tu_aval(OLY_FLOAT64, 2, (int64_t[]){2, 3});
    oly_aval bin = tu_aval(OLY_FLOAT64, 1, (int64_t[]){3});
    oly_aval res = tu_aval(OLY_FLOAT64, 1, (int64_t[]){2});
    oly_var *va, *vb;
    CHECK_OK(oly_builder_add_input(b, &ain, &va));
    CHECK_OK(oly_builder_add_input(b, &bin, &vb));
    oly_atom in[2] = {oly_atom_var(va), oly_atom_var(vb)}, out[1];
    oly_params_callback pc = {.callback = fn, .result_avals = &res, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE, .signature = " (n) , (n) -> () "};
    CHECK_OK(oly__emit(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, out));
    oly_program *p = NULL, *v1 = NULL, *v2 = NULL;
    CHECK_OK(oly_builder_finish(b, out, 1, &p));
    oly_builder_free(b);
    /* b batched (5 of them), a not: a -> (1, 2, 3), b -> (5, 1, 3) */
    int ax1[2] = {-1, 0}, ox[1] = {0};
    CHECK_OK(oly_program_vmap(p, ax1, 5, ox, &v1));
    /* then a batched (4): a -> (4, 1, 2, 3), b -> (1, 5, 1, 3) */
    int ax2[2] = {0, -1};
    if (v1) CHECK_OK(oly_program_vmap(v1, ax2, 4, ox, &v2));
    if (v2) {
        CHECK_OK(oly_program_verify(v2));
        double av[24], bv[15];
        for (int i = 0; i < 24; i++) av[i] = i;
        for (int i = 0; i < 15; i++) bv[i] = i % 4;
        oly_array *args[2] = {tu_array(OLY_FLOAT64, 3, (int64_t[]){4, 2, 3}, av),
                              tu_array(OLY_FLOAT64, 2, (int64_t[]){5, 3}, bv)};
        oly_array *r = NULL;
        CHECK_OK(oly_program_run(v2, 0, args, 2, &r, 1));
        CHECK_EQ(c.calls, 1);
        CHECK_EQ(c.last[0].rank, 4);
        CHECK_EQ(c.last[1].rank, 4);
        int64_t wa[4] = {4, 1, 2, 3}, wb[4] = {1, 5, 1, 3};
        for (int d = 0; d < 4; d++) {
            CHECK_EQ(c.last[0].dims[d], wa[d]);
            CHECK_EQ(c.last[1].dims[d], wb[d]);
        }
        if (r) {
            const oly_aval *ra = oly_array_aval(r);
            CHECK_EQ(ra->rank, 3); /* (4, 5, 2) */
            CHECK_EQ(ra->dims[0], 4);
            CHECK_EQ(ra->dims[1], 5);
            CHECK_EQ(ra->dims[2], 2);
            double want[40];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 5; j++)
                    for (int m = 0; m < 2; m++) {
                        double s = 0;
                        for (int k = 0; k < 3; k++) s += av[i * 6 + m * 3 + k] * bv[j * 3 + k];
                        want[(i * 5 + j) * 2 + m] = s;
                    }
            CHECK(tu_allclose(r, want, 40, 0, 0));
        }
        oly_array_release(r);
        oly_array_release(args[0]);
        oly_array_release(args[1]);
    }
    oly_program_release(v2);
    oly_program_release(v1);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

/* The shape rule refuses a bad signature with what was wrong. */
TEST(beyond_signature_shape_errors)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_aval a3 = RC_F64(3), s0 = RC_SCALAR(OLY_FLOAT64);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a3, &x));
    oly_atom in[2] = {oly_atom_var(x), oly_atom_var(x)};
    oly_var *o[1];
    oly_params_callback pc = {.callback = fn, .result_avals = &s0, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE};
    struct {
        const char *sig;
        oly_status st;
        const char *msg;
    } bad[] = {
        {NULL, OLY_ERR_INVALID, "vmap_method=signature needs a signature"},
        {"(n)(n)->()", OLY_ERR_INVALID, "is not a gufunc signature"},
        {"(n),(n)->", OLY_ERR_INVALID, "unexpected end at offset 9"},
        {"(n,),(n)->()", OLY_ERR_INVALID, "unexpected character at offset 3"},
        {"(n)->()", OLY_ERR_INVALID, "has 1 argument and 1 result groups, the call has 2"},
        {"(n),(n)->(),()", OLY_ERR_INVALID, "2 result groups, the call has 2 arguments and 1 results"},
        {"(n,m),(n)->()", OLY_ERR_SHAPE, "argument 0 is f64[3], but the signature"},
        {"(n),(n)->(n)", OLY_ERR_SHAPE, "result 0 is f64[], but the signature"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc.signature = bad[i].sig;
        CHECK_ERR(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
                  bad[i].st, bad[i].msg);
    }
    pc.signature = "(n),(n)->()";
    CHECK_ERR(oly_builder_append(b, &oly__prim_buffer_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "vmap_method=signature is for pure_callback only");
    CHECK_OK(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL));
    oly_builder_free(b);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- callback statistics */

#include <pthread.h>

typedef struct counting {
    int calls;
    bool fail;
} counting;

/* Copies argument 0 into result 0 (when there is one); fails when asked. */
static oly_status copy_host(void *user, oly_callback_frame *f)
{
    counting *c = user;
    c->calls++;
    if (c->fail) return oly_host_fail(OLY_ERR_CALLBACK, "copy_host: asked to fail");
    if (f->n_results) memcpy(f->results[0], f->args[0], oly_aval_nbytes(&f->arg_avals[0]));
    return OLY_OK;
}

/* x: f32[n] -> prim(x) with params pc (results f32[n] unless debug). */
static oly_program *one_call(const oly_prim *prim, oly_params_callback *pc, int64_t n)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom in[1] = {oly_atom_var(x)}, out[1];
    int n_out = prim == &oly__prim_debug_callback ? 0 : 1;
    pc->result_avals = n_out ? &a : NULL;
    pc->n_results = n_out;
    CHECK_OK(oly__emit(b, prim, in, 1, pc, NULL, 0, out));
    CHECK_OK(oly_builder_finish(b, out, n_out, &p));
    oly_builder_free(b);
    return p;
}

static oly_status run_n(oly_program *p, int64_t n, int times)
{
    oly_array *x = tu_array(OLY_FLOAT32, 1, &n, NULL);
    oly_status st = OLY_OK;
    for (int i = 0; i < times && st == OLY_OK; i++) {
        oly_array *out[1] = {NULL};
        st = oly_program_run(p, 0, &x, 1, out, p->n_out);
        oly_array_release(out[0]);
    }
    oly_array_release(x);
    return st;
}

static const oly_callback_stat *find_stat(const oly_callback_stat *s, int n, const char *name,
                                          const char *flavour)
{
    for (int i = 0; i < n; i++)
        if (strcmp(oly_host_fn_name(s[i].fn), name) == 0 && strcmp(s[i].flavour, flavour) == 0)
            return &s[i];
    return NULL;
}

/* Off by default: nothing is counted. On: calls, failures, bytes in and out
 * per host function and flavour; a snapshot with reset empties the table. */
TEST(beyond_stats_count_calls_bytes_and_failures)
{
    oly_callback_stat *s = NULL;
    int n = 0;
    CHECK_OK(oly_callback_stats_snapshot(true, &s, &n)); /* start clean */
    oly_callback_stats_free(s, n);
    CHECK(!oly_callback_stats_enabled());
    counting c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("copier", copy_host, &c, NULL, &fn));
    oly_params_callback pure = {.callback = fn}, io = {.callback = fn, .ordered = true},
                        dbg = {.callback = fn};
    oly_program *pp = one_call(&oly__prim_pure_callback, &pure, 10);
    oly_program *pi = one_call(&oly__prim_io_callback, &io, 10);
    oly_program *pd = one_call(&oly__prim_debug_callback, &dbg, 10);
    CHECK_OK(run_n(pp, 10, 3));
    CHECK_OK(oly_callback_stats_snapshot(false, &s, &n));
    CHECK_EQ(n, 0); /* disabled */
    oly_callback_stats_free(s, n);

    oly_callback_stats_enable(true);
    CHECK(oly_callback_stats_enabled());
    CHECK_OK(run_n(pp, 10, 3));
    CHECK_OK(run_n(pi, 10, 2));
    CHECK_OK(run_n(pd, 10, 1));
    c.fail = true;
    CHECK_ERR(run_n(pp, 10, 1), OLY_ERR_CALLBACK, "asked to fail");
    c.fail = false;
    CHECK_OK(oly_callback_stats_snapshot(false, &s, &n));
    CHECK_EQ(n, 3);
    const oly_callback_stat *r = find_stat(s, n, "copier", "pure_callback");
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ(r->calls, 4u);
        CHECK_EQ(r->errors, 1u);
        CHECK_EQ(r->bytes_in, 4u * 40u);
        CHECK_EQ(r->bytes_out, 3u * 40u); /* the failed call copied nothing back */
        CHECK(r->max_ns <= r->total_ns);
        CHECK_EQ(r->device, 0);
    }
    r = find_stat(s, n, "copier", "io_callback(ordered)");
    CHECK(r && r->calls == 2 && r->bytes_out == 80);
    r = find_stat(s, n, "copier", "debug_callback");
    CHECK(r && r->calls == 1 && r->bytes_in == 40 && r->bytes_out == 0);
    oly_callback_stats_free(s, n);

    /* the table keeps the host function alive until a reset */
    CHECK_OK(oly_callback_stats_snapshot(true, &s, &n));
    CHECK_EQ(n, 3);
    oly_callback_stats_free(s, n);
    CHECK_OK(oly_callback_stats_snapshot(false, &s, &n));
    CHECK_EQ(n, 0);
    oly_callback_stats_free(s, n);
    oly_callback_stats_enable(false);
    CHECK_EQ(c.calls, 3 + 3 + 2 + 1 + 1);
    oly_program_release(pp);
    oly_program_release(pi);
    oly_program_release(pd);
    oly_host_fn_release(fn);
}

/* oly_callback_stats_record counts what it is told (taps report themselves)
 * and keeps its host function past the caller's last reference. */
TEST(beyond_stats_record_keeps_the_host_function)
{
    counting c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("tapper", copy_host, &c, NULL, &fn));
    oly_callback_stats_record(fn, "id_tap", 0, 5, true, 8, 0); /* disabled: ignored */
    oly_callback_stats_enable(true);
    oly_callback_stats_record(fn, "id_tap", 0, 5, true, 8, 0);
    oly_callback_stats_record(fn, "id_tap", 0, 9, false, 8, 0);
    oly_callback_stats_record(fn, "id_tap", 1, 1, true, 4, 0);
    oly_callback_stats_enable(false);
    oly_host_fn_release(fn);
    oly_callback_stat *s = NULL;
    int n = 0;
    CHECK_OK(oly_callback_stats_snapshot(true, &s, &n));
    CHECK_EQ(n, 2);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(strcmp(oly_host_fn_name(s[i].fn), "tapper"), 0);
        if (s[i].device == 0) {
            CHECK_EQ(s[i].calls, 2u);
            CHECK_EQ(s[i].errors, 1u);
            CHECK_EQ(s[i].total_ns, 14u);
            CHECK_EQ(s[i].max_ns, 9u);
            CHECK_EQ(s[i].bytes_in, 16u);
        } else {
            CHECK_EQ(s[i].calls, 1u);
        }
    }
    oly_callback_stats_free(s, n);
    CHECK_EQ(oly_callback_stats_dropped(), 0u);
}

/* Many host functions (the table grows) recorded from several threads while
 * another takes snapshots with and without reset: no count is lost or
 * doubled (TSan runs this). */
enum { ST_THREADS = 4, ST_FNS = 150, ST_ROUNDS = 20 };

static oly_host_fn *st_fns[ST_FNS];

static void *st_worker(void *arg)
{
    (void)arg;
    for (int r = 0; r < ST_ROUNDS; r++)
        for (int i = 0; i < ST_FNS; i++)
            oly_callback_stats_record(st_fns[i], "pure_callback", 0, 1, true, 1, 1);
    return NULL;
}

TEST(beyond_stats_threads_and_snapshots)
{
    counting c = {0};
    for (int i = 0; i < ST_FNS; i++)
        CHECK_OK(oly_host_fn_new("f", copy_host, &c, NULL, &st_fns[i]));
    oly_callback_stats_enable(true);
    pthread_t t[ST_THREADS];
    for (int i = 0; i < ST_THREADS; i++) pthread_create(&t[i], NULL, st_worker, NULL);
    uint64_t seen = 0;
    for (int k = 0; k < 50; k++) {
        oly_callback_stat *s = NULL;
        int n = 0;
        CHECK_OK(oly_callback_stats_snapshot(k % 2 == 1, &s, &n));
        if (k % 2 == 1)
            for (int i = 0; i < n; i++) seen += s[i].calls;
        oly_callback_stats_free(s, n);
    }
    for (int i = 0; i < ST_THREADS; i++) pthread_join(t[i], NULL);
    oly_callback_stats_enable(false);
    oly_callback_stat *s = NULL;
    int n = 0;
    CHECK_OK(oly_callback_stats_snapshot(true, &s, &n));
    for (int i = 0; i < n; i++) seen += s[i].calls;
    oly_callback_stats_free(s, n);
    CHECK_EQ(seen, (uint64_t)ST_THREADS * ST_FNS * ST_ROUNDS);
    for (int i = 0; i < ST_FNS; i++) oly_host_fn_release(st_fns[i]);
}

/* ---------------------------------------------------------------- the gated tap
 * (named tapgate_*: the runner sorts by name, and outfeed_allocation_* must
 * run before any test leaves spare outfeed records behind) */

typedef struct gate_seen {
    pthread_mutex_t mu;
    int calls;
    int64_t v[64];
} gate_seen;

static oly_status gate_host(void *user, oly_callback_frame *f)
{
    gate_seen *s = user;
    pthread_mutex_lock(&s->mu);
    if (s->calls < 64) s->v[s->calls] = *(const int32_t *)f->args[0];
    s->calls++;
    pthread_mutex_unlock(&s->mu);
    return OLY_OK;
}

/* i: i32[] -> tap(i) gated by (every, start, stop); the output is i. */
static oly_program *gated_program(oly_host_fn *fn, int64_t every, int64_t start, int64_t stop,
                                  oly_dtype t)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = tu_aval(t, 0, NULL);
    oly_var *x, *o;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_outside_call pc = {.callback = fn, .identity = true, .transforms = "",
                                  .every = every, .start = start, .stop = stop};
    oly_atom in = oly_atom_var(x);
    oly_status st = oly_builder_append(b, &oly__prim_outside_call, &in, 1, &pc, NULL, 0, &o, 1, NULL);
    if (st == OLY_OK) {
        oly_atom y = oly_atom_var(o);
        CHECK_OK(oly_builder_finish(b, &y, 1, &p));
    }
    oly_builder_free(b);
    return p;
}

/* The tap reaches the host only when the gate is open: every `every` values
 * from start, the last value before stop, nothing outside [start, stop). */
TEST(tapgate_sends_every_k_and_the_last)
{
    gate_seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gate", gate_host, &s, NULL, &fn));
    oly_program *p = gated_program(fn, 4, 3, 14, OLY_INT32);
    for (int v = 0; v < 20 && p; v++) {
        oly_array *x = tu_scalar(OLY_INT32, v), *y = NULL;
        CHECK_OK(oly_program_run(p, 0, &x, 1, &y, 1));
        if (y) CHECK_EQ(tu_get(y, 0), (double)v); /* an identity whatever the gate says */
        oly_array_release(x);
        oly_array_release(y);
    }
    CHECK_OK(oly_outfeed_barrier());
    int64_t want[] = {3, 7, 11, 13};
    CHECK_EQ(s.calls, 4);
    for (int k = 0; k < 4 && k < s.calls; k++) CHECK_EQ(s.v[k], want[k]);
    oly_program_release(p);

    /* no upper bound (stop <= start): every 5 from 0 */
    s.calls = 0;
    p = gated_program(fn, 5, 0, 0, OLY_INT32);
    for (int v = -2; v < 12 && p; v++) {
        oly_array *x = tu_scalar(OLY_INT32, v), *y = NULL;
        CHECK_OK(oly_program_run(p, 0, &x, 1, &y, 1));
        oly_array_release(x);
        oly_array_release(y);
    }
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 3); /* 0, 5, 10 */
    oly_program_release(p);
    oly_host_fn_release(fn);
}

typedef struct tap_frames {
    pthread_mutex_t mu;
    int calls;
    int32_t v[16];
    int n_args[16];
    int64_t size1[16]; /* elements of argument 1 */
} tap_frames;

static oly_status tap_frames_host(void *user, oly_callback_frame *f)
{
    tap_frames *s = user;
    pthread_mutex_lock(&s->mu);
    if (s->calls < 16) {
        s->v[s->calls] = *(const int32_t *)f->args[0];
        s->n_args[s->calls] = f->n_args;
        s->size1[s->calls] = f->n_args > 1 ? oly_aval_size(&f->arg_avals[1]) : -1;
    }
    s->calls++;
    pthread_mutex_unlock(&s->mu);
    return OLY_OK;
}

static oly_var *tap_append(oly_builder *b, const oly_prim *p, const oly_atom *in, int n,
                           const void *params, oly_var **out, int n_out)
{
    int got = 0;
    CHECK_OK(oly_builder_append(b, p, in, n, params, NULL, 0, out, n_out, &got));
    return got == n_out ? out[0] : NULL;
}

/* A progress bar's loop body: (i: i32, w: f32) -> (i + 1, w * 0.5 + 1) with a
 * gated tap of (i, w broadcast to f32[0]) on the way, as the decorator traces
 * it: one-element steps, a step of zero-size results and the tap. */
static oly_program *tap_body(oly_host_fn *fn)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval ai = tu_aval(OLY_INT32, 0, NULL), af = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_var *i, *w, *v[2];
    CHECK_OK(oly_builder_add_input(b, &ai, &i));
    CHECK_OK(oly_builder_add_input(b, &af, &w));
    oly_atom ia = oly_atom_var(i), wa = oly_atom_var(w);
    oly_atom inc[2] = {ia, oly_atom_lit((oly_scalar){.dtype = OLY_INT32, .v.i = 1})};
    oly_var *i1 = tap_append(b, &oly__prim_add, inc, 2, NULL, v, 1);
    oly_params_broadcast_in_dim pb = {.shape = {1, {0}}};
    oly_var *z = tap_append(b, &oly__prim_broadcast_in_dim, &wa, 1, &pb, v, 1);
    oly_params_outside_call pc = {.callback = fn, .identity = true, .transforms = "",
                                  .every = 4, .start = 0, .stop = 10};
    oly_atom tin[2] = {ia, z ? oly_atom_var(z) : ia};
    oly_var *t = z ? tap_append(b, &oly__prim_outside_call, tin, 2, &pc, v, 2) : NULL;
    oly_atom mul[2] = {wa, oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .v.f = 0.5})};
    oly_var *w1 = tap_append(b, &oly__prim_mul, mul, 2, NULL, v, 1);
    oly_atom add[2] = {w1 ? oly_atom_var(w1) : wa,
                       oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .v.f = 1})};
    oly_var *w2 = tap_append(b, &oly__prim_add, add, 2, NULL, v, 1);
    if (i1 && t && w1 && w2) {
        oly_atom out[2] = {oly_atom_var(i1), oly_atom_var(w2)};
        CHECK_OK(oly_builder_finish(b, out, 2, &p));
    }
    oly_builder_free(b);
    return p;
}

/* A gated tap among one-element steps keeps the program a register program
 * (the tap a gate test, its zero-size operand no data), alone and as a scan's
 * body: the same carries, and the host sees the counters the kernel sends
 * (every 4 from 0, and 9, the last before stop) with both arguments. */
TEST(tapgate_register_program_with_a_zero_size_operand)
{
    tap_frames s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("frames", tap_frames_host, &s, NULL, &fn));
    oly_program *body = tap_body(fn);
    if (!body) {
        oly_host_fn_release(fn);
        return;
    }
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(body, &exe));
    CHECK(exe->sprog && exe->sprog->n_calls == 1);
    for (int v = 0; v < 12; v++) {
        oly_array *in[2] = {tu_scalar(OLY_INT32, v), tu_scalar(OLY_FLOAT32, 3)}, *out[2] = {0};
        CHECK_OK(oly_program_run(body, 0, in, 2, out, 2));
        if (out[0] && out[1]) {
            CHECK_EQ(tu_get(out[0], 0), (double)(v + 1));
            CHECK_EQ(tu_get(out[1], 0), 2.5);
        }
        for (int k = 0; k < 2; k++) {
            oly_array_release(in[k]);
            oly_array_release(out[k]);
        }
    }
    CHECK_OK(oly_outfeed_barrier());
    const int32_t want[] = {0, 4, 8, 9};
    CHECK_EQ(s.calls, 4);
    for (int k = 0; k < 4 && k < s.calls; k++) {
        CHECK_EQ(s.v[k], want[k]);
        CHECK_EQ(s.n_args[k], 2);
        CHECK_EQ(s.size1[k], 0);
    }

    /* the scan of 10 iterations: the register loop's two parities */
    s.calls = 0;
    oly_builder *b = NULL;
    oly_program *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval ai = tu_aval(OLY_INT32, 0, NULL), af = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_var *i, *w, *o[2];
    CHECK_OK(oly_builder_add_input(b, &ai, &i));
    CHECK_OK(oly_builder_add_input(b, &af, &w));
    oly_atom in[2] = {oly_atom_var(i), oly_atom_var(w)};
    oly_params_scan ps = {.length = 10, .num_carry = 2, .n_out = 2};
    int got = 0;
    CHECK_OK(oly_builder_append(b, &oly__prim_scan, in, 2, &ps, &body, 1, o, 2, &got));
    if (got == 2) {
        oly_atom out[2] = {oly_atom_var(o[0]), oly_atom_var(o[1])};
        CHECK_OK(oly_builder_finish(b, out, 2, &p));
    }
    oly_builder_free(b);
    float wv = 3;
    for (int k = 0; k < 10; k++) wv = wv * 0.5f + 1;
    for (int rep = 0; rep < 2 && p; rep++) {
        oly_array *x[2] = {tu_scalar(OLY_INT32, 0), tu_scalar(OLY_FLOAT32, 3)}, *y[2] = {0};
        CHECK_OK(oly_program_run(p, 0, x, 2, y, 2));
        if (y[0] && y[1]) {
            CHECK_EQ(tu_get(y[0], 0), 10);
            CHECK_EQ(tu_get(y[1], 0), (double)wv);
        }
        for (int k = 0; k < 2; k++) {
            oly_array_release(x[k]);
            oly_array_release(y[k]);
        }
    }
    CHECK_OK(oly_outfeed_barrier());
    CHECK_EQ(s.calls, 8);
    for (int k = 0; k < 8 && k < s.calls; k++) {
        CHECK_EQ(s.v[k], want[k % 4]);
        CHECK_EQ(s.size1[k], 0);
    }
    oly_program_release(p);
    oly_program_release(body);
    oly_host_fn_release(fn);
}

TEST(tapgate_shape_errors)
{
    gate_seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gate", gate_host, &s, NULL, &fn));
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval f = tu_aval(OLY_FLOAT32, 0, NULL), i = tu_aval(OLY_INT32, 0, NULL);
    oly_var *xf, *xi, *o[1];
    CHECK_OK(oly_builder_add_input(b, &f, &xf));
    CHECK_OK(oly_builder_add_input(b, &i, &xi));
    oly_atom af = oly_atom_var(xf), ai = oly_atom_var(xi);
    oly_params_outside_call pc = {.callback = fn, .identity = true, .transforms = "", .every = 2};
    CHECK_ERR(oly_builder_append(b, &oly__prim_outside_call, &af, 1, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "a gated tap (every=2) needs identity and an integer first input");
    pc.identity = false;
    CHECK_ERR(oly_builder_append(b, &oly__prim_outside_call, &ai, 1, &pc, NULL, 0, o, 0, NULL),
              OLY_ERR_INVALID, "needs identity");
    pc.identity = true;
    pc.every = -1;
    CHECK_ERR(oly_builder_append(b, &oly__prim_outside_call, &ai, 1, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "gated tap (every=-1)");
    oly_builder_free(b);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- batch index */

typedef struct indexlog {
    int calls;
    int n_batch[8];
    int64_t index[8][2];
    int n_args[8];
} indexlog;

/* Records the frame's batch index; result = argument 0. */
static oly_status log_index(void *user, oly_callback_frame *f)
{
    indexlog *l = user;
    int k = l->calls++;
    if (k < 8) {
        l->n_batch[k] = f->n_batch;
        l->n_args[k] = f->n_args;
        for (int j = 0; j < f->n_batch && j < 2; j++) l->index[k][j] = f->batch_index[j];
    }
    if (f->n_results) memcpy(f->results[0], f->args[0], oly_aval_nbytes(&f->arg_avals[0]));
    return OLY_OK;
}

/* vmap of vmap with one call per element: each call's frame names its
 * element, outermost level first, and the index inputs are not arguments. */
TEST(batch_index_reaches_the_frame)
{
    const oly_vmap_method methods[] = {OLY_VMAP_SEQUENTIAL, OLY_VMAP_SEQUENTIAL_UNROLLED};
    for (int mi = 0; mi < 2; mi++) {
        indexlog l = {0};
        oly_host_fn *fn = NULL;
        CHECK_OK(oly_host_fn_new("log_index", log_index, &l, NULL, &fn));
        oly_params_callback pc = {.callback = fn, .vmap_method = methods[mi]};
        oly_program *p = one_call(&oly__prim_pure_callback, &pc, 1); /* f32[1] -> f32[1] */
        int axes0[1] = {0};
        oly_program *inner = NULL, *outer = NULL;
        CHECK_OK(oly_program_vmap(p, axes0, 3, axes0, &inner)); /* f32[3,1] */
        CHECK_OK(oly_program_vmap(inner, axes0, 2, axes0, &outer)); /* f32[2,3,1] */
        int64_t dims[3] = {2, 3, 1};
        double v[6] = {0, 1, 2, 3, 4, 5};
        oly_array *x = tu_array(OLY_FLOAT32, 3, dims, v), *out[1] = {NULL};
        CHECK_OK(oly_program_run(outer, 0, &x, 1, out, 1));
        const float *r = oly_array_data(out[0]);
        for (int i = 0; i < 6; i++) CHECK(r[i] == v[i]);
        CHECK(l.calls == 6);
        bool seen[2][3] = {{false}};
        for (int k = 0; k < 6; k++) {
            CHECK(l.n_batch[k] == 2 && l.n_args[k] == 1);
            int64_t i = l.index[k][0], j = l.index[k][1];
            CHECK(i >= 0 && i < 2 && j >= 0 && j < 3 && !seen[i][j]);
            seen[i][j] = true;
        }
        oly_array_release(x);
        oly_array_release(out[0]);
        oly_program_release(outer);
        oly_program_release(inner);
        oly_program_release(p);
        oly_host_fn_release(fn);
    }
}

/* The shape rule checks the batch-index inputs: a count in range, int32
 * scalars, and no alias onto one. */
TEST(batch_index_shape_errors)
{
    indexlog l = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("log_index", log_index, &l, NULL, &fn));
    oly_aval a3 = RC_F32(3), i0 = RC_SCALAR(OLY_INT32);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x, *i;
    CHECK_OK(oly_builder_add_input(b, &a3, &x));
    CHECK_OK(oly_builder_add_input(b, &i0, &i));
    oly_atom in[2] = {oly_atom_var(x), oly_atom_var(i)};
    oly_var *o[1];
    oly_params_callback pc = {.callback = fn, .result_avals = &a3, .n_results = 1,
                              .n_batch_index = 3};
    CHECK_ERR(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "n_batch_index 3 outside [0, 64] (2 inputs)");
    pc.n_batch_index = 2;
    CHECK_ERR(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_TYPE, "batch index input 0: expected int32[], got f32[3]");
    oly_io_alias al = {.input = 1, .output = 0};
    oly_params_callback bp = {.callback = fn, .result_avals = &i0, .n_results = 1,
                              .n_batch_index = 1, .aliases = &al, .n_aliases = 1};
    CHECK_ERR(oly_builder_append(b, &oly__prim_buffer_callback, in, 2, &bp, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "input 1 outside [0, 1)");
    pc.n_batch_index = 1;
    CHECK_OK(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL));
    oly_builder_free(b);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- group members */

typedef struct grouplog {
    pthread_mutex_t mu;
    int calls;
    int n_axes[8];
    char names[8][2][8];
    int64_t coords[8][2];
    float arg[8];
} grouplog;

static oly_status log_member(void *user, oly_callback_frame *f)
{
    grouplog *l = user;
    pthread_mutex_lock(&l->mu);
    int k = l->calls++;
    if (k < 8) {
        l->n_axes[k] = f->n_axes;
        for (int a = 0; a < f->n_axes && a < 2; a++) {
            snprintf(l->names[k][a], sizeof l->names[k][a], "%s", f->axis_names[a]);
            l->coords[k][a] = f->axis_index[a];
        }
        l->arg[k] = *(const float *)f->args[0];
    }
    pthread_mutex_unlock(&l->mu);
    memcpy(f->results[0], f->args[0], oly_aval_nbytes(&f->arg_avals[0]));
    return OLY_OK;
}

/* A group run over a 2x3 mesh: each member's host call gets the mesh's axis
 * names and its coordinates (row-major: member k = 3 * x + y); a host
 * function that borrows its arguments too, its call then an op of the
 * program's register program (frames made per member's run state). */
static void group_coordinates(bool borrow)
{
    grouplog l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("log_member", log_member, &l, NULL, &fn));
    if (borrow) oly_host_fn_borrow_args(fn);
    oly_params_callback pc = {.callback = fn};
    oly_program *p = one_call(&oly__prim_pure_callback, &pc, 1); /* f32[1] -> f32[1] */
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(p, &exe));
    CHECK_EQ(exe->sprog && exe->sprog->n_calls == 1, borrow);
    const char *names[2] = {"x", "y"};
    int sizes[2] = {2, 3}, devices[6] = {0, 0, 0, 0, 0, 0};
    oly_mesh mesh = {.n_axes = 2, .names = names, .sizes = sizes, .devices = devices};
    oly_array *in[6], *out[6] = {NULL};
    int64_t one = 1;
    for (int k = 0; k < 6; k++) in[k] = tu_array(OLY_FLOAT32, 1, &one, (double[]){k});
    CHECK_OK(oly_program_run_group(p, &mesh, in, 1, out, 1));
    CHECK(l.calls == 6);
    for (int c = 0; c < 6; c++) {
        int k = (int)l.arg[c]; /* the member whose input this was */
        CHECK(l.n_axes[c] == 2);
        CHECK(!strcmp(l.names[c][0], "x") && !strcmp(l.names[c][1], "y"));
        CHECK(l.coords[c][0] == k / 3 && l.coords[c][1] == k % 3);
    }
    for (int k = 0; k < 6; k++) {
        oly_array_release(in[k]);
        oly_array_release(out[k]);
    }
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(beyond_group_members_get_their_coordinates)
{
    group_coordinates(false);
    group_coordinates(true);
}

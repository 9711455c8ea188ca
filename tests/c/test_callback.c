/* test_callback.c — host functions called from programs: the example's
 * construction with real rows, failures (status, message, payload ownership),
 * arguments retained past the call, re-entrant runs, the recursion bound,
 * effects and DCE, literals and zero-copy arguments, eager calls. */
#include "test.h"
#include "testutil.h"
#include "exec/exec.h"

/* ---------------------------------------------------------------- local rows */

static oly_status cb_same_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = ctx->in[0];
    return OLY_OK;
}

static oly_status cb_k_neg(const oly_kernel_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    for (int64_t i = 0; i < oly_aval_size(&c->out_aval[0]); i++) y[i] = -x[i];
    return OLY_OK;
}

static const oly_prim c_neg = {.name = "c_neg", .n_in = 1, .n_out = 1, .shape = cb_same_shape};
static const oly_cpu_kernel c_neg_cpu = {.fn = cb_k_neg, .inplace_ok = true};
__attribute__((constructor)) static void register_kernels(void)
{
    OLY_ASSERT(oly__cpu_register(&c_neg, &c_neg_cpu) == OLY_OK);
}

/* ---------------------------------------------------------------- host functions */

typedef struct host_state {
    int calls;
    float scale, offset;
    oly_array *kept;            /* retained arg 0 (when keep) */
    bool keep;
    oly_program *reenter;       /* run on arg 0 (when set) */
    int n_args_seen;
    const char *kind_seen;
    const void *arg0_ptr;
    oly_array *arg0_array;
    double lit_seen;
} host_state;

/* result[0] = scale * arg0 + offset (f32), with the frame checked. */
static oly_status affine_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    s->n_args_seen = f->n_args;
    s->kind_seen = f->kind;
    s->arg0_ptr = f->n_args ? f->args[0] : NULL;
    s->arg0_array = f->n_args ? f->arg_arrays[0] : NULL;
    if (f->n_args > 1) s->lit_seen = *(const float *)f->args[1];
    if (f->n_args && oly_array_data(f->arg_arrays[0]) != f->args[0])
        return oly_host_fail(OLY_ERR_CALLBACK, "arg_arrays[0] does not hold args[0]");
    if (s->keep && f->n_args) {
        oly_array_release(s->kept);
        s->kept = oly_array_retain(f->arg_arrays[0]);
    }
    if (f->n_results == 0) return OLY_OK;
    if (f->result_avals[0].dtype != OLY_FLOAT32 ||
        !oly_aval_equal(&f->result_avals[0], &f->arg_avals[0]))
        return oly_host_fail(OLY_ERR_CALLBACK, "unexpected result aval");
    int64_t n = oly_aval_size(&f->result_avals[0]);
    const float *x = f->args[0];
    float *y = f->results[0];
    if (s->reenter) {
        oly_array *out = NULL;
        oly_status st = oly_program_run(s->reenter, f->device, f->arg_arrays, 1, &out, 1);
        if (st != OLY_OK) return st;
        memcpy(y, oly_array_data(out), (size_t)n * sizeof(float));
        oly_array_release(out);
        return OLY_OK;
    }
    for (int64_t i = 0; i < n; i++) y[i] = s->scale * x[i] + s->offset;
    return OLY_OK;
}

static int payload_frees;
static void payload_free(void *p)
{
    payload_frees++;
    free(p);
}

static oly_status failing_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    int *payload = malloc(sizeof *payload);
    *payload = 42;
    oly_error_set_payload(payload, payload_free);
    return oly_host_fail(OLY_ERR_CALLBACK, "ValueError: boom at call %d", s->calls);
}

static int releases;
static void count_release(void *user) { releases++; }

static oly_host_fn *host(const char *name, oly_host_call_fn fn, host_state *s)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new(name, fn, s, count_release, &h));
    return h;
}

/* ---------------------------------------------------------------- builders */

static oly_var *in_f32(oly_builder *b, int64_t n)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_var *v = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    return v;
}

static oly_var *neg(oly_builder *b, oly_var *x)
{
    oly_atom a = oly_atom_var(x);
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, &c_neg, &a, 1, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

/* kind(x [, extra]) -> one result with x's aval (none for debug_callback). */
static oly_status bind_cb(oly_builder *b, const oly_prim *kind, oly_host_fn *h, const oly_atom *in,
                          int n_in, bool ordered, oly_var **out)
{
    oly_aval ra = oly__atom_aval(&in[0]);
    oly_params_callback pc = {.callback = h, .result_avals = &ra, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = ordered};
    return oly_builder_append(b, kind, in, n_in, &pc, NULL, 0, out, out ? 1 : 0, NULL);
}

static oly_program *done_build(oly_builder *b, const oly_atom *outs, int n)
{
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, n, &p));
    oly_builder_free(b);
    return p;
}

/* neg(x) -> pure_callback -> neg: the callback sees an intermediate. */
static oly_program *neg_cb_neg(oly_host_fn *h, int64_t n)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, n);
    oly_var *y = neg(b, x);
    oly_atom ya = oly_atom_var(y);
    oly_var *z = NULL;
    CHECK_OK(bind_cb(b, &oly__prim_pure_callback, h, &ya, 1, false, &z));
    oly_var *w = z ? neg(b, z) : NULL;
    oly_atom out = oly_atom_var(w);
    return w ? done_build(b, &out, 1) : (oly_builder_free(b), NULL);
}

static const double X5[5] = {0.5, -1.0, 2.0, 3.25, -0.75};

/* ---------------------------------------------------------------- tests */

/* The examples/c/host_function.c construction: y = sin x; z = callback(y) = 2y + 1;
 * out = z + x, with the real sin/add rows. */
TEST(callback_example_sin_callback_add)
{
    const oly_prim *psin = oly_prim_lookup("sin"), *padd = oly_prim_lookup("add");
    const oly_prim *pcb = oly_prim_lookup("pure_callback");
    CHECK(psin && padd && pcb);
    if (!psin || !padd || !pcb) return;
    host_state s = {.scale = 2, .offset = 1};
    oly_host_fn *h = host("two_y_plus_one", affine_host, &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5), *y = NULL, *z = NULL, *o = NULL;
    oly_atom xa = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, psin, &xa, 1, NULL, NULL, 0, &y, 1, NULL));
    oly_atom ya = oly_atom_var(y);
    CHECK_OK(bind_cb(b, pcb, h, &ya, 1, false, &z));
    oly_atom za[2] = {oly_atom_var(z), xa};
    CHECK_OK(oly_builder_append(b, padd, za, 2, NULL, NULL, 0, &o, 1, NULL));
    oly_atom out = oly_atom_var(o);
    oly_program *p = done_build(b, &out, 1);
    int before = releases;
    oly_host_fn_release(h); /* the program holds it now */
    CHECK_EQ(releases, before);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = 2 * sinf((float)X5[i]) + 1 + X5[i];
    CHECK(res && tu_allclose(res, want, 5, 1e-6, 1e-6));
    CHECK_EQ(s.calls, 1);
    CHECK_STREQ(s.kind_seen, "pure_callback");
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
    CHECK_EQ(releases, before + 1); /* the host function went with the program */
}

TEST(callback_failure_keeps_message_and_payload)
{
    host_state s = {0};
    oly_host_fn *h = host("bad", failing_host, &s);
    oly_program *p = neg_cb_neg(h, 5);
    if (!p) {
        oly_host_fn_release(h);
        return;
    }
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_array *res = (oly_array *)&res;
    oly_error_clear();
    payload_frees = 0;

    /* Taken and freed by the caller: the destructor runs exactly once. */
    CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_CALLBACK, "boom");
    CHECK_STREQ(oly_last_error(), "ValueError: boom at call 1");
    CHECK(res == (oly_array *)&res);
    void (*fn)(void *) = NULL;
    int *pl = oly_error_take_payload(&fn);
    CHECK(pl && *pl == 42 && fn == payload_free);
    CHECK_EQ(payload_frees, 0);
    if (fn) fn(pl);
    CHECK_EQ(payload_frees, 1);
    CHECK(oly_error_take_payload(NULL) == NULL);

    /* Not taken: the next failure replaces it (one free), clear frees the second. */
    CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_CALLBACK, "call 2");
    CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_CALLBACK, "call 3");
    CHECK_EQ(payload_frees, 2);
    oly_error_clear();
    CHECK_EQ(payload_frees, 3);
    CHECK_EQ(s.calls, 3);

    /* Through a nested program the message is still the host function's own. */
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_atom xa = oly_atom_var(x);
    oly_var *r = NULL;
    oly_params_call pc = {.name = "f", .n_out = 1};
    CHECK_OK(oly_builder_append(b, &oly__prim_pjit, &xa, 1, &pc, &p, 1, &r, 1, NULL));
    oly_atom ra = oly_atom_var(r);
    oly_program *outer = done_build(b, &ra, 1);
    if (outer) {
        CHECK_ERR(oly_program_run(outer, 0, &in, 1, &res, 1), OLY_ERR_CALLBACK, "boom");
        CHECK_STREQ(oly_last_error(), "ValueError: boom at call 4");
        pl = oly_error_take_payload(&fn);
        CHECK(pl && *pl == 42);
        if (fn) fn(pl);
        CHECK_EQ(payload_frees, 4);
    }
    CHECK(res == (oly_array *)&res);
    oly_program_release(outer);
    oly_program_release(p);
    oly_host_fn_release(h);
    oly_array_release(in);
}

/* A host function keeps its argument (an intermediate) past the call; later
 * runs of the same program do not change what it holds. */
TEST(callback_retained_argument_stays_valid)
{
    host_state s = {.scale = 1, .offset = 0, .keep = true};
    oly_host_fn *h = host("keep", affine_host, &s);
    oly_program *p = neg_cb_neg(h, 5);
    oly_host_fn_release(h);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    CHECK(res && tu_allclose(res, X5, 5, 0, 0)); /* -(-(x)) */
    oly_array_release(res);
    oly_array *first = oly_array_retain(s.kept);
    /* Run again with other values: the first kept array must not change. */
    double other[5] = {10, 20, 30, 40, 50};
    oly_array *in2 = tu_array(OLY_FLOAT32, 1, &n, other);
    for (int rep = 0; rep < 3; rep++) {
        CHECK_OK(oly_program_run(p, 0, &in2, 1, &res, 1));
        oly_array_release(res);
    }
    double neg_x[5], neg_o[5];
    for (int i = 0; i < 5; i++) {
        neg_x[i] = -X5[i];
        neg_o[i] = -other[i];
    }
    CHECK(tu_allclose(first, neg_x, 5, 0, 0));
    CHECK(s.kept != first && tu_allclose(s.kept, neg_o, 5, 0, 0));
    oly_array_release(first);
    oly_array_release(s.kept);
    oly_array_release(in);
    oly_array_release(in2);
    oly_program_release(p);
}

/* result[0] = 2 * arg0 (f32); counts calls that saw arg_arrays. */
static oly_status borrowing_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    if (f->arg_arrays) s->keep = true; /* "arrays seen" */
    int64_t n = oly_aval_size(&f->result_avals[0]);
    const float *x = f->args[0];
    float *y = f->results[0];
    for (int64_t i = 0; i < n; i++) y[i] = 2 * x[i];
    return OLY_OK;
}

/* A host function that borrows its arguments gets plain buffers (no
 * arg_arrays), run after run, with the same results. */
TEST(callback_borrowing_host_gets_no_arrays)
{
    for (int borrow = 0; borrow < 2; borrow++) {
        host_state s = {0};
        oly_host_fn *h = host("double", borrowing_host, &s);
        if (borrow) oly_host_fn_borrow_args(h);
        oly_program *p = neg_cb_neg(h, 5);
        oly_host_fn_release(h);
        if (!p) return;
        int64_t n = 5;
        oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
        double want[5];
        for (int i = 0; i < 5; i++) want[i] = 2 * X5[i];
        for (int rep = 0; rep < 3; rep++) {
            CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
            CHECK(res && tu_allclose(res, want, 5, 0, 0));
            oly_array_release(res);
        }
        CHECK_EQ(s.calls, 3);
        CHECK_EQ(s.keep, !borrow);
        oly_array_release(in);
        oly_program_release(p);
    }
}

/* pure_callback(x) + 1 on x: f32[]: one-element ops only. */
static oly_program *cb_plus_one(oly_host_fn *h)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_var *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xa = oly_atom_var(x);
    CHECK_OK(bind_cb(b, &oly__prim_pure_callback, h, &xa, 1, false, &y));
    if (!y) {
        oly_builder_free(b);
        return NULL;
    }
    oly_atom args[2] = {oly_atom_var(y), oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .v.f = 1})};
    CHECK_OK(oly_builder_append(b, &oly__prim_add, args, 2, NULL, NULL, 0, &z, 1, NULL));
    oly_atom out = oly_atom_var(z);
    return z ? done_build(b, &out, 1) : (oly_builder_free(b), NULL);
}

/* One-element operands: a borrowing host function's call is an op of the
 * program's register program (its frame prepared once per run state), with
 * the same results, failures (message and payload) and statistics. */
TEST(callback_register_program_calls_borrowing_host)
{
    for (int borrow = 0; borrow < 2; borrow++) {
        host_state s = {0};
        oly_host_fn *h = host("double", borrowing_host, &s);
        if (borrow) oly_host_fn_borrow_args(h);
        oly_program *p = cb_plus_one(h);
        if (!p) {
            oly_host_fn_release(h);
            return;
        }
        const oly_exe *exe;
        CHECK_OK(oly__exec_get(p, &exe));
        CHECK_EQ(exe->sprog != NULL, borrow);
        if (exe->sprog) CHECK_EQ(exe->sprog->n_calls, 1);
        oly_array *in = tu_array(OLY_FLOAT32, 0, NULL, X5 + 3), *res = NULL;
        double want = 2 * X5[3] + 1;
        oly_callback_stats_enable(true);
        for (int rep = 0; rep < 3; rep++) {
            CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
            CHECK(res && tu_allclose(res, &want, 1, 0, 0));
            oly_array_release(res);
        }
        oly_callback_stats_enable(false);
        oly_callback_stat *st = NULL;
        int n_st = 0;
        CHECK_OK(oly_callback_stats_snapshot(true, &st, &n_st));
        int seen = 0;
        for (int i = 0; i < n_st; i++)
            if (st[i].fn == h) {
                seen++;
                CHECK_EQ(st[i].calls, 3);
                CHECK_STREQ(st[i].flavour, "pure_callback");
                CHECK_EQ(st[i].bytes_in, 12);
                CHECK_EQ(st[i].bytes_out, 12);
            }
        CHECK_EQ(seen, 1);
        oly_callback_stats_free(st, n_st);
        CHECK_EQ(s.calls, 3);
        CHECK_EQ(s.keep, !borrow);
        oly_array_release(in);
        oly_program_release(p);
        oly_host_fn_release(h);
    }

    host_state s = {0};
    oly_host_fn *bad = host("bad", failing_host, &s);
    oly_host_fn_borrow_args(bad);
    oly_program *p = cb_plus_one(bad);
    oly_host_fn_release(bad);
    if (!p) return;
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(p, &exe));
    CHECK(exe->sprog && exe->sprog->n_calls == 1);
    oly_array *in = tu_array(OLY_FLOAT32, 0, NULL, X5), *res = (oly_array *)&res;
    payload_frees = 0;
    for (int rep = 1; rep <= 2; rep++) {
        CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_CALLBACK, "boom");
        char want[64];
        snprintf(want, sizeof want, "ValueError: boom at call %d", rep);
        CHECK_STREQ(oly_last_error(), want);
        void (*fn)(void *) = NULL;
        int *pl = oly_error_take_payload(&fn);
        CHECK(pl && *pl == 42 && fn == payload_free);
        if (fn) fn(pl);
    }
    CHECK_EQ(payload_frees, 2);
    CHECK(res == (oly_array *)&res);
    oly_error_clear();
    oly_array_release(in);
    oly_program_release(p);
}

/* fails with OLY_ERR_INVALID and a message of its own */
static oly_status invalid_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    return oly_host_fail(OLY_ERR_INVALID, "x must be positive, got call %d", s->calls);
}

/* A host function's message is its own whatever its status, whether it
 * borrows its arguments or not, on registers or through the kernel. */
TEST(callback_failure_message_is_the_host_functions_own)
{
    for (int borrow = 0; borrow < 2; borrow++) {
        for (int64_t n = 1; n <= 5; n += 4) {
            host_state s = {0};
            oly_host_fn *h = host("invalid", invalid_host, &s);
            if (borrow) oly_host_fn_borrow_args(h);
            oly_program *p = n == 1 ? cb_plus_one(h) : neg_cb_neg(h, n);
            oly_host_fn_release(h);
            if (!p) return;
            oly_array *in = n == 1 ? tu_array(OLY_FLOAT32, 0, NULL, X5)
                                   : tu_array(OLY_FLOAT32, 1, &n, X5);
            oly_array *res = NULL;
            CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_INVALID, "positive");
            CHECK_STREQ(oly_last_error(), "x must be positive, got call 1");
            oly_error_clear();
            oly_array_release(in);
            oly_program_release(p);
        }
    }
}

/* Program inputs reach the host function zero-copy as the caller's arrays;
 * literal arguments arrive as 0-d arrays. */
TEST(callback_input_and_literal_arguments)
{
    host_state s = {.scale = 3, .offset = 0};
    oly_host_fn *h = host("lit", affine_host, &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_scalar lit = {.dtype = OLY_FLOAT32, .v.f = 0.25};
    oly_atom args[2] = {oly_atom_var(x), oly_atom_lit(lit)};
    oly_var *z = NULL;
    CHECK_OK(bind_cb(b, &oly__prim_io_callback, h, args, 2, false, &z));
    oly_atom outs[2] = {oly_atom_var(z), oly_atom_var(x)};
    oly_program *p = done_build(b, outs, 2);
    oly_host_fn_release(h);
    if (!p) return;
    CHECK_EQ(oly_program_effects(p), OLY_EFFECT_IO);
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res[2] = {0};
    CHECK_OK(oly_program_run(p, 0, &in, 1, res, 2));
    CHECK(s.arg0_array == in);
    CHECK(s.arg0_ptr == oly_array_data(in));
    CHECK_EQ(s.n_args_seen, 2);
    CHECK_NEAR(s.lit_seen, 0.25, 0);
    CHECK_STREQ(s.kind_seen, "io_callback");
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = 3 * X5[i];
    CHECK(res[0] && tu_allclose(res[0], want, 5, 1e-6, 0));
    CHECK(res[1] && res[1] != in && tu_allclose(res[1], X5, 5, 0, 0));
    oly_array_release(res[0]);
    oly_array_release(res[1]);
    oly_array_release(in);
    oly_program_release(p);
}

/* A host function runs another program on the same thread. */
TEST(callback_reentrant_run)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_atom o = oly_atom_var(neg(b, x));
    oly_program *inner = done_build(b, &o, 1);
    host_state s = {.reenter = inner};
    oly_host_fn *h = host("reenter", affine_host, &s);
    oly_program *p = neg_cb_neg(h, 5); /* -(inner(-x)) = -x */
    oly_host_fn_release(h);
    if (!p || !inner) goto done;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = -X5[i];
    CHECK(res && tu_allclose(res, want, 5, 0, 0));
    CHECK_EQ(s.calls, 1);
    oly_array_release(res);
    oly_array_release(in);
done:
    oly_program_release(p);
    oly_program_release(inner);
}

/* A host function that runs its own program again, forever: an error, not a crash. */
static oly_status recurse_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    oly_array *out = NULL;
    oly_status st = oly_program_run(s->reenter, f->device, f->arg_arrays, 1, &out, 1);
    if (st != OLY_OK) return st;
    memcpy(f->results[0], oly_array_data(out), oly_aval_nbytes(&f->result_avals[0]));
    oly_array_release(out);
    return OLY_OK;
}

TEST(callback_runaway_recursion_is_an_error)
{
    host_state s = {0};
    oly_host_fn *h = host("recurse", recurse_host, &s);
    oly_program *p = neg_cb_neg(h, 5);
    oly_host_fn_release(h);
    if (!p) return;
    /* The nested runs' argument is -x, an f32[5]: the same program fits. */
    s.reenter = p;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_ERR(oly_program_run(p, 0, &in, 1, &res, 1), OLY_ERR_INVALID, "deeper than 64");
    CHECK(res == NULL);
    CHECK(s.calls >= 32 && s.calls <= 64);
    /* The thread is usable afterwards: depth was unwound. */
    s.reenter = NULL;
    oly_array_release(in);
    oly_program_release(p);
}

TEST(callback_effects_and_dce)
{
    host_state s = {.scale = 1};
    oly_host_fn *h = host("fx", affine_host, &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_atom xa = oly_atom_var(x);
    oly_var *unused_pure = NULL, *unused_io = NULL;
    CHECK_OK(bind_cb(b, &oly__prim_pure_callback, h, &xa, 1, false, &unused_pure));
    CHECK_OK(bind_cb(b, &oly__prim_io_callback, h, &xa, 1, true, &unused_io));
    int n_out = -1;
    oly_aval ra = oly__atom_aval(&xa);
    oly_params_callback dpc = {.callback = h, .result_avals = &ra, .n_results = 0,
                               .ordered = false};
    CHECK_OK(oly_builder_append(b, &oly__prim_debug_callback, &xa, 1, &dpc, NULL, 0, NULL, 0,
                                &n_out));
    CHECK_EQ(n_out, 0);
    oly_atom out = oly_atom_var(neg(b, x));
    oly_program *p = done_build(b, &out, 1);
    if (!p) {
        oly_host_fn_release(h);
        return;
    }
    CHECK_EQ(oly_program_effects(p), OLY_EFFECT_ORDERED_IO | OLY_EFFECT_DEBUG);
    CHECK_EQ(oly_program_num_eqns(p), 4);
    oly_program *q = NULL;
    CHECK_OK(oly_program_dce(p, &q));
    if (q) CHECK_EQ(oly_program_num_eqns(q), 3); /* the unused pure_callback is gone */
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    CHECK_EQ(s.calls, 3);
    CHECK_STREQ(s.kind_seen, "debug_callback");
    oly_array_release(res);
    if (q) {
        CHECK_OK(oly_program_run(q, 0, &in, 1, &res, 1));
        CHECK_EQ(s.calls, 5);
        oly_array_release(res);
    }
    /* Shape rule: a host function is required. */
    CHECK_OK(oly_builder_new(&b));
    x = in_f32(b, 5);
    xa = oly_atom_var(x);
    oly_var *z;
    CHECK_ERR(bind_cb(b, &oly__prim_pure_callback, NULL, &xa, 1, false, &z), OLY_ERR_INVALID,
              "pure_callback: params.callback is NULL");
    oly_builder_free(b);
    oly_array_release(in);
    oly_program_release(q);
    oly_program_release(p);
    oly_host_fn_release(h);
}

/* Calling the same eager callback three times compiles once. */
TEST(callback_eager_apply_compiles_once)
{
    oly__apply_cache_clear();
    host_state s = {.scale = 2, .offset = -1};
    oly_host_fn *h = host("eager", affine_host, &s);
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_aval ra = *oly_array_aval(in);
    oly_params_callback pc = {.callback = h, .result_avals = &ra, .n_results = 1,
                              .vmap_method = OLY_VMAP_NONE};
    long b0, b1;
    oly__apply_cache_stats(NULL, &b0, NULL);
    for (int rep = 0; rep < 3; rep++) {
        oly_array *res = NULL;
        int k = -1;
        CHECK_OK(oly_apply(&oly__prim_pure_callback, &pc, &in, 1, &res, 1, &k));
        CHECK_EQ(k, 1);
        double want[5];
        for (int i = 0; i < 5; i++) want[i] = 2 * X5[i] - 1;
        CHECK(res && tu_allclose(res, want, 5, 1e-6, 0));
        oly_array_release(res);
    }
    oly__apply_cache_stats(NULL, &b1, NULL);
    CHECK_EQ(b1 - b0, 1);
    CHECK_EQ(s.calls, 3);
    /* Eager failure: status and message as under a program. */
    oly_host_fn *bad = host("bad", failing_host, &s);
    pc.callback = bad;
    oly_array *res = NULL;
    CHECK_ERR(oly_apply(&oly__prim_pure_callback, &pc, &in, 1, &res, 1, NULL), OLY_ERR_CALLBACK,
              "ValueError: boom");
    CHECK(res == NULL);
    oly_error_clear();
    oly_host_fn_release(bad);
    oly_host_fn_release(h);
    int before = releases;
    oly__apply_cache_clear(); /* drops the cache's hold on both host functions */
    CHECK_EQ(releases, before + 2);
    oly_array_release(in);
}

/* results[k] = args[0] + k for every result (f32, same shape). */
static oly_status plus_k_host(void *user, oly_callback_frame *f)
{
    host_state *s = user;
    s->calls++;
    int64_t n = oly_aval_size(&f->arg_avals[0]);
    for (int k = 0; k < f->n_results; k++) {
        if (!oly_aval_equal(&f->result_avals[k], &f->arg_avals[0]))
            return oly_host_fail(OLY_ERR_CALLBACK, "result %d: unexpected aval", k);
        const float *x = f->args[0];
        float *y = f->results[k];
        for (int64_t i = 0; i < n; i++) y[i] = x[i] + (float)k;
    }
    return OLY_OK;
}

/* A callback result that feeds another callback and is also a program output;
 * two results from one call. */
TEST(callback_results_feed_callbacks_and_outputs)
{
    host_state s = {0};
    oly_host_fn *h = host("plus_k", plus_k_host, &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_atom ya = oly_atom_var(neg(b, x));
    oly_aval ra[2] = {oly__atom_aval(&ya), oly__atom_aval(&ya)};
    oly_params_callback pc = {.callback = h, .result_avals = ra, .n_results = 2,
                              .vmap_method = OLY_VMAP_EXPAND_DIMS};
    oly_var *ab[2] = {0}, *c = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_pure_callback, &ya, 1, &pc, NULL, 0, ab, 2, NULL));
    oly_atom aa = oly_atom_var(ab[1]);
    pc.n_results = 1;
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &aa, 1, &pc, NULL, 0, &c, 1, NULL));
    oly_atom outs[3] = {aa, oly_atom_var(c), oly_atom_var(ab[0])};
    oly_program *p = done_build(b, outs, 3);
    oly_host_fn_release(h);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res[3] = {0};
    CHECK_OK(oly_program_run(p, 0, &in, 1, res, 3));
    double w0[5], w1[5], w2[5];
    for (int i = 0; i < 5; i++) {
        w0[i] = -X5[i] + 1;
        w1[i] = -X5[i] + 1;
        w2[i] = -X5[i];
    }
    CHECK(res[0] && tu_allclose(res[0], w0, 5, 1e-6, 0));
    CHECK(res[1] && tu_allclose(res[1], w1, 5, 1e-6, 0));
    CHECK(res[2] && tu_allclose(res[2], w2, 5, 1e-6, 0));
    CHECK_EQ(s.calls, 2);
    for (int k = 0; k < 3; k++) oly_array_release(res[k]);
    oly_array_release(in);
    oly_program_release(p);
}

/* Inside a nested program a callback's argument is a program input that lives
 * in the caller's scratch: the host function still gets an array of its own
 * that later runs do not overwrite. */
TEST(callback_retained_argument_in_nested_program)
{
    host_state s = {.scale = 1, .keep = true};
    oly_host_fn *h = host("keep", affine_host, &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *a = in_f32(b, 5);
    oly_atom aa = oly_atom_var(a);
    oly_var *z = NULL;
    CHECK_OK(bind_cb(b, &oly__prim_pure_callback, h, &aa, 1, false, &z));
    oly_atom za = oly_atom_var(z);
    oly_program *inner = done_build(b, &za, 1);
    oly_host_fn_release(h);

    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_atom ya = oly_atom_var(neg(b, x));
    oly_var *r = NULL;
    oly_params_call call = {.name = "inner", .n_out = 1};
    CHECK_OK(oly_builder_append(b, &oly__prim_pjit, &ya, 1, &call, &inner, 1, &r, 1, NULL));
    oly_atom o = oly_atom_var(neg(b, r));
    oly_program *outer = done_build(b, &o, 1);
    if (!inner || !outer) goto done;

    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(outer, 0, &in, 1, &res, 1));
    CHECK(res && tu_allclose(res, X5, 5, 0, 0));
    oly_array_release(res);
    oly_array *first = oly_array_retain(s.kept);
    double other[5] = {9, 8, 7, 6, 5}, neg_x[5];
    oly_array *in2 = tu_array(OLY_FLOAT32, 1, &n, other);
    CHECK_OK(oly_program_run(outer, 0, &in2, 1, &res, 1));
    oly_array_release(res);
    for (int i = 0; i < 5; i++) neg_x[i] = -X5[i];
    CHECK(first && tu_allclose(first, neg_x, 5, 0, 0));
    oly_array_release(first);
    oly_array_release(s.kept);
    oly_array_release(in);
    oly_array_release(in2);
done:
    oly_program_release(inner);
    oly_program_release(outer);
}

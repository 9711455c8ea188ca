/* test_exec.c — the CPU executor: values of multi-equation programs, the
 * buffer plan (reuse, in place), input validation, aliased outputs, nested
 * programs (pjit), kernel failures, the eager cache, devices, threads.
 * Uses small test-only f32 rows so it does not depend on the kernel files. */
#include "test.h"
#include "testutil.h"
#include "exec/exec.h"

#include <pthread.h>

/* ---------------------------------------------------------------- test rows */

static oly_status same_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->in[i].dtype != OLY_FLOAT32)
            return oly__error(OLY_ERR_TYPE, "%s: f32 only", ctx->prim->name);
    out[0] = ctx->in[0];
    if (ctx->n_in == 2 && ctx->in[0].rank == 0) out[0] = ctx->in[1];
    if (ctx->n_in == 2 && ctx->in[0].rank && ctx->in[1].rank &&
        !oly_aval_equal(&ctx->in[0], &ctx->in[1]))
        return oly__error(OLY_ERR_SHAPE, "%s: shapes differ", ctx->prim->name);
    for (int k = 1; k < ctx->n_out; k++) out[k] = out[0];
    return OLY_OK;
}

static int64_t n_elems(const oly_kernel_ctx *c) { return oly_aval_size(&c->out_aval[0]); }

static oly_status k_neg(const oly_kernel_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    for (int64_t i = 0; i < n_elems(c); i++) y[i] = -x[i];
    return OLY_OK;
}

static oly_status k_sq(const oly_kernel_ctx *c)
{
    const float *x = c->in[0];
    float *y = c->out[0];
    for (int64_t i = 0; i < n_elems(c); i++) y[i] = x[i] * x[i];
    return OLY_OK;
}

static oly_status k_add(const oly_kernel_ctx *c)
{
    const float *a = c->in[0], *b = c->in[1];
    int64_t sa = c->in_aval[0].rank ? 1 : 0, sb = c->in_aval[1].rank ? 1 : 0;
    float *y = c->out[0];
    for (int64_t i = 0; i < n_elems(c); i++) y[i] = a[i * sa] + b[i * sb];
    return OLY_OK;
}

/* Two outputs: (x, 2x). */
static oly_status k_split(const oly_kernel_ctx *c)
{
    const float *x = c->in[0];
    float *y0 = c->out[0], *y1 = c->out[1];
    for (int64_t i = 0; i < n_elems(c); i++) {
        y0[i] = x[i];
        y1[i] = 2 * x[i];
    }
    return OLY_OK;
}

static oly_status k_fail(const oly_kernel_ctx *c)
{
    return oly__error(OLY_ERR_INVALID, "bad value %d", 7);
}

static const oly_prim t_neg = {.name = "t_neg", .n_in = 1, .n_out = 1, .shape = same_shape};
static const oly_prim t_sq = {.name = "t_sq", .n_in = 1, .n_out = 1, .shape = same_shape};
static const oly_prim t_add = {.name = "t_add", .n_in = 2, .n_out = 1, .shape = same_shape};
static const oly_prim t_split = {.name = "t_split", .n_in = 1, .n_out = 2, .shape = same_shape};
static const oly_prim t_fail = {.name = "t_fail", .n_in = 1, .n_out = 1, .shape = same_shape};
static const oly_prim t_nokernel = {.name = "t_nokernel", .n_in = 1, .n_out = 1,
                                    .shape = same_shape};

/* The test rows' CPU kernels, registered before any test runs. */
static const oly_cpu_kernel t_neg_cpu = {.fn = k_neg, .inplace_ok = true};
static const oly_cpu_kernel t_sq_cpu = {.fn = k_sq, .inplace_ok = true};
static const oly_cpu_kernel t_add_cpu = {.fn = k_add, .inplace_ok = true};
static const oly_cpu_kernel t_split_cpu = {.fn = k_split};
static const oly_cpu_kernel t_fail_cpu = {.fn = k_fail};
__attribute__((constructor)) static void register_kernels(void)
{
    OLY_ASSERT(oly__cpu_register(&t_neg, &t_neg_cpu) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&t_sq, &t_sq_cpu) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&t_add, &t_add_cpu) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&t_split, &t_split_cpu) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&t_fail, &t_fail_cpu) == OLY_OK);
}

/* ---------------------------------------------------------------- helpers */

static oly_var *eq1(oly_builder *b, const oly_prim *p, oly_atom x)
{
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, &x, 1, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_var *eq2(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y)
{
    oly_atom in[2] = {x, y};
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, in, 2, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_atom V(oly_var *v) { return oly_atom_var(v); }

static oly_atom lit_f32(double v)
{
    oly_scalar s = {.dtype = OLY_FLOAT32, .weak = false, .v.f = v};
    return oly_atom_lit(s);
}

static oly_var *input_f32(oly_builder *b, int64_t n)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_var *v = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    return v;
}

static oly_program *finish(oly_builder *b, const oly_atom *outs, int n)
{
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, n, &p));
    oly_builder_free(b);
    return p;
}

static const double X5[5] = {0.5, -1.0, 2.0, 3.25, -0.75};

/* ---------------------------------------------------------------- tests */

/* w = (x + x)^2 + (-x) + 1.5 ; outputs (w, x + x) */
TEST(exec_multi_equation_values)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *y = eq2(b, &t_add, V(x), V(x));
    oly_var *z = eq1(b, &t_sq, V(y));
    oly_var *nx = eq1(b, &t_neg, V(x));
    oly_var *w = eq2(b, &t_add, V(z), V(nx));
    oly_var *w2 = eq2(b, &t_add, V(w), lit_f32(1.5));
    oly_atom outs[2] = {V(w2), V(y)};
    oly_program *p = finish(b, outs, 2);
    if (!p) return;

    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_array *res[2] = {NULL, NULL};
    CHECK_OK(oly_program_run(p, 0, &in, 1, res, 2));
    double want_w[5], want_y[5];
    for (int i = 0; i < 5; i++) {
        want_y[i] = 2 * X5[i];
        want_w[i] = want_y[i] * want_y[i] - X5[i] + 1.5;
    }
    CHECK(res[0] && tu_allclose(res[0], want_w, 5, 1e-6, 1e-6));
    CHECK(res[1] && tu_allclose(res[1], want_y, 5, 1e-6, 1e-6));
    CHECK_EQ(oly_array_device(res[0]), 0);
    /* A second run gives the same values (fresh scratch, fresh outputs). */
    oly_array *again[2] = {NULL, NULL};
    CHECK_OK(oly_program_run(p, 0, &in, 1, again, 2));
    CHECK(again[0] && again[0] != res[0] && tu_allclose(again[0], want_w, 5, 1e-6, 1e-6));
    for (int k = 0; k < 2; k++) {
        oly_array_release(res[k]);
        oly_array_release(again[k]);
    }
    oly_array_release(in);
    oly_program_release(p);
}

/* A chain of 100 elementwise equations on f32[1000]: in-place reuse keeps the
 * scratch to a block or two, not the 400 kB of all intermediates. */
TEST(exec_buffer_reuse_long_chain)
{
    enum { N = 1000, LEN = 100 };
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, N);
    oly_var *v = x;
    for (int i = 0; i < LEN; i++)
        v = i % 2 ? eq1(b, &t_neg, V(v)) : eq2(b, &t_add, V(v), lit_f32(1.0));
    oly_atom out = V(v);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    size_t scratch = 0, sum = 0;
    CHECK_OK(oly__exec_plan_bytes(p, &scratch, &sum));
    /* The last value is the output, written straight into the output array. */
    CHECK(sum >= (size_t)(LEN - 1) * N * sizeof(float));
    CHECK(scratch <= 4096); /* one f32[1000] block, reused in place all along */
    CHECK(scratch > 0);

    int64_t n = N;
    double *xs = malloc(N * sizeof *xs), *want = malloc(N * sizeof *want);
    for (int i = 0; i < N; i++) {
        xs[i] = i * 0.25 - 7;
        double t = xs[i];
        for (int k = 0; k < LEN; k++) t = k % 2 ? -t : t + 1;
        want[i] = t;
    }
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, xs), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    CHECK(res && tu_allclose(res, want, N, 1e-6, 1e-5));
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
    free(xs);
    free(want);
}

/* a = -x; b = a^2 (a is still live: must not be written over); c = a + b. */
TEST(exec_no_inplace_while_input_live)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *a = eq1(b, &t_neg, V(x));
    oly_var *s = eq1(b, &t_sq, V(a));
    oly_var *c = eq2(b, &t_add, V(a), V(s));
    oly_var *d = eq1(b, &t_neg, V(c)); /* in place over c */
    oly_atom out = V(d);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = -(X5[i] * X5[i] - X5[i]);
    CHECK(res && tu_allclose(res, want, 5, 1e-6, 1e-6));
    /* Two f32[5] values are live at once (a and b): two 64-byte slots. */
    size_t scratch = 0;
    CHECK_OK(oly__exec_plan_bytes(p, &scratch, NULL));
    CHECK_EQ(scratch, 128);
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
}

TEST(exec_input_validation)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *y = input_f32(b, 5);
    oly_var *z = eq2(b, &t_add, V(x), V(y));
    oly_atom out = V(z);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    int64_t n5 = 5, n4 = 4;
    oly_array *f5 = tu_array(OLY_FLOAT32, 1, &n5, X5);
    oly_array *i5 = tu_array(OLY_INT32, 1, &n5, NULL);
    oly_array *f4 = tu_array(OLY_FLOAT32, 1, &n4, NULL);
    oly_array *res = (oly_array *)&res; /* sentinel: must stay untouched on failure */
    oly_array *bad_t[2] = {f5, i5}, *bad_s[2] = {f4, f5}, *good[2] = {f5, f5};
    CHECK_ERR(oly_program_run(p, 0, bad_t, 2, &res, 1), OLY_ERR_TYPE,
              "input 1: expected f32[5], got i32[5]");
    CHECK_ERR(oly_program_run(p, 0, bad_s, 2, &res, 1), OLY_ERR_SHAPE,
              "input 0: expected f32[5], got f32[4]");
    CHECK_ERR(oly_program_run(p, 0, good, 1, &res, 1), OLY_ERR_INVALID, "takes 2 inputs, got 1");
    CHECK_ERR(oly_program_run(p, 0, good, 2, &res, 2), OLY_ERR_INVALID, "1 outputs");
    CHECK_ERR(oly_program_run(p, oly_device_count(), good, 2, &res, 1), OLY_ERR_INVALID,
              "device");
    CHECK_ERR(oly_program_run(p, -1, good, 2, &res, 1), OLY_ERR_INVALID, "device");
    oly_array *with_null[2] = {f5, NULL};
    CHECK_ERR(oly_program_run(p, 0, with_null, 2, &res, 1), OLY_ERR_INVALID, "input 1");
    CHECK(res == (oly_array *)&res);
    /* A weak input of the right dtype and shape is accepted. */
    oly_array *weak = NULL;
    oly_aval wa = *oly_array_aval(f5);
    wa.weak = true;
    CHECK_OK(oly_array_view(f5, &wa, &weak));
    oly_array *ok_in[2] = {weak, f5};
    CHECK_OK(oly_program_run(p, 0, ok_in, 2, &res, 1));
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = 2 * X5[i];
    CHECK(res != (oly_array *)&res && tu_allclose(res, want, 5, 1e-6, 0));
    if (res != (oly_array *)&res) oly_array_release(res);
    oly_array_release(weak);
    oly_array_release(f5);
    oly_array_release(i5);
    oly_array_release(f4);
    oly_program_release(p);
}

/* Outputs that are an input, a constant, a literal, or repeated are fresh copies. */
TEST(exec_outputs_alias_inputs_consts_literals)
{
    int64_t n = 5;
    oly_array *c = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *cv = NULL;
    CHECK_OK(oly_builder_add_const(b, c, &cv));
    oly_var *y = eq2(b, &t_add, V(x), V(cv));
    oly_atom outs[6] = {V(x), V(y), V(y), lit_f32(2.5), V(cv), V(x)};
    oly_program *p = finish(b, outs, 6);
    if (!p) {
        oly_array_release(c);
        return;
    }
    double xs[5] = {1, 2, 3, 4, 5};
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, xs);
    oly_array *res[6] = {0};
    CHECK_OK(oly_program_run(p, 0, &in, 1, res, 6));
    double sum[5];
    for (int i = 0; i < 5; i++) sum[i] = xs[i] + X5[i];
    CHECK(res[0] && res[0] != in && tu_allclose(res[0], xs, 5, 0, 0));
    CHECK(oly_array_data(res[0]) != oly_array_data(in));
    CHECK(res[1] && tu_allclose(res[1], sum, 5, 1e-6, 0));
    CHECK(res[2] && res[2] != res[1] && tu_allclose(res[2], sum, 5, 1e-6, 0));
    CHECK(oly_array_data(res[2]) != oly_array_data(res[1]));
    CHECK(res[3] && oly_array_aval(res[3])->rank == 0);
    CHECK_NEAR(tu_get(res[3], 0), 2.5, 0);
    CHECK(res[4] && res[4] != c && oly_array_data(res[4]) != oly_array_data(c));
    CHECK(res[4] && tu_allclose(res[4], X5, 5, 0, 0));
    CHECK(res[5] && res[5] != res[0] && tu_allclose(res[5], xs, 5, 0, 0));
    for (int k = 0; k < 6; k++) oly_array_release(res[k]);
    oly_array_release(in);
    oly_array_release(c);
    oly_program_release(p);
}

/* A program with no equations, and one whose only output is a literal. */
TEST(exec_trivial_programs)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_atom out = lit_f32(-3.0);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    oly_array *res = NULL;
    CHECK_OK(oly_program_run(p, 0, NULL, 0, &res, 1));
    CHECK(res && tu_get(res, 0) == -3.0);
    oly_array_release(res);
    oly_program_release(p);

    /* Zero-size arrays flow through kernels and outputs. */
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 0);
    oly_var *y = eq1(b, &t_neg, V(x));
    oly_var *z = eq2(b, &t_add, V(y), lit_f32(1));
    oly_atom o = V(z);
    p = finish(b, &o, 1);
    if (!p) return;
    int64_t zero = 0;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &zero, NULL);
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    CHECK(res && oly_aval_size(oly_array_aval(res)) == 0);
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
}

static oly_status bind_pjit(oly_builder *b, oly_program *sub, const oly_atom *in, int n_in,
                            oly_var **outs, int max_out)
{
    oly_params_call pc = {.name = "inner", .n_out = oly_program_num_outputs(sub)};
    return oly_builder_append(b, &oly__prim_pjit, in, n_in, &pc, &sub, 1, outs, max_out, NULL);
}

/* inner(a, b) = (a + b, -a, a); middle(x) = inner(x, x^2); outer(x) = middle(x) twice nested */
TEST(exec_nested_pjit)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *a = input_f32(b, 5), *bb = input_f32(b, 5);
    oly_var *s = eq2(b, &t_add, V(a), V(bb));
    oly_var *na = eq1(b, &t_neg, V(a));
    oly_atom iouts[3] = {V(s), V(na), V(a)};
    oly_program *inner = finish(b, iouts, 3);
    if (!inner) return;

    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *x2 = eq1(b, &t_sq, V(x));
    oly_atom cin[2] = {V(x), V(x2)};
    oly_var *r[3] = {0};
    CHECK_OK(bind_pjit(b, inner, cin, 2, r, 3));
    oly_var *t = eq2(b, &t_add, V(r[0]), V(r[1])); /* x^2 */
    oly_atom mouts[2] = {V(t), V(r[2])};
    oly_program *middle = finish(b, mouts, 2);

    CHECK_OK(oly_builder_new(&b));
    oly_var *y = input_f32(b, 5);
    oly_atom yin = V(y);
    oly_var *m[2] = {0};
    CHECK_OK(bind_pjit(b, middle, &yin, 1, m, 2));
    oly_atom oouts[2] = {V(m[0]), V(m[1])};
    oly_program *outer = finish(b, oouts, 2);
    if (!middle || !outer) goto done;

    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_array *res[2] = {0};
    CHECK_OK(oly_program_run(outer, 0, &in, 1, res, 2));
    double sq[5];
    for (int i = 0; i < 5; i++) sq[i] = X5[i] * X5[i];
    CHECK(res[0] && tu_allclose(res[0], sq, 5, 1e-6, 1e-6));
    CHECK(res[1] && tu_allclose(res[1], X5, 5, 0, 0));
    oly_array_release(res[0]);
    oly_array_release(res[1]);
    oly_array_release(in);

    /* The shape rule checks the call against the nested program. */
    CHECK_OK(oly_builder_new(&b));
    oly_var *w = input_f32(b, 4);
    oly_atom win[2] = {V(w), V(w)};
    CHECK_ERR(bind_pjit(b, inner, win, 2, r, 3), OLY_ERR_SHAPE,
              "input 0: nested program expects f32[5], got f32[4]");
    CHECK_ERR(bind_pjit(b, inner, win, 1, r, 3), OLY_ERR_INVALID, "takes 2 inputs, got 1");
    oly_params_call wrong = {.name = "inner", .n_out = 1};
    CHECK_ERR(oly_builder_append(b, &oly__prim_pjit, win, 2, &wrong, &inner, 1, r, 3, NULL),
              OLY_ERR_INVALID, "n_out");
    oly_builder_free(b);
done:
    oly_program_release(inner);
    oly_program_release(middle);
    oly_program_release(outer);
}

TEST(exec_kernel_failure_and_missing_kernel)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_var *y = eq1(b, &t_neg, V(x));
    oly_var *z = eq1(b, &t_fail, V(y));
    oly_atom outs[2] = {V(y), V(z)};
    oly_program *p = finish(b, outs, 2);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_array *res[2] = {(oly_array *)&res, (oly_array *)&res};
    CHECK_ERR(oly_program_run(p, 0, &in, 1, res, 2), OLY_ERR_INVALID, "t_fail: bad value 7");
    CHECK(res[0] == (oly_array *)&res && res[1] == (oly_array *)&res);

    /* Inside a nested program the failing primitive is still named once. */
    CHECK_OK(oly_builder_new(&b));
    oly_var *u = input_f32(b, 5);
    oly_atom uin = V(u);
    oly_var *r[2] = {0};
    CHECK_OK(bind_pjit(b, p, &uin, 1, r, 2));
    oly_atom o2 = V(r[1]);
    oly_program *outer = finish(b, &o2, 1);
    if (outer) {
        oly_array *one = NULL;
        CHECK_ERR(oly_program_run(outer, 0, &in, 1, &one, 1), OLY_ERR_INVALID,
                  "t_fail: bad value 7");
        CHECK_STREQ(oly_last_error(), "t_fail: bad value 7");
        CHECK(one == NULL);
    }
    oly_program_release(outer);
    oly_program_release(p);

    CHECK_OK(oly_builder_new(&b));
    x = input_f32(b, 5);
    y = eq1(b, &t_nokernel, V(x));
    oly_atom o = V(y);
    p = finish(b, &o, 1);
    if (p) {
        oly_array *one = NULL;
        CHECK_ERR(oly_program_run(p, 0, &in, 1, &one, 1), OLY_ERR_UNSUPPORTED, "t_nokernel");
        /* The failure is not cached as a broken executable: it fails again the same way. */
        CHECK_ERR(oly_program_run(p, 0, &in, 1, &one, 1), OLY_ERR_UNSUPPORTED, "no CPU kernel");
    }
    oly_program_release(p);
    oly_array_release(in);
}

TEST(exec_multi_output_equation)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_atom xa = V(x);
    oly_var *o[2] = {0};
    CHECK_OK(oly_builder_append(b, &t_split, &xa, 1, NULL, NULL, 0, o, 2, NULL));
    oly_var *unused_dead = NULL; /* an output nobody reads still needs a buffer */
    CHECK_OK(oly_builder_append(b, &t_split, &xa, 1, NULL, NULL, 0, &unused_dead, 1, NULL));
    oly_var *s = eq2(b, &t_add, V(o[0]), V(o[1]));
    oly_atom out = V(s);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    int64_t n = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &in, 1, &res, 1));
    double want[5];
    for (int i = 0; i < 5; i++) want[i] = 3 * X5[i];
    CHECK(res && tu_allclose(res, want, 5, 1e-6, 0));
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- threads */

typedef struct thread_job {
    oly_program *p;
    int id, ok;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    int64_t n = 64;
    double xs[64], want[64];
    for (int it = 0; it < 200; it++) {
        for (int i = 0; i < 64; i++) {
            xs[i] = j->id * 100 + it + i * 0.5;
            want[i] = (xs[i] + xs[i]) * (xs[i] + xs[i]) - xs[i];
        }
        oly_array *in = tu_array(OLY_FLOAT32, 1, &n, xs), *res = NULL;
        if (oly_program_run(j->p, 0, &in, 1, &res, 1) != OLY_OK) {
            oly_array_release(in);
            return NULL;
        }
        bool good = true;
        for (int i = 0; i < 64; i++)
            if (fabs(tu_get(res, i) - want[i]) > 1e-4 * fabs(want[i]) + 1e-3) good = false;
        oly_array_release(res);
        oly_array_release(in);
        if (!good) return NULL;
    }
    j->ok = 1;
    return NULL;
}

TEST(exec_threads_share_a_program)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 64);
    oly_var *y = eq2(b, &t_add, V(x), V(x));
    oly_var *z = eq1(b, &t_sq, V(y));
    oly_var *nx = eq1(b, &t_neg, V(x));
    oly_var *w = eq2(b, &t_add, V(z), V(nx));
    oly_atom out = V(w);
    oly_program *p = finish(b, &out, 1);
    if (!p) return;
    enum { T = 4 };
    pthread_t th[T];
    thread_job jobs[T];
    /* Not compiled yet: the threads race to compile and cache it. */
    CHECK(oly__program_cache_get(p) == NULL);
    for (int i = 0; i < T; i++) {
        jobs[i] = (thread_job){p, i, 0};
        CHECK_EQ(pthread_create(&th[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(jobs[i].ok, 1);
    }
    oly_program_release(p);
}

/* ---------------------------------------------------------------- eager */

TEST(exec_apply_cache)
{
    oly__apply_cache_clear();
    int entries;
    long builds0, hits0, builds, hits;
    oly__apply_cache_stats(&entries, &builds0, &hits0);
    CHECK_EQ(entries, 0);
    int64_t n = 5;
    oly_array *a = tu_array(OLY_FLOAT32, 1, &n, X5);
    oly_array *in[2] = {a, a};
    for (int rep = 0; rep < 3; rep++) {
        oly_array *res = NULL;
        int n_out = -1;
        CHECK_OK(oly_apply(&t_add, NULL, in, 2, &res, 1, &n_out));
        CHECK_EQ(n_out, 1);
        double want[5];
        for (int i = 0; i < 5; i++) want[i] = 2 * X5[i];
        CHECK(res && tu_allclose(res, want, 5, 1e-6, 0));
        oly_array_release(res);
    }
    oly__apply_cache_stats(&entries, &builds, &hits);
    CHECK_EQ(builds - builds0, 1);
    CHECK_EQ(hits - hits0, 2);
    CHECK_EQ(entries, 1);

    /* A weak input is another key (the output's weak flag depends on it). */
    oly_aval wa = *oly_array_aval(a);
    wa.weak = true;
    oly_array *w = NULL, *res = NULL;
    CHECK_OK(oly_array_view(a, &wa, &w));
    oly_array *win[2] = {w, w};
    CHECK_OK(oly_apply(&t_add, NULL, win, 2, &res, 1, NULL));
    CHECK(res && oly_array_aval(res)->weak);
    oly_array_release(res);
    oly__apply_cache_stats(&entries, &builds, NULL);
    CHECK_EQ(builds - builds0, 2);
    CHECK_EQ(entries, 2);

    /* Errors: shape rule, too little room. */
    CHECK_ERR(oly_apply(&t_add, NULL, in, 1, &res, 1, NULL), OLY_ERR_INVALID, "t_add");
    CHECK_ERR(oly_apply(&t_split, NULL, in, 1, &res, 1, NULL), OLY_ERR_INVALID,
              "2 outputs, room given for 1");
    int64_t n4 = 4;
    oly_array *f4 = tu_array(OLY_FLOAT32, 1, &n4, NULL);
    oly_array *mixed[2] = {a, f4};
    CHECK_ERR(oly_apply(&t_add, NULL, mixed, 2, &res, 1, NULL), OLY_ERR_SHAPE, "shapes differ");
    oly_array_release(f4);

    /* Apply of a real params-carrying row when the registry has it. */
    oly_array_release(w);
    oly_array_release(a);
    oly__apply_cache_clear();
    oly__apply_cache_stats(&entries, NULL, NULL);
    CHECK_EQ(entries, 0);
}

typedef struct apply_job {
    int ok;
} apply_job;

static void *apply_thread(void *arg)
{
    apply_job *j = arg;
    int64_t n = 8;
    double xs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int it = 0; it < 300; it++) {
        int64_t len = 1 + it % 8; /* eight keys, shared by all threads */
        (void)n;
        oly_array *a = tu_array(OLY_FLOAT32, 1, &len, xs), *res = NULL;
        oly_array *in[2] = {a, a};
        oly_status st = oly_apply(&t_add, NULL, in, 2, &res, 1, NULL);
        bool good = st == OLY_OK && oly_aval_size(oly_array_aval(res)) == len &&
                    tu_get(res, len - 1) == 2 * xs[len - 1];
        oly_array_release(res);
        oly_array_release(a);
        if (!good) return NULL;
    }
    j->ok = 1;
    return NULL;
}

TEST(exec_apply_threads)
{
    oly__apply_cache_clear();
    enum { T = 4 };
    pthread_t th[T];
    apply_job jobs[T] = {{0}};
    for (int i = 0; i < T; i++) CHECK_EQ(pthread_create(&th[i], NULL, apply_thread, &jobs[i]), 0);
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(jobs[i].ok, 1);
    }
    int entries;
    oly__apply_cache_stats(&entries, NULL, NULL);
    CHECK_EQ(entries, 8);
    oly__apply_cache_clear();
}

TEST(exec_apply_cache_evicts_oldest)
{
    oly__apply_cache_clear();
    long b0, b1;
    oly__apply_cache_stats(NULL, &b0, NULL);
    /* 1100 distinct shapes: the cache stays bounded at 1024 entries. */
    for (int64_t len = 1; len <= 1100; len++) {
        oly_array *a = tu_array(OLY_FLOAT32, 1, &len, NULL), *res = NULL;
        CHECK_OK(oly_apply(&t_neg, NULL, &a, 1, &res, 1, NULL));
        oly_array_release(res);
        oly_array_release(a);
    }
    int entries;
    oly__apply_cache_stats(&entries, &b1, NULL);
    CHECK_EQ(entries, 1024);
    CHECK_EQ(b1 - b0, 1100);
    /* len 1 was evicted (rebuilt); len 1100 is still there (hit). */
    long h0, h1;
    int64_t one = 1, last = 1100;
    oly_array *a = tu_array(OLY_FLOAT32, 1, &one, NULL), *res = NULL;
    oly__apply_cache_stats(NULL, &b0, &h0);
    CHECK_OK(oly_apply(&t_neg, NULL, &a, 1, &res, 1, NULL));
    oly_array_release(res);
    oly_array_release(a);
    a = tu_array(OLY_FLOAT32, 1, &last, NULL);
    CHECK_OK(oly_apply(&t_neg, NULL, &a, 1, &res, 1, NULL));
    oly_array_release(res);
    oly_array_release(a);
    oly__apply_cache_stats(NULL, &b1, &h1);
    CHECK_EQ(b1 - b0, 1);
    CHECK_EQ(h1 - h0, 1);
    oly__apply_cache_clear();
}

/* ---------------------------------------------------------------- devices */

TEST(exec_devices)
{
    int n = oly_device_count();
    CHECK(n >= 1);
    CHECK_STREQ(oly_device_kind(0), "cpu");
    CHECK_STREQ(oly_device_kind(n - 1), "cpu");
    CHECK(oly_device_kind(n) == NULL);
    CHECK(oly_device_kind(-1) == NULL);
    CHECK_EQ(oly_effects_barrier(), OLY_OK);
    /* Runs on the last device give arrays of that device (OLYMPUS_NUM_CPU_DEVICES=3 tests it). */
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = input_f32(b, 5);
    oly_atom o = V(eq1(b, &t_neg, V(x)));
    oly_program *p = finish(b, &o, 1);
    if (!p) return;
    int64_t len = 5;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &len, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, n - 1, &in, 1, &res, 1));
    CHECK(res && oly_array_device(res) == n - 1);
    oly_array_release(res);
    oly_array_release(in);
    oly_program_release(p);
}

TEST(exec_device_count_parsing)
{
    CHECK_EQ(oly__parse_device_count(NULL), 1);
    CHECK_EQ(oly__parse_device_count(""), 1);
    CHECK_EQ(oly__parse_device_count("4"), 4);
    CHECK_EQ(oly__parse_device_count("8\n"), 8);
    CHECK_EQ(oly__parse_device_count("0"), 1);
    CHECK_EQ(oly__parse_device_count("-2"), 1);
    CHECK_EQ(oly__parse_device_count("two"), 1);
    CHECK_EQ(oly__parse_device_count("3x"), 1);
    CHECK_EQ(oly__parse_device_count("99999999999999999999"), 1);
}

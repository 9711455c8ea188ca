/* test_trans.c — the transform drivers (vmap, jvp, linearize, transpose) and
 * the rule checker, on test rows r_* that borrow the real rows' shape rules and
 * kernels and carry rules written here, so the drivers are tested apart from
 * the families' rules. Rows whose rules fail when called prove what the
 * drivers must not ask (symbolic zeros, unmapped equations). */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- test rows */

static oly_prim r_sin, r_cos, r_mul, r_add, r_neg, r_sum, r_norule, r_badsin, r_badmul,
    r_badsum;
static int io_runs, io_batch_calls, io_jvp_calls, tap_runs;

/* r_io x: an io effect that returns x (counts its runs); its batch and JVP
 * rules fail when called. r_tap x: the same with an identity JVP rule. */
static oly_status io_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = ctx->in[0];
    return OLY_OK;
}
static oly_status io_kernel(const oly_kernel_ctx *ctx)
{
    memcpy(ctx->out[0], ctx->in[0], oly_aval_nbytes(&ctx->out_aval[0]));
    if (strcmp(ctx->eqn->prim->name, "r_io") == 0)
        io_runs++;
    else
        tap_runs++;
    return OLY_OK;
}
static uint32_t io_effects(const void *params) { return OLY_EFFECT_IO; }
static oly_status io_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                           const int *in_bdim, oly_atom *out, int *out_bdim)
{
    io_batch_calls++;
    return oly__error(OLY_ERR_INTERNAL, "r_io: batching rule called");
}
static oly_status io_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz)
{
    io_jvp_calls++;
    return oly__error(OLY_ERR_INTERNAL, "r_io: JVP rule called");
}
static oly_status tap_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    tangent_out[0] = tangent[0];
    out_nz[0] = tan_nz[0];
    return OLY_OK;
}
static const oly_prim r_io = {.name = "r_io", .n_in = 1, .n_out = 1, .shape = io_shape,
                              .effects = io_effects, .batch = io_batch, .jvp = io_jvp};
static const oly_prim r_tap = {.name = "r_tap", .n_in = 1, .n_out = 1, .shape = io_shape,
                               .effects = io_effects, .jvp = tap_jvp};
static const oly_cpu_kernel io_cpu = {.fn = io_kernel};

/* r_unset x: its JVP and transpose rules report a nonzero tangent / cotangent
 * but never write it; the drivers must say so, not crash. Never run. */
static oly_status unset_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = true;
    return OLY_OK;
}
static oly_status unset_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                  oly_atom *ct_in, bool *ct_in_nz)
{
    ct_in_nz[0] = true;
    return OLY_OK;
}
static const oly_prim r_unset = {.name = "r_unset", .n_in = 1, .n_out = 1, .shape = io_shape,
                                 .jvp = unset_jvp, .transpose = unset_transpose};

/* elementwise batching: every operand of rank > 0 (or mapped) moved to 0 */
static oly_status ew_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                           const int *in_bdim, oly_atom *out, int *out_bdim)
{
    oly_atom m[2];
    for (int i = 0; i < eqn->n_in; i++) {
        oly_aval a = oly__atom_aval(&in[i]);
        if (in_bdim[i] == OLY_NOT_MAPPED && a.rank == 0)
            m[i] = in[i]; /* a scalar broadcasts by itself */
        else
            OLY_TRY(oly__batch_move(ctx, in[i], in_bdim[i], 0, &m[i]));
    }
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, m, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

static oly_status sin_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    oly_atom c;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    OLY_TRY(oly__emit_un(ctx->b, eqn->prim == &r_badsin ? &r_sin : &r_cos, x[0], &c));
    OLY_TRY(oly__emit_bin(ctx->b, &r_mul, c, t[0], ty));
    ynz[0] = true;
    return OLY_OK;
}
static oly_status cos_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    oly_atom s, ns;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    OLY_TRY(oly__emit_un(ctx->b, &r_sin, x[0], &s));
    OLY_TRY(oly__emit_un(ctx->b, &r_neg, s, &ns));
    OLY_TRY(oly__emit_bin(ctx->b, &r_mul, ns, t[0], ty));
    ynz[0] = true;
    return OLY_OK;
}
static oly_status neg_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    OLY_TRY(oly__emit_un(ctx->b, &r_neg, t[0], ty));
    ynz[0] = true;
    return OLY_OK;
}
static oly_status neg_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    OLY_TRY(oly__emit_un(ctx->b, &r_neg, ct[0], &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}
static oly_status mul_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    oly_atom a, b;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    if (nz[0]) OLY_TRY(oly__emit_bin(ctx->b, &r_mul, t[0], x[1], &a));
    if (nz[1]) OLY_TRY(oly__emit_bin(ctx->b, &r_mul, x[0], t[1], &b));
    if (nz[0] && nz[1])
        OLY_TRY(oly__emit_bin(ctx->b, &r_add, a, b, ty));
    else
        *ty = nz[0] ? a : b;
    ynz[0] = true;
    return OLY_OK;
}
static oly_status mul_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    if (linear[0] && linear[1])
        return oly__error(OLY_ERR_INVALID, "%s: both operands are linear", eqn->prim->name);
    int l = linear[0] ? 0 : 1;
    oly_atom c = ct[0];
    if (eqn->prim == &r_badmul) OLY_TRY(oly__emit_bin(ctx->b, &r_add, c, c, &c));
    OLY_TRY(oly__emit_bin(ctx->b, &r_mul, c, in[1 - l], &ct_in[l]));
    ct_in_nz[l] = true;
    return OLY_OK;
}
static oly_status add_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    if (nz[0] && nz[1])
        OLY_TRY(oly__emit_bin(ctx->b, &r_add, t[0], t[1], ty));
    else
        *ty = nz[0] ? t[0] : t[1];
    ynz[0] = true;
    return OLY_OK;
}
static oly_status add_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    for (int i = 0; i < 2; i++) {
        if (!linear[i]) continue;
        ct_in[i] = ct[0];
        ct_in_nz[i] = true;
    }
    return OLY_OK;
}

/* r_sum[axes]: batch shifts the axes past the batch axis (moved to 0). */
static oly_status sum_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                            const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_reduce *p = eqn->params;
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    oly_params_reduce q = *p;
    if (eqn->prim != &r_badsum)
        for (int i = 0; i < q.axes.n; i++) q.axes.v[i]++;
    OLY_TRY(oly__emit(ctx->b, eqn->prim, &x, 1, &q, NULL, 0, out));
    out_bdim[0] = 0;
    return OLY_OK;
}
static oly_status sum_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *x,
                          const oly_atom *t, const bool *nz, oly_atom *y, oly_atom *ty,
                          bool *ynz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, y));
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, t, ty));
    ynz[0] = true;
    return OLY_OK;
}
static oly_status sum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_reduce *p = eqn->params;
    const oly_aval *a = &eqn->in[0].var->aval;
    oly_ints shape = oly__ints(a->rank, a->dims), dims = oly__ints(0, NULL);
    for (int i = 0; i < a->rank; i++) {
        bool reduced = false;
        for (int j = 0; j < p->axes.n; j++) reduced |= p->axes.v[j] == i;
        if (!reduced) dims.v[dims.n++] = i;
    }
    OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, ct[0], &shape, &dims, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

static void setup_rows(void)
{
    static bool done;
    if (done) return;
    done = true;
    r_sin = oly__prim_sin;
    r_sin.name = "r_sin";
    r_sin.batch = ew_batch;
    r_sin.jvp = sin_jvp;
    r_sin.transpose = NULL;
    r_sin.partial_eval = NULL;
    r_badsin = r_sin;
    r_badsin.name = "r_badsin";
    r_cos = r_sin;
    r_cos.name = "r_cos";
    r_cos.jvp = cos_jvp;
    r_neg = oly__prim_neg;
    r_neg.name = "r_neg";
    r_neg.batch = ew_batch;
    r_neg.jvp = neg_jvp;
    r_neg.transpose = neg_transpose;
    r_neg.partial_eval = NULL;
    r_mul = oly__prim_mul;
    r_mul.name = "r_mul";
    r_mul.batch = ew_batch;
    r_mul.jvp = mul_jvp;
    r_mul.transpose = mul_transpose;
    r_mul.partial_eval = NULL;
    r_badmul = r_mul;
    r_badmul.name = "r_badmul";
    r_add = oly__prim_add;
    r_add.name = "r_add";
    r_add.batch = ew_batch;
    r_add.jvp = add_jvp;
    r_add.transpose = add_transpose;
    r_add.partial_eval = NULL;
    r_sum = oly__prim_reduce_sum;
    r_sum.name = "r_sum";
    r_sum.batch = sum_batch;
    r_sum.jvp = sum_jvp;
    r_sum.transpose = sum_transpose;
    r_sum.partial_eval = NULL;
    r_badsum = r_sum;
    r_badsum.name = "r_badsum";
    r_norule = oly__prim_sin;
    r_norule.name = "r_norule";
    r_norule.batch = NULL;
    r_norule.jvp = NULL;
    r_norule.transpose = NULL;
    r_norule.partial_eval = NULL;
}

/* Rows defined here get their CPU kernels before any test runs (a row is
 * looked up by address, so its contents may be filled in later). */
__attribute__((constructor)) static void register_kernels(void)
{
    /* The copies run with their originals' CPU kernels (r_cos with cos's). */
    const struct {
        const oly_prim *row, *like;
    } kern[] = {{&r_sin, &oly__prim_sin},     {&r_badsin, &oly__prim_sin},
                {&r_cos, &oly__prim_cos},     {&r_neg, &oly__prim_neg},
                {&r_mul, &oly__prim_mul},     {&r_badmul, &oly__prim_mul},
                {&r_add, &oly__prim_add},     {&r_sum, &oly__prim_reduce_sum},
                {&r_badsum, &oly__prim_reduce_sum}, {&r_norule, &oly__prim_sin}};
    for (int i = 0; i < OLY_ARRAY_LEN(kern); i++)
        OLY_ASSERT(oly__cpu_register(kern[i].row, oly__cpu_kernel(kern[i].like)) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&r_io, &io_cpu) == OLY_OK);
    OLY_ASSERT(oly__cpu_register(&r_tap, &io_cpu) == OLY_OK);
}

/* ---------------------------------------------------------------- helpers */

static oly_atom V(oly_var *v) { return oly_atom_var(v); }

static oly_var *input(oly_builder *b, oly_dtype t, int rank, const int64_t *dims)
{
    oly_aval a = tu_aval(t, rank, dims);
    oly_var *v = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    return v;
}

static oly_var *app1(oly_builder *b, const oly_prim *p, oly_var *x)
{
    oly_atom in = V(x), out;
    CHECK_OK(oly__emit(b, p, &in, 1, NULL, NULL, 0, &out));
    return out.var;
}

static oly_var *app2(oly_builder *b, const oly_prim *p, oly_var *x, oly_var *y)
{
    oly_atom out;
    CHECK_OK(oly__emit_bin(b, p, V(x), V(y), &out));
    return out.var;
}

static oly_program *finish(oly_builder *b, oly_var *const *outs, int n)
{
    oly_atom o[8];
    for (int i = 0; i < n; i++) o[i] = V(outs[i]);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, o, n, &p));
    oly_builder_free(b);
    return p;
}

static oly_builder *builder(void)
{
    setup_rows();
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    return b;
}

/* Checks that p verifies and prints as want. */
static void check_print(const oly_program *p, const char *want)
{
    if (!p) {
        CHECK(p != NULL);
        return;
    }
    CHECK_OK(oly_program_verify(p));
    char *text = NULL;
    CHECK_OK(oly_program_print(p, &text));
    CHECK_STREQ(text, want);
    free(text);
}

static int count_prim(const oly_program *p, const char *name)
{
    int n = 0;
    for (int k = 0; k < p->n_eqn; k++) n += strcmp(p->eqn[k].prim->name, name) == 0;
    return n;
}

/* Runs the rule checker expecting it to fail; keeps the test's own state. */
#define EXPECT_RC_FAILS(call)                                                             \
    do {                                                                                  \
        int saved_ = oly_test_failed;                                                     \
        fprintf(stderr, "    (an expected rulecheck failure follows)\n");                 \
        bool ok_ = (call);                                                                \
        oly_test_failed = saved_;                                                         \
        if (ok_) CHECK_FAIL_("%s passed, expected a failure", #call);                     \
    } while (0)

static const int64_t d4[] = {4}, d23[] = {2, 3};

/* ---------------------------------------------------------------- emit helpers */

TEST(trans_emit_helpers)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 2, d23);
    oly_atom m, bc, z, f, cv, lit;
    CHECK_OK(oly__emit_moveaxis(b, V(x), 0, 1, &m));
    oly_aval one = tu_aval(OLY_FLOAT32, 2, d23);
    oly_aval s3 = tu_aval(OLY_FLOAT32, 1, (const int64_t[]){3});
    oly_var *y = input(b, OLY_FLOAT32, 1, (const int64_t[]){3});
    CHECK_OK(oly__emit_broadcast_to(b, V(y), &one, &bc));
    CHECK_OK(oly__emit_full(b, &s3, 0.0, &z));
    CHECK_OK(oly__emit_full(b, &(oly_aval){.dtype = OLY_INT32}, 7.0, &f));
    CHECK_EQ(f.kind, OLY_ATOM_LIT);
    CHECK_EQ(f.lit.v.i, 7);
    CHECK_OK(oly__emit_convert(b, f, OLY_FLOAT32, &lit)); /* folded */
    CHECK_EQ(lit.kind, OLY_ATOM_LIT);
    CHECK_OK(oly__emit_convert(b, V(x), OLY_FLOAT64, &cv));
    oly_atom same;
    CHECK_OK(oly__emit_convert(b, V(x), OLY_FLOAT32, &same));
    CHECK(same.var == x);
    oly_atom sum;
    CHECK_OK(oly__emit_add_any(b, bc, V(x), &sum));
    CHECK_ERR(oly__emit_add_any(b, V(y), V(x), &sum), OLY_ERR_INTERNAL, "f32[3] and f32[2,3]");
    oly_batch_ctx bctx = {.b = b, .size = 5};
    oly_atom bm;
    CHECK_OK(oly__batch_move(&bctx, V(y), OLY_NOT_MAPPED, 1, &bm));
    oly_atom outs[6] = {m, bc, z, cv, sum, bm};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 6, &p));
    oly_builder_free(b);
    check_print(p, "{ lambda ; a:f32[2,3] b:f32[3]. let\n"
                   "    c:f32[3,2] = transpose[permutation=(1, 0)] a\n"
                   "    d:f32[2,3] = broadcast_in_dim[shape=(2, 3) broadcast_dimensions=(1,)] b\n"
                   "    e:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] 0.0:f32[]\n"
                   "    f:f64[2,3] = convert_element_type[new_dtype=float64] a\n"
                   "    g:f32[2,3] = add d a\n"
                   "    h:f32[3,5] = broadcast_in_dim[shape=(3, 5) broadcast_dimensions=(0,)] b\n"
                   "  in (c, d, e, f, g, h) }");
    oly_program_release(p);
}

TEST(trans_emit_inline)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *s = app1(b, &r_sin, x);
    oly_var *o[1] = {app2(b, &r_mul, s, x)};
    oly_program *inner = finish(b, o, 1);
    b = builder();
    oly_var *y = input(b, OLY_FLOAT32, 1, d4);
    oly_atom in = V(y), out;
    CHECK_OK(oly__emit_inline(b, inner, &in, &out));
    CHECK_OK(oly__emit_inline(b, inner, &out, &out));
    oly_var *r[1] = {out.var};
    oly_program *p = finish(b, r, 1);
    check_print(p, "{ lambda ; a:f32[4]. let\n"
                   "    b:f32[4] = r_sin a\n"
                   "    c:f32[4] = r_mul b a\n"
                   "    d:f32[4] = r_sin c\n"
                   "    e:f32[4] = r_mul d c\n"
                   "  in (e,) }");
    oly_program_release(p);
    oly_program_release(inner);
}

/* ---------------------------------------------------------------- vmap */

TEST(trans_vmap_copies_unmapped_equations)
{
    /* (x batched, c not): r_io c is copied (its batching rule fails if asked) */
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *c = input(b, OLY_FLOAT32, 1, d4);
    oly_var *e = app1(b, &r_io, c);
    oly_var *s = app1(b, &r_sin, x);
    oly_var *o[1] = {app2(b, &r_mul, s, e)};
    oly_program *p = finish(b, o, 1);
    int in_axes[2] = {1, -1}, out_axes[1] = {0};
    oly_program *v = NULL;
    io_batch_calls = 0;
    CHECK_OK(oly_program_vmap(p, in_axes, 3, out_axes, &v));
    CHECK_EQ(io_batch_calls, 0);
    check_print(v, "{ lambda ; a:f32[4,3] b:f32[4]. let\n"
                   "    c:f32[4] = r_io b\n"
                   "    d:f32[3,4] = transpose[permutation=(1, 0)] a\n"
                   "    e:f32[3,4] = r_sin d\n"
                   "    f:f32[3,4] = broadcast_in_dim[shape=(3, 4) broadcast_dimensions=(1,)] c\n"
                   "    g:f32[3,4] = r_mul e f\n"
                   "  in (g,) }");
    /* numerics: the effect runs once, the result matches a loop */
    double xv[12], cv[4] = {1, 2, 3, 4};
    for (int i = 0; i < 12; i++) xv[i] = 0.1 * i;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, (const int64_t[]){4, 3}, xv),
                        tu_array(OLY_FLOAT32, 1, d4, cv)};
    oly_array *out = NULL;
    io_runs = 0;
    if (v) CHECK_OK(oly_program_run(v, 0, in, 2, &out, 1));
    CHECK_EQ(io_runs, 1);
    double want[12];
    for (int bi = 0; bi < 3; bi++)
        for (int k = 0; k < 4; k++) want[bi * 4 + k] = sin(xv[k * 3 + bi]) * cv[k];
    if (out) CHECK(tu_allclose(out, want, 12, 1e-6, 1e-6));
    oly_array_release(out);
    oly_array_release(in[0]);
    oly_array_release(in[1]);
    oly_program_release(v);
    oly_program_release(p);
}

TEST(trans_vmap_out_axes)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 2, d23);
    oly_var *y = input(b, OLY_FLOAT32, 1, d4);
    oly_var *s = app1(b, &r_sin, x);
    oly_var *t = app1(b, &r_sin, y);
    oly_var *o[3] = {s, t, y};
    oly_program *p = finish(b, o, 3);
    oly_program *v = NULL;
    /* mapped output moved to its last axis; unmapped ones broadcast at 1, or kept */
    CHECK_OK(oly_program_vmap(p, (const int[]){0, -1}, 5, (const int[]){2, 1, -1}, &v));
    check_print(v, "{ lambda ; a:f32[5,2,3] b:f32[4]. let\n"
                   "    c:f32[5,2,3] = r_sin a\n"
                   "    d:f32[4] = r_sin b\n"
                   "    e:f32[2,3,5] = transpose[permutation=(1, 2, 0)] c\n"
                   "    f:f32[4,5] = broadcast_in_dim[shape=(4, 5) broadcast_dimensions=(0,)] d\n"
                   "  in (e, f, b) }");
    oly_program_release(v);
    v = NULL;
    /* everything unbatched: the program with outputs broadcast as asked */
    CHECK_OK(oly_program_vmap(p, (const int[]){-1, -1}, 2, (const int[]){-1, 0, -1}, &v));
    CHECK_EQ(oly_program_num_eqns(v), 3);
    CHECK_EQ(oly_program_output_aval(v, 1)->dims[0], 2);
    oly_program_release(v);
    v = NULL;
    /* errors */
    CHECK_ERR(oly_program_vmap(p, (const int[]){0, -1}, 5, (const int[]){-1, 0, 0}, &v),
              OLY_ERR_INVALID, "output 0 depends on the batched inputs, but out_axes[0] is -1");
    CHECK_ERR(oly_program_vmap(p, (const int[]){3, -1}, 5, (const int[]){0, 0, 0}, &v),
              OLY_ERR_INVALID, "in_axes[0] = 3 is outside [0, 2]");
    CHECK_ERR(oly_program_vmap(p, (const int[]){0, -1}, 5, (const int[]){0, 2, 0}, &v),
              OLY_ERR_INVALID, "out_axes[1] = 2 is outside [0, 1]");
    CHECK(v == NULL);
    oly_program_release(p);
}

TEST(trans_vmap_missing_rule_and_bad_rule)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *o[1] = {app1(b, &r_norule, x)};
    oly_program *p = finish(b, o, 1);
    oly_program *v = NULL;
    CHECK_ERR(oly_program_vmap(p, (const int[]){0}, 2, (const int[]){0}, &v),
              OLY_ERR_UNSUPPORTED, "r_norule has no batching rule");
    oly_program_release(p);

    /* a batching rule that forgets to shift the reduced axes: caught, named */
    b = builder();
    x = input(b, OLY_FLOAT32, 2, d23);
    oly_params_reduce rp = {.axes = oly__ints(1, (const int64_t[]){1})};
    oly_atom in = V(x), out;
    CHECK_OK(oly__emit(b, &r_badsum, &in, 1, &rp, NULL, 0, &out));
    o[0] = out.var;
    p = finish(b, o, 1);
    CHECK_ERR(oly_program_vmap(p, (const int[]){0}, 4, (const int[]){0}, &v), OLY_ERR_INTERNAL,
              "r_badsum batching rule: output 0 is f32[4,3] with batch axis 0, expected f32[4,2]");
    CHECK(v == NULL);
    oly_program_release(p);
}

TEST(trans_vmap_constants_literals_nested)
{
    /* x * c + 2 with c a constant: c stays unbatched; vmap twice */
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT64, 1, d4);
    double cv[4] = {1, 2, 3, 4};
    oly_array *ca = tu_array(OLY_FLOAT64, 1, d4, cv);
    oly_var *c = NULL;
    CHECK_OK(oly_builder_add_const(b, ca, &c));
    oly_var *m = app2(b, &r_mul, x, c);
    oly_atom two = oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT64, .v.f = 2.0}), a;
    CHECK_OK(oly__emit_bin(b, &r_add, V(m), two, &a));
    oly_atom outs[2] = {a, two};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    oly_program *v1 = NULL, *v2 = NULL;
    CHECK_OK(oly_program_vmap(p, (const int[]){0}, 2, (const int[]){0, -1}, &v1));
    if (v1) CHECK_OK(oly_program_vmap(v1, (const int[]){2}, 3, (const int[]){1, 0}, &v2));
    check_print(v2, "{ lambda a:f64[4]; b:f64[2,4,3]. let\n"
                    "    c:f64[2,4] = broadcast_in_dim[shape=(2, 4) broadcast_dimensions=(1,)] a\n"
                    "    d:f64[3,2,4] = transpose[permutation=(2, 0, 1)] b\n"
                    "    e:f64[3,2,4] = broadcast_in_dim[shape=(3, 2, 4) "
                    "broadcast_dimensions=(1, 2)] c\n"
                    "    f:f64[3,2,4] = r_mul d e\n"
                    "    g:f64[3,2,4] = r_add f 2.0:f64[]\n"
                    "    h:f64[2,3,4] = transpose[permutation=(1, 0, 2)] g\n"
                    "    i:f64[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] "
                    "2.0:f64[]\n"
                    "  in (h, i) }");
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = 0.25 * i - 3;
    oly_array *in = tu_array(OLY_FLOAT64, 3, (const int64_t[]){2, 4, 3}, xv), *out[2] = {0};
    if (v2) CHECK_OK(oly_program_run(v2, 0, &in, 1, out, 2));
    double want[24], w2[3] = {2, 2, 2};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                want[(i * 3 + j) * 4 + k] = xv[(i * 4 + k) * 3 + j] * cv[k] + 2;
    if (out[0]) CHECK(tu_allclose(out[0], want, 24, 1e-15, 0));
    if (out[1]) CHECK(tu_allclose(out[1], w2, 3, 0, 0));
    oly_array_release(out[0]);
    oly_array_release(out[1]);
    oly_array_release(in);
    oly_program_release(v1);
    oly_program_release(v2);
    oly_program_release(p);
    oly_array_release(ca);
}

/* ---------------------------------------------------------------- jvp */

TEST(trans_jvp_symbolic_zeros)
{
    /* (x, y) with y not differentiated: r_io y is copied, its JVP rule unasked */
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *y = input(b, OLY_FLOAT32, 1, d4);
    oly_var *e = app1(b, &r_io, y);
    oly_var *s = app1(b, &r_sin, x);
    oly_var *m = app2(b, &r_mul, s, e);
    oly_var *o[3] = {m, e, x};
    oly_program *p = finish(b, o, 3);
    oly_program *j = NULL;
    bool nz_out[3] = {false, true, false};
    io_jvp_calls = 0;
    CHECK_OK(oly_program_jvp(p, (const bool[]){true, false}, &j, nz_out));
    CHECK_EQ(io_jvp_calls, 0);
    CHECK(nz_out[0] && !nz_out[1] && nz_out[2]);
    check_print(j, "{ lambda ; a:f32[4] b:f32[4] c:f32[4]. let\n"
                   "    d:f32[4] = r_io b\n"
                   "    e:f32[4] = r_sin a\n"
                   "    f:f32[4] = r_cos a\n"
                   "    g:f32[4] = r_mul f c\n"
                   "    h:f32[4] = r_mul e d\n"
                   "    i:f32[4] = r_mul g d\n"
                   "  in (h, d, a, i, c) }");
    oly_program_release(j);
    j = NULL;
    /* differentiating y asks r_io's rule, whose failure is reported */
    CHECK_ERR(oly_program_jvp(p, (const bool[]){false, true}, &j, nz_out), OLY_ERR_INTERNAL,
              "jvp of r_io: r_io: JVP rule called");
    CHECK_EQ(io_jvp_calls, 1);
    /* nothing differentiated: the same equations, no tangents */
    CHECK_OK(oly_program_jvp(p, (const bool[]){false, false}, &j, nz_out));
    CHECK_EQ(oly_program_num_outputs(j), 3);
    CHECK_EQ(oly_program_num_eqns(j), 3);
    oly_program_release(j);
    oly_program_release(p);
}

TEST(trans_jvp_integer_values_have_zero_tangents)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *n = input(b, OLY_INT32, 1, d4);
    oly_atom c;
    CHECK_OK(oly__emit_convert(b, V(n), OLY_FLOAT32, &c));
    oly_var *m = app2(b, &r_mul, x, c.var);
    oly_var *o[2] = {m, n};
    oly_program *p = finish(b, o, 2);
    oly_program *j = NULL;
    bool nz_out[2];
    /* convert_element_type has no JVP rule of ours: it is never asked */
    CHECK_OK(oly_program_jvp(p, (const bool[]){true, true}, &j, nz_out));
    CHECK(nz_out[0] && !nz_out[1]);
    check_print(j, "{ lambda ; a:f32[4] b:i32[4] c:f32[4] d:i32[4]. let\n"
                   "    e:f32[4] = convert_element_type[new_dtype=float32] b\n"
                   "    f:f32[4] = r_mul a e\n"
                   "    g:f32[4] = r_mul c e\n"
                   "  in (f, b, g) }");
    oly_program_release(j);
    oly_program_release(p);
}

TEST(trans_jvp_missing_rule)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *o[1] = {app1(b, &r_norule, app1(b, &r_sin, x))};
    oly_program *p = finish(b, o, 1);
    oly_program *j = NULL;
    bool nz_out[1];
    CHECK_ERR(oly_program_jvp(p, (const bool[]){true}, &j, nz_out), OLY_ERR_UNSUPPORTED,
              "r_norule has no JVP rule");
    CHECK(j == NULL);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- linearize */

TEST(trans_linearize_splits_known_and_linear)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *s = app1(b, &r_sin, x);
    oly_var *o[1] = {app2(b, &r_mul, s, x)};
    oly_program *p = finish(b, o, 1);
    oly_program *k = NULL, *l = NULL;
    int n_res = -1;
    bool nz_out[1];
    CHECK_OK(oly_program_linearize(p, (const bool[]){true}, &k, &l, &n_res, nz_out));
    CHECK_EQ(n_res, 3);
    CHECK(nz_out[0]);
    check_print(k, "{ lambda ; a:f32[4]. let\n"
                   "    b:f32[4] = r_sin a\n"
                   "    c:f32[4] = r_cos a\n"
                   "    d:f32[4] = r_mul b a\n"
                   "  in (d, c, a, b) }");
    check_print(l, "{ lambda ; a:f32[4] b:f32[4] c:f32[4] d:f32[4]. let\n"
                   "    e:f32[4] = r_mul a d\n"
                   "    f:f32[4] = r_mul e b\n"
                   "    g:f32[4] = r_mul c d\n"
                   "    h:f32[4] = r_add f g\n"
                   "  in (h,) }");
    /* and the transpose of the linear part is the VJP */
    oly_program *t = NULL;
    if (l) CHECK_OK(oly_program_transpose(l, n_res, &t));
    check_print(t, "{ lambda ; a:f32[4] b:f32[4] c:f32[4] d:f32[4]. let\n"
                   "    e:f32[4] = r_mul d c\n"
                   "    f:f32[4] = r_mul d b\n"
                   "    g:f32[4] = r_mul f a\n"
                   "    h:f32[4] = add e g\n"
                   "  in (h,) }");
    if (l) CHECK(rc_check_linear_program("linearized sin(x)*x", l, n_res));
    oly_program_release(t);
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(p);
}

TEST(trans_linearize_effects_run_exactly_once)
{
    /* r_io on an undifferentiated input and r_tap on the differentiated one:
     * both stay in the primal program, once each; the linear program has none */
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT64, 1, d4);
    oly_var *y = input(b, OLY_FLOAT64, 1, d4);
    oly_var *e = app1(b, &r_io, y);
    oly_var *t = app1(b, &r_tap, x);
    oly_var *o[1] = {app2(b, &r_mul, app1(b, &r_sin, t), e)};
    oly_program *p = finish(b, o, 1);
    oly_program *k = NULL, *l = NULL;
    int n_res = 0;
    bool nz_out[1];
    CHECK_OK(oly_program_linearize(p, (const bool[]){true, false}, &k, &l, &n_res, nz_out));
    if (k && l) {
        CHECK_EQ(count_prim(k, "r_io"), 1);
        CHECK_EQ(count_prim(k, "r_tap"), 1);
        CHECK_EQ(count_prim(l, "r_io") + count_prim(l, "r_tap"), 0);
        CHECK_EQ(oly_program_effects(l), 0);
        CHECK_EQ(oly_program_effects(k), OLY_EFFECT_IO);
        double xv[4] = {0.1, 0.2, 0.3, 0.4}, yv[4] = {1, 2, 3, 4};
        oly_array *in[2] = {tu_array(OLY_FLOAT64, 1, d4, xv), tu_array(OLY_FLOAT64, 1, d4, yv)};
        oly_array *kout[8] = {0};
        io_runs = tap_runs = 0;
        CHECK_OK(oly_program_run(k, 0, in, 2, kout, 1 + n_res));
        CHECK_EQ(io_runs, 1);
        CHECK_EQ(tap_runs, 1);
        oly_array *lin[8] = {0}, *lout = NULL;
        for (int r = 0; r < n_res; r++) lin[r] = kout[1 + r];
        lin[n_res] = in[0]; /* tangent direction = x */
        CHECK_OK(oly_program_run(l, 0, lin, n_res + 1, &lout, 1));
        CHECK_EQ(io_runs, 1);
        CHECK_EQ(tap_runs, 1);
        double want[4];
        for (int i = 0; i < 4; i++) want[i] = cos(xv[i]) * yv[i] * xv[i];
        if (lout) CHECK(tu_allclose(lout, want, 4, 1e-12, 1e-12));
        oly_array_release(lout);
        for (int i = 0; i < 1 + n_res; i++) oly_array_release(kout[i]);
        oly_array_release(in[0]);
        oly_array_release(in[1]);
    }
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(p);
}

TEST(trans_partial_eval_keeps_literals_and_constants)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *u = input(b, OLY_FLOAT32, 1, d4);
    double cv[4] = {1, 2, 3, 4};
    oly_array *ca = tu_array(OLY_FLOAT32, 1, d4, cv);
    oly_var *c = NULL;
    CHECK_OK(oly_builder_add_const(b, ca, &c));
    oly_var *s = app1(b, &r_sin, x);
    oly_atom two = oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .v.f = 2.0}), m;
    CHECK_OK(oly__emit_bin(b, &r_mul, V(u), two, &m));
    oly_var *a = app2(b, &r_add, m.var, c);
    oly_var *o[3] = {app2(b, &r_mul, a, s), s, app2(b, &r_mul, s, s)};
    oly_program *p = finish(b, o, 3);
    oly_program *k = NULL, *un = NULL;
    int n_res = -1;
    bool ou[3];
    CHECK_OK(oly__partial_eval(p, (const bool[]){false, true}, &k, &un, &n_res, ou));
    CHECK_EQ(n_res, 1);
    CHECK(ou[0] && !ou[1] && !ou[2]);
    check_print(k, "{ lambda a:f32[4]; b:f32[4]. let\n"
                   "    c:f32[4] = r_sin b\n"
                   "    d:f32[4] = r_mul c c\n"
                   "  in (c, d, c) }");
    check_print(un, "{ lambda a:f32[4]; b:f32[4] c:f32[4]. let\n"
                    "    d:f32[4] = r_mul c 2.0:f32[]\n"
                    "    e:f32[4] = r_add d a\n"
                    "    f:f32[4] = r_mul e b\n"
                    "  in (f,) }");
    oly_program_release(k);
    oly_program_release(un);
    oly_program_release(p);
    oly_array_release(ca);
}

TEST(trans_linearize_nothing_differentiated)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *o[1] = {app1(b, &r_norule, x)}; /* no rule needed: zero tangents */
    oly_program *p = finish(b, o, 1);
    oly_program *k = NULL, *l = NULL;
    int n_res = -1;
    bool nz_out[1] = {true};
    CHECK_OK(oly_program_linearize(p, (const bool[]){false}, &k, &l, &n_res, nz_out));
    CHECK_EQ(n_res, 0);
    CHECK(!nz_out[0]);
    check_print(k, "{ lambda ; a:f32[4]. let\n"
                   "    b:f32[4] = r_norule a\n"
                   "  in (b,) }");
    check_print(l, "{ lambda ; . let  in () }");
    oly_program *t = NULL;
    if (l) CHECK_OK(oly_program_transpose(l, 0, &t));
    if (t) CHECK_EQ(oly_program_num_outputs(t), 0);
    oly_program_release(t);
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- transpose */

TEST(trans_transpose_hand_built)
{
    /* (r; v, u) -> (neg(r*v + v), r*v); u unused gets zeros */
    oly_builder *b = builder();
    oly_var *r = input(b, OLY_FLOAT64, 1, d4);
    oly_var *v = input(b, OLY_FLOAT64, 1, d4);
    input(b, OLY_FLOAT64, 2, d23);
    oly_var *y = app2(b, &r_mul, r, v);
    oly_var *z = app2(b, &r_add, y, v);
    oly_var *c = app1(b, &r_sin, r); /* non-linear: emitted forward */
    oly_var *o[2] = {app1(b, &r_neg, app2(b, &r_mul, z, c)), y};
    oly_program *p = finish(b, o, 2);
    oly_program *t = NULL;
    CHECK_OK(oly_program_transpose(p, 1, &t));
    check_print(t, "{ lambda ; a:f64[4] b:f64[4] c:f64[4]. let\n"
                   "    d:f64[4] = r_sin a\n"
                   "    e:f64[4] = r_neg b\n"
                   "    f:f64[4] = r_mul e d\n"
                   "    g:f64[4] = add c f\n"
                   "    h:f64[4] = r_mul g a\n"
                   "    i:f64[4] = add f h\n"
                   "    j:f64[2,3] = broadcast_in_dim[shape=(2, 3) broadcast_dimensions=()] "
                   "0.0:f64[]\n"
                   "  in (i, j) }");
    CHECK(rc_check_linear_program("hand-built", p, 1));
    oly_program_release(t);
    t = NULL;
    CHECK_ERR(oly_program_transpose(p, 4, &t), OLY_ERR_INVALID, "n_res = 4 is outside [0, 3]");
    oly_program_release(p);
}

TEST(trans_transpose_symbolic_zero_skips_rules)
{
    /* the output that depends on r_norule gets no cotangent path: a literal
     * output and a non-linear output; the linear chain needs r_mul only */
    oly_builder *b = builder();
    oly_var *r = input(b, OLY_FLOAT32, 1, d4);
    oly_var *v = input(b, OLY_FLOAT32, 1, d4);
    oly_var *dead = app1(b, &r_norule, v); /* linear var, its cotangent never arrives */
    (void)dead;
    oly_var *y = app2(b, &r_mul, r, v);
    oly_atom outs[3] = {V(y), V(app1(b, &r_sin, r)),
                        oly_atom_lit((oly_scalar){.dtype = OLY_FLOAT32, .v.f = 1.0})};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 3, &p));
    oly_builder_free(b);
    oly_program *t = NULL;
    CHECK_OK(oly_program_transpose(p, 1, &t));
    check_print(t, "{ lambda ; a:f32[4] b:f32[4] c:f32[4] d:f32[]. let\n"
                   "    e:f32[4] = r_mul b a\n"
                   "  in (e,) }");
    oly_program_release(t);
    oly_program_release(p);
}

TEST(trans_transpose_missing_rule)
{
    oly_builder *b = builder();
    oly_var *r = input(b, OLY_FLOAT32, 1, d4);
    oly_var *v = input(b, OLY_FLOAT32, 1, d4);
    oly_var *o[1] = {app2(b, &r_mul, r, app1(b, &r_norule, v))};
    oly_program *p = finish(b, o, 1);
    oly_program *t = NULL;
    CHECK_ERR(oly_program_transpose(p, 1, &t), OLY_ERR_UNSUPPORTED,
              "r_norule has no transpose rule");
    CHECK(t == NULL);
    oly_program_release(p);
}

/* A rule that marks an output nonzero and leaves it unset gets a clear error
 * from either driver. */
TEST(trans_rule_leaves_an_output_unset)
{
    oly_builder *b = builder();
    oly_var *x = input(b, OLY_FLOAT32, 1, d4);
    oly_var *o[1] = {app1(b, &r_unset, x)};
    oly_program *p = finish(b, o, 1);
    oly_program *j = NULL, *t = NULL;
    bool nz_out[1];
    CHECK_ERR(oly_program_jvp(p, (const bool[]){true}, &j, nz_out), OLY_ERR_INTERNAL,
              "r_unset JVP rule did not set tangent of output 0");
    CHECK(j == NULL);
    CHECK_ERR(oly_program_transpose(p, 0, &t), OLY_ERR_INTERNAL,
              "r_unset transpose rule did not set cotangent of input 0");
    CHECK(t == NULL);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- the rule checker */

TEST(trans_rulecheck_passes_good_rules)
{
    setup_rows();
    rc_case sin_case = {.row = &r_sin, .n_in = 1, .in = {RC_F64(2, 3)}};
    CHECK(rc_check_all(&sin_case));
    rc_case cos_case = {.row = &r_cos, .n_in = 1, .in = {RC_F64(3)}};
    CHECK(rc_check_all(&cos_case));
    rc_case mul_case = {.row = &r_mul, .n_in = 2, .in = {RC_F64(2, 3), RC_F64(2, 3)},
                        .linear = {false, true}};
    CHECK(rc_check_all(&mul_case));
    mul_case.linear[0] = true;
    mul_case.linear[1] = false;
    CHECK(rc_check_transpose(&mul_case));
    rc_case add_case = {.row = &r_add, .n_in = 2, .in = {RC_F64(4), RC_F64(4)},
                        .linear = {true, true}};
    CHECK(rc_check_all(&add_case));
    oly_params_reduce rp = {.axes = oly__ints(1, (const int64_t[]){1})};
    rc_case sum_case = {.row = &r_sum, .params = &rp, .n_in = 1, .in = {RC_F64(2, 3, 2)},
                        .linear = {true}};
    CHECK(rc_check_all(&sum_case));
    rc_case f32_case = {.row = &r_sin, .n_in = 1, .in = {RC_F32(5)}};
    CHECK(rc_check_all(&f32_case));
    rc_case c128_case = {.row = &r_mul, .n_in = 2,
                         .in = {RC_AVAL(OLY_COMPLEX128, 3), RC_AVAL(OLY_COMPLEX128, 3)},
                         .linear = {true, false}};
    CHECK(rc_check_all(&c128_case));
    rc_case csin_case = {.row = &r_sin, .n_in = 1, .in = {RC_AVAL(OLY_COMPLEX128, 2)}};
    CHECK(rc_check_all(&csin_case));
    /* integer inputs are not differentiated; vmap still checked */
    rc_case int_case = {.row = &r_mul, .n_in = 2,
                        .in = {RC_AVAL(OLY_INT32, 2, 2), RC_AVAL(OLY_INT32, 2, 2)}};
    CHECK(rc_check_all(&int_case));
}

TEST(trans_rulecheck_catches_bad_rules)
{
    setup_rows();
    rc_case bad_jvp = {.row = &r_badsin, .n_in = 1, .in = {RC_F64(3)}};
    EXPECT_RC_FAILS(rc_check_jvp(&bad_jvp));
    rc_case bad_t = {.row = &r_badmul, .n_in = 2, .in = {RC_F64(3), RC_F64(3)},
                     .linear = {false, true}};
    EXPECT_RC_FAILS(rc_check_transpose(&bad_t));
    oly_params_reduce rp = {.axes = oly__ints(1, (const int64_t[]){0})};
    rc_case bad_batch = {.row = &r_badsum, .params = &rp, .n_in = 1, .in = {RC_F64(3, 3)}};
    EXPECT_RC_FAILS(rc_check_vmap(&bad_batch));
    /* add is affine, not linear, in one operand with the other a residual */
    rc_case affine = {.row = &r_add, .n_in = 2, .in = {RC_F64(3), RC_F64(3)},
                      .linear = {true, false}};
    EXPECT_RC_FAILS(rc_check_transpose(&affine));
    rc_case no_rules = {.row = &r_norule, .n_in = 1, .in = {RC_F64(3)}};
    EXPECT_RC_FAILS(rc_check_all(&no_rules));
}

/* The real rows, as far as their rules have landed (the families' own tests
 * walk every row; this one pins the drivers to real primitives). */
TEST(trans_real_primitives)
{
    int ran = 0;
    if (oly__prim_sin.batch && oly__prim_sin.jvp && oly__prim_mul.transpose) {
        rc_case c = {.prim = "sin", .n_in = 1, .in = {RC_F64(2, 3)}};
        CHECK(rc_check_all(&c));
        ran++;
    }
    if (oly__prim_mul.batch && oly__prim_mul.jvp && oly__prim_mul.transpose &&
        oly__prim_add.transpose) {
        rc_case c = {.prim = "mul", .n_in = 2, .in = {RC_F64(3), RC_F64(3)},
                     .linear = {false, true}};
        CHECK(rc_check_all(&c));
        ran++;
    }
    if (oly__prim_reduce_sum.batch && oly__prim_reduce_sum.jvp &&
        oly__prim_reduce_sum.transpose && oly__prim_broadcast_in_dim.batch) {
        oly_params_reduce rp = {.axes = oly__ints(1, (const int64_t[]){0})};
        rc_case c = {.prim = "reduce_sum", .params = &rp, .n_in = 1, .in = {RC_F64(3, 2)},
                     .linear = {true}};
        CHECK(rc_check_all(&c));
        ran++;
    }
    if (oly__prim_dot_general.batch && oly__prim_dot_general.jvp &&
        oly__prim_dot_general.transpose) {
        oly_params_dot_general dn = {.lhs_contracting = oly__ints(1, (const int64_t[]){1}),
                                     .rhs_contracting = oly__ints(1, (const int64_t[]){0})};
        rc_case c = {.prim = "dot_general", .params = &dn, .n_in = 2,
                     .in = {RC_F64(2, 3), RC_F64(3, 4)}, .linear = {false, true}};
        CHECK(rc_check_all(&c));
        ran++;
    }
    if (ran < 4) fprintf(stderr, "    (trans_real_primitives: %d of 4 rule sets present)\n", ran);
}

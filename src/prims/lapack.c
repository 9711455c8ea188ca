/* lapack.c — the matrix factorisation rows, JAX's lax.linalg primitives:
 * cholesky, triangular_solve, lu, qr, eigh, svd and eig (semantics in
 * include/olympus.h beside their params; kernels in src/cpu/lapack.c). Every
 * row takes f32/f64/c64/c128 matrices [..., m, n], batched over the leading
 * dims.
 *
 * Rules. Batching moves the batch axis to the front (triangular_solve
 * broadcasts an unbatched operand) and binds the same row: the kernels loop
 * over leading dims. The JVPs are JAX's formulas, built from matmuls
 * (dot_general), triangular solves, masks (iota comparisons and select_n)
 * and elementwise rows, so they linearize and transpose through those rows.
 * Where a row reads one triangle of a Hermitian operand (cholesky, eigh) the
 * tangent is completed from that same triangle, so the derivative is that of
 * what the kernel computes, also for a tangent that is not Hermitian. Only
 * triangular_solve is linear (in b): its transpose solves with op(a)
 * transposed. The JVPs JAX leaves out are errors here too: qr with m < n or
 * full_matrices on a non-square matrix, svd's vectors with full_matrices on
 * a non-square matrix, eig's eigenvectors. */
#include "internal.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- dtypes and shapes */

static bool lapack_dtype(oly_dtype t)
{
    return t == OLY_FLOAT32 || t == OLY_FLOAT64 || t == OLY_COMPLEX64 || t == OLY_COMPLEX128;
}

static oly_dtype real_of(oly_dtype t)
{
    return t == OLY_COMPLEX64 ? OLY_FLOAT32 : t == OLY_COMPLEX128 ? OLY_FLOAT64 : t;
}

static oly_dtype complex_of(oly_dtype t)
{
    return t == OLY_FLOAT32 ? OLY_COMPLEX64 : t == OLY_FLOAT64 ? OLY_COMPLEX128 : t;
}

/* x is a [..., m, n] matrix (square when asked) of a LAPACK dtype. */
static oly_status check_matrix(const char *who, const char *what, const oly_aval *x, bool square)
{
    if (!lapack_dtype(x->dtype))
        return oly__error(OLY_ERR_TYPE,
                          "%s: %s must be float32, float64, complex64 or complex128, got %s", who,
                          what, oly__show_aval(x).s);
    if (x->rank < 2)
        return oly__error(OLY_ERR_SHAPE, "%s: %s must have rank >= 2 (a [..., m, n] matrix), got %s",
                          who, what, oly__show_aval(x).s);
    if (square && x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return oly__error(OLY_ERR_SHAPE, "%s: %s must be square in its last two dims, got %s", who,
                          what, oly__show_aval(x).s);
    return OLY_OK;
}

static oly_status one_operand(const oly_shape_ctx *ctx, const char *who)
{
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "%s: expected 1 operand, got %d", who, ctx->n_in);
    return OLY_OK;
}

/* x with its last two dims replaced by (m, n) (or its last dim dropped and
 * replaced by k when m < 0), of dtype t. */
static oly_aval reshaped(const oly_aval *x, oly_dtype t, int64_t m, int64_t n)
{
    oly_aval a = *x;
    a.dtype = t;
    a.weak = false;
    if (m < 0) {
        a.rank = x->rank - 1;
        a.dims[a.rank - 1] = n;
    } else {
        a.dims[a.rank - 2] = m;
        a.dims[a.rank - 1] = n;
    }
    return a;
}

static oly_status cholesky_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(one_operand(ctx, "cholesky"));
    OLY_TRY(check_matrix("cholesky", "operand", &ctx->in[0], true));
    out[0] = ctx->in[0];
    out[0].weak = false;
    return OLY_OK;
}

static oly_status triangular_solve_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_triangular_solve *p = ctx->params;
    if (ctx->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "triangular_solve: expected 2 operands (a, b), got %d",
                          ctx->n_in);
    const oly_aval *a = &ctx->in[0], *b = &ctx->in[1];
    OLY_TRY(check_matrix("triangular_solve", "a", a, true));
    OLY_TRY(check_matrix("triangular_solve", "b", b, false));
    if (a->dtype != b->dtype)
        return oly__error(OLY_ERR_TYPE, "triangular_solve: a and b must have equal dtypes, got %s and %s",
                          oly__show_aval(a).s, oly__show_aval(b).s);
    bool same = a->rank == b->rank;
    for (int d = 0; same && d < a->rank - 2; d++) same = a->dims[d] == b->dims[d];
    if (!same)
        return oly__error(OLY_ERR_SHAPE,
                          "triangular_solve: a and b must have equal batch dims, got %s and %s",
                          oly__show_aval(a).s, oly__show_aval(b).s);
    int64_t k = a->dims[a->rank - 1];
    int64_t want = p->left_side ? b->dims[b->rank - 2] : b->dims[b->rank - 1];
    if (k != want)
        return oly__error(OLY_ERR_SHAPE,
                          "triangular_solve: a %s does not fit b %s with left_side=%s (a's size "
                          "must equal b's %s dim)",
                          oly__show_aval(a).s, oly__show_aval(b).s,
                          p->left_side ? "True" : "False", p->left_side ? "second-to-last" : "last");
    out[0] = *b;
    out[0].weak = false;
    return OLY_OK;
}

static oly_status lu_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(one_operand(ctx, "lu"));
    const oly_aval *a = &ctx->in[0];
    OLY_TRY(check_matrix("lu", "operand", a, false));
    int64_t m = a->dims[a->rank - 2], n = a->dims[a->rank - 1];
    out[0] = *a;
    out[0].weak = false;
    out[1] = reshaped(a, OLY_INT32, -1, m < n ? m : n);
    out[2] = reshaped(a, OLY_INT32, -1, m);
    return OLY_OK;
}

static oly_status qr_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_qr *p = ctx->params;
    OLY_TRY(one_operand(ctx, "qr"));
    const oly_aval *a = &ctx->in[0];
    OLY_TRY(check_matrix("qr", "operand", a, false));
    int64_t m = a->dims[a->rank - 2], n = a->dims[a->rank - 1], k = m < n ? m : n;
    out[0] = reshaped(a, a->dtype, m, p->full_matrices ? m : k);
    out[1] = reshaped(a, a->dtype, p->full_matrices ? m : k, n);
    return OLY_OK;
}

static oly_status eigh_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(one_operand(ctx, "eigh"));
    const oly_aval *a = &ctx->in[0];
    OLY_TRY(check_matrix("eigh", "operand", a, true));
    out[0] = *a;
    out[0].weak = false;
    out[1] = reshaped(a, real_of(a->dtype), -1, a->dims[a->rank - 1]);
    return OLY_OK;
}

static int svd_num_outputs(const void *params, int n_in)
{
    (void)n_in;
    const oly_params_svd *p = params;
    return p && p->compute_uv ? 3 : 1;
}

static oly_status svd_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_svd *p = ctx->params;
    OLY_TRY(one_operand(ctx, "svd"));
    const oly_aval *a = &ctx->in[0];
    OLY_TRY(check_matrix("svd", "operand", a, false));
    int64_t m = a->dims[a->rank - 2], n = a->dims[a->rank - 1], k = m < n ? m : n;
    out[0] = reshaped(a, real_of(a->dtype), -1, k);
    if (p->compute_uv) {
        out[1] = reshaped(a, a->dtype, m, p->full_matrices ? m : k);
        out[2] = reshaped(a, a->dtype, p->full_matrices ? n : k, n);
    }
    return OLY_OK;
}

static int eig_num_outputs(const void *params, int n_in)
{
    (void)n_in;
    const oly_params_eig *p = params;
    return p ? 1 + p->compute_left_eigenvectors + p->compute_right_eigenvectors : 1;
}

static oly_status eig_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_eig *p = ctx->params;
    OLY_TRY(one_operand(ctx, "eig"));
    const oly_aval *a = &ctx->in[0];
    OLY_TRY(check_matrix("eig", "operand", a, true));
    int64_t n = a->dims[a->rank - 1];
    oly_dtype c = complex_of(a->dtype);
    int k = 0;
    out[k++] = reshaped(a, c, -1, n);
    if (p->compute_left_eigenvectors) out[k++] = reshaped(a, c, n, n);
    if (p->compute_right_eigenvectors) out[k++] = reshaped(a, c, n, n);
    return OLY_OK;
}

/* ---------------------------------------------------------------- batching */

/* The operand's batch axis to the front; the same row on it. */
static oly_status lead_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, &x, out));
    for (int j = 0; j < eqn->n_out; j++) out_bdim[j] = 0;
    return OLY_OK;
}

static oly_status triangular_solve_batch(oly_batch_ctx *ctx, const oly_eqn *eqn,
                                         const oly_atom *in, const int *in_bdim, oly_atom *out,
                                         int *out_bdim)
{
    oly_atom x[2];
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x[0]));
    OLY_TRY(oly__batch_move(ctx, in[1], in_bdim[1], 0, &x[1]));
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, x, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* ---------------------------------------------------------------- matrix helpers
 * Each emits into b; matrices are [..., m, n] of equal batch dims. */

static oly_atom lit(oly_dtype t, double v)
{
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    if (oly_dtype_is_complex(t)) s.v.c[0] = v;
    else if (oly_dtype_is_float(t)) s.v.f = v;
    else s.v.i = (int64_t)v;
    return oly_atom_lit(s);
}

static oly_aval aval(oly_atom x) { return oly__atom_aval(&x); }

static oly_status add(oly_builder *b, oly_atom x, oly_atom y, oly_atom *o)
{
    return oly__emit_bin(b, &oly__prim_add, x, y, o);
}
static oly_status sub(oly_builder *b, oly_atom x, oly_atom y, oly_atom *o)
{
    return oly__emit_bin(b, &oly__prim_sub, x, y, o);
}
static oly_status mul(oly_builder *b, oly_atom x, oly_atom y, oly_atom *o)
{
    return oly__emit_bin(b, &oly__prim_mul, x, y, o);
}
static oly_status dvd(oly_builder *b, oly_atom x, oly_atom y, oly_atom *o)
{
    return oly__emit_bin(b, &oly__prim_div, x, y, o);
}

/* x @ y over the last two dims, batched over the others. */
static oly_status mm(oly_builder *b, oly_atom x, oly_atom y, oly_atom *o)
{
    int r = aval(x).rank;
    oly_params_dot_general p;
    memset(&p, 0, sizeof p);
    p.lhs_contracting = (oly_ints){.n = 1, .v = {r - 1}};
    p.rhs_contracting = (oly_ints){.n = 1, .v = {r - 2}};
    p.lhs_batch = oly__ints_range(r - 2);
    p.rhs_batch = oly__ints_range(r - 2);
    return oly__emit_dot_general(b, x, y, &p, o);
}

/* The last two dims swapped. */
static oly_status mT(oly_builder *b, oly_atom x, oly_atom *o)
{
    int r = aval(x).rank;
    oly_ints perm = oly__ints_range(r);
    perm.v[r - 2] = r - 1;
    perm.v[r - 1] = r - 2;
    return oly__emit_transpose(b, x, &perm, o);
}

static oly_status conj_if(oly_builder *b, oly_atom x, oly_atom *o)
{
    if (!oly_dtype_is_complex(aval(x).dtype)) {
        *o = x;
        return OLY_OK;
    }
    return oly__emit_un(b, &oly__prim_conj, x, o);
}

/* The conjugate transpose. */
static oly_status mH(oly_builder *b, oly_atom x, oly_atom *o)
{
    oly_atom t;
    OLY_TRY(mT(b, x, &t));
    return conj_if(b, t, o);
}

/* int32 iota over shape's dims along dim. */
static oly_status iota_of(oly_builder *b, const oly_aval *shape, int dim, oly_atom *o)
{
    oly_params_iota p;
    memset(&p, 0, sizeof p);
    p.dtype = OLY_INT32;
    p.shape = oly__ints(shape->rank, shape->dims);
    p.dimension = dim;
    return oly__emit(b, &oly__prim_iota, NULL, 0, &p, NULL, 0, o);
}

enum { LOWER, UPPER, DIAG };

/* A bool mask over shape's last two dims (i, j): LOWER j <= i + k, UPPER
 * j >= i + k, DIAG i == j. */
static oly_status mask(oly_builder *b, const oly_aval *shape, int kind, int k, oly_atom *o)
{
    oly_aval s = *shape;
    s.dtype = OLY_INT32;
    s.weak = false;
    oly_atom i, j;
    OLY_TRY(iota_of(b, &s, s.rank - 2, &i));
    OLY_TRY(iota_of(b, &s, s.rank - 1, &j));
    if (kind == DIAG) return oly__emit_bin(b, &oly__prim_eq, i, j, o);
    if (k != 0) OLY_TRY(add(b, i, lit(OLY_INT32, k), &i));
    return oly__emit_bin(b, kind == LOWER ? &oly__prim_le : &oly__prim_ge, j, i, o);
}

static oly_status zeros(oly_builder *b, const oly_aval *a, oly_atom *o)
{
    oly_aval z = *a;
    z.weak = false;
    return oly__emit_full(b, &z, 0, o);
}

/* x where the mask holds, else 0. */
static oly_status keep(oly_builder *b, oly_atom x, int kind, int k, oly_atom *o)
{
    oly_aval a = aval(x);
    oly_atom m, z;
    OLY_TRY(mask(b, &a, kind, k, &m));
    OLY_TRY(zeros(b, &a, &z));
    return oly__emit_select(b, m, z, x, o);
}

static oly_status tril(oly_builder *b, oly_atom x, int k, oly_atom *o)
{
    return keep(b, x, LOWER, k, o);
}
static oly_status triu(oly_builder *b, oly_atom x, int k, oly_atom *o)
{
    return keep(b, x, UPPER, k, o);
}

/* The identity over shape's last two dims (ones where i == j), of dtype t. */
static oly_status eye(oly_builder *b, const oly_aval *shape, oly_dtype t, oly_atom *o)
{
    oly_atom m;
    OLY_TRY(mask(b, shape, DIAG, 0, &m));
    return oly__emit_convert(b, m, t, o);
}

/* The diagonal [..., n] of a square [..., n, n]. */
static oly_status diag(oly_builder *b, oly_atom x, oly_atom *o)
{
    oly_atom d;
    OLY_TRY(keep(b, x, DIAG, 0, &d));
    oly_ints ax = {.n = 1, .v = {aval(x).rank - 1}};
    return oly__emit_reduce_sum(b, d, &ax, o);
}

/* v [..., k] broadcast to [..., rows, k] (as_row: v[..., None, :]) or to
 * [..., k, rows] (v[..., :, None]). */
static oly_status spread(oly_builder *b, oly_atom v, int64_t rows, bool as_row, oly_atom *o)
{
    oly_aval a = aval(v);
    int q = a.rank, r = q + 1;
    oly_ints shape = oly__ints(q, a.dims), dims = oly__ints_range(q);
    shape.n = r;
    if (as_row) {
        shape.v[r - 2] = rows;
        shape.v[r - 1] = a.dims[q - 1];
        dims.v[q - 1] = r - 1;
    } else {
        shape.v[r - 2] = a.dims[q - 1];
        shape.v[r - 1] = rows;
        dims.v[q - 1] = r - 2;
    }
    return oly__emit_broadcast_in_dim(b, v, &shape, &dims, o);
}

/* x converted to dtype t (the real part of a complex x when t is real). */
static oly_status to(oly_builder *b, oly_atom x, oly_dtype t, oly_atom *o)
{
    if (oly_dtype_is_complex(aval(x).dtype) && !oly_dtype_is_complex(t))
        OLY_TRY(oly__emit_un(b, &oly__prim_real, x, &x));
    return oly__emit_convert(b, x, t, o);
}

/* The Hermitian matrix whose lower (or upper) triangle is x's: the triangle
 * the kernels of cholesky and eigh read, the diagonal's real part. */
static oly_status hermitian_part(oly_builder *b, oly_atom x, bool lower, oly_atom *o)
{
    oly_dtype t = aval(x).dtype;
    oly_atom tri, triH, d, re = x, s;
    OLY_TRY(lower ? tril(b, x, -1, &tri) : triu(b, x, 1, &tri));
    OLY_TRY(mH(b, tri, &triH));
    if (oly_dtype_is_complex(t)) OLY_TRY(to(b, x, real_of(t), &re));
    OLY_TRY(oly__emit_convert(b, re, t, &re));
    OLY_TRY(keep(b, re, DIAG, 0, &d));
    OLY_TRY(add(b, tri, triH, &s));
    return add(b, s, d, o);
}

static oly_status tsolve(oly_builder *b, oly_atom a, oly_atom x,
                         const oly_params_triangular_solve *p, oly_atom *o)
{
    oly_atom in[2] = {a, x};
    return oly__emit(b, &oly__prim_triangular_solve, in, 2, p, NULL, 0, o);
}

/* x[..., r0:r1, c0:c1] */
static oly_status block(oly_builder *b, oly_atom x, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        oly_atom *o)
{
    oly_aval a = aval(x);
    int r = a.rank;
    if (r0 == 0 && c0 == 0 && r1 == a.dims[r - 2] && c1 == a.dims[r - 1]) {
        *o = x;
        return OLY_OK;
    }
    oly_params_slice p;
    memset(&p, 0, sizeof p);
    p.start_indices.n = p.limit_indices.n = p.strides.n = r;
    for (int d = 0; d < r; d++) {
        p.start_indices.v[d] = 0;
        p.limit_indices.v[d] = a.dims[d];
        p.strides.v[d] = 1;
    }
    p.start_indices.v[r - 2] = r0;
    p.limit_indices.v[r - 2] = r1;
    p.start_indices.v[r - 1] = c0;
    p.limit_indices.v[r - 1] = c1;
    return oly__emit_1(b, &oly__prim_slice, x, &p, o);
}

/* x padded with zeros after its last rows / columns. */
static oly_status pad_after(oly_builder *b, oly_atom x, int64_t rows, int64_t cols, oly_atom *o)
{
    if (rows == 0 && cols == 0) {
        *o = x;
        return OLY_OK;
    }
    oly_aval a = aval(x);
    int r = a.rank;
    oly_params_pad p;
    memset(&p, 0, sizeof p);
    p.lo.n = p.hi.n = p.interior.n = r;
    p.hi.v[r - 2] = rows;
    p.hi.v[r - 1] = cols;
    oly_atom in[2] = {x, lit(a.dtype, 0)};
    return oly__emit(b, &oly__prim_pad, in, 2, &p, NULL, 0, o);
}

static oly_status unimplemented(const char *who, const char *what, const oly_aval *a)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s: the derivative of %s is not implemented (operand %s)",
                      who, what, oly__show_aval(a).s);
}

/* ---------------------------------------------------------------- cholesky */

/* JAX's rule (Murray, arXiv:1602.07527): L' = L phi(L^-1 S' L^-H), phi the
 * lower triangle with its diagonal halved; S' the Hermitian tangent. */
static oly_status cholesky_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                               const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                               oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom L = primal_out[0], s, tmp, x, phi, scale, e;
    oly_aval a = aval(L);
    OLY_TRY(hermitian_part(b, tangent[0], true, &s));
    oly_params_triangular_solve right = {.left_side = false, .lower = true, .transpose_a = true,
                                         .conjugate_a = true};
    oly_params_triangular_solve left = {.left_side = true, .lower = true};
    OLY_TRY(tsolve(b, L, s, &right, &tmp));
    OLY_TRY(tsolve(b, L, tmp, &left, &x));
    OLY_TRY(tril(b, x, 0, &phi));
    OLY_TRY(eye(b, &a, a.dtype, &e));
    OLY_TRY(mul(b, e, lit(a.dtype, -0.5), &scale));
    OLY_TRY(add(b, scale, lit(a.dtype, 1), &scale));
    OLY_TRY(mul(b, phi, scale, &phi));
    OLY_TRY(mm(b, L, phi, &tangent_out[0]));
    out_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- triangular_solve */

/* Linear in b: X' = solve(a, b'). In a (JAX's rule): -op(a)^-1 op(a') X on
 * the left, -X op(a') op(a)^-1 on the right, a' masked to the triangle read,
 * in the cheaper order. */
static oly_status triangular_solve_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *primal, const oly_atom *tangent,
                                       const bool *tan_nz, oly_atom *primal_out,
                                       oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_triangular_solve *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom a = primal[0], X = primal_out[0], ta = {0}, tb = {0};
    oly_aval xa = aval(X);
    int64_t m = xa.dims[xa.rank - 2], n = xa.dims[xa.rank - 1];
    if (tan_nz[1]) OLY_TRY(tsolve(b, a, tangent[1], p, &tb));
    if (tan_nz[0]) {
        int k = p->unit_diagonal ? 1 : 0;
        oly_atom g, t;
        OLY_TRY(p->lower ? tril(b, tangent[0], -k, &g) : triu(b, tangent[0], k, &g));
        OLY_TRY(oly__emit_un(b, &oly__prim_neg, g, &g));
        if (p->transpose_a) OLY_TRY(mT(b, g, &g));
        if (p->conjugate_a) OLY_TRY(conj_if(b, g, &g));
        if (p->left_side) {
            if (m > n) {
                OLY_TRY(mm(b, g, X, &t));
                OLY_TRY(tsolve(b, a, t, p, &ta));
            } else {
                OLY_TRY(tsolve(b, a, g, p, &t));
                OLY_TRY(mm(b, t, X, &ta));
            }
        } else {
            if (m < n) {
                OLY_TRY(mm(b, X, g, &t));
                OLY_TRY(tsolve(b, a, t, p, &ta));
            } else {
                OLY_TRY(tsolve(b, a, g, p, &t));
                OLY_TRY(mm(b, X, t, &ta));
            }
        }
    }
    if (tan_nz[0] && tan_nz[1]) OLY_TRY(add(b, ta, tb, &tangent_out[0]));
    else tangent_out[0] = tan_nz[0] ? ta : tb;
    out_nz[0] = true;
    return OLY_OK;
}

/* The cotangent of b: a solve with op(a) transposed (JAX's rule). */
static oly_status triangular_solve_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                             const oly_atom *in, const bool *linear,
                                             const oly_atom *ct, const bool *ct_nz,
                                             oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_triangular_solve *p = eqn->params;
    if (linear[0])
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "triangular_solve: cannot transpose with respect to a (the solve is "
                          "linear only in b)");
    ct_in_nz[1] = false;
    if (!linear[1] || !ct_nz[0]) return OLY_OK;
    oly_params_triangular_solve q = *p;
    q.transpose_a = !p->transpose_a;
    OLY_TRY(tsolve(ctx->b, in[0], ct[0], &q, &ct_in[1]));
    ct_in_nz[1] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- lu */

/* JAX's rule (de Hoog, Anderssen and Lukas): with X = l^-1 P a' u^-1,
 * l' = l tril(X, -1) and u' = triu(X) u, packed like lu. l is padded to
 * m x m with the identity, u to n x n. */
static oly_status lu_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom LU = primal_out[0], perm = primal_out[2];
    oly_aval a = aval(LU);
    oly_dtype t = a.dtype;
    int r = a.rank;
    int64_t m = a.dims[r - 2], n = a.dims[r - 1], k = m < n ? m : n;
    /* x = a'[perm]: a one-hot permutation matrix times the tangent */
    oly_atom pm, io, hot, P, x;
    oly_aval sq = reshaped(&a, OLY_INT32, m, m);
    OLY_TRY(spread(b, perm, m, false, &pm));
    OLY_TRY(iota_of(b, &sq, r - 1, &io));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, pm, io, &hot));
    OLY_TRY(oly__emit_convert(b, hot, t, &P));
    OLY_TRY(mm(b, P, tangent[0], &x));
    /* l = pad(tril(lu[:, :k], -1)) + I_m; u = pad(triu(lu[:k, :])) + I on rows >= k */
    oly_atom l, u, e, lo, up;
    OLY_TRY(block(b, LU, 0, m, 0, k, &lo));
    OLY_TRY(tril(b, lo, -1, &lo));
    OLY_TRY(pad_after(b, lo, 0, m - k, &lo));
    oly_aval mm_shape = reshaped(&a, t, m, m);
    OLY_TRY(eye(b, &mm_shape, t, &e));
    OLY_TRY(add(b, lo, e, &l));
    OLY_TRY(block(b, LU, 0, k, 0, n, &up));
    OLY_TRY(triu(b, up, 0, &up));
    OLY_TRY(pad_after(b, up, n - k, 0, &up));
    if (n > k) {
        oly_aval nn = reshaped(&a, OLY_INT32, n, n);
        oly_atom d, i, low, de;
        OLY_TRY(mask(b, &nn, DIAG, 0, &d));
        OLY_TRY(iota_of(b, &nn, r - 2, &i));
        OLY_TRY(oly__emit_bin(b, &oly__prim_ge, i, lit(OLY_INT32, (double)k), &low));
        OLY_TRY(oly__emit_bin(b, &oly__prim_and, d, low, &de));
        OLY_TRY(oly__emit_convert(b, de, t, &de));
        OLY_TRY(add(b, up, de, &u));
    } else {
        u = up;
    }
    oly_params_triangular_solve pl = {.left_side = true, .lower = true, .unit_diagonal = true};
    oly_params_triangular_solve pu = {.left_side = false, .lower = false};
    oly_atom la, lau, lt, ut, ld, ud;
    OLY_TRY(tsolve(b, l, x, &pl, &la));
    OLY_TRY(tsolve(b, u, la, &pu, &lau));
    OLY_TRY(tril(b, lau, -1, &lt));
    OLY_TRY(triu(b, lau, 0, &ut));
    OLY_TRY(mm(b, l, lt, &ld));
    OLY_TRY(mm(b, ut, u, &ud));
    OLY_TRY(add(b, ld, ud, &tangent_out[0]));
    out_nz[0] = true;
    out_nz[1] = out_nz[2] = false;
    return OLY_OK;
}

/* ---------------------------------------------------------------- qr */

/* JAX's qr_jvp_rule (j-towns.github.io/papers/qr-derivative.pdf), m >= n. */
static oly_status qr_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_qr *p = eqn->params;
    oly_builder *b = ctx->b;
    oly_aval a = aval(primal[0]);
    oly_dtype t = a.dtype;
    int64_t m = a.dims[a.rank - 2], n = a.dims[a.rank - 1];
    if (m < n || (p->full_matrices && m != n))
        return unimplemented("qr", m < n ? "a wide matrix's QR (m < n)"
                                         : "QR with full_matrices=True of a non-square matrix",
                             &a);
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom q = primal_out[0], r = primal_out[1], dx = tangent[0];
    oly_atom dxr, qH, qt, low, lowH, dO, dq, dr, tmp;
    oly_params_triangular_solve right = {.left_side = false, .lower = false};
    OLY_TRY(tsolve(b, r, dx, &right, &dxr));
    OLY_TRY(mH(b, q, &qH));
    OLY_TRY(mm(b, qH, dxr, &qt));
    OLY_TRY(tril(b, qt, -1, &low));
    OLY_TRY(mH(b, low, &lowH));
    OLY_TRY(sub(b, low, lowH, &dO));
    if (oly_dtype_is_complex(t)) { /* do += I * (qt - real(qt)) */
        oly_atom re, im, e;
        oly_aval ka = aval(qt);
        OLY_TRY(to(b, qt, real_of(t), &re));
        OLY_TRY(oly__emit_convert(b, re, t, &re));
        OLY_TRY(sub(b, qt, re, &im));
        OLY_TRY(eye(b, &ka, t, &e));
        OLY_TRY(mul(b, e, im, &im));
        OLY_TRY(add(b, dO, im, &dO));
    }
    OLY_TRY(sub(b, dO, qt, &tmp));
    OLY_TRY(mm(b, q, tmp, &dq));
    OLY_TRY(add(b, dq, dxr, &tangent_out[0]));
    OLY_TRY(sub(b, qt, dO, &tmp));
    OLY_TRY(mm(b, tmp, r, &dr));
    tangent_out[1] = dr;
    out_nz[0] = out_nz[1] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- eigh */

/* JAX's rule: with A' the Hermitian tangent and C = V^H A' V, w' = real(diag
 * C) and V' = V (F o C), F[i, j] = 1 / (w[j] - w[i]) off the diagonal. */
static oly_status eigh_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_eigh *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom v = primal_out[0], w = primal_out[1];
    oly_aval a = aval(v);
    oly_dtype t = a.dtype;
    int64_t n = a.dims[a.rank - 1];
    oly_atom ad, wc, wr, wcol, e, F, vH, C, dv, dw;
    OLY_TRY(hermitian_part(b, tangent[0], p->lower, &ad));
    OLY_TRY(oly__emit_convert(b, w, t, &wc));
    OLY_TRY(spread(b, wc, n, true, &wr));
    OLY_TRY(spread(b, wc, n, false, &wcol));
    OLY_TRY(eye(b, &a, t, &e));
    OLY_TRY(add(b, e, wr, &F));
    OLY_TRY(sub(b, F, wcol, &F));
    oly_params_integer_pow inv = {.y = -1};
    OLY_TRY(oly__emit_1(b, &oly__prim_integer_pow, F, &inv, &F));
    OLY_TRY(sub(b, F, e, &F));
    OLY_TRY(mH(b, v, &vH));
    OLY_TRY(mm(b, vH, ad, &C));
    OLY_TRY(mm(b, C, v, &C));
    OLY_TRY(mul(b, F, C, &dv));
    OLY_TRY(mm(b, v, dv, &tangent_out[0]));
    OLY_TRY(diag(b, C, &dw));
    OLY_TRY(to(b, dw, real_of(t), &tangent_out[1]));
    out_nz[0] = out_nz[1] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- svd */

/* JAX's _svd_jvp_rule, on the reduced factorisation (full_matrices is only
 * differentiable for a square matrix, where the shapes are the same). */
static oly_status svd_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_svd *p = eqn->params;
    oly_builder *b = ctx->b;
    oly_aval a = aval(primal[0]);
    oly_dtype t = a.dtype, rt = real_of(t);
    int r = a.rank;
    int64_t m = a.dims[r - 2], n = a.dims[r - 1], k = m < n ? m : n;
    if (p->compute_uv && p->full_matrices && m != n)
        return unimplemented("svd", "the singular vectors with full_matrices=True of a "
                                    "non-square matrix",
                             &a);
    /* The primal is the equation itself (another LAPACK path would round
     * differently); without compute_uv the vectors come from a second svd
     * (singular values are sorted, so both list them alike). */
    oly_atom res[3];
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    if (p->compute_uv) {
        for (int j = 0; j < 3; j++) res[j] = primal_out[j];
    } else {
        oly_params_svd red = {.full_matrices = false, .compute_uv = true};
        OLY_TRY(oly__emit(b, &oly__prim_svd, primal, 1, &red, NULL, 0, res));
    }
    oly_atom s = primal_out[0], U = res[1], Vt = res[2], dA = tangent[0];
    out_nz[0] = true;
    oly_atom Ut, V, dS, ds;
    OLY_TRY(mH(b, U, &Ut));
    OLY_TRY(mH(b, Vt, &V));
    OLY_TRY(mm(b, Ut, dA, &dS));
    OLY_TRY(mm(b, dS, V, &dS));
    OLY_TRY(diag(b, dS, &ds));
    OLY_TRY(to(b, ds, rt, &tangent_out[0]));
    if (!p->compute_uv) return OLY_OK;
    out_nz[1] = out_nz[2] = true;
    oly_aval kk = reshaped(&a, rt, k, k);
    oly_atom srow, scol, sd, sd2, er, F, Fc, srowc, scolc, dSS, SdS, t1, t2;
    OLY_TRY(spread(b, s, k, true, &srow));
    OLY_TRY(spread(b, s, k, false, &scol));
    OLY_TRY(add(b, srow, scol, &sd));
    OLY_TRY(sub(b, srow, scol, &sd2));
    OLY_TRY(mul(b, sd, sd2, &sd));
    OLY_TRY(eye(b, &kk, rt, &er));
    OLY_TRY(add(b, sd, er, &F));
    OLY_TRY(dvd(b, lit(rt, 1), F, &F));
    OLY_TRY(sub(b, F, er, &F));
    OLY_TRY(oly__emit_convert(b, F, t, &Fc));
    OLY_TRY(oly__emit_convert(b, srow, t, &srowc));
    OLY_TRY(oly__emit_convert(b, scol, t, &scolc));
    OLY_TRY(mul(b, srowc, dS, &dSS));
    OLY_TRY(mul(b, scolc, dS, &SdS));
    /* s_inv: 1/s, 0 where s == 0; on the diagonal of a k x k matrix */
    oly_atom sz, sinv, sinvm, dSH, dUdV, dU, dV;
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, s, lit(rt, 0), &sz));
    OLY_TRY(oly__emit_convert(b, sz, rt, &sz));
    OLY_TRY(add(b, s, sz, &sinv));
    OLY_TRY(dvd(b, lit(rt, 1), sinv, &sinv));
    OLY_TRY(sub(b, sinv, sz, &sinv));
    OLY_TRY(spread(b, sinv, k, true, &sinvm));
    OLY_TRY(mul(b, sinvm, er, &sinvm));
    OLY_TRY(oly__emit_convert(b, sinvm, t, &sinvm));
    OLY_TRY(mH(b, dS, &dSH));
    OLY_TRY(sub(b, dS, dSH, &dUdV));
    OLY_TRY(mul(b, dUdV, lit(t, 0.5), &dUdV));
    OLY_TRY(mul(b, dUdV, sinvm, &dUdV));
    OLY_TRY(mH(b, dSS, &t1));
    OLY_TRY(add(b, dSS, t1, &t1));
    OLY_TRY(mul(b, Fc, t1, &t1));
    OLY_TRY(add(b, t1, dUdV, &t1));
    OLY_TRY(mm(b, U, t1, &dU));
    OLY_TRY(mH(b, SdS, &t2));
    OLY_TRY(add(b, SdS, t2, &t2));
    OLY_TRY(mul(b, Fc, t2, &t2));
    OLY_TRY(mm(b, V, t2, &dV));
    if (m > n) { /* dU += (dA V - U (U^H dA V)) / s */
        oly_atom dAV, x, sm;
        OLY_TRY(mm(b, dA, V, &dAV));
        OLY_TRY(mm(b, Ut, dAV, &x));
        OLY_TRY(mm(b, U, x, &x));
        OLY_TRY(sub(b, dAV, x, &x));
        OLY_TRY(spread(b, s, m, true, &sm));
        OLY_TRY(oly__emit_convert(b, sm, t, &sm));
        OLY_TRY(dvd(b, x, sm, &x));
        OLY_TRY(add(b, dU, x, &dU));
    }
    if (n > m) { /* dV += (dA^H U - V (Vt dA^H U)) / s */
        oly_atom dAH, dAHU, x, sn;
        OLY_TRY(mH(b, dA, &dAH));
        OLY_TRY(mm(b, dAH, U, &dAHU));
        OLY_TRY(mm(b, Vt, dAHU, &x));
        OLY_TRY(mm(b, V, x, &x));
        OLY_TRY(sub(b, dAHU, x, &x));
        OLY_TRY(spread(b, s, n, true, &sn));
        OLY_TRY(oly__emit_convert(b, sn, t, &sn));
        OLY_TRY(dvd(b, x, sn, &x));
        OLY_TRY(add(b, dV, x, &dV));
    }
    tangent_out[1] = dU;
    return mH(b, dV, &tangent_out[2]);
}

/* ---------------------------------------------------------------- eig */

/* Eigenvalues only (as JAX): w'[i] = vl_i^H a' vr_i / (vl_i^H vr_i), from
 * one eig with both sets of eigenvectors, whose w is the primal too: a second
 * eig for w alone could round differently and, with no canonical order of
 * complex eigenvalues, list them differently from the vectors. */
static oly_status eig_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_eig *p = eqn->params;
    oly_builder *b = ctx->b;
    oly_aval a = aval(primal[0]);
    if (p->compute_left_eigenvectors || p->compute_right_eigenvectors)
        return unimplemented("eig", "the eigenvectors (only eigenvalues are differentiable; see "
                                    "JAX issue 2748)",
                             &a);
    oly_params_eig both = {.compute_left_eigenvectors = true, .compute_right_eigenvectors = true};
    oly_atom res[3];
    OLY_TRY(oly__emit(b, &oly__prim_eig, primal, 1, &both, NULL, 0, res));
    oly_atom w = res[0], vl = res[1], vr = res[2];
    oly_dtype c = aval(w).dtype;
    primal_out[0] = w;
    oly_atom da, vlc, num, den;
    oly_ints ax = {.n = 1, .v = {a.rank - 2}};
    OLY_TRY(oly__emit_convert(b, tangent[0], c, &da));
    OLY_TRY(conj_if(b, vl, &vlc));
    OLY_TRY(mm(b, da, vr, &num));
    OLY_TRY(mul(b, vlc, num, &num));
    OLY_TRY(oly__emit_reduce_sum(b, num, &ax, &num));
    OLY_TRY(mul(b, vlc, vr, &den));
    OLY_TRY(oly__emit_reduce_sum(b, den, &ax, &den));
    OLY_TRY(dvd(b, num, den, &tangent_out[0]));
    out_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

static const oly_param_field triangular_solve_fields[] = {
    OLY_FIELD(oly_params_triangular_solve, left_side, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_triangular_solve, lower, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_triangular_solve, transpose_a, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_triangular_solve, conjugate_a, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_triangular_solve, unit_diagonal, OLY_FIELD_BOOL),
};
static const oly_param_field qr_fields[] = {
    OLY_FIELD(oly_params_qr, full_matrices, OLY_FIELD_BOOL),
};
static const oly_param_field eigh_fields[] = {
    OLY_FIELD(oly_params_eigh, lower, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_eigh, sort_eigenvalues, OLY_FIELD_BOOL),
};
static const oly_param_field svd_fields[] = {
    OLY_FIELD(oly_params_svd, full_matrices, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_svd, compute_uv, OLY_FIELD_BOOL),
};
static const oly_param_field eig_fields[] = {
    OLY_FIELD(oly_params_eig, compute_left_eigenvectors, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_eig, compute_right_eigenvectors, OLY_FIELD_BOOL),
};

#define PARAMS(T, f) .params_size = sizeof(T), .fields = (f), .n_fields = OLY_ARRAY_LEN(f)
#define NONLINEAR (OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL)

const oly_prim oly__prim_cholesky = {
    .name = "cholesky", .n_in = 1, .n_out = 1,
    .shape = cholesky_shape, .batch = lead_batch, .jvp = cholesky_jvp, .no_rule = NONLINEAR,
};

const oly_prim oly__prim_triangular_solve = {
    .name = "triangular_solve", .n_in = 2, .n_out = 1,
    PARAMS(oly_params_triangular_solve, triangular_solve_fields),
    .shape = triangular_solve_shape, .batch = triangular_solve_batch,
    .jvp = triangular_solve_jvp, .transpose = triangular_solve_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

const oly_prim oly__prim_lu = {
    .name = "lu", .n_in = 1, .n_out = 3,
    .shape = lu_shape, .batch = lead_batch, .jvp = lu_jvp, .no_rule = NONLINEAR,
};

const oly_prim oly__prim_qr = {
    .name = "qr", .n_in = 1, .n_out = 2, PARAMS(oly_params_qr, qr_fields),
    .shape = qr_shape, .batch = lead_batch, .jvp = qr_jvp, .no_rule = NONLINEAR,
};

const oly_prim oly__prim_eigh = {
    .name = "eigh", .n_in = 1, .n_out = 2, PARAMS(oly_params_eigh, eigh_fields),
    .shape = eigh_shape, .batch = lead_batch, .jvp = eigh_jvp, .no_rule = NONLINEAR,
};

const oly_prim oly__prim_svd = {
    .name = "svd", .n_in = 1, .num_outputs = svd_num_outputs, PARAMS(oly_params_svd, svd_fields),
    .shape = svd_shape, .batch = lead_batch, .jvp = svd_jvp, .no_rule = NONLINEAR,
};

const oly_prim oly__prim_eig = {
    .name = "eig", .n_in = 1, .num_outputs = eig_num_outputs, PARAMS(oly_params_eig, eig_fields),
    .shape = eig_shape, .batch = lead_batch, .jvp = eig_jvp, .no_rule = NONLINEAR,
};

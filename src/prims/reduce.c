/* reduce.c — reductions (reduce_sum/prod/max/min/and/or), argmax/argmin and
 * cumulative scans (cumsum/cumprod/cummax/cummin), following JAX's lax.
 * Shape and transformation rules here; kernels in src/cpu/reduce.c. */
#include "internal.h"
#include "trans/trans.h"
#include "prims/reduce_ops.h"

#include <math.h>

/* ---------------------------------------------------------------- messages */

static oly_status check_n_in(const oly_shape_ctx *ctx, int want)
{
    if (ctx->n_in != want)
        return oly__error(OLY_ERR_INVALID, "%s: expected %d operand%s, got %d", ctx->prim->name,
                          want, want == 1 ? "" : "s", ctx->n_in);
    return OLY_OK;
}

/* Validates axes (distinct, in range; negatives allowed) and marks them. */
static oly_status mark_axes(const char *who, const oly_ints *axes, const oly_aval *x, bool *marks)
{
    if (axes->n < 0 || axes->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "%s: axes must have 0..%d entries, got %d", who,
                          OLY_MAX_RANK, axes->n);
    for (int i = 0; i < OLY_MAX_RANK; i++) marks[i] = false;
    for (int i = 0; i < axes->n; i++) {
        int64_t a;
        if (axes->v[i] < -x->rank || axes->v[i] >= x->rank)
            return oly__error(OLY_ERR_INVALID, "%s: axes %s out of range for operand %s", who,
                              oly__show_ints(axes).s, oly__show_aval(x).s);
        a = axes->v[i] < 0 ? axes->v[i] + x->rank : axes->v[i];
        if (marks[a])
            return oly__error(OLY_ERR_INVALID, "%s: axes %s are not unique", who,
                              oly__show_ints(axes).s);
        marks[a] = true;
    }
    return OLY_OK;
}

static void drop_axes(const oly_aval *x, const bool *marks, oly_dtype t, bool weak, oly_aval *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->weak = weak;
    for (int i = 0; i < x->rank; i++)
        if (!marks[i]) out->dims[out->rank++] = x->dims[i];
}

/* ---------------------------------------------------------------- reductions */

const char *const oly__reduce_op_names[OLY_REDUCE_COUNT] = {
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or"};

static oly_status reduce_dtype_ok(oly_reduce_op op, const oly_aval *x)
{
    oly_dtype t = x->dtype;
    bool ok;
    const char *want;
    switch (op) {
    case OLY_REDUCE_SUM:
    case OLY_REDUCE_PROD:
        ok = oly_dtype_is_int(t) || oly_dtype_is_inexact(t);
        want = "a numeric dtype (not bool)";
        break;
    case OLY_REDUCE_MAX:
    case OLY_REDUCE_MIN:
        ok = !oly_dtype_is_complex(t);
        want = "a bool, integer or float dtype";
        break;
    default:
        ok = oly_dtype_is_bool(t) || oly_dtype_is_int(t);
        want = "a bool or integer dtype";
        break;
    }
    if (!ok || (unsigned)t >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have %s, got %s",
                          oly__reduce_op_names[op], want, oly__show_aval(x).s);
    return OLY_OK;
}

static oly_status reduce_shape(const oly_shape_ctx *ctx, oly_aval *out, oly_reduce_op op)
{
    const oly_params_reduce *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(reduce_dtype_ok(op, x));
    bool marks[OLY_MAX_RANK];
    OLY_TRY(mark_axes(oly__reduce_op_names[op], &p->axes, x, marks));
    drop_axes(x, marks, x->dtype, x->weak, out);
    return OLY_OK;
}

#define REDUCE_ROW(NAME, OP)                                                              \
    static oly_status NAME##_shape(const oly_shape_ctx *ctx, oly_aval *out)               \
    {                                                                                     \
        return reduce_shape(ctx, out, OP);                                                \
    }

REDUCE_ROW(reduce_sum, OLY_REDUCE_SUM)
REDUCE_ROW(reduce_prod, OLY_REDUCE_PROD)
REDUCE_ROW(reduce_max, OLY_REDUCE_MAX)
REDUCE_ROW(reduce_min, OLY_REDUCE_MIN)
REDUCE_ROW(reduce_and, OLY_REDUCE_AND)
REDUCE_ROW(reduce_or, OLY_REDUCE_OR)

/* ---------------------------------------------------------------- argmax, argmin */

static oly_status argminmax_shape(const oly_shape_ctx *ctx, oly_aval *out, bool is_max)
{
    const oly_params_argminmax *p = ctx->params;
    const char *who = is_max ? "argmax" : "argmin";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    if (oly_dtype_is_complex(x->dtype) || (unsigned)x->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have a bool, integer or float dtype, got %s",
                          who, oly__show_aval(x).s);
    if (p->index_dtype != OLY_INT32 && p->index_dtype != OLY_INT64)
        return oly__error(OLY_ERR_TYPE, "%s: index_dtype must be int32 or int64, got %s", who,
                          (unsigned)p->index_dtype < OLY_DTYPE_COUNT
                              ? oly_dtype_name(p->index_dtype) : "an invalid dtype");
    if (p->axes.n != 1)
        return oly__error(OLY_ERR_INVALID, "%s: axes must hold exactly one axis, got %s", who,
                          oly__show_ints(&p->axes).s);
    bool marks[OLY_MAX_RANK];
    OLY_TRY(mark_axes(who, &p->axes, x, marks));
    int64_t axis = p->axes.v[0] < 0 ? p->axes.v[0] + x->rank : p->axes.v[0];
    if (x->dims[axis] == 0)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: the reduced axis %lld of operand %s is empty; it needs at least "
                          "one element",
                          who, (long long)axis, oly__show_aval(x).s);
    drop_axes(x, marks, p->index_dtype, false, out);
    return OLY_OK;
}

static oly_status argmax_shape(const oly_shape_ctx *ctx, oly_aval *out) { return argminmax_shape(ctx, out, true); }
static oly_status argmin_shape(const oly_shape_ctx *ctx, oly_aval *out) { return argminmax_shape(ctx, out, false); }

/* ---------------------------------------------------------------- cumulative */

static const char *const cum_names[] = {"cumsum", "cumprod", "cummax", "cummin"};

static oly_status cum_shape(const oly_shape_ctx *ctx, oly_aval *out, oly_reduce_op op)
{
    const oly_params_cumulative *p = ctx->params;
    const char *who = cum_names[op];
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    oly_dtype t = x->dtype;
    bool arith = op == OLY_REDUCE_SUM || op == OLY_REDUCE_PROD;
    bool ok = arith ? oly_dtype_is_int(t) || oly_dtype_is_inexact(t)
                    : oly_dtype_is_int(t) || oly_dtype_is_float(t);
    if (!ok)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have %s, got %s", who,
                          arith ? "a numeric dtype (not bool)" : "an integer or float dtype",
                          oly__show_aval(x).s);
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "%s: operand must have rank >= 1, got %s", who,
                          oly__show_aval(x).s);
    int64_t axis = 0;
    OLY_TRY(oly__norm_axis(who, "axis", p->axis, x->rank, &axis));
    *out = *x;
    return OLY_OK;
}

#define CUM_ROW(NAME, OP)                                                                 \
    static oly_status NAME##_shape(const oly_shape_ctx *ctx, oly_aval *out)               \
    {                                                                                     \
        return cum_shape(ctx, out, OP);                                                   \
    }

CUM_ROW(cumsum, OLY_REDUCE_SUM)
CUM_ROW(cumprod, OLY_REDUCE_PROD)
CUM_ROW(cummax, OLY_REDUCE_MAX)
CUM_ROW(cummin, OLY_REDUCE_MIN)

/* ---------------------------------------------------------------- transformation rules
 *
 * Batching keeps the batch axis where it is and shifts the reduced/scanned axes
 * around it. JVPs follow JAX: reduce_max/min put the tangent where the extremum
 * is, ties split evenly; reduce_prod multiplies each tangent by the product of
 * the other elements (exclusive prefix x suffix products, so zeros are fine).
 * cumprod/cummax/cummin use doubling scans along the scanned axis (log2 n
 * steps of shifted slices), exact with zeros and splitting ties evenly. */

static oly_aval in_aval_of(const oly_eqn *e, int i) { return oly__atom_aval(&e->in[i]); }

static int64_t norm_ax(int64_t a, int rank) { return a < 0 ? a + rank : a; }

/* Where axis a of the unbatched value sits once a batch axis is at b. */
static int64_t shift_ax(int64_t a, int b) { return a >= b ? a + 1 : a; }

/* axes (unbatched, any sign) shifted around a batch axis at b; *out_b is where
 * the batch axis lands once they are reduced away. */
static void shift_axes(const oly_ints *axes, int rank, int b, oly_ints *out, int *out_b)
{
    *out = (oly_ints){.n = axes->n};
    *out_b = b;
    for (int i = 0; i < axes->n; i++) {
        int64_t a = norm_ax(axes->v[i], rank);
        out->v[i] = shift_ax(a, b);
        if (a < b) --*out_b;
    }
}

static oly_status reduce_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_reduce *p = eqn->params;
    oly_params_reduce q;
    shift_axes(&p->axes, in_aval_of(eqn, 0).rank, in_bdim[0], &q.axes, &out_bdim[0]);
    return oly__emit_1(ctx->b, eqn->prim, in[0], &q, out);
}

static oly_status argminmax_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_argminmax *p = eqn->params;
    oly_params_argminmax q = *p;
    shift_axes(&p->axes, in_aval_of(eqn, 0).rank, in_bdim[0], &q.axes, &out_bdim[0]);
    return oly__emit_1(ctx->b, eqn->prim, in[0], &q, out);
}

static oly_status cumulative_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_cumulative *p = eqn->params;
    oly_params_cumulative q = *p;
    q.axis = shift_ax(norm_ax(p->axis, in_aval_of(eqn, 0).rank), in_bdim[0]);
    OLY_TRY(oly__emit_1(ctx->b, eqn->prim, in[0], &q, out));
    out_bdim[0] = in_bdim[0];
    return OLY_OK;
}

/* --- JVPs */

/* argmax/argmin, reduce_and/or: integer or bool results have zero tangents
 * (oly__jvp_zero); reduce_sum, cumsum are linear (oly__jvp_linear). */
static oly_status emit_perm(oly_builder *b, oly_atom x, const oly_ints *perm, oly_atom *out)
{
    bool ident = true;
    for (int i = 0; i < perm->n; i++) ident = ident && perm->v[i] == i;
    if (ident) {
        *out = x;
        return OLY_OK;
    }
    oly_params_transpose q = {.permutation = *perm};
    return oly__emit_1(b, &oly__prim_transpose, x, &q, out);
}

/* The kept (unreduced) axes of x in order, then the reduced ones. */
static int split_axes(const oly_ints *axes, int rank, oly_ints *perm, bool *marks)
{
    for (int d = 0; d < rank; d++) marks[d] = false;
    for (int i = 0; i < axes->n; i++) marks[norm_ax(axes->v[i], rank)] = true;
    *perm = (oly_ints){.n = 0};
    for (int d = 0; d < rank; d++)
        if (!marks[d]) perm->v[perm->n++] = d;
    int kept = perm->n;
    for (int d = 0; d < rank; d++)
        if (marks[d]) perm->v[perm->n++] = d;
    return kept;
}

static oly_status scalar_full(oly_builder *b, oly_dtype t, double v, oly_atom *out)
{
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    return oly__emit_full(b, &a, v, out);
}

/* d prod(x) = sum_i t_i * prod_{j != i} x_j, with the products of the others as
 * exclusive prefix times exclusive suffix products over the flattened reduced
 * axes (moved last). */
static oly_status reduce_prod_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_reduce *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    oly_ints perm;
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    int64_t n = 1;
    for (int d = 0; d < x.rank; d++)
        if (marks[d]) n *= x.dims[d];
    if (n == 0) return OLY_OK; /* an empty product is the constant 1 */
    oly_ints flat = {.n = kept + 1};
    for (int i = 0; i < kept; i++) flat.v[i] = x.dims[perm.v[i]];
    flat.v[kept] = n;
    oly_atom xr, tr, fwd, bwd, lefts, rights, one, others, prod;
    OLY_TRY(emit_perm(b, primal[0], &perm, &xr));
    OLY_TRY(oly__emit_reshape(b, xr, &flat, &xr));
    OLY_TRY(emit_perm(b, tangent[0], &perm, &tr));
    OLY_TRY(oly__emit_reshape(b, tr, &flat, &tr));
    oly_params_cumulative cf = {.axis = kept, .reverse = false}, cr = {.axis = kept, .reverse = true};
    OLY_TRY(oly__emit_1(b, &oly__prim_cumprod, xr, &cf, &fwd));
    OLY_TRY(oly__emit_1(b, &oly__prim_cumprod, xr, &cr, &bwd));
    OLY_TRY(scalar_full(b, x.dtype, 1.0, &one));
    /* lefts[k] = prod_{j<k}: fwd[..., :n-1] shifted right by one, 1 first */
    oly_params_slice sl;
    oly_params_pad pd;
    memset(&sl, 0, sizeof sl);
    memset(&pd, 0, sizeof pd);
    sl.start_indices.n = sl.limit_indices.n = flat.n;
    pd.lo.n = pd.hi.n = pd.interior.n = flat.n;
    for (int d = 0; d < flat.n; d++) sl.limit_indices.v[d] = flat.v[d];
    sl.limit_indices.v[kept] = n - 1;
    pd.lo.v[kept] = 1;
    oly_atom args[2] = {fwd, one};
    OLY_TRY(oly__emit_1(b, &oly__prim_slice, fwd, &sl, &args[0]));
    OLY_TRY(oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, &lefts));
    /* rights[k] = prod_{j>k}: bwd[..., 1:] then 1 last */
    sl.start_indices.v[kept] = 1;
    sl.limit_indices.v[kept] = n;
    pd.lo.v[kept] = 0;
    pd.hi.v[kept] = 1;
    OLY_TRY(oly__emit_1(b, &oly__prim_slice, bwd, &sl, &args[0]));
    OLY_TRY(oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, &rights));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, lefts, rights, &others));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, others, tr, &prod));
    oly_ints last = {.n = 1, .v = {kept}};
    OLY_TRY(oly__emit_reduce_sum(b, prod, &last, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* Tangent at the extremum's location; ties share it evenly (JAX's chooser rule). */
static oly_status reduce_chooser_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                     const oly_atom *tangent, const bool *tan_nz,
                                     oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_reduce *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    oly_ints perm, shape = oly__ints(x.rank, x.dims);
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    oly_ints kdims = oly__ints(kept, perm.v), axes = {.n = 0};
    for (int i = kept; i < perm.n; i++) axes.v[axes.n++] = perm.v[i];
    oly_atom yb, mask, maskf, cnt, tm, num;
    OLY_TRY(oly__emit_broadcast_in_dim(b, *primal_out, &shape, &kdims, &yb));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, primal[0], yb, &mask));
    OLY_TRY(oly__emit_convert(b, mask, x.dtype, &maskf));
    OLY_TRY(oly__emit_reduce_sum(b, maskf, &axes, &cnt));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, tangent[0], maskf, &tm));
    OLY_TRY(oly__emit_reduce_sum(b, tm, &axes, &num));
    OLY_TRY(oly__emit_bin(b, &oly__prim_div, num, cnt, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* v shifted by s along axis, filled with fill: element k gets v[k - s] (v[k + s]
 * when reverse). Needs 0 < s < the axis' length. */
static oly_status shift_along(oly_builder *b, oly_atom v, const oly_aval *a, int axis, int64_t s,
                              bool reverse, oly_atom fill, oly_atom *out)
{
    int64_t n = a->dims[axis];
    oly_params_slice sl;
    oly_params_pad pd;
    memset(&sl, 0, sizeof sl);
    memset(&pd, 0, sizeof pd);
    sl.start_indices.n = sl.limit_indices.n = a->rank;
    pd.lo.n = pd.hi.n = pd.interior.n = a->rank;
    for (int d = 0; d < a->rank; d++) sl.limit_indices.v[d] = a->dims[d];
    sl.start_indices.v[axis] = reverse ? s : 0;
    sl.limit_indices.v[axis] = reverse ? n : n - s;
    if (reverse)
        pd.hi.v[axis] = s;
    else
        pd.lo.v[axis] = s;
    oly_atom args[2] = {v, fill};
    OLY_TRY(oly__emit_1(b, &oly__prim_slice, v, &sl, &args[0]));
    return oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, out);
}

/* cumprod: the tangent obeys dy_k = x_k dy_{k-1} + y_{k-1} t_k, a linear
 * recurrence solved by a doubling scan over the maps h -> A h + B (log2 n
 * steps; no division, so zeros are fine). */
static oly_status cumprod_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                              const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                              oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_cumulative *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    int axis = (int)norm_ax(p->axis, x.rank);
    int64_t n = x.dims[axis];
    bool rev = p->reverse;
    oly_atom one, zero, a = primal[0], bb = tangent[0], t1, t2;
    OLY_TRY(scalar_full(b, x.dtype, 1.0, &one));
    OLY_TRY(scalar_full(b, x.dtype, 0.0, &zero));
    if (n > 1) { /* b_k = y_{k-1} t_k (y_{-1} = 1) */
        OLY_TRY(shift_along(b, *primal_out, &x, axis, 1, rev, one, &t1));
        OLY_TRY(oly__emit_bin(b, &oly__prim_mul, t1, tangent[0], &bb));
    }
    for (int64_t s = 1; s < n; s *= 2) {
        /* (A, B)[k] <- (A[k] A[k-s], A[k] B[k-s] + B[k]) */
        OLY_TRY(shift_along(b, bb, &x, axis, s, rev, zero, &t1));
        OLY_TRY(oly__emit_bin(b, &oly__prim_mul, a, t1, &t2));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, bb, t2, &bb));
        if (2 * s < n) {
            OLY_TRY(shift_along(b, a, &x, axis, s, rev, one, &t1));
            OLY_TRY(oly__emit_bin(b, &oly__prim_mul, a, t1, &a));
        }
    }
    *tangent_out = bb;
    out_nz[0] = true;
    return OLY_OK;
}

/* cummax/cummin: the mean tangent of the prefix elements equal to the running
 * extremum (reduce_max's rule on every prefix), by a doubling scan over
 * (extremum, tangent sum, count): the strictly better side wins, ties add. */
static oly_status cumchooser_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                 const oly_atom *tangent, const bool *tan_nz,
                                 oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_cumulative *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    int axis = (int)norm_ax(p->axis, x.rank);
    int64_t n = x.dims[axis];
    bool rev = p->reverse, is_max = eqn->prim == &oly__prim_cummax;
    oly_atom worst, zero, m = primal[0], sum = tangent[0], cnt;
    OLY_TRY(scalar_full(b, x.dtype, is_max ? -INFINITY : INFINITY, &worst));
    OLY_TRY(scalar_full(b, x.dtype, 0.0, &zero));
    OLY_TRY(oly__emit_full(b, &x, 1.0, &cnt));
    for (int64_t s = 1; s < n; s *= 2) {
        oly_atom m2, s2, c2, better, tie, ss, cc;
        OLY_TRY(shift_along(b, m, &x, axis, s, rev, worst, &m2));
        OLY_TRY(shift_along(b, sum, &x, axis, s, rev, zero, &s2));
        OLY_TRY(shift_along(b, cnt, &x, axis, s, rev, zero, &c2));
        OLY_TRY(oly__emit_bin(b, is_max ? &oly__prim_gt : &oly__prim_lt, m2, m, &better));
        OLY_TRY(oly__emit_bin(b, &oly__prim_eq, m2, m, &tie));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, sum, s2, &ss));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, cnt, c2, &cc));
        OLY_TRY(oly__emit_select(b, tie, sum, ss, &ss));
        OLY_TRY(oly__emit_select(b, tie, cnt, cc, &cc));
        OLY_TRY(oly__emit_select(b, better, ss, s2, &sum));
        OLY_TRY(oly__emit_select(b, better, cc, c2, &cnt));
        if (2 * s < n) OLY_TRY(oly__emit_select(b, better, m, m2, &m));
    }
    OLY_TRY(oly__emit_bin(b, &oly__prim_div, sum, cnt, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* --- transposes */

static bool ct_is_zero(const bool *ct_nz, bool *ct_in_nz)
{
    if (ct_nz[0]) return false;
    ct_in_nz[0] = false;
    return true;
}

/* reduce_sum: ct broadcast back over the reduced axes. */
static oly_status reduce_sum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *in, const bool *linear,
                                       const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                       bool *ct_in_nz)
{
    if (ct_is_zero(ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_reduce *p = eqn->params;
    oly_aval x = in_aval_of(eqn, 0);
    oly_ints perm, shape = oly__ints(x.rank, x.dims);
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    oly_ints kdims = oly__ints(kept, perm.v);
    OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, ct[0], &shape, &kdims, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* cumsum: the cumsum of ct in the other direction. */
static oly_status cumsum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                   oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_cumulative *p = eqn->params;
    oly_params_cumulative q = {.axis = p->axis, .reverse = !p->reverse};
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_cumsum, ct[0], &q, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */


static const oly_param_field reduce_fields[] = {
    OLY_FIELD(oly_params_reduce, axes, OLY_FIELD_INTS),
};
static const oly_param_field argminmax_fields[] = {
    OLY_FIELD(oly_params_argminmax, axes, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_argminmax, index_dtype, OLY_FIELD_DTYPE),
};
static const oly_param_field cumulative_fields[] = {
    OLY_FIELD(oly_params_cumulative, axis, OLY_FIELD_INT),
    OLY_FIELD(oly_params_cumulative, reverse, OLY_FIELD_BOOL),
};

/* TRANSPOSE: LINEAR(rule) for the linear rows, NONLINEAR for the others (no
 * transpose rule, on purpose); reductions never split under partial evaluation. */
#define LINEAR(rule) .transpose = rule, .no_rule = OLY_RULE_PARTIAL_EVAL
#define NONLINEAR .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE

#define ROW(NAME, T, FIELDS, BATCH, JVP, TRANSPOSE)                                       \
    const oly_prim oly__prim_##NAME = {                                                   \
        .name = #NAME, .n_in = 1, .n_out = 1, .params_size = sizeof(T),                   \
        .fields = FIELDS, .n_fields = OLY_ARRAY_LEN(FIELDS),                              \
        .shape = NAME##_shape,                                                            \
        .batch = BATCH, .jvp = JVP, TRANSPOSE,                                            \
    };

ROW(reduce_sum, oly_params_reduce, reduce_fields, reduce_batch, oly__jvp_linear, LINEAR(reduce_sum_transpose))
ROW(reduce_prod, oly_params_reduce, reduce_fields, reduce_batch, reduce_prod_jvp, NONLINEAR)
ROW(reduce_max, oly_params_reduce, reduce_fields, reduce_batch, reduce_chooser_jvp, NONLINEAR)
ROW(reduce_min, oly_params_reduce, reduce_fields, reduce_batch, reduce_chooser_jvp, NONLINEAR)
ROW(reduce_and, oly_params_reduce, reduce_fields, reduce_batch, oly__jvp_zero, NONLINEAR)
ROW(reduce_or, oly_params_reduce, reduce_fields, reduce_batch, oly__jvp_zero, NONLINEAR)
ROW(argmax, oly_params_argminmax, argminmax_fields, argminmax_batch, oly__jvp_zero, NONLINEAR)
ROW(argmin, oly_params_argminmax, argminmax_fields, argminmax_batch, oly__jvp_zero, NONLINEAR)
ROW(cumsum, oly_params_cumulative, cumulative_fields, cumulative_batch, oly__jvp_linear,
    LINEAR(cumsum_transpose))
ROW(cumprod, oly_params_cumulative, cumulative_fields, cumulative_batch, cumprod_jvp, NONLINEAR)
ROW(cummax, oly_params_cumulative, cumulative_fields, cumulative_batch, cumchooser_jvp, NONLINEAR)
ROW(cummin, oly_params_cumulative, cumulative_fields, cumulative_batch, cumchooser_jvp, NONLINEAR)

/* structural.c — primitives that move elements without arithmetic:
 * broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, slice,
 * dynamic_slice, dynamic_update_slice, concatenate, pad, iota, copy.
 * Semantics follow JAX's lax: shape and transformation rules here, kernels
 * in src/cpu/structural.c. */
#include "internal.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- messages */

static oly_status check_n_in(const oly_shape_ctx *ctx, int want)
{
    if (ctx->n_in != want)
        return oly__error(OLY_ERR_INVALID, "%s: expected %d operand%s, got %d", ctx->prim->name,
                          want, want == 1 ? "" : "s", ctx->n_in);
    return OLY_OK;
}

/* Normalises a list of distinct axes into norm (0..rank-1); marks[] set per axis. */
static oly_status norm_axes(const char *who, const char *what, const oly_ints *v, int rank,
                            int64_t *norm, bool *marks)
{
    OLY_TRY(oly__check_ints(who, what, v));
    for (int i = 0; i < rank; i++) marks[i] = false;
    for (int i = 0; i < v->n; i++) {
        OLY_TRY(oly__norm_axis(who, what, v->v[i], rank, &norm[i]));
        if (marks[norm[i]])
            return oly__error(OLY_ERR_INVALID, "%s: %s %s are not unique", who, what,
                              oly__show_ints(v).s);
        marks[norm[i]] = true;
    }
    return OLY_OK;
}

static void set_aval(oly_aval *out, oly_dtype t, int rank, const int64_t *dims, bool weak)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->rank = rank;
    out->weak = weak;
    for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
}

static int64_t aval_size(const oly_aval *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

static bool is_int_index(oly_dtype t) { return oly_dtype_is_int(t); }

/* ---------------------------------------------------------------- broadcast_in_dim */

static oly_status broadcast_in_dim_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_broadcast_in_dim *p = ctx->params;
    const char *who = "broadcast_in_dim";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(oly__check_ints(who, "shape", &p->shape));
    OLY_TRY(oly__check_ints(who, "broadcast_dimensions", &p->broadcast_dimensions));
    for (int i = 0; i < p->shape.n; i++)
        if (p->shape.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "%s: shape %s has a negative dimension", who,
                              oly__show_ints(&p->shape).s);
    if (p->broadcast_dimensions.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: broadcast_dimensions must have one entry per operand dimension "
                          "(%d for operand %s), got %s",
                          who, x->rank, oly__show_aval(x).s,
                          oly__show_ints(&p->broadcast_dimensions).s);
    for (int i = 0; i < x->rank; i++) {
        int64_t d = p->broadcast_dimensions.v[i];
        if (d < 0 || d >= p->shape.n)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: broadcast_dimensions %s must be in [0, %d) for shape %s", who,
                              oly__show_ints(&p->broadcast_dimensions).s, p->shape.n,
                              oly__show_ints(&p->shape).s);
        if (i > 0 && d <= p->broadcast_dimensions.v[i - 1])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: broadcast_dimensions %s must be strictly increasing", who,
                              oly__show_ints(&p->broadcast_dimensions).s);
    }
    for (int i = 0; i < x->rank; i++) {
        int64_t d = p->broadcast_dimensions.v[i];
        if (x->dims[i] != 1 && x->dims[i] != p->shape.v[d])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: operand %s dimension %d has size %lld; it must be 1 or equal "
                              "to shape %s dimension %lld (size %lld)",
                              who, oly__show_aval(x).s, i, (long long)x->dims[i],
                              oly__show_ints(&p->shape).s, (long long)d, (long long)p->shape.v[d]);
    }
    set_aval(out, x->dtype, p->shape.n, p->shape.v, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- reshape */

static oly_status reshape_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_reshape *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(oly__check_ints("reshape", "new_sizes", &p->new_sizes));
    int64_t n = 1;
    for (int i = 0; i < p->new_sizes.n; i++) {
        if (p->new_sizes.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "reshape: new_sizes %s has a negative dimension",
                              oly__show_ints(&p->new_sizes).s);
    }
    OLY_TRY(oly__dims_check("reshape", p->new_sizes.n, p->new_sizes.v));
    for (int i = 0; i < p->new_sizes.n; i++) n *= p->new_sizes.v[i];
    if (n != aval_size(x))
        return oly__error(OLY_ERR_SHAPE,
                          "reshape: new_sizes %s has %lld elements but operand %s has %lld",
                          oly__show_ints(&p->new_sizes).s, (long long)n, oly__show_aval(x).s,
                          (long long)aval_size(x));
    set_aval(out, x->dtype, p->new_sizes.n, p->new_sizes.v, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- transpose */

static oly_status transpose_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_transpose *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(oly__check_ints("transpose", "permutation", &p->permutation));
    bool seen[OLY_MAX_RANK] = {false};
    bool ok = p->permutation.n == x->rank;
    for (int i = 0; ok && i < p->permutation.n; i++) {
        int64_t a = p->permutation.v[i];
        if (a < 0 || a >= x->rank || seen[a]) ok = false;
        else seen[a] = true;
    }
    if (!ok)
        return oly__error(OLY_ERR_INVALID,
                          "transpose: permutation must be a permutation of 0..%d for operand "
                          "%s, got %s",
                          x->rank - 1, oly__show_aval(x).s, oly__show_ints(&p->permutation).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = x->dims[p->permutation.v[i]];
    set_aval(out, x->dtype, x->rank, dims, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- squeeze, expand_dims */

static oly_status squeeze_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    int64_t norm[OLY_MAX_RANK];
    bool drop[OLY_MAX_RANK];
    OLY_TRY(norm_axes("squeeze", "dimensions", &p->dimensions, x->rank, norm, drop));
    int64_t dims[OLY_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!drop[i]) {
            dims[r++] = x->dims[i];
        } else if (x->dims[i] != 1) {
            return oly__error(OLY_ERR_SHAPE,
                              "squeeze: dimensions %s must have size 1, but dimension %d of "
                              "operand %s has size %lld",
                              oly__show_ints(&p->dimensions).s, i, oly__show_aval(x).s,
                              (long long)x->dims[i]);
        }
    }
    set_aval(out, x->dtype, r, dims, x->weak);
    return OLY_OK;
}

static oly_status expand_dims_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(oly__check_ints("expand_dims", "dimensions", &p->dimensions));
    int rank = x->rank + p->dimensions.n;
    if (rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "expand_dims: result rank %d exceeds the maximum %d",
                          rank, OLY_MAX_RANK);
    int64_t norm[OLY_MAX_RANK];
    bool ins[OLY_MAX_RANK];
    OLY_TRY(norm_axes("expand_dims", "dimensions", &p->dimensions, rank, norm, ins));
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0, j = 0; i < rank; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    set_aval(out, x->dtype, rank, dims, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- rev */

static oly_status rev_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    int64_t norm[OLY_MAX_RANK];
    bool marks[OLY_MAX_RANK];
    OLY_TRY(norm_axes("rev", "dimensions", &p->dimensions, x->rank, norm, marks));
    *out = *x;
    return OLY_OK;
}

/* ---------------------------------------------------------------- slice */

static oly_status slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_slice *p = ctx->params;
    const char *who = "slice";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(oly__check_ints(who, "start_indices", &p->start_indices));
    OLY_TRY(oly__check_ints(who, "limit_indices", &p->limit_indices));
    OLY_TRY(oly__check_ints(who, "strides", &p->strides));
    if (p->start_indices.n != x->rank || p->limit_indices.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: start_indices %s and limit_indices %s must have one entry per "
                          "dimension of operand %s",
                          who, oly__show_ints(&p->start_indices).s,
                          oly__show_ints(&p->limit_indices).s,
                          oly__show_aval(x).s);
    if (p->strides.n != 0 && p->strides.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: strides %s must be empty or have one entry per dimension of "
                          "operand %s",
                          who, oly__show_ints(&p->strides).s, oly__show_aval(x).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t s = p->start_indices.v[i], l = p->limit_indices.v[i];
        int64_t st = p->strides.n ? p->strides.v[i] : 1;
        if (st <= 0)
            return oly__error(OLY_ERR_INVALID, "%s: strides %s must be positive", who,
                              oly__show_ints(&p->strides).s);
        if (s < 0 || s > l || l > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: dimension %d needs 0 <= start <= limit <= %lld (operand %s), "
                              "got start_indices %s limit_indices %s",
                              who, i, (long long)x->dims[i], oly__show_aval(x).s,
                              oly__show_ints(&p->start_indices).s,
                              oly__show_ints(&p->limit_indices).s);
        dims[i] = l == s ? 0 : (l - s - 1) / st + 1; /* ceil((l - s) / st) without overflow */
    }
    set_aval(out, x->dtype, x->rank, dims, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- dynamic_slice */

/* The start indices inputs first..first+rank-1: rank-0 integers. */
static oly_status check_indices(const oly_shape_ctx *ctx, int first, const oly_aval *x)
{
    const char *who = ctx->prim->name;
    if (ctx->n_in != first + x->rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: expected %d operands (%d array%s and %d start indices for operand "
                          "%s), got %d",
                          who, first + x->rank, first, first == 1 ? "" : "s", x->rank,
                          oly__show_aval(x).s, ctx->n_in);
    for (int i = first; i < ctx->n_in; i++) {
        const oly_aval *a = &ctx->in[i];
        if (a->rank != 0 || !is_int_index(a->dtype))
            return oly__error(OLY_ERR_TYPE,
                              "%s: start index %d must be a rank-0 integer, got %s", who,
                              i - first, oly__show_aval(a).s);
    }
    return OLY_OK;
}

static oly_status dynamic_slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dynamic_slice *p = ctx->params;
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "dynamic_slice: expected an operand, got none");
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_indices(ctx, 1, x));
    OLY_TRY(oly__check_ints("dynamic_slice", "slice_sizes", &p->slice_sizes));
    if (p->slice_sizes.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "dynamic_slice: slice_sizes %s must have one entry per dimension of "
                          "operand %s",
                          oly__show_ints(&p->slice_sizes).s, oly__show_aval(x).s);
    for (int i = 0; i < x->rank; i++)
        if (p->slice_sizes.v[i] < 0 || p->slice_sizes.v[i] > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "dynamic_slice: slice_sizes %s must satisfy 0 <= size <= the "
                              "operand's dimension (operand %s, dimension %d)",
                              oly__show_ints(&p->slice_sizes).s, oly__show_aval(x).s, i);
    set_aval(out, x->dtype, x->rank, p->slice_sizes.v, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- dynamic_update_slice */

static oly_status dynamic_update_slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const char *who = "dynamic_update_slice";
    if (ctx->n_in < 2)
        return oly__error(OLY_ERR_INVALID, "%s: expected an operand and an update, got %d inputs",
                          who, ctx->n_in);
    const oly_aval *x = &ctx->in[0], *u = &ctx->in[1];
    OLY_TRY(check_indices(ctx, 2, x));
    if (u->dtype != x->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: update %s must have the operand's dtype (operand %s)",
                          who, oly__show_aval(u).s, oly__show_aval(x).s);
    if (u->rank != x->rank)
        return oly__error(OLY_ERR_SHAPE, "%s: update %s must have the operand's rank (operand %s)",
                          who, oly__show_aval(u).s, oly__show_aval(x).s);
    for (int i = 0; i < x->rank; i++)
        if (u->dims[i] > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: update %s must fit in operand %s (dimension %d is larger)", who,
                              oly__show_aval(u).s, oly__show_aval(x).s, i);
    *out = *x;
    return OLY_OK;
}

/* ---------------------------------------------------------------- concatenate */

static oly_status concatenate_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_concatenate *p = ctx->params;
    const char *who = "concatenate";
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "%s: expected at least one operand, got none", who);
    const oly_aval *x = &ctx->in[0];
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "%s: operands must have rank >= 1, got %s", who,
                          oly__show_aval(x).s);
    int64_t axis = 0;
    OLY_TRY(oly__norm_axis(who, "dimension", p->dimension, x->rank, &axis));
    int64_t dims[OLY_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    bool weak = x->weak;
    for (int k = 1; k < ctx->n_in; k++) {
        const oly_aval *y = &ctx->in[k];
        if (y->dtype != x->dtype)
            return oly__error(OLY_ERR_TYPE,
                              "%s: operands must have equal dtypes, got %s (operand 0) and %s "
                              "(operand %d)",
                              who, oly__show_aval(x).s, oly__show_aval(y).s, k);
        bool ok = y->rank == x->rank;
        for (int i = 0; ok && i < x->rank; i++)
            if (i != axis && y->dims[i] != x->dims[i]) ok = false;
        if (!ok)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: operands must have equal shapes except in dimension %lld, got "
                              "%s (operand 0) and %s (operand %d)",
                              who, (long long)axis, oly__show_aval(x).s, oly__show_aval(y).s, k);
        if (__builtin_add_overflow(dims[axis], y->dims[axis], &dims[axis]))
            return oly__error(OLY_ERR_INVALID, "%s: dimension %lld of the result overflows",
                              who, (long long)axis);
        weak = weak && y->weak;
    }
    set_aval(out, x->dtype, x->rank, dims, weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- pad */

static oly_status pad_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_pad *p = ctx->params;
    const char *who = "pad";
    OLY_TRY(check_n_in(ctx, 2));
    const oly_aval *x = &ctx->in[0], *v = &ctx->in[1];
    if (v->rank != 0 || v->dtype != x->dtype)
        return oly__error(OLY_ERR_TYPE,
                          "%s: padding_value must be a rank-0 array of the operand's dtype "
                          "(operand %s), got %s",
                          who, oly__show_aval(x).s, oly__show_aval(v).s);
    OLY_TRY(oly__check_ints(who, "lo", &p->lo));
    OLY_TRY(oly__check_ints(who, "hi", &p->hi));
    OLY_TRY(oly__check_ints(who, "interior", &p->interior));
    if (p->lo.n != x->rank || p->hi.n != x->rank || p->interior.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: lo %s, hi %s and interior %s must have one entry per dimension of "
                          "operand %s",
                          who, oly__show_ints(&p->lo).s, oly__show_ints(&p->hi).s,
                          oly__show_ints(&p->interior).s, oly__show_aval(x).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t in = p->interior.v[i], n = x->dims[i];
        if (in < 0)
            return oly__error(OLY_ERR_INVALID, "%s: interior %s must be non-negative", who,
                              oly__show_ints(&p->interior).s);
        int64_t d = 0;
        if (__builtin_mul_overflow(n > 0 ? n - 1 : 0, in, &d) || __builtin_add_overflow(d, n, &d) ||
            __builtin_add_overflow(d, p->lo.v[i], &d) || __builtin_add_overflow(d, p->hi.v[i], &d))
            return oly__error(OLY_ERR_INVALID,
                              "%s: dimension %d of operand %s overflows after padding with lo %s "
                              "hi %s interior %s",
                              who, i, oly__show_aval(x).s, oly__show_ints(&p->lo).s,
                              oly__show_ints(&p->hi).s, oly__show_ints(&p->interior).s);
        dims[i] = d;
        if (dims[i] < 0)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: dimension %d of operand %s would have size %lld < 0 after "
                              "padding with lo %s hi %s interior %s",
                              who, i, oly__show_aval(x).s, (long long)dims[i],
                              oly__show_ints(&p->lo).s,
                              oly__show_ints(&p->hi).s, oly__show_ints(&p->interior).s);
    }
    set_aval(out, x->dtype, x->rank, dims, x->weak && v->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- iota */

static oly_status iota_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_iota *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 0));
    if ((unsigned)p->dtype >= OLY_DTYPE_COUNT || p->dtype == OLY_BOOL)
        return oly__error(OLY_ERR_TYPE, "iota: dtype must be numeric, got %s",
                          (unsigned)p->dtype >= OLY_DTYPE_COUNT ? "an invalid dtype"
                                                                : oly_dtype_name(p->dtype));
    OLY_TRY(oly__check_ints("iota", "shape", &p->shape));
    if (p->shape.n < 1)
        return oly__error(OLY_ERR_SHAPE, "iota: shape must have rank >= 1, got ()");
    for (int i = 0; i < p->shape.n; i++)
        if (p->shape.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "iota: shape %s has a negative dimension",
                              oly__show_ints(&p->shape).s);
    int64_t axis = 0;
    OLY_TRY(oly__norm_axis("iota", "dimension", p->dimension, p->shape.n, &axis));
    set_aval(out, p->dtype, p->shape.n, p->shape.v, false);
    return OLY_OK;
}

/* ---------------------------------------------------------------- copy */

static oly_status copy_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(check_n_in(ctx, 1));
    *out = ctx->in[0];
    return OLY_OK;
}

/* ---------------------------------------------------------------- transformation rules
 *
 * Batching keeps the batch axis where it is when the params can simply skip over
 * it (rev, slice, squeeze, transpose, pad, dynamic_slice with unbatched starts)
 * and otherwise moves it to 0 first. dynamic_slice / dynamic_update_slice with
 * batched start indices would need gather/scatter, which olympus lacks: they are
 * unrolled into one slice per batch element, concatenated. JVPs of these linear
 * rows apply the row to the tangent; transposes follow JAX's lax. */

static oly_aval in_aval_of(const oly_eqn *e, int i) { return oly__atom_aval(&e->in[i]); }

static int64_t norm_ax(int64_t a, int rank) { return a < 0 ? a + rank : a; }

/* Where axis a of the unbatched value sits once a batch axis is at b. */
static int64_t shift_ax(int64_t a, int b) { return a >= b ? a + 1 : a; }

/* v with x inserted at position at (fails past the maximum rank). */
static oly_status ints_insert(const char *who, const oly_ints *v, int at, int64_t x,
                              oly_ints *out)
{
    if (v->n >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED, "%s: batching needs rank %d, above the maximum %d",
                          who, v->n + 1, OLY_MAX_RANK);
    oly_ints r = {.n = v->n + 1};
    for (int i = 0, j = 0; i < r.n; i++) r.v[i] = i == at ? x : v->v[j++];
    *out = r;
    return OLY_OK;
}

static oly_atom lit_index(int64_t v)
{
    oly_scalar s = {.dtype = OLY_INT32, .weak = false, .v.i = v};
    return oly_atom_lit(s);
}

/* Zeros with aval a (a literal when rank 0). */
static oly_status zeros(oly_builder *b, const oly_aval *a, oly_atom *out)
{
    return oly__emit_full(b, a, 0.0, out);
}

static oly_status zeros_scalar(oly_builder *b, oly_dtype t, oly_atom *out)
{
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    return oly__emit_full(b, &a, 0.0, out);
}

/* Rules with no cotangent: every linear input gets a symbolic zero. */
static bool ct_is_zero(const oly_eqn *eqn, const bool *ct_nz, bool *ct_in_nz)
{
    if (ct_nz[0]) return false;
    for (int i = 0; i < eqn->n_in; i++) ct_in_nz[i] = false;
    return true;
}

/* JVP of a row that is linear in input 0 and takes its other inputs (start
 * indices) from the primal: the row applied to the tangent. */
static oly_status jvp_linear0(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                              const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                              oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    oly_atom in[2 + OLY_MAX_RANK];
    in[0] = tangent[0];
    for (int i = 1; i < eqn->n_in; i++) in[i] = primal[i];
    return oly__emit_eqn(ctx->b, eqn, in, tangent_out);
}

/* --- broadcast_in_dim */

static oly_status broadcast_in_dim_batch(oly_batch_ctx *ctx, const oly_eqn *eqn,
                                         const oly_atom *in, const int *in_bdim, oly_atom *out,
                                         int *out_bdim)
{
    const oly_params_broadcast_in_dim *p = eqn->params;
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    oly_params_broadcast_in_dim q;
    OLY_TRY(ints_insert("broadcast_in_dim", &p->shape, 0, ctx->size, &q.shape));
    OLY_TRY(ints_insert("broadcast_in_dim", &p->broadcast_dimensions, 0, -1,
                        &q.broadcast_dimensions));
    for (int i = 0; i < q.broadcast_dimensions.n; i++) q.broadcast_dimensions.v[i]++;
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_broadcast_in_dim, x, &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* Sums ct over the broadcast dims (new ones and size-1 dims that were
 * expanded), then reshapes to the operand's shape. */
static oly_status broadcast_in_dim_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                             const oly_atom *in, const bool *linear,
                                             const oly_atom *ct, const bool *ct_nz,
                                             oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_broadcast_in_dim *p = eqn->params;
    oly_aval x = in_aval_of(eqn, 0);
    bool keep[OLY_MAX_RANK] = {false};
    for (int i = 0; i < x.rank; i++) {
        int64_t d = p->broadcast_dimensions.v[i];
        keep[d] = x.dims[i] == p->shape.v[d];
    }
    oly_ints axes = {.n = 0};
    for (int d = 0; d < p->shape.n; d++)
        if (!keep[d]) axes.v[axes.n++] = d;
    oly_atom r = ct[0];
    if (axes.n) OLY_TRY(oly__emit_reduce_sum(ctx->b, r, &axes, &r));
    if (p->shape.n - axes.n != x.rank) { /* size-1 dims were summed away: put them back */
        oly_ints shape = oly__ints(x.rank, x.dims);
        OLY_TRY(oly__emit_reshape(ctx->b, r, &shape, &r));
    }
    ct_in[0] = r;
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- reshape */

static oly_status reshape_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_reshape *p = eqn->params;
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    oly_params_reshape q;
    OLY_TRY(ints_insert("reshape", &p->new_sizes, 0, ctx->size, &q.new_sizes));
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_reshape, x, &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* Squeeze, expand_dims and reshape all transpose to a reshape back. */
static oly_status reshape_back_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                         const oly_atom *in, const bool *linear,
                                         const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                         bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    oly_aval x = in_aval_of(eqn, 0);
    oly_ints shape = oly__ints(x.rank, x.dims);
    OLY_TRY(oly__emit_reshape(ctx->b, ct[0], &shape, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- transpose */

static oly_status transpose_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_transpose *p = eqn->params;
    int b = in_bdim[0];
    oly_params_transpose q;
    OLY_TRY(ints_insert("transpose", &p->permutation, 0, b, &q.permutation));
    for (int i = 1; i < q.permutation.n; i++) q.permutation.v[i] = shift_ax(q.permutation.v[i], b);
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_transpose, in[0], &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

static oly_status transpose_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                      const oly_atom *in, const bool *linear, const oly_atom *ct,
                                      const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_transpose *p = eqn->params;
    oly_params_transpose q = {.permutation = {.n = p->permutation.n}};
    for (int i = 0; i < p->permutation.n; i++) q.permutation.v[p->permutation.v[i]] = i;
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_transpose, ct[0], &q, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- squeeze, expand_dims */

static oly_status squeeze_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dims *p = eqn->params;
    int b = in_bdim[0], rank = in_aval_of(eqn, 0).rank, ob = b;
    oly_params_dims q = {.dimensions = {.n = p->dimensions.n}};
    for (int i = 0; i < p->dimensions.n; i++) {
        int64_t d = norm_ax(p->dimensions.v[i], rank);
        q.dimensions.v[i] = shift_ax(d, b);
        if (d < b) ob--;
    }
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_squeeze, in[0], &q, out));
    out_bdim[0] = ob;
    return OLY_OK;
}

static oly_status expand_dims_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dims *p = eqn->params;
    int out_rank = eqn->out[0]->aval.rank;
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    oly_params_dims q = {.dimensions = {.n = p->dimensions.n}};
    for (int i = 0; i < p->dimensions.n; i++)
        q.dimensions.v[i] = norm_ax(p->dimensions.v[i], out_rank) + 1;
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_expand_dims, x, &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

static oly_status squeeze_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                    const oly_atom *in, const bool *linear, const oly_atom *ct,
                                    const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_dims *p = eqn->params;
    int rank = in_aval_of(eqn, 0).rank;
    oly_params_dims q = {.dimensions = {.n = p->dimensions.n}};
    for (int i = 0; i < p->dimensions.n; i++)
        q.dimensions.v[i] = norm_ax(p->dimensions.v[i], rank);
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_expand_dims, ct[0], &q, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

static oly_status expand_dims_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear,
                                        const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                        bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_dims *p = eqn->params;
    int rank = eqn->out[0]->aval.rank;
    oly_params_dims q = {.dimensions = {.n = p->dimensions.n}};
    for (int i = 0; i < p->dimensions.n; i++)
        q.dimensions.v[i] = norm_ax(p->dimensions.v[i], rank);
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_squeeze, ct[0], &q, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- rev */

static oly_status rev_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                            const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dims *p = eqn->params;
    int b = in_bdim[0], rank = in_aval_of(eqn, 0).rank;
    oly_params_dims q = {.dimensions = {.n = p->dimensions.n}};
    for (int i = 0; i < p->dimensions.n; i++)
        q.dimensions.v[i] = shift_ax(norm_ax(p->dimensions.v[i], rank), b);
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_rev, in[0], &q, out));
    out_bdim[0] = b;
    return OLY_OK;
}

static oly_status rev_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, ct, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- slice */

static oly_status slice_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                              const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_slice *p = eqn->params;
    int b = in_bdim[0];
    oly_params_slice q;
    memset(&q, 0, sizeof q);
    OLY_TRY(ints_insert("slice", &p->start_indices, b, 0, &q.start_indices));
    OLY_TRY(ints_insert("slice", &p->limit_indices, b, ctx->size, &q.limit_indices));
    if (p->strides.n) OLY_TRY(ints_insert("slice", &p->strides, b, 1, &q.strides));
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_slice, in[0], &q, out));
    out_bdim[0] = b;
    return OLY_OK;
}

/* Pads ct with zeros back to the operand's shape (interior padding fills the
 * strides' gaps). */
static oly_status slice_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                  oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_slice *p = eqn->params;
    oly_aval x = in_aval_of(eqn, 0);
    const oly_aval *o = &eqn->out[0]->aval;
    oly_params_pad q;
    memset(&q, 0, sizeof q);
    q.lo.n = q.hi.n = q.interior.n = x.rank;
    for (int d = 0; d < x.rank; d++) {
        int64_t st = p->strides.n ? p->strides.v[d] : 1, n = o->dims[d];
        q.interior.v[d] = st - 1;
        if (n == 0) {
            q.lo.v[d] = 0;
            q.hi.v[d] = x.dims[d];
        } else {
            q.lo.v[d] = p->start_indices.v[d];
            q.hi.v[d] = x.dims[d] - (p->start_indices.v[d] + (n - 1) * st + 1);
        }
    }
    oly_atom pin[2] = {ct[0]};
    OLY_TRY(zeros_scalar(ctx->b, o->dtype, &pin[1]));
    OLY_TRY(oly__emit(ctx->b, &oly__prim_pad, pin, 2, &q, NULL, 0, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- dynamic_slice */

static bool any_index_batched(const oly_eqn *eqn, int first, const int *in_bdim)
{
    for (int i = first; i < eqn->n_in; i++)
        if (in_bdim[i] != OLY_NOT_MAPPED) return true;
    return false;
}

/* Batched start indices as one (B, r) index array for gather / scatter:
 * each start (batched or not) converted to a common int type, broadcast to
 * (B, 1) and joined along axis 1. */
static oly_status batched_starts(oly_batch_ctx *ctx, const oly_eqn *eqn, int first,
                                 const oly_atom *in, const int *in_bdim, oly_atom *out)
{
    int r = eqn->n_in - first;
    oly_dtype t = OLY_INT32;
    for (int i = first; i < eqn->n_in; i++)
        if (oly_dtype_size(in_aval_of(eqn, i).dtype) == 8) t = OLY_INT64;
    oly_atom cols[OLY_MAX_RANK];
    oly_ints col_shape = {.n = 2, .v = {ctx->size, 1}}, keep = {.n = 1, .v = {0}}, none = {.n = 0};
    for (int i = 0; i < r; i++) {
        oly_atom c;
        OLY_TRY(oly__emit_convert(ctx->b, in[first + i], t, &c));
        bool mapped = in_bdim[first + i] != OLY_NOT_MAPPED;
        OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, c, &col_shape, mapped ? &keep : &none, &cols[i]));
    }
    if (r == 1) {
        *out = cols[0];
        return OLY_OK;
    }
    oly_params_concatenate cp = {.dimension = 1};
    return oly__emit(ctx->b, &oly__prim_concatenate, cols, r, &cp, NULL, 0, out);
}

/* Batched start indices: one gather (clip mode clamps as dynamic_slice does),
 * its operand batch dim paired with the indices' when both are batched. */
static oly_status dynamic_slice_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                      const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dynamic_slice *p = eqn->params;
    int r = p->slice_sizes.n;
    if (!any_index_batched(eqn, 1, in_bdim)) {
        int b = in_bdim[0];
        oly_params_dynamic_slice q;
        OLY_TRY(ints_insert("dynamic_slice", &p->slice_sizes, b, ctx->size, &q.slice_sizes));
        oly_atom args[2 + OLY_MAX_RANK];
        args[0] = in[0];
        for (int i = 0, j = 1; i < q.slice_sizes.n; i++)
            args[1 + i] = i == b ? lit_index(0) : in[j++];
        OLY_TRY(oly__emit(ctx->b, &oly__prim_dynamic_slice, args, 1 + q.slice_sizes.n, &q, NULL,
                          0, out));
        out_bdim[0] = b;
        return OLY_OK;
    }
    if (r + 1 > OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED, "dynamic_slice: batching needs rank %d, above the "
                          "maximum %d", r + 1, OLY_MAX_RANK);
    bool bx = in_bdim[0] != OLY_NOT_MAPPED;
    oly_atom x = in[0], ix;
    if (bx) OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    OLY_TRY(batched_starts(ctx, eqn, 1, in, in_bdim, &ix));
    oly_params_gather g;
    memset(&g, 0, sizeof g);
    g.mode = OLY_GATHER_CLIP;
    g.offset_dims.n = g.start_index_map.n = r;
    g.slice_sizes.n = r + bx;
    for (int d = 0; d < r; d++) {
        g.offset_dims.v[d] = d + 1;
        g.start_index_map.v[d] = d + bx;
        g.slice_sizes.v[d + bx] = p->slice_sizes.v[d];
    }
    if (bx) {
        g.slice_sizes.v[0] = 1;
        g.operand_batching_dims = (oly_ints){.n = 1, .v = {0}};
        g.start_indices_batching_dims = (oly_ints){.n = 1, .v = {0}};
    }
    oly_atom args[2] = {x, ix};
    OLY_TRY(oly__emit(ctx->b, &oly__prim_gather, args, 2, &g, NULL, 0, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* The cotangent lands in a zero operand at the same (clamped) start. */
static oly_status dynamic_slice_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                          const oly_atom *in, const bool *linear,
                                          const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                          bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    for (int i = 1; i < eqn->n_in; i++)
        if (linear[i])
            return oly__error(OLY_ERR_INVALID, "dynamic_slice: start index %d cannot be linear",
                              i - 1);
    oly_aval x = in_aval_of(eqn, 0);
    oly_atom args[3 + OLY_MAX_RANK];
    OLY_TRY(zeros(ctx->b, &x, &args[0]));
    args[1] = ct[0];
    for (int i = 1; i < eqn->n_in; i++) args[1 + i] = in[i];
    OLY_TRY(oly__emit(ctx->b, &oly__prim_dynamic_update_slice, args, eqn->n_in + 1, NULL, NULL, 0,
                      &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* --- dynamic_update_slice */

/* Batched start indices: one scatter (clip mode, as dynamic_update_slice
 * clamps) with the operand's batch dim paired with the indices'. */
static oly_status dynamic_update_slice_batch(oly_batch_ctx *ctx, const oly_eqn *eqn,
                                             const oly_atom *in, const int *in_bdim,
                                             oly_atom *out, int *out_bdim)
{
    oly_atom args[2 + OLY_MAX_RANK + 1];
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &args[0]));
    OLY_TRY(oly__batch_move(ctx, in[1], in_bdim[1], 0, &args[1]));
    out_bdim[0] = 0;
    if (any_index_batched(eqn, 2, in_bdim)) {
        int r = eqn->n_in - 2;
        oly_atom ix;
        OLY_TRY(batched_starts(ctx, eqn, 2, in, in_bdim, &ix));
        oly_params_scatter s;
        memset(&s, 0, sizeof s);
        s.mode = OLY_GATHER_CLIP;
        s.unique_indices = true; /* one window per batch element */
        s.update_window_dims.n = s.scatter_dims_to_operand_dims.n = r;
        for (int d = 0; d < r; d++) s.update_window_dims.v[d] = s.scatter_dims_to_operand_dims.v[d] = d + 1;
        s.operand_batching_dims = (oly_ints){.n = 1, .v = {0}};
        s.scatter_indices_batching_dims = (oly_ints){.n = 1, .v = {0}};
        oly_atom sargs[3] = {args[0], ix, args[1]};
        return oly__emit(ctx->b, &oly__prim_scatter, sargs, 3, &s, NULL, 0, out);
    }
    args[2] = lit_index(0);
    for (int i = 2; i < eqn->n_in; i++) args[i + 1] = in[i];
    return oly__emit(ctx->b, &oly__prim_dynamic_update_slice, args, eqn->n_in + 1, NULL, NULL, 0,
                     out);
}

static oly_status dynamic_update_slice_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                           const oly_atom *primal, const oly_atom *tangent,
                                           const bool *tan_nz, oly_atom *primal_out,
                                           oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    if (!out_nz[0]) return OLY_OK;
    oly_atom args[2 + OLY_MAX_RANK];
    for (int k = 0; k < 2; k++) {
        if (tan_nz[k]) {
            args[k] = tangent[k];
        } else {
            oly_aval a = oly__atom_aval(&primal[k]);
            OLY_TRY(zeros(ctx->b, &a, &args[k]));
        }
    }
    for (int i = 2; i < eqn->n_in; i++) args[i] = primal[i];
    return oly__emit_eqn(ctx->b, eqn, args, tangent_out);
}

/* Operand: ct with the update's region zeroed; update: that region of ct. */
static oly_status dynamic_update_slice_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                                 const oly_atom *in, const bool *linear,
                                                 const oly_atom *ct, const bool *ct_nz,
                                                 oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    for (int i = 2; i < eqn->n_in; i++)
        if (linear[i])
            return oly__error(OLY_ERR_INVALID,
                              "dynamic_update_slice: start index %d cannot be linear", i - 2);
    oly_aval u = in_aval_of(eqn, 1);
    oly_atom args[2 + OLY_MAX_RANK];
    for (int i = 2; i < eqn->n_in; i++) args[i] = in[i];
    if (linear[0]) {
        args[0] = ct[0];
        OLY_TRY(zeros(ctx->b, &u, &args[1]));
        OLY_TRY(oly__emit_eqn(ctx->b, eqn, args, &ct_in[0]));
        ct_in_nz[0] = true;
    }
    if (linear[1]) {
        oly_params_dynamic_slice q = {.slice_sizes = oly__ints(u.rank, u.dims)};
        args[1] = ct[0];
        OLY_TRY(oly__emit(ctx->b, &oly__prim_dynamic_slice, args + 1, eqn->n_in - 1, &q, NULL, 0,
                          &ct_in[1]));
        ct_in_nz[1] = true;
    }
    return OLY_OK;
}

/* --- concatenate */

static oly_status concatenate_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_concatenate *p = eqn->params;
    int rank = in_aval_of(eqn, 0).rank;
    oly_atom *args = oly__malloc(sizeof *args * (size_t)eqn->n_in);
    if (!args) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int i = 0; i < eqn->n_in && s == OLY_OK; i++)
        s = oly__batch_move(ctx, in[i], in_bdim[i], 0, &args[i]);
    oly_params_concatenate q = {.dimension = norm_ax(p->dimension, rank) + 1};
    if (s == OLY_OK)
        s = oly__emit(ctx->b, &oly__prim_concatenate, args, eqn->n_in, &q, NULL, 0, out);
    free(args);
    if (s == OLY_OK) out_bdim[0] = 0;
    return s;
}

static oly_status concatenate_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    oly_atom *args = oly__malloc(sizeof *args * (size_t)eqn->n_in);
    if (!args) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int i = 0; i < eqn->n_in && s == OLY_OK; i++) {
        if (tan_nz[i]) {
            args[i] = tangent[i];
        } else {
            oly_aval a = oly__atom_aval(&primal[i]);
            s = zeros(ctx->b, &a, &args[i]);
        }
    }
    if (s == OLY_OK) s = oly__emit_eqn(ctx->b, eqn, args, tangent_out);
    free(args);
    if (s == OLY_OK) out_nz[0] = true;
    return s;
}

static oly_status concatenate_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear,
                                        const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                        bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_concatenate *p = eqn->params;
    const oly_aval *o = &eqn->out[0]->aval;
    int64_t axis = norm_ax(p->dimension, o->rank), off = 0;
    for (int i = 0; i < eqn->n_in; i++) {
        oly_aval x = in_aval_of(eqn, i);
        if (linear[i]) {
            oly_params_slice q;
            memset(&q, 0, sizeof q);
            q.start_indices.n = q.limit_indices.n = o->rank;
            for (int d = 0; d < o->rank; d++) {
                q.start_indices.v[d] = d == axis ? off : 0;
                q.limit_indices.v[d] = d == axis ? off + x.dims[d] : o->dims[d];
            }
            OLY_TRY(oly__emit_1(ctx->b, &oly__prim_slice, ct[0], &q, &ct_in[i]));
            ct_in_nz[i] = true;
        }
        off += x.dims[axis];
    }
    return OLY_OK;
}

/* --- pad */

/* An unbatched padding value keeps the batch axis in place (no padding there);
 * a batched one pads with zero and selects the per-element value outside the
 * operand's footprint (a mask: ones padded with false). */
static oly_status pad_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                            const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_pad *p = eqn->params;
    oly_params_pad q;
    if (in_bdim[1] == OLY_NOT_MAPPED) {
        int b = in_bdim[0];
        OLY_TRY(ints_insert("pad", &p->lo, b, 0, &q.lo));
        OLY_TRY(ints_insert("pad", &p->hi, b, 0, &q.hi));
        OLY_TRY(ints_insert("pad", &p->interior, b, 0, &q.interior));
        OLY_TRY(oly__emit(ctx->b, &oly__prim_pad, in, 2, &q, NULL, 0, out));
        out_bdim[0] = b;
        return OLY_OK;
    }
    OLY_TRY(ints_insert("pad", &p->lo, 0, 0, &q.lo));
    OLY_TRY(ints_insert("pad", &p->hi, 0, 0, &q.hi));
    OLY_TRY(ints_insert("pad", &p->interior, 0, 0, &q.interior));
    oly_aval x = in_aval_of(eqn, 0);
    const oly_aval *o = &eqn->out[0]->aval;
    oly_atom args[2], padded, mask, maskb, v, vb;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &args[0]));
    OLY_TRY(zeros_scalar(ctx->b, x.dtype, &args[1]));
    OLY_TRY(oly__emit(ctx->b, &oly__prim_pad, args, 2, &q, NULL, 0, &padded));
    oly_aval ones = x;
    ones.dtype = OLY_BOOL;
    ones.weak = false;
    OLY_TRY(oly__emit_full(ctx->b, &ones, 1.0, &args[0]));
    OLY_TRY(zeros_scalar(ctx->b, OLY_BOOL, &args[1]));
    OLY_TRY(oly__emit(ctx->b, &oly__prim_pad, args, 2, p, NULL, 0, &mask));
    if (o->rank >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED, "pad: batching needs rank %d, above the maximum %d",
                          o->rank + 1, OLY_MAX_RANK);
    oly_ints shape = {.n = o->rank + 1}, mdims = {.n = o->rank}, vdims = {.n = 1, .v = {0}};
    shape.v[0] = ctx->size;
    for (int d = 0; d < o->rank; d++) {
        shape.v[d + 1] = o->dims[d];
        mdims.v[d] = d + 1;
    }
    OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, mask, &shape, &mdims, &maskb));
    OLY_TRY(oly__batch_move(ctx, in[1], in_bdim[1], 0, &v));
    OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, v, &shape, &vdims, &vb));
    OLY_TRY(oly__emit_select(ctx->b, maskb, vb, padded, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

static oly_status pad_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    if (!out_nz[0]) return OLY_OK;
    oly_atom args[2];
    for (int k = 0; k < 2; k++) {
        if (tan_nz[k]) {
            args[k] = tangent[k];
        } else {
            oly_aval a = oly__atom_aval(&primal[k]);
            OLY_TRY(zeros(ctx->b, &a, &args[k]));
        }
    }
    return oly__emit_eqn(ctx->b, eqn, args, tangent_out);
}

static oly_status sum_all(oly_builder *b, oly_atom x, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    oly_ints axes = oly__ints_range(a.rank);
    return oly__emit_reduce_sum(b, x, &axes, out);
}

/* As JAX: the operand's cotangent un-pads ct (negated lo/hi) and takes every
 * (interior+1)-th element; the padding value's is the rest of ct's sum. */
static oly_status pad_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_pad *p = eqn->params;
    oly_aval x = in_aval_of(eqn, 0);
    oly_params_pad un;
    memset(&un, 0, sizeof un);
    un.lo.n = un.hi.n = un.interior.n = x.rank;
    oly_params_slice sl;
    memset(&sl, 0, sizeof sl);
    sl.start_indices.n = sl.limit_indices.n = sl.strides.n = x.rank;
    const oly_aval *o = &eqn->out[0]->aval;
    for (int d = 0; d < x.rank; d++) {
        un.lo.v[d] = -p->lo.v[d];
        un.hi.v[d] = -p->hi.v[d];
        /* the un-padded length: o - lo - hi = n + (n-1)*interior */
        sl.limit_indices.v[d] = o->dims[d] - p->lo.v[d] - p->hi.v[d];
        sl.strides.v[d] = p->interior.v[d] + 1;
    }
    oly_atom args[2] = {ct[0]}, unpadded, t_op;
    OLY_TRY(zeros_scalar(ctx->b, o->dtype, &args[1]));
    OLY_TRY(oly__emit(ctx->b, &oly__prim_pad, args, 2, &un, NULL, 0, &unpadded));
    OLY_TRY(oly__emit_1(ctx->b, &oly__prim_slice, unpadded, &sl, &t_op));
    if (linear[0]) {
        ct_in[0] = t_op;
        ct_in_nz[0] = true;
    }
    if (linear[1]) {
        oly_atom all, inner;
        OLY_TRY(sum_all(ctx->b, ct[0], &all));
        OLY_TRY(sum_all(ctx->b, t_op, &inner));
        OLY_TRY(oly__emit_bin(ctx->b, &oly__prim_sub, all, inner, &ct_in[1]));
        ct_in_nz[1] = true;
    }
    return OLY_OK;
}

/* --- iota: no inputs, so no driver ever asks; the rules say so for
 * completeness (an unbatched constant; a zero tangent). */

static oly_status iota_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, in, out));
    out_bdim[0] = OLY_NOT_MAPPED;
    return OLY_OK;
}

static oly_status iota_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = false;
    return OLY_OK;
}

/* --- copy */

static oly_status copy_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, in, out));
    out_bdim[0] = in_bdim[0];
    return OLY_OK;
}

static oly_status copy_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    ct_in[0] = ct[0];
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */


static const oly_param_field broadcast_in_dim_fields[] = {
    OLY_FIELD(oly_params_broadcast_in_dim, shape, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_broadcast_in_dim, broadcast_dimensions, OLY_FIELD_INTS),
};
static const oly_param_field reshape_fields[] = {
    OLY_FIELD(oly_params_reshape, new_sizes, OLY_FIELD_INTS),
};
static const oly_param_field transpose_fields[] = {
    OLY_FIELD(oly_params_transpose, permutation, OLY_FIELD_INTS),
};
static const oly_param_field dims_fields[] = {
    OLY_FIELD(oly_params_dims, dimensions, OLY_FIELD_INTS),
};
static const oly_param_field slice_fields[] = {
    OLY_FIELD(oly_params_slice, start_indices, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_slice, limit_indices, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_slice, strides, OLY_FIELD_INTS),
};
static const oly_param_field dynamic_slice_fields[] = {
    OLY_FIELD(oly_params_dynamic_slice, slice_sizes, OLY_FIELD_INTS),
};
static const oly_param_field concatenate_fields[] = {
    OLY_FIELD(oly_params_concatenate, dimension, OLY_FIELD_INT),
};
static const oly_param_field pad_fields[] = {
    OLY_FIELD(oly_params_pad, lo, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_pad, hi, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_pad, interior, OLY_FIELD_INTS),
};
static const oly_param_field iota_fields[] = {
    OLY_FIELD(oly_params_iota, dtype, OLY_FIELD_DTYPE),
    OLY_FIELD(oly_params_iota, shape, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_iota, dimension, OLY_FIELD_INT),
};

#define PARAMS(T, F) .params_size = sizeof(T), .fields = F, .n_fields = OLY_ARRAY_LEN(F)

const oly_prim oly__prim_broadcast_in_dim = {
    .name = "broadcast_in_dim", .n_in = 1, .n_out = 1,
    PARAMS(oly_params_broadcast_in_dim, broadcast_in_dim_fields),
    .shape = broadcast_in_dim_shape,
    .batch = broadcast_in_dim_batch, .jvp = jvp_linear0, .transpose = broadcast_in_dim_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_reshape = {
    .name = "reshape", .n_in = 1, .n_out = 1, PARAMS(oly_params_reshape, reshape_fields),
    .shape = reshape_shape,
    .batch = reshape_batch, .jvp = jvp_linear0, .transpose = reshape_back_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_transpose = {
    .name = "transpose", .n_in = 1, .n_out = 1, PARAMS(oly_params_transpose, transpose_fields),
    .shape = transpose_shape,
    .batch = transpose_batch, .jvp = jvp_linear0, .transpose = transpose_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_squeeze = {
    .name = "squeeze", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = squeeze_shape,
    .batch = squeeze_batch, .jvp = jvp_linear0, .transpose = squeeze_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_expand_dims = {
    .name = "expand_dims", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = expand_dims_shape,
    .batch = expand_dims_batch, .jvp = jvp_linear0, .transpose = expand_dims_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_rev = {
    .name = "rev", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = rev_shape,
    .batch = rev_batch, .jvp = jvp_linear0, .transpose = rev_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_slice = {
    .name = "slice", .n_in = 1, .n_out = 1, PARAMS(oly_params_slice, slice_fields),
    .shape = slice_shape,
    .batch = slice_batch, .jvp = jvp_linear0, .transpose = slice_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_dynamic_slice = {
    .name = "dynamic_slice", .n_in = -1, .n_out = 1,
    PARAMS(oly_params_dynamic_slice, dynamic_slice_fields),
    .shape = dynamic_slice_shape,
    .batch = dynamic_slice_batch, .jvp = jvp_linear0, .transpose = dynamic_slice_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_dynamic_update_slice = {
    .name = "dynamic_update_slice", .n_in = -1, .n_out = 1,
    .shape = dynamic_update_slice_shape,
    .batch = dynamic_update_slice_batch, .jvp = dynamic_update_slice_jvp,
    .transpose = dynamic_update_slice_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_concatenate = {
    .name = "concatenate", .n_in = -1, .n_out = 1,
    PARAMS(oly_params_concatenate, concatenate_fields),
    .shape = concatenate_shape,
    .batch = concatenate_batch, .jvp = concatenate_jvp, .transpose = concatenate_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_pad = {
    .name = "pad", .n_in = 2, .n_out = 1, PARAMS(oly_params_pad, pad_fields),
    .shape = pad_shape,
    .batch = pad_batch, .jvp = pad_jvp, .transpose = pad_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};
const oly_prim oly__prim_iota = {
    .name = "iota", .n_in = 0, .n_out = 1, PARAMS(oly_params_iota, iota_fields),
    .shape = iota_shape,
    .batch = iota_batch, .jvp = iota_jvp,
    .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE,
};
const oly_prim oly__prim_copy = {
    .name = "copy", .n_in = 1, .n_out = 1, .shape = copy_shape,
    .batch = copy_batch, .jvp = jvp_linear0, .transpose = copy_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

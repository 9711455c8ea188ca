/* sort.c — sort (JAX's lax.sort_p: several operands of one shape sorted along
 * a dimension, lexicographically by the first num_keys of them, the others
 * permuted along) and top_k (the k largest along the last axis). Shape and
 * transformation rules here; kernels in src/cpu/sort.c.
 *
 * Order: NumPy's. Floats sort NaNs last (after +inf); -0.0 and 0.0 compare
 * equal (a stable sort keeps their input order); complex numbers sort by
 * (real, imag), NaNs last in each part. The CPU kernel is always stable, so
 * is_stable=False gives the stable result too.
 *
 * Rules. sort batches by sorting along the shifted dimension with every
 * operand batched at axis 0. Its JVP sorts the tangents along with the
 * primal keys (num_keys unchanged): the same permutation, no gather. That
 * tangent sort is linear in its non-key operands (a permutation), so sort
 * has a transpose rule for them: the inverse permutation, by sorting the
 * cotangents by the forward permutation (itself a sort of the keys with an
 * iota). Keys are never linear. top_k's JVP picks the tangents at the
 * chosen indices with a one-hot contraction (dot_general with
 * eq(indices, iota)), linear and transposable; it costs k * n per row. */
#include "internal.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- shape rules */

static int sort_num_outputs(const void *params, int n_in)
{
    (void)params;
    return n_in;
}

static oly_status sort_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_sort *p = ctx->params;
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "sort: expected at least 1 operand, got %d", ctx->n_in);
    const oly_aval *x = &ctx->in[0];
    for (int i = 0; i < ctx->n_in; i++) {
        const oly_aval *a = &ctx->in[i];
        if ((unsigned)a->dtype >= OLY_DTYPE_COUNT)
            return oly__error(OLY_ERR_TYPE, "sort: operand %d has an invalid dtype", i);
        bool same = a->rank == x->rank;
        for (int d = 0; same && d < x->rank; d++) same = a->dims[d] == x->dims[d];
        if (!same)
            return oly__error(OLY_ERR_SHAPE,
                              "sort: all operands must have the same shape; operand 0 is %s, "
                              "operand %d is %s",
                              oly__show_aval(x).s, i, oly__show_aval(a).s);
    }
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "sort: operands must have rank >= 1, got %s",
                          oly__show_aval(x).s);
    if (p->num_keys < 1 || p->num_keys > ctx->n_in)
        return oly__error(OLY_ERR_INVALID,
                          "sort: num_keys must be in [1, %d] (the number of operands), got %lld",
                          ctx->n_in, (long long)p->num_keys);
    int64_t d = 0;
    OLY_TRY(oly__norm_axis("sort", "dimension", p->dimension, x->rank, &d));
    for (int i = 0; i < ctx->n_in; i++) out[i] = ctx->in[i];
    return OLY_OK;
}

static oly_status top_k_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_top_k *p = ctx->params;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "top_k: expected 1 operand, got %d", ctx->n_in);
    const oly_aval *x = &ctx->in[0];
    if ((unsigned)x->dtype >= OLY_DTYPE_COUNT || oly_dtype_is_bool(x->dtype) ||
        oly_dtype_is_complex(x->dtype))
        return oly__error(OLY_ERR_TYPE, "top_k: operand must have an integer or float dtype, got %s",
                          oly__show_aval(x).s);
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "top_k: operand must have rank >= 1, got %s",
                          oly__show_aval(x).s);
    int64_t n = x->dims[x->rank - 1];
    if (p->k < 0 || p->k > n)
        return oly__error(OLY_ERR_INVALID,
                          "top_k: k must be in [0, %lld] (the last axis of operand %s), got %lld",
                          (long long)n, oly__show_aval(x).s, (long long)p->k);
    out[0] = *x;
    out[0].dims[x->rank - 1] = p->k;
    out[1] = out[0];
    out[1].dtype = OLY_INT32;
    out[1].weak = false;
    return OLY_OK;
}

/* ---------------------------------------------------------------- batching */

static oly_aval in_aval_of(const oly_eqn *e, int i) { return oly__atom_aval(&e->in[i]); }

/* Every operand batched at axis 0 (unmapped ones broadcast there); the sorted
 * dimension shifts by one. */
static oly_status sort_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_sort *p = eqn->params;
    int n = eqn->n_in;
    oly_aval x = in_aval_of(eqn, 0);
    oly_atom *xs = oly__malloc((size_t)n * sizeof *xs);
    if (!xs) return OLY_ERR_NOMEM;
    oly_status st = OLY_OK;
    for (int i = 0; i < n && st == OLY_OK; i++) st = oly__batch_move(ctx, in[i], in_bdim[i], 0, &xs[i]);
    oly_params_sort q = *p;
    q.dimension = (p->dimension < 0 ? p->dimension + x.rank : p->dimension) + 1;
    if (st == OLY_OK) st = oly__emit(ctx->b, &oly__prim_sort, xs, n, &q, NULL, 0, out);
    for (int i = 0; i < n; i++) out_bdim[i] = 0;
    free(xs);
    return st;
}

static oly_status top_k_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                              const int *in_bdim, oly_atom *out, int *out_bdim)
{
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    OLY_TRY(oly__emit(ctx->b, &oly__prim_top_k, &x, 1, eqn->params, NULL, 0, out));
    out_bdim[0] = out_bdim[1] = 0;
    return OLY_OK;
}

/* ---------------------------------------------------------------- sort: jvp, transpose */

/* The tangents sorted by the primal keys: sort(keys..., t...) with num_keys
 * unchanged. */
static oly_status sort_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_sort *p = eqn->params;
    int n = eqn->n_in, nk = (int)p->num_keys;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    oly_atom *args = oly__malloc(2 * (size_t)(nk + n) * sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    oly_atom *res = args + nk + n; /* the tangent sort's nk + n outputs at most */
    int m = nk;
    for (int i = 0; i < nk; i++) args[i] = primal[i];
    for (int i = 0; i < n; i++) {
        out_nz[i] = tan_nz[i];
        if (tan_nz[i]) args[m++] = tangent[i];
    }
    oly_status st = OLY_OK;
    if (m > nk) st = oly__emit(ctx->b, &oly__prim_sort, args, m, p, NULL, 0, res);
    for (int i = 0, j = nk; st == OLY_OK && i < n; i++)
        if (tan_nz[i]) tangent_out[i] = res[j++];
    free(args);
    return st;
}

/* Linear in the non-key operands: each cotangent goes back through the
 * inverse permutation, sort(perm, ct...) with perm = sort(keys..., iota). */
static oly_status sort_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_sort *p = eqn->params;
    int n = eqn->n_in, nk = (int)p->num_keys;
    for (int i = 0; i < nk; i++)
        if (linear[i])
            return oly__error(OLY_ERR_UNSUPPORTED,
                              "sort: cannot transpose with respect to key operand %d (sort is "
                              "linear only in its non-key operands)",
                              i);
    oly_aval x = in_aval_of(eqn, 0);
    int64_t d = p->dimension < 0 ? p->dimension + x.rank : p->dimension;
    int any = 0;
    for (int i = nk; i < n; i++) {
        ct_in_nz[i] = false;
        if (linear[i] && ct_nz[i]) any++;
    }
    if (!any) return OLY_OK;
    oly_atom *args = oly__malloc((size_t)(2 * n + 2) * sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    oly_atom *res = args + n + 1;
    oly_params_iota io = {.dtype = x.dims[d] <= INT32_MAX ? OLY_INT32 : OLY_INT64,
                          .shape = oly__ints(x.rank, x.dims), .dimension = d};
    oly_params_sort q = *p;
    oly_status st = OLY_OK;
    for (int i = 0; i < nk; i++) args[i] = in[i];
    st = oly__emit(ctx->b, &oly__prim_iota, NULL, 0, &io, NULL, 0, &args[nk]);
    if (st == OLY_OK) st = oly__emit(ctx->b, &oly__prim_sort, args, nk + 1, &q, NULL, 0, res);
    if (st == OLY_OK) {
        args[0] = res[nk]; /* the permutation: output position -> input position */
        int m = 1;
        for (int i = nk; i < n; i++)
            if (linear[i] && ct_nz[i]) args[m++] = ct[i];
        q.num_keys = 1;
        st = oly__emit(ctx->b, &oly__prim_sort, args, m, &q, NULL, 0, res);
        for (int i = nk, j = 1; st == OLY_OK && i < n; i++)
            if (linear[i] && ct_nz[i]) {
                ct_in[i] = res[j++];
                ct_in_nz[i] = true;
            }
    }
    free(args);
    return st;
}

/* ---------------------------------------------------------------- top_k: jvp */

/* tangent_out[..., j] = t[..., idx[..., j]] as sum_i t[..., i] * (idx[..., j] == i). */
static oly_status top_k_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_top_k *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = out_nz[1] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = in_aval_of(eqn, 0);
    int r = x.rank;
    int64_t n = x.dims[r - 1];
    if (r >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "top_k: the JVP needs one more axis than operand %s has room for "
                          "(at most rank %d)",
                          oly__show_aval(&x).s, OLY_MAX_RANK - 1);
    oly_ints big = oly__ints(r, x.dims); /* (..., k, n) */
    big.v[r - 1] = p->k;
    big.v[r] = n;
    big.n = r + 1;
    oly_ints keep = oly__ints_range(r);
    oly_atom idx, io, hot, hotf;
    OLY_TRY(oly__emit_broadcast_in_dim(b, primal_out[1], &big, &keep, &idx));
    oly_params_iota iq = {.dtype = OLY_INT32, .shape = big, .dimension = r};
    OLY_TRY(oly__emit(b, &oly__prim_iota, NULL, 0, &iq, NULL, 0, &io));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, idx, io, &hot));
    oly_aval t = oly__atom_aval(&tangent[0]);
    OLY_TRY(oly__emit_convert(b, hot, t.dtype, &hotf));
    oly_params_dot_general dn;
    memset(&dn, 0, sizeof dn);
    dn.lhs_contracting = (oly_ints){.n = 1, .v = {r}};
    dn.rhs_contracting = (oly_ints){.n = 1, .v = {r - 1}};
    dn.lhs_batch = oly__ints_range(r - 1);
    dn.rhs_batch = oly__ints_range(r - 1);
    OLY_TRY(oly__emit_dot_general(b, hotf, tangent[0], &dn, &tangent_out[0]));
    out_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

static const oly_param_field sort_fields[] = {
    OLY_FIELD(oly_params_sort, dimension, OLY_FIELD_INT),
    OLY_FIELD(oly_params_sort, is_stable, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_sort, num_keys, OLY_FIELD_INT),
};
static const oly_param_field top_k_fields[] = {
    OLY_FIELD(oly_params_top_k, k, OLY_FIELD_INT),
};

const oly_prim oly__prim_sort = {
    .name = "sort", .n_in = -1, .num_outputs = sort_num_outputs,
    .params_size = sizeof(oly_params_sort),
    .fields = sort_fields, .n_fields = OLY_ARRAY_LEN(sort_fields),
    .shape = sort_shape,
    .batch = sort_batch, .jvp = sort_jvp, .transpose = sort_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* top_k is not linear: no transpose rule. */
const oly_prim oly__prim_top_k = {
    .name = "top_k", .n_in = 1, .n_out = 2,
    .params_size = sizeof(oly_params_top_k),
    .fields = top_k_fields, .n_fields = OLY_ARRAY_LEN(top_k_fields),
    .shape = top_k_shape,
    .batch = top_k_batch, .jvp = top_k_jvp,
    .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE,
};

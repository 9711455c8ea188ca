/* linalg.c — dot_general, following JAX's lax: output dims are the batch dims,
 * then lhs free dims, then rhs free dims (each in operand order). The shape
 * rule and the kernel (src/cpu/linalg.c) share the analysis of the dimension
 * numbers (oly__dot_general_dims). */
#include "internal.h"
#include "trans/trans.h"

#include <limits.h>

/* ---------------------------------------------------------------- dimension numbers */

typedef oly_dot_dims dims_info;

static oly_status norm_list(const char *field, const oly_ints *v, const oly_aval *a,
                            const char *side, int64_t *out, bool *used)
{
    if (v->n < 0 || v->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "dot_general: %s must have 0..%d entries, got %d",
                          field, OLY_MAX_RANK, v->n);
    for (int i = 0; i < v->n; i++) {
        int64_t d = v->v[i];
        if (d < -a->rank || d >= a->rank)
            return oly__error(OLY_ERR_INVALID,
                              "dot_general: %s %s out of range for %s %s", field,
                              oly__show_ints(v).s, side, oly__show_aval(a).s);
        if (d < 0) d += a->rank;
        if (used[d])
            return oly__error(OLY_ERR_INVALID,
                              "dot_general: %s dimension %lld appears twice in the batch and "
                              "contracting dimensions (%s %s)",
                              side, (long long)d, side, oly__show_aval(a).s);
        used[d] = true;
        out[i] = d;
    }
    return OLY_OK;
}

oly_status oly__dot_general_dims(const oly_params_dot_general *p, const oly_aval *l,
                                 const oly_aval *r, oly_dot_dims *di)
{
    bool lu[OLY_MAX_RANK] = {false}, ru[OLY_MAX_RANK] = {false};
    OLY_TRY(norm_list("lhs_batch", &p->lhs_batch, l, "lhs", di->lb, lu));
    OLY_TRY(norm_list("lhs_contracting", &p->lhs_contracting, l, "lhs", di->lc, lu));
    OLY_TRY(norm_list("rhs_batch", &p->rhs_batch, r, "rhs", di->rb, ru));
    OLY_TRY(norm_list("rhs_contracting", &p->rhs_contracting, r, "rhs", di->rc, ru));
    if (p->lhs_batch.n != p->rhs_batch.n)
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: lhs_batch %s and rhs_batch %s must have equal lengths",
                          oly__show_ints(&p->lhs_batch).s, oly__show_ints(&p->rhs_batch).s);
    if (p->lhs_contracting.n != p->rhs_contracting.n)
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: lhs_contracting %s and rhs_contracting %s must have "
                          "equal lengths",
                          oly__show_ints(&p->lhs_contracting).s,
                          oly__show_ints(&p->rhs_contracting).s);
    di->nb = p->lhs_batch.n;
    di->nc = p->lhs_contracting.n;
    di->B = di->M = di->N = di->K = 1;
    for (int i = 0; i < di->nb; i++) {
        if (l->dims[di->lb[i]] != r->dims[di->rb[i]])
            return oly__error(OLY_ERR_SHAPE,
                              "dot_general: batch dimensions must have equal sizes: lhs %s "
                              "dimension %lld vs rhs %s dimension %lld",
                              oly__show_aval(l).s, (long long)di->lb[i], oly__show_aval(r).s,
                              (long long)di->rb[i]);
        di->B *= l->dims[di->lb[i]];
    }
    for (int i = 0; i < di->nc; i++) {
        if (l->dims[di->lc[i]] != r->dims[di->rc[i]])
            return oly__error(OLY_ERR_SHAPE,
                              "dot_general: contracting dimensions must have equal sizes: lhs "
                              "%s dimension %lld vs rhs %s dimension %lld",
                              oly__show_aval(l).s, (long long)di->lc[i], oly__show_aval(r).s,
                              (long long)di->rc[i]);
        di->K *= l->dims[di->lc[i]];
    }
    di->lf = di->rf = 0;
    for (int d = 0; d < l->rank; d++)
        if (!lu[d]) {
            di->lfree[di->lf++] = d;
            di->M *= l->dims[d];
        }
    for (int d = 0; d < r->rank; d++)
        if (!ru[d]) {
            di->rfree[di->rf++] = d;
            di->N *= r->dims[d];
        }
    return OLY_OK;
}

static oly_status dot_general_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dot_general *p = ctx->params;
    if (ctx->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "dot_general: expected 2 operands, got %d", ctx->n_in);
    const oly_aval *l = &ctx->in[0], *r = &ctx->in[1];
    if (l->dtype != r->dtype || (unsigned)l->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE,
                          "dot_general: operands must have equal dtypes, got lhs %s and rhs %s",
                          oly__show_aval(l).s, oly__show_aval(r).s);
    dims_info di;
    OLY_TRY(oly__dot_general_dims(p, l, r, &di));
    int rank = di.nb + di.lf + di.rf;
    if (rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "dot_general: result rank %d exceeds the maximum %d",
                          rank, OLY_MAX_RANK);
    memset(out, 0, sizeof *out);
    out->dtype = l->dtype;
    out->weak = l->weak && r->weak;
    for (int i = 0; i < di.nb; i++) out->dims[out->rank++] = l->dims[di.lb[i]];
    for (int i = 0; i < di.lf; i++) out->dims[out->rank++] = l->dims[di.lfree[i]];
    for (int i = 0; i < di.rf; i++) out->dims[out->rank++] = r->dims[di.rfree[i]];
    return OLY_OK;
}

/* ---------------------------------------------------------------- transformation rules
 *
 * Batching: batched on both sides, the batch axes become a new leading pair of
 * batch dimensions (result axis 0); batched on one side, the batch axis is a free
 * dimension of that side and the result carries it where that side's free dims
 * land. JVP: bilinear. Transpose: JAX's rule, a dot_general of ct with the other
 * operand followed by a transpose back to the operand's dimension order. */

/* Normalised copy of a dimension list, shifted around a batch axis at b
 * (b == OLY_NOT_MAPPED: no shift). */
static oly_ints norm_dims(const oly_ints *v, int rank, int b)
{
    oly_ints r = {.n = v->n};
    for (int i = 0; i < v->n; i++) {
        int64_t d = v->v[i] < 0 ? v->v[i] + rank : v->v[i];
        r.v[i] = b != OLY_NOT_MAPPED && d >= b ? d + 1 : d;
    }
    return r;
}

/* The dims of rank not named in a or c, ascending (a, c normalised). */
static oly_ints free_dims(int rank, const oly_ints *a, const oly_ints *c)
{
    bool used[OLY_MAX_RANK] = {false};
    for (int i = 0; i < a->n; i++) used[a->v[i]] = true;
    for (int i = 0; i < c->n; i++) used[c->v[i]] = true;
    oly_ints r = {.n = 0};
    for (int d = 0; d < rank; d++)
        if (!used[d]) r.v[r.n++] = d;
    return r;
}

static oly_status prepend(oly_ints *v, int64_t x)
{
    if (v->n >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "dot_general: batching needs %d batch dimensions, above the maximum %d",
                          v->n + 1, OLY_MAX_RANK);
    memmove(v->v + 1, v->v, sizeof v->v[0] * (size_t)v->n);
    v->v[0] = x;
    v->n++;
    return OLY_OK;
}

static oly_status dot_general_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dot_general *p = eqn->params;
    oly_aval la = oly__atom_aval(&eqn->in[0]), ra = oly__atom_aval(&eqn->in[1]);
    int lb = in_bdim[0], rb = in_bdim[1];
    oly_params_dot_general q = {
        .lhs_contracting = norm_dims(&p->lhs_contracting, la.rank, lb),
        .rhs_contracting = norm_dims(&p->rhs_contracting, ra.rank, rb),
        .lhs_batch = norm_dims(&p->lhs_batch, la.rank, lb),
        .rhs_batch = norm_dims(&p->rhs_batch, ra.rank, rb),
    };
    int nb = p->lhs_batch.n;
    if (lb != OLY_NOT_MAPPED && rb != OLY_NOT_MAPPED) {
        OLY_TRY(prepend(&q.lhs_batch, lb));
        OLY_TRY(prepend(&q.rhs_batch, rb));
        out_bdim[0] = 0;
    } else if (lb != OLY_NOT_MAPPED) {
        oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
        oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
        oly_ints lf = free_dims(la.rank, &lc, &lbt);
        int before = 0;
        for (int i = 0; i < lf.n; i++) before += lf.v[i] < lb;
        out_bdim[0] = nb + before;
    } else {
        oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
        oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
        oly_ints rc = norm_dims(&p->rhs_contracting, ra.rank, OLY_NOT_MAPPED);
        oly_ints rbt = norm_dims(&p->rhs_batch, ra.rank, OLY_NOT_MAPPED);
        oly_ints lf = free_dims(la.rank, &lc, &lbt), rf = free_dims(ra.rank, &rc, &rbt);
        int before = 0;
        for (int i = 0; i < rf.n; i++) before += rf.v[i] < rb;
        out_bdim[0] = nb + lf.n + before;
    }
    return oly__emit_dot_general(ctx->b, in[0], in[1], &q, out);
}

static oly_status dot_general_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_dot_general *p = eqn->params;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    oly_atom a, c;
    if (tan_nz[0]) OLY_TRY(oly__emit_dot_general(ctx->b, tangent[0], primal[1], p, &a));
    if (tan_nz[1]) OLY_TRY(oly__emit_dot_general(ctx->b, primal[0], tangent[1], p, &c));
    if (tan_nz[0] && tan_nz[1]) return oly__emit_bin(ctx->b, &oly__prim_add, a, c, tangent_out);
    if (tan_nz[0]) *tangent_out = a;
    if (tan_nz[1]) *tangent_out = c;
    return OLY_OK;
}

/* The cotangent of x in dot_general(x, y) (or of y in dot_general(y, x) when
 * swap_ans): JAX's _dot_general_transpose_lhs. Dimension lists are normalised. */
static oly_status transpose_side(oly_builder *b, oly_atom g, oly_atom y, int x_rank, int y_rank,
                                 const oly_ints *xc, const oly_ints *yc, const oly_ints *xbt,
                                 const oly_ints *ybt, bool swap_ans, oly_atom *out)
{
    oly_ints x_kept = free_dims(x_rank, xc, xbt), y_kept = free_dims(y_rank, yc, ybt);
    int nb = xbt->n;
    oly_params_dot_general q = {.lhs_batch = oly__ints_range(nb), .rhs_batch = *ybt,
                                .rhs_contracting = y_kept};
    int first = swap_ans ? nb : nb + x_kept.n;
    q.lhs_contracting.n = y_kept.n;
    for (int i = 0; i < y_kept.n; i++) q.lhs_contracting.v[i] = first + i;
    /* the result's dims: x's batch dims, x's kept dims, then x's contracting
     * dims in the order of y's contracting dims (ascending in y) */
    int64_t order[OLY_MAX_RANK];
    int n = 0;
    for (int i = 0; i < nb; i++) order[n++] = xbt->v[i];
    for (int i = 0; i < x_kept.n; i++) order[n++] = x_kept.v[i];
    bool taken[OLY_MAX_RANK] = {false};
    for (int k = 0; k < yc->n; k++) {
        int best = -1;
        for (int i = 0; i < yc->n; i++)
            if (!taken[i] && (best < 0 || yc->v[i] < yc->v[best])) best = i;
        taken[best] = true;
        order[n++] = xc->v[best];
    }
    oly_atom r;
    OLY_TRY(oly__emit_dot_general(b, g, y, &q, &r));
    oly_params_transpose t = {.permutation = {.n = n}};
    bool ident = true;
    for (int k = 0; k < n; k++) {
        t.permutation.v[order[k]] = k;
        ident = ident && order[k] == k;
    }
    if (ident) {
        *out = r;
        return OLY_OK;
    }
    return oly__emit(b, &oly__prim_transpose, &r, 1, &t, NULL, 0, out);
}

static oly_status dot_general_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear,
                                        const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                        bool *ct_in_nz)
{
    const oly_params_dot_general *p = eqn->params;
    if (linear[0] && linear[1])
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: cannot transpose with both operands linear (it is "
                          "bilinear, not linear)");
    ct_in_nz[0] = ct_in_nz[1] = false;
    if (!ct_nz[0]) return OLY_OK;
    oly_aval la = oly__atom_aval(&eqn->in[0]), ra = oly__atom_aval(&eqn->in[1]);
    oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
    oly_ints rc = norm_dims(&p->rhs_contracting, ra.rank, OLY_NOT_MAPPED);
    oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
    oly_ints rbt = norm_dims(&p->rhs_batch, ra.rank, OLY_NOT_MAPPED);
    if (linear[0]) {
        OLY_TRY(transpose_side(ctx->b, ct[0], in[1], la.rank, ra.rank, &lc, &rc, &lbt, &rbt,
                               false, &ct_in[0]));
        ct_in_nz[0] = true;
    }
    if (linear[1]) {
        OLY_TRY(transpose_side(ctx->b, ct[0], in[0], ra.rank, la.rank, &rc, &lc, &rbt, &lbt,
                               true, &ct_in[1]));
        ct_in_nz[1] = true;
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- row */


static const oly_param_field dot_general_fields[] = {
    OLY_FIELD(oly_params_dot_general, lhs_contracting, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_dot_general, rhs_contracting, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_dot_general, lhs_batch, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_dot_general, rhs_batch, OLY_FIELD_INTS),
};

const oly_prim oly__prim_dot_general = {
    .name = "dot_general", .n_in = 2, .n_out = 1,
    .params_size = sizeof(oly_params_dot_general),
    .fields = dot_general_fields, .n_fields = OLY_ARRAY_LEN(dot_general_fields),
    .shape = dot_general_shape,
    .batch = dot_general_batch, .jvp = dot_general_jvp, .transpose = dot_general_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

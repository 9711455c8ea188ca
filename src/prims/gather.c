/* gather.c — gather and the scatter rows (scatter, scatter_add, scatter_mul,
 * scatter_min, scatter_max): JAX's lax.gather / lax.scatter* with their
 * dimension numbers (include/olympus.h, oly_params_gather / _scatter), the
 * index vector along the last axis of the indices. Shape and transformation
 * rules here; kernels in src/cpu/gather.c.
 *
 * Rules (JAX's formulas):
 * - batch: a batched operand gets a window dim of the batch's size; batched
 *   indices become index batch dims; both batched pair them as an
 *   operand_batching_dims / *_indices_batching_dims pair at axis 0, so
 *   per-example indexing stays one gather (no unrolling).
 * - gather is linear in the operand: jvp gathers the tangent (fill 0), the
 *   transpose scatter-adds the cotangent into zeros with the same numbers.
 * - scatter_add is linear in operand and updates; its transpose passes the
 *   cotangent to the operand and gathers it for the updates (dropped updates
 *   read 0).
 * - scatter (set): with unique_indices the jvp scatters the tangents and the
 *   transpose zeroes the overwritten cotangent / gathers it for the updates.
 *   Without, the jvp finds which update wins each element (a scatter of
 *   update ids, gathered back), masks the losers and the overwritten operand
 *   elements, and scatter-adds: primal and tangent agree by construction.
 * - scatter_mul: linear in the operand (transpose: scatter_mul of the
 *   cotangent); the updates' tangent needs unique_indices, as in JAX.
 * - scatter_min / max: the tangent of each output element is the mean of the
 *   tangents of the inputs equal to it (operand element and updates). */
#include "internal.h"
#include "trans/trans.h"

#include <math.h>

/* ---------------------------------------------------------------- dimension checks */

static bool has(const oly_ints *v, int64_t x)
{
    for (int i = 0; i < v->n; i++)
        if (v->v[i] == x) return true;
    return false;
}

/* v's entries lie in [0, bound), without repeats, ascending when sorted. */
static oly_status check_list(const char *who, const char *field, const oly_ints *v, int64_t bound,
                             bool sorted)
{
    OLY_TRY(oly__check_ints(who, field, v));
    for (int i = 0; i < v->n; i++) {
        if (v->v[i] < 0 || v->v[i] >= bound)
            return oly__error(OLY_ERR_INVALID, "%s: %s %s: each entry must be in [0, %lld), got %lld",
                              who, field, oly__show_ints(v).s, (long long)bound,
                              (long long)v->v[i]);
        for (int j = 0; j < i; j++)
            if (v->v[j] == v->v[i] || (sorted && v->v[j] > v->v[i]))
                return oly__error(OLY_ERR_INVALID, "%s: %s %s must be %s", who, field,
                                  oly__show_ints(v).s,
                                  sorted ? "sorted, without repeats" : "without repeats");
    }
    return OLY_OK;
}

static oly_status check_disjoint(const char *who, const char *fa, const oly_ints *a,
                                 const char *fb, const oly_ints *b)
{
    for (int i = 0; i < a->n; i++)
        if (has(b, a->v[i]))
            return oly__error(OLY_ERR_INVALID, "%s: %s %s and %s %s must not share dim %lld", who,
                              fa, oly__show_ints(a).s, fb, oly__show_ints(b).s,
                              (long long)a->v[i]);
    return OLY_OK;
}

/* The numbers gather and scatter share, under gather's names. */
typedef struct gs_dims {
    const char *who;
    const char *collapsed_name, *map_name, *ibatch_name;
    const oly_ints *collapsed, *map, *obatch, *ibatch;
} gs_dims;

static gs_dims gather_dims(const oly_params_gather *p)
{
    return (gs_dims){"gather", "collapsed_slice_dims", "start_index_map",
                     "start_indices_batching_dims", &p->collapsed_slice_dims, &p->start_index_map,
                     &p->operand_batching_dims, &p->start_indices_batching_dims};
}

static gs_dims scatter_dims(const char *who, const oly_params_scatter *p)
{
    return (gs_dims){who, "inserted_window_dims", "scatter_dims_to_operand_dims",
                     "scatter_indices_batching_dims", &p->inserted_window_dims,
                     &p->scatter_dims_to_operand_dims, &p->operand_batching_dims,
                     &p->scatter_indices_batching_dims};
}

/* Indices: an integer array of rank >= 1 (the index vector along its last axis). */
static oly_status check_indices(const char *who, const oly_aval *ix)
{
    if ((unsigned)ix->dtype >= OLY_DTYPE_COUNT || !oly_dtype_is_int(ix->dtype) || ix->rank < 1)
        return oly__error(OLY_ERR_TYPE,
                          "%s: indices must be an integer array of rank >= 1 (the index vector "
                          "along its last axis), got %s",
                          who, oly__show_aval(ix).s);
    return OLY_OK;
}

static oly_status check_common(const gs_dims *g, const oly_aval *x, const oly_aval *ix)
{
    const char *who = g->who;
    if ((unsigned)x->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: operand has an invalid dtype", who);
    OLY_TRY(check_indices(who, ix));
    OLY_TRY(check_list(who, g->collapsed_name, g->collapsed, x->rank, true));
    OLY_TRY(check_list(who, "operand_batching_dims", g->obatch, x->rank, true));
    OLY_TRY(check_disjoint(who, g->collapsed_name, g->collapsed, "operand_batching_dims",
                           g->obatch));
    OLY_TRY(check_list(who, g->map_name, g->map, x->rank, false));
    OLY_TRY(check_disjoint(who, g->map_name, g->map, "operand_batching_dims", g->obatch));
    int64_t k = ix->dims[ix->rank - 1];
    if (g->map->n != k)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: %s %s must have one entry per element of the index vector (the "
                          "last axis of indices %s, %lld)",
                          who, g->map_name, oly__show_ints(g->map).s, oly__show_aval(ix).s,
                          (long long)k);
    OLY_TRY(check_list(who, g->ibatch_name, g->ibatch, ix->rank - 1, false));
    if (g->ibatch->n != g->obatch->n)
        return oly__error(OLY_ERR_INVALID, "%s: %s %s and operand_batching_dims %s must pair up",
                          who, g->ibatch_name, oly__show_ints(g->ibatch).s,
                          oly__show_ints(g->obatch).s);
    for (int i = 0; i < g->obatch->n; i++)
        if (x->dims[g->obatch->v[i]] != ix->dims[g->ibatch->v[i]])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: operand batching dim %lld of %s and indices batching dim %lld "
                              "of %s must have the same size",
                              who, (long long)g->obatch->v[i], oly__show_aval(x).s,
                              (long long)g->ibatch->v[i], oly__show_aval(ix).s);
    return OLY_OK;
}

/* ---------------------------------------------------------------- shape rules */

static oly_status gather_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_gather *p = ctx->params;
    if (ctx->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "gather: expected 2 operands (operand, indices), got %d",
                          ctx->n_in);
    const oly_aval *x = &ctx->in[0], *ix = &ctx->in[1];
    gs_dims g = gather_dims(p);
    OLY_TRY(check_common(&g, x, ix));
    if ((unsigned)p->mode >= OLY_GATHER_MODE_COUNT)
        return oly__error(OLY_ERR_INVALID, "gather: invalid mode %d", p->mode);
    OLY_TRY(oly__check_ints("gather", "slice_sizes", &p->slice_sizes));
    if (p->slice_sizes.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "gather: slice_sizes %s must have one entry per dimension of operand %s",
                          oly__show_ints(&p->slice_sizes).s, oly__show_aval(x).s);
    for (int d = 0; d < x->rank; d++) {
        int64_t s = p->slice_sizes.v[d];
        if (s < 0 || s > x->dims[d])
            return oly__error(OLY_ERR_SHAPE,
                              "gather: slice_sizes %s must lie in [0, dim] for operand %s (dim "
                              "%d: %lld)",
                              oly__show_ints(&p->slice_sizes).s, oly__show_aval(x).s, d,
                              (long long)s);
        if (s != 1 && (has(g.collapsed, d) || has(g.obatch, d)))
            return oly__error(OLY_ERR_SHAPE,
                              "gather: collapsed and batching dims need slice size 1; slice_sizes "
                              "%s has %lld at dim %d",
                              oly__show_ints(&p->slice_sizes).s, (long long)s, d);
    }
    int n_window = x->rank - g.collapsed->n - g.obatch->n;
    if (p->offset_dims.n != n_window)
        return oly__error(OLY_ERR_SHAPE,
                          "gather: offset_dims %s must have one entry per operand dim that is "
                          "neither collapsed nor batching (%d)",
                          oly__show_ints(&p->offset_dims).s, n_window);
    int out_rank = n_window + ix->rank - 1;
    if (out_rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "gather: the output would have rank %d, above the maximum %d",
                          out_rank, OLY_MAX_RANK);
    OLY_TRY(check_list("gather", "offset_dims", &p->offset_dims, out_rank, true));
    oly_aval o;
    memset(&o, 0, sizeof o);
    o.dtype = x->dtype;
    o.weak = x->weak;
    o.rank = out_rank;
    for (int j = 0, w = 0, bi = 0; j < out_rank; j++) {
        if (has(&p->offset_dims, j)) {
            while (has(g.collapsed, w) || has(g.obatch, w)) w++;
            o.dims[j] = p->slice_sizes.v[w++];
        } else {
            o.dims[j] = ix->dims[bi++];
        }
    }
    *out = o;
    return OLY_OK;
}

static oly_status scatter_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_scatter *p = ctx->params;
    const char *who = ctx->prim->name;
    if (ctx->n_in != 3)
        return oly__error(OLY_ERR_INVALID,
                          "%s: expected 3 operands (operand, indices, updates), got %d", who,
                          ctx->n_in);
    const oly_aval *x = &ctx->in[0], *ix = &ctx->in[1], *u = &ctx->in[2];
    gs_dims g = scatter_dims(who, p);
    OLY_TRY(check_common(&g, x, ix));
    if ((unsigned)p->mode >= OLY_GATHER_MODE_COUNT)
        return oly__error(OLY_ERR_INVALID, "%s: invalid mode %d", who, p->mode);
    if (u->dtype != x->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: updates %s must have the operand's dtype (%s)", who,
                          oly__show_aval(u).s, oly__show_aval(x).s);
    bool extremum = ctx->prim == &oly__prim_scatter_min || ctx->prim == &oly__prim_scatter_max;
    if (extremum && oly_dtype_is_complex(x->dtype))
        return oly__error(OLY_ERR_TYPE, "%s: complex operands have no order, got %s", who,
                          oly__show_aval(x).s);
    OLY_TRY(check_list(who, "update_window_dims", &p->update_window_dims, u->rank, true));
    int n_window = x->rank - g.collapsed->n - g.obatch->n;
    if (p->update_window_dims.n != n_window || u->rank != n_window + ix->rank - 1)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: updates %s must have one window dim (update_window_dims %s) per "
                          "operand dim that is neither inserted nor batching (%d), and indices "
                          "%s's batch dims",
                          who, oly__show_aval(u).s, oly__show_ints(&p->update_window_dims).s,
                          n_window, oly__show_aval(ix).s);
    for (int j = 0, w = 0, bi = 0; j < u->rank; j++) {
        if (has(&p->update_window_dims, j)) {
            while (has(g.collapsed, w) || has(g.obatch, w)) w++;
            if (u->dims[j] > x->dims[w])
                return oly__error(OLY_ERR_SHAPE,
                                  "%s: the update window (dim %d of %s) is larger than operand "
                                  "dim %d of %s",
                                  who, j, oly__show_aval(u).s, w, oly__show_aval(x).s);
            w++;
        } else if (u->dims[j] != ix->dims[bi++]) {
            return oly__error(OLY_ERR_SHAPE,
                              "%s: the scatter dims of updates %s must match the batch dims of "
                              "indices %s",
                              who, oly__show_aval(u).s, oly__show_aval(ix).s);
        }
    }
    *out = *x;
    return OLY_OK;
}

/* ---------------------------------------------------------------- helpers */

static oly_aval in_aval_of(const oly_eqn *e, int i) { return oly__atom_aval(&e->in[i]); }

/* v with by added to every entry, after first when first >= 0. */
static oly_status moved(const char *who, const oly_ints *v, int64_t first, int64_t by,
                        oly_ints *out)
{
    int extra = first >= 0;
    if (v->n + extra > OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED, "%s: batching needs rank above the maximum %d", who,
                          OLY_MAX_RANK);
    oly_ints r = {.n = v->n + extra};
    if (extra) r.v[0] = first;
    for (int i = 0; i < v->n; i++) r.v[i + extra] = v->v[i] + by;
    *out = r;
    return OLY_OK;
}

static oly_params_scatter scatter_of_gather(const oly_params_gather *p)
{
    oly_params_scatter s;
    memset(&s, 0, sizeof s);
    s.update_window_dims = p->offset_dims;
    s.inserted_window_dims = p->collapsed_slice_dims;
    s.scatter_dims_to_operand_dims = p->start_index_map;
    s.operand_batching_dims = p->operand_batching_dims;
    s.scatter_indices_batching_dims = p->start_indices_batching_dims;
    s.mode = p->mode;
    s.indices_are_sorted = p->indices_are_sorted;
    s.unique_indices = p->unique_indices;
    return s;
}

/* The gather reading back, for every update of scatter p (operand x, updates
 * u), the operand window it lands on; a dropped update reads fill. */
static oly_params_gather gather_of_scatter(const oly_params_scatter *p, const oly_aval *x,
                                           const oly_aval *u, double fill)
{
    oly_params_gather g;
    memset(&g, 0, sizeof g);
    g.offset_dims = p->update_window_dims;
    g.collapsed_slice_dims = p->inserted_window_dims;
    g.start_index_map = p->scatter_dims_to_operand_dims;
    g.operand_batching_dims = p->operand_batching_dims;
    g.start_indices_batching_dims = p->scatter_indices_batching_dims;
    g.slice_sizes.n = x->rank;
    for (int d = 0, j = 0; d < x->rank; d++)
        g.slice_sizes.v[d] = has(&p->inserted_window_dims, d) || has(&p->operand_batching_dims, d)
                                 ? 1
                                 : u->dims[p->update_window_dims.v[j++]];
    g.mode = p->mode;
    g.fill_value = fill;
    g.indices_are_sorted = p->indices_are_sorted;
    g.unique_indices = p->unique_indices;
    return g;
}

static oly_status emit_gather(oly_builder *b, oly_atom x, oly_atom ix, const oly_params_gather *p,
                              oly_atom *out)
{
    oly_atom in[2] = {x, ix};
    return oly__emit(b, &oly__prim_gather, in, 2, p, NULL, 0, out);
}

static oly_status emit_scatter(oly_builder *b, const oly_prim *row, oly_atom x, oly_atom ix,
                               oly_atom u, const oly_params_scatter *p, oly_atom *out)
{
    oly_atom in[3] = {x, ix, u};
    return oly__emit(b, row, in, 3, p, NULL, 0, out);
}

static oly_status zeros_like(oly_builder *b, oly_atom x, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    return oly__emit_full(b, &a, 0.0, out);
}

/* ---------------------------------------------------------------- batch */

static oly_status gather_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_gather *p = eqn->params;
    oly_params_gather q = *p;
    oly_atom x = in[0], ix = in[1];
    bool bx = in_bdim[0] != OLY_NOT_MAPPED, bi = in_bdim[1] != OLY_NOT_MAPPED;
    if (bx) OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    if (bi) OLY_TRY(oly__batch_move(ctx, in[1], in_bdim[1], 0, &ix));
    OLY_TRY(moved("gather", &p->offset_dims, bx && !bi ? 0 : -1, 1, &q.offset_dims));
    if (bx) {
        OLY_TRY(moved("gather", &p->collapsed_slice_dims, -1, 1, &q.collapsed_slice_dims));
        OLY_TRY(moved("gather", &p->start_index_map, -1, 1, &q.start_index_map));
        OLY_TRY(moved("gather", &p->operand_batching_dims, bi ? 0 : -1, 1, &q.operand_batching_dims));
        OLY_TRY(moved("gather", &p->slice_sizes, bi ? 1 : ctx->size, 0, &q.slice_sizes));
    }
    if (bi)
        OLY_TRY(moved("gather", &p->start_indices_batching_dims, bx ? 0 : -1, 1,
                        &q.start_indices_batching_dims));
    OLY_TRY(emit_gather(ctx->b, x, ix, &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

static oly_status scatter_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_scatter *p = eqn->params;
    const char *who = eqn->prim->name;
    oly_params_scatter q = *p;
    oly_atom x, ix = in[1], u;
    bool bi = in_bdim[1] != OLY_NOT_MAPPED;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    OLY_TRY(oly__batch_move(ctx, in[2], in_bdim[2], 0, &u));
    if (bi) OLY_TRY(oly__batch_move(ctx, in[1], in_bdim[1], 0, &ix));
    OLY_TRY(moved(who, &p->update_window_dims, bi ? -1 : 0, 1, &q.update_window_dims));
    OLY_TRY(moved(who, &p->inserted_window_dims, -1, 1, &q.inserted_window_dims));
    OLY_TRY(moved(who, &p->scatter_dims_to_operand_dims, -1, 1, &q.scatter_dims_to_operand_dims));
    OLY_TRY(moved(who, &p->operand_batching_dims, bi ? 0 : -1, 1, &q.operand_batching_dims));
    if (bi)
        OLY_TRY(moved(who, &p->scatter_indices_batching_dims, 0, 1,
                        &q.scatter_indices_batching_dims));
    OLY_TRY(emit_scatter(ctx->b, eqn->prim, x, ix, u, &q, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* ---------------------------------------------------------------- gather: jvp, transpose */

static oly_status gather_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                             const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                             oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    oly_params_gather q = *(const oly_params_gather *)eqn->params;
    q.fill_value = 0.0; /* a filled element does not move with the operand */
    return emit_gather(ctx->b, tangent[0], primal[1], &q, tangent_out);
}

static oly_status gather_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                   oly_atom *ct_in, bool *ct_in_nz)
{
    if (linear[1])
        return oly__error(OLY_ERR_INVALID, "gather: the indices cannot be linear");
    ct_in_nz[0] = false;
    if (!ct_nz[0]) return OLY_OK;
    oly_aval x = in_aval_of(eqn, 0);
    x.weak = false;
    oly_params_scatter s = scatter_of_gather(eqn->params);
    oly_atom z;
    OLY_TRY(oly__emit_full(ctx->b, &x, 0.0, &z));
    OLY_TRY(emit_scatter(ctx->b, &oly__prim_scatter_add, z, in[1], ct[0], &s, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- scatter_add */

/* Tangents (zeros where symbolic) of operand and updates, scattered by row. */
static oly_status scatter_tangents(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_prim *row,
                                   const oly_atom *primal, const oly_atom *tangent,
                                   const bool *tan_nz, oly_atom *out)
{
    oly_atom t[3] = {tangent[0], primal[1], tangent[2]};
    for (int k = 0; k < 3; k += 2)
        if (!tan_nz[k]) OLY_TRY(zeros_like(ctx->b, primal[k], &t[k]));
    return oly__emit(ctx->b, row, t, 3, eqn->params, NULL, 0, out);
}

static oly_status scatter_add_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[2];
    if (!out_nz[0]) return OLY_OK;
    return scatter_tangents(ctx, eqn, &oly__prim_scatter_add, primal, tangent, tan_nz,
                            tangent_out);
}

/* The updates' cotangent: the cotangent gathered where they landed (0 for
 * dropped ones). */
static oly_status updates_ct(oly_builder *b, const oly_eqn *eqn, oly_atom ct, oly_atom ix,
                             oly_atom *out)
{
    oly_aval x = in_aval_of(eqn, 0), u = in_aval_of(eqn, 2);
    oly_params_gather g = gather_of_scatter(eqn->params, &x, &u, 0.0);
    return emit_gather(b, ct, ix, &g, out);
}

static oly_status check_indices_not_linear(const oly_eqn *eqn, const bool *linear)
{
    if (linear[1])
        return oly__error(OLY_ERR_INVALID, "%s: the indices cannot be linear", eqn->prim->name);
    return OLY_OK;
}

static oly_status scatter_add_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear, const oly_atom *ct,
                                        const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    OLY_TRY(check_indices_not_linear(eqn, linear));
    ct_in_nz[0] = ct_in_nz[2] = false;
    if (!ct_nz[0]) return OLY_OK;
    if (linear[0]) {
        ct_in[0] = ct[0];
        ct_in_nz[0] = true;
    }
    if (linear[2]) {
        OLY_TRY(updates_ct(ctx->b, eqn, ct[0], in[1], &ct_in[2]));
        ct_in_nz[2] = true;
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- scatter (set) */

/* An int id per update (1, 2, ... over the scatter dims; equal along the
 * window), of updates' shape. */
static oly_status update_ids(oly_builder *b, const oly_params_scatter *p, const oly_aval *u,
                             oly_dtype t, oly_atom *out)
{
    oly_ints ids_shape = oly__ints(u->rank, u->dims);
    int64_t n = 1;
    for (int d = 0; d < u->rank; d++) {
        if (has(&p->update_window_dims, d)) ids_shape.v[d] = 1;
        n *= ids_shape.v[d];
    }
    oly_params_iota io = {.dtype = t, .shape = {.n = 1, .v = {n}}, .dimension = 0};
    oly_atom flat, shaped, one = oly_atom_lit((oly_scalar){.dtype = t, .v.i = 1}), plus;
    OLY_TRY(oly__emit(b, &oly__prim_iota, NULL, 0, &io, NULL, 0, &flat));
    OLY_TRY(oly__emit_reshape(b, flat, &ids_shape, &shaped));
    OLY_TRY(oly__emit_bin(b, &oly__prim_add, shaped, one, &plus));
    return oly__emit_broadcast_to(b, plus, u, out);
}

/* select(mask, x, 0). */
static oly_status keep_where(oly_builder *b, oly_atom mask, oly_atom x, oly_atom *out)
{
    oly_atom z;
    OLY_TRY(zeros_like(b, x, &z));
    return oly__emit_select(b, mask, z, x, out);
}

static oly_status scatter_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                              const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                              oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_scatter *p = eqn->params;
    oly_builder *b = ctx->b;
    out_nz[0] = tan_nz[0] || tan_nz[2];
    if (p->unique_indices) {
        OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
        if (!out_nz[0]) return OLY_OK;
        return scatter_tangents(ctx, eqn, &oly__prim_scatter, primal, tangent, tan_nz,
                                tangent_out);
    }
    oly_aval x = in_aval_of(eqn, 0), u = in_aval_of(eqn, 2);
    int64_t n_ids = 1;
    for (int d = 0; d < u.rank; d++)
        if (!has(&p->update_window_dims, d)) n_ids *= u.dims[d];
    oly_dtype id_t = n_ids < INT32_MAX ? OLY_INT32 : OLY_INT64;
    oly_aval xi = x, ui = u;
    xi.dtype = ui.dtype = id_t;
    xi.weak = false;
    oly_atom ids, zero_ids, scattered, gathered, op_mask, up_mask, zero_id = oly_atom_lit(
        (oly_scalar){.dtype = id_t});
    OLY_TRY(update_ids(b, p, &ui, id_t, &ids));
    OLY_TRY(oly__emit_full(b, &xi, 0.0, &zero_ids));
    OLY_TRY(emit_scatter(b, &oly__prim_scatter, zero_ids, primal[1], ids, p, &scattered));
    oly_params_gather g = gather_of_scatter(p, &xi, &ui, 0.0);
    OLY_TRY(emit_gather(b, scattered, primal[1], &g, &gathered));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, scattered, zero_id, &op_mask));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, ids, gathered, &up_mask));
    oly_atom mx, mu;
    OLY_TRY(keep_where(b, op_mask, primal[0], &mx));
    OLY_TRY(keep_where(b, up_mask, primal[2], &mu));
    OLY_TRY(emit_scatter(b, &oly__prim_scatter_add, mx, primal[1], mu, p, primal_out));
    if (!out_nz[0]) return OLY_OK;
    oly_atom tx, tu;
    if (tan_nz[0]) OLY_TRY(keep_where(b, op_mask, tangent[0], &tx));
    else OLY_TRY(zeros_like(b, primal[0], &tx));
    if (tan_nz[2]) OLY_TRY(keep_where(b, up_mask, tangent[2], &tu));
    else OLY_TRY(zeros_like(b, primal[2], &tu));
    return emit_scatter(b, &oly__prim_scatter_add, tx, primal[1], tu, p, tangent_out);
}

/* Linear only with unique indices (each operand element written at most once). */
static oly_status scatter_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                    oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_scatter *p = eqn->params;
    OLY_TRY(check_indices_not_linear(eqn, linear));
    if (!p->unique_indices)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "scatter: transposing needs unique_indices=True (with repeated "
                          "indices, which update survives is not linear)");
    ct_in_nz[0] = ct_in_nz[2] = false;
    if (!ct_nz[0]) return OLY_OK;
    if (linear[0]) {
        oly_aval u = in_aval_of(eqn, 2);
        u.weak = false;
        oly_atom z;
        OLY_TRY(oly__emit_full(ctx->b, &u, 0.0, &z));
        OLY_TRY(emit_scatter(ctx->b, &oly__prim_scatter, ct[0], in[1], z, p, &ct_in[0]));
        ct_in_nz[0] = true;
    }
    if (linear[2]) {
        OLY_TRY(updates_ct(ctx->b, eqn, ct[0], in[1], &ct_in[2]));
        ct_in_nz[2] = true;
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- scatter_mul */

static oly_status scatter_mul_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_scatter *p = eqn->params;
    oly_builder *b = ctx->b;
    if (tan_nz[2] && !p->unique_indices)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "scatter_mul: differentiating with respect to the updates needs "
                          "unique_indices=True");
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[2];
    oly_atom t = {0};
    bool have = false;
    if (tan_nz[0]) {
        OLY_TRY(emit_scatter(b, &oly__prim_scatter_mul, tangent[0], primal[1], primal[2], p, &t));
        have = true;
    }
    if (tan_nz[2]) { /* x * scatter_add(0, i, tu): each element has at most one update */
        oly_atom z, s, m;
        OLY_TRY(zeros_like(b, primal[0], &z));
        OLY_TRY(emit_scatter(b, &oly__prim_scatter_add, z, primal[1], tangent[2], p, &s));
        OLY_TRY(oly__emit_bin(b, &oly__prim_mul, primal[0], s, &m));
        if (have) OLY_TRY(oly__emit_bin(b, &oly__prim_add, t, m, &t));
        else t = m;
    }
    if (out_nz[0]) *tangent_out = t;
    return OLY_OK;
}

static oly_status scatter_mul_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear, const oly_atom *ct,
                                        const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    OLY_TRY(check_indices_not_linear(eqn, linear));
    if (linear[2])
        return oly__error(OLY_ERR_INVALID, "scatter_mul: the updates cannot be linear");
    ct_in_nz[0] = false;
    if (!ct_nz[0] || !linear[0]) return OLY_OK;
    OLY_TRY(emit_scatter(ctx->b, &oly__prim_scatter_mul, ct[0], in[1], in[2], eqn->params,
                         &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- scatter_min / max */

/* d out = (tx where x == out, plus the sum of tu over the updates equal to
 * out) / the number of those inputs. */
static oly_status scatter_extremum_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *primal, const oly_atom *tangent,
                                       const bool *tan_nz, oly_atom *primal_out,
                                       oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_scatter *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[2];
    if (!out_nz[0]) return OLY_OK;
    oly_aval x = in_aval_of(eqn, 0), u = in_aval_of(eqn, 2);
    oly_params_gather g = gather_of_scatter(p, &x, &u, NAN); /* dropped: matches nothing */
    oly_atom back, x_mask, u_mask, x_count, u_count, count, sum, t;
    OLY_TRY(emit_gather(b, primal_out[0], primal[1], &g, &back));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, primal[0], primal_out[0], &x_mask));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, primal[2], back, &u_mask));
    OLY_TRY(oly__emit_convert(b, x_mask, x.dtype, &x_count));
    OLY_TRY(oly__emit_convert(b, u_mask, x.dtype, &u_count));
    OLY_TRY(emit_scatter(b, &oly__prim_scatter_add, x_count, primal[1], u_count, p, &count));
    oly_atom tx, tu;
    if (tan_nz[0]) OLY_TRY(keep_where(b, x_mask, tangent[0], &tx));
    else OLY_TRY(zeros_like(b, primal[0], &tx));
    if (tan_nz[2]) OLY_TRY(keep_where(b, u_mask, tangent[2], &tu));
    else OLY_TRY(zeros_like(b, primal[2], &tu));
    OLY_TRY(emit_scatter(b, &oly__prim_scatter_add, tx, primal[1], tu, p, &sum));
    OLY_TRY(oly__emit_bin(b, &oly__prim_div, sum, count, &t));
    *tangent_out = t;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

static const char *const mode_names[] = {"clip", "fill_or_drop", "promise_in_bounds", NULL};

static const oly_param_field gather_fields[] = {
    OLY_FIELD(oly_params_gather, offset_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_gather, collapsed_slice_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_gather, start_index_map, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_gather, operand_batching_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_gather, start_indices_batching_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_gather, slice_sizes, OLY_FIELD_INTS),
    {.name = "mode", .kind = OLY_FIELD_ENUM, .offset = offsetof(oly_params_gather, mode),
     .enum_names = mode_names},
    OLY_FIELD(oly_params_gather, fill_value, OLY_FIELD_FLOAT),
    OLY_FIELD(oly_params_gather, indices_are_sorted, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_gather, unique_indices, OLY_FIELD_BOOL),
};

static const oly_param_field scatter_fields[] = {
    OLY_FIELD(oly_params_scatter, update_window_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_scatter, inserted_window_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_scatter, scatter_dims_to_operand_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_scatter, operand_batching_dims, OLY_FIELD_INTS),
    OLY_FIELD(oly_params_scatter, scatter_indices_batching_dims, OLY_FIELD_INTS),
    {.name = "mode", .kind = OLY_FIELD_ENUM, .offset = offsetof(oly_params_scatter, mode),
     .enum_names = mode_names},
    OLY_FIELD(oly_params_scatter, indices_are_sorted, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_scatter, unique_indices, OLY_FIELD_BOOL),
};

const oly_prim oly__prim_gather = {
    .name = "gather", .n_in = 2, .n_out = 1,
    .params_size = sizeof(oly_params_gather),
    .fields = gather_fields, .n_fields = OLY_ARRAY_LEN(gather_fields),
    .shape = gather_shape,
    .batch = gather_batch, .jvp = gather_jvp, .transpose = gather_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

#define SCATTER_ROW(NAME, JVP, TRANSPOSE, NO_RULE)                                        \
    const oly_prim oly__prim_##NAME = {                                                   \
        .name = #NAME, .n_in = 3, .n_out = 1,                                             \
        .params_size = sizeof(oly_params_scatter),                                        \
        .fields = scatter_fields, .n_fields = OLY_ARRAY_LEN(scatter_fields),              \
        .shape = scatter_shape,                                                           \
        .batch = scatter_batch, .jvp = JVP, .transpose = TRANSPOSE,                       \
        .no_rule = OLY_RULE_PARTIAL_EVAL | (NO_RULE),                                     \
    };

SCATTER_ROW(scatter, scatter_jvp, scatter_transpose, 0)
SCATTER_ROW(scatter_add, scatter_add_jvp, scatter_add_transpose, 0)
SCATTER_ROW(scatter_mul, scatter_mul_jvp, scatter_mul_transpose, 0)
/* min / max are not linear in anything: no transpose. */
SCATTER_ROW(scatter_min, scatter_extremum_jvp, NULL, OLY_RULE_TRANSPOSE)
SCATTER_ROW(scatter_max, scatter_extremum_jvp, NULL, OLY_RULE_TRANSPOSE)

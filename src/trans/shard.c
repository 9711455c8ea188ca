/* shard.c — an elementwise program re-typed for one shard of its arrays.
 *
 * jit runs a program whose every value is either of the arguments' one shape
 * or a scalar once per shard, each run on its own device, when the arguments
 * are sharded alike (docs/design.md, "Sharding"). Such a program computes
 * element i of each output from element i of each full input, so the same
 * equations applied to the shard's blocks give the shard's block of every
 * output: the rebuilt program differs only in its shapes. Anything else
 * (reductions, structural ops, gathers, callbacks, control flow) would need
 * a partitioner and is refused here, by answering NULL. */
#include "internal.h"

#include <string.h>

typedef struct retype {
    int rank;
    const int64_t *gdims, *sdims;
} retype;

static bool is_global(const retype *rt, const oly_aval *a)
{
    return a->rank == rt->rank && memcmp(a->dims, rt->gdims, sizeof(int64_t) * (size_t)rt->rank) == 0;
}

/* Whether a value of this aval may appear: the global shape or a scalar. */
static bool fits(const retype *rt, const oly_aval *a) { return a->rank == 0 || is_global(rt, a); }

static oly_aval shard_aval(const retype *rt, const oly_aval *a)
{
    oly_aval r = *a;
    if (a->rank != 0) memcpy(r.dims, rt->sdims, sizeof(int64_t) * (size_t)rt->rank);
    return r;
}

static bool in_rows(const oly_prim *p, int first, int last)
{
    for (int i = first; i <= last; i++)
        if (oly__prim_at(i) == p) return true;
    return false;
}

/* The prims.def ranges neg .. select_n and erf .. zeta (as fusion groups them). */
static bool is_elementwise_row(const oly_prim *p)
{
    return p->dtypes != 0 && (in_rows(p, OLY_PRIM_ID_neg, OLY_PRIM_ID_select_n) ||
                              in_rows(p, OLY_PRIM_ID_erf, OLY_PRIM_ID_zeta));
}

static oly_status build(const retype *rt, const oly_program *p, const oly_aval *in_avals,
                        oly_program **out);

/* Appends e (inputs already mapped to in) re-typed; *ok false when e is not
 * one the shard rule admits. */
static oly_status append_eqn(const retype *rt, oly_builder *b, const oly_eqn *e,
                             const oly_atom *in, oly_var **outs, int max_out, bool *ok)
{
    const oly_prim *row = e->prim;
    for (int i = 0; i < e->n_out; i++)
        if (!fits(rt, &e->out[i]->aval)) return *ok = false, OLY_OK;
    if (e->effects) return *ok = false, OLY_OK;
    if (is_elementwise_row(row) || row == &oly__prim_copy) {
        if (e->n_sub) return *ok = false, OLY_OK;
        return oly_builder_append(b, e->prim, in, e->n_in, e->params, NULL, 0, outs, max_out,
                                  NULL);
    }
    if (row == &oly__prim_broadcast_in_dim) {
        const oly_aval *from = e->in[0].kind == OLY_ATOM_VAR ? &e->in[0].var->aval : NULL;
        if (from && !fits(rt, from)) return *ok = false, OLY_OK;
        oly_params_broadcast_in_dim bp = *(const oly_params_broadcast_in_dim *)e->params;
        if (e->out[0]->aval.rank != 0) {
            bp.shape.n = rt->rank;
            memcpy(bp.shape.v, rt->sdims, sizeof(int64_t) * (size_t)rt->rank);
        }
        return oly_builder_append(b, e->prim, in, e->n_in, &bp, NULL, 0, outs, max_out, NULL);
    }
    if (row == &oly__prim_pjit && e->n_sub == 1) {
        const oly_program *body = e->sub[0];
        if (body->n_in != e->n_in) return *ok = false, OLY_OK;
        oly_aval small[16] = {{0}};
        oly_aval *avals = e->n_in <= 16 ? small : oly__calloc((size_t)e->n_in, sizeof *avals);
        if (!avals) return OLY_ERR_NOMEM;
        for (int i = 0; i < e->n_in; i++) avals[i] = shard_aval(rt, &body->in[i]->aval);
        oly_program *sub = NULL;
        oly_status s = build(rt, body, avals, &sub);
        if (avals != small) free(avals);
        if (s != OLY_OK) return s;
        if (!sub) return *ok = false, OLY_OK;
        s = oly_builder_append(b, e->prim, in, e->n_in, e->params, &sub, 1, outs, max_out, NULL);
        oly_program_release(sub);
        return s;
    }
    *ok = false;
    return OLY_OK;
}

/* p re-typed with inputs of in_avals (shard shapes already), or *out NULL. */
static oly_status build(const retype *rt, const oly_program *p, const oly_aval *in_avals,
                        oly_program **out)
{
    *out = NULL;
    if (p->effects) return OLY_OK;
    for (int i = 0; i < p->n_const; i++)
        if (oly_array_aval(p->constval[i])->rank != 0) return OLY_OK;
    for (int i = 0; i < p->n_in; i++)
        if (!fits(rt, &p->in[i]->aval)) return OLY_OK;
    int max_in = p->n_out > 1 ? p->n_out : 1, max_out = 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_in) max_in = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_out) max_out = p->eqn[k].n_out;
    }
    oly_builder *b = NULL;
    oly_var **map = oly__calloc((size_t)p->n_vars + 1, sizeof *map);
    oly_atom *in = oly__calloc((size_t)max_in, sizeof *in);
    oly_var **outs = oly__calloc((size_t)max_out, sizeof *outs);
    oly_status s = map && in && outs ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    bool ok = true;
    for (int i = 0; i < p->n_const && s == OLY_OK; i++)
        s = oly_builder_add_const(b, p->constval[i], &map[p->constvar[i]->id]);
    for (int i = 0; i < p->n_in && s == OLY_OK; i++)
        s = oly_builder_add_input(b, &in_avals[i], &map[p->in[i]->id]);
    for (int k = 0; k < p->n_eqn && s == OLY_OK && ok; k++) {
        const oly_eqn *e = &p->eqn[k];
        for (int i = 0; i < e->n_in; i++) {
            in[i] = e->in[i];
            if (in[i].kind == OLY_ATOM_VAR) in[i].var = map[e->in[i].var->id];
        }
        s = append_eqn(rt, b, e, in, outs, max_out, &ok);
        for (int i = 0; i < e->n_out && s == OLY_OK && ok; i++) map[e->out[i]->id] = outs[i];
    }
    for (int i = 0; i < p->n_out && s == OLY_OK && ok; i++) {
        in[i] = p->out[i];
        if (in[i].kind == OLY_ATOM_VAR) in[i].var = map[p->out[i].var->id];
    }
    if (s == OLY_OK && ok) s = oly_builder_finish(b, in, p->n_out, out);
    oly_builder_free(b);
    free(map);
    free(in);
    free(outs);
    return s;
}

oly_status oly_program_for_shard(oly_program *p, int rank, const int64_t *global_dims,
                                 const int64_t *shard_dims, oly_program **out)
{
    if (!p || !out || (rank > 0 && (!global_dims || !shard_dims)))
        return oly__error(OLY_ERR_INVALID, "oly_program_for_shard: NULL argument");
    if (rank < 1 || rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID,
                          "oly_program_for_shard: rank must be in [1, %d], got %d", OLY_MAX_RANK,
                          rank);
    for (int i = 0; i < rank; i++)
        if (shard_dims[i] < 0 || shard_dims[i] > global_dims[i] ||
            (shard_dims[i] == 0 ? global_dims[i] != 0 : global_dims[i] % shard_dims[i] != 0))
            return oly__error(OLY_ERR_INVALID,
                              "oly_program_for_shard: shard dimension %d is %lld, which does not "
                              "divide the global dimension %lld",
                              i, (long long)shard_dims[i], (long long)global_dims[i]);
    retype rt = {rank, global_dims, shard_dims};
    oly_aval small[16] = {{0}};
    oly_aval *avals = p->n_in <= 16 ? small : oly__calloc((size_t)p->n_in, sizeof *avals);
    if (!avals) return OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in; i++) avals[i] = shard_aval(&rt, &p->in[i]->aval);
    oly_program *r = NULL;
    oly_status s = build(&rt, p, avals, &r);
    if (avals != small) free(avals);
    if (s == OLY_OK) *out = r;
    return s;
}

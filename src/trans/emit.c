/* emit.c — helpers that append equations to a builder on behalf of transform
 * drivers and rules (trans.h). Each returns atoms of the builder; errors come
 * from the primitives' shape rules, so a rule that emits something ill-typed
 * hears about it at once, with the primitive's own message. */
#include "trans/trans.h"

oly_ints oly__ints(int n, const int64_t *v)
{
    oly_ints r;
    memset(&r, 0, sizeof r);
    if (n < 0) n = 0;
    if (n > OLY_MAX_RANK) n = OLY_MAX_RANK;
    r.n = n;
    for (int i = 0; i < n; i++) r.v[i] = v[i];
    return r;
}

oly_ints oly__ints_range(int n)
{
    oly_ints r;
    memset(&r, 0, sizeof r);
    if (n < 0) n = 0;
    if (n > OLY_MAX_RANK) n = OLY_MAX_RANK;
    r.n = n;
    for (int i = 0; i < n; i++) r.v[i] = i;
    return r;
}

oly_status oly__emit(oly_builder *b, const oly_prim *p, const oly_atom *in, int n_in,
                     const void *params, oly_program *const *subs, int n_sub, oly_atom *out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "emit: primitive is NULL");
    int nout = oly_prim_num_outputs(p, params, n_in);
    if (nout < 0)
        return oly__error(OLY_ERR_INVALID, "%s: cannot have %d outputs (with %d inputs)", p->name,
                          nout, n_in);
    oly_var *small[8];
    oly_var **vars = small;
    if (nout > OLY_ARRAY_LEN(small)) {
        vars = oly__calloc((size_t)nout, sizeof *vars);
        if (!vars) return OLY_ERR_NOMEM;
    }
    int n = 0;
    oly_status s = oly_builder_append(b, p, in, n_in, params, subs, n_sub, vars, nout, &n);
    if (s == OLY_OK && n != nout)
        s = oly__error(OLY_ERR_INTERNAL, "%s: appended %d outputs, expected %d", p->name, n, nout);
    if (s == OLY_OK)
        for (int i = 0; i < nout; i++) out[i] = oly_atom_var(vars[i]);
    if (vars != small) free(vars);
    return s;
}

oly_status oly__emit_eqn(oly_builder *b, const oly_eqn *eqn, const oly_atom *in, oly_atom *out)
{
    return oly__emit(b, eqn->prim, in, eqn->n_in, eqn->params, eqn->sub, eqn->n_sub, out);
}

oly_status oly__emit_un(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom *out)
{
    return oly__emit(b, p, &x, 1, NULL, NULL, 0, out);
}

oly_status oly__emit_bin(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y, oly_atom *out)
{
    oly_atom in[2] = {x, y};
    return oly__emit(b, p, in, 2, NULL, NULL, 0, out);
}

oly_status oly__emit_convert(oly_builder *b, oly_atom x, oly_dtype t, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    if (a.dtype == t) {
        *out = x;
        return OLY_OK;
    }
    if (x.kind == OLY_ATOM_LIT) { /* fold: literals stay literals */
        unsigned char buf[16];
        oly_scalar_store(&x.lit, t, buf);
        oly_scalar s = oly_scalar_load(t, buf);
        s.weak = false;
        *out = oly_atom_lit(s);
        return OLY_OK;
    }
    oly_params_convert p = {.new_dtype = t, .weak = false};
    return oly__emit(b, &oly__prim_convert_element_type, &x, 1, &p, NULL, 0, out);
}

/* A rank-0 value of dtype t holding value (real part for complex). */
static oly_scalar scalar_of(oly_dtype t, bool weak, double value)
{
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    s.weak = weak;
    if (oly_dtype_is_bool(t)) {
        s.v.i = value != 0;
    } else if (oly_dtype_is_unsigned_int(t)) {
        s.v.u = value <= 0 ? 0 : (uint64_t)value;
    } else if (oly_dtype_is_int(t)) {
        s.v.i = (int64_t)value;
    } else if (oly_dtype_is_complex(t)) {
        s.v.c[0] = value;
        s.v.c[1] = 0;
    } else {
        s.v.f = value;
    }
    return s;
}

oly_status oly__emit_full(oly_builder *b, const oly_aval *aval, double value, oly_atom *out)
{
    oly_atom lit = oly_atom_lit(scalar_of(aval->dtype, aval->weak, value));
    if (aval->rank == 0) {
        *out = lit;
        return OLY_OK;
    }
    oly_ints shape = oly__ints(aval->rank, aval->dims), none = oly__ints(0, NULL);
    return oly__emit_broadcast_in_dim(b, lit, &shape, &none, out);
}

oly_status oly__emit_broadcast_in_dim(oly_builder *b, oly_atom x, const oly_ints *shape,
                                      const oly_ints *broadcast_dimensions, oly_atom *out)
{
    oly_params_broadcast_in_dim p;
    memset(&p, 0, sizeof p);
    p.shape = *shape;
    p.broadcast_dimensions = *broadcast_dimensions;
    return oly__emit(b, &oly__prim_broadcast_in_dim, &x, 1, &p, NULL, 0, out);
}

oly_status oly__emit_broadcast_to(oly_builder *b, oly_atom x, const oly_aval *shape, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    if (a.rank > shape->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "broadcast_to: rank %d operand cannot broadcast to rank %d", a.rank,
                          shape->rank);
    bool same = a.rank == shape->rank;
    int lead = shape->rank - a.rank;
    oly_ints dims = oly__ints(0, NULL);
    dims.n = a.rank;
    for (int i = 0; i < a.rank; i++) {
        dims.v[i] = lead + i;
        int64_t want = shape->dims[lead + i];
        if (a.dims[i] != want && a.dims[i] != 1)
            return oly__error(OLY_ERR_SHAPE,
                              "broadcast_to: operand dimension %d has size %lld, expected 1 or "
                              "%lld",
                              i, (long long)a.dims[i], (long long)want);
        if (a.dims[i] != want) same = false;
    }
    if (same) {
        *out = x;
        return OLY_OK;
    }
    oly_ints sh = oly__ints(shape->rank, shape->dims);
    return oly__emit_broadcast_in_dim(b, x, &sh, &dims, out);
}

oly_status oly__emit_reshape(oly_builder *b, oly_atom x, const oly_ints *new_sizes, oly_atom *out)
{
    oly_params_reshape p;
    memset(&p, 0, sizeof p);
    p.new_sizes = *new_sizes;
    return oly__emit(b, &oly__prim_reshape, &x, 1, &p, NULL, 0, out);
}

oly_status oly__emit_transpose(oly_builder *b, oly_atom x, const oly_ints *perm, oly_atom *out)
{
    oly_params_transpose p;
    memset(&p, 0, sizeof p);
    p.permutation = *perm;
    return oly__emit(b, &oly__prim_transpose, &x, 1, &p, NULL, 0, out);
}

oly_status oly__emit_moveaxis(oly_builder *b, oly_atom x, int from, int to, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    int r = a.rank;
    if (from < 0 || from >= r || to < 0 || to >= r)
        return oly__error(OLY_ERR_INVALID, "moveaxis: axes %d -> %d outside [0, %d)", from, to, r);
    if (from == to) {
        *out = x;
        return OLY_OK;
    }
    oly_ints perm = oly__ints(0, NULL);
    perm.n = r;
    int k = 0;
    for (int i = 0; i < r; i++) {
        if (i == from) continue;
        if (k == to) perm.v[k++] = from;
        perm.v[k++] = i;
    }
    if (k == to) perm.v[k++] = from;
    return oly__emit_transpose(b, x, &perm, out);
}

oly_status oly__emit_reduce_sum(oly_builder *b, oly_atom x, const oly_ints *axes, oly_atom *out)
{
    if (axes->n == 0) {
        *out = x;
        return OLY_OK;
    }
    oly_params_reduce p;
    memset(&p, 0, sizeof p);
    p.axes = *axes;
    return oly__emit(b, &oly__prim_reduce_sum, &x, 1, &p, NULL, 0, out);
}

oly_status oly__emit_select(oly_builder *b, oly_atom pred, oly_atom on_false, oly_atom on_true,
                            oly_atom *out)
{
    oly_atom in[3] = {pred, on_false, on_true};
    return oly__emit(b, &oly__prim_select_n, in, 3, NULL, NULL, 0, out);
}

oly_status oly__emit_dot_general(oly_builder *b, oly_atom x, oly_atom y,
                                 const oly_params_dot_general *dims, oly_atom *out)
{
    oly_atom in[2] = {x, y};
    return oly__emit(b, &oly__prim_dot_general, in, 2, dims, NULL, 0, out);
}

oly_status oly__emit_inline(oly_builder *b, oly_program *p, const oly_atom *in, oly_atom *out)
{
    oly_atom *env = oly__calloc((size_t)p->n_vars + 1, sizeof *env);
    if (!env) return OLY_ERR_NOMEM;
    int max_in = 1;
    for (int k = 0; k < p->n_eqn; k++)
        if (p->eqn[k].n_in > max_in) max_in = p->eqn[k].n_in;
    int max_out = 1;
    for (int k = 0; k < p->n_eqn; k++)
        if (p->eqn[k].n_out > max_out) max_out = p->eqn[k].n_out;
    oly_atom *ein = oly__calloc((size_t)max_in, sizeof *ein);
    oly_atom *eout = oly__calloc((size_t)max_out, sizeof *eout);
    oly_status s = ein && eout ? OLY_OK : OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) env[p->in[i]->id] = in[i];
    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(b, p->constval[i], &v);
        if (s == OLY_OK) env[p->constvar[i]->id] = oly_atom_var(v);
    }
    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        for (int i = 0; i < e->n_in; i++)
            ein[i] = e->in[i].kind == OLY_ATOM_VAR ? env[e->in[i].var->id] : e->in[i];
        s = oly__emit_eqn(b, e, ein, eout);
        for (int i = 0; i < e->n_out && s == OLY_OK; i++) env[e->out[i]->id] = eout[i];
    }
    for (int j = 0; j < p->n_out && s == OLY_OK; j++)
        out[j] = p->out[j].kind == OLY_ATOM_VAR ? env[p->out[j].var->id] : p->out[j];
    free(env);
    free(ein);
    free(eout);
    return s;
}

oly_status oly__emit_add_any(oly_builder *b, oly_atom x, oly_atom y, oly_atom *out)
{
    oly_aval ax = oly__atom_aval(&x), ay = oly__atom_aval(&y);
    if (!oly_aval_equal(&ax, &ay)) {
        char s1[256], s2[256];
        oly_aval_format(s1, sizeof s1, &ax);
        oly_aval_format(s2, sizeof s2, &ay);
        return oly__error(OLY_ERR_INTERNAL, "add_any: cotangents of different avals %s and %s", s1,
                          s2);
    }
    if (oly_dtype_is_bool(ax.dtype)) { /* no arithmetic on bool: or is its sum here */
        return oly__emit_bin(b, &oly__prim_or, x, y, out);
    }
    return oly__emit_bin(b, &oly__prim_add, x, y, out);
}

/* ---------------------------------------------------------------- batching */

oly_status oly__batch_move(oly_batch_ctx *ctx, oly_atom x, int bdim, int to, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    if (bdim != OLY_NOT_MAPPED) return oly__emit_moveaxis(ctx->b, x, bdim, to, out);
    if (to < 0 || to > a.rank || a.rank >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "batch: cannot insert a batch axis at %d of rank %d",
                          to, a.rank);
    oly_ints shape = oly__ints(0, NULL), dims = oly__ints(0, NULL);
    shape.n = a.rank + 1;
    dims.n = a.rank;
    for (int i = 0, k = 0; i < a.rank + 1; i++) {
        if (i == to) {
            shape.v[i] = ctx->size;
            continue;
        }
        shape.v[i] = a.dims[k];
        dims.v[k++] = i;
    }
    return oly__emit_broadcast_in_dim(ctx->b, x, &shape, &dims, out);
}

oly_status oly_builder_inline(oly_builder *b, oly_program *p, const oly_atom *in, oly_atom *out)
{
    if (!b || !p) return oly__error(OLY_ERR_INVALID, "oly_builder_inline: %s is NULL",
                                    b ? "program" : "builder");
    if ((p->n_in > 0 && !in) || (p->n_out > 0 && !out))
        return oly__error(OLY_ERR_INVALID, "oly_builder_inline: %s is NULL", !out ? "out" : "in");
    return oly__emit_inline(b, p, in, out);
}

oly_status oly__emit_1(oly_builder *b, const oly_prim *p, oly_atom x, const void *params,
                       oly_atom *out)
{
    return oly__emit(b, p, &x, 1, params, NULL, 0, out);
}

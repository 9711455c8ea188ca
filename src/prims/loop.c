/* loop.c — while and scan: params, shape rules, and their batch, jvp,
 * partial-eval and transpose rules. The rules transform the bodies as whole
 * programs (control.h) and find which carries are batched, have nonzero
 * tangents or are unknown by a fixpoint over the body; their kernels are in
 * src/cpu/loop.c. */
#include "prims/control.h"

static const oly_param_field while_fields[] = {
    {.name = "body_nconsts", .kind = OLY_FIELD_INT,
     .offset = offsetof(oly_params_while, body_nconsts)},
    {.name = "cond_nconsts", .kind = OLY_FIELD_INT,
     .offset = offsetof(oly_params_while, cond_nconsts)},
};

static const oly_param_field scan_fields[] = {
    {.name = "length", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_scan, length)},
    {.name = "num_carry", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_scan, num_carry)},
    {.name = "num_consts", .kind = OLY_FIELD_INT,
     .offset = offsetof(oly_params_scan, num_consts)},
    {.name = "reverse", .kind = OLY_FIELD_BOOL, .offset = offsetof(oly_params_scan, reverse)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_scan, n_out),
     .hidden = true},
};

static int while_num_outputs(const void *params, int n_in)
{
    const oly_params_while *pw = params;
    if (!pw || pw->cond_nconsts < 0 || pw->body_nconsts < 0 || pw->cond_nconsts > n_in ||
        pw->body_nconsts > n_in)
        return -1;
    int64_t n = (int64_t)n_in - pw->cond_nconsts - pw->body_nconsts;
    return n < 0 ? -1 : (int)n;
}

static int scan_num_outputs(const void *params, int n_in)
{
    const oly_params_scan *ps = params;
    if (!ps || ps->n_out < 0 || ps->n_out > MAX_OUT) return -1;
    return (int)ps->n_out;
}

static oly_status while_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_while *pw = ctx->params;
    if (ctx->n_sub != 2 || !ctx->sub || !ctx->sub[0] || !ctx->sub[1])
        return oly__error(OLY_ERR_INVALID,
                          "while: expected 2 nested programs (cond, body), got %d", ctx->n_sub);
    if (pw->cond_nconsts < 0 || pw->body_nconsts < 0 || pw->cond_nconsts > ctx->n_in ||
        pw->body_nconsts > ctx->n_in || pw->cond_nconsts + pw->body_nconsts > ctx->n_in)
        return oly__error(OLY_ERR_INVALID,
                          "while: cond_nconsts %lld + body_nconsts %lld exceed the %d operands",
                          (long long)pw->cond_nconsts, (long long)pw->body_nconsts, ctx->n_in);
    int cn = (int)pw->cond_nconsts, bn = (int)pw->body_nconsts, nc = ctx->n_in - cn - bn;
    const oly_aval *carry = ctx->in + cn + bn;
    const oly_program *c = ctx->sub[0], *body = ctx->sub[1];
    if (c->n_in != cn + nc)
        return oly__error(OLY_ERR_INVALID, "while: cond program takes %d inputs, expected %d",
                          c->n_in, cn + nc);
    if (c->n_out != 1)
        return oly__error(OLY_ERR_INVALID, "while: cond program has %d outputs, expected 1",
                          c->n_out);
    oly_aval pa = oly__ctl_out_aval(c, 0);
    if (pa.rank != 0 || pa.dtype != OLY_BOOL) {
        char g[256];
        oly_aval_format(g, sizeof g, &pa);
        return oly__error(OLY_ERR_TYPE, "while: cond program must return bool[], got %s", g);
    }
    for (int i = 0; i < cn; i++)
        OLY_TRY(oly__ctl_same_aval("while", "cond const", i, &c->in[i]->aval, &ctx->in[i]));
    for (int k = 0; k < nc; k++)
        OLY_TRY(oly__ctl_same_aval("while", "cond program carry input", k, &c->in[cn + k]->aval,
                          &carry[k]));
    if (body->n_in != bn + nc)
        return oly__error(OLY_ERR_INVALID, "while: body program takes %d inputs, expected %d",
                          body->n_in, bn + nc);
    if (body->n_out != nc)
        return oly__error(OLY_ERR_INVALID, "while: body program has %d outputs, expected %d",
                          body->n_out, nc);
    for (int i = 0; i < bn; i++)
        OLY_TRY(oly__ctl_same_aval("while", "body const", i, &body->in[i]->aval, &ctx->in[cn + i]));
    for (int k = 0; k < nc; k++) {
        OLY_TRY(oly__ctl_same_aval("while", "body carry input", k, &body->in[bn + k]->aval, &carry[k]));
        oly_aval o = oly__ctl_out_aval(body, k);
        OLY_TRY(oly__ctl_same_aval("while", "body carry output", k, &carry[k], &o));
    }
    for (int k = 0; k < nc; k++) {
        out[k] = carry[k];
        out[k].weak = false;
    }
    return OLY_OK;
}

static oly_status scan_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_scan *ps = ctx->params;
    if (ctx->n_sub != 1 || !ctx->sub || !ctx->sub[0])
        return oly__error(OLY_ERR_INVALID, "scan: expected 1 nested program (body), got %d",
                          ctx->n_sub);
    if (ps->length < 0)
        return oly__error(OLY_ERR_INVALID, "scan: length must be >= 0, got %lld",
                          (long long)ps->length);
    if (ps->num_consts < 0 || ps->num_carry < 0 || ps->num_consts > ctx->n_in ||
        ps->num_carry > ctx->n_in || ps->num_consts + ps->num_carry > ctx->n_in)
        return oly__error(OLY_ERR_INVALID,
                          "scan: num_consts %lld + num_carry %lld exceed the %d operands",
                          (long long)ps->num_consts, (long long)ps->num_carry, ctx->n_in);
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, nx = ctx->n_in - nk - nc;
    const oly_program *body = ctx->sub[0];
    if (body->n_in != ctx->n_in)
        return oly__error(OLY_ERR_INVALID, "scan: body takes %d inputs, expected %d",
                          body->n_in, ctx->n_in);
    if (body->n_out != ctx->n_out || ctx->n_out < nc)
        return oly__error(OLY_ERR_INVALID,
                          "scan: body has %d outputs, params say %d (with %d carries)",
                          body->n_out, ctx->n_out, nc);
    for (int i = 0; i < nk + nc; i++)
        OLY_TRY(oly__ctl_same_aval("scan", i < nk ? "const" : "carry", i < nk ? i : i - nk,
                          &body->in[i]->aval, &ctx->in[i]));
    for (int j = 0; j < nx; j++) {
        const oly_aval *x = &ctx->in[nk + nc + j];
        if (x->rank < 1 || x->dims[0] != ps->length) {
            char g[256];
            oly_aval_format(g, sizeof g, x);
            return oly__error(OLY_ERR_SHAPE, "scan: xs %d is %s, expected a leading axis of %lld",
                              j, g, (long long)ps->length);
        }
        oly_aval sl = *x;
        sl.rank--;
        memmove(sl.dims, x->dims + 1, (size_t)sl.rank * sizeof sl.dims[0]);
        OLY_TRY(oly__ctl_same_aval("scan", "body x slice", j, &body->in[nk + nc + j]->aval, &sl));
    }
    for (int k = 0; k < nc; k++) {
        oly_aval o = oly__ctl_out_aval(body, k);
        OLY_TRY(oly__ctl_same_aval("scan", "body carry output", k, &ctx->in[nk + k], &o));
        out[k] = ctx->in[nk + k];
        out[k].weak = false;
    }
    for (int k = nc; k < ctx->n_out; k++) {
        oly_aval y = oly__ctl_out_aval(body, k);
        if (y.rank >= OLY_MAX_RANK)
            return oly__error(OLY_ERR_SHAPE, "scan: y %d has rank %d; stacking exceeds %d",
                              k - nc, y.rank, OLY_MAX_RANK);
        out[k] = y;
        out[k].weak = false;
        out[k].rank = y.rank + 1;
        out[k].dims[0] = ps->length;
        memcpy(out[k].dims + 1, y.dims, (size_t)y.rank * sizeof y.dims[0]);
    }
    return OLY_OK;
}

/* Grows carry_b to a fixpoint: carry k is batched when its input is or when
 * the body's carry output k depends on anything batched. The body's inputs
 * are (pre[0..npre), carry[0..nc), post[0..npost)); its first nc outputs are
 * the carry. all_out (room for body->n_out) receives the final dependency. */
static oly_status carry_fixpoint(const oly_program *body, const bool *pre, int npre,
                                 bool *carry_b, int nc, const bool *post, bool *all_out)
{
    bool *in = oly__calloc((size_t)body->n_in + 1, sizeof *in);
    if (!in) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (bool changed = true; changed && s == OLY_OK;) {
        changed = false;
        int n = 0;
        for (int i = 0; i < npre; i++) in[n++] = pre[i];
        for (int k = 0; k < nc; k++) in[n++] = carry_b[k];
        for (int i = n; i < body->n_in; i++) in[i] = post[i - n];
        s = oly__ctl_depends(body, in, all_out);
        for (int k = 0; k < nc && s == OLY_OK; k++)
            if (all_out[k] && !carry_b[k]) carry_b[k] = changed = true;
    }
    free(in);
    return s;
}

static oly_status while_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                              const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_while *pw = eqn->params;
    int cn = (int)pw->cond_nconsts, bn = (int)pw->body_nconsts, nc = eqn->n_out;
    oly_program *cp = eqn->sub[0], *bp = eqn->sub[1];
    uint32_t eff = cp->effects | bp->effects;
    if (eff & OLY_EFFECT_ORDERED_IO)
        return oly__error(OLY_ERR_UNSUPPORTED, "Ordered IO effects not supported in vmap.");
    TMP_BEGIN;
    bool *b_in, *carry_b, *bo, *cin_b, pred_b = false;
    oly_atom *ops;
    ALLOC(b_in, eqn->n_in);
    ALLOC(carry_b, nc);
    ALLOC(bo, nc);
    ALLOC(cin_b, cn + nc);
    ALLOC(ops, eqn->n_in);
    for (int i = 0; i < eqn->n_in; i++) b_in[i] = in_bdim[i] != OLY_NOT_MAPPED;
    for (int k = 0; k < nc; k++) carry_b[k] = b_in[cn + bn + k];
    TRY(carry_fixpoint(bp, b_in + cn, bn, carry_b, nc, NULL, bo));
    for (int i = 0; i < cn; i++) cin_b[i] = b_in[i];
    for (int k = 0; k < nc; k++) cin_b[cn + k] = carry_b[k];
    TRY(oly__ctl_depends(cp, cin_b, &pred_b));
    if (pred_b) {
        if (eff & OLY_EFFECT_IO) {
            s = oly__error(OLY_ERR_UNSUPPORTED,
                           "Unordered IO effects not supported in while_loop with batched "
                           "predicate");
            goto done;
        }
        for (int k = 0; k < nc; k++) carry_b[k] = cin_b[cn + k] = true;
    }
    for (int i = 0; i < eqn->n_in; i++) {
        bool bt = i < cn + bn ? b_in[i] : carry_b[i - cn - bn];
        ops[i] = in[i];
        if (bt) TRY(oly__batch_move(ctx, in[i], in_bdim[i], 0, &ops[i]));
    }
    bool *bin_b;
    ALLOC(bin_b, bn + nc);
    for (int i = 0; i < bn; i++) bin_b[i] = b_in[cn + i];
    for (int k = 0; k < nc; k++) bin_b[bn + k] = carry_b[k];
    oly_program *cv, *bv;
    TRY(oly__ctl_vmap_sub(&t, cp, cin_b, &pred_b, ctx->size, &cv));
    TRY(oly__ctl_vmap_sub(&t, bp, bin_b, carry_b, ctx->size, &bv));
    for (int k = 0; k < nc; k++) out_bdim[k] = carry_b[k] ? 0 : OLY_NOT_MAPPED;
    if (!pred_b) {
        oly_program *subs[2] = {cv, bv};
        TRY(oly__emit(ctx->b, eqn->prim, ops, eqn->n_in, eqn->params, subs, 2, out));
        goto done;
    }
    /* Batched predicate: the predicate travels in the carry, as one more
     * loop value, so the condition runs once per iteration on every lane
     * (and once before the loop): lanes that are done keep their carry.
     *   pred0 = cond_v(cconsts, init)
     *   cond'(carry, pred) = reduce_or(pred)
     *   body'(cconsts, bconsts, carry, pred):
     *     c' = select(pred, body_v(bconsts, carry), carry)
     *     return (c', cond_v(cconsts, c')) */
    oly_builder *b = NULL;
    oly_program *c2 = NULL, *b2 = NULL;
    oly_atom pred0;
    {
        oly_atom *cin;
        ALLOC(cin, cn + nc);
        for (int i = 0; i < cn; i++) cin[i] = ops[i];
        for (int k = 0; k < nc; k++) cin[cn + k] = ops[cn + bn + k];
        TRY(oly__emit_inline(ctx->b, cv, cin, &pred0));
    }
    oly_aval pred_aval = oly__atom_aval(&pred0);
    {
        oly_atom *cin, any;
        ALLOC(cin, nc + 1);
        TRY(oly_builder_new(&b));
        for (int k = 0; k <= nc && s == OLY_OK; k++) {
            oly_var *v;
            s = oly_builder_add_input(b, k < nc ? &cv->in[cn + k]->aval : &pred_aval, &v);
            if (s == OLY_OK) cin[k] = oly_atom_var(v);
        }
        oly_params_reduce rp;
        memset(&rp, 0, sizeof rp);
        rp.axes = oly__ints(1, (int64_t[]){0});
        if (s == OLY_OK) s = oly__emit(b, &oly__prim_reduce_or, &cin[nc], 1, &rp, NULL, 0, &any);
        if (s == OLY_OK) s = oly_builder_finish(b, &any, 1, &c2);
        oly_builder_free(b);
        b = NULL;
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, c2));
    }
    {
        /* body'(cconsts, bconsts, carry, pred) */
        int n2 = cn + bn + nc + 1;
        oly_atom *w, *ci, *bi, *newc, *res;
        ALLOC(w, n2);
        ALLOC(ci, cn + nc);
        ALLOC(bi, bn + nc);
        ALLOC(newc, nc);
        ALLOC(res, nc + 1);
        TRY(oly_builder_new(&b));
        for (int i = 0; i < n2 && s == OLY_OK; i++) {
            const oly_aval *a = i < cn       ? &cv->in[i]->aval
                                : i < n2 - 1 ? &bv->in[i - cn]->aval
                                             : &pred_aval;
            oly_var *v;
            s = oly_builder_add_input(b, a, &v);
            if (s == OLY_OK) w[i] = oly_atom_var(v);
        }
        oly_atom pv = w[n2 - 1];
        for (int i = 0; i < cn; i++) ci[i] = w[i];
        for (int i = 0; i < bn + nc; i++) bi[i] = w[cn + i];
        if (s == OLY_OK) s = oly__emit_inline(b, bv, bi, newc);
        for (int k = 0; k < nc && s == OLY_OK; k++) {
            oly_aval a = oly__atom_aval(&newc[k]);
            oly_atom pk = pv;
            if (a.rank > 1) {
                oly_ints shape = oly__ints(a.rank, a.dims), dims = oly__ints(1, (int64_t[]){0});
                s = oly__emit_broadcast_in_dim(b, pv, &shape, &dims, &pk);
            }
            if (s == OLY_OK) s = oly__emit_select(b, pk, w[cn + bn + k], newc[k], &res[k]);
            ci[cn + k] = res[k];
        }
        if (s == OLY_OK) s = oly__emit_inline(b, cv, ci, &res[nc]);
        if (s == OLY_OK) s = oly_builder_finish(b, res, nc + 1, &b2);
        oly_builder_free(b);
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, b2));
    }
    oly_atom *nops_, *outs;
    ALLOC(nops_, eqn->n_in + 1);
    ALLOC(outs, nc + 1);
    for (int i = 0; i < eqn->n_in; i++) nops_[i] = ops[i];
    nops_[eqn->n_in] = pred0;
    oly_params_while np = {.cond_nconsts = 0, .body_nconsts = cn + bn};
    oly_program *subs[2] = {c2, b2};
    TRY(oly__emit(ctx->b, eqn->prim, nops_, eqn->n_in + 1, &np, subs, 2, outs));
    for (int k = 0; k < nc; k++) out[k] = outs[k];
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status scan_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_scan *ps = eqn->params;
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, n = eqn->n_in, no = eqn->n_out;
    oly_program *bp = eqn->sub[0];
    TMP_BEGIN;
    bool *b_in, *ob;
    oly_atom *ops;
    ALLOC(b_in, n);
    ALLOC(ob, no);
    ALLOC(ops, n);
    for (int i = 0; i < n; i++) b_in[i] = in_bdim[i] != OLY_NOT_MAPPED;
    TRY(carry_fixpoint(bp, b_in, nk, b_in + nk, nc, b_in + nk + nc, ob));
    for (int i = 0; i < n; i++) {
        ops[i] = in[i];
        /* xs keep the scan axis first: their batch axis goes to 1 */
        if (b_in[i]) TRY(oly__batch_move(ctx, in[i], in_bdim[i], i < nk + nc ? 0 : 1, &ops[i]));
    }
    for (int k = 0; k < nc; k++) ob[k] = b_in[nk + k];
    oly_program *bv;
    TRY(oly__ctl_vmap_sub(&t, bp, b_in, ob, ctx->size, &bv));
    TRY(oly__emit(ctx->b, eqn->prim, ops, n, eqn->params, &bv, 1, out));
    for (int k = 0; k < no; k++) out_bdim[k] = !ob[k] ? OLY_NOT_MAPPED : k < nc ? 0 : 1;
done:
    oly__ctl_tfree(&t);
    return s;
}

/* Carry tangent fixpoint shared by while and scan: body inputs
 * (pre[0..npre), carry[0..nc), post...) with nonzero-tangent flags; grows
 * nz_carry until the body's carry tangents out are within it, then returns the
 * jvp of the body with every nz_carry output instantiated. */
static oly_status jvp_fixpoint(ctl_tmp *tp, oly_program *body, int npre, int nc, bool *nz_in,
                               oly_program **out, bool *nz_out)
{
    bool *force = oly__calloc((size_t)body->n_out + 1, sizeof *force);
    if (!force) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int k = 0; k < nc; k++) nz_in[npre + k] = nz_in[npre + k] && oly__ctl_inexact(&body->in[npre + k]->aval);
    for (bool changed = true; changed && s == OLY_OK;) {
        changed = false;
        for (int k = 0; k < nc; k++) force[k] = nz_in[npre + k];
        s = oly__ctl_jvp_sub(tp, body, nz_in, force, out, nz_out);
        for (int k = 0; k < nc && s == OLY_OK; k++)
            if (nz_out[k] && !nz_in[npre + k]) nz_in[npre + k] = changed = true;
    }
    free(force);
    return s;
}

static oly_status while_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_while *pw = eqn->params;
    int cn = (int)pw->cond_nconsts, bn = (int)pw->body_nconsts, nc = eqn->n_out;
    oly_program *cp = eqn->sub[0], *bp = eqn->sub[1];
    TMP_BEGIN;
    bool *nz, *nzo;
    ALLOC(nz, bn + nc);
    ALLOC(nzo, nc);
    for (int i = 0; i < bn + nc; i++) nz[i] = tan_nz[cn + i] && oly__ctl_inexact(&bp->in[i]->aval);
    oly_program *jb;
    TRY(jvp_fixpoint(&t, bp, bn, nc, nz, &jb, nzo));
    int ntb = 0, ntc = 0;
    for (int i = 0; i < bn; i++) ntb += nz[i];
    for (int k = 0; k < nc; k++) ntc += nz[bn + k];
    /* jb: (bconsts, carry, tbconsts, tcarry) -> (carry, tcarry); the loop wants
     * (bconsts, tbconsts, carry, tcarry). */
    int nbi = bn + ntb + nc + ntc;
    oly_aval *av;
    int *pin;
    ctl_src *os;
    ALLOC(av, nbi);
    ALLOC(pin, nbi);
    ALLOC(os, nc + ntc);
    for (int i = 0; i < bn; i++) pin[i] = i;
    for (int k = 0; k < nc; k++) pin[bn + k] = bn + ntb + k;
    for (int i = 0; i < ntb; i++) pin[bn + nc + i] = bn + i;
    for (int k = 0; k < ntc; k++) pin[bn + nc + ntb + k] = bn + ntb + nc + k;
    for (int i = 0; i < nbi; i++) av[pin[i]] = jb->in[i]->aval;
    for (int k = 0; k < nc + ntc; k++) os[k] = oly__ctl_from_out(k);
    oly_program *b2, *c2;
    TRY(oly__ctl_wrap(jb, nbi, av, pin, nc + ntc, os, &b2));
    TRY(oly__ctl_keep(&t, b2));
    /* cond: (cconsts, carry, tcarry) -> cond(cconsts, carry) */
    int nci = cn + nc + ntc;
    oly_aval *cav;
    int *cpin;
    ALLOC(cav, nci);
    ALLOC(cpin, cn + nc);
    oly__ctl_in_avals(cp, cav);
    for (int i = 0; i < cn + nc; i++) cpin[i] = i;
    for (int k = 0; k < ntc; k++) cav[cn + nc + k] = av[bn + ntb + nc + k];
    ctl_src co = oly__ctl_from_out(0);
    TRY(oly__ctl_wrap(cp, nci, cav, cpin, 1, &co, &c2));
    TRY(oly__ctl_keep(&t, c2));
    oly_atom *ops, *outs;
    ALLOC(ops, cn + nbi);
    ALLOC(outs, nc + ntc);
    int n = 0;
    for (int i = 0; i < cn + bn; i++) ops[n++] = primal[i];
    for (int i = 0; i < bn; i++)
        if (nz[i]) ops[n++] = tangent[cn + i];
    for (int k = 0; k < nc; k++) ops[n++] = primal[cn + bn + k];
    for (int k = 0; k < nc; k++)
        if (nz[bn + k])
            TRY(oly__ctl_tangent_or_zeros(ctx->b, tangent, tan_nz, cn + bn + k, &bp->in[bn + k]->aval,
                                 &ops[n++]));
    oly_params_while np = {.cond_nconsts = cn, .body_nconsts = bn + ntb};
    oly_program *subs[2] = {c2, b2};
    TRY(oly__emit(ctx->b, eqn->prim, ops, n, &np, subs, 2, outs));
    for (int k = 0, o = nc; k < nc; k++) {
        primal_out[k] = outs[k];
        out_nz[k] = nz[bn + k];
        if (nz[bn + k]) tangent_out[k] = outs[o++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status scan_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_scan *ps = eqn->params;
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, n = eqn->n_in, no = eqn->n_out;
    int nx = n - nk - nc, ny = no - nc;
    oly_program *bp = eqn->sub[0];
    TMP_BEGIN;
    bool *nz, *nzo;
    ALLOC(nz, n);
    ALLOC(nzo, no);
    for (int i = 0; i < n; i++) nz[i] = tan_nz[i] && oly__ctl_inexact(&bp->in[i]->aval);
    oly_program *jb;
    TRY(jvp_fixpoint(&t, bp, nk, nc, nz, &jb, nzo));
    int tk = 0, tc = 0, tx = 0, ty = 0;
    for (int i = 0; i < nk; i++) tk += nz[i];
    for (int k = 0; k < nc; k++) tc += nz[nk + k];
    for (int j = 0; j < nx; j++) tx += nz[nk + nc + j];
    for (int j = 0; j < ny; j++) ty += nzo[nc + j];
    /* jb: (consts, carry, xs, tconsts, tcarry, txs) -> (carry, ys, tcarry, tys);
     * the scan wants (consts, tconsts, carry, tcarry, xs, txs) -> (carry, tcarry, ys, tys). */
    int ni = n + tk + tc + tx, nout = no + tc + ty;
    oly_aval *av;
    int *pin;
    ctl_src *os;
    ALLOC(av, ni);
    ALLOC(pin, ni);
    ALLOC(os, nout);
    for (int i = 0; i < nk; i++) pin[i] = i;
    for (int k = 0; k < nc; k++) pin[nk + k] = nk + tk + k;
    for (int j = 0; j < nx; j++) pin[nk + nc + j] = nk + tk + nc + tc + j;
    for (int i = 0; i < tk; i++) pin[n + i] = nk + i;
    for (int k = 0; k < tc; k++) pin[n + tk + k] = nk + tk + nc + k;
    for (int j = 0; j < tx; j++) pin[n + tk + tc + j] = nk + tk + nc + tc + nx + j;
    for (int i = 0; i < ni; i++) av[pin[i]] = jb->in[i]->aval;
    int o = 0;
    for (int k = 0; k < nc; k++) os[o++] = oly__ctl_from_out(k);
    for (int k = 0; k < tc; k++) os[o++] = oly__ctl_from_out(no + k);
    for (int j = 0; j < ny; j++) os[o++] = oly__ctl_from_out(nc + j);
    for (int j = 0; j < ty; j++) os[o++] = oly__ctl_from_out(no + tc + j);
    oly_program *b2;
    TRY(oly__ctl_wrap(jb, ni, av, pin, nout, os, &b2));
    TRY(oly__ctl_keep(&t, b2));
    oly_atom *ops, *outs;
    ALLOC(ops, ni);
    ALLOC(outs, nout);
    int m = 0;
    for (int i = 0; i < nk; i++) ops[m++] = primal[i];
    for (int i = 0; i < nk; i++)
        if (nz[i]) ops[m++] = tangent[i];
    for (int k = 0; k < nc; k++) ops[m++] = primal[nk + k];
    for (int k = 0; k < nc; k++)
        if (nz[nk + k])
            TRY(oly__ctl_tangent_or_zeros(ctx->b, tangent, tan_nz, nk + k, &bp->in[nk + k]->aval,
                                 &ops[m++]));
    for (int j = 0; j < nx; j++) ops[m++] = primal[nk + nc + j];
    for (int j = 0; j < nx; j++)
        if (nz[nk + nc + j]) ops[m++] = tangent[nk + nc + j];
    oly_params_scan np = *ps;
    np.num_consts = nk + tk;
    np.num_carry = nc + tc;
    np.n_out = nout;
    TRY(oly__emit(ctx->b, eqn->prim, ops, m, &np, &b2, 1, outs));
    o = 0;
    for (int k = 0; k < nc; k++) primal_out[k] = outs[o++];
    for (int k = 0; k < nc; k++) {
        out_nz[k] = nz[nk + k];
        if (out_nz[k]) tangent_out[k] = outs[o++];
    }
    for (int j = 0; j < ny; j++) primal_out[nc + j] = outs[o++];
    for (int j = 0; j < ny; j++) {
        out_nz[nc + j] = nzo[nc + j];
        if (out_nz[nc + j]) tangent_out[nc + j] = outs[o++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status scan_pe(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                          const oly_atom *unknown_in, const bool *unknown, oly_atom *known_out,
                          oly_atom *unknown_out, bool *out_unknown)
{
    const oly_params_scan *ps = eqn->params;
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, n = eqn->n_in, no = eqn->n_out;
    int nx = n - nk - nc, ny = no - nc;
    oly_program *bp = eqn->sub[0];
    TMP_BEGIN;
    bool *un, *ou;
    oly_program *K = NULL, *U = NULL;
    int nres = 0;
    ALLOC(un, n);
    ALLOC(ou, no);
    for (int i = 0; i < n; i++) un[i] = unknown[i];
    for (bool changed = true; changed;) {
        changed = false;
        TRY(oly__partial_eval(bp, un, &K, &U, &nres, ou));
        TRY(oly__ctl_keep(&t, K));
        TRY(oly__ctl_keep(&t, U));
        for (int k = 0; k < nc; k++)
            if (ou[k] && !un[nk + k]) un[nk + k] = changed = true;
    }
    /* Counts: known/unknown consts, carries, xs, ys; inst: carries unknown on
     * the way in whose body output is known (passed through as residuals). */
    int kk = 0, kc = 0, kx = 0, ky = 0, ninst = 0;
    for (int i = 0; i < nk; i++) kk += !un[i];
    for (int k = 0; k < nc; k++) {
        kc += !un[nk + k];
        ninst += un[nk + k] && !ou[k];
    }
    for (int j = 0; j < nx; j++) kx += !un[nk + nc + j];
    for (int j = 0; j < ny; j++) ky += !ou[nc + j];
    int uk = nk - kk, ucn = nc - kc, ux = nx - kx, uy = ny - ky;
    bool any_unknown = ucn + uy > 0 || U->effects;
    if (!any_unknown) nres = 0; /* every output known: nothing crosses over */
    /* position of body output k among K's (known) or U's (unknown) outputs */
    int *pos;
    ALLOC(pos, no);
    int nko = 0, nuo = 0;
    for (int k = 0; k < no; k++) pos[k] = ou[k] ? nuo++ : nko++;
    /* Loop-invariant residuals (depending on known consts only) are computed
     * once before the loop and enter the unknown loop as consts instead of
     * being stacked per iteration (an RNN's weights stay one copy). Not when
     * the known body has effects: hoisting would run them again. */
    bool *inv, *kflag, *kdep;
    int *ridx; /* residual r's index among the hoisted or among the stacked */
    ALLOC(inv, nres);
    ALLOC(ridx, nres);
    ALLOC(kflag, K->n_in);
    ALLOC(kdep, K->n_out);
    for (int i = kk; i < K->n_in; i++) kflag[i] = true;
    TRY(oly__ctl_depends(K, kflag, kdep));
    /* A stacked residual that is a known xs slice itself passes that xs
     * (xsrc: its operand index) rather than a copy made by the known loop. */
    int *kidx, *xsrc;
    ALLOC(kidx, K->n_in);
    ALLOC(xsrc, nres);
    for (int i = 0, q = 0; i < n; i++)
        if (!un[i]) kidx[q++] = i;
    int nh = 0, nsr = 0;
    for (int r = 0; r < nres; r++) {
        inv[r] = !K->effects && !kdep[nko + r];
        ridx[r] = inv[r] ? nh++ : nsr++;
        xsrc[r] = -1;
        const oly_atom *ro = &K->out[nko + r];
        for (int q = kk + kc; !inv[r] && ro->kind == OLY_ATOM_VAR && q < K->n_in; q++)
            if (ro->var == K->in[q]) xsrc[r] = kidx[q];
    }
    oly_atom *hout;
    ALLOC(hout, nh);
    if (nh > 0) {
        /* H: (kconsts) -> hoisted residuals; the loop-carried inputs read as
         * zeros (the hoisted values do not depend on them) and are DCE'd. */
        oly_builder *b = NULL;
        oly_atom *hi, *ho, *hres;
        oly_program *H = NULL, *H2 = NULL;
        ALLOC(hi, K->n_in);
        ALLOC(ho, K->n_out);
        ALLOC(hres, nh);
        TRY(oly_builder_new(&b));
        for (int i = 0; i < K->n_in && s == OLY_OK; i++) {
            if (i >= kk) {
                s = oly__emit_full(b, &K->in[i]->aval, 0.0, &hi[i]);
                continue;
            }
            oly_var *v;
            s = oly_builder_add_input(b, &K->in[i]->aval, &v);
            if (s == OLY_OK) hi[i] = oly_atom_var(v);
        }
        if (s == OLY_OK) s = oly__emit_inline(b, K, hi, ho);
        for (int r = 0; r < nres; r++)
            if (inv[r]) hres[ridx[r]] = ho[nko + r];
        if (s == OLY_OK) s = oly_builder_finish(b, hres, nh, &H);
        oly_builder_free(b);
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, H));
        TRY(oly_program_dce(H, &H2));
        TRY(oly__ctl_keep(&t, H2));
        int m = 0;
        for (int i = 0; i < nk; i++)
            if (!un[i]) hi[m++] = known_in[i];
        TRY(oly__emit_inline(ctx->known, H2, hi, hout));
    }
    /* Known body: (kconsts, kcarry, kxs) -> (kcarry, kys, stacked res, inst). */
    int nkout = kc + ky + nsr + ninst;
    ctl_src *os;
    oly_aval *av;
    int *pin;
    ALLOC(os, nkout + no);
    ALLOC(av, n + nres + ninst);
    ALLOC(pin, n + nres + ninst);
    int m = 0;
    for (int k = 0; k < nc; k++)
        if (!un[nk + k]) os[m++] = oly__ctl_from_out(pos[k]);
    for (int j = 0; j < ny; j++)
        if (!ou[nc + j]) os[m++] = oly__ctl_from_out(pos[nc + j]);
    for (int r = 0; r < nres; r++)
        if (!inv[r] && xsrc[r] < 0) os[m++] = oly__ctl_from_out(nko + r);
    for (int k = 0; k < nc; k++)
        if (un[nk + k] && !ou[k]) os[m++] = oly__ctl_from_out(pos[k]);
    nkout = m;
    oly__ctl_in_avals(K, av);
    for (int i = 0; i < K->n_in; i++) pin[i] = i;
    oly_program *K2, *U2 = NULL;
    TRY(oly__ctl_wrap(K, K->n_in, av, pin, nkout, os, &K2));
    TRY(oly__ctl_keep(&t, K2));
    TRY(oly__ctl_dce_kept(&t, &K2));
    /* Unknown body: (uconsts, hoisted res, ucarry, stacked res, inst, uxs) ->
     * (ucarry, uys); U takes (res, uconsts, ucarry, uxs). */
    int o_h = uk, o_c = uk + nh, o_s = o_c + ucn, o_i = o_s + nsr, o_x = o_i + ninst;
    int nui = o_x + ux;
    for (int r = 0; r < nres; r++) pin[r] = inv[r] ? o_h + ridx[r] : o_s + ridx[r];
    for (int i = 0; i < uk; i++) pin[nres + i] = i;
    for (int k = 0; k < ucn; k++) pin[nres + uk + k] = o_c + k;
    for (int j = 0; j < ux; j++) pin[nres + uk + ucn + j] = o_x + j;
    for (int i = 0; i < U->n_in; i++) av[pin[i]] = U->in[i]->aval;
    for (int k = 0, q = o_i; k < nc; k++)
        if (un[nk + k] && !ou[k]) av[q++] = bp->in[nk + k]->aval;
    m = 0;
    int inst = o_i;
    for (int k = 0; k < nc; k++)
        if (un[nk + k]) os[m++] = ou[k] ? oly__ctl_from_out(pos[k]) : oly__ctl_from_in(inst++);
    for (int j = 0; j < ny; j++)
        if (ou[nc + j]) os[m++] = oly__ctl_from_out(pos[nc + j]);
    if (any_unknown) {
        TRY(oly__ctl_wrap(U, nui, av, pin, ucn + uy, os, &U2));
        TRY(oly__ctl_keep(&t, U2));
        TRY(oly__ctl_dce_kept(&t, &U2));
    }

    oly_atom *kin, *kout, *uin, *uout;
    ALLOC(kin, kk + kc + kx);
    ALLOC(kout, nkout);
    ALLOC(uin, nui);
    ALLOC(uout, ucn + uy);
    m = 0;
    for (int i = 0; i < n; i++)
        if (!un[i]) kin[m++] = known_in[i];
    if (nkout > 0 || K2->effects) {
        oly_params_scan kp = *ps;
        kp.num_consts = kk;
        kp.num_carry = kc;
        kp.n_out = nkout;
        TRY(oly__emit(ctx->known, eqn->prim, kin, m, &kp, &K2, 1, kout));
    }
    if (any_unknown) {
        m = 0;
        for (int i = 0; i < nk; i++)
            if (un[i]) TRY(oly__ctl_as_unknown(ctx, known_in, unknown_in, unknown, i, &uin[m++]));
        for (int h = 0; h < nh; h++) TRY(oly__pe_residual(ctx, hout[h], &uin[m++]));
        for (int k = 0; k < nc; k++)
            if (un[nk + k]) TRY(oly__ctl_as_unknown(ctx, known_in, unknown_in, unknown, nk + k, &uin[m++]));
        int ko = kc + ky;
        for (int r = 0; r < nres; r++) {
            if (inv[r]) continue;
            oly_atom x = xsrc[r] >= 0 ? known_in[xsrc[r]] : kout[ko++];
            TRY(oly__pe_residual(ctx, x, &uin[m + ridx[r]]));
        }
        m += nsr;
        for (int q = 0; q < ninst; q++) TRY(oly__pe_residual(ctx, kout[ko++], &uin[m++]));
        for (int j = 0; j < nx; j++)
            if (un[nk + nc + j]) uin[m++] = unknown_in[nk + nc + j];
        oly_params_scan up = *ps;
        up.num_consts = uk + nh;
        up.num_carry = ucn;
        up.n_out = ucn + uy;
        TRY(oly__emit(ctx->unknown, eqn->prim, uin, m, &up, &U2, 1, uout));
    }
    int a = 0, c = 0;
    for (int k = 0; k < nc; k++) {
        out_unknown[k] = un[nk + k];
        if (un[nk + k])
            unknown_out[k] = uout[c++];
        else
            known_out[k] = kout[a++];
    }
    for (int j = 0; j < ny; j++) {
        out_unknown[nc + j] = ou[nc + j];
        if (ou[nc + j])
            unknown_out[nc + j] = uout[c++];
        else
            known_out[nc + j] = kout[a++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

/* while: the carries that depend only on known values are computed by a
 * known loop (restricted to them); the unknown side re-runs the whole loop
 * with the known inputs as residuals (no per-iteration residuals exist). */
static oly_status while_pe(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                           const oly_atom *unknown_in, const bool *unknown, oly_atom *known_out,
                           oly_atom *unknown_out, bool *out_unknown)
{
    const oly_params_while *pw = eqn->params;
    int cn = (int)pw->cond_nconsts, bn = (int)pw->body_nconsts, nc = eqn->n_out;
    oly_program *cp = eqn->sub[0], *bp = eqn->sub[1];
    if (eqn->effects)
        return oly__ctl_pe_all_unknown(ctx, eqn, known_in, unknown_in, unknown, unknown_out, out_unknown);
    TMP_BEGIN;
    bool *uc, *bo, *ci, pred_u = false;
    oly_atom *uout;
    ALLOC(uc, nc);
    ALLOC(bo, nc);
    ALLOC(ci, cn + nc);
    ALLOC(uout, nc);
    for (int k = 0; k < nc; k++) uc[k] = unknown[cn + bn + k];
    TRY(carry_fixpoint(bp, unknown + cn, bn, uc, nc, NULL, bo));
    for (int i = 0; i < cn; i++) ci[i] = unknown[i];
    for (int k = 0; k < nc; k++) ci[cn + k] = uc[k];
    TRY(oly__ctl_depends(cp, ci, &pred_u));
    int kc = 0;
    for (int k = 0; k < nc; k++) kc += !uc[k];
    if (pred_u || kc == 0) {
        s = oly__ctl_pe_all_unknown(ctx, eqn, known_in, unknown_in, unknown, unknown_out, out_unknown);
        goto done;
    }
    /* Known loop: (kcconsts, kbconsts, kcarry); unknown inputs read as zeros
     * (nothing known depends on them), then DCE'd away. */
    int nkb = 0;
    for (int i = 0; i < bn; i++) nkb += !unknown[cn + i];
    oly_program *c2, *b2, *c3, *b3;
    {
        /* cond: inputs (cconsts, kcarry) */
        oly_builder *b = NULL;
        oly_atom *pi, po;
        ALLOC(pi, cn + nc);
        TRY(oly_builder_new(&b));
        for (int i = 0; i < cn + nc && s == OLY_OK; i++) {
            if (i >= cn && uc[i - cn]) {
                s = oly__emit_full(b, &cp->in[i]->aval, 0.0, &pi[i]);
                continue;
            }
            oly_var *v;
            s = oly_builder_add_input(b, &cp->in[i]->aval, &v);
            if (s == OLY_OK) pi[i] = oly_atom_var(v);
        }
        if (s == OLY_OK) s = oly__emit_inline(b, cp, pi, &po);
        if (s == OLY_OK) s = oly_builder_finish(b, &po, 1, &c2);
        oly_builder_free(b);
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, c2));
        /* body: inputs (kbconsts, kcarry) -> kcarry */
        oly_atom *bo_;
        ALLOC(pi, bn + nc);
        ALLOC(bo_, nc);
        TRY(oly_builder_new(&b));
        for (int i = 0; i < bn + nc && s == OLY_OK; i++) {
            bool u = i < bn ? unknown[cn + i] : uc[i - bn];
            if (u) {
                s = oly__emit_full(b, &bp->in[i]->aval, 0.0, &pi[i]);
                continue;
            }
            oly_var *v;
            s = oly_builder_add_input(b, &bp->in[i]->aval, &v);
            if (s == OLY_OK) pi[i] = oly_atom_var(v);
        }
        if (s == OLY_OK) s = oly__emit_inline(b, bp, pi, bo_);
        int m = 0;
        for (int k = 0; k < nc; k++)
            if (!uc[k]) bo_[m++] = bo_[k];
        if (s == OLY_OK) s = oly_builder_finish(b, bo_, kc, &b2);
        oly_builder_free(b);
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, b2));
    }
    TRY(oly_program_dce(c2, &c3));
    TRY(oly__ctl_keep(&t, c3));
    TRY(oly_program_dce(b2, &b3));
    TRY(oly__ctl_keep(&t, b3));
    oly_atom *kin, *kout;
    ALLOC(kin, cn + nkb + kc);
    ALLOC(kout, kc);
    int m = 0;
    for (int i = 0; i < cn; i++) kin[m++] = known_in[i];
    for (int i = 0; i < bn; i++)
        if (!unknown[cn + i]) kin[m++] = known_in[cn + i];
    for (int k = 0; k < nc; k++)
        if (!uc[k]) kin[m++] = known_in[cn + bn + k];
    oly_params_while kp = {.cond_nconsts = cn, .body_nconsts = nkb};
    oly_program *subs[2] = {c3, b3};
    TRY(oly__emit(ctx->known, eqn->prim, kin, m, &kp, subs, 2, kout));
    if (kc < nc) TRY(oly__ctl_pe_all_unknown(ctx, eqn, known_in, unknown_in, unknown, uout, out_unknown));
    for (int k = 0, a = 0; k < nc; k++) {
        out_unknown[k] = uc[k];
        if (uc[k])
            unknown_out[k] = uout[k];
        else
            known_out[k] = kout[a++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

/* scan transpose: consts and xs may mix residuals and linear values; every
 * carry is treated as linear (a residual carry init is a zero instantiated
 * by jvp; its cotangent is dropped). The transposed loop runs the other way:
 * consts = residual consts; carry = (const cotangent accumulators, carry
 * cotangents); xs = (residual xs, ys cotangents); ys = xs cotangents. */
static oly_status scan_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_scan *ps = eqn->params;
    int nk = (int)ps->num_consts, nc = (int)ps->num_carry, n = eqn->n_in, no = eqn->n_out;
    int nx = n - nk - nc, ny = no - nc;
    oly_program *bp = eqn->sub[0];
    TMP_BEGIN;
    int rk = 0, lk = 0, rx = 0, lx = 0, cy = 0;
    for (int i = 0; i < nk; i++) *(linear[i] ? &lk : &rk) += 1;
    for (int j = 0; j < nx; j++) *(linear[nk + nc + j] ? &lx : &rx) += 1;
    for (int j = 0; j < ny; j++) cy += ct_nz[nc + j];
    /* L: (rconsts, rxs, lconsts, carry, lxs) -> (carry, ys) */
    oly_aval *av;
    int *pin;
    ctl_src *os;
    ALLOC(av, n);
    ALLOC(pin, n);
    ALLOC(os, no);
    {
        int r = 0, rxo = rk, l = rk + rx, c = rk + rx + lk, lxo = rk + rx + lk + nc;
        for (int i = 0; i < nk; i++) pin[i] = linear[i] ? l++ : r++;
        for (int k = 0; k < nc; k++) pin[nk + k] = c++;
        for (int j = 0; j < nx; j++) pin[nk + nc + j] = linear[nk + nc + j] ? lxo++ : rxo++;
    }
    for (int i = 0; i < n; i++) av[pin[i]] = bp->in[i]->aval;
    for (int k = 0; k < no; k++) os[k] = oly__ctl_from_out(k);
    oly_program *L, *T, *BT;
    TRY(oly__ctl_wrap(bp, n, av, pin, no, os, &L));
    TRY(oly__ctl_keep(&t, L));
    /* T: (rconsts, rxs, ct_carry, ct_ys) -> (ct_lconsts, ct_carry, ct_lxs) */
    TRY(oly_program_transpose(L, rk + rx, &T));
    TRY(oly__ctl_keep(&t, T));
    {
        /* BT: (rconsts, acc[lk], ct_carry[nc], rxs, ct_ys[cy]) -> (acc', ct_carry', ct_lxs) */
        oly_builder *b = NULL;
        int nbi = rk + lk + nc + rx + cy;
        oly_atom *w, *ti, *to, *bo;
        ALLOC(av, nbi);
        ALLOC(w, nbi);
        ALLOC(ti, rk + rx + nc + ny);
        ALLOC(to, lk + nc + lx);
        ALLOC(bo, lk + nc + lx);
        TRY(oly_builder_new(&b));
        int m = 0;
        for (int i = 0; i < rk; i++) av[m++] = T->in[i]->aval;
        for (int i = 0; i < lk; i++) av[m++] = L->in[rk + rx + i]->aval;
        for (int k = 0; k < nc; k++) av[m++] = T->in[rk + rx + k]->aval;
        for (int j = 0; j < rx; j++) av[m++] = T->in[rk + j]->aval;
        for (int j = 0; j < ny; j++)
            if (ct_nz[nc + j]) av[m++] = T->in[rk + rx + nc + j]->aval;
        for (int i = 0; i < nbi && s == OLY_OK; i++) {
            oly_var *v;
            s = oly_builder_add_input(b, &av[i], &v);
            if (s == OLY_OK) w[i] = oly_atom_var(v);
        }
        m = 0;
        for (int i = 0; i < rk; i++) ti[m++] = w[i];
        for (int j = 0; j < rx; j++) ti[m++] = w[rk + lk + nc + j];
        for (int k = 0; k < nc; k++) ti[m++] = w[rk + lk + k];
        for (int j = 0, c = 0; j < ny && s == OLY_OK; j++) {
            if (ct_nz[nc + j])
                ti[m++] = w[rk + lk + nc + rx + c++];
            else
                s = oly__emit_full(b, &T->in[rk + rx + nc + j]->aval, 0.0, &ti[m++]);
        }
        if (s == OLY_OK) s = oly__emit_inline(b, T, ti, to);
        for (int i = 0; i < lk && s == OLY_OK; i++) s = oly__emit_add_any(b, w[rk + i], to[i], &bo[i]);
        for (int k = lk; k < lk + nc + lx; k++) bo[k] = to[k];
        if (s == OLY_OK) s = oly_builder_finish(b, bo, lk + nc + lx, &BT);
        oly_builder_free(b);
        if (s != OLY_OK) goto done;
        TRY(oly__ctl_keep(&t, BT));
    }
    oly_atom *ops, *outs;
    ALLOC(ops, rk + lk + nc + rx + cy);
    ALLOC(outs, lk + nc + lx);
    int m = 0;
    for (int i = 0; i < nk; i++)
        if (!linear[i]) ops[m++] = in[i];
    for (int i = 0; i < nk; i++)
        if (linear[i]) TRY(oly__emit_full(ctx->b, &bp->in[i]->aval, 0.0, &ops[m++]));
    for (int k = 0; k < nc; k++) {
        if (ct_nz[k])
            ops[m++] = ct[k];
        else
            TRY(oly__emit_full(ctx->b, &eqn->out[k]->aval, 0.0, &ops[m++]));
    }
    for (int j = 0; j < nx; j++)
        if (!linear[nk + nc + j]) ops[m++] = in[nk + nc + j];
    for (int j = 0; j < ny; j++)
        if (ct_nz[nc + j]) ops[m++] = ct[nc + j];
    oly_params_scan np = *ps;
    np.reverse = !ps->reverse;
    np.num_consts = rk;
    np.num_carry = lk + nc;
    np.n_out = lk + nc + lx;
    TRY(oly__emit(ctx->b, eqn->prim, ops, m, &np, &BT, 1, outs));
    for (int i = 0, l = 0; i < nk; i++)
        if (linear[i]) {
            ct_in[i] = outs[l++];
            ct_in_nz[i] = true;
        }
    for (int k = 0; k < nc; k++)
        if (linear[nk + k]) {
            ct_in[nk + k] = outs[lk + k];
            ct_in_nz[nk + k] = true;
        }
    for (int j = 0, l = 0; j < nx; j++)
        if (linear[nk + nc + j]) {
            ct_in[nk + nc + j] = outs[lk + nc + l++];
            ct_in_nz[nk + nc + j] = true;
        }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status while_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                  oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__error(OLY_ERR_UNSUPPORTED,
                      "Reverse-mode differentiation does not work for lax.while_loop or "
                      "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                      "using fori_loop with static start/stop.");
}

const oly_prim oly__prim_while = {
    .name = "while",
    .n_in = -1,
    .num_outputs = while_num_outputs,
    .params_size = sizeof(oly_params_while),
    .fields = while_fields,
    .n_fields = OLY_ARRAY_LEN(while_fields),
    .shape = while_shape,
    .batch = while_batch,
    .jvp = while_jvp,
    .transpose = while_transpose,
    .partial_eval = while_pe,
};

const oly_prim oly__prim_scan = {
    .name = "scan",
    .n_in = -1,
    .num_outputs = scan_num_outputs,
    .params_size = sizeof(oly_params_scan),
    .fields = scan_fields,
    .n_fields = OLY_ARRAY_LEN(scan_fields),
    .shape = scan_shape,
    .batch = scan_batch,
    .jvp = scan_jvp,
    .transpose = scan_transpose,
    .partial_eval = scan_pe,
};

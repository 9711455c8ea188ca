/* cond.c — cond (lax.cond / lax.switch): params, shape rule, and its batch,
 * jvp, partial-eval and transpose rules, which transform the branches as whole
 * programs (control.h); its kernel is in src/cpu/cond.c. */
#include "prims/control.h"

static const oly_param_field cond_fields[] = {
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_cond, n_out),
     .hidden = true},
};

static int cond_num_outputs(const void *params, int n_in)
{
    const oly_params_cond *pc = params;
    if (!pc || pc->n_out < 0 || pc->n_out > MAX_OUT) return -1;
    return (int)pc->n_out;
}

static oly_status cond_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    if (ctx->n_sub < 1 || !ctx->sub)
        return oly__error(OLY_ERR_INVALID, "cond: expected at least 1 branch, got %d",
                          ctx->n_sub);
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "cond: expected an index operand, got no inputs");
    const oly_aval *ix = &ctx->in[0];
    if (ix->rank != 0 || (ix->dtype != OLY_INT32 && ix->dtype != OLY_BOOL)) {
        char g[256];
        oly_aval_format(g, sizeof g, ix);
        return oly__error(OLY_ERR_TYPE, "cond: index must be a scalar int32 or bool, got %s", g);
    }
    if (ix->dtype == OLY_BOOL && ctx->n_sub != 2)
        return oly__error(OLY_ERR_INVALID, "cond: a bool predicate needs 2 branches, got %d",
                          ctx->n_sub);
    int nops = ctx->n_in - 1;
    for (int b = 0; b < ctx->n_sub; b++) {
        const oly_program *br = ctx->sub[b];
        if (!br) return oly__error(OLY_ERR_INVALID, "cond: branch %d is NULL", b);
        if (br->n_in != nops)
            return oly__error(OLY_ERR_INVALID, "cond: branch %d takes %d operands, got %d", b,
                              br->n_in, nops);
        if (br->n_out != ctx->n_out)
            return oly__error(OLY_ERR_INVALID, "cond: branch %d has %d outputs, params say %d",
                              b, br->n_out, ctx->n_out);
        for (int i = 0; i < nops; i++)
            OLY_TRY(oly__ctl_same_aval("cond", "operand", i, &br->in[i]->aval, &ctx->in[1 + i]));
        for (int k = 0; k < br->n_out; k++) {
            oly_aval a = oly__ctl_out_aval(br, k), a0 = oly__ctl_out_aval(ctx->sub[0], k);
            if (!oly_aval_equal(&a, &a0)) {
                char w[256], g[256];
                oly_aval_format(w, sizeof w, &a0);
                oly_aval_format(g, sizeof g, &a);
                return oly__error(OLY_ERR_TYPE,
                                  "cond: branches disagree on output %d: branch 0 gives %s, "
                                  "branch %d gives %s",
                                  k, w, b, g);
            }
        }
    }
    for (int k = 0; k < ctx->n_out; k++) {
        out[k] = oly__ctl_out_aval(ctx->sub[0], k);
        /* weak only when every branch's output is weak */
        for (int b = 1; b < ctx->n_sub; b++) out[k].weak &= oly__ctl_out_aval(ctx->sub[b], k).weak;
    }
    return OLY_OK;
}

static oly_status cond_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    int nb = eqn->n_sub, nops = eqn->n_in - 1, no = eqn->n_out;
    for (int b = 0; b < nb; b++)
        if (eqn->sub[b]->effects & (OLY_EFFECT_IO | OLY_EFFECT_ORDERED_IO))
            return oly__error(OLY_ERR_UNSUPPORTED, "IO effect not supported in vmap-of-cond.");
    TMP_BEGIN;
    bool *op_b, *out_b, *ob;
    oly_atom *ops, *bo;
    oly_program **vb;
    ALLOC(op_b, nops);
    ALLOC(out_b, no);
    ALLOC(ob, no);
    ALLOC(ops, nops + 1);
    ALLOC(vb, nb);
    ALLOC(bo, nb * no);
    for (int i = 0; i < nops; i++) {
        op_b[i] = in_bdim[1 + i] != OLY_NOT_MAPPED;
        ops[1 + i] = in[1 + i];
        if (op_b[i]) TRY(oly__batch_move(ctx, in[1 + i], in_bdim[1 + i], 0, &ops[1 + i]));
    }
    bool idx_b = in_bdim[0] != OLY_NOT_MAPPED;
    if (!idx_b) {
        for (int b = 0; b < nb; b++) {
            TRY(oly__ctl_depends(eqn->sub[b], op_b, ob));
            for (int k = 0; k < no; k++) out_b[k] |= ob[k];
        }
        for (int b = 0; b < nb; b++) TRY(oly__ctl_vmap_sub(&t, eqn->sub[b], op_b, out_b, ctx->size, &vb[b]));
        ops[0] = in[0];
        TRY(oly__emit(ctx->b, eqn->prim, ops, eqn->n_in, eqn->params, vb, nb, out));
        for (int k = 0; k < no; k++) out_bdim[k] = out_b[k] ? 0 : OLY_NOT_MAPPED;
        goto done;
    }
    /* Batched index: every branch runs on every lane; select per lane. */
    for (int k = 0; k < no; k++) out_b[k] = true;
    for (int b = 0; b < nb; b++) {
        TRY(oly__ctl_vmap_sub(&t, eqn->sub[b], op_b, out_b, ctx->size, &vb[b]));
        TRY(oly__emit_inline(ctx->b, vb[b], ops + 1, bo + (size_t)b * no));
    }
    oly_atom idx;
    TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &idx));
    if (oly__atom_aval(&idx).dtype != OLY_BOOL) {
        oly_scalar lo = {.dtype = OLY_INT32, .v.i = 0}, hi = {.dtype = OLY_INT32, .v.i = nb - 1};
        TRY(oly__emit_bin(ctx->b, &oly__prim_max, idx, oly_atom_lit(lo), &idx));
        TRY(oly__emit_bin(ctx->b, &oly__prim_min, idx, oly_atom_lit(hi), &idx));
    }
    oly_atom *cases;
    ALLOC(cases, nb + 1);
    for (int k = 0; k < no; k++) {
        out_bdim[k] = 0;
        if (nb == 1) {
            out[k] = bo[k];
            continue;
        }
        oly_aval oa = oly__atom_aval(&bo[k]);
        oly_atom pred = idx;
        if (oa.rank > 1) {
            oly_ints shape = oly__ints(oa.rank, oa.dims), dims = oly__ints(1, (int64_t[]){0});
            TRY(oly__emit_broadcast_in_dim(ctx->b, idx, &shape, &dims, &pred));
        }
        cases[0] = pred;
        for (int b = 0; b < nb; b++) cases[1 + b] = bo[(size_t)b * no + k];
        TRY(oly__emit(ctx->b, &oly__prim_select_n, cases, nb + 1, NULL, NULL, 0, &out[k]));
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status cond_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    int nb = eqn->n_sub, nops = eqn->n_in - 1, no = eqn->n_out;
    TMP_BEGIN;
    bool *nz, *un, *nzo;
    oly_program **jb;
    oly_atom *ops, *outs;
    ALLOC(nz, nops);
    ALLOC(un, no);
    ALLOC(nzo, no);
    ALLOC(jb, nb);
    ALLOC(ops, 1 + 2 * nops);
    ALLOC(outs, 2 * no);
    for (int i = 0; i < nops; i++) nz[i] = tan_nz[1 + i] && oly__ctl_inexact(&eqn->sub[0]->in[i]->aval);
    for (int b = 0; b < nb; b++) {
        oly_program *j;
        TRY(oly__ctl_jvp_sub(&t, eqn->sub[b], nz, NULL, &j, nzo));
        for (int k = 0; k < no; k++) un[k] |= nzo[k];
    }
    int nt = 0;
    for (int k = 0; k < no; k++) nt += un[k];
    for (int b = 0; b < nb; b++) TRY(oly__ctl_jvp_sub(&t, eqn->sub[b], nz, un, &jb[b], nzo));
    int n = 0;
    ops[n++] = primal[0];
    for (int i = 0; i < nops; i++) ops[n++] = primal[1 + i];
    for (int i = 0; i < nops; i++)
        if (nz[i]) ops[n++] = tangent[1 + i];
    oly_params_cond pc = {.n_out = no + nt};
    TRY(oly__emit(ctx->b, eqn->prim, ops, n, &pc, jb, nb, outs));
    for (int k = 0, o = no; k < no; k++) {
        primal_out[k] = outs[k];
        out_nz[k] = un[k];
        if (un[k]) tangent_out[k] = outs[o++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status cond_pe(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                          const oly_atom *unknown_in, const bool *unknown, oly_atom *known_out,
                          oly_atom *unknown_out, bool *out_unknown)
{
    if (unknown[0])
        return oly__ctl_pe_all_unknown(ctx, eqn, known_in, unknown_in, unknown, unknown_out, out_unknown);
    int nb = eqn->n_sub, nops = eqn->n_in - 1, no = eqn->n_out;
    TMP_BEGIN;
    oly_program **K, **U;
    int *nres, *roff;
    bool *ou, *un;
    ALLOC(K, nb);
    ALLOC(U, nb);
    ALLOC(nres, nb);
    ALLOC(roff, nb + 1);
    ALLOC(ou, nb * no);
    ALLOC(un, no);
    for (int b = 0; b < nb; b++) {
        TRY(oly__partial_eval(eqn->sub[b], unknown + 1, &K[b], &U[b], &nres[b],
                              ou + (size_t)b * no));
        TRY(oly__ctl_keep(&t, K[b]));
        TRY(oly__ctl_keep(&t, U[b]));
        for (int k = 0; k < no; k++) un[k] |= ou[(size_t)b * no + k];
    }
    /* Residual slots: per branch, its residuals then its known outputs that
     * another branch has unknown (instantiated: passed through). */
    int nkn = 0, nun = 0, nR = 0;
    for (int k = 0; k < no; k++) *(un[k] ? &nun : &nkn) += 1;
    uint32_t ueff = 0;
    for (int b = 0; b < nb; b++) ueff |= U[b]->effects;
    bool any_unknown = nun > 0 || ueff;
    if (!any_unknown) /* every output known: nothing crosses over */
        for (int b = 0; b < nb; b++) nres[b] = 0;
    for (int b = 0; b < nb; b++) {
        roff[b] = nR;
        nR += nres[b];
        for (int k = 0; k < no; k++) nR += un[k] && !ou[(size_t)b * no + k];
    }
    roff[nb] = nR;
    oly_aval *Rav;
    ALLOC(Rav, nR);
    /* pos[b*no+k]: output k's position among K[b]'s known outputs (or U[b]'s) */
    int *pos;
    ALLOC(pos, nb * no);
    for (int b = 0; b < nb; b++) {
        const bool *o = ou + (size_t)b * no;
        int nk_b = 0, nu_b = 0, r = roff[b] + nres[b];
        for (int k = 0; k < no; k++) pos[(size_t)b * no + k] = o[k] ? nu_b++ : nk_b++;
        for (int j = 0; j < nres[b]; j++) Rav[roff[b] + j] = oly__ctl_out_aval(K[b], nk_b + j);
        for (int k = 0; k < no; k++)
            if (un[k] && !o[k]) Rav[r++] = oly__ctl_out_aval(eqn->sub[b], k);
    }
    /* Known branches: known ops -> (known outputs, all residual slots). */
    int nki = 0;
    for (int i = 0; i < nops; i++) nki += !unknown[1 + i];
    oly_program **K2, **U2;
    ALLOC(K2, nb);
    ALLOC(U2, nb);
    ctl_src *os;
    oly_aval *av;
    int *pin;
    ALLOC(os, nkn + nR + no);
    ALLOC(av, nR + nops);
    ALLOC(pin, nR + nops);
    for (int b = 0; b < nb; b++) {
        const bool *o = ou + (size_t)b * no;
        const int *ps_ = pos + (size_t)b * no;
        int m = 0;
        for (int k = 0; k < no; k++)
            if (!un[k]) os[m++] = oly__ctl_from_out(ps_[k]);
        for (int c = 0; c < nb; c++) {
            if (c != b) {
                for (int r = roff[c]; r < roff[c + 1]; r++) os[m++] = oly__ctl_zeros(Rav[r]);
                continue;
            }
            int nk_b = 0;
            for (int k = 0; k < no; k++) nk_b += !o[k];
            for (int j = 0; j < nres[b]; j++) os[m++] = oly__ctl_from_out(nk_b + j);
            for (int k = 0; k < no; k++)
                if (un[k] && !o[k]) os[m++] = oly__ctl_from_out(ps_[k]);
        }
        oly__ctl_in_avals(K[b], av);
        for (int i = 0; i < nki; i++) pin[i] = i;
        TRY(oly__ctl_wrap(K[b], nki, av, pin, m, os, &K2[b]));
        TRY(oly__ctl_keep(&t, K2[b]));
        TRY(oly__ctl_dce_kept(&t, &K2[b]));
    }
    /* Unknown branches: (index is separate) (R..., unknown ops) -> unknown outputs. */
    int nui = nops - nki;
    for (int b = 0; b < nb && any_unknown; b++) {
        const bool *o = ou + (size_t)b * no;
        const int *ps_ = pos + (size_t)b * no;
        for (int r = 0; r < nR; r++) av[r] = Rav[r];
        for (int i = 0; i < nui; i++) av[nR + i] = U[b]->in[nres[b] + i]->aval;
        for (int j = 0; j < nres[b]; j++) pin[j] = roff[b] + j;
        for (int i = 0; i < nui; i++) pin[nres[b] + i] = nR + i;
        int m = 0, inst = roff[b] + nres[b];
        for (int k = 0; k < no; k++) {
            if (!un[k]) continue;
            os[m++] = o[k] ? oly__ctl_from_out(ps_[k]) : oly__ctl_from_in(inst++);
        }
        TRY(oly__ctl_wrap(U[b], nR + nui, av, pin, m, os, &U2[b]));
        TRY(oly__ctl_keep(&t, U2[b]));
        TRY(oly__ctl_dce_kept(&t, &U2[b]));
    }
    oly_atom *kin, *kout, *uin, *uout;
    ALLOC(kin, 1 + nki);
    ALLOC(kout, nkn + nR);
    ALLOC(uin, 1 + nR + nui);
    ALLOC(uout, nun);
    int m = 0;
    kin[m++] = known_in[0];
    for (int i = 0; i < nops; i++)
        if (!unknown[1 + i]) kin[m++] = known_in[1 + i];
    uint32_t keff = 0;
    for (int b = 0; b < nb; b++) keff |= K2[b]->effects;
    if (nkn + nR > 0 || keff) {
        oly_params_cond kp = {.n_out = nkn + nR};
        TRY(oly__emit(ctx->known, eqn->prim, kin, m, &kp, K2, nb, kout));
    }
    if (any_unknown) {
        TRY(oly__pe_residual(ctx, known_in[0], &uin[0]));
        for (int r = 0; r < nR; r++) TRY(oly__pe_residual(ctx, kout[nkn + r], &uin[1 + r]));
        m = 1 + nR;
        for (int i = 0; i < nops; i++)
            if (unknown[1 + i]) uin[m++] = unknown_in[1 + i];
        oly_params_cond up = {.n_out = nun};
        TRY(oly__emit(ctx->unknown, eqn->prim, uin, m, &up, U2, nb, uout));
    }
    for (int k = 0, a = 0, c = 0; k < no; k++) {
        out_unknown[k] = un[k];
        if (un[k])
            unknown_out[k] = uout[c++];
        else
            known_out[k] = kout[a++];
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

static oly_status cond_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    if (linear[0])
        return oly__error(OLY_ERR_INTERNAL, "cond transpose: the index cannot be linear");
    int nb = eqn->n_sub, nops = eqn->n_in - 1, no = eqn->n_out;
    TMP_BEGIN;
    int nres = 0, nlin = 0;
    for (int i = 0; i < nops; i++) *(linear[1 + i] ? &nlin : &nres) += 1;
    oly_aval *av;
    int *pin;
    ctl_src *os;
    oly_program **T;
    oly_atom *ops, *outs;
    ALLOC(av, nops);
    ALLOC(pin, nops);
    ALLOC(os, no);
    ALLOC(T, nb);
    ALLOC(ops, 1 + nres + no);
    ALLOC(outs, nlin);
    for (int i = 0, r = 0, l = nres; i < nops; i++) {
        pin[i] = linear[1 + i] ? l++ : r++;
        av[pin[i]] = eqn->sub[0]->in[i]->aval;
    }
    for (int k = 0; k < no; k++) os[k] = oly__ctl_from_out(k);
    for (int b = 0; b < nb; b++) {
        oly_program *L;
        TRY(oly__ctl_wrap(eqn->sub[b], nops, av, pin, no, os, &L));
        TRY(oly__ctl_keep(&t, L));
        TRY(oly_program_transpose(L, nres, &T[b]));
        TRY(oly__ctl_keep(&t, T[b]));
    }
    int m = 0;
    ops[m++] = in[0];
    for (int i = 0; i < nops; i++)
        if (!linear[1 + i]) ops[m++] = in[1 + i];
    for (int k = 0; k < no; k++) {
        if (ct_nz[k])
            ops[m++] = ct[k];
        else
            TRY(oly__emit_full(ctx->b, &eqn->out[k]->aval, 0.0, &ops[m++]));
    }
    oly_params_cond pc = {.n_out = nlin};
    TRY(oly__emit(ctx->b, eqn->prim, ops, m, &pc, T, nb, outs));
    for (int i = 0, l = 0; i < nops; i++) {
        if (!linear[1 + i]) continue;
        ct_in[1 + i] = outs[l++];
        ct_in_nz[1 + i] = true;
    }
done:
    oly__ctl_tfree(&t);
    return s;
}

const oly_prim oly__prim_cond = {
    .name = "cond",
    .n_in = -1,
    .num_outputs = cond_num_outputs,
    .params_size = sizeof(oly_params_cond),
    .fields = cond_fields,
    .n_fields = OLY_ARRAY_LEN(cond_fields),
    .shape = cond_shape,
    .batch = cond_batch,
    .jvp = cond_jvp,
    .transpose = cond_transpose,
    .partial_eval = cond_pe,
};

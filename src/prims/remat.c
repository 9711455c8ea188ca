/* remat.c — `remat` (olympus.checkpoint): a call of the nested program
 * eqn->sub[0] (params oly_params_call, as pjit) that differentiation keeps
 * whole, so the backward pass recomputes it instead of saving its
 * intermediates. Callbacks inside therefore run again in the backward pass
 * (CALLBACK_SEMANTICS §1.4: "a policy that does not save the callback makes it
 * run twice"). Only debug effects may be recomputed: partial evaluation of a
 * remat holding an io callback is an error (§1.3).
 *   batch          vmap the program, emit remat of it (outputs at axis 0).
 *   jvp            jvp the program, emit remat of it (not inline: partial
 *                  evaluation must still see one equation).
 *   partial_eval   known side: the program's known part, inline (the forward
 *                  pass runs it once); unknown side: a remat of the whole
 *                  program on (known inputs as residuals, unknown inputs), so
 *                  the linear program recomputes the primal part.
 *   transpose      transpose the program with its non-linear inputs as
 *                  residuals and emit it inline: its forward (primal)
 *                  equations run in the backward pass. */
#include "trans/trans.h"

static const oly_param_field remat_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_call, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_call, n_out),
     .hidden = true},
};

/* Emit remat(prog) on in into b; out gets prog's outputs. */
static oly_status emit_remat(oly_builder *b, const oly_eqn *eqn, oly_program *prog,
                             const oly_atom *in, oly_atom *out)
{
    oly_params_call np = *(const oly_params_call *)eqn->params;
    np.n_out = prog->n_out;
    return oly__emit(b, eqn->prim, in, prog->n_in, &np, &prog, 1, out);
}

/* dep[j]: output j of p depends on an input with in_bdim != OLY_NOT_MAPPED. */
static oly_status batched_outputs(const oly_program *p, const int *in_bdim, bool *dep)
{
    bool *v = oly__calloc((size_t)p->n_vars + 1, sizeof *v);
    if (!v) return OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in; i++) v[p->in[i]->id] = in_bdim[i] != OLY_NOT_MAPPED;
    for (int k = 0; k < p->n_eqn; k++) {
        const oly_eqn *e = &p->eqn[k];
        bool any = false;
        for (int i = 0; i < e->n_in; i++)
            any |= e->in[i].kind == OLY_ATOM_VAR && v[e->in[i].var->id];
        for (int j = 0; j < e->n_out; j++) v[e->out[j]->id] = any;
    }
    for (int j = 0; j < p->n_out; j++)
        dep[j] = p->out[j].kind == OLY_ATOM_VAR && v[p->out[j].var->id];
    free(v);
    return OLY_OK;
}

static oly_status remat_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                              const int *in_bdim, oly_atom *out, int *out_bdim)
{
    int m = eqn->n_out;
    int *out_axes = oly__calloc((size_t)m + 1, sizeof *out_axes);
    bool *dep = oly__calloc((size_t)m + 1, sizeof *dep);
    oly_program *sub = NULL;
    oly_status st = out_axes && dep ? batched_outputs(eqn->sub[0], in_bdim, dep) : OLY_ERR_NOMEM;
    for (int j = 0; st == OLY_OK && j < m; j++) out_axes[j] = dep[j] ? 0 : OLY_NOT_MAPPED;
    if (st == OLY_OK) st = oly_program_vmap(eqn->sub[0], in_bdim, ctx->size, out_axes, &sub);
    if (st == OLY_OK) st = emit_remat(ctx->b, eqn, sub, in, out);
    for (int j = 0; st == OLY_OK && j < m; j++) out_bdim[j] = out_axes[j];
    oly_program_release(sub);
    free(out_axes);
    free(dep);
    return st;
}

static oly_status remat_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz)
{
    return oly__call_jvp_with(emit_remat, ctx, eqn, primal, tangent, tan_nz, primal_out,
                              tangent_out, out_nz);
}

static oly_status remat_pe(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                           const oly_atom *unknown_in, const bool *unknown, oly_atom *known_out,
                           oly_atom *unknown_out, bool *out_unknown)
{
    /* Only debug effects and host_callback taps may be recomputed (as in the
     * reference: a tap under checkpoint runs again in the backward pass); an
     * io callback would run again too. */
    uint32_t not_remat = eqn->effects & ~(uint32_t)(OLY_EFFECT_DEBUG | OLY_EFFECT_ORDERED_DEBUG |
                                                    OLY_EFFECT_OUTFEED);
    if (not_remat)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "Effects not supported in partial-eval of `checkpoint`/`remat` "
                          "(the checkpointed function holds %s; only debug callbacks may run "
                          "again in the backward pass)",
                          not_remat & (OLY_EFFECT_IO | OLY_EFFECT_ORDERED_IO) ? "an io_callback"
                                                                               : "an effect");
    oly_program *sub = eqn->sub[0], *kp = NULL, *up = NULL;
    int n = eqn->n_in, m = eqn->n_out, n_res = 0;
    bool *ounk = oly__calloc((size_t)m + 1, sizeof *ounk);
    oly_atom *kin = oly__calloc((size_t)n + 1, sizeof *kin);
    oly_atom *uin = oly__calloc((size_t)n + 1, sizeof *uin);
    oly_atom *kres = NULL, *ures = oly__calloc((size_t)m + 1, sizeof *ures);
    oly_status st = ounk && kin && uin && ures ? OLY_OK : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = oly__partial_eval(sub, unknown, &kp, &up, &n_res, ounk);
    if (st != OLY_OK) goto done;
    /* known side: the known part, inline */
    int nk = 0;
    for (int i = 0; i < n; i++)
        if (!unknown[i]) kin[nk++] = known_in[i];
    kres = oly__calloc((size_t)kp->n_out + 1, sizeof *kres);
    if (!kres) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    st = oly__emit_inline(ctx->known, kp, kin, kres);
    if (st != OLY_OK) goto done;
    /* unknown side: the whole program again, known inputs as residuals */
    for (int i = 0; i < n && st == OLY_OK; i++) {
        if (unknown[i])
            uin[i] = unknown_in[i];
        else
            st = oly__pe_residual(ctx, known_in[i], &uin[i]);
    }
    if (st == OLY_OK) st = emit_remat(ctx->unknown, eqn, sub, uin, ures);
    if (st != OLY_OK) goto done;
    int k = 0;
    for (int j = 0; j < m; j++) {
        out_unknown[j] = ounk[j];
        if (ounk[j])
            unknown_out[j] = ures[j];
        else
            known_out[j] = kres[k++];
    }
done:
    oly_program_release(kp);
    oly_program_release(up);
    free(ounk);
    free(kin);
    free(uin);
    free(kres);
    free(ures);
    return st;
}

const oly_prim oly__prim_remat = {
    .name = "remat",
    .n_in = -1,
    .num_outputs = oly__call_num_outputs,
    .params_size = sizeof(oly_params_call),
    .fields = remat_fields,
    .n_fields = OLY_ARRAY_LEN(remat_fields),
    .shape = oly__call_shape,
    .batch = remat_batch,
    .jvp = remat_jvp,
    .transpose = oly__call_transpose, /* as pjit: the whole sub-program */
    .partial_eval = remat_pe,
};

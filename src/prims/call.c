/* call.c — `pjit`: an equation that runs the nested program eqn->sub[0] on
 * its inputs. Its effects are the nested program's (oly__eqn_effects unites
 * them); its output count comes from the hidden param n_out, which the binder
 * sets to sub[0]'s output count (the shape rule checks they agree).
 * Rules: batch emits a pjit of the batched program (outputs at axis 0); jvp
 * and transpose transform the program and emit it inline, so partial
 * evaluation never has to split a nested call. */
#include "trans/trans.h"

static const oly_param_field call_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_call, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_call, n_out),
     .hidden = true},
};

int oly__call_num_outputs(const void *params, int n_in)
{
    const oly_params_call *pc = params;
    if (!pc || pc->n_out < 0 || pc->n_out > 1 << 20) return -1;
    return (int)pc->n_out;
}

oly_status oly__call_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    if (ctx->n_sub != 1 || !ctx->sub || !ctx->sub[0])
        return oly__error(OLY_ERR_INVALID, "%s: expected 1 nested program, got %d",
                          ctx->prim->name, ctx->n_sub);
    const oly_program *sub = ctx->sub[0];
    if (ctx->n_in != sub->n_in)
        return oly__error(OLY_ERR_INVALID, "%s: nested program takes %d inputs, got %d",
                          ctx->prim->name, sub->n_in, ctx->n_in);
    if (ctx->n_out != sub->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "%s: params n_out is %d but the nested program has %d outputs",
                          ctx->prim->name, ctx->n_out, sub->n_out);
    for (int i = 0; i < ctx->n_in; i++) {
        const oly_aval *want = &sub->in[i]->aval;
        if (!oly_aval_equal(want, &ctx->in[i])) {
            char w[256], g[256];
            oly_aval_format(w, sizeof w, want);
            oly_aval_format(g, sizeof g, &ctx->in[i]);
            return oly__error(want->dtype != ctx->in[i].dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                              "%s: input %d: nested program expects %s, got %s",
                              ctx->prim->name, i, w, g);
        }
    }
    for (int k = 0; k < sub->n_out; k++) out[k] = oly__atom_aval(&sub->out[k]);
    return OLY_OK;
}

static oly_status call_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_call *pc = eqn->params;
    int *out_axes = oly__calloc((size_t)eqn->n_out + 1, sizeof *out_axes);
    if (!out_axes) return OLY_ERR_NOMEM;
    oly_program *sub = NULL;
    oly_status st = oly_program_vmap(eqn->sub[0], in_bdim, ctx->size, out_axes, &sub);
    free(out_axes);
    if (st != OLY_OK) return st;
    oly_params_call np = *pc;
    st = oly__emit(ctx->b, eqn->prim, in, eqn->n_in, &np, &sub, 1, out);
    oly_program_release(sub);
    for (int j = 0; st == OLY_OK && j < eqn->n_out; j++) out_bdim[j] = 0;
    return st;
}

oly_status oly__call_jvp_with(oly_call_emit_fn emit, oly_jvp_ctx *ctx, const oly_eqn *eqn,
                              const oly_atom *primal, const oly_atom *tangent,
                              const bool *tan_nz, oly_atom *primal_out, oly_atom *tangent_out,
                              bool *out_nz)
{
    int n = eqn->n_in, m = eqn->n_out;
    oly_program *j = NULL;
    bool *nz_out = oly__calloc((size_t)m + 1, sizeof *nz_out);
    oly_atom *args = oly__calloc(2 * (size_t)n + 1, sizeof *args);
    oly_atom *res = oly__calloc(2 * (size_t)m + 1, sizeof *res);
    oly_status st = nz_out && args && res ? OLY_OK : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = oly_program_jvp(eqn->sub[0], tan_nz, &j, nz_out);
    if (st != OLY_OK) goto done;
    int k = n;
    for (int i = 0; i < n; i++) args[i] = primal[i];
    for (int i = 0; i < n; i++)
        if (tan_nz[i]) args[k++] = tangent[i];
    int n_tout = 0;
    for (int o = 0; o < m; o++) n_tout += nz_out[o];
    if (j->n_in != k || j->n_out != m + n_tout) {
        st = oly__error(OLY_ERR_INTERNAL, "%s jvp: program has %d inputs and %d outputs, "
                        "expected %d and %d", eqn->prim->name, j->n_in, j->n_out, k, m + n_tout);
        goto done;
    }
    st = emit(ctx->b, eqn, j, args, res);
    if (st != OLY_OK) goto done;
    k = m;
    for (int o = 0; o < m; o++) {
        primal_out[o] = res[o];
        out_nz[o] = nz_out[o];
        if (nz_out[o]) tangent_out[o] = res[k++];
    }
done:
    oly_program_release(j);
    free(nz_out);
    free(args);
    free(res);
    return st;
}

static oly_status emit_inline(oly_builder *b, const oly_eqn *eqn, oly_program *prog,
                              const oly_atom *in, oly_atom *out)
{
    (void)eqn;
    return oly__emit_inline(b, prog, in, out);
}

/* jvp: the sub-program's JVP, emitted inline (partial evaluation then never
 * has to split a nested call). */
static oly_status call_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    return oly__call_jvp_with(emit_inline, ctx, eqn, primal, tangent, tan_nz, primal_out,
                              tangent_out, out_nz);
}

/* sub[0] with its inputs reordered: non-linear ones (residuals) first. */
static oly_status residuals_first(const oly_eqn *eqn, const bool *linear, oly_program **out)
{
    oly_program *sub = eqn->sub[0];
    int n = eqn->n_in;
    oly_builder *b = NULL;
    oly_atom *in = oly__calloc((size_t)n + 1, sizeof *in);
    oly_atom *res = oly__calloc((size_t)sub->n_out + 1, sizeof *res);
    oly_status st = in && res ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    for (int pass = 0; pass < 2 && st == OLY_OK; pass++)
        for (int i = 0; i < n && st == OLY_OK; i++) {
            if (linear[i] != (pass == 1)) continue;
            oly_var *v;
            st = oly_builder_add_input(b, &sub->in[i]->aval, &v);
            if (st == OLY_OK) in[i] = oly_atom_var(v);
        }
    if (st == OLY_OK) st = oly__emit_inline(b, sub, in, res);
    if (st == OLY_OK) st = oly_builder_finish(b, res, sub->n_out, out);
    oly_builder_free(b);
    free(in);
    free(res);
    return st;
}

/* Shared by pjit and remat (declared in internal.h): transposes sub[0] as a whole. */
oly_status oly__call_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const bool *linear, const oly_atom *ct, const bool *ct_nz,
                               oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__call_transpose_with(emit_inline, ctx, eqn, in, linear, ct, ct_nz, ct_in, ct_in_nz);
}

oly_status oly__call_transpose_with(oly_call_emit_fn emit, oly_transpose_ctx *ctx,
                                    const oly_eqn *eqn, const oly_atom *in, const bool *linear,
                                    const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                    bool *ct_in_nz)
{
    int n = eqn->n_in, m = eqn->n_out, n_res = 0;
    for (int i = 0; i < n; i++) n_res += !linear[i];
    oly_program *lin = NULL, *t = NULL;
    oly_atom *args = oly__calloc((size_t)n_res + (size_t)m + 1, sizeof *args);
    oly_atom *res = oly__calloc((size_t)(n - n_res) + 1, sizeof *res);
    oly_status st = args && res ? residuals_first(eqn, linear, &lin) : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = oly_program_transpose(lin, n_res, &t);
    if (st != OLY_OK) goto done;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!linear[i]) args[k++] = in[i];
    for (int o = 0; o < m && st == OLY_OK; o++) {
        if (ct_nz[o]) {
            args[k++] = ct[o];
        } else {
            oly_aval a = eqn->out[o]->aval;
            st = oly__emit_full(ctx->b, &a, 0.0, &args[k++]);
        }
    }
    if (st == OLY_OK) st = emit(ctx->b, eqn, t, args, res);
    if (st != OLY_OK) goto done;
    k = 0;
    for (int i = 0; i < n; i++) {
        ct_in_nz[i] = linear[i];
        if (linear[i]) ct_in[i] = res[k++];
    }
done:
    oly_program_release(lin);
    oly_program_release(t);
    free(args);
    free(res);
    return st;
}

const oly_prim oly__prim_pjit = {
    .name = "pjit",
    .n_in = -1,
    .num_outputs = oly__call_num_outputs,
    .params_size = sizeof(oly_params_call),
    .fields = call_fields,
    .n_fields = OLY_ARRAY_LEN(call_fields),
    .shape = oly__call_shape,
    .batch = call_batch,
    .jvp = call_jvp,
    .transpose = oly__call_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL /* jvp and transpose inline it */,
};

/* call.c — `pjit`: an equation that runs the nested program eqn->sub[0] on
 * its inputs. Its effects are the nested program's (oly__eqn_effects unites
 * them); its output count comes from the hidden param n_out, which the binder
 * sets to sub[0]'s output count (the shape rule checks they agree). */
#include "internal.h"

static const oly_param_field call_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_call, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_call, n_out),
     .hidden = true},
};

static int call_num_outputs(const void *params, int n_in)
{
    const oly_params_call *pc = params;
    if (!pc || pc->n_out < 0 || pc->n_out > 1 << 20) return -1;
    return (int)pc->n_out;
}

static oly_status call_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    if (ctx->n_sub != 1 || !ctx->sub || !ctx->sub[0])
        return oly__error(OLY_ERR_INVALID, "pjit: expected 1 nested program, got %d",
                          ctx->n_sub);
    const oly_program *sub = ctx->sub[0];
    if (ctx->n_in != sub->n_in)
        return oly__error(OLY_ERR_INVALID, "pjit: nested program takes %d inputs, got %d",
                          sub->n_in, ctx->n_in);
    if (ctx->n_out != sub->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "pjit: params n_out is %d but the nested program has %d outputs",
                          ctx->n_out, sub->n_out);
    for (int i = 0; i < ctx->n_in; i++) {
        const oly_aval *want = &sub->in[i]->aval;
        if (!oly_aval_equal(want, &ctx->in[i])) {
            char w[256], g[256];
            oly_aval_format(w, sizeof w, want);
            oly_aval_format(g, sizeof g, &ctx->in[i]);
            return oly__error(want->dtype != ctx->in[i].dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                              "pjit: input %d: nested program expects %s, got %s", i, w, g);
        }
    }
    for (int k = 0; k < sub->n_out; k++) out[k] = oly__atom_aval(&sub->out[k]);
    return OLY_OK;
}

static oly_status call_kernel(const oly_kernel_ctx *ctx)
{
    return oly__exec_run_raw(ctx->run, ctx->eqn->sub[0], oly__run_device(ctx->run), ctx->in,
                             ctx->out);
}

const oly_prim oly__prim_pjit = {
    .name = "pjit",
    .n_in = -1,
    .num_outputs = call_num_outputs,
    .params_size = sizeof(oly_params_call),
    .fields = call_fields,
    .n_fields = OLY_ARRAY_LEN(call_fields),
    .shape = call_shape,
    .kernel = call_kernel,
};

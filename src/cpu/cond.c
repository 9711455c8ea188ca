/* cond.c — the kernel of cond (lax.cond / lax.switch): it clamps the index
 * and runs the chosen branch on the same run through the executor's ops
 * (ctx->exec). */
#include "cpu/cpu.h"

static oly_status cond_kernel(const oly_kernel_ctx *ctx)
{
    oly_scalar ix = oly_scalar_load(ctx->in_aval[0].dtype, ctx->in[0]);
    int64_t n = ctx->eqn->n_sub, i = ix.v.i;
    if (ctx->in_aval[0].dtype == OLY_BOOL) i = ix.v.i != 0;
    i = i < 0 ? 0 : i >= n ? n - 1 : i; /* lax.switch clamps */
    return ctx->exec->run(ctx->run, ctx->eqn->sub[i], ctx->device, ctx->in + 1,
                             ctx->out);
}

const oly_cpu_kernel oly__cpu_cond = {.fn = cond_kernel};

/* call.c — kernels of the rows that run one nested program as a whole: pjit,
 * remat and the custom differentiation calls run eqn->sub[0] on the same run
 * through the executor's ops (ctx->exec); custom_lin has no CPU meaning (it
 * only exists between jvp and transpose) and fails with JAX's message. */
#include "cpu/cpu.h"

static oly_status call_kernel(const oly_kernel_ctx *ctx)
{
    return ctx->exec->run(ctx->run, ctx->eqn->sub[0], ctx->device, ctx->in, ctx->out);
}

static oly_status clin_kernel(const oly_kernel_ctx *ctx)
{
    return oly__error(OLY_ERR_TYPE,
                      "can't apply forward-mode autodiff (jvp) to a custom_vjp function.");
}

const oly_cpu_kernel oly__cpu_pjit = {.fn = call_kernel};
const oly_cpu_kernel oly__cpu_remat = {.fn = call_kernel};
const oly_cpu_kernel oly__cpu_custom_jvp_call = {.fn = call_kernel};
const oly_cpu_kernel oly__cpu_custom_vjp_call = {.fn = call_kernel};
const oly_cpu_kernel oly__cpu_custom_lin = {.fn = clin_kernel};

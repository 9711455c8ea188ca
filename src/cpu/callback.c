/* callback.c — the kernel of pure_callback, io_callback and debug_callback:
 * it fills an oly_callback_frame and calls the host function. Their inputs
 * arrive as arrays (wants_arrays) whose contents never change, so a host
 * function may keep them. A failure returns the host function's status with
 * its message and payload untouched. On the hot path of every callback: no
 * lookups, no allocation. */
#include "cpu/cpu.h"

/* The frame is built from the step's context; kind is the primitive's name (a
 * constant per kernel) and the device from the context. */
static inline oly_status callback_call(const oly_kernel_ctx *ctx, const char *kind)
{
    const oly_params_callback *pc = ctx->params;
    oly_host_fn *fn = pc->callback;
    oly_callback_frame frame = {
        .n_args = ctx->n_in,
        .args = ctx->in,
        .arg_avals = ctx->in_aval,
        .arg_arrays = ctx->in_array,
        .n_results = ctx->n_out,
        .results = ctx->out,
        .result_avals = ctx->out_aval,
        .device = ctx->device,
        .kind = kind,
    };
    oly_status st = fn->call(fn->c.user, &frame);
    if (st == OLY_OK) return OLY_OK;
    /* Keep the host function's message and payload; only an out-of-range
     * status is mapped, and a failure that wrote no message gets one. */
    oly_status out = (unsigned)st < OLY_STATUS_COUNT ? st : OLY_ERR_CALLBACK;
    if (!*oly_last_error()) /* the outermost run started with no message */
        return oly__error(out, "%s: host function %s failed with %s (status %d) and no message",
                          kind, fn->c.name, oly_status_name(st), (int)st);
    return out;
}

static oly_status pure_kernel(const oly_kernel_ctx *ctx)
{
    return callback_call(ctx, "pure_callback");
}

static oly_status io_kernel(const oly_kernel_ctx *ctx) { return callback_call(ctx, "io_callback"); }

static oly_status debug_kernel(const oly_kernel_ctx *ctx)
{
    return callback_call(ctx, "debug_callback");
}

/* wants_arrays: the host function may keep its arguments, so the executor
 * passes them as arrays it never writes again. */
const oly_cpu_kernel oly__cpu_pure_callback = {.fn = pure_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_io_callback = {.fn = io_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_debug_callback = {.fn = debug_kernel, .wants_arrays = true};

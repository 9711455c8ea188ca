/* callback.c — the kernel of pure_callback, io_callback, debug_callback and
 * buffer_callback: it fills an oly_callback_frame and calls the host function.
 * The inputs of the first three arrive as arrays (wants_arrays) whose contents
 * never change, so a host function may keep them; buffer_callback's are
 * borrowed for the call and its results are written in place. A failure
 * returns the host function's status with its message and payload untouched.
 * On the hot path of every callback: no lookups, no allocation. */
#include "cpu/cpu.h"

/* The frame is built from the step's context (args: the argument pointers,
 * ctx->in but for aliases); kind is the primitive's name (a constant per
 * kernel) and the device from the context. */
static inline oly_status callback_call_args(const oly_kernel_ctx *ctx, const char *kind,
                                            oly_host_fn *fn, const char *transforms,
                                            const void *const *args)
{
    oly_callback_frame frame = {
        .n_args = ctx->n_in,
        .args = args,
        .arg_avals = ctx->in_aval,
        .arg_arrays = ctx->in_array,
        .n_results = ctx->n_out,
        .results = ctx->out,
        .result_avals = ctx->out_aval,
        .device = ctx->device,
        .kind = kind,
        .transforms = transforms,
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

static inline oly_status callback_call(const oly_kernel_ctx *ctx, const char *kind,
                                       oly_host_fn *fn, const char *transforms)
{
    return callback_call_args(ctx, kind, fn, transforms, ctx->in);
}

#define CALLBACK(ctx) (((const oly_params_callback *)(ctx)->params)->callback)

static oly_status pure_kernel(const oly_kernel_ctx *ctx)
{
    return callback_call(ctx, "pure_callback", CALLBACK(ctx), NULL);
}

static oly_status io_kernel(const oly_kernel_ctx *ctx) { return callback_call(ctx, "io_callback", CALLBACK(ctx), NULL); }

static oly_status debug_kernel(const oly_kernel_ctx *ctx)
{
    return callback_call(ctx, "debug_callback", CALLBACK(ctx), NULL);
}

/* buffer_callback: the host function writes the results in place. An
 * aliased output holds its input when the call starts: the plan put it in the
 * input's buffer (in == out), or it is copied here; either way the host
 * function sees the input at the output's address, as one buffer. */
static oly_status buffer_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_callback *pc = ctx->params;
    if (pc->n_aliases == 0) return callback_call(ctx, "buffer_callback", pc->callback, NULL);
    enum { SMALL = 16 };
    const void *small[SMALL];
    const void **args = ctx->n_in <= SMALL ? small : oly__malloc((size_t)ctx->n_in * sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    memcpy(args, ctx->in, (size_t)ctx->n_in * sizeof *args);
    for (int k = 0; k < pc->n_aliases; k++) {
        int i = pc->aliases[k].input, o = pc->aliases[k].output;
        size_t nbytes = oly_aval_nbytes(&ctx->in_aval[i]);
        if (ctx->out[o] != ctx->in[i] && nbytes) memcpy(ctx->out[o], ctx->in[i], nbytes);
        args[i] = ctx->out[o];
    }
    oly_status st = callback_call_args(ctx, "buffer_callback", pc->callback, NULL, args);
    if (args != small) free(args);
    return st;
}

/* The input output `out` aliases, or -1. */
static int buffer_alias_input(const void *params, int out)
{
    const oly_params_callback *pc = params;
    for (int k = 0; k < pc->n_aliases; k++)
        if (pc->aliases[k].output == out) return pc->aliases[k].input;
    return -1;
}

/* id_tap: the arrays go to the device's outfeed (retained, not copied) and the
 * outputs are the inputs; call: the host function runs here, like io_callback. */
static oly_status outside_call_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_outside_call *pc = ctx->params;
    if (!pc->identity) return callback_call(ctx, "outside_call", pc->callback, pc->transforms);
    OLY_TRY(oly_outfeed_send(ctx->device, pc->callback, pc->transforms, ctx->in_array, ctx->n_in));
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->out[i] != ctx->in[i]) memcpy(ctx->out[i], ctx->in[i], oly_aval_nbytes(&ctx->in_aval[i]));
    return OLY_OK;
}

/* wants_arrays: the host function may keep its arguments, so the executor
 * passes them as arrays it never writes again. */
const oly_cpu_kernel oly__cpu_pure_callback = {.fn = pure_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_io_callback = {.fn = io_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_debug_callback = {.fn = debug_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_outside_call = {.fn = outside_call_kernel, .wants_arrays = true};
/* No wants_arrays: a buffer_callback's arguments are borrowed for the call
 * (the extension's Buffers stop working when it returns), so they may live in
 * scratch and an aliased output may take its input's place there. */
const oly_cpu_kernel oly__cpu_buffer_callback = {.fn = buffer_kernel,
                                                 .alias_input = buffer_alias_input};

/* callback.c — the host-function primitives: pure_callback (no effect, so
 * DCE may drop it), io_callback (IO or ordered IO) and debug_callback (debug
 * or ordered debug, no results). They share one kernel: it fills an
 * oly_callback_frame and calls the host function. Their inputs arrive as
 * arrays (wants_arrays) whose contents never change, so a host function may
 * keep them. A failure returns the host function's status with its message
 * and payload untouched. */
#include "internal.h"

static const char *const vmap_names[] = {
    "none", "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
    "legacy_vectorized", NULL,
};

#define F_CALLBACK                                                                        \
    {.name = "callback", .kind = OLY_FIELD_HOST_FN,                                       \
     .offset = offsetof(oly_params_callback, callback)}
#define F_RESULTS                                                                         \
    {.name = "result_avals", .kind = OLY_FIELD_AVALS,                                     \
     .offset = offsetof(oly_params_callback, result_avals),                               \
     .count_offset = offsetof(oly_params_callback, n_results)}
#define F_ORDERED                                                                         \
    {.name = "ordered", .kind = OLY_FIELD_BOOL, .offset = offsetof(oly_params_callback, ordered)}

static const oly_param_field pure_fields[] = {
    F_CALLBACK,
    F_RESULTS,
    {.name = "vmap_method", .kind = OLY_FIELD_ENUM,
     .offset = offsetof(oly_params_callback, vmap_method), .enum_names = vmap_names},
};
static const oly_param_field io_fields[] = {F_CALLBACK, F_RESULTS, F_ORDERED};
static const oly_param_field debug_fields[] = {F_CALLBACK, F_ORDERED};

static int results_num_outputs(const void *params, int n_in)
{
    const oly_params_callback *pc = params;
    if (!pc || pc->n_results < 0) return -1;
    return pc->n_results;
}

static int debug_num_outputs(const void *params, int n_in) { return 0; }

static oly_status callback_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_callback *pc = ctx->params;
    const char *name = ctx->prim->name;
    if (!pc || !pc->callback)
        return oly__error(OLY_ERR_INVALID, "%s: params.callback is NULL", name);
    if (pc->vmap_method < 0 || pc->vmap_method >= OLY_VMAP_METHOD_COUNT)
        return oly__error(OLY_ERR_INVALID, "%s: vmap_method %d is not an oly_vmap_method", name,
                          pc->vmap_method);
    if (ctx->n_out == 0) return OLY_OK;
    if (pc->n_results != ctx->n_out || !pc->result_avals)
        return oly__error(OLY_ERR_INVALID, "%s: %d result avals declared, %d outputs", name,
                          pc->result_avals ? pc->n_results : 0, ctx->n_out);
    for (int k = 0; k < ctx->n_out; k++) {
        const oly_aval *a = &pc->result_avals[k];
        if ((unsigned)a->dtype >= OLY_DTYPE_COUNT || a->rank < 0 || a->rank > OLY_MAX_RANK)
            return oly__error(OLY_ERR_INVALID, "%s: result %d: invalid aval (dtype %d, rank %d)",
                              name, k, (int)a->dtype, a->rank);
        for (int d = 0; d < a->rank; d++)
            if (a->dims[d] < 0)
                return oly__error(OLY_ERR_SHAPE, "%s: result %d: negative dimension %lld", name,
                                  k, (long long)a->dims[d]);
        out[k] = *a;
        out[k].weak = false;
    }
    return OLY_OK;
}

static uint32_t io_effects(const void *params)
{
    const oly_params_callback *pc = params;
    return pc && pc->ordered ? OLY_EFFECT_ORDERED_IO : OLY_EFFECT_IO;
}

static uint32_t debug_effects(const void *params)
{
    const oly_params_callback *pc = params;
    return pc && pc->ordered ? OLY_EFFECT_ORDERED_DEBUG : OLY_EFFECT_DEBUG;
}

static oly_status callback_kernel(const oly_kernel_ctx *ctx)
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
        .device = oly__run_device(ctx->run),
        .kind = ctx->eqn->prim->name,
    };
    oly_status st = fn->call(fn->user, &frame);
    if (st == OLY_OK) return OLY_OK;
    /* Keep the host function's message and payload; only an out-of-range
     * status is mapped. */
    return (unsigned)st < OLY_STATUS_COUNT ? st : OLY_ERR_CALLBACK;
}

const oly_prim oly__prim_pure_callback = {
    .name = "pure_callback",
    .n_in = -1,
    .num_outputs = results_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = pure_fields,
    .n_fields = OLY_ARRAY_LEN(pure_fields),
    .shape = callback_shape,
    .kernel = callback_kernel,
    .wants_arrays = true,
};

const oly_prim oly__prim_io_callback = {
    .name = "io_callback",
    .n_in = -1,
    .num_outputs = results_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = io_fields,
    .n_fields = OLY_ARRAY_LEN(io_fields),
    .shape = callback_shape,
    .kernel = callback_kernel,
    .effects = io_effects,
    .wants_arrays = true,
};

const oly_prim oly__prim_debug_callback = {
    .name = "debug_callback",
    .n_in = -1,
    .num_outputs = debug_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = debug_fields,
    .n_fields = OLY_ARRAY_LEN(debug_fields),
    .shape = callback_shape,
    .kernel = callback_kernel,
    .effects = debug_effects,
    .wants_arrays = true,
};

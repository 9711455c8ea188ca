/* outside_call.c — host_callback's primitive: id_tap (identity: outputs are
 * the inputs; the host function gets them through the device's outfeed) and
 * call (outputs of result_avals from a synchronous host call). Its rules; the
 * kernel is src/cpu/callback.c's. Effect: outfeed, so DCE never drops it.
 *
 * Transformation rules (spec/CALLBACK_SEMANTICS.md §1.9), id_tap only; call
 * raises the seed's NotImplementedError texts:
 *   vmap       one tap of the whole batched value; transforms gets
 *              "batch(d0,d1,...)" with each input's batch axis or None.
 *   jvp        the tap sees the primal values; tangents pass through.
 *   transpose  the cotangents are tapped, transforms gets "transpose". */
#include "trans/trans.h"

#include <stdio.h>

static const oly_param_field fields[] = {
    {.name = "callback", .kind = OLY_FIELD_HOST_FN,
     .offset = offsetof(oly_params_outside_call, callback)},
    {.name = "result_avals", .kind = OLY_FIELD_AVALS,
     .offset = offsetof(oly_params_outside_call, result_avals),
     .count_offset = offsetof(oly_params_outside_call, n_results)},
    OLY_FIELD(oly_params_outside_call, identity, OLY_FIELD_BOOL),
    OLY_FIELD(oly_params_outside_call, device_index, OLY_FIELD_INT),
    OLY_FIELD(oly_params_outside_call, transforms, OLY_FIELD_STR),
    /* the progress gate (olympus.h); hidden so ungated taps print as before */
    {.name = "every", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_outside_call, every),
     .hidden = true},
    {.name = "start", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_outside_call, start),
     .hidden = true},
    {.name = "stop", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_outside_call, stop),
     .hidden = true},
};

static int num_outputs(const void *params, int n_in)
{
    const oly_params_outside_call *pc = params;
    if (!pc || pc->n_results < 0) return -1;
    return pc->identity ? n_in : pc->n_results;
}

static oly_status shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_outside_call *pc = ctx->params;
    if (!pc || !pc->callback) return oly__error(OLY_ERR_INVALID, "outside_call: params.callback is NULL");
    if (pc->device_index < 0)
        return oly__error(OLY_ERR_INVALID, "outside_call: device_index %lld is negative",
                          (long long)pc->device_index);
    if (pc->every < 0 || (pc->every > 0 && (!pc->identity || ctx->n_in < 1 ||
                                             !oly_dtype_is_int(ctx->in[0].dtype))))
        return oly__error(OLY_ERR_INVALID,
                          "outside_call: a gated tap (every=%lld) needs identity and an integer "
                          "first input",
                          (long long)pc->every);
    if (pc->identity) {
        for (int i = 0; i < ctx->n_in; i++) out[i] = ctx->in[i];
        return OLY_OK;
    }
    if (pc->n_results != ctx->n_out || (ctx->n_out && !pc->result_avals))
        return oly__error(OLY_ERR_INVALID, "outside_call: %d result avals declared, %d outputs",
                          pc->n_results, ctx->n_out);
    for (int k = 0; k < ctx->n_out; k++) {
        const oly_aval *a = &pc->result_avals[k];
        if ((unsigned)a->dtype >= OLY_DTYPE_COUNT || a->rank < 0 || a->rank > OLY_MAX_RANK)
            return oly__error(OLY_ERR_INVALID, "outside_call: result %d: invalid aval (dtype %d, rank %d)",
                              k, (int)a->dtype, a->rank);
        OLY_TRY(oly__dims_check("outside_call", a->rank, a->dims));
        out[k] = *a;
        out[k].weak = false;
    }
    return OLY_OK;
}

static uint32_t effects(const void *params) { return OLY_EFFECT_OUTFEED; }

/* The equation again on in, with `add` appended to its transforms. */
static oly_status emit_with(oly_builder *b, const oly_eqn *eqn, const oly_atom *in, int n_in,
                            const char *add, oly_atom *out)
{
    const oly_params_outside_call *pc = eqn->params;
    char buf[1024];
    const char *old = pc->transforms ? pc->transforms : "";
    int len = snprintf(buf, sizeof buf, "%s%s%s", old, *old ? ";" : "", add);
    if (len < 0 || (size_t)len >= sizeof buf)
        return oly__error(OLY_ERR_UNSUPPORTED, "outside_call: too many transformations (%s;%s)",
                          old, add);
    oly_params_outside_call np = *pc;
    np.transforms = buf;
    return oly__emit(b, eqn->prim, in, n_in, &np, NULL, 0, out);
}

static oly_status batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                        const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_outside_call *pc = eqn->params;
    if (!pc->identity)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "batching rules are implemented only for id_tap, not for call.");
    char dims[900];
    size_t at = 0;
    int w = snprintf(dims, sizeof dims, "batch(");
    at = (size_t)w;
    for (int i = 0; i < eqn->n_in && at < sizeof dims; i++) {
        w = in_bdim[i] == OLY_NOT_MAPPED
                ? snprintf(dims + at, sizeof dims - at, "%sNone", i ? "," : "")
                : snprintf(dims + at, sizeof dims - at, "%s%d", i ? "," : "", in_bdim[i]);
        at += (size_t)w;
    }
    if (at + 2 > sizeof dims)
        return oly__error(OLY_ERR_UNSUPPORTED, "outside_call: vmap of a tap of %d values: too many",
                          eqn->n_in);
    dims[at++] = ')';
    dims[at] = '\0';
    OLY_TRY(emit_with(ctx->b, eqn, in, eqn->n_in, dims, out));
    for (int i = 0; i < eqn->n_in; i++) out_bdim[i] = in_bdim[i];
    return OLY_OK;
}

static oly_status jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                      const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                      oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_outside_call *pc = eqn->params;
    if (!pc->identity)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "JVP rule is implemented only for id_tap, not for call.");
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    for (int i = 0; i < eqn->n_in; i++) {
        out_nz[i] = tan_nz[i];
        if (tan_nz[i]) tangent_out[i] = tangent[i];
    }
    return OLY_OK;
}

static oly_status transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                            const bool *linear, const oly_atom *ct, const bool *ct_nz,
                            oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_outside_call *pc = eqn->params;
    if (!pc->identity)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "differentiation rules are implemented only for id_tap, not for call.");
    int n = eqn->n_in;
    oly_atom *cts = oly__calloc((size_t)n + 1, sizeof *cts);
    oly_atom *tapped = oly__calloc((size_t)n + 1, sizeof *tapped);
    oly_status st = cts && tapped ? OLY_OK : OLY_ERR_NOMEM;
    for (int j = 0; j < n && st == OLY_OK; j++) /* every cotangent is tapped: zeros made real */
        st = ct_nz[j] ? (cts[j] = ct[j], OLY_OK)
                      : oly__emit_full(ctx->b, &eqn->out[j]->aval, 0.0, &cts[j]);
    if (st == OLY_OK) st = emit_with(ctx->b, eqn, cts, n, "transpose", tapped);
    for (int i = 0; i < n && st == OLY_OK; i++) {
        ct_in_nz[i] = linear[i];
        if (linear[i]) ct_in[i] = tapped[i];
    }
    free(cts);
    free(tapped);
    return st;
}

const oly_prim oly__prim_outside_call = {
    .name = "outside_call",
    .n_in = -1,
    .num_outputs = num_outputs,
    .params_size = sizeof(oly_params_outside_call),
    .fields = fields,
    .n_fields = OLY_ARRAY_LEN(fields),
    .shape = shape,
    .effects = effects,
    .batch = batch,
    .jvp = jvp,
    .transpose = transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

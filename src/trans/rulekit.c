/* rulekit.c — JVP rules many rows share: a row whose outputs have zero
 * tangents (integer results, comparisons, rounding), and a row that is linear
 * in its one input (the tangent goes through the row itself). */
#include "trans/trans.h"

oly_status oly__jvp_zero(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz)
{
    (void)tangent, (void)tan_nz, (void)tangent_out;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    for (int j = 0; j < eqn->n_out; j++) out_nz[j] = false;
    return OLY_OK;
}

oly_status oly__jvp_linear(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    return oly__emit_eqn(ctx->b, eqn, tangent, tangent_out);
}

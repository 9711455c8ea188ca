/* random.c — the counter-based PRNG row: threefry2x32(key0, key1, x0, x1) ->
 * (y0, y1), the Threefry-2x32 block cipher with 20 rounds (Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the Random123
 * library), as JAX's threefry2x32_p. Elementwise over uint32 operands: every
 * operand of rank > 0 has the output's shape, rank-0 operands broadcast (a
 * single key against a block of counters is the common case). The kernel is
 * src/cpu/random.c; olympus.random builds keys, splits and bits on it.
 *
 * Rules: batch is the elementwise rule (both outputs batched along axis 0);
 * jvp gives zero tangents (integer outputs); no transpose (not linear) and no
 * partial_eval rule (the whole equation goes to whichever side asks). */
#include "internal.h"
#include "trans/trans.h"

#define D(t) (1u << (t))

static oly_status threefry_shape(const oly_shape_ctx *c, oly_aval *out)
{
    static const char *const names[4] = {"key0", "key1", "x0", "x1"};
    if (c->n_in != 4)
        return oly__error(OLY_ERR_INVALID,
                          "threefry2x32: expected 4 operands (key0, key1, x0, x1), got %d",
                          c->n_in);
    const oly_aval *shaped = NULL;
    for (int i = 0; i < 4; i++) {
        const oly_aval *a = &c->in[i];
        if (a->dtype != OLY_UINT32)
            return oly__error(OLY_ERR_TYPE, "threefry2x32: operand %s must be uint32, got %s",
                              names[i], oly__show_aval(a).s);
        if (a->rank == 0) continue;
        if (!shaped) {
            shaped = a;
            continue;
        }
        bool same = a->rank == shaped->rank;
        for (int d = 0; same && d < a->rank; d++) same = a->dims[d] == shaped->dims[d];
        if (!same)
            return oly__error(OLY_ERR_SHAPE,
                              "threefry2x32: operand %s is %s but an earlier operand is %s "
                              "(expected equal shapes, or rank-0 operands)",
                              names[i], oly__show_aval(a).s, oly__show_aval(shaped).s);
    }
    oly_aval o = shaped ? *shaped : c->in[0];
    o.dtype = OLY_UINT32;
    o.weak = false;
    out[0] = o;
    out[1] = o;
    return OLY_OK;
}

/* The elementwise rule batches output 0 along axis 0; output 1 has the same
 * aval and comes from the same equation, so it is batched there too. */
static oly_status threefry_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const int *in_bdim, oly_atom *out, int *out_bdim)
{
    OLY_TRY(oly__elementwise_batch(ctx, eqn, in, in_bdim, out, out_bdim));
    out_bdim[1] = out_bdim[0];
    return OLY_OK;
}

const oly_prim oly__prim_threefry2x32 = {
    .name = "threefry2x32", .n_in = 4, .n_out = 2, .shape = threefry_shape,
    .dtypes = D(OLY_UINT32), .batch = threefry_batch, .jvp = oly__jvp_zero,
    .no_rule = OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
};

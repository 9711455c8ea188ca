/* fft.c — the fft row (JAX's lax.fft_p): FFT, IFFT, RFFT and IRFFT over the
 * trailing len(fft_lengths) dims (1 to 3), batched over the leading ones.
 * Shape and transformation rules here; the kernel (FFTW3) in src/cpu/fft.c.
 *
 * Rules. Batching moves the batch dim to the front (the transform acts on the
 * trailing dims, so it is the same equation). Every type is linear (over the
 * reals for RFFT and IRFFT), so the JVP is the same fft of the tangent. The
 * transposes are JAX's (_fft_transpose_rule), under the bilinear pairing
 * Re(sum ct * y) that olympus and JAX use for complex values:
 *   FFT, IFFT  the DFT matrix is symmetric: the same fft of the cotangent;
 *   RFFT       the transpose of "FFT, then keep the first n/2+1 bins": the
 *              cotangent zero-padded to n along the last dim, FFT, real part;
 *   IRFFT      conj(mask * RFFT(ct)) / prod(fft_lengths), the mask 2 on the
 *              bins IRFFT counts twice (all but DC and, for even n, Nyquist). */
#include "internal.h"
#include "trans/trans.h"

static const char *const type_names[] = {"FFT", "IFFT", "RFFT", "IRFFT", NULL};

static oly_dtype complex_of(oly_dtype t) { return t == OLY_FLOAT64 ? OLY_COMPLEX128 : OLY_COMPLEX64; }
static oly_dtype real_of(oly_dtype t) { return t == OLY_COMPLEX128 ? OLY_FLOAT64 : OLY_FLOAT32; }

/* ---------------------------------------------------------------- shape rule */

static oly_status fft_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_fft *p = ctx->params;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "fft: expected 1 operand, got %d", ctx->n_in);
    if (p->fft_type < 0 || p->fft_type >= OLY_FFT_TYPE_COUNT)
        return oly__error(OLY_ERR_INVALID, "fft: fft_type must be in [0, %d), got %d",
                          OLY_FFT_TYPE_COUNT, p->fft_type);
    const char *tn = type_names[p->fft_type];
    const oly_ints *len = &p->fft_lengths;
    OLY_TRY(oly__check_ints("fft", "fft_lengths", len));
    if (len->n < 1 || len->n > 3)
        return oly__error(OLY_ERR_INVALID, "fft: fft_lengths must have 1 to 3 entries, got %s",
                          oly__show_ints(len).s);
    for (int i = 0; i < len->n; i++)
        if (len->v[i] < 1)
            return oly__error(OLY_ERR_INVALID, "fft: fft_lengths must be positive, got %s",
                              oly__show_ints(len).s);
    const oly_aval *x = &ctx->in[0];
    bool rfft = p->fft_type == OLY_FFT_RFFT;
    if (rfft ? x->dtype != OLY_FLOAT32 && x->dtype != OLY_FLOAT64
             : x->dtype != OLY_COMPLEX64 && x->dtype != OLY_COMPLEX128)
        return oly__error(OLY_ERR_TYPE, "fft: %s takes a %s operand, got %s", tn,
                          rfft ? "float32 or float64" : "complex64 or complex128",
                          oly__show_aval(x).s);
    if (len->n > x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "fft: %s over fft_lengths %s needs an operand of rank >= %d, got %s", tn,
                          oly__show_ints(len).s, len->n, oly__show_aval(x).s);
    int lead = x->rank - len->n;
    oly_ints want = *len; /* the operand's trailing dims */
    if (p->fft_type == OLY_FFT_IRFFT) want.v[len->n - 1] = len->v[len->n - 1] / 2 + 1;
    for (int i = 0; i < len->n; i++)
        if (x->dims[lead + i] != want.v[i])
            return oly__error(OLY_ERR_SHAPE,
                              "fft: %s with fft_lengths %s needs an operand whose trailing dims "
                              "are %s, got %s",
                              tn, oly__show_ints(len).s, oly__show_ints(&want).s,
                              oly__show_aval(x).s);
    *out = *x;
    out->weak = false;
    int last = x->rank - 1;
    if (rfft) {
        out->dtype = complex_of(x->dtype);
        out->dims[last] = x->dims[last] / 2 + 1;
    } else if (p->fft_type == OLY_FFT_IRFFT) {
        out->dtype = real_of(x->dtype);
        out->dims[last] = len->v[len->n - 1];
        OLY_TRY(oly__dims_check("fft", out->rank, out->dims));
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- batching */

static oly_status fft_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                            const int *in_bdim, oly_atom *out, int *out_bdim)
{
    oly_atom x;
    OLY_TRY(oly__batch_move(ctx, in[0], in_bdim[0], 0, &x));
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, &x, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* ---------------------------------------------------------------- transpose */

static oly_status emit_fft(oly_builder *b, oly_atom x, int type, const oly_ints *lengths,
                           oly_atom *out)
{
    oly_params_fft q;
    memset(&q, 0, sizeof q);
    q.fft_type = type;
    q.fft_lengths = *lengths;
    return oly__emit_1(b, &oly__prim_fft, x, &q, out);
}

/* RFFT^T ct: real(FFT(ct zero-padded from n/2+1 to n along the last dim)). */
static oly_status rfft_transpose(oly_builder *b, oly_atom ct, const oly_ints *lengths,
                                 oly_atom *out)
{
    oly_aval c = oly__atom_aval(&ct);
    int r = c.rank;
    int64_t n = lengths->v[lengths->n - 1];
    oly_params_pad pp;
    memset(&pp, 0, sizeof pp);
    pp.lo.n = pp.hi.n = pp.interior.n = r;
    pp.hi.v[r - 1] = n - c.dims[r - 1];
    oly_scalar zero;
    memset(&zero, 0, sizeof zero);
    zero.dtype = c.dtype;
    oly_atom args[2] = {ct, oly_atom_lit(zero)}, padded, full;
    OLY_TRY(oly__emit(b, &oly__prim_pad, args, 2, &pp, NULL, 0, &padded));
    OLY_TRY(emit_fft(b, padded, OLY_FFT_FFT, lengths, &full));
    return oly__emit_un(b, &oly__prim_real, full, out);
}

/* IRFFT^T ct: conj(mask * RFFT(ct)), mask (1, 2, ..., 2[, 1]) / prod(lengths)
 * along the last dim (the trailing 1 for even n: the Nyquist bin). */
static oly_status irfft_transpose(oly_builder *b, oly_atom ct, const oly_ints *lengths,
                                  oly_atom *out)
{
    oly_atom y;
    OLY_TRY(emit_fft(b, ct, OLY_FFT_RFFT, lengths, &y));
    oly_aval ya = oly__atom_aval(&y);
    int r = ya.rank;
    int64_t n = lengths->v[lengths->n - 1], nh = ya.dims[r - 1];
    double total = 1;
    for (int i = 0; i < lengths->n; i++) total *= (double)lengths->v[i];
    int64_t odd = n % 2, sizes[3] = {1, nh - 2 + odd, 1 - odd};
    double vals[3] = {1 / total, 2 / total, 1 / total};
    oly_atom parts[3], mask, wide, scaled;
    int np = 0;
    for (int k = 0; k < 3; k++) {
        if (sizes[k] <= 0) continue;
        oly_aval pa = {.dtype = ya.dtype, .rank = 1, .dims = {sizes[k]}};
        OLY_TRY(oly__emit_full(b, &pa, vals[k], &parts[np++]));
    }
    if (np == 1) {
        mask = parts[0];
    } else {
        oly_params_concatenate cp = {.dimension = 0};
        OLY_TRY(oly__emit(b, &oly__prim_concatenate, parts, np, &cp, NULL, 0, &mask));
    }
    oly_ints shape = oly__ints(r, ya.dims), bd = {.n = 1, .v = {r - 1}};
    OLY_TRY(oly__emit_broadcast_in_dim(b, mask, &shape, &bd, &wide));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, y, wide, &scaled));
    return oly__emit_un(b, &oly__prim_conj, scaled, out);
}

static oly_status fft_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_fft *p = eqn->params;
    ct_in_nz[0] = false;
    if (!linear[0] || !ct_nz[0]) return OLY_OK;
    switch (p->fft_type) {
    case OLY_FFT_RFFT: OLY_TRY(rfft_transpose(ctx->b, ct[0], &p->fft_lengths, &ct_in[0])); break;
    case OLY_FFT_IRFFT: OLY_TRY(irfft_transpose(ctx->b, ct[0], &p->fft_lengths, &ct_in[0])); break;
    default: OLY_TRY(oly__emit_eqn(ctx->b, eqn, &ct[0], &ct_in[0])); break;
    }
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- row */

static const oly_param_field fft_fields[] = {
    OLY_FIELD(oly_params_fft, fft_lengths, OLY_FIELD_INTS),
    {.name = "fft_type", .kind = OLY_FIELD_ENUM, .offset = offsetof(oly_params_fft, fft_type),
     .enum_names = type_names},
};

const oly_prim oly__prim_fft = {
    .name = "fft", .n_in = 1, .n_out = 1,
    .params_size = sizeof(oly_params_fft),
    .fields = fft_fields, .n_fields = OLY_ARRAY_LEN(fft_fields),
    .shape = fft_shape,
    .batch = fft_batch, .jvp = oly__jvp_linear, .transpose = fft_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

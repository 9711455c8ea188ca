/* elementwise.c — the elementwise primitives (unary, binary, select_n): their
 * shape rules, CPU kernels for every dtype each accepts, and transformation
 * rules (batch, jvp, and transpose for the linear rows).
 *
 * Every operation is a table from dtype to a loop over contiguous elements; the
 * kernel dispatches once per call and the loop does the work, so the f32/f64
 * paths are plain vectorisable loops; the transcendental ones run on SLEEF's
 * AVX2 functions where the CPU has them (see "SIMD loops"). float16/bfloat16
 * compute through float32 in chunks; complex uses C99 _Complex. Integer
 * arithmetic never traps: it wraps (computed in unsigned), and division by
 * zero, INT_MIN / -1 and over-wide shifts follow XLA. Binary operands have one
 * dtype and one shape, or one of them is rank 0 and broadcasts. */
#include "internal.h"
#include "trans/trans.h"
#include "cpu/cpu.h"
#include "cpu/simd.h"

#include <complex.h>
#include <math.h>

/* gcc -O2 only vectorises loops that need no runtime alias check and no
 * scalar epilogue, which excludes every loop here; allow the cost model to pay
 * for them in this file. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

typedef float complex c64;
typedef double complex c128;

enum { CHUNK = 256 };

/* Binary loop modes: which operand (if any) is a broadcast scalar. */
enum { BOTH = 0, A_SCALAR = 1, B_SCALAR = 2 };

typedef void (*unary_fn)(const void *x, void *y, int64_t n, const void *params);
typedef void (*binary_fn)(const void *a, const void *b, void *o, int64_t n, int mode);

/* ---------------------------------------------------------------- helpers */

static const char *fmt_aval(char *buf, size_t n, const oly_aval *a)
{
    oly_aval_format(buf, n, a);
    return buf;
}

/* This thread's share [*lo, *hi) of n elements. */
static void split(const oly_kernel_ctx *c, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t nth = c->nth > 0 ? c->nth : 1, ith = c->ith < 0 ? 0 : c->ith;
    int64_t chunk = (n + nth - 1) / nth;
    int64_t l = ith * chunk, h = l + chunk;
    if (l > n) l = n;
    if (h > n) h = n;
    *lo = l;
    *hi = h;
}

static bool valid_dtype(oly_dtype t) { return (unsigned)t < OLY_DTYPE_COUNT; }

static void halves_to_float(const uint16_t *h, oly_dtype t, float *f, int64_t n)
{
    if (t == OLY_BFLOAT16)
        for (int64_t i = 0; i < n; i++) f[i] = oly__bf16_to_float(h[i]);
    else
        for (int64_t i = 0; i < n; i++) f[i] = oly__half_to_float(h[i]);
}

static void float_to_halves(const float *f, oly_dtype t, uint16_t *h, int64_t n)
{
    if (t == OLY_BFLOAT16)
        for (int64_t i = 0; i < n; i++) h[i] = oly__float_to_bf16(f[i]);
    else
        for (int64_t i = 0; i < n; i++) h[i] = oly__float_to_half(f[i]);
}

/* A float16/bfloat16 unary op: convert chunks to float32, run the float32 loop
 * f, convert back (or write bool output directly). */
static void half_unary(const void *xv, void *yv, int64_t n, const void *params, oly_dtype t,
                       unary_fn f, bool bool_out)
{
    const uint16_t *x = xv;
    float buf[CHUNK];
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t m = n - s < CHUNK ? n - s : CHUNK;
        halves_to_float(x + s, t, buf, m);
        if (bool_out) {
            f(buf, (uint8_t *)yv + s, m, params);
        } else {
            f(buf, buf, m, params);
            float_to_halves(buf, t, (uint16_t *)yv + s, m);
        }
    }
}

static void half_binary(const void *av, const void *bv, void *ov, int64_t n, int mode,
                        oly_dtype t, binary_fn f, bool bool_out)
{
    const uint16_t *a = av, *b = bv;
    float ab[CHUNK], bb[CHUNK], ob[CHUNK];
    if (mode == A_SCALAR) halves_to_float(a, t, ab, 1);
    if (mode == B_SCALAR) halves_to_float(b, t, bb, 1);
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t m = n - s < CHUNK ? n - s : CHUNK;
        if (mode != A_SCALAR) halves_to_float(a + s, t, ab, m);
        if (mode != B_SCALAR) halves_to_float(b + s, t, bb, m);
        if (bool_out) {
            f(ab, bb, (uint8_t *)ov + s, m, mode);
        } else {
            f(ab, bb, ob, m, mode);
            float_to_halves(ob, t, (uint16_t *)ov + s, m);
        }
    }
}

/* ---------------------------------------------------------------- transformation rules
 *
 * batch: one rule for every row (elementwise_batch). jvp: one rule per
 * mathematical operation, emitting the derivative with primitives; wherever the
 * tangent computation is linear in the tangents it uses only mul/div by primal
 * values, neg, add, sub, convert, real/imag/conj and select_n with a primal
 * predicate, so linearize + transpose works. transpose: the linear rows (neg,
 * add, sub, mul, div, convert_element_type, real, imag, conj, select_n).
 * Complex transposes follow JAX: they are adjoints for <a, b> = Re sum(a * b). */

static oly_aval aval_of(oly_atom a) { return oly__atom_aval(&a); }

/* A rank-0 literal with like's dtype and weakness holding re + i*im. */
static oly_atom lit_like(oly_atom like, double re, double im)
{
    oly_aval a = aval_of(like);
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = a.dtype;
    s.weak = a.weak;
    if (oly_dtype_is_complex(a.dtype)) {
        s.v.c[0] = re;
        s.v.c[1] = im;
    } else if (oly_dtype_is_float(a.dtype)) {
        s.v.f = re;
    } else if (oly_dtype_is_unsigned_int(a.dtype)) {
        s.v.u = re <= 0 ? 0 : (uint64_t)re;
    } else {
        s.v.i = (int64_t)re;
    }
    return oly_atom_lit(s);
}

/* Shorthands inside rules, where `b` is the builder. */
#define E_UN(prim, x, o) OLY_TRY(oly__emit_un(b, &oly__prim_##prim, (x), (o)))
#define E_BIN(prim, x, y, o) OLY_TRY(oly__emit_bin(b, &oly__prim_##prim, (x), (y), (o)))

/* batch: mapped operands get their batch axis at 0; unmapped rank-0 operands
 * stay scalars (the rows broadcast them), except select_n's cases, which must
 * all have the output's shape; other unmapped operands are broadcast. An
 * operand that was rank 0 against a shaped output is broadcast along the
 * output's dims once batched. The output is batched along axis 0. */
static oly_status elementwise_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const int *in_bdim, oly_atom *out, int *out_bdim)
{
    bool is_select = eqn->prim == &oly__prim_select_n;
    const oly_aval *oa = &eqn->out[0]->aval;
    if (oa->rank >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED, "%s: cannot batch a rank-%d value (max rank %d)",
                          eqn->prim->name, oa->rank, OLY_MAX_RANK);
    oly_atom small[8];
    oly_atom *moved = small;
    if (eqn->n_in > OLY_ARRAY_LEN(small)) {
        moved = oly__calloc((size_t)eqn->n_in, sizeof *moved);
        if (!moved) return OLY_ERR_NOMEM;
    }
    oly_status s = OLY_OK;
    for (int i = 0; i < eqn->n_in && s == OLY_OK; i++) {
        oly_aval orig = oly__atom_aval(&eqn->in[i]);
        if (in_bdim[i] == OLY_NOT_MAPPED && orig.rank == 0 && (!is_select || i == 0)) {
            moved[i] = in[i];
            continue;
        }
        s = oly__batch_move(ctx, in[i], in_bdim[i], 0, &moved[i]);
        if (s == OLY_OK && orig.rank < oa->rank) {
            oly_ints shape = oly__ints(0, NULL), dims = oly__ints(0, NULL);
            shape.n = oa->rank + 1;
            shape.v[0] = ctx->size;
            for (int d = 0; d < oa->rank; d++) shape.v[d + 1] = oa->dims[d];
            dims.n = 1;
            dims.v[0] = 0;
            s = oly__emit_broadcast_in_dim(ctx->b, moved[i], &shape, &dims, &moved[i]);
        }
    }
    if (s == OLY_OK) s = oly__emit_eqn(ctx->b, eqn, moved, out);
    if (s == OLY_OK) out_bdim[0] = 0;
    if (moved != small) free(moved);
    return s;
}

/* ------------------------------------------------ jvp helpers */

/* *acc += term; *have says whether *acc holds anything yet. */
static oly_status accumulate(oly_builder *b, oly_atom *acc, bool *have, oly_atom term)
{
    if (!*have) {
        *acc = term;
        *have = true;
        return OLY_OK;
    }
    return oly__emit_bin(b, &oly__prim_add, *acc, term, acc);
}

/* t broadcast to the output's shape when it is a rank-0 tangent of a rank-0
 * operand of a shaped output. */
static oly_status fit_out(oly_builder *b, oly_atom t, const oly_atom *primal_out, oly_atom *out)
{
    oly_aval oa = aval_of(*primal_out), ta = aval_of(t);
    if (ta.rank == oa.rank) {
        *out = t;
        return OLY_OK;
    }
    return oly__emit_broadcast_to(b, t, &oa, out);
}

/* x with its zeros replaced by ones: x + (x == 0). */
static oly_status replace_zero(oly_builder *b, oly_atom x, oly_atom *out)
{
    oly_atom z, zc;
    E_BIN(eq, x, lit_like(x, 0, 0), &z);
    OLY_TRY(oly__emit_convert(b, z, aval_of(x).dtype, &zc));
    return oly__emit_bin(b, &oly__prim_add, x, zc, out);
}

/* Zero tangent (piecewise-constant, integer-valued or boolean operations). */
/* Unary ops with tangent t * d(x, y) (MUL) or t / d(x, y) (DIV), y the primal output. */
typedef oly_status (*deriv_fn)(oly_builder *b, oly_atom x, oly_atom y, oly_atom *d);
static oly_status unary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz, deriv_fn f, bool divide)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    oly_atom d;
    OLY_TRY(f(b, primal[0], primal_out[0], &d));
    return oly__emit_bin(b, divide ? &oly__prim_div : &oly__prim_mul, tangent[0], d,
                         tangent_out);
}
#define UNARY_JVP(op, DIVIDE)                                                             \
    static oly_status op##_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal, \
                               const oly_atom *tangent, const bool *tan_nz,               \
                               oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz) \
    {                                                                                     \
        return unary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out, tangent_out, out_nz, \
                         op##_deriv, DIVIDE);                                             \
    }
#define DERIV(op) static oly_status op##_deriv(oly_builder *b, oly_atom x, oly_atom y, oly_atom *d)

DERIV(exp) { *d = y; return OLY_OK; }
DERIV(exp2) { return oly__emit_bin(b, &oly__prim_mul, y, lit_like(y, M_LN2, 0), d); }
DERIV(log) { *d = x; return OLY_OK; }
DERIV(log1p) { return oly__emit_bin(b, &oly__prim_add, x, lit_like(x, 1, 0), d); }
DERIV(expm1) { return oly__emit_bin(b, &oly__prim_add, y, lit_like(y, 1, 0), d); }
DERIV(sin) { return oly__emit_un(b, &oly__prim_cos, x, d); }
DERIV(cos)
{
    oly_atom s;
    E_UN(sin, x, &s);
    return oly__emit_un(b, &oly__prim_neg, s, d);
}
DERIV(tan) /* 1 + y^2 */
{
    oly_atom y2;
    E_BIN(mul, y, y, &y2);
    return oly__emit_bin(b, &oly__prim_add, y2, lit_like(y, 1, 0), d);
}
DERIV(asin) /* rsqrt(1 - x^2) */
{
    oly_atom x2, u;
    E_BIN(mul, x, x, &x2);
    E_BIN(sub, lit_like(x, 1, 0), x2, &u);
    return oly__emit_un(b, &oly__prim_rsqrt, u, d);
}
DERIV(acos)
{
    oly_atom r;
    OLY_TRY(asin_deriv(b, x, y, &r));
    return oly__emit_un(b, &oly__prim_neg, r, d);
}
DERIV(atan) /* divide by 1 + x^2 */
{
    oly_atom x2;
    E_BIN(mul, x, x, &x2);
    return oly__emit_bin(b, &oly__prim_add, x2, lit_like(x, 1, 0), d);
}
DERIV(sinh) { return oly__emit_un(b, &oly__prim_cosh, x, d); }
DERIV(cosh) { return oly__emit_un(b, &oly__prim_sinh, x, d); }
DERIV(tanh) /* 1 - y^2 */
{
    oly_atom y2;
    E_BIN(mul, y, y, &y2);
    return oly__emit_bin(b, &oly__prim_sub, lit_like(y, 1, 0), y2, d);
}
DERIV(asinh) /* rsqrt(x^2 + 1) */
{
    oly_atom x2, u;
    E_BIN(mul, x, x, &x2);
    E_BIN(add, x2, lit_like(x, 1, 0), &u);
    return oly__emit_un(b, &oly__prim_rsqrt, u, d);
}
DERIV(acosh) /* rsqrt(x - 1) * rsqrt(x + 1): the principal branch for complex x too */
{
    oly_atom xm, xp, rm, rp;
    E_BIN(sub, x, lit_like(x, 1, 0), &xm);
    E_BIN(add, x, lit_like(x, 1, 0), &xp);
    E_UN(rsqrt, xm, &rm);
    E_UN(rsqrt, xp, &rp);
    return oly__emit_bin(b, &oly__prim_mul, rm, rp, d);
}
DERIV(atanh) /* divide by 1 - x^2 */
{
    oly_atom x2;
    E_BIN(mul, x, x, &x2);
    return oly__emit_bin(b, &oly__prim_sub, lit_like(x, 1, 0), x2, d);
}
DERIV(logistic) /* y (1 - y) */
{
    oly_atom u;
    E_BIN(sub, lit_like(y, 1, 0), y, &u);
    return oly__emit_bin(b, &oly__prim_mul, y, u, d);
}
DERIV(sqrt) { return oly__emit_bin(b, &oly__prim_mul, y, lit_like(y, 2, 0), d); } /* divide */
DERIV(rsqrt) /* -y / (2x) */
{
    oly_atom h;
    E_BIN(mul, y, lit_like(y, -0.5, 0), &h);
    return oly__emit_bin(b, &oly__prim_div, h, x, d);
}
DERIV(cbrt) /* y^-2 / 3 */
{
    oly_params_integer_pow p = {.y = -2};
    oly_atom y2;
    OLY_TRY(oly__emit(b, &oly__prim_integer_pow, &y, 1, &p, NULL, 0, &y2));
    return oly__emit_bin(b, &oly__prim_mul, y2, lit_like(y, 1.0 / 3.0, 0), d);
}
DERIV(square) { return oly__emit_bin(b, &oly__prim_mul, x, lit_like(x, 2, 0), d); }

UNARY_JVP(exp, false)
UNARY_JVP(exp2, false)
UNARY_JVP(log, true)
UNARY_JVP(log1p, true)
UNARY_JVP(expm1, false)
UNARY_JVP(sin, false)
UNARY_JVP(cos, false)
UNARY_JVP(tan, false)
UNARY_JVP(asin, false)
UNARY_JVP(acos, false)
UNARY_JVP(atan, true)
UNARY_JVP(sinh, false)
UNARY_JVP(cosh, false)
UNARY_JVP(tanh, false)
UNARY_JVP(asinh, false)
UNARY_JVP(acosh, false)
UNARY_JVP(atanh, true)
UNARY_JVP(logistic, false)
UNARY_JVP(sqrt, true)
UNARY_JVP(rsqrt, false)
UNARY_JVP(cbrt, false)
UNARY_JVP(square, false)

#define neg_jvp oly__jvp_linear
#define real_jvp oly__jvp_linear
#define imag_jvp oly__jvp_linear
#define conj_jvp oly__jvp_linear
#define sign_jvp oly__jvp_zero
#define floor_jvp oly__jvp_zero
#define ceil_jvp oly__jvp_zero
#define round_jvp oly__jvp_zero
#define is_finite_jvp oly__jvp_zero
#define not_jvp oly__jvp_zero
#define nextafter_jvp oly__jvp_zero
#define and_jvp oly__jvp_zero
#define or_jvp oly__jvp_zero
#define xor_jvp oly__jvp_zero
#define shift_left_jvp oly__jvp_zero
#define shift_right_logical_jvp oly__jvp_zero
#define shift_right_arithmetic_jvp oly__jvp_zero
#define eq_jvp oly__jvp_zero
#define ne_jvp oly__jvp_zero
#define lt_jvp oly__jvp_zero
#define le_jvp oly__jvp_zero
#define gt_jvp oly__jvp_zero
#define ge_jvp oly__jvp_zero

/* abs: real x like JAX, select(x >= 0, t, -t) (so t at 0); complex x:
 * Re(t * conj(x) / |x|) with |x| = 0 replaced by 1. */
static oly_status abs_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    oly_atom x = primal[0], t = tangent[0];
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    oly_dtype dt = aval_of(x).dtype;
    if (!oly_dtype_is_complex(dt)) {
        oly_atom pos, nt;
        E_BIN(ge, x, lit_like(x, 0, 0), &pos);
        E_UN(neg, t, &nt);
        return oly__emit_select(b, pos, nt, t, tangent_out);
    }
    oly_atom a1, ac, cx, w, tw;
    OLY_TRY(replace_zero(b, primal_out[0], &a1));
    OLY_TRY(oly__emit_convert(b, a1, dt, &ac));
    E_UN(conj, x, &cx);
    E_BIN(div, cx, ac, &w);
    E_BIN(mul, t, w, &tw);
    return oly__emit_un(b, &oly__prim_real, tw, tangent_out);
}

/* integer_pow: t * n * x^(n-1); n == 0 gives a zero tangent. */
static oly_status integer_pow_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    const oly_params_integer_pow *p = eqn->params;
    int64_t n = p ? p->y : 1;
    if (n == INT64_MIN)
        return oly__error(OLY_ERR_UNSUPPORTED, "integer_pow: no JVP for y=%lld", (long long)n);
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] && n != 0;
    if (!out_nz[0]) return OLY_OK;
    if (n == 1) {
        *tangent_out = tangent[0];
        return OLY_OK;
    }
    oly_atom x = primal[0], xn1 = x, d;
    if (n - 1 != 1) {
        oly_params_integer_pow q = {.y = n - 1};
        OLY_TRY(oly__emit(b, &oly__prim_integer_pow, &x, 1, &q, NULL, 0, &xn1));
    }
    E_BIN(mul, xn1, lit_like(x, (double)n, 0), &d);
    return oly__emit_bin(b, &oly__prim_mul, tangent[0], d, tangent_out);
}

/* convert_element_type: the tangent converted too, between inexact dtypes
 * (complex -> real keeps the real part, as the primal does); to an integer or
 * bool dtype the tangent is zero. */
static oly_status convert_element_type_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                           const oly_atom *primal, const oly_atom *tangent,
                                           const bool *tan_nz, oly_atom *primal_out,
                                           oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    oly_dtype from = aval_of(primal[0]).dtype, to = aval_of(primal_out[0]).dtype;
    out_nz[0] = tan_nz[0] && oly_dtype_is_inexact(from) && oly_dtype_is_inexact(to);
    if (out_nz[0]) OLY_TRY(oly__emit_eqn(ctx->b, eqn, tangent, tangent_out));
    return OLY_OK;
}

/* Whether a is the literal 1 (a partial derivative that needs no multiply). */
static bool is_unit(oly_atom a)
{
    if (a.kind != OLY_ATOM_LIT) return false;
    if (oly_dtype_is_complex(a.lit.dtype)) return a.lit.v.c[0] == 1 && a.lit.v.c[1] == 0;
    return oly_dtype_is_float(a.lit.dtype) && a.lit.v.f == 1;
}

/* A binary op's tangent as t_x * jx + t_y * jy (either side optional); the
 * partial derivatives come from partial(which, ...) in the primal. */
typedef oly_status (*partial_fn)(oly_builder *b, int which, oly_atom x, oly_atom y, oly_atom out,
                                 oly_atom *d);
static oly_status binary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                             const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                             oly_atom *tangent_out, bool *out_nz, partial_fn partial)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom acc = {0};
    bool have = false;
    for (int i = 0; i < 2; i++) {
        if (!tan_nz[i]) continue;
        oly_atom d, term = tangent[i];
        OLY_TRY(partial(b, i, primal[0], primal[1], primal_out[0], &d));
        if (!is_unit(d)) E_BIN(mul, tangent[i], d, &term);
        OLY_TRY(accumulate(b, &acc, &have, term));
    }
    out_nz[0] = have;
    if (have) OLY_TRY(fit_out(b, acc, primal_out, tangent_out));
    return OLY_OK;
}
#define BINARY_JVP(op)                                                                    \
    static oly_status op##_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal, \
                               const oly_atom *tangent, const bool *tan_nz,               \
                               oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz) \
    {                                                                                     \
        return binary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out, tangent_out, out_nz, \
                          op##_partial);                                                  \
    }
#define PARTIAL(op)                                                                       \
    static oly_status op##_partial(oly_builder *b, int which, oly_atom x, oly_atom y,     \
                                   oly_atom out, oly_atom *d)

/* pow: d/dx = y x^(y-1) (0 where y == 0, like JAX); d/dy = log(x) x^y with
 * x == 0 giving 0. */
PARTIAL(pow)
{
    if (which == 0) {
        oly_atom ym1, p, j, y0, zeros;
        E_BIN(sub, y, lit_like(y, 1, 0), &ym1);
        E_BIN(pow, x, ym1, &p);
        E_BIN(mul, y, p, &j);
        E_BIN(eq, y, lit_like(y, 0, 0), &y0);
        oly_aval ja = aval_of(j);
        OLY_TRY(oly__emit_full(b, &ja, 0, &zeros));
        return oly__emit_select(b, y0, j, zeros, d);
    }
    oly_atom x1, l;
    OLY_TRY(replace_zero(b, x, &x1));
    E_UN(log, x1, &l);
    return oly__emit_bin(b, &oly__prim_mul, l, out, d);
}

/* max/min like JAX: the operand equal to the result gets weight 1, halved
 * when the other equals it too (ties split the tangent evenly). */
static oly_status maxmin_partial(oly_builder *b, int which, oly_atom x, oly_atom y, oly_atom out,
                                 oly_atom *d)
{
    oly_atom me = which == 0 ? x : y, other = which == 0 ? y : x;
    oly_dtype dt = aval_of(out).dtype;
    oly_atom e1, e2, n, m, den;
    E_BIN(eq, me, out, &e1);
    E_BIN(eq, other, out, &e2);
    OLY_TRY(oly__emit_convert(b, e1, dt, &n));
    OLY_TRY(oly__emit_convert(b, e2, dt, &m));
    E_BIN(add, m, lit_like(out, 1, 0), &den);
    return oly__emit_bin(b, &oly__prim_div, n, den, d);
}
#define max_partial maxmin_partial
#define min_partial maxmin_partial

/* atan2(x, y): (y, -x) / (x^2 + y^2). */
PARTIAL(atan2)
{
    oly_atom x2, y2, den, q;
    E_BIN(mul, x, x, &x2);
    E_BIN(mul, y, y, &y2);
    E_BIN(add, x2, y2, &den);
    E_BIN(div, which == 0 ? y : x, den, &q);
    if (which == 0) {
        *d = q;
        return OLY_OK;
    }
    return oly__emit_un(b, &oly__prim_neg, q, d);
}

/* rem(x, y) = x - y trunc(x / y): (1, -trunc(x / y)). */
PARTIAL(rem)
{
    if (which == 0) {
        *d = lit_like(x, 1, 0);
        return OLY_OK;
    }
    oly_atom q, sg, aq, fl, tr;
    E_BIN(div, x, y, &q);
    E_UN(sign, q, &sg);
    E_UN(abs, q, &aq);
    E_UN(floor, aq, &fl);
    E_BIN(mul, sg, fl, &tr);
    return oly__emit_un(b, &oly__prim_neg, tr, d);
}

BINARY_JVP(pow)
BINARY_JVP(max)
BINARY_JVP(min)
BINARY_JVP(atan2)
BINARY_JVP(rem)

/* add / sub: t_x ± t_y, a lone rank-0 tangent broadcast to the output. */
static oly_status addsub_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                             const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                             oly_atom *tangent_out, bool *out_nz, bool subtract)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    if (!out_nz[0]) return OLY_OK;
    oly_atom t;
    if (tan_nz[0] && tan_nz[1]) {
        return oly__emit_bin(b, subtract ? &oly__prim_sub : &oly__prim_add, tangent[0],
                             tangent[1], tangent_out);
    } else if (tan_nz[0]) {
        t = tangent[0];
    } else if (subtract) {
        E_UN(neg, tangent[1], &t);
    } else {
        t = tangent[1];
    }
    return fit_out(b, t, primal_out, tangent_out);
}
static oly_status add_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    return addsub_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out, tangent_out, out_nz, false);
}
static oly_status sub_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    return addsub_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out, tangent_out, out_nz, true);
}

/* mul: t_x y + x t_y. */
static oly_status mul_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom acc = {0};
    bool have = false;
    for (int i = 0; i < 2; i++) {
        if (!tan_nz[i]) continue;
        oly_atom term;
        E_BIN(mul, tangent[i], primal[1 - i], &term);
        OLY_TRY(accumulate(b, &acc, &have, term));
    }
    out_nz[0] = have;
    if (have) *tangent_out = acc;
    return OLY_OK;
}

/* div: (t_x - out t_y) / y. */
static oly_status div_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                          const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                          oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    if (!out_nz[0]) return OLY_OK;
    oly_atom num = tangent[0];
    if (tan_nz[1]) {
        oly_atom oty;
        E_BIN(mul, tangent[1], primal_out[0], &oty);
        if (tan_nz[0])
            E_BIN(sub, tangent[0], oty, &num);
        else
            E_UN(neg, oty, &num);
    }
    return oly__emit_bin(b, &oly__prim_div, num, primal[1], tangent_out);
}

/* select_n: the cases' tangents selected by the same predicate (zero cases
 * materialised). */
static oly_status select_n_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                               const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                               oly_atom *tangent_out, bool *out_nz)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    bool any = false;
    for (int i = 1; i < eqn->n_in; i++) any = any || tan_nz[i];
    out_nz[0] = any;
    if (!any) return OLY_OK;
    oly_atom *args = oly__calloc((size_t)eqn->n_in, sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    oly_aval oa = aval_of(primal_out[0]);
    oly_atom zeros = {0};
    bool have_zeros = false;
    oly_status s = OLY_OK;
    args[0] = primal[0];
    for (int i = 1; i < eqn->n_in && s == OLY_OK; i++) {
        if (tan_nz[i]) {
            args[i] = tangent[i];
            continue;
        }
        if (!have_zeros) s = oly__emit_full(b, &oa, 0, &zeros);
        have_zeros = true;
        args[i] = zeros;
    }
    if (s == OLY_OK) s = oly__emit(b, &oly__prim_select_n, args, eqn->n_in, NULL, NULL, 0, tangent_out);
    free(args);
    return s;
}

/* ------------------------------------------------ transpose */

/* A cotangent of the output for an operand of aval want: summed over every
 * axis when the operand was a rank-0 value broadcast against a shaped one. */
static oly_status unbroadcast(oly_builder *b, oly_atom ct, const oly_aval *want, oly_atom *out)
{
    oly_aval a = aval_of(ct);
    if (a.rank == want->rank) {
        *out = ct;
        return OLY_OK;
    }
    oly_ints axes = oly__ints_range(a.rank);
    return oly__emit_reduce_sum(b, ct, &axes, out);
}

/* The transposes' shared start: a symbolic-zero cotangent gives symbolic
 * zeros for every linear input. Returns true when nothing is left to do. */
static bool zero_ct(const oly_eqn *eqn, const bool *ct_nz, bool *ct_in_nz)
{
    for (int i = 0; i < eqn->n_in; i++) ct_in_nz[i] = false;
    return !ct_nz[0];
}

static oly_status neg_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    if (zero_ct(eqn, ct_nz, ct_in_nz) || !linear[0]) return OLY_OK;
    OLY_TRY(oly__emit_un(ctx->b, &oly__prim_neg, ct[0], &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

static oly_status addsub_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const bool *linear,
                                   const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                   bool *ct_in_nz, bool subtract)
{
    oly_builder *b = ctx->b;
    if (zero_ct(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    for (int i = 0; i < 2; i++) {
        if (!linear[i]) continue;
        oly_aval want = oly__atom_aval(&eqn->in[i]);
        OLY_TRY(unbroadcast(b, ct[0], &want, &ct_in[i]));
        if (subtract && i == 1) E_UN(neg, ct_in[i], &ct_in[i]);
        ct_in_nz[i] = true;
    }
    return OLY_OK;
}
static oly_status add_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    return addsub_transpose(ctx, eqn, linear, ct, ct_nz, ct_in, ct_in_nz, false);
}
static oly_status sub_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    return addsub_transpose(ctx, eqn, linear, ct, ct_nz, ct_in, ct_in_nz, true);
}

/* mul (linear in one operand) and div (linear in the dividend): ct * other or
 * ct / y. */
static oly_status muldiv_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                   oly_atom *ct_in, bool *ct_in_nz, bool divide)
{
    oly_builder *b = ctx->b;
    if (linear[0] && linear[1])
        return oly__error(OLY_ERR_INVALID, "%s: transpose needs one operand to be a constant, "
                          "but both are linear", eqn->prim->name);
    if (divide && linear[1])
        return oly__error(OLY_ERR_INVALID, "div: transpose is linear in the dividend only, but "
                          "the divisor is linear");
    if (zero_ct(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    int i = linear[0] ? 0 : 1;
    if (!linear[i]) return OLY_OK;
    oly_atom prod;
    OLY_TRY(oly__emit_bin(b, divide ? &oly__prim_div : &oly__prim_mul, ct[0], in[1 - i], &prod));
    oly_aval want = oly__atom_aval(&eqn->in[i]);
    OLY_TRY(unbroadcast(b, prod, &want, &ct_in[i]));
    ct_in_nz[i] = true;
    return OLY_OK;
}
static oly_status mul_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    return muldiv_transpose(ctx, eqn, in, linear, ct, ct_nz, ct_in, ct_in_nz, false);
}
static oly_status div_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                oly_atom *ct_in, bool *ct_in_nz)
{
    return muldiv_transpose(ctx, eqn, in, linear, ct, ct_nz, ct_in, ct_in_nz, true);
}

/* convert_element_type: the cotangent converted back (complex -> real keeps
 * the real part, the adjoint of real -> complex). */
static oly_status convert_element_type_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                                 const oly_atom *in, const bool *linear,
                                                 const oly_atom *ct, const bool *ct_nz,
                                                 oly_atom *ct_in, bool *ct_in_nz)
{
    if (zero_ct(eqn, ct_nz, ct_in_nz) || !linear[0]) return OLY_OK;
    oly_aval want = oly__atom_aval(&eqn->in[0]);
    if (aval_of(ct[0]).dtype == want.dtype) {
        ct_in[0] = ct[0];
    } else {
        oly_params_convert p = {.new_dtype = want.dtype, .weak = want.weak};
        OLY_TRY(oly__emit(ctx->b, &oly__prim_convert_element_type, ct, 1, &p, NULL, 0,
                          &ct_in[0]));
    }
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* real: complex(ct, 0); imag: complex(0, -ct); both identity / zero on real
 * operands. conj: conj. */
static oly_status parts_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const bool *linear,
                                  const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                  bool *ct_in_nz)
{
    oly_builder *b = ctx->b;
    if (zero_ct(eqn, ct_nz, ct_in_nz) || !linear[0]) return OLY_OK;
    oly_aval want = oly__atom_aval(&eqn->in[0]);
    bool cplx = oly_dtype_is_complex(want.dtype);
    if (eqn->prim == &oly__prim_conj) {
        if (cplx)
            E_UN(conj, ct[0], &ct_in[0]);
        else
            ct_in[0] = ct[0];
    } else if (eqn->prim == &oly__prim_real) {
        OLY_TRY(oly__emit_convert(b, ct[0], want.dtype, &ct_in[0]));
    } else { /* imag */
        if (!cplx) return OLY_OK; /* imag of a real value is constant zero */
        oly_atom c;
        OLY_TRY(oly__emit_convert(b, ct[0], want.dtype, &c));
        E_BIN(mul, c, lit_like(c, 0, -1), &ct_in[0]);
    }
    ct_in_nz[0] = true;
    return OLY_OK;
}
static oly_status real_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    return parts_transpose(ctx, eqn, linear, ct, ct_nz, ct_in, ct_in_nz);
}
#define imag_transpose real_transpose
#define conj_transpose real_transpose

/* select_n: linear in the cases (the predicate is a residual): case i gets the
 * cotangent where the predicate picks it and zeros elsewhere. */
static oly_status select_n_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                     const oly_atom *in, const bool *linear, const oly_atom *ct,
                                     const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    oly_builder *b = ctx->b;
    if (linear[0])
        return oly__error(OLY_ERR_INVALID,
                          "select_n: transpose needs a constant predicate, but it is linear");
    if (zero_ct(eqn, ct_nz, ct_in_nz)) return OLY_OK;
    oly_atom *args = oly__calloc((size_t)eqn->n_in, sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    oly_aval oa = eqn->out[0]->aval;
    oly_atom zeros = {0};
    bool have_zeros = false;
    oly_status s = OLY_OK;
    for (int i = 1; i < eqn->n_in && s == OLY_OK; i++) {
        if (!linear[i]) continue;
        if (!have_zeros) s = oly__emit_full(b, &oa, 0, &zeros);
        have_zeros = true;
        args[0] = in[0];
        for (int k = 1; k < eqn->n_in; k++) args[k] = k == i ? ct[0] : zeros;
        if (s == OLY_OK)
            s = oly__emit(b, &oly__prim_select_n, args, eqn->n_in, NULL, NULL, 0, &ct_in[i]);
        if (s == OLY_OK) ct_in_nz[i] = true;
    }
    free(args);
    return s;
}

#undef E_UN
#undef E_BIN

/* ---------------------------------------------------------------- loop generators */

/* fname: y[i] = EXPR with x = x[i]. */
#define U_LOOP(fname, TI, TO, EXPR)                                                       \
    static void fname(const void *xv, void *yv, int64_t n, const void *params)            \
    {                                                                                     \
        const TI *xp = xv;                                                                \
        TO *yp = yv;                                                                      \
        (void)params;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                 \
            TI x = xp[i];                                                                 \
            yp[i] = (TO)(EXPR);                                                           \
        }                                                                                 \
    }

/* fname: o[i] = EXPR with x = a[i] (or a[0]) and y = b[i] (or b[0]). */
#define B_LOOP(fname, TI, TO, EXPR)                                                       \
    static void fname(const void *av, const void *bv, void *ov, int64_t n, int mode)      \
    {                                                                                     \
        const TI *ap = av, *bp = bv;                                                      \
        TO *op = ov;                                                                      \
        if (mode == A_SCALAR) {                                                           \
            const TI x = ap[0];                                                           \
            for (int64_t i = 0; i < n; i++) {                                             \
                TI y = bp[i];                                                             \
                op[i] = (TO)(EXPR);                                                       \
            }                                                                             \
        } else if (mode == B_SCALAR) {                                                    \
            const TI y = bp[0];                                                           \
            for (int64_t i = 0; i < n; i++) {                                             \
                TI x = ap[i];                                                             \
                op[i] = (TO)(EXPR);                                                       \
            }                                                                             \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) {                                             \
                TI x = ap[i], y = bp[i];                                                  \
                op[i] = (TO)(EXPR);                                                       \
            }                                                                             \
        }                                                                                 \
    }

/* float16 and bfloat16 versions of op through op##_f32. */
#define HALF_U(op, BOOL_OUT)                                                              \
    static void op##_f16(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        half_unary(x, y, n, p, OLY_FLOAT16, op##_f32, BOOL_OUT);                          \
    }                                                                                     \
    static void op##_bf16(const void *x, void *y, int64_t n, const void *p)               \
    {                                                                                     \
        half_unary(x, y, n, p, OLY_BFLOAT16, op##_f32, BOOL_OUT);                         \
    }
#define HALF_B(op, BOOL_OUT)                                                              \
    static void op##_f16(const void *a, const void *b, void *o, int64_t n, int mode)      \
    {                                                                                     \
        half_binary(a, b, o, n, mode, OLY_FLOAT16, op##_f32, BOOL_OUT);                   \
    }                                                                                     \
    static void op##_bf16(const void *a, const void *b, void *o, int64_t n, int mode)     \
    {                                                                                     \
        half_binary(a, b, o, n, mode, OLY_BFLOAT16, op##_f32, BOOL_OUT);                  \
    }

/* Integer dtypes for X-macros: X(suffix, T, unsigned T, signed T, wide unsigned, bits). */
#define SINTS(X)                                                                          \
    X(i8, int8_t, uint8_t, int8_t, uint32_t, 8)                                           \
    X(i16, int16_t, uint16_t, int16_t, uint32_t, 16)                                      \
    X(i32, int32_t, uint32_t, int32_t, uint32_t, 32)                                      \
    X(i64, int64_t, uint64_t, int64_t, uint64_t, 64)
#define UINTS(X)                                                                          \
    X(u8, uint8_t, uint8_t, int8_t, uint32_t, 8)                                          \
    X(u16, uint16_t, uint16_t, int16_t, uint32_t, 16)                                     \
    X(u32, uint32_t, uint32_t, int32_t, uint32_t, 32)                                     \
    X(u64, uint64_t, uint64_t, int64_t, uint64_t, 64)
#define INTS(X) SINTS(X) UINTS(X)

/* Table entries. */
#define E_SINT(op) [OLY_INT8] = op##_i8, [OLY_INT16] = op##_i16, [OLY_INT32] = op##_i32,      \
                   [OLY_INT64] = op##_i64
#define E_UINT(op) [OLY_UINT8] = op##_u8, [OLY_UINT16] = op##_u16, [OLY_UINT32] = op##_u32,   \
                   [OLY_UINT64] = op##_u64
#define E_INT(op) E_SINT(op), E_UINT(op)
#define E_FLOAT(op) [OLY_FLOAT16] = op##_f16, [OLY_BFLOAT16] = op##_bf16,                     \
                    [OLY_FLOAT32] = op##_f32, [OLY_FLOAT64] = op##_f64
#define E_CPLX(op) [OLY_COMPLEX64] = op##_c64, [OLY_COMPLEX128] = op##_c128
#define E_BOOL(op) [OLY_BOOL] = op##_bool

/* Float loops (f32, f64 and the half versions) and complex loops of a unary op. */
#define F_UNARY(op, EF, ED)                                                               \
    U_LOOP(op##_f32, float, float, EF)                                                    \
    U_LOOP(op##_f64, double, double, ED)                                                  \
    HALF_U(op, false)
#define C_UNARY(op, EC, EZ)                                                               \
    U_LOOP(op##_c64, c64, c64, EC)                                                        \
    U_LOOP(op##_c128, c128, c128, EZ)
#define F_BINARY(op, EF, ED)                                                              \
    B_LOOP(op##_f32, float, float, EF)                                                    \
    B_LOOP(op##_f64, double, double, ED)                                                  \
    HALF_B(op, false)
#define C_BINARY(op, EC, EZ)                                                              \
    B_LOOP(op##_c64, c64, c64, EC)                                                        \
    B_LOOP(op##_c128, c128, c128, EZ)

/* Identity and zero loops by element size (real/conj/imag of real dtypes). */
#define COPY_ZERO(SZ)                                                                     \
    static void copy##SZ(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        (void)p;                                                                          \
        if (x != y && n > 0) memmove(y, x, (size_t)n * SZ);                               \
    }                                                                                     \
    static void zero##SZ(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        (void)p;                                                                          \
        (void)x;                                                                          \
        if (n > 0) memset(y, 0, (size_t)n * SZ);                                          \
    }
COPY_ZERO(1)
COPY_ZERO(2)
COPY_ZERO(4)
COPY_ZERO(8)

/* ---------------------------------------------------------------- SIMD loops (x86-64 AVX2)
 *
 * The f32/f64 transcendental loops run 8 (f32) or 4 (f64) lanes at a time
 * through SLEEF's 1.0-ULP (u10) AVX2 functions when the CPU has AVX2 and FMA;
 * sqrt, rsqrt, floor and ceil use the exact instructions. The choice is made
 * once per loop call (simd_ok); the tail is padded into one more vector, so
 * every element of a call goes through the same function. Elsewhere, or with
 * OLYMPUS_NO_SIMD set in the environment, the scalar libm loops run. */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <sleef.h>
#pragma GCC pop_options
#define SIMD __attribute__((target("avx2,fma")))

/* fname: y[i] = VEXPR with v = x[i..i+W) as VT (W lanes of T). */
#define V_ULOOP(fname, T, VT, W, LOAD, STORE, VEXPR)                                      \
    SIMD static void fname(const void *xv, void *yv, int64_t n)                           \
    {                                                                                     \
        const T *xp = xv;                                                                 \
        T *yp = yv;                                                                       \
        int64_t i = 0;                                                                    \
        for (; i + W <= n; i += W) {                                                      \
            VT v = LOAD(xp + i);                                                          \
            STORE(yp + i, (VEXPR));                                                       \
        }                                                                                 \
        if (i < n) {                                                                      \
            T t[W] = {0};                                                                 \
            memcpy(t, xp + i, (size_t)(n - i) * sizeof(T));                              \
            VT v = LOAD(t);                                                               \
            STORE(t, (VEXPR));                                                            \
            memcpy(yp + i, t, (size_t)(n - i) * sizeof(T));                               \
        }                                                                                 \
    }

/* fname: o[i] = VEXPR with x, y the lanes of a and b (or a broadcast a[0] / b[0]). */
#define V_BLOOP(fname, T, VT, W, LOAD, STORE, SET1, VEXPR)                                \
    SIMD static void fname(const void *av, const void *bv, void *ov, int64_t n, int mode) \
    {                                                                                     \
        const T *ap = av, *bp = bv;                                                       \
        T *op = ov;                                                                       \
        int64_t i = 0;                                                                    \
        if (mode == A_SCALAR) {                                                           \
            const VT x = SET1(ap[0]);                                                     \
            for (; i + W <= n; i += W) {                                                  \
                VT y = LOAD(bp + i);                                                      \
                STORE(op + i, (VEXPR));                                                   \
            }                                                                             \
        } else if (mode == B_SCALAR) {                                                    \
            const VT y = SET1(bp[0]);                                                     \
            for (; i + W <= n; i += W) {                                                  \
                VT x = LOAD(ap + i);                                                      \
                STORE(op + i, (VEXPR));                                                   \
            }                                                                             \
        } else {                                                                          \
            for (; i + W <= n; i += W) {                                                  \
                VT x = LOAD(ap + i), y = LOAD(bp + i);                                    \
                STORE(op + i, (VEXPR));                                                   \
            }                                                                             \
        }                                                                                 \
        if (i < n) {                                                                      \
            T ta[W], tb[W];                                                               \
            for (int j = 0; j < W; j++) {                                                 \
                bool in_ = i + j < n;                                                     \
                ta[j] = mode == A_SCALAR ? ap[0] : in_ ? ap[i + j] : (T)1;                \
                tb[j] = mode == B_SCALAR ? bp[0] : in_ ? bp[i + j] : (T)1;                \
            }                                                                             \
            VT x = LOAD(ta), y = LOAD(tb);                                                \
            STORE(ta, (VEXPR));                                                           \
            memcpy(op + i, ta, (size_t)(n - i) * sizeof(T));                              \
        }                                                                                 \
    }

#define V_ULOOP_F32(fname, VEXPR) \
    V_ULOOP(fname, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, VEXPR)
#define V_ULOOP_F64(fname, VEXPR) \
    V_ULOOP(fname, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, VEXPR)
#define V_BLOOP_F32(fname, VEXPR) \
    V_BLOOP(fname, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, VEXPR)
#define V_BLOOP_F64(fname, VEXPR) \
    V_BLOOP(fname, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, VEXPR)

/* The f32 and f64 loops of a unary op: SIMD when available, else the scalar EF / ED. */
#define F_UNARY_V(op, EF, ED, VF, VD)                                                     \
    U_LOOP(op##_f32_s, float, float, EF)                                                  \
    U_LOOP(op##_f64_s, double, double, ED)                                                \
    V_ULOOP_F32(op##_f32_v, VF)                                                           \
    V_ULOOP_F64(op##_f64_v, VD)                                                           \
    static void op##_f32(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        if (oly__cpu_simd_ok()) op##_f32_v(x, y, n);                                               \
        else op##_f32_s(x, y, n, p);                                                      \
    }                                                                                     \
    static void op##_f64(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        if (oly__cpu_simd_ok()) op##_f64_v(x, y, n);                                               \
        else op##_f64_s(x, y, n, p);                                                      \
    }                                                                                     \
    HALF_U(op, false)
#define F_BINARY_V(op, EF, ED, VF, VD)                                                    \
    B_LOOP(op##_f32_s, float, float, EF)                                                  \
    B_LOOP(op##_f64_s, double, double, ED)                                                \
    V_BLOOP_F32(op##_f32_v, VF)                                                           \
    V_BLOOP_F64(op##_f64_v, VD)                                                           \
    static void op##_f32(const void *a, const void *b, void *o, int64_t n, int mode)      \
    {                                                                                     \
        if (oly__cpu_simd_ok()) op##_f32_v(a, b, o, n, mode);                                      \
        else op##_f32_s(a, b, o, n, mode);                                                \
    }                                                                                     \
    static void op##_f64(const void *a, const void *b, void *o, int64_t n, int mode)      \
    {                                                                                     \
        if (oly__cpu_simd_ok()) op##_f64_v(a, b, o, n, mode);                                      \
        else op##_f64_s(a, b, o, n, mode);                                                \
    }                                                                                     \
    HALF_B(op, false)

/* SLEEF's 1.0-ULP AVX2 functions by name. */
#define SF(f) Sleef_##f##f8_u10avx2(v)
#define SD(f) Sleef_##f##d4_u10avx2(v)

/* SLEEF's sinh/cosh, asinh/acosh and log1p have a narrower domain than libm:
 * past it they return inf where the true value is finite. The lanes of v
 * marked in bad go through the scalar libm function instead (rare inputs). */
SIMD static inline __m256 fix_f32(__m256 v, __m256 r, __m256 bad, float (*f)(float))
{
    int m = _mm256_movemask_ps(bad);
    if (!m) return r;
    float xs[8], rs[8];
    _mm256_storeu_ps(xs, v);
    _mm256_storeu_ps(rs, r);
    for (int j = 0; j < 8; j++)
        if (m >> j & 1) rs[j] = f(xs[j]);
    return _mm256_loadu_ps(rs);
}
SIMD static inline __m256d fix_f64(__m256d v, __m256d r, __m256d bad, double (*f)(double))
{
    int m = _mm256_movemask_pd(bad);
    if (!m) return r;
    double xs[4], rs[4];
    _mm256_storeu_pd(xs, v);
    _mm256_storeu_pd(rs, r);
    for (int j = 0; j < 4; j++)
        if (m >> j & 1) rs[j] = f(xs[j]);
    return _mm256_loadu_pd(rs);
}
/* Lanes with |v| > lim (NaN lanes are not marked). */
SIMD static inline __m256 abs_gt_f32(__m256 v, float lim)
{
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    return _mm256_cmp_ps(a, _mm256_set1_ps(lim), _CMP_GT_OQ);
}
SIMD static inline __m256d abs_gt_f64(__m256d v, double lim)
{
    __m256d a = _mm256_andnot_pd(_mm256_set1_pd(-0.0), v);
    return _mm256_cmp_pd(a, _mm256_set1_pd(lim), _CMP_GT_OQ);
}
/* SLEEF f over its domain |x| <= LF (f32) / LD (f64), libm past it. */
#define V_GUARDED(fn, LF, LD)                                                              \
    SIMD static inline __m256 fn##_vf(__m256 v)                                            \
    {                                                                                     \
        return fix_f32(v, Sleef_##fn##f8_u10avx2(v), abs_gt_f32(v, LF), fn##f);             \
    }                                                                                     \
    SIMD static inline __m256d fn##_vd(__m256d v)                                          \
    {                                                                                     \
        return fix_f64(v, Sleef_##fn##d4_u10avx2(v), abs_gt_f64(v, LD), fn);                \
    }
V_GUARDED(sinh, 88.0f, 709.0)
V_GUARDED(cosh, 88.0f, 709.0)
V_GUARDED(asinh, 1e18f, 1e150)
V_GUARDED(acosh, 1e18f, 1e150)
V_GUARDED(log1p, 1e37f, 1e300)
#else
#define F_UNARY_V(op, EF, ED, VF, VD) F_UNARY(op, EF, ED)
#define F_BINARY_V(op, EF, ED, VF, VD) F_BINARY(op, EF, ED)
#endif

/* ---------------------------------------------------------------- unary framework */

typedef enum { OUT_SAME, OUT_BOOL, OUT_REAL } out_rule;

typedef struct unary_op {
    const char *name;
    const char *accepts;    /* for errors: "a floating-point or complex operand" */
    out_rule out;
    oly_status (*check)(const oly_shape_ctx *c); /* extra params check, may be NULL */
    unary_fn fn[OLY_DTYPE_COUNT];               /* NULL: dtype not accepted */
} unary_op;

static oly_dtype real_dtype(oly_dtype t)
{
    return t == OLY_COMPLEX64 ? OLY_FLOAT32 : t == OLY_COMPLEX128 ? OLY_FLOAT64 : t;
}

static oly_status unary_shape(const unary_op *op, const oly_shape_ctx *c, oly_aval *out)
{
    if (c->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "%s: expected 1 operand, got %d", op->name, c->n_in);
    const oly_aval *x = &c->in[0];
    if (!valid_dtype(x->dtype) || !op->fn[x->dtype]) {
        char s[160];
        return oly__error(OLY_ERR_TYPE, "%s: expected %s, got %s", op->name, op->accepts,
                          fmt_aval(s, sizeof s, x));
    }
    if (op->check) OLY_TRY(op->check(c));
    *out = *x;
    if (op->out == OUT_BOOL) {
        out->dtype = OLY_BOOL;
        out->weak = false;
    } else if (op->out == OUT_REAL) {
        out->dtype = real_dtype(x->dtype);
    }
    return OLY_OK;
}

static oly_status unary_kernel(const unary_op *op, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    unary_fn f = valid_dtype(t) ? op->fn[t] : NULL;
    if (!f) return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %d", op->name, (int)t);
    int64_t lo, hi;
    split(c, oly_aval_size(&c->out_aval[0]), &lo, &hi);
    if (hi <= lo) return OLY_OK;
    size_t isz = oly_dtype_size(t), osz = oly_dtype_size(c->out_aval[0].dtype);
    f((const char *)c->in[0] + (size_t)lo * isz, (char *)c->out[0] + (size_t)lo * osz, hi - lo,
      c->params);
    return OLY_OK;
}

/* A row's TRANSPOSE argument: LINEAR(rule) for the linear rows, NONLINEAR
 * for the others (no transpose rule, on purpose). Elementwise rows never
 * split under partial evaluation. */
#define LINEAR(rule) .transpose = rule, .no_rule = OLY_RULE_PARTIAL_EVAL
#define NONLINEAR .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE

/* One unary row: op##_op must be defined before. */
#define UNARY_ROW(op, INPLACE, TRANSPOSE)                                                 \
    static oly_status op##_shape(const oly_shape_ctx *c, oly_aval *out)                   \
    {                                                                                     \
        return unary_shape(&op##_op, c, out);                                             \
    }                                                                                     \
    static oly_status op##_kernel(const oly_kernel_ctx *c) { return unary_kernel(&op##_op, c); } \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 1, .n_out = 1, .shape = op##_shape,   \
                                     .batch = elementwise_batch, .jvp = op##_jvp,         \
                                     TRANSPOSE};                             \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = INPLACE};
#define UNARY_ROW_P(op, INPLACE, PTYPE, FIELDS, TRANSPOSE)                                \
    static oly_status op##_shape(const oly_shape_ctx *c, oly_aval *out)                   \
    {                                                                                     \
        return unary_shape(&op##_op, c, out);                                             \
    }                                                                                     \
    static oly_status op##_kernel(const oly_kernel_ctx *c) { return unary_kernel(&op##_op, c); } \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 1, .n_out = 1, .shape = op##_shape,   \
                                     .params_size = sizeof(PTYPE), .fields = FIELDS,      \
                                     .n_fields = OLY_ARRAY_LEN(FIELDS),                   \
                                     .batch = elementwise_batch, .jvp = op##_jvp,         \
                                     TRANSPOSE};                             \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = INPLACE};

#define ACC_FLOAT "a floating-point operand"
#define ACC_INEXACT "a floating-point or complex operand"
#define ACC_NUM "a numeric (integer, floating-point or complex) operand"
#define ACC_BITS "a boolean or integer operand"

/* Float transcendental with complex support: one line per op. */
#define TRANSCENDENTAL(op, EF, ED, EC, EZ, VF, VD)                                        \
    F_UNARY_V(op, EF, ED, VF, VD)                                                         \
    C_UNARY(op, EC, EZ)                                                                   \
    static const unary_op op##_op = {#op, ACC_INEXACT, OUT_SAME, NULL,                    \
                                     {E_FLOAT(op), E_CPLX(op)}};                          \
    UNARY_ROW(op, true, NONLINEAR)
#define FLOAT_ONLY(op, EF, ED, VF, VD)                                                    \
    F_UNARY_V(op, EF, ED, VF, VD)                                                         \
    static const unary_op op##_op = {#op, ACC_FLOAT, OUT_SAME, NULL, {E_FLOAT(op)}};      \
    UNARY_ROW(op, true, NONLINEAR)

/* ---------------------------------------------------------------- unary: transcendental */

TRANSCENDENTAL(exp, expf(x), exp(x), cexpf(x), cexp(x), SF(exp), SD(exp))
TRANSCENDENTAL(exp2, exp2f(x), exp2(x), cexpf(x * (float)M_LN2), cexp(x * M_LN2), SF(exp2),
               SD(exp2))
TRANSCENDENTAL(log, logf(x), log(x), clogf(x), clog(x), SF(log), SD(log))
TRANSCENDENTAL(log1p, log1pf(x), log1p(x), clogf(1.0f + x), clog(1.0 + x), log1p_vf(v), log1p_vd(v))
TRANSCENDENTAL(expm1, expm1f(x), expm1(x), cexpf(x) - 1.0f, cexp(x) - 1.0, SF(expm1), SD(expm1))
TRANSCENDENTAL(sin, sinf(x), sin(x), csinf(x), csin(x), SF(sin), SD(sin))
TRANSCENDENTAL(cos, cosf(x), cos(x), ccosf(x), ccos(x), SF(cos), SD(cos))
TRANSCENDENTAL(tan, tanf(x), tan(x), ctanf(x), ctan(x), SF(tan), SD(tan))
TRANSCENDENTAL(asin, asinf(x), asin(x), casinf(x), casin(x), SF(asin), SD(asin))
TRANSCENDENTAL(acos, acosf(x), acos(x), cacosf(x), cacos(x), SF(acos), SD(acos))
TRANSCENDENTAL(atan, atanf(x), atan(x), catanf(x), catan(x), SF(atan), SD(atan))
TRANSCENDENTAL(sinh, sinhf(x), sinh(x), csinhf(x), csinh(x), sinh_vf(v), sinh_vd(v))
TRANSCENDENTAL(cosh, coshf(x), cosh(x), ccoshf(x), ccosh(x), cosh_vf(v), cosh_vd(v))
TRANSCENDENTAL(tanh, tanhf(x), tanh(x), ctanhf(x), ctanh(x), SF(tanh), SD(tanh))
TRANSCENDENTAL(asinh, asinhf(x), asinh(x), casinhf(x), casinh(x), asinh_vf(v), asinh_vd(v))
TRANSCENDENTAL(acosh, acoshf(x), acosh(x), cacoshf(x), cacosh(x), acosh_vf(v), acosh_vd(v))
TRANSCENDENTAL(atanh, atanhf(x), atanh(x), catanhf(x), catanh(x), SF(atanh), SD(atanh))
TRANSCENDENTAL(logistic, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)),
               1.0f / (1.0f + cexpf(-x)), 1.0 / (1.0 + cexp(-x)),
               _mm256_div_ps(_mm256_set1_ps(1.0f),
                             _mm256_add_ps(_mm256_set1_ps(1.0f),
                                           Sleef_expf8_u10avx2(_mm256_sub_ps(
                                               _mm256_setzero_ps(), v)))),
               _mm256_div_pd(_mm256_set1_pd(1.0),
                             _mm256_add_pd(_mm256_set1_pd(1.0),
                                           Sleef_expd4_u10avx2(_mm256_sub_pd(
                                               _mm256_setzero_pd(), v)))))
TRANSCENDENTAL(sqrt, sqrtf(x), sqrt(x), csqrtf(x), csqrt(x), _mm256_sqrt_ps(v),
               _mm256_sqrt_pd(v))
TRANSCENDENTAL(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x), 1.0f / csqrtf(x), 1.0 / csqrt(x),
               _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(v)),
               _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(v)))
FLOAT_ONLY(cbrt, cbrtf(x), cbrt(x), SF(cbrt), SD(cbrt))
FLOAT_ONLY(floor, floorf(x), floor(x), _mm256_floor_ps(v), _mm256_floor_pd(v))
FLOAT_ONLY(ceil, ceilf(x), ceil(x), _mm256_ceil_ps(v), _mm256_ceil_pd(v))

/* round: half away from zero (0) or half to even (1). */
U_LOOP(round_away_f32, float, float, roundf(x))
U_LOOP(round_even_f32, float, float, rintf(x))
U_LOOP(round_away_f64, double, double, round(x))
U_LOOP(round_even_f64, double, double, rint(x))
static bool round_even(const void *p)
{
    return p && ((const oly_params_round *)p)->rounding_method == 1;
}
static void round_f32(const void *x, void *y, int64_t n, const void *p)
{
    (round_even(p) ? round_even_f32 : round_away_f32)(x, y, n, p);
}
static void round_f64(const void *x, void *y, int64_t n, const void *p)
{
    (round_even(p) ? round_even_f64 : round_away_f64)(x, y, n, p);
}
HALF_U(round, false)
static oly_status round_check(const oly_shape_ctx *c)
{
    const oly_params_round *p = c->params;
    if (p && (p->rounding_method < 0 || p->rounding_method > 1))
        return oly__error(OLY_ERR_INVALID,
                          "round: rounding_method must be 0 (AWAY_FROM_ZERO) or 1 "
                          "(TO_NEAREST_EVEN), got %d",
                          p->rounding_method);
    return OLY_OK;
}
static const unary_op round_op = {"round", ACC_FLOAT, OUT_SAME, round_check, {E_FLOAT(round)}};
static const char *const round_methods[] = {"AWAY_FROM_ZERO", "TO_NEAREST_EVEN", NULL};
static const oly_param_field round_fields[] = {
    {.name = "rounding_method", .kind = OLY_FIELD_ENUM,
     .offset = offsetof(oly_params_round, rounding_method), .enum_names = round_methods},
};
UNARY_ROW_P(round, true, oly_params_round, round_fields, NONLINEAR)

/* is_finite -> bool */
U_LOOP(is_finite_f32, float, uint8_t, isfinite(x) != 0)
U_LOOP(is_finite_f64, double, uint8_t, isfinite(x) != 0)
HALF_U(is_finite, true)
static const unary_op is_finite_op = {"is_finite", ACC_FLOAT, OUT_BOOL, NULL,
                                      {E_FLOAT(is_finite)}};
UNARY_ROW(is_finite, false, NONLINEAR)

/* ---------------------------------------------------------------- unary: arithmetic */

/* neg: integers wrap (-INT_MIN == INT_MIN). */
#define NEG_I(s, T, UT, ST, WT, B) U_LOOP(neg_##s, T, T, (T)(0u - (WT)x))
INTS(NEG_I)
F_UNARY(neg, -x, -x)
C_UNARY(neg, -x, -x)
static const unary_op neg_op = {"neg", ACC_NUM, OUT_SAME, NULL,
                                {E_INT(neg), E_FLOAT(neg), E_CPLX(neg)}};
UNARY_ROW(neg, true, LINEAR(neg_transpose))

/* sign: -1/0/1; floats keep ±0 and NaN; complex x/|x|. */
#define SIGN_S(s, T, UT, ST, WT, B) U_LOOP(sign_##s, T, T, (x > 0) - (x < 0))
#define SIGN_U(s, T, UT, ST, WT, B) U_LOOP(sign_##s, T, T, x != 0)
SINTS(SIGN_S)
UINTS(SIGN_U)
F_UNARY(sign, x > 0 ? 1.0f : x < 0 ? -1.0f : x, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
C_UNARY(sign, x == 0 ? x : x / cabsf(x), x == 0 ? x : x / cabs(x))
static const unary_op sign_op = {"sign", ACC_NUM, OUT_SAME, NULL,
                                 {E_INT(sign), E_FLOAT(sign), E_CPLX(sign)}};
UNARY_ROW(sign, true, NONLINEAR)

/* abs: integers wrap (abs(INT_MIN) == INT_MIN); complex -> real. */
#define ABS_S(s, T, UT, ST, WT, B) U_LOOP(abs_##s, T, T, x < 0 ? (T)(0u - (WT)x) : x)
#define ABS_U(s, T, UT, ST, WT, B) U_LOOP(abs_##s, T, T, x)
SINTS(ABS_S)
UINTS(ABS_U)
F_UNARY(abs, fabsf(x), fabs(x))
U_LOOP(abs_c64, c64, float, cabsf(x))
U_LOOP(abs_c128, c128, double, cabs(x))
static const unary_op abs_op = {"abs", ACC_NUM, OUT_REAL, NULL,
                                {E_INT(abs), E_FLOAT(abs), E_CPLX(abs)}};
UNARY_ROW(abs, false, NONLINEAR)

/* square: integers wrap. */
#define SQUARE_I(s, T, UT, ST, WT, B) U_LOOP(square_##s, T, T, (T)((WT)x * (WT)x))
INTS(SQUARE_I)
F_UNARY(square, x * x, x * x)
C_UNARY(square, x * x, x * x)
static const unary_op square_op = {"square", ACC_NUM, OUT_SAME, NULL,
                                   {E_INT(square), E_FLOAT(square), E_CPLX(square)}};
UNARY_ROW(square, true, NONLINEAR)

/* not: logical for bool, bitwise for integers. */
U_LOOP(not_bool, uint8_t, uint8_t, x == 0)
#define NOT_I(s, T, UT, ST, WT, B) U_LOOP(not_##s, T, T, ~(WT)x)
INTS(NOT_I)
static const unary_op not_op = {"not", ACC_BITS, OUT_SAME, NULL, {E_BOOL(not), E_INT(not)}};
UNARY_ROW(not, true, NONLINEAR)

/* real / imag / conj: complex parts; real dtypes: identity, zeros, identity. */
U_LOOP(real_c64, c64, float, crealf(x))
U_LOOP(real_c128, c128, double, creal(x))
U_LOOP(imag_c64, c64, float, cimagf(x))
U_LOOP(imag_c128, c128, double, cimag(x))
U_LOOP(conj_c64, c64, c64, conjf(x))
U_LOOP(conj_c128, c128, c128, conj(x))
#define REAL_DTYPES(f)                                                                    \
    [OLY_INT8] = f##1, [OLY_INT16] = f##2, [OLY_INT32] = f##4, [OLY_INT64] = f##8,        \
    [OLY_UINT8] = f##1, [OLY_UINT16] = f##2, [OLY_UINT32] = f##4, [OLY_UINT64] = f##8,    \
    [OLY_FLOAT16] = f##2, [OLY_BFLOAT16] = f##2, [OLY_FLOAT32] = f##4, [OLY_FLOAT64] = f##8
static const unary_op real_op = {"real", ACC_NUM, OUT_REAL, NULL,
                                 {REAL_DTYPES(copy), E_CPLX(real)}};
UNARY_ROW(real, false, LINEAR(real_transpose))
static const unary_op imag_op = {"imag", ACC_NUM, OUT_REAL, NULL,
                                 {REAL_DTYPES(zero), E_CPLX(imag)}};
UNARY_ROW(imag, false, LINEAR(imag_transpose))
static const unary_op conj_op = {"conj", ACC_NUM, OUT_SAME, NULL,
                                 {REAL_DTYPES(copy), E_CPLX(conj)}};
UNARY_ROW(conj, true, LINEAR(conj_transpose))

/* integer_pow: x**y by repeated squaring in the dtype, over chunks so the
 * multiplies vectorise; negative y (inexact dtypes only) gives 1 / x**|y|. */
#define IPOW_LOOP(fname, T, MUL, ONE, INV)                                                \
    static void fname(const void *xv, void *yv, int64_t n, const void *params)            \
    {                                                                                     \
        const oly_params_integer_pow *P = params;                                         \
        int64_t e = P ? P->y : 1;                                                         \
        uint64_t mag = e < 0 ? 0u - (uint64_t)e : (uint64_t)e;                            \
        const T *xp = xv;                                                                 \
        T *yp = yv;                                                                       \
        T acc[CHUNK], b[CHUNK];                                                           \
        if (e == 2) { /* x**2 (the common case): one pass, same result */               \
            for (int64_t i = 0; i < n; i++) yp[i] = MUL(xp[i], xp[i]);                    \
            return;                                                                       \
        }                                                                                 \
        for (int64_t s = 0; s < n; s += CHUNK) {                                          \
            int64_t m = n - s < CHUNK ? n - s : CHUNK;                                    \
            for (int64_t j = 0; j < m; j++) {                                             \
                b[j] = xp[s + j];                                                         \
                acc[j] = ONE;                                                             \
            }                                                                             \
            for (uint64_t k = mag; k; k >>= 1) {                                          \
                if (k & 1)                                                                \
                    for (int64_t j = 0; j < m; j++) acc[j] = MUL(acc[j], b[j]);           \
                if (k > 1)                                                                \
                    for (int64_t j = 0; j < m; j++) b[j] = MUL(b[j], b[j]);               \
            }                                                                             \
            if (e < 0)                                                                    \
                for (int64_t j = 0; j < m; j++) yp[s + j] = INV(acc[j]);                  \
            else                                                                          \
                for (int64_t j = 0; j < m; j++) yp[s + j] = acc[j];                       \
        }                                                                                 \
    }
#define MUL_PLAIN(a, b) ((a) * (b))
#define INV_PLAIN(a) (1 / (a))
#define INV_NONE(a) (a)
#define IPOW_I(s, T, UT, ST, WT, B)                                                       \
    static inline T mulw_##s(T a, T b) { return (T)((WT)a * (WT)b); }                     \
    IPOW_LOOP(integer_pow_##s, T, mulw_##s, 1, INV_NONE)
INTS(IPOW_I)
IPOW_LOOP(integer_pow_f32, float, MUL_PLAIN, 1.0f, INV_PLAIN)
IPOW_LOOP(integer_pow_f64, double, MUL_PLAIN, 1.0, INV_PLAIN)
IPOW_LOOP(integer_pow_c64, c64, MUL_PLAIN, 1.0f, INV_PLAIN)
IPOW_LOOP(integer_pow_c128, c128, MUL_PLAIN, 1.0, INV_PLAIN)
HALF_U(integer_pow, false)
static oly_status integer_pow_check(const oly_shape_ctx *c)
{
    const oly_params_integer_pow *p = c->params;
    if (!p) return oly__error(OLY_ERR_INVALID, "integer_pow: missing params (y)");
    if (p->y < 0 && !oly_dtype_is_inexact(c->in[0].dtype)) {
        char s[160];
        return oly__error(OLY_ERR_TYPE,
                          "integer_pow: a negative exponent (y=%lld) needs a floating-point or "
                          "complex operand, got %s",
                          (long long)p->y, fmt_aval(s, sizeof s, &c->in[0]));
    }
    return OLY_OK;
}
static const unary_op integer_pow_op = {
    "integer_pow", ACC_NUM, OUT_SAME, integer_pow_check,
    {E_INT(integer_pow), E_FLOAT(integer_pow), E_CPLX(integer_pow)}};
static const oly_param_field integer_pow_fields[] = {
    {.name = "y", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_integer_pow, y)},
};
UNARY_ROW_P(integer_pow, true, oly_params_integer_pow, integer_pow_fields, NONLINEAR)

/* ---------------------------------------------------------------- convert_element_type */

static oly_status convert_shape(const oly_shape_ctx *c, oly_aval *out)
{
    const oly_params_convert *p = c->params;
    if (c->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "convert_element_type: expected 1 operand, got %d",
                          c->n_in);
    if (!p) return oly__error(OLY_ERR_INVALID, "convert_element_type: missing params (new_dtype)");
    if (!valid_dtype(p->new_dtype))
        return oly__error(OLY_ERR_INVALID, "convert_element_type: new_dtype %d is not a dtype",
                          (int)p->new_dtype);
    if (!valid_dtype(c->in[0].dtype))
        return oly__error(OLY_ERR_TYPE, "convert_element_type: operand dtype %d is not a dtype",
                          (int)c->in[0].dtype);
    *out = c->in[0];
    out->dtype = p->new_dtype;
    out->weak = p->weak;
    return OLY_OK;
}

static oly_status convert_kernel(const oly_kernel_ctx *c)
{
    oly_dtype from = c->in_aval[0].dtype, to = c->out_aval[0].dtype;
    int64_t lo, hi;
    split(c, oly_aval_size(&c->out_aval[0]), &lo, &hi);
    if (hi <= lo) return OLY_OK;
    size_t isz = oly_dtype_size(from), osz = oly_dtype_size(to);
    oly__convert((const char *)c->in[0] + (size_t)lo * isz, from,
                 (char *)c->out[0] + (size_t)lo * osz, to, hi - lo);
    return OLY_OK;
}

static const oly_param_field convert_fields[] = {
    {.name = "new_dtype", .kind = OLY_FIELD_DTYPE, .offset = offsetof(oly_params_convert, new_dtype)},
    {.name = "weak_type", .kind = OLY_FIELD_BOOL, .offset = offsetof(oly_params_convert, weak),
     .hidden = true},
};
const oly_prim oly__prim_convert_element_type = {
    .name = "convert_element_type", .n_in = 1, .n_out = 1,
    .params_size = sizeof(oly_params_convert), .fields = convert_fields,
    .n_fields = OLY_ARRAY_LEN(convert_fields), .shape = convert_shape,
    .batch = elementwise_batch, .jvp = convert_element_type_jvp,
    .transpose = convert_element_type_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* ---------------------------------------------------------------- binary framework */

typedef struct binary_op {
    const char *name;
    const char *accepts;    /* for errors: "floating-point operands" */
    bool bool_out;
    binary_fn fn[OLY_DTYPE_COUNT];
} binary_op;

static oly_status binary_shape(const binary_op *op, const oly_shape_ctx *c, oly_aval *out)
{
    char s1[160], s2[160];
    if (c->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "%s: expected 2 operands, got %d", op->name, c->n_in);
    const oly_aval *a = &c->in[0], *b = &c->in[1];
    if (a->dtype != b->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: operands must have the same dtype, got %s and %s",
                          op->name, fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
    if (!valid_dtype(a->dtype) || !op->fn[a->dtype])
        return oly__error(OLY_ERR_TYPE, "%s: expected %s, got %s and %s", op->name, op->accepts,
                          fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
    const oly_aval *shape_of;
    if (a->rank == 0) {
        shape_of = b;
    } else if (b->rank == 0) {
        shape_of = a;
    } else {
        bool same = a->rank == b->rank;
        for (int i = 0; same && i < a->rank; i++) same = a->dims[i] == b->dims[i];
        if (!same)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: incompatible shapes %s and %s (expected equal shapes or a "
                              "rank-0 operand)",
                              op->name, fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
        shape_of = a;
    }
    *out = *shape_of;
    if (op->bool_out) {
        out->dtype = OLY_BOOL;
        out->weak = false;
    } else {
        out->dtype = a->dtype;
        out->weak = a->weak && b->weak;
    }
    return OLY_OK;
}

static oly_status binary_kernel(const binary_op *op, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    binary_fn f = valid_dtype(t) ? op->fn[t] : NULL;
    if (!f) return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %d", op->name, (int)t);
    int64_t n = oly_aval_size(&c->out_aval[0]);
    int64_t na = oly_aval_size(&c->in_aval[0]), nb = oly_aval_size(&c->in_aval[1]);
    int mode = na == n && nb == n ? BOTH : na != n ? A_SCALAR : B_SCALAR;
    int64_t lo, hi;
    split(c, n, &lo, &hi);
    if (hi <= lo) return OLY_OK;
    size_t isz = oly_dtype_size(t), osz = oly_dtype_size(c->out_aval[0].dtype);
    const char *a = c->in[0], *b = c->in[1];
    if (mode != A_SCALAR) a += (size_t)lo * isz;
    if (mode != B_SCALAR) b += (size_t)lo * isz;
    f(a, b, (char *)c->out[0] + (size_t)lo * osz, hi - lo, mode);
    return OLY_OK;
}

#define BINARY_ROW(op, INPLACE, TRANSPOSE)                                                \
    static oly_status op##_shape(const oly_shape_ctx *c, oly_aval *out)                   \
    {                                                                                     \
        return binary_shape(&op##_op, c, out);                                            \
    }                                                                                     \
    static oly_status op##_kernel(const oly_kernel_ctx *c) { return binary_kernel(&op##_op, c); } \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 2, .n_out = 1, .shape = op##_shape,   \
                                     .batch = elementwise_batch, .jvp = op##_jvp,         \
                                     TRANSPOSE};                             \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = INPLACE};

#define ACC2_NUM "numeric (integer, floating-point or complex) operands"
#define ACC2_REAL "integer or floating-point operands"
#define ACC2_FLOAT "floating-point operands"
#define ACC2_BITS "boolean or integer operands"
#define ACC2_INT "integer operands"
#define ACC2_ANY_REAL "boolean, integer or floating-point operands"

/* ---------------------------------------------------------------- binary: arithmetic */

/* add sub mul: integers wrap. */
#define WRAP_OPS(s, T, UT, ST, WT, B)                                                     \
    B_LOOP(add_##s, T, T, (WT)x + (WT)y)                                                  \
    B_LOOP(sub_##s, T, T, (WT)x - (WT)y)                                                  \
    B_LOOP(mul_##s, T, T, (WT)x * (WT)y)
INTS(WRAP_OPS)
F_BINARY(add, x + y, x + y)
F_BINARY(sub, x - y, x - y)
F_BINARY(mul, x * y, x * y)
C_BINARY(add, x + y, x + y)
C_BINARY(sub, x - y, x - y)
C_BINARY(mul, x * y, x * y)
static const binary_op add_op = {"add", ACC2_NUM, false, {E_INT(add), E_FLOAT(add), E_CPLX(add)}};
static const binary_op sub_op = {"sub", ACC2_NUM, false, {E_INT(sub), E_FLOAT(sub), E_CPLX(sub)}};
static const binary_op mul_op = {"mul", ACC2_NUM, false, {E_INT(mul), E_FLOAT(mul), E_CPLX(mul)}};
BINARY_ROW(add, true, LINEAR(add_transpose))
BINARY_ROW(sub, true, LINEAR(sub_transpose))
BINARY_ROW(mul, true, LINEAR(mul_transpose))

/* div rounds toward zero; x/0 = -1 (signed) or all ones (unsigned); INT_MIN/-1 = INT_MIN.
 * rem has the dividend's sign; x%0 = x; INT_MIN%-1 = 0. */
#define DIVREM_S(s, T, UT, ST, WT, B)                                                     \
    static inline T div1_##s(T x, T y)                                                    \
    {                                                                                     \
        return y == 0 ? (T)-1 : y == -1 ? (T)(0u - (WT)x) : (T)(x / y);                   \
    }                                                                                     \
    static inline T rem1_##s(T x, T y) { return y == 0 ? x : y == -1 ? 0 : (T)(x % y); } \
    B_LOOP(div_##s, T, T, div1_##s(x, y))                                                 \
    B_LOOP(rem_##s, T, T, rem1_##s(x, y))
#define DIVREM_U(s, T, UT, ST, WT, B)                                                     \
    B_LOOP(div_##s, T, T, y == 0 ? (T)-1 : (T)(x / y))                                    \
    B_LOOP(rem_##s, T, T, y == 0 ? x : (T)(x % y))
SINTS(DIVREM_S)
UINTS(DIVREM_U)
F_BINARY(div, x / y, x / y)
C_BINARY(div, x / y, x / y)
F_BINARY(rem, fmodf(x, y), fmod(x, y))
static const binary_op div_op = {"div", ACC2_NUM, false, {E_INT(div), E_FLOAT(div), E_CPLX(div)}};
static const binary_op rem_op = {"rem", ACC2_REAL, false, {E_INT(rem), E_FLOAT(rem)}};
BINARY_ROW(div, true, LINEAR(div_transpose))
BINARY_ROW(rem, true, NONLINEAR)

/* pow: integers by squaring (wrapping); a negative exponent gives 1 for base 1,
 * ±1 for base -1, else 0. Complex: 0**0 = 1, 0**y = 0 for Re y > 0. */
#define POW_S(s, T, UT, ST, WT, B)                                                        \
    static inline T pow1_##s(T x, T y)                                                    \
    {                                                                                     \
        if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;                    \
        WT acc = 1, b = (WT)x;                                                            \
        for (UT e = (UT)y; e; e >>= 1) {                                                  \
            if (e & 1) acc *= b;                                                          \
            b *= b;                                                                       \
        }                                                                                 \
        return (T)acc;                                                                    \
    }                                                                                     \
    B_LOOP(pow_##s, T, T, pow1_##s(x, y))
#define POW_U(s, T, UT, ST, WT, B)                                                        \
    static inline T pow1_##s(T x, T y)                                                    \
    {                                                                                     \
        WT acc = 1, b = (WT)x;                                                            \
        for (T e = y; e; e >>= 1) {                                                       \
            if (e & 1) acc *= b;                                                          \
            b *= b;                                                                       \
        }                                                                                 \
        return (T)acc;                                                                    \
    }                                                                                     \
    B_LOOP(pow_##s, T, T, pow1_##s(x, y))
SINTS(POW_S)
UINTS(POW_U)
static inline c64 cpow64(c64 x, c64 y)
{
    if (y == 0) return 1;
    if (x == 0 && crealf(y) > 0) return 0;
    return cpowf(x, y);
}
static inline c128 cpow128(c128 x, c128 y)
{
    if (y == 0) return 1;
    if (x == 0 && creal(y) > 0) return 0;
    return cpow(x, y);
}
F_BINARY_V(pow, powf(x, y), pow(x, y), Sleef_powf8_u10avx2(x, y), Sleef_powd4_u10avx2(x, y))
C_BINARY(pow, cpow64(x, y), cpow128(x, y))
static const binary_op pow_op = {"pow", ACC2_NUM, false, {E_INT(pow), E_FLOAT(pow), E_CPLX(pow)}};
BINARY_ROW(pow, true, NONLINEAR)

/* max/min: NaN propagates; bool acts as or/and. */
#define MAXMIN_I(s, T, UT, ST, WT, B)                                                     \
    B_LOOP(max_##s, T, T, x > y ? x : y)                                                  \
    B_LOOP(min_##s, T, T, x < y ? x : y)
INTS(MAXMIN_I)
B_LOOP(max_bool, uint8_t, uint8_t, (x | y) != 0)
B_LOOP(min_bool, uint8_t, uint8_t, (x && y))
F_BINARY(max, (x > y || x != x) ? x : y, (x > y || x != x) ? x : y)
F_BINARY(min, (x < y || x != x) ? x : y, (x < y || x != x) ? x : y)
static const binary_op max_op = {"max", ACC2_ANY_REAL, false,
                                 {E_BOOL(max), E_INT(max), E_FLOAT(max)}};
static const binary_op min_op = {"min", ACC2_ANY_REAL, false,
                                 {E_BOOL(min), E_INT(min), E_FLOAT(min)}};
BINARY_ROW(max, true, NONLINEAR)
BINARY_ROW(min, true, NONLINEAR)

/* atan2, nextafter: floats. nextafter on 16-bit formats steps the bit pattern. */
F_BINARY_V(atan2, atan2f(x, y), atan2(x, y), Sleef_atan2f8_u10avx2(x, y),
           Sleef_atan2d4_u10avx2(x, y))
static const binary_op atan2_op = {"atan2", ACC2_FLOAT, false, {E_FLOAT(atan2)}};
BINARY_ROW(atan2, true, NONLINEAR)

B_LOOP(nextafter_f32, float, float, nextafterf(x, y))
B_LOOP(nextafter_f64, double, double, nextafter(x, y))
static uint16_t half_nextafter(uint16_t x, uint16_t y, oly_dtype t)
{
    float fx, fy;
    halves_to_float(&x, t, &fx, 1);
    halves_to_float(&y, t, &fy, 1);
    if (fx != fx) return x;
    if (fy != fy) return y;
    if (fx == fy) return y;
    if (fx == 0) return (uint16_t)((y & 0x8000u) | 1u);
    bool away = (fx < fy) == (fx > 0);
    return (uint16_t)(away ? x + 1u : x - 1u);
}
B_LOOP(nextafter_f16, uint16_t, uint16_t, half_nextafter(x, y, OLY_FLOAT16))
B_LOOP(nextafter_bf16, uint16_t, uint16_t, half_nextafter(x, y, OLY_BFLOAT16))
static const binary_op nextafter_op = {"nextafter", ACC2_FLOAT, false, {E_FLOAT(nextafter)}};
BINARY_ROW(nextafter, true, NONLINEAR)

/* ---------------------------------------------------------------- binary: bits */

#define BITS_I(s, T, UT, ST, WT, B)                                                       \
    B_LOOP(and_##s, T, T, x & y)                                                          \
    B_LOOP(or_##s, T, T, x | y)                                                           \
    B_LOOP(xor_##s, T, T, x ^ y)
INTS(BITS_I)
B_LOOP(and_bool, uint8_t, uint8_t, (x && y))
B_LOOP(or_bool, uint8_t, uint8_t, (x || y))
B_LOOP(xor_bool, uint8_t, uint8_t, (x != 0) != (y != 0))
static const binary_op and_op = {"and", ACC2_BITS, false, {E_BOOL(and), E_INT(and)}};
static const binary_op or_op = {"or", ACC2_BITS, false, {E_BOOL(or), E_INT(or)}};
static const binary_op xor_op = {"xor", ACC2_BITS, false, {E_BOOL(xor), E_INT(xor)}};
BINARY_ROW(and, true, NONLINEAR)
BINARY_ROW(or, true, NONLINEAR)
BINARY_ROW(xor, true, NONLINEAR)

/* Shifts act on the bit pattern; a shift count outside [0, bits) gives 0, or
 * the sign fill for the arithmetic right shift. */
#define SHIFT_I(s, T, UT, ST, WT, B)                                                      \
    B_LOOP(shift_left_##s, T, T, (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x << (unsigned)y)) \
    B_LOOP(shift_right_logical_##s, T, T,                                                 \
           (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x >> (unsigned)y))                       \
    B_LOOP(shift_right_arithmetic_##s, T, T,                                              \
           (uint64_t)y >= B ? (T)((ST)x < 0 ? -1 : 0) : (T)((ST)x >> (unsigned)y))
INTS(SHIFT_I)
static const binary_op shift_left_op = {"shift_left", ACC2_INT, false, {E_INT(shift_left)}};
static const binary_op shift_right_logical_op = {"shift_right_logical", ACC2_INT, false,
                                                 {E_INT(shift_right_logical)}};
static const binary_op shift_right_arithmetic_op = {"shift_right_arithmetic", ACC2_INT, false,
                                                    {E_INT(shift_right_arithmetic)}};
BINARY_ROW(shift_left, true, NONLINEAR)
BINARY_ROW(shift_right_logical, true, NONLINEAR)
BINARY_ROW(shift_right_arithmetic, true, NONLINEAR)

/* ---------------------------------------------------------------- binary: comparisons */

#define CMP_ALL(op, OPR)                                                                  \
    B_LOOP(op##_bool, uint8_t, uint8_t, (x != 0) OPR (y != 0))                            \
    B_LOOP(op##_f32, float, uint8_t, x OPR y)                                             \
    B_LOOP(op##_f64, double, uint8_t, x OPR y)                                            \
    HALF_B(op, true)
#define CMP_I(s, T, UT, ST, WT, B)                                                        \
    B_LOOP(eq_##s, T, uint8_t, x == y)                                                    \
    B_LOOP(ne_##s, T, uint8_t, x != y)                                                    \
    B_LOOP(lt_##s, T, uint8_t, x < y)                                                     \
    B_LOOP(le_##s, T, uint8_t, x <= y)                                                    \
    B_LOOP(gt_##s, T, uint8_t, x > y)                                                     \
    B_LOOP(ge_##s, T, uint8_t, x >= y)
INTS(CMP_I)
CMP_ALL(eq, ==)
CMP_ALL(ne, !=)
CMP_ALL(lt, <)
CMP_ALL(le, <=)
CMP_ALL(gt, >)
CMP_ALL(ge, >=)
B_LOOP(eq_c64, c64, uint8_t, x == y)
B_LOOP(eq_c128, c128, uint8_t, x == y)
B_LOOP(ne_c64, c64, uint8_t, x != y)
B_LOOP(ne_c128, c128, uint8_t, x != y)
static const binary_op eq_op = {"eq", "operands of any dtype", true,
                                {E_BOOL(eq), E_INT(eq), E_FLOAT(eq), E_CPLX(eq)}};
static const binary_op ne_op = {"ne", "operands of any dtype", true,
                                {E_BOOL(ne), E_INT(ne), E_FLOAT(ne), E_CPLX(ne)}};
static const binary_op lt_op = {"lt", ACC2_ANY_REAL, true, {E_BOOL(lt), E_INT(lt), E_FLOAT(lt)}};
static const binary_op le_op = {"le", ACC2_ANY_REAL, true, {E_BOOL(le), E_INT(le), E_FLOAT(le)}};
static const binary_op gt_op = {"gt", ACC2_ANY_REAL, true, {E_BOOL(gt), E_INT(gt), E_FLOAT(gt)}};
static const binary_op ge_op = {"ge", ACC2_ANY_REAL, true, {E_BOOL(ge), E_INT(ge), E_FLOAT(ge)}};
BINARY_ROW(eq, false, NONLINEAR)
BINARY_ROW(ne, false, NONLINEAR)
BINARY_ROW(lt, false, NONLINEAR)
BINARY_ROW(le, false, NONLINEAR)
BINARY_ROW(gt, false, NONLINEAR)
BINARY_ROW(ge, false, NONLINEAR)

/* ---------------------------------------------------------------- select_n */

/* select_n(which, *cases): which is bool (one or two cases: false picks
 * cases[0]) or int32 (an index into cases, clamped to range); every case has
 * one dtype and shape; which has that shape or rank 0. */
static oly_status select_n_shape(const oly_shape_ctx *c, oly_aval *out)
{
    char s1[160], s2[160];
    if (c->n_in < 2)
        return oly__error(OLY_ERR_INVALID,
                          "select_n: expected a predicate and at least one case, got %d inputs",
                          c->n_in);
    const oly_aval *w = &c->in[0], *c0 = &c->in[1];
    int n_cases = c->n_in - 1;
    if (w->dtype != OLY_BOOL && w->dtype != OLY_INT32)
        return oly__error(OLY_ERR_TYPE, "select_n: predicate must be bool or int32, got %s",
                          fmt_aval(s1, sizeof s1, w));
    if (w->dtype == OLY_BOOL && n_cases > 2)
        return oly__error(OLY_ERR_INVALID,
                          "select_n: a bool predicate selects from at most 2 cases, got %d",
                          n_cases);
    bool weak = true;
    for (int i = 1; i < c->n_in; i++) {
        const oly_aval *ci = &c->in[i];
        if (ci->dtype != c0->dtype)
            return oly__error(OLY_ERR_TYPE,
                              "select_n: cases must have the same dtype, got %s and %s (case %d)",
                              fmt_aval(s1, sizeof s1, c0), fmt_aval(s2, sizeof s2, ci), i - 1);
        if (!oly_aval_equal(ci, c0))
            return oly__error(OLY_ERR_SHAPE,
                              "select_n: cases must have the same shape, got %s and %s (case %d)",
                              fmt_aval(s1, sizeof s1, c0), fmt_aval(s2, sizeof s2, ci), i - 1);
        weak = weak && ci->weak;
    }
    if (!valid_dtype(c0->dtype))
        return oly__error(OLY_ERR_TYPE, "select_n: case dtype %d is not a dtype", (int)c0->dtype);
    if (w->rank != 0) {
        bool same = w->rank == c0->rank;
        for (int i = 0; same && i < w->rank; i++) same = w->dims[i] == c0->dims[i];
        if (!same)
            return oly__error(OLY_ERR_SHAPE,
                              "select_n: predicate shape %s must match the cases' %s or be rank 0",
                              fmt_aval(s1, sizeof s1, w), fmt_aval(s2, sizeof s2, c0));
    }
    *out = *c0;
    out->weak = weak;
    return OLY_OK;
}

typedef struct { uint64_t lo, hi; } u128_t;

/* o[i] = cases[which[i]][i] for one element type T and predicate type W. */
#define SELECT_LOOP(fname, T)                                                             \
    static void fname(const void *wv, bool wbool, const void *const *cs, int nc, void *ov, \
                      int64_t lo, int64_t hi)                                             \
    {                                                                                     \
        T *o = ov;                                                                        \
        if (wbool && nc == 2) {                                                           \
            const uint8_t *w = wv;                                                        \
            const T *f = cs[0], *t = cs[1];                                               \
            for (int64_t i = lo; i < hi; i++) o[i] = w[i] ? t[i] : f[i];                  \
        } else if (wbool) {                                                               \
            const T *f = cs[0];                                                           \
            for (int64_t i = lo; i < hi; i++) o[i] = f[i];                                \
        } else {                                                                          \
            const int32_t *w = wv;                                                        \
            for (int64_t i = lo; i < hi; i++) {                                           \
                int32_t k = w[i] < 0 ? 0 : w[i] >= nc ? nc - 1 : w[i];                    \
                o[i] = ((const T *)cs[k])[i];                                             \
            }                                                                             \
        }                                                                                 \
    }
SELECT_LOOP(select1, uint8_t)
SELECT_LOOP(select2, uint16_t)
SELECT_LOOP(select4, uint32_t)
SELECT_LOOP(select8, uint64_t)
SELECT_LOOP(select16, u128_t)

static oly_status select_n_kernel(const oly_kernel_ctx *c)
{
    int nc = c->n_in - 1;
    const oly_aval *oa = &c->out_aval[0];
    int64_t lo, hi;
    split(c, oly_aval_size(oa), &lo, &hi);
    if (hi <= lo || nc < 1) return OLY_OK;
    size_t sz = oly_dtype_size(oa->dtype);
    bool wbool = c->in_aval[0].dtype == OLY_BOOL;
    const void *const *cs = c->in + 1;
    if (c->in_aval[0].rank == 0) {
        /* One choice for every element. */
        int64_t k = wbool ? *(const uint8_t *)c->in[0] != 0 : *(const int32_t *)c->in[0];
        if (k < 0) k = 0;
        if (k >= nc) k = nc - 1;
        const char *src = (const char *)cs[k] + (size_t)lo * sz;
        char *dst = (char *)c->out[0] + (size_t)lo * sz;
        if (src != dst) memmove(dst, src, (size_t)(hi - lo) * sz);
        return OLY_OK;
    }
    switch (sz) {
    case 1: select1(c->in[0], wbool, cs, nc, c->out[0], lo, hi); break;
    case 2: select2(c->in[0], wbool, cs, nc, c->out[0], lo, hi); break;
    case 4: select4(c->in[0], wbool, cs, nc, c->out[0], lo, hi); break;
    case 8: select8(c->in[0], wbool, cs, nc, c->out[0], lo, hi); break;
    case 16: select16(c->in[0], wbool, cs, nc, c->out[0], lo, hi); break;
    default:
        return oly__error(OLY_ERR_INTERNAL, "select_n: element size %zu not handled", sz);
    }
    return OLY_OK;
}

const oly_prim oly__prim_select_n = {
    .name = "select_n", .n_in = -1, .n_out = 1, .shape = select_n_shape,
    .batch = elementwise_batch, .jvp = select_n_jvp, .transpose = select_n_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* CPU kernel entries of the rows above whose kernels are not generated with
 * them (src/cpu/table.c collects every oly__cpu_<name>). */
const oly_cpu_kernel oly__cpu_convert_element_type = {.fn = convert_kernel};
const oly_cpu_kernel oly__cpu_select_n = {.fn = select_n_kernel};

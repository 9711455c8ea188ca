/* elementwise.c — the elementwise primitives (unary, binary, select_n): their
 * shape rules, with the operand dtypes each row accepts (oly_prim.dtypes), and
 * their transformation rules (batch, jvp, and transpose for the linear rows).
 * Their CPU kernels, a loop for every accepted dtype, are src/cpu/elementwise.c.
 * Binary operands have one dtype and one shape, or one of them is rank 0 and
 * broadcasts. */
#include "internal.h"
#include "trans/trans.h"

#include <math.h>

/* ---------------------------------------------------------------- helpers */

static const char *fmt_aval(char *buf, size_t n, const oly_aval *a)
{
    oly_aval_format(buf, n, a);
    return buf;
}

/* ---------------------------------------------------------------- transformation rules
 *
 * batch: one rule for every row (oly__elementwise_batch). jvp: one rule per
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
oly_status oly__elementwise_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
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
oly_status oly__elementwise_unary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                      const oly_atom *tangent, const bool *tan_nz,
                                      oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz,
                                      oly_deriv_fn f, bool divide)
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
        return oly__elementwise_unary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out,   \
                                          tangent_out, out_nz, op##_deriv, DIVIDE);       \
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
oly_status oly__elementwise_binary_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *primal, const oly_atom *tangent,
                                       const bool *tan_nz, oly_atom *primal_out,
                                       oly_atom *tangent_out, bool *out_nz,
                                       oly_partial_fn partial)
{
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    oly_atom acc = {0};
    bool have = false;
    for (int i = 0; i < 2; i++) {
        if (!tan_nz[i]) continue;
        oly_atom d, term = tangent[i];
        OLY_TRY(partial(b, eqn, i, primal[0], primal[1], primal_out[0], &d));
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
        return oly__elementwise_binary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out,  \
                                           tangent_out, out_nz, op##_partial);            \
    }
#define PARTIAL(op)                                                                       \
    static oly_status op##_partial(oly_builder *b, const oly_eqn *eqn, int which, oly_atom x, \
                                   oly_atom y, oly_atom out, oly_atom *d)

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
static oly_status maxmin_partial(oly_builder *b, const oly_eqn *eqn, int which, oly_atom x,
                                 oly_atom y, oly_atom out, oly_atom *d)
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

/* ---------------------------------------------------------------- accepted dtypes
 *
 * What a row accepts, by kind K: D_K, the dtype mask of its row (bit 1 << t),
 * which the shape rule checks, and ACC_K / ACC2_K, the words of the unary /
 * binary type error. */

_Static_assert(OLY_DTYPE_COUNT <= 32, "oly_prim.dtypes is a 32-bit mask");
#define D(t) (1u << (t))
#define D_BOOL D(OLY_BOOL)
#define D_INT (D(OLY_INT8) | D(OLY_INT16) | D(OLY_INT32) | D(OLY_INT64) | D(OLY_UINT8) |     \
               D(OLY_UINT16) | D(OLY_UINT32) | D(OLY_UINT64))
#define D_FLOAT (D(OLY_FLOAT16) | D(OLY_BFLOAT16) | D(OLY_FLOAT32) | D(OLY_FLOAT64))
#define D_CPLX (D(OLY_COMPLEX64) | D(OLY_COMPLEX128))
#define D_INEXACT (D_FLOAT | D_CPLX)
#define D_NUM (D_INT | D_FLOAT | D_CPLX)
#define D_REAL (D_INT | D_FLOAT)
#define D_BITS (D_BOOL | D_INT)
#define D_ANY_REAL (D_BOOL | D_INT | D_FLOAT)
#define D_ANY (D_BOOL | D_INT | D_FLOAT | D_CPLX)

#define ACC_FLOAT "a floating-point operand"
#define ACC_INEXACT "a floating-point or complex operand"
#define ACC_NUM "a numeric (integer, floating-point or complex) operand"
#define ACC_BITS "a boolean or integer operand"

#define ACC2_NUM "numeric (integer, floating-point or complex) operands"
#define ACC2_REAL "integer or floating-point operands"
#define ACC2_FLOAT "floating-point operands"
#define ACC2_BITS "boolean or integer operands"
#define ACC2_INT "integer operands"
#define ACC2_ANY_REAL "boolean, integer or floating-point operands"
#define ACC2_ANY "operands of any dtype"

/* Whether the row p accepts operands of dtype t. */
static bool accepts(const oly_prim *p, oly_dtype t)
{
    return (unsigned)t < OLY_DTYPE_COUNT && (p->dtypes & D(t));
}

/* A row's TRANSPOSE argument: LINEAR(rule) for the linear rows, NONLINEAR
 * for the others (no transpose rule, on purpose). Elementwise rows never
 * split under partial evaluation. */
#define LINEAR(rule) .transpose = rule, .no_rule = OLY_RULE_PARTIAL_EVAL
#define NONLINEAR .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE
/* A row's PARAMS argument: NO_PARAMS, or PARAMS(struct type, field table). */
#define NO_PARAMS .params_size = 0
#define PARAMS(T, FIELDS) .params_size = sizeof(T), .fields = FIELDS, .n_fields = OLY_ARRAY_LEN(FIELDS)

/* ---------------------------------------------------------------- unary framework */

typedef enum { OUT_SAME, OUT_BOOL, OUT_REAL } out_rule;

typedef struct unary_op {
    const char *name;
    const char *accepts;    /* for errors: "a floating-point or complex operand" */
    out_rule out;
    oly_status (*check)(const oly_shape_ctx *c); /* extra params check, may be NULL */
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
    if (!accepts(c->prim, x->dtype)) {
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

/* One unary row accepting kind K (above), with its output dtype rule OUT, an
 * extra check of the params (or NULL), TRANSPOSE and PARAMS. */
#define UNARY_ROW(op, K, OUT, CHECK, TRANSPOSE, PARAMS_)                                  \
    static const unary_op op##_op = {#op, ACC_##K, OUT, CHECK};                           \
    static oly_status op##_shape(const oly_shape_ctx *c, oly_aval *out)                   \
    {                                                                                     \
        return unary_shape(&op##_op, c, out);                                             \
    }                                                                                     \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 1, .n_out = 1, PARAMS_,         \
                                     .shape = op##_shape, .dtypes = D_##K,                \
                                     .batch = oly__elementwise_batch, .jvp = op##_jvp,         \
                                     TRANSPOSE};
#define UNARY(op, K) UNARY_ROW(op, K, OUT_SAME, NULL, NONLINEAR, NO_PARAMS)

/* ---------------------------------------------------------------- unary rows */

UNARY(exp, INEXACT)
UNARY(exp2, INEXACT)
UNARY(log, INEXACT)
UNARY(log1p, INEXACT)
UNARY(expm1, INEXACT)
UNARY(sin, INEXACT)
UNARY(cos, INEXACT)
UNARY(tan, INEXACT)
UNARY(asin, INEXACT)
UNARY(acos, INEXACT)
UNARY(atan, INEXACT)
UNARY(sinh, INEXACT)
UNARY(cosh, INEXACT)
UNARY(tanh, INEXACT)
UNARY(asinh, INEXACT)
UNARY(acosh, INEXACT)
UNARY(atanh, INEXACT)
UNARY(logistic, INEXACT)
UNARY(sqrt, INEXACT)
UNARY(rsqrt, INEXACT)
UNARY(cbrt, FLOAT)
UNARY(floor, FLOAT)
UNARY(ceil, FLOAT)

/* round: half away from zero (0) or half to even (1). */
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
static const char *const round_methods[] = {"AWAY_FROM_ZERO", "TO_NEAREST_EVEN", NULL};
static const oly_param_field round_fields[] = {
    {.name = "rounding_method", .kind = OLY_FIELD_ENUM,
     .offset = offsetof(oly_params_round, rounding_method), .enum_names = round_methods},
};
UNARY_ROW(round, FLOAT, OUT_SAME, round_check, NONLINEAR, PARAMS(oly_params_round, round_fields))

UNARY_ROW(is_finite, FLOAT, OUT_BOOL, NULL, NONLINEAR, NO_PARAMS)

/* neg, square: integers wrap; sign: -1/0/1, complex x/|x|; abs: complex -> real. */
UNARY_ROW(neg, NUM, OUT_SAME, NULL, LINEAR(neg_transpose), NO_PARAMS)
UNARY(sign, NUM)
UNARY_ROW(abs, NUM, OUT_REAL, NULL, NONLINEAR, NO_PARAMS)
UNARY(square, NUM)

/* not: logical for bool, bitwise for integers. */
UNARY(not, BITS)

/* real / imag / conj: complex parts; real dtypes: identity, zeros, identity. */
UNARY_ROW(real, NUM, OUT_REAL, NULL, LINEAR(real_transpose), NO_PARAMS)
UNARY_ROW(imag, NUM, OUT_REAL, NULL, LINEAR(imag_transpose), NO_PARAMS)
UNARY_ROW(conj, NUM, OUT_SAME, NULL, LINEAR(conj_transpose), NO_PARAMS)

/* integer_pow: x**y; a negative y needs an inexact dtype. */
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
static const oly_param_field integer_pow_fields[] = {
    {.name = "y", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_integer_pow, y)},
};
UNARY_ROW(integer_pow, NUM, OUT_SAME, integer_pow_check, NONLINEAR,
          PARAMS(oly_params_integer_pow, integer_pow_fields))

/* ---------------------------------------------------------------- convert_element_type */

static oly_status convert_shape(const oly_shape_ctx *c, oly_aval *out)
{
    const oly_params_convert *p = c->params;
    if (c->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "convert_element_type: expected 1 operand, got %d",
                          c->n_in);
    if (!p) return oly__error(OLY_ERR_INVALID, "convert_element_type: missing params (new_dtype)");
    if ((unsigned)p->new_dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_INVALID, "convert_element_type: new_dtype %d is not a dtype",
                          (int)p->new_dtype);
    if (!accepts(c->prim, c->in[0].dtype))
        return oly__error(OLY_ERR_TYPE, "convert_element_type: operand dtype %d is not a dtype",
                          (int)c->in[0].dtype);
    *out = c->in[0];
    out->dtype = p->new_dtype;
    out->weak = p->weak;
    return OLY_OK;
}

static const oly_param_field convert_fields[] = {
    {.name = "new_dtype", .kind = OLY_FIELD_DTYPE, .offset = offsetof(oly_params_convert, new_dtype)},
    {.name = "weak_type", .kind = OLY_FIELD_BOOL, .offset = offsetof(oly_params_convert, weak),
     .hidden = true},
};
const oly_prim oly__prim_convert_element_type = {
    .name = "convert_element_type", .n_in = 1, .n_out = 1,
    PARAMS(oly_params_convert, convert_fields), .shape = convert_shape, .dtypes = D_ANY,
    .batch = oly__elementwise_batch, .jvp = convert_element_type_jvp,
    .transpose = convert_element_type_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* ---------------------------------------------------------------- binary framework */

typedef struct binary_op {
    const char *name;
    const char *accepts;    /* for errors: "floating-point operands" */
    bool bool_out;
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
    if (!accepts(c->prim, a->dtype))
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

/* One binary row accepting kind K (above), with a bool output or not. */
#define BINARY_ROW(op, K, BOOL_OUT, TRANSPOSE)                                            \
    static const binary_op op##_op = {#op, ACC2_##K, BOOL_OUT};                           \
    static oly_status op##_shape(const oly_shape_ctx *c, oly_aval *out)                   \
    {                                                                                     \
        return binary_shape(&op##_op, c, out);                                            \
    }                                                                                     \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 2, .n_out = 1,                  \
                                     .shape = op##_shape, .dtypes = D_##K,                \
                                     .batch = oly__elementwise_batch, .jvp = op##_jvp,         \
                                     TRANSPOSE};

/* ---------------------------------------------------------------- binary rows */

/* add sub mul (integers wrap), div (rounds toward zero), rem (the dividend's sign). */
BINARY_ROW(add, NUM, false, LINEAR(add_transpose))
BINARY_ROW(sub, NUM, false, LINEAR(sub_transpose))
BINARY_ROW(mul, NUM, false, LINEAR(mul_transpose))
BINARY_ROW(div, NUM, false, LINEAR(div_transpose))
BINARY_ROW(rem, REAL, false, NONLINEAR)
BINARY_ROW(pow, NUM, false, NONLINEAR)
/* max/min: NaN propagates; bool acts as or/and. */
BINARY_ROW(max, ANY_REAL, false, NONLINEAR)
BINARY_ROW(min, ANY_REAL, false, NONLINEAR)
BINARY_ROW(atan2, FLOAT, false, NONLINEAR)
BINARY_ROW(nextafter, FLOAT, false, NONLINEAR)

/* bits: logical for bool, bitwise for integers; shifts act on the bit pattern. */
BINARY_ROW(and, BITS, false, NONLINEAR)
BINARY_ROW(or, BITS, false, NONLINEAR)
BINARY_ROW(xor, BITS, false, NONLINEAR)
BINARY_ROW(shift_left, INT, false, NONLINEAR)
BINARY_ROW(shift_right_logical, INT, false, NONLINEAR)
BINARY_ROW(shift_right_arithmetic, INT, false, NONLINEAR)

/* comparisons -> bool; complex only for equality. */
BINARY_ROW(eq, ANY, true, NONLINEAR)
BINARY_ROW(ne, ANY, true, NONLINEAR)
BINARY_ROW(lt, ANY_REAL, true, NONLINEAR)
BINARY_ROW(le, ANY_REAL, true, NONLINEAR)
BINARY_ROW(gt, ANY_REAL, true, NONLINEAR)
BINARY_ROW(ge, ANY_REAL, true, NONLINEAR)

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
    if (!accepts(c->prim, c0->dtype))
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

const oly_prim oly__prim_select_n = {
    .name = "select_n", .n_in = -1, .n_out = 1, .shape = select_n_shape, .dtypes = D_ANY,
    .batch = oly__elementwise_batch, .jvp = select_n_jvp, .transpose = select_n_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* special.c — the special-function elementwise rows, as lax has them: erf,
 * erfc, erf_inv, lgamma, digamma, bessel_i0e, bessel_i1e (unary); igamma,
 * igammac, igamma_grad_a, random_gamma_grad, polygamma, zeta (binary: equal
 * shapes, or one operand rank 0). Floating-point operands only (float16 and
 * bfloat16 compute in float32). Their shape rules and transformation rules
 * are here; the CPU kernels are src/cpu/special.c. None is linear: every
 * row's transpose slot is marked empty.
 *
 * jvp rules, as JAX's:
 *   erf'      = 2/sqrt(pi) exp(-x^2)        erfc' = -erf'
 *   erf_inv'  = sqrt(pi)/2 exp(erf_inv(x)^2)
 *   lgamma'   = digamma                     digamma' = polygamma(1, x)
 *   bessel_i0e' = i1e(x) - sign(x) i0e(x)
 *   bessel_i1e' = i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at |x| <= eps
 *   igamma(a, x): d/da = igamma_grad_a(a, x), d/dx = exp(-x + (a-1) log x - lgamma(a))
 *     ((a-1) log x read as 0 at a == 1); igammac: the negatives
 *   igamma_grad_a(a, x): d/dx = d/dx igamma (log x - digamma(a))
 *   polygamma(n, x): d/dx = polygamma(n + 1, x)
 *   zeta(s, q): d/dq = -s zeta(s + 1, q)
 *   random_gamma_grad: none (JAX has none either; the slot is marked empty)
 * Derivatives in the other operand of igamma_grad_a (a second derivative in
 * a), polygamma (n) and zeta (s) are refused with an error naming the
 * operand, as JAX refuses them. */
#include "internal.h"
#include "trans/trans.h"

#include <float.h>
#include <math.h>

#define D(t) (1u << (t))
#define D_FLOAT (D(OLY_FLOAT16) | D(OLY_BFLOAT16) | D(OLY_FLOAT32) | D(OLY_FLOAT64))

/* ---------------------------------------------------------------- shape rules */

static const char *fmt_aval(char *buf, size_t n, const oly_aval *a)
{
    oly_aval_format(buf, n, a);
    return buf;
}

static bool accepts(const oly_prim *p, oly_dtype t)
{
    return (unsigned)t < OLY_DTYPE_COUNT && (p->dtypes & D(t));
}

static oly_status unary_shape(const oly_shape_ctx *c, oly_aval *out)
{
    const char *name = c->prim->name;
    if (c->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "%s: expected 1 operand, got %d", name, c->n_in);
    if (!accepts(c->prim, c->in[0].dtype)) {
        char s[160];
        return oly__error(OLY_ERR_TYPE, "%s: expected a floating-point operand, got %s", name,
                          fmt_aval(s, sizeof s, &c->in[0]));
    }
    *out = c->in[0];
    return OLY_OK;
}

static oly_status binary_shape(const oly_shape_ctx *c, oly_aval *out)
{
    const char *name = c->prim->name;
    char s1[160], s2[160];
    if (c->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "%s: expected 2 operands, got %d", name, c->n_in);
    const oly_aval *a = &c->in[0], *b = &c->in[1];
    if (a->dtype != b->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: operands must have the same dtype, got %s and %s",
                          name, fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
    if (!accepts(c->prim, a->dtype))
        return oly__error(OLY_ERR_TYPE, "%s: expected floating-point operands, got %s and %s",
                          name, fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
    const oly_aval *shape_of = a->rank == 0 ? b : a;
    if (a->rank != 0 && b->rank != 0) {
        bool same = a->rank == b->rank;
        for (int i = 0; same && i < a->rank; i++) same = a->dims[i] == b->dims[i];
        if (!same)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: incompatible shapes %s and %s (expected equal shapes or a "
                              "rank-0 operand)",
                              name, fmt_aval(s1, sizeof s1, a), fmt_aval(s2, sizeof s2, b));
    }
    *out = *shape_of;
    out->dtype = a->dtype;
    out->weak = a->weak && b->weak;
    return OLY_OK;
}

/* ---------------------------------------------------------------- jvp helpers */

static oly_aval aval_of(oly_atom a) { return oly__atom_aval(&a); }

/* A rank-0 literal with like's (floating) dtype and weakness. */
static oly_atom lit_like(oly_atom like, double v)
{
    oly_aval a = aval_of(like);
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = a.dtype;
    s.weak = a.weak;
    s.v.f = v;
    return oly_atom_lit(s);
}

#define E_UN(prim, x, o) OLY_TRY(oly__emit_un(b, &oly__prim_##prim, (x), (o)))
#define E_BIN(prim, x, y, o) OLY_TRY(oly__emit_bin(b, &oly__prim_##prim, (x), (y), (o)))

/* Unary rows: tangent t * d(x, y), y the primal output. */
#define UNARY_JVP(op)                                                                     \
    static oly_status op##_deriv(oly_builder *b, oly_atom x, oly_atom y, oly_atom *d);    \
    static oly_status op##_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal, \
                               const oly_atom *tangent, const bool *tan_nz,               \
                               oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz) \
    {                                                                                     \
        return oly__elementwise_unary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out,   \
                                          tangent_out, out_nz, op##_deriv, false);        \
    }                                                                                     \
    static oly_status op##_deriv(oly_builder *b, oly_atom x, oly_atom y, oly_atom *d)

/* Binary rows: t_0 * d_0 + t_1 * d_1 over the nonzero tangents; partial()
 * fails for an operand with no derivative. */
#define BINARY_JVP(op)                                                                    \
    static oly_status op##_partial(oly_builder *b, const oly_eqn *eqn, int which, oly_atom x, \
                                   oly_atom y, oly_atom out, oly_atom *d);                \
    static oly_status op##_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal, \
                               const oly_atom *tangent, const bool *tan_nz,               \
                               oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz) \
    {                                                                                     \
        return oly__elementwise_binary_jvp(ctx, eqn, primal, tangent, tan_nz, primal_out,  \
                                           tangent_out, out_nz, op##_partial);            \
    }                                                                                     \
    static oly_status op##_partial(oly_builder *b, const oly_eqn *eqn, int which, oly_atom x, \
                                   oly_atom y, oly_atom out, oly_atom *d)

static oly_status no_derivative(const oly_eqn *eqn, const char *operand)
{
    return oly__error(OLY_ERR_UNSUPPORTED,
                      "%s: no JVP rule for the derivative with respect to %s (only the other "
                      "operand is differentiable, as in JAX)",
                      eqn->prim->name, operand);
}

/* exp(-x + (a - 1) log x - lgamma(a)): d/dx of igamma(a, x), the gamma
 * density; (a - 1) log x is 0 where a == 1 (so x == 0 gives 1, not NaN). */
static oly_status igamma_dx(oly_builder *b, oly_atom a, oly_atom x, oly_atom *d)
{
    oly_atom am1, lx, t, zero, is1, t0, u, lg, v, nx;
    E_BIN(sub, a, lit_like(a, 1), &am1);
    E_UN(log, x, &lx);
    E_BIN(mul, am1, lx, &t);
    oly_aval ta = aval_of(t);
    OLY_TRY(oly__emit_full(b, &ta, 0, &zero));
    E_BIN(eq, am1, lit_like(am1, 0), &is1);
    oly_aval ia = aval_of(is1);
    if (ia.rank != ta.rank) OLY_TRY(oly__emit_broadcast_to(b, is1, &ta, &is1));
    OLY_TRY(oly__emit_select(b, is1, t, zero, &t0));
    E_UN(neg, x, &nx);
    E_BIN(add, nx, t0, &u);
    E_UN(lgamma, a, &lg);
    E_BIN(sub, u, lg, &v);
    return oly__emit_un(b, &oly__prim_exp, v, d);
}

/* ---------------------------------------------------------------- unary jvp rules */

UNARY_JVP(erf)
{
    oly_atom x2, e;
    E_BIN(mul, x, x, &x2);
    E_UN(neg, x2, &x2);
    E_UN(exp, x2, &e);
    return oly__emit_bin(b, &oly__prim_mul, e, lit_like(x, 2 / sqrt(M_PI)), d);
}
UNARY_JVP(erfc)
{
    oly_atom x2, e;
    E_BIN(mul, x, x, &x2);
    E_UN(neg, x2, &x2);
    E_UN(exp, x2, &e);
    return oly__emit_bin(b, &oly__prim_mul, e, lit_like(x, -2 / sqrt(M_PI)), d);
}
UNARY_JVP(erf_inv)
{
    oly_atom y2, e;
    E_BIN(mul, y, y, &y2);
    E_UN(exp, y2, &e);
    return oly__emit_bin(b, &oly__prim_mul, e, lit_like(y, sqrt(M_PI) / 2), d);
}
UNARY_JVP(lgamma) { return oly__emit_un(b, &oly__prim_digamma, x, d); }
UNARY_JVP(digamma) { return oly__emit_bin(b, &oly__prim_polygamma, lit_like(x, 1), x, d); }
UNARY_JVP(bessel_i0e)
{
    oly_atom i1, s, sy;
    E_UN(bessel_i1e, x, &i1);
    E_UN(sign, x, &s);
    E_BIN(mul, s, y, &sy);
    return oly__emit_bin(b, &oly__prim_sub, i1, sy, d);
}

/* The dtype's machine epsilon. */
static double dtype_eps(oly_dtype t)
{
    switch (t) {
    case OLY_FLOAT16: return 0x1p-10;
    case OLY_BFLOAT16: return 0x1p-7;
    case OLY_FLOAT32: return FLT_EPSILON;
    default: return DBL_EPSILON;
    }
}

/* i0e(x) - y (sign(x) + 1/x) with x replaced by eps where |x| <= eps, and 1/2
 * there (the limit at 0). */
UNARY_JVP(bessel_i1e)
{
    oly_aval xa = aval_of(x);
    double eps = dtype_eps(xa.dtype);
    oly_atom ax, big, epsv, sx, i0, s, r, sr, ysr, dd, half;
    E_UN(abs, x, &ax);
    E_BIN(gt, ax, lit_like(x, eps), &big);
    OLY_TRY(oly__emit_full(b, &xa, eps, &epsv));
    OLY_TRY(oly__emit_select(b, big, epsv, x, &sx));
    E_UN(bessel_i0e, sx, &i0);
    E_UN(sign, sx, &s);
    E_BIN(div, lit_like(x, 1), sx, &r);
    E_BIN(add, s, r, &sr);
    E_BIN(mul, y, sr, &ysr);
    E_BIN(sub, i0, ysr, &dd);
    OLY_TRY(oly__emit_full(b, &xa, 0.5, &half));
    return oly__emit_select(b, big, half, dd, d);
}

/* ---------------------------------------------------------------- binary jvp rules */

BINARY_JVP(igamma)
{
    (void)eqn, (void)out;
    if (which == 0) return oly__emit_bin(b, &oly__prim_igamma_grad_a, x, y, d);
    return igamma_dx(b, x, y, d);
}
BINARY_JVP(igammac)
{
    (void)eqn, (void)out;
    oly_atom p;
    if (which == 0)
        E_BIN(igamma_grad_a, x, y, &p);
    else
        OLY_TRY(igamma_dx(b, x, y, &p));
    return oly__emit_un(b, &oly__prim_neg, p, d);
}
BINARY_JVP(igamma_grad_a)
{
    (void)out;
    if (which == 0) return no_derivative(eqn, "a (a second derivative of igamma in a)");
    oly_atom p, lx, dg, u;
    OLY_TRY(igamma_dx(b, x, y, &p));
    E_UN(log, y, &lx);
    E_UN(digamma, x, &dg);
    E_BIN(sub, lx, dg, &u);
    return oly__emit_bin(b, &oly__prim_mul, p, u, d);
}
BINARY_JVP(polygamma)
{
    (void)out;
    if (which == 0) return no_derivative(eqn, "the order n");
    oly_atom n1;
    E_BIN(add, x, lit_like(x, 1), &n1);
    return oly__emit_bin(b, &oly__prim_polygamma, n1, y, d);
}
BINARY_JVP(zeta)
{
    (void)out;
    if (which == 0) return no_derivative(eqn, "the exponent s");
    oly_atom s1, z, sz;
    E_BIN(add, x, lit_like(x, 1), &s1);
    E_BIN(zeta, s1, y, &z);
    E_BIN(mul, x, z, &sz);
    return oly__emit_un(b, &oly__prim_neg, sz, d);
}

#undef E_UN
#undef E_BIN

/* ---------------------------------------------------------------- rows */

#define NONLINEAR OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE
#define UNARY(op)                                                                         \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 1, .n_out = 1,                  \
                                     .shape = unary_shape, .dtypes = D_FLOAT,             \
                                     .batch = oly__elementwise_batch, .jvp = op##_jvp,    \
                                     .no_rule = NONLINEAR};
#define BINARY(op)                                                                        \
    const oly_prim oly__prim_##op = {.name = #op, .n_in = 2, .n_out = 1,                  \
                                     .shape = binary_shape, .dtypes = D_FLOAT,            \
                                     .batch = oly__elementwise_batch, .jvp = op##_jvp,    \
                                     .no_rule = NONLINEAR};

UNARY(erf)
UNARY(erfc)
UNARY(erf_inv)
UNARY(lgamma)
UNARY(digamma)
UNARY(bessel_i0e)
UNARY(bessel_i1e)
BINARY(igamma)
BINARY(igammac)
BINARY(igamma_grad_a)
BINARY(polygamma)
BINARY(zeta)

/* random_gamma_grad(a, x): the derivative of a gamma sample x with respect to
 * its shape a. JAX defines no JVP rule for it (a second derivative of
 * sampling), so its jvp slot is marked empty and the JVP driver reports the
 * missing rule by name. */
const oly_prim oly__prim_random_gamma_grad = {
    .name = "random_gamma_grad", .n_in = 2, .n_out = 1, .shape = binary_shape,
    .dtypes = D_FLOAT, .batch = oly__elementwise_batch,
    .no_rule = NONLINEAR | OLY_RULE_JVP,
};

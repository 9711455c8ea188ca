/* special.c — the CPU kernels of the special-function rows (src/prims/special.c):
 * a scalar function per row and dtype, run by one loop per arity. float32
 * uses libm's erff / erfcf / lgammaf_r and Giles' single-precision erf_inv,
 * and computes the functions written here in double; float16 and bfloat16
 * go through the float32 path in chunks. Binary operands have one dtype and
 * one shape, or one of them is rank 0 and broadcasts.
 *
 * The functions written here, from their mathematical definitions:
 *   digamma      recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the
 *                asymptotic series ln x - 1/(2x) - sum B_2k / (2k x^2k);
 *                x < 0 by reflection psi(x) = psi(1 - x) - pi cot(pi x).
 *   zeta(s, q)   Hurwitz zeta by Euler-Maclaurin summation: terms up to
 *                q + N >= 9 (N >= 9), then the integral, half the last term
 *                and 12 Bernoulli corrections.
 *   polygamma    (-1)^(n+1) n! zeta(n + 1, x), digamma for n = 0.
 *   erf_inv      float32: Giles' approximation (M. Giles, "Approximating the
 *                erfinv function", GPU Computing Gems, 2011); float64: the same
 *                approximation as a start, then Halley steps on erf (|x| < 1/2)
 *                or erfc (on the exact 1 - |x|) until the step is below 1 ulp.
 *   igamma       P(a, x) by its power series for x < a + 1, Q(a, x) by its
 *                continued fraction (modified Lentz) otherwise; the other
 *                one as the complement. Both carry a forward derivative in a
 *                (dual numbers), which igamma_grad_a returns: an analytic
 *                derivative of the series / fraction, not a finite difference.
 *   random_gamma_grad  dx/da of a gamma sample x at fixed P(a, x), by
 *                implicit differentiation: -(dP/da) / (dP/dx).
 *   bessel_i0e/i1e  e^-|x| I_nu(|x|) (odd for i1e): the power series
 *                sum (x^2/4)^k / (k! (k + nu)!) (x/2)^nu for |x| < 30, the
 *                asymptotic expansion e^x / sqrt(2 pi x) sum (-1)^k a_k(nu) / x^k
 *                beyond. */
#include "cpu/cpu.h"
#include "cpu/simd.h"

#include <float.h>
#include <math.h>

enum { CHUNK = 256 };

/* ---------------------------------------------------------------- scalar functions */

static double digamma_d(double x)
{
    if (isnan(x)) return x;
    if (x == 0) return signbit(x) ? INFINITY : -INFINITY; /* -1/x */
    if (isinf(x)) return x > 0 ? x : NAN;
    double acc = 0;
    if (x < 0) {
        double fl = floor(x);
        if (x == fl) return NAN; /* a pole */
        /* pi cot(pi x) with x reduced to r in (-1/2, 1/2] exactly */
        double r = x - fl;
        if (r > 0.5) r -= 1;
        acc = -M_PI / tan(M_PI * r);
        x = 1 - x;
    }
    while (x < 10) {
        acc -= 1 / x;
        x += 1;
    }
    /* B_2k / (2k) for k = 1..8 */
    static const double c[] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132,
                               -691.0 / 32760, 1.0 / 12, -3617.0 / 8160};
    double z = 1 / (x * x), s = 0;
    for (int k = 7; k >= 0; k--) s = s * z + c[k];
    return acc + log(x) - 0.5 / x - s * z;
}

/* log|Gamma(x)| without touching the global signgam. */
static double lgam(double x)
{
    int sg;
    return lgamma_r(x, &sg);
}

/* Hurwitz zeta(s, q) = sum_{k >= 0} (q + k)^-s: s > 1 (s == 1: inf); q <= 0
 * needs a whole s (q a non-positive integer is a pole: inf). The terms before
 * the Euler-Maclaurin tail are summed one by one, so q below -1e7 (over 1e7
 * terms) gives NaN. */
static double zeta_d(double s, double q)
{
    if (isnan(s) || isnan(q)) return NAN;
    if (s == 1) return INFINITY;
    if (s < 1) return NAN;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (s != floor(s) || q < -1e7) return NAN;
    }
    if (isinf(q)) return 0;
    if (isinf(s)) return q < 1 ? INFINITY : q == 1 ? 1 : 0;
    /* B_2j / (2j)! for j = 1..12 */
    static const double b[] = {
        1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
        -691.0 / 1307674368000.0, 1.0 / 74724249600.0, -3617.0 / 10670622842880000.0,
        43867.0 / 5109094217170944000.0, -174611.0 / 802857662698291200000.0,
        77683.0 / 14101100039391805440000.0, -236364091.0 / 1693824136731743669452800000.0};
    double sum = 0, w = q;
    for (int n = 0; n < 9 || w < 9; n++, w += 1) {
        double t = pow(w, -s);
        sum += t;
        /* the rest is below t (w / (s - 1) + 1) */
        if (n >= 9 && fabs(t) * (w / (s - 1) + 1) <= DBL_EPSILON * 0.25 * fabs(sum)) return sum;
    }
    /* w = q + n: the tail sum_{k >= n} (q + k)^-s */
    double ws = pow(w, -s);
    double tail = w * ws / (s - 1) + 0.5 * ws;
    double fact = s, pw = ws / w; /* (s)_{2j-1} and w^(-s-2j+1) */
    for (int j = 0; j < 12; j++) {
        double t = b[j] * fact * pw;
        tail += t;
        if (fabs(t) <= DBL_EPSILON * 0.25 * fabs(sum + tail)) break;
        fact *= (s + 2 * j + 1) * (s + 2 * j + 2);
        pw /= w * w;
    }
    return sum + tail;
}

/* polygamma(n, x) for a whole n >= 0 (NaN otherwise). */
static double polygamma_d(double n, double x)
{
    if (isnan(n) || isnan(x)) return NAN;
    if (n < 0 || n != floor(n)) return NAN;
    if (n == 0) return digamma_d(x);
    double z = zeta_d(n + 1, x);
    if (z == 0 || isnan(z)) return z;
    return (fmod(n, 2) == 1 ? 1 : -1) * exp(lgam(n + 1) + log(fabs(z))) * (z < 0 ? -1 : 1);
}

/* Giles' single-precision erf_inv on (-1, 1), evaluated in type T. */
#define GILES(T, LOG, SQRT)                                                               \
    T w = -LOG(((T)1 - x) * ((T)1 + x)), p;                                               \
    if (w < (T)5) {                                                                       \
        w = w - (T)2.5;                                                                   \
        p = (T)2.81022636e-08;                                                            \
        p = (T)3.43273939e-07 + p * w;                                                    \
        p = (T)-3.5233877e-06 + p * w;                                                    \
        p = (T)-4.39150654e-06 + p * w;                                                   \
        p = (T)0.00021858087 + p * w;                                                     \
        p = (T)-0.00125372503 + p * w;                                                    \
        p = (T)-0.00417768164 + p * w;                                                    \
        p = (T)0.246640727 + p * w;                                                       \
        p = (T)1.50140941 + p * w;                                                        \
    } else {                                                                              \
        w = SQRT(w) - (T)3;                                                               \
        p = (T)-0.000200214257;                                                           \
        p = (T)0.000100950558 + p * w;                                                    \
        p = (T)0.00134934322 + p * w;                                                     \
        p = (T)-0.00367342844 + p * w;                                                    \
        p = (T)0.00573950773 + p * w;                                                     \
        p = (T)-0.0076224613 + p * w;                                                     \
        p = (T)0.00943887047 + p * w;                                                     \
        p = (T)1.00167406 + p * w;                                                        \
        p = (T)2.83297682 + p * w;                                                        \
    }                                                                                     \
    return p * x;

static float giles_f(float x) { GILES(float, logf, sqrtf) }
static double giles_d(double x) { GILES(double, log, sqrt) }

static float erf_inv_f(float x)
{
    float ax = fabsf(x);
    if (isnan(x) || ax > 1) return NAN;
    if (ax == 1) return copysignf(INFINITY, x);
    return giles_f(x);
}

static double erf_inv_d(double x)
{
    double ax = fabs(x);
    if (isnan(x) || ax > 1) return NAN;
    if (ax == 1) return copysign(INFINITY, x);
    if (ax == 0) return x;
    double y = giles_d(ax), c = 1 - ax; /* exact for ax >= 1/2 */
    const double k = 2 / sqrt(M_PI);
    for (int it = 0; it < 10; it++) {
        double f = ax < 0.5 ? erf(y) - ax : c - erfc(y); /* erf(y) - ax */
        double q = f / (k * exp(-y * y));                 /* Newton step f / f' */
        double dy = q / (1 + y * q);                      /* Halley (f'' = -2y f') */
        y -= dy;
        if (fabs(dy) <= 0.5 * DBL_EPSILON * y) break;
    }
    return copysign(y, x);
}

/* ---------------------------------------------------------------- incomplete gamma */

/* A value and its derivative in a. */
typedef struct { double v, d; } dual;
static dual dmul(dual x, dual y) { return (dual){x.v * y.v, x.d * y.v + x.v * y.d}; }
static dual ddiv(dual x, dual y)
{
    return (dual){x.v / y.v, (x.d * y.v - x.v * y.d) / (y.v * y.v)};
}
static dual dadd(dual x, dual y) { return (dual){x.v + y.v, x.d + y.d}; }

enum { IG_MAX_ITER = 100000 };

/* P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)), with
 * its derivative in a; for 0 < x < a + 1. */
static dual igamma_series(double a, double x)
{
    dual term = {1, 0}, sum = {1, 0};
    dual ap = {a, 1};
    for (int n = 1; n < IG_MAX_ITER; n++) {
        ap.v += 1;
        term = dmul(term, ddiv((dual){x, 0}, ap));
        sum = dadd(sum, term);
        if (fabs(term.v) <= DBL_EPSILON * 0.25 * sum.v &&
            fabs(term.d) <= DBL_EPSILON * 0.25 * (fabs(sum.d) + sum.v))
            break;
    }
    double lp = a * log(x) - x - lgam(a + 1);
    double e = exp(lp);
    /* d/da of the prefactor: log x - digamma(a + 1) */
    return (dual){e * sum.v, e * (sum.d + (log(x) - digamma_d(a + 1)) * sum.v)};
}

/* Q(a, x) = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)),
 * with its derivative in a; for x >= a + 1. Modified Lentz, in dual numbers. */
static dual igammac_fraction(double a, double x)
{
    const double tiny = 1e-300;
    dual bb = {x + 1 - a, -1};
    dual c = {1 / tiny, 0}, d = ddiv((dual){1, 0}, bb), h = d;
    for (int i = 1; i < IG_MAX_ITER; i++) {
        dual an = {-i * (i - a), i};
        bb.v += 2;
        d = dadd(dmul(an, d), bb);
        if (fabs(d.v) < tiny) d.v = tiny;
        c = dadd(bb, ddiv(an, c));
        if (fabs(c.v) < tiny) c.v = tiny;
        d = ddiv((dual){1, 0}, d);
        dual del = dmul(d, c);
        h = dmul(h, del);
        if (fabs(del.v - 1) <= DBL_EPSILON &&
            fabs(del.d) <= DBL_EPSILON * (1 + fabs(h.d / h.v)))
            break;
    }
    double lq = a * log(x) - x - lgam(a);
    double e = exp(lq);
    return (dual){e * h.v, e * (h.d + (log(x) - digamma_d(a)) * h.v)};
}

/* lgamma(1 + a) for |a| < 0.2, without rounding 1 + a:
 * -gamma a + sum_{k >= 2} (-1)^k zeta(k) a^k / k. */
static double lgamma1p_small(double a)
{
    const double euler_gamma = 0.57721566490153286061;
    double sum = -euler_gamma * a, pw = -a; /* (-a)^k */
    for (int k = 2; k < 60; k++) {
        pw *= -a;
        double t = zeta_d(k, 1) * pw / k;
        sum += t;
        if (fabs(t) <= DBL_EPSILON * 0.25 * fabs(sum)) break;
    }
    return sum;
}

/* Q(a, x) for small a (< 0.2) and x < a + 1, where 1 - P would cancel:
 * Q = -expm1(a log x - lgamma(1 + a)) - x^a / Gamma(a) sum_{n >= 1} (-x)^n / (n! (a + n)). */
static double igammac_small_a(double a, double x)
{
    double fac = 1, sum = 0;
    for (int n = 1; n < IG_MAX_ITER; n++) {
        fac *= -x / n;
        double t = fac / (a + n);
        sum += t;
        if (fabs(t) <= DBL_EPSILON * 0.25 * fabs(sum)) break;
    }
    double lx = log(x);
    return -expm1(a * lx - lgamma1p_small(a)) - exp(a * lx - lgam(a)) * sum;
}

/* P(a, x) (lower = true) or Q(a, x), and dP/da in *dpda when asked. Domain
 * as SciPy's gammainc: a >= 0, x >= 0; a == 0 gives P = 1 for x > 0. */
static double igamma_any(double a, double x, bool lower, double *dpda)
{
    if (dpda) *dpda = NAN;
    if (isnan(a) || isnan(x) || a < 0 || x < 0) return NAN;
    if (a == 0) {
        if (x == 0) return NAN;
        return lower ? 1 : 0;
    }
    if (x == 0) {
        if (dpda) *dpda = 0;
        return lower ? 0 : 1;
    }
    if (isinf(x)) {
        if (isinf(a)) return NAN;
        if (dpda) *dpda = 0;
        return lower ? 1 : 0;
    }
    if (isinf(a)) return lower ? 0 : 1;
    if (x < a + 1) {
        dual p = igamma_series(a, x);
        if (dpda) *dpda = p.d;
        if (a < 0.2) {
            double q = igammac_small_a(a, x);
            return lower ? 1 - q : q;
        }
        return lower ? p.v : 1 - p.v;
    }
    dual q = igammac_fraction(a, x);
    if (dpda) *dpda = -q.d;
    return lower ? 1 - q.v : q.v;
}

static double igamma_d(double a, double x) { return igamma_any(a, x, true, NULL); }
static double igammac_d(double a, double x) { return igamma_any(a, x, false, NULL); }
static double igamma_grad_a_d(double a, double x)
{
    double g;
    igamma_any(a, x, true, &g);
    return g;
}

/* dx/da at fixed P(a, x): -(dP/da) / (dP/dx), dP/dx the gamma density. */
static double random_gamma_grad_d(double a, double x)
{
    if (isnan(a) || isnan(x) || a <= 0 || x < 0) return NAN;
    if (x == 0) return 0;
    double g;
    igamma_any(a, x, true, &g);
    double logpdf = (a - 1) * log(x) - x - lgam(a);
    return -g * exp(-logpdf);
}

/* ---------------------------------------------------------------- Bessel i0e, i1e */

/* e^-x I_nu(x) for x >= 0, nu 0 or 1. */
static double bessel_ie(int nu, double x)
{
    if (isnan(x)) return x;
    if (isinf(x)) return 0;
    if (x < 30) {
        double q = 0.25 * x * x, term = nu ? 0.5 * x : 1, sum = term;
        for (int k = 1; k < 500; k++) {
            term *= q / ((double)k * (k + nu));
            sum += term;
            if (term <= DBL_EPSILON * 0.25 * sum) break;
        }
        return sum * exp(-x);
    }
    /* sum_k (-1)^k a_k(nu) / x^k, a_k = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k) */
    double mu = 4.0 * nu * nu, term = 1, sum = 1;
    for (int k = 1; k < 60; k++) {
        double odd = 2.0 * k - 1;
        term *= -(mu - odd * odd) / (8.0 * k * x);
        sum += term;
        if (fabs(term) <= DBL_EPSILON * 0.25 * fabs(sum)) break;
    }
    return sum / sqrt(2 * M_PI * x);
}
static double i0e_d(double x) { return bessel_ie(0, fabs(x)); }
static double i1e_d(double x)
{
    double r = bessel_ie(1, fabs(x));
    return x < 0 ? -r : r;
}

/* ---------------------------------------------------------------- float32 versions */

static float erf_f(float x) { return erff(x); }
static double erf_d(double x) { return erf(x); }
static float erfc_f(float x) { return erfcf(x); }
static double erfc_d(double x) { return erfc(x); }
static float lgamma_f(float x)
{
    int sg;
    return lgammaf_r(x, &sg);
}
static double lgamma_d(double x) { return lgam(x); }

#define VIA_DOUBLE_1(f) \
    static float f##_f(float x) { return (float)f##_d(x); }
#define VIA_DOUBLE_2(f) \
    static float f##_f(float a, float b) { return (float)f##_d(a, b); }
VIA_DOUBLE_1(digamma)
VIA_DOUBLE_1(i0e)
VIA_DOUBLE_1(i1e)
VIA_DOUBLE_2(igamma)
VIA_DOUBLE_2(igammac)
VIA_DOUBLE_2(igamma_grad_a)
VIA_DOUBLE_2(random_gamma_grad)
VIA_DOUBLE_2(polygamma)
VIA_DOUBLE_2(zeta)

/* ---------------------------------------------------------------- float32 erf_inv in vectors
 *
 * random.normal's erf_inv: Giles' polynomials above, both evaluated for every
 * lane and the lane's one picked by w < 5, with SLEEF's 1-ULP logf (the
 * scalar path uses libm's) and the exact sqrt; 8 (AVX2) or 16 (AVX-512) lanes,
 * the tail padded into one more vector. The polynomials round as the scalar
 * code does (no FMA), so a lane differs from erf_inv_f only through the log's
 * last bit. |x| = 1 gives +-inf, |x| > 1 and NaN give NaN, as erf_inv_f. */

#if OLY__CPU_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#include <sleef.h>
#pragma GCC pop_options

typedef float v8sf __attribute__((vector_size(32)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef float v16sf __attribute__((vector_size(64)));
typedef int32_t v16si __attribute__((vector_size(64)));

#define ERF_INV_LOOP(ATTR, fname, VF, VI, W, LOG, SQRT)                                   \
    ATTR static VF fname##_v(VF x)                                                        \
    {                                                                                     \
        const VF one = (VF){0} + 1.0f;                                                    \
        VF w = -LOG((one - x) * (one + x));                                               \
        VF w1 = w - 2.5f, p1 = (VF){0} + 2.81022636e-08f;                                 \
        p1 = 3.43273939e-07f + p1 * w1;                                                   \
        p1 = -3.5233877e-06f + p1 * w1;                                                   \
        p1 = -4.39150654e-06f + p1 * w1;                                                  \
        p1 = 0.00021858087f + p1 * w1;                                                    \
        p1 = -0.00125372503f + p1 * w1;                                                   \
        p1 = -0.00417768164f + p1 * w1;                                                   \
        p1 = 0.246640727f + p1 * w1;                                                      \
        p1 = 1.50140941f + p1 * w1;                                                       \
        VF w2 = SQRT(w) - 3.0f, p2 = (VF){0} - 0.000200214257f;                           \
        p2 = 0.000100950558f + p2 * w2;                                                   \
        p2 = 0.00134934322f + p2 * w2;                                                    \
        p2 = -0.00367342844f + p2 * w2;                                                   \
        p2 = 0.00573950773f + p2 * w2;                                                    \
        p2 = -0.0076224613f + p2 * w2;                                                    \
        p2 = 0.00943887047f + p2 * w2;                                                    \
        p2 = 1.00167406f + p2 * w2;                                                       \
        p2 = 2.83297682f + p2 * w2;                                                       \
        VI small = w < 5.0f;                                                              \
        VF r = (VF)(((VI)p1 & small) | ((VI)p2 & ~small)) * x;                            \
        /* |x| >= 1 or NaN: inf with x's sign at 1, NaN beyond */                        \
        VI sign = (VI)x & ((VI){0} + INT32_MIN);                                          \
        VF ax = (VF)((VI)x & ~sign);                                                      \
        VI edge = ~(ax < 1.0f); /* NaN compares false */                                \
        VF fix = (VF)(((VI)((VF){0} + INFINITY) | sign) & (ax == 1.0f));                  \
        fix = (VF)(((VI)fix) | ((VI)((VF){0} + NAN) & ~(VI)(ax == 1.0f)));                \
        return (VF)(((VI)r & ~edge) | ((VI)fix & edge));                                  \
    }                                                                                     \
    ATTR static void fname(const float *x, float *y, int64_t n)                           \
    {                                                                                     \
        int64_t i = 0;                                                                    \
        for (; i + W <= n; i += W) {                                                      \
            VF v;                                                                         \
            memcpy(&v, x + i, sizeof v);                                                  \
            v = fname##_v(v);                                                             \
            memcpy(y + i, &v, sizeof v);                                                  \
        }                                                                                 \
        if (i < n) {                                                                      \
            float t[W] = {0};                                                             \
            memcpy(t, x + i, (size_t)(n - i) * sizeof(float));                           \
            VF v;                                                                         \
            memcpy(&v, t, sizeof v);                                                      \
            v = fname##_v(v);                                                             \
            memcpy(t, &v, sizeof v);                                                      \
            memcpy(y + i, t, (size_t)(n - i) * sizeof(float));                            \
        }                                                                                 \
    }
#define LOG8(v) ((v8sf)Sleef_logf8_u10avx2((__m256)(v)))
#define SQRT8(v) ((v8sf)_mm256_sqrt_ps((__m256)(v)))
#define LOG16(v) ((v16sf)Sleef_logf16_u10avx512f((__m512)(v)))
#define SQRT16(v) ((v16sf)_mm512_sqrt_ps((__m512)(v)))
ERF_INV_LOOP(OLY__TARGET_AVX2, erf_inv_f32_a2, v8sf, v8si, 8, LOG8, SQRT8)
ERF_INV_LOOP(OLY__TARGET_AVX512, erf_inv_f32_a5, v16sf, v16si, 16, LOG16, SQRT16)
#endif

/* y[0..n) = erf_inv(x[0..n)) for float32 at this CPU level. */
static void erf_inv_f32_run(const float *x, float *y, int64_t n)
{
#if OLY__CPU_X86
    switch (oly__cpu_level()) {
    case OLY_CPU_LEVEL_AVX512: erf_inv_f32_a5(x, y, n); return;
    case OLY_CPU_LEVEL_AVX2: erf_inv_f32_a2(x, y, n); return;
    default: break;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = erf_inv_f(x[i]);
}

/* ---------------------------------------------------------------- loops and kernels */

/* This thread's share [*lo, *hi) of n elements. */
static void split(const oly_kernel_ctx *c, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t nth = c->nth > 0 ? c->nth : 1, ith = c->ith < 0 ? 0 : c->ith;
    int64_t chunk = (n + nth - 1) / nth;
    int64_t l = ith * chunk, h = l + chunk;
    *lo = l > n ? n : l;
    *hi = h > n ? n : h;
}

static float half_get(const uint16_t *p, oly_dtype t)
{
    return t == OLY_BFLOAT16 ? oly__bf16_to_float(*p) : oly__half_to_float(*p);
}
static uint16_t half_put(float f, oly_dtype t)
{
    return t == OLY_BFLOAT16 ? oly__float_to_bf16(f) : oly__float_to_half(f);
}

typedef struct un_op {
    const char *name;
    float (*f)(float);
    double (*d)(double);
} un_op;

static oly_status unary_kernel(const un_op *op, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    int64_t lo, hi;
    split(c, oly_aval_size(&c->out_aval[0]), &lo, &hi);
    switch (t) {
    case OLY_FLOAT64: {
        const double *x = c->in[0];
        double *y = c->out[0];
        for (int64_t i = lo; i < hi; i++) y[i] = op->d(x[i]);
        return OLY_OK;
    }
    case OLY_FLOAT32: {
        const float *x = c->in[0];
        float *y = c->out[0];
        if (op->f == erf_inv_f) {
            if (hi > lo) erf_inv_f32_run(x + lo, y + lo, hi - lo);
            return OLY_OK;
        }
        for (int64_t i = lo; i < hi; i++) y[i] = op->f(x[i]);
        return OLY_OK;
    }
    case OLY_FLOAT16:
    case OLY_BFLOAT16: {
        const uint16_t *x = c->in[0];
        uint16_t *y = c->out[0];
        for (int64_t i = lo; i < hi; i++) y[i] = half_put(op->f(half_get(&x[i], t)), t);
        return OLY_OK;
    }
    default:
        return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %s", op->name,
                          oly_dtype_name(t));
    }
}

typedef struct bin_op {
    const char *name;
    float (*f)(float, float);
    double (*d)(double, double);
} bin_op;

/* A rank-0 operand (fewer elements than the output) broadcasts: stride 0. */
static oly_status binary_kernel(const bin_op *op, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    int64_t n = oly_aval_size(&c->out_aval[0]), lo, hi;
    int64_t sa = oly_aval_size(&c->in_aval[0]) == n, sb = oly_aval_size(&c->in_aval[1]) == n;
    split(c, n, &lo, &hi);
    switch (t) {
    case OLY_FLOAT64: {
        const double *a = c->in[0], *b = c->in[1];
        double *y = c->out[0];
        for (int64_t i = lo; i < hi; i++) y[i] = op->d(a[i * sa], b[i * sb]);
        return OLY_OK;
    }
    case OLY_FLOAT32: {
        const float *a = c->in[0], *b = c->in[1];
        float *y = c->out[0];
        for (int64_t i = lo; i < hi; i++) y[i] = op->f(a[i * sa], b[i * sb]);
        return OLY_OK;
    }
    case OLY_FLOAT16:
    case OLY_BFLOAT16: {
        const uint16_t *a = c->in[0], *b = c->in[1];
        uint16_t *y = c->out[0];
        for (int64_t i = lo; i < hi; i++)
            y[i] = half_put(op->f(half_get(&a[i * sa], t), half_get(&b[i * sb], t)), t);
        return OLY_OK;
    }
    default:
        return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %s", op->name,
                          oly_dtype_name(t));
    }
}

/* Every element is read before its output is written, so output 0 may share
 * input 0's buffer. */
#define UNARY_KERNEL(op, F, D)                                                            \
    static const un_op op##_op = {#op, F, D};                                             \
    static oly_status op##_kernel(const oly_kernel_ctx *c) { return unary_kernel(&op##_op, c); } \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = true, .splits = true};
#define BINARY_KERNEL(op, F, D)                                                           \
    static const bin_op op##_op = {#op, F, D};                                            \
    static oly_status op##_kernel(const oly_kernel_ctx *c) { return binary_kernel(&op##_op, c); } \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = true, .splits = true};

UNARY_KERNEL(erf, erf_f, erf_d)
UNARY_KERNEL(erfc, erfc_f, erfc_d)
UNARY_KERNEL(erf_inv, erf_inv_f, erf_inv_d)
UNARY_KERNEL(lgamma, lgamma_f, lgamma_d)
UNARY_KERNEL(digamma, digamma_f, digamma_d)
UNARY_KERNEL(bessel_i0e, i0e_f, i0e_d)
UNARY_KERNEL(bessel_i1e, i1e_f, i1e_d)
BINARY_KERNEL(igamma, igamma_f, igamma_d)
BINARY_KERNEL(igammac, igammac_f, igammac_d)
BINARY_KERNEL(igamma_grad_a, igamma_grad_a_f, igamma_grad_a_d)
BINARY_KERNEL(random_gamma_grad, random_gamma_grad_f, random_gamma_grad_d)
BINARY_KERNEL(polygamma, polygamma_f, polygamma_d)
BINARY_KERNEL(zeta, zeta_f, zeta_d)

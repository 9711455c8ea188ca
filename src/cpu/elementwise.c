/* elementwise.c — the CPU kernels of the elementwise rows (unary, binary,
 * convert_element_type, select_n); their semantics (shape rules with the
 * dtypes each row accepts, transformation rules) are src/prims/elementwise.c.
 *
 * Every operation is a table from dtype to a loop over contiguous elements; the
 * kernel dispatches once per call and the loop does the work, so the f32/f64
 * paths are plain vectorisable loops; the transcendental ones run on SLEEF's
 * AVX2 functions where the CPU has them (see "SIMD loops"). float16/bfloat16
 * compute through float32 in chunks; complex uses C99 _Complex. Integer
 * arithmetic never traps: it wraps (computed in unsigned), and division by
 * zero, INT_MIN / -1 and over-wide shifts follow XLA. Binary operands have one
 * dtype and one shape, or one of them is rank 0 and broadcasts. A table has a
 * loop for every dtype its row's shape rule accepts (tests/c/test_rows.c
 * checks). */
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
/* ---------------------------------------------------------------- unary kernels */

/* Runs fn[input dtype] (name's loop table) over this thread's share. */
static oly_status unary_kernel(const char *name, const unary_fn *fn, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    unary_fn f = valid_dtype(t) ? fn[t] : NULL;
    if (!f) return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %d", name, (int)t);
    int64_t lo, hi;
    split(c, oly_aval_size(&c->out_aval[0]), &lo, &hi);
    if (hi <= lo) return OLY_OK;
    size_t isz = oly_dtype_size(t), osz = oly_dtype_size(c->out_aval[0].dtype);
    f((const char *)c->in[0] + (size_t)lo * isz, (char *)c->out[0] + (size_t)lo * osz, hi - lo,
      c->params);
    return OLY_OK;
}

/* op's kernel entry oly__cpu_##op: the loop table (the E_* entries after
 * INPLACE) and whether output 0 may share input 0's buffer. */
#define UNARY_KERNEL(op, INPLACE, ...)                                                    \
    static const unary_fn op##_fns[OLY_DTYPE_COUNT] = {__VA_ARGS__};                      \
    static oly_status op##_kernel(const oly_kernel_ctx *c)                                \
    {                                                                                     \
        return unary_kernel(#op, op##_fns, c);                                            \
    }                                                                                     \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = INPLACE, .splits = true};

/* Float transcendental with complex support: one line per op. */
#define TRANSCENDENTAL(op, EF, ED, EC, EZ, VF, VD)                                        \
    F_UNARY_V(op, EF, ED, VF, VD)                                                         \
    C_UNARY(op, EC, EZ)                                                                   \
    UNARY_KERNEL(op, true, E_FLOAT(op), E_CPLX(op))
#define FLOAT_ONLY(op, EF, ED, VF, VD)                                                    \
    F_UNARY_V(op, EF, ED, VF, VD)                                                         \
    UNARY_KERNEL(op, true, E_FLOAT(op))

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
UNARY_KERNEL(round, true, E_FLOAT(round))

/* is_finite -> bool */
U_LOOP(is_finite_f32, float, uint8_t, isfinite(x) != 0)
U_LOOP(is_finite_f64, double, uint8_t, isfinite(x) != 0)
HALF_U(is_finite, true)
UNARY_KERNEL(is_finite, false, E_FLOAT(is_finite))

/* ---------------------------------------------------------------- unary: arithmetic */

/* neg: integers wrap (-INT_MIN == INT_MIN). */
#define NEG_I(s, T, UT, ST, WT, B) U_LOOP(neg_##s, T, T, (T)(0u - (WT)x))
INTS(NEG_I)
F_UNARY(neg, -x, -x)
C_UNARY(neg, -x, -x)
UNARY_KERNEL(neg, true, E_INT(neg), E_FLOAT(neg), E_CPLX(neg))

/* sign: -1/0/1; floats keep ±0 and NaN; complex x/|x|. */
#define SIGN_S(s, T, UT, ST, WT, B) U_LOOP(sign_##s, T, T, (x > 0) - (x < 0))
#define SIGN_U(s, T, UT, ST, WT, B) U_LOOP(sign_##s, T, T, x != 0)
SINTS(SIGN_S)
UINTS(SIGN_U)
F_UNARY(sign, x > 0 ? 1.0f : x < 0 ? -1.0f : x, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
C_UNARY(sign, x == 0 ? x : x / cabsf(x), x == 0 ? x : x / cabs(x))
UNARY_KERNEL(sign, true, E_INT(sign), E_FLOAT(sign), E_CPLX(sign))

/* abs: integers wrap (abs(INT_MIN) == INT_MIN); complex -> real. */
#define ABS_S(s, T, UT, ST, WT, B) U_LOOP(abs_##s, T, T, x < 0 ? (T)(0u - (WT)x) : x)
#define ABS_U(s, T, UT, ST, WT, B) U_LOOP(abs_##s, T, T, x)
SINTS(ABS_S)
UINTS(ABS_U)
F_UNARY(abs, fabsf(x), fabs(x))
U_LOOP(abs_c64, c64, float, cabsf(x))
U_LOOP(abs_c128, c128, double, cabs(x))
UNARY_KERNEL(abs, false, E_INT(abs), E_FLOAT(abs), E_CPLX(abs))

/* square: integers wrap. */
#define SQUARE_I(s, T, UT, ST, WT, B) U_LOOP(square_##s, T, T, (T)((WT)x * (WT)x))
INTS(SQUARE_I)
F_UNARY(square, x * x, x * x)
C_UNARY(square, x * x, x * x)
UNARY_KERNEL(square, true, E_INT(square), E_FLOAT(square), E_CPLX(square))

/* not: logical for bool, bitwise for integers. */
U_LOOP(not_bool, uint8_t, uint8_t, x == 0)
#define NOT_I(s, T, UT, ST, WT, B) U_LOOP(not_##s, T, T, ~(WT)x)
INTS(NOT_I)
UNARY_KERNEL(not, true, E_BOOL(not), E_INT(not))

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
UNARY_KERNEL(real, false, REAL_DTYPES(copy), E_CPLX(real))
UNARY_KERNEL(imag, false, REAL_DTYPES(zero), E_CPLX(imag))
UNARY_KERNEL(conj, true, REAL_DTYPES(copy), E_CPLX(conj))

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
UNARY_KERNEL(integer_pow, true, E_INT(integer_pow), E_FLOAT(integer_pow), E_CPLX(integer_pow))

/* ---------------------------------------------------------------- convert_element_type */

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

/* ---------------------------------------------------------------- binary kernels */

/* Runs fn[operand dtype] (name's loop table) over this thread's share; a
 * rank-0 operand against a shaped one is broadcast by the loop's mode. */
static oly_status binary_kernel(const char *name, const binary_fn *fn, const oly_kernel_ctx *c)
{
    oly_dtype t = c->in_aval[0].dtype;
    binary_fn f = valid_dtype(t) ? fn[t] : NULL;
    if (!f) return oly__error(OLY_ERR_INTERNAL, "%s: no kernel for dtype %d", name, (int)t);
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

/* Like UNARY_KERNEL, for a binary op. */
#define BINARY_KERNEL(op, INPLACE, ...)                                                   \
    static const binary_fn op##_fns[OLY_DTYPE_COUNT] = {__VA_ARGS__};                     \
    static oly_status op##_kernel(const oly_kernel_ctx *c)                                \
    {                                                                                     \
        return binary_kernel(#op, op##_fns, c);                                           \
    }                                                                                     \
    const oly_cpu_kernel oly__cpu_##op = {.fn = op##_kernel, .inplace_ok = INPLACE, .splits = true};

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
BINARY_KERNEL(add, true, E_INT(add), E_FLOAT(add), E_CPLX(add))
BINARY_KERNEL(sub, true, E_INT(sub), E_FLOAT(sub), E_CPLX(sub))
BINARY_KERNEL(mul, true, E_INT(mul), E_FLOAT(mul), E_CPLX(mul))

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
BINARY_KERNEL(div, true, E_INT(div), E_FLOAT(div), E_CPLX(div))
BINARY_KERNEL(rem, true, E_INT(rem), E_FLOAT(rem))

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
BINARY_KERNEL(pow, true, E_INT(pow), E_FLOAT(pow), E_CPLX(pow))

/* max/min: NaN propagates; bool acts as or/and. */
#define MAXMIN_I(s, T, UT, ST, WT, B)                                                     \
    B_LOOP(max_##s, T, T, x > y ? x : y)                                                  \
    B_LOOP(min_##s, T, T, x < y ? x : y)
INTS(MAXMIN_I)
B_LOOP(max_bool, uint8_t, uint8_t, (x | y) != 0)
B_LOOP(min_bool, uint8_t, uint8_t, (x && y))
F_BINARY(max, (x > y || x != x) ? x : y, (x > y || x != x) ? x : y)
F_BINARY(min, (x < y || x != x) ? x : y, (x < y || x != x) ? x : y)
BINARY_KERNEL(max, true, E_BOOL(max), E_INT(max), E_FLOAT(max))
BINARY_KERNEL(min, true, E_BOOL(min), E_INT(min), E_FLOAT(min))

/* atan2, nextafter: floats. nextafter on 16-bit formats steps the bit pattern. */
F_BINARY_V(atan2, atan2f(x, y), atan2(x, y), Sleef_atan2f8_u10avx2(x, y),
           Sleef_atan2d4_u10avx2(x, y))
BINARY_KERNEL(atan2, true, E_FLOAT(atan2))

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
BINARY_KERNEL(nextafter, true, E_FLOAT(nextafter))

/* ---------------------------------------------------------------- binary: bits */

#define BITS_I(s, T, UT, ST, WT, B)                                                       \
    B_LOOP(and_##s, T, T, x & y)                                                          \
    B_LOOP(or_##s, T, T, x | y)                                                           \
    B_LOOP(xor_##s, T, T, x ^ y)
INTS(BITS_I)
B_LOOP(and_bool, uint8_t, uint8_t, (x && y))
B_LOOP(or_bool, uint8_t, uint8_t, (x || y))
B_LOOP(xor_bool, uint8_t, uint8_t, (x != 0) != (y != 0))
BINARY_KERNEL(and, true, E_BOOL(and), E_INT(and))
BINARY_KERNEL(or, true, E_BOOL(or), E_INT(or))
BINARY_KERNEL(xor, true, E_BOOL(xor), E_INT(xor))

/* Shifts act on the bit pattern; a shift count outside [0, bits) gives 0, or
 * the sign fill for the arithmetic right shift. */
#define SHIFT_I(s, T, UT, ST, WT, B)                                                      \
    B_LOOP(shift_left_##s, T, T, (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x << (unsigned)y)) \
    B_LOOP(shift_right_logical_##s, T, T,                                                 \
           (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x >> (unsigned)y))                       \
    B_LOOP(shift_right_arithmetic_##s, T, T,                                              \
           (uint64_t)y >= B ? (T)((ST)x < 0 ? -1 : 0) : (T)((ST)x >> (unsigned)y))
INTS(SHIFT_I)
BINARY_KERNEL(shift_left, true, E_INT(shift_left))
BINARY_KERNEL(shift_right_logical, true, E_INT(shift_right_logical))
BINARY_KERNEL(shift_right_arithmetic, true, E_INT(shift_right_arithmetic))

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
BINARY_KERNEL(eq, false, E_BOOL(eq), E_INT(eq), E_FLOAT(eq), E_CPLX(eq))
BINARY_KERNEL(ne, false, E_BOOL(ne), E_INT(ne), E_FLOAT(ne), E_CPLX(ne))
BINARY_KERNEL(lt, false, E_BOOL(lt), E_INT(lt), E_FLOAT(lt))
BINARY_KERNEL(le, false, E_BOOL(le), E_INT(le), E_FLOAT(le))
BINARY_KERNEL(gt, false, E_BOOL(gt), E_INT(gt), E_FLOAT(gt))
BINARY_KERNEL(ge, false, E_BOOL(ge), E_INT(ge), E_FLOAT(ge))

/* ---------------------------------------------------------------- select_n */

/* select_n(which, *cases): which is bool (one or two cases: false picks
 * cases[0]) or int32 (an index into cases, clamped to range); every case has
 * one dtype and shape; which has that shape or rank 0. */
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

/* The entries not generated with their loops (src/cpu/table.c collects every
 * oly__cpu_<name>). */
const oly_cpu_kernel oly__cpu_convert_element_type = {.fn = convert_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_select_n = {.fn = select_n_kernel, .splits = true};

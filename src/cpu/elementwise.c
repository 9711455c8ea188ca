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

/* fname: y[i] = EXPR with x = x[i]; ATTR: the function's attributes (a level's
 * target, or nothing). */
#define U_LOOP_A(ATTR, fname, TI, TO, EXPR)                                               \
    ATTR static void fname(const void *xv, void *yv, int64_t n, const void *params)       \
    {                                                                                     \
        const TI *xp = xv;                                                                \
        TO *yp = yv;                                                                      \
        (void)params;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                 \
            TI x = xp[i];                                                                 \
            yp[i] = (TO)(EXPR);                                                           \
        }                                                                                 \
    }
#define U_LOOP(fname, TI, TO, EXPR) U_LOOP_A(, fname, TI, TO, EXPR)

/* fname: o[i] = EXPR with x = a[i] (or a[0]) and y = b[i] (or b[0]). */
#define B_LOOP_A(ATTR, fname, TI, TO, EXPR)                                               \
    ATTR static void fname(const void *av, const void *bv, void *ov, int64_t n, int mode) \
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
#define B_LOOP(fname, TI, TO, EXPR) B_LOOP_A(, fname, TI, TO, EXPR)

/* Multi-level loops (simd.h): the same C loop compiled three times, for the
 * baseline, for AVX2 and for AVX-512 (gcc vectorises each for its level), and
 * fname calling the one for oly__cpu_level(). For the exact operations
 * (arithmetic, comparisons, bit operations, conversions), where every level
 * computes the same IEEE result. */
#if OLY__CPU_X86
#define AT_LEVEL(fname, ARGS)                                                             \
    do {                                                                                  \
        switch (oly__cpu_level()) {                                                       \
        case OLY_CPU_LEVEL_AVX512: fname##_a5 ARGS; return;                              \
        case OLY_CPU_LEVEL_AVX2: fname##_a2 ARGS; return;                                \
        default: fname##_p ARGS; return;                                                  \
        }                                                                                 \
    } while (0)
#define U_LOOP_ML(fname, TI, TO, EXPR)                                                    \
    U_LOOP_A(, fname##_p, TI, TO, EXPR)                                                   \
    U_LOOP_A(OLY__TARGET_AVX2, fname##_a2, TI, TO, EXPR)                                  \
    U_LOOP_A(OLY__TARGET_AVX512, fname##_a5, TI, TO, EXPR)                                \
    static void fname(const void *x, void *y, int64_t n, const void *p)                   \
    {                                                                                     \
        AT_LEVEL(fname, (x, y, n, p));                                                    \
    }
#define B_LOOP_ML(fname, TI, TO, EXPR)                                                    \
    B_LOOP_A(, fname##_p, TI, TO, EXPR)                                                   \
    B_LOOP_A(OLY__TARGET_AVX2, fname##_a2, TI, TO, EXPR)                                  \
    B_LOOP_A(OLY__TARGET_AVX512, fname##_a5, TI, TO, EXPR)                                \
    static void fname(const void *a, const void *b, void *o, int64_t n, int mode)         \
    {                                                                                     \
        AT_LEVEL(fname, (a, b, o, n, mode));                                              \
    }
#else
#define U_LOOP_ML(fname, TI, TO, EXPR) U_LOOP(fname, TI, TO, EXPR)
#define B_LOOP_ML(fname, TI, TO, EXPR) B_LOOP(fname, TI, TO, EXPR)
#endif

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

/* Float loops (f32, f64 and the half versions) and complex loops of a unary op;
 * the _ML forms compile the f32/f64 loops for every level. */
#define F_UNARY(op, EF, ED)                                                               \
    U_LOOP(op##_f32, float, float, EF)                                                    \
    U_LOOP(op##_f64, double, double, ED)                                                  \
    HALF_U(op, false)
#define F_UNARY_ML(op, EF, ED)                                                            \
    U_LOOP_ML(op##_f32, float, float, EF)                                                 \
    U_LOOP_ML(op##_f64, double, double, ED)                                               \
    HALF_U(op, false)
#define C_UNARY(op, EC, EZ)                                                               \
    U_LOOP(op##_c64, c64, c64, EC)                                                        \
    U_LOOP(op##_c128, c128, c128, EZ)
#define F_BINARY(op, EF, ED)                                                              \
    B_LOOP(op##_f32, float, float, EF)                                                    \
    B_LOOP(op##_f64, double, double, ED)                                                  \
    HALF_B(op, false)
#define F_BINARY_ML(op, EF, ED)                                                           \
    B_LOOP_ML(op##_f32, float, float, EF)                                                 \
    B_LOOP_ML(op##_f64, double, double, ED)                                               \
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

/* ---------------------------------------------------------------- SIMD loops (transcendental)
 *
 * The f32/f64 transcendental loops run through SLEEF's 1.0-ULP (u10) vector
 * functions: 8 (f32) or 4 (f64) lanes with AVX2+FMA, 16 or 8 with AVX-512
 * (SLEEF's avx512f builds of the same algorithms, the same bound); sqrt,
 * rsqrt, floor and ceil use the exact instructions. The level is chosen once
 * per loop call (oly__cpu_level); the tail is padded into one more vector, so
 * every element of a call goes through the same function. At the portable
 * level (no AVX2/FMA, OLYMPUS_CPU_LEVEL=portable) the scalar libm loops run.
 *
 * Each vector operation NAME is four functions, v_NAME_f8 / _d4 (AVX2, f32 /
 * f64) and v_NAME_f16 / _d8 (AVX-512), so one line per row names it. */

#if OLY__CPU_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#include <sleef.h>
#pragma GCC pop_options
#define A2 OLY__TARGET_AVX2
#define A5 OLY__TARGET_AVX512

/* fname: y[i] = VFN(v) with v = x[i..i+W) as VT (W lanes of T). */
#define V_ULOOP(ATTR, fname, T, VT, W, LOAD, STORE, VFN)                                  \
    ATTR static void fname(const void *xv, void *yv, int64_t n)                           \
    {                                                                                     \
        const T *xp = xv;                                                                 \
        T *yp = yv;                                                                       \
        int64_t i = 0;                                                                    \
        for (; i + W <= n; i += W) STORE(yp + i, VFN(LOAD(xp + i)));                      \
        if (i < n) {                                                                      \
            T t[W] = {0};                                                                 \
            memcpy(t, xp + i, (size_t)(n - i) * sizeof(T));                              \
            STORE(t, VFN(LOAD(t)));                                                       \
            memcpy(yp + i, t, (size_t)(n - i) * sizeof(T));                               \
        }                                                                                 \
    }

/* fname: o[i] = VFN(x, y) with x, y the lanes of a and b (or a broadcast a[0] / b[0]). */
#define V_BLOOP(ATTR, fname, T, VT, W, LOAD, STORE, SET1, VFN)                            \
    ATTR static void fname(const void *av, const void *bv, void *ov, int64_t n, int mode) \
    {                                                                                     \
        const T *ap = av, *bp = bv;                                                       \
        T *op = ov;                                                                       \
        int64_t i = 0;                                                                    \
        if (mode == A_SCALAR) {                                                           \
            const VT x = SET1(ap[0]);                                                     \
            for (; i + W <= n; i += W) STORE(op + i, VFN(x, LOAD(bp + i)));               \
        } else if (mode == B_SCALAR) {                                                    \
            const VT y = SET1(bp[0]);                                                     \
            for (; i + W <= n; i += W) STORE(op + i, VFN(LOAD(ap + i), y));               \
        } else {                                                                          \
            for (; i + W <= n; i += W) STORE(op + i, VFN(LOAD(ap + i), LOAD(bp + i)));    \
        }                                                                                 \
        if (i < n) {                                                                      \
            T ta[W], tb[W];                                                               \
            for (int j = 0; j < W; j++) {                                                 \
                bool in_ = i + j < n;                                                     \
                ta[j] = mode == A_SCALAR ? ap[0] : in_ ? ap[i + j] : (T)1;                \
                tb[j] = mode == B_SCALAR ? bp[0] : in_ ? bp[i + j] : (T)1;                \
            }                                                                             \
            STORE(ta, VFN(LOAD(ta), LOAD(tb)));                                           \
            memcpy(op + i, ta, (size_t)(n - i) * sizeof(T));                              \
        }                                                                                 \
    }

/* The f32 and f64 loops of a unary op: the scalar EF / ED at the portable
 * level, v_VN's vector functions above it. */
#define F_UNARY_V(op, EF, ED, VN)                                                         \
    U_LOOP(op##_f32_p, float, float, EF)                                                  \
    U_LOOP(op##_f64_p, double, double, ED)                                                \
    V_ULOOP(A2, op##_f32_a2, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps,         \
            v_##VN##_f8)                                                                  \
    V_ULOOP(A2, op##_f64_a2, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd,       \
            v_##VN##_d4)                                                                  \
    V_ULOOP(A5, op##_f32_a5, float, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps,        \
            v_##VN##_f16)                                                                 \
    V_ULOOP(A5, op##_f64_a5, double, __m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd,       \
            v_##VN##_d8)                                                                  \
    static void op##_f32(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        switch (oly__cpu_level()) {                                                       \
        case OLY_CPU_LEVEL_AVX512: op##_f32_a5(x, y, n); return;                         \
        case OLY_CPU_LEVEL_AVX2: op##_f32_a2(x, y, n); return;                           \
        default: op##_f32_p(x, y, n, p); return;                                          \
        }                                                                                 \
    }                                                                                     \
    static void op##_f64(const void *x, void *y, int64_t n, const void *p)                \
    {                                                                                     \
        switch (oly__cpu_level()) {                                                       \
        case OLY_CPU_LEVEL_AVX512: op##_f64_a5(x, y, n); return;                         \
        case OLY_CPU_LEVEL_AVX2: op##_f64_a2(x, y, n); return;                           \
        default: op##_f64_p(x, y, n, p); return;                                          \
        }                                                                                 \
    }                                                                                     \
    HALF_U(op, false)
#define F_BINARY_V(op, EF, ED, VN)                                                        \
    B_LOOP(op##_f32_p, float, float, EF)                                                  \
    B_LOOP(op##_f64_p, double, double, ED)                                                \
    V_BLOOP(A2, op##_f32_a2, float, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps,         \
            _mm256_set1_ps, v_##VN##_f8)                                                  \
    V_BLOOP(A2, op##_f64_a2, double, __m256d, 4, _mm256_loadu_pd, _mm256_storeu_pd,       \
            _mm256_set1_pd, v_##VN##_d4)                                                  \
    V_BLOOP(A5, op##_f32_a5, float, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps,        \
            _mm512_set1_ps, v_##VN##_f16)                                                 \
    V_BLOOP(A5, op##_f64_a5, double, __m512d, 8, _mm512_loadu_pd, _mm512_storeu_pd,       \
            _mm512_set1_pd, v_##VN##_d8)                                                  \
    static void op##_f32(const void *a, const void *b, void *o, int64_t n, int mode)      \
    {                                                                                     \
        AT_LEVEL(op##_f32, (a, b, o, n, mode));                                           \
    }                                                                                     \
    static void op##_f64(const void *a, const void *b, void *o, int64_t n, int mode)      \
    {                                                                                     \
        AT_LEVEL(op##_f64, (a, b, o, n, mode));                                           \
    }                                                                                     \
    HALF_B(op, false)

/* v_f: SLEEF's u10 function f at both levels. */
#define SLEEF_U(f)                                                                        \
    A2 static inline __m256 v_##f##_f8(__m256 v) { return Sleef_##f##f8_u10avx2(v); }     \
    A2 static inline __m256d v_##f##_d4(__m256d v) { return Sleef_##f##d4_u10avx2(v); }   \
    A5 static inline __m512 v_##f##_f16(__m512 v) { return Sleef_##f##f16_u10avx512f(v); } \
    A5 static inline __m512d v_##f##_d8(__m512d v) { return Sleef_##f##d8_u10avx512f(v); }
#define SLEEF_B(f)                                                                        \
    A2 static inline __m256 v_##f##_f8(__m256 x, __m256 y)                                \
    {                                                                                     \
        return Sleef_##f##f8_u10avx2(x, y);                                               \
    }                                                                                     \
    A2 static inline __m256d v_##f##_d4(__m256d x, __m256d y)                             \
    {                                                                                     \
        return Sleef_##f##d4_u10avx2(x, y);                                               \
    }                                                                                     \
    A5 static inline __m512 v_##f##_f16(__m512 x, __m512 y)                               \
    {                                                                                     \
        return Sleef_##f##f16_u10avx512f(x, y);                                           \
    }                                                                                     \
    A5 static inline __m512d v_##f##_d8(__m512d x, __m512d y)                             \
    {                                                                                     \
        return Sleef_##f##d8_u10avx512f(x, y);                                            \
    }
SLEEF_U(exp)
SLEEF_U(exp2)
SLEEF_U(log)
SLEEF_U(expm1)
SLEEF_U(sin)
SLEEF_U(cos)
SLEEF_U(tan)
SLEEF_U(asin)
SLEEF_U(acos)
SLEEF_U(atan)
SLEEF_U(tanh)
SLEEF_U(atanh)
SLEEF_U(cbrt)
SLEEF_B(pow)
SLEEF_B(atan2)

A2 static inline __m256 v_sqrt_f8(__m256 v) { return _mm256_sqrt_ps(v); }
A2 static inline __m256d v_sqrt_d4(__m256d v) { return _mm256_sqrt_pd(v); }
A5 static inline __m512 v_sqrt_f16(__m512 v) { return _mm512_sqrt_ps(v); }
A5 static inline __m512d v_sqrt_d8(__m512d v) { return _mm512_sqrt_pd(v); }
A2 static inline __m256 v_rsqrt_f8(__m256 v)
{
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(v));
}
A2 static inline __m256d v_rsqrt_d4(__m256d v)
{
    return _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_sqrt_pd(v));
}
A5 static inline __m512 v_rsqrt_f16(__m512 v)
{
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(v));
}
A5 static inline __m512d v_rsqrt_d8(__m512d v)
{
    return _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_sqrt_pd(v));
}
A2 static inline __m256 v_floor_f8(__m256 v) { return _mm256_floor_ps(v); }
A2 static inline __m256d v_floor_d4(__m256d v) { return _mm256_floor_pd(v); }
A5 static inline __m512 v_floor_f16(__m512 v) { return _mm512_roundscale_ps(v, _MM_FROUND_FLOOR); }
A5 static inline __m512d v_floor_d8(__m512d v) { return _mm512_roundscale_pd(v, _MM_FROUND_FLOOR); }
A2 static inline __m256 v_ceil_f8(__m256 v) { return _mm256_ceil_ps(v); }
A2 static inline __m256d v_ceil_d4(__m256d v) { return _mm256_ceil_pd(v); }
A5 static inline __m512 v_ceil_f16(__m512 v) { return _mm512_roundscale_ps(v, _MM_FROUND_CEIL); }
A5 static inline __m512d v_ceil_d8(__m512d v) { return _mm512_roundscale_pd(v, _MM_FROUND_CEIL); }
/* logistic: 1 / (1 + exp(-v)). */
A2 static inline __m256 v_logistic_f8(__m256 v)
{
    __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), v));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
A2 static inline __m256d v_logistic_d4(__m256d v)
{
    __m256d e = Sleef_expd4_u10avx2(_mm256_sub_pd(_mm256_setzero_pd(), v));
    return _mm256_div_pd(_mm256_set1_pd(1.0), _mm256_add_pd(_mm256_set1_pd(1.0), e));
}
A5 static inline __m512 v_logistic_f16(__m512 v)
{
    __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_setzero_ps(), v));
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
A5 static inline __m512d v_logistic_d8(__m512d v)
{
    __m512d e = Sleef_expd8_u10avx512f(_mm512_sub_pd(_mm512_setzero_pd(), v));
    return _mm512_div_pd(_mm512_set1_pd(1.0), _mm512_add_pd(_mm512_set1_pd(1.0), e));
}

/* SLEEF's sinh/cosh, asinh/acosh and log1p have a narrower domain than libm:
 * past it they return inf where the true value is finite. The lanes of v
 * marked in bad go through the scalar libm function instead (rare inputs). */
#define FIX(ATTR, name, VT, T, W, MASK_T, STORE, LOAD)                                    \
    ATTR static inline VT name(VT v, VT r, MASK_T m, T (*f)(T))                           \
    {                                                                                     \
        if (!m) return r;                                                                 \
        T xs[W], rs[W];                                                                   \
        STORE(xs, v);                                                                     \
        STORE(rs, r);                                                                     \
        for (int j = 0; j < W; j++)                                                       \
            if (m >> j & 1) rs[j] = f(xs[j]);                                             \
        return LOAD(rs);                                                                  \
    }
FIX(A2, fix_f8, __m256, float, 8, int, _mm256_storeu_ps, _mm256_loadu_ps)
FIX(A2, fix_d4, __m256d, double, 4, int, _mm256_storeu_pd, _mm256_loadu_pd)
FIX(A5, fix_f16, __m512, float, 16, __mmask16, _mm512_storeu_ps, _mm512_loadu_ps)
FIX(A5, fix_d8, __m512d, double, 8, __mmask8, _mm512_storeu_pd, _mm512_loadu_pd)
/* The lanes with |v| > lim (NaN lanes are not marked), as a bit mask. */
A2 static inline int abs_gt_f8(__m256 v, float lim)
{
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(lim), _CMP_GT_OQ));
}
A2 static inline int abs_gt_d4(__m256d v, double lim)
{
    __m256d a = _mm256_andnot_pd(_mm256_set1_pd(-0.0), v);
    return _mm256_movemask_pd(_mm256_cmp_pd(a, _mm256_set1_pd(lim), _CMP_GT_OQ));
}
A5 static inline __mmask16 abs_gt_f16(__m512 v, float lim)
{
    return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(lim), _CMP_GT_OQ);
}
A5 static inline __mmask8 abs_gt_d8(__m512d v, double lim)
{
    return _mm512_cmp_pd_mask(_mm512_abs_pd(v), _mm512_set1_pd(lim), _CMP_GT_OQ);
}
/* v_fn: SLEEF's fn over its domain |x| <= LF (f32) / LD (f64), libm past it. */
#define V_GUARDED(fn, LF, LD)                                                             \
    A2 static inline __m256 v_##fn##_f8(__m256 v)                                         \
    {                                                                                     \
        return fix_f8(v, Sleef_##fn##f8_u10avx2(v), abs_gt_f8(v, LF), fn##f);             \
    }                                                                                     \
    A2 static inline __m256d v_##fn##_d4(__m256d v)                                       \
    {                                                                                     \
        return fix_d4(v, Sleef_##fn##d4_u10avx2(v), abs_gt_d4(v, LD), fn);                \
    }                                                                                     \
    A5 static inline __m512 v_##fn##_f16(__m512 v)                                        \
    {                                                                                     \
        return fix_f16(v, Sleef_##fn##f16_u10avx512f(v), abs_gt_f16(v, LF), fn##f);       \
    }                                                                                     \
    A5 static inline __m512d v_##fn##_d8(__m512d v)                                       \
    {                                                                                     \
        return fix_d8(v, Sleef_##fn##d8_u10avx512f(v), abs_gt_d8(v, LD), fn);             \
    }
V_GUARDED(sinh, 88.0f, 709.0)
V_GUARDED(cosh, 88.0f, 709.0)
V_GUARDED(asinh, 1e18f, 1e150)
V_GUARDED(acosh, 1e18f, 1e150)
V_GUARDED(log1p, 1e37f, 1e300)
#else
#define F_UNARY_V(op, EF, ED, VN) F_UNARY(op, EF, ED)
#define F_BINARY_V(op, EF, ED, VN) F_BINARY(op, EF, ED)
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

/* Float transcendental with complex support: one line per op (VN: the vector
 * functions v_VN_*). */
#define TRANSCENDENTAL(op, EF, ED, EC, EZ, VN)                                            \
    F_UNARY_V(op, EF, ED, VN)                                                             \
    C_UNARY(op, EC, EZ)                                                                   \
    UNARY_KERNEL(op, true, E_FLOAT(op), E_CPLX(op))
#define FLOAT_ONLY(op, EF, ED, VN)                                                        \
    F_UNARY_V(op, EF, ED, VN)                                                             \
    UNARY_KERNEL(op, true, E_FLOAT(op))

/* ---------------------------------------------------------------- unary: transcendental */

TRANSCENDENTAL(exp, expf(x), exp(x), cexpf(x), cexp(x), exp)
TRANSCENDENTAL(exp2, exp2f(x), exp2(x), cexpf(x * (float)M_LN2), cexp(x * M_LN2), exp2)
TRANSCENDENTAL(log, logf(x), log(x), clogf(x), clog(x), log)
TRANSCENDENTAL(log1p, log1pf(x), log1p(x), clogf(1.0f + x), clog(1.0 + x), log1p)
TRANSCENDENTAL(expm1, expm1f(x), expm1(x), cexpf(x) - 1.0f, cexp(x) - 1.0, expm1)
TRANSCENDENTAL(sin, sinf(x), sin(x), csinf(x), csin(x), sin)
TRANSCENDENTAL(cos, cosf(x), cos(x), ccosf(x), ccos(x), cos)
TRANSCENDENTAL(tan, tanf(x), tan(x), ctanf(x), ctan(x), tan)
TRANSCENDENTAL(asin, asinf(x), asin(x), casinf(x), casin(x), asin)
TRANSCENDENTAL(acos, acosf(x), acos(x), cacosf(x), cacos(x), acos)
TRANSCENDENTAL(atan, atanf(x), atan(x), catanf(x), catan(x), atan)
TRANSCENDENTAL(sinh, sinhf(x), sinh(x), csinhf(x), csinh(x), sinh)
TRANSCENDENTAL(cosh, coshf(x), cosh(x), ccoshf(x), ccosh(x), cosh)
TRANSCENDENTAL(tanh, tanhf(x), tanh(x), ctanhf(x), ctanh(x), tanh)
TRANSCENDENTAL(asinh, asinhf(x), asinh(x), casinhf(x), casinh(x), asinh)
TRANSCENDENTAL(acosh, acoshf(x), acosh(x), cacoshf(x), cacosh(x), acosh)
TRANSCENDENTAL(atanh, atanhf(x), atanh(x), catanhf(x), catanh(x), atanh)
TRANSCENDENTAL(logistic, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)),
               1.0f / (1.0f + cexpf(-x)), 1.0 / (1.0 + cexp(-x)), logistic)
TRANSCENDENTAL(sqrt, sqrtf(x), sqrt(x), csqrtf(x), csqrt(x), sqrt)
TRANSCENDENTAL(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x), 1.0f / csqrtf(x), 1.0 / csqrt(x), rsqrt)
FLOAT_ONLY(cbrt, cbrtf(x), cbrt(x), cbrt)
FLOAT_ONLY(floor, floorf(x), floor(x), floor)
FLOAT_ONLY(ceil, ceilf(x), ceil(x), ceil)

/* round: half away from zero (0) or half to even (1). */
U_LOOP(round_away_f32, float, float, roundf(x))
U_LOOP_ML(round_even_f32, float, float, rintf(x))
U_LOOP(round_away_f64, double, double, round(x))
U_LOOP_ML(round_even_f64, double, double, rint(x))
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
U_LOOP_ML(is_finite_f32, float, uint8_t, isfinite(x) != 0)
U_LOOP_ML(is_finite_f64, double, uint8_t, isfinite(x) != 0)
HALF_U(is_finite, true)
UNARY_KERNEL(is_finite, false, E_FLOAT(is_finite))

/* ---------------------------------------------------------------- unary: arithmetic */

/* neg: integers wrap (-INT_MIN == INT_MIN). */
#define NEG_I(s, T, UT, ST, WT, B) U_LOOP_ML(neg_##s, T, T, (T)(0u - (WT)x))
INTS(NEG_I)
F_UNARY_ML(neg, -x, -x)
C_UNARY(neg, -x, -x)
UNARY_KERNEL(neg, true, E_INT(neg), E_FLOAT(neg), E_CPLX(neg))

/* sign: -1/0/1; floats keep ±0 and NaN; complex x/|x|. */
#define SIGN_S(s, T, UT, ST, WT, B) U_LOOP_ML(sign_##s, T, T, (x > 0) - (x < 0))
#define SIGN_U(s, T, UT, ST, WT, B) U_LOOP_ML(sign_##s, T, T, x != 0)
SINTS(SIGN_S)
UINTS(SIGN_U)
F_UNARY_ML(sign, x > 0 ? 1.0f : x < 0 ? -1.0f : x, x > 0 ? 1.0 : x < 0 ? -1.0 : x)
C_UNARY(sign, x == 0 ? x : x / cabsf(x), x == 0 ? x : x / cabs(x))
UNARY_KERNEL(sign, true, E_INT(sign), E_FLOAT(sign), E_CPLX(sign))

/* abs: integers wrap (abs(INT_MIN) == INT_MIN); complex -> real. */
#define ABS_S(s, T, UT, ST, WT, B) U_LOOP_ML(abs_##s, T, T, x < 0 ? (T)(0u - (WT)x) : x)
#define ABS_U(s, T, UT, ST, WT, B) U_LOOP(abs_##s, T, T, x)
SINTS(ABS_S)
UINTS(ABS_U)
F_UNARY_ML(abs, fabsf(x), fabs(x))
U_LOOP(abs_c64, c64, float, cabsf(x))
U_LOOP(abs_c128, c128, double, cabs(x))
UNARY_KERNEL(abs, false, E_INT(abs), E_FLOAT(abs), E_CPLX(abs))

/* square: integers wrap. */
#define SQUARE_I(s, T, UT, ST, WT, B) U_LOOP_ML(square_##s, T, T, (T)((WT)x * (WT)x))
INTS(SQUARE_I)
F_UNARY_ML(square, x * x, x * x)
C_UNARY(square, x * x, x * x)
UNARY_KERNEL(square, true, E_INT(square), E_FLOAT(square), E_CPLX(square))

/* not: logical for bool, bitwise for integers. */
U_LOOP_ML(not_bool, uint8_t, uint8_t, x == 0)
#define NOT_I(s, T, UT, ST, WT, B) U_LOOP_ML(not_##s, T, T, ~(WT)x)
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

/* Typed loops for the common pairs, compiled per level; each computes what
 * oly__convert does (src/core/convert.c): integers to floats round once, f64
 * to f32 rounds, floats to int32 truncate, saturate and send NaN to 0,
 * anything to bool is != 0. Other pairs take oly__convert. */
#define SAT_I32(x)                                                                        \
    ((x) != (x) ? 0 : (x) <= -2147483648.0 ? INT32_MIN : (x) >= 2147483648.0 ? INT32_MAX  \
                                                                      : (int32_t)(x))
U_LOOP_ML(cvt_u32_f32, uint32_t, float, x)
U_LOOP_ML(cvt_i32_f32, int32_t, float, x)
U_LOOP_ML(cvt_u8_f32, uint8_t, float, x)
U_LOOP_ML(cvt_bool_f32, uint8_t, float, x != 0)
U_LOOP_ML(cvt_f64_f32, double, float, x)
U_LOOP_ML(cvt_i64_f32, int64_t, float, x)
U_LOOP_ML(cvt_u32_f64, uint32_t, double, x)
U_LOOP_ML(cvt_i32_f64, int32_t, double, x)
U_LOOP_ML(cvt_f32_f64, float, double, x)
U_LOOP_ML(cvt_i64_f64, int64_t, double, x)
U_LOOP_ML(cvt_f32_i32, float, int32_t, SAT_I32(x))
U_LOOP_ML(cvt_f64_i32, double, int32_t, SAT_I32(x))
U_LOOP_ML(cvt_i32_i64, int32_t, int64_t, x)
U_LOOP_ML(cvt_u32_i64, uint32_t, int64_t, x)
U_LOOP_ML(cvt_i64_i32, int64_t, int32_t, (int32_t)(uint32_t)(uint64_t)x)
U_LOOP_ML(cvt_f32_bool, float, uint8_t, x != 0)
U_LOOP_ML(cvt_i32_bool, int32_t, uint8_t, x != 0)

static const struct {
    oly_dtype from, to;
    unary_fn f;
} converts[] = {
    {OLY_UINT32, OLY_FLOAT32, cvt_u32_f32}, {OLY_INT32, OLY_FLOAT32, cvt_i32_f32},
    {OLY_UINT8, OLY_FLOAT32, cvt_u8_f32},   {OLY_BOOL, OLY_FLOAT32, cvt_bool_f32},
    {OLY_FLOAT64, OLY_FLOAT32, cvt_f64_f32}, {OLY_INT64, OLY_FLOAT32, cvt_i64_f32},
    {OLY_UINT32, OLY_FLOAT64, cvt_u32_f64}, {OLY_INT32, OLY_FLOAT64, cvt_i32_f64},
    {OLY_FLOAT32, OLY_FLOAT64, cvt_f32_f64}, {OLY_INT64, OLY_FLOAT64, cvt_i64_f64},
    {OLY_FLOAT32, OLY_INT32, cvt_f32_i32},  {OLY_FLOAT64, OLY_INT32, cvt_f64_i32},
    {OLY_INT32, OLY_INT64, cvt_i32_i64},    {OLY_UINT32, OLY_INT64, cvt_u32_i64},
    {OLY_INT64, OLY_INT32, cvt_i64_i32},    {OLY_FLOAT32, OLY_BOOL, cvt_f32_bool},
    {OLY_INT32, OLY_BOOL, cvt_i32_bool},
};

static oly_status convert_kernel(const oly_kernel_ctx *c)
{
    oly_dtype from = c->in_aval[0].dtype, to = c->out_aval[0].dtype;
    int64_t lo, hi;
    split(c, oly_aval_size(&c->out_aval[0]), &lo, &hi);
    if (hi <= lo) return OLY_OK;
    size_t isz = oly_dtype_size(from), osz = oly_dtype_size(to);
    const char *x = (const char *)c->in[0] + (size_t)lo * isz;
    char *y = (char *)c->out[0] + (size_t)lo * osz;
    for (size_t i = 0; i < sizeof converts / sizeof converts[0]; i++)
        if (converts[i].from == from && converts[i].to == to) {
            converts[i].f(x, y, hi - lo, NULL);
            return OLY_OK;
        }
    oly__convert(x, from, y, to, hi - lo);
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
    B_LOOP_ML(add_##s, T, T, (WT)x + (WT)y)                                               \
    B_LOOP_ML(sub_##s, T, T, (WT)x - (WT)y)                                               \
    B_LOOP_ML(mul_##s, T, T, (WT)x * (WT)y)
INTS(WRAP_OPS)
F_BINARY_ML(add, x + y, x + y)
F_BINARY_ML(sub, x - y, x - y)
F_BINARY_ML(mul, x * y, x * y)
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
F_BINARY_ML(div, x / y, x / y)
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
F_BINARY_V(pow, powf(x, y), pow(x, y), pow)
C_BINARY(pow, cpow64(x, y), cpow128(x, y))
BINARY_KERNEL(pow, true, E_INT(pow), E_FLOAT(pow), E_CPLX(pow))

/* max/min: NaN propagates; bool acts as or/and. */
#define MAXMIN_I(s, T, UT, ST, WT, B)                                                     \
    B_LOOP_ML(max_##s, T, T, x > y ? x : y)                                               \
    B_LOOP_ML(min_##s, T, T, x < y ? x : y)
INTS(MAXMIN_I)
B_LOOP_ML(max_bool, uint8_t, uint8_t, (x | y) != 0)
B_LOOP_ML(min_bool, uint8_t, uint8_t, (x && y))
F_BINARY_ML(max, (x > y || x != x) ? x : y, (x > y || x != x) ? x : y)
F_BINARY_ML(min, (x < y || x != x) ? x : y, (x < y || x != x) ? x : y)
BINARY_KERNEL(max, true, E_BOOL(max), E_INT(max), E_FLOAT(max))
BINARY_KERNEL(min, true, E_BOOL(min), E_INT(min), E_FLOAT(min))

/* atan2, nextafter: floats. nextafter on 16-bit formats steps the bit pattern. */
F_BINARY_V(atan2, atan2f(x, y), atan2(x, y), atan2)
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
    B_LOOP_ML(and_##s, T, T, x & y)                                                       \
    B_LOOP_ML(or_##s, T, T, x | y)                                                        \
    B_LOOP_ML(xor_##s, T, T, x ^ y)
INTS(BITS_I)
B_LOOP_ML(and_bool, uint8_t, uint8_t, (x && y))
B_LOOP_ML(or_bool, uint8_t, uint8_t, (x || y))
B_LOOP_ML(xor_bool, uint8_t, uint8_t, (x != 0) != (y != 0))
BINARY_KERNEL(and, true, E_BOOL(and), E_INT(and))
BINARY_KERNEL(or, true, E_BOOL(or), E_INT(or))
BINARY_KERNEL(xor, true, E_BOOL(xor), E_INT(xor))

/* Shifts act on the bit pattern; a shift count outside [0, bits) gives 0, or
 * the sign fill for the arithmetic right shift. */
#define SHIFT_I(s, T, UT, ST, WT, B)                                                      \
    B_LOOP_ML(shift_left_##s, T, T,                                                       \
              (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x << (unsigned)y))                    \
    B_LOOP_ML(shift_right_logical_##s, T, T,                                              \
              (uint64_t)y >= B ? (T)0 : (T)((WT)(UT)x >> (unsigned)y))                    \
    B_LOOP_ML(shift_right_arithmetic_##s, T, T,                                           \
           (uint64_t)y >= B ? (T)((ST)x < 0 ? -1 : 0) : (T)((ST)x >> (unsigned)y))
INTS(SHIFT_I)
BINARY_KERNEL(shift_left, true, E_INT(shift_left))
BINARY_KERNEL(shift_right_logical, true, E_INT(shift_right_logical))
BINARY_KERNEL(shift_right_arithmetic, true, E_INT(shift_right_arithmetic))

/* ---------------------------------------------------------------- binary: comparisons */

#define CMP_ALL(op, OPR)                                                                  \
    B_LOOP_ML(op##_bool, uint8_t, uint8_t, (x != 0) OPR (y != 0))                            \
    B_LOOP_ML(op##_f32, float, uint8_t, x OPR y)                                             \
    B_LOOP_ML(op##_f64, double, uint8_t, x OPR y)                                            \
    HALF_B(op, true)
#define CMP_I(s, T, UT, ST, WT, B)                                                        \
    B_LOOP_ML(eq_##s, T, uint8_t, x == y)                                                    \
    B_LOOP_ML(ne_##s, T, uint8_t, x != y)                                                    \
    B_LOOP_ML(lt_##s, T, uint8_t, x < y)                                                     \
    B_LOOP_ML(le_##s, T, uint8_t, x <= y)                                                    \
    B_LOOP_ML(gt_##s, T, uint8_t, x > y)                                                     \
    B_LOOP_ML(ge_##s, T, uint8_t, x >= y)
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

/* o[i] = cases[which[i]][i] for one element type T, compiled per level. */
#define SELECT_LOOP_A(ATTR, fname, T)                                                     \
    ATTR static void fname(const void *wv, bool wbool, const void *const *cs, int nc,     \
                           void *ov, int64_t lo, int64_t hi)                              \
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
#if OLY__CPU_X86
#define SELECT_LOOP(fname, T)                                                             \
    SELECT_LOOP_A(, fname##_p, T)                                                         \
    SELECT_LOOP_A(OLY__TARGET_AVX2, fname##_a2, T)                                        \
    SELECT_LOOP_A(OLY__TARGET_AVX512, fname##_a5, T)                                      \
    static void fname(const void *wv, bool wbool, const void *const *cs, int nc, void *ov, \
                      int64_t lo, int64_t hi)                                             \
    {                                                                                     \
        AT_LEVEL(fname, (wv, wbool, cs, nc, ov, lo, hi));                                 \
    }
#else
#define SELECT_LOOP(fname, T) SELECT_LOOP_A(, fname, T)
#endif
SELECT_LOOP(select1, uint8_t)
SELECT_LOOP(select2, uint16_t)
SELECT_LOOP(select4, uint32_t)
SELECT_LOOP(select8, uint64_t)
SELECT_LOOP_A(, select16, u128_t)

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

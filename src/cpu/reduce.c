/* reduce.c — kernels of the reductions (reduce_sum/prod/max/min/and/or),
 * argmax/argmin and the cumulative scans (cumsum/cumprod/cummax/cummin).
 *
 * Kernels load runs of elements into an accumulator type chosen by dtype kind
 * (double for every float, int64 for signed ints, uint64 for unsigned ints and
 * bool, double complex for complex), combine there, and convert back once:
 * f16/bf16/f32 sums and products accumulate in double, f64 sums in double with
 * 512-element blocks, integer arithmetic wraps (done in uint64). Max/min
 * propagate NaN. Reductions walk the input once in memory order, whatever the
 * axes, accumulating into one slot per output element; a contiguous f32/f64
 * run reduced to one value takes the AVX2 path ("SIMD runs") where it can, and
 * f32/f64 rows reduced into a vector (a leading or middle axis: x.sum(0)) take
 * the per-level rows loop ("rows into a vector").
 *
 * Accuracy of f32 sums: NumPy adds a contiguous run pairwise in float32 and
 * the rows of x.sum(0) one by one in float32 (error growing with the row
 * count); here both accumulate in double (pairwise blocks for runs, row order
 * for rows) and round once, so an f32 sum is within an ULP or so of the exact
 * sum unless it cancels. */
#include "cpu/cpu.h"
#include "cpu/simd.h"
#include "prims/reduce_ops.h"

#include <math.h>

/* ---------------------------------------------------------------- accumulators */

typedef enum acc_kind { ACC_F, ACC_I, ACC_U, ACC_C } acc_kind; /* double int64 uint64 double[2] */

static acc_kind acc_of(oly_dtype t)
{
    if (oly_dtype_is_float(t)) return ACC_F;
    if (oly_dtype_is_signed_int(t)) return ACC_I;
    if (oly_dtype_is_complex(t)) return ACC_C;
    return ACC_U; /* unsigned, bool */
}

static size_t acc_size(acc_kind k) { return k == ACC_C ? 16 : 8; }

/* The dtype whose storage equals the accumulator (the output is then used in place). */
static bool acc_is_native(oly_dtype t)
{
    return t == OLY_FLOAT64 || t == OLY_INT64 || t == OLY_UINT64 || t == OLY_COMPLEX128;
}

#define LOAD(CT, AT)                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                     \
        CT v_;                                                                            \
        memcpy(&v_, src + i * st, sizeof v_);                                             \
        ((AT *)dst)[i] = (AT)v_;                                                          \
    }                                                                                     \
    break

/* Loads n elements of dtype t (byte stride st) into the accumulator buffer dst. */
static void load(oly_dtype t, const char *src, int64_t st, int64_t n, void *dst)
{
    switch (t) {
    case OLY_BOOL: LOAD(uint8_t, uint64_t);
    case OLY_INT8: LOAD(int8_t, int64_t);
    case OLY_INT16: LOAD(int16_t, int64_t);
    case OLY_INT32: LOAD(int32_t, int64_t);
    case OLY_INT64: LOAD(int64_t, int64_t);
    case OLY_UINT8: LOAD(uint8_t, uint64_t);
    case OLY_UINT16: LOAD(uint16_t, uint64_t);
    case OLY_UINT32: LOAD(uint32_t, uint64_t);
    case OLY_UINT64: LOAD(uint64_t, uint64_t);
    case OLY_FLOAT32: LOAD(float, double);
    case OLY_FLOAT64: LOAD(double, double);
    case OLY_FLOAT16:
    case OLY_BFLOAT16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + i * st, 2);
            ((double *)dst)[i] = t == OLY_FLOAT16 ? oly__half_to_float(h) : oly__bf16_to_float(h);
        }
        break;
    case OLY_COMPLEX64:
        for (int64_t i = 0; i < n; i++) {
            float v[2];
            memcpy(v, src + i * st, 8);
            ((double *)dst)[2 * i] = v[0];
            ((double *)dst)[2 * i + 1] = v[1];
        }
        break;
    case OLY_COMPLEX128:
        for (int64_t i = 0; i < n; i++) memcpy((char *)dst + 16 * i, src + i * st, 16);
        break;
    default: break;
    }
}

#define STORE(CT, AT)                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                     \
        CT v_ = (CT)((const AT *)acc)[i];                                                 \
        memcpy(dst + i * st, &v_, sizeof v_);                                             \
    }                                                                                     \
    break

/* Stores n accumulators as dtype t (byte stride st): the inverse of load. */
static void store(oly_dtype t, const void *acc, int64_t n, char *dst, int64_t st)
{
    switch (t) {
    case OLY_BOOL:
        for (int64_t i = 0; i < n; i++) dst[i * st] = ((const uint64_t *)acc)[i] != 0;
        break;
    case OLY_INT8: STORE(int8_t, int64_t);
    case OLY_INT16: STORE(int16_t, int64_t);
    case OLY_INT32: STORE(int32_t, int64_t);
    case OLY_INT64: STORE(int64_t, int64_t);
    case OLY_UINT8: STORE(uint8_t, uint64_t);
    case OLY_UINT16: STORE(uint16_t, uint64_t);
    case OLY_UINT32: STORE(uint32_t, uint64_t);
    case OLY_UINT64: STORE(uint64_t, uint64_t);
    case OLY_FLOAT32: STORE(float, double);
    case OLY_FLOAT64: STORE(double, double);
    case OLY_FLOAT16:
    case OLY_BFLOAT16:
        for (int64_t i = 0; i < n; i++) {
            float f = (float)((const double *)acc)[i];
            uint16_t h = t == OLY_FLOAT16 ? oly__float_to_half(f) : oly__float_to_bf16(f);
            memcpy(dst + i * st, &h, 2);
        }
        break;
    case OLY_COMPLEX64:
        for (int64_t i = 0; i < n; i++) {
            float v[2] = {(float)((const double *)acc)[2 * i],
                          (float)((const double *)acc)[2 * i + 1]};
            memcpy(dst + i * st, v, 8);
        }
        break;
    case OLY_COMPLEX128:
        for (int64_t i = 0; i < n; i++) memcpy(dst + i * st, (const char *)acc + 16 * i, 16);
        break;
    default: break;
    }
}

/* The identity of op for dtype t, as one accumulator at dst. */
static void identity(oly_reduce_op op, oly_dtype t, void *dst)
{
    acc_kind k = acc_of(t);
    int bits = (int)oly_dtype_size(t) * 8;
    switch (k) {
    case ACC_F: {
        double v = op == OLY_REDUCE_SUM    ? 0.0
                   : op == OLY_REDUCE_PROD ? 1.0
                   : op == OLY_REDUCE_MAX  ? -INFINITY
                                           : INFINITY;
        memcpy(dst, &v, 8);
        break;
    }
    case ACC_C: {
        double v[2] = {op == OLY_REDUCE_PROD ? 1.0 : 0.0, 0.0};
        memcpy(dst, v, 16);
        break;
    }
    case ACC_I: {
        int64_t hi = bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
        int64_t v = op == OLY_REDUCE_SUM || op == OLY_REDUCE_OR ? 0
                    : op == OLY_REDUCE_PROD                     ? 1
                    : op == OLY_REDUCE_AND                      ? -1
                    : op == OLY_REDUCE_MAX                      ? -hi - 1
                                                                : hi;
        memcpy(dst, &v, 8);
        break;
    }
    case ACC_U: {
        uint64_t hi = t == OLY_BOOL ? 1 : bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        uint64_t v = op == OLY_REDUCE_SUM || op == OLY_REDUCE_OR || op == OLY_REDUCE_MAX ? 0
                     : op == OLY_REDUCE_PROD                                         ? 1
                     : op == OLY_REDUCE_AND                                          ? UINT64_MAX
                                                                                     : hi;
        memcpy(dst, &v, 8);
        break;
    }
    }
}

enum { VEC, RED, SCAN, SCAN_REV };

/* Combines n loaded values x into accumulators:
 * VEC: acc[i] = acc[i] op x[i]; RED: acc[0] = acc[0] op x[0..n);
 * SCAN / SCAN_REV: running acc[0] over x forwards / backwards, x[i] = running value. */
#define COMBINE(T, E)                                                                     \
    do {                                                                                  \
        T *acc_ = accp, *x_ = xp;                                                         \
        if (mode == VEC) {                                                                \
            for (int64_t i = 0; i < n; i++) {                                             \
                T a = acc_[i], x = x_[i];                                                 \
                acc_[i] = (E);                                                            \
            }                                                                             \
        } else {                                                                          \
            T a = acc_[0];                                                                \
            for (int64_t j = 0; j < n; j++) {                                             \
                int64_t i = mode == SCAN_REV ? n - 1 - j : j;                             \
                T x = x_[i];                                                              \
                a = (E);                                                                  \
                if (mode != RED) x_[i] = a;                                               \
            }                                                                             \
            acc_[0] = a;                                                                  \
        }                                                                                 \
    } while (0)

static void combine(acc_kind k, oly_reduce_op op, int mode, void *accp, void *xp, int64_t n)
{
    switch (k) {
    case ACC_F:
        if (op == OLY_REDUCE_SUM && mode == RED) { /* block sum, then one add */
            const double *x = xp;
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += x[i];
            *(double *)accp += s;
            return;
        }
        switch (op) {
        case OLY_REDUCE_SUM: COMBINE(double, a + x); break;
        case OLY_REDUCE_PROD: COMBINE(double, a * x); break;
        case OLY_REDUCE_MAX: COMBINE(double, (x > a || isnan(x)) ? x : a); break;
        case OLY_REDUCE_MIN: COMBINE(double, (x < a || isnan(x)) ? x : a); break;
        default: break;
        }
        break;
    case ACC_I:
        switch (op) {
        case OLY_REDUCE_SUM: COMBINE(int64_t, (int64_t)((uint64_t)a + (uint64_t)x)); break;
        case OLY_REDUCE_PROD: COMBINE(int64_t, (int64_t)((uint64_t)a * (uint64_t)x)); break;
        case OLY_REDUCE_MAX: COMBINE(int64_t, x > a ? x : a); break;
        case OLY_REDUCE_MIN: COMBINE(int64_t, x < a ? x : a); break;
        case OLY_REDUCE_AND: COMBINE(int64_t, a & x); break;
        case OLY_REDUCE_OR: COMBINE(int64_t, a | x); break;
        }
        break;
    case ACC_U:
        switch (op) {
        case OLY_REDUCE_SUM: COMBINE(uint64_t, a + x); break;
        case OLY_REDUCE_PROD: COMBINE(uint64_t, a * x); break;
        case OLY_REDUCE_MAX: COMBINE(uint64_t, x > a ? x : a); break;
        case OLY_REDUCE_MIN: COMBINE(uint64_t, x < a ? x : a); break;
        case OLY_REDUCE_AND: COMBINE(uint64_t, a & x); break;
        case OLY_REDUCE_OR: COMBINE(uint64_t, a | x); break;
        }
        break;
    case ACC_C: {
        double *a = accp, *x = xp;
        for (int64_t j = 0; j < n; j++) {
            int64_t i = mode == SCAN_REV ? n - 1 - j : j;
            double *ai = mode == VEC ? a + 2 * i : a;
            double re = ai[0], im = ai[1], xr = x[2 * i], xi = x[2 * i + 1];
            if (op == OLY_REDUCE_SUM) {
                ai[0] = re + xr;
                ai[1] = im + xi;
            } else {
                ai[0] = re * xr - im * xi;
                ai[1] = re * xi + im * xr;
            }
            if (mode == SCAN || mode == SCAN_REV) {
                x[2 * i] = ai[0];
                x[2 * i + 1] = ai[1];
            }
        }
        break;
    }
    }
}

#define CHUNK 512

/* ---------------------------------------------------------------- SIMD runs (x86-64 AVX2)
 *
 * A contiguous run of f32 or f64 reduced into one accumulator is the common
 * case (jnp.sum(x)); with AVX2 it is done with independent vector accumulators
 * instead of one serial chain:
 * - sum: pairwise over blocks of 1024 (as NumPy), each block with 16 partial
 *   sums; f32 is widened to double first, so the f32 sum is far more accurate
 *   than NumPy's float32 pairwise sum.
 * - prod (f32, in double): 16 partial products; if the result is 0, inf or NaN
 *   the run is redone serially, so over/underflow behaves as before.
 * - max/min: 32 (f32) / 16 (f64) lanes; a run holding a NaN is redone serially
 *   (the NaN propagates exactly as in the serial loop).
 * Without AVX2 (or with OLYMPUS_NO_SIMD set) the serial loops run. */

#if OLY__CPU_X86
#define SIMD OLY__TARGET_AVX2

enum { SUM_BLOCK = 1024 };

SIMD static inline double hsum_pd(__m256d v)
{
    __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
    lo = _mm_add_pd(lo, hi);
    return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}

/* Sum of x[0..n) in double: pairwise over blocks, 16 partial sums per block. */
SIMD static double sum_f32(const float *x, int64_t n)
{
    if (n > SUM_BLOCK) {
        int64_t h = (n / 2) & ~(int64_t)15;
        return sum_f32(x, h) + sum_f32(x + h, n - h);
    }
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 u = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));
        a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    }
    double s = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; i++) s += x[i];
    return s;
}

SIMD static double sum_f64(const double *x, int64_t n)
{
    if (n > SUM_BLOCK) {
        int64_t h = (n / 2) & ~(int64_t)15;
        return sum_f64(x, h) + sum_f64(x + h, n - h);
    }
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_pd(a0, _mm256_loadu_pd(x + i));
        a1 = _mm256_add_pd(a1, _mm256_loadu_pd(x + i + 4));
        a2 = _mm256_add_pd(a2, _mm256_loadu_pd(x + i + 8));
        a3 = _mm256_add_pd(a3, _mm256_loadu_pd(x + i + 12));
    }
    double s = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; i++) s += x[i];
    return s;
}

/* Product of x[0..n) in double, 16 partial products. */
SIMD static double prod_f32(const float *x, int64_t n)
{
    __m256d one = _mm256_set1_pd(1.0), a0 = one, a1 = one, a2 = one, a3 = one;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 u = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_mul_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));
        a1 = _mm256_mul_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));
        a2 = _mm256_mul_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        a3 = _mm256_mul_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    }
    double p[4];
    _mm256_storeu_pd(p, _mm256_mul_pd(_mm256_mul_pd(a0, a1), _mm256_mul_pd(a2, a3)));
    double r = (p[0] * p[1]) * (p[2] * p[3]);
    for (; i < n; i++) r *= x[i];
    return r;
}

/* Max (is_max) or min of x[0..n) (n >= 1) into *out; false when x holds a NaN. */
SIMD static bool best_f32(const float *x, int64_t n, bool is_max, double *out)
{
    __m256 a0 = _mm256_set1_ps(x[0]), a1 = a0, a2 = a0, a3 = a0;
    __m256 nan = _mm256_setzero_ps();
    int64_t i = 0;
#define BEST_STEP(A, OFF)                                                                 \
    do {                                                                                  \
        __m256 v_ = _mm256_loadu_ps(x + i + OFF);                                         \
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v_, v_, _CMP_UNORD_Q));                     \
        A = is_max ? _mm256_max_ps(v_, A) : _mm256_min_ps(v_, A);                         \
    } while (0)
    for (; i + 32 <= n; i += 32) {
        BEST_STEP(a0, 0);
        BEST_STEP(a1, 8);
        BEST_STEP(a2, 16);
        BEST_STEP(a3, 24);
    }
#undef BEST_STEP
    if (_mm256_movemask_ps(nan)) return false;
    if (is_max) a0 = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
    else a0 = _mm256_min_ps(_mm256_min_ps(a0, a1), _mm256_min_ps(a2, a3));
    float l[8];
    _mm256_storeu_ps(l, a0);
    float b = l[0];
    for (int j = 1; j < 8; j++) b = is_max ? (l[j] > b ? l[j] : b) : (l[j] < b ? l[j] : b);
    for (; i < n; i++) {
        if (isnan(x[i])) return false;
        b = is_max ? (x[i] > b ? x[i] : b) : (x[i] < b ? x[i] : b);
    }
    *out = b;
    return true;
}

SIMD static bool best_f64(const double *x, int64_t n, bool is_max, double *out)
{
    __m256d a0 = _mm256_set1_pd(x[0]), a1 = a0, a2 = a0, a3 = a0;
    __m256d nan = _mm256_setzero_pd();
    int64_t i = 0;
#define BEST_STEP(A, OFF)                                                                 \
    do {                                                                                  \
        __m256d v_ = _mm256_loadu_pd(x + i + OFF);                                        \
        nan = _mm256_or_pd(nan, _mm256_cmp_pd(v_, v_, _CMP_UNORD_Q));                     \
        A = is_max ? _mm256_max_pd(v_, A) : _mm256_min_pd(v_, A);                         \
    } while (0)
    for (; i + 16 <= n; i += 16) {
        BEST_STEP(a0, 0);
        BEST_STEP(a1, 4);
        BEST_STEP(a2, 8);
        BEST_STEP(a3, 12);
    }
#undef BEST_STEP
    if (_mm256_movemask_pd(nan)) return false;
    if (is_max) a0 = _mm256_max_pd(_mm256_max_pd(a0, a1), _mm256_max_pd(a2, a3));
    else a0 = _mm256_min_pd(_mm256_min_pd(a0, a1), _mm256_min_pd(a2, a3));
    double l[4];
    _mm256_storeu_pd(l, a0);
    double b = l[0];
    for (int j = 1; j < 4; j++) b = is_max ? (l[j] > b ? l[j] : b) : (l[j] < b ? l[j] : b);
    for (; i < n; i++) {
        if (isnan(x[i])) return false;
        b = is_max ? (x[i] > b ? x[i] : b) : (x[i] < b ? x[i] : b);
    }
    *out = b;
    return true;
}

/* Reduces the contiguous run x[0..n) of dtype t (n >= 1) into the double
 * accumulator *acc with op; false when the serial loop must do it. */
static bool simd_run(oly_reduce_op op, oly_dtype t, const void *x, int64_t n, double *acc)
{
    if ((t != OLY_FLOAT32 && t != OLY_FLOAT64) || !oly__cpu_simd_ok()) return false;
    bool f32 = t == OLY_FLOAT32;
    double v;
    switch (op) {
    case OLY_REDUCE_SUM:
        *acc += f32 ? sum_f32(x, n) : sum_f64(x, n);
        return true;
    case OLY_REDUCE_PROD:
        if (!f32) return false;
        v = prod_f32(x, n);
        if (v == 0 || !isfinite(v)) return false;
        *acc *= v;
        return true;
    case OLY_REDUCE_MAX:
    case OLY_REDUCE_MIN:
        if (!(f32 ? best_f32(x, n, op == OLY_REDUCE_MAX, &v)
                  : best_f64(x, n, op == OLY_REDUCE_MAX, &v)))
            return false;
        if (op == OLY_REDUCE_MAX ? (v > *acc || isnan(v)) : (v < *acc || isnan(v))) *acc = v;
        return true;
    default:
        return false;
    }
}
#else
static bool simd_run(oly_reduce_op op, oly_dtype t, const void *x, int64_t n, double *acc)
{
    return false;
}
#endif

/* ---------------------------------------------------------------- rows into a vector
 *
 * Reducing a leading (or any non-last) axis of f32/f64 adds whole rows into
 * the vector of accumulators: acc[j] = acc[j] op x[r][j] for each row r in
 * order. The loop takes four rows a pass with each accumulator held in a
 * register between them, so it streams the rows once and touches the
 * accumulators a quarter as often; each column still combines its rows one at
 * a time, in row order, so the result is the serial loop's, bit for bit (f32
 * accumulates in double: more accurate than NumPy, which adds the rows in
 * float32). The same C loop is compiled for each CPU level (gcc vectorises it:
 * 8 or 16 columns a step) and the kernel runs the one for oly__cpu_level().
 * Max/min keep the serial rule (a NaN wins, the first NaN stays). */

#define E_SUM(a, v) ((a) + (v))
#define E_PROD(a, v) ((a) * (v))
#define E_MAX(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))
#define E_MIN(a, v) (((v) < (a) || (v) != (v)) ? (v) : (a))

/* fname: acc[0..n) op= rows x[r * rs + 0..n) for r in [0, nr). */
#define ROWS_LOOP(ATTR, fname, T, E)                                                      \
    ATTR static void fname(const T *restrict x, int64_t rs, int64_t nr, double *restrict acc, \
                           int64_t n)                                                     \
    {                                                                                     \
        int64_t r = 0;                                                                    \
        for (; r + 4 <= nr; r += 4) {                                                     \
            const T *restrict x0 = x + r * rs, *restrict x1 = x0 + rs;                    \
            const T *restrict x2 = x1 + rs, *restrict x3 = x2 + rs;                       \
            for (int64_t j = 0; j < n; j++) {                                             \
                double a = acc[j];                                                        \
                a = E(a, (double)x0[j]);                                                  \
                a = E(a, (double)x1[j]);                                                  \
                a = E(a, (double)x2[j]);                                                  \
                a = E(a, (double)x3[j]);                                                  \
                acc[j] = a;                                                               \
            }                                                                             \
        }                                                                                 \
        for (; r < nr; r++) {                                                             \
            const T *restrict x0 = x + r * rs;                                            \
            for (int64_t j = 0; j < n; j++) acc[j] = E(acc[j], (double)x0[j]);            \
        }                                                                                 \
    }
/* f32 max/min need no double: fname keeps the accumulators as float (exact:
 * they only ever hold input values) for blocks of RB columns, so a vector
 * holds 16 lanes instead of 8. */
enum { RB = 1024 };
#define ROWS_LOOP_F32(ATTR, fname, E)                                                     \
    ATTR static void fname(const float *restrict x, int64_t rs, int64_t nr,               \
                           double *restrict acc, int64_t n)                               \
    {                                                                                     \
        float b[RB];                                                                      \
        for (int64_t j0 = 0; j0 < n; j0 += RB) {                                          \
            int64_t w = n - j0 < RB ? n - j0 : RB;                                        \
            for (int64_t j = 0; j < w; j++) b[j] = (float)acc[j0 + j];                    \
            int64_t r = 0;                                                                \
            for (; r + 4 <= nr; r += 4) {                                                 \
                const float *restrict x0 = x + r * rs + j0, *restrict x1 = x0 + rs;       \
                const float *restrict x2 = x1 + rs, *restrict x3 = x2 + rs;               \
                for (int64_t j = 0; j < w; j++) {                                         \
                    float a = b[j];                                                       \
                    a = E(a, x0[j]);                                                      \
                    a = E(a, x1[j]);                                                      \
                    a = E(a, x2[j]);                                                      \
                    a = E(a, x3[j]);                                                      \
                    b[j] = a;                                                             \
                }                                                                         \
            }                                                                             \
            for (; r < nr; r++) {                                                         \
                const float *restrict x0 = x + r * rs + j0;                               \
                for (int64_t j = 0; j < w; j++) b[j] = E(b[j], x0[j]);                    \
            }                                                                             \
            for (int64_t j = 0; j < w; j++) acc[j0 + j] = b[j];                           \
        }                                                                                 \
    }
typedef void rows_fn(const void *x, int64_t rs, int64_t nr, double *acc, int64_t n);

/* gcc -O2 vectorises only loops without a scalar epilogue; let the cost model
 * pay for one here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#if OLY__CPU_X86
#define ROWS_LEVELS(name, T, E) ROWS_LEVELS_(ROWS_LOOP, name, T, E)
#define ROWS_LEVELS_(LOOP, name, ...)                                                     \
    LOOP(, name##_p, __VA_ARGS__)                                                         \
    LOOP(OLY__TARGET_AVX2, name##_a2, __VA_ARGS__)                                        \
    LOOP(OLY__TARGET_AVX512, name##_a5, __VA_ARGS__)
#define ROWS_ENTRY(name)                                                                  \
    {(rows_fn *)name##_p, (rows_fn *)name##_a2, (rows_fn *)name##_a5}
#else
#define ROWS_LEVELS(name, T, E) ROWS_LOOP(, name##_p, T, E)
#define ROWS_LEVELS_(LOOP, name, ...) LOOP(, name##_p, __VA_ARGS__)
#define ROWS_ENTRY(name) {(rows_fn *)name##_p, (rows_fn *)name##_p, (rows_fn *)name##_p}
#endif
ROWS_LEVELS(rows_sum_f32, float, E_SUM)
ROWS_LEVELS(rows_prod_f32, float, E_PROD)
ROWS_LEVELS_(ROWS_LOOP_F32, rows_max_f32, E_MAX)
ROWS_LEVELS_(ROWS_LOOP_F32, rows_min_f32, E_MIN)
ROWS_LEVELS(rows_sum_f64, double, E_SUM)
ROWS_LEVELS(rows_prod_f64, double, E_PROD)
ROWS_LEVELS(rows_max_f64, double, E_MAX)
ROWS_LEVELS(rows_min_f64, double, E_MIN)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* [f64?][op][level] */
static rows_fn *const rows_fns[2][4][OLY_CPU_LEVEL_COUNT] = {
    {ROWS_ENTRY(rows_sum_f32), ROWS_ENTRY(rows_prod_f32), ROWS_ENTRY(rows_max_f32),
     ROWS_ENTRY(rows_min_f32)},
    {ROWS_ENTRY(rows_sum_f64), ROWS_ENTRY(rows_prod_f64), ROWS_ENTRY(rows_max_f64),
     ROWS_ENTRY(rows_min_f64)},
};

/* The rows loop for op on dtype t at this CPU level, or NULL (the generic
 * loop then runs). */
static rows_fn *rows_loop(oly_reduce_op op, oly_dtype t)
{
    if (t != OLY_FLOAT32 && t != OLY_FLOAT64) return NULL;
    int k = op == OLY_REDUCE_SUM ? 0 : op == OLY_REDUCE_PROD ? 1 : op == OLY_REDUCE_MAX ? 2
          : op == OLY_REDUCE_MIN ? 3 : -1;
    return k < 0 ? NULL : rows_fns[t == OLY_FLOAT64][k][oly__cpu_level()];
}

/* ---------------------------------------------------------------- kernels */

/* Whether candidate x beats the current best b (first occurrence wins; NaN is
 * both the max and the min, and the first NaN wins). */
#define BEATS_F(x, b, is_max) \
    (!isnan(b) && (isnan(x) || ((is_max) ? (x) > (b) : (x) < (b))))
#define BEATS(x, b, is_max) ((is_max) ? (x) > (b) : (x) < (b))


/* A reduction of the leading dims of an f32/f64 array into its trailing ones
 * (x.sum(0) of a matrix: rows into a vector) split by columns: share ith of
 * nth reduces its own range of columns over every row. Each column's value
 * is the serial loop's (its rows in order), wherever the share boundaries
 * fall. False when x is not of that shape (the one-thread path runs). */
static bool rows_split(const oly_kernel_ctx *ctx, oly_reduce_op op, oly_status *st)
{
    const oly_params_reduce *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    rows_fn *rows = rows_loop(op, x->dtype);
    if (!rows || p->axes.n < 1) return false;
    int64_t nr = 1, nc = 1;
    for (int d = 0; d < x->rank; d++) {
        bool red = false;
        for (int i = 0; i < p->axes.n; i++)
            red |= (p->axes.v[i] < 0 ? p->axes.v[i] + x->rank : p->axes.v[i]) == d;
        if (red != (d < p->axes.n)) return false; /* reduced dims must lead */
        if (red) nr *= x->dims[d];
        else nc *= x->dims[d];
    }
    if (nr == 0 || nc < 64) return false;
    /* whole 16-column blocks per share (the vector loops' width) */
    int64_t blocks = (nc + 15) / 16;
    int64_t lo = blocks * ctx->ith / ctx->nth * 16, hi = blocks * (ctx->ith + 1) / ctx->nth * 16;
    if (hi > nc) hi = nc;
    *st = OLY_OK;
    if (lo >= hi) return true;
    size_t es = oly_dtype_size(x->dtype);
    bool native = acc_is_native(x->dtype);
    double *acc = native ? (double *)ctx->out[0] + lo : oly__malloc((size_t)(hi - lo) * sizeof *acc);
    if (!acc) {
        *st = oly__error(OLY_ERR_NOMEM, "%s: out of memory for %lld accumulators",
                         oly__reduce_op_names[op], (long long)(hi - lo));
        return true;
    }
    for (int64_t j = 0; j < hi - lo; j++) identity(op, x->dtype, acc + j);
    rows((const char *)ctx->in[0] + (size_t)lo * es, nc, nr, acc, hi - lo);
    if (!native) {
        store(x->dtype, acc, hi - lo, (char *)ctx->out[0] + (size_t)lo * es, (int64_t)es);
        free(acc);
    }
    return true;
}

static oly_status reduce_kernel(const oly_kernel_ctx *ctx, oly_reduce_op op)
{
    oly_status split_st;
    if (ctx->nth > 1 && oly_aval_size(&ctx->in_aval[0]) > 0 && rows_split(ctx, op, &split_st))
        return split_st;
    if (ctx->ith != 0) return OLY_OK; /* one pass over the input: one thread */
    const oly_params_reduce *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *o = &ctx->out_aval[0];
    oly_dtype t = x->dtype;
    acc_kind k = acc_of(t);
    size_t as = acc_size(k), es = oly_dtype_size(t);
    int64_t n_out = oly_aval_size(o), n_in = oly_aval_size(x);

    void *acc = acc_is_native(t) ? ctx->out[0] : oly__malloc((size_t)(n_out ? n_out : 1) * as);
    if (!acc) return oly__error(OLY_ERR_NOMEM, "%s: out of memory for %lld accumulators",
                                oly__reduce_op_names[op], (long long)n_out);
    for (int64_t i = 0; i < n_out; i++) identity(op, t, (char *)acc + (size_t)i * as);

    if (n_in > 0) {
        bool red[OLY_MAX_RANK] = {false};
        for (int i = 0; i < p->axes.n; i++)
            red[p->axes.v[i] < 0 ? p->axes.v[i] + x->rank : p->axes.v[i]] = true;
        /* groups of consecutive dims of one kind (kept/reduced); unit dims dropped */
        int g = 0;
        int64_t gd[OLY_MAX_RANK];
        bool gr[OLY_MAX_RANK];
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d] == 1) continue;
            if (g > 0 && gr[g - 1] == red[d]) {
                gd[g - 1] *= x->dims[d];
            } else {
                gd[g] = x->dims[d];
                gr[g++] = red[d];
            }
        }
        if (g == 0) {
            gd[0] = 1;
            gr[g++] = false;
        }
        int64_t sin[OLY_MAX_RANK], sout[OLY_MAX_RANK], ai = 1, ao = 1;
        for (int d = g - 1; d >= 0; d--) {
            sin[d] = ai;
            ai *= gd[d];
            sout[d] = gr[d] ? 0 : ao;
            if (!gr[d]) ao *= gd[d];
        }
        int last = g - 1;
        /* Kept innermost dims after reduced ones: whole rows into the vector
         * (rows_loop), the reduced group consumed at once. */
        rows_fn *rows = !gr[last] && last >= 1 && gr[last - 1] ? rows_loop(op, t) : NULL;
        int top = rows ? last - 2 : last - 1; /* the odometer's innermost dim */
        int64_t n_outer = 1, idx[OLY_MAX_RANK] = {0}, ioff = 0, ooff = 0;
        for (int d = 0; d <= top; d++) n_outer *= gd[d];
        double tmp[2 * CHUNK];
        const char *src = ctx->in[0];
        for (int64_t it = 0; it < n_outer; it++) {
            bool done = gr[last] && k == ACC_F &&
                        simd_run(op, t, src + (size_t)ioff * es, gd[last], (double *)acc + ooff);
            if (rows) {
                rows(src + (size_t)ioff * es, sin[last - 1], gd[last - 1], (double *)acc + ooff,
                     gd[last]);
                done = true;
            }
            for (int64_t c = 0; !done && c < gd[last]; c += CHUNK) {
                int64_t n = gd[last] - c < CHUNK ? gd[last] - c : CHUNK;
                load(t, src + (size_t)(ioff + c) * es, (int64_t)es, n, tmp);
                if (gr[last])
                    combine(k, op, RED, (char *)acc + (size_t)ooff * as, tmp, n);
                else
                    combine(k, op, VEC, (char *)acc + (size_t)(ooff + c) * as, tmp, n);
            }
            for (int d = top; d >= 0; d--) {
                ioff += sin[d];
                ooff += sout[d];
                if (++idx[d] < gd[d]) break;
                ioff -= sin[d] * gd[d];
                ooff -= sout[d] * gd[d];
                idx[d] = 0;
            }
        }
    }
    if (acc != ctx->out[0]) {
        store(t, acc, n_out, ctx->out[0], (int64_t)es);
        free(acc);
    }
    return OLY_OK;
}

/* Splits x around axis: outer x n x inner. */
static void split_axis(const oly_aval *x, int64_t axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) *inner *= x->dims[i];
    *n = x->dims[axis];
}


static void argbest(acc_kind k, bool is_max, int64_t kk, const void *xp, void *bestp,
                    int64_t *bidx, int64_t n, int vec)
{
    /* vec: x[i] competes with best[i] (index kk); else x[0..n) compete with best[0] (index kk+i) */
    for (int64_t i = 0; i < n; i++) {
        int64_t bi = vec ? i : 0;
        bool take;
        switch (k) {
        case ACC_F: {
            double x = ((const double *)xp)[i], b = ((double *)bestp)[bi];
            take = BEATS_F(x, b, is_max);
            if (take) ((double *)bestp)[bi] = x;
            break;
        }
        case ACC_I: {
            int64_t x = ((const int64_t *)xp)[i], b = ((int64_t *)bestp)[bi];
            take = BEATS(x, b, is_max);
            if (take) ((int64_t *)bestp)[bi] = x;
            break;
        }
        default: {
            uint64_t x = ((const uint64_t *)xp)[i], b = ((uint64_t *)bestp)[bi];
            take = BEATS(x, b, is_max);
            if (take) ((uint64_t *)bestp)[bi] = x;
            break;
        }
        }
        if (take) bidx[bi] = vec ? kk : kk + i;
    }
}


static void store_index(oly_dtype t, char *dst, int64_t v)
{
    if (t == OLY_INT32) {
        int32_t w = (int32_t)v;
        memcpy(dst, &w, 4);
    } else {
        memcpy(dst, &v, 8);
    }
}


static oly_status argminmax_kernel(const oly_kernel_ctx *ctx, bool is_max)
{
    const oly_params_argminmax *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    oly_dtype t = x->dtype, it = ctx->out_aval[0].dtype;
    acc_kind k = acc_of(t);
    size_t es = oly_dtype_size(t), is = oly_dtype_size(it);
    int64_t axis = p->axes.v[0] < 0 ? p->axes.v[0] + x->rank : p->axes.v[0];
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    if (outer * inner == 0 || n == 0) return OLY_OK;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = outer * ctx->ith / nth, hi = outer * (ctx->ith + 1) / nth;
    const char *src = ctx->in[0];
    char *dst = ctx->out[0];
    uint64_t best[CHUNK], tmp[CHUNK];
    int64_t bidx[CHUNK];
    for (int64_t o = lo; o < hi; o++) {
        const char *line = src + (size_t)(o * n * inner) * es;
        if (inner == 1) { /* contiguous line */
            load(t, line, (int64_t)es, 1, best);
            bidx[0] = 0;
            for (int64_t c = 1; c < n; c += CHUNK) {
                int64_t m = n - c < CHUNK ? n - c : CHUNK;
                load(t, line + (size_t)c * es, (int64_t)es, m, tmp);
                argbest(k, is_max, c, tmp, best, bidx, m, 0);
            }
            store_index(it, dst + (size_t)o * is, bidx[0]);
            continue;
        }
        for (int64_t j = 0; j < inner; j += CHUNK) { /* CHUNK lines side by side */
            int64_t w = inner - j < CHUNK ? inner - j : CHUNK;
            load(t, line + (size_t)j * es, (int64_t)es, w, best);
            for (int64_t i = 0; i < w; i++) bidx[i] = 0;
            for (int64_t kk = 1; kk < n; kk++) {
                load(t, line + (size_t)(kk * inner + j) * es, (int64_t)es, w, tmp);
                argbest(k, is_max, kk, tmp, best, bidx, w, 1);
            }
            for (int64_t i = 0; i < w; i++)
                store_index(it, dst + (size_t)(o * inner + j + i) * is, bidx[i]);
        }
    }
    return OLY_OK;
}


static oly_status cum_kernel(const oly_kernel_ctx *ctx, oly_reduce_op op)
{
    const oly_params_cumulative *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    oly_dtype t = x->dtype;
    acc_kind k = acc_of(t);
    size_t es = oly_dtype_size(t), as = acc_size(k);
    int64_t axis = p->axis < 0 ? p->axis + x->rank : p->axis;
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    if (outer * n * inner == 0) return OLY_OK;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = outer * ctx->ith / nth, hi = outer * (ctx->ith + 1) / nth;
    const char *src = ctx->in[0];
    char *dst = ctx->out[0];
    double acc[2 * CHUNK], tmp[2 * CHUNK];
    for (int64_t o = lo; o < hi; o++) {
        size_t base = (size_t)(o * n * inner) * es;
        if (inner == 1) { /* contiguous line, scanned in chunks */
            identity(op, t, acc);
            for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
                int64_t m = n - c0 < CHUNK ? n - c0 : CHUNK;
                int64_t c = p->reverse ? n - c0 - m : c0;
                load(t, src + base + (size_t)c * es, (int64_t)es, m, tmp);
                combine(k, op, p->reverse ? SCAN_REV : SCAN, acc, tmp, m);
                store(t, tmp, m, dst + base + (size_t)c * es, (int64_t)es);
            }
            continue;
        }
        for (int64_t j = 0; j < inner; j += CHUNK) {
            int64_t w = inner - j < CHUNK ? inner - j : CHUNK;
            for (int64_t i = 0; i < w; i++) identity(op, t, (char *)acc + (size_t)i * as);
            for (int64_t s = 0; s < n; s++) {
                int64_t kk = p->reverse ? n - 1 - s : s;
                size_t off = base + (size_t)(kk * inner + j) * es;
                load(t, src + off, (int64_t)es, w, tmp);
                combine(k, op, VEC, acc, tmp, w);
                store(t, acc, w, dst + off, (int64_t)es);
            }
        }
    }
    return OLY_OK;
}

static oly_status argmax_kernel(const oly_kernel_ctx *ctx) { return argminmax_kernel(ctx, true); }

static oly_status argmin_kernel(const oly_kernel_ctx *ctx) { return argminmax_kernel(ctx, false); }

#define REDUCE_KERNEL(NAME, OP)                                                           \
    static oly_status NAME##_kernel(const oly_kernel_ctx *ctx) { return reduce_kernel(ctx, OP); } \
    const oly_cpu_kernel oly__cpu_##NAME = {.fn = NAME##_kernel};
#define CUM_KERNEL(NAME, OP)                                                              \
    static oly_status NAME##_kernel(const oly_kernel_ctx *ctx) { return cum_kernel(ctx, OP); } \
    const oly_cpu_kernel oly__cpu_##NAME = {.fn = NAME##_kernel, .splits = true};

REDUCE_KERNEL(reduce_sum, OLY_REDUCE_SUM)
REDUCE_KERNEL(reduce_prod, OLY_REDUCE_PROD)
REDUCE_KERNEL(reduce_max, OLY_REDUCE_MAX)
REDUCE_KERNEL(reduce_min, OLY_REDUCE_MIN)
REDUCE_KERNEL(reduce_and, OLY_REDUCE_AND)
REDUCE_KERNEL(reduce_or, OLY_REDUCE_OR)
CUM_KERNEL(cumsum, OLY_REDUCE_SUM)
CUM_KERNEL(cumprod, OLY_REDUCE_PROD)
CUM_KERNEL(cummax, OLY_REDUCE_MAX)
CUM_KERNEL(cummin, OLY_REDUCE_MIN)
const oly_cpu_kernel oly__cpu_argmax = {.fn = argmax_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_argmin = {.fn = argmin_kernel, .splits = true};

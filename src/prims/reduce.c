/* reduce.c — reductions (reduce_sum/prod/max/min/and/or), argmax/argmin and
 * cumulative scans (cumsum/cumprod/cummax/cummin), following JAX's lax.
 *
 * Kernels load runs of elements into an accumulator type chosen by dtype kind
 * (double for every float, int64 for signed ints, uint64 for unsigned ints and
 * bool, double complex for complex), combine there, and convert back once:
 * f16/bf16/f32 sums and products accumulate in double, f64 sums in double with
 * 512-element blocks, integer arithmetic wraps (done in uint64). Max/min
 * propagate NaN. Reductions walk the input once in memory order, whatever the
 * axes, accumulating into one slot per output element; a contiguous f32/f64
 * run reduced to one value takes the AVX2 path ("SIMD runs") where it can. */
#include "internal.h"
#include "trans/trans.h"
#include "cpu/cpu.h"
#include "cpu/simd.h"

#include <math.h>

/* ---------------------------------------------------------------- messages */

static oly_status check_n_in(const oly_shape_ctx *ctx, int want)
{
    if (ctx->n_in != want)
        return oly__error(OLY_ERR_INVALID, "%s: expected %d operand%s, got %d", ctx->prim->name,
                          want, want == 1 ? "" : "s", ctx->n_in);
    return OLY_OK;
}

static oly_status norm_axis(const char *who, int64_t axis, int rank, int64_t *out)
{
    if (axis < -rank || axis >= rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: axis %lld is out of range for rank %d (expected -%d <= axis < %d)",
                          who, (long long)axis, rank, rank, rank);
    *out = axis < 0 ? axis + rank : axis;
    return OLY_OK;
}

/* Validates axes (distinct, in range; negatives allowed) and marks them. */
static oly_status mark_axes(const char *who, const oly_ints *axes, const oly_aval *x, bool *marks)
{
    if (axes->n < 0 || axes->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "%s: axes must have 0..%d entries, got %d", who,
                          OLY_MAX_RANK, axes->n);
    for (int i = 0; i < OLY_MAX_RANK; i++) marks[i] = false;
    for (int i = 0; i < axes->n; i++) {
        int64_t a;
        if (axes->v[i] < -x->rank || axes->v[i] >= x->rank)
            return oly__error(OLY_ERR_INVALID, "%s: axes %s out of range for operand %s", who,
                              oly__show_ints(axes).s, oly__show_aval(x).s);
        a = axes->v[i] < 0 ? axes->v[i] + x->rank : axes->v[i];
        if (marks[a])
            return oly__error(OLY_ERR_INVALID, "%s: axes %s are not unique", who,
                              oly__show_ints(axes).s);
        marks[a] = true;
    }
    return OLY_OK;
}

static void drop_axes(const oly_aval *x, const bool *marks, oly_dtype t, bool weak, oly_aval *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->weak = weak;
    for (int i = 0; i < x->rank; i++)
        if (!marks[i]) out->dims[out->rank++] = x->dims[i];
}

/* ---------------------------------------------------------------- accumulators */

typedef enum acc_kind { ACC_F, ACC_I, ACC_U, ACC_C } acc_kind; /* double int64 uint64 double[2] */
typedef enum rop { R_SUM, R_PROD, R_MAX, R_MIN, R_AND, R_OR } rop;

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
static void identity(rop op, oly_dtype t, void *dst)
{
    acc_kind k = acc_of(t);
    int bits = (int)oly_dtype_size(t) * 8;
    switch (k) {
    case ACC_F: {
        double v = op == R_SUM ? 0.0 : op == R_PROD ? 1.0 : op == R_MAX ? -INFINITY : INFINITY;
        memcpy(dst, &v, 8);
        break;
    }
    case ACC_C: {
        double v[2] = {op == R_PROD ? 1.0 : 0.0, 0.0};
        memcpy(dst, v, 16);
        break;
    }
    case ACC_I: {
        int64_t hi = bits == 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
        int64_t v = op == R_SUM || op == R_OR ? 0 : op == R_PROD ? 1 : op == R_AND ? -1
                  : op == R_MAX ? -hi - 1 : hi;
        memcpy(dst, &v, 8);
        break;
    }
    case ACC_U: {
        uint64_t hi = t == OLY_BOOL ? 1 : bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        uint64_t v = op == R_SUM || op == R_OR || op == R_MAX ? 0 : op == R_PROD ? 1
                   : op == R_AND ? UINT64_MAX : hi;
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

static void combine(acc_kind k, rop op, int mode, void *accp, void *xp, int64_t n)
{
    switch (k) {
    case ACC_F:
        if (op == R_SUM && mode == RED) { /* block sum, then one add */
            const double *x = xp;
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += x[i];
            *(double *)accp += s;
            return;
        }
        switch (op) {
        case R_SUM: COMBINE(double, a + x); break;
        case R_PROD: COMBINE(double, a * x); break;
        case R_MAX: COMBINE(double, (x > a || isnan(x)) ? x : a); break;
        case R_MIN: COMBINE(double, (x < a || isnan(x)) ? x : a); break;
        default: break;
        }
        break;
    case ACC_I:
        switch (op) {
        case R_SUM: COMBINE(int64_t, (int64_t)((uint64_t)a + (uint64_t)x)); break;
        case R_PROD: COMBINE(int64_t, (int64_t)((uint64_t)a * (uint64_t)x)); break;
        case R_MAX: COMBINE(int64_t, x > a ? x : a); break;
        case R_MIN: COMBINE(int64_t, x < a ? x : a); break;
        case R_AND: COMBINE(int64_t, a & x); break;
        case R_OR: COMBINE(int64_t, a | x); break;
        }
        break;
    case ACC_U:
        switch (op) {
        case R_SUM: COMBINE(uint64_t, a + x); break;
        case R_PROD: COMBINE(uint64_t, a * x); break;
        case R_MAX: COMBINE(uint64_t, x > a ? x : a); break;
        case R_MIN: COMBINE(uint64_t, x < a ? x : a); break;
        case R_AND: COMBINE(uint64_t, a & x); break;
        case R_OR: COMBINE(uint64_t, a | x); break;
        }
        break;
    case ACC_C: {
        double *a = accp, *x = xp;
        for (int64_t j = 0; j < n; j++) {
            int64_t i = mode == SCAN_REV ? n - 1 - j : j;
            double *ai = mode == VEC ? a + 2 * i : a;
            double re = ai[0], im = ai[1], xr = x[2 * i], xi = x[2 * i + 1];
            if (op == R_SUM) {
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SIMD __attribute__((target("avx2,fma")))

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
static bool simd_run(rop op, oly_dtype t, const void *x, int64_t n, double *acc)
{
    if ((t != OLY_FLOAT32 && t != OLY_FLOAT64) || !oly__cpu_simd_ok()) return false;
    bool f32 = t == OLY_FLOAT32;
    double v;
    switch (op) {
    case R_SUM:
        *acc += f32 ? sum_f32(x, n) : sum_f64(x, n);
        return true;
    case R_PROD:
        if (!f32) return false;
        v = prod_f32(x, n);
        if (v == 0 || !isfinite(v)) return false;
        *acc *= v;
        return true;
    case R_MAX:
    case R_MIN:
        if (!(f32 ? best_f32(x, n, op == R_MAX, &v) : best_f64(x, n, op == R_MAX, &v)))
            return false;
        if (op == R_MAX ? (v > *acc || isnan(v)) : (v < *acc || isnan(v))) *acc = v;
        return true;
    default:
        return false;
    }
}
#else
static bool simd_run(rop op, oly_dtype t, const void *x, int64_t n, double *acc)
{
    return false;
}
#endif

/* ---------------------------------------------------------------- reductions */

static const char *const op_names[] = {"reduce_sum", "reduce_prod", "reduce_max",
                                       "reduce_min", "reduce_and",  "reduce_or"};

static oly_status reduce_dtype_ok(rop op, const oly_aval *x)
{
    oly_dtype t = x->dtype;
    bool ok;
    const char *want;
    switch (op) {
    case R_SUM:
    case R_PROD:
        ok = oly_dtype_is_int(t) || oly_dtype_is_inexact(t);
        want = "a numeric dtype (not bool)";
        break;
    case R_MAX:
    case R_MIN:
        ok = !oly_dtype_is_complex(t);
        want = "a bool, integer or float dtype";
        break;
    default:
        ok = oly_dtype_is_bool(t) || oly_dtype_is_int(t);
        want = "a bool or integer dtype";
        break;
    }
    if (!ok || (unsigned)t >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have %s, got %s", op_names[op], want,
                          oly__show_aval(x).s);
    return OLY_OK;
}

static oly_status reduce_shape(const oly_shape_ctx *ctx, oly_aval *out, rop op)
{
    const oly_params_reduce *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(reduce_dtype_ok(op, x));
    bool marks[OLY_MAX_RANK];
    OLY_TRY(mark_axes(op_names[op], &p->axes, x, marks));
    drop_axes(x, marks, x->dtype, x->weak, out);
    return OLY_OK;
}

static oly_status reduce_kernel(const oly_kernel_ctx *ctx, rop op)
{
    if (ctx->ith != 0) return OLY_OK; /* one pass over the input: one thread */
    const oly_params_reduce *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *o = &ctx->out_aval[0];
    oly_dtype t = x->dtype;
    acc_kind k = acc_of(t);
    size_t as = acc_size(k), es = oly_dtype_size(t);
    int64_t n_out = oly_aval_size(o), n_in = oly_aval_size(x);

    void *acc = acc_is_native(t) ? ctx->out[0] : malloc((size_t)(n_out ? n_out : 1) * as);
    if (!acc) return oly__error(OLY_ERR_NOMEM, "%s: out of memory for %lld accumulators",
                                op_names[op], (long long)n_out);
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
        int64_t n_outer = 1, idx[OLY_MAX_RANK] = {0}, ioff = 0, ooff = 0;
        for (int d = 0; d < last; d++) n_outer *= gd[d];
        double tmp[2 * CHUNK];
        const char *src = ctx->in[0];
        for (int64_t it = 0; it < n_outer; it++) {
            bool done = gr[last] && k == ACC_F &&
                        simd_run(op, t, src + (size_t)ioff * es, gd[last], (double *)acc + ooff);
            for (int64_t c = 0; !done && c < gd[last]; c += CHUNK) {
                int64_t n = gd[last] - c < CHUNK ? gd[last] - c : CHUNK;
                load(t, src + (size_t)(ioff + c) * es, (int64_t)es, n, tmp);
                if (gr[last])
                    combine(k, op, RED, (char *)acc + (size_t)ooff * as, tmp, n);
                else
                    combine(k, op, VEC, (char *)acc + (size_t)(ooff + c) * as, tmp, n);
            }
            for (int d = last - 1; d >= 0; d--) {
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

#define REDUCE_ROW(NAME, OP)                                                              \
    static oly_status NAME##_shape(const oly_shape_ctx *ctx, oly_aval *out)               \
    {                                                                                     \
        return reduce_shape(ctx, out, OP);                                                \
    }                                                                                     \
    static oly_status NAME##_kernel(const oly_kernel_ctx *ctx) { return reduce_kernel(ctx, OP); }

REDUCE_ROW(reduce_sum, R_SUM)
REDUCE_ROW(reduce_prod, R_PROD)
REDUCE_ROW(reduce_max, R_MAX)
REDUCE_ROW(reduce_min, R_MIN)
REDUCE_ROW(reduce_and, R_AND)
REDUCE_ROW(reduce_or, R_OR)

/* ---------------------------------------------------------------- argmax, argmin */

/* Splits x around axis: outer x n x inner. */
static void split_axis(const oly_aval *x, int64_t axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++) *inner *= x->dims[i];
    *n = x->dims[axis];
}

static oly_status argminmax_shape(const oly_shape_ctx *ctx, oly_aval *out, bool is_max)
{
    const oly_params_argminmax *p = ctx->params;
    const char *who = is_max ? "argmax" : "argmin";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    if (oly_dtype_is_complex(x->dtype) || (unsigned)x->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have a bool, integer or float dtype, got %s",
                          who, oly__show_aval(x).s);
    if (p->index_dtype != OLY_INT32 && p->index_dtype != OLY_INT64)
        return oly__error(OLY_ERR_TYPE, "%s: index_dtype must be int32 or int64, got %s", who,
                          (unsigned)p->index_dtype < OLY_DTYPE_COUNT
                              ? oly_dtype_name(p->index_dtype) : "an invalid dtype");
    if (p->axes.n != 1)
        return oly__error(OLY_ERR_INVALID, "%s: axes must hold exactly one axis, got %s", who,
                          oly__show_ints(&p->axes).s);
    bool marks[OLY_MAX_RANK];
    OLY_TRY(mark_axes(who, &p->axes, x, marks));
    int64_t axis = p->axes.v[0] < 0 ? p->axes.v[0] + x->rank : p->axes.v[0];
    if (x->dims[axis] == 0)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: the reduced axis %lld of operand %s is empty; it needs at least "
                          "one element",
                          who, (long long)axis, oly__show_aval(x).s);
    drop_axes(x, marks, p->index_dtype, false, out);
    return OLY_OK;
}

/* Whether candidate x beats the current best b (first occurrence wins; NaN is
 * both the max and the min, and the first NaN wins). */
#define BEATS_F(x, b, is_max) \
    (!isnan(b) && (isnan(x) || ((is_max) ? (x) > (b) : (x) < (b))))
#define BEATS(x, b, is_max) ((is_max) ? (x) > (b) : (x) < (b))

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

static oly_status argmax_shape(const oly_shape_ctx *ctx, oly_aval *out) { return argminmax_shape(ctx, out, true); }
static oly_status argmin_shape(const oly_shape_ctx *ctx, oly_aval *out) { return argminmax_shape(ctx, out, false); }
static oly_status argmax_kernel(const oly_kernel_ctx *ctx) { return argminmax_kernel(ctx, true); }
static oly_status argmin_kernel(const oly_kernel_ctx *ctx) { return argminmax_kernel(ctx, false); }

/* ---------------------------------------------------------------- cumulative */

static const char *const cum_names[] = {"cumsum", "cumprod", "cummax", "cummin"};

static oly_status cum_shape(const oly_shape_ctx *ctx, oly_aval *out, rop op)
{
    const oly_params_cumulative *p = ctx->params;
    const char *who = cum_names[op];
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    oly_dtype t = x->dtype;
    bool ok = op == R_SUM || op == R_PROD ? oly_dtype_is_int(t) || oly_dtype_is_inexact(t)
                                          : oly_dtype_is_int(t) || oly_dtype_is_float(t);
    if (!ok)
        return oly__error(OLY_ERR_TYPE, "%s: operand must have %s, got %s", who,
                          op == R_SUM || op == R_PROD ? "a numeric dtype (not bool)"
                                                      : "an integer or float dtype",
                          oly__show_aval(x).s);
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "%s: operand must have rank >= 1, got %s", who,
                          oly__show_aval(x).s);
    int64_t axis = 0;
    OLY_TRY(norm_axis(who, p->axis, x->rank, &axis));
    *out = *x;
    return OLY_OK;
}

static oly_status cum_kernel(const oly_kernel_ctx *ctx, rop op)
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

#define CUM_ROW(NAME, OP)                                                                 \
    static oly_status NAME##_shape(const oly_shape_ctx *ctx, oly_aval *out)               \
    {                                                                                     \
        return cum_shape(ctx, out, OP);                                                   \
    }                                                                                     \
    static oly_status NAME##_kernel(const oly_kernel_ctx *ctx) { return cum_kernel(ctx, OP); }

CUM_ROW(cumsum, R_SUM)
CUM_ROW(cumprod, R_PROD)
CUM_ROW(cummax, R_MAX)
CUM_ROW(cummin, R_MIN)

/* ---------------------------------------------------------------- transformation rules
 *
 * Batching keeps the batch axis where it is and shifts the reduced/scanned axes
 * around it. JVPs follow JAX: reduce_max/min put the tangent where the extremum
 * is, ties split evenly; reduce_prod multiplies each tangent by the product of
 * the other elements (exclusive prefix x suffix products, so zeros are fine).
 * cumprod/cummax/cummin use doubling scans along the scanned axis (log2 n
 * steps of shifted slices), exact with zeros and splitting ties evenly. */

static oly_aval in_aval_of(const oly_eqn *e, int i) { return oly__atom_aval(&e->in[i]); }

static int64_t norm_ax(int64_t a, int rank) { return a < 0 ? a + rank : a; }

/* Where axis a of the unbatched value sits once a batch axis is at b. */
static int64_t shift_ax(int64_t a, int b) { return a >= b ? a + 1 : a; }

static oly_status emit1(oly_builder *b, const oly_prim *p, oly_atom x, const void *params,
                        oly_atom *out)
{
    return oly__emit(b, p, &x, 1, params, NULL, 0, out);
}

/* axes (unbatched, any sign) shifted around a batch axis at b; *out_b is where
 * the batch axis lands once they are reduced away. */
static void shift_axes(const oly_ints *axes, int rank, int b, oly_ints *out, int *out_b)
{
    *out = (oly_ints){.n = axes->n};
    *out_b = b;
    for (int i = 0; i < axes->n; i++) {
        int64_t a = norm_ax(axes->v[i], rank);
        out->v[i] = shift_ax(a, b);
        if (a < b) --*out_b;
    }
}

static oly_status reduce_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_reduce *p = eqn->params;
    oly_params_reduce q;
    shift_axes(&p->axes, in_aval_of(eqn, 0).rank, in_bdim[0], &q.axes, &out_bdim[0]);
    return emit1(ctx->b, eqn->prim, in[0], &q, out);
}

static oly_status argminmax_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_argminmax *p = eqn->params;
    oly_params_argminmax q = *p;
    shift_axes(&p->axes, in_aval_of(eqn, 0).rank, in_bdim[0], &q.axes, &out_bdim[0]);
    return emit1(ctx->b, eqn->prim, in[0], &q, out);
}

static oly_status cumulative_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_cumulative *p = eqn->params;
    oly_params_cumulative q = *p;
    q.axis = shift_ax(norm_ax(p->axis, in_aval_of(eqn, 0).rank), in_bdim[0]);
    OLY_TRY(emit1(ctx->b, eqn->prim, in[0], &q, out));
    out_bdim[0] = in_bdim[0];
    return OLY_OK;
}

/* --- JVPs */

/* reduce_sum, cumsum: linear. */
static oly_status linear_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                             const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                             oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0];
    if (!tan_nz[0]) return OLY_OK;
    return oly__emit_eqn(ctx->b, eqn, tangent, tangent_out);
}

/* argmax/argmin, reduce_and/or: integer or bool results have zero tangents. */
static oly_status zero_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = false;
    return OLY_OK;
}

static oly_status emit_perm(oly_builder *b, oly_atom x, const oly_ints *perm, oly_atom *out)
{
    bool ident = true;
    for (int i = 0; i < perm->n; i++) ident = ident && perm->v[i] == i;
    if (ident) {
        *out = x;
        return OLY_OK;
    }
    oly_params_transpose q = {.permutation = *perm};
    return emit1(b, &oly__prim_transpose, x, &q, out);
}

/* The kept (unreduced) axes of x in order, then the reduced ones. */
static int split_axes(const oly_ints *axes, int rank, oly_ints *perm, bool *marks)
{
    for (int d = 0; d < rank; d++) marks[d] = false;
    for (int i = 0; i < axes->n; i++) marks[norm_ax(axes->v[i], rank)] = true;
    *perm = (oly_ints){.n = 0};
    for (int d = 0; d < rank; d++)
        if (!marks[d]) perm->v[perm->n++] = d;
    int kept = perm->n;
    for (int d = 0; d < rank; d++)
        if (marks[d]) perm->v[perm->n++] = d;
    return kept;
}

static oly_status scalar_full(oly_builder *b, oly_dtype t, double v, oly_atom *out)
{
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    return oly__emit_full(b, &a, v, out);
}

/* d prod(x) = sum_i t_i * prod_{j != i} x_j, with the products of the others as
 * exclusive prefix times exclusive suffix products over the flattened reduced
 * axes (moved last). */
static oly_status reduce_prod_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_reduce *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    oly_ints perm;
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    int64_t n = 1;
    for (int d = 0; d < x.rank; d++)
        if (marks[d]) n *= x.dims[d];
    if (n == 0) return OLY_OK; /* an empty product is the constant 1 */
    oly_ints flat = {.n = kept + 1};
    for (int i = 0; i < kept; i++) flat.v[i] = x.dims[perm.v[i]];
    flat.v[kept] = n;
    oly_atom xr, tr, fwd, bwd, lefts, rights, one, others, prod;
    OLY_TRY(emit_perm(b, primal[0], &perm, &xr));
    OLY_TRY(oly__emit_reshape(b, xr, &flat, &xr));
    OLY_TRY(emit_perm(b, tangent[0], &perm, &tr));
    OLY_TRY(oly__emit_reshape(b, tr, &flat, &tr));
    oly_params_cumulative cf = {.axis = kept, .reverse = false}, cr = {.axis = kept, .reverse = true};
    OLY_TRY(emit1(b, &oly__prim_cumprod, xr, &cf, &fwd));
    OLY_TRY(emit1(b, &oly__prim_cumprod, xr, &cr, &bwd));
    OLY_TRY(scalar_full(b, x.dtype, 1.0, &one));
    /* lefts[k] = prod_{j<k}: fwd[..., :n-1] shifted right by one, 1 first */
    oly_params_slice sl;
    oly_params_pad pd;
    memset(&sl, 0, sizeof sl);
    memset(&pd, 0, sizeof pd);
    sl.start_indices.n = sl.limit_indices.n = flat.n;
    pd.lo.n = pd.hi.n = pd.interior.n = flat.n;
    for (int d = 0; d < flat.n; d++) sl.limit_indices.v[d] = flat.v[d];
    sl.limit_indices.v[kept] = n - 1;
    pd.lo.v[kept] = 1;
    oly_atom args[2] = {fwd, one};
    OLY_TRY(emit1(b, &oly__prim_slice, fwd, &sl, &args[0]));
    OLY_TRY(oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, &lefts));
    /* rights[k] = prod_{j>k}: bwd[..., 1:] then 1 last */
    sl.start_indices.v[kept] = 1;
    sl.limit_indices.v[kept] = n;
    pd.lo.v[kept] = 0;
    pd.hi.v[kept] = 1;
    OLY_TRY(emit1(b, &oly__prim_slice, bwd, &sl, &args[0]));
    OLY_TRY(oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, &rights));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, lefts, rights, &others));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, others, tr, &prod));
    oly_ints last = {.n = 1, .v = {kept}};
    OLY_TRY(oly__emit_reduce_sum(b, prod, &last, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* Tangent at the extremum's location; ties share it evenly (JAX's chooser rule). */
static oly_status reduce_chooser_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                     const oly_atom *tangent, const bool *tan_nz,
                                     oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_reduce *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    oly_ints perm, shape = oly__ints(x.rank, x.dims);
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    oly_ints kdims = oly__ints(kept, perm.v), axes = {.n = 0};
    for (int i = kept; i < perm.n; i++) axes.v[axes.n++] = perm.v[i];
    oly_atom yb, mask, maskf, cnt, tm, num;
    OLY_TRY(oly__emit_broadcast_in_dim(b, *primal_out, &shape, &kdims, &yb));
    OLY_TRY(oly__emit_bin(b, &oly__prim_eq, primal[0], yb, &mask));
    OLY_TRY(oly__emit_convert(b, mask, x.dtype, &maskf));
    OLY_TRY(oly__emit_reduce_sum(b, maskf, &axes, &cnt));
    OLY_TRY(oly__emit_bin(b, &oly__prim_mul, tangent[0], maskf, &tm));
    OLY_TRY(oly__emit_reduce_sum(b, tm, &axes, &num));
    OLY_TRY(oly__emit_bin(b, &oly__prim_div, num, cnt, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* v shifted by s along axis, filled with fill: element k gets v[k - s] (v[k + s]
 * when reverse). Needs 0 < s < the axis' length. */
static oly_status shift_along(oly_builder *b, oly_atom v, const oly_aval *a, int axis, int64_t s,
                              bool reverse, oly_atom fill, oly_atom *out)
{
    int64_t n = a->dims[axis];
    oly_params_slice sl;
    oly_params_pad pd;
    memset(&sl, 0, sizeof sl);
    memset(&pd, 0, sizeof pd);
    sl.start_indices.n = sl.limit_indices.n = a->rank;
    pd.lo.n = pd.hi.n = pd.interior.n = a->rank;
    for (int d = 0; d < a->rank; d++) sl.limit_indices.v[d] = a->dims[d];
    sl.start_indices.v[axis] = reverse ? s : 0;
    sl.limit_indices.v[axis] = reverse ? n : n - s;
    if (reverse)
        pd.hi.v[axis] = s;
    else
        pd.lo.v[axis] = s;
    oly_atom args[2] = {v, fill};
    OLY_TRY(emit1(b, &oly__prim_slice, v, &sl, &args[0]));
    return oly__emit(b, &oly__prim_pad, args, 2, &pd, NULL, 0, out);
}

/* cumprod: the tangent obeys dy_k = x_k dy_{k-1} + y_{k-1} t_k, a linear
 * recurrence solved by a doubling scan over the maps h -> A h + B (log2 n
 * steps; no division, so zeros are fine). */
static oly_status cumprod_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                              const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                              oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_cumulative *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    int axis = (int)norm_ax(p->axis, x.rank);
    int64_t n = x.dims[axis];
    bool rev = p->reverse;
    oly_atom one, zero, a = primal[0], bb = tangent[0], t1, t2;
    OLY_TRY(scalar_full(b, x.dtype, 1.0, &one));
    OLY_TRY(scalar_full(b, x.dtype, 0.0, &zero));
    if (n > 1) { /* b_k = y_{k-1} t_k (y_{-1} = 1) */
        OLY_TRY(shift_along(b, *primal_out, &x, axis, 1, rev, one, &t1));
        OLY_TRY(oly__emit_bin(b, &oly__prim_mul, t1, tangent[0], &bb));
    }
    for (int64_t s = 1; s < n; s *= 2) {
        /* (A, B)[k] <- (A[k] A[k-s], A[k] B[k-s] + B[k]) */
        OLY_TRY(shift_along(b, bb, &x, axis, s, rev, zero, &t1));
        OLY_TRY(oly__emit_bin(b, &oly__prim_mul, a, t1, &t2));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, bb, t2, &bb));
        if (2 * s < n) {
            OLY_TRY(shift_along(b, a, &x, axis, s, rev, one, &t1));
            OLY_TRY(oly__emit_bin(b, &oly__prim_mul, a, t1, &a));
        }
    }
    *tangent_out = bb;
    out_nz[0] = true;
    return OLY_OK;
}

/* cummax/cummin: the mean tangent of the prefix elements equal to the running
 * extremum (reduce_max's rule on every prefix), by a doubling scan over
 * (extremum, tangent sum, count): the strictly better side wins, ties add. */
static oly_status cumchooser_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                 const oly_atom *tangent, const bool *tan_nz,
                                 oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_cumulative *p = eqn->params;
    oly_builder *b = ctx->b;
    OLY_TRY(oly__emit_eqn(b, eqn, primal, primal_out));
    out_nz[0] = false;
    if (!tan_nz[0]) return OLY_OK;
    oly_aval x = oly__atom_aval(&primal[0]);
    int axis = (int)norm_ax(p->axis, x.rank);
    int64_t n = x.dims[axis];
    bool rev = p->reverse, is_max = eqn->prim == &oly__prim_cummax;
    oly_atom worst, zero, m = primal[0], sum = tangent[0], cnt;
    OLY_TRY(scalar_full(b, x.dtype, is_max ? -INFINITY : INFINITY, &worst));
    OLY_TRY(scalar_full(b, x.dtype, 0.0, &zero));
    OLY_TRY(oly__emit_full(b, &x, 1.0, &cnt));
    for (int64_t s = 1; s < n; s *= 2) {
        oly_atom m2, s2, c2, better, tie, ss, cc;
        OLY_TRY(shift_along(b, m, &x, axis, s, rev, worst, &m2));
        OLY_TRY(shift_along(b, sum, &x, axis, s, rev, zero, &s2));
        OLY_TRY(shift_along(b, cnt, &x, axis, s, rev, zero, &c2));
        OLY_TRY(oly__emit_bin(b, is_max ? &oly__prim_gt : &oly__prim_lt, m2, m, &better));
        OLY_TRY(oly__emit_bin(b, &oly__prim_eq, m2, m, &tie));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, sum, s2, &ss));
        OLY_TRY(oly__emit_bin(b, &oly__prim_add, cnt, c2, &cc));
        OLY_TRY(oly__emit_select(b, tie, sum, ss, &ss));
        OLY_TRY(oly__emit_select(b, tie, cnt, cc, &cc));
        OLY_TRY(oly__emit_select(b, better, ss, s2, &sum));
        OLY_TRY(oly__emit_select(b, better, cc, c2, &cnt));
        if (2 * s < n) OLY_TRY(oly__emit_select(b, better, m, m2, &m));
    }
    OLY_TRY(oly__emit_bin(b, &oly__prim_div, sum, cnt, tangent_out));
    out_nz[0] = true;
    return OLY_OK;
}

/* --- transposes */

static bool ct_is_zero(const bool *ct_nz, bool *ct_in_nz)
{
    if (ct_nz[0]) return false;
    ct_in_nz[0] = false;
    return true;
}

/* reduce_sum: ct broadcast back over the reduced axes. */
static oly_status reduce_sum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *in, const bool *linear,
                                       const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                       bool *ct_in_nz)
{
    if (ct_is_zero(ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_reduce *p = eqn->params;
    oly_aval x = in_aval_of(eqn, 0);
    oly_ints perm, shape = oly__ints(x.rank, x.dims);
    bool marks[OLY_MAX_RANK];
    int kept = split_axes(&p->axes, x.rank, &perm, marks);
    oly_ints kdims = oly__ints(kept, perm.v);
    OLY_TRY(oly__emit_broadcast_in_dim(ctx->b, ct[0], &shape, &kdims, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* cumsum: the cumsum of ct in the other direction. */
static oly_status cumsum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                   oly_atom *ct_in, bool *ct_in_nz)
{
    if (ct_is_zero(ct_nz, ct_in_nz)) return OLY_OK;
    const oly_params_cumulative *p = eqn->params;
    oly_params_cumulative q = {.axis = p->axis, .reverse = !p->reverse};
    OLY_TRY(emit1(ctx->b, &oly__prim_cumsum, ct[0], &q, &ct_in[0]));
    ct_in_nz[0] = true;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

#define FIELD(T, f, k) {.name = #f, .kind = (k), .offset = offsetof(T, f)}

static const oly_param_field reduce_fields[] = {
    FIELD(oly_params_reduce, axes, OLY_FIELD_INTS),
};
static const oly_param_field argminmax_fields[] = {
    FIELD(oly_params_argminmax, axes, OLY_FIELD_INTS),
    FIELD(oly_params_argminmax, index_dtype, OLY_FIELD_DTYPE),
};
static const oly_param_field cumulative_fields[] = {
    FIELD(oly_params_cumulative, axis, OLY_FIELD_INT),
    FIELD(oly_params_cumulative, reverse, OLY_FIELD_BOOL),
};

/* TRANSPOSE: LINEAR(rule) for the linear rows, NONLINEAR for the others (no
 * transpose rule, on purpose); reductions never split under partial evaluation. */
#define LINEAR(rule) .transpose = rule, .no_rule = OLY_RULE_PARTIAL_EVAL
#define NONLINEAR .no_rule = OLY_RULE_PARTIAL_EVAL | OLY_RULE_TRANSPOSE

#define ROW(NAME, T, FIELDS, BATCH, JVP, TRANSPOSE)                                       \
    const oly_prim oly__prim_##NAME = {                                                   \
        .name = #NAME, .n_in = 1, .n_out = 1, .params_size = sizeof(T),                   \
        .fields = FIELDS, .n_fields = OLY_ARRAY_LEN(FIELDS),                              \
        .shape = NAME##_shape,                                                            \
        .batch = BATCH, .jvp = JVP, TRANSPOSE,                                            \
    };                                                                                    \
    const oly_cpu_kernel oly__cpu_##NAME = {.fn = NAME##_kernel};

ROW(reduce_sum, oly_params_reduce, reduce_fields, reduce_batch, linear_jvp, LINEAR(reduce_sum_transpose))
ROW(reduce_prod, oly_params_reduce, reduce_fields, reduce_batch, reduce_prod_jvp, NONLINEAR)
ROW(reduce_max, oly_params_reduce, reduce_fields, reduce_batch, reduce_chooser_jvp, NONLINEAR)
ROW(reduce_min, oly_params_reduce, reduce_fields, reduce_batch, reduce_chooser_jvp, NONLINEAR)
ROW(reduce_and, oly_params_reduce, reduce_fields, reduce_batch, zero_jvp, NONLINEAR)
ROW(reduce_or, oly_params_reduce, reduce_fields, reduce_batch, zero_jvp, NONLINEAR)
ROW(argmax, oly_params_argminmax, argminmax_fields, argminmax_batch, zero_jvp, NONLINEAR)
ROW(argmin, oly_params_argminmax, argminmax_fields, argminmax_batch, zero_jvp, NONLINEAR)
ROW(cumsum, oly_params_cumulative, cumulative_fields, cumulative_batch, linear_jvp,
    LINEAR(cumsum_transpose))
ROW(cumprod, oly_params_cumulative, cumulative_fields, cumulative_batch, cumprod_jvp, NONLINEAR)
ROW(cummax, oly_params_cumulative, cumulative_fields, cumulative_batch, cumchooser_jvp, NONLINEAR)
ROW(cummin, oly_params_cumulative, cumulative_fields, cumulative_batch, cumchooser_jvp, NONLINEAR)

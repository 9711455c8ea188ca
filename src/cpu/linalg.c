/* linalg.c — the dot_general kernel.
 *
 * Both operands are viewed as (batch, free, contract) matrices. f32/f64/c64/c128
 * go to CBLAS (gemm, gemv when one side is a vector), using the transpose flags
 * to accept either (B,M,K)/(B,K,M) and (B,K,N)/(B,N,K) layouts without copying;
 * other layouts are permuted into a scratch buffer first. Small f32/f64
 * products (up to 96^3 multiply-adds, matrix-vector up to 512^2) run on the
 * per-level loops of "small products" instead, single-threaded and without a
 * BLAS call's fixed cost. f16/bf16 are widened
 * to f32 and use sgemm (float accumulation). Integers and bool use a blocked C
 * loop over uint64 accumulators (wrapping arithmetic; bool is or-of-ands). The
 * kernel runs on one thread (ith 0); OpenBLAS threads internally. */
#include "cpu/cpu.h"
#include "cpu/simd.h"

#include <cblas.h>
#include <limits.h>

typedef oly_dot_dims dims_info;

/* ---------------------------------------------------------------- gathering operands */

enum { AS_NATIVE, AS_F32, AS_U64 };

/* perm = first ++ second ++ third (dimension lists). */
static int make_perm(int *perm, const int64_t *a, int na, const int64_t *b, int nb,
                     const int64_t *c, int nc)
{
    int n = 0;
    for (int i = 0; i < na; i++) perm[n++] = (int)a[i];
    for (int i = 0; i < nb; i++) perm[n++] = (int)b[i];
    for (int i = 0; i < nc; i++) perm[n++] = (int)c[i];
    return n;
}

/* Whether reading x in perm order is its memory order (unit dims ignored). */
static bool in_order(const oly_aval *x, const int *perm)
{
    int prev = -1;
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[perm[i]] == 1) continue;
        if (perm[i] < prev) return false;
        prev = perm[i];
    }
    return true;
}

static void convert_run(oly_dtype t, int to, const char *src, int64_t st, int64_t n, char *dst)
{
    size_t es = oly_dtype_size(t);
    if (to == AS_NATIVE) {
        if (st == (int64_t)es) {
            memcpy(dst, src, (size_t)n * es);
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, src + i * st, es);
        }
        return;
    }
    if (to == AS_F32) {
        float *d = (float *)dst;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + i * st, 2);
            d[i] = t == OLY_FLOAT16 ? oly__half_to_float(h) : oly__bf16_to_float(h);
        }
        return;
    }
    uint64_t *d = (uint64_t *)dst;
#define GATHER_INT(CT)                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                     \
        CT v;                                                                             \
        memcpy(&v, src + i * st, sizeof v);                                               \
        d[i] = (uint64_t)(int64_t)v;                                                      \
    }                                                                                     \
    break
    switch (t) {
    case OLY_BOOL: for (int64_t i = 0; i < n; i++) d[i] = src[i * st] != 0; break;
    case OLY_INT8: GATHER_INT(int8_t);
    case OLY_INT16: GATHER_INT(int16_t);
    case OLY_INT32: GATHER_INT(int32_t);
    case OLY_INT64: GATHER_INT(int64_t);
    case OLY_UINT8: GATHER_INT(uint8_t);
    case OLY_UINT16: GATHER_INT(uint16_t);
    case OLY_UINT32: GATHER_INT(uint32_t);
    case OLY_UINT64: GATHER_INT(uint64_t);
    default: break;
    }
#undef GATHER_INT
}

static size_t target_size(oly_dtype t, int to)
{
    return to == AS_NATIVE ? oly_dtype_size(t) : to == AS_F32 ? 4 : 8;
}

/* Writes x's elements in perm order, densely, converted per `to`, into a new
 * buffer *out (caller frees). */
static oly_status gather(const oly_aval *x, const void *data, const int *perm, int to, void **out)
{
    size_t es = oly_dtype_size(x->dtype), ts = target_size(x->dtype, to);
    int64_t n = oly_aval_size(x);
    char *dst = oly__malloc((size_t)(n ? n : 1) * ts);
    if (!dst) return oly__error(OLY_ERR_NOMEM, "dot_general: out of memory for a %s operand copy",
                                oly__show_aval(x).s);
    *out = dst;
    if (n == 0) return OLY_OK;
    int64_t s[OLY_MAX_RANK], dims[OLY_MAX_RANK], st[OLY_MAX_RANK], acc = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        s[d] = acc;
        acc *= x->dims[d];
    }
    int rank = x->rank;
    for (int i = 0; i < rank; i++) {
        dims[i] = x->dims[perm[i]];
        st[i] = s[perm[i]] * (int64_t)es;
    }
    if (rank == 0) {
        convert_run(x->dtype, to, data, (int64_t)es, 1, dst);
        return OLY_OK;
    }
    int inner = rank - 1;
    int64_t idx[OLY_MAX_RANK] = {0}, off = 0, runs = n / dims[inner];
    const char *src = data;
    for (int64_t it = 0; it < runs; it++) {
        convert_run(x->dtype, to, src + off, st[inner], dims[inner], dst);
        dst += (size_t)dims[inner] * ts;
        for (int d = inner - 1; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < dims[d]) break;
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
    return OLY_OK;
}

/* One operand, seen as B matrices: `trans` says the stored matrix is the
 * transpose of the wanted one. data is either the input or `owned`. */
typedef struct operand {
    const void *data; /* borrowed: the input buffer or `owned` */
    void *owned;      /* owned (malloc'd canonical copy) or NULL */
    bool trans;
} operand;

/* Prepares an operand: natural order `want` (copy target), alternative `alt`
 * (accepted without copy, meaning transposed). to != AS_NATIVE always copies. */
static oly_status prepare(const oly_aval *x, const void *data, const int *want, const int *alt,
                          int to, operand *op)
{
    op->owned = NULL;
    op->trans = false;
    op->data = data;
    if (to == AS_NATIVE && in_order(x, want)) return OLY_OK;
    if (to == AS_NATIVE && alt && in_order(x, alt)) {
        op->trans = true;
        return OLY_OK;
    }
    OLY_TRY(gather(x, data, want, to, &op->owned));
    op->data = op->owned;
    return OLY_OK;
}

/* ---------------------------------------------------------------- BLAS path */

static oly_status blas_dot(oly_dtype t, const dims_info *di, const operand *a, const operand *b,
                           void *out)
{
    int64_t M = di->M, N = di->N, K = di->K;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "dot_general: matrix dimensions M=%lld N=%lld K=%lld exceed BLAS's "
                          "int range",
                          (long long)M, (long long)N, (long long)K);
    size_t es = t == OLY_FLOAT32 ? 4 : t == OLY_FLOAT64 ? 8 : t == OLY_COMPLEX64 ? 8 : 16;
    enum CBLAS_TRANSPOSE ta = a->trans ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = b->trans ? CblasTrans : CblasNoTrans;
    blasint m = (blasint)M, n = (blasint)N, k = (blasint)K;
    blasint lda = a->trans ? m : k, ldb = b->trans ? k : n;
    static const float one_c[2] = {1, 0}, zero_c[2] = {0, 0};
    static const double one_z[2] = {1, 0}, zero_z[2] = {0, 0};
    for (int64_t bi = 0; bi < di->B; bi++) {
        const char *A = (const char *)a->data + (size_t)(bi * M * K) * es;
        const char *Bm = (const char *)b->data + (size_t)(bi * K * N) * es;
        char *C = (char *)out + (size_t)(bi * M * N) * es;
        if (N == 1) { /* y(M) = op(A) x */
            blasint rows = a->trans ? k : m, cols = a->trans ? m : k;
            switch (t) {
            case OLY_FLOAT32:
                cblas_sgemv(CblasRowMajor, ta, rows, cols, 1.0f, (const float *)A, lda,
                            (const float *)Bm, 1, 0.0f, (float *)C, 1);
                break;
            case OLY_FLOAT64:
                cblas_dgemv(CblasRowMajor, ta, rows, cols, 1.0, (const double *)A, lda,
                            (const double *)Bm, 1, 0.0, (double *)C, 1);
                break;
            case OLY_COMPLEX64:
                cblas_cgemv(CblasRowMajor, ta, rows, cols, one_c, A, lda, Bm, 1, zero_c, C, 1);
                break;
            default:
                cblas_zgemv(CblasRowMajor, ta, rows, cols, one_z, A, lda, Bm, 1, zero_z, C, 1);
                break;
            }
        } else if (M == 1) { /* y(N) = op(B)^T a */
            blasint rows = b->trans ? n : k, cols = b->trans ? k : n;
            enum CBLAS_TRANSPOSE tv = b->trans ? CblasNoTrans : CblasTrans;
            switch (t) {
            case OLY_FLOAT32:
                cblas_sgemv(CblasRowMajor, tv, rows, cols, 1.0f, (const float *)Bm, ldb,
                            (const float *)A, 1, 0.0f, (float *)C, 1);
                break;
            case OLY_FLOAT64:
                cblas_dgemv(CblasRowMajor, tv, rows, cols, 1.0, (const double *)Bm, ldb,
                            (const double *)A, 1, 0.0, (double *)C, 1);
                break;
            case OLY_COMPLEX64:
                cblas_cgemv(CblasRowMajor, tv, rows, cols, one_c, Bm, ldb, A, 1, zero_c, C, 1);
                break;
            default:
                cblas_zgemv(CblasRowMajor, tv, rows, cols, one_z, Bm, ldb, A, 1, zero_z, C, 1);
                break;
            }
        } else {
            switch (t) {
            case OLY_FLOAT32:
                cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, (const float *)A, lda,
                            (const float *)Bm, ldb, 0.0f, (float *)C, n);
                break;
            case OLY_FLOAT64:
                cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, (const double *)A, lda,
                            (const double *)Bm, ldb, 0.0, (double *)C, n);
                break;
            case OLY_COMPLEX64:
                cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, one_c, A, lda, Bm, ldb, zero_c, C, n);
                break;
            default:
                cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, one_z, A, lda, Bm, ldb, zero_z, C, n);
                break;
            }
        }
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- small products
 *
 * Small f32/f64 products run on the loops below instead of CBLAS: a BLAS call
 * costs a few microseconds of argument checks, packing and (for gemv)
 * waking OpenBLAS's threads, more than the arithmetic of a 32x32 product.
 * (openblas_set_num_threads would be process-global, so the size decides.)
 * Two loops cover every layout:
 * - axpy: y[0..n) = sum over k of s[k] * R_k[0..n), the rows R_k in order, four
 *   at a time (each y[j] is loaded and stored once per four rows): a row of
 *   C = A B, A^T x and x^T B;
 *   (axpy2: two rows of C at once, sharing the loads of R);
 * - dots: y[i] = row_i . x with 16 (f32) / 8 (f64) running lane sums added by a
 *   fixed tree at the end, four rows a pass (independent chains sharing the
 *   loads of x): A x and B^T rows.
 * Each is compiled per CPU level (gcc vectorises the lanes; the vector levels
 * multiply-add with FMA, the portable one multiplies and adds), so a level
 * computes the same sums in the same order as any other up to FMA rounding. */

enum {
    SMALL_MNK = 96 * 96 * 96, /* multiply-adds of one product below which the loops run */
    SMALL_MV = 512 * 512,    /* the same for a matrix-vector product */
};

#define MADD_PLAIN(a, b, c) ((a) * (b) + (c))
#define MADD_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#define MADD_FMA(a, b, c) __builtin_fma(a, b, c)

#define SMALL_LOOPS(ATTR, sfx, T, L, MADD)                                                \
    ATTR static void axpy_##sfx(T *restrict y, int64_t n, const T *restrict s, int64_t ss, \
                                const T *restrict R, int64_t rs, int64_t K)               \
    {                                                                                     \
        for (int64_t j = 0; j < n; j++) y[j] = 0;                                         \
        int64_t k = 0;                                                                    \
        for (; k + 4 <= K; k += 4) {                                                      \
            const T a0 = s[k * ss], a1 = s[(k + 1) * ss], a2 = s[(k + 2) * ss];           \
            const T a3 = s[(k + 3) * ss];                                                 \
            const T *restrict r0 = R + k * rs, *restrict r1 = r0 + rs;                    \
            const T *restrict r2 = r1 + rs, *restrict r3 = r2 + rs;                       \
            for (int64_t j = 0; j < n; j++)                                               \
                y[j] = MADD(a3, r3[j], MADD(a2, r2[j], MADD(a1, r1[j], MADD(a0, r0[j], y[j])))); \
        }                                                                                 \
        for (; k < K; k++) {                                                              \
            const T a0 = s[k * ss];                                                       \
            const T *restrict r0 = R + k * rs;                                            \
            for (int64_t j = 0; j < n; j++) y[j] = MADD(a0, r0[j], y[j]);                 \
        }                                                                                 \
    }                                                                                     \
    /* two rows at once: y0 (from s0) and y1 (from s1) share the loads of R */           \
    ATTR static void axpy2_##sfx(T *restrict y0, T *restrict y1, int64_t n,                \
                                 const T *restrict s0, const T *restrict s1, int64_t ss,  \
                                 const T *restrict R, int64_t rs, int64_t K)              \
    {                                                                                     \
        for (int64_t j = 0; j < n; j++) y0[j] = y1[j] = 0;                                \
        int64_t k = 0;                                                                    \
        for (; k + 2 <= K; k += 2) {                                                      \
            const T a0 = s0[k * ss], a1 = s0[(k + 1) * ss];                               \
            const T b0 = s1[k * ss], b1 = s1[(k + 1) * ss];                               \
            const T *restrict r0 = R + k * rs, *restrict r1 = r0 + rs;                    \
            for (int64_t j = 0; j < n; j++) {                                             \
                y0[j] = MADD(a1, r1[j], MADD(a0, r0[j], y0[j]));                          \
                y1[j] = MADD(b1, r1[j], MADD(b0, r0[j], y1[j]));                          \
            }                                                                             \
        }                                                                                 \
        for (; k < K; k++) {                                                              \
            const T a0 = s0[k * ss], b0 = s1[k * ss];                                     \
            const T *restrict r0 = R + k * rs;                                            \
            for (int64_t j = 0; j < n; j++) {                                             \
                y0[j] = MADD(a0, r0[j], y0[j]);                                           \
                y1[j] = MADD(b0, r0[j], y1[j]);                                           \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    /* lanes l and l + h added, h = L/2, L/4, ..., 1: a fixed tree */                     \
    ATTR static inline T hsum_##sfx(T *restrict acc)                                      \
    {                                                                                     \
        for (int h = L / 2; h >= 1; h /= 2)                                               \
            for (int l = 0; l < h; l++) acc[l] += acc[l + h];                             \
        return acc[0];                                                                    \
    }                                                                                     \
    /* four rows a pass, each with L running lane sums, sharing the loads of x */         \
    ATTR static void dots_##sfx(T *restrict y, int64_t m, const T *restrict A, int64_t lda, \
                                const T *restrict x, int64_t K)                           \
    {                                                                                     \
        int64_t i = 0;                                                                    \
        for (; i + 4 <= m; i += 4) {                                                      \
            const T *restrict a0 = A + i * lda, *restrict a1 = a0 + lda;                  \
            const T *restrict a2 = a1 + lda, *restrict a3 = a2 + lda;                     \
            T c0[L], c1[L], c2[L], c3[L];                                                 \
            for (int l = 0; l < L; l++) c0[l] = c1[l] = c2[l] = c3[l] = 0;                \
            int64_t k = 0;                                                                \
            for (; k + L <= K; k += L)                                                    \
                for (int l = 0; l < L; l++) {                                             \
                    T xv = x[k + l];                                                      \
                    c0[l] = MADD(a0[k + l], xv, c0[l]);                                   \
                    c1[l] = MADD(a1[k + l], xv, c1[l]);                                   \
                    c2[l] = MADD(a2[k + l], xv, c2[l]);                                   \
                    c3[l] = MADD(a3[k + l], xv, c3[l]);                                   \
                }                                                                         \
            T t0 = hsum_##sfx(c0), t1 = hsum_##sfx(c1), t2 = hsum_##sfx(c2);              \
            T t3 = hsum_##sfx(c3);                                                        \
            for (; k < K; k++) {                                                          \
                t0 = MADD(a0[k], x[k], t0);                                               \
                t1 = MADD(a1[k], x[k], t1);                                               \
                t2 = MADD(a2[k], x[k], t2);                                               \
                t3 = MADD(a3[k], x[k], t3);                                               \
            }                                                                             \
            y[i] = t0;                                                                    \
            y[i + 1] = t1;                                                                \
            y[i + 2] = t2;                                                                \
            y[i + 3] = t3;                                                                \
        }                                                                                 \
        for (; i < m; i++) {                                                              \
            const T *restrict a0 = A + i * lda;                                           \
            T c0[L];                                                                      \
            for (int l = 0; l < L; l++) c0[l] = 0;                                        \
            int64_t k = 0;                                                                \
            for (; k + L <= K; k += L)                                                    \
                for (int l = 0; l < L; l++) c0[l] = MADD(a0[k + l], x[k + l], c0[l]);     \
            T t0 = hsum_##sfx(c0);                                                        \
            for (; k < K; k++) t0 = MADD(a0[k], x[k], t0);                                \
            y[i] = t0;                                                                    \
        }                                                                                 \
    }

typedef void axpy_fn(void *y, int64_t n, const void *s, int64_t ss, const void *R, int64_t rs,
                     int64_t K);
typedef void axpy2_fn(void *y0, void *y1, int64_t n, const void *s0, const void *s1, int64_t ss,
                      const void *R, int64_t rs, int64_t K);
typedef void dots_fn(void *y, int64_t m, const void *A, int64_t lda, const void *x, int64_t K);

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
SMALL_LOOPS(, f32_p, float, 16, MADD_PLAIN)
SMALL_LOOPS(, f64_p, double, 8, MADD_PLAIN)
#if OLY__CPU_X86
SMALL_LOOPS(OLY__TARGET_AVX2, f32_a2, float, 16, MADD_FMAF)
SMALL_LOOPS(OLY__TARGET_AVX2, f64_a2, double, 8, MADD_FMA)
SMALL_LOOPS(OLY__TARGET_AVX512, f32_a5, float, 16, MADD_FMAF)
SMALL_LOOPS(OLY__TARGET_AVX512, f64_a5, double, 8, MADD_FMA)
#define SMALL_ENTRY(kind, T)                                                              \
    {(kind##_fn *)kind##_##T##_p, (kind##_fn *)kind##_##T##_a2, (kind##_fn *)kind##_##T##_a5}
#else
#define SMALL_ENTRY(kind, T)                                                              \
    {(kind##_fn *)kind##_##T##_p, (kind##_fn *)kind##_##T##_p, (kind##_fn *)kind##_##T##_p}
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static axpy_fn *const axpy_fns[2][OLY_CPU_LEVEL_COUNT] = {SMALL_ENTRY(axpy, f32),
                                                          SMALL_ENTRY(axpy, f64)};
static axpy2_fn *const axpy2_fns[2][OLY_CPU_LEVEL_COUNT] = {SMALL_ENTRY(axpy2, f32),
                                                            SMALL_ENTRY(axpy2, f64)};
static dots_fn *const dots_fns[2][OLY_CPU_LEVEL_COUNT] = {SMALL_ENTRY(dots, f32),
                                                          SMALL_ENTRY(dots, f64)};

/* Whether the product di of dtype t takes the small loops. */
static bool small_ok(oly_dtype t, const dims_info *di)
{
    if (t != OLY_FLOAT32 && t != OLY_FLOAT64) return false;
    int64_t M = di->M, N = di->N, K = di->K;
    if (M == 1 || N == 1) return (double)M * N * K <= SMALL_MV;
    return (double)M * N * K <= SMALL_MNK;
}

/* C(B,M,N) = op(A) op(B) with the small loops (small_ok). */
static oly_status small_dot(oly_dtype t, const dims_info *di, const operand *a, const operand *b,
                            void *out)
{
    bool f64 = t == OLY_FLOAT64;
    size_t es = f64 ? 8 : 4;
    axpy_fn *axpy = axpy_fns[f64][oly__cpu_level()];
    axpy2_fn *axpy2 = axpy2_fns[f64][oly__cpu_level()];
    dots_fn *dots = dots_fns[f64][oly__cpu_level()];
    int64_t M = di->M, N = di->N, K = di->K;
    char *row = NULL; /* A's row i, gathered when A is stored transposed and B is too */
    if (a->trans && b->trans && N > 1 && M > 1) {
        row = oly__malloc((size_t)K * es);
        if (!row) return oly__error(OLY_ERR_NOMEM, "dot_general: out of memory for a row of %lld",
                                    (long long)K);
    }
    for (int64_t bi = 0; bi < di->B; bi++) {
        const char *A = (const char *)a->data + (size_t)(bi * M * K) * es;
        const char *Bm = (const char *)b->data + (size_t)(bi * K * N) * es;
        char *C = (char *)out + (size_t)(bi * M * N) * es;
        if (N == 1) { /* y(M) = op(A) x */
            if (a->trans) axpy(C, M, Bm, 1, A, M, K);
            else dots(C, M, A, K, Bm, K);
        } else if (M == 1) { /* y(N) = x^T op(B) */
            if (b->trans) dots(C, N, Bm, K, A, K);
            else axpy(C, N, A, 1, Bm, N, K);
        } else if (!b->trans) { /* C row i = A(i, :) B, two rows at once */
            int64_t ss = a->trans ? M : 1, si = a->trans ? 1 : K, i = 0;
            for (; i + 2 <= M; i += 2)
                axpy2(C + (size_t)(i * N) * es, C + (size_t)((i + 1) * N) * es, N,
                      A + (size_t)(i * si) * es, A + (size_t)((i + 1) * si) * es, ss, Bm, N, K);
            if (i < M) axpy(C + (size_t)(i * N) * es, N, A + (size_t)(i * si) * es, ss, Bm, N, K);
        } else { /* C row i = B^T-rows . A(i, :) */
            for (int64_t i = 0; i < M; i++) {
                const char *ai = A + (size_t)(i * K) * es;
                if (a->trans) {
                    for (int64_t k = 0; k < K; k++)
                        memcpy(row + (size_t)k * es, A + (size_t)(k * M + i) * es, es);
                    ai = row;
                }
                dots(C + (size_t)(i * N) * es, N, Bm, K, ai, K);
            }
        }
    }
    free(row);
    return OLY_OK;
}

/* ---------------------------------------------------------------- integer / bool path */

enum { JB = 256, KB = 128 };

/* C(B,M,N) = A(B,M,K) B(B,K,N) over uint64 (wrapping); bool: or of ands. */
static void int_dot(bool is_bool, const dims_info *di, const uint64_t *A, const uint64_t *Bm,
                    uint64_t *C)
{
    int64_t M = di->M, N = di->N, K = di->K;
    memset(C, 0, (size_t)(di->B * M * N) * sizeof *C);
    for (int64_t bi = 0; bi < di->B; bi++) {
        const uint64_t *a = A + bi * M * K, *b = Bm + bi * K * N;
        uint64_t *c = C + bi * M * N;
        for (int64_t j0 = 0; j0 < N; j0 += JB) {
            int64_t w = N - j0 < JB ? N - j0 : JB;
            for (int64_t k0 = 0; k0 < K; k0 += KB) {
                int64_t kn = K - k0 < KB ? K - k0 : KB;
                for (int64_t i = 0; i < M; i++) {
                    uint64_t *crow = c + i * N + j0;
                    for (int64_t kk = k0; kk < k0 + kn; kk++) {
                        uint64_t av = a[i * K + kk];
                        if (av == 0) continue;
                        const uint64_t *brow = b + kk * N + j0;
                        if (is_bool) {
                            for (int64_t j = 0; j < w; j++) crow[j] |= brow[j];
                        } else {
                            for (int64_t j = 0; j < w; j++) crow[j] += av * brow[j];
                        }
                    }
                }
            }
        }
    }
}

static void store_ints(oly_dtype t, const uint64_t *src, int64_t n, void *out)
{
#define STORE_INT(CT)                                                                     \
    for (int64_t i = 0; i < n; i++) ((CT *)out)[i] = (CT)src[i];                          \
    break
    switch (t) {
    case OLY_BOOL: for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i] = src[i] != 0; break;
    case OLY_INT8: STORE_INT(int8_t);
    case OLY_INT16: STORE_INT(int16_t);
    case OLY_INT32: STORE_INT(int32_t);
    case OLY_INT64: STORE_INT(int64_t);
    case OLY_UINT8: STORE_INT(uint8_t);
    case OLY_UINT16: STORE_INT(uint16_t);
    case OLY_UINT32: STORE_INT(uint32_t);
    case OLY_UINT64: STORE_INT(uint64_t);
    default: break;
    }
#undef STORE_INT
}

/* ---------------------------------------------------------------- kernel */

static oly_status dot_general_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_dot_general *p = ctx->params;
    const oly_aval *l = &ctx->in_aval[0], *r = &ctx->in_aval[1], *o = &ctx->out_aval[0];
    oly_dtype t = l->dtype;
    dims_info di;
    OLY_TRY(oly__dot_general_dims(p, l, r, &di));
    int64_t n_out = oly_aval_size(o);
    if (n_out == 0) return OLY_OK;
    if (di.K == 0) { /* empty sum: zeros (all-zero bytes for every dtype) */
        memset(ctx->out[0], 0, oly_aval_nbytes(o));
        return OLY_OK;
    }
    int lw[OLY_MAX_RANK], la[OLY_MAX_RANK], rw[OLY_MAX_RANK], ra[OLY_MAX_RANK];
    make_perm(lw, di.lb, di.nb, di.lfree, di.lf, di.lc, di.nc); /* (B, M, K) */
    make_perm(la, di.lb, di.nb, di.lc, di.nc, di.lfree, di.lf); /* (B, K, M) */
    make_perm(rw, di.rb, di.nb, di.rc, di.nc, di.rfree, di.rf); /* (B, K, N) */
    make_perm(ra, di.rb, di.nb, di.rfree, di.rf, di.rc, di.nc); /* (B, N, K) */

    bool blas = t == OLY_FLOAT32 || t == OLY_FLOAT64 || t == OLY_COMPLEX64 || t == OLY_COMPLEX128;
    bool half = t == OLY_FLOAT16 || t == OLY_BFLOAT16;
    int to = blas ? AS_NATIVE : half ? AS_F32 : AS_U64;
    operand a = {0}, b = {0};
    void *tmp = NULL;
    oly_status s = prepare(l, ctx->in[0], lw, la, to, &a);
    if (s == OLY_OK) s = prepare(r, ctx->in[1], rw, ra, to, &b);
    if (s != OLY_OK) goto done;
    if (blas && small_ok(t, &di)) {
        s = small_dot(t, &di, &a, &b, ctx->out[0]);
    } else if (blas) {
        s = blas_dot(t, &di, &a, &b, ctx->out[0]);
    } else if (half) {
        tmp = oly__malloc((size_t)n_out * sizeof(float));
        if (!tmp) {
            s = oly__error(OLY_ERR_NOMEM, "dot_general: out of memory for a %s result",
                           oly__show_aval(o).s);
            goto done;
        }
        s = blas_dot(OLY_FLOAT32, &di, &a, &b, tmp);
        const float *f = tmp;
        uint16_t *h = ctx->out[0];
        for (int64_t i = 0; s == OLY_OK && i < n_out; i++)
            h[i] = t == OLY_FLOAT16 ? oly__float_to_half(f[i]) : oly__float_to_bf16(f[i]);
    } else {
        tmp = oly__malloc((size_t)n_out * sizeof(uint64_t));
        if (!tmp) {
            s = oly__error(OLY_ERR_NOMEM, "dot_general: out of memory for a %s result",
                           oly__show_aval(o).s);
            goto done;
        }
        int_dot(t == OLY_BOOL, &di, a.data, b.data, tmp);
        store_ints(t, tmp, n_out, ctx->out[0]);
    }
done:
    free(a.owned);
    free(b.owned);
    free(tmp);
    return s;
}

const oly_cpu_kernel oly__cpu_dot_general = {.fn = dot_general_kernel};

/* lapack.c — CPU kernels of the matrix factorisation rows (src/prims/lapack.c)
 * on LAPACK, as OpenBLAS ships it (Fortran symbols, LP64 integers), and
 * BLAS's trsm for triangular_solve.
 *
 * Layout. olympus's buffers are row-major; LAPACK is column-major. A row-major
 * m x n buffer read column-major is the n x m transpose, and several kernels
 * use that instead of copying: cholesky factors a^T with uplo 'U' (whose
 * factor, read back row-major, is the lower l of a = l l^H); svd factors
 * a^T = U S Vt, so Vt read row-major is a's u and U read row-major is a's vh;
 * eigh diagonalises a^T = conj(a), whose eigenvectors are a's conjugated.
 * lu, qr and eig need a itself and transpose into a column-major copy (a
 * blocked transpose, O(n^2) beside the O(n^3) factorisation).
 *
 * Failures follow JAX: a matrix that is not positive definite (cholesky), an
 * iteration that does not converge or an operand with NaNs or infinities
 * (eigh, svd, eig: LAPACK would reject or loop on those) gives NaNs in that
 * matrix's outputs; a singular matrix is no failure for lu (zeros on u's
 * diagonal) and triangular_solve (infinities and NaNs from the division).
 * LAPACK rejecting an argument (info < 0) is an internal error. Each kernel
 * runs on one thread (ith 0); OpenBLAS threads inside. Workspace is queried
 * once per call and shared by the batch. */
#include "cpu/cpu.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>

/* ---------------------------------------------------------------- LAPACK prototypes
 * Fortran character arguments carry hidden lengths (size_t, at the end). */

typedef blasint lint;

#define LAPACK_POTRF(p, T) void p##potrf_(const char *, const lint *, T *, const lint *, lint *, size_t);
LAPACK_POTRF(s, float)
LAPACK_POTRF(d, double)
LAPACK_POTRF(c, void)
LAPACK_POTRF(z, void)
#define LAPACK_GETRF(p, T) void p##getrf_(const lint *, const lint *, T *, const lint *, lint *, lint *);
LAPACK_GETRF(s, float)
LAPACK_GETRF(d, double)
LAPACK_GETRF(c, void)
LAPACK_GETRF(z, void)
#define LAPACK_GEQRF(p, T)                                                                    \
    void p##geqrf_(const lint *, const lint *, T *, const lint *, T *, T *, const lint *, lint *);
LAPACK_GEQRF(s, float)
LAPACK_GEQRF(d, double)
LAPACK_GEQRF(c, void)
LAPACK_GEQRF(z, void)
#define LAPACK_ORGQR(name, T)                                                                 \
    void name(const lint *, const lint *, const lint *, T *, const lint *, const T *, T *,     \
              const lint *, lint *);
LAPACK_ORGQR(sorgqr_, float)
LAPACK_ORGQR(dorgqr_, double)
LAPACK_ORGQR(cungqr_, void)
LAPACK_ORGQR(zungqr_, void)
void ssyevd_(const char *, const char *, const lint *, float *, const lint *, float *, float *,
             const lint *, lint *, const lint *, lint *, size_t, size_t);
void dsyevd_(const char *, const char *, const lint *, double *, const lint *, double *, double *,
             const lint *, lint *, const lint *, lint *, size_t, size_t);
void cheevd_(const char *, const char *, const lint *, void *, const lint *, float *, void *,
             const lint *, float *, const lint *, lint *, const lint *, lint *, size_t, size_t);
void zheevd_(const char *, const char *, const lint *, void *, const lint *, double *, void *,
             const lint *, double *, const lint *, lint *, const lint *, lint *, size_t, size_t);
void sgesdd_(const char *, const lint *, const lint *, float *, const lint *, float *, float *,
             const lint *, float *, const lint *, float *, const lint *, lint *, lint *, size_t);
void dgesdd_(const char *, const lint *, const lint *, double *, const lint *, double *, double *,
             const lint *, double *, const lint *, double *, const lint *, lint *, lint *, size_t);
void cgesdd_(const char *, const lint *, const lint *, void *, const lint *, float *, void *,
             const lint *, void *, const lint *, void *, const lint *, float *, lint *, lint *,
             size_t);
void zgesdd_(const char *, const lint *, const lint *, void *, const lint *, double *, void *,
             const lint *, void *, const lint *, void *, const lint *, double *, lint *, lint *,
             size_t);
void sgeev_(const char *, const char *, const lint *, float *, const lint *, float *, float *,
            float *, const lint *, float *, const lint *, float *, const lint *, lint *, size_t,
            size_t);
void dgeev_(const char *, const char *, const lint *, double *, const lint *, double *, double *,
            double *, const lint *, double *, const lint *, double *, const lint *, lint *, size_t,
            size_t);
void cgeev_(const char *, const char *, const lint *, void *, const lint *, void *, void *,
            const lint *, void *, const lint *, void *, const lint *, float *, lint *, size_t,
            size_t);
void zgeev_(const char *, const char *, const lint *, void *, const lint *, void *, void *,
            const lint *, void *, const lint *, void *, const lint *, double *, lint *, size_t,
            size_t);

/* ---------------------------------------------------------------- element helpers */

static bool is_single(oly_dtype t) { return t == OLY_FLOAT32 || t == OLY_COMPLEX64; }

/* The element count of the leading (batch) dims of x, whose last `tail` dims
 * are the matrix. */
static int64_t batch_of(const oly_aval *x, int tail)
{
    int64_t n = 1;
    for (int d = 0; d < x->rank - tail; d++) n *= x->dims[d];
    return n;
}

static oly_status fits(const char *who, const oly_aval *x)
{
    for (int d = x->rank - 2; d < x->rank; d++)
        if (x->dims[d] > INT_MAX / 2)
            return oly__error(OLY_ERR_UNSUPPORTED,
                              "%s: matrix dims of %s exceed LAPACK's 32-bit integers", who,
                              oly__show_aval(x).s);
    return OLY_OK;
}

static oly_status no_memory(const char *who, const oly_aval *x)
{
    return oly__error(OLY_ERR_NOMEM, "%s: out of memory for the workspace of %s", who,
                      oly__show_aval(x).s);
}

static oly_status lapack_failed(const char *who, const char *routine, lint info)
{
    return oly__error(OLY_ERR_INTERNAL, "%s: LAPACK's %s rejected its argument %d (a bug in olympus)",
                      who, routine, (int)-info);
}

/* n elements of dtype t (real or complex) set to NaN (both parts). */
static void fill_nan(void *p, int64_t n, oly_dtype t)
{
    int64_t m = oly_dtype_is_complex(t) ? 2 * n : n;
    if (is_single(t)) {
        for (int64_t i = 0; i < m; i++) ((float *)p)[i] = NAN;
    } else {
        for (int64_t i = 0; i < m; i++) ((double *)p)[i] = NAN;
    }
}

/* Conjugates n complex elements in place (nothing for a real dtype). */
static void conj_n(void *p, int64_t n, oly_dtype t)
{
    if (t == OLY_COMPLEX64)
        for (int64_t i = 0; i < n; i++) ((float *)p)[2 * i + 1] = -((float *)p)[2 * i + 1];
    else if (t == OLY_COMPLEX128)
        for (int64_t i = 0; i < n; i++) ((double *)p)[2 * i + 1] = -((double *)p)[2 * i + 1];
}

/* Whether the n x n row-major matrix a is finite where `part` says: 0 all,
 * 'L' its lower triangle, 'U' its upper (LAPACK rejects or loops on NaN). */
static bool finite_matrix(const void *a, int64_t rows, int64_t cols, oly_dtype t, char part)
{
    int64_t w = oly_dtype_is_complex(t) ? 2 : 1;
    for (int64_t i = 0; i < rows; i++) {
        int64_t j0 = part == 'U' ? i : 0, j1 = part == 'L' ? i + 1 : cols;
        for (int64_t e = (i * cols + j0) * w; e < (i * cols + j1) * w; e++) {
            double v = is_single(t) ? (double)((const float *)a)[e] : ((const double *)a)[e];
            if (!isfinite(v)) return false;
        }
    }
    return true;
}

enum { TILE = 32 };

#define TRANSPOSE_AS(T)                                                                       \
    do {                                                                                      \
        const T *s = src;                                                                     \
        T *d = dst;                                                                           \
        for (int64_t i0 = 0; i0 < rows; i0 += TILE)                                           \
            for (int64_t j0 = 0; j0 < cols; j0 += TILE) {                                     \
                int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;                             \
                int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;                             \
                for (int64_t i = i0; i < i1; i++)                                             \
                    for (int64_t j = j0; j < j1; j++) d[j * ld + i] = s[i * cols + j];        \
            }                                                                                 \
    } while (0)

typedef struct c128 {
    double re, im;
} c128;

/* dst[j][i] = src[i][j]: src a dense row-major rows x cols matrix, dst rows of
 * ld >= rows elements (so dst is src column-major with leading dimension ld). */
static void transpose_to(const void *src, void *dst, int64_t rows, int64_t cols, int64_t ld,
                         size_t es)
{
    switch (es) {
    case 4: TRANSPOSE_AS(float); break;
    case 8: TRANSPOSE_AS(double); break;
    default: TRANSPOSE_AS(c128); break;
    }
}

/* ---------------------------------------------------------------- LAPACK by dtype */

static lint potrf(oly_dtype t, char uplo, lint n, void *a)
{
    lint info = 0, lda = n > 1 ? n : 1;
    switch (t) {
    case OLY_FLOAT32: spotrf_(&uplo, &n, a, &lda, &info, 1); break;
    case OLY_FLOAT64: dpotrf_(&uplo, &n, a, &lda, &info, 1); break;
    case OLY_COMPLEX64: cpotrf_(&uplo, &n, a, &lda, &info, 1); break;
    default: zpotrf_(&uplo, &n, a, &lda, &info, 1); break;
    }
    return info;
}

static lint getrf(oly_dtype t, lint m, lint n, void *a, lint lda, lint *ipiv)
{
    lint info = 0;
    switch (t) {
    case OLY_FLOAT32: sgetrf_(&m, &n, a, &lda, ipiv, &info); break;
    case OLY_FLOAT64: dgetrf_(&m, &n, a, &lda, ipiv, &info); break;
    case OLY_COMPLEX64: cgetrf_(&m, &n, a, &lda, ipiv, &info); break;
    default: zgetrf_(&m, &n, a, &lda, ipiv, &info); break;
    }
    return info;
}

static lint geqrf(oly_dtype t, lint m, lint n, void *a, lint lda, void *tau, void *work,
                  lint lwork)
{
    lint info = 0;
    switch (t) {
    case OLY_FLOAT32: sgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info); break;
    case OLY_FLOAT64: dgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info); break;
    case OLY_COMPLEX64: cgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info); break;
    default: zgeqrf_(&m, &n, a, &lda, tau, work, &lwork, &info); break;
    }
    return info;
}

static lint orgqr(oly_dtype t, lint m, lint n, lint k, void *a, lint lda, const void *tau,
                  void *work, lint lwork)
{
    lint info = 0;
    switch (t) {
    case OLY_FLOAT32: sorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info); break;
    case OLY_FLOAT64: dorgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info); break;
    case OLY_COMPLEX64: cungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info); break;
    default: zungqr_(&m, &n, &k, a, &lda, tau, work, &lwork, &info); break;
    }
    return info;
}

static lint heevd(oly_dtype t, char uplo, lint n, void *a, void *w, void *work, lint lwork,
                  void *rwork, lint lrwork, lint *iwork, lint liwork)
{
    lint info = 0, lda = n > 1 ? n : 1;
    const char jobz = 'V';
    switch (t) {
    case OLY_FLOAT32:
        ssyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
        break;
    case OLY_FLOAT64:
        dsyevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
        break;
    case OLY_COMPLEX64:
        cheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, &info,
                1, 1);
        break;
    default:
        zheevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, &info,
                1, 1);
        break;
    }
    return info;
}

static lint gesdd(oly_dtype t, char jobz, lint m, lint n, void *a, void *s, void *u, lint ldu,
                  void *vt, lint ldvt, void *work, lint lwork, void *rwork, lint *iwork)
{
    lint info = 0, lda = m > 1 ? m : 1;
    switch (t) {
    case OLY_FLOAT32:
        sgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
        break;
    case OLY_FLOAT64:
        dgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
        break;
    case OLY_COMPLEX64:
        cgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, &info,
                1);
        break;
    default:
        zgesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, &info,
                1);
        break;
    }
    return info;
}

/* w: complex eigenvalues for complex t; for real t, wr then wi (2n reals). */
static lint geev(oly_dtype t, char jobvl, char jobvr, lint n, void *a, void *w, void *vl,
                 void *vr, void *work, lint lwork, void *rwork)
{
    lint info = 0, ld = n > 1 ? n : 1;
    switch (t) {
    case OLY_FLOAT32:
        sgeev_(&jobvl, &jobvr, &n, a, &ld, w, (float *)w + n, vl, &ld, vr, &ld, work, &lwork,
               &info, 1, 1);
        break;
    case OLY_FLOAT64:
        dgeev_(&jobvl, &jobvr, &n, a, &ld, w, (double *)w + n, vl, &ld, vr, &ld, work, &lwork,
               &info, 1, 1);
        break;
    case OLY_COMPLEX64:
        cgeev_(&jobvl, &jobvr, &n, a, &ld, w, vl, &ld, vr, &ld, work, &lwork, rwork, &info, 1, 1);
        break;
    default:
        zgeev_(&jobvl, &jobvr, &n, a, &ld, w, vl, &ld, vr, &ld, work, &lwork, rwork, &info, 1, 1);
        break;
    }
    return info;
}

/* The size a workspace query wrote into its first element (its real part). */
static lint queried(oly_dtype t, const void *w)
{
    double v = is_single(t) ? (double)*(const float *)w : *(const double *)w;
    v = ceil(v * (1 + 1e-7)) + 1; /* float32 rounds large sizes */
    return v > (double)INT_MAX ? INT_MAX : v < 1 ? 1 : (lint)v;
}

/* ---------------------------------------------------------------- cholesky */

static oly_status cholesky_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("cholesky", x));
    oly_dtype t = x->dtype;
    size_t es = oly_dtype_size(t);
    int64_t n = x->dims[x->rank - 1], B = batch_of(x, 2);
    size_t mat = (size_t)(n * n) * es;
    if (mat == 0 || B == 0) return OLY_OK;
    memcpy(ctx->out[0], ctx->in[0], mat * (size_t)B);
    for (int64_t bi = 0; bi < B; bi++) {
        char *a = (char *)ctx->out[0] + (size_t)bi * mat;
        lint info = potrf(t, 'U', (lint)n, a);
        if (info < 0) return lapack_failed("cholesky", "potrf", info);
        if (info > 0) {
            fill_nan(a, n * n, t);
            continue;
        }
        for (int64_t i = 0; i + 1 < n; i++) /* the strict upper triangle, row-major */
            memset(a + (size_t)(i * n + i + 1) * es, 0, (size_t)(n - i - 1) * es);
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- triangular_solve */

static oly_status triangular_solve_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_triangular_solve *p = ctx->params;
    const oly_aval *a = &ctx->in_aval[0], *bv = &ctx->in_aval[1];
    OLY_TRY(fits("triangular_solve", a));
    OLY_TRY(fits("triangular_solve", bv));
    oly_dtype t = a->dtype;
    size_t es = oly_dtype_size(t);
    int64_t k = a->dims[a->rank - 1], m = bv->dims[bv->rank - 2], n = bv->dims[bv->rank - 1];
    int64_t B = batch_of(bv, 2);
    size_t amat = (size_t)(k * k) * es, bmat = (size_t)(m * n) * es;
    if (bmat == 0 || B == 0) return OLY_OK;
    memcpy(ctx->out[0], ctx->in[1], bmat * (size_t)B);
    /* conjugate without transpose has no CBLAS flag: solve with a conjugated copy */
    bool conj_copy = p->conjugate_a && !p->transpose_a && oly_dtype_is_complex(t);
    char *ca = NULL;
    if (conj_copy && !(ca = oly__malloc(amat))) return no_memory("triangular_solve", a);
    enum CBLAS_SIDE side = p->left_side ? CblasLeft : CblasRight;
    enum CBLAS_UPLO uplo = p->lower ? CblasLower : CblasUpper;
    enum CBLAS_TRANSPOSE tr = !p->transpose_a ? CblasNoTrans
                              : p->conjugate_a ? CblasConjTrans
                                               : CblasTrans;
    enum CBLAS_DIAG diag = p->unit_diagonal ? CblasUnit : CblasNonUnit;
    blasint M = (blasint)m, N = (blasint)n, lda = k > 1 ? (blasint)k : 1;
    blasint ldb = n > 1 ? (blasint)n : 1;
    static const float one_c[2] = {1, 0};
    static const double one_z[2] = {1, 0};
    for (int64_t bi = 0; bi < B; bi++) {
        const char *A = (const char *)ctx->in[0] + (size_t)bi * amat;
        char *X = (char *)ctx->out[0] + (size_t)bi * bmat;
        if (conj_copy) {
            memcpy(ca, A, amat);
            conj_n(ca, k * k, t);
            A = ca;
        }
        switch (t) {
        case OLY_FLOAT32:
            cblas_strsm(CblasRowMajor, side, uplo, tr, diag, M, N, 1.0f, (const float *)A, lda,
                        (float *)X, ldb);
            break;
        case OLY_FLOAT64:
            cblas_dtrsm(CblasRowMajor, side, uplo, tr, diag, M, N, 1.0, (const double *)A, lda,
                        (double *)X, ldb);
            break;
        case OLY_COMPLEX64:
            cblas_ctrsm(CblasRowMajor, side, uplo, tr, diag, M, N, one_c, A, lda, X, ldb);
            break;
        default:
            cblas_ztrsm(CblasRowMajor, side, uplo, tr, diag, M, N, one_z, A, lda, X, ldb);
            break;
        }
    }
    free(ca);
    return OLY_OK;
}

/* ---------------------------------------------------------------- lu */

static oly_status lu_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("lu", x));
    oly_dtype t = x->dtype;
    size_t es = oly_dtype_size(t);
    int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1], k = m < n ? m : n;
    int64_t B = batch_of(x, 2);
    size_t mat = (size_t)(m * n) * es;
    if (B == 0) return OLY_OK;
    char *work = oly__malloc(mat ? mat : 1);
    lint *ipiv = oly__malloc((size_t)(k ? k : 1) * sizeof *ipiv);
    oly_status s = OLY_OK;
    if (!work || !ipiv) {
        s = no_memory("lu", x);
        goto done;
    }
    for (int64_t bi = 0; bi < B; bi++) {
        int32_t *piv = (int32_t *)ctx->out[1] + bi * k, *perm = (int32_t *)ctx->out[2] + bi * m;
        char *out = (char *)ctx->out[0] + (size_t)bi * mat;
        if (k > 0) {
            transpose_to((const char *)ctx->in[0] + (size_t)bi * mat, work, m, n, m, es);
            lint info = getrf(t, (lint)m, (lint)n, work, (lint)m, ipiv);
            if (info < 0) {
                s = lapack_failed("lu", "getrf", info);
                goto done;
            }
            transpose_to(work, out, n, m, n, es);
        }
        for (int64_t i = 0; i < m; i++) perm[i] = (int32_t)i;
        for (int64_t i = 0; i < k; i++) {
            int32_t j = (int32_t)(ipiv[i] - 1), tmp = perm[i];
            piv[i] = j;
            perm[i] = perm[j];
            perm[j] = tmp;
        }
    }
done:
    free(work);
    free(ipiv);
    return s;
}

/* ---------------------------------------------------------------- qr */

static oly_status qr_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_qr *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("qr", x));
    oly_dtype t = x->dtype;
    size_t es = oly_dtype_size(t);
    int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1], k = m < n ? m : n;
    int64_t qc = p->full_matrices ? m : k, rr = p->full_matrices ? m : k;
    int64_t cols = n > qc ? n : qc, B = batch_of(x, 2);
    lint lda = m > 1 ? (lint)m : 1;
    if (B == 0) return OLY_OK;
    char *work = oly__malloc((size_t)(m * cols + k + 2) * es), *tau = NULL, *lw = NULL;
    oly_status s = OLY_OK;
    if (!work) return no_memory("qr", x);
    tau = work + (size_t)(m * cols) * es;
    lint lwork = 1;
    double q[2]; /* workspace: the larger of geqrf's and orgqr's */
    if (m > 0 && n > 0) {
        lint info = geqrf(t, (lint)m, (lint)n, work, lda, tau, q, -1);
        if (info < 0) {
            s = lapack_failed("qr", "geqrf", info);
            goto done;
        }
        lwork = queried(t, q);
    }
    if (m > 0 && qc > 0) {
        lint info = orgqr(t, (lint)m, (lint)qc, (lint)k, work, lda, tau, q, -1);
        if (info < 0) {
            s = lapack_failed("qr", "orgqr", info);
            goto done;
        }
        if (queried(t, q) > lwork) lwork = queried(t, q);
    }
    if (!(lw = oly__malloc((size_t)lwork * es))) {
        s = no_memory("qr", x);
        goto done;
    }
    for (int64_t bi = 0; bi < B; bi++) {
        const char *in = (const char *)ctx->in[0] + (size_t)(bi * m * n) * es;
        char *qo = (char *)ctx->out[0] + (size_t)(bi * m * qc) * es;
        char *r = (char *)ctx->out[1] + (size_t)(bi * rr * n) * es;
        if (m == 0) continue;
        memset(r, 0, (size_t)(rr * n) * es);
        if (n > 0) {
            transpose_to(in, work, m, n, m, es);
            lint info = geqrf(t, (lint)m, (lint)n, work, lda, tau, lw, lwork);
            if (info < 0) {
                s = lapack_failed("qr", "geqrf", info);
                goto done;
            }
            for (int64_t i = 0; i < rr && i < m; i++)
                for (int64_t j = i; j < n; j++)
                    memcpy(r + (size_t)(i * n + j) * es, work + (size_t)(i + j * m) * es, es);
        }
        if (qc > 0) {
            lint info = orgqr(t, (lint)m, (lint)qc, (lint)k, work, lda, tau, lw, lwork);
            if (info < 0) {
                s = lapack_failed("qr", "orgqr", info);
                goto done;
            }
            transpose_to(work, qo, qc, m, qc, es);
        }
    }
done:
    free(work);
    free(lw);
    return s;
}

/* ---------------------------------------------------------------- eigh */

static oly_status eigh_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_eigh *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("eigh", x));
    oly_dtype t = x->dtype, rt = is_single(t) ? OLY_FLOAT32 : OLY_FLOAT64;
    size_t es = oly_dtype_size(t), rs = oly_dtype_size(rt);
    int64_t n = x->dims[x->rank - 1], B = batch_of(x, 2);
    size_t mat = (size_t)(n * n) * es;
    if (n == 0 || B == 0) return OLY_OK;
    /* a^T (the buffer read column-major) is conj(a): its triangle opposite a's */
    char uplo = p->lower ? 'U' : 'L';
    char *a = oly__malloc(mat), *work = NULL, *rwork = NULL;
    lint *iwork = NULL;
    oly_status s = OLY_OK;
    if (!a) return no_memory("eigh", x);
    double q[2], rq[2];
    lint iq = 0;
    lint info = heevd(t, uplo, (lint)n, a, ctx->out[1], q, -1, rq, -1, &iq, -1);
    if (info < 0) {
        s = lapack_failed("eigh", "syevd/heevd", info);
        goto done;
    }
    lint lwork = queried(t, q), lrwork = oly_dtype_is_complex(t) ? queried(rt, rq) : 1;
    lint liwork = iq > 1 ? iq : 1;
    work = oly__malloc((size_t)lwork * es);
    rwork = oly__malloc((size_t)lrwork * rs);
    iwork = oly__malloc((size_t)liwork * sizeof *iwork);
    if (!work || !rwork || !iwork) {
        s = no_memory("eigh", x);
        goto done;
    }
    for (int64_t bi = 0; bi < B; bi++) {
        char *v = (char *)ctx->out[0] + (size_t)bi * mat;
        char *w = (char *)ctx->out[1] + (size_t)(bi * n) * rs;
        memcpy(a, (const char *)ctx->in[0] + (size_t)bi * mat, mat);
        info = finite_matrix(a, n, n, t, p->lower ? 'L' : 'U')
                   ? heevd(t, uplo, (lint)n, a, w, work, lwork, rwork, lrwork, iwork, liwork)
                   : 1;
        if (info < 0) {
            s = lapack_failed("eigh", "syevd/heevd", info);
            goto done;
        }
        if (info > 0) {
            fill_nan(v, n * n, t);
            fill_nan(w, n, rt);
            continue;
        }
        transpose_to(a, v, n, n, n, es); /* column-major Z -> row-major, conj below */
        conj_n(v, n * n, t);
    }
done:
    free(a);
    free(work);
    free(rwork);
    free(iwork);
    return s;
}

/* ---------------------------------------------------------------- svd */

static void identity(void *p, int64_t n, oly_dtype t)
{
    size_t es = oly_dtype_size(t);
    memset(p, 0, (size_t)(n * n) * es);
    for (int64_t i = 0; i < n; i++) {
        char *e = (char *)p + (size_t)(i * n + i) * es;
        if (is_single(t)) *(float *)e = 1;
        else *(double *)e = 1;
    }
}

static oly_status svd_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_svd *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("svd", x));
    oly_dtype t = x->dtype, rt = is_single(t) ? OLY_FLOAT32 : OLY_FLOAT64;
    size_t es = oly_dtype_size(t), rs = oly_dtype_size(rt);
    int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1], k = m < n ? m : n;
    int64_t mx = m > n ? m : n, B = batch_of(x, 2);
    bool uv = p->compute_uv;
    int64_t ucols = p->full_matrices ? m : k, vrows = p->full_matrices ? n : k;
    size_t mat = (size_t)(m * n) * es;
    if (B == 0) return OLY_OK;
    if (k == 0) { /* no singular values; full_matrices: identities */
        for (int64_t bi = 0; uv && p->full_matrices && bi < B; bi++) {
            identity((char *)ctx->out[1] + (size_t)(bi * m * m) * es, m, t);
            identity((char *)ctx->out[2] + (size_t)(bi * n * n) * es, n, t);
        }
        return OLY_OK;
    }
    /* a^T (n x m, column-major) = U S Vt: Vt is a's u, U is a's vh */
    char jobz = !uv ? 'N' : p->full_matrices ? 'A' : 'S';
    lint ldu = uv ? (lint)n : 1, ldvt = uv ? (lint)ucols : 1;
    int64_t lrwork = !oly_dtype_is_complex(t) ? 1
                     : !uv ? 7 * k
                           : (5 * k * k + 5 * k > 2 * mx * k + 2 * k * k + k
                                  ? 5 * k * k + 5 * k
                                  : 2 * mx * k + 2 * k * k + k);
    char *a = oly__malloc(mat), *work = NULL, *rwork = oly__malloc((size_t)lrwork * rs);
    lint *iwork = oly__malloc((size_t)(8 * k) * sizeof *iwork);
    double du[2], dvt[2], q[2];
    oly_status s = OLY_OK;
    if (!a || !rwork || !iwork) {
        s = no_memory("svd", x);
        goto done;
    }
    lint info = gesdd(t, jobz, (lint)n, (lint)m, a, ctx->out[0], du, ldu, dvt, ldvt, q, -1, rwork,
                      iwork);
    if (info < 0) {
        s = lapack_failed("svd", "gesdd", info);
        goto done;
    }
    lint lwork = queried(t, q);
    if (!(work = oly__malloc((size_t)lwork * es))) {
        s = no_memory("svd", x);
        goto done;
    }
    for (int64_t bi = 0; bi < B; bi++) {
        char *sv = (char *)ctx->out[0] + (size_t)(bi * k) * rs;
        char *u = uv ? (char *)ctx->out[1] + (size_t)(bi * m * ucols) * es : (char *)du;
        char *vh = uv ? (char *)ctx->out[2] + (size_t)(bi * vrows * n) * es : (char *)dvt;
        memcpy(a, (const char *)ctx->in[0] + (size_t)bi * mat, mat);
        info = finite_matrix(a, m, n, t, 0) ? gesdd(t, jobz, (lint)n, (lint)m, a, sv, vh, ldu, u,
                                                    ldvt, work, lwork, rwork, iwork)
                                            : 1;
        if (info < 0) {
            s = lapack_failed("svd", "gesdd", info);
            goto done;
        }
        if (info > 0) {
            fill_nan(sv, k, rt);
            if (uv) {
                fill_nan(u, m * ucols, t);
                fill_nan(vh, vrows * n, t);
            }
        }
    }
done:
    free(a);
    free(work);
    free(rwork);
    free(iwork);
    return s;
}

/* ---------------------------------------------------------------- eig */

/* A real geev's eigenvectors (columns of v, column-major n x n; a complex
 * pair j, j+1 stored as real and imaginary parts) as complex columns of the
 * row-major out. */
#define UNPACK_AS(T)                                                                          \
    do {                                                                                      \
        const T *V = v, *wi = wim;                                                            \
        T *o = out;                                                                           \
        for (int64_t j = 0; j < n; j++) {                                                     \
            bool pair = wi[j] != 0 && j + 1 < n;                                              \
            for (int64_t i = 0; i < n; i++) {                                                 \
                T re = V[i + j * n], im = pair ? V[i + (j + 1) * n] : 0;                      \
                o[2 * (i * n + j)] = re;                                                      \
                o[2 * (i * n + j) + 1] = im;                                                  \
                if (pair) {                                                                   \
                    o[2 * (i * n + j + 1)] = re;                                              \
                    o[2 * (i * n + j + 1) + 1] = -im;                                         \
                }                                                                             \
            }                                                                                 \
            if (pair) j++;                                                                    \
        }                                                                                     \
    } while (0)

static void unpack_real_vectors(oly_dtype t, const void *v, const void *wim, int64_t n, void *out)
{
    if (t == OLY_FLOAT32) UNPACK_AS(float);
    else UNPACK_AS(double);
}

static oly_status eig_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK;
    const oly_params_eig *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    OLY_TRY(fits("eig", x));
    oly_dtype t = x->dtype, ct = is_single(t) ? OLY_COMPLEX64 : OLY_COMPLEX128;
    oly_dtype rt = is_single(t) ? OLY_FLOAT32 : OLY_FLOAT64;
    bool cplx = oly_dtype_is_complex(t), left = p->compute_left_eigenvectors;
    bool right = p->compute_right_eigenvectors;
    size_t es = oly_dtype_size(t), cs = oly_dtype_size(ct), rs = oly_dtype_size(rt);
    int64_t n = x->dims[x->rank - 1], B = batch_of(x, 2);
    size_t mat = (size_t)(n * n) * es;
    if (n == 0 || B == 0) return OLY_OK;
    void *const *outs = ctx->out;
    void *wout = outs[0], *vlout = left ? outs[1] : NULL;
    void *vrout = right ? outs[left ? 2 : 1] : NULL;
    /* a column-major copy of a; vl / vr column-major; real: wr, wi */
    char *a = oly__malloc(mat), *vl = oly__malloc(left ? mat : es), *vr = oly__malloc(right ? mat : es);
    char *w = oly__malloc((size_t)(2 * n) * rs), *rwork = oly__malloc((size_t)(2 * n) * rs);
    char *work = NULL;
    double q[2];
    oly_status s = OLY_OK;
    if (!a || !vl || !vr || !w || !rwork) {
        s = no_memory("eig", x);
        goto done;
    }
    char jl = left ? 'V' : 'N', jr = right ? 'V' : 'N';
    lint info = geev(t, jl, jr, (lint)n, a, w, vl, vr, q, -1, rwork);
    if (info < 0) {
        s = lapack_failed("eig", "geev", info);
        goto done;
    }
    lint lwork = queried(t, q);
    if (!(work = oly__malloc((size_t)lwork * es))) {
        s = no_memory("eig", x);
        goto done;
    }
    for (int64_t bi = 0; bi < B; bi++) {
        char *wo = (char *)wout + (size_t)(bi * n) * cs;
        char *vlo = left ? (char *)vlout + (size_t)(bi * n * n) * cs : NULL;
        char *vro = right ? (char *)vrout + (size_t)(bi * n * n) * cs : NULL;
        const char *in = (const char *)ctx->in[0] + (size_t)bi * mat;
        transpose_to(in, a, n, n, n, es);
        info = finite_matrix(in, n, n, t, 0)
                   ? geev(t, jl, jr, (lint)n, a, cplx ? wo : w, vl, vr, work, lwork, rwork)
                   : 1;
        if (info < 0) {
            s = lapack_failed("eig", "geev", info);
            goto done;
        }
        if (info > 0) {
            fill_nan(wo, n, ct);
            if (left) fill_nan(vlo, n * n, ct);
            if (right) fill_nan(vro, n * n, ct);
            continue;
        }
        if (cplx) {
            if (left) transpose_to(vl, vlo, n, n, n, cs);
            if (right) transpose_to(vr, vro, n, n, n, cs);
            continue;
        }
        for (int64_t j = 0; j < n; j++) { /* w = wr + i wi */
            if (t == OLY_FLOAT32) {
                ((float *)wo)[2 * j] = ((float *)w)[j];
                ((float *)wo)[2 * j + 1] = ((float *)w)[n + j];
            } else {
                ((double *)wo)[2 * j] = ((double *)w)[j];
                ((double *)wo)[2 * j + 1] = ((double *)w)[n + j];
            }
        }
        const char *wim = w + (size_t)n * rs;
        if (left) unpack_real_vectors(t, vl, wim, n, vlo);
        if (right) unpack_real_vectors(t, vr, wim, n, vro);
    }
done:
    free(a);
    free(vl);
    free(vr);
    free(w);
    free(rwork);
    free(work);
    return s;
}

const oly_cpu_kernel oly__cpu_cholesky = {.fn = cholesky_kernel};
const oly_cpu_kernel oly__cpu_triangular_solve = {.fn = triangular_solve_kernel};
const oly_cpu_kernel oly__cpu_lu = {.fn = lu_kernel};
const oly_cpu_kernel oly__cpu_qr = {.fn = qr_kernel};
const oly_cpu_kernel oly__cpu_eigh = {.fn = eigh_kernel};
const oly_cpu_kernel oly__cpu_svd = {.fn = svd_kernel};
const oly_cpu_kernel oly__cpu_eig = {.fn = eig_kernel};

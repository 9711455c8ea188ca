/* linalg.c — dot_general, following JAX's lax: output dims are the batch dims,
 * then lhs free dims, then rhs free dims (each in operand order).
 *
 * Both operands are viewed as (batch, free, contract) matrices. f32/f64/c64/c128
 * go to CBLAS (gemm, gemv when one side is a vector), using the transpose flags
 * to accept either (B,M,K)/(B,K,M) and (B,K,N)/(B,N,K) layouts without copying;
 * other layouts are permuted into a scratch buffer first. f16/bf16 are widened
 * to f32 and use sgemm (float accumulation). Integers and bool use a blocked C
 * loop over uint64 accumulators (wrapping arithmetic; bool is or-of-ands). The
 * kernel runs on one thread (ith 0); OpenBLAS threads internally. */
#include "internal.h"
#include "trans/trans.h"

#include <cblas.h>
#include <limits.h>

/* ---------------------------------------------------------------- dimension numbers */

/* The normalised dimension numbers and the derived canonical view. */
typedef struct dims_info {
    int nb, nc, lf, rf;             /* batch, contract, lhs free, rhs free counts */
    int64_t lb[OLY_MAX_RANK], rb[OLY_MAX_RANK], lc[OLY_MAX_RANK], rc[OLY_MAX_RANK];
    int64_t lfree[OLY_MAX_RANK], rfree[OLY_MAX_RANK];
    int64_t B, M, N, K;
} dims_info;

static oly_status norm_list(const char *field, const oly_ints *v, const oly_aval *a,
                            const char *side, int64_t *out, bool *used)
{
    if (v->n < 0 || v->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "dot_general: %s must have 0..%d entries, got %d",
                          field, OLY_MAX_RANK, v->n);
    for (int i = 0; i < v->n; i++) {
        int64_t d = v->v[i];
        if (d < -a->rank || d >= a->rank)
            return oly__error(OLY_ERR_INVALID,
                              "dot_general: %s %s out of range for %s %s", field,
                              oly__show_ints(v).s, side, oly__show_aval(a).s);
        if (d < 0) d += a->rank;
        if (used[d])
            return oly__error(OLY_ERR_INVALID,
                              "dot_general: %s dimension %lld appears twice in the batch and "
                              "contracting dimensions (%s %s)",
                              side, (long long)d, side, oly__show_aval(a).s);
        used[d] = true;
        out[i] = d;
    }
    return OLY_OK;
}

static oly_status analyse(const oly_params_dot_general *p, const oly_aval *l, const oly_aval *r,
                          dims_info *di)
{
    bool lu[OLY_MAX_RANK] = {false}, ru[OLY_MAX_RANK] = {false};
    OLY_TRY(norm_list("lhs_batch", &p->lhs_batch, l, "lhs", di->lb, lu));
    OLY_TRY(norm_list("lhs_contracting", &p->lhs_contracting, l, "lhs", di->lc, lu));
    OLY_TRY(norm_list("rhs_batch", &p->rhs_batch, r, "rhs", di->rb, ru));
    OLY_TRY(norm_list("rhs_contracting", &p->rhs_contracting, r, "rhs", di->rc, ru));
    if (p->lhs_batch.n != p->rhs_batch.n)
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: lhs_batch %s and rhs_batch %s must have equal lengths",
                          oly__show_ints(&p->lhs_batch).s, oly__show_ints(&p->rhs_batch).s);
    if (p->lhs_contracting.n != p->rhs_contracting.n)
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: lhs_contracting %s and rhs_contracting %s must have "
                          "equal lengths",
                          oly__show_ints(&p->lhs_contracting).s,
                          oly__show_ints(&p->rhs_contracting).s);
    di->nb = p->lhs_batch.n;
    di->nc = p->lhs_contracting.n;
    di->B = di->M = di->N = di->K = 1;
    for (int i = 0; i < di->nb; i++) {
        if (l->dims[di->lb[i]] != r->dims[di->rb[i]])
            return oly__error(OLY_ERR_SHAPE,
                              "dot_general: batch dimensions must have equal sizes: lhs %s "
                              "dimension %lld vs rhs %s dimension %lld",
                              oly__show_aval(l).s, (long long)di->lb[i], oly__show_aval(r).s,
                              (long long)di->rb[i]);
        di->B *= l->dims[di->lb[i]];
    }
    for (int i = 0; i < di->nc; i++) {
        if (l->dims[di->lc[i]] != r->dims[di->rc[i]])
            return oly__error(OLY_ERR_SHAPE,
                              "dot_general: contracting dimensions must have equal sizes: lhs "
                              "%s dimension %lld vs rhs %s dimension %lld",
                              oly__show_aval(l).s, (long long)di->lc[i], oly__show_aval(r).s,
                              (long long)di->rc[i]);
        di->K *= l->dims[di->lc[i]];
    }
    di->lf = di->rf = 0;
    for (int d = 0; d < l->rank; d++)
        if (!lu[d]) {
            di->lfree[di->lf++] = d;
            di->M *= l->dims[d];
        }
    for (int d = 0; d < r->rank; d++)
        if (!ru[d]) {
            di->rfree[di->rf++] = d;
            di->N *= r->dims[d];
        }
    return OLY_OK;
}

static oly_status dot_general_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dot_general *p = ctx->params;
    if (ctx->n_in != 2)
        return oly__error(OLY_ERR_INVALID, "dot_general: expected 2 operands, got %d", ctx->n_in);
    const oly_aval *l = &ctx->in[0], *r = &ctx->in[1];
    if (l->dtype != r->dtype || (unsigned)l->dtype >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE,
                          "dot_general: operands must have equal dtypes, got lhs %s and rhs %s",
                          oly__show_aval(l).s, oly__show_aval(r).s);
    dims_info di;
    OLY_TRY(analyse(p, l, r, &di));
    int rank = di.nb + di.lf + di.rf;
    if (rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "dot_general: result rank %d exceeds the maximum %d",
                          rank, OLY_MAX_RANK);
    memset(out, 0, sizeof *out);
    out->dtype = l->dtype;
    out->weak = l->weak && r->weak;
    for (int i = 0; i < di.nb; i++) out->dims[out->rank++] = l->dims[di.lb[i]];
    for (int i = 0; i < di.lf; i++) out->dims[out->rank++] = l->dims[di.lfree[i]];
    for (int i = 0; i < di.rf; i++) out->dims[out->rank++] = r->dims[di.rfree[i]];
    return OLY_OK;
}

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
    char *dst = malloc((size_t)(n ? n : 1) * ts);
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
    OLY_TRY(analyse(p, l, r, &di));
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
    if (blas) {
        s = blas_dot(t, &di, &a, &b, ctx->out[0]);
    } else if (half) {
        tmp = malloc((size_t)n_out * sizeof(float));
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
        tmp = malloc((size_t)n_out * sizeof(uint64_t));
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

/* ---------------------------------------------------------------- transformation rules
 *
 * Batching: batched on both sides, the batch axes become a new leading pair of
 * batch dimensions (result axis 0); batched on one side, the batch axis is a free
 * dimension of that side and the result carries it where that side's free dims
 * land. JVP: bilinear. Transpose: JAX's rule, a dot_general of ct with the other
 * operand followed by a transpose back to the operand's dimension order. */

/* Normalised copy of a dimension list, shifted around a batch axis at b
 * (b == OLY_NOT_MAPPED: no shift). */
static oly_ints norm_dims(const oly_ints *v, int rank, int b)
{
    oly_ints r = {.n = v->n};
    for (int i = 0; i < v->n; i++) {
        int64_t d = v->v[i] < 0 ? v->v[i] + rank : v->v[i];
        r.v[i] = b != OLY_NOT_MAPPED && d >= b ? d + 1 : d;
    }
    return r;
}

/* The dims of rank not named in a or c, ascending (a, c normalised). */
static oly_ints free_dims(int rank, const oly_ints *a, const oly_ints *c)
{
    bool used[OLY_MAX_RANK] = {false};
    for (int i = 0; i < a->n; i++) used[a->v[i]] = true;
    for (int i = 0; i < c->n; i++) used[c->v[i]] = true;
    oly_ints r = {.n = 0};
    for (int d = 0; d < rank; d++)
        if (!used[d]) r.v[r.n++] = d;
    return r;
}

static oly_status prepend(oly_ints *v, int64_t x)
{
    if (v->n >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "dot_general: batching needs %d batch dimensions, above the maximum %d",
                          v->n + 1, OLY_MAX_RANK);
    memmove(v->v + 1, v->v, sizeof v->v[0] * (size_t)v->n);
    v->v[0] = x;
    v->n++;
    return OLY_OK;
}

static oly_status dot_general_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                    const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_dot_general *p = eqn->params;
    oly_aval la = oly__atom_aval(&eqn->in[0]), ra = oly__atom_aval(&eqn->in[1]);
    int lb = in_bdim[0], rb = in_bdim[1];
    oly_params_dot_general q = {
        .lhs_contracting = norm_dims(&p->lhs_contracting, la.rank, lb),
        .rhs_contracting = norm_dims(&p->rhs_contracting, ra.rank, rb),
        .lhs_batch = norm_dims(&p->lhs_batch, la.rank, lb),
        .rhs_batch = norm_dims(&p->rhs_batch, ra.rank, rb),
    };
    int nb = p->lhs_batch.n;
    if (lb != OLY_NOT_MAPPED && rb != OLY_NOT_MAPPED) {
        OLY_TRY(prepend(&q.lhs_batch, lb));
        OLY_TRY(prepend(&q.rhs_batch, rb));
        out_bdim[0] = 0;
    } else if (lb != OLY_NOT_MAPPED) {
        oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
        oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
        oly_ints lf = free_dims(la.rank, &lc, &lbt);
        int before = 0;
        for (int i = 0; i < lf.n; i++) before += lf.v[i] < lb;
        out_bdim[0] = nb + before;
    } else {
        oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
        oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
        oly_ints rc = norm_dims(&p->rhs_contracting, ra.rank, OLY_NOT_MAPPED);
        oly_ints rbt = norm_dims(&p->rhs_batch, ra.rank, OLY_NOT_MAPPED);
        oly_ints lf = free_dims(la.rank, &lc, &lbt), rf = free_dims(ra.rank, &rc, &rbt);
        int before = 0;
        for (int i = 0; i < rf.n; i++) before += rf.v[i] < rb;
        out_bdim[0] = nb + lf.n + before;
    }
    return oly__emit_dot_general(ctx->b, in[0], in[1], &q, out);
}

static oly_status dot_general_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                  const oly_atom *tangent, const bool *tan_nz,
                                  oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_dot_general *p = eqn->params;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    out_nz[0] = tan_nz[0] || tan_nz[1];
    oly_atom a, c;
    if (tan_nz[0]) OLY_TRY(oly__emit_dot_general(ctx->b, tangent[0], primal[1], p, &a));
    if (tan_nz[1]) OLY_TRY(oly__emit_dot_general(ctx->b, primal[0], tangent[1], p, &c));
    if (tan_nz[0] && tan_nz[1]) return oly__emit_bin(ctx->b, &oly__prim_add, a, c, tangent_out);
    if (tan_nz[0]) *tangent_out = a;
    if (tan_nz[1]) *tangent_out = c;
    return OLY_OK;
}

/* The cotangent of x in dot_general(x, y) (or of y in dot_general(y, x) when
 * swap_ans): JAX's _dot_general_transpose_lhs. Dimension lists are normalised. */
static oly_status transpose_side(oly_builder *b, oly_atom g, oly_atom y, int x_rank, int y_rank,
                                 const oly_ints *xc, const oly_ints *yc, const oly_ints *xbt,
                                 const oly_ints *ybt, bool swap_ans, oly_atom *out)
{
    oly_ints x_kept = free_dims(x_rank, xc, xbt), y_kept = free_dims(y_rank, yc, ybt);
    int nb = xbt->n;
    oly_params_dot_general q = {.lhs_batch = oly__ints_range(nb), .rhs_batch = *ybt,
                                .rhs_contracting = y_kept};
    int first = swap_ans ? nb : nb + x_kept.n;
    q.lhs_contracting.n = y_kept.n;
    for (int i = 0; i < y_kept.n; i++) q.lhs_contracting.v[i] = first + i;
    /* the result's dims: x's batch dims, x's kept dims, then x's contracting
     * dims in the order of y's contracting dims (ascending in y) */
    int64_t order[OLY_MAX_RANK];
    int n = 0;
    for (int i = 0; i < nb; i++) order[n++] = xbt->v[i];
    for (int i = 0; i < x_kept.n; i++) order[n++] = x_kept.v[i];
    bool taken[OLY_MAX_RANK] = {false};
    for (int k = 0; k < yc->n; k++) {
        int best = -1;
        for (int i = 0; i < yc->n; i++)
            if (!taken[i] && (best < 0 || yc->v[i] < yc->v[best])) best = i;
        taken[best] = true;
        order[n++] = xc->v[best];
    }
    oly_atom r;
    OLY_TRY(oly__emit_dot_general(b, g, y, &q, &r));
    oly_params_transpose t = {.permutation = {.n = n}};
    bool ident = true;
    for (int k = 0; k < n; k++) {
        t.permutation.v[order[k]] = k;
        ident = ident && order[k] == k;
    }
    if (ident) {
        *out = r;
        return OLY_OK;
    }
    return oly__emit(b, &oly__prim_transpose, &r, 1, &t, NULL, 0, out);
}

static oly_status dot_general_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                        const oly_atom *in, const bool *linear,
                                        const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                        bool *ct_in_nz)
{
    const oly_params_dot_general *p = eqn->params;
    if (linear[0] && linear[1])
        return oly__error(OLY_ERR_INVALID,
                          "dot_general: cannot transpose with both operands linear (it is "
                          "bilinear, not linear)");
    ct_in_nz[0] = ct_in_nz[1] = false;
    if (!ct_nz[0]) return OLY_OK;
    oly_aval la = oly__atom_aval(&eqn->in[0]), ra = oly__atom_aval(&eqn->in[1]);
    oly_ints lc = norm_dims(&p->lhs_contracting, la.rank, OLY_NOT_MAPPED);
    oly_ints rc = norm_dims(&p->rhs_contracting, ra.rank, OLY_NOT_MAPPED);
    oly_ints lbt = norm_dims(&p->lhs_batch, la.rank, OLY_NOT_MAPPED);
    oly_ints rbt = norm_dims(&p->rhs_batch, ra.rank, OLY_NOT_MAPPED);
    if (linear[0]) {
        OLY_TRY(transpose_side(ctx->b, ct[0], in[1], la.rank, ra.rank, &lc, &rc, &lbt, &rbt,
                               false, &ct_in[0]));
        ct_in_nz[0] = true;
    }
    if (linear[1]) {
        OLY_TRY(transpose_side(ctx->b, ct[0], in[0], ra.rank, la.rank, &rc, &lc, &rbt, &lbt,
                               true, &ct_in[1]));
        ct_in_nz[1] = true;
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- row */

#define FIELD(T, f, k) {.name = #f, .kind = (k), .offset = offsetof(T, f)}

static const oly_param_field dot_general_fields[] = {
    FIELD(oly_params_dot_general, lhs_contracting, OLY_FIELD_INTS),
    FIELD(oly_params_dot_general, rhs_contracting, OLY_FIELD_INTS),
    FIELD(oly_params_dot_general, lhs_batch, OLY_FIELD_INTS),
    FIELD(oly_params_dot_general, rhs_batch, OLY_FIELD_INTS),
};

const oly_prim oly__prim_dot_general = {
    .name = "dot_general", .n_in = 2, .n_out = 1,
    .params_size = sizeof(oly_params_dot_general),
    .fields = dot_general_fields, .n_fields = OLY_ARRAY_LEN(dot_general_fields),
    .shape = dot_general_shape, .kernel = dot_general_kernel,
    .batch = dot_general_batch, .jvp = dot_general_jvp, .transpose = dot_general_transpose,
};

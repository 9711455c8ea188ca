/* sort.c — CPU kernels of sort and top_k (rows in src/prims/sort.c).
 *
 * Both sort a permutation of one line's indices with a stable merge sort
 * (insertion-sorted runs of RUN, then bottom-up merges between two index
 * buffers), comparing the key operands through strided reads, then gather
 * every operand through the permutation. One scratch allocation per call
 * (two index buffers of the line's length); nothing per element.
 *
 * Order (NumPy's): NaNs last; -0.0 == 0.0; complex by (real, imag) with NaNs
 * last in each part; bool as 0 < 1. top_k orders descending by the same
 * order (NaNs first) and keeps lower indices first among ties. */
#include "cpu/cpu.h"

#include <math.h>

typedef int (*cmp_fn)(const char *a, const char *b);

static int cmp_f(double a, double b)
{
    bool na = a != a, nb = b != b;
    if (na || nb) return na - nb; /* NaN after everything; NaNs tie */
    return (a > b) - (a < b);
}

#define INT_CMP(NAME, T)                                                                  \
    static int NAME(const char *a, const char *b)                                         \
    {                                                                                     \
        T x, y;                                                                           \
        memcpy(&x, a, sizeof x);                                                          \
        memcpy(&y, b, sizeof y);                                                          \
        return (x > y) - (x < y);                                                         \
    }
INT_CMP(cmp_u8, uint8_t)
INT_CMP(cmp_i8, int8_t)
INT_CMP(cmp_i16, int16_t)
INT_CMP(cmp_u16, uint16_t)
INT_CMP(cmp_i32, int32_t)
INT_CMP(cmp_u32, uint32_t)
INT_CMP(cmp_i64, int64_t)
INT_CMP(cmp_u64, uint64_t)

static int cmp_f32(const char *a, const char *b)
{
    float x, y;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    return cmp_f(x, y);
}

static int cmp_f64(const char *a, const char *b)
{
    double x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return cmp_f(x, y);
}

static int cmp_f16(const char *a, const char *b)
{
    uint16_t x, y;
    memcpy(&x, a, 2);
    memcpy(&y, b, 2);
    return cmp_f(oly__half_to_float(x), oly__half_to_float(y));
}

static int cmp_bf16(const char *a, const char *b)
{
    uint16_t x, y;
    memcpy(&x, a, 2);
    memcpy(&y, b, 2);
    return cmp_f(oly__bf16_to_float(x), oly__bf16_to_float(y));
}

static int cmp_c64(const char *a, const char *b)
{
    float x[2], y[2];
    memcpy(x, a, 8);
    memcpy(y, b, 8);
    int c = cmp_f(x[0], y[0]);
    return c ? c : cmp_f(x[1], y[1]);
}

static int cmp_c128(const char *a, const char *b)
{
    double x[2], y[2];
    memcpy(x, a, 16);
    memcpy(y, b, 16);
    int c = cmp_f(x[0], y[0]);
    return c ? c : cmp_f(x[1], y[1]);
}

static cmp_fn cmp_of(oly_dtype t)
{
    switch (t) {
    case OLY_BOOL:
    case OLY_UINT8: return cmp_u8;
    case OLY_INT8: return cmp_i8;
    case OLY_INT16: return cmp_i16;
    case OLY_UINT16: return cmp_u16;
    case OLY_INT32: return cmp_i32;
    case OLY_UINT32: return cmp_u32;
    case OLY_INT64: return cmp_i64;
    case OLY_UINT64: return cmp_u64;
    case OLY_FLOAT16: return cmp_f16;
    case OLY_BFLOAT16: return cmp_bf16;
    case OLY_FLOAT32: return cmp_f32;
    case OLY_FLOAT64: return cmp_f64;
    case OLY_COMPLEX64: return cmp_c64;
    case OLY_COMPLEX128: return cmp_c128;
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- one line */

#define MAX_KEYS 64 /* keys compared through the stack table; more use the heap */

/* The keys of one line: key m's element i at base[m] + i * step[m]. */
typedef struct line_keys {
    int nk;
    bool descending;
    const cmp_fn *cmp;   /* borrowed, nk */
    const char **base;   /* borrowed, nk */
    const int64_t *step; /* borrowed, nk: bytes between elements */
} line_keys;

/* <0, 0, >0: element i before, tied with, after element j. */
static inline int compare(const line_keys *k, int64_t i, int64_t j)
{
    if (k->descending) {
        int64_t s = i;
        i = j;
        j = s;
    }
    for (int m = 0; m < k->nk; m++) {
        int c = k->cmp[m](k->base[m] + i * k->step[m], k->base[m] + j * k->step[m]);
        if (c) return c;
    }
    return 0;
}

enum { RUN = 16, RADIX_MIN = 256 /* shorter lines: the merge sort */ };

/* Sorts idx[0..n) (holding 0..n-1) stably; tmp has room for n. Returns the
 * buffer holding the result (idx or tmp). */
static int64_t *sort_line(const line_keys *k, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t s = 0; s < n; s += RUN) { /* insertion-sorted runs */
        int64_t e = s + RUN < n ? s + RUN : n;
        for (int64_t i = s + 1; i < e; i++) {
            int64_t v = idx[i], j = i;
            while (j > s && compare(k, idx[j - 1], v) > 0) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = v;
        }
    }
    int64_t *src = idx, *dst = tmp;
    for (int64_t w = RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            if (mid < hi && compare(k, src[mid - 1], src[mid]) <= 0) { /* already in order */
                memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *dst);
                continue;
            }
            while (a < mid && b < hi) dst[o++] = compare(k, src[b], src[a]) < 0 ? src[b++] : src[a++];
            while (a < mid) dst[o++] = src[a++];
            while (b < hi) dst[o++] = src[b++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* dst[p * step] = src[perm[p] * step] for p < n, elements of es bytes. */
static void gather_line(char *dst, const char *src, const int64_t *perm, int64_t n, int64_t step,
                        size_t es)
{
    switch (es) {
#define G(T)                                                                              \
    for (int64_t p = 0; p < n; p++) memcpy(dst + p * step, src + perm[p] * step, sizeof(T)); \
    break;
    case 1: G(uint8_t)
    case 2: G(uint16_t)
    case 4: G(uint32_t)
    case 8: G(uint64_t)
#undef G
    default:
        for (int64_t p = 0; p < n; p++) memcpy(dst + p * step, src + perm[p] * step, es);
    }
}

/* ---------------------------------------------------------------- radix path */

/* One key operand of a non-complex dtype: each line is sorted by an LSD radix
 * sort (8-bit digits; a pass whose digit never varies is skipped) of
 * order-preserving unsigned keys, carrying the element indices: stable, and
 * linear in n where the merge sort compares through function pointers.
 * Keys: floats by value with NaNs last (all NaNs tie) and -0.0 == 0.0;
 * signed integers with the sign bit flipped. */
static bool radix_dtype(oly_dtype t)
{
    return !oly_dtype_is_complex(t) && (unsigned)t < OLY_DTYPE_COUNT;
}

static uint32_t fkey32(float f)
{
    uint32_t u;
    if (f != f) return UINT32_MAX;
    if (f == 0) f = 0; /* -0.0 == 0.0 */
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static uint64_t fkey64(double f)
{
    uint64_t u;
    if (f != f) return UINT64_MAX;
    if (f == 0) f = 0;
    memcpy(&u, &f, 8);
    return (u & 0x8000000000000000ull) ? ~u : u | 0x8000000000000000ull;
}

static uint64_t radix_key(oly_dtype t, const char *p)
{
    switch (t) {
    case OLY_BOOL:
    case OLY_UINT8: return (uint8_t)*p;
    case OLY_INT8: return (uint8_t)((uint8_t)*p ^ 0x80u);
    case OLY_INT16: { uint16_t v; memcpy(&v, p, 2); return (uint16_t)(v ^ 0x8000u); }
    case OLY_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case OLY_INT32: { uint32_t v; memcpy(&v, p, 4); return v ^ 0x80000000u; }
    case OLY_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case OLY_INT64: { uint64_t v; memcpy(&v, p, 8); return v ^ 0x8000000000000000ull; }
    case OLY_UINT64: { uint64_t v; memcpy(&v, p, 8); return v; }
    case OLY_FLOAT16: { uint16_t v; memcpy(&v, p, 2); return fkey32(oly__half_to_float(v)); }
    case OLY_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); return fkey32(oly__bf16_to_float(v)); }
    case OLY_FLOAT32: { float v; memcpy(&v, p, 4); return fkey32(v); }
    case OLY_FLOAT64: { double v; memcpy(&v, p, 8); return fkey64(v); }
    default: return 0;
    }
}

/* The key bytes of dtype t (f16 / bf16 keys are 32-bit floats). */
static int radix_bytes(oly_dtype t)
{
    return t == OLY_FLOAT16 || t == OLY_BFLOAT16 ? 4 : (int)oly_dtype_size(t);
}

/* perm[0..n) (n < 2^32): the stable order of the line's keys (element i at
 * base + i * step). ka / kb: n keys each; ia / ib: n indices each (scratch). */
static void radix_line(oly_dtype t, const char *base, int64_t step, int64_t n, uint64_t *ka,
                       uint64_t *kb, uint32_t *ia, uint32_t *ib, int64_t *perm)
{
    int passes = radix_bytes(t);
    uint32_t count[8][256];
    memset(count, 0, sizeof count[0] * (size_t)passes);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = radix_key(t, base + i * step);
        ka[i] = k;
        ia[i] = (uint32_t)i;
        for (int p = 0; p < passes; p++) count[p][(k >> (8 * p)) & 0xff]++;
    }
    for (int p = 0; p < passes; p++) {
        if (count[p][(ka[0] >> (8 * p)) & 0xff] == (uint64_t)n) continue; /* one digit */
        uint32_t pos[256], acc = 0;
        for (int d = 0; d < 256; d++) {
            pos[d] = acc;
            acc += count[p][d];
        }
        for (int64_t i = 0; i < n; i++) {
            uint32_t o = pos[(ka[i] >> (8 * p)) & 0xff]++;
            kb[o] = ka[i];
            ib[o] = ia[i];
        }
        uint64_t *tk = ka;
        ka = kb;
        kb = tk;
        uint32_t *ti = ia;
        ia = ib;
        ib = ti;
    }
    for (int64_t i = 0; i < n; i++) perm[i] = ia[i];
}

/* A single operand of at most 4 bytes: the element's bits ride in the low
 * half of its 64-bit sort item (key in the high half), so the passes move
 * one array and the sorted values come out in order, with no permutation
 * to gather through. a, b: n items each. */
static void radix_values(oly_dtype t, const char *src, char *dst, int64_t step, int64_t n,
                         uint64_t *a, uint64_t *b)
{
    size_t es = oly_dtype_size(t);
    int passes = radix_bytes(t);
    uint32_t count[4][256];
    memset(count, 0, sizeof count[0] * (size_t)passes);
    for (int64_t i = 0; i < n; i++) {
        const char *p = src + i * step;
        uint32_t bits = es == 1 ? (uint8_t)*p : 0;
        if (es == 2) { uint16_t v; memcpy(&v, p, 2); bits = v; }
        if (es == 4) memcpy(&bits, p, 4);
        uint64_t k = radix_key(t, p);
        a[i] = k << 32 | bits;
        for (int q = 0; q < passes; q++) count[q][(k >> (8 * q)) & 0xff]++;
    }
    for (int q = 0; q < passes; q++) {
        int shift = 32 + 8 * q;
        if (count[q][(a[0] >> shift) & 0xff] == (uint64_t)n) continue; /* one digit */
        uint32_t pos[256], acc = 0;
        for (int d = 0; d < 256; d++) {
            pos[d] = acc;
            acc += count[q][d];
        }
        for (int64_t i = 0; i < n; i++) b[pos[(a[i] >> shift) & 0xff]++] = a[i];
        uint64_t *t2 = a;
        a = b;
        b = t2;
    }
    for (int64_t i = 0; i < n; i++) {
        char *p = dst + i * step;
        uint32_t bits = (uint32_t)a[i];
        if (es == 1) *p = (char)(uint8_t)bits;
        else if (es == 2) { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); }
        else memcpy(p, &bits, 4);
    }
}

static void split_axis(const oly_aval *x, int64_t axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int64_t d = 0; d < axis; d++) *outer *= x->dims[d];
    *n = x->dims[axis];
    for (int64_t d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
}

/* ---------------------------------------------------------------- sort */

static oly_status sort_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_sort *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    int n_ops = ctx->n_in, nk = (int)p->num_keys;
    int64_t axis = p->dimension < 0 ? p->dimension + x->rank : p->dimension;
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    if (outer * n * inner == 0) return OLY_OK;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lines = outer * inner;
    int64_t lo = lines * ctx->ith / nth, hi = lines * (ctx->ith + 1) / nth;

    cmp_fn cmp_small[MAX_KEYS];
    const char *base_small[MAX_KEYS];
    int64_t step_small[MAX_KEYS];
    size_t keys_bytes = nk > MAX_KEYS ? (size_t)nk * (sizeof(cmp_fn) + sizeof(char *) + sizeof(int64_t)) : 0;
    char *mem = oly__malloc(2 * (size_t)n * sizeof(int64_t) + keys_bytes);
    if (!mem)
        return oly__error(OLY_ERR_NOMEM, "sort: out of memory for the permutation of %lld elements",
                          (long long)n);
    int64_t *idx = (int64_t *)mem, *tmp = idx + n;
    cmp_fn *cmp = cmp_small;
    const char **base = base_small;
    int64_t *step = step_small;
    if (keys_bytes) {
        step = tmp + n;
        cmp = (cmp_fn *)(step + nk);
        base = (const char **)(cmp + nk);
    }
    for (int m = 0; m < nk; m++) {
        cmp[m] = cmp_of(ctx->in_aval[m].dtype);
        step[m] = inner * (int64_t)oly_dtype_size(ctx->in_aval[m].dtype);
    }
    line_keys k = {.nk = nk, .cmp = cmp, .base = base, .step = step};
    /* the radix path's scratch: keys and indices, twice each */
    bool radix = nk == 1 && radix_dtype(ctx->in_aval[0].dtype) && n >= RADIX_MIN &&
                 n <= (int64_t)UINT32_MAX;
    uint64_t *keys = radix ? oly__malloc(2 * (size_t)n * (sizeof(uint64_t) + sizeof(uint32_t)))
                           : NULL;
    if (radix && !keys) {
        free(mem);
        return oly__error(OLY_ERR_NOMEM, "sort: out of memory for the keys of %lld elements",
                          (long long)n);
    }
    uint32_t *ids = radix ? (uint32_t *)(keys + 2 * n) : NULL;
    for (int64_t l = lo; l < hi; l++) {
        int64_t o = l / inner, j = l % inner, first = o * n * inner + j; /* element index */
        for (int m = 0; m < nk; m++)
            base[m] = (const char *)ctx->in[m] + first * (int64_t)oly_dtype_size(ctx->in_aval[m].dtype);
        const int64_t *perm = idx;
        size_t es0 = oly_dtype_size(ctx->in_aval[0].dtype);
        if (radix && n_ops == 1 && es0 <= 4) {
            radix_values(ctx->in_aval[0].dtype, base[0], (char *)ctx->out[0] + first * (int64_t)es0,
                         step[0], n, keys, keys + n);
            continue;
        }
        if (radix) {
            radix_line(ctx->in_aval[0].dtype, base[0], step[0], n, keys, keys + n, ids, ids + n,
                       idx);
        } else {
            for (int64_t i = 0; i < n; i++) idx[i] = i;
            perm = sort_line(&k, idx, tmp, n);
        }
        for (int m = 0; m < n_ops; m++) {
            size_t es = oly_dtype_size(ctx->in_aval[m].dtype);
            gather_line((char *)ctx->out[m] + first * (int64_t)es,
                        (const char *)ctx->in[m] + first * (int64_t)es, perm, n,
                        inner * (int64_t)es, es);
        }
    }
    free(keys);
    free(mem);
    return OLY_OK;
}

/* ---------------------------------------------------------------- top_k */

static oly_status top_k_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_top_k *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    int64_t n = x->dims[x->rank - 1], kk = p->k, rows = 1;
    for (int d = 0; d < x->rank - 1; d++) rows *= x->dims[d];
    if (rows * kk == 0) return OLY_OK;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = rows * ctx->ith / nth, hi = rows * (ctx->ith + 1) / nth;
    size_t es = oly_dtype_size(x->dtype);
    int64_t *idx = oly__malloc(2 * (size_t)n * sizeof(int64_t));
    if (!idx)
        return oly__error(OLY_ERR_NOMEM, "top_k: out of memory for the permutation of %lld elements",
                          (long long)n);
    cmp_fn cmp = cmp_of(x->dtype);
    const char *base = NULL;
    int64_t step = (int64_t)es;
    line_keys k = {.nk = 1, .descending = true, .cmp = &cmp, .base = &base, .step = &step};
    for (int64_t r = lo; r < hi; r++) {
        base = (const char *)ctx->in[0] + r * n * (int64_t)es;
        for (int64_t i = 0; i < n; i++) idx[i] = i;
        const int64_t *perm = sort_line(&k, idx, idx + n, n);
        gather_line((char *)ctx->out[0] + r * kk * (int64_t)es, base, perm, kk, (int64_t)es, es);
        int32_t *oi = (int32_t *)ctx->out[1] + r * kk;
        for (int64_t i = 0; i < kk; i++) oi[i] = (int32_t)perm[i];
    }
    free(idx);
    return OLY_OK;
}

const oly_cpu_kernel oly__cpu_sort = {.fn = sort_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_top_k = {.fn = top_k_kernel, .splits = true};

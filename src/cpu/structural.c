/* structural.c — kernels of the structural primitives (broadcast_in_dim,
 * reshape, transpose, squeeze, expand_dims, rev, slice, dynamic_slice,
 * dynamic_update_slice, concatenate, pad, iota, copy). They only need the
 * element size, so every dtype works; most are one "copy plan": an output box
 * walked with byte strides into the source (0 = broadcast, negative =
 * reversed), simplified by dropping unit dims and merging contiguous ones so
 * the innermost run is a memcpy whenever the layout allows. */
#include "cpu/cpu.h"

/* ---------------------------------------------------------------- helpers */

/* Row-major strides in elements. */
static void strides_of(const oly_aval *a, int64_t *s)
{
    int64_t acc = 1;
    for (int i = a->rank - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= a->dims[i];
    }
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---------------------------------------------------------------- copy plans */

typedef struct copy_plan {
    int rank;
    int64_t dims[OLY_MAX_RANK];
    int64_t dst[OLY_MAX_RANK]; /* byte strides */
    int64_t src[OLY_MAX_RANK];
} copy_plan;

/* Drops unit dims and merges a dim into its outer neighbour when both sides are
 * contiguous across the pair. */
static void plan_simplify(copy_plan *p)
{
    int w = 0;
    for (int d = 0; d < p->rank; d++) {
        if (p->dims[d] == 1) continue;
        if (w > 0 && p->dst[w - 1] == p->dst[d] * p->dims[d] &&
            p->src[w - 1] == p->src[d] * p->dims[d]) {
            p->dims[w - 1] *= p->dims[d];
            p->dst[w - 1] = p->dst[d];
            p->src[w - 1] = p->src[d];
            continue;
        }
        p->dims[w] = p->dims[d];
        p->dst[w] = p->dst[d];
        p->src[w] = p->src[d];
        w++;
    }
    p->rank = w;
}

#define RUN_LOOP(ES)                                                                      \
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, ES);               \
    break

void oly__copy_run(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, size_t es)
{
    if (ds == (int64_t)es && ss == (int64_t)es) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    switch (es) {
    case 1: RUN_LOOP(1);
    case 2: RUN_LOOP(2);
    case 4: RUN_LOOP(4);
    case 8: RUN_LOOP(8);
    case 16: RUN_LOOP(16);
    default: RUN_LOOP(es);
    }
}

enum { TILE = 32 };

/* Tiled copy for transposes: dim c is contiguous in the source, the innermost
 * dim in the destination; walking TILE x TILE blocks keeps both in cache. */
static void plan_run_tiled(const copy_plan *p, int c, char *dst, const char *src, size_t es,
                           int ith, int nth)
{
    int inner = p->rank - 1, od[OLY_MAX_RANK], q = 0;
    for (int d = 0; d < inner; d++)
        if (d != c) od[q++] = d;
    int64_t ntc = (p->dims[c] + TILE - 1) / TILE, nother = 1;
    for (int k = 0; k < q; k++) nother *= p->dims[od[k]];
    int64_t total = nother * ntc, lo = total * ith / nth, hi = total * (ith + 1) / nth;
    for (int64_t it = lo; it < hi; it++) {
        int64_t rem = it / ntc, i0 = (it % ntc) * TILE, doff = 0, soff = 0;
        for (int k = q - 1; k >= 0; k--) {
            int d = od[k];
            int64_t ix = rem % p->dims[d];
            rem /= p->dims[d];
            doff += ix * p->dst[d];
            soff += ix * p->src[d];
        }
        int64_t ni = p->dims[c] - i0 < TILE ? p->dims[c] - i0 : TILE;
        doff += i0 * p->dst[c];
        soff += i0 * p->src[c];
        for (int64_t j0 = 0; j0 < p->dims[inner]; j0 += TILE) {
            int64_t nj = p->dims[inner] - j0 < TILE ? p->dims[inner] - j0 : TILE;
            for (int64_t i = 0; i < ni; i++)
                oly__copy_run(dst + doff + i * p->dst[c] + j0 * p->dst[inner], p->dst[inner],
                         src + soff + i * p->src[c] + j0 * p->src[inner], p->src[inner], nj, es);
        }
    }
}

/* Executes the plan: this thread's share of the outer iterations. */
static void plan_run(copy_plan p, char *dst, const char *src, size_t es, int ith, int nth)
{
    for (int d = 0; d < p.rank; d++)
        if (p.dims[d] == 0) return;
    plan_simplify(&p);
    if (nth < 1) nth = 1;
    if (p.rank == 0) {
        if (ith == 0) memcpy(dst, src, es);
        return;
    }
    int inner = p.rank - 1;
    int64_t ses = (int64_t)es;
    if (p.rank >= 2 && p.src[inner] != ses && p.src[inner] != 0 && p.dims[inner] >= TILE / 4) {
        for (int c = inner - 1; c >= 0; c--)
            if (p.src[c] == ses || p.src[c] == -ses) {
                plan_run_tiled(&p, c, dst, src, es, ith, nth);
                return;
            }
    }
    int64_t n_outer = 1;
    for (int d = 0; d < inner; d++) n_outer *= p.dims[d];
    if (n_outer == 1) { /* one run: split it */
        int64_t n = p.dims[inner], lo = n * ith / nth, hi = n * (ith + 1) / nth;
        oly__copy_run(dst + lo * p.dst[inner], p.dst[inner], src + lo * p.src[inner], p.src[inner],
                 hi - lo, es);
        return;
    }
    int64_t lo = n_outer * ith / nth, hi = n_outer * (ith + 1) / nth;
    int64_t idx[OLY_MAX_RANK] = {0};
    int64_t doff = 0, soff = 0, rem = lo;
    for (int d = inner - 1; d >= 0; d--) {
        idx[d] = rem % p.dims[d];
        rem /= p.dims[d];
        doff += idx[d] * p.dst[d];
        soff += idx[d] * p.src[d];
    }
    for (int64_t it = lo; it < hi; it++) {
        oly__copy_run(dst + doff, p.dst[inner], src + soff, p.src[inner], p.dims[inner], es);
        for (int d = inner - 1; d >= 0; d--) {
            doff += p.dst[d];
            soff += p.src[d];
            if (++idx[d] < p.dims[d]) break;
            doff -= p.dst[d] * p.dims[d];
            soff -= p.src[d] * p.dims[d];
            idx[d] = 0;
        }
    }
}

/* A plan writing a dense output of aval out (byte strides filled for dst). */
static void plan_dense_dst(copy_plan *p, const oly_aval *out, size_t es)
{
    int64_t s[OLY_MAX_RANK];
    strides_of(out, s);
    p->rank = out->rank;
    for (int d = 0; d < out->rank; d++) {
        p->dims[d] = out->dims[d];
        p->dst[d] = s[d] * (int64_t)es;
        p->src[d] = 0;
    }
}

/* Copies the whole input 0 to output 0 (same byte size): thread share of a memcpy. */
static oly_status kernel_memcpy(const oly_kernel_ctx *ctx)
{
    size_t n = oly_aval_nbytes(&ctx->out_aval[0]);
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    size_t lo = n * (size_t)ctx->ith / (size_t)nth, hi = n * (size_t)(ctx->ith + 1) / (size_t)nth;
    char *dst = ctx->out[0];
    const char *src = ctx->in[0];
    if (dst != src && hi > lo) memcpy(dst + lo, src + lo, hi - lo);
    return OLY_OK;
}

static oly_status broadcast_in_dim_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_broadcast_in_dim *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    copy_plan plan;
    plan_dense_dst(&plan, &ctx->out_aval[0], es);
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    for (int i = 0; i < x->rank; i++)
        if (x->dims[i] != 1) plan.src[p->broadcast_dimensions.v[i]] = s[i] * (int64_t)es;
    plan_run(plan, ctx->out[0], ctx->in[0], es, ctx->ith, ctx->nth);
    return OLY_OK;
}

static oly_status transpose_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_transpose *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    copy_plan plan;
    plan_dense_dst(&plan, &ctx->out_aval[0], es);
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    for (int i = 0; i < x->rank; i++) plan.src[i] = s[p->permutation.v[i]] * (int64_t)es;
    plan_run(plan, ctx->out[0], ctx->in[0], es, ctx->ith, ctx->nth);
    return OLY_OK;
}

static oly_status rev_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_dims *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    copy_plan plan;
    plan_dense_dst(&plan, &ctx->out_aval[0], es);
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    bool rev[OLY_MAX_RANK] = {false};
    for (int i = 0; i < p->dimensions.n; i++) {
        int64_t a = p->dimensions.v[i];
        rev[a < 0 ? a + x->rank : a] = true;
    }
    const char *src = ctx->in[0];
    for (int i = 0; i < x->rank; i++) {
        plan.src[i] = s[i] * (int64_t)es;
        if (rev[i] && x->dims[i] > 0) {
            src += (x->dims[i] - 1) * plan.src[i];
            plan.src[i] = -plan.src[i];
        }
    }
    plan_run(plan, ctx->out[0], src, es, ctx->ith, ctx->nth);
    return OLY_OK;
}

static oly_status slice_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_slice *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    copy_plan plan;
    plan_dense_dst(&plan, &ctx->out_aval[0], es);
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    const char *src = ctx->in[0];
    for (int i = 0; i < x->rank; i++) {
        int64_t st = p->strides.n ? p->strides.v[i] : 1;
        src += p->start_indices.v[i] * s[i] * (int64_t)es;
        /* a stride past the end only matters when a second element exists */
        plan.src[i] = plan.dims[i] > 1 ? st * s[i] * (int64_t)es : 0;
    }
    plan_run(plan, ctx->out[0], src, es, ctx->ith, ctx->nth);
    return OLY_OK;
}

static oly_status dynamic_slice_kernel(const oly_kernel_ctx *ctx)
{
    const oly_aval *x = &ctx->in_aval[0];
    const oly_aval *o = &ctx->out_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    copy_plan plan;
    plan_dense_dst(&plan, o, es);
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    const char *src = ctx->in[0];
    for (int i = 0; i < x->rank; i++) {
        int64_t start = oly__read_index(ctx->in_aval[1 + i].dtype, ctx->in[1 + i]);
        start = clamp64(start, 0, x->dims[i] - o->dims[i]);
        src += start * s[i] * (int64_t)es;
        plan.src[i] = s[i] * (int64_t)es;
    }
    plan_run(plan, ctx->out[0], src, es, ctx->ith, ctx->nth);
    return OLY_OK;
}

static oly_status dynamic_update_slice_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK; /* two ordered phases: one thread */
    const oly_aval *x = &ctx->in_aval[0], *u = &ctx->in_aval[1];
    size_t es = oly_dtype_size(x->dtype);
    char *dst = ctx->out[0];
    if ((const void *)dst != ctx->in[0]) memcpy(dst, ctx->in[0], oly_aval_nbytes(x));
    copy_plan plan;
    plan_dense_dst(&plan, u, es); /* walk the update densely: swap roles below */
    int64_t s[OLY_MAX_RANK];
    strides_of(x, s);
    for (int i = 0; i < x->rank; i++) {
        int64_t start = oly__read_index(ctx->in_aval[2 + i].dtype, ctx->in[2 + i]);
        start = clamp64(start, 0, x->dims[i] - u->dims[i]);
        dst += start * s[i] * (int64_t)es;
        plan.src[i] = plan.dst[i];             /* update: dense */
        plan.dst[i] = s[i] * (int64_t)es;      /* operand-shaped output */
    }
    plan_run(plan, dst, ctx->in[1], es, 0, 1);
    return OLY_OK;
}

static oly_status concatenate_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_concatenate *p = ctx->params;
    const oly_aval *o = &ctx->out_aval[0];
    int64_t axis = p->dimension < 0 ? p->dimension + o->rank : p->dimension;
    size_t es = oly_dtype_size(o->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= o->dims[i];
    for (int i = (int)axis + 1; i < o->rank; i++) inner *= o->dims[i];
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = outer * ctx->ith / nth, hi = outer * (ctx->ith + 1) / nth;
    size_t row = (size_t)(o->dims[axis] * inner) * es;
    for (int64_t r = lo; r < hi; r++) {
        char *dst = (char *)ctx->out[0] + (size_t)r * row;
        for (int k = 0; k < ctx->n_in; k++) {
            size_t n = (size_t)(ctx->in_aval[k].dims[axis] * inner) * es;
            if (n) memcpy(dst, (const char *)ctx->in[k] + (size_t)r * n, n);
            dst += n;
        }
    }
    return OLY_OK;
}

static oly_status pad_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK; /* fill, then place: one thread */
    const oly_params_pad *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *o = &ctx->out_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    int64_t total = oly_aval_size(o);
    char *dst = ctx->out[0];
    if (total == 0) return OLY_OK;
    /* fill by doubling copies of the padding value */
    memcpy(dst, ctx->in[1], es);
    for (int64_t done = 1; done < total;) {
        int64_t n = done < total - done ? done : total - done;
        memcpy(dst + done * (int64_t)es, dst, (size_t)n * es);
        done += n;
    }
    int64_t xs[OLY_MAX_RANK], os[OLY_MAX_RANK];
    strides_of(x, xs);
    strides_of(o, os);
    copy_plan plan;
    plan.rank = x->rank;
    const char *src = ctx->in[0];
    for (int i = 0; i < x->rank; i++) {
        int64_t in = p->interior.v[i], lo = p->lo.v[i], n = x->dims[i];
        int64_t step = in < INT64_MAX ? in + 1 : INT64_MAX; /* saturated: n <= 1 there */
        /* operand indices j with 0 <= lo + j*step < o->dims[i] */
        int64_t first = lo >= 0 ? 0 : -(lo + 1) / step + 1; /* ceil(-lo / step) */
        int64_t span; /* o->dims[i] - 1 - lo, saturated */
        if (__builtin_sub_overflow(o->dims[i] - 1, lo, &span)) span = INT64_MAX;
        int64_t last = span < 0 ? -1 : span / step;
        if (last > n - 1) last = n - 1;
        if (last < first) return OLY_OK; /* nothing of the operand survives */
        plan.dims[i] = last - first + 1;
        src += first * xs[i] * (int64_t)es;
        dst += (lo + first * step) * os[i] * (int64_t)es;
        plan.src[i] = xs[i] * (int64_t)es;
        plan.dst[i] = plan.dims[i] > 1 ? step * os[i] * (int64_t)es : 0;
    }
    plan_run(plan, dst, src, es, 0, 1);
    return OLY_OK;
}

/* One outer block of iota for the plain integer and f32/f64 dtypes: row k of
 * `inner` elements holds (T)k (what oly_scalar_store gives: integers wrap,
 * floats round once). false for the other dtypes. */
static bool iota_typed(oly_dtype t, char *dst, int64_t n, int64_t inner)
{
#define IOTA_ROWS(T)                                                                      \
    do {                                                                                  \
        T *d = (T *)dst;                                                                  \
        if (inner == 1) {                                                                 \
            for (int64_t k = 0; k < n; k++) d[k] = (T)k;                                  \
        } else {                                                                          \
            for (int64_t k = 0; k < n; k++)                                               \
                for (int64_t j = 0; j < inner; j++) d[k * inner + j] = (T)k;              \
        }                                                                                 \
    } while (0);                                                                          \
    return true
    switch (t) {
    case OLY_INT8: IOTA_ROWS(int8_t);
    case OLY_UINT8: IOTA_ROWS(uint8_t);
    case OLY_INT16: IOTA_ROWS(int16_t);
    case OLY_UINT16: IOTA_ROWS(uint16_t);
    case OLY_INT32: IOTA_ROWS(int32_t);
    case OLY_UINT32: IOTA_ROWS(uint32_t);
    case OLY_INT64: IOTA_ROWS(int64_t);
    case OLY_UINT64: IOTA_ROWS(uint64_t);
    case OLY_FLOAT32: IOTA_ROWS(float);
    case OLY_FLOAT64: IOTA_ROWS(double);
    default: return false;
    }
#undef IOTA_ROWS
}

static oly_status iota_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_iota *p = ctx->params;
    const oly_aval *o = &ctx->out_aval[0];
    int64_t axis = p->dimension < 0 ? p->dimension + o->rank : p->dimension;
    size_t es = oly_dtype_size(o->dtype);
    int64_t outer = 1, inner = 1, n = o->dims[axis];
    for (int i = 0; i < axis; i++) outer *= o->dims[i];
    for (int i = (int)axis + 1; i < o->rank; i++) inner *= o->dims[i];
    if (outer * n * inner == 0) return OLY_OK;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = outer * ctx->ith / nth, hi = outer * (ctx->ith + 1) / nth;
    char *out = ctx->out[0];
    size_t block = (size_t)(n * inner) * es;
    for (int64_t r = lo; r < hi; r++) {
        char *dst = out + (size_t)r * block;
        if (r > lo) { /* every outer block is the same: copy the first */
            memcpy(dst, out + (size_t)lo * block, block);
            continue;
        }
        if (iota_typed(o->dtype, dst, n, inner)) continue;
        for (int64_t k = 0; k < n; k++) {
            char *row = dst + (size_t)(k * inner) * es;
            oly_scalar s = {.dtype = OLY_INT64, .weak = false, .v.i = k};
            oly_scalar_store(&s, o->dtype, row);
            for (int64_t done = 1; done < inner;) {
                int64_t m = done < inner - done ? done : inner - done;
                memcpy(row + done * (int64_t)es, row, (size_t)m * es);
                done += m;
            }
        }
    }
    return OLY_OK;
}

/* The layout-only rows may write over their dying input (inplace_ok). */
const oly_cpu_kernel oly__cpu_broadcast_in_dim = {.fn = broadcast_in_dim_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_reshape = {.fn = kernel_memcpy, .inplace_ok = true, .splits = true};
const oly_cpu_kernel oly__cpu_transpose = {.fn = transpose_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_squeeze = {.fn = kernel_memcpy, .inplace_ok = true, .splits = true};
const oly_cpu_kernel oly__cpu_expand_dims = {.fn = kernel_memcpy, .inplace_ok = true, .splits = true};
const oly_cpu_kernel oly__cpu_rev = {.fn = rev_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_slice = {.fn = slice_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_dynamic_slice = {.fn = dynamic_slice_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_dynamic_update_slice = {.fn = dynamic_update_slice_kernel};
const oly_cpu_kernel oly__cpu_concatenate = {.fn = concatenate_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_pad = {.fn = pad_kernel};
const oly_cpu_kernel oly__cpu_iota = {.fn = iota_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_copy = {.fn = kernel_memcpy, .splits = true};

/* gather.c — CPU kernels of gather and the scatter rows (rows in
 * src/prims/gather.c).
 *
 * Both walk the index batch (every index vector) and, for each, one window:
 * a box of operand elements at the vector's start, with its dims of size > 1
 * merged where contiguous, so the innermost run is a memcpy whenever the
 * layout allows (a row gather copies whole rows). gather splits the batch by
 * ith / nth; the scatters run on one thread, in index order, so that for
 * `scatter` the last update of an element wins, as on XLA's CPU backend.
 *
 * Out of bounds (a window that does not fit at its start): clip clamps the
 * start; fill_or_drop reads the fill value (gather) or skips the update
 * (scatter); promise_in_bounds clamps (gather) and skips (scatter), so no
 * index ever reads or writes outside the operand. */
#include "cpu/cpu.h"

#include <math.h>

typedef struct gs_plan {
    int rank;                      /* the operand's */
    int64_t dims[OLY_MAX_RANK], window[OLY_MAX_RANK];
    int64_t xs[OLY_MAX_RANK];      /* operand byte strides */
    int k;                         /* index vector length */
    int64_t map[OLY_MAX_RANK];     /* operand dim of index vector element i */
    int nb;                        /* batching dim pairs */
    int64_t obatch[OLY_MAX_RANK], ibatch[OLY_MAX_RANK];
    int brank;                     /* index batch dims: the indices' dims but the last */
    int64_t bdims[OLY_MAX_RANK];
    int64_t bos[OLY_MAX_RANK];     /* byte stride of batch dim j in the other array */
    int64_t n_batch;
    oly_dtype it;                  /* index dtype */
    int64_t ies;                   /* its size */
    bool empty;                    /* some window dim has size 0 */
    int wr;                        /* the window walk: dims of size > 1, merged */
    int64_t wd[OLY_MAX_RANK], wx[OLY_MAX_RANK], wo[OLY_MAX_RANK];
    size_t es;
} gs_plan;

static bool has(const oly_ints *v, int64_t x)
{
    for (int i = 0; i < v->n; i++)
        if (v->v[i] == x) return true;
    return false;
}

static void byte_strides(const oly_aval *a, size_t es, int64_t *s)
{
    int64_t acc = (int64_t)es;
    for (int d = a->rank - 1; d >= 0; d--) {
        s[d] = acc;
        acc *= a->dims[d];
    }
}

/* The plan for operand x, indices ix and the other array o (gather's output,
 * scatter's updates) whose dims window_pos hold the window; slice_sizes (NULL
 * for scatter: o's window dims) gives the window of each operand dim. */
static void plan_build(gs_plan *p, const oly_aval *x, const oly_aval *ix, const oly_aval *o,
                       const oly_ints *window_pos, const oly_ints *collapsed, const oly_ints *map,
                       const oly_ints *obatch, const oly_ints *ibatch, const oly_ints *slice_sizes)
{
    memset(p, 0, sizeof *p);
    p->es = oly_dtype_size(x->dtype);
    p->rank = x->rank;
    byte_strides(x, p->es, p->xs);
    int64_t os[OLY_MAX_RANK], wos[OLY_MAX_RANK] = {0};
    byte_strides(o, p->es, os);
    for (int d = 0, j = 0; d < x->rank; d++) {
        p->dims[d] = x->dims[d];
        if (has(collapsed, d) || has(obatch, d)) {
            p->window[d] = 1;
            continue;
        }
        int64_t pos = window_pos->v[j++];
        p->window[d] = slice_sizes ? slice_sizes->v[d] : o->dims[pos];
        wos[d] = os[pos];
        if (p->window[d] == 0) p->empty = true;
    }
    p->k = map->n;
    for (int i = 0; i < map->n; i++) p->map[i] = map->v[i];
    p->nb = obatch->n;
    for (int i = 0; i < obatch->n; i++) {
        p->obatch[i] = obatch->v[i];
        p->ibatch[i] = ibatch->v[i];
    }
    p->brank = ix->rank - 1;
    p->n_batch = 1;
    for (int j = 0, pos = 0; j < p->brank; j++, pos++) {
        while (has(window_pos, pos)) pos++;
        p->bdims[j] = ix->dims[j];
        p->bos[j] = os[pos];
        p->n_batch *= ix->dims[j];
    }
    p->it = ix->dtype;
    p->ies = (int64_t)oly_dtype_size(ix->dtype);
    for (int d = 0; d < x->rank; d++) {
        if (p->window[d] <= 1) continue;
        int w = p->wr;
        if (w > 0 && p->wx[w - 1] == p->xs[d] * p->window[d] &&
            p->wo[w - 1] == wos[d] * p->window[d]) {
            p->wd[w - 1] *= p->window[d];
            p->wx[w - 1] = p->xs[d];
            p->wo[w - 1] = wos[d];
            continue;
        }
        p->wd[w] = p->window[d];
        p->wx[w] = p->xs[d];
        p->wo[w] = wos[d];
        p->wr++;
    }
}

/* The byte offset in the operand of the window of index vector row (batch
 * coordinates c); -1 when it does not fit and the mode does not clamp. */
static int64_t window_start(const gs_plan *p, const char *row, const int64_t *c, bool clamp)
{
    int64_t off = 0;
    for (int i = 0; i < p->k; i++) {
        int64_t d = p->map[i], v = oly__read_index(p->it, row + i * p->ies);
        int64_t hi = p->dims[d] - p->window[d];
        if (v < 0 || v > hi) {
            if (!clamp) return -1;
            v = v < 0 ? 0 : hi;
        }
        off += v * p->xs[d];
    }
    for (int i = 0; i < p->nb; i++) off += c[p->ibatch[i]] * p->xs[p->obatch[i]];
    return off;
}

/* Applies f to every innermost run of the window: a walks with strides as,
 * b with bs (byte strides per window-walk dim). */
typedef void (*run_fn)(char *a, int64_t as, const char *b, int64_t bs, int64_t n,
                       const void *arg);

static void walk_window(const gs_plan *p, char *a, const int64_t *as, const char *b,
                        const int64_t *bs, run_fn f, const void *arg)
{
    if (p->wr == 0) {
        f(a, 0, b, 0, 1, arg);
        return;
    }
    int in = p->wr - 1;
    int64_t idx[OLY_MAX_RANK] = {0};
    for (;;) {
        f(a, as[in], b, bs[in], p->wd[in], arg);
        int d = in - 1;
        for (; d >= 0; d--) {
            a += as[d];
            b += bs[d];
            if (++idx[d] < p->wd[d]) break;
            a -= as[d] * p->wd[d];
            b -= bs[d] * p->wd[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

/* Batch coordinates of flat batch position i, and its byte offset in the other array. */
static int64_t batch_coords(const gs_plan *p, int64_t i, int64_t *c)
{
    int64_t off = 0;
    for (int j = p->brank - 1; j >= 0; j--) {
        c[j] = i % p->bdims[j];
        i /= p->bdims[j];
        off += c[j] * p->bos[j];
    }
    return off;
}

/* Steps c to the next batch position; returns the change of the other array's offset. */
static int64_t batch_next(const gs_plan *p, int64_t *c)
{
    int64_t delta = 0;
    for (int j = p->brank - 1; j >= 0; j--) {
        delta += p->bos[j];
        if (++c[j] < p->bdims[j]) break;
        delta -= p->bos[j] * p->bdims[j];
        c[j] = 0;
    }
    return delta;
}

/* ---------------------------------------------------------------- gather */

static void copy_run(char *a, int64_t as, const char *b, int64_t bs, int64_t n, const void *arg)
{
    oly__copy_run(a, as, b, bs, n, *(const size_t *)arg);
}

/* The fill element of dtype t: fill_value (saturated for integers), or for
 * NaN the dtype's default: NaN, the most negative signed or the largest
 * unsigned integer, true. */
static void fill_element(oly_dtype t, double v, void *dst)
{
    oly_scalar s = {.dtype = OLY_FLOAT64, .v.f = v};
    int bits = (int)oly_dtype_size(t) * 8;
    if (oly_dtype_is_bool(t)) {
        s = (oly_scalar){.dtype = OLY_BOOL, .v.u = isnan(v) || v != 0};
    } else if (oly_dtype_is_signed_int(t)) {
        double lo = -ldexp(1, bits - 1), hi = -lo - 1;
        double w = isnan(v) ? lo : v < lo ? lo : v > hi ? hi : v;
        s = (oly_scalar){.dtype = OLY_INT64, .v.i = (int64_t)w};
    } else if (oly_dtype_is_unsigned_int(t)) {
        double hi = ldexp(1, bits) - 1;
        /* 2^64 - 1 is not a double: the largest uint64 directly */
        uint64_t w = isnan(v) || v >= hi ? (bits == 64 ? UINT64_MAX : (uint64_t)hi)
                     : v < 0          ? 0
                                      : (uint64_t)v;
        s = (oly_scalar){.dtype = OLY_UINT64, .v.u = w};
    } else if (oly_dtype_is_complex(t)) {
        s = (oly_scalar){.dtype = OLY_COMPLEX128, .v.c = {v, isnan(v) ? v : 0}};
    }
    oly_scalar_store(&s, t, dst);
}

/* The common element gather (x[i] for an index array i): one-element windows,
 * one int32 / int64 index per element, no batching dims. Its output is the
 * index batch, dense. */
#define ELEMENT_LOOP(IT, ES)                                                              \
    for (int64_t i = lo; i < hi; i++) {                                                   \
        int64_t v = ((const IT *)rows)[i];                                                \
        const char *src;                                                                  \
        if ((uint64_t)v <= (uint64_t)top) src = xs + v * step;                            \
        else if (clamp) src = xs + (v < 0 ? 0 : top) * step;                              \
        else src = (const char *)fill;                                                    \
        memcpy(out + i * (ES), src, ES);                                                  \
    }                                                                                     \
    return

static void gather_elements(const gs_plan *p, char *out, const char *xs, const char *rows,
                            const unsigned char *fill, bool clamp, int64_t lo, int64_t hi)
{
    int64_t d = p->map[0], top = p->dims[d] - 1, step = p->xs[d];
    size_t es = p->es;
    if (p->it == OLY_INT32) {
        switch (es) {
        case 4: ELEMENT_LOOP(int32_t, 4);
        case 8: ELEMENT_LOOP(int32_t, 8);
        default: ELEMENT_LOOP(int32_t, es);
        }
    }
    switch (es) {
    case 4: ELEMENT_LOOP(int64_t, 4);
    case 8: ELEMENT_LOOP(int64_t, 8);
    default: ELEMENT_LOOP(int64_t, es);
    }
}

static oly_status gather_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_gather *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *ix = &ctx->in_aval[1], *o = &ctx->out_aval[0];
    gs_plan plan;
    plan_build(&plan, x, ix, o, &p->offset_dims, &p->collapsed_slice_dims, &p->start_index_map,
               &p->operand_batching_dims, &p->start_indices_batching_dims, &p->slice_sizes);
    if (plan.empty || plan.n_batch == 0) return OLY_OK;
    unsigned char fill[16];
    fill_element(x->dtype, p->fill_value, fill);
    int64_t zero[OLY_MAX_RANK] = {0};
    bool clamp = p->mode != OLY_GATHER_FILL_OR_DROP;
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = plan.n_batch * ctx->ith / nth, hi = plan.n_batch * (ctx->ith + 1) / nth;
    const char *xs = ctx->in[0], *rows = ctx->in[1];
    char *out = ctx->out[0];
    if (plan.wr == 0 && plan.k == 1 && plan.nb == 0 &&
        (plan.it == OLY_INT32 || plan.it == OLY_INT64)) {
        gather_elements(&plan, out, xs, rows, fill, clamp, lo, hi);
        return OLY_OK;
    }
    int64_t c[OLY_MAX_RANK];
    int64_t ooff = batch_coords(&plan, lo, c);
    for (int64_t i = lo; i < hi; i++) {
        int64_t xoff = window_start(&plan, rows + i * plan.k * plan.ies, c, clamp);
        if (xoff >= 0)
            walk_window(&plan, out + ooff, plan.wo, xs + xoff, plan.wx, copy_run, &plan.es);
        else
            walk_window(&plan, out + ooff, plan.wo, (const char *)fill, zero, copy_run, &plan.es);
        ooff += batch_next(&plan, c);
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- scatter */

typedef enum { SET, ADD, MUL, MIN, MAX } combine_op;
typedef struct combine { combine_op op; oly_dtype t; } combine;

/* Integers wrap (through an unsigned type U at least as wide as int); bool
 * adds as or, multiplies as and. */
#define INT_COMBINE(T, U)                                                                 \
    for (int64_t i = 0; i < n; i++, a += as, b += bs) {                                   \
        T u, v;                                                                           \
        memcpy(&u, a, sizeof u);                                                          \
        memcpy(&v, b, sizeof v);                                                          \
        switch (op) {                                                                     \
        case ADD: u = (T)((U)u + (U)v); break;                                            \
        case MUL: u = (T)((U)u * (U)v); break;                                            \
        case MIN: u = v < u ? v : u; break;                                               \
        default: u = v > u ? v : u; break;                                                \
        }                                                                                 \
        memcpy(a, &u, sizeof u);                                                          \
    }                                                                                     \
    return

/* Floats: min / max propagate NaN (lax.min / lax.max). LOAD / STORE convert
 * 16-bit storage through float. */
#define FLOAT_COMBINE(S, LOAD, STORE)                                                     \
    for (int64_t i = 0; i < n; i++, a += as, b += bs) {                                   \
        S su, sv;                                                                         \
        memcpy(&su, a, sizeof su);                                                        \
        memcpy(&sv, b, sizeof sv);                                                        \
        double u = LOAD(su), v = LOAD(sv);                                                \
        switch (op) {                                                                     \
        case ADD: u = u + v; break;                                                       \
        case MUL: u = u * v; break;                                                       \
        case MIN: u = u != u || v != v ? u + v : v < u ? v : u; break;                    \
        default: u = u != u || v != v ? u + v : v > u ? v : u; break;                     \
        }                                                                                 \
        su = STORE(u);                                                                    \
        memcpy(a, &su, sizeof su);                                                        \
    }                                                                                     \
    return

#define COMPLEX_COMBINE(T)                                                                \
    for (int64_t i = 0; i < n; i++, a += as, b += bs) {                                   \
        T u[2], v[2];                                                                     \
        memcpy(u, a, sizeof u);                                                           \
        memcpy(v, b, sizeof v);                                                           \
        if (op == ADD) {                                                                  \
            u[0] += v[0];                                                                 \
            u[1] += v[1];                                                                 \
        } else {                                                                          \
            T re = u[0] * v[0] - u[1] * v[1], im = u[0] * v[1] + u[1] * v[0];             \
            u[0] = re;                                                                    \
            u[1] = im;                                                                    \
        }                                                                                 \
        memcpy(a, u, sizeof u);                                                           \
    }                                                                                     \
    return

static double ld_f16(uint16_t h) { return oly__half_to_float(h); }
static uint16_t st_f16(double v) { return oly__float_to_half((float)v); }
static double ld_bf16(uint16_t h) { return oly__bf16_to_float(h); }
static uint16_t st_bf16(double v) { return oly__float_to_bf16((float)v); }
static double ld_f32(float v) { return v; }
static float st_f32(double v) { return (float)v; }
static double ld_f64(double v) { return v; }
static double st_f64(double v) { return v; }

static void combine_run(char *a, int64_t as, const char *b, int64_t bs, int64_t n, const void *arg)
{
    const combine *c = arg;
    combine_op op = c->op;
    if (op == SET) {
        size_t es = oly_dtype_size(c->t);
        copy_run(a, as, b, bs, n, &es);
        return;
    }
    switch (c->t) {
    case OLY_BOOL:
        for (int64_t i = 0; i < n; i++, a += as, b += bs) {
            bool u = *a != 0, v = *b != 0;
            *a = (char)(op == ADD || op == MAX ? (u || v) : (u && v));
        }
        return;
    case OLY_INT8: INT_COMBINE(int8_t, uint32_t);
    case OLY_INT16: INT_COMBINE(int16_t, uint32_t);
    case OLY_INT32: INT_COMBINE(int32_t, uint32_t);
    case OLY_INT64: INT_COMBINE(int64_t, uint64_t);
    case OLY_UINT8: INT_COMBINE(uint8_t, uint32_t);
    case OLY_UINT16: INT_COMBINE(uint16_t, uint32_t);
    case OLY_UINT32: INT_COMBINE(uint32_t, uint32_t);
    case OLY_UINT64: INT_COMBINE(uint64_t, uint64_t);
    case OLY_FLOAT16: FLOAT_COMBINE(uint16_t, ld_f16, st_f16);
    case OLY_BFLOAT16: FLOAT_COMBINE(uint16_t, ld_bf16, st_bf16);
    case OLY_FLOAT32: FLOAT_COMBINE(float, ld_f32, st_f32);
    case OLY_FLOAT64: FLOAT_COMBINE(double, ld_f64, st_f64);
    case OLY_COMPLEX64: COMPLEX_COMBINE(float);
    case OLY_COMPLEX128: COMPLEX_COMBINE(double);
    default: return;
    }
}

static oly_status scatter_run(const oly_kernel_ctx *ctx, combine_op op)
{
    if (ctx->ith != 0) return OLY_OK; /* updates apply in index order: one thread */
    const oly_params_scatter *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *ix = &ctx->in_aval[1], *u = &ctx->in_aval[2];
    char *out = ctx->out[0];
    if ((const void *)out != ctx->in[0]) memcpy(out, ctx->in[0], oly_aval_nbytes(x));
    gs_plan plan;
    plan_build(&plan, x, ix, u, &p->update_window_dims, &p->inserted_window_dims,
               &p->scatter_dims_to_operand_dims, &p->operand_batching_dims,
               &p->scatter_indices_batching_dims, NULL);
    if (plan.empty || plan.n_batch == 0) return OLY_OK;
    combine cb = {.op = op, .t = x->dtype};
    bool clamp = p->mode == OLY_GATHER_CLIP;
    int64_t c[OLY_MAX_RANK] = {0}, uoff = 0;
    const char *rows = ctx->in[1], *ups = ctx->in[2];
    for (int64_t i = 0; i < plan.n_batch; i++) {
        int64_t xoff = window_start(&plan, rows + i * plan.k * plan.ies, c, clamp);
        if (xoff >= 0) walk_window(&plan, out + xoff, plan.wx, ups + uoff, plan.wo, combine_run, &cb);
        uoff += batch_next(&plan, c);
    }
    return OLY_OK;
}

static oly_status scatter_kernel(const oly_kernel_ctx *ctx) { return scatter_run(ctx, SET); }
static oly_status scatter_add_kernel(const oly_kernel_ctx *ctx) { return scatter_run(ctx, ADD); }
static oly_status scatter_mul_kernel(const oly_kernel_ctx *ctx) { return scatter_run(ctx, MUL); }
static oly_status scatter_min_kernel(const oly_kernel_ctx *ctx) { return scatter_run(ctx, MIN); }
static oly_status scatter_max_kernel(const oly_kernel_ctx *ctx) { return scatter_run(ctx, MAX); }

/* A scatter may write into its operand's buffer when the operand dies here. */
static int operand_alias(const void *params, int out)
{
    (void)params;
    return out == 0 ? 0 : -1;
}

const oly_cpu_kernel oly__cpu_gather = {.fn = gather_kernel, .splits = true};
const oly_cpu_kernel oly__cpu_scatter = {.fn = scatter_kernel, .alias_input = operand_alias};
const oly_cpu_kernel oly__cpu_scatter_add = {.fn = scatter_add_kernel, .alias_input = operand_alias};
const oly_cpu_kernel oly__cpu_scatter_mul = {.fn = scatter_mul_kernel, .alias_input = operand_alias};
const oly_cpu_kernel oly__cpu_scatter_min = {.fn = scatter_min_kernel, .alias_input = operand_alias};
const oly_cpu_kernel oly__cpu_scatter_max = {.fn = scatter_max_kernel, .alias_input = operand_alias};

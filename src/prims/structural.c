/* structural.c — primitives that move elements without arithmetic:
 * broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, slice,
 * dynamic_slice, dynamic_update_slice, concatenate, pad, iota, copy.
 * Semantics follow JAX's lax. Kernels only need the element size, so every
 * dtype works; most are one "copy plan": an output box walked with byte
 * strides into the source (0 = broadcast, negative = reversed), simplified by
 * dropping unit dims and merging contiguous ones so the innermost run is a
 * memcpy whenever the layout allows. */
#include "internal.h"

/* ---------------------------------------------------------------- messages */

typedef struct { char s[320]; } text;

static text show_aval(const oly_aval *a)
{
    text t;
    oly_aval_format(t.s, sizeof t.s, a);
    return t;
}

static text show_ints(const oly_ints *v)
{
    text t;
    size_t len = 0;
    t.s[len++] = '(';
    t.s[len] = '\0';
    for (int i = 0; i < v->n && i < OLY_MAX_RANK; i++)
        len += (size_t)snprintf(t.s + len, sizeof t.s - len, "%s%lld", i ? ", " : "",
                                (long long)v->v[i]);
    snprintf(t.s + len, sizeof t.s - len, ")");
    return t;
}

static oly_status check_ints(const char *who, const char *field, const oly_ints *v)
{
    if (v->n < 0 || v->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "%s: %s must have 0..%d entries, got %d", who, field,
                          OLY_MAX_RANK, v->n);
    return OLY_OK;
}

static oly_status check_n_in(const oly_shape_ctx *ctx, int want)
{
    if (ctx->n_in != want)
        return oly__error(OLY_ERR_INVALID, "%s: expected %d operand%s, got %d", ctx->prim->name,
                          want, want == 1 ? "" : "s", ctx->n_in);
    return OLY_OK;
}

/* Normalises axis in [-rank, rank) to [0, rank). */
static oly_status norm_axis(const char *who, const char *what, int64_t axis, int rank,
                            int64_t *out)
{
    if (axis < -rank || axis >= rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: %s %lld is out of range for rank %d (expected -%d <= axis < %d)",
                          who, what, (long long)axis, rank, rank, rank);
    *out = axis < 0 ? axis + rank : axis;
    return OLY_OK;
}

/* Normalises a list of distinct axes into norm (0..rank-1); marks[] set per axis. */
static oly_status norm_axes(const char *who, const char *what, const oly_ints *v, int rank,
                            int64_t *norm, bool *marks)
{
    OLY_TRY(check_ints(who, what, v));
    for (int i = 0; i < rank; i++) marks[i] = false;
    for (int i = 0; i < v->n; i++) {
        OLY_TRY(norm_axis(who, what, v->v[i], rank, &norm[i]));
        if (marks[norm[i]])
            return oly__error(OLY_ERR_INVALID, "%s: %s %s are not unique", who, what,
                              show_ints(v).s);
        marks[norm[i]] = true;
    }
    return OLY_OK;
}

static void set_aval(oly_aval *out, oly_dtype t, int rank, const int64_t *dims, bool weak)
{
    memset(out, 0, sizeof *out);
    out->dtype = t;
    out->rank = rank;
    out->weak = weak;
    for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
}

static int64_t aval_size(const oly_aval *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

/* Row-major strides in elements. */
static void strides_of(const oly_aval *a, int64_t *s)
{
    int64_t acc = 1;
    for (int i = a->rank - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= a->dims[i];
    }
}

static bool is_int_index(oly_dtype t) { return oly_dtype_is_int(t); }

static int64_t read_index(oly_dtype t, const void *p)
{
    switch (t) {
    case OLY_INT8: { int8_t v; memcpy(&v, p, 1); return v; }
    case OLY_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case OLY_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case OLY_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case OLY_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case OLY_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case OLY_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case OLY_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: return 0;
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

static void copy_run(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, size_t es)
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
                copy_run(dst + doff + i * p->dst[c] + j0 * p->dst[inner], p->dst[inner],
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
        copy_run(dst + lo * p.dst[inner], p.dst[inner], src + lo * p.src[inner], p.src[inner],
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
        copy_run(dst + doff, p.dst[inner], src + soff, p.src[inner], p.dims[inner], es);
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

/* ---------------------------------------------------------------- broadcast_in_dim */

static oly_status broadcast_in_dim_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_broadcast_in_dim *p = ctx->params;
    const char *who = "broadcast_in_dim";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_ints(who, "shape", &p->shape));
    OLY_TRY(check_ints(who, "broadcast_dimensions", &p->broadcast_dimensions));
    for (int i = 0; i < p->shape.n; i++)
        if (p->shape.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "%s: shape %s has a negative dimension", who,
                              show_ints(&p->shape).s);
    if (p->broadcast_dimensions.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: broadcast_dimensions must have one entry per operand dimension "
                          "(%d for operand %s), got %s",
                          who, x->rank, show_aval(x).s, show_ints(&p->broadcast_dimensions).s);
    for (int i = 0; i < x->rank; i++) {
        int64_t d = p->broadcast_dimensions.v[i];
        if (d < 0 || d >= p->shape.n)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: broadcast_dimensions %s must be in [0, %d) for shape %s", who,
                              show_ints(&p->broadcast_dimensions).s, p->shape.n,
                              show_ints(&p->shape).s);
        if (i > 0 && d <= p->broadcast_dimensions.v[i - 1])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: broadcast_dimensions %s must be strictly increasing", who,
                              show_ints(&p->broadcast_dimensions).s);
    }
    for (int i = 0; i < x->rank; i++) {
        int64_t d = p->broadcast_dimensions.v[i];
        if (x->dims[i] != 1 && x->dims[i] != p->shape.v[d])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: operand %s dimension %d has size %lld; it must be 1 or equal "
                              "to shape %s dimension %lld (size %lld)",
                              who, show_aval(x).s, i, (long long)x->dims[i],
                              show_ints(&p->shape).s, (long long)d, (long long)p->shape.v[d]);
    }
    set_aval(out, x->dtype, p->shape.n, p->shape.v, x->weak);
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

/* ---------------------------------------------------------------- reshape */

static oly_status reshape_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_reshape *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_ints("reshape", "new_sizes", &p->new_sizes));
    int64_t n = 1;
    for (int i = 0; i < p->new_sizes.n; i++) {
        if (p->new_sizes.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "reshape: new_sizes %s has a negative dimension",
                              show_ints(&p->new_sizes).s);
        n *= p->new_sizes.v[i];
    }
    if (n != aval_size(x))
        return oly__error(OLY_ERR_SHAPE,
                          "reshape: new_sizes %s has %lld elements but operand %s has %lld",
                          show_ints(&p->new_sizes).s, (long long)n, show_aval(x).s,
                          (long long)aval_size(x));
    set_aval(out, x->dtype, p->new_sizes.n, p->new_sizes.v, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- transpose */

static oly_status transpose_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_transpose *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_ints("transpose", "permutation", &p->permutation));
    bool seen[OLY_MAX_RANK] = {false};
    bool ok = p->permutation.n == x->rank;
    for (int i = 0; ok && i < p->permutation.n; i++) {
        int64_t a = p->permutation.v[i];
        if (a < 0 || a >= x->rank || seen[a]) ok = false;
        else seen[a] = true;
    }
    if (!ok)
        return oly__error(OLY_ERR_INVALID,
                          "transpose: permutation must be a permutation of 0..%d for operand "
                          "%s, got %s",
                          x->rank - 1, show_aval(x).s, show_ints(&p->permutation).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = x->dims[p->permutation.v[i]];
    set_aval(out, x->dtype, x->rank, dims, x->weak);
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

/* ---------------------------------------------------------------- squeeze, expand_dims */

static oly_status squeeze_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    int64_t norm[OLY_MAX_RANK];
    bool drop[OLY_MAX_RANK];
    OLY_TRY(norm_axes("squeeze", "dimensions", &p->dimensions, x->rank, norm, drop));
    int64_t dims[OLY_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!drop[i]) {
            dims[r++] = x->dims[i];
        } else if (x->dims[i] != 1) {
            return oly__error(OLY_ERR_SHAPE,
                              "squeeze: dimensions %s must have size 1, but dimension %d of "
                              "operand %s has size %lld",
                              show_ints(&p->dimensions).s, i, show_aval(x).s,
                              (long long)x->dims[i]);
        }
    }
    set_aval(out, x->dtype, r, dims, x->weak);
    return OLY_OK;
}

static oly_status expand_dims_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_ints("expand_dims", "dimensions", &p->dimensions));
    int rank = x->rank + p->dimensions.n;
    if (rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "expand_dims: result rank %d exceeds the maximum %d",
                          rank, OLY_MAX_RANK);
    int64_t norm[OLY_MAX_RANK];
    bool ins[OLY_MAX_RANK];
    OLY_TRY(norm_axes("expand_dims", "dimensions", &p->dimensions, rank, norm, ins));
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0, j = 0; i < rank; i++) dims[i] = ins[i] ? 1 : x->dims[j++];
    set_aval(out, x->dtype, rank, dims, x->weak);
    return OLY_OK;
}

/* ---------------------------------------------------------------- rev */

static oly_status rev_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dims *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    int64_t norm[OLY_MAX_RANK];
    bool marks[OLY_MAX_RANK];
    OLY_TRY(norm_axes("rev", "dimensions", &p->dimensions, x->rank, norm, marks));
    *out = *x;
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

/* ---------------------------------------------------------------- slice */

static oly_status slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_slice *p = ctx->params;
    const char *who = "slice";
    OLY_TRY(check_n_in(ctx, 1));
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_ints(who, "start_indices", &p->start_indices));
    OLY_TRY(check_ints(who, "limit_indices", &p->limit_indices));
    OLY_TRY(check_ints(who, "strides", &p->strides));
    if (p->start_indices.n != x->rank || p->limit_indices.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: start_indices %s and limit_indices %s must have one entry per "
                          "dimension of operand %s",
                          who, show_ints(&p->start_indices).s, show_ints(&p->limit_indices).s,
                          show_aval(x).s);
    if (p->strides.n != 0 && p->strides.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: strides %s must be empty or have one entry per dimension of "
                          "operand %s",
                          who, show_ints(&p->strides).s, show_aval(x).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t s = p->start_indices.v[i], l = p->limit_indices.v[i];
        int64_t st = p->strides.n ? p->strides.v[i] : 1;
        if (st <= 0)
            return oly__error(OLY_ERR_INVALID, "%s: strides %s must be positive", who,
                              show_ints(&p->strides).s);
        if (s < 0 || s > l || l > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: dimension %d needs 0 <= start <= limit <= %lld (operand %s), "
                              "got start_indices %s limit_indices %s",
                              who, i, (long long)x->dims[i], show_aval(x).s,
                              show_ints(&p->start_indices).s, show_ints(&p->limit_indices).s);
        dims[i] = l == s ? 0 : (l - s + st - 1) / st;
    }
    set_aval(out, x->dtype, x->rank, dims, x->weak);
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
        plan.src[i] = st * s[i] * (int64_t)es;
    }
    plan_run(plan, ctx->out[0], src, es, ctx->ith, ctx->nth);
    return OLY_OK;
}

/* ---------------------------------------------------------------- dynamic_slice */

/* The start indices inputs first..first+rank-1: rank-0 integers. */
static oly_status check_indices(const oly_shape_ctx *ctx, int first, const oly_aval *x)
{
    const char *who = ctx->prim->name;
    if (ctx->n_in != first + x->rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: expected %d operands (%d array%s and %d start indices for operand "
                          "%s), got %d",
                          who, first + x->rank, first, first == 1 ? "" : "s", x->rank,
                          show_aval(x).s, ctx->n_in);
    for (int i = first; i < ctx->n_in; i++) {
        const oly_aval *a = &ctx->in[i];
        if (a->rank != 0 || !is_int_index(a->dtype))
            return oly__error(OLY_ERR_TYPE,
                              "%s: start index %d must be a rank-0 integer, got %s", who,
                              i - first, show_aval(a).s);
    }
    return OLY_OK;
}

static oly_status dynamic_slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_dynamic_slice *p = ctx->params;
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "dynamic_slice: expected an operand, got none");
    const oly_aval *x = &ctx->in[0];
    OLY_TRY(check_indices(ctx, 1, x));
    OLY_TRY(check_ints("dynamic_slice", "slice_sizes", &p->slice_sizes));
    if (p->slice_sizes.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "dynamic_slice: slice_sizes %s must have one entry per dimension of "
                          "operand %s",
                          show_ints(&p->slice_sizes).s, show_aval(x).s);
    for (int i = 0; i < x->rank; i++)
        if (p->slice_sizes.v[i] < 0 || p->slice_sizes.v[i] > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "dynamic_slice: slice_sizes %s must satisfy 0 <= size <= the "
                              "operand's dimension (operand %s, dimension %d)",
                              show_ints(&p->slice_sizes).s, show_aval(x).s, i);
    set_aval(out, x->dtype, x->rank, p->slice_sizes.v, x->weak);
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
        int64_t start = read_index(ctx->in_aval[1 + i].dtype, ctx->in[1 + i]);
        start = clamp64(start, 0, x->dims[i] - o->dims[i]);
        src += start * s[i] * (int64_t)es;
        plan.src[i] = s[i] * (int64_t)es;
    }
    plan_run(plan, ctx->out[0], src, es, ctx->ith, ctx->nth);
    return OLY_OK;
}

/* ---------------------------------------------------------------- dynamic_update_slice */

static oly_status dynamic_update_slice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const char *who = "dynamic_update_slice";
    if (ctx->n_in < 2)
        return oly__error(OLY_ERR_INVALID, "%s: expected an operand and an update, got %d inputs",
                          who, ctx->n_in);
    const oly_aval *x = &ctx->in[0], *u = &ctx->in[1];
    OLY_TRY(check_indices(ctx, 2, x));
    if (u->dtype != x->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: update %s must have the operand's dtype (operand %s)",
                          who, show_aval(u).s, show_aval(x).s);
    if (u->rank != x->rank)
        return oly__error(OLY_ERR_SHAPE, "%s: update %s must have the operand's rank (operand %s)",
                          who, show_aval(u).s, show_aval(x).s);
    for (int i = 0; i < x->rank; i++)
        if (u->dims[i] > x->dims[i])
            return oly__error(OLY_ERR_SHAPE,
                              "%s: update %s must fit in operand %s (dimension %d is larger)", who,
                              show_aval(u).s, show_aval(x).s, i);
    *out = *x;
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
        int64_t start = read_index(ctx->in_aval[2 + i].dtype, ctx->in[2 + i]);
        start = clamp64(start, 0, x->dims[i] - u->dims[i]);
        dst += start * s[i] * (int64_t)es;
        plan.src[i] = plan.dst[i];             /* update: dense */
        plan.dst[i] = s[i] * (int64_t)es;      /* operand-shaped output */
    }
    plan_run(plan, dst, ctx->in[1], es, 0, 1);
    return OLY_OK;
}

/* ---------------------------------------------------------------- concatenate */

static oly_status concatenate_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_concatenate *p = ctx->params;
    const char *who = "concatenate";
    if (ctx->n_in < 1)
        return oly__error(OLY_ERR_INVALID, "%s: expected at least one operand, got none", who);
    const oly_aval *x = &ctx->in[0];
    if (x->rank == 0)
        return oly__error(OLY_ERR_SHAPE, "%s: operands must have rank >= 1, got %s", who,
                          show_aval(x).s);
    int64_t axis = 0;
    OLY_TRY(norm_axis(who, "dimension", p->dimension, x->rank, &axis));
    int64_t dims[OLY_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    bool weak = x->weak;
    for (int k = 1; k < ctx->n_in; k++) {
        const oly_aval *y = &ctx->in[k];
        if (y->dtype != x->dtype)
            return oly__error(OLY_ERR_TYPE,
                              "%s: operands must have equal dtypes, got %s (operand 0) and %s "
                              "(operand %d)",
                              who, show_aval(x).s, show_aval(y).s, k);
        bool ok = y->rank == x->rank;
        for (int i = 0; ok && i < x->rank; i++)
            if (i != axis && y->dims[i] != x->dims[i]) ok = false;
        if (!ok)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: operands must have equal shapes except in dimension %lld, got "
                              "%s (operand 0) and %s (operand %d)",
                              who, (long long)axis, show_aval(x).s, show_aval(y).s, k);
        dims[axis] += y->dims[axis];
        weak = weak && y->weak;
    }
    set_aval(out, x->dtype, x->rank, dims, weak);
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

/* ---------------------------------------------------------------- pad */

static oly_status pad_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_pad *p = ctx->params;
    const char *who = "pad";
    OLY_TRY(check_n_in(ctx, 2));
    const oly_aval *x = &ctx->in[0], *v = &ctx->in[1];
    if (v->rank != 0 || v->dtype != x->dtype)
        return oly__error(OLY_ERR_TYPE,
                          "%s: padding_value must be a rank-0 array of the operand's dtype "
                          "(operand %s), got %s",
                          who, show_aval(x).s, show_aval(v).s);
    OLY_TRY(check_ints(who, "lo", &p->lo));
    OLY_TRY(check_ints(who, "hi", &p->hi));
    OLY_TRY(check_ints(who, "interior", &p->interior));
    if (p->lo.n != x->rank || p->hi.n != x->rank || p->interior.n != x->rank)
        return oly__error(OLY_ERR_SHAPE,
                          "%s: lo %s, hi %s and interior %s must have one entry per dimension of "
                          "operand %s",
                          who, show_ints(&p->lo).s, show_ints(&p->hi).s,
                          show_ints(&p->interior).s, show_aval(x).s);
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t in = p->interior.v[i], n = x->dims[i];
        if (in < 0)
            return oly__error(OLY_ERR_INVALID, "%s: interior %s must be non-negative", who,
                              show_ints(&p->interior).s);
        dims[i] = p->lo.v[i] + p->hi.v[i] + n + (n > 0 ? (n - 1) * in : 0);
        if (dims[i] < 0)
            return oly__error(OLY_ERR_SHAPE,
                              "%s: dimension %d of operand %s would have size %lld < 0 after "
                              "padding with lo %s hi %s interior %s",
                              who, i, show_aval(x).s, (long long)dims[i], show_ints(&p->lo).s,
                              show_ints(&p->hi).s, show_ints(&p->interior).s);
    }
    set_aval(out, x->dtype, x->rank, dims, x->weak && v->weak);
    return OLY_OK;
}

static oly_status pad_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0) return OLY_OK; /* fill, then place: one thread */
    const oly_params_pad *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *o = &ctx->out_aval[0];
    size_t es = oly_dtype_size(x->dtype);
    int64_t total = aval_size(o);
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
        int64_t step = p->interior.v[i] + 1, lo = p->lo.v[i], n = x->dims[i];
        /* operand indices j with 0 <= lo + j*step < o->dims[i] */
        int64_t first = lo >= 0 ? 0 : (-lo + step - 1) / step;
        int64_t last = o->dims[i] - 1 - lo < 0 ? -1 : (o->dims[i] - 1 - lo) / step;
        if (last > n - 1) last = n - 1;
        if (last < first) return OLY_OK; /* nothing of the operand survives */
        plan.dims[i] = last - first + 1;
        src += first * xs[i] * (int64_t)es;
        dst += (lo + first * step) * os[i] * (int64_t)es;
        plan.src[i] = xs[i] * (int64_t)es;
        plan.dst[i] = step * os[i] * (int64_t)es;
    }
    plan_run(plan, dst, src, es, 0, 1);
    return OLY_OK;
}

/* ---------------------------------------------------------------- iota */

static oly_status iota_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_iota *p = ctx->params;
    OLY_TRY(check_n_in(ctx, 0));
    if ((unsigned)p->dtype >= OLY_DTYPE_COUNT || p->dtype == OLY_BOOL)
        return oly__error(OLY_ERR_TYPE, "iota: dtype must be numeric, got %s",
                          (unsigned)p->dtype >= OLY_DTYPE_COUNT ? "an invalid dtype"
                                                                : oly_dtype_name(p->dtype));
    OLY_TRY(check_ints("iota", "shape", &p->shape));
    if (p->shape.n < 1)
        return oly__error(OLY_ERR_SHAPE, "iota: shape must have rank >= 1, got ()");
    for (int i = 0; i < p->shape.n; i++)
        if (p->shape.v[i] < 0)
            return oly__error(OLY_ERR_INVALID, "iota: shape %s has a negative dimension",
                              show_ints(&p->shape).s);
    int64_t axis = 0;
    OLY_TRY(norm_axis("iota", "dimension", p->dimension, p->shape.n, &axis));
    set_aval(out, p->dtype, p->shape.n, p->shape.v, false);
    return OLY_OK;
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

/* ---------------------------------------------------------------- copy */

static oly_status copy_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(check_n_in(ctx, 1));
    *out = ctx->in[0];
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

#define FIELD(T, f, k) {.name = #f, .kind = (k), .offset = offsetof(T, f)}

static const oly_param_field broadcast_in_dim_fields[] = {
    FIELD(oly_params_broadcast_in_dim, shape, OLY_FIELD_INTS),
    FIELD(oly_params_broadcast_in_dim, broadcast_dimensions, OLY_FIELD_INTS),
};
static const oly_param_field reshape_fields[] = {
    FIELD(oly_params_reshape, new_sizes, OLY_FIELD_INTS),
};
static const oly_param_field transpose_fields[] = {
    FIELD(oly_params_transpose, permutation, OLY_FIELD_INTS),
};
static const oly_param_field dims_fields[] = {
    FIELD(oly_params_dims, dimensions, OLY_FIELD_INTS),
};
static const oly_param_field slice_fields[] = {
    FIELD(oly_params_slice, start_indices, OLY_FIELD_INTS),
    FIELD(oly_params_slice, limit_indices, OLY_FIELD_INTS),
    FIELD(oly_params_slice, strides, OLY_FIELD_INTS),
};
static const oly_param_field dynamic_slice_fields[] = {
    FIELD(oly_params_dynamic_slice, slice_sizes, OLY_FIELD_INTS),
};
static const oly_param_field concatenate_fields[] = {
    FIELD(oly_params_concatenate, dimension, OLY_FIELD_INT),
};
static const oly_param_field pad_fields[] = {
    FIELD(oly_params_pad, lo, OLY_FIELD_INTS),
    FIELD(oly_params_pad, hi, OLY_FIELD_INTS),
    FIELD(oly_params_pad, interior, OLY_FIELD_INTS),
};
static const oly_param_field iota_fields[] = {
    FIELD(oly_params_iota, dtype, OLY_FIELD_DTYPE),
    FIELD(oly_params_iota, shape, OLY_FIELD_INTS),
    FIELD(oly_params_iota, dimension, OLY_FIELD_INT),
};

#define PARAMS(T, F) .params_size = sizeof(T), .fields = F, .n_fields = OLY_ARRAY_LEN(F)

const oly_prim oly__prim_broadcast_in_dim = {
    .name = "broadcast_in_dim", .n_in = 1, .n_out = 1,
    PARAMS(oly_params_broadcast_in_dim, broadcast_in_dim_fields),
    .shape = broadcast_in_dim_shape, .kernel = broadcast_in_dim_kernel,
};
const oly_prim oly__prim_reshape = {
    .name = "reshape", .n_in = 1, .n_out = 1, PARAMS(oly_params_reshape, reshape_fields),
    .shape = reshape_shape, .kernel = kernel_memcpy, .inplace_ok = true,
};
const oly_prim oly__prim_transpose = {
    .name = "transpose", .n_in = 1, .n_out = 1, PARAMS(oly_params_transpose, transpose_fields),
    .shape = transpose_shape, .kernel = transpose_kernel,
};
const oly_prim oly__prim_squeeze = {
    .name = "squeeze", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = squeeze_shape, .kernel = kernel_memcpy, .inplace_ok = true,
};
const oly_prim oly__prim_expand_dims = {
    .name = "expand_dims", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = expand_dims_shape, .kernel = kernel_memcpy, .inplace_ok = true,
};
const oly_prim oly__prim_rev = {
    .name = "rev", .n_in = 1, .n_out = 1, PARAMS(oly_params_dims, dims_fields),
    .shape = rev_shape, .kernel = rev_kernel,
};
const oly_prim oly__prim_slice = {
    .name = "slice", .n_in = 1, .n_out = 1, PARAMS(oly_params_slice, slice_fields),
    .shape = slice_shape, .kernel = slice_kernel,
};
const oly_prim oly__prim_dynamic_slice = {
    .name = "dynamic_slice", .n_in = -1, .n_out = 1,
    PARAMS(oly_params_dynamic_slice, dynamic_slice_fields),
    .shape = dynamic_slice_shape, .kernel = dynamic_slice_kernel,
};
const oly_prim oly__prim_dynamic_update_slice = {
    .name = "dynamic_update_slice", .n_in = -1, .n_out = 1,
    .shape = dynamic_update_slice_shape, .kernel = dynamic_update_slice_kernel,
};
const oly_prim oly__prim_concatenate = {
    .name = "concatenate", .n_in = -1, .n_out = 1,
    PARAMS(oly_params_concatenate, concatenate_fields),
    .shape = concatenate_shape, .kernel = concatenate_kernel,
};
const oly_prim oly__prim_pad = {
    .name = "pad", .n_in = 2, .n_out = 1, PARAMS(oly_params_pad, pad_fields),
    .shape = pad_shape, .kernel = pad_kernel,
};
const oly_prim oly__prim_iota = {
    .name = "iota", .n_in = 0, .n_out = 1, PARAMS(oly_params_iota, iota_fields),
    .shape = iota_shape, .kernel = iota_kernel,
};
const oly_prim oly__prim_copy = {
    .name = "copy", .n_in = 1, .n_out = 1, .shape = copy_shape, .kernel = kernel_memcpy,
};

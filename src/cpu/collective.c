/* collective.c — the CPU kernel of the collective rows. A collective runs
 * inside a group run (pmap's members, src/rt/group.c): the kernel finds its
 * group through ctx->exec->group, the members taking part (those sharing its
 * coordinates on the mesh axes the collective does not name) and its index
 * among them, and meets them at the group's rendezvous (src/core/group.c).
 * CPU devices share memory, so a member publishes its kernel context at the
 * first barrier and reads its peers' buffers in place; a second barrier keeps
 * every buffer alive until no peer reads it any more. psum / pmax / pmin
 * split the work: member r reduces block r of every element, in member
 * order (so every member sees the same bits), and writes it into every
 * peer's output. all_gather, reduce_scatter, ppermute and all_to_all have
 * each member compute its own output from its peers' inputs. axis_index is
 * the member's coordinate. With no group, or a name the mesh lacks, the
 * kernel reports the unbound name (vmap(axis_name=) rewrites collectives away
 * before execution). */
#include "cpu/cpu.h"

#include <complex.h>
#include <math.h>

#define MAX_NAMES 16

/* A collective's place in its group. */
typedef struct coll {
    oly_group *g;
    int member;
    oly_group_axes ax;
    char what[160];             /* "psum over 'i'" for messages */
} coll;

static const char *names_text(const oly_kernel_ctx *ctx)
{
    const oly_prim *p = ctx->eqn ? ctx->eqn->prim : NULL;
    for (int i = 0; p && ctx->params && i < p->n_fields; i++)
        if (p->fields[i].kind == OLY_FIELD_STR) /* axes / axis_name comes first */
            return *(const char *const *)((const char *)ctx->params + p->fields[i].offset);
    return NULL;
}

static oly_status unbound(const oly_kernel_ctx *ctx, const char *names)
{
    /* the executor prefixes the primitive's name */
    return oly__error(OLY_ERR_INVALID,
                      "unbound axis name %s: a collective runs only inside a pmap or a "
                      "vmap(axis_name=...) that binds its axis",
                      names ? names : "");
}

/* Finds the group and this member's place for the collective of ctx. */
static oly_status locate(const oly_kernel_ctx *ctx, coll *c)
{
    const char *text = names_text(ctx);
    const char *s[MAX_NAMES];
    int len[MAX_NAMES];
    int n = oly__axis_names(text, s, len, MAX_NAMES);
    c->g = ctx->exec ? ctx->exec->group(ctx->run, &c->member) : NULL;
    if (n < 1 || n > MAX_NAMES || !c->g ||
        !oly__group_axes(c->g, c->member, n, s, len, &c->ax))
        return unbound(ctx, text);
    size_t w = (size_t)snprintf(c->what, sizeof c->what, "%s over ", ctx->eqn->prim->name);
    for (int i = 0; i < n && w < sizeof c->what; i++)
        w += (size_t)snprintf(c->what + w, sizeof c->what - w, "%s'%.*s'", i ? ", " : "", len[i],
                              s[i]);
    return OLY_OK;
}

/* The kernel context of the member with index j in c's subgroup (published
 * at the first barrier). */
static const oly_kernel_ctx *peer(const coll *c, int j)
{
    return oly__group_slot(c->g, oly__group_peer(c->g, c->member, &c->ax, j));
}

static int64_t count(const oly_aval *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

/* ---------------------------------------------------------------- reductions */

enum { OP_SUM, OP_MAX, OP_MIN };

#define SUM(a, b) ((a) + (b))
#define MAXV(a, b) ((a) >= (b) || (a) != (a) ? (a) : (b)) /* NaN wins */
#define MINV(a, b) ((a) <= (b) || (a) != (a) ? (a) : (b))

/* dst[i] = op over j of src[j][off + i], i in [0, n), in member order. */
#define LOOP(T, COMB)                                                                             \
    do {                                                                                          \
        T *d = dst;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                         \
            T acc = ((const T *)src[0])[off + i];                                                 \
            for (int j = 1; j < m; j++) {                                                         \
                T v = ((const T *)src[j])[off + i];                                               \
                acc = COMB(acc, v);                                                               \
            }                                                                                     \
            d[i] = acc;                                                                           \
        }                                                                                         \
    } while (0)
/* Signed sums wrap (through the unsigned type) as the kernels' adds do. */
#define WRAP_SUM(T, U)                                                                            \
    do {                                                                                          \
        T *d = dst;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                         \
            U acc = (U)((const T *)src[0])[off + i];                                              \
            for (int j = 1; j < m; j++) acc += (U)((const T *)src[j])[off + i];                   \
            d[i] = (T)acc;                                                                        \
        }                                                                                         \
    } while (0)
#define BY_OP(T)                                                                                  \
    do {                                                                                          \
        if (op == OP_SUM) LOOP(T, SUM);                                                           \
        else if (op == OP_MAX) LOOP(T, MAXV);                                                     \
        else LOOP(T, MINV);                                                                       \
    } while (0)
#define SIGNED(T, U)                                                                              \
    do {                                                                                          \
        if (op == OP_SUM) WRAP_SUM(T, U);                                                         \
        else if (op == OP_MAX) LOOP(T, MAXV);                                                     \
        else LOOP(T, MINV);                                                                       \
    } while (0)

static void reduce_run(oly_dtype t, int op, int m, const void *const *src, int64_t off, void *dst,
                       int64_t n)
{
    switch (t) {
    case OLY_BOOL: /* pmax: any; pmin: all */
        if (op == OP_MAX) LOOP(uint8_t, MAXV);
        else LOOP(uint8_t, MINV);
        break;
    case OLY_INT8: SIGNED(int8_t, uint8_t); break;
    case OLY_INT16: SIGNED(int16_t, uint16_t); break;
    case OLY_INT32: SIGNED(int32_t, uint32_t); break;
    case OLY_INT64: SIGNED(int64_t, uint64_t); break;
    case OLY_UINT8: BY_OP(uint8_t); break;
    case OLY_UINT16: BY_OP(uint16_t); break;
    case OLY_UINT32: BY_OP(uint32_t); break;
    case OLY_UINT64: BY_OP(uint64_t); break;
    case OLY_FLOAT32: BY_OP(float); break;
    case OLY_FLOAT64: BY_OP(double); break;
    case OLY_COMPLEX64: LOOP(float _Complex, SUM); break;   /* psum only (shape rule) */
    case OLY_COMPLEX128: LOOP(double _Complex, SUM); break;
    case OLY_FLOAT16:
    case OLY_BFLOAT16: { /* in float, rounded once */
        bool h = t == OLY_FLOAT16;
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) {
            uint16_t b = ((const uint16_t *)src[0])[off + i];
            float acc = h ? oly__half_to_float(b) : oly__bf16_to_float(b);
            for (int j = 1; j < m; j++) {
                b = ((const uint16_t *)src[j])[off + i];
                float v = h ? oly__half_to_float(b) : oly__bf16_to_float(b);
                acc = op == OP_SUM ? acc + v : op == OP_MAX ? MAXV(acc, v) : MINV(acc, v);
            }
            d[i] = h ? oly__float_to_half(acc) : oly__float_to_bf16(acc);
        }
        break;
    }
    default: break;
    }
}

static oly_status reduction(const oly_kernel_ctx *ctx, int op)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index;
    if (m == 1) {
        for (int i = 0; i < ctx->n_in; i++)
            if (ctx->out[i] != ctx->in[i])
                memcpy(ctx->out[i], ctx->in[i], oly_aval_nbytes(&ctx->in_aval[i]));
        return OLY_OK;
    }
    OLY_TRY(oly__group_sync(c.g, c.member, ctx, c.what));
    const void *src[OLY_GROUP_MAX < 64 ? OLY_GROUP_MAX : 64];
    const void **srcs = m <= OLY_ARRAY_LEN(src) ? src : oly__malloc((size_t)m * sizeof *srcs);
    oly_status st = OLY_OK;
    if (!srcs) st = OLY_ERR_NOMEM;
    for (int i = 0; st == OLY_OK && i < ctx->n_in; i++) {
        const oly_aval *a = &ctx->in_aval[i];
        int64_t n = count(a), lo = n * r / m, hi = n * (r + 1) / m;
        size_t es = oly_dtype_size(a->dtype);
        for (int j = 0; j < m; j++) srcs[j] = peer(&c, j)->in[i];
        /* block r, reduced into this member's output, then copied to the peers' */
        char *mine = (char *)ctx->out[i] + lo * (int64_t)es;
        reduce_run(a->dtype, op, m, srcs, lo, mine, hi - lo);
        for (int j = 0; j < m; j++)
            if (j != r) memcpy((char *)peer(&c, j)->out[i] + lo * (int64_t)es, mine,
                               (size_t)(hi - lo) * es);
    }
    if (srcs != src) free(srcs);
    const oly_group_transport *t = oly__group_transport();
    if (st == OLY_OK && t) { /* across processes: the leader combines, the others copy */
        OLY_TRY(oly__group_sync(c.g, c.member, NULL, c.what));
        for (int i = 0; r == 0 && st == OLY_OK && i < ctx->n_in; i++)
            st = t->allreduce(c.g, ctx->out[i], count(&ctx->in_aval[i]), ctx->in_aval[i].dtype, op);
        if (st != OLY_OK) return st;
        OLY_TRY(oly__group_sync(c.g, c.member, NULL, c.what));
        for (int i = 0; r != 0 && i < ctx->n_in; i++)
            memcpy(ctx->out[i], peer(&c, 0)->out[i], oly_aval_nbytes(&ctx->in_aval[i]));
    }
    /* keep every buffer alive until no peer touches it */
    oly_status st2 = oly__group_sync(c.g, c.member, NULL, c.what);
    return st != OLY_OK ? st : st2;
}

static oly_status psum_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_SUM); }
static oly_status pmax_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_MAX); }
static oly_status pmin_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_MIN); }

/* ---------------------------------------------------------------- data movement */

static oly_status all_gather_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_all_gather *p = ctx->params;
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size;
    if (m != p->axis_size)
        return oly__error(OLY_ERR_SHAPE, "%s: traced for axis size %lld, but the mesh's is %d",
                          c.what, (long long)p->axis_size, m);
    const oly_aval *a = &ctx->in_aval[0];
    int64_t outer = 1, chunk = (int64_t)oly_dtype_size(a->dtype);
    for (int i = 0; i < a->rank; i++) {
        if (i < p->all_gather_dimension) outer *= a->dims[i];
        else chunk *= a->dims[i];
    }
    OLY_TRY(oly__group_sync(c.g, c.member, ctx, c.what));
    char *out = ctx->out[0];
    for (int j = 0; j < m; j++) {
        const char *in = peer(&c, j)->in[0];
        for (int64_t o = 0; o < outer; o++)
            memcpy(out + (o * m + j) * chunk, in + o * chunk, (size_t)chunk);
    }
    return oly__group_sync(c.g, c.member, NULL, c.what);
}

static oly_status reduce_scatter_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_reduce_scatter *p = ctx->params;
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index;
    if (m != p->axis_size)
        return oly__error(OLY_ERR_SHAPE, "%s: traced for axis size %lld, but the mesh's is %d",
                          c.what, (long long)p->axis_size, m);
    const oly_aval *a = &ctx->in_aval[0];
    int d = (int)p->scatter_dimension;
    int64_t outer = 1, inner = 1, b = p->tiled ? a->dims[d] / m : 1;
    for (int i = 0; i < a->rank; i++) {
        if (i < d) outer *= a->dims[i];
        if (i > d) inner *= a->dims[i];
    }
    size_t es = oly_dtype_size(a->dtype);
    const void *src[64];
    const void **srcs = m <= OLY_ARRAY_LEN(src) ? src : oly__malloc((size_t)m * sizeof *srcs);
    if (!srcs) return OLY_ERR_NOMEM;
    oly_status st = oly__group_sync(c.g, c.member, ctx, c.what);
    if (st == OLY_OK) {
        for (int j = 0; j < m; j++) srcs[j] = peer(&c, j)->in[0];
        for (int64_t o = 0; o < outer; o++)
            reduce_run(a->dtype, OP_SUM, m, srcs, (o * a->dims[d] + r * b) * inner,
                       (char *)ctx->out[0] + (size_t)(o * b * inner) * es, b * inner);
        st = oly__group_sync(c.g, c.member, NULL, c.what);
    }
    if (srcs != src) free(srcs);
    return st;
}

static oly_status ppermute_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_ppermute *p = ctx->params;
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index, from = -1;
    /* the pairs "((s, d), ...)", checked by the shape rule */
    const char *t = p->perm ? p->perm : "";
    while ((t = strchr(t, '(')) != NULL) {
        char *end;
        long s = strtol(t + 1, &end, 10);
        if (end == t + 1) { t++; continue; } /* the outer parenthesis */
        long d = strtol(end + 1 + strspn(end + 1, " ,"), &end, 10);
        if (s >= m || d >= m)
            return oly__error(OLY_ERR_INVALID, "%s: perm %s names an index outside the axis of "
                                               "size %d", c.what, p->perm, m);
        if (d == r) from = (int)s;
        t = end;
    }
    size_t nb = oly_aval_nbytes(&ctx->out_aval[0]);
    OLY_TRY(oly__group_sync(c.g, c.member, ctx, c.what));
    if (from >= 0) memcpy(ctx->out[0], peer(&c, from)->in[0], nb);
    else memset(ctx->out[0], 0, nb); /* nobody sends here: zeros, as JAX */
    return oly__group_sync(c.g, c.member, NULL, c.what);
}

static oly_status all_to_all_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_all_to_all *p = ctx->params;
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index;
    if (m != p->axis_size)
        return oly__error(OLY_ERR_SHAPE, "%s: traced for axis size %lld, but the mesh's is %d",
                          c.what, (long long)p->axis_size, m);
    const oly_aval *a = &ctx->in_aval[0], *o = &ctx->out_aval[0];
    int s = (int)p->split_axis, cc = (int)p->concat_axis, rank = a->rank;
    int64_t istr[OLY_MAX_RANK], idx[OLY_MAX_RANK] = {0}, total = count(o);
    oly__strides(a, istr);
    size_t es = oly_dtype_size(a->dtype);
    int64_t part = a->dims[s] / m; /* the split axis's block each member sends */
    OLY_TRY(oly__group_sync(c.g, c.member, ctx, c.what));
    char *out = ctx->out[0];
    for (int64_t e = 0; e < total; e++) {
        /* output index idx: its sender j and the element of j's input */
        int64_t off = 0;
        for (int i = 0; i < rank; i++) {
            int64_t v = idx[i];
            if (i == cc && i == s) v = r * part + v % part;
            else if (i == cc) v = v % a->dims[cc];
            else if (i == s) v = r * part + v;
            off += v * istr[i];
        }
        int j = (int)(idx[cc] / (cc == s ? part : a->dims[cc]));
        memcpy(out + (size_t)e * es, (const char *)peer(&c, j)->in[0] + (size_t)off * es, es);
        for (int i = rank - 1; i >= 0 && ++idx[i] == o->dims[i]; i--) idx[i] = 0;
    }
    return oly__group_sync(c.g, c.member, NULL, c.what);
}

static oly_status axis_index_kernel(const oly_kernel_ctx *ctx)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    int32_t v = c.ax.index;
    memcpy(ctx->out[0], &v, sizeof v);
    return OLY_OK;
}

const oly_cpu_kernel oly__cpu_psum = {.fn = psum_kernel};
const oly_cpu_kernel oly__cpu_pmax = {.fn = pmax_kernel};
const oly_cpu_kernel oly__cpu_pmin = {.fn = pmin_kernel};
const oly_cpu_kernel oly__cpu_all_gather = {.fn = all_gather_kernel};
const oly_cpu_kernel oly__cpu_reduce_scatter = {.fn = reduce_scatter_kernel};
const oly_cpu_kernel oly__cpu_ppermute = {.fn = ppermute_kernel};
const oly_cpu_kernel oly__cpu_all_to_all = {.fn = all_to_all_kernel};
const oly_cpu_kernel oly__cpu_axis_index = {.fn = axis_index_kernel};

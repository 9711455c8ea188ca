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
 * before execution).
 *
 * Across processes (a group over global devices, olympus.distributed): when
 * a collective's members span processes (oly__group_reach), each process's
 * leader (its lowest local member) moves the data through the transport
 * between local barriers; the code is in the last part of this file. */
#include "cpu/cpu.h"

#include <complex.h>
#include <math.h>

#define MAX_NAMES 16

/* A collective's place in its group. */
typedef struct coll {
    oly_group *g;
    int member;
    oly_group_axes ax;
    int reach;                  /* oly__group_reach: 0 within this process */
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
    c->reach = oly__group_reach(c->g, &c->ax);
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

static oly_status x_reduction(const oly_kernel_ctx *ctx, const coll *c, int op);
static oly_status x_gathered(const oly_kernel_ctx *ctx, const coll *c, int kind);
static oly_status x_ppermute(const oly_kernel_ctx *ctx, const coll *c, int from, const int *src,
                             const int *dst, int n);

static oly_status reduction(const oly_kernel_ctx *ctx, int op)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index;
    if (c.reach) return x_reduction(ctx, &c, op);
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
    /* keep every buffer alive until no peer touches it */
    oly_status st2 = oly__group_sync(c.g, c.member, NULL, c.what);
    return st != OLY_OK ? st : st2;
}

static oly_status psum_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_SUM); }
static oly_status pmax_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_MAX); }
static oly_status pmin_kernel(const oly_kernel_ctx *ctx) { return reduction(ctx, OP_MIN); }

/* ---------------------------------------------------------------- data movement */

enum { MOVE_GATHER, MOVE_SCATTER, MOVE_A2A, MOVE_REDUCE /* + op: psum / pmax / pmin */ };

/* Member ctx's own output of all_gather / reduce_scatter / all_to_all from
 * its subgroup's inputs: src[j] is input 0 of the member with index j (of
 * m); r is this member's index. */
static void move_out(const oly_kernel_ctx *ctx, int kind, int m, int r, const void *const *src)
{
    const oly_aval *a = &ctx->in_aval[0];
    size_t es = oly_dtype_size(a->dtype);
    char *out = ctx->out[0];
    if (kind == MOVE_GATHER) {
        const oly_params_all_gather *p = ctx->params;
        int64_t outer = 1, chunk = (int64_t)es;
        for (int i = 0; i < a->rank; i++) {
            if (i < p->all_gather_dimension) outer *= a->dims[i];
            else chunk *= a->dims[i];
        }
        for (int j = 0; j < m; j++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(out + (o * m + j) * chunk, (const char *)src[j] + o * chunk, (size_t)chunk);
    } else if (kind == MOVE_SCATTER) {
        const oly_params_reduce_scatter *p = ctx->params;
        int d = (int)p->scatter_dimension;
        int64_t outer = 1, inner = 1, b = p->tiled ? a->dims[d] / m : 1;
        for (int i = 0; i < a->rank; i++) {
            if (i < d) outer *= a->dims[i];
            if (i > d) inner *= a->dims[i];
        }
        for (int64_t o = 0; o < outer; o++)
            reduce_run(a->dtype, OP_SUM, m, src, (o * a->dims[d] + r * b) * inner,
                       out + (size_t)(o * b * inner) * es, b * inner);
    } else {
        const oly_params_all_to_all *p = ctx->params;
        const oly_aval *o = &ctx->out_aval[0];
        int s = (int)p->split_axis, cc = (int)p->concat_axis, rank = a->rank;
        int64_t istr[OLY_MAX_RANK], idx[OLY_MAX_RANK] = {0}, total = count(o);
        oly__strides(a, istr);
        int64_t part = a->dims[s] / m; /* the split axis's block each member sends */
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
            memcpy(out + (size_t)e * es, (const char *)src[j] + (size_t)off * es, es);
            for (int i = rank - 1; i >= 0 && ++idx[i] == o->dims[i]; i--) idx[i] = 0;
        }
    }
}

/* A data-movement collective among this process's members: peers' inputs
 * read in place between two barriers. */
static oly_status move(const oly_kernel_ctx *ctx, const coll *c, int kind)
{
    if (c->reach) return x_gathered(ctx, c, kind);
    int m = c->ax.size;
    const void *buf[64] = {0};
    const void **src = m <= OLY_ARRAY_LEN(buf) ? buf : oly__malloc((size_t)m * sizeof *src);
    if (!src) return OLY_ERR_NOMEM;
    oly_status st = oly__group_sync(c->g, c->member, ctx, c->what);
    if (st == OLY_OK) {
        for (int j = 0; j < m; j++) src[j] = peer(c, j)->in[0];
        move_out(ctx, kind, m, c->ax.index, src);
        st = oly__group_sync(c->g, c->member, NULL, c->what);
    }
    if (src != buf) free(src);
    return st;
}

static oly_status check_size(const coll *c, int64_t traced)
{
    if (c->ax.size != traced)
        return oly__error(OLY_ERR_SHAPE, "%s: traced for axis size %lld, but the mesh's is %d",
                          c->what, (long long)traced, c->ax.size);
    return OLY_OK;
}

static oly_status all_gather_kernel(const oly_kernel_ctx *ctx)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    OLY_TRY(check_size(&c, ((const oly_params_all_gather *)ctx->params)->axis_size));
    return move(ctx, &c, MOVE_GATHER);
}

static oly_status reduce_scatter_kernel(const oly_kernel_ctx *ctx)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    OLY_TRY(check_size(&c, ((const oly_params_reduce_scatter *)ctx->params)->axis_size));
    return move(ctx, &c, MOVE_SCATTER);
}

static oly_status all_to_all_kernel(const oly_kernel_ctx *ctx)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    OLY_TRY(check_size(&c, ((const oly_params_all_to_all *)ctx->params)->axis_size));
    return move(ctx, &c, MOVE_A2A);
}

/* ppermute's pairs "((s, d), ...)" (checked by the shape rule) into s[] and
 * d[] (room for m each); the count, or -1 (message set) for an index outside
 * the axis. */
static int perm_pairs(const oly_params_ppermute *p, const coll *c, int *src, int *dst)
{
    int m = c->ax.size, n = 0;
    const char *t = p->perm ? p->perm : "";
    while ((t = strchr(t, '(')) != NULL) {
        char *end;
        long s = strtol(t + 1, &end, 10);
        if (end == t + 1) { t++; continue; } /* the outer parenthesis */
        long d = strtol(end + 1 + strspn(end + 1, " ,"), &end, 10);
        if (s < 0 || d < 0 || s >= m || d >= m)
            return oly__error(OLY_ERR_INVALID, "%s: perm %s names an index outside the axis of "
                                               "size %d", c->what, p->perm, m), -1;
        if (n < m) {
            src[n] = (int)s;
            dst[n] = (int)d;
        }
        n++;
        t = end;
    }
    return n < m ? n : m;
}

static oly_status ppermute_kernel(const oly_kernel_ctx *ctx)
{
    coll c;
    OLY_TRY(locate(ctx, &c));
    int m = c.ax.size, r = c.ax.index, from = -1;
    int buf[2 * 64];
    int *src = m <= 64 ? buf : oly__malloc(2 * (size_t)m * sizeof *src);
    if (!src) return OLY_ERR_NOMEM;
    int *dst = src + m;
    int n = perm_pairs(ctx->params, &c, src, dst);
    for (int q = 0; q < n; q++)
        if (dst[q] == r) from = src[q];
    oly_status st;
    if (n < 0) st = OLY_ERR_INVALID;
    else if (c.reach) st = x_ppermute(ctx, &c, from, src, dst, n);
    else {
        size_t nb = oly_aval_nbytes(&ctx->out_aval[0]);
        st = oly__group_sync(c.g, c.member, ctx, c.what);
        if (st == OLY_OK) {
            if (from >= 0) memcpy(ctx->out[0], peer(&c, from)->in[0], nb);
            else memset(ctx->out[0], 0, nb); /* nobody sends here: zeros, as JAX */
            st = oly__group_sync(c.g, c.member, NULL, c.what);
        }
    }
    if (src != buf) free(src);
    return st;
}

/* ---------------------------------------------------------------- across processes */

/* A collective whose members span processes. Each process's leader (its
 * lowest local member) makes the transport's calls, so every process makes
 * the same calls in the same order; local members meet at barriers around
 * them. What a member publishes at the first barrier: */
typedef struct xslot {
    const oly_kernel_ctx *ctx;
    char *all;                  /* the leader's: every member's input, process-major (owned) */
} xslot;

static const xslot *xpeer(const coll *c, int member) { return oly__group_slot(c->g, member); }
static int leader(const coll *c) { return oly__group_local_member(c->g, 0); }

static oly_status no_transport(const coll *c)
{
    return oly__error(OLY_ERR_INTERNAL, "%s: the group spans processes but no transport is "
                                        "installed", c->what);
}

/* psum / pmax / pmin: reach 1 (one subgroup, every process): the leader
 * reduces this process's inputs in member order, the transport combines the
 * processes' (every process gets the same bits), the others copy the
 * leader's result. Several subgroups across processes: every member's
 * input is gathered (x_gathered) and each reduces its own subgroup's. */
static oly_status x_reduction(const oly_kernel_ctx *ctx, const coll *c, int op)
{
    if (c->reach == 2) return x_gathered(ctx, c, MOVE_REDUCE + op);
    const oly_group_transport *t = oly__group_transport();
    if (!t) return no_transport(c);
    xslot mine = {.ctx = ctx};
    OLY_TRY(oly__group_sync(c->g, c->member, &mine, c->what));
    int lead = leader(c), nl = oly__group_local_size(c->g);
    if (c->member == lead) {
        const void *buf[64];
        const void **src = nl <= OLY_ARRAY_LEN(buf) ? buf : oly__malloc((size_t)nl * sizeof *src);
        oly_status st = src ? OLY_OK : OLY_ERR_NOMEM;
        for (int i = 0; st == OLY_OK && i < ctx->n_in; i++) {
            const oly_aval *a = &ctx->in_aval[i];
            if (nl == 1) { /* the bench's case: straight from the input */
                st = t->allreduce(ctx->in[i], ctx->out[i], count(a), a->dtype, op, c->what);
                continue;
            }
            for (int j = 0; j < nl; j++)
                src[j] = xpeer(c, oly__group_local_member(c->g, j))->ctx->in[i];
            reduce_run(a->dtype, op, nl, src, 0, ctx->out[i], count(a));
            st = t->allreduce(ctx->out[i], ctx->out[i], count(a), a->dtype, op, c->what);
        }
        if (src && src != buf) free(src);
        if (st != OLY_OK) return st; /* the others stop when this member's run fails */
    }
    OLY_TRY(oly__group_sync(c->g, c->member, NULL, c->what));
    if (c->member != lead)
        for (int i = 0; i < ctx->n_in; i++)
            memcpy(ctx->out[i], xpeer(c, lead)->ctx->out[i], oly_aval_nbytes(&ctx->in_aval[i]));
    return oly__group_sync(c->g, c->member, NULL, c->what); /* the leader's output read */
}

/* The leader's allgather of input i of every member: this process's block
 * (its members in member order), then every process's, into *all. */
static oly_status gather_all(const coll *c, int i, size_t bytes, char **all)
{
    const oly_group_transport *t = oly__group_transport();
    if (!t) return no_transport(c);
    int nl = oly__group_local_size(c->g), np = oly__group_processes(c->g);
    size_t blk = (size_t)nl * bytes;
    char *send = nl == 1 ? NULL : oly__malloc(blk + 1);
    char *recv = oly__malloc((size_t)np * blk + 1);
    if ((nl != 1 && !send) || !recv) {
        free(send);
        free(recv);
        return OLY_ERR_NOMEM;
    }
    for (int j = 0; send && j < nl; j++)
        memcpy(send + (size_t)j * bytes, xpeer(c, oly__group_local_member(c->g, j))->ctx->in[i],
               bytes);
    oly_status st = t->allgather(send ? send : xpeer(c, leader(c))->ctx->in[i], recv,
                                 (int64_t)blk, c->what);
    free(send);
    if (st != OLY_OK) {
        free(recv);
        return st;
    }
    *all = recv;
    return OLY_OK;
}

/* Every member's inputs gathered to every process (the leader's allgather),
 * then each member computes its own output as among local members: all_gather
 * (what it needs anyway), reduce_scatter, all_to_all, and reductions over
 * several subgroups across processes. */
static oly_status x_gathered(const oly_kernel_ctx *ctx, const coll *c, int kind)
{
    int m = c->ax.size, lead = leader(c), nl = oly__group_local_size(c->g);
    const void *buf[64] = {0};
    const void **src = m <= OLY_ARRAY_LEN(buf) ? buf : oly__malloc((size_t)m * sizeof *src);
    if (!src) return OLY_ERR_NOMEM;
    xslot mine = {.ctx = ctx};
    oly_status st = OLY_OK;
    for (int i = 0; st == OLY_OK && i < ctx->n_in; i++) {
        size_t bytes = oly_aval_nbytes(&ctx->in_aval[i]);
        st = oly__group_sync(c->g, c->member, &mine, c->what);
        if (st == OLY_OK && c->member == lead) st = gather_all(c, i, bytes, &mine.all);
        if (st == OLY_OK) st = oly__group_sync(c->g, c->member, NULL, c->what);
        if (st == OLY_OK) {
            const char *all = xpeer(c, lead)->all;
            for (int j = 0; j < m; j++) {
                int k = oly__group_peer(c->g, c->member, &c->ax, j);
                src[j] = all + ((size_t)oly__group_process_of(c->g, k) * (size_t)nl +
                                (size_t)oly__group_process_place(c->g, k)) * bytes;
            }
            if (kind >= MOVE_REDUCE)
                reduce_run(ctx->in_aval[i].dtype, kind - MOVE_REDUCE, m, src, 0, ctx->out[i],
                           count(&ctx->in_aval[i]));
            else
                move_out(ctx, kind, m, c->ax.index, src);
            st = oly__group_sync(c->g, c->member, NULL, c->what); /* done with `all` */
        }
        free(mine.all);
        mine.all = NULL;
    }
    if (src != buf) free(src);
    return st;
}

/* The leader's part of a ppermute across processes: the pairs of members in
 * different processes (every subgroup's), in rounds where each process sends
 * once and receives once at most, each round one transport ppermute straight
 * from the source member's input into the destination member's output. */
static oly_status x_ppermute_lead(const oly_kernel_ctx *ctx, const coll *c, const int *src,
                                  const int *dst, int n)
{
    const oly_group_transport *t = oly__group_transport();
    if (!t) return no_transport(c);
    oly_group *g = c->g;
    int members = oly__group_size(g), np = oly__group_processes(g);
    int me = oly__group_process_of(g, c->member);
    size_t nb = oly_aval_nbytes(&ctx->out_aval[0]);
    int *from = oly__malloc(((size_t)members * 3 + 1) * sizeof *from);
    int *to = from ? from + members : NULL, *round = from ? from + 2 * members : NULL;
    int (*pp)[2] = oly__malloc(((size_t)np + 1) * sizeof *pp);
    bool *busy = oly__calloc(2 * (size_t)np + 1, sizeof *busy);
    char *scratch = oly__malloc(nb + 1);
    oly_status st = OLY_ERR_NOMEM;
    if (!from || !pp || !busy || !scratch) goto done;
    int n_pairs = 0;
    for (int k = 0; k < members; k++) {
        int r = oly__group_index(g, &c->ax, k);
        for (int q = 0; q < n; q++) {
            if (src[q] != r) continue;
            int d = oly__group_peer(g, k, &c->ax, dst[q]);
            if (oly__group_process_of(g, k) == oly__group_process_of(g, d)) continue;
            from[n_pairs] = k;
            to[n_pairs] = d;
            round[n_pairs++] = -1;
        }
    }
    int left = n_pairs, n_rounds = 0;
    while (left > 0) { /* greedy: the same rounds in every process */
        memset(busy, 0, 2 * (size_t)np * sizeof *busy);
        for (int q = 0; q < n_pairs; q++) {
            int ps = oly__group_process_of(g, from[q]), pd = oly__group_process_of(g, to[q]);
            if (round[q] >= 0 || busy[ps] || busy[np + pd]) continue;
            busy[ps] = busy[np + pd] = true;
            round[q] = n_rounds;
            left--;
        }
        n_rounds++;
    }
    st = OLY_OK;
    for (int rr = 0; st == OLY_OK && rr < n_rounds; rr++) {
        const void *send = scratch;
        void *recv = scratch;
        int cnt = 0;
        for (int q = 0; q < n_pairs; q++) {
            if (round[q] != rr) continue;
            pp[cnt][0] = oly__group_process_of(g, from[q]);
            pp[cnt][1] = oly__group_process_of(g, to[q]);
            if (pp[cnt][0] == me) send = xpeer(c, from[q])->ctx->in[0];
            if (pp[cnt][1] == me) recv = xpeer(c, to[q])->ctx->out[0];
            cnt++;
        }
        st = t->ppermute(send, recv, (int64_t)nb, (const int(*)[2])pp, cnt, c->what);
    }
done:
    free(from);
    free(pp);
    free(busy);
    free(scratch);
    return st;
}

/* ppermute across processes: a member whose source is in this process (or
 * who has none) fills its own output; the leader moves the rest. */
static oly_status x_ppermute(const oly_kernel_ctx *ctx, const coll *c, int from, const int *src,
                             const int *dst, int n)
{
    xslot mine = {.ctx = ctx};
    size_t nb = oly_aval_nbytes(&ctx->out_aval[0]);
    OLY_TRY(oly__group_sync(c->g, c->member, &mine, c->what));
    int k = from >= 0 ? oly__group_peer(c->g, c->member, &c->ax, from) : -1;
    if (k < 0) memset(ctx->out[0], 0, nb); /* nobody sends here: zeros, as JAX */
    else if (oly__group_process_of(c->g, k) == oly__group_process_of(c->g, c->member))
        memcpy(ctx->out[0], xpeer(c, k)->ctx->in[0], nb);
    if (c->member == leader(c)) OLY_TRY(x_ppermute_lead(ctx, c, src, dst, n));
    return oly__group_sync(c->g, c->member, NULL, c->what);
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

/* fused.c — runs a fused group (fused.h) tile by tile: for each tile of the
 * group's flat index space, every member's own kernel (src/cpu's table) runs
 * on tile-sized operands: group inputs and outputs in place at the tile's
 * offset, rank-0 operands as they are, values private to the group in small
 * tile buffers (L1/L2-sized), broadcast operands gathered with stride 0 per
 * tile. Members are elementwise, so element i of a tile is computed by the
 * same loop and the same function as in a run of the whole array: fused
 * results are bit-for-bit those of the unfused program. A call runs a range
 * of tiles; oly__cpu_fused splits them by (ith, nth). */
#include "cpu/fused.h"

/* Tile buffers and contexts up to this many bytes live on the stack. */
enum { STACK_BYTES = 32768 };

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* n elements of es bytes from src, element stride ss (0: one element repeated). */
static void copy_run(char *dst, const char *src, int64_t ss, int64_t n, size_t es)
{
    if (ss == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
#define RUN(T)                                                                            \
    do {                                                                                  \
        T *d = (T *)(void *)dst;                                                          \
        const T *s = (const T *)(const void *)src;                                        \
        if (ss == 0) {                                                                    \
            T v = s[0];                                                                   \
            for (int64_t i = 0; i < n; i++) d[i] = v;                                     \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) d[i] = s[i * ss];                             \
        }                                                                                 \
    } while (0)
    switch (es) {
    case 1: RUN(uint8_t); break;
    case 2: RUN(uint16_t); break;
    case 4: RUN(uint32_t); break;
    case 8: RUN(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, src + (size_t)(i * ss) * es, es);
        break;
    }
#undef RUN
}

/* Elements [lo, lo + m) of broadcast read b of src (element size es): a
 * pointer into src when they are one dense run of it, else gathered into buf. */
static const void *gather(const oly_fbcast *b, const char *src, size_t es, int64_t lo, int64_t m,
                          char *buf)
{
    int r = b->rank;
    if (r == 0) { /* one element */
        memcpy(buf, src, es);
        return buf;
    }
    int64_t idx[OLY_MAX_RANK], off = 0, rem = lo;
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = rem % b->dims[d];
        rem /= b->dims[d];
        off += idx[d] * b->stride[d];
    }
    int64_t inner = b->dims[r - 1], is = b->stride[r - 1];
    if (is == 1 && idx[r - 1] + m <= inner) return src + (size_t)off * es;
    char *dst = buf;
    while (m > 0) {
        int64_t run = inner - idx[r - 1];
        if (run > m) run = m;
        copy_run(dst, src + (size_t)off * es, is, run, es);
        dst += (size_t)run * es;
        m -= run;
        idx[r - 1] += run;
        off += run * is;
        for (int d = r - 1; d > 0 && idx[d] == b->dims[d]; d--) {
            off -= idx[d] * b->stride[d];
            idx[d] = 0;
            idx[d - 1]++;
            off += b->stride[d - 1];
        }
    }
    return buf;
}

oly_status oly__cpu_fused_tiles(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t t_lo,
                                int64_t t_hi)
{
    if (t_hi <= t_lo || g->n <= 0) return OLY_OK;
    size_t head = round64((size_t)g->n_op * sizeof(oly_kernel_ctx) +
                          (size_t)(g->n_ref + g->n_slot) * sizeof(void *));
    size_t bytes = head + (size_t)g->n_buf * g->buf_bytes;
    _Alignas(64) unsigned char stack[STACK_BYTES];
    unsigned char *mem = bytes <= sizeof stack ? stack : oly__aligned_alloc(64, bytes);
    if (!mem) return OLY_ERR_NOMEM;
    oly_kernel_ctx *kc = (oly_kernel_ctx *)(void *)mem;
    void **ptr = (void **)(kc + g->n_op); /* every op's operands */
    void **sp = ptr + g->n_ref;           /* every slot's pointer for this tile */
    unsigned char *buf = mem + head;
    oly_status st = OLY_OK;

    /* Field by field: a compound literal would zero the struct first. */
    for (int k = 0; k < g->n_op; k++) {
        const oly_fop *o = &g->op[k];
        oly_kernel_ctx *c = &kc[k];
        c->eqn = o->eqn;
        c->params = o->eqn->params;
        c->n_in = o->n_in;
        c->in = (const void *const *)(ptr + o->ref);
        c->in_aval = o->aval;
        c->n_out = o->n_out;
        c->out = ptr + o->ref + o->n_in;
        c->out_aval = o->aval + o->n_in;
        c->ith = 0;
        c->nth = 1;
        c->device = ctx->device;
        c->run = ctx->run;
        c->exec = ctx->exec;
        c->in_array = NULL;
    }
    /* Slot pointers: tile buffers, scalars and inputs / outputs at 0, the
     * constant broadcasts filled once; operands that do not move are set once. */
    for (int s = 0; s < g->n_slot; s++) {
        const oly_fslot *sl = &g->slot[s];
        switch (sl->kind) {
        case OLY_FSLOT_IN:
        case OLY_FSLOT_SCALAR: sp[s] = (void *)ctx->in[sl->idx]; break;
        case OLY_FSLOT_OUT: sp[s] = ctx->out[sl->idx]; break;
        case OLY_FSLOT_TEMP: sp[s] = buf + (size_t)sl->idx * g->buf_bytes; break;
        case OLY_FSLOT_BCAST:
            sp[s] = buf + (size_t)sl->idx * g->buf_bytes;
            if (g->bcast[sl->bc].constant) copy_run(sp[s], ctx->in[sl->bc_in], 0, g->tile, sl->es);
            break;
        default: break;
        }
    }
    for (int r = 0; r < g->n_ref; r++) ptr[r] = sp[g->ref_slot[r]];

    int64_t last = (g->n + g->tile - 1) / g->tile - 1;
    for (int64_t t = t_lo; t < t_hi; t++) {
        int64_t lo = t * g->tile, m = t == last ? g->n - lo : g->tile;
        if (t == last && g->last_differs)
            for (int k = 0; k < g->n_op; k++) {
                kc[k].in_aval = g->op[k].aval_last;
                kc[k].out_aval = g->op[k].aval_last + g->op[k].n_in;
            }
        for (int i = 0; i < g->n_gather; i++) {
            const oly_fslot *sl = &g->slot[g->gather[i]];
            sp[g->gather[i]] = (void *)gather(&g->bcast[sl->bc], ctx->in[sl->bc_in], sl->es, lo,
                                              m, (char *)buf + (size_t)sl->idx * g->buf_bytes);
        }
        for (int i = 0; i < g->n_move; i++) {
            const oly_fmove *mv = &g->move[i];
            ptr[mv->ref] = (char *)sp[mv->slot] + (size_t)lo * mv->step;
        }
        for (int k = 0; k < g->n_op; k++) {
            const oly_fop *o = &g->op[k];
            if (!o->fn) { /* a copy out of the group */
                const void *src = ptr[o->ref];
                void *dst = ptr[o->ref + 1];
                if (src != dst) memcpy(dst, src, (size_t)m * g->slot[g->ref_slot[o->ref + 1]].es);
                continue;
            }
            st = o->fn(&kc[k]);
            if (st != OLY_OK) {
                oly__error_prefix(st, "%s", o->eqn->prim->name);
                goto done;
            }
        }
    }
done:
    if (mem != stack) free(mem);
    return st;
}

oly_status oly__cpu_fused(const oly_kernel_ctx *ctx)
{
    const oly_fused *g = ctx->params;
    int64_t n_tiles = g->n > 0 ? (g->n + g->tile - 1) / g->tile : 0;
    int64_t nth = ctx->nth > 0 ? ctx->nth : 1, ith = ctx->ith < 0 ? 0 : ctx->ith;
    int64_t per = (n_tiles + nth - 1) / nth, lo = ith * per, hi = lo + per;
    if (lo > n_tiles) lo = n_tiles;
    if (hi > n_tiles) hi = n_tiles;
    return oly__cpu_fused_tiles(g, ctx, lo, hi);
}

/* splits: a share is a range of whole tiles and every tile runs the same
 * loops wherever the shares fall, so each element is the same bytes for any
 * nth. The in-place entry too: a tile reads its input 0 before it writes
 * output 0 at the same offsets, and shares touch disjoint tiles. */
const oly_cpu_kernel oly__cpu_fused_entry[2] = {
    {.fn = oly__cpu_fused, .splits = true},
    {.fn = oly__cpu_fused, .inplace_ok = true, .splits = true},
};

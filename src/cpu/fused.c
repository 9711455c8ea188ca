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
#include "cpu/simd.h"

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

/* ---------------------------------------------------------------- linear chains */

/* Chains longer than this run tile by tile (their scalars live on the stack). */
enum { CHAIN_MAX = 256 };

const oly_fchain *oly__cpu_fused_chain(const oly_fused *g, oly_arena *ar)
{
    if (g->n_out != 1 || g->n_op < 1 || g->n_op > CHAIN_MAX || g->n_gather) return NULL;
    oly_dtype t = g->slot[g->ref_slot[g->op[0].ref]].dtype;
    if (t != OLY_FLOAT32 && t != OLY_FLOAT64) return NULL;
    uint8_t *code = oly__arena_alloc(ar, (size_t)g->n_op);
    int *scalar = oly__arena_alloc(ar, (size_t)g->n_op * sizeof *scalar);
    oly_fchain *c = oly__arena_alloc(ar, sizeof *c);
    if (!code || !scalar || !c) return NULL;
    int prev = -1, in = -1;
    for (int k = 0; k < g->n_op; k++) {
        const oly_fop *o = &g->op[k];
        if (!o->fn || o->n_out != 1 || o->n_in < 1 || o->n_in > 2) return NULL;
        const int *r = &g->ref_slot[o->ref];
        for (int j = 0; j <= o->n_in; j++)
            if (g->slot[r[j]].dtype != t) return NULL;
        oly_fslot_kind ok = g->slot[r[o->n_in]].kind;
        if (ok != (k == g->n_op - 1 ? OLY_FSLOT_OUT : OLY_FSLOT_TEMP)) return NULL;
        /* the value: operand j with the previous op's slot (op 0: an input) */
        int vj = -1;
        for (int j = 0; j < o->n_in; j++) {
            const oly_fslot *sl = &g->slot[r[j]];
            bool value = k ? r[j] == prev : sl->kind == OLY_FSLOT_IN;
            if (value && vj < 0) vj = j;
            else if (sl->kind != OLY_FSLOT_SCALAR) return NULL;
        }
        if (vj < 0) return NULL;
        if (k == 0) in = g->slot[r[vj]].idx;
        const char *name = o->eqn->prim->name;
        int base;
        if (o->n_in == 1) {
            if (strcmp(name, "neg") != 0) return NULL;
            code[k] = OLY_FC_NEG;
            scalar[k] = -1;
            prev = r[1];
            continue;
        }
        if (strcmp(name, "add") == 0) base = OLY_FC_ADD;
        else if (strcmp(name, "sub") == 0) base = OLY_FC_SUB;
        else if (strcmp(name, "mul") == 0) base = OLY_FC_MUL;
        else if (strcmp(name, "div") == 0) base = OLY_FC_DIV;
        else return NULL;
        code[k] = (uint8_t)(base + (vj == 1)); /* the _R code: scalar op value */
        scalar[k] = g->slot[r[1 - vj]].idx;
        prev = r[2];
    }
    *c = (oly_fchain){.f64 = t == OLY_FLOAT64, .in = in, .n = g->n_op, .code = code,
                      .scalar = scalar};
    return c;
}

#if OLY__CPU_X86
/* One op of a chain on vector v with the scalar s (as a vector). */
#define CHAIN_OP(v, cd, s, ADD, SUB, MUL, DIV, XOR, sign)                                       \
    switch (cd) {                                                                         \
    case OLY_FC_ADD: v = ADD(v, s); break;                                                \
    case OLY_FC_ADD_R: v = ADD(s, v); break;                                              \
    case OLY_FC_SUB: v = SUB(v, s); break;                                                \
    case OLY_FC_SUB_R: v = SUB(s, v); break;                                              \
    case OLY_FC_MUL: v = MUL(v, s); break;                                                \
    case OLY_FC_MUL_R: v = MUL(s, v); break;                                              \
    case OLY_FC_DIV: v = DIV(v, s); break;                                                \
    case OLY_FC_DIV_R: v = DIV(s, v); break;                                              \
    default: v = XOR(v, sign); break;                                                     \
    }

/* fname(c, x, y, n, sv): y = the chain on x, 4 vectors of W lanes at a time
 * (4 independent dependency chains hide the operations' latency), the tail
 * padded into whole vectors as the kernels pad theirs. sv: the scalars. */
#define CHAIN_LOOP(ATTR, fname, T, VT, W, LOAD, STORE, SET1, ADD, SUB, MUL, DIV, XOR)      \
    ATTR static void fname(const oly_fchain *c, const T *x, T *y, int64_t n, const T *sv)   \
    {                                                                                     \
        const VT sign = SET1((T)-0.0);                                                    \
        const uint8_t *code = c->code;                                                    \
        int nop = c->n;                                                                   \
        int64_t i = 0;                                                                    \
        for (; i + 4 * W <= n; i += 4 * W) {                                              \
            VT v0 = LOAD(x + i), v1 = LOAD(x + i + W), v2 = LOAD(x + i + 2 * W),           \
               v3 = LOAD(x + i + 3 * W);                                                  \
            for (int k = 0; k < nop; k++) {                                               \
                const VT s = SET1(sv[k]);                                                 \
                switch (code[k]) {                                                        \
                case OLY_FC_ADD: v0 = ADD(v0, s); v1 = ADD(v1, s); v2 = ADD(v2, s); v3 = ADD(v3, s); break; \
                case OLY_FC_ADD_R: v0 = ADD(s, v0); v1 = ADD(s, v1); v2 = ADD(s, v2); v3 = ADD(s, v3); break; \
                case OLY_FC_SUB: v0 = SUB(v0, s); v1 = SUB(v1, s); v2 = SUB(v2, s); v3 = SUB(v3, s); break; \
                case OLY_FC_SUB_R: v0 = SUB(s, v0); v1 = SUB(s, v1); v2 = SUB(s, v2); v3 = SUB(s, v3); break; \
                case OLY_FC_MUL: v0 = MUL(v0, s); v1 = MUL(v1, s); v2 = MUL(v2, s); v3 = MUL(v3, s); break; \
                case OLY_FC_MUL_R: v0 = MUL(s, v0); v1 = MUL(s, v1); v2 = MUL(s, v2); v3 = MUL(s, v3); break; \
                case OLY_FC_DIV: v0 = DIV(v0, s); v1 = DIV(v1, s); v2 = DIV(v2, s); v3 = DIV(v3, s); break; \
                case OLY_FC_DIV_R: v0 = DIV(s, v0); v1 = DIV(s, v1); v2 = DIV(s, v2); v3 = DIV(s, v3); break; \
                default: v0 = XOR(v0, sign); v1 = XOR(v1, sign); v2 = XOR(v2, sign); v3 = XOR(v3, sign); break; \
                }                                                                         \
            }                                                                             \
            STORE(y + i, v0);                                                             \
            STORE(y + i + W, v1);                                                         \
            STORE(y + i + 2 * W, v2);                                                     \
            STORE(y + i + 3 * W, v3);                                                     \
        }                                                                                 \
        for (; i < n; i += W) {                                                           \
            T t[W] = {0};                                                                 \
            int64_t m = n - i < W ? n - i : W;                                            \
            memcpy(t, x + i, (size_t)m * sizeof(T));                                      \
            VT v = LOAD(t);                                                               \
            for (int k = 0; k < nop; k++) {                                               \
                const VT s = SET1(sv[k]);                                                 \
                CHAIN_OP(v, code[k], s, ADD, SUB, MUL, DIV, XOR, sign)                    \
            }                                                                             \
            STORE(t, v);                                                                  \
            memcpy(y + i, t, (size_t)m * sizeof(T));                                      \
        }                                                                                 \
    }
CHAIN_LOOP(OLY__TARGET_AVX512, chain_f32_a5, float, __m512, 16, _mm512_loadu_ps,
           _mm512_storeu_ps, _mm512_set1_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps,
           _mm512_div_ps, _mm512_xor_ps)
CHAIN_LOOP(OLY__TARGET_AVX512, chain_f64_a5, double, __m512d, 8, _mm512_loadu_pd,
           _mm512_storeu_pd, _mm512_set1_pd, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd,
           _mm512_div_pd, _mm512_xor_pd)
CHAIN_LOOP(OLY__TARGET_AVX2, chain_f32_a2, float, __m256, 8, _mm256_loadu_ps,
           _mm256_storeu_ps, _mm256_set1_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps,
           _mm256_div_ps, _mm256_xor_ps)
CHAIN_LOOP(OLY__TARGET_AVX2, chain_f64_a2, double, __m256d, 4, _mm256_loadu_pd,
           _mm256_storeu_pd, _mm256_set1_pd, _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd,
           _mm256_div_pd, _mm256_xor_pd)

/* Elements [lo, hi) of chain group g at the vector level; false at the
 * portable level (the tile path runs it then). */
static bool run_chain(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t lo, int64_t hi)
{
    oly_cpu_level lv = oly__cpu_level();
    if (lv < OLY_CPU_LEVEL_AVX2) return false;
    const oly_fchain *c = g->chain;
    bool a5 = lv >= OLY_CPU_LEVEL_AVX512;
    if (c->f64) {
        double sv[CHAIN_MAX];
        for (int k = 0; k < c->n; k++)
            sv[k] = c->scalar[k] >= 0 ? *(const double *)ctx->in[c->scalar[k]] : 0;
        const double *x = (const double *)ctx->in[c->in] + lo;
        double *y = (double *)ctx->out[0] + lo;
        (a5 ? chain_f64_a5 : chain_f64_a2)(c, x, y, hi - lo, sv);
    } else {
        float sv[CHAIN_MAX];
        for (int k = 0; k < c->n; k++)
            sv[k] = c->scalar[k] >= 0 ? *(const float *)ctx->in[c->scalar[k]] : 0;
        const float *x = (const float *)ctx->in[c->in] + lo;
        float *y = (float *)ctx->out[0] + lo;
        (a5 ? chain_f32_a5 : chain_f32_a2)(c, x, y, hi - lo, sv);
    }
    return true;
}
#else
static bool run_chain(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t lo, int64_t hi)
{
    return false;
}
#endif

/* ---------------------------------------------------------------- register programs */

atomic_bool oly__cpu_fused_regs_avx2;

/* Groups with more slots or ops than these run tile by tile (the register
 * file lives on the stack: REGS_MAX_SLOT * RB vectors, 24 KiB at AVX-512). */
enum { REGS_MAX_SLOT = 48, REGS_MAX_OP = 256 };

/* The unary rows whose vector loops (src/cpu/elementwise.c) are exactly one
 * SLEEF u10 function per vector at both levels (rows SLEEF serves only over
 * part of their domain, libm past it, are not here). */
static const char *const math_name[] = {"exp", "exp2", "log", "expm1", "sin", "cos", "tan",
                                        "asin", "acos", "atan", "tanh", "atanh", "cbrt"};
enum { N_MATH = sizeof math_name / sizeof math_name[0] };

const oly_fregs *oly__cpu_fused_regs(const oly_fused *g, oly_arena *ar)
{
    if (g->n_op < 1 || g->n_op > REGS_MAX_OP || g->n_slot > REGS_MAX_SLOT || g->n_bcast)
        return NULL;
    oly_dtype t = g->slot[0].dtype;
    if (t != OLY_FLOAT32 && t != OLY_FLOAT64) return NULL;
    for (int s = 0; s < g->n_slot; s++)
        if (g->slot[s].dtype != t || g->slot[s].kind == OLY_FSLOT_BCAST) return NULL;
    for (int k = 0; k < g->n_op; k++) { /* every op: one result, one or two operands */
        const oly_fop *o = &g->op[k];
        if (o->n_out != 1 || o->n_in < 1 || o->n_in > 2) return NULL;
    }
    oly_frop *op = oly__arena_alloc(ar, (size_t)g->n_op * sizeof *op);
    oly_fregs *rg = oly__arena_alloc(ar, sizeof *rg);
    if (!op || !rg) return NULL;
    for (int k = 0; k < g->n_op; k++) {
        const oly_fop *o = &g->op[k];
        const int *r = &g->ref_slot[o->ref];
        oly_frop *f = &op[k];
        *f = (oly_frop){.a = r[0], .b = o->n_in == 2 ? r[1] : -1, .o = r[o->n_in]};
        if (!o->fn) { /* a copy out of the group */
            if (o->n_in != 1) return NULL;
            f->code = OLY_FR_COPY;
            continue;
        }
        const char *name = o->eqn->prim->name;
        if (o->n_in == 2) {
            if (strcmp(name, "add") == 0) f->code = OLY_FR_ADD;
            else if (strcmp(name, "sub") == 0) f->code = OLY_FR_SUB;
            else if (strcmp(name, "mul") == 0) f->code = OLY_FR_MUL;
            else if (strcmp(name, "div") == 0) f->code = OLY_FR_DIV;
            else return NULL;
            continue;
        }
        if (strcmp(name, "neg") == 0) f->code = OLY_FR_NEG;
        else if (strcmp(name, "abs") == 0) f->code = OLY_FR_ABS;
        else if (strcmp(name, "square") == 0) f->code = OLY_FR_SQUARE;
        else if (strcmp(name, "sqrt") == 0) f->code = OLY_FR_SQRT;
        else if (strcmp(name, "integer_pow") == 0) {
            const oly_params_integer_pow *P = o->eqn->params;
            f->code = OLY_FR_IPOW;
            f->e = P ? P->y : 1;
        } else {
            int m = 0;
            while (m < N_MATH && strcmp(name, math_name[m]) != 0) m++;
            if (m == N_MATH) return NULL;
            f->code = OLY_FR_MATH;
            f->math = (uint8_t)m;
        }
    }
    *rg = (oly_fregs){.f64 = t == OLY_FLOAT64, .n = g->n_op, .op = op};
    return rg;
}

#if OLY__CPU_X86
/* SLEEF's vector functions, by math_name's index: the ones the kernels call.
 * Only this table is compiled with the wider target (it holds pointers). */
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#include <sleef.h>
typedef __m256 (*math_f8)(__m256);
typedef __m256d (*math_d4)(__m256d);
typedef __m512 (*math_f16)(__m512);
typedef __m512d (*math_d8)(__m512d);
#define MATH_ROW(f) {Sleef_##f##f8_u10avx2, Sleef_##f##d4_u10avx2, Sleef_##f##f16_u10avx512f,   \
                     Sleef_##f##d8_u10avx512f}
static const struct {
    math_f8 f8;
    math_d4 d4;
    math_f16 f16;
    math_d8 d8;
} math_fn[N_MATH] = {MATH_ROW(exp),  MATH_ROW(exp2), MATH_ROW(log),  MATH_ROW(expm1),
                     MATH_ROW(sin),  MATH_ROW(cos),  MATH_ROW(tan),  MATH_ROW(asin),
                     MATH_ROW(acos), MATH_ROW(atan), MATH_ROW(tanh), MATH_ROW(atanh),
                     MATH_ROW(cbrt)};
#undef MATH_ROW
#pragma GCC pop_options

/* Vectors per block: each op runs on RB vectors of its operands at once (one
 * dispatch per op per block; the register file stays in L1). */
enum { RB = 8 };

/* fname(g, ctx, lo, hi): elements [lo, hi) of register group g. A block's
 * inputs are loaded before any of its outputs is stored, so output 0 may be
 * input 0's buffer. The last, shorter block is padded with zeros, as the
 * kernels pad their tails: lanes never mix, so its elements are the same. */
#define REGS_LOOP(ATTR, fname, T, VT, W, LOAD, STORE, SET1, ADD, SUB, MUL, DIV, XOR, ANDNOT, \
                  SQRT, MF)                                                               \
    ATTR static void fname(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t lo,      \
                           int64_t hi)                                                    \
    {                                                                                     \
        const oly_fregs *rg = g->regs;                                                    \
        VT r[REGS_MAX_SLOT][RB];                                                          \
        int ins[REGS_MAX_SLOT], outs[REGS_MAX_SLOT], n_ins = 0, n_outs = 0;               \
        const VT sign = SET1((T)-0.0), one = SET1((T)1);                                  \
        for (int s = 0; s < g->n_slot; s++) {                                             \
            const oly_fslot *sl = &g->slot[s];                                            \
            if (sl->kind == OLY_FSLOT_IN) ins[n_ins++] = s;                               \
            else if (sl->kind == OLY_FSLOT_OUT) outs[n_outs++] = s;                       \
            else if (sl->kind == OLY_FSLOT_SCALAR) {                                      \
                const VT v = SET1(*(const T *)ctx->in[sl->idx]);                          \
                for (int j = 0; j < RB; j++) r[s][j] = v;                                 \
            }                                                                             \
        }                                                                                 \
        for (int64_t i = lo; i < hi; i += RB * W) {                                       \
            int64_t m = hi - i < RB * W ? hi - i : RB * W;                                \
            for (int q = 0; q < n_ins; q++) {                                             \
                int s = ins[q];                                                           \
                const T *x = (const T *)ctx->in[g->slot[s].idx] + i;                      \
                if (m == RB * W) {                                                        \
                    for (int j = 0; j < RB; j++) r[s][j] = LOAD(x + j * W);               \
                } else {                                                                  \
                    T t[RB * W] = {0};                                                    \
                    memcpy(t, x, (size_t)m * sizeof(T));                                  \
                    for (int j = 0; j < RB; j++) r[s][j] = LOAD(t + j * W);               \
                }                                                                         \
            }                                                                             \
            for (int k = 0; k < rg->n; k++) {                                             \
                const oly_frop *f = &rg->op[k];                                           \
                VT *a = r[f->a], *o = r[f->o];                                            \
                const VT *b = f->b >= 0 ? r[f->b] : a;                                    \
                switch (f->code) {                                                        \
                case OLY_FR_ADD: for (int j = 0; j < RB; j++) o[j] = ADD(a[j], b[j]); break; \
                case OLY_FR_SUB: for (int j = 0; j < RB; j++) o[j] = SUB(a[j], b[j]); break; \
                case OLY_FR_MUL: for (int j = 0; j < RB; j++) o[j] = MUL(a[j], b[j]); break; \
                case OLY_FR_DIV: for (int j = 0; j < RB; j++) o[j] = DIV(a[j], b[j]); break; \
                case OLY_FR_NEG: for (int j = 0; j < RB; j++) o[j] = XOR(a[j], sign); break; \
                case OLY_FR_ABS: for (int j = 0; j < RB; j++) o[j] = ANDNOT(sign, a[j]); break; \
                case OLY_FR_SQUARE: for (int j = 0; j < RB; j++) o[j] = MUL(a[j], a[j]); break; \
                case OLY_FR_SQRT: for (int j = 0; j < RB; j++) o[j] = SQRT(a[j]); break;   \
                case OLY_FR_COPY: for (int j = 0; j < RB; j++) o[j] = a[j]; break;         \
                case OLY_FR_MATH: {                                                       \
                    VT (*fn)(VT) = math_fn[f->math].MF;                                   \
                    for (int j = 0; j < RB; j++) o[j] = fn(a[j]);                         \
                    break;                                                                \
                }                                                                         \
                case OLY_FR_IPOW: { /* as the kernel: x*x, or repeated squaring */        \
                    uint64_t mag = f->e < 0 ? 0u - (uint64_t)f->e : (uint64_t)f->e;       \
                    if (f->e == 2) {                                                      \
                        for (int j = 0; j < RB; j++) o[j] = MUL(a[j], a[j]);              \
                        break;                                                            \
                    }                                                                     \
                    for (int j = 0; j < RB; j++) {                                        \
                        VT acc = one, bb = a[j];                                          \
                        for (uint64_t e = mag; e; e >>= 1) {                              \
                            if (e & 1) acc = MUL(acc, bb);                                \
                            if (e > 1) bb = MUL(bb, bb);                                  \
                        }                                                                 \
                        o[j] = f->e < 0 ? DIV(one, acc) : acc;                            \
                    }                                                                     \
                    break;                                                                \
                }                                                                         \
                default: break;                                                           \
                }                                                                         \
            }                                                                             \
            for (int q = 0; q < n_outs; q++) {                                            \
                int s = outs[q];                                                          \
                T *y = (T *)ctx->out[g->slot[s].idx] + i;                                 \
                if (m == RB * W) {                                                        \
                    for (int j = 0; j < RB; j++) STORE(y + j * W, r[s][j]);               \
                } else {                                                                  \
                    T t[RB * W];                                                          \
                    for (int j = 0; j < RB; j++) STORE(t + j * W, r[s][j]);               \
                    memcpy(y, t, (size_t)m * sizeof(T));                                  \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }
REGS_LOOP(OLY__TARGET_AVX512, regs_f32_a5, float, __m512, 16, _mm512_loadu_ps,
          _mm512_storeu_ps, _mm512_set1_ps, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps,
          _mm512_div_ps, _mm512_xor_ps, _mm512_andnot_ps, _mm512_sqrt_ps, f16)
REGS_LOOP(OLY__TARGET_AVX512, regs_f64_a5, double, __m512d, 8, _mm512_loadu_pd,
          _mm512_storeu_pd, _mm512_set1_pd, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd,
          _mm512_div_pd, _mm512_xor_pd, _mm512_andnot_pd, _mm512_sqrt_pd, d8)
REGS_LOOP(OLY__TARGET_AVX2, regs_f32_a2, float, __m256, 8, _mm256_loadu_ps,
          _mm256_storeu_ps, _mm256_set1_ps, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps,
          _mm256_div_ps, _mm256_xor_ps, _mm256_andnot_ps, _mm256_sqrt_ps, f8)
REGS_LOOP(OLY__TARGET_AVX2, regs_f64_a2, double, __m256d, 4, _mm256_loadu_pd,
          _mm256_storeu_pd, _mm256_set1_pd, _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd,
          _mm256_div_pd, _mm256_xor_pd, _mm256_andnot_pd, _mm256_sqrt_pd, d4)

/* Elements [lo, hi) of register group g at the AVX-512 level (and at AVX2
 * when oly__cpu_fused_regs_avx2 says so); false below it (the tile path runs
 * it then). */
static bool run_regs(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t lo, int64_t hi)
{
    oly_cpu_level lv = oly__cpu_level();
    bool avx2 = atomic_load_explicit(&oly__cpu_fused_regs_avx2, memory_order_relaxed);
    if (lv < (avx2 ? OLY_CPU_LEVEL_AVX2 : OLY_CPU_LEVEL_AVX512)) return false;
    bool a5 = lv >= OLY_CPU_LEVEL_AVX512;
    if (g->regs->f64) (a5 ? regs_f64_a5 : regs_f64_a2)(g, ctx, lo, hi);
    else (a5 ? regs_f32_a5 : regs_f32_a2)(g, ctx, lo, hi);
    return true;
}
#else
static bool run_regs(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t lo, int64_t hi)
{
    return false;
}
#endif

/* ---------------------------------------------------------------- tiles */

oly_status oly__cpu_fused_tiles(const oly_fused *g, const oly_kernel_ctx *ctx, int64_t t_lo,
                                int64_t t_hi)
{
    if (t_hi <= t_lo || g->n <= 0) return OLY_OK;
    if (g->chain) {
        int64_t lo = t_lo * g->tile, hi = t_hi * g->tile < g->n ? t_hi * g->tile : g->n;
        if (run_chain(g, ctx, lo, hi)) return OLY_OK;
    }
    if (g->regs) {
        int64_t lo = t_lo * g->tile, hi = t_hi * g->tile < g->n ? t_hi * g->tile : g->n;
        if (run_regs(g, ctx, lo, hi)) return OLY_OK;
    }
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

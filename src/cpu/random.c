/* random.c — the CPU kernel of threefry2x32 (src/prims/random.c): Threefry-2x32
 * with 20 rounds, as Random123's threefry2x32_20 and JAX. Key schedule
 * ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA); the counter starts as x + (ks0, ks1),
 * then five groups of four rounds (rotations 13 15 26 6, then 17 29 16 24,
 * alternating), each group followed by the injection of the next two schedule
 * words plus the group's number into x.
 *
 * The loop runs 32 lanes a step in GCC vector types: AVX-512 or AVX2
 * instructions at those CPU levels (oly__cpu_level; AVX-512 rotates in
 * one instruction), SSE2 otherwise; the tail is padded into one more step so
 * every element goes through the same code. A rank-0 operand (fewer elements
 * than the output) is splat into every lane. */
#include "cpu/cpu.h"
#include "cpu/simd.h"

#define TF_PARITY 0x1BD11BDAu
#define ROTL(x, r) (((x) << (r)) | ((x) >> (32 - (r))))
#define ROUND(r)                                                                          \
    do {                                                                                  \
        x0 += x1;                                                                         \
        x1 = ROTL(x1, r);                                                                 \
        x1 ^= x0;                                                                         \
    } while (0)
/* The cipher on k0, k1, x0, x1 (uint32_t or a vector of them), in place in x. */
#define THREEFRY_20()                                                                     \
    do {                                                                                  \
        ks2 = k0 ^ k1 ^ TF_PARITY;                                                        \
        x0 += k0;                                                                         \
        x1 += k1;                                                                         \
        ROUND(13); ROUND(15); ROUND(26); ROUND(6);                                        \
        x0 += k1;                                                                         \
        x1 += ks2 + 1u;                                                                   \
        ROUND(17); ROUND(29); ROUND(16); ROUND(24);                                       \
        x0 += ks2;                                                                        \
        x1 += k0 + 2u;                                                                    \
        ROUND(13); ROUND(15); ROUND(26); ROUND(6);                                        \
        x0 += k0;                                                                         \
        x1 += k1 + 3u;                                                                    \
        ROUND(17); ROUND(29); ROUND(16); ROUND(24);                                       \
        x0 += k1;                                                                         \
        x1 += ks2 + 4u;                                                                   \
        ROUND(13); ROUND(15); ROUND(26); ROUND(6);                                        \
        x0 += ks2;                                                                        \
        x1 += k0 + 5u;                                                                    \
    } while (0)

/* Elements [lo, hi) of the output; in[k] has one element (splat) when
 * bcast[k], else one per output element. Outputs may be written over input
 * 0 or 1 at the same index (everything is loaded before anything is stored).
 *
 * One vector's rounds are a dependency chain (~3 cycles a round), so each
 * step runs U independent vectors of W lanes. With both keys broadcast (one
 * key against a block of counters, the common case) the key schedule is held
 * once; otherwise each vector has its own. */
/* Tests pin a loop here (0: the best this CPU has; 1: the portable one; 2:
 * AVX2 at most), to check every variant on one machine. Not for threads. */
int oly__cpu_threefry_loop_cap;

#if defined(__GNUC__)
enum { W = 8, STEP = 4 * W };
typedef uint32_t u32xw __attribute__((vector_size(4 * W)));

/* Four independent vectors (a_u, b_u) = (x0, x1) lanes; keys ka_u, kb_u, kc_u
 * (ks0, ks1, ks2) are one vector each, or the same vector four times. */
#define R1(a, b, r)                                                                       \
    a += b;                                                                               \
    b = ROTL(b, r);                                                                       \
    b ^= a;
#define V_ROUND(r) R1(a0, b0, r) R1(a1, b1, r) R1(a2, b2, r) R1(a3, b3, r)
#define I1(u, p, q, c)                                                                    \
    a##u += p##u;                                                                         \
    b##u += q##u + (c);
#define V_INJECT(p, q, c) I1(0, p, q, c) I1(1, p, q, c) I1(2, p, q, c) I1(3, p, q, c)
#define V_THREEFRY_20()                                                                   \
    do {                                                                                  \
        V_INJECT(ka, kb, 0u)                                                              \
        V_ROUND(13) V_ROUND(15) V_ROUND(26) V_ROUND(6)                                    \
        V_INJECT(kb, kc, 1u)                                                              \
        V_ROUND(17) V_ROUND(29) V_ROUND(16) V_ROUND(24)                                   \
        V_INJECT(kc, ka, 2u)                                                              \
        V_ROUND(13) V_ROUND(15) V_ROUND(26) V_ROUND(6)                                    \
        V_INJECT(ka, kb, 3u)                                                              \
        V_ROUND(17) V_ROUND(29) V_ROUND(16) V_ROUND(24)                                   \
        V_INJECT(kb, kc, 4u)                                                              \
        V_ROUND(13) V_ROUND(15) V_ROUND(26) V_ROUND(6)                                    \
        V_INJECT(kc, ka, 5u)                                                              \
    } while (0)

/* v0..v3 = STEP elements of operand k from element i (m of them valid). */
#define V_LOAD(v, k)                                                                      \
    do {                                                                                  \
        uint32_t t_[STEP];                                                                \
        const uint32_t *p_ = in[k] + i;                                                   \
        if (bcast[k]) {                                                                   \
            for (int l_ = 0; l_ < STEP; l_++) t_[l_] = in[k][0];                          \
            p_ = t_;                                                                      \
        } else if (m < STEP) {                                                            \
            memset(t_, 0, sizeof t_);                                                     \
            memcpy(t_, p_, (size_t)m * 4);                                                \
            p_ = t_;                                                                      \
        }                                                                                 \
        memcpy(&v##0, p_, sizeof(u32xw));                                                 \
        memcpy(&v##1, p_ + W, sizeof(u32xw));                                             \
        memcpy(&v##2, p_ + 2 * W, sizeof(u32xw));                                         \
        memcpy(&v##3, p_ + 3 * W, sizeof(u32xw));                                         \
    } while (0)
#define V_STORE(y, v)                                                                     \
    do {                                                                                  \
        uint32_t t_[STEP];                                                                \
        uint32_t *p_ = m == STEP ? (y) + i : t_;                                          \
        memcpy(p_, &v##0, sizeof(u32xw));                                                 \
        memcpy(p_ + W, &v##1, sizeof(u32xw));                                             \
        memcpy(p_ + 2 * W, &v##2, sizeof(u32xw));                                         \
        memcpy(p_ + 3 * W, &v##3, sizeof(u32xw));                                         \
        if (m < STEP) memcpy((y) + i, t_, (size_t)m * 4);                                 \
    } while (0)

/* Both keys broadcast: one schedule for every vector. */
#define LOOP_SPLAT_KEYS                                                                   \
    {                                                                                     \
        u32xw ka0 = (u32xw){0} + in[0][0], kb0 = (u32xw){0} + in[1][0];                   \
        u32xw kc0 = ka0 ^ kb0 ^ TF_PARITY;                                                \
        u32xw ka1 = ka0, ka2 = ka0, ka3 = ka0, kb1 = kb0, kb2 = kb0, kb3 = kb0;           \
        u32xw kc1 = kc0, kc2 = kc0, kc3 = kc0;                                            \
        for (int64_t i = lo; i < hi; i += STEP) {                                         \
            int64_t m = hi - i < STEP ? hi - i : STEP;                                    \
            u32xw a0, a1, a2, a3, b0, b1, b2, b3;                                         \
            V_LOAD(a, 2);                                                                 \
            V_LOAD(b, 3);                                                                 \
            V_THREEFRY_20();                                                              \
            V_STORE(y0, a);                                                               \
            V_STORE(y1, b);                                                               \
        }                                                                                 \
    }
#define LOOP_GENERAL                                                                      \
    {                                                                                     \
        for (int64_t i = lo; i < hi; i += STEP) {                                         \
            int64_t m = hi - i < STEP ? hi - i : STEP;                                    \
            u32xw ka0, ka1, ka2, ka3, kb0, kb1, kb2, kb3, a0, a1, a2, a3, b0, b1, b2, b3;  \
            V_LOAD(ka, 0);                                                                \
            V_LOAD(kb, 1);                                                                \
            V_LOAD(a, 2);                                                                 \
            V_LOAD(b, 3);                                                                 \
            u32xw kc0 = ka0 ^ kb0 ^ TF_PARITY, kc1 = ka1 ^ kb1 ^ TF_PARITY;               \
            u32xw kc2 = ka2 ^ kb2 ^ TF_PARITY, kc3 = ka3 ^ kb3 ^ TF_PARITY;               \
            V_THREEFRY_20();                                                              \
            V_STORE(y0, a);                                                               \
            V_STORE(y1, b);                                                               \
        }                                                                                 \
    }

#define LOOP_PARAMS                                                                       \
    (const uint32_t *const *in, const bool *bcast, uint32_t *y0, uint32_t *y1, int64_t lo, \
     int64_t hi)

static void splat_generic LOOP_PARAMS LOOP_SPLAT_KEYS
#if defined(__x86_64__) && !defined(__clang__)
#define HAVE_X86_LOOPS 1
__attribute__((target("avx2"))) static void splat_avx2 LOOP_PARAMS LOOP_SPLAT_KEYS
__attribute__((target("avx2,avx512f,avx512vl"))) static void splat_avx512 LOOP_PARAMS LOOP_SPLAT_KEYS
#endif
static void general_generic LOOP_PARAMS LOOP_GENERAL
#ifdef HAVE_X86_LOOPS
__attribute__((target("avx2"))) static void general_avx2 LOOP_PARAMS LOOP_GENERAL
__attribute__((target("avx2,avx512f,avx512vl"))) static void general_avx512 LOOP_PARAMS LOOP_GENERAL
#endif

typedef void loop_fn LOOP_PARAMS;

/* The loop for the CPU level (simd.h): AVX-512 (a rotate instruction), AVX2,
 * else the portable vector code. */
static loop_fn *pick_loop(bool splat)
{
#ifdef HAVE_X86_LOOPS
    int cap = oly__cpu_threefry_loop_cap;
    oly_cpu_level level = oly__cpu_level();
    if (cap != 1 && level >= OLY_CPU_LEVEL_AVX2) {
        if (cap != 2 && level >= OLY_CPU_LEVEL_AVX512)
            return splat ? splat_avx512 : general_avx512;
        return splat ? splat_avx2 : general_avx2;
    }
#endif
    return splat ? splat_generic : general_generic;
}

#else /* no vector extensions: one element at a time */
static void threefry_one(uint32_t k0, uint32_t k1, uint32_t *px0, uint32_t *px1)
{
    uint32_t x0 = *px0, x1 = *px1, ks2;
    THREEFRY_20();
    *px0 = x0;
    *px1 = x1;
}
typedef void loop_fn(const uint32_t *const *in, const bool *bcast, uint32_t *y0, uint32_t *y1,
                     int64_t lo, int64_t hi);
static void loop_scalar(const uint32_t *const *in, const bool *bcast, uint32_t *y0,
                        uint32_t *y1, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++) {
        uint32_t k0 = in[0][bcast[0] ? 0 : i], k1 = in[1][bcast[1] ? 0 : i];
        uint32_t x0 = in[2][bcast[2] ? 0 : i], x1 = in[3][bcast[3] ? 0 : i];
        threefry_one(k0, k1, &x0, &x1);
        y0[i] = x0;
        y1[i] = x1;
    }
}
static loop_fn *pick_loop(bool splat)
{
    (void)splat;
    return loop_scalar;
}
enum { STEP = 1 };
#endif

static oly_status threefry_kernel(const oly_kernel_ctx *c)
{
    int64_t n = oly_aval_size(&c->out_aval[0]);
    const uint32_t *in[4];
    bool bcast[4];
    for (int k = 0; k < 4; k++) {
        in[k] = c->in[k];
        bcast[k] = oly_aval_size(&c->in_aval[k]) != n;
    }
    int64_t nth = c->nth > 0 ? c->nth : 1, ith = c->ith < 0 ? 0 : c->ith;
    /* whole vectors per thread, so only the last share has a tail */
    int64_t per = ((n + nth - 1) / nth + STEP - 1) / STEP * STEP;
    int64_t lo = ith * per, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    if (lo >= hi) return OLY_OK;
    pick_loop(bcast[0] && bcast[1])(in, bcast, c->out[0], c->out[1], lo, hi);
    return OLY_OK;
}

/* Output 0 may take input 0's buffer: lanes are loaded before they are stored. */
const oly_cpu_kernel oly__cpu_threefry2x32 = {.fn = threefry_kernel, .inplace_ok = true,
                                              .splits = true};

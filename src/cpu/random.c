/* random.c — the CPU kernel of threefry2x32 (src/prims/random.c): Threefry-2x32
 * with 20 rounds, as Random123's threefry2x32_20 and JAX. Key schedule
 * ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA); the counter starts as x + (ks0, ks1),
 * then five groups of four rounds (rotations 13 15 26 6, then 17 29 16 24,
 * alternating), each group followed by the injection of the next two schedule
 * words plus the group's number into x.
 *
 * The loop runs eight lanes at a time in GCC vector types: AVX2 instructions
 * where the CPU has them (oly__cpu_simd_ok), SSE2 pairs otherwise; the tail is
 * padded into one more vector so every element goes through the same code. A
 * rank-0 operand (fewer elements than the output) is splat into every lane. */
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

enum { LANES = 8 };

/* One element, for tests and for reference. */
static inline void threefry_one(uint32_t k0, uint32_t k1, uint32_t *px0, uint32_t *px1)
{
    uint32_t x0 = *px0, x1 = *px1, ks2;
    THREEFRY_20();
    *px0 = x0;
    *px1 = x1;
}

/* Elements [lo, hi) of the output; in[k] has one element (splat) when
 * bcast[k], else one per output element. Outputs may be written over input
 * 0 or 1 at the same index (everything is loaded before anything is stored). */
#if defined(__GNUC__)
typedef uint32_t u32x8 __attribute__((vector_size(4 * LANES)));

#define LOOP_BODY                                                                         \
    {                                                                                     \
        u32x8 v[4];                                                                       \
        for (int64_t i = lo; i < hi; i += LANES) {                                        \
            int64_t m = hi - i < LANES ? hi - i : LANES;                                  \
            for (int k = 0; k < 4; k++) {                                                 \
                if (bcast[k]) {                                                           \
                    uint32_t s = in[k][0];                                                \
                    for (int l = 0; l < LANES; l++) v[k][l] = s;                          \
                } else if (m == LANES) {                                                  \
                    memcpy(&v[k], in[k] + i, sizeof v[k]);                                \
                } else {                                                                  \
                    uint32_t t[LANES] = {0};                                              \
                    memcpy(t, in[k] + i, (size_t)m * 4);                                  \
                    memcpy(&v[k], t, sizeof t);                                           \
                }                                                                         \
            }                                                                             \
            u32x8 k0 = v[0], k1 = v[1], x0 = v[2], x1 = v[3], ks2;                         \
            THREEFRY_20();                                                                \
            if (m == LANES) {                                                             \
                memcpy(y0 + i, &x0, sizeof x0);                                           \
                memcpy(y1 + i, &x1, sizeof x1);                                           \
            } else {                                                                      \
                memcpy(y0 + i, &x0, (size_t)m * 4);                                       \
                memcpy(y1 + i, &x1, (size_t)m * 4);                                       \
            }                                                                             \
        }                                                                                 \
    }

#if defined(__x86_64__) && !defined(__clang__)
__attribute__((target("avx2"))) static void loop_avx2(const uint32_t *const *in,
                                                      const bool *bcast, uint32_t *y0,
                                                      uint32_t *y1, int64_t lo, int64_t hi)
LOOP_BODY
#define HAVE_AVX2_LOOP 1
#endif

static void loop_generic(const uint32_t *const *in, const bool *bcast, uint32_t *y0,
                         uint32_t *y1, int64_t lo, int64_t hi)
LOOP_BODY

#else /* no vector extensions: one element at a time */
static void loop_generic(const uint32_t *const *in, const bool *bcast, uint32_t *y0,
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
    int64_t per = ((n + nth - 1) / nth + LANES - 1) / LANES * LANES;
    int64_t lo = ith * per, hi = lo + per;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    if (lo >= hi) return OLY_OK;
#ifdef HAVE_AVX2_LOOP
    if (oly__cpu_simd_ok()) {
        loop_avx2(in, bcast, c->out[0], c->out[1], lo, hi);
        return OLY_OK;
    }
#endif
    loop_generic(in, bcast, c->out[0], c->out[1], lo, hi);
    return OLY_OK;
}

/* Output 0 may take input 0's buffer: lanes are loaded before they are stored. */
const oly_cpu_kernel oly__cpu_threefry2x32 = {.fn = threefry_kernel, .inplace_ok = true};

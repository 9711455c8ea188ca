/* convert.c — element conversion between every pair of dtypes, and scalar
 * load/store. NumPy casting semantics where they are defined, and never
 * undefined behaviour where they are not: float -> int truncates toward zero,
 * saturates out of range and maps NaN to 0; int -> int wraps; complex -> real
 * keeps the real part; anything -> bool is != 0. float16 and bfloat16 round to
 * nearest even (wider sources go through a round-to-odd float32 so they are
 * rounded once). */
#include "internal.h"

#include <math.h>

typedef struct { float re, im; } c64_t;
typedef struct { double re, im; } c128_t;

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---------------------------------------------------------------- float16 / bfloat16 */

float oly__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return bitsf(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        float f = (float)mant * 0x1p-24f; /* exact: mant < 2^10 */
        return sign ? -f : f;
    }
    return bitsf(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t oly__float_to_half(float f)
{
    uint32_t x = fbits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf, or NaN kept quiet with its top payload bits */
        return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (x >= 0x38800000u) {                                  /* normal half */
        uint32_t odd = (x >> 13) & 1u;
        x += 0xc8000000u + 0xfffu + odd; /* rebias exponent, round to nearest even */
        return (uint16_t)(sign | (x >> 13));
    }
    /* Subnormal half: adding 0.5 aligns the value to multiples of 2^-24 with
     * the FPU's round to nearest even. */
    float t = bitsf(x) + 0.5f;
    return (uint16_t)(sign | (fbits(t) - 0x3f000000u));
}

float oly__bf16_to_float(uint16_t h) { return bitsf((uint32_t)h << 16); }

uint16_t oly__float_to_bf16(float f)
{
    uint32_t x = fbits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* double -> float rounded to odd: a later round-to-nearest to a format with at
 * most 22 significand bits then equals a single rounding of d. */
static float float_odd(double d)
{
    float f = (float)d;
    if (isnan(d) || isinf(f) || (double)f == d) return f;
    uint32_t b = fbits(f);
    if (fabs((double)f) > fabs(d)) b -= 1; /* truncate toward zero */
    return bitsf(b | 1u);
}

/* Integers -> double rounded to odd (exact below 2^53). Integer arithmetic
 * only: long double is not exact everywhere (valgrind emulates it as double). */
static double u64_odd(uint64_t x)
{
    double d = (double)x;
    if (x <= ((uint64_t)1 << 53)) return d;
    /* d is an integer in [2^53, 2^64]; 2^64 itself does not fit in uint64. */
    bool above = d >= 18446744073709551616.0 || (uint64_t)d > x;
    if (!above && (uint64_t)d == x) return d;
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    if (above) b -= 1;
    b |= 1u;
    memcpy(&d, &b, sizeof d);
    return d;
}

static double i64_odd(int64_t x)
{
    uint64_t m = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    double d = u64_odd(m);
    return x < 0 ? -d : d;
}

/* ---------------------------------------------------------------- loads */

/* Each source loads into one of four wide kinds: i (int64), u (uint64),
 * f (double), c (c128_t). */
static inline int64_t ld_i8(int8_t v) { return v; }
static inline int64_t ld_i16(int16_t v) { return v; }
static inline int64_t ld_i32(int32_t v) { return v; }
static inline int64_t ld_i64(int64_t v) { return v; }
static inline uint64_t ld_bool(uint8_t v) { return v != 0; }
static inline uint64_t ld_u8(uint8_t v) { return v; }
static inline uint64_t ld_u16(uint16_t v) { return v; }
static inline uint64_t ld_u32(uint32_t v) { return v; }
static inline uint64_t ld_u64(uint64_t v) { return v; }
static inline double ld_f16(uint16_t v) { return oly__half_to_float(v); }
static inline double ld_bf16(uint16_t v) { return oly__bf16_to_float(v); }
static inline double ld_f32(float v) { return v; }
static inline double ld_f64(double v) { return v; }
static inline c128_t ld_c64(c64_t v) { return (c128_t){v.re, v.im}; }
static inline c128_t ld_c128(c128_t v) { return v; }

/* ---------------------------------------------------------------- stores */

/* float -> integer with saturation; NaN -> 0; truncation toward zero. */
#define SAT_SIGNED(NAME, T, MIN, MAX)                                                     \
    static inline T NAME(double d)                                                        \
    {                                                                                     \
        if (isnan(d)) return 0;                                                           \
        if (d <= (double)(MIN)) return MIN;                                               \
        if (d >= -(double)(MIN)) return MAX;                                              \
        return (T)d;                                                                      \
    }
#define SAT_UNSIGNED(NAME, T, MAX)                                                        \
    static inline T NAME(double d)                                                        \
    {                                                                                     \
        if (isnan(d) || d <= 0) return 0;                                                 \
        if (d >= 2.0 * ((double)((MAX) / 2) + 1.0)) return MAX;                           \
        return (T)d;                                                                      \
    }
SAT_SIGNED(sat_i8, int8_t, INT8_MIN, INT8_MAX)
SAT_SIGNED(sat_i16, int16_t, INT16_MIN, INT16_MAX)
SAT_SIGNED(sat_i32, int32_t, INT32_MIN, INT32_MAX)
SAT_SIGNED(sat_i64, int64_t, INT64_MIN, INT64_MAX)
SAT_UNSIGNED(sat_u8, uint8_t, UINT8_MAX)
SAT_UNSIGNED(sat_u16, uint16_t, UINT16_MAX)
SAT_UNSIGNED(sat_u32, uint32_t, UINT32_MAX)
SAT_UNSIGNED(sat_u64, uint64_t, UINT64_MAX)

/* Integer destinations: wrap from integers (modular, as NumPy), saturate from floats. */
#define INT_STORES(S, T)                                                                  \
    static inline T i_to_##S(int64_t v) { return (T)v; }                                  \
    static inline T u_to_##S(uint64_t v) { return (T)v; }                                 \
    static inline T f_to_##S(double v) { return sat_##S(v); }                             \
    static inline T c_to_##S(c128_t v) { return sat_##S(v.re); }
INT_STORES(i8, int8_t)
INT_STORES(i16, int16_t)
INT_STORES(i32, int32_t)
INT_STORES(i64, int64_t)
INT_STORES(u8, uint8_t)
INT_STORES(u16, uint16_t)
INT_STORES(u32, uint32_t)
INT_STORES(u64, uint64_t)

static inline uint8_t i_to_bool(int64_t v) { return v != 0; }
static inline uint8_t u_to_bool(uint64_t v) { return v != 0; }
static inline uint8_t f_to_bool(double v) { return v != 0; }
static inline uint8_t c_to_bool(c128_t v) { return v.re != 0 || v.im != 0; }

static inline uint16_t i_to_f16(int64_t v) { return oly__float_to_half(float_odd(i64_odd(v))); }
static inline uint16_t u_to_f16(uint64_t v) { return oly__float_to_half(float_odd(u64_odd(v))); }
static inline uint16_t f_to_f16(double v) { return oly__float_to_half(float_odd(v)); }
static inline uint16_t c_to_f16(c128_t v) { return oly__float_to_half(float_odd(v.re)); }

static inline uint16_t i_to_bf16(int64_t v) { return oly__float_to_bf16(float_odd(i64_odd(v))); }
static inline uint16_t u_to_bf16(uint64_t v) { return oly__float_to_bf16(float_odd(u64_odd(v))); }
static inline uint16_t f_to_bf16(double v) { return oly__float_to_bf16(float_odd(v)); }
static inline uint16_t c_to_bf16(c128_t v) { return oly__float_to_bf16(float_odd(v.re)); }

static inline float i_to_f32(int64_t v) { return (float)v; }
static inline float u_to_f32(uint64_t v) { return (float)v; }
static inline float f_to_f32(double v) { return (float)v; }
static inline float c_to_f32(c128_t v) { return (float)v.re; }

static inline double i_to_f64(int64_t v) { return (double)v; }
static inline double u_to_f64(uint64_t v) { return (double)v; }
static inline double f_to_f64(double v) { return v; }
static inline double c_to_f64(c128_t v) { return v.re; }

static inline c64_t i_to_c64(int64_t v) { return (c64_t){(float)v, 0}; }
static inline c64_t u_to_c64(uint64_t v) { return (c64_t){(float)v, 0}; }
static inline c64_t f_to_c64(double v) { return (c64_t){(float)v, 0}; }
static inline c64_t c_to_c64(c128_t v) { return (c64_t){(float)v.re, (float)v.im}; }

static inline c128_t i_to_c128(int64_t v) { return (c128_t){(double)v, 0}; }
static inline c128_t u_to_c128(uint64_t v) { return (c128_t){(double)v, 0}; }
static inline c128_t f_to_c128(double v) { return (c128_t){v, 0}; }
static inline c128_t c_to_c128(c128_t v) { return v; }

/* ---------------------------------------------------------------- loops */

#define LOOP(ST, LD, DT, STORE)                                                           \
    do {                                                                                  \
        const ST *s_ = src;                                                               \
        DT *d_ = dst;                                                                     \
        for (int64_t i = 0; i < n; i++) d_[i] = STORE(LD(s_[i]));                         \
    } while (0)

#define FROM(K, ST, LD)                                                                   \
    switch (to) {                                                                         \
    case OLY_BOOL: LOOP(ST, LD, uint8_t, K##_to_bool); break;                             \
    case OLY_INT8: LOOP(ST, LD, int8_t, K##_to_i8); break;                                \
    case OLY_INT16: LOOP(ST, LD, int16_t, K##_to_i16); break;                             \
    case OLY_INT32: LOOP(ST, LD, int32_t, K##_to_i32); break;                             \
    case OLY_INT64: LOOP(ST, LD, int64_t, K##_to_i64); break;                             \
    case OLY_UINT8: LOOP(ST, LD, uint8_t, K##_to_u8); break;                              \
    case OLY_UINT16: LOOP(ST, LD, uint16_t, K##_to_u16); break;                           \
    case OLY_UINT32: LOOP(ST, LD, uint32_t, K##_to_u32); break;                           \
    case OLY_UINT64: LOOP(ST, LD, uint64_t, K##_to_u64); break;                           \
    case OLY_FLOAT16: LOOP(ST, LD, uint16_t, K##_to_f16); break;                          \
    case OLY_BFLOAT16: LOOP(ST, LD, uint16_t, K##_to_bf16); break;                        \
    case OLY_FLOAT32: LOOP(ST, LD, float, K##_to_f32); break;                             \
    case OLY_FLOAT64: LOOP(ST, LD, double, K##_to_f64); break;                            \
    case OLY_COMPLEX64: LOOP(ST, LD, c64_t, K##_to_c64); break;                           \
    case OLY_COMPLEX128: LOOP(ST, LD, c128_t, K##_to_c128); break;                        \
    default: break;                                                                       \
    }

void oly__convert(const void *src, oly_dtype from, void *dst, oly_dtype to, int64_t n)
{
    if (n <= 0 || (unsigned)from >= OLY_DTYPE_COUNT || (unsigned)to >= OLY_DTYPE_COUNT) return;
    if (from == to && from != OLY_BOOL) {
        if (src != dst) memmove(dst, src, (size_t)n * oly_dtype_size(from));
        return;
    }
    /* float32 needs no round-to-odd step: convert it directly. */
    if (from == OLY_FLOAT32 && to == OLY_FLOAT16) {
        LOOP(float, (float), uint16_t, oly__float_to_half);
        return;
    }
    if (from == OLY_FLOAT32 && to == OLY_BFLOAT16) {
        LOOP(float, (float), uint16_t, oly__float_to_bf16);
        return;
    }
    switch (from) {
    case OLY_BOOL: FROM(u, uint8_t, ld_bool); break;
    case OLY_INT8: FROM(i, int8_t, ld_i8); break;
    case OLY_INT16: FROM(i, int16_t, ld_i16); break;
    case OLY_INT32: FROM(i, int32_t, ld_i32); break;
    case OLY_INT64: FROM(i, int64_t, ld_i64); break;
    case OLY_UINT8: FROM(u, uint8_t, ld_u8); break;
    case OLY_UINT16: FROM(u, uint16_t, ld_u16); break;
    case OLY_UINT32: FROM(u, uint32_t, ld_u32); break;
    case OLY_UINT64: FROM(u, uint64_t, ld_u64); break;
    case OLY_FLOAT16: FROM(f, uint16_t, ld_f16); break;
    case OLY_BFLOAT16: FROM(f, uint16_t, ld_bf16); break;
    case OLY_FLOAT32: FROM(f, float, ld_f32); break;
    case OLY_FLOAT64: FROM(f, double, ld_f64); break;
    case OLY_COMPLEX64: FROM(c, c64_t, ld_c64); break;
    case OLY_COMPLEX128: FROM(c, c128_t, ld_c128); break;
    default: break;
    }
}

/* ---------------------------------------------------------------- scalars */

void oly_scalar_store(const oly_scalar *s, oly_dtype t, void *dst)
{
    if ((unsigned)t >= OLY_DTYPE_COUNT || !s || !dst) return;
    _Alignas(16) unsigned char tmp[16];
    oly_dtype from = s->dtype;
    const void *src;
    if (oly_dtype_is_unsigned_int(from)) {
        src = &s->v.u;
        from = OLY_UINT64;
    } else if (oly_dtype_is_float(from)) {
        src = &s->v.f;
        from = OLY_FLOAT64;
    } else if (oly_dtype_is_complex(from)) {
        src = s->v.c;
        from = OLY_COMPLEX128;
    } else { /* bool and signed ints (and anything invalid) live in i */
        src = &s->v.i;
        from = OLY_INT64;
    }
    if (s->dtype == OLY_BOOL && t != OLY_BOOL) {
        int64_t b = s->v.i != 0;
        oly__convert(&b, OLY_INT64, tmp, t, 1);
    } else {
        oly__convert(src, from, tmp, t, 1);
    }
    memcpy(dst, tmp, oly_dtype_size(t));
}

oly_scalar oly_scalar_load(oly_dtype t, const void *src)
{
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    s.weak = false;
    if ((unsigned)t >= OLY_DTYPE_COUNT || !src) return s;
    _Alignas(16) unsigned char tmp[16];
    memcpy(tmp, src, oly_dtype_size(t));
    if (oly_dtype_is_unsigned_int(t)) oly__convert(tmp, t, &s.v.u, OLY_UINT64, 1);
    else if (oly_dtype_is_float(t)) oly__convert(tmp, t, &s.v.f, OLY_FLOAT64, 1);
    else if (oly_dtype_is_complex(t)) oly__convert(tmp, t, s.v.c, OLY_COMPLEX128, 1);
    else oly__convert(tmp, t, &s.v.i, OLY_INT64, 1);
    return s;
}

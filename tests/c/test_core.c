/* test_core.c — dtypes, promotion, avals, conversions, arrays, host functions. */
#include "test.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>

/* ---------------------------------------------------------------- dtypes */

TEST(core_dtype_names_round_trip)
{
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        oly_dtype got = OLY_DTYPE_COUNT;
        CHECK_OK(oly_dtype_from_name(oly_dtype_name((oly_dtype)t), &got));
        CHECK_EQ(got, t);
        got = OLY_DTYPE_COUNT;
        CHECK_OK(oly_dtype_from_name(oly_dtype_short_name((oly_dtype)t), &got));
        CHECK_EQ(got, t);
    }
    CHECK_STREQ(oly_dtype_name(OLY_FLOAT32), "float32");
    CHECK_STREQ(oly_dtype_short_name(OLY_FLOAT32), "f32");
    CHECK_STREQ(oly_dtype_short_name(OLY_BFLOAT16), "bf16");
    CHECK_STREQ(oly_dtype_short_name(OLY_BOOL), "bool");
    CHECK_STREQ(oly_dtype_short_name(OLY_COMPLEX64), "c64");
    CHECK_STREQ(oly_dtype_short_name(OLY_UINT8), "u8");
    CHECK_STREQ(oly_dtype_short_name(OLY_INT32), "i32");
    CHECK_STREQ(oly_dtype_name(OLY_BFLOAT16), "bfloat16");
    CHECK_STREQ(oly_dtype_name(OLY_COMPLEX128), "complex128");
    oly_dtype t = OLY_FLOAT32;
    CHECK_OK(oly_dtype_from_name("bool_", &t));
    CHECK_EQ(t, OLY_BOOL);
    t = OLY_INT8;
    CHECK_ERR(oly_dtype_from_name("float33", &t), OLY_ERR_TYPE, "float33");
    CHECK_EQ(t, OLY_INT8); /* untouched on failure */
    CHECK_ERR(oly_dtype_from_name(NULL, &t), OLY_ERR_INVALID, "NULL");
}

TEST(core_dtype_sizes_and_predicates)
{
    static const size_t sizes[OLY_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) CHECK_EQ(oly_dtype_size((oly_dtype)t), sizes[t]);
    CHECK(oly_dtype_is_bool(OLY_BOOL) && !oly_dtype_is_int(OLY_BOOL));
    CHECK(oly_dtype_is_signed_int(OLY_INT8) && !oly_dtype_is_signed_int(OLY_UINT8));
    CHECK(oly_dtype_is_unsigned_int(OLY_UINT64) && !oly_dtype_is_unsigned_int(OLY_INT64));
    CHECK(oly_dtype_is_int(OLY_UINT16) && oly_dtype_is_int(OLY_INT16));
    CHECK(oly_dtype_is_float(OLY_BFLOAT16) && oly_dtype_is_float(OLY_FLOAT16));
    CHECK(!oly_dtype_is_float(OLY_COMPLEX64) && oly_dtype_is_complex(OLY_COMPLEX128));
    CHECK(oly_dtype_is_inexact(OLY_COMPLEX64) && oly_dtype_is_inexact(OLY_FLOAT64));
    CHECK(!oly_dtype_is_inexact(OLY_INT64) && !oly_dtype_is_inexact(OLY_BOOL));
}

TEST(core_x64_canonicalize)
{
    bool was = oly_x64_enabled();
    oly_set_x64(false);
    CHECK(!oly_x64_enabled());
    CHECK_EQ(oly_dtype_canonicalize(OLY_INT64), OLY_INT32);
    CHECK_EQ(oly_dtype_canonicalize(OLY_UINT64), OLY_UINT32);
    CHECK_EQ(oly_dtype_canonicalize(OLY_FLOAT64), OLY_FLOAT32);
    CHECK_EQ(oly_dtype_canonicalize(OLY_COMPLEX128), OLY_COMPLEX64);
    CHECK_EQ(oly_dtype_canonicalize(OLY_INT16), OLY_INT16);
    CHECK_EQ(oly_dtype_canonicalize(OLY_BFLOAT16), OLY_BFLOAT16);
    CHECK_EQ(oly_default_float(), OLY_FLOAT32);
    CHECK_EQ(oly_default_int(), OLY_INT32);
    oly_set_x64(true);
    CHECK(oly_x64_enabled());
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) CHECK_EQ(oly_dtype_canonicalize((oly_dtype)t), t);
    CHECK_EQ(oly_default_float(), OLY_FLOAT64);
    CHECK_EQ(oly_default_int(), OLY_INT64);
    oly_set_x64(was);
}

typedef struct promo_case {
    oly_dtype a;
    bool wa;
    oly_dtype b;
    bool wb;
    oly_dtype want;
    bool want_weak;
} promo_case;

static void check_promo(const promo_case *c, int n)
{
    for (int i = 0; i < n; i++) {
        for (int flip = 0; flip < 2; flip++) {
            bool weak = !c[i].want_weak;
            oly_dtype got = flip ? oly_dtype_promote(c[i].b, c[i].wb, c[i].a, c[i].wa, &weak)
                                 : oly_dtype_promote(c[i].a, c[i].wa, c[i].b, c[i].wb, &weak);
            if (got != c[i].want || weak != c[i].want_weak)
                CHECK_FAIL_("promote(%s%s, %s%s) = %s%s, want %s%s",
                            oly_dtype_short_name(c[i].a), c[i].wa ? "(weak)" : "",
                            oly_dtype_short_name(c[i].b), c[i].wb ? "(weak)" : "",
                            oly_dtype_short_name(got), weak ? "(weak)" : "",
                            oly_dtype_short_name(c[i].want), c[i].want_weak ? "(weak)" : "");
        }
    }
}

/* Entries of JAX's published promotion table (docs/type_promotion.rst). */
TEST(core_promotion_x64)
{
    bool was = oly_x64_enabled();
    oly_set_x64(true);
    const bool S = false, W = true;
    promo_case c[] = {
        {OLY_UINT8, S, OLY_INT8, S, OLY_INT16, S},
        {OLY_UINT16, S, OLY_INT8, S, OLY_INT32, S},
        {OLY_UINT32, S, OLY_INT8, S, OLY_INT64, S},
        {OLY_UINT32, S, OLY_INT32, S, OLY_INT64, S},
        {OLY_UINT64, S, OLY_INT64, S, OLY_FLOAT64, W},  /* u64 + i64 -> f* */
        {OLY_UINT64, S, OLY_INT8, S, OLY_FLOAT64, W},
        {OLY_UINT8, S, OLY_UINT32, S, OLY_UINT32, S},
        {OLY_INT8, S, OLY_INT64, S, OLY_INT64, S},
        {OLY_BOOL, S, OLY_UINT8, S, OLY_UINT8, S},
        {OLY_BOOL, S, OLY_BOOL, S, OLY_BOOL, S},
        {OLY_BOOL, S, OLY_FLOAT16, S, OLY_FLOAT16, S},
        {OLY_FLOAT16, S, OLY_BFLOAT16, S, OLY_FLOAT32, S},
        {OLY_INT32, S, OLY_FLOAT16, S, OLY_FLOAT16, S},
        {OLY_INT64, S, OLY_BFLOAT16, S, OLY_BFLOAT16, S},
        {OLY_UINT64, S, OLY_FLOAT16, S, OLY_FLOAT16, S},
        {OLY_FLOAT32, S, OLY_FLOAT64, S, OLY_FLOAT64, S},
        {OLY_FLOAT16, S, OLY_COMPLEX64, S, OLY_COMPLEX64, S},
        {OLY_FLOAT64, S, OLY_COMPLEX64, S, OLY_COMPLEX128, S},
        {OLY_INT8, S, OLY_COMPLEX64, S, OLY_COMPLEX64, S},
        /* weak operands */
        {OLY_INT32, S, OLY_FLOAT64, W, OLY_FLOAT64, W},  /* i32 + 1.0 -> weak default float */
        {OLY_INT64, W, OLY_INT8, S, OLY_INT8, S},        /* weak int adopts i8 */
        {OLY_INT64, W, OLY_UINT8, S, OLY_UINT8, S},
        {OLY_INT64, W, OLY_BFLOAT16, S, OLY_BFLOAT16, S},
        {OLY_FLOAT64, W, OLY_FLOAT16, S, OLY_FLOAT16, S},
        {OLY_FLOAT64, W, OLY_COMPLEX64, S, OLY_COMPLEX64, S},
        {OLY_COMPLEX128, W, OLY_FLOAT16, S, OLY_COMPLEX64, S},
        {OLY_COMPLEX128, W, OLY_FLOAT64, S, OLY_COMPLEX128, S},
        {OLY_COMPLEX128, W, OLY_INT8, S, OLY_COMPLEX128, W},
        {OLY_BOOL, S, OLY_INT64, W, OLY_INT64, W},       /* b1 + i* -> i* */
        {OLY_BOOL, S, OLY_FLOAT64, W, OLY_FLOAT64, W},
        {OLY_INT32, S, OLY_INT32, W, OLY_INT32, S},      /* same dtype, one strong */
        {OLY_INT64, W, OLY_INT64, W, OLY_INT64, W},
        {OLY_INT64, W, OLY_FLOAT64, W, OLY_FLOAT64, W},
        {OLY_FLOAT64, W, OLY_COMPLEX128, W, OLY_COMPLEX128, W},
        {OLY_BOOL, W, OLY_BOOL, W, OLY_BOOL, S},
    };
    check_promo(c, OLY_ARRAY_LEN(c));
    oly_set_x64(was);
}

TEST(core_promotion_x32)
{
    bool was = oly_x64_enabled();
    oly_set_x64(false);
    const bool S = false, W = true;
    promo_case c[] = {
        {OLY_INT32, S, OLY_FLOAT32, W, OLY_FLOAT32, W},   /* i32 + weak f -> f32 */
        {OLY_UINT8, S, OLY_INT8, S, OLY_INT16, S},
        {OLY_UINT64, S, OLY_INT64, S, OLY_FLOAT32, W},    /* default float */
        {OLY_FLOAT16, S, OLY_BFLOAT16, S, OLY_FLOAT32, S},
        {OLY_INT32, W, OLY_INT8, S, OLY_INT8, S},
        {OLY_INT32, S, OLY_FLOAT16, S, OLY_FLOAT16, S},
        {OLY_UINT32, S, OLY_INT32, S, OLY_INT32, S},      /* i64 canonicalized */
        {OLY_FLOAT64, S, OLY_INT32, S, OLY_FLOAT32, S},
        {OLY_COMPLEX64, S, OLY_FLOAT64, S, OLY_COMPLEX64, S}, /* c128 -> c64 */
        {OLY_INT32, W, OLY_FLOAT32, W, OLY_FLOAT32, W},
        {OLY_INT32, W, OLY_COMPLEX64, W, OLY_COMPLEX64, W},
        {OLY_BOOL, S, OLY_INT32, W, OLY_INT32, W},
    };
    check_promo(c, OLY_ARRAY_LEN(c));
    bool weak = true;
    CHECK_EQ(oly_dtype_promote(OLY_INT32, false, OLY_FLOAT32, true, NULL), OLY_FLOAT32);
    CHECK_EQ(oly_dtype_promote(OLY_INT8, false, OLY_INT8, false, &weak), OLY_INT8);
    CHECK(!weak);
    oly_set_x64(was);
}

/* The lattice is a join semilattice: promotion is commutative and associative
 * over every strong dtype. */
TEST(core_promotion_associative)
{
    bool was = oly_x64_enabled();
    oly_set_x64(true);
    for (int a = 0; a < OLY_DTYPE_COUNT; a++)
        for (int b = 0; b < OLY_DTYPE_COUNT; b++) {
            bool w1, w2;
            oly_dtype ab = oly_dtype_promote((oly_dtype)a, false, (oly_dtype)b, false, &w1);
            oly_dtype ba = oly_dtype_promote((oly_dtype)b, false, (oly_dtype)a, false, &w2);
            CHECK_EQ(ab, ba);
            for (int c = 0; c < OLY_DTYPE_COUNT; c++) {
                oly_dtype l = oly_dtype_promote(ab, w1, (oly_dtype)c, false, NULL);
                oly_dtype bc = oly_dtype_promote((oly_dtype)b, false, (oly_dtype)c, false, &w2);
                oly_dtype r = oly_dtype_promote((oly_dtype)a, false, bc, w2, NULL);
                if (l != r)
                    CHECK_FAIL_("(%s+%s)+%s = %s but %s+(%s+%s) = %s", oly_dtype_short_name((oly_dtype)a),
                                oly_dtype_short_name((oly_dtype)b), oly_dtype_short_name((oly_dtype)c),
                                oly_dtype_short_name(l), oly_dtype_short_name((oly_dtype)a),
                                oly_dtype_short_name((oly_dtype)b), oly_dtype_short_name((oly_dtype)c),
                                oly_dtype_short_name(r));
            }
        }
    oly_set_x64(was);
}

/* ---------------------------------------------------------------- avals */

TEST(core_aval_make_and_format)
{
    oly_aval a;
    char buf[64];
    CHECK_OK(oly_aval_make(OLY_FLOAT32, 2, (int64_t[]){5, 3}, &a));
    CHECK_EQ(oly_aval_size(&a), 15);
    CHECK_EQ(oly_aval_nbytes(&a), 60);
    CHECK(!a.weak);
    CHECK_EQ(oly_aval_format(buf, sizeof buf, &a), 8);
    CHECK_STREQ(buf, "f32[5,3]");
    CHECK_OK(oly_aval_make(OLY_INT32, 0, NULL, &a));
    CHECK_EQ(oly_aval_size(&a), 1);
    CHECK_EQ(oly_aval_nbytes(&a), 4);
    oly_aval_format(buf, sizeof buf, &a);
    CHECK_STREQ(buf, "i32[]");
    CHECK_OK(oly_aval_make(OLY_BFLOAT16, 3, (int64_t[]){2, 0, 7}, &a));
    CHECK_EQ(oly_aval_size(&a), 0);
    CHECK_EQ(oly_aval_nbytes(&a), 0);
    oly_aval_format(buf, sizeof buf, &a);
    CHECK_STREQ(buf, "bf16[2,0,7]");
    /* Truncation reports the wanted length, like snprintf. */
    char small[5];
    CHECK_EQ(oly_aval_format(small, sizeof small, &a), 11);
    CHECK_STREQ(small, "bf16");
    CHECK_EQ(oly_aval_format(NULL, 0, &a), 11);
}

TEST(core_aval_errors)
{
    oly_aval a;
    a.dtype = OLY_INT8;
    a.rank = 7;
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 2, (int64_t[]){5, -1}, &a), OLY_ERR_SHAPE, "negative");
    CHECK_EQ(a.rank, 7); /* untouched on failure */
    int64_t dims[OLY_MAX_RANK + 1];
    for (int i = 0; i <= OLY_MAX_RANK; i++) dims[i] = 1;
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, OLY_MAX_RANK + 1, dims, &a), OLY_ERR_SHAPE, "rank");
    CHECK_OK(oly_aval_make(OLY_FLOAT32, OLY_MAX_RANK, dims, &a));
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, -1, dims, &a), OLY_ERR_SHAPE, "rank");
    CHECK_ERR(oly_aval_make((oly_dtype)99, 1, dims, &a), OLY_ERR_TYPE, "dtype");
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 2, (int64_t[]){INT64_MAX / 2, 4}, &a), OLY_ERR_SHAPE,
              "overflow");
}

TEST(core_aval_equal_strides_axis)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 3, (int64_t[]){2, 3, 4});
    oly_aval b = a;
    b.weak = true;
    CHECK(oly_aval_equal(&a, &b)); /* weak is ignored */
    b.dims[2] = 5;
    CHECK(!oly_aval_equal(&a, &b));
    b = a;
    b.dtype = OLY_INT32;
    CHECK(!oly_aval_equal(&a, &b));
    int64_t st[3];
    oly__strides(&a, st);
    CHECK_EQ(st[0], 12);
    CHECK_EQ(st[1], 4);
    CHECK_EQ(st[2], 1);
    int64_t ax = -7;
    CHECK_OK(oly__axis("sum", -1, 3, &ax));
    CHECK_EQ(ax, 2);
    CHECK_OK(oly__axis("sum", 0, 3, &ax));
    CHECK_EQ(ax, 0);
    CHECK_ERR(oly__axis("reduce_sum", 3, 3, &ax), OLY_ERR_INVALID, "reduce_sum");
    CHECK_ERR(oly__axis("reduce_sum", -4, 3, &ax), OLY_ERR_INVALID, "axis -4");
    CHECK_EQ(ax, 0);
}

/* ---------------------------------------------------------------- conversions */

TEST(core_convert_float_to_int)
{
    const float src[] = {1.9f, -1.9f, NAN, 1e10f, -1e10f, INFINITY, -INFINITY, 127.5f, -0.5f};
    int32_t i32[9];
    oly__convert(src, OLY_FLOAT32, i32, OLY_INT32, 9);
    const int32_t want32[] = {1, -1, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 127, 0};
    for (int i = 0; i < 9; i++) CHECK_EQ(i32[i], want32[i]);
    int8_t i8[9];
    oly__convert(src, OLY_FLOAT32, i8, OLY_INT8, 9);
    const int8_t want8[] = {1, -1, 0, 127, -128, 127, -128, 127, 0};
    for (int i = 0; i < 9; i++) CHECK_EQ(i8[i], want8[i]);
    uint8_t u8[9];
    oly__convert(src, OLY_FLOAT32, u8, OLY_UINT8, 9);
    const uint8_t wantu8[] = {1, 0, 0, 255, 0, 255, 0, 127, 0};
    for (int i = 0; i < 9; i++) CHECK_EQ(u8[i], wantu8[i]);
    const double big[] = {1e30, 9223372036854775808.0, -9223372036854775808.0, 1.8446744073709552e19};
    int64_t i64[4];
    uint64_t u64[4];
    oly__convert(big, OLY_FLOAT64, i64, OLY_INT64, 4);
    oly__convert(big, OLY_FLOAT64, u64, OLY_UINT64, 4);
    CHECK(i64[0] == INT64_MAX && i64[1] == INT64_MAX && i64[2] == INT64_MIN && i64[3] == INT64_MAX);
    CHECK(u64[0] == UINT64_MAX && u64[1] == 9223372036854775808ull && u64[2] == 0 &&
          u64[3] == UINT64_MAX);
}

TEST(core_convert_int_to_int_wraps)
{
    const int32_t src[] = {300, -1, 128, -129};
    int8_t i8[4];
    uint8_t u8[4];
    oly__convert(src, OLY_INT32, i8, OLY_INT8, 4);
    oly__convert(src, OLY_INT32, u8, OLY_UINT8, 4);
    CHECK(i8[0] == 44 && i8[1] == -1 && i8[2] == -128 && i8[3] == 127);
    CHECK(u8[0] == 44 && u8[1] == 255 && u8[2] == 128 && u8[3] == 127);
    const uint64_t big = UINT64_MAX;
    int64_t i64;
    double d;
    oly__convert(&big, OLY_UINT64, &i64, OLY_INT64, 1);
    oly__convert(&big, OLY_UINT64, &d, OLY_FLOAT64, 1);
    CHECK_EQ(i64, -1);
    CHECK_NEAR(d, 18446744073709551616.0, 0);
}

TEST(core_convert_bool)
{
    const double src[] = {0.0, -0.0, 2.5, NAN, -1.0};
    uint8_t b[5];
    oly__convert(src, OLY_FLOAT64, b, OLY_BOOL, 5);
    CHECK(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1 && b[4] == 1);
    const float cx[] = {0, 0, 0, 3, 0, -0.0f};
    oly__convert(cx, OLY_COMPLEX64, b, OLY_BOOL, 3);
    CHECK(b[0] == 0 && b[1] == 1 && b[2] == 0);
    const uint8_t bools[] = {0, 1, 7};
    float f[3];
    oly__convert(bools, OLY_BOOL, f, OLY_FLOAT32, 3);
    CHECK(f[0] == 0 && f[1] == 1 && f[2] == 1);
    uint8_t norm[3];
    oly__convert(bools, OLY_BOOL, norm, OLY_BOOL, 3); /* bool -> bool normalises */
    CHECK(norm[0] == 0 && norm[1] == 1 && norm[2] == 1);
}

TEST(core_convert_complex)
{
    const double c[] = {1.5, -2.0, -3.25, 4.0};
    float f[2];
    int32_t i[2];
    float c64[4];
    oly__convert(c, OLY_COMPLEX128, f, OLY_FLOAT32, 2);
    CHECK(f[0] == 1.5f && f[1] == -3.25f);
    oly__convert(c, OLY_COMPLEX128, i, OLY_INT32, 2);
    CHECK(i[0] == 1 && i[1] == -3);
    oly__convert(c, OLY_COMPLEX128, c64, OLY_COMPLEX64, 2);
    CHECK(c64[0] == 1.5f && c64[1] == -2.0f && c64[2] == -3.25f && c64[3] == 4.0f);
    const int16_t s[] = {-7, 9};
    double z[4] = {9, 9, 9, 9};
    oly__convert(s, OLY_INT16, z, OLY_COMPLEX128, 2);
    CHECK(z[0] == -7 && z[1] == 0 && z[2] == 9 && z[3] == 0);
}

TEST(core_half_exact_and_rounding)
{
    /* Exactly representable values round trip through float16 and bfloat16. */
    const float exact[] = {0.0f, -0.0f, 1.0f, -2.5f, 0.099975586f, 65504.0f, 0x1p-14f, 0x1p-24f,
                           INFINITY, -INFINITY};
    for (int i = 0; i < OLY_ARRAY_LEN(exact); i++) {
        float back = oly__half_to_float(oly__float_to_half(exact[i]));
        CHECK(back == exact[i] && signbit(back) == signbit(exact[i]));
    }
    CHECK_EQ(oly__float_to_half(1.0f), 0x3c00);
    CHECK_EQ(oly__float_to_half(-2.0f), 0xc000);
    CHECK_EQ(oly__float_to_half(65504.0f), 0x7bff);
    CHECK_EQ(oly__float_to_half(0x1p-24f), 0x0001);
    /* Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
    CHECK_EQ(oly__float_to_half(1.0f + 0x1p-11f), 0x3c00);
    CHECK_EQ(oly__float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02); /* halfway, up to even */
    CHECK_EQ(oly__float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    CHECK_EQ(oly__float_to_half(65519.0f), 0x7bff);
    CHECK_EQ(oly__float_to_half(65520.0f), 0x7c00); /* overflow to inf */
    CHECK_EQ(oly__float_to_half(0x1p-25f), 0x0000);  /* halfway to the smallest subnormal: even */
    CHECK_EQ(oly__float_to_half(0x1.8p-24f), 0x0002);
    CHECK_EQ(oly__float_to_half(0x1.ffcp-15f), 0x0400 - 0 /* rounds up into the normals */);
    CHECK(isnan(oly__half_to_float(oly__float_to_half(NAN))));
    CHECK_EQ(oly__half_to_float(0x3555), 0.333251953125f);

    /* bfloat16 */
    const float bexact[] = {0.0f, 1.0f, -3.0f, 0x1.fep127f, 0x1p-133f, INFINITY};
    for (int i = 0; i < OLY_ARRAY_LEN(bexact); i++)
        CHECK(oly__bf16_to_float(oly__float_to_bf16(bexact[i])) == bexact[i]);
    CHECK_EQ(oly__float_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(oly__float_to_bf16(1.0f + 0x1p-8f), 0x3f80);             /* halfway: even */
    CHECK_EQ(oly__float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);         /* halfway: even (up) */
    CHECK_EQ(oly__float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    CHECK_EQ(oly__float_to_bf16(0x1.ffp127f), 0x7f80);                /* overflow to inf */
    uint16_t nb = oly__float_to_bf16(NAN);
    CHECK(isnan(oly__bf16_to_float(nb)));
    uint16_t nb2 = oly__float_to_bf16(-__builtin_nanf("0x1")); /* low payload only */
    CHECK(isnan(oly__bf16_to_float(nb2)) && (nb2 & 0x8000));
}

TEST(core_convert_half_arrays)
{
    /* float64 -> float16 is rounded once: 1 + 2^-11 + 2^-40 is just above the
     * halfway point, so it rounds up (via float32 it would tie and round down). */
    const double d[] = {1.0 + 0x1p-11 + 0x1p-40, 0.1, -65504.0, 1e6, 3.0};
    uint16_t h[5];
    oly__convert(d, OLY_FLOAT64, h, OLY_FLOAT16, 5);
    CHECK_EQ(h[0], 0x3c01);
    CHECK_EQ(h[1], 0x2e66);
    CHECK_EQ(h[2], 0xfbff);
    CHECK_EQ(h[3], 0x7c00);
    CHECK_EQ(h[4], 0x4200);
    uint16_t b[5];
    oly__convert(d, OLY_FLOAT64, b, OLY_BFLOAT16, 5);
    CHECK_EQ(b[4], 0x4040);
    CHECK_EQ(b[1], 0x3dcd);
    /* int -> half, half -> int, half <-> bf16 */
    const int64_t iv[] = {2049, 3, -70000, (int64_t)1 << 62};
    oly__convert(iv, OLY_INT64, h, OLY_FLOAT16, 4);
    CHECK_EQ(h[0], 0x6800); /* 2049 ties to 2048 */
    CHECK_EQ(h[1], 0x4200);
    CHECK_EQ(h[2], 0xfc00);
    CHECK_EQ(h[3], 0x7c00);
    int32_t back[4];
    oly__convert(h, OLY_FLOAT16, back, OLY_INT32, 4);
    CHECK(back[0] == 2048 && back[1] == 3 && back[2] == INT32_MIN && back[3] == INT32_MAX);
    uint16_t bb[2];
    oly__convert(h, OLY_FLOAT16, bb, OLY_BFLOAT16, 2);
    CHECK(oly__bf16_to_float(bb[0]) == 2048.0f && oly__bf16_to_float(bb[1]) == 3.0f);
    const uint64_t u = ((uint64_t)1 << 63) + ((uint64_t)1 << 55) + 1; /* just above a bf16 tie */
    oly__convert(&u, OLY_UINT64, bb, OLY_BFLOAT16, 1);
    CHECK(oly__bf16_to_float(bb[0]) == 0x1.02p63f);
}

TEST(core_scalar_store_load)
{
    oly_scalar s = {.dtype = OLY_FLOAT64, .v.f = -2.75};
    int32_t i;
    float f;
    uint16_t h;
    unsigned char unaligned[20];
    oly_scalar_store(&s, OLY_INT32, &i);
    CHECK_EQ(i, -2);
    oly_scalar_store(&s, OLY_FLOAT32, &f);
    CHECK(f == -2.75f);
    oly_scalar_store(&s, OLY_FLOAT16, &h);
    CHECK(oly__half_to_float(h) == -2.75f);
    oly_scalar_store(&s, OLY_FLOAT64, unaligned + 1);
    oly_scalar r = oly_scalar_load(OLY_FLOAT64, unaligned + 1);
    CHECK_EQ(r.dtype, OLY_FLOAT64);
    CHECK(r.v.f == -2.75 && !r.weak);
    s = (oly_scalar){.dtype = OLY_UINT64, .v.u = UINT64_MAX};
    uint64_t u;
    oly_scalar_store(&s, OLY_UINT64, &u);
    CHECK(u == UINT64_MAX);
    r = oly_scalar_load(OLY_UINT64, &u);
    CHECK(r.v.u == UINT64_MAX);
    s = (oly_scalar){.dtype = OLY_BOOL, .v.i = 5};
    double d;
    oly_scalar_store(&s, OLY_FLOAT64, &d);
    CHECK(d == 1.0);
    s = (oly_scalar){.dtype = OLY_COMPLEX64, .v.c = {1.5, -2}};
    float c[2];
    oly_scalar_store(&s, OLY_COMPLEX64, c);
    CHECK(c[0] == 1.5f && c[1] == -2.0f);
    r = oly_scalar_load(OLY_COMPLEX64, c);
    CHECK(r.v.c[0] == 1.5 && r.v.c[1] == -2.0);
    int8_t i8 = -5;
    r = oly_scalar_load(OLY_INT8, &i8);
    CHECK_EQ(r.v.i, -5);
    uint8_t b = 3;
    r = oly_scalar_load(OLY_BOOL, &b);
    CHECK_EQ(r.v.i, 1);
}

/* ---------------------------------------------------------------- arrays */

static int release_calls;
static void *release_owner;
static void count_release(void *owner)
{
    release_calls++;
    release_owner = owner;
}

TEST(core_array_new_zero_and_aligned)
{
    oly_aval av = tu_aval(OLY_FLOAT64, 2, (int64_t[]){3, 5});
    oly_array *a = NULL;
    CHECK_OK(oly_array_new(&av, &a));
    if (!a) return;
    const double *d = oly_array_data(a);
    for (int i = 0; i < 15; i++) CHECK(d[i] == 0.0);
    CHECK(((uintptr_t)d & 63) == 0);
    CHECK(oly_aval_equal(oly_array_aval(a), &av));
    CHECK_EQ(oly_array_device(a), 0);
    CHECK_OK(oly_array_wait(a));
    oly_array_release(a);

    oly_aval empty = tu_aval(OLY_INT32, 1, (int64_t[]){0});
    CHECK_OK(oly_array_new(&empty, &a));
    CHECK(oly_array_data(a) != NULL);
    oly_array_release(a);
    oly_array_release(NULL);

    oly_aval bad = av;
    bad.dims[0] = -3;
    a = (oly_array *)&bad; /* untouched on failure */
    CHECK_ERR(oly_array_new(&bad, &a), OLY_ERR_SHAPE, "negative");
    CHECK(a == (oly_array *)&bad);
}

TEST(core_array_from_data_copies)
{
    float src[4] = {1, 2, 3, 4};
    oly_aval av = tu_aval(OLY_FLOAT32, 2, (int64_t[]){2, 2});
    oly_array *a = NULL;
    CHECK_OK(oly_array_from_data(&av, src, &a));
    src[0] = 99;
    CHECK(tu_allclose(a, (double[]){1, 2, 3, 4}, 4, 0, 0));
    CHECK(oly_array_data(a) != (const void *)src);
    CHECK_ERR(oly_array_from_data(&av, NULL, &a), OLY_ERR_INVALID, "NULL");
    oly_array_release(a);
}

TEST(core_array_refcount_and_view)
{
    oly_array *a = tu_array(OLY_INT32, 2, (int64_t[]){2, 3}, (double[]){0, 1, 2, 3, 4, 5});
    if (!a) return;
    CHECK(oly_array_retain(a) == a);
    oly_array_release(a); /* still alive: one reference left */
    CHECK_EQ(tu_get(a, 5), 5);

    oly_aval flat = tu_aval(OLY_INT32, 1, (int64_t[]){6});
    oly_array *v = NULL;
    CHECK_OK(oly_array_view(a, &flat, &v));
    CHECK(oly_array_data(v) == oly_array_data(a));
    oly_array_release(a); /* the view keeps the buffer alive */
    CHECK_EQ(tu_get(v, 4), 4);
    CHECK_EQ(oly_array_aval(v)->rank, 1);

    oly_aval bits = tu_aval(OLY_FLOAT32, 2, (int64_t[]){3, 2}); /* same bytes, other dtype */
    oly_array *w = NULL;
    CHECK_OK(oly_array_view(v, &bits, &w));
    oly_array_release(w);

    oly_aval wrong = tu_aval(OLY_INT32, 1, (int64_t[]){7});
    oly_array *x = NULL;
    CHECK_ERR(oly_array_view(v, &wrong, &x), OLY_ERR_SHAPE, "i32[6]");
    CHECK(strstr(oly_last_error(), "i32[7]") != NULL);
    CHECK(x == NULL);
    oly_array_release(v);
}

TEST(core_array_wrap_release_once)
{
    static double mem[6] = {1, 2, 3, 4, 5, 6};
    int owner_tag = 0;
    release_calls = 0;
    release_owner = NULL;
    oly_aval av = tu_aval(OLY_FLOAT64, 1, (int64_t[]){6});
    oly_array *a = NULL;
    CHECK_OK(oly_array_wrap(&av, mem, count_release, &owner_tag, &a));
    if (!a) return;
    CHECK(oly_array_data(a) == mem); /* zero-copy */
    oly_array *b = oly_array_retain(a);
    oly_aval two = tu_aval(OLY_FLOAT64, 2, (int64_t[]){2, 3});
    oly_array *v = NULL;
    CHECK_OK(oly_array_view(a, &two, &v));
    oly_array_release(a);
    oly_array_release(b);
    CHECK_EQ(release_calls, 0); /* the view still holds the buffer */
    CHECK_EQ(tu_get(v, 5), 6);
    oly_array_release(v);
    CHECK_EQ(release_calls, 1);
    CHECK(release_owner == &owner_tag);

    /* No release: the memory stays the caller's. */
    CHECK_OK(oly_array_wrap(&av, mem, NULL, NULL, &a));
    oly_array_release(a);
    CHECK(mem[0] == 1);

    /* Failure: release is not called, the caller keeps ownership. */
    release_calls = 0;
    CHECK_ERR(oly_array_wrap(&av, NULL, count_release, &owner_tag, &a), OLY_ERR_INVALID, "NULL");
    CHECK_EQ(release_calls, 0);
    oly_aval empty = tu_aval(OLY_FLOAT64, 1, (int64_t[]){0});
    CHECK_OK(oly_array_wrap(&empty, NULL, count_release, &owner_tag, &a));
    CHECK(oly_array_data(a) != NULL);
    oly_array_release(a);
    CHECK_EQ(release_calls, 1);
}

TEST(core_array_wrap_misaligned)
{
    _Alignas(8) unsigned char mem[40] = {0};
    oly_aval av = tu_aval(OLY_FLOAT64, 1, (int64_t[]){4});
    oly_array *a = NULL;
    release_calls = 0;
    CHECK_ERR(oly_array_wrap(&av, mem + 4, count_release, NULL, &a), OLY_ERR_INVALID, "aligned");
    CHECK(a == NULL && release_calls == 0);
    oly_aval bytes = tu_aval(OLY_UINT8, 1, (int64_t[]){4});
    CHECK_OK(oly_array_wrap(&bytes, mem + 3, NULL, NULL, &a)); /* u8 needs no alignment */
    oly_array_release(a);
}

static void *churn(void *arg)
{
    oly_array *a = arg;
    for (int i = 0; i < 20000; i++) {
        oly_array *r = oly_array_retain(a);
        oly_aval av = *oly_array_aval(a);
        oly_array *v = NULL;
        if (oly_array_view(r, &av, &v) == OLY_OK) oly_array_release(v);
        oly_array_release(r);
    }
    oly_array_release(a); /* each thread owns one reference */
    return NULL;
}

/* Refcounts are atomic: threads retaining and releasing the same array and
 * its buffer leave exactly one release of the wrapped memory. */
TEST(core_array_refcount_threads)
{
    static float mem[8];
    release_calls = 0;
    oly_aval av = tu_aval(OLY_FLOAT32, 1, (int64_t[]){8});
    oly_array *a = NULL;
    CHECK_OK(oly_array_wrap(&av, mem, count_release, mem, &a));
    if (!a) return;
    pthread_t th[4];
    int started = 0;
    for (int i = 0; i < 4; i++) {
        oly_array_retain(a);
        if (pthread_create(&th[i], NULL, churn, a) != 0) {
            oly_array_release(a);
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    CHECK_EQ(release_calls, 0);
    oly_array_release(a);
    CHECK_EQ(release_calls, 1);
}

TEST(core_testutil_helpers)
{
    oly_array *a = tu_array(OLY_COMPLEX64, 1, (int64_t[]){3}, (double[]){1.5, -2, 3});
    oly_array *z = tu_array(OLY_UINT8, 2, (int64_t[]){2, 2}, NULL);
    oly_array *s = tu_scalar(OLY_BFLOAT16, 0.5);
    if (!a || !z || !s) goto done;
    CHECK(tu_allclose(a, (double[]){1.5, -2, 3}, 3, 0, 0));
    const float *c = oly_array_data(a);
    CHECK(c[1] == 0 && c[3] == 0); /* imaginary parts zero */
    CHECK(tu_allclose(z, (double[]){0, 0, 0, 0}, 4, 0, 0));
    CHECK(!tu_allclose(z, (double[]){0, 0, 0, 1e-3}, 4, 0, 1e-4)); /* prints a mismatch */
    CHECK(!tu_allclose(z, (double[]){0, 0, 0}, 3, 0, 0));
    CHECK_EQ(oly_array_aval(s)->rank, 0);
    CHECK_NEAR(tu_get(s, 0), 0.5, 0);
done:
    oly_array_release(a);
    oly_array_release(z);
    oly_array_release(s);
}

/* A tiny primitive to drive tu_run_kernel: out = in0 * 2 (f32), two outputs
 * when asked through params. */
static int twice_nout(const void *params, int n_in) { return params ? *(const int *)params : 1; }
static oly_status twice_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    if (ctx->in[0].dtype != OLY_FLOAT32)
        return oly__error(OLY_ERR_TYPE, "twice: expected f32, got %s",
                          oly_dtype_short_name(ctx->in[0].dtype));
    for (int i = 0; i < ctx->n_out; i++) out[i] = ctx->in[0];
    return OLY_OK;
}
static oly_status twice_kernel(const oly_kernel_ctx *ctx)
{
    if (ctx->ith != 0 || ctx->nth != 1 || !ctx->in_array || !ctx->eqn)
        return oly__error(OLY_ERR_INTERNAL, "twice: bad context");
    int64_t n = oly_aval_size(&ctx->in_aval[0]);
    const float *x = ctx->in[0];
    if (n > 0 && x[0] < 0) return oly__error(OLY_ERR_INVALID, "twice: negative input");
    for (int o = 0; o < ctx->n_out; o++)
        for (int64_t i = 0; i < n; i++) ((float *)ctx->out[o])[i] = 2 * x[i];
    return OLY_OK;
}

TEST(core_tu_run_kernel)
{
    static const oly_prim twice = {.name = "twice", .n_in = 1, .num_outputs = twice_nout,
                                   .shape = twice_shape};
    static const oly_cpu_kernel twice_cpu = {.fn = twice_kernel};
    CHECK_OK(oly__cpu_register(&twice, &twice_cpu));
    oly_array *in = tu_array(OLY_FLOAT32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    oly_array *bad = tu_array(OLY_INT32, 1, (int64_t[]){3}, NULL);
    oly_array *neg = tu_array(OLY_FLOAT32, 1, (int64_t[]){3}, (double[]){-1, 2, 3});
    oly_array *out[2] = {NULL, NULL};
    int n = -1, two = 2;
    CHECK_OK(tu_run_kernel(&twice, &two, &in, 1, out, 2, &n));
    CHECK_EQ(n, 2);
    if (out[0] && out[1]) {
        CHECK(tu_allclose(out[0], (double[]){2, 4, 6}, 3, 0, 0));
        CHECK(tu_allclose(out[1], (double[]){2, 4, 6}, 3, 0, 0));
    }
    oly_array_release(out[0]);
    oly_array_release(out[1]);
    out[0] = out[1] = NULL;
    CHECK_ERR(tu_run_kernel(&twice, NULL, &bad, 1, out, 2, &n), OLY_ERR_TYPE, "expected f32");
    CHECK_ERR(tu_run_kernel(&twice, NULL, &neg, 1, out, 2, &n), OLY_ERR_INVALID, "negative");
    CHECK_ERR(tu_run_kernel(&twice, &two, &in, 1, out, 1, &n), OLY_ERR_INVALID, "2 outputs");
    CHECK(out[0] == NULL && out[1] == NULL);
    oly_array_release(in);
    oly_array_release(bad);
    oly_array_release(neg);
}

/* ---------------------------------------------------------------- host functions */

static oly_status noop_call(void *user, oly_callback_frame *frame) { return OLY_OK; }

TEST(core_host_fn_release_once)
{
    char name[] = "my_callback";
    int tag = 0;
    release_calls = 0;
    oly_host_fn *f = NULL;
    CHECK_OK(oly_host_fn_new(name, noop_call, &tag, count_release, &f));
    if (!f) return;
    name[0] = 'X'; /* the name was copied */
    CHECK_STREQ(oly_host_fn_name(f), "my_callback");
    CHECK(oly_host_fn_user(f) == &tag);
    CHECK(oly_host_fn_retain(f) == f);
    oly_host_fn_release(f);
    CHECK_EQ(release_calls, 0);
    oly_host_fn_release(f);
    CHECK_EQ(release_calls, 1);
    CHECK(release_owner == &tag);
    oly_host_fn_release(NULL);
    CHECK_ERR(oly_host_fn_new("f", NULL, NULL, NULL, &f), OLY_ERR_INVALID, "call");
    CHECK_OK(oly_host_fn_new("g", noop_call, NULL, NULL, &f)); /* NULL release is fine */
    oly_host_fn_release(f);
    CHECK_EQ(oly_host_fail(OLY_ERR_CALLBACK, "boom %d", 3), OLY_ERR_CALLBACK);
    CHECK_STREQ(oly_last_error(), "boom 3");
}

/* Every dtype pair: small integers survive the round trip, and extreme values
 * (NaN, infinities, huge magnitudes) convert without undefined behaviour (the
 * sanitizer build checks float-cast overflow). */
TEST(core_convert_every_pair)
{
    const double small[] = {0, 1, 2, 5, 100};
    const double extreme[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300, 1e19, -1e19, 3e38, -0.5};
    for (int f = 0; f < OLY_DTYPE_COUNT; f++) {
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
            _Alignas(16) unsigned char a[9 * 16], b[9 * 16];
            double back[9];
            oly__convert(small, OLY_FLOAT64, a, (oly_dtype)f, 5);
            oly__convert(a, (oly_dtype)f, b, (oly_dtype)t, 5);
            oly__convert(b, (oly_dtype)t, back, OLY_FLOAT64, 5);
            for (int i = 0; i < 5; i++) {
                double want = small[i];
                if (f == OLY_BOOL || t == OLY_BOOL) want = want != 0;
                if (back[i] != want)
                    CHECK_FAIL_("%s -> %s: %g came back as %g", oly_dtype_short_name((oly_dtype)f),
                                oly_dtype_short_name((oly_dtype)t), small[i], back[i]);
            }
            oly__convert(extreme, OLY_FLOAT64, a, (oly_dtype)f, 9);
            oly__convert(a, (oly_dtype)f, b, (oly_dtype)t, 9);
            oly__convert(b, (oly_dtype)t, back, OLY_FLOAT64, 9);
            if (oly_dtype_is_int((oly_dtype)t))
                for (int i = 0; i < 9; i++) CHECK(isfinite(back[i]));
        }
    }
}

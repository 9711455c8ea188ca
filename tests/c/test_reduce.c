/* test_reduce.c — reduction, argmax/argmin and cumulative rows (reduce.c).
 * Expected values are hand-computed or from NumPy (noted). */
#include "test.h"
#include "testutil.h"

#include <math.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}
#define NOINTS {.n = 0}

static const oly_dtype numeric[] = {OLY_INT8,    OLY_INT16,    OLY_INT32,   OLY_INT64,
                                    OLY_UINT8,   OLY_UINT16,   OLY_UINT32,  OLY_UINT64,
                                    OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT32, OLY_FLOAT64,
                                    OLY_COMPLEX64, OLY_COMPLEX128};
#define N_NUMERIC (sizeof numeric / sizeof numeric[0])

static oly_array *run(const oly_prim *p, const void *params, oly_array *x)
{
    oly_array *out = NULL;
    int n_out = 0;
    oly_status s = tu_run_kernel(p, params, &x, 1, &out, 1, &n_out);
    CHECK_OK(s);
    return s == OLY_OK ? out : NULL;
}

static oly_status try_run(const oly_prim *p, const void *params, oly_array *x)
{
    oly_array *out = NULL;
    oly_status s = tu_run_kernel(p, params, &x, 1, &out, 1, NULL);
    oly_array_release(out);
    return s;
}

/* Runs p on x; checks dtype, dims and values (rtol). */
static void expect(const oly_prim *p, const void *params, oly_array *x, oly_dtype t, int rank,
                   const int64_t *dims, const double *want, int64_t n, double rtol)
{
    oly_array *y = run(p, params, x);
    if (y) {
        const oly_aval *av = oly_array_aval(y);
        CHECK_EQ(av->dtype, t);
        CHECK_EQ(av->rank, rank);
        for (int i = 0; i < rank && i < av->rank; i++) CHECK_EQ(av->dims[i], dims[i]);
        CHECK(tu_allclose(y, want, n, rtol, 0));
    }
    oly_array_release(y);
}

static oly_array *complex_array(oly_dtype t, int rank, const int64_t *dims, const double *reim)
{
    oly_aval av = tu_aval(t, rank, dims);
    int64_t n = oly_aval_size(&av);
    oly_array *a = NULL;
    if (t == OLY_COMPLEX128) {
        CHECK_OK(oly_array_from_data(&av, reim, &a));
    } else {
        float f[64];
        for (int64_t i = 0; i < 2 * n && i < 64; i++) f[i] = (float)reim[i];
        CHECK_OK(oly_array_from_data(&av, f, &a));
    }
    return a;
}

static void complex_at(const oly_array *a, int64_t i, double *re, double *im)
{
    if (oly_array_aval(a)->dtype == OLY_COMPLEX128) {
        const double *d = oly_array_data(a);
        *re = d[2 * i];
        *im = d[2 * i + 1];
    } else {
        const float *f = oly_array_data(a);
        *re = f[2 * i];
        *im = f[2 * i + 1];
    }
}

/* ---------------------------------------------------------------- sums and products */

TEST(reduce_sum_axes_every_dtype)
{
    oly_params_reduce a0 = {.axes = INTS(0)}, a1 = {.axes = INTS(-1)}, all = {.axes = INTS(1, 0)};
    oly_params_reduce none = {.axes = NOINTS};
    for (size_t k = 0; k < N_NUMERIC; k++) {
        oly_dtype t = numeric[k];
        oly_array *x = tu_array(t, 2, D(2, 3), V(1, 2, 3, 4, 5, 6));
        expect(&oly__prim_reduce_sum, &a0, x, t, 1, D(3), V(5, 7, 9), 3, 0);
        expect(&oly__prim_reduce_sum, &a1, x, t, 1, D(2), V(6, 15), 2, 0);
        expect(&oly__prim_reduce_sum, &all, x, t, 0, NULL, V(21), 1, 0);
        expect(&oly__prim_reduce_sum, &none, x, t, 2, D(2, 3), V(1, 2, 3, 4, 5, 6), 6, 0);
        expect(&oly__prim_reduce_prod, &a1, x, t, 1, D(2), V(6, 120), 2, 0);
        oly_array_release(x);
    }
}

TEST(reduce_sum_noncontiguous_axes)
{
    /* numpy: arange(24).reshape(2,3,4).sum((0,2)) = [60, 92, 124]; .sum((0,1)) = [60,66,72,78] */
    double xs[24];
    for (int i = 0; i < 24; i++) xs[i] = i;
    oly_array *x = tu_array(OLY_INT32, 3, D(2, 3, 4), xs);
    oly_params_reduce p = {.axes = INTS(0, -1)}, q = {.axes = INTS(1, 0)};
    expect(&oly__prim_reduce_sum, &p, x, OLY_INT32, 1, D(3), V(60, 92, 124), 3, 0);
    expect(&oly__prim_reduce_sum, &q, x, OLY_INT32, 1, D(4), V(60, 66, 72, 78), 4, 0);
    expect(&oly__prim_reduce_max, &p, x, OLY_INT32, 1, D(3), V(15, 19, 23), 3, 0);
    oly_array_release(x);
    /* unit dims between reduced and kept ones */
    x = tu_array(OLY_FLOAT64, 4, D(2, 1, 3, 1), V(1, 2, 3, 4, 5, 6));
    oly_params_reduce r = {.axes = INTS(1, 2)};
    expect(&oly__prim_reduce_sum, &r, x, OLY_FLOAT64, 2, D(2, 1), V(6, 15), 2, 0);
    oly_array_release(x);
}

TEST(reduce_long_runs)
{
    /* more than one 512-element chunk, reduced innermost and kept innermost */
    enum { N = 1500 };
    static double xs[2 * N];
    for (int i = 0; i < 2 * N; i++) xs[i] = i % 7;
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(2, N), xs);
    double s0 = 0, s1 = 0;
    for (int i = 0; i < N; i++) {
        s0 += xs[i];
        s1 += xs[N + i];
    }
    oly_params_reduce last = {.axes = INTS(1)}, first = {.axes = INTS(0)};
    expect(&oly__prim_reduce_sum, &last, x, OLY_FLOAT32, 1, D(2), V(s0, s1), 2, 0);
    oly_array *y = run(&oly__prim_reduce_sum, &first, x);
    if (y) {
        CHECK_NEAR(tu_get(y, 0), xs[0] + xs[N], 0);
        CHECK_NEAR(tu_get(y, 1499), xs[1499] + xs[2 * N - 1], 0);
    }
    oly_array_release(y);
    oly_array_release(x);
}

TEST(reduce_sum_accumulates_wide)
{
    /* f32: 1e8 + 100 ones - 1e8 is 100 with double accumulation, 0 in naive f32 */
    double xs[102];
    xs[0] = 1e8;
    for (int i = 1; i <= 100; i++) xs[i] = 1;
    xs[101] = -1e8;
    oly_array *x = tu_array(OLY_FLOAT32, 1, D(102), xs);
    oly_params_reduce p = {.axes = INTS(0)};
    expect(&oly__prim_reduce_sum, &p, x, OLY_FLOAT32, 0, NULL, V(100), 1, 0);
    oly_array_release(x);
    /* f16: 1000 x f16(0.1) = 99.976 -> f16 100.0 (a naive f16 loop gives 105.2, NumPy) */
    static double ts[1000];
    for (int i = 0; i < 1000; i++) ts[i] = 0.1;
    x = tu_array(OLY_FLOAT16, 1, D(1000), ts);
    expect(&oly__prim_reduce_sum, &p, x, OLY_FLOAT16, 0, NULL, V(100), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_BFLOAT16, 1, D(1000), ts);
    expect(&oly__prim_reduce_sum, &p, x, OLY_BFLOAT16, 0, NULL, V(100), 1, 0);
    oly_array_release(x);
}

TEST(reduce_int_wraps)
{
    oly_params_reduce p = {.axes = INTS(0)};
    oly_array *x = tu_array(OLY_INT8, 1, D(2), V(100, 3));
    expect(&oly__prim_reduce_prod, &p, x, OLY_INT8, 0, NULL, V(44), 1, 0);   /* 300 mod 256 */
    expect(&oly__prim_reduce_sum, &p, x, OLY_INT8, 0, NULL, V(103), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT8, 1, D(2), V(200, 100));
    expect(&oly__prim_reduce_sum, &p, x, OLY_UINT8, 0, NULL, V(44), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT32, 1, D(2), V(2147483647, 1));
    expect(&oly__prim_reduce_sum, &p, x, OLY_INT32, 0, NULL, V(-2147483648.0), 1, 0);
    oly_array_release(x);
}

TEST(reduce_complex)
{
    oly_params_reduce p = {.axes = INTS(0)};
    oly_dtype ts[2] = {OLY_COMPLEX64, OLY_COMPLEX128};
    for (int k = 0; k < 2; k++) {
        oly_array *x = complex_array(ts[k], 1, D(2), V(1, 2, 3, -1));
        oly_array *y = run(&oly__prim_reduce_sum, &p, x);
        double re = 0, im = 0;
        if (y) {
            complex_at(y, 0, &re, &im);
            CHECK_NEAR(re, 4, 0);
            CHECK_NEAR(im, 1, 0);
        }
        oly_array_release(y);
        y = run(&oly__prim_reduce_prod, &p, x); /* (1+2i)(3-i) = 5+5i */
        if (y) {
            complex_at(y, 0, &re, &im);
            CHECK_NEAR(re, 5, 0);
            CHECK_NEAR(im, 5, 0);
        }
        oly_array_release(y);
        oly_array_release(x);
        x = complex_array(ts[k], 2, D(0, 2), NULL);
        y = run(&oly__prim_reduce_prod, &p, x);
        if (y) {
            complex_at(y, 1, &re, &im);
            CHECK_NEAR(re, 1, 0);
            CHECK_NEAR(im, 0, 0);
        }
        oly_array_release(y);
        oly_array_release(x);
    }
}

/* ---------------------------------------------------------------- max, min, identities */

TEST(reduce_max_min_nan_and_values)
{
    oly_params_reduce p = {.axes = INTS(-1)};
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(2, 3), V(1, NAN, 3, -1, -5, 2));
    expect(&oly__prim_reduce_max, &p, x, OLY_FLOAT32, 1, D(2), V(NAN, 2), 2, 0);
    expect(&oly__prim_reduce_min, &p, x, OLY_FLOAT32, 1, D(2), V(NAN, -5), 2, 0);
    oly_array_release(x);
    /* NaN first, last */
    x = tu_array(OLY_FLOAT64, 2, D(2, 2), V(NAN, 1, 1, NAN));
    expect(&oly__prim_reduce_max, &p, x, OLY_FLOAT64, 1, D(2), V(NAN, NAN), 2, 0);
    oly_params_reduce q = {.axes = INTS(0)};
    expect(&oly__prim_reduce_min, &q, x, OLY_FLOAT64, 1, D(2), V(NAN, NAN), 2, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT64, 1, D(4), V(-3, 7, -9, 2));
    expect(&oly__prim_reduce_max, &q, x, OLY_INT64, 0, NULL, V(7), 1, 0);
    expect(&oly__prim_reduce_min, &q, x, OLY_INT64, 0, NULL, V(-9), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT32, 1, D(3), V(4000000000.0, 5, 70));
    expect(&oly__prim_reduce_max, &q, x, OLY_UINT32, 0, NULL, V(4000000000.0), 1, 0);
    expect(&oly__prim_reduce_min, &q, x, OLY_UINT32, 0, NULL, V(5), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_BFLOAT16, 1, D(3), V(0.5, -2, 1.5));
    expect(&oly__prim_reduce_max, &q, x, OLY_BFLOAT16, 0, NULL, V(1.5), 1, 0);
    expect(&oly__prim_reduce_min, &q, x, OLY_BFLOAT16, 0, NULL, V(-2), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_BOOL, 1, D(3), V(0, 1, 0));
    expect(&oly__prim_reduce_max, &q, x, OLY_BOOL, 0, NULL, V(1), 1, 0);
    expect(&oly__prim_reduce_min, &q, x, OLY_BOOL, 0, NULL, V(0), 1, 0);
    oly_array_release(x);
}

TEST(reduce_zero_size_identities)
{
    oly_params_reduce p = {.axes = INTS(0)};
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(0, 2), NULL);
    expect(&oly__prim_reduce_sum, &p, x, OLY_FLOAT32, 1, D(2), V(0, 0), 2, 0);
    expect(&oly__prim_reduce_prod, &p, x, OLY_FLOAT32, 1, D(2), V(1, 1), 2, 0);
    expect(&oly__prim_reduce_max, &p, x, OLY_FLOAT32, 1, D(2), V(-INFINITY, -INFINITY), 2, 0);
    expect(&oly__prim_reduce_min, &p, x, OLY_FLOAT32, 1, D(2), V(INFINITY, INFINITY), 2, 0);
    oly_array_release(x);
    x = tu_array(OLY_FLOAT16, 1, D(0), NULL);
    expect(&oly__prim_reduce_max, &p, x, OLY_FLOAT16, 0, NULL, V(-INFINITY), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT32, 1, D(0), NULL);
    expect(&oly__prim_reduce_max, &p, x, OLY_INT32, 0, NULL, V(-2147483648.0), 1, 0);
    expect(&oly__prim_reduce_min, &p, x, OLY_INT32, 0, NULL, V(2147483647.0), 1, 0);
    expect(&oly__prim_reduce_prod, &p, x, OLY_INT32, 0, NULL, V(1), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT8, 1, D(0), NULL);
    expect(&oly__prim_reduce_max, &p, x, OLY_INT8, 0, NULL, V(-128), 1, 0);
    expect(&oly__prim_reduce_and, &p, x, OLY_INT8, 0, NULL, V(-1), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT8, 1, D(0), NULL);
    expect(&oly__prim_reduce_min, &p, x, OLY_UINT8, 0, NULL, V(255), 1, 0);
    expect(&oly__prim_reduce_max, &p, x, OLY_UINT8, 0, NULL, V(0), 1, 0);
    expect(&oly__prim_reduce_and, &p, x, OLY_UINT8, 0, NULL, V(255), 1, 0);
    expect(&oly__prim_reduce_or, &p, x, OLY_UINT8, 0, NULL, V(0), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT64, 1, D(0), NULL);
    oly_array *y = run(&oly__prim_reduce_min, &p, x);
    if (y) CHECK(*(const uint64_t *)oly_array_data(y) == UINT64_MAX);
    oly_array_release(y);
    oly_array_release(x);
    x = tu_array(OLY_BOOL, 2, D(2, 0), NULL);
    oly_params_reduce l = {.axes = INTS(1)};
    expect(&oly__prim_reduce_and, &l, x, OLY_BOOL, 1, D(2), V(1, 1), 2, 0);
    expect(&oly__prim_reduce_or, &l, x, OLY_BOOL, 1, D(2), V(0, 0), 2, 0);
    /* a zero-size output from a zero-size input */
    expect(&oly__prim_reduce_or, &p, x, OLY_BOOL, 1, D(0), NULL, 0, 0);
    oly_array_release(x);
}

/* ---------------------------------------------------------------- and, or */

TEST(reduce_and_or)
{
    oly_params_reduce a1 = {.axes = INTS(1)}, a0 = {.axes = INTS(0)};
    oly_array *x = tu_array(OLY_BOOL, 2, D(2, 2), V(1, 0, 1, 1));
    expect(&oly__prim_reduce_and, &a1, x, OLY_BOOL, 1, D(2), V(0, 1), 2, 0);
    expect(&oly__prim_reduce_or, &a0, x, OLY_BOOL, 1, D(2), V(1, 1), 2, 0);
    expect(&oly__prim_reduce_and, &a0, x, OLY_BOOL, 1, D(2), V(1, 0), 2, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT32, 1, D(2), V(12, 10));
    expect(&oly__prim_reduce_and, &a0, x, OLY_INT32, 0, NULL, V(8), 1, 0);
    expect(&oly__prim_reduce_or, &a0, x, OLY_INT32, 0, NULL, V(14), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT8, 1, D(2), V(-1, 5));
    expect(&oly__prim_reduce_and, &a0, x, OLY_INT8, 0, NULL, V(5), 1, 0);
    expect(&oly__prim_reduce_or, &a0, x, OLY_INT8, 0, NULL, V(-1), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT16, 1, D(3), V(0xF0F0, 0x0FF0, 0x00FF));
    expect(&oly__prim_reduce_and, &a0, x, OLY_UINT16, 0, NULL, V(0x00F0), 1, 0);
    expect(&oly__prim_reduce_or, &a0, x, OLY_UINT16, 0, NULL, V(0xFFFF), 1, 0);
    oly_array_release(x);
}

TEST(reduce_errors)
{
    oly_params_reduce p = {.axes = INTS(0)};
    oly_array *b = tu_array(OLY_BOOL, 1, D(2), NULL);
    CHECK_ERR(try_run(&oly__prim_reduce_sum, &p, b), OLY_ERR_TYPE, "reduce_sum: operand must have a numeric dtype");
    CHECK_ERR(try_run(&oly__prim_reduce_prod, &p, b), OLY_ERR_TYPE, "bool[2]");
    oly_array_release(b);
    oly_array *f = tu_array(OLY_FLOAT32, 2, D(2, 3), NULL);
    CHECK_ERR(try_run(&oly__prim_reduce_and, &p, f), OLY_ERR_TYPE, "reduce_and: operand must have a bool or integer dtype, got f32[2,3]");
    CHECK_ERR(try_run(&oly__prim_reduce_or, &p, f), OLY_ERR_TYPE, "reduce_or");
    oly_params_reduce dup = {.axes = INTS(1, -1)};
    CHECK_ERR(try_run(&oly__prim_reduce_sum, &dup, f), OLY_ERR_INVALID, "axes (1, -1) are not unique");
    oly_params_reduce out = {.axes = INTS(2)};
    CHECK_ERR(try_run(&oly__prim_reduce_max, &out, f), OLY_ERR_INVALID, "reduce_max: axes (2) out of range for operand f32[2,3]");
    oly_params_reduce neg = {.axes = INTS(-3)};
    CHECK_ERR(try_run(&oly__prim_reduce_min, &neg, f), OLY_ERR_INVALID, "out of range");
    oly_array_release(f);
    oly_array *c = tu_array(OLY_COMPLEX64, 1, D(2), NULL);
    CHECK_ERR(try_run(&oly__prim_reduce_max, &p, c), OLY_ERR_TYPE, "c64[2]");
    oly_array_release(c);
}

/* ---------------------------------------------------------------- argmax, argmin */

TEST(reduce_argmax_argmin)
{
    oly_params_argminmax last = {.axes = INTS(-1), .index_dtype = OLY_INT32};
    oly_params_argminmax first = {.axes = INTS(0), .index_dtype = OLY_INT64};
    /* first occurrence wins; NaN is both max and min (first NaN), as NumPy */
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(2, 3), V(1, 3, 3, 2, NAN, NAN));
    expect(&oly__prim_argmax, &last, x, OLY_INT32, 1, D(2), V(1, 1), 2, 0);
    expect(&oly__prim_argmin, &last, x, OLY_INT32, 1, D(2), V(0, 1), 2, 0);
    expect(&oly__prim_argmax, &first, x, OLY_INT64, 1, D(3), V(1, 1, 1), 3, 0);
    expect(&oly__prim_argmin, &first, x, OLY_INT64, 1, D(3), V(0, 1, 1), 3, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT16, 2, D(3, 2), V(1, 5, 4, 2, 4, 0));
    expect(&oly__prim_argmax, &first, x, OLY_INT64, 1, D(2), V(1, 0), 2, 0);
    expect(&oly__prim_argmin, &first, x, OLY_INT64, 1, D(2), V(0, 2), 2, 0);
    oly_array_release(x);
    x = tu_array(OLY_UINT64, 1, D(4), V(3, 9, 9, 1));
    expect(&oly__prim_argmax, &last, x, OLY_INT32, 0, NULL, V(1), 1, 0);
    expect(&oly__prim_argmin, &last, x, OLY_INT32, 0, NULL, V(3), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_BOOL, 1, D(3), V(0, 1, 1));
    expect(&oly__prim_argmax, &last, x, OLY_INT32, 0, NULL, V(1), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_FLOAT16, 1, D(3), V(-1, -3, 2));
    expect(&oly__prim_argmin, &last, x, OLY_INT32, 0, NULL, V(1), 1, 0);
    oly_array_release(x);
    /* a long line (several chunks) and a wide inner block */
    enum { N = 1300 };
    static double xs[N];
    for (int i = 0; i < N; i++) xs[i] = (i * 37) % 101;
    xs[1200] = 500;
    xs[700] = -5;
    x = tu_array(OLY_FLOAT64, 1, D(N), xs);
    expect(&oly__prim_argmax, &last, x, OLY_INT32, 0, NULL, V(1200), 1, 0);
    expect(&oly__prim_argmin, &last, x, OLY_INT32, 0, NULL, V(700), 1, 0);
    oly_array_release(x);
    x = tu_array(OLY_FLOAT64, 2, D(2, N / 2), xs); /* axis 0 over 650 side-by-side lines */
    oly_array *y = run(&oly__prim_argmax, &first, x);
    if (y) {
        CHECK_NEAR(tu_get(y, 1200 - N / 2), 1, 0);
        CHECK_NEAR(tu_get(y, 0), xs[N / 2] > xs[0] ? 1 : 0, 0);
    }
    oly_array_release(y);
    oly_array_release(x);
    /* zero-size outside the axis is fine */
    x = tu_array(OLY_FLOAT32, 2, D(0, 3), NULL);
    expect(&oly__prim_argmax, &last, x, OLY_INT32, 1, D(0), NULL, 0, 0);
    oly_array_release(x);
}

TEST(reduce_argmax_errors)
{
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(3, 0), NULL);
    oly_params_argminmax p = {.axes = INTS(1), .index_dtype = OLY_INT32};
    CHECK_ERR(try_run(&oly__prim_argmax, &p, x), OLY_ERR_SHAPE, "argmax: the reduced axis 1 of operand f32[3,0] is empty");
    oly_params_argminmax two = {.axes = INTS(0, 1), .index_dtype = OLY_INT32};
    CHECK_ERR(try_run(&oly__prim_argmin, &two, x), OLY_ERR_INVALID, "exactly one axis");
    oly_params_argminmax fl = {.axes = INTS(0), .index_dtype = OLY_FLOAT32};
    CHECK_ERR(try_run(&oly__prim_argmin, &fl, x), OLY_ERR_TYPE, "index_dtype must be int32 or int64, got float32");
    oly_params_argminmax out = {.axes = INTS(2), .index_dtype = OLY_INT32};
    CHECK_ERR(try_run(&oly__prim_argmax, &out, x), OLY_ERR_INVALID, "out of range");
    oly_array_release(x);
}

/* ---------------------------------------------------------------- cumulative */

TEST(reduce_cumulative)
{
    oly_params_cumulative fw = {.axis = 0, .reverse = false}, bw = {.axis = -1, .reverse = true};
    for (size_t k = 0; k < N_NUMERIC; k++) {
        oly_dtype t = numeric[k];
        oly_array *x = tu_array(t, 1, D(4), V(1, 2, 3, 4));
        expect(&oly__prim_cumsum, &fw, x, t, 1, D(4), V(1, 3, 6, 10), 4, 0);
        expect(&oly__prim_cumsum, &bw, x, t, 1, D(4), V(10, 9, 7, 4), 4, 0);
        expect(&oly__prim_cumprod, &fw, x, t, 1, D(4), V(1, 2, 6, 24), 4, 0);
        expect(&oly__prim_cumprod, &bw, x, t, 1, D(4), V(24, 24, 12, 4), 4, 0);
        oly_array_release(x);
    }
    /* numpy: cumsum(arange(24.).reshape(2,3,4), axis=1) */
    double xs[24];
    for (int i = 0; i < 24; i++) xs[i] = i;
    oly_array *x = tu_array(OLY_FLOAT64, 3, D(2, 3, 4), xs);
    oly_params_cumulative mid = {.axis = 1, .reverse = false};
    expect(&oly__prim_cumsum, &mid, x, OLY_FLOAT64, 3, D(2, 3, 4),
           V(0, 1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21, 12, 13, 14, 15, 28, 30, 32, 34, 48, 51, 54, 57),
           24, 0);
    oly_params_cumulative midr = {.axis = -2, .reverse = true};
    expect(&oly__prim_cummax, &midr, x, OLY_FLOAT64, 3, D(2, 3, 4),
           V(8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 20, 21, 22, 23, 20, 21, 22, 23, 20, 21, 22, 23),
           24, 0);
    oly_array_release(x);
    /* numpy: cumprod([[1,2,3],[4,5,6]], axis=0) */
    x = tu_array(OLY_INT32, 2, D(2, 3), V(1, 2, 3, 4, 5, 6));
    oly_params_cumulative a0 = {.axis = 0, .reverse = false};
    expect(&oly__prim_cumprod, &a0, x, OLY_INT32, 2, D(2, 3), V(1, 2, 3, 4, 10, 18), 6, 0);
    oly_array_release(x);
    /* cummax/cummin propagate NaN */
    x = tu_array(OLY_FLOAT32, 1, D(5), V(1, 3, NAN, 2, 5));
    expect(&oly__prim_cummax, &fw, x, OLY_FLOAT32, 1, D(5), V(1, 3, NAN, NAN, NAN), 5, 0);
    expect(&oly__prim_cummin, &bw, x, OLY_FLOAT32, 1, D(5), V(NAN, NAN, NAN, 2, 5), 5, 0);
    oly_array_release(x);
    x = tu_array(OLY_INT8, 1, D(4), V(3, 1, 2, -7));
    expect(&oly__prim_cummin, &fw, x, OLY_INT8, 1, D(4), V(3, 1, 1, -7), 4, 0);
    expect(&oly__prim_cummax, &bw, x, OLY_INT8, 1, D(4), V(3, 2, 2, -7), 4, 0);
    oly_array_release(x);
}

TEST(reduce_cumulative_long_complex_zero)
{
    enum { N = 1000 };
    static double ones[N], want[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1;
        want[i] = N - i;
    }
    oly_params_cumulative bw = {.axis = 0, .reverse = true};
    oly_array *x = tu_array(OLY_INT32, 1, D(N), ones);
    expect(&oly__prim_cumsum, &bw, x, OLY_INT32, 1, D(N), want, N, 0);
    oly_array_release(x);
    /* f16 running sum in float: 1000 x f16(0.1); last element 100.0 (naive f16: 105.2) */
    static double ts[N];
    for (int i = 0; i < N; i++) ts[i] = 0.1;
    x = tu_array(OLY_FLOAT16, 1, D(N), ts);
    oly_params_cumulative fw = {.axis = 0, .reverse = false};
    oly_array *y = run(&oly__prim_cumsum, &fw, x);
    if (y) CHECK_NEAR(tu_get(y, N - 1), 100, 0);
    oly_array_release(y);
    oly_array_release(x);
    /* complex: cumsum [1+2i, 3-i] = [1+2i, 4+i]; cumprod = [1+2i, 5+5i] */
    x = complex_array(OLY_COMPLEX64, 1, D(2), V(1, 2, 3, -1));
    double re = 0, im = 0;
    y = run(&oly__prim_cumsum, &fw, x);
    if (y) {
        complex_at(y, 1, &re, &im);
        CHECK_NEAR(re, 4, 0);
        CHECK_NEAR(im, 1, 0);
    }
    oly_array_release(y);
    y = run(&oly__prim_cumprod, &fw, x);
    if (y) {
        complex_at(y, 1, &re, &im);
        CHECK_NEAR(re, 5, 0);
        CHECK_NEAR(im, 5, 0);
    }
    oly_array_release(y);
    oly_array_release(x);
    x = tu_array(OLY_FLOAT32, 2, D(3, 0), NULL);
    expect(&oly__prim_cumsum, &fw, x, OLY_FLOAT32, 2, D(3, 0), NULL, 0, 0);
    oly_array_release(x);
}

TEST(reduce_cumulative_errors)
{
    oly_params_cumulative p = {.axis = 0, .reverse = false};
    oly_array *b = tu_array(OLY_BOOL, 1, D(2), NULL);
    CHECK_ERR(try_run(&oly__prim_cumsum, &p, b), OLY_ERR_TYPE, "cumsum: operand must have a numeric dtype");
    oly_array_release(b);
    oly_array *c = tu_array(OLY_COMPLEX128, 1, D(2), NULL);
    CHECK_ERR(try_run(&oly__prim_cummax, &p, c), OLY_ERR_TYPE, "cummax: operand must have an integer or float dtype, got c128[2]");
    oly_array_release(c);
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(2, 2), NULL);
    oly_params_cumulative q = {.axis = 2, .reverse = false};
    CHECK_ERR(try_run(&oly__prim_cumprod, &q, x), OLY_ERR_INVALID, "cumprod: axis 2 is out of range for rank 2");
    oly_array_release(x);
    x = tu_scalar(OLY_FLOAT32, 1);
    CHECK_ERR(try_run(&oly__prim_cummin, &p, x), OLY_ERR_SHAPE, "rank >= 1");
    oly_array_release(x);
}

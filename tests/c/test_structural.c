/* test_structural.c — structural primitive rows (structural.c): shape rules,
 * kernels over several dtypes, zero-size arrays, negative axes, error messages.
 * Expected values are hand-computed (or from NumPy, noted). */
#include "test.h"
#include "testutil.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}
#define NOINTS {.n = 0}

static const oly_dtype all_numeric[] = {OLY_INT8,    OLY_INT16,    OLY_INT32,   OLY_INT64,
                                        OLY_UINT8,   OLY_UINT16,   OLY_UINT32,  OLY_UINT64,
                                        OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT32, OLY_FLOAT64,
                                        OLY_COMPLEX64, OLY_COMPLEX128};

/* Runs p on n inputs; returns the single output (NULL on failure, reported). */
static oly_array *run(const oly_prim *p, const void *params, oly_array **in, int n)
{
    oly_array *out = NULL;
    int n_out = 0;
    oly_status s = tu_run_kernel(p, params, in, n, &out, 1, &n_out);
    CHECK_OK(s);
    if (s != OLY_OK) return NULL;
    CHECK_EQ(n_out, 1);
    return out;
}

/* The status of running p (output released when it succeeds). */
static oly_status try_run(const oly_prim *p, const void *params, oly_array **in, int n)
{
    oly_array *out = NULL;
    oly_status s = tu_run_kernel(p, params, in, n, &out, 1, NULL);
    oly_array_release(out);
    return s;
}

static void release_n(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) oly_array_release(a[i]);
}

static void check_shape(const oly_array *a, oly_dtype t, int rank, const int64_t *dims)
{
    if (!a) return;
    const oly_aval *av = oly_array_aval(a);
    CHECK_EQ(av->dtype, t);
    CHECK_EQ(av->rank, rank);
    for (int i = 0; i < rank && i < av->rank; i++) CHECK_EQ(av->dims[i], dims[i]);
}

/* Runs p on one input and compares with expected values and dims. */
static void expect1(const oly_prim *p, const void *params, oly_array *x, int rank,
                    const int64_t *dims, const double *want, int64_t n)
{
    oly_array *in[1] = {x};
    oly_array *y = run(p, params, in, 1);
    if (y) {
        check_shape(y, oly_array_aval(x)->dtype, rank, dims);
        CHECK(tu_allclose(y, want, n, 0, 0));
    }
    oly_array_release(y);
}

/* ---------------------------------------------------------------- broadcast_in_dim */

TEST(struct_broadcast_in_dim_values)
{
    oly_params_broadcast_in_dim p = {.shape = INTS(2, 3), .broadcast_dimensions = INTS(1)};
    for (size_t k = 0; k < sizeof all_numeric / sizeof all_numeric[0]; k++) {
        oly_array *x = tu_array(all_numeric[k], 1, D(3), V(1, 2, 3));
        expect1(&oly__prim_broadcast_in_dim, &p, x, 2, D(2, 3), V(1, 2, 3, 1, 2, 3), 6);
        oly_array_release(x);
    }
    /* operand dim of size 1 stretches; rank-0 operand fills */
    oly_params_broadcast_in_dim q = {.shape = INTS(2, 4, 2), .broadcast_dimensions = INTS(0, 2)};
    oly_array *x = tu_array(OLY_INT16, 2, D(2, 1), V(5, -7));
    expect1(&oly__prim_broadcast_in_dim, &q, x, 3, D(2, 4, 2),
            V(5, 5, 5, 5, 5, 5, 5, 5, -7, -7, -7, -7, -7, -7, -7, -7), 16);
    oly_array_release(x);
    oly_params_broadcast_in_dim r = {.shape = INTS(2, 2), .broadcast_dimensions = NOINTS};
    x = tu_scalar(OLY_BOOL, 1);
    expect1(&oly__prim_broadcast_in_dim, &r, x, 2, D(2, 2), V(1, 1, 1, 1), 4);
    oly_array_release(x);
}

TEST(struct_broadcast_in_dim_complex_and_zero_size)
{
    double z[2] = {1.5, -2.5};
    oly_aval av = tu_aval(OLY_COMPLEX128, 0, NULL);
    oly_array *x = NULL;
    CHECK_OK(oly_array_from_data(&av, z, &x));
    oly_params_broadcast_in_dim p = {.shape = INTS(3), .broadcast_dimensions = NOINTS};
    oly_array *y = run(&oly__prim_broadcast_in_dim, &p, &x, 1);
    if (y) {
        const double *d = oly_array_data(y);
        for (int i = 0; i < 3; i++) {
            CHECK_NEAR(d[2 * i], 1.5, 0);
            CHECK_NEAR(d[2 * i + 1], -2.5, 0);
        }
    }
    oly_array_release(y);
    oly_array_release(x);

    x = tu_array(OLY_FLOAT32, 1, D(0), NULL);
    oly_params_broadcast_in_dim q = {.shape = INTS(2, 0), .broadcast_dimensions = INTS(1)};
    y = run(&oly__prim_broadcast_in_dim, &q, &x, 1);
    check_shape(y, OLY_FLOAT32, 2, D(2, 0));
    oly_array_release(y);
    oly_array_release(x);
}

TEST(struct_broadcast_in_dim_errors)
{
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(3, 1), NULL);
    oly_params_broadcast_in_dim p = {.shape = INTS(4, 5), .broadcast_dimensions = INTS(0, 1)};
    CHECK_ERR(try_run(&oly__prim_broadcast_in_dim, &p, &x, 1), OLY_ERR_SHAPE, "must be 1 or equal");
    CHECK(strstr(oly_last_error(), "broadcast_in_dim") != NULL);
    CHECK(strstr(oly_last_error(), "f32[3,1]") != NULL);
    oly_params_broadcast_in_dim q = {.shape = INTS(3, 5), .broadcast_dimensions = INTS(1, 0)};
    CHECK_ERR(try_run(&oly__prim_broadcast_in_dim, &q, &x, 1), OLY_ERR_SHAPE, "strictly increasing");
    oly_params_broadcast_in_dim r = {.shape = INTS(3, 5), .broadcast_dimensions = INTS(0)};
    CHECK_ERR(try_run(&oly__prim_broadcast_in_dim, &r, &x, 1), OLY_ERR_SHAPE, "one entry per operand dimension");
    oly_params_broadcast_in_dim s = {.shape = INTS(3, 5), .broadcast_dimensions = INTS(0, 2)};
    CHECK_ERR(try_run(&oly__prim_broadcast_in_dim, &s, &x, 1), OLY_ERR_SHAPE, "must be in [0, 2)");
    oly_array_release(x);
}

/* ---------------------------------------------------------------- reshape, squeeze, expand_dims, copy */

TEST(struct_reshape)
{
    oly_params_reshape p = {.new_sizes = INTS(3, 2)};
    oly_array *x = tu_array(OLY_INT32, 2, D(2, 3), V(1, 2, 3, 4, 5, 6));
    expect1(&oly__prim_reshape, &p, x, 2, D(3, 2), V(1, 2, 3, 4, 5, 6), 6);
    oly_params_reshape q = {.new_sizes = INTS(6)};
    expect1(&oly__prim_reshape, &q, x, 1, D(6), V(1, 2, 3, 4, 5, 6), 6);
    oly_params_reshape bad = {.new_sizes = INTS(4, 2)};
    CHECK_ERR(try_run(&oly__prim_reshape, &bad, &x, 1), OLY_ERR_SHAPE, "has 8 elements but operand i32[2,3] has 6");
    oly_params_reshape neg = {.new_sizes = INTS(-1, 6)};
    CHECK_ERR(try_run(&oly__prim_reshape, &neg, &x, 1), OLY_ERR_INVALID, "negative");
    oly_array_release(x);

    x = tu_array(OLY_FLOAT16, 2, D(0, 3), NULL);
    oly_params_reshape z = {.new_sizes = INTS(3, 0, 5)};
    expect1(&oly__prim_reshape, &z, x, 3, D(3, 0, 5), NULL, 0);
    oly_array_release(x);
    /* rank 0 <-> rank 1 */
    x = tu_scalar(OLY_UINT64, 42);
    oly_params_reshape one = {.new_sizes = INTS(1, 1)};
    expect1(&oly__prim_reshape, &one, x, 2, D(1, 1), V(42), 1);
    oly_array_release(x);
}

TEST(struct_squeeze_expand_dims)
{
    oly_array *x = tu_array(OLY_FLOAT64, 3, D(1, 3, 1), V(1.5, 2.5, 3.5));
    oly_params_dims last = {.dimensions = INTS(-1)};
    expect1(&oly__prim_squeeze, &last, x, 2, D(1, 3), V(1.5, 2.5, 3.5), 3);
    oly_params_dims both = {.dimensions = INTS(2, 0)};
    expect1(&oly__prim_squeeze, &both, x, 1, D(3), V(1.5, 2.5, 3.5), 3);
    oly_params_dims bad = {.dimensions = INTS(1)};
    CHECK_ERR(try_run(&oly__prim_squeeze, &bad, &x, 1), OLY_ERR_SHAPE, "must have size 1");
    oly_params_dims dup = {.dimensions = INTS(0, -3)};
    CHECK_ERR(try_run(&oly__prim_squeeze, &dup, &x, 1), OLY_ERR_INVALID, "not unique");
    oly_params_dims out = {.dimensions = INTS(3)};
    CHECK_ERR(try_run(&oly__prim_squeeze, &out, &x, 1), OLY_ERR_INVALID, "out of range");
    oly_array_release(x);

    x = tu_array(OLY_INT8, 1, D(3), V(-1, 0, 1));
    oly_params_dims e = {.dimensions = INTS(0, -1)};
    expect1(&oly__prim_expand_dims, &e, x, 3, D(1, 3, 1), V(-1, 0, 1), 3);
    oly_params_dims mid = {.dimensions = INTS(1)};
    expect1(&oly__prim_expand_dims, &mid, x, 2, D(3, 1), V(-1, 0, 1), 3);
    oly_params_dims edup = {.dimensions = INTS(0, -3)};
    CHECK_ERR(try_run(&oly__prim_expand_dims, &edup, &x, 1), OLY_ERR_INVALID, "expand_dims");
    oly_array_release(x);

    x = tu_array(OLY_BFLOAT16, 2, D(0, 1), NULL);
    oly_params_dims s1 = {.dimensions = INTS(1)};
    expect1(&oly__prim_squeeze, &s1, x, 1, D(0), NULL, 0);
    oly_array_release(x);
}

TEST(struct_copy)
{
    double z[4] = {1, 2, -3, 4.25};
    oly_aval av = tu_aval(OLY_COMPLEX128, 1, D(2));
    oly_array *x = NULL;
    CHECK_OK(oly_array_from_data(&av, z, &x));
    oly_array *y = run(&oly__prim_copy, NULL, &x, 1);
    if (y) {
        CHECK(oly_array_data(y) != oly_array_data(x));
        CHECK(memcmp(oly_array_data(y), z, sizeof z) == 0);
    }
    oly_array_release(y);
    oly_array_release(x);
    x = tu_array(OLY_INT32, 1, D(0), NULL);
    expect1(&oly__prim_copy, NULL, x, 1, D(0), NULL, 0);
    oly_array_release(x);
}

/* ---------------------------------------------------------------- transpose, rev */

TEST(struct_transpose_every_dtype)
{
    /* x[a,b,c] = 100a + 10b + c over (2,3,4); perm (2,0,1): y[c,a,b] = x[a,b,c] */
    double xs[24], want[24];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) {
                xs[a * 12 + b * 4 + c] = (a * 100 + b * 10 + c) % 128;
                want[c * 6 + a * 3 + b] = (a * 100 + b * 10 + c) % 128;
            }
    oly_params_transpose p = {.permutation = INTS(2, 0, 1)};
    for (size_t k = 0; k < sizeof all_numeric / sizeof all_numeric[0]; k++) {
        oly_array *x = tu_array(all_numeric[k], 3, D(2, 3, 4), xs);
        expect1(&oly__prim_transpose, &p, x, 3, D(4, 2, 3), want, 24);
        oly_array_release(x);
    }
    /* 2-d transpose and identity */
    oly_array *x = tu_array(OLY_UINT16, 2, D(2, 3), V(1, 2, 3, 4, 5, 6));
    oly_params_transpose t = {.permutation = INTS(1, 0)};
    expect1(&oly__prim_transpose, &t, x, 2, D(3, 2), V(1, 4, 2, 5, 3, 6), 6);
    oly_params_transpose id = {.permutation = INTS(0, 1)};
    expect1(&oly__prim_transpose, &id, x, 2, D(2, 3), V(1, 2, 3, 4, 5, 6), 6);
    oly_params_transpose bad = {.permutation = INTS(0, 0)};
    CHECK_ERR(try_run(&oly__prim_transpose, &bad, &x, 1), OLY_ERR_INVALID, "permutation of 0..1");
    oly_params_transpose shortp = {.permutation = INTS(0)};
    CHECK_ERR(try_run(&oly__prim_transpose, &shortp, &x, 1), OLY_ERR_INVALID, "transpose");
    oly_array_release(x);
    x = tu_array(OLY_FLOAT32, 3, D(2, 0, 3), NULL);
    oly_params_transpose z = {.permutation = INTS(2, 1, 0)};
    expect1(&oly__prim_transpose, &z, x, 3, D(3, 0, 2), NULL, 0);
    oly_array_release(x);
}

TEST(struct_transpose_complex64_bytes)
{
    float z[12];
    for (int i = 0; i < 12; i++) z[i] = (float)(i + 1) * (i % 2 ? -1.0f : 1.0f);
    oly_aval av = tu_aval(OLY_COMPLEX64, 2, D(2, 3));
    oly_array *x = NULL;
    CHECK_OK(oly_array_from_data(&av, z, &x));
    oly_params_transpose p = {.permutation = INTS(1, 0)};
    oly_array *y = run(&oly__prim_transpose, &p, &x, 1);
    if (y) {
        const float *d = oly_array_data(y);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                CHECK_NEAR(d[2 * (i * 2 + j)], z[2 * (j * 3 + i)], 0);
                CHECK_NEAR(d[2 * (i * 2 + j) + 1], z[2 * (j * 3 + i) + 1], 0);
            }
    }
    oly_array_release(y);
    oly_array_release(x);
}

TEST(struct_rev)
{
    oly_array *x = tu_array(OLY_INT32, 2, D(2, 3), V(1, 2, 3, 4, 5, 6));
    oly_params_dims r1 = {.dimensions = INTS(1)};
    expect1(&oly__prim_rev, &r1, x, 2, D(2, 3), V(3, 2, 1, 6, 5, 4), 6);
    oly_params_dims r0 = {.dimensions = INTS(-2)};
    expect1(&oly__prim_rev, &r0, x, 2, D(2, 3), V(4, 5, 6, 1, 2, 3), 6);
    oly_params_dims both = {.dimensions = INTS(0, 1)};
    expect1(&oly__prim_rev, &both, x, 2, D(2, 3), V(6, 5, 4, 3, 2, 1), 6);
    oly_params_dims none = {.dimensions = NOINTS};
    expect1(&oly__prim_rev, &none, x, 2, D(2, 3), V(1, 2, 3, 4, 5, 6), 6);
    oly_params_dims dup = {.dimensions = INTS(1, 1)};
    CHECK_ERR(try_run(&oly__prim_rev, &dup, &x, 1), OLY_ERR_INVALID, "not unique");
    oly_array_release(x);
    x = tu_array(OLY_FLOAT16, 1, D(4), V(0.5, 1, 1.5, 2));
    oly_params_dims r = {.dimensions = INTS(0)};
    expect1(&oly__prim_rev, &r, x, 1, D(4), V(2, 1.5, 1, 0.5), 4);
    oly_array_release(x);
    x = tu_array(OLY_BOOL, 1, D(3), V(1, 0, 0));
    expect1(&oly__prim_rev, &r, x, 1, D(3), V(0, 0, 1), 3);
    oly_array_release(x);
    x = tu_array(OLY_FLOAT64, 2, D(0, 2), NULL);
    expect1(&oly__prim_rev, &both, x, 2, D(0, 2), NULL, 0);
    oly_array_release(x);
}

/* ---------------------------------------------------------------- slice */

TEST(struct_slice)
{
    double xs[10];
    for (int i = 0; i < 10; i++) xs[i] = i;
    oly_array *x = tu_array(OLY_INT64, 1, D(10), xs);
    oly_params_slice p = {.start_indices = INTS(1), .limit_indices = INTS(8), .strides = INTS(3)};
    expect1(&oly__prim_slice, &p, x, 1, D(3), V(1, 4, 7), 3); /* numpy x[1:8:3] */
    oly_params_slice e = {.start_indices = INTS(4), .limit_indices = INTS(4), .strides = NOINTS};
    expect1(&oly__prim_slice, &e, x, 1, D(0), NULL, 0);
    oly_params_slice bad = {.start_indices = INTS(2), .limit_indices = INTS(11), .strides = NOINTS};
    CHECK_ERR(try_run(&oly__prim_slice, &bad, &x, 1), OLY_ERR_SHAPE, "0 <= start <= limit <= 10");
    oly_params_slice zero = {.start_indices = INTS(0), .limit_indices = INTS(5), .strides = INTS(0)};
    CHECK_ERR(try_run(&oly__prim_slice, &zero, &x, 1), OLY_ERR_INVALID, "strides (0) must be positive");
    oly_params_slice rank = {.start_indices = INTS(0, 0), .limit_indices = INTS(1, 1), .strides = NOINTS};
    CHECK_ERR(try_run(&oly__prim_slice, &rank, &x, 1), OLY_ERR_SHAPE, "one entry per");
    oly_array_release(x);

    double ys[12];
    for (int i = 0; i < 12; i++) ys[i] = i;
    x = tu_array(OLY_FLOAT32, 2, D(3, 4), ys);
    oly_params_slice q = {.start_indices = INTS(1, 1), .limit_indices = INTS(3, 4), .strides = NOINTS};
    expect1(&oly__prim_slice, &q, x, 2, D(2, 3), V(5, 6, 7, 9, 10, 11), 6);
    oly_params_slice s2 = {.start_indices = INTS(0, 0), .limit_indices = INTS(3, 4), .strides = INTS(2, 3)};
    expect1(&oly__prim_slice, &s2, x, 2, D(2, 2), V(0, 3, 8, 11), 4); /* numpy y[::2, ::3] */
    oly_array_release(x);
}

/* ---------------------------------------------------------------- dynamic_slice, dynamic_update_slice */

TEST(struct_dynamic_slice_clamps)
{
    oly_array *in[3] = {tu_array(OLY_FLOAT32, 1, D(5), V(0, 1, 2, 3, 4)), tu_scalar(OLY_INT32, 3)};
    oly_params_dynamic_slice p = {.slice_sizes = INTS(3)};
    oly_array *y = run(&oly__prim_dynamic_slice, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(2, 3, 4), 3, 0, 0)); /* start 3 clamped to 2 */
    oly_array_release(y);
    oly_array_release(in[1]);
    in[1] = tu_scalar(OLY_INT8, -4);
    y = run(&oly__prim_dynamic_slice, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(0, 1, 2), 3, 0, 0)); /* negative start clamped to 0 */
    oly_array_release(y);
    oly_array_release(in[1]);
    in[1] = tu_scalar(OLY_FLOAT32, 1);
    CHECK_ERR(try_run(&oly__prim_dynamic_slice, &p, in, 2), OLY_ERR_TYPE, "rank-0 integer");
    CHECK_ERR(try_run(&oly__prim_dynamic_slice, &p, in, 1), OLY_ERR_INVALID, "start indices");
    oly_params_dynamic_slice big = {.slice_sizes = INTS(6)};
    oly_array_release(in[1]);
    in[1] = tu_scalar(OLY_INT32, 0);
    CHECK_ERR(try_run(&oly__prim_dynamic_slice, &big, in, 2), OLY_ERR_SHAPE, "slice_sizes (6)");
    release_n(in, 2);

    /* 2-d with mixed index dtypes */
    double xs[12];
    for (int i = 0; i < 12; i++) xs[i] = i;
    oly_array *in2[3] = {tu_array(OLY_UINT8, 2, D(3, 4), xs), tu_scalar(OLY_INT64, 1),
                         tu_scalar(OLY_UINT32, 2)};
    oly_params_dynamic_slice q = {.slice_sizes = INTS(2, 2)};
    y = run(&oly__prim_dynamic_slice, &q, in2, 3);
    if (y) {
        check_shape(y, OLY_UINT8, 2, D(2, 2));
        CHECK(tu_allclose(y, V(6, 7, 10, 11), 4, 0, 0));
    }
    oly_array_release(y);
    oly_params_dynamic_slice z = {.slice_sizes = INTS(0, 4)};
    y = run(&oly__prim_dynamic_slice, &z, in2, 3);
    check_shape(y, OLY_UINT8, 2, D(0, 4));
    oly_array_release(y);
    release_n(in2, 3);
}

TEST(struct_dynamic_update_slice)
{
    oly_array *in[4] = {tu_array(OLY_INT16, 1, D(4), V(1, 2, 3, 4)), tu_array(OLY_INT16, 1, D(2), V(7, 8)),
                        tu_scalar(OLY_INT32, 3)};
    oly_array *y = run(&oly__prim_dynamic_update_slice, NULL, in, 3);
    if (y) CHECK(tu_allclose(y, V(1, 2, 7, 8), 4, 0, 0)); /* start 3 clamped to 2 */
    oly_array_release(y);
    oly_array_release(in[2]);
    in[2] = tu_scalar(OLY_INT64, 1);
    y = run(&oly__prim_dynamic_update_slice, NULL, in, 3);
    if (y) CHECK(tu_allclose(y, V(1, 7, 8, 4), 4, 0, 0));
    oly_array_release(y);
    /* the operand is unchanged */
    CHECK(tu_allclose(in[0], V(1, 2, 3, 4), 4, 0, 0));
    oly_array_release(in[1]);
    in[1] = tu_array(OLY_INT32, 1, D(2), V(7, 8));
    CHECK_ERR(try_run(&oly__prim_dynamic_update_slice, NULL, in, 3), OLY_ERR_TYPE, "operand's dtype");
    oly_array_release(in[1]);
    in[1] = tu_array(OLY_INT16, 1, D(5), NULL);
    CHECK_ERR(try_run(&oly__prim_dynamic_update_slice, NULL, in, 3), OLY_ERR_SHAPE, "must fit");
    release_n(in, 3);

    double xs[12] = {0};
    oly_array *in2[4] = {tu_array(OLY_FLOAT64, 2, D(3, 4), xs),
                         tu_array(OLY_FLOAT64, 2, D(2, 2), V(1, 2, 3, 4)), tu_scalar(OLY_INT32, 1),
                         tu_scalar(OLY_INT32, -5)};
    y = run(&oly__prim_dynamic_update_slice, NULL, in2, 4);
    if (y) CHECK(tu_allclose(y, V(0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0), 12, 0, 0));
    oly_array_release(y);
    release_n(in2, 4);
}

/* ---------------------------------------------------------------- concatenate */

TEST(struct_concatenate)
{
    oly_array *in[3] = {tu_array(OLY_FLOAT32, 2, D(2, 1), V(1, 2)),
                        tu_array(OLY_FLOAT32, 2, D(2, 2), V(3, 4, 5, 6)),
                        tu_array(OLY_FLOAT32, 2, D(2, 0), NULL)};
    oly_params_concatenate p = {.dimension = 1};
    oly_array *y = run(&oly__prim_concatenate, &p, in, 3);
    if (y) {
        check_shape(y, OLY_FLOAT32, 2, D(2, 3));
        CHECK(tu_allclose(y, V(1, 3, 4, 2, 5, 6), 6, 0, 0));
    }
    oly_array_release(y);
    oly_params_concatenate neg = {.dimension = -1};
    y = run(&oly__prim_concatenate, &neg, in, 3);
    if (y) CHECK(tu_allclose(y, V(1, 3, 4, 2, 5, 6), 6, 0, 0));
    oly_array_release(y);
    oly_params_concatenate p0 = {.dimension = 0};
    CHECK_ERR(try_run(&oly__prim_concatenate, &p0, in, 3), OLY_ERR_SHAPE, "except in dimension 0");
    oly_params_concatenate p5 = {.dimension = 5};
    CHECK_ERR(try_run(&oly__prim_concatenate, &p5, in, 3), OLY_ERR_INVALID, "out of range");
    oly_array_release(in[2]);
    in[2] = tu_array(OLY_FLOAT64, 2, D(2, 1), NULL);
    CHECK_ERR(try_run(&oly__prim_concatenate, &p, in, 3), OLY_ERR_TYPE, "equal dtypes");
    CHECK_ERR(try_run(&oly__prim_concatenate, &p, in, 0), OLY_ERR_INVALID, "at least one");
    release_n(in, 3);

    oly_array *in2[2] = {tu_array(OLY_UINT64, 1, D(2), V(1, 2)), tu_array(OLY_UINT64, 1, D(3), V(3, 4, 5))};
    y = run(&oly__prim_concatenate, &p0, in2, 2);
    if (y) CHECK(tu_allclose(y, V(1, 2, 3, 4, 5), 5, 0, 0));
    oly_array_release(y);
    release_n(in2, 2);
}

/* ---------------------------------------------------------------- pad */

TEST(struct_pad)
{
    oly_array *in[2] = {tu_array(OLY_INT32, 1, D(3), V(1, 2, 3)), tu_scalar(OLY_INT32, -1)};
    /* numpy-free: lax.pad([1,2,3], -1, [(1,2,1)]) = [-1,1,-1,2,-1,3,-1,-1] */
    oly_params_pad p = {.lo = INTS(1), .hi = INTS(2), .interior = INTS(1)};
    oly_array *y = run(&oly__prim_pad, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(-1, 1, -1, 2, -1, 3, -1, -1), 8, 0, 0));
    oly_array_release(y);
    oly_params_pad crop = {.lo = INTS(-1), .hi = INTS(-1), .interior = INTS(0)};
    y = run(&oly__prim_pad, &crop, in, 2);
    if (y) CHECK(tu_allclose(y, V(2), 1, 0, 0));
    oly_array_release(y);
    /* interior 1 gives [1,-1,2,-1,3]; lo -2 crops two: [2,-1,3]; hi 1 adds one */
    oly_params_pad mix = {.lo = INTS(-2), .hi = INTS(1), .interior = INTS(1)};
    y = run(&oly__prim_pad, &mix, in, 2);
    if (y) CHECK(tu_allclose(y, V(2, -1, 3, -1), 4, 0, 0));
    oly_array_release(y);
    oly_params_pad all = {.lo = INTS(-3), .hi = INTS(0), .interior = INTS(0)};
    y = run(&oly__prim_pad, &all, in, 2);
    check_shape(y, OLY_INT32, 1, D(0));
    oly_array_release(y);
    oly_params_pad neg = {.lo = INTS(-4), .hi = INTS(0), .interior = INTS(0)};
    CHECK_ERR(try_run(&oly__prim_pad, &neg, in, 2), OLY_ERR_SHAPE, "size -1 < 0");
    oly_params_pad badi = {.lo = INTS(0), .hi = INTS(0), .interior = INTS(-1)};
    CHECK_ERR(try_run(&oly__prim_pad, &badi, in, 2), OLY_ERR_INVALID, "interior (-1) must be non-negative");
    oly_array_release(in[1]);
    in[1] = tu_scalar(OLY_FLOAT32, 0);
    CHECK_ERR(try_run(&oly__prim_pad, &p, in, 2), OLY_ERR_TYPE, "padding_value");
    release_n(in, 2);

    /* 2-d, f16: [[1,2],[3,4]] lo (1,0) hi (0,1) interior (0,1) pad 9 */
    oly_array *in2[2] = {tu_array(OLY_FLOAT16, 2, D(2, 2), V(1, 2, 3, 4)), tu_scalar(OLY_FLOAT16, 9)};
    oly_params_pad q = {.lo = INTS(1, 0), .hi = INTS(0, 1), .interior = INTS(0, 1)};
    y = run(&oly__prim_pad, &q, in2, 2);
    if (y) {
        check_shape(y, OLY_FLOAT16, 2, D(3, 4));
        CHECK(tu_allclose(y, V(9, 9, 9, 9, 1, 9, 2, 9, 3, 9, 4, 9), 12, 0, 0));
    }
    oly_array_release(y);
    release_n(in2, 2);

    /* empty operand: all padding */
    oly_array *in3[2] = {tu_array(OLY_UINT8, 1, D(0), NULL), tu_scalar(OLY_UINT8, 7)};
    oly_params_pad r = {.lo = INTS(2), .hi = INTS(1), .interior = INTS(3)};
    y = run(&oly__prim_pad, &r, in3, 2);
    if (y) CHECK(tu_allclose(y, V(7, 7, 7), 3, 0, 0));
    oly_array_release(y);
    release_n(in3, 2);
}

/* ---------------------------------------------------------------- iota */

TEST(struct_iota)
{
    oly_params_iota p = {.dtype = OLY_INT32, .shape = INTS(2, 3), .dimension = 1};
    oly_array *y = run(&oly__prim_iota, &p, NULL, 0);
    if (y) {
        check_shape(y, OLY_INT32, 2, D(2, 3));
        CHECK(tu_allclose(y, V(0, 1, 2, 0, 1, 2), 6, 0, 0));
    }
    oly_array_release(y);
    oly_params_iota q = {.dtype = OLY_FLOAT16, .shape = INTS(3, 2), .dimension = -2};
    y = run(&oly__prim_iota, &q, NULL, 0);
    if (y) CHECK(tu_allclose(y, V(0, 0, 1, 1, 2, 2), 6, 0, 0));
    oly_array_release(y);
    oly_params_iota r = {.dtype = OLY_UINT8, .shape = INTS(2, 2, 2), .dimension = 1};
    y = run(&oly__prim_iota, &r, NULL, 0);
    if (y) CHECK(tu_allclose(y, V(0, 0, 1, 1, 0, 0, 1, 1), 8, 0, 0));
    oly_array_release(y);
    oly_params_iota c = {.dtype = OLY_COMPLEX64, .shape = INTS(3), .dimension = 0};
    y = run(&oly__prim_iota, &c, NULL, 0);
    if (y) {
        const float *d = oly_array_data(y);
        CHECK_NEAR(d[4], 2, 0);
        CHECK_NEAR(d[5], 0, 0);
    }
    oly_array_release(y);
    oly_params_iota z = {.dtype = OLY_FLOAT32, .shape = INTS(0, 4), .dimension = 1};
    y = run(&oly__prim_iota, &z, NULL, 0);
    check_shape(y, OLY_FLOAT32, 2, D(0, 4));
    oly_array_release(y);
    oly_params_iota b = {.dtype = OLY_BOOL, .shape = INTS(3), .dimension = 0};
    CHECK_ERR(try_run(&oly__prim_iota, &b, NULL, 0), OLY_ERR_TYPE, "iota: dtype must be numeric, got bool");
    oly_params_iota d = {.dtype = OLY_INT32, .shape = INTS(3), .dimension = 1};
    CHECK_ERR(try_run(&oly__prim_iota, &d, NULL, 0), OLY_ERR_INVALID, "dimension 1 is out of range");
}

/* ---------------------------------------------------------------- rows */

TEST(struct_rows_have_fields)
{
    const oly_prim *rows[] = {&oly__prim_broadcast_in_dim, &oly__prim_reshape, &oly__prim_transpose,
                              &oly__prim_squeeze, &oly__prim_expand_dims, &oly__prim_rev,
                              &oly__prim_slice, &oly__prim_dynamic_slice, &oly__prim_concatenate,
                              &oly__prim_pad, &oly__prim_iota};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        CHECK(rows[i]->n_fields > 0);
        CHECK(rows[i]->params_size > 0);
        for (int f = 0; f < rows[i]->n_fields; f++)
            CHECK(rows[i]->fields[f].offset < rows[i]->params_size);
    }
    CHECK_STREQ(oly__prim_slice.fields[2].name, "strides");
    CHECK_EQ(oly__prim_dynamic_slice.n_in, -1);
    CHECK_EQ(oly__prim_concatenate.n_in, -1);
    CHECK_EQ(oly__prim_iota.n_in, 0);
}

TEST(struct_transpose_large_tiled)
{
    /* sizes that are not multiples of the 32-element tile; several dtypes */
    enum { A = 3, B = 45, C = 70 };
    static double xs[A * B * C], want[A * B * C];
    for (int i = 0; i < A * B * C; i++) xs[i] = i % 251;
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) want[a * C * B + c * B + b] = xs[a * B * C + b * C + c];
    oly_params_transpose p = {.permutation = INTS(0, 2, 1)};
    const oly_dtype ts[] = {OLY_UINT8, OLY_INT16, OLY_FLOAT32, OLY_FLOAT64, OLY_COMPLEX128};
    for (int k = 0; k < 5; k++) {
        oly_array *x = tu_array(ts[k], 3, D(A, B, C), xs);
        expect1(&oly__prim_transpose, &p, x, 3, D(A, C, B), want, A * B * C);
        oly_array_release(x);
    }
    /* reversed innermost dim combined with a transpose-like rev: rev both dims of [45,70] */
    oly_array *x = tu_array(OLY_INT32, 2, D(B, C), xs);
    oly_params_dims r = {.dimensions = INTS(0, 1)};
    oly_array *y = run(&oly__prim_rev, &r, &x, 1);
    if (y) {
        CHECK_NEAR(tu_get(y, 0), xs[B * C - 1], 0);
        CHECK_NEAR(tu_get(y, B * C - 1), xs[0], 0);
        CHECK_NEAR(tu_get(y, 71), xs[B * C - 1 - 71], 0);
    }
    oly_array_release(y);
    oly_array_release(x);
}

/* Runs p's kernel split over nth threads (ith = 0..nth-1, called in turn) and
 * compares the bytes with the single-thread result. */
static void check_split(const oly_prim *p, const void *params, oly_array **in, int n, int nth)
{
    oly_array *ref = run(p, params, in, n);
    if (!ref) return;
    const oly_aval *oa = oly_array_aval(ref);
    size_t nb = oly_aval_nbytes(oa);
    char *buf = calloc(nb ? nb : 1, 1);
    const void *data[8];
    oly_aval av[8];
    for (int i = 0; i < n && i < 8; i++) {
        data[i] = oly_array_data(in[i]);
        av[i] = *oly_array_aval(in[i]);
    }
    void *outs[1] = {buf};
    for (int ith = 0; ith < nth; ith++) {
        oly_kernel_ctx kc = {.params = params, .n_in = n, .in = data, .in_aval = av, .n_out = 1,
                             .out = outs, .out_aval = oa, .ith = ith, .nth = nth};
        CHECK_OK(oly__cpu_kernel(p)->fn(&kc));
    }
    if (memcmp(buf, oly_array_data(ref), nb) != 0)
        CHECK_FAIL_("%s: kernel split over %d threads differs from one thread", p->name, nth);
    free(buf);
    oly_array_release(ref);
}

TEST(struct_kernels_split_by_threads)
{
    static double xs[5 * 37 * 41];
    for (int i = 0; i < 5 * 37 * 41; i++) xs[i] = (i * 13) % 97;
    oly_array *x = tu_array(OLY_FLOAT32, 3, D(5, 37, 41), xs);
    oly_array *v = tu_array(OLY_INT16, 1, D(1000), xs);
    oly_params_transpose tp = {.permutation = INTS(2, 0, 1)};
    oly_params_dims rv = {.dimensions = INTS(0, 2)};
    oly_params_slice sl = {.start_indices = INTS(1, 2, 3), .limit_indices = INTS(5, 30, 41), .strides = INTS(2, 3, 1)};
    oly_params_broadcast_in_dim bd = {.shape = INTS(3, 5, 37, 41), .broadcast_dimensions = INTS(1, 2, 3)};
    oly_params_reduce rd = {.axes = INTS(1)};
    oly_params_argminmax am = {.axes = INTS(1), .index_dtype = OLY_INT32};
    oly_params_cumulative cs = {.axis = 1, .reverse = true};
    oly_params_concatenate cc = {.dimension = 1};
    oly_params_iota io = {.dtype = OLY_INT32, .shape = INTS(7, 9, 11), .dimension = 1};
    for (int nth = 2; nth <= 5; nth += 3) {
        check_split(&oly__prim_transpose, &tp, &x, 1, nth);
        check_split(&oly__prim_rev, &rv, &x, 1, nth);
        check_split(&oly__prim_slice, &sl, &x, 1, nth);
        check_split(&oly__prim_broadcast_in_dim, &bd, &x, 1, nth);
        check_split(&oly__prim_copy, NULL, &x, 1, nth);
        check_split(&oly__prim_copy, NULL, &v, 1, nth);
        check_split(&oly__prim_rev, &(oly_params_dims){.dimensions = INTS(0)}, &v, 1, nth);
        check_split(&oly__prim_reduce_sum, &rd, &x, 1, nth);
        check_split(&oly__prim_argmax, &am, &x, 1, nth);
        check_split(&oly__prim_cumsum, &cs, &x, 1, nth);
        oly_array *two[2] = {x, x};
        check_split(&oly__prim_concatenate, &cc, two, 2, nth);
        check_split(&oly__prim_iota, &io, NULL, 0, nth);
        oly_array *pv[2] = {x, tu_scalar(OLY_FLOAT32, -1)};
        check_split(&oly__prim_pad, &(oly_params_pad){.lo = INTS(1, -2, 0), .hi = INTS(0, 1, 2), .interior = INTS(1, 0, 2)}, pv, 2, nth);
        oly_array_release(pv[1]);
    }
    oly_array_release(x);
    oly_array_release(v);
}

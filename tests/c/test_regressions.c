/* test_regressions.c — one test per reviewed defect, each failing before its fix:
 * long int lists in messages, size overflow in avals and shape rules, huge
 * slice strides, and the transpose rule pjit and remat share. */
#include "test.h"
#include "testutil.h"

#include <limits.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})

static oly_ints ints_fill(int n, int64_t v)
{
    oly_ints r;
    memset(&r, 0, sizeof r);
    r.n = n;
    for (int i = 0; i < n; i++) r.v[i] = v;
    return r;
}

static oly_status try_run(const oly_prim *p, const void *params, oly_array **in, int n,
                          oly_array **out)
{
    return tu_run_kernel(p, params, in, n, out, 1, NULL);
}

/* 16 x INT64_MIN does not fit 320 bytes: it used to write past the buffer. */
TEST(regress_show_ints_truncates)
{
    oly_ints v = ints_fill(OLY_MAX_RANK, INT64_MIN);
    oly_text t = oly__show_ints(&v);
    size_t len = strlen(t.s);
    CHECK(len < sizeof t.s);
    CHECK(len >= 6 && strcmp(t.s + len - 6, ", ...)") == 0);
    CHECK(strncmp(t.s, "(-9223372036854775808, ", 23) == 0);
    oly_ints s = {.n = 3, .v = {1, -2, 3}};
    CHECK_STREQ(oly__show_ints(&s).s, "(1, -2, 3)");
    oly_ints e = {.n = 0};
    CHECK_STREQ(oly__show_ints(&e).s, "()");
}

/* The reshape rule prints new_sizes in its message (the old overflow site). */
TEST(regress_reshape_message_with_long_list)
{
    oly_array *x = tu_array(OLY_FLOAT32, OLY_MAX_RANK,
                            D(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), NULL);
    oly_params_reshape p = {.new_sizes = ints_fill(OLY_MAX_RANK, INT64_MIN)};
    oly_array *out = NULL;
    CHECK_ERR(try_run(&oly__prim_reshape, &p, &x, 1, &out), OLY_ERR_INVALID, "negative");
    CHECK(strstr(oly_last_error(), ", ...)") != NULL);
    oly_params_reshape big = {.new_sizes = {.n = 2, .v = {INT64_C(1) << 62, 4}}};
    CHECK_ERR(try_run(&oly__prim_reshape, &big, &x, 1, &out), OLY_ERR_INVALID, "overflows");
    oly_array_release(x);
}

/* A program input of 2**62 * 3 elements used to be accepted (its byte count wraps). */
TEST(regress_builder_rejects_oversized_aval)
{
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = OLY_FLOAT32;
    a.rank = 2;
    a.dims[0] = INT64_C(1) << 62;
    a.dims[1] = 3;
    oly_var *v = NULL;
    CHECK_ERR(oly_builder_add_input(b, &a, &v), OLY_ERR_INVALID, "overflows");
    a.dims[1] = 1;
    CHECK_ERR(oly_builder_add_input(b, &a, &v), OLY_ERR_INVALID, "too many");
    a.dims[1] = 0; /* empty: the other extents must still fit (as NumPy) */
    CHECK_ERR(oly_builder_add_input(b, &a, &v), OLY_ERR_INVALID, "too many");
    a.dims[0] = INT64_C(1) << 40;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    oly_builder_free(b);
}

/* dims[axis] summed without a check wrapped to a negative extent. */
TEST(regress_concatenate_dims_overflow)
{
    enum { N = 16 }; /* 16 x 2**59 = 2**63 */
    oly_array *x[N];
    for (int i = 0; i < N; i++) x[i] = tu_array(OLY_FLOAT32, 2, D(0, INT64_C(1) << 59), NULL);
    oly_params_concatenate p = {.dimension = 1};
    oly_array *out = NULL;
    CHECK_ERR(try_run(&oly__prim_concatenate, &p, x, N, &out), OLY_ERR_INVALID, "overflows");
    for (int i = 0; i < N; i++) oly_array_release(x[i]);
}

TEST(regress_pad_dims_overflow)
{
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 1, D(2), NULL), tu_scalar(OLY_FLOAT32, 0)};
    oly_params_pad p = {.lo = {.n = 1, .v = {INT64_MAX}}, .hi = {.n = 1, .v = {0}},
                        .interior = {.n = 1, .v = {0}}};
    oly_array *out = NULL;
    CHECK_ERR(try_run(&oly__prim_pad, &p, in, 2, &out), OLY_ERR_INVALID, "overflows");
    p.lo.v[0] = 0;
    p.interior.v[0] = INT64_MAX;
    CHECK_ERR(try_run(&oly__prim_pad, &p, in, 2, &out), OLY_ERR_INVALID, "overflows");
    oly_array_release(in[0]);
    /* one element: any interior is fine (the kernel's step used to overflow) */
    in[0] = tu_array(OLY_FLOAT32, 1, D(1), (const double[]){7});
    p.lo.v[0] = 1;
    oly_array *out1 = NULL;
    CHECK_OK(try_run(&oly__prim_pad, &p, in, 2, &out1));
    if (out1) {
        CHECK_EQ(oly_array_aval(out1)->dims[0], 2);
        CHECK_NEAR(tu_get(out1, 1), 7.0, 0);
    }
    oly_array_release(out1);
    oly_array_release(in[0]);
    oly_array_release(in[1]);
}

/* (l - s + st - 1) / st overflowed for st near INT64_MAX (and start * stride
 * in the kernel): x[1::2**63-1] is the one element x[1]. */
TEST(regress_slice_huge_stride)
{
    double v[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    oly_array *x = tu_array(OLY_FLOAT64, 1, D(10), v);
    oly_params_slice p = {.start_indices = {.n = 1, .v = {1}}, .limit_indices = {.n = 1, .v = {10}},
                          .strides = {.n = 1, .v = {INT64_MAX}}};
    oly_array *out = NULL;
    CHECK_OK(try_run(&oly__prim_slice, &p, &x, 1, &out));
    if (out) {
        CHECK_EQ(oly_array_aval(out)->dims[0], 1);
        CHECK_NEAR(tu_get(out, 0), 1.0, 0);
    }
    oly_array_release(out);
    out = NULL;
    p.start_indices.v[0] = 0;
    p.strides.v[0] = 9; /* ceil(10 / 9) = 2 */
    CHECK_OK(try_run(&oly__prim_slice, &p, &x, 1, &out));
    if (out) {
        CHECK_EQ(oly_array_aval(out)->dims[0], 2);
        CHECK_NEAR(tu_get(out, 1), 9.0, 0);
    }
    oly_array_release(out);
    oly_array_release(x);
}

/* pjit and remat share one transpose rule. */
TEST(regress_call_transpose_shared)
{
    CHECK(oly__prim_pjit.transpose == oly__call_transpose);
    CHECK(oly__prim_remat.transpose == oly__call_transpose);
}

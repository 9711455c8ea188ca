/* test_hardening.c — defects a bad-input probe found in the public C API, each
 * failing before its fix: NULL out-parameters, and empty shapes whose other
 * dims overflow the element count. */
#include "test.h"

#include <limits.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})

/* C1: NULL out-parameters are an error, not a segfault. */
TEST(hardening_null_out_params)
{
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 1, D(3), NULL), OLY_ERR_INVALID, "out is NULL");
    CHECK_ERR(oly_dtype_from_name("float32", NULL), OLY_ERR_INVALID, "out is NULL");
    oly_dtype t = OLY_BOOL;
    CHECK_ERR(oly_dtype_from_name(NULL, &t), OLY_ERR_INVALID, "NULL");
    CHECK_EQ(t, OLY_BOOL);
}

/* F06: an empty shape may not carry dims whose product overflows (as NumPy:
 * "array is too big"), so strides and offsets of empty arrays stay in range. */
TEST(hardening_empty_shape_with_huge_dims)
{
    oly_aval a;
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 2, D(0, INT64_MAX), &a), OLY_ERR_SHAPE, "");
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 3, D(0, (int64_t)1 << 62, 4), &a), OLY_ERR_SHAPE, "");
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 3, D((int64_t)1 << 40, 0, (int64_t)1 << 40), &a),
              OLY_ERR_SHAPE, "");
    CHECK_OK(oly_aval_make(OLY_FLOAT32, 3, D((int64_t)1 << 20, 0, (int64_t)1 << 20), &a));
    CHECK_EQ(oly_aval_size(&a), 0);
    CHECK_EQ(oly_aval_nbytes(&a), 0);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval big = {.dtype = OLY_FLOAT32, .rank = 2, .dims = {0, INT64_MAX}};
    oly_var *v = NULL;
    CHECK_ERR(oly_builder_add_input(b, &big, &v), OLY_ERR_INVALID, "too many");
    oly_builder_free(b);
}

/* C2: a host function that fails without a message gets one naming it. */
static oly_status fail_silently(void *user, oly_callback_frame *frame)
{
    (void)user;
    (void)frame;
    return OLY_ERR_INVALID;
}

static oly_status fail_with_message(void *user, oly_callback_frame *frame)
{
    (void)user;
    (void)frame;
    return oly_host_fail(OLY_ERR_INVALID, "bad input %d", 7);
}

static oly_status run_host(oly_host_call_fn call)
{
    oly_host_fn *fn = NULL;
    oly_builder *b = NULL;
    oly_program *p = NULL;
    oly_array *x = NULL, *y = NULL;
    oly_aval v;
    oly_status s = oly_aval_make(OLY_FLOAT32, 0, NULL, &v);
    if (s == OLY_OK) s = oly_host_fn_new("quiet_host", call, NULL, NULL, &fn);
    if (s == OLY_OK) s = oly_builder_new(&b);
    oly_var *in = NULL, *out = NULL;
    if (s == OLY_OK) s = oly_builder_add_input(b, &v, &in);
    oly_params_callback cb = {.callback = fn, .result_avals = &v, .n_results = 1};
    int n_out = 0;
    oly_atom a = oly_atom_var(in);
    if (s == OLY_OK)
        s = oly_builder_append(b, oly_prim_lookup("io_callback"), &a, 1, &cb, NULL, 0, &out, 1,
                               &n_out);
    if (s == OLY_OK) a = oly_atom_var(out), s = oly_builder_finish(b, &a, 1, &p);
    float one = 1;
    if (s == OLY_OK) s = oly_array_from_data(&v, &one, &x);
    oly_error_clear();
    /* an earlier, unrelated message must not pass for the host function's */
    (void)oly_dtype_from_name("nonsense", &v.dtype);
    if (s == OLY_OK) s = oly_program_run(p, 0, &x, 1, &y, 1);
    oly_array_release(x);
    oly_array_release(y);
    oly_program_release(p);
    oly_builder_free(b);
    oly_host_fn_release(fn);
    return s;
}

TEST(hardening_host_failure_without_message)
{
    CHECK_ERR(run_host(fail_silently), OLY_ERR_INVALID,
              "io_callback: host function quiet_host failed with OLY_ERR_INVALID");
    CHECK_ERR(run_host(fail_with_message), OLY_ERR_INVALID, "bad input 7");
}

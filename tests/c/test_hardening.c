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

/* Every public entry point that returns oly_status rejects NULL pointers with
 * OLY_ERR_INVALID and a message (run one at a time: none may crash). */
static oly_status noop_host(void *user, oly_callback_frame *frame)
{
    (void)user;
    (void)frame;
    return OLY_OK;
}

static oly_status noop_trace(void *user, int n_in, const oly_aval *in_avals, const bool *nz,
                             oly_program **out)
{
    (void)user, (void)n_in, (void)in_avals, (void)nz, (void)out;
    return OLY_OK;
}

#define CHECK_NULL_ERR(expr)                                                              \
    do {                                                                                  \
        oly_error_clear();                                                                \
        oly_status s__ = (expr);                                                          \
        if (s__ == OLY_OK) CHECK_FAIL_("%s accepted a NULL", #expr);                      \
        else if (!*oly_last_error()) CHECK_FAIL_("%s failed with no message", #expr);     \
    } while (0)

TEST(hardening_public_entry_points_check_pointers)
{
    oly_aval v;
    CHECK_OK(oly_aval_make(OLY_FLOAT32, 1, (const int64_t[]){2}, &v));
    float data[2] = {1, 2};
    oly_array *a = NULL, *o = NULL;
    CHECK_OK(oly_array_from_data(&v, data, &a));
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = NULL, *y = NULL;
    CHECK_OK(oly_builder_add_input(b, &v, &x));
    oly_atom ax = oly_atom_var(x);
    int n_out = 0;
    CHECK_OK(oly_builder_append(b, oly_prim_lookup("sin"), &ax, 1, NULL, NULL, 0, &y, 1, &n_out));
    oly_program *p = NULL, *q = NULL, *r = NULL;
    oly_atom ay = oly_atom_var(y);
    CHECK_OK(oly_builder_finish(b, &ay, 1, &p));
    oly_builder_free(b);
    b = NULL;
    CHECK_OK(oly_builder_new(&b));
    char *text = NULL;
    oly_host_fn *fn = NULL;
    oly_thunk *th = NULL;
    bool nz = true, nzo = false;
    int in_axes = 0, n_res = 0;

    CHECK_NULL_ERR(oly_dtype_from_name(NULL, &v.dtype));
    CHECK_NULL_ERR(oly_dtype_from_name("f32", NULL));
    CHECK_NULL_ERR(oly_aval_make(OLY_FLOAT32, 1, NULL, &v));
    CHECK_NULL_ERR(oly_aval_make(OLY_FLOAT32, 1, (const int64_t[]){2}, NULL));
    CHECK_NULL_ERR(oly_array_new(NULL, &o));
    CHECK_NULL_ERR(oly_array_new(&v, NULL));
    CHECK_NULL_ERR(oly_array_from_data(NULL, data, &o));
    CHECK_NULL_ERR(oly_array_from_data(&v, NULL, &o));
    CHECK_NULL_ERR(oly_array_from_data(&v, data, NULL));
    CHECK_NULL_ERR(oly_array_wrap(NULL, data, NULL, NULL, &o));
    CHECK_NULL_ERR(oly_array_wrap(&v, NULL, NULL, NULL, &o));
    CHECK_NULL_ERR(oly_array_wrap(&v, data, NULL, NULL, NULL));
    CHECK_NULL_ERR(oly_array_view(NULL, &v, &o));
    CHECK_NULL_ERR(oly_array_view(a, NULL, &o));
    CHECK_NULL_ERR(oly_array_view(a, &v, NULL));
    CHECK_NULL_ERR(oly_host_fn_new("f", NULL, NULL, NULL, &fn));
    CHECK_NULL_ERR(oly_host_fn_new("f", noop_host, NULL, NULL, NULL));
    CHECK_NULL_ERR(oly_thunk_new("t", NULL, NULL, NULL, &th));
    CHECK_NULL_ERR(oly_thunk_new("t", noop_trace, NULL, NULL, NULL));
    CHECK_NULL_ERR(oly_thunk_trace(NULL, 0, NULL, NULL, &q));
    CHECK_NULL_ERR(oly_builder_new(NULL));
    CHECK_NULL_ERR(oly_builder_add_input(NULL, &v, &x));
    CHECK_NULL_ERR(oly_builder_add_input(b, NULL, &x));
    CHECK_NULL_ERR(oly_builder_add_const(NULL, a, &x));
    CHECK_NULL_ERR(oly_builder_add_const(b, NULL, &x));
    CHECK_NULL_ERR(oly_builder_append(NULL, oly_prim_lookup("sin"), &ax, 1, NULL, NULL, 0, &y, 1,
                                      &n_out));
    CHECK_NULL_ERR(oly_builder_append(b, NULL, &ax, 1, NULL, NULL, 0, &y, 1, &n_out));
    CHECK_NULL_ERR(oly_builder_append(b, oly_prim_lookup("sin"), NULL, 1, NULL, NULL, 0, &y, 1,
                                      &n_out));
    CHECK_NULL_ERR(oly_builder_append(b, oly_prim_lookup("sin"), &ax, 1, NULL, NULL, 0, NULL, 1,
                                      &n_out));
    CHECK_NULL_ERR(oly_builder_inline(NULL, p, &ax, &ay));
    CHECK_NULL_ERR(oly_builder_inline(b, NULL, &ax, &ay));
    CHECK_NULL_ERR(oly_builder_inline(b, p, NULL, &ay));
    CHECK_NULL_ERR(oly_builder_inline(b, p, &ax, NULL));
    CHECK_NULL_ERR(oly_builder_finish(NULL, NULL, 0, &q));
    CHECK_NULL_ERR(oly_builder_finish(b, NULL, 1, &q));
    CHECK_NULL_ERR(oly_builder_finish(b, NULL, 0, NULL));
    CHECK_NULL_ERR(oly_program_verify(NULL));
    CHECK_NULL_ERR(oly_program_print(NULL, &text));
    CHECK_NULL_ERR(oly_program_print(p, NULL));
    CHECK_NULL_ERR(oly_program_dce(NULL, &q));
    CHECK_NULL_ERR(oly_program_dce(p, NULL));
    CHECK_NULL_ERR(oly_program_vmap(NULL, &in_axes, 2, &in_axes, &q));
    CHECK_NULL_ERR(oly_program_vmap(p, NULL, 2, &in_axes, &q));
    CHECK_NULL_ERR(oly_program_vmap(p, &in_axes, 2, NULL, &q));
    CHECK_NULL_ERR(oly_program_vmap(p, &in_axes, 2, &in_axes, NULL));
    CHECK_NULL_ERR(oly_program_jvp(NULL, &nz, &q, &nzo));
    CHECK_NULL_ERR(oly_program_jvp(p, NULL, &q, &nzo));
    CHECK_NULL_ERR(oly_program_jvp(p, &nz, NULL, &nzo));
    CHECK_NULL_ERR(oly_program_jvp(p, &nz, &q, NULL));
    CHECK_NULL_ERR(oly_program_linearize(NULL, &nz, &q, &r, &n_res, &nzo));
    CHECK_NULL_ERR(oly_program_linearize(p, NULL, &q, &r, &n_res, &nzo));
    CHECK_NULL_ERR(oly_program_linearize(p, &nz, NULL, &r, &n_res, &nzo));
    CHECK_NULL_ERR(oly_program_linearize(p, &nz, &q, NULL, &n_res, &nzo));
    CHECK_NULL_ERR(oly_program_linearize(p, &nz, &q, &r, &n_res, NULL));
    CHECK_NULL_ERR(oly_program_transpose(NULL, 0, &q));
    CHECK_NULL_ERR(oly_program_transpose(p, 0, NULL));
    CHECK_NULL_ERR(oly_program_run(NULL, 0, &a, 1, &o, 1));
    CHECK_NULL_ERR(oly_program_run(p, 0, NULL, 1, &o, 1));
    CHECK_NULL_ERR(oly_program_run(p, 0, &a, 1, NULL, 1));
    oly_array *none = NULL;
    CHECK_NULL_ERR(oly_program_run(p, 0, &none, 1, &o, 1));
    CHECK_NULL_ERR(oly_apply(NULL, NULL, &a, 1, &o, 1, &n_out));
    CHECK_NULL_ERR(oly_apply(oly_prim_lookup("sin"), NULL, NULL, 1, &o, 1, &n_out));
    CHECK_NULL_ERR(oly_apply(oly_prim_lookup("sin"), NULL, &none, 1, &o, 1, &n_out));
    CHECK_NULL_ERR(oly_apply(oly_prim_lookup("sin"), NULL, &a, 1, NULL, 1, &n_out));
    CHECK_NULL_ERR(oly_program_of_eqn(NULL, NULL, &v, 1, NULL, 0, &q));
    CHECK_NULL_ERR(oly_program_of_eqn(oly_prim_lookup("sin"), NULL, NULL, 1, NULL, 0, &q));
    CHECK_NULL_ERR(oly_program_of_eqn(oly_prim_lookup("sin"), NULL, &v, 1, NULL, 0, NULL));
    CHECK(o == NULL && q == NULL && r == NULL && fn == NULL && th == NULL && text == NULL);
    /* the out-parameters the header calls optional */
    CHECK_OK(oly_builder_add_input(b, &v, NULL));
    CHECK_OK(oly_builder_add_const(b, a, NULL));
    CHECK_OK(oly_program_linearize(p, &nz, &q, &r, NULL, &nzo));
    oly_program_release(q);
    oly_program_release(r);
    oly_builder_free(b);
    oly_program_release(p);
    oly_array_release(a);
}

/* The one-equation program every eager path builds. */
TEST(hardening_program_of_eqn)
{
    oly_aval v[2];
    CHECK_OK(oly_aval_make(OLY_FLOAT32, 1, (const int64_t[]){3}, &v[0]));
    v[1] = v[0];
    oly_program *p = NULL;
    CHECK_OK(oly_program_of_eqn(oly_prim_lookup("add"), NULL, v, 2, NULL, 0, &p));
    char *text = NULL;
    if (p) CHECK_OK(oly_program_print(p, &text));
    CHECK_STREQ(text, "{ lambda ; a:f32[3] b:f32[3]. let\n    c:f32[3] = add a b\n  in (c,) }");
    free(text);
    oly_program_release(p);
    p = NULL;
    CHECK_ERR(oly_program_of_eqn(oly_prim_lookup("add"), NULL, v, 1, NULL, 0, &p),
              OLY_ERR_INVALID, "add");
    CHECK(p == NULL);
}

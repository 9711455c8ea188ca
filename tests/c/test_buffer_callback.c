/* test_buffer_callback.c — buffer_callback in the core: results written in
 * place, the alias rules of its shape rule, and where the buffer plan puts an
 * aliased output (over its dying input, in the caller's output buffer, or a
 * copy when the input is a program input or read again), effects and DCE,
 * the printed params, and vmap of an aliased call. */
#include "test.h"
#include "testutil.h"

/* ---------------------------------------------------------------- host functions */

/* What one host function saw at its last call. */
typedef struct seen {
    int calls;
    int n_args, n_results;
    const void *arg[4];
    void *res[4];
    float arg1_at_start;        /* args[1][0] before the results were written */
} seen;

/* results[k][e] = args[k][e] + 1 for every result k (args[k] present) or
 * results[k][e] = k + 1 (no argument k). f32 only. */
static oly_status plus_one_host(void *user, oly_callback_frame *f)
{
    seen *s = user;
    s->calls++;
    s->n_args = f->n_args;
    s->n_results = f->n_results;
    for (int i = 0; i < f->n_args && i < 4; i++) s->arg[i] = f->args[i];
    for (int k = 0; k < f->n_results && k < 4; k++) s->res[k] = f->results[k];
    if (f->n_args > 1) s->arg1_at_start = *(const float *)f->args[1];
    if (f->arg_arrays) return oly_host_fail(OLY_ERR_CALLBACK, "buffer_callback got arg_arrays");
    for (int k = 0; k < f->n_results; k++) {
        float *y = f->results[k];
        int64_t n = oly_aval_size(&f->result_avals[k]);
        const float *x = k < f->n_args ? f->args[k] : NULL;
        /* read everything before writing: x may be y */
        for (int64_t e = 0; e < n; e++) y[e] = (x ? x[e] : 0.0f) + (x ? 1.0f : (float)(k + 1));
    }
    return OLY_OK;
}

static oly_host_fn *host(const char *name, seen *s)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new(name, plus_one_host, s, NULL, &h));
    return h;
}

/* ---------------------------------------------------------------- builders */

static oly_var *in_f32(oly_builder *b, int64_t n)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_var *v = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    return v;
}

static oly_var *unary(oly_builder *b, const oly_prim *p, oly_var *x)
{
    oly_atom a = oly_atom_var(x);
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, &a, 1, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_var *add(oly_builder *b, oly_var *x, oly_var *y)
{
    oly_atom a[2] = {oly_atom_var(x), oly_atom_var(y)};
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_add, a, 2, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

/* buffer_callback(h, in) with n_res results of in[0]'s aval (of rank-1 f32[n]
 * when there is no input) and the given aliases. */
static oly_status bind_bc(oly_builder *b, oly_host_fn *h, const oly_var *const *in, int n_in,
                          int n_res, const oly_io_alias *aliases, int n_aliases, bool side,
                          oly_var **outs)
{
    oly_atom atoms[4];
    for (int i = 0; i < n_in; i++) atoms[i] = oly_atom_var((oly_var *)in[i]);
    int64_t n = 5;
    oly_aval ra[4];
    for (int k = 0; k < n_res; k++)
        ra[k] = n_in ? *oly_var_aval(in[0]) : tu_aval(OLY_FLOAT32, 1, &n);
    oly_params_callback pc = {.callback = h, .result_avals = ra, .n_results = n_res,
                              .has_side_effect = side, .aliases = aliases,
                              .n_aliases = n_aliases};
    return oly_builder_append(b, &oly__prim_buffer_callback, atoms, n_in, &pc, NULL, 0, outs,
                              n_res, NULL);
}

static oly_program *finish(oly_builder *b, oly_var *const *outs, int n)
{
    oly_atom a[4];
    for (int k = 0; k < n; k++) a[k] = oly_atom_var(outs[k]);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, a, n, &p));
    oly_builder_free(b);
    return p;
}

static const double X5[5] = {0.5, -1.0, 2.0, 3.25, -0.75};
static const oly_io_alias A00[1] = {{0, 0}};

/* Runs p on X5 and returns its only output (or NULL). */
static oly_array *run5(oly_program *p, oly_array **x_out)
{
    int64_t n = 5;
    oly_array *x = tu_array(OLY_FLOAT32, 1, &n, X5), *res = NULL;
    CHECK_OK(oly_program_run(p, 0, &x, 1, &res, 1));
    *x_out = x;
    return res;
}

/* ---------------------------------------------------------------- tests */

/* y = first() writes in place; z = second(y) aliased: z takes y's buffer (no
 * copy) because nothing reads y afterwards; out = neg(z). */
TEST(buffer_callback_alias_takes_the_dying_input)
{
    seen s1 = {0}, s2 = {0};
    oly_host_fn *h1 = host("first", &s1), *h2 = host("second", &s2);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_var *x2 = unary(b, &oly__prim_neg, x);
    oly_var *y = NULL, *z = NULL;
    const oly_var *in1[1] = {x2};
    CHECK_OK(bind_bc(b, h1, in1, 1, 1, NULL, 0, false, &y));
    const oly_var *in2[1] = {y};
    CHECK_OK(bind_bc(b, h2, in2, 1, 1, A00, 1, false, &z));
    oly_var *w = unary(b, &oly__prim_neg, z);
    oly_program *p = finish(b, &w, 1);
    oly_array *xa = NULL, *res = run5(p, &xa);
    CHECK_EQ(s2.calls, 1);
    CHECK(s2.arg[0] == s2.res[0]);  /* the host function sees one buffer */
    CHECK(s2.res[0] == s1.res[0]);  /* ... and it is y's: nothing was copied */
    double want[5];
    for (int e = 0; e < 5; e++) want[e] = -(-X5[e] + 1 + 1);
    CHECK(res && tu_allclose(res, want, 5, 0, 1e-6));
    CHECK(tu_allclose(xa, X5, 5, 0, 0)); /* the caller's input is untouched */
    oly_array_release(res);
    oly_array_release(xa);
    oly_program_release(p);
    oly_host_fn_release(h1);
    oly_host_fn_release(h2);
}

/* The aliased output is a program output: its input is computed straight into
 * the caller's output buffer and updated there. */
TEST(buffer_callback_alias_into_the_output_buffer)
{
    seen s1 = {0}, s2 = {0};
    oly_host_fn *h1 = host("first", &s1), *h2 = host("second", &s2);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_var *y = NULL, *z = NULL;
    const oly_var *in1[1] = {x};
    CHECK_OK(bind_bc(b, h1, in1, 1, 1, NULL, 0, false, &y));
    const oly_var *in2[1] = {y};
    CHECK_OK(bind_bc(b, h2, in2, 1, 1, A00, 1, false, &z));
    oly_program *p = finish(b, &z, 1);
    oly_array *xa = NULL, *res = run5(p, &xa);
    CHECK(res && s1.res[0] == oly_array_data(res));
    CHECK(s2.arg[0] == s2.res[0] && s2.res[0] == s1.res[0]);
    double want[5];
    for (int e = 0; e < 5; e++) want[e] = X5[e] + 2;
    CHECK(res && tu_allclose(res, want, 5, 0, 1e-6));
    oly_array_release(res);
    oly_array_release(xa);
    oly_program_release(p);
    oly_host_fn_release(h1);
    oly_host_fn_release(h2);
}

/* An aliased program input is the caller's (immutable) array: the output is
 * a copy of it, and the host function sees that copy at the output. */
TEST(buffer_callback_alias_of_a_program_input_is_a_copy)
{
    seen s = {0};
    oly_host_fn *h = host("cb", &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_var *z = NULL;
    const oly_var *in[1] = {x};
    CHECK_OK(bind_bc(b, h, in, 1, 1, A00, 1, false, &z));
    oly_program *p = finish(b, &z, 1);
    oly_array *xa = NULL, *res = run5(p, &xa);
    CHECK(s.arg[0] == s.res[0]);
    CHECK(s.arg[0] != oly_array_data(xa));
    CHECK(tu_allclose(xa, X5, 5, 0, 0));
    double want[5];
    for (int e = 0; e < 5; e++) want[e] = X5[e] + 1;
    CHECK(res && tu_allclose(res, want, 5, 0, 1e-6));
    oly_array_release(res);
    oly_array_release(xa);
    /* Eagerly too (the same one-equation program through oly_apply). */
    int64_t n = 5;
    oly_array *x2 = tu_array(OLY_FLOAT32, 1, &n, X5), *r2 = NULL;
    oly_params_callback pc = {.callback = h, .result_avals = oly_array_aval(x2),
                              .n_results = 1, .aliases = A00, .n_aliases = 1};
    int n_out = 0;
    CHECK_OK(oly_apply(&oly__prim_buffer_callback, &pc, &x2, 1, &r2, 1, &n_out));
    CHECK(tu_allclose(x2, X5, 5, 0, 0));
    CHECK(r2 && tu_allclose(r2, want, 5, 0, 1e-6));
    oly_array_release(r2);
    oly_array_release(x2);
    oly_program_release(p);
    oly_host_fn_release(h);
}

/* The input is read again after the call (add(y, z)), or passed twice: the
 * output is a copy, and y keeps its value. */
TEST(buffer_callback_alias_copies_a_live_input)
{
    seen s1 = {0}, s2 = {0};
    oly_host_fn *h1 = host("first", &s1), *h2 = host("second", &s2);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5);
    oly_var *y = NULL, *z = NULL;
    const oly_var *in1[1] = {x};
    CHECK_OK(bind_bc(b, h1, in1, 1, 1, NULL, 0, false, &y));
    const oly_var *in2[1] = {y};
    CHECK_OK(bind_bc(b, h2, in2, 1, 1, A00, 1, false, &z));
    oly_var *w = add(b, y, z);
    oly_program *p = finish(b, &w, 1);
    oly_array *xa = NULL, *res = run5(p, &xa);
    CHECK(s2.arg[0] == s2.res[0]);
    CHECK(s2.res[0] != s1.res[0]);
    double want[5];
    for (int e = 0; e < 5; e++) want[e] = (X5[e] + 1) + (X5[e] + 2);
    CHECK(res && tu_allclose(res, want, 5, 0, 1e-6));
    oly_array_release(res);
    oly_array_release(xa);
    oly_program_release(p);

    /* second(y, y) with 0 -> 0: argument 1 must not change under the call. */
    memset(&s2, 0, sizeof s2);
    CHECK_OK(oly_builder_new(&b));
    x = in_f32(b, 5);
    const oly_var *in0[1] = {x};
    CHECK_OK(bind_bc(b, h1, in0, 1, 1, NULL, 0, false, &y));
    const oly_var *twice[2] = {y, y};
    CHECK_OK(bind_bc(b, h2, twice, 2, 1, A00, 1, false, &z));
    oly_var *w2 = unary(b, &oly__prim_neg, z);
    p = finish(b, &w2, 1);
    res = run5(p, &xa);
    CHECK_EQ(s2.n_args, 2);
    CHECK(s2.arg[0] == s2.res[0]);
    CHECK(s2.arg[1] != s2.res[0]);
    CHECK_NEAR(s2.arg1_at_start, X5[0] + 1, 1e-6);
    for (int e = 0; e < 5; e++) want[e] = -(X5[e] + 2);
    CHECK(res && tu_allclose(res, want, 5, 0, 1e-6));
    oly_array_release(res);
    oly_array_release(xa);
    oly_program_release(p);
    oly_host_fn_release(h1);
    oly_host_fn_release(h2);
}

/* The shape rule checks the aliases; params print them. */
TEST(buffer_callback_alias_checks_and_printing)
{
    seen s = {0};
    oly_host_fn *h = host("cb", &s);
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = in_f32(b, 5), *x3 = in_f32(b, 3);
    const oly_var *in[2] = {x, x3};
    oly_var *o[2];
    oly_io_alias bad_in[1] = {{2, 0}}, bad_out[1] = {{0, 1}}, neg_in[1] = {{-1, 0}};
    CHECK_ERR(bind_bc(b, h, in, 2, 1, bad_in, 1, false, o), OLY_ERR_INVALID,
              "buffer_callback: alias 2 -> 0: input 2 outside [0, 2)");
    CHECK_ERR(bind_bc(b, h, in, 2, 1, neg_in, 1, false, o), OLY_ERR_INVALID,
              "input -1 outside [0, 2)");
    CHECK_ERR(bind_bc(b, h, in, 2, 1, bad_out, 1, false, o), OLY_ERR_INVALID,
              "buffer_callback: alias 0 -> 1: output 1 outside [0, 1)");
    oly_io_alias mismatch[1] = {{1, 0}};
    CHECK_ERR(bind_bc(b, h, in, 2, 1, mismatch, 1, false, o), OLY_ERR_INVALID,
              "buffer_callback: alias 1 -> 0: input f32[3] and output f32[5] differ");
    oly_io_alias dup_out[2] = {{0, 0}, {1, 0}}, dup_in[2] = {{0, 0}, {0, 1}};
    const oly_var *same[2] = {x, x};
    CHECK_ERR(bind_bc(b, h, same, 2, 2, dup_out, 2, false, o), OLY_ERR_INVALID,
              "output 0 is aliased by inputs 0 and 1");
    CHECK_ERR(bind_bc(b, h, same, 2, 2, dup_in, 2, false, o), OLY_ERR_INVALID,
              "input 0 is aliased twice");
    oly_params_callback nullal = {.callback = h, .result_avals = oly_var_aval(x),
                                  .n_results = 1, .n_aliases = 1};
    oly_atom xa = oly_atom_var(x);
    CHECK_ERR(oly_builder_append(b, &oly__prim_buffer_callback, &xa, 1, &nullal, NULL, 0, o, 1,
                                 NULL),
              OLY_ERR_INVALID, "1 aliases declared, aliases is NULL");
    oly_io_alias two[2] = {{1, 1}, {0, 0}};
    CHECK_OK(bind_bc(b, h, same, 2, 2, two, 2, true, o));
    oly_program *p = finish(b, o, 2);
    char *text = NULL;
    CHECK_OK(oly_program_print(p, &text));
    CHECK(text && strstr(text, "buffer_callback[callback=cb result_avals=(f32[5], f32[5]) "
                               "vmap_method=none has_side_effect=True "
                               "input_output_aliases=((1, 1), (0, 0))]"));
    free(text);
    oly_program_release(p);
    oly_host_fn_release(h);
}

/* has_side_effect: an effect DCE keeps; without it an unused call goes. */
TEST(buffer_callback_effects_and_dce)
{
    seen s = {0};
    oly_host_fn *h = host("cb", &s);
    for (int side = 0; side < 2; side++) {
        oly_builder *b;
        CHECK_OK(oly_builder_new(&b));
        oly_var *x = in_f32(b, 5), *unused = NULL;
        const oly_var *in[1] = {x};
        CHECK_OK(bind_bc(b, h, in, 1, 1, NULL, 0, side, &unused));
        oly_var *w = unary(b, &oly__prim_neg, x);
        oly_program *p = finish(b, &w, 1), *q = NULL;
        CHECK_EQ(oly_program_effects(p), side ? OLY_EFFECT_BUFFER_CALLBACK : 0);
        CHECK_OK(oly_program_dce(p, &q));
        CHECK_EQ(oly_program_num_eqns(q), side ? 2 : 1);
        s.calls = 0;
        oly_array *xa = NULL, *res = run5(q, &xa);
        CHECK_EQ(s.calls, side);
        oly_array_release(res);
        oly_array_release(xa);
        oly_program_release(q);
        oly_program_release(p);
    }
    oly_host_fn_release(h);
}

/* vmap with expand_dims: the unbatched aliased input is broadcast to the batch
 * like its output (the other unbatched input gets a leading 1); the callback
 * sees the batch in place. */
TEST(buffer_callback_vmap_keeps_aliases)
{
    seen s = {0};
    oly_host_fn *h = host("cb", &s);
    for (int method = OLY_VMAP_SEQUENTIAL; method <= OLY_VMAP_LEGACY_VECTORIZED; method++) {
        /* z = cb(c, x) with c aliased to z; c unbatched, x batched */
        oly_builder *b2;
        CHECK_OK(oly_builder_new(&b2));
        oly_var *c2 = in_f32(b2, 5), *x2 = in_f32(b2, 5), *z2 = NULL;
        oly_atom atoms[2] = {oly_atom_var(c2), oly_atom_var(x2)};
        oly_params_callback pc = {.callback = h, .result_avals = oly_var_aval(c2),
                                  .n_results = 1, .vmap_method = method, .aliases = A00,
                                  .n_aliases = 1};
        CHECK_OK(oly_builder_append(b2, &oly__prim_buffer_callback, atoms, 2, &pc, NULL, 0, &z2,
                                    1, NULL));
        oly_program *p2 = finish(b2, &z2, 1), *v = NULL;
        int in_axes[2] = {-1, 0}, out_axes[1] = {0};
        CHECK_OK(oly_program_vmap(p2, in_axes, 3, out_axes, &v));
        if (v) CHECK_OK(oly_program_verify(v));
        int64_t dims[2] = {3, 5}, n = 5;
        double xs[15];
        for (int e = 0; e < 15; e++) xs[e] = e;
        oly_array *ca = tu_array(OLY_FLOAT32, 1, &n, X5);
        oly_array *xa = tu_array(OLY_FLOAT32, 2, dims, xs), *res = NULL;
        oly_array *args[2] = {ca, xa};
        s.calls = 0;
        if (v) CHECK_OK(oly_program_run(v, 0, args, 2, &res, 1));
        CHECK_EQ(s.calls, method <= OLY_VMAP_SEQUENTIAL_UNROLLED ? 3 : 1);
        double want[15];
        for (int e = 0; e < 15; e++) want[e] = X5[e % 5] + 1;
        if (res && !tu_allclose(res, want, 15, 0, 1e-6))
            CHECK_FAIL_("vmap_method %d gave wrong values", method);
        oly_array_release(res);
        oly_array_release(ca);
        oly_array_release(xa);
        oly_program_release(v);
        oly_program_release(p2);
    }
    oly_host_fn_release(h);
}

/* test_ir.c — the builder, the printer, the verifier and the registry, on
 * small test-only primitive rows (t_*) so they do not depend on the families.
 * The rows are shared with test_dce.c (declared there). */
#include "test.h"
#include "testutil.h"

/* ---------------------------------------------------------------- test rows */

static oly_status same_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = ctx->in[0];
    out[0].weak = false;
    return OLY_OK;
}

/* Binary: equal dtypes; equal shapes or one rank 0. */
static oly_status binary_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_aval *x = &ctx->in[0], *y = &ctx->in[1];
    char a[128], b[128];
    oly_aval_format(a, sizeof a, x);
    oly_aval_format(b, sizeof b, y);
    if (x->dtype != y->dtype)
        return oly__error(OLY_ERR_TYPE, "%s: dtypes differ: %s vs %s", ctx->prim->name, a, b);
    if (x->rank && y->rank && !oly_aval_equal(x, y))
        return oly__error(OLY_ERR_SHAPE, "%s: shapes differ: %s vs %s", ctx->prim->name, a, b);
    out[0] = x->rank ? *x : *y;
    out[0].weak = false;
    return OLY_OK;
}

const oly_prim t_ir_sin = {.name = "t_sin", .n_in = 1, .n_out = 1, .shape = same_shape};
const oly_prim t_ir_mul = {.name = "t_mul", .n_in = 2, .n_out = 1, .shape = binary_shape};
const oly_prim t_ir_add = {.name = "t_add", .n_in = 2, .n_out = 1, .shape = binary_shape};

/* t_sum[axes=...]: reduces the listed axes. */
static const oly_param_field sum_fields[] = {
    {.name = "axes", .kind = OLY_FIELD_INTS, .offset = offsetof(oly_params_reduce, axes)},
};
static oly_status sum_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_reduce *pr = ctx->params;
    oly_aval r = ctx->in[0];
    int k = 0;
    for (int i = 0; i < r.rank; i++) {
        bool drop = false;
        for (int j = 0; j < pr->axes.n; j++) drop |= pr->axes.v[j] == i;
        if (!drop) r.dims[k++] = r.dims[i];
    }
    r.rank = k;
    out[0] = r;
    return OLY_OK;
}
const oly_prim t_ir_sum = {.name = "t_sum", .n_in = 1, .n_out = 1,
                           .params_size = sizeof(oly_params_reduce), .fields = sum_fields,
                           .n_fields = OLY_ARRAY_LEN(sum_fields), .shape = sum_shape};

/* t_split a -> (f32 copy, i32 of the same shape) */
static oly_status split_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = out[1] = ctx->in[0];
    out[1].dtype = OLY_INT32;
    return OLY_OK;
}
const oly_prim t_ir_split = {.name = "t_split", .n_in = 1, .n_out = 2, .shape = split_shape};

/* t_effect[ordered=...] *args: no outputs, an io effect. */
typedef struct t_effect_params { bool ordered; } t_effect_params;
static const oly_param_field effect_fields[] = {
    {.name = "ordered", .kind = OLY_FIELD_BOOL, .offset = offsetof(t_effect_params, ordered)},
};
static oly_status no_outputs(const oly_shape_ctx *ctx, oly_aval *out) { return OLY_OK; }
static uint32_t effect_effects(const void *params)
{
    return ((const t_effect_params *)params)->ordered ? OLY_EFFECT_ORDERED_IO : OLY_EFFECT_IO;
}
const oly_prim t_ir_effect = {.name = "t_effect", .n_in = -1, .n_out = 0,
                              .params_size = sizeof(t_effect_params), .fields = effect_fields,
                              .n_fields = OLY_ARRAY_LEN(effect_fields), .shape = no_outputs,
                              .effects = effect_effects};

/* t_call[name=...] *args: calls sub[0] (output count in a hidden param, like pjit). */
static const oly_param_field call_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_call, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_call, n_out),
     .hidden = true},
};
static int call_num_outputs(const void *params, int n_in)
{
    return (int)((const oly_params_call *)params)->n_out;
}
static oly_status call_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    if (ctx->n_sub != 1 || ctx->sub[0]->n_out != ctx->n_out || ctx->sub[0]->n_in != ctx->n_in)
        return oly__error(OLY_ERR_INVALID, "t_call: signature mismatch");
    for (int i = 0; i < ctx->n_out; i++) out[i] = *oly_program_output_aval(ctx->sub[0], i);
    return OLY_OK;
}
const oly_prim t_ir_call = {.name = "t_call", .n_in = -1, .num_outputs = call_num_outputs,
                            .params_size = sizeof(oly_params_call), .fields = call_fields,
                            .n_fields = OLY_ARRAY_LEN(call_fields), .shape = call_shape};

static const oly_prim t_noshape = {.name = "t_noshape", .n_in = 1, .n_out = 1};

/* ---------------------------------------------------------------- helpers */

static oly_aval f32(int rank, int64_t d0)
{
    int64_t dims[1] = {d0};
    return tu_aval(OLY_FLOAT32, rank, dims);
}

static oly_scalar lit_f32(double v)
{
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = OLY_FLOAT32;
    s.v.f = v;
    return s;
}

/* Appends a one-output equation and returns its var (NULL on failure). */
static oly_var *app1(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y,
                     const void *params)
{
    oly_atom in[2] = {x, y};
    oly_var *out = NULL;
    CHECK_OK(oly_builder_append(b, p, in, p->n_in, params, NULL, 0, &out, 1, NULL));
    return out;
}

/* Finishes b with one var output, frees b, prints and checks the text. */
static oly_program *finish1(oly_builder *b, oly_var *v)
{
    oly_atom o = oly_atom_var(v);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &o, 1, &p));
    oly_builder_free(b);
    return p;
}

static void check_print(const oly_program *p, const char *want)
{
    char *text = NULL;
    CHECK_OK(oly_program_print(p, &text));
    CHECK_STREQ(text, want);
    free(text);
}

/* ---------------------------------------------------------------- printer */

TEST(ir_print_basic)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a5 = f32(1, 5);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a5, &x));
    oly_var *s = app1(b, &t_ir_sin, oly_atom_var(x), oly_atom_var(x), NULL);
    oly_var *m = app1(b, &t_ir_mul, oly_atom_var(s), oly_atom_lit(lit_f32(2.0)), NULL);
    oly_program *p = finish1(b, m);
    check_print(p, "{ lambda ; a:f32[5]. let\n"
                   "    b:f32[5] = t_sin a\n"
                   "    c:f32[5] = t_mul b 2.0:f32[]\n"
                   "  in (c,) }");
    CHECK_EQ(oly_program_num_inputs(p), 1);
    CHECK_EQ(oly_program_num_outputs(p), 1);
    CHECK_EQ(oly_program_num_eqns(p), 2);
    CHECK(oly_aval_equal(oly_program_input_aval(p, 0), &a5));
    CHECK(oly_aval_equal(oly_program_output_aval(p, 0), &a5));
    CHECK(oly_program_input_aval(p, 1) == NULL);
    CHECK_EQ(oly_program_effects(p), 0);
    oly_program_release(p);
}

TEST(ir_print_no_eqns_and_consts)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *x, *c;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    int64_t d3[1] = {3};
    oly_array *val = tu_array(OLY_FLOAT32, 1, d3, (const double[]){1, 2, 3});
    CHECK_OK(oly_builder_add_const(b, val, &c)); /* a constant added after an input */
    oly_array_release(val);                      /* the builder holds its own reference */
    oly_atom outs[2] = {oly_atom_var(x), oly_atom_var(c)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    check_print(p, "{ lambda a:f32[3]; b:f32[]. let  in (b, a) }");
    CHECK_NEAR(tu_get(p->constval[0], 2), 3.0, 0);
    oly_program_release(p);

    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    p = finish1(b, x);
    check_print(p, "{ lambda ; a:f32[]. let  in (a,) }");
    oly_program_release(p);

    /* no inputs, no outputs */
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_finish(b, NULL, 0, &p));
    oly_builder_free(b);
    check_print(p, "{ lambda ; . let  in () }");
    oly_program_release(p);
}

TEST(ir_print_literals)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_scalar i = {.dtype = OLY_INT32, .v.i = 1};
    oly_scalar neg = {.dtype = OLY_INT64, .v.i = -7};
    oly_scalar u = {.dtype = OLY_UINT8, .v.u = 200};
    oly_scalar t = {.dtype = OLY_BOOL, .v.i = 1};
    oly_scalar f = {.dtype = OLY_BOOL, .v.i = 0};
    oly_atom outs[] = {
        oly_atom_lit(lit_f32(2.0)),       oly_atom_lit(lit_f32(0.5)),
        oly_atom_lit(lit_f32((float)0.1)), oly_atom_lit(lit_f32(NAN)),
        oly_atom_lit(lit_f32(-INFINITY)), oly_atom_lit(lit_f32(1e-5)),
        oly_atom_lit(lit_f32(1e20)),      oly_atom_lit(i),
        oly_atom_lit(neg),                oly_atom_lit(u),
        oly_atom_lit(t),                  oly_atom_lit(f),
    };
    oly_scalar d = {.dtype = OLY_FLOAT64, .v.f = 0.1};
    oly_scalar h = {.dtype = OLY_FLOAT16, .v.f = 0.0999755859375}; /* float16(0.1) */
    oly_scalar bf = {.dtype = OLY_BFLOAT16, .v.f = 3.0};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, OLY_ARRAY_LEN(outs), &p));
    oly_builder_free(b);
    check_print(p, "{ lambda ; . let  in (2.0:f32[], 0.5:f32[], 0.1:f32[], nan:f32[], "
                   "-inf:f32[], 1e-05:f32[], 1e+20:f32[], 1:i32[], -7:i64[], 200:u8[], "
                   "True:bool[], False:bool[]) }");
    /* a literal output has an aval too */
    CHECK_EQ(oly_program_output_aval(p, 7)->dtype, OLY_INT32);
    CHECK_EQ(oly_program_output_aval(p, 7)->rank, 0);
    oly_program_release(p);

    CHECK_OK(oly_builder_new(&b));
    oly_atom o[3] = {oly_atom_lit(d), oly_atom_lit(h), oly_atom_lit(bf)};
    CHECK_OK(oly_builder_finish(b, o, 3, &p));
    oly_builder_free(b);
    check_print(p, "{ lambda ; . let  in (0.1:f64[], 0.1:f16[], 3.0:bf16[]) }");
    oly_program_release(p);
}

TEST(ir_print_params_multi_and_zero_outputs)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    int64_t d23[2] = {2, 3};
    oly_aval a = tu_aval(OLY_FLOAT32, 2, d23);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_reduce axes = {.axes = {1, {0}}};
    oly_var *r = app1(b, &t_ir_sum, oly_atom_var(x), oly_atom_var(x), &axes);
    oly_var *two[2] = {NULL, NULL};
    int n = -1;
    oly_atom in = oly_atom_var(r);
    CHECK_OK(oly_builder_append(b, &t_ir_split, &in, 1, NULL, NULL, 0, two, 2, &n));
    CHECK_EQ(n, 2);
    t_effect_params ep = {.ordered = true};
    oly_atom ein[2] = {oly_atom_var(two[1]), oly_atom_lit(lit_f32(1))};
    CHECK_OK(oly_builder_append(b, &t_ir_effect, ein, 2, &ep, NULL, 0, NULL, 0, &n));
    CHECK_EQ(n, 0);
    oly_atom outs[2] = {oly_atom_var(two[0]), oly_atom_var(two[1])};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    check_print(p, "{ lambda ; a:f32[2,3]. let\n"
                   "    b:f32[3] = t_sum[axes=(0,)] a\n"
                   "    c:f32[3] d:i32[3] = t_split b\n"
                   "    t_effect[ordered=True] d 1.0:f32[]\n"
                   "  in (c, d) }");
    CHECK_EQ(oly_program_effects(p), OLY_EFFECT_ORDERED_IO);
    CHECK_EQ(p->eqn[2].effects, OLY_EFFECT_ORDERED_IO);
    oly_program_release(p);
}

/* More than 26 names: a..z then ba, bb, ... */
TEST(ir_print_long_names)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *v;
    CHECK_OK(oly_builder_add_input(b, &s, &v));
    for (int i = 0; i < 28; i++) v = app1(b, &t_ir_sin, oly_atom_var(v), oly_atom_var(v), NULL);
    oly_program *p = finish1(b, v);
    char *text = NULL;
    CHECK_OK(oly_program_print(p, &text));
    CHECK(text && strstr(text, "    z:f32[] = t_sin y\n"));
    CHECK(text && strstr(text, "    ba:f32[] = t_sin z\n"));
    CHECK(text && strstr(text, "    bc:f32[] = t_sin bb\n"));
    CHECK(text && strstr(text, "  in (bc,) }"));
    free(text);
    oly_program_release(p);
}

/* Inputs may be added after equations (closure capture); input order is add
 * order, and inputs are named before equation outputs. */
TEST(ir_input_after_equations)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *x, *y;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_var *u = app1(b, &t_ir_sin, oly_atom_var(x), oly_atom_var(x), NULL);
    CHECK_OK(oly_builder_add_input(b, &s, &y));
    oly_var *w = app1(b, &t_ir_add, oly_atom_var(u), oly_atom_var(y), NULL);
    oly_program *p = finish1(b, w);
    check_print(p, "{ lambda ; a:f32[] b:f32[]. let\n"
                   "    c:f32[] = t_sin a\n"
                   "    d:f32[] = t_add c b\n"
                   "  in (d,) }");
    CHECK_EQ(oly_program_num_inputs(p), 2);
    oly_program_release(p);
}

/* Builds { lambda ; a:f32[]. let b = t_sin a in (b,) }. */
static oly_program *make_sin_program(void)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    return finish1(b, app1(b, &t_ir_sin, oly_atom_var(x), oly_atom_var(x), NULL));
}

TEST(ir_print_nested)
{
    oly_program *inner = make_sin_program();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *x, *y = NULL;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_params_call cp = {.name = "f", .n_out = 1};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &cp, &inner, 1, &y, 1, NULL));
    oly_program_release(inner); /* the equation holds its own reference */
    oly_var *z = app1(b, &t_ir_sin, oly_atom_var(y), oly_atom_var(y), NULL);
    oly_program *p = finish1(b, z);
    check_print(p, "{ lambda ; a:f32[]. let\n"
                   "    b:f32[] = t_call[\n"
                   "      name=f\n"
                   "      jaxpr={ lambda ; c:f32[]. let\n"
                   "          d:f32[] = t_sin c\n"
                   "        in (d,) }\n"
                   "    ] a\n"
                   "    e:f32[] = t_sin b\n"
                   "  in (e,) }");
    CHECK_OK(oly_program_verify(p));
    oly_program_release(p);
}

/* ---------------------------------------------------------------- builder */

TEST(ir_builder_errors)
{
    oly_builder *b, *other;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_new(&other));
    oly_aval s3 = f32(1, 3), s4 = f32(1, 4);
    oly_var *x, *y, *foreign, *out = NULL;
    CHECK_OK(oly_builder_add_input(b, &s3, &x));
    CHECK_OK(oly_builder_add_input(b, &s4, &y));
    CHECK_OK(oly_builder_add_input(other, &s3, &foreign));

    oly_atom in3[3] = {oly_atom_var(x), oly_atom_var(x), oly_atom_var(x)};
    CHECK_ERR(oly_builder_append(b, &t_ir_add, in3, 3, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_INVALID, "t_add: expected 2 inputs, got 3");
    oly_atom fx[2] = {oly_atom_var(x), oly_atom_var(foreign)};
    CHECK_ERR(oly_builder_append(b, &t_ir_add, fx, 2, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_INVALID, "input 1 is a variable from another program");
    /* the shape rule's error reaches the user unchanged */
    oly_atom xy[2] = {oly_atom_var(x), oly_atom_var(y)};
    CHECK_ERR(oly_builder_append(b, &t_ir_add, xy, 2, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_SHAPE, "t_add: shapes differ: f32[3] vs f32[4]");
    CHECK_ERR(oly_builder_append(b, &t_ir_sum, xy, 1, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_INVALID, "t_sum: params are required");
    CHECK_ERR(oly_builder_append(b, &t_noshape, xy, 1, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_UNSUPPORTED, "t_noshape has no shape rule");
    CHECK_ERR(oly_builder_append(b, NULL, xy, 1, NULL, NULL, 0, &out, 1, NULL),
              OLY_ERR_INVALID, "primitive is NULL");
    CHECK(out == NULL); /* outputs untouched on failure */
    oly_aval bad = f32(1, 3);
    bad.dims[0] = -1;
    CHECK_ERR(oly_builder_add_input(b, &bad, NULL), OLY_ERR_INVALID, "negative dimension");
    bad.rank = OLY_MAX_RANK + 1;
    CHECK_ERR(oly_builder_add_input(b, &bad, NULL), OLY_ERR_INVALID, "rank 17");

    oly_atom fo = oly_atom_var(foreign);
    oly_program *p = NULL;
    CHECK_ERR(oly_builder_finish(b, &fo, 1, &p), OLY_ERR_INVALID,
              "output 0 is a variable from another program");
    CHECK(p == NULL);
    /* after the failures the builder still works */
    oly_var *ok = app1(b, &t_ir_add, oly_atom_var(x), oly_atom_var(x), NULL);
    oly_atom o = oly_atom_var(ok);
    CHECK_OK(oly_builder_finish(b, &o, 1, &p));
    CHECK_ERR(oly_builder_add_input(b, &s3, NULL), OLY_ERR_INVALID, "already finished");
    oly_builder_free(b);
    oly_builder_free(other);
    CHECK_EQ(oly_program_num_eqns(p), 1);
    oly_program_release(p);
}

/* A builder freed without finishing drops its constants, params and subs. */
TEST(ir_builder_free_unfinished)
{
    oly_program *inner = make_sin_program();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_array *val = tu_scalar(OLY_FLOAT32, 1.0);
    oly_var *c, *y;
    CHECK_OK(oly_builder_add_const(b, val, &c));
    oly_params_call cp = {.name = "g", .n_out = 1};
    oly_atom in = oly_atom_var(c);
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &cp, &inner, 1, &y, 1, NULL));
    CHECK_EQ(atomic_load(&inner->refcount), 2);
    CHECK_EQ(atomic_load(&val->refcount), 2);
    oly_builder_free(b);
    CHECK_EQ(atomic_load(&inner->refcount), 1);
    CHECK_EQ(atomic_load(&val->refcount), 1);
    oly_program_release(inner);
    oly_array_release(val);
    oly_builder_free(NULL);
    oly_program_release(NULL);
}

TEST(ir_program_uid_and_retain)
{
    oly_program *p = make_sin_program(), *q = make_sin_program();
    CHECK(p->uid != q->uid);
    CHECK(oly_program_retain(p) == p);
    oly_program_release(p);
    CHECK_EQ(atomic_load(&p->refcount), 1);
    oly_program_release(p);
    oly_program_release(q);
}

/* ---------------------------------------------------------------- verifier */

TEST(ir_verify_catches_broken_programs)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(1, 5);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_var *u = app1(b, &t_ir_sin, oly_atom_var(x), oly_atom_var(x), NULL);
    oly_var *w = app1(b, &t_ir_mul, oly_atom_var(u), oly_atom_var(x), NULL);
    t_effect_params ep = {false};
    oly_atom ein = oly_atom_var(w);
    CHECK_OK(oly_builder_append(b, &t_ir_effect, &ein, 1, &ep, NULL, 0, NULL, 0, NULL));
    oly_program *p = finish1(b, w);
    CHECK_OK(oly_program_verify(p));

    /* a wrong aval on an equation's output */
    p->eqn[0].out[0]->aval.dims[0] = 6;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 0 (t_sin) output 0 is f32[6] but the shape rule gives f32[5]");
    p->eqn[0].out[0]->aval.dims[0] = 5;
    p->eqn[1].out[0]->aval.dtype = OLY_INT32;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL, "equation 1 (t_mul) output 0 is i32[5]");
    p->eqn[1].out[0]->aval.dtype = OLY_FLOAT32;
    CHECK_OK(oly_program_verify(p));

    /* use before definition: swap the first two equations */
    oly_eqn tmp = p->eqn[0];
    p->eqn[0] = p->eqn[1];
    p->eqn[1] = tmp;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 0 (t_mul) input 0 uses variable");
    p->eqn[1] = p->eqn[0];
    p->eqn[0] = tmp;
    CHECK_OK(oly_program_verify(p));

    /* defined twice: the second equation redefines the first's output */
    oly_var *keep = p->eqn[1].out[0];
    p->eqn[1].out[0] = p->eqn[0].out[0];
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL, "equation 1 (t_mul) output 0");
    CHECK(strstr(oly_last_error(), "defined twice"));
    p->eqn[1].out[0] = keep;

    /* arity */
    p->eqn[1].n_in = 1;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 1 (t_mul) has 1 inputs, expected 2");
    p->eqn[1].n_in = 2;

    /* output count */
    p->eqn[1].n_out = 0;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 1 (t_mul) has 0 outputs, expected 1");
    p->eqn[1].n_out = 1;

    /* effects: on the equation, and the program's union */
    p->eqn[2].effects = 0;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 2 (t_effect) records effects 0x0, expected 0x1");
    p->eqn[2].effects = OLY_EFFECT_IO;
    p->effects = 0;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL, "program records effects 0x0");
    p->effects = OLY_EFFECT_IO;

    /* an output that is not defined in this program */
    oly_var stray = {.id = 9999, .aval = s};
    oly_atom saved = p->out[0];
    p->out[0] = oly_atom_var(&stray);
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL, "program output 0 has id 9999");
    p->out[0] = saved;
    CHECK_OK(oly_program_verify(p));
    oly_program_release(p);
}

TEST(ir_verify_nested)
{
    oly_program *inner = make_sin_program();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval s = f32(0, 0);
    oly_var *x, *y;
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_params_call cp = {.name = "f", .n_out = 1};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &t_ir_call, &in, 1, &cp, &inner, 1, &y, 1, NULL));
    oly_program *p = finish1(b, y);
    inner->eqn[0].out[0]->aval.dtype = OLY_INT8;
    CHECK_ERR(oly_program_verify(p), OLY_ERR_INTERNAL,
              "equation 0 (t_call) nested program 0: verify: equation 0 (t_sin) output 0 is i8[]");
    inner->eqn[0].out[0]->aval.dtype = OLY_FLOAT32;
    CHECK_OK(oly_program_verify(p));
    oly_program_release(inner);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- registry */

typedef struct count_ctx { int n; bool all_found; } count_ctx;
static void count_row(const oly_prim *p, void *vctx)
{
    count_ctx *c = vctx;
    c->n++;
    if (oly_prim_lookup(oly_prim_name(p)) != p) c->all_found = false;
}

TEST(prims_registry_lookup)
{
    count_ctx c = {0, true};
    oly_prim_foreach(count_row, &c);
    CHECK_EQ(c.n, oly__prim_count());
    CHECK(c.all_found);
    for (int i = 0; i < oly__prim_count(); i++) CHECK(oly__prim_at(i) != NULL);
    CHECK(oly__prim_at(oly__prim_count()) == NULL);
    CHECK(oly__prim_at(-1) == NULL);
    CHECK(oly_prim_lookup("no_such_primitive") == NULL);
    CHECK(oly_prim_lookup(NULL) == NULL);
    int nf = -1;
    size_t sz = 1;
    CHECK(oly_prim_fields(&t_ir_sum, &nf, &sz) == sum_fields);
    CHECK_EQ(nf, 1);
    CHECK_EQ(sz, sizeof(oly_params_reduce));
    CHECK_EQ(oly_prim_num_outputs(&t_ir_split, NULL, 1), 2);
    oly_params_call cp = {.name = "f", .n_out = 3};
    CHECK_EQ(oly_prim_num_outputs(&t_ir_call, &cp, 0), 3);
    CHECK_STREQ(oly_prim_name(&t_ir_sin), "t_sin");
}

/* Every line of prims.def must have its row defined in a family file and
 * registered under the name it is listed with. */
TEST(prims_every_def_row_is_defined)
{
    static const char *const names[] = {
#define OLY_PRIM(name) #name,
#include "prims/prims.def"
#undef OLY_PRIM
    };
    char missing[4096] = "";
    int n_missing = 0;
    for (int i = 0; i < OLY_ARRAY_LEN(names); i++) {
        if (oly_prim_lookup(names[i])) continue;
        n_missing++;
        size_t len = strlen(missing);
        snprintf(missing + len, sizeof missing - len, " %s", names[i]);
    }
    if (n_missing)
        CHECK_FAIL_("%d of %d prims.def rows are not defined:%s", n_missing,
                    OLY_ARRAY_LEN(names), missing);
    CHECK_EQ(oly__prim_count(), OLY_ARRAY_LEN(names) - n_missing);
}

/* ---------------------------------------------------------------- real rows */

/* The printer on the standard rows: the form of the design's example. */
TEST(ir_print_real_rows)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    int64_t d[2] = {2, 5};
    oly_aval a = tu_aval(OLY_FLOAT32, 2, d);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_var *s = app1(b, &oly__prim_sin, oly_atom_var(x), oly_atom_var(x), NULL);
    oly_var *m = app1(b, &oly__prim_mul, oly_atom_var(s), oly_atom_lit(lit_f32(2.0)), NULL);
    oly_params_reduce axes = {.axes = {1, {0}}};
    oly_var *r = app1(b, &oly__prim_reduce_sum, oly_atom_var(m), oly_atom_var(m), &axes);
    oly_program *p = finish1(b, r);
    check_print(p, "{ lambda ; a:f32[2,5]. let\n"
                   "    b:f32[2,5] = sin a\n"
                   "    c:f32[2,5] = mul b 2.0:f32[]\n"
                   "    d:f32[5] = reduce_sum[axes=(0,)] c\n"
                   "  in (d,) }");
    oly_program_release(p);
}

TEST(ir_print_real_pjit)
{
    oly_builder *ib;
    CHECK_OK(oly_builder_new(&ib));
    oly_aval s = f32(0, 0);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(ib, &s, &x));
    oly_program *inner =
        finish1(ib, app1(ib, &oly__prim_cos, oly_atom_var(x), oly_atom_var(x), NULL));
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_var *a, *r = NULL;
    CHECK_OK(oly_builder_add_input(b, &s, &a));
    oly_params_call cp = {.name = "g", .n_out = 1};
    oly_atom in = oly_atom_var(a);
    CHECK_OK(oly_builder_append(b, &oly__prim_pjit, &in, 1, &cp, &inner, 1, &r, 1, NULL));
    oly_program_release(inner);
    oly_program *p = finish1(b, r);
    check_print(p, "{ lambda ; a:f32[]. let\n"
                   "    b:f32[] = pjit[\n"
                   "      name=g\n"
                   "      jaxpr={ lambda ; c:f32[]. let\n"
                   "          d:f32[] = cos c\n"
                   "        in (d,) }\n"
                   "    ] a\n"
                   "  in (b,) }");
    oly_program_release(p);
}

/* test_control.c — cond, while and scan: kernels against hand-computed values,
 * printed programs, shape errors, effects through DCE, and their transform
 * rules (vmap against a loop, jvp against finite differences, linearize +
 * transpose) through the rule checker and directly. */
#include "test.h"
#include "testutil.h"
#include "rulecheck.h"

/* ---------------------------------------------------------------- building */

static oly_atom in_(oly_builder *b, oly_aval a)
{
    oly_var *v = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &v));
    return oly_atom_var(v);
}

static oly_aval av(oly_dtype t, int rank, int64_t d0)
{
    return tu_aval(t, rank, rank ? (const int64_t[]){d0} : NULL);
}

static oly_atom lit(oly_dtype t, double x)
{
    oly_scalar s = {.dtype = t};
    if (oly_dtype_is_float(t))
        s.v.f = x;
    else
        s.v.i = (int64_t)x;
    return oly_atom_lit(s);
}

static oly_atom op(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y)
{
    oly_atom in[2] = {x, y};
    oly_var *o = NULL;
    oly_status s = oly_builder_append(b, p, in, p->n_in, NULL, NULL, 0, &o, 1, NULL);
    CHECK_OK(s);
    return s == OLY_OK ? oly_atom_var(o) : x;
}

static oly_program *fin(oly_builder *b, const oly_atom *outs, int n)
{
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, n, &p));
    oly_builder_free(b);
    if (p) CHECK_OK(oly_program_verify(p));
    return p;
}

static oly_builder *start(void)
{
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    return b;
}

/* One equation of p over fresh inputs of avals a[0..n) -> a program. */
static oly_program *one(const oly_prim *p, const void *params, const oly_aval *a, int n,
                        oly_program *const *subs, int n_sub)
{
    oly_builder *b = start();
    oly_atom in[16], out[16];
    oly_var *ov[16];
    for (int i = 0; i < n; i++) in[i] = in_(b, a[i]);
    int no = 0;
    CHECK_OK(oly_builder_append(b, p, in, n, params, subs, n_sub, ov, 16, &no));
    for (int k = 0; k < no; k++) out[k] = oly_atom_var(ov[k]);
    return fin(b, out, no);
}

/* Runs p on the inputs; outputs into out (new references). */
static bool run(oly_program *p, oly_array *const *in, int n_in, oly_array **out, int n_out)
{
    if (!p) return false;
    oly_status s = oly_program_run(p, 0, in, n_in, out, n_out);
    CHECK_OK(s);
    return s == OLY_OK;
}

static void release_all(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) oly_array_release(a[i]);
}

static char *print(const oly_program *p)
{
    char *text = NULL;
    if (p) CHECK_OK(oly_program_print(p, &text));
    return text;
}

/* ---------------------------------------------------------------- sample programs */

/* x -> x + 1 and x -> x * 2 over f32[3] (or ty[n]). */
static oly_program *br_add1(oly_dtype t, int64_t n)
{
    oly_builder *b = start();
    oly_atom x = in_(b, av(t, 1, n));
    oly_atom y = op(b, &oly__prim_add, x, lit(t, 1));
    return fin(b, &y, 1);
}

static oly_program *br_mul2(oly_dtype t, int64_t n)
{
    oly_builder *b = start();
    oly_atom x = in_(b, av(t, 1, n));
    oly_atom y = op(b, &oly__prim_mul, x, lit(t, 2));
    return fin(b, &y, 1);
}

/* while counting: cond(n; i, acc) = i < n; body(x; i, acc) = (i + 1, acc + x). */
static oly_program *w_cond(void)
{
    oly_builder *b = start();
    oly_atom n = in_(b, av(OLY_INT32, 0, 0));
    oly_atom i = in_(b, av(OLY_INT32, 0, 0));
    (void)in_(b, av(OLY_FLOAT64, 1, 2));
    oly_atom p = op(b, &oly__prim_lt, i, n);
    return fin(b, &p, 1);
}

static oly_program *w_body(void)
{
    oly_builder *b = start();
    oly_atom x = in_(b, av(OLY_FLOAT64, 1, 2));
    oly_atom i = in_(b, av(OLY_INT32, 0, 0));
    oly_atom acc = in_(b, av(OLY_FLOAT64, 1, 2));
    oly_atom o[2] = {op(b, &oly__prim_add, i, lit(OLY_INT32, 1)),
                     op(b, &oly__prim_add, op(b, &oly__prim_mul, acc, lit(OLY_FLOAT64, 0.5)),
                        op(b, &oly__prim_sin, x, x))};
    return fin(b, o, 2);
}

/* scan body (c, x) -> (c + x, c + x) over scalars of t. */
static oly_program *s_cumsum(oly_dtype t)
{
    oly_builder *b = start();
    oly_atom c = in_(b, av(t, 0, 0));
    oly_atom x = in_(b, av(t, 0, 0));
    oly_atom y = op(b, &oly__prim_add, c, x);
    oly_atom o[2] = {y, y};
    return fin(b, o, 2);
}

/* scan body (w, c, x) -> (c * w + x, c) (Horner), f32[] values. */
static oly_program *s_horner(oly_dtype t, int64_t n)
{
    oly_builder *b = start();
    int r = n ? 1 : 0;
    oly_atom w = in_(b, av(t, r, n));
    oly_atom c = in_(b, av(t, r, n));
    oly_atom x = in_(b, av(t, r, n));
    oly_atom o[2] = {op(b, &oly__prim_add, op(b, &oly__prim_mul, c, w), x), c};
    return fin(b, o, 2);
}

/* ---------------------------------------------------------------- kernels */

TEST(control_cond_kernel_picks_and_clamps)
{
    oly_program *br[2] = {br_add1(OLY_FLOAT32, 3), br_mul2(OLY_FLOAT32, 3)};
    oly_aval a[2] = {av(OLY_INT32, 0, 0), av(OLY_FLOAT32, 1, 3)};
    oly_params_cond pc = {.n_out = 1};
    oly_program *p = one(&oly__prim_cond, &pc, a, 2, br, 2);
    oly_array *x = tu_array(OLY_FLOAT32, 1, (const int64_t[]){3}, (const double[]){1, 2, 3});
    const struct { int idx; double want[3]; } cases[] = {
        {0, {2, 3, 4}}, {1, {2, 4, 6}}, {7, {2, 4, 6}}, {-3, {2, 3, 4}},
    };
    for (int c = 0; c < OLY_ARRAY_LEN(cases); c++) {
        oly_array *in[2] = {tu_scalar(OLY_INT32, cases[c].idx), x}, *out = NULL;
        if (run(p, in, 2, &out, 1)) CHECK(tu_allclose(out, cases[c].want, 3, 0, 0));
        oly_array_release(out);
        oly_array_release(in[0]);
    }
    /* bool predicate: False runs branch 0 */
    a[0] = av(OLY_BOOL, 0, 0);
    oly_program *q = one(&oly__prim_cond, &pc, a, 2, br, 2);
    for (int v = 0; v < 2; v++) {
        oly_array *in[2] = {tu_scalar(OLY_BOOL, v), x}, *out = NULL;
        if (run(q, in, 2, &out, 1))
            CHECK(tu_allclose(out, v ? (const double[]){2, 4, 6} : (const double[]){2, 3, 4}, 3,
                              0, 0));
        oly_array_release(out);
        oly_array_release(in[0]);
    }
    oly_array_release(x);
    oly_program_release(p);
    oly_program_release(q);
    oly_program_release(br[0]);
    oly_program_release(br[1]);
}

static oly_program *counting_while(void)
{
    oly_program *subs[2] = {w_cond(), w_body()};
    oly_aval a[4] = {av(OLY_INT32, 0, 0), av(OLY_FLOAT64, 1, 2), av(OLY_INT32, 0, 0),
                     av(OLY_FLOAT64, 1, 2)};
    oly_params_while pw = {.cond_nconsts = 1, .body_nconsts = 1};
    oly_program *p = one(&oly__prim_while, &pw, a, 4, subs, 2);
    oly_program_release(subs[0]);
    oly_program_release(subs[1]);
    return p;
}

TEST(control_while_kernel_counts)
{
    oly_program *p = counting_while();
    oly_array *x = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){0.5, -1});
    oly_array *acc = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){8, 0});
    for (int n = 0; n <= 4; n += 4) {
        oly_array *in[4] = {tu_scalar(OLY_INT32, n), x, tu_scalar(OLY_INT32, 0), acc};
        oly_array *out[2] = {NULL, NULL};
        if (run(p, in, 4, out, 2)) {
            CHECK_EQ(tu_get(out[0], 0), n);
            /* acc <- acc / 2 + sin(x) n times */
            double a0 = 8, a1 = 0;
            for (int k = 0; k < n; k++) {
                a0 = a0 * 0.5 + sin(0.5);
                a1 = a1 * 0.5 + sin(-1.0);
            }
            CHECK(tu_allclose(out[1], (const double[]){a0, a1}, 2, 1e-12, 0));
        }
        release_all(out, 2);
        oly_array_release(in[0]);
        oly_array_release(in[2]);
    }
    oly_array_release(x);
    oly_array_release(acc);
    oly_program_release(p);
}

TEST(control_scan_kernel_cumsum_forward_and_reverse)
{
    oly_program *body = s_cumsum(OLY_FLOAT32);
    oly_aval a[2] = {av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 1, 5)};
    oly_array *c0 = tu_scalar(OLY_FLOAT32, 10);
    oly_array *xs = tu_array(OLY_FLOAT32, 1, (const int64_t[]){5}, (const double[]){1, 2, 3, 4, 5});
    for (int rev = 0; rev < 2; rev++) {
        oly_params_scan ps = {.length = 5, .num_consts = 0, .num_carry = 1, .n_out = 2,
                              .reverse = rev};
        oly_program *p = one(&oly__prim_scan, &ps, a, 2, &body, 1);
        oly_array *in[2] = {c0, xs}, *out[2] = {NULL, NULL};
        if (run(p, in, 2, out, 2)) {
            CHECK_NEAR(tu_get(out[0], 0), 25, 0);
            const double fwd[5] = {11, 13, 16, 20, 25}, bwd[5] = {25, 24, 22, 19, 15};
            CHECK(tu_allclose(out[1], rev ? bwd : fwd, 5, 0, 0));
            CHECK_EQ(oly_array_aval(out[1])->rank, 1);
            CHECK_EQ(oly_array_aval(out[1])->dims[0], 5);
        }
        release_all(out, 2);
        oly_program_release(p);
    }
    /* length 0: the carry passes through, ys are empty */
    oly_aval a0[2] = {av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 1, 0)};
    oly_params_scan ps0 = {.length = 0, .num_carry = 1, .n_out = 2};
    oly_program *p0 = one(&oly__prim_scan, &ps0, a0, 2, &body, 1);
    oly_array *e = tu_array(OLY_FLOAT32, 1, (const int64_t[]){0}, NULL);
    oly_array *in0[2] = {c0, e}, *out0[2] = {NULL, NULL};
    if (run(p0, in0, 2, out0, 2)) {
        CHECK_NEAR(tu_get(out0[0], 0), 10, 0);
        CHECK_EQ(oly_aval_size(oly_array_aval(out0[1])), 0);
    }
    release_all(out0, 2);
    oly_array_release(e);
    oly_program_release(p0);
    oly_array_release(c0);
    oly_array_release(xs);
    oly_program_release(body);
}

TEST(control_scan_kernel_with_consts_and_vectors)
{
    oly_program *body = s_horner(OLY_FLOAT32, 2);
    oly_aval a[3] = {av(OLY_FLOAT32, 1, 2), av(OLY_FLOAT32, 1, 2),
                     tu_aval(OLY_FLOAT32, 2, (const int64_t[]){3, 2})};
    oly_params_scan ps = {.length = 3, .num_consts = 1, .num_carry = 1, .n_out = 2};
    oly_program *p = one(&oly__prim_scan, &ps, a, 3, &body, 1);
    oly_array *w = tu_array(OLY_FLOAT32, 1, (const int64_t[]){2}, (const double[]){2, 10});
    oly_array *c = tu_array(OLY_FLOAT32, 1, (const int64_t[]){2}, (const double[]){0, 1});
    oly_array *xs = tu_array(OLY_FLOAT32, 2, (const int64_t[]){3, 2},
                             (const double[]){1, 0, 2, 0, 3, 1});
    oly_array *in[3] = {w, c, xs}, *out[2] = {NULL, NULL};
    if (run(p, in, 3, out, 2)) {
        /* lane 0: c = 1, 4, 11; lane 1: c = 10, 100, 1001 */
        CHECK(tu_allclose(out[0], (const double[]){11, 1001}, 2, 0, 0));
        CHECK(tu_allclose(out[1], (const double[]){0, 1, 1, 10, 4, 100}, 6, 0, 0));
    }
    release_all(out, 2);
    oly_array_release(w);
    oly_array_release(c);
    oly_array_release(xs);
    oly_program_release(p);
    oly_program_release(body);
}

/* ---------------------------------------------------------------- printing, errors */

TEST(control_print_nested)
{
    oly_program *body = s_cumsum(OLY_FLOAT32);
    oly_aval a[2] = {av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 1, 5)};
    oly_params_scan ps = {.length = 5, .num_carry = 1, .n_out = 2, .reverse = true};
    oly_program *p = one(&oly__prim_scan, &ps, a, 2, &body, 1);
    char *text = print(p);
    CHECK_STREQ(text, "{ lambda ; a:f32[] b:f32[5]. let\n"
                      "    c:f32[] d:f32[5] = scan[\n"
                      "      length=5\n"
                      "      num_carry=1\n"
                      "      num_consts=0\n"
                      "      reverse=True\n"
                      "      jaxpr={ lambda ; e:f32[] f:f32[]. let\n"
                      "          g:f32[] = add e f\n"
                      "        in (g, g) }\n"
                      "    ] a b\n"
                      "  in (c, d) }");
    free(text);
    oly_program_release(p);

    oly_program *w = counting_while();
    text = print(w);
    CHECK(text && strstr(text, "= while[\n      body_nconsts=1\n      cond_nconsts=1\n"
                               "      jaxpr={ lambda ; "));
    CHECK(text && strstr(text, "jaxpr1={ lambda ; "));
    free(text);
    oly_program_release(w);
    oly_program_release(body);
}

TEST(control_shape_errors)
{
    oly_program *br[2] = {br_add1(OLY_FLOAT32, 3), br_mul2(OLY_FLOAT32, 4)};
    oly_builder *b = start();
    oly_atom in[2] = {in_(b, av(OLY_INT32, 0, 0)), in_(b, av(OLY_FLOAT32, 1, 3))};
    oly_params_cond pc = {.n_out = 1};
    oly_var *o;
    CHECK_ERR(oly_builder_append(b, &oly__prim_cond, in, 2, &pc, br, 2, &o, 1, NULL),
              OLY_ERR_SHAPE, "cond: operand 0: expected f32[4], got f32[3]");
    CHECK_ERR(oly_builder_append(b, &oly__prim_cond, in + 1, 1, &pc, br, 1, &o, 1, NULL),
              OLY_ERR_TYPE, "cond: index must be a scalar int32 or bool, got f32[3]");
    oly_program *body = s_cumsum(OLY_FLOAT32);
    oly_atom sin_[2] = {in_(b, av(OLY_FLOAT32, 0, 0)), in_(b, av(OLY_FLOAT32, 1, 4))};
    oly_params_scan ps = {.length = 5, .num_carry = 1, .n_out = 2};
    oly_var *so[2];
    CHECK_ERR(oly_builder_append(b, &oly__prim_scan, sin_, 2, &ps, &body, 1, so, 2, NULL),
              OLY_ERR_SHAPE, "scan: xs 0 is f32[4], expected a leading axis of 5");
    /* a while whose cond program returns a float */
    oly_program *wsub[2] = {body, body};
    oly_params_while pw = {0};
    CHECK_ERR(oly_builder_append(b, &oly__prim_while, sin_, 2, &pw, wsub, 2, so, 2, NULL),
              OLY_ERR_INVALID, "while: cond program has 2 outputs, expected 1");
    pw.cond_nconsts = 3;
    CHECK_ERR(oly_builder_append(b, &oly__prim_while, sin_, 2, &pw, wsub, 2, so, 2, NULL),
              OLY_ERR_INVALID, "while: cannot have -1 outputs");
    oly_builder_free(b);
    oly_program_release(body);
    oly_program_release(br[0]);
    oly_program_release(br[1]);
}

/* ---------------------------------------------------------------- effects */

static int io_calls;
static oly_status io_fn(void *user, oly_callback_frame *f)
{
    io_calls++;
    memcpy(f->results[0], f->args[0], oly_aval_nbytes(&f->arg_avals[0]));
    return OLY_OK;
}

/* scan body (c, x) -> (c + x, io_callback(x)) */
static oly_program *s_io_body(oly_host_fn *h, bool ordered)
{
    oly_builder *b = start();
    oly_atom c = in_(b, av(OLY_FLOAT32, 0, 0));
    oly_atom x = in_(b, av(OLY_FLOAT32, 0, 0));
    oly_aval ra = av(OLY_FLOAT32, 0, 0);
    oly_params_callback pc = {.callback = h, .result_avals = &ra, .n_results = 1,
                              .ordered = ordered};
    oly_var *y = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &x, 1, &pc, NULL, 0, &y, 1, NULL));
    oly_atom o[2] = {op(b, &oly__prim_add, c, x), oly_atom_var(y)};
    return fin(b, o, 2);
}

TEST(control_effects_keep_loops_alive)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new("io", io_fn, NULL, NULL, &h));
    oly_program *body = s_io_body(h, false);
    oly_program *pure = s_cumsum(OLY_FLOAT32);
    for (int eff = 0; eff < 2; eff++) {
        /* (c, xs) -> c, with the scan's outputs unused */
        oly_builder *b = start();
        oly_atom in[2] = {in_(b, av(OLY_FLOAT32, 0, 0)), in_(b, av(OLY_FLOAT32, 1, 4))};
        oly_params_scan ps = {.length = 4, .num_carry = 1, .n_out = 2};
        oly_var *so[2];
        CHECK_OK(oly_builder_append(b, &oly__prim_scan, in, 2, &ps, eff ? &body : &pure, 1, so,
                                    2, NULL));
        oly_program *p = fin(b, in, 1);
        oly_program *q = NULL;
        CHECK_OK(oly_program_dce(p, &q));
        if (!p || !q) break;
        CHECK_EQ(oly_program_effects(p), eff ? OLY_EFFECT_IO : 0);
        CHECK_EQ(oly_program_num_eqns(q), eff ? 1 : 0);
        io_calls = 0;
        oly_array *x[2] = {tu_scalar(OLY_FLOAT32, 1),
                           tu_array(OLY_FLOAT32, 1, (const int64_t[]){4}, NULL)};
        oly_array *out = NULL;
        if (run(q, x, 2, &out, 1)) CHECK_EQ(io_calls, eff ? 4 : 0);
        oly_array_release(out);
        release_all(x, 2);
        oly_program_release(p);
        oly_program_release(q);
    }
    /* cond and while unite their programs' effects */
    oly_program *br[2] = {pure, body};
    oly_aval a[3] = {av(OLY_INT32, 0, 0), av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 0, 0)};
    oly_params_cond pc = {.n_out = 2};
    oly_program *c = one(&oly__prim_cond, &pc, a, 3, br, 2);
    if (c) CHECK_EQ(oly_program_effects(c), OLY_EFFECT_IO);
    oly_program_release(c);
    /* an equation's effects before it is built: its row's and its bodies' */
    CHECK_EQ(oly_prim_effects(&oly__prim_cond, &pc, br, 2), OLY_EFFECT_IO);
    CHECK_EQ(oly_prim_effects(&oly__prim_cond, &pc, br, 1), 0);
    oly_params_callback ordered = {.callback = h, .result_avals = a, .n_results = 1,
                                   .ordered = true};
    CHECK_EQ(oly_prim_effects(&oly__prim_io_callback, &ordered, NULL, 0),
             OLY_EFFECT_ORDERED_IO);
    CHECK_EQ(oly_prim_effects(&oly__prim_add, NULL, NULL, 0), 0);
    oly_program_release(body);
    oly_program_release(pure);
    oly_host_fn_release(h);
}

TEST(control_vmap_io_errors)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new("io", io_fn, NULL, NULL, &h));
    oly_program *body = s_io_body(h, false), *pure = s_cumsum(OLY_FLOAT32);
    oly_program *br[2] = {pure, body};
    oly_aval a[3] = {av(OLY_INT32, 0, 0), av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 0, 0)};
    oly_params_cond pc = {.n_out = 2};
    oly_program *c = one(&oly__prim_cond, &pc, a, 3, br, 2), *v = NULL;
    /* unbatched index: still an error (as the reference does) */
    int in_axes[3] = {-1, 0, -1}, out_axes[2] = {0, 0};
    if (c)
        CHECK_ERR(oly_program_vmap(c, in_axes, 3, out_axes, &v), OLY_ERR_UNSUPPORTED,
                  "IO effect not supported in vmap-of-cond.");
    oly_program_release(c);
    oly_program_release(body);
    oly_program_release(pure);
    oly_host_fn_release(h);
}

/* ---------------------------------------------------------------- transforms */

TEST(control_rules_scan)
{
    oly_program *body = s_horner(OLY_FLOAT64, 0);
    for (int rev = 0; rev < 2; rev++) {
        oly_params_scan ps = {.length = 4, .num_consts = 1, .num_carry = 1, .n_out = 2,
                              .reverse = rev};
        rc_case c = {.prim = "scan", .params = &ps, .n_in = 3,
                     .in = {RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64), RC_F64(4)},
                     .subs = &body, .n_sub = 1};
        rc_check_all(&c);
    }
    oly_program_release(body);
    /* a nonlinear body: (c, x) -> (sin(c) * x, c * c) */
    oly_builder *b = start();
    oly_atom cc = in_(b, av(OLY_FLOAT64, 0, 0)), x = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o[2] = {op(b, &oly__prim_mul, op(b, &oly__prim_sin, cc, cc), x),
                     op(b, &oly__prim_mul, cc, cc)};
    oly_program *nl = fin(b, o, 2);
    oly_params_scan ps = {.length = 3, .num_carry = 1, .n_out = 2};
    rc_case c = {.prim = "scan", .params = &ps, .n_in = 2,
                 .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(3)}, .subs = &nl, .n_sub = 1};
    rc_check_all(&c);
    oly_program_release(nl);
}

TEST(control_rules_cond)
{
    /* branches (x, y) -> x * y, sin(x) + y, x - y * y; index in [-1, 3] (clamped) */
    oly_builder *b = start();
    oly_atom x = in_(b, av(OLY_FLOAT64, 1, 3)), y = in_(b, av(OLY_FLOAT64, 1, 3));
    oly_atom o = op(b, &oly__prim_mul, x, y);
    oly_program *b0 = fin(b, &o, 1);
    b = start();
    x = in_(b, av(OLY_FLOAT64, 1, 3));
    y = in_(b, av(OLY_FLOAT64, 1, 3));
    o = op(b, &oly__prim_add, op(b, &oly__prim_sin, x, x), y);
    oly_program *b1 = fin(b, &o, 1);
    b = start();
    x = in_(b, av(OLY_FLOAT64, 1, 3));
    y = in_(b, av(OLY_FLOAT64, 1, 3));
    o = op(b, &oly__prim_sub, x, op(b, &oly__prim_mul, y, y));
    oly_program *b2 = fin(b, &o, 1);
    oly_program *br[3] = {b0, b1, b2};
    oly_params_cond pc = {.n_out = 1};
    rc_case c = {.prim = "cond", .params = &pc, .n_in = 3,
                 .in = {RC_SCALAR(OLY_INT32), RC_F64(3), RC_F64(3)},
                 .lo = {-1}, .hi = {3}, .integer = {true}, .nodiff = {true},
                 .subs = br, .n_sub = 3};
    rc_check_all(&c);
    oly_program_release(b0);
    oly_program_release(b1);
    oly_program_release(b2);
}

TEST(control_rules_while)
{
    oly_program *subs[2] = {w_cond(), w_body()};
    oly_params_while pw = {.cond_nconsts = 1, .body_nconsts = 1};
    /* n in [0, 4]: a batched n gives a batched predicate */
    rc_case c = {.prim = "while", .params = &pw, .n_in = 4,
                 .in = {RC_SCALAR(OLY_INT32), RC_F64(2), RC_SCALAR(OLY_INT32), RC_F64(2)},
                 .lo = {0, 0, 0}, .hi = {4, 0, 1}, .integer = {true, false, true},
                 .nodiff = {true, false, true}, .subs = subs, .n_sub = 2,
                 .skip = RC_SKIP_TRANSPOSE};
    rc_check_all(&c);
    oly_program_release(subs[0]);
    oly_program_release(subs[1]);
}

TEST(control_while_has_no_reverse_mode)
{
    oly_program *p = counting_while();
    oly_program *prim = NULL, *lin = NULL, *t = NULL;
    int n_res = 0;
    bool nz_in[4] = {false, true, false, true}, nz_out[2];
    oly_status s = p ? oly_program_linearize(p, nz_in, &prim, &lin, &n_res, nz_out) : OLY_ERR_INVALID;
    CHECK_OK(s);
    if (s == OLY_OK)
        CHECK_ERR(oly_program_transpose(lin, n_res, &t), OLY_ERR_UNSUPPORTED,
                  "Reverse-mode differentiation does not work for lax.while_loop");
    oly_program_release(t);
    oly_program_release(prim);
    oly_program_release(lin);
    oly_program_release(p);
}

/* Mixed int/float carries; a carry reset every step (its tangent is an
 * instantiated zero on the way in: the partial evaluator's pass-through). */
TEST(control_rules_scan_mixed_and_reset)
{
    /* (i, c, x) -> (i + 1, sin(c) + x, c * x) */
    oly_builder *b = start();
    oly_atom i = in_(b, av(OLY_INT32, 0, 0)), c = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom x = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o[3] = {op(b, &oly__prim_add, i, lit(OLY_INT32, 1)),
                     op(b, &oly__prim_add, op(b, &oly__prim_sin, c, c), x),
                     op(b, &oly__prim_mul, c, x)};
    oly_program *body = fin(b, o, 3);
    oly_params_scan ps = {.length = 3, .num_carry = 2, .n_out = 3};
    rc_case k = {.prim = "scan", .params = &ps, .n_in = 3,
                 .in = {RC_SCALAR(OLY_INT32), RC_SCALAR(OLY_FLOAT64), RC_F64(3)},
                 .integer = {true}, .nodiff = {true}, .subs = &body, .n_sub = 1};
    rc_check_all(&k);
    oly_program_release(body);

    /* (c, x) -> (sin(x), c * x): the carry out never depends on the carry in */
    b = start();
    c = in_(b, av(OLY_FLOAT64, 0, 0));
    x = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o2[2] = {op(b, &oly__prim_sin, x, x), op(b, &oly__prim_mul, c, x)};
    body = fin(b, o2, 2);
    oly_params_scan ps2 = {.length = 4, .num_carry = 1, .n_out = 2, .reverse = true};
    rc_case k2 = {.prim = "scan", .params = &ps2, .n_in = 2,
                  .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(4)}, .subs = &body, .n_sub = 1};
    rc_check_all(&k2);
    oly_program_release(body);
}

/* Branches whose outputs differ in which tangents are zero (one returns a literal). */
TEST(control_rules_cond_zero_patterns)
{
    oly_builder *b = start();
    oly_atom x = in_(b, av(OLY_FLOAT64, 0, 0)), y = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o[2] = {op(b, &oly__prim_mul, x, y), y};
    oly_program *b0 = fin(b, o, 2);
    b = start();
    x = in_(b, av(OLY_FLOAT64, 0, 0));
    (void)in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o1[2] = {lit(OLY_FLOAT64, 2), op(b, &oly__prim_sin, x, x)};
    oly_program *b1 = fin(b, o1, 2);
    oly_program *br[2] = {b0, b1};
    oly_params_cond pc = {.n_out = 2};
    rc_case c = {.prim = "cond", .params = &pc, .n_in = 3,
                 .in = {RC_SCALAR(OLY_BOOL), RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64)},
                 .nodiff = {true}, .subs = br, .n_sub = 2};
    rc_check_all(&c);
    oly_program_release(b0);
    oly_program_release(b1);
}

/* A cond inside a scan body: vmap over xs batches the cond's predicate inside
 * the loop; grad goes through the partial evaluation and transposition of both. */
TEST(control_rules_cond_in_scan)
{
    oly_builder *b = start();
    oly_atom c = in_(b, av(OLY_FLOAT64, 0, 0)), x = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_builder *bb = start();
    oly_atom bc = in_(bb, av(OLY_FLOAT64, 0, 0)), bx = in_(bb, av(OLY_FLOAT64, 0, 0));
    oly_atom r = op(bb, &oly__prim_sub, bc, bx);
    oly_program *b0 = fin(bb, &r, 1);
    bb = start();
    bc = in_(bb, av(OLY_FLOAT64, 0, 0));
    bx = in_(bb, av(OLY_FLOAT64, 0, 0));
    r = op(bb, &oly__prim_mul, op(bb, &oly__prim_sin, bc, bc), bx);
    oly_program *b1 = fin(bb, &r, 1);
    oly_program *br[2] = {b0, b1};
    oly_atom pred = op(b, &oly__prim_gt, x, lit(OLY_FLOAT64, 0));
    oly_atom cin[3] = {pred, c, x};
    oly_params_cond pc = {.n_out = 1};
    oly_var *cv = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_cond, cin, 3, &pc, br, 2, &cv, 1, NULL));
    oly_atom o[2] = {oly_atom_var(cv), oly_atom_var(cv)};
    oly_program *body = fin(b, o, 2);
    oly_params_scan ps = {.length = 5, .num_carry = 1, .n_out = 2};
    rc_case k = {.prim = "scan", .params = &ps, .n_in = 2,
                 .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(5)}, .subs = &body, .n_sub = 1};
    rc_check_all(&k);
    oly_program_release(body);
    oly_program_release(b0);
    oly_program_release(b1);
}

/* linearize of a while: the known loop gives the primal outputs, the linear
 * program's tangents agree with jvp. */
TEST(control_while_linearize_matches_jvp)
{
    oly_program *p = counting_while();
    oly_program *prim = NULL, *lin = NULL, *j = NULL;
    int n_res = 0;
    bool nz_in[4] = {false, true, false, true}, nz_out[2], nzj[2];
    CHECK_OK(oly_program_linearize(p, nz_in, &prim, &lin, &n_res, nz_out));
    CHECK_OK(oly_program_jvp(p, nz_in, &j, nzj));
    if (!prim || !lin || !j) goto done;
    CHECK(!nz_out[0] && nz_out[1] && !nzj[0] && nzj[1]);
    oly_array *x = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){0.3, 1.1});
    oly_array *acc = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){2, -1});
    oly_array *tx = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){1, -2});
    oly_array *ta = tu_array(OLY_FLOAT64, 1, (const int64_t[]){2}, (const double[]){0.5, 3});
    oly_array *n = tu_scalar(OLY_INT32, 3), *i0 = tu_scalar(OLY_INT32, 0);
    oly_array *in[6] = {n, x, i0, acc, tx, ta};
    oly_array *jo[3] = {0}, *po[16] = {0}, *lo[1] = {0};
    int npo = oly_program_num_outputs(prim);
    CHECK(npo == 2 + n_res && npo <= 16);
    if (npo <= 16 && run(j, in, 6, jo, 3) && run(prim, in, 4, po, npo)) {
        oly_array *lin_in[18];
        for (int r = 0; r < n_res; r++) lin_in[r] = po[2 + r];
        lin_in[n_res] = tx;
        lin_in[n_res + 1] = ta;
        CHECK(tu_allclose(po[1], (const double[]){tu_get(jo[1], 0), tu_get(jo[1], 1)}, 2, 0, 0));
        if (run(lin, lin_in, n_res + 2, lo, 1))
            CHECK(tu_allclose(lo[0], (const double[]){tu_get(jo[2], 0), tu_get(jo[2], 1)}, 2,
                              1e-12, 0));
    }
    release_all(jo, 3);
    release_all(po, npo <= 16 ? npo : 0);
    release_all(lo, 1);
    release_all(in, 6);
done:
    oly_program_release(prim);
    oly_program_release(lin);
    oly_program_release(j);
    oly_program_release(p);
}

/* while(n; c; i, acc): cond i < n; body (c; i, acc) -> (io_callback(i) + 1, acc + c). */
static oly_program *io_while(oly_host_fn *h, bool ordered)
{
    oly_builder *b = start();
    oly_atom n = in_(b, av(OLY_INT32, 0, 0)), i = in_(b, av(OLY_INT32, 0, 0));
    (void)in_(b, av(OLY_FLOAT32, 0, 0));
    oly_atom pr = op(b, &oly__prim_lt, i, n);
    oly_program *cp = fin(b, &pr, 1);
    b = start();
    oly_atom c = in_(b, av(OLY_FLOAT32, 0, 0));
    i = in_(b, av(OLY_INT32, 0, 0));
    oly_atom acc = in_(b, av(OLY_FLOAT32, 0, 0));
    oly_aval ra = av(OLY_INT32, 0, 0);
    oly_params_callback pc = {.callback = h, .result_avals = &ra, .n_results = 1,
                              .ordered = ordered};
    oly_var *y = NULL;
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &i, 1, &pc, NULL, 0, &y, 1, NULL));
    oly_atom o[2] = {op(b, &oly__prim_add, oly_atom_var(y), lit(OLY_INT32, 1)),
                     op(b, &oly__prim_add, acc, c)};
    oly_program *bp = fin(b, o, 2);
    oly_program *subs[2] = {cp, bp};
    oly_aval a[4] = {av(OLY_INT32, 0, 0), av(OLY_FLOAT32, 0, 0), av(OLY_INT32, 0, 0),
                     av(OLY_FLOAT32, 0, 0)};
    oly_params_while pw = {.cond_nconsts = 1, .body_nconsts = 1};
    oly_program *p = one(&oly__prim_while, &pw, a, 4, subs, 2);
    oly_program_release(cp);
    oly_program_release(bp);
    return p;
}

TEST(control_vmap_while_io)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new("io", io_fn, NULL, NULL, &h));
    oly_program *po = io_while(h, true), *pu = io_while(h, false), *v = NULL;
    int batched_n[4] = {0, -1, -1, -1}, batched_c[4] = {-1, 0, -1, -1}, out_axes[2] = {0, 0};
    if (po)
        CHECK_ERR(oly_program_vmap(po, batched_c, 3, out_axes, &v), OLY_ERR_UNSUPPORTED,
                  "Ordered IO effects not supported in vmap.");
    if (pu)
        CHECK_ERR(oly_program_vmap(pu, batched_n, 3, out_axes, &v), OLY_ERR_UNSUPPORTED,
                  "Unordered IO effects not supported in while_loop with batched predicate");
    /* unbatched predicate: fine; the loop (and its callback) runs once per step */
    if (pu) CHECK_OK(oly_program_vmap(pu, batched_c, 3, out_axes, &v));
    if (v) {
        oly_array *in[4] = {tu_scalar(OLY_INT32, 2),
                            tu_array(OLY_FLOAT32, 1, (const int64_t[]){3}, (const double[]){1, 2, 3}),
                            tu_scalar(OLY_INT32, 0), tu_scalar(OLY_FLOAT32, 0)};
        oly_array *out[2] = {NULL, NULL};
        io_calls = 0;
        if (run(v, in, 4, out, 2)) {
            CHECK_EQ(io_calls, 2);
            CHECK_EQ(tu_get(out[0], 0), 2);
            CHECK(tu_allclose(out[1], (const double[]){2, 4, 6}, 3, 0, 0));
        }
        release_all(out, 2);
        release_all(in, 4);
    }
    oly_program_release(v);
    oly_program_release(po);
    oly_program_release(pu);
    oly_host_fn_release(h);
}

/* Composition: the rules applied to programs that are themselves transformed
 * loops (vmap of vmap, jvp / grad of vmap, vmap of jvp), through pjit. */
TEST(control_rules_composed)
{
    oly_program *body = s_horner(OLY_FLOAT64, 0);
    oly_params_scan ps = {.length = 3, .num_consts = 1, .num_carry = 1, .n_out = 2};
    oly_aval a[3] = {av(OLY_FLOAT64, 0, 0), av(OLY_FLOAT64, 0, 0), av(OLY_FLOAT64, 1, 3)};
    oly_program *p = one(&oly__prim_scan, &ps, a, 3, &body, 1), *v = NULL, *j = NULL;
    int in_axes[3] = {0, -1, 1}, out_axes[2] = {0, 0};
    if (p) CHECK_OK(oly_program_vmap(p, in_axes, 2, out_axes, &v));
    if (v) {
        CHECK_OK(oly_program_verify(v));
        oly_params_call pc = {.name = "vscan", .n_out = 2};
        rc_case c = {.prim = "pjit", .params = &pc, .n_in = 3,
                     .in = {RC_F64(2), RC_SCALAR(OLY_FLOAT64), RC_AVAL(OLY_FLOAT64, 3, 2)},
                     .subs = &v, .n_sub = 1};
        rc_check_all(&c);
    }
    bool nz[3] = {true, true, true}, nzo[2];
    if (p) CHECK_OK(oly_program_jvp(p, nz, &j, nzo));
    if (j) {
        oly_params_call pc = {.name = "jscan", .n_out = 4};
        rc_case c = {.prim = "pjit", .params = &pc, .n_in = 6,
                     .in = {RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64), RC_F64(3),
                            RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64), RC_F64(3)},
                     .subs = &j, .n_sub = 1, .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE};
        rc_check_all(&c);
    }
    oly_program_release(j);
    oly_program_release(v);
    oly_program_release(p);
    oly_program_release(body);
}

static const oly_eqn *find_eqn(const oly_program *p, const oly_prim *prim)
{
    for (int k = 0; p && k < p->n_eqn; k++)
        if (p->eqn[k].prim == prim) return &p->eqn[k];
    return NULL;
}

/* linearize of scan (w; c; x) -> (c * sin(w) + x; c): sin(w) and cos(w) are
 * loop invariant: computed once and passed to the linear loop as consts; the
 * only stacked residual is c; xs themselves are never copied. */
TEST(control_scan_linearize_hoists_invariants)
{
    oly_builder *b = start();
    oly_atom w = in_(b, av(OLY_FLOAT64, 0, 0)), c = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom x = in_(b, av(OLY_FLOAT64, 0, 0));
    oly_atom o[2] = {op(b, &oly__prim_add,
                        op(b, &oly__prim_mul, c, op(b, &oly__prim_sin, w, w)), x),
                     c};
    oly_program *body = fin(b, o, 2);
    oly_params_scan ps = {.length = 3, .num_consts = 1, .num_carry = 1, .n_out = 2};
    oly_aval a[3] = {av(OLY_FLOAT64, 0, 0), av(OLY_FLOAT64, 0, 0), av(OLY_FLOAT64, 1, 3)};
    oly_program *p = one(&oly__prim_scan, &ps, a, 3, &body, 1), *k = NULL, *l = NULL;
    bool nz[3] = {true, true, true}, nzo[2];
    int n_res = 0;
    if (p) CHECK_OK(oly_program_linearize(p, nz, &k, &l, &n_res, nzo));
    const oly_eqn *ke = find_eqn(k, &oly__prim_scan), *le = find_eqn(l, &oly__prim_scan);
    CHECK(ke && le);
    if (ke && le) {
        CHECK_EQ(ke->n_out, 3); /* carry, ys, stacked c */
        const oly_params_scan *lp = le->params;
        CHECK_EQ(lp->num_consts, 3); /* tangent of w, sin(w), cos(w) */
        CHECK_EQ(le->n_in, 3 + 1 + 2); /* + tangent carry; xs: stacked c, tangent xs */
    }
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(p);
    oly_program_release(body);
}

/* Under linearize an io_callback in a scan body runs in the known loop only:
 * once per iteration, not again in the linear program. */
TEST(control_scan_linearize_effects_once)
{
    oly_host_fn *h = NULL;
    CHECK_OK(oly_host_fn_new("io", io_fn, NULL, NULL, &h));
    oly_program *body = s_io_body(h, true);
    oly_params_scan ps = {.length = 4, .num_carry = 1, .n_out = 2};
    oly_aval a[2] = {av(OLY_FLOAT32, 0, 0), av(OLY_FLOAT32, 1, 4)};
    oly_program *p = one(&oly__prim_scan, &ps, a, 2, &body, 1), *k = NULL, *l = NULL;
    bool nz[2] = {true, false}, nzo[2];
    int n_res = 0;
    if (p) CHECK_OK(oly_program_linearize(p, nz, &k, &l, &n_res, nzo));
    if (k && l) {
        CHECK_EQ(oly_program_effects(k), OLY_EFFECT_ORDERED_IO);
        CHECK_EQ(oly_program_effects(l), 0);
        oly_array *in[2] = {tu_scalar(OLY_FLOAT32, 1),
                            tu_array(OLY_FLOAT32, 1, (const int64_t[]){4},
                                     (const double[]){1, 2, 3, 4})};
        oly_array *out[8] = {0};
        int nk = oly_program_num_outputs(k);
        io_calls = 0;
        if (nk <= 8 && run(k, in, 2, out, nk)) {
            CHECK_EQ(io_calls, 4);
            CHECK_NEAR(tu_get(out[0], 0), 11, 0);
            CHECK(tu_allclose(out[1], (const double[]){1, 2, 3, 4}, 4, 0, 0));
        }
        release_all(out, nk <= 8 ? nk : 0);
        release_all(in, 2);
    }
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(p);
    oly_program_release(body);
    oly_host_fn_release(h);
}

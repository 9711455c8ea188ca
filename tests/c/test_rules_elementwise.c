/* test_rules_elementwise.c — batch, JVP and transpose rules of the elementwise
 * rows (elementwise.c).
 *
 * Tables of cases are walked by rulecheck (rulecheck.h): vmap against a loop
 * over batch elements, jvp against central finite differences (float64 inputs
 * drawn from each op's domain), linearize + transpose by the dot-product test,
 * and, for the linear rows, their own transpose rule with the other inputs as
 * residuals. Integer and bool rows are checked under vmap only. Complex maps
 * that are only R-linear (real, imag, conj, abs, complex <-> real converts)
 * follow JAX's convention, adjoints for <a, b> = Re sum(a * b), so their
 * transposes are checked here with that pairing instead of rulecheck's
 * complex-bilinear one. Direct tests pin JAX's choices: max/min split ties
 * evenly, abs'(0) = 1, piecewise-constant rows have symbolic-zero tangents. */
#include "test.h"
#include "testutil.h"

#include "rulecheck.h"
#include "trans/trans.h"

#include <complex.h>

/* Runs every case of a table through rc_check_all; returns the failures. */
static int check_table(const rc_case *cases, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !rc_check_all(&cases[i]);
    if (bad) fprintf(stderr, "    %d of %d cases failed\n", bad, n);
    return bad;
}

/* Domains: [lo, hi] for input 0 (and 1). */
#define DOM(a, b) .lo = {(a)}, .hi = {(b)}
#define DOM2(a, b, c, d) .lo = {(a), (c)}, .hi = {(b), (d)}

/* ---------------------------------------------------------------- unary, float64 */

static const oly_params_round round_away = {0}, round_even = {1};
static const oly_params_integer_pow ipow3 = {3}, ipow_m2 = {-2}, ipow1 = {1}, ipow0 = {0},
                                    ipow2 = {2};

/* U64("sin", more fields...): the name leads the variadic part so that a case
 * with no extra fields still passes an argument (ISO C). */
#define U64(...) {.n_in = 1, .in = {RC_F64(3, 4)}, .prim = __VA_ARGS__}

TEST(rules_elementwise_unary_f64)
{
    const rc_case cases[] = {
        U64("neg", .linear = {true}),
        U64("exp"),
        U64("exp2"),
        U64("log", DOM(0.5, 3)),
        U64("log1p", DOM(-0.5, 2)),
        U64("expm1"),
        U64("sin"),
        U64("cos"),
        U64("tan", DOM(-1.2, 1.2)),
        U64("asin", DOM(-0.9, 0.9)),
        U64("acos", DOM(-0.9, 0.9)),
        U64("atan"),
        U64("sinh"),
        U64("cosh"),
        U64("tanh"),
        U64("asinh"),
        U64("acosh", DOM(1.2, 4)),
        U64("atanh", DOM(-0.9, 0.9)),
        U64("logistic"),
        U64("sqrt", DOM(0.5, 3)),
        U64("rsqrt", DOM(0.5, 3)),
        U64("cbrt", DOM(0.3, 2)),
        U64("cbrt", DOM(-2, -0.3)),
        U64("abs"),
        U64("square"),
        U64("real", .linear = {true}),
        U64("imag", .linear = {true}),
        U64("conj", .linear = {true}),
        /* piecewise constant: zero tangents (finite differences agree away
         * from the jumps, which random inputs do not hit) */
        U64("sign"),
        U64("floor"),
        U64("ceil"),
        U64("round", .params = &round_away),
        U64("round", .params = &round_even),
        U64("is_finite"),
        U64("integer_pow", .params = &ipow3),
        U64("integer_pow", .params = &ipow2),
        U64("integer_pow", .params = &ipow1),
        U64("integer_pow", .params = &ipow0),
        U64("integer_pow", .params = &ipow_m2, DOM(0.5, 2)),
        /* rank 0 */
        {.prim = "sin", .n_in = 1, .in = {RC_SCALAR(OLY_FLOAT64)}},
        {.prim = "neg", .n_in = 1, .in = {RC_SCALAR(OLY_FLOAT64)}, .linear = {true}},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

TEST(rules_elementwise_convert)
{
    static const oly_params_convert to_f32 = {OLY_FLOAT32, false}, to_f64 = {OLY_FLOAT64, false},
                                    to_i32 = {OLY_INT32, false}, to_bool = {OLY_BOOL, false},
                                    to_weak_f64 = {OLY_FLOAT64, true};
    const rc_case cases[] = {
        /* finite differences of a float32 output are noise: no jvp check; the
         * transpose check still compares the linearization with the jvp */
        {.prim = "convert_element_type", .params = &to_f32, .n_in = 1, .in = {RC_F64(3, 4)},
         .linear = {true}, .rtol = 1e-5, .skip = RC_SKIP_JVP},
        {.prim = "convert_element_type", .params = &to_f64, .n_in = 1, .in = {RC_F32(3, 4)},
         .linear = {true}},
        {.prim = "convert_element_type", .params = &to_weak_f64, .n_in = 1, .in = {RC_F64(3)},
         .linear = {true}},
        /* to integer / bool: zero tangent */
        {.prim = "convert_element_type", .params = &to_i32, .n_in = 1, .in = {RC_F64(3, 4)}},
        {.prim = "convert_element_type", .params = &to_bool, .n_in = 1, .in = {RC_F64(3, 4)}},
        /* from integer: nothing to differentiate, vmap only */
        {.prim = "convert_element_type", .params = &to_f64, .n_in = 1,
         .in = {RC_AVAL(OLY_INT32, 3, 4)}},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* ---------------------------------------------------------------- binary, float64 */

/* Each binary op at equal shapes and with either operand rank 0. */
#define B64(...)                                                                          \
    {.n_in = 2, .in = {RC_F64(3, 4), RC_F64(3, 4)}, .prim = __VA_ARGS__},                   \
        {.n_in = 2, .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(3, 4)}, .prim = __VA_ARGS__},     \
        {.n_in = 2, .in = {RC_F64(3, 4), RC_SCALAR(OLY_FLOAT64)}, .prim = __VA_ARGS__}

TEST(rules_elementwise_binary_f64)
{
    const rc_case cases[] = {
        B64("add", .linear = {true, true}),
        B64("sub", .linear = {true, true}),
        B64("mul", .linear = {true, false}),
        B64("mul", .linear = {false, true}),
        B64("div", DOM2(-2, 2, 0.5, 2), .linear = {true, false}),
        B64("div", DOM2(-2, 2, -2, -0.5)),
        B64("rem", DOM2(-3, 3, 0.7, 1.3)),
        B64("pow", DOM2(0.5, 2, -2, 2)),
        B64("max"),
        B64("min"),
        B64("atan2", DOM2(0.5, 2, -2, 2)),
        /* rank 0 both */
        {.prim = "mul", .n_in = 2, .in = {RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64)},
         .linear = {false, true}},
        {.prim = "pow", .n_in = 2, .in = {RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64)},
         DOM2(0.5, 2, -2, 2)},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* Rows whose derivative is zero but whose value moves with its inputs (or
 * whose outputs are bool): vmap and jvp/transpose plumbing; nextafter's finite
 * differences are not zero (it is x up to one ulp), so its jvp is checked
 * directly below. */
TEST(rules_elementwise_zero_tangent_binary)
{
    const rc_case cases[] = {
        B64("nextafter", .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE),
        B64("eq"), B64("ne"), B64("lt"), B64("le"), B64("gt"), B64("ge"),
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* ---------------------------------------------------------------- select_n */

TEST(rules_elementwise_select_n)
{
    const rc_case cases[] = {
        {.prim = "select_n", .n_in = 3,
         .in = {RC_AVAL(OLY_BOOL, 3, 4), RC_F64(3, 4), RC_F64(3, 4)},
         .linear = {false, true, true}},
        /* a residual case: not linear, but jvp and linearize still apply */
        {.prim = "select_n", .n_in = 3,
         .in = {RC_AVAL(OLY_BOOL, 3, 4), RC_F64(3, 4), RC_F64(3, 4)}, .nodiff = {false, true}},
        /* rank-0 predicate */
        {.prim = "select_n", .n_in = 3,
         .in = {RC_SCALAR(OLY_BOOL), RC_F64(3, 4), RC_F64(3, 4)},
         .linear = {false, true, true}},
        /* rank-0 everything */
        {.prim = "select_n", .n_in = 3,
         .in = {RC_SCALAR(OLY_BOOL), RC_SCALAR(OLY_FLOAT64), RC_SCALAR(OLY_FLOAT64)},
         .linear = {false, true, true}},
        /* one case */
        {.prim = "select_n", .n_in = 2, .in = {RC_AVAL(OLY_BOOL, 3, 4), RC_F64(3, 4)},
         .linear = {false, true}},
        /* int32 predicate over three cases (out-of-range indices clamp) */
        {.prim = "select_n", .n_in = 4,
         .in = {RC_AVAL(OLY_INT32, 3, 4), RC_F64(3, 4), RC_F64(3, 4), RC_F64(3, 4)},
         .lo = {-1}, .hi = {3}, .integer = {true}, .linear = {false, true, true, true}},
        {.prim = "select_n", .n_in = 4,
         .in = {RC_SCALAR(OLY_INT32), RC_F64(3, 4), RC_F64(3, 4), RC_F64(3, 4)},
         .lo = {0}, .hi = {2}, .integer = {true}, .linear = {false, true, true, true}},
        /* integer and bool cases: vmap only */
        {.prim = "select_n", .n_in = 3,
         .in = {RC_AVAL(OLY_BOOL, 3, 4), RC_AVAL(OLY_INT32, 3, 4), RC_AVAL(OLY_INT32, 3, 4)}},
        {.prim = "select_n", .n_in = 3,
         .in = {RC_SCALAR(OLY_BOOL), RC_AVAL(OLY_BOOL, 5), RC_AVAL(OLY_BOOL, 5)}},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* ---------------------------------------------------------------- integer and bool rows: vmap */

#define I32(...)                                                                          \
    {.n_in = 2, .in = {RC_AVAL(OLY_INT32, 3, 4), RC_AVAL(OLY_INT32, 3, 4)},                \
     .prim = __VA_ARGS__},                                                                \
        {.n_in = 2, .in = {RC_SCALAR(OLY_INT32), RC_AVAL(OLY_INT32, 3, 4)},                \
         .prim = __VA_ARGS__},                                                            \
        {.n_in = 2, .in = {RC_AVAL(OLY_INT32, 3, 4), RC_SCALAR(OLY_INT32)},                \
         .prim = __VA_ARGS__}
#define U1(name, t) {.prim = name, .n_in = 1, .in = {RC_AVAL((t), 2, 5)}}
#define BOOL2(name)                                                                       \
    {.prim = name, .n_in = 2, .in = {RC_AVAL(OLY_BOOL, 4), RC_AVAL(OLY_BOOL, 4)}},          \
        {.prim = name, .n_in = 2, .in = {RC_SCALAR(OLY_BOOL), RC_AVAL(OLY_BOOL, 4)}}

TEST(rules_elementwise_integer_vmap)
{
    static const oly_params_convert to_u8 = {OLY_UINT8, false};
    const rc_case cases[] = {
        U1("neg", OLY_INT32), U1("sign", OLY_INT32), U1("abs", OLY_INT64), U1("square", OLY_INT16),
        U1("not", OLY_INT32), U1("not", OLY_BOOL), U1("real", OLY_INT32), U1("imag", OLY_INT32),
        U1("conj", OLY_UINT8), U1("sign", OLY_UINT32),
        {.prim = "integer_pow", .params = &ipow3, .n_in = 1, .in = {RC_AVAL(OLY_INT32, 2, 5)}},
        {.prim = "convert_element_type", .params = &to_u8, .n_in = 1,
         .in = {RC_AVAL(OLY_INT32, 2, 5)}},
        I32("add"), I32("sub"), I32("mul"), I32("div"), I32("rem"),
        I32("pow", .lo = {-3, 0}, .hi = {3, 4}),
        I32("max"), I32("min"), I32("and"), I32("or"), I32("xor"),
        I32("shift_left", .lo = {-8, -1}, .hi = {8, 33}),
        I32("shift_right_logical", .lo = {-8, -1}, .hi = {8, 33}),
        I32("shift_right_arithmetic", .lo = {-8, -1}, .hi = {8, 33}),
        I32("eq"), I32("ne"), I32("lt"), I32("le"), I32("gt"), I32("ge"),
        BOOL2("and"), BOOL2("or"), BOOL2("xor"), BOOL2("max"), BOOL2("min"), BOOL2("eq"),
        BOOL2("lt"),
        {.prim = "add", .n_in = 2, .in = {RC_AVAL(OLY_UINT8, 6), RC_AVAL(OLY_UINT8, 6)}},
        {.prim = "mul", .n_in = 2, .in = {RC_SCALAR(OLY_INT64), RC_SCALAR(OLY_INT64)}},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* Lower precisions: vmap exact, jvp with rulecheck's float32 tolerance. */
TEST(rules_elementwise_f32)
{
    const rc_case cases[] = {
        {.prim = "exp", .n_in = 1, .in = {RC_F32(3, 4)}},
        {.prim = "tanh", .n_in = 1, .in = {RC_F32(7)}},
        {.prim = "mul", .n_in = 2, .in = {RC_F32(3, 4), RC_F32(3, 4)}, .linear = {true, false}},
        {.prim = "div", .n_in = 2, .in = {RC_F32(3), RC_SCALAR(OLY_FLOAT32)}, DOM2(-2, 2, 0.5, 2)},
        {.prim = "exp", .n_in = 1, .in = {RC_AVAL(OLY_FLOAT16, 3, 4)}, .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE},
        {.prim = "add", .n_in = 2, .in = {RC_AVAL(OLY_BFLOAT16, 5), RC_SCALAR(OLY_BFLOAT16)},
         .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* ---------------------------------------------------------------- complex */

#define C128(...) RC_AVAL(OLY_COMPLEX128, __VA_ARGS__)

/* Holomorphic rows: their linearizations are C-linear, so rulecheck's
 * complex-bilinear dot test applies. */
TEST(rules_elementwise_complex_holomorphic)
{
    const rc_case cases[] = {
        {.prim = "neg", .n_in = 1, .in = {C128(3, 2)}, .linear = {true}},
        {.prim = "exp", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "exp2", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "log", .n_in = 1, .in = {C128(3, 2)}, DOM(0.3, 2)},
        {.prim = "log1p", .n_in = 1, .in = {C128(3, 2)}, DOM(0.3, 2)},
        {.prim = "expm1", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "sin", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "cos", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "tan", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.8, 0.8)},
        {.prim = "asin", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.6, 0.6)},
        {.prim = "acos", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.6, 0.6)},
        {.prim = "atan", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.6, 0.6)},
        {.prim = "sinh", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "cosh", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "tanh", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.8, 0.8)},
        {.prim = "asinh", .n_in = 1, .in = {C128(3, 2)}, DOM(0.2, 0.6)},
        {.prim = "acosh", .n_in = 1, .in = {C128(3, 2)}, DOM(1.3, 3)},
        {.prim = "atanh", .n_in = 1, .in = {C128(3, 2)}, DOM(-0.6, 0.6)},
        {.prim = "logistic", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "sqrt", .n_in = 1, .in = {C128(3, 2)}, DOM(0.3, 2)},
        {.prim = "rsqrt", .n_in = 1, .in = {C128(3, 2)}, DOM(0.3, 2)},
        {.prim = "square", .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "integer_pow", .params = &ipow3, .n_in = 1, .in = {C128(3, 2)}},
        {.prim = "integer_pow", .params = &ipow_m2, .n_in = 1, .in = {C128(3, 2)}, DOM(0.5, 2)},
        {.prim = "add", .n_in = 2, .in = {C128(3, 2), C128(3, 2)}, .linear = {true, true}},
        {.prim = "sub", .n_in = 2, .in = {RC_SCALAR(OLY_COMPLEX128), C128(3, 2)},
         .linear = {true, true}},
        {.prim = "mul", .n_in = 2, .in = {C128(3, 2), C128(3, 2)}, .linear = {false, true}},
        {.prim = "div", .n_in = 2, .in = {C128(3, 2), C128(3, 2)}, DOM2(-2, 2, 0.5, 2),
         .linear = {true, false}},
        {.prim = "pow", .n_in = 2, .in = {C128(3, 2), C128(3, 2)}, DOM2(0.5, 2, -1, 1)},
        {.prim = "select_n", .n_in = 3, .in = {RC_AVAL(OLY_BOOL, 3, 2), C128(3, 2), C128(3, 2)},
         .linear = {false, true, true}},
    };
    check_table(cases, OLY_ARRAY_LEN(cases));
}

/* A random complex128 (both parts) or float64 array in [-1, 1]. */
static oly_array *crandom(const oly_aval *a, uint64_t seed) { return rc_random(a, -1, 1, false, seed); }

static double complex elem(const oly_array *a, int64_t k)
{
    const oly_aval *av = oly_array_aval(a);
    if (av->dtype == OLY_COMPLEX128) return ((const double complex *)oly_array_data(a))[k];
    return ((const double *)oly_array_data(a))[k];
}

/* Re sum(a * b) */
static double re_dot(const oly_array *a, const oly_array *b)
{
    double s = 0;
    for (int64_t k = 0; k < oly_aval_size(oly_array_aval(a)); k++)
        s += creal(elem(a, k) * elem(b, k));
    return s;
}

/* R-linear complex maps: jvp by rulecheck (finite differences along complex
 * directions), transpose by <ct, L v> == <L^T ct, v> under Re sum(a * b). */
static void check_r_linear(const char *name, const void *params, oly_dtype in_t, double lo,
                           double hi)
{
    oly_aval av = tu_aval(in_t, 1, (const int64_t[]){5});
    rc_case c = {.prim = name, .params = params, .n_in = 1, .in = {av}, .lo = {lo}, .hi = {hi},
                 .skip = RC_SKIP_TRANSPOSE};
    CHECK(rc_check_all(&c));

    oly_builder *b = NULL;
    oly_program *p = NULL, *k = NULL, *l = NULL, *t = NULL;
    oly_var *x = NULL, *y = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &av, &x));
    oly_atom xa = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, oly_prim_lookup(name), &xa, 1, params, NULL, 0, &y, 1, NULL));
    oly_atom ya = oly_atom_var(y);
    CHECK_OK(oly_builder_finish(b, &ya, 1, &p));
    oly_builder_free(b);
    if (!p) return;
    bool nz = true, nzo = false;
    int n_res = 0;
    CHECK_OK(oly_program_linearize(p, &nz, &k, &l, &n_res, &nzo));
    CHECK(nzo);
    if (l) CHECK_OK(oly_program_transpose(l, n_res, &t));
    oly_array *xin = crandom(&av, 7), *v = crandom(&av, 8);
    oly_array *kout[8] = {0}, *lin_in[9] = {0}, *lv = NULL, *w = NULL, *ct = NULL;
    if (t && k && xin && v && n_res < 8) {
        CHECK_OK(oly_program_run(k, 0, &xin, 1, kout, 1 + n_res));
        for (int r = 0; r < n_res; r++) lin_in[r] = kout[1 + r];
        lin_in[n_res] = v;
        CHECK_OK(oly_program_run(l, 0, lin_in, n_res + 1, &lv, 1));
        ct = crandom(oly_program_output_aval(l, 0), 9);
        lin_in[n_res] = ct;
        CHECK_OK(oly_program_run(t, 0, lin_in, n_res + 1, &w, 1));
        if (lv && w) {
            double lhs = re_dot(ct, lv), rhs = re_dot(w, v);
            if (fabs(lhs - rhs) > 1e-12 * (1 + fabs(lhs)))
                CHECK_FAIL_("%s(%s): Re<ct, L v> = %.17g but Re<L^T ct, v> = %.17g", name,
                            oly_dtype_name(in_t), lhs, rhs);
        }
    } else {
        CHECK(!"linearize/transpose/inputs");
    }
    for (int r = 0; r < 1 + n_res && r < 8; r++) oly_array_release(kout[r]);
    oly_array_release(xin);
    oly_array_release(v);
    oly_array_release(lv);
    oly_array_release(w);
    oly_array_release(ct);
    oly_program_release(p);
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(t);
}

TEST(rules_elementwise_complex_r_linear)
{
    static const oly_params_convert to_f64 = {OLY_FLOAT64, false},
                                    to_c128 = {OLY_COMPLEX128, false};
    check_r_linear("real", NULL, OLY_COMPLEX128, -2, 2);
    check_r_linear("imag", NULL, OLY_COMPLEX128, -2, 2);
    check_r_linear("conj", NULL, OLY_COMPLEX128, -2, 2);
    check_r_linear("abs", NULL, OLY_COMPLEX128, 0.5, 2);
    check_r_linear("convert_element_type", &to_f64, OLY_COMPLEX128, -2, 2);
    check_r_linear("convert_element_type", &to_c128, OLY_FLOAT64, -2, 2);
}

/* ---------------------------------------------------------------- rule coverage */

static const char *const elementwise_rows[] = {
    "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p",
    "expm1", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "logistic", "sqrt", "rsqrt", "cbrt", "abs", "square", "not", "real",
    "imag", "conj", "integer_pow", "convert_element_type", "add", "sub", "mul", "div", "rem",
    "pow", "max", "min", "atan2", "nextafter", "and", "or", "xor", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n",
};
static const char *const linear_rows[] = {"neg", "add", "sub", "mul", "div",
                                          "convert_element_type", "real", "imag", "conj",
                                          "select_n"};

TEST(rules_elementwise_every_row_has_rules)
{
    CHECK_EQ(OLY_ARRAY_LEN(elementwise_rows), 58);
    for (int i = 0; i < OLY_ARRAY_LEN(elementwise_rows); i++) {
        const oly_prim *p = oly_prim_lookup(elementwise_rows[i]);
        if (!p) {
            CHECK_FAIL_("no row named %s", elementwise_rows[i]);
            continue;
        }
        if (!p->batch) CHECK_FAIL_("%s has no batching rule", p->name);
        if (!p->jvp) CHECK_FAIL_("%s has no JVP rule", p->name);
    }
    for (int i = 0; i < OLY_ARRAY_LEN(linear_rows); i++) {
        const oly_prim *p = oly_prim_lookup(linear_rows[i]);
        if (p && !p->transpose) CHECK_FAIL_("%s has no transpose rule", p->name);
    }
    /* nonlinear rows must not pretend to be transposable */
    CHECK(oly_prim_lookup("sin")->transpose == NULL);
    CHECK(oly_prim_lookup("pow")->transpose == NULL);
}

/* ---------------------------------------------------------------- direct tests */

/* p(x, y) for two inputs of aval a (or one input when n_in == 1). */
static oly_program *one_eqn(const char *name, const void *params, int n_in, const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    oly_atom in[4];
    oly_var *out = NULL;
    if (oly_builder_new(&b) != OLY_OK) return NULL;
    oly_status s = OLY_OK;
    for (int i = 0; i < n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &a[i], &v);
        in[i] = oly_atom_var(v);
    }
    if (s == OLY_OK)
        s = oly_builder_append(b, oly_prim_lookup(name), in, n_in, params, NULL, 0, &out, 1, NULL);
    oly_atom o = oly_atom_var(out);
    if (s == OLY_OK) s = oly_builder_finish(b, &o, 1, &p);
    CHECK_OK(s);
    oly_builder_free(b);
    return p;
}

/* The tangent of p at inputs x along v (all inputs differentiated); NULL when
 * the jvp says the tangent is a symbolic zero (*nz false). */
static oly_array *tangent_at(oly_program *p, oly_array *const *x, oly_array *const *v, bool *nz)
{
    int n = oly_program_num_inputs(p);
    bool nz_in[4] = {true, true, true, true};
    oly_program *j = NULL;
    *nz = false;
    CHECK_OK(oly_program_jvp(p, nz_in, &j, nz));
    if (!j) return NULL;
    oly_array *in[8], *out[2] = {0};
    for (int i = 0; i < n; i++) {
        in[i] = x[i];
        in[n + i] = v[i];
    }
    CHECK_OK(oly_program_run(j, 0, in, 2 * n, out, *nz ? 2 : 1));
    oly_array_release(out[0]);
    oly_program_release(j);
    return out[1];
}

static oly_array *vec(const double *v, int64_t n)
{
    return tu_array(OLY_FLOAT64, 1, &n, v);
}

/* JAX's rule for max/min: the tangent of the operand equal to the result, a
 * tie split evenly. */
TEST(rules_elementwise_maxmin_ties)
{
    oly_aval a[2] = {tu_aval(OLY_FLOAT64, 1, (const int64_t[]){3}),
                     tu_aval(OLY_FLOAT64, 1, (const int64_t[]){3})};
    static const double xv[3] = {1, 2, 5}, yv[3] = {1, 3, 4}, tx[3] = {1, 10, 100},
                        ty[3] = {3, 20, 200};
    static const double want_max[3] = {2, 20, 100}, want_min[3] = {2, 10, 200};
    oly_array *x[2] = {vec(xv, 3), vec(yv, 3)}, *v[2] = {vec(tx, 3), vec(ty, 3)};
    const char *ops[2] = {"max", "min"};
    const double *want[2] = {want_max, want_min};
    for (int k = 0; k < 2; k++) {
        oly_program *p = one_eqn(ops[k], NULL, 2, a);
        bool nz = false;
        oly_array *t = p ? tangent_at(p, x, v, &nz) : NULL;
        CHECK(nz);
        if (t) CHECK(tu_allclose(t, want[k], 3, 0, 1e-15));
        oly_array_release(t);
        oly_program_release(p);
    }
    for (int i = 0; i < 2; i++) {
        oly_array_release(x[i]);
        oly_array_release(v[i]);
    }
}

/* abs' is sign(x) away from 0 and 1 at 0 (JAX: select(x >= 0, t, -t)). */
TEST(rules_elementwise_abs_at_zero)
{
    oly_aval a = tu_aval(OLY_FLOAT64, 1, (const int64_t[]){3});
    static const double xv[3] = {-2, 0, 3}, tv[3] = {5, 5, 5}, want[3] = {-5, 5, 5};
    oly_array *x = vec(xv, 3), *v = vec(tv, 3);
    oly_program *p = one_eqn("abs", NULL, 1, &a);
    bool nz = false;
    oly_array *t = p ? tangent_at(p, &x, &v, &nz) : NULL;
    CHECK(nz);
    if (t) CHECK(tu_allclose(t, want, 3, 0, 0));
    oly_array_release(t);
    oly_array_release(x);
    oly_array_release(v);
    oly_program_release(p);
}

/* Piecewise-constant rows, nextafter, integer_pow with y = 0 and converts to
 * integers have symbolic-zero tangents: the jvp reports nz_out false. */
TEST(rules_elementwise_symbolic_zero_tangents)
{
    oly_aval a[2] = {tu_aval(OLY_FLOAT64, 1, (const int64_t[]){3}),
                     tu_aval(OLY_FLOAT64, 1, (const int64_t[]){3})};
    static const oly_params_convert to_i32 = {OLY_INT32, false};
    static const oly_params_round rm = {0};
    struct {
        const char *name;
        const void *params;
        int n_in;
    } zero[] = {{"sign", NULL, 1}, {"floor", NULL, 1}, {"ceil", NULL, 1}, {"round", &rm, 1},
                {"nextafter", NULL, 2}, {"integer_pow", &ipow0, 1},
                {"convert_element_type", &to_i32, 1}};
    for (int i = 0; i < OLY_ARRAY_LEN(zero); i++) {
        oly_program *p = one_eqn(zero[i].name, zero[i].params, zero[i].n_in, a), *j = NULL;
        bool nz_in[2] = {true, true}, nz = true;
        if (p) CHECK_OK(oly_program_jvp(p, nz_in, &j, &nz));
        if (nz) CHECK_FAIL_("%s: tangent should be a symbolic zero", zero[i].name);
        if (j) CHECK_EQ(oly_program_num_outputs(j), 1);
        oly_program_release(j);
        oly_program_release(p);
    }
}

/* vmap leaves an unmapped rank-0 operand a scalar (no broadcast emitted) and
 * broadcasts a mapped rank-0 operand against a shaped unmapped one. */
TEST(rules_elementwise_batch_scalars)
{
    oly_aval a[2] = {tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4}), tu_aval(OLY_FLOAT64, 0, NULL)};
    oly_program *p = one_eqn("mul", NULL, 2, a), *v = NULL;
    int in_axes[2] = {0, -1}, out_axes[1] = {0};
    if (p) CHECK_OK(oly_program_vmap(p, in_axes, 3, out_axes, &v));
    if (v) {
        CHECK_EQ(oly_program_num_eqns(v), 1); /* mul(f64[3,4], f64[]) */
        CHECK_EQ(oly_program_input_aval(v, 1)->rank, 0);
    }
    oly_program_release(v);
    v = NULL;
    /* the scalar mapped, the vector not: f64[3] against f64[4] -> f64[3,4] */
    int in_axes2[2] = {-1, 0};
    if (p) CHECK_OK(oly_program_vmap(p, in_axes2, 3, out_axes, &v));
    if (v) {
        const oly_aval *o = oly_program_output_aval(v, 0);
        CHECK_EQ(o->rank, 2);
        CHECK_EQ(o->dims[0], 3);
        CHECK_EQ(o->dims[1], 4);
        static const double xs[4] = {1, 2, 3, 4}, ys[3] = {10, 20, 30};
        oly_array *in[2] = {vec(xs, 4), vec(ys, 3)}, *out = NULL;
        CHECK_OK(oly_program_run(v, 0, in, 2, &out, 1));
        static const double want[12] = {10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120};
        if (out) CHECK(tu_allclose(out, want, 12, 0, 0));
        oly_array_release(out);
        oly_array_release(in[0]);
        oly_array_release(in[1]);
    }
    oly_program_release(v);
    oly_program_release(p);

    /* select_n: an unmapped rank-0 predicate stays a scalar */
    oly_aval s[3] = {tu_aval(OLY_BOOL, 0, NULL), tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4}),
                     tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4})};
    p = one_eqn("select_n", NULL, 3, s);
    v = NULL;
    int sel_axes[3] = {-1, 0, -1};
    if (p) CHECK_OK(oly_program_vmap(p, sel_axes, 2, out_axes, &v));
    if (v) {
        CHECK_EQ(oly_program_input_aval(v, 0)->rank, 0);
        /* one broadcast (the unmapped case) and the select */
        CHECK_EQ(oly_program_num_eqns(v), 2);
    }
    oly_program_release(v);
    oly_program_release(p);
}

/* The transpose rules called directly: a symbolic-zero cotangent emits
 * nothing and gives symbolic zeros; mul with both operands linear and div
 * with a linear divisor are refused. */
TEST(rules_elementwise_transpose_direct)
{
    oly_aval a[3] = {tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4}),
                     tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4}),
                     tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4})};
    const char *names[] = {"neg", "add", "sub", "mul", "div", "real", "imag", "conj"};
    for (int i = 0; i < OLY_ARRAY_LEN(names); i++) {
        const oly_prim *row = oly_prim_lookup(names[i]);
        int n_in = row->n_in;
        oly_program *p = one_eqn(names[i], NULL, n_in, a);
        oly_builder *b = NULL;
        CHECK_OK(oly_builder_new(&b));
        if (!p || !b) {
            oly_builder_free(b);
            oly_program_release(p);
            continue;
        }
        oly_var *r = NULL;
        CHECK_OK(oly_builder_add_input(b, &a[0], &r));
        oly_transpose_ctx ctx = {.b = b};
        oly_atom in[2] = {oly_atom_var(r), oly_atom_var(r)}, ct = {0}, ct_in[2];
        bool linear[2] = {true, n_in == 2 && (i == 1 || i == 2)}, ct_nz = false,
             ct_in_nz[2] = {true, true};
        CHECK_OK(row->transpose(&ctx, &p->eqn[0], in, linear, &ct, &ct_nz, ct_in, ct_in_nz));
        if (ct_in_nz[0] || (n_in == 2 && ct_in_nz[1]))
            CHECK_FAIL_("%s: a zero cotangent gave a nonzero one", names[i]);
        /* nothing was emitted: the builder finishes with no equations */
        oly_program *q = NULL;
        oly_atom ra = oly_atom_var(r);
        CHECK_OK(oly_builder_finish(b, &ra, 1, &q));
        if (q) CHECK_EQ(oly_program_num_eqns(q), 0);
        oly_program_release(q);
        oly_builder_free(b);
        oly_program_release(p);
    }

    oly_program *p = one_eqn("mul", NULL, 2, a), *d = one_eqn("div", NULL, 2, a);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *r = NULL;
    if (b) CHECK_OK(oly_builder_add_input(b, &a[0], &r));
    if (p && d && r) {
        oly_transpose_ctx ctx = {.b = b};
        oly_atom in[2] = {{0}, {0}}, ct = oly_atom_var(r), ct_in[2];
        bool both[2] = {true, true}, divisor[2] = {false, true}, ct_nz = true, ct_in_nz[2];
        CHECK_ERR(oly__prim_mul.transpose(&ctx, &p->eqn[0], in, both, &ct, &ct_nz, ct_in,
                                          ct_in_nz),
                  OLY_ERR_INVALID, "both are linear");
        in[0] = oly_atom_var(r);
        CHECK_ERR(oly__prim_div.transpose(&ctx, &d->eqn[0], in, divisor, &ct, &ct_nz, ct_in,
                                          ct_in_nz),
                  OLY_ERR_INVALID, "divisor is linear");
    }
    oly_builder_free(b);
    oly_program_release(p);
    oly_program_release(d);
}

/* grad through a chain of elementwise rows: d/dx sum(select(x > 0, x^2, sin x) / 3)
 * by linearize + transpose against the closed form. */
TEST(rules_elementwise_grad_chain)
{
    oly_aval a = tu_aval(OLY_FLOAT64, 1, (const int64_t[]){4});
    oly_builder *b = NULL;
    oly_program *p = NULL, *k = NULL, *l = NULL, *t = NULL;
    CHECK_OK(oly_builder_new(&b));
    if (!b) return;
    oly_var *x = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xa = oly_atom_var(x), pos, sq, sn, sel, out;
    oly_scalar zero = {.dtype = OLY_FLOAT64, .v.f = 0}, three = {.dtype = OLY_FLOAT64, .v.f = 3};
    CHECK_OK(oly__emit_bin(b, &oly__prim_gt, xa, oly_atom_lit(zero), &pos));
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, xa, xa, &sq));
    CHECK_OK(oly__emit_un(b, &oly__prim_sin, xa, &sn));
    CHECK_OK(oly__emit_select(b, pos, sn, sq, &sel));
    CHECK_OK(oly__emit_bin(b, &oly__prim_div, sel, oly_atom_lit(three), &out));
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    bool nz = true, nzo = false;
    int n_res = 0;
    if (p) CHECK_OK(oly_program_linearize(p, &nz, &k, &l, &n_res, &nzo));
    if (l) CHECK_OK(oly_program_transpose(l, n_res, &t));
    if (!t) goto done;
    static const double xv[4] = {-1.5, -0.25, 0.5, 2};
    static const double ones[4] = {1, 1, 1, 1};
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = (xv[i] > 0 ? 2 * xv[i] : cos(xv[i])) / 3;
    oly_array *xin = vec(xv, 4), *ct = vec(ones, 4), *kout[8] = {0}, *tin[9] = {0}, *g = NULL;
    CHECK(n_res < 8);
    if (n_res < 8) {
        CHECK_OK(oly_program_run(k, 0, &xin, 1, kout, 1 + n_res));
        for (int r = 0; r < n_res; r++) tin[r] = kout[1 + r];
        tin[n_res] = ct;
        CHECK_OK(oly_program_run(t, 0, tin, n_res + 1, &g, 1));
        if (g) CHECK(tu_allclose(g, want, 4, 1e-14, 1e-15));
        for (int r = 0; r < 1 + n_res; r++) oly_array_release(kout[r]);
    }
    oly_array_release(g);
    oly_array_release(xin);
    oly_array_release(ct);
done:
    oly_program_release(p);
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(t);
}

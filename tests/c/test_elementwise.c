/* test_elementwise.c — the elementwise rows: a table walks every unary/binary
 * row and every dtype (accepted dtypes compared with the C library in double,
 * the others rejected by the shape rule), then explicit edge cases. */
#include "test.h"
#include "testutil.h"

#include <complex.h>
#include <float.h>
#include <limits.h>

typedef double complex zc;

#define NV 6

/* ---------------------------------------------------------------- dtype masks */

#define M(t) (1u << (t))
#define M_BOOL M(OLY_BOOL)
#define M_SINT (M(OLY_INT8) | M(OLY_INT16) | M(OLY_INT32) | M(OLY_INT64))
#define M_UINT (M(OLY_UINT8) | M(OLY_UINT16) | M(OLY_UINT32) | M(OLY_UINT64))
#define M_INT (M_SINT | M_UINT)
#define M_FLOAT (M(OLY_FLOAT16) | M(OLY_BFLOAT16) | M(OLY_FLOAT32) | M(OLY_FLOAT64))
#define M_CPLX (M(OLY_COMPLEX64) | M(OLY_COMPLEX128))
#define M_INEXACT (M_FLOAT | M_CPLX)
#define M_NUM (M_INT | M_INEXACT)
#define M_ALL (M_BOOL | M_NUM)

/* ---------------------------------------------------------------- input domains */

enum { D_GEN, D_NZ, D_POS, D_UNIT, D_GE1, D_EXP, D_SHIFT, D_HALF, D_COUNT };

static const double dom_float[D_COUNT][NV] = {
    [D_GEN] = {-2.5, -1, -0.5, 0, 0.75, 2},     [D_NZ] = {1.5, -2, 0.25, 3, -0.5, 1},
    [D_POS] = {0.25, 0.5, 1, 1.5, 2, 3},        [D_UNIT] = {-0.875, -0.5, 0, 0.25, 0.5, 0.875},
    [D_GE1] = {1, 1.25, 1.5, 2, 3, 4},          [D_EXP] = {0.5, 2, -1, 3, 0, 1.5},
    [D_SHIFT] = {0, 1, 2, 3, 1, 4},             [D_HALF] = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5},
};
static const double dom_int[D_COUNT][NV] = {
    [D_GEN] = {-3, -1, 0, 1, 2, 5},   [D_NZ] = {2, -3, 1, 4, -1, 3},  [D_POS] = {1, 2, 3, 4, 5, 6},
    [D_UNIT] = {-1, 0, 1, 0, 1, -1},  [D_GE1] = {1, 2, 3, 4, 5, 6},   [D_EXP] = {0, 1, 2, 3, 1, 2},
    [D_SHIFT] = {0, 1, 2, 3, 1, 4},   [D_HALF] = {-3, -1, 0, 1, 2, 5},
};
static const double dom_bool[2][NV] = {{0, 1, 1, 0, 1, 0}, {0, 0, 1, 1, 1, 0}};
static const double dom_cplx[2][NV][2] = {
    {{0.5, 0.25}, {-1, 0.5}, {0.3, -0.7}, {1.5, 1}, {-0.25, -0.5}, {0.1, 0.2}},
    {{1, -0.5}, {0.75, 0.25}, {0.3, -0.7}, {-2, 1}, {0.5, 0.5}, {-0.25, 1.5}},
};

/* ---------------------------------------------------------------- helpers */

static oly_array *vec(oly_dtype t, int64_t n, const double *v)
{
    int64_t d[1] = {n};
    return tu_array(t, 1, d, v);
}

/* A complex array of n elements (values as double complex). */
static oly_array *cvec(oly_dtype t, int64_t n, const zc *v)
{
    oly_aval av = tu_aval(t, 1, &n);
    oly_array *a = NULL;
    if (oly_array_new(&av, &a) != OLY_OK) return NULL;
    void *d = oly_array_mutable_data(a);
    for (int64_t i = 0; i < n; i++) {
        if (t == OLY_COMPLEX64)
            ((float complex *)d)[i] = (float complex)v[i];
        else
            ((zc *)d)[i] = v[i];
    }
    return a;
}

static zc cget(const oly_array *a, int64_t i)
{
    const void *d = oly_array_data(a);
    oly_dtype t = oly_array_aval(a)->dtype;
    if (t == OLY_COMPLEX64) return ((const float complex *)d)[i];
    if (t == OLY_COMPLEX128) return ((const zc *)d)[i];
    return tu_get(a, i);
}

/* v (an exact integer in double) wrapped into integer dtype t. */
static double wrap_int(double v, oly_dtype t)
{
    int64_t iv = v >= 9.2e18 ? (int64_t)(uint64_t)v : (int64_t)v;
    switch (t) {
    case OLY_INT8: return (int8_t)(uint8_t)(uint64_t)iv;
    case OLY_INT16: return (int16_t)(uint16_t)(uint64_t)iv;
    case OLY_INT32: return (int32_t)(uint32_t)(uint64_t)iv;
    case OLY_INT64: return v; /* the table's int64 results are in range */
    case OLY_UINT8: return (uint8_t)(uint64_t)iv;
    case OLY_UINT16: return (uint16_t)(uint64_t)iv;
    case OLY_UINT32: return (uint32_t)(uint64_t)iv;
    case OLY_UINT64: return v < 0 ? v + 0x1p64 : v;
    default: return v;
    }
}

static int dtype_bits(oly_dtype t) { return (int)oly_dtype_size(t) * 8; }

static void tolerance(oly_dtype t, double *rtol, double *atol)
{
    switch (t) {
    case OLY_FLOAT16: *rtol = 2e-3, *atol = 2e-3; break;
    case OLY_BFLOAT16: *rtol = 1.6e-2, *atol = 1.6e-2; break;
    case OLY_FLOAT32: case OLY_COMPLEX64: *rtol = 2e-5, *atol = 1e-6; break;
    case OLY_FLOAT64: case OLY_COMPLEX128: *rtol = 1e-12, *atol = 1e-14; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* Runs a unary/binary row; NULL (after a CHECK failure) when it fails. */
static oly_array *run(const oly_prim *p, const void *params, oly_array *a, oly_array *b)
{
    oly_array *in[2] = {a, b}, *out = NULL;
    oly_status s = tu_run_kernel(p, params, in, b ? 2 : 1, &out, 1, NULL);
    if (s != OLY_OK) {
        CHECK_FAIL_("%s -> %s: %s", p->name, oly_status_name(s), oly_last_error());
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- references */

typedef double (*r1_fn)(double x, oly_dtype t);
typedef double (*r2_fn)(double x, double y, oly_dtype t);
typedef zc (*c1_fn)(zc x);
typedef zc (*c2_fn)(zc x, zc y);

#define R1(name, EXPR)                                                                    \
    static double r_##name(double x, oly_dtype t)                                         \
    {                                                                                     \
        (void)t;                                                                          \
        return (EXPR);                                                                    \
    }
#define R2(name, EXPR)                                                                    \
    static double r_##name(double x, double y, oly_dtype t)                               \
    {                                                                                     \
        (void)t;                                                                          \
        return (EXPR);                                                                    \
    }
#define C1(name, EXPR) static zc c_##name(zc x) { return (EXPR); }
#define C2(name, EXPR) static zc c_##name(zc x, zc y) { return (EXPR); }

R1(neg, -x) C1(neg, -x)
R1(sign, (x > 0) - (x < 0)) C1(sign, x == 0 ? x : x / cabs(x))
R1(floor, floor(x)) R1(ceil, ceil(x)) R1(round_away, round(x)) R1(round_even, nearbyint(x))
R1(is_finite, isfinite(x) ? 1 : 0)
R1(exp, exp(x)) C1(exp, cexp(x))
R1(exp2, exp2(x)) C1(exp2, cpow(2, x))
R1(log, log(x)) C1(log, clog(x))
R1(log1p, log1p(x)) C1(log1p, clog(1 + x))
R1(expm1, expm1(x)) C1(expm1, cexp(x) - 1)
R1(sin, sin(x)) C1(sin, csin(x))
R1(cos, cos(x)) C1(cos, ccos(x))
R1(tan, tan(x)) C1(tan, ctan(x))
R1(asin, asin(x)) C1(asin, casin(x))
R1(acos, acos(x)) C1(acos, cacos(x))
R1(atan, atan(x)) C1(atan, catan(x))
R1(sinh, sinh(x)) C1(sinh, csinh(x))
R1(cosh, cosh(x)) C1(cosh, ccosh(x))
R1(tanh, tanh(x)) C1(tanh, ctanh(x))
R1(asinh, asinh(x)) C1(asinh, casinh(x))
R1(acosh, acosh(x)) C1(acosh, cacosh(x))
R1(atanh, atanh(x)) C1(atanh, catanh(x))
R1(logistic, 1 / (1 + exp(-x))) C1(logistic, 1 / (1 + cexp(-x)))
R1(sqrt, sqrt(x)) C1(sqrt, csqrt(x))
R1(rsqrt, 1 / sqrt(x)) C1(rsqrt, 1 / csqrt(x))
R1(cbrt, cbrt(x))
R1(abs, fabs(x)) C1(abs, cabs(x))
R1(square, x * x) C1(square, x * x)
R1(not, t == OLY_BOOL ? !x : (double)~(int64_t)x)
R1(real, x) C1(real, creal(x))
R1(imag, 0) C1(imag, cimag(x))
R1(conj, x) C1(conj, conj(x))
R1(cube, x * x * x) C1(cube, x * x * x)
R1(inv_square, 1 / (x * x)) C1(inv_square, 1 / (x * x))

R2(add, x + y) C2(add, x + y)
R2(sub, x - y) C2(sub, x - y)
R2(mul, x * y) C2(mul, x * y)
R2(div, oly_dtype_is_int(t) ? trunc(x / y) : x / y) C2(div, x / y)
R2(rem, fmod(x, y))
R2(pow, pow(x, y)) C2(pow, cpow(x, y))
R2(max, fmax(x, y)) R2(min, fmin(x, y))
R2(atan2, atan2(x, y))
R2(nextafter, nextafter(x, y))
R2(and, (double)((int64_t)x & (int64_t)y))
R2(or, (double)((int64_t)x | (int64_t)y))
R2(xor, (double)((int64_t)x ^ (int64_t)y))
R2(shift_left, x * exp2(y))
R2(shift_right_arithmetic, floor(x / exp2(y)))
static double r_shift_right_logical(double x, double y, oly_dtype t)
{
    uint64_t bits = (uint64_t)(int64_t)x;
    if (dtype_bits(t) < 64) bits &= (UINT64_C(1) << dtype_bits(t)) - 1;
    bits >>= (int)y;
    return dtype_bits(t) == 64 && oly_dtype_is_signed_int(t) ? (double)(int64_t)bits : (double)bits;
}
R2(eq, x == y) C2(eq, x == y)
R2(ne, x != y) C2(ne, x != y)
R2(lt, x < y) R2(le, x <= y) R2(gt, x > y) R2(ge, x >= y)

/* ---------------------------------------------------------------- the table */

enum { O_SAME, O_BOOL, O_REAL };

typedef struct ew_case {
    const char *label;
    const oly_prim *prim;
    unsigned accepts;
    int out;
    int dom_x, dom_y;           /* dom_y < 0: unary */
    r1_fn r1;
    r2_fn r2;
    c1_fn c1;
    c2_fn c2;
    const void *params;
} ew_case;

static const oly_params_round round_away = {0}, round_even = {1};
static const oly_params_integer_pow ipow3 = {3}, ipow_m2 = {-2};

#define U(op, acc, out, dom, c1) {#op, &oly__prim_##op, acc, out, dom, -1, r_##op, NULL, c1, NULL, NULL}
#define TR(op, dom) U(op, M_INEXACT, O_SAME, dom, c_##op)
#define B(op, acc, out, dx, dy, c2) {#op, &oly__prim_##op, acc, out, dx, dy, NULL, r_##op, NULL, c2, NULL}

static const ew_case cases[] = {
    U(neg, M_NUM, O_SAME, D_GEN, c_neg),
    U(sign, M_NUM, O_SAME, D_GEN, c_sign),
    U(floor, M_FLOAT, O_SAME, D_GEN, NULL),
    U(ceil, M_FLOAT, O_SAME, D_GEN, NULL),
    {"round(AWAY_FROM_ZERO)", &oly__prim_round, M_FLOAT, O_SAME, D_HALF, -1, r_round_away, NULL,
     NULL, NULL, &round_away},
    {"round(TO_NEAREST_EVEN)", &oly__prim_round, M_FLOAT, O_SAME, D_HALF, -1, r_round_even, NULL,
     NULL, NULL, &round_even},
    U(is_finite, M_FLOAT, O_BOOL, D_GEN, NULL),
    TR(exp, D_GEN), TR(exp2, D_GEN), TR(log, D_POS), TR(log1p, D_POS), TR(expm1, D_GEN),
    TR(sin, D_GEN), TR(cos, D_GEN), TR(tan, D_UNIT), TR(asin, D_UNIT), TR(acos, D_UNIT),
    TR(atan, D_GEN), TR(sinh, D_GEN), TR(cosh, D_GEN), TR(tanh, D_GEN), TR(asinh, D_GEN),
    TR(acosh, D_GE1), TR(atanh, D_UNIT), TR(logistic, D_GEN), TR(sqrt, D_POS), TR(rsqrt, D_POS),
    U(cbrt, M_FLOAT, O_SAME, D_GEN, NULL),
    U(abs, M_NUM, O_REAL, D_GEN, c_abs),
    U(square, M_NUM, O_SAME, D_GEN, c_square),
    U(not, M_BOOL | M_INT, O_SAME, D_GEN, NULL),
    U(real, M_NUM, O_REAL, D_GEN, c_real),
    U(imag, M_NUM, O_REAL, D_GEN, c_imag),
    U(conj, M_NUM, O_SAME, D_GEN, c_conj),
    {"integer_pow(y=3)", &oly__prim_integer_pow, M_NUM, O_SAME, D_GEN, -1, r_cube, NULL, c_cube,
     NULL, &ipow3},
    {"integer_pow(y=-2)", &oly__prim_integer_pow, M_INEXACT, O_SAME, D_NZ, -1, r_inv_square,
     NULL, c_inv_square, NULL, &ipow_m2},
    B(add, M_NUM, O_SAME, D_GEN, D_NZ, c_add),
    B(sub, M_NUM, O_SAME, D_GEN, D_NZ, c_sub),
    B(mul, M_NUM, O_SAME, D_GEN, D_NZ, c_mul),
    B(div, M_NUM, O_SAME, D_GEN, D_NZ, c_div),
    B(rem, M_INT | M_FLOAT, O_SAME, D_GEN, D_NZ, NULL),
    B(pow, M_NUM, O_SAME, D_POS, D_EXP, c_pow),
    B(max, M_BOOL | M_INT | M_FLOAT, O_SAME, D_GEN, D_NZ, NULL),
    B(min, M_BOOL | M_INT | M_FLOAT, O_SAME, D_GEN, D_NZ, NULL),
    B(atan2, M_FLOAT, O_SAME, D_GEN, D_NZ, NULL),
    B(nextafter, M_FLOAT, O_SAME, D_GEN, D_NZ, NULL),
    B(and, M_BOOL | M_INT, O_SAME, D_GEN, D_NZ, NULL),
    B(or, M_BOOL | M_INT, O_SAME, D_GEN, D_NZ, NULL),
    B(xor, M_BOOL | M_INT, O_SAME, D_GEN, D_NZ, NULL),
    B(shift_left, M_INT, O_SAME, D_GEN, D_SHIFT, NULL),
    B(shift_right_arithmetic, M_INT, O_SAME, D_GEN, D_SHIFT, NULL),
    B(shift_right_logical, M_INT, O_SAME, D_GEN, D_SHIFT, NULL),
    B(eq, M_ALL, O_BOOL, D_GEN, D_NZ, c_eq),
    B(ne, M_ALL, O_BOOL, D_GEN, D_NZ, c_ne),
    B(lt, M_BOOL | M_INT | M_FLOAT, O_BOOL, D_GEN, D_NZ, NULL),
    B(le, M_BOOL | M_INT | M_FLOAT, O_BOOL, D_GEN, D_NZ, NULL),
    B(gt, M_BOOL | M_INT | M_FLOAT, O_BOOL, D_GEN, D_NZ, NULL),
    B(ge, M_BOOL | M_INT | M_FLOAT, O_BOOL, D_GEN, D_NZ, NULL),
};

/* The elementwise rows with their own tests below. */
static const oly_prim *const special_rows[] = {&oly__prim_convert_element_type,
                                               &oly__prim_select_n};

static oly_array *make_input(oly_dtype t, int dom, int which)
{
    if (oly_dtype_is_complex(t)) {
        zc v[NV];
        for (int i = 0; i < NV; i++) v[i] = dom_cplx[which][i][0] + dom_cplx[which][i][1] * I;
        return cvec(t, NV, v);
    }
    double v[NV];
    for (int i = 0; i < NV; i++) {
        if (t == OLY_BOOL) v[i] = dom_bool[which][i];
        else if (oly_dtype_is_unsigned_int(t)) v[i] = fabs(dom_int[dom][i]);
        else if (oly_dtype_is_int(t)) v[i] = dom_int[dom][i];
        else v[i] = dom_float[dom][i];
    }
    return vec(t, NV, v);
}

static oly_dtype expect_dtype(int out, oly_dtype t)
{
    if (out == O_BOOL) return OLY_BOOL;
    if (out == O_REAL && t == OLY_COMPLEX64) return OLY_FLOAT32;
    if (out == O_REAL && t == OLY_COMPLEX128) return OLY_FLOAT64;
    return t;
}

static void check_case(const ew_case *k, oly_dtype t)
{
    bool binary = k->dom_y >= 0;
    bool accepted = (k->accepts & M(t)) != 0;
    const char *tn = oly_dtype_short_name(t);
    oly_array *in[2] = {make_input(t, k->dom_x, 0), binary ? make_input(t, k->dom_y, 1) : NULL};
    oly_array *out = NULL;
    oly_status s = tu_run_kernel(k->prim, k->params, in, binary ? 2 : 1, &out, 1, NULL);
    if (!accepted) {
        if (s != OLY_ERR_TYPE)
            CHECK_FAIL_("%s on %s: want OLY_ERR_TYPE, got %s (%s)", k->label, tn,
                        oly_status_name(s), oly_last_error());
        else if (!strstr(oly_last_error(), k->prim->name))
            CHECK_FAIL_("%s on %s: message '%s' does not name the primitive", k->label, tn,
                        oly_last_error());
        goto done;
    }
    if (s != OLY_OK) {
        CHECK_FAIL_("%s on %s: %s: %s", k->label, tn, oly_status_name(s), oly_last_error());
        goto done;
    }
    oly_dtype ot = expect_dtype(k->out, t);
    if (oly_array_aval(out)->dtype != ot) {
        CHECK_FAIL_("%s on %s: output dtype %s, want %s", k->label, tn,
                    oly_dtype_short_name(oly_array_aval(out)->dtype), oly_dtype_short_name(ot));
        goto done;
    }
    double rtol, atol;
    tolerance(ot == OLY_BOOL ? OLY_BOOL : t, &rtol, &atol);
    for (int i = 0; i < NV; i++) {
        zc e, g = cget(out, i);
        if (oly_dtype_is_complex(t)) {
            if (binary ? !k->c2 : !k->c1) {
                CHECK_FAIL_("%s on %s: accepted but the test has no complex reference", k->label,
                            tn);
                goto done;
            }
            e = binary ? k->c2(cget(in[0], i), cget(in[1], i)) : k->c1(cget(in[0], i));
            if (!oly_dtype_is_complex(ot)) e = creal(e);
        } else {
            double x = tu_get(in[0], i), y = binary ? tu_get(in[1], i) : 0;
            e = binary ? k->r2(x, y, t) : k->r1(x, t);
            if (oly_dtype_is_int(ot)) e = wrap_int(creal(e), ot);
        }
        double err = cabs(g - e), lim = atol + rtol * cabs(e);
        bool ok = err <= lim || (creal(e) == creal(g) && cimag(e) == cimag(g)) ||
                  (isnan(creal(e)) && isnan(creal(g)));
        if (!ok) {
            CHECK_FAIL_("%s on %s: element %d: got %.10g%+.10gi, want %.10g%+.10gi", k->label,
                        tn, i, creal(g), cimag(g), creal(e), cimag(e));
            break;
        }
    }
done:
    oly_array_release(in[0]);
    oly_array_release(in[1]);
    oly_array_release(out);
}

/* ---------------------------------------------------------------- table tests */

TEST(elementwise_every_row_every_dtype)
{
    for (int c = 0; c < OLY_ARRAY_LEN(cases); c++)
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) check_case(&cases[c], (oly_dtype)t);
}

static const char *const def_names[] = {
#define OLY_PRIM(name) #name,
#include "prims/prims.def"
#undef OLY_PRIM
};

TEST(elementwise_every_prims_def_row_is_covered)
{
    /* The elementwise section of prims.def runs from its start to select_n. */
    int n = 0;
    while (n < OLY_ARRAY_LEN(def_names) && strcmp(def_names[n], "select_n") != 0) n++;
    CHECK(n < OLY_ARRAY_LEN(def_names));
    for (int i = 0; i <= n && i < OLY_ARRAY_LEN(def_names); i++) {
        const oly_prim *row = NULL;
        for (int c = 0; c < OLY_ARRAY_LEN(cases) && !row; c++)
            if (strcmp(cases[c].prim->name, def_names[i]) == 0) row = cases[c].prim;
        for (int c = 0; c < OLY_ARRAY_LEN(special_rows) && !row; c++)
            if (strcmp(special_rows[c]->name, def_names[i]) == 0) row = special_rows[c];
        if (!row) {
            CHECK_FAIL_("prims.def row '%s' has no elementwise row under that name in the test table",
                        def_names[i]);
            continue;
        }
        CHECK(row->shape != NULL);
        CHECK(oly__cpu_kernel(row) != NULL);
        CHECK_EQ(row->n_out, 1);
        const oly_prim *reg = oly_prim_lookup(def_names[i]);
        if (reg != row) CHECK_FAIL_("registry lookup of '%s' gives %p, want %p", def_names[i],
                                    (const void *)reg, (const void *)row);
    }
}

/* ---------------------------------------------------------------- integer edge cases */

TEST(elementwise_int_div_rem_edges)
{
    double x[] = {7, -7, 7, -7, INT32_MIN, INT32_MIN, 5, -5, 0};
    double y[] = {2, 2, -2, -2, -1, 1, 0, 0, 0};
    double want_div[] = {3, -3, -3, 3, INT32_MIN, INT32_MIN, -1, -1, -1};
    double want_rem[] = {1, -1, 1, -1, 0, 0, 5, -5, 0};
    oly_array *a = vec(OLY_INT32, 9, x), *b = vec(OLY_INT32, 9, y);
    oly_array *d = run(&oly__prim_div, NULL, a, b), *r = run(&oly__prim_rem, NULL, a, b);
    if (d) CHECK(tu_allclose(d, want_div, 9, 0, 0));
    if (r) CHECK(tu_allclose(r, want_rem, 9, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(d), oly_array_release(r);

    /* int8 wraps the same way; unsigned x/0 is all ones. */
    double x8[] = {-128, -128, 100}, y8[] = {-1, 0, 0};
    a = vec(OLY_INT8, 3, x8), b = vec(OLY_INT8, 3, y8);
    d = run(&oly__prim_div, NULL, a, b), r = run(&oly__prim_rem, NULL, a, b);
    if (d) CHECK(tu_allclose(d, (double[]){-128, -1, -1}, 3, 0, 0));
    if (r) CHECK(tu_allclose(r, (double[]){0, -128, 100}, 3, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(d), oly_array_release(r);

    double xu[] = {7, 200, 9}, yu[] = {0, 0, 4};
    a = vec(OLY_UINT32, 3, xu), b = vec(OLY_UINT32, 3, yu);
    d = run(&oly__prim_div, NULL, a, b), r = run(&oly__prim_rem, NULL, a, b);
    if (d) CHECK(tu_allclose(d, (double[]){4294967295.0, 4294967295.0, 2}, 3, 0, 0));
    if (r) CHECK(tu_allclose(r, (double[]){7, 200, 1}, 3, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(d), oly_array_release(r);

    /* int64 INT_MIN / -1 and the u8 all-ones. */
    int64_t x64[] = {INT64_MIN, INT64_MIN}, y64[] = {-1, 0};
    int64_t n2 = 2;
    oly_aval av = tu_aval(OLY_INT64, 1, &n2);
    oly_array *a64 = NULL, *b64 = NULL;
    CHECK_OK(oly_array_from_data(&av, x64, &a64));
    CHECK_OK(oly_array_from_data(&av, y64, &b64));
    d = run(&oly__prim_div, NULL, a64, b64), r = run(&oly__prim_rem, NULL, a64, b64);
    if (d) {
        const int64_t *dd = oly_array_data(d);
        CHECK(dd[0] == INT64_MIN);
        CHECK_EQ(dd[1], -1);
    }
    if (r) {
        const int64_t *rr = oly_array_data(r);
        CHECK_EQ(rr[0], 0);
        CHECK(rr[1] == INT64_MIN);
    }
    oly_array_release(a64), oly_array_release(b64), oly_array_release(d), oly_array_release(r);
    a = vec(OLY_UINT8, 1, (double[]){3}), b = vec(OLY_UINT8, 1, (double[]){0});
    d = run(&oly__prim_div, NULL, a, b);
    if (d) CHECK(tu_allclose(d, (double[]){255}, 1, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(d);
}

TEST(elementwise_int_wraps_without_trapping)
{
    double x[] = {INT32_MIN, INT32_MAX, -5};
    oly_array *a = vec(OLY_INT32, 3, x);
    oly_array *n = run(&oly__prim_neg, NULL, a, NULL), *ab = run(&oly__prim_abs, NULL, a, NULL);
    oly_array *sq = run(&oly__prim_square, NULL, a, NULL), *ad = run(&oly__prim_add, NULL, a, a);
    if (n) CHECK(tu_allclose(n, (double[]){INT32_MIN, -INT32_MAX, 5}, 3, 0, 0));
    if (ab) CHECK(tu_allclose(ab, (double[]){INT32_MIN, INT32_MAX, 5}, 3, 0, 0));
    if (sq) CHECK(tu_allclose(sq, (double[]){0, 1, 25}, 3, 0, 0));
    if (ad) CHECK(tu_allclose(ad, (double[]){0, -2, -10}, 3, 0, 0));
    oly_array_release(a), oly_array_release(n), oly_array_release(ab), oly_array_release(sq),
        oly_array_release(ad);
    /* int16 multiply beyond the int range of the promoted type. */
    oly_array *h = vec(OLY_INT16, 1, (double[]){-32768});
    oly_array *m = run(&oly__prim_mul, NULL, h, h);
    if (m) CHECK(tu_allclose(m, (double[]){0}, 1, 0, 0));
    oly_array_release(h), oly_array_release(m);
}

TEST(elementwise_int_pow)
{
    double x[] = {2, -1, -1, 2, 1, 0, 3, -2, 7};
    double y[] = {10, -3, -4, -1, -5, 0, 0, 3, 2};
    double want[] = {1024, -1, 1, 0, 1, 1, 1, -8, 49};
    oly_array *a = vec(OLY_INT32, 9, x), *b = vec(OLY_INT32, 9, y);
    oly_array *p = run(&oly__prim_pow, NULL, a, b);
    if (p) CHECK(tu_allclose(p, want, 9, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(p);
    /* Wrapping: 3**5 in int8 is 243 mod 256 = -13. */
    a = vec(OLY_INT8, 1, (double[]){3}), b = vec(OLY_INT8, 1, (double[]){5});
    p = run(&oly__prim_pow, NULL, a, b);
    if (p) CHECK(tu_allclose(p, (double[]){-13}, 1, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(p);
    /* Floats: 0**0 = 1. */
    a = vec(OLY_FLOAT32, 2, (double[]){0, 4}), b = vec(OLY_FLOAT32, 2, (double[]){0, 0.5});
    p = run(&oly__prim_pow, NULL, a, b);
    if (p) CHECK(tu_allclose(p, (double[]){1, 2}, 2, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(p);
}

TEST(elementwise_integer_pow_params)
{
    oly_params_integer_pow y0 = {0}, y1 = {1}, y5 = {5}, ym3 = {-3}, ym1 = {-1};
    oly_array *a = vec(OLY_FLOAT64, 3, (double[]){2, -0.5, 0});
    oly_array *r0 = run(&oly__prim_integer_pow, &y0, a, NULL);
    oly_array *r1 = run(&oly__prim_integer_pow, &y1, a, NULL);
    oly_array *r5 = run(&oly__prim_integer_pow, &y5, a, NULL);
    oly_array *rm3 = run(&oly__prim_integer_pow, &ym3, a, NULL);
    if (r0) CHECK(tu_allclose(r0, (double[]){1, 1, 1}, 3, 0, 0));
    if (r1) CHECK(tu_allclose(r1, (double[]){2, -0.5, 0}, 3, 0, 0));
    if (r5) CHECK(tu_allclose(r5, (double[]){32, -0.03125, 0}, 3, 0, 0));
    if (rm3) CHECK(tu_allclose(rm3, (double[]){0.125, -8, INFINITY}, 3, 0, 0));
    oly_array_release(r0), oly_array_release(r1), oly_array_release(r5), oly_array_release(rm3);
    oly_array_release(a);
    /* Integers wrap; a negative exponent is a type error for them. */
    a = vec(OLY_UINT8, 1, (double[]){3});
    oly_array *out = run(&oly__prim_integer_pow, &y5, a, NULL);
    if (out) CHECK(tu_allclose(out, (double[]){243}, 1, 0, 0));
    oly_array_release(out);
    oly_array *in[1] = {a};
    out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_integer_pow, &ym1, in, 1, &out, 1, NULL), OLY_ERR_TYPE,
              "integer_pow: a negative exponent (y=-1) needs a floating-point or complex operand, "
              "got u8[1]");
    CHECK(out == NULL);
    oly_array_release(a);
}

TEST(elementwise_shifts_out_of_range)
{
    double x[] = {1, 1, -8, 8, -1, -1, 5, -16};
    double y[] = {32, -1, 40, 40, 31, 32, 2, 2};
    oly_array *a = vec(OLY_INT32, 8, x), *b = vec(OLY_INT32, 8, y);
    oly_array *l = run(&oly__prim_shift_left, NULL, a, b);
    oly_array *ra = run(&oly__prim_shift_right_arithmetic, NULL, a, b);
    oly_array *rl = run(&oly__prim_shift_right_logical, NULL, a, b);
    if (l) CHECK(tu_allclose(l, (double[]){0, 0, 0, 0, INT32_MIN, 0, 20, -64}, 8, 0, 0));
    if (ra) CHECK(tu_allclose(ra, (double[]){0, 0, -1, 0, -1, -1, 1, -4}, 8, 0, 0));
    if (rl) CHECK(tu_allclose(rl, (double[]){0, 0, 0, 0, 1, 0, 1, 1073741820}, 8, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(l), oly_array_release(ra),
        oly_array_release(rl);
    /* Unsigned: arithmetic right shift fills with the top bit of the pattern. */
    a = vec(OLY_UINT8, 3, (double[]){0x80, 0x80, 0xff}), b = vec(OLY_UINT8, 3, (double[]){1, 8, 7});
    ra = run(&oly__prim_shift_right_arithmetic, NULL, a, b);
    rl = run(&oly__prim_shift_right_logical, NULL, a, b);
    l = run(&oly__prim_shift_left, NULL, a, b);
    if (ra) CHECK(tu_allclose(ra, (double[]){0xc0, 0xff, 0xff}, 3, 0, 0));
    if (rl) CHECK(tu_allclose(rl, (double[]){0x40, 0, 1}, 3, 0, 0));
    if (l) CHECK(tu_allclose(l, (double[]){0, 0, 0x80}, 3, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(l), oly_array_release(ra),
        oly_array_release(rl);
}

/* ---------------------------------------------------------------- floats */

TEST(elementwise_max_min_propagate_nan)
{
    oly_dtype ts[] = {OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT32, OLY_FLOAT64};
    for (int i = 0; i < OLY_ARRAY_LEN(ts); i++) {
        oly_array *a = vec(ts[i], 4, (double[]){NAN, 1, NAN, -2});
        oly_array *b = vec(ts[i], 4, (double[]){1, NAN, NAN, 3});
        oly_array *mx = run(&oly__prim_max, NULL, a, b), *mn = run(&oly__prim_min, NULL, a, b);
        if (mx) CHECK(tu_allclose(mx, (double[]){NAN, NAN, NAN, 3}, 4, 0, 0));
        if (mn) CHECK(tu_allclose(mn, (double[]){NAN, NAN, NAN, -2}, 4, 0, 0));
        oly_array_release(a), oly_array_release(b), oly_array_release(mx), oly_array_release(mn);
    }
}

TEST(elementwise_half_types_exact_on_small_ints)
{
    /* Every integer up to 2048 (f16) / 256 (bf16) is exact, and so are their
     * sums, differences and products while they stay in that range. */
    oly_dtype ts[] = {OLY_FLOAT16, OLY_BFLOAT16};
    int xr[] = {30, 15}; /* |x*y| <= 480 (f16) or 240 (bf16) */
    for (int k = 0; k < 2; k++) {
        enum { N = 300 };
        double x[N], y[N], s[N], d[N], p[N];
        for (int i = 0; i < N; i++) {
            x[i] = i % (2 * xr[k] + 1) - xr[k];
            y[i] = i % 33 - 16;
            s[i] = x[i] + y[i];
            d[i] = x[i] - y[i];
            p[i] = x[i] * y[i];
        }
        oly_array *a = vec(ts[k], N, x), *b = vec(ts[k], N, y);
        oly_array *sa = run(&oly__prim_add, NULL, a, b), *sd = run(&oly__prim_sub, NULL, a, b);
        oly_array *sp = run(&oly__prim_mul, NULL, a, b);
        if (sa) CHECK(tu_allclose(sa, s, N, 0, 0));
        if (sd) CHECK(tu_allclose(sd, d, N, 0, 0));
        if (sp) CHECK(tu_allclose(sp, p, N, 0, 0));
        oly_array_release(a), oly_array_release(b), oly_array_release(sa), oly_array_release(sd),
            oly_array_release(sp);
    }
}

TEST(elementwise_sign_is_finite_round)
{
    oly_array *a = vec(OLY_FLOAT32, 5, (double[]){-0.0, 0, NAN, -3, INFINITY});
    oly_array *s = run(&oly__prim_sign, NULL, a, NULL), *f = run(&oly__prim_is_finite, NULL, a, NULL);
    if (s) {
        CHECK(tu_allclose(s, (double[]){0, 0, NAN, -1, 1}, 5, 0, 0));
        CHECK(signbit(tu_get(s, 0)));
    }
    if (f) {
        CHECK_EQ(oly_array_aval(f)->dtype, OLY_BOOL);
        CHECK(tu_allclose(f, (double[]){1, 1, 0, 1, 0}, 5, 0, 0));
    }
    oly_array_release(a), oly_array_release(s), oly_array_release(f);
    a = vec(OLY_UINT16, 3, (double[]){0, 1, 65535});
    s = run(&oly__prim_sign, NULL, a, NULL);
    if (s) CHECK(tu_allclose(s, (double[]){0, 1, 1}, 3, 0, 0));
    oly_array_release(a), oly_array_release(s);

    oly_params_round bad = {7};
    a = vec(OLY_FLOAT32, 1, (double[]){0.5});
    oly_array *in[1] = {a}, *out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_round, &bad, in, 1, &out, 1, NULL), OLY_ERR_INVALID,
              "rounding_method");
    oly_array_release(a);
}

TEST(elementwise_nextafter_steps_one_ulp)
{
    oly_array *a = vec(OLY_FLOAT32, 3, (double[]){1, 1, 0});
    oly_array *b = vec(OLY_FLOAT32, 3, (double[]){2, 0, -1});
    oly_array *r = run(&oly__prim_nextafter, NULL, a, b);
    if (r) CHECK(tu_allclose(r, (double[]){1 + FLT_EPSILON, 1 - FLT_EPSILON / 2, -0x1p-149}, 3,
                             0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(r);
    a = vec(OLY_FLOAT16, 4, (double[]){1, 1, 0, -2}), b = vec(OLY_FLOAT16, 4, (double[]){2, 0, 1, 0});
    r = run(&oly__prim_nextafter, NULL, a, b);
    if (r) CHECK(tu_allclose(r, (double[]){1 + 0x1p-10, 1 - 0x1p-11, 0x1p-24, -2 + 0x1p-10}, 4,
                             0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(r);
    a = vec(OLY_BFLOAT16, 2, (double[]){1, -1}), b = vec(OLY_BFLOAT16, 2, (double[]){2, -2});
    r = run(&oly__prim_nextafter, NULL, a, b);
    if (r) CHECK(tu_allclose(r, (double[]){1 + 0x1p-7, -1 - 0x1p-7}, 2, 0, 0));
    oly_array_release(a), oly_array_release(b), oly_array_release(r);
}

/* ---------------------------------------------------------------- complex */

TEST(elementwise_complex_mul_abs_exp)
{
    oly_dtype ts[] = {OLY_COMPLEX64, OLY_COMPLEX128};
    for (int k = 0; k < 2; k++) {
        double tol = k ? 1e-12 : 1e-5;
        oly_array *a = cvec(ts[k], 2, (zc[]){1 + 2 * I, 3 + 4 * I});
        oly_array *b = cvec(ts[k], 2, (zc[]){3 - 1 * I, 0 + M_PI * I});
        oly_array *m = run(&oly__prim_mul, NULL, a, b), *ab = run(&oly__prim_abs, NULL, a, NULL);
        oly_array *e = run(&oly__prim_exp, NULL, b, NULL);
        if (m) {
            CHECK(cabs(cget(m, 0) - (5 + 5 * I)) < tol);
            CHECK(cabs(cget(m, 1) - (3 + 4 * I) * (M_PI * I)) < 10 * tol);
        }
        if (ab) {
            CHECK_EQ(oly_array_aval(ab)->dtype, k ? OLY_FLOAT64 : OLY_FLOAT32);
            CHECK_NEAR(tu_get(ab, 1), 5, tol);
        }
        if (e) CHECK(cabs(cget(e, 1) - (-1)) < tol);
        oly_array_release(a), oly_array_release(b), oly_array_release(m), oly_array_release(ab),
            oly_array_release(e);
    }
    /* Complex pow: 0**0 = 1, 0**2 = 0; max is not defined. */
    oly_array *a = cvec(OLY_COMPLEX128, 2, (zc[]){0, 0}), *b = cvec(OLY_COMPLEX128, 2, (zc[]){0, 2});
    oly_array *p = run(&oly__prim_pow, NULL, a, b);
    if (p) {
        CHECK(cget(p, 0) == 1);
        CHECK(cget(p, 1) == 0);
    }
    oly_array *in[2] = {a, b}, *out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_max, NULL, in, 2, &out, 1, NULL), OLY_ERR_TYPE,
              "max: expected boolean, integer or floating-point operands, got c128[2]");
    CHECK_ERR(tu_run_kernel(&oly__prim_lt, NULL, in, 2, &out, 1, NULL), OLY_ERR_TYPE, "lt:");
    oly_array_release(a), oly_array_release(b), oly_array_release(p);
}

/* ---------------------------------------------------------------- bool */

TEST(elementwise_bool_logic)
{
    oly_array *a = vec(OLY_BOOL, 4, (double[]){0, 0, 1, 1});
    oly_array *b = vec(OLY_BOOL, 4, (double[]){0, 1, 0, 1});
    oly_array *r[6] = {run(&oly__prim_and, NULL, a, b), run(&oly__prim_or, NULL, a, b),
                       run(&oly__prim_xor, NULL, a, b), run(&oly__prim_max, NULL, a, b),
                       run(&oly__prim_min, NULL, a, b), run(&oly__prim_not, NULL, a, NULL)};
    double want[6][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0},
                         {0, 1, 1, 1}, {0, 0, 0, 1}, {1, 1, 0, 0}};
    for (int i = 0; i < 6; i++) {
        if (r[i]) {
            CHECK_EQ(oly_array_aval(r[i])->dtype, OLY_BOOL);
            CHECK(tu_allclose(r[i], want[i], 4, 0, 0));
            /* bools are stored as 0/1 bytes */
            const uint8_t *d = oly_array_data(r[i]);
            for (int j = 0; j < 4; j++) CHECK(d[j] <= 1);
        }
        oly_array_release(r[i]);
    }
    oly_array *in[2] = {a, b}, *out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_add, NULL, in, 2, &out, 1, NULL), OLY_ERR_TYPE,
              "add: expected numeric");
    CHECK_ERR(tu_run_kernel(&oly__prim_neg, NULL, in, 1, &out, 1, NULL), OLY_ERR_TYPE,
              "neg: expected a numeric (integer, floating-point or complex) operand, got bool[4]");
    oly_array_release(a), oly_array_release(b);
}

/* ---------------------------------------------------------------- broadcasting, sizes, errors */

TEST(elementwise_scalar_broadcast_both_sides)
{
    oly_array *v = vec(OLY_FLOAT32, 3, (double[]){1, 2, 3}), *s = tu_scalar(OLY_FLOAT32, 10);
    oly_array *l = run(&oly__prim_sub, NULL, s, v), *r = run(&oly__prim_sub, NULL, v, s);
    if (l) {
        CHECK_EQ(oly_array_aval(l)->rank, 1);
        CHECK_EQ(oly_array_aval(l)->dims[0], 3);
        CHECK(tu_allclose(l, (double[]){9, 8, 7}, 3, 0, 0));
    }
    if (r) CHECK(tu_allclose(r, (double[]){-9, -8, -7}, 3, 0, 0));
    oly_array_release(l), oly_array_release(r);
    /* Through the half path and with a bool output. */
    oly_array *hv = vec(OLY_FLOAT16, 3, (double[]){1, 2, 3}), *hs = tu_scalar(OLY_FLOAT16, 2);
    oly_array *hl = run(&oly__prim_div, NULL, hs, hv), *hc = run(&oly__prim_lt, NULL, hv, hs);
    if (hl) CHECK(tu_allclose(hl, (double[]){2, 1, 2.0 / 3}, 3, 1e-3, 0));
    if (hc) CHECK(tu_allclose(hc, (double[]){1, 0, 0}, 3, 0, 0));
    oly_array_release(hv), oly_array_release(hs), oly_array_release(hl), oly_array_release(hc);
    /* Both rank 0. */
    oly_array *s2 = tu_scalar(OLY_FLOAT32, 4), *p = run(&oly__prim_mul, NULL, s, s2);
    if (p) {
        CHECK_EQ(oly_array_aval(p)->rank, 0);
        CHECK_NEAR(tu_get(p, 0), 40, 0);
    }
    oly_array_release(p), oly_array_release(s2), oly_array_release(v), oly_array_release(s);
}

TEST(elementwise_weak_types)
{
    oly_aval w = tu_aval(OLY_FLOAT32, 0, NULL), st = w;
    w.weak = true;
    oly_aval in_ww[2] = {w, w}, in_ws[2] = {w, st}, out;
    oly_shape_ctx c = {.prim = &oly__prim_add, .n_in = 2, .in = in_ww, .n_out = 1};
    CHECK_OK(oly__prim_add.shape(&c, &out));
    CHECK(out.weak);
    c.in = in_ws;
    CHECK_OK(oly__prim_add.shape(&c, &out));
    CHECK(!out.weak);
    c = (oly_shape_ctx){.prim = &oly__prim_eq, .n_in = 2, .in = in_ww, .n_out = 1};
    CHECK_OK(oly__prim_eq.shape(&c, &out));
    CHECK(!out.weak);
    CHECK_EQ(out.dtype, OLY_BOOL);
    c = (oly_shape_ctx){.prim = &oly__prim_sin, .n_in = 1, .in = in_ww, .n_out = 1};
    CHECK_OK(oly__prim_sin.shape(&c, &out));
    CHECK(out.weak);
    oly_params_convert cv = {OLY_INT32, false};
    c = (oly_shape_ctx){.prim = &oly__prim_convert_element_type, .params = &cv, .n_in = 1,
                        .in = in_ww, .n_out = 1};
    CHECK_OK(oly__prim_convert_element_type.shape(&c, &out));
    CHECK(!out.weak);
    CHECK_EQ(out.dtype, OLY_INT32);
    cv.weak = true;
    c.in = &st;
    CHECK_OK(oly__prim_convert_element_type.shape(&c, &out));
    CHECK(out.weak);
}

TEST(elementwise_zero_size)
{
    int64_t d0[2] = {0, 3};
    oly_array *z = tu_array(OLY_FLOAT32, 2, d0, NULL), *s = tu_scalar(OLY_FLOAT32, 1);
    oly_array *r1 = run(&oly__prim_add, NULL, z, z), *r2 = run(&oly__prim_add, NULL, s, z);
    oly_array *r3 = run(&oly__prim_sin, NULL, z, NULL);
    oly_array *zh = tu_array(OLY_FLOAT16, 2, d0, NULL), *r4 = run(&oly__prim_exp, NULL, zh, NULL);
    oly_array *r[] = {r1, r2, r3, r4};
    for (int i = 0; i < 4; i++) {
        if (!r[i]) continue;
        CHECK_EQ(oly_aval_size(oly_array_aval(r[i])), 0);
        CHECK_EQ(oly_array_aval(r[i])->dims[1], 3);
        oly_array_release(r[i]);
    }
    oly_array *wb = tu_array(OLY_BOOL, 2, d0, NULL);
    oly_array *in[3] = {wb, z, z}, *out = NULL;
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, in, 3, &out, 1, NULL));
    if (out) CHECK_EQ(oly_aval_size(oly_array_aval(out)), 0);
    oly_array_release(out);
    out = NULL;
    oly_params_convert cv = {OLY_INT8, false};
    CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &cv, &z, 1, &out, 1, NULL));
    oly_array_release(out);
    oly_array_release(wb), oly_array_release(z), oly_array_release(s), oly_array_release(zh);
}

TEST(elementwise_shape_and_dtype_errors)
{
    oly_array *f3 = vec(OLY_FLOAT32, 3, NULL), *i3 = vec(OLY_INT32, 3, NULL);
    oly_array *f4 = vec(OLY_FLOAT32, 4, NULL);
    int64_t d13[2] = {1, 3};
    oly_array *f13 = tu_array(OLY_FLOAT32, 2, d13, NULL);
    oly_array *out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_add, NULL, (oly_array *[]){f3, i3}, 2, &out, 1, NULL),
              OLY_ERR_TYPE, "add: operands must have the same dtype, got f32[3] and i32[3]");
    CHECK_ERR(tu_run_kernel(&oly__prim_add, NULL, (oly_array *[]){f3, f4}, 2, &out, 1, NULL),
              OLY_ERR_SHAPE, "add: incompatible shapes f32[3] and f32[4]");
    CHECK_ERR(tu_run_kernel(&oly__prim_mul, NULL, (oly_array *[]){f3, f13}, 2, &out, 1, NULL),
              OLY_ERR_SHAPE, "mul: incompatible shapes f32[3] and f32[1,3]");
    CHECK_ERR(tu_run_kernel(&oly__prim_sin, NULL, &i3, 1, &out, 1, NULL), OLY_ERR_TYPE,
              "sin: expected a floating-point or complex operand, got i32[3]");
    CHECK_ERR(tu_run_kernel(&oly__prim_shift_left, NULL, (oly_array *[]){f3, f3}, 2, &out, 1,
                            NULL),
              OLY_ERR_TYPE, "shift_left: expected integer operands, got f32[3] and f32[3]");
    CHECK_ERR(tu_run_kernel(&oly__prim_and, NULL, (oly_array *[]){f3, f3}, 2, &out, 1, NULL),
              OLY_ERR_TYPE, "and: expected boolean or integer operands");
    CHECK_ERR(tu_run_kernel(&oly__prim_cbrt, NULL, &i3, 1, &out, 1, NULL), OLY_ERR_TYPE,
              "cbrt: expected a floating-point operand, got i32[3]");
    CHECK(out == NULL);
    oly_array_release(f3), oly_array_release(i3), oly_array_release(f4), oly_array_release(f13);
}

/* ---------------------------------------------------------------- select_n */

TEST(elementwise_select_n)
{
    oly_array *w = vec(OLY_BOOL, 4, (double[]){0, 1, 1, 0});
    oly_array *a = vec(OLY_FLOAT64, 4, (double[]){1, 2, 3, 4});
    oly_array *b = vec(OLY_FLOAT64, 4, (double[]){10, 20, 30, 40});
    oly_array *c = vec(OLY_FLOAT64, 4, (double[]){100, 200, 300, 400});
    oly_array *out = NULL;
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w, a, b}, 3, &out, 1, NULL));
    if (out) CHECK(tu_allclose(out, (double[]){1, 20, 30, 4}, 4, 0, 0));
    oly_array_release(out), out = NULL;
    /* int32: an index into the cases, clamped. */
    oly_array *wi = vec(OLY_INT32, 4, (double[]){2, -5, 1, 9});
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){wi, a, b, c}, 4, &out, 1,
                           NULL));
    if (out) CHECK(tu_allclose(out, (double[]){100, 2, 30, 400}, 4, 0, 0));
    oly_array_release(out), out = NULL;
    /* A rank-0 predicate picks one case for all. */
    oly_array *ws = tu_scalar(OLY_BOOL, 1);
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){ws, a, b}, 3, &out, 1, NULL));
    if (out) CHECK(tu_allclose(out, (double[]){10, 20, 30, 40}, 4, 0, 0));
    oly_array_release(out), out = NULL;
    /* 16-byte and 1-byte elements. */
    oly_array *z0 = cvec(OLY_COMPLEX128, 4, (zc[]){1 * I, 2 * I, 3 * I, 4 * I});
    oly_array *z1 = cvec(OLY_COMPLEX128, 4, (zc[]){-1, -2, -3, -4});
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w, z0, z1}, 3, &out, 1,
                           NULL));
    if (out) {
        CHECK(cget(out, 0) == 1 * I);
        CHECK(cget(out, 1) == -2);
        CHECK(cget(out, 3) == 4 * I);
    }
    oly_array_release(out), out = NULL;
    oly_array *i8a = vec(OLY_INT8, 4, (double[]){1, 2, 3, 4}), *i8b = vec(OLY_INT8, 4, (double[]){-1, -2, -3, -4});
    CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){wi, i8a, i8b}, 3, &out, 1,
                           NULL));
    if (out) CHECK(tu_allclose(out, (double[]){-1, 2, -3, -4}, 4, 0, 0));
    oly_array_release(out), out = NULL;

    /* Errors. */
    oly_array *f = vec(OLY_FLOAT32, 4, NULL), *w3 = vec(OLY_BOOL, 3, NULL);
    oly_array *wf = vec(OLY_FLOAT32, 4, NULL);
    CHECK_ERR(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w, a, f}, 3, &out, 1, NULL),
              OLY_ERR_TYPE, "select_n: cases must have the same dtype, got f64[4] and f32[4]");
    CHECK_ERR(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w3, a, b}, 3, &out, 1, NULL),
              OLY_ERR_SHAPE, "select_n: predicate shape bool[3] must match");
    CHECK_ERR(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){wf, a, b}, 3, &out, 1, NULL),
              OLY_ERR_TYPE, "select_n: predicate must be bool or int32, got f32[4]");
    CHECK_ERR(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w, a, b, c}, 4, &out, 1,
                            NULL),
              OLY_ERR_INVALID, "at most 2 cases");
    CHECK_ERR(tu_run_kernel(&oly__prim_select_n, NULL, (oly_array *[]){w}, 1, &out, 1, NULL),
              OLY_ERR_INVALID, "select_n: expected a predicate and at least one case");
    CHECK(out == NULL);
    oly_array *list[] = {w, a, b, c, wi, ws, z0, z1, i8a, i8b, f, w3, wf};
    for (int i = 0; i < OLY_ARRAY_LEN(list); i++) oly_array_release(list[i]);
}

/* ---------------------------------------------------------------- convert_element_type */

TEST(elementwise_convert_saturates)
{
    oly_array *a = vec(OLY_FLOAT32, 6, (double[]){300, -300, NAN, 1e10, -1.9, 2.9});
    oly_params_convert to_i8 = {OLY_INT8, false}, to_u8 = {OLY_UINT8, false},
                       to_i32 = {OLY_INT32, false}, to_b = {OLY_BOOL, false};
    oly_array *r8 = NULL, *ru8 = NULL, *r32 = NULL, *rb = NULL;
    CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &to_i8, &a, 1, &r8, 1, NULL));
    CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &to_u8, &a, 1, &ru8, 1, NULL));
    CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &to_i32, &a, 1, &r32, 1, NULL));
    CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &to_b, &a, 1, &rb, 1, NULL));
    if (r8) CHECK(tu_allclose(r8, (double[]){127, -128, 0, 127, -1, 2}, 6, 0, 0));
    if (ru8) CHECK(tu_allclose(ru8, (double[]){255, 0, 0, 255, 0, 2}, 6, 0, 0));
    if (r32) CHECK(tu_allclose(r32, (double[]){300, -300, 0, INT32_MAX, -1, 2}, 6, 0, 0));
    if (rb) CHECK(tu_allclose(rb, (double[]){1, 1, 1, 1, 1, 1}, 6, 0, 0));
    oly_array_release(r8), oly_array_release(ru8), oly_array_release(r32), oly_array_release(rb);
    oly_array_release(a);
    oly_params_convert bad = {(oly_dtype)99, false};
    oly_array *x = vec(OLY_FLOAT32, 1, NULL), *out = NULL;
    CHECK_ERR(tu_run_kernel(&oly__prim_convert_element_type, &bad, &x, 1, &out, 1, NULL),
              OLY_ERR_INVALID, "convert_element_type: new_dtype 99");
    oly_array_release(x);
}

TEST(elementwise_convert_every_pair)
{
    double v[4] = {0, 1, 3, 100};
    for (int f = 0; f < OLY_DTYPE_COUNT; f++) {
        oly_array *a = vec((oly_dtype)f, 4, v);
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
            oly_params_convert p = {(oly_dtype)t, false};
            oly_array *r = NULL;
            CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &p, &a, 1, &r, 1, NULL));
            if (!r) continue;
            CHECK_EQ(oly_array_aval(r)->dtype, t);
            double want[4];
            for (int i = 0; i < 4; i++) want[i] = t == OLY_BOOL ? tu_get(a, i) != 0 : tu_get(a, i);
            if (!tu_allclose(r, want, 4, 0, 0))
                CHECK_FAIL_("convert %s -> %s", oly_dtype_short_name((oly_dtype)f),
                            oly_dtype_short_name((oly_dtype)t));
            oly_array_release(r);
        }
        oly_array_release(a);
    }
}

/* ---------------------------------------------------------------- threads split the range */

static void run_split(const oly_prim *p, oly_array *a, oly_array *b, oly_array *out, int nth)
{
    const void *in[2] = {oly_array_data(a), b ? oly_array_data(b) : NULL};
    oly_aval in_aval[2] = {*oly_array_aval(a), b ? *oly_array_aval(b) : *oly_array_aval(a)};
    void *o[1] = {oly_array_mutable_data(out)};
    for (int ith = 0; ith < nth; ith++) {
        oly_kernel_ctx c = {.n_in = b ? 2 : 1, .in = in, .in_aval = in_aval, .n_out = 1, .out = o,
                            .out_aval = oly_array_aval(out), .ith = ith, .nth = nth};
        CHECK_OK(oly__cpu_kernel(p)->fn(&c));
    }
}

TEST(elementwise_kernel_split_by_threads)
{
    enum { N = 1001 };
    double x[N], y[N], want[N], wexp[N];
    for (int i = 0; i < N; i++) x[i] = (i % 17) * 0.25 - 2, y[i] = (i % 5) + 1;
    oly_dtype ts[] = {OLY_FLOAT32, OLY_FLOAT16, OLY_INT16};
    for (int k = 0; k < 3; k++) {
        oly_array *a = vec(ts[k], N, x), *b = vec(ts[k], N, y), *o = vec(ts[k], N, NULL);
        for (int i = 0; i < N; i++) want[i] = tu_get(a, i) * tu_get(b, i);
        run_split(&oly__prim_mul, a, b, o, 3);
        CHECK(tu_allclose(o, want, N, 0, 0));
        oly_array_release(o);
        if (ts[k] != OLY_INT16) {
            o = vec(ts[k], N, NULL);
            for (int i = 0; i < N; i++) wexp[i] = exp(tu_get(a, i));
            run_split(&oly__prim_exp, a, NULL, o, 4);
            CHECK(tu_allclose(o, wexp, N, k == 1 ? 2e-3 : 1e-6, 0));
            oly_array_release(o);
        }
        oly_array_release(a), oly_array_release(b);
    }
}

TEST(elementwise_inplace_output_aliases_input)
{
    /* The executor may hand a kernel out == in[0] for inplace_ok kernels. */
    CHECK(oly__cpu_kernel(&oly__prim_add)->inplace_ok);
    CHECK(!oly__cpu_kernel(&oly__prim_abs)->inplace_ok);
    CHECK(!oly__cpu_kernel(&oly__prim_eq)->inplace_ok);
    oly_array *a = vec(OLY_FLOAT16, 300, NULL), *b = vec(OLY_FLOAT16, 300, NULL);
    uint16_t *ad = oly_array_mutable_data(a), *bd = oly_array_mutable_data(b);
    for (int i = 0; i < 300; i++) ad[i] = oly__float_to_half((float)i), bd[i] = oly__float_to_half(1);
    const void *in[2] = {ad, bd};
    void *o[1] = {ad};
    oly_aval av[2] = {*oly_array_aval(a), *oly_array_aval(b)};
    oly_kernel_ctx c = {.n_in = 2, .in = in, .in_aval = av, .n_out = 1, .out = o, .out_aval = av,
                        .ith = 0, .nth = 1};
    CHECK_OK(oly__cpu_kernel(&oly__prim_add)->fn(&c));
    for (int i = 0; i < 300; i += 37) CHECK_NEAR(oly__half_to_float(ad[i]), i + 1, 0);
    oly_array_release(a), oly_array_release(b);
}

/* test_cpu_levels.c — the CPU backend's instruction levels (src/cpu/simd.c):
 * the probe and OLYMPUS_CPU_LEVEL's bounds, then every kernel family with a
 * per-level loop run at each level this machine supports, in one process:
 * transcendental functions within their ULP bound of a wider reference, and
 * the exact operations (arithmetic, comparisons, conversions, select,
 * reductions) equal, element for element, to the portable level's result.
 * (make test-c also re-runs the level-sensitive C tests under each level.) */
#include "cpu/simd.h"
#include "test.h"
#include "testutil.h"

#include <float.h>

/* The levels to run: every one up to the machine's best. */
static int supported_levels(oly_cpu_level *out)
{
    int n = 0;
    for (int l = 0; l <= (int)oly_cpu_level_max(); l++) out[n++] = (oly_cpu_level)l;
    return n;
}

TEST(cpu_level_probe_and_names)
{
    oly_cpu_level cur = oly_cpu_level_get(), max = oly_cpu_level_max();
    CHECK(cur <= max);
    CHECK(max < OLY_CPU_LEVEL_COUNT);
    CHECK_STREQ(oly_cpu_level_name(OLY_CPU_LEVEL_PORTABLE), "portable");
    CHECK_STREQ(oly_cpu_level_name(OLY_CPU_LEVEL_AVX2), "avx2");
    CHECK_STREQ(oly_cpu_level_name(OLY_CPU_LEVEL_AVX512), "avx512");
    CHECK_STREQ(oly_cpu_level_name(OLY_CPU_LEVEL_COUNT), "?");
    /* OLYMPUS_CPU_LEVEL, when it names a supported level, is the level in use. */
    const char *e = getenv("OLYMPUS_CPU_LEVEL");
    if (e && (!strcmp(e, "portable") || !strcmp(e, "avx2") || !strcmp(e, "avx512"))) {
        bool fits = strcmp(e, oly_cpu_level_name(max)) == 0 || !strcmp(e, "portable") ||
                    (!strcmp(e, "avx2") && max >= OLY_CPU_LEVEL_AVX2);
        if (fits) CHECK_STREQ(oly_cpu_level_name(cur), e);
        else CHECK(cur == max);
    }
    /* Nothing above the machine's best, and nothing past the enum. */
    CHECK(oly__cpu_set_level(OLY_CPU_LEVEL_COUNT) == OLY_ERR_INVALID);
    if (max < OLY_CPU_LEVEL_AVX512) {
        CHECK(oly__cpu_set_level((oly_cpu_level)(max + 1)) == OLY_ERR_INVALID);
        CHECK(strstr(oly_last_error(), oly_cpu_level_name(max)) != NULL);
    }
    CHECK(oly_cpu_level_get() == cur);
    CHECK_OK(oly__cpu_set_level(OLY_CPU_LEVEL_PORTABLE));
    CHECK(oly_cpu_level_get() == OLY_CPU_LEVEL_PORTABLE);
    CHECK_OK(oly__cpu_set_level(cur));
}

/* ---------------------------------------------------------------- ULP bounds */

enum { NE = 1037 }; /* a tail for every vector width */
enum { LIN, LOG, SYMLOG };

/* n inputs spread over [lo, hi] (LOG: geometric, lo > 0; SYMLOG: geometric
 * with alternating signs), plus the domain ends. */
static void spread(double *v, int n, int kind, double lo, double hi)
{
    for (int i = 0; i < n; i++) {
        double t = (double)i / (n - 1);
        if (kind == LIN) v[i] = lo + t * (hi - lo);
        else v[i] = exp(log(lo) + t * (log(hi) - log(lo))) * (kind == SYMLOG && i % 2 ? -1 : 1);
    }
}

/* |got - ref| in units of the last place of ref in a format with `mant`
 * significand bits and least exponent emin (0 when both are the same
 * infinity or both NaN; INFINITY when only one is). */
static double ulps(double got, long double ref, int mant, int emin)
{
    if (isnan(got) || isnan((double)ref)) return isnan(got) && isnan((double)ref) ? 0 : INFINITY;
    if (isinf(got) || isinf((double)ref)) return got == (double)ref ? 0 : INFINITY;
    int e;
    frexpl(ref, &e);
    if (e < emin) e = emin;
    long double ulp = ldexpl(1.0L, e - mant);
    return (double)(fabsl((long double)got - ref) / ulp);
}

typedef struct {
    const oly_prim *prim;
    double (*f)(double);              /* reference for f32 (double libm) */
    long double (*fl)(long double);   /* reference for f64 (long double libm) */
    int kind;
    double lo32, hi32, lo64, hi64;
    double bound; /* ULP */
} u_case;

static double d_rsqrt(double x) { return 1 / sqrt(x); }
static long double l_rsqrt(long double x) { return 1 / sqrtl(x); }
static double d_logistic(double x) { return 1 / (1 + exp(-x)); }
static long double l_logistic(long double x) { return 1 / (1 + expl(-x)); }

/* SLEEF's u10 functions are within 1 ULP; sqrt, floor and ceil are exact (0.5
 * ULP: correctly rounded); rsqrt and logistic round twice more. The domains
 * reach past the ranges where SLEEF hands lanes to libm (sinh, cosh, asinh,
 * acosh, log1p). */
static const u_case u_cases[] = {
    {&oly__prim_exp, exp, expl, LIN, -87, 88, -700, 709, 1},
    {&oly__prim_exp2, exp2, exp2l, LIN, -126, 127, -1000, 1023, 1},
    {&oly__prim_log, log, logl, LOG, 1e-37, 1e38, 1e-300, 1e300, 1},
    {&oly__prim_log1p, log1p, log1pl, LOG, 1e-30, 3e38, 1e-300, 1e308, 1},
    {&oly__prim_expm1, expm1, expm1l, LIN, -80, 88, -700, 709, 1},
    {&oly__prim_sin, sin, sinl, LIN, -100, 100, -100, 100, 1},
    {&oly__prim_cos, cos, cosl, LIN, -100, 100, -100, 100, 1},
    {&oly__prim_tan, tan, tanl, LIN, -10, 10, -10, 10, 1},
    {&oly__prim_asin, asin, asinl, LIN, -1, 1, -1, 1, 1},
    {&oly__prim_acos, acos, acosl, LIN, -1, 1, -1, 1, 1},
    {&oly__prim_atan, atan, atanl, SYMLOG, 1e-6, 1e30, 1e-6, 1e300, 1},
    {&oly__prim_sinh, sinh, sinhl, LIN, -89, 89, -710, 710, 1},
    {&oly__prim_cosh, cosh, coshl, LIN, -89, 89, -710, 710, 1},
    {&oly__prim_tanh, tanh, tanhl, LIN, -20, 20, -40, 40, 1},
    {&oly__prim_asinh, asinh, asinhl, SYMLOG, 1e-6, 1e30, 1e-6, 1e300, 1},
    {&oly__prim_acosh, acosh, acoshl, LOG, 1, 1e30, 1, 1e300, 1},
    {&oly__prim_atanh, atanh, atanhl, LIN, -0.999, 0.999, -0.999, 0.999, 1},
    {&oly__prim_logistic, d_logistic, l_logistic, LIN, -80, 80, -700, 700, 3},
    {&oly__prim_sqrt, sqrt, sqrtl, LOG, 1e-37, 1e38, 1e-300, 1e300, 0.5},
    {&oly__prim_rsqrt, d_rsqrt, l_rsqrt, LOG, 1e-37, 1e38, 1e-300, 1e300, 1.5},
    {&oly__prim_cbrt, cbrt, cbrtl, SYMLOG, 1e-30, 1e30, 1e-300, 1e300, 1},
    {&oly__prim_floor, floor, floorl, LIN, -50, 50, -50, 50, 0},
    {&oly__prim_ceil, ceil, ceill, LIN, -50, 50, -50, 50, 0},
};

static void check_unary_ulp(const u_case *k, oly_dtype t, oly_cpu_level lv)
{
    bool f32 = t == OLY_FLOAT32;
    double v[NE];
    spread(v, NE, k->kind, f32 ? k->lo32 : k->lo64, f32 ? k->hi32 : k->hi64);
    int64_t n = NE;
    oly_array *x = tu_array(t, 1, &n, v), *y = NULL;
    CHECK_OK(tu_run_kernel(k->prim, NULL, &x, 1, &y, 1, NULL));
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; y && i < n; i++) {
        double xi = tu_get(x, i), yi = tu_get(y, i);
        long double ref = f32 ? (long double)k->f(xi) : k->fl((long double)xi);
        double u = f32 ? ulps(yi, ref, 24, -125) : ulps(yi, ref, 53, -1021);
        if (!(u <= worst)) {
            worst = u;
            at = i;
        }
    }
    /* The portable level is the C library's: glibc documents up to a few ULP
     * for some of these (tanh, atanh, cbrt, ...). 1% slack for the reference's
     * own error (f32: a double result). */
    double bound = lv == OLY_CPU_LEVEL_PORTABLE && k->bound >= 1 ? 4 : k->bound;
    if (!(worst <= bound * 1.01 + 1e-9))
        CHECK_FAIL_("%s %s at level %s: %.3g ULP at x = %.17g (bound %g)", k->prim->name,
                    oly_dtype_short_name(t), oly_cpu_level_name(lv), worst, tu_get(x, at), bound);
    oly_array_release(x);
    oly_array_release(y);
}

TEST(cpu_levels_transcendental_within_ulp_bound)
{
    oly_cpu_level saved = oly_cpu_level_get(), lv[OLY_CPU_LEVEL_COUNT];
    int nl = supported_levels(lv);
    for (int l = 0; l < nl; l++) {
        CHECK_OK(oly__cpu_set_level(lv[l]));
        for (int c = 0; c < OLY_ARRAY_LEN(u_cases); c++) {
            check_unary_ulp(&u_cases[c], OLY_FLOAT32, lv[l]);
            check_unary_ulp(&u_cases[c], OLY_FLOAT64, lv[l]);
        }
    }
    CHECK_OK(oly__cpu_set_level(saved));
}

typedef struct {
    const oly_prim *prim;
    double (*f)(double, double);
    long double (*fl)(long double, long double);
    double xlo, xhi, ylo, yhi;
} b_case;

static void check_binary_ulp(const b_case *k, oly_dtype t, oly_cpu_level lv)
{
    bool f32 = t == OLY_FLOAT32;
    double xv[NE], yv[NE];
    spread(xv, NE, k->xlo > 0 ? LOG : LIN, k->xlo, k->xhi);
    spread(yv, NE, LIN, k->ylo, k->yhi);
    for (int i = 0; i < NE; i++) { /* decorrelate the pairs */
        int j = (int)((uint32_t)i * 7919u % NE);
        double tmp = yv[i];
        yv[i] = yv[j];
        yv[j] = tmp;
    }
    int64_t n = NE;
    oly_array *in[2] = {tu_array(t, 1, &n, xv), tu_array(t, 1, &n, yv)}, *o = NULL;
    CHECK_OK(tu_run_kernel(k->prim, NULL, in, 2, &o, 1, NULL));
    for (int64_t i = 0; o && i < n; i++) {
        double xi = tu_get(in[0], i), yi = tu_get(in[1], i), g = tu_get(o, i);
        long double ref = f32 ? (long double)k->f(xi, yi) : k->fl(xi, yi);
        double u = f32 ? ulps(g, ref, 24, -125) : ulps(g, ref, 53, -1021);
        if (!(u <= (lv == OLY_CPU_LEVEL_PORTABLE ? 4 : 1) * 1.01)) {
            CHECK_FAIL_("%s %s at level %s: %.3g ULP at (%.17g, %.17g)", k->prim->name,
                        oly_dtype_short_name(t), oly_cpu_level_name(lv), u, xi, yi);
            break;
        }
    }
    oly_array_release(in[0]);
    oly_array_release(in[1]);
    oly_array_release(o);
}

TEST(cpu_levels_pow_atan2_within_ulp_bound)
{
    static const b_case cases[] = {
        {&oly__prim_pow, pow, powl, 1e-3, 1e3, -10, 10},
        {&oly__prim_atan2, atan2, atan2l, -10, 10, -10, 10},
    };
    oly_cpu_level saved = oly_cpu_level_get(), lv[OLY_CPU_LEVEL_COUNT];
    int nl = supported_levels(lv);
    for (int l = 0; l < nl; l++) {
        CHECK_OK(oly__cpu_set_level(lv[l]));
        for (int c = 0; c < OLY_ARRAY_LEN(cases); c++) {
            check_binary_ulp(&cases[c], OLY_FLOAT32, lv[l]);
            check_binary_ulp(&cases[c], OLY_FLOAT64, lv[l]);
        }
    }
    CHECK_OK(oly__cpu_set_level(saved));
}

/* ---------------------------------------------------------------- exact operations */

/* Inputs with the special values every loop must keep: NaN, infinities, signed
 * zeros, subnormals, integer extremes; then a spread of ordinary values. */
static void special_values(double *v, int n, oly_dtype t, int salt)
{
    static const double fs[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-310, -5e-324, 1e-40,
                                1.5, -2.5, 0.5, 3e38, -3e38, 1e300, 2147483648.0, -2147483649.0,
                                4294967296.0, 255.5, -0.5, 7};
    static const double is[] = {0, 1, -1, 127, -128, 255, 32767, -32768, 65535, 2147483647.0,
                                -2147483648.0, 4294967295.0, 9007199254740992.0, -3, 5, 64, 31};
    bool fl = oly_dtype_is_float(t);
    int nf = fl ? OLY_ARRAY_LEN(fs) : OLY_ARRAY_LEN(is);
    for (int i = 0; i < n; i++) {
        int k = (i * 13 + salt * 7) % (nf + 11);
        if (k < nf) v[i] = fl ? fs[k] : is[k];
        else v[i] = fl ? ((i * 37 + salt) % 201 - 100) * 0.37 : (double)((i * 37 + salt) % 201 - 100);
        if (t == OLY_BOOL) v[i] = (i + salt) % 3 == 0;
        if (oly_dtype_is_unsigned_int(t) && v[i] < 0) v[i] = -v[i];
    }
}

/* Element i of a and b equal (for floats: both NaN, or the same bits). */
static bool same_elements(const oly_array *a, const oly_array *b, int64_t *bad)
{
    const oly_aval *av = oly_array_aval(a), *bv = oly_array_aval(b);
    if (av->dtype != bv->dtype || oly_aval_size(av) != oly_aval_size(bv)) return false;
    size_t es = oly_dtype_size(av->dtype);
    const char *pa = oly_array_data(a), *pb = oly_array_data(b);
    for (int64_t i = 0; i < oly_aval_size(av); i++) {
        if (memcmp(pa + i * es, pb + i * es, es) == 0) continue;
        if (oly_dtype_is_float(av->dtype) && isnan(tu_get(a, i)) && isnan(tu_get(b, i))) continue;
        *bad = i;
        return false;
    }
    return true;
}

/* Runs p on in at every supported level; each result must equal the portable
 * level's. */
static void check_levels_agree(const char *label, const oly_prim *p, const void *params,
                               oly_array *const *in, int n_in)
{
    oly_cpu_level saved = oly_cpu_level_get(), lv[OLY_CPU_LEVEL_COUNT];
    int nl = supported_levels(lv);
    oly_array *ref = NULL;
    for (int l = 0; l < nl; l++) {
        CHECK_OK(oly__cpu_set_level(lv[l]));
        oly_array *o = NULL;
        oly_status s = tu_run_kernel(p, params, in, n_in, &o, 1, NULL);
        if (s != OLY_OK) {
            CHECK_FAIL_("%s at %s: %s", label, oly_cpu_level_name(lv[l]), oly_last_error());
            break;
        }
        int64_t bad = -1;
        if (!ref) {
            ref = o;
            continue;
        }
        if (!same_elements(o, ref, &bad))
            CHECK_FAIL_("%s at %s: element %lld is %.17g, portable gives %.17g", label,
                        oly_cpu_level_name(lv[l]), (long long)bad, tu_get(o, bad),
                        tu_get(ref, bad));
        oly_array_release(o);
    }
    oly_array_release(ref);
    CHECK_OK(oly__cpu_set_level(saved));
}

TEST(cpu_levels_exact_binary_ops_agree)
{
    const oly_prim *ops[] = {&oly__prim_add, &oly__prim_sub, &oly__prim_mul, &oly__prim_div,
                             &oly__prim_max, &oly__prim_min, &oly__prim_and, &oly__prim_or,
                             &oly__prim_xor, &oly__prim_eq, &oly__prim_ne, &oly__prim_lt,
                             &oly__prim_le, &oly__prim_gt, &oly__prim_ge,
                             &oly__prim_shift_left, &oly__prim_shift_right_logical,
                             &oly__prim_shift_right_arithmetic};
    oly_dtype ts[] = {OLY_BOOL, OLY_INT8, OLY_INT32, OLY_INT64, OLY_UINT8, OLY_UINT32,
                      OLY_UINT64, OLY_FLOAT32, OLY_FLOAT64, OLY_FLOAT16};
    double xv[NE], yv[NE];
    for (int ti = 0; ti < OLY_ARRAY_LEN(ts); ti++) {
        oly_dtype t = ts[ti];
        special_values(xv, NE, t, 0);
        special_values(yv, NE, t, 5);
        int64_t n = NE;
        oly_array *x = tu_array(t, 1, &n, xv), *y = tu_array(t, 1, &n, yv);
        oly_array *xs = tu_scalar(t, xv[3]), *ys = tu_scalar(t, yv[9]);
        for (int oi = 0; oi < OLY_ARRAY_LEN(ops); oi++) {
            /* only the pairs the row accepts (its shape rule says) */
            oly_array *in[2] = {x, y}, *o = NULL;
            if (tu_run_kernel(ops[oi], NULL, in, 2, &o, 1, NULL) != OLY_OK) continue;
            oly_array_release(o);
            char label[96];
            snprintf(label, sizeof label, "%s %s", ops[oi]->name, oly_dtype_short_name(t));
            check_levels_agree(label, ops[oi], NULL, in, 2);
            oly_array *sa[2] = {xs, y}, *sb[2] = {x, ys}; /* rank-0 broadcasts */
            check_levels_agree(label, ops[oi], NULL, sa, 2);
            check_levels_agree(label, ops[oi], NULL, sb, 2);
        }
        oly_array_release(x);
        oly_array_release(y);
        oly_array_release(xs);
        oly_array_release(ys);
    }
}

TEST(cpu_levels_exact_unary_ops_agree)
{
    const oly_prim *ops[] = {&oly__prim_neg, &oly__prim_abs, &oly__prim_square, &oly__prim_sign,
                             &oly__prim_not, &oly__prim_is_finite, &oly__prim_floor,
                             &oly__prim_ceil, &oly__prim_sqrt, &oly__prim_round};
    oly_dtype ts[] = {OLY_BOOL, OLY_INT8, OLY_INT16, OLY_INT32, OLY_INT64, OLY_UINT16,
                      OLY_UINT64, OLY_FLOAT32, OLY_FLOAT64, OLY_BFLOAT16};
    oly_params_round even = {1};
    double xv[NE];
    for (int ti = 0; ti < OLY_ARRAY_LEN(ts); ti++) {
        oly_dtype t = ts[ti];
        special_values(xv, NE, t, 1);
        int64_t n = NE;
        oly_array *x = tu_array(t, 1, &n, xv);
        for (int oi = 0; oi < OLY_ARRAY_LEN(ops); oi++) {
            const void *params = ops[oi] == &oly__prim_round ? &even : NULL;
            oly_array *o = NULL;
            if (tu_run_kernel(ops[oi], params, &x, 1, &o, 1, NULL) != OLY_OK) continue;
            oly_array_release(o);
            char label[96];
            snprintf(label, sizeof label, "%s %s", ops[oi]->name, oly_dtype_short_name(t));
            check_levels_agree(label, ops[oi], params, &x, 1);
        }
        oly_array_release(x);
    }
}

/* ---------------------------------------------------------------- reductions */

/* The serial rule for one combine (the kernel's generic loop): sums and
 * products in double, max/min with NaN winning (the latest NaN). */
static double combine1(const oly_prim *p, double a, double v)
{
    if (p == &oly__prim_reduce_sum) return a + v;
    if (p == &oly__prim_reduce_prod) return a * v;
    if (p == &oly__prim_reduce_max) return (v > a || v != v) ? v : a;
    return (v < a || v != v) ? v : a;
}

TEST(cpu_levels_reductions_over_leading_axes)
{
    /* x[A, B, C]: reduce axis 0 (rows into a vector), axes (0, 1) (the rows
     * merged), axis 1 (an outer kept axis around the rows); C = 37 leaves a
     * tail at every vector width, A * B not a multiple of the 4 rows a pass. */
    enum { A = 7, B = 5, C = 37 };
    const oly_prim *ops[] = {&oly__prim_reduce_sum, &oly__prim_reduce_prod,
                             &oly__prim_reduce_max, &oly__prim_reduce_min};
    oly_params_reduce ax[3] = {{.axes = {.n = 1, .v = {0}}}, {.axes = {.n = 2, .v = {1, 0}}},
                               {.axes = {.n = 1, .v = {1}}}};
    const oly_dtype ts[] = {OLY_FLOAT32, OLY_FLOAT64};
    double xv[A * B * C];
    for (int ti = 0; ti < 2; ti++) {
        oly_dtype t = ts[ti];
        for (int with_specials = 0; with_specials < 2; with_specials++) {
            for (int i = 0; i < A * B * C; i++) xv[i] = 1 + ((i * 37) % 101 - 50) / 64.0;
            if (with_specials) { /* a NaN and infinities in some columns, signed zeros */
                special_values(xv, 40, t, 2);
                xv[3 * C + 11] = NAN;
                xv[6 * C + 12] = -INFINITY;
                xv[C + 20] = -0.0;
                /* ties of signed zeros: the first zero reached stays (column 5:
                 * max over -0 then +0; column 6: min over +0 then -0) */
                for (int r = 0; r < A; r++)
                    for (int b = 0; b < B; b++) {
                        double *c5 = &xv[(r * B + b) * C + 5], *c6 = c5 + 1;
                        *c5 = r == 1 ? -0.0 : r == 3 ? 0.0 : -1.0 - r;
                        *c6 = r == 1 ? 0.0 : r == 2 ? -0.0 : 1.0 + r;
                    }
            }
            int64_t d[3] = {A, B, C};
            oly_array *x = tu_array(t, 3, d, xv);
            for (int oi = 0; oi < OLY_ARRAY_LEN(ops); oi++) {
                for (int a = 0; a < 3; a++) {
                    char label[96];
                    snprintf(label, sizeof label, "%s%s %s axes %d", ops[oi]->name,
                             with_specials ? " (specials)" : "", oly_dtype_short_name(t), a);
                    check_levels_agree(label, ops[oi], &ax[a], &x, 1);
                    /* and the serial rule, row by row in double */
                    oly_array *o = NULL;
                    CHECK_OK(tu_run_kernel(ops[oi], &ax[a], &x, 1, &o, 1, NULL));
                    int nout = a == 2 ? A * C : a == 1 ? C : B * C;
                    for (int k = 0; o && k < nout; k++) {
                        double acc = ops[oi] == &oly__prim_reduce_sum    ? 0
                                     : ops[oi] == &oly__prim_reduce_prod ? 1
                                     : ops[oi] == &oly__prim_reduce_max  ? -INFINITY
                                                                         : INFINITY;
                        int nr = a == 1 ? A * B : a == 0 ? A : B;
                        for (int r = 0; r < nr; r++) {
                            int i = a == 2   ? (k / C) * B * C + r * C + k % C
                                    : a == 1 ? r * C + k
                                             : r * B * C + k;
                            acc = combine1(ops[oi], acc, tu_get(x, i));
                        }
                        double want = t == OLY_FLOAT32 ? (double)(float)acc : acc;
                        double got = tu_get(o, k);
                        bool same = (isnan(got) && isnan(want)) ||
                                    (got == want && signbit(got) == signbit(want));
                        if (!same) {
                            CHECK_FAIL_("%s: output %d is %.17g, the serial rule gives %.17g",
                                        label, k, got, want);
                            break;
                        }
                    }
                    oly_array_release(o);
                }
            }
            oly_array_release(x);
        }
    }
}

/* ---------------------------------------------------------------- small products */

/* dot_general's small-product loops (f32/f64 below BLAS's size) at every
 * level, every storage order of both operands, matrix-vector and vector-matrix
 * forms and a batch: within a rounding bound of a long double loop. */
TEST(cpu_levels_small_products)
{
    static const int64_t shapes[][4] = {/* B, M, K, N */
                                        {1, 5, 7, 9},  {1, 33, 17, 65}, {1, 1, 37, 19},
                                        {1, 23, 41, 1}, {3, 6, 5, 4},   {1, 64, 64, 64},
                                        {2, 1, 300, 1}, {1, 130, 70, 1}};
    oly_cpu_level saved = oly_cpu_level_get(), lv[OLY_CPU_LEVEL_COUNT];
    int nl = supported_levels(lv);
    for (int ti = 0; ti < 2; ti++) {
        oly_dtype t = ti ? OLY_FLOAT64 : OLY_FLOAT32;
        for (int si = 0; si < OLY_ARRAY_LEN(shapes); si++) {
            int64_t B = shapes[si][0], M = shapes[si][1], K = shapes[si][2], N = shapes[si][3];
            for (int lay = 0; lay < 4; lay++) {
                bool at = lay & 1, bt = lay & 2; /* stored (K, M) / (N, K) */
                int64_t ad[3] = {B, at ? K : M, at ? M : K}, bd[3] = {B, bt ? N : K, bt ? K : N};
                double *av = malloc(sizeof(double) * (size_t)(B * M * K));
                double *bv = malloc(sizeof(double) * (size_t)(B * K * N));
                for (int64_t i = 0; i < B * M * K; i++) av[i] = ((i * 7919) % 61 - 30) / 17.0;
                for (int64_t i = 0; i < B * K * N; i++) bv[i] = ((i * 104729) % 53 - 26) / 13.0;
                oly_array *in[2] = {tu_array(t, 3, ad, av), tu_array(t, 3, bd, bv)};
                oly_params_dot_general p = {
                    .lhs_contracting = {.n = 1, .v = {at ? 1 : 2}},
                    .rhs_contracting = {.n = 1, .v = {bt ? 2 : 1}},
                    .lhs_batch = {.n = 1, .v = {0}},
                    .rhs_batch = {.n = 1, .v = {0}}};
                for (int l = 0; l < nl; l++) {
                    CHECK_OK(oly__cpu_set_level(lv[l]));
                    oly_array *o = NULL;
                    CHECK_OK(tu_run_kernel(&oly__prim_dot_general, &p, in, 2, &o, 1, NULL));
                    bool bad = false;
                    for (int64_t b = 0; o && b < B && !bad; b++)
                        for (int64_t i = 0; i < M && !bad; i++)
                            for (int64_t j = 0; j < N && !bad; j++) {
                                long double s = 0, mag = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    double x = av[b * M * K + (at ? k * M + i : i * K + k)];
                                    double y = bv[b * K * N + (bt ? j * K + k : k * N + j)];
                                    x = t == OLY_FLOAT32 ? (float)x : x;
                                    y = t == OLY_FLOAT32 ? (float)y : y;
                                    s += (long double)x * y;
                                    mag += fabsl((long double)x * y);
                                }
                                double got = tu_get(o, (b * M + i) * N + j);
                                double tol = (t == OLY_FLOAT32 ? 2e-6 : 4e-15) * (double)mag * 4;
                                if (!(fabs(got - (double)s) <= tol + 1e-30)) {
                                    CHECK_FAIL_("%s [%lld,%lld,%lld,%lld] layout %d at %s: "
                                                "C[%lld,%lld,%lld] = %.10g, want %.10g",
                                                oly_dtype_short_name(t), (long long)B,
                                                (long long)M, (long long)K, (long long)N, lay,
                                                oly_cpu_level_name(lv[l]), (long long)b,
                                                (long long)i, (long long)j, got, (double)s);
                                    bad = true;
                                }
                            }
                    oly_array_release(o);
                }
                oly_array_release(in[0]);
                oly_array_release(in[1]);
                free(av);
                free(bv);
            }
        }
    }
    CHECK_OK(oly__cpu_set_level(saved));
}

/* ---------------------------------------------------------------- conversions, iota, erf_inv */

/* convert_element_type's typed loops at every level equal oly__convert (the
 * one definition of every pair), specials included. */
TEST(cpu_levels_conversions_match_the_reference)
{
    const oly_dtype ts[] = {OLY_BOOL, OLY_UINT8, OLY_INT32, OLY_UINT32, OLY_INT64,
                            OLY_FLOAT32, OLY_FLOAT64};
    double xv[NE];
    for (int a = 0; a < OLY_ARRAY_LEN(ts); a++) {
        special_values(xv, NE, ts[a], 3);
        if (ts[a] == OLY_UINT32) xv[7] = 4294967295.0, xv[8] = 16777217.0;
        if (ts[a] == OLY_INT64) xv[7] = 9007199254740993.0, xv[8] = -9.2e18;
        int64_t n = NE;
        oly_array *x = tu_array(ts[a], 1, &n, xv);
        for (int b = 0; b < OLY_ARRAY_LEN(ts); b++) {
            if (a == b) continue;
            oly_params_convert p = {.new_dtype = ts[b]};
            char label[96];
            snprintf(label, sizeof label, "convert %s -> %s", oly_dtype_short_name(ts[a]),
                     oly_dtype_short_name(ts[b]));
            check_levels_agree(label, &oly__prim_convert_element_type, &p, &x, 1);
            oly_array *o = NULL;
            CHECK_OK(tu_run_kernel(&oly__prim_convert_element_type, &p, &x, 1, &o, 1, NULL));
            size_t os = oly_dtype_size(ts[b]);
            char *want = malloc(os * NE);
            oly__convert(oly_array_data(x), ts[a], want, ts[b], NE);
            for (int i = 0; o && i < NE; i++) {
                const char *g = (const char *)oly_array_data(o) + i * os;
                double gv = tu_get(o, i), wv = 0;
                oly__convert(want + i * os, ts[b], &wv, OLY_FLOAT64, 1);
                if (memcmp(g, want + i * os, os) != 0 && !(isnan(gv) && isnan(wv))) {
                    CHECK_FAIL_("%s: element %d (%.17g) is %.17g, oly__convert gives %.17g",
                                label, i, tu_get(x, i), gv, wv);
                    break;
                }
            }
            free(want);
            oly_array_release(o);
        }
        oly_array_release(x);
    }
}

/* iota's typed rows equal the generic one (oly_scalar_store of each index). */
TEST(cpu_iota_typed_rows)
{
    const oly_dtype ts[] = {OLY_INT8, OLY_UINT8, OLY_INT16, OLY_UINT16, OLY_INT32, OLY_UINT32,
                            OLY_INT64, OLY_UINT64, OLY_FLOAT32, OLY_FLOAT64, OLY_FLOAT16};
    for (int ti = 0; ti < OLY_ARRAY_LEN(ts); ti++) {
        for (int dim = 0; dim < 2; dim++) {
            oly_params_iota p = {.dtype = ts[ti], .shape = {.n = 2, .v = {300, 3}},
                                 .dimension = dim};
            oly_array *o = NULL;
            CHECK_OK(tu_run_kernel(&oly__prim_iota, &p, NULL, 0, &o, 1, NULL));
            size_t es = oly_dtype_size(ts[ti]);
            for (int64_t i = 0; o && i < 900; i++) {
                int64_t k = dim == 0 ? i / 3 : i % 3;
                unsigned char want[8];
                oly_scalar s = {.dtype = OLY_INT64, .v.i = k};
                oly_scalar_store(&s, ts[ti], want);
                if (memcmp((const char *)oly_array_data(o) + i * es, want, es) != 0) {
                    CHECK_FAIL_("iota %s dimension %d: element %lld is %.17g, want index %lld",
                                oly_dtype_short_name(ts[ti]), dim, (long long)i, tu_get(o, i),
                                (long long)k);
                    break;
                }
            }
            oly_array_release(o);
        }
    }
}

/* float32 erf_inv's vector loops: within 2 ULP of the scalar (libm log) path,
 * the ends exact (+-inf at +-1, NaN beyond and for NaN, signed zeros). */
TEST(cpu_levels_erf_inv_f32)
{
    double xv[NE];
    for (int i = 0; i < NE; i++) xv[i] = -1 + 2.0 * i / (NE - 1);
    const double ends[] = {NAN, 1.5, -1.5, INFINITY, -1, 1, 0, -0.0, 1e-30, 0.99999994, -0.99999994};
    for (int i = 0; i < OLY_ARRAY_LEN(ends); i++) xv[100 + i] = ends[i];
    int64_t n = NE;
    oly_array *x = tu_array(OLY_FLOAT32, 1, &n, xv), *ref = NULL;
    oly_cpu_level saved = oly_cpu_level_get(), lv[OLY_CPU_LEVEL_COUNT];
    int nl = supported_levels(lv);
    for (int l = 0; l < nl; l++) {
        CHECK_OK(oly__cpu_set_level(lv[l]));
        oly_array *o = NULL;
        CHECK_OK(tu_run_kernel(&oly__prim_erf_inv, NULL, &x, 1, &o, 1, NULL));
        if (!ref) {
            ref = o;
            continue;
        }
        const int32_t *g = oly_array_data(o), *w = oly_array_data(ref);
        for (int i = 0; o && i < NE; i++) {
            double gv = tu_get(o, i), wv = tu_get(ref, i);
            bool ok = (isnan(gv) && isnan(wv)) || g[i] == w[i] ||
                      (isfinite(wv) && wv != 0 && signbit(gv) == signbit(wv) &&
                       llabs((long long)g[i] - w[i]) <= 2);
            if (!ok) {
                CHECK_FAIL_("erf_inv f32 at %s: erf_inv(%.9g) = %.9g, the scalar path %.9g",
                            oly_cpu_level_name(lv[l]), tu_get(x, i), gv, wv);
                break;
            }
        }
        oly_array_release(o);
    }
    oly_array_release(ref);
    oly_array_release(x);
    CHECK_OK(oly__cpu_set_level(saved));
}

/* select_n's loops at every level: a bool predicate over two cases, an int32
 * index over three (clamped), every element size. */
TEST(cpu_levels_select_agrees)
{
    const oly_dtype ts[] = {OLY_UINT8, OLY_FLOAT16, OLY_FLOAT32, OLY_FLOAT64, OLY_COMPLEX128};
    double wv[NE], iv[NE], a[NE], b[NE], c[NE];
    for (int i = 0; i < NE; i++) {
        wv[i] = (i * 7) % 3 == 0;
        iv[i] = (i * 5) % 7 - 2; /* -2 .. 4: clamped to 0 .. 2 */
        a[i] = i;
        b[i] = -i - 0.5;
        c[i] = 1000 + i;
    }
    int64_t n = NE;
    oly_array *wb = tu_array(OLY_BOOL, 1, &n, wv), *wi = tu_array(OLY_INT32, 1, &n, iv);
    for (int ti = 0; ti < OLY_ARRAY_LEN(ts); ti++) {
        oly_array *ca = tu_array(ts[ti], 1, &n, a), *cb = tu_array(ts[ti], 1, &n, b);
        oly_array *cc = tu_array(ts[ti], 1, &n, c);
        oly_array *two[3] = {wb, ca, cb}, *three[4] = {wi, ca, cb, cc};
        char label[64];
        snprintf(label, sizeof label, "select_n bool %s", oly_dtype_short_name(ts[ti]));
        check_levels_agree(label, &oly__prim_select_n, NULL, two, 3);
        snprintf(label, sizeof label, "select_n int32 %s", oly_dtype_short_name(ts[ti]));
        check_levels_agree(label, &oly__prim_select_n, NULL, three, 4);
        oly_array *o = NULL;
        CHECK_OK(tu_run_kernel(&oly__prim_select_n, NULL, three, 4, &o, 1, NULL));
        for (int i = 0; o && i < NE; i++) {
            int k = iv[i] < 0 ? 0 : iv[i] > 2 ? 2 : (int)iv[i];
            double want = tu_get(k == 0 ? ca : k == 1 ? cb : cc, i);
            if (tu_get(o, i) != want) {
                CHECK_FAIL_("select_n int32 %s: element %d is %g, want %g",
                            oly_dtype_short_name(ts[ti]), i, tu_get(o, i), want);
                break;
            }
        }
        oly_array_release(o);
        oly_array_release(ca);
        oly_array_release(cb);
        oly_array_release(cc);
    }
    oly_array_release(wb);
    oly_array_release(wi);
}

/* test_sort.c — the sort and top_k rows (src/prims/sort.c, src/cpu/sort.c):
 * the kernels for every dtype, NaN and complex order, stability, num_keys and
 * several operands, a non-last dimension, the shape rules' errors, and the
 * batch / jvp / transpose rules through rulecheck. Expected values are
 * hand-computed (NumPy's np.sort / np.lexsort / argsort(kind="stable")). */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include "trans/trans.h"

#include <math.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})

static oly_params_sort sortp(int64_t dim, int64_t nk)
{
    return (oly_params_sort){.dimension = dim, .is_stable = true, .num_keys = nk};
}

/* Runs p on n_in inputs; out gets up to 4 outputs (released by the caller). */
static bool run(const oly_prim *p, const void *params, oly_array **in, int n_in, oly_array **out)
{
    int n_out = 0;
    oly_status s = tu_run_kernel(p, params, in, n_in, out, 4, &n_out);
    CHECK_OK(s);
    return s == OLY_OK;
}

static void release_n(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) {
        oly_array_release(a[i]);
        a[i] = NULL;
    }
}

TEST(sort_every_dtype)
{
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        oly_dtype dt = (oly_dtype)t;
        oly_params_sort p = sortp(0, 1);
        oly_array *x, *y[4] = {0};
        if (dt == OLY_BOOL) {
            x = tu_array(dt, 1, D(5), V(1, 0, 1, 0, 0));
            if (run(&oly__prim_sort, &p, &x, 1, y)) CHECK(tu_allclose(y[0], V(0, 0, 0, 1, 1), 5, 0, 0));
        } else if (oly_dtype_is_unsigned_int(dt)) {
            x = tu_array(dt, 1, D(6), V(7, 0, 200, 3, 3, 1));
            if (run(&oly__prim_sort, &p, &x, 1, y))
                CHECK(tu_allclose(y[0], V(0, 1, 3, 3, 7, 200), 6, 0, 0));
        } else {
            x = tu_array(dt, 1, D(6), V(7, -1, 100, 3, -50, 1));
            if (run(&oly__prim_sort, &p, &x, 1, y))
                CHECK(tu_allclose(y[0], V(-50, -1, 1, 3, 7, 100), 6, 0, 0));
        }
        if (oly_test_failed) fprintf(stderr, "    dtype %s\n", oly_dtype_name(dt));
        CHECK_EQ(oly_array_aval(y[0])->dtype, dt);
        oly_array_release(x);
        release_n(y, 1);
    }
}

TEST(sort_int_extremes)
{
    int64_t v[5] = {INT64_MAX, INT64_MIN, -1, 0, 1}, want[5] = {INT64_MIN, -1, 0, 1, INT64_MAX};
    oly_aval av = tu_aval(OLY_INT64, 1, D(5));
    oly_array *x = NULL, *y[4] = {0};
    CHECK_OK(oly_array_from_data(&av, v, &x));
    oly_params_sort p = sortp(-1, 1);
    if (run(&oly__prim_sort, &p, &x, 1, y)) CHECK(memcmp(oly_array_data(y[0]), want, sizeof want) == 0);
    oly_array_release(x);
    release_n(y, 1);
    uint64_t u[3] = {UINT64_MAX, 0, 1ull << 63}, uw[3] = {0, 1ull << 63, UINT64_MAX};
    av.dtype = OLY_UINT64;
    av.dims[0] = 3;
    CHECK_OK(oly_array_from_data(&av, u, &x));
    if (run(&oly__prim_sort, &p, &x, 1, y)) CHECK(memcmp(oly_array_data(y[0]), uw, sizeof uw) == 0);
    oly_array_release(x);
    release_n(y, 1);
}

TEST(sort_nan_last_every_float)
{
    const oly_dtype fl[] = {OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT32, OLY_FLOAT64};
    for (int k = 0; k < OLY_ARRAY_LEN(fl); k++) {
        oly_array *x = tu_array(fl[k], 1, D(7), V(NAN, 3, -INFINITY, NAN, INFINITY, -2, 0)), *y[4] = {0};
        oly_params_sort p = sortp(0, 1);
        if (run(&oly__prim_sort, &p, &x, 1, y))
            CHECK(tu_allclose(y[0], V(-INFINITY, -2, 0, 3, INFINITY, NAN, NAN), 7, 0, 0));
        oly_array_release(x);
        release_n(y, 1);
    }
}

TEST(sort_signed_zeros_keep_their_order)
{
    /* -0.0 == 0.0 (NumPy): a stable sort keeps them as they came */
    oly_array *x = tu_array(OLY_FLOAT64, 1, D(4), V(0.0, -0.0, -1, -0.0)), *y[4] = {0};
    oly_params_sort p = sortp(0, 1);
    if (run(&oly__prim_sort, &p, &x, 1, y)) {
        const double *d = oly_array_data(y[0]);
        CHECK(d[0] == -1 && !signbit(d[1]) && signbit(d[2]) && signbit(d[3]));
    }
    oly_array_release(x);
    release_n(y, 1);
}

TEST(sort_complex_lexicographic)
{
    /* NumPy's order: R+Rj < R+nanj < nan+Rj < nan+nanj, by (real, imag) */
    double in[] = {1, 2, NAN, 0, 1, NAN, 1, -1, NAN, NAN, -3, 5, 1, 2};
    double want[] = {-3, 5, 1, -1, 1, 2, 1, 2, 1, NAN, NAN, 0, NAN, NAN};
    for (int c = 0; c < 2; c++) {
        oly_dtype t = c ? OLY_COMPLEX128 : OLY_COMPLEX64;
        oly_aval av = tu_aval(t, 1, D(7));
        oly_array *x = NULL, *y[4] = {0};
        if (t == OLY_COMPLEX128) {
            CHECK_OK(oly_array_from_data(&av, in, &x));
        } else {
            float f[14];
            for (int i = 0; i < 14; i++) f[i] = (float)in[i];
            CHECK_OK(oly_array_from_data(&av, f, &x));
        }
        oly_params_sort p = sortp(0, 1);
        if (run(&oly__prim_sort, &p, &x, 1, y))
            for (int i = 0; i < 14; i++) {
                double g = t == OLY_COMPLEX128 ? ((const double *)oly_array_data(y[0]))[i]
                                               : ((const float *)oly_array_data(y[0]))[i];
                CHECK_NEAR(g, want[i], 0);
            }
        oly_array_release(x);
        release_n(y, 1);
    }
}

TEST(sort_stable_with_values)
{
    /* keys with many ties, values permuted along: np.argsort(k, kind="stable") */
    double k[40], v[40], wk[40], wv[40];
    int n = 0;
    for (int i = 0; i < 40; i++) {
        k[i] = (i * 7) % 5;
        v[i] = i;
    }
    for (int key = 0; key < 5; key++)
        for (int i = 0; i < 40; i++)
            if (k[i] == key) {
                wk[n] = key;
                wv[n++] = i;
            }
    oly_array *in[2] = {tu_array(OLY_INT32, 1, D(40), k), tu_array(OLY_FLOAT32, 1, D(40), v)};
    oly_array *y[4] = {0};
    oly_params_sort p = sortp(0, 1);
    if (run(&oly__prim_sort, &p, in, 2, y)) {
        CHECK(tu_allclose(y[0], wk, 40, 0, 0));
        CHECK(tu_allclose(y[1], wv, 40, 0, 0));
        CHECK_EQ(oly_array_aval(y[1])->dtype, OLY_FLOAT32);
    }
    /* is_stable = false: the kernel is stable all the same */
    p.is_stable = false;
    release_n(y, 2);
    if (run(&oly__prim_sort, &p, in, 2, y)) CHECK(tu_allclose(y[1], wv, 40, 0, 0));
    release_n(y, 2);
    release_n(in, 2);
}

TEST(sort_num_keys_lexicographic)
{
    /* np.lexsort((k2, k1)): by k1, then k2; the third operand follows */
    oly_array *in[3] = {tu_array(OLY_INT8, 1, D(6), V(1, 0, 1, 0, 1, 0)),
                        tu_array(OLY_FLOAT64, 1, D(6), V(2, 2, 1, 1, 2, NAN)),
                        tu_array(OLY_UINT16, 1, D(6), V(10, 11, 12, 13, 14, 15))};
    oly_array *y[4] = {0};
    oly_params_sort p = sortp(0, 2);
    if (run(&oly__prim_sort, &p, in, 3, y)) {
        CHECK(tu_allclose(y[0], V(0, 0, 0, 1, 1, 1), 6, 0, 0));
        CHECK(tu_allclose(y[1], V(1, 2, NAN, 1, 2, 2), 6, 0, 0));
        CHECK(tu_allclose(y[2], V(13, 11, 15, 12, 10, 14), 6, 0, 0));
    }
    release_n(y, 3);
    /* num_keys = 1: ties in k1 keep input order */
    p.num_keys = 1;
    if (run(&oly__prim_sort, &p, in, 3, y)) CHECK(tu_allclose(y[2], V(11, 13, 15, 10, 12, 14), 6, 0, 0));
    release_n(y, 3);
    release_n(in, 3);
}

TEST(sort_dimension_0_of_rank_3)
{
    /* x[i, j, l] = ((i * 5 + j * 3 + l * 7) % 4) - i: sorted along axis 0 */
    double xs[3 * 2 * 4], want[3 * 2 * 4];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int l = 0; l < 4; l++) xs[(i * 2 + j) * 4 + l] = ((i * 5 + j * 3 + l * 7) % 4) - i;
    for (int j = 0; j < 2; j++)
        for (int l = 0; l < 4; l++) {
            double c[3];
            for (int i = 0; i < 3; i++) c[i] = xs[(i * 2 + j) * 4 + l];
            for (int a = 0; a < 3; a++) /* tiny insertion sort */
                for (int b = a; b > 0 && c[b - 1] > c[b]; b--) {
                    double s = c[b];
                    c[b] = c[b - 1];
                    c[b - 1] = s;
                }
            for (int i = 0; i < 3; i++) want[(i * 2 + j) * 4 + l] = c[i];
        }
    oly_array *x = tu_array(OLY_FLOAT32, 3, D(3, 2, 4), xs), *y[4] = {0};
    oly_params_sort p = sortp(0, 1);
    if (run(&oly__prim_sort, &p, &x, 1, y)) CHECK(tu_allclose(y[0], want, 24, 0, 0));
    release_n(y, 1);
    p.dimension = -3;
    if (run(&oly__prim_sort, &p, &x, 1, y)) CHECK(tu_allclose(y[0], want, 24, 0, 0));
    release_n(y, 1);
    oly_array_release(x);
}

TEST(sort_long_line_is_sorted_and_a_permutation)
{
    /* past the insertion-sort runs: merges of several widths */
    enum { N = 1000 };
    double xs[N], want[N];
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (double)((s >> 33) % 97);
    }
    int cnt[97] = {0};
    for (int i = 0; i < N; i++) cnt[(int)xs[i]]++;
    for (int v = 0, o = 0; v < 97; v++)
        for (int c = 0; c < cnt[v]; c++) want[o++] = v;
    oly_array *in[2] = {tu_array(OLY_FLOAT64, 1, D(N), xs), NULL}, *y[4] = {0};
    double iota[N];
    for (int i = 0; i < N; i++) iota[i] = i;
    in[1] = tu_array(OLY_INT32, 1, D(N), iota);
    oly_params_sort p = sortp(0, 1);
    if (run(&oly__prim_sort, &p, in, 2, y)) {
        CHECK(tu_allclose(y[0], want, N, 0, 0));
        const int32_t *ix = oly_array_data(y[1]);
        for (int i = 1; i < N; i++) /* stable: equal keys in index order */
            if (xs[ix[i - 1]] == xs[ix[i]] && ix[i - 1] > ix[i]) {
                CHECK_FAIL_("unstable at %d", i);
                break;
            }
    }
    release_n(y, 2);
    release_n(in, 2);
}

TEST(top_k_values_indices)
{
    /* descending, ties: lower index first; NaN counts as the largest */
    oly_array *x = tu_array(OLY_FLOAT32, 2, D(2, 5), V(1, 3, 3, -1, 2, NAN, 0, 5, 5, -INFINITY));
    oly_array *y[4] = {0};
    oly_params_top_k p = {.k = 3};
    if (run(&oly__prim_top_k, &p, &x, 1, y)) {
        CHECK(tu_allclose(y[0], V(3, 3, 2, NAN, 5, 5), 6, 0, 0));
        CHECK(tu_allclose(y[1], V(1, 2, 4, 0, 2, 3), 6, 0, 0));
        CHECK_EQ(oly_array_aval(y[1])->dtype, OLY_INT32);
        CHECK_EQ(oly_array_aval(y[0])->dims[1], 3);
    }
    release_n(y, 2);
    oly_array_release(x);
    const oly_dtype ts[] = {OLY_INT8, OLY_UINT8, OLY_INT16, OLY_UINT16, OLY_INT32, OLY_UINT32,
                            OLY_INT64, OLY_UINT64, OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT64};
    for (int k = 0; k < OLY_ARRAY_LEN(ts); k++) {
        x = tu_array(ts[k], 1, D(6), V(4, 9, 0, 9, 2, 7));
        p.k = 6;
        if (run(&oly__prim_top_k, &p, &x, 1, y)) {
            CHECK(tu_allclose(y[0], V(9, 9, 7, 4, 2, 0), 6, 0, 0));
            CHECK(tu_allclose(y[1], V(1, 3, 5, 0, 4, 2), 6, 0, 0));
        }
        release_n(y, 2);
        p.k = 0;
        if (run(&oly__prim_top_k, &p, &x, 1, y)) CHECK_EQ(oly_aval_size(oly_array_aval(y[0])), 0);
        release_n(y, 2);
        oly_array_release(x);
    }
}

/* ---------------------------------------------------------------- errors */

static void expect_error(const oly_prim *prim, const void *params, oly_array **in, int n_in,
                         oly_status want, const char *needle)
{
    oly_array *y[4] = {0};
    oly_status s = tu_run_kernel(prim, params, in, n_in, y, 4, NULL);
    CHECK_EQ(s, want);
    if (s != OLY_OK && !strstr(oly_last_error(), needle))
        CHECK_FAIL_("message %s lacks %s", oly_last_error(), needle);
    if (s == OLY_OK) release_n(y, 4);
}

TEST(sort_top_k_errors)
{
    oly_array *in[3] = {tu_array(OLY_FLOAT32, 2, D(2, 3), NULL), tu_array(OLY_INT32, 2, D(3, 2), NULL),
                        tu_scalar(OLY_FLOAT32, 1)};
    oly_params_sort p = sortp(0, 1);
    expect_error(&oly__prim_sort, &p, in, 2, OLY_ERR_SHAPE,
                 "operand 0 is f32[2,3], operand 1 is i32[3,2]");
    p.num_keys = 2;
    expect_error(&oly__prim_sort, &p, in, 1, OLY_ERR_INVALID, "num_keys must be in [1, 1]");
    p.num_keys = 0;
    expect_error(&oly__prim_sort, &p, in, 1, OLY_ERR_INVALID, "got 0");
    p = sortp(2, 1);
    expect_error(&oly__prim_sort, &p, in, 1, OLY_ERR_INVALID, "dimension 2 is out of range for rank 2");
    p = sortp(0, 1);
    expect_error(&oly__prim_sort, &p, &in[2], 1, OLY_ERR_SHAPE, "rank >= 1");
    expect_error(&oly__prim_sort, &p, in, 0, OLY_ERR_INVALID, "at least 1 operand");
    oly_params_top_k k = {.k = 4};
    expect_error(&oly__prim_top_k, &k, in, 1, OLY_ERR_INVALID,
                 "k must be in [0, 3] (the last axis of operand f32[2,3]), got 4");
    k.k = -1;
    expect_error(&oly__prim_top_k, &k, in, 1, OLY_ERR_INVALID, "got -1");
    k.k = 1;
    expect_error(&oly__prim_top_k, &k, &in[2], 1, OLY_ERR_SHAPE, "rank >= 1");
    oly_array *c = tu_array(OLY_COMPLEX64, 1, D(3), NULL);
    expect_error(&oly__prim_top_k, &k, &c, 1, OLY_ERR_TYPE, "integer or float dtype, got c64[3]");
    oly_array_release(c);
    release_n(in, 3);
}

/* ---------------------------------------------------------------- rules */

TEST(sort_rules)
{
    static const oly_params_sort last1 = {.dimension = -1, .is_stable = true, .num_keys = 1};
    static const oly_params_sort dim0 = {.dimension = 0, .is_stable = true, .num_keys = 1};
    static const oly_params_sort mid2 = {.dimension = 1, .is_stable = false, .num_keys = 2};
    static const oly_params_top_k k2 = {.k = 2}, k5 = {.k = 5};
    rc_case cases[] = {
        {.prim = "sort", .params = &last1, .n_in = 1, .in = {RC_F64(7)}},
        {.prim = "sort", .params = &dim0, .n_in = 1, .in = {RC_F64(4, 3)}},
        {.prim = "sort", .params = &dim0, .n_in = 2, .in = {RC_F64(3, 2, 2), RC_F64(3, 2, 2)}},
        /* integer keys with ties (stable), float values permuted along */
        {.prim = "sort", .params = &last1, .n_in = 3,
         .in = {RC_AVAL(OLY_INT32, 2, 6), RC_F64(2, 6), RC_F64(2, 6)},
         .lo = {-2, 0, 0}, .hi = {2, 0, 0},},
        {.prim = "sort", .params = &mid2, .n_in = 3,
         .in = {RC_AVAL(OLY_INT8, 2, 5, 3), RC_F64(2, 5, 3), RC_F64(2, 5, 3)},
         .lo = {-1, 0, 0}, .hi = {1, 0, 0},},
        {.prim = "sort", .params = &last1, .n_in = 1, .in = {RC_AVAL(OLY_COMPLEX128, 5)}},
        {.prim = "sort", .params = &last1, .n_in = 2, .in = {RC_F32(6), RC_F32(6)}},
        {.prim = "top_k", .params = &k2, .n_in = 1, .in = {RC_F64(3, 5)}},
        {.prim = "top_k", .params = &k5, .n_in = 1, .in = {RC_F64(5)}},
        {.prim = "top_k", .params = &k2, .n_in = 1, .in = {RC_F64(2, 3, 4)}},
        {.prim = "top_k", .params = &k2, .n_in = 1, .in = {RC_AVAL(OLY_INT32, 3, 4)}},
    };
    /* No case marks inputs `linear`: the sorted keys are outputs too, and
     * they are not linear in the values. The transpose rule runs in the
     * linearize + transpose check (the JVP's tangent sort) and below. */
    for (int i = 0; i < OLY_ARRAY_LEN(cases); i++)
        if (!rc_check_all(&cases[i])) fprintf(stderr, "    sort_rules case %d failed\n", i);
}

/* sort's transpose rule directly: (keys, values) -> sorted values is linear
 * in the values with the keys as residuals (the dot-product test). */
TEST(sort_transpose_values_by_keys)
{
    const oly_aval avals[][2] = {{RC_F64(9), RC_F64(9)},
                                 {RC_AVAL(OLY_INT32, 4, 3), RC_AVAL(OLY_COMPLEX128, 4, 3)}};
    const int64_t dims[] = {0, 0};
    for (int c = 0; c < 2; c++) {
        oly_builder *b = NULL;
        CHECK_OK(oly_builder_new(&b));
        oly_var *v[2], *out[2];
        for (int i = 0; i < 2; i++) CHECK_OK(oly_builder_add_input(b, &avals[c][i], &v[i]));
        oly_atom in[2] = {oly_atom_var(v[0]), oly_atom_var(v[1])};
        oly_params_sort p = sortp(dims[c], 1);
        int n_out = 0;
        CHECK_OK(oly_builder_append(b, &oly__prim_sort, in, 2, &p, NULL, 0, out, 2, &n_out));
        oly_atom o = oly_atom_var(out[1]);
        oly_program *prog = NULL;
        CHECK_OK(oly_builder_finish(b, &o, 1, &prog));
        oly_builder_free(b);
        if (prog) CHECK(rc_check_linear_program("sort values by keys", prog, 1));
        oly_program_release(prog);
    }
}

/* The transpose rule refuses a key operand marked linear, by name. */
TEST(sort_transpose_of_a_key_is_an_error)
{
    oly_aval a = tu_aval(OLY_FLOAT64, 1, D(3));
    oly_params_sort p = sortp(0, 1);
    oly_program *prog = NULL;
    CHECK_OK(oly_program_of_eqn(&oly__prim_sort, &p, &a, 1, NULL, 0, &prog));
    if (!prog) return;
    oly_builder *tb = NULL;
    CHECK_OK(oly_builder_new(&tb));
    oly_var *c = NULL;
    CHECK_OK(oly_builder_add_input(tb, &a, &c));
    oly_transpose_ctx tc = {.b = tb};
    bool lin[1] = {true}, ctnz[1] = {true}, cinz[1] = {false};
    oly_atom ct = oly_atom_var(c), in[1] = {ct}, cin[1];
    oly_status s = oly__prim_sort.transpose(&tc, &prog->eqn[0], in, lin, &ct, ctnz, cin, cinz);
    CHECK_EQ(s, OLY_ERR_UNSUPPORTED);
    CHECK(strstr(oly_last_error(), "key operand 0") != NULL);
    oly_builder_free(tb);
    oly_program_release(prog);
}

/* y sorted (NaNs last, -0.0 == 0.0) and the carried iota increasing within ties. */
static void cmp_check_sorted(const oly_array *y, const oly_array *iota, int n)
{
    for (int i = 1; i < n; i++) {
        double a = tu_get(y, i - 1), b = tu_get(y, i);
        bool na = a != a, nb = b != b;
        bool tie = (na && nb) || a == b;
        if ((!na && !nb && a > b) || (na && !nb))
            CHECK_FAIL_("element %d (%g) sorts after element %d (%g)", i - 1, a, i, b);
        else if (tie && tu_get(iota, i - 1) > tu_get(iota, i))
            CHECK_FAIL_("ties at %d, %d lost their input order", i - 1, i);
        if (oly_test_failed) return;
    }
}

/* Lines of RADIX_MIN (256) elements or more take a radix path: for every
 * non-complex dtype, a long line with many ties (and NaNs, -0.0 for floats)
 * comes out ordered by the merge path's comparator, with an iota carried
 * along that increases within each run of ties (stability). */
TEST(sort_radix_path_every_dtype)
{
    enum { N = 1000 };
    double v[N], io[N];
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        oly_dtype dt = (oly_dtype)t;
        if (oly_dtype_is_complex(dt)) continue;
        uint64_t s = 12345;
        for (int i = 0; i < N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)(s >> 33) % 23 - 11; /* ties: 23 values */
            v[i] = oly_dtype_is_bool(dt) ? (r > 0) : oly_dtype_is_unsigned_int(dt) ? r + 11 : r;
            if (oly_dtype_is_float(dt) && i % 97 == 0) v[i] = NAN;
            if (oly_dtype_is_float(dt) && i % 89 == 0) v[i] = -0.0;
            io[i] = i;
        }
        oly_array *in[2] = {tu_array(dt, 1, D(N), v), tu_array(OLY_INT32, 1, D(N), io)};
        oly_params_sort p = sortp(0, 1);
        oly_array *y[4] = {0};
        if (run(&oly__prim_sort, &p, in, 2, y)) {
            cmp_check_sorted(y[0], y[1], N);
            /* alone, the operand takes the value-carrying path: the same bytes */
            oly_array *z[4] = {0};
            if (run(&oly__prim_sort, &p, in, 1, z))
                CHECK(memcmp(oly_array_data(z[0]), oly_array_data(y[0]),
                             N * oly_dtype_size(dt)) == 0);
            release_n(z, 1);
        }
        if (oly_test_failed) fprintf(stderr, "    dtype %s\n", oly_dtype_name(dt));
        release_n(in, 2);
        release_n(y, 2);
    }
}

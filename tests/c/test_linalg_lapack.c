/* test_linalg_lapack.c — the matrix factorisation rows (src/prims/lapack.c,
 * src/cpu/lapack.c): every row's kernel for every dtype its shape rule
 * accepts (test_rows.c stops at dot_general: these need matrices), values on
 * small hand-computed cases and through identities (l l^H = a, q r = a,
 * u s vh = a, a v = v w) in every dtype, batches, NaNs where the
 * factorisation fails, the shape rules' errors, and each row's batch / jvp /
 * transpose rules through rulecheck. */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include "trans/trans.h"

#include <complex.h>
#include <math.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})

static const oly_dtype LAPACK_DTYPES[] = {OLY_FLOAT32, OLY_FLOAT64, OLY_COMPLEX64, OLY_COMPLEX128};

static double tol_of(oly_dtype t)
{
    return t == OLY_FLOAT32 || t == OLY_COMPLEX64 ? 1e-5 : 1e-12;
}

/* Element i as a complex double. */
static double complex cget(const oly_array *a, int64_t i)
{
    const oly_aval *av = oly_array_aval(a);
    oly_scalar s = oly_scalar_load(av->dtype, (const char *)oly_array_data(a) +
                                                  (size_t)i * oly_dtype_size(av->dtype));
    if (oly_dtype_is_complex(av->dtype)) return s.v.c[0] + I * s.v.c[1];
    if (oly_dtype_is_float(av->dtype)) return s.v.f;
    return (double)s.v.i;
}

/* A new array from complex values (the imaginary parts dropped for a real t). */
static oly_array *carray(oly_dtype t, int rank, const int64_t *dims, const double complex *v)
{
    oly_array *a = tu_array(t, rank, dims, NULL);
    if (!a) return NULL;
    int64_t n = oly_aval_size(oly_array_aval(a));
    size_t es = oly_dtype_size(t);
    for (int64_t i = 0; i < n; i++) {
        oly_scalar s;
        memset(&s, 0, sizeof s);
        s.dtype = OLY_COMPLEX128;
        s.v.c[0] = creal(v[i]);
        s.v.c[1] = cimag(v[i]);
        oly_scalar_store(&s, t, (char *)oly_array_mutable_data(a) + (size_t)i * es);
    }
    return a;
}

static bool run(const oly_prim *p, const void *params, oly_array **in, int n_in, oly_array **out,
                int *n_out)
{
    oly_status s = tu_run_kernel(p, params, in, n_in, out, 4, n_out);
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

/* max |x[b] @ y[b] - want[b]| over a batch of matrices: x [B, m, k], y [B, k, n]
 * (dense complex copies), want [B, m, n]. */
static double mm_err(const double complex *x, const double complex *y, const double complex *want,
                     int64_t B, int64_t m, int64_t k, int64_t n)
{
    double err = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double complex acc = 0;
                for (int64_t l = 0; l < k; l++) acc += x[(b * m + i) * k + l] * y[(b * k + l) * n + j];
                double e = cabs(acc - want[(b * m + i) * n + j]);
                if (e > err) err = e;
            }
    return err;
}

/* A dense complex copy of a (caller frees). */
static double complex *ccopy(const oly_array *a)
{
    int64_t n = oly_aval_size(oly_array_aval(a));
    double complex *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) v[i] = cget(a, i);
    return v;
}

/* A deterministic well-scaled test matrix batch [B, m, n]: entries in [-1, 1]
 * (complex dtypes get imaginary parts), plus shift on the diagonal. */
static void fill_matrix(double complex *v, int64_t B, int64_t m, int64_t n, bool cplx, double shift,
                        unsigned seed)
{
    uint64_t st = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (int64_t i = 0; i < B * m * n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        double re = (double)(st >> 11) * 0x1.0p-53 * 2 - 1;
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        double im = cplx ? (double)(st >> 11) * 0x1.0p-53 * 2 - 1 : 0;
        v[i] = re + I * im;
        int64_t r = (i / n) % m, c = i % n;
        if (r == c) v[i] += shift;
    }
}

/* ---------------------------------------------------------------- every dtype */

/* Each row's shape rule accepts exactly float32/64 and complex64/128 (TYPE
 * otherwise), and the kernel runs for each on a batched matrix. */
TEST(lapack_rows_every_dtype)
{
    oly_params_triangular_solve ts = {.left_side = true, .lower = true};
    oly_params_qr qr = {.full_matrices = true};
    oly_params_eigh eh = {.lower = true, .sort_eigenvalues = true};
    oly_params_svd sv = {.full_matrices = false, .compute_uv = true};
    oly_params_eig eg = {.compute_left_eigenvectors = true, .compute_right_eigenvectors = true};
    const struct {
        const oly_prim *p;
        const void *params;
        int n_in;
    } rows[] = {{&oly__prim_cholesky, NULL, 1}, {&oly__prim_triangular_solve, &ts, 2},
                {&oly__prim_lu, NULL, 1},       {&oly__prim_qr, &qr, 1},
                {&oly__prim_eigh, &eh, 1},      {&oly__prim_svd, &sv, 1},
                {&oly__prim_eig, &eg, 1}};
    for (int r = 0; r < OLY_ARRAY_LEN(rows); r++) {
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
            oly_dtype dt = (oly_dtype)t;
            bool want = false;
            for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++) want |= LAPACK_DTYPES[k] == dt;
            double v[18];
            for (int i = 0; i < 18; i++) v[i] = (i % 9) % 4 == 0 ? 4 : 0.25 * (i % 3); /* diag 4 */
            oly_array *in[2] = {tu_array(dt, 3, D(2, 3, 3), v), tu_array(dt, 3, D(2, 3, 3), v)};
            oly_array *out[4] = {0};
            int n_out = 0;
            oly_status s = tu_run_kernel(rows[r].p, rows[r].params, in, rows[r].n_in, out, 4, &n_out);
            if (want && s != OLY_OK)
                CHECK_FAIL_("%s(%s): the kernel failed: %s", rows[r].p->name, oly_dtype_name(dt),
                            oly_last_error());
            if (!want && s != OLY_ERR_TYPE)
                CHECK_FAIL_("%s(%s): expected a TYPE error from the shape rule, got %s",
                            rows[r].p->name, oly_dtype_name(dt), oly_status_name(s));
            for (int k = 0; s == OLY_OK && k < n_out; k++) {
                int64_t n = oly_aval_size(oly_array_aval(out[k]));
                for (int64_t i = 0; i < n; i++) {
                    double complex z = cget(out[k], i);
                    if (!isfinite(creal(z)) || !isfinite(cimag(z))) {
                        CHECK_FAIL_("%s(%s): output %d element %lld is not finite",
                                    rows[r].p->name, oly_dtype_name(dt), k, (long long)i);
                        break;
                    }
                }
            }
            release_n(out, n_out);
            release_n(in, 2);
        }
    }
}

/* ---------------------------------------------------------------- values */

TEST(lapack_cholesky_values_and_nan)
{
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++) {
        oly_dtype t = LAPACK_DTYPES[k];
        /* [[4, 2], [2, 3]] = l l^T with l = [[2, 0], [1, sqrt 2]]; the second
         * matrix is not positive definite: NaNs; the upper triangle is not read */
        oly_array *x = tu_array(t, 3, D(2, 2, 2), V(4, 99, 2, 3, 1, 2, 2, 1)), *y[4] = {0};
        if (run(&oly__prim_cholesky, NULL, &x, 1, y, NULL)) {
            const double want[4] = {2, 0, 1, sqrt(2)};
            for (int i = 0; i < 4; i++) CHECK_NEAR(tu_get(y[0], i), want[i], 4 * tol_of(t));
            for (int i = 4; i < 8; i++) CHECK(isnan(tu_get(y[0], i)));
        }
        if (oly_test_failed) fprintf(stderr, "    dtype %s\n", oly_dtype_name(t));
        oly_array_release(x);
        release_n(y, 1);
    }
    /* complex Hermitian: a = l l^H, l = [[2, 0], [1 - i, 1]] */
    double complex a[4] = {4, 99, 2 - 2 * I, 3}, want[4] = {2, 0, 1 - I, 1};
    oly_array *x = carray(OLY_COMPLEX128, 2, D(2, 2), a), *y[4] = {0};
    if (run(&oly__prim_cholesky, NULL, &x, 1, y, NULL))
        for (int i = 0; i < 4; i++) CHECK(cabs(cget(y[0], i) - want[i]) < 1e-14);
    oly_array_release(x);
    release_n(y, 1);
}

TEST(lapack_triangular_solve_every_variant)
{
    /* every flag combination on a batch, checked by multiplying back in
     * complex double: op(a) x == b or x op(a) == b */
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++) {
        oly_dtype t = LAPACK_DTYPES[k];
        bool cplx = oly_dtype_is_complex(t);
        for (int f = 0; f < 32; f++) {
            oly_params_triangular_solve p = {.left_side = f & 1, .lower = f & 2,
                                             .transpose_a = f & 4, .conjugate_a = f & 8,
                                             .unit_diagonal = f & 16};
            int64_t B = 2, n = 4, m = p.left_side ? 4 : 3, c = p.left_side ? 3 : 4;
            double complex av[32], bv[24], opa[32];
            fill_matrix(av, B, n, n, cplx, 3, (unsigned)f);
            fill_matrix(bv, B, m, c, cplx, 0, (unsigned)f + 100);
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++) {
                        bool in_tri = p.lower ? j <= i : j >= i;
                        double complex e = in_tri ? av[(b * n + i) * n + j] : 0;
                        if (i == j && p.unit_diagonal) e = 1;
                        int64_t ii = p.transpose_a ? j : i, jj = p.transpose_a ? i : j;
                        opa[(b * n + ii) * n + jj] = p.conjugate_a ? conj(e) : e;
                    }
            oly_array *in[2] = {carray(t, 3, D(B, n, n), av), carray(t, 3, D(B, m, c), bv)};
            oly_array *y[4] = {0};
            if (run(&oly__prim_triangular_solve, &p, in, 2, y, NULL)) {
                double complex *x = ccopy(y[0]);
                double err = p.left_side ? mm_err(opa, x, bv, B, m, n, c)
                                         : mm_err(x, opa, bv, B, m, n, c);
                if (!(err < 1e3 * tol_of(t)))
                    CHECK_FAIL_("triangular_solve %s flags %d: residual %g", oly_dtype_name(t), f, err);
                free(x);
            }
            release_n(in, 2);
            release_n(y, 1);
        }
    }
}

TEST(lapack_lu_values)
{
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++) {
        oly_dtype t = LAPACK_DTYPES[k];
        /* scipy.linalg.lu_factor([[1, 2], [3, 4]]): lu = [[3, 4], [1/3, 2/3]],
         * pivots [1, 1]; permutation [1, 0]. The second matrix is singular:
         * no NaNs, a zero on u's diagonal. */
        oly_array *x = tu_array(t, 3, D(2, 2, 2), V(1, 2, 3, 4, 1, 2, 2, 4)), *y[4] = {0};
        if (run(&oly__prim_lu, NULL, &x, 1, y, NULL)) {
            CHECK(tu_allclose(y[0], V(3, 4, 1.0 / 3, 2.0 / 3, 2, 4, 0.5, 0), 8, tol_of(t), tol_of(t)));
            CHECK(tu_allclose(y[1], V(1, 1, 1, 1), 4, 0, 0));
            CHECK(tu_allclose(y[2], V(1, 0, 1, 0), 4, 0, 0));
            CHECK_EQ(oly_array_aval(y[1])->dtype, OLY_INT32);
        }
        oly_array_release(x);
        release_n(y, 3);
    }
    /* rectangular, both ways: a[perm] == l u */
    const int64_t shapes[2][2] = {{5, 3}, {3, 5}};
    for (int sidx = 0; sidx < 2; sidx++) {
        int64_t m = shapes[sidx][0], n = shapes[sidx][1], kk = m < n ? m : n;
        double complex av[15];
        fill_matrix(av, 1, m, n, true, 0, 7);
        oly_array *x = carray(OLY_COMPLEX128, 2, D(m, n), av), *y[4] = {0};
        if (run(&oly__prim_lu, NULL, &x, 1, y, NULL)) {
            double complex l[25] = {0}, u[25] = {0}, pa[15];
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double complex e = cget(y[0], i * n + j);
                    if (j < i && j < kk) l[i * kk + j] = e;
                    if (j >= i && i < kk) u[i * n + j] = e;
                    pa[i * n + j] = av[(int64_t)creal(cget(y[2], i)) * n + j];
                }
            for (int64_t i = 0; i < kk; i++) l[i * kk + i] = 1;
            CHECK(mm_err(l, u, pa, 1, m, kk, n) < 1e-13);
        }
        oly_array_release(x);
        release_n(y, 3);
    }
}

/* q r == a, q^H q == I, r upper triangular: every dtype, reduced and full,
 * tall and wide, batched. */
TEST(lapack_qr_identities)
{
    const int64_t shapes[3][2] = {{5, 3}, {3, 5}, {4, 4}};
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++)
        for (int sidx = 0; sidx < 3; sidx++)
            for (int full = 0; full < 2; full++) {
                oly_dtype t = LAPACK_DTYPES[k];
                int64_t B = 2, m = shapes[sidx][0], n = shapes[sidx][1], kk = m < n ? m : n;
                int64_t qc = full ? m : kk;
                double complex av[40];
                fill_matrix(av, B, m, n, oly_dtype_is_complex(t), 0, (unsigned)(sidx * 2 + full));
                oly_params_qr p = {.full_matrices = full};
                oly_array *x = carray(t, 3, D(B, m, n), av), *y[4] = {0};
                if (run(&oly__prim_qr, &p, &x, 1, y, NULL)) {
                    CHECK_EQ(oly_array_aval(y[0])->dims[2], qc);
                    CHECK_EQ(oly_array_aval(y[1])->dims[1], qc);
                    double complex *q = ccopy(y[0]), *r = ccopy(y[1]);
                    double err = mm_err(q, r, av, B, m, qc, n);
                    if (!(err < 100 * tol_of(t)))
                        CHECK_FAIL_("qr %s %lldx%lld full=%d: |q r - a| = %g", oly_dtype_name(t),
                                    (long long)m, (long long)n, full, err);
                    for (int64_t b = 0; b < B; b++)
                        for (int64_t i = 0; i < qc; i++)
                            for (int64_t j = 0; j < n; j++)
                                if (j < i && r[(b * qc + i) * n + j] != 0)
                                    CHECK_FAIL_("qr: r[%lld,%lld] below the diagonal", (long long)i,
                                                (long long)j);
                    for (int64_t b = 0; b < B; b++)
                        for (int64_t i = 0; i < qc; i++)
                            for (int64_t j = 0; j < qc; j++) {
                                double complex acc = 0;
                                for (int64_t l = 0; l < m; l++)
                                    acc += conj(q[(b * m + l) * qc + i]) * q[(b * m + l) * qc + j];
                                if (cabs(acc - (i == j)) > 100 * tol_of(t))
                                    CHECK_FAIL_("qr %s: q^H q [%lld,%lld] = %g", oly_dtype_name(t),
                                                (long long)i, (long long)j, cabs(acc));
                            }
                    free(q);
                    free(r);
                }
                oly_array_release(x);
                release_n(y, 2);
            }
}

/* a v == v diag(w), w ascending and real, from either triangle. */
TEST(lapack_eigh_identities)
{
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++)
        for (int lower = 0; lower < 2; lower++) {
            oly_dtype t = LAPACK_DTYPES[k];
            int64_t B = 2, n = 4;
            double complex av[32], herm[32], junk[32];
            fill_matrix(av, B, n, n, oly_dtype_is_complex(t), 0, 3);
            fill_matrix(junk, B, n, n, true, 0, 4);
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++) {
                        int64_t lo = i > j ? i : j, hi = i > j ? j : i; /* (lo, hi): lower */
                        double complex e = lower ? av[(b * n + lo) * n + hi] : av[(b * n + hi) * n + lo];
                        herm[(b * n + i) * n + j] = i == j ? creal(e) : (lower == (i > j)) ? e : conj(e);
                        /* the triangle not read holds junk */
                        bool read = i == j || (lower ? i > j : i < j);
                        av[(b * n + i) * n + j] = read ? herm[(b * n + i) * n + j]
                                                       : junk[(b * n + i) * n + j] * 9;
                        if (!oly_dtype_is_complex(t)) av[(b * n + i) * n + j] = creal(av[(b * n + i) * n + j]);
                    }
            oly_params_eigh p = {.lower = lower, .sort_eigenvalues = true};
            oly_array *x = carray(t, 3, D(B, n, n), av), *y[4] = {0};
            if (run(&oly__prim_eigh, &p, &x, 1, y, NULL)) {
                CHECK_EQ(oly_array_aval(y[1])->dtype, oly_dtype_is_complex(t)
                                                          ? (t == OLY_COMPLEX64 ? OLY_FLOAT32 : OLY_FLOAT64)
                                                          : t);
                double complex *v = ccopy(y[0]), vw[32];
                for (int64_t b = 0; b < B; b++)
                    for (int64_t i = 0; i < n; i++) {
                        if (i > 0 && !(tu_get(y[1], b * n + i - 1) <= tu_get(y[1], b * n + i)))
                            CHECK_FAIL_("eigh: eigenvalues not ascending at %lld", (long long)i);
                        for (int64_t j = 0; j < n; j++)
                            vw[(b * n + i) * n + j] = v[(b * n + i) * n + j] * tu_get(y[1], b * n + j);
                    }
                double err = mm_err(herm, v, vw, B, n, n, n);
                if (!(err < 1000 * tol_of(t)))
                    CHECK_FAIL_("eigh %s lower=%d: |a v - v w| = %g", oly_dtype_name(t), lower, err);
                free(v);
            }
            oly_array_release(x);
            release_n(y, 2);
        }
}

/* u diag(s) vh == a, s descending; s alone without compute_uv. */
TEST(lapack_svd_identities)
{
    const int64_t shapes[3][2] = {{5, 3}, {3, 5}, {4, 4}};
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++)
        for (int sidx = 0; sidx < 3; sidx++)
            for (int full = 0; full < 2; full++) {
                oly_dtype t = LAPACK_DTYPES[k];
                int64_t B = 2, m = shapes[sidx][0], n = shapes[sidx][1], kk = m < n ? m : n;
                int64_t uc = full ? m : kk, vr = full ? n : kk;
                double complex av[40];
                fill_matrix(av, B, m, n, oly_dtype_is_complex(t), 0, (unsigned)(9 + sidx));
                oly_params_svd p = {.full_matrices = full, .compute_uv = true};
                oly_array *x = carray(t, 3, D(B, m, n), av), *y[4] = {0};
                int n_out = 0;
                if (run(&oly__prim_svd, &p, &x, 1, y, &n_out)) {
                    CHECK_EQ(n_out, 3);
                    double complex *u = ccopy(y[1]), *vh = ccopy(y[2]), us[40], vk[40];
                    for (int64_t b = 0; b < B; b++) {
                        for (int64_t i = 0; i < m; i++)
                            for (int64_t j = 0; j < kk; j++)
                                us[(b * m + i) * kk + j] = u[(b * m + i) * uc + j] * tu_get(y[0], b * kk + j);
                        for (int64_t i = 0; i < kk; i++)
                            for (int64_t j = 0; j < n; j++) vk[(b * kk + i) * n + j] = vh[(b * vr + i) * n + j];
                        for (int64_t i = 1; i < kk; i++)
                            if (!(tu_get(y[0], b * kk + i - 1) >= tu_get(y[0], b * kk + i)))
                                CHECK_FAIL_("svd: singular values not descending at %lld", (long long)i);
                    }
                    double err = mm_err(us, vk, av, B, m, kk, n);
                    if (!(err < 100 * tol_of(t)))
                        CHECK_FAIL_("svd %s %lldx%lld full=%d: |u s vh - a| = %g", oly_dtype_name(t),
                                    (long long)m, (long long)n, full, err);
                    free(u);
                    free(vh);
                }
                release_n(y, n_out);
                oly_params_svd ps = {.compute_uv = false};
                if (run(&oly__prim_svd, &ps, &x, 1, y, &n_out)) CHECK_EQ(n_out, 1);
                release_n(y, n_out);
                oly_array_release(x);
            }
    /* [[0, 2], [3, 0]]: singular values 3 and 2 */
    oly_array *x = tu_array(OLY_FLOAT64, 2, D(2, 2), V(0, 2, 3, 0)), *y[4] = {0};
    oly_params_svd ps = {.compute_uv = false};
    if (run(&oly__prim_svd, &ps, &x, 1, y, NULL)) CHECK(tu_allclose(y[0], V(3, 2), 2, 1e-15, 0));
    oly_array_release(x);
    release_n(y, 1);
}

/* a vr == vr diag(w), vl^H a == diag(w) vl^H; complex pairs from real input. */
TEST(lapack_eig_identities)
{
    for (int k = 0; k < OLY_ARRAY_LEN(LAPACK_DTYPES); k++) {
        oly_dtype t = LAPACK_DTYPES[k];
        int64_t B = 2, n = 4;
        double complex av[32];
        fill_matrix(av, B, n, n, oly_dtype_is_complex(t), 0, 5);
        oly_params_eig p = {.compute_left_eigenvectors = true, .compute_right_eigenvectors = true};
        oly_array *x = carray(t, 3, D(B, n, n), av), *y[4] = {0};
        if (run(&oly__prim_eig, &p, &x, 1, y, NULL)) {
            CHECK(oly_dtype_is_complex(oly_array_aval(y[0])->dtype));
            double complex *w = ccopy(y[0]), *vl = ccopy(y[1]), *vr = ccopy(y[2]);
            double complex vw[32], vlh[32], wvlh[32];
            for (int64_t b = 0; b < B; b++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++) {
                        vw[(b * n + i) * n + j] = vr[(b * n + i) * n + j] * w[b * n + j];
                        vlh[(b * n + i) * n + j] = conj(vl[(b * n + j) * n + i]);
                        wvlh[(b * n + i) * n + j] = w[b * n + i] * conj(vl[(b * n + j) * n + i]);
                    }
            double e1 = mm_err(av, vr, vw, B, n, n, n), e2 = mm_err(vlh, av, wvlh, B, n, n, n);
            if (!(e1 < 1000 * tol_of(t) && e2 < 1000 * tol_of(t)))
                CHECK_FAIL_("eig %s: |a vr - vr w| = %g, |vl^H a - w vl^H| = %g",
                            oly_dtype_name(t), e1, e2);
            free(w);
            free(vl);
            free(vr);
        }
        oly_array_release(x);
        release_n(y, 3);
    }
    /* a rotation: eigenvalues +-i; only w without eigenvectors */
    oly_params_eig none = {0};
    oly_array *x = tu_array(OLY_FLOAT64, 2, D(2, 2), V(0, -1, 1, 0)), *y[4] = {0};
    int n_out = 0;
    if (run(&oly__prim_eig, &none, &x, 1, y, &n_out)) {
        CHECK_EQ(n_out, 1);
        CHECK(cabs(cget(y[0], 0) - I) < 1e-15 && cabs(cget(y[0], 1) + I) < 1e-15);
    }
    oly_array_release(x);
    release_n(y, n_out);
}

/* Non-finite input makes the iterative factorisations fail: NaNs, no crash,
 * and only for the failing matrix of the batch. */
TEST(lapack_failure_gives_nan)
{
    oly_array *x = tu_array(OLY_FLOAT64, 3, D(2, 2, 2), V(1, 0, 0, 2, NAN, 1, 1, 1)), *y[4] = {0};
    oly_params_svd ps = {.compute_uv = true};
    int n_out = 0;
    if (run(&oly__prim_svd, &ps, &x, 1, y, &n_out)) {
        CHECK(!isnan(tu_get(y[0], 0)) && !isnan(tu_get(y[0], 1)));
        CHECK(isnan(tu_get(y[0], 2)) && isnan(tu_get(y[1], 4)) && isnan(tu_get(y[2], 7)));
    }
    release_n(y, n_out);
    oly_params_eigh pe = {.lower = true};
    if (run(&oly__prim_eigh, &pe, &x, 1, y, &n_out)) CHECK(isnan(tu_get(y[1], 2)));
    release_n(y, n_out);
    oly_params_eig pg = {.compute_right_eigenvectors = true};
    if (run(&oly__prim_eig, &pg, &x, 1, y, &n_out)) {
        CHECK(!isnan(tu_get(y[0], 0)));
        CHECK(isnan(tu_get(y[0], 2)) && isnan(tu_get(y[1], 4)));
    }
    release_n(y, n_out);
    oly_array_release(x);
}

TEST(lapack_empty_matrices)
{
    oly_array *x = tu_array(OLY_FLOAT64, 3, D(2, 0, 0), NULL), *y[4] = {0};
    int n_out = 0;
    if (run(&oly__prim_cholesky, NULL, &x, 1, y, &n_out)) CHECK_EQ(oly_aval_size(oly_array_aval(y[0])), 0);
    release_n(y, n_out);
    oly_params_eigh pe = {.lower = true};
    if (run(&oly__prim_eigh, &pe, &x, 1, y, &n_out)) CHECK_EQ(oly_array_aval(y[1])->dims[1], 0);
    release_n(y, n_out);
    oly_array_release(x);
    /* 3 x 0: lu's permutation is the identity; full qr / svd give identities */
    x = tu_array(OLY_FLOAT64, 2, D(3, 0), NULL);
    if (run(&oly__prim_lu, NULL, &x, 1, y, &n_out)) CHECK(tu_allclose(y[2], V(0, 1, 2), 3, 0, 0));
    release_n(y, n_out);
    oly_params_qr pq = {.full_matrices = true};
    if (run(&oly__prim_qr, &pq, &x, 1, y, &n_out))
        CHECK(tu_allclose(y[0], V(1, 0, 0, 0, 1, 0, 0, 0, 1), 9, 0, 1e-15));
    release_n(y, n_out);
    oly_params_svd ps = {.full_matrices = true, .compute_uv = true};
    if (run(&oly__prim_svd, &ps, &x, 1, y, &n_out)) {
        CHECK_EQ(oly_aval_size(oly_array_aval(y[0])), 0);
        CHECK(tu_allclose(y[1], V(1, 0, 0, 0, 1, 0, 0, 0, 1), 9, 0, 0));
    }
    release_n(y, n_out);
    oly_array_release(x);
}

TEST(lapack_shape_errors)
{
    oly_array *v = tu_array(OLY_FLOAT64, 1, D(3), NULL), *r = tu_array(OLY_FLOAT64, 2, D(2, 3), NULL);
    oly_array *i = tu_array(OLY_INT32, 2, D(3, 3), NULL), *sq = tu_array(OLY_FLOAT64, 2, D(3, 3), NULL);
    oly_array *sqf = tu_array(OLY_FLOAT32, 2, D(3, 3), NULL), *b3 = tu_array(OLY_FLOAT64, 3, D(2, 3, 3), NULL);
    oly_array *y[4] = {0};
    CHECK_ERR(tu_run_kernel(&oly__prim_cholesky, NULL, &v, 1, y, 4, NULL), OLY_ERR_SHAPE, "rank >= 2");
    CHECK_ERR(tu_run_kernel(&oly__prim_cholesky, NULL, &r, 1, y, 4, NULL), OLY_ERR_SHAPE, "square");
    CHECK_ERR(tu_run_kernel(&oly__prim_lu, NULL, &i, 1, y, 4, NULL), OLY_ERR_TYPE, "float32");
    oly_params_eigh pe = {.lower = true};
    CHECK_ERR(tu_run_kernel(&oly__prim_eigh, &pe, &r, 1, y, 4, NULL), OLY_ERR_SHAPE, "square");
    oly_params_triangular_solve ts = {.left_side = true};
    oly_array *in[2] = {sq, r};
    CHECK_ERR(tu_run_kernel(&oly__prim_triangular_solve, &ts, in, 2, y, 4, NULL), OLY_ERR_SHAPE,
              "does not fit");
    in[1] = sqf;
    CHECK_ERR(tu_run_kernel(&oly__prim_triangular_solve, &ts, in, 2, y, 4, NULL), OLY_ERR_TYPE,
              "equal dtypes");
    in[1] = b3;
    CHECK_ERR(tu_run_kernel(&oly__prim_triangular_solve, &ts, in, 2, y, 4, NULL), OLY_ERR_SHAPE,
              "batch dims");
    oly_array *all[6] = {v, r, i, sq, sqf, b3};
    release_n(all, 6);
}

/* ---------------------------------------------------------------- rules */

TEST(lapack_rules_triangular_solve)
{
    for (int f = 0; f < 32; f++) {
        oly_params_triangular_solve p = {.left_side = f & 1, .lower = f & 2, .transpose_a = f & 4,
                                         .conjugate_a = f & 8, .unit_diagonal = f & 16};
        /* b tall for one side, wide for the other: both orders of the jvp */
        oly_dtype t = f & 8 ? OLY_COMPLEX128 : OLY_FLOAT64;
        oly_aval b = p.left_side ? RC_AVAL(t, (f & 4) ? 3 : 4, 3 + (f & 4 ? 1 : 0))
                                 : RC_AVAL(t, 3 + (f & 4 ? 1 : 0), (f & 4) ? 3 : 4);
        int64_t k = p.left_side ? b.dims[0] : b.dims[1];
        rc_case c = {.prim = "triangular_solve", .params = &p, .n_in = 2,
                     .in = {RC_AVAL(t, k, k), b}, .lo = {1, -2}, .hi = {2, 2},
                     .linear = {false, true}};
        rc_check_all(&c);
    }
    /* batched operands */
    oly_params_triangular_solve p = {.left_side = true, .lower = true};
    rc_case c = {.prim = "triangular_solve", .params = &p, .n_in = 2,
                 .in = {RC_F64(2, 3, 3), RC_F64(2, 3, 2)}, .lo = {1, -2}, .hi = {2, 2},
                 .linear = {false, true}};
    rc_check_all(&c);
}

/* cholesky needs a positive definite operand: the rules are checked through
 * pjit of x -> cholesky(x x^H + 3 I), whose vmap, jvp and transpose reach
 * cholesky's own. */
static oly_program *spd_program(oly_dtype t, const oly_prim *p, const void *params, int n)
{
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = RC_AVAL(t, n, n);
    oly_var *x = NULL;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xa = oly_atom_var(x), xh, s, e, outs[4];
    oly_params_transpose tp = {.permutation = {.n = 2, .v = {1, 0}}};
    oly_params_dot_general dg = {.lhs_contracting = {.n = 1, .v = {1}},
                                 .rhs_contracting = {.n = 1, .v = {0}}};
    oly_params_iota io = {.dtype = OLY_INT32, .shape = {.n = 2, .v = {n, n}}, .dimension = 0};
    oly_params_iota io1 = io;
    io1.dimension = 1;
    oly_atom i0, i1, m;
    CHECK_OK(oly__emit(b, &oly__prim_transpose, &xa, 1, &tp, NULL, 0, &xh));
    if (oly_dtype_is_complex(t)) CHECK_OK(oly__emit_un(b, &oly__prim_conj, xh, &xh));
    CHECK_OK(oly__emit_dot_general(b, xa, xh, &dg, &s));
    CHECK_OK(oly__emit(b, &oly__prim_iota, NULL, 0, &io, NULL, 0, &i0));
    CHECK_OK(oly__emit(b, &oly__prim_iota, NULL, 0, &io1, NULL, 0, &i1));
    CHECK_OK(oly__emit_bin(b, &oly__prim_eq, i0, i1, &m));
    CHECK_OK(oly__emit_convert(b, m, t, &e));
    oly_scalar three = {.dtype = t};
    if (oly_dtype_is_complex(t)) three.v.c[0] = 3;
    else three.v.f = 3;
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, e, oly_atom_lit(three), &e));
    CHECK_OK(oly__emit_bin(b, &oly__prim_add, s, e, &s));
    CHECK_OK(oly__emit(b, p, &s, 1, params, NULL, 0, outs));
    int n_out = oly_prim_num_outputs(p, params, 1);
    CHECK_OK(oly_builder_finish(b, outs, n_out, &prog));
    oly_builder_free(b);
    return prog;
}

TEST(lapack_rules_cholesky)
{
    const oly_dtype ts[] = {OLY_FLOAT64, OLY_COMPLEX128, OLY_FLOAT32};
    for (int k = 0; k < OLY_ARRAY_LEN(ts); k++) {
        oly_program *prog = spd_program(ts[k], &oly__prim_cholesky, NULL, 3);
        if (!prog) continue;
        oly_params_call pc = {.name = "spd_cholesky", .n_out = 1};
        rc_case c = {.prim = "pjit", .params = &pc, .n_in = 1, .in = {RC_AVAL(ts[k], 3, 3)},
                     .subs = &prog, .n_sub = 1};
        rc_check_all(&c);
        oly_program_release(prog);
    }
    /* the row alone: vmap of a batch that mixes a positive definite matrix and
     * NaN results, and the jvp of a non-positive-definite operand (NaNs) */
    rc_case c = {.prim = "cholesky", .n_in = 1, .in = {RC_F64(2, 3, 3)}, .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE};
    rc_check_all(&c);
}

TEST(lapack_rules_lu)
{
    const oly_aval shapes[] = {RC_F64(3, 3), RC_F64(4, 3), RC_F64(3, 4), RC_AVAL(OLY_COMPLEX128, 3, 3),
                               RC_F64(2, 3, 3)};
    for (int k = 0; k < OLY_ARRAY_LEN(shapes); k++) {
        rc_case c = {.prim = "lu", .n_in = 1, .in = {shapes[k]}};
        rc_check_all(&c);
    }
}

TEST(lapack_rules_qr)
{
    oly_params_qr red = {.full_matrices = false}, full = {.full_matrices = true};
    const struct {
        oly_aval a;
        const oly_params_qr *p;
        unsigned skip;
    } cases[] = {{RC_F64(4, 3), &red, 0},
                 {RC_F64(3, 3), &full, 0},
                 {RC_AVAL(OLY_COMPLEX128, 4, 3), &red, 0},
                 {RC_F64(2, 4, 3), &red, 0},
                 {RC_F64(3, 4), &red, RC_SKIP_JVP | RC_SKIP_TRANSPOSE}, /* no derivative: m < n */
                 {RC_F64(4, 3), &full, RC_SKIP_JVP | RC_SKIP_TRANSPOSE}};
    for (int k = 0; k < OLY_ARRAY_LEN(cases); k++) {
        rc_case c = {.prim = "qr", .params = cases[k].p, .n_in = 1, .in = {cases[k].a},
                     .skip = cases[k].skip};
        rc_check_all(&c);
    }
}

/* Complex eigenvectors and singular vectors are defined up to a phase per
 * column that LAPACK picks its own way, so finite differences of them differ
 * from the JVP's (whose V^H V' has a zero diagonal). Their rules are checked
 * through pjit of phase-free functions: eigh -> (V diag(c) V^H, w) and svd ->
 * (s, U diag(c) U^H, U diag(c) Vh), c = (1, 2, ...). */
static oly_atom cweights(oly_builder *b, oly_dtype t, int64_t rows, int64_t k)
{
    oly_params_iota io = {.dtype = OLY_INT32, .shape = {.n = 2, .v = {rows, k}}, .dimension = 1};
    oly_atom c;
    CHECK_OK(oly__emit(b, &oly__prim_iota, NULL, 0, &io, NULL, 0, &c));
    CHECK_OK(oly__emit_convert(b, c, t, &c));
    oly_scalar one = {.dtype = t};
    one.v.c[0] = 1;
    if (!oly_dtype_is_complex(t)) one.v.f = 1;
    CHECK_OK(oly__emit_bin(b, &oly__prim_add, c, oly_atom_lit(one), &c));
    return c;
}

/* x diag(c) y^H for x [m, k], y [n, k] (both conj'ed transposes are taken as given). */
static oly_atom weighted_outer(oly_builder *b, oly_dtype t, oly_atom x, oly_atom yh)
{
    oly_aval xa = oly__atom_aval(&x);
    oly_atom xc, r;
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, x, cweights(b, t, xa.dims[0], xa.dims[1]), &xc));
    oly_params_dot_general dg = {.lhs_contracting = {.n = 1, .v = {1}},
                                 .rhs_contracting = {.n = 1, .v = {0}}};
    CHECK_OK(oly__emit_dot_general(b, xc, yh, &dg, &r));
    return r;
}

static oly_atom adjoint(oly_builder *b, oly_atom x)
{
    oly_params_transpose tp = {.permutation = {.n = 2, .v = {1, 0}}};
    oly_atom r;
    CHECK_OK(oly__emit(b, &oly__prim_transpose, &x, 1, &tp, NULL, 0, &r));
    CHECK_OK(oly__emit_un(b, &oly__prim_conj, r, &r));
    return r;
}

static oly_program *phase_free_program(const oly_prim *p, const void *params, const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x = NULL;
    CHECK_OK(oly_builder_add_input(b, a, &x));
    oly_atom xa = oly_atom_var(x), r[3], outs[3];
    CHECK_OK(oly__emit(b, p, &xa, 1, params, NULL, 0, r));
    int n = 0;
    if (p == &oly__prim_eigh) {
        outs[n++] = weighted_outer(b, a->dtype, r[0], adjoint(b, r[0]));
        outs[n++] = r[1];
    } else {
        int64_t m = a->dims[0], k = a->dims[0] < a->dims[1] ? a->dims[0] : a->dims[1];
        oly_atom u = r[1], vh = r[2];
        oly_params_slice sl = {.start_indices = {.n = 2}, .limit_indices = {.n = 2, .v = {m, k}},
                               .strides = {.n = 2, .v = {1, 1}}};
        CHECK_OK(oly__emit(b, &oly__prim_slice, &u, 1, &sl, NULL, 0, &u)); /* full: first k */
        oly_params_slice sv = {.start_indices = {.n = 2}, .limit_indices = {.n = 2, .v = {k, a->dims[1]}},
                               .strides = {.n = 2, .v = {1, 1}}};
        CHECK_OK(oly__emit(b, &oly__prim_slice, &vh, 1, &sv, NULL, 0, &vh));
        outs[n++] = r[0];
        outs[n++] = weighted_outer(b, a->dtype, u, adjoint(b, u));
        outs[n++] = weighted_outer(b, a->dtype, u, vh);
    }
    CHECK_OK(oly_builder_finish(b, outs, n, &prog));
    oly_builder_free(b);
    return prog;
}

static void check_phase_free(const oly_prim *p, const void *params, oly_aval a)
{
    oly_program *prog = phase_free_program(p, params, &a);
    if (!prog) return;
    oly_params_call pc = {.name = p->name, .n_out = oly_program_num_outputs(prog)};
    rc_case c = {.prim = "pjit", .params = &pc, .n_in = 1, .in = {a}, .subs = &prog, .n_sub = 1};
    rc_check_all(&c);
    oly_program_release(prog);
}

TEST(lapack_rules_eigh)
{
    for (int lower = 0; lower < 2; lower++) {
        oly_params_eigh p = {.lower = lower, .sort_eigenvalues = true};
        const oly_aval shapes[] = {RC_F64(3, 3), RC_F64(2, 4, 4), RC_AVAL(OLY_COMPLEX128, 3, 3)};
        for (int k = 0; k < OLY_ARRAY_LEN(shapes); k++) {
            bool cplx = oly_dtype_is_complex(shapes[k].dtype);
            rc_case c = {.prim = "eigh", .params = &p, .n_in = 1, .in = {shapes[k]},
                         .skip = cplx ? RC_SKIP_JVP | RC_SKIP_TRANSPOSE : 0};
            rc_check_all(&c);
        }
        check_phase_free(&oly__prim_eigh, &p, RC_AVAL(OLY_COMPLEX128, 3, 3));
        check_phase_free(&oly__prim_eigh, &p, RC_F64(3, 3));
    }
}

TEST(lapack_rules_svd)
{
    const oly_aval shapes[] = {RC_F64(4, 3), RC_F64(3, 4), RC_F64(3, 3), RC_AVAL(OLY_COMPLEX128, 3, 3),
                               RC_AVAL(OLY_COMPLEX128, 4, 3), RC_F64(2, 3, 2)};
    for (int uv = 0; uv < 2; uv++)
        for (int full = 0; full < 2; full++)
            for (int k = 0; k < OLY_ARRAY_LEN(shapes); k++) {
                oly_params_svd p = {.full_matrices = full, .compute_uv = uv};
                const oly_aval *a = &shapes[k];
                bool square = a->dims[a->rank - 1] == a->dims[a->rank - 2];
                bool phase = uv && oly_dtype_is_complex(a->dtype);
                rc_case c = {.prim = "svd", .params = &p, .n_in = 1, .in = {*a},
                             .skip = (uv && full && !square) || phase ? RC_SKIP_JVP | RC_SKIP_TRANSPOSE
                                                                      : 0};
                rc_check_all(&c);
                if (phase && (square || !full)) check_phase_free(&oly__prim_svd, &p, *a);
            }
    oly_params_svd p = {.compute_uv = true};
    check_phase_free(&oly__prim_svd, &p, RC_AVAL(OLY_COMPLEX128, 3, 4));
}

TEST(lapack_rules_eig)
{
    oly_params_eig none = {0}, both = {.compute_left_eigenvectors = true,
                                       .compute_right_eigenvectors = true};
    const oly_aval shapes[] = {RC_F64(3, 3), RC_AVAL(OLY_COMPLEX128, 3, 3), RC_F64(2, 4, 4)};
    for (int k = 0; k < OLY_ARRAY_LEN(shapes); k++) {
        rc_case c = {.prim = "eig", .params = &none, .n_in = 1, .in = {shapes[k]}};
        rc_check_all(&c);
        rc_case v = {.prim = "eig", .params = &both, .n_in = 1, .in = {shapes[k]},
                     .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE};
        rc_check_all(&v);
    }
}

/* The derivatives JAX does not define are errors naming the case. */
TEST(lapack_jvp_unimplemented_cases)
{
    const struct {
        const oly_prim *p;
        const void *params;
        oly_aval a;
        const char *msg;
    } cases[] = {
        {&oly__prim_qr, &(oly_params_qr){.full_matrices = false}, RC_F64(3, 4), "m < n"},
        {&oly__prim_qr, &(oly_params_qr){.full_matrices = true}, RC_F64(4, 3), "full_matrices"},
        {&oly__prim_svd, &(oly_params_svd){.full_matrices = true, .compute_uv = true}, RC_F64(4, 3),
         "full_matrices"},
        {&oly__prim_eig, &(oly_params_eig){.compute_right_eigenvectors = true}, RC_F64(3, 3),
         "eigenvectors"},
    };
    for (int k = 0; k < OLY_ARRAY_LEN(cases); k++) {
        oly_builder *b = NULL;
        oly_program *prog = NULL, *j = NULL;
        CHECK_OK(oly_builder_new(&b));
        oly_var *x = NULL;
        CHECK_OK(oly_builder_add_input(b, &cases[k].a, &x));
        oly_atom xa = oly_atom_var(x), outs[4];
        CHECK_OK(oly__emit(b, cases[k].p, &xa, 1, cases[k].params, NULL, 0, outs));
        CHECK_OK(oly_builder_finish(b, outs, oly_prim_num_outputs(cases[k].p, cases[k].params, 1), &prog));
        oly_builder_free(b);
        bool nz = true, nzo[4];
        CHECK_ERR(oly_program_jvp(prog, &nz, &j, nzo), OLY_ERR_UNSUPPORTED, cases[k].msg);
        oly_program_release(j);
        oly_program_release(prog);
    }
}

/* test_linalg.c — dot_general (linalg.c): matmul, batched matmul, vector
 * products, non-canonical dimension numbers, integer/bool/half dtypes,
 * zero-size operands and error messages. Expected values from NumPy (noted)
 * or from a direct index loop. */
#include "test.h"
#include "testutil.h"

#include <math.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}
#define NOINTS {.n = 0}

/* Plain matmul: contract lhs's last with rhs's first. */
static const oly_params_dot_general MATMUL = {.lhs_contracting = INTS(1),
                                              .rhs_contracting = INTS(0),
                                              .lhs_batch = NOINTS,
                                              .rhs_batch = NOINTS};

static oly_array *dot(const oly_params_dot_general *p, oly_array *l, oly_array *r)
{
    oly_array *in[2] = {l, r}, *out = NULL;
    oly_status s = tu_run_kernel(&oly__prim_dot_general, p, in, 2, &out, 1, NULL);
    CHECK_OK(s);
    return s == OLY_OK ? out : NULL;
}

static oly_status try_dot(const oly_params_dot_general *p, oly_array *l, oly_array *r)
{
    oly_array *in[2] = {l, r}, *out = NULL;
    oly_status s = tu_run_kernel(&oly__prim_dot_general, p, in, 2, &out, 1, NULL);
    oly_array_release(out);
    return s;
}

static void expect_dot(const oly_params_dot_general *p, oly_array *l, oly_array *r, oly_dtype t,
                       int rank, const int64_t *dims, const double *want, int64_t n, double rtol)
{
    oly_array *y = dot(p, l, r);
    if (y) {
        const oly_aval *av = oly_array_aval(y);
        CHECK_EQ(av->dtype, t);
        CHECK_EQ(av->rank, rank);
        for (int i = 0; i < rank && i < av->rank; i++) CHECK_EQ(av->dims[i], dims[i]);
        CHECK(tu_allclose(y, want, n, rtol, 1e-12));
    }
    oly_array_release(y);
}

static const double A23[] = {1, 2, 3, 4, 5, 6}; /* numpy arange(1,7).reshape(2,3) @ .reshape(3,2) */

TEST(linalg_matmul_dtypes)
{
    const oly_dtype ts[] = {OLY_FLOAT32, OLY_FLOAT64, OLY_COMPLEX64, OLY_COMPLEX128, OLY_INT8,
                            OLY_INT16,   OLY_INT32,   OLY_INT64,     OLY_UINT8,      OLY_UINT16,
                            OLY_UINT32,  OLY_UINT64,  OLY_FLOAT16,   OLY_BFLOAT16};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        oly_array *l = tu_array(ts[k], 2, D(2, 3), A23), *r = tu_array(ts[k], 2, D(3, 2), A23);
        expect_dot(&MATMUL, l, r, ts[k], 2, D(2, 2), V(22, 28, 49, 64), 4, 0);
        oly_array_release(l);
        oly_array_release(r);
    }
}

TEST(linalg_batched_matmul)
{
    /* numpy: einsum('bmk,bkn->bmn', arange(12).reshape(2,2,3), arange(12).reshape(2,3,2)-5) */
    double ls[12], rs[12];
    for (int i = 0; i < 12; i++) {
        ls[i] = i;
        rs[i] = i - 5;
    }
    oly_params_dot_general p = {.lhs_contracting = INTS(2), .rhs_contracting = INTS(1),
                                .lhs_batch = INTS(0), .rhs_batch = INTS(0)};
    oly_dtype ts[] = {OLY_FLOAT64, OLY_FLOAT32, OLY_INT32, OLY_FLOAT16};
    for (int k = 0; k < 4; k++) {
        oly_array *l = tu_array(ts[k], 3, D(2, 2, 3), ls), *r = tu_array(ts[k], 3, D(2, 3, 2), rs);
        expect_dot(&p, l, r, ts[k], 3, D(2, 2, 2), V(-5, -2, -32, -20, 67, 88, 94, 124), 8, 0);
        oly_array_release(l);
        oly_array_release(r);
    }
}

TEST(linalg_vector_products)
{
    oly_array *v = tu_array(OLY_FLOAT32, 1, D(3), V(1, 2, 3));
    oly_array *w = tu_array(OLY_FLOAT32, 1, D(3), V(4, -5, 6));
    oly_params_dot_general vv = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(0)};
    expect_dot(&vv, v, w, OLY_FLOAT32, 0, NULL, V(12), 1, 0);
    oly_array *m = tu_array(OLY_FLOAT32, 2, D(2, 3), A23);
    expect_dot(&MATMUL, m, w, OLY_FLOAT32, 1, D(2), V(12, 27), 2, 0);        /* m @ w */
    oly_params_dot_general vm = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(1)};
    oly_array *mt = tu_array(OLY_FLOAT32, 2, D(3, 2), A23);
    expect_dot(&vv, v, mt, OLY_FLOAT32, 1, D(2), V(22, 28), 2, 0);            /* v @ mt */
    expect_dot(&vm, v, m, OLY_FLOAT32, 1, D(2), V(14, 32), 2, 0);             /* v @ m.T */
    oly_params_dot_general mv_t = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(0)};
    expect_dot(&mv_t, mt, v, OLY_FLOAT32, 1, D(2), V(22, 28), 2, 0);          /* mt.T @ v */
    /* outer product: no contraction */
    oly_params_dot_general outer = {.lhs_contracting = NOINTS, .rhs_contracting = NOINTS};
    oly_array *u = tu_array(OLY_FLOAT32, 1, D(2), V(1, -1));
    expect_dot(&outer, u, v, OLY_FLOAT32, 2, D(2, 3), V(1, 2, 3, -1, -2, -3), 6, 0);
    oly_array_release(v);
    oly_array_release(w);
    oly_array_release(m);
    oly_array_release(mt);
    oly_array_release(u);
}

TEST(linalg_noncanonical_dims)
{
    double as[6], bs[12], ws[8];
    for (int i = 0; i < 6; i++) as[i] = i;
    for (int i = 0; i < 12; i++) bs[i] = i;
    for (int i = 0; i < 8; i++) ws[i] = i - 3;
    const oly_dtype ts[] = {OLY_FLOAT64, OLY_FLOAT32, OLY_INT64, OLY_BFLOAT16};
    for (int k = 0; k < 4; k++) {
        oly_dtype t = ts[k];
        /* numpy: arange(6).reshape(3,2).T @ arange(12).reshape(3,4) */
        oly_array *a = tu_array(t, 2, D(3, 2), as), *b = tu_array(t, 2, D(3, 4), bs);
        oly_params_dot_general atb = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(0)};
        expect_dot(&atb, a, b, t, 2, D(2, 4), V(40, 46, 52, 58, 52, 61, 70, 79), 8, 0);
        /* numpy: arange(6.).reshape(3,2) @ (arange(8).reshape(4,2)-3).T, negative axes */
        oly_array *w = tu_array(t, 2, D(4, 2), ws);
        oly_params_dot_general xwt = {.lhs_contracting = INTS(-1), .rhs_contracting = INTS(-1)};
        expect_dot(&xwt, a, w, t, 2, D(3, 4), V(-2, 0, 2, 4, -12, -2, 8, 18, -22, -4, 14, 32), 12, 0);
        oly_array_release(a);
        oly_array_release(b);
        oly_array_release(w);
    }
    /* numpy: einsum('kbm,nkb->bmn', arange(24).reshape(2,3,4), arange(12).reshape(2,2,3)%5-2) */
    double ls[24], rs[12];
    for (int i = 0; i < 24; i++) ls[i] = i;
    for (int i = 0; i < 12; i++) rs[i] = i % 5 - 2;
    oly_params_dot_general p = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(1),
                                .lhs_batch = INTS(1), .rhs_batch = INTS(2)};
    const double want[] = {12, 24, 11, 25, 10, 26, 9, 27, 28, -32, 29, -34,
                           30, -36, 31, -38, -40, -12, -42, -12, -44, -12, -46, -12};
    const oly_dtype ts2[] = {OLY_FLOAT32, OLY_COMPLEX128, OLY_INT16, OLY_FLOAT16};
    for (int k = 0; k < 4; k++) {
        oly_array *l = tu_array(ts2[k], 3, D(2, 3, 4), ls), *r = tu_array(ts2[k], 3, D(2, 2, 3), rs);
        expect_dot(&p, l, r, ts2[k], 3, D(3, 4, 2), want, 24, 0);
        oly_array_release(l);
        oly_array_release(r);
    }
}

/* Direct-loop reference for C = A @ B or variants with transposed storage. */
TEST(linalg_larger_against_loop)
{
    enum { M = 37, K = 53, N = 29 };
    static double a[M * K], b[K * N], bt[N * K], want[M * N];
    for (int i = 0; i < M * K; i++) a[i] = ((i * 7) % 19) - 9;
    for (int i = 0; i < K * N; i++) b[i] = ((i * 5) % 13) - 6;
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) bt[j * K + k] = b[k * N + j];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
            want[i * N + j] = s;
        }
    const oly_dtype ts[] = {OLY_FLOAT32, OLY_FLOAT64, OLY_COMPLEX64, OLY_INT32, OLY_INT8};
    for (int k = 0; k < 5; k++) {
        oly_dtype t = ts[k];
        oly_array *l = tu_array(t, 2, D(M, K), a), *r = tu_array(t, 2, D(K, N), b);
        oly_array *rt = tu_array(t, 2, D(N, K), bt);
        if (t == OLY_INT8) { /* wraps like NumPy int8 matmul */
            static double wrapped[M * N];
            for (int i = 0; i < M * N; i++) wrapped[i] = (double)(int8_t)(int64_t)want[i];
            expect_dot(&MATMUL, l, r, t, 2, D(M, N), wrapped, M * N, 0);
        } else {
            expect_dot(&MATMUL, l, r, t, 2, D(M, N), want, M * N, 0);
            oly_params_dot_general nt = {.lhs_contracting = INTS(1), .rhs_contracting = INTS(1)};
            expect_dot(&nt, l, rt, t, 2, D(M, N), want, M * N, 0);
        }
        oly_array_release(l);
        oly_array_release(r);
        oly_array_release(rt);
    }
}

TEST(linalg_int_bool_half)
{
    /* int8 wraps: 100*3 + 50*4 + 3*5 = 515 -> 3 (NumPy int8 dot) */
    oly_array *a = tu_array(OLY_INT8, 1, D(3), V(100, 50, 3)), *b = tu_array(OLY_INT8, 1, D(3), V(3, 4, 5));
    oly_params_dot_general vv = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(0)};
    expect_dot(&vv, a, b, OLY_INT8, 0, NULL, V(3), 1, 0);
    oly_array_release(a);
    oly_array_release(b);
    a = tu_array(OLY_INT32, 2, D(2, 2), V(-1, 2, 3, -4));
    b = tu_array(OLY_INT32, 2, D(2, 2), V(5, -6, 7, 8));
    expect_dot(&MATMUL, a, b, OLY_INT32, 2, D(2, 2), V(9, 22, -13, -50), 4, 0);
    oly_array_release(a);
    oly_array_release(b);
    /* bool: or of ands */
    a = tu_array(OLY_BOOL, 2, D(2, 2), V(1, 0, 0, 0));
    b = tu_array(OLY_BOOL, 2, D(2, 3), V(0, 1, 1, 1, 1, 0));
    expect_dot(&MATMUL, a, b, OLY_BOOL, 2, D(2, 3), V(0, 1, 1, 0, 0, 0), 6, 0);
    oly_array_release(a);
    oly_array_release(b);
    /* f16 accumulates in float: 1000 x (0.1*1) = 99.976 -> 100 in f16 (naive f16: 105.2) */
    static double ts[1000], os[1000];
    for (int i = 0; i < 1000; i++) {
        ts[i] = 0.1;
        os[i] = 1;
    }
    a = tu_array(OLY_FLOAT16, 1, D(1000), ts);
    b = tu_array(OLY_FLOAT16, 1, D(1000), os);
    expect_dot(&vv, a, b, OLY_FLOAT16, 0, NULL, V(100), 1, 0);
    oly_array_release(a);
    oly_array_release(b);
}

TEST(linalg_complex_values)
{
    /* numpy: [1+2j, 3-1j] @ [[2-1j, 1j], [1, 1+1j]] = [7+2j, 2+3j] */
    double x[4] = {1, 2, 3, -1}, y[8] = {2, -1, 0, 1, 1, 0, 1, 1};
    float xf[4], yf[8];
    for (int i = 0; i < 4; i++) xf[i] = (float)x[i];
    for (int i = 0; i < 8; i++) yf[i] = (float)y[i];
    oly_params_dot_general vm = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(0)};
    for (int k = 0; k < 2; k++) {
        oly_dtype t = k ? OLY_COMPLEX128 : OLY_COMPLEX64;
        oly_aval xa = tu_aval(t, 1, D(2)), ya = tu_aval(t, 2, D(2, 2));
        oly_array *l = NULL, *r = NULL;
        CHECK_OK(oly_array_from_data(&xa, k ? (const void *)x : (const void *)xf, &l));
        CHECK_OK(oly_array_from_data(&ya, k ? (const void *)y : (const void *)yf, &r));
        oly_array *o = dot(&vm, l, r);
        if (o) {
            double got[4];
            for (int i = 0; i < 4; i++)
                got[i] = k ? ((const double *)oly_array_data(o))[i]
                           : ((const float *)oly_array_data(o))[i];
            CHECK_NEAR(got[0], 7, 1e-6);
            CHECK_NEAR(got[1], 2, 1e-6);
            CHECK_NEAR(got[2], 2, 1e-6);
            CHECK_NEAR(got[3], 3, 1e-6);
        }
        oly_array_release(o);
        oly_array_release(l);
        oly_array_release(r);
    }
}

TEST(linalg_zero_size)
{
    const oly_dtype ts[] = {OLY_FLOAT32, OLY_INT32, OLY_FLOAT16, OLY_COMPLEX64};
    for (int k = 0; k < 4; k++) {
        oly_dtype t = ts[k];
        oly_array *l = tu_array(t, 2, D(2, 0), NULL), *r = tu_array(t, 2, D(0, 3), NULL);
        /* an empty contraction gives zeros; fill the output buffer first to be sure */
        expect_dot(&MATMUL, l, r, t, 2, D(2, 3), V(0, 0, 0, 0, 0, 0), 6, 0);
        oly_array_release(l);
        oly_array_release(r);
        l = tu_array(t, 2, D(0, 3), NULL);
        r = tu_array(t, 2, D(3, 2), V(1, 2, 3, 4, 5, 6));
        expect_dot(&MATMUL, l, r, t, 2, D(0, 2), NULL, 0, 0);
        oly_array_release(l);
        oly_array_release(r);
    }
    oly_params_dot_general b = {.lhs_contracting = INTS(2), .rhs_contracting = INTS(1),
                                .lhs_batch = INTS(0), .rhs_batch = INTS(0)};
    oly_array *l = tu_array(OLY_FLOAT64, 3, D(0, 2, 3), NULL), *r = tu_array(OLY_FLOAT64, 3, D(0, 3, 4), NULL);
    expect_dot(&b, l, r, OLY_FLOAT64, 3, D(0, 2, 4), NULL, 0, 0);
    oly_array_release(l);
    oly_array_release(r);
}

TEST(linalg_errors)
{
    oly_array *l = tu_array(OLY_FLOAT32, 2, D(2, 3), NULL), *r = tu_array(OLY_FLOAT64, 2, D(3, 2), NULL);
    CHECK_ERR(try_dot(&MATMUL, l, r), OLY_ERR_TYPE, "dot_general: operands must have equal dtypes, got lhs f32[2,3] and rhs f64[3,2]");
    oly_array_release(r);
    r = tu_array(OLY_FLOAT32, 2, D(4, 2), NULL);
    CHECK_ERR(try_dot(&MATMUL, l, r), OLY_ERR_SHAPE, "contracting dimensions must have equal sizes");
    oly_params_dot_general lens = {.lhs_contracting = INTS(1), .rhs_contracting = NOINTS};
    CHECK_ERR(try_dot(&lens, l, r), OLY_ERR_INVALID, "equal lengths");
    oly_params_dot_general dup = {.lhs_contracting = INTS(0), .rhs_contracting = INTS(1),
                                  .lhs_batch = INTS(0), .rhs_batch = INTS(0)};
    CHECK_ERR(try_dot(&dup, l, r), OLY_ERR_INVALID, "appears twice");
    oly_params_dot_general range = {.lhs_contracting = INTS(2), .rhs_contracting = INTS(0)};
    CHECK_ERR(try_dot(&range, l, r), OLY_ERR_INVALID, "lhs_contracting (2) out of range for lhs f32[2,3]");
    oly_params_dot_general bsz = {.lhs_contracting = NOINTS, .rhs_contracting = NOINTS,
                                  .lhs_batch = INTS(1), .rhs_batch = INTS(0)};
    CHECK_ERR(try_dot(&bsz, l, r), OLY_ERR_SHAPE, "batch dimensions must have equal sizes");
    oly_array_release(l);
    oly_array_release(r);
    CHECK_EQ(oly__prim_dot_general.n_fields, 4);
    CHECK_STREQ(oly__prim_dot_general.fields[0].name, "lhs_contracting");
}

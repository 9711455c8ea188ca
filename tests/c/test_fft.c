/* test_fft.c — the fft row (src/prims/fft.c, src/cpu/fft.c on FFTW3): values
 * of every type in every dtype over 1, 2 and 3 trailing dims with batches,
 * even and odd lengths, against a naive DFT in double; the dtypes each type
 * accepts; the shape rule's errors; plans past the cache's capacity, from
 * several threads at once, on misaligned arrays and split by ith / nth; and
 * the batch / jvp / transpose rules through rulecheck. */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include <complex.h>
#include <pthread.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})

typedef double complex cplx;

static const char *type_name(int t)
{
    static const char *const n[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
    return t >= 0 && t < 4 ? n[t] : "?";
}

static oly_params_fft fftp(int type, int r, const int64_t *lengths)
{
    oly_params_fft p;
    memset(&p, 0, sizeof p);
    p.fft_type = type;
    p.fft_lengths.n = r;
    for (int i = 0; i < r; i++) p.fft_lengths.v[i] = lengths[i];
    return p;
}

/* Deterministic values in [-1, 1). */
static double rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 * 2 - 1;
}

/* ---------------------------------------------------------------- the reference */

/* One transform over r dims: y[j] = sum_k w(k) x[k] e^{sign 2 pi i sum_d j_d k_d / n_d}
 * for j over the grid jd and k over the grid kd (row-major), w(k) = weight,
 * doubled where half says so (k on the last dim neither 0 nor, for even n,
 * n/2: the bins an IRFFT counts twice). */
static void dft(const cplx *x, cplx *y, int r, const int64_t *n, const int64_t *kd,
                const int64_t *jd, int sign, double weight, bool half)
{
    int64_t nk = 1, nj = 1;
    for (int d = 0; d < r; d++) {
        nk *= kd[d];
        nj *= jd[d];
    }
    for (int64_t j = 0; j < nj; j++) {
        int64_t ji[3] = {0}, t = j;
        for (int d = r - 1; d >= 0; d--) {
            ji[d] = t % jd[d];
            t /= jd[d];
        }
        cplx acc = 0;
        for (int64_t k = 0; k < nk; k++) {
            int64_t ki[3] = {0}, u = k;
            for (int d = r - 1; d >= 0; d--) {
                ki[d] = u % kd[d];
                u /= kd[d];
            }
            double ph = 0;
            for (int d = 0; d < r; d++) ph += (double)((ji[d] * ki[d]) % n[d]) / (double)n[d];
            double w = weight;
            int64_t kl = ki[r - 1], nl = n[r - 1];
            if (half && kl != 0 && !(nl % 2 == 0 && kl == nl / 2)) w *= 2;
            acc += w * x[k] * cexp(sign * 2 * M_PI * I * ph);
        }
        y[j] = acc;
    }
}

/* ---------------------------------------------------------------- values */

/* Runs fft of type over lengths (r dims) on batch x lengths in precision dbl
 * and compares with the reference. */
static void check_values(int type, bool dbl, int nb, const int64_t *batch, int r,
                         const int64_t *lengths)
{
    int64_t n = r ? lengths[r - 1] : 0, nh = n / 2 + 1;
    int64_t in_dims[OLY_MAX_RANK], out_dims[OLY_MAX_RANK], kd[3], jd[3];
    int rank = nb + r;
    int64_t nbatch = 1, per_in = 1, per_out = 1, total = 1;
    for (int i = 0; i < nb; i++) {
        in_dims[i] = out_dims[i] = batch[i];
        nbatch *= batch[i];
    }
    for (int d = 0; d < r; d++) {
        kd[d] = jd[d] = lengths[d];
        total *= lengths[d];
    }
    if (type == OLY_FFT_RFFT) jd[r - 1] = nh;
    if (type == OLY_FFT_IRFFT) kd[r - 1] = nh;
    for (int d = 0; d < r; d++) {
        in_dims[nb + d] = kd[d];
        out_dims[nb + d] = jd[d];
        per_in *= kd[d];
        per_out *= jd[d];
    }
    bool real_in = type == OLY_FFT_RFFT, real_out = type == OLY_FFT_IRFFT;
    oly_dtype cdt = dbl ? OLY_COMPLEX128 : OLY_COMPLEX64, rdt = dbl ? OLY_FLOAT64 : OLY_FLOAT32;
    oly_dtype idt = real_in ? rdt : cdt, odt = real_out ? rdt : cdt;
    int64_t nin = nbatch * per_in, nout = nbatch * per_out;
    cplx *xs = calloc((size_t)nin, sizeof *xs), *ys = calloc((size_t)nout, sizeof *ys);
    double *raw = calloc((size_t)nin * 2, sizeof *raw);
    float *rawf = calloc((size_t)nin * 2, sizeof *rawf);
    uint64_t seed = 17 + (uint64_t)type * 31 + (uint64_t)total;
    for (int64_t i = 0; i < nin; i++) {
        double re = rnd(&seed), im = real_in ? 0 : rnd(&seed);
        xs[i] = re + I * im;
        int w = real_in ? 1 : 2;
        raw[i * w] = re;
        rawf[i * w] = (float)re;
        if (!real_in) {
            raw[i * 2 + 1] = im;
            rawf[i * 2 + 1] = (float)im;
        }
    }
    oly_aval ia = tu_aval(idt, rank, in_dims);
    oly_array *x = NULL, *y[1] = {NULL};
    CHECK_OK(oly_array_from_data(&ia, dbl ? (const void *)raw : (const void *)rawf, &x));
    oly_params_fft p = fftp(type, r, lengths);
    oly_status st = tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL);
    CHECK_OK(st);
    if (st == OLY_OK) {
        const oly_aval *oa = oly_array_aval(y[0]);
        CHECK_EQ(oa->dtype, odt);
        CHECK_EQ(oa->rank, rank);
        for (int i = 0; i < rank; i++) CHECK_EQ(oa->dims[i], out_dims[i]);
        int sign = type == OLY_FFT_FFT || type == OLY_FFT_RFFT ? -1 : 1;
        double w = sign > 0 ? 1.0 / (double)total : 1;
        for (int64_t b = 0; b < nbatch; b++)
            dft(xs + b * per_in, ys + b * per_out, r, lengths, kd, jd, sign, w,
                type == OLY_FFT_IRFFT);
        double scale = 0, err = 0;
        const void *got = oly_array_data(y[0]);
        for (int64_t i = 0; i < nout; i++) {
            cplx want = real_out ? creal(ys[i]) : ys[i], g;
            if (real_out) g = dbl ? ((const double *)got)[i] : ((const float *)got)[i];
            else if (dbl) g = ((const double *)got)[2 * i] + I * ((const double *)got)[2 * i + 1];
            else g = ((const float *)got)[2 * i] + I * ((const float *)got)[2 * i + 1];
            scale = fmax(scale, cabs(want));
            err = fmax(err, cabs(g - want));
        }
        double tol = (dbl ? 1e-12 : 2e-6) * (scale + 1) * log2((double)total + 2);
        if (!(err <= tol)) {
            char dims[64] = "";
            for (int d = 0; d < r; d++)
                snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%lld,", (long long)lengths[d]);
            CHECK_FAIL_("%s %s lengths (%s) batch %lld: max error %.3g > %.3g", type_name(type),
                        oly_dtype_name(idt), dims, (long long)nbatch, err, tol);
        }
    }
    oly_array_release(x);
    oly_array_release(y[0]);
    free(xs);
    free(ys);
    free(raw);
    free(rawf);
}

TEST(fft_values_every_type_and_dtype)
{
    static const struct {
        int nb;
        int64_t batch[2];
        int r;
        int64_t len[3];
    } cases[] = {
        {1, {3}, 1, {8}},       {2, {2, 2}, 1, {7}},     {0, {0}, 1, {1}},
        {1, {2}, 1, {2}},       {0, {0}, 1, {12}},       {1, {2}, 2, {3, 4}},
        {0, {0}, 2, {5, 6}},    {1, {3}, 2, {4, 1}},     {1, {2}, 3, {2, 3, 5}},
        {0, {0}, 3, {3, 2, 4}}, {2, {0, 3}, 1, {4}} /* an empty batch */,
    };
    for (int type = 0; type < OLY_FFT_TYPE_COUNT; type++)
        for (int dbl = 0; dbl < 2; dbl++)
            for (int c = 0; c < OLY_ARRAY_LEN(cases); c++)
                check_values(type, dbl, cases[c].nb, cases[c].batch, cases[c].r, cases[c].len);
}

TEST(fft_values_long_and_prime)
{
    /* a power of two, a prime (FFTW's Rader / generic paths) and a 2-D one */
    for (int type = 0; type < OLY_FFT_TYPE_COUNT; type++) {
        check_values(type, true, 0, NULL, 1, D(1024));
        check_values(type, false, 0, NULL, 1, D(1031));
        check_values(type, true, 1, D(2), 2, D(24, 17));
    }
}

/* IRFFT takes the real part of the DC and Nyquist bins (NumPy's irfft): by
 * hand, irfft([1+5j, 2+7j, 3+9j], 4)_j = (1 + 2 Re((2+7j) i^j) + 3 (-1)^j) / 4. */
TEST(fft_irfft_ignores_imaginary_dc_and_nyquist)
{
    double v[] = {1, 5, 2, 7, 3, 9};
    oly_aval a = tu_aval(OLY_COMPLEX128, 1, D(3));
    oly_array *x = NULL, *y[1] = {NULL};
    CHECK_OK(oly_array_from_data(&a, v, &x));
    oly_params_fft p = fftp(OLY_FFT_IRFFT, 1, D(4));
    CHECK_OK(tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL));
    /* (1 + 4 + 3, 1 - 14 - 3, 1 - 4 + 3, 1 + 14 - 3) / 4 */
    if (y[0]) CHECK(tu_allclose(y[0], (const double[]){2, -4, 0, 3}, 4, 1e-14, 1e-14));
    oly_array_release(x);
    oly_array_release(y[0]);
}

/* ---------------------------------------------------------------- dtypes and errors */

TEST(fft_accepted_dtypes_have_kernels)
{
    for (int type = 0; type < OLY_FFT_TYPE_COUNT; type++)
        for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
            oly_dtype dt = (oly_dtype)t;
            bool want = type == OLY_FFT_RFFT ? dt == OLY_FLOAT32 || dt == OLY_FLOAT64
                                             : dt == OLY_COMPLEX64 || dt == OLY_COMPLEX128;
            oly_array *x = tu_array(dt, 2, D(2, type == OLY_FFT_IRFFT ? 3 : 4), NULL), *y[1] = {0};
            oly_params_fft p = fftp(type, 1, D(4));
            oly_status s = tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL);
            if (want) CHECK_OK(s);
            else CHECK_EQ(s, OLY_ERR_TYPE);
            if (oly_test_failed) fprintf(stderr, "    %s(%s)\n", type_name(type), oly_dtype_name(dt));
            oly_array_release(x);
            oly_array_release(y[0]);
        }
}

static void expect_error(int type, int r, const int64_t *lengths, oly_array *x, oly_status want,
                         const char *needle)
{
    oly_params_fft p = fftp(type, r, lengths);
    oly_array *y[1] = {0};
    CHECK_ERR(tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL), want, needle);
    oly_array_release(y[0]);
}

TEST(fft_shape_rule_errors)
{
    oly_array *c = tu_array(OLY_COMPLEX64, 2, D(2, 5), NULL);
    oly_array *f = tu_array(OLY_FLOAT32, 2, D(2, 5), NULL);
    oly_array *c4 = tu_array(OLY_COMPLEX128, 4, D(1, 1, 1, 1), NULL);
    expect_error(OLY_FFT_FFT, 1, D(4), c, OLY_ERR_SHAPE,
                 "FFT with fft_lengths (4) needs an operand whose trailing dims are (4), got c64[2,5]");
    expect_error(OLY_FFT_IRFFT, 1, D(5), c, OLY_ERR_SHAPE, "trailing dims are (3), got c64[2,5]");
    expect_error(OLY_FFT_IRFFT, 2, D(3, 8), c, OLY_ERR_SHAPE, "trailing dims are (3, 5), got");
    expect_error(OLY_FFT_RFFT, 2, D(2, 4), f, OLY_ERR_SHAPE, "trailing dims are (2, 4), got f32[2,5]");
    expect_error(OLY_FFT_FFT, 3, D(1, 2, 5), c, OLY_ERR_SHAPE, "needs an operand of rank >= 3");
    expect_error(OLY_FFT_FFT, 1, D(5), f, OLY_ERR_TYPE, "FFT takes a complex64 or complex128 operand, got f32[2,5]");
    expect_error(OLY_FFT_IFFT, 1, D(5), f, OLY_ERR_TYPE, "IFFT takes a complex64");
    expect_error(OLY_FFT_IRFFT, 1, D(8), f, OLY_ERR_TYPE, "IRFFT takes a complex64");
    expect_error(OLY_FFT_RFFT, 1, D(5), c, OLY_ERR_TYPE, "RFFT takes a float32 or float64 operand, got c64[2,5]");
    expect_error(OLY_FFT_FFT, 0, NULL, c, OLY_ERR_INVALID, "fft_lengths must have 1 to 3 entries, got ()");
    expect_error(OLY_FFT_FFT, 4, D(1, 1, 1, 1), c4, OLY_ERR_INVALID, "1 to 3 entries");
    expect_error(OLY_FFT_FFT, 1, D(0), c, OLY_ERR_INVALID, "fft_lengths must be positive, got (0)");
    expect_error(OLY_FFT_IRFFT, 1, D(-2), c, OLY_ERR_INVALID, "must be positive");
    expect_error(7, 1, D(5), c, OLY_ERR_INVALID, "fft_type must be in [0, 4), got 7");
    oly_params_fft p = fftp(OLY_FFT_FFT, 1, D(5));
    oly_array *two[2] = {c, c}, *y[1] = {0};
    CHECK_ERR(tu_run_kernel(&oly__prim_fft, &p, two, 2, y, 1, NULL), OLY_ERR_INVALID, "1 inputs");
    oly_array_release(c);
    oly_array_release(f);
    oly_array_release(c4);
}

/* ---------------------------------------------------------------- plans */

TEST(fft_plans_past_the_cache)
{
    /* 300 lengths: more plans than the cache keeps (256), so later ones are
     * made per call and destroyed after it; every one is still right */
    for (int64_t n = 1; n <= 300 && !oly_test_failed; n++)
        check_values(n % 2 ? OLY_FFT_FFT : OLY_FFT_IRFFT, n % 3 != 0, 0, NULL, 1, &n);
    /* and again: cached or not, the same answers */
    for (int64_t n = 1; n <= 40 && !oly_test_failed; n++) check_values(OLY_FFT_FFT, true, 0, NULL, 1, &n);
}

typedef struct worker {
    int id, bad;
} worker;

/* FFT then IFFT of lengths unique to this thread, 40 rounds: planning races
 * with the other threads' planning and execution. */
static void *round_trips(void *arg)
{
    worker *w = arg;
    uint64_t seed = 99 + (uint64_t)w->id;
    for (int it = 0; it < 40; it++) {
        int64_t n = 500 + w->id * 40 + it; /* distinct across threads */
        oly_aval a = tu_aval(OLY_COMPLEX128, 1, &n);
        oly_array *x = NULL, *y[1] = {0}, *z[1] = {0};
        if (oly_array_new(&a, &x) != OLY_OK) {
            w->bad++;
            continue;
        }
        double *d = oly_array_mutable_data(x);
        for (int64_t i = 0; i < 2 * n; i++) d[i] = rnd(&seed);
        oly_params_fft f = fftp(OLY_FFT_FFT, 1, &n), b = fftp(OLY_FFT_IFFT, 1, &n);
        if (tu_run_kernel(&oly__prim_fft, &f, &x, 1, y, 1, NULL) != OLY_OK ||
            tu_run_kernel(&oly__prim_fft, &b, y, 1, z, 1, NULL) != OLY_OK) {
            w->bad++;
        } else {
            const double *e = oly_array_data(z[0]);
            for (int64_t i = 0; i < 2 * n; i++)
                if (fabs(e[i] - d[i]) > 1e-12) {
                    w->bad++;
                    break;
                }
        }
        oly_array_release(x);
        oly_array_release(y[0]);
        oly_array_release(z[0]);
    }
    return NULL;
}

TEST(fft_plans_from_several_threads)
{
    enum { T = 4 };
    pthread_t th[T];
    worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker){.id = i};
        CHECK_EQ(pthread_create(&th[i], NULL, round_trips, &w[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(w[i].bad, 0);
    }
}

/* The kernel called directly: an input and output 8 bytes off FFTW's SIMD
 * alignment (a plan for one alignment never runs on another), and the batch
 * split over ith / nth. */
TEST(fft_kernel_misaligned_and_split)
{
    enum { B = 5, N = 16 };
    const oly_cpu_kernel *k = oly__cpu_kernel(&oly__prim_fft);
    oly_aval ia = tu_aval(OLY_FLOAT32, 2, D(B, N)), oa = tu_aval(OLY_COMPLEX64, 2, D(B, N / 2 + 1));
    float *in = oly__aligned_alloc(64, 64 + sizeof(float) * B * N);
    float *ref = oly__aligned_alloc(64, 64 + sizeof(float) * 2 * B * (N / 2 + 1));
    float *out = oly__aligned_alloc(64, 64 + sizeof(float) * 2 * B * (N / 2 + 1));
    uint64_t seed = 5;
    for (int i = 0; i < B * N + 16; i++) in[i] = (float)rnd(&seed);
    oly_params_fft p = fftp(OLY_FFT_RFFT, 1, D(N));
    const void *ins[1] = {in};
    void *outs[1] = {ref};
    oly_kernel_ctx kc = {.params = &p, .n_in = 1, .in = ins, .in_aval = &ia, .n_out = 1,
                         .out = outs, .out_aval = &oa, .ith = 0, .nth = 1};
    CHECK_OK(k->fn(&kc)); /* aligned, one thread: the reference */
    size_t nout = 2 * B * (N / 2 + 1);
    /* input misaligned by one float pair (8 bytes), output by one c64 */
    float *in8 = in + 2, *out8 = out + 2;
    memmove(in8, in, sizeof(float) * B * N);
    ins[0] = in8;
    outs[0] = out8;
    CHECK_OK(k->fn(&kc));
    for (size_t i = 0; i < nout; i++) CHECK_NEAR(out8[i], ref[i], 1e-5);
    /* three threads' shares, in turn */
    memset(out8, 0, sizeof(float) * nout);
    kc.nth = 3;
    for (int t = 0; t < 3; t++) {
        kc.ith = t;
        CHECK_OK(k->fn(&kc));
    }
    for (size_t i = 0; i < nout; i++) CHECK_NEAR(out8[i], ref[i], 1e-5);
    free(in);
    free(ref);
    free(out);
}

/* Every allocation of an IRFFT (outputs, the c2r scratch) failed in turn:
 * OLY_ERR_NOMEM with a message, or the right values; the next run is whole. */
TEST(fft_allocation_failures)
{
    double v[2 * 2 * 5];
    uint64_t seed = 3;
    for (int i = 0; i < 20; i++) v[i] = rnd(&seed);
    oly_aval a = tu_aval(OLY_COMPLEX128, 2, D(2, 5));
    oly_array *x = NULL, *want[1] = {0};
    CHECK_OK(oly_array_from_data(&a, v, &x));
    oly_params_fft p = fftp(OLY_FFT_IRFFT, 1, D(8));
    CHECK_OK(tu_run_kernel(&oly__prim_fft, &p, &x, 1, want, 1, NULL));
    const long big = 1L << 40;
    oly_fault_inject_alloc(big);
    oly_array *y[1] = {0};
    CHECK_OK(tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL));
    long count = big - oly_fault_inject_left();
    oly_fault_inject_alloc(-1);
    oly_array_release(y[0]);
    CHECK(count >= 2); /* the output and the scratch */
    for (long k = 0; k < count && want[0]; k++) {
        y[0] = NULL;
        oly_fault_inject_alloc(k);
        oly_status s = tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL);
        oly_fault_inject_alloc(-1);
        if (s != OLY_OK) {
            CHECK_EQ(s, OLY_ERR_NOMEM);
            CHECK(*oly_last_error() != 0);
        } else {
            CHECK(memcmp(oly_array_data(y[0]), oly_array_data(want[0]), 16 * sizeof(double)) == 0);
            oly_array_release(y[0]);
            y[0] = NULL;
        }
        CHECK_OK(tu_run_kernel(&oly__prim_fft, &p, &x, 1, y, 1, NULL));
        if (y[0]) CHECK(memcmp(oly_array_data(y[0]), oly_array_data(want[0]), 16 * sizeof(double)) == 0);
        oly_array_release(y[0]);
    }
    oly_array_release(x);
    oly_array_release(want[0]);
}

/* ---------------------------------------------------------------- rules */

TEST(fft_rules)
{
    static const oly_params_fft fft8 = {OLY_FFT_FFT, {1, {8}}}, ifft5 = {OLY_FFT_IFFT, {1, {5}}},
                                fft34 = {OLY_FFT_FFT, {2, {3, 4}}},
                                ifft223 = {OLY_FFT_IFFT, {3, {2, 2, 3}}},
                                rfft8 = {OLY_FFT_RFFT, {1, {8}}}, rfft7 = {OLY_FFT_RFFT, {1, {7}}},
                                rfft34 = {OLY_FFT_RFFT, {2, {3, 4}}},
                                rfft235 = {OLY_FFT_RFFT, {3, {2, 3, 5}}},
                                irfft8 = {OLY_FFT_IRFFT, {1, {8}}},
                                irfft7 = {OLY_FFT_IRFFT, {1, {7}}},
                                irfft34 = {OLY_FFT_IRFFT, {2, {3, 4}}},
                                irfft233 = {OLY_FFT_IRFFT, {3, {2, 3, 3}}},
                                irfft1 = {OLY_FFT_IRFFT, {1, {1}}}, irfft2 = {OLY_FFT_IRFFT, {1, {2}}};
#define C128(...) RC_AVAL(OLY_COMPLEX128, __VA_ARGS__)
#define C64(...) RC_AVAL(OLY_COMPLEX64, __VA_ARGS__)
    rc_case cases[] = {
        {.prim = "fft", .params = &fft8, .n_in = 1, .in = {C128(3, 8)}, .linear = {true}},
        {.prim = "fft", .params = &ifft5, .n_in = 1, .in = {C128(2, 5)}, .linear = {true}},
        {.prim = "fft", .params = &fft34, .n_in = 1, .in = {C128(2, 3, 4)}, .linear = {true}},
        {.prim = "fft", .params = &ifft223, .n_in = 1, .in = {C128(2, 2, 3)}, .linear = {true}},
        {.prim = "fft", .params = &rfft8, .n_in = 1, .in = {RC_F64(3, 8)}, .linear = {true}},
        {.prim = "fft", .params = &rfft7, .n_in = 1, .in = {RC_F64(2, 7)}, .linear = {true}},
        {.prim = "fft", .params = &rfft34, .n_in = 1, .in = {RC_F64(2, 3, 4)}, .linear = {true}},
        {.prim = "fft", .params = &rfft235, .n_in = 1, .in = {RC_F64(2, 3, 5)}, .linear = {true}},
        {.prim = "fft", .params = &irfft8, .n_in = 1, .in = {C128(3, 5)}, .linear = {true}},
        {.prim = "fft", .params = &irfft7, .n_in = 1, .in = {C128(2, 4)}, .linear = {true}},
        {.prim = "fft", .params = &irfft34, .n_in = 1, .in = {C128(2, 3, 3)}, .linear = {true}},
        {.prim = "fft", .params = &irfft233, .n_in = 1, .in = {C128(2, 3, 2)}, .linear = {true}},
        {.prim = "fft", .params = &irfft1, .n_in = 1, .in = {C128(3, 1)}, .linear = {true}},
        {.prim = "fft", .params = &irfft2, .n_in = 1, .in = {C128(2)}, .linear = {true}},
        /* single precision: loose tolerances */
        {.prim = "fft", .params = &fft8, .n_in = 1, .in = {C64(2, 8)}, .linear = {true}},
        {.prim = "fft", .params = &rfft7, .n_in = 1, .in = {RC_F32(3, 7)}, .linear = {true}},
        {.prim = "fft", .params = &irfft8, .n_in = 1, .in = {C64(2, 5)}, .linear = {true}},
    };
#undef C128
#undef C64
    for (int i = 0; i < OLY_ARRAY_LEN(cases); i++)
        if (!rc_check_all(&cases[i])) fprintf(stderr, "    fft_rules case %d failed\n", i);
}

/* fft.c — the CPU kernel of fft (row in src/prims/fft.c), on FFTW3
 * (libfftw3 for c128 / f64, libfftw3f for c64 / f32).
 *
 * One FFTW guru64 plan covers a thread's whole share of the batch (howmany
 * transforms of the trailing dims, contiguous), run with the new-array execute
 * functions, which FFTW documents as thread-safe. Plans are made with
 * FFTW_ESTIMATE (no measuring: planning 2^20 points takes milliseconds, not
 * the seconds of FFTW_MEASURE, and leaves the arrays untouched) and cached
 * per (type, precision, lengths, howmany, alignment of both arrays) — a plan
 * runs only on arrays of the alignment it was made for. The FFTW planner is
 * not thread-safe: one mutex guards the cache, plan creation and plan
 * destruction; execution runs outside it. A full cache makes a plan per call
 * (destroyed under the mutex after use) instead of evicting one another
 * thread may be running.
 *
 * IRFFT's c2r plans overwrite their input (FFTW cannot preserve it for
 * rank > 1), so the kernel copies the operand into aligned scratch first.
 * FFTW computes unnormalised transforms: IFFT and IRFFT scale their output by
 * 1 / prod(fft_lengths) afterwards. c2r takes the real part of the DC and
 * Nyquist bins, as NumPy (and XLA) do. Plan memory is FFTW's own (fftw_malloc
 * aborts when memory runs out); the scratch goes through the funnel. */
#include "cpu/cpu.h"

#include <fftw3.h>
#include <pthread.h>

enum { CACHE_SLOTS = 512, CACHE_MAX = 256 /* entries; half the slots */ };

typedef struct plan_key {
    int type;        /* oly_fft_type */
    int dbl;         /* 1: double precision */
    int rank;
    int ain, aout;   /* fftw_alignment_of of the input and output */
    int64_t n[3];
    int64_t howmany;
} plan_key;

typedef struct plan_slot {
    bool used;
    plan_key key;
    void *plan; /* owned: fftw_plan or fftwf_plan (both pointers) */
} plan_slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the cache and the planner */
static plan_slot cache[CACHE_SLOTS];
static int n_cached;

static uint32_t key_hash(const plan_key *k)
{
    const unsigned char *b = (const unsigned char *)k;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 16777619u;
    return h & (CACHE_SLOTS - 1);
}

/* A new plan for key on arrays in / out (FFTW_ESTIMATE does not touch them);
 * NULL when FFTW cannot plan it. Call with the lock held. */
static void *make_plan(const plan_key *k, void *in, void *out)
{
    fftw_iodim64 dims[3], many;
    int r = k->rank;
    int64_t nh = k->n[r - 1] / 2 + 1;
    /* strides in elements of each side: complex sides of RFFT / IRFFT have nh
     * along the last dim, real sides n */
    int64_t sin = 1, sout = 1;
    for (int i = r - 1; i >= 0; i--) {
        int64_t nin = k->n[i], nout = k->n[i];
        if (i == r - 1 && k->type == OLY_FFT_RFFT) nout = nh;
        if (i == r - 1 && k->type == OLY_FFT_IRFFT) nin = nh;
        dims[i] = (fftw_iodim64){.n = k->n[i], .is = sin, .os = sout};
        sin *= nin;
        sout *= nout;
    }
    many = (fftw_iodim64){.n = k->howmany, .is = sin, .os = sout};
    unsigned flags = FFTW_ESTIMATE | (k->type == OLY_FFT_IRFFT ? FFTW_DESTROY_INPUT : 0);
    int sign = k->type == OLY_FFT_IFFT ? FFTW_BACKWARD : FFTW_FORWARD;
    /* fftw_iodim64 and fftwf_iodim64 are the same struct */
    if (k->dbl) {
        switch (k->type) {
        case OLY_FFT_RFFT: return fftw_plan_guru64_dft_r2c(r, dims, 1, &many, in, out, flags);
        case OLY_FFT_IRFFT: return fftw_plan_guru64_dft_c2r(r, dims, 1, &many, in, out, flags);
        default: return fftw_plan_guru64_dft(r, dims, 1, &many, in, out, sign, flags);
        }
    }
    fftwf_iodim64 fd[3], fm = {.n = many.n, .is = many.is, .os = many.os};
    for (int i = 0; i < r; i++) fd[i] = (fftwf_iodim64){.n = dims[i].n, .is = dims[i].is, .os = dims[i].os};
    switch (k->type) {
    case OLY_FFT_RFFT: return fftwf_plan_guru64_dft_r2c(r, fd, 1, &fm, in, out, flags);
    case OLY_FFT_IRFFT: return fftwf_plan_guru64_dft_c2r(r, fd, 1, &fm, in, out, flags);
    default: return fftwf_plan_guru64_dft(r, fd, 1, &fm, in, out, sign, flags);
    }
}

static void destroy_plan(const plan_key *k, void *plan)
{
    if (k->dbl) fftw_destroy_plan(plan);
    else fftwf_destroy_plan(plan);
}

/* The plan for key (cached, or made now); *temp says the caller must give it
 * back with release_plan. NULL when FFTW cannot plan. */
static void *get_plan(const plan_key *k, void *in, void *out, bool *temp)
{
    *temp = false;
    pthread_mutex_lock(&lock);
    uint32_t h = key_hash(k);
    while (cache[h].used) {
        if (memcmp(&cache[h].key, k, sizeof *k) == 0) {
            void *p = cache[h].plan;
            pthread_mutex_unlock(&lock);
            return p;
        }
        h = (h + 1) & (CACHE_SLOTS - 1);
    }
    void *p = make_plan(k, in, out);
    if (p && n_cached < CACHE_MAX) {
        cache[h] = (plan_slot){.used = true, .key = *k, .plan = p};
        n_cached++;
    } else {
        *temp = p != NULL;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

static void release_plan(const plan_key *k, void *plan)
{
    pthread_mutex_lock(&lock);
    destroy_plan(k, plan);
    pthread_mutex_unlock(&lock);
}

static void execute(const plan_key *k, void *plan, void *in, void *out)
{
    if (k->dbl) {
        switch (k->type) {
        case OLY_FFT_RFFT: fftw_execute_dft_r2c(plan, in, out); break;
        case OLY_FFT_IRFFT: fftw_execute_dft_c2r(plan, in, out); break;
        default: fftw_execute_dft(plan, in, out); break;
        }
    } else {
        switch (k->type) {
        case OLY_FFT_RFFT: fftwf_execute_dft_r2c(plan, in, out); break;
        case OLY_FFT_IRFFT: fftwf_execute_dft_c2r(plan, in, out); break;
        default: fftwf_execute_dft(plan, in, out); break;
        }
    }
}

static int alignment_of(bool dbl, void *p)
{
    return dbl ? fftw_alignment_of(p) : fftwf_alignment_of(p);
}

static void scale(void *out, int64_t n_reals, bool dbl, double s)
{
    if (dbl) {
        double *o = out;
        for (int64_t i = 0; i < n_reals; i++) o[i] *= s;
    } else {
        float *o = out, f = (float)s;
        for (int64_t i = 0; i < n_reals; i++) o[i] *= f;
    }
}

static oly_status fft_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_fft *p = ctx->params;
    const oly_aval *x = &ctx->in_aval[0], *y = &ctx->out_aval[0];
    int r = p->fft_lengths.n, type = p->fft_type;
    int64_t in_per = 1, out_per = 1, total = 1, batch = 1; /* elements per transform */
    for (int i = 0; i < x->rank; i++) {
        if (i < x->rank - r) batch *= x->dims[i];
        else in_per *= x->dims[i];
    }
    for (int i = y->rank - r; i < y->rank; i++) out_per *= y->dims[i];
    for (int i = 0; i < r; i++) total *= p->fft_lengths.v[i];
    int nth = ctx->nth < 1 ? 1 : ctx->nth;
    int64_t lo = batch * ctx->ith / nth, hi = batch * (ctx->ith + 1) / nth;
    if (hi <= lo) return OLY_OK;
    size_t ies = oly_dtype_size(x->dtype), oes = oly_dtype_size(y->dtype);
    bool dbl = x->dtype == OLY_FLOAT64 || x->dtype == OLY_COMPLEX128;
    char *in = (char *)ctx->in[0] + (size_t)(lo * in_per) * ies;
    char *out = (char *)ctx->out[0] + (size_t)(lo * out_per) * oes;
    size_t in_bytes = (size_t)((hi - lo) * in_per) * ies;
    void *scratch = NULL;
    if (type == OLY_FFT_IRFFT) { /* c2r destroys its input */
        scratch = oly__aligned_alloc(64, in_bytes);
        if (!scratch)
            return oly__error(OLY_ERR_NOMEM, "fft: out of memory for a %zu-byte IRFFT scratch",
                              in_bytes);
        memcpy(scratch, in, in_bytes);
        in = scratch;
    }
    plan_key k;
    memset(&k, 0, sizeof k); /* padding too: the key is hashed and compared as bytes */
    k.type = type;
    k.dbl = dbl;
    k.rank = r;
    for (int i = 0; i < r; i++) k.n[i] = p->fft_lengths.v[i];
    k.howmany = hi - lo;
    k.ain = alignment_of(dbl, in);
    k.aout = alignment_of(dbl, out);
    bool temp = false;
    void *plan = get_plan(&k, in, out, &temp);
    if (!plan) {
        free(scratch);
        return oly__error(OLY_ERR_UNSUPPORTED, "fft: FFTW could not plan %s over %s of %s",
                          type == OLY_FFT_FFT ? "FFT" : type == OLY_FFT_IFFT ? "IFFT"
                          : type == OLY_FFT_RFFT ? "RFFT" : "IRFFT",
                          oly__show_ints(&p->fft_lengths).s, oly__show_aval(x).s);
    }
    execute(&k, plan, in, out);
    if (temp) release_plan(&k, plan);
    free(scratch);
    if (type == OLY_FFT_IFFT || type == OLY_FFT_IRFFT) {
        int64_t reals = (hi - lo) * out_per * (type == OLY_FFT_IFFT ? 2 : 1);
        scale(out, reals, dbl, 1.0 / (double)total);
    }
    return OLY_OK;
}

const oly_cpu_kernel oly__cpu_fft = {.fn = fft_kernel};

/* ffi_kernel.c — the ffi_call rows of bench/run.py: the native row's work
 * (out = in * 0.5 + 1, f32) as an olympus FFI target, and its floor, the same
 * function called through a volatile function pointer in a C loop, chained as
 * the olympus side chains its calls. Built with the public header only, as an
 * FFI kernel library is; loaded with ctypes. */
#include <olympus.h>

oly_status oly_bench_ffi_affine(void *user, oly_callback_frame *frame);
float oly_bench_ffi_floor(float x, int64_t calls);
float oly_bench_scalar_loop(float x, int64_t n);

__attribute__((noinline)) static void affine_raw(const float *in, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * 0.5f + 1.0f;
}

static void (*volatile raw_fp)(const float *, float *, int64_t) = affine_raw;

oly_status oly_bench_ffi_affine(void *user, oly_callback_frame *frame)
{
    (void)user;
    const oly_aval *r = &frame->result_avals[0];
    int64_t n = 1;
    for (int d = 0; d < r->rank; d++) n *= r->dims[d];
    affine_raw(frame->args[0], frame->results[0], n);
    return OLY_OK;
}

/* x after `calls` chained calls through the function pointer. */
float oly_bench_ffi_floor(float x, int64_t calls)
{
    float a = x, b = 0;
    for (int64_t i = 0; i < calls; i++) {
        raw_fp(&a, &b, 1);
        a = b;
    }
    return a;
}

/* The fori-scalar rows' loop as compiled C (-O2, no -ffast-math: no FMA
 * contraction, as Numba compiles it without fastmath): x = x * 0.999 + 1, n
 * times. What Numba's @njit loop runs, for machines without Numba. */
float oly_bench_scalar_loop(float x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x = x * 0.999f + 1.0f;
    return x;
}

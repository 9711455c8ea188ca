/* ctypes_driver.c — a plain shared library (libolybench_ctypes.so, built by
 * bench/run.py) whose C loops call a ctypes callback n times: the "ctypes
 * callback from C" peer of the Python callback rows. Loaded with ctypes.CDLL, so
 * ctypes releases the GIL around the loop and each callback takes it back, as in
 * any C library that calls Python through ctypes. */
#include <stdint.h>

/* Scalar f32 by value: x <- cb(x), n times. */
float oly_bench_drive_f32(float (*cb)(float), float x, int64_t n);
float oly_bench_drive_f32(float (*cb)(float), float x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x = cb(x);
    return x;
}

/* Buffers: cb(in, out) n times, ping-ponging between a and b (a holds the first
 * value). Returns the buffer holding the last value, or NULL when cb failed. */
void *oly_bench_drive_buf(int (*cb)(const void *in, void *out), void *a, void *b, int64_t n);
void *oly_bench_drive_buf(int (*cb)(const void *in, void *out), void *a, void *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (cb(a, b) != 0) return (void *)0;
        void *t = a;
        a = b;
        b = t;
    }
    return a;
}

/* Same loop without results (the peer of debug.callback). */
int oly_bench_drive_void(int (*cb)(const void *in), const void *a, int64_t n);
int oly_bench_drive_void(int (*cb)(const void *in), const void *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (cb(a) != 0) return -1;
    return 0;
}

/* rms_norm.c — the C kernels of examples/ffi/rms_norm.py: RMS normalisation
 * over the last axis and its derivative, as olympus FFI targets.
 *
 *   y = x / sqrt(mean(x**2) + eps)                       (rms_norm)
 *   dx = r * ct - r**3 * x * mean(x * ct),  r = 1 / sqrt(mean(x**2) + eps)
 *                                                        (rms_norm_bwd)
 *
 * Every leading axis is one more row, so one call handles a whole vmapped
 * batch (vmap_method="broadcast_all"). float32 and float64; eps is the
 * attribute "eps". Built with nothing but olympus.h (the Makefile's
 * build/examples/ffi/librms_norm.so; by hand:
 *   gcc -shared -fPIC -O2 -I"$(python3 -c 'import olympus.ffi as f; print(f.include_dir())')" \
 *       rms_norm.c -o librms_norm.so -lm). */
#include <olympus.h>

#include <math.h>

oly_status rms_norm(void *user, oly_callback_frame *frame);
oly_status rms_norm_bwd(void *user, oly_callback_frame *frame);

/* Rows and row length of an aval of rank >= 1. */
static void rows_of(const oly_aval *a, int64_t *rows, int64_t *n)
{
    *n = a->dims[a->rank - 1];
    *rows = 1;
    for (int d = 0; d < a->rank - 1; d++) *rows *= a->dims[d];
}

/* The checks both kernels make: n_args float arguments of one shape (rank
 * >= 1) and one result of that shape and dtype; eps from the attributes. */
static oly_status check(oly_callback_frame *frame, int n_args, const char *who, double *eps)
{
    if (frame->n_args != n_args || frame->n_results != 1)
        return oly_ffi_fail(frame, OLY_ERR_INVALID, "%s: %d arguments and %d results, expected %d and 1",
                            who, frame->n_args, frame->n_results, n_args);
    const oly_aval *r = &frame->result_avals[0];
    if (r->rank < 1 || (r->dtype != OLY_FLOAT32 && r->dtype != OLY_FLOAT64))
        return oly_ffi_fail(frame, OLY_ERR_TYPE, "%s: expected float32 or float64 of rank >= 1", who);
    for (int i = 0; i < n_args; i++) {
        const oly_aval *a = &frame->arg_avals[i];
        int same = a->dtype == r->dtype && a->rank == r->rank;
        for (int d = 0; same && d < r->rank; d++) same = a->dims[d] == r->dims[d];
        if (!same)
            return oly_ffi_fail(frame, OLY_ERR_SHAPE, "%s: argument %d differs from the result in "
                                "shape or dtype", who, i);
    }
    oly_status st = oly_ffi_attr_f64(frame, "eps", eps);
    if (st != OLY_OK) return st;
    if (!(*eps >= 0))
        return oly_ffi_fail(frame, OLY_ERR_INVALID, "%s: eps must be >= 0, got %g", who, *eps);
    return OLY_OK;
}

/* One kernel body per element type. */
#define RMS_NORM(T)                                                                     \
    static void rms_norm_##T(const T *x, T *y, int64_t rows, int64_t n, double eps)     \
    {                                                                                   \
        for (int64_t i = 0; i < rows; i++, x += n, y += n) {                            \
            double ss = 0;                                                              \
            for (int64_t j = 0; j < n; j++) ss += (double)x[j] * x[j];                  \
            double r = 1.0 / sqrt(ss / (double)n + eps);                                \
            for (int64_t j = 0; j < n; j++) y[j] = (T)(x[j] * r);                       \
        }                                                                               \
    }                                                                                   \
    static void rms_norm_bwd_##T(const T *x, const T *ct, T *dx, int64_t rows, int64_t n, \
                                 double eps)                                            \
    {                                                                                   \
        for (int64_t i = 0; i < rows; i++, x += n, ct += n, dx += n) {                  \
            double ss = 0, xc = 0;                                                      \
            for (int64_t j = 0; j < n; j++) {                                           \
                ss += (double)x[j] * x[j];                                              \
                xc += (double)x[j] * ct[j];                                             \
            }                                                                           \
            double r = 1.0 / sqrt(ss / (double)n + eps);                                \
            double k = r * r * r * xc / (double)n;                                      \
            for (int64_t j = 0; j < n; j++) dx[j] = (T)(r * ct[j] - k * x[j]);          \
        }                                                                               \
    }

RMS_NORM(float)
RMS_NORM(double)

oly_status rms_norm(void *user, oly_callback_frame *frame)
{
    double eps;
    oly_status st = check(frame, 1, "rms_norm", &eps);
    if (st != OLY_OK) return st;
    int64_t rows, n;
    rows_of(&frame->result_avals[0], &rows, &n);
    if (frame->result_avals[0].dtype == OLY_FLOAT32)
        rms_norm_float(frame->args[0], frame->results[0], rows, n, eps);
    else
        rms_norm_double(frame->args[0], frame->results[0], rows, n, eps);
    return OLY_OK;
}

oly_status rms_norm_bwd(void *user, oly_callback_frame *frame)
{
    double eps;
    oly_status st = check(frame, 2, "rms_norm_bwd", &eps);
    if (st != OLY_OK) return st;
    int64_t rows, n;
    rows_of(&frame->result_avals[0], &rows, &n);
    if (frame->result_avals[0].dtype == OLY_FLOAT32)
        rms_norm_bwd_float(frame->args[0], frame->args[1], frame->results[0], rows, n, eps);
    else
        rms_norm_bwd_double(frame->args[0], frame->args[1], frame->results[0], rows, n, eps);
    return OLY_OK;
}

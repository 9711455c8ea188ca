/* ffi_kernels.c — the C kernels of tests/python/test_ffi.py, built by the
 * Makefile into $(BUILD)/libolympus_ffi_test.so with the public header only
 * (no olympus library linked, as an FFI kernel library is built) and loaded
 * with ctypes.
 *
 * Every kernel counts its calls and records the avals of its last call's
 * arguments (ffi_test_calls, ffi_test_last_*), and appends the first element
 * of its first argument (as a double) to a log: what the tests check call
 * counts, batching and order with. */
#include <olympus.h>

#include <math.h>
#include <stdatomic.h>

/* ---------------------------------------------------------------- bookkeeping */

#define LOG_MAX 4096

static atomic_long calls;
static atomic_long releases;
static int last_nargs = -1;
static oly_aval last_avals[8];
static double call_log[LOG_MAX];
static atomic_int log_len;

long ffi_test_calls(void);
long ffi_test_releases(void);
void ffi_test_reset(void);
int ffi_test_last_nargs(void);
int ffi_test_last_rank(int i);
long ffi_test_last_dim(int i, int d);
int ffi_test_log_len(void);
double ffi_test_log(int i);

long ffi_test_calls(void) { return atomic_load(&calls); }
long ffi_test_releases(void) { return atomic_load(&releases); }
void ffi_test_reset(void)
{
    atomic_store(&calls, 0);
    atomic_store(&log_len, 0);
    last_nargs = -1;
}
int ffi_test_last_nargs(void) { return last_nargs; }
int ffi_test_last_rank(int i) { return i >= 0 && i < 8 ? last_avals[i].rank : -1; }
long ffi_test_last_dim(int i, int d)
{
    return i >= 0 && i < 8 && d >= 0 && d < last_avals[i].rank ? (long)last_avals[i].dims[d] : -1;
}
int ffi_test_log_len(void) { return atomic_load(&log_len); }
double ffi_test_log(int i) { return i >= 0 && i < LOG_MAX ? call_log[i] : NAN; }

static int64_t size_of(const oly_aval *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->rank; d++) n *= a->dims[d];
    return n;
}

/* The first element of a numeric buffer as a double (NAN when empty or not f32/f64/i32). */
static double first(const oly_aval *a, const void *p)
{
    if (size_of(a) == 0) return NAN;
    switch (a->dtype) {
    case OLY_FLOAT32: return *(const float *)p;
    case OLY_FLOAT64: return *(const double *)p;
    case OLY_INT32: return *(const int32_t *)p;
    default: return NAN;
    }
}

static void record(const oly_callback_frame *f)
{
    atomic_fetch_add(&calls, 1);
    last_nargs = f->n_args;
    for (int i = 0; i < f->n_args && i < 8; i++) last_avals[i] = f->arg_avals[i];
    int k = atomic_fetch_add(&log_len, 1);
    if (k < LOG_MAX) call_log[k] = f->n_args ? first(&f->arg_avals[0], f->args[0]) : NAN;
}

/* ---------------------------------------------------------------- kernels */

oly_status ffi_test_axpy(void *user, oly_callback_frame *f);
oly_status ffi_test_add(void *user, oly_callback_frame *f);
oly_status ffi_test_copy(void *user, oly_callback_frame *f);
oly_status ffi_test_tick(void *user, oly_callback_frame *f);
oly_status ffi_test_two(void *user, oly_callback_frame *f);
oly_status ffi_test_get(void *user, oly_callback_frame *f);
oly_status ffi_test_fail(void *user, oly_callback_frame *f);
oly_status ffi_test_scale_user(void *user, oly_callback_frame *f);
oly_status ffi_test_accumulate(void *user, oly_callback_frame *f);
int ffi_test_last_in_place(void);
void ffi_test_release(void *user);

static atomic_int last_in_place = -1;

int ffi_test_last_in_place(void) { return atomic_load(&last_in_place); }

/* results[0] += y (f32), with results[0] aliased to argument 0: it starts
 * as x, in place or as a copy. Records which (ffi_test_last_in_place). */
oly_status ffi_test_accumulate(void *user, oly_callback_frame *f)
{
    record(f);
    if (f->n_args != 2 || f->n_results != 1 || f->result_avals[0].dtype != OLY_FLOAT32 ||
        size_of(&f->arg_avals[1]) != size_of(&f->result_avals[0]))
        return oly_ffi_fail(f, OLY_ERR_INVALID,
                            "accumulate: expected x, y and one result, f32 of one size");
    atomic_store(&last_in_place, f->results[0] == f->args[0]);
    const float *y = f->args[1];
    float *out = f->results[0];
    for (int64_t i = 0, n = size_of(&f->result_avals[0]); i < n; i++) out[i] += y[i];
    return OLY_OK;
}

/* results[0] = a * x + y for f32 or f64 x, y of one shape; a: attribute "a"
 * (default 1 when absent). */
oly_status ffi_test_axpy(void *user, oly_callback_frame *f)
{
    record(f);
    if (f->n_args != 2 || f->n_results != 1)
        return oly_ffi_fail(f, OLY_ERR_INVALID, "axpy: %d arguments and %d results, expected 2 and 1",
                            f->n_args, f->n_results);
    double a = 1.0;
    if (oly_ffi_attr_find(f, "a")) {
        oly_status st = oly_ffi_attr_f64(f, "a", &a);
        if (st != OLY_OK) return st;
    }
    const oly_aval *x = &f->arg_avals[0], *y = &f->arg_avals[1], *r = &f->result_avals[0];
    if (x->dtype != y->dtype || x->dtype != r->dtype || size_of(x) != size_of(r) ||
        size_of(y) != size_of(r))
        return oly_ffi_fail(f, OLY_ERR_SHAPE, "axpy: x, y and the result differ in dtype or size");
    int64_t n = size_of(r);
    if (r->dtype == OLY_FLOAT32) {
        const float *xs = f->args[0], *ys = f->args[1];
        float *out = f->results[0];
        for (int64_t i = 0; i < n; i++) out[i] = (float)a * xs[i] + ys[i];
    } else if (r->dtype == OLY_FLOAT64) {
        const double *xs = f->args[0], *ys = f->args[1];
        double *out = f->results[0];
        for (int64_t i = 0; i < n; i++) out[i] = a * xs[i] + ys[i];
    } else {
        return oly_ffi_fail(f, OLY_ERR_TYPE, "axpy: dtype %d is not float32 or float64",
                            (int)r->dtype);
    }
    return OLY_OK;
}

/* results[0] = x + y (f32), the smaller operand repeated over the result
 * (NumPy broadcasting of leading axes): what every vmap_method hands over. */
oly_status ffi_test_add(void *user, oly_callback_frame *f)
{
    record(f);
    if (f->n_args != 2 || f->n_results != 1 || f->result_avals[0].dtype != OLY_FLOAT32)
        return oly_ffi_fail(f, OLY_ERR_INVALID, "add: expected two f32 arguments and one f32 result");
    int64_t n = size_of(&f->result_avals[0]);
    int64_t nx = size_of(&f->arg_avals[0]), ny = size_of(&f->arg_avals[1]);
    if (nx == 0 || ny == 0 || n % nx || n % ny)
        return oly_ffi_fail(f, OLY_ERR_SHAPE, "add: sizes %lld and %lld do not tile %lld",
                            (long long)nx, (long long)ny, (long long)n);
    const float *x = f->args[0], *y = f->args[1];
    float *out = f->results[0];
    for (int64_t i = 0; i < n; i++) out[i] = x[i % nx] + y[i % ny];
    return OLY_OK;
}

static size_t elem_size(oly_dtype t)
{
    switch (t) {
    case OLY_BOOL: case OLY_INT8: case OLY_UINT8: return 1;
    case OLY_INT16: case OLY_UINT16: case OLY_FLOAT16: case OLY_BFLOAT16: return 2;
    case OLY_INT32: case OLY_UINT32: case OLY_FLOAT32: return 4;
    case OLY_COMPLEX128: return 16;
    default: return 8;
    }
}

/* results[i] = args[i], any dtype (same avals). */
oly_status ffi_test_copy(void *user, oly_callback_frame *f)
{
    record(f);
    if (f->n_args != f->n_results)
        return oly_ffi_fail(f, OLY_ERR_INVALID, "copy: %d arguments, %d results", f->n_args,
                            f->n_results);
    for (int i = 0; i < f->n_results; i++) {
        const oly_aval *a = &f->arg_avals[i], *r = &f->result_avals[i];
        if (size_of(a) != size_of(r) || a->dtype != r->dtype)
            return oly_ffi_fail(f, OLY_ERR_SHAPE, "copy: argument %d and result %d differ", i, i);
        memcpy(f->results[i], f->args[i], (size_t)size_of(r) * elem_size(r->dtype));
    }
    return OLY_OK;
}

/* No results: only counts (for has_side_effect). */
oly_status ffi_test_tick(void *user, oly_callback_frame *f)
{
    record(f);
    return f->n_results == 0 ? OLY_OK
                             : oly_ffi_fail(f, OLY_ERR_INVALID, "tick: expected no results");
}

/* Two results from one f32 x: x + 1 and 2 * x. */
oly_status ffi_test_two(void *user, oly_callback_frame *f)
{
    record(f);
    if (f->n_args != 1 || f->n_results != 2 || f->arg_avals[0].dtype != OLY_FLOAT32)
        return oly_ffi_fail(f, OLY_ERR_INVALID, "two: expected one f32 argument and two results");
    int64_t n = size_of(&f->arg_avals[0]);
    const float *x = f->args[0];
    float *a = f->results[0], *b = f->results[1];
    for (int64_t i = 0; i < n; i++) {
        a[i] = x[i] + 1.0f;
        b[i] = 2.0f * x[i];
    }
    return OLY_OK;
}

/* Reads the attribute named by the string attribute "which" with the reader
 * named by "as" and writes what it read into results[0], f64[4]:
 *   bool, i64, f64       [value, 0, 0, 0]
 *   str                  [bytes, first byte, last byte, 0]
 *   array_int32, array_int64, array_float32, array_float64
 *                        [sum, size, rank, first dim]
 *   find                 [kind, dtype, rank, value] (value: v.u for unsigned,
 *                        v.c[1] for complex, else v.f or v.i), all -1 if absent
 * Reader failures are returned as they are. */
oly_status ffi_test_get(void *user, oly_callback_frame *f)
{
    record(f);
    const char *which, *as;
    oly_status st;
    if ((st = oly_ffi_attr_str(f, "which", &which, NULL)) != OLY_OK) return st;
    if ((st = oly_ffi_attr_str(f, "as", &as, NULL)) != OLY_OK) return st;
    if (f->n_results != 1 || f->result_avals[0].dtype != OLY_FLOAT64 ||
        size_of(&f->result_avals[0]) != 4)
        return oly_ffi_fail(f, OLY_ERR_INVALID, "get: the result must be f64[4]");
    double *out = f->results[0];
    out[0] = out[1] = out[2] = out[3] = 0;
    if (strcmp(as, "bool") == 0) {
        bool b;
        if ((st = oly_ffi_attr_bool(f, which, &b)) != OLY_OK) return st;
        out[0] = b;
    } else if (strcmp(as, "i64") == 0) {
        int64_t v;
        if ((st = oly_ffi_attr_i64(f, which, &v)) != OLY_OK) return st;
        out[0] = (double)v;
    } else if (strcmp(as, "f64") == 0) {
        double v;
        if ((st = oly_ffi_attr_f64(f, which, &v)) != OLY_OK) return st;
        out[0] = v;
    } else if (strcmp(as, "str") == 0) {
        const char *s;
        int64_t n;
        if ((st = oly_ffi_attr_str(f, which, &s, &n)) != OLY_OK) return st;
        out[0] = (double)n;
        out[1] = n ? (unsigned char)s[0] : -1;
        out[2] = n ? (unsigned char)s[n - 1] : -1;
        out[3] = s[n] == '\0'; /* NUL-terminated */
    } else if (strncmp(as, "array_", 6) == 0) {
        oly_dtype t;
        const char *tn = as + 6;
        if (strcmp(tn, "int32") == 0)
            t = OLY_INT32;
        else if (strcmp(tn, "int64") == 0)
            t = OLY_INT64;
        else if (strcmp(tn, "float32") == 0)
            t = OLY_FLOAT32;
        else if (strcmp(tn, "float64") == 0)
            t = OLY_FLOAT64;
        else
            return oly_ffi_fail(f, OLY_ERR_INVALID, "get: no reader '%s'", as);
        const void *data;
        int64_t n;
        if ((st = oly_ffi_attr_array(f, which, t, &data, &n)) != OLY_OK) return st;
        const oly_ffi_attr *a = oly_ffi_attr_find(f, which);
        double sum = 0;
        for (int64_t i = 0; i < n; i++) {
            switch (t) {
            case OLY_INT32: sum += ((const int32_t *)data)[i]; break;
            case OLY_INT64: sum += (double)((const int64_t *)data)[i]; break;
            case OLY_FLOAT32: sum += ((const float *)data)[i]; break;
            default: sum += ((const double *)data)[i]; break;
            }
        }
        out[0] = sum;
        out[1] = (double)n;
        out[2] = a->aval.rank;
        out[3] = (double)a->aval.dims[0];
        if (((uintptr_t)data & 15) != 0)
            return oly_ffi_fail(f, OLY_ERR_INTERNAL, "get: array data is not 16-byte aligned");
    } else if (strcmp(as, "find") == 0) {
        const oly_ffi_attr *a = oly_ffi_attr_find(f, which);
        if (!a) {
            out[0] = out[1] = out[2] = out[3] = -1;
            return OLY_OK;
        }
        out[0] = a->kind;
        out[1] = a->kind == OLY_FFI_ATTR_STRING ? -1 : (double)a->aval.dtype;
        out[2] = a->kind == OLY_FFI_ATTR_STRING ? -1 : a->aval.rank;
        if (a->kind == OLY_FFI_ATTR_SCALAR) {
            oly_dtype t = a->scalar.dtype;
            out[3] = t >= OLY_UINT8 && t <= OLY_UINT64                 ? (double)a->scalar.v.u
                   : t == OLY_COMPLEX64 || t == OLY_COMPLEX128          ? a->scalar.v.c[1]
                   : t >= OLY_FLOAT16 && t <= OLY_FLOAT64               ? a->scalar.v.f
                                                                        : (double)a->scalar.v.i;
        }
    } else {
        return oly_ffi_fail(f, OLY_ERR_INVALID, "get: no reader '%s'", as);
    }
    return OLY_OK;
}

/* Fails with the status in attribute "status" and the message in "message";
 * with "silent" true it gives no message. */
oly_status ffi_test_fail(void *user, oly_callback_frame *f)
{
    record(f);
    int64_t status = OLY_ERR_CALLBACK;
    const char *msg = "no reason";
    bool silent = false;
    if (oly_ffi_attr_find(f, "status")) oly_ffi_attr_i64(f, "status", &status);
    if (oly_ffi_attr_find(f, "message")) oly_ffi_attr_str(f, "message", &msg, NULL);
    if (oly_ffi_attr_find(f, "silent")) oly_ffi_attr_bool(f, "silent", &silent);
    if (silent) return (oly_status)status;
    return oly_ffi_fail(f, (oly_status)status, "%s (target %s)", msg, f->ffi->target);
}

/* results[0] = x * user[0] (f32 x; user: a double the test owns). */
oly_status ffi_test_scale_user(void *user, oly_callback_frame *f)
{
    record(f);
    if (!user) return oly_ffi_fail(f, OLY_ERR_INVALID, "scale_user: user_data is NULL");
    double s = *(const double *)user;
    int64_t n = size_of(&f->result_avals[0]);
    const float *x = f->args[0];
    float *out = f->results[0];
    for (int64_t i = 0; i < n; i++) out[i] = (float)(s * x[i]);
    return OLY_OK;
}

void ffi_test_release(void *user)
{
    (void)user;
    atomic_fetch_add(&releases, 1);
}

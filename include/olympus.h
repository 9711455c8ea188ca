/* olympus.h — the one public header of olympus, an array JIT whose compiled
 * programs can call back into host code.
 *
 * Flow: build a program (oly_builder_*), optionally transform it (oly_program_dce),
 * run it (oly_program_run); or apply one primitive eagerly (oly_apply).
 * Every fallible call returns oly_status (OLY_OK == 0) and, on failure, leaves a
 * message in a per-thread buffer read back with oly_last_error().  Outputs are
 * written only on success.  Nothing here aborts on bad input: every call that
 * returns oly_status checks its pointers (NULL is OLY_ERR_INVALID with a
 * message, unless its doc line says the pointer may be NULL).  The accessors
 * that return a value directly (oly_array_aval, oly_array_data,
 * oly_program_num_inputs, oly_var_aval, oly_aval_size, ...) take no NULL; the
 * release functions accept NULL.
 *
 * Threads: arrays, programs and host functions are immutable after creation and
 * refcounted atomically, so they may be shared between threads; a builder is
 * owned by one thread.  Running programs is thread-safe.
 */
#ifndef OLYMPUS_H
#define OLYMPUS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: the library is built with hidden visibility, so these
 * names are all that libolympus.so exports (make check-layers verifies it). */
#if defined(__GNUC__)
#define OLY_API __attribute__((visibility("default")))
#else
#define OLY_API
#endif

#define OLY_MAX_RANK 16

/* ---------------------------------------------------------------- status */

typedef enum oly_status {
    OLY_OK = 0,
    OLY_ERR_INVALID,     /* bad argument or parameter value */
    OLY_ERR_TYPE,        /* dtype mismatch */
    OLY_ERR_SHAPE,       /* shape mismatch */
    OLY_ERR_UNSUPPORTED, /* a rule or kernel does not exist for this case */
    OLY_ERR_NOMEM,
    OLY_ERR_CALLBACK,    /* a host function failed; see oly_error_take_payload */
    OLY_ERR_INTERNAL,    /* a broken invariant: a bug in olympus */
    OLY_ERR_DISTRIBUTED, /* processes (MPI): no mpirun, a peer failed, a timeout */
    OLY_STATUS_COUNT
} oly_status;

/* The message of the last failure on this thread ("" if none). Borrowed; valid
 * until the next failing call on this thread. */
OLY_API const char *oly_last_error(void);
OLY_API const char *oly_status_name(oly_status s);
/* Attach an opaque payload (e.g. a host-language exception) to the current
 * error; free_fn releases it if nobody takes it. Replaces an earlier payload. */
OLY_API void oly_error_set_payload(void *payload, void (*free_fn)(void *));
/* Take ownership of this thread's payload (NULL if none) and its destructor. */
OLY_API void *oly_error_take_payload(void (**free_fn)(void *));
OLY_API void oly_error_clear(void);

/* Fault injection, for tests: the allocation n+1 from now (n = 0: the next
 * one), counting every allocation of the library on any thread, fails as if
 * memory were exhausted; the ones after it succeed. n < 0 disarms. */
OLY_API void oly_fault_inject_alloc(long n);
/* The same, counting only the calling thread's allocations (other threads,
 * such as the outfeed's receiver, neither fail nor use up the count). */
OLY_API void oly_fault_inject_alloc_this_thread(long n);
/* Allocations left before the injected failure (negative: disarmed or spent).
 * Arming with a large n, running a workload and reading this back counts the
 * workload's allocations. */
OLY_API long oly_fault_inject_left(void);

/* ---------------------------------------------------------------- dtypes */

typedef enum oly_dtype {
    OLY_BOOL,
    OLY_INT8, OLY_INT16, OLY_INT32, OLY_INT64,
    OLY_UINT8, OLY_UINT16, OLY_UINT32, OLY_UINT64,
    OLY_FLOAT16, OLY_BFLOAT16, OLY_FLOAT32, OLY_FLOAT64,
    OLY_COMPLEX64, OLY_COMPLEX128,
    OLY_DTYPE_COUNT
} oly_dtype;

OLY_API size_t oly_dtype_size(oly_dtype t);
OLY_API const char *oly_dtype_name(oly_dtype t);       /* NumPy name: "float32", "bool" */
OLY_API const char *oly_dtype_short_name(oly_dtype t); /* printer name: "f32", "bool", "bf16", "c64" */
OLY_API oly_status oly_dtype_from_name(const char *name, oly_dtype *out); /* accepts both forms */
OLY_API bool oly_dtype_is_bool(oly_dtype t);
OLY_API bool oly_dtype_is_signed_int(oly_dtype t);
OLY_API bool oly_dtype_is_unsigned_int(oly_dtype t);
OLY_API bool oly_dtype_is_int(oly_dtype t);     /* signed or unsigned */
OLY_API bool oly_dtype_is_float(oly_dtype t);   /* f16 bf16 f32 f64 */
OLY_API bool oly_dtype_is_complex(oly_dtype t);
OLY_API bool oly_dtype_is_inexact(oly_dtype t); /* float or complex */

/* The x64 switch: off (default) means 64-bit types canonicalize to 32-bit ones
 * and the default float/int are float32/int32. Initialised from
 * OLYMPUS_ENABLE_X64. Process-wide. */
OLY_API void oly_set_x64(bool on);
OLY_API bool oly_x64_enabled(void);
OLY_API oly_dtype oly_dtype_canonicalize(oly_dtype t); /* x64 off: i64->i32 u64->u32 f64->f32 c128->c64 */
OLY_API oly_dtype oly_default_float(void);
OLY_API oly_dtype oly_default_int(void);
/* JAX's type promotion lattice with weak types (Python scalars are weak):
 * a weak operand adopts the other's dtype within its kind; bool < int < float < complex.
 * *weak_out (as jnp.result_type) is true when both are weak, or when one is
 * weak and the join is a weak node (i32 + weak f -> weak f32); never for bool.
 * Result is canonicalized. */
OLY_API oly_dtype oly_dtype_promote(oly_dtype a, bool weak_a, oly_dtype b, bool weak_b, bool *weak_out);

/* ---------------------------------------------------------------- avals */

/* An abstract value: dtype and static shape. weak marks a value that came from
 * a Python scalar (it only affects promotion). */
typedef struct oly_aval {
    oly_dtype dtype;
    int rank;
    bool weak;
    int64_t dims[OLY_MAX_RANK];
} oly_aval;

/* Fills *out; fails on rank > OLY_MAX_RANK or a negative dim. */
OLY_API oly_status oly_aval_make(oly_dtype t, int rank, const int64_t *dims, oly_aval *out);
OLY_API int64_t oly_aval_size(const oly_aval *a);   /* element count (1 for rank 0) */
OLY_API size_t oly_aval_nbytes(const oly_aval *a);
OLY_API bool oly_aval_equal(const oly_aval *a, const oly_aval *b); /* dtype and shape; ignores weak */
/* "f32[5,3]" (the printer's form). Returns the length it wanted, like snprintf. */
OLY_API int oly_aval_format(char *buf, size_t n, const oly_aval *a);

/* A scalar value of some dtype, used for literals. Stored widened:
 * bool/ints in i (or u for unsigned), floats in f, complex in re/im. */
typedef struct oly_scalar {
    oly_dtype dtype;
    bool weak;
    union {
        int64_t i;
        uint64_t u;
        double f;
        double c[2];
    } v;
} oly_scalar;

/* Write the scalar converted to dtype t into dst (oly_dtype_size(t) bytes). */
OLY_API void oly_scalar_store(const oly_scalar *s, oly_dtype t, void *dst);
/* Read one element of dtype t at src. */
OLY_API oly_scalar oly_scalar_load(oly_dtype t, const void *src);

/* ---------------------------------------------------------------- arrays */

/* An immutable, C-contiguous, refcounted array on one device. */
typedef struct oly_array oly_array;

/* New zero-filled array. */
OLY_API oly_status oly_array_new(const oly_aval *aval, oly_array **out);
/* New array holding a copy of nbytes at data. */
OLY_API oly_status oly_array_from_data(const oly_aval *aval, const void *data, oly_array **out);
/* Zero-copy view of caller memory; release(owner) is called when the last
 * reference goes (release may be NULL). The memory must stay valid and unchanged. */
OLY_API oly_status oly_array_wrap(const oly_aval *aval, void *data, void (*release)(void *owner),
                          void *owner, oly_array **out);
/* Same buffer, another aval of equal byte size (reshape, bitcast-free views). */
OLY_API oly_status oly_array_view(oly_array *a, const oly_aval *aval, oly_array **out);
OLY_API oly_array *oly_array_retain(oly_array *a);
OLY_API void oly_array_release(oly_array *a); /* accepts NULL */
OLY_API const oly_aval *oly_array_aval(const oly_array *a);
OLY_API const void *oly_array_data(const oly_array *a);
/* Writable pointer: only for the creator of a fresh array before sharing it. */
OLY_API void *oly_array_mutable_data(oly_array *a);
OLY_API int oly_array_device(const oly_array *a);
/* The array committed to device (CPU devices share memory: no copy is made).
 * Computations on committed arrays run on their device, and their results are
 * committed there too. */
OLY_API oly_status oly_array_put(oly_array *a, int device, oly_array **out);
OLY_API bool oly_array_committed(const oly_array *a);
/* Where a computation on arrays runs: the device of its committed arrays (all
 * must agree, else INVALID naming two that differ), else device 0. */
OLY_API oly_status oly_placement(oly_array *const *arrays, int n, int *device, bool *committed);
/* Arrays returned by oly_program_run may be futures: their producer is queued
 * on a device stream. oly_array_data waits for it; oly_array_wait waits and
 * reports that producer's failure (the payload goes to the first caller).
 * oly_array_ready says, without waiting, whether the data is there. */
OLY_API oly_status oly_array_wait(oly_array *a);
OLY_API bool oly_array_ready(const oly_array *a);

/* ---------------------------------------------------------------- devices */

/* OLYMPUS_NUM_CPU_DEVICES (default 1) CPU devices, numbered from 0. */
OLY_API int oly_device_count(void);
OLY_API const char *oly_device_kind(int device); /* "cpu" */
/* Sets the device count before the devices are first used (else INVALID,
 * unless n is the count already in use). */
OLY_API oly_status oly_set_device_count(int n);

/* ---------------------------------------------------------------- processes (MPI) */

/* Many processes under mpirun (src/rt/mpi.c; docs/design.md "Processes
 * (MPI)"). Built without MPI, oly_distributed_available() is false and the
 * calls below return OLY_ERR_UNSUPPORTED. The collective calls are made by
 * every process in the same order. */
typedef enum oly_collective_op {
    OLY_COLLECTIVE_SUM, OLY_COLLECTIVE_MAX, OLY_COLLECTIVE_MIN, OLY_COLLECTIVE_OP_COUNT
} oly_collective_op;
OLY_API bool oly_distributed_available(void);
/* Joins the processes of an mpirun job (once; OK again while joined).
 * OLY_ERR_DISTRIBUTED when not started by mpirun, after a shutdown, or when
 * processes have different OLYMPUS_NUM_CPU_DEVICES. Collective. */
OLY_API oly_status oly_distributed_initialize(void);
/* Leaves the job (also done at exit); OK when not joined. Collective. */
OLY_API oly_status oly_distributed_shutdown(void);
OLY_API bool oly_distributed_is_initialized(void);
OLY_API int oly_process_index(void); /* 0 when not joined */
OLY_API int oly_process_count(void); /* 1 when not joined */
/* This process failed: every peer's current or next collective fails with
 * OLY_ERR_DISTRIBUTED naming it and message (any thread; not collective). */
OLY_API void oly_distributed_fail(const char *message);
/* recv = op over every process's send (count elements of t; send == recv: in
 * place), through the transport collectives use. Collective. */
OLY_API oly_status oly_distributed_allreduce(const void *send, void *recv, int64_t count,
                                             oly_dtype t, oly_collective_op op);

/* ---------------------------------------------------------------- CPU kernel level */

/* The instruction set the CPU kernels use, chosen once when the library loads:
 * the best the CPU and the OS support (CPUID, and XGETBV for the OS's saving of
 * the vector registers), or OLYMPUS_CPU_LEVEL (portable | avx2 | avx512) when
 * set, never above what is supported (a level above, or an unknown name, is
 * reported on stderr once and the supported best is used instead).
 * OLYMPUS_NO_SIMD=1 (older name) means portable. Results agree across levels
 * within each function's documented accuracy (bitwise for exact operations). */
typedef enum oly_cpu_level {
    OLY_CPU_LEVEL_PORTABLE = 0, /* the compiler's baseline x86-64 code */
    OLY_CPU_LEVEL_AVX2 = 1,     /* AVX2 and FMA */
    OLY_CPU_LEVEL_AVX512 = 2,   /* AVX-512 F, DQ, BW and VL */
    OLY_CPU_LEVEL_COUNT
} oly_cpu_level;
/* The level in use. Thread-safe. */
OLY_API oly_cpu_level oly_cpu_level_get(void);
/* The best level this CPU and OS support (portable off x86-64 gcc builds). */
OLY_API oly_cpu_level oly_cpu_level_max(void);
/* "portable", "avx2", "avx512"; "?" for anything else. */
OLY_API const char *oly_cpu_level_name(oly_cpu_level level);

/* ---------------------------------------------------------------- host functions */

/* What a host function sees when a program calls it. Argument buffers are
 * read-only and borrowed for the call; the host function must fill every result
 * buffer (result_avals[i] says its shape and dtype) or fail.
 * buffer_callback: results are written in place (a result aliased to an
 * argument arrives holding that argument, and the argument's pointer is the
 * result's: they share memory); arg_arrays is NULL. */
typedef struct oly_callback_frame {
    int n_args;
    const void *const *args;
    const oly_aval *arg_avals;
    /* The same arguments as arrays: a host function may retain one to keep it
     * past the call (its contents never change). NULL for buffer_callback. */
    oly_array *const *arg_arrays;
    int n_results;
    void *const *results;
    const oly_aval *result_avals;
    int device;
    const char *kind;   /* primitive name: "pure_callback", "io_callback", ... */
    /* olympus.ffi calls only: the call's attributes and the buffer for the
     * kernel's error message ("FFI kernels" below); NULL otherwise. */
    const struct oly_ffi_ctx *ffi;
    /* outside_call only (host_callback): the transformations applied to the
     * tapped value, innermost first, ';'-separated: "batch(0,None)",
     * "transpose". NULL or "" when none. */
    const char *transforms;
    /* Which batch element this call serves: under vmap with one call per
     * element, its index at each vmap level, outermost first (n_batch
     * entries; 0 and NULL outside such a vmap). */
    int n_batch;
    const int64_t *batch_index;
    /* Which member of a device group (pmap, shard_map) runs this call: its
     * index along each named axis of the group's mesh (n_axes names and
     * indices, mesh order; 0 and NULL outside a group). */
    int n_axes;
    const char *const *axis_names;
    const int64_t *axis_index;
} oly_callback_frame;

/* Returns OLY_OK, or fails with a message (oly__error style through
 * oly_host_fail) and optionally a payload set with oly_error_set_payload. */
typedef oly_status (*oly_host_call_fn)(void *user, oly_callback_frame *frame);

typedef struct oly_host_fn oly_host_fn;

/* A refcounted host function. name is copied. release(user) runs when the last
 * reference goes (from any thread; may be NULL). */
OLY_API oly_status oly_host_fn_new(const char *name, oly_host_call_fn call, void *user,
                           void (*release)(void *user), oly_host_fn **out);
OLY_API oly_host_fn *oly_host_fn_retain(oly_host_fn *f);
OLY_API void oly_host_fn_release(oly_host_fn *f);
OLY_API const char *oly_host_fn_name(const oly_host_fn *f);
/* Declares that f never keeps an argument past a call (it reads args only):
 * programs compiled from then on pass its arguments as plain buffers and
 * frame->arg_arrays is NULL, which saves an array and a copy per call (a
 * loop body calling f runs without them). Call it before f is bound. */
OLY_API void oly_host_fn_borrow_args(oly_host_fn *f);
OLY_API void *oly_host_fn_user(const oly_host_fn *f);
/* For a host function to report failure: sets the message and returns status. */
OLY_API oly_status oly_host_fail(oly_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- outfeed
 * Taps hand values to the host without waiting for the host function: one
 * bounded queue and one receiver thread per device (src/core/outfeed.c). */

/* Queues fn(arrays) on device's receiver; the arrays are retained, not
 * copied. Waits while the device's queue is over capacity (never drops). */
OLY_API oly_status oly_outfeed_send(int device, oly_host_fn *fn, const char *transforms,
                                    oly_array *const *arrays, int n);
/* Waits until everything sent before it, to every device, was consumed; then
 * reports (once) the last host-function failure since the previous barrier:
 * OLY_ERR_CALLBACK with its message and payload. */
OLY_API oly_status oly_outfeed_barrier(void);
/* Drains every queue and stops the receivers; the next send starts them again. */
OLY_API void oly_outfeed_stop(void);
/* Bytes a device's queue may hold (default 256e6; at least 1). */
OLY_API oly_status oly_outfeed_set_capacity(size_t bytes);
OLY_API size_t oly_outfeed_capacity(void);
/* The most bytes device's queue ever held (records and their arrays). */
OLY_API size_t oly_outfeed_peak_bytes(int device);
/* Called around every wait of a sender or barrier (enter's result is handed
 * to leave): an embedder releases its interpreter lock there. */
OLY_API void oly_set_blocking_hooks(void *(*enter)(void), void (*leave)(void *));
/* Taken by a receiver around a batch of host-function calls (acquire's result
 * is handed to release): an embedder takes its interpreter lock there once
 * per batch instead of once per call. */
OLY_API void oly_set_host_lock_hooks(void *(*acquire)(void), void (*release)(void *));

/* ---------------------------------------------------------------- callback statistics
 * While enabled, every host-function call a callback kernel makes
 * (pure_callback, io_callback, debug_callback, buffer_callback,
 * host_callback's call, FFI targets) is counted per (host function, flavour,
 * device): calls, failures, wall time (total and max) and the bytes of its
 * arguments and results. Taps are called by the outfeed's receiver, not by a
 * kernel: their host function reports itself with oly_callback_stats_record.
 * Disabled (the default), a call costs one relaxed atomic load and a branch.
 * Thread-safe; the table retains each host function it counts until a reset. */
typedef struct oly_callback_stat {
    oly_host_fn *fn;      /* retained by the snapshot; oly_callback_stats_free releases it */
    const char *flavour;  /* a static string: "pure_callback", "io_callback(ordered)", ... */
    int device;
    uint64_t calls, errors, total_ns, max_ns, bytes_in, bytes_out;
} oly_callback_stat;

OLY_API void oly_callback_stats_enable(bool on);
OLY_API bool oly_callback_stats_enabled(void);
/* Counts one call of fn that took ns nanoseconds (failed: !ok). flavour must
 * live as long as the process (a string literal). Does nothing when disabled;
 * a row that cannot be allocated is counted by oly_callback_stats_dropped. */
OLY_API void oly_callback_stats_record(oly_host_fn *fn, const char *flavour, int device,
                                       uint64_t ns, bool ok, uint64_t bytes_in,
                                       uint64_t bytes_out);
/* A copy of the table: *out (free with oly_callback_stats_free) holds *n rows,
 * each retaining its host function. With reset, the table is emptied in the
 * same step, so no call is counted twice or lost between the two. */
OLY_API oly_status oly_callback_stats_snapshot(bool reset, oly_callback_stat **out, int *n);
OLY_API void oly_callback_stats_free(oly_callback_stat *stats, int n);
/* Calls not counted because a new row could not be allocated. */
OLY_API uint64_t oly_callback_stats_dropped(void);
/* Monotonic clock in nanoseconds (the one the statistics use). */
OLY_API uint64_t oly_callback_stats_now(void);

/* ---------------------------------------------------------------- effects */

enum {
    OLY_EFFECT_IO = 1u << 0,
    OLY_EFFECT_ORDERED_IO = 1u << 1,
    OLY_EFFECT_DEBUG = 1u << 2,
    OLY_EFFECT_ORDERED_DEBUG = 1u << 3,
    OLY_EFFECT_BUFFER_CALLBACK = 1u << 4,
    OLY_EFFECT_OUTFEED = 1u << 5,
};
#define OLY_EFFECTS_ORDERED (OLY_EFFECT_ORDERED_IO | OLY_EFFECT_ORDERED_DEBUG)

/* ---------------------------------------------------------------- primitive params */

/* Small integer lists (axes, shapes, permutations) live inline in params. */
typedef struct oly_ints {
    int n;
    int64_t v[OLY_MAX_RANK];
} oly_ints;

/* Each primitive's params struct is described by a field table; the generic
 * params code (hash, equality, print, copy, free, front-end parsing) walks it. */
typedef enum oly_field_kind {
    OLY_FIELD_INT,     /* int64_t */
    OLY_FIELD_BOOL,    /* bool */
    OLY_FIELD_FLOAT,   /* double */
    OLY_FIELD_DTYPE,   /* oly_dtype */
    OLY_FIELD_INTS,    /* oly_ints */
    OLY_FIELD_ENUM,    /* int, printed by enum_names[value] */
    OLY_FIELD_STR,     /* const char * (copied into the program's arena) */
    OLY_FIELD_AVALS,   /* const oly_aval * with its int count at count_offset (copied) */
    OLY_FIELD_HOST_FN, /* oly_host_fn * (retained by the copy, released with it) */
    OLY_FIELD_THUNK,   /* oly_thunk * (retained by the copy, released with it) */
    OLY_FIELD_ALIASES, /* const oly_io_alias * with its int count at count_offset (copied) */
    OLY_FIELD_KIND_COUNT
} oly_field_kind;

typedef struct oly_param_field {
    const char *name;
    oly_field_kind kind;
    size_t offset;
    size_t count_offset;            /* OLY_FIELD_AVALS and OLY_FIELD_ALIASES only */
    const char *const *enum_names;  /* OLY_FIELD_ENUM only, NULL-terminated */
    bool hidden;                    /* not printed */
} oly_param_field;

/* Params of the standard primitives. A primitive with no params takes NULL. */
typedef struct oly_params_convert { oly_dtype new_dtype; bool weak; } oly_params_convert;
typedef struct oly_params_integer_pow { int64_t y; } oly_params_integer_pow;
/* round: rounding_method 0 = half away from zero (lax default), 1 = half to even (jnp.round). */
typedef struct oly_params_round { int rounding_method; } oly_params_round;
typedef struct oly_params_broadcast_in_dim { oly_ints shape, broadcast_dimensions; } oly_params_broadcast_in_dim;
typedef struct oly_params_reshape { oly_ints new_sizes; } oly_params_reshape;
typedef struct oly_params_transpose { oly_ints permutation; } oly_params_transpose;
typedef struct oly_params_dims { oly_ints dimensions; } oly_params_dims; /* squeeze, expand_dims */
typedef struct oly_params_slice { oly_ints start_indices, limit_indices, strides; } oly_params_slice;
typedef struct oly_params_dynamic_slice { oly_ints slice_sizes; } oly_params_dynamic_slice;
typedef struct oly_params_concatenate { int64_t dimension; } oly_params_concatenate;
typedef struct oly_params_pad { oly_ints lo, hi, interior; } oly_params_pad;
typedef struct oly_params_iota { oly_dtype dtype; oly_ints shape; int64_t dimension; } oly_params_iota;
typedef struct oly_params_reduce { oly_ints axes; } oly_params_reduce;
typedef struct oly_params_argminmax { oly_ints axes; oly_dtype index_dtype; } oly_params_argminmax;
typedef struct oly_params_cumulative { int64_t axis; bool reverse; } oly_params_cumulative;
/* sort(*operands): all of one shape, sorted along dimension, lexicographically
 * by the first num_keys operands (the others are permuted along); outputs the
 * sorted operands. Floats order NaNs last; the CPU kernel is always stable.
 * top_k(operand): the k largest along the last axis, descending (ties: lower
 * index first); outputs (values, int32 indices). */
typedef struct oly_params_sort { int64_t dimension; bool is_stable; int64_t num_keys; } oly_params_sort;
typedef struct oly_params_top_k { int64_t k; } oly_params_top_k;
/* gather(operand, indices) and scatter*(operand, indices, updates): JAX's
 * lax.gather / lax.scatter dimension numbers, with the index vector along the
 * last axis of indices. gather reads, for each index vector, a window of
 * slice_sizes at start index indices[..., k] along operand dim
 * start_index_map[k] (and at the index's own position along each
 * operand_batching_dims[i] / start_indices_batching_dims[i] pair); the window's
 * dims other than collapsed_slice_dims and operand_batching_dims land at the
 * output's offset_dims, the index's batch dims at the others, in order.
 * scatter writes such windows of updates (update_window_dims; inserted_window_dims
 * and operand_batching_dims are the window's size-1 dims) into a copy of
 * operand, combining by the row: set (scatter; the last update in index order
 * wins), add, mul, min, max. mode (oly_gather_mode) says what an index whose
 * window does not fit does: clip clamps the start so the window fits; fill
 * reads fill_value (gather) or drops the update (scatter);
 * promise_in_bounds is the caller's promise, kept safe here as clip (gather)
 * and drop (scatter). fill_value NaN means the dtype's default: NaN, the most
 * negative signed or the largest unsigned integer, true. */
typedef enum oly_gather_mode {
    OLY_GATHER_CLIP, OLY_GATHER_FILL_OR_DROP, OLY_GATHER_PROMISE_IN_BOUNDS, OLY_GATHER_MODE_COUNT
} oly_gather_mode;
typedef struct oly_params_gather {
    oly_ints offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims,
        start_indices_batching_dims, slice_sizes;
    int mode;
    double fill_value;
    bool indices_are_sorted, unique_indices;
} oly_params_gather;
typedef struct oly_params_scatter {
    oly_ints update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
        operand_batching_dims, scatter_indices_batching_dims;
    int mode;
    bool indices_are_sorted, unique_indices;
} oly_params_scatter;
/* fft(operand): JAX's lax.fft over the trailing len(fft_lengths) dims (1 to 3),
 * batched over the leading ones. fft_type (oly_fft_type): FFT and IFFT map
 * c64 / c128 to the same dtype, the trailing dims equal to fft_lengths; RFFT
 * maps f32 / f64 to c64 / c128, the last dim n becoming n / 2 + 1; IRFFT maps
 * c64 / c128 with trailing dims fft_lengths, except the last one
 * fft_lengths[-1] / 2 + 1, to f32 / f64 with trailing dims fft_lengths. FFT and
 * RFFT are unnormalised (sign -1), IFFT and IRFFT scaled by 1 / prod(fft_lengths),
 * as XLA; IRFFT ignores the imaginary parts of the DC and Nyquist bins. */
typedef enum oly_fft_type {
    OLY_FFT_FFT, OLY_FFT_IFFT, OLY_FFT_RFFT, OLY_FFT_IRFFT, OLY_FFT_TYPE_COUNT
} oly_fft_type;
typedef struct oly_params_fft { int fft_type; oly_ints fft_lengths; } oly_params_fft;
typedef struct oly_params_dot_general {
    oly_ints lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
} oly_params_dot_general;
/* Matrix factorisations (JAX's lax.linalg primitives), on f32/f64/c64/c128
 * operands [..., m, n] batched over the leading dims. A failed factorisation
 * (not positive definite, no convergence) gives NaNs, as JAX does.
 *   cholesky(a [..,n,n]) -> l: the lower factor of a = l l^H (a's lower
 *     triangle is read); no params.
 *   triangular_solve(a, b): x with op(a) x = b (left_side) or x op(a) = b;
 *     op conjugates / transposes as asked; a's lower or upper triangle is read,
 *     its diagonal taken as ones with unit_diagonal.
 *   lu(a [..,m,n]) -> (lu, pivots int32 [..,min(m,n)], permutation int32
 *     [..,m]): a[permutation] = l u (l unit lower, packed with u); no params.
 *   qr(a) -> (q, r): full_matrices gives q [..,m,m], r [..,m,n]; else
 *     q [..,m,k], r [..,k,n] with k = min(m, n).
 *   eigh(a [..,n,n]) -> (v, w real [..,n]): a v = v diag(w), w ascending
 *     (LAPACK sorts, so sort_eigenvalues=False gives them sorted too); lower
 *     says which triangle of a is read.
 *   svd(a) -> (s real [..,k], u, vh) (only s without compute_uv): a = u
 *     diag(s) vh, s descending; u [..,m,m] and vh [..,n,n] with full_matrices.
 *   eig(a [..,n,n]) -> (w complex [..,n], vl if compute_left_eigenvectors, vr
 *     if compute_right_eigenvectors): complex eigenvectors as columns, unit
 *     norm (LAPACK's geev). */
typedef struct oly_params_triangular_solve {
    bool left_side, lower, transpose_a, conjugate_a, unit_diagonal;
} oly_params_triangular_solve;
typedef struct oly_params_qr { bool full_matrices; } oly_params_qr;
typedef struct oly_params_eigh { bool lower, sort_eigenvalues; } oly_params_eigh;
typedef struct oly_params_svd { bool full_matrices, compute_uv; } oly_params_svd;
typedef struct oly_params_eig {
    bool compute_left_eigenvectors, compute_right_eigenvectors;
} oly_params_eig;
/* pjit: a call of the nested program eqn->sub[0]; name is for printing.
 * n_out (hidden) must equal sub[0]'s output count: the binder sets it, since
 * the output count is computed from params alone. */
typedef struct oly_params_call { const char *name; int64_t n_out; } oly_params_call;
/* pmap (src/prims/pmap.c): sub[0], the per-member body, run once per member
 * of a mesh (oly_program_run_group) whose axis names are axis_name (the tuple
 * text the collectives use, "('i',)"), sizes and devices (the tuple text of
 * one device per member, "(0, 1, 2, 3)"); every input and output carries a
 * leading member axis of size prod(sizes), and member k gets slice k. n_out
 * (hidden) = sub[0]'s output count. */
typedef struct oly_params_pmap {
    const char *axis_name;
    oly_ints sizes;
    const char *devices;
    int64_t n_out;
} oly_params_pmap;

/* Collectives (src/prims/collective.c), JAX's lax.psum family. Their meaning
 * comes from the named axis they act over, which an enclosing
 * oly_program_vmap_named (Python: vmap(axis_name=...)) binds; outside one the
 * name is unbound and running the equation fails. Axis names are written as
 * the tuple text of Python strings, "('i',)" or "('i', 'j')" (a name holds no
 * quote or backslash), which is also how they print.
 *   psum, pmax, pmin(*xs): each output is its input's all-reduce over the
 *     named axes (one or more); shapes unchanged.
 *   all_gather(x): the x of every index along axis_name (one name, of size
 *     axis_size) stacked at a new dim all_gather_dimension, or concatenated
 *     along that dim when tiled.
 *   reduce_scatter(x) (lax.psum_scatter): the psum of x, of which index k keeps
 *     block k along scatter_dimension: untiled, that dim has size axis_size
 *     and is removed; tiled, it is divided by axis_size.
 *   ppermute(x): index d receives x of index s for each pair (s, d) in perm,
 *     the tuple text of int pairs "((0, 1), (1, 0))" (sources distinct,
 *     destinations distinct); indices no pair names receive zeros.
 *   all_to_all(x): split_axis (divisible by axis_size) is cut in axis_size
 *     blocks, block k goes to index k, and the blocks received are
 *     concatenated along concat_axis in index order (JAX's primitive: its
 *     tiled=False form is an expand_dims / squeeze around this one).
 *   axis_index(): int32[], the position along axis_name. */
typedef struct oly_params_psum { const char *axes; } oly_params_psum;
typedef struct oly_params_all_gather {
    int64_t all_gather_dimension;
    const char *axis_name;
    int64_t axis_size;
    bool tiled;
} oly_params_all_gather;
typedef struct oly_params_reduce_scatter {
    const char *axis_name;
    int64_t axis_size, scatter_dimension;
    bool tiled;
} oly_params_reduce_scatter;
typedef struct oly_params_ppermute { const char *axis_name, *perm; } oly_params_ppermute;
typedef struct oly_params_all_to_all {
    const char *axis_name;
    int64_t axis_size, concat_axis, split_axis;
} oly_params_all_to_all;
typedef struct oly_params_axis_index { const char *axis_name; } oly_params_axis_index;

/* Control flow (src/prims/cond.c, loop.c), JAX's conventions. Sub-programs are the
 * equation's nested programs.
 * cond(index, *ops): subs = branches (>= 1), each ops -> outputs of the same
 *   avals. index is int32[] (clamped to [0, n_branches-1]) or bool[] (2
 *   branches: False runs branch 0). n_out (hidden) = the branches' output count.
 * while(*cond_consts, *body_consts, *init): subs = [cond, body];
 *   cond(cond_consts, carry) -> bool[]; body(body_consts, carry) -> carry;
 *   outputs = the final carry (count = n_in - cond_nconsts - body_nconsts).
 * scan(*consts, *init, *xs): subs = [body]; every xs has leading axis length;
 *   body(consts, carry, x slices) -> (carry, y slices); outputs = final carry
 *   then the ys stacked on a new leading axis of size length; reverse walks
 *   t = length-1 .. 0 (ys still land at index t). n_out (hidden) = the body's
 *   output count = num_carry + number of ys. */
typedef struct oly_params_cond { int64_t n_out; } oly_params_cond;
typedef struct oly_params_while { int64_t cond_nconsts, body_nconsts; } oly_params_while;
typedef struct oly_params_scan {
    int64_t length, num_consts, num_carry, n_out;
    bool reverse;
} oly_params_scan;

typedef enum oly_vmap_method {
    OLY_VMAP_NONE,
    OLY_VMAP_SEQUENTIAL,
    OLY_VMAP_SEQUENTIAL_UNROLLED,
    OLY_VMAP_EXPAND_DIMS,
    OLY_VMAP_BROADCAST_ALL,
    OLY_VMAP_LEGACY_VECTORIZED,
    /* pure_callback: a gufunc signature "(n),(n)->()" (params.signature) names
     * each argument's and result's core dims; one call per vmap level with the
     * batch axis leading the loop dims (unbatched arguments get a size-1 axis,
     * shorter loop dims are padded with size-1 axes, as NumPy broadcasts). */
    OLY_VMAP_SIGNATURE,
    OLY_VMAP_METHOD_COUNT
} oly_vmap_method;

/* Output `output` of an equation is written in place over input `input`
 * (indices into the equation's inputs and outputs; equal avals). */
typedef struct oly_io_alias {
    int input, output;
} oly_io_alias;

/* pure_callback, io_callback, debug_callback, buffer_callback: inputs are the
 * callback's arguments, outputs have result_avals.
 * buffer_callback: the host function writes its results in place.
 * has_side_effect makes it an effect (OLY_EFFECT_BUFFER_CALLBACK, never removed
 * by DCE). aliases (n_aliases pairs, each input and each output at most once,
 * equal avals) say which outputs start as a copy of an input and share its
 * buffer during the call; the CPU backend writes such an output over the
 * input itself when nothing reads the input afterwards, else copies it. */
typedef struct oly_params_callback {
    oly_host_fn *callback;
    const oly_aval *result_avals;
    int n_results;
    int vmap_method;  /* oly_vmap_method; pure_callback and buffer_callback */
    bool ordered;     /* io_callback, debug_callback */
    bool has_side_effect;          /* buffer_callback */
    const oly_io_alias *aliases;   /* buffer_callback; NULL when n_aliases is 0 */
    int n_aliases;
    /* pure_callback with OLY_VMAP_SIGNATURE: the gufunc signature, e.g.
     * "(m,n),(n)->(m)" (one parenthesised group per argument, then per
     * result; names or fixed sizes); NULL otherwise. */
    const char *signature;
    /* The last n_batch_index inputs are int32 scalars that vmap's one-call-
     * per-element rules (sequential, sequential_unrolled, io_callback's scan,
     * debug_callback's copies) append: the element's index at each vmap level,
     * the innermost level's first. They are not arguments: the host function gets
     * them as oly_callback_frame.batch_index. At most OLY_MAX_BATCH_INDEX. */
    int64_t n_batch_index;
} oly_params_callback;
#define OLY_MAX_BATCH_INDEX 64

/* outside_call (host_callback's id_tap and call). identity (id_tap): the
 * outputs are the inputs, and the host function gets them on the device's
 * outfeed receiver while the program goes on. Otherwise (call): the host
 * function runs on the executing thread and the outputs have result_avals.
 * transforms: what was applied to the tapped values (see oly_callback_frame);
 * device_index: the device the user named (informational on CPU). */
typedef struct oly_params_outside_call {
    oly_host_fn *callback;
    const oly_aval *result_avals;
    int n_results;
    bool identity;
    int64_t device_index;
    const char *transforms;
    /* A gated tap (identity only; every > 0): the kernel reads v, the first
     * element of input 0 (an integer), and sends the tap only when
     * v >= start, v < stop (no upper bound when stop <= start), and
     * (v - start) % every == 0 or v == stop - 1. On other calls the tap costs
     * that branch: a progress tap in a loop body reaches the host every
     * `every` iterations. 0: every call is sent. A gated tap that is sent
     * also lets the host lock (oly_set_blocking_hooks) go for a moment (at
     * most every 25 ms), so a receiver waiting for it can run while a long
     * program holds it. */
    int64_t every, start, stop;
} oly_params_outside_call;

/* ---------------------------------------------------------------- custom rules (thunks)
 * A custom differentiation rule is a thunk: a refcounted object that traces
 * the rule's program when a transform first needs it, and never before. That
 * is what lets a rule call its own function (a Bessel jv whose JVP calls jv):
 * each level of differentiation expands one layer.
 *
 * trace(user, n_in, in_avals, nz, out) builds the rule's program for these
 * input avals and returns it in *out (a new reference). nz[i] (n_in entries,
 * never NULL) is false where input i is a symbolic zero; the program still
 * takes that input (as zeros). It may be called from any thread that runs a
 * transform, any number of times. It fails like a host function (a message
 * through oly_host_fail, optionally a payload with oly_error_set_payload).
 * What the program must look like depends on the primitive holding the thunk:
 *
 * custom_jvp_call (params oly_params_custom_jvp, sub[0] = primal program with
 *   n inputs and m outputs): jvp thunk, called with the n primal avals and the
 *   nonzero-tangent mask; returns (primals[n]..., tangents[n]...) ->
 *   (primal outs[m]..., tangent outs[m]...), each tangent with its primal's
 *   aval. Its tangent outputs must be linear in its tangent inputs.
 * custom_vjp_call (params oly_params_custom_vjp, sub[0] as above):
 *   fwd thunk, called with the n primal avals and the nonzero-tangent mask;
 *   returns primals[n] -> (outs[m]..., residuals[r]...), r >= 0.
 *   bwd thunk, called with the r residual avals then the m output avals
 *   (nz: residuals true, then which cotangents are nonzero); returns
 *   (residuals[r]..., cotangents[m]...) -> input cotangents[n], each with its
 *   primal input's aval. */
typedef struct oly_thunk oly_thunk;
struct oly_program; /* oly_program, declared below */
typedef oly_status (*oly_thunk_trace_fn)(void *user, int n_in, const oly_aval *in_avals,
                                         const bool *nz, struct oly_program **out);

/* A new thunk (refcount 1). name is copied (printed in programs). release(user)
 * runs when the last reference goes (may be NULL). */
OLY_API oly_status oly_thunk_new(const char *name, oly_thunk_trace_fn trace, void *user,
                         void (*release)(void *user), oly_thunk **out);
OLY_API oly_thunk *oly_thunk_retain(oly_thunk *t);
OLY_API void oly_thunk_release(oly_thunk *t); /* accepts NULL */
OLY_API const char *oly_thunk_name(const oly_thunk *t);
OLY_API void *oly_thunk_user(const oly_thunk *t);
/* Calls t's trace function; *out is a new reference. Fails if the function
 * fails or returns no program. */
OLY_API oly_status oly_thunk_trace(oly_thunk *t, int n_in, const oly_aval *in_avals, const bool *nz,
                           struct oly_program **out);

/* custom_jvp_call: runs sub[0]; jvp traces the thunk. n_out (hidden) must
 * equal sub[0]'s output count (as for pjit). */
typedef struct oly_params_custom_jvp {
    const char *name;
    int64_t n_out;
    oly_thunk *jvp;
} oly_params_custom_jvp;
/* custom_vjp_call: runs sub[0]; jvp emits fwd and a custom_lin holding bwd. */
typedef struct oly_params_custom_vjp {
    const char *name;
    int64_t n_out;
    oly_thunk *fwd;
    oly_thunk *bwd;
} oly_params_custom_vjp;
/* custom_lin (emitted by custom_vjp_call's jvp rule; no kernel): inputs are
 * n_res residuals then one tangent per primal input (a rank-0 zero literal
 * where that tangent is a symbolic zero); outputs are the tangents of the
 * primal outputs (out_avals). Its transpose traces bwd. */
typedef struct oly_params_custom_lin {
    int64_t n_res;
    oly_thunk *bwd;
    const oly_aval *in_avals;   /* the primal inputs' avals */
    int n_in;
    const oly_aval *out_avals;  /* the primal outputs' avals */
    int n_out;
} oly_params_custom_lin;

/* ---------------------------------------------------------------- primitives */

typedef struct oly_prim oly_prim;

/* The row registered under name, or NULL. */
OLY_API const oly_prim *oly_prim_lookup(const char *name);
OLY_API const char *oly_prim_name(const oly_prim *p);
/* The field table of p's params (n_fields may be 0) and the params struct size. */
OLY_API const oly_param_field *oly_prim_fields(const oly_prim *p, int *n_fields, size_t *params_size);
/* Number of outputs an equation of p with these params and n_in inputs has. */
OLY_API int oly_prim_num_outputs(const oly_prim *p, const void *params, int n_in);
/* Calls fn on every registered primitive, in registry order. */
OLY_API void oly_prim_foreach(void (*fn)(const oly_prim *p, void *ctx), void *ctx);

/* ---------------------------------------------------------------- programs */

typedef struct oly_program oly_program;
typedef struct oly_builder oly_builder;
typedef struct oly_var oly_var;

typedef enum oly_atom_kind { OLY_ATOM_VAR, OLY_ATOM_LIT, OLY_ATOM_KIND_COUNT } oly_atom_kind;
/* An equation input or program output: a variable or a scalar literal. */
typedef struct oly_atom {
    oly_atom_kind kind;
    oly_var *var;    /* borrowed from the builder/program when kind == OLY_ATOM_VAR */
    oly_scalar lit;  /* when kind == OLY_ATOM_LIT: a rank-0 value of lit.dtype */
} oly_atom;

OLY_API oly_atom oly_atom_var(oly_var *v);
OLY_API oly_atom oly_atom_lit(oly_scalar s);
OLY_API const oly_aval *oly_var_aval(const oly_var *v);

/* A builder records inputs, constants and equations; finish makes the program. */
OLY_API oly_status oly_builder_new(oly_builder **out);
OLY_API void oly_builder_free(oly_builder *b); /* accepts NULL */
/* out may be NULL (the input is added all the same). */
OLY_API oly_status oly_builder_add_input(oly_builder *b, const oly_aval *aval, oly_var **out);
/* A constant input; the builder retains value. out may be NULL. */
OLY_API oly_status oly_builder_add_const(oly_builder *b, oly_array *value, oly_var **out);
/* Append one equation: runs p's shape rule (its errors are the user's errors),
 * copies params (may be NULL when p has none) and retains subs. outs receives
 * up to max_out output vars; *n_out (may be NULL) their number. */
OLY_API oly_status oly_builder_append(oly_builder *b, const oly_prim *p, const oly_atom *in, int n_in,
                              const void *params, oly_program *const *subs, int n_sub,
                              oly_var **outs, int max_out, int *n_out);
/* Make the program with these outputs. The builder stays usable only for
 * oly_builder_free. Runs the verifier. */
/* Appends p's equations to b with p's inputs bound to in (p's input count of
 * atoms of b); out receives p's outputs (p's output count). p's constants
 * become constants of b. Fails like oly_builder_append. */
OLY_API oly_status oly_builder_inline(oly_builder *b, oly_program *p, const oly_atom *in,
                                      oly_atom *out);
/* A program of one equation: inputs of in_avals (n_in of them, each
 * weak flag kept), p applied to them with params and subs, every output of
 * the equation as an output. *out is a new program. Fails like
 * oly_builder_append. */
OLY_API oly_status oly_program_of_eqn(const oly_prim *p, const void *params,
                                      const oly_aval *in_avals, int n_in,
                                      oly_program *const *subs, int n_sub, oly_program **out);
OLY_API oly_status oly_builder_finish(oly_builder *b, const oly_atom *outs, int n_out, oly_program **out);

OLY_API oly_program *oly_program_retain(oly_program *p);
OLY_API void oly_program_release(oly_program *p); /* accepts NULL */
OLY_API int oly_program_num_inputs(const oly_program *p);
OLY_API int oly_program_num_outputs(const oly_program *p);
OLY_API int oly_program_num_eqns(const oly_program *p);
OLY_API const oly_aval *oly_program_input_aval(const oly_program *p, int i);
OLY_API const oly_aval *oly_program_output_aval(const oly_program *p, int i);
OLY_API uint32_t oly_program_effects(const oly_program *p);
/* The effects (OLY_EFFECT_* bits) an equation of p with these params and
 * nested programs subs (n_sub of them; may be NULL when 0) has: the row's
 * own and its bodies'. 0 for a NULL p. */
OLY_API uint32_t oly_prim_effects(const oly_prim *p, const void *params,
                                  oly_program *const *subs, int n_sub);
/* Checks types, scoping (every use defined before), arities and effects. */
OLY_API oly_status oly_program_verify(const oly_program *p);
/* The text form, e.g. "{ lambda ; a:f32[5]. let b:f32[5] = sin a in (b,) }".
 * *out is malloc'd; the caller frees it. */
OLY_API oly_status oly_program_print(const oly_program *p, char **out);

/* Dead-code elimination: drops effect-free equations whose outputs are unused
 * (recursively in nested programs). *out is a new program (or p retained). */
OLY_API oly_status oly_program_dce(oly_program *p, oly_program **out);

/* p for one shard of its arrays (jit over sharded arrays): when p is
 * elementwise over one shape -- every input, constant, equation result and
 * output of shape global_dims (rank dims) or rank 0; every equation an
 * elementwise row, convert_element_type, select_n, copy, broadcast_in_dim
 * of a rank-0 value or to the same shape, or pjit of such a program; no
 * effects -- *out is a new program computing the same on shard_dims blocks
 * (each must divide its global dimension). Otherwise *out is NULL, which is
 * no error. */
OLY_API oly_status oly_program_for_shard(oly_program *p, int rank, const int64_t *global_dims,
                                         const int64_t *shard_dims, oly_program **out);

/* ---------------------------------------------------------------- transforms
 * Program -> program; nothing runs. Each fails with a message naming the
 * primitive that lacks a rule ("sin has no batching rule"). */

/* Batch p over a new axis of size axis_size. in_axes[i]: where input i of the
 * new program carries the batch axis, or -1 when it is not batched. out_axes[j]:
 * where output j carries it, or -1 for an output that must not depend on the
 * batch (an error if it does). */
OLY_API oly_status oly_program_vmap(oly_program *p, const int *in_axes, int64_t axis_size,
                            const int *out_axes, oly_program **out);
/* oly_program_vmap over an axis named axis_name (NULL: unnamed; borrowed for
 * the call): the collectives of p that name it act over the batch (psum sums
 * over it, axis_index is the position along it, ...); those naming other axes
 * are batched as ordinary equations and stay for an enclosing named vmap.
 * Nested programs (pjit, control flow bodies) are batched over the same name.
 * oly_program_vmap called by a batching rule while a named vmap runs on this
 * thread (a rule batching its nested program over the same size) inherits the
 * name. */
OLY_API oly_status oly_program_vmap_named(oly_program *p, const int *in_axes, int64_t axis_size,
                                          const char *axis_name, const int *out_axes,
                                          oly_program **out);
/* Forward mode. nz_in[i]: input i has a nonzero tangent. The new program takes
 * (primals..., tangents of the nz inputs...) and returns (primal outputs...,
 * tangents of the outputs with nz_out[j]...). Integer and bool values always
 * have zero tangents: an nz input of such a dtype still gets its tangent input
 * (the primal's aval; the value is ignored), and such outputs get nz_out false.
 * Tangents have their primal's aval. nz_out has p's output count. */
OLY_API oly_status oly_program_jvp(oly_program *p, const bool *nz_in, oly_program **out, bool *nz_out);
/* jvp + partial evaluation. *primal: primals -> (outputs..., residuals...);
 * *linear: (residuals..., tangents of nz inputs...) -> tangents of nz outputs.
 * n_res (may be NULL) receives the residual count. */
OLY_API oly_status oly_program_linearize(oly_program *p, const bool *nz_in, oly_program **primal,
                                 oly_program **linear, int *n_res, bool *nz_out);
/* linear: (n_res residuals..., linear inputs...) -> outputs, linear in the
 * linear inputs. *out: (residuals..., cotangents of the outputs...) ->
 * cotangents of the linear inputs (zeros materialised). */
OLY_API oly_status oly_program_transpose(oly_program *linear, int n_res, oly_program **out);

/* ---------------------------------------------------------------- execution */

/* Runs p on device: compiles on first use (the executable is cached in p).
 * inputs must match the input avals; outputs receives n_out new references,
 * futures when the run was queued on the device's stream (see
 * oly_dispatch_mode); a queued run's failure is reported by oly_array_wait
 * on an output, or by oly_effects_barrier when it has none. */
OLY_API oly_status oly_program_run(oly_program *p, int device, oly_array *const *inputs, int n_in,
                           oly_array **outputs, int n_out);
/* A device mesh for a group run: n_axes named axes of the given sizes; its
 * members are numbered row-major over the axes (the last axis fastest), and
 * member k runs on devices[k] (prod(sizes) entries, each in [0,
 * oly_device_count()); a device may appear more than once: members are
 * threads). Borrowed for the call. */
typedef struct oly_mesh {
    int n_axes;
    const char *const *names;   /* distinct, non-empty */
    const int *sizes;           /* each >= 1 */
    const int *devices;         /* prod(sizes) */
} oly_mesh;
/* Runs p once per member of mesh, all members at the same time (pmap's
 * launch): member k reads inputs[k * n_in .. k * n_in + n_in) and its outputs
 * go to outputs[k * n_out ..] (new references, committed to the member's
 * device when its inputs were committed). Collectives in p (psum, all_gather,
 * ...) over the mesh's axes rendezvous among the members; a collective over
 * some of the axes groups the members that share the other coordinates.
 * Synchronous: returns when every member has finished. A member that fails
 * fails the group: members waiting in a collective stop with "psum over 'i'
 * aborted: device 2 failed: ...", and the call reports the first member's
 * own failure (its message and payload). Thread-safe; may be called from a
 * host function (members run on threads of their own, so nothing waits behind
 * the caller's device). After oly_distributed_initialize the mesh's devices
 * are global ids (process p's device j is p * L + j) and may span processes:
 * every process calls this with the same mesh and program, passes and gets
 * its own members only (inputs[i * n_in ..] for its i-th member in member
 * order), and the collectives cross processes over MPI; each process must
 * hold the same number of members. */
OLY_API oly_status oly_program_run_group(oly_program *p, const oly_mesh *mesh,
                                         oly_array *const *inputs, int n_in,
                                         oly_array **outputs, int n_out);
/* Like oly_program_run, but the run is queued on device's stream even when it
 * is idle and the outputs come back at once as futures, so that runs issued
 * to several devices proceed concurrently (a jit call over sharded arrays).
 * A thread already running on device runs it inline, nested. */
OLY_API oly_status oly_program_run_queued(oly_program *p, int device, oly_array *const *inputs,
                                          int n_in, oly_array **outputs, int n_out);

/* Applies one primitive eagerly to concrete arrays through a cached one-equation
 * program (cache keyed by primitive, params and input avals). */
OLY_API oly_status oly_apply(const oly_prim *p, const void *params, oly_array *const *inputs, int n_in,
                     oly_array **outputs, int max_out, int *n_out);

/* Where oly_program_run sends work. Each device has a stream that orders the
 * runs issued to it. AUTO: a short run goes inline on the calling thread when
 * its device's stream is idle, else it is queued behind the stream's work and
 * waited for; a long run (64 MiB written) is queued and its outputs come back
 * at once as futures (see oly_array_wait). ASYNC: every top-level run is
 * queued and returns futures. SYNC: like AUTO, but long runs are waited for
 * too, so every error surfaces at the call. The
 * default comes from OLYMPUS_ASYNC_DISPATCH (auto | async | sync). A run
 * issued by a thread already running on that device (a host function) runs
 * inline, nested, in every mode. */
typedef enum oly_dispatch_mode {
    OLY_DISPATCH_AUTO = 0,
    OLY_DISPATCH_ASYNC = 1,
    OLY_DISPATCH_SYNC = 2,
} oly_dispatch_mode;
OLY_API oly_status oly_set_dispatch_mode(oly_dispatch_mode mode);
OLY_API oly_dispatch_mode oly_dispatch_mode_get(void);

/* Waits until every run queued so far on every stream has finished (except
 * on the device the calling thread is running on, whose later work would wait
 * for it) and reports the first failure of a queued run that had no outputs to
 * carry it. */
OLY_API oly_status oly_effects_barrier(void);

/* ---------------------------------------------------------------- FFI kernels (olympus.ffi)
 * A native kernel called from Python programs: a C function with the
 * host-function ABI (oly_host_call_fn) registered with
 * olympus.ffi.register_ffi_target(name, fn, user_data=...) and called with
 * olympus.ffi.ffi_call(name, result_shape_dtypes)(*args, **attrs). The
 * executor calls it directly, on the thread that runs the program, with no
 * Python on the path and without taking the GIL; user is the registered
 * user_data (NULL if none).
 *
 * The frame is the usual one (read-only argument buffers and their avals,
 * result buffers to fill and their avals, the device); frame->ffi adds the
 * call's attributes: the keyword arguments of the ffi_call, static values
 * fixed when the program is traced (other values make another program).
 * Python bool, int, float and complex become scalars of dtype bool, int64
 * (uint64 above INT64_MAX), float64 and complex128; NumPy scalars keep their
 * dtype; a str becomes a UTF-8 string; a NumPy array of rank >= 1 becomes an
 * array (copied, C order; a rank-0 array is a scalar). The x64 switch does
 * not change attributes.
 *
 * Everything in this section is inline: a kernel library needs this header
 * and nothing else (no link with olympus). In a Python process olympus lives
 * inside the extension module, whose names are not exported, so a kernel
 * reports failure with oly_ffi_fail, which writes the message into the frame,
 * not with oly_host_fail. Python then raises olympus.CallbackError naming the
 * target, the status and the message. Nothing in frame->ffi outlives the call.
 */

typedef enum oly_ffi_attr_kind {
    OLY_FFI_ATTR_SCALAR, /* scalar: its dtype and value; aval is rank 0 of that dtype */
    OLY_FFI_ATTR_STRING, /* string: UTF-8, NUL-terminated; size: bytes before the NUL */
    OLY_FFI_ATTR_ARRAY,  /* data: size elements of aval (dtype, shape), C order, 16-byte aligned */
    OLY_FFI_ATTR_KIND_COUNT
} oly_ffi_attr_kind;

/* One attribute. Every pointer is borrowed for the call. */
typedef struct oly_ffi_attr {
    const char *name;
    oly_ffi_attr_kind kind;
    oly_scalar scalar;   /* SCALAR: bool and signed ints in v.i, unsigned in v.u,
                          * floats in v.f, complex in v.c */
    const char *string;  /* STRING */
    const void *data;    /* ARRAY */
    oly_aval aval;       /* SCALAR, ARRAY */
    int64_t size;        /* STRING: bytes; ARRAY: elements */
} oly_ffi_attr;

/* What frame->ffi points to, borrowed for the call. */
typedef struct oly_ffi_ctx {
    const char *target;         /* the name the target was registered under */
    int n_attrs;
    const oly_ffi_attr *attrs;  /* sorted by name (strcmp order); names are unique */
    char *error;                /* error_size bytes for oly_ffi_fail's message */
    size_t error_size;
} oly_ffi_ctx;

#if defined(__GNUC__)
#define OLY_FFI_PRINTF(fmt_arg, first) __attribute__((format(printf, fmt_arg, first)))
#else
#define OLY_FFI_PRINTF(fmt_arg, first)
#endif

/* For a kernel to fail: writes the printf-style message into the frame and
 * returns status (OLY_ERR_CALLBACK for OLY_OK), as in
 *   return oly_ffi_fail(frame, OLY_ERR_SHAPE, "x: rank %d, expected 2", r); */
static inline OLY_FFI_PRINTF(3, 4) oly_status oly_ffi_fail(const oly_callback_frame *frame,
                                                           oly_status status, const char *fmt, ...)
{
    if (frame && frame->ffi && frame->ffi->error && frame->ffi->error_size && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(frame->ffi->error, frame->ffi->error_size, fmt, ap);
        va_end(ap);
    }
    return status == OLY_OK ? OLY_ERR_CALLBACK : status;
}

/* The attribute called name, or NULL when the call has none of that name (or
 * frame is not an ffi_call's). Sets no message: the way to read an optional
 * attribute. */
static inline const oly_ffi_attr *oly_ffi_attr_find(const oly_callback_frame *frame,
                                                    const char *name)
{
    if (!frame || !frame->ffi || !frame->ffi->attrs || !name) return NULL;
    const oly_ffi_attr *a = frame->ffi->attrs;
    int lo = 0, hi = frame->ffi->n_attrs;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, a[mid].name);
        if (c == 0) return &a[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Internal to the helpers below. */
static inline const char *oly__ffi_dtype_name(oly_dtype t)
{
    static const char *const names[OLY_DTYPE_COUNT] = {
        "bool",    "int8",    "int16",    "int32",   "int64",   "uint8",     "uint16", "uint32",
        "uint64",  "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    };
    return (unsigned)t < OLY_DTYPE_COUNT ? names[t] : "?";
}

/* "a string", "an int64 scalar", "an array of float32[2,3]". */
static inline void oly__ffi_describe(const oly_ffi_attr *a, char *buf, size_t n)
{
    if (a->kind == OLY_FFI_ATTR_STRING) {
        snprintf(buf, n, "a string");
    } else if (a->kind == OLY_FFI_ATTR_SCALAR) {
        const char *t = oly__ffi_dtype_name(a->scalar.dtype);
        snprintf(buf, n, "%s %s scalar", t[0] == 'i' ? "an" : "a", t);
    } else {
        size_t k = 0;
        int w = snprintf(buf, n, "an array of %s[", oly__ffi_dtype_name(a->aval.dtype));
        k = w > 0 ? (size_t)w : 0;
        for (int d = 0; d < a->aval.rank && d < OLY_MAX_RANK && k < n; d++) {
            w = snprintf(buf + k, n - k, d ? ",%lld" : "%lld", (long long)a->aval.dims[d]);
            k += w > 0 ? (size_t)w : 0;
        }
        if (k < n) snprintf(buf + k, n - k, "]");
    }
}

/* The attribute called name, or NULL after writing why (missing, with the
 * names the call has; a NULL pointer). */
static inline const oly_ffi_attr *oly__ffi_lookup(const oly_callback_frame *frame,
                                                  const char *name, const void *out)
{
    if (!frame || !frame->ffi) return NULL; /* not an ffi_call: nowhere to say so */
    if (!name || !out) {
        oly_ffi_fail(frame, OLY_ERR_INVALID, "attribute lookup: %s is NULL", name ? "out" : "name");
        return NULL;
    }
    const oly_ffi_attr *a = oly_ffi_attr_find(frame, name);
    if (a) return a;
    char have[256];
    size_t k = 0;
    have[0] = '\0';
    for (int i = 0; i < frame->ffi->n_attrs && k < sizeof have; i++) {
        int w = snprintf(have + k, sizeof have - k, i ? ", %s" : "%s", frame->ffi->attrs[i].name);
        k += w > 0 ? (size_t)w : 0;
    }
    if (!frame->ffi->n_attrs)
        oly_ffi_fail(frame, OLY_ERR_INVALID, "attribute '%s' is missing (the call has no "
                     "attributes)", name);
    else
        oly_ffi_fail(frame, OLY_ERR_INVALID, "attribute '%s' is missing (the call has: %s)", name,
                     have);
    return NULL;
}

/* Writes "attribute 'x' is <what it is>, expected <want>"; OLY_ERR_TYPE. */
static inline oly_status oly__ffi_wrong(const oly_callback_frame *frame, const oly_ffi_attr *a,
                                        const char *want)
{
    char got[160];
    oly__ffi_describe(a, got, sizeof got);
    oly_ffi_fail(frame, OLY_ERR_TYPE, "attribute '%s' is %s, expected %s", a->name, got, want);
    return OLY_ERR_TYPE;
}

/* Typed reads by name. Each returns OLY_OK and writes *out, or fails with
 * out untouched and the message written for oly_ffi_fail's channel (so a
 * kernel just returns the status): OLY_ERR_INVALID when the attribute is
 * missing or its value does not fit, OLY_ERR_TYPE when it has another type. */

/* A bool scalar. */
static inline oly_status oly_ffi_attr_bool(const oly_callback_frame *frame, const char *name,
                                           bool *out)
{
    const oly_ffi_attr *a = oly__ffi_lookup(frame, name, out);
    if (!a) return OLY_ERR_INVALID;
    if (a->kind != OLY_FFI_ATTR_SCALAR || a->scalar.dtype != OLY_BOOL)
        return oly__ffi_wrong(frame, a, "a bool scalar");
    *out = a->scalar.v.i != 0;
    return OLY_OK;
}

/* An integer scalar of any width, signed or unsigned, whose value fits int64
 * (not a bool). */
static inline oly_status oly_ffi_attr_i64(const oly_callback_frame *frame, const char *name,
                                          int64_t *out)
{
    const oly_ffi_attr *a = oly__ffi_lookup(frame, name, out);
    if (!a) return OLY_ERR_INVALID;
    oly_dtype t = a->scalar.dtype;
    if (a->kind != OLY_FFI_ATTR_SCALAR || t < OLY_INT8 || t > OLY_UINT64)
        return oly__ffi_wrong(frame, a, "an integer scalar");
    if (t >= OLY_UINT8 && a->scalar.v.u > (uint64_t)INT64_MAX) {
        oly_ffi_fail(frame, OLY_ERR_INVALID, "attribute '%s' is %llu, which does not fit in int64",
                     a->name, (unsigned long long)a->scalar.v.u);
        return OLY_ERR_INVALID;
    }
    *out = t >= OLY_UINT8 ? (int64_t)a->scalar.v.u : a->scalar.v.i;
    return OLY_OK;
}

/* A floating-point scalar of any width, or an integer scalar (converted;
 * not a bool or complex). */
static inline oly_status oly_ffi_attr_f64(const oly_callback_frame *frame, const char *name,
                                          double *out)
{
    const oly_ffi_attr *a = oly__ffi_lookup(frame, name, out);
    if (!a) return OLY_ERR_INVALID;
    oly_dtype t = a->scalar.dtype;
    if (a->kind != OLY_FFI_ATTR_SCALAR || t < OLY_INT8 || t > OLY_FLOAT64)
        return oly__ffi_wrong(frame, a, "a float (or integer) scalar");
    *out = t >= OLY_FLOAT16 ? a->scalar.v.f
         : t >= OLY_UINT8   ? (double)a->scalar.v.u
                            : (double)a->scalar.v.i;
    return OLY_OK;
}

/* A string: *out NUL-terminated UTF-8; *size (may be NULL) its bytes. */
static inline oly_status oly_ffi_attr_str(const oly_callback_frame *frame, const char *name,
                                          const char **out, int64_t *size)
{
    const oly_ffi_attr *a = oly__ffi_lookup(frame, name, out);
    if (!a) return OLY_ERR_INVALID;
    if (a->kind != OLY_FFI_ATTR_STRING) return oly__ffi_wrong(frame, a, "a string");
    *out = a->string;
    if (size) *size = a->size;
    return OLY_OK;
}

/* An array of exactly dtype: *data its elements (C order), *size (may be
 * NULL) their count. The shape is oly_ffi_attr_find(frame, name)->aval. */
static inline oly_status oly_ffi_attr_array(const oly_callback_frame *frame, const char *name,
                                            oly_dtype dtype, const void **data, int64_t *size)
{
    const oly_ffi_attr *a = oly__ffi_lookup(frame, name, data);
    if (!a) return OLY_ERR_INVALID;
    if (a->kind != OLY_FFI_ATTR_ARRAY || a->aval.dtype != dtype) {
        char want[64];
        snprintf(want, sizeof want, "an array of %s", oly__ffi_dtype_name(dtype));
        return oly__ffi_wrong(frame, a, want);
    }
    *data = a->data;
    if (size) *size = a->size;
    return OLY_OK;
}

#ifdef __cplusplus
}
#endif
#endif /* OLYMPUS_H */

/* internal.h — declarations shared between olympus's source files (oly__ prefix).
 * Not installed. Includes the IR's concrete structs, the primitive row (the
 * semantics), the kernel contract with the executor's ops for kernels, and the
 * CPU kernel entry of src/cpu's table. */
#ifndef OLYMPUS_INTERNAL_H
#define OLYMPUS_INTERNAL_H

#include "olympus.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

/* Formats the per-thread message and returns status (never OLY_OK). */
oly_status oly__error(oly_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
oly_status oly__verror(oly_status status, const char *fmt, va_list ap);
/* Empties this thread's message (not its payload): the outermost run starts
 * clean, so a host function that fails without a message is noticed. */
void oly__error_forget(void);
/* Prefix the current message with "prefix: " (keeps status). */
oly_status oly__error_prefix(oly_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A failure kept for later (a queued computation's, a tap's): the status, the
 * message and the payload of the thread that failed. Zero-initialised = none. */
typedef struct oly_failure {
    oly_status status;          /* OLY_OK: none kept */
    char msg[2048];             /* as long as a thread's message */
    void *payload;              /* owned through free_fn */
    void (*free_fn)(void *);
} oly_failure;
/* Moves this thread's message and payload into f (replacing what f held). */
void oly__failure_keep(oly_failure *f, oly_status status);
/* Makes f this thread's error and returns its status; the payload goes with
 * the first report, later ones carry the message only. */
oly_status oly__failure_report(oly_failure *f);
/* Frees f's payload and empties it. */
void oly__failure_clear(oly_failure *f);

#define OLY_ASSERT(c)                                                                     \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "olympus: internal invariant failed: %s (%s:%d)\n", #c,       \
                    __FILE__, __LINE__);                                                  \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define OLY_TRY(expr)                                                                     \
    do {                                                                                  \
        oly_status oly__s = (expr);                                                       \
        if (oly__s != OLY_OK) return oly__s;                                              \
    } while (0)

#define OLY_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The allocation funnel (src/core/alloc.c): every allocation of the library
 * goes through these. They report OLY_ERR_NOMEM through the message buffer
 * when they return NULL (the caller still checks), and fail on purpose when
 * fault injection is armed (oly_fault_inject_alloc). */
void *oly__malloc(size_t n);
void *oly__calloc(size_t n, size_t size);
void *oly__realloc(void *p, size_t n);
char *oly__strdup(const char *s);
/* n bytes aligned to align (a power of two); the size is rounded up to a
 * multiple of align. Freed with free(). */
void *oly__aligned_alloc(size_t align, size_t n);
/* Whether fault injection fails this allocation (counts it down like the
 * functions above; for allocators outside alloc.c). */
bool oly__fault_injected(void);

/* Data blocks (src/core/bufpool.c): 64-byte aligned, n bytes rounded up to a
 * size class. From OLY_BUFPOOL_MIN bytes up a block is its own mapping, and
 * oly__bufpool_free caches it for the next request of its class (bounded by
 * OLYMPUS_BUFFER_POOL_BYTES), so steady runs map nothing and fault nothing.
 * _free takes the n given to _alloc (NULL is fine). Thread-safe. */
#define OLY_BUFPOOL_MIN ((size_t)1 << 20)
void *oly__bufpool_alloc(size_t n);
void oly__bufpool_free(void *p, size_t n);
/* The bytes a block of n bytes really has (its class); 0 on overflow. */
size_t oly__bufpool_class(size_t n);
/* Unmaps cached blocks, least recently cached first, until at most keep
 * bytes stay cached. */
void oly__bufpool_trim(size_t keep);
/* Tests: replaces the bound (bytes; -1: read the environment again) and
 * trims to it; the cache's bytes and blocks, mappings made and cache hits. */
void oly__bufpool_set_limit(long long bytes);
/* Tests: how long a block may stay cached before the next allocation or
 * release of a big block unmaps it (ns; -1: the default, 10 s). */
void oly__bufpool_set_idle(long long ns);
void oly__bufpool_stats(size_t *bytes, int *blocks, long long *maps, long long *hits);

/* ---------------------------------------------------------------- arena */

/* Bump allocator; everything is freed at once. Not thread-safe. */
typedef struct oly_arena oly_arena;
oly_arena *oly__arena_new(void);
void oly__arena_free(oly_arena *a); /* accepts NULL */
/* Zeroed, 16-byte aligned memory; NULL on out of memory (message set). */
void *oly__arena_alloc(oly_arena *a, size_t n);
char *oly__arena_strdup(oly_arena *a, const char *s);

/* ---------------------------------------------------------------- waiting (src/core/event.c) */

/* A thread about to sleep calls the blocking hook (oly_set_blocking_hooks)
 * with no lock held, and leaves it after waking. */
void *oly__blocking_enter(bool *entered);
void oly__blocking_leave(bool entered, void *token);

/* A one-shot completion: the producer of queued work completes it once; the
 * arrays it fills wait on it. Refcounted. */
typedef struct oly_event oly_event;
oly_event *oly__event_new(void); /* NULL on out of memory */
oly_event *oly__event_retain(oly_event *e);
void oly__event_release(oly_event *e); /* accepts NULL */
bool oly__event_done(const oly_event *e);
/* Completes e; a failure keeps this thread's message and payload. */
void oly__event_complete(oly_event *e, oly_status status);
/* Waits for e (through the blocking hook); _wait also reports its status. */
void oly__event_sleep(oly_event *e);
oly_status oly__event_wait(oly_event *e);

/* ---------------------------------------------------------------- buffers and arrays */

typedef struct oly_buffer {
    atomic_long refcount;
    void *data;                 /* owned unless release != NULL */
    size_t nbytes;
    void (*release)(void *owner);
    void *owner;                /* owned through release */
    /* Owned; NULL when the data was ready at creation. Set once, before the
     * buffer is shared, when a queued computation is still to fill it. */
    oly_event *pending;
} oly_buffer;

struct oly_array {
    atomic_long refcount;
    oly_aval aval;
    oly_buffer *buf;            /* owned reference */
    int device;
    bool committed;             /* placed by the user (oly_array_put) or computed from such */
};

/* Marks a fresh array (not yet shared) as filled by the queued work e
 * completes; readers wait on e (src/core/array.c). */
void oly__array_set_pending(oly_array *a, oly_event *e);

/* ---------------------------------------------------------------- host functions */

/* The refcounted host closure both kinds of host code share (src/core/host.c):
 * a name, the user data it closes over and its release, run by whichever
 * thread drops the last reference. Host functions add the call a program
 * makes; custom-rule thunks add the trace a transform asks for. */
typedef struct oly_closure {
    atomic_long refcount;
    char *name;                 /* owned */
    void *user;                 /* owned through release */
    void (*release)(void *user);
} oly_closure;

struct oly_host_fn {
    oly_closure c;
    oly_host_call_fn call;
    bool borrows_args;          /* never keeps an argument (oly_host_fn_borrow_args) */
};

struct oly_thunk {
    oly_closure c;
    oly_thunk_trace_fn trace;
};

/* ---------------------------------------------------------------- IR */

struct oly_var {
    uint32_t id;                /* dense within its program: 0 .. n_vars-1 */
    oly_aval aval;
};

typedef struct oly_eqn {
    const oly_prim *prim;       /* borrowed: rows are static or registered for life */
    void *params;               /* arena-owned copy; NULL when the prim has no params */
    int n_in, n_out, n_sub;
    oly_atom *in;               /* arena */
    oly_var **out;              /* arena; vars in the program's arena */
    oly_program **sub;          /* arena array of owned references */
    uint32_t effects;
} oly_eqn;

struct oly_program {
    atomic_long refcount;
    uint64_t uid;               /* unique per program in this process */
    oly_arena *arena;           /* owned: vars, eqns, params, strings */
    uint32_t n_vars;
    int n_in, n_const, n_eqn, n_out;
    oly_var **in;
    oly_var **constvar;
    oly_array **constval;       /* owned references */
    oly_eqn *eqn;
    oly_atom *out;
    uint32_t effects;           /* union over eqns */
    _Atomic(void *) exec_slot;  /* owned through exec_slot_free: the executor's cache
                                   (oly__program_cache_set); ir never looks inside */
    void (*exec_slot_free)(void *); /* set with exec_slot, called by the last release */
    oly_aval *out_aval;         /* arena: the n_out output avals (literals too); NULL in
                                   hand-built programs */
};

/* The executor's cache slot of p: NULL until oly__program_cache_set filled it.
 * Thread-safe (acquire load); borrowed, lives as long as p. */
static inline void *oly__program_cache_get(oly_program *p)
{
    return atomic_load_explicit(&p->exec_slot, memory_order_acquire);
}
/* Fills p's empty cache slot with ptr (owned from then on: p's last release
 * calls dtor(ptr)). Returns what the slot holds: ptr, or the value another
 * thread set first, in which case ptr stays the caller's to free. Thread-safe. */
void *oly__program_cache_set(oly_program *p, void *ptr, void (*dtor)(void *));

/* Effects of an equation: the prim's rule (or 0) united with its subprograms'. */
uint32_t oly__eqn_effects(const oly_prim *p, const void *params, oly_program *const *subs, int n_sub);
/* The aval of an atom (literals are rank 0). */
oly_aval oly__atom_aval(const oly_atom *a);

/* ---------------------------------------------------------------- primitives */

/* What a shape rule sees. */
typedef struct oly_shape_ctx {
    const oly_prim *prim;
    const void *params;
    int n_in;
    const oly_aval *in;
    int n_sub;
    oly_program *const *sub;
    int n_out;                  /* from oly_prim_num_outputs */
} oly_shape_ctx;

/* Shape/dtype rule: fill out[0..ctx->n_out-1] or fail with a message naming the
 * primitive, what was expected and what was seen. */
typedef oly_status (*oly_shape_rule)(const oly_shape_ctx *ctx, oly_aval *out);

typedef struct oly_run oly_run; /* one execution of a program (opaque outside exec/) */
typedef struct oly_exe oly_exe; /* a compiled program (opaque outside exec/) */
typedef struct oly_group oly_group; /* a group run's collective context (src/core/group.c) */

/* A nested program made ready for many runs (loop bodies) by
 * oly_exec_ops.prepare: kernels keep it on their stack and only hand it back
 * to the ops; the fields belong to exec/. Zeroed means "not prepared". */
typedef struct oly_exec_prep {
    const oly_exe *exe;         /* borrowed: lives as long as the program */
    void *rs;                   /* owned until prepared_done: exec's run state */
} oly_exec_prep;

/* How a kernel runs nested programs (cond branches, loop bodies, pjit): the
 * executor fills this table in (src/exec/run.c) and hands it to every kernel
 * in oly_kernel_ctx.exec, so kernels never name the executor. Every run is
 * nested in ctx->run (depth-bounded) on ctx->device; buffers are dense C-order
 * with p's input and output avals, outputs preallocated by the caller.
 *   run: one run of p.
 *   prepare: p's executable and a run state taken once for many runs by the
 *     calling kernel's thread; prepared_run runs it (no lookups, no
 *     allocation in steady state); prepared_done gives the state back and is
 *     harmless on a zeroed or failed prep. */
typedef struct oly_exec_ops {
    oly_status (*run)(oly_run *run, oly_program *p, int device, const void *const *in,
                      void *const *out);
    oly_status (*prepare)(const oly_run *parent, oly_program *p, int device, oly_exec_prep *out);
    oly_status (*prepared_run)(const oly_exec_prep *pr, const void *const *in, void *const *out);
    void (*prepared_done)(oly_exec_prep *pr);
    /* The prepared program as one-element ops on registers (when every
     * equation is one, and its inputs and outputs hold one element each), or
     * NULL. Borrowed: lives as long as the program. A loop may run it itself
     * instead of prepared_run; both give the same values. */
    const struct oly_scalar_prog *(*scalar)(const oly_exec_prep *pr);
    /* The group run (pmap member) that run belongs to, and its member index
     * in *member; NULL when no group binds axis names here. */
    oly_group *(*group)(const oly_run *run, int *member);
    /* Runs p once per member of mesh, concurrently, nested in run (pmap's
     * kernel): member k reads in[k * p->n_in ..] and writes out[k * p->n_out ..]. */
    oly_status (*run_group)(oly_run *run, oly_program *p, const oly_mesh *mesh,
                            const void *const *in, void *const *out);
} oly_exec_ops;

/* What a CPU kernel sees: dense C-order buffers. ith/nth split the work
 * into shares (0 <= ith < nth); only kernels marked `splits` ever see
 * nth > 1 from the executor. Literal inputs arrive as 0-d buffers. */
typedef struct oly_kernel_ctx {
    const oly_eqn *eqn;
    const void *params;
    int n_in;
    const void *const *in;
    const oly_aval *in_aval;
    int n_out;
    void *const *out;
    const oly_aval *out_aval;
    int ith, nth;
    int device;                 /* the device this run is on */
    oly_run *run;               /* borrowed: the run, only to hand back to exec's ops
                                   (NULL when a test calls a kernel directly) */
    const oly_exec_ops *exec;   /* borrowed (static): runs nested programs; NULL
                                   when a test calls a kernel directly */
    /* The inputs as arrays, only for kernels with wants_arrays (callbacks): the
     * host function may retain them. NULL otherwise. */
    oly_array *const *in_array;
} oly_kernel_ctx;

typedef oly_status (*oly_kernel_fn)(const oly_kernel_ctx *ctx);

/* Transform rules. The contexts and the helpers rules use to emit equations
 * are in src/trans/trans.h; the contracts in one line each:
 *
 * batch: in[i] is input i in the new program, in_bdim[i] its batch axis or
 *   OLY_NOT_MAPPED (at least one input is mapped; all-unmapped equations are
 *   copied by the driver without asking the rule, except a collective naming
 *   the batched axis, ctx->axis_name: see oly_prim.names_axis). Emit into
 *   ctx->b; set out[j] and out_bdim[j] (OLY_NOT_MAPPED when that output does
 *   not depend on the batch).
 * jvp: primal[i] are the inputs in the new program; tangent[i] is valid where
 *   tan_nz[i] (else a symbolic zero; at least one is nonzero). Emit the primal
 *   computation and the tangent computation, which must be linear in the
 *   tangents; set primal_out[j], tangent_out[j] and out_nz[j].
 * transpose: the equation is linear in the inputs with linear[i] set (their
 *   atoms are unset); the others (residuals, constants) are valid atoms in in[].
 *   ct[j] is the cotangent of output j where ct_nz[j]. Emit; set ct_in[i] and
 *   ct_in_nz[i] for the linear inputs. */
typedef struct oly_batch_ctx oly_batch_ctx;
typedef struct oly_jvp_ctx oly_jvp_ctx;
typedef struct oly_transpose_ctx oly_transpose_ctx;
#define OLY_NOT_MAPPED (-1)
typedef oly_status (*oly_batch_rule)(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                     const int *in_bdim, oly_atom *out, int *out_bdim);
typedef oly_status (*oly_jvp_rule)(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                                   const oly_atom *tangent, const bool *tan_nz,
                                   oly_atom *primal_out, oly_atom *tangent_out, bool *out_nz);
typedef oly_status (*oly_transpose_rule)(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                         const oly_atom *in, const bool *linear,
                                         const oly_atom *ct, const bool *ct_nz,
                                         oly_atom *ct_in, bool *ct_in_nz);
/* partial_eval (optional; for equations holding programs, e.g. scan and cond):
 * some inputs are unknown (unknown[i]: depend on tangents). Emit the known part
 * into ctx->known and the unknown part into ctx->unknown (trans.h), passing
 * known values across with oly__pe_residual; set known_out/unknown_out and
 * out_unknown. Without the rule the whole equation is unknown. */
typedef struct oly_pe_ctx oly_pe_ctx;
typedef oly_status (*oly_pe_rule)(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                                  const oly_atom *unknown_in, const bool *unknown,
                                  oly_atom *known_out, oly_atom *unknown_out, bool *out_unknown);
/* dce (optional; rows whose outputs can be dropped one by one, e.g. pmap):
 * used_out[j] says whether anything reads output j (none may be read when the
 * equation has effects). Set *out to the equation's replacement: a program
 * taking the inputs with used_in[i] set (in order) and returning the used
 * outputs (in order), effects kept; or *out = NULL to keep the equation as
 * it is (every input used). Without the rule DCE keeps every output. */
typedef oly_status (*oly_dce_rule)(const oly_eqn *eqn, const bool *used_out, bool *used_in,
                                   oly_program **out);

/* Rule slots of a row (oly_prim.no_rule). A NULL slot marked here is a
 * decision ("this primitive has no such rule"), not an omission: the drivers
 * still see NULL and report the missing rule by the primitive's name, and the
 * row test (tests/c/test_rows.c) fails on a NULL slot left unmarked. */
enum {
    OLY_RULE_BATCH = 1 << 0,
    OLY_RULE_JVP = 1 << 1,
    OLY_RULE_TRANSPOSE = 1 << 2,
    OLY_RULE_PARTIAL_EVAL = 1 << 3, /* NULL: the whole equation goes to the unknown side */
};

struct oly_prim {
    const char *name;
    int n_in;                   /* -1: variadic */
    int n_out;                  /* fixed count; ignored when num_outputs != NULL */
    int (*num_outputs)(const void *params, int n_in);
    size_t params_size;         /* 0: no params */
    const oly_param_field *fields;
    int n_fields;
    oly_shape_rule shape;
    uint32_t dtypes;            /* elementwise rows: the operand dtypes the shape rule
                                   accepts, bit 1 << dtype (select_n: its cases'); each
                                   has a kernel (tests/c/test_rows.c). 0 elsewhere */
    uint32_t (*effects)(const void *params); /* NULL: effect-free */
    oly_batch_rule batch;
    oly_jvp_rule jvp;
    oly_transpose_rule transpose;
    oly_pe_rule partial_eval;
    unsigned no_rule;           /* OLY_RULE_* bits: slots left NULL on purpose */
    /* Collective rows (src/prims/collective.c): whether params name the axis
     * `name`. vmap over that name asks the row's batch rule even when no input
     * is mapped (axis_index has none), and batches every input of an equation
     * whose nested programs hold such a collective. NULL for other rows. */
    bool (*names_axis)(const void *params, const char *name);
    oly_dce_rule dce;           /* NULL: DCE keeps every output (nested programs cleaned) */
};

/* Every row of prims.def, defined in its family file (the registry in prims.c
 * re-declares them weak, so a row nobody defined yet reads as missing). */
#define OLY_PRIM(name) extern const oly_prim oly__prim_##name;
#include "prims/prims.def"
#undef OLY_PRIM

/* The rows of prims.def by position: OLY_PRIM_ID_<name>. */
typedef enum oly_prim_id {
#define OLY_PRIM(name) OLY_PRIM_ID_##name,
#include "prims/prims.def"
#undef OLY_PRIM
    OLY_PRIM_ID_COUNT
} oly_prim_id;

/* Registry (src/prims/prims.c): every row of prims.def. */
const oly_prim *oly__prim_at(int i);
int oly__prim_count(void);

/* Generic params hooks driven by the field table (src/prims/params.c). */
oly_status oly__params_copy(const oly_prim *p, oly_arena *arena, const void *src, void **out);
void oly__params_release(const oly_prim *p, void *params); /* drops retained refs */
uint64_t oly__params_hash(const oly_prim *p, const void *params);
bool oly__params_equal(const oly_prim *p, const void *a, const void *b);
/* oly__params_print appends "k=v k=v" (visible fields, in table order) to a
 * growable string. */
typedef struct oly_strbuf {
    char *data;
    size_t len, cap;
    bool failed;
} oly_strbuf;
void oly__sb_printf(oly_strbuf *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void oly__sb_puts(oly_strbuf *sb, const char *s);
void oly__params_print(const oly_prim *p, const void *params, oly_strbuf *sb);
/* One field as "name=value"; returns false (printing nothing) for a hidden field. */
bool oly__param_print_field(const oly_param_field *f, const void *params, oly_strbuf *sb);
/* Python's repr of a float ("1.0", "0.5", "1e-05", "nan"); single: shortest
 * digits that round-trip at float32 precision. */
void oly__format_float(char *buf, size_t n, double x, bool single);

/* ---------------------------------------------------------------- shared helpers */

/* Row-major strides in elements. */
void oly__strides(const oly_aval *a, int64_t *strides);
/* Normalise an axis in [-rank, rank) to [0, rank); fails naming who. */
oly_status oly__axis(const char *who, int64_t axis, int rank, int64_t *out);
/* Convert n elements from one dtype to another (numpy casting semantics). */
void oly__convert(const void *src, oly_dtype from, void *dst, oly_dtype to, int64_t n);
/* float16 / bfloat16 <-> float */
float oly__half_to_float(uint16_t h);
uint16_t oly__float_to_half(float f);
float oly__bf16_to_float(uint16_t h);
uint16_t oly__float_to_bf16(float f);

/* ---------------------------------------------------------------- CPU kernels (src/cpu) */

/* How the CPU backend runs one row. The row (oly_prim) says what a primitive
 * means; this says how it executes here, so the buffer facts live beside the
 * kernel they describe rather than in the row: another backend may well fuse
 * or alias differently, and the rule drivers never need them. */
typedef struct oly_cpu_kernel {
    oly_kernel_fn fn;           /* NULL: no CPU kernel */
    bool inplace_ok;            /* output 0 may share input 0's buffer (elementwise) */
    bool wants_arrays;          /* fn needs ctx->in_array (values escape to host code) */
    /* The input whose buffer output `out` may take (its alias), or -1; NULL:
     * none. The plan gives it only when that input dies at this equation, is
     * no other operand of it, and is the run's own (not a program input,
     * constant or literal); fn sees in == out then, and copies otherwise. */
    int (*alias_input)(const void *params, int out);
    /* fn partitions its work by ctx->ith / ctx->nth for any nth: the shares
     * write disjoint parts of the outputs, read only what no share writes
     * (in place: their own part), run no host code and no nested program,
     * and one share's failure leaves the others harmless; an element's value
     * does not depend on where the share boundaries fall (a vector loop pads
     * its tail rather than finishing it with another function), so results
     * are the same bytes for every thread count. The executor may then run a
     * big step as shares on several threads (src/exec/run.c). */
    bool splits;
    /* With wants_arrays: true when this equation's host code never keeps an
     * argument (its host function borrows them), so the step gets plain
     * buffers and no arrays; NULL: always arrays. */
    bool (*borrows_args)(const void *params);
    /* The host function this equation only calls, on its inputs into its
     * outputs, borrowing its arguments (no batch index, no aliases), with the
     * frame's kind and the statistics' flavour; NULL when it does more (or
     * its host function may keep an argument). What lets a register program
     * call it (src/cpu/scalar.c). NULL: never. */
    oly_host_fn *(*host_call)(const void *params, const char **kind, const char **flavour);
    /* The gated tap this equation is (an identity outside_call with every > 0,
     * olympus.h), which a register program runs as a gate test and moves of
     * its inputs to its outputs (src/cpu/scalar.c); NULL when it is not one.
     * NULL: never. */
    const oly_params_outside_call *(*gated_tap)(const void *params);
} oly_cpu_kernel;

/* p's CPU kernel: from src/cpu's table for rows of prims.def, else what
 * oly__cpu_register recorded; NULL when p has none. Borrowed (static).
 * Thread-safe; a lookup, meant for compile time, not for every run. */
const oly_cpu_kernel *oly__cpu_kernel(const oly_prim *p);
/* The table's entry for prims.def row id (fn may be NULL); NULL out of range. */
const oly_cpu_kernel *oly__cpu_kernel_at(int id);
/* p's position in prims.def (OLY_PRIM_ID_*), or -1 for a row defined elsewhere. */
int oly__prim_id(const oly_prim *p);
/* Gives a row defined outside prims.def (tests, embedders) its CPU kernel;
 * both are borrowed for the life of the process, and registering p again
 * replaces its kernel. Fails (INVALID) for a prims.def row or when the small
 * fixed table (64 rows) is full. Thread-safe. */
oly_status oly__cpu_register(const oly_prim *p, const oly_cpu_kernel *k);

/* One-element steps without a kernel call (src/cpu/scalar.c). A register is
 * 8 bytes holding one element of a dtype of at most 8 bytes (not complex) at
 * offset 0; an op reads registers a, b, c (as many as its row takes) and
 * writes out. Semantics are the kernels', op for op. */
typedef union oly_sreg {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    uint8_t b;
} oly_sreg;

typedef struct oly_sop {
    uint16_t code;              /* oly__cpu_scalar_code's; never 0 */
    uint16_t a, b, c, out;      /* registers */
    uint8_t size_in[3];         /* operand bytes (0 past the row's arity) */
    uint8_t size_out;
    uint8_t din, dout;          /* oly_dtype of operand 0 and of the result */
} oly_sop;

/* Loads / stores one element of n bytes (1, 2, 4 or 8); the rest of the
 * register is zero after a load. */
static inline void oly__sreg_load(oly_sreg *r, const void *p, size_t n)
{
    r->u64 = 0;
    switch (n) {
    case 1: memcpy(r, p, 1); break;
    case 2: memcpy(r, p, 2); break;
    case 4: memcpy(r, p, 4); break;
    default: memcpy(r, p, 8); break;
    }
}
static inline void oly__sreg_store(void *p, const oly_sreg *r, size_t n)
{
    switch (n) {
    case 1: memcpy(p, r, 1); break;
    case 2: memcpy(p, r, 2); break;
    case 4: memcpy(p, r, 4); break;
    default: memcpy(p, r, 8); break;
    }
}
/* The code of e when it can run as a one-element op (every operand and its
 * one output hold one element, a dtype and row the table covers), else 0.
 * in / out: its operand and output avals. A compile-time lookup. */
int oly__cpu_scalar_code(const oly_eqn *e, const oly_aval *in, const oly_aval *out);
/* Fills op for code on operands of avals in (n_in of them) into out, with
 * registers a, b, c, o. */
void oly__cpu_scalar_op(int code, const oly_aval *in, int n_in, const oly_aval *out, int a, int b,
                        int c, int o, oly_sop *op);
/* A host function call as a register op (code oly__cpu_scalar_call_code(),
 * a: its index in the frames the run is given): the frame prepared once,
 * its args and results pointing at registers. */
typedef struct oly_host_call {
    oly_callback_frame frame;
    oly_host_fn *fn;            /* borrowed from the equation's params */
    const char *flavour;        /* the statistics' */
    /* A gated tap (code oly__cpu_scalar_tap_code()): its params, and the
     * values of its counter (args[0]) known to keep the gate closed,
     * closed_lo..closed_hi (empty at first), which the run narrows as it
     * goes: the run's own state, written through the const pointers the ops
     * get. NULL tap: a host function call. */
    const oly_params_outside_call *tap;
    int64_t closed_lo, closed_hi;
} oly_host_call;
/* A call in a register program: what a frame is prepared from. */
typedef struct oly_scall {
    oly_host_fn *fn;            /* borrowed from the equation's params */
    const char *kind, *flavour;
    int n_args, n_results;
    const uint16_t *arg_reg, *res_reg; /* registers */
    const oly_aval *arg_avals, *res_avals; /* borrowed: the step's */
    const oly_params_outside_call *tap; /* a gated tap (no results), or NULL */
} oly_scall;
int oly__cpu_scalar_call_code(void);
/* A gated tap as a register op (a: its frame's index, as a call's): the gate
 * tested on the counter register; when open, the tap is sent as the
 * outside_call kernel sends it (src/cpu/callback.c). The tap's outputs are
 * moves of its inputs, ops of their own. */
int oly__cpu_scalar_tap_code(void);
/* A register copy: a into out (what a tap's outputs are). */
int oly__cpu_scalar_move_code(void);
/* The open-or-unknown side of a gated tap op: tests the gate on c's counter,
 * sends the tap when it is open, else records the closed range around the
 * counter in c. Fails as the outside_call kernel's send does. */
oly_status oly__cpu_tap_gate(oly_host_call *c);
/* Makes calls[0..n)'s frames on register file r, each register renamed
 * through map (NULL: as is), device and group coordinates from env (its
 * device and n_axes / axis_names / axis_index; borrowed by the frames).
 * ptrs: room for the sum of the calls' n_args + n_results pointers. */
void oly__cpu_scalar_frames(const oly_scall *calls, int n, oly_sreg *r, const uint16_t *map,
                            const oly_callback_frame *env, oly_host_call *out, void **ptrs);
/* Calls c's host function (timed when statistics are on) and maps its
 * failure as the callback kernels do (src/cpu/callback.c). */
oly_status oly__cpu_host_call(const oly_host_call *c);
/* env's device and group coordinates for a call from ctx's run (coords: room
 * for OLY_MAX_RANK). */
void oly__cpu_callback_env(const oly_kernel_ctx *ctx, oly_callback_frame *env, int64_t *coords);
/* Runs ops[0..n) in order on the register file r, calls through frames
 * (NULL when the ops make none). Fails only when a host function does. */
oly_status oly__cpu_scalar_run(const oly_sop *ops, int n, oly_sreg *r, const oly_host_call *frames);
/* Runs one op made with registers 0, 1, 2 -> 3 on the elements at in[] into
 * out[0]. Never fails. */
void oly__cpu_scalar_step(const oly_sop *op, const void *const *in, void *const *out);

/* A program made only of one-element ops, its values in registers: what a
 * loop runs per iteration without the executor (src/cpu/loop.c). Built by
 * the executor (src/exec/compile.c); registers are the executable's value
 * slots, init holds the constants and literals (written by no op). */
typedef struct oly_scalar_prog {
    int n_ops;
    const oly_sop *ops;
    int n_regs;
    const oly_sreg *init;       /* n_regs */
    int n_in, n_out;
    const uint16_t *in_reg;     /* n_in: the register input i is loaded into */
    const uint16_t *out_reg;    /* n_out: the register output k is read from */
    const uint8_t *in_size;     /* n_in: bytes of input i */
    const uint8_t *out_size;    /* n_out: bytes of output k */
    int n_calls;                /* host function calls among the ops */
    const oly_scall *calls;     /* n_calls, in op order */
    int n_call_ptrs;            /* their args and results, summed */
} oly_scalar_prog;

/* A scan or while loop on registers (src/cpu/scalar.c): body (and cond, for
 * a while; NULL for a scan) with body_consts / cond_consts constant inputs
 * before their nc carries. _load takes the constants and the initial carries,
 * _run runs at most max_iter iterations (a while stops when cond is false),
 * _store writes the carries. _new fails only for lack of memory; _free
 * accepts NULL. */
typedef struct oly_scalar_loop oly_scalar_loop;
oly_status oly__cpu_scalar_loop_new(const oly_scalar_prog *body, int body_consts,
                                    const oly_scalar_prog *cond, int cond_consts, int nc,
                                    const oly_callback_frame *env, oly_scalar_loop **out);
void oly__cpu_scalar_loop_free(oly_scalar_loop *L);
void oly__cpu_scalar_loop_load(oly_scalar_loop *L, const void *const *body_consts,
                               const void *const *cond_consts, const void *const *carries);
oly_status oly__cpu_scalar_loop_run(oly_scalar_loop *L, int64_t max_iter);
void oly__cpu_scalar_loop_store(const oly_scalar_loop *L, void *const *carries);

/* ---------------------------------------------------------------- groups (src/core/group.c) */

/* A group run's collective context: the mesh (axis names, sizes, the member
 * devices, members numbered row-major) and the rendezvous its collectives
 * meet at. Made by whoever launches the group (src/rt), found by kernels
 * through ctx->exec->group. */
#define OLY_GROUP_MAX 4096      /* members of one group at most */
/* Checks and copies mesh into a new group; fails (INVALID) saying what is wrong. */
oly_status oly__group_new(const oly_mesh *mesh, oly_group **out);
void oly__group_free(oly_group *g); /* accepts NULL */
int oly__group_size(const oly_group *g); /* every process's members */
/* The member's local device (member must be this process's). */
int oly__group_device(const oly_group *g, int member);
/* member's coordinates on the mesh (coords: OLY_MAX_RANK entries) and the
 * axis names (borrowed from g); returns the number of axes. */
int oly__group_coords(const oly_group *g, int member, const char *const **names, int64_t *coords);
/* This process's members, ascending: how many, and the i-th's member number
 * (all of them, in order, when the group does not cross processes). */
int oly__group_local_size(const oly_group *g);
int oly__group_local_member(const oly_group *g, int i);
/* The members of a mesh (n devices, global ids) this process runs. */
int oly__mesh_local_count(const int *devices, int n);
/* The processes a group spans (1: a local group), a member's process and its
 * place among that process's members. */
int oly__group_processes(const oly_group *g);
int oly__group_process_of(const oly_group *g, int member);
int oly__group_process_place(const oly_group *g, int member);
/* Where a member sits among those a collective over some mesh axes groups
 * (the members sharing its coordinates on the other axes): size of that
 * subgroup, the member's index in it (row-major over the named axes, the
 * first name major). */
typedef struct oly_group_axes {
    int n;
    int axis[OLY_MAX_RANK];     /* mesh axis of each name */
    int stride[OLY_MAX_RANK];   /* member-number stride of that axis */
    int size, index;
} oly_group_axes;
/* Fills out for member over the n_names names (s[i], len[i] bytes each; not
 * terminated); false when a name is no axis of the mesh. */
bool oly__group_axes(const oly_group *g, int member, int n_names, const char *const *names,
                     const int *lens, oly_group_axes *out);
/* The member with index j in member's subgroup along ax. */
int oly__group_peer(const oly_group *g, int member, const oly_group_axes *ax, int j);
/* Any member's index in its own subgroup along ax (ax from any member). */
int oly__group_index(const oly_group *g, const oly_group_axes *ax, int member);
/* Whether ax's subgroups cross processes: 0 none does, 1 one subgroup is
 * every member (and the group spans processes), 2 several subgroups, some
 * across processes. */
int oly__group_reach(const oly_group *g, const oly_group_axes *ax);
/* A barrier of every member: publishes `publish` (unless NULL) as member's
 * slot, then waits for the others (blocking hooks). Fails when a member
 * failed or finished without arriving: "<what> aborted: device 2 failed:
 * ...". Slots published at one barrier stay readable until the next. */
oly_status oly__group_sync(oly_group *g, int member, const void *publish, const char *what);
const void *oly__group_slot(const oly_group *g, int member);
/* member's run failed with st (this thread's message and payload): the group
 * keeps the first failure and wakes every waiting member. */
void oly__group_fail(oly_group *g, int member, oly_status st);
/* member's run finished without failing. */
void oly__group_leave(oly_group *g, int member);
/* OLY_OK, or the group's first failure made this thread's error (payload included). */
oly_status oly__group_report(oly_group *g);

/* The hook a cross-process transport plugs into (MPI: src/rt/mpigroup.c,
 * installed when the processes join). Meshes then name global devices
 * (process p's local device j is p * L + j, L = oly_device_count() in every
 * process); each process runs its own members, and a collective whose
 * members span processes has one leader member per process (its lowest
 * local member) call these between its local phases. Every process makes the
 * same calls in the same order; each entry but process / processes / fail is
 * collective over the processes, and its failure poisons the local group like
 * a member's. */
typedef struct oly_group_transport {
    int (*process)(void);       /* this process's index */
    int (*processes)(void);     /* how many (1: nothing crosses processes) */
    /* recv (n elements of dtype) := the op (0 sum, 1 max, 2 min) over every
     * process's send; send == recv: in place. */
    oly_status (*allreduce)(const void *send, void *recv, int64_t n, oly_dtype dtype, int op,
                            const char *what);
    /* recv (processes * bytes) := every process's send, in process order. */
    oly_status (*allgather)(const void *send, void *recv, int64_t bytes, const char *what);
    /* pairs of process indices (each source and each destination once):
     * src's send lands in dst's recv; a process nobody sends to gets zeros. */
    oly_status (*ppermute)(const void *send, void *recv, int64_t bytes, const int (*pairs)[2],
                           int n_pairs, const char *what);
    void (*fail)(const char *message); /* a local member failed: tell the peers */
} oly_group_transport;
void oly__group_set_transport(const oly_group_transport *t);
const oly_group_transport *oly__group_transport(void); /* NULL: one process */

/* Axis names of a collective's params text "('i', 'j')" (src/prims/collective.c):
 * up to max names as (s[i], len[i]) pointing into t; the count, or -1 when t
 * is not such a text. */
int oly__axis_names(const char *t, const char **s, int *len, int max);

/* ---------------------------------------------------------------- devices */

/* OLYMPUS_NUM_CPU_DEVICES's value as a device count: 1 when s is NULL, empty
 * or not an integer in [1, 1024] (src/core/device.c). */
int oly__parse_device_count(const char *s);

/* ---------------------------------------------------------------- primitive helpers */

/* A bounded text for error messages, returned by value. */
typedef struct oly_text { char s[320]; } oly_text;
/* "f32[5,3]" (truncated to fit). */
oly_text oly__show_aval(const oly_aval *a);
/* "(1, 2, 3)"; a list too long to fit ends in ", ...)". */
oly_text oly__show_ints(const oly_ints *v);
/* Fails (OLY_ERR_INVALID, naming who and field) unless v has 0..OLY_MAX_RANK entries. */
oly_status oly__check_ints(const char *who, const char *field, const oly_ints *v);
/* axis in [-rank, rank) normalised to [0, rank); fails (OLY_ERR_INVALID) naming
 * who and what ("axis", "dimension", ...). */
oly_status oly__norm_axis(const char *who, const char *what, int64_t axis, int rank,
                          int64_t *out);
/* A field-table row for field f of params struct T (kind k). */
#define OLY_FIELD(T, f, k) {.name = #f, .kind = (k), .offset = offsetof(T, f)}
/* Fails (OLY_ERR_INVALID, naming who) unless rank dims (each >= 0) multiply to an
 * element count whose byte size fits for every dtype; the check of oly_aval_make. */
oly_status oly__dims_check(const char *who, int rank, const int64_t *dims);
/* dot_general's normalised dimension numbers and the derived canonical view:
 * operands seen as (B, M, K) and (B, K, N) matrices. */
typedef struct oly_dot_dims {
    int nb, nc, lf, rf;             /* batch, contract, lhs free, rhs free counts */
    int64_t lb[OLY_MAX_RANK], rb[OLY_MAX_RANK], lc[OLY_MAX_RANK], rc[OLY_MAX_RANK];
    int64_t lfree[OLY_MAX_RANK], rfree[OLY_MAX_RANK];
    int64_t B, M, N, K;
} oly_dot_dims;
/* Checks p against the operand avals and fills di; fails naming dot_general
 * (src/prims/linalg.c; the shape rule and the kernel both use it). */
oly_status oly__dot_general_dims(const oly_params_dot_general *p, const oly_aval *l,
                                 const oly_aval *r, oly_dot_dims *di);
/* The rules every row running one nested program (pjit, remat) shares: output
 * count from the hidden n_out param and the shape rule checking sub[0]'s
 * signature (call.c; the kernel running sub[0] is src/cpu/call.c's). */
int oly__call_num_outputs(const void *params, int n_in);
oly_status oly__call_shape(const oly_shape_ctx *ctx, oly_aval *out);
/* The JVP rule of such a row: sub[0]'s JVP program, emitted into ctx->b by emit
 * (pjit inlines it; remat wraps it in a remat equation). */
typedef oly_status (*oly_call_emit_fn)(oly_builder *b, const oly_eqn *eqn, oly_program *prog,
                                       const oly_atom *in, oly_atom *out);
oly_status oly__call_jvp_with(oly_call_emit_fn emit, oly_jvp_ctx *ctx, const oly_eqn *eqn,
                              const oly_atom *primal, const oly_atom *tangent,
                              const bool *tan_nz, oly_atom *primal_out, oly_atom *tangent_out,
                              bool *out_nz);
/* The transpose rule of a primitive that calls its sub[0] (pjit, remat): sub[0]
 * is transposed as a whole with the non-linear inputs as residuals (call.c). */
oly_status oly__call_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const bool *linear, const oly_atom *ct, const bool *ct_nz,
                               oly_atom *ct_in, bool *ct_in_nz);
/* The same, the transposed program emitted by emit (pmap wraps it in a pmap). */
oly_status oly__call_transpose_with(oly_call_emit_fn emit, oly_transpose_ctx *ctx,
                                    const oly_eqn *eqn, const oly_atom *in, const bool *linear,
                                    const oly_atom *ct, const bool *ct_nz, oly_atom *ct_in,
                                    bool *ct_in_nz);
/* pmap's mesh from its params (src/prims/pmap.c): the member count, or -1
 * (message set) when the params are malformed; names (NUL-terminated
 * copies in buf, n bytes) and devices (up to max_members) when not NULL. */
int oly__pmap_mesh(const oly_params_pmap *p, char *buf, size_t n, const char **names,
                   int *devices, int max_members);
/* Of pmap's members (members: oly__pmap_mesh's count), how many this process
 * runs: the leading axis of the row's inputs and outputs; -1 out of memory. */
int oly__pmap_local(const oly_params_pmap *p, int members);

#endif /* OLYMPUS_INTERNAL_H */

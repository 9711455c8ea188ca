/* exec.h — declarations private to the CPU executor (src/exec/): the compiled
 * form of a program (the executable), the run state, and small queries that
 * tests use to observe the buffer plan and the eager cache. */
#ifndef OLYMPUS_EXEC_H
#define OLYMPUS_EXEC_H

#include "internal.h"

/* Most nested runs on one thread (pjit inside pjit, host functions running
 * programs): deeper is an error, not a stack overflow. */
#define OLY_EXEC_MAX_DEPTH 64
/* Scratch offsets and sizes are multiples of this. */
#define OLY_EXEC_ALIGN 64
/* An executable whose scratch and per-run arrays fit in this many bytes keeps
 * them between runs (one spare run state); larger ones allocate per run. */
#define OLY_EXEC_POOL_BYTES ((size_t)4 << 20)

/* A kernel marked `splits` whose step has at least this much work (elements:
 * its outputs', or its largest input's when larger) runs in shares on the
 * thread pool; smaller work stays on the calling thread (docs/design.md,
 * "Threads"). */
#ifndef OLY_EXEC_SPLIT_MIN /* a build may choose another (bench/split_bench.c measures) */
#define OLY_EXEC_SPLIT_MIN ((int64_t)1 << 16)
#endif
/* Elements per share at least, and shares per thread at most: small shares
 * bound what the caller waits for when a helper is descheduled mid-share. */
#define OLY_EXEC_SHARE_MIN ((int64_t)1 << 14)
#define OLY_EXEC_SHARES_PER_THREAD 16

/* Where a variable lives during a run. */
typedef enum oly_loc_kind {
    OLY_LOC_INPUT,   /* program input idx */
    OLY_LOC_CONST,   /* program constant idx */
    OLY_LOC_SCRATCH, /* at off in the run's scratch block */
    OLY_LOC_OWN,     /* its own oly_array per run (a callback consumes it) */
    OLY_LOC_OUT,     /* written straight into output buffer idx */
    OLY_LOC_KIND_COUNT
} oly_loc_kind;

typedef struct oly_loc {
    oly_loc_kind kind;
    int idx;
    size_t off;
} oly_loc;

/* One equation ready to run. in_ref[j] is a value slot: a var id below
 * n_vars, else literal in_ref[j] - n_vars. */
typedef struct oly_step {
    const oly_eqn *eqn;         /* borrowed from the program */
    oly_kernel_fn kernel;       /* from src/cpu's table (oly__cpu_kernel) */
    bool wants_arrays;          /* the kernel reads ctx->in_array */
    bool split;                 /* the kernel splits and work >= OLY_EXEC_SPLIT_MIN */
    bool scalar;                /* runs as sop (one element everywhere), no kernel call */
    bool nothing;               /* writes nothing (zero-size outputs): no kernel call */
    oly_sop sop;                /* when scalar: registers 0, 1, 2 -> 3 */
    int64_t work;               /* elements: the outputs', or the largest input's */
    int n_in, n_out;
    int *in_ref;                /* owned by the exe's block */
    int *out_var;               /* var ids */
    oly_aval *in_aval;
    oly_aval *out_aval;
} oly_step;

/* How program output k is produced: directly (its var is OLY_LOC_OUT k) or
 * by a copy at the end of the run from a var or a literal. */
typedef struct oly_out_src {
    bool direct;
    int ref;                    /* like oly_step.in_ref */
    size_t nbytes;              /* bytes to copy when not direct */
} oly_out_src;

/* A value the run holds as an array of its own: an OLY_LOC_OWN var, or a copy
 * of input in_idx (>= 0) when the caller passes no input arrays. */
typedef struct oly_own {
    uint32_t var;
    int in_idx;                 /* -1 for an OLY_LOC_OWN var */
    const oly_aval *aval;       /* borrowed from the program */
    size_t nbytes;
} oly_own;

/* The equations an executable runs (src/exec/fuse.c): the program's after
 * common-subexpression elimination and fusion. Fused groups are equations of
 * a row that exists only here ("fused"), their params the cpu plan. */
typedef struct oly_rewrite {
    oly_arena *arena;           /* owned: eqn, out, the fused equations and plans */
    int n_eqn;
    oly_eqn *eqn;               /* in run order; others' fields borrowed from the program */
    const oly_cpu_kernel **kern; /* owned, n_eqn: each one's kernel */
    oly_atom *out;              /* the program's outputs, duplicates read through */
    int n_cse;                  /* equations dropped as duplicates */
    int n_group, n_fused;       /* fused groups, and the equations in them */
} oly_rewrite;

/* The rewrite of p (borrowed for the rewrite's life). Fails (UNSUPPORTED)
 * when a row has no CPU kernel, or on out of memory. */
oly_status oly__exec_rewrite(const oly_program *p, oly_rewrite **out);
void oly__exec_rewrite_free(oly_rewrite *rw); /* accepts NULL */
/* Appends a text form of rw's groups (what OLYMPUS_DEBUG_FUSION prints). */
void oly__exec_rewrite_describe(const oly_program *p, const oly_rewrite *rw, oly_strbuf *sb);
/* Tests: fusion and CSE on (1) or off (0) for programs compiled from now on,
 * and the least element count fused (groups of fewer are left alone); -1
 * restores the default (OLYMPUS_FUSION / OLYMPUS_CSE, 4096 elements).
 * Compiled programs keep theirs. */
void oly__exec_set_rewrites(int fusion, int cse, int64_t min_elems);
/* Tests: the description of p's executable (compiling it), in *text (free). */
oly_status oly__exec_describe(oly_program *p, char **text);

struct oly_exe {
    oly_program *prog;          /* borrowed: the exe is owned by the program */
    oly_rewrite *rw;            /* owned: the equations the steps run */
    uint32_t n_vars;
    uint32_t n_slots;           /* n_vars + n_lit: size of a run's value tables */
    int n_step;
    oly_step *step;             /* owned */
    oly_loc *loc;               /* owned, n_vars */
    int n_lit;
    oly_array **lit;            /* owned references: 0-d literal values */
    oly_out_src *out_src;       /* owned, n_out */
    oly_aval *out_aval;         /* owned, n_out: the program's output avals */
    bool *in_needs_array;       /* owned, n_in: a callback consumes input i */
    int n_own;                  /* vars with OLY_LOC_OWN */
    int n_own_all;              /* n_own + inputs with in_needs_array */
    oly_own *own;               /* owned, n_own_all: OWN vars first, then input copies */
    int n_out_loc;              /* vars with OLY_LOC_OUT */
    uint32_t *out_loc_var;      /* owned, n_out_loc */
    bool pool;                  /* small enough to keep a spare run state */
    /* Owned, n_spare (one per device) when pool: a run state kept for the next
     * run on that device (run.c), or NULL. Only the thread running on a device
     * touches its slot: src/rt's streams give one thread a device at a time, and
     * nested runs stay on that thread. */
    void **spare;
    int n_spare;
    size_t scratch_bytes;       /* peak of the buffer plan */
    size_t sum_intermediate_bytes; /* what the plan would need without reuse */
    size_t cost_bytes;          /* a run writes this much: outputs + intermediates */
    int max_in, max_out;        /* largest arity of any step */
    int *refs;                  /* owned: storage behind the steps' int arrays */
    size_t n_refs;              /* entries in refs */
    int n_patch;                /* entries in patch */
    int *patch;                 /* owned: positions in refs naming an input or an
                                 * OLY_LOC_OUT var (their pointers change per run) */
    oly_aval *avals;            /* owned: storage behind the steps' avals */
    /* Owned (sprog.c), or NULL: the whole program as one-element ops on
     * registers (the value slots), when it is only that. */
    oly_scalar_prog *sprog;
};

/* One execution of a program; nested runs point at their parent. */
struct oly_run {
    const oly_run *parent;      /* borrowed; NULL at top level */
    int device;
    int depth;                  /* nesting depth on this thread, 1 at top level */
    oly_group *group;           /* borrowed: the group run this is a member of (nested
                                   runs inherit it), or NULL */
    int member;                 /* the member index in group */
    bool shared;                /* a group member: its device may be running other work
                                   (members are threads of their own), so it takes no
                                   spare run state; inherited */
};

/* The executable of p, compiling and caching it on first use. Borrowed: it
 * lives as long as p. Fails (UNSUPPORTED) when a row has no kernel. */
/* An array for an already checked aval whose data the caller overwrites in
 * full (not zeroed; src/core/array.c). */
oly_status oly__array_new_uninit(const oly_aval *aval, oly_array **out);

oly_status oly__exec_get(oly_program *p, const oly_exe **out);

/* Builds exe->sprog when every step is scalar and every input, output and
 * constant holds one element (sprog.c); leaves it NULL otherwise. Fails only
 * for lack of memory. _free accepts NULL. */
oly_status oly__exec_sprog_build(oly_exe *exe);
void oly__exec_sprog_free(oly_scalar_prog *sp);

/* Frees exe's spare run state (run.c); compile.c's oly__exec_free calls it. */
void oly__exec_drop_spare(oly_exe *exe);

/* Runs exe. in_arrays (may be NULL) are the inputs as arrays, used where a
 * callback consumes an input; without them such inputs are copied. */
oly_status oly__exec_run(oly_run *parent, const oly_exe *exe, int device, const void *const *in,
                         oly_array *const *in_arrays, void *const *out);

/* oly_program_run's halves (the runtime, src/rt, decides where the run goes).
 * _begin checks the call, finds the executable and makes the outputs (device
 * and committed set, data not yet written); _run_arrays waits for inputs still
 * being computed (reporting their failure) and runs exe at top level. */
oly_status oly__exec_begin(oly_program *p, int device, oly_array *const *inputs, int n_in,
                           oly_array **outputs, int n_out, const oly_exe **exe);
oly_status oly__exec_run_arrays(const oly_exe *exe, int device, oly_array *const *inputs,
                                oly_array *const *outputs);

/* The thread pool the runtime lends the executor (src/rt/pool.c; exec never
 * names rt). A parallel-for: run(work, arg, n) calls work(arg, i) once for
 * every share i in [0, n), on the pool's threads and the calling thread, and
 * returns true when all have returned; it returns false, having run nothing,
 * when the pool is busy with another caller's job. work must not run host
 * code or wait for anything. */
typedef bool (*oly_exec_pool_fn)(void (*work)(void *arg, int share), void *arg, int n);
/* Lends run (NULL: none) with its size, the caller included. Thread-safe;
 * runs already splitting finish with the pool they found. */
void oly__exec_set_pool(oly_exec_pool_fn run, int threads);

/* The group launcher the runtime lends the executor (src/rt/group.c): runs
 * exe once per member of g at the same time, member k on g's device k with
 * inputs in[k * n_in ..] (in_arrays likewise, or NULL) and outputs
 * out[k * n_out ..], each through oly__exec_run_member, nested in parent
 * (NULL at top level); returns when every member has finished, with the
 * group's first failure. */
typedef oly_status (*oly_exec_group_fn)(const oly_run *parent, const oly_exe *exe, oly_group *g,
                                        const void *const *in, oly_array *const *in_arrays,
                                        void *const *out);
void oly__exec_set_group(oly_exec_group_fn run);
/* One member's run of exe (a group launcher's work): as oly__exec_run, with
 * the run bound to group g as member. */
oly_status oly__exec_run_member(const oly_run *parent, const oly_exe *exe, oly_group *g,
                                int member, const void *const *in, oly_array *const *in_arrays,
                                void *const *out);

/* The ops kernels run nested programs with (oly_kernel_ctx.exec; run.c). */
extern const oly_exec_ops oly__exec_ops;

/* Runs p with raw input and output buffers (outputs preallocated by the
 * caller with p's output avals); run may be NULL at top level. */
oly_status oly__exec_run_raw(oly_run *run, oly_program *p, int device, const void *const *in,
                             void *const *out);
/* Makes p ready for many runs nested in parent (oly_exec_ops.prepare). Each
 * prepared run is oly__exec_run_raw's run without the lookups. */
oly_status oly__exec_prepare(const oly_run *parent, oly_program *p, int device, oly_exec_prep *out);
oly_status oly__exec_prepared_run(const oly_exec_prep *pr, const void *const *in, void *const *out);
/* Gives the run state back; harmless on a zeroed or failed prep. */
void oly__exec_prepared_done(oly_exec_prep *pr);
/* Frees a program's executable (the destructor of its exec slot). */
void oly__exec_free(void *exe);

/* Test queries. */
/* Scratch bytes a run of p uses, and the sum of its intermediates' sizes. */
oly_status oly__exec_plan_bytes(oly_program *p, size_t *scratch, size_t *sum_intermediates);
/* Eager cache: entries, programs built (misses), hits since start. */
void oly__apply_cache_stats(int *entries, long *builds, long *hits);
/* Drops every cached program (tests call it to stay leak-free). */
void oly__apply_cache_clear(void);

#endif /* OLYMPUS_EXEC_H */

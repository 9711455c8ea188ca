/* run.c — the CPU interpreter: runs an executable's steps in order on the
 * calling thread. Every run owns its scratch block and value tables, so runs
 * are re-entrant (a host function may run another program on the same
 * thread) and thread-safe. Nesting depth per thread is bounded so runaway
 * recursion is an error rather than a stack overflow. */
#include "exec/exec.h"

/* Depth of the innermost top-level run (parent NULL) on this thread. Nested
 * runs take their depth from their parent and leave it alone: in the Python
 * extension every access to it is a __tls_get_addr call, too much for a run
 * per loop iteration. Runaway recursion goes through host functions, hence
 * through top-level runs, so it is still bounded. */
static _Thread_local int thread_depth;

/* The state of one run: value tables, every step's kernel context with its
 * pointer tables, scratch, and the arrays the run holds (OWN vars and input
 * copies), in one allocation plus the scratch block. A run takes the
 * executable's spare state for its device and puts it back when done, so a
 * steady stream of runs allocates nothing and resolves almost nothing: the
 * contexts already point at the scratch, constants, literals and held arrays,
 * and only the references to inputs and in-place outputs (exe->patch) are
 * refreshed. A held array is reused only when nobody else kept it (its
 * refcount, and its buffer's, back to 1); one a host function kept is dropped
 * and replaced by a fresh one at the next run. A nested run of the same
 * executable finds no spare and uses a state of its own. Only the thread
 * running on a device touches that device's spare (see exec.h). */
typedef struct run_state {
    oly_run run;                /* this run; every ctx[i].run points here (first member:
                                   split_kernel finds the state from ctx->run) */
    const oly_exe *exe;         /* borrowed: the executable this state runs */
    oly_kernel_ctx *ctx;        /* n_step */
    oly_kernel_fn *kern;        /* n_step: each step's kernel */
    void **val;                 /* n_slots: where each var's (or literal's) bytes are */
    oly_array **arr;            /* n_slots: the value as an array, where it is one */
    void **ptr;                 /* n_refs: exe->refs resolved through val */
    oly_array **parr;           /* n_refs: exe->refs resolved through arr */
    oly_array **own;            /* n_own_all: owned references, NULL until allocated */
    unsigned char *scratch;     /* owned (oly__bufpool_alloc); NULL when no scratch */
    oly_sreg *regs;             /* exe->sprog's register file (constants and literals
                                   loaded), or NULL; in the state's allocation */
    oly_host_call *calls;       /* exe->sprog's calls' frames on regs, or NULL; in the
                                   state's allocation, made for calls_run's device and
                                   group member (calls_ready) */
    void **call_ptrs;           /* their args and results */
    int64_t *call_coords;       /* OLY_MAX_RANK: the group coordinates they point at */
    oly_run calls_run;          /* the run the frames were made for (device, group, member) */
    bool calls_ready;           /* calls holds frames (made on the first run) */
    int n_missing;              /* entries of own[0, n_own) that are NULL */
    int device;                 /* the device stamped on the held arrays */
    int ctx_device;             /* the device written into every ctx[i].device */
    bool resolved;              /* ptr and parr are valid for every stable slot */
} run_state;

static void state_free(const oly_exe *exe, run_state *rs)
{
    if (!rs) return;
    for (int i = 0; i < exe->n_own_all; i++) oly_array_release(rs->own[i]);
    oly__bufpool_free(rs->scratch, exe->scratch_bytes);
    free(rs);
}

void oly__exec_drop_spare(oly_exe *exe)
{
    for (int d = 0; d < exe->n_spare; d++) state_free(exe, exe->spare[d]);
    free(exe->spare);
    exe->spare = NULL;
    exe->n_spare = 0;
}

/* ---------------------------------------------------------------- threads */

/* The pool src/rt lends (oly__exec_set_pool); NULL: every kernel runs on the
 * calling thread. */
static _Atomic(oly_exec_pool_fn) pool_run;
static atomic_int pool_threads = 1;

void oly__exec_set_pool(oly_exec_pool_fn run, int threads)
{
    atomic_store_explicit(&pool_threads, threads, memory_order_relaxed);
    atomic_store_explicit(&pool_run, run, memory_order_release);
}

/* One split kernel call: its context, the real kernel, the share count, and
 * the first failure of any share (kept off the thread that failed). */
typedef struct split_job {
    const oly_kernel_ctx *ctx;
    oly_kernel_fn fn;
    int n;
    atomic_int failed;
    oly_failure failure;
} split_job;

static void run_share(void *arg, int share)
{
    split_job *j = arg;
    oly_kernel_ctx c = *j->ctx;
    c.ith = share;
    c.nth = j->n;
    oly__error_forget(); /* a failure's message is this share's, never a stale one */
    oly_status st = j->fn(&c);
    if (st == OLY_OK) return;
    if (!atomic_exchange(&j->failed, 1)) {
        oly__failure_keep(&j->failure, st);
    } else { /* one failure is reported; drop this thread's copy of another */
        oly_failure other = {0};
        oly__failure_keep(&other, st);
        oly__failure_clear(&other);
    }
}

/* The kernel of a step marked split (compile.c): runs the step's kernel in
 * shares on the pool, or whole on this thread when there is no pool, the
 * pool is busy with another caller, or the work makes fewer than two shares.
 * The failure of any share fails the step once, with that share's message. */
static oly_status split_kernel(const oly_kernel_ctx *ctx)
{
    const struct run_state *rs = (const struct run_state *)(const void *)ctx->run;
    const oly_step *s = &rs->exe->step[ctx - rs->ctx];
    oly_exec_pool_fn run = atomic_load_explicit(&pool_run, memory_order_acquire);
    int threads = atomic_load_explicit(&pool_threads, memory_order_relaxed);
    int64_t n = s->work / OLY_EXEC_SHARE_MIN;
    if (n > (int64_t)threads * OLY_EXEC_SHARES_PER_THREAD)
        n = (int64_t)threads * OLY_EXEC_SHARES_PER_THREAD;
    if (!run || n < 2) return s->kernel(ctx);
    split_job j = {.ctx = ctx, .fn = s->kernel, .n = (int)n};
    atomic_init(&j.failed, 0);
    if (!run(run_share, &j, j.n)) return s->kernel(ctx);
    if (!atomic_load(&j.failed)) return OLY_OK;
    return oly__failure_report(&j.failure);
}

/* The kernel of a step marked scalar (compile.c): its one-element op, on the
 * elements its context points at. */
static oly_status scalar_kernel(const oly_kernel_ctx *ctx)
{
    const struct run_state *rs = (const struct run_state *)(const void *)ctx->run;
    oly__cpu_scalar_step(&rs->exe->step[ctx - rs->ctx].sop, ctx->in, ctx->out);
    return OLY_OK;
}

/* A new state with the run-independent slots filled (scratch vars, constants,
 * literals) and every step's context set up. NULL on out of memory. */
static run_state *state_new(const oly_exe *exe)
{
    const oly_program *p = exe->prog;
    size_t ns = exe->n_slots, nr = exe->n_refs, no = (size_t)exe->n_own_all;
    size_t nregs = exe->sprog ? (size_t)exe->sprog->n_regs : 0;
    size_t ncalls = exe->sprog ? (size_t)exe->sprog->n_calls : 0;
    size_t call_bytes = ncalls ? ncalls * sizeof(oly_host_call) +
                                     (size_t)exe->sprog->n_call_ptrs * sizeof(void *) +
                                     OLY_MAX_RANK * sizeof(int64_t)
                               : 0;
    size_t bytes = sizeof(run_state) + nregs * sizeof(oly_sreg) + call_bytes +
                   (size_t)exe->n_step * (sizeof(oly_kernel_ctx) + sizeof(oly_kernel_fn)) +
                   ns * (sizeof(void *) + sizeof(oly_array *)) +
                   nr * (sizeof(void *) + sizeof(oly_array *)) + no * sizeof(oly_array *);
    run_state *rs = oly__calloc(1, bytes);
    if (!rs) return NULL;
    if (nregs) { /* first, so the registers are 8-byte aligned */
        rs->regs = (oly_sreg *)(void *)(rs + 1);
        memcpy(rs->regs, exe->sprog->init, nregs * sizeof(oly_sreg));
    }
    if (ncalls) { /* after the registers: 8-byte aligned too */
        rs->calls = (oly_host_call *)(void *)((char *)(rs + 1) + nregs * sizeof(oly_sreg));
        rs->call_ptrs = (void **)(void *)(rs->calls + ncalls);
        rs->call_coords = (int64_t *)(void *)(rs->call_ptrs + exe->sprog->n_call_ptrs);
    }
    rs->ctx = (oly_kernel_ctx *)(void *)((char *)(rs + 1) + nregs * sizeof(oly_sreg) + call_bytes);
    rs->val = (void **)(rs->ctx + exe->n_step);
    rs->arr = (oly_array **)(rs->val + ns);
    rs->ptr = (void **)(rs->arr + ns);
    rs->parr = (oly_array **)(rs->ptr + nr);
    rs->own = (oly_array **)(rs->parr + nr);
    rs->kern = (oly_kernel_fn *)(rs->own + no);
    rs->exe = exe;
    rs->n_missing = exe->n_own;
    if (exe->scratch_bytes > 0) {
        /* big scratch is recycled across runs (src/core/bufpool.c) */
        rs->scratch = oly__bufpool_alloc(exe->scratch_bytes);
        if (!rs->scratch) {
            free(rs);
            oly__error(OLY_ERR_NOMEM, "out of memory allocating %zu bytes of scratch",
                       exe->scratch_bytes);
            return NULL;
        }
    }
    for (int i = 0; i < p->n_const; i++) {
        uint32_t v = p->constvar[i]->id;
        rs->arr[v] = p->constval[i];
        rs->val[v] = (void *)oly_array_data(p->constval[i]);
    }
    for (int k = 0; k < exe->n_lit; k++) {
        rs->arr[exe->n_vars + (uint32_t)k] = exe->lit[k];
        rs->val[exe->n_vars + (uint32_t)k] = (void *)oly_array_data(exe->lit[k]);
    }
    for (int i = 0; i < exe->n_step; i++) {
        const oly_step *s = &exe->step[i];
        const oly_eqn *e = s->eqn;
        size_t in_pos = (size_t)(s->in_ref - exe->refs), out_pos = (size_t)(s->out_var - exe->refs);
        for (int j = 0; j < e->n_out; j++) {
            uint32_t v = e->out[j]->id;
            if (exe->loc[v].kind == OLY_LOC_SCRATCH) rs->val[v] = rs->scratch + exe->loc[v].off;
        }
        rs->kern[i] = s->scalar ? scalar_kernel : s->split ? split_kernel : s->kernel;
        rs->ctx[i] = (oly_kernel_ctx){
            .eqn = e,
            .params = e->params,
            .n_in = s->n_in,
            .in = (const void *const *)(rs->ptr + in_pos),
            .in_aval = s->in_aval,
            .n_out = s->n_out,
            .out = rs->ptr + out_pos,
            .out_aval = s->out_aval,
            .ith = 0,
            .nth = 1,
            .device = 0,
            .run = &rs->run,
            .exec = &oly__exec_ops,
            .in_array = s->wants_arrays ? rs->parr + in_pos : NULL,
        };
    }
    return rs;
}

/* True when the run's reference is the only one left to a and its buffer. */
static bool sole_owner(oly_array *a)
{
    return atomic_load_explicit(&a->refcount, memory_order_acquire) == 1 &&
           atomic_load_explicit(&a->buf->refcount, memory_order_acquire) == 1;
}

/* Takes exe's spare run state (or a new one) for a run, or a loop of runs,
 * nested in parent at depth. */
static run_state *state_take(const oly_exe *exe, const oly_run *parent, int device, int depth)
{
    run_state *rs = NULL;
    bool shared = parent && parent->shared;
    if (exe->pool && !shared) { /* the spare slot is the only field runs write */
        rs = exe->spare[device];
        exe->spare[device] = NULL;
    }
    if (!rs && !(rs = state_new(exe))) return NULL;
    rs->run = (oly_run){parent, device, depth, parent ? parent->group : NULL,
                        parent ? parent->member : 0, shared};
    if (rs->ctx_device != device) { /* rare: the same state used on another device */
        for (int i = 0; i < exe->n_step; i++) rs->ctx[i].device = device;
        rs->ctx_device = device;
    }
    return rs;
}

/* Gives rs back as exe's spare on its device, or frees it when there is one
 * already (a nested run of the same program). */
static void state_put(const oly_exe *exe, run_state *rs)
{
    int device = rs->run.device;
    if (exe->pool && !rs->run.shared && !exe->spare[device]) exe->spare[device] = rs;
    else state_free(exe, rs);
}

static oly_status depth_error(void)
{
    return oly__error(OLY_ERR_INVALID,
                      "program nesting deeper than %d levels (runaway recursion through "
                      "nested programs or host functions?)",
                      OLY_EXEC_MAX_DEPTH);
}

/* The frames of a register program's calls, for rs's run: made again only
 * when the run's device or group member differs from theirs. */
static void calls_prepare(run_state *rs, const oly_scalar_prog *sp)
{
    const oly_run *run = &rs->run;
    if (rs->calls_ready && rs->calls_run.device == run->device &&
        rs->calls_run.group == run->group && rs->calls_run.member == run->member)
        return;
    const char *const *names = NULL;
    int n_axes = run->group ? oly__group_coords(run->group, run->member, &names, rs->call_coords)
                            : 0;
    oly_callback_frame env = {.device = run->device,
                              .n_axes = n_axes,
                              .axis_names = names,
                              .axis_index = n_axes ? rs->call_coords : NULL};
    oly__cpu_scalar_frames(sp->calls, sp->n_calls, rs->regs, NULL, &env, rs->calls, rs->call_ptrs);
    rs->calls_run = *run;
    rs->calls_ready = true;
}

/* One run of exe on the taken state rs (rs->run already set). tdepth: the
 * thread's depth counter for a top-level run, else NULL. */
static inline __attribute__((always_inline)) oly_status
run_once(run_state *rs, const oly_exe *exe, const void *const *in, oly_array *const *in_arrays,
         void *const *out, int *tdepth)
{
    const oly_program *p = exe->prog;
    oly_status st = OLY_OK;
    int device = rs->run.device;
    void **val = rs->val;
    oly_array **arr = rs->arr;

    const oly_scalar_prog *sp = exe->sprog;
    if (sp) { /* one-element ops only: registers in, ops, registers out */
        oly_sreg *r = rs->regs;
        if (sp->n_calls) calls_prepare(rs, sp);
        for (int i = 0, n = sp->n_in; i < n; i++)
            oly__sreg_load(&r[sp->in_reg[i]], in[i], sp->in_size[i]);
        if (tdepth) *tdepth = rs->run.depth; /* a host function may run programs */
        st = oly__cpu_scalar_run(sp->ops, sp->n_ops, r, rs->calls);
        if (tdepth) *tdepth = rs->run.depth - 1;
        if (st != OLY_OK) return st;
        for (int k = 0, n = sp->n_out; k < n; k++)
            oly__sreg_store(out[k], &r[sp->out_reg[k]], sp->out_size[k]);
        return OLY_OK;
    }

    /* Per-run slots: inputs, outputs written in place, and the held arrays. */
    for (int i = 0; i < p->n_in; i++) {
        uint32_t v = p->in[i]->id;
        arr[v] = in_arrays ? in_arrays[i] : NULL;
        val[v] = in_arrays ? (void *)oly_array_data(in_arrays[i]) : (void *)in[i];
    }
    for (int i = 0; i < exe->n_out_loc; i++) {
        uint32_t v = exe->out_loc_var[i];
        val[v] = out[exe->loc[v].idx];
    }
    /* Held arrays: allocate the missing ones (first run, or kept by a host
     * function last time) and stamp the device; with all of them in place on
     * the same device, nothing to do. Input copies are filled every run. */
    int first = rs->n_missing > 0 || rs->device != device ? 0 : exe->n_own;
    int last = in_arrays ? exe->n_own : exe->n_own_all;
    for (int i = first; i < last; i++) {
        const oly_own *o = &exe->own[i];
        oly_array *a = rs->own[i];
        if (!a) {
            if ((st = oly__array_new_uninit(o->aval, &a)) != OLY_OK) goto done;
            rs->own[i] = a;
            if (i < exe->n_own) rs->n_missing--;
            arr[o->var] = a;
            val[o->var] = a->buf->data;
            rs->resolved = false;
        }
        a->device = device;
        if (o->in_idx >= 0) {
            /* A host function may keep this input: it gets a copy of its own
             * (input references are refreshed below, exe->patch). */
            if (o->nbytes) memcpy(a->buf->data, in[o->in_idx], o->nbytes);
            arr[o->var] = a;
            val[o->var] = a->buf->data;
        }
    }
    rs->device = device;
    const int *refs = exe->refs;
    if (rs->resolved) {
        void **ptr = rs->ptr;
        oly_array **parr = rs->parr;
        for (int i = 0, n = exe->n_patch; i < n; i++) {
            int pos = exe->patch[i];
            ptr[pos] = val[refs[pos]];
            parr[pos] = arr[refs[pos]];
        }
    } else {
        for (size_t pos = 0; pos < exe->n_refs; pos++) {
            rs->ptr[pos] = val[refs[pos]];
            rs->parr[pos] = arr[refs[pos]];
        }
        rs->resolved = true;
    }

    if (tdepth) *tdepth = rs->run.depth; /* the outer depth is depth - 1 */
    /* Locals, so the loop reloads nothing after each (opaque) kernel call. */
    {
        const oly_kernel_fn *kern = rs->kern;
        const oly_kernel_ctx *ctx = rs->ctx;
        for (int i = 0, n = exe->n_step; i < n; i++) {
            st = kern[i](&ctx[i]);
            if (st != OLY_OK) {
                const oly_eqn *e = exe->step[i].eqn;
                if ((unsigned)st >= OLY_STATUS_COUNT) st = OLY_ERR_CALLBACK;
                /* Host function failures keep their message (and payload)
                 * intact, borrowed arguments or not (as on registers);
                 * nested programs have named their failing primitive
                 * already. */
                if (st != OLY_ERR_CALLBACK && !exe->rw->kern[i]->wants_arrays && e->n_sub == 0)
                    oly__error_prefix(st, "%s", e->prim->name);
                break;
            }
        }
    }
    if (tdepth) *tdepth = rs->run.depth - 1;
    if (st != OLY_OK) goto done;

    /* Outputs that are inputs, constants, literals, repeats or callback
     * arguments are copied into their buffers. */
    for (int k = 0, n = p->n_out; k < n; k++) {
        const oly_out_src *o = &exe->out_src[k];
        if (!o->direct && o->nbytes) memcpy(out[k], val[o->ref], o->nbytes);
    }

done:
    /* Keep the held arrays nobody else references; drop the others. (pool
     * read once: the acquire loads in sole_owner would make the compiler
     * reload it every iteration) */
    {
        oly_array **own = rs->own;
        for (int i = 0, n = exe->n_own_all, pool = exe->pool; i < n; i++) {
            oly_array *a = own[i];
            if (a && !(pool && sole_owner(a))) {
                oly_array_release(a);
                own[i] = NULL;
                if (i < exe->n_own) rs->n_missing++;
            }
        }
    }
    return st;
}

oly_status oly__exec_run(oly_run *parent, const oly_exe *exe, int device, const void *const *in,
                         oly_array *const *in_arrays, void *const *out)
{
    /* One TLS address lookup per run (__tls_get_addr in a shared object). */
    int *tdepth = parent ? NULL : &thread_depth;
    int depth = (parent ? parent->depth : *tdepth) + 1;
    if (depth > OLY_EXEC_MAX_DEPTH) return depth_error();
    if (depth == 1) oly__error_forget();
    run_state *rs = state_take(exe, parent, device, depth);
    if (!rs) return OLY_ERR_NOMEM;
    oly_status st = run_once(rs, exe, in, in_arrays, out, tdepth);
    state_put(exe, rs);
    return st;
}

oly_status oly__exec_run_member(const oly_run *parent, const oly_exe *exe, oly_group *g,
                                int member, const void *const *in, oly_array *const *in_arrays,
                                void *const *out)
{
    int *tdepth = parent ? NULL : &thread_depth;
    int depth = (parent ? parent->depth : *tdepth) + 1;
    if (depth > OLY_EXEC_MAX_DEPTH) return depth_error();
    /* a shared parent: no spare is taken (other members run exe on other
     * threads, maybe on this very device) */
    oly_run top = {.parent = parent, .depth = depth - 1, .group = g, .member = member,
                   .shared = true};
    run_state *rs = state_take(exe, &top, oly__group_device(g, member), depth);
    if (!rs) return OLY_ERR_NOMEM;
    rs->run.parent = parent;
    oly_status st = run_once(rs, exe, in, in_arrays, out, tdepth);
    state_put(exe, rs);
    return st;
}

/* The group launcher src/rt lends (oly__exec_set_group); NULL: none yet. */
static _Atomic(oly_exec_group_fn) group_run;

void oly__exec_set_group(oly_exec_group_fn run) { atomic_store(&group_run, run); }

static oly_group *run_group_of(const oly_run *run, int *member)
{
    *member = run ? run->member : 0;
    return run ? run->group : NULL;
}

static oly_status run_group_raw(oly_run *run, oly_program *p, const oly_mesh *mesh,
                                const void *const *in, void *const *out)
{
    oly_exec_group_fn launch = atomic_load(&group_run);
    if (!launch)
        return oly__error(OLY_ERR_INTERNAL, "a group run needs the runtime (src/rt), which "
                                            "has not started");
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    oly_group *g;
    OLY_TRY(oly__group_new(mesh, &g));
    oly_status st = launch(run, exe, g, in, NULL, out);
    oly__group_free(g);
    return st;
}

oly_status oly__exec_prepare(const oly_run *parent, oly_program *p, int device, oly_exec_prep *out)
{
    *out = (oly_exec_prep){0};
    if (!parent) return oly__error(OLY_ERR_INVALID, "oly__exec_prepare: no parent run");
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    int depth = parent->depth + 1;
    if (depth > OLY_EXEC_MAX_DEPTH) return depth_error();
    run_state *rs = state_take(exe, parent, device, depth);
    if (!rs) return OLY_ERR_NOMEM;
    out->exe = exe;
    out->rs = rs;
    return OLY_OK;
}

oly_status oly__exec_prepared_run(const oly_exec_prep *pr, const void *const *in, void *const *out)
{
    return run_once(pr->rs, pr->exe, in, NULL, out, NULL);
}

void oly__exec_prepared_done(oly_exec_prep *pr)
{
    if (pr->rs) state_put(pr->exe, pr->rs);
    pr->rs = NULL;
}

oly_status oly__exec_run_raw(oly_run *run, oly_program *p, int device, const void *const *in,
                             void *const *out)
{
    const oly_exe *exe;
    OLY_TRY(oly__exec_get(p, &exe));
    return oly__exec_run(run, exe, device, in, NULL, out);
}

static const oly_scalar_prog *prepared_scalar(const oly_exec_prep *pr)
{
    return pr->exe ? pr->exe->sprog : NULL;
}

const oly_exec_ops oly__exec_ops = {
    .run = oly__exec_run_raw,
    .prepare = oly__exec_prepare,
    .prepared_run = oly__exec_prepared_run,
    .prepared_done = oly__exec_prepared_done,
    .scalar = prepared_scalar,
    .group = run_group_of,
    .run_group = run_group_raw,
};

static oly_status check_input(const oly_program *p, int i, const oly_array *a)
{
    const oly_aval *want = &p->in[i]->aval;
    if (!a) return oly__error(OLY_ERR_INVALID, "input %d: expected an array, got NULL", i);
    const oly_aval *got = &a->aval;
    if (oly_aval_equal(want, got)) return OLY_OK;
    char w[256], g[256];
    oly_aval_format(w, sizeof w, want);
    oly_aval_format(g, sizeof g, got);
    return oly__error(want->dtype != got->dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                      "input %d: expected %s, got %s", i, w, g);
}

oly_status oly__exec_begin(oly_program *p, int device, oly_array *const *inputs, int n_in,
                           oly_array **outputs, int n_out, const oly_exe **exe)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_run: program is NULL");
    if (device < 0 || device >= oly_device_count())
        return oly__error(OLY_ERR_INVALID, "oly_program_run: device %d out of range [0, %d)",
                          device, oly_device_count());
    if (n_in != p->n_in)
        return oly__error(OLY_ERR_INVALID, "oly_program_run: program takes %d inputs, got %d",
                          p->n_in, n_in);
    if (n_out != p->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "oly_program_run: program has %d outputs, room given for %d", p->n_out,
                          n_out);
    if (n_in > 0 && !inputs) return oly__error(OLY_ERR_INVALID, "oly_program_run: inputs is NULL");
    bool committed = false;
    for (int i = 0; i < n_in; i++) {
        OLY_TRY(check_input(p, i, inputs[i]));
        committed |= inputs[i]->committed;
    }
    OLY_TRY(oly__exec_get(p, exe));
    for (int k = 0; k < n_out; k++) {
        oly_status st = oly__array_new_uninit(&(*exe)->out_aval[k], &outputs[k]);
        if (st != OLY_OK) {
            while (k-- > 0) {
                oly_array_release(outputs[k]);
                outputs[k] = NULL;
            }
            return st;
        }
        outputs[k]->device = device;
        outputs[k]->committed = committed;
    }
    return OLY_OK;
}

oly_status oly__exec_run_arrays(const oly_exe *exe, int device, oly_array *const *inputs,
                                oly_array *const *outputs)
{
    int n_in = exe->prog->n_in, n_out = exe->prog->n_out;
    for (int i = 0; i < n_in; i++)
        if (inputs[i]->buf->pending) {
            oly_status st = oly_array_wait(inputs[i]);
            if (st != OLY_OK)
                return oly__error_prefix(st, "input %d was computed by a computation that failed",
                                         i);
        }
    enum { SMALL = 8 };
    const void *in_small[SMALL];
    void *out_small[SMALL];
    const void **in = n_in <= SMALL ? in_small : oly__malloc((size_t)n_in * sizeof *in);
    void **out = n_out <= SMALL ? out_small : oly__malloc((size_t)n_out * sizeof *out);
    oly_status st = OLY_ERR_NOMEM;
    if (in && out) {
        for (int i = 0; i < n_in; i++) in[i] = inputs[i]->buf->data;
        for (int k = 0; k < n_out; k++) out[k] = outputs[k]->buf->data;
        st = oly__exec_run(NULL, exe, device, in, inputs, out);
    }
    if (in != in_small) free(in);
    if (out != out_small) free(out);
    return st;
}

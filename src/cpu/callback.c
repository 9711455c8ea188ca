/* callback.c — the kernel of pure_callback, io_callback, debug_callback and
 * buffer_callback: it fills an oly_callback_frame and calls the host function.
 * The inputs of the first three arrive as arrays (wants_arrays) whose contents
 * never change, so a host function may keep them; buffer_callback's are
 * borrowed for the call and its results are written in place. A failure
 * returns the host function's status with its message and payload untouched.
 * On the hot path of every callback: no lookups, no allocation.
 *
 * Callback statistics (olympus.h) live here, where host functions are called:
 * one relaxed atomic flag, read once per call; when it is set the call is
 * timed and counted in a table keyed by (host function, flavour, device)
 * under one mutex. The mutex is never held while a host function is released
 * (a release may take an embedder's lock, the GIL, whose holder may be
 * recording a tap), so it nests inside nothing and nothing inside it. */
#include "cpu/cpu.h"

#include <pthread.h>
#include <time.h>

/* ---------------------------------------------------------------- statistics */

typedef struct stat_row {
    oly_host_fn *fn; /* owned reference; NULL: empty slot */
    const char *flavour;
    int device;
    uint64_t calls, errors, total_ns, max_ns, bytes_in, bytes_out;
} stat_row;

static atomic_bool stats_on;
static _Atomic uint64_t stats_dropped;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static stat_row *stats_rows; /* open addressing, stats_cap a power of two; under stats_mu */
static size_t stats_cap, stats_len;

/* The hot path's read of the switch: inline (the public function may be
 * interposed under -fPIC, so the compiler would call it). */
static inline bool stats_enabled(void)
{
    return atomic_load_explicit(&stats_on, memory_order_relaxed);
}

void oly_callback_stats_enable(bool on)
{
    atomic_store_explicit(&stats_on, on, memory_order_relaxed);
}

bool oly_callback_stats_enabled(void) { return stats_enabled(); }

uint64_t oly_callback_stats_dropped(void) { return atomic_load(&stats_dropped); }

uint64_t oly_callback_stats_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t stat_hash(const oly_host_fn *fn, const char *flavour, int device)
{
    uint64_t h = (uint64_t)(uintptr_t)fn * 0x9E3779B97F4A7C15u ^ (uint64_t)(unsigned)device;
    for (const char *c = flavour; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001B3u;
    return (size_t)(h ^ (h >> 29));
}

static bool stat_same(const stat_row *r, const oly_host_fn *fn, const char *flavour, int device)
{
    return r->fn == fn && r->device == device &&
           (r->flavour == flavour || strcmp(r->flavour, flavour) == 0);
}

/* The row of (fn, flavour, device), made (retaining fn) when missing; NULL
 * when the table cannot grow. stats_mu held. */
static stat_row *stat_find(oly_host_fn *fn, const char *flavour, int device)
{
    size_t mask = stats_cap - 1;
    for (size_t i = stat_hash(fn, flavour, device) & mask; stats_cap; i = (i + 1) & mask) {
        stat_row *r = &stats_rows[i];
        if (!r->fn) break;
        if (stat_same(r, fn, flavour, device)) return r;
    }
    if (2 * (stats_len + 1) > stats_cap) { /* grow: at most half full */
        size_t cap = stats_cap ? 2 * stats_cap : 64;
        stat_row *rows = oly__calloc(cap, sizeof *rows);
        if (!rows) return NULL;
        for (size_t k = 0; k < stats_cap; k++) {
            stat_row *r = &stats_rows[k];
            if (!r->fn) continue;
            size_t i = stat_hash(r->fn, r->flavour, r->device) & (cap - 1);
            while (rows[i].fn) i = (i + 1) & (cap - 1);
            rows[i] = *r;
        }
        free(stats_rows);
        stats_rows = rows;
        stats_cap = cap;
    }
    size_t i = stat_hash(fn, flavour, device) & (stats_cap - 1);
    while (stats_rows[i].fn) i = (i + 1) & (stats_cap - 1);
    stat_row *r = &stats_rows[i];
    *r = (stat_row){.fn = oly_host_fn_retain(fn), .flavour = flavour, .device = device};
    stats_len++;
    return r;
}

void oly_callback_stats_record(oly_host_fn *fn, const char *flavour, int device, uint64_t ns,
                               bool ok, uint64_t bytes_in, uint64_t bytes_out)
{
    if (!fn || !flavour || !stats_enabled()) return;
    pthread_mutex_lock(&stats_mu);
    stat_row *r = stat_find(fn, flavour, device);
    if (r) {
        r->calls++;
        r->errors += !ok;
        r->total_ns += ns;
        if (ns > r->max_ns) r->max_ns = ns;
        r->bytes_in += bytes_in;
        r->bytes_out += bytes_out;
    }
    pthread_mutex_unlock(&stats_mu);
    if (!r) atomic_fetch_add(&stats_dropped, 1);
}

oly_status oly_callback_stats_snapshot(bool reset, oly_callback_stat **out, int *n)
{
    if (!out || !n)
        return oly__error(OLY_ERR_INVALID, "oly_callback_stats_snapshot: out or n is NULL");
    pthread_mutex_lock(&stats_mu);
    size_t len = stats_len;
    oly_callback_stat *s = oly__calloc(len + 1, sizeof *s);
    stat_row *old = NULL;
    if (s) {
        size_t k = 0;
        for (size_t i = 0; i < stats_cap; i++) {
            stat_row *r = &stats_rows[i];
            if (!r->fn) continue;
            /* with reset the table's reference moves to the snapshot */
            s[k++] = (oly_callback_stat){
                .fn = reset ? r->fn : oly_host_fn_retain(r->fn), .flavour = r->flavour,
                .device = r->device, .calls = r->calls, .errors = r->errors,
                .total_ns = r->total_ns, .max_ns = r->max_ns, .bytes_in = r->bytes_in,
                .bytes_out = r->bytes_out};
        }
        if (reset) {
            old = stats_rows;
            stats_rows = NULL;
            stats_cap = stats_len = 0;
        }
    }
    pthread_mutex_unlock(&stats_mu);
    free(old);
    if (!s)
        return oly__error(OLY_ERR_NOMEM, "oly_callback_stats_snapshot: out of memory for %zu rows",
                          len);
    *out = s;
    *n = (int)len;
    return OLY_OK;
}

void oly_callback_stats_free(oly_callback_stat *stats, int n)
{
    if (!stats) return;
    for (int i = 0; i < n; i++) oly_host_fn_release(stats[i].fn);
    free(stats);
}

static uint64_t frame_bytes(int n, const oly_aval *avals)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += oly_aval_nbytes(&avals[i]);
    return b;
}

/* The call, timed and counted (statistics on): out of line, off the hot path. */
static __attribute__((noinline)) oly_status timed_call(oly_host_fn *fn, oly_callback_frame *frame,
                                                       const char *flavour)
{
    uint64_t t0 = oly_callback_stats_now();
    oly_status st = fn->call(fn->c.user, frame);
    uint64_t dt = oly_callback_stats_now() - t0;
    /* a failed call handed its arguments over but produced no results */
    oly_callback_stats_record(fn, flavour, frame->device, dt, st == OLY_OK,
                              frame_bytes(frame->n_args, frame->arg_avals),
                              st == OLY_OK ? frame_bytes(frame->n_results, frame->result_avals) : 0);
    return st;
}

/* ---------------------------------------------------------------- the kernels */

/* A failed call's status: the host function's message and payload are kept;
 * only an out-of-range status is mapped, and a failure that wrote no
 * message gets one. Out of line: off the hot path. */
static __attribute__((noinline)) oly_status call_failed(oly_status st, const char *kind,
                                                        const oly_host_fn *fn)
{
    oly_status out = (unsigned)st < OLY_STATUS_COUNT ? st : OLY_ERR_CALLBACK;
    if (!*oly_last_error()) /* the outermost run started with no message */
        return oly__error(out, "%s: host function %s failed with %s (status %d) and no message",
                          kind, fn->c.name, oly_status_name(st), (int)st);
    return out;
}

/* A register program's call (src/cpu/scalar.c): the prepared frame, copied
 * so a host function that writes its frame (an ffi binding points it at the
 * attributes) leaves the next call's alone. */
oly_status oly__cpu_host_call(const oly_host_call *c)
{
    oly_callback_frame frame = c->frame;
    oly_host_fn *fn = c->fn;
    oly_status st = __builtin_expect(stats_enabled(), 0)
                        ? timed_call(fn, &frame, c->flavour)
                        : fn->call(fn->c.user, &frame);
    return __builtin_expect(st == OLY_OK, 1) ? OLY_OK : call_failed(st, frame.kind, fn);
}

void oly__cpu_callback_env(const oly_kernel_ctx *ctx, oly_callback_frame *env, int64_t *coords)
{
    int member = 0;
    const char *const *axis_names = NULL;
    oly_group *g = ctx->exec && ctx->run ? ctx->exec->group(ctx->run, &member) : NULL;
    int n_axes = g ? oly__group_coords(g, member, &axis_names, coords) : 0;
    *env = (oly_callback_frame){.device = ctx->device,
                                .n_axes = n_axes,
                                .axis_names = axis_names,
                                .axis_index = n_axes ? coords : NULL};
}

/* The frame is built from the step's context (args: the argument pointers,
 * ctx->in but for aliases); kind is the primitive's name (a constant per
 * kernel) and the device from the context. */
static inline oly_status callback_call_args(const oly_kernel_ctx *ctx, const char *kind,
                                            const char *flavour, oly_host_fn *fn,
                                            const char *transforms, const void *const *args,
                                            int n_index)
{
    /* n_index: vmap's batch-index inputs, after the arguments (oly_params_callback) */
    int64_t index[OLY_MAX_BATCH_INDEX];
    for (int j = 0; j < n_index; j++) /* innermost level's first: the frame's is outermost first */
        index[n_index - 1 - j] = *(const int32_t *)ctx->in[ctx->n_in - n_index + j];
    /* a member of a group run (pmap, shard_map): its coordinates on the mesh */
    int member = 0, n_axes = 0;
    const char *const *axis_names = NULL;
    int64_t coords[OLY_MAX_RANK];
    oly_group *g = ctx->exec && ctx->run ? ctx->exec->group(ctx->run, &member) : NULL;
    if (g) n_axes = oly__group_coords(g, member, &axis_names, coords);
    oly_callback_frame frame = {
        .n_args = ctx->n_in - n_index,
        .args = args,
        .arg_avals = ctx->in_aval,
        .arg_arrays = ctx->in_array,
        .n_results = ctx->n_out,
        .results = ctx->out,
        .result_avals = ctx->out_aval,
        .device = ctx->device,
        .kind = kind,
        .transforms = transforms,
        .n_batch = n_index,
        .batch_index = n_index ? index : NULL,
        .n_axes = n_axes,
        .axis_names = axis_names,
        .axis_index = n_axes ? coords : NULL,
    };
    oly_status st = __builtin_expect(stats_enabled(), 0)
                        ? timed_call(fn, &frame, flavour)
                        : fn->call(fn->c.user, &frame);
    return __builtin_expect(st == OLY_OK, 1) ? OLY_OK : call_failed(st, kind, fn);
}

static inline oly_status callback_call(const oly_kernel_ctx *ctx, const char *kind,
                                       const char *flavour, oly_host_fn *fn,
                                       const char *transforms, int n_index)
{
    return callback_call_args(ctx, kind, flavour, fn, transforms, ctx->in, n_index);
}

#define N_INDEX(ctx) ((int)((const oly_params_callback *)(ctx)->params)->n_batch_index)

#define CALLBACK(ctx) (((const oly_params_callback *)(ctx)->params)->callback)

static oly_status pure_kernel(const oly_kernel_ctx *ctx)
{
    return callback_call(ctx, "pure_callback", "pure_callback", CALLBACK(ctx), NULL,
                         N_INDEX(ctx));
}

static oly_status io_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_callback *pc = ctx->params;
    return callback_call(ctx, "io_callback", pc->ordered ? "io_callback(ordered)" : "io_callback",
                         pc->callback, NULL, N_INDEX(ctx));
}

static oly_status debug_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_callback *pc = ctx->params;
    return callback_call(ctx, "debug_callback",
                         pc->ordered ? "debug_callback(ordered)" : "debug_callback",
                         pc->callback, NULL, N_INDEX(ctx));
}

/* buffer_callback: the host function writes the results in place. An
 * aliased output holds its input when the call starts: the plan put it in the
 * input's buffer (in == out), or it is copied here; either way the host
 * function sees the input at the output's address, as one buffer. */
static oly_status buffer_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_callback *pc = ctx->params;
    if (pc->n_aliases == 0)
        return callback_call(ctx, "buffer_callback", "buffer_callback", pc->callback, NULL,
                             N_INDEX(ctx));
    enum { SMALL = 16 };
    const void *small[SMALL];
    const void **args = ctx->n_in <= SMALL ? small : oly__malloc((size_t)ctx->n_in * sizeof *args);
    if (!args) return OLY_ERR_NOMEM;
    memcpy(args, ctx->in, (size_t)ctx->n_in * sizeof *args);
    for (int k = 0; k < pc->n_aliases; k++) {
        int i = pc->aliases[k].input, o = pc->aliases[k].output;
        size_t nbytes = oly_aval_nbytes(&ctx->in_aval[i]);
        if (ctx->out[o] != ctx->in[i] && nbytes) memcpy(ctx->out[o], ctx->in[i], nbytes);
        args[i] = ctx->out[o];
    }
    oly_status st =
        callback_call_args(ctx, "buffer_callback", "buffer_callback", pc->callback, NULL, args,
                           N_INDEX(ctx));
    if (args != small) free(args);
    return st;
}

/* The input output `out` aliases, or -1. */
static int buffer_alias_input(const void *params, int out)
{
    const oly_params_callback *pc = params;
    for (int k = 0; k < pc->n_aliases; k++)
        if (pc->aliases[k].output == out) return pc->aliases[k].input;
    return -1;
}

/* The first element of an integer array as int64 (unsigned 64-bit values
 * past INT64_MAX read as INT64_MAX). */
static int64_t first_int(const void *p, oly_dtype t)
{
    switch (t) {
    case OLY_INT8: return *(const int8_t *)p;
    case OLY_INT16: return *(const int16_t *)p;
    case OLY_INT32: return *(const int32_t *)p;
    case OLY_INT64: return *(const int64_t *)p;
    case OLY_UINT8: return *(const uint8_t *)p;
    case OLY_UINT16: return *(const uint16_t *)p;
    case OLY_UINT32: return *(const uint32_t *)p;
    case OLY_UINT64: {
        uint64_t v = *(const uint64_t *)p;
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: return 0;
    }
}

/* A gated tap's decision on counter value v (olympus.h,
 * oly_params_outside_call.every). */
static bool gate_open_at(const oly_params_outside_call *pc, int64_t v)
{
    if (v < pc->start) return false;
    if (pc->stop > pc->start) {
        if (v >= pc->stop) return false;
        if (v == pc->stop - 1) return true;
    }
    return (v - pc->start) % pc->every == 0;
}

/* The kernel's decision. Under vmap the first element is batch element 0's. */
static bool gate_open(const oly_params_outside_call *pc, const oly_kernel_ctx *ctx)
{
    if (oly_aval_size(&ctx->in_aval[0]) == 0) return false;
    return gate_open_at(pc, first_int(ctx->in[0], ctx->in_aval[0].dtype));
}

/* The values around v (a closed gate's counter) that keep the gate closed:
 * *lo..*hi, v among them. Below start: everything below it; at or past stop:
 * everything from it; else up to the next multiple of every past start, or
 * stop - 1 (open) when that comes first. */
static void gate_closed_range(const oly_params_outside_call *pc, int64_t v, int64_t *lo,
                              int64_t *hi)
{
    if (v < pc->start) {
        *lo = INT64_MIN;
        *hi = pc->start - 1;
        return;
    }
    if (pc->stop > pc->start && v >= pc->stop) {
        *lo = pc->stop;
        *hi = INT64_MAX;
        return;
    }
    /* v - start is not a multiple of every (the gate is closed) */
    int64_t base = v - (v - pc->start) % pc->every;
    *lo = base + 1;
    if (__builtin_add_overflow(base, pc->every - 1, hi)) *hi = INT64_MAX;
    if (pc->stop > pc->start && *hi > pc->stop - 2) *hi = pc->stop - 2;
}

/* Let the host lock go for a moment: a run that holds it (a short Python
 * program keeps the GIL) would otherwise keep the outfeed's receiver from
 * drawing progress until the run ends. A receiver that has been waiting for
 * the lock takes it here (CPython hands the GIL over to a thread that asked
 * for it, and the run waits while the receiver works). At most every
 * YIELD_NS: a bar is redrawn ten times a second at most, and each hand-over
 * costs the run the receiver's work and two thread switches. */
enum { YIELD_NS = 25000000 };
static _Atomic uint64_t last_yield_ns;

static void host_yield(void)
{
    uint64_t now = oly_callback_stats_now();
    uint64_t last = atomic_load_explicit(&last_yield_ns, memory_order_relaxed);
    if (now - last < YIELD_NS ||
        !atomic_compare_exchange_strong_explicit(&last_yield_ns, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    bool entered;
    void *token = oly__blocking_enter(&entered);
    oly__blocking_leave(entered, token);
}

/* id_tap: the arrays go to the device's outfeed (retained, not copied) and the
 * outputs are the inputs; call: the host function runs here, like io_callback.
 * A gated tap sends only when its gate is open. */
static oly_status outside_call_kernel(const oly_kernel_ctx *ctx)
{
    const oly_params_outside_call *pc = ctx->params;
    if (!pc->identity)
        return callback_call(ctx, "outside_call", "host_callback.call", pc->callback,
                             pc->transforms, 0);
    if (pc->every <= 0) {
        OLY_TRY(oly_outfeed_send(ctx->device, pc->callback, pc->transforms, ctx->in_array,
                                 ctx->n_in));
    } else if (gate_open(pc, ctx)) {
        OLY_TRY(oly_outfeed_send(ctx->device, pc->callback, pc->transforms, ctx->in_array,
                                 ctx->n_in));
        host_yield();
    }
    for (int i = 0; i < ctx->n_in; i++)
        if (ctx->out[i] != ctx->in[i]) memcpy(ctx->out[i], ctx->in[i], oly_aval_nbytes(&ctx->in_aval[i]));
    return OLY_OK;
}

/* The gated tap an outside_call equation is: identity with every > 0. */
static const oly_params_outside_call *outside_gated_tap(const void *params)
{
    const oly_params_outside_call *pc = params;
    return pc && pc->identity && pc->every > 0 && pc->callback ? pc : NULL;
}

oly_status oly__cpu_tap_gate(oly_host_call *c)
{
    const oly_params_outside_call *pc = c->tap;
    const oly_callback_frame *f = &c->frame;
    if (oly_aval_size(&f->arg_avals[0]) == 0) { /* never open: the kernel's rule */
        c->closed_lo = INT64_MIN;
        c->closed_hi = INT64_MAX;
        return OLY_OK;
    }
    int64_t v = first_int(f->args[0], f->arg_avals[0].dtype);
    if (!gate_open_at(pc, v)) {
        gate_closed_range(pc, v, &c->closed_lo, &c->closed_hi);
        return OLY_OK;
    }
    /* The arrays the kernel would send: the registers' values (a zero-size
     * operand's array has no data), on the run's device. */
    enum { SMALL = 8 };
    oly_array *small[SMALL], **arrays = small;
    int n = f->n_args;
    if (n > SMALL && !(arrays = oly__calloc((size_t)n, sizeof *arrays))) return OLY_ERR_NOMEM;
    oly_status st = OLY_OK;
    int made = 0;
    for (; made < n; made++) {
        if ((st = oly_array_from_data(&f->arg_avals[made], f->args[made], &arrays[made])) !=
            OLY_OK)
            break;
        arrays[made]->device = f->device;
    }
    if (st == OLY_OK) st = oly_outfeed_send(f->device, pc->callback, pc->transforms, arrays, n);
    for (int i = 0; i < made; i++) oly_array_release(arrays[i]);
    if (arrays != small) free(arrays);
    if (st == OLY_OK) host_yield();
    return st;
}

/* A host function that borrows its arguments (olympus.ffi's bindings). */
static bool callback_borrows(const void *params)
{
    const oly_host_fn *fn = params ? ((const oly_params_callback *)params)->callback : NULL;
    return fn && fn->borrows_args;
}

/* The host function pure_callback and io_callback only call, when it borrows
 * its arguments and vmap added no batch index (a register program may call
 * it then). */
static oly_host_fn *pure_host_call(const void *params, const char **kind, const char **flavour)
{
    const oly_params_callback *pc = params;
    if (!callback_borrows(params) || pc->n_batch_index) return NULL;
    *kind = *flavour = "pure_callback";
    return pc->callback;
}

static oly_host_fn *io_host_call(const void *params, const char **kind, const char **flavour)
{
    const oly_params_callback *pc = params;
    if (!callback_borrows(params) || pc->n_batch_index) return NULL;
    *kind = "io_callback";
    *flavour = pc->ordered ? "io_callback(ordered)" : "io_callback";
    return pc->callback;
}

/* wants_arrays: the host function may keep its arguments, so the executor
 * passes them as arrays it never writes again, unless it borrows them. */
const oly_cpu_kernel oly__cpu_pure_callback = {.fn = pure_kernel, .wants_arrays = true,
                                               .borrows_args = callback_borrows,
                                               .host_call = pure_host_call};
const oly_cpu_kernel oly__cpu_io_callback = {.fn = io_kernel, .wants_arrays = true,
                                             .borrows_args = callback_borrows,
                                             .host_call = io_host_call};
const oly_cpu_kernel oly__cpu_debug_callback = {.fn = debug_kernel, .wants_arrays = true};
const oly_cpu_kernel oly__cpu_outside_call = {.fn = outside_call_kernel, .wants_arrays = true,
                                              .gated_tap = outside_gated_tap};
/* No wants_arrays: a buffer_callback's arguments are borrowed for the call
 * (the extension's Buffers stop working when it returns), so they may live in
 * scratch and an aliased output may take its input's place there. */
const oly_cpu_kernel oly__cpu_buffer_callback = {.fn = buffer_kernel,
                                                 .alias_input = buffer_alias_input};

/* callback.c — the host-function primitives: pure_callback (no effect, so
 * DCE may drop it), io_callback (IO or ordered IO), debug_callback (debug
 * or ordered debug, no results) and buffer_callback (results written in place,
 * an effect only with has_side_effect, optional input/output aliases): their
 * rules. The kernel that fills an oly_callback_frame and calls the host
 * function is src/cpu/callback.c's.
 *
 * Transformation rules (spec/CALLBACK_SEMANTICS.md §1.2-1.4, 1.8):
 *   vmap   pure_callback and buffer_callback per vmap_method: one call
 *          (expand_dims, broadcast_all, legacy_vectorized) or N calls in
 *          index order (sequential: a scan over the batch;
 *          sequential_unrolled: N equations; signature: one call, the batch
 *          axis leading each argument's loop dims, NumPy gufunc style),
 *          none an error; io_callback N
 *          calls as a scan (ordered: an error); debug_callback N equations
 *          (unrolled). Nested vmap applies the rule per level, so the inner
 *          vmap's loop is outermost in call order. An aliased input of a
 *          single-call buffer_callback is broadcast to the batch like its
 *          output, so the pair keeps equal avals.
 *   jvp    pure/io/buffer: errors naming custom_jvp; debug: called on primals only.
 *   transpose  pure/io/buffer: errors; debug: nothing (no cotangents, no call). */
#include "trans/trans.h"

static const char *const vmap_names[] = {
    "none", "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
    "legacy_vectorized", "signature", NULL,
};

#define F_CALLBACK                                                                        \
    {.name = "callback", .kind = OLY_FIELD_HOST_FN,                                       \
     .offset = offsetof(oly_params_callback, callback)}
#define F_RESULTS                                                                         \
    {.name = "result_avals", .kind = OLY_FIELD_AVALS,                                     \
     .offset = offsetof(oly_params_callback, result_avals),                               \
     .count_offset = offsetof(oly_params_callback, n_results)}
#define F_ORDERED                                                                         \
    {.name = "ordered", .kind = OLY_FIELD_BOOL, .offset = offsetof(oly_params_callback, ordered)}
/* Hidden: the batch-index inputs are vmap's doing, the printed operands show them. */
#define F_BATCH_INDEX                                                                     \
    {.name = "n_batch_index", .kind = OLY_FIELD_INT,                                      \
     .offset = offsetof(oly_params_callback, n_batch_index), .hidden = true}

/* The signature is hidden: vmap_method=signature says a program uses one, and
 * every other pure_callback prints as before. It still hashes and compares. */
static const oly_param_field pure_fields[] = {
    F_CALLBACK,
    F_RESULTS,
    {.name = "vmap_method", .kind = OLY_FIELD_ENUM,
     .offset = offsetof(oly_params_callback, vmap_method), .enum_names = vmap_names},
    {.name = "signature", .kind = OLY_FIELD_STR,
     .offset = offsetof(oly_params_callback, signature), .hidden = true},
    F_BATCH_INDEX,
};
static const oly_param_field io_fields[] = {F_CALLBACK, F_RESULTS, F_ORDERED, F_BATCH_INDEX};
static const oly_param_field buffer_fields[] = {
    F_CALLBACK,
    F_RESULTS,
    {.name = "vmap_method", .kind = OLY_FIELD_ENUM,
     .offset = offsetof(oly_params_callback, vmap_method), .enum_names = vmap_names},
    {.name = "has_side_effect", .kind = OLY_FIELD_BOOL,
     .offset = offsetof(oly_params_callback, has_side_effect)},
    {.name = "input_output_aliases", .kind = OLY_FIELD_ALIASES,
     .offset = offsetof(oly_params_callback, aliases),
     .count_offset = offsetof(oly_params_callback, n_aliases)},
    F_BATCH_INDEX,
};
static const oly_param_field debug_fields[] = {F_CALLBACK, F_ORDERED, F_BATCH_INDEX};

static int results_num_outputs(const void *params, int n_in)
{
    const oly_params_callback *pc = params;
    if (!pc || pc->n_results < 0) return -1;
    return pc->n_results;
}

static int debug_num_outputs(const void *params, int n_in) { return 0; }

static oly_status signature_check(const oly_shape_ctx *ctx, const oly_params_callback *pc);

static oly_status callback_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_callback *pc = ctx->params;
    const char *name = ctx->prim->name;
    if (!pc || !pc->callback)
        return oly__error(OLY_ERR_INVALID, "%s: params.callback is NULL", name);
    if (pc->vmap_method < 0 || pc->vmap_method >= OLY_VMAP_METHOD_COUNT)
        return oly__error(OLY_ERR_INVALID, "%s: vmap_method %d is not an oly_vmap_method", name,
                          pc->vmap_method);
    if (pc->n_batch_index < 0 || pc->n_batch_index > ctx->n_in ||
        pc->n_batch_index > OLY_MAX_BATCH_INDEX)
        return oly__error(OLY_ERR_INVALID, "%s: n_batch_index %lld outside [0, %d] (%d inputs)",
                          name, (long long)pc->n_batch_index, OLY_MAX_BATCH_INDEX, ctx->n_in);
    for (int k = ctx->n_in - (int)pc->n_batch_index; k < ctx->n_in; k++)
        if (ctx->in[k].dtype != OLY_INT32 || ctx->in[k].rank != 0)
            return oly__error(OLY_ERR_TYPE, "%s: batch index input %d: expected int32[], got %s",
                              name, k, oly__show_aval(&ctx->in[k]).s);
    if (pc->vmap_method == OLY_VMAP_SIGNATURE) OLY_TRY(signature_check(ctx, pc));
    if (ctx->n_out == 0) return OLY_OK;
    if (pc->n_results != ctx->n_out || !pc->result_avals)
        return oly__error(OLY_ERR_INVALID, "%s: %d result avals declared, %d outputs", name,
                          pc->result_avals ? pc->n_results : 0, ctx->n_out);
    for (int k = 0; k < ctx->n_out; k++) {
        const oly_aval *a = &pc->result_avals[k];
        if ((unsigned)a->dtype >= OLY_DTYPE_COUNT || a->rank < 0 || a->rank > OLY_MAX_RANK)
            return oly__error(OLY_ERR_INVALID, "%s: result %d: invalid aval (dtype %d, rank %d)",
                              name, k, (int)a->dtype, a->rank);
        for (int d = 0; d < a->rank; d++)
            if (a->dims[d] < 0)
                return oly__error(OLY_ERR_SHAPE, "%s: result %d: negative dimension %lld", name,
                                  k, (long long)a->dims[d]);
        out[k] = *a;
        out[k].weak = false;
    }
    return OLY_OK;
}

/* The callback's shape rule, then the aliases: every index in range, each
 * input and each output aliased at most once, and equal avals per pair. */
static oly_status buffer_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    OLY_TRY(callback_shape(ctx, out));
    const oly_params_callback *pc = ctx->params;
    const char *name = ctx->prim->name;
    if (pc->n_aliases < 0 || (pc->n_aliases > 0 && !pc->aliases))
        return oly__error(OLY_ERR_INVALID, "%s: %d aliases declared, aliases is %s", name,
                          pc->n_aliases, pc->aliases ? "set" : "NULL");
    for (int k = 0; k < pc->n_aliases; k++) {
        int i = pc->aliases[k].input, o = pc->aliases[k].output;
        int n_args = ctx->n_in - (int)pc->n_batch_index;
        if (i < 0 || i >= n_args)
            return oly__error(OLY_ERR_INVALID, "%s: alias %d -> %d: input %d outside [0, %d)",
                              name, i, o, i, n_args);
        if (o < 0 || o >= ctx->n_out)
            return oly__error(OLY_ERR_INVALID, "%s: alias %d -> %d: output %d outside [0, %d)",
                              name, i, o, o, ctx->n_out);
        for (int e = 0; e < k; e++) {
            if (pc->aliases[e].input == i)
                return oly__error(OLY_ERR_INVALID, "%s: input %d is aliased twice", name, i);
            if (pc->aliases[e].output == o)
                return oly__error(OLY_ERR_INVALID,
                                  "%s: output %d is aliased by inputs %d and %d", name, o,
                                  pc->aliases[e].input, i);
        }
        if (!oly_aval_equal(&ctx->in[i], &out[o]))
            return oly__error(OLY_ERR_INVALID, "%s: alias %d -> %d: input %s and output %s differ",
                              name, i, o, oly__show_aval(&ctx->in[i]).s,
                              oly__show_aval(&out[o]).s);
    }
    return OLY_OK;
}

/* ---------------------------------------------------------------- gufunc signatures */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool digit(char c) { return c >= '0' && c <= '9'; }

/* Reads a gufunc signature "(m,n),(n)->(m)": the number of core dims of each
 * of the n_in argument groups into in_core and of the n_out result groups into
 * out_core (arrays of n_in and n_out ints). Dims are names or fixed sizes;
 * only their count matters to the batch rule (the front end checks names and
 * sizes against the shapes). Fails with the offset of the first bad character,
 * or when the group counts differ from the call's. */
static oly_status sig_parse(const char *who, const char *sig, int n_in, int *in_core, int n_out,
                            int *out_core)
{
    if (!sig)
        return oly__error(OLY_ERR_INVALID, "%s: vmap_method=signature needs a signature", who);
    const char *p = skip_ws(sig);
    int side = 0, groups[2] = {0, 0};
    if (p[0] == '-' && p[1] == '>') { /* no arguments */
        side = 1;
        p += 2;
    }
    for (;;) {
        p = skip_ws(p);
        if (*p != '(') goto bad;
        p = skip_ws(p + 1);
        int dims = 0;
        if (*p != ')') {
            for (;;) {
                p = skip_ws(p);
                if (name_start(*p)) {
                    while (name_start(*p) || digit(*p)) p++;
                } else if (digit(*p)) {
                    while (digit(*p)) p++;
                } else {
                    goto bad;
                }
                dims++;
                p = skip_ws(p);
                if (*p == ',') {
                    p++;
                    continue;
                }
                if (*p == ')') break;
                goto bad;
            }
        }
        p = skip_ws(p + 1);
        int g = groups[side]++;
        if (side == 0 && g < n_in) in_core[g] = dims;
        if (side == 1 && g < n_out) out_core[g] = dims;
        if (*p == ',') {
            p++;
            continue;
        }
        if (side == 0 && p[0] == '-' && p[1] == '>') {
            side = 1;
            p += 2;
            continue;
        }
        if (side == 1 && *p == '\0') break;
        goto bad;
    }
    if (groups[0] != n_in || groups[1] != n_out)
        return oly__error(OLY_ERR_INVALID,
                          "%s: the signature '%s' has %d argument and %d result groups, the "
                          "call has %d arguments and %d results",
                          who, sig, groups[0], groups[1], n_in, n_out);
    return OLY_OK;
bad:
    return oly__error(OLY_ERR_INVALID,
                      "%s: '%s' is not a gufunc signature such as '(m,n),(n)->(m)' (unexpected "
                      "%s at offset %d)",
                      who, sig, *p ? "character" : "end", (int)(p - sig));
}

/* Core dim counts for n_in arguments then n_out results, in one allocation. */
static oly_status sig_cores(const char *who, const char *sig, int n_in, int n_out, int **out)
{
    int *core = oly__calloc((size_t)n_in + (size_t)n_out + 1, sizeof *core);
    if (!core) return OLY_ERR_NOMEM;
    oly_status st = sig_parse(who, sig, n_in, core, n_out, core + n_in);
    if (st != OLY_OK) {
        free(core);
        return st;
    }
    *out = core;
    return OLY_OK;
}

/* Shape rule part: the signature parses, has a group per argument and per
 * result, and every argument and result has at least its core rank. */
static oly_status signature_check(const oly_shape_ctx *ctx, const oly_params_callback *pc)
{
    const char *name = ctx->prim->name;
    if (ctx->prim != &oly__prim_pure_callback)
        return oly__error(OLY_ERR_INVALID, "%s: vmap_method=signature is for pure_callback only",
                          name);
    int n_res = pc->result_avals ? pc->n_results : 0;
    int *core = NULL;
    OLY_TRY(sig_cores(name, pc->signature, ctx->n_in, n_res, &core));
    oly_status st = OLY_OK;
    for (int k = 0; k < ctx->n_in && st == OLY_OK; k++)
        if (ctx->in[k].rank < core[k])
            st = oly__error(OLY_ERR_SHAPE,
                            "%s: argument %d is %s, but the signature '%s' gives it %d core "
                            "dimensions",
                            name, k, oly__show_aval(&ctx->in[k]).s, pc->signature, core[k]);
    for (int j = 0; j < n_res && st == OLY_OK; j++)
        if (pc->result_avals[j].rank < core[ctx->n_in + j])
            st = oly__error(OLY_ERR_SHAPE,
                            "%s: result %d is %s, but the signature '%s' gives it %d core "
                            "dimensions",
                            name, j, oly__show_aval(&pc->result_avals[j]).s, pc->signature,
                            core[ctx->n_in + j]);
    free(core);
    return st;
}

static uint32_t buffer_effects(const void *params)
{
    const oly_params_callback *pc = params;
    return pc && pc->has_side_effect ? OLY_EFFECT_BUFFER_CALLBACK : 0;
}

static uint32_t io_effects(const void *params)
{
    const oly_params_callback *pc = params;
    return pc && pc->ordered ? OLY_EFFECT_ORDERED_IO : OLY_EFFECT_IO;
}

static uint32_t debug_effects(const void *params)
{
    const oly_params_callback *pc = params;
    return pc && pc->ordered ? OLY_EFFECT_ORDERED_DEBUG : OLY_EFFECT_DEBUG;
}

/* ---------------------------------------------------------------- vmap */

/* x (batched at axis 0, shape (N, *s)) at index i, with shape s. */
static oly_status take(oly_builder *b, oly_atom x, int64_t i, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    oly_params_slice sp = {.start_indices = {.n = a.rank}, .limit_indices = {.n = a.rank}};
    for (int d = 0; d < a.rank; d++) sp.limit_indices.v[d] = a.dims[d];
    sp.start_indices.v[0] = i;
    sp.limit_indices.v[0] = i + 1;
    oly_atom sl;
    OLY_TRY(oly__emit(b, &oly__prim_slice, &x, 1, &sp, NULL, 0, &sl));
    oly_ints shape = oly__ints(a.rank - 1, a.dims + 1);
    return oly__emit_reshape(b, sl, &shape, out);
}

/* x with a new leading axis of size 1. */
static oly_status lead1(oly_builder *b, oly_atom x, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    if (a.rank >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "vmap: rank %d + a batch axis exceeds %d", a.rank,
                          OLY_MAX_RANK);
    oly_ints shape = {.n = a.rank + 1};
    shape.v[0] = 1;
    for (int d = 0; d < a.rank; d++) shape.v[d + 1] = a.dims[d];
    return oly__emit_reshape(b, x, &shape, out);
}

/* The callback equation on args (its n_in inputs) and one more batch-index
 * input, index (an int32 scalar): the element's index at this vmap level. */
static oly_status emit_indexed(oly_builder *b, const oly_eqn *eqn, const oly_atom *args,
                               oly_atom index, oly_atom *out)
{
    const oly_params_callback *pc = eqn->params;
    if (pc->n_batch_index >= OLY_MAX_BATCH_INDEX)
        return oly__error(OLY_ERR_UNSUPPORTED, "%s: more than %d nested vmaps of one callback",
                          eqn->prim->name, OLY_MAX_BATCH_INDEX);
    oly_atom *all = oly__calloc((size_t)eqn->n_in + 1, sizeof *all);
    if (!all) return OLY_ERR_NOMEM;
    memcpy(all, args, (size_t)eqn->n_in * sizeof *all);
    all[eqn->n_in] = index;
    oly_params_callback np = *pc;
    np.n_batch_index++;
    oly_status st = oly__emit(b, eqn->prim, all, eqn->n_in + 1, &np, NULL, 0, out);
    free(all);
    return st;
}

/* N copies of the equation in index order: call i gets element i of every
 * batched operand and every unbatched operand whole; results stacked on axis 0. */
static oly_status batch_unrolled(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const int *in_bdim, oly_atom *out, int *out_bdim)
{
    int n = eqn->n_in, m = eqn->n_out;
    int64_t N = ctx->size;
    if (N > (1 << 20))
        return oly__error(OLY_ERR_UNSUPPORTED, "%s: vmap of size %lld is too large to unroll",
                          eqn->prim->name, (long long)N);
    for (int j = 0; j < m; j++)
        if (eqn->out[j]->aval.rank >= OLY_MAX_RANK)
            return oly__error(OLY_ERR_SHAPE, "%s: result %d: rank %d + a batch axis exceeds %d",
                              eqn->prim->name, j, eqn->out[j]->aval.rank, OLY_MAX_RANK);
    oly_atom *moved = oly__calloc((size_t)n + 1, sizeof *moved);
    oly_atom *args = oly__calloc((size_t)n + 1, sizeof *args);
    oly_atom *res = oly__calloc((size_t)m + 1, sizeof *res);
    oly_atom *pieces = oly__calloc((size_t)m * (size_t)N + 1, sizeof *pieces);
    oly_status st = moved && args && res && pieces ? OLY_OK : OLY_ERR_NOMEM;
    for (int k = 0; k < n && st == OLY_OK; k++) {
        moved[k] = in[k];
        if (in_bdim[k] != OLY_NOT_MAPPED)
            st = oly__batch_move(ctx, in[k], in_bdim[k], 0, &moved[k]);
    }
    for (int64_t i = 0; i < N && st == OLY_OK; i++) {
        for (int k = 0; k < n && st == OLY_OK; k++) {
            args[k] = moved[k];
            if (in_bdim[k] != OLY_NOT_MAPPED) st = take(ctx->b, moved[k], i, &args[k]);
        }
        if (st == OLY_OK)
            st = emit_indexed(ctx->b, eqn, args,
                              oly_atom_lit((oly_scalar){.dtype = OLY_INT32, .v.i = i}), res);
        for (int j = 0; j < m && st == OLY_OK; j++)
            st = lead1(ctx->b, res[j], &pieces[(size_t)j * (size_t)N + (size_t)i]);
    }
    for (int j = 0; j < m && st == OLY_OK; j++) {
        out_bdim[j] = 0;
        if (N == 0) {
            oly_aval a = eqn->out[j]->aval;
            memmove(a.dims + 1, a.dims, (size_t)a.rank * sizeof a.dims[0]);
            a.dims[0] = 0;
            a.rank++;
            st = oly__emit_full(ctx->b, &a, 0.0, &out[j]);
        } else if (N == 1) {
            out[j] = pieces[(size_t)j * (size_t)N];
        } else {
            oly_params_concatenate cp = {.dimension = 0};
            st = oly__emit(ctx->b, &oly__prim_concatenate, &pieces[(size_t)j * (size_t)N], (int)N,
                           &cp, NULL, 0, &out[j]);
        }
    }
    free(moved);
    free(args);
    free(res);
    free(pieces);
    return st;
}

/* The same N calls as a scan over the batch (lax.map): the body is one call
 * of the equation on (unbatched operands as consts, batched ones sliced as
 * xs, and the element's index from an iota xs); its results are the scan's
 * ys, stacked on axis 0. The program stays one equation whatever N is. */
static oly_status batch_scan(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    int n = eqn->n_in, m = eqn->n_out;
    oly_builder *b = NULL;
    oly_program *body = NULL;
    oly_atom *body_in = oly__calloc((size_t)n + 1, sizeof *body_in);
    oly_atom *body_out = oly__calloc((size_t)m + 1, sizeof *body_out);
    oly_atom *scan_in = oly__calloc((size_t)n + 2, sizeof *scan_in);
    oly_status st = body_in && body_out && scan_in ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    int n_consts = 0, k = 0;
    /* body inputs: consts (unbatched vars) first, then the x slices */
    for (int pass = 0; pass < 2 && st == OLY_OK; pass++) {
        for (int i = 0; i < n && st == OLY_OK; i++) {
            bool mapped = in_bdim[i] != OLY_NOT_MAPPED;
            if (mapped != (pass == 1)) continue;
            if (!mapped && in[i].kind == OLY_ATOM_LIT) {
                body_in[i] = in[i]; /* literals stay literals inside the body */
                continue;
            }
            oly_aval orig = oly__atom_aval(&in[i]), a = orig;
            oly_atom x = in[i];
            if (mapped) {
                st = oly__batch_move(ctx, in[i], in_bdim[i], 0, &x);
                a.rank = orig.rank - 1;
                for (int d = 0, e = 0; d < orig.rank; d++)
                    if (d != in_bdim[i]) a.dims[e++] = orig.dims[d];
            }
            oly_var *v = NULL;
            if (st == OLY_OK) st = oly_builder_add_input(b, &a, &v);
            if (st != OLY_OK) break;
            body_in[i] = oly_atom_var(v);
            scan_in[k++] = x;
            n_consts += !mapped;
        }
    }
    oly_var *index = NULL; /* the element's index: an iota xs */
    if (st == OLY_OK) {
        oly_aval ia = {.dtype = OLY_INT32, .rank = 0};
        oly_params_iota ip = {.dtype = OLY_INT32, .shape = oly__ints(1, &ctx->size)};
        st = oly_builder_add_input(b, &ia, &index);
        if (st == OLY_OK) st = oly__emit(ctx->b, &oly__prim_iota, NULL, 0, &ip, NULL, 0, &scan_in[k++]);
    }
    if (st == OLY_OK) st = emit_indexed(b, eqn, body_in, oly_atom_var(index), body_out);
    if (st == OLY_OK) st = oly_builder_finish(b, body_out, m, &body);
    if (st == OLY_OK) {
        oly_params_scan sp = {.length = ctx->size, .num_consts = n_consts, .num_carry = 0,
                              .n_out = m, .reverse = false};
        st = oly__emit(ctx->b, &oly__prim_scan, scan_in, k, &sp, &body, 1, out);
    }
    for (int j = 0; j < m && st == OLY_OK; j++) out_bdim[j] = 0;
    oly_builder_free(b);
    oly_program_release(body);
    free(body_in);
    free(body_out);
    free(scan_in);
    return st;
}

/* True when input k of a buffer_callback is aliased to an output. */
static bool aliased_input(const oly_params_callback *pc, int k)
{
    for (int a = 0; a < pc->n_aliases; a++)
        if (pc->aliases[a].input == k) return true;
    return false;
}

/* The one call of a single-call vmap rule: the equation on args (eqn->n_in,
 * already batched) declaring each result (N, *shape) in results (eqn->n_out
 * scratch entries); every output batched at axis 0. */
static oly_status emit_batched_call(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *args,
                                    oly_aval *results, oly_atom *out, int *out_bdim)
{
    int m = eqn->n_out;
    for (int j = 0; j < m; j++) {
        oly_aval a = eqn->out[j]->aval;
        if (a.rank >= OLY_MAX_RANK)
            return oly__error(OLY_ERR_SHAPE, "%s: result %d: rank %d + a batch axis exceeds %d",
                              eqn->prim->name, j, a.rank, OLY_MAX_RANK);
        memmove(a.dims + 1, a.dims, (size_t)a.rank * sizeof a.dims[0]);
        a.dims[0] = ctx->size;
        a.rank++;
        results[j] = a;
    }
    oly_params_callback np = *(const oly_params_callback *)eqn->params;
    np.result_avals = results;
    np.n_results = m;
    OLY_TRY(oly__emit(ctx->b, eqn->prim, args, eqn->n_in, &np, NULL, 0, out));
    for (int j = 0; j < m; j++) out_bdim[j] = 0;
    return OLY_OK;
}

/* One call on batched operands (vmap_method expand_dims, broadcast_all,
 * legacy_vectorized); the callback returns the batched results (N, *shape).
 * An aliased input is broadcast to the batch whatever the method, since its
 * output is batched. */
static oly_status batch_vectorized(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_callback *pc = eqn->params;
    int n = eqn->n_in, m = eqn->n_out;
    oly_atom *args = oly__calloc((size_t)n + 1, sizeof *args);
    oly_aval *results = oly__calloc((size_t)m + 1, sizeof *results);
    oly_status st = args && results ? OLY_OK : OLY_ERR_NOMEM;
    for (int k = 0; k < n && st == OLY_OK; k++) {
        bool mapped = in_bdim[k] != OLY_NOT_MAPPED;
        args[k] = in[k];
        if (mapped || pc->vmap_method == OLY_VMAP_BROADCAST_ALL || aliased_input(pc, k))
            st = oly__batch_move(ctx, in[k], in_bdim[k], 0, &args[k]);
        else if (pc->vmap_method == OLY_VMAP_EXPAND_DIMS)
            st = lead1(ctx->b, in[k], &args[k]);
    }
    if (st == OLY_OK) st = emit_batched_call(ctx, eqn, args, results, out, out_bdim);
    free(args);
    free(results);
    return st;
}

/* vmap_method=signature: one call per vmap level, as NumPy calls a gufunc.
 * Each argument's loop dims (those before its core dims) get the batch axis
 * in front: a batched argument's moved there, an unbatched one a size-1 axis;
 * arguments with fewer loop dims than the most get size-1 axes after the
 * batch axis, so every loop shape lines up to broadcast (N, loop...). Results
 * are declared (N, *shape): their loop dims are the broadcast loop shape,
 * which the front end checked when the call was traced. */
static oly_status batch_signature(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_callback *pc = eqn->params;
    const char *name = eqn->prim->name;
    int n = eqn->n_in, m = eqn->n_out;
    int *core = NULL;
    OLY_TRY(sig_cores(name, pc->signature, n, m, &core));
    oly_atom *args = oly__calloc((size_t)n + 1, sizeof *args);
    oly_aval *results = oly__calloc((size_t)m + 1, sizeof *results);
    oly_status st = args && results ? OLY_OK : OLY_ERR_NOMEM;
    int loop = 0; /* the most loop dims of an element (batch axis not counted) */
    for (int k = 0; k < n && st == OLY_OK; k++) {
        oly_aval a = oly__atom_aval(&in[k]);
        int l = a.rank - (in_bdim[k] != OLY_NOT_MAPPED) - core[k];
        if (l < 0)
            st = oly__error(OLY_ERR_SHAPE, "%s: argument %d has fewer dimensions than its core "
                                           "dimensions in '%s'", name, k, pc->signature);
        else if (l > loop)
            loop = l;
    }
    for (int k = 0; k < n && st == OLY_OK; k++) {
        oly_atom x = in[k];
        bool mapped = in_bdim[k] != OLY_NOT_MAPPED;
        if (mapped) st = oly__batch_move(ctx, in[k], in_bdim[k], 0, &x);
        if (st != OLY_OK) break;
        oly_aval a = oly__atom_aval(&x); /* (N, elem...) or elem... */
        int elem_rank = a.rank - mapped;
        int pad = loop - (elem_rank - core[k]);
        if (!mapped || pad > 0) {
            int rank = 1 + pad + elem_rank;
            if (rank > OLY_MAX_RANK) {
                st = oly__error(OLY_ERR_SHAPE, "%s: argument %d: rank %d with the batch axis "
                                               "and loop padding exceeds %d",
                                name, k, rank, OLY_MAX_RANK);
                break;
            }
            oly_ints shape = {.n = rank};
            shape.v[0] = mapped ? a.dims[0] : 1;
            for (int d = 0; d < pad; d++) shape.v[1 + d] = 1;
            for (int d = 0; d < elem_rank; d++) shape.v[1 + pad + d] = a.dims[mapped + d];
            st = oly__emit_reshape(ctx->b, x, &shape, &x);
        }
        args[k] = x;
    }
    if (st == OLY_OK) st = emit_batched_call(ctx, eqn, args, results, out, out_bdim);
    free(core);
    free(args);
    free(results);
    return st;
}

static oly_status pure_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_callback *pc = eqn->params;
    switch (pc->vmap_method) {
    case OLY_VMAP_SEQUENTIAL:
        return batch_scan(ctx, eqn, in, in_bdim, out, out_bdim);
    case OLY_VMAP_SEQUENTIAL_UNROLLED:
        return batch_unrolled(ctx, eqn, in, in_bdim, out, out_bdim);
    case OLY_VMAP_EXPAND_DIMS:
    case OLY_VMAP_BROADCAST_ALL:
    case OLY_VMAP_LEGACY_VECTORIZED:
        return batch_vectorized(ctx, eqn, in, in_bdim, out, out_bdim);
    case OLY_VMAP_SIGNATURE:
        return batch_signature(ctx, eqn, in, in_bdim, out, out_bdim);
    default:
        return oly__error(OLY_ERR_UNSUPPORTED,
                          "vmap is only supported for the %s primitive when vmap_method is one "
                          "of 'sequential', 'sequential_unrolled', 'expand_dims', "
                          "'broadcast_all', or 'legacy_vectorized'. Got vmap_method=None.",
                          eqn->prim->name);
    }
}

static oly_status io_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                           const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_callback *pc = eqn->params;
    if (pc->ordered) return oly__error(OLY_ERR_INVALID, "Cannot `vmap` ordered IO callback.");
    return batch_scan(ctx, eqn, in, in_bdim, out, out_bdim);
}

/* ---------------------------------------------------------------- jvp, transpose */

static oly_status pure_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    return oly__error(OLY_ERR_INVALID, "Pure callbacks do not support JVP. Please use "
                                       "`olympus.custom_jvp` to use callbacks while taking "
                                       "gradients.");
}

static oly_status pure_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__error(OLY_ERR_INVALID, "Pure callbacks do not support transpose. Please use "
                                       "`olympus.custom_vjp` to use callbacks while taking "
                                       "gradients.");
}

static oly_status io_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                         const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                         oly_atom *tangent_out, bool *out_nz)
{
    return oly__error(OLY_ERR_INVALID, "IO callbacks do not support JVP.");
}

static oly_status io_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const bool *linear, const oly_atom *ct, const bool *ct_nz,
                               oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__error(OLY_ERR_INVALID, "IO callbacks do not support transpose.");
}

static oly_status buffer_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                             const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                             oly_atom *tangent_out, bool *out_nz)
{
    return oly__error(OLY_ERR_INVALID, "Buffer callbacks do not support JVP. Please use "
                                       "`olympus.custom_jvp` to use callbacks while taking "
                                       "gradients.");
}

static oly_status buffer_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                   const oly_atom *in, const bool *linear, const oly_atom *ct,
                                   const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    return oly__error(OLY_ERR_INVALID, "Buffer callbacks do not support transpose. Please use "
                                       "`olympus.custom_vjp` to use callbacks while taking "
                                       "gradients.");
}

/* The callback sees primal values only; it has no outputs, hence no tangents. */
static oly_status debug_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                            const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                            oly_atom *tangent_out, bool *out_nz)
{
    oly_atom none[1];
    return oly__emit_eqn(ctx->b, eqn, primal, none);
}

/* No cotangents and no call. */
static oly_status debug_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                  oly_atom *ct_in, bool *ct_in_nz)
{
    for (int i = 0; i < eqn->n_in; i++) ct_in_nz[i] = false;
    return OLY_OK;
}

const oly_prim oly__prim_pure_callback = {
    .name = "pure_callback",
    .n_in = -1,
    .num_outputs = results_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = pure_fields,
    .n_fields = OLY_ARRAY_LEN(pure_fields),
    .shape = callback_shape,
    .batch = pure_batch,
    .jvp = pure_jvp,
    .transpose = pure_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

const oly_prim oly__prim_io_callback = {
    .name = "io_callback",
    .n_in = -1,
    .num_outputs = results_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = io_fields,
    .n_fields = OLY_ARRAY_LEN(io_fields),
    .shape = callback_shape,
    .effects = io_effects,
    .batch = io_batch,
    .jvp = io_jvp,
    .transpose = io_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

const oly_prim oly__prim_debug_callback = {
    .name = "debug_callback",
    .n_in = -1,
    .num_outputs = debug_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = debug_fields,
    .n_fields = OLY_ARRAY_LEN(debug_fields),
    .shape = callback_shape,
    .effects = debug_effects,
    .batch = batch_unrolled,
    .jvp = debug_jvp,
    .transpose = debug_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

const oly_prim oly__prim_buffer_callback = {
    .name = "buffer_callback",
    .n_in = -1,
    .num_outputs = results_num_outputs,
    .params_size = sizeof(oly_params_callback),
    .fields = buffer_fields,
    .n_fields = OLY_ARRAY_LEN(buffer_fields),
    .shape = buffer_shape,
    .effects = buffer_effects,
    .batch = pure_batch,
    .jvp = buffer_jvp,
    .transpose = buffer_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL,
};

/* custom.c — custom differentiation rules.
 *
 * custom_jvp_call and custom_vjp_call run their primal program sub[0]; their
 * rules are thunks (oly_thunk) traced only when a transform meets the equation,
 * so a rule that calls its own function terminates: each level of
 * differentiation expands one layer (DESIGN.md §7a).
 *   custom_jvp_call  jvp: trace the jvp thunk, instantiate zero tangents, emit
 *                    its program inline.
 *   custom_vjp_call  jvp: trace fwd, emit it inline, then one custom_lin
 *                    equation (residuals, tangents) -> output tangents.
 *   custom_lin       linear stand-in holding bwd; its transpose traces bwd and
 *                    emits it. It has no meaning in forward mode: running it is
 *                    the "can't apply forward-mode autodiff" error. Under vmap
 *                    every input is batched and bwd is wrapped.
 * Under vmap the primal program is batched and the thunks are wrapped so that
 * the programs they return are batched the same way (lazily too). */
#include "trans/trans.h"

extern const oly_prim oly__prim_custom_lin; /* below; also in prims.def */

/* ---------------------------------------------------------------- thunks */

/* The thunk object itself (a host closure) lives in src/core/host.c. */

oly_status oly_thunk_trace(oly_thunk *t, int n_in, const oly_aval *in_avals, const bool *nz,
                           oly_program **out)
{
    if (!t || !out || n_in < 0 || (n_in > 0 && (!in_avals || !nz)))
        return oly__error(OLY_ERR_INVALID, "oly_thunk_trace: bad arguments");
    oly_program *p = NULL;
    oly_status st = t->trace(t->c.user, n_in, in_avals, nz, &p);
    if (st != OLY_OK) {
        oly_program_release(p);
        return (unsigned)st < OLY_STATUS_COUNT ? st : OLY_ERR_CALLBACK;
    }
    if (!p)
        return oly__error(OLY_ERR_INVALID, "custom rule %s returned no program", t->c.name);
    *out = p;
    return OLY_OK;
}

/* ---------------------------------------------------------------- shared checks */

static void fmt_aval(char *buf, size_t n, const oly_aval *a) { oly_aval_format(buf, n, a); }

/* p must take n_in inputs with avals in[] and give n_out outputs with avals
 * out[] (out may be NULL: only the count is checked, or n_out < 0: nothing). */
static oly_status check_rule_program(const char *who, const char *what, const oly_program *p,
                                     int n_in, const oly_aval *in, int n_out,
                                     const oly_aval *out)
{
    if (p->n_in != n_in)
        return oly__error(OLY_ERR_INVALID, "%s: %s takes %d inputs, expected %d", who, what,
                          p->n_in, n_in);
    if (n_out >= 0 && p->n_out != n_out)
        return oly__error(OLY_ERR_INVALID, "%s: %s gives %d outputs, expected %d", who, what,
                          p->n_out, n_out);
    char w[256], g[256];
    for (int i = 0; i < n_in; i++) {
        if (oly_aval_equal(&p->in[i]->aval, &in[i])) continue;
        fmt_aval(w, sizeof w, &in[i]);
        fmt_aval(g, sizeof g, &p->in[i]->aval);
        return oly__error(in[i].dtype != p->in[i]->aval.dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                          "%s: %s input %d is %s, expected %s", who, what, i, g, w);
    }
    for (int j = 0; out && j < n_out; j++) {
        oly_aval a = oly__atom_aval(&p->out[j]);
        if (oly_aval_equal(&a, &out[j])) continue;
        fmt_aval(w, sizeof w, &out[j]);
        fmt_aval(g, sizeof g, &a);
        return oly__error(out[j].dtype != a.dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                          "%s: %s output %d is %s, expected %s", who, what, j, g, w);
    }
    return OLY_OK;
}

/* The shape rule of an equation that calls sub[0] (like pjit). */
static oly_status call_like_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const char *name = ctx->prim->name;
    if (ctx->n_sub != 1 || !ctx->sub || !ctx->sub[0])
        return oly__error(OLY_ERR_INVALID, "%s: expected 1 nested program, got %d", name,
                          ctx->n_sub);
    const oly_program *sub = ctx->sub[0];
    if (ctx->n_out != sub->n_out)
        return oly__error(OLY_ERR_INVALID,
                          "%s: params n_out is %d but the nested program has %d outputs", name,
                          ctx->n_out, sub->n_out);
    OLY_TRY(check_rule_program(name, "the nested program", sub, ctx->n_in, ctx->in, -1, NULL));
    for (int k = 0; k < sub->n_out; k++) out[k] = oly__atom_aval(&sub->out[k]);
    return OLY_OK;
}

static int n_out_param(int64_t n_out) { return n_out < 0 || n_out > 1 << 20 ? -1 : (int)n_out; }

/* The avals of an equation's inputs and outputs (malloc'd; NULL on NOMEM). */
static oly_aval *eqn_avals(const oly_eqn *eqn)
{
    oly_aval *a = oly__calloc((size_t)eqn->n_in + (size_t)eqn->n_out + 1, sizeof *a);
    if (!a) return NULL;
    for (int i = 0; i < eqn->n_in; i++) a[i] = oly__atom_aval(&eqn->in[i]);
    for (int j = 0; j < eqn->n_out; j++) a[eqn->n_in + j] = eqn->out[j]->aval;
    return a;
}

static oly_atom zero_literal(oly_dtype t)
{
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    return oly_atom_lit(s);
}

/* ---------------------------------------------------------------- batching thunks */

typedef enum wrap_kind { WRAP_JVP, WRAP_FWD, WRAP_BWD } wrap_kind;

/* A thunk whose program is the inner thunk's, batched: the primal inputs with
 * mapped[i] carry the batch at axis 0, the others are unbatched; every output
 * is batched at axis 0. For bwd, the cotangents of unbatched primal inputs
 * are summed over the batch. */
typedef struct batch_wrap {
    wrap_kind kind;
    oly_thunk *inner;           /* owned reference */
    int n_in, n_out;            /* the primal's */
    bool *mapped;               /* owned, n_in */
    int64_t size;
} batch_wrap;

static void wrap_free(void *user)
{
    batch_wrap *w = user;
    if (!w) return;
    oly_thunk_release(w->inner);
    free(w->mapped);
    free(w);
}

/* in with its leading batch axis removed where batched[i]. */
static oly_status unbatch_avals(const batch_wrap *w, int n, const oly_aval *in,
                                const bool *batched, oly_aval *out)
{
    for (int i = 0; i < n; i++) {
        out[i] = in[i];
        if (!batched[i]) continue;
        if (in[i].rank < 1 || in[i].dims[0] != w->size) {
            char g[256];
            fmt_aval(g, sizeof g, &in[i]);
            return oly__error(OLY_ERR_SHAPE, "vmap(%s): input %d is %s, expected batch size %lld",
                              oly_thunk_name(w->inner), i, g, (long long)w->size);
        }
        out[i].rank--;
        memmove(out[i].dims, in[i].dims + 1, (size_t)out[i].rank * sizeof in[i].dims[0]);
    }
    return OLY_OK;
}

/* bv (batched bwd) with the cotangents of unbatched primal inputs summed over axis 0. */
static oly_status sum_unmapped(const batch_wrap *w, oly_program *bv, oly_program **out)
{
    oly_builder *b = NULL;
    oly_atom *atoms = oly__calloc((size_t)bv->n_in + (size_t)bv->n_out + 1, sizeof *atoms);
    oly_status st = atoms ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    if (st != OLY_OK) goto done;
    for (int i = 0; i < bv->n_in && st == OLY_OK; i++) {
        oly_var *v;
        st = oly_builder_add_input(b, &bv->in[i]->aval, &v);
        if (st == OLY_OK) atoms[i] = oly_atom_var(v);
    }
    oly_atom *res = atoms + bv->n_in;
    if (st == OLY_OK) st = oly__emit_inline(b, bv, atoms, res);
    oly_ints axis0 = oly__ints_range(1);
    for (int i = 0; i < bv->n_out && st == OLY_OK; i++)
        if (!w->mapped[i]) st = oly__emit_reduce_sum(b, res[i], &axis0, &res[i]);
    if (st == OLY_OK) st = oly_builder_finish(b, res, bv->n_out, out);
done:
    oly_builder_free(b);
    free(atoms);
    return st;
}

static oly_status wrap_trace(void *user, int n, const oly_aval *in_avals, const bool *nz,
                             oly_program **out)
{
    batch_wrap *w = user;
    oly_program *inner = NULL, *bv = NULL;
    oly_aval *avals = oly__calloc((size_t)n + 1, sizeof *avals);
    bool *batched = oly__calloc((size_t)n + 1, sizeof *batched);
    int *in_axes = NULL, *out_axes = NULL;
    oly_status st = avals && batched ? OLY_OK : OLY_ERR_NOMEM;
    int want = w->kind == WRAP_BWD ? -1 : w->n_in;
    if (st == OLY_OK && want >= 0 && n != want)
        st = oly__error(OLY_ERR_INTERNAL, "vmap(%s): called with %d inputs, expected %d",
                        oly_thunk_name(w->inner), n, want);
    if (st != OLY_OK) goto done;
    for (int i = 0; i < n; i++) batched[i] = w->kind == WRAP_BWD ? true : w->mapped[i];
    st = unbatch_avals(w, n, in_avals, batched, avals);
    if (st == OLY_OK) st = oly_thunk_trace(w->inner, n, avals, nz, &inner);
    if (st != OLY_OK) goto done;
    /* The jvp program takes the tangents too, batched like their primals. */
    int n_axes = w->kind == WRAP_JVP ? 2 * n : n;
    if (inner->n_in != n_axes) {
        st = oly__error(OLY_ERR_INVALID, "custom rule %s takes %d inputs, expected %d",
                        oly_thunk_name(w->inner), inner->n_in, n_axes);
        goto done;
    }
    in_axes = oly__calloc((size_t)n_axes + 1, sizeof *in_axes);
    out_axes = oly__calloc((size_t)inner->n_out + 1, sizeof *out_axes);
    if (!in_axes || !out_axes) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n_axes; i++) in_axes[i] = batched[i % n] ? 0 : -1;
    st = oly_program_vmap(inner, in_axes, w->size, out_axes, &bv);
    if (st != OLY_OK) goto done;
    bool any_unmapped = false;
    for (int i = 0; i < w->n_in; i++) any_unmapped |= !w->mapped[i];
    if (w->kind == WRAP_BWD && any_unmapped && bv->n_out == w->n_in) {
        st = sum_unmapped(w, bv, out);
    } else {
        *out = bv;
        bv = NULL;
    }
done:
    oly_program_release(inner);
    oly_program_release(bv);
    free(avals);
    free(batched);
    free(in_axes);
    free(out_axes);
    return st;
}

/* A new thunk batching inner's programs (see batch_wrap). */
static oly_status wrap_thunk(wrap_kind kind, oly_thunk *inner, int n_in, int n_out,
                             const bool *mapped, int64_t size, oly_thunk **out)
{
    batch_wrap *w = oly__calloc(1, sizeof *w);
    if (!w) return OLY_ERR_NOMEM;
    w->mapped = oly__calloc((size_t)n_in + 1, sizeof *w->mapped);
    if (!w->mapped) {
        free(w);
        return OLY_ERR_NOMEM;
    }
    w->kind = kind;
    w->inner = oly_thunk_retain(inner);
    w->n_in = n_in;
    w->n_out = n_out;
    w->size = size;
    if (n_in) memcpy(w->mapped, mapped, (size_t)n_in * sizeof *mapped);
    char name[256];
    snprintf(name, sizeof name, "vmap(%s)", oly_thunk_name(inner));
    oly_status st = oly_thunk_new(name, wrap_trace, w, wrap_free, out);
    if (st != OLY_OK) wrap_free(w);
    return st;
}

/* Shared by both custom calls' batch rules: inputs moved to axis 0 (mapped)
 * or left alone, sub[0] batched with every output at axis 0. */
static oly_status batch_primal(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                               const int *in_bdim, oly_atom *moved, bool *mapped,
                               oly_program **sub)
{
    int n = eqn->n_in;
    int *in_axes = oly__calloc((size_t)n + 1, sizeof *in_axes);
    int *out_axes = oly__calloc((size_t)eqn->n_out + 1, sizeof *out_axes);
    oly_status st = in_axes && out_axes ? OLY_OK : OLY_ERR_NOMEM;
    for (int i = 0; i < n && st == OLY_OK; i++) {
        mapped[i] = in_bdim[i] != OLY_NOT_MAPPED;
        in_axes[i] = mapped[i] ? 0 : -1;
        moved[i] = in[i];
        if (mapped[i]) st = oly__batch_move(ctx, in[i], in_bdim[i], 0, &moved[i]);
    }
    if (st == OLY_OK) st = oly_program_vmap(eqn->sub[0], in_axes, ctx->size, out_axes, sub);
    free(in_axes);
    free(out_axes);
    return st;
}

/* ---------------------------------------------------------------- custom_jvp_call */

static const oly_param_field cjvp_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_custom_jvp, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_custom_jvp, n_out),
     .hidden = true},
    {.name = "jvp", .kind = OLY_FIELD_THUNK, .offset = offsetof(oly_params_custom_jvp, jvp)},
};

static int cjvp_num_outputs(const void *params, int n_in)
{
    const oly_params_custom_jvp *pc = params;
    return pc ? n_out_param(pc->n_out) : -1;
}

static oly_status cjvp_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_custom_jvp *pc = ctx->params;
    if (!pc || !pc->jvp) return oly__error(OLY_ERR_INVALID, "custom_jvp_call: params.jvp is NULL");
    return call_like_shape(ctx, out);
}

static oly_status cjvp_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_custom_jvp *pc = eqn->params;
    int n = eqn->n_in;
    oly_atom *moved = oly__calloc((size_t)n + 1, sizeof *moved);
    bool *mapped = oly__calloc((size_t)n + 1, sizeof *mapped);
    oly_program *sub = NULL;
    oly_thunk *jvp = NULL;
    oly_status st = moved && mapped ? OLY_OK : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = batch_primal(ctx, eqn, in, in_bdim, moved, mapped, &sub);
    if (st == OLY_OK) st = wrap_thunk(WRAP_JVP, pc->jvp, n, eqn->n_out, mapped, ctx->size, &jvp);
    if (st == OLY_OK) {
        oly_params_custom_jvp np = {.name = pc->name, .n_out = pc->n_out, .jvp = jvp};
        st = oly__emit(ctx->b, eqn->prim, moved, n, &np, &sub, 1, out);
    }
    for (int j = 0; st == OLY_OK && j < eqn->n_out; j++) out_bdim[j] = 0;
    oly_thunk_release(jvp);
    oly_program_release(sub);
    free(moved);
    free(mapped);
    return st;
}

static oly_status cjvp_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_custom_jvp *pc = eqn->params;
    int n = eqn->n_in, m = eqn->n_out;
    char who[300];
    snprintf(who, sizeof who, "custom_jvp_call %s", pc->name ? pc->name : "");
    oly_program *p = NULL;
    oly_aval *avals = eqn_avals(eqn); /* n inputs, m outputs */
    oly_aval *twice = oly__calloc(2 * ((size_t)n + (size_t)m) + 1, sizeof *twice);
    oly_atom *args = oly__calloc(2 * (size_t)n + 1, sizeof *args);
    oly_atom *res = oly__calloc(2 * (size_t)m + 1, sizeof *res);
    oly_status st = avals && twice && args && res ? OLY_OK : OLY_ERR_NOMEM;
    if (st != OLY_OK) goto done;
    /* The rule's program: (primals, tangents) -> (primal outs, tangent outs). */
    for (int i = 0; i < n; i++) twice[i] = twice[n + i] = avals[i];
    oly_aval *tw_out = twice + 2 * n;
    for (int j = 0; j < m; j++) tw_out[j] = tw_out[m + j] = avals[n + j];
    st = oly_thunk_trace(pc->jvp, n, avals, tan_nz, &p);
    if (st == OLY_OK) st = check_rule_program(who, "jvp rule", p, 2 * n, twice, 2 * m, tw_out);
    for (int i = 0; i < n && st == OLY_OK; i++) {
        args[i] = primal[i];
        if (tan_nz[i])
            args[n + i] = tangent[i];
        else
            st = oly__emit_full(ctx->b, &avals[i], 0.0, &args[n + i]);
    }
    if (st == OLY_OK) st = oly__emit_inline(ctx->b, p, args, res);
    if (st != OLY_OK) goto done;
    for (int j = 0; j < m; j++) {
        primal_out[j] = res[j];
        tangent_out[j] = res[m + j];
        out_nz[j] = oly_dtype_is_inexact(avals[n + j].dtype);
    }
done:
    oly_program_release(p);
    free(avals);
    free(twice);
    free(args);
    free(res);
    return st;
}

const oly_prim oly__prim_custom_jvp_call = {
    .name = "custom_jvp_call",
    .n_in = -1,
    .num_outputs = cjvp_num_outputs,
    .params_size = sizeof(oly_params_custom_jvp),
    .fields = cjvp_fields,
    .n_fields = OLY_ARRAY_LEN(cjvp_fields),
    .shape = cjvp_shape,
    .batch = cjvp_batch,
    .jvp = cjvp_jvp,
    .no_rule = OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
};

/* ---------------------------------------------------------------- custom_vjp_call */

static const oly_param_field cvjp_fields[] = {
    {.name = "name", .kind = OLY_FIELD_STR, .offset = offsetof(oly_params_custom_vjp, name)},
    {.name = "n_out", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_custom_vjp, n_out),
     .hidden = true},
    {.name = "fwd", .kind = OLY_FIELD_THUNK, .offset = offsetof(oly_params_custom_vjp, fwd)},
    {.name = "bwd", .kind = OLY_FIELD_THUNK, .offset = offsetof(oly_params_custom_vjp, bwd)},
};

static int cvjp_num_outputs(const void *params, int n_in)
{
    const oly_params_custom_vjp *pc = params;
    return pc ? n_out_param(pc->n_out) : -1;
}

static oly_status cvjp_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_custom_vjp *pc = ctx->params;
    if (!pc || !pc->fwd || !pc->bwd)
        return oly__error(OLY_ERR_INVALID, "custom_vjp_call: params.%s is NULL",
                          pc && pc->fwd ? "bwd" : "fwd");
    return call_like_shape(ctx, out);
}

static oly_status cvjp_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_custom_vjp *pc = eqn->params;
    int n = eqn->n_in;
    oly_atom *moved = oly__calloc((size_t)n + 1, sizeof *moved);
    bool *mapped = oly__calloc((size_t)n + 1, sizeof *mapped);
    oly_program *sub = NULL;
    oly_thunk *fwd = NULL, *bwd = NULL;
    oly_status st = moved && mapped ? OLY_OK : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = batch_primal(ctx, eqn, in, in_bdim, moved, mapped, &sub);
    if (st == OLY_OK) st = wrap_thunk(WRAP_FWD, pc->fwd, n, eqn->n_out, mapped, ctx->size, &fwd);
    if (st == OLY_OK) st = wrap_thunk(WRAP_BWD, pc->bwd, n, eqn->n_out, mapped, ctx->size, &bwd);
    if (st == OLY_OK) {
        oly_params_custom_vjp np = {.name = pc->name, .n_out = pc->n_out, .fwd = fwd, .bwd = bwd};
        st = oly__emit(ctx->b, eqn->prim, moved, n, &np, &sub, 1, out);
    }
    for (int j = 0; st == OLY_OK && j < eqn->n_out; j++) out_bdim[j] = 0;
    oly_thunk_release(fwd);
    oly_thunk_release(bwd);
    oly_program_release(sub);
    free(moved);
    free(mapped);
    return st;
}

static oly_status cvjp_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    const oly_params_custom_vjp *pc = eqn->params;
    int n = eqn->n_in, m = eqn->n_out;
    char who[300];
    snprintf(who, sizeof who, "custom_vjp_call %s", pc->name ? pc->name : "");
    oly_program *f = NULL;
    oly_atom *fout = NULL, *lin_in = NULL;
    oly_aval *avals = eqn_avals(eqn);
    oly_status st = avals ? OLY_OK : OLY_ERR_NOMEM;
    if (st == OLY_OK) st = oly_thunk_trace(pc->fwd, n, avals, tan_nz, &f);
    if (st == OLY_OK) st = check_rule_program(who, "fwd rule", f, n, avals, -1, NULL);
    if (st == OLY_OK && f->n_out < m)
        st = oly__error(OLY_ERR_INVALID, "%s: fwd rule gives %d outputs, expected at least %d",
                        who, f->n_out, m);
    for (int j = 0; j < m && st == OLY_OK; j++) {
        oly_aval a = oly__atom_aval(&f->out[j]);
        if (!oly_aval_equal(&a, &avals[n + j])) {
            char w[256], g[256];
            fmt_aval(w, sizeof w, &avals[n + j]);
            fmt_aval(g, sizeof g, &a);
            st = oly__error(a.dtype != avals[n + j].dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                            "%s: fwd rule output %d is %s, expected %s", who, j, g, w);
        }
    }
    if (st != OLY_OK) goto done;
    int r = f->n_out - m;
    fout = oly__calloc((size_t)f->n_out + 1, sizeof *fout);
    lin_in = oly__calloc((size_t)r + (size_t)n + 1, sizeof *lin_in);
    if (!fout || !lin_in) {
        st = OLY_ERR_NOMEM;
        goto done;
    }
    st = oly__emit_inline(ctx->b, f, primal, fout);
    if (st != OLY_OK) goto done;
    for (int k = 0; k < r; k++) lin_in[k] = fout[m + k];
    for (int i = 0; i < n; i++)
        lin_in[r + i] = tan_nz[i] ? tangent[i] : zero_literal(avals[i].dtype);
    oly_params_custom_lin lp = {.n_res = r, .bwd = pc->bwd, .in_avals = avals, .n_in = n,
                                .out_avals = avals + n, .n_out = m};
    st = oly__emit(ctx->b, &oly__prim_custom_lin, lin_in, r + n, &lp, NULL, 0, tangent_out);
    if (st != OLY_OK) goto done;
    for (int j = 0; j < m; j++) {
        primal_out[j] = fout[j];
        out_nz[j] = oly_dtype_is_inexact(avals[n + j].dtype);
    }
done:
    oly_program_release(f);
    free(avals);
    free(fout);
    free(lin_in);
    return st;
}

const oly_prim oly__prim_custom_vjp_call = {
    .name = "custom_vjp_call",
    .n_in = -1,
    .num_outputs = cvjp_num_outputs,
    .params_size = sizeof(oly_params_custom_vjp),
    .fields = cvjp_fields,
    .n_fields = OLY_ARRAY_LEN(cvjp_fields),
    .shape = cvjp_shape,
    .batch = cvjp_batch,
    .jvp = cvjp_jvp,
    .no_rule = OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
};

/* ---------------------------------------------------------------- custom_lin */

static const oly_param_field clin_fields[] = {
    {.name = "num_res", .kind = OLY_FIELD_INT, .offset = offsetof(oly_params_custom_lin, n_res)},
    {.name = "bwd", .kind = OLY_FIELD_THUNK, .offset = offsetof(oly_params_custom_lin, bwd)},
    {.name = "in_avals", .kind = OLY_FIELD_AVALS,
     .offset = offsetof(oly_params_custom_lin, in_avals),
     .count_offset = offsetof(oly_params_custom_lin, n_in), .hidden = true},
    {.name = "out_avals", .kind = OLY_FIELD_AVALS,
     .offset = offsetof(oly_params_custom_lin, out_avals),
     .count_offset = offsetof(oly_params_custom_lin, n_out), .hidden = true},
};

static int clin_num_outputs(const void *params, int n_in)
{
    const oly_params_custom_lin *pc = params;
    return pc && pc->n_out >= 0 ? pc->n_out : -1;
}

static oly_status clin_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_custom_lin *pc = ctx->params;
    if (!pc || !pc->bwd || (pc->n_in && !pc->in_avals) || (pc->n_out && !pc->out_avals))
        return oly__error(OLY_ERR_INVALID, "custom_lin: incomplete params");
    if (pc->n_res < 0 || pc->n_in < 0 || ctx->n_in != pc->n_res + pc->n_in)
        return oly__error(OLY_ERR_INVALID, "custom_lin: %d inputs, expected %lld residuals + %d",
                          ctx->n_in, (long long)pc->n_res, pc->n_in);
    for (int i = 0; i < pc->n_in; i++) {
        const oly_aval *t = &ctx->in[pc->n_res + i], *want = &pc->in_avals[i];
        /* A symbolic-zero tangent is passed as a rank-0 zero literal. */
        if (oly_aval_equal(t, want) || (t->rank == 0 && t->dtype == want->dtype)) continue;
        char w[256], g[256];
        fmt_aval(w, sizeof w, want);
        fmt_aval(g, sizeof g, t);
        return oly__error(OLY_ERR_SHAPE, "custom_lin: tangent %d is %s, expected %s", i, g, w);
    }
    for (int j = 0; j < pc->n_out; j++) {
        out[j] = pc->out_avals[j];
        out[j].weak = false;
    }
    return OLY_OK;
}

static oly_status clin_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_custom_lin *pc = eqn->params;
    int r = (int)pc->n_res, n = pc->n_in, m = pc->n_out;
    for (int k = 0; k < r; k++)
        if (linear[k])
            return oly__error(OLY_ERR_UNSUPPORTED,
                              "custom_lin: residual %d is linear: cannot transpose", k);
    oly_program *bwd = NULL;
    oly_aval *avals = oly__calloc((size_t)r + (size_t)m + 1, sizeof *avals);
    bool *nz = oly__calloc((size_t)r + (size_t)m + 1, sizeof *nz);
    oly_atom *args = oly__calloc((size_t)r + (size_t)m + 1, sizeof *args);
    oly_atom *res = oly__calloc((size_t)n + 1, sizeof *res);
    oly_status st = avals && nz && args && res ? OLY_OK : OLY_ERR_NOMEM;
    if (st != OLY_OK) goto done;
    for (int k = 0; k < r; k++) {
        avals[k] = oly__atom_aval(&in[k]);
        nz[k] = true;
        args[k] = in[k];
    }
    for (int j = 0; j < m; j++) {
        avals[r + j] = pc->out_avals[j];
        avals[r + j].weak = false;
        nz[r + j] = ct_nz[j];
    }
    st = oly_thunk_trace(pc->bwd, r + m, avals, nz, &bwd);
    if (st == OLY_OK)
        st = check_rule_program("custom_vjp", "bwd rule", bwd, r + m, avals, n, pc->in_avals);
    for (int j = 0; j < m && st == OLY_OK; j++) {
        if (ct_nz[j])
            args[r + j] = ct[j];
        else
            st = oly__emit_full(ctx->b, &avals[r + j], 0.0, &args[r + j]);
    }
    if (st == OLY_OK) st = oly__emit_inline(ctx->b, bwd, args, res);
    if (st != OLY_OK) goto done;
    for (int k = 0; k < r; k++) ct_in_nz[k] = false;
    for (int i = 0; i < n; i++) {
        ct_in_nz[r + i] = linear[r + i];
        if (linear[r + i]) ct_in[r + i] = res[i];
    }
done:
    oly_program_release(bwd);
    free(avals);
    free(nz);
    free(args);
    free(res);
    return st;
}

/* Every input moved to axis 0 (broadcast where unbatched; zero placeholders
 * stay literals); bwd wrapped so its program takes and gives batched values. */
static oly_status clin_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                             const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_custom_lin *pc = eqn->params;
    int r = (int)pc->n_res, n = pc->n_in, m = pc->n_out;
    oly_atom *moved = oly__calloc((size_t)eqn->n_in + 1, sizeof *moved);
    oly_aval *avals = oly__calloc((size_t)n + (size_t)m + 1, sizeof *avals);
    bool *mapped = oly__calloc((size_t)n + 1, sizeof *mapped);
    oly_thunk *bwd = NULL;
    oly_status st = moved && avals && mapped ? OLY_OK : OLY_ERR_NOMEM;
    for (int k = 0; k < eqn->n_in && st == OLY_OK; k++) {
        moved[k] = in[k];
        bool placeholder = k >= r && in[k].kind == OLY_ATOM_LIT;
        if (!placeholder) st = oly__batch_move(ctx, in[k], in_bdim[k], 0, &moved[k]);
    }
    for (int i = 0; i < n + m && st == OLY_OK; i++) {
        const oly_aval *a = i < n ? &pc->in_avals[i] : &pc->out_avals[i - n];
        if (a->rank >= OLY_MAX_RANK) {
            st = oly__error(OLY_ERR_SHAPE, "custom_lin: rank %d + a batch axis exceeds %d",
                            a->rank, OLY_MAX_RANK);
            break;
        }
        avals[i] = *a;
        avals[i].rank = a->rank + 1;
        avals[i].dims[0] = ctx->size;
        memcpy(avals[i].dims + 1, a->dims, (size_t)a->rank * sizeof a->dims[0]);
    }
    for (int i = 0; i < n; i++) mapped[i] = true;
    if (st == OLY_OK) st = wrap_thunk(WRAP_BWD, pc->bwd, n, m, mapped, ctx->size, &bwd);
    if (st == OLY_OK) {
        oly_params_custom_lin np = {.n_res = r, .bwd = bwd, .in_avals = avals, .n_in = n,
                                    .out_avals = avals + n, .n_out = m};
        st = oly__emit(ctx->b, eqn->prim, moved, eqn->n_in, &np, NULL, 0, out);
    }
    for (int j = 0; j < m && st == OLY_OK; j++) out_bdim[j] = 0;
    oly_thunk_release(bwd);
    free(moved);
    free(avals);
    free(mapped);
    return st;
}

const oly_prim oly__prim_custom_lin = {
    .name = "custom_lin",
    .n_in = -1,
    .num_outputs = clin_num_outputs,
    .params_size = sizeof(oly_params_custom_lin),
    .fields = clin_fields,
    .n_fields = OLY_ARRAY_LEN(clin_fields),
    .shape = clin_shape,
    .batch = clin_batch,
    .transpose = clin_transpose,
    .no_rule = OLY_RULE_JVP | OLY_RULE_PARTIAL_EVAL,
};

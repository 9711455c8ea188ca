/* vmap.c — batching: rewrite a program so every value may carry one extra
 * (batch) axis. Each old var maps to (atom in the new program, batch axis or
 * OLY_NOT_MAPPED). An equation whose inputs are all unmapped is copied as it
 * is (no rule asked: an unbatched callback runs once); otherwise the row's
 * batch rule emits the batched computation. The driver checks what a rule
 * returns against the equation's avals, so a wrong rule fails here, naming it.
 *
 * A named batch (oly_program_vmap_named) is also the axis collectives act
 * over. A collective naming it (oly_prim.names_axis) always goes to its rule,
 * mapped inputs or not: psum of an unbatched x is size * x and axis_index has
 * no input at all. An equation whose nested programs hold such a collective
 * has every input batched first, so its rule (and the dependency analysis of
 * control flow) treats every value as varying along the axis; its rule then
 * batches the nested programs with oly_program_vmap, which inherits the name
 * from the batch running on this thread (`active`): the axis environment is
 * dynamically scoped, as JAX's is. */
#include "trans/trans.h"

/* The named batch whose rule is running on this thread, or NULL. */
static _Thread_local const oly_batch_ctx *active;

static bool program_names(const oly_program *p, const char *name);

/* e is a collective naming `name`, or holds one in a nested program. */
static bool eqn_names(const oly_eqn *e, const char *name)
{
    if (e->prim->names_axis) return e->prim->names_axis(e->params, name);
    for (int k = 0; k < e->n_sub; k++)
        if (e->sub[k] && program_names(e->sub[k], name)) return true;
    return false;
}

static bool program_names(const oly_program *p, const char *name)
{
    for (int k = 0; k < p->n_eqn; k++)
        if (eqn_names(&p->eqn[k], name)) return true;
    return false;
}

/* aval with a new axis of size n inserted at axis. */
static oly_aval insert_axis(const oly_aval *a, int axis, int64_t n)
{
    oly_aval r = *a;
    r.rank = a->rank + 1;
    for (int i = 0, k = 0; i < r.rank; i++) r.dims[i] = i == axis ? n : a->dims[k++];
    return r;
}

static void fmt(char *buf, size_t n, const oly_aval *a) { oly_aval_format(buf, n, a); }

/* Checks that the rule's output j (atom x with batch axis bdim) matches the
 * equation's output aval want. */
static oly_status check_out(const oly_eqn *e, int j, oly_atom x, int bdim, const oly_aval *want,
                            int64_t size)
{
    if (x.kind != OLY_ATOM_VAR && x.kind != OLY_ATOM_LIT)
        return oly__error(OLY_ERR_INTERNAL, "%s batching rule did not set output %d",
                          e->prim->name, j);
    oly_aval got = oly__atom_aval(&x);
    oly_aval expect = *want;
    if (bdim != OLY_NOT_MAPPED) {
        if (bdim < 0 || bdim > want->rank)
            return oly__error(OLY_ERR_INTERNAL,
                              "%s batching rule: output %d has batch axis %d, outside [0, %d]",
                              e->prim->name, j, bdim, want->rank);
        expect = insert_axis(want, bdim, size);
    }
    if (!oly_aval_equal(&got, &expect)) {
        char s1[256], s2[256];
        fmt(s1, sizeof s1, &got);
        fmt(s2, sizeof s2, &expect);
        return oly__error(OLY_ERR_INTERNAL,
                          "%s batching rule: output %d is %s with batch axis %d, expected %s",
                          e->prim->name, j, s1, bdim, s2);
    }
    return OLY_OK;
}

oly_status oly_program_vmap(oly_program *p, const int *in_axes, int64_t axis_size,
                            const int *out_axes, oly_program **out)
{
    const char *name = active && active->size == axis_size ? active->axis_name : NULL;
    return oly_program_vmap_named(p, in_axes, axis_size, name, out_axes, out);
}

oly_status oly_program_vmap_named(oly_program *p, const int *in_axes, int64_t axis_size,
                                  const char *axis_name, const int *out_axes, oly_program **out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "vmap: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "vmap: out is NULL");
    if (p->n_in > 0 && !in_axes) return oly__error(OLY_ERR_INVALID, "vmap: in_axes is NULL");
    if (p->n_out > 0 && !out_axes) return oly__error(OLY_ERR_INVALID, "vmap: out_axes is NULL");
    if (axis_size < 0)
        return oly__error(OLY_ERR_INVALID, "vmap: axis_size must be >= 0, got %lld",
                          (long long)axis_size);
    for (int i = 0; i < p->n_in; i++) {
        int r = p->in[i]->aval.rank;
        if (in_axes[i] != OLY_NOT_MAPPED && (in_axes[i] < 0 || in_axes[i] > r))
            return oly__error(OLY_ERR_INVALID,
                              "vmap: in_axes[%d] = %d is outside [0, %d] for an input of rank %d "
                              "(or -1: not batched)",
                              i, in_axes[i], r, r);
        if (in_axes[i] != OLY_NOT_MAPPED && r >= OLY_MAX_RANK)
            return oly__error(OLY_ERR_SHAPE, "vmap: input %d has rank %d; batching exceeds %d", i,
                              r, OLY_MAX_RANK);
    }
    for (int j = 0; j < p->n_out; j++) {
        oly_aval a = oly__atom_aval(&p->out[j]);
        if (out_axes[j] != OLY_NOT_MAPPED && (out_axes[j] < 0 || out_axes[j] > a.rank))
            return oly__error(OLY_ERR_INVALID,
                              "vmap: out_axes[%d] = %d is outside [0, %d] for an output of rank "
                              "%d (or -1: not batched)",
                              j, out_axes[j], a.rank, a.rank);
    }

    oly_builder *b = NULL;
    oly_walk w; /* fact: the batch axis, or OLY_NOT_MAPPED */
    oly_status s = oly__walk_init(&w, p, p->n_out);
    if (s == OLY_OK) s = oly_builder_new(&b);
    if (s == OLY_OK) s = oly__walk_consts(&w, b, OLY_NOT_MAPPED);
    oly_batch_ctx ctx = {.b = b, .size = axis_size, .axis_name = axis_name};

    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_aval a = p->in[i]->aval;
        if (in_axes[i] != OLY_NOT_MAPPED) a = insert_axis(&a, in_axes[i], axis_size);
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &a, &v);
        if (s != OLY_OK) break;
        w.env[p->in[i]->id] = oly_atom_var(v);
        w.fact[p->in[i]->id] = in_axes[i];
    }

    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        for (int j = 0; j < e->n_out; j++) w.out_fact[j] = OLY_NOT_MAPPED;
        bool mapped = oly__walk_inputs(&w, e, OLY_NOT_MAPPED);
        bool named = axis_name && eqn_names(e, axis_name);
        if (!mapped && !named) {
            s = oly__emit_eqn(b, e, w.in, w.out);
        } else if (!e->prim->batch) {
            s = oly__rule_missing(e, "batching");
        } else {
            /* nested programs use the axis by name: every input varies */
            for (int i = 0; named && !e->prim->names_axis && i < e->n_in && s == OLY_OK; i++)
                if (w.in_fact[i] == OLY_NOT_MAPPED) {
                    s = oly__batch_move(&ctx, w.in[i], OLY_NOT_MAPPED, 0, &w.in[i]);
                    w.in_fact[i] = 0;
                }
            if (s != OLY_OK) break;
            oly__atoms_unset(w.out, e->n_out);
            const oly_batch_ctx *outer = active;
            active = &ctx;
            s = e->prim->batch(&ctx, e, w.in, w.in_fact, w.out, w.out_fact);
            active = outer;
            if (s != OLY_OK) {
                char label[256];
                s = oly__error_prefix(s, "vmap of %s", oly__eqn_label(e, label, sizeof label));
                break;
            }
            for (int j = 0; j < e->n_out && s == OLY_OK; j++)
                s = check_out(e, j, w.out[j], w.out_fact[j], &e->out[j]->aval, axis_size);
        }
        if (s == OLY_OK) oly__walk_outputs(&w, e);
    }

    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        int xb;
        oly_atom x = oly__walk_read(&w, p->out[j], OLY_NOT_MAPPED, &xb);
        if (out_axes[j] == OLY_NOT_MAPPED) {
            if (xb != OLY_NOT_MAPPED)
                s = oly__error(OLY_ERR_INVALID,
                               "vmap: output %d depends on the batched inputs, but out_axes[%d] "
                               "is -1 (not batched)",
                               j, j);
            w.in[j] = x;
        } else {
            s = oly__batch_move(&ctx, x, xb, out_axes[j], &w.in[j]);
        }
    }
    if (s == OLY_OK) s = oly_builder_finish(b, w.in, p->n_out, out);
    oly_builder_free(b);
    oly__walk_free(&w);
    return s;
}

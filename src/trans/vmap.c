/* vmap.c — batching: rewrite a program so every value may carry one extra
 * (batch) axis. Each old var maps to (atom in the new program, batch axis or
 * OLY_NOT_MAPPED). An equation whose inputs are all unmapped is copied as it
 * is (no rule asked: an unbatched callback runs once); otherwise the row's
 * batch rule emits the batched computation. The driver checks what a rule
 * returns against the equation's avals, so a wrong rule fails here, naming it. */
#include "trans/trans.h"

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
    oly_atom *env = oly__calloc((size_t)p->n_vars + 1, sizeof *env);
    int *bd = oly__calloc((size_t)p->n_vars + 1, sizeof *bd);
    int max_io = p->n_out > 0 ? p->n_out : 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_io) max_io = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_io) max_io = p->eqn[k].n_out;
    }
    oly_atom *ein = oly__calloc((size_t)max_io, sizeof *ein);
    oly_atom *eout = oly__calloc((size_t)max_io, sizeof *eout);
    int *ebd = oly__calloc((size_t)max_io, sizeof *ebd);
    int *obd = oly__calloc((size_t)max_io, sizeof *obd);
    oly_status s = env && bd && ein && eout && ebd && obd ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    oly_batch_ctx ctx = {.b = b, .size = axis_size};

    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(b, p->constval[i], &v);
        if (s != OLY_OK) break;
        env[p->constvar[i]->id] = oly_atom_var(v);
        bd[p->constvar[i]->id] = OLY_NOT_MAPPED;
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_aval a = p->in[i]->aval;
        if (in_axes[i] != OLY_NOT_MAPPED) a = insert_axis(&a, in_axes[i], axis_size);
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &a, &v);
        if (s != OLY_OK) break;
        env[p->in[i]->id] = oly_atom_var(v);
        bd[p->in[i]->id] = in_axes[i];
    }

    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        bool any = false;
        for (int i = 0; i < e->n_in; i++) {
            if (e->in[i].kind == OLY_ATOM_VAR) {
                ein[i] = env[e->in[i].var->id];
                ebd[i] = bd[e->in[i].var->id];
            } else {
                ein[i] = e->in[i];
                ebd[i] = OLY_NOT_MAPPED;
            }
            any |= ebd[i] != OLY_NOT_MAPPED;
        }
        if (!any) {
            s = oly__emit_eqn(b, e, ein, eout);
            for (int j = 0; j < e->n_out; j++) obd[j] = OLY_NOT_MAPPED;
        } else if (!e->prim->batch) {
            s = oly__error(OLY_ERR_UNSUPPORTED, "%s has no batching rule", e->prim->name);
        } else {
            for (int j = 0; j < e->n_out; j++) {
                memset(&eout[j], 0, sizeof eout[j]);
                eout[j].kind = OLY_ATOM_KIND_COUNT; /* unset: caught below */
                obd[j] = OLY_NOT_MAPPED;
            }
            s = e->prim->batch(&ctx, e, ein, ebd, eout, obd);
            if (s != OLY_OK) {
                s = oly__error_prefix(s, "vmap of %s", e->prim->name);
                break;
            }
            for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
                if (eout[j].kind != OLY_ATOM_VAR && eout[j].kind != OLY_ATOM_LIT)
                    s = oly__error(OLY_ERR_INTERNAL, "%s batching rule did not set output %d",
                                   e->prim->name, j);
                else
                    s = check_out(e, j, eout[j], obd[j], &e->out[j]->aval, axis_size);
            }
        }
        for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
            env[e->out[j]->id] = eout[j];
            bd[e->out[j]->id] = obd[j];
        }
    }

    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        oly_atom x = p->out[j];
        int xb = OLY_NOT_MAPPED;
        if (x.kind == OLY_ATOM_VAR) {
            xb = bd[x.var->id];
            x = env[x.var->id];
        }
        if (out_axes[j] == OLY_NOT_MAPPED) {
            if (xb != OLY_NOT_MAPPED)
                s = oly__error(OLY_ERR_INVALID,
                               "vmap: output %d depends on the batched inputs, but out_axes[%d] "
                               "is -1 (not batched)",
                               j, j);
            ein[j] = x;
        } else {
            s = oly__batch_move(&ctx, x, xb, out_axes[j], &ein[j]);
        }
    }
    if (s == OLY_OK) s = oly_builder_finish(b, ein, p->n_out, out);
    oly_builder_free(b);
    free(env);
    free(bd);
    free(ein);
    free(eout);
    free(ebd);
    free(obd);
    return s;
}

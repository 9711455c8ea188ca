/* jvp.c — forward-mode differentiation with symbolic zeros. Each old var maps
 * to (primal atom, tangent atom, nonzero?). An equation whose inputs all have
 * zero tangents is copied unchanged and its outputs get zero tangents, with no
 * rule asked: that is what lets an io_callback independent of the
 * differentiated inputs run under grad. Otherwise the row's jvp rule emits
 * primal and tangent. Integer and bool values always have zero tangents: a
 * tangent input given for one is accepted and ignored, and a rule's tangent for
 * an integer output is dropped. */
#include "trans/trans.h"

static bool differentiable(oly_dtype t) { return oly_dtype_is_inexact(t); }

oly_status oly_program_jvp(oly_program *p, const bool *nz_in, oly_program **out, bool *nz_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "jvp: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "jvp: out is NULL");
    if (p->n_in > 0 && !nz_in) return oly__error(OLY_ERR_INVALID, "jvp: nz_in is NULL");
    if (p->n_out > 0 && !nz_out) return oly__error(OLY_ERR_INVALID, "jvp: nz_out is NULL");

    oly_builder *b = NULL;
    oly_walk w; /* env: primal; aux: tangent; fact: the tangent is nonzero */
    oly_status s = oly__walk_init(&w, p, 2 * p->n_out + 1);
    bool *res_nz = s == OLY_OK ? oly__calloc((size_t)p->n_out + 1, sizeof *res_nz) : NULL;
    if (s == OLY_OK) s = res_nz ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    if (s == OLY_OK) s = oly__walk_consts(&w, b, false);
    oly_jvp_ctx ctx = {.b = b};

    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s == OLY_OK) w.env[p->in[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        if (!nz_in[i]) continue;
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s != OLY_OK) break;
        /* the same var may appear twice among the inputs only in a broken
         * program; the verifier rejects that, so ids are distinct here */
        if (differentiable(p->in[i]->aval.dtype)) {
            w.aux[p->in[i]->id] = oly_atom_var(v);
            w.fact[p->in[i]->id] = true;
        }
    }

    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        bool *tnz = w.in_flag, *onz = w.out_flag;
        for (int j = 0; j < e->n_out; j++) onz[j] = false;
        if (!oly__walk_inputs(&w, e, false)) {
            s = oly__emit_eqn(b, e, w.in, w.out);
        } else if (!e->prim->jvp) {
            s = oly__rule_missing(e, "JVP");
        } else {
            for (int i = 0; i < e->n_in; i++) tnz[i] = w.in_fact[i];
            oly__atoms_unset(w.out, e->n_out);
            oly__atoms_unset(w.out2, e->n_out);
            s = e->prim->jvp(&ctx, e, w.in, w.in2, tnz, w.out, w.out2, onz);
            if (s != OLY_OK) {
                char label[256];
                s = oly__error_prefix(s, "jvp of %s", oly__eqn_label(e, label, sizeof label));
                break;
            }
            for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
                const oly_aval *want = &e->out[j]->aval;
                s = oly__rule_check(e, "JVP", "primal output", j, &w.out[j], want);
                if (!differentiable(want->dtype)) onz[j] = false;
                if (s == OLY_OK && onz[j])
                    s = oly__rule_check(e, "JVP", "tangent of output", j, &w.out2[j], want);
            }
        }
        for (int j = 0; j < e->n_out; j++) w.out_fact[j] = onz[j];
        if (s == OLY_OK) oly__walk_outputs(&w, e);
    }

    /* outputs: primals, then the nonzero tangents */
    int n = 0;
    for (int j = 0; j < p->n_out && s == OLY_OK; j++)
        w.in[n++] = oly__walk_read(&w, p->out[j], false, NULL);
    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        oly_atom x = p->out[j];
        res_nz[j] = x.kind == OLY_ATOM_VAR && w.fact[x.var->id];
        if (res_nz[j]) w.in[n++] = w.aux[x.var->id];
    }
    if (s == OLY_OK) s = oly_builder_finish(b, w.in, n, out);
    if (s == OLY_OK)
        for (int j = 0; j < p->n_out; j++) nz_out[j] = res_nz[j];
    oly_builder_free(b);
    oly__walk_free(&w);
    free(res_nz);
    return s;
}

/* transpose.c — transposition of a linear program.
 *
 * linear: (residuals..., linear inputs...) -> outputs, linear in the linear
 * inputs. The result: (residuals..., cotangents of the outputs...) ->
 * cotangents of the linear inputs. A var is linear when it depends on a linear
 * input. The non-linear equations (on residuals and constants only) are
 * emitted forward first, in order, so the transpose rules can use their
 * values; then the linear equations are walked backwards, each through its
 * row's transpose rule, accumulating cotangents per var with add_any. A
 * symbolic zero cotangent (a var nothing flowed back to) skips the work, and
 * an input that receives none gets materialised zeros. The result is DCE'd:
 * forward equations no transpose rule used are dropped unless effectful. */
#include "trans/trans.h"

/* Fact bits of a var during transposition. */
enum { LIN = 1, CT = 2 }; /* depends on a linear input; has a cotangent */

/* ct[id] += x (ct starts as a symbolic zero); the cotangents are w->aux. */
static oly_status accumulate(oly_walk *w, oly_builder *b, uint32_t id, oly_atom x)
{
    if (!(w->fact[id] & CT)) {
        w->aux[id] = x;
        w->fact[id] |= CT;
        return OLY_OK;
    }
    return oly__emit_add_any(b, w->aux[id], x, &w->aux[id]);
}

oly_status oly_program_transpose(oly_program *linear, int n_res, oly_program **out)
{
    oly_program *p = linear;
    if (!p) return oly__error(OLY_ERR_INVALID, "transpose: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "transpose: out is NULL");
    if (n_res < 0 || n_res > p->n_in)
        return oly__error(OLY_ERR_INVALID,
                          "transpose: n_res = %d is outside [0, %d] (the program's input count)",
                          n_res, p->n_in);

    oly_builder *b = NULL;
    oly_walk w; /* env: forward values; aux: cotangents; fact: LIN | CT */
    oly_status s = oly__walk_init(&w, p, p->n_in + p->n_out + 1);
    bool *eqlin = s == OLY_OK ? oly__calloc((size_t)p->n_eqn + 1, sizeof *eqlin) : NULL;
    oly_atom *cin = s == OLY_OK ? oly__calloc((size_t)w.max_io, sizeof *cin) : NULL;
    bool *cinz = s == OLY_OK ? oly__calloc((size_t)w.max_io, sizeof *cinz) : NULL;
    if (s == OLY_OK) s = eqlin && cin && cinz ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    if (s == OLY_OK) s = oly__walk_consts(&w, b, 0);
    oly_transpose_ctx ctx = {.b = b};

    for (int i = 0; i < n_res && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s == OLY_OK) w.env[p->in[i]->id] = oly_atom_var(v);
    }
    for (int i = n_res; i < p->n_in && s == OLY_OK; i++) w.fact[p->in[i]->id] = LIN;
    /* the cotangent inputs, one per output */
    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        oly_aval a = oly__atom_aval(&p->out[j]);
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &a, &v);
        if (s == OLY_OK) cin[j] = oly_atom_var(v);
    }

    /* forward: non-linear equations are emitted; linear ones are marked */
    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        eqlin[k] = oly__walk_inputs(&w, e, 0);
        if (eqlin[k]) {
            for (int j = 0; j < e->n_out; j++) w.fact[e->out[j]->id] = LIN;
            continue;
        }
        for (int j = 0; j < e->n_out; j++) w.out_fact[j] = 0;
        s = oly__emit_eqn(b, e, w.in, w.out);
        if (s == OLY_OK) oly__walk_outputs(&w, e);
    }
    /* seed the output cotangents; a non-linear output is constant in the
     * linear inputs, so its cotangent contributes nothing */
    for (int j = 0; j < p->n_out && s == OLY_OK; j++)
        if (p->out[j].kind == OLY_ATOM_VAR && (w.fact[p->out[j].var->id] & LIN))
            s = accumulate(&w, b, p->out[j].var->id, cin[j]);

    /* backward over the linear equations */
    for (int k = p->n_eqn - 1; k >= 0 && s == OLY_OK; k--) {
        if (!eqlin[k]) continue;
        const oly_eqn *e = &p->eqn[k];
        bool any = false, *enz = w.out_flag, *elin = w.in_flag;
        for (int j = 0; j < e->n_out; j++) {
            uint32_t id = e->out[j]->id;
            enz[j] = w.fact[id] & CT;
            if (enz[j])
                w.out[j] = w.aux[id];
            else
                memset(&w.out[j], 0, sizeof w.out[j]);
            any |= enz[j];
        }
        if (!any) continue; /* symbolic zero cotangents: nothing flows back */
        if (!e->prim->transpose) {
            s = oly__rule_missing(e, "transpose");
            break;
        }
        for (int i = 0; i < e->n_in; i++) {
            const oly_atom *a = &e->in[i];
            elin[i] = a->kind == OLY_ATOM_VAR && (w.fact[a->var->id] & LIN);
            if (elin[i])
                memset(&w.in[i], 0, sizeof w.in[i]);
            else
                w.in[i] = oly__walk_read(&w, *a, 0, NULL);
            cinz[i] = false;
        }
        oly__atoms_unset(w.in2, e->n_in);
        s = e->prim->transpose(&ctx, e, w.in, elin, w.out, enz, w.in2, cinz);
        if (s != OLY_OK) {
            char label[256];
            s = oly__error_prefix(s, "transpose of %s", oly__eqn_label(e, label, sizeof label));
            break;
        }
        for (int i = 0; i < e->n_in && s == OLY_OK; i++) {
            if (!elin[i] || !cinz[i]) continue;
            s = oly__rule_check(e, "transpose", "cotangent of input", i, &w.in2[i],
                                &e->in[i].var->aval);
            if (s == OLY_OK) s = accumulate(&w, b, e->in[i].var->id, w.in2[i]);
        }
    }

    int n = 0;
    for (int i = n_res; i < p->n_in && s == OLY_OK; i++) {
        uint32_t id = p->in[i]->id;
        if (w.fact[id] & CT)
            w.in[n++] = w.aux[id];
        else
            s = oly__emit_full(b, &p->in[i]->aval, 0.0, &w.in[n++]);
    }
    oly_program *t = NULL;
    if (s == OLY_OK) s = oly_builder_finish(b, w.in, n, &t);
    /* forward equations no cotangent needed (effect-free) go */
    if (s == OLY_OK) s = oly_program_dce(t, out);
    oly_program_release(t);
    oly_builder_free(b);
    oly__walk_free(&w);
    free(eqlin);
    free(cin);
    free(cinz);
    return s;
}

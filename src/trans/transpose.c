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

static oly_status aval_mismatch(const char *name, int i, const oly_aval *got, const oly_aval *want)
{
    char s1[256], s2[256];
    oly_aval_format(s1, sizeof s1, got);
    oly_aval_format(s2, sizeof s2, want);
    return oly__error(OLY_ERR_INTERNAL,
                      "%s transpose rule: cotangent of input %d is %s, expected %s", name, i, s1,
                      s2);
}

/* ct[id] += x (ct starts as a symbolic zero). */
static oly_status accumulate(oly_builder *b, oly_atom *ct, bool *nz, uint32_t id, oly_atom x)
{
    if (!nz[id]) {
        ct[id] = x;
        nz[id] = true;
        return OLY_OK;
    }
    return oly__emit_add_any(b, ct[id], x, &ct[id]);
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
    size_t nv = (size_t)p->n_vars + 1;
    oly_atom *env = oly__calloc(nv, sizeof *env);
    bool *lin = oly__calloc(nv, sizeof *lin);
    oly_atom *ct = oly__calloc(nv, sizeof *ct);
    bool *ctnz = oly__calloc(nv, sizeof *ctnz);
    bool *eqlin = oly__calloc((size_t)p->n_eqn + 1, sizeof *eqlin);
    int max_io = p->n_in + p->n_out + 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_io) max_io = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_io) max_io = p->eqn[k].n_out;
    }
    oly_atom *ein = oly__calloc((size_t)max_io, sizeof *ein);
    bool *elin = oly__calloc((size_t)max_io, sizeof *elin);
    oly_atom *eout = oly__calloc((size_t)max_io, sizeof *eout);
    bool *enz = oly__calloc((size_t)max_io, sizeof *enz);
    oly_atom *cin = oly__calloc((size_t)max_io, sizeof *cin);
    bool *cinz = oly__calloc((size_t)max_io, sizeof *cinz);
    oly_status s = env && lin && ct && ctnz && eqlin && ein && elin && eout && enz && cin && cinz
                       ? oly_builder_new(&b)
                       : OLY_ERR_NOMEM;
    oly_transpose_ctx ctx = {.b = b};

    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(b, p->constval[i], &v);
        if (s == OLY_OK) env[p->constvar[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < n_res && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s == OLY_OK) env[p->in[i]->id] = oly_atom_var(v);
    }
    for (int i = n_res; i < p->n_in && s == OLY_OK; i++) lin[p->in[i]->id] = true;
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
        bool any = false;
        for (int i = 0; i < e->n_in; i++) {
            if (e->in[i].kind == OLY_ATOM_VAR) {
                ein[i] = env[e->in[i].var->id];
                any |= lin[e->in[i].var->id];
            } else {
                ein[i] = e->in[i];
            }
        }
        eqlin[k] = any;
        if (any) {
            for (int j = 0; j < e->n_out; j++) lin[e->out[j]->id] = true;
            continue;
        }
        s = oly__emit_eqn(b, e, ein, eout);
        for (int j = 0; j < e->n_out && s == OLY_OK; j++) env[e->out[j]->id] = eout[j];
    }
    /* seed the output cotangents; a non-linear output is constant in the
     * linear inputs, so its cotangent contributes nothing */
    for (int j = 0; j < p->n_out && s == OLY_OK; j++)
        if (p->out[j].kind == OLY_ATOM_VAR && lin[p->out[j].var->id])
            s = accumulate(b, ct, ctnz, p->out[j].var->id, cin[j]);

    /* backward over the linear equations */
    for (int k = p->n_eqn - 1; k >= 0 && s == OLY_OK; k--) {
        if (!eqlin[k]) continue;
        const oly_eqn *e = &p->eqn[k];
        bool any = false;
        for (int j = 0; j < e->n_out; j++) {
            uint32_t id = e->out[j]->id;
            enz[j] = ctnz[id];
            if (enz[j])
                eout[j] = ct[id];
            else
                memset(&eout[j], 0, sizeof eout[j]);
            any |= enz[j];
        }
        if (!any) continue; /* symbolic zero cotangents: nothing flows back */
        if (!e->prim->transpose) {
            s = oly__error(OLY_ERR_UNSUPPORTED, "%s has no transpose rule", e->prim->name);
            break;
        }
        for (int i = 0; i < e->n_in; i++) {
            const oly_atom *a = &e->in[i];
            elin[i] = a->kind == OLY_ATOM_VAR && lin[a->var->id];
            if (elin[i])
                memset(&ein[i], 0, sizeof ein[i]);
            else
                ein[i] = a->kind == OLY_ATOM_VAR ? env[a->var->id] : *a;
            memset(&cin[i], 0, sizeof cin[i]);
            cinz[i] = false;
        }
        s = e->prim->transpose(&ctx, e, ein, elin, eout, enz, cin, cinz);
        if (s != OLY_OK) {
            s = oly__error_prefix(s, "transpose of %s", e->prim->name);
            break;
        }
        for (int i = 0; i < e->n_in && s == OLY_OK; i++) {
            if (!elin[i] || !cinz[i]) continue;
            const oly_aval *want = &e->in[i].var->aval;
            if (cin[i].kind != OLY_ATOM_VAR && cin[i].kind != OLY_ATOM_LIT) {
                s = oly__error(OLY_ERR_INTERNAL, "%s transpose rule did not set input %d",
                               e->prim->name, i);
                break;
            }
            oly_aval got = oly__atom_aval(&cin[i]);
            if (!oly_aval_equal(&got, want)) {
                s = aval_mismatch(e->prim->name, i, &got, want);
                break;
            }
            s = accumulate(b, ct, ctnz, e->in[i].var->id, cin[i]);
        }
    }

    int n = 0;
    for (int i = n_res; i < p->n_in && s == OLY_OK; i++) {
        uint32_t id = p->in[i]->id;
        if (ctnz[id])
            ein[n++] = ct[id];
        else
            s = oly__emit_full(b, &p->in[i]->aval, 0.0, &ein[n++]);
    }
    oly_program *t = NULL;
    if (s == OLY_OK) s = oly_builder_finish(b, ein, n, &t);
    /* forward equations no cotangent needed (effect-free) go */
    if (s == OLY_OK) s = oly_program_dce(t, out);
    oly_program_release(t);
    oly_builder_free(b);
    free(env);
    free(lin);
    free(ct);
    free(ctnz);
    free(eqlin);
    free(ein);
    free(elin);
    free(eout);
    free(enz);
    free(cin);
    free(cinz);
    return s;
}

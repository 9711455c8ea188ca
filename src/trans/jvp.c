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

static oly_status check_tangent(const oly_eqn *e, int j, oly_atom t, const oly_aval *want)
{
    oly_aval got = oly__atom_aval(&t);
    if (oly_aval_equal(&got, want)) return OLY_OK;
    /* a rank-0 literal tangent stands for a rank-0 value only */
    char s1[256], s2[256];
    oly_aval_format(s1, sizeof s1, &got);
    oly_aval_format(s2, sizeof s2, want);
    return oly__error(OLY_ERR_INTERNAL, "%s JVP rule: tangent of output %d is %s, expected %s",
                      e->prim->name, j, s1, s2);
}

oly_status oly_program_jvp(oly_program *p, const bool *nz_in, oly_program **out, bool *nz_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "jvp: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "jvp: out is NULL");
    if (p->n_in > 0 && !nz_in) return oly__error(OLY_ERR_INVALID, "jvp: nz_in is NULL");
    if (p->n_out > 0 && !nz_out) return oly__error(OLY_ERR_INVALID, "jvp: nz_out is NULL");

    oly_builder *b = NULL;
    size_t nv = (size_t)p->n_vars + 1;
    oly_atom *prim = oly__calloc(nv, sizeof *prim);
    oly_atom *tan = oly__calloc(nv, sizeof *tan);
    bool *nz = oly__calloc(nv, sizeof *nz);
    int max_io = 2 * p->n_out + 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_io) max_io = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_io) max_io = p->eqn[k].n_out;
    }
    oly_atom *pin = oly__calloc((size_t)max_io, sizeof *pin);
    oly_atom *tin = oly__calloc((size_t)max_io, sizeof *tin);
    bool *tnz = oly__calloc((size_t)max_io, sizeof *tnz);
    oly_atom *pout = oly__calloc((size_t)max_io, sizeof *pout);
    oly_atom *tout = oly__calloc((size_t)max_io, sizeof *tout);
    bool *onz = oly__calloc((size_t)max_io, sizeof *onz);
    bool *res_nz = oly__calloc((size_t)p->n_out + 1, sizeof *res_nz);
    oly_status s = prim && tan && nz && pin && tin && tnz && pout && tout && onz && res_nz
                       ? oly_builder_new(&b)
                       : OLY_ERR_NOMEM;
    oly_jvp_ctx ctx = {.b = b};

    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(b, p->constval[i], &v);
        if (s == OLY_OK) prim[p->constvar[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s == OLY_OK) prim[p->in[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        if (!nz_in[i]) continue;
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        if (s != OLY_OK) break;
        /* the same var may appear twice among the inputs only in a broken
         * program; the verifier rejects that, so ids are distinct here */
        if (differentiable(p->in[i]->aval.dtype)) {
            tan[p->in[i]->id] = oly_atom_var(v);
            nz[p->in[i]->id] = true;
        }
    }

    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        bool any = false;
        for (int i = 0; i < e->n_in; i++) {
            if (e->in[i].kind == OLY_ATOM_VAR) {
                uint32_t id = e->in[i].var->id;
                pin[i] = prim[id];
                tin[i] = tan[id];
                tnz[i] = nz[id];
            } else {
                pin[i] = e->in[i];
                memset(&tin[i], 0, sizeof tin[i]);
                tnz[i] = false;
            }
            any |= tnz[i];
        }
        if (!any) {
            s = oly__emit_eqn(b, e, pin, pout);
            for (int j = 0; j < e->n_out; j++) onz[j] = false;
        } else if (!e->prim->jvp) {
            s = oly__error(OLY_ERR_UNSUPPORTED, "%s has no JVP rule", e->prim->name);
        } else {
            for (int j = 0; j < e->n_out; j++) {
                memset(&pout[j], 0, sizeof pout[j]);
                pout[j].kind = OLY_ATOM_KIND_COUNT; /* unset: caught below */
                memset(&tout[j], 0, sizeof tout[j]);
                onz[j] = false;
            }
            s = e->prim->jvp(&ctx, e, pin, tin, tnz, pout, tout, onz);
            if (s != OLY_OK) {
                s = oly__error_prefix(s, "jvp of %s", e->prim->name);
                break;
            }
            for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
                const oly_aval *want = &e->out[j]->aval;
                if (pout[j].kind != OLY_ATOM_VAR && pout[j].kind != OLY_ATOM_LIT) {
                    s = oly__error(OLY_ERR_INTERNAL, "%s JVP rule did not set primal output %d",
                                   e->prim->name, j);
                    break;
                }
                oly_aval pa = oly__atom_aval(&pout[j]);
                if (!oly_aval_equal(&pa, want)) {
                    char s1[256], s2[256];
                    oly_aval_format(s1, sizeof s1, &pa);
                    oly_aval_format(s2, sizeof s2, want);
                    s = oly__error(OLY_ERR_INTERNAL,
                                   "%s JVP rule: primal output %d is %s, expected %s",
                                   e->prim->name, j, s1, s2);
                    break;
                }
                if (!differentiable(want->dtype)) onz[j] = false;
                if (onz[j]) {
                    if (tout[j].kind != OLY_ATOM_VAR && tout[j].kind != OLY_ATOM_LIT)
                        s = oly__error(OLY_ERR_INTERNAL,
                                       "%s JVP rule did not set the tangent of output %d",
                                       e->prim->name, j);
                    else
                        s = check_tangent(e, j, tout[j], want);
                }
            }
        }
        for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
            uint32_t id = e->out[j]->id;
            prim[id] = pout[j];
            nz[id] = onz[j];
            if (onz[j]) tan[id] = tout[j];
        }
    }

    /* outputs: primals, then the nonzero tangents */
    int n = 0;
    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        oly_atom x = p->out[j];
        pin[n++] = x.kind == OLY_ATOM_VAR ? prim[x.var->id] : x;
    }
    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        oly_atom x = p->out[j];
        res_nz[j] = x.kind == OLY_ATOM_VAR && nz[x.var->id];
        if (res_nz[j]) pin[n++] = tan[x.var->id];
    }
    if (s == OLY_OK) s = oly_builder_finish(b, pin, n, out);
    if (s == OLY_OK)
        for (int j = 0; j < p->n_out; j++) nz_out[j] = res_nz[j];
    oly_builder_free(b);
    free(prim);
    free(tan);
    free(nz);
    free(pin);
    free(tin);
    free(tnz);
    free(pout);
    free(tout);
    free(onz);
    free(res_nz);
    return s;
}

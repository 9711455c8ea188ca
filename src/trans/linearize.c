/* linearize.c — partial evaluation, and linearize = jvp + partial evaluation.
 *
 * Partial evaluation walks a program forward once. Each old var is known (its
 * value lives in the known builder) or unknown (it lives in the unknown
 * builder). An equation with only known inputs goes to the known side; one
 * with an unknown input goes to the unknown side whole, unless its row has a
 * partial_eval rule that splits it. Known values the unknown side uses become
 * residuals: outputs of the known program and inputs of the unknown one, one
 * per value (deduplicated). Literals stay literals and constants are re-added
 * as constants on the side that needs them, so neither becomes a residual.
 * Every equation lands on exactly one side, so an effect runs exactly once.
 *
 * The unknown builder needs its unknown inputs before the residuals are
 * discovered, but the unknown program takes (residuals..., unknown inputs...):
 * it is built with the inputs in discovery order and then inlined into a
 * builder with the final order. */
#include "trans/trans.h"

typedef struct pe_state {
    oly_builder *kb, *ub;     /* borrowed: the known and unknown builders */
    /* by var id of the known builder: */
    oly_atom *res_u;          /* owned: the residual's atom in ub */
    bool *has_res;            /* owned */
    oly_array **kconst;       /* owned array of borrowed values: the var is a constant */
    uint32_t cap;
    oly_atom *res_k;          /* owned: the residuals as atoms of kb, in order */
    int n_res, cap_res;
} pe_state;

static oly_status pe_grow(pe_state *d, uint32_t id)
{
    if (id < d->cap) return OLY_OK;
    uint32_t c = d->cap ? d->cap : 64;
    while (c <= id) c *= 2;
    oly_atom *r = oly__realloc(d->res_u, (size_t)c * sizeof *r);
    if (!r) return OLY_ERR_NOMEM;
    d->res_u = r;
    bool *h = oly__realloc(d->has_res, (size_t)c * sizeof *h);
    if (!h) return OLY_ERR_NOMEM;
    d->has_res = h;
    oly_array **k = oly__realloc(d->kconst, (size_t)c * sizeof *k);
    if (!k) return OLY_ERR_NOMEM;
    d->kconst = k;
    for (uint32_t i = d->cap; i < c; i++) {
        memset(&d->res_u[i], 0, sizeof d->res_u[i]);
        d->has_res[i] = false;
        d->kconst[i] = NULL;
    }
    d->cap = c;
    return OLY_OK;
}

oly_status oly__pe_residual(oly_pe_ctx *ctx, oly_atom x, oly_atom *out)
{
    if (x.kind == OLY_ATOM_LIT) {
        *out = x;
        return OLY_OK;
    }
    if (x.kind != OLY_ATOM_VAR || !x.var)
        return oly__error(OLY_ERR_INTERNAL, "partial eval: residual of an invalid atom");
    pe_state *d = ctx->driver;
    uint32_t id = x.var->id;
    OLY_TRY(pe_grow(d, id));
    if (d->has_res[id]) {
        *out = d->res_u[id];
        return OLY_OK;
    }
    oly_var *v = NULL;
    if (d->kconst[id]) {
        OLY_TRY(oly_builder_add_const(d->ub, d->kconst[id], &v));
    } else {
        if (d->n_res == d->cap_res) {
            int c = d->cap_res ? 2 * d->cap_res : 16;
            oly_atom *r = oly__realloc(d->res_k, (size_t)c * sizeof *r);
            if (!r) return OLY_ERR_NOMEM;
            d->res_k = r;
            d->cap_res = c;
        }
        OLY_TRY(oly_builder_add_input(d->ub, &x.var->aval, &v));
        d->res_k[d->n_res++] = x;
    }
    d->res_u[id] = oly_atom_var(v);
    d->has_res[id] = true;
    *out = d->res_u[id];
    return OLY_OK;
}

/* Finishes ub (inputs: n_u unknown inputs, then the residuals) with outs,
 * and returns the program with the inputs reordered to (residuals..., unknown...). */
static oly_status finish_unknown(oly_builder *ub, const oly_atom *outs, int n_out, int n_u,
                                 int n_res, oly_program **out)
{
    oly_program *tmp = NULL;
    OLY_TRY(oly_builder_finish(ub, outs, n_out, &tmp));
    oly_builder *b = NULL;
    oly_atom *in = oly__calloc((size_t)tmp->n_in + 1, sizeof *in);
    oly_atom *res = oly__calloc((size_t)n_out + 1, sizeof *res);
    oly_status s = in && res ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    for (int i = 0; i < n_res && s == OLY_OK; i++) { /* residuals first */
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &tmp->in[n_u + i]->aval, &v);
        in[n_u + i] = oly_atom_var(v);
    }
    for (int i = 0; i < n_u && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &tmp->in[i]->aval, &v);
        in[i] = oly_atom_var(v);
    }
    if (s == OLY_OK) s = oly__emit_inline(b, tmp, in, res);
    if (s == OLY_OK) s = oly_builder_finish(b, res, n_out, out);
    oly_builder_free(b);
    oly_program_release(tmp);
    free(in);
    free(res);
    return s;
}

/* Partial evaluation; force[j] (may be NULL) asks for output j on the unknown
 * side even when it is known (it then passes as a residual). */
static oly_status pe_run(oly_program *p, const bool *unknown_in, const bool *force,
                         oly_program **known, oly_program **unknown, int *n_res_out,
                         bool *out_unknown)
{
    pe_state d;
    memset(&d, 0, sizeof d);
    oly_builder *kb = NULL, *ub = NULL;
    oly_program *kp = NULL, *up = NULL;
    oly_walk w; /* env: the value on its side; fact: unknown */
    oly_status s = oly__walk_init(&w, p, p->n_out + 1);
    oly_atom *kres = s == OLY_OK ? oly__calloc((size_t)p->n_out + 1, sizeof *kres) : NULL;
    oly_atom *ures = s == OLY_OK ? oly__calloc((size_t)p->n_out + 1, sizeof *ures) : NULL;
    bool *res_unk = s == OLY_OK ? oly__calloc((size_t)p->n_out + 1, sizeof *res_unk) : NULL;
    if (s == OLY_OK) s = kres && ures && res_unk ? oly_builder_new(&kb) : OLY_ERR_NOMEM;
    if (s == OLY_OK) s = oly_builder_new(&ub);
    d.kb = kb;
    d.ub = ub;
    oly_pe_ctx ctx = {.known = kb, .unknown = ub, .driver = &d};
    int n_u = 0;

    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(kb, p->constval[i], &v);
        if (s == OLY_OK) s = pe_grow(&d, v->id);
        if (s != OLY_OK) break;
        d.kconst[v->id] = p->constval[i];
        w.env[p->constvar[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        bool u = unknown_in[i];
        s = oly_builder_add_input(u ? ub : kb, &p->in[i]->aval, &v);
        if (s != OLY_OK) break;
        w.env[p->in[i]->id] = oly_atom_var(v);
        w.fact[p->in[i]->id] = u;
        n_u += u;
    }

    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        const oly_eqn *e = &p->eqn[k];
        /* known inputs in w.in, unknown ones in w.in2 */
        bool any = oly__walk_inputs(&w, e, false);
        oly_atom *kin = w.in, *uin = w.in2, *kout = w.out, *uout = w.out2;
        bool *iunk = w.in_flag, *ounk = w.out_flag;
        for (int i = 0; i < e->n_in; i++) {
            iunk[i] = w.in_fact[i];
            if (iunk[i]) {
                uin[i] = kin[i];
                memset(&kin[i], 0, sizeof kin[i]);
            } else {
                memset(&uin[i], 0, sizeof uin[i]);
            }
        }
        if (!any) {
            s = oly__emit_eqn(kb, e, kin, kout);
            for (int j = 0; j < e->n_out; j++) ounk[j] = false;
        } else if (e->prim->partial_eval) {
            oly__atoms_unset(kout, e->n_out);
            oly__atoms_unset(uout, e->n_out);
            for (int j = 0; j < e->n_out; j++) ounk[j] = true;
            s = e->prim->partial_eval(&ctx, e, kin, uin, iunk, kout, uout, ounk);
            if (s != OLY_OK) {
                s = oly__error_prefix(s, "partial evaluation of %s", e->prim->name);
                break;
            }
            for (int j = 0; j < e->n_out && s == OLY_OK; j++) {
                if (ounk[j]) kout[j] = uout[j];
                s = oly__rule_check(e, "partial_eval", ounk[j] ? "unknown output" : "known output",
                                    j, &kout[j], &e->out[j]->aval);
            }
        } else {
            for (int i = 0; i < e->n_in && s == OLY_OK; i++)
                if (!iunk[i]) s = oly__pe_residual(&ctx, kin[i], &uin[i]);
            if (s == OLY_OK) s = oly__emit_eqn(ub, e, uin, kout);
            for (int j = 0; j < e->n_out; j++) ounk[j] = true;
        }
        for (int j = 0; j < e->n_out; j++) w.out_fact[j] = ounk[j];
        memset(w.out2, 0, sizeof *w.out2 * (size_t)e->n_out);
        if (s == OLY_OK) oly__walk_outputs(&w, e);
    }

    /* outputs: the unknown side first, since forcing adds residuals */
    int nk = 0, nu = 0;
    for (int j = 0; j < p->n_out && s == OLY_OK; j++) {
        int u;
        oly_atom a = oly__walk_read(&w, p->out[j], false, &u);
        if (!u && force && force[j]) {
            s = oly__pe_residual(&ctx, a, &a);
            u = true;
        }
        res_unk[j] = u;
        if (u)
            ures[nu++] = a;
        else
            kres[nk++] = a;
    }
    if (s == OLY_OK) s = finish_unknown(ub, ures, nu, n_u, d.n_res, &up);
    if (s == OLY_OK) {
        oly_atom *kall = oly__calloc((size_t)(nk + d.n_res) + 1, sizeof *kall);
        if (!kall) {
            s = OLY_ERR_NOMEM;
        } else {
            for (int j = 0; j < nk; j++) kall[j] = kres[j];
            for (int i = 0; i < d.n_res; i++) kall[nk + i] = d.res_k[i];
            s = oly_builder_finish(kb, kall, nk + d.n_res, &kp);
            free(kall);
        }
    }
    if (s == OLY_OK) {
        *known = kp;
        *unknown = up;
        if (n_res_out) *n_res_out = d.n_res;
        for (int j = 0; j < p->n_out; j++) out_unknown[j] = res_unk[j];
    } else {
        oly_program_release(kp);
        oly_program_release(up);
    }
    oly_builder_free(kb);
    oly_builder_free(ub);
    free(d.res_u);
    free(d.has_res);
    free(d.kconst);
    free(d.res_k);
    oly__walk_free(&w);
    free(kres);
    free(ures);
    free(res_unk);
    return s;
}

oly_status oly__partial_eval(oly_program *p, const bool *unknown_in, oly_program **known,
                             oly_program **unknown, int *n_res, bool *out_unknown)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "partial eval: program is NULL");
    if (!known || !unknown || (p->n_out > 0 && !out_unknown) || (p->n_in > 0 && !unknown_in))
        return oly__error(OLY_ERR_INVALID, "partial eval: NULL argument");
    return pe_run(p, unknown_in, NULL, known, unknown, n_res, out_unknown);
}

oly_status oly_program_linearize(oly_program *p, const bool *nz_in, oly_program **primal,
                                 oly_program **linear, int *n_res, bool *nz_out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "linearize: program is NULL");
    if (!primal || !linear) return oly__error(OLY_ERR_INVALID, "linearize: out is NULL");
    if (p->n_in > 0 && !nz_in) return oly__error(OLY_ERR_INVALID, "linearize: nz_in is NULL");
    if (p->n_out > 0 && !nz_out) return oly__error(OLY_ERR_INVALID, "linearize: nz_out is NULL");
    oly_program *j = NULL, *jd = NULL, *kp = NULL, *up = NULL;
    bool *nzo = oly__calloc((size_t)p->n_out + 1, sizeof *nzo);
    if (!nzo) return OLY_ERR_NOMEM;
    oly_status s = oly_program_jvp(p, nz_in, &j, nzo);
    /* dead tangent chains would otherwise land in the linear program */
    if (s == OLY_OK) s = oly_program_dce(j, &jd);
    bool *unk = NULL, *force = NULL, *ounk = NULL;
    if (s == OLY_OK) {
        int n_in = jd->n_in, n_out = jd->n_out;
        unk = oly__calloc((size_t)n_in + 1, sizeof *unk);
        force = oly__calloc((size_t)n_out + 1, sizeof *force);
        ounk = oly__calloc((size_t)n_out + 1, sizeof *ounk);
        if (!unk || !force || !ounk) s = OLY_ERR_NOMEM;
        for (int i = p->n_in; i < n_in && s == OLY_OK; i++) unk[i] = true;
        for (int k = p->n_out; k < n_out && s == OLY_OK; k++) force[k] = true;
    }
    int nr = 0;
    if (s == OLY_OK) s = pe_run(jd, unk, force, &kp, &up, &nr, ounk);
    for (int k = 0; k < p->n_out && s == OLY_OK; k++)
        if (ounk[k])
            s = oly__error(OLY_ERR_INTERNAL,
                           "linearize: primal output %d depends on tangents (a JVP rule mixed "
                           "primal and tangent values)",
                           k);
    if (s == OLY_OK) {
        *primal = kp;
        *linear = up;
        if (n_res) *n_res = nr;
        for (int k = 0; k < p->n_out; k++) nz_out[k] = nzo[k];
    } else {
        oly_program_release(kp);
        oly_program_release(up);
    }
    oly_program_release(j);
    oly_program_release(jd);
    free(nzo);
    free(unk);
    free(force);
    free(ounk);
    return s;
}

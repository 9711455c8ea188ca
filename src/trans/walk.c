/* walk.c — what the four transform drivers (vmap, jvp, partial evaluation,
 * transpose) share: the walk state over an old program (each old var's atoms
 * in the new program and the driver's facts about it, one equation's scratch),
 * reading an equation's inputs through it, and the checks of what a rule
 * returned, with one wording for every driver. What differs (which facts, the
 * rule's contract, the walk's direction) stays in the drivers. */
#include "trans/trans.h"

oly_status oly__walk_init(oly_walk *w, const oly_program *p, int min_io)
{
    memset(w, 0, sizeof *w);
    w->p = p;
    int max_io = min_io > 1 ? min_io : 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_io) max_io = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_io) max_io = p->eqn[k].n_out;
    }
    w->max_io = max_io;
    size_t nv = (size_t)p->n_vars + 1, io = (size_t)max_io;
    w->env = oly__calloc(nv, sizeof *w->env);
    w->aux = oly__calloc(nv, sizeof *w->aux);
    w->fact = oly__calloc(nv, sizeof *w->fact);
    w->in = oly__calloc(io, sizeof *w->in);
    w->in2 = oly__calloc(io, sizeof *w->in2);
    w->in_fact = oly__calloc(io, sizeof *w->in_fact);
    w->out = oly__calloc(io, sizeof *w->out);
    w->out2 = oly__calloc(io, sizeof *w->out2);
    w->out_fact = oly__calloc(io, sizeof *w->out_fact);
    w->in_flag = oly__calloc(io, sizeof *w->in_flag);
    w->out_flag = oly__calloc(io, sizeof *w->out_flag);
    if (!w->env || !w->aux || !w->fact || !w->in || !w->in2 || !w->in_fact || !w->out ||
        !w->out2 || !w->out_fact || !w->in_flag || !w->out_flag) {
        oly__walk_free(w);
        return OLY_ERR_NOMEM;
    }
    return OLY_OK;
}

void oly__walk_free(oly_walk *w)
{
    free(w->env);
    free(w->aux);
    free(w->fact);
    free(w->in);
    free(w->in2);
    free(w->in_fact);
    free(w->out);
    free(w->out2);
    free(w->out_fact);
    free(w->in_flag);
    free(w->out_flag);
    memset(w, 0, sizeof *w);
}

oly_status oly__walk_consts(oly_walk *w, oly_builder *b, int fact)
{
    const oly_program *p = w->p;
    for (int i = 0; i < p->n_const; i++) {
        oly_var *v = NULL;
        OLY_TRY(oly_builder_add_const(b, p->constval[i], &v));
        w->env[p->constvar[i]->id] = oly_atom_var(v);
        w->fact[p->constvar[i]->id] = fact;
    }
    return OLY_OK;
}

bool oly__walk_inputs(oly_walk *w, const oly_eqn *e, int lit_fact)
{
    bool any = false;
    for (int i = 0; i < e->n_in; i++) {
        const oly_atom *a = &e->in[i];
        if (a->kind == OLY_ATOM_VAR) {
            uint32_t id = a->var->id;
            w->in[i] = w->env[id];
            w->in2[i] = w->aux[id];
            w->in_fact[i] = w->fact[id];
        } else {
            w->in[i] = *a;
            memset(&w->in2[i], 0, sizeof w->in2[i]);
            w->in_fact[i] = lit_fact;
        }
        any |= w->in_fact[i] != lit_fact;
    }
    return any;
}

void oly__walk_outputs(oly_walk *w, const oly_eqn *e)
{
    for (int j = 0; j < e->n_out; j++) {
        uint32_t id = e->out[j]->id;
        w->env[id] = w->out[j];
        w->aux[id] = w->out2[j];
        w->fact[id] = w->out_fact[j];
    }
}

oly_atom oly__walk_read(const oly_walk *w, oly_atom a, int lit_fact, int *fact)
{
    if (a.kind != OLY_ATOM_VAR) {
        if (fact) *fact = lit_fact;
        return a;
    }
    if (fact) *fact = w->fact[a.var->id];
    return w->env[a.var->id];
}

void oly__atoms_unset(oly_atom *a, int n)
{
    for (int j = 0; j < n; j++) {
        memset(&a[j], 0, sizeof a[j]);
        a[j].kind = OLY_ATOM_KIND_COUNT; /* a rule that does not set it is caught */
    }
}

const char *oly__eqn_label(const oly_eqn *e, char *buf, size_t n)
{
    const oly_prim *p = e->prim;
    snprintf(buf, n, "%s", p->name);
    for (int i = 0; e->params && i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        if (f->kind != OLY_FIELD_HOST_FN) continue;
        const oly_host_fn *h = *(oly_host_fn *const *)((const char *)e->params + f->offset);
        if (h) snprintf(buf, n, "%s[%s=%s]", p->name, f->name, oly_host_fn_name(h));
        break;
    }
    return buf;
}

oly_status oly__rule_missing(const oly_eqn *e, const char *rule)
{
    return oly__error(OLY_ERR_UNSUPPORTED, "%s has no %s rule", e->prim->name, rule);
}

oly_status oly__rule_check(const oly_eqn *e, const char *rule, const char *what, int j,
                           const oly_atom *got, const oly_aval *want)
{
    if (got->kind != OLY_ATOM_VAR && got->kind != OLY_ATOM_LIT)
        return oly__error(OLY_ERR_INTERNAL, "%s %s rule did not set %s %d", e->prim->name, rule,
                          what, j);
    oly_aval a = oly__atom_aval(got);
    if (oly_aval_equal(&a, want)) return OLY_OK;
    char s1[256], s2[256];
    oly_aval_format(s1, sizeof s1, &a);
    oly_aval_format(s2, sizeof s2, want);
    return oly__error(OLY_ERR_INTERNAL, "%s %s rule: %s %d is %s, expected %s", e->prim->name,
                      rule, what, j, s1, s2);
}

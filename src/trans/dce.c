/* dce.c — dead-code elimination: drop equations with no effect whose outputs
 * nobody uses, walking backwards from the program's outputs; nested programs
 * are cleaned too (their signatures stay as they are). */
#include "internal.h"

/* Rebuilds p keeping the equations marked in keep, with subs[k] in place of
 * eqn k's nested programs where subs[k] != NULL. */
static oly_status rebuild(const oly_program *p, const bool *keep, oly_program ***subs,
                          oly_program **out)
{
    oly_builder *b = NULL;
    oly_var **map = oly__calloc((size_t)p->n_vars + 1, sizeof *map);
    oly_atom *in = NULL;
    oly_var **outs = NULL;
    oly_status s = map ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    int max_in = 1, max_out = 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_in) max_in = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_out) max_out = p->eqn[k].n_out;
    }
    if (p->n_out > max_in) max_in = p->n_out;
    if (s == OLY_OK) {
        in = oly__calloc((size_t)max_in, sizeof *in);
        outs = oly__calloc((size_t)max_out, sizeof *outs);
        if (!in || !outs) s = OLY_ERR_NOMEM;
    }
    for (int i = 0; i < p->n_const && s == OLY_OK; i++)
        s = oly_builder_add_const(b, p->constval[i], &map[p->constvar[i]->id]);
    for (int i = 0; i < p->n_in && s == OLY_OK; i++)
        s = oly_builder_add_input(b, &p->in[i]->aval, &map[p->in[i]->id]);
    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        if (!keep[k]) continue;
        const oly_eqn *e = &p->eqn[k];
        for (int i = 0; i < e->n_in; i++) {
            in[i] = e->in[i];
            if (in[i].kind == OLY_ATOM_VAR) in[i].var = map[e->in[i].var->id];
        }
        int n = 0;
        s = oly_builder_append(b, e->prim, in, e->n_in, e->params,
                               subs[k] ? subs[k] : e->sub, e->n_sub, outs, max_out, &n);
        if (s == OLY_OK && n != e->n_out)
            s = oly__error(OLY_ERR_INTERNAL, "dce: %s gave %d outputs, had %d", e->prim->name, n,
                           e->n_out);
        for (int i = 0; i < e->n_out && s == OLY_OK; i++) map[e->out[i]->id] = outs[i];
    }
    for (int i = 0; i < p->n_out && s == OLY_OK; i++) {
        in[i] = p->out[i];
        if (in[i].kind == OLY_ATOM_VAR) in[i].var = map[p->out[i].var->id];
    }
    if (s == OLY_OK) s = oly_builder_finish(b, in, p->n_out, out);
    oly_builder_free(b);
    free(map);
    free(in);
    free(outs);
    return s;
}

oly_status oly_program_dce(oly_program *p, oly_program **out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_dce: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_program_dce: out is NULL");
    bool *used = oly__calloc((size_t)p->n_vars + 1, sizeof *used);
    bool *keep = oly__calloc((size_t)p->n_eqn + 1, sizeof *keep);
    oly_program ***subs = oly__calloc((size_t)p->n_eqn + 1, sizeof *subs);
    oly_status s = used && keep && subs ? OLY_OK : OLY_ERR_NOMEM;
    bool changed = false;

    for (int i = 0; i < p->n_out && s == OLY_OK; i++)
        if (p->out[i].kind == OLY_ATOM_VAR) used[p->out[i].var->id] = true;
    for (int k = p->n_eqn - 1; k >= 0 && s == OLY_OK; k--) {
        const oly_eqn *e = &p->eqn[k];
        bool live = e->effects != 0;
        for (int i = 0; i < e->n_out && !live; i++) live = used[e->out[i]->id];
        keep[k] = live;
        if (!live) {
            changed = true;
            continue;
        }
        for (int i = 0; i < e->n_in; i++)
            if (e->in[i].kind == OLY_ATOM_VAR) used[e->in[i].var->id] = true;
        if (!e->n_sub) continue;
        subs[k] = oly__calloc((size_t)e->n_sub, sizeof **subs);
        if (!subs[k]) {
            s = OLY_ERR_NOMEM;
            break;
        }
        bool sub_changed = false;
        for (int j = 0; j < e->n_sub && s == OLY_OK; j++) {
            s = oly_program_dce(e->sub[j], &subs[k][j]);
            if (s == OLY_OK && subs[k][j] != e->sub[j]) sub_changed = true;
        }
        if (s == OLY_OK && !sub_changed) {
            for (int j = 0; j < e->n_sub; j++) oly_program_release(subs[k][j]);
            free(subs[k]);
            subs[k] = NULL;
        }
        changed |= sub_changed;
    }

    if (s == OLY_OK) {
        if (changed) {
            s = rebuild(p, keep, subs, out);
        } else {
            *out = oly_program_retain(p);
        }
    }
    for (int k = 0; subs && k < p->n_eqn; k++) {
        if (!subs[k]) continue;
        for (int j = 0; j < p->eqn[k].n_sub; j++) oly_program_release(subs[k][j]);
        free(subs[k]);
    }
    free(subs);
    free(used);
    free(keep);
    return s;
}

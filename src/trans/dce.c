/* dce.c — dead-code elimination: drop equations with no effect whose outputs
 * nobody uses, walking backwards from the program's outputs; nested programs
 * are cleaned too (their signatures stay as they are), except where a row's
 * dce rule replaces its equation by one without the unused outputs and
 * inputs (pmap). */
#include "trans/trans.h"

/* Rebuilds p keeping the equations marked in keep, with subs[k] in place of
 * eqn k's nested programs where subs[k] != NULL, and repl[k] (a dce rule's
 * program of eqn k's inputs marked in repl_in[k], returning its outputs
 * marked in used[]) inlined in place of eqn k where repl[k] != NULL. */
static oly_status rebuild(const oly_program *p, const bool *keep, oly_program ***subs,
                          oly_program *const *repl, bool *const *repl_in, const bool *used,
                          oly_program **out)
{
    oly_builder *b = NULL;
    oly_atom *map = oly__calloc((size_t)p->n_vars + 1, sizeof *map);
    oly_atom *rin = NULL, *rout = NULL;
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
        rin = oly__calloc((size_t)max_in, sizeof *rin);
        rout = oly__calloc((size_t)max_out, sizeof *rout);
        if (!in || !outs || !rin || !rout) s = OLY_ERR_NOMEM;
    }
    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_const(b, p->constval[i], &v);
        map[p->constvar[i]->id] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &p->in[i]->aval, &v);
        map[p->in[i]->id] = oly_atom_var(v);
    }
    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        if (!keep[k]) continue;
        const oly_eqn *e = &p->eqn[k];
        for (int i = 0; i < e->n_in; i++) {
            in[i] = e->in[i];
            if (in[i].kind == OLY_ATOM_VAR) in[i] = map[e->in[i].var->id];
        }
        if (repl[k]) {
            int ni = 0, no = 0;
            for (int i = 0; i < e->n_in; i++)
                if (repl_in[k][i]) rin[ni++] = in[i];
            s = ni == repl[k]->n_in ? oly__emit_inline(b, repl[k], rin, rout)
                                    : oly__error(OLY_ERR_INTERNAL, "dce: %s's replacement takes "
                                                 "%d inputs, %d used", e->prim->name,
                                                 repl[k]->n_in, ni);
            for (int j = 0; j < e->n_out && s == OLY_OK; j++)
                if (used[e->out[j]->id]) map[e->out[j]->id] = rout[no++];
            continue;
        }
        int n = 0;
        s = oly_builder_append(b, e->prim, in, e->n_in, e->params,
                               subs[k] ? subs[k] : e->sub, e->n_sub, outs, max_out, &n);
        if (s == OLY_OK && n != e->n_out)
            s = oly__error(OLY_ERR_INTERNAL, "dce: %s gave %d outputs, had %d", e->prim->name, n,
                           e->n_out);
        for (int i = 0; i < e->n_out && s == OLY_OK; i++) map[e->out[i]->id] = oly_atom_var(outs[i]);
    }
    for (int i = 0; i < p->n_out && s == OLY_OK; i++) {
        in[i] = p->out[i];
        if (in[i].kind == OLY_ATOM_VAR) in[i] = map[p->out[i].var->id];
    }
    if (s == OLY_OK) s = oly_builder_finish(b, in, p->n_out, out);
    oly_builder_free(b);
    free(map);
    free(in);
    free(outs);
    free(rin);
    free(rout);
    return s;
}

oly_status oly_program_dce(oly_program *p, oly_program **out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_dce: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_program_dce: out is NULL");
    bool *used = oly__calloc((size_t)p->n_vars + 1, sizeof *used);
    bool *keep = oly__calloc((size_t)p->n_eqn + 1, sizeof *keep);
    oly_program ***subs = oly__calloc((size_t)p->n_eqn + 1, sizeof *subs);
    oly_program **repl = oly__calloc((size_t)p->n_eqn + 1, sizeof *repl);
    bool **repl_in = oly__calloc((size_t)p->n_eqn + 1, sizeof *repl_in);
    int max_io = 1;
    for (int k = 0; k < p->n_eqn; k++) {
        if (p->eqn[k].n_in > max_io) max_io = p->eqn[k].n_in;
        if (p->eqn[k].n_out > max_io) max_io = p->eqn[k].n_out;
    }
    bool *uo = oly__calloc((size_t)max_io, sizeof *uo), *ui = oly__calloc((size_t)max_io, sizeof *ui);
    oly_status s = used && keep && subs && repl && repl_in && uo && ui ? OLY_OK : OLY_ERR_NOMEM;
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
        if (e->prim->dce) { /* the row drops what it can */
            for (int j = 0; j < e->n_out; j++) uo[j] = used[e->out[j]->id];
            for (int i = 0; i < e->n_in; i++) ui[i] = true;
            s = e->prim->dce(e, uo, ui, &repl[k]);
            if (s != OLY_OK) {
                s = oly__error_prefix(s, "dce of %s", e->prim->name);
                break;
            }
            if (repl[k]) {
                changed = true;
                repl_in[k] = oly__calloc((size_t)e->n_in + 1, sizeof **repl_in);
                if (!repl_in[k]) {
                    s = OLY_ERR_NOMEM;
                    break;
                }
                memcpy(repl_in[k], ui, (size_t)e->n_in * sizeof *ui);
                for (int i = 0; i < e->n_in; i++)
                    if (ui[i] && e->in[i].kind == OLY_ATOM_VAR) used[e->in[i].var->id] = true;
                continue;
            }
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
            s = rebuild(p, keep, subs, repl, repl_in, used, out);
        } else {
            *out = oly_program_retain(p);
        }
    }
    for (int k = 0; subs && k < p->n_eqn; k++) {
        if (!subs[k]) continue;
        for (int j = 0; j < p->eqn[k].n_sub; j++) oly_program_release(subs[k][j]);
        free(subs[k]);
    }
    for (int k = 0; repl && k < p->n_eqn; k++) oly_program_release(repl[k]);
    for (int k = 0; repl_in && k < p->n_eqn; k++) free(repl_in[k]);
    free(repl_in);
    free(subs);
    free(repl);
    free(uo);
    free(ui);
    free(used);
    free(keep);
    return s;
}

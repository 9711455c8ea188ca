/* control.c — the helpers the control-flow rows share (control.h): rule
 * temporaries, program wrappers, dependency analysis, and the transforms of
 * sub-programs (vmap, jvp) with the plumbing their rules need. */
#include "prims/control.h"

oly_aval oly__ctl_out_aval(const oly_program *p, int k) { return oly__atom_aval(&p->out[k]); }

oly_status oly__ctl_same_aval(const char *who, const char *what, int i, const oly_aval *want,
                            const oly_aval *got)
{
    if (oly_aval_equal(want, got)) return OLY_OK;
    char w[256], g[256];
    oly_aval_format(w, sizeof w, want);
    oly_aval_format(g, sizeof g, got);
    return oly__error(want->dtype != got->dtype ? OLY_ERR_TYPE : OLY_ERR_SHAPE,
                      "%s: %s %d: expected %s, got %s", who, what, i, w, g);
}

void *oly__ctl_tnew(ctl_tmp *t, int n, size_t size)
{
    return oly__arena_alloc(t->arena, ((size_t)(n > 0 ? n : 0) + 1) * size);
}

oly_status oly__ctl_keep(ctl_tmp *t, oly_program *p)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        oly_program **np = oly__realloc(t->progs, (size_t)cap * sizeof *np);
        if (!np) {
            oly_program_release(p);
            return OLY_ERR_NOMEM;
        }
        t->progs = np;
        t->cap = cap;
    }
    t->progs[t->n++] = p;
    return OLY_OK;
}

void oly__ctl_tfree(ctl_tmp *t)
{
    for (int i = 0; i < t->n; i++) oly_program_release(t->progs[i]);
    free(t->progs);
    oly__arena_free(t->arena);
}

bool oly__ctl_inexact(const oly_aval *a) { return oly_dtype_is_inexact(a->dtype); }

oly_status oly__ctl_depends(const oly_program *p, const bool *in, bool *out)
{
    bool *f = oly__calloc((size_t)p->n_vars + 1, sizeof *f);
    if (!f) return OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in; i++) f[p->in[i]->id] = in[i];
    for (int k = 0; k < p->n_eqn; k++) {
        const oly_eqn *e = &p->eqn[k];
        bool any = false;
        for (int i = 0; i < e->n_in && !any; i++)
            any = e->in[i].kind == OLY_ATOM_VAR && f[e->in[i].var->id];
        for (int j = 0; j < e->n_out; j++) f[e->out[j]->id] = any;
    }
    for (int k = 0; k < p->n_out; k++)
        out[k] = p->out[k].kind == OLY_ATOM_VAR && f[p->out[k].var->id];
    free(f);
    return OLY_OK;
}

ctl_src oly__ctl_from_out(int k) { return (ctl_src){.kind = S_OUT, .idx = k}; }

ctl_src oly__ctl_from_in(int i) { return (ctl_src){.kind = S_IN, .idx = i}; }

ctl_src oly__ctl_zeros(oly_aval a) { return (ctl_src){.kind = S_ZERO, .aval = a}; }

oly_status oly__ctl_wrap(oly_program *p, int n_in, const oly_aval *av, const int *pin, int n_out,
                       const ctl_src *os, oly_program **out)
{
    oly_builder *b = NULL;
    oly_atom *win = oly__calloc((size_t)n_in + 1, sizeof *win);
    oly_atom *pi = oly__calloc((size_t)p->n_in + 1, sizeof *pi);
    oly_atom *po = oly__calloc((size_t)p->n_out + 1, sizeof *po);
    oly_atom *wo = oly__calloc((size_t)n_out + 1, sizeof *wo);
    oly_status s = win && pi && po && wo ? oly_builder_new(&b) : OLY_ERR_NOMEM;
    for (int i = 0; i < n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &av[i], &v);
        if (s == OLY_OK) win[i] = oly_atom_var(v);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        if (pin[i] < 0 || pin[i] >= n_in)
            s = oly__error(OLY_ERR_INTERNAL, "control: wrapper input %d out of range", pin[i]);
        else
            pi[i] = win[pin[i]];
    }
    if (s == OLY_OK) s = oly__emit_inline(b, p, pi, po);
    for (int k = 0; k < n_out && s == OLY_OK; k++) {
        if (os[k].kind == S_OUT)
            wo[k] = po[os[k].idx];
        else if (os[k].kind == S_IN)
            wo[k] = win[os[k].idx];
        else
            s = oly__emit_full(b, &os[k].aval, 0.0, &wo[k]);
    }
    if (s == OLY_OK) s = oly_builder_finish(b, wo, n_out, out);
    oly_builder_free(b);
    free(win);
    free(pi);
    free(po);
    free(wo);
    return s;
}

oly_status oly__ctl_dce_kept(ctl_tmp *tp, oly_program **p)
{
    oly_program *q = NULL;
    OLY_TRY(oly_program_dce(*p, &q));
    OLY_TRY(oly__ctl_keep(tp, q));
    *p = q;
    return OLY_OK;
}

void oly__ctl_in_avals(const oly_program *p, oly_aval *av)
{
    for (int i = 0; i < p->n_in; i++) av[i] = p->in[i]->aval;
}

oly_status oly__ctl_vmap_sub(ctl_tmp *tp, oly_program *p, const bool *in_b, const bool *out_b,
                           int64_t size, oly_program **out)
{
    int *ia = oly__calloc((size_t)p->n_in + 1, sizeof *ia);
    int *oa = oly__calloc((size_t)p->n_out + 1, sizeof *oa);
    oly_status s = ia && oa ? OLY_OK : OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) ia[i] = in_b[i] ? 0 : OLY_NOT_MAPPED;
    for (int k = 0; k < p->n_out && s == OLY_OK; k++) oa[k] = out_b[k] ? 0 : OLY_NOT_MAPPED;
    if (s == OLY_OK) s = oly_program_vmap(p, ia, size, oa, out);
    if (s == OLY_OK) s = oly__ctl_keep(tp, *out);
    free(ia);
    free(oa);
    return s;
}

oly_status oly__ctl_jvp_sub(ctl_tmp *tp, oly_program *p, const bool *nz_in, const bool *force,
                          oly_program **out, bool *nz_out)
{
    bool *nzi = oly__calloc((size_t)p->n_in + 1, sizeof *nzi);
    bool *nzo = oly__calloc((size_t)p->n_out + 1, sizeof *nzo);
    oly_program *j = NULL;
    oly_aval *av = NULL;
    int *pin = NULL;
    ctl_src *os = NULL;
    oly_status s = nzi && nzo ? OLY_OK : OLY_ERR_NOMEM;
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) nzi[i] = nz_in[i] && oly__ctl_inexact(&p->in[i]->aval);
    if (s == OLY_OK) s = oly_program_jvp(p, nzi, &j, nzo);
    if (s != OLY_OK) goto done;
    bool need = false;
    for (int k = 0; k < p->n_out; k++) {
        oly_aval a = oly__ctl_out_aval(p, k);
        bool f = force && force[k] && oly__ctl_inexact(&a);
        nz_out[k] = nzo[k] || f;
        need |= nz_out[k] && !nzo[k];
    }
    if (!need) {
        *out = j;
        j = NULL;
        s = oly__ctl_keep(tp, *out);
        goto done;
    }
    int n_in = j->n_in, n_out = p->n_out;
    for (int k = 0; k < p->n_out; k++) n_out += nz_out[k];
    av = oly__calloc((size_t)n_in + 1, sizeof *av);
    pin = oly__calloc((size_t)n_in + 1, sizeof *pin);
    os = oly__calloc((size_t)n_out + 1, sizeof *os);
    if (!av || !pin || !os) {
        s = OLY_ERR_NOMEM;
        goto done;
    }
    oly__ctl_in_avals(j, av);
    for (int i = 0; i < n_in; i++) pin[i] = i;
    int o = 0, jt = p->n_out;
    for (int k = 0; k < p->n_out; k++) os[o++] = oly__ctl_from_out(k);
    for (int k = 0; k < p->n_out; k++) {
        if (nzo[k])
            os[o++] = oly__ctl_from_out(jt++);
        else if (nz_out[k])
            os[o++] = oly__ctl_zeros(oly__ctl_out_aval(p, k));
    }
    oly_program *w = NULL;
    s = oly__ctl_wrap(j, n_in, av, pin, n_out, os, &w);
    if (s == OLY_OK) {
        *out = w;
        s = oly__ctl_keep(tp, w);
    }
done:
    oly_program_release(j);
    free(nzi);
    free(nzo);
    free(av);
    free(pin);
    free(os);
    return s;
}

oly_status oly__ctl_tangent_or_zeros(oly_builder *b, const oly_atom *tangent, const bool *tan_nz,
                                   int i, const oly_aval *aval, oly_atom *out)
{
    if (tan_nz[i]) {
        *out = tangent[i];
        return OLY_OK;
    }
    return oly__emit_full(b, aval, 0.0, out);
}

oly_status oly__ctl_as_unknown(oly_pe_ctx *ctx, const oly_atom *known_in, const oly_atom *unknown_in,
                             const bool *unknown, int i, oly_atom *out)
{
    if (unknown[i]) {
        *out = unknown_in[i];
        return OLY_OK;
    }
    return oly__pe_residual(ctx, known_in[i], out);
}

oly_status oly__ctl_pe_all_unknown(oly_pe_ctx *ctx, const oly_eqn *eqn, const oly_atom *known_in,
                                 const oly_atom *unknown_in, const bool *unknown,
                                 oly_atom *unknown_out, bool *out_unknown)
{
    oly_atom *in = oly__calloc((size_t)eqn->n_in + 1, sizeof *in);
    if (!in) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int i = 0; i < eqn->n_in && s == OLY_OK; i++)
        s = oly__ctl_as_unknown(ctx, known_in, unknown_in, unknown, i, &in[i]);
    if (s == OLY_OK) s = oly__emit_eqn(ctx->unknown, eqn, in, unknown_out);
    for (int k = 0; k < eqn->n_out && s == OLY_OK; k++) out_unknown[k] = true;
    free(in);
    return s;
}


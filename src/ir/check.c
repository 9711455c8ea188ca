/* check.c — the verifier: a program is well scoped (every var defined once,
 * before use), well typed (re-running each shape rule reproduces the recorded
 * avals), arities and effects agree, recursively through nested programs. */
#include "internal.h"

static void aval_str(char *buf, size_t n, const oly_aval *a) { oly_aval_format(buf, n, a); }

/* Where a variable is defined or used: "equation 3 (sin) input 0" when name is
 * set, else "<what> <i>". Spelled out only for an error message: formatting
 * every site up front cost more than the checks themselves. */
typedef struct site {
    const char *what; /* "constant", "input", "program output"; or the role in equation k */
    const char *name; /* equation k's primitive, or NULL */
    int k, i;
} site;

static const char *site_str(char *buf, size_t n, const site *at)
{
    if (at->name)
        snprintf(buf, n, "equation %d (%s) %s %d", at->k, at->name, at->what, at->i);
    else
        snprintf(buf, n, "%s %d", at->what, at->i);
    return buf;
}

/* Marks v defined; fails if it is out of range or defined already. */
static oly_status define(const oly_program *p, unsigned char *defined, const oly_var *v,
                         const site *at)
{
    char where[160];
    if (!v)
        return oly__error(OLY_ERR_INTERNAL, "verify: %s is a NULL variable",
                          site_str(where, sizeof where, at));
    if (v->id >= p->n_vars)
        return oly__error(OLY_ERR_INTERNAL, "verify: %s has id %u outside [0, %u)",
                          site_str(where, sizeof where, at), (unsigned)v->id,
                          (unsigned)p->n_vars);
    if (defined[v->id])
        return oly__error(OLY_ERR_INTERNAL, "verify: %s (variable %u) is defined twice",
                          site_str(where, sizeof where, at), (unsigned)v->id);
    defined[v->id] = 1;
    return OLY_OK;
}

static oly_status use(const oly_program *p, const unsigned char *defined, const oly_atom *a,
                      const site *at)
{
    char where[160];
    if (a->kind == OLY_ATOM_LIT) {
        if ((unsigned)a->lit.dtype >= OLY_DTYPE_COUNT)
            return oly__error(OLY_ERR_INTERNAL, "verify: %s is a literal of invalid dtype %d",
                              site_str(where, sizeof where, at), (int)a->lit.dtype);
        return OLY_OK;
    }
    if (a->kind != OLY_ATOM_VAR)
        return oly__error(OLY_ERR_INTERNAL, "verify: %s has invalid atom kind %d",
                          site_str(where, sizeof where, at), (int)a->kind);
    if (!a->var)
        return oly__error(OLY_ERR_INTERNAL, "verify: %s is a NULL variable",
                          site_str(where, sizeof where, at));
    if (a->var->id >= p->n_vars)
        return oly__error(OLY_ERR_INTERNAL, "verify: %s has id %u outside [0, %u)",
                          site_str(where, sizeof where, at), (unsigned)a->var->id,
                          (unsigned)p->n_vars);
    if (!defined[a->var->id])
        return oly__error(OLY_ERR_INTERNAL,
                          "verify: %s uses variable %u before its definition (or it is not "
                          "defined in this program)",
                          site_str(where, sizeof where, at), (unsigned)a->var->id);
    return OLY_OK;
}

static oly_status check_eqn(const oly_program *p, int k, const unsigned char *defined)
{
    const oly_eqn *e = &p->eqn[k];
    const char *name = e->prim ? e->prim->name : "(null)";
    if (!e->prim) return oly__error(OLY_ERR_INTERNAL, "verify: equation %d has no primitive", k);
    if (e->n_in < 0 || e->n_out < 0 || e->n_sub < 0)
        return oly__error(OLY_ERR_INTERNAL, "verify: equation %d (%s) has negative counts", k,
                          name);
    if (e->prim->n_in >= 0 && e->n_in != e->prim->n_in)
        return oly__error(OLY_ERR_INTERNAL, "verify: equation %d (%s) has %d inputs, expected %d",
                          k, name, e->n_in, e->prim->n_in);
    if ((e->prim->params_size > 0) != (e->params != NULL))
        return oly__error(OLY_ERR_INTERNAL, "verify: equation %d (%s) %s params", k, name,
                          e->params ? "has unexpected" : "lacks its");
    for (int i = 0; i < e->n_in; i++) {
        site at = {.what = "input", .name = name, .k = k, .i = i};
        OLY_TRY(use(p, defined, &e->in[i], &at));
    }
    for (int i = 0; i < e->n_sub; i++) {
        if (!e->sub[i])
            return oly__error(OLY_ERR_INTERNAL,
                              "verify: equation %d (%s) nested program %d is NULL", k, name, i);
        oly_status s = oly_program_verify(e->sub[i]);
        if (s != OLY_OK)
            return oly__error_prefix(s, "equation %d (%s) nested program %d", k, name, i);
    }
    int want = oly_prim_num_outputs(e->prim, e->params, e->n_in);
    if (want != e->n_out)
        return oly__error(OLY_ERR_INTERNAL, "verify: equation %d (%s) has %d outputs, expected %d",
                          k, name, e->n_out, want);
    uint32_t eff = oly__eqn_effects(e->prim, e->params, e->sub, e->n_sub);
    if (eff != e->effects)
        return oly__error(OLY_ERR_INTERNAL,
                          "verify: equation %d (%s) records effects 0x%x, expected 0x%x", k, name,
                          (unsigned)e->effects, (unsigned)eff);
    if (!e->prim->shape)
        return oly__error(OLY_ERR_UNSUPPORTED, "verify: equation %d: %s has no shape rule", k,
                          name);

    oly_status s = OLY_OK;
    oly_aval *in = oly__calloc((size_t)e->n_in + 1, sizeof *in);
    oly_aval *out = oly__calloc((size_t)e->n_out + 1, sizeof *out);
    if (!in || !out) {
        s = OLY_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < e->n_in; i++) in[i] = oly__atom_aval(&e->in[i]);
    oly_shape_ctx ctx = {.prim = e->prim, .params = e->params, .n_in = e->n_in, .in = in,
                         .n_sub = e->n_sub, .sub = e->sub, .n_out = e->n_out};
    s = e->prim->shape(&ctx, out);
    if (s != OLY_OK) {
        s = oly__error_prefix(s, "verify: equation %d (%s): shape rule", k, name);
        goto done;
    }
    for (int i = 0; i < e->n_out; i++) {
        if (!e->out[i]) {
            s = oly__error(OLY_ERR_INTERNAL, "verify: equation %d (%s) output %d is NULL", k,
                           name, i);
            goto done;
        }
        if (!oly_aval_equal(&out[i], &e->out[i]->aval)) {
            char got[512], rule[512];
            aval_str(got, sizeof got, &e->out[i]->aval);
            aval_str(rule, sizeof rule, &out[i]);
            s = oly__error(OLY_ERR_INTERNAL,
                           "verify: equation %d (%s) output %d is %s but the shape rule gives %s",
                           k, name, i, got, rule);
            goto done;
        }
    }
done:
    free(in);
    free(out);
    return s;
}

oly_status oly_program_verify(const oly_program *p)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_verify: program is NULL");
    if (p->n_in < 0 || p->n_const < 0 || p->n_eqn < 0 || p->n_out < 0)
        return oly__error(OLY_ERR_INTERNAL, "verify: negative counts");
    unsigned char *defined = oly__calloc((size_t)p->n_vars + 1, 1);
    if (!defined) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int i = 0; i < p->n_const && s == OLY_OK; i++) {
        site at = {.what = "constant", .i = i};
        s = define(p, defined, p->constvar[i], &at);
        if (s == OLY_OK && !p->constval[i])
            s = oly__error(OLY_ERR_INTERNAL, "verify: constant %d has no value", i);
        if (s == OLY_OK && !oly_aval_equal(oly_array_aval(p->constval[i]), &p->constvar[i]->aval))
            s = oly__error(OLY_ERR_INTERNAL,
                           "verify: constant %d's value does not match its aval", i);
    }
    for (int i = 0; i < p->n_in && s == OLY_OK; i++) {
        site at = {.what = "input", .i = i};
        s = define(p, defined, p->in[i], &at);
    }
    uint32_t eff = 0;
    for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
        s = check_eqn(p, k, defined);
        const oly_eqn *e = &p->eqn[k];
        for (int i = 0; i < e->n_out && s == OLY_OK; i++) {
            site at = {.what = "output", .name = e->prim->name, .k = k, .i = i};
            s = define(p, defined, e->out[i], &at);
        }
        eff |= e->effects;
    }
    for (int i = 0; i < p->n_out && s == OLY_OK; i++) {
        site at = {.what = "program output", .i = i};
        s = use(p, defined, &p->out[i], &at);
        if (s == OLY_OK && p->out_aval) {
            oly_aval a = oly__atom_aval(&p->out[i]);
            if (!oly_aval_equal(&a, &p->out_aval[i]))
                s = oly__error(OLY_ERR_INTERNAL, "verify: program output %d's aval is stale", i);
        }
    }
    if (s == OLY_OK && eff != p->effects)
        s = oly__error(OLY_ERR_INTERNAL,
                       "verify: program records effects 0x%x, its equations have 0x%x",
                       (unsigned)p->effects, (unsigned)eff);
    free(defined);
    return s;
}

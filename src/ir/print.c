/* print.c — the text form of a program, as JAX's make_jaxpr prints it:
 *
 *   { lambda ; a:f32[5]. let
 *       b:f32[5] = sin a
 *       c:f32[5] = mul b 2.0:f32[]
 *     in (c,) }
 *
 * Vars are named a..z, ba, bb, ... in the order they are printed: constvars,
 * inputs, then each equation's outputs before its params (so nested programs
 * continue the sequence, as in JAX). */
#include "internal.h"

#include <math.h>

typedef struct printer {
    oly_strbuf sb;
    uint64_t next_name; /* the next name's number */
} printer;

/* Per program: name numbers by var id (UINT64_MAX: not named yet). */
typedef struct names {
    uint64_t *num;
    uint32_t n;
} names;

static void put_name(printer *pr, uint64_t k)
{
    /* base 26 with 'a' as zero and no leading 'a' (a..z, ba, bb, ...) */
    char buf[24];
    int i = (int)sizeof buf - 1;
    buf[i] = 0;
    do {
        buf[--i] = (char)('a' + k % 26);
        k /= 26;
    } while (k && i > 0);
    oly__sb_puts(&pr->sb, buf + i);
}

static void name_var(printer *pr, names *nm, const oly_var *v)
{
    if (v && v->id < nm->n && nm->num[v->id] == UINT64_MAX) nm->num[v->id] = pr->next_name++;
}

static void put_var(printer *pr, const names *nm, const oly_var *v)
{
    if (v && v->id < nm->n && nm->num[v->id] != UINT64_MAX)
        put_name(pr, nm->num[v->id]);
    else
        oly__sb_printf(&pr->sb, "<undefined var %u>", v ? (unsigned)v->id : 0u);
}

static void put_aval(printer *pr, const oly_aval *a)
{
    char buf[16 + 22 * OLY_MAX_RANK];
    oly_aval_format(buf, sizeof buf, a);
    oly__sb_puts(&pr->sb, buf);
}

static void put_binder(printer *pr, const names *nm, const oly_var *v)
{
    put_var(pr, nm, v);
    oly__sb_puts(&pr->sb, ":");
    if (v) put_aval(pr, &v->aval);
}

static void put_literal(printer *pr, const oly_scalar *s)
{
    char buf[64];
    oly_dtype t = s->dtype;
    if (oly_dtype_is_bool(t)) {
        oly__sb_puts(&pr->sb, s->v.i ? "True" : "False");
    } else if (oly_dtype_is_unsigned_int(t)) {
        oly__sb_printf(&pr->sb, "%llu", (unsigned long long)s->v.u);
    } else if (oly_dtype_is_int(t)) {
        oly__sb_printf(&pr->sb, "%lld", (long long)s->v.i);
    } else if (oly_dtype_is_complex(t)) {
        bool single = t == OLY_COMPLEX64;
        oly__format_float(buf, sizeof buf, s->v.c[0], single);
        oly__sb_printf(&pr->sb, "(%s", buf);
        oly__format_float(buf, sizeof buf, s->v.c[1], single);
        oly__sb_printf(&pr->sb, "%s%sj)", buf[0] == '-' ? "" : "+", buf);
    } else if (t == OLY_FLOAT16 || t == OLY_BFLOAT16) {
        /* the shortest decimal that rounds to the same half, printed as Python would */
        double x = s->v.f;
        if (isfinite(x)) {
            uint16_t (*to_half)(float) = t == OLY_FLOAT16 ? oly__float_to_half : oly__float_to_bf16;
            uint16_t want = to_half((float)x);
            for (int prec = 1; prec <= 9; prec++) {
                snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
                double y = strtod(buf, NULL);
                if (to_half((float)y) == want) {
                    x = y;
                    break;
                }
            }
        }
        oly__format_float(buf, sizeof buf, x, false);
        oly__sb_puts(&pr->sb, buf);
    } else {
        oly__format_float(buf, sizeof buf, s->v.f, t != OLY_FLOAT64);
        oly__sb_puts(&pr->sb, buf);
    }
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    oly__sb_puts(&pr->sb, ":");
    put_aval(pr, &a);
}

static void put_atom(printer *pr, const names *nm, const oly_atom *a)
{
    if (a->kind == OLY_ATOM_LIT)
        put_literal(pr, &a->lit);
    else
        put_var(pr, nm, a->var);
}

static void indent(printer *pr, int n)
{
    for (int i = 0; i < n; i++) oly__sb_puts(&pr->sb, " ");
}

static oly_status print_program(printer *pr, const oly_program *p, int ind);

/* One equation line at indentation ind (no trailing newline). */
static oly_status print_eqn(printer *pr, names *nm, const oly_eqn *e, int ind)
{
    for (int i = 0; i < e->n_out; i++) name_var(pr, nm, e->out[i]);
    indent(pr, ind);
    for (int i = 0; i < e->n_out; i++) {
        put_binder(pr, nm, e->out[i]);
        oly__sb_puts(&pr->sb, " ");
    }
    if (e->n_out) oly__sb_puts(&pr->sb, "= ");
    oly__sb_puts(&pr->sb, e->prim->name);

    int n_visible = 0;
    for (int i = 0; e->params && i < e->prim->n_fields; i++)
        n_visible += !e->prim->fields[i].hidden;
    if (e->n_sub) {
        /* With nested programs, one param per line (like JAX). */
        oly__sb_puts(&pr->sb, "[\n");
        for (int i = 0; e->params && i < e->prim->n_fields; i++) {
            if (e->prim->fields[i].hidden) continue;
            indent(pr, ind + 2);
            oly__param_print_field(&e->prim->fields[i], e->params, &pr->sb);
            oly__sb_puts(&pr->sb, "\n");
        }
        for (int j = 0; j < e->n_sub; j++) {
            indent(pr, ind + 2);
            if (j == 0)
                oly__sb_puts(&pr->sb, "jaxpr=");
            else
                oly__sb_printf(&pr->sb, "jaxpr%d=", j);
            OLY_TRY(print_program(pr, e->sub[j], ind + 2));
            oly__sb_puts(&pr->sb, "\n");
        }
        indent(pr, ind);
        oly__sb_puts(&pr->sb, "]");
    } else if (n_visible) {
        oly__sb_puts(&pr->sb, "[");
        oly__params_print(e->prim, e->params, &pr->sb);
        oly__sb_puts(&pr->sb, "]");
    }
    for (int i = 0; i < e->n_in; i++) {
        oly__sb_puts(&pr->sb, " ");
        put_atom(pr, nm, &e->in[i]);
    }
    return OLY_OK;
}

/* Prints p starting at the current column; its equations are indented
 * ind + 4, its "in" line ind + 2. */
static oly_status print_program(printer *pr, const oly_program *p, int ind)
{
    names nm = {oly__malloc(((size_t)p->n_vars + 1) * sizeof(uint64_t)), p->n_vars};
    if (!nm.num) return OLY_ERR_NOMEM;
    for (uint32_t i = 0; i < p->n_vars; i++) nm.num[i] = UINT64_MAX;

    oly_status s = OLY_OK;
    oly__sb_puts(&pr->sb, "{ lambda ");
    for (int i = 0; i < p->n_const; i++) {
        name_var(pr, &nm, p->constvar[i]);
        if (i) oly__sb_puts(&pr->sb, " ");
        put_binder(pr, &nm, p->constvar[i]);
    }
    oly__sb_puts(&pr->sb, "; ");
    for (int i = 0; i < p->n_in; i++) {
        name_var(pr, &nm, p->in[i]);
        if (i) oly__sb_puts(&pr->sb, " ");
        put_binder(pr, &nm, p->in[i]);
    }
    oly__sb_puts(&pr->sb, ". let");
    if (p->n_eqn == 0) {
        oly__sb_puts(&pr->sb, "  in (");
    } else {
        oly__sb_puts(&pr->sb, "\n");
        for (int k = 0; k < p->n_eqn && s == OLY_OK; k++) {
            s = print_eqn(pr, &nm, &p->eqn[k], ind + 4);
            oly__sb_puts(&pr->sb, "\n");
        }
        indent(pr, ind + 2);
        oly__sb_puts(&pr->sb, "in (");
    }
    for (int i = 0; i < p->n_out; i++) {
        if (i) oly__sb_puts(&pr->sb, ", ");
        put_atom(pr, &nm, &p->out[i]);
    }
    oly__sb_puts(&pr->sb, p->n_out == 1 ? ",) }" : ") }");
    free(nm.num);
    return s;
}

oly_status oly_program_print(const oly_program *p, char **out)
{
    if (!p) return oly__error(OLY_ERR_INVALID, "oly_program_print: program is NULL");
    if (!out) return oly__error(OLY_ERR_INVALID, "oly_program_print: out is NULL");
    printer pr;
    memset(&pr, 0, sizeof pr);
    oly_status s = print_program(&pr, p, 0);
    if (s == OLY_OK && pr.sb.failed)
        s = oly__error(OLY_ERR_NOMEM, "oly_program_print: out of memory");
    if (s == OLY_OK && !pr.sb.data) s = OLY_ERR_NOMEM; /* cannot happen: something was printed */
    if (s != OLY_OK) {
        free(pr.sb.data);
        return s;
    }
    *out = pr.sb.data;
    return OLY_OK;
}

/* params.c — hashing, equality, copy, release and printing of any primitive's
 * params struct, driven by its field table (oly_param_field). */
#include "internal.h"

#include <math.h>

#define FIELD(params, f, T) ((T *)((char *)(params) + (f)->offset))
#define CFIELD(params, f, T) ((const T *)((const char *)(params) + (f)->offset))

static int avals_count(const void *params, const oly_param_field *f)
{
    int n = *(const int *)((const char *)params + f->count_offset);
    return n > 0 ? n : 0;
}

oly_status oly__params_copy(const oly_prim *p, oly_arena *arena, const void *src, void **out)
{
    if (!p->params_size) {
        *out = NULL;
        return OLY_OK;
    }
    if (!src) return oly__error(OLY_ERR_INVALID, "%s: params are required, got NULL", p->name);
    void *dst = oly__arena_alloc(arena, p->params_size);
    if (!dst) return OLY_ERR_NOMEM;
    memcpy(dst, src, p->params_size);
    /* Deep copies first (they can fail), retains last (they cannot). */
    for (int i = 0; i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        if (f->kind == OLY_FIELD_STR) {
            const char *s = *CFIELD(src, f, const char *);
            if (s) {
                char *d = oly__arena_strdup(arena, s);
                if (!d) return OLY_ERR_NOMEM;
                *FIELD(dst, f, const char *) = d;
            }
        } else if (f->kind == OLY_FIELD_AVALS) {
            const oly_aval *a = *CFIELD(src, f, const oly_aval *);
            int n = avals_count(src, f);
            oly_aval *d = NULL;
            if (a && n) {
                d = oly__arena_alloc(arena, (size_t)n * sizeof *d);
                if (!d) return OLY_ERR_NOMEM;
                memcpy(d, a, (size_t)n * sizeof *d);
            }
            *FIELD(dst, f, const oly_aval *) = d;
        } else if (f->kind == OLY_FIELD_ALIASES) {
            const oly_io_alias *a = *CFIELD(src, f, const oly_io_alias *);
            int n = avals_count(src, f);
            oly_io_alias *d = NULL;
            if (a && n) {
                d = oly__arena_alloc(arena, (size_t)n * sizeof *d);
                if (!d) return OLY_ERR_NOMEM;
                memcpy(d, a, (size_t)n * sizeof *d);
            }
            *FIELD(dst, f, const oly_io_alias *) = d;
        }
    }
    for (int i = 0; i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        if (f->kind == OLY_FIELD_HOST_FN) {
            oly_host_fn *h = *FIELD(dst, f, oly_host_fn *);
            if (h) oly_host_fn_retain(h);
        } else if (f->kind == OLY_FIELD_THUNK) {
            oly_thunk *t = *FIELD(dst, f, oly_thunk *);
            if (t) oly_thunk_retain(t);
        }
    }
    *out = dst;
    return OLY_OK;
}

void oly__params_release(const oly_prim *p, void *params)
{
    if (!p || !params) return;
    for (int i = 0; i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        if (f->kind == OLY_FIELD_HOST_FN) {
            oly_host_fn **h = FIELD(params, f, oly_host_fn *);
            oly_host_fn_release(*h);
            *h = NULL;
        } else if (f->kind == OLY_FIELD_THUNK) {
            oly_thunk **t = FIELD(params, f, oly_thunk *);
            oly_thunk_release(*t);
            *t = NULL;
        }
    }
}

/* ---------------------------------------------------------------- hash, equality */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint64_t float_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint64_t aval_hash(uint64_t h, const oly_aval *a)
{
    h = mix(h, (uint64_t)a->dtype);
    h = mix(h, (uint64_t)a->rank);
    h = mix(h, a->weak);
    for (int i = 0; i < a->rank && i < OLY_MAX_RANK; i++) h = mix(h, (uint64_t)a->dims[i]);
    return h;
}

uint64_t oly__params_hash(const oly_prim *p, const void *params)
{
    uint64_t h = 0x5bd1e995u;
    if (!p || !params) return h;
    for (int i = 0; i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        switch (f->kind) {
        case OLY_FIELD_INT: h = mix(h, (uint64_t)*CFIELD(params, f, int64_t)); break;
        case OLY_FIELD_BOOL: h = mix(h, *CFIELD(params, f, bool)); break;
        case OLY_FIELD_FLOAT: h = mix(h, float_bits(*CFIELD(params, f, double))); break;
        case OLY_FIELD_DTYPE: h = mix(h, (uint64_t)*CFIELD(params, f, oly_dtype)); break;
        case OLY_FIELD_ENUM: h = mix(h, (uint64_t)*CFIELD(params, f, int)); break;
        case OLY_FIELD_INTS: {
            const oly_ints *v = CFIELD(params, f, oly_ints);
            h = mix(h, (uint64_t)v->n);
            for (int j = 0; j < v->n && j < OLY_MAX_RANK; j++) h = mix(h, (uint64_t)v->v[j]);
            break;
        }
        case OLY_FIELD_STR: {
            const char *s = *CFIELD(params, f, const char *);
            h = mix(h, s != NULL);
            for (; s && *s; s++) h = mix(h, (unsigned char)*s);
            break;
        }
        case OLY_FIELD_AVALS: {
            const oly_aval *a = *CFIELD(params, f, const oly_aval *);
            int n = a ? avals_count(params, f) : 0;
            h = mix(h, (uint64_t)n);
            for (int j = 0; j < n; j++) h = aval_hash(h, &a[j]);
            break;
        }
        case OLY_FIELD_ALIASES: {
            const oly_io_alias *a = *CFIELD(params, f, const oly_io_alias *);
            int n = a ? avals_count(params, f) : 0;
            h = mix(h, (uint64_t)n);
            for (int j = 0; j < n; j++) h = mix(mix(h, (uint64_t)a[j].input), (uint64_t)a[j].output);
            break;
        }
        case OLY_FIELD_HOST_FN:
            h = mix(h, (uint64_t)(uintptr_t)*CFIELD(params, f, oly_host_fn *));
            break;
        case OLY_FIELD_THUNK:
            h = mix(h, (uint64_t)(uintptr_t)*CFIELD(params, f, oly_thunk *));
            break;
        default: break;
        }
    }
    return h;
}

static bool aval_same(const oly_aval *a, const oly_aval *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->weak != b->weak) return false;
    for (int i = 0; i < a->rank && i < OLY_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

bool oly__params_equal(const oly_prim *p, const void *a, const void *b)
{
    if (!p || !p->params_size || a == b) return true;
    if (!a || !b) return false;
    for (int i = 0; i < p->n_fields; i++) {
        const oly_param_field *f = &p->fields[i];
        switch (f->kind) {
        case OLY_FIELD_INT:
            if (*CFIELD(a, f, int64_t) != *CFIELD(b, f, int64_t)) return false;
            break;
        case OLY_FIELD_BOOL:
            if (*CFIELD(a, f, bool) != *CFIELD(b, f, bool)) return false;
            break;
        case OLY_FIELD_FLOAT: /* bitwise: nan equals itself, -0.0 differs from 0.0 */
            if (float_bits(*CFIELD(a, f, double)) != float_bits(*CFIELD(b, f, double)))
                return false;
            break;
        case OLY_FIELD_DTYPE:
            if (*CFIELD(a, f, oly_dtype) != *CFIELD(b, f, oly_dtype)) return false;
            break;
        case OLY_FIELD_ENUM:
            if (*CFIELD(a, f, int) != *CFIELD(b, f, int)) return false;
            break;
        case OLY_FIELD_INTS: {
            const oly_ints *x = CFIELD(a, f, oly_ints), *y = CFIELD(b, f, oly_ints);
            if (x->n != y->n) return false;
            for (int j = 0; j < x->n && j < OLY_MAX_RANK; j++)
                if (x->v[j] != y->v[j]) return false;
            break;
        }
        case OLY_FIELD_STR: {
            const char *x = *CFIELD(a, f, const char *), *y = *CFIELD(b, f, const char *);
            if (x != y && (!x || !y || strcmp(x, y) != 0)) return false;
            break;
        }
        case OLY_FIELD_AVALS: {
            const oly_aval *x = *CFIELD(a, f, const oly_aval *);
            const oly_aval *y = *CFIELD(b, f, const oly_aval *);
            int nx = x ? avals_count(a, f) : 0, ny = y ? avals_count(b, f) : 0;
            if (nx != ny) return false;
            for (int j = 0; j < nx; j++)
                if (!aval_same(&x[j], &y[j])) return false;
            break;
        }
        case OLY_FIELD_ALIASES: {
            const oly_io_alias *x = *CFIELD(a, f, const oly_io_alias *);
            const oly_io_alias *y = *CFIELD(b, f, const oly_io_alias *);
            int nx = x ? avals_count(a, f) : 0, ny = y ? avals_count(b, f) : 0;
            if (nx != ny) return false;
            for (int j = 0; j < nx; j++)
                if (x[j].input != y[j].input || x[j].output != y[j].output) return false;
            break;
        }
        case OLY_FIELD_HOST_FN:
            if (*CFIELD(a, f, oly_host_fn *) != *CFIELD(b, f, oly_host_fn *)) return false;
            break;
        case OLY_FIELD_THUNK:
            if (*CFIELD(a, f, oly_thunk *) != *CFIELD(b, f, oly_thunk *)) return false;
            break;
        default: break;
        }
    }
    return true;
}

/* ---------------------------------------------------------------- printing */

/* Python's repr of a double: shortest digits that round-trip (at float
 * precision when single), fixed notation for exponents in [-4, 16), else
 * scientific with a signed two-digit exponent; integral values get ".0". */
void oly__format_float(char *buf, size_t n, double x, bool single)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 1; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        double back = strtod(tmp, NULL);
        if (single ? (float)back == (float)x : back == x) break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
    /* tmp: [-]d[.ddd]e[+-]xx */
    const char *s = tmp;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    int exp = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;

    char out[80];
    size_t k = 0;
    if (neg) out[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) out[k++] = i < nd ? digits[i] : '0';
            out[k++] = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        } else {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -exp - 1; i++) out[k++] = '0';
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
        }
        out[k] = 0;
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(buf, n, "%s", out);
}

static void print_aval(oly_strbuf *sb, const oly_aval *a)
{
    char buf[16 + 22 * OLY_MAX_RANK];
    oly_aval_format(buf, sizeof buf, a);
    oly__sb_puts(sb, buf);
}

bool oly__param_print_field(const oly_param_field *f, const void *params, oly_strbuf *sb)
{
    if (f->hidden) return false;
    oly__sb_printf(sb, "%s=", f->name);
    switch (f->kind) {
    case OLY_FIELD_INT: oly__sb_printf(sb, "%lld", (long long)*CFIELD(params, f, int64_t)); break;
    case OLY_FIELD_BOOL: oly__sb_puts(sb, *CFIELD(params, f, bool) ? "True" : "False"); break;
    case OLY_FIELD_FLOAT: {
        char buf[64];
        oly__format_float(buf, sizeof buf, *CFIELD(params, f, double), false);
        oly__sb_puts(sb, buf);
        break;
    }
    case OLY_FIELD_DTYPE: {
        oly_dtype t = *CFIELD(params, f, oly_dtype);
        if ((unsigned)t < OLY_DTYPE_COUNT)
            oly__sb_puts(sb, oly_dtype_name(t));
        else
            oly__sb_printf(sb, "<dtype %d>", (int)t);
        break;
    }
    case OLY_FIELD_INTS: {
        const oly_ints *v = CFIELD(params, f, oly_ints);
        int n = v->n < 0 ? 0 : v->n > OLY_MAX_RANK ? OLY_MAX_RANK : v->n;
        oly__sb_puts(sb, "(");
        for (int j = 0; j < n; j++) oly__sb_printf(sb, "%s%lld", j ? ", " : "", (long long)v->v[j]);
        oly__sb_puts(sb, n == 1 ? ",)" : ")");
        break;
    }
    case OLY_FIELD_ENUM: {
        int e = *CFIELD(params, f, int);
        int count = 0;
        if (f->enum_names)
            while (f->enum_names[count]) count++;
        if (e >= 0 && e < count)
            oly__sb_puts(sb, f->enum_names[e]);
        else
            oly__sb_printf(sb, "%d", e);
        break;
    }
    case OLY_FIELD_STR: {
        const char *s = *CFIELD(params, f, const char *);
        oly__sb_puts(sb, s ? s : "None");
        break;
    }
    case OLY_FIELD_AVALS: {
        const oly_aval *a = *CFIELD(params, f, const oly_aval *);
        int n = a ? avals_count(params, f) : 0;
        oly__sb_puts(sb, "(");
        for (int j = 0; j < n; j++) {
            if (j) oly__sb_puts(sb, ", ");
            print_aval(sb, &a[j]);
        }
        oly__sb_puts(sb, n == 1 ? ",)" : ")");
        break;
    }
    case OLY_FIELD_ALIASES: { /* input -> output pairs, as a tuple of pairs */
        const oly_io_alias *a = *CFIELD(params, f, const oly_io_alias *);
        int n = a ? avals_count(params, f) : 0;
        oly__sb_puts(sb, "(");
        for (int j = 0; j < n; j++)
            oly__sb_printf(sb, "%s(%d, %d)", j ? ", " : "", a[j].input, a[j].output);
        oly__sb_puts(sb, n == 1 ? ",)" : ")");
        break;
    }
    case OLY_FIELD_HOST_FN: {
        const oly_host_fn *h = *CFIELD(params, f, oly_host_fn *);
        oly__sb_puts(sb, h ? oly_host_fn_name(h) : "None");
        break;
    }
    case OLY_FIELD_THUNK: {
        const oly_thunk *t = *CFIELD(params, f, oly_thunk *);
        oly__sb_puts(sb, t ? oly_thunk_name(t) : "None");
        break;
    }
    default: oly__sb_puts(sb, "?"); break;
    }
    return true;
}

void oly__params_print(const oly_prim *p, const void *params, oly_strbuf *sb)
{
    if (!p || !params) return;
    bool first = true;
    for (int i = 0; i < p->n_fields; i++) {
        if (p->fields[i].hidden) continue;
        if (!first) oly__sb_puts(sb, " ");
        first = false;
        oly__param_print_field(&p->fields[i], params, sb);
    }
}

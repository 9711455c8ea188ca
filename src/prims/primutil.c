/* primutil.c — helpers shared by the primitive families: bounded texts for
 * error messages (an aval, an int list), the int-list length check and axis
 * normalisation. */
#include "internal.h"

oly_text oly__show_aval(const oly_aval *a)
{
    oly_text t;
    oly_aval_format(t.s, sizeof t.s, a); /* truncates; always terminated */
    return t;
}

oly_text oly__show_ints(const oly_ints *v)
{
    oly_text t;
    static const char ellipsis[] = ", ...)";
    size_t cap = sizeof t.s - sizeof ellipsis; /* room kept for the ellipsis */
    size_t len = 0;
    t.s[len++] = '(';
    int n = v->n < 0 ? 0 : (v->n > OLY_MAX_RANK ? OLY_MAX_RANK : v->n);
    for (int i = 0; i < n; i++) {
        char item[32];
        int w = snprintf(item, sizeof item, "%s%lld", i ? ", " : "", (long long)v->v[i]);
        if (w < 0 || len + (size_t)w + 1 > cap) { /* +1: the closing parenthesis */
            memcpy(t.s + len, ellipsis, sizeof ellipsis);
            return t;
        }
        memcpy(t.s + len, item, (size_t)w);
        len += (size_t)w;
    }
    if (v->n > n) {
        memcpy(t.s + len, ellipsis, sizeof ellipsis);
        return t;
    }
    t.s[len++] = ')';
    t.s[len] = '\0';
    return t;
}

oly_status oly__check_ints(const char *who, const char *field, const oly_ints *v)
{
    if (v->n < 0 || v->n > OLY_MAX_RANK)
        return oly__error(OLY_ERR_INVALID, "%s: %s must have 0..%d entries, got %d", who, field,
                          OLY_MAX_RANK, v->n);
    return OLY_OK;
}

oly_status oly__norm_axis(const char *who, const char *what, int64_t axis, int rank,
                          int64_t *out)
{
    if (axis < -rank || axis >= rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: %s %lld is out of range for rank %d (expected -%d <= axis < %d)",
                          who, what, (long long)axis, rank, rank, rank);
    *out = axis < 0 ? axis + rank : axis;
    return OLY_OK;
}

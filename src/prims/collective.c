/* collective.c — the collectives of JAX's lax.parallel as rows: psum, pmax,
 * pmin, all_gather, reduce_scatter (lax.psum_scatter), ppermute, all_to_all
 * and axis_index. A collective means something only against the named axis it
 * acts over; today the only binder of names is vmap (oly_program_vmap_named),
 * whose driver hands a collective naming the batched axis to the row's batch
 * rule, which rewrites it into ordinary array operations over the batch
 * (psum: a reduce_sum over the batch dim, the result unbatched; axis_index:
 * an iota). A collective naming another axis is batched like any operation
 * (the same collective on the batched value, its dims shifted) and stays for
 * the enclosing vmap that binds its name. One surviving to execution has an
 * unbound name: its CPU kernel (src/cpu/collective.c) fails.
 *
 * Axis names travel as the tuple text of Python strings, "('i',)" (see
 * olympus.h), parsed here; that is also how the params print. Derivatives
 * follow JAX: psum, all_gather, reduce_scatter, ppermute and all_to_all are
 * linear (their JVP applies them to the tangents) and transpose to psum,
 * reduce_scatter, all_gather, the inverse ppermute and the swapped
 * all_to_all; pmax and pmin have no JVP, as in JAX. */
#include "internal.h"
#include "trans/trans.h"

#include <ctype.h>

/* ---------------------------------------------------------------- axis names */

#define MAX_NAMES 16

typedef struct names {
    int n;
    const char *s[MAX_NAMES]; /* borrowed from the text, not terminated */
    int len[MAX_NAMES];
} names;

static const char *skip_space(const char *t)
{
    while (*t == ' ') t++;
    return t;
}

/* Parses "('a', 'b')" / "('a',)" into nm; false when t is not such a text
 * (empty tuples and names with a quote or backslash included). */
static bool parse_names(const char *t, names *nm)
{
    nm->n = 0;
    if (!t || *t != '(') return false;
    t = skip_space(t + 1);
    for (;;) {
        if (*t != '\'' || nm->n == MAX_NAMES) return false;
        const char *start = ++t;
        while (*t && *t != '\'' && *t != '\\') t++;
        if (*t != '\'' || t == start) return false;
        nm->s[nm->n] = start;
        nm->len[nm->n++] = (int)(t - start);
        t = skip_space(t + 1);
        if (*t == ')') return nm->n > 1 && t[1] == '\0'; /* ('a') is no tuple */
        if (*t != ',') return false;
        t = skip_space(t + 1);
        if (*t == ')') return nm->n == 1 && t[1] == '\0';
    }
}

int oly__axis_names(const char *t, const char **s, int *len, int max)
{
    names nm;
    if (!parse_names(t, &nm)) return -1;
    for (int k = 0; k < nm.n && k < max; k++) {
        s[k] = nm.s[k];
        len[k] = nm.len[k];
    }
    return nm.n;
}

static bool names_has(const names *nm, const char *name)
{
    size_t len = strlen(name);
    for (int k = 0; k < nm->n; k++)
        if ((size_t)nm->len[k] == len && memcmp(nm->s[k], name, len) == 0) return true;
    return false;
}

/* nm's tuple text without `skip` (NULL: none) into buf; the names fit since
 * they came from a text at most that long. */
static void names_text(const names *nm, const char *skip, char *buf, size_t n)
{
    size_t len = 0, sl = skip ? strlen(skip) : 0;
    int kept = 0;
    len += (size_t)snprintf(buf + len, n - len, "(");
    for (int k = 0; k < nm->n && len < n; k++) {
        if (skip && (size_t)nm->len[k] == sl && memcmp(nm->s[k], skip, sl) == 0) continue;
        len += (size_t)snprintf(buf + len, n - len, "%s'%.*s'", kept ? ", " : "", nm->len[k],
                                nm->s[k]);
        kept++;
    }
    if (len < n) snprintf(buf + len, n - len, kept == 1 ? ",)" : ")");
}

/* The names in field `field` of a row, checked: one or more, exactly one when
 * `one`. */
static oly_status get_names(const char *who, const char *field, const char *t, bool one, names *nm)
{
    if (!parse_names(t, nm))
        return oly__error(OLY_ERR_INVALID,
                          "%s: %s must be the tuple text of axis names such as ('i',), got %s",
                          who, field, t ? t : "NULL");
    if (one && nm->n != 1)
        return oly__error(OLY_ERR_INVALID, "%s: %s must name one axis, got %s", who, field, t);
    return OLY_OK;
}

/* The batch being built is over an axis these params name. */
static bool batching_named(const oly_batch_ctx *ctx, const char *t)
{
    names nm;
    return ctx->axis_name && parse_names(t, &nm) && names_has(&nm, ctx->axis_name);
}

static bool text_names(const char *t, const char *name)
{
    names nm;
    return parse_names(t, &nm) && names_has(&nm, name);
}

/* A collective batched over its own axis must agree with the batch on its size. */
static oly_status check_size(const oly_batch_ctx *ctx, const char *who, const char *t,
                             int64_t axis_size)
{
    if (axis_size == ctx->size) return OLY_OK;
    return oly__error(OLY_ERR_SHAPE,
                      "%s: the program was traced with axis %s of size %lld, but vmap binds it "
                      "with size %lld (a jitted function traced under another vmap is reused: "
                      "trace it again under this one)",
                      who, t, (long long)axis_size, (long long)ctx->size);
}

/* ---------------------------------------------------------------- small emitters */

static oly_status emit_reshape_to(oly_builder *b, oly_atom x, int rank, const int64_t *dims,
                                  oly_atom *out)
{
    oly_ints s = oly__ints(rank, dims);
    return oly__emit_reshape(b, x, &s, out);
}

/* x with dim `axis` (divisible by k) split into (k, dims[axis] / k). */
static oly_status split_axis(oly_builder *b, oly_atom x, int axis, int64_t k, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    int64_t d[OLY_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a.rank; i++) {
        if (i == axis) {
            d[r++] = k;
            d[r++] = a.dims[i] / k;
        } else {
            d[r++] = a.dims[i];
        }
    }
    return emit_reshape_to(b, x, r, d, out);
}

/* x with dims axis and axis + 1 merged into one. */
static oly_status fold_axis(oly_builder *b, oly_atom x, int axis, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    int64_t d[OLY_MAX_RANK];
    int r = 0;
    for (int i = 0; i < a.rank; i++) {
        if (i == axis + 1) continue;
        d[r++] = i == axis ? a.dims[i] * a.dims[i + 1] : a.dims[i];
    }
    return emit_reshape_to(b, x, r, d, out);
}

static oly_status emit_swap(oly_builder *b, oly_atom x, int i, int j, oly_atom *out)
{
    if (i == j) {
        *out = x;
        return OLY_OK;
    }
    oly_aval a = oly__atom_aval(&x);
    oly_ints perm = oly__ints_range(a.rank);
    perm.v[i] = j;
    perm.v[j] = i;
    return oly__emit_transpose(b, x, &perm, out);
}

/* ---------------------------------------------------------------- psum, pmax, pmin */

typedef enum { RED_SUM, RED_MAX, RED_MIN } red_op;

static int same_count(const void *params, int n_in) { return n_in; }

static oly_status reduction_shape(const oly_shape_ctx *ctx, oly_aval *out, red_op op)
{
    const char *who = ctx->prim->name;
    const oly_params_psum *p = ctx->params;
    names nm;
    if (!p) return oly__error(OLY_ERR_INVALID, "%s: params are NULL", who);
    OLY_TRY(get_names(who, "axes", p->axes, false, &nm));
    if (ctx->n_in < 1) return oly__error(OLY_ERR_INVALID, "%s: expected 1 or more operands", who);
    for (int i = 0; i < ctx->n_in; i++) {
        oly_dtype t = ctx->in[i].dtype;
        bool ok = op == RED_SUM ? oly_dtype_is_int(t) || oly_dtype_is_inexact(t)
                                : !oly_dtype_is_complex(t);
        if (!ok)
            return oly__error(OLY_ERR_TYPE, "%s: operand %d must have %s, got %s", who, i,
                              op == RED_SUM ? "a numeric dtype (not bool: psum converts bool "
                                              "to int32 first)"
                                            : "a bool, integer or float dtype",
                              oly__show_aval(&ctx->in[i]).s);
        out[i] = ctx->in[i];
    }
    return OLY_OK;
}

static oly_status psum_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    return reduction_shape(ctx, out, RED_SUM);
}
static oly_status pmax_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    return reduction_shape(ctx, out, RED_MAX);
}
static oly_status pmin_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    return reduction_shape(ctx, out, RED_MIN);
}

static bool psum_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_psum *)params)->axes, name);
}

/* Over the batched axis: each mapped operand reduced over its batch dim, each
 * unmapped one the reduction of `size` equal copies (size * x for psum, x for
 * pmax / pmin); what other axes the equation names is reduced over by the same
 * row, left for the vmaps that bind them. The results do not vary along the
 * batch (JAX's _batched_reduction_collective). */
static oly_status reduction_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                  const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_psum *p = eqn->params;
    int n = eqn->n_in;
    if (!batching_named(ctx, p->axes)) {
        OLY_TRY(oly__emit_eqn(ctx->b, eqn, in, out));
        for (int j = 0; j < n; j++) out_bdim[j] = in_bdim[j];
        return OLY_OK;
    }
    const oly_prim *reduce = eqn->prim == &oly__prim_psum   ? &oly__prim_reduce_sum
                             : eqn->prim == &oly__prim_pmax ? &oly__prim_reduce_max
                                                            : &oly__prim_reduce_min;
    oly_atom *y = oly__calloc((size_t)n, sizeof *y);
    if (!y) return OLY_ERR_NOMEM;
    oly_status s = OLY_OK;
    for (int i = 0; i < n && s == OLY_OK; i++) {
        if (in_bdim[i] != OLY_NOT_MAPPED) {
            oly_params_reduce q = {.axes = {.n = 1, .v = {in_bdim[i]}}};
            s = oly__emit_1(ctx->b, reduce, in[i], &q, &y[i]);
        } else if (eqn->prim == &oly__prim_psum) {
            oly_aval a = oly__atom_aval(&in[i]), scalar = {.dtype = a.dtype, .weak = a.weak};
            oly_atom k;
            s = oly__emit_full(ctx->b, &scalar, (double)ctx->size, &k);
            if (s == OLY_OK) s = oly__emit_bin(ctx->b, &oly__prim_mul, in[i], k, &y[i]);
        } else {
            y[i] = in[i];
        }
        out_bdim[i] = OLY_NOT_MAPPED;
    }
    names nm;
    if (s == OLY_OK) s = get_names(eqn->prim->name, "axes", p->axes, false, &nm);
    if (s == OLY_OK && nm.n > 1) {
        size_t cap = strlen(p->axes) + 1;
        char *rest = oly__malloc(cap);
        s = rest ? OLY_OK : OLY_ERR_NOMEM;
        if (s == OLY_OK) {
            names_text(&nm, ctx->axis_name, rest, cap);
            oly_params_psum q = {.axes = rest};
            s = oly__emit(ctx->b, eqn->prim, y, n, &q, NULL, 0, out);
        }
        free(rest);
    } else {
        for (int i = 0; i < n && s == OLY_OK; i++) out[i] = y[i];
    }
    free(y);
    return s;
}

/* psum is linear: the psum of the nonzero tangents (one equation). */
static oly_status psum_jvp(oly_jvp_ctx *ctx, const oly_eqn *eqn, const oly_atom *primal,
                           const oly_atom *tangent, const bool *tan_nz, oly_atom *primal_out,
                           oly_atom *tangent_out, bool *out_nz)
{
    int n = eqn->n_in, k = 0;
    OLY_TRY(oly__emit_eqn(ctx->b, eqn, primal, primal_out));
    oly_atom *t = oly__calloc((size_t)n, sizeof *t);
    if (!t) return OLY_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        out_nz[i] = tan_nz[i];
        if (tan_nz[i]) t[k++] = tangent[i];
    }
    oly_status s = k ? oly__emit(ctx->b, eqn->prim, t, k, eqn->params, NULL, 0, t) : OLY_OK;
    for (int i = 0, j = 0; i < n && s == OLY_OK; i++)
        if (tan_nz[i]) tangent_out[i] = t[j++];
    free(t);
    return s;
}

/* JAX reads psum as psum followed by pbroadcast, so its transpose sums the
 * cotangents over the named axes again. */
static oly_status psum_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const bool *linear, const oly_atom *ct, const bool *ct_nz,
                                 oly_atom *ct_in, bool *ct_in_nz)
{
    int n = eqn->n_in, k = 0;
    oly_atom *t = oly__calloc((size_t)n, sizeof *t);
    if (!t) return OLY_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        ct_in_nz[i] = linear[i] && ct_nz[i];
        if (ct_in_nz[i]) t[k++] = ct[i];
    }
    oly_status s = k ? oly__emit(ctx->b, eqn->prim, t, k, eqn->params, NULL, 0, t) : OLY_OK;
    for (int i = 0, j = 0; i < n && s == OLY_OK; i++)
        if (ct_in_nz[i]) ct_in[i] = t[j++];
    free(t);
    return s;
}

/* ---------------------------------------------------------------- all_gather */

static oly_status all_gather_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_all_gather *p = ctx->params;
    names nm;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "all_gather: expected 1 operand, got %d", ctx->n_in);
    OLY_TRY(get_names("all_gather", "axis_name", p->axis_name, true, &nm));
    const oly_aval *x = &ctx->in[0];
    if (p->axis_size < 0)
        return oly__error(OLY_ERR_INVALID, "all_gather: axis_size must be >= 0, got %lld",
                          (long long)p->axis_size);
    int64_t d = p->all_gather_dimension, hi = p->tiled ? x->rank - 1 : x->rank;
    if (d < 0 || d > hi)
        return oly__error(OLY_ERR_INVALID,
                          "all_gather: all_gather_dimension %lld is outside [0, %lld] for %s "
                          "(tiled=%s)",
                          (long long)d, (long long)hi, oly__show_aval(x).s,
                          p->tiled ? "True" : "False");
    if (!p->tiled && x->rank >= OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "all_gather: %s has the largest rank already",
                          oly__show_aval(x).s);
    *out = *x;
    if (p->tiled) {
        out->dims[d] *= p->axis_size;
    } else {
        out->rank = x->rank + 1;
        for (int i = 0, k = 0; i < out->rank; i++)
            out->dims[i] = i == d ? p->axis_size : x->dims[k++];
    }
    return oly__dims_check("all_gather", out->rank, out->dims);
}

static bool all_gather_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_all_gather *)params)->axis_name, name);
}

/* Over its axis: the batch dim moved to all_gather_dimension (folded into it
 * when tiled), an unbatched operand broadcast there; the result does not vary. */
static oly_status all_gather_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_all_gather *p = eqn->params;
    int d = in_bdim[0], dim = (int)p->all_gather_dimension;
    if (!batching_named(ctx, p->axis_name)) {
        oly_params_all_gather q = *p;
        if (d <= dim)
            q.all_gather_dimension++;
        else if (!p->tiled)
            d++;
        OLY_TRY(oly__emit_1(ctx->b, eqn->prim, in[0], &q, out));
        out_bdim[0] = d;
        return OLY_OK;
    }
    OLY_TRY(check_size(ctx, "all_gather", p->axis_name, p->axis_size));
    oly_atom y;
    OLY_TRY(oly__batch_move(ctx, in[0], d, dim, &y));
    if (p->tiled) OLY_TRY(fold_axis(ctx->b, y, dim, &y));
    out[0] = y;
    out_bdim[0] = OLY_NOT_MAPPED;
    return OLY_OK;
}

static oly_status all_gather_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *in, const bool *linear, const oly_atom *ct,
                                       const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_all_gather *p = eqn->params;
    ct_in_nz[0] = ct_nz[0];
    if (!ct_nz[0]) return OLY_OK;
    oly_params_reduce_scatter q = {.axis_name = p->axis_name, .axis_size = p->axis_size,
                                   .scatter_dimension = p->all_gather_dimension,
                                   .tiled = p->tiled};
    return oly__emit_1(ctx->b, &oly__prim_reduce_scatter, ct[0], &q, &ct_in[0]);
}

/* ---------------------------------------------------------------- reduce_scatter */

static oly_status reduce_scatter_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_reduce_scatter *p = ctx->params;
    names nm;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "reduce_scatter: expected 1 operand, got %d",
                          ctx->n_in);
    OLY_TRY(get_names("reduce_scatter", "axis_name", p->axis_name, true, &nm));
    const oly_aval *x = &ctx->in[0];
    if (!oly_dtype_is_int(x->dtype) && !oly_dtype_is_inexact(x->dtype))
        return oly__error(OLY_ERR_TYPE, "reduce_scatter: operand must have a numeric dtype, got %s",
                          oly__show_aval(x).s);
    int64_t d = p->scatter_dimension;
    if (d < 0 || d >= x->rank)
        return oly__error(OLY_ERR_INVALID,
                          "reduce_scatter: scatter_dimension %lld is outside [0, %d) for %s",
                          (long long)d, x->rank, oly__show_aval(x).s);
    int64_t n = p->axis_size, size = x->dims[d];
    if (p->tiled ? n < 1 || size % n != 0 : size != n)
        return oly__error(OLY_ERR_SHAPE,
                          "reduce_scatter: scatter dimension %lld of %s has size %lld, which %s "
                          "the axis size %lld",
                          (long long)d, oly__show_aval(x).s, (long long)size,
                          p->tiled ? "must be divisible by" : "must equal", (long long)n);
    *out = *x;
    if (p->tiled) {
        out->dims[d] = size / n;
    } else {
        out->rank = x->rank - 1;
        for (int i = (int)d; i < out->rank; i++) out->dims[i] = x->dims[i + 1];
    }
    return OLY_OK;
}

static bool reduce_scatter_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_reduce_scatter *)params)->axis_name, name);
}

/* Over its axis: the sum over the batch dim (size * x unbatched), whose
 * scatter dimension (split in axis_size blocks when tiled) becomes the batch. */
static oly_status reduce_scatter_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                       const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_reduce_scatter *p = eqn->params;
    int d = in_bdim[0], sd = (int)p->scatter_dimension;
    if (!batching_named(ctx, p->axis_name)) {
        oly_params_reduce_scatter q = *p;
        if (d <= sd)
            q.scatter_dimension++;
        else if (!p->tiled)
            d--; /* the scatter dimension before it goes */
        OLY_TRY(oly__emit_1(ctx->b, eqn->prim, in[0], &q, out));
        out_bdim[0] = d;
        return OLY_OK;
    }
    OLY_TRY(check_size(ctx, "reduce_scatter", p->axis_name, p->axis_size));
    oly_atom y;
    if (d != OLY_NOT_MAPPED) {
        oly_ints axes = {.n = 1, .v = {d}};
        OLY_TRY(oly__emit_reduce_sum(ctx->b, in[0], &axes, &y));
    } else {
        oly_aval a = oly__atom_aval(&in[0]), scalar = {.dtype = a.dtype, .weak = a.weak};
        oly_atom k;
        OLY_TRY(oly__emit_full(ctx->b, &scalar, (double)ctx->size, &k));
        OLY_TRY(oly__emit_bin(ctx->b, &oly__prim_mul, in[0], k, &y));
    }
    if (p->tiled) OLY_TRY(split_axis(ctx->b, y, sd, ctx->size, &y));
    out[0] = y;
    out_bdim[0] = sd;
    return OLY_OK;
}

static oly_status reduce_scatter_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                           const oly_atom *in, const bool *linear,
                                           const oly_atom *ct, const bool *ct_nz,
                                           oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_reduce_scatter *p = eqn->params;
    ct_in_nz[0] = ct_nz[0];
    if (!ct_nz[0]) return OLY_OK;
    oly_params_all_gather q = {.all_gather_dimension = p->scatter_dimension,
                               .axis_name = p->axis_name, .axis_size = p->axis_size,
                               .tiled = p->tiled};
    return oly__emit_1(ctx->b, &oly__prim_all_gather, ct[0], &q, &ct_in[0]);
}

/* ---------------------------------------------------------------- ppermute */

/* perm's pairs, parsed from "((s, d), ...)" into src/dst (n_max entries);
 * returns the pair count, or -1 when the text is malformed. */
static int parse_perm(const char *t, int64_t *src, int64_t *dst, int n_max)
{
    if (!t || *t != '(') return -1;
    const char *c = skip_space(t + 1);
    int n = 0;
    while (*c == '(') {
        int64_t v[2];
        c++;
        for (int k = 0; k < 2; k++) {
            c = skip_space(c);
            if (!isdigit((unsigned char)*c)) return -1;
            char *end;
            long long x = strtoll(c, &end, 10);
            if (x < 0 || x > (1ll << 40)) return -1;
            v[k] = x;
            c = skip_space(end);
            if (*c != (k == 0 ? ',' : ')')) return -1;
            c++;
        }
        if (n < n_max) {
            src[n] = v[0];
            dst[n] = v[1];
        }
        n++;
        c = skip_space(c);
        if (*c == ',') c = skip_space(c + 1);
    }
    if (*c != ')' || c[1] != '\0') return -1;
    return n;
}

/* The pairs of p->perm, checked (sources distinct, destinations distinct);
 * *src / *dst are owned by the caller (free). */
static oly_status get_perm(const oly_params_ppermute *p, int64_t **src, int64_t **dst, int *n)
{
    int count = parse_perm(p->perm, NULL, NULL, 0);
    if (count < 0)
        return oly__error(OLY_ERR_INVALID,
                          "ppermute: perm must be the tuple text of (source, destination) "
                          "pairs of non-negative ints such as ((0, 1), (1, 0)), got %s",
                          p->perm ? p->perm : "NULL");
    *src = oly__calloc((size_t)count + 1, sizeof **src);
    *dst = oly__calloc((size_t)count + 1, sizeof **dst);
    if (!*src || !*dst) {
        free(*src);
        free(*dst);
        return OLY_ERR_NOMEM;
    }
    parse_perm(p->perm, *src, *dst, count);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < i; j++)
            if ((*src)[i] == (*src)[j] || (*dst)[i] == (*dst)[j]) {
                free(*src);
                free(*dst);
                return oly__error(OLY_ERR_INVALID,
                                  "ppermute sources and destinations must be unique, got %s",
                                  p->perm);
            }
    *n = count;
    return OLY_OK;
}

static oly_status ppermute_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_ppermute *p = ctx->params;
    names nm;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "ppermute: expected 1 operand, got %d", ctx->n_in);
    OLY_TRY(get_names("ppermute", "axis_name", p->axis_name, true, &nm));
    int64_t *src = NULL, *dst = NULL;
    int n = 0;
    OLY_TRY(get_perm(p, &src, &dst, &n));
    free(src);
    free(dst);
    *out = ctx->in[0];
    return OLY_OK;
}

static bool ppermute_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_ppermute *)params)->axis_name, name);
}

/* x's rows (along axis 0, of size n) taken by index: row d of the result is
 * row from[d] of x, or zeros when from[d] == n (one gather, fill_or_drop). */
static oly_status take_rows(oly_builder *b, oly_atom x, const int32_t *from, int64_t n,
                            oly_atom *out)
{
    oly_aval xa = oly__atom_aval(&x), ia;
    int64_t idims[2] = {n, 1};
    OLY_TRY(oly_aval_make(OLY_INT32, 2, idims, &ia));
    oly_array *arr = NULL;
    oly_var *iv = NULL;
    OLY_TRY(oly_array_from_data(&ia, from, &arr));
    oly_status s = oly_builder_add_const(b, arr, &iv);
    oly_array_release(arr);
    if (s != OLY_OK) return s;
    oly_params_gather g;
    memset(&g, 0, sizeof g);
    g.offset_dims.n = xa.rank - 1;
    for (int i = 1; i < xa.rank; i++) g.offset_dims.v[i - 1] = i;
    g.collapsed_slice_dims = (oly_ints){.n = 1, .v = {0}};
    g.start_index_map = (oly_ints){.n = 1, .v = {0}};
    g.slice_sizes = oly__ints(xa.rank, xa.dims);
    g.slice_sizes.v[0] = 1;
    g.mode = OLY_GATHER_FILL_OR_DROP;
    g.fill_value = 0.0;
    oly_atom args[2] = {x, oly_atom_var(iv)};
    return oly__emit(b, &oly__prim_gather, args, 2, &g, NULL, 0, out);
}

/* Over its axis: index d of the result is index s of the operand for each
 * pair (s, d), zeros where no pair sends; an unbatched operand that every
 * index receives stays unbatched. */
static oly_status ppermute_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                 const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_ppermute *p = eqn->params;
    if (!batching_named(ctx, p->axis_name)) {
        OLY_TRY(oly__emit_eqn(ctx->b, eqn, in, out));
        out_bdim[0] = in_bdim[0];
        return OLY_OK;
    }
    int64_t *src = NULL, *dst = NULL, n = ctx->size;
    int np = 0;
    OLY_TRY(get_perm(p, &src, &dst, &np));
    int32_t *from = n <= INT32_MAX ? oly__calloc((size_t)n + 1, sizeof *from) : NULL;
    oly_status s = from ? OLY_OK : OLY_ERR_NOMEM;
    for (int64_t d = 0; d < n && s == OLY_OK; d++) from[d] = (int32_t)n; /* none: zeros */
    bool identity = true;
    for (int k = 0; k < np && s == OLY_OK; k++) {
        if (src[k] >= n || dst[k] >= n)
            s = oly__error(OLY_ERR_INVALID,
                           "ppermute: perm %s names an index outside the axis %s of size %lld",
                           p->perm, p->axis_name, (long long)n);
        else
            from[dst[k]] = (int32_t)src[k];
    }
    for (int64_t d = 0; d < n && s == OLY_OK; d++) identity = identity && from[d] == d;
    if (s == OLY_OK && identity) { /* every index keeps its own value */
        out[0] = in[0];
        out_bdim[0] = in_bdim[0];
    } else if (s == OLY_OK && in_bdim[0] == OLY_NOT_MAPPED && np == n) {
        out[0] = in[0]; /* every index receives the one value */
        out_bdim[0] = OLY_NOT_MAPPED;
    } else if (s == OLY_OK) {
        oly_atom x;
        s = oly__batch_move(ctx, in[0], in_bdim[0], 0, &x);
        if (s == OLY_OK) s = take_rows(ctx->b, x, from, n, &out[0]);
        out_bdim[0] = 0;
    }
    free(from);
    free(src);
    free(dst);
    return s;
}

static oly_status ppermute_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                     const oly_atom *in, const bool *linear, const oly_atom *ct,
                                     const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_ppermute *p = eqn->params;
    ct_in_nz[0] = ct_nz[0];
    if (!ct_nz[0]) return OLY_OK;
    int64_t *src = NULL, *dst = NULL;
    int np = 0;
    OLY_TRY(get_perm(p, &src, &dst, &np));
    oly_strbuf sb = {0};
    oly__sb_puts(&sb, "(");
    for (int k = 0; k < np; k++)
        oly__sb_printf(&sb, "%s(%lld, %lld)", k ? ", " : "", (long long)dst[k], (long long)src[k]);
    oly__sb_puts(&sb, np == 1 ? ",)" : ")");
    oly_status s = sb.failed || !sb.data ? OLY_ERR_NOMEM : OLY_OK;
    if (s == OLY_OK) {
        oly_params_ppermute q = {.axis_name = p->axis_name, .perm = sb.data};
        s = oly__emit_1(ctx->b, &oly__prim_ppermute, ct[0], &q, &ct_in[0]);
    }
    free(sb.data);
    free(src);
    free(dst);
    return s;
}

/* ---------------------------------------------------------------- all_to_all */

static oly_status all_to_all_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_all_to_all *p = ctx->params;
    names nm;
    if (ctx->n_in != 1)
        return oly__error(OLY_ERR_INVALID, "all_to_all: expected 1 operand, got %d", ctx->n_in);
    OLY_TRY(get_names("all_to_all", "axis_name", p->axis_name, true, &nm));
    const oly_aval *x = &ctx->in[0];
    int64_t s = p->split_axis, c = p->concat_axis, n = p->axis_size;
    if (s < 0 || s >= x->rank || c < 0 || c >= x->rank)
        return oly__error(OLY_ERR_INVALID,
                          "all_to_all: split_axis %lld and concat_axis %lld must be in [0, %d) "
                          "for %s",
                          (long long)s, (long long)c, x->rank, oly__show_aval(x).s);
    if (n < 1 || x->dims[s] % n != 0)
        return oly__error(OLY_ERR_SHAPE,
                          "all_to_all: split_axis %lld of %s has size %lld, not divisible by the "
                          "axis size %lld",
                          (long long)s, oly__show_aval(x).s, (long long)x->dims[s], (long long)n);
    *out = *x;
    out->weak = false;
    out->dims[s] /= n;
    out->dims[c] *= n;
    return oly__dims_check("all_to_all", out->rank, out->dims);
}

static bool all_to_all_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_all_to_all *)params)->axis_name, name);
}

/* Over its axis (JAX's _all_to_all_batched_collective, one name): the batch
 * dim (the source index) is concatenated into concat_axis and split_axis cut
 * into axis_size blocks whose index (the destination) becomes the batch. */
static oly_status all_to_all_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_all_to_all *p = eqn->params;
    int d = in_bdim[0], split = (int)p->split_axis, concat = (int)p->concat_axis;
    if (!batching_named(ctx, p->axis_name)) {
        oly_params_all_to_all q = *p;
        q.split_axis += d <= split;
        q.concat_axis += d <= concat;
        OLY_TRY(oly__emit_1(ctx->b, eqn->prim, in[0], &q, out));
        out_bdim[0] = d;
        return OLY_OK;
    }
    OLY_TRY(check_size(ctx, "all_to_all", p->axis_name, p->axis_size));
    oly_builder *b = ctx->b;
    oly_atom x = in[0];
    if (d == OLY_NOT_MAPPED) {
        OLY_TRY(oly__batch_move(ctx, x, d, 0, &x));
        d = 0;
    }
    if (split == concat) {
        int axis = split + (d <= split), d0 = d;
        OLY_TRY(split_axis(b, x, axis, ctx->size, &x));
        d += axis <= d;
        OLY_TRY(emit_swap(b, x, d, axis, &x));
        OLY_TRY(fold_axis(b, x, axis, &out[0]));
        out_bdim[0] = d0;
        return OLY_OK;
    }
    OLY_TRY(oly__emit_moveaxis(b, x, d, concat, &x));
    OLY_TRY(fold_axis(b, x, concat, &x));
    OLY_TRY(split_axis(b, x, split, ctx->size, &out[0]));
    out_bdim[0] = split;
    return OLY_OK;
}

static oly_status all_to_all_transpose(oly_transpose_ctx *ctx, const oly_eqn *eqn,
                                       const oly_atom *in, const bool *linear, const oly_atom *ct,
                                       const bool *ct_nz, oly_atom *ct_in, bool *ct_in_nz)
{
    const oly_params_all_to_all *p = eqn->params;
    ct_in_nz[0] = ct_nz[0];
    if (!ct_nz[0]) return OLY_OK;
    oly_params_all_to_all q = *p;
    q.split_axis = p->concat_axis;
    q.concat_axis = p->split_axis;
    return oly__emit_1(ctx->b, &oly__prim_all_to_all, ct[0], &q, &ct_in[0]);
}

/* ---------------------------------------------------------------- axis_index */

static oly_status axis_index_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    const oly_params_axis_index *p = ctx->params;
    names nm;
    if (ctx->n_in != 0)
        return oly__error(OLY_ERR_INVALID, "axis_index: expected no operands, got %d", ctx->n_in);
    OLY_TRY(get_names("axis_index", "axis_name", p->axis_name, true, &nm));
    memset(out, 0, sizeof *out);
    out->dtype = OLY_INT32;
    return OLY_OK;
}

static bool axis_index_names_axis(const void *params, const char *name)
{
    return text_names(((const oly_params_axis_index *)params)->axis_name, name);
}

/* The positions along the batch: iota. (No operand, so the driver asks only
 * when the batch is over this row's axis.) */
static oly_status axis_index_batch(oly_batch_ctx *ctx, const oly_eqn *eqn, const oly_atom *in,
                                   const int *in_bdim, oly_atom *out, int *out_bdim)
{
    const oly_params_axis_index *p = eqn->params;
    if (!batching_named(ctx, p->axis_name)) {
        OLY_TRY(oly__emit_eqn(ctx->b, eqn, in, out));
        out_bdim[0] = OLY_NOT_MAPPED;
        return OLY_OK;
    }
    if (ctx->size > INT32_MAX)
        return oly__error(OLY_ERR_SHAPE, "axis_index: axis %s of size %lld overflows int32",
                          p->axis_name, (long long)ctx->size);
    oly_params_iota q = {.dtype = OLY_INT32, .shape = {.n = 1, .v = {ctx->size}}, .dimension = 0};
    OLY_TRY(oly__emit(ctx->b, &oly__prim_iota, NULL, 0, &q, NULL, 0, out));
    out_bdim[0] = 0;
    return OLY_OK;
}

/* ---------------------------------------------------------------- rows */

static const oly_param_field psum_fields[] = {
    OLY_FIELD(oly_params_psum, axes, OLY_FIELD_STR),
};
static const oly_param_field all_gather_fields[] = {
    OLY_FIELD(oly_params_all_gather, all_gather_dimension, OLY_FIELD_INT),
    OLY_FIELD(oly_params_all_gather, axis_name, OLY_FIELD_STR),
    OLY_FIELD(oly_params_all_gather, axis_size, OLY_FIELD_INT),
    OLY_FIELD(oly_params_all_gather, tiled, OLY_FIELD_BOOL),
};
static const oly_param_field reduce_scatter_fields[] = {
    OLY_FIELD(oly_params_reduce_scatter, axis_name, OLY_FIELD_STR),
    OLY_FIELD(oly_params_reduce_scatter, axis_size, OLY_FIELD_INT),
    OLY_FIELD(oly_params_reduce_scatter, scatter_dimension, OLY_FIELD_INT),
    OLY_FIELD(oly_params_reduce_scatter, tiled, OLY_FIELD_BOOL),
};
static const oly_param_field ppermute_fields[] = {
    OLY_FIELD(oly_params_ppermute, axis_name, OLY_FIELD_STR),
    OLY_FIELD(oly_params_ppermute, perm, OLY_FIELD_STR),
};
static const oly_param_field all_to_all_fields[] = {
    OLY_FIELD(oly_params_all_to_all, axis_name, OLY_FIELD_STR),
    OLY_FIELD(oly_params_all_to_all, axis_size, OLY_FIELD_INT),
    OLY_FIELD(oly_params_all_to_all, concat_axis, OLY_FIELD_INT),
    OLY_FIELD(oly_params_all_to_all, split_axis, OLY_FIELD_INT),
};
static const oly_param_field axis_index_fields[] = {
    OLY_FIELD(oly_params_axis_index, axis_name, OLY_FIELD_STR),
};

#define FIELDS(f) .fields = f, .n_fields = OLY_ARRAY_LEN(f)

const oly_prim oly__prim_psum = {
    .name = "psum", .n_in = -1, .num_outputs = same_count, .params_size = sizeof(oly_params_psum),
    FIELDS(psum_fields), .shape = psum_shape, .batch = reduction_batch, .jvp = psum_jvp,
    .transpose = psum_transpose, .no_rule = OLY_RULE_PARTIAL_EVAL,
    .names_axis = psum_names_axis,
};
/* pmax, pmin: no JVP (nor transpose), as in JAX. */
const oly_prim oly__prim_pmax = {
    .name = "pmax", .n_in = -1, .num_outputs = same_count, .params_size = sizeof(oly_params_psum),
    FIELDS(psum_fields), .shape = pmax_shape, .batch = reduction_batch,
    .no_rule = OLY_RULE_JVP | OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
    .names_axis = psum_names_axis,
};
const oly_prim oly__prim_pmin = {
    .name = "pmin", .n_in = -1, .num_outputs = same_count, .params_size = sizeof(oly_params_psum),
    FIELDS(psum_fields), .shape = pmin_shape, .batch = reduction_batch,
    .no_rule = OLY_RULE_JVP | OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
    .names_axis = psum_names_axis,
};
const oly_prim oly__prim_all_gather = {
    .name = "all_gather", .n_in = 1, .n_out = 1, .params_size = sizeof(oly_params_all_gather),
    FIELDS(all_gather_fields), .shape = all_gather_shape, .batch = all_gather_batch,
    .jvp = oly__jvp_linear, .transpose = all_gather_transpose,
    .no_rule = OLY_RULE_PARTIAL_EVAL, .names_axis = all_gather_names_axis,
};
const oly_prim oly__prim_reduce_scatter = {
    .name = "reduce_scatter", .n_in = 1, .n_out = 1,
    .params_size = sizeof(oly_params_reduce_scatter), FIELDS(reduce_scatter_fields),
    .shape = reduce_scatter_shape, .batch = reduce_scatter_batch, .jvp = oly__jvp_linear,
    .transpose = reduce_scatter_transpose, .no_rule = OLY_RULE_PARTIAL_EVAL,
    .names_axis = reduce_scatter_names_axis,
};
const oly_prim oly__prim_ppermute = {
    .name = "ppermute", .n_in = 1, .n_out = 1, .params_size = sizeof(oly_params_ppermute),
    FIELDS(ppermute_fields), .shape = ppermute_shape, .batch = ppermute_batch,
    .jvp = oly__jvp_linear, .transpose = ppermute_transpose, .no_rule = OLY_RULE_PARTIAL_EVAL,
    .names_axis = ppermute_names_axis,
};
const oly_prim oly__prim_all_to_all = {
    .name = "all_to_all", .n_in = 1, .n_out = 1, .params_size = sizeof(oly_params_all_to_all),
    FIELDS(all_to_all_fields), .shape = all_to_all_shape, .batch = all_to_all_batch,
    .jvp = oly__jvp_linear, .transpose = all_to_all_transpose, .no_rule = OLY_RULE_PARTIAL_EVAL,
    .names_axis = all_to_all_names_axis,
};
/* axis_index has no operand: jvp is never asked (its rule is the zero one). */
const oly_prim oly__prim_axis_index = {
    .name = "axis_index", .n_in = 0, .n_out = 1, .params_size = sizeof(oly_params_axis_index),
    FIELDS(axis_index_fields), .shape = axis_index_shape, .batch = axis_index_batch,
    .jvp = oly__jvp_zero, .no_rule = OLY_RULE_TRANSPOSE | OLY_RULE_PARTIAL_EVAL,
    .names_axis = axis_index_names_axis,
};

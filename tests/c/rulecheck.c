/* rulecheck.c — see rulecheck.h. Everything runs through the public program
 * API (builder, transforms, verifier, oly_program_run), so a check exercises
 * exactly what a user would. */
#include "rulecheck.h"

#include "test.h"

#include <math.h>
#include <stdarg.h>

#define BATCH 3

/* ---------------------------------------------------------------- values */

typedef struct cval {
    double re, im;
} cval;

static cval get(const oly_array *a, int64_t i)
{
    const oly_aval *av = oly_array_aval(a);
    oly_scalar s = oly_scalar_load(av->dtype, (const char *)oly_array_data(a) +
                                                  (size_t)i * oly_dtype_size(av->dtype));
    cval r = {0, 0};
    oly_dtype t = av->dtype;
    if (oly_dtype_is_complex(t)) {
        r.re = s.v.c[0];
        r.im = s.v.c[1];
    } else if (oly_dtype_is_float(t)) {
        r.re = s.v.f;
    } else if (oly_dtype_is_unsigned_int(t)) {
        r.re = (double)s.v.u;
    } else {
        r.re = (double)s.v.i;
    }
    return r;
}

static void set(oly_array *a, int64_t i, cval v)
{
    const oly_aval *av = oly_array_aval(a);
    oly_dtype t = av->dtype;
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    if (oly_dtype_is_complex(t)) {
        s.v.c[0] = v.re;
        s.v.c[1] = v.im;
    } else if (oly_dtype_is_float(t)) {
        s.v.f = v.re;
    } else if (oly_dtype_is_unsigned_int(t)) {
        s.v.u = v.re <= 0 ? 0 : (uint64_t)v.re;
    } else if (oly_dtype_is_bool(t)) {
        s.v.i = v.re != 0;
    } else {
        s.v.i = (int64_t)v.re;
    }
    oly_scalar_store(&s, t, (char *)oly_array_mutable_data(a) + (size_t)i * oly_dtype_size(t));
}

static uint64_t rng_next(uint64_t *st)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *st) { return (double)(rng_next(st) >> 11) * 0x1.0p-53; }

static uint64_t hash_str(const char *s, uint64_t h)
{
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

oly_aval rc_aval(oly_dtype t, const int64_t *dims, int rank)
{
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    a.rank = rank;
    for (int i = 0; i < rank; i++) a.dims[i] = dims[i];
    return a;
}

oly_array *rc_random(const oly_aval *a, double lo, double hi, bool integer, uint64_t seed)
{
    oly_array *r = NULL;
    if (oly_array_new(a, &r) != OLY_OK) {
        fprintf(stderr, "    rc_random: %s\n", oly_last_error());
        return NULL;
    }
    oly_dtype t = a->dtype;
    if (lo == hi) {
        if (oly_dtype_is_bool(t)) {
            lo = 0;
            hi = 1;
        } else if (oly_dtype_is_unsigned_int(t)) {
            lo = 0;
            hi = 5;
        } else {
            lo = -2;
            hi = 2;
        }
    }
    bool whole = integer || oly_dtype_is_int(t) || oly_dtype_is_bool(t);
    uint64_t st = seed * 0x2545F4914F6CDD1Dull + 12345;
    int64_t n = oly_aval_size(a);
    for (int64_t i = 0; i < n; i++) {
        cval v = {lo + (hi - lo) * rng_unit(&st), 0};
        if (oly_dtype_is_complex(t)) v.im = lo + (hi - lo) * rng_unit(&st);
        if (whole) {
            v.re = floor(v.re + 0.5);
            if (v.re > hi) v.re = floor(hi);
            if (v.re < lo) v.re = ceil(lo);
        }
        set(r, i, v);
    }
    return r;
}

static bool close1(cval g, cval w, double rtol, double atol)
{
    if (isnan(g.re) || isnan(w.re) || isnan(g.im) || isnan(w.im))
        return isnan(g.re) == isnan(w.re) && isnan(g.im) == isnan(w.im);
    if (isinf(w.re) || isinf(g.re) || isinf(w.im) || isinf(g.im))
        return g.re == w.re && g.im == w.im;
    double d = hypot(g.re - w.re, g.im - w.im);
    return d <= atol + rtol * hypot(w.re, w.im);
}

static void put_index(char *buf, size_t n, const oly_aval *a, int64_t flat)
{
    int64_t idx[OLY_MAX_RANK];
    for (int d = a->rank - 1; d >= 0; d--) {
        idx[d] = a->dims[d] ? flat % a->dims[d] : 0;
        flat = a->dims[d] ? flat / a->dims[d] : 0;
    }
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int d = 0; d < a->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "," : "", (long long)idx[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

bool rc_allclose(const char *what, const oly_array *got, const oly_array *want, double rtol,
                 double atol)
{
    const oly_aval *ga = oly_array_aval(got), *wa = oly_array_aval(want);
    char s1[256], s2[256];
    if (!oly_aval_equal(ga, wa)) {
        oly_aval_format(s1, sizeof s1, ga);
        oly_aval_format(s2, sizeof s2, wa);
        fprintf(stderr, "      %s: got %s, want %s\n", what, s1, s2);
        return false;
    }
    bool exact = !oly_dtype_is_inexact(ga->dtype);
    int64_t n = oly_aval_size(ga);
    for (int64_t i = 0; i < n; i++) {
        cval g = get(got, i), w = get(want, i);
        bool ok = exact ? g.re == w.re : close1(g, w, rtol, atol);
        if (ok) continue;
        put_index(s1, sizeof s1, ga, i);
        if (oly_dtype_is_complex(ga->dtype))
            fprintf(stderr, "      %s: element %s: got %.17g%+.17gj, want %.17g%+.17gj\n", what,
                    s1, g.re, g.im, w.re, w.im);
        else
            fprintf(stderr, "      %s: element %s: got %.17g, want %.17g (diff %.3g)\n", what,
                    s1, g.re, w.re, fabs(g.re - w.re));
        return false;
    }
    return true;
}

/* a[axis = idx]: a new array with that axis removed. */
static oly_array *slice_axis(const oly_array *a, int axis, int64_t idx)
{
    const oly_aval *av = oly_array_aval(a);
    oly_aval r = *av;
    r.rank = av->rank - 1;
    for (int d = axis; d < r.rank; d++) r.dims[d] = av->dims[d + 1];
    oly_array *out = NULL;
    if (oly_array_new(&r, &out) != OLY_OK) return NULL;
    size_t es = oly_dtype_size(av->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= av->dims[d];
    for (int d = axis + 1; d < av->rank; d++) inner *= av->dims[d];
    const char *src = oly_array_data(a);
    char *dst = oly_array_mutable_data(out);
    for (int64_t o = 0; o < outer; o++)
        memcpy(dst + (size_t)(o * inner) * es,
               src + (size_t)((o * av->dims[axis] + idx) * inner) * es, (size_t)inner * es);
    return out;
}

static void release_all(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) {
        oly_array_release(a[i]);
        a[i] = NULL;
    }
}

/* ---------------------------------------------------------------- reporting */

static void describe(const rc_case *c, char *buf, size_t n)
{
    oly_strbuf sb;
    memset(&sb, 0, sizeof sb);
    const oly_prim *p = c->row ? c->row : oly_prim_lookup(c->prim);
    oly__sb_puts(&sb, p ? p->name : c->prim ? c->prim : "(no primitive)");
    if (p && c->params && p->n_fields > 0) {
        oly__sb_puts(&sb, "[");
        oly__params_print(p, c->params, &sb);
        oly__sb_puts(&sb, "]");
    }
    oly__sb_puts(&sb, "(");
    for (int i = 0; i < c->n_in; i++) {
        char a[256];
        oly_aval_format(a, sizeof a, &c->in[i]);
        oly__sb_printf(&sb, "%s%s", i ? ", " : "", a);
    }
    oly__sb_puts(&sb, ")");
    snprintf(buf, n, "%s", sb.data && !sb.failed ? sb.data : "?");
    free(sb.data);
}

static void fail(const rc_case *c, const char *check, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail(const rc_case *c, const char *check, const char *fmt, ...)
{
    char d[1024], m[1024];
    describe(c, d, sizeof d);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    fprintf(stderr, "    rulecheck %s %s: %s\n", d, check, m);
    oly_test_failed = 1;
}

static void fmt_axes(char *buf, size_t n, const int *ax, int k)
{
    size_t w = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < k && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%d", i ? "," : "", ax[i]);
    if (w < n) snprintf(buf + w, n - w, ")");
}

/* ---------------------------------------------------------------- programs */

/* The one-equation program of c, its inputs in the order perm[0..n_in-1]
 * (perm[k]: the case input that becomes program input k; NULL: as given). */
static oly_status build(const rc_case *c, const int *perm, oly_program **out)
{
    const oly_prim *p = c->row ? c->row : oly_prim_lookup(c->prim);
    if (!p) return oly__error(OLY_ERR_INVALID, "rulecheck: no primitive named '%s'", c->prim);
    if (c->n_in < 0 || c->n_in > RC_MAX_IN)
        return oly__error(OLY_ERR_INVALID, "rulecheck: %d inputs", c->n_in);
    oly_builder *b = NULL;
    OLY_TRY(oly_builder_new(&b));
    oly_atom in[RC_MAX_IN];
    oly_status s = OLY_OK;
    for (int k = 0; k < c->n_in && s == OLY_OK; k++) {
        int i = perm ? perm[k] : k;
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &c->in[i], &v);
        in[i] = oly_atom_var(v);
    }
    int nout = oly_prim_num_outputs(p, c->params, c->n_in);
    oly_var **vars = calloc((size_t)(nout > 0 ? nout : 1), sizeof *vars);
    oly_atom *outs = calloc((size_t)(nout > 0 ? nout : 1), sizeof *outs);
    if (!vars || !outs) s = oly__error(OLY_ERR_NOMEM, "rulecheck: out of memory");
    if (s == OLY_OK)
        s = oly_builder_append(b, p, in, c->n_in, c->params, c->subs, c->n_sub, vars,
                               nout > 0 ? nout : 0, NULL);
    for (int j = 0; j < nout && s == OLY_OK; j++) outs[j] = oly_atom_var(vars[j]);
    if (s == OLY_OK) s = oly_builder_finish(b, outs, nout > 0 ? nout : 0, out);
    oly_builder_free(b);
    free(vars);
    free(outs);
    return s;
}

static bool verified(const rc_case *c, const char *check, const oly_program *p)
{
    oly_status s = oly_program_verify(p);
    if (s == OLY_OK) return true;
    char *text = NULL;
    oly_program_print(p, &text);
    fail(c, check, "the transformed program does not verify: %s\n%s", oly_last_error(),
         text ? text : "");
    free(text);
    return false;
}

static bool run(const rc_case *c, const char *check, oly_program *p, oly_array *const *in,
                oly_array **out)
{
    oly_status s =
        oly_program_run(p, 0, in, oly_program_num_inputs(p), out, oly_program_num_outputs(p));
    if (s == OLY_OK) return true;
    char *text = NULL;
    oly_program_print(p, &text);
    fail(c, check, "running failed: %s: %s\n%s", oly_status_name(s), oly_last_error(),
         text ? text : "");
    free(text);
    return false;
}

static uint64_t case_seed(const rc_case *c, uint64_t salt)
{
    uint64_t h = hash_str(c->row ? c->row->name : c->prim, 1469598103934665603ull);
    return h ^ (salt * 0x9E3779B97F4A7C15ull);
}

static oly_array *input(const rc_case *c, int i, const oly_aval *a, uint64_t salt)
{
    return rc_random(a, c->lo[i], c->hi[i], c->integer[i], case_seed(c, salt * 131 + (uint64_t)i));
}

static bool is_low_precision(oly_dtype t)
{
    return t == OLY_FLOAT16 || t == OLY_BFLOAT16;
}

static double tol_for(const rc_case *c, oly_dtype t, double f64, double f32, double f16)
{
    if (c->rtol > 0) return c->rtol;
    if (t == OLY_FLOAT64 || t == OLY_COMPLEX128) return f64;
    if (is_low_precision(t)) return f16;
    return f32;
}

/* ---------------------------------------------------------------- vmap */

static bool vmap_pattern(const rc_case *c, oly_program *p, const int *axes, bool out_last,
                         uint64_t salt)
{
    int n_in = c->n_in, n_out = oly_program_num_outputs(p);
    char what[256], ax[64];
    fmt_axes(ax, sizeof ax, axes, n_in);
    snprintf(what, sizeof what, "vmap in_axes=%s out_axes=%s", ax, out_last ? "last" : "0");
    int *oax = calloc((size_t)n_out + 1, sizeof *oax);
    oly_array **vin = calloc((size_t)n_in + 1, sizeof *vin);
    oly_array **vout = calloc((size_t)n_out + 1, sizeof *vout);
    oly_array **sin_ = calloc((size_t)n_in + 1, sizeof *sin_);
    oly_array **pout = calloc((size_t)n_out + 1, sizeof *pout);
    oly_program *v = NULL;
    bool ok = oax && vin && vout && sin_ && pout;
    for (int j = 0; ok && j < n_out; j++)
        oax[j] = out_last ? oly_program_output_aval(p, j)->rank : 0;
    if (ok) {
        oly_status s = oly_program_vmap(p, axes, BATCH, oax, &v);
        if (s != OLY_OK) {
            fail(c, what, "%s: %s", oly_status_name(s), oly_last_error());
            ok = false;
        }
    }
    ok = ok && verified(c, what, v);
    for (int i = 0; ok && i < n_in; i++) {
        oly_aval a = c->in[i];
        if (axes[i] >= 0) {
            a.rank++;
            for (int d = a.rank - 1; d > axes[i]; d--) a.dims[d] = a.dims[d - 1];
            a.dims[axes[i]] = BATCH;
        }
        vin[i] = input(c, i, &a, salt);
        ok = vin[i] != NULL;
    }
    ok = ok && run(c, what, v, vin, vout);
    for (int bi = 0; ok && bi < BATCH; bi++) {
        for (int i = 0; ok && i < n_in; i++) {
            sin_[i] = axes[i] >= 0 ? slice_axis(vin[i], axes[i], bi) : oly_array_retain(vin[i]);
            ok = sin_[i] != NULL;
        }
        ok = ok && run(c, what, p, sin_, pout);
        for (int j = 0; ok && j < n_out; j++) {
            oly_array *got = slice_axis(vout[j], oax[j], bi);
            char w2[320];
            snprintf(w2, sizeof w2, "output %d, batch element %d", j, bi);
            oly_dtype t = oly_array_aval(pout[j])->dtype;
            double tol = tol_for(c, t, 1e-12, 2e-5, 1e-2);
            if (!got || !rc_allclose(w2, got, pout[j], tol, tol)) {
                fail(c, what, "batched result differs from the per-element result (above)");
                ok = false;
            }
            oly_array_release(got);
        }
        release_all(sin_, n_in);
        release_all(pout, n_out);
    }
    if (vout) release_all(vout, n_out);
    if (vin) release_all(vin, n_in);
    oly_program_release(v);
    free(oax);
    free(vin);
    free(vout);
    free(sin_);
    free(pout);
    return ok;
}

bool rc_check_vmap(const rc_case *c)
{
    oly_program *p = NULL;
    oly_status s = build(c, NULL, &p);
    if (s != OLY_OK) {
        fail(c, "vmap", "building the program failed: %s", oly_last_error());
        return false;
    }
    int axes[RC_MAX_IN];
    bool ok = true;
    uint64_t salt = 1;
    /* every input batched at 0 */
    for (int i = 0; i < c->n_in; i++) axes[i] = 0;
    ok &= vmap_pattern(c, p, axes, false, salt++);
    /* every input batched at its last axis, outputs too */
    for (int i = 0; i < c->n_in; i++) axes[i] = c->in[i].rank;
    ok &= vmap_pattern(c, p, axes, true, salt++);
    /* each input alone */
    for (int k = 0; c->n_in > 1 && k < c->n_in; k++) {
        for (int i = 0; i < c->n_in; i++) axes[i] = i == k ? (k % 2 ? c->in[i].rank : 0) : -1;
        ok &= vmap_pattern(c, p, axes, k % 2 == 1, salt++);
    }
    /* nothing batched: the equation is copied; outputs broadcast */
    for (int i = 0; i < c->n_in; i++) axes[i] = -1;
    ok &= vmap_pattern(c, p, axes, false, salt++);
    oly_program_release(p);
    return ok;
}

/* ---------------------------------------------------------------- jvp */

static bool diffable(const rc_case *c, int i)
{
    return !c->nodiff[i] && oly_dtype_is_inexact(c->in[i].dtype);
}

/* x + h * v for the inputs with nz (v indexed like the nz inputs). */
static oly_array *shifted(const oly_array *x, const oly_array *v, double h)
{
    oly_array *r = NULL;
    if (oly_array_new(oly_array_aval(x), &r) != OLY_OK) return NULL;
    int64_t n = oly_aval_size(oly_array_aval(x));
    for (int64_t k = 0; k < n; k++) {
        cval a = get(x, k), d = get(v, k);
        set(r, k, (cval){a.re + h * d.re, a.im + h * d.im});
    }
    return r;
}

/* Runs the jvp of p at x along v (v[i] for inputs with nz[i]); checks the
 * primal against p and the tangents against central differences. */
static bool jvp_pattern(const rc_case *c, oly_program *p, const bool *nz, uint64_t salt)
{
    int n_in = c->n_in, n_out = oly_program_num_outputs(p);
    char what[256];
    {
        int flags[RC_MAX_IN] = {0};
        for (int i = 0; i < n_in; i++) flags[i] = nz[i];
        char ax[64];
        fmt_axes(ax, sizeof ax, flags, n_in);
        snprintf(what, sizeof what, "jvp nz_in=%s", ax);
    }
    oly_program *j = NULL;
    bool *nzo = calloc((size_t)n_out + 1, sizeof *nzo);
    oly_array *x[RC_MAX_IN] = {0}, *v[RC_MAX_IN] = {0}, *xp[RC_MAX_IN] = {0},
              *xm[RC_MAX_IN] = {0}, *jin[2 * RC_MAX_IN] = {0};
    int cap = 2 * n_out + 1;
    oly_array **jout = calloc((size_t)cap, sizeof *jout);
    oly_array **y = calloc((size_t)cap, sizeof *y);
    oly_array **yp = calloc((size_t)cap, sizeof *yp);
    oly_array **ym = calloc((size_t)cap, sizeof *ym);
    bool ok = nzo && jout && y && yp && ym;
    if (ok) {
        oly_status s = oly_program_jvp(p, nz, &j, nzo);
        if (s != OLY_OK) {
            fail(c, what, "%s: %s", oly_status_name(s), oly_last_error());
            ok = false;
        }
    }
    ok = ok && verified(c, what, j);
    int nj = 0;
    bool low = false;
    for (int i = 0; ok && i < n_in; i++) {
        x[i] = input(c, i, &c->in[i], salt);
        ok = x[i] != NULL;
        jin[nj++] = x[i];
        low |= nz[i] && is_low_precision(c->in[i].dtype);
    }
    for (int i = 0; ok && i < n_in; i++) {
        if (!nz[i]) continue;
        v[i] = rc_random(&c->in[i], -1, 1, false, case_seed(c, salt * 977 + (uint64_t)i));
        ok = v[i] != NULL;
        jin[nj++] = v[i];
    }
    ok = ok && run(c, what, j, jin, jout) && run(c, what, p, x, y);
    for (int k = 0; ok && k < n_out; k++) {
        char w2[64];
        snprintf(w2, sizeof w2, "primal output %d", k);
        oly_dtype t = oly_array_aval(y[k])->dtype;
        double tol = tol_for(c, t, 1e-12, 1e-6, 1e-3);
        if (!rc_allclose(w2, jout[k], y[k], tol, tol)) {
            fail(c, what, "the jvp's primal output differs from the program's (above)");
            ok = false;
        }
    }
    if (ok && !low) {
        /* central differences with a step suited to the precision */
        bool f64 = true;
        for (int i = 0; i < n_in; i++)
            if (nz[i] && c->in[i].dtype != OLY_FLOAT64 && c->in[i].dtype != OLY_COMPLEX128)
                f64 = false;
        for (int k = 0; k < n_out; k++) { /* a float32 output rounds the differences */
            oly_dtype t = oly_array_aval(y[k])->dtype;
            if (oly_dtype_is_inexact(t) && t != OLY_FLOAT64 && t != OLY_COMPLEX128) f64 = false;
            if (is_low_precision(t)) low = true;
        }
        double h = f64 ? 1e-6 : 3e-3;
        double tol = c->rtol > 0 ? c->rtol : f64 ? 1e-6 : 3e-2;
        oly_array *xpin[RC_MAX_IN], *xmin[RC_MAX_IN];
        for (int i = 0; ok && i < n_in; i++) {
            if (nz[i]) {
                xp[i] = shifted(x[i], v[i], h);
                xm[i] = shifted(x[i], v[i], -h);
                ok = xp[i] && xm[i];
            }
            xpin[i] = nz[i] ? xp[i] : x[i];
            xmin[i] = nz[i] ? xm[i] : x[i];
        }
        ok = ok && run(c, what, p, xpin, yp) && run(c, what, p, xmin, ym);
        int t_at = n_out;
        for (int k = 0; ok && k < n_out; k++) {
            const oly_aval *oa = oly_array_aval(y[k]);
            const oly_array *tan = nzo[k] ? jout[t_at++] : NULL;
            if (!oly_dtype_is_inexact(oa->dtype)) continue;
            int64_t n = oly_aval_size(oa);
            double scale = 0;
            for (int64_t e = 0; e < n; e++) {
                cval a = get(yp[k], e), b = get(ym[k], e);
                double fd = hypot(a.re - b.re, a.im - b.im) / (2 * h);
                if (fd > scale) scale = fd;
            }
            for (int64_t e = 0; ok && e < n; e++) {
                cval a = get(yp[k], e), b = get(ym[k], e);
                cval fd = {(a.re - b.re) / (2 * h), (a.im - b.im) / (2 * h)};
                cval t = tan ? get(tan, e) : (cval){0, 0};
                double err = hypot(t.re - fd.re, t.im - fd.im);
                if (!(err <= tol * (1 + scale))) {
                    char idx[128];
                    put_index(idx, sizeof idx, oa, e);
                    fail(c, what,
                         "tangent of output %d at %s: jvp %.12g%+.12gj, finite differences "
                         "%.12g%+.12gj (error %.3g > %.3g)%s",
                         k, idx, t.re, t.im, fd.re, fd.im, err, tol * (1 + scale),
                         tan ? "" : " [the rule said this tangent is zero]");
                    ok = false;
                }
            }
        }
    }
    for (int i = 0; i < n_in; i++) {
        oly_array_release(x[i]);
        oly_array_release(v[i]);
        oly_array_release(xp[i]);
        oly_array_release(xm[i]);
    }
    if (jout) release_all(jout, cap);
    if (y) release_all(y, cap);
    if (yp) release_all(yp, cap);
    if (ym) release_all(ym, cap);
    free(jout);
    free(y);
    free(yp);
    free(ym);
    free(nzo);
    oly_program_release(j);
    return ok;
}

bool rc_check_jvp(const rc_case *c)
{
    bool nz[RC_MAX_IN] = {0};
    int n_diff = 0;
    for (int i = 0; i < c->n_in; i++) n_diff += nz[i] = diffable(c, i);
    if (n_diff == 0) return true; /* nothing to differentiate */
    oly_program *p = NULL;
    if (build(c, NULL, &p) != OLY_OK) {
        fail(c, "jvp", "building the program failed: %s", oly_last_error());
        return false;
    }
    bool ok = jvp_pattern(c, p, nz, 11);
    for (int k = 0; n_diff > 1 && k < c->n_in; k++) {
        if (!diffable(c, k)) continue;
        bool one[RC_MAX_IN] = {0};
        one[k] = true;
        ok &= jvp_pattern(c, p, one, 12 + (uint64_t)k);
    }
    oly_program_release(p);
    return ok;
}

/* ---------------------------------------------------------------- transpose */

/* sum over outputs of <a_k, b_k> (bilinear, no conjugation); *scale gets
 * sum |a||b|. */
static cval dot_all(oly_array *const *a, oly_array *const *b, int n, double *scale)
{
    cval r = {0, 0};
    for (int k = 0; k < n; k++) {
        int64_t m = oly_aval_size(oly_array_aval(a[k]));
        for (int64_t e = 0; e < m; e++) {
            cval x = get(a[k], e), y = get(b[k], e);
            r.re += x.re * y.re - x.im * y.im;
            r.im += x.re * y.im + x.im * y.re;
            *scale += hypot(x.re, x.im) * hypot(y.re, y.im);
        }
    }
    return r;
}

/* Transposes lin (n_res residual inputs, then linear ones) and checks
 * <ct, lin(res, v)> == <T(res, ct), v> at the given residuals. */
static bool dot_test(const rc_case *c, const char *what, oly_program *lin, int n_res,
                     oly_array *const *res, uint64_t salt, oly_dtype prec)
{
    int n_lin = oly_program_num_inputs(lin) - n_res, n_out = oly_program_num_outputs(lin);
    oly_program *t = NULL;
    oly_status s = oly_program_transpose(lin, n_res, &t);
    if (s != OLY_OK) {
        fail(c, what, "transpose: %s: %s", oly_status_name(s), oly_last_error());
        return false;
    }
    bool ok = verified(c, what, t);
    int nall = n_res + n_lin + n_out + 1;
    oly_array **in = calloc((size_t)nall, sizeof *in);    /* (res, v) */
    oly_array **tin = calloc((size_t)nall, sizeof *tin);  /* (res, ct) */
    oly_array **lv = calloc((size_t)nall, sizeof *lv);
    oly_array **w = calloc((size_t)nall, sizeof *w);
    ok = ok && in && tin && lv && w;
    for (int i = 0; ok && i < n_res; i++) in[i] = tin[i] = res[i];
    for (int i = 0; ok && i < n_lin; i++) {
        in[n_res + i] = rc_random(oly_program_input_aval(lin, n_res + i), -1, 1, false,
                                  case_seed(c, salt * 7919 + (uint64_t)i));
        ok = in[n_res + i] != NULL;
    }
    for (int k = 0; ok && k < n_out; k++) {
        tin[n_res + k] = rc_random(oly_program_output_aval(lin, k), -1, 1, false,
                                   case_seed(c, salt * 104729 + (uint64_t)k));
        ok = tin[n_res + k] != NULL;
    }
    ok = ok && run(c, what, lin, in, lv) && run(c, what, t, tin, w);
    /* linear, not merely affine: zero linear inputs give zero outputs */
    if (ok) {
        oly_array **zin = calloc((size_t)nall, sizeof *zin);
        oly_array **z = calloc((size_t)nall, sizeof *z);
        ok = zin && z;
        for (int r = 0; ok && r < n_res; r++) zin[r] = res[r];
        for (int i = 0; ok && i < n_lin; i++)
            ok = oly_array_new(oly_program_input_aval(lin, n_res + i), &zin[n_res + i]) == OLY_OK;
        ok = ok && run(c, what, lin, zin, z);
        for (int k = 0; ok && k < n_out; k++) {
            int64_t m = oly_aval_size(oly_array_aval(z[k]));
            for (int64_t e = 0; e < m; e++) {
                cval zv = get(z[k], e);
                if (zv.re == 0 && zv.im == 0) continue;
                fail(c, what,
                     "not linear: with every linear input zero, output %d is %.6g at flat index "
                     "%lld (is an input it is affine in passed as a residual? mark every input "
                     "it is jointly linear in)",
                     k, zv.re, (long long)e);
                ok = false;
                break;
            }
        }
        if (zin)
            for (int i = 0; i < n_lin; i++) oly_array_release(zin[n_res + i]);
        if (z) release_all(z, n_out);
        free(zin);
        free(z);
    }
    if (ok) {
        double scale = 0;
        cval lhs = dot_all(tin + n_res, lv, n_out, &scale);
        cval rhs = dot_all(w, in + n_res, n_lin, &scale);
        double tol = tol_for(c, prec, 1e-10, 1e-4, 2e-2);
        /* complex values pair by the real part of the bilinear product (JAX's
         * convention: conj transposes to conj, imag to -i ct) */
        double err = fabs(lhs.re - rhs.re);
        if (!(err <= tol * (scale + 1e-300))) {
            char *text = NULL;
            oly_program_print(t, &text);
            fail(c, what,
                 "<ct, L v> = %.15g%+.15gj but <L^T ct, v> = %.15g%+.15gj (error %.3g, scale "
                 "%.3g); the transpose:\n%s",
                 lhs.re, lhs.im, rhs.re, rhs.im, err, scale, text ? text : "");
            free(text);
            ok = false;
        }
    }
    if (in)
        for (int i = 0; i < n_lin; i++) oly_array_release(in[n_res + i]);
    if (tin)
        for (int k = 0; k < n_out; k++) oly_array_release(tin[n_res + k]);
    if (lv) release_all(lv, n_out);
    if (w) release_all(w, n_lin);
    free(in);
    free(tin);
    free(lv);
    free(w);
    oly_program_release(t);
    return ok;
}

static oly_dtype worst_precision(const rc_case *c, const bool *sel)
{
    oly_dtype t = OLY_FLOAT64;
    for (int i = 0; i < c->n_in; i++) {
        if (!sel[i]) continue;
        oly_dtype d = c->in[i].dtype;
        if (is_low_precision(d)) return d;
        if (d == OLY_FLOAT32 || d == OLY_COMPLEX64) t = OLY_FLOAT32;
    }
    return t;
}

/* linearize, then transpose the linear program */
static bool transpose_linearized(const rc_case *c, oly_program *p)
{
    const char *what = "linearize+transpose";
    bool nz[RC_MAX_IN] = {0};
    int n_diff = 0;
    for (int i = 0; i < c->n_in; i++) n_diff += nz[i] = diffable(c, i);
    if (n_diff == 0) return true;
    int n_out = oly_program_num_outputs(p);
    oly_program *k = NULL, *l = NULL, *j = NULL;
    int n_res = 0;
    bool *nzo = calloc((size_t)n_out + 1, sizeof *nzo);
    bool *nzj = calloc((size_t)n_out + 1, sizeof *nzj);
    oly_array *x[RC_MAX_IN] = {0}, *v[RC_MAX_IN] = {0}, *jin[2 * RC_MAX_IN] = {0};
    oly_array **kout = NULL, **y = NULL, **lin_in = NULL, **lout = NULL, **jout = NULL;
    int nk = 0, nl_in = 0, nl_out = 0;
    bool ok = nzo && nzj;
    if (ok) {
        oly_status s = oly_program_linearize(p, nz, &k, &l, &n_res, nzo);
        if (s != OLY_OK) {
            fail(c, what, "linearize: %s: %s", oly_status_name(s), oly_last_error());
            ok = false;
        }
    }
    ok = ok && verified(c, what, k) && verified(c, what, l);
    if (ok) {
        nk = oly_program_num_outputs(k);
        nl_in = oly_program_num_inputs(l);
        nl_out = oly_program_num_outputs(l);
        if (nk != n_out + n_res || nl_in != n_res + n_diff) {
            fail(c, what,
                 "linearize gave a primal program with %d outputs (want %d + %d residuals) and a "
                 "linear program with %d inputs (want %d + %d)",
                 nk, n_out, n_res, nl_in, n_res, n_diff);
            ok = false;
        }
    }
    if (ok) {
        kout = calloc((size_t)nk + 1, sizeof *kout);
        y = calloc((size_t)n_out + 1, sizeof *y);
        lin_in = calloc((size_t)nl_in + 1, sizeof *lin_in);
        lout = calloc((size_t)nl_out + 1, sizeof *lout);
        jout = calloc((size_t)(2 * n_out) + 1, sizeof *jout);
        ok = kout && y && lin_in && lout && jout;
    }
    for (int i = 0; ok && i < c->n_in; i++) {
        x[i] = input(c, i, &c->in[i], 21);
        ok = x[i] != NULL;
    }
    ok = ok && run(c, what, k, x, kout) && run(c, what, p, x, y);
    for (int o = 0; ok && o < n_out; o++) {
        char w2[64];
        snprintf(w2, sizeof w2, "primal output %d", o);
        double tol = tol_for(c, oly_array_aval(y[o])->dtype, 1e-12, 1e-6, 1e-3);
        if (!rc_allclose(w2, kout[o], y[o], tol, tol)) {
            fail(c, what, "the linearized primal output differs from the program's (above)");
            ok = false;
        }
    }
    /* the linear program agrees with the jvp */
    if (ok) {
        oly_status s = oly_program_jvp(p, nz, &j, nzj);
        if (s != OLY_OK) {
            fail(c, what, "jvp: %s: %s", oly_status_name(s), oly_last_error());
            ok = false;
        }
    }
    int nj = 0, nv = 0;
    for (int i = 0; ok && i < c->n_in; i++) jin[nj++] = x[i];
    for (int i = 0; ok && i < c->n_in; i++) {
        if (!nz[i]) continue;
        v[i] = rc_random(&c->in[i], -1, 1, false, case_seed(c, 3331 + (uint64_t)i));
        ok = v[i] != NULL;
        jin[nj++] = v[i];
        lin_in[n_res + nv++] = v[i];
    }
    for (int r = 0; ok && r < n_res; r++) lin_in[r] = kout[n_out + r];
    ok = ok && run(c, what, j, jin, jout) && run(c, what, l, lin_in, lout);
    for (int o = 0, t = 0; ok && o < n_out; o++) {
        if (nzo[o] != nzj[o]) {
            fail(c, what, "output %d: linearize says nonzero=%d, jvp says %d", o, nzo[o], nzj[o]);
            ok = false;
            break;
        }
        if (!nzo[o]) continue;
        char w2[64];
        snprintf(w2, sizeof w2, "tangent of output %d", o);
        double tol = tol_for(c, oly_array_aval(lout[t])->dtype, 1e-10, 1e-5, 1e-2);
        if (!rc_allclose(w2, lout[t], jout[n_out + t], tol, tol)) {
            fail(c, what, "the linear program differs from the jvp (above)");
            ok = false;
        }
        t++;
    }
    ok = ok && dot_test(c, what, l, n_res, kout + n_out, 31, worst_precision(c, nz));

    for (int i = 0; i < c->n_in; i++) {
        oly_array_release(x[i]);
        oly_array_release(v[i]);
    }
    if (kout) release_all(kout, nk);
    if (y) release_all(y, n_out);
    if (lout) release_all(lout, nl_out);
    if (jout && j) release_all(jout, oly_program_num_outputs(j));
    free(kout);
    free(y);
    free(lin_in);
    free(lout);
    free(jout);
    free(nzo);
    free(nzj);
    oly_program_release(k);
    oly_program_release(l);
    oly_program_release(j);
    return ok;
}

/* the primitive's own transpose rule, on the inputs marked linear */
static bool transpose_direct(const rc_case *c)
{
    int perm[RC_MAX_IN] = {0}, n_res = 0, n = 0;
    for (int i = 0; i < c->n_in; i++)
        if (!c->linear[i]) perm[n++] = i;
    n_res = n;
    for (int i = 0; i < c->n_in; i++)
        if (c->linear[i]) perm[n++] = i;
    if (n_res == c->n_in) return true;
    char what[128], ax[64];
    int flags[RC_MAX_IN] = {0};
    for (int i = 0; i < c->n_in; i++) flags[i] = c->linear[i];
    fmt_axes(ax, sizeof ax, flags, c->n_in);
    snprintf(what, sizeof what, "transpose linear=%s", ax);
    oly_program *q = NULL;
    if (build(c, perm, &q) != OLY_OK) {
        fail(c, what, "building the program failed: %s", oly_last_error());
        return false;
    }
    oly_array *res[RC_MAX_IN] = {0};
    bool ok = true;
    for (int r = 0; ok && r < n_res; r++) {
        res[r] = input(c, perm[r], &c->in[perm[r]], 41);
        ok = res[r] != NULL;
    }
    ok = ok && dot_test(c, what, q, n_res, res, 43, worst_precision(c, c->linear));
    for (int r = 0; r < n_res; r++) oly_array_release(res[r]);
    oly_program_release(q);
    return ok;
}

bool rc_check_transpose(const rc_case *c)
{
    oly_program *p = NULL;
    if (build(c, NULL, &p) != OLY_OK) {
        fail(c, "transpose", "building the program failed: %s", oly_last_error());
        return false;
    }
    bool ok = transpose_linearized(c, p);
    ok &= transpose_direct(c);
    oly_program_release(p);
    return ok;
}

bool rc_check_all(const rc_case *c)
{
    bool ok = true;
    if (!(c->skip & RC_SKIP_VMAP)) ok &= rc_check_vmap(c);
    if (!(c->skip & RC_SKIP_JVP)) ok &= rc_check_jvp(c);
    if (!(c->skip & RC_SKIP_TRANSPOSE)) ok &= rc_check_transpose(c);
    return ok;
}

bool rc_check_linear_program(const char *what, oly_program *lin, int n_res)
{
    rc_case c;
    memset(&c, 0, sizeof c);
    c.prim = what;
    oly_array **res = calloc((size_t)n_res + 1, sizeof *res);
    bool ok = res != NULL;
    oly_dtype prec = OLY_FLOAT64;
    for (int i = 0; ok && i < oly_program_num_inputs(lin); i++) {
        oly_dtype d = oly_program_input_aval(lin, i)->dtype;
        if (d == OLY_FLOAT32 || d == OLY_COMPLEX64) prec = OLY_FLOAT32;
    }
    for (int r = 0; ok && r < n_res; r++) {
        res[r] = rc_random(oly_program_input_aval(lin, r), 0, 0, false, 500 + (uint64_t)r);
        ok = res[r] != NULL;
    }
    ok = ok && dot_test(&c, "transpose", lin, n_res, res, 51, prec);
    if (res) release_all(res, n_res);
    free(res);
    return ok;
}

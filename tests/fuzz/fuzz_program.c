/* fuzz_program.c — a libFuzzer target for the builder, the verifier, the
 * transforms and the executor, through the public header only.
 *
 * Any byte string decodes to a small program: a few inputs (any dtype, rank
 * 0..3, dims 0..4), then equations over the primitive registry (nested-program,
 * host-function and thunk primitives are left out) with inputs drawn from the
 * existing variables or literals and params filled from each primitive's field
 * table. Errors returned as a status are expected. A defect is: a crash, a leak
 * or UB (the sanitizers report those), a failed call with an empty message, an
 * OLY_ERR_INTERNAL status, a program the library made (the builder's or a
 * transform's) that its own verifier rejects, or, on runs with small finite
 * inputs, results that disagree: dce, jvp and linearize must keep the
 * program's outputs, vmap must agree with a loop of runs, and a transpose
 * must satisfy <ct, L v> == <L^T ct, v>.
 *
 * `make fuzz` links this file with libFuzzer; tests/c/test_fuzz_smoke.c
 * includes it and feeds it fixed pseudo-random inputs, with fz_on_defect set
 * so that a defect fails the test instead of aborting. */
#include "olympus.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---------------------------------------------------------------- defects */

/* Called on every defect; NULL means print and abort (libFuzzer's report). */
static void (*fz_on_defect)(const char *what, const char *where, const char *detail);
/* Primitives the generator must not pick (NULL-terminated, may be NULL). */
static const char *const *fz_skip_prims;

static void defect(const char *what, const char *where, const char *detail)
{
    if (fz_on_defect) {
        fz_on_defect(what, where, detail ? detail : "");
        return;
    }
    fprintf(stderr, "fuzz_program: %s in %s: %s\n", what, where, detail ? detail : "");
    abort();
}

/* Checks a call's status: an empty message or an internal error is a defect.
 * Returns true when s is OLY_OK. */
static bool check_status(oly_status s, const char *where, const char *prim)
{
    if (s == OLY_OK) return true;
    char buf[512];
    const char *msg = oly_last_error();
    if ((int)s < 0 || s >= OLY_STATUS_COUNT) {
        snprintf(buf, sizeof buf, "[%s] status %d out of range", prim ? prim : "-", (int)s);
        defect("bad status", where, buf);
    } else if (!msg || !msg[0]) {
        snprintf(buf, sizeof buf, "[%s] %s with an empty message", prim ? prim : "-",
                 oly_status_name(s));
        defect("empty error message", where, buf);
    } else if (s == OLY_ERR_INTERNAL) {
        snprintf(buf, sizeof buf, "[%s] %s", prim ? prim : "-", msg);
        defect("internal error", where, buf);
    }
    return false;
}

/* ---------------------------------------------------------------- the byte cursor */

typedef struct {
    const uint8_t *p;
    size_t n, i;
    int64_t serial; /* SMOOTH values drawn so far */
} cursor;

/* The next byte, 0 past the end: every byte string is a valid program. */
static unsigned byte(cursor *c) { return c->i < c->n ? c->p[c->i++] : 0u; }
static int pick(cursor *c, int n) { return n <= 1 ? 0 : (int)(byte(c) % (unsigned)n); }

/* Input dtypes, the common ones first (a zero byte picks float32). */
static const oly_dtype DTYPES[] = {
    OLY_FLOAT32, OLY_INT32,  OLY_BOOL,    OLY_FLOAT64,  OLY_INT64,     OLY_UINT8,
    OLY_INT8,    OLY_INT16,  OLY_UINT16,  OLY_UINT32,   OLY_UINT64,    OLY_FLOAT16,
    OLY_BFLOAT16, OLY_COMPLEX64, OLY_COMPLEX128,
};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

static oly_dtype pick_dtype(cursor *c) { return DTYPES[pick(c, N_DTYPES)]; }

static const int64_t EXTREME[] = {INT64_MAX, INT64_MIN, INT32_MAX, INT32_MIN,
                                  (int64_t)1 << 32, (int64_t)1 << 40, -((int64_t)1 << 40),
                                  (int64_t)1 << 62};
enum { N_EXTREME = sizeof EXTREME / sizeof EXTREME[0] };

/* A scalar of dtype t: small values mostly, then the edges (NaN, inf, -0, limits). */
static oly_scalar make_scalar(cursor *c, oly_dtype t, bool weak)
{
    static const double F[] = {0.0, 1.0, -1.0, 2.0, 0.5, -2.5, 3.0, NAN, INFINITY, -INFINITY,
                               -0.0, 1e30, -1e-30, 65504.0, 7.0, 1e300};
    static const int64_t I[] = {0, 1, -1, 2, 3, -3, 7, 5, -128, 255, 127, INT64_MIN, INT64_MAX,
                                INT32_MIN, INT32_MAX, 65535};
    unsigned k = byte(c) % 16u;
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    s.weak = weak;
    if (oly_dtype_is_bool(t)) {
        s.v.i = k & 1u;
    } else if (oly_dtype_is_unsigned_int(t)) {
        s.v.u = (uint64_t)I[k];
    } else if (oly_dtype_is_int(t)) {
        s.v.i = I[k];
    } else if (oly_dtype_is_complex(t)) {
        s.v.c[0] = F[k];
        s.v.c[1] = F[byte(c) % 16u];
    } else {
        s.v.f = F[k];
    }
    return s;
}

/* A small finite scalar of dtype t (for runs whose results are compared);
 * smooth: floats away from 0, integers and halves, where floor, sign, round
 * and abs have their kinks (for finite differences). */
static oly_scalar make_tame_scalar(cursor *c, oly_dtype t, bool smooth)
{
    static const double TAME[] = {0.0, 1.0, -1.0, 2.0, 0.5, -2.5, 3.0, 0.25};
    static const double SMOOTH[] = {0.3, 0.7, 1.3, -0.6, 2.2, -1.7, 0.45, 1.9};
    const double *F = smooth ? SMOOTH : TAME;
    oly_scalar s;
    memset(&s, 0, sizeof s);
    s.dtype = t;
    unsigned k = byte(c) % 8u;
    if (oly_dtype_is_bool(t))
        s.v.i = k & 1u;
    else if (oly_dtype_is_unsigned_int(t))
        s.v.u = k;
    else if (oly_dtype_is_int(t))
        s.v.i = (int64_t)k - 3;
    else if (oly_dtype_is_complex(t)) {
        s.v.c[0] = F[k];
        s.v.c[1] = F[byte(c) % 8u];
    } else {
        s.v.f = F[k];
        /* distinct values: no ties for max, min, cummin and argmax, where a
         * JVP may split the tangent and a difference picks one side */
        if (smooth) s.v.f += 1.41421356e-3 * (double)++c->serial;
    }
    return s;
}

/* The relative error a result computed through dtype t may carry (0: exact). */
static double dtype_tol(oly_dtype t)
{
    if (t == OLY_FLOAT16 || t == OLY_BFLOAT16) return 2e-2;
    if (t == OLY_FLOAT32 || t == OLY_COMPLEX64) return 1e-4;
    if (t == OLY_FLOAT64 || t == OLY_COMPLEX128) return 1e-9;
    return 0.0;
}

/* ---------------------------------------------------------------- the registry */

enum { MAX_PRIMS = 256 };

typedef struct {
    const oly_prim *p[MAX_PRIMS];
    int n;
} prim_list;

static bool name_is(const char *name, const char *const *list)
{
    for (int i = 0; list && list[i]; i++)
        if (strcmp(name, list[i]) == 0) return true;
    return false;
}

/* Keeps the primitives whose params the generator can fill: no nested programs,
 * host functions, thunks or aval lists. */
static void keep_prim(const oly_prim *p, void *ctx)
{
    static const char *const nested[] = {"pjit", "cond", "while", "scan", "remat", NULL};
    prim_list *l = ctx;
    const char *name = oly_prim_name(p);
    if (l->n >= MAX_PRIMS || name_is(name, nested) || strncmp(name, "custom_", 7) == 0) return;
    if (name_is(name, fz_skip_prims)) return;
    int nf = 0;
    size_t sz = 0;
    const oly_param_field *f = oly_prim_fields(p, &nf, &sz);
    for (int i = 0; i < nf; i++)
        if (f[i].kind == OLY_FIELD_HOST_FN || f[i].kind == OLY_FIELD_THUNK ||
            f[i].kind == OLY_FIELD_AVALS)
            return;
    l->p[l->n++] = p;
}

/* ---------------------------------------------------------------- program state */

enum { MAX_VARS = 96, MAX_IN = 6, MAX_OUT = 8, PARAMS_MAX = 1024, RUN_LIMIT = 4096,
       MAX_EAGER = 4 };

/* An equation the builder took, to apply eagerly (oly_apply) afterwards. */
typedef struct {
    const oly_prim *p;
    int n_in, n_out;
    oly_aval in[MAX_IN];
    oly_aval out[MAX_OUT];
    _Alignas(16) unsigned char params[PARAMS_MAX];
} eager_eqn;

typedef struct {
    oly_builder *b;
    oly_var *vars[MAX_VARS];
    int n_vars;
    int64_t total_elems; /* over every variable, saturating: gates running */
    double tol;          /* the coarsest dtype_tol over every variable */
    bool all_f64;        /* every inexact variable is float64 */
    eager_eqn eager[MAX_EAGER];
    int n_eager;
} state;

static void add_var(state *st, oly_var *v)
{
    const oly_aval *a = oly_var_aval(v);
    int64_t n = oly_aval_size(a);
    if (dtype_tol(a->dtype) > st->tol) st->tol = dtype_tol(a->dtype);
    if (oly_dtype_is_inexact(a->dtype) && a->dtype != OLY_FLOAT64) st->all_f64 = false;
    if (n < 0 || n > RUN_LIMIT) n = RUN_LIMIT + 1;
    st->total_elems += n;
    if (st->total_elems > RUN_LIMIT) st->total_elems = RUN_LIMIT + 1;
    if (st->n_vars < MAX_VARS) st->vars[st->n_vars++] = v;
}

static oly_aval atom_aval(const oly_atom *a)
{
    if (a->kind == OLY_ATOM_VAR) return *oly_var_aval(a->var);
    oly_aval r;
    memset(&r, 0, sizeof r);
    r.dtype = a->lit.dtype;
    r.weak = a->lit.weak;
    return r;
}

/* A var, the recent ones favoured; or now and then a literal. */
static oly_atom pick_atom(cursor *c, state *st)
{
    unsigned k = byte(c);
    if (st->n_vars == 0 || (k & 7u) == 7u)
        return oly_atom_lit(make_scalar(c, k == 0xffu ? (oly_dtype)OLY_DTYPE_COUNT : pick_dtype(c),
                                        (k & 8u) != 0));
    int back = (int)((k >> 3) % (unsigned)st->n_vars);
    if ((k & 0x80u) == 0) back %= 3; /* mostly one of the last three */
    if (back >= st->n_vars) back = st->n_vars - 1;
    return oly_atom_var(st->vars[st->n_vars - 1 - back]);
}

/* A second or later operand: one shaped like the first where possible, so
 * that binary and variadic primitives get past their shape rules. */
static oly_atom pick_peer(cursor *c, state *st, const oly_aval *first)
{
    switch (byte(c) % 5u) {
    case 0:
    case 1: {
        int start = pick(c, st->n_vars > 0 ? st->n_vars : 1);
        for (int j = 0; j < st->n_vars; j++) {
            oly_var *v = st->vars[(start + j) % st->n_vars];
            if (oly_aval_equal(oly_var_aval(v), first)) return oly_atom_var(v);
        }
        return pick_atom(c, st);
    }
    case 2: return oly_atom_lit(make_scalar(c, first->dtype, byte(c) & 1u));
    case 3: { /* an index operand (dynamic_slice, select_n's predicate) */
        static const oly_dtype idx[] = {OLY_INT32, OLY_BOOL, OLY_INT64, OLY_UINT8};
        return oly_atom_lit(make_scalar(c, idx[pick(c, 4)], false));
    }
    default: return pick_atom(c, st);
    }
}

/* ---------------------------------------------------------------- params */

static void fill_ints(cursor *c, oly_ints *out, const oly_aval *ref, state *st)
{
    int rank = ref->rank < 0 ? 0 : ref->rank > OLY_MAX_RANK ? OLY_MAX_RANK : ref->rank;
    memset(out, 0, sizeof *out);
    switch (byte(c) % 11u) {
    case 0: /* short list of small values, negatives included */
    case 1:
        out->n = pick(c, 5);
        for (int i = 0; i < out->n; i++) out->v[i] = (int64_t)pick(c, 7) - 2;
        break;
    case 2: /* identity permutation */
        out->n = rank;
        for (int i = 0; i < rank; i++) out->v[i] = i;
        break;
    case 3: /* a permutation */
        out->n = rank;
        for (int i = 0; i < rank; i++) out->v[i] = i;
        for (int i = rank - 1; i > 0; i--) {
            int j = pick(c, i + 1);
            int64_t t = out->v[i];
            out->v[i] = out->v[j];
            out->v[j] = t;
        }
        break;
    case 4: { /* a sorted subset of the axes */
        unsigned mask = byte(c);
        for (int i = 0; i < rank; i++)
            if (mask & (1u << i)) out->v[out->n++] = i;
        break;
    }
    case 5: /* the dims */
        out->n = rank;
        for (int i = 0; i < rank; i++) out->v[i] = ref->dims[i];
        break;
    case 6: /* the dims, one changed or one more */
        out->n = rank;
        for (int i = 0; i < rank; i++) out->v[i] = ref->dims[i];
        if (rank > 0 && (byte(c) & 1u)) {
            out->v[pick(c, rank)] += (int64_t)pick(c, 4) - 1;
        } else if (rank < 4) {
            out->v[out->n++] = 1 + pick(c, 3);
        }
        break;
    case 7: /* zeros, or ones */
        out->n = rank;
        for (int i = 0; i < rank; i++) out->v[i] = byte(c) & 1u;
        break;
    case 8: { /* another variable's dims (broadcast targets) */
        if (st->n_vars == 0) break;
        const oly_aval *a = oly_var_aval(st->vars[pick(c, st->n_vars)]);
        out->n = a->rank;
        for (int i = 0; i < a->rank && i < OLY_MAX_RANK; i++) out->v[i] = a->dims[i];
        break;
    }
    case 9: { /* the element count, whole or split in two (reshape) */
        int64_t n = oly_aval_size(ref);
        out->n = 1;
        out->v[0] = n;
        if ((byte(c) & 1u) && n % 2 == 0 && n > 0) {
            out->n = 2;
            out->v[0] = 2;
            out->v[1] = n / 2;
        }
        break;
    }
    default: { /* hostile: a count out of range, or extreme values */
        unsigned k = byte(c) % 4u;
        if (k == 0) {
            out->n = -1 - pick(c, 3);
        } else if (k == 1) {
            out->n = OLY_MAX_RANK + 1 + pick(c, 3);
        } else {
            out->n = 1 + pick(c, 3);
            for (int i = 0; i < out->n; i++) out->v[i] = EXTREME[pick(c, N_EXTREME)];
        }
        break;
    }
    }
}

static int64_t make_int(cursor *c, const oly_aval *ref)
{
    unsigned k = byte(c) % 8u;
    if (k < 4) return (int64_t)pick(c, 8) - 2;
    if (k < 6) return pick(c, ref->rank + 1);
    if (k == 6) return -1 - pick(c, ref->rank + 1);
    return EXTREME[pick(c, N_EXTREME)];
}

/* Fills the params struct of p (zeroed, params_size bytes) field by field. */
static void fill_params(cursor *c, const oly_prim *p, unsigned char *params, const oly_aval *ref,
                        state *st)
{
    static const double F[] = {0.0, 1.0, -1.0, 0.5, NAN, INFINITY, -INFINITY, 1e300};
    int nf = 0;
    size_t sz = 0;
    const oly_param_field *f = oly_prim_fields(p, &nf, &sz);
    for (int i = 0; i < nf; i++) {
        unsigned char *at = params + f[i].offset;
        switch (f[i].kind) {
        case OLY_FIELD_INT: {
            int64_t v = make_int(c, ref);
            memcpy(at, &v, sizeof v);
            break;
        }
        case OLY_FIELD_BOOL: {
            bool v = byte(c) & 1u;
            memcpy(at, &v, sizeof v);
            break;
        }
        case OLY_FIELD_FLOAT: {
            double v = F[pick(c, 8)];
            memcpy(at, &v, sizeof v);
            break;
        }
        case OLY_FIELD_DTYPE: {
            unsigned k = byte(c);
            /* now and then one past the enum, or negative */
            int v = k == 255u ? (int)OLY_DTYPE_COUNT : k == 254u ? -1 : (int)DTYPES[k % N_DTYPES];
            oly_dtype d = (oly_dtype)v;
            memcpy(at, &d, sizeof d);
            break;
        }
        case OLY_FIELD_ENUM: {
            int n = 0;
            while (f[i].enum_names && f[i].enum_names[n]) n++;
            int v = pick(c, n + 3) - 1; /* -1 .. n+1: in range and out */
            memcpy(at, &v, sizeof v);
            break;
        }
        case OLY_FIELD_INTS: fill_ints(c, (oly_ints *)(void *)at, ref, st); break;
        case OLY_FIELD_STR: {
            const char *s = "fz";
            memcpy(at, &s, sizeof s);
            break;
        }
        default: break; /* not generated (see keep_prim) */
        }
    }
}

/* ---------------------------------------------------------------- running */

/* Arrays for a program's inputs or outputs (owned, NULL entries allowed). */
typedef struct {
    int n;
    oly_array **a;
} arrays;

static bool arrays_init(arrays *r, int n)
{
    r->n = n;
    r->a = calloc((size_t)n + 1, sizeof *r->a);
    return r->a != NULL;
}

static void arrays_free(arrays *r)
{
    for (int i = 0; r->a && i < r->n; i++) oly_array_release(r->a[i]);
    free(r->a);
    r->a = NULL;
    r->n = 0;
}

/* Element count of p's inputs and outputs, saturating. */
static int64_t io_elems(const oly_program *p)
{
    int64_t total = 0;
    for (int i = 0; i < oly_program_num_inputs(p); i++)
        total += oly_aval_size(oly_program_input_aval(p, i));
    for (int k = 0; k < oly_program_num_outputs(p); k++)
        total += oly_aval_size(oly_program_output_aval(p, k));
    return total;
}

enum { WILD, TAME, SMOOTH }; /* value sets: all edges / small finite / no kinks */

/* A new array of aval a with values from the cursor, from value set vals. */
static oly_array *make_array(cursor *c, const oly_aval *a, int vals)
{
    int64_t n = oly_aval_size(a);
    size_t es = oly_dtype_size(a->dtype);
    if (n < 0 || n > 4 * RUN_LIMIT) return NULL;
    unsigned char *buf = malloc(es * (size_t)n + 16);
    oly_array *arr = NULL;
    if (!buf) return NULL;
    for (int64_t e = 0; e < n; e++) {
        oly_scalar s = vals != WILD ? make_tame_scalar(c, a->dtype, vals == SMOOTH)
                                    : make_scalar(c, a->dtype, false);
        oly_scalar_store(&s, a->dtype, buf + (size_t)e * es);
    }
    oly_error_clear();
    if (!check_status(oly_array_from_data(a, buf, &arr), "oly_array_from_data", NULL)) arr = NULL;
    free(buf);
    return arr;
}

/* Runs p on in (p's input count); on success out holds p's outputs. A failure
 * must carry a message; a success must produce the declared avals. */
static bool run(oly_program *p, const arrays *in, arrays *out, const char *where)
{
    if (!arrays_init(out, oly_program_num_outputs(p))) return false;
    oly_error_clear();
    if (!check_status(oly_program_run(p, 0, in->a, in->n, out->a, out->n), "oly_program_run",
                      where))
        return false;
    for (int k = 0; k < out->n; k++)
        if (!out->a[k] || !oly_aval_equal(oly_array_aval(out->a[k]), oly_program_output_aval(p, k)))
            defect("output aval differs from the program's", "oly_program_run", where);
    return true;
}

static bool close_to(double x, double y, double tol)
{
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y)) return x == y;
    return fabs(x - y) <= tol * (1.0 + fabs(y));
}

/* True when n elements of a from element a_off equal b's from b_off (floats
 * within tol relative, for a different summation order; NaN matching NaN). */
static bool same_values(const oly_array *a, int64_t a_off, const oly_array *b, int64_t b_off,
                        int64_t n, double tol)
{
    oly_dtype t = oly_array_aval(a)->dtype;
    if (t != oly_array_aval(b)->dtype) return false;
    size_t es = oly_dtype_size(t);
    const unsigned char *pa = (const unsigned char *)oly_array_data(a) + (size_t)a_off * es;
    const unsigned char *pb = (const unsigned char *)oly_array_data(b) + (size_t)b_off * es;
    if (dtype_tol(t) > tol) tol = dtype_tol(t);
    for (int64_t e = 0; e < n; e++) {
        oly_scalar x = oly_scalar_load(t, pa + (size_t)e * es);
        oly_scalar y = oly_scalar_load(t, pb + (size_t)e * es);
        bool ok;
        if (oly_dtype_is_complex(t))
            ok = close_to(x.v.c[0], y.v.c[0], tol) && close_to(x.v.c[1], y.v.c[1], tol);
        else if (oly_dtype_is_float(t))
            ok = close_to(x.v.f, y.v.f, tol);
        else
            ok = x.v.u == y.v.u;
        if (!ok) return false;
    }
    return true;
}

/* The first n outputs of got must equal want's (a transform that keeps the
 * primal computation). */
static void compare_outputs(const arrays *got, const arrays *want, int n, const char *where,
                            oly_program *p, double tol)
{
    for (int k = 0; k < n && k < got->n && k < want->n; k++) {
        const oly_aval *a = oly_array_aval(want->a[k]);
        if (!oly_aval_equal(oly_array_aval(got->a[k]), a) ||
            !same_values(got->a[k], 0, want->a[k], 0, oly_aval_size(a), tol)) {
            char buf[768], *text = NULL;
            if (oly_program_print(p, &text) != OLY_OK) text = NULL;
            snprintf(buf, sizeof buf, "output %d\n%s", k, text ? text : "(unprintable)");
            free(text);
            defect("results differ from the original program's", where, buf);
            return;
        }
    }
}

/* A program the library produced must pass its verifier; prints it as well. */
static bool verified(oly_program *p, const char *where)
{
    oly_error_clear();
    oly_status s = oly_program_verify(p);
    if (s != OLY_OK) {
        char buf[1024];
        char *text = NULL;
        if (oly_program_print(p, &text) != OLY_OK) text = NULL;
        snprintf(buf, sizeof buf, "%s: %s\n%s", oly_status_name(s), oly_last_error(),
                 text ? text : "(unprintable)");
        free(text);
        defect("verifier rejects a program the library made", where, buf);
        return false;
    }
    char *text = NULL;
    oly_error_clear();
    if (check_status(oly_program_print(p, &text), "oly_program_print", where)) {
        if (!text) defect("print succeeded without text", "oly_program_print", where);
        free(text);
    }
    return true;
}

/* ---------------------------------------------------------------- transforms */

/* The program, its inputs and its outputs on them (when it ran). */
typedef struct {
    oly_program *p;
    arrays in, out;
    bool ran;  /* out holds the outputs */
    bool tame; /* the inputs are small finite values: results are compared */
    int vals;  /* the inputs' value set (TAME or SMOOTH when tame) */
    bool f64;  /* every inexact value is float64: jvp is checked by differences */
    double tol; /* relative tolerance of those comparisons (the program's dtypes) */
} subject;

/* vmap, and with in_axes 0 / unmapped and out_axes 0, the batched run against
 * a loop of runs of the original over size examples. */
static void fuzz_vmap(cursor *c, subject *s)
{
    oly_program *p = s->p, *q = NULL;
    int n_in = oly_program_num_inputs(p), n_out = oly_program_num_outputs(p);
    int *in_axes = calloc((size_t)n_in + 1, sizeof *in_axes);
    int *out_axes = calloc((size_t)n_out + 1, sizeof *out_axes);
    arrays ex[3], bin = {0, NULL}, bout = {0, NULL};
    memset(ex, 0, sizeof ex);
    if (!in_axes || !out_axes) goto done;
    bool compare = s->ran && s->tame;
    /* mostly 0 or unmapped; now and then the last axis, or one out of range */
    for (int i = 0; i < n_in; i++) {
        unsigned k = byte(c) % 16u;
        int rank = oly_program_input_aval(p, i)->rank;
        in_axes[i] = k < 4 ? -1 : k < 13 ? 0 : k == 13 ? rank : k == 14 ? rank + 1 : -2;
        if (in_axes[i] != 0 && in_axes[i] != -1) compare = false;
    }
    for (int k = 0; k < n_out; k++) {
        unsigned m = byte(c) % 16u;
        int rank = oly_program_output_aval(p, k)->rank;
        out_axes[k] = m < 11 ? 0 : m < 13 ? -1 : m == 13 ? rank : m == 14 ? rank + 1 : -2;
        if (out_axes[k] != 0) compare = false;
    }
    unsigned sb = byte(c);
    int size = (sb & 0x1fu) == 0x1fu ? 0 : 1 + (int)(sb % 3u); /* an empty batch now and then */
    oly_error_clear();
    if (!check_status(oly_program_vmap(p, in_axes, size, out_axes, &q), "oly_program_vmap", NULL))
        goto done;
    if (oly_program_num_inputs(q) != n_in || oly_program_num_outputs(q) != n_out)
        defect("vmap changed the arity", "oly_program_vmap", NULL);
    if (!verified(q, "vmap") || !s->ran || io_elems(q) > 4 * RUN_LIMIT) goto done;

    /* Example e's inputs: the original's for e = 0, fresh ones for mapped inputs after. */
    for (int e = 0; e < size; e++) {
        if (!arrays_init(&ex[e], n_in)) goto done;
        for (int i = 0; i < n_in; i++) {
            ex[e].a[i] = e == 0 || in_axes[i] != 0
                             ? oly_array_retain(s->in.a[i])
                             : make_array(c, oly_program_input_aval(p, i), s->vals);
            if (!ex[e].a[i]) goto done;
        }
    }
    if (!arrays_init(&bin, n_in)) goto done;
    for (int i = 0; i < n_in; i++) {
        const oly_aval *qa = oly_program_input_aval(q, i);
        if (in_axes[i] != 0) {
            bin.a[i] = oly_array_retain(s->in.a[i]);
            continue;
        }
        size_t nb = oly_aval_nbytes(oly_program_input_aval(p, i));
        unsigned char *buf = malloc(nb * (size_t)size + 16);
        if (!buf) goto done;
        for (int e = 0; e < size; e++) memcpy(buf + nb * (size_t)e, oly_array_data(ex[e].a[i]), nb);
        oly_error_clear();
        bool ok = check_status(oly_array_from_data(qa, buf, &bin.a[i]), "oly_array_from_data", "vmap");
        free(buf);
        if (!ok) goto done;
    }
    if (!run(q, &bin, &bout, "vmap") || !compare) goto done;
    for (int e = 0; e < size; e++) {
        arrays one = {0, NULL};
        bool ran = run(p, &ex[e], &one, "vmap example");
        for (int k = 0; ran && k < n_out; k++) {
            int64_t n = oly_aval_size(oly_program_output_aval(p, k));
            if (!same_values(bout.a[k], n * e, one.a[k], 0, n, s->tol)) {
                char buf[768], *text = NULL;
                if (oly_program_print(p, &text) != OLY_OK) text = NULL;
                snprintf(buf, sizeof buf, "output %d, example %d of %d\n%s", k, e, size,
                         text ? text : "(unprintable)");
                free(text);
                defect("vmap differs from a loop", "oly_program_vmap", buf);
                break;
            }
        }
        arrays_free(&one);
    }
done:
    for (int e = 0; e < 3; e++) arrays_free(&ex[e]);
    arrays_free(&bin);
    arrays_free(&bout);
    oly_program_release(q);
    free(in_axes);
    free(out_axes);
}

/* Runs q (a transform of s->p) on s's inputs, then extra inputs of q's avals;
 * its first n_keep outputs must equal the original's. keep (may be NULL)
 * receives q's outputs when it ran; the caller frees it. */
static void run_transformed(cursor *c, subject *s, oly_program *q, int n_keep, const char *where,
                            arrays *keep)
{
    if (!s->ran || io_elems(q) > 4 * RUN_LIMIT) return;
    int n_in = oly_program_num_inputs(q);
    arrays in = {0, NULL}, out = {0, NULL};
    if (!arrays_init(&in, n_in)) return;
    for (int i = 0; i < n_in; i++) {
        in.a[i] = i < s->in.n ? oly_array_retain(s->in.a[i])
                              : make_array(c, oly_program_input_aval(q, i), s->vals);
        if (!in.a[i]) goto done;
    }
    if (run(q, &in, &out, where)) {
        if (s->tame) compare_outputs(&out, &s->out, n_keep, where, s->p, s->tol);
        if (keep) {
            *keep = out;
            out.a = NULL;
            out.n = 0;
        }
    }
done:
    arrays_free(&in);
    arrays_free(&out);
}

/* Adds the pairing Re sum(a * b) of two inexact arrays to *re, the sum of the
 * terms' magnitudes to *scale and the 1-norms of a and b to *na and *nb;
 * false when a value is not finite. Other
 * dtypes add nothing (their tangents are symbolic zeros). The real part of the
 * bilinear form is the pairing JAX's transposes satisfy for complex values
 * too: conj transposes to conj, imag to -i times the cotangent. */
static bool pair(const oly_array *a, const oly_array *b, double *re, double *scale, double *na,
                 double *nb)
{
    oly_dtype t = oly_array_aval(a)->dtype;
    if (!oly_dtype_is_inexact(t)) return true;
    if (t != oly_array_aval(b)->dtype) return false;
    size_t es = oly_dtype_size(t);
    int64_t n = oly_aval_size(oly_array_aval(a));
    for (int64_t e = 0; e < n; e++) {
        oly_scalar x = oly_scalar_load(t, (const unsigned char *)oly_array_data(a) + (size_t)e * es);
        oly_scalar y = oly_scalar_load(t, (const unsigned char *)oly_array_data(b) + (size_t)e * es);
        double xr = x.v.f, xi = 0, yr = y.v.f, yi = 0;
        if (oly_dtype_is_complex(t)) {
            xr = x.v.c[0], xi = x.v.c[1], yr = y.v.c[0], yi = y.v.c[1];
        }
        if (!isfinite(xr) || !isfinite(xi) || !isfinite(yr) || !isfinite(yi)) return false;
        *re += xr * yr - xi * yi;
        *scale += fabs(xr * yr) + fabs(xi * yi);
        *na += fabs(xr) + fabs(xi);
        *nb += fabs(yr) + fabs(yi);
    }
    return true;
}

/* The transpose's defining identity <ct, L v> == <L^T ct, v>, with the
 * residuals the primal program computed (res: its outputs after n_out). */
static void check_transpose(cursor *c, subject *s, const arrays *res, int n_out, int n_res,
                            oly_program *lin, oly_program *ct)
{
    int n_lin = oly_program_num_inputs(lin) - n_res, m = oly_program_num_outputs(lin);
    arrays lin_in = {0, NULL}, lv = {0, NULL}, ct_in = {0, NULL}, ltc = {0, NULL};
    if (res->n != n_out + n_res || io_elems(lin) > 4 * RUN_LIMIT) return;
    if (oly_program_num_inputs(ct) != n_res + m || oly_program_num_outputs(ct) != n_lin) {
        defect("transpose: arity is not (residuals, cotangents) -> linear inputs",
               "oly_program_transpose", NULL);
        return;
    }
    if (!arrays_init(&lin_in, n_res + n_lin) || !arrays_init(&ct_in, n_res + m)) goto done;
    for (int i = 0; i < n_res; i++) {
        lin_in.a[i] = oly_array_retain(res->a[n_out + i]);
        ct_in.a[i] = oly_array_retain(res->a[n_out + i]);
    }
    for (int i = n_res; i < n_res + n_lin; i++)
        if (!(lin_in.a[i] = make_array(c, oly_program_input_aval(lin, i), TAME))) goto done;
    for (int k = 0; k < m; k++)
        if (!(ct_in.a[n_res + k] = make_array(c, oly_program_output_aval(lin, k), TAME))) goto done;
    if (!run(lin, &lin_in, &lv, "linearize (linear)") || !run(ct, &ct_in, &ltc, "transpose"))
        goto done;
    double lre = 0, rre = 0, scale = 0, nct = 0, nlv = 0, nltc = 0, nv = 0;
    for (int i = 0; i < n_lin; i++)
        if (!oly_aval_equal(oly_array_aval(ltc.a[i]), oly_program_input_aval(lin, n_res + i))) {
            defect("transpose: a cotangent's aval differs from its linear input's",
                   "oly_program_transpose", NULL);
            goto done;
        }
    for (int k = 0; k < m; k++)
        if (!pair(ct_in.a[n_res + k], lv.a[k], &lre, &scale, &nct, &nlv)) goto done;
    for (int i = 0; i < n_lin; i++)
        if (!pair(ltc.a[i], lin_in.a[n_res + i], &rre, &scale, &nltc, &nv)) goto done;
    /* The linear program rounds through every dtype the program has, and its
     * intermediates can be far larger than its results (a chain of 1/x): the
     * bound allows the pairing's terms and |ct| |v| times that rounding. A
     * wrong rule (a lost factor, sign or axis) is off by the size of L. */
    double bound = s->tol * (4 * scale + nct * nv) + 1e-12;
    if (fabs(lre - rre) > bound) {
        char buf[1024], *text = NULL;
        if (oly_program_print(s->p, &text) != OLY_OK) text = NULL;
        snprintf(buf, sizeof buf, "<ct, L v> = %.9g, <L^T ct, v> = %.9g\n%s", lre, rre,
                 text ? text : "(unprintable)");
        free(text);
        defect("transpose is not the transpose of the linear program", "oly_program_transpose",
               buf);
    }
done:
    arrays_free(&lin_in);
    arrays_free(&lv);
    arrays_free(&ct_in);
    arrays_free(&ltc);
}

/* p(x + h v) - p(x - h v) over 2h: the jvp program q's tangents (inputs of
 * s, tangents v drawn here) must agree with central differences, for float64
 * programs on SMOOTH inputs. */
static void check_jvp(cursor *c, subject *s, oly_program *q, const bool *nz_in,
                      const bool *nz_out)
{
    const double h = 1e-6;
    oly_program *p = s->p;
    int n_in = oly_program_num_inputs(p), n_out = oly_program_num_outputs(p);
    arrays qin = {0, NULL}, qout = {0, NULL}, lo = {0, NULL}, hi = {0, NULL};
    arrays flo = {0, NULL}, fhi = {0, NULL};
    int n_q = oly_program_num_inputs(q);
    if (!arrays_init(&qin, n_q) || !arrays_init(&lo, n_in) || !arrays_init(&hi, n_in)) goto done;
    for (int i = 0, t = n_in; i < n_in; i++) {
        const oly_aval *a = oly_program_input_aval(p, i);
        qin.a[i] = oly_array_retain(s->in.a[i]);
        if (!nz_in[i]) {
            lo.a[i] = oly_array_retain(s->in.a[i]);
            hi.a[i] = oly_array_retain(s->in.a[i]);
            continue;
        }
        if (t >= n_q || !(qin.a[t] = make_array(c, a, SMOOTH))) goto done;
        if (a->dtype != OLY_FLOAT64) { /* an integer tangent is ignored */
            lo.a[i] = oly_array_retain(s->in.a[i]);
            hi.a[i] = oly_array_retain(s->in.a[i]);
            t++;
            continue;
        }
        int64_t n = oly_aval_size(a);
        double *bl = malloc(sizeof(double) * (size_t)(n + 1)), *bh = malloc(sizeof(double) * (size_t)(n + 1));
        const double *x = oly_array_data(s->in.a[i]), *v = oly_array_data(qin.a[t]);
        bool ok = bl && bh;
        for (int64_t e = 0; ok && e < n; e++) {
            bl[e] = x[e] - h * v[e];
            bh[e] = x[e] + h * v[e];
        }
        ok = ok && oly_array_from_data(a, bl, &lo.a[i]) == OLY_OK &&
             oly_array_from_data(a, bh, &hi.a[i]) == OLY_OK;
        free(bl);
        free(bh);
        if (!ok) goto done;
        t++;
    }
    if (!run(q, &qin, &qout, "jvp") || !run(p, &lo, &flo, "jvp (x - h v)") ||
        !run(p, &hi, &fhi, "jvp (x + h v)"))
        goto done;
    for (int j = 0, t = n_out; j < n_out; j++) {
        if (!nz_out[j]) continue;
        int k = t++;
        const oly_aval *a = oly_program_output_aval(p, j);
        if (a->dtype != OLY_FLOAT64 || k >= qout.n) continue;
        int64_t n = oly_aval_size(a);
        const double *tan = oly_array_data(qout.a[k]), *fl = oly_array_data(flo.a[j]),
                     *fh = oly_array_data(fhi.a[j]), *f = oly_array_data(s->out.a[j]);
        for (int64_t e = 0; e < n; e++) {
            double fd = (fh[e] - fl[e]) / (2 * h);
            if (!isfinite(fd) || !isfinite(tan[e]) || !isfinite(f[e])) continue;
            if (fabs(fd - tan[e]) > 1e-4 * (1 + fabs(fd) + fabs(f[e]))) {
                char buf[1024], *text = NULL;
                if (oly_program_print(p, &text) != OLY_OK) text = NULL;
                snprintf(buf, sizeof buf, "output %d [%lld]: jvp %.9g, differences %.9g\n%s", j,
                         (long long)e, tan[e], fd, text ? text : "(unprintable)");
                free(text);
                defect("jvp disagrees with finite differences", "oly_program_jvp", buf);
                goto done;
            }
        }
    }
done:
    arrays_free(&qin);
    arrays_free(&qout);
    arrays_free(&lo);
    arrays_free(&hi);
    arrays_free(&flo);
    arrays_free(&fhi);
}

static void fuzz_transforms(cursor *c, subject *s)
{
    oly_program *p = s->p;
    int n_in = oly_program_num_inputs(p), n_out = oly_program_num_outputs(p);
    oly_program *q = NULL, *lin = NULL, *ct = NULL;

    oly_error_clear();
    if (check_status(oly_program_dce(p, &q), "oly_program_dce", NULL)) {
        if (oly_program_num_inputs(q) != n_in || oly_program_num_outputs(q) != n_out)
            defect("dce changed the arity", "oly_program_dce", NULL);
        else if (verified(q, "dce"))
            run_transformed(c, s, q, n_out, "dce", NULL);
        oly_program_release(q);
        q = NULL;
    }

    fuzz_vmap(c, s);

    bool *nz_in = calloc((size_t)n_in + 1, sizeof *nz_in);
    bool *nz_out = calloc((size_t)n_out + 1, sizeof *nz_out);
    if (!nz_in || !nz_out) goto done;
    int n_nz = 0;
    for (int i = 0; i < n_in; i++) n_nz += nz_in[i] = (byte(c) & 3u) != 0;
    oly_error_clear();
    if (check_status(oly_program_jvp(p, nz_in, &q, nz_out), "oly_program_jvp", NULL)) {
        if (oly_program_num_inputs(q) != n_in + n_nz)
            defect("jvp: input count is not primals + nonzero tangents", "oly_program_jvp", NULL);
        else if (verified(q, "jvp")) {
            run_transformed(c, s, q, n_out, "jvp", NULL);
            if (s->ran && s->vals == SMOOTH && s->f64) check_jvp(c, s, q, nz_in, nz_out);
        }
        oly_program_release(q);
        q = NULL;
    }

    int n_res = -1;
    oly_error_clear();
    if (check_status(oly_program_linearize(p, nz_in, &q, &lin, &n_res, nz_out),
                     "oly_program_linearize", NULL)) {
        if (n_res < 0 || n_res > oly_program_num_inputs(lin))
            defect("linearize: residual count out of range", "oly_program_linearize", NULL);
        bool ok = verified(q, "linearize (primal)");
        ok = verified(lin, "linearize (linear)") && ok;
        if (ok) {
            arrays res = {0, NULL};
            run_transformed(c, s, q, n_out, "linearize (primal)", &res);
            unsigned tb = byte(c);
            if ((tb & 15u) == 15u) { /* a wrong residual count: an error or a valid program */
                oly_program *bad = NULL;
                oly_error_clear();
                if (check_status(oly_program_transpose(lin, n_res + ((tb & 16u) ? 1 : -1), &bad),
                                 "oly_program_transpose", "wrong n_res"))
                    verified(bad, "transpose (n_res off by one)");
                oly_program_release(bad);
            }
            oly_error_clear();
            if (check_status(oly_program_transpose(lin, n_res, &ct), "oly_program_transpose",
                             NULL)) {
                if (verified(ct, "transpose") && s->tame && res.a)
                    check_transpose(c, s, &res, n_out, n_res, lin, ct);
                oly_program_release(ct);
            }
            arrays_free(&res);
        }
        oly_program_release(q);
        oly_program_release(lin);
    }
done:
    free(nz_in);
    free(nz_out);
}

/* ---------------------------------------------------------------- eager */

/* Applies the recorded equations with oly_apply on fresh arrays of their input
 * avals: a success must give the outputs the builder's shape rule declared. */
static void fuzz_eager(cursor *c, state *st)
{
    for (int j = 0; j < st->n_eager; j++) {
        eager_eqn *e = &st->eager[j];
        oly_array *in[MAX_IN] = {0}, *out[MAX_OUT] = {0};
        int got = -1, nf = 0;
        size_t psize = 0;
        bool made = true;
        oly_prim_fields(e->p, &nf, &psize);
        for (int i = 0; i < e->n_in && made; i++) {
            oly_aval a = e->in[i];
            a.weak = false;
            made = (in[i] = make_array(c, &a, WILD)) != NULL;
        }
        oly_error_clear();
        if (made && check_status(oly_apply(e->p, psize > 0 ? e->params : NULL, in, e->n_in, out,
                                           MAX_OUT, &got),
                                 "oly_apply", oly_prim_name(e->p))) {
            if (got != e->n_out)
                defect("oly_apply: output count differs from the builder's", "oly_apply",
                       oly_prim_name(e->p));
            for (int k = 0; k < got && k < e->n_out && k < MAX_OUT; k++)
                if (!out[k] || !oly_aval_equal(oly_array_aval(out[k]), &e->out[k]))
                    defect("oly_apply: output aval differs from the builder's", "oly_apply",
                           oly_prim_name(e->p));
        }
        for (int i = 0; i < e->n_in; i++) oly_array_release(in[i]);
        for (int k = 0; k < MAX_OUT; k++) oly_array_release(out[k]);
    }
}

/* ---------------------------------------------------------------- the target */

/* Appends one equation of p with n_in operands; true when the builder took it. */
static bool append_one(cursor *c, state *st, const oly_prim *p, int n_in)
{
    oly_atom in[MAX_IN];
    oly_aval ref;
    memset(&ref, 0, sizeof ref);
    ref.dtype = OLY_FLOAT32;
    if (n_in > MAX_IN) n_in = MAX_IN;
    if (n_in > 0) {
        in[0] = pick_atom(c, st);
        ref = atom_aval(&in[0]);
        for (int i = 1; i < n_in; i++) in[i] = pick_peer(c, st, &ref);
    }
    _Alignas(16) unsigned char params[PARAMS_MAX];
    memset(params, 0, sizeof params);
    int nf = 0;
    size_t psize = 0;
    oly_prim_fields(p, &nf, &psize);
    if (psize > sizeof params) return false;
    fill_params(c, p, params, &ref, st);
    /* Room for the outputs: mostly plenty; now and then exactly 0..2 slots on
     * the heap, so that a write past max_out is caught. */
    unsigned rb = byte(c);
    int max_out = (rb & 7u) == 7u ? (int)(rb >> 3) % 3 : MAX_OUT;
    oly_var **outs = max_out > 0 ? malloc((size_t)max_out * sizeof *outs) : NULL;
    if (max_out > 0 && !outs) return false;
    int got = -1;
    oly_error_clear();
    oly_status s = oly_builder_append(st->b, p, n_in > 0 ? in : NULL, n_in,
                                      psize > 0 ? params : NULL, NULL, 0, outs, max_out, &got);
    bool ok = check_status(s, "oly_builder_append", oly_prim_name(p));
    if (ok) {
        if (got < 0 || got > 64)
            defect("append: output count out of range", "oly_builder_append", oly_prim_name(p));
        for (int k = 0; k < got && k < max_out; k++) add_var(st, outs[k]);
        if (st->n_eager < MAX_EAGER && got >= 0 && got <= max_out && got <= MAX_OUT) {
            eager_eqn *e = &st->eager[st->n_eager++];
            e->p = p;
            e->n_in = n_in;
            e->n_out = got;
            for (int i = 0; i < n_in; i++) e->in[i] = atom_aval(&in[i]);
            for (int k = 0; k < got; k++) e->out[k] = *oly_var_aval(outs[k]);
            memcpy(e->params, params, psize);
        }
    }
    free(outs);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int RANKS[] = {1, 0, 2, 3};
    static const int64_t DIMS[] = {2, 1, 3, 4, 0};
    static const int ARITY[] = {1, 2, 1, 2, 3, 0, 4, 5};

    prim_list prims;
    prims.n = 0;
    oly_prim_foreach(keep_prim, &prims);
    if (prims.n == 0) return 0;

    cursor cur = {data, size, 0, 0};
    cursor *c = &cur;
    state st;
    memset(&st, 0, sizeof st);
    st.all_f64 = true;
    oly_program *prog = NULL;

    bool x64_before = oly_x64_enabled();
    unsigned head = byte(c);
    oly_set_x64((head & 0x40u) != 0);

    oly_error_clear();
    if (!check_status(oly_builder_new(&st.b), "oly_builder_new", NULL)) goto done;

    int n_inputs = 1 + (int)(head % 3u);
    for (int i = 0; i < n_inputs; i++) {
        oly_aval a;
        int64_t dims[OLY_MAX_RANK + 2] = {0};
        oly_dtype t = pick_dtype(c);
        unsigned rb = byte(c);
        int rank = RANKS[rb % 4u];
        if (rb >= 252u) { /* hostile: ranks at and past the limit, huge or negative dims */
            static const int HOSTILE_RANK[] = {5, OLY_MAX_RANK, OLY_MAX_RANK + 1, -1};
            rank = HOSTILE_RANK[rb - 252u];
            for (int d = 0; d < rank; d++)
                dims[d] = (byte(c) & 1u) ? EXTREME[pick(c, N_EXTREME)] : 1 + pick(c, 4);
            if (byte(c) == 255u) t = (oly_dtype)OLY_DTYPE_COUNT;
        } else {
            for (int d = 0; d < rank; d++) dims[d] = DIMS[pick(c, 5)];
        }
        oly_error_clear();
        if (!check_status(oly_aval_make(t, rank, dims, &a), "oly_aval_make", NULL)) continue;
        a.weak = (byte(c) & 0x0fu) == 0x0fu;
        oly_var *v = NULL;
        oly_error_clear();
        if (check_status(oly_builder_add_input(st.b, &a, &v), "oly_builder_add_input", NULL))
            add_var(&st, v);
    }
    if (head & 0x80u) { /* a constant input */
        oly_aval a;
        int64_t dims[1] = {DIMS[pick(c, 5)]};
        oly_dtype t = pick_dtype(c);
        oly_array *arr = NULL;
        oly_var *v = NULL;
        if (oly_aval_make(t, 1, dims, &a) == OLY_OK && oly_array_new(&a, &arr) == OLY_OK) {
            oly_error_clear();
            if (check_status(oly_builder_add_const(st.b, arr, &v), "oly_builder_add_const", NULL))
                add_var(&st, v);
            oly_array_release(arr);
        }
    }

    int n_eqns = 1 + pick(c, 12);
    for (int e = 0; e < n_eqns; e++) {
        if (e > 0 && c->i >= c->n) break; /* out of bytes: keep short inputs short */
        const oly_prim *p = prims.p[pick(c, prims.n)];
        /* The arity is not in the public row: a first guess, then retries with
         * the common ones (each attempt draws fresh operands and params). */
        static const int RETRY[] = {1, 2, 3, 0};
        int guess = ARITY[pick(c, 8)];
        if (append_one(c, &st, p, guess)) continue;
        for (int r = 0; r < 4; r++)
            if (RETRY[r] != guess && append_one(c, &st, p, RETRY[r])) break;
    }

    static const int N_OUTS[] = {1, 2, 3, 0};
    int n_outs = N_OUTS[pick(c, 4)];
    oly_atom outs[3];
    for (int k = 0; k < n_outs; k++) {
        unsigned m = byte(c) % 8u;
        if (m == 7 || st.n_vars == 0)
            outs[k] = oly_atom_lit(make_scalar(c, pick_dtype(c), false));
        else if (m >= 4)
            outs[k] = oly_atom_var(st.vars[pick(c, st.n_vars)]);
        else
            outs[k] = oly_atom_var(st.vars[st.n_vars - 1 - pick(c, st.n_vars < 3 ? st.n_vars : 3)]);
    }
    oly_error_clear();
    if (!check_status(oly_builder_finish(st.b, outs, n_outs, &prog), "oly_builder_finish", NULL))
        goto done;

    if (!verified(prog, "oly_builder_finish")) goto done;
    /* The x64 switch may change between tracing and running, as a user's
     * config.update can; every later step must cope (its state is restored below). */
    if (head & 0x20u) oly_set_x64(!oly_x64_enabled());

    subject sub;
    memset(&sub, 0, sizeof sub);
    sub.p = prog;
    unsigned vb = byte(c) % 4u;
    sub.tame = vb != 0;
    sub.vals = vb == 0 ? WILD : vb == 3 ? SMOOTH : TAME;
    sub.f64 = st.all_f64;
    sub.tol = st.tol;
    if (st.total_elems <= RUN_LIMIT && io_elems(prog) <= RUN_LIMIT &&
        arrays_init(&sub.in, oly_program_num_inputs(prog))) {
        bool made = true;
        for (int i = 0; i < sub.in.n && made; i++)
            made = (sub.in.a[i] = make_array(c, oly_program_input_aval(prog, i), sub.vals)) != NULL;
        sub.ran = made && run(prog, &sub.in, &sub.out, "program");
        arrays again = {0, NULL};
        if (sub.ran && run(prog, &sub.in, &again, "program (cached)"))
            compare_outputs(&again, &sub.out, sub.out.n, "a second run", prog, sub.tol);
        arrays_free(&again);
    }
    if (st.total_elems <= RUN_LIMIT) fuzz_eager(c, &st);
    fuzz_transforms(c, &sub);
    arrays_free(&sub.in);
    arrays_free(&sub.out);

done:
    oly_program_release(prog);
    oly_builder_free(st.b);
    oly_set_x64(x64_before);
    oly_error_clear();
    return 0;
}

#ifdef FUZZ_STANDALONE_MAIN
/* Without libFuzzer: runs each file named on the command line once (reproducers). */
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) continue;
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
#endif

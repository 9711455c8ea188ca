/* test_fuse.c — the executor's rewrites (src/exec/fuse.c, src/cpu/fused.c):
 * random elementwise programs over every dtype give the same bytes fused and
 * unfused (broadcasts, scalars, reductions between chains, outputs used twice,
 * empty and multi-tile shapes); groups never span an effect; CSE merges pure
 * duplicates and keeps effectful ones; the group structure as the debug text
 * shows it. */
#include "test.h"
#include "testutil.h"
#include "exec/exec.h"
#include "cpu/fused.h"
#include "cpu/simd.h"
#include "rt/rt.h"

/* ---------------------------------------------------------------- an effectful test row */

/* t_fx x: x, and counts its runs (an io effect: never removed, merged or moved). */
static int fx_runs;
static oly_status fx_shape(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = ctx->in[0];
    return OLY_OK;
}
static uint32_t fx_effects(const void *params)
{
    (void)params;
    return OLY_EFFECT_IO;
}
static oly_status k_fx(const oly_kernel_ctx *c)
{
    fx_runs++;
    memcpy(c->out[0], c->in[0], oly_aval_nbytes(&c->out_aval[0]));
    return OLY_OK;
}
static const oly_prim t_fx = {.name = "t_fx", .n_in = 1, .n_out = 1, .shape = fx_shape,
                              .effects = fx_effects};
static const oly_cpu_kernel t_fx_cpu = {.fn = k_fx};
__attribute__((constructor)) static void register_kernels(void)
{
    OLY_ASSERT(oly__cpu_register(&t_fx, &t_fx_cpu) == OLY_OK);
}

/* ---------------------------------------------------------------- helpers */

/* Fusion and CSE on for every size (the default leaves small groups alone),
 * whatever the environment says; then back to the defaults. */
static void rewrites_all(void) { oly__exec_set_rewrites(1, 1, 0); }
static void rewrites_default(void) { oly__exec_set_rewrites(-1, -1, -1); }

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static int pick(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }

static const oly_prim *P(const char *name)
{
    const oly_prim *p = oly_prim_lookup(name);
    OLY_ASSERT(p);
    return p;
}

static oly_var *app(oly_builder *b, const char *prim, const oly_atom *in, int n_in,
                    const void *params)
{
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, P(prim), in, n_in, params, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_atom V(oly_var *v) { return oly_atom_var(v); }

static oly_atom lit(oly_dtype t, double v)
{
    oly_scalar s = {.dtype = t};
    if (oly_dtype_is_complex(t)) {
        s.v.c[0] = v;
        s.v.c[1] = 0.5;
    } else if (oly_dtype_is_float(t)) {
        s.v.f = v;
    } else if (t == OLY_BOOL) {
        s.v.i = v != 0;
    } else {
        s.v.i = (int64_t)v;
    }
    return oly_atom_lit(s);
}

/* Random input values of aval a. */
static oly_array *random_array(rng *r, const oly_aval *a)
{
    int64_t n = oly_aval_size(a);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(next(r) % 20001) / 10000.0 - 1.0; /* [-1, 1] */
        if (a->dtype == OLY_BOOL) v[i] = u > 0;
        else if (oly_dtype_is_unsigned_int(a->dtype)) v[i] = (double)(next(r) % 100);
        else if (oly_dtype_is_int(a->dtype)) v[i] = (double)(int)(u * 60);
        else v[i] = u * 3;
    }
    oly_array *arr = tu_array(a->dtype, a->rank, a->dims, v);
    free(v);
    return arr;
}

/* Runs p on in (n_in arrays) into fresh outputs (n_out). */
static oly_status run(oly_program *p, oly_array **in, int n_in, oly_array **out, int n_out)
{
    for (int k = 0; k < n_out; k++) out[k] = NULL;
    return oly_program_run(p, 0, in, n_in, out, n_out);
}

static bool same_bytes(const oly_array *a, const oly_array *b)
{
    if (!a || !b || !oly_aval_equal(&a->aval, &b->aval)) return false;
    return memcmp(oly_array_data(a), oly_array_data(b), oly_aval_nbytes(&a->aval)) == 0;
}

/* Nothing moved across an effect: every equation before an effectful one runs
 * in a step before it, every one after in a step after; every equation runs
 * once (or was dropped as a duplicate). Returns the number of fused groups. */
static int check_structure(oly_program *p)
{
    const oly_exe *exe;
    if (oly__exec_get(p, &exe) != OLY_OK) {
        CHECK(0);
        return 0;
    }
    const oly_rewrite *rw = exe->rw;
    int *step_of = malloc((size_t)(p->n_eqn + 1) * sizeof *step_of);
    for (int i = 0; i < p->n_eqn; i++) step_of[i] = -1;
    int groups = 0;
    for (int s = 0; s < rw->n_eqn; s++) {
        const oly_eqn *e = &rw->eqn[s];
        if (strcmp(e->prim->name, "fused") == 0) {
            const oly_fused *g = e->params;
            groups++;
            for (int k = 0; k < g->n_op; k++) {
                int i = (int)(g->op[k].eqn - p->eqn);
                CHECK(i >= 0 && i < p->n_eqn);
                CHECK_EQ(step_of[i], -1);
                step_of[i] = s;
            }
            continue; /* (members that only rename a value have no op) */
        }
        /* an equation copied from the program: find it by its first output */
        for (int i = 0; i < p->n_eqn; i++)
            if (p->eqn[i].n_out && e->n_out && p->eqn[i].out[0] == e->out[0]) {
                CHECK_EQ(step_of[i], -1);
                step_of[i] = s;
            }
    }
    for (int i = 0; i < p->n_eqn; i++) {
        if (!p->eqn[i].effects) continue;
        CHECK(step_of[i] >= 0); /* effects are never dropped */
        for (int j = 0; j < p->n_eqn; j++) {
            if (step_of[j] < 0 || j == i) continue;
            if (j < i) CHECK(step_of[j] < step_of[i]);
            else CHECK(step_of[j] > step_of[i]);
        }
    }
    free(step_of);
    return groups;
}

/* ---------------------------------------------------------------- random programs */

typedef struct val {
    oly_atom a;
    oly_dtype t;
    bool full;                  /* the program's shape (else rank 0) */
} val;

typedef struct shape_case {
    int rank;
    int64_t dims[3];
    int src_rank;               /* the broadcast source */
    int64_t src_dims[3];
    int64_t bdims[3];
} shape_case;

static const shape_case SHAPES[] = {
    {3, {3, 37, 41}, 2, {37, 41}, {1, 2}},       /* 4551 elements: several tiles */
    {3, {3, 37, 41}, 3, {3, 1, 41}, {0, 1, 2}},  /* gathered in runs of 41 */
    {3, {3, 37, 41}, 2, {37, 1}, {1, 2}},        /* runs of one element repeated */
    {2, {64, 65}, 1, {64}, {0}},                 /* a column: stride-0 inner runs */
    {1, {7}, 0, {0}, {0}},                       /* one tile, rank-0 source */
    {1, {0}, 1, {1}, {0}},                       /* empty */
    {3, {2, 0, 3}, 1, {3}, {2}},                 /* empty */
    {0, {0}, 0, {0}, {0}},                       /* rank 0: n = 1 */
};

/* Rows a random program draws from: the elementwise and special rows. */
static const oly_prim *row_at(rng *r, bool *binary)
{
    int lo1 = OLY_PRIM_ID_neg, n1 = OLY_PRIM_ID_select_n - OLY_PRIM_ID_neg;
    int lo2 = OLY_PRIM_ID_erf, n2 = OLY_PRIM_ID_zeta - OLY_PRIM_ID_erf + 1;
    int k = pick(r, n1 + n2);
    const oly_prim *p = oly__prim_at(k < n1 ? lo1 + k : lo2 + k - n1);
    *binary = p->n_in == 2;
    return p;
}

static const val *pick_val(rng *r, const val *pool, int n, int want_dtype, bool full)
{
    int start = pick(r, n);
    for (int i = 0; i < n; i++) {
        const val *v = &pool[(start + i) % n];
        if (v->full == full && (want_dtype < 0 || (int)v->t == want_dtype)) return v;
    }
    return NULL;
}

/* A random program over dtype t and shape sc (seed): inputs x0, x1 (full),
 * s (rank 0), src (the broadcast source); ~30 equations; several outputs.
 * fx: an effect in the middle. */
static oly_program *random_program(uint64_t seed, oly_dtype t, const shape_case *sc, bool fx)
{
    rng r = {seed * 0x9e3779b97f4a7c15ull + 1};
    oly_builder *b;
    if (oly_builder_new(&b) != OLY_OK) return NULL;
    oly_aval full, scalar, src;
    OLY_ASSERT(oly_aval_make(t, sc->rank, sc->dims, &full) == OLY_OK);
    OLY_ASSERT(oly_aval_make(t, 0, NULL, &scalar) == OLY_OK);
    OLY_ASSERT(oly_aval_make(t, sc->src_rank, sc->src_dims, &src) == OLY_OK);
    oly_var *x0, *x1, *s, *bs;
    CHECK_OK(oly_builder_add_input(b, &full, &x0));
    CHECK_OK(oly_builder_add_input(b, &full, &x1));
    CHECK_OK(oly_builder_add_input(b, &scalar, &s));
    CHECK_OK(oly_builder_add_input(b, &src, &bs));
    enum { MAXV = 64 };
    val pool[MAXV];
    int n = 0;
    pool[n++] = (val){V(x0), t, true};
    pool[n++] = (val){V(x1), t, true};
    pool[n++] = (val){V(s), t, false};
    oly_params_broadcast_in_dim bp = {0};
    bp.shape.n = sc->rank;
    for (int d = 0; d < sc->rank; d++) bp.shape.v[d] = sc->dims[d];
    bp.broadcast_dimensions.n = sc->src_rank;
    for (int d = 0; d < sc->src_rank; d++) bp.broadcast_dimensions.v[d] = sc->bdims[d];
    int len = 24 + pick(&r, 12);
    for (int step = 0; step < len && n < MAXV; step++) {
        if (fx && step == len / 2) {
            const val *v = pick_val(&r, pool, n, -1, true);
            oly_var *o = NULL;
            CHECK_OK(oly_builder_append(b, &t_fx, &v->a, 1, NULL, NULL, 0, &o, 1, NULL));
            pool[n++] = (val){V(o), v->t, true};
            continue;
        }
        int kind = pick(&r, 12);
        oly_var *o = NULL;
        oly_atom in[3];
        int n_in = 0;
        const void *params = NULL;
        oly_params_round pr = {pick(&r, 2)};
        oly_params_integer_pow pi = {pick(&r, 7) - 2};
        oly_params_convert pc = {(oly_dtype)pick(&r, OLY_DTYPE_COUNT), false};
        oly_params_reduce pred = {0};
        const oly_prim *p = NULL;
        if (kind <= 7) {
            bool binary;
            p = row_at(&r, &binary);
            if (p->params_size) {
                if (p == P("round")) params = &pr;
                else if (p == P("integer_pow")) params = &pi;
                else if (p == P("convert_element_type")) params = &pc;
                else continue;
            }
            const val *a = pick_val(&r, pool, n, -1, true);
            in[n_in++] = a->a;
            if (binary) {
                int how = pick(&r, 4);
                const val *c = how == 0 ? pick_val(&r, pool, n, (int)a->t, false) : NULL;
                oly_atom bb = c ? c->a : lit(a->t, 2.5 - pick(&r, 5));
                if (how >= 2) {
                    const val *f = pick_val(&r, pool, n, (int)a->t, true);
                    if (f) bb = f->a;
                }
                if (how == 3 && a->t == t) { /* a broadcast operand */
                    oly_atom src_a = V(bs);
                    oly_var *bv = app(b, "broadcast_in_dim", &src_a, 1, &bp);
                    if (bv) bb = V(bv);
                }
                in[n_in++] = bb;
                if (pick(&r, 2)) {
                    oly_atom tmp = in[0];
                    in[0] = in[1];
                    in[1] = tmp;
                }
            }
        } else if (kind == 8) { /* select_n(pred, a, b) */
            p = P("select_n");
            const val *w = pick_val(&r, pool, n, OLY_BOOL, pick(&r, 3) != 0);
            const val *a = pick_val(&r, pool, n, -1, true);
            const val *c = a ? pick_val(&r, pool, n, (int)a->t, true) : NULL;
            in[n_in++] = w ? w->a : lit(OLY_BOOL, pick(&r, 2));
            in[n_in++] = a->a;
            in[n_in++] = c->a;
        } else if (kind == 9) { /* a broadcast of the source, of s or of a literal */
            p = P("broadcast_in_dim");
            params = &bp;
            in[n_in++] = V(bs);
        } else if (kind == 10) { /* reshape to flat and back */
            const val *a = pick_val(&r, pool, n, -1, true);
            int64_t total = oly_aval_size(&full);
            oly_params_reshape flat = {.new_sizes = {.n = 1, .v = {total}}};
            oly_params_reshape back = {0};
            back.new_sizes.n = sc->rank;
            for (int d = 0; d < sc->rank; d++) back.new_sizes.v[d] = sc->dims[d];
            oly_var *f1 = app(b, "reshape", &a->a, 1, &flat);
            if (!f1) break;
            oly_atom fa = V(f1);
            oly_var *f2 = app(b, "reshape", &fa, 1, &back);
            if (!f2) break;
            pool[n++] = (val){V(f2), a->t, true};
            continue;
        } else { /* a reduction: a rank-0 value for later binaries (closes groups) */
            p = P("reduce_sum");
            const val *a = pick_val(&r, pool, n, -1, true);
            pred.axes.n = sc->rank;
            for (int d = 0; d < sc->rank; d++) pred.axes.v[d] = d;
            params = &pred;
            in[n_in++] = a->a;
        }
        oly_status st = oly_builder_append(b, p, in, n_in, params, NULL, 0, &o, 1, NULL);
        if (st != OLY_OK) continue; /* the row does not take these dtypes */
        const oly_aval *oa = oly_var_aval(o);
        pool[n++] = (val){V(o), oa->dtype, oly_aval_size(oa) == oly_aval_size(&full) && oa->rank == full.rank};
    }
    /* Outputs: the last value, two more (perhaps the same one twice), an input. */
    oly_atom outs[4] = {pool[n - 1].a, pool[pick(&r, n)].a, pool[pick(&r, n)].a, V(x1)};
    outs[2] = pick(&r, 2) ? outs[1] : outs[2];
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 4, &prog));
    oly_builder_free(b);
    return prog;
}

/* Fused + CSE'd and plain runs of the same random program agree byte for byte. */
static int compare_random(uint64_t seed, oly_dtype t, const shape_case *sc, bool fx)
{
    oly__exec_set_rewrites(1, 1, 0);
    oly_program *pf = random_program(seed, t, sc, fx);
    oly__exec_set_rewrites(0, 0, 0);
    oly_program *pu = random_program(seed, t, sc, fx);
    oly__exec_set_rewrites(-1, -1, -1);
    int groups = 0;
    if (!pf || !pu) {
        CHECK(0);
        goto done;
    }
    oly_array *in[4];
    rng r = {seed + 77};
    for (int i = 0; i < 4; i++) in[i] = random_array(&r, oly_program_input_aval(pf, i));
    oly_array *of[4], *ou[4];
    oly__exec_set_rewrites(1, 1, 0);
    CHECK_OK(run(pf, in, 4, of, 4));
    oly__exec_set_rewrites(0, 0, 0);
    CHECK_OK(run(pu, in, 4, ou, 4));
    oly__exec_set_rewrites(-1, -1, -1);
    for (int k = 0; k < 4; k++) {
        if (!same_bytes(of[k], ou[k])) {
            char *text = NULL;
            oly_program_print(pf, &text);
            CHECK_FAIL_("seed %llu dtype %s output %d differs fused/unfused:\n%s",
                        (unsigned long long)seed, oly_dtype_name(t), k, text ? text : "");
            free(text);
        }
        oly_array_release(of[k]);
        oly_array_release(ou[k]);
    }
    for (int i = 0; i < 4; i++) oly_array_release(in[i]);
    groups = check_structure(pf);
    CHECK_EQ(check_structure(pu), 0);
done:
    oly_program_release(pf);
    oly_program_release(pu);
    return groups;
}

TEST(fuse_random_programs_every_dtype)
{
    int groups = 0, programs = 0;
    for (int t = 0; t < OLY_DTYPE_COUNT; t++)
        for (int c = 0; c < OLY_ARRAY_LEN(SHAPES); c++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                groups += compare_random(seed * 131 + (uint64_t)t * 7 + (uint64_t)c, (oly_dtype)t,
                                         &SHAPES[c], false);
                programs++;
            }
    /* The programs did fuse (a test that cannot fail is a defect). */
    CHECK(groups > programs);
}

TEST(fuse_random_programs_with_effects)
{
    static const oly_dtype ts[] = {OLY_FLOAT32, OLY_INT32, OLY_FLOAT16, OLY_COMPLEX128};
    int groups = 0;
    for (int i = 0; i < OLY_ARRAY_LEN(ts); i++)
        for (int c = 0; c < OLY_ARRAY_LEN(SHAPES); c++)
            for (uint64_t seed = 1; seed <= 4; seed++)
                groups += compare_random(seed * 977 + (uint64_t)c, ts[i], &SHAPES[c], true);
    CHECK(groups > 0);
}

/* ---------------------------------------------------------------- register programs */

/* The rows a register program runs (fused.h's oly_fregs). */
static const char *const REG_ROWS[] = {"add", "sub", "mul", "div", "neg", "abs", "square",
                                       "sqrt", "integer_pow", "exp", "exp2", "log", "expm1",
                                       "sin", "cos", "tan", "asin", "acos", "atan", "tanh",
                                       "atanh", "cbrt"};

/* A random program of register rows over dtype t and dims (rank 3 or 0):
 * inputs x0, x1 (full) and s (rank 0); outputs the last value, two others
 * (one perhaps twice) and a flat reshape of one (a copy out of the group). */
static oly_program *regs_program(uint64_t seed, oly_dtype t, int rank, const int64_t *dims)
{
    rng r = {seed * 0x9e3779b97f4a7c15ull + 3};
    oly_builder *b;
    if (oly_builder_new(&b) != OLY_OK) return NULL;
    oly_aval full, scalar;
    OLY_ASSERT(oly_aval_make(t, rank, dims, &full) == OLY_OK);
    OLY_ASSERT(oly_aval_make(t, 0, NULL, &scalar) == OLY_OK);
    oly_var *x0, *x1, *s;
    CHECK_OK(oly_builder_add_input(b, &full, &x0));
    CHECK_OK(oly_builder_add_input(b, &full, &x1));
    CHECK_OK(oly_builder_add_input(b, &scalar, &s));
    enum { MAXV = 40 };
    oly_atom pool[MAXV];
    int n = 0;
    pool[n++] = V(x0);
    pool[n++] = V(x1);
    int len = 16 + pick(&r, 12);
    for (int step = 0; step < len && n < MAXV; step++) {
        const oly_prim *p = P(REG_ROWS[pick(&r, OLY_ARRAY_LEN(REG_ROWS))]);
        oly_params_integer_pow pi = {pick(&r, 9) - 3};
        oly_atom in[2] = {pool[pick(&r, n)]};
        if (p->n_in == 2) {
            int how = pick(&r, 4);
            in[1] = how == 0 ? V(s) : how == 1 ? lit(t, 0.75 - pick(&r, 3)) : pool[pick(&r, n)];
            if (pick(&r, 2)) {
                oly_atom tmp = in[0];
                in[0] = in[1];
                in[1] = tmp;
            }
        }
        oly_var *o = app(b, p->name, in, p->n_in, p->params_size ? &pi : NULL);
        if (!o) break;
        pool[n++] = V(o);
    }
    oly_params_reshape flat = {.new_sizes = {.n = 1, .v = {oly_aval_size(&full)}}};
    oly_var *fl = app(b, "reshape", &pool[pick(&r, n)], 1, &flat);
    oly_atom outs[4] = {pool[n - 1], pool[pick(&r, n)], pool[pick(&r, n)], V(fl)};
    outs[2] = pick(&r, 2) ? outs[1] : outs[2];
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 4, &prog));
    oly_builder_free(b);
    return prog;
}

/* a and b hold the same bytes, except that a NaN may meet a NaN of another
 * sign or payload: which operand's NaN an op on two NaNs passes on is the
 * compiler's choice of operand order (IEEE 754 leaves it open), in the kernels
 * as in the register programs. */
static bool same_but_nan_payloads(const oly_array *a, const oly_array *b)
{
    if (!a || !b || !oly_aval_equal(&a->aval, &b->aval)) return false;
    int64_t n = oly_aval_size(&a->aval);
    for (int64_t i = 0; i < n; i++) {
        bool f32 = a->aval.dtype == OLY_FLOAT32;
        double x = f32 ? ((const float *)oly_array_data(a))[i] : ((const double *)oly_array_data(a))[i];
        double y = f32 ? ((const float *)oly_array_data(b))[i] : ((const double *)oly_array_data(b))[i];
        if (x != x && y != y) continue;
        size_t es = f32 ? 4 : 8;
        if (memcmp((const char *)oly_array_data(a) + (size_t)i * es,
                   (const char *)oly_array_data(b) + (size_t)i * es, es) != 0)
            return false;
    }
    return true;
}

/* Register programs give the bytes of the unfused program at every CPU level
 * (the portable level runs the tiles), for f32 and f64, one short tile or
 * many, rank 0 and empty, with zeros, infinities and NaNs among the inputs
 * (NaNs: same_but_nan_payloads); a group of these rows with no broadcast is
 * planned as one. */
TEST(fuse_register_programs_every_level)
{
    static const struct {
        int rank;
        int64_t dims[3];
    } shapes[] = {{3, {3, 37, 41}}, {3, {1, 1, 7}}, {3, {2, 0, 3}}, {0, {0}}, {3, {5, 99, 203}}};
    static const oly_dtype ts[] = {OLY_FLOAT32, OLY_FLOAT64};
    oly_cpu_level saved = oly_cpu_level_get(), max = oly_cpu_level_max();
    int with_regs = 0, compared = 0;
    for (int ti = 0; ti < OLY_ARRAY_LEN(ts); ti++)
        for (int c = 0; c < OLY_ARRAY_LEN(shapes); c++)
            for (uint64_t seed = 1; seed <= 4; seed++) {
                oly_dtype t = ts[ti];
                oly__exec_set_rewrites(1, 1, 0);
                oly_program *pf = regs_program(seed + (uint64_t)c * 31, t, shapes[c].rank,
                                               shapes[c].dims);
                oly__exec_set_rewrites(0, 0, 0);
                oly_program *pu = regs_program(seed + (uint64_t)c * 31, t, shapes[c].rank,
                                               shapes[c].dims);
                if (!pf || !pu) {
                    CHECK(0);
                    oly_program_release(pf);
                    oly_program_release(pu);
                    continue;
                }
                oly__exec_set_rewrites(1, 1, 0);
                char *text = NULL;
                CHECK_OK(oly__exec_describe(pf, &text));
                with_regs += text && strstr(text, " regs:") != NULL;
                free(text);
                rng r = {seed + 5};
                oly_array *in[3];
                for (int i = 0; i < 3; i++) in[i] = random_array(&r, oly_program_input_aval(pf, i));
                if (oly_aval_size(oly_program_input_aval(pf, 0)) >= 8) {
                    static const double special[8] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN,
                                                      1e-300, -3e38};
                    for (int k = 0; k < 8; k++) {
                        if (t == OLY_FLOAT32) ((float *)oly_array_data(in[0]))[k] = (float)special[k];
                        else ((double *)oly_array_data(in[0]))[k] = special[k];
                    }
                }
                /* every level, then AVX2 with its register loops on */
                for (int lv = 0; lv <= (int)max + (max >= OLY_CPU_LEVEL_AVX2); lv++) {
                    bool avx2_regs = lv > (int)max;
                    atomic_store(&oly__cpu_fused_regs_avx2, avx2_regs);
                    CHECK_OK(oly__cpu_set_level(avx2_regs ? OLY_CPU_LEVEL_AVX2 : (oly_cpu_level)lv));
                    oly_array *of[4], *ou[4];
                    oly__exec_set_rewrites(1, 1, 0);
                    CHECK_OK(run(pf, in, 3, of, 4));
                    oly__exec_set_rewrites(0, 0, 0);
                    CHECK_OK(run(pu, in, 3, ou, 4));
                    for (int k = 0; k < 4; k++) {
                        if (!same_but_nan_payloads(of[k], ou[k]))
                            CHECK_FAIL_("seed %llu %s shape %d level %s: output %d differs "
                                        "fused/unfused", (unsigned long long)seed,
                                        oly_dtype_name(t), c,
                                        avx2_regs ? "avx2 (registers)"
                                                  : oly_cpu_level_name((oly_cpu_level)lv), k);
                        oly_array_release(of[k]);
                        oly_array_release(ou[k]);
                    }
                    compared++;
                }
                atomic_store(&oly__cpu_fused_regs_avx2, false);
                CHECK_OK(oly__cpu_set_level(saved));
                oly__exec_set_rewrites(-1, -1, -1);
                for (int i = 0; i < 3; i++) oly_array_release(in[i]);
                oly_program_release(pf);
                oly_program_release(pu);
            }
    CHECK_OK(oly__cpu_set_level(saved));
    /* Most programs ran as register programs (a test that cannot fail is a defect). */
    CHECK(with_regs * 2 > OLY_ARRAY_LEN(ts) * OLY_ARRAY_LEN(shapes) * 4);
    CHECK(compared > 0);
}

/* A broadcast operand or a row outside the set keeps a group on the tiles. */
TEST(fuse_register_program_needs_its_rows)
{
    rewrites_all();
    int64_t n = 5000;
    oly_aval a;
    OLY_ASSERT(oly_aval_make(OLY_FLOAT32, 1, &n, &a) == OLY_OK);
    for (int k = 0; k < 2; k++) {
        oly_builder *b;
        CHECK_OK(oly_builder_new(&b));
        oly_var *x;
        CHECK_OK(oly_builder_add_input(b, &a, &x));
        oly_atom ax = V(x);
        oly_var *s = app(b, k ? "erf" : "sin", &ax, 1, NULL);
        oly_atom sx[2] = {V(s), ax};
        oly_var *m = app(b, "mul", sx, 2, NULL);
        oly_atom out = V(m);
        oly_program *p = NULL;
        CHECK_OK(oly_builder_finish(b, &out, 1, &p));
        oly_builder_free(b);
        char *text = NULL;
        CHECK_OK(oly__exec_describe(p, &text));
        CHECK(text && strstr(text, "1 groups"));
        CHECK(text && (strstr(text, " regs:") != NULL) == (k == 0));
        free(text);
        oly_program_release(p);
    }
    rewrites_default();
}

/* ---------------------------------------------------------------- structure */

static oly_program *chain_program(int64_t n, bool extra_use)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a;
    OLY_ASSERT(oly_aval_make(OLY_FLOAT32, 1, &n, &a) == OLY_OK);
    oly_var *x, *y;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly_builder_add_input(b, &a, &y));
    oly_atom ax = V(x), ay = V(y);
    oly_params_integer_pow two = {2};
    oly_var *s = app(b, "sin", &ax, 1, NULL);
    oly_atom as = V(s);
    oly_var *s2 = app(b, "integer_pow", &as, 1, &two);
    oly_var *c = app(b, "cos", &ax, 1, NULL);
    oly_atom cy[2] = {V(c), ay};
    oly_var *m = app(b, "mul", cy, 2, NULL);
    oly_atom sm[2] = {V(s2), V(m)};
    oly_var *r = app(b, "add", sm, 2, NULL);
    oly_atom outs[2] = {V(r), V(s)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, extra_use ? 2 : 1, &p));
    oly_builder_free(b);
    return p;
}

/* sin(x)**2 + cos(x)*y: one group, two inputs, one output, in place. */
TEST(fuse_chain_is_one_group)
{
    rewrites_all();
    oly_program *p = chain_program(5000, false);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    CHECK(text && strstr(text, "5 equations -> 1 steps"));
    CHECK(text && strstr(text, "5 fused in 1 groups"));
    CHECK(text && strstr(text, "n=5000 tile=2048 buffers=2 in=2 out=1"));
    CHECK(text && strstr(text, "sin#0(in->temp) integer_pow#1(temp->temp) cos#2(in->temp) "
                               "mul#3(temp,in->temp) add#4(temp,temp->out)"));
    free(text);
    /* No scratch: nothing but the output reaches memory. */
    size_t scratch = 1;
    CHECK_OK(oly__exec_plan_bytes(p, &scratch, NULL));
    CHECK_EQ(scratch, 0);
    oly_program_release(p);
    rewrites_default();
}

/* The group kernel splits its tiles by (ith, nth): three shares run one by one
 * give the bytes of one run of the whole program. */
TEST(fuse_tiles_split_by_ith_nth)
{
    rewrites_all();
    enum { N = 10000 };
    oly_program *p = chain_program(N, false);
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(p, &exe));
    CHECK_EQ(exe->rw->n_eqn, 1);
    const oly_eqn *fe = &exe->rw->eqn[0];
    CHECK_STREQ(fe->prim->name, "fused");
    const oly_fused *g = fe->params;
    CHECK((g->n + g->tile - 1) / g->tile >= 3); /* several tiles to share */
    int64_t n = N;
    double *xs = malloc(N * sizeof *xs);
    for (int i = 0; i < N; i++) xs[i] = i * 1e-3 - 4;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 1, &n, xs), tu_array(OLY_FLOAT32, 1, &n, xs)};
    oly_array *whole;
    CHECK_OK(run(p, in, 2, &whole, 1));
    float *parts = calloc(N, sizeof *parts);
    const void *ins[2] = {oly_array_data(in[0]), oly_array_data(in[1])};
    void *outs[1] = {parts};
    for (int ith = 2; ith >= 0; ith--) {
        oly_kernel_ctx c = {.eqn = fe, .params = g, .n_in = 2, .in = ins, .n_out = 1, .out = outs,
                            .ith = ith, .nth = 3};
        CHECK_OK(oly__cpu_fused(&c));
    }
    CHECK(memcmp(parts, oly_array_data(whole), N * sizeof *parts) == 0);
    free(parts);
    free(xs);
    oly_array_release(whole);
    for (int k = 0; k < 2; k++) oly_array_release(in[k]);
    oly_program_release(p);
    rewrites_default();
}

/* A big group is a split step: on the real pool with 3 threads it gives the
 * bytes of one thread (an odd size, so a share's last tile is short). */
TEST(fuse_group_splits_on_the_pool)
{
    rewrites_all();
    enum { N = (1 << 18) + 13 };
    oly_program *p = chain_program(N, false);
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(p, &exe));
    CHECK_EQ(exe->n_step, 1);
    CHECK(exe->n_step == 1 && exe->step[0].split);
    int64_t n = N;
    double *xs = malloc(N * sizeof *xs);
    for (int i = 0; i < N; i++) xs[i] = i * 1e-4 - 13;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 1, &n, xs), tu_array(OLY_FLOAT32, 1, &n, xs)};
    oly__pool_install();
    oly_array *one = NULL, *three = NULL;
    oly__pool_set_threads(1);
    CHECK_OK(run(p, in, 2, &one, 1));
    oly__pool_set_threads(3);
    for (int rep = 0; rep < 3; rep++) {
        CHECK_OK(run(p, in, 2, &three, 1));
        CHECK(same_bytes(one, three));
        oly_array_release(three);
    }
    oly__pool_set_threads(oly__pool_threads());
    free(xs);
    oly_array_release(one);
    for (int k = 0; k < 2; k++) oly_array_release(in[k]);
    oly_program_release(p);
    rewrites_default();
}

/* sin(x) also leaves the program: it is materialised, written once. */
TEST(fuse_value_used_outside_is_materialised)
{
    rewrites_all();
    oly_program *p = chain_program(3000, true);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    CHECK(text && strstr(text, "in=2 out=2"));
    CHECK(text && strstr(text, "sin#0(in->out)"));
    free(text);
    int64_t n = 3000;
    double *xs = malloc(n * sizeof *xs);
    for (int64_t i = 0; i < n; i++) xs[i] = (double)i / 500 - 3;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 1, &n, xs), tu_array(OLY_FLOAT32, 1, &n, xs)};
    oly_array *out[2];
    CHECK_OK(run(p, in, 2, out, 2));
    const float *o0 = oly_array_data(out[0]), *o1 = oly_array_data(out[1]);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) {
        float x = (float)xs[i], s = sinf(x);
        ok &= fabsf(o1[i] - s) <= 1e-6f && fabsf(o0[i] - (s * s + cosf(x) * x)) <= 1e-5f;
    }
    CHECK(ok);
    for (int k = 0; k < 2; k++) {
        oly_array_release(in[k]);
        oly_array_release(out[k]);
    }
    free(xs);
    oly_program_release(p);
    rewrites_default();
}

/* a = sin x; b = cos x; t_fx(x); c = a + b: the group before the effect holds
 * sin and cos, c runs after it, alone. */
TEST(fuse_never_crosses_an_effect)
{
    rewrites_all();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    int64_t n = 100;
    oly_aval a;
    OLY_ASSERT(oly_aval_make(OLY_FLOAT32, 1, &n, &a) == OLY_OK);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom ax = V(x);
    oly_var *s = app(b, "sin", &ax, 1, NULL);
    oly_var *c = app(b, "cos", &ax, 1, NULL);
    oly_var *f = NULL;
    CHECK_OK(oly_builder_append(b, &t_fx, &ax, 1, NULL, NULL, 0, &f, 1, NULL));
    oly_atom sc[2] = {V(s), V(c)};
    oly_var *r = app(b, "add", sc, 2, NULL);
    oly_atom rr = V(r);
    oly_var *r2 = app(b, "neg", &rr, 1, NULL);
    oly_atom outs[2] = {V(r2), V(f)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    /* sin, cos | t_fx | add, neg */
    CHECK(text && strstr(text, "5 equations -> 3 steps"));
    CHECK(text && strstr(text, "group 0 (step 0)"));
    CHECK(text && strstr(text, "group 1 (step 2)"));
    free(text);
    CHECK_EQ(check_structure(p), 2);
    oly_program_release(p);
    rewrites_default();
}

/* A broadcast of one element read as a rank-0 operand; a row broadcast
 * gathered per tile; a broadcast only a unary op reads is filled once. */
TEST(fuse_broadcasts)
{
    rewrites_all();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    int64_t dims[2] = {300, 50}, row = 50;
    oly_aval a, ar, a0;
    OLY_ASSERT(oly_aval_make(OLY_FLOAT64, 2, dims, &a) == OLY_OK);
    OLY_ASSERT(oly_aval_make(OLY_FLOAT64, 1, &row, &ar) == OLY_OK);
    OLY_ASSERT(oly_aval_make(OLY_FLOAT64, 0, NULL, &a0) == OLY_OK);
    oly_var *x, *v, *s;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly_builder_add_input(b, &ar, &v));
    CHECK_OK(oly_builder_add_input(b, &a0, &s));
    oly_params_broadcast_in_dim brow = {.shape = {2, {300, 50}}, .broadcast_dimensions = {1, {1}}};
    oly_params_broadcast_in_dim bsc = {.shape = {2, {300, 50}}, .broadcast_dimensions = {0, {0}}};
    oly_atom av = V(v), as = V(s);
    oly_var *bv = app(b, "broadcast_in_dim", &av, 1, &brow);
    oly_var *bs = app(b, "broadcast_in_dim", &as, 1, &bsc);
    oly_var *bs2 = app(b, "broadcast_in_dim", &as, 1, &bsc);
    oly_atom xb[2] = {V(x), V(bv)};
    oly_var *t1 = app(b, "add", xb, 2, NULL);
    oly_atom tb[2] = {V(t1), V(bs)};
    oly_var *t2 = app(b, "mul", tb, 2, NULL);
    oly_atom ab2 = V(bs2);
    oly_var *e2 = app(b, "exp", &ab2, 1, NULL);
    oly_atom te[2] = {V(t2), V(e2)};
    oly_var *t3 = app(b, "sub", te, 2, NULL);
    oly_atom out = V(t3);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    /* bs2 duplicates bs (CSE), so exp reads the same broadcast, which then
     * cannot be a scalar: it is filled once. */
    CHECK(text && strstr(text, "1 removed as duplicates"));
    CHECK(text && strstr(text, "scalars=0 bcasts=2"));
    free(text);
    double xs[15000], vs[50], sv = 0.75;
    for (int i = 0; i < 15000; i++) xs[i] = i * 1e-3;
    for (int i = 0; i < 50; i++) vs[i] = -i;
    oly_array *in[3] = {tu_array(OLY_FLOAT64, 2, dims, xs), tu_array(OLY_FLOAT64, 1, &row, vs),
                        tu_scalar(OLY_FLOAT64, sv)};
    oly_array *res;
    CHECK_OK(run(p, in, 3, &res, 1));
    const double *o = oly_array_data(res);
    bool ok = true;
    for (int i = 0; i < 15000; i++) {
        double want = (xs[i] + vs[i % 50]) * sv - exp(sv);
        ok &= fabs(o[i] - want) <= 1e-12 * (1 + fabs(want));
    }
    CHECK(ok);
    oly_array_release(res);
    for (int i = 0; i < 3; i++) oly_array_release(in[i]);
    oly_program_release(p);
    rewrites_default();
}

/* ---------------------------------------------------------------- CSE */

/* Duplicated pure equations run once; duplicated effects run every time. */
TEST(fuse_cse_keeps_effects)
{
    rewrites_all();
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    int64_t n = 16;
    oly_aval a;
    OLY_ASSERT(oly_aval_make(OLY_FLOAT32, 1, &n, &a) == OLY_OK);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom ax = V(x);
    oly_var *s1 = app(b, "sin", &ax, 1, NULL);
    oly_var *s2 = app(b, "sin", &ax, 1, NULL);
    oly_var *f1 = NULL, *f2 = NULL;
    CHECK_OK(oly_builder_append(b, &t_fx, &ax, 1, NULL, NULL, 0, &f1, 1, NULL));
    CHECK_OK(oly_builder_append(b, &t_fx, &ax, 1, NULL, NULL, 0, &f2, 1, NULL));
    oly_atom m1[2] = {V(s1), lit(OLY_FLOAT32, 2)}, m2[2] = {V(s2), lit(OLY_FLOAT32, 2)};
    oly_atom m3[2] = {V(s2), lit(OLY_FLOAT32, 3)};
    oly_var *p1 = app(b, "mul", m1, 2, NULL);
    oly_var *p2 = app(b, "mul", m2, 2, NULL); /* same as p1 once s2 reads s1 */
    oly_var *p3 = app(b, "mul", m3, 2, NULL); /* another literal: kept */
    oly_atom outs[5] = {V(p1), V(p2), V(p3), V(f1), V(f2)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 5, &p));
    oly_builder_free(b);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    CHECK(text && strstr(text, "2 removed as duplicates"));
    free(text);
    double xs[16];
    for (int i = 0; i < 16; i++) xs[i] = i;
    oly_array *in = tu_array(OLY_FLOAT32, 1, &n, xs), *out[5];
    fx_runs = 0;
    CHECK_OK(run(p, &in, 1, out, 5));
    CHECK_EQ(fx_runs, 2);
    CHECK(same_bytes(out[0], out[1]));
    const float *o2 = oly_array_data(out[2]);
    CHECK_NEAR(o2[3], sin(3.0) * 3.0, 1e-5);
    for (int k = 0; k < 5; k++) oly_array_release(out[k]);
    oly_array_release(in);
    oly_program_release(p);
    rewrites_default();
}

/* The switches: with both off the program runs equation by equation. */
TEST(fuse_switches_off)
{
    oly__exec_set_rewrites(0, 0, 0);
    oly_program *p = chain_program(100000, false);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(p, &text));
    CHECK(text && strstr(text, "5 equations -> 5 steps; 0 removed as duplicates; 0 fused"));
    free(text);
    oly_program_release(p);
    rewrites_default();
}

/* By default groups under 4096 elements are left alone (they stay in cache,
 * and a fused step's per-call setup would cost more than it saves). */
TEST(fuse_small_groups_left_alone)
{
    oly__exec_set_rewrites(1, 1, -1);
    oly_program *small = chain_program(4095, false), *big = chain_program(4096, false);
    char *text = NULL;
    CHECK_OK(oly__exec_describe(small, &text));
    CHECK(text && strstr(text, "5 equations -> 5 steps"));
    free(text);
    CHECK_OK(oly__exec_describe(big, &text));
    CHECK(text && strstr(text, "5 equations -> 1 steps"));
    free(text);
    oly_program_release(small);
    oly_program_release(big);
    rewrites_default();
}

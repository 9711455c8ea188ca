/* test_rules_callback.c — transformation rules of pjit, the callback rows and
 * the custom-derivative primitives: vmap of pure_callback per vmap_method (what
 * the host function sees and how often, spec §1.2), io_callback and
 * debug_callback under vmap (call order, nested vmap, the ordered error), the
 * jvp/transpose errors and the zero-tangent skip, custom_jvp / custom_vjp with
 * C thunks traced only on demand. */
#include "test.h"
#include "testutil.h"
#include "exec/exec.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- a recording host function */

#define MAX_CALLS 64
#define MAX_ARGS 4

typedef struct rec {
    int calls;
    int n_args[MAX_CALLS];
    oly_aval arg[MAX_CALLS][MAX_ARGS];
    double first[MAX_CALLS];    /* arg 0's first element (NAN if empty) */
} rec;

static float at(const void *p, const oly_aval *a, int64_t k)
{
    int64_t n = oly_aval_size(a);
    return n ? ((const float *)p)[k % n] : 0.0f;
}

/* Records the call; each f32 result element k is 2 * arg0[k] + arg1[k] (the
 * arguments indexed modulo their sizes, so any broadcastable layout works). */
static oly_status rec_host(void *user, oly_callback_frame *f)
{
    rec *r = user;
    int c = r->calls++;
    if (c < MAX_CALLS) {
        r->n_args[c] = f->n_args;
        for (int a = 0; a < f->n_args && a < MAX_ARGS; a++) r->arg[c][a] = f->arg_avals[a];
        r->first[c] = f->n_args && oly_aval_size(&f->arg_avals[0])
                          ? ((const float *)f->args[0])[0] : NAN;
    }
    for (int k = 0; k < f->n_results; k++) {
        if (f->result_avals[k].dtype != OLY_FLOAT32)
            return oly_host_fail(OLY_ERR_CALLBACK, "rec_host: f32 results only");
        float *y = f->results[k];
        for (int64_t e = 0; e < oly_aval_size(&f->result_avals[k]); e++) {
            float v = f->n_args ? 2 * at(f->args[0], &f->arg_avals[0], e) : 0;
            if (f->n_args > 1) v += at(f->args[1], &f->arg_avals[1], e);
            y[e] = v;
        }
    }
    return OLY_OK;
}

static oly_host_fn *rec_fn(rec *r)
{
    memset(r, 0, sizeof *r);
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("rec", rec_host, r, NULL, &fn));
    return fn;
}

/* Checks call c's argument a has shape dims[0..rank). */
static bool arg_is(const rec *r, int c, int a, int rank, const int64_t *dims)
{
    const oly_aval *v = &r->arg[c][a];
    bool ok = v->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = v->dims[d] == dims[d];
    if (!ok) {
        char buf[128];
        oly_aval_format(buf, sizeof buf, v);
        fprintf(stderr, "    call %d arg %d is %s (rank %d expected)\n", c, a, buf, rank);
    }
    return ok;
}

/* ---------------------------------------------------------------- program helpers */

static const int64_t D3[] = {3}, D4[] = {4}, D43[] = {4, 3}, D2[] = {2}, D32[] = {3, 2};

/* inputs (n_in avals) -> callback prim -> its results. */
static oly_program *callback_prog(const oly_prim *prim, oly_host_fn *fn, int n_in,
                                  const oly_aval *in, int n_res, const oly_aval *res, int method,
                                  bool ordered)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    oly_atom a[MAX_ARGS], out[MAX_ARGS];
    CHECK_OK(oly_builder_new(&b));
    for (int i = 0; i < n_in; i++) {
        oly_var *v;
        CHECK_OK(oly_builder_add_input(b, &in[i], &v));
        a[i] = oly_atom_var(v);
    }
    oly_params_callback pc = {.callback = fn, .result_avals = res, .n_results = n_res,
                              .vmap_method = method, .ordered = ordered};
    CHECK_OK(oly__emit(b, prim, a, n_in, &pc, NULL, 0, out));
    CHECK_OK(oly_builder_finish(b, out, n_res, &p));
    oly_builder_free(b);
    return p;
}

static oly_status run(oly_program *p, oly_array *const *in, int n_in, oly_array **out, int n_out)
{
    return oly_program_run(p, 0, in, n_in, out, n_out);
}

static void release_all(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) oly_array_release(a[i]);
}

/* ---------------------------------------------------------------- pure_callback under vmap */

/* f(x: f32[3], y: f32[]) = pure_callback(x, y) -> f32[3], vmapped over x
 * (N = 4, axis in_axis_x of the batched x), y unbatched. */
static void vmap_pure_case(int method, int64_t n_calls, const int64_t *x_shape, int x_rank,
                           int y_rank, int64_t y_dim)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval in[2] = {tu_aval(OLY_FLOAT32, 1, D3), tu_aval(OLY_FLOAT32, 0, NULL)};
    oly_aval res = tu_aval(OLY_FLOAT32, 1, D3);
    oly_program *p = callback_prog(&oly__prim_pure_callback, fn, 2, in, 1, &res, method, false);
    oly_program *v = NULL;
    int in_axes[2] = {0, -1}, out_axes[1] = {0};
    CHECK_OK(oly_program_vmap(p, in_axes, 4, out_axes, &v));
    CHECK_EQ(r.calls, 0); /* transforms never run anything */
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i;
    oly_array *args[2] = {tu_array(OLY_FLOAT32, 2, D43, xv), tu_scalar(OLY_FLOAT32, 100)};
    oly_array *out = NULL;
    if (v) CHECK_OK(run(v, args, 2, &out, 1));
    CHECK_EQ(r.calls, n_calls);
    for (int c = 0; c < r.calls && c < MAX_CALLS; c++) {
        CHECK_EQ(r.n_args[c], 2);
        CHECK(arg_is(&r, c, 0, x_rank, x_shape));
        int64_t yd[1] = {y_dim};
        CHECK(arg_is(&r, c, 1, y_rank, yd));
        if (n_calls > 1) CHECK_EQ(r.first[c], 3 * c); /* index order */
    }
    if (out) {
        CHECK_EQ(oly_array_aval(out)->rank, 2);
        CHECK_EQ(oly_array_aval(out)->dims[0], 4);
        double want[12];
        for (int i = 0; i < 12; i++) want[i] = 2 * i + 100;
        CHECK(tu_allclose(out, want, 12, 0, 0));
    }
    oly_array_release(out);
    release_all(args, 2);
    oly_program_release(v);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(rules_cb_vmap_pure_sequential)
{
    vmap_pure_case(OLY_VMAP_SEQUENTIAL, 4, D3, 1, 0, 0);
    vmap_pure_case(OLY_VMAP_SEQUENTIAL_UNROLLED, 4, D3, 1, 0, 0);
}

TEST(rules_cb_vmap_pure_single_call)
{
    static const int64_t one[] = {1};
    vmap_pure_case(OLY_VMAP_EXPAND_DIMS, 1, D43, 2, 1, one[0]);
    vmap_pure_case(OLY_VMAP_BROADCAST_ALL, 1, D43, 2, 1, 4);
    vmap_pure_case(OLY_VMAP_LEGACY_VECTORIZED, 1, D43, 2, 0, 0);
}

TEST(rules_cb_vmap_pure_batch_axis_1)
{
    /* x batched on axis 1 of a (3, 4) input: moved to axis 0 before the call. */
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval in[1] = {tu_aval(OLY_FLOAT32, 1, D3)};
    oly_aval res = tu_aval(OLY_FLOAT32, 1, D3);
    oly_program *p = callback_prog(&oly__prim_pure_callback, fn, 1, in, 1, &res,
                                   OLY_VMAP_EXPAND_DIMS, false);
    oly_program *v = NULL;
    int in_axes[1] = {1}, out_axes[1] = {1};
    CHECK_OK(oly_program_vmap(p, in_axes, 4, out_axes, &v));
    static const int64_t d34[] = {3, 4};
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = i;
    oly_array *x = tu_array(OLY_FLOAT32, 2, d34, xv), *out = NULL;
    if (v) CHECK_OK(run(v, &x, 1, &out, 1));
    CHECK_EQ(r.calls, 1);
    CHECK(arg_is(&r, 0, 0, 2, D43));
    if (out) {
        double want[12];
        for (int i = 0; i < 12; i++) want[i] = 2 * i;
        CHECK(tu_allclose(out, want, 12, 0, 0));
    }
    oly_array_release(x);
    oly_array_release(out);
    oly_program_release(v);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(rules_cb_vmap_pure_none_errors)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval in[2] = {tu_aval(OLY_FLOAT32, 1, D3), tu_aval(OLY_FLOAT32, 0, NULL)};
    oly_aval res = tu_aval(OLY_FLOAT32, 1, D3);
    oly_program *p = callback_prog(&oly__prim_pure_callback, fn, 2, in, 1, &res, OLY_VMAP_NONE,
                                   false);
    oly_program *v = NULL;
    int in_axes[2] = {0, -1}, out_axes[1] = {0};
    CHECK_ERR(oly_program_vmap(p, in_axes, 4, out_axes, &v), OLY_ERR_UNSUPPORTED,
              "vmap is only supported for the pure_callback primitive when vmap_method is one "
              "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
              "'legacy_vectorized'. Got vmap_method=None.");
    CHECK(v == NULL);
    /* No operand batched: the rule is not asked; the callback runs once, unbatched. */
    int none[2] = {-1, -1};
    CHECK_OK(oly_program_vmap(p, none, 4, out_axes, &v));
    oly_array *args[2] = {tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 2, 3}),
                          tu_scalar(OLY_FLOAT32, 1)};
    oly_array *out = NULL;
    if (v) CHECK_OK(run(v, args, 2, &out, 1));
    CHECK_EQ(r.calls, 1);
    if (out) CHECK(tu_allclose(out, (double[]){3, 5, 7, 3, 5, 7, 3, 5, 7, 3, 5, 7}, 12, 0, 0));
    oly_array_release(out);
    release_all(args, 2);
    oly_program_release(v);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

TEST(rules_cb_vmap_pure_nested)
{
    /* vmap(vmap(f, size 2), size 3) with sequential: 6 calls, each on f32[3];
     * with expand_dims: one call on f32[3,2,3]. */
    for (int expand = 0; expand < 2; expand++) {
        rec r;
        oly_host_fn *fn = rec_fn(&r);
        oly_aval in[1] = {tu_aval(OLY_FLOAT32, 1, D3)};
        oly_aval res = tu_aval(OLY_FLOAT32, 1, D3);
        oly_program *p = callback_prog(&oly__prim_pure_callback, fn, 1, in, 1, &res,
                                       expand ? OLY_VMAP_EXPAND_DIMS : OLY_VMAP_SEQUENTIAL, false);
        oly_program *v1 = NULL, *v2 = NULL;
        int ax[1] = {0};
        CHECK_OK(oly_program_vmap(p, ax, 2, ax, &v1));
        if (v1) CHECK_OK(oly_program_vmap(v1, ax, 3, ax, &v2));
        static const int64_t d323[] = {3, 2, 3};
        double xv[18];
        for (int i = 0; i < 18; i++) xv[i] = i;
        oly_array *x = tu_array(OLY_FLOAT32, 3, d323, xv), *out = NULL;
        if (v2) CHECK_OK(run(v2, &x, 1, &out, 1));
        CHECK_EQ(r.calls, expand ? 1 : 6);
        if (expand) CHECK(arg_is(&r, 0, 0, 3, d323));
        else CHECK(arg_is(&r, 5, 0, 1, D3));
        /* x[i, j] starts at 3 (2 i + j): the inner vmap's loop (j) is outermost */
        static const double order[] = {0, 6, 12, 3, 9, 15};
        for (int c = 0; !expand && c < 6 && c < r.calls; c++) CHECK_EQ(r.first[c], order[c]);
        if (out) {
            double want[18];
            for (int i = 0; i < 18; i++) want[i] = 2 * i;
            CHECK(tu_allclose(out, want, 18, 0, 0));
        }
        oly_array_release(x);
        oly_array_release(out);
        oly_program_release(v1);
        oly_program_release(v2);
        oly_program_release(p);
        oly_host_fn_release(fn);
    }
}

/* ---------------------------------------------------------------- io_callback, debug_callback under vmap */

TEST(rules_cb_vmap_io_unordered_and_ordered)
{
    for (int ordered = 0; ordered < 2; ordered++) {
        rec r;
        oly_host_fn *fn = rec_fn(&r);
        oly_aval in[2] = {tu_aval(OLY_FLOAT32, 0, NULL), tu_aval(OLY_FLOAT32, 1, D2)};
        oly_aval res = tu_aval(OLY_FLOAT32, 0, NULL);
        oly_program *p = callback_prog(&oly__prim_io_callback, fn, 2, in, 1, &res, 0, ordered);
        oly_program *v = NULL;
        int in_axes[2] = {0, -1}, out_axes[1] = {0};
        if (ordered) {
            CHECK_ERR(oly_program_vmap(p, in_axes, 4, out_axes, &v), OLY_ERR_INVALID,
                      "Cannot `vmap` ordered IO callback.");
        } else {
            CHECK_OK(oly_program_vmap(p, in_axes, 4, out_axes, &v));
            oly_array *args[2] = {tu_array(OLY_FLOAT32, 1, D4, (double[]){5, 6, 7, 8}),
                                  tu_array(OLY_FLOAT32, 1, D2, (double[]){1, 2})};
            oly_array *out = NULL;
            if (v) CHECK_OK(run(v, args, 2, &out, 1));
            CHECK_EQ(r.calls, 4);
            for (int c = 0; c < 4; c++) {
                CHECK_EQ(r.first[c], 5 + c);
                CHECK(arg_is(&r, c, 0, 0, NULL));
                CHECK(arg_is(&r, c, 1, 1, D2)); /* unbatched: whole */
            }
            if (out) CHECK(tu_allclose(out, (double[]){11, 13, 15, 17}, 4, 0, 0));
            oly_array_release(out);
            release_all(args, 2);
        }
        oly_program_release(v);
        oly_program_release(p);
        oly_host_fn_release(fn);
    }
}

TEST(rules_cb_vmap_debug_nested_order)
{
    /* x[i, j] = 10 i + j, vmap(vmap(f, size 2), size 3): the inner vmap's loop
     * is outermost in call order (spec §1.4). Ordered debug is allowed. */
    for (int ordered = 0; ordered < 2; ordered++) {
        rec r;
        oly_host_fn *fn = rec_fn(&r);
        oly_aval in[2] = {tu_aval(OLY_FLOAT32, 0, NULL), tu_aval(OLY_FLOAT32, 1, D3)};
        oly_program *p = callback_prog(&oly__prim_debug_callback, fn, 2, in, 0, NULL, 0, ordered);
        oly_program *v1 = NULL, *v2 = NULL;
        int ax[2] = {0, -1};
        CHECK_OK(oly_program_vmap(p, ax, 2, NULL, &v1));
        if (v1) CHECK_OK(oly_program_vmap(v1, ax, 3, NULL, &v2));
        if (v2) CHECK_EQ(oly_program_effects(v2),
                         ordered ? OLY_EFFECT_ORDERED_DEBUG : OLY_EFFECT_DEBUG);
        oly_array *args[2] = {tu_array(OLY_FLOAT32, 2, D32, (double[]){0, 1, 10, 11, 20, 21}),
                              tu_array(OLY_FLOAT32, 1, D3, (double[]){7, 8, 9})};
        if (v2) CHECK_OK(run(v2, args, 2, NULL, 0));
        static const double order[] = {0, 10, 20, 1, 11, 21};
        CHECK_EQ(r.calls, 6);
        for (int c = 0; c < 6 && c < r.calls; c++) {
            CHECK_EQ(r.first[c], order[c]);
            CHECK(arg_is(&r, c, 0, 0, NULL));
            CHECK(arg_is(&r, c, 1, 1, D3));
        }
        release_all(args, 2);
        oly_program_release(v1);
        oly_program_release(v2);
        oly_program_release(p);
        oly_host_fn_release(fn);
    }
}

/* ---------------------------------------------------------------- jvp / transpose of callbacks */

TEST(rules_cb_jvp_transpose_errors)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval in = tu_aval(OLY_FLOAT32, 1, D3);
    oly_program *pure = callback_prog(&oly__prim_pure_callback, fn, 1, &in, 1, &in,
                                      OLY_VMAP_SEQUENTIAL, false);
    oly_program *io = callback_prog(&oly__prim_io_callback, fn, 1, &in, 1, &in, 0, false);
    oly_program *j = NULL;
    bool nz = true, nz_out = false;
    CHECK_ERR(oly_program_jvp(pure, &nz, &j, &nz_out), OLY_ERR_INVALID,
              "Pure callbacks do not support JVP. Please use `olympus.custom_jvp` to use "
              "callbacks while taking gradients.");
    CHECK_ERR(oly_program_jvp(io, &nz, &j, &nz_out), OLY_ERR_INVALID,
              "IO callbacks do not support JVP.");
    CHECK_ERR(oly_program_transpose(pure, 0, &j), OLY_ERR_INVALID,
              "Pure callbacks do not support transpose. Please use `olympus.custom_vjp` to use "
              "callbacks while taking gradients.");
    CHECK_ERR(oly_program_transpose(io, 0, &j), OLY_ERR_INVALID,
              "IO callbacks do not support transpose.");
    CHECK(j == NULL);
    CHECK_EQ(r.calls, 0);
    oly_program_release(pure);
    oly_program_release(io);
    oly_host_fn_release(fn);
}

/* f(x, y) = (x * 2, io_callback(y)): linearized in x only, the io_callback
 * needs no JVP rule and runs once, in the primal program. */
TEST(rules_cb_io_independent_runs_once_under_linearize)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval s = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x, *y;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    CHECK_OK(oly_builder_add_input(b, &s, &y));
    oly_atom out[2], ya = oly_atom_var(y);
    oly_scalar two = {.dtype = OLY_FLOAT32, .v.f = 2};
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, oly_atom_var(x), oly_atom_lit(two), &out[0]));
    oly_params_callback pc = {.callback = fn, .result_avals = &s, .n_results = 1};
    CHECK_OK(oly__emit(b, &oly__prim_io_callback, &ya, 1, &pc, NULL, 0, &out[1]));
    oly_program *p = NULL, *primal = NULL, *lin = NULL, *t = NULL;
    CHECK_OK(oly_builder_finish(b, out, 2, &p));
    oly_builder_free(b);
    bool nz_in[2] = {true, false}, nz_out[2];
    int n_res = -1;
    CHECK_OK(oly_program_linearize(p, nz_in, &primal, &lin, &n_res, nz_out));
    CHECK(nz_out[0] && !nz_out[1]);
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 3), tu_scalar(OLY_FLOAT32, 4)};
    oly_array *pout[8] = {0};
    int np = primal ? oly_program_num_outputs(primal) : 0;
    if (primal) CHECK_OK(run(primal, args, 2, pout, np));
    CHECK_EQ(r.calls, 1);
    if (pout[1]) CHECK_NEAR(tu_get(pout[1], 0), 8, 0);
    /* the transposed program: (residuals..., ct) -> ct_x; no callback */
    if (t && np >= 2) {
        oly_array *tin[8] = {0};
        int k = 0;
        for (int i = 2; i < np; i++) tin[k++] = pout[i];
        oly_array *ct = tu_scalar(OLY_FLOAT32, 1), *g = NULL;
        tin[k++] = ct;
        CHECK_OK(run(t, tin, k, &g, 1));
        if (g) CHECK_NEAR(tu_get(g, 0), 2, 0);
        oly_array_release(ct);
        oly_array_release(g);
    }
    CHECK_EQ(r.calls, 1);
    release_all(pout, np);
    release_all(args, 2);
    oly_program_release(p);
    oly_program_release(primal);
    oly_program_release(lin);
    oly_program_release(t);
    oly_host_fn_release(fn);
}

/* f(x) = (sin x, debug_callback(x)): under jvp the callback sees primals once;
 * under linearize + transpose it runs once, in the forward pass. */
TEST(rules_cb_debug_under_jvp_and_grad)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval s = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_atom xa = oly_atom_var(x), out[1];
    oly_params_callback pc = {.callback = fn};
    CHECK_OK(oly__emit(b, &oly__prim_debug_callback, &xa, 1, &pc, NULL, 0, NULL));
    CHECK_OK(oly__emit_un(b, &oly__prim_sin, xa, &out[0]));
    oly_program *p = NULL, *j = NULL, *primal = NULL, *lin = NULL, *t = NULL;
    CHECK_OK(oly_builder_finish(b, out, 1, &p));
    oly_builder_free(b);
    bool nz = true, nz_out = false;
    CHECK_OK(oly_program_jvp(p, &nz, &j, &nz_out));
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 0.5), tu_scalar(OLY_FLOAT32, 1)};
    oly_array *jo[2] = {0};
    if (j) CHECK_OK(run(j, args, 2, jo, 2));
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.first[0], 0.5);
    if (jo[1]) CHECK_NEAR(tu_get(jo[1], 0), cos(0.5), 1e-6);
    int n_res = 0;
    CHECK_OK(oly_program_linearize(p, &nz, &primal, &lin, &n_res, &nz_out));
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    oly_array *po[8] = {0};
    int np = primal ? oly_program_num_outputs(primal) : 0;
    if (primal) CHECK_OK(run(primal, args, 1, po, np));
    CHECK_EQ(r.calls, 2);
    if (t) {
        oly_array *tin[8] = {0};
        int k = 0;
        for (int i = 1; i < np; i++) tin[k++] = po[i];
        tin[k++] = args[1];
        oly_array *g = NULL;
        CHECK_OK(run(t, tin, k, &g, 1));
        if (g) CHECK_NEAR(tu_get(g, 0), cos(0.5), 1e-6);
        oly_array_release(g);
    }
    CHECK_EQ(r.calls, 2);
    release_all(jo, 2);
    release_all(po, np);
    release_all(args, 2);
    oly_program_release(p);
    oly_program_release(j);
    oly_program_release(primal);
    oly_program_release(lin);
    oly_program_release(t);
    oly_host_fn_release(fn);
}

/* A linear program whose only equation is a debug_callback on its input,
 * plus an identity output: transposing it calls nothing. */
TEST(rules_cb_debug_transpose_is_noop)
{
    rec r;
    oly_host_fn *fn = rec_fn(&r);
    oly_aval s = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_atom xa = oly_atom_var(x), out[1];
    oly_params_callback pc = {.callback = fn};
    CHECK_OK(oly__emit(b, &oly__prim_debug_callback, &xa, 1, &pc, NULL, 0, NULL));
    oly_scalar three = {.dtype = OLY_FLOAT32, .v.f = 3};
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, xa, oly_atom_lit(three), &out[0]));
    oly_program *p = NULL, *t = NULL;
    CHECK_OK(oly_builder_finish(b, out, 1, &p));
    oly_builder_free(b);
    CHECK_OK(oly_program_transpose(p, 0, &t));
    oly_array *ct = tu_scalar(OLY_FLOAT32, 1), *g = NULL;
    if (t) CHECK_OK(run(t, &ct, 1, &g, 1));
    if (g) CHECK_NEAR(tu_get(g, 0), 3, 0);
    CHECK_EQ(r.calls, 0);
    oly_array_release(ct);
    oly_array_release(g);
    oly_program_release(p);
    oly_program_release(t);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- pjit */

/* x -> pjit{ sin(x) * x } */
static oly_program *pjit_prog(const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom s, y, out;
    oly_program *sub = NULL, *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, a, &x));
    CHECK_OK(oly__emit_un(b, &oly__prim_sin, oly_atom_var(x), &s));
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, s, oly_atom_var(x), &y));
    CHECK_OK(oly_builder_finish(b, &y, 1, &sub));
    oly_builder_free(b);
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, a, &x));
    oly_params_call pc = {.name = "f", .n_out = 1};
    oly_atom xa = oly_atom_var(x);
    CHECK_OK(oly__emit(b, &oly__prim_pjit, &xa, 1, &pc, &sub, 1, &out));
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    oly_program_release(sub);
    return p;
}

TEST(rules_cb_pjit_vmap_jvp_grad)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = pjit_prog(&a), *v = NULL, *j = NULL, *primal = NULL, *lin = NULL, *t = NULL;
    int ax[1] = {0};
    CHECK_OK(oly_program_vmap(p, ax, 3, ax, &v));
    if (v) {
        CHECK_STREQ(v->eqn[v->n_eqn - 1].prim->name, "pjit");
        oly_array *x = tu_array(OLY_FLOAT32, 1, D3, (double[]){0.1, 0.2, 0.3}), *y = NULL;
        CHECK_OK(run(v, &x, 1, &y, 1));
        if (y) CHECK(tu_allclose(y, (double[]){0.1 * sin(0.1), 0.2 * sin(0.2), 0.3 * sin(0.3)},
                                 3, 1e-6, 0));
        oly_array_release(x);
        oly_array_release(y);
    }
    bool nz = true, nz_out = false;
    CHECK_OK(oly_program_jvp(p, &nz, &j, &nz_out));
    CHECK(nz_out);
    double x0 = 0.7, d = cos(x0) * x0 + sin(x0);
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, x0), tu_scalar(OLY_FLOAT32, 1)};
    if (j) {
        for (int k = 0; k < j->n_eqn; k++) CHECK(strcmp(j->eqn[k].prim->name, "pjit") != 0);
        oly_array *o[2] = {0};
        CHECK_OK(run(j, args, 2, o, 2));
        if (o[1]) CHECK_NEAR(tu_get(o[1], 0), d, 1e-6);
        release_all(o, 2);
    }
    int n_res = 0;
    CHECK_OK(oly_program_linearize(p, &nz, &primal, &lin, &n_res, &nz_out));
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    if (primal && t) {
        oly_array *po[8] = {0}, *tin[8] = {0}, *g = NULL;
        int np = oly_program_num_outputs(primal), k = 0;
        CHECK_OK(run(primal, args, 1, po, np));
        for (int i = 1; i < np; i++) tin[k++] = po[i];
        tin[k++] = args[1];
        CHECK_OK(run(t, tin, k, &g, 1));
        if (g) CHECK_NEAR(tu_get(g, 0), d, 1e-6);
        oly_array_release(g);
        release_all(po, np);
    }
    release_all(args, 2);
    oly_program_release(p);
    oly_program_release(v);
    oly_program_release(j);
    oly_program_release(primal);
    oly_program_release(lin);
    oly_program_release(t);
}

TEST(rules_cb_pjit_transpose_rule)
{
    /* A linear program (r, t) -> pjit{ r * t } with residual r: its transpose
     * goes through pjit's rule, ct_t = r * ct. */
    oly_aval a = tu_aval(OLY_FLOAT32, 1, D3);
    oly_builder *b = NULL;
    oly_var *r, *t;
    oly_atom y, out;
    oly_program *sub = NULL, *lin = NULL, *tr = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &r));
    CHECK_OK(oly_builder_add_input(b, &a, &t));
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, oly_atom_var(r), oly_atom_var(t), &y));
    CHECK_OK(oly_builder_finish(b, &y, 1, &sub));
    oly_builder_free(b);
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &r));
    CHECK_OK(oly_builder_add_input(b, &a, &t));
    oly_params_call pc = {.name = "g", .n_out = 1};
    oly_atom in[2] = {oly_atom_var(r), oly_atom_var(t)};
    CHECK_OK(oly__emit(b, &oly__prim_pjit, in, 2, &pc, &sub, 1, &out));
    CHECK_OK(oly_builder_finish(b, &out, 1, &lin));
    oly_builder_free(b);
    CHECK_OK(oly_program_transpose(lin, 1, &tr));
    if (tr) {
        oly_array *args[2] = {tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 2, 3}),
                              tu_array(OLY_FLOAT32, 1, D3, (double[]){10, 20, 30})};
        oly_array *g = NULL;
        CHECK_OK(run(tr, args, 2, &g, 1));
        if (g) CHECK(tu_allclose(g, (double[]){10, 40, 90}, 3, 0, 0));
        oly_array_release(g);
        release_all(args, 2);
    }
    oly_program_release(sub);
    oly_program_release(lin);
    oly_program_release(tr);
}

/* ---------------------------------------------------------------- custom_jvp */

/* The rule thunk's state: how often it was traced, and its program's shape. */
typedef struct jvp_rule {
    int traced;
    bool self_ref;  /* the rule calls the function itself (like jv's) */
    double scale;   /* tangent out = scale * g(x) * t (self_ref) or scale * t */
    bool last_nz[4];
} jvp_rule;

static oly_status jvp_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                            oly_program **out);

/* exp(x) as a program */
static oly_program *exp_prog(const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom y;
    oly_program *p = NULL;
    if (oly_builder_new(&b) != OLY_OK) return NULL;
    if (oly_builder_add_input(b, a, &x) == OLY_OK &&
        oly__emit_un(b, &oly__prim_exp, oly_atom_var(x), &y) == OLY_OK)
        (void)oly_builder_finish(b, &y, 1, &p);
    oly_builder_free(b);
    return p;
}

/* Emits g(x) = custom_jvp_call{exp; rule} into b. */
static oly_status emit_g(oly_builder *b, jvp_rule *rule, oly_atom x, oly_atom *out)
{
    oly_aval a = oly__atom_aval(&x);
    oly_program *sub = exp_prog(&a);
    oly_thunk *th = NULL;
    oly_status st = sub ? oly_thunk_new("g_jvp", jvp_trace, rule, NULL, &th) : OLY_ERR_NOMEM;
    if (st == OLY_OK) {
        oly_params_custom_jvp pc = {.name = "g", .n_out = 1, .jvp = th};
        st = oly__emit(b, &oly__prim_custom_jvp_call, &x, 1, &pc, &sub, 1, out);
    }
    oly_thunk_release(th);
    oly_program_release(sub);
    return st;
}

/* (x, t) -> (exp x, scale * t) or, self-referential, (g(x), scale * g(x) * t). */
static oly_status jvp_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                            oly_program **out)
{
    jvp_rule *rule = user;
    rule->traced++;
    for (int i = 0; i < n_in && i < 4; i++) rule->last_nz[i] = nz[i];
    if (n_in != 1) return oly_host_fail(OLY_ERR_INVALID, "g_jvp: one input expected");
    oly_builder *b = NULL;
    oly_var *x, *t;
    oly_atom o[2], xa, ta;
    oly_scalar sc = {.dtype = in[0].dtype, .v.f = rule->scale};
    OLY_TRY(oly_builder_new(&b));
    oly_status st = oly_builder_add_input(b, &in[0], &x);
    if (st == OLY_OK) st = oly_builder_add_input(b, &in[0], &t);
    if (st != OLY_OK) goto done;
    xa = oly_atom_var(x);
    ta = oly_atom_var(t);
    if (rule->self_ref) {
        st = emit_g(b, rule, xa, &o[0]);
        if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, o[0], ta, &o[1]);
    } else {
        st = oly__emit_un(b, &oly__prim_exp, xa, &o[0]);
        if (st == OLY_OK) o[1] = ta;
    }
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, o[1], oly_atom_lit(sc), &o[1]);
    if (st == OLY_OK) st = oly_builder_finish(b, o, 2, out);
done:
    oly_builder_free(b);
    return st;
}

/* x -> g(x) */
static oly_program *g_prog(jvp_rule *rule, const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom y;
    oly_program *p = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, a, &x));
    CHECK_OK(emit_g(b, rule, oly_atom_var(x), &y));
    CHECK_OK(oly_builder_finish(b, &y, 1, &p));
    oly_builder_free(b);
    return p;
}

TEST(rules_cb_custom_jvp_lazy_and_used)
{
    jvp_rule rule = {.scale = 3};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = g_prog(&rule, &a), *j = NULL;
    char *text = NULL;
    if (p) CHECK_OK(oly_program_print(p, &text));
    if (text) {
        CHECK(strstr(text, "custom_jvp_call[") != NULL);
        CHECK(strstr(text, "name=g\n") != NULL);
        CHECK(strstr(text, "jvp=g_jvp\n") != NULL);
    }
    free(text);
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 0.5), tu_scalar(OLY_FLOAT32, 2)};
    oly_array *o[2] = {0};
    if (p) CHECK_OK(run(p, args, 1, o, 1));
    if (o[0]) CHECK_NEAR(tu_get(o[0], 0), exp(0.5), 1e-6);
    release_all(o, 2);
    CHECK_EQ(rule.traced, 0); /* building and running never trace the rule */
    bool nz = true, nz_out = false;
    CHECK_OK(oly_program_jvp(p, &nz, &j, &nz_out));
    CHECK_EQ(rule.traced, 1);
    CHECK(rule.last_nz[0]);
    CHECK(nz_out);
    if (j) CHECK_OK(run(j, args, 2, o, 2));
    if (o[0]) CHECK_NEAR(tu_get(o[0], 0), exp(0.5), 1e-6);
    if (o[1]) CHECK_NEAR(tu_get(o[1], 0), 6, 1e-6); /* the rule's tangent, not exp's */
    release_all(o, 2);
    release_all(args, 2);
    oly_program_release(p);
    oly_program_release(j);
}

TEST(rules_cb_custom_jvp_self_referential_two_levels)
{
    /* g's rule calls g: d/dx g = g * t. Tracing is lazy, so each jvp level
     * expands exactly one layer and the recursion terminates. */
    jvp_rule rule = {.scale = 1, .self_ref = true};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = g_prog(&rule, &a), *j1 = NULL, *j2 = NULL;
    bool nz = true, nz1[2] = {true, false}, o1 = false, o2[2] = {false, false};
    CHECK_OK(oly_program_jvp(p, &nz, &j1, &o1));
    CHECK_EQ(rule.traced, 1);
    /* second order: differentiate j1 in x only */
    if (j1) CHECK_OK(oly_program_jvp(j1, nz1, &j2, o2));
    CHECK_EQ(rule.traced, 2);
    CHECK(o2[0] && o2[1]);
    if (j2) {
        oly_array *args[3] = {tu_scalar(OLY_FLOAT32, 0.5), tu_scalar(OLY_FLOAT32, 1),
                              tu_scalar(OLY_FLOAT32, 1)};
        oly_array *o[4] = {0};
        CHECK_OK(run(j2, args, 3, o, 4));
        for (int k = 0; k < 4; k++)
            if (o[k]) CHECK_NEAR(tu_get(o[k], 0), exp(0.5), 1e-5);
        release_all(o, 4);
        release_all(args, 3);
    }
    oly_program_release(p);
    oly_program_release(j1);
    oly_program_release(j2);
}

TEST(rules_cb_custom_jvp_vmap_then_jvp)
{
    jvp_rule rule = {.scale = 3};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = g_prog(&rule, &a), *v = NULL, *j = NULL;
    int ax[1] = {0};
    CHECK_OK(oly_program_vmap(p, ax, 3, ax, &v));
    CHECK_EQ(rule.traced, 0);
    bool nz = true, nz_out = false;
    if (v) CHECK_OK(oly_program_jvp(v, &nz, &j, &nz_out));
    CHECK_EQ(rule.traced, 1);
    if (j) {
        char *text = NULL;
        CHECK_OK(oly_program_print(v, &text));
        if (text) CHECK(strstr(text, "jvp=vmap(g_jvp)") != NULL);
        free(text);
        oly_array *args[2] = {tu_array(OLY_FLOAT32, 1, D3, (double[]){0, 1, 2}),
                              tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 2, 3})};
        oly_array *o[2] = {0};
        CHECK_OK(run(j, args, 2, o, 2));
        if (o[0]) CHECK(tu_allclose(o[0], (double[]){1, exp(1), exp(2)}, 3, 1e-6, 0));
        if (o[1]) CHECK(tu_allclose(o[1], (double[]){3, 6, 9}, 3, 1e-6, 0));
        release_all(o, 2);
        release_all(args, 2);
    }
    oly_program_release(p);
    oly_program_release(v);
    oly_program_release(j);
}

/* ---------------------------------------------------------------- custom_vjp */

typedef struct vjp_rule {
    int fwd_traced, bwd_traced;
} vjp_rule;

/* fwd: (x, y) -> (x * y, residuals x, y) */
static oly_status fwd_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                            oly_program **out)
{
    vjp_rule *rule = user;
    rule->fwd_traced++;
    oly_builder *b = NULL;
    oly_var *x, *y;
    oly_atom o[3];
    OLY_TRY(oly_builder_new(&b));
    oly_status st = oly_builder_add_input(b, &in[0], &x);
    if (st == OLY_OK) st = oly_builder_add_input(b, &in[1], &y);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, oly_atom_var(x), oly_atom_var(y), &o[0]);
    if (st == OLY_OK) {
        o[1] = oly_atom_var(x);
        o[2] = oly_atom_var(y);
        st = oly_builder_finish(b, o, 3, out);
    }
    oly_builder_free(b);
    return st;
}

/* bwd: (rx, ry, ct) -> (10 * ry * ct, 100 * rx * ct): not the true gradient,
 * so a test can tell that bwd was used. */
static oly_status bwd_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                            oly_program **out)
{
    vjp_rule *rule = user;
    rule->bwd_traced++;
    if (n_in != 3) return oly_host_fail(OLY_ERR_INVALID, "bwd: 3 inputs expected, got %d", n_in);
    oly_builder *b = NULL;
    oly_var *v[3];
    oly_atom o[2];
    oly_scalar ten = {.dtype = OLY_FLOAT32, .v.f = 10}, hundred = {.dtype = OLY_FLOAT32, .v.f = 100};
    OLY_TRY(oly_builder_new(&b));
    oly_status st = OLY_OK;
    for (int i = 0; i < 3 && st == OLY_OK; i++) st = oly_builder_add_input(b, &in[i], &v[i]);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, oly_atom_var(v[1]), oly_atom_var(v[2]), &o[0]);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, o[0], oly_atom_lit(ten), &o[0]);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, oly_atom_var(v[0]), oly_atom_var(v[2]), &o[1]);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, o[1], oly_atom_lit(hundred), &o[1]);
    if (st == OLY_OK) st = oly_builder_finish(b, o, 2, out);
    oly_builder_free(b);
    return st;
}

/* (x, y) -> custom_vjp_call{x * y; fwd, bwd} */
static oly_program *h_prog(vjp_rule *rule, const oly_aval *a)
{
    oly_builder *b = NULL;
    oly_var *x, *y;
    oly_atom out;
    oly_program *sub = NULL, *p = NULL;
    oly_thunk *fwd = NULL, *bwd = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, a, &x));
    CHECK_OK(oly_builder_add_input(b, a, &y));
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, oly_atom_var(x), oly_atom_var(y), &out));
    CHECK_OK(oly_builder_finish(b, &out, 1, &sub));
    oly_builder_free(b);
    CHECK_OK(oly_thunk_new("h_fwd", fwd_trace, rule, NULL, &fwd));
    CHECK_OK(oly_thunk_new("h_bwd", bwd_trace, rule, NULL, &bwd));
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, a, &x));
    CHECK_OK(oly_builder_add_input(b, a, &y));
    oly_atom in[2] = {oly_atom_var(x), oly_atom_var(y)};
    oly_params_custom_vjp pc = {.name = "h", .n_out = 1, .fwd = fwd, .bwd = bwd};
    CHECK_OK(oly__emit(b, &oly__prim_custom_vjp_call, in, 2, &pc, &sub, 1, &out));
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    oly_thunk_release(fwd);
    oly_thunk_release(bwd);
    oly_program_release(sub);
    return p;
}

/* Linearizes p in every input, transposes, runs primal then the transpose
 * with cotangent ct; grads receives n_in cotangents. */
static void vjp_run(oly_program *p, oly_array *const *args, int n_in, oly_array *ct,
                    oly_array **primal_out, oly_array **grads)
{
    bool nz[4] = {true, true, true, true}, nz_out[4];
    oly_program *primal = NULL, *lin = NULL, *t = NULL;
    int n_res = 0;
    CHECK_OK(oly_program_linearize(p, nz, &primal, &lin, &n_res, nz_out));
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    if (primal && t) {
        oly_array *po[16] = {0}, *tin[16] = {0};
        int np = oly_program_num_outputs(primal), k = 0;
        CHECK_OK(run(primal, args, n_in, po, np));
        for (int i = 1; i < np; i++) tin[k++] = po[i];
        tin[k++] = ct;
        CHECK_OK(run(t, tin, k, grads, n_in));
        *primal_out = po[0];
        release_all(po + 1, np - 1);
    }
    oly_program_release(primal);
    oly_program_release(lin);
    oly_program_release(t);
}

TEST(rules_cb_custom_vjp_grad_uses_bwd)
{
    vjp_rule rule = {0};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = h_prog(&rule, &a);
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 3), tu_scalar(OLY_FLOAT32, 5)};
    oly_array *ct = tu_scalar(OLY_FLOAT32, 2), *y = NULL, *g[2] = {0};
    if (p) CHECK_OK(run(p, args, 2, &y, 1));
    if (y) CHECK_NEAR(tu_get(y, 0), 15, 0);
    oly_array_release(y);
    y = NULL;
    CHECK_EQ(rule.fwd_traced + rule.bwd_traced, 0);
    vjp_run(p, args, 2, ct, &y, g);
    CHECK_EQ(rule.fwd_traced, 1);
    CHECK_EQ(rule.bwd_traced, 1);
    if (y) CHECK_NEAR(tu_get(y, 0), 15, 0);
    if (g[0]) CHECK_NEAR(tu_get(g[0], 0), 10 * 5 * 2, 0);
    if (g[1]) CHECK_NEAR(tu_get(g[1], 0), 100 * 3 * 2, 0);
    oly_array_release(y);
    release_all(g, 2);
    oly_array_release(ct);
    release_all(args, 2);
    oly_program_release(p);
}

TEST(rules_cb_custom_vjp_forward_mode_errors)
{
    vjp_rule rule = {0};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = h_prog(&rule, &a), *j = NULL;
    bool nz[2] = {true, false}, nz_out = false;
    CHECK_OK(oly_program_jvp(p, nz, &j, &nz_out));
    CHECK_EQ(rule.bwd_traced, 0);
    oly_array *args[3] = {tu_scalar(OLY_FLOAT32, 3), tu_scalar(OLY_FLOAT32, 5),
                          tu_scalar(OLY_FLOAT32, 1)};
    oly_array *o[2] = {0};
    if (j) CHECK_ERR(run(j, args, 3, o, 2), OLY_ERR_TYPE,
                     "can't apply forward-mode autodiff (jvp) to a custom_vjp function.");
    CHECK(o[0] == NULL);
    release_all(args, 3);
    oly_program_release(p);
    oly_program_release(j);
}

TEST(rules_cb_custom_vjp_vmap_then_grad)
{
    /* x batched (N = 3), y unbatched: y's cotangent sums over the batch. */
    vjp_rule rule = {0};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = h_prog(&rule, &a), *v = NULL;
    int in_axes[2] = {0, -1}, out_axes[1] = {0};
    CHECK_OK(oly_program_vmap(p, in_axes, 3, out_axes, &v));
    CHECK_EQ(rule.fwd_traced + rule.bwd_traced, 0);
    oly_array *args[2] = {tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 2, 3}),
                          tu_scalar(OLY_FLOAT32, 5)};
    oly_array *ct = tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 1, 2}), *y = NULL, *g[2] = {0};
    if (v) vjp_run(v, args, 2, ct, &y, g);
    CHECK_EQ(rule.fwd_traced, 1);
    CHECK_EQ(rule.bwd_traced, 1);
    if (y) CHECK(tu_allclose(y, (double[]){5, 10, 15}, 3, 0, 0));
    if (g[0]) CHECK(tu_allclose(g[0], (double[]){50, 50, 100}, 3, 0, 0));
    if (g[1]) {
        CHECK_EQ(oly_array_aval(g[1])->rank, 0);
        CHECK_NEAR(tu_get(g[1], 0), 100 * (1 * 1 + 2 * 1 + 3 * 2), 0);
    }
    oly_array_release(y);
    release_all(g, 2);
    oly_array_release(ct);
    release_all(args, 2);
    oly_program_release(p);
    oly_program_release(v);
}

TEST(rules_cb_thunk_errors)
{
    oly_thunk *t = NULL;
    CHECK_ERR(oly_thunk_new("x", NULL, NULL, NULL, &t), OLY_ERR_INVALID, "trace");
    CHECK(t == NULL);
    /* a failing rule's status and message reach the transform's caller */
    jvp_rule rule = {.scale = 1};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL), two[2] = {a, a};
    oly_program *p = g_prog(&rule, &a), *out = NULL;
    CHECK_OK(oly_thunk_new("g_jvp", jvp_trace, &rule, NULL, &t));
    bool nz[2] = {true, true};
    CHECK_ERR(oly_thunk_trace(t, 2, two, nz, &out), OLY_ERR_INVALID, "one input expected");
    CHECK(out == NULL);
    oly_thunk_release(t);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- program shapes */

static int count_prim(const oly_program *p, const char *name)
{
    int n = 0;
    for (int k = 0; k < p->n_eqn; k++) {
        n += strcmp(p->eqn[k].prim->name, name) == 0;
        for (int j = 0; j < p->eqn[k].n_sub; j++) n += count_prim(p->eqn[k].sub[j], name);
    }
    return n;
}

TEST(rules_cb_vmap_sequential_is_a_scan)
{
    /* sequential: one scan whose body holds the one call (lax.map), so the
     * program does not grow with N; sequential_unrolled: N equations. io
     * callbacks keep their effect through the scan, literals stay literals. */
    for (int which = 0; which < 3; which++) {
        rec r;
        oly_host_fn *fn = rec_fn(&r);
        oly_aval s = tu_aval(OLY_FLOAT32, 0, NULL);
        const oly_prim *prim = which == 2 ? &oly__prim_io_callback : &oly__prim_pure_callback;
        int method = which == 1 ? OLY_VMAP_SEQUENTIAL_UNROLLED : OLY_VMAP_SEQUENTIAL;
        oly_builder *b = NULL;
        oly_var *x;
        oly_atom in[2], out;
        CHECK_OK(oly_builder_new(&b));
        CHECK_OK(oly_builder_add_input(b, &s, &x));
        oly_scalar lit = {.dtype = OLY_FLOAT32, .v.f = 0.5};
        in[0] = oly_atom_var(x);
        in[1] = oly_atom_lit(lit);
        oly_params_callback pc = {.callback = fn, .result_avals = &s, .n_results = 1,
                                  .vmap_method = method};
        CHECK_OK(oly__emit(b, prim, in, 2, &pc, NULL, 0, &out));
        oly_program *p = NULL, *v = NULL, *d = NULL;
        CHECK_OK(oly_builder_finish(b, &out, 1, &p));
        oly_builder_free(b);
        int ax[1] = {0};
        CHECK_OK(oly_program_vmap(p, ax, 5, ax, &v));
        if (v) {
            CHECK_EQ(count_prim(v, "scan"), which == 1 ? 0 : 1);
            CHECK_EQ(count_prim(v, prim->name), which == 1 ? 5 : 1);
            CHECK_EQ(oly_program_effects(v), which == 2 ? OLY_EFFECT_IO : 0u);
            CHECK_OK(oly_program_dce(v, &d));
        }
        oly_array *xa = tu_array(OLY_FLOAT32, 1, (const int64_t[]){5}, (double[]){1, 2, 3, 4, 5});
        oly_array *y = NULL;
        if (d) CHECK_OK(run(d, &xa, 1, &y, 1));
        CHECK_EQ(r.calls, 5);
        for (int c = 0; c < 5 && c < r.calls; c++) CHECK_EQ(r.first[c], c + 1);
        if (y) CHECK(tu_allclose(y, (double[]){2.5, 4.5, 6.5, 8.5, 10.5}, 5, 0, 0));
        oly_array_release(xa);
        oly_array_release(y);
        oly_program_release(p);
        oly_program_release(v);
        oly_program_release(d);
        oly_host_fn_release(fn);
    }
}

TEST(rules_cb_vmap_size_zero)
{
    /* N = 0: no call, results of shape (0, 3). */
    for (int method = OLY_VMAP_SEQUENTIAL; method <= OLY_VMAP_SEQUENTIAL_UNROLLED; method++) {
        rec r;
        oly_host_fn *fn = rec_fn(&r);
        oly_aval in = tu_aval(OLY_FLOAT32, 1, D3);
        oly_program *p = callback_prog(&oly__prim_pure_callback, fn, 1, &in, 1, &in, method,
                                       false);
        oly_program *v = NULL;
        int ax[1] = {0};
        CHECK_OK(oly_program_vmap(p, ax, 0, ax, &v));
        oly_array *x = tu_array(OLY_FLOAT32, 2, (const int64_t[]){0, 3}, NULL), *y = NULL;
        if (v) CHECK_OK(run(v, &x, 1, &y, 1));
        CHECK_EQ(r.calls, 0);
        if (y) {
            CHECK_EQ(oly_array_aval(y)->rank, 2);
            CHECK_EQ(oly_array_aval(y)->dims[0], 0);
            CHECK_EQ(oly_array_aval(y)->dims[1], 3);
        }
        oly_array_release(x);
        oly_array_release(y);
        oly_program_release(p);
        oly_program_release(v);
        oly_host_fn_release(fn);
    }
}

/* A jvp rule that prints its primal with a debug callback: effects inside
 * custom rules are allowed and run once per execution of the jvp program. */
static rec dbg_rec;
static oly_host_fn *dbg_fn;

static oly_status printing_jvp_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                                     oly_program **out)
{
    oly_builder *b = NULL;
    oly_var *x, *t;
    oly_atom o[2];
    OLY_TRY(oly_builder_new(&b));
    oly_status st = oly_builder_add_input(b, &in[0], &x);
    if (st == OLY_OK) st = oly_builder_add_input(b, &in[0], &t);
    if (st != OLY_OK) {
        oly_builder_free(b);
        return st;
    }
    oly_params_callback pc = {.callback = dbg_fn, .ordered = true};
    oly_atom xa = oly_atom_var(x);
    st = oly__emit(b, &oly__prim_debug_callback, &xa, 1, &pc, NULL, 0, NULL);
    if (st == OLY_OK) st = oly__emit_un(b, &oly__prim_exp, xa, &o[0]);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, o[0], oly_atom_var(t), &o[1]);
    if (st == OLY_OK) st = oly_builder_finish(b, o, 2, out);
    oly_builder_free(b);
    return st;
}

TEST(rules_cb_custom_jvp_rule_with_debug_callback)
{
    dbg_fn = rec_fn(&dbg_rec);
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom y;
    oly_program *sub = exp_prog(&a), *p = NULL, *j = NULL;
    oly_thunk *th = NULL;
    CHECK_OK(oly_thunk_new("printing_jvp", printing_jvp_trace, NULL, NULL, &th));
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xa = oly_atom_var(x);
    oly_params_custom_jvp pc = {.name = "e", .n_out = 1, .jvp = th};
    CHECK_OK(oly__emit(b, &oly__prim_custom_jvp_call, &xa, 1, &pc, &sub, 1, &y));
    CHECK_OK(oly_builder_finish(b, &y, 1, &p));
    oly_builder_free(b);
    bool nz = true, nz_out = false;
    CHECK_OK(oly_program_jvp(p, &nz, &j, &nz_out));
    if (j) CHECK_EQ(oly_program_effects(j), OLY_EFFECT_ORDERED_DEBUG);
    oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 1), tu_scalar(OLY_FLOAT32, 2)}, *o[2] = {0};
    if (j) CHECK_OK(run(j, args, 2, o, 2));
    CHECK_EQ(dbg_rec.calls, 1);
    CHECK_EQ(dbg_rec.first[0], 1);
    if (o[1]) CHECK_NEAR(tu_get(o[1], 0), 2 * exp(1.0), 1e-5);
    release_all(o, 2);
    release_all(args, 2);
    oly_thunk_release(th);
    oly_program_release(sub);
    oly_program_release(p);
    oly_program_release(j);
    oly_host_fn_release(dbg_fn);
    dbg_fn = NULL;
}

/* ---------------------------------------------------------------- the rule-check harness */

#include "rulecheck.h"

/* A pure host function with NumPy broadcasting: out = 2 * a + sin(b) in
 * float64 (b optional), what a vectorized NumPy callback computes. */
static oly_status bcast_host(void *user, oly_callback_frame *f)
{
    int *calls = user;
    ++*calls;
    const oly_aval *o = &f->result_avals[0];
    int64_t idx[OLY_MAX_RANK] = {0};
    for (int64_t e = 0; e < oly_aval_size(o); e++) {
        double v = 0;
        for (int a = 0; a < f->n_args; a++) {
            const oly_aval *av = &f->arg_avals[a];
            if (av->rank > o->rank) return oly_host_fail(OLY_ERR_CALLBACK, "bcast_host: rank");
            int64_t flat = 0;
            for (int d = 0; d < av->rank; d++) {
                int64_t od = idx[o->rank - av->rank + d];
                flat = flat * av->dims[d] + (av->dims[d] == 1 ? 0 : od);
            }
            double x = ((const double *)f->args[a])[flat];
            v += a == 0 ? 2 * x : sin(x);
        }
        ((double *)f->results[0])[e] = v;
        for (int d = o->rank - 1; d >= 0; d--) {
            if (++idx[d] < o->dims[d]) break;
            idx[d] = 0;
        }
    }
    return OLY_OK;
}

TEST(rules_cb_rulecheck_pure_callback_vmap_methods)
{
    int calls = 0;
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("bcast", bcast_host, &calls, NULL, &fn));
    oly_aval res = RC_F64(4, 3);
    for (int m = OLY_VMAP_SEQUENTIAL; m <= OLY_VMAP_LEGACY_VECTORIZED; m++) {
        oly_params_callback pc = {.callback = fn, .result_avals = &res, .n_results = 1,
                                  .vmap_method = m};
        /* equal ranks: a vectorized callback sees (N, 4, 3) with (N or 1, 1, 3) */
        rc_case c = {.prim = "pure_callback", .params = &pc, .n_in = 2,
                     .in = {RC_F64(4, 3), RC_F64(1, 3)}};
        CHECK(rc_check_vmap(&c));
    }
    CHECK(calls > 0);
    oly_host_fn_release(fn);
}

TEST(rules_cb_rulecheck_io_callback_vmap)
{
    int calls = 0;
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("bcast", bcast_host, &calls, NULL, &fn));
    oly_aval res = RC_F64(2, 3);
    oly_params_callback pc = {.callback = fn, .result_avals = &res, .n_results = 1};
    rc_case c = {.prim = "io_callback", .params = &pc, .n_in = 2, .in = {RC_F64(2, 3), RC_F64(3)}};
    CHECK(rc_check_vmap(&c));
    oly_host_fn_release(fn);
}

TEST(rules_cb_rulecheck_pjit)
{
    /* pjit{ sin(x) * y } */
    oly_aval a = RC_F64(3, 2);
    oly_builder *b = NULL;
    oly_var *x, *y;
    oly_atom s, o;
    oly_program *sub = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly_builder_add_input(b, &a, &y));
    CHECK_OK(oly__emit_un(b, &oly__prim_sin, oly_atom_var(x), &s));
    CHECK_OK(oly__emit_bin(b, &oly__prim_mul, s, oly_atom_var(y), &o));
    CHECK_OK(oly_builder_finish(b, &o, 1, &sub));
    oly_builder_free(b);
    oly_params_call pc = {.name = "f", .n_out = 1};
    rc_case c = {.prim = "pjit", .params = &pc, .n_in = 2, .in = {a, a}, .subs = &sub,
                 .n_sub = 1};
    CHECK(rc_check_all(&c));
    /* linear in y with x as a residual: pjit's own transpose rule */
    rc_case l = c;
    l.linear[1] = true;
    CHECK(rc_check_transpose(&l));
    oly_program_release(sub);
}

/* The true JVP of sin: (x, t) -> (sin x, cos x * t). */
static oly_status sin_jvp_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                                oly_program **out)
{
    ++*(int *)user;
    oly_builder *b = NULL;
    oly_var *x, *t;
    oly_atom o[2], c;
    OLY_TRY(oly_builder_new(&b));
    oly_status st = oly_builder_add_input(b, &in[0], &x);
    if (st == OLY_OK) st = oly_builder_add_input(b, &in[0], &t);
    if (st == OLY_OK) st = oly__emit_un(b, &oly__prim_sin, oly_atom_var(x), &o[0]);
    if (st == OLY_OK) st = oly__emit_un(b, &oly__prim_cos, oly_atom_var(x), &c);
    if (st == OLY_OK) st = oly__emit_bin(b, &oly__prim_mul, c, oly_atom_var(t), &o[1]);
    if (st == OLY_OK) st = oly_builder_finish(b, o, 2, out);
    oly_builder_free(b);
    return st;
}

TEST(rules_cb_rulecheck_custom_jvp)
{
    int traced = 0;
    oly_aval a = RC_F64(3, 2);
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom o;
    oly_program *sub = NULL;
    oly_thunk *th = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly__emit_un(b, &oly__prim_sin, oly_atom_var(x), &o));
    CHECK_OK(oly_builder_finish(b, &o, 1, &sub));
    oly_builder_free(b);
    CHECK_OK(oly_thunk_new("sin_jvp", sin_jvp_trace, &traced, NULL, &th));
    oly_params_custom_jvp pc = {.name = "s", .n_out = 1, .jvp = th};
    rc_case c = {.prim = "custom_jvp_call", .params = &pc, .n_in = 1, .in = {a}, .subs = &sub,
                 .n_sub = 1};
    CHECK(rc_check_all(&c));
    CHECK(traced > 0);
    oly_thunk_release(th);
    oly_program_release(sub);
}

TEST(rules_cb_custom_lin_vmap_then_transpose)
{
    /* The linear program of h (a custom_lin holding bwd), vmapped over its
     * tangents with the residuals unbatched, then transposed: bwd per element. */
    vjp_rule rule = {0};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = h_prog(&rule, &a), *primal = NULL, *lin = NULL, *v = NULL, *t = NULL;
    bool nz[2] = {true, true}, nz_out[1];
    int n_res = 0;
    CHECK_OK(oly_program_linearize(p, nz, &primal, &lin, &n_res, nz_out));
    CHECK_EQ(count_prim(lin, "custom_lin"), 1);
    int in_axes[8], out_axes[1] = {0};
    for (int i = 0; lin && i < lin->n_in && i < 8; i++) in_axes[i] = i < n_res ? -1 : 0;
    if (lin) CHECK_OK(oly_program_vmap(lin, in_axes, 3, out_axes, &v));
    if (v) CHECK_OK(oly_program_transpose(v, n_res, &t));
    CHECK_EQ(rule.bwd_traced, 1);
    if (primal && t) {
        oly_array *args[2] = {tu_scalar(OLY_FLOAT32, 3), tu_scalar(OLY_FLOAT32, 5)};
        oly_array *po[8] = {0}, *tin[8] = {0}, *g[2] = {0};
        int np = oly_program_num_outputs(primal), k = 0;
        CHECK_OK(run(primal, args, 2, po, np));
        for (int i = 1; i < np; i++) tin[k++] = po[i];
        oly_array *ct = tu_array(OLY_FLOAT32, 1, D3, (double[]){1, 2, 3});
        tin[k++] = ct;
        CHECK_OK(run(t, tin, k, g, 2));
        if (g[0]) CHECK(tu_allclose(g[0], (double[]){50, 100, 150}, 3, 0, 0));
        if (g[1]) CHECK(tu_allclose(g[1], (double[]){300, 600, 900}, 3, 0, 0));
        release_all(g, 2);
        oly_array_release(ct);
        release_all(po, np);
        release_all(args, 2);
    }
    oly_program_release(p);
    oly_program_release(primal);
    oly_program_release(lin);
    oly_program_release(v);
    oly_program_release(t);
}

/* A jvp rule whose program has the wrong tangent aval. */
static oly_status bad_jvp_trace(void *user, int n_in, const oly_aval *in, const bool *nz,
                                oly_program **out)
{
    oly_builder *b = NULL;
    oly_var *x, *t;
    oly_atom o[2];
    OLY_TRY(oly_builder_new(&b));
    oly_status st = oly_builder_add_input(b, &in[0], &x);
    if (st == OLY_OK) st = oly_builder_add_input(b, &in[0], &t);
    if (st == OLY_OK) {
        o[0] = oly_atom_var(x);
        st = oly__emit_convert(b, oly_atom_var(t), OLY_FLOAT64, &o[1]);
    }
    if (st == OLY_OK) st = oly_builder_finish(b, o, 2, out);
    oly_builder_free(b);
    return st;
}

TEST(rules_cb_custom_jvp_bad_rule_program)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x;
    oly_atom y;
    oly_program *sub = exp_prog(&a), *p = NULL, *j = NULL;
    oly_thunk *th = NULL;
    CHECK_OK(oly_thunk_new("bad_jvp", bad_jvp_trace, NULL, NULL, &th));
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xa = oly_atom_var(x);
    oly_params_custom_jvp pc = {.name = "e", .n_out = 1, .jvp = th};
    CHECK_OK(oly__emit(b, &oly__prim_custom_jvp_call, &xa, 1, &pc, &sub, 1, &y));
    CHECK_OK(oly_builder_finish(b, &y, 1, &p));
    oly_builder_free(b);
    bool nz = true, nz_out = false;
    CHECK_ERR(oly_program_jvp(p, &nz, &j, &nz_out), OLY_ERR_TYPE,
              "custom_jvp_call e: jvp rule output 1 is f64[], expected f32[]");
    CHECK(j == NULL);
    oly_thunk_release(th);
    oly_program_release(sub);
    oly_program_release(p);
}

TEST(rules_cb_custom_jvp_nested_vmap_then_jvp)
{
    /* Two vmap levels wrap the thunk twice; one jvp traces the user's rule once. */
    jvp_rule rule = {.scale = 3};
    oly_aval a = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_program *p = g_prog(&rule, &a), *v1 = NULL, *v2 = NULL, *j = NULL;
    int ax[1] = {0};
    CHECK_OK(oly_program_vmap(p, ax, 2, ax, &v1));
    if (v1) CHECK_OK(oly_program_vmap(v1, ax, 3, ax, &v2));
    bool nz = true, nz_out = false;
    if (v2) CHECK_OK(oly_program_jvp(v2, &nz, &j, &nz_out));
    CHECK_EQ(rule.traced, 1);
    if (j) {
        double xv[6], tv[6], want_p[6], want_t[6];
        for (int i = 0; i < 6; i++) {
            xv[i] = 0.1 * i;
            tv[i] = i + 1;
            want_p[i] = exp(xv[i]);
            want_t[i] = 3 * tv[i];
        }
        oly_array *args[2] = {tu_array(OLY_FLOAT32, 2, D32, xv), tu_array(OLY_FLOAT32, 2, D32, tv)};
        oly_array *o[2] = {0};
        CHECK_OK(run(j, args, 2, o, 2));
        if (o[0]) CHECK(tu_allclose(o[0], want_p, 6, 1e-6, 0));
        if (o[1]) CHECK(tu_allclose(o[1], want_t, 6, 1e-6, 0));
        release_all(o, 2);
        release_all(args, 2);
    }
    oly_program_release(p);
    oly_program_release(v1);
    oly_program_release(v2);
    oly_program_release(j);
}

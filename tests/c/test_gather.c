/* test_gather.c — the gather and scatter rows (src/prims/gather.c,
 * src/cpu/gather.c): the kernels for every dtype, row and window gathers,
 * the out-of-bounds modes, batching dims, the shape rules' errors, and the
 * batch / jvp / transpose rules through rulecheck. Expected values are
 * hand-computed (NumPy's x[idx], np.add.at, ...). */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include <math.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})
#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}

/* x[idx] for a 1-D x and idx of shape (n, 1). */
static oly_params_gather take1(oly_gather_mode mode)
{
    return (oly_params_gather){.collapsed_slice_dims = INTS(0), .start_index_map = INTS(0),
                               .slice_sizes = INTS(1), .mode = mode, .fill_value = NAN};
}

/* The scatter matching take1. */
static oly_params_scatter put1(oly_gather_mode mode)
{
    return (oly_params_scatter){.inserted_window_dims = INTS(0),
                                .scatter_dims_to_operand_dims = INTS(0), .mode = mode};
}

static oly_array *run1(const oly_prim *p, const void *params, oly_array **in, int n_in)
{
    oly_array *out[2] = {0};
    int n_out = 0;
    CHECK_OK(tu_run_kernel(p, params, in, n_in, out, 2, &n_out));
    return out[0];
}

static void release_all(oly_array **a, int n)
{
    for (int i = 0; i < n; i++) oly_array_release(a[i]);
}

TEST(gather_every_dtype)
{
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        oly_dtype dt = (oly_dtype)t;
        bool b = dt == OLY_BOOL;
        oly_array *in[2] = {tu_array(dt, 1, D(4), b ? V(1, 0, 1, 1) : V(10, 11, 12, 13)),
                            tu_array(OLY_INT32, 2, D(3, 1), V(2, 0, 3))};
        oly_params_gather p = take1(OLY_GATHER_CLIP);
        oly_array *y = run1(&oly__prim_gather, &p, in, 2);
        if (y) {
            CHECK(tu_allclose(y, b ? V(1, 1, 1) : V(12, 10, 13), 3, 0, 0));
            CHECK_EQ(oly_array_aval(y)->dtype, dt);
        }
        if (oly_test_failed) fprintf(stderr, "    dtype %s\n", oly_dtype_name(dt));
        oly_array_release(y);
        release_all(in, 2);
    }
}

/* scatter rows on [base] with indices (1, 1, 3) and updates u: the repeated
 * index combines twice. */
static void check_scatter(const oly_prim *row, oly_dtype dt, const double *base, const double *u,
                          const double *want)
{
    oly_array *in[3] = {tu_array(dt, 1, D(4), base), tu_array(OLY_INT64, 2, D(3, 1), V(1, 1, 3)),
                        tu_array(dt, 1, D(3), u)};
    oly_params_scatter p = put1(OLY_GATHER_FILL_OR_DROP);
    oly_array *y = run1(row, &p, in, 3);
    if (y) CHECK(tu_allclose(y, want, 4, 1e-6, 0));
    if (oly_test_failed) fprintf(stderr, "    %s %s\n", row->name, oly_dtype_name(dt));
    oly_array_release(y);
    release_all(in, 3);
}

TEST(scatter_every_dtype)
{
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        oly_dtype dt = (oly_dtype)t;
        if (dt == OLY_BOOL) {
            check_scatter(&oly__prim_scatter, dt, V(0, 0, 0, 0), V(1, 0, 1), V(0, 0, 0, 1));
            check_scatter(&oly__prim_scatter_add, dt, V(0, 0, 1, 0), V(1, 0, 0), V(0, 1, 1, 0));
            check_scatter(&oly__prim_scatter_mul, dt, V(1, 1, 1, 1), V(1, 0, 1), V(1, 0, 1, 1));
            check_scatter(&oly__prim_scatter_min, dt, V(1, 1, 1, 1), V(1, 1, 0), V(1, 1, 1, 0));
            check_scatter(&oly__prim_scatter_max, dt, V(0, 0, 0, 0), V(0, 1, 0), V(0, 1, 0, 0));
            continue;
        }
        check_scatter(&oly__prim_scatter, dt, V(1, 2, 3, 4), V(7, 8, 9), V(1, 8, 3, 9));
        check_scatter(&oly__prim_scatter_add, dt, V(1, 2, 3, 4), V(7, 8, 9), V(1, 17, 3, 13));
        check_scatter(&oly__prim_scatter_mul, dt, V(1, 2, 3, 4), V(3, 2, 2), V(1, 12, 3, 8));
        if (oly_dtype_is_complex(dt)) continue;
        check_scatter(&oly__prim_scatter_min, dt, V(1, 5, 3, 4), V(7, 2, 1), V(1, 2, 3, 1));
        check_scatter(&oly__prim_scatter_max, dt, V(1, 5, 3, 4), V(7, 2, 1), V(1, 7, 3, 4));
    }
}

TEST(scatter_integers_wrap_and_floats_keep_nan)
{
    check_scatter(&oly__prim_scatter_add, OLY_INT8, V(0, 100, 0, 0), V(100, 100, 0),
                  V(0, 44, 0, 0)); /* 300 wraps to 44 */
    check_scatter(&oly__prim_scatter_mul, OLY_UINT16, V(0, 300, 0, 1), V(300, 1, 2),
                  V(0, 24464, 0, 2)); /* 90000 mod 65536 */
    check_scatter(&oly__prim_scatter_min, OLY_FLOAT64, V(0, 1, 0, 0), V(NAN, 0, 5),
                  V(0, NAN, 0, 0));
    check_scatter(&oly__prim_scatter_max, OLY_FLOAT32, V(0, 1, 0, NAN), V(0, 0, 5),
                  V(0, 1, 0, NAN));
}

TEST(gather_rows_and_windows)
{
    /* rows 2 and 0 of a 3x4 matrix: offset_dims (1), one memcpy per row */
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, D(3, 4), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)),
                        tu_array(OLY_INT32, 2, D(2, 1), V(2, 0))};
    oly_params_gather p = {.offset_dims = INTS(1), .collapsed_slice_dims = INTS(0),
                           .start_index_map = INTS(0), .slice_sizes = INTS(1, 4)};
    oly_array *y = run1(&oly__prim_gather, &p, in, 2);
    if (y) {
        CHECK_EQ(oly_array_aval(y)->rank, 2);
        CHECK(tu_allclose(y, V(8, 9, 10, 11, 0, 1, 2, 3), 8, 0, 0));
    }
    oly_array_release(y);
    /* columns 3 and 1 with the window first: offset_dims (0), out [3, 2] */
    oly_array_release(in[1]);
    in[1] = tu_array(OLY_INT32, 2, D(2, 1), V(3, 1));
    p = (oly_params_gather){.offset_dims = INTS(0), .collapsed_slice_dims = INTS(1),
                            .start_index_map = INTS(1), .slice_sizes = INTS(3, 1)};
    y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(3, 1, 7, 5, 11, 9), 6, 0, 0));
    oly_array_release(y);
    /* a 2x2 window at (i, j) pairs, not collapsed: out [2, 2, 2] */
    oly_array_release(in[1]);
    in[1] = tu_array(OLY_INT32, 2, D(2, 2), V(1, 2, 0, 0));
    p = (oly_params_gather){.offset_dims = INTS(1, 2), .start_index_map = INTS(0, 1),
                            .slice_sizes = INTS(2, 2)};
    y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(6, 7, 10, 11, 0, 1, 4, 5), 8, 0, 0));
    oly_array_release(y);
    release_all(in, 2);
}

TEST(gather_modes)
{
    oly_array *in[2] = {tu_array(OLY_FLOAT64, 1, D(5), V(0, 1, 2, 3, 4)),
                        tu_array(OLY_INT32, 2, D(3, 1), V(-1, 3, 9))};
    /* a window of 3 at starts -1, 3, 9: only none fits as given */
    oly_params_gather p = {.offset_dims = INTS(1), .start_index_map = INTS(0),
                           .slice_sizes = INTS(3), .mode = OLY_GATHER_CLIP, .fill_value = NAN};
    oly_array *y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(0, 1, 2, 2, 3, 4, 2, 3, 4), 9, 0, 0));
    oly_array_release(y);
    p.mode = OLY_GATHER_PROMISE_IN_BOUNDS; /* kept safe: clamps */
    y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(0, 1, 2, 2, 3, 4, 2, 3, 4), 9, 0, 0));
    oly_array_release(y);
    p.mode = OLY_GATHER_FILL_OR_DROP;
    y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN), 9, 0, 0));
    oly_array_release(y);
    p.fill_value = -7;
    oly_array_release(in[1]);
    in[1] = tu_array(OLY_INT32, 2, D(2, 1), V(2, 3));
    y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(2, 3, 4, -7, -7, -7), 6, 0, 0));
    oly_array_release(y);
    release_all(in, 2);
    /* integer fill defaults: the most negative signed, the largest unsigned */
    in[0] = tu_array(OLY_INT16, 1, D(2), V(5, 6));
    in[1] = tu_array(OLY_UINT8, 2, D(2, 1), V(1, 200));
    oly_params_gather q = take1(OLY_GATHER_FILL_OR_DROP);
    y = run1(&oly__prim_gather, &q, in, 2);
    if (y) CHECK(tu_allclose(y, V(6, -32768), 2, 0, 0));
    oly_array_release(y);
    oly_array_release(in[0]);
    in[0] = tu_array(OLY_UINT32, 1, D(2), V(5, 6));
    y = run1(&oly__prim_gather, &q, in, 2);
    if (y) CHECK(tu_allclose(y, V(6, 4294967295.0), 2, 0, 0));
    oly_array_release(y);
    release_all(in, 2);
}

TEST(scatter_modes)
{
    /* index 7 is out of bounds for [4]: clip writes at 3, fill_or_drop and
     * promise_in_bounds skip it */
    double want_clip[4] = {0, 1, 0, 2}, want_drop[4] = {0, 1, 0, 0};
    int modes[3] = {OLY_GATHER_CLIP, OLY_GATHER_FILL_OR_DROP, OLY_GATHER_PROMISE_IN_BOUNDS};
    for (int m = 0; m < 3; m++) {
        oly_array *in[3] = {tu_array(OLY_FLOAT32, 1, D(4), NULL),
                            tu_array(OLY_INT32, 2, D(3, 1), V(1, 7, -1)),
                            tu_array(OLY_FLOAT32, 1, D(3), V(1, 2, 3))};
        oly_params_scatter p = put1(modes[m]);
        oly_array *y = run1(&oly__prim_scatter_add, &p, in, 3);
        /* -1 clamps to 0 under clip */
        double want[4];
        memcpy(want, m == 0 ? want_clip : want_drop, sizeof want);
        if (m == 0) want[0] = 3;
        if (y) CHECK(tu_allclose(y, want, 4, 0, 0));
        oly_array_release(y);
        release_all(in, 3);
    }
}

TEST(gather_scatter_batching_dims)
{
    /* out[b] = x[b, idx[b]]: operand_batching_dims (0) paired with indices dim 0 */
    oly_array *in[3] = {tu_array(OLY_FLOAT64, 2, D(2, 3), V(0, 1, 2, 3, 4, 5)),
                        tu_array(OLY_INT32, 2, D(2, 1), V(2, 0)), NULL};
    oly_params_gather p = {.collapsed_slice_dims = INTS(1), .start_index_map = INTS(1),
                           .operand_batching_dims = INTS(0),
                           .start_indices_batching_dims = INTS(0), .slice_sizes = INTS(1, 1)};
    oly_array *y = run1(&oly__prim_gather, &p, in, 2);
    if (y) CHECK(tu_allclose(y, V(2, 3), 2, 0, 0));
    oly_array_release(y);
    in[2] = tu_array(OLY_FLOAT64, 1, D(2), V(10, 20));
    oly_params_scatter s = {.inserted_window_dims = INTS(1),
                            .scatter_dims_to_operand_dims = INTS(1),
                            .operand_batching_dims = INTS(0),
                            .scatter_indices_batching_dims = INTS(0)};
    y = run1(&oly__prim_scatter_add, &s, in, 3);
    if (y) CHECK(tu_allclose(y, V(0, 1, 12, 23, 4, 5), 6, 0, 0));
    oly_array_release(y);
    release_all(in, 3);
}

static void check_refused(const oly_prim *row, const void *params, const oly_aval *in, int n_in,
                          oly_status want, const char *key)
{
    oly_aval out[2];
    oly_shape_ctx sc = {.prim = row, .params = params, .n_in = n_in, .in = in, .n_out = 1};
    oly_status s = row->shape(&sc, out);
    CHECK_EQ(s, want);
    if (s != OLY_OK && !strstr(oly_last_error(), key))
        CHECK_FAIL_("%s: message \"%s\" lacks \"%s\"", row->name, oly_last_error(), key);
}

TEST(gather_scatter_shape_errors)
{
    oly_aval x = tu_aval(OLY_FLOAT32, 2, D(3, 4)), ix = tu_aval(OLY_INT32, 2, D(5, 1));
    oly_aval fx = tu_aval(OLY_FLOAT32, 2, D(5, 1)), u = tu_aval(OLY_FLOAT32, 2, D(5, 4));
    oly_params_gather g = {.offset_dims = INTS(1), .collapsed_slice_dims = INTS(0),
                           .start_index_map = INTS(0), .slice_sizes = INTS(1, 4)};
    oly_aval in[3] = {x, ix, u};
    check_refused(&oly__prim_gather, &g, in, 2, OLY_OK, "");
    in[1] = fx;
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_TYPE, "integer array");
    in[1] = ix;
    g.slice_sizes = (oly_ints)INTS(1, 5);
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_SHAPE, "slice_sizes");
    g.slice_sizes = (oly_ints)INTS(2, 4);
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_SHAPE, "slice size 1");
    g.slice_sizes = (oly_ints)INTS(1, 4);
    g.start_index_map = (oly_ints)INTS(0, 1);
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_SHAPE, "index vector");
    g.start_index_map = (oly_ints)INTS(2);
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_INVALID, "start_index_map");
    g.start_index_map = (oly_ints)INTS(0);
    g.offset_dims = (oly_ints)INTS(0, 1);
    check_refused(&oly__prim_gather, &g, in, 2, OLY_ERR_SHAPE, "offset_dims");
    oly_params_scatter s = {.update_window_dims = INTS(1), .inserted_window_dims = INTS(0),
                            .scatter_dims_to_operand_dims = INTS(0)};
    check_refused(&oly__prim_scatter, &s, in, 3, OLY_OK, "");
    in[2] = tu_aval(OLY_FLOAT64, 2, D(5, 4));
    check_refused(&oly__prim_scatter_add, &s, in, 3, OLY_ERR_TYPE, "dtype");
    in[2] = tu_aval(OLY_FLOAT32, 2, D(4, 4));
    check_refused(&oly__prim_scatter_add, &s, in, 3, OLY_ERR_SHAPE, "batch dims");
    in[2] = tu_aval(OLY_FLOAT32, 2, D(5, 5));
    check_refused(&oly__prim_scatter, &s, in, 3, OLY_ERR_SHAPE, "larger");
    in[0] = tu_aval(OLY_COMPLEX64, 2, D(3, 4));
    in[2] = tu_aval(OLY_COMPLEX64, 2, D(5, 4));
    check_refused(&oly__prim_scatter_max, &s, in, 3, OLY_ERR_TYPE, "complex");
    check_refused(&oly__prim_scatter_mul, &s, in, 3, OLY_OK, "");
}

/* ---------------------------------------------------------------- rules */

static rc_case gs_case(const oly_prim *row, const void *params, int n_in, oly_aval x,
                       oly_aval ix, double ilo, double ihi)
{
    rc_case c;
    memset(&c, 0, sizeof c);
    c.prim = row->name;
    c.row = row;
    c.params = params;
    c.n_in = n_in;
    c.in[0] = x;
    c.in[1] = ix;
    c.lo[1] = ilo;
    c.hi[1] = ihi;
    c.nodiff[1] = true;
    return c;
}

TEST(gather_rules)
{
    /* rows with repeats and out-of-bounds indices (clip), a window gather, a
     * fill gather with its fill value, and batching dims */
    oly_params_gather rows = {.offset_dims = INTS(1), .collapsed_slice_dims = INTS(0),
                              .start_index_map = INTS(0), .slice_sizes = INTS(1, 3)};
    rc_case c = gs_case(&oly__prim_gather, &rows, 2, RC_F64(4, 3), RC_AVAL(OLY_INT32, 5, 1), -1, 5);
    c.linear[0] = true;
    rc_check_all(&c);
    oly_params_gather win = {.offset_dims = INTS(1, 2), .start_index_map = INTS(0, 1),
                             .slice_sizes = INTS(2, 2), .fill_value = 0.5,
                             .mode = OLY_GATHER_FILL_OR_DROP};
    c = gs_case(&oly__prim_gather, &win, 2, RC_F64(4, 3), RC_AVAL(OLY_INT64, 3, 2), -1, 3);
    rc_check_all(&c); /* affine (the fill value): no direct transpose check */
    oly_params_gather bat = {.collapsed_slice_dims = INTS(1), .start_index_map = INTS(1),
                             .operand_batching_dims = INTS(0),
                             .start_indices_batching_dims = INTS(1),
                             .slice_sizes = INTS(1, 1, 2), .offset_dims = INTS(2)};
    c = gs_case(&oly__prim_gather, &bat, 2, RC_F64(2, 4, 2), RC_AVAL(OLY_INT32, 3, 2, 1), 0, 3);
    c.linear[0] = true;
    rc_check_all(&c);
}

TEST(scatter_rules)
{
    oly_params_scatter s = {.update_window_dims = INTS(1), .inserted_window_dims = INTS(0),
                            .scatter_dims_to_operand_dims = INTS(0),
                            .mode = OLY_GATHER_FILL_OR_DROP};
    /* repeated and dropped indices */
    rc_case c = gs_case(&oly__prim_scatter_add, &s, 3, RC_F64(4, 3), RC_AVAL(OLY_INT32, 5, 1),
                        -1, 4);
    c.in[2] = RC_F64(5, 3);
    c.linear[0] = c.linear[2] = true;
    rc_check_all(&c);
    /* set with repeats: the winner's tangent (masks and scatter_add) */
    c.row = &oly__prim_scatter;
    c.prim = "scatter";
    c.linear[0] = c.linear[2] = false;
    rc_check_all(&c);
    /* unique indices: scatter's own transpose, one index vector */
    oly_params_scatter su = s;
    su.unique_indices = true;
    c = gs_case(&oly__prim_scatter, &su, 3, RC_F64(4, 3), RC_AVAL(OLY_INT32, 1, 1), 0, 3);
    c.in[2] = RC_F64(1, 3);
    c.linear[0] = c.linear[2] = true;
    rc_check_all(&c);
    /* mul: linear in the operand; the updates' tangent with unique indices */
    c.row = &oly__prim_scatter_mul;
    c.prim = "scatter_mul";
    c.linear[2] = false;
    rc_check_all(&c);
    /* min / max: random values have no ties; jvp and vmap */
    const oly_prim *ext[2] = {&oly__prim_scatter_min, &oly__prim_scatter_max};
    for (int k = 0; k < 2; k++) {
        c = gs_case(ext[k], &s, 3, RC_F64(4, 3), RC_AVAL(OLY_INT32, 5, 1), -1, 4);
        c.in[2] = RC_F64(5, 3);
        rc_check_all(&c);
    }
}

/* Updates with repeated indices: scatter_mul's updates tangent needs
 * unique_indices, and scatter's transpose does. */
TEST(scatter_rule_refusals)
{
    oly_params_scatter s = put1(OLY_GATHER_CLIP);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval x = RC_F64(4), ix = RC_AVAL(OLY_INT32, 2, 1), u = RC_F64(2);
    oly_var *v[3];
    CHECK_OK(oly_builder_add_input(b, &x, &v[0]));
    CHECK_OK(oly_builder_add_input(b, &ix, &v[1]));
    CHECK_OK(oly_builder_add_input(b, &u, &v[2]));
    oly_atom in[3] = {oly_atom_var(v[0]), oly_atom_var(v[1]), oly_atom_var(v[2])};
    oly_var *out;
    int n_out = 0;
    CHECK_OK(oly_builder_append(b, &oly__prim_scatter_mul, in, 3, &s, NULL, 0, &out, 1, &n_out));
    oly_atom o = oly_atom_var(out);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &o, 1, &p));
    oly_builder_free(b);
    bool nz[3] = {false, false, true};
    oly_program *j = NULL;
    bool nz_out[1];
    oly_status st = oly_program_jvp(p, nz, &j, nz_out);
    CHECK_EQ(st, OLY_ERR_UNSUPPORTED);
    CHECK(strstr(oly_last_error(), "unique_indices") != NULL);
    oly_program_release(j);
    oly_program_release(p);
}

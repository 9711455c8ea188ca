/* test_pmap.c — group runs (oly_program_run_group, src/rt/group.c) and the
 * collectives' kernels that rendezvous in them (src/cpu/collective.c):
 *   - every collective on 4 members (psum / pmax / pmin in several dtypes,
 *     all_gather tiled and not, reduce_scatter, ppermute, all_to_all,
 *     axis_index) against values computed here;
 *   - a 2x2 mesh: a collective over one axis groups the members that share
 *     the other coordinate;
 *   - a member failing in a host function poisons the group: the call
 *     reports that failure, the peers waiting in psum stop (no hang), and a
 *     barrier after a failure says which device failed;
 *   - two threads launching groups at once, and a group launched from a
 *     host function inside a run (nested), finish with the right values.
 * Members may share a device (members are threads), so the tests run with
 * any device count; the Makefile runs them again with 4 devices and under
 * TSan. */
#include "test.h"
#include "testutil.h"

#include <pthread.h>
#include <time.h>

enum { M = 4 }; /* members */

static int dev(int k) { return k % oly_device_count(); }

/* out = prim(x) over one input of aval a; NULL on failure (reported). */
static oly_program *one(const oly_prim *p, const void *params, oly_aval a)
{
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    oly_var *x = NULL, *o[4];
    int n_out = 0;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom in = oly_atom_var(x);
    oly_status s = oly_builder_append(b, p, &in, p->n_in == 0 ? 0 : 1, params, NULL, 0, o, 4,
                                      &n_out);
    CHECK_OK(s);
    if (s == OLY_OK) {
        oly_atom out = oly_atom_var(o[0]);
        CHECK_OK(oly_builder_finish(b, &out, 1, &prog));
    }
    oly_builder_free(b);
    return prog;
}

/* Runs p over a mesh (names, sizes) with member k's input X_k[e] = 10 k + e
 * + 1 (dtype t, dims); outs[k] receives member k's output. */
static oly_status run_mesh(oly_program *p, int n_axes, const char *const *names, const int *sizes,
                           oly_dtype t, int rank, const int64_t *dims, oly_array **outs)
{
    int n = 1, devices[16];
    for (int a = 0; a < n_axes; a++) n *= sizes[a];
    int64_t count = 1;
    for (int i = 0; i < rank; i++) count *= dims[i];
    oly_array *in[16] = {0};
    for (int k = 0; k < n; k++) {
        double v[64];
        for (int64_t e = 0; e < count; e++) v[e] = 10 * k + (double)e + 1;
        in[k] = tu_array(t, rank, dims, v);
        devices[k] = dev(k);
    }
    oly_mesh mesh = {.n_axes = n_axes, .names = names, .sizes = sizes, .devices = devices};
    oly_status st = oly_program_run_group(p, &mesh, in, p ? 1 : 0, outs, 1);
    for (int k = 0; k < n; k++) oly_array_release(in[k]);
    return st;
}

static oly_status run4(oly_program *p, oly_dtype t, int rank, const int64_t *dims, oly_array **outs)
{
    static const char *const names[] = {"i"};
    return run_mesh(p, 1, names, (int[]){M}, t, rank, dims, outs);
}

static void release_all(oly_array **a, int n)
{
    for (int k = 0; k < n; k++) oly_array_release(a[k]);
}

TEST(pmap_group_psum_pmax_pmin_every_dtype)
{
    const oly_dtype types[] = {OLY_FLOAT32, OLY_FLOAT64, OLY_INT32, OLY_INT64, OLY_UINT8,
                               OLY_INT8, OLY_FLOAT16, OLY_BFLOAT16, OLY_COMPLEX64};
    int64_t dims[] = {7};
    for (int ti = 0; ti < OLY_ARRAY_LEN(types); ti++) {
        oly_dtype t = types[ti];
        for (int op = 0; op < 3; op++) {
            if (op && oly_dtype_is_complex(t)) continue;
            const oly_prim *p = op == 0 ? &oly__prim_psum : op == 1 ? &oly__prim_pmax
                                                                     : &oly__prim_pmin;
            oly_program *prog = one(p, &(oly_params_psum){.axes = "('i',)"}, tu_aval(t, 1, dims));
            oly_array *y[M] = {0};
            CHECK_OK(run4(prog, t, 1, dims, y));
            for (int k = 0; k < M; k++) {
                double want[7];
                for (int e = 0; e < 7; e++)
                    want[e] = op == 0 ? 4 * (e + 1) + 10 * (0 + 1 + 2 + 3)
                                      : op == 1 ? 30 + e + 1 : e + 1;
                if (y[k]) CHECK(tu_allclose(y[k], want, 7, 1e-2, 0));
                if (y[k]) CHECK_EQ(oly_array_device(y[k]), dev(k));
            }
            release_all(y, M);
            oly_program_release(prog);
        }
    }
}

TEST(pmap_group_bool_pmax_is_any)
{
    int64_t dims[] = {2};
    oly_program *prog = one(&oly__prim_pmax, &(oly_params_psum){.axes = "('i',)"},
                            tu_aval(OLY_BOOL, 1, dims));
    oly_array *in[M], *y[M] = {0};
    int devices[M];
    for (int k = 0; k < M; k++) {
        in[k] = tu_array(OLY_BOOL, 1, dims, (double[]){k == 2, 0});
        devices[k] = dev(k);
    }
    oly_mesh mesh = {1, (const char *const[]){"i"}, (int[]){M}, devices};
    CHECK_OK(oly_program_run_group(prog, &mesh, in, 1, y, 1));
    for (int k = 0; k < M; k++)
        if (y[k]) CHECK(tu_allclose(y[k], (double[]){1, 0}, 2, 0, 0));
    release_all(in, M);
    release_all(y, M);
    oly_program_release(prog);
}

TEST(pmap_group_all_gather_tiled_and_not)
{
    int64_t dims[] = {2, 3};
    for (int tiled = 0; tiled < 2; tiled++)
        for (int d = 0; d <= (tiled ? 1 : 2); d++) {
            oly_params_all_gather pa = {.all_gather_dimension = d, .axis_name = "('i',)",
                                        .axis_size = M, .tiled = tiled};
            oly_program *prog = one(&oly__prim_all_gather, &pa, tu_aval(OLY_FLOAT32, 2, dims));
            oly_array *y[M] = {0};
            CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
            /* reference: stack (or concatenate) X_j along d */
            const oly_aval *o = y[1] ? oly_array_aval(y[1]) : NULL;
            int64_t n = o ? oly_aval_size(o) : 0, str[3];
            if (o) oly__strides(o, str);
            double want[96];
            for (int64_t f = 0; f < n; f++) {
                int64_t idx[3], r = f;
                for (int i = 0; i < o->rank; i++) {
                    idx[i] = r / str[i];
                    r %= str[i];
                }
                int64_t j, e0, e1;
                if (tiled) {
                    j = idx[d] / dims[d];
                    idx[d] %= dims[d];
                    e0 = idx[0];
                    e1 = idx[1];
                } else {
                    j = idx[d];
                    int64_t rest[2], q = 0;
                    for (int i = 0; i < 3; i++)
                        if (i != d) rest[q++] = idx[i];
                    e0 = rest[0];
                    e1 = rest[1];
                }
                want[f] = 10 * j + e0 * 3 + e1 + 1;
            }
            for (int k = 0; k < M; k++)
                if (y[k]) CHECK(tu_allclose(y[k], want, n, 0, 0));
            release_all(y, M);
            oly_program_release(prog);
        }
}

TEST(pmap_group_reduce_scatter_ppermute_all_to_all_axis_index)
{
    int64_t dims[] = {4, 2};
    /* reduce_scatter, tiled on dim 0: member k gets row k of the sum */
    oly_params_reduce_scatter pr = {.axis_name = "('i',)", .axis_size = M, .scatter_dimension = 0,
                                    .tiled = true};
    oly_program *prog = one(&oly__prim_reduce_scatter, &pr, tu_aval(OLY_FLOAT64, 2, dims));
    oly_array *y[M] = {0};
    CHECK_OK(run4(prog, OLY_FLOAT64, 2, dims, y));
    for (int k = 0; k < M; k++) {
        double want[2] = {60 + 4 * (2 * k + 1), 60 + 4 * (2 * k + 2)};
        if (y[k]) CHECK(tu_allclose(y[k], want, 2, 0, 0));
    }
    release_all(y, M);
    oly_program_release(prog);

    /* ppermute: a shift by one, member 0 receives nothing (zeros) */
    oly_params_ppermute pp = {.axis_name = "('i',)", .perm = "((0, 1), (1, 2), (2, 3))"};
    prog = one(&oly__prim_ppermute, &pp, tu_aval(OLY_INT32, 2, dims));
    CHECK_OK(run4(prog, OLY_INT32, 2, dims, y));
    for (int k = 0; k < M; k++) {
        double want[8];
        for (int e = 0; e < 8; e++) want[e] = k == 0 ? 0 : 10 * (k - 1) + e + 1;
        if (y[k]) CHECK(tu_allclose(y[k], want, 8, 0, 0));
    }
    release_all(y, M);
    oly_program_release(prog);

    /* all_to_all split 0 concat 1: member k gets row k of every X_j, side by side */
    oly_params_all_to_all pt = {.axis_name = "('i',)", .axis_size = M, .split_axis = 0,
                                .concat_axis = 1};
    prog = one(&oly__prim_all_to_all, &pt, tu_aval(OLY_FLOAT32, 2, dims));
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    for (int k = 0; k < M; k++) {
        double want[8];
        for (int j = 0; j < M; j++)
            for (int c = 0; c < 2; c++) want[j * 2 + c] = 10 * j + k * 2 + c + 1;
        if (y[k]) CHECK(tu_allclose(y[k], want, 8, 0, 0));
    }
    release_all(y, M);
    oly_program_release(prog);

    /* all_to_all split 0 concat 0: member k gets block k of every X_j, stacked */
    pt.concat_axis = 0;
    prog = one(&oly__prim_all_to_all, &pt, tu_aval(OLY_FLOAT32, 2, dims));
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    for (int k = 0; k < M; k++) {
        double want[8];
        for (int j = 0; j < M; j++)
            for (int c = 0; c < 2; c++) want[j * 2 + c] = 10 * j + k * 2 + c + 1;
        if (y[k]) CHECK(tu_allclose(y[k], want, 8, 0, 0));
    }
    release_all(y, M);
    oly_program_release(prog);

    prog = one(&oly__prim_axis_index, &(oly_params_axis_index){.axis_name = "('i',)"},
               tu_aval(OLY_FLOAT32, 2, dims));
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    for (int k = 0; k < M; k++)
        if (y[k]) CHECK_EQ(tu_get(y[k], 0), k);
    release_all(y, M);
    oly_program_release(prog);
}

TEST(pmap_group_mesh_subsets)
{
    static const char *const names[] = {"i", "j"};
    const int sizes[] = {2, 2}; /* member k = 2 i + j */
    int64_t dims[] = {3};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, dims);
    struct { const char *axes; double want[4]; } cases[] = {
        {"('j',)", {0 + 10, 0 + 10, 20 + 30, 20 + 30}},  /* members sharing i */
        {"('i',)", {0 + 20, 10 + 30, 0 + 20, 10 + 30}},  /* members sharing j */
        {"('i', 'j')", {60, 60, 60, 60}},
    };
    for (int c = 0; c < OLY_ARRAY_LEN(cases); c++) {
        oly_program *prog = one(&oly__prim_psum, &(oly_params_psum){.axes = cases[c].axes}, a);
        oly_array *y[4] = {0};
        CHECK_OK(run_mesh(prog, 2, names, sizes, OLY_FLOAT32, 1, dims, y));
        int m = c == 2 ? 4 : 2;
        for (int k = 0; k < 4; k++) {
            double want[3];
            for (int e = 0; e < 3; e++) want[e] = cases[c].want[k] + m * (e + 1);
            if (y[k]) CHECK(tu_allclose(y[k], want, 3, 0, 0));
        }
        release_all(y, 4);
        oly_program_release(prog);
    }
    /* axis_index over each axis is that coordinate; all_gather over j gathers the row */
    for (int ax = 0; ax < 2; ax++) {
        oly_program *prog = one(&oly__prim_axis_index,
                                &(oly_params_axis_index){.axis_name = ax ? "('j',)" : "('i',)"}, a);
        oly_array *y[4] = {0};
        CHECK_OK(run_mesh(prog, 2, names, sizes, OLY_FLOAT32, 1, dims, y));
        for (int k = 0; k < 4; k++)
            if (y[k]) CHECK_EQ(tu_get(y[k], 0), ax ? k % 2 : k / 2);
        release_all(y, 4);
        oly_program_release(prog);
    }
    oly_params_all_gather pa = {.all_gather_dimension = 0, .axis_name = "('j',)", .axis_size = 2};
    oly_program *prog = one(&oly__prim_all_gather, &pa, a);
    oly_array *y[4] = {0};
    CHECK_OK(run_mesh(prog, 2, names, sizes, OLY_FLOAT32, 1, dims, y));
    for (int k = 0; k < 4; k++) {
        int i = k / 2;
        double want[6];
        for (int j = 0; j < 2; j++)
            for (int e = 0; e < 3; e++) want[j * 3 + e] = 10 * (2 * i + j) + e + 1;
        if (y[k]) CHECK(tu_allclose(y[k], want, 6, 0, 0));
    }
    release_all(y, 4);
    oly_program_release(prog);
}

TEST(pmap_group_unbound_names_and_bad_meshes)
{
    int64_t dims[] = {2};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, dims);
    oly_program *prog = one(&oly__prim_psum, &(oly_params_psum){.axes = "('k',)"}, a);
    oly_array *y[M] = {0};
    CHECK_ERR(run4(prog, OLY_FLOAT32, 1, dims, y), OLY_ERR_INVALID, "unbound axis name ('k',)");
    oly_array *x = tu_array(OLY_FLOAT32, 1, dims, NULL), *out = NULL;
    CHECK_ERR(oly_program_run(prog, 0, &x, 1, &out, 1), OLY_ERR_INVALID,
              "psum: unbound axis name ('k',)");
    oly_array *xs[2] = {x, x};
    oly_mesh bad = {1, (const char *const[]){"i"}, (int[]){2}, (int[]){0, 99}};
    CHECK_ERR(oly_program_run_group(prog, &bad, xs, 1, y, 1), OLY_ERR_INVALID,
              "member 1's device 99 is out of range");
    oly_mesh dup = {2, (const char *const[]){"i", "i"}, (int[]){1, 2}, (int[]){0, 0}};
    CHECK_ERR(oly_program_run_group(prog, &dup, xs, 1, y, 1), OLY_ERR_INVALID,
              "mesh axis name 'i' appears twice");
    oly_mesh zero = {1, (const char *const[]){"i"}, (int[]){0}, (int[]){0}};
    CHECK_ERR(oly_program_run_group(prog, &zero, xs, 1, y, 1), OLY_ERR_INVALID,
              "has size 0, expected >= 1");
    oly_mesh ok = {1, (const char *const[]){"k"}, (int[]){2}, (int[]){0, 0}};
    CHECK_ERR(oly_program_run_group(prog, &ok, xs, 2, y, 1), OLY_ERR_INVALID,
              "program takes 1 inputs, got 2");
    oly_array_release(x);
    oly_program_release(prog);
}

/* ---------------------------------------------------------------- failures */

typedef struct fail_state {
    double fail_on;             /* the member input that fails */
    atomic_int calls;
} fail_state;

static oly_status failing_host(void *user, oly_callback_frame *f)
{
    fail_state *s = user;
    atomic_fetch_add(&s->calls, 1);
    double v = *(const float *)f->args[0];
    if (v == s->fail_on) return oly_host_fail(OLY_ERR_CALLBACK, "member saw %g", v);
    memcpy(f->results[0], f->args[0], sizeof(float));
    return OLY_OK;
}

/* x: f32[1] -> psum(io_callback(x)) over 'i'. */
static oly_program *callback_then_psum(oly_host_fn *fn)
{
    int64_t one1 = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one1);
    oly_builder *b = NULL;
    oly_var *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &pc, NULL, 0, &y, 1, NULL));
    in = oly_atom_var(y);
    CHECK_OK(oly_builder_append(b, &oly__prim_psum, &in, 1, &(oly_params_psum){.axes = "('i',)"},
                                NULL, 0, &z, 1, NULL));
    oly_atom out = oly_atom_var(z);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    return p;
}

TEST(pmap_group_failing_member_poisons_the_group)
{
    fail_state s = {.fail_on = 21}; /* member 2's input */
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("member_host", failing_host, &s, NULL, &fn));
    oly_program *prog = callback_then_psum(fn);
    int64_t one1 = 1;
    oly_array *y[M] = {0};
    for (int rep = 0; rep < 3; rep++) {
        CHECK_ERR(run4(prog, OLY_FLOAT32, 1, &one1, y), OLY_ERR_CALLBACK, "member saw 21");
        for (int k = 0; k < M; k++) CHECK(y[k] == NULL);
    }
    CHECK_EQ(atomic_load(&s.calls), 3 * M);
    s.fail_on = -1; /* the next call works */
    CHECK_OK(run4(prog, OLY_FLOAT32, 1, &one1, y));
    for (int k = 0; k < M; k++)
        if (y[k]) CHECK_EQ(tu_get(y[k], 0), 64);
    release_all(y, M);
    oly_program_release(prog);
    oly_host_fn_release(fn);
}

TEST(pmap_group_barrier_after_a_failure_names_the_device)
{
    oly_group *g = NULL;
    oly_mesh mesh = {1, (const char *const[]){"i"}, (int[]){2}, (int[]){0, 0}};
    CHECK_OK(oly__group_new(&mesh, &g));
    if (!g) return;
    oly__error(OLY_ERR_CALLBACK, "boom");
    oly__group_fail(g, 1, OLY_ERR_CALLBACK);
    CHECK_ERR(oly__group_sync(g, 0, NULL, "psum over 'i'"), OLY_ERR_INVALID,
              "psum over 'i' aborted: device 0 failed: boom");
    CHECK_ERR(oly__group_report(g), OLY_ERR_CALLBACK, "boom");
    oly__group_free(g);
    /* a member leaving without reaching the barrier stops the others too */
    CHECK_OK(oly__group_new(&mesh, &g));
    if (!g) return;
    oly__group_leave(g, 1);
    CHECK_ERR(oly__group_sync(g, 0, NULL, "all_gather over 'i'"), OLY_ERR_INVALID,
              "finished its program without reaching this collective");
    oly__group_free(g);
}

/* ---------------------------------------------------------------- concurrency */

typedef struct launcher {
    oly_program *prog;
    int reps, good;
} launcher;

static void *launch_many(void *arg)
{
    launcher *l = arg;
    int64_t dims[] = {5};
    for (int r = 0; r < l->reps; r++) {
        oly_array *y[M] = {0};
        if (run4(l->prog, OLY_FLOAT32, 1, dims, y) == OLY_OK && y[3] && tu_get(y[3], 4) == 80)
            l->good++;
        release_all(y, M);
    }
    return NULL;
}

TEST(pmap_group_two_threads_launch_at_once)
{
    int64_t dims[] = {5};
    oly_program *prog = one(&oly__prim_psum, &(oly_params_psum){.axes = "('i',)"},
                            tu_aval(OLY_FLOAT32, 1, dims));
    launcher l[2] = {{prog, 25, 0}, {prog, 25, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, launch_many, &l[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK_EQ(l[0].good, 25);
    CHECK_EQ(l[1].good, 25);
    oly_program_release(prog);
}

typedef struct nested_state {
    oly_program *inner;
    bool ok;
} nested_state;

/* A host function (on a run's thread, device 0 busy with that run) that
 * launches a group over every device, device 0 included. */
static oly_status nested_host(void *user, oly_callback_frame *f)
{
    nested_state *s = user;
    int64_t dims[] = {5};
    oly_array *y[M] = {0};
    s->ok = run4(s->inner, OLY_FLOAT32, 1, dims, y) == OLY_OK && y[0] && tu_get(y[0], 0) == 64;
    release_all(y, M);
    memcpy(f->results[0], f->args[0], sizeof(float));
    return OLY_OK;
}

TEST(pmap_group_launched_from_a_host_function)
{
    int64_t dims[] = {5};
    nested_state s = {0};
    s.inner = one(&oly__prim_psum, &(oly_params_psum){.axes = "('i',)"},
                  tu_aval(OLY_FLOAT32, 1, dims));
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("nested_host", nested_host, &s, NULL, &fn));
    int64_t one1 = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one1);
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    oly_program *outer = one(&oly__prim_io_callback, &pc, a);
    oly_array *x = tu_array(OLY_FLOAT32, 1, &one1, (double[]){3}), *y = NULL;
    CHECK_OK(oly_program_run(outer, 0, &x, 1, &y, 1));
    CHECK(s.ok);
    oly_array_release(x);
    oly_array_release(y);
    oly_program_release(outer);
    oly_program_release(s.inner);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- the pmap row */

/* x: f32[M, 3] -> pmap over 'i' of (psum(x * x) over 'i'), on devices k % count. */
static oly_program *pmap_program(void)
{
    int64_t d3[] = {3}, d43[] = {M, 3};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, d3), sa = tu_aval(OLY_FLOAT32, 2, d43);
    oly_builder *b = NULL;
    oly_var *x = NULL, *sq = NULL, *s = NULL, *y = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom xx[2] = {oly_atom_var(x), oly_atom_var(x)};
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, xx, 2, NULL, NULL, 0, &sq, 1, NULL));
    oly_atom in = oly_atom_var(sq);
    CHECK_OK(oly_builder_append(b, &oly__prim_psum, &in, 1, &(oly_params_psum){.axes = "('i',)"},
                                NULL, 0, &s, 1, NULL));
    oly_atom out = oly_atom_var(s);
    oly_program *body = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &body));
    oly_builder_free(b);

    char devs[64];
    snprintf(devs, sizeof devs, "(%d, %d, %d, %d)", dev(0), dev(1), dev(2), dev(3));
    oly_params_pmap pp = {.axis_name = "('i',)", .sizes = {.n = 1, .v = {M}}, .devices = devs,
                          .n_out = 1};
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &sa, &x));
    in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_pmap, &in, 1, &pp, &body, 1, &y, 1, NULL));
    out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    oly_program_release(body);
    if (p) CHECK_OK(oly_program_verify(p));
    return p;
}

/* X[k, e] = k + e / 4 */
static oly_array *stacked(void)
{
    double v[M * 3];
    for (int k = 0; k < M; k++)
        for (int e = 0; e < 3; e++) v[k * 3 + e] = k + e / 4.0;
    return tu_array(OLY_FLOAT32, 2, (int64_t[]){M, 3}, v);
}

static double sumsq(int e)
{
    double s = 0;
    for (int k = 0; k < M; k++) s += (k + e / 4.0) * (k + e / 4.0);
    return s;
}

TEST(pmap_row_runs_its_body_on_every_member)
{
    oly_program *p = pmap_program();
    oly_array *x = stacked(), *y = NULL;
    if (p) CHECK_OK(oly_program_run(p, 0, &x, 1, &y, 1));
    double want[M * 3];
    for (int k = 0; k < M; k++)
        for (int e = 0; e < 3; e++) want[k * 3 + e] = sumsq(e);
    if (y) CHECK(tu_allclose(y, want, M * 3, 1e-6, 0));
    oly_array_release(y);
    /* shape rule: the member axis must match */
    oly_program *body = p ? p->eqn[0].sub[0] : NULL;
    oly_params_pmap bad = *(const oly_params_pmap *)(p ? p->eqn[0].params : &bad);
    bad.sizes.v[0] = 3;
    oly_builder *b = NULL;
    oly_var *v = NULL, *o = NULL;
    oly_aval sa = tu_aval(OLY_FLOAT32, 2, (int64_t[]){M, 3});
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &sa, &v));
    oly_atom in = oly_atom_var(v);
    if (body)
        CHECK_ERR(oly_builder_append(b, &oly__prim_pmap, &in, 1, &bad, &body, 1, &o, 1, NULL),
                  OLY_ERR_INVALID, "devices must be the tuple text of 3 device ids");
    oly_builder_free(b);
    oly_array_release(x);
    oly_program_release(p);
}

TEST(pmap_row_vmap_jvp_and_transpose)
{
    oly_program *p = pmap_program();
    if (!p) return;
    /* vmap outside the pmap (batch of 2 at axis 0): each batch element as alone */
    oly_program *v = NULL;
    CHECK_OK(oly_program_vmap(p, (int[]){0}, 2, (int[]){0}, &v));
    if (v) {
        CHECK_OK(oly_program_verify(v));
        double xs[2 * M * 3];
        for (int i = 0; i < 2 * M * 3; i++) xs[i] = (i % (M * 3)) / 3 / 1.0 + (i % 3) / 4.0 + (i >= M * 3);
        oly_array *x = tu_array(OLY_FLOAT32, 3, (int64_t[]){2, M, 3}, xs), *y = NULL;
        CHECK_OK(oly_program_run(v, 0, &x, 1, &y, 1));
        for (int bi = 0; bi < 2 && y; bi++)
            for (int e = 0; e < 3; e++) {
                double s = 0;
                for (int k = 0; k < M; k++) s += (k + e / 4.0 + bi) * (k + e / 4.0 + bi);
                CHECK_NEAR(tu_get(y, bi * M * 3 + 1 * 3 + e), s, 1e-3);
            }
        oly_array_release(x);
        oly_array_release(y);
        oly_program_release(v);
    }
    /* jvp: d psum(x^2) = psum(2 x t), as one pmap of the body's JVP */
    oly_program *j = NULL;
    bool nz_out = false;
    CHECK_OK(oly_program_jvp(p, (bool[]){true}, &j, &nz_out));
    if (j) {
        CHECK_OK(oly_program_verify(j));
        CHECK_STREQ(j->eqn[j->n_eqn - 1].prim->name, "pmap");
        oly_array *in[2] = {stacked(), tu_array(OLY_FLOAT32, 2, (int64_t[]){M, 3}, NULL)};
        double ones[M * 3];
        for (int i = 0; i < M * 3; i++) ones[i] = 1;
        oly_array_release(in[1]);
        in[1] = tu_array(OLY_FLOAT32, 2, (int64_t[]){M, 3}, ones);
        oly_array *out[2] = {0};
        CHECK_OK(oly_program_run(j, 0, in, 2, out, 2));
        for (int e = 0; e < 3 && out[1]; e++) {
            double s = 0;
            for (int k = 0; k < M; k++) s += 2 * (k + e / 4.0);
            CHECK_NEAR(tu_get(out[1], 2 * 3 + e), s, 1e-4);
        }
        release_all(in, 2);
        release_all(out, 2);
        oly_program_release(j);
    }
    /* linearize + transpose: the VJP of sum-of-squares over members with
     * cotangent 1 everywhere is 2 x M (psum's transpose is psum) */
    oly_program *prim = NULL, *lin = NULL, *t = NULL;
    int n_res = 0;
    bool nzo = false;
    CHECK_OK(oly_program_linearize(p, (bool[]){true}, &prim, &lin, &n_res, &nzo));
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    if (prim && t) {
        oly_array *x = stacked(), *pout[8] = {0};
        CHECK_OK(oly_program_run(prim, 0, &x, 1, pout, 1 + n_res));
        double ones[M * 3];
        for (int i = 0; i < M * 3; i++) ones[i] = 1;
        oly_array *targs[8] = {0}, *ct = NULL;
        for (int r = 0; r < n_res; r++) targs[r] = pout[1 + r];
        targs[n_res] = tu_array(OLY_FLOAT32, 2, (int64_t[]){M, 3}, ones);
        CHECK_OK(oly_program_run(t, 0, targs, n_res + 1, &ct, 1));
        for (int k = 0; k < M && ct; k++)
            for (int e = 0; e < 3; e++) CHECK_NEAR(tu_get(ct, k * 3 + e), 2 * M * (k + e / 4.0), 1e-4);
        oly_array_release(targs[n_res]);
        oly_array_release(ct);
        oly_array_release(x);
        release_all(pout, 1 + n_res);
    }
    oly_program_release(prim);
    oly_program_release(lin);
    oly_program_release(t);
    oly_program_release(p);
}

/* Equations named name in p and its nested programs. */
static int count_prim(const oly_program *p, const char *name)
{
    int n = 0;
    for (int k = 0; k < p->n_eqn; k++) {
        n += strcmp(p->eqn[k].prim->name, name) == 0;
        for (int j = 0; j < p->eqn[k].n_sub; j++) n += count_prim(p->eqn[k].sub[j], name);
    }
    return n;
}

/* (x, c): f32[M, 1] -> pmap over 'i' of psum(x * x * io_callback(c)). */
static oly_program *pmap_with_effect(oly_host_fn *fn)
{
    int64_t one1 = 1, d41[] = {M, 1};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one1), sa = tu_aval(OLY_FLOAT32, 2, d41);
    oly_builder *b = NULL;
    oly_var *x = NULL, *c = NULL, *y = NULL, *sq = NULL, *w = NULL, *s = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly_builder_add_input(b, &a, &c));
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    oly_atom in = oly_atom_var(c);
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &pc, NULL, 0, &y, 1, NULL));
    oly_atom xx[2] = {oly_atom_var(x), oly_atom_var(x)};
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, xx, 2, NULL, NULL, 0, &sq, 1, NULL));
    oly_atom sy[2] = {oly_atom_var(sq), oly_atom_var(y)};
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, sy, 2, NULL, NULL, 0, &w, 1, NULL));
    in = oly_atom_var(w);
    CHECK_OK(oly_builder_append(b, &oly__prim_psum, &in, 1, &(oly_params_psum){.axes = "('i',)"},
                                NULL, 0, &s, 1, NULL));
    oly_atom out = oly_atom_var(s);
    oly_program *body = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &body));
    oly_builder_free(b);
    char devs[64];
    snprintf(devs, sizeof devs, "(%d, %d, %d, %d)", dev(0), dev(1), dev(2), dev(3));
    oly_params_pmap pp = {.axis_name = "('i',)", .sizes = {.n = 1, .v = {M}}, .devices = devs,
                          .n_out = 1};
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &sa, &x));
    CHECK_OK(oly_builder_add_input(b, &sa, &c));
    oly_atom ins[2] = {oly_atom_var(x), oly_atom_var(c)};
    CHECK_OK(oly_builder_append(b, &oly__prim_pmap, ins, 2, &pp, &body, 1, &y, 1, NULL));
    out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    oly_program_release(body);
    if (p) CHECK_OK(oly_program_verify(p));
    return p;
}

TEST(pmap_row_partial_eval_computes_the_primal_once)
{
    /* psum(x^2): the known pmap computes x^2 and its psum, the linear one
     * only the tangent's psum (and takes x itself as its residual) */
    oly_program *p = pmap_program();
    oly_program *prim = NULL, *lin = NULL;
    int n_res = 0;
    bool nzo = false;
    if (p) CHECK_OK(oly_program_linearize(p, (bool[]){true}, &prim, &lin, &n_res, &nzo));
    if (prim && lin) {
        CHECK_OK(oly_program_verify(prim));
        CHECK_OK(oly_program_verify(lin));
        CHECK_EQ(count_prim(prim, "pmap"), 1);
        CHECK_EQ(count_prim(lin, "pmap"), 1);
        CHECK_EQ(count_prim(prim, "psum") + count_prim(lin, "psum"), 2); /* primal once */
        CHECK_EQ(count_prim(lin, "psum"), 1);
        CHECK(nzo);
    }
    oly_program_release(prim);
    oly_program_release(lin);
    oly_program_release(p);
}

TEST(pmap_row_grad_of_a_body_with_effects_runs_them_once)
{
    fail_state st = {.fail_on = -1};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("member_host", failing_host, &st, NULL, &fn));
    oly_program *p = pmap_with_effect(fn);
    oly_program *prim = NULL, *lin = NULL, *t = NULL;
    int n_res = 0;
    bool nzo = false;
    if (p) CHECK_OK(oly_program_linearize(p, (bool[]){true, false}, &prim, &lin, &n_res, &nzo));
    if (lin) CHECK_OK(oly_program_transpose(lin, n_res, &t));
    if (prim && lin && t) {
        CHECK_EQ(count_prim(prim, "io_callback"), 1);
        CHECK_EQ(count_prim(lin, "io_callback") + count_prim(t, "io_callback"), 0);
        double xv[M], cv[M], ones[M];
        for (int k = 0; k < M; k++) xv[k] = k + 1, cv[k] = 0.5 * k + 1, ones[k] = 1;
        int64_t d41[] = {M, 1};
        oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, d41, xv), tu_array(OLY_FLOAT32, 2, d41, cv)};
        oly_array *pout[8] = {0};
        CHECK_OK(oly_program_run(prim, 0, in, 2, pout, 1 + n_res));
        CHECK_EQ(atomic_load(&st.calls), M); /* once per member */
        double want = 0;
        for (int k = 0; k < M; k++) want += xv[k] * xv[k] * cv[k];
        if (pout[0]) CHECK_NEAR(tu_get(pout[0], 2), want, 1e-4);
        oly_array *targs[8] = {0}, *ct = NULL;
        for (int r = 0; r < n_res; r++) targs[r] = pout[1 + r];
        targs[n_res] = tu_array(OLY_FLOAT32, 2, d41, ones);
        CHECK_OK(oly_program_run(t, 0, targs, n_res + 1, &ct, 1));
        CHECK_EQ(atomic_load(&st.calls), M); /* the backward pass calls nothing */
        for (int k = 0; k < M && ct; k++) CHECK_NEAR(tu_get(ct, k), 2.0 * M * xv[k] * cv[k], 1e-4);
        oly_array_release(targs[n_res]);
        oly_array_release(ct);
        release_all(in, 2);
        release_all(pout, 1 + n_res);
    }
    oly_program_release(prim);
    oly_program_release(lin);
    oly_program_release(t);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

/* (x, c): f32[M, 1] -> pmap over 'i' of (x * x, psum(c), io_callback(c)) when
 * fn, else of (x * x, psum(c)); the program returns the outputs in outs. */
static oly_program *pmap_three(oly_host_fn *fn, const int *outs, int n_outs)
{
    int64_t one1 = 1, d41[] = {M, 1};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one1), sa = tu_aval(OLY_FLOAT32, 2, d41);
    oly_builder *b = NULL;
    oly_var *x = NULL, *c = NULL, *o[3] = {0};
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    CHECK_OK(oly_builder_add_input(b, &a, &c));
    oly_atom xx[2] = {oly_atom_var(x), oly_atom_var(x)}, in = oly_atom_var(c);
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, xx, 2, NULL, NULL, 0, &o[0], 1, NULL));
    CHECK_OK(oly_builder_append(b, &oly__prim_psum, &in, 1, &(oly_params_psum){.axes = "('i',)"},
                                NULL, 0, &o[1], 1, NULL));
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    if (fn)
        CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &pc, NULL, 0, &o[2], 1, NULL));
    int nb = fn ? 3 : 2;
    oly_atom bo[3] = {oly_atom_var(o[0]), oly_atom_var(o[1]), oly_atom_var(o[2])};
    oly_program *body = NULL;
    CHECK_OK(oly_builder_finish(b, bo, nb, &body));
    oly_builder_free(b);
    char devs[64];
    snprintf(devs, sizeof devs, "(%d, %d, %d, %d)", dev(0), dev(1), dev(2), dev(3));
    oly_params_pmap pp = {.axis_name = "('i',)", .sizes = {.n = 1, .v = {M}}, .devices = devs,
                          .n_out = nb};
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &sa, &x));
    CHECK_OK(oly_builder_add_input(b, &sa, &c));
    oly_atom ins[2] = {oly_atom_var(x), oly_atom_var(c)};
    CHECK_OK(oly_builder_append(b, &oly__prim_pmap, ins, 2, &pp, &body, 1, o, 3, NULL));
    oly_atom po[3];
    for (int k = 0; k < n_outs; k++) po[k] = oly_atom_var(o[outs[k]]);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, po, n_outs, &p));
    oly_builder_free(b);
    oly_program_release(body);
    return p;
}

TEST(pmap_row_dce_drops_unused_outputs_and_inputs_keeps_effects)
{
    fail_state st = {.fail_on = -1};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("member_host", failing_host, &st, NULL, &fn));
    double xv[M], cv[M];
    for (int k = 0; k < M; k++) xv[k] = k + 1, cv[k] = 10 * k;
    int64_t d41[] = {M, 1};
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, d41, xv), tu_array(OLY_FLOAT32, 2, d41, cv)};
    /* x * x only: psum goes, the callback (an effect) stays with its input */
    oly_program *p = pmap_three(fn, (int[]){0}, 1), *d = NULL;
    if (p) CHECK_OK(oly_program_dce(p, &d));
    if (d) {
        CHECK_OK(oly_program_verify(d));
        CHECK_EQ(d->n_eqn, 1);
        CHECK_EQ(d->eqn[0].n_out, 1);
        CHECK_EQ(d->eqn[0].n_in, 2);
        CHECK_EQ(count_prim(d, "psum"), 0);
        CHECK_EQ(count_prim(d, "io_callback"), 1);
        oly_array *y = NULL;
        CHECK_OK(oly_program_run(d, 0, in, 2, &y, 1));
        CHECK_EQ(atomic_load(&st.calls), M);
        for (int k = 0; k < M && y; k++) CHECK_NEAR(tu_get(y, k), xv[k] * xv[k], 1e-6);
        oly_array_release(y);
    }
    oly_program_release(p);
    oly_program_release(d);
    /* psum(c) only, no effect: mul goes and so does the input x */
    p = pmap_three(NULL, (int[]){1}, 1);
    d = NULL;
    if (p) CHECK_OK(oly_program_dce(p, &d));
    if (d) {
        CHECK_OK(oly_program_verify(d));
        CHECK_EQ(d->eqn[0].n_in, 1);
        CHECK_EQ(d->eqn[0].n_out, 1);
        CHECK_EQ(count_prim(d, "mul"), 0);
        oly_array *y = NULL;
        CHECK_OK(oly_program_run(d, 0, in, 2, &y, 1));
        for (int k = 0; k < M && y; k++) CHECK_NEAR(tu_get(y, k), 60, 1e-6);
        oly_array_release(y);
    }
    oly_program_release(p);
    oly_program_release(d);
    /* every output used: the same program */
    p = pmap_three(NULL, (int[]){1, 0}, 2);
    d = NULL;
    if (p) CHECK_OK(oly_program_dce(p, &d));
    CHECK(d == p);
    oly_program_release(p);
    oly_program_release(d);
    release_all(in, 2);
    oly_host_fn_release(fn);
}

/* ---------------------------------------------------------------- launches without collectives */

typedef struct dev_state {
    atomic_int calls;
    atomic_int wrong_device;
    int sleep_us;
} dev_state;

/* Returns its argument; counts calls whose device is not the one member k
 * (input 10 k + 1) runs on; sleeps sleep_us first. */
static oly_status device_host(void *user, oly_callback_frame *f)
{
    dev_state *s = user;
    atomic_fetch_add(&s->calls, 1);
    if (s->sleep_us) {
        struct timespec ts = {0, (long)s->sleep_us * 1000};
        nanosleep(&ts, NULL);
    }
    int k = (int)(*(const float *)f->args[0] - 1) / 10;
    if (f->device != dev(k)) atomic_fetch_add(&s->wrong_device, 1);
    memcpy(f->results[0], f->args[0], sizeof(float));
    return OLY_OK;
}

TEST(pmap_group_without_collectives_short_and_long_bodies)
{
    /* A body with no collective runs its members on the launcher until one
     * is long (then on member threads): every member once per launch, on
     * its own device, with its own values, either way. */
    int64_t one1 = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &one1);
    for (int pass = 0; pass < 2; pass++) {
        dev_state s = {.sleep_us = pass ? 200 : 0};
        oly_host_fn *fn = NULL;
        CHECK_OK(oly_host_fn_new("device_host", device_host, &s, NULL, &fn));
        oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                                  .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
        oly_program *p = one(&oly__prim_io_callback, &pc, a);
        for (int rep = 0; rep < 3 && p; rep++) {
            oly_array *y[M] = {0};
            CHECK_OK(run4(p, OLY_FLOAT32, 1, &one1, y));
            for (int k = 0; k < M; k++)
                if (y[k]) CHECK_EQ(tu_get(y[k], 0), 10 * k + 1);
            release_all(y, M);
        }
        CHECK_EQ(atomic_load(&s.calls), 3 * M);
        CHECK_EQ(atomic_load(&s.wrong_device), 0);
        oly_program_release(p);
        oly_host_fn_release(fn);
    }
}

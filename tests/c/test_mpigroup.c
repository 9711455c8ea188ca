/* test_mpigroup.c — group runs across processes: the MPI transport plugged
 * into the collectives' rendezvous (src/cpu/collective.c, src/rt/mpigroup.c).
 *
 * `make test-c` runs `mpigroup_` under `mpirun -n 2` with two devices per
 * process: a mesh of the four global devices (process p runs members 2p and
 * 2p+1), every collective against values computed here from every member's
 * input X_k[e] = 10 k + e + 1, a 2x2 mesh whose axes lie within and across
 * the processes, and `mpigroupfail_callback` (its own mpirun): a member
 * failing on process 1 makes process 0's collective fail at once with its
 * message. Outside mpirun the tests check that a mesh naming devices beyond
 * this process's is refused (no transport is installed). */
#include "test.h"
#include "testutil.h"

#include <stdlib.h>
#include <time.h>

enum { N = 4 }; /* members: every process's */

static bool under_mpirun(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"); }

/* Joins a job of 2 processes x 2 devices; false (after checking the error a
 * lone process gets for a mesh across processes) when not in one. */
static bool join2(void)
{
    if (!oly_distributed_available() || !under_mpirun() || oly_device_count() != 2 ||
        atoi(getenv("OMPI_COMM_WORLD_SIZE")) != 2) {
        int64_t d1 = 1;
        oly_builder *b = NULL;
        oly_var *x = NULL;
        oly_program *p = NULL;
        oly_aval a = tu_aval(OLY_FLOAT32, 1, &d1);
        CHECK_OK(oly_builder_new(&b));
        CHECK_OK(oly_builder_add_input(b, &a, &x));
        oly_atom out = oly_atom_var(x);
        CHECK_OK(oly_builder_finish(b, &out, 1, &p));
        oly_builder_free(b);
        int devices[1] = {oly_device_count()}; /* another process's device */
        oly_mesh mesh = {1, (const char *const[]){"i"}, (int[]){1}, devices};
        oly_array *in = tu_array(OLY_FLOAT32, 1, &d1, NULL), *y = NULL;
        CHECK_ERR(oly_program_run_group(p, &mesh, &in, 1, &y, 1), OLY_ERR_INVALID,
                  "out of range");
        oly_array_release(in);
        oly_program_release(p);
        return false;
    }
    CHECK_OK(oly_distributed_initialize());
    return oly_distributed_is_initialized();
}

/* out = prim(x) over one input of aval a. */
static oly_program *one(const oly_prim *p, const void *params, oly_aval a)
{
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    oly_var *x = NULL, *o[4];
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, p, &in, p->n_in == 0 ? 0 : 1, params, NULL, 0, o, 4, NULL));
    oly_atom out = oly_atom_var(o[0]);
    CHECK_OK(oly_builder_finish(b, &out, 1, &prog));
    oly_builder_free(b);
    return prog;
}

/* Runs p over the mesh (names, sizes, devices: global) with member k's input
 * X_k; y[k] gets member k's output for this process's members (NULL for the
 * others). */
static oly_status run(oly_program *p, int n_axes, const char *const *names, const int *sizes,
                      const int *devices, oly_dtype t, int rank, const int64_t *dims,
                      oly_array **y)
{
    int me = oly_process_index(), L = oly_device_count(), mine[N], nl = 0;
    for (int k = 0; k < N; k++)
        if (devices[k] / L == me) mine[nl++] = k;
    int64_t count = 1;
    for (int i = 0; i < rank; i++) count *= dims[i];
    oly_array *in[N] = {0}, *out[N] = {0};
    for (int i = 0; i < nl; i++) {
        double v[64];
        for (int64_t e = 0; e < count; e++) v[e] = 10 * mine[i] + (double)e + 1;
        in[i] = tu_array(t, rank, dims, v);
    }
    oly_mesh mesh = {.n_axes = n_axes, .names = names, .sizes = sizes, .devices = devices};
    oly_status st = oly_program_run_group(p, &mesh, in, 1, out, 1);
    for (int k = 0; k < N; k++) y[k] = NULL;
    for (int i = 0; i < nl; i++) {
        oly_array_release(in[i]);
        y[mine[i]] = out[i];
    }
    return st;
}

static const int line[N] = {0, 1, 2, 3};

static oly_status run4(oly_program *p, oly_dtype t, int rank, const int64_t *dims, oly_array **y)
{
    return run(p, 1, (const char *const[]){"i"}, (int[]){N}, line, t, rank, dims, y);
}

static void release_all(oly_array **a)
{
    for (int k = 0; k < N; k++) oly_array_release(a[k]);
}

TEST(mpigroup_psum_pmax_pmin)
{
    if (!join2()) return;
    const oly_dtype types[] = {OLY_FLOAT32, OLY_FLOAT64, OLY_INT32, OLY_UINT8, OLY_FLOAT16,
                               OLY_COMPLEX64};
    int64_t dims[] = {7};
    for (int ti = 0; ti < OLY_ARRAY_LEN(types); ti++)
        for (int op = 0; op < 3; op++) {
            oly_dtype t = types[ti];
            if (op && oly_dtype_is_complex(t)) continue;
            const oly_prim *p = op == 0 ? &oly__prim_psum : op == 1 ? &oly__prim_pmax
                                                                     : &oly__prim_pmin;
            oly_program *prog = one(p, &(oly_params_psum){.axes = "('i',)"}, tu_aval(t, 1, dims));
            oly_array *y[N];
            CHECK_OK(run4(prog, t, 1, dims, y));
            int seen = 0;
            for (int k = 0; k < N; k++) {
                if (!y[k]) continue;
                seen++;
                double want[7];
                for (int e = 0; e < 7; e++)
                    want[e] = op == 0 ? 4 * (e + 1) + 60 : op == 1 ? 30 + e + 1 : e + 1;
                CHECK(tu_allclose(y[k], want, 7, 1e-2, 0));
                CHECK_EQ(oly_array_device(y[k]), k % 2); /* the local device */
            }
            CHECK_EQ(seen, 2);
            release_all(y);
            oly_program_release(prog);
        }
}

TEST(mpigroup_all_gather_reduce_scatter_all_to_all_axis_index)
{
    if (!join2()) return;
    int64_t dims[] = {4, 2};
    oly_aval a = tu_aval(OLY_FLOAT32, 2, dims);
    oly_array *y[N];
    /* all_gather, not tiled, dim 0: every member gets X_0..X_3 stacked */
    oly_params_all_gather pa = {.all_gather_dimension = 0, .axis_name = "('i',)", .axis_size = N};
    oly_program *prog = one(&oly__prim_all_gather, &pa, a);
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    double want[32];
    for (int j = 0; j < N; j++)
        for (int e = 0; e < 8; e++) want[j * 8 + e] = 10 * j + e + 1;
    for (int k = 0; k < N; k++)
        if (y[k]) CHECK(tu_allclose(y[k], want, 32, 0, 0));
    release_all(y);
    oly_program_release(prog);

    /* reduce_scatter, tiled on dim 0: member k gets row k of the sum */
    oly_params_reduce_scatter pr = {.axis_name = "('i',)", .axis_size = N, .scatter_dimension = 0,
                                    .tiled = true};
    prog = one(&oly__prim_reduce_scatter, &pr, tu_aval(OLY_FLOAT64, 2, dims));
    CHECK_OK(run4(prog, OLY_FLOAT64, 2, dims, y));
    for (int k = 0; k < N; k++)
        if (y[k]) CHECK(tu_allclose(y[k], (double[]){60 + 4 * (2 * k + 1), 60 + 4 * (2 * k + 2)},
                                    2, 0, 0));
    release_all(y);
    oly_program_release(prog);

    /* all_to_all split 0 concat 1: member k gets row k of every X_j, side by side */
    oly_params_all_to_all pt = {.axis_name = "('i',)", .axis_size = N, .split_axis = 0,
                                .concat_axis = 1};
    prog = one(&oly__prim_all_to_all, &pt, a);
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    for (int k = 0; k < N; k++) {
        double w[8];
        for (int j = 0; j < N; j++)
            for (int c = 0; c < 2; c++) w[j * 2 + c] = 10 * j + k * 2 + c + 1;
        if (y[k]) CHECK(tu_allclose(y[k], w, 8, 0, 0));
    }
    release_all(y);
    oly_program_release(prog);

    /* axis_index: the global index */
    prog = one(&oly__prim_axis_index, &(oly_params_axis_index){.axis_name = "('i',)"}, a);
    CHECK_OK(run4(prog, OLY_FLOAT32, 2, dims, y));
    for (int k = 0; k < N; k++)
        if (y[k]) CHECK_EQ(tu_get(y[k], 0), k);
    release_all(y);
    oly_program_release(prog);
}

TEST(mpigroup_ppermute)
{
    if (!join2()) return;
    int64_t dims[] = {3};
    oly_aval a = tu_aval(OLY_INT32, 1, dims);
    /* a shift by one (pairs inside and across processes; member 0 gets zeros),
     * a shift by two (every pair across: two rounds of transport pairs), a swap
     * inside each process */
    struct { const char *perm; int from[N]; } cases[] = {
        {"((0, 1), (1, 2), (2, 3))", {-1, 0, 1, 2}},
        {"((0, 2), (1, 3), (2, 0), (3, 1))", {2, 3, 0, 1}},
        {"((0, 1), (1, 0), (2, 3), (3, 2))", {1, 0, 3, 2}},
    };
    for (int c = 0; c < OLY_ARRAY_LEN(cases); c++) {
        oly_params_ppermute pp = {.axis_name = "('i',)", .perm = cases[c].perm};
        oly_program *prog = one(&oly__prim_ppermute, &pp, a);
        oly_array *y[N];
        CHECK_OK(run4(prog, OLY_INT32, 1, dims, y));
        for (int k = 0; k < N; k++) {
            int s = cases[c].from[k];
            double w[3];
            for (int e = 0; e < 3; e++) w[e] = s < 0 ? 0 : 10 * s + e + 1;
            if (y[k] && !tu_allclose(y[k], w, 3, 0, 0)) {
                fprintf(stderr, "    perm %s, member %d\n", cases[c].perm, k);
                CHECK(false);
            }
        }
        release_all(y);
        oly_program_release(prog);
    }
}

/* A 2x2 mesh: 'p' crosses the processes, 'l' stays inside one (devices
 * 0 1 / 2 3), then the same with the devices transposed so that 'l' crosses. */
TEST(mpigroup_mesh_axes_within_and_across)
{
    if (!join2()) return;
    static const char *const names[] = {"p", "l"};
    const int sizes[] = {2, 2}; /* member k = 2 p + l */
    const int layouts[2][N] = {{0, 1, 2, 3}, {0, 2, 1, 3}};
    int64_t dims[] = {3};
    oly_aval a = tu_aval(OLY_FLOAT32, 1, dims);
    struct { const char *axes; double want[N]; } cases[] = {
        {"('l',)", {0 + 10, 0 + 10, 20 + 30, 20 + 30}}, /* members sharing p */
        {"('p',)", {0 + 20, 10 + 30, 0 + 20, 10 + 30}}, /* members sharing l */
        {"('p', 'l')", {60, 60, 60, 60}},
    };
    for (int lay = 0; lay < 2; lay++)
        for (int c = 0; c < OLY_ARRAY_LEN(cases); c++) {
            oly_program *prog = one(&oly__prim_psum, &(oly_params_psum){.axes = cases[c].axes}, a);
            oly_array *y[N];
            CHECK_OK(run(prog, 2, names, sizes, layouts[lay], OLY_FLOAT32, 1, dims, y));
            int m = c == 2 ? 4 : 2;
            for (int k = 0; k < N; k++) {
                double w[3];
                for (int e = 0; e < 3; e++) w[e] = cases[c].want[k] + m * (e + 1);
                if (y[k] && !tu_allclose(y[k], w, 3, 0, 0)) {
                    fprintf(stderr, "    layout %d, psum over %s, member %d\n", lay,
                            cases[c].axes, k);
                    CHECK(false);
                }
            }
            release_all(y);
            oly_program_release(prog);
        }
    /* all_gather over l, axis_index over p, with 'l' across processes */
    oly_params_all_gather pa = {.all_gather_dimension = 0, .axis_name = "('l',)", .axis_size = 2};
    oly_program *prog = one(&oly__prim_all_gather, &pa, a);
    oly_array *y[N];
    CHECK_OK(run(prog, 2, names, sizes, layouts[1], OLY_FLOAT32, 1, dims, y));
    for (int k = 0; k < N; k++) {
        double w[6];
        for (int j = 0; j < 2; j++)
            for (int e = 0; e < 3; e++) w[j * 3 + e] = 10 * (2 * (k / 2) + j) + e + 1;
        if (y[k]) CHECK(tu_allclose(y[k], w, 6, 0, 0));
    }
    release_all(y);
    oly_program_release(prog);
    prog = one(&oly__prim_axis_index, &(oly_params_axis_index){.axis_name = "('p',)"}, a);
    CHECK_OK(run(prog, 2, names, sizes, layouts[1], OLY_FLOAT32, 1, dims, y));
    for (int k = 0; k < N; k++)
        if (y[k]) CHECK_EQ(tu_get(y[k], 0), k / 2);
    release_all(y);
    oly_program_release(prog);
    /* a mesh giving process 0 three members and process 1 one: refused alike */
    prog = one(&oly__prim_psum, &(oly_params_psum){.axes = "('p',)"}, a);
    CHECK_ERR(run(prog, 2, names, sizes, (int[]){0, 1, 0, 2}, OLY_FLOAT32, 1, dims, y),
              OLY_ERR_INVALID, "the same number of members");
    oly_program_release(prog);
}

/* ---------------------------------------------------------------- a failure (its own mpirun) */

static oly_status failing_host(void *user, oly_callback_frame *f)
{
    double v = *(const float *)f->args[0];
    if (v == 31) return oly_host_fail(OLY_ERR_CALLBACK, "member saw %g", v); /* member 3 */
    memcpy(f->results[0], f->args[0], sizeof(float));
    return OLY_OK;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Member 3 (process 1) fails in a host function before a psum: process 1
 * reports its own error, process 0's psum fails at once (the notice, not the
 * timeout) naming process 1 and its message. */
TEST(mpigroupfail_callback)
{
    if (!join2()) return;
    int64_t d1 = 1;
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &d1);
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("member_host", failing_host, NULL, NULL, &fn));
    oly_builder *b = NULL;
    oly_var *x = NULL, *h = NULL, *z = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_params_callback pc = {.callback = fn, .result_avals = &a, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL, .ordered = true};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_io_callback, &in, 1, &pc, NULL, 0, &h, 1, NULL));
    in = oly_atom_var(h);
    CHECK_OK(oly_builder_append(b, &oly__prim_psum, &in, 1, &(oly_params_psum){.axes = "('i',)"},
                                NULL, 0, &z, 1, NULL));
    oly_atom out = oly_atom_var(z);
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &prog));
    oly_builder_free(b);
    oly_array *y[N];
    double t0 = seconds();
    if (oly_process_index() == 1)
        CHECK_ERR(run4(prog, OLY_FLOAT32, 1, &d1, y), OLY_ERR_CALLBACK, "member saw 31");
    else { /* "aborted", or "refused" when the notice came before the psum */
        CHECK_ERR(run4(prog, OLY_FLOAT32, 1, &d1, y), OLY_ERR_DISTRIBUTED,
                  "process 1 failed: member saw 31");
        CHECK(strstr(oly_last_error(), "psum over 'i' across processes"));
    }
    CHECK(seconds() - t0 < 3); /* OLYMPUS_COLLECTIVE_TIMEOUT is 10 */
    release_all(y);
    oly_program_release(prog);
    oly_host_fn_release(fn);
    CHECK_OK(oly_distributed_shutdown());
}

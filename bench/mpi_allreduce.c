/* mpi_allreduce.c — bench row psum-1MiB-mpi: an allreduce (sum) of 1 MiB of
 * float32 across 2 processes through olympus's transport (src/rt/mpi.c: the
 * arrival check, then MPI_Allreduce) against raw MPI_Allreduce on the same
 * buffers, in alternating timed batches; and the case, a psum of
 * 1 MiB through a group run (pmap's launch) over the 2 processes' devices (1
 * each), input and output arrays olympus's, against raw MPI_Allreduce. Run
 * under mpirun by bench/run.py:
 *   mpirun -n 2 mpi_allreduce REPEATS TARGET_MS
 * Process 0 prints one JSON line per case:
 *   {"case": "mpi-allreduce-1MiB", "oly_ns": [...], "peer_ns": [...], "error": null}
 *   {"case": "mpi-pmap-psum-1MiB", ...} */
#include <olympus.h>

#include <mpi.h>
#include <stdlib.h>
#include <time.h>

enum { N = 262144 }; /* 1 MiB of float32 */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float x[N], y[N];

/* The pmap case: psum over 'i' of f32[N], run as a group over the mesh of
 * every process's device 0 (global ids 0, 1: one member per process). */
static oly_program *psum_prog;
static oly_array *px;
static int mesh_devices[64];
static const char *const mesh_names[] = {"i"};
static int mesh_size;

static oly_status pmap_psum(void)
{
    oly_mesh mesh = {1, mesh_names, &mesh_size, mesh_devices};
    oly_array *out = NULL;
    oly_status st = oly_program_run_group(psum_prog, &mesh, &px, 1, &out, 1);
    oly_array_release(out);
    return st;
}

static oly_status build_psum(int size)
{
    int64_t n = N;
    oly_aval a;
    oly_builder *b = NULL;
    oly_var *v = NULL, *o = NULL;
    oly_status st = oly_aval_make(OLY_FLOAT32, 1, &n, &a);
    if (st != OLY_OK) return st;
    if ((st = oly_builder_new(&b)) != OLY_OK) return st;
    st = oly_builder_add_input(b, &a, &v);
    oly_atom in = oly_atom_var(v);
    if (st == OLY_OK)
        st = oly_builder_append(b, oly_prim_lookup("psum"), &in, 1,
                                &(oly_params_psum){.axes = "('i',)"}, NULL, 0, &o, 1, NULL);
    oly_atom out = oly_atom_var(o);
    if (st == OLY_OK) st = oly_builder_finish(b, &out, 1, &psum_prog);
    oly_builder_free(b);
    if (st == OLY_OK) st = oly_array_from_data(&a, x, &px);
    mesh_size = size < 64 ? size : 64;
    for (int r = 0; r < mesh_size; r++) mesh_devices[r] = r * oly_device_count();
    return st;
}

/* ns per allreduce over a batch of `iters`; olympus (1: the transport, 2: a
 * pmap's psum) or raw MPI (0). */
static double batch(int oly, int iters, int *failed)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < iters; i++) {
        if (oly == 2) {
            if (pmap_psum() != OLY_OK) *failed = 1;
        } else if (oly) {
            if (oly_distributed_allreduce(x, y, N, OLY_FLOAT32, OLY_COLLECTIVE_SUM) != OLY_OK)
                *failed = 1;
        } else {
            MPI_Allreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    double dt = now() - t0, mx;
    /* the slowest process's time is the collective's */
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx * 1e9 / iters;
}

/* The pmap case: check the sum once, then alternating batches (the same
 * iteration count as the transport's case). */
static void run_pmap_case(int rank, int size, int repeats, int iters)
{
    int failed = 0;
    const char *err = NULL;
    if (build_psum(size) != OLY_OK) {
        failed = 1;
        err = oly_last_error();
    } else {
        oly_mesh mesh = {1, mesh_names, &mesh_size, mesh_devices};
        oly_array *out = NULL;
        if (oly_program_run_group(psum_prog, &mesh, &px, 1, &out, 1) != OLY_OK) {
            failed = 1;
            err = oly_last_error();
        } else {
            const float *o = oly_array_data(out);
            for (int i = 0; i < N && !failed; i++) {
                float want = 0;
                for (int r = 0; r < size; r++) want += (float)((i + r) % 7);
                if (o[i] != want) failed = 2;
            }
        }
        oly_array_release(out);
    }
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double oly_ns[64], peer_ns[64];
    for (int r = 0; r < repeats && !any; r++) {
        oly_ns[r] = batch(2, iters, &failed);
        peer_ns[r] = batch(0, iters, &failed);
    }
    if (rank == 0) {
        printf("{\"case\": \"mpi-pmap-psum-1MiB\", \"processes\": %d, \"iters\": %d, "
               "\"oly_ns\": [", size, iters);
        for (int r = 0; r < repeats && !failed && !any; r++)
            printf("%s%.1f", r ? ", " : "", oly_ns[r]);
        printf("], \"peer_ns\": [");
        for (int r = 0; r < repeats && !any; r++) printf("%s%.1f", r ? ", " : "", peer_ns[r]);
        if (failed || any)
            printf("], \"error\": \"%s\"}\n", failed == 2 ? "wrong sum"
                                               : err ? "pmap psum failed" : "a process failed");
        else
            printf("], \"error\": null}\n");
        fflush(stdout);
    }
}

static void release_bench(void)
{
    oly_array_release(px);
    oly_program_release(psum_prog);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 7;
    double target_ms = argc > 2 ? atof(argv[2]) : 200;
    if (oly_distributed_initialize() != OLY_OK) {
        printf("{\"case\": \"mpi-allreduce-1MiB\", \"oly_ns\": [], \"peer_ns\": [], "
               "\"error\": \"initialize: %s\"}\n", oly_last_error());
        return 0;
    }
    int rank = oly_process_index(), size = oly_process_count(), failed = 0;
    for (int i = 0; i < N; i++) x[i] = (float)((i + rank) % 7);
    /* check once: every element is the sum over processes */
    oly_distributed_allreduce(x, y, N, OLY_FLOAT32, OLY_COLLECTIVE_SUM);
    for (int i = 0; i < N && !failed; i++) {
        float want = 0;
        for (int r = 0; r < size; r++) want += (float)((i + r) % 7);
        if (y[i] != want) failed = 2;
    }
    /* calibrate: iterations for one batch of about target_ms */
    batch(1, 5, &failed);
    batch(0, 5, &failed);
    double per = batch(0, 20, &failed);
    MPI_Bcast(&per, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int iters = (int)(target_ms * 1e6 / per);
    if (iters < 5) iters = 5;
    double oly_ns[64], peer_ns[64];
    if (repeats > 64) repeats = 64;
    for (int r = 0; r < repeats; r++) {
        oly_ns[r] = batch(1, iters, &failed);
        peer_ns[r] = batch(0, iters, &failed);
    }
    if (rank == 0) {
        printf("{\"case\": \"mpi-allreduce-1MiB\", \"processes\": %d, \"iters\": %d, \"oly_ns\": [",
               size, iters);
        for (int r = 0; r < repeats && !failed; r++) printf("%s%.1f", r ? ", " : "", oly_ns[r]);
        printf("], \"peer_ns\": [");
        for (int r = 0; r < repeats; r++) printf("%s%.1f", r ? ", " : "", peer_ns[r]);
        if (failed)
            printf("], \"error\": \"%s\"}\n", failed == 2 ? "wrong sum" : "olympus allreduce failed");
        else
            printf("], \"error\": null}\n");
        fflush(stdout);
    }
    run_pmap_case(rank, size, repeats, iters);
    release_bench();
    oly_distributed_shutdown();
    return 0;
}

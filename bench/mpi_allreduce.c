/* mpi_allreduce.c — bench row psum-1MiB-mpi: an allreduce (sum) of 1 MiB of
 * float32 across 2 processes through olympus's transport (src/rt/mpi.c: the
 * arrival check, then MPI_Allreduce) against raw MPI_Allreduce on the same
 * buffers, in alternating timed batches. Run under mpirun by bench/run.py:
 *   mpirun -n 2 mpi_allreduce REPEATS TARGET_MS
 * Process 0 prints one JSON line:
 *   {"case": "mpi-allreduce-1MiB", "oly_ns": [...], "peer_ns": [...], "error": null} */
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

/* ns per allreduce over a batch of `iters`; olympus's transport or raw MPI. */
static double batch(int oly, int iters, int *failed)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (int i = 0; i < iters; i++) {
        if (oly) {
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
    oly_distributed_shutdown();
    return 0;
}

/* test_mpi.c — the transport between processes (src/rt/mpi.c).
 *
 * `make test-c` runs these three ways: in the plain test_c run (no mpirun:
 * each test checks the error a process outside a job gets, or the one a build
 * without MPI gives), under `mpirun -n 2 test_c mpi_` (every collective and
 * dtype against a local computation of the same values), and one mpirun per
 * failure case (`test_c mpifail_<case>`, OLYMPUS_COLLECTIVE_TIMEOUT=1): a
 * failed peer, a hung peer, mismatched collectives — each must end with a
 * clear error on every process, in about the timeout, never a hang. */
#include "test.h"

#include "rt/mpi.h"

#include <complex.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static bool under_mpirun(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"); }

/* Joins the job; outside one, checks the error the process gets instead and
 * returns false (the test has nothing more to do). */
static bool join(void)
{
    if (!oly_distributed_available()) {
        CHECK_ERR(oly_distributed_initialize(), OLY_ERR_UNSUPPORTED, "built without MPI");
        CHECK_ERR(oly__mpi_barrier("barrier"), OLY_ERR_UNSUPPORTED, "built without MPI");
        return false;
    }
    if (!under_mpirun()) {
        CHECK_ERR(oly_distributed_initialize(), OLY_ERR_DISTRIBUTED, "not started by mpirun");
        CHECK(!oly_distributed_is_initialized());
        CHECK_EQ(oly_process_count(), 1);
        CHECK_EQ(oly_process_index(), 0);
        CHECK_ERR(oly__mpi_barrier("barrier"), OLY_ERR_DISTRIBUTED, "not initialized");
        return false;
    }
    CHECK_OK(oly_distributed_initialize());
    return oly_distributed_is_initialized();
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

TEST(mpi_process_index_and_count)
{
    if (!join()) return;
    CHECK_EQ(oly_process_count(), atoi(getenv("OMPI_COMM_WORLD_SIZE")));
    CHECK_EQ(oly_process_index(), atoi(getenv("OMPI_COMM_WORLD_RANK")));
    CHECK_OK(oly_distributed_initialize()); /* again: fine */
    CHECK_OK(oly__mpi_barrier("barrier"));
}

/* Process r's element i, as complex128 (real types keep the real part). */
static double complex value(int r, int64_t i, oly_dtype t)
{
    double re = (double)((i * 7 + r * 3) % 11) - (oly_dtype_is_unsigned_int(t) ? 0 : 5);
    double im = (double)((i + r) % 5) - 2;
    if (t == OLY_BOOL) re = (double)((i + r) % 3 == 0), im = 0;
    return re + im * I;
}

static void fill(int r, int64_t n, oly_dtype t, void *out)
{
    double complex *v = oly__malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = value(r, i, t);
    oly__convert(v, OLY_COMPLEX128, out, t, n);
    free(v);
}

/* What op over every process gives, computed here. */
static void expect(int nproc, int64_t n, oly_dtype t, oly_collective_op op, void *out)
{
    double complex *v = oly__malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double complex acc = value(0, i, t);
        for (int r = 1; r < nproc; r++) {
            double complex x = value(r, i, t);
            if (op == OLY_COLLECTIVE_SUM) acc += x;
            else if (op == OLY_COLLECTIVE_MAX) acc = creal(x) > creal(acc) ? x : acc;
            else acc = creal(x) < creal(acc) ? x : acc;
        }
        if (t == OLY_BOOL && op == OLY_COLLECTIVE_SUM) acc = creal(acc) != 0; /* or */
        v[i] = acc;
    }
    oly__convert(v, OLY_COMPLEX128, out, t, n);
    free(v);
}

TEST(mpi_allreduce_every_dtype_and_op)
{
    if (!join()) return;
    int n = oly_process_count(), me = oly_process_index();
    const int64_t count = 1000;
    for (int t = 0; t < OLY_DTYPE_COUNT; t++) {
        size_t bytes = (size_t)count * oly_dtype_size((oly_dtype)t);
        char *x = oly__malloc(bytes), *y = oly__malloc(bytes), *want = oly__malloc(bytes);
        for (int op = 0; op < OLY_COLLECTIVE_OP_COUNT; op++) {
            fill(me, count, (oly_dtype)t, x);
            if (oly_dtype_is_complex((oly_dtype)t) && op != OLY_COLLECTIVE_SUM) {
                CHECK_ERR(oly_distributed_allreduce(x, y, count, (oly_dtype)t, (oly_collective_op)op),
                          OLY_ERR_TYPE, "complex numbers have no order");
                continue;
            }
            expect(n, count, (oly_dtype)t, (oly_collective_op)op, want);
            memset(y, 0x5a, bytes);
            CHECK_OK(oly_distributed_allreduce(x, y, count, (oly_dtype)t, (oly_collective_op)op));
            if (memcmp(y, want, bytes) != 0)
                CHECK_FAIL_("allreduce %s op %d differs from the local computation",
                            oly_dtype_name((oly_dtype)t), op);
            /* in place */
            CHECK_OK(oly_distributed_allreduce(x, x, count, (oly_dtype)t, (oly_collective_op)op));
            if (memcmp(x, want, bytes) != 0)
                CHECK_FAIL_("in-place allreduce %s op %d differs", oly_dtype_name((oly_dtype)t), op);
        }
        free(x);
        free(y);
        free(want);
    }
}

TEST(mpi_allreduce_nan_and_bad_arguments)
{
    if (!join()) return;
    int me = oly_process_index();
    float x[3] = {1, me == 0 ? NAN : 2, 3}, y[3];
    CHECK_OK(oly__mpi_allreduce(x, y, 3, OLY_FLOAT32, OLY_COLLECTIVE_MAX, "pmax over 'i'"));
    CHECK(isnan(y[1]));
    CHECK_OK(oly__mpi_allreduce(x, y, 3, OLY_FLOAT32, OLY_COLLECTIVE_MIN, "pmin over 'i'"));
    CHECK(isnan(y[1]));
    CHECK_EQ(y[0], 1);
    uint16_t h[2] = {oly__float_to_half(0.5f), oly__float_to_half(me == 1 ? NAN : -1.0f)}, hy[2];
    CHECK_OK(oly__mpi_allreduce(h, hy, 2, OLY_FLOAT16, OLY_COLLECTIVE_MAX, "pmax"));
    CHECK_EQ(oly__half_to_float(hy[0]), 0.5);
    CHECK(isnan(oly__half_to_float(hy[1])));
    /* Refused before any process moves: the group stays usable. */
    CHECK_ERR(oly__mpi_allreduce(x, y, 3, (oly_dtype)99, OLY_COLLECTIVE_SUM, "psum"), OLY_ERR_TYPE,
              "not an olympus dtype");
    CHECK_ERR(oly__mpi_allreduce(x, y, 3, OLY_FLOAT32, (oly_collective_op)7, "psum"),
              OLY_ERR_INVALID, "unknown reduction 7");
    CHECK_ERR(oly_distributed_allreduce(x, y, -1, OLY_FLOAT32, OLY_COLLECTIVE_SUM), OLY_ERR_INVALID,
              "negative count");
    CHECK_ERR(oly__mpi_allreduce(x, NULL, 3, OLY_FLOAT32, OLY_COLLECTIVE_SUM, "psum"),
              OLY_ERR_INVALID, "receive buffer is NULL");
    CHECK_OK(oly__mpi_barrier("barrier"));
}

TEST(mpi_allgather_alltoall)
{
    if (!join()) return;
    int n = oly_process_count(), me = oly_process_index();
    int32_t mine[5], all[5 * 64];
    for (int i = 0; i < 5; i++) mine[i] = me * 100 + i;
    CHECK(n <= 64);
    CHECK_OK(oly__mpi_allgather(mine, all, sizeof mine, "all_gather over 'i'"));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 5; i++) CHECK_EQ(all[r * 5 + i], r * 100 + i);
    /* block j of process r holds r * 1000 + j * 10 + k */
    int64_t send[64 * 3], recv[64 * 3];
    for (int j = 0; j < n; j++)
        for (int k = 0; k < 3; k++) send[j * 3 + k] = me * 1000 + j * 10 + k;
    CHECK_OK(oly__mpi_alltoall(send, recv, 3 * sizeof(int64_t), "all_to_all over 'i'"));
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 3; k++) CHECK_EQ(recv[r * 3 + k], r * 1000 + me * 10 + k);
    CHECK_ERR(oly__mpi_allgather(mine, all, (int64_t)1 << 32, "all_gather"), OLY_ERR_INVALID,
              "a block carries at most");
}

TEST(mpi_ppermute)
{
    if (!join()) return;
    int n = oly_process_count(), me = oly_process_index();
    int pairs[64][2];
    for (int r = 0; r < n && r < 64; r++) {
        pairs[r][0] = r;
        pairs[r][1] = (r + 1) % n;
    }
    double x[4] = {me, me + 0.5, -me, 7}, y[4];
    CHECK_OK(oly__mpi_ppermute(x, y, sizeof x, (const int(*)[2])pairs, n, "ppermute over 'i'"));
    int from = (me - 1 + n) % n;
    CHECK_EQ(y[0], from);
    CHECK_EQ(y[1] * 2, from * 2 + 1);
    CHECK_EQ(y[2], -from);
    /* Only 0 -> 1: the others get zeros (and 0 gets them too). */
    int one[1][2] = {{0, n - 1}};
    CHECK_OK(oly__mpi_ppermute(x, y, sizeof x, (const int(*)[2])one, 1, "ppermute"));
    for (int i = 0; i < 4; i++) CHECK_EQ(y[i], me == n - 1 ? (i == 0 ? 0 : i == 1 ? 0.5 : i == 2 ? 0 : 7) : 0);
    int bad[2][2] = {{0, 1}, {0, 0}};
    CHECK_ERR(oly__mpi_ppermute(x, y, sizeof x, (const int(*)[2])bad, 2, "ppermute"),
              OLY_ERR_INVALID, "share a source");
    int far[1][2] = {{0, 5}};
    CHECK_ERR(oly__mpi_ppermute(x, y, sizeof x, (const int(*)[2])far, 1, "ppermute"),
              OLY_ERR_INVALID, "names process 5");
    CHECK_OK(oly__mpi_barrier("barrier"));
}

/* Sorted last: the job is left here, and cannot be joined again. */
TEST(mpi_z_shutdown)
{
    if (!join()) return;
    CHECK_OK(oly_distributed_shutdown());
    CHECK(!oly_distributed_is_initialized());
    CHECK_EQ(oly_process_count(), 1);
    CHECK_OK(oly_distributed_shutdown());
    CHECK_ERR(oly_distributed_initialize(), OLY_ERR_DISTRIBUTED, "already shut down");
    CHECK_ERR(oly__mpi_barrier("barrier"), OLY_ERR_DISTRIBUTED, "not initialized");
}

/* ---------------------------------------------------------------- failures (one mpirun each) */

/* Process 1 fails (as a callback raising would make it); process 0, waiting
 * in a collective, fails with process 1's message at once; both then refuse
 * every collective, and shut down without hanging. */
TEST(mpifail_notice)
{
    if (!join()) return;
    int me = oly_process_index();
    float x[4] = {1, 2, 3, 4}, y[4];
    CHECK_OK(oly_distributed_allreduce(x, y, 4, OLY_FLOAT32, OLY_COLLECTIVE_SUM));
    double t0 = seconds();
    if (me == 1) {
        usleep(100000); /* process 0 is waiting by now */
        oly_distributed_fail("callback raised ValueError: boom");
        CHECK_ERR(oly_distributed_allreduce(x, y, 4, OLY_FLOAT32, OLY_COLLECTIVE_SUM),
                  OLY_ERR_DISTRIBUTED, "refused: the process group failed earlier: process 1 "
                  "failed: callback raised ValueError: boom");
    } else {
        CHECK_ERR(oly__mpi_allreduce(x, y, 4, OLY_FLOAT32, OLY_COLLECTIVE_SUM, "psum over 'i'"),
                  OLY_ERR_DISTRIBUTED, "psum over 'i' across processes aborted: process 1 failed: "
                  "callback raised ValueError: boom");
        CHECK(seconds() - t0 < 0.9); /* the notice, not the 1 s timeout */
        CHECK_ERR(oly__mpi_barrier("barrier"), OLY_ERR_DISTRIBUTED, "process 1 failed");
    }
    CHECK_OK(oly_distributed_shutdown());
}

/* Process 1 is late by more than the timeout: process 0 gives up after it,
 * and process 1's collective then fails with process 0's reason. */
TEST(mpifail_timeout)
{
    if (!join()) return;
    int me = oly_process_index();
    int32_t x = 1, y = 0;
    double t0 = seconds();
    if (me == 1) {
        usleep(1600000);
        CHECK_ERR(oly_distributed_allreduce(&x, &y, 1, OLY_INT32, OLY_COLLECTIVE_SUM),
                  OLY_ERR_DISTRIBUTED, "process 0 timed out after 1 s");
    } else {
        CHECK_ERR(oly_distributed_allreduce(&x, &y, 1, OLY_INT32, OLY_COLLECTIVE_SUM),
                  OLY_ERR_DISTRIBUTED, "waiting for process 1 at collective #1");
        double dt = seconds() - t0;
        CHECK(dt > 0.9 && dt < 1.5);
    }
    CHECK_OK(oly_distributed_shutdown());
}

/* Processes at different collectives: both say which, nobody hangs. */
TEST(mpifail_mismatch)
{
    if (!join()) return;
    int me = oly_process_index();
    int64_t x[2] = {1, 2}, y[4];
    oly_status st = me == 0 ? oly__mpi_allreduce(x, y, 2, OLY_INT64, OLY_COLLECTIVE_SUM, "psum")
                            : oly__mpi_allgather(x, y, sizeof x, "all_gather");
    CHECK_EQ(st, OLY_ERR_DISTRIBUTED);
    CHECK(strstr(oly_last_error(), "collective mismatch"));
    CHECK(strstr(oly_last_error(), "allreduce of 16 bytes"));
    CHECK(strstr(oly_last_error(), "allgather of 16 bytes"));
    CHECK_OK(oly_distributed_shutdown());
}

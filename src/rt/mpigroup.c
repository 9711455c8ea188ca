/* mpigroup.c — the MPI transport (src/rt/mpi.c) as the group runtime's
 * cross-process hook (oly_group_transport, src/core/group.c): installed when
 * the processes join (oly_distributed_initialize), so that a group run over
 * global devices spans processes and its collectives' leaders call MPI. */
#include "rt/mpi.h"
#include "rt/rt.h"

static int process(void) { return oly__mpi_rank(); }
static int processes(void) { return oly__mpi_size(); }

static oly_status allreduce(const void *send, void *recv, int64_t n, oly_dtype dtype, int op,
                            const char *what)
{
    return oly__mpi_allreduce(send, recv, n, dtype, (oly_collective_op)op, what);
}

static const oly_group_transport mpi_transport = {
    .process = process,
    .processes = processes,
    .allreduce = allreduce,
    .allgather = oly__mpi_allgather,
    .ppermute = oly__mpi_ppermute,
    .fail = oly__mpi_fail,
};

void oly__mpi_group_install(void) { oly__group_set_transport(&mpi_transport); }

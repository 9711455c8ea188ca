/* mpi.h — the transport between processes: collectives on raw buffers carried
 * by MPI (OpenMPI), called by one leader thread per process between the local
 * phases of a rendezvous (docs/design.md, "Processes (MPI)").
 *
 * Every call is collective over the job's processes unless its doc line says
 * otherwise: every process makes the same calls in the same order (SPMD), and
 * each call checks that its peers are at the same collective (kind and byte
 * count) before any data moves. Calls are serialised by a lock inside (any
 * thread may call, one collective runs at a time per process).
 *
 * Failure: a process whose work failed calls oly__mpi_fail (any thread, not
 * collective); its peers' current or next collective returns
 * OLY_ERR_DISTRIBUTED naming that process and its message, and so does every
 * later collective (the group is poisoned: there is no recovery). A collective
 * whose peers do not arrive within OLYMPUS_COLLECTIVE_TIMEOUT seconds (default
 * 300) fails the same way and tells the others. Built without MPI
 * (no OLY_HAVE_MPI), every call returns OLY_ERR_UNSUPPORTED "olympus was built
 * without MPI". */
#ifndef OLYMPUS_RT_MPI_H
#define OLYMPUS_RT_MPI_H

#include "internal.h"

/* True when the library was built with MPI (not collective). */
bool oly__mpi_available(void);
/* Joins the job's processes (MPI_Init_thread, MPI_THREAD_MULTIPLE), once per
 * process: OK again while initialised. Fails (OLY_ERR_DISTRIBUTED) when the
 * process was not started by mpirun, after oly__mpi_shutdown, or when the
 * processes have different local device counts (all of them then fail). */
oly_status oly__mpi_init(void);
/* Leaves the job: waits at most the timeout for every process to shut down
 * too, then MPI_Finalize (when olympus called MPI_Init). A peer that never
 * comes makes this print one line to stderr and MPI_Abort the job rather than
 * hang. Also run at exit. OK when not initialised. */
oly_status oly__mpi_shutdown(void);
bool oly__mpi_active(void); /* initialised and not shut down (not collective) */
int oly__mpi_rank(void);    /* this process's index, 0 when not active */
int oly__mpi_size(void);    /* the number of processes, 1 when not active */

/* recv = op over every process's send (count elements of dtype t; send ==
 * recv reduces in place). sum: every dtype (bool: or); max, min: bool, ints and
 * floats (complex: OLY_ERR_TYPE); float max / min propagate NaN. what names
 * the caller in messages ("psum over 'i'"). */
oly_status oly__mpi_allreduce(const void *send, void *recv, int64_t count, oly_dtype t,
                              oly_collective_op op, const char *what);
/* recv (size * bytes) = every process's send (bytes), in process order. */
oly_status oly__mpi_allgather(const void *send, void *recv, int64_t bytes, const char *what);
/* Block j of send (size blocks of block_bytes) goes to process j, which puts
 * it at block (this process) of its recv. */
oly_status oly__mpi_alltoall(const void *send, void *recv, int64_t block_bytes, const char *what);
/* ppermute: pairs (src, dst) of process indices, n_pairs of them, each src and
 * each dst at most once. Process src's send (bytes) lands in process dst's
 * recv; a process nobody sends to gets zeros. Bad pairs: OLY_ERR_INVALID. */
oly_status oly__mpi_ppermute(const void *send, void *recv, int64_t bytes, const int (*pairs)[2],
                             int n_pairs, const char *what);
/* Returns when every process has called it. */
oly_status oly__mpi_barrier(const char *what);
/* This process failed (not collective; any thread; the first call wins):
 * poisons the group here and tells every peer, whose collectives then fail
 * with "process <rank> failed: <message>". Nothing when not active. */
void oly__mpi_fail(const char *message);

/* Installs this transport as the group runtime's cross-process hook
 * (src/rt/mpigroup.c); oly_distributed_initialize does, once joined. */
void oly__mpi_group_install(void);

#endif

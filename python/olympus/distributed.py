"""olympus.distributed: many processes under mpirun (OpenMPI), as jax.distributed.

    mpirun -n 2 python3 prog.py      # prog.py calls olympus.distributed.initialize()

After initialize(), olympus.process_index() / process_count() say which process
this is and how many there are, olympus.devices() lists every process's devices
(process p's local device j has id p * L + j) and olympus.local_devices() this
process's. Collectives across processes travel through MPI (src/rt/mpi.c)."""
from ._src.distributed import initialize, shutdown, is_initialized

__all__ = ["initialize", "shutdown", "is_initialized"]

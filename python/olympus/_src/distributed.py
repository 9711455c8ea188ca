"""olympus.distributed's implementation: joining the processes of an mpirun
job (the transport is src/rt/mpi.c, through olympus._core)."""
import atexit
import sys

from olympus import _core

_state = {"initialized": False, "excepthook": None}


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, cluster_detection_method=None,
               initialization_timeout=300, coordinator_bind_address=None, slice_index=None):
    """Joins the processes of an mpirun job (`mpirun -n P python3 prog.py`).

    MPI carries everything: the launcher says how many processes there are and
    which one this is. JAX's arguments are accepted for portability:
    num_processes and process_id, when given, must agree with mpirun's;
    coordinator_address and the rest are not needed and ignored. Without
    mpirun (or in a build without MPI) this raises RuntimeError.
    Afterwards olympus.devices() lists every process's devices and
    olympus.local_devices() this process's."""
    if _state["initialized"]:
        raise RuntimeError("olympus.distributed.initialize should only be called once.")
    if not _core.mpi_available():
        raise RuntimeError("olympus.distributed.initialize: olympus was built without MPI "
                           "(install libopenmpi-dev and openmpi-bin, rebuild, and run the "
                           "program under mpirun)")
    if local_device_ids is not None:
        raise ValueError("olympus.distributed.initialize: local_device_ids is not supported; a "
                         "process's local devices are its OLYMPUS_NUM_CPU_DEVICES CPU devices")
    try:
        _core.distributed_initialize()
    except RuntimeError as e:
        raise RuntimeError(f"olympus.distributed.initialize: {e}") from None
    _state["initialized"] = True
    atexit.register(shutdown)
    hook = sys.excepthook
    _state["excepthook"] = hook

    def excepthook(tp, value, tb):
        # An uncaught exception ends this process: tell the others first, so
        # their collectives fail now instead of waiting for the timeout.
        _core.distributed_fail(f"{tp.__name__}: {value}")
        hook(tp, value, tb)

    sys.excepthook = excepthook
    count, index = _core.process_count(), _core.process_index()
    if num_processes is not None and num_processes != count:
        raise ValueError(f"olympus.distributed.initialize: num_processes={num_processes}, but "
                         f"mpirun started {count} processes")
    if process_id is not None and process_id != index:
        raise ValueError(f"olympus.distributed.initialize: process_id={process_id}, but mpirun "
                         f"made this process {index}")


def shutdown():
    """Leaves the job: waits for every process to shut down too (at most
    OLYMPUS_COLLECTIVE_TIMEOUT seconds, then the job is aborted rather than
    hang). Done at exit; nothing when not initialized."""
    if not _state["initialized"]:
        return
    _state["initialized"] = False
    if _state["excepthook"] is not None and sys.excepthook is not _state["excepthook"]:
        sys.excepthook = _state["excepthook"]
    _state["excepthook"] = None
    _core.distributed_shutdown()


def is_initialized():
    """True between initialize() and shutdown()."""
    return bool(_core.distributed_is_initialized())


def _fail_for_test(message):
    """This process failed: every peer's current or next collective raises
    RuntimeError naming this process and message."""
    _core.distributed_fail(str(message))


def _allreduce_for_test(x, op="sum"):
    """op ('sum' | 'max' | 'min') of the NumPy array x over every process, through
    the C transport collectives use (for tests and benchmarks)."""
    return _core.distributed_allreduce(x, op)

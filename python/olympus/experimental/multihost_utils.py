"""olympus.experimental.multihost_utils: JAX's helpers for programs run as
several processes (olympus.distributed): `process_allgather` gathers a global
array's value (or every process's local value) onto every process;
`sync_global_devices` waits until every process has reached it."""
import numpy as np

from olympus._src.multihost import process_allgather

__all__ = ["process_allgather", "sync_global_devices"]


def sync_global_devices(name):
    """A barrier over every process (a psum over every device); name (a
    string) is for JAX's signature and must be the same on every process."""
    if not isinstance(name, str):
        raise TypeError(f"sync_global_devices: name must be a str, got {name!r}")
    process_allgather(np.zeros((), np.int32))

"""Allocation failure injected inside the library while Python drives it: each
failure surfaces as MemoryError (or the call succeeds when the allocation was
optional), never a crash, and the next call gives the right values. The C
side of the sweep is tests/c/test_faults.c."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import _core

SDS = olympus.ShapeDtypeStruct


def host_double(y):
    return np.asarray(y) * 2


def loss(x, y):
    z = olympus.pure_callback(host_double, SDS(y.shape, y.dtype), y, vmap_method="sequential")
    return jnp.sum(jnp.sin(x) * z)


def workload():
    """Fresh traces every time (new jit objects), eager ops, grad and vmap."""
    x = jnp.arange(4.0) / 4
    y = jnp.array([1.0, -2.0, 0.5, 3.0])
    v = olympus.jit(loss)(x, y)
    g = olympus.jit(olympus.grad(loss))(x, y)
    b = olympus.vmap(loss, in_axes=(0, None))(jnp.stack([x, x + 1]), y)
    e = jnp.cos(x) * 2 + y
    return [np.asarray(t) for t in (v, g, b, e)]


def expected():
    x = np.arange(4.0, dtype=np.float32) / 4
    y = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    v = np.sum(np.sin(x) * 2 * y)
    return [v, np.cos(x) * 2 * y, np.array([v, np.sum(np.sin(x + 1) * 2 * y)]),
            np.cos(x) * 2 + y]


def check(got):
    for a, b in zip(got, expected()):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def test_every_allocation_fails_cleanly():
    check(workload())
    big = 1 << 40
    _core._fault_inject_alloc(big)
    try:
        workload()
        count = big - _core._fault_inject_left()
    finally:
        _core._fault_inject_alloc(-1)
    assert count > 50
    failures = 0
    for k in range(count):      # every allocation of the workload, in turn
        _core._fault_inject_alloc(k)
        try:
            got = workload()
        except MemoryError as e:
            failures += 1
            assert "out of memory" in str(e)
        else:
            check(got)          # an optional allocation failed: still right
        finally:
            _core._fault_inject_alloc(-1)
        check(workload())       # and the next run is whole again
    assert failures > 0

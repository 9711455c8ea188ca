"""olympus.pmap across processes: `mpirun -n 2` with 2 CPU devices each, a
pmap over the 4 global devices (each process passes its 2-row slice and gets
its part back), collectives carried by MPI between the processes. Skipped
where mpirun is absent or olympus was built without MPI (the helpers are
test_distributed.py's)."""
import numpy as np

from test_distributed import mpirun, needs_mpi, rows

ENV = {"OLYMPUS_NUM_CPU_DEVICES": "2"}

COLLECTIVES = r"""
import json, os, numpy as np, olympus, olympus.numpy as jnp
from olympus import lax
olympus.distributed.initialize()
me, L = olympus.process_index(), olympus.local_device_count()
g = np.arange(4, dtype=np.float32)[:, None] * 10 + np.arange(3, dtype=np.float32)
x = g[me * L:(me + 1) * L]                       # this process's rows of the global batch
pm = lambda f: np.asarray(olympus.pmap(f, "i")(x)).tolist()
out = {"rank": me, "devices": len(olympus.devices()),
       "psum": pm(lambda v: lax.psum(v, "i")),
       "pmax": pm(lambda v: lax.pmax(v, "i")),
       "pmean": pm(lambda v: lax.pmean(v, "i")),
       "gather": pm(lambda v: lax.all_gather(v, "i")),
       "index": pm(lambda v: lax.axis_index("i") + 0 * v[0]),
       "shift": pm(lambda v: lax.ppermute(v, "i", [(j, (j + 1) % 4) for j in range(4)])),
       "half": pm(lambda v: lax.ppermute(v, "i", [(0, 2), (1, 3), (2, 0), (3, 1)])),
       "scatter": np.asarray(olympus.pmap(lambda v: lax.psum_scatter(v, "i", tiled=True), "i")(
           np.repeat(x[:, None, :1], 4, axis=1).reshape(L, 4))).tolist(),
       "size": pm(lambda v: lax.psum(1, "i") + 0 * v[0]),
       "local_only": np.asarray(olympus.pmap(lambda v: lax.psum(v, "i"), "i",
                                             devices=olympus.local_devices())(x)).tolist(),
       "jit": np.asarray(olympus.jit(olympus.pmap(lambda v: lax.psum(v * v, "i"), "i"))(x)).tolist()}
try:
    olympus.pmap(lambda v: v, "i")(g)
except ValueError as e:
    out["wrong_rows"] = str(e)
_report(out)
"""


@needs_mpi
def test_pmap_over_every_process_devices_vs_numpy():
    rc, out, err, _ = mpirun(COLLECTIVES, env=ENV)
    assert rc == 0, err[-3000:]
    got = rows(out)
    assert sorted(got) == [0, 1]
    g = np.arange(4, dtype=np.float32)[:, None] * 10 + np.arange(3, dtype=np.float32)
    for me, r in got.items():
        mine = slice(2 * me, 2 * me + 2)
        assert r["devices"] == 4
        np.testing.assert_allclose(r["psum"], np.broadcast_to(g.sum(0), (2, 3)))
        np.testing.assert_allclose(r["pmax"], np.broadcast_to(g.max(0), (2, 3)))
        np.testing.assert_allclose(r["pmean"], np.broadcast_to(g.mean(0), (2, 3)))
        np.testing.assert_allclose(r["gather"], np.broadcast_to(g, (2, 4, 3)))
        assert r["index"] == [2 * me, 2 * me + 1]
        np.testing.assert_allclose(r["shift"], np.roll(g, 1, axis=0)[mine])
        np.testing.assert_allclose(r["half"], np.roll(g, 2, axis=0)[mine])
        # member k's row of psum_scatter: every member holds 4 copies of its first element
        np.testing.assert_allclose(r["scatter"], np.full((2, 1), g[:, 0].sum()))
        assert r["size"] == [4, 4]
        np.testing.assert_allclose(r["jit"], np.broadcast_to((g * g).sum(0), (2, 3)), rtol=1e-6)
        assert "num_local_devices=2" in r["wrong_rows"]
        # a pmap over this process's devices alone stays in the process
        np.testing.assert_allclose(r["local_only"], np.broadcast_to(g[mine].sum(0), (2, 3)))


FAILING = r"""
import json, os, time, numpy as np, olympus
from olympus import lax
olympus.distributed.initialize()
me = olympus.process_index()

def host(i, v):
    if int(i) == 3:                    # global member 3: process 1's second device
        raise ValueError("boom on member 3")
    return v

f = olympus.pmap(lambda v: lax.psum(olympus.pure_callback(
    host, olympus.ShapeDtypeStruct(v.shape, v.dtype), lax.axis_index("i"), v,
    vmap_method="sequential"), "i"), "i")
t = time.monotonic()
try:
    f(np.ones((2, 3), np.float32))
    err = None
except Exception as e:
    err = e
_report({"rank": me, "type": type(err).__name__, "error": str(err),
         "cause": repr(err.__cause__), "seconds": time.monotonic() - t})
"""


@needs_mpi
def test_a_callback_raising_on_process_1_fails_both_processes_within_seconds():
    rc, out, err, secs = mpirun(FAILING, env=dict(ENV, OLYMPUS_COLLECTIVE_TIMEOUT="30"))
    assert rc == 0, err[-3000:]
    got = rows(out)
    assert sorted(got) == [0, 1]
    assert got[1]["type"] == "CallbackError"
    assert "boom on member 3" in got[1]["cause"]
    assert got[0]["type"] == "RuntimeError"
    assert "psum over 'i' across processes" in got[0]["error"]
    assert "process 1 failed" in got[0]["error"] and "boom on member 3" in got[0]["error"]
    assert all(r["seconds"] < 10 for r in got.values())  # the notice, not the 30 s timeout
    assert secs < 25


ORDERED = r"""
import json, os, numpy as np, olympus
from olympus import lax
olympus.distributed.initialize()
me = olympus.process_index()
seen = []

def record(i, step, v):
    seen.append((int(i), int(step)))
    return v

def body(v):
    for step in range(3):
        v = olympus.experimental.io_callback(
            record, olympus.ShapeDtypeStruct(v.shape, v.dtype), lax.axis_index("i"), step, v,
            ordered=True)
        v = lax.psum(v, "i")
    return v

f = olympus.pmap(body, "i")
y = f(np.ones((2,), np.float32))
y = f(np.ones((2,), np.float32))
_report({"rank": me, "seen": seen, "y": np.asarray(y).tolist()})
"""


@needs_mpi
def test_ordered_io_callback_runs_in_program_order_per_device():
    rc, out, err, _ = mpirun(ORDERED, env=ENV)
    assert rc == 0, err[-3000:]
    got = rows(out)
    for me, r in got.items():
        assert r["y"] == [64.0, 64.0]  # three psums over 4 members
        for i in (2 * me, 2 * me + 1):  # this process's members only, each in order
            assert [s for j, s in r["seen"] if j == i] == [0, 1, 2, 0, 1, 2]
        assert sorted({j for j, _ in r["seen"]}) == [2 * me, 2 * me + 1]

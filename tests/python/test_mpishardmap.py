"""shard_map and global arrays across processes: `mpirun -n 2` with 2 CPU
devices each, a 2x2 mesh ('p' across processes, 'd' within), inputs made
with make_array_from_process_local_data, collectives over either axis, values
gathered with multihost_utils.process_allgather and compared with NumPy.
The MPI tests are skipped where mpirun is absent or olympus was built without
MPI (the helpers are test_distributed.py's); the one-process behaviour of the
new functions is checked everywhere."""
import numpy as np
import pytest

import olympus
from olympus.experimental.multihost_utils import process_allgather
from olympus.sharding import Mesh, NamedSharding, PartitionSpec as P
from test_distributed import mpirun, needs_mpi, rows

ENV = {"OLYMPUS_NUM_CPU_DEVICES": "2"}

SHARD_MAP = r"""
import json, os, numpy as np, olympus
from olympus import lax
from olympus.sharding import Mesh, NamedSharding, PartitionSpec as P
from olympus.experimental.multihost_utils import process_allgather
olympus.distributed.initialize()
me = olympus.process_index()
mesh = Mesh(np.array(olympus.devices()).reshape(2, 2), ("p", "d"))
g = np.arange(32, dtype=np.float32).reshape(8, 4)
rows_spec = P(("p", "d"))
x = olympus.make_array_from_process_local_data(NamedSharding(mesh, rows_spec), g[4 * me:4 * me + 4])
sm = lambda f, o=rows_spec, i=rows_spec: olympus.shard_map(f, mesh=mesh, in_specs=i, out_specs=o)
out = {"rank": me, "shape": list(x.shape),
       "shards": [[s.device.id, s.index[0].start, s.index[0].stop, np.asarray(s.data).tolist()]
                  for s in x.addressable_shards]}
y = sm(lambda b: lax.psum(b, "p"))(x)
out["psum_p"] = process_allgather(y).tolist()
out["psum_d"] = process_allgather(sm(lambda b: lax.psum(b, "d"))(x)).tolist()
out["psum_pd"] = process_allgather(sm(lambda b: lax.psum(b, ("p", "d")), o=P())(x)).tolist()
out["gather_p"] = process_allgather(sm(lambda b: lax.all_gather(b, "p", tiled=True))(x)).tolist()
out["index"] = process_allgather(sm(lambda b: (lax.axis_index("p") * 10 + lax.axis_index("d")
                                               + 0 * b[:1, 0]))(x)).tolist()
# a 2-d layout (rows by process, columns by device) and a replicated NumPy argument
g2 = np.arange(16, dtype=np.float32).reshape(4, 4)
x2 = olympus.make_array_from_process_local_data(NamedSharding(mesh, P("p", "d")),
                                                g2[2 * me:2 * me + 2])
w = np.array([1.0, 2.0], np.float32)
z = sm(lambda b, v: lax.psum(b * v, "p"), o=P(None, "d"), i=(P("p", "d"), P()))(x2, w)
out["x2_shape"] = list(x2.shape)
out["weighted"] = process_allgather(z).tolist()
out["y_shards"] = [s.device.id for s in y.addressable_shards]
out["full_value"] = process_allgather(
    olympus.make_array_from_process_local_data(NamedSharding(mesh, rows_spec), g, g.shape)).tolist()
out["stack"] = process_allgather(np.array([me, 5], np.int32)).tolist()
out["tiled"] = process_allgather(np.array([me, 5], np.int32), tiled=True).tolist()
# a mesh of this process's devices alone: as on one process
local = Mesh(np.array(olympus.local_devices()), ("l",))
out["local"] = np.asarray(olympus.shard_map(lambda b: lax.psum(b, "l"), mesh=local,
                                            in_specs=P("l"), out_specs=P())(g[:2])).tolist()
def err(f):
    try:
        f()
    except Exception as e:
        return [type(e).__name__, str(e)]
out["asarray"] = err(lambda: np.asarray(y))
# process 0's devices hold blocks 0 and 2 of this layout: not one piece of the array
twisted = Mesh(np.array(olympus.devices())[[0, 2, 1, 3]].reshape(2, 2), ("a", "b"))
out["twisted"] = err(lambda: olympus.make_array_from_process_local_data(
    NamedSharding(twisted, P(("a", "b"))), g[4 * me:4 * me + 4]))
# a replicated in_spec needs rows held by the other process
out["moves"] = err(lambda: sm(lambda b: b, o=P(), i=P())(x))
out["jit"] = err(lambda: olympus.jit(sm(lambda b: lax.psum(b, "p")))(g))
_report(out)
"""


@needs_mpi
def test_shard_map_over_a_mesh_of_every_process_devices_vs_numpy():
    rc, out, err, _ = mpirun(SHARD_MAP, env=ENV, timeout=120)
    assert rc == 0, err[-3000:]
    got = rows(out)
    assert sorted(got) == [0, 1]
    g = np.arange(32, dtype=np.float32).reshape(8, 4)
    b = g.reshape(4, 2, 4)  # block k = (p, d) = (k // 2, k % 2): rows 2k, 2k+1
    sum_p = np.concatenate([b[0] + b[2], b[1] + b[3]] * 2)
    sum_d = np.concatenate([b[0] + b[1]] * 2 + [b[2] + b[3]] * 2)
    gather_p = np.concatenate([np.concatenate([b[0], b[2]]), np.concatenate([b[1], b[3]])] * 2)
    g2 = np.arange(16, dtype=np.float32).reshape(4, 4)
    w = np.tile([1.0, 2.0], 2)  # each device's 2 columns times v
    for me, r in got.items():
        assert r["shape"] == [8, 4]
        assert [s[:3] for s in r["shards"]] == [[2 * me, 4 * me, 4 * me + 2],
                                                 [2 * me + 1, 4 * me + 2, 4 * me + 4]]
        np.testing.assert_array_equal(r["shards"][1][3], g[4 * me + 2:4 * me + 4])
        np.testing.assert_array_equal(r["psum_p"], sum_p)
        np.testing.assert_array_equal(r["psum_d"], sum_d)
        np.testing.assert_array_equal(r["psum_pd"], b.sum(0))
        np.testing.assert_array_equal(r["gather_p"], gather_p)
        assert r["index"] == [0, 1, 10, 11]
        assert r["x2_shape"] == [4, 4]
        np.testing.assert_array_equal(r["weighted"], (g2[:2] + g2[2:]) * w)
        assert r["y_shards"] == [2 * me, 2 * me + 1]
        np.testing.assert_array_equal(r["full_value"], g)
        assert r["stack"] == [[0, 5], [1, 5]] and r["tiled"] == [0, 5, 1, 5]
        np.testing.assert_array_equal(r["local"], g[:1] + g[1:2])
        assert r["asarray"][0] == "RuntimeError" and "process_allgather" in r["asarray"][1]
        assert r["twisted"][0] == "NotImplementedError" and "rectangular" in r["twisted"][1]
        assert r["moves"][0] == "NotImplementedError" and "between processes" in r["moves"][1]
        assert r["jit"][0] == "NotImplementedError" and "spanning processes" in r["jit"][1]


def test_one_process_make_array_from_process_local_data_is_device_put():
    n = len(olympus.devices())
    mesh = Mesh(np.array(olympus.devices()), ("x",))
    data = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2)
    x = olympus.make_array_from_process_local_data(NamedSharding(mesh, P("x")), data)
    assert x.sharding == NamedSharding(mesh, P("x"))
    np.testing.assert_array_equal(np.asarray(x), data)
    assert len(x.addressable_shards) == n
    with pytest.raises(ValueError, match="global_shape"):
        olympus.make_array_from_process_local_data(NamedSharding(mesh, P("x")), data, (4 * n, 2))
    np.testing.assert_array_equal(process_allgather(x), data[None])
    np.testing.assert_array_equal(process_allgather({"a": data}, tiled=True)["a"], data)

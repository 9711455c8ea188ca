"""olympus.sharding: Mesh, PartitionSpec, NamedSharding (shard shapes and
indices as JAX documents them for a 2x4 mesh), sharded Arrays from
device_put / make_array_from_callback / make_array_from_single_device_arrays,
and jit running elementwise programs once per shard on each device while
keeping the sharding (anything else runs on the global values). Cases with
several devices run in a subprocess (the device count is fixed at first use)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus.sharding import Mesh, NamedSharding, PartitionSpec, P, SingleDeviceSharding

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import json, numpy as np, olympus, olympus.numpy as jnp
from olympus.sharding import Mesh, NamedSharding, PartitionSpec as P
def sl(idx):
    return [[s.start, s.stop] for s in idx]
mesh = Mesh(np.array(olympus.devices()[:8]).reshape(2, 4), ('x', 'y'))
"""


def run(body, n=8):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
             OLYMPUS_NUM_CPU_DEVICES=str(n))
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=120, env=e)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.strip().splitlines()]


# ---------------------------------------------------------------- specs and meshes (one device)

def one_mesh():
    return Mesh(np.array(olympus.devices()).reshape(1, 1), ("x", "y"))


def test_partition_spec_entries():
    s = P("x", None, ("y", "z"))
    assert isinstance(s, PartitionSpec) and olympus.sharding.PartitionSpec is PartitionSpec
    assert len(s) == 3 and s[0] == "x" and s[1] is None and s[2] == ("y", "z")
    assert repr(s) == "PartitionSpec('x', None, ('y', 'z'))"
    assert P(("x",)) == P("x") and P(["x", "y"]) == P(("x", "y"))
    assert P() == () and hash(P("x")) == hash(P("x"))
    with pytest.raises(TypeError, match="PartitionSpec entries must be None"):
        P(3)
    with pytest.raises(TypeError, match="PartitionSpec entries must be None"):
        P(("x", 1))


def test_mesh_attributes_and_errors():
    m = one_mesh()
    assert m.axis_names == ("x", "y") and dict(m.shape) == {"x": 1, "y": 1}
    assert m.size == 1 and m.devices.shape == (1, 1) and m.devices[0, 0] == olympus.devices()[0]
    assert m == one_mesh() and hash(m) == hash(one_mesh())
    assert repr(m) == "Mesh('x': 1, 'y': 1)"
    with m as entered:
        assert entered is m and olympus.sharding.get_mesh() is m
    assert olympus.sharding.get_mesh() is None
    with pytest.raises(ValueError, match=r"devices.ndim == 2 and len\(axis_names\) == 1"):
        Mesh(np.array(olympus.devices()).reshape(1, 1), ("x",))
    with pytest.raises(ValueError, match="Mesh axis names must be unique"):
        Mesh(np.array(olympus.devices()).reshape(1, 1), ("x", "x"))
    with pytest.raises(TypeError, match="Mesh devices must be olympus devices"):
        Mesh(np.array(["cpu"], dtype=object), ("x",))
    mm = olympus.make_mesh((1,), ("d",))
    assert mm.axis_names == ("d",) and mm.size == 1
    with pytest.raises(ValueError, match="Number of devices 1 must be >= the product"):
        olympus.make_mesh((2,), ("d",))


def test_named_sharding_spec_errors():
    m = one_mesh()
    with pytest.raises(ValueError, match=r"Resource axis: z of PartitionSpec\('z',\) is not "
                                         r"found in mesh: \('x', 'y'\)"):
        NamedSharding(m, P("z"))
    with pytest.raises(ValueError, match="duplicate entries for `x`"):
        NamedSharding(m, P("x", "x"))
    with pytest.raises(ValueError, match="duplicate entries for `y`"):
        NamedSharding(m, P(("x", "y"), "y"))
    s = NamedSharding(m, P("x", "y", None))
    with pytest.raises(ValueError, match="only valid for values of rank at least 3, but was "
                                         "applied to a value of rank 2"):
        s.shard_shape((4, 4))
    with pytest.raises(ValueError, match="rank at least 3"):
        olympus.device_put(jnp.ones((4, 4)), s)


def test_named_sharding_equality_and_properties():
    m = one_mesh()
    a, b = NamedSharding(m, P("x")), NamedSharding(one_mesh(), P("x"))
    assert a == b and hash(a) == hash(b) and a != NamedSharding(m, P("y"))
    assert a == NamedSharding(m, P("x", None))          # trailing Nones lay out alike
    assert a.mesh is m and a.spec == P("x") and a.is_fully_replicated
    assert a.device_set == a.addressable_devices == {olympus.devices()[0]}
    assert a != SingleDeviceSharding(olympus.devices()[0])
    assert repr(a) == "NamedSharding(mesh=Mesh('x': 1, 'y': 1), spec=PartitionSpec('x',))"


def test_single_device_mesh_put_and_jit():
    s = NamedSharding(one_mesh(), P("x"))
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    a = olympus.device_put(x, s)
    assert a.sharding == s and a.device == olympus.devices()[0] and a.is_fully_replicated
    (sh,) = a.addressable_shards
    assert sh.index == (slice(0, 3), slice(None)) and sh.replica_id == 0
    np.testing.assert_array_equal(np.asarray(sh.data), x)
    r = olympus.jit(lambda u: u * 2 + 1)(a)
    assert r.sharding == s
    np.testing.assert_array_equal(np.asarray(r), x * 2 + 1)


def test_ordinary_arrays_keep_single_device_sharding():
    x = jnp.arange(3.0)
    assert x.sharding == SingleDeviceSharding(olympus.devices()[0]) and x._shards is None
    assert [s.index for s in x.addressable_shards] == [(slice(None),)]
    assert x.is_fully_replicated


# ---------------------------------------------------------------- layouts on 8 devices

def test_documented_layouts_of_a_2x4_mesh():
    out = run("""
    x = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)
    for spec in [P('x', 'y'), P('x'), P(None, 'y'), P(('x', 'y')), P()]:
        s = NamedSharding(mesh, spec)
        a = olympus.device_put(x, s)
        shards = a.addressable_shards
        ok = all(np.array_equal(np.asarray(sh.data), x[sh.index]) and
                 sh.data.device == sh.device and sh.data.committed for sh in shards)
        print(json.dumps({
            "spec": repr(spec), "shard_shape": list(s.shard_shape(x.shape)),
            "map": {str(d.id): sl(i) for d, i in s.devices_indices_map(x.shape).items()},
            "replicas": [sh.replica_id for sh in shards],
            "devices": [sh.device.id for sh in shards], "values_ok": ok,
            "global_ok": bool(np.array_equal(np.asarray(a), x)),
            "sharding_ok": a.sharding == s, "replicated": a.is_fully_replicated,
            "devs": sorted(d.id for d in a.devices())}))
    """)
    by = {o["spec"]: o for o in out}
    for o in out:
        assert o["values_ok"] and o["global_ok"] and o["sharding_ok"], o["spec"]
        assert o["devices"] == list(range(8)) and o["devs"] == list(range(8))
    xy = by["PartitionSpec('x', 'y')"]
    assert xy["shard_shape"] == [4, 2] and xy["replicas"] == [0] * 8
    assert xy["map"]["0"] == [[0, 4], [0, 2]] and xy["map"]["1"] == [[0, 4], [2, 4]]
    assert xy["map"]["5"] == [[4, 8], [2, 4]] and xy["map"]["7"] == [[4, 8], [6, 8]]
    x_ = by["PartitionSpec('x',)"]
    assert x_["shard_shape"] == [4, 8] and x_["replicas"] == [0, 1, 2, 3] * 2
    assert x_["map"]["3"] == [[0, 4], [None, None]] and x_["map"]["4"] == [[4, 8], [None, None]]
    y_ = by["PartitionSpec(None, 'y')"]
    assert y_["shard_shape"] == [8, 2] and y_["replicas"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert y_["map"]["6"] == [[None, None], [4, 6]]
    both = by["PartitionSpec(('x', 'y'),)"]
    assert both["shard_shape"] == [1, 8] and both["replicas"] == [0] * 8
    assert [both["map"][str(i)][0] for i in range(8)] == [[i, i + 1] for i in range(8)]
    rep = by["PartitionSpec()"]
    assert rep["shard_shape"] == [8, 8] and rep["replicated"] and rep["replicas"] == list(range(8))
    assert not xy["replicated"]


def test_errors_and_pytrees_and_constructors():
    out = run("""
    s = NamedSharding(mesh, P('x', 'y'))
    try:
        olympus.device_put(np.ones((6, 8)), NamedSharding(mesh, P('y')))
    except ValueError as e:
        print(json.dumps(str(e)))
    try:
        NamedSharding(mesh, P('y')).shard_shape((6, 8))
    except ValueError as e:
        print(json.dumps(str(e)))
    tree = {"a": np.ones((4, 8)), "b": (np.zeros((2, 4)), 3.0)}
    t = olympus.device_put(tree, NamedSharding(mesh, P()))
    print(json.dumps([t["a"].sharding.spec == P(), t["b"][0].is_fully_replicated,
                      t["b"][1].shape == ()]))
    t2 = olympus.device_put(tree, {"a": s, "b": (NamedSharding(mesh, P(None, 'y')),
                                                 olympus.devices()[3])})
    print(json.dumps([t2["a"].sharding == s, t2["b"][0].sharding.spec == P(None, 'y'),
                      t2["b"][1].device.id, t2["b"][1]._shards is None]))
    try:
        olympus.device_put(tree, {"a": s})
    except ValueError as e:
        print(json.dumps(str(e)))
    x = np.arange(32.0).reshape(4, 8)
    calls = []
    def cb(idx):
        calls.append(sl(idx))
        return x[idx]
    c = olympus.make_array_from_callback((4, 8), NamedSharding(mesh, P('x')), cb)
    print(json.dumps([np.array_equal(np.asarray(c), x), len(calls),
                      [sh.data.device.id for sh in c.addressable_shards],
                      all(np.array_equal(np.asarray(sh.data), x[sh.index])
                          for sh in c.addressable_shards)]))
    arrs = [olympus.device_put(x[i], d) for d, i in s.devices_indices_map(x.shape).items()]
    m = olympus.make_array_from_single_device_arrays(x.shape, s, arrs[::-1])
    print(json.dumps([np.array_equal(np.asarray(m), x), m.sharding == s]))
    try:
        olympus.make_array_from_single_device_arrays(x.shape, s, arrs[:7])
    except ValueError as e:
        print(json.dumps(str(e)))
    back = olympus.device_put(olympus.device_put(x, s), olympus.devices()[2])
    print(json.dumps([back._shards is None, back.device.id, np.array_equal(np.asarray(back), x)]))
    try:
        olympus.device_put(x, s).device
    except ValueError as e:
        print(json.dumps(str(e)))
    """)
    assert "implies that the global size of its dimension 0 should be divisible by 4, but it " \
           "is equal to 6 (full shape: (6, 8))" in out[0]
    assert "array axis 0 is partitioned 4 times, but the dimension size is 6" in out[1]
    assert out[2] == [True, True, True]
    assert out[3] == [True, True, 3, True]
    assert "do not match the structure" in out[4]
    assert out[5] == [True, 2, list(range(8)), True]   # one call per distinct block
    assert out[6] == [True, True]
    assert "the arrays are on devices [0, 1, 2, 3, 4, 5, 6]" in out[7]
    assert out[8] == [True, 2, True]
    assert "Please use `.devices()`" in out[9]


def test_visualize_array_sharding_text():
    out = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent("""
        olympus.debug.visualize_array_sharding(
            olympus.device_put(np.ones((4, 8)), NamedSharding(mesh, P('x', 'y'))))
        olympus.debug.visualize_array_sharding(
            olympus.device_put(np.ones(8), NamedSharding(mesh, P('y'))))
        """)], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                 OLYMPUS_NUM_CPU_DEVICES="8"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "CPU 0" in lines[1] and "CPU 3" in lines[1] and "CPU 7" in lines[3]
    assert lines[1].count("|") == 5 and len(lines) == 5 + 3
    assert "CPU 0,4" in lines[6] and "CPU 3,7" in lines[6]


# ---------------------------------------------------------------- jit over sharded arrays

def test_jit_runs_elementwise_programs_per_shard():
    out = run("""
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    inner = olympus.jit(lambda u: u * 2)
    f = olympus.jit(lambda u, v, k: jnp.where(u > 0, jnp.sin(u) * v, k) + inner(v).astype(
        jnp.float32))
    ref = np.where(x > 0, np.sin(x) * (x + 1), 0.5) + (x + 1) * 2
    for spec in [P('x', 'y'), P('x'), P(None, 'y'), P(('x', 'y'))]:
        s = NamedSharding(mesh, spec)
        a, b = olympus.device_put(x, s), olympus.device_put(x + 1, s)
        r = f(a, b, 0.5)
        print(json.dumps({
            "sharding": r.sharding == s, "global": bool(np.allclose(np.asarray(r), ref, atol=1e-5)),
            "shards": [[sh.device.id, sh.data.device.id, sh.data.committed,
                        bool(np.allclose(np.asarray(sh.data), ref[sh.index], atol=1e-5)),
                        list(sh.data.shape)] for sh in r.addressable_shards]}))
    print(json.dumps([f._trace_count, f._cache_size()]))
    big = np.arange(8 * 262144, dtype=np.float32).reshape(8, 262144)   # 1 MiB shards: queued
    s = NamedSharding(mesh, P(('x', 'y')))
    g = olympus.jit(lambda u: u * 0.5 + 1)
    r = g(olympus.device_put(big, s))
    print(json.dumps([r.sharding == s, bool(np.array_equal(np.asarray(r), big * 0.5 + 1)),
                      [sh.data.device.id for sh in r.addressable_shards],
                      all(np.array_equal(np.asarray(sh.data), (big * 0.5 + 1)[sh.index])
                          for sh in r.addressable_shards)]))
    c = olympus.jit(lambda u, k: k * 2)(olympus.device_put(x, s), jnp.float32(3))
    print(json.dumps([float(c), c.sharding.spec == P(), sorted(d.id for d in c.devices())]))
    """)
    for o in out[:4]:
        assert o["sharding"] and o["global"]
        assert [sh[0] for sh in o["shards"]] == list(range(8))
        assert all(sh[0] == sh[1] and sh[2] and sh[3] for sh in o["shards"])
    assert out[0]["shards"][0][4] == [4, 2] and out[3]["shards"][0][4] == [1, 8]
    assert out[4] == [1, 1]                  # one trace for all layouts of one shape
    assert out[5] == [True, True, list(range(8)), True]
    assert out[6] == [6.0, True, list(range(8))]


def test_jit_falls_back_to_global_values():
    out = run("""
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    a = olympus.device_put(x, NamedSharding(mesh, P('x', 'y')))
    b = olympus.device_put(x, NamedSharding(mesh, P('x')))
    res = []
    for name, fn, args, ref in [
            ("sum", lambda u: u.sum(), (a,), x.sum()),
            ("transpose", lambda u: u.T + 1, (a,), x.T + 1),
            ("mixed shardings", lambda u, v: u + v, (a, b), x + x),
            ("plain operand", lambda u, v: u * v, (a, jnp.asarray(x)), x * x),
            ("closed-over array", lambda u: u + jnp.asarray(x), (a,), x + x)]:
        r = olympus.jit(fn)(*args)
        res.append([name, type(r.sharding).__name__, bool(np.allclose(np.asarray(r), ref))])
    print(json.dumps(res))
    e = a + 1                                           # eager ops see the global value
    print(json.dumps([type(e.sharding).__name__, bool(np.array_equal(np.asarray(e), x + 1)),
                      float(jnp.sum(a)), float(a[7, 7])]))
    """)
    for name, kind, ok in out[0]:
        assert kind == "SingleDeviceSharding" and ok, name
    assert out[1] == [True and "SingleDeviceSharding", True, float(np.arange(64).sum()), 63.0]


def test_jit_in_and_out_shardings():
    out = run("""
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    s, r = NamedSharding(mesh, P('x', 'y')), NamedSharding(mesh, P(None, 'y'))
    f = olympus.jit(lambda u, v: u * v, in_shardings=(s, None), out_shardings=r)
    o = f(x, 2.0)
    print(json.dumps([o.sharding == r, bool(np.array_equal(np.asarray(o), x * 2)),
                      [list(sh.data.shape) for sh in o.addressable_shards][:2]]))
    g = olympus.jit(lambda t: {"a": t["a"] + 1, "b": t["b"].sum()}, in_shardings=s,
                    out_shardings={"a": s, "b": NamedSharding(mesh, P())})
    o = g({"a": x, "b": x})
    print(json.dumps([o["a"].sharding == s, o["b"].is_fully_replicated, float(o["b"]),
                      g._cache_size()]))
    try:
        f(olympus.device_put(x, r), 2.0)
    except ValueError as e:
        print(json.dumps(str(e)))
    try:
        olympus.jit(lambda u, v: u, in_shardings=(s,))(x, x)
    except ValueError as e:
        print(json.dumps(str(e)))
    """)
    assert out[0] == [True, True, [[4, 2], [4, 2]]]
    assert out[1] == [True, True, float(np.arange(32).sum()), 1]
    assert "Sharding passed to jit does not match the sharding on the respective arg" in out[2]
    assert "1 shardings for 2 positional arguments" in out[3]

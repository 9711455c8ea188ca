"""shard_map over a Mesh of 8 CPU devices (each case in a subprocess: the
device count is fixed at first use): JAX's documented examples against NumPy
(the blocked matmul with psum over 'y', all_gather, a ppermute ring,
axis_index), the shardings of the results, jit / grad / vmap compositions,
callbacks once per device, JAX's errors; and pmap results sharded over their
devices (PmapSharding)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import numpy as np, olympus, olympus.numpy as jnp
from olympus import lax
from olympus.sharding import Mesh, NamedSharding, PartitionSpec as P, PmapSharding
from olympus.experimental.shard_map import shard_map
devs = olympus.devices()
mesh = Mesh(np.array(devs).reshape(4, 2), ('x', 'y'))
mesh1 = Mesh(np.array(devs), ('i',))
a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 64
b = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) / 32
def close(u, v):
    np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-5)
def raises(exc, words, fn, *args):
    try:
        fn(*args)
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return str(e)
    raise AssertionError(f"no {exc.__name__}")
"""


def run(body):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="8")
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=180, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_blocked_matmul_psum_over_y():
    out = run("""
    def matmul_basic(a_block, b_block):
        assert a_block.shape == (2, 8) and b_block.shape == (8, 4)
        return lax.psum(jnp.dot(a_block, b_block), 'y')
    f = shard_map(matmul_basic, mesh=mesh, in_specs=(P('x', 'y'), P('y', None)),
                  out_specs=P('x', None))
    c = f(a, b)
    close(c, a @ b)
    assert c.sharding == NamedSharding(mesh, P('x', None)), c.sharding
    shards = c.addressable_shards
    assert [s.device for s in shards] == devs
    for s in shards:   # row block x on both devices of that row of the mesh
        assert s.data.shape == (2, 4) and s.data.devices() == {s.device}
        close(s.data, (a @ b)[s.index])
    assert [s.replica_id for s in shards] == [0, 1] * 4
    # the reduce-scatter variant: the result split over both axes
    g = shard_map(lambda x, y: lax.psum_scatter(jnp.dot(x, y), 'y', scatter_dimension=1,
                                                tiled=True),
                  mesh=mesh, in_specs=(P('x', 'y'), P('y', None)), out_specs=P('x', 'y'))
    d = g(a, b)
    close(d, a @ b)
    assert d.addressable_shards[1].data.shape == (2, 2)
    close(d.addressable_shards[1].data, (a @ b)[0:2, 2:4])
    # the newer spelling, as a decorator
    @olympus.shard_map(mesh=mesh, in_specs=(P('x', 'y'), P('y', None)), out_specs=P('x', None))
    def mm(x, y):
        return lax.psum(x @ y, 'y')
    close(mm(a, b), a @ b)
    print("ok")
    """)
    assert "ok" in out


def test_all_gather_ppermute_ring_axis_index():
    run("""
    x = np.arange(32.0, dtype=np.float32)
    g = shard_map(lambda v: lax.all_gather(v, 'i', tiled=True), mesh1, in_specs=P('i'),
                  out_specs=P())
    r = g(x)
    close(r, x)
    assert r.sharding == NamedSharding(mesh1, P()) and r.sharding.is_fully_replicated
    assert all(s.data.shape == (32,) for s in r.addressable_shards)
    # untiled all_gather over one axis of a 2-d mesh: replicated along 'x' only
    h = shard_map(lambda v: lax.all_gather(v, 'x'), mesh, in_specs=P(('x', 'y')),
                  out_specs=P(None, 'y'))
    blocks = x.reshape(4, 2, 4)           # [x, y, block]
    close(h(x), blocks.transpose(0, 1, 2).reshape(4, 8))
    # a ring: every block moves one step along 'i'
    perm = [(k, (k + 1) % 8) for k in range(8)]
    ring = shard_map(lambda v: lax.ppermute(v, 'i', perm), mesh1, in_specs=P('i'),
                     out_specs=P('i'))
    close(ring(x), np.roll(x.reshape(8, 4), 1, axis=0).reshape(-1))
    # a ring over 'y' only, inside each row of the 4x2 mesh
    ry = shard_map(lambda v: lax.ppermute(v, 'y', [(0, 1), (1, 0)]), mesh,
                   in_specs=P(('x', 'y')), out_specs=P(('x', 'y')))
    close(ry(x), x.reshape(4, 2, 4)[:, ::-1].reshape(-1))
    # axis_index: each device's coordinates
    idx = shard_map(lambda v: jnp.stack([lax.axis_index('x'), lax.axis_index('y')])[None],
                    mesh, in_specs=P(), out_specs=P(('x', 'y')))
    close(idx(np.float32(0)), [[i, j] for i in range(4) for j in range(2)])
    # psum over both axes, pmax over a subset
    s = shard_map(lambda v: lax.psum(v, ('x', 'y')), mesh, in_specs=P(('x', 'y')),
                  out_specs=P())
    close(s(x), x.reshape(8, 4).sum(0))
    m = shard_map(lambda v: lax.pmax(v, 'x'), mesh, in_specs=P('x', 'y'), out_specs=P(None, 'y'))
    close(m(a), a.reshape(4, 2, 2, 8).max(0).reshape(2, 16))
    print("ok")
    """)


def test_sharded_inputs_layouts_and_pytrees():
    run("""
    xs = olympus.device_put(a, NamedSharding(mesh, P('x', 'y')))
    f = shard_map(lambda v: v * 2, mesh, in_specs=P('x', 'y'), out_specs=P('x', 'y'))
    r = f(xs)
    close(r, a * 2)
    assert r.sharding == xs.sharding
    # another input sharding than the spec: laid out again, same values
    ys = olympus.device_put(a, NamedSharding(mesh, P('y', 'x')))
    close(f(ys), a * 2)
    # the leading layout over the whole mesh: blocks are views of the input buffer
    t = shard_map(lambda v: v + 1, mesh, in_specs=P(('x', 'y')), out_specs=P(('x', 'y')))
    out = t(a)
    close(out, a + 1)
    offs = [np.asarray(s.data).ctypes.data - np.asarray(out).ctypes.data
            for s in out.addressable_shards]
    assert offs == [k * 16 * 4 for k in range(8)], offs
    # replicated inputs (P()) and unnamed mesh axes
    rep = shard_map(lambda v, w: v + w.sum(), mesh, in_specs=(P('x'), P()), out_specs=P('x'))
    close(rep(a, b), a + b.sum())
    # pytrees: a dict of arrays and a spec prefix; tuple outputs with one spec
    def fn(d, z):
        return d['u'] * z, (lax.psum(d['w'].sum(), ('x', 'y')), d['u'])
    g = shard_map(fn, mesh, in_specs=({'u': P('x'), 'w': P(None, 'y')}, P()),
                  out_specs=(P('x'), (P(), P('x'))))
    o1, (o2, o3) = g({'u': a, 'w': b[:, :2].T}, np.float32(3))
    close(o1, a * 3)
    close(o2, b[:, :2].sum() * 4)   # each of the 4 rows holds the whole of w
    close(o3, a)
    # 1-member mesh and a scalar in / out
    one = Mesh(np.array(devs[:1]), ('i',))
    close(shard_map(lambda v: v + 1, one, in_specs=P(), out_specs=P())(np.float32(2)), 3)
    print("ok")
    """)


def test_jit_grad_and_vmap_compose():
    run("""
    f = shard_map(lambda x, y: lax.psum(x @ y, 'y'), mesh,
                  in_specs=(P('x', 'y'), P('y', None)), out_specs=P('x', None))
    jf = olympus.jit(f)
    close(jf(a, b), a @ b)
    close(jf(a + 1, b), (a + 1) @ b)
    assert jf._cache_size() == 1
    # jit inside the body
    k = shard_map(olympus.jit(lambda v: lax.psum(jnp.sin(v), 'i')), mesh1, in_specs=P('i'),
                  out_specs=P())
    close(k(a), np.sin(a).reshape(8, 1, 16).sum(0))
    # grad of a loss summed with psum: the replicated w gets every block's gradient
    def loss(w, x):
        per = shard_map(lambda w_, x_: lax.psum(jnp.sum(jnp.tanh(x_ @ w_)), ('x', 'y')),
                        mesh, in_specs=(P(), P(('x', 'y'))), out_specs=P())
        return per(w, x)
    w = b[:, :1]
    gw = olympus.grad(loss)(w, a)
    want = a.T @ (1 - np.tanh(a @ w) ** 2)
    close(gw, want)
    close(olympus.jit(olympus.grad(loss))(w, a), want)
    gx = olympus.grad(loss, argnums=1)(w, a)
    close(gx, (1 - np.tanh(a @ w) ** 2) @ w.T)
    # vmap over a shard_map'ed function
    v = olympus.vmap(shard_map(lambda u: lax.psum(u, 'i'), mesh1, in_specs=P('i'),
                               out_specs=P()))
    batch = np.stack([a, 2 * a])
    close(v(batch), np.stack([a.reshape(8, 1, 16).sum(0), 2 * a.reshape(8, 1, 16).sum(0)]))
    print("ok")
    """)


def test_callbacks_run_once_per_device():
    run("""
    from olympus.experimental import io_callback, callback_context
    seen = []
    def host(v):
        c = callback_context()
        seen.append((c.device, dict(c.axis_index), np.asarray(v).copy()))
        return v
    def body(v):
        return io_callback(host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v * 1, ordered=True)
    f = shard_map(body, mesh, in_specs=P(('x', 'y')), out_specs=P(('x', 'y')))
    x = np.arange(16.0, dtype=np.float32)
    close(f(x), x)
    assert len(seen) == 8, len(seen)
    assert sorted(d.id for d, _, _ in seen) == list(range(8))
    for d, axes, v in seen:   # each device got its own block, knows its mesh coordinates
        close(v, x[2 * d.id:2 * d.id + 2])
        assert axes == {'x': d.id // 2, 'y': d.id % 2}, axes
    seen.clear()
    pure = shard_map(lambda v: olympus.pure_callback(
        host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v, vmap_method="sequential") + 1,
        mesh, in_specs=P(('x', 'y')), out_specs=P(('x', 'y')))
    close(olympus.jit(pure)(x), x + 1)
    assert sorted(d.id for d, _, _ in seen) == list(range(8))
    assert all(axes == {'x': d.id // 2, 'y': d.id % 2} for d, axes, _ in seen), seen
    # ordered effects stay in program order on each device
    order = []
    def tag(k):
        order.append((callback_context().device.id, int(k)))
    def two(v):
        io_callback(tag, None, jnp.int32(0), ordered=True)
        io_callback(tag, None, jnp.int32(1), ordered=True)
        return v
    shard_map(two, mesh, in_specs=P(('x', 'y')), out_specs=P(('x', 'y')))(x)
    for d in range(8):
        assert [k for dd, k in order if dd == d] == [0, 1], order
    print("ok")
    """)


def test_errors():
    run("""
    f = lambda v: v
    m = raises(ValueError, ["not evenly divisible", "mesh axis 'x' (of size 4)",
                            "does not evenly divide 6"],
               shard_map(f, mesh, in_specs=P('x'), out_specs=P('x')), np.zeros(6))
    raises(ValueError, ["shard_map in_specs argument must refer to an axis marked as manual",
                        "refers to 'z'"],
           shard_map(f, mesh, in_specs=P('z'), out_specs=P('x')), np.zeros(8))
    raises(ValueError, ["out_specs", "refers to 'q'"],
           shard_map(f, mesh, in_specs=P('x'), out_specs=P('q')), np.zeros(8))
    raises(TypeError, ["in_specs", "None", "P()"],
           shard_map(f, mesh, in_specs=None, out_specs=P()), np.zeros(8))
    raises(TypeError, ["in_specs", "PartitionSpec"],
           shard_map(f, mesh, in_specs=('x',), out_specs=P()), np.zeros(8))
    raises(ValueError, ["shard_map in_specs", "mismatch"],
           shard_map(lambda u, v: u, mesh, in_specs=(P('x'),), out_specs=P()), np.zeros(8),
           np.zeros(8))
    raises(ValueError, ["in_specs entry which is too long", "rank 1", "(and 1 < 2)"],
           shard_map(f, mesh, in_specs=P('x', 'y'), out_specs=P('x')), np.zeros(8))
    raises(ValueError, ["out_specs entry which is too long", "rank 0 outputs"],
           shard_map(lambda v: v.sum(), mesh, in_specs=P('x'), out_specs=P('x')), np.zeros(8))
    # an output that varies along 'y' promised replicated there
    g = shard_map(lambda v: v, mesh, in_specs=P(('x', 'y')), out_specs=P('x'))
    raises(ValueError, ["out_specs", "replicated across mesh axis 'y'", "check_rep=False"],
           g, np.arange(8.0))
    # check_rep=False trusts the promise: coordinate 0 along 'y'
    g = shard_map(lambda v: v, mesh, in_specs=P(('x', 'y')), out_specs=P('x'),
                  check_rep=False)
    close(g(np.arange(8.0, dtype=np.float32)), [0, 2, 4, 6])
    raises(TypeError, ["callable"], shard_map, 3, mesh, P(), P())
    raises(TypeError, ["Mesh"], shard_map, f, "mesh", P(), P())
    raises(NameError, ["unbound axis name: z"],
           shard_map(lambda v: lax.psum(v, 'z'), mesh, in_specs=P('x'), out_specs=P('x')),
           np.zeros(8))
    raises(ValueError, ["needs a mesh"], olympus.shard_map(f, in_specs=P(), out_specs=P()),
           np.zeros(2))
    with mesh:   # the context mesh
        close(olympus.shard_map(lambda v: v + 1, in_specs=P('x'), out_specs=P('x'))(
            np.zeros(4, np.float32)), np.ones(4))
    print("ok")
    """)


def test_pmap_results_are_sharded_over_their_devices():
    run("""
    x = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    p = olympus.pmap(lambda v: lax.psum(v, 'i') + v, 'i', devices=devs[2:6])
    y = p(x)
    want = x.sum(0) + x
    close(y, want)
    s = y.sharding
    assert isinstance(s, PmapSharding) and s == PmapSharding(devs[2:6])
    assert list(s.devices) == devs[2:6] and s.sharded_dim == 0
    assert s.shard_shape(y.shape) == (6,)
    assert s.devices_indices_map(y.shape)[devs[3]] == (1, slice(None))
    assert y.devices() == set(devs[2:6]) and not y.is_fully_replicated
    assert p(x).sharding == s   # again: the cached call lays its results out the same way
    base = np.asarray(y).ctypes.data
    for k, sh in enumerate(y.addressable_shards):
        assert sh.device == devs[2 + k] and sh.data.shape == (6,)
        assert sh.data.devices() == {devs[2 + k]}
        close(sh.data, want[k])
        assert np.asarray(sh.data).ctypes.data == base + k * 24   # views, no copy
    # fed back into pmap, to jit, to NumPy and to device_put
    z = olympus.pmap(lambda v: v * 2, 'i', devices=devs[2:6])(y)
    close(z, 2 * want)
    assert olympus.numpy.asarray(y) is y
    close(olympus.jit(lambda v: v + 1)(y), want + 1)
    close(np.asarray(y) + 0, want)
    r = olympus.device_put(y, NamedSharding(Mesh(np.array(devs[:4]), ('a',)), P('a')))
    close(r, want)
    q = olympus.device_put(x, PmapSharding.default(x.shape))
    assert q.sharding == PmapSharding(devs[:4]) and q.addressable_shards[3].data.shape == (6,)
    # out_axes other than 0, and under jit, stay plain arrays with the same values
    close(olympus.pmap(lambda v: v, 'i', out_axes=1)(x), x.T)
    close(olympus.jit(olympus.pmap(lambda v: v + 1, 'i'))(x), x + 1)
    raises(ValueError, ["dimension 0 has size 4", "(3, 6)"], PmapSharding(devs[:4]).shard_shape,
           (3, 6))
    print("ok")
    """)

"""olympus.pmap on 4 CPU devices (each case in a subprocess: the device count
is fixed at first use): every collective against NumPy, pmap under jit, vmap,
grad and control flow, callbacks once per device in per-device order, a
failing callback in one member surfacing at the call site, and JAX's errors."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import numpy as np, olympus, olympus.numpy as jnp
from olympus import lax
x = np.arange(24.0, dtype=np.float32).reshape(4, 6)
def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
"""


def run(body):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="4")
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=120, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_every_collective_matches_numpy():
    run("""
    p = lambda f: olympus.pmap(f, axis_name='i')
    close(p(lambda v: lax.psum(v, 'i'))(x), np.broadcast_to(x.sum(0), x.shape))
    close(p(lambda v: lax.pmean(v, 'i'))(x), np.broadcast_to(x.mean(0), x.shape))
    close(p(lambda v: lax.pmax(v, 'i'))(x), np.broadcast_to(x.max(0), x.shape))
    close(p(lambda v: lax.pmin(v, 'i'))(x), np.broadcast_to(x.min(0), x.shape))
    close(p(lambda v: lax.all_gather(v, 'i'))(x), np.broadcast_to(x, (4, 4, 6)))
    close(p(lambda v: lax.all_gather(v, 'i', tiled=True))(x),
          np.broadcast_to(x.reshape(-1), (4, 24)))
    y = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    close(p(lambda v: lax.psum_scatter(v, 'i', tiled=True))(y), y.sum(0).reshape(4, 2))
    close(p(lambda v: lax.ppermute(v, 'i', [(k, (k + 1) % 4) for k in range(4)]))(x),
          np.roll(x, 1, axis=0))
    z = np.arange(32.0, dtype=np.float32).reshape(4, 4, 2)
    close(p(lambda v: lax.all_to_all(v, 'i', 0, 0))(z), z.transpose(1, 0, 2))
    close(p(lambda v: lax.axis_index('i'))(x), np.arange(4))
    i32 = np.arange(8, dtype=np.int32).reshape(4, 2)
    close(p(lambda v: lax.psum(v, 'i'))(i32), np.broadcast_to(i32.sum(0), i32.shape))
    print("ok")
    """)


def test_pmap_composes_with_jit_vmap_grad_and_control_flow():
    run("""
    f = olympus.pmap(lambda v: lax.psum(v * v, 'i'), 'i')
    want = np.broadcast_to((x * x).sum(0), x.shape)
    close(olympus.jit(f)(x), want)
    close(olympus.pmap(olympus.jit(lambda v: lax.psum(v * v, 'i')), 'i')(x), want)
    xs = np.stack([x, x + 1])
    close(olympus.vmap(f)(xs), np.stack([np.broadcast_to((a * a).sum(0), x.shape) for a in xs]))
    # vmap inside pmap, collectives over both names
    g = olympus.pmap(olympus.vmap(lambda v: lax.psum(v, ('i', 'j')), axis_name='j'), 'i')
    close(g(x), np.full(x.shape, x.sum()))
    loss = lambda v: olympus.pmap(lambda u: lax.psum(u * u, 'i'), 'i')(v).sum()
    close(olympus.grad(loss)(x), 2 * 4 * 6 * x / 6)
    body = lambda v: lax.fori_loop(0, 3, lambda k, c: c + lax.psum(v, 'i'), v)
    close(olympus.pmap(body, 'i')(x), x + 3 * x.sum(0))
    cnd = lambda v: lax.cond(v[0] > -1, lambda u: lax.pmax(u, 'i'), lambda u: u, v)
    close(olympus.pmap(cnd, 'i')(x), np.broadcast_to(x.max(0), x.shape))
    sc = lambda v: lax.scan(lambda c, r: (c + lax.psum(r, 'i'), c), 0.0, v)[0]
    close(olympus.pmap(sc, 'i')(x), np.full(4, x.sum()))
    # in_axes / out_axes / static args
    h = olympus.pmap(lambda a, b: a + b, 'i', in_axes=(1, None), out_axes=1)
    close(h(x.T, np.float32(1)), x.T + 1)
    k = olympus.pmap(lambda a, n: a * n, 'i', static_broadcasted_argnums=1)
    close(k(x, 3), x * 3)
    close(olympus.pmap(lambda a: lax.psum(a, 'i'), 'i', out_axes=None)(x), x.sum(0))
    print("ok")
    """)


def test_callbacks_run_once_per_device_in_order():
    out = run("""
    import collections, threading
    seen = collections.defaultdict(list)
    lock = threading.Lock()
    def host(v):
        with lock:
            seen[int(v[0]) // 6].append(float(v[0]))
        return v
    def f(v):
        for k in range(3):
            olympus.experimental.io_callback(host, olympus.ShapeDtypeStruct(v.shape, v.dtype),
                                             v + k, ordered=True)
        return v
    olympus.pmap(f, 'i')(x)
    olympus.effects_barrier()
    assert sorted(seen) == [0, 1, 2, 3], seen
    for m in range(4):
        assert seen[m] == [6 * m, 6 * m + 1, 6 * m + 2], seen
    print("ok")
    """)
    assert "ok" in out


def test_a_failing_callback_in_one_member_raises_at_the_call_site():
    run("""
    def host(v):
        if v[0] == 12:
            raise ZeroDivisionError("member 2 fails")
        return v
    def f(v):
        y = olympus.pure_callback(host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
        return lax.psum(y, 'i')
    g = olympus.pmap(f, 'i')
    for _ in range(3):
        try:
            g(x)
        except olympus.CallbackError as e:
            assert isinstance(e.__cause__, ZeroDivisionError), repr(e.__cause__)
        else:
            raise AssertionError("no error")
    close(olympus.pmap(lambda v: lax.psum(v, 'i'), 'i')(x), np.broadcast_to(x.sum(0), x.shape))
    print("ok")
    """)


def test_errors():
    run("""
    import pytest
    with pytest.raises(ValueError, match="requires 5 logical devices, but only 4"):
        olympus.pmap(lambda v: v)(np.zeros((5, 2)))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        olympus.pmap(lambda a, b: a + b)(np.zeros((2, 2)), np.zeros((3, 2)))
    with pytest.raises(NameError, match="unbound axis name: j"):
        olympus.pmap(lambda v: lax.psum(v, 'j'), 'i')(x)
    print("ok")
    """)


def test_grad_of_pmap_computes_the_primal_once_and_runs_effects_once():
    run("""
    c = x / 10
    calls = []
    def host(v):
        calls.append(float(v[0]))
        return np.cos(v)
    def body(v, w):
        k = olympus.pure_callback(host, olympus.ShapeDtypeStruct(w.shape, w.dtype), w)
        return lax.psum(jnp.sin(v) * k, 'i')
    loss = lambda v: olympus.pmap(body, 'i')(v, c).sum()
    want = 4 * np.cos(x) * np.cos(c)
    for step in range(1, 3):   # one call per device per step, eagerly and under jit
        close(olympus.grad(loss)(x), want)
        assert len(calls) == 4 * (2 * step - 1), calls
        close(olympus.jit(olympus.grad(loss))(x), want)
        assert len(calls) == 4 * 2 * step, calls
    assert sorted(set(calls)) == sorted(float(v) for v in c[:, 0]), calls
    # effects: an ordered io_callback and a debug callback in the body run once per
    # device under grad (they were refused before: the primal ran twice)
    ios, dbg = [], []
    def io_host(v):
        ios.append(float(v[0]))
        return v
    def body2(v, w):
        k = olympus.experimental.io_callback(io_host, olympus.ShapeDtypeStruct(w.shape, w.dtype),
                                             w, ordered=True)
        olympus.debug.callback(lambda a: dbg.append(float(a[0])), v)
        return lax.psum(v * v * k, 'i')
    f = lambda v: olympus.pmap(body2, 'i')(v, c).sum()
    val, g = olympus.value_and_grad(f)(x)
    olympus.effects_barrier()
    close(g, 2 * 4 * x * c)
    close(val, 4 * (x * x * c).sum())
    assert sorted(ios) == sorted(float(v) for v in c[:, 0]), ios
    assert sorted(dbg) == [0.0, 6.0, 12.0, 18.0], dbg
    # an io_callback on the differentiated value is JAX's error
    def body3(v):
        return olympus.experimental.io_callback(io_host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
    import pytest
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        olympus.grad(lambda v: olympus.pmap(body3, 'i')(v).sum())(x)
    # the program: one pmap forward (primal + residuals), one backward
    jx = str(olympus.make_jaxpr(olympus.grad(loss))(x))
    assert jx.count("pmap[") == 2 and jx.count("pure_callback[") == 1, jx
    # jvp and vjp agree with NumPy, and a second-order derivative works
    t = np.ones_like(x)
    p, tan = olympus.jvp(lambda v: olympus.pmap(body, 'i')(v, c), (x,), (t,))
    close(p, np.broadcast_to((np.sin(x) * np.cos(c)).sum(0), x.shape))
    close(tan, np.broadcast_to((np.cos(x) * np.cos(c)).sum(0), x.shape))
    sq = lambda v: olympus.pmap(lambda u: lax.psum(u ** 3, 'i'), 'i')(v).sum()
    close(olympus.grad(olympus.grad(lambda s: sq(x * s)))(np.float32(1.0)), 4 * 6 * (x ** 3).sum())
    print("ok")
    """)


def test_unused_pmap_outputs_are_dropped_inside_the_body():
    run("""
    calls = []
    def host(v):
        calls.append(1)
        return v
    def body(v):
        unused = olympus.pure_callback(host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
        return v * 2, unused, lax.psum(v, 'i')
    pm = olympus.pmap(body, 'i')
    f = olympus.jit(lambda v: pm(v)[0])
    close(f(x), 2 * x)
    assert calls == [], calls          # the unused pure_callback is elided, as in jit
    close(olympus.jit(lambda v: pm(v)[1])(x), x)
    assert len(calls) == 4, calls      # once per device when used
    # effects stay: an io_callback whose result nobody reads still runs
    ios = []
    def io_host(v):
        ios.append(1)
        return v
    def body2(v):
        olympus.experimental.io_callback(io_host, olympus.ShapeDtypeStruct(v.shape, v.dtype), v)
        return v + 1, v * v
    close(olympus.jit(lambda v: olympus.pmap(body2, 'i')(v)[1])(x), x * x)
    olympus.effects_barrier()
    assert len(ios) == 4, ios
    print("ok")
    """)

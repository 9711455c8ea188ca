"""olympus.experimental.callback_context(): the device, the batch element (vmap
with one call per element) and the device-group member a host call serves."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus.experimental import callback_context, io_callback
from olympus.experimental.buffer_callback import buffer_callback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F32 = olympus.ShapeDtypeStruct((), jnp.float32)


def _recording():
    seen = []

    def host(x):
        ctx = callback_context()
        seen.append((ctx.kind, ctx.batch_index, float(x)))
        return np.asarray(x * 2, np.float32)
    return seen, host


def test_outside_a_host_call_is_none():
    assert callback_context() is None


def test_jit_without_vmap_has_device_and_no_batch_index():
    seen = []

    def host(x):
        seen.append(callback_context())
        return x
    olympus.jit(lambda x: olympus.pure_callback(host, F32, x))(jnp.float32(1))
    (ctx,) = seen
    assert ctx.kind == "pure_callback" and ctx.device == olympus.devices()[0]
    assert ctx.batch_index == () and ctx.axis_index == {}
    with pytest.raises(AttributeError):
        ctx.device = None


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled"])
def test_nested_vmap_gives_each_call_its_element(method):
    seen, host = _recording()
    f = lambda x: olympus.pure_callback(host, F32, x, vmap_method=method)
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    out = olympus.jit(olympus.vmap(olympus.vmap(f)))(x)
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(6.0).reshape(2, 3))
    assert len(seen) == 6
    for kind, idx, v in seen:   # the element each call saw is the one its index names
        assert kind == "pure_callback" and len(idx) == 2
        assert v == float(np.asarray(x)[idx])
    assert sorted(idx for _, idx, _ in seen) == [(i, j) for i in range(2) for j in range(3)]


def test_vmap_over_a_non_leading_axis_and_unbatched_operands():
    seen = []

    def host(x, c):
        seen.append((callback_context().batch_index, np.asarray(x).tolist(), float(c)))
        return np.asarray(x).sum(dtype=np.float32)
    f = lambda x, c: olympus.pure_callback(host, F32, x, c, vmap_method="sequential")
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    olympus.vmap(f, in_axes=(1, None))(x, jnp.float32(7))
    assert seen == [((j,), x[:, j].tolist(), 7.0) for j in range(3)]


def test_io_and_debug_callbacks_under_vmap():
    seen, host = _recording()
    olympus.vmap(lambda x: io_callback(host, F32, x))(jnp.arange(3.0))
    assert seen == [("io_callback", (i,), float(i)) for i in range(3)]
    got = []
    olympus.vmap(lambda x: olympus.debug.callback(
        lambda v: got.append((callback_context().kind, callback_context().batch_index,
                              float(v))), x))(jnp.arange(3.0))
    olympus.effects_barrier()
    assert got == [("debug_callback", (i,), float(i)) for i in range(3)]


def test_one_call_for_the_batch_has_no_index():
    seen = []

    def host(x):
        seen.append(callback_context().batch_index)
        return np.asarray(x) * 2
    f = lambda x: olympus.pure_callback(host, F32, x, vmap_method="expand_dims")
    olympus.vmap(f)(jnp.arange(3.0))
    assert seen == [()]


def test_buffer_callback_sequential():
    seen = []

    def host(ctx, out, x):
        seen.append(callback_context().batch_index)
        np.asarray(out)[...] = np.asarray(x) + 1
    cb = buffer_callback(host, F32, vmap_method="sequential")
    out = olympus.vmap(cb)(jnp.arange(3.0))
    np.testing.assert_array_equal(np.asarray(out), [1, 2, 3])
    assert seen == [(0,), (1,), (2,)]


def test_nested_host_calls_restore_the_outer_context():
    seen = []
    inner = olympus.jit(lambda x: olympus.pure_callback(
        lambda v: (seen.append(("inner", callback_context().batch_index)), v)[1], F32, x))

    def outer(x):
        seen.append(("outer", callback_context().batch_index))
        inner(np.float32(x))
        seen.append(("outer again", callback_context().batch_index))
        return x
    olympus.vmap(lambda x: olympus.pure_callback(outer, F32, x,
                                                 vmap_method="sequential"))(jnp.arange(2.0))
    assert seen == [("outer", (0,)), ("inner", ()), ("outer again", (0,)),
                    ("outer", (1,)), ("inner", ()), ("outer again", (1,))]


def test_the_device_of_a_committed_computation():
    body = """
        import numpy as np, olympus, olympus.numpy as jnp
        from olympus.experimental import callback_context
        seen = []
        def host(x):
            seen.append(callback_context().device)
            return x
        d = olympus.devices()[1]
        x = olympus.device_put(jnp.float32(1), d)
        olympus.jit(lambda x: olympus.pure_callback(
            host, olympus.ShapeDtypeStruct((), jnp.float32), x))(x)
        print(seen == [d], seen)
    """
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("True"), r.stdout


def test_pmap_members_know_their_axis_index_and_device():
    body = """
        import numpy as np, olympus, olympus.numpy as jnp
        from olympus.experimental import callback_context, io_callback
        seen = []
        def host(x):
            c = callback_context()
            seen.append((c.kind, c.device.id, c.axis_index, c.batch_index, float(x)))
            return x
        f = olympus.pmap(lambda x: io_callback(host, olympus.ShapeDtypeStruct((), jnp.float32), x),
                         axis_name='i')
        f(jnp.arange(4.0))
        print(sorted(seen) == [("io_callback", d, {"i": d}, (), float(d)) for d in range(4)], seen)
        seen.clear()
        g = olympus.pmap(olympus.vmap(lambda x: olympus.pure_callback(
            host, olympus.ShapeDtypeStruct((), jnp.float32), x, vmap_method="sequential")),
            axis_name='i')
        g(jnp.arange(8.0).reshape(4, 2))
        print(sorted(seen) == [("pure_callback", d, {"i": d}, (b,), float(2 * d + b))
                               for d in range(4) for b in range(2)], seen)
    """
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="4")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("True") and lines[1].startswith("True"), r.stdout


def test_taps_calls_and_debug_prints_run_once_per_pmap_member():
    """host_callback taps (on each device's outfeed), host_callback.call and
    debug.print inside pmap: one call per member, each with its device."""
    body = """
        import numpy as np, olympus, olympus.numpy as jnp
        from olympus.experimental import host_callback as hcb
        taps = []
        f = olympus.pmap(lambda x: hcb.id_tap(
            lambda v, tr, device=None: taps.append((device.id, float(v))), x * 2,
            tap_with_device=True), axis_name='i')
        out = f(jnp.arange(4.0))
        hcb.barrier_wait()
        print(np.asarray(out).tolist(), sorted(taps) == [(d, 2.0 * d) for d in range(4)])
        calls = []
        def host(v):
            calls.append(float(v))
            return np.asarray(v) + 1
        g = olympus.pmap(lambda x: hcb.call(host, x, result_shape=x), axis_name='i')
        print(np.asarray(g(jnp.arange(4.0))).tolist(), sorted(calls))
        olympus.pmap(lambda x: olympus.debug.print("member {i} has {x}", x=x,
                                                   i=olympus.lax.axis_index('i')),
                     axis_name='i')(jnp.arange(4.0))
        olympus.effects_barrier()
    """
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="4")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "[0.0, 2.0, 4.0, 6.0] True", r.stdout
    assert lines[1] == "[1.0, 2.0, 3.0, 4.0] [0.0, 1.0, 2.0, 3.0]", r.stdout
    assert sorted(lines[2:]) == [f"member {d} has {float(d)}" for d in range(4)], r.stdout

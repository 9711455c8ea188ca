"""olympus.experimental.host_callback: the seed's examples (id_tap, id_print,
call, barrier_wait) under jit, vmap, jvp, grad, checkpoint and control flow;
the transforms a tap sees; the errors of call; exceptions kept for
barrier_wait; the receiver's fault cases, each in a subprocess with a timeout."""
import functools
import io
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import host_callback as hcb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Stream:
    """An output_stream that records what id_print writes."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)

    @property
    def output(self):
        hcb.barrier_wait()
        return "".join(self.parts)


def power3(x, stream):
    y = x * x
    hcb.id_print((x, y), what="x,x^2", output_stream=stream)
    return y * x


@pytest.fixture(autouse=True)
def _clean_barrier():
    hcb.barrier_wait()
    yield
    hcb.barrier_wait()


def test_id_tap_jit_simple_and_result_unused():
    seen = []

    def f(x):
        hcb.id_tap(lambda a, t: seen.append((a, t)), x * 2)  # result unused: still taps
        return x + 1

    assert float(olympus.jit(f)(3.0)) == 4.0
    hcb.barrier_wait()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0][0], 6.0)
    assert isinstance(seen[0][0], np.ndarray)
    assert seen[0][1] == ()


def test_id_tap_pytree_result_and_device():
    seen = []

    def tap(arg, transforms, *, device):
        seen.append((arg, device))

    x = jnp.arange(3.0)
    out = olympus.jit(lambda x: hcb.id_tap(tap, {"a": x, "b": (x * 2, 5)}, result=x + 1,
                                           tap_with_device=True))(x)
    np.testing.assert_allclose(out, [1, 2, 3])
    hcb.barrier_wait()
    arg, device = seen[0]
    assert sorted(arg) == ["a", "b"]
    np.testing.assert_allclose(arg["b"][0], [0, 2, 4])
    assert int(arg["b"][1]) == 5
    assert device == olympus.devices()[0]


def test_one_tap_function_sees_the_transforms_of_each_use():
    """The same tap function tapped plainly, under vmap, with a pytree and
    plainly again: each call gets its own argument structure and the
    transforms of its own use (the parsed form is cached per text, and must
    follow a change of text)."""
    seen = []

    def tap(arg, transforms):
        seen.append((olympus.tree_util.tree_map(np.shape, arg), transforms))

    f = olympus.jit(lambda x: hcb.id_tap(tap, x))
    g = olympus.jit(olympus.vmap(lambda x: hcb.id_tap(tap, x)))
    h = olympus.jit(lambda x: hcb.id_tap(tap, {"a": x, "b": (x, x)}))
    f(1.0), g(jnp.arange(3.0)), f(2.0), h(1.0), g(jnp.arange(2.0))
    hcb.barrier_wait()
    batched = (("batch", {"batch_dims": (0,)}),)
    assert seen == [((), ()), ((3,), batched), ((), ()), ({"a": (), "b": ((), ())}, ()),
                    ((2,), batched)]


def test_id_tap_kwargs_error():
    with pytest.raises(TypeError, match=r"Support for \*\*kwargs in ``id_tap`` has been removed"):
        hcb.id_tap(lambda a, t: None, 1.0, what="x")


def test_id_print_format_eager_and_jit():
    s = Stream()
    assert float(power3(3.0, s)) == 27.0
    assert float(olympus.jit(lambda x: power3(x, s))(3.0)) == 27.0
    assert s.output == "what: x,x^2\n( 3. 9. )\n" * 2


def test_id_print_with_device_and_kwargs():
    s = Stream()
    olympus.jit(lambda x: hcb.id_print(x, tap_with_device=True, output_stream=s, b=2, a="z"))(
        jnp.arange(2))
    assert s.output == f"a: z b: 2 device: {olympus.devices()[0]}\n[0 1]\n"


def test_id_print_dict_list_threshold_and_empty_tuple():
    s = Stream()
    hcb.id_print({"b": [jnp.arange(10), 2], "a": ()}, output_stream=s, threshold=2)
    assert s.output == "{ a=(  ) b=[ [0 1 2 ... 7 8 9] 2 ] }\n"


def test_tap_under_jvp_and_grad_sees_primals():
    s = Stream()
    olympus.jvp(lambda x: power3(x, s), (3.0,), (0.1,))
    assert float(olympus.grad(lambda x: power3(x, s))(3.0)) == 27.0
    assert s.output == "what: x,x^2\n( 3. 9. )\n" * 2


def test_tap_under_vmap_reports_batch_dims():
    s = Stream()
    out = olympus.vmap(lambda x: power3(x, s))(np.array([2.0, 3.0], np.float32))
    np.testing.assert_allclose(out, [8, 27])
    assert s.output == ("transforms: [('batch', {'batch_dims': (0, 0)})] what: x,x^2\n"
                        "( [2. 3.] [4. 9.] )\n")


def test_tap_under_nested_vmap_and_unbatched_leaf():
    seen = []

    def f(x, y):
        hcb.id_tap(lambda a, t: seen.append(t), (x, y))
        return x + y

    olympus.vmap(olympus.vmap(f, in_axes=(0, None)), in_axes=(1, None))(jnp.ones((2, 3)), 1.0)
    hcb.barrier_wait()
    assert seen == [(("batch", {"batch_dims": (0, None)}), ("batch", {"batch_dims": (1, None)}))]


def test_tap_under_checkpoint_runs_again():
    s = Stream()
    olympus.grad(lambda x: power3(olympus.checkpoint(lambda z: power3(z, s))(x), s))(3.0)
    assert s.output == ("what: x,x^2\n( 3. 9. )\n"
                        "what: x,x^2\n( 27. 729. )\n"
                        "what: x,x^2\n( 3. 9. )\n")


def test_tangent_and_cotangent_taps():
    s = Stream()

    @olympus.custom_jvp
    def print_tangents(arg):
        return arg

    @print_tangents.defjvp
    def _jvp(primals, tangents):
        hcb.id_print(tangents[0], what="tangents", output_stream=s)
        return primals[0], tangents[0]

    def f(x):
        y = x * x
        print_tangents((x, y))
        return y * x

    olympus.jvp(f, (3.0,), (0.1,))
    assert s.output == "what: tangents\n( 0.1 0.6 )\n"

    s2 = Stream()

    @olympus.custom_vjp
    def print_cotangents(arg):
        return arg

    print_cotangents.defvjp(lambda a: (print_cotangents(a), None),
                            lambda _, ct: (hcb.id_print(ct, what="cotangents", output_stream=s2),))

    def g(x):
        x1, y1 = print_cotangents((x, x * x))
        return y1 * x1

    assert float(olympus.grad(g)(3.0)) == 27.0
    assert s2.output == "what: cotangents\n( 9. 3. )\n"


def test_tap_on_transposed_tangent_reports_transpose():
    seen = []

    def f(x):
        return olympus.linear_transpose(
            lambda t: hcb.id_tap(lambda a, tr: seen.append(tr), t) * 2.0, x)(x)

    f(jnp.float32(1.0))
    hcb.barrier_wait()
    assert seen == [(("transpose", {}),)]


def test_taps_in_control_flow_in_order():
    seen = []
    tap = lambda a, t: seen.append(int(a))  # noqa: E731

    def body(i, c):
        return hcb.id_tap(tap, c + i)

    olympus.jit(lambda: lax.fori_loop(0, 5, body, 0))()
    olympus.jit(lambda p: lax.cond(p, lambda: hcb.id_tap(tap, 100), lambda: 0))(True)
    olympus.jit(lambda: lax.scan(lambda c, x: (hcb.id_tap(tap, c + x), None), 0,
                                 jnp.arange(3))[0])()
    olympus.jit(lambda: lax.while_loop(lambda c: c < 3, lambda c: hcb.id_tap(tap, c + 1), 0))()
    hcb.barrier_wait()
    assert seen == [0, 1, 3, 6, 10, 100, 0, 1, 3, 1, 2, 3]


def test_call_returns_values_and_pytrees():
    def host_eig(m):
        return np.linalg.eigvals(m)

    def device_fun(m):
        return hcb.call(host_eig, m,
                        result_shape=olympus.ShapeDtypeStruct(m.shape[:-1], m.dtype))

    m = np.array([[2.0, 1.0], [1.0, 2.0]], np.float32)
    np.testing.assert_allclose(np.sort(np.asarray(olympus.jit(device_fun)(m))), [1, 3], rtol=1e-6)
    out = hcb.call(lambda a: {"s": a["x"] + 1, "t": np.float32(2)}, {"x": jnp.ones(2)},
                   result_shape={"s": jnp.ones(2), "t": 1.0})
    np.testing.assert_allclose(out["s"], [2, 2])
    assert float(out["t"]) == 2.0
    assert hcb.call(lambda a: None, (), result_shape=None) is None
    got = []
    assert hcb.call(lambda a, device: got.append(device) or 3.0, 1.0, result_shape=1.0,
                    call_with_device=True) == 3.0
    assert got == [olympus.devices()[0]]


def test_call_errors():
    with pytest.raises(ValueError, match="result_shape should be a pytree of values"):
        hcb.call(np.sin, 1.0, result_shape="string")
    with pytest.raises(ValueError, match="result_shape should be a pytree of values"):
        hcb.call(np.sin, 1.0, result_shape=np.sin)
    with pytest.raises(olympus.CallbackError) as e:
        hcb.call(lambda x: (x, x), 1.0, result_shape=1.0)
    assert isinstance(e.value.__cause__, TypeError)
    assert "should have returned a result with pytree" in str(e.value.__cause__)
    with pytest.raises(olympus.CallbackError) as e:
        hcb.call(lambda x: np.ones(3, np.float32), 1.0, result_shape=1.0)
    assert "should have returned a result with abstract values" in str(e.value.__cause__)
    with pytest.raises(NotImplementedError,
                       match="batching rules are implemented only for id_tap, not for call."):
        olympus.vmap(lambda x: hcb.call(np.sin, x, result_shape=x))(jnp.ones(3))
    with pytest.raises(NotImplementedError,
                       match="JVP rule is implemented only for id_tap, not for call."):
        olympus.jvp(lambda x: hcb.call(np.sin, x, result_shape=x), (1.0,), (1.0,))
    with pytest.raises(ValueError, match="device_index"):
        hcb.id_tap(lambda a, t: None, 1.0, device_index=99)


def test_call_exception_surfaces_at_call_site():
    def boom(x):
        raise KeyError("no key")

    with pytest.raises(olympus.CallbackError) as e:
        olympus.jit(lambda x: hcb.call(boom, x, result_shape=x))(1.0)
    assert isinstance(e.value.__cause__, KeyError)
    assert float(olympus.jit(lambda x: hcb.call(np.cos, x, result_shape=x))(0.0)) == 1.0


def test_tap_exception_kept_for_barrier_once(caplog):
    def bad(x, transforms):
        raise ValueError(f"bad tap {int(x)}")

    good = []
    f = olympus.jit(lambda x: hcb.id_tap(bad, x) + hcb.id_tap(lambda a, t: good.append(1), x))
    assert int(f(1)) == 2 and int(f(2)) == 4  # the computation does not stop
    with pytest.raises(hcb.CallbackException, match="There were exceptions during callback "
                                                     "processing. Last one was:") as e:
        hcb.barrier_wait()
    assert isinstance(e.value.__cause__, ValueError)
    assert "bad tap 2" in str(e.value)            # the last one
    assert good == [1, 1]                          # the receiver went on
    assert "host_callback function failed" in caplog.text
    hcb.barrier_wait()                             # raised once


def test_inline_flag_calls_in_caller_thread():
    seen = []
    olympus.config.update("olympus_host_callback_inline", True)
    try:
        hcb.id_tap(lambda a, t: seen.append(threading.get_ident()), 1.0)
        assert seen == [threading.get_ident()]  # before any barrier
    finally:
        olympus.config.update("olympus_host_callback_inline", False)


def test_legacy_false_uses_new_callbacks():
    seen = []
    olympus.config.update("olympus_host_callback_legacy", False)
    try:
        olympus.jit(lambda x: hcb.id_tap(lambda a, t: seen.append(t), x))(1.0)
        hcb.barrier_wait()
        assert seen == [()]
        assert float(hcb.call(lambda x: x * 2, 2.0, result_shape=1.0)) == 4.0
        with pytest.raises(NotImplementedError, match="tap_with_device"):
            hcb.id_tap(lambda a, t, device: None, 1.0, tap_with_device=True)
        pure = hcb.call(lambda x: x + 1, 2.0, result_shape=1.0,
                        callback_flavor=hcb.CallbackFlavor.PURE)
        assert float(pure) == 3.0
        olympus.vmap(lambda x: hcb.id_tap(lambda a, t: seen.append(float(a)), x,
                                          callback_flavor=hcb.CallbackFlavor.DEBUG))(
            jnp.arange(2.0))
        hcb.barrier_wait()
        assert seen == [(), 0.0, 1.0]  # DEBUG taps once per batch element
        with pytest.raises(NotImplementedError, match="DEBUG"):
            hcb.call(np.sin, 1.0, result_shape=1.0, callback_flavor=hcb.CallbackFlavor.DEBUG)
    finally:
        olympus.config.update("olympus_host_callback_legacy", True)


def test_config_flags():
    c = olympus.config
    assert c.olympus_host_callback_inline is False
    assert c.olympus_host_callback_legacy is True
    assert c.olympus_host_callback_max_queue_byte_size == int(256e6)
    c.update("olympus_host_callback_max_queue_byte_size", 1 << 16)
    assert c.olympus_host_callback_max_queue_byte_size == 1 << 16
    c.update("olympus_host_callback_max_queue_byte_size", int(256e6))
    with pytest.raises(ValueError, match="positive"):
        c.update("olympus_host_callback_max_queue_byte_size", 0)


def test_reentrant_tap_calls_olympus():
    seen = []
    inner = olympus.jit(lambda x: x * 10)

    def tap(a, t):
        seen.append(float(inner(a)))
        hcb.id_tap(lambda b, t2: seen.append(float(b)), a + 1)  # a tap from a tap

    olympus.jit(lambda x: hcb.id_tap(tap, x))(1.0)
    hcb.barrier_wait()
    hcb.barrier_wait()
    assert seen == [10.0, 2.0]


# ---------------------------------------------------------------- in subprocesses

def run_script(body, timeout=60, env=None):
    script = textwrap.dedent(body)
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.join(ROOT, "python")
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=e)


PRELUDE = """
import threading, time
import numpy as np
import olympus, olympus.numpy as jnp
from olympus import lax
from olympus.experimental import host_callback as hcb
"""


def test_exit_flushes_pending_taps():
    r = run_script(PRELUDE + """
def slow(x, t):
    time.sleep(0.002)
    print("tap", int(x), flush=True)
f = olympus.jit(lambda i: hcb.id_tap(slow, i))
for i in range(50):
    f(i)
print("main done", flush=True)
""")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert r.stdout.count("tap") == 50
    assert [int(v) for k, v in zip(lines[::2], lines[1::2]) if k == "tap"] == list(range(50))


def test_exit_with_failing_tap_is_logged_not_crashing():
    r = run_script(PRELUDE + """
def bad(x, t):
    raise RuntimeError("late failure")
olympus.jit(lambda x: hcb.id_tap(bad, x))(1.0)
""")
    assert r.returncode == 0, r.stderr
    assert "late failure" in r.stderr


def test_barrier_from_several_threads_and_slow_taps():
    r = run_script(PRELUDE + """
olympus.config.update("olympus_host_callback_max_queue_byte_size", 4096)
counts = {}
lock = threading.Lock()
def tap(x, t):
    time.sleep(0.0002)
    with lock:
        counts[int(x[0])] = counts.get(int(x[0]), 0) + 1
f = olympus.jit(lambda x, k: hcb.id_tap(tap, x + k))
def worker(k):
    for i in range(300):
        f(jnp.zeros(8), k)
        if i % 100 == 0:
            hcb.barrier_wait()
    hcb.barrier_wait()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
hcb.barrier_wait()
print(sorted(counts.items()), hcb._core.outfeed_peak_bytes(0) <= 4096 + 200)
""", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[(0, 300), (1, 300), (2, 300)] True"


def test_barrier_inside_tap_is_an_error_not_a_hang():
    r = run_script(PRELUDE + """
errs = []
def tap(x, t):
    try:
        hcb.barrier_wait()
    except Exception as e:
        errs.append(type(e).__name__ + ": " + str(e)[:60])
olympus.jit(lambda x: hcb.id_tap(tap, x) + hcb.id_tap(lambda a, t: None, x))(1.0)
hcb.barrier_wait()
print(errs)
""")
    assert r.returncode == 0, r.stderr
    assert "ValueError: barrier_wait: called from a tap function" in r.stdout


def test_soak_short():
    """The soak in short form: taps from 4 devices and 2 Python threads through
    a 64 KiB queue with a slow tap function: each delivered once, in order per
    device and thread; no deadlock at barrier or exit."""
    r = run_script(PRELUDE + """
olympus.config.update("olympus_host_callback_max_queue_byte_size", 1 << 16)
N = 4000
got = {}
lock = threading.Lock()
def tap(x, t, device):
    time.sleep(0.00002)
    with lock:
        got.setdefault((device.id, int(x[0])), []).append(int(x[1]))
def worker(thread):
    for d in range(4):
        f = olympus.jit(lambda i: hcb.id_tap(tap, jnp.stack([thread, i]), tap_with_device=True))
        for i in range(N // 4):
            f(olympus.device_put(jnp.int32(i), olympus.devices()[d]))
ts = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
hcb.barrier_wait()
ok = all(v == list(range(N // 4)) for v in got.values())
print(len(got), sum(len(v) for v in got.values()), ok)
""", timeout=120, env={"OLYMPUS_NUM_CPU_DEVICES": "4"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "8 8000 True"


def test_example_runs():
    with open(os.path.join(ROOT, "examples", "host_callback_taps.py")) as f:
        r = run_script(f.read())
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.count("what: x,x^2\n( 3. 9. )") == 2
    assert "transforms: [('batch', {'batch_dims': (0, 0)})] what: x,x^2\n( [2. 3.] [4. 9.] )" in out
    assert "fori_loop taps: [0, 1, 3, 6, 10]" in out
    assert "call: [2. 2.]" in out
    assert "CallbackException from ValueError('bad value')" in out

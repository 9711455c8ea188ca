"""Device streams as a user sees them: with olympus_async_dispatch="async" a
call returns at once and its result is a future (is_ready, block_until_ready,
reading waits); an error surfaces where the result is read, with the original
exception chained; ordered effects keep their order per device while devices
run at the same time; effects_barrier waits for queued work; work a thread
sends to a busy device waits its turn; queued work finishes at exit. Cases with
several devices or another dispatch mode run in a subprocess."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import olympus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import threading, time
import numpy as np
import olympus, olympus.numpy as jnp
from olympus.experimental import io_callback
SDS = olympus.ShapeDtypeStruct
"""


def run(body, env=None, timeout=60):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=timeout, env=e)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines(), r.stderr


def test_dispatch_mode_config():
    assert olympus.config.olympus_async_dispatch == "auto"
    with pytest.raises(ValueError, match="'auto', 'async' or 'sync', got 'later'"):
        olympus.config.update("olympus_async_dispatch", "later")
    x = olympus.jit(lambda x: x * 2)(np.float32(3))
    assert x.is_ready() and float(x) == 6.0


def test_async_results_are_futures():
    out, _ = run("""
    olympus.config.update("olympus_async_dispatch", "async")
    gate = threading.Event()
    def slow(x):
        gate.wait(10)
        return x
    f = olympus.jit(lambda x: olympus.pure_callback(slow, SDS((3,), np.float32), x) * 2)
    y = f(jnp.arange(3.0))          # returns while the callback waits
    print(y.is_ready())
    gate.set()
    print(np.asarray(y).tolist(), y.is_ready())
    z = f(jnp.ones(3)) + 1          # a future feeds the next computation
    print(z.block_until_ready() is z, z.tolist())
    """, env={"OLYMPUS_ASYNC_DISPATCH": "auto"})
    assert out == ["False", "[0.0, 2.0, 4.0] True", "True [3.0, 3.0, 3.0]"]


def test_async_error_surfaces_where_the_result_is_read():
    out, _ = run("""
    def bad(x):
        raise KeyError("boom")
    g = olympus.jit(lambda x: olympus.pure_callback(bad, SDS((2,), np.float32), x))
    y = g(jnp.ones(2))              # no error yet: it is queued
    print("returned")
    for read in (lambda: y.block_until_ready(), lambda: np.asarray(y), lambda: (y + 1).tolist()):
        try:
            read()
        except olympus.CallbackError as e:
            print(type(e.__cause__).__name__, "boom" in str(e), "failed" in str(e))
    """, env={"OLYMPUS_ASYNC_DISPATCH": "async"})
    # The first reader gets the KeyError as the cause; later readers the message.
    assert out == ["returned", "KeyError True True", "NoneType True True",
                   "NoneType True True"]


def test_async_error_without_outputs_is_raised_by_effects_barrier_once():
    out, _ = run("""
    def bad(x):
        raise ValueError("no outputs to carry me")
    f = olympus.jit(lambda x: io_callback(bad, None, x))
    f(1.0); f(2.0)
    try:
        olympus.effects_barrier()
    except olympus.CallbackError as e:
        print(type(e.__cause__).__name__, "no outputs to carry me" in str(e))
    olympus.effects_barrier()
    print("second barrier clean")
    """, env={"OLYMPUS_ASYNC_DISPATCH": "async"})
    assert out == ["ValueError True", "second barrier clean"]


def test_ordered_effects_are_ordered_per_device_and_devices_overlap():
    out, _ = run("""
    olympus.config.update("olympus_async_dispatch", "async")
    d0, d1 = olympus.devices()
    seen = {0: [], 1: []}
    dev1_ran = threading.Event()
    def on0(i):
        # device 0 waits for device 1: only concurrent devices finish quickly
        waited = dev1_ran.wait(10)
        seen[0].append((int(i), waited))
        return i
    def on1(i):
        dev1_ran.set()
        seen[1].append(int(i))
        return i
    f0 = olympus.jit(lambda i: io_callback(on0, SDS((), np.int32), i, ordered=True))
    f1 = olympus.jit(lambda i: io_callback(on1, SDS((), np.int32), i, ordered=True))
    outs = []
    for i in range(20):
        outs.append(f0(olympus.device_put(jnp.int32(i), d0)))
        outs.append(f1(olympus.device_put(jnp.int32(i), d1)))
    olympus.effects_barrier()
    print([i for i, _ in seen[0]] == list(range(20)), all(w for _, w in seen[0]))
    print(seen[1] == list(range(20)))
    print(sorted({list(o.devices())[0].id for o in outs}))
    """, env={"OLYMPUS_NUM_CPU_DEVICES": "2"})
    assert out == ["True True", "True", "[0, 1]"]


def test_a_busy_device_makes_other_threads_wait_their_turn():
    out, _ = run("""
    order = []
    gate = threading.Event()
    def first(x):
        order.append("first starts")
        gate.wait(10)
        order.append("first ends")
        return x
    def second(x):
        order.append("second")
        return x
    f = olympus.jit(lambda x: io_callback(first, SDS((), np.float32), x))
    g = olympus.jit(lambda x: io_callback(second, SDS((), np.float32), x))
    t = threading.Thread(target=lambda: f(1.0))
    t.start()
    while not order:
        time.sleep(0.001)
    threading.Timer(0.05, gate.set).start()
    y = g(2.0)                      # device 0 is busy: queued, and waited for
    print(y.is_ready(), float(y))
    t.join()
    print(order)
    """)
    assert out == ["True 2.0", "['first starts', 'first ends', 'second']"]


def test_sync_mode_raises_at_the_call():
    out, _ = run("""
    def bad(x):
        raise KeyError("at the call")
    g = olympus.jit(lambda x: olympus.pure_callback(bad, SDS((), np.float32), x))
    try:
        g(1.0)
    except olympus.CallbackError as e:
        print("raised at the call:", type(e.__cause__).__name__)
    """, env={"OLYMPUS_ASYNC_DISPATCH": "sync"})
    assert out == ["raised at the call: KeyError"]


def test_queued_work_finishes_at_exit():
    out, err = run("""
    olympus.config.update("olympus_async_dispatch", "async")
    def slow(x):
        time.sleep(0.01)
        print("ran", int(x), flush=True)
    f = olympus.jit(lambda x: io_callback(slow, None, x, ordered=True))
    for i in range(5):
        f(i)
    print("end of script", flush=True)
    """)
    assert out[-5:] == [f"ran {i}" for i in range(5)]
    assert "end of script" in out


def test_numerics_under_async_dispatch():
    """The array, jit, control-flow and random-program suites with every
    computation queued: any read that does not wait for its producer shows."""
    tests = [os.path.join(ROOT, "tests", "python", f) for f in
             ("test_numpy.py", "test_jit.py", "test_control_flow.py", "test_array.py",
              "test_random_programs.py", "test_vmap.py")]
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_ASYNC_DISPATCH="async")
    if e.get("OLYMPUS_EXT_DIR"):
        e["OLYMPUS_EXT_DIR"] = os.path.abspath(e["OLYMPUS_EXT_DIR"])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                        *tests], capture_output=True, text=True, timeout=600, env=e,
                       cwd=os.path.join(ROOT, "tests", "python"))
    assert r.returncode == 0, r.stdout[-3000:]
    assert " passed" in r.stdout.splitlines()[-1]

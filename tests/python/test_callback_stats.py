"""olympus.experimental callback statistics: callback_stats(),
collect_callback_stats(), the table and the data (docs/beyond.md)."""
import ctypes
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import (CallbackStat, CallbackStats, callback_stats,
                                  collect_callback_stats, enable_callback_stats, io_callback,
                                  reset_callback_stats)
from olympus.experimental import host_callback as hcb

SDS = olympus.ShapeDtypeStruct
f32 = np.float32
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OLYMPUS_EXT_DIR") or os.path.join(ROOT, "build")


@pytest.fixture(autouse=True)
def clean_stats():
    hcb.barrier_wait()  # taps other tests sent are delivered before counting starts
    was = enable_callback_stats(False)
    reset_callback_stats()
    yield
    enable_callback_stats(was)
    reset_callback_stats()


def ident(x):
    return x


def one(stats, name, flavour=None):
    rows = [r for r in stats[name] if flavour is None or r.flavour == flavour]
    assert len(rows) == 1, rows
    return rows[0]


def test_off_by_default_counts_nothing():
    olympus.pure_callback(ident, SDS((), f32), f32(1))
    assert len(callback_stats()) == 0
    assert str(callback_stats()).startswith("callback statistics: 0 callback(s), 0 call(s)")


def test_pure_callback_in_a_jitted_loop_counts_every_call_and_bytes():
    f = olympus.jit(lambda x: lax.fori_loop(
        0, 50, lambda i, w: olympus.pure_callback(ident, SDS((4,), f32), w), x))
    x = jnp.ones(4)
    f(x)  # traced and run outside the block: not counted
    with collect_callback_stats() as stats:
        out = f(x)
    np.testing.assert_array_equal(out, np.ones(4))
    r = one(stats, "ident")
    assert (r.flavour, r.device, r.calls, r.errors) == ("pure_callback", 0, 50, 0)
    assert (r.bytes_in, r.bytes_out) == (50 * 16, 50 * 16)
    assert 0 < r.max_s <= r.total_s and r.mean_s == pytest.approx(r.total_s / 50)
    assert r.function is ident


def test_eager_calls_are_one_row_for_one_function():
    with collect_callback_stats() as stats:
        for _ in range(3):
            olympus.pure_callback(ident, SDS((2,), f32), np.ones(2, f32))
    r = one(stats, "ident")
    assert r.calls == 3 and r.function is ident


def test_every_flavour_is_named():
    def void(*a):
        return None

    def tapf(a, transforms):
        pass

    @olympus.jit
    def f(x):
        io_callback(void, None, x)
        io_callback(void, None, x, ordered=True)
        olympus.debug.callback(void, x)
        olympus.debug.print("x = {}", x)
        hcb.id_tap(tapf, x)
        y = hcb.call(ident, x, result_shape=SDS((), f32))
        return y

    with collect_callback_stats() as stats:
        f(f32(2))
        hcb.barrier_wait()
    flav = {(r.name, r.flavour) for r in stats}
    assert flav == {("void", "io_callback"), ("void", "io_callback(ordered)"),
                    ("void", "debug_callback"), ("debug_print('x = {}')", "debug_callback"),
                    ("tapf", "id_tap"), ("ident", "host_callback.call")}, flav
    assert all(r.calls == 1 for r in stats)


def test_buffer_callback_and_ffi_call():
    from olympus import ffi
    from olympus.experimental.buffer_callback import buffer_callback

    def cp(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x)

    lib = ctypes.CDLL(os.path.join(BUILD, "libolympus_ffi_test.so"))
    ffi.register_ffi_target("test_ffi.copy", lib.ffi_test_copy)
    with collect_callback_stats() as stats:
        buffer_callback(cp, SDS((3,), f32))(np.ones(3, f32))
        ffi.ffi_call("test_ffi.copy", SDS((3,), f32))(np.ones(3, f32))
    r = one(stats, "cp")
    assert r.flavour == "buffer_callback" and r.calls == 1 and r.bytes_out == 12
    assert r.function is None  # buffer_callback's host functions are not Python callables here
    (r,) = [r for r in stats if r.flavour == "ffi_call"]
    assert r.name.startswith("ffi_call:test_ffi.copy") and r.calls == 1 and r.function is None


def test_failures_are_counted_as_errors():
    def boom(x):
        raise ValueError("boom")

    with collect_callback_stats() as stats:
        for _ in range(2):
            with pytest.raises(olympus.CallbackError):
                olympus.pure_callback(boom, SDS((), f32), f32(1))
    r = one(stats, "boom")
    assert (r.calls, r.errors, r.bytes_in, r.bytes_out) == (2, 2, 8, 0)


def test_vmap_sequential_counts_each_element():
    f = lambda x: olympus.pure_callback(ident, SDS((), f32), x,  # noqa: E731
                                        vmap_method="sequential")
    with collect_callback_stats() as stats:
        olympus.vmap(f)(jnp.arange(7.0))
    assert one(stats, "ident").calls == 7


def test_nested_blocks_count_in_every_open_block():
    with collect_callback_stats() as outer:
        olympus.pure_callback(ident, SDS((), f32), f32(1))
        with collect_callback_stats() as inner:
            olympus.pure_callback(ident, SDS((), f32), f32(1))
            olympus.pure_callback(ident, SDS((), f32), f32(1))
        olympus.pure_callback(ident, SDS((), f32), f32(1))
    assert one(inner, "ident").calls == 2
    assert one(outer, "ident").calls == 4
    assert one(callback_stats(), "ident").calls == 4


def test_block_restores_the_switch_and_global_stats_keep_counting():
    assert not olympus._core.callback_stats_enabled()
    with collect_callback_stats():
        assert olympus._core.callback_stats_enabled()
    assert not olympus._core.callback_stats_enabled()
    enable_callback_stats(True)
    olympus.pure_callback(ident, SDS((), f32), f32(1))
    with collect_callback_stats() as s:
        olympus.pure_callback(ident, SDS((), f32), f32(1))
    assert olympus._core.callback_stats_enabled()  # it was on before the block
    olympus.pure_callback(ident, SDS((), f32), f32(1))
    assert one(s, "ident").calls == 1
    assert one(callback_stats(), "ident").calls == 3
    assert one(callback_stats(reset=True), "ident").calls == 3
    assert len(callback_stats()) == 0


def test_block_exit_on_exception_still_fills_the_stats():
    with pytest.raises(KeyError):
        with collect_callback_stats() as s:
            olympus.pure_callback(ident, SDS((), f32), f32(1))
            raise KeyError("x")
    assert one(s, "ident").calls == 1
    assert not olympus._core.callback_stats_enabled()


def test_wait_counts_taps_delivered_later():
    seen = []
    f = olympus.jit(lambda x: lax.fori_loop(0, 100, lambda i, w: hcb.id_tap(
        lambda a, t: seen.append(1), w), x))
    with collect_callback_stats(wait=True) as s:
        f(f32(0))
    assert one(s, "<lambda>", "id_tap").calls == 100 == len(seen)


def test_table_text():
    with collect_callback_stats() as s:
        for _ in range(3):
            olympus.pure_callback(ident, SDS((256,), f32), np.ones(256, f32))
    text = str(s)
    lines = text.splitlines()
    assert lines[0].startswith("callback statistics: 1 callback(s), 3 call(s), ")
    assert lines[0].endswith(" in host functions")
    assert re.match(r"callback +flavour +device +calls +errors +total +mean +max +bytes in "
                    r"+bytes out$", lines[1])
    assert set(lines[2]) <= {"-", " "}
    assert re.match(r"ident +pure_callback +cpu:0 +3 +0 +[\d.]+ [mun]?s +[\d.]+ [mun]?s +"
                    r"[\d.]+ [mun]?s +3 KiB +3 KiB$", lines[3]), lines[3]
    assert repr(s) == "<CallbackStats: 1 callback(s), 3 call(s)>"


def test_same_names_are_told_apart_by_file_and_line():
    with collect_callback_stats() as s:
        olympus.pure_callback(lambda x: x, SDS((), f32), f32(1))
        olympus.pure_callback(lambda x: x + 1, SDS((), f32), f32(1))
    names = sorted(line.split()[0] for line in str(s).splitlines()[3:])
    assert len(names) == 2 and all(re.match(r"<lambda>@test_callback_stats\.py:\d+$", n)
                                   for n in names), names


def test_data_forms():
    with collect_callback_stats() as s:
        olympus.pure_callback(ident, SDS((), f32), f32(1))
    (row,) = s.rows
    assert isinstance(row, CallbackStat) and isinstance(s, CallbackStats)
    d = s.as_dicts()[0]
    assert set(d) == {"name", "flavour", "device", "calls", "errors", "total_s", "mean_s",
                      "max_s", "bytes_in", "bytes_out"}
    assert d["name"] == "ident" and d["calls"] == 1
    assert s[ident] == [row] and s[0] == row and s.calls == 1
    with pytest.raises(KeyError):
        s["nope"]


def test_results_unchanged_with_stats_on():
    f = olympus.jit(lambda x: olympus.pure_callback(lambda a: a * 2, SDS((3,), f32), x))
    x = jnp.arange(3.0)
    with collect_callback_stats():
        on = np.asarray(f(x))
    np.testing.assert_array_equal(on, np.asarray(f(x)))


def test_environment_variable_prints_the_table_at_exit():
    code = ("import numpy as np, olympus\n"
            "def h(x): return x\n"
            "for _ in range(2): olympus.pure_callback(h, olympus.ShapeDtypeStruct((), "
            "np.float32), np.float32(1))\n")
    env = dict(os.environ, OLYMPUS_CALLBACK_STATS="1", PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "callback statistics: 1 callback(s), 2 call(s)" in r.stderr
    assert re.search(r"^h +pure_callback +cpu:0 +2 +0 ", r.stderr, re.M), r.stderr

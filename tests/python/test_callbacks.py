"""Host callbacks through the package: olympus.pure_callback,
olympus.experimental.io_callback, olympus.debug.callback / print / log,
olympus.effects_barrier (CALLBACK_SEMANTICS §1.1, §1.3-1.7)."""
import logging
import threading

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import debug
from olympus.experimental import io_callback

SDS = olympus.ShapeDtypeStruct
f32 = np.float32


@pytest.fixture
def x64():
    olympus.config.update("olympus_enable_x64", True)
    try:
        yield
    finally:
        olympus.config.update("olympus_enable_x64", False)


def spec_like(x):
    return SDS(np.shape(x), np.asarray(x).dtype)


# ---------------------------------------------------------------- pure_callback: values

def test_pure_callback_eager_values_and_argument_arrays():
    seen = []

    def host(x):
        seen.append(x)
        return np.sin(x).astype(x.dtype)

    x = np.arange(5, dtype=f32)
    out = olympus.pure_callback(host, SDS((5,), f32), x)
    assert isinstance(out, olympus.Array)
    assert out.dtype == np.float32 and out.shape == (5,)
    np.testing.assert_allclose(np.asarray(out), np.sin(x), rtol=1e-6)
    (arg,) = seen
    # eagerly, as the reference: an olympus Array (immutable)
    assert isinstance(arg, olympus.Array) and arg.dtype == f32 and arg.shape == (5,)
    with pytest.raises(TypeError):
        arg[0] = 1.0
    # under jit: a read-only NumPy view (zero-copy)
    seen.clear()
    olympus.jit(lambda x: olympus.pure_callback(host, SDS((5,), f32), x))(x)
    (arg,) = seen
    assert type(arg) is np.ndarray and arg.dtype == f32 and arg.shape == (5,)
    assert not arg.flags.writeable  # read-only view
    with pytest.raises(ValueError):
        arg[0] = 1.0


def test_pure_callback_under_jit_called_once_per_call():
    calls = []

    def host(x):
        calls.append(np.array(x))
        return x * 2

    @olympus.jit
    def f(x):
        y = olympus.pure_callback(host, SDS(x.shape, x.dtype), x + 1)
        return y + 1

    x = np.arange(3, dtype=f32)
    np.testing.assert_array_equal(np.asarray(f(x)), (x + 1) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(f(x + 10)), (x + 11) * 2 + 1)
    assert len(calls) == 2
    np.testing.assert_array_equal(calls[1], x + 11)


def test_scalars_arrive_as_zero_d_arrays_and_python_literals_are_accepted():
    seen = []

    def host(a, b):
        seen.append((a, b))
        return 1.5  # a Python float for a float32 result (x64 off: canonicalised)

    out = olympus.pure_callback(host, SDS((), f32), 3, np.float32(2.0))
    assert float(out) == 1.5 and out.dtype == np.float32
    a, b = seen[0]
    assert isinstance(a, olympus.Array) and a.shape == () and a.dtype == np.int32 and int(a) == 3
    assert b.shape == () and b.dtype == np.float32
    seen.clear()
    olympus.jit(lambda: olympus.pure_callback(host, SDS((), f32), 3, np.float32(2.0)))()
    a, b = seen[0]
    assert isinstance(a, np.ndarray) and a.shape == () and a.dtype == np.int32 and int(a) == 3


def test_pytree_args_kwargs_and_result_structure():
    def host(pair, *, scale, extra):
        a, b = pair
        return {"sum": (a + b) * scale, "meta": (extra["n"], a.astype(np.int32))}

    x = np.ones(2, f32)
    spec = {"sum": SDS((2,), f32), "meta": (SDS((), np.int32), SDS((2,), np.int32))}
    out = olympus.pure_callback(host, spec, (x, 2 * x), scale=np.float32(3),
                                extra={"n": np.int32(7)})
    assert set(out) == {"sum", "meta"}
    np.testing.assert_array_equal(np.asarray(out["sum"]), [9, 9])
    assert isinstance(out["meta"], tuple) and int(out["meta"][0]) == 7
    np.testing.assert_array_equal(np.asarray(out["meta"][1]), [1, 1])


def test_result_specs_may_be_arrays_and_numpy_scalars():
    x = jnp.arange(4.0)
    out = olympus.pure_callback(lambda v: v[::-1].copy(), x, x)  # spec: the array itself
    np.testing.assert_array_equal(np.asarray(out), [3, 2, 1, 0])
    out = olympus.pure_callback(lambda: np.int32(5), np.int32(0))
    assert int(out) == 5 and out.dtype == np.int32 and out.shape == ()


@pytest.mark.parametrize("empty", [None, ()])
def test_empty_result_spec_means_no_outputs(empty):
    calls = []
    out = olympus.pure_callback(lambda: calls.append(1), empty)
    assert out == empty and calls == [1]


def test_leaf_count_not_structure_is_checked():
    # A list of two arrays for a declared tuple of two: accepted (only leaves count).
    out = olympus.pure_callback(lambda: [np.zeros(2, f32), np.ones((), np.int32)],
                                (SDS((2,), f32), SDS((), np.int32)))
    assert isinstance(out, tuple) and int(out[1]) == 1


def test_fortran_ordered_and_strided_results_are_relaid_out():
    a = np.asfortranarray(np.arange(6, dtype=f32).reshape(2, 3))
    out = olympus.pure_callback(lambda: a, SDS((2, 3), f32))
    np.testing.assert_array_equal(np.asarray(out), a)
    b = np.arange(12, dtype=np.int32)[::2]
    out = olympus.pure_callback(lambda: b, SDS((6,), np.int32))
    np.testing.assert_array_equal(np.asarray(out), b)
    c = np.arange(3, dtype=">f4")  # foreign byte order
    out = olympus.pure_callback(lambda: c, SDS((3,), f32))
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2])


def test_bool_and_complex_results():
    out = olympus.pure_callback(lambda x: (x > 1, x + 1j), (SDS((3,), np.bool_),
                                SDS((3,), np.complex64)), np.arange(3, dtype=f32))
    np.testing.assert_array_equal(np.asarray(out[0]), [False, False, True])
    np.testing.assert_allclose(np.asarray(out[1]), np.arange(3) + 1j)


def test_x64_off_canonicalises_64_bit_results():
    out = olympus.pure_callback(lambda: np.arange(3, dtype=np.float64) / 3, SDS((3,), f32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), np.arange(3) / 3, rtol=1e-6)
    out = olympus.pure_callback(lambda: 7, SDS((), np.int32))  # Python int -> int64 -> int32
    assert int(out) == 7


def test_x64_on_rejects_64_bit_result_for_32_bit_declaration(x64):
    with pytest.raises(olympus.CallbackError,
                       match="Incorrect output dtype for return value #0: Expected: float32, "
                             "Actual: float64"):
        olympus.pure_callback(lambda: np.zeros(2), SDS((2,), f32))
    out = olympus.pure_callback(lambda: np.zeros(2), SDS((2,), np.float64))
    assert out.dtype == np.float64


# ---------------------------------------------------------------- elision and effects

def test_unused_pure_callback_is_elided_under_jit_io_and_debug_are_kept():
    log = []

    def host(tag):
        def fn(*a):
            log.append(tag)
            return np.int32(0)
        return fn

    @olympus.jit
    def f2(x):
        olympus.pure_callback(host("pure"), np.int32(0), x)
        io_callback(host("io"), np.int32(0), x)
        debug.callback(host("debug"), x)
        return x * 2.0

    @olympus.jit
    def f1(x):
        return olympus.pure_callback(host("used"), np.int32(0), x)

    f2(np.float32(1))
    f2(np.float32(2))
    assert sorted(log) == ["debug", "debug", "io", "io"]
    log.clear()
    assert int(f1(np.float32(1))) == 0
    assert log == ["used"]


def test_io_callback_without_operands_runs_on_every_call_under_jit():
    hits = []

    @olympus.jit
    def f(x):
        io_callback(lambda: hits.append(1), None)
        return x

    f(1.0)
    f(2.0)
    assert hits == [1, 1]


def test_ordered_io_callbacks_run_in_program_order():
    order = []

    def rec(v):
        order.append(int(v))
        return v

    @olympus.jit
    def f(x):
        a = io_callback(rec, SDS((), np.int32), x, ordered=True)
        b = io_callback(rec, SDS((), np.int32), x + 1, ordered=True)
        c = io_callback(rec, SDS((), np.int32), x + 2, ordered=True)
        return a + b + c

    assert int(f(np.int32(10))) == 33
    assert int(f(np.int32(20))) == 63
    olympus.effects_barrier()
    assert order == [10, 11, 12, 20, 21, 22]


def test_io_callback_values_and_checks():
    rng = np.random.default_rng(0)
    out = io_callback(lambda x: rng.uniform(size=x.shape).astype(x.dtype), SDS((3,), f32),
                      np.zeros(3, f32))
    assert out.shape == (3,) and out.dtype == np.float32
    with pytest.raises(ValueError, match="cannot specify 64-bit types"):
        io_callback(lambda: 0.0, SDS((), np.float64))
    with pytest.raises(NotImplementedError, match="io_callback only supports"):
        io_callback(lambda: 0.0, SDS((), f32), sharding=object())


def test_effects_barrier_returns_none():
    assert olympus.effects_barrier() is None


# ---------------------------------------------------------------- argument checks

def test_64_bit_result_spec_with_x64_off_raises_at_call_time():
    calls = []
    with pytest.raises(ValueError, match="result_shape_dtypes cannot specify 64-bit types when "
                                         "`olympus_enable_x64` is disabled"):
        olympus.pure_callback(lambda: calls.append(1), SDS((), np.int64))
    assert calls == []


def test_64_bit_result_spec_allowed_with_x64_on(x64):
    out = olympus.pure_callback(lambda: np.int64(2**40), SDS((), np.int64))
    assert int(out) == 2**40 and out.dtype == np.int64


@pytest.mark.parametrize("bad", [1.0, "f32", object()])
def test_result_spec_without_shape_and_dtype_is_a_value_error(bad):
    with pytest.raises(ValueError, match="shape.*dtype"):
        olympus.pure_callback(lambda: 0, bad)


def test_vmap_method_validation():
    for ok in [None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
               "legacy_vectorized"]:
        olympus.pure_callback(lambda: np.float32(0), SDS((), f32), vmap_method=ok)
    with pytest.raises(ValueError, match=r"vmap_method must be one of the allowed methods "
                                         r"\[None, 'sequential'.*\], but got: vectorized"):
        olympus.pure_callback(lambda: np.float32(0), SDS((), f32), vmap_method="vectorized")


def test_vectorized_argument_was_removed_and_is_not_forwarded():
    calls = []

    def host(**kw):
        calls.append(kw)
        return np.float32(0)

    with pytest.raises(ValueError, match="'vectorized' argument .* was removed.*vmap_method"):
        olympus.pure_callback(host, SDS((), f32), vectorized=True)
    assert calls == []


def test_sharding_other_than_none_is_not_implemented():
    with pytest.raises(NotImplementedError, match="pure_callback only supports"):
        olympus.pure_callback(lambda: np.float32(0), SDS((), f32), sharding="cpu:0")


def test_non_callable_callback_is_a_type_error():
    with pytest.raises(TypeError):
        olympus.pure_callback("not callable", SDS((), f32))


# ---------------------------------------------------------------- result check errors

@pytest.mark.parametrize("ret,spec,text", [
    (lambda: (np.zeros(2, f32), np.zeros(2, f32)), SDS((2,), f32),
     "Mismatched number of outputs from callback. Expected: 1, Actual: 2"),
    (lambda: None, SDS((2,), f32),
     "Mismatched number of outputs from callback. Expected: 1, Actual: 0"),
    (lambda: np.zeros(3, f32), SDS((2,), f32),
     r"Incorrect output shape for return value #0: Expected: \(2,\), Actual: \(3,\)"),
    (lambda: (np.zeros((), f32), np.zeros((2, 3), f32)), (SDS((), f32), SDS((3, 2), f32)),
     r"Incorrect output shape for return value #1: Expected: \(3, 2\), Actual: \(2, 3\)"),
    (lambda: np.zeros(2, np.int32), SDS((2,), f32),
     "Incorrect output dtype for return value #0: Expected: float32, Actual: int32"),
    (lambda: np.array(["a", "b"]), SDS((2,), f32),
     "Incorrect output dtype for return value #0: Expected: float32, Actual: <U1"),
])
def test_result_check_errors(ret, spec, text):
    with pytest.raises(olympus.CallbackError, match=text) as info:
        olympus.pure_callback(ret, spec)
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value).startswith("pure_callback failed: <lambda>: RuntimeError: ")

    @olympus.jit
    def f():
        return olympus.pure_callback(ret, spec)

    with pytest.raises(olympus.CallbackError, match=text):
        f()


# ---------------------------------------------------------------- exceptions

def raise_if_negative(x):
    if (x < 0).any():
        raise ValueError(f"negative input: {x.min()}")
    return x


@pytest.mark.parametrize("use_jit", [False, True])
def test_exception_becomes_callback_error_with_cause_and_traceback(use_jit):
    def f(x):
        return olympus.pure_callback(raise_if_negative, SDS(x.shape, x.dtype), x)

    g = olympus.jit(f) if use_jit else f
    with pytest.raises(olympus.CallbackError) as info:
        g(np.array([1.0, -2.0], f32))
    err = info.value
    assert isinstance(err, RuntimeError)
    assert str(err) == ("pure_callback failed: raise_if_negative: ValueError: "
                        "negative input: -2.0")
    cause = err.__cause__
    assert type(cause) is ValueError and str(cause) == "negative input: -2.0"
    tb = cause.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert "raise_if_negative" in frames
    # The next call works.
    np.testing.assert_array_equal(np.asarray(g(np.array([1.0, 2.0], f32))), [1.0, 2.0])


def test_custom_exception_type_is_named_and_kept():
    class Oops(Exception):
        pass

    def host():
        raise Oops("bad thing")

    with pytest.raises(olympus.CallbackError, match="io_callback failed: host: Oops: bad thing") \
            as info:
        io_callback(host, None)
    assert type(info.value.__cause__) is Oops


def test_debug_callback_failure_is_a_callback_error_eager_and_jit():
    def host(x):
        raise KeyError("k")

    with pytest.raises(olympus.CallbackError, match="debug_callback failed: host: KeyError") \
            as info:
        debug.callback(host, np.float32(1))
    assert type(info.value.__cause__) is KeyError

    @olympus.jit
    def f(x):
        debug.callback(host, x)
        return x

    with pytest.raises(olympus.CallbackError, match="debug_callback failed"):
        f(np.float32(1))


def test_many_failures_do_not_leak_or_break_later_calls():
    @olympus.jit
    def f(x):
        return olympus.pure_callback(lambda v: v[:1], SDS((2,), f32), x)

    for _ in range(200):
        with pytest.raises(olympus.CallbackError):
            f(np.zeros(2, f32))
    ok = olympus.jit(lambda x: olympus.pure_callback(lambda v: v + 1, SDS((2,), f32), x))
    np.testing.assert_array_equal(np.asarray(ok(np.zeros(2, f32))), [1, 1])


# ---------------------------------------------------------------- re-entrancy, threads, lifetime

def test_callback_that_calls_olympus_inside_jit():
    inner = olympus.jit(lambda v: v * 3.0)

    def host(x):
        y = jnp.sin(olympus.numpy.asarray(x)) + 1.0   # eager olympus ops
        z = inner(y)                                  # a jitted function
        return np.asarray(z)

    @olympus.jit
    def f(x):
        return olympus.pure_callback(host, SDS(x.shape, x.dtype), x) - 1.0

    x = np.linspace(0, 1, 4, dtype=f32)
    np.testing.assert_allclose(np.asarray(f(x)), (np.sin(x) + 1) * 3 - 1, rtol=1e-5)


def test_callback_failing_inside_nested_jitted_call_does_not_deadlock():
    inner = olympus.jit(lambda v: olympus.pure_callback(raise_if_negative, SDS((), f32), v))

    def host(x):
        return np.asarray(inner(x))

    with pytest.raises(olympus.CallbackError) as info:
        olympus.pure_callback(host, SDS((), f32), np.float32(-1))
    # The outer callback saw the inner CallbackError; its cause chain reaches the ValueError.
    outer_cause = info.value.__cause__
    assert isinstance(outer_cause, olympus.CallbackError)
    assert type(outer_cause.__cause__) is ValueError


def test_callbacks_from_several_threads_at_once():
    counts = {}
    lock = threading.Lock()

    def host(x, tid):
        with lock:
            counts[int(tid)] = counts.get(int(tid), 0) + 1
        return x * 2

    @olympus.jit
    def f(x, tid):
        y = olympus.pure_callback(host, SDS(x.shape, x.dtype), x, tid)
        io_callback(lambda t: None, None, tid)
        return y + 1

    errors = []

    def worker(tid):
        try:
            for i in range(50):
                x = np.full(3, i + tid, f32)
                np.testing.assert_array_equal(np.asarray(f(x, np.int32(tid))), x * 2 + 1)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a callback thread hung"
    assert errors == []
    assert counts == {t: 50 for t in range(8)}


def test_large_runs_that_release_the_gil_still_call_back_and_fail_cleanly():
    # Runs moving megabytes release the GIL; the trampoline must take it back.
    n = 1 << 19  # 2 MiB of float32

    @olympus.jit
    def f(x):
        s = olympus.pure_callback(lambda v: np.float32(v.sum()), SDS((), f32), x * 2.0)
        return x + s

    @olympus.jit
    def g(x):
        return olympus.pure_callback(raise_if_negative, SDS((n,), f32), x - 1.0)

    x = np.ones(n, f32)
    results, errors = [], []

    def worker():
        try:
            results.append(float(np.asarray(f(x))[0]))
            with pytest.raises(olympus.CallbackError, match="negative input"):
                g(x * 0.0)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert results == [1.0 + 2.0 * n] * 4


def test_callback_keeping_its_argument_reads_correct_values_later():
    kept = []

    def keep(x):
        kept.append(x)
        return x

    @olympus.jit
    def f(x):
        y = x * 2.0 + 1.0   # an intermediate passed to the callback
        z = olympus.pure_callback(keep, SDS(y.shape, y.dtype), y)
        return z * 0.0 + (y - 100.0)  # later kernels that could reuse y's buffer

    for i in range(5):
        f(np.full(64, i, f32))
    olympus.pure_callback(keep, SDS((64,), f32), np.full(64, 9, f32))  # eager too
    for _ in range(3):  # churn: more runs that allocate and free buffers
        f(np.full(64, 77, f32))
    for i in range(5):
        np.testing.assert_array_equal(kept[i], np.full(64, i * 2 + 1, f32))
    np.testing.assert_array_equal(kept[5], np.full(64, 9, f32))


# ---------------------------------------------------------------- debug.callback

def test_debug_callback_static_and_dynamic_leaves():
    got = []

    def host(x, label, *, dtype, info):
        got.append((x, label, dtype, info))
        return "ignored"

    sentinel = object()

    @olympus.jit
    def f(x):
        r = debug.callback(host, x, "label", dtype=np.float32, info={"obj": sentinel, "v": x + 1})
        assert r is None
        return x

    f(np.arange(2, dtype=f32))
    assert debug.callback(host, 3, "eager", dtype=int, info={"obj": sentinel, "v": 1.5}) is None
    x, label, dtype, info = got[0]
    assert isinstance(x, np.ndarray) and x.tolist() == [0, 1]
    assert label == "label" and dtype is np.float32 and info["obj"] is sentinel
    np.testing.assert_array_equal(info["v"], [1, 2])
    x, label, dtype, info = got[1]
    assert int(x) == 3 and label == "eager" and dtype is int and float(info["v"]) == 1.5


def test_debug_callback_two_call_form_and_type_errors():
    got = []
    debug.callback(ordered=True)(lambda a, b=None: got.append((int(a), b)), 1, b="s")
    assert got == [(1, "s")]
    with pytest.raises(TypeError, match="debug_callback received unexpected arguments in the "
                                        "two-call form"):
        debug.callback(ordered=True, x=1)
    with pytest.raises(TypeError, match="first argument to olympus.debug.callback must be "
                                        "callable, but got an object of type <class 'str'>"):
        debug.callback("fmt {}", 1)


def test_debug_callback_ordered_under_jit_runs_each_call_in_order():
    seen = []

    @olympus.jit
    def f(x):
        debug.callback(lambda v: seen.append(("a", int(v))), x, ordered=True)
        debug.callback(lambda v: seen.append(("b", int(v))), x + 1, ordered=True)
        return x

    f(np.int32(1))
    f(np.int32(5))
    assert seen == [("a", 1), ("b", 2), ("a", 5), ("b", 6)]


# ---------------------------------------------------------------- debug.print

def test_debug_print_eager_and_jit(capsys):
    debug.print("x = {}", np.int32(3))

    @olympus.jit
    def f(x):
        y = x + 1
        debug.print("intermediate value: {}", y)
        debug.print("kw {a} and {b:.2f}", a=y, b=x)
        return y * 2

    f(np.float32(2))
    f(np.float32(5))
    assert capsys.readouterr().out == (
        "x = 3\n"
        "intermediate value: 3.0\n"
        "kw 3.0 and 2.00\n"
        "intermediate value: 6.0\n"
        "kw 6.0 and 5.00\n")


def test_debug_print_array_and_pytree_formatting(capsys):
    debug.print("{}", np.arange(3, dtype=f32))
    debug.print("tree: {}", {"foo": np.int32(2)})
    debug.print("static {} {}", "text", np.int32(1))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[0. 1. 2.]"
    assert out[1] == "tree: {'foo': Array(2, dtype=int32)}"
    assert out[2] == "static text 1"


def test_debug_print_captures_printoptions_at_trace_time(capsys):
    @olympus.jit
    def f(x):
        debug.print("{}", x)
        return x

    x = np.array([1.0 / 3], f32)
    with np.printoptions(precision=2):
        f(x)
    f(x)  # cached: still the options of the trace
    debug.print("{}", x)  # a new call: current (default) options
    out = capsys.readouterr().out.splitlines()
    assert out == ["[0.33]", "[0.33]", "[0.33333334]"]


def test_debug_print_format_check_errors():
    with pytest.raises(KeyError):
        debug.print("{x}", 1)
    with pytest.raises(IndexError):
        debug.print("{}", x=1)
    with pytest.raises(ValueError, match=r"Unused positional arguments to "
                                         r"`olympus.debug.print`: \[2\]"):
        debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match=r"Unused keyword arguments to `olympus.debug.print`: "
                                         r"\['y'\]. You may be passing an f-string"):
        debug.print("{x}", x=1, y=2)

    @olympus.jit
    def f(x):
        debug.print("{}", x, x)
        return x

    with pytest.raises(ValueError, match="Unused positional arguments"):
        f(np.float32(1))


def test_debug_print_skip_format_check_appends_args(capsys):
    debug.print("values:", np.int32(1), np.float32(2.5), skip_format_check=True)
    debug.print("braces {{x}} and {}", np.int32(4), skip_format_check=True)
    assert capsys.readouterr().out.splitlines() == ["values: 1 2.5", "braces {x} and 4"]


def test_debug_print_two_call_form(capsys):
    debug.print(ordered=True)("x: {x}", x=np.int32(4))
    assert capsys.readouterr().out == "x: 4\n"
    with pytest.raises(ValueError, match=r"Unused keyword arguments .*\['partitioned'\]"):
        debug.print(ordered=True)("x: {x}", x=np.int32(4), partitioned=True)
    with pytest.raises(TypeError, match="debug_print received unexpected arguments in the "
                                        "two-call form"):
        debug.print(ordered=True, x=1)
    assert callable(debug.print())
    assert capsys.readouterr().out == ""


def test_debug_log_emits_info_record(caplog):
    with caplog.at_level(logging.INFO, logger="olympus._src.debugging"):
        debug.log("value {} %s", np.int32(7))
    records = [r for r in caplog.records if r.name == "olympus._src.debugging"]
    assert [r.getMessage() for r in records] == ["value 7 %s"]
    assert records[0].levelno == logging.INFO

"""Tests of the core of the extension module olympus._core (module.c, array.c,
tracer.c, jit.c): arrays and NumPy interop, operators against NumPy, tracing,
jit caching, make_jaxpr, and error paths. The module is loaded straight from
the build directory (OLYMPUS_EXT_DIR), without the Python package."""
import glob
import importlib.util
import operator
import os
import sys

import numpy as np
import pytest


def _load_core():
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.environ.get("OLYMPUS_EXT_DIR", os.path.join(here, "..", "..", "build"))
    paths = sorted(glob.glob(os.path.join(d, "_core*.so")))
    if not paths:  # a missing extension is a failure, never a silent skip
        pytest.fail(f"no _core extension built in {d} (run make)", pytrace=False)
    name = "olympus._core"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == paths[0]:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, paths[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


core = _load_core()
A = core.asarray


@pytest.fixture
def x64():
    core.set_x64(True)
    try:
        yield
    finally:
        core.set_x64(False)


# ---------------------------------------------------------------- asarray


@pytest.mark.parametrize(
    "value, dtype, weak",
    [
        (True, np.bool_, False),
        (3, np.int32, True),
        (2.5, np.float32, True),
        (1 + 2j, np.complex64, True),
        ([1, 2], np.int32, False),
        ([1.0, 2.0], np.float32, False),
        (np.float64(1.5), np.float32, False),
        (np.arange(3, dtype=np.int64), np.int32, False),
        (np.ones(2, np.float16), np.float16, False),
        (np.ones(2, np.uint8), np.uint8, False),
    ],
)
def test_asarray_dtype_and_weak(value, dtype, weak):
    a = A(value)
    assert a.dtype == np.dtype(dtype)
    assert a.weak_type is weak
    np.testing.assert_array_equal(np.asarray(a), np.asarray(value).astype(dtype))


def test_asarray_x64_switch(x64):
    assert core.x64_enabled()
    assert A(3).dtype == np.int64
    assert A(2.5).dtype == np.float64
    assert A(np.arange(3)).dtype == np.int64
    assert A(1j).dtype == np.complex128


def test_asarray_x64_off_by_default():
    assert not core.x64_enabled()
    assert A(np.zeros(2, np.float64)).dtype == np.float32
    assert core.canonicalize_dtype(np.float64) == np.float32


def test_asarray_explicit_dtype_and_overflow():
    a = A([1.7, -2.2], dtype="int8")
    assert a.dtype == np.int8 and not a.weak_type
    np.testing.assert_array_equal(np.asarray(a), [1, -2])
    assert A(5, dtype=np.float32).weak_type is False
    with pytest.raises(OverflowError, match="2147483648.*int32"):
        A(2**31)
    with pytest.raises(OverflowError, match="int8"):
        A(np.int8([1])) + 1000


def test_asarray_copies_numpy_data():
    n = np.arange(4, dtype=np.float32)
    a = A(n)
    n[0] = 100
    assert np.asarray(a)[0] == 0


def test_asarray_rejects_strings_and_objects():
    with pytest.raises(TypeError, match="not supported"):
        A("abc")
    with pytest.raises(TypeError, match="not supported"):
        A(object())


def test_asarray_bfloat16_roundtrip():
    a = A([1.0, 2.5], dtype="bfloat16")
    assert a.dtype == "bfloat16"
    np.testing.assert_array_equal(np.asarray(a), np.array([1.0, 2.5], np.float32))
    with pytest.raises(BufferError):
        memoryview(a)


# ---------------------------------------------------------------- Array and NumPy


def test_array_attributes():
    a = A(np.zeros((2, 3), np.float32))
    assert a.shape == (2, 3) and a.ndim == 2 and a.size == 6 and len(a) == 2
    assert a.dtype == np.float32 and a.weak_type is False
    assert a.block_until_ready() is a
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(A(1.0))
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_array_is_zero_copy_and_read_only():
    a = A(np.arange(6, dtype=np.float32).reshape(2, 3))
    v1, v2 = np.asarray(a), np.asarray(a)
    assert not v1.flags.writeable
    assert np.shares_memory(v1, v2)  # both view the one device buffer
    with pytest.raises(ValueError):
        v1[0, 0] = 1
    del a  # the view keeps the buffer alive
    np.testing.assert_array_equal(v1, np.arange(6).reshape(2, 3))
    c = np.array(A([1, 2]), dtype=np.float64)
    assert c.dtype == np.float64 and c.flags.writeable


def test_buffer_protocol():
    m = memoryview(A(np.arange(6, dtype=np.int32).reshape(2, 3)))
    assert m.readonly and m.shape == (2, 3) and m.format == "i"
    assert m.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_scalar_conversions():
    assert float(A([2.5])) == 2.5
    assert int(A(7.9)) == 7
    assert complex(A(1 + 2j)) == 1 + 2j
    assert operator.index(A(np.int32(4))) == 4
    assert bool(A(0.0)) is False and bool(A([3])) is True
    assert [10, 20, 30][A(1)] == 20
    with pytest.raises(TypeError, match="integer scalar arrays"):
        operator.index(A(1.0))
    with pytest.raises(TypeError, match="size-1"):
        float(A([1.0, 2.0]))
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        bool(A([1, 2]))


# ---------------------------------------------------------------- operators vs NumPy

_BIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "<": operator.lt, "==": operator.eq,
    ">=": operator.ge, "max": np.maximum,
}


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "<", "==", ">="])
@pytest.mark.parametrize(
    "xd, yd, want",
    [
        (np.float32, np.float32, np.float32),
        (np.int32, np.float32, np.float32),
        (np.int8, np.int16, np.int16),
        (np.uint8, np.int8, np.int16),
        (np.float16, np.float32, np.float32),
        (np.int32, np.int32, np.int32),
    ],
)
def test_binary_promotion_against_numpy(op, xd, yd, want):
    rng = np.random.default_rng(0)
    x = (rng.integers(1, 9, size=(3, 1))).astype(xd)
    y = (rng.integers(1, 9, size=(4,))).astype(yd)
    got = _BIN[op](A(x), A(y))
    ref = _BIN[op](x.astype(want), y.astype(want))
    if op == "/" and not np.issubdtype(want, np.floating):
        ref = ref.astype(np.float32)
    assert got.shape == (3, 4)
    assert got.dtype == ref.dtype
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6)


def test_python_scalars_are_weak():
    x = A(np.ones(3, np.float16))
    assert (x + 1.5).dtype == np.float16
    assert (2 * A(np.ones(3, np.int8))).dtype == np.int8
    assert (A(np.ones(3, np.int32)) + 1.5).dtype == np.float32
    assert (A(np.ones(3, np.int32)) / 2).dtype == np.float32
    w = A(2.0) * 3
    assert w.dtype == np.float32 and w.weak_type
    r = A([1.0, 2.0]) + 1
    assert not r.weak_type


def test_numpy_operand_on_the_left_defers_to_array():
    r = np.ones(3) + A([1.0, 2.0, 3.0])
    assert isinstance(r, core.Array) and r.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(r), [2, 3, 4])
    r = np.float32(2) * A([1, 2])
    assert isinstance(r, core.Array) and r.dtype == np.float32


def test_floor_divide_and_mod_signs():
    x = np.array([-7, -3, 0, 3, 7, 5], np.int32)
    y = np.array([2, -2, 3, -3, 2, -7], np.int32)
    np.testing.assert_array_equal(np.asarray(A(x) // A(y)), x // y)
    np.testing.assert_array_equal(np.asarray(A(x) % A(y)), x % y)
    xf = np.array([-7.5, -3, 0.5, 3, 7, 1.0], np.float32)
    yf = np.array([2, -2, 3, -3, 2, 0.1], np.float32)
    np.testing.assert_allclose(np.asarray(A(xf) // A(yf)), xf // yf)
    np.testing.assert_allclose(np.asarray(A(xf) % A(yf)), xf % yf, atol=1e-6)
    q, r = divmod(A(x), 3)
    np.testing.assert_array_equal(np.asarray(q), x // 3)
    np.testing.assert_array_equal(np.asarray(r), x % 3)
    u = np.array([7, 200], np.uint8)
    np.testing.assert_array_equal(np.asarray(A(u) // A(np.uint8(3))), u // 3)


def test_power_unary_and_bitwise():
    x = np.array([-3, -1, 0, 2, 5], np.int32)
    a = A(x)
    np.testing.assert_array_equal(np.asarray(a**2), x**2)
    assert (a**2).dtype == np.int32
    f = np.abs(x).astype(np.float32)
    np.testing.assert_allclose(np.asarray(A(f) ** 0.5), f**0.5)
    np.testing.assert_array_equal(np.asarray(-a), -x)
    np.testing.assert_array_equal(np.asarray(abs(a)), abs(x))
    np.testing.assert_array_equal(np.asarray(~a), ~x)
    np.testing.assert_array_equal(np.asarray(a & 6), x & 6)
    np.testing.assert_array_equal(np.asarray(a | 1), x | 1)
    np.testing.assert_array_equal(np.asarray(a ^ 3), x ^ 3)
    np.testing.assert_array_equal(np.asarray(a << 2), x << 2)
    np.testing.assert_array_equal(np.asarray(a >> 1), x >> 1)
    u = np.array([255, 128], np.uint8)
    np.testing.assert_array_equal(np.asarray(A(u) >> 1), u >> 1)
    with pytest.raises(TypeError, match="bitwise_and"):
        A([1.5]) & 1


def test_binop_function_matches_operators():
    x, y = np.array([1.0, -2.0, 3.0], np.float32), np.array([2.0, 2.0, -1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(core.binop("maximum", x, A(y))), np.maximum(x, y))
    np.testing.assert_allclose(np.asarray(core.binop("arctan2", A(x), y)), np.arctan2(x, y),
                               rtol=1e-6)
    assert core.binop("less", A(x), 0.0).dtype == np.bool_
    with pytest.raises(ValueError, match="unknown operation"):
        core.binop("frobnicate", x, y)
    with pytest.raises(TypeError, match="unsupported operand"):
        core.binop("add", A(x), "a")


@pytest.mark.parametrize(
    "xs, ys",
    [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
     ((4, 1, 2, 3), (5, 3, 2)), ((3,), (2, 3, 4)), ((2, 2, 3), (3,))],
)
def test_matmul_shapes_against_numpy(xs, ys):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)
    got = A(x) @ A(y)
    ref = x @ y
    assert got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-5)


def test_matmul_errors():
    with pytest.raises(TypeError, match="contracting dimensions"):
        A(np.ones(2, np.float32)) @ A(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="enough dimensions"):
        A(1.0) @ A(np.ones(3, np.float32))


def test_broadcast_error_is_a_type_error():
    with pytest.raises(TypeError, match="incompatible shapes for broadcasting: \\(2,\\), \\(3,\\)"):
        A([1.0, 2.0]) + A([1.0, 2.0, 3.0])
    with pytest.raises(TypeError):
        A([1.0]) + "a"


def test_result_type():
    assert core.result_type(1, 2.0) == (np.dtype(np.float32), True)
    assert core.result_type(np.float16, 1.0) == (np.dtype(np.float16), False)
    assert core.result_type(A(np.int8([1])), 1) == (np.dtype(np.int8), False)
    assert core.result_type(np.uint8, np.int8) == (np.dtype(np.int16), False)
    assert core.result_type(True, np.int32) == (np.dtype(np.int32), False)


# ---------------------------------------------------------------- bind and params


def test_bind_eager_and_params():
    r = core.bind("integer_pow", (A([1.0, 2.0]),), {"y": 3})
    np.testing.assert_array_equal(np.asarray(r), [1.0, 8.0])
    r = core.bind("convert_element_type", (A([1.7, -2.2]),), {"new_dtype": np.int8})
    assert r.dtype == np.int8
    r = core.bind("reduce_sum", ([1.0, 2.0],), {"axes": (0,)})
    assert float(r) == 3.0


def test_bind_errors_do_not_crash():
    with pytest.raises(ValueError, match="unknown primitive 'nope'"):
        core.bind("nope", (1.0,))
    with pytest.raises(TypeError, match="parameter 'y' expects an int"):
        core.bind("integer_pow", (A([1.0]),), {"y": "a"})
    with pytest.raises(TypeError, match="unknown parameter.*'z'"):
        core.bind("integer_pow", (A([1.0]),), {"y": 2, "z": 1})
    with pytest.raises(TypeError, match="same dtype"):
        core.bind("add", (A([1.0, 2.0]), A([1, 2])))
    with pytest.raises(TypeError):
        core.bind("add", (A([1.0, 2.0]), A([1.0, 2.0, 3.0])))
    with pytest.raises(TypeError, match="tuple or list"):
        core.bind("add", 5)


# ---------------------------------------------------------------- tracing


def test_tracer_repr_attributes_and_concretization():
    seen = {}

    def f(x, y):
        seen["x"], seen["y"] = repr(x), repr(y)
        seen["shape"], seen["dtype"] = x.shape, x.dtype
        seen["aval"] = repr(y.aval), str(y.aval), y.aval.weak_type
        assert core.is_tracer(x) and not core.is_tracer(1.0)
        return x * y

    core.jit(f)(np.ones(5, np.float32), 2.0)
    assert seen["x"] == "Traced<ShapedArray(float32[5])>with<DynamicJaxprTrace>"
    assert seen["y"] == "Traced<ShapedArray(float32[], weak_type=True)>with<DynamicJaxprTrace>"
    assert seen["shape"] == (5,) and seen["dtype"] == np.float32
    assert seen["aval"] == ("ShapedArray(float32[], weak_type=True)", "f32[]", True)


@pytest.mark.parametrize("conv, fn", [(bool, "bool"), (float, "float"), (int, "int"),
                                      (np.asarray, "asarray")])
def test_concretization_error(conv, fn):
    def f(x):
        conv(x)
        return x

    with pytest.raises(core.ConcretizationTypeError, match="Abstract tracer value") as e:
        core.jit(f)(np.ones(5, np.float32))
    assert isinstance(e.value, TypeError)
    assert "float32[5]" in str(e.value)
    assert fn in str(e.value)


def test_python_if_on_tracer_names_bool():
    def f(x):
        return x if x > 0 else -x

    with pytest.raises(core.ConcretizationTypeError, match="`bool` function"):
        core.jit(f)(1.0)


def test_leaked_tracer_raises():
    leak = []

    def f(x):
        leak.append(x)
        return x + 1

    core.jit(f)(1.0)
    assert "Traced<" in repr(leak[0])  # still safe to look at
    with pytest.raises(core.UnexpectedTracerError, match="unexpected tracer"):
        leak[0] * 2


# ---------------------------------------------------------------- jit


def test_jit_caches_by_shape_dtype_and_weak():
    def f(x, y):
        return x * 2 + y, x

    jf = core.jit(f)
    out, same = jf(A([1.0, 2.0]), 3.0)
    np.testing.assert_array_equal(np.asarray(out), [5.0, 7.0])
    np.testing.assert_array_equal(np.asarray(same), [1.0, 2.0])
    assert jf._trace_count == 1
    jf(A([5.0, 6.0]), 4.0)  # same avals: no retrace
    assert jf._trace_count == 1 and jf._cache_size() == 1
    jf(A([5.0, 6.0, 7.0]), 4.0)  # new shape
    assert jf._trace_count == 2
    jf(A([5, 6]), 4.0)  # new dtype
    assert jf._trace_count == 3
    jf(A([5.0, 6.0]), A(np.float32(4.0)))  # not weak any more
    assert jf._trace_count == 4 and jf._cache_size() == 4
    jf._clear_cache()
    assert jf._cache_size() == 0


def test_jit_pytrees_and_kwargs():
    @core.jit
    def f(d, scale=1.0):
        return {"s": d["a"] + d["b"] * scale, "t": (d["a"], None)}

    r = f({"a": A([1.0]), "b": np.ones(1, np.float32)}, scale=2.0)
    assert set(r) == {"s", "t"} and r["t"][1] is None
    np.testing.assert_array_equal(np.asarray(r["s"]), [3.0])


def test_jit_static_args():
    def f(x, n, mode="add"):
        return x + n if mode == "add" else x * n

    jf = core.jit(f, static_argnums=(1,), static_argnames=("mode",))
    assert float(jf(A(2.0), 3)) == 5.0
    assert float(jf(A(2.0), 3)) == 5.0
    assert jf._trace_count == 1
    assert float(jf(A(2.0), 4)) == 6.0
    assert jf._trace_count == 2
    assert float(jf(A(2.0), 4, mode="mul")) == 8.0
    assert jf._trace_count == 3
    # static_argnames also covers the parameter when passed positionally
    jg = core.jit(f, static_argnames=("n",))
    assert float(jg(A(1.0), 2)) == 3.0 and float(jg(A(1.0), n=2)) == 3.0
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(A(1.0), [1])


def test_jit_rejects_non_array_arguments():
    with pytest.raises(TypeError, match="Error interpreting argument to .* as an abstract array"):
        core.jit(lambda x: x)("abc")
    with pytest.raises(TypeError, match="not a valid olympus type"):
        core.jit(lambda x: "str")(1.0)


def test_jit_metadata_and_method():
    def f(x):
        """doc of f"""
        return x

    jf = core.jit(f)
    assert jf.__name__ == "f" and jf.__doc__ == "doc of f" and jf.__wrapped__ is f
    assert isinstance(jf, core.JitFunction)

    class C:
        k = 3.0

        def _g(self, y):
            return y * self.k

        g = core.jit(_g, static_argnums=0)  # self is static (hashable by identity)
        h = core.jit(_g)  # self would be an array argument: rejected

    c = C()
    assert float(c.g(A(2.0))) == 6.0
    assert float(c.g(A(5.0))) == 15.0
    assert C.g._trace_count == 1
    with pytest.raises(TypeError, match="abstract array"):
        c.h(1.0)


def test_bool_arithmetic_follows_numpy():
    b = np.array([True, False])
    np.testing.assert_array_equal(np.asarray(A(b) + True), b + True)
    np.testing.assert_array_equal(np.asarray(A(b) * False), b * False)
    assert (A(b) + True).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(A(b) & A(~b)), b & ~b)


def test_jit_error_in_function_leaves_no_open_trace():
    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        core.jit(bad)(1.0)
    # the trace stack is empty again: eager ops give arrays, not tracers
    assert isinstance(A(1.0) + 1, core.Array)


def test_nested_jit_prints_pjit_and_runs():
    inner = core.jit(lambda x, y: x * y + 1.0)

    def outer(x):
        return inner(x, 2.0) - x

    text = str(core.make_jaxpr(outer)(np.ones(3, np.float32)))
    assert "pjit" in text and "name=<lambda>" in text
    r = core.jit(outer)(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(np.asarray(r), [2.0, 3.0, 4.0])
    assert inner._trace_count == 1


def test_closure_capture_of_outer_tracer():
    def outer(x):
        @core.jit
        def inner(y):
            return x * y  # x belongs to the enclosing trace

        return inner(A(np.float32(3.0))) + inner(A(np.float32(4.0)))

    jo = core.jit(outer)
    np.testing.assert_array_equal(np.asarray(jo(np.array([1.0, 2.0], np.float32))), [7.0, 14.0])
    jaxpr = core.make_jaxpr(outer)(np.ones(2, np.float32))
    assert str(jaxpr).count("pjit") == 2
    assert [str(a) for a in jaxpr.in_avals] == ["f32[2]"]


def test_make_jaxpr_text_and_attributes():
    def f(x, y):
        return x * 2.0 + y, x

    j = core.make_jaxpr(f)(np.ones(3, np.float32), 1.0)
    text = str(j)
    assert text.startswith("{ lambda ; a:f32[3] b:f32[]. let")
    assert "mul a 2.0" in text and "add" in text
    assert text.rstrip().endswith("in (d, a) }")
    assert repr(j) == text
    assert [str(a) for a in j.in_avals] == ["f32[3]", "f32[]"]
    assert [str(a) for a in j.out_avals] == ["f32[3]", "f32[3]"]
    x, y = j.in_avals
    assert x.shape == (3,) and x.dtype == np.float32 and not x.weak_type
    assert y.shape == () and y.dtype == np.float32 and y.weak_type
    assert repr(x) == "ShapedArray(float32[3])"
    assert repr(y) == "ShapedArray(float32[], weak_type=True)"
    assert j.eqn_count == 2 and j.effects == 0


def test_make_jaxpr_constants_and_static_argnums():
    c = np.arange(3, dtype=np.float32)

    def f(x, n):
        return x * n + c

    j = core.make_jaxpr(f, static_argnums=(1,))(np.ones(3, np.float32), 5)
    text = str(j)
    assert "5" in text and [str(a) for a in j.in_avals] == ["f32[3]"]


def test_ops_on_constants_inside_a_trace_are_staged():
    def f(x):
        k = A([1.0, 2.0]) * 3.0  # concrete operands, but inside a trace
        assert core.is_tracer(k)
        return x + k

    r = core.jit(f)(np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(r), [4.0, 7.0])


def test_large_program_releases_gil_and_matches():
    n = 1 << 19  # 2 MB of float32
    x = np.arange(n, dtype=np.float32)
    r = core.jit(lambda v: v * 2.0 + 1.0)(x)
    np.testing.assert_array_equal(np.asarray(r)[:4], [1.0, 3.0, 5.0, 7.0])
    assert r.shape == (n,)


# ---------------------------------------------------------------- module functions


def test_module_functions():
    assert core.device_count() >= 1
    assert core.effects_barrier() is None
    assert core.is_tracer(A(1.0)) is False


def test_jit_retraces_when_x64_changes():
    jf = core.jit(lambda v: v + 1)
    jf(np.ones(2, np.float32))
    core.set_x64(True)
    try:
        r = jf(np.ones(2, np.float32))  # same avals, but the switch is part of the key
        assert r.dtype == np.float32
        assert jf._trace_count == 2
        assert jf(3).dtype == np.int64
    finally:
        core.set_x64(False)
    assert jf(3).dtype == np.int32


def test_numpy_on_the_left_of_a_tracer_is_staged():
    def f(x):
        r = np.arange(3, dtype=np.float32) + x
        assert core.is_tracer(r)
        return r

    np.testing.assert_array_equal(np.asarray(core.jit(f)(1.0)), [1.0, 2.0, 3.0])


def test_callback_error_chains_the_original_exception():
    def host(x):
        raise ZeroDivisionError("host failed")

    def f(x):
        return core.callback("pure_callback", host, [((3,), np.dtype(np.float32))], (x,))

    with pytest.raises(core.CallbackError) as e:
        core.jit(f)(np.ones(3, np.float32))
    assert isinstance(e.value, RuntimeError)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert "host failed" in str(e.value)


def test_traces_are_per_thread():
    import threading

    barrier = threading.Barrier(2, timeout=30)
    results, errors = {}, []

    def make(k):
        def f(x):
            barrier.wait()  # both threads are inside their own trace now
            y = x * float(k)
            barrier.wait()
            return y + 1.0

        return core.jit(f)

    def run(k):
        try:
            results[k] = np.asarray(make(k)(np.ones(3, np.float32)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(k,)) for k in (2, 5)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    np.testing.assert_array_equal(results[2], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(results[5], [6.0, 6.0, 6.0])

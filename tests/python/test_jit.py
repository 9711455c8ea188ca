"""olympus.jit and make_jaxpr: tracing once per signature, static arguments,
pytrees in and out, nesting, keyword arguments, printed programs."""
import collections
import functools

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import tree_util


def test_traces_once_per_signature():
    calls = []

    @olympus.jit
    def f(x, y):
        calls.append(1)
        return x * 2 + y

    a = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(f(a, 1.0)), [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(np.asarray(f(a + 1, 2.0)), [4.0, 6.0, 8.0])
    assert len(calls) == 1 and f._trace_count == 1
    f(jnp.arange(4.0), 1.0)                   # new shape
    assert len(calls) == 2
    f(jnp.arange(3), 1.0)                     # new dtype
    assert len(calls) == 3
    f(a, jnp.asarray(np.float32(1.0)))        # weak scalar vs strong array: new signature
    assert len(calls) == 4
    f(a, 5.0)
    assert len(calls) == 4
    assert f._trace_count == 4
    assert f._cache_size() == 4


def test_numpy_and_python_arguments(mode):
    f = mode(lambda x, y: jnp.add(x, y))
    out = f(np.arange(3, dtype=np.float32), 2)
    assert isinstance(out, olympus.Array) and out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), [2.0, 3.0, 4.0])
    out = f(1, 2)
    assert out.dtype == np.int32 and out.weak_type and int(out) == 3


def test_static_argnums_and_argnames():
    traces = []

    def g(x, n, *, scale=1.0):
        traces.append((n, scale))
        return x * n * scale

    f = olympus.jit(g, static_argnums=1)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(f(x, 2)), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(f(x, 3)), [0.0, 3.0, 6.0])
    f(x, 3)
    assert traces == [(2, 1.0), (3, 1.0)]

    h = olympus.jit(g, static_argnames=("n", "scale"))
    np.testing.assert_array_equal(np.asarray(h(x, n=2, scale=0.5)), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(h(x, 2, scale=0.5)), [0.0, 1.0, 2.0])
    h(x, n=2, scale=0.5)
    assert traces[2] == (2, 0.5)
    assert len(traces) in (3, 4)  # a positional n may or may not share the keyword's entry
    assert h._trace_count == len(traces) - 2


def test_static_argnames_passed_positionally_is_static():
    seen = []

    @functools.partial(olympus.jit, static_argnames="n")
    def f(x, n):
        seen.append(type(n))
        for _ in range(n):           # needs a Python int
            x = x + 1
        return x

    assert float(f(jnp.asarray(0.0), 3)) == 3.0
    assert float(f(jnp.asarray(0.0), n=2)) == 2.0
    assert seen[0] is int


def test_partial_jit_decorator_with_static_argnums():
    @functools.partial(olympus.jit, static_argnums=(0,))
    def f(op, x):
        return x + 1 if op == "inc" else x - 1

    assert float(f("inc", jnp.asarray(1.0))) == 2.0
    assert float(f("dec", jnp.asarray(1.0))) == 0.0
    assert f._trace_count == 2


def test_jit_decorator_with_keyword_only_form():
    @olympus.jit(static_argnums=1)
    def f(x, k):
        return x * k

    assert float(f(jnp.asarray(2.0), 4)) == 8.0


def test_unhashable_static_argument_raises():
    f = olympus.jit(lambda x, cfg: x, static_argnums=1)
    with pytest.raises((TypeError, ValueError)):
        f(jnp.asarray(1.0), [1, 2])


Point = collections.namedtuple("Point", ["x", "y"])


@tree_util.register_pytree_node_class
class Box:
    def __init__(self, value, label):
        self.value = value
        self.label = label

    def tree_flatten(self):
        return (self.value,), self.label

    @classmethod
    def tree_unflatten(cls, label, children):
        return cls(children[0], label)


def test_pytree_arguments_and_outputs(mode):
    def f(tree):
        a, (b, c) = tree["pair"], tree["nested"]
        return {"sum": a + b, "list": [c * 2, None], "point": Point(a, c),
                "box": Box(b * 10, tree["box"].label), "tuple": (a,)}

    tree = {"pair": jnp.arange(2.0), "nested": (jnp.ones(2), jnp.asarray(3.0)),
            "box": Box(jnp.zeros(1), "lbl")}
    out = mode(f)(tree)
    np.testing.assert_array_equal(np.asarray(out["sum"]), [1.0, 2.0])
    assert out["list"][1] is None
    assert float(out["list"][0]) == 6.0
    assert isinstance(out["point"], Point)
    np.testing.assert_array_equal(np.asarray(out["point"].x), [0.0, 1.0])
    assert isinstance(out["box"], Box) and out["box"].label == "lbl"
    np.testing.assert_array_equal(np.asarray(out["box"].value), [10.0, 10.0])
    assert isinstance(out["tuple"], tuple) and len(out["tuple"]) == 1


def test_pytree_structure_change_retraces():
    f = olympus.jit(lambda t: tree_util.tree_map(lambda v: v + 1, t))
    f((jnp.ones(2), jnp.ones(2)))
    f((jnp.ones(2), jnp.ones(2)))
    assert f._trace_count == 1
    f([jnp.ones(2), jnp.ones(2)])
    f({"a": jnp.ones(2)})
    assert f._trace_count == 3


def test_nested_jit():
    inner_traces = []

    @olympus.jit
    def inner(x):
        inner_traces.append(1)
        return jnp.sin(x) * 2

    @olympus.jit
    def outer(x):
        return inner(x) + inner(x + 1)

    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(outer(jnp.asarray(x))),
                               np.sin(x) * 2 + np.sin(x + 1) * 2, rtol=1e-6)
    assert len(inner_traces) == 1
    np.testing.assert_allclose(np.asarray(inner(jnp.asarray(x))), np.sin(x) * 2, rtol=1e-6)
    assert len(inner_traces) == 1  # the eager call reuses the program traced inside outer


def test_closure_captures_arrays_and_outer_tracers():
    c = jnp.arange(3.0)

    @olympus.jit
    def f(x):
        @olympus.jit
        def g(y):
            return y + x + c   # x is a tracer of the outer trace

        return g(x * 2)

    np.testing.assert_array_equal(np.asarray(f(jnp.ones(3))), [3.0, 4.0, 5.0])


def test_keyword_arguments():
    @olympus.jit
    def f(x, y=2.0, *, z):
        return x * y + z

    assert float(f(jnp.asarray(1.0), z=jnp.asarray(3.0))) == 5.0
    assert float(f(jnp.asarray(1.0), y=4.0, z=1.0)) == 5.0
    assert float(f(x=jnp.asarray(2.0), z=0.0)) == 4.0


def test_jitted_function_keeps_name_and_doc():
    def my_function(x):
        """docstring here"""
        return x

    f = olympus.jit(my_function)
    assert f.__name__ == "my_function"
    assert f.__doc__ == "docstring here"
    assert f.__wrapped__ is my_function


def test_outputs_of_python_constants():
    f = olympus.jit(lambda x: (x, 1.0, np.arange(2)))
    a, b, c = f(jnp.asarray(2.0))
    assert isinstance(b, olympus.Array) and float(b) == 1.0
    assert isinstance(c, olympus.Array) and c.dtype == np.int32


def test_jit_with_x64(x64):
    f = olympus.jit(lambda x: x + 1.5)
    out = f(np.arange(3.0))
    assert out.dtype == (np.float64 if x64 else np.float32)


def test_error_in_traced_function_propagates_and_next_call_works():
    calls = []

    @olympus.jit
    def f(x):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("boom")
        return x + 1

    with pytest.raises(KeyError):
        f(jnp.asarray(1.0))
    assert float(f(jnp.asarray(1.0))) == 2.0


def test_shape_error_message_under_jit():
    f = olympus.jit(lambda x, y: jnp.add(x, y))
    with pytest.raises((TypeError, ValueError), match="ncompatible shapes"):
        f(jnp.zeros(3), jnp.zeros(4))


# ------------------------------------------------------------------ make_jaxpr

def test_make_jaxpr_golden_text():
    jaxpr = olympus.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(jnp.arange(5.0))
    assert str(jaxpr) == (
        "{ lambda ; a:f32[5]. let\n"
        "    b:f32[5] = sin a\n"
        "    c:f32[5] = mul b 2.0:f32[]\n"
        "  in (c,) }")


def test_make_jaxpr_numpy_functions():
    def f(x, y):
        return jnp.sum(jnp.maximum(x, y), axis=0)

    jaxpr = olympus.make_jaxpr(f)(jnp.zeros((2, 3)), jnp.zeros(3))
    text = str(jaxpr)
    assert text.startswith("{ lambda ; a:f32[2,3] b:f32[3]. let")
    assert "broadcast_in_dim" in text and "max" in text and "reduce_sum" in text
    assert text.endswith("in (e,) }")


def test_make_jaxpr_nested_jit_shows_pjit():
    inner = olympus.jit(lambda x: jnp.cos(x) + 1.0)
    text = str(olympus.make_jaxpr(lambda x: inner(x) * 3.0)(jnp.ones(2)))
    assert "pjit" in text and "cos" in text


def test_make_jaxpr_static_argnums_and_avals():
    jaxpr = olympus.make_jaxpr(lambda x, n: jnp.power(x, n), static_argnums=1)(jnp.ones(3), 3)
    assert "integer_pow[y=3]" in str(jaxpr)
    assert jaxpr.eqn_count == 1
    assert len(jaxpr.in_avals) == 1 and len(jaxpr.out_avals) == 1


def test_make_jaxpr_dead_code_is_kept_only_if_effectful():
    jaxpr = olympus.make_jaxpr(lambda x: jnp.exp(x))(1.0)
    assert str(jaxpr) == (
        "{ lambda ; a:f32[]. let\n"
        "    b:f32[] = exp a\n"
        "  in (b,) }")


# ------------------------------------------------------------------ helpers

def test_block_until_ready_devices_config():
    tree = {"a": jnp.ones(2), "b": [jnp.zeros(1), 3]}
    assert olympus.block_until_ready(tree) is tree
    devs = olympus.devices()
    assert len(devs) == olympus.device_count() >= 1
    assert repr(devs[0]) == "CpuDevice(id=0)"
    assert olympus.config.olympus_enable_x64 in (False, True)
    with pytest.raises(AttributeError):
        olympus.config.update("olympus_no_such_flag", True)
    with pytest.raises(AttributeError):
        olympus.config.olympus_no_such_flag


def test_config_switches_x64():
    olympus.config.update("olympus_enable_x64", True)
    assert olympus.config.olympus_enable_x64 is True
    assert jnp.zeros(2).dtype == np.float64
    olympus.config.update("olympus_enable_x64", False)
    assert olympus.config.olympus_enable_x64 is False
    assert jnp.zeros(2).dtype == np.float32


def test_shape_dtype_struct():
    s = olympus.ShapeDtypeStruct((5,), jnp.float32)
    assert repr(s) == "ShapeDtypeStruct(shape=(5,), dtype=float32)"
    assert s.shape == (5,) and s.dtype == np.dtype(np.float32) and s.ndim == 1 and s.size == 5
    assert s == olympus.ShapeDtypeStruct([5], "float32")
    assert hash(s) == hash(olympus.ShapeDtypeStruct((5,), np.float32))
    assert s != olympus.ShapeDtypeStruct((5,), np.int32)
    assert len({s, olympus.ShapeDtypeStruct((5,), np.float32)}) == 1


def test_tree_util():
    tree = {"b": (1, 2), "a": [3, None]}
    leaves, treedef = tree_util.tree_flatten(tree)
    assert leaves == [3, 1, 2]
    assert tree_util.tree_unflatten(treedef, [30, 10, 20]) == {"b": (10, 20), "a": [30, None]}
    assert tree_util.tree_leaves(tree) == [3, 1, 2]
    assert tree_util.tree_structure(tree) == treedef
    assert tree_util.tree_map(lambda x, y: x + y, tree, tree) == {"b": (2, 4), "a": [6, None]}
    assert tree_util.tree_structure(Box(1, "x")).num_leaves == 1
    p = tree_util.Partial(lambda a, b: a * b, jnp.asarray(3.0))
    out = olympus.jit(lambda fn, v: fn(v))(p, jnp.asarray(2.0))
    assert float(out) == 6.0


def test_device_put_get_and_make_jaxpr_return_shape():
    x = olympus.device_put(np.arange(3, dtype=np.float32))
    assert isinstance(x, olympus.Array) and x.dtype == np.float32
    assert olympus.device_put(x) is x
    back = olympus.device_get({"x": x})
    assert isinstance(back["x"], np.ndarray)
    np.testing.assert_array_equal(back["x"], [0.0, 1.0, 2.0])
    jaxpr, shape = olympus.make_jaxpr(lambda v: v.sum(), return_shape=True)(x)
    assert shape == olympus.ShapeDtypeStruct((), np.float32)
    assert "reduce_sum" in str(jaxpr)

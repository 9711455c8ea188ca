"""olympus.vmap: in_axes / out_axes (ints, None, negative, pytrees), axis_size,
nesting, composition with jit, closure capture and the errors users meet."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax, vmap

f32 = np.float32


def rng(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(f32)


def test_vmap_elementwise_matches_numpy():
    x = rng(7)
    out = vmap(jnp.sin)(x)
    np.testing.assert_allclose(np.asarray(out), np.sin(x), rtol=1e-6)
    assert out.shape == (7,) and out.dtype == f32


def test_vmap_unmapped_argument_none():
    x, y = rng(4, 3), rng(3, seed=1)
    out = vmap(lambda a, b: a * b + 1.0, in_axes=(0, None))(x, y)
    np.testing.assert_allclose(np.asarray(out), x * y + 1, rtol=1e-6)


def test_vmap_axis_1_and_negative_axis():
    x = rng(3, 4)
    np.testing.assert_allclose(np.asarray(vmap(jnp.sum, in_axes=1)(x)), x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(vmap(jnp.sum, in_axes=-1)(x)), x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(vmap(jnp.sum, in_axes=-2)(x)), x.sum(1), rtol=1e-5)


@pytest.mark.parametrize("out_axes", [0, 1, -1, 2])
def test_vmap_out_axes(out_axes):
    x = rng(5, 2, 3)
    out = vmap(lambda a: a * 2.0, out_axes=out_axes)(x)
    np.testing.assert_allclose(np.asarray(out), np.moveaxis(x * 2, 0, out_axes), rtol=1e-6)


def test_vmap_out_axes_none_for_unbatched_output():
    x = rng(4)
    a, b = vmap(lambda v: (v * 2.0, jnp.float32(3.0)), out_axes=(0, None))(x)
    np.testing.assert_allclose(np.asarray(a), 2 * x, rtol=1e-6)
    assert b.shape == () and float(b) == 3.0


def test_vmap_out_axes_none_for_batched_output_raises():
    with pytest.raises(ValueError):
        vmap(lambda v: v * 2.0, out_axes=None)(rng(4))


def test_vmap_pytree_in_axes_and_outputs():
    d = {"a": rng(3, 2), "b": rng(2, seed=1)}
    out = vmap(lambda t: {"s": t["a"] + t["b"], "p": t["a"] * 2.0},
               in_axes=({"a": 0, "b": None},))(d)
    assert set(out) == {"s", "p"}
    np.testing.assert_allclose(np.asarray(out["s"]), d["a"] + d["b"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["p"]), d["a"] * 2, rtol=1e-6)


def test_vmap_tuple_argument_prefix():
    x, y = rng(4, 2), rng(2, seed=1)
    out = vmap(lambda p: p[0] - p[1], in_axes=((0, None),))((x, y))
    np.testing.assert_allclose(np.asarray(out), x - y, rtol=1e-6)


def test_vmap_kwargs_are_mapped_over_axis_0():
    x, y = rng(3, 2), rng(3, 2, seed=2)
    out = vmap(lambda a, b=None: a + b)(x, b=y)
    np.testing.assert_allclose(np.asarray(out), x + y, rtol=1e-6)


def test_nested_vmap_outer_product():
    x, y = rng(3), rng(4, seed=1)
    out = vmap(vmap(lambda a, b: a * b, in_axes=(None, 0)), in_axes=(0, None))(x, y)
    np.testing.assert_allclose(np.asarray(out), np.outer(x, y), rtol=1e-6)


def test_vmap_matmul_batches_dot_general():
    a, b = rng(5, 3, 4), rng(5, 4, 2, seed=1)
    out = vmap(jnp.matmul)(a, b)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-5, atol=1e-6)
    m = vmap(lambda v: jnp.dot(b[0].T, v), in_axes=1, out_axes=1)(b[0])
    np.testing.assert_allclose(np.asarray(m), b[0].T @ b[0], rtol=1e-5)


def test_vmap_of_jit_and_jit_of_vmap():
    calls = []

    @olympus.jit
    def g(v):
        calls.append(1)
        return jnp.exp(v) - v

    x = rng(6)
    np.testing.assert_allclose(np.asarray(vmap(g)(x)), np.exp(x) - x, rtol=1e-6)
    h = olympus.jit(vmap(lambda v: jnp.cos(v) * 2.0))
    np.testing.assert_allclose(np.asarray(h(x)), np.cos(x) * 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(h(x + 1)), np.cos(x + 1) * 2, rtol=1e-6)
    assert h._trace_count == 1
    assert h._cache_size() == 1


def test_vmap_closure_over_outer_jit_value():
    @olympus.jit
    def f(x, s):
        return vmap(lambda r: r * s + x.sum())(x)

    x = rng(4)
    np.testing.assert_allclose(np.asarray(f(x, 3.0)), x * 3 + x.sum(), rtol=1e-5)


def test_vmap_axis_size_with_no_mapped_inputs():
    out = vmap(lambda v: v + 1.0, in_axes=None, axis_size=3, out_axes=None)(jnp.float32(2.0))
    assert float(out) == 3.0
    out = vmap(lambda: jnp.float32(1.0), axis_size=4, out_axes=None)()
    assert float(out) == 1.0


def test_vmap_inconsistent_sizes_raises():
    with pytest.raises(ValueError, match="vmap got inconsistent sizes for array axes to be mapped"):
        vmap(lambda a, b: a + b)(jnp.ones(3), jnp.ones(4))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        vmap(lambda a: a, axis_size=5)(jnp.ones(3))


def test_vmap_needs_a_mapped_input():
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        vmap(lambda a: a, in_axes=None)(jnp.ones(3))


def test_vmap_axis_out_of_range_raises():
    with pytest.raises(ValueError, match="rank"):
        vmap(lambda a: a, in_axes=2)(jnp.ones((3, 4)))


def test_vmap_in_axes_length_mismatch_raises():
    with pytest.raises(ValueError, match="in_axes"):
        vmap(lambda a, b: a + b, in_axes=(0,))(jnp.ones(3), jnp.ones(3))


def test_vmap_non_callable_raises():
    with pytest.raises(TypeError):
        vmap(3)


def test_vmap_make_jaxpr_shows_batched_program():
    text = str(olympus.make_jaxpr(vmap(jnp.sin))(jnp.ones((5, 2))))
    assert "sin" in text and "f32[5,2]" in text


def test_vmap_reductions_and_structural():
    x = rng(4, 3, 2)
    np.testing.assert_allclose(np.asarray(vmap(lambda a: a.T)(x)), x.transpose(0, 2, 1))
    np.testing.assert_allclose(np.asarray(vmap(lambda a: jnp.max(a, axis=0))(x)), x.max(1))
    np.testing.assert_allclose(np.asarray(vmap(lambda a: a.reshape(6))(x)), x.reshape(4, 6))


def test_vmap_where_and_select():
    x = rng(6)
    out = vmap(lambda v: jnp.where(v > 0, v, -v))(x)
    np.testing.assert_allclose(np.asarray(out), np.abs(x))
    out = vmap(lambda p, a, b: lax.select(p, a, b))(x > 0, x, -x)
    np.testing.assert_allclose(np.asarray(out), np.abs(x))


def test_vmap_keeps_the_function_name():
    def myfun(v):
        return v

    assert "myfun" in vmap(myfun).__name__


def test_eval_shape():
    out = olympus.eval_shape(lambda x, y: {"a": x @ y, "b": x.sum()},
                             olympus.ShapeDtypeStruct((2, 3), np.float32), jnp.ones((3, 4)))
    assert out["a"].shape == (2, 4) and out["a"].dtype == np.float32
    assert out["b"].shape == ()
    calls = []
    olympus.eval_shape(lambda x: olympus.pure_callback(lambda v: calls.append(1) or v, x, x), 1.0)
    assert calls == []


def test_unmapped_arguments_reach_the_function_as_given():
    """in_axes=None leaves are not traced: a Python int stays an int (range(n)
    works), an array stays concrete; tracers of an enclosing transform are
    closed over."""
    seen = []

    def f(x, n, table):
        seen.append((type(n).__name__, type(table).__name__))
        return x * sum(range(n)) + table[n - 1]

    table = np.array([10.0, 20.0, 30.0], np.float32)
    out = olympus.vmap(f, in_axes=(0, None, None))(jnp.arange(3.0), 3, table)
    np.testing.assert_allclose(out, np.arange(3.0) * 3 + 30.0)
    assert seen == [("int", "ndarray")]
    g = lambda y: olympus.vmap(lambda x, y: x * y, in_axes=(0, None))(jnp.arange(3.0), y).sum()
    assert float(olympus.grad(g)(2.0)) == 3.0
    h = olympus.jit(lambda x, y: olympus.vmap(lambda a, b: a * b, in_axes=(0, None))(x, y))
    np.testing.assert_allclose(h(jnp.arange(3.0), 5.0), [0.0, 5.0, 10.0])

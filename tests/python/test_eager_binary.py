"""jnp's binary ufuncs (add, subtract, multiply, ...) are one C call each
(_core.binary_ufunc): NumPy's promotion, broadcasting and boolean rules, the
same results as the operators, eagerly and under jit."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp

NAMES = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less",
         "less_equal", "greater", "greater_equal", "bitwise_and", "bitwise_or", "bitwise_xor",
         "left_shift", "right_shift", "floor_divide", "remainder", "true_divide", "arctan2",
         "nextafter", "divide", "mod"]


@pytest.mark.parametrize("name", NAMES)
def test_matches_numpy_on_mixed_operands(name):
    f, g = getattr(jnp, name), getattr(np, name)
    ints = name in ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
    x = np.arange(1, 7, dtype=np.int32 if ints else np.float32).reshape(2, 3)
    y = np.array([3, 1, 2], dtype=np.int32 if ints else np.float32)
    for a, b in ((x, y), (x, 2), (x[0, 0], y), (x, x)):
        got = f(jnp.asarray(a) if isinstance(a, np.ndarray) else a,
                jnp.asarray(b) if isinstance(b, np.ndarray) else b)
        want = g(a, b)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        assert np.asarray(got).dtype == want.dtype or name in ("true_divide", "divide", "arctan2")


def test_booleans_follow_numpy():
    t = jnp.asarray(np.array([True, False, True]))
    u = jnp.asarray(np.array([True, True, False]))
    np.testing.assert_array_equal(np.asarray(jnp.add(t, u)), [True, True, True])
    np.testing.assert_array_equal(np.asarray(jnp.multiply(t, u)), [True, False, False])
    assert np.asarray(jnp.add(t, u)).dtype == np.bool_
    for f in (lambda: jnp.subtract(t, u), lambda: t - u, lambda: jnp.subtract(True, False)):
        with pytest.raises(TypeError, match="subtract is not supported for boolean operands"):
            f()


def test_same_under_jit_and_eager():
    x = jnp.asarray(np.linspace(-3, 3, 11, dtype=np.float32))
    y = jnp.asarray(np.linspace(2, -1, 11, dtype=np.float32))
    for name in ("add", "subtract", "multiply", "maximum", "less"):
        f = getattr(jnp, name)
        np.testing.assert_array_equal(np.asarray(f(x, y)), np.asarray(olympus.jit(f)(x, y)))


def test_is_a_builtin_with_numpys_call_shape():
    assert jnp.add.__name__ == "add" and jnp.remainder.__name__ == "remainder"
    assert jnp.mod is jnp.remainder and jnp.divide is jnp.true_divide
    assert "add" in dir(jnp) and "add" in repr(jnp.add)
    assert "promotion" in jnp.add.__doc__
    with pytest.raises(TypeError, match="exactly 2 positional arguments"):
        jnp.add(1)
    with pytest.raises(TypeError, match="keyword"):
        jnp.add(1, x2=2)
    with pytest.raises(TypeError, match="unsupported operand type"):
        jnp.add(jnp.ones(2), "a")

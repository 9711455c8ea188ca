"""olympus.Array as a user meets it: reprs, indexing (vs NumPy), iteration,
methods, NumPy interop, Python scalar conversions, and the concretization error
under jit."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp


def f32(x):
    return jnp.asarray(np.asarray(x, np.float32))


# ------------------------------------------------------------------ printing

def test_repr_texts():
    assert repr(jnp.arange(3.0)) == "Array([0., 1., 2.], dtype=float32)"
    assert repr(jnp.asarray(1.0)) == "Array(1., dtype=float32, weak_type=True)"
    assert repr(jnp.array([0, 1])) == "Array([0, 1], dtype=int32)"
    assert repr(jnp.asarray(np.array([True, False]))) == "Array([ True, False], dtype=bool)"
    assert repr(jnp.zeros((0,))) == "Array([], shape=(0,), dtype=float32)"
    assert repr(jnp.zeros((2, 0), jnp.int32)) == "Array([], shape=(2, 0), dtype=int32)"
    assert repr(jnp.arange(6.0).reshape(2, 3)) == (
        "Array([[0., 1., 2.],\n"
        "       [3., 4., 5.]], dtype=float32)")
    assert repr(jnp.asarray(np.int8(-3))) == "Array(-3, dtype=int8)"


def test_repr_x64(x64):
    name = "float64" if x64 else "float32"
    assert repr(jnp.asarray(2.5)) == f"Array(2.5, dtype={name}, weak_type=True)"


def test_repr_long_wraps_dtype_to_next_line():
    text = repr(jnp.arange(30.0))
    lines = text.split("\n")
    assert text.startswith("Array([ 0.,  1.,")
    assert all(len(line) <= 75 for line in lines)
    assert lines[1].startswith("       ")  # aligned under the opening bracket
    assert text.endswith("dtype=float32)")
    np.testing.assert_array_equal(eval(text.replace("Array(", "np.array(")
                                       .replace("dtype=float32", "dtype=np.float32")),
                                  np.arange(30.0))


def test_str_and_format():
    assert str(jnp.arange(3.0)) == "[0. 1. 2.]"
    assert str(jnp.asarray(np.float32(1.5))) == "1.5"
    assert f"{jnp.asarray(np.float32(3.14159)):.2f}" == "3.14"
    assert f"{jnp.asarray(np.int32(42)):5d}" == "   42"
    assert f"{jnp.arange(2.0)}" == "[0. 1.]"
    assert "{}".format(jnp.asarray(7)) == "7"


def test_tracer_repr_inside_jit():
    seen = []

    @olympus.jit
    def f(x):
        seen.append(repr(x))
        seen.append(str(x))
        return x

    f(jnp.arange(5.0))
    assert seen[0] == "Traced<ShapedArray(float32[5])>with<DynamicJaxprTrace>"
    assert seen[1] == seen[0]
    f(2)
    assert seen[2] == "Traced<ShapedArray(int32[], weak_type=True)>with<DynamicJaxprTrace>"


# ------------------------------------------------------------------ indexing

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

KEYS = [0, 1, -1, -2, (0, 1), (1, -1, 2), (-2, -3, -4), slice(None), slice(1, None),
        slice(None, None, -1), (slice(None), 1), (slice(None), slice(0, 3, 2)),
        (Ellipsis, 1), (0, Ellipsis), (Ellipsis,), (None,), (None, 0), (0, None, 1),
        (slice(None), None, slice(None, None, -2)), (1, slice(2, 0, -1), Ellipsis),
        (Ellipsis, None), (slice(5, 10),), (slice(-100, 100, 3),),
        (slice(None), slice(None), slice(3, 0, -2)), (0, 0, 0), (Ellipsis, -1, None),
        (slice(2, 1),), ()]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_getitem_vs_numpy(key, mode):
    got = mode(lambda x: x[key])(jnp.asarray(X))
    want = X[key]
    assert tuple(got.shape) == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


def test_getitem_numpy_integer_and_array_scalar_index():
    x = jnp.asarray(X)
    np.testing.assert_array_equal(np.asarray(x[np.int64(1), jnp.asarray(2)]), X[1, 2])


def test_getitem_traced_index_under_jit():
    f = olympus.jit(lambda x, i: x[i])
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X), 1)), X[1])
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X), -1)), X[-1])
    g = olympus.jit(lambda x, i: x[:, i, 1:])
    np.testing.assert_array_equal(np.asarray(g(jnp.asarray(X), 2)), X[:, 2, 1:])


@pytest.mark.parametrize("key", [(0, 0, 0, 0), (Ellipsis, Ellipsis), 1.5, "a"])
def test_getitem_errors(key):
    with pytest.raises(IndexError):
        jnp.asarray(X)[key]


@pytest.mark.parametrize("key,want", [(2, (1,)), (-3, (0,)), ((0, 3), (0, 2)),
                                      ((0, 0, 4), (0, 0, 3)), ((1, -9), (1, 0))])
def test_getitem_static_out_of_bounds_clamps(key, want):
    # JAX's rule (NumPy raises): a gather clamps its index into the axis
    np.testing.assert_array_equal(np.asarray(jnp.asarray(X)[key]), X[want])


def test_iteration():
    x = jnp.asarray(X)
    rows = list(x)
    assert len(rows) == 2
    for r, w in zip(rows, X):
        assert isinstance(r, olympus.Array)
        np.testing.assert_array_equal(np.asarray(r), w)
    a, b = jnp.arange(2)
    assert int(a) == 0 and int(b) == 1
    with pytest.raises(TypeError):
        iter(jnp.asarray(1.0))
    assert len(x) == 2


def test_iteration_under_jit():
    f = olympus.jit(lambda x: [r * 2 for r in x])
    out = f(jnp.asarray(X))
    assert len(out) == 2
    np.testing.assert_array_equal(np.asarray(out[1]), X[1] * 2)


# ------------------------------------------------------------------ methods

def test_methods_match_numpy(mode):
    def f(x):
        return dict(T=x.T, astype=x.astype(jnp.int32), reshape=x.reshape(4, 6),
                    reshape_t=x.reshape((6, -1)), sum=x.sum(), sum0=x.sum(axis=0),
                    mean=x.mean(axis=(0, 2), keepdims=True), max=x.max(axis=1),
                    min=x.min(), prod=(x[0, 0] + 1).prod(), any=(x > 22).any(),
                    all=(x >= 0).all(axis=0), argmax=x.argmax(), argmin=x.argmin(axis=2),
                    flatten=x.flatten(), ravel=x.ravel(), squeeze=x[:, :1].squeeze(),
                    squeeze1=x[:1].squeeze(0), transpose=x.transpose(), transpose2=
                    x.transpose(2, 0, 1), transpose3=x.transpose((1, 0, 2)), copy=x.copy(),
                    cumsum=x.cumsum(axis=1), swapaxes=x.swapaxes(0, 1), conj=x.conj(),
                    real=x.real, imag=x.imag, clip=x.clip(3, 9), round=(x / 7).round(1))
    got = mode(f)(jnp.asarray(X))
    want = f(X)
    assert set(got) == set(want)
    for k in want:
        w = np.asarray(want[k])
        g = got[k]
        assert isinstance(g, olympus.Array), k
        assert tuple(g.shape) == w.shape, k
        exp_dtype = np.int32 if w.dtype == np.int64 else w.dtype
        assert g.dtype == exp_dtype, (k, g.dtype, w.dtype)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, err_msg=k)


def test_item_tolist_and_sizes():
    x = jnp.asarray(X)
    assert x[1, 2, 3].item() == 23.0
    assert x.item(5) == 5.0
    assert x[0, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert jnp.asarray(3).tolist() == 3
    assert x.nbytes == 96 and x.itemsize == 4
    assert (x.ndim, x.size, tuple(x.shape)) == (3, 24, (2, 3, 4))


def test_complex_parts_methods():
    z = jnp.asarray(np.array([1 + 2j, 3 - 4j], np.complex64))
    np.testing.assert_array_equal(np.asarray(z.real), [1, 3])
    np.testing.assert_array_equal(np.asarray(z.imag), [2, -4])
    np.testing.assert_array_equal(np.asarray(z.conj()), [1 - 2j, 3 + 4j])
    assert z.real.dtype == np.float32


# ------------------------------------------------------------------ interop

def test_numpy_view_is_zero_copy_and_read_only():
    x = jnp.arange(6.0)
    a = np.asarray(x)
    b = np.asarray(x)
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1.0
    m = memoryview(x)
    assert m.readonly and m.shape == (6,)
    np.testing.assert_array_equal(np.asarray(m), np.arange(6.0))
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


def test_numpy_functions_accept_arrays():
    x = jnp.arange(4.0)
    np.testing.assert_allclose(np.sin(np.asarray(x)), np.sin(np.arange(4.0, dtype=np.float32)))
    assert float(np.sum(x)) == 6.0
    assert np.shape(x) == (4,)


def test_numpy_array_on_left_defers_to_olympus():
    out = np.arange(3, dtype=np.float32) + jnp.arange(3.0)
    assert isinstance(out, olympus.Array)
    np.testing.assert_array_equal(np.asarray(out), [0.0, 2.0, 4.0])


def test_python_scalar_conversions():
    assert float(jnp.asarray(2.5)) == 2.5
    assert int(jnp.asarray(np.int32(-7))) == -7
    assert int(jnp.asarray(3.9)) == 3
    assert bool(jnp.asarray(0.0)) is False and bool(jnp.asarray(2)) is True
    assert complex(jnp.asarray(np.complex64(1 + 2j))) == 1 + 2j
    assert [10, 20, 30][jnp.asarray(1)] == 20
    assert float(jnp.ones((1, 1))) == 1.0
    with pytest.raises((TypeError, ValueError)):
        float(jnp.arange(3.0))
    with pytest.raises(ValueError):
        bool(jnp.arange(3.0))


def test_concretization_error_names_the_function():
    def my_branchy_function(x):
        if x > 0:
            return x
        return -x

    f = olympus.jit(my_branchy_function)
    with pytest.raises(olympus.ConcretizationTypeError) as info:
        f(1.0)
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert "`bool` function" in msg   # names the function that needed a concrete value


@pytest.mark.parametrize("conv", [float, int, np.asarray, lambda v: v.item()])
def test_concrete_conversions_of_tracers_raise(conv):
    f = olympus.jit(lambda x: conv(x))
    with pytest.raises(olympus.ConcretizationTypeError):
        f(jnp.asarray(1.0))


# ------------------------------------------------------------------ x.at[...]

AT_KEYS = [1, -1, (0, 2), (slice(None), 1), (slice(1, 3),), (slice(None, None, 2), slice(1, None)),
           (slice(None, None, -1), 0), (Ellipsis, slice(3, 0, -2)), (None, 1), (slice(5, 9),)]


@pytest.mark.parametrize("key", AT_KEYS, ids=[repr(k) for k in AT_KEYS])
@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
def test_at_updates_vs_numpy(key, op, mode):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    vals = np.float32(-2.5) if op != "multiply" else np.float32(3.0)
    got = mode(lambda x: getattr(x.at[key], op)(vals))(jnp.asarray(base))
    want = base.copy()
    if op == "set":
        want[key] = vals
    elif op == "add":
        want[key] += vals
    elif op == "multiply":
        want[key] *= vals
    elif op == "min":
        want[key] = np.minimum(want[key], vals)
    else:
        want[key] = np.maximum(want[key], vals)
    assert got.dtype == np.float32 and tuple(got.shape) == (3, 4)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_at_set_with_array_values_and_traced_index():
    x = jnp.zeros((3, 4), jnp.int32)
    out = x.at[1:, 1:3].set(jnp.asarray(np.array([[1, 2], [3, 4]], np.int32)))
    want = np.zeros((3, 4), np.int32)
    want[1:, 1:3] = [[1, 2], [3, 4]]
    np.testing.assert_array_equal(np.asarray(out), want)
    f = olympus.jit(lambda v, i, y: v.at[i].add(y))
    want = np.zeros((3, 4), np.int32)
    want[-1] += np.arange(4)
    np.testing.assert_array_equal(np.asarray(f(x, -1, jnp.arange(4))), want)
    np.testing.assert_array_equal(np.asarray(x), 0)   # x itself is unchanged
    assert float(jnp.arange(3.0).at[1].get()) == 1.0


def test_static_shape_arguments_must_be_concrete():
    with pytest.raises(olympus.ConcretizationTypeError, match="arange"):
        olympus.jit(lambda n: jnp.arange(n))(3)
    out = olympus.jit(lambda x, n: jnp.arange(n) + x, static_argnums=1)(1, 3)
    np.testing.assert_array_equal(np.asarray(out), [1, 2, 3])

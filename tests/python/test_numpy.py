"""olympus.numpy against NumPy: values and dtypes, x64 off and on, eagerly and
under jit, with broadcasting and zero-size arrays."""
import math

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp

_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
           np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}


def canon(dt):
    dt = np.dtype(dt)
    return dt if olympus.config.olympus_enable_x64 else _NARROW.get(dt, dt)


def check(got, want, rtol=None, atol=None, dtype=None):
    """got is an olympus Array equal to NumPy's want, with want's canonical dtype."""
    want = np.asarray(want)
    assert isinstance(got, olympus.Array), type(got)
    exp = np.dtype(dtype) if dtype is not None else canon(want.dtype)
    assert got.dtype == exp, (got.dtype, exp)
    assert tuple(got.shape) == want.shape, (got.shape, want.shape)
    g = np.asarray(got)
    w = want.astype(exp)
    if np.issubdtype(exp, np.inexact):
        single = exp in (np.float32, np.complex64)
        half = exp == np.float16
        r = rtol if rtol is not None else (2e-3 if half else 2e-6 if single else 1e-12)
        a = atol if atol is not None else (1e-3 if half else 2e-6 if single else 1e-12)
        np.testing.assert_allclose(g, w, rtol=r, atol=a)
    else:
        np.testing.assert_array_equal(g, w)


def run(mode, f, *args):
    return mode(f)(*args)


# ------------------------------------------------------------------ unary

X = np.array([[-1.5, -0.5, 0.0], [0.25, 2.5, 3.0]])
POS = np.array([[0.5, 1.0, 1.5], [2.0, 3.5, 10.0]])
UNIT = np.array([[-0.9, -0.5, 0.0], [0.1, 0.5, 0.75]])
GE1 = np.array([[1.0, 1.5, 2.0], [3.0, 4.0, 10.0]])

UNARY_FLOAT = [
    ("sin", X), ("cos", X), ("tan", UNIT), ("arcsin", UNIT), ("arccos", UNIT),
    ("arctan", X), ("sinh", X), ("cosh", X), ("tanh", X), ("arcsinh", X),
    ("arccosh", GE1), ("arctanh", UNIT), ("exp", X), ("exp2", X), ("log", POS),
    ("log2", POS), ("log10", POS), ("log1p", POS), ("expm1", X), ("sqrt", POS),
    ("cbrt", X),
]


@pytest.mark.parametrize("name,data", UNARY_FLOAT, ids=[n for n, _ in UNARY_FLOAT])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_float(name, data, dtype, x64, mode):
    x = data.astype(dtype)
    got = run(mode, getattr(jnp, name), jnp.asarray(x))
    check(got, getattr(np, name)(x.astype(canon(dtype))), rtol=1e-5 if canon(dtype) ==
          np.float32 else None)


@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "log1p", "arctan", "cbrt"])
def test_unary_float_of_int_gives_default_float(name, x64, mode):
    x = np.array([0, 1, 2, 9], np.int32)
    got = run(mode, getattr(jnp, name), jnp.asarray(x))
    # NumPy computes in float64; olympus in the default float (float32 with x64 off)
    check(got, getattr(np, name)(x), rtol=1e-5)
    assert got.dtype == (np.float64 if x64 else np.float32)


def test_unary_of_python_scalar_is_weak(x64):
    y = jnp.sin(1.0)
    assert y.weak_type and y.dtype == (np.float64 if x64 else np.float32)
    np.testing.assert_allclose(float(y), math.sin(1.0), rtol=1e-6)


SAME_DTYPE_UNARY = [("square", [np.float32, np.int32, np.int8, np.float64]),
                    ("abs", [np.float32, np.int32, np.int16, np.float64]),
                    ("absolute", [np.float32]),
                    ("sign", [np.float32, np.int32, np.float64]),
                    ("negative", [np.float32, np.int32, np.int64]),
                    ("positive", [np.float32, np.int32])]


@pytest.mark.parametrize("name,dtypes", SAME_DTYPE_UNARY, ids=[n for n, _ in SAME_DTYPE_UNARY])
def test_unary_same_dtype(name, dtypes, x64, mode):
    for dt in dtypes:
        x = np.array([[-3, -1, 0], [1, 2, 5]]).astype(dt)
        check(run(mode, getattr(jnp, name), jnp.asarray(x)),
              getattr(np, name)(x.astype(canon(dt))))


@pytest.mark.parametrize("name", ["floor", "ceil", "rint", "trunc", "fix"])
def test_rounding(name, x64, mode):
    x = np.array([-2.5, -1.5, -0.5, -0.2, 0.0, 0.5, 1.5, 2.5, 2.7], np.float32)
    check(run(mode, getattr(jnp, name), jnp.asarray(x)), getattr(np, name)(x))
    xi = np.array([-3, 0, 4], np.int32)
    check(run(mode, getattr(jnp, name), jnp.asarray(xi)), getattr(np, name)(xi))


def test_round_half_to_even_and_decimals(x64, mode):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2345, -7.891], np.float32)
    check(run(mode, jnp.round, jnp.asarray(x)), np.round(x))
    check(run(mode, lambda v: jnp.round(v, 2), jnp.asarray(x)), np.round(x, 2), rtol=1e-6)
    check(jnp.around(jnp.asarray(x)), np.around(x))
    xi = np.array([1, -7, 12, 150, 250, -250, -1234, 1251], np.int32)
    check(jnp.round(jnp.asarray(xi)), np.round(xi))
    check(run(mode, lambda v: jnp.round(v, -2), jnp.asarray(xi)), np.round(xi, -2))


def test_isnan_isinf_isfinite(x64, mode):
    x = np.array([0.0, -1.0, np.nan, np.inf, -np.inf, 3.5], np.float32)
    for name in ["isnan", "isinf", "isfinite"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(x)), getattr(np, name)(x))
        xi = np.array([1, 2], np.int32)
        check(run(mode, getattr(jnp, name), jnp.asarray(xi)), getattr(np, name)(xi))


def test_reciprocal(x64, mode):
    x = np.array([0.5, -4.0, 8.0], np.float32)
    check(run(mode, jnp.reciprocal, jnp.asarray(x)), np.reciprocal(x))


def test_complex_parts(x64, mode):
    z = np.array([1 + 2j, -3.5 - 0.5j, 0j], np.complex64)
    for name in ["real", "imag", "conj", "conjugate"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(z)), getattr(np, name)(z))
    check(run(mode, jnp.abs, jnp.asarray(z)), np.abs(z))
    check(run(mode, jnp.exp, jnp.asarray(z)), np.exp(z), rtol=1e-5)


# ------------------------------------------------------------------ binary

A = np.array([[-7, -3, 0], [2, 5, 9]])
B = np.array([[2, 3, -4], [3, -2, 4]])

BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod",
          "remainder", "maximum", "minimum", "power", "equal", "not_equal", "less",
          "less_equal", "greater", "greater_equal", "arctan2"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_binary_same_dtype(name, dtype, x64, mode):
    a, b = A.astype(dtype), B.astype(dtype)
    if name == "power":
        b = np.abs(b)
        if np.issubdtype(dtype, np.floating):
            a = np.abs(a) + 0.5
    ca, cb = a.astype(canon(dtype)), b.astype(canon(dtype))
    got = run(mode, getattr(jnp, name), jnp.asarray(a), jnp.asarray(b))
    want = getattr(np, name)(ca, cb)
    if name in ("divide", "true_divide", "arctan2") and np.issubdtype(dtype, np.integer):
        check(got, want, dtype=canon(np.float64), rtol=1e-6)   # the default float
    else:
        check(got, want, rtol=1e-5 if canon(dtype) == np.float32 else None)


def test_floor_divide_and_mod_signs(mode):
    a = np.array([7, -7, 7, -7, 0, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3, -3], np.int32)
    for name in ["floor_divide", "remainder", "mod"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(a), jnp.asarray(b)),
              getattr(np, name)(a, b))
        check(run(mode, getattr(jnp, name), jnp.asarray(a.astype(np.float32)),
                  jnp.asarray(b.astype(np.float32))),
              getattr(np, name)(a.astype(np.float32), b.astype(np.float32)))
    check(jnp.fmod(jnp.asarray(a), jnp.asarray(b)), np.fmod(a, b))
    q, r = jnp.divmod(jnp.asarray(a), jnp.asarray(b))
    check(q, np.floor_divide(a, b))
    check(r, np.mod(a, b))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32, np.float16])
def test_binary_small_dtypes_stay(dtype, mode):
    a = np.array([1, 2, 3, 4], dtype)
    b = np.array([4, 3, 2, 1], dtype)
    for name in ["add", "multiply", "maximum", "minimum", "less"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(a), jnp.asarray(b)),
              getattr(np, name)(a, b))


def test_bool_add_multiply_are_logical(mode):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    check(run(mode, jnp.add, jnp.asarray(a), jnp.asarray(b)), np.add(a, b))
    check(run(mode, jnp.multiply, jnp.asarray(a), jnp.asarray(b)), np.multiply(a, b))
    with pytest.raises(TypeError):
        jnp.subtract(jnp.asarray(a), jnp.asarray(b))


# mixed dtypes: olympus follows JAX's lattice (int + float32 stays float32),
# where NumPy would widen to float64; with x64 off both end at float32.
MIXED = [
    (np.int32, np.float32, np.float32, np.float32),
    (np.int8, np.int16, np.int16, np.int16),
    (np.uint8, np.int8, np.int16, np.int16),
    (np.int32, np.uint32, np.int32, np.int64),
    (np.float32, np.float64, np.float32, np.float64),
    (np.bool_, np.int32, np.int32, np.int32),
    (np.float32, np.complex64, np.complex64, np.complex64),
    (np.int16, np.float16, np.float16, np.float16),
]


@pytest.mark.parametrize("da,db,off,on", MIXED)
def test_mixed_dtype_promotion(da, db, off, on, x64, mode):
    a = np.array([1, 0, 3]).astype(da)
    b = np.array([2, 1, 1]).astype(db)
    got = run(mode, jnp.add, jnp.asarray(a), jnp.asarray(b))
    exp = np.dtype(on if x64 else off)
    check(got, a.astype(exp) + b.astype(exp), dtype=exp)
    assert jnp.result_type(a.dtype, b.dtype) == exp
    assert jnp.promote_types(da, db) == exp


def test_python_scalars_are_weak(x64, mode):
    f32 = jnp.asarray(np.array([1.0, 2.0], np.float32))
    i8 = jnp.asarray(np.array([1, 2], np.int8))
    i32 = jnp.asarray(np.array([1, 2], np.int32))
    check(run(mode, lambda x: jnp.add(x, 2.5), f32), np.array([3.5, 4.5], np.float32))
    check(run(mode, lambda x: jnp.multiply(x, 3), i8), np.array([3, 6], np.int8))
    got = run(mode, lambda x: jnp.multiply(x, 0.5), i32)
    check(got, np.array([0.5, 1.0]), dtype=np.float64 if x64 else np.float32)
    check(run(mode, lambda x: jnp.maximum(x, 1.5), f32), np.array([1.5, 2.0], np.float32))
    check(run(mode, lambda x: jnp.power(x, 2), f32), np.array([1.0, 4.0], np.float32))
    check(run(mode, lambda x: jnp.power(x, 3), i32), np.array([1, 8], np.int32))
    check(run(mode, lambda x: jnp.power(2, x), i32), np.array([2, 4], np.int32))
    check(run(mode, lambda x: jnp.subtract(10, x), i8), np.array([9, 8], np.int8))


@pytest.mark.parametrize("sa,sb", [((3, 1), (4,)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                   ((), (2, 3)), ((5,), ()), ((1,), (0,)), ((0, 3), (3,))])
def test_broadcasting(sa, sb, mode):
    rng = np.random.default_rng(0)
    a = rng.normal(size=sa).astype(np.float32)
    b = rng.normal(size=sb).astype(np.float32)
    for name in ["add", "subtract", "multiply", "maximum", "greater", "arctan2"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(a), jnp.asarray(b)),
              getattr(np, name)(a, b), rtol=1e-5)
    check(run(mode, lambda x, y: jnp.where(x > 0, x, y), jnp.asarray(a), jnp.asarray(b)),
          np.where(a > 0, a, b))


def test_incompatible_shapes_raise():
    # NumPy raises ValueError, JAX TypeError ("add got incompatible shapes ...")
    with pytest.raises((TypeError, ValueError), match="ncompatible shapes"):
        jnp.add(jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError):
        jnp.broadcast_to(jnp.zeros(3), (2, 4))


def test_logical_and_bitwise(x64, mode):
    a = np.array([0, 1, 2, -3], np.int32)
    b = np.array([1, 1, 0, 5], np.int32)
    for name in ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                 "bitwise_xor"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(a), jnp.asarray(b)),
              getattr(np, name)(a, b))
    for name in ["logical_not", "bitwise_not", "invert"]:
        check(run(mode, getattr(jnp, name), jnp.asarray(a)), getattr(np, name)(a))
    t = np.array([True, False, True])
    check(jnp.bitwise_not(jnp.asarray(t)), np.bitwise_not(t))
    check(jnp.logical_and(jnp.asarray(np.array([0.0, 2.0, 1.0])), True),
          np.logical_and(np.array([0.0, 2.0, 1.0]), True))


def test_where_and_clip(x64, mode):
    x = np.array([[-2.0, 0.5], [3.0, -0.1]], np.float32)
    check(run(mode, lambda v: jnp.where(v > 0, v, 0.0), jnp.asarray(x)),
          np.where(x > 0, x, np.float32(0)))
    check(run(mode, lambda v: jnp.where(v > 0, 1, -1), jnp.asarray(x)),
          np.where(x > 0, 1, -1), dtype=np.int64 if x64 else np.int32)
    check(run(mode, lambda v: jnp.clip(v, -1.0, 1.0), jnp.asarray(x)), np.clip(x, -1, 1))
    check(run(mode, lambda v: jnp.clip(v, None, 0.0), jnp.asarray(x)), np.clip(x, None, 0))
    xi = np.array([-5, 0, 7], np.int32)
    check(run(mode, lambda v: jnp.clip(v, 0, 3), jnp.asarray(xi)), np.clip(xi, 0, 3))


# ------------------------------------------------------------------ reductions

R = np.arange(24).reshape(2, 3, 4) - 7.5


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "amax", "amin", "any",
                                  "all"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, axis, keepdims, mode):
    x = (R / 4).astype(np.float32)
    if name == "prod":
        x = (x / 8 + 1).astype(np.float32)
    if name in ("any", "all"):
        x = (np.abs(R) > 3).astype(np.float32)
    got = run(mode, lambda v: getattr(jnp, name)(v, axis=axis, keepdims=keepdims),
              jnp.asarray(x))
    check(got, getattr(np, name)(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64,
                                   np.uint32, np.float16, np.float32, np.float64])
def test_reduction_dtypes(dtype, x64, mode):
    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    cx = x.astype(canon(dtype))
    for name in ["sum", "prod", "max", "min", "cumsum", "cumprod"]:
        if dtype == np.float16 and name in ("prod", "cumprod"):
            continue
        f = (lambda v: getattr(jnp, name)(v, axis=0)) if name.startswith("cum") else \
            getattr(jnp, name)
        want = getattr(np, name)(cx, axis=0) if name.startswith("cum") else \
            getattr(np, name)(cx)
        check(run(mode, f, jnp.asarray(x)), want, rtol=1e-3 if dtype == np.float16 else None)
    # mean: ints and bools average in the default float
    got = run(mode, jnp.mean, jnp.asarray(x))
    want = np.mean(cx)
    check(got, want, dtype=canon(want.dtype), rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_sum_dtype_argument_and_mean_axis(x64, mode):
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    check(run(mode, lambda v: jnp.sum(v, dtype=jnp.float32), jnp.asarray(x)),
          np.sum(x, dtype=np.float32))
    check(run(mode, lambda v: jnp.mean(v, axis=1), jnp.asarray(x)), np.mean(x, axis=1),
          rtol=1e-6)
    check(run(mode, lambda v: jnp.var(v, axis=0), jnp.asarray(x.astype(np.float32))),
          np.var(x.astype(np.float32), axis=0))
    check(run(mode, lambda v: jnp.std(v), jnp.asarray(x.astype(np.float32))),
          np.std(x.astype(np.float32)), rtol=1e-6)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argminmax(name, x64, mode):
    x = np.array([[3, 9, 1, 9], [7, 0, 0, 8], [5, 5, 5, 5]], np.float32)
    for axis in [None, 0, 1, -1]:
        check(run(mode, lambda v: getattr(jnp, name)(v, axis=axis), jnp.asarray(x)),
              getattr(np, name)(x, axis=axis))
    check(run(mode, lambda v: getattr(jnp, name)(v, axis=1, keepdims=True), jnp.asarray(x)),
          getattr(np, name)(x, axis=1, keepdims=True))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative(name, x64, mode):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32) / 2
    for axis in [None, 0, 1, -1]:
        check(run(mode, lambda v: getattr(jnp, name)(v, axis=axis), jnp.asarray(x)),
              getattr(np, name)(x, axis=axis))


def test_zero_size_reductions(mode):
    x = np.zeros((0, 3), np.float32)
    check(run(mode, lambda v: jnp.sum(v, axis=0), jnp.asarray(x)), np.sum(x, axis=0))
    check(run(mode, lambda v: jnp.prod(v, axis=0), jnp.asarray(x)), np.prod(x, axis=0))
    check(run(mode, lambda v: jnp.sum(v, axis=1), jnp.asarray(x)), np.sum(x, axis=1))
    check(run(mode, jnp.any, jnp.asarray(x)), np.any(x))
    check(run(mode, jnp.all, jnp.asarray(x)), np.all(x))
    with pytest.raises(ValueError):
        jnp.max(jnp.asarray(x), axis=0)
    with pytest.raises(ValueError):
        jnp.argmax(jnp.asarray(x))


def test_zero_size_elementwise(mode):
    x = np.zeros((0, 3), np.float32)
    check(run(mode, jnp.sin, jnp.asarray(x)), np.sin(x))
    check(run(mode, lambda v: jnp.add(v, jnp.ones(3)), jnp.asarray(x)), x + np.ones(3))
    check(run(mode, lambda v: jnp.concatenate([v, jnp.ones((2, 3))]), jnp.asarray(x)),
          np.concatenate([x, np.ones((2, 3), np.float32)]))


# ------------------------------------------------------------------ linear algebra

@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                   ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                                   ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (4, 3, 2)),
                                   ((2, 0), (0, 3))])
def test_matmul(sa, sb, mode):
    rng = np.random.default_rng(1)
    a = rng.normal(size=sa).astype(np.float32)
    b = rng.normal(size=sb).astype(np.float32)
    check(run(mode, jnp.matmul, jnp.asarray(a), jnp.asarray(b)), np.matmul(a, b), rtol=1e-5,
          atol=1e-5)
    if len(sa) <= 2 and len(sb) <= 2:
        check(run(mode, jnp.dot, jnp.asarray(a), jnp.asarray(b)), np.dot(a, b), rtol=1e-5,
              atol=1e-5)


def test_dot_inner_outer_vdot(x64, mode):
    rng = np.random.default_rng(2)
    a = rng.normal(size=(2, 3, 4))
    b = rng.normal(size=(5, 4, 6))
    v = rng.normal(size=(4,))
    ca, cb, cv = (t.astype(canon(np.float64)) for t in (a, b, v))
    tol = dict(rtol=1e-5, atol=1e-5) if not x64 else {}
    check(run(mode, jnp.dot, jnp.asarray(a), jnp.asarray(b)), np.dot(ca, cb), **tol)
    check(run(mode, jnp.dot, jnp.asarray(a), 2.0), np.dot(ca, 2.0), **tol)
    check(run(mode, jnp.inner, jnp.asarray(a), jnp.asarray(v)), np.inner(ca, cv), **tol)
    check(run(mode, jnp.outer, jnp.asarray(v), jnp.asarray(a[0, 0])),
          np.outer(cv, ca[0, 0]), **tol)
    z1 = np.array([1 + 2j, 3 - 1j], np.complex64)
    z2 = np.array([0.5 - 1j, 2 + 2j], np.complex64)
    check(run(mode, jnp.vdot, jnp.asarray(z1), jnp.asarray(z2)), np.vdot(z1, z2), rtol=1e-6)
    ia = np.arange(6, dtype=np.int32).reshape(2, 3)
    check(run(mode, jnp.matmul, jnp.asarray(ia), jnp.asarray(ia.T)), ia @ ia.T)


# ------------------------------------------------------------------ shapes

S = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

SHAPE_CASES = [
    ("reshape", lambda m, x: m.reshape(x, (4, -1))),
    ("reshape_int", lambda m, x: m.reshape(x, -1)),
    ("ravel", lambda m, x: m.ravel(x)),
    ("transpose", lambda m, x: m.transpose(x)),
    ("transpose_axes", lambda m, x: m.transpose(x, (1, 2, 0))),
    ("swapaxes", lambda m, x: m.swapaxes(x, 0, 2)),
    ("moveaxis", lambda m, x: m.moveaxis(x, 0, -1)),
    ("moveaxis_multi", lambda m, x: m.moveaxis(x, (0, 1), (2, 0))),
    ("squeeze", lambda m, x: m.squeeze(m.reshape(x, (2, 1, 12, 1)))),
    ("squeeze_axis", lambda m, x: m.squeeze(m.reshape(x, (2, 1, 12, 1)), axis=-1)),
    ("expand_dims", lambda m, x: m.expand_dims(x, 1)),
    ("expand_dims_multi", lambda m, x: m.expand_dims(x, (0, -1))),
    ("concatenate", lambda m, x: m.concatenate([x, x], axis=1)),
    ("concatenate_none", lambda m, x: m.concatenate([x, x], axis=None)),
    ("stack", lambda m, x: m.stack([x, x, x])),
    ("stack_axis", lambda m, x: m.stack([x, x], axis=-1)),
    ("hstack", lambda m, x: m.hstack([x, x])),
    ("hstack_1d", lambda m, x: m.hstack([x[0, 0], x[1, 1]])),
    ("vstack", lambda m, x: m.vstack([x[0], x[1]])),
    ("vstack_1d", lambda m, x: m.vstack([x[0, 0], x[1, 1]])),
    ("broadcast_to", lambda m, x: m.broadcast_to(x[:, :1, :], (5, 2, 3, 4))),
    ("atleast_1d", lambda m, x: m.atleast_1d(x[0, 0, 0])),
    ("atleast_2d", lambda m, x: m.atleast_2d(x[0, 0])),
    ("flip", lambda m, x: m.flip(x)),
    ("flip_axis", lambda m, x: m.flip(x, 1)),
    ("flip_axes", lambda m, x: m.flip(x, (0, 2))),
]


@pytest.mark.parametrize("name,f", SHAPE_CASES, ids=[n for n, _ in SHAPE_CASES])
def test_shape_functions(name, f, mode):
    check(run(mode, lambda v: f(jnp, v), jnp.asarray(S)), f(np, S))


def test_broadcast_helpers(mode):
    assert jnp.broadcast_shapes((3, 1), (4,), ()) == (3, 4)
    assert jnp.broadcast_shapes((2, 1, 5), (3, 1)) == (2, 3, 5)
    with pytest.raises(ValueError):
        jnp.broadcast_shapes((3,), (4,))
    a, b = np.ones((3, 1), np.float32), np.arange(4, dtype=np.int32)
    ga, gb = run(mode, lambda x, y: tuple(jnp.broadcast_arrays(x, y)), jnp.asarray(a),
                 jnp.asarray(b))
    wa, wb = np.broadcast_arrays(a, b)
    check(ga, wa)
    check(gb, wb)


def test_concatenate_promotes(x64):
    got = jnp.concatenate([jnp.asarray(np.array([1, 2], np.int32)),
                           jnp.asarray(np.array([0.5], np.float32))])
    check(got, np.array([1, 2, 0.5], np.float32))


def test_shape_errors():
    x = jnp.zeros((2, 3))
    with pytest.raises((TypeError, ValueError)):
        jnp.reshape(x, (4, 2))
    with pytest.raises(ValueError):
        jnp.squeeze(x, 0)
    with pytest.raises(ValueError):
        jnp.stack([x, jnp.zeros((3, 2))])
    with pytest.raises(ValueError):
        jnp.concatenate([jnp.zeros(()), jnp.zeros(())])


# ------------------------------------------------------------------ creation

def test_creation_dtypes(x64, mode):
    f = mode(lambda: (jnp.zeros(3), jnp.ones((2, 2), jnp.int32), jnp.full((2,), 7),
                      jnp.full((2,), 1.5), jnp.empty((1, 2)), jnp.eye(3), jnp.identity(2),
                      jnp.arange(5), jnp.arange(5.0), jnp.arange(1, 7, 2),
                      jnp.arange(0.0, 1.0, 0.25), jnp.linspace(0, 1, 5),
                      jnp.zeros(4, jnp.float64), jnp.arange(3, dtype=jnp.float32)))
    got = f()
    want = (np.zeros(3), np.ones((2, 2), np.int32), np.full((2,), 7), np.full((2,), 1.5),
            np.zeros((1, 2)), np.eye(3), np.identity(2), np.arange(5), np.arange(5.0),
            np.arange(1, 7, 2), np.arange(0.0, 1.0, 0.25), np.linspace(0, 1, 5),
            np.zeros(4), np.arange(3, dtype=np.float32))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_creation_more(x64):
    check(jnp.eye(3, 4, 1, dtype=jnp.int32), np.eye(3, 4, 1, dtype=np.int32))
    check(jnp.linspace(0.0, 2.0, 4, endpoint=False), np.linspace(0.0, 2.0, 4, endpoint=False))
    check(jnp.linspace(1, 10, 7, dtype=jnp.int32), np.linspace(1, 10, 7, dtype=np.int32))
    check(jnp.arange(10, 0, -3), np.arange(10, 0, -3))
    check(jnp.arange(0), np.arange(0))
    check(jnp.zeros((0, 2)), np.zeros((0, 2)))
    check(jnp.full((2, 3), jnp.asarray(np.arange(3, dtype=np.float32))),
          np.full((2, 3), np.arange(3, dtype=np.float32)))
    check(jnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]))
    check(jnp.array([1.0, 2.0], dtype=jnp.float16), np.array([1.0, 2.0], np.float16))
    check(jnp.asarray(np.arange(4, dtype=np.int64)), np.arange(4))
    check(jnp.asarray([True, False]), np.asarray([True, False]))
    check(jnp.array(3.0, ndmin=2), np.array(3.0, ndmin=2))


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_functions(name, x64, mode):
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = run(mode, getattr(jnp, name), jnp.asarray(x))
    check(got, np.zeros_like(x) if name != "ones_like" else np.ones_like(x))
    got = run(mode, lambda v: jnp.full_like(v, 2.5, dtype=jnp.float32), jnp.asarray(x))
    check(got, np.full_like(x, 2.5, dtype=np.float32))


def test_array_of_traced_values_under_jit():
    f = olympus.jit(lambda a, b: jnp.array([a, b, a + b]))
    check(f(jnp.asarray(np.float32(1.0)), jnp.asarray(np.float32(2.5))),
          np.array([1.0, 2.5, 3.5], np.float32))


# ------------------------------------------------------------------ dtypes

def test_dtype_objects_and_result_type(x64):
    assert jnp.float32 is np.float32 and jnp.int8 is np.int8 and jnp.bool_ is np.bool_
    assert jnp.result_type(float, np.float32) == np.float32
    assert jnp.result_type(float) == (np.float64 if x64 else np.float32)
    assert jnp.result_type(int) == (np.int64 if x64 else np.int32)
    assert jnp.result_type(complex, np.float32) == np.complex64
    assert jnp.result_type(jnp.zeros(2, jnp.int8), 1) == np.int8
    assert jnp.result_type(np.float64) == (np.float64 if x64 else np.float32)
    assert jnp.issubdtype(jnp.int32, jnp.integer)
    assert jnp.issubdtype(jnp.uint8, jnp.unsignedinteger)
    assert not jnp.issubdtype(jnp.float32, jnp.integer)
    assert jnp.issubdtype(jnp.complex64, jnp.inexact)
    assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps
    assert jnp.iinfo(jnp.int8).max == 127
    assert jnp.pi == np.pi and jnp.e == np.e and jnp.inf == np.inf and np.isnan(jnp.nan)
    assert jnp.newaxis is None
    assert jnp.ndarray is olympus.Array
    assert isinstance(jnp.zeros(2), jnp.ndarray)


def test_astype(x64, mode):
    x = np.array([1.7, -2.2, 3.5], np.float32)
    check(run(mode, lambda v: v.astype(jnp.int32), jnp.asarray(x)), x.astype(np.int32))
    check(run(mode, lambda v: jnp.astype(v, jnp.float64), jnp.asarray(x)), x.astype(np.float64))
    check(run(mode, lambda v: v.astype(bool), jnp.asarray(x)), x.astype(bool))


# ------------------------------------------------------------------ olympus.lax

def test_lax_wrappers(mode):
    from olympus import lax
    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    def f(v):
        return dict(
            pad=lax.pad(v, 0.0, [(1, 0, 0), (0, 2, 1)]),
            dus=lax.dynamic_update_slice(v, jnp.ones((1, 2)), (1, 2)),
            ds=lax.dynamic_slice(v, (2, 1), (1, 3)),
            iota=lax.broadcasted_iota(jnp.int32, (2, 3), 1),
            sel=lax.select(v > 5, v, -v),
            dot=lax.dot_general(v, v, (((1,), (1,)), ((), ()))),
            rmax=lax.reduce_max(v, (0,)),
            conv=lax.convert_element_type(v, jnp.int8),
            ipow=lax.integer_pow(v, 3),
            cum=lax.cumsum(v, axis=1, reverse=True),
            cat=lax.concatenate([v, v], 0),
            sl=lax.slice(v, (0, 1), (3, 4), (2, 2)),
            tr=lax.transpose(v, (1, 0)),
            rs=lax.reshape(v, (2, 6)),
            bid=lax.broadcast_in_dim(v[0], (2, 4), (1,)),
            add=lax.add(v, 1.0), rnd=lax.round(v / 4 - 0.5),
        )

    got = mode(f)(jnp.asarray(x))
    padded = np.zeros((4, 9), np.float32)
    padded[1:, 0:7:2] = x
    dus = x.copy()
    dus[1, 2:4] = 1
    want = dict(pad=padded, dus=dus, ds=x[2:3, 1:4], iota=np.tile(np.arange(3), (2, 1)),
                sel=np.where(x > 5, x, -x), dot=x @ x.T, rmax=x.max(0),
                conv=x.astype(np.int8), ipow=x ** 3,
                cum=np.flip(np.cumsum(np.flip(x, 1), 1), 1), cat=np.concatenate([x, x]),
                sl=x[0:3:2, 1:4:2], tr=x.T, rs=x.reshape(2, 6), bid=np.tile(x[0], (2, 1)),
                add=x + 1, rnd=np.sign(x / 4 - 0.5) * np.floor(np.abs(x / 4 - 0.5) + 0.5))
    for k, w in want.items():
        check(got[k], w.astype(np.int32) if k == "iota" else w, rtol=1e-6)


def test_lax_does_not_promote():
    from olympus import lax
    with pytest.raises((TypeError, ValueError)):
        lax.add(jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.float32))

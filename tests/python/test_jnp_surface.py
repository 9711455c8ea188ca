"""The wider olympus.numpy surface (python/olympus/_src/jnp_more.py and the
where=/initial= reductions, traced linspace) against NumPy: values and dtypes
with x64 off and on, eagerly and under jit; gradients with check_grads; error
messages; and the coverage table docs/numpy_coverage.md against the package."""
import io
import math
import os
import re

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus.test_util import check_grads

_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
           np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def canon(dt):
    dt = np.dtype(dt)
    return dt if olympus.config.olympus_enable_x64 else _NARROW.get(dt, dt)


def _leaves(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def check(got, want, rtol=None, atol=None, dtype=None):
    """got (an Array, or a list/tuple of them) equals NumPy's want, with want's
    canonical dtype (or dtype, which may be a list)."""
    gl, wl = _leaves(got), _leaves(want)
    assert len(gl) == len(wl), (len(gl), len(wl))
    dts = dtype if isinstance(dtype, list) else [dtype] * len(gl)
    for g, w, dt in zip(gl, wl, dts):
        w = np.asarray(w)
        assert isinstance(g, olympus.Array), type(g)
        exp = np.dtype(dt) if dt is not None else canon(w.dtype)
        assert g.dtype == exp, (g.dtype, exp)
        assert tuple(g.shape) == w.shape, (g.shape, w.shape)
        gv, wv = np.asarray(g), w.astype(exp)
        if np.issubdtype(exp, np.inexact):
            single = exp in (np.float32, np.complex64)
            r = rtol if rtol is not None else (2e-5 if single else 1e-12)
            a = atol if atol is not None else (2e-5 if single else 1e-12)
            np.testing.assert_allclose(gv, wv, rtol=r, atol=a)
        else:
            np.testing.assert_array_equal(gv, wv)


def both(mode, f, *args, **kw):
    """f(np, *canonical numpy args) against mode(f(jnp, ...))(*Arrays)."""
    want = f(np, *[a.astype(canon(a.dtype)) for a in args])
    got = mode(lambda *xs: f(jnp, *xs))(*[jnp.asarray(a) for a in args])
    check(got, want, **kw)


R = np.random.default_rng(0)
M34 = R.standard_normal((3, 4)).astype(np.float32)
M234 = R.standard_normal((2, 3, 4)).astype(np.float32)
I34 = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
V5 = np.array([1.5, -2.0, 0.25, 3.0, -0.75], np.float32)
F64 = np.array([[0.1, -2.3, 4.5], [1.25, 7.0, -0.5]], np.float64)
NANS = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [-2.0, 0.5, np.nan]], np.float32)


# ------------------------------------------------------------------ shape manipulation

SHAPE_CASES = {
    "split_sections": (lambda m, x: m.split(x, 2, axis=1), M34),
    "split_indices": (lambda m, x: m.split(x, [1, 3, 10], axis=1), M34),
    "split_negative_indices": (lambda m, x: m.split(x, [-1, 2]), V5),
    "array_split": (lambda m, x: m.array_split(x, 3, axis=1), M34),
    "array_split_more_than_size": (lambda m, x: m.array_split(x, 7), V5),
    "hsplit": (lambda m, x: m.hsplit(x, 2), M34),
    "vsplit": (lambda m, x: m.vsplit(x, [1]), M34),
    "dsplit": (lambda m, x: m.dsplit(x, 2), M234),
    "dstack": (lambda m, x: m.dstack([x, x]), M34),
    "tile_int": (lambda m, x: m.tile(x, 2), M34),
    "tile_more_dims": (lambda m, x: m.tile(x, (2, 1, 3)), M34),
    "tile_fewer_reps": (lambda m, x: m.tile(x, (2,)), M234),
    "repeat_flat": (lambda m, x: m.repeat(x, 2), I34),
    "repeat_axis": (lambda m, x: m.repeat(x, 3, axis=1), M34),
    "repeat_counts": (lambda m, x: m.repeat(x, [2, 0, 1], axis=0), M34),
    "repeat_counts_runs": (lambda m, x: m.repeat(x, [1, 1, 3, 3, 0]), V5),
    "roll_flat": (lambda m, x: m.roll(x, 5), M34),
    "roll_axis": (lambda m, x: m.roll(x, -1, axis=1), M34),
    "roll_tuple": (lambda m, x: m.roll(x, (1, -6), axis=(0, 2)), M234),
    "rollaxis": (lambda m, x: m.rollaxis(x, 2, 0), M234),
    "rollaxis_start": (lambda m, x: m.rollaxis(x, 0, 3), M234),
    "rot90": (lambda m, x: m.rot90(x), M34),
    "rot90_k2": (lambda m, x: m.rot90(x, 2), M34),
    "rot90_k3_axes": (lambda m, x: m.rot90(x, -1, axes=(2, 1)), M234),
    "diagonal": (lambda m, x: m.diagonal(x), M34),
    "diagonal_offset": (lambda m, x: m.diagonal(x, 2), M34),
    "diagonal_negative": (lambda m, x: m.diagonal(x, -1, 2, 1), M234),
    "diagonal_empty": (lambda m, x: m.diagonal(x, 5), M34),
    "diag_of_matrix": (lambda m, x: m.diag(x, 1), M34),
    "diag_of_vector": (lambda m, x: m.diag(x), V5),
    "diag_of_vector_k": (lambda m, x: m.diag(x, -2), V5),
    "diag_of_vector_k_pos": (lambda m, x: m.diag(x, 3), I34[0]),
    "diagflat": (lambda m, x: m.diagflat(x, 1), I34[:2, :2]),
    "tril": (lambda m, x: m.tril(x), M34),
    "tril_k": (lambda m, x: m.tril(x, -1), M234),
    "triu_k": (lambda m, x: m.triu(x, 1), I34),
    "triu_bool": (lambda m, x: m.triu(x > 0, -1), M34),
    "kron": (lambda m, x: m.kron(x, x[:2, :3]), M34),
    "kron_ranks": (lambda m, x: m.kron(x[0], x), I34),
    "append_flat": (lambda m, x: m.append(x, x[0]), M34),
    "append_axis": (lambda m, x: m.append(x, x[:1], axis=0), M34),
    "resize_bigger": (lambda m, x: m.resize(x, (4, 5)), M34),
    "resize_smaller": (lambda m, x: m.resize(x, 5), I34),
    "unstack": (lambda m, x: tuple(x[i] for i in range(3)) if m is np else m.unstack(x), M34),
    "unstack_axis": (lambda m, x: tuple(x[:, :, i] for i in range(4)) if m is np
                     else m.unstack(x, axis=-1), M234),
    "matrix_transpose": (lambda m, x: np.swapaxes(x, -1, -2) if m is np
                         else m.matrix_transpose(x), M234),
    "block": (lambda m, x: m.block([[x, x[:, :1]], [x[:1], x[:1, :1]]]), M34),
    "block_1d": (lambda m, x: m.block([x, x]), V5),
    "block_rank_up": (lambda m, x: m.block([[x], [x]]), V5),
    "cross3": (lambda m, x: m.cross(x[:, :3], x[:, 1:]), M34),
    "cross2": (lambda m, x: m.cross(x[:, :2], x[:, 2:]), M34),
    "cross23": (lambda m, x: m.cross(x[:, :2], x[:, 1:]), M34),
    "cross_axis": (lambda m, x: m.cross(x[:3, :3], x[:3, 1:], axisa=0, axisb=1, axisc=0), M34),
}


@pytest.mark.parametrize("name", list(SHAPE_CASES))
def test_shape_functions(name, x64, mode):
    f, x = SHAPE_CASES[name]
    both(mode, f, x)


def test_shape_functions_x64_dtypes(x64):
    for f in (lambda m, x: m.tile(x, 2), lambda m, x: m.roll(x, 1), lambda m, x: m.diag(x[0]),
              lambda m, x: m.split(x, 3, axis=1), lambda m, x: m.repeat(x, 2, axis=0),
              lambda m, x: m.tril(x)):
        both(lambda g: g, f, F64)
        both(lambda g: g, f, F64.astype(np.int64))


def test_vander_keeps_dtype(x64, mode):
    # JAX's rule: x's dtype (NumPy widens ints to int64 and floats to float64)
    xi = np.array([1, 2, 3, -1], np.int32)
    check(mode(jnp.vander)(jnp.asarray(xi)), np.vander(xi), dtype=np.int32)
    check(mode(lambda v: jnp.vander(v, 3, increasing=True))(jnp.asarray(xi)),
          np.vander(xi, 3, increasing=True), dtype=np.int32)
    check(mode(lambda v: jnp.vander(v, 5))(jnp.asarray(V5)), np.vander(V5, 5),
          dtype=np.float32, rtol=1e-6)


def test_repeat_total_repeat_length(mode):
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    f = mode(lambda a, r: jnp.repeat(a, r, axis=0, total_repeat_length=7))
    check(f(jnp.asarray(x), jnp.asarray([2, 0, 3])),
          np.concatenate([np.repeat(x, [2, 0, 3], axis=0), x[-1:].repeat(2, 0)]))
    check(f(jnp.asarray(x), jnp.asarray([4, 4, 4])), np.repeat(x, 4, axis=0)[:7])
    g = mode(lambda a: jnp.repeat(a, 2, total_repeat_length=3))
    check(g(jnp.asarray(x[0])), np.array([1, 1, 2], np.int32))
    xf = np.array([0.5, -1.0, 2.0], np.float32)
    check(mode(lambda a, r: jnp.repeat(a, r, total_repeat_length=4))(
        jnp.asarray(xf), jnp.asarray([1, 2, 1])), np.repeat(xf, [1, 2, 1]))


def test_roll_traced_shift(mode):
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    f = olympus.jit(lambda a, s: jnp.roll(a, s, axis=1))
    for s in (0, 2, -3, 12):
        check(f(jnp.asarray(x), s), np.roll(x, s, axis=1))
    g = olympus.jit(lambda a, s: jnp.roll(a, s, axis=(0, 1)))
    check(g(jnp.asarray(x), jnp.asarray([1, -2])), np.roll(x, (1, -2), axis=(0, 1)))


# ------------------------------------------------------------------ pad

PAD_MODES = [
    ("constant", {}), ("constant", {"constant_values": 1.5}),
    ("constant", {"constant_values": ((1, 2), (3, 4))}), ("edge", {}), ("wrap", {}),
    ("reflect", {}), ("symmetric", {}), ("reflect", {"reflect_type": "odd"}),
    ("symmetric", {"reflect_type": "odd"}), ("linear_ramp", {}),
    ("linear_ramp", {"end_values": (-1, 5)}), ("maximum", {}), ("minimum", {"stat_length": 2}),
    ("mean", {}), ("mean", {"stat_length": ((1, 2), (3, 1))}), ("median", {}),
    ("median", {"stat_length": 2}),
]


@pytest.mark.parametrize("mode_name,kw", PAD_MODES,
                         ids=[f"{m}-{i}" for i, (m, _) in enumerate(PAD_MODES)])
def test_pad_modes(mode_name, kw, x64, mode):
    for width in (((2, 7), (1, 3)), 2):
        if mode_name == "wrap" and width != 2:
            continue    # NumPy 1.x's wrap is not periodic there: test_pad_wrap_is_periodic
        both(mode, lambda m, x: m.pad(x, width, mode=mode_name, **kw), M34)
    if mode_name not in ("linear_ramp",):   # NumPy 1.x truncates ramps; JAX floors
        both(mode, lambda m, x: m.pad(x, ((1, 2), (4, 0)), mode=mode_name, **kw), I34)


def test_pad_wrap_is_periodic(mode):
    # out[i] = a[(i - before) mod n] along each axis, however wide the padding
    # (NumPy 1.x breaks this when both sides are padded wider than the axis)
    got = mode(lambda x: jnp.pad(x, ((2, 7), (5, 1)), mode="wrap"))(jnp.asarray(M34))
    rows = (np.arange(3 + 9) - 2) % 3
    cols = (np.arange(4 + 6) - 5) % 4
    check(got, M34[np.ix_(rows, cols)])
    both(mode, lambda m, x: m.pad(x, ((0, 7), (5, 0)), mode="wrap"), M34)


def test_pad_empty_and_scalars(mode):
    got = mode(lambda x: jnp.pad(x, 2, mode="empty"))(jnp.asarray(M34))
    assert got.shape == (7, 8) and got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got)[2:-2, 2:-2], M34)
    both(mode, lambda m, x: m.pad(x, (1, 2)), V5)
    both(mode, lambda m, x: m.pad(x, [[3, 1]], mode="reflect"), V5[:2])
    both(mode, lambda m, x: m.pad(x, 4, mode="symmetric"), V5[:1])
    both(mode, lambda m, x: m.pad(x, 0, mode="median"), M34)


def test_pad_traced_constant_and_callable(mode):
    f = mode(lambda x, c: jnp.pad(x, 1, constant_values=c))
    check(f(jnp.asarray(M34), 2.5), np.pad(M34, 1, constant_values=2.5))

    def padder(v, width, axis, kwargs):
        return v.at[:width[0]].set(kwargs["value"]).at[v.shape[0] - width[1]:].set(-1.0)
    want = np.pad(M34, 2, mode=lambda v, w, i, kw: (v.__setitem__(slice(0, w[0]), kw["value"]),
                                                   v.__setitem__(slice(len(v) - w[1], None),
                                                                 -1.0)),
                  value=7.0)
    check(mode(lambda x: jnp.pad(x, 2, mode=padder, value=7.0))(jnp.asarray(M34)), want)


def test_pad_errors():
    x = jnp.asarray(M34)
    with pytest.raises(ValueError, match="mode 'bogus' is not supported"):
        jnp.pad(x, 1, mode="bogus")
    with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'edge'"):
        jnp.pad(x, 1, mode="edge", constant_values=3)
    with pytest.raises(ValueError, match="negative"):
        jnp.pad(x, -1)
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        jnp.pad(jnp.zeros((0, 2)), 1, mode="reflect")
    with pytest.raises(ValueError, match="reflect_type"):
        jnp.pad(x, 1, mode="reflect", reflect_type="diagonal")
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="pad"):
        olympus.jit(lambda a, w: jnp.pad(a, w))(x, 2)


# ------------------------------------------------------------------ grids and indices

def test_index_helpers(x64, mode):
    # NumPy's intp results: the default int (int32 with x64 off)
    for f in (lambda m: m.tril_indices(4), lambda m: m.tril_indices(3, 1, 5),
              lambda m: m.triu_indices(4, -1), lambda m: m.triu_indices_from(np.ones((3, 5)), 1),
              lambda m: m.tril_indices_from(np.ones((4, 2))), lambda m: m.diag_indices(3),
              lambda m: m.diag_indices_from(np.ones((2, 2, 2))),
              lambda m: m.indices((2, 3)), lambda m: m.indices((2, 3), sparse=True),
              lambda m: m.mask_indices(3, m.triu, 1)):
        check(mode(lambda _: f(jnp))(0), f(np))
    check(mode(lambda _: jnp.indices((2, 2), dtype=np.float32))(0),
          np.indices((2, 2), dtype=np.float32))


def test_meshgrid_and_ix(x64, mode):
    a, b, c = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.int32), V5
    for kw in ({}, {"indexing": "ij"}, {"sparse": True}, {"sparse": True, "indexing": "ij"}):
        both(mode, lambda m, x, y, z: m.meshgrid(x, y, z, **kw), a, b, c)
        both(mode, lambda m, x, y: m.meshgrid(x, y, **kw), a, b)
    both(mode, lambda m, x: m.meshgrid(x), a)
    both(mode, lambda m, x, y: m.ix_(x, y), np.array([0, 2], np.int32), b)
    check(jnp.ix_(np.array([True, False, True]), [1, 2]), np.ix_(np.array([True, False, True]),
                                                               [1, 2]))


def test_mgrid_ogrid_r_c(x64, mode):
    f = mode(lambda _: (jnp.mgrid[0:3, 1:5:2], jnp.mgrid[-1:1:5j], *jnp.ogrid[0:2, 0:3],
                        jnp.mgrid[0:1:0.25, 0:2]))
    check(f(0), (np.mgrid[0:3, 1:5:2], np.mgrid[-1:1:5j], *np.ogrid[0:2, 0:3],
                 np.mgrid[0:1:0.25, 0:2]))
    x = jnp.asarray(V5)
    # an int range joins float32 values as float32 (JAX's promotion; NumPy: float64)
    check(mode(lambda v: jnp.r_[v, 0, 1:3, v[:2]])(x), np.r_[V5, 0, 1:3, V5[:2]],
          dtype=np.float32)
    check(mode(lambda v: jnp.r_["0,2,0", v, v])(x), np.r_["0,2,0", V5, V5])
    check(mode(lambda v: jnp.r_["-1,2", v, v])(x), np.r_["-1,2", V5, V5])
    check(mode(lambda v: jnp.c_[v, v, 0:5])(x), np.c_[V5, V5, 0:5], dtype=np.float32)
    check(jnp.r_[0:1:4j], np.r_[0:1:4j])
    assert jnp.s_[1:2, ::3] == np.s_[1:2, ::3] and jnp.index_exp[2] == (2,)
    with pytest.raises(ValueError, match="special directives must be the first"):
        jnp.r_[x, "0"]


def test_ravel_unravel(x64, mode):
    idx = (np.array([0, 1, 2, 1], np.int32), np.array([3, 0, 4, 2], np.int32))
    for order in ("C", "F"):
        check(jnp.ravel_multi_index(idx, (3, 5), order=order),
              np.ravel_multi_index(idx, (3, 5), order=order).astype(np.int32))
    bad = (np.array([0, 4], np.int32), np.array([-1, 7], np.int32))
    for m in ("clip", "wrap"):
        check(mode(lambda a, b: jnp.ravel_multi_index((a, b), (3, 5), mode=m))(*bad),
              np.ravel_multi_index(bad, (3, 5), mode=m).astype(np.int32))
    with pytest.raises(ValueError, match="invalid entry in coordinates array"):
        jnp.ravel_multi_index(bad, (3, 5))
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="mode='wrap'"):
        olympus.jit(lambda a, b: jnp.ravel_multi_index((a, b), (3, 5)))(*bad)
    flat = np.array([0, 7, 14, 3], np.int32)
    check(mode(lambda f: jnp.unravel_index(f, (3, 5)))(flat), np.unravel_index(flat, (3, 5)),
          dtype=[np.int32, np.int32])
    # JAX's rule: negative indices count from the end, out-of-bound ones are clipped
    check(jnp.unravel_index(jnp.asarray([-1, 15, -16], np.int32), (3, 5)),
          (np.array([2, 2, 0]), np.array([4, 4, 0])), dtype=[np.int32, np.int32])


# ------------------------------------------------------------------ comparisons and selection

def test_isclose_family(x64, mode):
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 2.0, np.inf], np.float32)
    b = np.array([1.0 + 1e-7, np.nan, np.inf, np.inf, 0.0, 2.1, 1.0], np.float32)
    both(mode, lambda m, x, y: m.isclose(x, y), a, b)
    both(mode, lambda m, x, y: m.isclose(x, y, equal_nan=True, rtol=0.1), a, b)
    both(mode, lambda m, x, y: m.allclose(x[:1], y[:1]), a, b)
    both(mode, lambda m, x, y: m.allclose(x, y, equal_nan=True), a, a)
    both(mode, lambda m, x, y: m.isclose(x, y), I34, I34 + 1)
    both(mode, lambda m, x, y: m.array_equal(x, y), I34, I34)
    both(mode, lambda m, x, y: m.array_equal(x, y), I34, I34[:2])
    both(mode, lambda m, x, y: m.array_equal(x, y, equal_nan=True), a, a)
    both(mode, lambda m, x, y: m.array_equal(x, y), a, a)
    both(mode, lambda m, x, y: m.array_equiv(x, y), I34, I34[:1])
    both(mode, lambda m, x, y: m.array_equiv(x, y), I34, I34[:1] + 1)
    both(mode, lambda m, x, y: m.array_equiv(x, y), I34, I34[:2])


def test_select_piecewise_isin(x64, mode):
    both(mode, lambda m, x: m.select([x < -1, x > 1, x > 0], [x, x * 2, -x]), M34)
    both(mode, lambda m, x: m.select([x < 0, x > 2], [x, 3 * x], default=-7), I34)
    both(mode, lambda m, x: m.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * v,
                                                            lambda v: v + 10]), M34)
    both(mode, lambda m, x: m.piecewise(x, [x < 0, x > -1], [0.5, lambda v: v * 3]), M34)
    both(mode, lambda m, x: m.piecewise(x, x > 0, [lambda v: v + 1]), I34[0])
    both(mode, lambda m, x, t: m.isin(x, t), I34, np.array([0, 3, -5, 100], np.int32))
    both(mode, lambda m, x, t: m.isin(x, t, invert=True), I34, np.array([[1], [6]], np.int32))
    with pytest.raises(ValueError, match="same length"):
        jnp.select([jnp.asarray(M34) > 0], [1, 2])
    with pytest.raises(ValueError, match="either 2 or 3 functions"):
        jnp.piecewise(jnp.asarray(M34), [M34 > 0, M34 < 0], [1])


# ------------------------------------------------------------------ reductions

@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on empty selections
def test_reductions_where_initial(x64, mode):
    w = M34 > -0.3
    for name, kw in [("sum", {}), ("sum", {"initial": 2.0}), ("prod", {"initial": 0.5}),
                     ("max", {"initial": -1.0}), ("min", {"initial": 0.25}), ("mean", {}),
                     ("var", {}), ("std", {"ddof": 1}), ("any", {}), ("all", {})]:
        for axis in (None, 1):
            both(mode, lambda m, x, msk: getattr(m, name)(x, axis=axis, where=msk, **kw),
                 M34, w)
    both(mode, lambda m, x: m.sum(x, axis=0, initial=3, keepdims=True), I34)
    both(mode, lambda m, x: m.max(x, axis=0, initial=4), I34)
    both(mode, lambda m, x: m.max(x[:0], axis=0, initial=4), I34)
    both(mode, lambda m, x, msk: m.sum(x, where=msk[0]), I34, w)   # where broadcasts
    both(mode, lambda m, x: m.var(x, axis=1, ddof=2), M34)
    check(mode(lambda x: jnp.var(x, correction=1))(jnp.asarray(M34)), np.var(M34, ddof=1))
    with pytest.raises(ValueError, match="to use a where mask one has to specify 'initial'"):
        jnp.max(jnp.asarray(M34), where=jnp.asarray(w))
    with pytest.raises(NotImplementedError, match="'out'"):
        jnp.sum(jnp.asarray(M34), out=np.zeros(()))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on empty selections
def test_nan_reductions(x64, mode):
    for name in ("nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                 "nancumsum", "nancumprod"):
        for axis in (None, 0, 1):
            if name in ("nanmax", "nanmin", "nanmean", "nanvar", "nanstd") and axis != 1:
                x = NANS[[0, 2]]      # NumPy warns on all-nan slices; checked below
            else:
                x = NANS
            both(mode, lambda m, v: getattr(m, name)(v, axis=axis), x)
    with np.errstate(all="ignore"):
        both(mode, lambda m, v: (m.nanmax(v, axis=1), m.nanmean(v, axis=1),
                                 m.nanvar(v, axis=1, ddof=1)), NANS)
    both(mode, lambda m, v: m.nanargmax(v, axis=1), NANS[[0, 2]])
    both(mode, lambda m, v: (m.nanargmin(v), m.nanargmin(v, axis=0)), NANS[[0, 2]])
    check(mode(lambda v: jnp.nanargmax(v, axis=1))(jnp.asarray(NANS)),
          np.array([2, -1, 1]))   # JAX's rule: -1 for an all-nan slice (NumPy raises)
    both(mode, lambda m, v: (m.nansum(v), m.nanmax(v, axis=0), m.nanargmin(v)), I34)
    both(mode, lambda m, v: m.nansum(v, axis=1, where=~np.isnan(v) if m is np
                                     else ~m.isnan(v), initial=1.0), NANS)


def test_statistics(x64, mode):
    wts = np.array([1.0, 2.0, 0.5, 3.0], np.float32)
    both(mode, lambda m, x: m.average(x), M34)
    both(mode, lambda m, x: m.average(x, axis=1, returned=True), M34)
    both(mode, lambda m, x, w: m.average(x, axis=1, weights=w), M34, wts)
    both(mode, lambda m, x, w: m.average(x, axis=-1, weights=w, returned=True, keepdims=True),
         M234, wts)
    both(mode, lambda m, x: m.average(x, weights=x * x), M34)
    both(mode, lambda m, x: m.count_nonzero(x), I34)
    both(mode, lambda m, x: m.count_nonzero(x, axis=1, keepdims=True), I34)
    both(mode, lambda m, x: (m.ptp(x), m.ptp(x, axis=0, keepdims=True)), M34)
    both(mode, lambda m, x: m.ptp(x, axis=1), I34)
    with pytest.raises(TypeError, match="Axis must be specified"):
        jnp.average(jnp.asarray(M34), weights=jnp.asarray(wts))


def test_cov_corrcoef(x64, mode):
    x = M34.astype(np.float64)   # NumPy computes cov in float64; olympus in the canonical one
    dt = canon(np.float64)
    fw = np.array([1, 2, 1, 3], np.int32)
    aw = np.array([0.5, 1.0, 2.0, 1.0], np.float64)
    for f in (lambda m, v: m.cov(v), lambda m, v: m.cov(v, rowvar=False),
              lambda m, v: m.cov(v, bias=True), lambda m, v: m.cov(v, ddof=2),
              lambda m, v: m.cov(v[0], v[1]), lambda m, v: m.cov(v[0]),
              lambda m, v: m.corrcoef(v), lambda m, v: m.corrcoef(v[0], v[2]),
              lambda m, v: m.cov(v, fweights=fw), lambda m, v: m.cov(v, aweights=aw),
              lambda m, v: m.cov(v, fweights=fw, aweights=aw)):
        check(mode(lambda v: f(jnp, v))(jnp.asarray(x)), f(np, x), dtype=dt, rtol=1e-5,
              atol=1e-5)
    z = (M34 + 1j * M34[::-1]).astype(np.complex64)
    check(mode(lambda v: jnp.cov(v))(jnp.asarray(z)), np.cov(z), dtype=np.complex64, rtol=1e-5,
          atol=1e-5)


def test_cumulative_api(x64, mode):
    both(mode, lambda m, x: np.cumsum(x) if m is np else m.cumulative_sum(x), V5)
    both(mode, lambda m, x: np.cumprod(x, axis=1) if m is np else
         m.cumulative_prod(x, axis=1), I34)
    both(mode, lambda m, x: np.concatenate([np.zeros((3, 1), x.dtype), np.cumsum(x, 1)], 1)
         if m is np else m.cumulative_sum(x, axis=1, include_initial=True), I34)
    with pytest.raises(ValueError, match="axis must be specified"):
        jnp.cumulative_sum(jnp.asarray(M34))


# ------------------------------------------------------------------ differences and calculus

def test_diff_ediff1d(x64, mode):
    both(mode, lambda m, x: m.diff(x), M34)
    both(mode, lambda m, x: m.diff(x, n=2, axis=0), I34)
    both(mode, lambda m, x: m.diff(x, n=3, prepend=np.float32(0), append=x[:, :1]), M34)
    # a Python scalar is weak: it adopts x's dtype (NumPy 1.x would widen to float64)
    check(mode(lambda x: jnp.diff(x, prepend=0))(jnp.asarray(M34)),
          np.diff(M34, prepend=0), dtype=np.float32)
    both(mode, lambda m, x: m.diff(x > 0), M34)
    both(mode, lambda m, x: m.diff(x, n=0), M34)
    both(mode, lambda m, x: m.ediff1d(x), I34)
    both(mode, lambda m, x: m.ediff1d(x, to_end=[7, 8], to_begin=-1), I34)
    with pytest.raises(ValueError, match="order must be non-negative"):
        jnp.diff(jnp.asarray(V5), -1)


def test_gradient(x64, mode):
    coords = np.array([0.0, 0.5, 1.5, 3.0], np.float32)
    for f in (lambda m, x: m.gradient(x), lambda m, x: m.gradient(x, 2.0),
              lambda m, x: m.gradient(x, axis=1), lambda m, x: m.gradient(x, 0.5, coords),
              lambda m, x: m.gradient(x, edge_order=2),
              lambda m, x: m.gradient(x, 1.0, coords, edge_order=2)):
        both(mode, f, M34, rtol=1e-4, atol=1e-5)
    both(mode, lambda m, x: m.gradient(x), I34)
    both(mode, lambda m, x: m.gradient(x, axis=(0, 2)), M234, rtol=1e-5)
    with pytest.raises(ValueError, match="at least \\(edge_order \\+ 1\\)"):
        jnp.gradient(jnp.ones((2,)), edge_order=2)


def test_trapezoid_unwrap(x64, mode):
    xs = np.array([0.0, 0.5, 1.5, 3.0], np.float32)
    both(mode, lambda m, y: np.trapz(y) if m is np else m.trapezoid(y), M34)
    both(mode, lambda m, y, x: np.trapz(y, x) if m is np else m.trapezoid(y, x), M34, xs)
    both(mode, lambda m, y: np.trapz(y, dx=0.5, axis=0) if m is np else
         m.trapezoid(y, dx=0.5, axis=0), M34)
    both(mode, lambda m, y, x: np.trapz(y, x, axis=1) if m is np else
         m.trapezoid(y, x, axis=1), M34, M34 * 3)
    p = np.array([0.0, 3.0, 6.5, 0.2, -3.1, 12.0, 12.5], np.float32)
    both(mode, lambda m, v: m.unwrap(v), p, rtol=1e-5, atol=1e-5)
    both(mode, lambda m, v: m.unwrap(v, discont=4.0), p, rtol=1e-5, atol=1e-5)
    both(mode, lambda m, v: m.unwrap(v, period=4.0), p, rtol=1e-5, atol=1e-5)
    both(mode, lambda m, v: m.unwrap(np.stack([v, -v]) if m is np else m.stack([v, -v]),
                                     axis=1), p, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ ufuncs

UFUNC_DATA = np.array([-3.5, -1.0, -0.0, 0.0, 0.25, 1.0, 2.5, 7.0], np.float32)
UFUNC_CASES = {
    "fabs": (lambda m, x: m.fabs(x), (UFUNC_DATA,)),
    "deg2rad": (lambda m, x: m.deg2rad(x), (UFUNC_DATA,)),
    "rad2deg": (lambda m, x: m.rad2deg(x), (UFUNC_DATA,)),
    "radians": (lambda m, x: m.radians(x), (UFUNC_DATA,)),
    "degrees": (lambda m, x: m.degrees(x), (UFUNC_DATA,)),
    "heaviside": (lambda m, x: m.heaviside(x, 0.5), (UFUNC_DATA,)),
    "heaviside_nan": (lambda m, x: m.heaviside(x, x), (np.array([np.nan, 0.0, -1.0],
                                                                  np.float32),)),
    "copysign": (lambda m, x, y: m.copysign(x, y), (UFUNC_DATA, UFUNC_DATA[::-1])),
    "isposinf": (lambda m, x: m.isposinf(x), (np.array([np.inf, -np.inf, np.nan, 1.0],
                                                         np.float32),)),
    "isneginf": (lambda m, x: m.isneginf(x), (np.array([np.inf, -np.inf, np.nan, 1.0],
                                                         np.float32),)),
    "isreal": (lambda m, x: m.isreal(x), (np.array([1 + 0j, 2j, -0.5 + 0j], np.complex64),)),
    "iscomplex": (lambda m, x: m.iscomplex(x), (np.array([1 + 0j, 2j, -0.5], np.complex64),)),
    "isreal_real": (lambda m, x: (m.isreal(x), m.iscomplex(x)), (I34,)),
    "nan_to_num": (lambda m, x: m.nan_to_num(x), (np.array([np.nan, np.inf, -np.inf, 2.0],
                                                              np.float32),)),
    "nan_to_num_values": (lambda m, x: m.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0),
                          (np.array([np.nan, np.inf, -np.inf, 2.0], np.float32),)),
    "nan_to_num_complex": (lambda m, x: m.nan_to_num(x), (np.array(
        [complex(np.nan, np.inf), complex(1, -np.inf)], np.complex64),)),
    "nan_to_num_int": (lambda m, x: m.nan_to_num(x), (I34,)),
    "i0": (lambda m, x: m.i0(x), (UFUNC_DATA.astype(np.float64),)),
    "sinc": (lambda m, x: m.sinc(x), (UFUNC_DATA,)),
    "logaddexp": (lambda m, x, y: m.logaddexp(x, y), (UFUNC_DATA, UFUNC_DATA[::-1] * 30)),
    "logaddexp_inf": (lambda m, x, y: m.logaddexp(x, y), (
        np.array([np.inf, -np.inf, -np.inf, np.nan, 1.0], np.float32),
        np.array([np.inf, -np.inf, 3.0, 1.0, np.inf], np.float32))),
    "logaddexp2": (lambda m, x, y: m.logaddexp2(x, y), (UFUNC_DATA, UFUNC_DATA[::-1] * 30)),
    "spacing": (lambda m, x: m.spacing(x), (np.array([1.0, -1.0, 0.0, -0.0, 1e30, 3.0e-39,
                                                      np.inf], np.float32),)),
    "frexp": (lambda m, x: m.frexp(x), (np.array(
        [0.0, -0.0, 1.0, 0.5, 0.75, -3.0, 1024.0, 1e-40, 3e38, 1e-45, np.inf, np.nan,
         0.99999994, 1.0000001], np.float32),)),
    "ldexp": (lambda m, x, e: m.ldexp(x, e), (
        np.array([1.0, -0.75, 3.0, 1e-40, 1.5, 0.6, 3.0e38, 0.0, np.inf, 1.0], np.float32),
        np.array([3, -2, 100, 30, -149, -126, -300, 5, 2, 127], np.int32))),
    "modf": (lambda m, x: m.modf(x), (np.array([-3.5, -0.0, 0.0, 2.25, -2.0, np.inf, -np.inf],
                                              np.float32),)),
    "gcd": (lambda m, x, y: m.gcd(x, y), (np.array([12, -18, 0, 7, 0, 100], np.int32),
                                           np.array([18, 12, 5, 0, 0, -75], np.int32))),
    "lcm": (lambda m, x, y: m.lcm(x, y), (np.array([12, -18, 0, 7, 0, 4], np.int32),
                                           np.array([18, 12, 5, 0, 0, -6], np.int32))),
    "gcd_broadcast": (lambda m, x: m.gcd(x, 6), (I34,)),
    "fmax": (lambda m, x, y: m.fmax(x, y), (np.array([1.0, np.nan, np.nan, -2.0], np.float32),
                                            np.array([np.nan, 3.0, np.nan, -1.0], np.float32))),
    "fmin": (lambda m, x, y: m.fmin(x, y), (np.array([1.0, np.nan, np.nan, -2.0], np.float32),
                                            np.array([np.nan, 3.0, np.nan, -1.0], np.float32))),
    "fmax_int": (lambda m, x, y: m.fmax(x, y), (I34, I34[::-1])),
    "angle": (lambda m, x: (m.angle(x), m.angle(x, deg=True)),
              (np.array([1 + 1j, -2 + 0j, -1j, 0j], np.complex64),)),
    "angle_real": (lambda m, x: m.angle(x), (UFUNC_DATA,)),
    "acos": (lambda m, x: np.arccos(x) if m is np else m.acos(x), (UFUNC_DATA / 8,)),
    "asinh": (lambda m, x: np.arcsinh(x) if m is np else m.asinh(x), (UFUNC_DATA,)),
    "atan2": (lambda m, x, y: np.arctan2(x, y) if m is np else m.atan2(x, y),
              (UFUNC_DATA, UFUNC_DATA[::-1])),
    "bitwise_invert": (lambda m, x: np.invert(x) if m is np else m.bitwise_invert(x), (I34,)),
    "bitwise_shifts": (lambda m, x: (np.left_shift(x, 2), np.right_shift(x, 1)) if m is np else
                       (m.bitwise_left_shift(x, 2), m.bitwise_right_shift(x, 1)), (I34,)),
}


@pytest.mark.parametrize("name", list(UFUNC_CASES))
def test_ufuncs(name, x64, mode):
    f, args = UFUNC_CASES[name]
    with np.errstate(all="ignore"):
        both(mode, f, *args)


def test_ufuncs_of_ints_compute_in_default_float(x64, mode):
    x = np.array([-2, 0, 3], np.int32)
    for f in (lambda m, v: m.fabs(v), lambda m, v: m.deg2rad(v), lambda m, v: m.sinc(v),
              lambda m, v: m.i0(v), lambda m, v: m.logaddexp(v, v), lambda m, v: m.modf(v),
              lambda m, v: m.spacing(v), lambda m, v: m.frexp(v), lambda m, v: m.angle(v)):
        want = f(np, x)    # NumPy: float64; olympus: the default float
        got = mode(lambda v: f(jnp, v))(jnp.asarray(x))
        check(got, want, rtol=1e-6, atol=1e-6,
              dtype=[np.int32 if np.asarray(w).dtype == np.int32 else canon(np.float64)
                     for w in _leaves(want)])


def test_frexp_ldexp_spacing_edges():
    with olympus.enable_x64():
        x = np.array([5e-324, 1e-310, -2.2250738585072014e-308, 1.7976931348623157e308, 0.3,
                      1e-300], np.float64)
        check(jnp.frexp(jnp.asarray(x)), np.frexp(x))
        k = np.array([10, -5, 2, -1, -1074, -1100], np.int32)
        check(jnp.ldexp(jnp.asarray(x), k), np.ldexp(x, k))
        with np.errstate(over="ignore"):
            check(jnp.spacing(jnp.asarray(x)), np.spacing(x))
    h = np.array([1.0, 6e-8, -3.5, 65504, 0.0], np.float16)
    check(jnp.frexp(jnp.asarray(h)), np.frexp(h))
    with np.errstate(over="ignore"):
        check(jnp.ldexp(jnp.asarray(h), np.int32(3)), np.ldexp(h, 3))
        check(jnp.spacing(jnp.asarray(np.abs(h))), np.spacing(np.abs(h)))


def test_frexp_ldexp_roundtrip_exact(x64):
    rng = np.random.default_rng(1)
    for dt in (np.float32, np.float64):
        x = (rng.standard_normal(200) * np.exp(rng.uniform(-80, 80, 200))).astype(dt)
        x = x.astype(canon(dt))
        m, e = jnp.frexp(jnp.asarray(x))
        wm, we = np.frexp(x)
        np.testing.assert_array_equal(np.asarray(m), wm)
        np.testing.assert_array_equal(np.asarray(e), we)
        k = rng.integers(-60, 60, 200).astype(np.int32)
        with np.errstate(over="ignore"):
            want = np.ldexp(x, k)
        np.testing.assert_array_equal(np.asarray(jnp.ldexp(jnp.asarray(x), k)), want)


def test_bitwise_count_and_packbits(x64, mode):
    x = np.array([0, 1, -1, 7, -128, 127, 255, 2 ** 20 + 3], np.int64)
    for dt in (np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64):
        v = x.astype(dt).astype(canon(dt))
        want = np.array([bin(abs(int(i))).count("1") for i in v], np.uint8)
        check(mode(jnp.bitwise_count)(jnp.asarray(v)), want)
    bits = np.array([[1, 0, 1, 1, 0, 0, 1, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 0]], np.int32)
    for kw in ({}, {"axis": 1}, {"axis": 0, "bitorder": "little"}, {"bitorder": "little"}):
        both(mode, lambda m, b: m.packbits(b, **kw), bits)
    packed = np.array([[3, 255], [128, 17]], np.uint8)
    for kw in ({}, {"axis": 1}, {"axis": 0, "bitorder": "little"}, {"count": 5},
               {"axis": 1, "count": -3}, {"axis": 1, "count": 20}):
        both(mode, lambda m, b: m.unpackbits(b, **kw), packed)
    with pytest.raises(TypeError, match="unsigned byte"):
        jnp.unpackbits(jnp.asarray(bits))


# ------------------------------------------------------------------ linear algebra helpers

def test_vecdot_matvec_vecmat(x64, mode):
    a = M234
    z = (M34 + 1j * M34[::-1]).astype(np.complex64)
    both(mode, lambda m, x, y: np.einsum("...i,...i->...", x, y) if m is np
         else m.vecdot(x, y), a, a[0])
    both(mode, lambda m, x: np.einsum("...i,...i->...", x.conj(), x) if m is np
         else m.vecdot(x, x), z)
    both(mode, lambda m, x, y: np.einsum("ij,ij->j", x, y) if m is np else
         m.vecdot(x, y, axis=0), M34, M34)
    both(mode, lambda m, x, y: np.einsum("...ij,...j->...i", x, y) if m is np
         else m.matvec(x, y), a, a[:, 0])
    both(mode, lambda m, x, y: np.einsum("...i,...ij->...j", x, y) if m is np
         else m.vecmat(x, y), a[:, :, 0], a)
    with pytest.raises(ValueError, match="matvec"):
        jnp.matvec(jnp.asarray(a), jnp.asarray(a[0, :, 0]))
    values, idx = mode(lambda x: jnp.top_k(x, 2))(jnp.asarray(M34))
    np.testing.assert_array_equal(np.asarray(values), -np.sort(-M34, axis=1)[:, :2])


# ------------------------------------------------------------------ creation

def test_linspace_traced_endpoints(x64, mode):
    f = olympus.jit(lambda a, b: jnp.linspace(a, b, 7))
    check(f(-1.0, 2.0), np.linspace(-1.0, 2.0, 7), rtol=1e-6)
    g = olympus.jit(lambda a, b: jnp.linspace(a, b, 4, endpoint=False, retstep=True, axis=-1))
    s, e = np.array([0.0, 1.0], np.float32), np.array([1.0, -3.0], np.float32)
    want = np.linspace(s, e, 4, endpoint=False, retstep=True, axis=-1)
    check(g(jnp.asarray(s), jnp.asarray(e)), want, rtol=1e-6, dtype=[canon(np.float32)] * 2)
    h = olympus.jit(lambda a: jnp.linspace(a, 10, 5, dtype=np.int32))
    check(h(0.0), np.floor(np.linspace(0, 10, 5)).astype(np.int32))
    for n in (0, 1):
        check(olympus.jit(lambda a: jnp.linspace(a, 1.0, n))(0.5), np.linspace(0.5, 1.0, n))
    check_grads(lambda a, b: jnp.linspace(a, b, 5), (0.5, 2.0), order=1)


def test_arange_traced_keeps_concrete_error():
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="arange"):
        olympus.jit(lambda n: jnp.arange(n))(3)


def test_logspace_geomspace(x64, mode):
    # a float32 start gives float32 (JAX's rule; NumPy 1.x computes in float64)
    both(mode, lambda m, a: m.logspace(a, 2.0, 5), np.array(0.0, np.float32), rtol=1e-5,
         dtype=np.float32)
    check(jnp.logspace(0, 3, 4, base=2.0, endpoint=False),
          np.logspace(0, 3, 4, base=2.0, endpoint=False).astype(canon(np.float64)))
    check(jnp.geomspace(1, 1000, 4), np.geomspace(1, 1000, 4).astype(canon(np.float64)))
    check(jnp.geomspace(-2.0, -32.0, 5), np.geomspace(-2.0, -32.0, 5).astype(canon(np.float64)))
    f = olympus.jit(lambda a, b: jnp.geomspace(a, b, 5))
    check(f(2.0, 32.0), np.geomspace(2.0, 32.0, 5), rtol=1e-5, dtype=canon(np.float64))
    check(f(-2.0, -32.0), np.geomspace(-2.0, -32.0, 5), rtol=1e-5, dtype=canon(np.float64))
    g = olympus.jit(lambda a: jnp.logspace(a, 1.0, 4, base=jnp.asarray([2.0, 10.0]), axis=-1))
    check(g(0.0), np.stack([np.logspace(0, 1, 4, base=2.0), np.logspace(0, 1, 4)]), rtol=1e-5,
          dtype=canon(np.float64))
    check(olympus.jit(lambda a: jnp.geomspace(a, 8.0, 4, endpoint=False))(1.0),
          np.geomspace(1.0, 8.0, 4, endpoint=False), rtol=1e-5, dtype=canon(np.float64))


def test_windows(x64, mode):
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        for n in (0, 1, 6):
            check(getattr(jnp, name)(n), getattr(np, name)(n))
    check(jnp.kaiser(7, 3.5), np.kaiser(7, 3.5))
    check(olympus.jit(lambda b: jnp.kaiser(7, b))(3.5), np.kaiser(7, 3.5), rtol=1e-5,
          atol=1e-6)


def test_misc_creation_and_io(x64, tmp_path):
    check(jnp.fromfunction(lambda i, j: i * 10 + j, (2, 3)),
          np.fromfunction(lambda i, j: i * 10 + j, (2, 3)))
    check(jnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=np.int32),
          np.fromfunction(lambda i, j: i + j, (2, 3), dtype=np.int32))
    buf = np.arange(6, dtype=np.float64).tobytes()
    check(jnp.frombuffer(buf), np.frombuffer(buf))
    check(jnp.frombuffer(buf, dtype=np.int32, count=3, offset=4),
          np.frombuffer(buf, dtype=np.int32, count=3, offset=4))
    check(jnp.fromstring("1 2 3.5", sep=" "), np.fromstring("1 2 3.5", sep=" "))
    check(jnp.from_dlpack(np.arange(3.0)), np.arange(3.0))
    path = str(tmp_path / "a.npy")
    jnp.save(path, jnp.asarray(M34))
    check(jnp.load(path), M34)
    c = jnp.copy(jnp.asarray(M34))
    check(c, M34)
    with pytest.raises(NotImplementedError, match="fromfile"):
        jnp.fromfile(io.BytesIO(b""))
    with pytest.raises(NotImplementedError, match="fromiter"):
        jnp.fromiter(iter([1, 2]), float)


def test_dtype_names_and_namespace():
    assert jnp.isdtype(jnp.float32, "real floating") and jnp.isdtype(np.int8, "integral")
    assert jnp.isdtype(np.uint16, ("bool", "unsigned integer"))
    assert jnp.isdtype(np.float32, "numeric") and jnp.isdtype(np.int32, "signed integer")
    assert not jnp.isdtype(np.bool_, "numeric") and jnp.isdtype(np.complex64, np.complex64)
    with pytest.raises(ValueError, match="unknown kind"):
        jnp.isdtype(np.float32, "floaty")
    assert jnp.bool is np.bool_ and jnp.single is np.float32 and jnp.cdouble is np.complex128
    assert jnp.iterable([1]) and not jnp.iterable(3)
    assert issubclass(jnp.ComplexWarning, Warning)
    info = jnp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] == np.float32
    assert "float64" not in info.dtypes() and "int8" in info.dtypes(kind="integral")
    assert jnp.array_repr(jnp.asarray([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert jnp.array_str(jnp.asarray([1.0, 2.0])) == "[1. 2.]"


# ------------------------------------------------------------------ functional

def test_vectorize(x64, mode):
    def f(a, b):
        assert a.shape == () and b.shape == ()
        return a * 2 + b
    v = jnp.vectorize(f)
    both(mode, lambda m, x, y: x * 2 + y if m is np else v(x, y), M234, M34[0])
    both(mode, lambda m, x, y: x * 2 + y if m is np else v(x, y), M34[:1], M34[:, :1])

    @jnp.vectorize
    def both_out(a):
        return a + 1, a * a
    both(mode, lambda m, x: (x + 1, x * x) if m is np else both_out(x), M34)

    mv = jnp.vectorize(lambda m_, v_: m_ @ v_, signature="(n,m),(m)->(n)")
    both(mode, lambda m, a, b: np.einsum("...ij,...j->...i", a, b) if m is np else mv(a, b),
         M234, M234[:, 0])
    sc = jnp.vectorize(lambda a, k, p: a * k + p, excluded={1, "p"})
    both(mode, lambda m, x: x * 3 + 1 if m is np else sc(x, 3, p=1), M34)
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'm'"):
        mv(jnp.ones((2, 3)), jnp.ones(4))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(f, signature="(n)->>(n)")(jnp.ones(2), jnp.ones(2))
    out = jnp.vectorize(lambda a: a.sum(), signature="(n)->()")(jnp.zeros((0, 3)))
    assert out.shape == (0,)


def test_apply_along_and_over_axes(x64, mode):
    both(mode, lambda m, x: m.apply_along_axis(lambda v: v[::-1].cumsum(), 1, x), M234)
    both(mode, lambda m, x: m.apply_along_axis(lambda v: v.sum(), 0, x), M234)
    both(mode, lambda m, x: m.apply_along_axis(lambda v, k: v * k, -1, x, 3.0), M34)
    both(mode, lambda m, x: m.apply_along_axis(lambda v: m.outer(v, v), 1, x), M34)
    both(mode, lambda m, x: m.apply_over_axes(m.sum, x, [0, 2]), M234)
    both(mode, lambda m, x: m.apply_over_axes(lambda a, ax: m.cumsum(a, ax), x, (1,)), M234)


def test_frompyfunc_ufunc(x64, mode):
    add = jnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)
    assert add.nin == 2 and add.nout == 1 and "ufunc" in repr(add)
    both(mode, lambda m, x, y: x + y if m is np else add(x, y), M34, V5[:4])
    both(mode, lambda m, x, y: np.add.outer(x, y) if m is np else add.outer(x, y), M34[0], V5)
    both(mode, lambda m, x: np.add.reduce(x, axis=1) if m is np else add.reduce(x, axis=1),
         M234)
    # the result dtype is the function's (JAX's rule), not NumPy's add.reduce's int_
    check(mode(lambda x: add.reduce(x, axis=None))(jnp.asarray(I34)), np.add.reduce(I34, None),
          dtype=np.int32)
    both(mode, lambda m, x: np.add.reduce(x, axis=0, keepdims=True, initial=5) if m is np else
         add.reduce(x, axis=0, keepdims=True, initial=5), I34, dtype=np.int32)
    both(mode, lambda m, x: np.add.reduce(x, axis=0, where=x > 0) if m is np else
         add.reduce(x, axis=0, where=x > 0), I34, dtype=np.int32)
    both(mode, lambda m, x: np.add.accumulate(x, axis=1) if m is np else
         add.accumulate(x, axis=1), M34)
    mx = jnp.frompyfunc(lambda a, b: jnp.maximum(a, b), 2, 1)
    both(mode, lambda m, x: np.maximum.reduce(x, 0) if m is np else mx.reduce(x, 0), M34)
    with pytest.raises(ValueError, match="has no identity"):
        mx.reduce(jnp.zeros((0,)))
    with pytest.raises(NotImplementedError, match="inplace=False"):  # JAX's form
        add.at(jnp.zeros(3), 0, 1.0)


# ------------------------------------------------------------------ gradients

GRAD_CASES = {
    "split": (lambda x: jnp.split(x, [1, 3], axis=1)[1], (M34,)),
    "tile": (lambda x: jnp.tile(x, (2, 1)), (M34,)),
    "repeat": (lambda x: jnp.repeat(x, [1, 0, 2], axis=0), (M34,)),
    "repeat_total": (lambda x: jnp.repeat(x, jnp.asarray([1, 0, 2]), axis=0,
                                          total_repeat_length=4), (M34,)),
    "roll": (lambda x: jnp.roll(x, (1, 2), (0, 1)), (M34,)),
    "rot90": (lambda x: jnp.rot90(x, 3), (M34,)),
    "diagonal": (lambda x: jnp.diagonal(x, 1, 1, 2), (M234,)),
    "diag": (lambda x: jnp.diag(x, -1), (V5,)),
    "tril": (lambda x: jnp.tril(x, 1), (M34,)),
    "kron": (lambda x, y: jnp.kron(x, y), (M34[:2, :2], M34[1:, 2:])),
    "cross": (lambda x, y: jnp.cross(x, y), (M34[:, :3], M34[:, 1:])),
    "pad_reflect": (lambda x: jnp.pad(x, ((2, 4), (1, 0)), mode="reflect"), (M34,)),
    "pad_symmetric_odd": (lambda x: jnp.pad(x, 3, mode="symmetric", reflect_type="odd"),
                          (M34,)),
    "pad_wrap_edge": (lambda x: jnp.pad(jnp.pad(x, 2, mode="wrap"), 1, mode="edge"), (M34,)),
    "pad_ramp_mean": (lambda x: jnp.pad(jnp.pad(x, 2, mode="linear_ramp"), 1, mode="mean"),
                      (M34,)),
    "pad_constant": (lambda x, c: jnp.pad(x, 1, constant_values=c), (M34, np.float32(2.0))),
    "diff": (lambda x: jnp.diff(x, 2, axis=0, append=x[:1]), (M34,)),
    "gradient": (lambda x: jnp.gradient(x, 0.5, np.array([0.0, 1.0, 1.5, 4.0]))[1], (M34,)),
    "trapezoid": (lambda y, x: jnp.trapezoid(y, x), (M34, V5[:4])),
    "cov": (lambda x: jnp.cov(x, aweights=jnp.asarray([1.0, 2.0, 0.5, 1.0])), (M34,)),
    "corrcoef": (lambda x: jnp.corrcoef(x), (M34,)),
    "average": (lambda x, w: jnp.average(x, axis=1, weights=w), (M34, V5[:4] ** 2)),
    "logaddexp": (lambda x, y: jnp.logaddexp(x, y), (M34, M34[::-1])),
    "logaddexp2": (lambda x, y: jnp.logaddexp2(x, y), (M34, M34[::-1])),
    "sinc": (lambda x: jnp.sinc(x), (V5,)),
    "i0": (lambda x: jnp.i0(x), (V5,)),
    "copysign": (lambda x: jnp.copysign(x, -1.0), (V5,)),
    "nansum_nanmean": (lambda x: jnp.nansum(x) + jnp.nanmean(x, axis=1), (NANS[[0, 2]],)),
    "nanvar_nanmax": (lambda x: jnp.nanvar(x, axis=1) + jnp.nanmax(x, axis=1), (NANS[[0, 2]],)),
    "var_where": (lambda x: jnp.var(x, axis=0, where=x > 0), (M34,)),
    "sum_where_initial": (lambda x: jnp.sum(x, where=x < 1, initial=3.0), (M34,)),
    "unwrap": (lambda x: jnp.unwrap(x * 3), (V5,)),
    "vectorize": (lambda x, y: jnp.vectorize(lambda a, b: jnp.sin(a) * b)(x, y), (M34, V5[:4])),
    "apply_along_axis": (lambda x: jnp.apply_along_axis(lambda v: v * v.sum(), 0, x), (M34,)),
    "select": (lambda x: jnp.select([x < 0, x > 1], [x * x, jnp.sin(x)], 2.0), (M34,)),
    "piecewise": (lambda x: jnp.piecewise(x, [x < 0], [lambda v: v * v, jnp.cos]), (M34,)),
    "block_append": (lambda x: jnp.append(jnp.block([[x, x]]), x), (M34,)),
    "logspace": (lambda a: jnp.logspace(a, 1.0, 4), (np.float32(0.3),)),
    "ldexp_frexp": (lambda x: jnp.ldexp(x, 3) + jnp.frexp(x)[0], (V5 * 1.1,)),
    "ufunc_reduce": (lambda x: jnp.frompyfunc(lambda a, b: a * b + a, 2, 1).reduce(x, 1), (M34,)),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_grads(name):
    f, args = GRAD_CASES[name]
    check_grads(f, tuple(jnp.asarray(a) for a in args), order=1)


def test_grads_at_special_points():
    # sinc: 0 at 0, -pi^2/3 second derivative; i0: 0 at 0
    np.testing.assert_allclose(float(olympus.grad(jnp.sinc)(0.0)), 0.0, atol=1e-7)
    np.testing.assert_allclose(float(olympus.grad(olympus.grad(jnp.sinc))(0.0)),
                               -math.pi ** 2 / 3, rtol=1e-5)
    np.testing.assert_allclose(float(olympus.grad(jnp.i0)(0.0)), 0.0, atol=1e-7)
    # logaddexp at a tie: each side gets 1/2
    g = olympus.grad(lambda a, b: jnp.logaddexp(a, b), argnums=(0, 1))(1.0, 1.0)
    np.testing.assert_allclose([float(g[0]), float(g[1])], [0.5, 0.5])
    g = olympus.grad(lambda a: jnp.logaddexp(a, 1e4))(-1e4)    # no overflow in the tangent
    assert float(g) == 0.0


# ------------------------------------------------------------------ errors

def test_clear_errors():
    x = jnp.asarray(M34)
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        jnp.split(x, 3, axis=1)
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else np.AxisError,
                       match="axis 2 is out of bounds"):
        jnp.split(x, 2, axis=2)
    with pytest.raises(ValueError, match="vsplit only works on arrays of 2 or more"):
        jnp.vsplit(jnp.asarray(V5), 1)
    with pytest.raises(ValueError, match="repeats may not contain negative values"):
        jnp.repeat(x, -1)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="total_repeat_length"):
        olympus.jit(lambda a, r: jnp.repeat(a, r))(x, 2)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="split"):
        olympus.jit(lambda a, i: jnp.split(a, i))(jnp.asarray(V5), 2)
    with pytest.raises(ValueError, match="Axes must be different"):
        jnp.rot90(x, axes=(1, 1))
    with pytest.raises(ValueError, match="len\\(axes\\) must be 2"):
        jnp.rot90(x, axes=(0,))
    with pytest.raises(ValueError, match="axis1 and axis2 cannot be the same"):
        jnp.diagonal(x, 0, 1, 1)
    with pytest.raises(ValueError, match="Input must be 1- or 2-d"):
        jnp.diag(jnp.asarray(M234))
    with pytest.raises(ValueError, match="tril: the argument must be at least 2-dimensional"):
        jnp.tril(jnp.asarray(V5))
    with pytest.raises(ValueError, match="incompatible dimensions for cross product"):
        jnp.cross(x, x)
    with pytest.raises(TypeError, match="gcd: arguments must be integers"):
        jnp.gcd(x, x)
    with pytest.raises(TypeError, match="frexp does not support complex"):
        jnp.frexp(jnp.asarray([1j]))
    with pytest.raises(ValueError, match="Cross index must be 1 dimensional"):
        jnp.ix_(x)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="trim_zeros"):
        olympus.jit(jnp.trim_zeros)(jnp.asarray(V5))
    with pytest.raises(ValueError, match="list depths are mismatched"):
        jnp.block([[x], x])
    with pytest.raises(ValueError, match="must be non-negative"):
        jnp.resize(x, (-1, 2))


def test_trim_zeros():
    v = np.array([0, 0, 3, 0, 1, 0], np.int32)
    for t in ("fb", "f", "b", "x"):
        check(jnp.trim_zeros(jnp.asarray(v), t), np.trim_zeros(v, t))
    check(jnp.trim_zeros(jnp.zeros(3)), np.zeros(0, np.float32))
    m = np.zeros((4, 5), np.float32)
    m[1:3, 1:4] = 1
    check(jnp.trim_zeros(m), m[1:3, 1:4])
    check(jnp.trim_zeros(m, "f", axis=0), m[1:])


# ------------------------------------------------------------------ the coverage table

def _coverage_rows():
    path = os.path.join(_ROOT, "docs", "numpy_coverage.md")
    with open(path) as f:
        text = f.read()
    rows = re.findall(r"^\| `([^`]+)` \| (supported|not supported) \|", text, re.M)
    claim = re.search(r"(\d+) of (\d+) names \(([\d.]+)%\)", text)
    return rows, claim


def test_coverage_table_claims_hold():
    rows, claim = _coverage_rows()
    with open(os.path.join(_ROOT, "docs", "jax_numpy_names.txt")) as f:
        names = [n.strip() for n in f if n.strip() and not n.startswith("#")]
    assert [n for n, _ in rows] == names, "the table must list docs/jax_numpy_names.txt in order"
    supported = [n for n, s in rows if s == "supported"]
    missing = [n for n in supported if not hasattr(jnp, n)]
    assert not missing, f"claimed supported but absent from olympus.numpy: {missing}"
    assert claim is not None, "the table must state 'N of M names (P%)'"
    n, total, pct = int(claim.group(1)), int(claim.group(2)), float(claim.group(3))
    assert (n, total) == (len(supported), len(rows))
    assert pct == round(100.0 * n / total, 1)

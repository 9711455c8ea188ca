"""olympus.numpy functions on gather / scatter / sort against NumPy: take and
relatives, nonzero / where(size=), unique and set operations, searchsorted,
digitize, bincount, histograms, interp, quantiles, delete / insert,
fill_diagonal; eager, under jit (with size=), x64 on and off, and gradients."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
import olympus.test_util
from olympus.errors import ConcretizationTypeError

RNG = np.random.default_rng(7)
A = RNG.integers(-3, 6, size=(4, 5)).astype(np.int32)
F = RNG.standard_normal((4, 5)).astype(np.float32)


def eq(got, want, **kw):
    got = np.asarray(got)
    np.testing.assert_allclose(got, want, **kw) if got.dtype.kind in "fc" else \
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(axis):
    idx = np.array([[0, 2], [1, 1]])
    eq(jnp.take(jnp.asarray(F), idx, axis=axis), np.take(F, idx, axis=axis))
    eq(jnp.take(jnp.asarray(F), idx + 7, axis=axis, mode="wrap"),
       np.take(F, idx + 7, axis=axis, mode="wrap"))
    eq(jnp.take(jnp.asarray(F), idx - 9, axis=axis, mode="clip"),
       np.take(F, idx - 9, axis=axis, mode="clip"))
    eq(jnp.asarray(F).take(idx, axis=axis), np.take(F, idx, axis=axis))


def test_take_fill_and_grad():
    x = jnp.arange(4.0)
    eq(jnp.take(x, np.array([1, 9, -1])), [1.0, np.nan, 3.0])       # JAX's default: fill
    eq(jnp.take(x, np.array([1, 9]), fill_value=-2.0), [1.0, -2.0])
    g = olympus.grad(lambda x: jnp.sum(jnp.take(x, np.array([1, 1, 3])) ** 2))(x)
    eq(g, [0, 4, 0, 6])


def test_take_along_axis_and_put_along_axis():
    idx = np.argsort(F, axis=1)
    eq(jnp.take_along_axis(jnp.asarray(F), jnp.asarray(idx), axis=1),
       np.take_along_axis(F, idx, axis=1))
    eq(jnp.take_along_axis(jnp.asarray(F), idx[:1] % 4, axis=0),
       np.take_along_axis(F, idx[:1] % 4, 0))
    want = F.copy()
    np.put_along_axis(want, idx[:, :2], 0.0, axis=1)
    eq(jnp.put_along_axis(jnp.asarray(F), idx[:, :2], 0.0, axis=1, inplace=False), want)
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.put_along_axis(jnp.asarray(F), idx, 0.0, axis=1)
    olympus.test_util.check_grads(
        lambda x: jnp.take_along_axis(x, jnp.asarray(idx), axis=1), (jnp.asarray(F),), order=2)


def test_put_place_choose_compress_extract():
    want = A.copy()
    np.put(want, [0, 7, 30], [9, 8], mode="wrap")
    eq(jnp.put(jnp.asarray(A), np.array([0, 7, 30]), np.array([9, 8]), mode="wrap",
               inplace=False), want)
    want = A.copy()
    np.place(want, A > 2, [10, 20, 30])
    eq(jnp.place(jnp.asarray(A), A > 2, np.array([10, 20, 30]), inplace=False), want)
    got = olympus.jit(lambda a, m: jnp.place(a, m, jnp.asarray([10, 20, 30]), inplace=False))(
        jnp.asarray(A), jnp.asarray(A > 2))
    eq(got, want)
    ch = [A, A * 10, A * 100]
    sel = np.abs(A) % 3
    eq(jnp.choose(jnp.asarray(sel), ch), np.choose(sel, ch))
    eq(jnp.choose(jnp.asarray(sel + 4), ch, mode="wrap"), np.choose(sel + 4, ch, mode="wrap"))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.choose(jnp.asarray(sel + 4), ch)
    cond = np.array([True, False, True])
    eq(jnp.compress(cond, jnp.asarray(F), axis=1), np.compress(cond, F, axis=1))
    eq(jnp.compress(cond, jnp.asarray(F)), np.compress(cond, F))
    eq(jnp.extract(A > 0, jnp.asarray(A)), np.extract(A > 0, A))
    got = olympus.jit(lambda m, a: jnp.extract(m, a, size=25, fill_value=-1))(
        jnp.asarray(A > 0), jnp.asarray(A))
    want = np.full(25, -1)
    want[:np.sum(A > 0)] = A[A > 0]
    eq(got, want)


def test_nonzero_where_argwhere():
    for a in (A, A[0], A > 2):
        for g, w in zip(jnp.nonzero(jnp.asarray(a)), np.nonzero(a)):
            eq(g, w)
        eq(jnp.argwhere(jnp.asarray(a)), np.argwhere(a))
        eq(jnp.flatnonzero(jnp.asarray(a)), np.flatnonzero(a))
    eq(jnp.where(jnp.asarray(A))[1], np.where(A)[1])
    f = olympus.jit(lambda a: jnp.nonzero(a, size=30, fill_value=(-1, -2)))
    rows, cols = f(jnp.asarray(A))
    k = np.count_nonzero(A)
    eq(rows[:k], np.nonzero(A)[0])
    eq(cols[:k], np.nonzero(A)[1])
    assert (np.asarray(rows[k:]) == -1).all() and (np.asarray(cols[k:]) == -2).all()
    eq(olympus.jit(lambda a: jnp.where(a > 0, size=3)[1])(jnp.asarray(A)), np.nonzero(A > 0)[1][:3])
    with pytest.raises(ConcretizationTypeError, match="size="):
        olympus.jit(jnp.nonzero)(jnp.asarray(A))
    with pytest.raises(ValueError, match="0d"):
        jnp.nonzero(jnp.asarray(1))
    assert np.asarray(jnp.nonzero(jnp.asarray(A))[0]).dtype == np.int32
    with olympus.enable_x64():
        assert np.asarray(jnp.nonzero(jnp.asarray(A))[0]).dtype == np.int64


def test_unique_and_sets():
    x = np.array([3, 1, 2, 3, 1, 5, 0, 5], np.int32)
    got = jnp.unique(jnp.asarray(x), return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, np.unique(x, return_index=True, return_inverse=True,
                                   return_counts=True)):
        eq(g, w)
    rows = np.array([[1, 2], [0, 1], [1, 2], [0, 0]])
    eq(jnp.unique(jnp.asarray(rows), axis=0), np.unique(rows, axis=0))
    nan = np.array([1.0, np.nan, 2.0, np.nan])
    eq(jnp.unique(jnp.asarray(nan)), np.unique(nan))
    f = olympus.jit(lambda v: jnp.unique(v, size=7, return_counts=True))
    vals, counts = f(jnp.asarray(x))
    eq(vals, [0, 1, 2, 3, 5, 0, 0])
    eq(counts, [1, 2, 1, 2, 2, 0, 0])
    with pytest.raises(ConcretizationTypeError, match="size="):
        olympus.jit(jnp.unique)(jnp.asarray(x))
    y = np.array([5, 7, 1, 9], np.int32)
    eq(jnp.union1d(x, y), np.union1d(x, y))
    eq(jnp.intersect1d(x, y), np.intersect1d(x, y))
    eq(jnp.setdiff1d(x, y), np.setdiff1d(x, y))
    eq(jnp.setxor1d(x, y), np.setxor1d(x, y))
    for g, w in zip(jnp.intersect1d(x, y, return_indices=True),
                    np.intersect1d(x, y, return_indices=True)):
        eq(g, w)
    eq(jnp.isin(jnp.asarray(A), [0, 3, 5]), np.isin(A, [0, 3, 5]))
    eq(jnp.isin(jnp.asarray(A), [0, 3, 5], invert=True), np.isin(A, [0, 3, 5], invert=True))
    got = olympus.jit(lambda a, b: jnp.setdiff1d(a, b, size=5, fill_value=-9))(
        jnp.asarray(x), jnp.asarray(y))
    eq(got, [0, 2, 3, -9, -9])


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_and_digitize(side):
    a = np.sort(RNG.integers(0, 10, 12)).astype(np.float32)
    v = np.array([-1, 0, 3, 3.5, 9, 10, np.nan], np.float32)
    eq(jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side), np.searchsorted(a, v, side))
    a2 = np.append(a, np.nan)
    eq(jnp.searchsorted(jnp.asarray(a2), jnp.asarray(v), side=side), np.searchsorted(a2, v, side))
    perm = RNG.permutation(len(a))
    eq(jnp.searchsorted(jnp.asarray(a[perm]), jnp.asarray(v), side=side,
                        sorter=np.argsort(a[perm], kind="stable")),
       np.searchsorted(a[perm], v, side, sorter=np.argsort(a[perm], kind="stable")))
    bins = np.array([0.0, 1.0, 2.5, 4.0])
    x = np.array([-1.0, 0.0, 1.0, 2.0, 4.0, 5.0])
    for right in (False, True):
        eq(jnp.digitize(x, bins, right=right), np.digitize(x, bins, right=right))
        eq(jnp.digitize(x, bins[::-1], right=right), np.digitize(x, bins[::-1], right=right))
    eq(olympus.jit(jnp.searchsorted)(jnp.asarray(a), jnp.asarray(v[:-1])),
       np.searchsorted(a, v[:-1]))


def test_bincount_and_histograms():
    x = np.array([0, 1, 1, 3, 2, 1, 7])
    w = np.linspace(0, 1, 7)
    eq(jnp.bincount(x), np.bincount(x))
    eq(jnp.bincount(x, w, minlength=10), np.bincount(x, w, minlength=10), rtol=1e-6)
    eq(olympus.jit(lambda x: jnp.bincount(x, length=9))(jnp.asarray(x)), np.bincount(x, minlength=9))
    with pytest.raises(ConcretizationTypeError, match="length="):
        olympus.jit(jnp.bincount)(jnp.asarray(x))
    d = RNG.standard_normal(50)
    for kw in ({}, {"bins": 7}, {"bins": 5, "range": (-1, 1)}, {"density": True},
               {"bins": np.array([-2.0, 0.0, 0.5, 3.0])}, {"weights": np.abs(d)}):
        c, e = jnp.histogram(jnp.asarray(d), **kw)
        wc, we = np.histogram(d, **kw)
        eq(c, wc, rtol=1e-5, atol=1e-6)
        eq(e, we, rtol=1e-5)
    pts = RNG.standard_normal((30, 2))
    c, ex, ey = jnp.histogram2d(pts[:, 0], pts[:, 1], bins=4)
    wc, wx, wy = np.histogram2d(pts[:, 0], pts[:, 1], bins=4)
    eq(c, wc)
    eq(ex, wx, rtol=1e-5)


def test_interp():
    xp = np.array([0.0, 1.0, 1.0, 3.0, 4.0])
    fp = np.array([1.0, 2.0, 5.0, -1.0, 0.0])
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.99, 4.0, 7.0])
    eq(jnp.interp(x, xp, fp), np.interp(x, xp, fp), rtol=1e-6)
    eq(jnp.interp(x, xp, fp, left=-7, right=9), np.interp(x, xp, fp, left=-7, right=9), rtol=1e-6)
    eq(jnp.interp(x, [0.0, 2.0, 5.0], [0, 1j, 2]), np.interp(x, [0.0, 2.0, 5.0], [0, 1j, 2]),
       rtol=1e-6)
    eq(jnp.interp(x, [0.0, 1.0, 2.5], [0, 3, 1], period=3),
       np.interp(x, [0.0, 1.0, 2.5], [0, 3, 1], period=3), rtol=1e-5, atol=1e-6)
    g = olympus.grad(lambda t: jnp.interp(t, jnp.asarray([0.0, 2.0]), jnp.asarray([0.0, 4.0])))(1.0)
    assert float(g) == 2.0


@pytest.mark.filterwarnings("ignore:All-NaN slice")  # NumPy's, for the all-NaN row
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantiles(method):
    a = RNG.standard_normal((5, 6))
    q = np.array([0.0, 0.1, 0.5, 0.75, 1.0])
    with olympus.enable_x64():
        for axis in (None, 0, 1, (0, 1)):
            eq(jnp.quantile(a, q, axis=axis, method=method), np.quantile(a, q, axis=axis,
                                                                       method=method), rtol=1e-12)
        eq(jnp.percentile(a, 30, axis=1, method=method, keepdims=True),
           np.percentile(a, 30, axis=1, method=method, keepdims=True), rtol=1e-12)
        b = a.copy()
        b[1, 2] = b[3, 0] = np.nan
        b[4] = np.nan
        eq(jnp.nanquantile(b, q, axis=1, method=method), np.nanquantile(b, q, axis=1,
                                                                      method=method), rtol=1e-12)
        eq(jnp.quantile(b, 0.5, axis=1, method=method), np.quantile(b, 0.5, axis=1, method=method))


def test_median_and_grad():
    a = RNG.standard_normal((4, 7)).astype(np.float32)
    eq(jnp.median(jnp.asarray(a)), np.median(a), rtol=1e-6)
    eq(jnp.median(jnp.asarray(a), axis=1), np.median(a, axis=1), rtol=1e-6)
    eq(jnp.nanmedian(jnp.asarray(a), axis=0), np.nanmedian(a, axis=0), rtol=1e-6)
    eq(olympus.jit(lambda x, q: jnp.quantile(x, q))(jnp.asarray(a), 0.3), np.quantile(a, 0.3),
       rtol=1e-6)
    assert jnp.median(jnp.asarray(A)).dtype == np.float32
    olympus.test_util.check_grads(lambda x: jnp.quantile(x, jnp.asarray([0.2, 0.5]), axis=1),
                                  (jnp.asarray(a),), order=1, modes="rev")
    with pytest.raises(ValueError, match="method"):
        jnp.quantile(jnp.asarray(a), 0.5, method="bogus")


def test_delete_insert_fill_diagonal():
    eq(jnp.delete(jnp.asarray(A), 1, axis=1), np.delete(A, 1, axis=1))
    eq(jnp.delete(jnp.asarray(A), [0, 2], axis=0), np.delete(A, [0, 2], axis=0))
    eq(jnp.delete(jnp.asarray(A), slice(1, None, 2)), np.delete(A, slice(1, None, 2)))
    eq(olympus.jit(lambda a, i: jnp.delete(a, i, axis=0))(jnp.asarray(A), 2),
       np.delete(A, 2, axis=0))
    eq(jnp.insert(jnp.asarray(A), 1, 9, axis=1), np.insert(A, 1, 9, axis=1))
    eq(jnp.insert(jnp.asarray(A), [0, 3], [7, 8], axis=1), np.insert(A, [0, 3], [7, 8], axis=1))
    eq(jnp.insert(jnp.arange(5), 2, [7, 8]), np.insert(np.arange(5), 2, [7, 8]))
    for shape, wrap in (((3, 3), False), ((5, 3), False), ((5, 3), True), ((3, 3, 3), False)):
        want = np.zeros(shape)
        np.fill_diagonal(want, [1, 2], wrap=wrap)
        eq(jnp.fill_diagonal(jnp.zeros(shape), jnp.asarray([1.0, 2.0]), wrap=wrap,
                             inplace=False), want)


def test_ufunc_at_and_reduceat():
    add = jnp.frompyfunc(lambda x, y: x + y, 2, 1, identity=0)
    a = np.arange(5.0)
    want = a.copy()
    np.add.at(want, [0, 0, 3], [1.0, 2.0, 3.0])          # unbuffered: index 0 twice
    eq(add.at(jnp.asarray(a), np.array([0, 0, 3]), jnp.asarray([1.0, 2.0, 3.0]), inplace=False),
       want)
    eq(olympus.jit(lambda x, i: add.at(x, i, 1.0, inplace=False))(jnp.asarray(a),
                                                                  jnp.asarray([2, 2])),
       [0, 1, 4, 3, 4])
    neg = jnp.frompyfunc(lambda x: -x, 1, 1)
    eq(neg.at(jnp.asarray(a), np.array([1, 1, 2]), inplace=False), [0, 1, -2, 3, 4])
    with pytest.raises(NotImplementedError, match="inplace=False"):
        add.at(jnp.asarray(a), np.array([0]), 1.0)
    m = np.arange(12.0).reshape(3, 4)
    eq(add.reduceat(jnp.arange(8.0), [0, 4, 1, 5]), np.add.reduceat(np.arange(8.0), [0, 4, 1, 5]))
    eq(add.reduceat(jnp.asarray(m), [0, 2], axis=1), np.add.reduceat(m, [0, 2], axis=1))

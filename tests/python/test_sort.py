"""sort, argsort, lexsort, partition, sort_complex and top_k against NumPy:
values and dtypes, eagerly and under jit, x64 off and on; vmap; gradients of
sort and top_k against known values and finite differences."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax

_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
           np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def _canon(dt):
    dt = np.dtype(dt)
    return dt if olympus.config.olympus_enable_x64 else _NARROW.get(dt, dt)


def _data(dt, shape, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(dt)
    if np.issubdtype(dt, np.unsignedinteger):
        return rng.integers(0, 6, shape).astype(dt)
    if np.issubdtype(dt, np.integer):
        return rng.integers(-4, 5, shape).astype(dt)
    x = rng.integers(-4, 5, shape).astype(np.float64) / 2  # ties on purpose
    if np.issubdtype(dt, np.complexfloating):
        x = x + 1j * (rng.integers(-2, 3, shape) / 2)
    return x.astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sort_argsort_every_dtype(dt, x64, mode):
    x = _data(dt, (3, 7))
    want_dt = _canon(dt)
    for axis in (-1, 0, None):
        got = mode(lambda a: jnp.sort(a, axis=axis))(x)
        want = np.sort(x.astype(want_dt), axis=axis)
        assert got.dtype == want_dt
        np.testing.assert_array_equal(np.asarray(got), want)
        gi = mode(lambda a: jnp.argsort(a, axis=axis))(x)
        wi = np.argsort(x.astype(want_dt), axis=axis, kind="stable")
        assert gi.dtype == (np.int64 if x64 else np.int32)
        np.testing.assert_array_equal(np.asarray(gi), wi)


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_nans_sort_last(dt, mode):
    x = np.array([np.nan, 1, -np.inf, np.nan, np.inf, -2, 0, -0.0], dt)
    got = np.asarray(mode(jnp.sort)(x))
    want = np.sort(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.asarray(mode(jnp.argsort)(x)), np.argsort(x, kind="stable"))
    # descending: NaNs first
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, descending=True)), want[::-1])


def test_complex_order_as_numpy():
    x = np.array([1 + 2j, complex(np.nan, 0), complex(1, np.nan), 1 - 1j,
                  complex(np.nan, np.nan), -3 + 5j, 1 + 2j], np.complex128)
    olympus.config.update("olympus_enable_x64", True)
    np.testing.assert_array_equal(np.asarray(jnp.sort(x)), np.sort(x))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(x)), np.argsort(x, kind="stable"))


def test_argsort_ties_stable_and_descending(mode):
    x = np.array([2, 1, 2, 0, 1, 2, 0], np.int32)
    np.testing.assert_array_equal(np.asarray(mode(jnp.argsort)(x)), np.argsort(x, kind="stable"))
    got = mode(lambda a: jnp.argsort(a, descending=True))(x)
    # ties keep index order in the descending order too
    np.testing.assert_array_equal(np.asarray(got), np.argsort(-x, kind="stable"))
    np.testing.assert_array_equal(np.asarray(jnp.sort(x, descending=True)), np.sort(x)[::-1])
    # kind is accepted (the sort is always stable)
    np.testing.assert_array_equal(np.asarray(jnp.argsort(x, kind="quicksort")),
                                  np.argsort(x, kind="stable"))
    assert np.asarray(jnp.asarray(x).argsort()).tolist() == np.argsort(x, kind="stable").tolist()
    assert np.asarray(jnp.asarray(x).sort()).tolist() == sorted(x.tolist())


def test_lax_sort_multi_operand_and_num_keys(mode):
    k1 = np.array([1, 0, 1, 0, 1, 0], np.int32)
    k2 = np.array([2., 2., 1., 1., 2., np.nan], np.float32)
    v = np.arange(6, dtype=np.uint8)
    out = mode(lambda a, b, c: lax.sort((a, b, c), num_keys=2))(k1, k2, v)
    order = np.lexsort((k2, k1))
    assert isinstance(out, tuple) and len(out) == 3
    for got, want in zip(out, (k1, k2, v)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want[order])
    ks, vs = lax.sort_key_val(k1, v)
    np.testing.assert_array_equal(np.asarray(vs), v[np.argsort(k1, kind="stable")])
    np.testing.assert_array_equal(np.asarray(ks), np.sort(k1))


def test_lax_sort_dimension_0_rank_3(mode):
    x = _data(np.float32, (4, 3, 2), seed=3)
    np.testing.assert_array_equal(np.asarray(mode(lambda a: lax.sort(a, dimension=0))(x)),
                                  np.sort(x, axis=0))
    text = str(olympus.make_jaxpr(lambda a: lax.sort(a, dimension=-1))(x))
    assert "sort[dimension=2 is_stable=True num_keys=1]" in text


def test_lexsort_msort_sort_complex(x64, mode):
    a = np.array([3, 1, 2, 1, 3, 0], np.int32)
    b = np.array([0., 1., 1., 0., -1., 5.], np.float64)
    got = mode(lambda p, q: jnp.lexsort((p, q)))(a, b)
    np.testing.assert_array_equal(np.asarray(got), np.lexsort((a, b)))
    assert got.dtype == (np.int64 if x64 else np.int32)
    m = np.stack([a, b.astype(np.int32)])
    np.testing.assert_array_equal(np.asarray(jnp.lexsort(m)), np.lexsort(m))
    x = _data(np.float32, (4, 3), seed=1)
    np.testing.assert_array_equal(np.asarray(mode(jnp.msort)(x)), np.sort(x, axis=0))
    c = np.array([1 + 2j, 1 - 1j, -2 + 0j, 1 + 0j], np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.sort_complex(c)), np.sort_complex(c))
    r = np.array([3., 1., 2.], np.float32)
    got = jnp.sort_complex(r)
    np.testing.assert_array_equal(np.asarray(got), np.sort_complex(r))
    assert got.dtype == np.complex64  # JAX's dtype (NumPy gives complex128)


@pytest.mark.parametrize("kth", [0, 2, 4, -1])
def test_partition_property(kth, mode):
    x = np.array([[5., 1., 4., 1., 3.], [0., -2., 9., 9., 7.]], np.float32)
    got = np.asarray(mode(lambda a: jnp.partition(a, kth))(x))
    want = np.partition(x, kth)
    np.testing.assert_array_equal(got[:, kth], want[:, kth])
    for row in range(2):
        assert (got[row, :kth % 5] <= got[row, kth]).all()
        assert (got[row, kth % 5 + 1:] >= got[row, kth]).all()
        np.testing.assert_array_equal(np.sort(got[row]), np.sort(x[row]))
    idx = np.asarray(mode(lambda a: jnp.argpartition(a, kth))(x))
    picked = np.take_along_axis(x, idx, axis=-1)
    np.testing.assert_array_equal(picked[:, kth], want[:, kth])
    for row in range(2):
        assert sorted(idx[row].tolist()) == list(range(5))
        assert (picked[row, :kth % 5] <= picked[row, kth]).all()
        assert (picked[row, kth % 5 + 1:] >= picked[row, kth]).all()


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.int64, np.float16, np.float32,
                                np.float64], ids=lambda d: np.dtype(d).name)
def test_top_k_against_numpy(dt, x64, mode):
    x = _data(dt, (3, 8), seed=5)
    for k in (0, 1, 3, 8):
        vals, idx = mode(lambda a: lax.top_k(a, k))(x)
        xc = x.astype(_canon(dt))
        want_idx = np.argsort(-xc.astype(np.float64), axis=-1, kind="stable")[:, :k]
        assert vals.dtype == _canon(dt) and idx.dtype == np.int32
        assert vals.shape == (3, k)
        np.testing.assert_array_equal(np.asarray(idx), want_idx)
        np.testing.assert_array_equal(np.asarray(vals), np.take_along_axis(xc, want_idx, -1))


def test_top_k_nan_first():
    x = np.array([1., np.nan, 3., 3.], np.float32)
    vals, idx = lax.top_k(x, 3)
    np.testing.assert_array_equal(np.asarray(vals), [np.nan, 3., 3.])
    np.testing.assert_array_equal(np.asarray(idx), [1, 2, 3])


def test_vmap_sort_argsort_top_k():
    x = _data(np.float32, (4, 3, 5), seed=7)
    got = olympus.vmap(jnp.sort)(x)
    np.testing.assert_array_equal(np.asarray(got), np.sort(x, axis=-1))
    got = olympus.vmap(lambda a: jnp.argsort(a, axis=0), in_axes=1, out_axes=1)(x)
    np.testing.assert_array_equal(np.asarray(got), np.argsort(x, axis=0, kind="stable"))
    vals, idx = olympus.vmap(lambda a: lax.top_k(a, 2), in_axes=2)(x)
    want = np.argsort(-np.moveaxis(x, 2, 0), axis=-1, kind="stable")[..., :2]
    np.testing.assert_array_equal(np.asarray(idx), want)
    # one operand batched, the other not
    keys = np.array([2, 0, 1, 0, 2], np.int32)
    vs = olympus.vmap(lambda v: lax.sort_key_val(keys, v)[1])(x[0])
    np.testing.assert_array_equal(np.asarray(vs), x[0][:, np.argsort(keys, kind="stable")])


def _fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_grad_sort_known_and_fd(mode):
    x = np.array([3., 2., 1., 0., 5., 4.], np.float32)
    w = np.arange(6, dtype=np.float32)
    g = mode(olympus.grad(lambda a: jnp.sum(jnp.sort(a) * w)))(x)
    np.testing.assert_array_equal(np.asarray(g), [3., 2., 1., 0., 5., 4.])  # rank of each element
    olympus.config.update("olympus_enable_x64", True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    w = rng.normal(size=(3, 4))

    def f(a):
        return jnp.sum(jnp.sin(jnp.sort(a, axis=0)) * w) + \
            jnp.sum(jnp.sort(a, axis=1, descending=True) ** 2 * w)
    g = mode(olympus.grad(f))(x)
    np.testing.assert_allclose(np.asarray(g), _fd_grad(lambda a: float(f(a)), x), rtol=1e-6,
                               atol=1e-8)


def test_grad_sort_values_by_keys_and_jvp():
    olympus.config.update("olympus_enable_x64", True)
    keys = np.array([2., 0., 1., 3.])
    v = np.array([1., 2., 3., 4.])

    def f(k, val):
        sk, sv = lax.sort_key_val(k, val)
        return jnp.sum(sk * jnp.arange(4.)) + jnp.sum(sv * sv * jnp.arange(1., 5.))
    gk, gv = olympus.grad(f, argnums=(0, 1))(keys, v)
    order = np.argsort(keys)
    np.testing.assert_allclose(np.asarray(gk)[order], np.arange(4.))
    np.testing.assert_allclose(np.asarray(gv)[order], 2 * v[order] * np.arange(1., 5.))
    p, t = olympus.jvp(lambda a: jnp.sort(a), (keys,), (np.arange(4.),))
    np.testing.assert_allclose(np.asarray(p), np.sort(keys))
    np.testing.assert_allclose(np.asarray(t), np.arange(4.)[order])


def test_grad_top_k(mode):
    olympus.config.update("olympus_enable_x64", True)
    x = np.array([[3., 2., 1., 0., 5., 4.], [1., 9., 2., 8., 3., 7.]])
    w = np.array([1., 2.])
    g = mode(olympus.grad(lambda a: jnp.sum(lax.top_k(a, 2)[0] * w)))(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 0, 0, 0, 1, 2], [0, 1, 0, 2, 0, 0]])

    def f(a):
        return jnp.sum(jnp.exp(lax.top_k(a, 3)[0]) * np.array([1., -2., 0.5]))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5))
    np.testing.assert_allclose(np.asarray(mode(olympus.grad(f))(x)),
                               _fd_grad(lambda a: float(f(a)), x), rtol=1e-6, atol=1e-8)
    # vmap of grad
    gs = olympus.vmap(olympus.grad(f))(x[:, None, :])
    np.testing.assert_allclose(np.asarray(gs)[:, 0], np.asarray(olympus.grad(f)(x)), rtol=1e-12)


def test_errors_are_clear():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(Exception, match=r"operand 0 is f32\[2,3\], operand 1 is i32\[3\]"):
        lax.sort((x, np.zeros(3, np.int32)))
    with pytest.raises(ValueError, match=r"num_keys must be in \[1, 2\].*got 3"):
        lax.sort((x, x), num_keys=3)
    with pytest.raises(Exception, match="dimension 2 is out of range for rank 2"):
        lax.sort(x, dimension=2)
    with pytest.raises(Exception, match=r"k must be in \[0, 3\].*got 4"):
        lax.top_k(x, 4)
    with pytest.raises(Exception, match="integer or float dtype"):
        lax.top_k(np.zeros(3, np.complex64), 1)
    with pytest.raises(Exception, match="out of bounds"):
        jnp.sort(x, axis=2)
    with pytest.raises(ValueError, match="kth 5 is out of bounds"):
        jnp.partition(x, 5)
    with pytest.raises(ValueError, match="same shape"):
        jnp.lexsort((np.zeros(3), np.zeros(4)))
    with pytest.raises(NotImplementedError, match="order"):
        jnp.sort(x, order="f")

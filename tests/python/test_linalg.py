"""olympus.numpy.linalg, olympus.scipy.linalg and olympus.lax.linalg against
numpy.linalg / scipy.linalg: values and dtypes (x64 off and on, eagerly and
under jit), identities (q r = a, u s vh = a, l l^H = a, a v = v w), batches
and vmap against loops, NaNs instead of exceptions for failed factorisations,
and gradients against finite differences (olympus.test_util.check_grads)."""
import numpy as np
import pytest
import scipy.linalg as sl

import olympus
import olympus.numpy as jnp
import olympus.scipy.linalg as jsl
from olympus import lax
from olympus.lax import linalg as lax_linalg
from olympus.test_util import check_grads

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]
_NARROW = {np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}


def _canon(dt):
    dt = np.dtype(dt)
    return dt if olympus.config.olympus_enable_x64 else _NARROW.get(dt, dt)


def _rand(shape, dt=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.issubdtype(np.dtype(dt), np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def _spd(shape, dt=np.float64, seed=0):
    a = _rand(shape, dt, seed)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dt)


def _tol(dt):
    return 2e-4 if _canon(dt) in (np.float32, np.complex64) else 1e-10


def _close(got, want, dt, scale=1.0):
    t = _tol(dt) * scale
    np.testing.assert_allclose(np.asarray(got), want, rtol=t, atol=t)


def _H(x):
    return np.conj(np.swapaxes(x, -1, -2))


DT_IDS = lambda d: np.dtype(d).name  # noqa: E731


# ------------------------------------------------------------------ jnp.linalg values

@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_solve_inv_det_slogdet(dt, x64, mode):
    a = _rand((2, 4, 4), dt)
    b = _rand((2, 4, 3), dt, 1)
    an = a.astype(_canon(dt))
    x = mode(jnp.linalg.solve)(a, b)
    assert x.dtype == _canon(dt) and x.shape == (2, 4, 3)
    _close(x, np.linalg.solve(an, b.astype(_canon(dt))), dt, 10)
    _close(mode(jnp.linalg.solve)(a[0], b[0, :, 0]), np.linalg.solve(an[0], b[0, :, 0]), dt, 10)
    _close(mode(jnp.linalg.inv)(a), np.linalg.inv(an), dt, 10)
    _close(mode(jnp.linalg.det)(a), np.linalg.det(an), dt, 10)
    s, ld = mode(jnp.linalg.slogdet)(a)
    ws, wld = np.linalg.slogdet(an)
    _close(s, ws, dt)
    _close(ld, wld, dt)
    assert ld.dtype == np.real(np.zeros((), _canon(dt))).dtype


def test_solve_broadcasting_and_vectors(x64):
    a = _rand((3, 1, 4, 4))
    b = _rand((1, 5, 4, 2), seed=1)
    got = jnp.linalg.solve(a, b)
    assert got.shape == (3, 5, 4, 2)
    _close(got, np.linalg.solve(a.astype(_canon(np.float64)), b), np.float64, 10)
    bv = _rand((3, 4), seed=2)  # a stack of vectors: one rank below a[:, 0]
    _close(jnp.linalg.solve(a[:, 0], bv), np.linalg.solve(a[:, 0], bv), np.float64, 10)
    with pytest.raises(ValueError):
        jnp.linalg.solve(a[0, 0], _rand((3,)))


def test_integer_input_promotes(x64):
    a = np.array([[2, 1], [1, 3]])
    got = jnp.linalg.inv(a)
    assert got.dtype == (np.float64 if x64 else np.float32)
    _close(got, np.linalg.inv(a), np.float64)
    assert jnp.linalg.det(a).dtype == got.dtype


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_cholesky_qr_identities(dt, x64, mode):
    c = _canon(dt)
    spd = _spd((2, 4, 4), dt)
    l = np.asarray(mode(jnp.linalg.cholesky)(spd))
    assert l.dtype == c
    _close(l, np.linalg.cholesky(spd.astype(c)), dt, 10)
    _close(l @ _H(l), spd, dt, 10)
    u = np.asarray(jnp.linalg.cholesky(spd, upper=True))
    _close(_H(u) @ u, spd, dt, 10)
    for shape in [(2, 5, 3), (2, 3, 5)]:
        a = _rand(shape, dt)
        for m in ("reduced", "complete"):
            q, r = mode(lambda x: jnp.linalg.qr(x, mode=m))(a)
            wq, wr = np.linalg.qr(a.astype(c), mode=m)
            assert q.shape == wq.shape and r.shape == wr.shape
            _close(np.asarray(q) @ np.asarray(r), a, dt, 10)
            _close(np.abs(np.asarray(r)), np.abs(wr), dt, 10)  # LAPACK's signs, as NumPy's
            assert np.all(np.tril(np.asarray(r), -1) == 0)
        _close(np.abs(mode(lambda x: jnp.linalg.qr(x, mode="r"))(a)),
               np.abs(np.linalg.qr(a.astype(c), mode="r")), dt, 10)


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_eigh_eigvalsh(dt, x64, mode):
    a = _rand((2, 4, 4), dt)
    herm = (a + _H(a)) / 2
    w, v = mode(jnp.linalg.eigh)(herm)
    c = _canon(dt)
    assert w.dtype == np.real(np.zeros((), c)).dtype and v.dtype == c
    _close(w, np.linalg.eigvalsh(herm.astype(c)), dt, 10)
    v = np.asarray(v)
    _close(herm @ v, v * np.asarray(w)[..., None, :], dt, 10)
    # UPLO picks the triangle read when not symmetrising
    lo = np.tril(herm) + np.triu(_rand((4, 4), dt, 3), 1)
    for uplo in ("L", "U"):
        m = lo if uplo == "L" else _H(lo)
        got = jnp.linalg.eigh(m, UPLO=uplo, symmetrize_input=False)[0]
        _close(got, np.linalg.eigvalsh(m.astype(c), UPLO=uplo), dt, 10)
        # eigvalsh symmetrises first (as JAX's): only Hermitian input agrees with NumPy
        _close(jnp.linalg.eigvalsh(herm, UPLO=uplo), np.linalg.eigvalsh(herm.astype(c)), dt, 10)


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_svd(dt, x64, mode):
    c = _canon(dt)
    for shape in [(2, 5, 3), (2, 3, 5), (4, 4)]:
        a = _rand(shape, dt)
        for full in (True, False):
            u, s, vh = mode(lambda x: jnp.linalg.svd(x, full_matrices=full))(a)
            wu, ws, wvh = np.linalg.svd(a.astype(c), full_matrices=full)
            assert (u.shape, s.shape, vh.shape) == (wu.shape, ws.shape, wvh.shape)
            assert s.dtype == ws.dtype and u.dtype == c
            _close(s, ws, dt, 10)
            k = min(shape[-2:])
            u, vh = np.asarray(u), np.asarray(vh)
            _close((u[..., :, :k] * np.asarray(s)[..., None, :]) @ vh[..., :k, :], a, dt, 10)
        _close(mode(jnp.linalg.svdvals)(a), np.linalg.svd(a.astype(c), compute_uv=False), dt, 10)
    herm = _spd((4, 4), dt) - 5 * np.eye(4, dtype=dt)  # indefinite
    u, s, vh = jnp.linalg.svd(herm, hermitian=True)
    _close(s, np.linalg.svd(herm.astype(c), compute_uv=False), dt, 10)
    _close((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), herm, dt, 10)
    _close(jnp.linalg.svd(herm, compute_uv=False, hermitian=True),
           np.linalg.svd(herm.astype(c), compute_uv=False), dt, 10)


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_eig_eigvals(dt, x64):
    a = _rand((2, 4, 4), dt)
    w, v = jnp.linalg.eig(a)
    assert np.issubdtype(w.dtype, np.complexfloating)
    w, v = np.asarray(w), np.asarray(v)
    _close(a @ v, v * w[..., None, :], dt, 10)
    _close(np.linalg.norm(v, axis=-2), np.ones((2, 4)), dt)
    wv = np.asarray(jnp.linalg.eigvals(a))
    want = np.linalg.eigvals(a.astype(_canon(dt)))
    _close(np.sort_complex(wv), np.sort_complex(want), dt, 10)


def test_pinv_lstsq_rank_cond(x64, mode):
    a = _rand((5, 3))
    low = _rand((5, 2)) @ _rand((2, 4), seed=1)  # rank 2
    c = _canon(np.float64)
    _close(mode(jnp.linalg.pinv)(a), np.linalg.pinv(a.astype(c)), np.float64, 10)
    rcond = 10 * 5 * np.finfo(c).eps  # JAX's default cutoff (NumPy's 1e-15 keeps float32 noise)
    _close(mode(jnp.linalg.pinv)(low), np.linalg.pinv(low.astype(c), rcond=rcond), np.float64, 100)
    _close(jnp.linalg.pinv(_rand((2, 3, 5))), np.linalg.pinv(_rand((2, 3, 5)).astype(c)),
           np.float64, 10)
    assert int(mode(jnp.linalg.matrix_rank)(low)) == 2
    assert int(jnp.linalg.matrix_rank(a)) == 3
    np.testing.assert_array_equal(jnp.linalg.matrix_rank(np.stack([low[:4], np.eye(4)])), [2, 4])
    assert int(jnp.linalg.matrix_rank(low, tol=1e3)) == 0
    b = _rand((5, 2), seed=2)
    x, res, rank, s = mode(jnp.linalg.lstsq)(a, b)
    wx, wres, wrank, ws = np.linalg.lstsq(a.astype(c), b.astype(c), rcond=None)
    _close(x, wx, np.float64, 10)
    _close(res, wres, np.float64, 10)
    assert int(rank) == wrank
    _close(s, ws, np.float64, 10)
    x1 = jnp.linalg.lstsq(low, b[:, 0], rcond=1e-5)[0]  # rank 2: the cutoff matters in float32
    _close(x1, np.linalg.lstsq(low.astype(c), b[:, 0].astype(c), rcond=1e-5)[0], np.float64, 100)
    sq = _rand((4, 4))
    for p in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
        _close(jnp.linalg.cond(sq, p), np.linalg.cond(sq.astype(c), p), np.float64, 100)
    assert np.isinf(float(jnp.linalg.cond(np.array([[1.0, 2.0], [2.0, 4.0]]), 1)))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64], ids=DT_IDS)
def test_norm_every_ord(dt, x64):
    c = _canon(dt)
    v = _rand((7,), dt)
    m = _rand((3, 4, 5), dt)
    for ord_ in (None, 0, 1, 2, 3, 0.5, -1, np.inf, -np.inf):
        _close(jnp.linalg.norm(v, ord_), np.linalg.norm(v.astype(c), ord_), dt, 10)
        _close(jnp.linalg.vector_norm(m, ord=2 if ord_ is None else ord_, axis=(0, 2)),
               np.linalg.norm(m.astype(c).transpose(1, 0, 2).reshape(4, -1),
                              2 if ord_ is None else ord_, axis=1), dt, 10)
    for ord_ in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
        for axis in ((1, 2), (2, 0), (-1, -2)):
            for keep in (False, True):
                got = jnp.linalg.norm(m, ord_, axis=axis, keepdims=keep)
                want = np.linalg.norm(m.astype(c), ord_, axis=axis, keepdims=keep)
                assert got.shape == want.shape, (ord_, axis, keep)
                _close(got, want, dt, 10)
    _close(jnp.linalg.norm(m), np.linalg.norm(m.astype(c)), dt, 10)
    _close(jnp.linalg.norm(m, axis=1, keepdims=True),
           np.linalg.norm(m.astype(c), axis=1, keepdims=True), dt, 10)
    _close(jnp.linalg.matrix_norm(m, ord="nuc"), np.linalg.norm(m.astype(c), "nuc", axis=(1, 2)),
           dt, 10)
    with pytest.raises(ValueError):
        jnp.linalg.norm(m[0], "bad")
    with pytest.raises(ValueError):
        jnp.linalg.norm(m, axis=(0, 1, 2))


def test_matrix_power_multi_dot_tensors(x64):
    a = _rand((2, 3, 3))
    for n in (0, 1, 2, 3, 5, 8, -1, -3):
        _close(jnp.linalg.matrix_power(a, n), np.linalg.matrix_power(a, n), np.float64, 100)
    ia = np.arange(9).reshape(3, 3)
    np.testing.assert_array_equal(jnp.linalg.matrix_power(ia, 3), np.linalg.matrix_power(ia, 3))
    with pytest.raises(TypeError):
        jnp.linalg.matrix_power(a, 1.5)
    ms = [_rand((4, 6)), _rand((6, 2), seed=1), _rand((2, 5), seed=2), _rand((5,), seed=3)]
    _close(jnp.linalg.multi_dot(ms), np.linalg.multi_dot(ms), np.float64, 10)
    _close(jnp.linalg.multi_dot([ms[3][:4] * 0 + 1] + ms[:3]),
           np.linalg.multi_dot([np.ones(4)] + ms[:3]), np.float64, 10)
    t = _rand((2, 3, 6))
    b = _rand((2, 3), seed=4)
    _close(jnp.linalg.tensorsolve(t, b), np.linalg.tensorsolve(t, b), np.float64, 100)
    t4 = _rand((4, 6, 8, 3))
    _close(jnp.linalg.tensorinv(t4, ind=2), np.linalg.tensorinv(t4, ind=2), np.float64, 100)
    with pytest.raises(ValueError):
        jnp.linalg.tensorinv(t4, ind=1)


def test_products_and_views():
    a, b = _rand((2, 3, 4)), _rand((2, 3, 4), seed=1)
    np.testing.assert_allclose(jnp.linalg.matrix_transpose(a), np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(jnp.linalg.vecdot(a, b), np.sum(a * b, -1), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.diagonal(a), np.diagonal(a, axis1=-2, axis2=-1))
    for off in (-2, -1, 1, 3, 5):
        np.testing.assert_allclose(jnp.linalg.diagonal(a, offset=off),
                                   np.diagonal(a, off, axis1=-2, axis2=-1))
    np.testing.assert_allclose(jnp.linalg.trace(a, offset=1),
                               np.trace(a, 1, axis1=-2, axis2=-1), rtol=1e-6)
    v, w = _rand((5, 3)), _rand((3,), seed=2)
    np.testing.assert_allclose(jnp.linalg.cross(v, w), np.cross(v, w), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.cross(v.T, w[:, None], axis=0),
                               np.cross(v.T, w[:, None], axis=0), rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.outer(w, v[:, 0]), np.outer(w, v[:, 0]), rtol=1e-6)
    with pytest.raises(ValueError):
        jnp.linalg.cross(a, b)
    np.testing.assert_allclose(jnp.linalg.matmul(a, np.swapaxes(b, 1, 2)),
                               a @ np.swapaxes(b, 1, 2), rtol=1e-5)


def test_failures_give_nan_not_exceptions():
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])  # indefinite
    assert np.all(np.isnan(jnp.linalg.cholesky(bad)))
    both = jnp.linalg.cholesky(np.stack([np.eye(2), bad]))
    np.testing.assert_allclose(both[0], np.eye(2))
    assert np.all(np.isnan(both[1]))
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert not np.all(np.isfinite(jnp.linalg.inv(sing)))
    assert float(jnp.linalg.det(sing)) == 0
    s, ld = jnp.linalg.slogdet(sing)
    assert float(s) == 0 and float(ld) == -np.inf
    nan = np.full((3, 3), np.nan)
    assert np.all(np.isnan(jnp.linalg.svd(nan, compute_uv=False)))
    assert np.all(np.isnan(jnp.linalg.eigh(nan)[0]))
    assert np.all(np.isnan(jnp.linalg.eigvals(nan)))
    with pytest.raises(np.linalg.LinAlgError):
        jnp.linalg.inv(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError):
        jnp.linalg.det(np.ones((2, 3)))


def test_vmap_matches_loops():
    a = _rand((4, 3, 3))
    b = _rand((4, 3, 2), seed=1)
    spd = _spd((4, 3, 3))
    cases = [
        (jnp.linalg.solve, (a, b)),
        (jnp.linalg.inv, (a,)),
        (jnp.linalg.det, (a,)),
        (lambda x: jnp.linalg.eigh(x)[0], (spd,)),
        (jnp.linalg.cholesky, (spd,)),
        (lambda x: jnp.linalg.svd(x, compute_uv=False), (a,)),
        (lambda x: jnp.linalg.qr(x)[1], (a,)),
        (jsl.expm, (a,)),
        (lambda x, y: jsl.lu_solve(jsl.lu_factor(x), y), (a, b)),
        (lambda x, y: jsl.solve_triangular(x, y, lower=True), (a, b)),
        (lambda x: lax_linalg.lu(x)[0], (a,)),
    ]
    for f, args in cases:
        got = olympus.vmap(f)(*args)
        want = np.stack([np.asarray(f(*[x[i] for x in args])) for i in range(4)])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)
    # batched in the middle, out at the end
    got = olympus.vmap(jnp.linalg.inv, in_axes=1, out_axes=2)(np.moveaxis(a, 0, 1))
    np.testing.assert_allclose(np.moveaxis(np.asarray(got), 2, 0), np.linalg.inv(a), rtol=1e-4,
                               atol=1e-5)


def test_jaxpr_names_the_primitives():
    a, b = np.eye(3, dtype=np.float32), np.ones((3, 2), np.float32)
    text = str(olympus.make_jaxpr(jnp.linalg.solve)(a, b))
    assert "lu" in text and "triangular_solve" in text
    assert "svd" in str(olympus.make_jaxpr(jnp.linalg.pinv)(a))
    assert "eigh" in str(olympus.make_jaxpr(jnp.linalg.eigh)(a))


# ------------------------------------------------------------------ lax.linalg

@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_lax_lu_and_pivots(dt, x64):
    for shape in [(2, 4, 4), (5, 3), (3, 5)]:
        a = _rand(shape, dt)
        lu, piv, perm = lax_linalg.lu(a)
        assert piv.dtype == np.int32 and perm.dtype == np.int32
        lu, piv, perm = np.asarray(lu), np.asarray(piv), np.asarray(perm)
        m, n = shape[-2:]
        k = min(m, n)
        l = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
        u = np.triu(lu)[..., :k, :]
        _close(l @ u, np.take_along_axis(a, perm[..., :, None], axis=-2), dt, 10)
        wlu, wpiv = sl.lu_factor(a.reshape((-1,) + shape[-2:])[0]) if m == n else (None, None)
        if wpiv is not None:
            np.testing.assert_array_equal(piv.reshape(-1, k)[0], wpiv)
        np.testing.assert_array_equal(lax_linalg.lu_pivots_to_permutation(piv, m), perm)


def test_lax_triangular_solve_every_flag(x64):
    rng = np.random.default_rng(0)
    a = np.tril(_rand((2, 4, 4), np.complex128)) + 4 * np.eye(4)
    for left in (True, False):
        b = _rand((2, 4, 3) if left else (2, 3, 4), np.complex128, 1)
        for lower in (True, False):
            aa = a if lower else _H(a)
            for ta in (False, True):
                for ca in (False, True):
                    for unit in (False, True):
                        x = np.asarray(lax_linalg.triangular_solve(
                            aa, b, left_side=left, lower=lower, transpose_a=ta, conjugate_a=ca,
                            unit_diagonal=unit))
                        op = aa.copy()
                        if unit:
                            op[..., range(4), range(4)] = 1
                        if ta:
                            op = np.swapaxes(op, -1, -2)
                        if ca:
                            op = np.conj(op)
                        res = op @ x if left else x @ op
                        _close(res, b.astype(_canon(np.complex128)), np.complex128, 100)
    assert rng is not None
    # a vector b (one rank below a)
    v = _rand((2, 4), np.float64)
    x = lax_linalg.triangular_solve(np.real(a), v, left_side=True, lower=True)
    _close(np.einsum("bij,bj->bi", np.real(np.tril(a)), np.asarray(x)), v, np.float64, 10)


def test_lax_eig_left_and_eigh_unsymmetrised():
    a = _rand((4, 4))
    w, vl, vr = lax_linalg.eig(a)
    w, vl, vr = map(np.asarray, (w, vl, vr))
    np.testing.assert_allclose(_H(vl) @ a, w[:, None] * _H(vl), atol=1e-4)
    np.testing.assert_allclose(a @ vr, vr * w, atol=1e-4)
    assert len(lax_linalg.eig(a, compute_left_eigenvectors=False)) == 2
    v, w = lax_linalg.eigh(np.tril(a) + np.triu(np.full((4, 4), 50.0), 1), symmetrize_input=False)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-4, atol=1e-4)
    q, r = lax_linalg.qr(_rand((5, 3)), full_matrices=False)
    assert q.shape == (5, 3) and r.shape == (3, 3)
    u, s, vh = lax_linalg.svd(_rand((5, 3)))
    assert u.shape == (5, 5) and vh.shape == (3, 3)
    with pytest.raises(TypeError):
        lax_linalg.cholesky(np.eye(3, dtype=np.int32))


# ------------------------------------------------------------------ scipy.linalg

@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_scipy_lu_cho_solve(dt, x64, mode):
    c = _canon(dt)
    a = _rand((4, 4), dt)
    b = _rand((4, 2), dt, 1)
    ac, bc = a.astype(c), b.astype(c)
    for got, want in zip(mode(jsl.lu)(a), sl.lu(ac)):
        _close(got, want, dt, 10)
    pl, u = jsl.lu(a, permute_l=True)
    _close(np.asarray(pl) @ np.asarray(u), a, dt, 10)
    p, l, u = jsl.lu(_rand((5, 3), dt))
    assert (p.shape, l.shape, u.shape) == ((5, 5), (5, 3), (3, 3))
    lu, piv = mode(jsl.lu_factor)(a)
    wlu, wpiv = sl.lu_factor(ac)
    _close(lu, wlu, dt, 10)
    np.testing.assert_array_equal(piv, wpiv)
    for trans in (0, 1, 2):
        _close(jsl.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((wlu, wpiv), bc, trans=trans),
               dt, 10)
    _close(jsl.lu_solve((lu, piv), b[:, 0]), sl.lu_solve((wlu, wpiv), bc[:, 0]), dt, 10)
    spd = _spd((4, 4), dt)
    for lower in (False, True):
        _close(jsl.cholesky(spd, lower=lower), sl.cholesky(spd.astype(c), lower=lower), dt, 10)
        cf = jsl.cho_factor(spd, lower=lower)
        _close(jsl.cho_solve(cf, b), sl.cho_solve(sl.cho_factor(spd.astype(c), lower=lower), bc),
               dt, 10)
        _close(jsl.solve(spd, b, assume_a="pos", lower=lower),
               sl.solve(spd.astype(c), bc, assume_a="pos", lower=lower), dt, 10)
    _close(jsl.solve(a, b), sl.solve(ac, bc), dt, 10)
    _close(jsl.inv(a), sl.inv(ac), dt, 10)
    _close(jsl.det(a), sl.det(ac), dt, 10)
    with pytest.raises(ValueError):
        jsl.solve(a, b, assume_a="banded")


@pytest.mark.parametrize("dt", [np.float64, np.complex128], ids=DT_IDS)
def test_scipy_solve_triangular(dt, x64):
    c = _canon(dt)
    a = np.triu(_rand((4, 4), dt)) + 4 * np.eye(4)
    b = _rand((4, 3), dt, 1)
    for trans in (0, 1, 2, "N", "T", "C"):
        for unit in (False, True):
            for lower in (False, True):
                aa = a if not lower else _H(a)
                got = jsl.solve_triangular(aa, b, trans=trans, lower=lower, unit_diagonal=unit)
                want = sl.solve_triangular(aa.astype(c), b.astype(c), trans=trans, lower=lower,
                                           unit_diagonal=unit)
                _close(got, want, dt, 10)
    _close(jsl.solve_triangular(a, b[:, 0]), sl.solve_triangular(a.astype(c), b[:, 0].astype(c)),
           dt, 10)
    with pytest.raises(ValueError):
        jsl.solve_triangular(a, b, trans=3)


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_scipy_qr_svd_eigh(dt, x64):
    c = _canon(dt)
    a = _rand((5, 3), dt)
    for m in ("full", "economic"):
        q, r = jsl.qr(a, mode=m)
        wq, wr = sl.qr(a.astype(c), mode=m)
        assert q.shape == wq.shape and r.shape == wr.shape
        _close(np.asarray(q) @ np.asarray(r), a, dt, 10)
    (r,) = jsl.qr(a, mode="r")
    _close(np.abs(r), np.abs(sl.qr(a.astype(c), mode="r")[0]), dt, 10)
    with pytest.raises(NotImplementedError):
        jsl.qr(a, pivoting=True)
    u, s, vh = jsl.svd(a)
    _close(s, sl.svd(a.astype(c), compute_uv=False), dt, 10)
    _close(jsl.svd(a, compute_uv=False), sl.svd(a.astype(c), compute_uv=False), dt, 10)
    h = _rand((4, 4), dt)
    for lower in (True, False):
        w, v = jsl.eigh(h, lower=lower)
        _close(w, sl.eigh(h.astype(c), lower=lower, eigvals_only=True), dt, 10)
        _close(jsl.eigh(h, lower=lower, eigvals_only=True),
               sl.eigh(h.astype(c), lower=lower, eigvals_only=True), dt, 10)
    with pytest.raises(NotImplementedError):
        jsl.eigh(h, np.eye(4))


@pytest.mark.parametrize("dt", FLOATS, ids=DT_IDS)
def test_expm(dt, x64, mode):
    c = _canon(dt)
    # norms spanning every Pade degree and the scaling: 1e-3 .. 40
    for scale in (1e-3, 0.1, 0.5, 1.5, 4.0, 40.0):
        a = (_rand((4, 4), dt) * scale / 4).astype(dt)
        got = mode(jsl.expm)(a)
        want = sl.expm(a.astype(c))
        t = 1e-4 if c in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(np.asarray(got), want, rtol=t * max(1, scale),
                                   atol=t * max(1, np.abs(want).max()))
    batch = _rand((3, 3, 3), dt)
    _close(jsl.expm(batch), np.stack([sl.expm(x) for x in batch.astype(c)]), dt, 100)
    up = np.triu(_rand((4, 4), dt))
    _close(jsl.expm(up, upper_triangular=True), sl.expm(up.astype(c)), dt, 100)
    assert np.all(np.isnan(jsl.expm(np.full((2, 2), 1e30, dt), max_squarings=4)))


def test_expm_frechet_sqrtm_block_diag(x64):
    a, e = _rand((3, 3)) * 0.5, _rand((3, 3), seed=1)
    ex, L = jsl.expm_frechet(a, e)
    wex, wL = sl.expm_frechet(a, e)
    _close(ex, wex, np.float64, 10)
    _close(L, wL, np.float64, 10)
    _close(jsl.expm_frechet(a, e, compute_expm=False), wL, np.float64, 10)
    spd = _spd((3, 3))
    _close(jsl.sqrtm(spd), sl.sqrtm(spd), np.float64, 10)
    r = np.asarray(jsl.sqrtm(_rand((3, 3), seed=2)))
    _close(r @ r, _rand((3, 3), seed=2), np.float64, 100)
    parts = [_rand((2, 3)), np.arange(3.0), 7, np.ones((1, 1), np.float32)]
    got = jsl.block_diag(*parts)
    want = sl.block_diag(*parts)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


# ------------------------------------------------------------------ gradients

def _grad_cases():
    a = _rand((4, 4))
    b = _rand((4, 2), seed=1)
    spd = _spd((4, 4))
    tall = _rand((4, 3), seed=2)
    ac = _rand((3, 3), np.complex128, seed=3)
    return {
        "solve": (jnp.linalg.solve, (a, b), 2),
        "inv": (jnp.linalg.inv, (a,), 2),
        "det": (jnp.linalg.det, (a,), 2),
        "det_complex": (jnp.linalg.det, (ac,), 1),
        "slogdet": (lambda x: jnp.linalg.slogdet(x)[1], (a,), 2),
        "cholesky": (jnp.linalg.cholesky, (spd,), 2),
        "cholesky_complex": (jnp.linalg.cholesky, (_spd((3, 3), np.complex128),), 1),
        "eigh_values": (lambda x: jnp.linalg.eigh(x)[0], (spd,), 2),
        "eigh_vectors": (lambda x: (lambda w, v: (v * w) @ v.T)(*jnp.linalg.eigh(x)), (a,), 1),
        "svd_values": (jnp.linalg.svdvals, (tall,), 2),
        "svd_vectors": (lambda x: (lambda u, s, vh: (u * s) @ vh)(
            *jnp.linalg.svd(x, full_matrices=False)), (tall,), 1),
        "svd_wide_u": (lambda x: jnp.abs(jnp.linalg.svd(x, full_matrices=False)[0]), (tall.T,), 1),
        "qr": (lambda x: jnp.linalg.qr(x), (tall,), 1),
        "qr_complex": (lambda x: jnp.linalg.qr(x), (_rand((4, 3), np.complex128, 5),), 1),
        "pinv": (jnp.linalg.pinv, (tall,), 1),
        "lstsq": (lambda x, y: jnp.linalg.lstsq(x, y)[0], (tall, b), 1),
        "eigvals": (jnp.linalg.eigvals, (a,), 1),
        "norm_2": (lambda x: jnp.linalg.norm(x, 2), (a,), 1),
        "norm_nuc": (lambda x: jnp.linalg.norm(x, "nuc"), (a,), 1),
        "expm": (jsl.expm, (a * 0.3,), 1),
        "expm_scaled": (jsl.expm, (a * 3,), 1),
        "scipy_cho_solve": (lambda x, y: jsl.solve(x, y, assume_a="pos"), (spd, b), 1),
        "scipy_lu_solve": (lambda x, y: jsl.lu_solve(jsl.lu_factor(x), y, trans=1), (a, b), 1),
        "solve_triangular": (lambda x, y: jsl.solve_triangular(x, y, lower=True, trans=1),
                             (a + 4 * np.eye(4), b), 2),
        "matrix_power": (lambda x: jnp.linalg.matrix_power(x, -2), (a,), 1),
    }


@pytest.mark.parametrize("name", list(_grad_cases()))
def test_gradients(name):
    with olympus.enable_x64():
        f, args, order = _grad_cases()[name]
        check_grads(f, args, order=order, modes=("fwd", "rev"))


def test_det_gradient_of_singular_matrix():
    with olympus.enable_x64():
        sing = np.array([[1.0, 2.0], [2.0, 4.0]])
        # d det / d a = adjugate(a)^T, also at rank n - 1
        np.testing.assert_allclose(olympus.grad(jnp.linalg.det)(sing), [[4.0, -2.0], [-2.0, 1.0]])
        zero = olympus.grad(jnp.linalg.det)(np.zeros((3, 3)))
        np.testing.assert_array_equal(zero, np.zeros((3, 3)))


def test_gradients_under_jit_and_vmap():
    with olympus.enable_x64():
        a = _rand((3, 4, 4))
        g = olympus.jit(olympus.vmap(olympus.grad(lambda x: jnp.linalg.slogdet(x)[1])))(a)
        np.testing.assert_allclose(g, np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-8)
        h = olympus.grad(lambda x: jnp.sum(jnp.linalg.eigh(x)[0] ** 2))(_spd((4, 4)))
        s = _spd((4, 4))
        np.testing.assert_allclose(h, 2 * s, rtol=1e-8)  # sum(w^2) = |a|_F^2


def test_eigenvector_derivatives_are_errors():
    a = _rand((3, 3)).astype(np.float32)
    with pytest.raises(Exception, match="eigenvectors"):
        olympus.jvp(lambda x: jnp.linalg.eig(x)[1], (a,), (a,))
    with pytest.raises(Exception, match="m < n"):
        olympus.jvp(lambda x: jnp.linalg.qr(x)[1], (a[:2],), (a[:2],))

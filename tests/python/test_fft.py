"""olympus.numpy.fft and lax.fft against numpy.fft: every function with n / s,
axis / axes and norm, dtypes with x64 off and on, jit, vmap, and gradients
(check_grads, real-valued losses of complex transforms, Parseval)."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.test_util import check_grads

NORMS = [None, "backward", "ortho", "forward"]
REAL_IN = {"rfft", "ihfft", "rfft2", "rfftn"}


def _data(shape, complex_, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if complex_:
        x = x + 1j * rng.standard_normal(shape)
    return x


def _check(got, want, x64):
    """got (olympus) against want (NumPy in double) relative to want's size."""
    got_np = np.asarray(got)
    assert got_np.shape == want.shape, (got_np.shape, want.shape)
    scale = np.abs(want).max() if want.size else 1
    tol = 1e-11 if x64 else 3e-6
    np.testing.assert_allclose(got_np, want, rtol=0, atol=tol * (scale + 1))


def _out_dtype(name, x64):
    real_out = name in ("irfft", "hfft", "irfft2", "irfftn")
    if real_out:
        return np.dtype(np.float64 if x64 else np.float32)
    return np.dtype(np.complex128 if x64 else np.complex64)


def _input(name, shape, x64, seed=0):
    """Data of the function's natural input dtype, narrowed with x64 off; the
    NumPy reference sees the narrowed values."""
    x = _data(shape, name not in REAL_IN, seed)
    if not x64:
        x = x.astype(np.float32 if name in REAL_IN else np.complex64)
    return x


# ------------------------------------------------------------------ values

@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_1d_n_axis_norm(name, x64):
    f, ref = getattr(jnp.fft, name), getattr(np.fft, name)
    x = _input(name, (6, 5), x64)
    for axis in (-1, 0, 1, -2):
        m = x.shape[axis]
        for n in (None, 1, m - 2, m, m + 3, 2 * m):
            for norm in NORMS:
                got = f(x, n=n, axis=axis, norm=norm)
                assert got.dtype == _out_dtype(name, x64), (n, axis, norm)
                _check(got, ref(x, n=n, axis=axis, norm=norm), x64)


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_2d_s_axes_norm(name, x64):
    f, ref = getattr(jnp.fft, name), getattr(np.fft, name)
    x = _input(name, (4, 3, 6), x64, seed=1)
    for kw in ({}, {"axes": (0, 2)}, {"axes": (2, 0)}, {"axes": (-1, -3)},
               {"s": (5, 4)}, {"s": (2, 8), "axes": (0, 1)}, {"s": (3, 3), "axes": (1, 0)}):
        for norm in NORMS:
            got = f(x, norm=norm, **kw)
            assert got.dtype == _out_dtype(name, x64)
            _check(got, ref(x, norm=norm, **kw), x64)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_nd_s_axes_norm(name, x64):
    f, ref = getattr(jnp.fft, name), getattr(np.fft, name)
    x = _input(name, (3, 4, 2, 5), x64, seed=2)
    for kw in ({}, {"axes": (1,)}, {"axes": (0, 3, 1)}, {"axes": (2, 0, 3, 1)},
               {"s": (3, 6)}, {"s": (2, 3, 4), "axes": (3, 0, 1)}, {"s": (4, 4, 3, 6)},
               {"axes": [-1, -2, -3]}):
        for norm in NORMS:
            got = f(x, norm=norm, **kw)
            assert got.dtype == _out_dtype(name, x64), kw
            _check(got, ref(x, norm=norm, **kw), x64)


def test_long_and_batched_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1 << 14).astype(np.float32)
    _check(jnp.fft.rfft(x), np.fft.rfft(x), False)
    c = (rng.standard_normal((8, 1031)) + 1j * rng.standard_normal((8, 1031))).astype(np.complex64)
    _check(jnp.fft.fft(c), np.fft.fft(c), False)
    _check(jnp.fft.ifft(jnp.fft.fft(c)), c.astype(np.complex128), False)


def test_input_dtypes(x64):
    ints = np.arange(8, dtype=np.int32).reshape(2, 4)
    c_def = np.dtype(np.complex128 if x64 else np.complex64)
    f_def = np.dtype(np.float64 if x64 else np.float32)
    assert jnp.fft.fft(ints).dtype == c_def
    assert jnp.fft.fft(ints.astype(np.int64)).dtype == c_def
    assert jnp.fft.fft(ints.astype(bool)).dtype == c_def
    assert jnp.fft.rfft(ints).dtype == c_def
    assert jnp.fft.irfft(ints).dtype == f_def
    # float32 / float16 stay single precision with x64 on (as JAX)
    assert jnp.fft.fft(ints.astype(np.float32)).dtype == np.complex64
    assert jnp.fft.fft(ints.astype(np.float16)).dtype == np.complex64
    assert jnp.fft.rfft(ints.astype(np.float16)).dtype == np.complex64
    assert jnp.fft.irfft(ints.astype(np.complex64)).dtype == np.float32
    assert jnp.fft.fft(ints.astype(np.float64)).dtype == c_def
    assert jnp.fft.fft([1.0, 2.0, 3.0]).dtype == c_def   # lists and Python scalars
    _check(jnp.fft.fft(ints), np.fft.fft(ints), x64)
    _check(jnp.fft.rfft(ints.astype(bool)), np.fft.rfft(ints.astype(bool)), x64)
    with pytest.raises(ValueError, match="only real valued inputs"):
        jnp.fft.rfft(ints.astype(np.complex64))


def test_errors():
    x = jnp.ones((4, 4), jnp.complex64)
    with pytest.raises(ValueError, match="invalid number of data points"):
        jnp.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="invalid number of data points"):
        jnp.fft.irfft(jnp.ones(1, jnp.complex64))   # default n = 2 * (1 - 1)
    with pytest.raises(ValueError, match="repeated axes"):
        jnp.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="Invalid norm value"):
        jnp.fft.fft(x, norm="both")
    with pytest.raises(ValueError, match="Invalid norm value"):
        jnp.fft.hfft(x, norm="both")
    with pytest.raises(ValueError, match="Shape and axes have different lengths"):
        jnp.fft.fftn(x, s=(2, 2), axes=(0,))
    with pytest.raises(np.exceptions.AxisError if hasattr(np, "exceptions") else np.AxisError):
        jnp.fft.fft(x, axis=2)


# ------------------------------------------------------------------ lax.fft

def test_lax_fft_types_and_errors():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 4, 6)) + 1j * rng.standard_normal((3, 4, 6))).astype(np.complex64)
    np.testing.assert_allclose(lax.fft(x, lax.FftType.FFT, (4, 6)), np.fft.fft2(x), atol=1e-4)
    np.testing.assert_allclose(lax.fft(x, "IFFT", [6]), np.fft.ifft(x), atol=1e-6)
    r = x.real.copy()
    y = lax.fft(r, lax.FftType.RFFT, (3, 4, 6))
    assert y.shape == (3, 4, 4) and y.dtype == np.complex64
    np.testing.assert_allclose(y, np.fft.rfftn(r), atol=1e-4)
    z = lax.fft(y, lax.FftType.IRFFT, (3, 4, 6))
    assert z.dtype == np.float32
    np.testing.assert_allclose(z, r, atol=1e-5)
    assert int(lax.FftType.IRFFT) == 3
    with pytest.raises(TypeError, match="trailing dims are"):
        lax.fft(x, lax.FftType.FFT, (5,))
    with pytest.raises(ValueError, match="1 to 3 entries"):
        lax.fft(jnp.ones((1, 1, 1, 1), jnp.complex64), "FFT", (1, 1, 1, 1))
    with pytest.raises(ValueError, match="only real valued inputs"):
        lax.fft(x, "RFFT", (6,))
    with pytest.raises(KeyError):
        lax.fft(x, "DCT", (6,))


def test_jaxpr_is_one_fft_per_three_axes():
    x = jnp.ones((2, 3, 4), jnp.float32)
    text = str(olympus.make_jaxpr(jnp.fft.rfftn)(x))
    assert text.count("fft[") == 1, text
    assert "fft[fft_lengths=(2, 3, 4) fft_type=RFFT]" in text
    text = str(olympus.make_jaxpr(lambda v: jnp.fft.fftn(v, axes=(0, 1, 2, 3)))(
        jnp.ones((2, 2, 2, 2), jnp.complex64)))
    assert text.count("fft[") == 2, text


# ------------------------------------------------------------------ jit and vmap

@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2",
                                  "irfft2", "rfftn", "ifftn"])
def test_jit_matches_eager(name):
    f = getattr(jnp.fft, name)
    x = _input(name, (4, 6), False, seed=5)
    g = olympus.jit(lambda v: f(v, norm="ortho"))
    np.testing.assert_allclose(g(x), f(x, norm="ortho"), rtol=0, atol=1e-6)
    np.testing.assert_allclose(g(x), getattr(np.fft, name)(x, norm="ortho"), atol=1e-5)


def test_vmap(x64):
    x = _input("fft", (5, 3, 8), x64, seed=6)
    _check(olympus.vmap(jnp.fft.fft)(x), np.fft.fft(x), x64)
    _check(olympus.vmap(jnp.fft.fft, in_axes=1, out_axes=1)(x), np.fft.fft(x), x64)
    r = x.real.copy()
    _check(olympus.vmap(jnp.fft.rfft2, in_axes=2)(r), np.fft.rfft2(np.moveaxis(r, 2, 0)), x64)
    _check(olympus.vmap(lambda v: jnp.fft.irfft(v, n=6), in_axes=1)(x[:, :, :4]),
           np.moveaxis(np.fft.irfft(x[:, :, :4], n=6), 1, 0), x64)
    _check(olympus.jit(olympus.vmap(olympus.vmap(jnp.fft.ifft)))(x), np.fft.ifft(x), x64)


# ------------------------------------------------------------------ gradients

@pytest.mark.parametrize("name,kw", [
    ("fft", {}), ("ifft", {"norm": "ortho"}), ("fft", {"n": 5}), ("fft", {"n": 9, "axis": 0}),
    ("rfft", {}), ("rfft", {"n": 7}), ("irfft", {}), ("irfft", {"n": 7}),
    ("hfft", {}), ("ihfft", {"norm": "forward"}), ("fft2", {}), ("rfft2", {}),
    ("irfft2", {"s": (4, 5)}), ("fftn", {"axes": (0, 1)}), ("irfftn", {}), ("rfftn", {})])
def test_check_grads(name, kw):
    olympus.config.update("olympus_enable_x64", True)
    f = getattr(jnp.fft, name)
    x = _data((4, 6), name not in REAL_IN, seed=7)
    check_grads(lambda v: f(v, **kw), (x,), order=2)


def test_grads_of_real_losses():
    olympus.config.update("olympus_enable_x64", True)
    rng = np.random.default_rng(8)
    z = rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8))
    w = rng.standard_normal((3, 5))

    def power(v):  # Parseval: sum |fft(v)|^2 = n sum |v|^2
        return jnp.sum(jnp.abs(jnp.fft.fft(v)) ** 2)

    check_grads(power, (z,), order=1)
    # JAX's convention for a real function of complex input: the conjugate
    # of the usual gradient, 2 n conj(z) here
    np.testing.assert_allclose(olympus.grad(power)(z), 2 * 8 * np.conj(z), rtol=1e-10)

    def weighted(v):  # a real loss of a real-to-complex transform
        return jnp.sum(jnp.real(jnp.fft.rfft(v)) * w + jnp.imag(jnp.fft.rfft(v)) ** 2)

    x = z.real.copy()
    check_grads(weighted, (x,), order=2)
    check_grads(lambda v: jnp.sum(jnp.fft.irfft(v, n=8) ** 2 * np.arange(8)), (z[:, :5],),
                order=2)
    check_grads(lambda v: jnp.sum(jnp.abs(jnp.fft.ifft2(v, norm="ortho"))), (z,), order=1)
    # jit(grad) agrees with grad
    g = olympus.grad(weighted)
    np.testing.assert_allclose(olympus.jit(g)(x), g(x), rtol=1e-12)


def test_grad_single_precision():
    x = _data((2, 16), False, seed=9).astype(np.float32)
    check_grads(lambda v: jnp.fft.irfft(jnp.fft.rfft(v) * 2.0), (x,), order=1)


# ------------------------------------------------------------------ helpers

def test_fftfreq_rfftfreq(x64):
    f_def = np.float64 if x64 else np.float32
    for n in (1, 4, 7, 10):
        for d in (1.0, 0.25):
            got = jnp.fft.fftfreq(n, d)
            assert got.dtype == f_def
            np.testing.assert_allclose(got, np.fft.fftfreq(n, d), rtol=1e-6)
            got = jnp.fft.rfftfreq(n, d)
            assert got.dtype == f_def
            np.testing.assert_allclose(got, np.fft.rfftfreq(n, d), rtol=1e-6)
    assert jnp.fft.fftfreq(4, dtype=np.float32).dtype == np.float32
    # a traced spacing
    got = olympus.jit(lambda d: jnp.fft.fftfreq(6, d))(0.5)
    np.testing.assert_allclose(got, np.fft.fftfreq(6, 0.5), rtol=1e-6)


def test_fftshift_ifftshift():
    for shape in ((7,), (4, 5), (2, 3, 6)):
        x = np.arange(np.prod(shape)).reshape(shape)
        for axes in (None, 0, -1, (0,), tuple(range(len(shape)))):
            np.testing.assert_array_equal(jnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
            np.testing.assert_array_equal(jnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
            np.testing.assert_array_equal(
                jnp.fft.ifftshift(jnp.fft.fftshift(x, axes), axes), x)
    f = jnp.fft.fftshift(jnp.fft.fftfreq(8))
    np.testing.assert_allclose(f, np.fft.fftshift(np.fft.fftfreq(8)), rtol=1e-6)
    np.testing.assert_array_equal(olympus.jit(jnp.fft.fftshift)(np.arange(5)),
                                  np.fft.fftshift(np.arange(5)))

"""olympus.numpy.fft: NumPy's FFT functions (`jnp.fft.fft`, ...) on the `fft`
primitive (lax.fft; FFTW3 on the CPU), so they work eagerly, under jit, vmap and
grad.

As in JAX: inputs are converted to the transform's dtype (complex64 with x64
off, complex128 / float64 with x64 on for 64-bit inputs; real inputs of fft are
promoted to complex, complex inputs of rfft are a ValueError); `n` / `s` crop
or zero-pad the transformed axes; `norm` is "backward" (default), "ortho" or
"forward"; repeated axes are a ValueError. Unlike JAX, transforms over more
than three axes are supported (done as several transforms of at most three).
"""
import math as _math
import operator as _operator

import numpy as _np

from olympus import lax as _lax
from olympus._src import dtypes as _dt
from olympus._src import jnp as _jnp

FftType = _lax.FftType
_FFT, _IFFT, _RFFT, _IRFFT = FftType.FFT, FftType.IFFT, FftType.RFFT, FftType.IRFFT

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
           "ifftn", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]


# ------------------------------------------------------------------ helpers

def _norm_scale(norm, inverse, n):
    """The factor applied after the primitive (which scales inverses by 1/n),
    or None for none."""
    if norm is None or norm == "backward":
        return None
    if norm == "ortho":
        return _math.sqrt(n) if inverse else 1 / _math.sqrt(n)
    if norm == "forward":
        return float(n) if inverse else 1 / n
    raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')


def _swap_direction(norm):
    """hfft / ihfft are irfft / rfft with the direction of the norm swapped."""
    if norm is None or norm == "backward":
        return "forward"
    if norm == "ortho":
        return norm
    if norm == "forward":
        return "backward"
    raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')


def _in_dtype(name, typ, dt):
    dt = _np.dtype(dt)
    if typ == _RFFT:
        if _np.issubdtype(dt, _np.complexfloating):
            raise ValueError(f"jnp.fft.{name}: only real valued inputs are supported, got {dt}")
        if dt == _np.float64:
            return dt
        return _np.dtype(_np.float32) if _np.issubdtype(dt, _np.floating) else _dt.default_float()
    if _np.issubdtype(dt, _np.complexfloating):
        return dt
    real = dt if _np.issubdtype(dt, _np.floating) else _dt.default_float()
    return _dt.canonicalize(_np.complex128 if real == _np.float64 else _np.complex64)


def _check_n(name, n):
    if n < 1:
        raise ValueError(f"jnp.fft.{name}: invalid number of data points ({n}) specified")


def _resize(a, axis, size):
    """a cropped or zero-padded to size along axis."""
    cur = a.shape[axis]
    if cur == size:
        return a
    cfg = [(0, 0, 0)] * a.ndim
    cfg[axis] = (0, size - cur, 0)
    return _lax.pad(a, _np.zeros((), a.dtype)[()], cfg)


def _apply(a, typ, axes, lengths):
    """lax.fft of typ over axes (at most three; the last is the one RFFT /
    IRFFT halves), moved to the end and back."""
    nd = a.ndim
    dest = tuple(range(nd - len(axes), nd))
    if tuple(axes) != dest:
        a = _jnp.moveaxis(a, axes, dest)
    a = _lax.fft(a, typ, tuple(lengths))
    if tuple(axes) != dest:
        a = _jnp.moveaxis(a, dest, axes)
    return a


def _fft_core(name, typ, a, s, axes, norm):
    a = _jnp.asarray(a)
    if s is not None:
        s = (s,) if isinstance(s, (int, _np.integer)) else tuple(_operator.index(v) for v in s)
        if axes is not None and len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    if axes is None:
        axes = range(a.ndim) if s is None else range(a.ndim - len(s), a.ndim)
    elif isinstance(axes, (int, _np.integer)):
        axes = (axes,)
    axes = tuple(_jnp._canon_axis(ax, a.ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"jnp.fft.{name} does not support repeated axes, got {axes}")
    if not axes:
        if typ in (_RFFT, _IRFFT):
            raise ValueError(f"jnp.fft.{name} needs at least one axis")
        return _lax.convert_element_type(a, _in_dtype(name, typ, a.dtype))
    if s is None:
        s = [a.shape[ax] for ax in axes]
        if typ == _IRFFT:
            s[-1] = 2 * (s[-1] - 1)
    for v in s:
        _check_n(name, v)
    want = _in_dtype(name, typ, a.dtype)
    if a.dtype != want:
        a = _lax.convert_element_type(a, want)
    for ax, v in zip(axes, s):
        a = _resize(a, ax, v // 2 + 1 if typ == _IRFFT and ax == axes[-1] else v)
    # the last axis and up to two before it in one transform; the rest (FFTs
    # over at most three axes each) before IRFFT's c2r and after RFFT's r2c
    tail, head = axes[-3:], axes[:-3]
    ts, hs = s[-3:], s[:-3]
    inner = _IFFT if typ in (_IFFT, _IRFFT) else _FFT
    if typ == _IRFFT:
        for i in range(0, len(head), 3):
            a = _apply(a, inner, head[i:i + 3], hs[i:i + 3])
    a = _apply(a, typ, tail, ts)
    if typ != _IRFFT:
        for i in range(0, len(head), 3):
            a = _apply(a, inner, head[i:i + 3], hs[i:i + 3])
    scale = _norm_scale(norm, typ in (_IFFT, _IRFFT), _math.prod(s))
    return a if scale is None else a * scale


def _one_axis(name, typ, a, n, axis, norm):
    if n is not None:
        n = _operator.index(n)
        _check_n(name, n)
    return _fft_core(name, typ, a, None if n is None else (n,), (axis,), norm)


# ------------------------------------------------------------------ transforms

def fft(a, n=None, axis=-1, norm=None):
    """The 1-D discrete Fourier transform along axis (numpy.fft.fft)."""
    return _one_axis("fft", _FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse of fft (numpy.fft.ifft)."""
    return _one_axis("ifft", _IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """The 1-D transform of real input: n // 2 + 1 bins (numpy.fft.rfft)."""
    return _one_axis("rfft", _RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of rfft: n real points, by default 2 * (m - 1) (numpy.fft.irfft)."""
    return _one_axis("irfft", _IRFFT, a, n, axis, norm)


def fftn(a, s=None, axes=None, norm=None):
    """The N-D transform over axes (default: all, or the last len(s))."""
    return _fft_core("fftn", _FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    return _fft_core("ifftn", _IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The N-D transform of real input; the last of axes is halved."""
    return _fft_core("rfftn", _RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    return _fft_core("irfftn", _IRFFT, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _fft_core("fft2", _FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _fft_core("ifft2", _IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _fft_core("rfft2", _RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _fft_core("irfft2", _IRFFT, a, s, axes, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The transform of a Hermitian-symmetric signal given by its first half:
    n real points (numpy.fft.hfft: irfft of conj(a), norm direction swapped)."""
    a = _jnp.asarray(a)
    return irfft(_jnp.conjugate(a), n, axis, _swap_direction(norm))


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: n // 2 + 1 complex points (numpy.fft.ihfft)."""
    return _jnp.conjugate(rfft(a, n, axis, _swap_direction(norm)))


# ------------------------------------------------------------------ helpers

def _freq_dtype(dtype):
    return _dt.default_float() if dtype is None else _dt.canonicalize(dtype)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point fft with spacing d: [0, 1, ...,
    -(n // 2), ..., -1] / (d * n), in the default float dtype (or dtype)."""
    n = _operator.index(n)
    k = _np.concatenate([_np.arange(0, (n - 1) // 2 + 1), _np.arange(-(n // 2), 0)])
    return _jnp.asarray(k, dtype=_freq_dtype(dtype)) / (d * n)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an n-point rfft: [0, 1, ..., n // 2] / (d * n)."""
    n = _operator.index(n)
    return _jnp.asarray(_np.arange(0, n // 2 + 1), dtype=_freq_dtype(dtype)) / (d * n)


def _roll(x, shift, axis):
    size = x.shape[axis]
    shift = shift % size if size else 0
    if shift == 0:
        return x
    return _lax.concatenate([_lax.slice_in_dim(x, size - shift, size, axis=axis),
                             _lax.slice_in_dim(x, 0, size - shift, axis=axis)], axis)


def _shift(x, axes, sign):
    x = _jnp.asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, _np.integer)):
        axes = (axes,)
    for ax in axes:
        ax = _jnp._canon_axis(ax, x.ndim)
        x = _roll(x, sign * (x.shape[ax] // 2), ax)
    return x


def fftshift(x, axes=None):
    """x with the zero frequency moved to the centre (rolled by n // 2 along axes)."""
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of fftshift (rolled by -(n // 2))."""
    return _shift(x, axes, -1)

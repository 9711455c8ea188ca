"""olympus.scipy.integrate: trapezoid, as `jax.scipy.integrate`."""
from olympus import lax
from olympus import numpy as jnp
from olympus._src.jnp import _promote

__all__ = ["trapezoid"]


def _ends(v):
    """(v[..., :-1], v[..., 1:]) along the last axis (empty for fewer than 2 samples)."""
    n = v.shape[-1]
    m = max(n - 1, 0)
    start = min(1, n)
    last = v.ndim - 1
    return lax.slice_in_dim(v, 0, m, axis=last), lax.slice_in_dim(v, start, start + m, axis=last)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along axis by the trapezoidal rule: samples dx apart, or
    at the points x (1-D along axis, or y's shape)."""
    if x is None:
        y, = _promote(y, to_inexact=True, broadcast=False)
        lo, hi = _ends(jnp.moveaxis(y, axis, -1))
        return jnp.sum(lo + hi, -1) * (0.5 * dx)
    y, x = _promote(y, x, to_inexact=True, broadcast=False)
    if x.ndim != 1 and x.ndim != y.ndim:
        raise ValueError(f"trapezoid: x must be 1-D or have y's rank, got x {tuple(x.shape)} "
                         f"and y {tuple(y.shape)}")
    y = jnp.moveaxis(y, axis, -1)
    x = jnp.moveaxis(x, axis, -1) if x.ndim > 1 else x
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"trapezoid: x has {x.shape[-1]} samples along the axis, y has "
                         f"{y.shape[-1]}")
    x_lo, x_hi = _ends(x)
    y_lo, y_hi = _ends(y)
    return 0.5 * jnp.sum((x_hi - x_lo) * (y_lo + y_hi), -1)

"""The multivariate normal distribution N(mean, cov) over the last axis of x.

cov may be a scalar (isotropic), a 1-D array of variances (a diagonal
covariance, as SciPy reads a 1-D cov; JAX rejects it) or a full covariance
matrix (..., n, n), batch axes broadcasting against x's. A full cov is read as
JAX reads it: its Cholesky factor L (cov = L L^T), y = L^-1 (x - mean) by a
triangular solve, and logpdf = -|y|^2 / 2 - n log(2 pi) / 2 - sum(log diag L).
A cov that is not positive definite gives nan.
"""
import math

from olympus import numpy as jnp
from olympus._src.jnp import _promote
from olympus.lax import linalg as lax_linalg

_LOG_2PI = math.log(2 * math.pi)


def _whiten(l, y):
    """L^-1 y for lower-triangular L (..., n, n) and y (..., n), batch axes
    broadcast."""
    solve = jnp.vectorize(lambda a, b: lax_linalg.triangular_solve(a, b, lower=True,
                                                                   transpose_a=True),
                          signature="(n,n),(n)->(n)")
    return solve(l, y)


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = _promote(x, mean, cov, to_inexact=True, broadcast=False)
    mshape, cshape = jnp.shape(mean), jnp.shape(cov)
    if not mshape:    # one dimension
        return -0.5 * jnp.square(x - mean) / cov - 0.5 * (_LOG_2PI + jnp.log(cov))
    n = mshape[-1]
    y = x - mean
    if not cshape:
        return -0.5 * jnp.sum(y * y, -1) / cov - 0.5 * n * (_LOG_2PI + jnp.log(cov))
    if len(cshape) == 1:
        if cshape[0] != n:
            raise ValueError("multivariate_normal.logpdf got incompatible shapes: mean "
                             f"{mshape}, cov {cshape}")
        return (-0.5 * jnp.sum(y * y / cov, -1) - 0.5 * n * _LOG_2PI
                - 0.5 * jnp.sum(jnp.log(cov), -1))
    if cshape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {mshape}, "
                         f"cov {cshape}")
    l = lax_linalg.cholesky(cov)
    z = _whiten(l, y)
    return (-0.5 * jnp.sum(z * z, -1) - 0.5 * n * _LOG_2PI
            - jnp.sum(jnp.log(jnp.diagonal(l, axis1=-2, axis2=-1)), -1))


def pdf(x, mean, cov):
    return jnp.exp(logpdf(x, mean, cov))

"""The multivariate normal distribution N(mean, cov) over the last axis of x.

cov may be a scalar (isotropic) or a 1-D array of variances (a diagonal
covariance, as SciPy reads a 1-D cov). A full covariance matrix needs a
Cholesky factorization and a triangular solve, which wait for
olympus.numpy.linalg: until then it raises NotImplementedError.
"""
import math

from olympus import numpy as jnp
from olympus._src.jnp import _promote

_LOG_2PI = math.log(2 * math.pi)


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
    raise NotImplementedError(
        "multivariate_normal.logpdf with a full covariance matrix needs a Cholesky "
        "factorization from olympus.numpy.linalg, which is not available yet; pass a "
        "scalar or a 1-D (diagonal) cov")


def pdf(x, mean, cov):
    return jnp.exp(logpdf(x, mean, cov))

"""The exponential distribution starting at loc with mean scale."""
from olympus import nn
from olympus import numpy as jnp
from olympus.scipy.stats._util import _inexact, standardize


def logpdf(x, loc=0, scale=1):
    y, scale = standardize(x, loc, scale)
    return jnp.where(y < 0, -jnp.inf, -y - jnp.log(scale))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    return jnp.where(y < 0, 0.0, -jnp.expm1(-jnp.maximum(y, 0)))


def logcdf(x, loc=0, scale=1):
    """log(1 - exp(-y)), accurate near 0 and far out."""
    y, _ = standardize(x, loc, scale)
    return jnp.where(y < 0, -jnp.inf, nn.log1mexp(jnp.maximum(y, 0)))


def sf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    return jnp.where(y < 0, 1.0, jnp.exp(-jnp.maximum(y, 0)))


def logsf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    return jnp.where(y < 0, 0.0, -y)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    value = -jnp.log1p(-q) * scale + loc
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, value)

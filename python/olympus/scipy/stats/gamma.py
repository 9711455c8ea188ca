"""The gamma distribution with shape a, starting at loc, scaled by scale."""
from olympus import lax
from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact


def _args(x, a, loc, scale):
    x, a, loc, scale = _inexact(x, a, loc, scale)
    return (x - loc) / scale, a, scale


def logpdf(x, a, loc=0, scale=1):
    y, a, scale = _args(x, a, loc, scale)
    value = special.xlogy(a - 1, y) - y - lax.lgamma(a) - jnp.log(scale)
    return jnp.where(y < 0, -jnp.inf, value)


def pdf(x, a, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    y, a, _ = _args(x, a, loc, scale)
    return lax.igamma(a, jnp.maximum(y, 0))


def logcdf(x, a, loc=0, scale=1):
    return jnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    """1 - cdf, as the upper regularized incomplete gamma (accurate in the tail)."""
    y, a, _ = _args(x, a, loc, scale)
    return lax.igammac(a, jnp.maximum(y, 0))


def logsf(x, a, loc=0, scale=1):
    return jnp.log(sf(x, a, loc, scale))

"""The beta distribution on [loc, loc + scale] with shapes a, b."""
from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact


def _args(x, a, b, loc, scale):
    x, a, b, loc, scale = _inexact(x, a, b, loc, scale)
    return (x - loc) / scale, a, b, scale


def logpdf(x, a, b, loc=0, scale=1):
    y, a, b, scale = _args(x, a, b, loc, scale)
    value = (special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y) - special.betaln(a, b)
             - jnp.log(scale))
    return jnp.where((y < 0) | (y > 1), -jnp.inf, value)


def pdf(x, a, b, loc=0, scale=1):
    return jnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    y, a, b, _ = _args(x, a, b, loc, scale)
    return special.betainc(a, b, jnp.clip(y, 0, 1))


def logcdf(x, a, b, loc=0, scale=1):
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    """1 - cdf, as I_{1-y}(b, a) (accurate in the upper tail)."""
    y, a, b, _ = _args(x, a, b, loc, scale)
    return special.betainc(b, a, 1 - jnp.clip(y, 0, 1))


def logsf(x, a, b, loc=0, scale=1):
    return jnp.log(sf(x, a, b, loc, scale))

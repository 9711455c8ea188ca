"""The Cauchy distribution. The CDF is atan2(1, -y) / pi, which keeps its
relative accuracy far into the lower tail (0.5 + atan(y) / pi cancels)."""
import math

from olympus import numpy as jnp
from olympus.scipy.stats._util import _inexact, standardize


def logpdf(x, loc=0, scale=1):
    y, scale = standardize(x, loc, scale)
    return -math.log(math.pi) - jnp.log(scale) - jnp.log1p(y * y)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    return jnp.arctan2(1.0, -y) / math.pi


def logcdf(x, loc=0, scale=1):
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    return jnp.arctan2(1.0, y) / math.pi


def logsf(x, loc=0, scale=1):
    return jnp.log(sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return loc + scale * jnp.tan(math.pi * (q - 0.5))


def isf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return loc + scale * jnp.tan(math.pi * (0.5 - q))

"""The normal distribution N(loc, scale^2)."""
import math

from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact, standardize

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def logpdf(x, loc=0, scale=1):
    z, scale = standardize(x, loc, scale)
    return -0.5 * z * z - _LOG_SQRT_2PI - jnp.log(scale)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    return special.ndtr(standardize(x, loc, scale)[0])


def logcdf(x, loc=0, scale=1):
    return special.log_ndtr(standardize(x, loc, scale)[0])


def sf(x, loc=0, scale=1):
    """1 - cdf, accurate in the upper tail."""
    return special.ndtr(-standardize(x, loc, scale)[0])


def logsf(x, loc=0, scale=1):
    return special.log_ndtr(-standardize(x, loc, scale)[0])


def ppf(q, loc=0, scale=1):
    """The quantile function: the inverse of cdf."""
    q, loc, scale = _inexact(q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q, loc=0, scale=1):
    """The inverse of sf."""
    q, loc, scale = _inexact(q, loc, scale)
    return loc - special.ndtri(q) * scale

"""The Laplace (double exponential) distribution."""
import math

from olympus import numpy as jnp
from olympus.scipy.stats._util import standardize


def logpdf(x, loc=0, scale=1):
    y, scale = standardize(x, loc, scale)
    return -math.log(2) - jnp.log(scale) - jnp.abs(y)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    y, _ = standardize(x, loc, scale)
    half_tail = 0.5 * jnp.exp(-jnp.abs(y))
    return jnp.where(y < 0, half_tail, 1 - half_tail)

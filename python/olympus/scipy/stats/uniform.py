"""The uniform distribution on [loc, loc + scale]."""
from olympus import numpy as jnp
from olympus.scipy.stats._util import _inexact


def logpdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return jnp.where((x < loc) | (x > loc + scale), -jnp.inf, -jnp.log(scale))


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = _inexact(x, loc, scale)
    return jnp.clip((x - loc) / scale, 0, 1)


def ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), jnp.nan, loc + scale * q)

"""The logistic distribution."""
from olympus import nn
from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact, standardize


def logpdf(x, loc=0, scale=1):
    """-|y| - 2 log1p(exp(-|y|)) - log scale (symmetric, no overflow)."""
    y, scale = standardize(x, loc, scale)
    return -jnp.abs(y) - 2 * nn.softplus(-jnp.abs(y)) - jnp.log(scale)


def pdf(x, loc=0, scale=1):
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    return special.expit(standardize(x, loc, scale)[0])


def sf(x, loc=0, scale=1):
    return special.expit(-standardize(x, loc, scale)[0])


def ppf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return special.logit(q) * scale + loc


def isf(q, loc=0, scale=1):
    q, loc, scale = _inexact(q, loc, scale)
    return loc - special.logit(q) * scale

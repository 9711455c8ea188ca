"""The Poisson distribution with mean mu, shifted by loc."""
from olympus import lax
from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact


def logpmf(k, mu, loc=0):
    """k log mu - log k! - mu at whole k >= loc, -inf elsewhere."""
    k, mu, loc = _inexact(k, mu, loc)
    x = k - loc
    value = special.xlogy(x, mu) - lax.lgamma(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -jnp.inf, value)


def pmf(k, mu, loc=0):
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """P(K <= k) = Q(floor(k - loc) + 1, mu)."""
    k, mu, loc = _inexact(k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, 0.0, lax.igammac(jnp.floor(jnp.maximum(x, 0)) + 1, mu))

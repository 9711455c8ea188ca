"""The Bernoulli distribution: 1 with probability p, 0 with 1 - p (shifted by loc)."""
from olympus import numpy as jnp
from olympus.scipy import special
from olympus.scipy.stats._util import _inexact


def logpmf(k, p, loc=0):
    k, p, loc = _inexact(k, p, loc)
    x = k - loc
    value = special.xlogy(x, p) + special.xlog1py(1 - x, -p)
    return jnp.where((x != 0) & (x != 1), -jnp.inf, value)


def pmf(k, p, loc=0):
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    k, p = _inexact(k, p)
    value = jnp.where(k < 0, 0.0, jnp.where(k < 1, 1 - p, 1.0))
    return jnp.where(jnp.isnan(k) | jnp.isnan(p) | (p < 0) | (p > 1), jnp.nan, value)


def ppf(q, p):
    """0 for q <= 1 - p, else 1 (nan outside 0 <= q, p <= 1)."""
    q, p = _inexact(q, p)
    bad = jnp.isnan(q) | jnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return jnp.where(bad, jnp.nan, jnp.where(q <= 1 - p, 0.0, 1.0))

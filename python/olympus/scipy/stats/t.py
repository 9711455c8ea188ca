"""Student's t distribution with df degrees of freedom."""
import math

from olympus import lax
from olympus import numpy as jnp
from olympus.scipy.stats._util import _inexact


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    z = (x - loc) / scale
    half = 0.5 * (df + 1)
    return (lax.lgamma(half) - lax.lgamma(0.5 * df) - 0.5 * jnp.log(df * math.pi)
            - jnp.log(scale) - half * jnp.log1p(z * z / df))


def pdf(x, df, loc=0, scale=1):
    return jnp.exp(logpdf(x, df, loc, scale))

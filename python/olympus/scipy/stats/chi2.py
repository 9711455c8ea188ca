"""The chi-squared distribution with df degrees of freedom (a gamma with shape
df/2 and scale 2)."""
from olympus.scipy.stats import gamma as _gamma
from olympus.scipy.stats._util import _inexact


def _as_gamma(x, df, loc, scale):
    x, df, loc, scale = _inexact(x, df, loc, scale)
    return x, df / 2, loc, 2 * scale


def logpdf(x, df, loc=0, scale=1):
    return _gamma.logpdf(*_as_gamma(x, df, loc, scale))


def pdf(x, df, loc=0, scale=1):
    return _gamma.pdf(*_as_gamma(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    return _gamma.cdf(*_as_gamma(x, df, loc, scale))


def logcdf(x, df, loc=0, scale=1):
    return _gamma.logcdf(*_as_gamma(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    return _gamma.sf(*_as_gamma(x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    return _gamma.logsf(*_as_gamma(x, df, loc, scale))

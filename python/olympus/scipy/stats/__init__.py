"""olympus.scipy.stats: probability distributions as `jax.scipy.stats`: each
distribution is a module of functions (`norm.logpdf(x, loc, scale)`, ...)
with SciPy's argument order and values; arguments broadcast together."""
from olympus.scipy.stats import (  # noqa: F401
    bernoulli, beta, cauchy, chi2, expon, gamma, laplace, logistic, multivariate_normal, norm,
    poisson, t, uniform,
)

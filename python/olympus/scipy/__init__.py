"""olympus.scipy: SciPy's API on olympus arrays, as `jax.scipy`: special
functions, probability distributions (stats), integration (trapezoid),
minimize(method="BFGS") (optimize) and linear algebra (linalg)."""
from olympus.scipy import integrate, linalg, optimize, special, stats  # noqa: F401

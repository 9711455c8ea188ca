"""olympus.scipy: SciPy's API on olympus arrays, as `jax.scipy`: special
functions, probability distributions (stats), integration (trapezoid) and
minimize(method="BFGS") (optimize)."""
from olympus.scipy import integrate, optimize, special, stats  # noqa: F401

"""olympus.scipy: SciPy's API on olympus arrays, as `jax.scipy`: special
functions, probability distributions (stats) and integration (trapezoid)."""
from olympus.scipy import integrate, special, stats  # noqa: F401

"""olympus.scipy: SciPy's API on olympus arrays (jax.scipy)."""
from olympus.scipy import linalg  # noqa: F401

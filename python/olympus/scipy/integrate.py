"""olympus.scipy.integrate: trapezoid, as `jax.scipy.integrate`."""
from olympus._src.jnp_more import trapezoid  # noqa: F401 (the same function as jnp.trapezoid)

__all__ = ["trapezoid"]

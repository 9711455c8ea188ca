"""olympus.extend: lower-level pieces for building on olympus (`jax.extend`)."""
from . import random  # noqa: F401

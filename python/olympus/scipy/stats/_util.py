"""Shared by the distributions: promotion and the standardized variable."""
from olympus.scipy.special import _inexact  # noqa: F401 (promote to one inexact dtype)


def standardize(x, loc, scale):
    """(x - loc) / scale, all three promoted together."""
    x, loc, scale = _inexact(x, loc, scale)
    return (x - loc) / scale, scale

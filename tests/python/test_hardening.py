"""Defects a bad-input probe found, each failing before its fix: undefined
behaviour on empty shapes with huge dims (F06)."""
import numpy as np
import pytest

import olympus.numpy as jnp


@pytest.mark.parametrize("shape", [(0, 2**63 - 1), (0, 2**62, 4), (2**40, 0, 2**40)])
def test_empty_shape_with_huge_dims_is_too_big(shape):
    with pytest.raises(ValueError):
        np.zeros(shape)        # the oracle agrees
    with pytest.raises(ValueError, match="overflow|too many"):
        jnp.zeros(shape)


def test_empty_shape_reshape_with_huge_dims():
    x = jnp.zeros((0, 2**20))
    assert x.reshape((2**20, 0)).shape == (2**20, 0)
    with pytest.raises(ValueError, match="overflow|too many"):
        x.reshape((2**63 - 1, 0))

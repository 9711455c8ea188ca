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


# F04: static fori_loop bounds beyond the index dtype raise instead of wrapping.
def test_fori_loop_bounds_beyond_int32_raise():
    from olympus import lax
    with pytest.raises(OverflowError, match="2147483650"):
        lax.fori_loop(2**31 - 3, 2**31 + 2, lambda i, c: jnp.minimum(c, i), 2**31 - 1)
    # in range, up to the last int32: the index never wraps
    r = lax.fori_loop(2**31 - 4, 2**31 - 1, lambda i, c: jnp.minimum(c, i), 2**31 - 1)
    assert int(r) == 2**31 - 4


# F08: duplicate argnums are rejected, not silently half-differentiated.
@pytest.mark.parametrize("who", ["grad", "value_and_grad", "jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [(0, 0), (1, -1)])
def test_duplicate_argnums_raise(who, argnums):
    import olympus
    f = lambda x, y: x * x * y
    with pytest.raises(ValueError, match="duplicates"):
        getattr(olympus, who)(f, argnums=argnums)(2.0, 3.0)
    assert float(olympus.grad(f, argnums=(0, 1))(2.0, 3.0)[1]) == 4.0


# F10: a custom JVP rule's tangent of another dtype than its float primal is a
# TypeError (it used to be converted, and jvp and grad then disagreed).
def test_custom_jvp_tangent_dtype_must_match():
    import olympus

    @olympus.custom_jvp
    def f(x):
        return x * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jnp.asarray(t, dtype=jnp.int32)

    for run in (lambda: olympus.jvp(f, (1.5,), (1.0,)), lambda: olympus.grad(f)(1.5)):
        with pytest.raises(TypeError, match=r"Expected float32\[\] .* but got int32\[\]"):
            run()

    @olympus.custom_jvp
    def g(x):
        return x * 2.0

    @g.defjvp
    def g_jvp(primals, tangents):           # a Python scalar tangent is fine
        return g(primals[0]), 3.0

    assert float(olympus.jvp(g, (1.5,), (1.0,))[1]) == 3.0

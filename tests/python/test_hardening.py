"""Defects a bad-input probe found and behaviours where olympus differed from
the reference, each test failing before its fix (ids as in the hardening issue:
F04 F06 F08 F10, debug.log)."""
import sys

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


# debug.log hands its record to the logger's handlers at the default level (the
# logger's own level does not drop it), attributed to the user's line.
def test_debug_log_reaches_handlers_at_default_level():
    import logging
    import olympus
    from olympus import debug

    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record)

    log = logging.getLogger("olympus._src.debugging")
    h = Keep()
    log.addHandler(h)
    try:
        assert log.getEffectiveLevel() > logging.INFO      # INFO is below the default
        debug.log("x = {}", np.float32(1.5)); line = sys._getframe().f_lineno

        @olympus.jit
        def f(x):
            debug.log("y = {y}", y=x * 2)
            return x
        f(np.float32(2.0))
    finally:
        log.removeHandler(h)
    assert [r.getMessage() for r in got] == ["x = 1.5", "y = 4.0"]
    assert got[0].levelno == logging.INFO
    assert got[0].pathname == __file__ and got[0].lineno == line
    assert got[1].funcName == "f"


# io_callback inside checkpoint under grad raises (it used to run twice).
@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_in_checkpoint_under_grad_raises(ordered):
    import olympus
    calls = []

    def host(x):
        calls.append(float(x))
        return np.asarray(x)

    def f(x):
        # the callback does not depend on x, so its JVP is never asked for
        y = olympus.experimental.io_callback(host, olympus.ShapeDtypeStruct((), np.float32),
                                             np.float32(2.0), ordered=ordered)
        return y * jnp.sin(x)

    with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval of "
                                                  "`checkpoint`/`remat`"):
        olympus.grad(olympus.checkpoint(f))(1.0)
    assert calls == []
    # forward mode and the plain function are fine
    p, t = olympus.jvp(olympus.checkpoint(f), (1.0,), (1.0,))
    assert float(p) == pytest.approx(2 * np.sin(1.0), rel=1e-6)
    assert float(t) == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    assert calls == [2.0]
    # debug callbacks may still run again in the backward pass
    assert float(olympus.grad(olympus.checkpoint(lambda x: jnp.sin(x) * 2))(1.0)) == \
        pytest.approx(2 * np.cos(1.0), rel=1e-6)

"""The "External callbacks" tutorial (shared/seeds/external_callbacks.md), run
with olympus: every cell that needs only jit, pure_callback, io_callback,
debug.callback and debug.print, in order, with its printed output and values
checked (against NumPy / SciPy).

Cells that come with the transformations (next issue), not run here:
  - `olympus.lax.scan(body_fun, None, jnp.arange(5.0))[1]` with pure_callback (scan)
  - `olympus.vmap(f)(x)` and `olympus.grad(f)(x)` with pure_callback (vmap, grad)
  - `olympus.vmap(numpy_random_like)(x)` and the ordered io_callback under vmap (vmap)
  - `olympus.lax.scan(...)` of `numpy_random_like_ordered` (scan)
  - `olympus.grad(numpy_random_like)(x)` and `olympus.grad(f)(1.0)` with io_callback (grad;
    the jit-only part of that cell runs below)
  - `olympus.vmap(f)(x)` and `olympus.grad(f)(1.0)` with debug.callback (vmap, grad)
  - `print(olympus.vmap(j1)(z))`, `olympus.grad(j1)(z)`, `jv = olympus.custom_jvp(jv)`,
    `olympus.grad(j1)(2.0)`, `olympus.hessian(j1)(2.0)` (vmap, grad, custom_jvp, hessian)
"""
import contextlib
import io
import sys

import numpy as np
import scipy.special

import olympus
import olympus.numpy as jnp


@contextlib.contextmanager
def cell(title, expect_stdout=None):
    """Run one tutorial cell: capture what it prints, show it, and check it."""
    print(f"--- {title}")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield
        olympus.effects_barrier()
    out = buf.getvalue()
    sys.stdout.write(out)
    if expect_stdout is not None:
        assert out == expect_stdout, f"{title}: printed {out!r}, expected {expect_stdout!r}"


# ------------------------------------------------------------------ Why callbacks?

with cell("print inside jit shows the tracer",
          "intermediate value: Traced<ShapedArray(int32[], weak_type=True)>"
          "with<DynamicJaxprTrace>\n"):
    @olympus.jit
    def f(x):
        y = x + 1
        print("intermediate value: {}".format(y))
        return y * 2

    result = f(2)
assert int(result) == 6 and result.dtype == np.int32

with cell("debug.print shows the runtime value", "intermediate value: 3\n"):
    @olympus.jit
    def f(x):
        y = x + 1
        olympus.debug.print("intermediate value: {}", y)
        return y * 2

    result = f(2)
assert int(result) == 6

# ------------------------------------------------------------------ pure_callback

with cell("pure_callback, eagerly"):
    def f_host(x):
        # call a numpy (not olympus.numpy) operation:
        return np.sin(x).astype(x.dtype)

    def f(x):
        result_shape = olympus.ShapeDtypeStruct(x.shape, x.dtype)
        return olympus.pure_callback(f_host, result_shape, x, vmap_method='sequential')

    x = jnp.arange(5.0)
    out = f(x)
    print(repr(out))
assert isinstance(out, olympus.Array) and out.dtype == np.float32 and out.shape == (5,)
np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(5.0, dtype=np.float32)), rtol=1e-6)

with cell("pure_callback under jit"):
    out_jit = olympus.jit(f)(x)
    print(repr(out_jit))
np.testing.assert_array_equal(np.asarray(out_jit), np.asarray(out))

with cell("pure_callback whose result is used runs", "printing something\n"):
    def print_something():
        print('printing something')
        return np.int32(0)

    @olympus.jit
    def f1():
        return olympus.pure_callback(print_something, np.int32(0))
    r1 = f1()
assert int(r1) == 0 and r1.dtype == np.int32

with cell("pure_callback whose result is unused is eliminated", ""):
    @olympus.jit
    def f2():
        olympus.pure_callback(print_something, np.int32(0))
        return 1.0
    r2 = f2()
assert float(r2) == 1.0

# ------------------------------------------------------------------ io_callback

from olympus.experimental import io_callback  # noqa: E402
from functools import partial  # noqa: E402,F401

global_rng = np.random.default_rng(0)


def host_side_random_like(x):
    """Generate a random array like x using the global_rng state"""
    # We have two side-effects here:
    # - printing the shape and dtype
    # - calling global_rng, thus updating its state
    print(f'generating {x.dtype}{list(x.shape)}')
    return global_rng.uniform(size=x.shape).astype(x.dtype)


with cell("io_callback draws from the host generator", "generating float32[5]\n"):
    @olympus.jit
    def numpy_random_like(x):
        return io_callback(host_side_random_like, x, x)

    x = jnp.zeros(5)
    rand = numpy_random_like(x)
print(repr(rand))  # the cell's value, as the notebook shows it
expected_rng = np.random.default_rng(0)
np.testing.assert_array_equal(np.asarray(rand),
                              expected_rng.uniform(size=(5,)).astype(np.float32))

with cell("io_callback again: the state advanced", "generating float32[5]\n"):
    rand2 = numpy_random_like(x)
np.testing.assert_array_equal(np.asarray(rand2),
                              expected_rng.uniform(size=(5,)).astype(np.float32))

with cell("io_callback with an unused result still runs (jit part of the grad cell)",
          "hello\n"):
    @olympus.jit
    def f(x):
        io_callback(lambda: print('hello'), None)
        return x

    r = f(1.0)
assert float(r) == 1.0

# ------------------------------------------------------------------ debug.callback

from olympus import debug  # noqa: E402

with cell("debug.callback logs the runtime value", "log: 1.0\n"):
    def log_value(x):
        # This could be an actual logging call; we'll use
        # print() for demonstration
        print("log:", x)

    @olympus.jit
    def f(x):
        debug.callback(log_value, x)
        return x

    f(1.0)

# ------------------------------------------------------------------ pure_callback + SciPy


def jv(v, z):
    v, z = jnp.asarray(v), jnp.asarray(z)

    # Require the order v to be integer type: this simplifies
    # the JVP rule below.
    assert jnp.issubdtype(v.dtype, jnp.integer)

    # Promote the input to inexact (float/complex).
    # Note that jnp.result_type() accounts for the enable_x64 flag.
    z = z.astype(jnp.result_type(float, z.dtype))

    # Wrap scipy function to return the expected dtype.
    def _scipy_jv(v, z):
        return scipy.special.jv(v, z).astype(z.dtype)

    # Define the expected shape & dtype of output.
    result_shape_dtype = olympus.ShapeDtypeStruct(
        shape=jnp.broadcast_shapes(v.shape, z.shape),
        dtype=z.dtype)

    # Use vmap_method="broadcast_all" because scipy.special.jv handles broadcasted inputs.
    return olympus.pure_callback(_scipy_jv, result_shape_dtype, v, z,
                                 vmap_method="broadcast_all")


j1 = partial(jv, 1)
z = jnp.arange(5.0)
JV_TEXT = "[ 0.          0.44005057  0.5767248   0.33905897 -0.06604332]\n"

with cell("jv through pure_callback", JV_TEXT):
    out = j1(z)
    print(out)
np.testing.assert_allclose(np.asarray(out), scipy.special.jv(1, np.arange(5.0)), rtol=1e-6)
assert out.dtype == np.float32

with cell("jv under jit", JV_TEXT):
    print(olympus.jit(j1)(z))

print("all cells ok")

"""The "External callbacks" tutorial (shared/seeds/external_callbacks.md), run
with olympus: every cell, in order, with its printed output and values checked
(against NumPy / SciPy), including the cells that raise (the exception type and
its key words are checked).

The tutorial's `raise_if_negative` block (a plain code block, not a cell) is run
too: the list comprehension does not raise, and `vmap` of it raises
NotImplementedError, because the callback gives no `vmap_method` — as the
reference does today (CALLBACK_SEMANTICS.md §3); the tutorial's text predates
that and shows `ValueError: value of x is 0`.
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
    while _raised:  # the exception a raising cell showed (outside the captured output)
        print(_raised.pop(0))
    if expect_stdout is not None:
        assert out == expect_stdout, f"{title}: printed {out!r}, expected {expect_stdout!r}"


_raised = []


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

with cell("pure_callback inside lax.scan"):
    def body_fun(_, x):
        return _, f(x)
    out_scan = olympus.lax.scan(body_fun, None, jnp.arange(5.0))[1]
    print(repr(out_scan))
np.testing.assert_array_equal(np.asarray(out_scan), np.asarray(out))

with cell("pure_callback under vmap (vmap_method='sequential')"):
    out_vmap = olympus.vmap(f)(x)
    print(repr(out_vmap))
np.testing.assert_array_equal(np.asarray(out_vmap), np.asarray(out))


@contextlib.contextmanager
def raises(exc_type, *words):
    """The cell must raise exc_type with every word in its message."""
    try:
        yield
    except exc_type as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"{w!r} not in {msg!r}"
        _raised.append(f"{type(e).__name__}: {msg}")
    else:
        raise AssertionError(f"expected {exc_type.__name__}")


with cell("grad of pure_callback raises", ""), raises(ValueError, "Pure callbacks do not support JVP",
                                                  "custom_jvp"):
    olympus.grad(f)(x)

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

# The tutorial's raise_if_negative block (see the module docstring).
with cell("raise_if_negative: a loop does not raise, vmap raises", ""):
    def raise_via_callback(x):
        def _raise(x):
            raise ValueError(f"value of x is {x}")
        return olympus.pure_callback(_raise, x, x)

    def raise_if_negative(x):
        return olympus.lax.cond(x < 0, raise_via_callback, lambda x: x, x)

    x_batch = jnp.arange(4)
    looped = [raise_if_negative(x) for x in x_batch]  # does not raise
    assert [int(v) for v in looped] == [0, 1, 2, 3]
    with raises(NotImplementedError, "vmap_method"):
        olympus.vmap(raise_if_negative)(x_batch)

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

with cell("io_callback under vmap: one call per element, in order",
          "generating float32[]\n" * 5):
    rand_v = olympus.vmap(numpy_random_like)(x)
print(repr(rand_v))
np.testing.assert_array_equal(
    np.asarray(rand_v),
    np.array([expected_rng.uniform(size=()) for _ in range(5)], dtype=np.float32))

with cell("ordered io_callback under vmap raises", ""), \
        raises(ValueError, "Cannot `vmap` ordered IO callback"):
    @olympus.jit
    def numpy_random_like_ordered(x):
        return io_callback(host_side_random_like, x, x, ordered=True)

    olympus.vmap(numpy_random_like_ordered)(x)

with cell("ordered io_callback inside lax.scan", "generating float32[]\n" * 5):
    def body_fun(_, x):
        return _, numpy_random_like_ordered(x)
    rand_s = olympus.lax.scan(body_fun, None, jnp.arange(5.0))[1]
np.testing.assert_array_equal(
    np.asarray(rand_s),
    np.array([expected_rng.uniform(size=()) for _ in range(5)], dtype=np.float32))

with cell("grad of io_callback on the differentiated value raises", ""), \
        raises(ValueError, "IO callbacks do not support JVP"):
    olympus.grad(numpy_random_like)(x)

with cell("io_callback independent of the differentiated value runs under grad",
          "hello\n"):
    @olympus.jit
    def f(x):
        io_callback(lambda: print('hello'), None)
        return x

    g = olympus.grad(f)(1.0);
assert float(g) == 1.0

with cell("the jit part of that cell", "hello\n"):
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

with cell("debug.callback under vmap: one call per element",
          "log: 0.0\nlog: 1.0\nlog: 2.0\nlog: 3.0\nlog: 4.0\n"):
    x = jnp.arange(5.0)
    olympus.vmap(f)(x);

with cell("debug.callback under grad logs the primal", "log: 1.0\n"):
    g = olympus.grad(f)(1.0);
assert float(g) == 1.0

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

with cell("jv under vmap", JV_TEXT):
    print(olympus.vmap(j1)(z))

with cell("grad of jv without a rule raises", ""), \
        raises(ValueError, "Pure callbacks do not support JVP", "custom_jvp"):
    olympus.grad(j1)(z)

jv = olympus.custom_jvp(jv)


@jv.defjvp
def _jv_jvp(primals, tangents):
    v, z = primals
    _, z_dot = tangents  # Note: v_dot is always 0 because v is integer.
    jv_minus_1, jv_plus_1 = jv(v - 1, z), jv(v + 1, z)
    djv_dz = jnp.where(v == 0, -jv_plus_1, 0.5 * (jv_minus_1 - jv_plus_1))
    return jv(v, z), z_dot * djv_dz


with cell("grad of jv with custom_jvp", "-0.06447162\n"):
    j1 = partial(jv, 1)
    g = olympus.grad(j1)(2.0)
    print(g)
np.testing.assert_allclose(float(g), 0.5 * (scipy.special.jv(0, 2.0) - scipy.special.jv(2, 2.0)),
                           rtol=1e-6)

with cell("hessian of jv: second order for free"):
    h = olympus.hessian(j1)(2.0)
    print(repr(h))
assert h.dtype == np.float32 and h.shape == ()
assert np.float32(h) == np.float32(-0.4003078), h
# J1'' = (J_{-1} - 2 J_1 + J_3) / 4 (the recurrence applied twice)
np.testing.assert_allclose(float(h), 0.25 * (scipy.special.jv(-1, 2.0) - 2 * scipy.special.jv(1, 2.0)
                                             + scipy.special.jv(3, 2.0)), rtol=1e-5)

print("all cells ok")

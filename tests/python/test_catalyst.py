"""olympus.catalyst: the Catalyst seed's examples (values as the seed prints
them), qjit's 64-bit scope, pure_callback's result types and custom VJPs,
callback, accelerate (devices, autodiff without rules, higher order),
debug.print, grad/jacobian methods, and the error paths."""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy as sp

import olympus
import olympus.numpy as jnp
import olympus.catalyst as catalyst
from olympus.catalyst import (DifferentiableCompileError, accelerate, grad, jacobian,
                              pure_callback, qjit)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ the seed's examples

def test_simpson_callback():
    @pure_callback
    def simpson(x, y) -> float:
        return sp.integrate.simpson(y, x=x)

    @qjit
    def integrate_xsq(a, b):
        x = jnp.linspace(a, b, 100)
        return simpson(x, x ** 2)

    for a, b, exact in ((-1, 1, 2 / 3), (-1, 2, 3.0)):
        got = integrate_xsq(a, b)
        assert got.dtype == np.float64 and got.shape == ()
        xs = np.linspace(a, b, 100)
        assert float(got) == sp.integrate.simpson(xs ** 2, x=xs)  # the host's own answer
        assert abs(float(got) - exact) < 1e-5                      # 0.66666667 on SciPy >= 1.11
    assert repr(integrate_xsq(-1, 2)).endswith("dtype=float64)")


def test_accelerate_fft():
    @qjit
    def fn(x):
        x = jnp.sin(x)
        y = catalyst.accelerate(jnp.fft.fft)(x)
        return jnp.sum(y)

    got = fn(np.array([1.0, 2.0, 1.0, -1.0, 1.5]))
    assert repr(got) == "Array(4.20735492+0.j, dtype=complex128)"


def test_grad_through_accelerated_expm():
    @qjit
    @grad
    def f(x):
        expm = catalyst.accelerate(olympus.scipy.linalg.expm)
        return jnp.sum(expm(jnp.sin(x)) ** 2)

    want = [[2.80120452, 1.67518663], [1.61605839, 4.42856163]]
    with olympus.enable_x64():
        x64 = jnp.array([[0.1, 0.2], [0.3, 0.4]])
    got = f(x64)
    assert got.dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-8)
    # built outside qjit without x64, the input is float32: the same values
    got32 = f(jnp.array([[0.1, 0.2], [0.3, 0.4]]))
    np.testing.assert_allclose(np.asarray(got32), want, rtol=1e-5)


def test_accelerate_on_a_device():
    @accelerate(dev=olympus.devices()[0])
    def classical_fn(x):
        return jnp.sin(x) ** 2

    @qjit
    def hybrid_fn(x):
        y = classical_fn(jnp.sqrt(x))
        return jnp.cos(y)

    x = np.array([1.0, 4.0])
    np.testing.assert_allclose(np.asarray(hybrid_fn(x)), np.cos(np.sin(np.sqrt(x)) ** 2))
    with pytest.raises(RuntimeError, match="Unknown backend: 'gpu'"):
        olympus.devices("gpu")
    with pytest.raises(TypeError, match="dev must be a device"):
        accelerate(lambda v: v, dev="gpu:0")


def test_example_file_runs():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "catalyst_callbacks.py")],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    lines = out.splitlines()
    assert lines[2] == "Array(4.20735492+0.j, dtype=complex128)"
    # the expm example's input is built outside qjit: float32 (see the module docstring)
    assert "2.801205" in out and "4.42856" in out and "dtype=float32" in lines[4]


# ------------------------------------------------------------------ qjit

def test_qjit_scopes_x64():
    @qjit
    def f(x):
        return x * 2.0

    assert f(1.5).dtype == np.float64
    assert jnp.asarray(1.5).dtype == np.float32  # x64 is off again outside
    assert f(jnp.asarray(np.float32(1.5))).dtype == np.float32  # a float32 input stays
    g = qjit(static_argnums=1)(lambda x, n: x * n)
    assert float(g(2.0, 3)) == 6.0
    assert "mul" in str(f.jaxpr(1.0))
    with pytest.raises(TypeError, match="unknown option"):
        qjit(lambda x: x, not_an_option=True)
    assert qjit(autograph=False)(lambda x: x + 1)(1) == 2  # Catalyst's options are accepted


# ------------------------------------------------------------------ pure_callback

def test_pure_callback_result_types():
    @qjit
    def add_one(x):
        return catalyst.pure_callback(lambda x: x + 1, int)(x)

    got = add_one(2)
    assert int(got) == 3 and got.dtype == np.int64

    @qjit
    def fn(x):
        x = jnp.cos(x)
        result_shape = olympus.ShapeDtypeStruct(x.shape, jnp.complex128)

        @catalyst.pure_callback
        def callback_fn(y) -> result_shape:
            return np.fft.fft(y)

        return callback_fn(x)

    np.testing.assert_allclose(np.asarray(fn(np.array([0.1, 0.2]))),
                               [1.97507074 + 0.j, 0.01493759 + 0.j], rtol=1e-6)  # 8 digits

    @pure_callback
    def two(x) -> (float, olympus.ShapeDtypeStruct((2,), np.float64)):
        return x * 2, np.array([x, -x])

    @pure_callback
    def f32_result(x) -> float:
        return np.float32(x) * np.float32(2)  # a float32 NumPy scalar is a float too

    got = qjit(lambda x: f32_result(x))(np.float32(1.5))
    assert float(got) == 3.0 and got.dtype == np.float64

    a, b = qjit(two)(1.5)
    assert float(a) == 3.0 and np.asarray(b).tolist() == [1.5, -1.5]
    assert two(2.0)[0] == 4.0  # on concrete values outside a trace it just runs


def test_pure_callback_custom_vjp_seed_example():
    @pure_callback
    def callback_fn(x) -> float:
        return np.sin(x[0]) * x[1]

    @callback_fn.fwd
    def callback_fn_fwd(x):
        return callback_fn(x), x

    @callback_fn.bwd
    def callback_fn_vjp(res, dy):
        def vjp(x, dy) -> (olympus.ShapeDtypeStruct((2,), jnp.float64),):
            return (np.array([np.cos(x[0]) * dy * x[1], np.sin(x[0]) * dy]),)
        return catalyst.pure_callback(vjp)(res, dy)

    @qjit
    @grad
    def f(x):
        y = jnp.array([jnp.cos(x[0]), x[1]])
        return jnp.sin(callback_fn(y))

    with olympus.enable_x64():
        x = jnp.array([0.1, 0.2])
    np.testing.assert_allclose(np.asarray(f(x)), [-0.01071923, 0.82698717], rtol=1e-6)
    jac = qjit(jacobian(lambda x: callback_fn(x) * 2))(x)
    np.testing.assert_allclose(np.asarray(jac), [2 * np.cos(0.1) * 0.2, 2 * np.sin(0.1)],
                               rtol=1e-12)


def test_pure_callback_errors():
    with pytest.raises(TypeError, match="requires return types"):
        pure_callback(lambda x: x)
    with pytest.raises(TypeError, match="unsupported result type"):
        pure_callback(lambda x: x, "float")

    @pure_callback
    def no_rule(x) -> float:
        return np.sin(x)

    with pytest.raises(DifferentiableCompileError, match="no VJP rule"):
        qjit(grad(lambda x: no_rule(x)))(0.5)
    assert float(qjit(lambda x: no_rule(x))(0.5)) == np.sin(0.5)  # fine undifferentiated

    @pure_callback
    def half(x) -> float:
        return x

    half.fwd(lambda x: (half(x), x))
    with pytest.raises(DifferentiableCompileError, match="missing reverse pass"):
        qjit(lambda x: half(x))(1.0)

    @pure_callback
    def wrong_shape(x) -> float:
        return np.array([1.0, 2.0])

    with pytest.raises(olympus.CallbackError, match="shape") as e:
        qjit(lambda x: wrong_shape(x))(1.0)
    assert e.value.__cause__ is not None

    @pure_callback
    def raises(x) -> float:
        raise KeyError("boom")

    with pytest.raises(olympus.CallbackError) as e:
        qjit(lambda x: raises(x))(1.0)
    assert isinstance(e.value.__cause__, KeyError)

    @pure_callback
    def bad_bwd(x) -> float:
        return np.sin(x)

    bad_bwd.fwd(lambda x: (bad_bwd(x), x))
    bad_bwd.bwd(lambda res, dy: (dy, dy))  # two cotangents for one input
    with pytest.raises(Exception, match="bwd|cotangent|structure|outputs"):
        qjit(grad(lambda x: bad_bwd(x)))(0.5)


# ------------------------------------------------------------------ callback, print

def test_callback_and_debug_print(capsys):
    seen = []

    @qjit
    def f(x):
        catalyst.debug.print("x = {x}", x=x)
        catalyst.debug.print(x * 2)
        catalyst.callback(lambda v: seen.append(float(v)))(x)
        catalyst.debug.callback(lambda v: seen.append(-float(v)))(x)
        return x + 1

    assert float(f(1.5)) == 2.5
    assert capsys.readouterr().out.splitlines() == ["x = 1.5", "3.0"]
    assert seen == [1.5, -1.5]
    catalyst.debug.print("eager {}", 3)
    assert capsys.readouterr().out == "eager 3\n"

    @qjit
    def g(x):
        catalyst.callback(lambda v: 7)(x)
        return x

    with pytest.raises(olympus.CallbackError, match="must return None"):
        g(1.0)
    with pytest.raises(TypeError, match="either one value"):
        catalyst.debug.print(1.0, 2.0)


# ------------------------------------------------------------------ accelerate, autodiff

def test_accelerate_autodiff_and_vmap():
    h = qjit(grad(lambda x: jnp.sum(accelerate(lambda v: jnp.sin(v) * v)(x))))
    x = np.array([0.5, 1.0])
    np.testing.assert_allclose(np.asarray(h(x)), np.sin(x) + x * np.cos(x), rtol=1e-12)
    second = qjit(grad(grad(lambda v: accelerate(jnp.sin)(v))))(0.5)  # higher order
    np.testing.assert_allclose(float(second), -np.sin(0.5), rtol=1e-12)
    batched = qjit(catalyst.vmap(accelerate(lambda v: v ** 2)))(np.arange(3.0))
    np.testing.assert_allclose(np.asarray(batched), [0.0, 1.0, 4.0])
    assert float(accelerate(jnp.sin)(0.5)) == pytest.approx(np.sin(0.5))  # eager: just runs
    with pytest.raises(ValueError, match="must be jax.jit-able"):
        qjit(lambda x: accelerate(lambda v: float(v))(x))(1.0)


def test_grad_methods():
    f = lambda x: jnp.sum(x ** 3)  # noqa: E731
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(np.asarray(qjit(grad(f, method="auto"))(x)), 3 * x ** 2)
    np.testing.assert_allclose(np.asarray(qjit(grad(f, method="fd", h=1e-6))(x)), 3 * x ** 2,
                               rtol=1e-4)
    J = qjit(jacobian(lambda x: x ** 2, method="fd", h=1e-7))(x)
    np.testing.assert_allclose(np.asarray(J), np.diag(2 * x), atol=1e-5)
    v, g = qjit(catalyst.value_and_grad(f))(x)
    assert float(v) == 9.0
    with pytest.raises(ValueError, match="method"):
        grad(f, method="spsa")
    out, t = catalyst.jvp(lambda x: x ** 2, [3.0], [1.0])
    assert float(t) == 6.0
    out, ct = catalyst.vjp(lambda x: x ** 2, [3.0], [1.0])
    assert float(ct[0]) == 6.0


def test_accelerate_runs_on_the_device_given():
    code = """
import olympus, olympus.numpy as jnp
from olympus.catalyst import accelerate, qjit
devs = olympus.devices()
assert len(devs) == 3, devs
f = accelerate(lambda v: v * 2, dev=devs[2])
assert f(jnp.ones(2)).devices() == {devs[2]}      # the eager call runs there
print(float(qjit(lambda x: f(x).sum())(1.5)))      # and compiled code calls it
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_CPU_DEVICES="3")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3.0"

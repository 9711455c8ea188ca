"""The callback examples of Catalyst's "Callbacks and GPUs" page, run on
olympus with only the imports changed (`jax` -> `olympus`, `catalyst` ->
`olympus.catalyst`). `make test` runs this file.

qjit turns on 64-bit types only while a qjit function traces and runs, so
arrays built with jnp outside a qjit function keep olympus's 32-bit default:
the last example's input is float32 here and its result float32 (Catalyst,
which turns 64-bit on globally, prints float64; the values agree to float32
precision). The first example's value depends on SciPy's simpson: SciPy 1.11
and later give 0.66666667 for 100 points, SciPy 1.10 (Debian 12) 0.66666804.
"""
import numpy as np
import scipy as sp

import olympus as jax
import olympus.numpy as jnp
import olympus.catalyst as catalyst
from olympus.catalyst import accelerate, grad, pure_callback, qjit


# Callbacks to arbitrary Python
@pure_callback
def simpson(x, y) -> float:
    return sp.integrate.simpson(y, x=x)


@qjit
def integrate_xsq(a, b):
    x = jnp.linspace(a, b, 100)
    return simpson(x, x ** 2)


print(repr(integrate_xsq(-1, 1)))
print(repr(integrate_xsq(-1, 2)))


# Callbacks to JIT-compatible code
@qjit
def fn(x):
    x = jnp.sin(x)
    y = catalyst.accelerate(jnp.fft.fft)(x)
    return jnp.sum(y)


x = np.array([1.0, 2.0, 1.0, -1.0, 1.5])
print(repr(fn(x)))


@qjit
@grad
def f(x):
    expm = catalyst.accelerate(jax.scipy.linalg.expm)
    return jnp.sum(expm(jnp.sin(x)) ** 2)


x = jnp.array([[0.1, 0.2], [0.3, 0.4]])
print(repr(f(x)))


# Accelerator support: on a machine without a GPU, jax.devices("gpu") raises
# (as in JAX); the example runs on the CPU device instead.
try:
    device = jax.devices("gpu")[0]
except RuntimeError as e:
    print(f"no GPU ({e}); running classical_fn on {jax.devices()[0]}")
    device = jax.devices()[0]


@accelerate(dev=device)
def classical_fn(x):
    return jnp.sin(x) ** 2


@qjit
def hybrid_fn(x):
    y = classical_fn(jnp.sqrt(x))  # will be executed on a GPU
    return jnp.cos(y)


print(repr(hybrid_fn(np.array([1.0, 4.0]))))

"""olympus.test_util.check_grads: JAX's gradient checker.

`check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None,
eps=None)` checks f's derivatives at args up to `order`:
- "fwd": jvp(f) along a random tangent against central finite differences;
- "rev": vjp(f) against finite differences: <u, J v> must equal <J^T u, v>
  for random u, v (J v from central differences, so custom_vjp functions
  without a jvp are checked too).
Higher orders check the derivative functions themselves (the jvp's tangent
output, and the vjp) the same way. Raises AssertionError naming the check, the
order, and the values that differ. Tolerances default by dtype (float32: 2e-2,
float64: 1e-5), eps to 1e-3 (float32) or 1e-6 (float64).
"""
import numpy as np

import olympus
import olympus.numpy  # noqa: F401 (asarray)
from olympus import tree_util

_TOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 2e-2, np.dtype(np.float64): 1e-5,
        np.dtype(np.complex64): 2e-2, np.dtype(np.complex128): 1e-5}
_EPS = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-6,
        np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-6}


def _dtype(tree):
    leaves = [olympus.numpy.asarray(x) for x in tree_util.tree_leaves(tree)]  # x64-canonical
    inexact = [np.dtype(x.dtype) for x in leaves if np.issubdtype(x.dtype, np.inexact)]
    if not inexact:
        raise TypeError("check_grads: the arguments have no floating-point leaves to "
                        "differentiate")
    return max(inexact, key=lambda d: d.itemsize)


def _rand_like(rng, tree):
    def one(x):
        if not hasattr(x, "dtype"):  # a Python scalar
            x = np.asarray(x)
        shape, dtype = tuple(x.shape), np.dtype(x.dtype)
        v = rng.standard_normal(shape)
        if np.issubdtype(dtype, np.complexfloating):
            v = v + 1j * rng.standard_normal(shape)
        return np.asarray(v, dtype)
    return tree_util.tree_map(one, tree)


def _axpy(a, x, y):
    """y + a * x as olympus arrays (so f may use Array methods such as .at)."""
    return tree_util.tree_map(
        lambda xi, yi: olympus.numpy.asarray(np.asarray(yi) + a * np.asarray(xi)), x, y)


def _vdot(x, y):
    return sum(np.vdot(np.asarray(a, np.complex128).ravel(), np.asarray(b, np.complex128).ravel())
               for a, b in zip(tree_util.tree_leaves(x), tree_util.tree_leaves(y)))


def _close(what, got, want, atol, rtol):
    for g, w in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want)):
        g, w = np.asarray(g, np.complex128), np.asarray(w, np.complex128)
        if not np.allclose(g, w, atol=atol, rtol=rtol):
            raise AssertionError(f"check_grads: {what}: got {g}, expected {w} "
                                 f"(atol {atol}, rtol {rtol})")


def _numerical_jvp(f, args, v, eps):
    plus = f(*_axpy(eps, v, args))
    minus = f(*_axpy(-eps, v, args))
    return tree_util.tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), plus,
                              minus)


def check_jvp(f, args, atol, rtol, eps, rng):
    v = _rand_like(rng, args)
    _, tangent = olympus.jvp(f, args, v)
    _close("jvp against finite differences", tangent, _numerical_jvp(f, args, v, eps), atol,
           rtol)


def check_vjp(f, args, atol, rtol, eps, rng):
    out, pullback = olympus.vjp(f, *args)
    u = _rand_like(rng, out)
    v = _rand_like(rng, args)
    jv = _numerical_jvp(f, args, v, eps)
    # JAX's convention for complex values: the pullback of conj(u), conjugated,
    # paired with v as the real part of <v, .> (for real values: <J^T u, v>)
    conj = lambda t: tree_util.tree_map(lambda a: np.conj(np.asarray(a)), t)  # noqa: E731
    ct = conj(pullback(conj(u)))
    _close("vjp against finite differences (<u, J v> = <J^T u, v>)", np.real(_vdot(v, ct)),
           np.real(_vdot(jv, u)), atol, rtol)


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    if isinstance(modes, str):
        modes = (modes,)
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: modes must be 'fwd' and/or 'rev', got {m!r}")
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"check_grads: order must be a positive int, got {order!r}")
    args = tuple(args)
    dtype = _dtype(args)
    atol = _TOL[dtype] if atol is None else atol
    rtol = _TOL[dtype] if rtol is None else rtol
    eps = _EPS[dtype] if eps is None else eps
    rng = np.random.default_rng(0)

    def check(f, args, order):
        if "fwd" in modes:
            check_jvp(f, args, atol, rtol, eps, rng)
            if order > 1:
                v = _rand_like(rng, args)
                check(lambda *a: olympus.jvp(f, a, v)[1], args, order - 1)
        if "rev" in modes:
            check_vjp(f, args, atol, rtol, eps, rng)
            if order > 1:
                u = _rand_like(rng, olympus.eval_shape(f, *args))
                check(lambda *a: olympus.vjp(f, *a)[1](u), args, order - 1)

    check(f, args, order)


__all__ = ["check_grads"]

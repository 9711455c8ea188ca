"""olympus.scipy.optimize.minimize(method="BFGS") and its line search against
SciPy's BFGS: the minimiser of Rosenbrock, quadratics (exact answer), under
jit and vmap, with args=, and the results' fields."""
import numpy as np
import pytest
import scipy.optimize as so

import olympus
import olympus.numpy as jnp
from olympus.scipy.optimize import line_search, minimize


def rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("x0", [[-1.2, 1.0], [1.3, 0.7, 0.8, 1.9, 1.2]])  # SciPy's examples
def test_rosenbrock_matches_scipy(x0):
    with olympus.enable_x64():
        r = minimize(rosen, jnp.asarray(x0), method="BFGS")
        s = so.minimize(lambda x: float(rosen(jnp.asarray(x))), x0, method="BFGS",
                        jac=lambda x: np.asarray(olympus.grad(rosen)(jnp.asarray(x))))
        assert bool(r.success) and int(r.status) == 0
        np.testing.assert_allclose(np.asarray(r.x), s.x, atol=1e-4)
        np.testing.assert_allclose(np.asarray(r.x), np.ones(len(x0)), atol=1e-5)
        assert float(r.fun) < 1e-10
        assert np.max(np.abs(np.asarray(r.jac))) < 1e-5
        assert 0 < int(r.nit) <= 3 * s.nit and int(r.nfev) >= int(r.nit)


def test_quadratic_exact_and_hess_inv():
    A = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    with olympus.enable_x64():
        f = lambda x, A, b: 0.5 * x @ A @ x - b @ x  # noqa: E731
        r = minimize(f, jnp.zeros(2), args=(jnp.asarray(A), jnp.asarray(b)), method="BFGS")
        np.testing.assert_allclose(np.asarray(r.x), np.linalg.solve(A, b), atol=1e-8)
        # the inverse-Hessian estimate (inexact line searches: close, not exact)
        np.testing.assert_allclose(np.asarray(r.hess_inv), np.linalg.inv(A), atol=5e-3)


def test_under_jit_and_vmap():
    f = lambda x, c: jnp.sum((x - c) ** 2) + 0.1 * jnp.sum(x ** 4)  # noqa: E731
    solve = olympus.jit(lambda c: minimize(f, jnp.zeros(3), args=(c,), method="BFGS").x)
    cs = jnp.asarray(np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]], np.float32))
    xs = olympus.vmap(solve)(cs)
    for x, c in zip(np.asarray(xs), np.asarray(cs)):
        np.testing.assert_allclose(2 * (x - c) + 0.4 * x ** 3, 0, atol=2e-3)
        np.testing.assert_allclose(x, np.asarray(solve(jnp.asarray(c))), rtol=1e-5, atol=1e-6)


def test_line_search_strong_wolfe():
    with olympus.enable_x64():
        x = jnp.asarray([-1.2, 1.0])
        p = -olympus.grad(rosen)(x)
        ls = line_search(rosen, x, p)
        assert not bool(ls.failed)
        a = float(ls.a_k)
        f0, g0 = float(rosen(x)), np.asarray(olympus.grad(rosen)(x))
        g1 = np.asarray(olympus.grad(rosen)(x + a * p))
        assert float(rosen(x + a * p)) <= f0 + 1e-4 * a * g0 @ np.asarray(p)
        assert abs(g1 @ np.asarray(p)) <= 0.9 * abs(g0 @ np.asarray(p))


def test_errors():
    with pytest.raises(ValueError, match="BFGS"):
        minimize(rosen, jnp.zeros(2), method="Nelder-Mead")
    with pytest.raises(ValueError, match="1-D"):
        minimize(rosen, jnp.zeros((2, 2)), method="BFGS")
    with pytest.raises(ValueError, match="unknown options"):
        minimize(rosen, jnp.zeros(2), method="BFGS", options={"bogus": 1})

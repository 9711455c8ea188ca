"""The special-function rows through olympus.lax: values against scipy.special
(float64 with x64 on, float32), edge cases (poles, x = 0, erf_inv at and past
+-1), eager / jit / vmap agreement, derivatives against analytic forms and
finite differences, and the errors for what has no derivative."""
import numpy as np
import pytest
import scipy.special as sp

import olympus
from olympus import lax

# Tolerances: float64 within 1e-12 relative (1e-10 for the incomplete gamma
# family), float32 within 1e-5 of SciPy's float64 value rounded to float32.
# The absolute floors cover values that pass through zero (digamma's and
# lgamma's roots), where relative error is not meaningful.
F64 = dict(rtol=1e-12, atol=1e-14)
F64_IG = dict(rtol=1e-10, atol=1e-280)
F32 = dict(rtol=1e-5, atol=1e-6)

REALS = np.concatenate([np.linspace(-6, 6, 241), [0.0, -0.0, 1e-300, 1e-10, -1e-10, 20, 27,
                                                   30, 31, 50, 100, 700, -700, np.inf,
                                                   -np.inf, np.nan]])
UNIT = np.concatenate([np.linspace(-1, 1, 201), [1 - 2 ** -53, -1 + 2 ** -53, 0.999999, 1e-300,
                                                 -1e-20, 1.0, -1.0, 1.1, -1.5, np.inf, np.nan]])
GAMMA_ARGS = np.concatenate([np.linspace(-9.9, 10, 200), np.logspace(-10, 3, 60),
                             [0.0, -0.0, -1.0, -2.0, -0.5, -1.5 - 1e-9, -2.5 + 1e-12,
                              1.4616321449683622, 1e300, np.inf, np.nan]])


def _ref(f, *args, dtype):
    with np.errstate(all="ignore"):
        return np.asarray(f(*[np.asarray(a, np.float64) for a in args])).astype(dtype)


def _close(got, want, tol):
    got = np.asarray(got)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True,
                               **tol)


UNARY = [
    ("erf", lax.erf, sp.erf, REALS),
    ("erfc", lax.erfc, sp.erfc, REALS),
    ("erf_inv", lax.erf_inv, sp.erfinv, UNIT),
    ("lgamma", lax.lgamma, sp.gammaln, GAMMA_ARGS),
    ("digamma", lax.digamma, sp.digamma, GAMMA_ARGS),
    ("bessel_i0e", lax.bessel_i0e, sp.i0e, REALS),
    ("bessel_i1e", lax.bessel_i1e, sp.i1e, REALS),
]


@pytest.mark.parametrize("name,f,ref,xs", UNARY, ids=[u[0] for u in UNARY])
def test_unary_f64(name, f, ref, xs):
    olympus.config.update("olympus_enable_x64", True)
    x = np.asarray(xs, np.float64)
    _close(f(x), _ref(ref, x, dtype=np.float64), F64)


@pytest.mark.parametrize("name,f,ref,xs", UNARY, ids=[u[0] for u in UNARY])
def test_unary_f32(name, f, ref, xs):
    with np.errstate(over="ignore"):
        x = np.asarray(xs, np.float32)
    _close(f(x), _ref(ref, x, dtype=np.float32), F32)


def _grid(a, x):
    A, X = np.meshgrid(np.asarray(a, np.float64), np.asarray(x, np.float64))
    return A.ravel(), X.ravel()


# (NaN operands are checked in test_edge_values: SciPy's gammainc gives 0 or 1
# for some of them, olympus NaN for all.)
IG_A = np.concatenate([np.logspace(-8, 2.5, 50), [0.0, 1.0, 2.5, 1e-3, np.inf, -1.0]])
IG_X = np.concatenate([np.logspace(-4, 2.7, 50), [0.0, 1.0, np.inf, -1.0]])
BINARY = [
    ("igamma", lax.igamma, sp.gammainc, _grid(IG_A, IG_X), F64_IG),
    ("igammac", lax.igammac, sp.gammaincc, _grid(IG_A, IG_X), F64_IG),
    ("polygamma", lax.polygamma, sp.polygamma,
     _grid(np.arange(0.0, 8.0),
           np.concatenate([np.linspace(-5.5, 10, 63), np.logspace(-5, 3, 30),
                           [0.0, -1.0, -2.0, 1.4616321449683622]])), F64),
    ("zeta", lax.zeta, sp.zeta,
     _grid(np.concatenate([np.linspace(1.01, 20, 40), [1.0, 0.5, 2, 3, 30, 100]]),
           np.concatenate([np.logspace(-3, 4, 40), [0.0, -1.0, -0.5, -2.5, 1.0]])), F64),
]


@pytest.mark.parametrize("name,f,ref,args,tol", BINARY, ids=[b[0] for b in BINARY])
def test_binary_f64(name, f, ref, args, tol):
    olympus.config.update("olympus_enable_x64", True)
    a, x = (np.asarray(v, np.float64) for v in args)
    _close(f(a, x), _ref(ref, a, x, dtype=np.float64), tol)


@pytest.mark.parametrize("name,f,ref,args,tol", BINARY, ids=[b[0] for b in BINARY])
def test_binary_f32(name, f, ref, args, tol):
    a, x = (np.asarray(v, np.float32) for v in args)
    with np.errstate(over="ignore"):
        _close(f(a, x), _ref(ref, a, x, dtype=np.float32), dict(rtol=1e-5, atol=1e-30))


def test_edge_values():
    olympus.config.update("olympus_enable_x64", True)
    inf, nan = np.inf, np.nan
    got = np.asarray(lax.erf_inv(np.array([1.0, -1.0, 1.5, -1.0000001, 0.0, -0.0])))
    np.testing.assert_array_equal(got, [inf, -inf, nan, nan, 0.0, -0.0])
    assert np.signbit(got[5])
    np.testing.assert_array_equal(np.asarray(lax.digamma(np.array([0.0, -0.0, -1.0, -7.0]))),
                                  [-inf, inf, nan, nan])
    np.testing.assert_array_equal(np.asarray(lax.igamma(np.array([0.5, 3.0]), 0.0)), [0, 0])
    np.testing.assert_array_equal(np.asarray(lax.igammac(np.array([0.5, 3.0]), 0.0)), [1, 1])
    np.testing.assert_array_equal(np.asarray(lax.igamma(2.0, np.array([inf, -1.0]))), [1, nan])
    for f in (lax.igamma, lax.igammac, lax.igamma_grad_a, lax.polygamma, lax.zeta):
        got = np.asarray(f(np.array([nan, nan, inf, 2.0]), np.array([0.0, inf, nan, nan])))
        assert np.isnan(got).all(), f.__name__
    np.testing.assert_array_equal(np.asarray(lax.polygamma(np.array([1.0, 2.0, 0.5]), 0.0)),
                                  [inf, -inf, nan])
    np.testing.assert_array_equal(np.asarray(lax.zeta(np.array([1.0, 0.5, 2.0]), 1.0))[:2],
                                  [inf, nan])
    np.testing.assert_allclose(np.asarray(lax.zeta(2.0, 1.0)), np.pi ** 2 / 6, rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(lax.bessel_i0e(np.array([0.0, inf, -inf]))),
                                  [1, 0, 0])
    np.testing.assert_array_equal(np.asarray(lax.bessel_i1e(np.array([0.0, -0.0, inf, -inf]))),
                                  [0, 0, 0, 0])


def test_digamma_near_poles():
    """Next to a pole -n, SciPy's digamma loses digits (5e-5 relative at -3 +
    1e-12); the reference is the reflection formula with the exact distance
    r = x + n: psi(x) = psi(1 - x) - pi / tan(pi r)."""
    olympus.config.update("olympus_enable_x64", True)
    x = np.array([-3 + 1e-12, -2 + 1e-7, -1 - 1e-9, -7 - 1e-5, -0.5 - 1e-10])
    r = x - np.round(x)
    want = sp.digamma(1 - x) - np.pi / np.tan(np.pi * r)
    np.testing.assert_allclose(np.asarray(lax.digamma(x)), want, rtol=1e-13)


def test_igamma_grad_a_and_random_gamma_grad_values():
    olympus.config.update("olympus_enable_x64", True)
    a, x = _grid(np.logspace(-1, 1.5, 20), np.logspace(-2, 1.7, 25))
    g = np.asarray(lax.igamma_grad_a(a, x))
    h = 1e-6 * a
    # finite differences of whichever of P, Q is smaller (the other is ~1 and
    # its difference would drown in rounding)
    fd_p = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    fd_q = -(sp.gammaincc(a + h, x) - sp.gammaincc(a - h, x)) / (2 * h)
    fd = np.where(sp.gammainc(a, x) < 0.5, fd_p, fd_q)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-14)
    # random_gamma_grad: dx/da of x = P^-1(a, u) at fixed u
    a = np.logspace(-1, 2, 30)
    for u in (0.05, 0.37, 0.9):
        x = sp.gammaincinv(a, u)
        h = 1e-6 * a
        fd = (sp.gammaincinv(a + h, u) - sp.gammaincinv(a - h, u)) / (2 * h)
        np.testing.assert_allclose(np.asarray(lax.random_gamma_grad(a, x)), fd, rtol=1e-6)


def test_low_precision_dtypes():
    x = np.linspace(-0.9, 0.9, 19).astype(np.float16)
    got = np.asarray(lax.erf_inv(x))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), sp.erfinv(x.astype(np.float64)),
                               rtol=2e-3, atol=1e-3)
    xb = olympus._core.asarray(np.linspace(0.5, 4, 8), dtype="bfloat16")
    gb = lax.digamma(xb)
    assert gb.dtype == "bfloat16"
    np.testing.assert_allclose(np.asarray(gb).astype(np.float64),
                               sp.digamma(np.asarray(xb).astype(np.float64)), rtol=2e-2,
                               atol=1e-2)


@pytest.mark.parametrize("x64", [False, True], indirect=True)
def test_jit_and_vmap_agree_with_eager(x64):
    dt = np.float64 if x64 else np.float32
    x = np.linspace(0.1, 4, 12).astype(dt).reshape(3, 4)
    a = np.linspace(0.5, 3, 12).astype(dt).reshape(3, 4)
    for f in (lax.erf, lax.erfc, lax.lgamma, lax.digamma, lax.bessel_i0e, lax.bessel_i1e):
        want = np.asarray(f(x))
        np.testing.assert_array_equal(np.asarray(olympus.jit(f)(x)), want)
        np.testing.assert_array_equal(np.asarray(olympus.vmap(f)(x)), want)
    np.testing.assert_array_equal(np.asarray(olympus.jit(lax.erf_inv)(x / 5)),
                                  np.asarray(lax.erf_inv(x / 5)))
    for f in (lax.igamma, lax.igammac, lax.igamma_grad_a, lax.random_gamma_grad, lax.zeta):
        want = np.asarray(f(a + 1, x))
        np.testing.assert_array_equal(np.asarray(olympus.jit(f)(a + 1, x)), want)
        np.testing.assert_array_equal(np.asarray(olympus.vmap(f)(a + 1, x)), want)
        # one operand unbatched (a rank-0 value against each row)
        row = np.asarray(olympus.vmap(lambda xi: f(dt(2.5), xi))(x))
        np.testing.assert_array_equal(row, np.asarray(f(np.full_like(x, 2.5), x)))
    n = np.array([0, 1, 2, 3], dt)
    want = np.asarray(lax.polygamma(np.broadcast_to(n, x.shape).copy(), x))
    got = olympus.vmap(lambda xi: lax.polygamma(n, xi))(x)
    np.testing.assert_array_equal(np.asarray(got), want)


def _grad_each(f, x):
    g = olympus.jit(olympus.vmap(olympus.grad(f)))
    return np.asarray(g(x))


def test_grads_unary():
    olympus.config.update("olympus_enable_x64", True)
    x = np.linspace(-2.5, 2.5, 23)
    np.testing.assert_allclose(_grad_each(lax.erf, x), 2 / np.sqrt(np.pi) * np.exp(-x * x),
                               rtol=1e-14)
    np.testing.assert_allclose(_grad_each(lax.erfc, x), -2 / np.sqrt(np.pi) * np.exp(-x * x),
                               rtol=1e-14)
    u = np.linspace(-0.95, 0.95, 21)
    np.testing.assert_allclose(_grad_each(lax.erf_inv, u),
                               np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(u) ** 2), rtol=1e-13)
    p = np.concatenate([np.linspace(0.2, 6, 20), [-0.5, -1.5, -2.7]])
    np.testing.assert_allclose(_grad_each(lax.lgamma, p), sp.digamma(p), rtol=1e-12)
    np.testing.assert_allclose(_grad_each(lax.digamma, p), sp.polygamma(1, p), rtol=1e-12)
    h = 1e-6
    xs = np.concatenate([np.linspace(-2.5, 2.5, 22), [-35.0, 40.0]])  # no kink at 0
    for f, ref in ((lax.bessel_i0e, sp.i0e), (lax.bessel_i1e, sp.i1e)):
        fd = (ref(xs + h) - ref(xs - h)) / (2 * h)
        np.testing.assert_allclose(_grad_each(f, xs), fd, rtol=1e-7, atol=1e-9)
    # JAX's values at and next to 0: i0e'(0) = 0 (sign(0) = 0), i0e'(0+) = -1
    # (e^-|x| has a kink), i1e' = 1/2 at |x| <= eps and its limit next to it
    assert float(olympus.grad(lax.bessel_i0e)(0.0)) == 0.0
    assert float(olympus.grad(lax.bessel_i0e)(1e-20)) == -1.0
    assert float(olympus.grad(lax.bessel_i1e)(0.0)) == 0.5
    np.testing.assert_allclose(float(olympus.grad(lax.bessel_i1e)(1e-6)), 0.5 - 1e-6,
                               rtol=1e-9)


def test_grads_binary():
    olympus.config.update("olympus_enable_x64", True)
    a, x = _grid(np.linspace(0.5, 6, 8), np.linspace(0.1, 12, 9))
    pdf = np.exp(-x + (a - 1) * np.log(x) - sp.gammaln(a))
    ga, gx = olympus.grad(lambda a_, x_: lax.igamma(a_, x_).sum(), argnums=(0, 1))(a, x)
    np.testing.assert_allclose(np.asarray(gx), pdf, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ga), np.asarray(lax.igamma_grad_a(a, x)), rtol=1e-15)
    gca, gcx = olympus.grad(lambda a_, x_: lax.igammac(a_, x_).sum(), argnums=(0, 1))(a, x)
    np.testing.assert_allclose(np.asarray(gcx), -pdf, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gca), -np.asarray(ga), rtol=1e-15)
    # d/dx of igamma_grad_a: the density times (log x - digamma(a))
    g2 = olympus.grad(lambda x_: lax.igamma_grad_a(a, x_).sum())(x)
    np.testing.assert_allclose(np.asarray(g2), pdf * (np.log(x) - sp.digamma(a)), rtol=1e-10,
                               atol=1e-15)
    # P(1, x) = 1 - exp(-x): its density at x = 0 is 1 (not 0 * log 0)
    assert float(olympus.grad(lambda x_: lax.igamma(1.0, x_))(0.0)) == 1.0
    n = np.array([0.0, 1.0, 2.0, 3.0])
    xs = np.array([0.7, 1.3, 2.9, 5.0])
    gp = olympus.grad(lambda x_: lax.polygamma(n, x_).sum())(xs)
    np.testing.assert_allclose(np.asarray(gp), sp.polygamma(n + 1, xs), rtol=1e-12)
    s = np.array([2.0, 3.5, 5.0, 9.0])
    gz = olympus.grad(lambda q: lax.zeta(s, q).sum())(xs)
    np.testing.assert_allclose(np.asarray(gz), -s * sp.zeta(s + 1, xs), rtol=1e-12)


def test_no_derivative_errors():
    with pytest.raises(NotImplementedError, match="polygamma.*order n"):
        olympus.grad(lambda m: lax.polygamma(m, 2.0))(1.0)
    with pytest.raises(NotImplementedError, match="zeta.*exponent s"):
        olympus.grad(lambda s: lax.zeta(s, 2.0))(3.0)
    with pytest.raises(NotImplementedError, match="igamma_grad_a"):
        olympus.grad(lambda a: lax.igamma_grad_a(a, 2.0))(3.0)
    with pytest.raises(NotImplementedError, match="random_gamma_grad has no JVP rule"):
        olympus.grad(lambda a: lax.random_gamma_grad(a, 2.0))(3.0)
    # transposition: none is linear
    with pytest.raises(Exception, match="erf"):
        olympus.linear_transpose(lax.erf, np.float32(1.0))(np.float32(1.0))


def test_bad_operands_raise():
    with pytest.raises(TypeError, match="erf: expected a floating-point operand, got i32"):
        lax.erf(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="digamma: expected a floating-point operand"):
        lax.digamma(np.array([1 + 1j], np.complex64))
    with pytest.raises(TypeError, match="igamma: incompatible shapes"):
        lax.igamma(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="zeta: operands must have the same dtype"):
        lax.zeta(np.ones(3, np.float32), np.ones(3, np.float16))

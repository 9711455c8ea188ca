"""olympus.scipy: special functions against scipy.special and distributions
against scipy.stats (float64 with x64 on, float32 with it off), derivatives
with check_grads, jit / vmap agreement, dtypes and the errors JAX raises;
integrate.trapezoid against scipy.integrate."""
import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp
import scipy.stats as st

import olympus
import olympus.numpy as jnp
from olympus.scipy import integrate, special, stats
from olympus.test_util import check_grads

# float64: SciPy's value to 1e-12 (1e-10 where a continued fraction or series
# stands in for SciPy's algorithm); float32: SciPy's float64 value to 2e-5.
F64 = dict(rtol=1e-12, atol=1e-300)
F64_LOOSE = dict(rtol=1e-10, atol=1e-300)
F32 = dict(rtol=2e-5, atol=1e-30)


def _tol(x64, loose=False):
    return (F64_LOOSE if loose else F64) if x64 else F32


def _check(got, want, x64, loose=False, atol=None):
    dtype = np.float64 if x64 else np.float32
    got = np.asarray(got)
    assert got.dtype == dtype, (got.dtype, dtype)
    tol = dict(_tol(x64, loose))
    if atol is not None:
        tol["atol"] = atol
    with np.errstate(all="ignore"):
        want = np.asarray(want, np.float64)
    if not x64:   # where SciPy's value overflows or underflows float32, so must ours
        with np.errstate(all="ignore"):
            want = want.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), want, equal_nan=True, **tol)


def _args(xs, x64):
    return [np.asarray(x, np.float64 if x64 else np.float32) for x in xs]


REALS = np.concatenate([np.linspace(-8, 8, 65), [0.0, -0.0, 1e-8, -1e-8, 20.0, -20.0, np.inf,
                                                  -np.inf, np.nan]])
POS = np.concatenate([np.logspace(-6, 2.5, 40), [0.5, 1.0, 2.0, 10.5, np.inf, np.nan]])
UNIT = np.concatenate([np.linspace(0, 1, 41), [1e-30, 1e-10, 1 - 1e-7, -0.1, 1.1, np.nan]])
GAMMA = np.concatenate([np.linspace(-7.75, 30.25, 77), [0.5, 1.0, 2.0, 3.0, 150.5]])
TAIL = np.concatenate([np.linspace(-38, 8, 93), [-12.5, -30.0, -100.0, 10, 40]])

UNARY = [
    # name, ours, scipy, points, loose float64 tolerance
    ("erf", special.erf, sp.erf, REALS, False),
    ("erfc", special.erfc, sp.erfc, REALS, False),
    ("erfinv", special.erfinv, sp.erfinv, UNIT * 2 - 1, False),
    ("expit", special.expit, sp.expit, REALS, False),
    ("logit", special.logit, sp.logit, UNIT, False),
    ("gammaln", special.gammaln, sp.gammaln, GAMMA, False),
    ("gamma", special.gamma, sp.gamma, GAMMA, False),
    ("gammasgn", special.gammasgn, sp.gammasgn, np.array([-2.5, -1.5, -0.5, 0.5, 3.0, 1e30,
                                                            np.nan]), False),
    ("digamma", special.digamma, sp.psi, GAMMA, False),
    ("ndtr", special.ndtr, sp.ndtr, TAIL, False),
    ("log_ndtr", special.log_ndtr, sp.log_ndtr, TAIL, False),
    ("ndtri", special.ndtri, sp.ndtri,
     np.concatenate([UNIT, np.logspace(-300, -2, 40), 1 - np.logspace(-15, -2, 20)]), False),
    ("i0", special.i0, sp.i0, REALS[:-4], False),
    ("i0e", special.i0e, sp.i0e, REALS, False),
    ("i1", special.i1, sp.i1, REALS[:-4], False),
    ("i1e", special.i1e, sp.i1e, REALS, False),
    ("entr", special.entr, sp.entr, np.concatenate([POS, [0.0, -1.0]]), False),
    ("factorial", special.factorial, sp.factorial, np.array([-1.0, 0, 1, 4, 10.5, 20]), False),
]


@pytest.mark.parametrize("name,f,ref,xs,loose", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, f, ref, xs, loose, x64):
    x, = _args([xs], x64)
    if not x64 and name in ("ndtri",):   # points that round to 0 or 1 in float32 differ
        x = x[(x == 0) | (x >= 1e-37)]
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    if not x64 and name in ("gamma", "i0", "i1", "factorial"):
        loose = True
    _check(f(x), want, x64, loose)


BINARY = [
    ("betaln", special.betaln, sp.betaln,
     (np.array([0.3, 1.0, 2.5, 7.0, 12.0, 40.0, 1e3, 0.5, 8.0, 1e6]),
      np.array([0.7, 1.0, 0.5, 30.0, 15.0, 1e4, 2.0, 1e5, 42000.0, 3.0]))),
    ("beta", special.beta, sp.beta,
     (np.array([0.3, 1.0, 2.5, -0.5, 4.0]), np.array([0.7, 1.0, 0.5, 2.0, 4.5]))),
    ("gammainc", special.gammainc, sp.gammainc,
     (np.array([0.5, 1.0, 3.0, 10.0, 50.0]), np.array([0.1, 2.0, 3.0, 30.0, 45.0]))),
    ("gammaincc", special.gammaincc, sp.gammaincc,
     (np.array([0.5, 1.0, 3.0, 10.0, 50.0]), np.array([0.1, 2.0, 3.0, 30.0, 45.0]))),
    ("xlogy", special.xlogy, sp.xlogy,
     (np.array([0.0, 0.0, 2.0, 3.0, 0.0, -1.5]), np.array([0.0, 3.0, 0.5, 0.0, np.nan, 4.0]))),
    ("xlog1py", special.xlog1py, sp.xlog1py,
     (np.array([0.0, 0.0, 2.0, 3.0, 1.0]), np.array([-1.0, 3.0, 1e-10, -0.5, np.nan]))),
    ("rel_entr", special.rel_entr, sp.rel_entr,
     (np.array([0.0, 0.0, 1.0, 2.0, -1.0, 1.0, 1.0, 0.3]),
      np.array([0.0, 1.0, 0.0, 3.0, 1.0, -1.0, 1.0 + 1e-7, 0.7]))),
    ("kl_div", special.kl_div, sp.kl_div,
     (np.array([0.0, 0.0, 1.0, 2.0, -1.0, 0.3]), np.array([0.0, 1.0, 0.0, 3.0, 1.0, 0.7]))),
    ("zeta", special.zeta, sp.zeta,
     (np.array([1.5, 2.0, 3.0, 4.5, 10.0, 2.0]), np.array([0.5, 1.0, 2.5, 10.0, 0.1, -1.5]))),
    ("poch", special.poch, sp.poch,
     (np.array([0.5, 2.0, 3.5, 1.0, -2.5]), np.array([2.0, 0.5, 3.0, 0.0, 2.0]))),
    ("boxcox", special.boxcox, sp.boxcox,
     (np.array([0.5, 2.0, 3.5, 1.0, 7.0]), np.array([0.0, 0.5, -1.0, 2.0, 1e-9]))),
    ("boxcox1p", special.boxcox1p, sp.boxcox1p,
     (np.array([1e-9, 2.0, 3.5, 0.0, -0.5]), np.array([0.0, 0.5, -1.0, 2.0, 1e-9]))),
    ("comb", special.comb, sp.comb,
     (np.array([5.0, 10.0, 3.0, 4.5, -1.0]), np.array([2.0, 3.0, 5.0, 2.0, 1.0]))),
]


@pytest.mark.parametrize("name,f,ref,xs", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, f, ref, xs, x64):
    a, b = _args(xs, x64)
    with np.errstate(all="ignore"):
        want = ref(a.astype(np.float64), b.astype(np.float64))
    loose = name in ("betaln", "zeta", "gammainc", "gammaincc") or \
        (not x64 and name in ("beta", "comb", "poch"))
    atol = 1e-14 if name == "rel_entr" and x64 else None
    if not x64 and name in ("betaln", "rel_entr"):   # float32 rounding of huge / near-1 args
        atol = 2e-4 if name == "betaln" else 2e-7
    _check(f(a, b), want, x64, loose, atol)


def test_betainc_against_scipy(x64):
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(0.1, 20, 40), [0.5, 200.0, 1500.0, 1.0]])
    b = np.concatenate([rng.uniform(0.1, 20, 40), [0.5, 300.0, 1000.0, 1.0]])
    x = np.concatenate([rng.uniform(0, 1, 40), [0.0, 0.41, 0.6, 1.0]])
    a, b, x = _args((a, b, x), x64)
    want = sp.betainc(a.astype(np.float64), b.astype(np.float64), x.astype(np.float64))
    got = special.betainc(a, b, x)
    # float32 with a, b in the hundreds: x^a (1-x)^b / B(a, b) is a difference of
    # logs of size ~1e3, so about 1e-4 of it is rounding (as in any float32 form)
    _check(got, want, x64, loose=True, atol=None if x64 else 2e-4)
    _check(got[:40], want[:40], x64, loose=True, atol=None if x64 else 2e-6)
    got = np.asarray(special.betainc(np.array([-1.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0]),
                                     np.array([0.5, -0.1, 1.5])))
    assert np.all(np.isnan(got))


def test_polygamma_and_multigammaln(x64):
    n = np.array([0, 1, 2, 3, 1])
    x, = _args([np.array([0.5, 2.0, 3.5, 10.0, -1.5])], x64)
    _check(special.polygamma(n, x), sp.polygamma(n, x.astype(np.float64)), x64)
    a, = _args([np.array([2.0, 3.3, 10.0])], x64)
    for d in (1, 2, 4):
        _check(special.multigammaln(a, d), sp.multigammaln(a.astype(np.float64), d), x64)


def test_softmax_logsumexp_are_scipys():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(special.softmax(x), sp.softmax(x), rtol=1e-6)
    np.testing.assert_allclose(special.softmax(x, axis=1), sp.softmax(x, axis=1), rtol=1e-6)
    np.testing.assert_allclose(special.log_softmax(x, axis=0), sp.log_softmax(x, axis=0),
                               rtol=1e-6)
    np.testing.assert_allclose(special.logsumexp(x, axis=1, b=2.0),
                               sp.logsumexp(x, axis=1, b=2.0), rtol=1e-6)
    assert special.logsumexp is olympus.nn.logsumexp


def test_dtypes_and_promotion():
    assert special.erf(jnp.arange(3)).dtype == np.float32
    assert special.gammaln(jnp.ones(2, jnp.float16)).dtype == np.float16
    assert special.xlogy(jnp.ones(2, jnp.float32), 2).dtype == np.float32
    assert special.betaln(1, 2.0).dtype == np.float32
    assert special.betainc(1.0, jnp.float32(2.0), 0.5).dtype == np.float32
    olympus.config.update("olympus_enable_x64", True)
    assert special.ndtri(0.3).dtype == np.float64
    assert special.log_ndtr(np.float32(-3.0)).dtype == np.float32


def test_errors():
    with pytest.raises(ValueError, match="`n` to polygamma must be of integer type"):
        special.polygamma(1.0, 2.0)
    with pytest.raises(NotImplementedError, match="Riemann zeta"):
        special.zeta(2.0)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="d argument"):
        olympus.jit(special.multigammaln)(3.0, 2)
    with pytest.raises(TypeError, match="series_order must be a Python integer"):
        special.log_ndtr(1.0, series_order=2.0)
    with pytest.raises(ValueError, match="series_order must be <= 30"):
        special.log_ndtr(1.0, series_order=31)
    for f in (special.gammasgn, special.entr, special.ndtri, special.gamma):
        with pytest.raises(ValueError, match="does not support complex-valued inputs"):
            f(jnp.ones(2, jnp.complex64))
    with pytest.raises(NotImplementedError, match="exact=True"):
        special.factorial(3, exact=True)


# ------------------------------------------------------------------ derivatives

GRADS = [
    ("erf", special.erf, (np.array([-1.5, 0.2, 2.0]),)),
    ("erfc", special.erfc, (np.array([-1.5, 0.2, 2.0]),)),
    ("erfinv", special.erfinv, (np.array([-0.7, 0.1, 0.9]),)),
    ("gammaln", special.gammaln, (np.array([0.3, 2.5, 7.0]),)),
    ("digamma", special.digamma, (np.array([0.3, 2.5, 7.0]),)),
    ("expit", special.expit, (np.array([-3.0, 0.5, 4.0]),)),
    ("logit", special.logit, (np.array([0.1, 0.5, 0.8]),)),
    ("ndtr", special.ndtr, (np.array([-4.0, 0.1, 2.5]),)),
    ("log_ndtr", special.log_ndtr, (np.array([-20.0, -5.0, -0.5, 0.4, 3.0, 9.0]),)),
    ("ndtri", special.ndtri, (np.array([1e-3, 0.1, 0.5, 0.7, 0.999]),)),
    ("i0", special.i0, (np.array([-2.0, 0.3, 5.0]),)),
    ("i1", special.i1, (np.array([-2.0, 0.3, 5.0]),)),
    ("i0e", special.i0e, (np.array([-2.0, 0.3, 5.0]),)),
    ("i1e", special.i1e, (np.array([-2.0, 0.3, 5.0]),)),
    ("entr", special.entr, (np.array([0.2, 1.0, 3.0]),)),
    ("gamma", special.gamma, (np.array([-1.5, 0.7, 4.2]),)),
    ("xlogy", special.xlogy, (np.array([0.5, 2.0, -1.0]), np.array([0.3, 1.5, 4.0]))),
    ("xlog1py", special.xlog1py, (np.array([0.5, 2.0, -1.0]), np.array([-0.3, 1.5, 4.0]))),
    ("rel_entr", special.rel_entr, (np.array([0.5, 2.0, 1.0]), np.array([0.3, 1.5, 4.0]))),
    ("kl_div", special.kl_div, (np.array([0.5, 2.0, 1.0]), np.array([0.3, 1.5, 4.0]))),
    ("betaln", special.betaln,
     (np.array([0.5, 3.0, 15.0, 40.0]), np.array([2.0, 12.0, 3.0, 25.0]))),
    ("beta", special.beta, (np.array([0.5, 3.0]), np.array([2.0, 1.5]))),
    ("gammainc", special.gammainc, (np.array([0.5, 3.0, 8.0]), np.array([0.3, 2.5, 9.0]))),
    ("gammaincc", special.gammaincc, (np.array([0.5, 3.0, 8.0]), np.array([0.3, 2.5, 9.0]))),
    ("zeta", special.zeta, (np.array([1.5, 2.5, 4.0]), np.array([0.5, 1.0, 3.0]))),
    ("polygamma_x", lambda x: special.polygamma(2, x), (np.array([0.5, 2.0, 6.0]),)),
    ("multigammaln", lambda a: special.multigammaln(a, 3), (np.array([2.0, 4.5]),)),
    ("betainc", special.betainc,
     (np.array([0.7, 2.0, 5.0]), np.array([1.5, 3.0, 0.8]), np.array([0.2, 0.5, 0.9]))),
    ("logsumexp", lambda x: special.logsumexp(x, axis=-1), (np.array([[0.5, -1.0, 3.0]]),)),
]


@pytest.mark.parametrize("name,f,args", GRADS, ids=[g[0] for g in GRADS])
def test_grads(name, f, args):
    olympus.config.update("olympus_enable_x64", True)
    # second derivatives of igamma in a have no rule (as in JAX)
    order = 1 if name in ("betainc", "zeta", "gammainc", "gammaincc") else 2
    check_grads(f, args, order=order, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_grads_where_the_naive_formula_fails():
    olympus.config.update("olympus_enable_x64", True)
    # deep in the tail: d log_ndtr(x)/dx ~ -x
    np.testing.assert_allclose(olympus.grad(special.log_ndtr)(-100.0), 100.01, rtol=1e-4)
    # d ndtri(p)/dp = 1/phi(ndtri(p)), near p = 0 where Newton steps would mislead autodiff
    p = 1e-20
    want = 1 / st.norm.pdf(sp.ndtri(p))
    np.testing.assert_allclose(olympus.grad(special.ndtri)(p), want, rtol=1e-8)
    # xlogy at x = 0: d/dx = log y, d/dy = 0
    gx, gy = olympus.grad(special.xlogy, argnums=(0, 1))(0.0, 2.0)
    assert float(gx) == np.log(2.0) and float(gy) == 0.0
    # zeta's derivative in x against central differences of SciPy's zeta
    h = 1e-6
    fd = (sp.zeta(2.5 + h, 1.5) - sp.zeta(2.5 - h, 1.5)) / (2 * h)
    np.testing.assert_allclose(olympus.grad(special.zeta)(2.5, 1.5), fd, rtol=1e-7)
    # betainc in a and b against central differences of SciPy's betainc
    for argnum in (0, 1):
        args = [2.0, 3.0, 0.4]
        up, down = list(args), list(args)
        up[argnum] += h
        down[argnum] -= h
        fd = (sp.betainc(*up) - sp.betainc(*down)) / (2 * h)
        np.testing.assert_allclose(olympus.grad(special.betainc, argnums=argnum)(*args), fd,
                                   rtol=1e-6)


def test_jit_and_vmap_agree():
    x = np.linspace(0.05, 0.95, 7).astype(np.float32)
    for f in (special.ndtri, special.log_ndtr, special.logit, special.entr, special.i1,
              lambda v: special.betaln(v, 2.0), lambda v: special.betainc(2.0, 3.0, v),
              lambda v: special.zeta(v + 1.5, 2.0)):
        eager = np.asarray(f(x))
        np.testing.assert_allclose(olympus.jit(f)(x), eager, rtol=1e-6)
        np.testing.assert_allclose(olympus.vmap(f)(x), eager, rtol=1e-6)
    g = olympus.vmap(olympus.grad(special.ndtri))(x)
    np.testing.assert_allclose(g, 1 / st.norm.pdf(sp.ndtri(x)), rtol=1e-5)


# ------------------------------------------------------------------ distributions

XS = np.linspace(-5, 9, 29)
QS = np.concatenate([np.linspace(0, 1, 11), [1e-12, 1 - 1e-6]])
XU = np.linspace(-0.25, 1.25, 31)
XP = np.linspace(-1, 25, 53)
KS = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 5.0, 12.0])

DISTRIBUTIONS = [
    # module, functions, scipy distribution, points, parameters
    ("norm", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.norm, XS, (1.5, 2.0)),
    ("norm", ["ppf", "isf"], st.norm, QS, (1.5, 2.0)),
    ("t", ["logpdf", "pdf"], st.t, XS, (3.5, 1.0, 2.0)),
    ("beta", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.beta, XU, (2.5, 0.7)),
    ("beta", ["logpdf", "cdf"], st.beta, XU * 4 - 1, (1.5, 3.0, -1.0, 4.0)),
    ("gamma", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.gamma, XP, (2.5, 0.5, 1.5)),
    ("chi2", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.chi2, XP, (3.0,)),
    ("poisson", ["logpmf", "pmf", "cdf"], st.poisson, KS, (3.2,)),
    ("poisson", ["logpmf", "cdf"], st.poisson, KS + 2, (3.2, 2.0)),
    ("bernoulli", ["logpmf", "pmf"], st.bernoulli, np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), (0.3,)),
    ("bernoulli", ["cdf"], st.bernoulli, np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), (0.3,)),
    ("bernoulli", ["ppf"], st.bernoulli, np.array([0.1, 0.5, 0.7, 0.71, 1.0]), (0.3,)),
    ("uniform", ["logpdf", "pdf", "cdf"], st.uniform, XS, (-1.0, 3.0)),
    ("uniform", ["ppf"], st.uniform, QS, (-1.0, 3.0)),
    ("expon", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.expon, XS, (-1.0, 3.0)),
    ("expon", ["ppf"], st.expon, QS, (-1.0, 3.0)),
    ("laplace", ["logpdf", "pdf", "cdf"], st.laplace, XS, (-1.0, 3.0)),
    ("logistic", ["logpdf", "pdf", "cdf", "sf"], st.logistic, XS * 20, (-1.0, 3.0)),
    ("logistic", ["ppf", "isf"], st.logistic, QS, (-1.0, 3.0)),
    ("cauchy", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], st.cauchy, XS * 100,
     (-1.0, 3.0)),
    ("cauchy", ["ppf", "isf"], st.cauchy, QS[1:-3], (-1.0, 3.0)),
]


@pytest.mark.parametrize("dist,fns,ref,xs,params", DISTRIBUTIONS,
                         ids=[f"{d[0]}-{d[1][0]}" for d in DISTRIBUTIONS])
def test_distribution_against_scipy(dist, fns, ref, xs, params, x64):
    module = getattr(stats, dist)
    x, = _args([xs], x64)
    for fn in fns:
        want = getattr(ref, fn)(x.astype(np.float64), *params)
        got = getattr(module, fn)(x, *params)
        loose = dist in ("beta", "cauchy") or fn in ("logsf", "logcdf")
        atol = None if x64 else 1e-6
        try:
            _check(got, want, x64, loose, atol)
        except AssertionError as e:
            raise AssertionError(f"{dist}.{fn}: {e}") from None


def test_distribution_grads_and_transforms():
    olympus.config.update("olympus_enable_x64", True)
    x = np.array([-1.0, 0.5, 2.0])
    check_grads(lambda m, s: stats.norm.logpdf(x, m, s), (0.3, 1.7), order=2)
    check_grads(lambda v: stats.norm.logcdf(v), (np.array([-30.0, -2.0, 3.0]),), order=1)
    check_grads(lambda d: stats.t.logpdf(x, d), (4.5,), order=2)
    check_grads(lambda v, a: stats.gamma.logpdf(v, a), (np.array([0.5, 2.0]), 2.5), order=2)
    check_grads(lambda v: stats.gamma.cdf(v, 2.5), (np.array([0.5, 2.0]),), order=1)
    check_grads(lambda v, a: stats.beta.cdf(v, a, 2.0), (np.array([0.2, 0.7]), 1.5), order=1)
    check_grads(lambda m: stats.poisson.logpmf(3.0, m), (2.5,), order=2)
    check_grads(lambda v: stats.cauchy.logcdf(v), (np.array([-50.0, 0.3]),), order=1)
    f = lambda v: stats.norm.logpdf(v, 1.0, 2.0)   # noqa: E731
    np.testing.assert_allclose(olympus.jit(f)(x), f(x), rtol=1e-14)
    np.testing.assert_allclose(olympus.vmap(lambda q: stats.norm.ppf(q))(np.array([0.1, 0.9])),
                               st.norm.ppf([0.1, 0.9]), rtol=1e-13)


def test_multivariate_normal():
    olympus.config.update("olympus_enable_x64", True)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 3))
    mean = np.array([0.1, -0.2, 0.3])
    var = np.array([1.0, 2.0, 0.5])
    mvn = stats.multivariate_normal
    np.testing.assert_allclose(mvn.logpdf(X, mean, var),
                               st.multivariate_normal.logpdf(X, mean, np.diag(var)), rtol=1e-13)
    np.testing.assert_allclose(mvn.pdf(X, mean, 2.0),
                               st.multivariate_normal.pdf(X, mean, 2.0), rtol=1e-13)
    np.testing.assert_allclose(mvn.logpdf(X[:, 0], 0.3, 2.0),
                               st.multivariate_normal.logpdf(X[:, 0], 0.3, 2.0), rtol=1e-13)
    check_grads(lambda m, v: mvn.logpdf(X, m, v), (mean, var), order=2)
    with pytest.raises(ValueError, match="incompatible shapes"):
        mvn.logpdf(X, mean, np.ones(4))
    with pytest.raises(ValueError, match="incompatible shapes"):
        mvn.logpdf(X, mean, np.eye(4))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        mvn.logpdf(X, mean, var, allow_singular=True)


def _spd(rng, n):
    a = rng.standard_normal((n, n))
    return a @ a.T + 0.5 * np.eye(n)


def test_multivariate_normal_full_covariance(x64):
    rng = np.random.default_rng(7)
    cov = _spd(rng, 4)
    mean = rng.standard_normal(4)
    X = rng.standard_normal((5, 4)) * 2
    dt = np.float64 if x64 else np.float32
    args = [np.asarray(v, dt) for v in (X, mean, cov)]
    mvn = stats.multivariate_normal
    want = st.multivariate_normal.logpdf(X, mean, cov)
    _check(mvn.logpdf(*args), want, x64)
    _check(mvn.pdf(*args), st.multivariate_normal.pdf(X, mean, cov), x64)
    _check(olympus.jit(mvn.logpdf)(*args), want, x64)
    _check(mvn.logpdf(args[0][2], args[1], args[2]), want[2], x64)       # one point
    _check(olympus.vmap(mvn.logpdf, in_axes=(0, None, None))(*args), want, x64)
    # a full cov that is diagonal agrees with the 1-D (diagonal) form
    var = np.abs(mean) + 0.5
    _check(mvn.logpdf(X, mean, np.diag(var)), st.multivariate_normal.logpdf(X, mean, var),
           x64)


def test_multivariate_normal_batched_covariances():
    """Batch axes of cov, mean and x broadcast together, each batch member with
    its own Cholesky factor."""
    olympus.config.update("olympus_enable_x64", True)
    rng = np.random.default_rng(8)
    covs = np.stack([_spd(rng, 3) for _ in range(2)])           # (2, 3, 3)
    means = rng.standard_normal((2, 3))
    X = rng.standard_normal((4, 1, 3))                          # against both members
    got = np.asarray(stats.multivariate_normal.logpdf(X, means, covs))
    assert got.shape == (4, 2)
    for b in range(2):
        np.testing.assert_allclose(got[:, b], st.multivariate_normal.logpdf(X[:, 0], means[b],
                                                                            covs[b]), **F64)


def test_multivariate_normal_full_covariance_grads_and_errors():
    olympus.config.update("olympus_enable_x64", True)
    rng = np.random.default_rng(9)
    cov = _spd(rng, 3)
    mean = rng.standard_normal(3)
    X = rng.standard_normal((4, 3))
    mvn = stats.multivariate_normal
    check_grads(lambda x, m, c: mvn.logpdf(x, m, c), (X, mean, cov), order=2,
                modes=("fwd", "rev"))
    # d logpdf / d mean = cov^-1 (x - mean), summed over the points
    g = olympus.grad(lambda m: jnp.sum(mvn.logpdf(X, m, cov)))(mean)
    np.testing.assert_allclose(g, np.linalg.solve(cov, (X - mean).sum(0)), rtol=1e-12)
    not_pd = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert np.isnan(np.asarray(mvn.logpdf(X, mean, not_pd))).all()
    with pytest.raises(ValueError, match="incompatible shapes"):
        mvn.logpdf(X, mean, np.ones((3, 4)))


# ------------------------------------------------------------------ integrate

def test_trapezoid(x64):
    rng = np.random.default_rng(3)
    y, xs = _args([rng.standard_normal((4, 7)), np.sort(rng.uniform(0, 3, 7))], x64)
    x2d, = _args([np.sort(rng.uniform(0, 3, (4, 7)), axis=0)], x64)
    y64 = y.astype(np.float64)
    tol = dict(rtol=1e-13) if x64 else dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(integrate.trapezoid(y), si.trapezoid(y64), **tol)
    np.testing.assert_allclose(integrate.trapezoid(y, dx=0.25), si.trapezoid(y64, dx=0.25),
                               **tol)
    np.testing.assert_allclose(integrate.trapezoid(y, xs), si.trapezoid(y64, xs), **tol)
    np.testing.assert_allclose(integrate.trapezoid(y, axis=0), si.trapezoid(y64, axis=0), **tol)
    np.testing.assert_allclose(integrate.trapezoid(y, x2d, axis=0),
                               si.trapezoid(y64, x2d.astype(np.float64), axis=0), **tol)
    assert integrate.trapezoid(y).dtype == (np.float64 if x64 else np.float32)
    assert float(integrate.trapezoid(jnp.ones((1,)))) == 0.0
    assert integrate.trapezoid(jnp.arange(4)).dtype == (np.float64 if x64 else np.float32)
    with pytest.raises(ValueError, match="samples along the axis"):
        integrate.trapezoid(y, xs[:5])


def test_trapezoid_grads_and_jit():
    olympus.config.update("olympus_enable_x64", True)
    y, x = np.array([0.5, 1.0, -2.0, 3.0]), np.array([0.0, 0.5, 1.5, 2.0])
    check_grads(integrate.trapezoid, (y, x), order=2)
    np.testing.assert_allclose(olympus.jit(integrate.trapezoid)(y, x), si.trapezoid(y, x),
                               rtol=1e-14)

"""olympus.scipy.special: SciPy's special functions on olympus arrays (as
`jax.scipy.special`): thin layers over the lax rows (erf, lgamma, digamma,
igamma, polygamma, zeta, bessel_i0e/i1e, logistic) plus the normal
distribution functions, betaln / betainc and the entropy family in Python.

Arguments are promoted together to an inexact dtype (ints and bools to the
default float). Derivatives: by the lax rows' rules, or by custom JVPs where
the formula's own derivative would be wasteful or lose accuracy (logit, xlogy,
xlog1py, log_ndtr, ndtri, betainc, zeta in its first argument).

How the functions without a lax row are computed:
- ndtr(x) = erfc(-x / sqrt 2) / 2 (accurate in both tails).
- log_ndtr: log1p(-ndtr(-x)) for x > -1, log(ndtr(x)) down to where erfc would
  underflow (x = -30 in float64, -12 in float32), then the asymptotic series
  -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - ...).
- ndtri: sqrt 2 * erf_inv(2p - 1) where 2p - 1 is exact (0.25 <= p <= 0.75);
  in the tails three Newton steps on log_ndtr(x) = log(min(p, 1 - p)) from
  erf_inv's value (tail mass >= 1e-5) or the asymptotic root of
  x^2 = -2 log q - log(2 pi x^2). Newton on the concave log_ndtr converges
  from either side.
- betaln: lgamma sums for small arguments; Stirling's series with its
  correction terms once an argument reaches 10, arranged as log1p so that
  nothing cancels for large a + b.
- betainc: the continued fraction for I_x(a, b) (modified Lentz, a fixed
  number of steps in one fori_loop), on the side of (a+1)/(a+b+2) where it
  converges fast.
- zeta's derivative in x: the Euler-Maclaurin expansion of the Hurwitz zeta,
  differentiated.
"""
import math
import operator
from fractions import Fraction

import numpy as np

import olympus
from olympus import lax
from olympus import numpy as jnp
from olympus._src import dtypes as _dt
from olympus._src.ad import custom_jvp
from olympus._src.jnp import _promote
from olympus.nn import log_softmax as _nn_log_softmax
from olympus.nn import logsumexp
from olympus.nn import softmax as _nn_softmax

__all__ = [
    "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "digamma", "entr", "erf", "erfc",
    "erfinv", "expit", "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn",
    "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "poch", "polygamma", "rel_entr", "softmax", "xlog1py",
    "xlogy", "zeta",
]


def _inexact(*xs):
    """The arguments promoted to one inexact dtype and broadcast together."""
    return _promote(*xs, to_inexact=True)


def _dtype(x):
    return np.dtype(_dt.dtype_and_weak(x)[0])


def _real_only(name, x):
    if np.issubdtype(_dtype(x), np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# ------------------------------------------------------------------ gamma family

def gammaln(x):
    """log|Gamma(x)|."""
    x, = _inexact(x)
    return lax.lgamma(x)


def digamma(x):
    """d/dx log Gamma(x)."""
    x, = _inexact(x)
    return lax.digamma(x)


def gammasgn(x):
    """The sign of Gamma(x): 1 for x > 0 and +0, -1 for -0 and where floor(x) is
    odd below zero, nan at the poles (negative integers) and for nan."""
    x, = _inexact(x)
    _real_only("gammasgn", x)
    fl = jnp.floor(x)
    neg = x < 0
    minus = (neg & (jnp.remainder(fl, 2) != 0)) | ((x == 0) & jnp.signbit(x))
    out = jnp.where(minus, -1.0, 1.0)
    return jnp.where((neg & (x == fl)) | jnp.isnan(x), np.nan, out)


def gamma(x):
    """Gamma(x) = gammasgn(x) * exp(lgamma(x))."""
    x, = _inexact(x)
    _real_only("gamma", x)
    return gammasgn(x) * jnp.exp(lax.lgamma(x))


def factorial(n, exact=False):
    """n! = Gamma(n + 1) as a float (0 for n < 0); exact=True is not supported."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n, = _inexact(n)
    return jnp.where(n < 0, 0, jnp.exp(lax.lgamma(n + 1)))


def comb(N, k, *, repetition=False):
    """The binomial coefficient N choose k as a float (0 outside 0 <= k <= N)."""
    N, k = _inexact(N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    ok = (k <= N) & (N >= 0) & (k >= 0)
    sN, sk = jnp.where(ok, N, 0.0), jnp.where(ok, k, 0.0)
    out = jnp.exp(lax.lgamma(sN + 1) - lax.lgamma(sk + 1) - lax.lgamma(sN + 1 - sk))
    return jnp.where(ok, out, 0.0)


def poch(z, m):
    """The rising factorial (z)_m = Gamma(z + m) / Gamma(z), with its sign."""
    z, m = _inexact(z, m)
    _real_only("poch", z)
    return gammasgn(z + m) * gammasgn(z) * jnp.exp(lax.lgamma(z + m) - lax.lgamma(z))


def boxcox(x, lmbda):
    """The Box-Cox transform: (x^lmbda - 1) / lmbda, log(x) at lmbda = 0."""
    x, lmbda = _inexact(x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, 1.0, lmbda)
    return jnp.where(zero, jnp.log(x), jnp.expm1(safe * jnp.log(x)) / safe)


def boxcox1p(x, lmbda):
    """boxcox(1 + x, lmbda), accurate for small x."""
    x, lmbda = _inexact(x, lmbda)
    zero = lmbda == 0
    safe = jnp.where(zero, 1.0, lmbda)
    return jnp.where(zero, jnp.log1p(x), jnp.expm1(safe * jnp.log1p(x)) / safe)


# Stirling's series for log Gamma(x) - [(x - 1/2) log x - x + log(2 pi)/2]:
# B_2k / (2k (2k - 1) x^(2k-1)), k = 1..8 (enough for float64 at x >= 10).
def _stirling_coefficients(n):
    b = [Fraction(1)]
    for m in range(1, 2 * n + 1):   # Bernoulli numbers B_0..B_2n
        b.append(-sum(Fraction(math.comb(m + 1, j)) * b[j] for j in range(m)) / (m + 1))
    return [float(b[2 * k] / (2 * k * (2 * k - 1))) for k in range(1, n + 1)]


_STIRLING = _stirling_coefficients(8)


def _stirling_correction(x):
    """log Gamma(x) minus its Stirling approximation, for x >= 10."""
    r = 1.0 / x
    r2 = r * r
    acc = _STIRLING[-1]
    for c in reversed(_STIRLING[:-1]):
        acc = acc * r2 + c
    return acc * r


def betaln(a, b):
    """log|B(a, b)| = log|Gamma(a) Gamma(b) / Gamma(a + b)|, accurate when a + b is
    large (see the module doc)."""
    a, b = _inexact(a, b)
    _real_only("betaln", a)
    small, big = jnp.minimum(a, b), jnp.maximum(a, b)
    both_big = small >= 10
    one_big = (big >= 10) & ~both_big
    # Each branch sees safe arguments, so the branches not taken stay finite
    # (and so do their derivatives).
    s2, b2 = jnp.where(both_big, small, 10.0), jnp.where(both_big, big, 10.0)
    stirling_both = (_LOG_SQRT_2PI - 0.5 * jnp.log(b2) - (s2 - 0.5) * jnp.log1p(b2 / s2)
                     - b2 * jnp.log1p(s2 / b2) + _stirling_correction(s2)
                     + _stirling_correction(b2) - _stirling_correction(s2 + b2))
    s1 = jnp.where(one_big, small, 1.0)
    b1 = jnp.where(one_big, big, 10.0)
    stirling_one = (lax.lgamma(s1) - (b1 - 0.5) * jnp.log1p(s1 / b1) - s1 * jnp.log(s1 + b1)
                    + s1 + _stirling_correction(b1) - _stirling_correction(s1 + b1))
    direct = lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)
    return jnp.where(both_big, stirling_both, jnp.where(one_big, stirling_one, direct))


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), with its sign."""
    a, b = _inexact(a, b)
    _real_only("beta", a)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * jnp.exp(betaln(a, b))


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    a, x = _inexact(a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = _inexact(a, x)
    return lax.igammac(a, x)


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension d (a static int):
    sum_j lgamma(a - j/2) + d (d - 1)/4 log(pi)."""
    try:
        d = operator.index(d)
    except TypeError:
        raise olympus.errors.ConcretizationTypeError(
            "multigammaln: the d argument must be a concrete int, got "
            f"{type(d).__name__}") from None
    a, = _inexact(a)
    out = sum(lax.lgamma(a - j / 2) for j in range(d)) if d else jnp.zeros_like(a)
    return out + 0.25 * d * (d - 1) * math.log(math.pi)


def polygamma(n, x):
    """The n-th derivative of digamma at x; n must have an integer dtype (as in JAX)."""
    ndt = _dt.dtype_and_weak(n)[0]
    if not np.issubdtype(ndt, np.integer):
        raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype {ndt}.")
    n, x = _inexact(n, x)
    _real_only("polygamma", x)
    return lax.polygamma(n, x)


# ------------------------------------------------------------------ zeta

def _bernoulli_even(m):
    """B_2, B_4, ..., B_2m / (2j)! as floats."""
    b = [Fraction(1)]
    for k in range(1, 2 * m + 1):
        b.append(-sum(Fraction(math.comb(k + 1, j)) * b[j] for j in range(k)) / (k + 1))
    return [float(b[2 * j] / math.factorial(2 * j)) for j in range(1, m + 1)]


_ZETA_N = 12
_ZETA_B = _bernoulli_even(10)


def _zeta_euler_maclaurin(s, q):
    """Hurwitz zeta(s, q) by Euler-Maclaurin summation (N direct terms, then the
    integral, the half term and the Bernoulli corrections)."""
    n = _ZETA_N
    total = sum((q + k) ** -s for k in range(n))
    qn = q + n
    total = total + qn ** (1 - s) / (s - 1) + 0.5 * qn ** -s
    rising = s          # s (s+1) ... (s + 2j - 2)
    power = qn ** (-s - 1)
    for j, c in enumerate(_ZETA_B, start=1):
        total = total + c * rising * power
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
        power = power / (qn * qn)
    return total


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


def _zeta_jvp(primals, tangents):
    x, q = primals
    tx, tq = tangents
    out = _zeta(x, q)
    _, dx = olympus.jvp(lambda s: _zeta_euler_maclaurin(s, q), (x,), (tx,))
    return out, dx - x * _zeta(x + 1, q) * tq


_zeta.defjvp(_zeta_jvp)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (k + q)^-x (x > 1); q=None (the Riemann
    zeta) is not implemented, as in JAX."""
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = _inexact(x, q)
    return _zeta(x, q)


# ------------------------------------------------------------------ error function family

def erf(x):
    """The error function."""
    x, = _inexact(x)
    return lax.erf(x)


def erfc(x):
    """1 - erf(x), accurate where erf(x) is near 1."""
    x, = _inexact(x)
    return lax.erfc(x)


def erfinv(x):
    """The inverse of erf on (-1, 1) (+-inf at +-1, nan outside)."""
    x, = _inexact(x)
    return lax.erf_inv(x)


def ndtr(x):
    """The standard normal CDF: erfc(-x / sqrt 2) / 2."""
    x, = _inexact(x)
    return 0.5 * lax.erfc(-x * math.sqrt(0.5))


def _norm_logpdf(x):
    return -0.5 * x * x - _LOG_SQRT_2PI


def _log_ndtr_impl(x):
    lower = -30.0 if _dtype(x) == np.float64 else -12.0
    upper_x = jnp.maximum(x, -1.0)
    upper = jnp.log1p(-0.5 * lax.erfc(upper_x * math.sqrt(0.5)))
    mid_x = jnp.clip(x, lower, -1.0)
    mid = jnp.log(0.5 * lax.erfc(-mid_x * math.sqrt(0.5)))
    low_x = jnp.minimum(x, lower)
    inv2 = 1.0 / (low_x * low_x)
    series, term = 1.0, 1.0
    for n in range(1, 9):     # 1 - 1/x^2 + 3/x^4 - 15/x^6 + ...
        term = term * -(2 * n - 1) * inv2
        series = series + term
    low = _norm_logpdf(low_x) - jnp.log(-low_x) + jnp.log(series)
    return jnp.where(x > -1.0, upper, jnp.where(x > lower, mid, low))


@custom_jvp
def _log_ndtr(x):
    return _log_ndtr_impl(x)


_log_ndtr.defjvps(lambda t, ans, x: t * jnp.exp(_norm_logpdf(x) - ans))


def log_ndtr(x, series_order=3):
    """log(ndtr(x)), accurate far into both tails. series_order is accepted for
    JAX's signature (the tail series here is fixed at eight terms)."""
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x, = _inexact(x)
    _real_only("log_ndtr", x)
    return _log_ndtr(x)


def _ndtri_impl(p):
    central = math.sqrt(2.0) * lax.erf_inv(2 * jnp.clip(p, 0.25, 0.75) - 1)
    q = jnp.where(p > 0.5, 1 - p, p)
    q = jnp.where((q > 0) & (q < 0.25), q, 0.125)   # a safe stand-in off the tail
    log_q = jnp.log(q)
    from_erf = math.sqrt(2.0) * lax.erf_inv(2 * q - 1)
    t2 = -2 * log_q
    asymptotic = -jnp.sqrt(jnp.maximum(t2 - jnp.log(t2) - math.log(2 * math.pi), 1.0))
    x = jnp.where(q >= 1e-5, from_erf, asymptotic)
    for _ in range(3):
        lc = _log_ndtr_impl(x)
        x = x - (lc - log_q) * jnp.exp(lc - _norm_logpdf(x))
    tail = jnp.where(p > 0.5, -x, x)
    out = jnp.where((p >= 0.25) & (p <= 0.75), central, tail)
    out = jnp.where(p == 0, -np.inf, jnp.where(p == 1, np.inf, out))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(p), np.nan, out)


@custom_jvp
def _ndtri(p):
    return _ndtri_impl(p)


_ndtri.defjvps(lambda t, ans, p: t * jnp.exp(-_norm_logpdf(ans)))


def ndtri(p):
    """The inverse of ndtr: the x with ndtr(x) = p (-inf at 0, inf at 1, nan
    outside [0, 1])."""
    p, = _inexact(p)
    _real_only("ndtri", p)
    return _ndtri(p)


# ------------------------------------------------------------------ Bessel

def i0e(x):
    """exp(-|x|) I0(x)."""
    x, = _inexact(x)
    return lax.bessel_i0e(x)


def i0(x):
    """The modified Bessel function I0(x)."""
    x, = _inexact(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def i1e(x):
    """exp(-|x|) I1(x)."""
    x, = _inexact(x)
    return lax.bessel_i1e(x)


def i1(x):
    """The modified Bessel function I1(x)."""
    x, = _inexact(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


# ------------------------------------------------------------------ logistic, entropy

def expit(x):
    """1 / (1 + exp(-x))."""
    x, = _inexact(x)
    return lax.logistic(x)


@custom_jvp
def _logit(x):
    return jnp.log(x / (1 - x))


_logit.defjvps(lambda t, ans, x: t / (x * (1 - x)))


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    x, = _inexact(x)
    return _logit(x)


@custom_jvp
def _xlogy(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * jnp.log(y), 0)


def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), tx * jnp.log(y) + ty * x / y


_xlogy.defjvp(_xlogy_jvp)


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is nan)."""
    x, y = _inexact(x, y)
    return _xlogy(x, y)


@custom_jvp
def _xlog1py(x, y):
    return jnp.where((x != 0) | jnp.isnan(y), x * jnp.log1p(y), 0)


def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), tx * jnp.log1p(y) + ty * x / (1 + y)


_xlog1py.defjvp(_xlog1py_jvp)


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is nan)."""
    x, y = _inexact(x, y)
    return _xlog1py(x, y)


@custom_jvp
def _xlogx(x):
    return _xlogy(x, x)


_xlogx.defjvps(lambda t, ans, x: t * (jnp.log(x) + 1))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    x, = _inexact(x)
    _real_only("entr", x)
    return jnp.where(x < 0, -np.inf, -_xlogx(x))


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 for p == 0 <= q; inf otherwise."""
    p, q = _inexact(p, q)
    _real_only("rel_entr", p)
    both = (p > 0) & (q > 0)
    sp, sq = jnp.where(both, p, 1.0), jnp.where(both, q, 1.0)
    ratio = sp / sq
    # log(p / q) keeps p ~ q exact; where the ratio over- or underflows, log p - log q.
    fine = (ratio > 0) & jnp.isfinite(ratio)
    value = jnp.where(fine, sp * jnp.log(jnp.where(fine, ratio, 1.0)),
                      _xlogx(sp) - _xlogy(sp, sq))
    return jnp.where(both, value, jnp.where((p == 0) & (q >= 0), 0.0, np.inf))


def kl_div(p, q):
    """p log(p / q) - p + q for p, q > 0; q for p == 0 <= q; inf otherwise."""
    p, q = _inexact(p, q)
    _real_only("kl_div", p)
    return rel_entr(p, q) - p + q


def softmax(x, /, *, axis=None):
    """exp(x) / sum(exp(x)) over axis (None: all axes), as SciPy."""
    return _nn_softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    """x - logsumexp(x) over axis (None: all axes), as SciPy."""
    return _nn_log_softmax(x, axis=axis)


# ------------------------------------------------------------------ betainc

_TINY = {np.dtype(np.float32): 1e-30, np.dtype(np.float64): 1e-300}


def _betainc_cf(a, b, x, steps):
    """The continued fraction of I_x(a, b) times a x^-a (1-x)^-b B(a, b), by
    modified Lentz (two partial numerators per step)."""
    tiny = _TINY.get(_dtype(x), 1e-30)

    def guard(v):
        return jnp.where(jnp.abs(v) < tiny, tiny, v)

    def step(m, state):
        h, c, d = state
        m = m.astype(_dtype(x)) + 1
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 / guard(1 + num * d)
            c = guard(1 + num / c)
            h = h * d * c
        return h, c, d
    d0 = 1 / guard(1 - (a + b) * x / (a + 1))
    h, _, _ = lax.fori_loop(0, steps, step, (d0, jnp.ones_like(x), d0))
    return h


def _betainc_impl(a, b, x):
    steps = 300 if _dtype(x) == np.float64 else 120
    inside = (x > 0) & (x < 1)
    xs = jnp.where(inside, x, 0.5)
    flip = xs > (a + 1) / (a + b + 2)
    aa, bb, xx = jnp.where(flip, b, a), jnp.where(flip, a, b), jnp.where(flip, 1 - xs, xs)
    log_front = aa * jnp.log(xx) + bb * jnp.log1p(-xx) - betaln(aa, bb)
    head = jnp.exp(log_front) * _betainc_cf(aa, bb, xx, steps) / aa
    value = jnp.where(flip, 1 - head, head)
    value = jnp.where(x <= 0, 0.0, jnp.where(x >= 1, 1.0, value))
    bad = (a <= 0) | (b <= 0) | (x < 0) | (x > 1) | jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(x)
    return jnp.where(bad, np.nan, value)


@custom_jvp
def _betainc(a, b, x):
    return _betainc_impl(a, b, x)


def _betainc_jvp(primals, tangents):
    (a, b, x), (ta, tb, tx) = primals, tangents
    out = _betainc(a, b, x)
    # d/dx is the beta density; d/da and d/db differentiate the continued fraction.
    _, dab = olympus.jvp(lambda a_, b_: _betainc_impl(a_, b_, x), (a, b), (ta, tb))
    xs = jnp.clip(x, 0.0, 1.0)
    density = jnp.exp(xlogy(a - 1, xs) + xlog1py(b - 1, -xs) - betaln(a, b))
    return out, dab + density * tx


_betainc.defjvp(_betainc_jvp)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (a, b > 0, 0 <= x <= 1)."""
    a, b, x = _inexact(a, b, x)
    _real_only("betainc", x)
    return _betainc(a, b, x)

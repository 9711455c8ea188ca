"""1-D convolution and NumPy's polynomial functions (coefficients highest power
first), built from lax ops so they work eagerly, under jit, vmap and grad.

convolve/correlate lower to ONE dot_general against a Toeplitz matrix made
without gather: the zero-padded signal broadcast to m rows, flattened, cut
short by m elements and reshaped, so that row j is the signal shifted by j
(t[j, k] = x[k - j]). That costs m * (n + m) memory for lengths n >= m (the
flop count of a direct convolution); there is no FFT path.

polyfit, roots and poly of a square matrix are JAX's algorithms on
olympus.numpy.linalg (lstsq, eigvals), imported when they run: olympus.numpy
imports this module before its linalg, which imports olympus.numpy.
"""
import builtins
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt
from olympus._src import jnp as _jnp

__all__ = ["convolve", "correlate", "polyval", "polyadd", "polysub", "polymul",
           "polyder", "polyint", "poly", "polydiv", "polyfit", "roots"]

_MODES = ("full", "same", "valid")


# ------------------------------------------------------------------ convolution

def _vector(who, name, x):
    x = _jnp._arr(x)
    if x.ndim == 0:
        x = lax.reshape(x, (1,))
    if x.ndim != 1:
        raise ValueError(f"{who}: {name} must be 1-D, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{who}: {name} cannot be empty")
    return x


def _operands(who, a, v, mode, preferred_element_type):
    """a and v as 1-D arrays of the dtype to compute in, and the result dtype."""
    if mode not in _MODES:
        raise ValueError(f"{who}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    a, v = _vector(who, "a", a), _vector(who, "v", v)
    dt, weak = _dt.result_type(a, v, return_weak=True)
    out = dt
    if preferred_element_type is not None:
        out = _dt.canonicalize(preferred_element_type)
        if _dt.result_type(dt, out) == out:   # compute in it when it holds the operands
            dt, weak = out, False
    return _jnp._convert(a, dt, weak), _jnp._convert(v, dt, weak), out


def _convolve_full(x, w, mode, precision):
    """NumPy's convolve of x (length n) and w (length m <= n) in mode."""
    n, m = x.shape[0], w.shape[0]
    width = n + m
    xp = lax.pad(x, np.zeros((), x.dtype)[()], [(0, m, 0)])
    # rows of the padded signal, flattened and cut by m: row j starts j places
    # earlier, so t[j, k] = xp[(k - j) mod (n + m)] = x[k - j], 0 outside [0, n)
    t = lax.broadcast_in_dim(xp, (m, width), (1,))
    t = lax.reshape(t, (m * width,))
    t = lax.slice(t, (0,), (m * (width - 1),))
    t = lax.reshape(t, (m, width - 1))
    y = lax.dot_general(w, t, (((0,), (0,)), ((), ())), precision=precision)
    if mode == "same":
        start = (m - 1) // 2
        return lax.slice(y, (start,), (start + n,))
    if mode == "valid":
        return lax.slice(y, (m - 1,), (n,))
    return y


def _finish(y, out):
    return y if np.dtype(y.dtype) == out else lax.convert_element_type(y, out)


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """NumPy's convolve: the discrete linear convolution of 1-D a and v
    (mode 'full': length n + m - 1; 'same': max(n, m); 'valid': max - min + 1;
    the longer operand is the signal, as in NumPy). One dot_general."""
    a, v, out = _operands("convolve", a, v, mode, preferred_element_type)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    return _finish(_convolve_full(a, v, mode, precision), out)


def _conj(x):
    return lax.conj(x) if _dt.dtype_and_weak(x)[0].kind == "c" else x


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """NumPy's correlate: c[k] = sum_n a[n + k] * conj(v[n]) of 1-D a and v
    (default mode 'valid'). When v is longer than a, NumPy's answer is the
    reversed conjugate of correlate(v, a), and so is this."""
    a, v, out = _operands("correlate", a, v, mode, preferred_element_type)
    if v.shape[0] > a.shape[0]:
        y = _convolve_full(v, lax.rev(_conj(a), (0,)), mode, precision)
        return _finish(_conj(lax.rev(y, (0,))), out)
    return _finish(_convolve_full(a, lax.rev(_conj(v), (0,)), mode, precision), out)


# ------------------------------------------------------------------ polynomials

def _coeffs(who, p):
    p = _jnp._arr(p)
    if p.ndim == 0:
        p = lax.reshape(p, (1,))
    if p.ndim != 1:
        raise ValueError(f"{who}: coefficients must be 1-D (highest power first), got "
                         f"shape {tuple(p.shape)}")
    return p


def polyval(p, x):
    """p[0] * x**(n-1) + ... + p[n-1] at x (Horner's rule, unrolled over the
    static number of coefficients); an empty p gives zeros."""
    p = _coeffs("polyval", p)
    x = _jnp._arr(x)
    dt, weak = _dt.result_type(p, x, return_weak=True)
    p, x = _jnp._convert(p, dt, weak), _jnp._convert(x, dt, weak)
    y = _jnp.zeros_like(x)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def _pad_front(p, n):
    k = n - p.shape[0]
    return p if k == 0 else lax.pad(p, np.zeros((), p.dtype)[()], [(k, 0, 0)])


def _aligned(who, a1, a2):
    a1, a2 = _coeffs(who, a1), _coeffs(who, a2)
    a1, a2 = _jnp._promote(a1, a2, broadcast=False)
    n = builtins.max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n), _pad_front(a2, n)


def polyadd(a1, a2):
    """The sum of two polynomials (the shorter padded with leading zeros)."""
    a1, a2 = _aligned("polyadd", a1, a2)
    return _jnp.add(a1, a2)


def polysub(a1, a2):
    """The difference a1 - a2 of two polynomials."""
    a1, a2 = _aligned("polysub", a1, a2)
    return _jnp.subtract(a1, a2)


def _trim_front(who, p):
    """p without leading zeros (one zero kept if all are), for concrete p."""
    if _core.is_tracer(p):
        raise _core.ConcretizationTypeError(
            f"Abstract tracer value encountered where concrete value is expected: "
            f"{who}(trim_leading_zeros=True) needs concrete inputs (the result's length "
            f"depends on their values)")
    nz = np.flatnonzero(np.asarray(p))
    return p[int(nz[0]):] if nz.size else p[-1:]


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials: their full convolution. NumPy drops
    the inputs' leading zeros first; trim_leading_zeros=True does too (eager
    only: the length then depends on the values)."""
    a1, a2 = _coeffs("polymul", a1), _coeffs("polymul", a2)
    if trim_leading_zeros:
        a1, a2 = _trim_front("polymul", a1), _trim_front("polymul", a2)
    return convolve(a1, a2)


def polyder(p, m=1):
    """The m-th derivative of the polynomial p (m a static int >= 0)."""
    m = operator.index(m)
    if m < 0:
        raise ValueError(f"polyder: the order of derivative m must be >= 0, got {m}")
    p = _coeffs("polyder", p)
    for _ in range(m):   # an empty result once the degree is used up, as in NumPy
        p = p[:-1] * _core.asarray(np.arange(p.shape[0] - 1, 0, -1))
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative of p; k holds the m integration constants
    (None: zeros; a scalar: the same constant each time)."""
    m = operator.index(m)
    if m < 0:
        raise ValueError(f"polyint: the order of integral m must be >= 0, got {m}")
    p = _coeffs("polyint", p)
    if k is None:
        k = [0] * m
    elif np.ndim(k) == 0:
        k = [k] * m
    else:
        k = [k[i] for i in range(len(k))]
        if len(k) != m:
            raise ValueError(f"polyint: k must hold m = {m} integration constants, got "
                             f"{len(k)}")
    if m == 0:
        return p
    dt = _dt.to_inexact(_dt.result_type(p, *k))
    p = _jnp._convert(p, dt)
    for i in range(m):
        n = p.shape[0]
        p = _jnp.true_divide(p, _core.asarray(np.arange(n, 0, -1), dtype=dt))
        p = lax.concatenate([p, lax.reshape(_jnp._convert(_jnp._arr(k[i]), dt), (1,))], 0)
    return p


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots: the
    product of (x - r), one convolution per root; of a square matrix, its
    characteristic polynomial (the roots are its eigenvalues). Integer roots
    give the default float. Unlike NumPy, complex roots give complex
    coefficients even when they come in conjugate pairs (the dtype may not
    depend on values), so a matrix always gives complex coefficients."""
    z = _jnp._arr(seq_of_zeros)
    if z.ndim == 0:
        z = lax.reshape(z, (1,))
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = _jnp_full().linalg.eigvals(z)   # the characteristic polynomial (complex, as JAX)
    if z.ndim != 1:
        raise ValueError(f"poly: input must be 1-D or a square 2-D array, got shape "
                         f"{tuple(z.shape)}")
    dt = _dt.to_inexact(_dt.dtype_and_weak(z)[0])
    z = _jnp._convert(z, dt)
    one = _core.asarray(np.ones((1,), dt), dtype=dt)
    if z.shape[0] == 0:
        return lax.reshape(one, ())          # NumPy's 1.0 for no roots
    a = one
    for i in range(z.shape[0]):
        a = convolve(a, lax.concatenate([one, lax.reshape(-z[i], (1,))], 0))
    return a


def polydiv(u, v, *, trim_leading_zeros=False):
    """(q, r): quotient and remainder of u / v by long division (inexact
    dtype). r keeps len(u) entries, the first len(u) - len(v) + 1 of them zero,
    so that the shape does not depend on values; trim_leading_zeros=True drops
    leading entries within 1e-8 of zero as NumPy does (eager only)."""
    u = _coeffs("polydiv", u)
    v = _coeffs("polydiv", v)
    dt = _dt.to_inexact(_dt.result_type(u, v))
    u, v = _jnp._convert(u, dt), _jnp._convert(v, dt)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = _jnp.true_divide(1, v[0])
    r = u
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        # r[k:k + n + 1] -= d * v, with v shifted into place by padding
        r = r - lax.pad(d * v, np.zeros((), dt)[()], [(k, m - n - k, 0)])
    if q:
        q = _jnp.stack(q)
        r = lax.pad(r[m - n + 1:], np.zeros((), dt)[()], [(m - n + 1, 0, 0)])
    else:
        q = _jnp.zeros((1,), dt)
    if trim_leading_zeros:
        if _core.is_tracer(r):
            raise _core.ConcretizationTypeError(
                "Abstract tracer value encountered where concrete value is expected: "
                "polydiv(trim_leading_zeros=True) needs concrete inputs (the remainder's "
                "length depends on its values)")
        rv = np.asarray(r)
        lead = 0
        while lead < rv.shape[0] - 1 and np.abs(rv[lead]) <= 1e-8:
            lead += 1
        r = r[lead:]
    return q, r


# ------------------------------------------------------------------ fitting and roots

def _jnp_full():
    """olympus.numpy with its linalg, imported when first needed (see the module
    doc)."""
    from olympus import numpy as jnp
    return jnp


def _complex_dtype(dt):
    return np.result_type(dt, np.complex64)


def _concrete(who, name, v, kind):
    if _core.is_tracer(v):
        raise _core.ConcretizationTypeError(
            f"Abstract tracer value encountered where concrete value is expected: "
            f"{who}: {name} must be a concrete {kind.__name__}")
    return kind(v)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree deg through (x, y), highest power
    first (NumPy's polyfit, JAX's algorithm): the Vandermonde matrix of x,
    rows times w, columns scaled to unit norm, solved by lstsq (SVD; singular
    values below rcond * largest dropped, rcond default len(x) * eps). y may be
    2-D (one fit per column). full=True also returns (residuals, rank,
    singular values, rcond); cov=True the coefficients' covariance matrix
    (scaled by residuals / (len(x) - deg - 1) unless cov='unscaled').
    Computes in x's and y's promoted inexact dtype; deg and rcond must be
    concrete. Differs from NumPy: residuals are returned even when the fit is
    rank deficient (as JAX), and there is no RankWarning. Differs from JAX:
    with a 2-D y each column's covariance is scaled by its own residual, as
    NumPy does (JAX scales all by the first column's)."""
    deg = _concrete("polyfit", "deg", deg, int)
    x, y = _jnp._promote(x, y, to_inexact=True, broadcast=False)
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.shape[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(_dt.real_dtype(_dt.dtype_and_weak(x)[0])).eps)
    rcond = _concrete("polyfit", "rcond", rcond, float)
    jnp = _jnp_full()
    lhs = jnp.vander(x, order)
    rhs = y
    if w is not None:
        w, = _jnp._promote(w, to_inexact=True, broadcast=False)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = jnp.sqrt(jnp.sum(lhs * jnp.conj(lhs), axis=0).real).astype(lhs.dtype)
    lhs = lhs / scale[None, :]      # unit columns: a better conditioned system
    c, resids, rank, s = jnp.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, jnp.asarray(rcond)
    if not cov:
        return c
    vbase = jnp.linalg.inv(jnp.matmul(lhs.T, lhs)) / jnp.outer(scale, scale)
    if cov == "unscaled":
        fac = 1
    else:
        if x.shape[0] <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")
        fac = resids / (x.shape[0] - order)   # one factor per column of y, as NumPy
    if y.ndim == 1:
        return c, vbase * fac
    return c, vbase[:, :, None] * fac


def _roots_no_zeros(p):
    """The eigenvalues of p's companion matrix (p[0] != 0)."""
    jnp = _jnp_full()
    n = p.shape[0]
    if n < 2:
        return jnp.zeros((0,), _complex_dtype(_dt.dtype_and_weak(p)[0]))
    a = jnp.diag(jnp.ones((n - 2,), p.dtype), -1)
    a = a.at[0, :].set(-p[1:] / p[0])
    return jnp.linalg.eigvals(a)


def roots(p, *, strip_zeros=True):
    """The roots of the polynomial p (highest power first): the eigenvalues of
    its companion matrix, complex (as JAX; NumPy returns reals when all are).
    strip_zeros=True drops p's leading zeros first, which needs concrete p (the
    number of roots depends on them); strip_zeros=False keeps the length
    len(p) - 1 and gives nan for the roots the leading zeros take away (it works
    under jit). Trailing zeros give roots at 0. The order is LAPACK's."""
    p, = _jnp._promote(p, to_inexact=True, broadcast=False)
    if p.ndim == 0:
        p = lax.reshape(p, (1,))
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    jnp = _jnp_full()
    n = p.shape[0]
    if n < 2:
        return jnp.zeros((0,), _complex_dtype(_dt.dtype_and_weak(p)[0]))
    is_zero = p == 0
    lead = jnp.where(jnp.all(is_zero), n, jnp.argmin(is_zero))
    if strip_zeros:
        if _core.is_tracer(p):
            raise _core.ConcretizationTypeError(
                "Abstract tracer value encountered where concrete value is expected: "
                "roots(strip_zeros=True) needs a concrete p (the number of roots depends "
                "on its leading zeros). Under jit, pass strip_zeros=False: the roots the "
                "leading zeros take away are then nan.")
        return _roots_no_zeros(p[int(lead):])
    # leading zeros rolled to the end become roots at 0; those are sorted last
    # and replaced by nan (an all-zero p is read as all ones to keep LAPACK finite)
    p = jnp.where(lead == n, jnp.ones_like(p), p)
    r = _roots_no_zeros(jnp.roll(p, -lead))
    r = lax.sort(((r == 0).astype(np.int32), r), num_keys=1)[1]
    nan = np.array(complex(np.nan, np.nan), _dt.dtype_and_weak(r)[0])
    return jnp.where(jnp.arange(n - 1) < n - 1 - lead, r, nan)

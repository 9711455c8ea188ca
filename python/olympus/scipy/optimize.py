"""olympus.scipy.optimize: `minimize(fun, x0, args=(), method="BFGS")` as
`jax.scipy.optimize.minimize`, and the strong-Wolfe `line_search` it uses.

Everything is a `lax.while_loop`, so minimize runs under jit and vmap. BFGS
keeps the inverse Hessian (Nocedal & Wright, algorithm 6.1); the line search
brackets a step satisfying the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9)
and zooms into the bracket by safeguarded cubic interpolation, bisecting
when the cubic step falls outside it (algorithms 3.5 and 3.6).
"""
from typing import NamedTuple

import numpy as np

import olympus
from olympus import lax
import olympus.numpy as jnp

__all__ = ["minimize", "OptimizeResults", "line_search", "LineSearchResults"]


class LineSearchResults(NamedTuple):
    failed: object    # bool: no step satisfying the conditions was found
    nit: object       # iterations used
    nfev: object      # function evaluations
    ngev: object      # gradient evaluations
    k: object         # bracketing iterations
    a_k: object       # the step length
    f_k: object       # f(x + a_k p)
    g_k: object       # grad f(x + a_k p)
    status: object   # 0: converged; 1: bracketing failed; 2: zoom failed


class OptimizeResults(NamedTuple):
    x: object         # the solution
    success: object   # bool: converged
    status: object    # 0 converged, 1 max iterations, 3 line search failed, as JAX
    fun: object       # f(x)
    jac: object       # grad f(x)
    hess_inv: object  # the inverse Hessian estimate
    nfev: object
    njev: object
    nit: object


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimiser of the cubic through (a, fa) with slope fpa, (b, fb), (c, fc)."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = jnp.stack([jnp.stack([dc ** 2, -db ** 2]), jnp.stack([-dc ** 3, db ** 3])])
    rhs = jnp.stack([fb - fa - fpa * db, fc - fa - fpa * dc])
    A, B = (d1 @ rhs) / denom
    radical = B * B - 3 * A * fpa
    return a + (-B + jnp.sqrt(radical)) / (3 * A)


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
    """A step a along pk from xk satisfying the strong Wolfe conditions for f
    (a scalar function of one array)."""
    value_and_grad = olympus.value_and_grad(f)
    xk = jnp.asarray(xk)
    pk = jnp.asarray(pk)
    if old_fval is None or gfk is None:
        old_fval, gfk = value_and_grad(xk)
    dtype = xk.dtype

    def phi(a):
        v, g = value_and_grad(xk + a * pk)
        return v, jnp.dot(g, pk), g

    phi0, dphi0 = old_fval, jnp.dot(gfk, pk)
    if old_old_fval is not None:
        a1 = jnp.minimum(1.0, 1.01 * 2 * (phi0 - old_old_fval) / dphi0)
        a1 = jnp.where((a1 > 0) & jnp.isfinite(a1), a1, 1.0)
    else:
        a1 = jnp.asarray(1.0, dtype)
    a1 = jnp.astype(a1, dtype)
    zero = jnp.asarray(0.0, dtype)

    def zoom(lo, hi, phi_lo, dphi_lo, g_lo, phi_hi, nfev):
        # the interval [lo, hi] holds a strong-Wolfe step (N&W algorithm 3.6)
        def body(st):
            lo, hi, phi_lo, dphi_lo, g_lo, phi_hi, rec, phi_rec, it, done, a, fa, ga, nf = st
            d = hi - lo
            left, right = jnp.minimum(lo, hi), jnp.maximum(lo, hi)
            cubic = _cubicmin(lo, phi_lo, dphi_lo, hi, phi_hi, rec, phi_rec)
            ok = (it > 0) & jnp.isfinite(cubic) & (cubic > left + 0.2 * jnp.abs(d)) & \
                (cubic < right - 0.2 * jnp.abs(d))
            aj = jnp.where(ok, cubic, lo + 0.5 * d)
            phi_j, dphi_j, g_j = phi(aj)
            high = (phi_j > phi0 + c1 * aj * dphi0) | (phi_j >= phi_lo)
            wolfe = jnp.abs(dphi_j) <= -c2 * dphi0
            flip = dphi_j * (hi - lo) >= 0
            new_hi = jnp.where(high, aj, jnp.where(flip, lo, hi))
            new_phi_hi = jnp.where(high, phi_j, jnp.where(flip, phi_lo, phi_hi))
            new_rec = jnp.where(high, hi, jnp.where(flip, hi, lo))
            new_phi_rec = jnp.where(high, phi_hi, jnp.where(flip, phi_hi, phi_lo))
            take = ~high
            new_lo = jnp.where(take, aj, lo)
            found = take & wolfe
            return (new_lo, new_hi, jnp.where(take, phi_j, phi_lo),
                    jnp.where(take, dphi_j, dphi_lo), jnp.where(take, g_j, g_lo), new_phi_hi,
                    new_rec, new_phi_rec, it + 1, found, jnp.where(found, aj, a),
                    jnp.where(found, phi_j, fa), jnp.where(found, g_j, ga), nf + 1)

        def cond(st):
            return (~st[9]) & (st[8] < maxiter) & (jnp.abs(st[1] - st[0]) > 1e-10)
        st = (lo, hi, phi_lo, dphi_lo, g_lo, phi_hi, lo, phi_lo, jnp.asarray(0), jnp.asarray(False),
              lo, phi_lo, g_lo, nfev)
        st = lax.while_loop(cond, body, st)
        return st[9], st[10], st[11], st[12], st[13]

    def body(st):
        i, a_prev, a, phi_prev, dphi_prev, g_prev, done, failed, res_a, res_f, res_g, nf = st
        phi_a, dphi_a, g_a = phi(a)
        nf = nf + 1
        high = (phi_a > phi0 + c1 * a * dphi0) | ((phi_a >= phi_prev) & (i > 0))
        wolfe = jnp.abs(dphi_a) <= -c2 * dphi0
        up = dphi_a >= 0
        # a bracket [lo, hi] when high or up; the zoom runs only then
        need = high | (~wolfe & up)
        lo = jnp.where(high, a_prev, a)
        hi = jnp.where(high, a, a_prev)
        phi_lo = jnp.where(high, phi_prev, phi_a)
        dphi_lo = jnp.where(high, dphi_prev, dphi_a)
        g_lo = jnp.where(high, g_prev, g_a)
        phi_hi = jnp.where(high, phi_a, phi_prev)
        z_ok, z_a, z_f, z_g, nf2 = lax.cond(
            need, lambda: zoom(lo, hi, phi_lo, dphi_lo, g_lo, phi_hi, nf),
            lambda: (jnp.asarray(False), a, phi_a, g_a, nf))
        got = ~high & wolfe
        fin = got | need
        return (i + 1, a, jnp.minimum(2 * a, 1e10), phi_a, dphi_a, g_a, fin,
                need & ~z_ok & ~got, jnp.where(got, a, z_a), jnp.where(got, phi_a, z_f),
                jnp.where(got, g_a, z_g), jnp.where(need, nf2, nf))

    def cond(st):
        return (~st[6]) & (st[0] < maxiter)

    init = (jnp.asarray(0), zero, a1, jnp.asarray(phi0, dtype), jnp.asarray(dphi0, dtype), gfk,
            jnp.asarray(False), jnp.asarray(False), zero, jnp.asarray(phi0, dtype), gfk,
            jnp.asarray(0))
    st = lax.while_loop(cond, body, init)
    failed = st[7] | ~st[6]
    status = jnp.where(~st[6], 1, jnp.where(st[7], 2, 0))
    return LineSearchResults(failed=failed, nit=st[0], nfev=st[11] + 1, ngev=st[11] + 1, k=st[0],
                             a_k=st[8], f_k=st[9], g_k=st[10], status=status)


def _bfgs(fun, x0, maxiter, gtol, line_search_maxiter):
    value_and_grad = olympus.value_and_grad(fun)
    n = x0.shape[0]
    f0, g0 = value_and_grad(x0)
    eye = jnp.eye(n, dtype=x0.dtype)
    inf_norm = lambda v: jnp.max(jnp.abs(v))  # noqa: E731

    def body(st):
        k, x, f, g, H, old_old, nfev, njev, _, _, _ = st
        p = -(H @ g)
        ls = line_search(fun, x, p, old_fval=f, old_old_fval=old_old, gfk=g,
                         maxiter=line_search_maxiter)
        s = ls.a_k * p
        x1 = x + s
        y = ls.g_k - g
        rho = 1.0 / jnp.dot(y, s)
        w = eye - rho * jnp.outer(s, y)
        H1 = jnp.where(jnp.isfinite(rho), w @ H @ w.T + rho * jnp.outer(s, s), H)
        converged = inf_norm(ls.g_k) < gtol
        return (k + 1, jnp.where(ls.failed, x, x1), jnp.where(ls.failed, f, ls.f_k),
                jnp.where(ls.failed, g, ls.g_k), jnp.where(ls.failed, H, H1), f,
                nfev + ls.nfev, njev + ls.ngev, converged, ls.failed, ls.status)

    def cond(st):
        return (~st[8]) & (~st[9]) & (st[0] < maxiter)

    st = (jnp.asarray(0), x0, f0, g0, eye, f0 + jnp.sqrt(jnp.sum(g0 * g0)) / 2, jnp.asarray(1),
          jnp.asarray(1), inf_norm(g0) < gtol, jnp.asarray(False), jnp.asarray(0))
    k, x, f, g, H, _, nfev, njev, converged, failed, _ = lax.while_loop(cond, body, st)
    status = jnp.where(converged, 0, jnp.where(failed, 3, 1))
    return OptimizeResults(x=x, success=converged, status=status, fun=f, jac=g, hess_inv=H,
                           nfev=nfev, njev=njev, nit=k)


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimises fun(x, *args) over a 1-D x from x0. method: "BFGS" (JAX's
    only one besides "l-bfgs-experimental-do-not-rely-on-this"). options:
    maxiter (default 200 * len(x0)), gtol (default 1e-5; tol sets it too),
    line_search_maxiter (default 10). Returns OptimizeResults."""
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(f"minimize: method must be 'BFGS', got {method!r}")
    options = dict(options or {})
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be 1-D, got shape {tuple(x0.shape)}")
    if not np.issubdtype(x0.dtype, np.floating):
        x0 = jnp.astype(x0, jnp.result_type(float))
    gtol = options.pop("gtol", 1e-5 if tol is None else tol)
    maxiter = options.pop("maxiter", None)
    maxiter = 200 * x0.shape[0] if maxiter is None else maxiter
    ls_maxiter = options.pop("line_search_maxiter", 10)
    options.pop("norm", None)
    if options:
        raise ValueError(f"minimize: unknown options {sorted(options)}")
    return _bfgs(lambda x: fun(x, *args), x0, maxiter, gtol, ls_maxiter)

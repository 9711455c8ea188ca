"""olympus.numpy.linalg (`jnp.linalg`): NumPy's linear algebra on olympus's
factorisation primitives (olympus.lax.linalg), following JAX's jax.numpy.linalg:
the same algorithms, results and custom derivatives (det, slogdet, pinv).

Every function takes stacks of matrices [..., m, n] (batch dims broadcast where
NumPy broadcasts), promotes integer and bool input to the default float type,
and works eagerly, under jit, vmap and grad. Singular or non-positive-definite
input gives infinities or NaNs, never an exception (as JAX; NumPy raises
LinAlgError).
"""
import builtins
import math
import operator
from typing import NamedTuple

import numpy as np

from olympus import lax
from olympus import numpy as jnp
from olympus._src import dtypes as _dt
from olympus._src.ad import custom_jvp
from olympus.lax import linalg as lax_linalg

__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
    "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
    "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
    "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm",
    "EighResult", "EigResult", "QRResult", "SlogdetResult", "SVDResult", "LinAlgError",
]

LinAlgError = np.linalg.LinAlgError


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


# ------------------------------------------------------------------ helpers

def _inexact(*xs):
    """Arrays of one inexact dtype (ints and bools become the default float)."""
    xs = [jnp.asarray(x) for x in xs]
    dt = _dt.result_type(*xs)
    if not _dt.is_inexact(dt):
        dt = _dt.default_float()
    out = [x.astype(dt) if x.dtype != dt else x for x in xs]
    return out if len(out) > 1 else out[0]


def _check_matrix(name, x, square=False):
    if x.ndim < 2:
        raise np.linalg.LinAlgError(f"{name}: {x.ndim}-dimensional array given. Array must be "
                                    "at least two-dimensional")
    if square and x.shape[-1] != x.shape[-2]:
        raise np.linalg.LinAlgError(f"{name}: last 2 dimensions of the array must be square, "
                                    f"got {x.shape}")


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _H(x):
    return jnp.conj(_mT(x)) if jnp.iscomplexobj(x) else _mT(x)


def _real_dtype(dt):
    return _dt.real_dtype(np.dtype(dt))


def _diag(x, offset=0):
    """The diagonal [..., k] of x [..., m, n] (offset > 0: above it), by a
    strided slice of the flattened matrix (no gather)."""
    m, n = x.shape[-2:]
    if offset >= 0:
        k = builtins.max(0, builtins.min(m, n - offset))
        start = offset
    else:
        k = builtins.max(0, builtins.min(m + offset, n))
        start = -offset * n
    lead = x.shape[:-2]
    if k == 0:
        return jnp.zeros(lead + (0,), x.dtype)
    flat = jnp.reshape(x, lead + (m * n,))
    nd = len(lead)
    return lax.slice(flat, (0,) * nd + (start,), lead + (start + (k - 1) * (n + 1) + 1,),
                     (1,) * nd + (n + 1,))


def _eye_like(x):
    """The identity broadcast to x's shape [..., n, n], of x's dtype."""
    n = x.shape[-1]
    return jnp.broadcast_to(jnp.eye(n, dtype=x.dtype), x.shape)


def _batch_broadcast(a, b, b_tail):
    """a [..., m, m] and b [..., *b_tail] broadcast to one batch shape."""
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:b.ndim - b_tail])
    return (jnp.broadcast_to(a, batch + a.shape[-2:]),
            jnp.broadcast_to(b, batch + b.shape[b.ndim - b_tail:]))


def _lu_solve(lu, perm, b, trans=0):
    """Solves with lu's factorisation (lu, permutation from lax.linalg.lu) for
    a matrix b [..., m, k] of lu's batch shape: a x = b (trans 0), a^T x = b
    (1) or a^H x = b (2)."""
    if trans == 0:
        x = jnp.take_along_axis(b, perm[..., :, None], axis=-2, mode="clip")
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    conj = trans == 2
    x = lax_linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True,
                                    conjugate_a=conj)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True,
                                    transpose_a=True, conjugate_a=conj)
    inv = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(x, inv[..., :, None], axis=-2, mode="clip")


# ------------------------------------------------------------------ solving

def solve(a, b):
    """x with a x = b: a [..., m, m]; b [..., m, k], or [m] / [..., m] (one
    rank below a: a stack of vectors); batch dims broadcast. Through an LU
    factorisation with partial pivoting (singular a: infinities / NaNs)."""
    a, b = _inexact(a, b)
    _check_matrix("solve", a, square=True)
    vector = b.ndim == 1 or b.ndim == a.ndim - 1
    if vector:
        b = b[..., None]
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: a {a.shape} and b {b.shape[:-1] if vector else b.shape} do "
                         "not fit (a's columns must equal b's rows)")
    a, b = _batch_broadcast(a, b, 2)
    lu, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu, perm, b)
    return x[..., 0] if vector else x


def inv(a):
    """The inverse of a [..., n, n] (solve against the identity)."""
    a = _inexact(a)
    _check_matrix("inv", a, square=True)
    return solve(a, _eye_like(a))


def _lu_det_parts(a):
    lu, piv, perm = lax_linalg.lu(a)
    diag = _diag(lu)
    n = a.shape[-1]
    parity = jnp.sum(piv != jnp.arange(n, dtype=piv.dtype), axis=-1)
    return lu, perm, diag, parity


def _cofactor_solve(a, b):
    """(det(a), adjugate(a) @ b), also for singular a (JAX's algorithm: the
    derivative of det, well defined at rank n - 1 and zero below)."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu, perm, diag, parity = _lu_det_parts(a)
    dt = a.dtype
    sign = jnp.asarray(-2 * (parity % 2) + 1).astype(dt)
    # partial_det[..., -1] is det(a), [..., -2] det(u) / u[n-1, n-1]
    partial_det = jnp.cumprod(diag, axis=-1) * sign[..., None]
    lu = lu.at[..., -1, -1].set(1.0 / partial_det[..., -2])
    d = lax_linalg.triangular_solve(lu, jnp.ones(b.shape[:-1], dt), left_side=True, lower=False)
    d = jnp.any(jnp.isnan(d) | jnp.isinf(d), axis=-1)[..., None, None]
    zero = jnp.zeros((), dt)
    x = jnp.where(d, zero, b)
    x = jnp.take_along_axis(x, perm[..., :, None], axis=-2, mode="clip")
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate((x[..., :-1, :] * partial_det[..., -1, None, None], x[..., -1:, :]),
                        axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = jnp.where(d, zero, x)
    return partial_det[..., -1], x


@custom_jvp
def _det(a):
    _, _, diag, parity = _lu_det_parts(a)
    sign = jnp.asarray(-2 * (parity % 2) + 1).astype(a.dtype)
    return sign * jnp.prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals, tangents):
    (a,), (g,) = primals, tangents
    y, z = _cofactor_solve(a, g)
    return y, jnp.trace(z, axis1=-2, axis2=-1)


def det(a):
    """The determinant of a [..., n, n] (from its LU factorisation); its
    derivative is trace(adjugate(a) a'), defined for singular a too."""
    a = _inexact(a)
    _check_matrix("det", a, square=True)
    if a.shape[-1] == 0:
        return jnp.ones(a.shape[:-2], a.dtype)
    return _det(a)


@custom_jvp
def _slogdet(a):
    _, _, diag, parity = _lu_det_parts(a)
    dt = a.dtype
    is_zero = jnp.any(diag == jnp.zeros((), dt), axis=-1)
    if jnp.iscomplexobj(a):
        sign = jnp.prod(diag / jnp.abs(diag).astype(dt), axis=-1)
    else:
        sign = jnp.ones((), dt)
        parity = parity + jnp.sum(diag < 0, axis=-1)
    sign = jnp.where(is_zero, jnp.zeros((), dt),
                     sign * jnp.asarray(-2 * (parity % 2) + 1).astype(dt))
    rdt = _real_dtype(dt)
    logdet = jnp.where(is_zero, jnp.full((), -np.inf, rdt),
                       jnp.sum(jnp.log(jnp.abs(diag)), axis=-1))
    return sign, logdet


@_slogdet.defjvp
def _slogdet_jvp(primals, tangents):
    (a,), (g,) = primals, tangents
    sign, ans = _slogdet(a)
    ans_dot = jnp.trace(solve(a, g), axis1=-2, axis2=-1)
    if jnp.iscomplexobj(a):
        sign_dot = (ans_dot - jnp.real(ans_dot).astype(ans_dot.dtype)) * sign
        ans_dot = jnp.real(ans_dot)
    else:
        sign_dot = jnp.zeros_like(sign)
    return (sign, ans), (sign_dot, ans_dot)


def slogdet(a, *, method=None):
    """(sign, log|det a|) of a [..., n, n] from its LU factorisation; sign 0
    and logabsdet -inf for singular a."""
    if method not in (None, "lu"):
        raise ValueError(f"slogdet: unknown method {method!r} (only 'lu' is supported)")
    a = _inexact(a)
    _check_matrix("slogdet", a, square=True)
    if a.shape[-1] == 0:
        return SlogdetResult(jnp.ones(a.shape[:-2], a.dtype),
                             jnp.zeros(a.shape[:-2], _real_dtype(a.dtype)))
    return SlogdetResult(*_slogdet(a))


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least squares x minimising |a x - b| (a [m, n], b [m] or [m, k]) via
    the SVD: (x, residuals, rank, s). Singular values below rcond * s[0] are
    dropped (rcond None: eps * max(m, n); negative: eps). Residuals are the
    squared column norms of b - a x, always (numpy_resid=True: empty when
    rank < n or m <= n, as NumPy, which needs concrete values)."""
    a, b = _inexact(a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or two-dimensional")
    if a.shape[0] != b.shape[0]:
        raise ValueError("Leading dimensions of input arrays must match")
    b1 = b.ndim == 1
    if b1:
        b = b[:, None]
    m, n = a.shape
    dt = a.dtype
    eps = float(np.finfo(_real_dtype(dt)).eps)
    if a.size == 0:
        s = jnp.zeros((0,), _real_dtype(dt))
        rank = jnp.asarray(0)
        x = jnp.zeros((n,) + b.shape[1:], dt)
    else:
        if rcond is None:
            rcond = eps * builtins.max(n, m)
        else:
            rcond = jnp.where(jnp.asarray(rcond) < 0, eps, rcond)
        u, s, vt = lax_linalg.svd(a, full_matrices=False)
        mask = s >= jnp.asarray(rcond).astype(s.dtype) * s[0]
        rank = jnp.sum(mask)
        safe_s = jnp.where(mask, s, jnp.ones((), s.dtype)).astype(dt)
        s_inv = jnp.where(mask, 1 / safe_s, jnp.zeros((), dt))[:, None]
        uTb = jnp.matmul(_H(u), b)
        x = jnp.matmul(_H(vt), s_inv * uTb)
    if numpy_resid and (int(rank) < n or m <= n):
        resid = jnp.zeros((0,), _real_dtype(dt))
    else:
        resid = vector_norm(b - jnp.matmul(a, x), axis=0) ** 2
    if b1:
        x = jnp.ravel(x)
    return x, resid, rank, s


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) == b (NumPy's tensorsolve)."""
    a, b = _inexact(a, b)
    an = a.ndim
    if axes is not None:
        allaxes = list(range(an))
        for k in axes:
            allaxes.remove(k)
            allaxes.insert(an, k)
        a = jnp.transpose(a, allaxes)
    Q = a.shape[-(an - b.ndim):]
    prod = math.prod(Q)
    if math.prod(a.shape) != prod * prod:
        raise np.linalg.LinAlgError("tensorsolve: the leading and trailing dims of a do not "
                                    f"make a square matrix ({a.shape} with b {b.shape})")
    x = solve(jnp.reshape(a, (-1, prod)), jnp.ravel(b))
    return jnp.reshape(x, Q)


def tensorinv(a, ind=2):
    """The inverse of a read as a matrix of its first ind and remaining dims."""
    a = _inexact(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got {ind}")
    head, tail = a.shape[:ind], a.shape[ind:]
    rows, cols = math.prod(head), math.prod(tail)
    if rows != cols:
        raise ValueError(f"tensorinv: the first {ind} dims {head} and the rest {tail} do not "
                         "make a square matrix")
    return jnp.reshape(inv(jnp.reshape(a, (rows, cols))), tail + head)


# ------------------------------------------------------------------ factorisations

def cholesky(a, *, upper=False, symmetrize_input=True):
    """The Cholesky factor of a Hermitian positive definite a [..., n, n]:
    lower l with a = l l^H (upper: l^H); NaNs where a is not positive definite."""
    a = _inexact(a)
    _check_matrix("cholesky", a, square=True)
    l = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(l) if upper else l


def qr(a, mode="reduced"):
    """QR factorisation: mode 'reduced' (q [..., m, k], r [..., k, n]),
    'complete' (q [..., m, m], r [..., m, n]) or 'r' (r alone)."""
    a = _inexact(a)
    _check_matrix("qr", a)
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' is not supported")
    if mode not in ("reduced", "complete", "r", "full", "economic"):
        raise ValueError(f"qr: unsupported mode {mode!r}")
    full = mode in ("complete", "full")
    q, r = lax_linalg.qr(a, full_matrices=full)
    if mode == "r":
        return r
    return QRResult(q, r)


def eigh(a, UPLO=None, symmetrize_input=True):
    """(eigenvalues ascending, eigenvectors as columns) of a Hermitian a
    [..., n, n]. With symmetrize_input the Hermitian part (a + a^H) / 2 is
    used (so gradients stay symmetric); otherwise the UPLO triangle is read."""
    a = _inexact(a)
    _check_matrix("eigh", a, square=True)
    if UPLO is None or UPLO == "L":
        lower = True
    elif UPLO == "U":
        lower = False
    else:
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L"):
    """The eigenvalues (ascending) of a Hermitian a [..., n, n]."""
    return eigh(a, UPLO).eigenvalues


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """a = u diag(s) vh: (u, s, vh), s descending (s alone without
    compute_uv). hermitian: through eigh (s = |eigenvalues|)."""
    a = _inexact(a)
    _check_matrix("svd", a)
    if hermitian:
        w, v = eigh(a)
        s = jnp.abs(w)
        if not compute_uv:
            return jnp.flip(jnp.sort(s, axis=-1), axis=-1)
        sign = jnp.sign(w)
        idx = lax.broadcasted_iota(np.int32, s.shape, s.ndim - 1)
        s, idx, sign = lax.sort((s, idx, sign), dimension=-1, num_keys=1)
        s, idx, sign = (lax.rev(t, (s.ndim - 1,)) for t in (s, idx, sign))
        u = jnp.take_along_axis(v, jnp.broadcast_to(idx[..., None, :], v.shape), axis=-1)
        vh = _H(u * sign[..., None, :].astype(u.dtype))
        return SVDResult(u, s, vh)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    return SVDResult(*out) if compute_uv else out


def svdvals(x):
    """The singular values of x [..., m, n], descending."""
    return svd(x, compute_uv=False)


def eig(a):
    """(eigenvalues, right eigenvectors as unit-norm columns) of a square a
    [..., n, n]; complex. Only the eigenvalues are differentiable."""
    a = _inexact(a)
    _check_matrix("eig", a, square=True)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """The (complex) eigenvalues of a square a [..., n, n]; differentiable."""
    a = _inexact(a)
    _check_matrix("eigvals", a, square=True)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


@custom_jvp
def _pinv(a, rtol):
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return jnp.zeros(a.shape[:-2] + (n, m), a.dtype)
    u, s, vh = svd(jnp.conj(a), full_matrices=False)
    cutoff = jnp.expand_dims(rtol, -1) * s[..., 0:1]
    s = jnp.where(s > cutoff, s, jnp.full((), np.inf, s.dtype)).astype(u.dtype)
    return jnp.matmul(_mT(vh), _mT(u) / s[..., :, None])


@_pinv.defjvp
def _pinv_jvp(primals, tangents):
    # Golub and Pereyra (1973), via en.wikipedia.org/wiki/Moore-Penrose_inverse#Derivative
    a, rtol = primals
    a_dot = tangents[0]
    p = _pinv(a, rtol)
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return p, jnp.zeros_like(p)
    p_dot = -p @ a_dot @ p
    p_dot = p_dot + p @ _H(p) @ _H(a_dot) @ (jnp.eye(m, dtype=a.dtype) - a @ p)
    p_dot = p_dot + (jnp.eye(n, dtype=a.dtype) - p @ a) @ _H(a_dot) @ _H(p) @ p
    return p, p_dot


def pinv(a, rtol=None, hermitian=False, *, rcond=None):  # noqa: ARG001 (hermitian: SVD either way)
    """The Moore-Penrose pseudo-inverse of a [..., m, n] through its SVD:
    singular values at or below rtol * max(s) count as zero (rtol None:
    10 * max(m, n) * eps; rcond is NumPy's older name). Custom derivative
    (Golub and Pereyra)."""
    a = _inexact(a)
    _check_matrix("pinv", a)
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: pass rtol or rcond, not both")
        rtol = rcond
    if rtol is None:
        rtol = 10.0 * builtins.max(a.shape[-2:]) * float(np.finfo(_real_dtype(a.dtype)).eps)
    rtol = jnp.broadcast_to(jnp.asarray(rtol).astype(_real_dtype(a.dtype)), a.shape[:-2])
    return _pinv(a, lax.stop_gradient(rtol))


def matrix_power(a, n):
    """a raised to the integer power n (negative: of inv(a)) by repeated squaring."""
    a = jnp.asarray(a)
    _check_matrix("matrix_power", a, square=True)
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a = inv(a)
        n = -n
    if n == 1:
        return a
    z = result = None
    while n > 0:
        z = a if z is None else jnp.matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else jnp.matmul(result, z)
    return result


def matrix_rank(M, rtol=None, *, tol=None, hermitian=False):
    """The number of singular values above the threshold: tol (absolute),
    else rtol * max(s) (rtol None: max(m, n) * eps)."""
    M = _inexact(M)
    if M.ndim < 2:
        return jnp.any(M != 0).astype(np.int32)
    S = svd(M, compute_uv=False, hermitian=hermitian)
    smax = jnp.max(S, axis=-1) if S.shape[-1] else jnp.zeros(S.shape[:-1], S.dtype)
    if tol is not None:
        thr = jnp.asarray(tol).astype(S.dtype)
    else:
        if rtol is None:
            rtol = builtins.max(M.shape[-2:]) * float(np.finfo(S.dtype).eps)
        thr = smax * jnp.asarray(rtol).astype(S.dtype)
    thr = jnp.broadcast_to(thr, S.shape[:-1])
    return jnp.sum(S > thr[..., None], axis=-1)


def cond(x, p=None):
    """The condition number of x in norm p (None / 2: s_max / s_min, -2: its
    inverse; others: norm(x, p) * norm(inv(x), p), square x). Infinite for
    singular x."""
    x = _inexact(x)
    _check_matrix("cond", x)
    if p is None or p == 2:
        s = svd(x, compute_uv=False)
        r = s[..., 0] / s[..., -1]
    elif p == -2:
        s = svd(x, compute_uv=False)
        r = s[..., -1] / s[..., 0]
    else:
        if x.shape[-2] != x.shape[-1]:
            raise ValueError(f"cond: p={p!r} needs square matrices, got {x.shape}")
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    nan_free = ~jnp.any(jnp.isnan(x), axis=(-2, -1))
    return jnp.where(jnp.isnan(r) & nan_free, jnp.full((), np.inf, r.dtype), r)


# ------------------------------------------------------------------ norms

def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm over axis (None: all elements): ord 2 (default), 1,
    inf, -inf, 0 (the count of nonzeros) or any other p: sum(|x|^p)^(1/p)."""
    x = _inexact(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    if ord == np.inf:
        return jnp.max(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(_real_dtype(x.dtype))
    if ord == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    ax = jnp.abs(x)
    p = jnp.asarray(ord).astype(ax.dtype)
    return jnp.power(jnp.sum(ax ** p, axis=axis, keepdims=keepdims), 1 / p)


_AxisError = getattr(np, "exceptions", np).AxisError


def _canon_axis(a, ndim):
    a = operator.index(a)
    if not -ndim <= a < ndim:
        raise _AxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norm: a vector norm over one axis (ord as vector_norm) or a
    matrix norm over two (None / 'fro', 'nuc', 1, -1, 2, -2, inf, -inf);
    axis None: the 2-norm of everything (ord None), else by x's rank."""
    x = _inexact(x)
    ndim = x.ndim
    if axis is None:
        if ord is None:
            return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), keepdims=keepdims))
        axis = tuple(range(ndim))
    elif isinstance(axis, (tuple, list)):
        axis = tuple(_canon_axis(a, ndim) for a in axis)
    else:
        axis = (_canon_axis(axis, ndim),)
    if len(axis) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)
    if len(axis) != 2:
        raise ValueError(f"Invalid axis values ({axis}) for jnp.linalg.norm.")
    row, col = axis
    if row == col:
        raise ValueError("Duplicate axes given.")
    if ord is None or ord in ("f", "fro"):
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if ord in (1, -1):
        if not keepdims and col > row:
            col -= 1
        red = jnp.max if ord == 1 else jnp.min
        return red(jnp.sum(jnp.abs(x), axis=row, keepdims=keepdims), axis=col, keepdims=keepdims)
    if ord in (np.inf, -np.inf):
        if not keepdims and row > col:
            row -= 1
        red = jnp.max if ord == np.inf else jnp.min
        return red(jnp.sum(jnp.abs(x), axis=col, keepdims=keepdims), axis=row, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        y = jnp.moveaxis(x, axis, (-2, -1))
        s = svd(y, compute_uv=False)
        if ord == 2:
            r = jnp.max(s, axis=-1)
        elif ord == -2:
            r = jnp.min(s, axis=-1)
        else:
            r = jnp.sum(s, axis=-1)
        if keepdims:
            r = jnp.expand_dims(r, tuple(sorted(axis)))
        return r
    raise ValueError(f"Invalid order '{ord}' for matrix norm.")


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The matrix norm over the last two axes (ord as norm's)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# ------------------------------------------------------------------ products and views

def matmul(x1, x2, /):
    return jnp.matmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2):
    return jnp.tensordot(x1, x2, axes)


def matrix_transpose(x, /):
    """x with its last two axes swapped."""
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: x must have ndim >= 2, got {x.shape}")
    return _mT(x)


def outer(x1, x2, /):
    """The outer product of two vectors."""
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer: inputs must be 1-dimensional, got {x1.shape} and {x2.shape}")
    return jnp.outer(x1, x2)


def vecdot(x1, x2, /, *, axis=-1):
    """sum(conj(x1) * x2) along axis (batch dims broadcast)."""
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    return jnp.sum(jnp.conj(x1) * x2, axis=axis)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along axis (batch dims broadcast)."""
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"cross: both inputs must have size 3 along axis {axis}, got "
                         f"{x1.shape} and {x2.shape}")
    a = jnp.moveaxis(x1, axis, -1)
    b = jnp.moveaxis(x2, axis, -1)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    c = jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
    return jnp.moveaxis(c, -1, axis)


def diagonal(x, /, *, offset=0):
    """The diagonal of the last two axes (offset > 0: above it)."""
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"diagonal: x must have ndim >= 2, got {x.shape}")
    return _diag(x, operator.index(offset))


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonal of the last two axes."""
    x = jnp.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"trace: x must have ndim >= 2, got {x.shape}")
    return jnp.sum(_diag(x, operator.index(offset)), axis=-1, dtype=dtype)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices in the cheapest order (NumPy's
    dynamic program); the first may be a vector (a row), the last a vector
    (a column)."""
    arrays = [jnp.asarray(a) for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    if n == 2:
        return jnp.matmul(arrays[0], arrays[1]) if arrays[0].ndim and arrays[1].ndim else \
            jnp.dot(arrays[0], arrays[1])
    first, last = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first:
        arrays[0] = arrays[0][None, :]
    if last:
        arrays[-1] = arrays[-1][:, None]
    for a in arrays:
        if a.ndim != 2:
            raise ValueError(f"multi_dot: {a.ndim}-dimensional array given; the inner arrays "
                             "must be two-dimensional")
    dims = [a.shape[0] for a in arrays] + [arrays[-1].shape[1]]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for ln in range(1, n):
        for i in range(n - ln):
            j = i + ln
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def chain(i, j):
        if i == j:
            return arrays[i]
        k = split[i][j]
        return jnp.matmul(chain(i, k), chain(k + 1, j))
    out = chain(0, n - 1)
    if first:
        out = out[0]
    if last:
        out = out[..., 0]
    return out

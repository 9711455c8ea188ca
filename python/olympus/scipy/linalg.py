"""olympus.scipy.linalg: SciPy's linear algebra on olympus's factorisation
primitives (olympus.lax.linalg), following jax.scipy.linalg: lu, lu_factor,
lu_solve, cho_factor, cho_solve, cholesky, solve_triangular, solve, inv, det,
qr, svd, eigh, expm (and expm_frechet), sqrtm, block_diag.

Functions take stacks of matrices where JAX's do, promote integer input to the
default float type, and work eagerly, under jit, vmap and grad. SciPy's
overwrite_* and check_finite arguments are accepted and ignored (olympus
arrays are immutable; nothing is checked at run time: a failed factorisation
gives NaNs, as in JAX).
"""
import functools

import numpy as np

from olympus import lax
from olympus import numpy as jnp
from olympus._src.ad import vmap
from olympus.lax import linalg as lax_linalg
from olympus.numpy import linalg as _la

__all__ = [
    "block_diag", "cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "expm_frechet",
    "inv", "lu", "lu_factor", "lu_solve", "qr", "solve", "solve_triangular", "sqrtm", "svd",
]

_inexact = _la._inexact
_H = _la._H


def _check_square(name, a):
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: expected a (batched) square matrix, got shape {a.shape}")


# ------------------------------------------------------------------ LU

def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """(p, l, u) with a = p @ l @ u: p a permutation matrix, l unit lower
    [..., m, k], u upper [..., k, n]; permute_l: (p @ l, u)."""
    a = _inexact(a)
    if a.ndim < 2:
        raise ValueError(f"lu: expected a (batched) matrix, got shape {a.shape}")
    lu_, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    l = jnp.tril(lu_, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_)[..., :k, :]
    p = (perm[..., None, :] == jnp.arange(m, dtype=perm.dtype)[:, None]).astype(a.dtype)
    if permute_l:
        return jnp.matmul(p, l), u
    return p, l, u


def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): l and u packed in one matrix, piv the 0-based row swaps
    (int32), as scipy.linalg.lu_factor."""
    a = _inexact(a)
    lu_, piv, _ = lax_linalg.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a x = b (trans 0), a^T x = b (1) or a^H x = b (2), from
    lu_factor's (lu, piv); b [..., m] or [..., m, k]."""
    lu_, piv = lu_and_piv
    lu_, b = _inexact(lu_, b)
    if lu_.ndim < 2 or lu_.shape[-1] != lu_.shape[-2]:
        raise ValueError(f"lu_solve: lu must be a (batched) square matrix, got {lu_.shape}")
    m = lu_.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(piv, m)
    vector = lu_.ndim == b.ndim + 1 or b.ndim == 1
    if vector:
        b = b[..., None]
    if b.shape[-2] != m:
        raise ValueError(f"lu_solve: b's rows ({b.shape[-2]}) must equal lu's size ({m})")
    batch = jnp.broadcast_shapes(lu_.shape[:-2], perm.shape[:-1], b.shape[:-2])
    lu_ = jnp.broadcast_to(lu_, batch + lu_.shape[-2:])
    perm = jnp.broadcast_to(perm, batch + perm.shape[-1:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    trans = {"N": 0, "T": 1, "C": 2}.get(trans, trans)
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    x = _la._lu_solve(lu_, perm, b, trans)
    return x[..., 0] if vector else x


# ------------------------------------------------------------------ Cholesky

def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of a Hermitian positive definite a: upper u with
    a = u^H u (default), or lower l with a = l l^H. Reads that triangle of a
    only; NaNs where a is not positive definite."""
    a = _inexact(a)
    _check_square("cholesky", a)
    l = lax_linalg.cholesky(a if lower else jnp.conj(_la._mT(a)), symmetrize_input=False)
    return l if lower else _H(l)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the Cholesky factor for cho_solve."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b from cho_factor's (c, lower); b [..., n] or [..., n, k]."""
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    _check_square("cho_solve", c)
    vector = b.ndim == 1 or c.ndim == b.ndim + 1
    if vector:
        b = b[..., None]
    c, b = _la._batch_broadcast(c, b, 2)
    b = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                                    conjugate_a=not lower)
    b = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=lower,
                                    conjugate_a=lower)
    return b[..., 0] if vector else b


# ------------------------------------------------------------------ solving

def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """x with op(a) x = b for a triangular a (its lower or upper triangle is
    read): trans 0 / 'N' a, 1 / 'T' a^T, 2 / 'C' a^H; b a vector or matrix."""
    if trans in (0, "N"):
        transpose_a, conjugate_a = False, False
    elif trans in (1, "T"):
        transpose_a, conjugate_a = True, False
    elif trans in (2, "C"):
        transpose_a, conjugate_a = True, True
    else:
        raise ValueError(f"Invalid 'trans' value {trans!r}")
    a, b = _inexact(a, b)
    _check_square("solve_triangular", a)
    vector = a.ndim == b.ndim + 1
    if vector:
        b = b[..., None]
    a, b = _la._batch_broadcast(a, b, 2)
    out = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                      conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    return out[..., 0] if vector else out


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """x with a x = b. assume_a 'pos': Cholesky (the lower or upper triangle
    of a is read); 'gen', 'sym', 'her': LU (as JAX)."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: expected assume_a to be one of 'gen', 'sym', 'her' or "
                         f"'pos', got {assume_a!r}")
    if assume_a != "pos":
        return _la.solve(a, b)
    a, b = _inexact(a, b)
    return cho_solve(cho_factor(a, lower=lower), b)


def inv(a, overwrite_a=False, check_finite=True):
    """The inverse of a square a."""
    return _la.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of a square a."""
    return _la.det(a)


# ------------------------------------------------------------------ factorisations

def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """QR: mode 'full' (q, r) with q [..., m, m]; 'economic' with q
    [..., m, k]; 'r' the tuple (r,)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' is not supported")
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"qr: unsupported mode {mode!r}")
    a = _inexact(a)
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """(u, s, vh) with a = u diag(s) vh (s alone without compute_uv)."""
    a = _inexact(a)
    out = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True, subset_by_index=None,
         subset_by_value=None, driver=None):
    """(w, v) of a Hermitian a from its lower (or upper) triangle; w alone
    with eigvals_only. The generalised problem (b) is not supported."""
    if b is not None:
        raise NotImplementedError("eigh: only the standard eigenvalue problem (b=None) is "
                                  "supported")
    if eigvals is not None or subset_by_value is not None:
        raise NotImplementedError("eigh: eigvals / subset_by_value are not supported")
    a = _inexact(a)
    _check_square("eigh", a)
    v, w = lax_linalg.eigh(a, lower=lower, symmetrize_input=False,
                           subset_by_index=subset_by_index)
    return w if eigvals_only else (w, v)


# ------------------------------------------------------------------ matrix functions

def _dot(a, b):
    return jnp.matmul(a, b)


def _pade3(A):
    b = (120., 60., 12., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    U = _dot(A, b[3] * A2 + b[1] * ident)
    V = b[2] * A2 + b[0] * ident
    return U, V


def _pade5(A):
    b = (30240., 15120., 3360., 420., 30., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    U = _dot(A, b[5] * A4 + b[3] * A2 + b[1] * ident)
    V = b[4] * A4 + b[2] * A2 + b[0] * ident
    return U, V


def _pade7(A):
    b = (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    U = _dot(A, b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    V = b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident
    return U, V


def _pade9(A):
    b = (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
         3960., 90., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    A8 = _dot(A6, A2)
    U = _dot(A, b[9] * A8 + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    V = b[8] * A8 + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident
    return U, V


def _pade13(A):
    b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.)
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    A4 = _dot(A2, A2)
    A6 = _dot(A4, A2)
    U = _dot(A, _dot(A6, b[13] * A6 + b[11] * A4 + b[9] * A2)
             + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    V = _dot(A6, b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 \
        + b[0] * ident
    return U, V


def _calc_P_Q(A):
    """Scaling and the Pade approximant's numerator and denominator
    (Higham 2005; JAX's thresholds: degree 3..13 in double, 3..7 in single)."""
    A_L1 = _la.norm(A, 1)
    rdt = A_L1.dtype
    if rdt == np.float64:
        maxnorm = 5.371920351148152
        conds = (1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                 2.097847961257068e+000)
        branches = [_pade3, _pade5, _pade7, _pade9, _pade13]
    else:
        maxnorm = 3.925724783138660
        conds = (4.258730016922831e-001, 1.880152677804762e+000)
        branches = [_pade3, _pade5, _pade7]
    n_squarings = jnp.maximum(jnp.zeros((), rdt), jnp.floor(jnp.log2(A_L1 / maxnorm)))
    A = A / (2 ** n_squarings).astype(A.dtype)
    idx = jnp.digitize(A_L1, jnp.asarray(np.array(conds, dtype=rdt)))
    U, V = lax.switch(idx, branches, A)
    return U + V, -U + V, n_squarings


def _squaring(R, n_squarings, max_squarings):
    def step(c, i):
        return lax.cond(i < n_squarings, lambda x: _dot(x, x), lambda x: x, c), None
    res, _ = lax.scan(step, R, jnp.arange(max_squarings, dtype=n_squarings.dtype))
    return res


def _expm2(A, upper_triangular, max_squarings):
    P, Q, n_squarings = _calc_P_Q(A)

    def compute(args):
        P_, Q_ = args
        R = solve_triangular(Q_, P_) if upper_triangular else _la.solve(Q_, P_)
        return _squaring(R, n_squarings, max_squarings)

    def nan(args):
        return jnp.full(A.shape, np.nan, A.dtype)
    return lax.cond(n_squarings > max_squarings, nan, compute, (P, Q))


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential of a (batched) square A: JAX's algorithm, a Pade
    approximant of degree 3..13 (3..7 in single precision) chosen from A's
    1-norm with scaling and squaring (Higham 2005); NaNs when more than
    max_squarings squarings would be needed. Differentiable (through the
    algorithm)."""
    A = _inexact(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape}.")
    f = functools.partial(_expm2, upper_triangular=upper_triangular,
                          max_squarings=int(max_squarings))
    if A.ndim == 2:
        return f(A)
    n = A.shape[-1]
    flat = jnp.reshape(A, (-1, n, n))
    out = vmap(f)(flat) if flat.shape[0] else flat
    return jnp.reshape(out, A.shape)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Frechet derivative of expm at A in direction E (with expm(A) first
    when compute_expm), from expm of the block matrix [[A, E], [0, A]]."""
    A, E = _inexact(A, E)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or E.shape != A.shape:
        raise ValueError(f"expm_frechet: expected square A and E of its shape, got {A.shape} "
                         f"and {E.shape}")
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"expm_frechet: unknown method {method!r}")
    n = A.shape[0]
    big = jnp.concatenate([jnp.concatenate([A, E], axis=1),
                           jnp.concatenate([jnp.zeros_like(A), A], axis=1)], axis=0)
    M = expm(big)
    L = M[:n, n:]
    return (M[:n, :n], L) if compute_expm else L


def sqrtm(A, blocksize=1):
    """A principal square root of a diagonalisable square A, through its
    eigendecomposition: V diag(sqrt(w)) V^-1 (complex; SciPy's Schur method
    also handles defective matrices). Not differentiable (eigenvectors)."""
    A = _inexact(A)
    _check_square("sqrtm", A)
    w, v = _la.eig(A)
    return _la.solve(_la._mT(v), _la._mT(v * jnp.sqrt(w)[..., None, :])).swapaxes(-1, -2)


def block_diag(*arrs):
    """The matrices (scalars and vectors as one row) on the diagonal of one
    matrix, zeros elsewhere; the dtype promotes."""
    if not arrs:
        return jnp.zeros((1, 0))
    arrs = [jnp.atleast_2d(jnp.asarray(a)) for a in arrs]
    for a in arrs:
        if a.ndim != 2:
            raise ValueError(f"block_diag: arguments must have at most 2 dims, got {a.shape}")
    dt = jnp.result_type(*arrs)
    rows = sum(a.shape[0] for a in arrs)
    cols = sum(a.shape[1] for a in arrs)
    out = jnp.zeros((rows, cols), dt)
    r = c = 0
    for a in arrs:
        h, w = a.shape
        out = out + lax.pad(a.astype(dt), jnp.zeros((), dt),
                            ((r, rows - r - h, 0), (c, cols - c - w, 0)))
        r, c = r + h, c + w
    return out

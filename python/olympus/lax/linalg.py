"""olympus.lax.linalg: JAX's lax.linalg over olympus's matrix factorisation
primitives (cholesky, triangular_solve, lu, qr, eigh, svd, eig; rows in
src/prims/lapack.c, LAPACK kernels in src/cpu/lapack.c).

Operands are float32/float64/complex64/complex128 matrices [..., m, n],
batched over the leading dims; no dtype promotion happens here. Every
function works eagerly, under jit and vmap, and is differentiable where JAX's
is (eig: eigenvalues only; qr: m >= n; svd's vectors with full_matrices:
square matrices only). A factorisation that fails (cholesky of a matrix that
is not positive definite, an eigen/singular value iteration that does not
converge or meets NaNs) gives NaNs, as in JAX.
"""
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt

__all__ = [
    "cholesky", "eig", "eigh", "lu", "lu_pivots_to_permutation", "qr", "svd",
    "triangular_solve", "symmetrize",
]


def _bind(prim, *args, **params):
    return _core.bind(prim, args, params or None)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _dtype(x):
    return _dt.dtype_and_weak(x)[0]


def _as_array(x):
    if isinstance(x, _core.Array) or _core.is_tracer(x):
        return x
    return _core.asarray(x)


def _is_complex(x):
    return np.issubdtype(_dtype(x), np.complexfloating)


def _mT(x):
    nd = len(_shape(x))
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    return lax.transpose(x, perm)


def _H(x):
    t = _mT(x)
    return lax.conj(t) if _is_complex(x) else t


def symmetrize(x):
    """(x + x^H) / 2: the Hermitian part of x."""
    x = _as_array(x)
    return lax.div(lax.add(x, _H(x)), _core.asarray(2, dtype=_dtype(x)))


def cholesky(x, *, symmetrize_input=True):
    """The lower Cholesky factor l of x = l l^H (x Hermitian positive definite,
    [..., n, n]); NaNs where x is not positive definite. With
    symmetrize_input, x is replaced by (x + x^H) / 2 first (so the derivative
    is symmetric too); otherwise only x's lower triangle is read."""
    x = _as_array(x)
    if symmetrize_input:
        x = symmetrize(x)
    return _bind("cholesky", x)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """x with op(a) x = b (left_side) or x op(a) = b, a triangular [..., k, k]
    (the lower or upper triangle is read; its diagonal taken as ones with
    unit_diagonal), op(a) = a, a^T, conj(a) or a^H as transpose_a /
    conjugate_a say. b is [..., m, n] with a's batch dims, or a vector of one
    rank less (then x is too). Linear in b."""
    a, b = _as_array(a), _as_array(b)
    conjugate_a = bool(conjugate_a) and _is_complex(a)
    singleton = len(_shape(b)) == len(_shape(a)) - 1
    if singleton:
        b = lax.expand_dims(b, (len(_shape(b)) if left_side else len(_shape(b)) - 1,))
    out = _bind("triangular_solve", a, b, left_side=bool(left_side), lower=bool(lower),
                transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                unit_diagonal=bool(unit_diagonal))
    if singleton:
        nd = len(_shape(out))
        out = lax.squeeze(out, (nd - 1,) if left_side else (nd - 2,))
    return out


def lu(x):
    """LU with partial pivoting of x [..., m, n]: (lu, pivots, permutation).
    lu packs l (unit lower, below the diagonal) and u; pivots (int32,
    [..., min(m, n)]) are LAPACK's row swaps, 0-based; permutation (int32,
    [..., m]) is their result: x[..., permutation, :] == l @ u."""
    return _bind("lu", _as_array(x))


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation (int32 [..., permutation_size]) that applying the row
    swaps `pivots` ([..., k], swap row i with pivots[i], in order) to
    arange(permutation_size) gives."""
    from olympus._src.ad import vmap
    from olympus import numpy as jnp
    pivots = _as_array(pivots)
    m = operator.index(permutation_size)
    shape = _shape(pivots)
    k = shape[-1]
    if k > m:
        raise ValueError(f"lu_pivots_to_permutation: {k} pivots for a permutation of size {m}")

    def one(piv):
        def body(i, perm):
            j = piv[i]
            pi, pj = perm[i], perm[j]
            return perm.at[i].set(pj).at[j].set(pi)
        return lax.fori_loop(0, k, body, jnp.arange(m, dtype=np.int32))

    flat = jnp.reshape(lax.convert_element_type(pivots, np.int32), (-1, k))
    out = vmap(one)(flat) if flat.shape[0] else jnp.zeros((0, m), np.int32)
    return jnp.reshape(out, shape[:-1] + (m,))


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """(q, r) with x = q r: q [..., m, m] and r [..., m, n] with
    full_matrices, else q [..., m, k] and r [..., k, n], k = min(m, n)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported")
    return _bind("qr", _as_array(x), full_matrices=bool(full_matrices))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None):
    """(v, w) with x v = v diag(w) for a Hermitian x [..., n, n]: w real and
    ascending, v's columns orthonormal. With symmetrize_input, x is replaced
    by (x + x^H) / 2; otherwise the lower (or upper) triangle is read."""
    x = _as_array(x)
    n = _shape(x)[-1] if len(_shape(x)) else 0
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        raise NotImplementedError("eigh: subset_by_index is not supported")
    if symmetrize_input:
        x = symmetrize(x)
    v, w = _bind("eigh", x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    return v, w


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """(u, s, vh) with x = u diag(s) vh, s real and descending (s alone
    without compute_uv); u [..., m, m] and vh [..., n, n] with full_matrices,
    else [..., m, k] and [..., k, n]."""
    x = _as_array(x)
    if subset_by_index is not None:
        k = min(_shape(x)[-2:])
        if tuple(subset_by_index) != (0, k):
            raise NotImplementedError("svd: subset_by_index is not supported")
    out = _bind("svd", x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return out
    s, u, vh = out
    return u, s, vh


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True, use_magma=None):
    """[w, vl, vr] (each eigenvector set only when asked) for a square x
    [..., n, n]: complex eigenvalues w, left eigenvectors vl (vl^H x =
    diag(w) vl^H) and right ones vr (x vr = vr diag(w)) as unit-norm columns.
    Only the eigenvalues are differentiable (as in JAX)."""
    out = _bind("eig", _as_array(x), compute_left_eigenvectors=bool(compute_left_eigenvectors),
                compute_right_eigenvectors=bool(compute_right_eigenvectors))
    return list(out) if isinstance(out, tuple) else [out]


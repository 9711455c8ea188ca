"""olympus.numpy functions built on gather, scatter and sort: take and its
relatives, nonzero / where(size=), unique and the set operations,
searchsorted / digitize, bincount / histogram, interp, quantiles, delete /
insert, fill_diagonal.

Functions whose result's shape depends on values (nonzero, unique, the set
operations, bincount without length, compress, extract) work on concrete
values eagerly; under jit they need JAX's static `size=` (padding with
`fill_value`), and say so when it is missing. Index dtypes follow the x64
switch (int32 off, int64 on), as JAX's do.
"""
import builtins
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt
from olympus._src import indexing as _ix
from olympus._src import jnp

__all__ = ["take", "take_along_axis", "put_along_axis", "put", "place", "choose", "compress",
           "extract", "nonzero", "flatnonzero", "argwhere", "where", "unique", "unique_values",
           "unique_counts", "unique_inverse", "unique_all", "union1d", "intersect1d",
           "setdiff1d", "setxor1d", "in1d", "isin", "searchsorted", "digitize", "bincount",
           "histogram", "histogram_bin_edges", "histogram2d", "histogramdd", "interp",
           "quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian",
           "delete", "insert", "fill_diagonal"]

_is_tracer = _core.is_tracer


def _int_dtype():
    return _dt.default_int()


def _concrete(x, who, hint):
    """x's value as a NumPy array; a clear error when x is traced (outside
    jit, autodiff's tracers know their values)."""
    x = jnp._known(x)
    if _is_tracer(x):
        raise _core.ConcretizationTypeError(
            f"{who}: the size of the result depends on the values of a traced array; "
            f"{hint}")
    return np.asarray(x)


def _flat_or_axis(a, axis, who):
    """(a, axis): the flattened a and 0 when axis is None, else a and the
    normalised axis."""
    a = jnp.asarray(a)
    if axis is None:
        return jnp.ravel(a), 0
    return a, _norm_axis(axis, a.ndim, who)


def _norm_axis(axis, ndim, who):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.AxisError(f"{who}: axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


# ------------------------------------------------------------------ take & co

def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """a's elements at indices along axis (the flattened a when axis is None).
    mode: 'fill' (the default, as in JAX: out-of-bounds indices read
    fill_value, NaN for inexact dtypes), 'clip' (clamp; no negative wrap,
    as NumPy's), 'wrap' (modulo), 'promise_in_bounds'. Negative indices in
    [-n, 0) count from the end except under 'clip'."""
    if out is not None:
        raise NotImplementedError("take: out= is not supported (olympus arrays are immutable)")
    a, axis = _flat_or_axis(a, axis, "take")
    n = a.shape[axis]
    idx = jnp.asarray(indices)
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"take: indices must be integers, got {idx.dtype}")
    if mode is None or mode == "fill":
        mode = "fill"
    elif mode == "wrap":
        idx = jnp.remainder(idx, n) if n else idx
        mode = "clip"
    elif mode == "clip":
        idx = jnp.clip(idx, 0, max(n - 1, 0))
    elif mode == "raise":
        raise NotImplementedError("take: mode='raise' is not supported (JAX neither): use "
                                  "'fill', 'clip' or 'wrap'")
    key = (slice(None),) * axis + (idx,)
    return _ix.getitem(a, key, mode=mode, fill_value=fill_value, unique_indices=unique_indices,
                       indices_are_sorted=indices_are_sorted)


def _along_axis_key(arr, indices, axis, who):
    """(arr, key) indexing arr along axis by indices, the other axes paired
    elementwise (arr and indices broadcast on them)."""
    arr = jnp.asarray(arr)
    indices = jnp.asarray(indices)
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"{who}: indices must be integers, got {indices.dtype}")
    if axis is None:
        arr = jnp.ravel(arr)
        indices = jnp.ravel(indices)
        axis = 0
    if indices.ndim != arr.ndim:
        raise ValueError(f"{who}: indices and arr must have the same number of dimensions; "
                         f"got {indices.ndim} and {arr.ndim}")
    axis = _norm_axis(axis, arr.ndim, who)
    for d in range(arr.ndim):
        if d == axis:
            continue
        a, b = arr.shape[d], indices.shape[d]
        if a != b and 1 not in (a, b):
            raise ValueError(f"{who}: shapes {tuple(arr.shape)} and {tuple(indices.shape)} do "
                             f"not broadcast along axis {d}")
    ishape = [max(arr.shape[d], indices.shape[d]) if d != axis else indices.shape[d]
              for d in range(arr.ndim)]
    ashape = [ishape[d] if d != axis else arr.shape[d] for d in range(arr.ndim)]
    arr = jnp.broadcast_to(arr, tuple(ashape))
    indices = jnp.broadcast_to(indices, tuple(ishape))
    key = tuple(indices if d == axis else
                lax.broadcasted_iota(np.int32, tuple(ishape), d) for d in range(arr.ndim))
    return arr, key


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """arr[..., indices, ...] along axis, the other axes matched elementwise
    (NumPy's take_along_axis; out-of-bounds indices read fill_value
    under mode 'fill', the default, or clamp under 'clip')."""
    arr, key = _along_axis_key(arr, indices, axis, "take_along_axis")
    return _ix.getitem(arr, key, mode=mode or "fill", fill_value=fill_value)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """arr with values written at indices along axis (JAX's form: inplace must be False)."""
    if inplace:
        raise ValueError("put_along_axis: olympus arrays are immutable; pass inplace=False to "
                         "get the updated array")
    a, key = _along_axis_key(arr, indices, axis, "put_along_axis")
    if tuple(a.shape) != tuple(jnp.shape(arr)):
        raise ValueError("put_along_axis: indices must not broadcast arr")
    return _ix.update(a, key, values, "set", mode=mode)


def put(a, ind, v, mode=None, *, inplace=True):
    """a with its flat elements at ind replaced by v (cycled), as NumPy's put
    (JAX's form: inplace must be False). mode: 'fill'/'drop' (default),
    'clip', 'wrap'."""
    if inplace:
        raise ValueError("put: olympus arrays are immutable; pass inplace=False to get the "
                         "updated array")
    a = jnp.asarray(a)
    ind = jnp.ravel(jnp.asarray(ind))
    v = jnp.ravel(jnp.asarray(v))
    n = int(ind.shape[0])
    if n == 0 or v.shape[0] == 0:
        return a
    if v.shape[0] != n:
        v = take(v, jnp.arange(n) % v.shape[0], mode="clip") if n else v
    flat = jnp.ravel(a)
    size = flat.shape[0]
    if mode == "wrap":
        ind = jnp.remainder(ind, size)
    elif mode == "clip":
        ind = jnp.clip(ind, 0, size - 1)
    elif mode not in (None, "fill", "drop"):
        raise ValueError(f"put: mode must be 'fill', 'drop', 'clip' or 'wrap', got {mode!r}")
    return jnp.reshape(_ix.update(flat, (ind,), v, "set"), a.shape)


def place(arr, mask, vals, *, inplace=True):
    """arr with the elements where mask is true replaced, in order, by vals
    (cycled), as NumPy's place; works under jit (a cumulative count picks
    each element's value)."""
    if inplace:
        raise ValueError("place: olympus arrays are immutable; pass inplace=False to get the "
                         "updated array")
    arr = jnp.asarray(arr)
    m = jnp.ravel(jnp.broadcast_to(jnp.asarray(mask, dtype=bool), arr.shape))
    vals = jnp.ravel(jnp.asarray(vals))
    if vals.shape[0] == 0:
        return arr
    k = jnp.cumsum(jnp.astype(m, np.int32)) - 1
    picked = take(vals, jnp.remainder(jnp.maximum(k, 0), vals.shape[0]), mode="clip")
    return jnp.reshape(jnp.where(m, jnp.astype(picked, arr.dtype), jnp.ravel(arr)), arr.shape)


def choose(a, choices, out=None, mode="raise"):
    """choices[a[i]][i] for every i (all broadcast together). mode 'raise'
    checks concrete indices (traced ones clamp), 'wrap' and 'clip' as NumPy."""
    if out is not None:
        raise NotImplementedError("choose: out= is not supported (olympus arrays are immutable)")
    a = jnp.asarray(a)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"choose: a must hold integers, got {a.dtype}")
    choices = [jnp.asarray(c) for c in choices]
    n = len(choices)
    if mode == "raise":
        if not _is_tracer(a):
            v = np.asarray(a)
            if v.size and (v.min() < 0 or v.max() >= n):
                raise ValueError(f"choose: invalid entry in choice array (must be in [0, {n}))")
        a = jnp.clip(a, 0, n - 1)
    elif mode == "wrap":
        a = jnp.remainder(a, n)
    elif mode == "clip":
        a = jnp.clip(a, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    arrays = jnp.broadcast_arrays(a, *choices)
    stacked = jnp.stack(arrays[1:], axis=0)
    picked = take_along_axis(stacked, jnp.expand_dims(arrays[0], 0), axis=0, mode="clip")
    return jnp.squeeze(picked, 0)


# ------------------------------------------------------------------ nonzero & co

def nonzero(a, *, size=None, fill_value=None):
    """The indices of a's nonzero elements, one array per dimension. Eager
    on concrete values; with a static size (required under jit) the first
    `size` indices, padded with fill_value (0 by default; a tuple gives one
    per dimension)."""
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed (use "
                         "jnp.atleast_1d(a).nonzero())")
    idt = _int_dtype()
    if size is None:
        v = _concrete(a, "nonzero", "pass size= (a static bound on the count) under jit")
        return tuple(_core.asarray(i.astype(idt)) for i in np.nonzero(v))
    size = operator.index(size)
    mask = jnp.ravel(jnp.not_equal(a, 0)) if a.dtype != np.bool_ else jnp.ravel(a)
    n = mask.shape[0]
    count = jnp.sum(jnp.astype(mask, idt))
    pos = jnp.cumsum(jnp.astype(mask, idt)) - 1
    pos = jnp.where(mask, pos, size)  # the others fall out of bounds: dropped
    flat = _ix.update(jnp.zeros((size,), idt), (pos,), jnp.arange(n, dtype=idt), "set")
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * a.ndim
    if len(fills) != a.ndim:
        raise ValueError(f"nonzero: fill_value must be a scalar or a tuple of length {a.ndim}, "
                         f"got {fill_value!r}")
    valid = jnp.less(jnp.arange(size, dtype=idt), count)
    out = []
    for d, dim in enumerate(a.shape):
        stride = int(np.prod(a.shape[d + 1:], dtype=np.int64))
        coord = jnp.remainder(jnp.floor_divide(flat, stride), dim) if dim else flat
        fill = 0 if fills[d] is None else fills[d]
        out.append(jnp.where(valid, coord, jnp.astype(jnp.asarray(fill), idt)))
    return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements of a, flattened."""
    return nonzero(jnp.ravel(jnp.asarray(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The indices of a's nonzero elements as rows (n, a.ndim)."""
    a = jnp.asarray(a)
    if a.ndim == 0:
        return jnp.zeros((int(bool(a)) if not _is_tracer(a) else 0, 0), _int_dtype()) \
            if size is None else jnp.zeros((size, 0), _int_dtype())
    return jnp.stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """x where condition else y; with condition alone, nonzero(condition, size=, fill_value=)."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value apply to the one-argument form only")
    return jnp.where(condition, x, y)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of a along axis where condition is true (condition shorter
    than the axis counts as false beyond its end)."""
    if out is not None:
        raise NotImplementedError("compress: out= is not supported")
    a, axis = _flat_or_axis(a, axis, "compress")
    cond = jnp.ravel(jnp.asarray(condition))
    n = a.shape[axis]
    if cond.shape[0] > n:
        cv = _concrete(cond, "compress", "the condition is longer than the axis")
        if cv[n:].any():
            raise IndexError(f"compress: condition has true entries beyond the axis length {n}")
        cond = cond[:n]
    idx = nonzero(cond, size=size, fill_value=n if size is not None else None)[0]  # n: fills
    key = (slice(None),) * axis + (idx,)
    return _ix.getitem(a, key, mode="fill", fill_value=fill_value)


def extract(condition, arr, *, size=None, fill_value=0):
    """The elements of arr where condition is true, flattened."""
    return compress(jnp.ravel(jnp.asarray(condition)), jnp.ravel(jnp.asarray(arr)), size=size,
                    fill_value=fill_value)


# ------------------------------------------------------------------ unique & sets

def _flag_firsts(s, equal_nan):
    """Along axis 0 of sorted s: true where a new value starts."""
    if s.shape[0] == 0:
        return jnp.zeros((0,), bool)
    diff = jnp.not_equal(s[1:], s[:-1])
    if np.issubdtype(s.dtype, np.inexact) and equal_nan:
        diff = jnp.logical_and(diff, jnp.logical_not(jnp.logical_and(jnp.isnan(s[1:]),
                                                                     jnp.isnan(s[:-1]))))
    if diff.ndim > 1:
        diff = jnp.any(jnp.reshape(diff, (diff.shape[0], -1)), axis=1)
    return jnp.concatenate([jnp.ones((1,), bool), diff])


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None):
    """The sorted unique elements of ar (rows or slices along axis), with
    NumPy's optional index, inverse and counts. Eager on concrete values;
    under jit pass a static size (the result is padded with fill_value,
    by default the smallest unique value; padded counts are 0)."""
    ar = jnp.asarray(ar)
    if axis is None:
        data = jnp.ravel(ar)
    else:
        axis = _norm_axis(axis, ar.ndim, "unique")
        data = jnp.moveaxis(ar, axis, 0)
    n = data.shape[0]
    idt = _int_dtype()
    if data.ndim == 1:
        perm = jnp.argsort(data, stable=True)
    else:
        cols = jnp.reshape(data, (n, -1))
        keys = tuple(cols[:, j] for j in range(cols.shape[1] - 1, -1, -1))
        perm = jnp.lexsort(keys) if keys else jnp.arange(n)
    perm = jnp.astype(perm, idt)
    s = take(data, perm, axis=0, mode="clip") if n else data
    firsts = _flag_firsts(s, equal_nan)
    if size is None:
        fv = _concrete(firsts, "unique", "pass size= (a static bound on the number of unique "
                                         "values) under jit")
        k = int(fv.sum())
    else:
        k = operator.index(size)
    starts = nonzero(firsts, size=k, fill_value=0)[0] if n else jnp.zeros((k,), idt)
    count = jnp.sum(jnp.astype(firsts, idt))
    valid = jnp.less(jnp.arange(k, dtype=idt), count)
    vals = take(s, starts, axis=0, mode="clip") if n else jnp.zeros((k,) + data.shape[1:],
                                                                         data.dtype)
    if size is not None and n:
        fill = vals[0] if fill_value is None else jnp.asarray(fill_value, dtype=vals.dtype)
        vmask = jnp.reshape(valid, (k,) + (1,) * (vals.ndim - 1))
        vals = jnp.where(vmask, vals, fill)
    if axis is not None:
        vals = jnp.moveaxis(vals, 0, axis)
    out = [vals]
    if return_index:
        out.append(take(perm, starts, mode="clip") if n else jnp.zeros((k,), idt))
    if return_inverse:
        group = jnp.cumsum(jnp.astype(firsts, idt)) - 1
        inv = _ix.update(jnp.zeros((n,), idt), (perm,), group, "set") if n else \
            jnp.zeros((0,), idt)
        if axis is None and np.lib.NumpyVersion(np.__version__) >= "2.0.0":
            inv = jnp.reshape(inv, ar.shape)
        out.append(inv)
    if return_counts:
        ends = jnp.concatenate([starts[1:], jnp.full((1,), n, idt)]) if k else starts
        nxt = jnp.where(jnp.less(jnp.arange(k, dtype=idt) + 1, count), ends, n)
        out.append(jnp.where(valid, nxt - starts, 0))
    return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, *, size=None, fill_value=None):
    """The array API's unique_values: unique(x)."""
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, *, size=None, fill_value=None):
    from collections import namedtuple
    v, c = unique(x, return_counts=True, size=size, fill_value=fill_value)
    return namedtuple("UniqueCountsResult", ["values", "counts"])(v, c)


def unique_inverse(x, *, size=None, fill_value=None):
    from collections import namedtuple
    v, i = unique(x, return_inverse=True, size=size, fill_value=fill_value)
    return namedtuple("UniqueInverseResult", ["values", "inverse_indices"])(
        v, jnp.reshape(i, jnp.shape(x)))


def unique_all(x, *, size=None, fill_value=None):
    from collections import namedtuple
    v, idx, inv, c = unique(x, True, True, True, size=size, fill_value=fill_value)
    return namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])(
        v, idx, jnp.reshape(inv, jnp.shape(x)), c)


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """element's entries found in test_elements (a sorted search, O((n + m) log m))."""
    element = jnp.asarray(element)
    t = jnp.ravel(jnp.asarray(test_elements))
    if t.shape[0] == 0:
        found = jnp.zeros(element.shape, bool)
    else:
        st = jnp.sort(t)
        pos = searchsorted(st, element)
        found = jnp.equal(take(st, pos, mode="clip"), element)
    return jnp.logical_not(found) if invert else found


def in1d(ar1, ar2, assume_unique=False, invert=False):
    """isin over the flattened ar1."""
    return isin(jnp.ravel(jnp.asarray(ar1)), ar2, assume_unique, invert)


def _select(values, mask, size, fill_value, who):
    """values[mask] (1-D): eager, or padded to size under jit."""
    if size is None:
        m = _concrete(mask, who, "pass size= under jit")
        return take(values, _core.asarray(np.nonzero(m)[0].astype(_int_dtype())), mode="clip")
    idx = nonzero(mask, size=size, fill_value=-1)[0]
    out = take(values, idx, mode="fill", fill_value=0)
    if fill_value is None:
        first = take(values, jnp.zeros((1,), _int_dtype()), mode="clip")[0] \
            if values.shape[0] else 0
        fill_value = first
    return jnp.where(jnp.greater_equal(idx, 0), out, jnp.asarray(fill_value, values.dtype))


def _sorted_firsts(a):
    """(sorted 1-D a, mask of each value's first occurrence): unique values
    at a static size."""
    srt = jnp.sort(jnp.ravel(jnp.asarray(a)))
    return srt, _flag_firsts(srt, True)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted unique values found in either array."""
    return unique(jnp.concatenate([jnp.ravel(jnp.asarray(ar1)), jnp.ravel(jnp.asarray(ar2))]),
                  size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values of ar1 not in ar2."""
    srt, first = _sorted_firsts(ar1)
    return _select(srt, jnp.logical_and(first, isin(srt, ar2, invert=True)), size, fill_value,
                   "setdiff1d")


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """The sorted unique values found in both arrays; with return_indices
    (eager only) also the first index of each in ar1 and ar2."""
    if return_indices:
        ua, ia = unique(ar1, return_index=True)
        ub, ib = unique(ar2, return_index=True)
        keep = isin(ua, ub)
        vals = _select(ua, keep, size, fill_value, "intersect1d")
        ai = _select(ia, keep, size, 0, "intersect1d")
        bi = take(ib, searchsorted(ub, vals), mode="clip")
        return vals, ai, bi
    srt, first = _sorted_firsts(ar1)
    return _select(srt, jnp.logical_and(first, isin(srt, ar2)), size, fill_value, "intersect1d")


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted unique values found in exactly one of the arrays."""
    sa, fa = _sorted_firsts(ar1)
    sb, fb = _sorted_firsts(ar2)
    vals = jnp.concatenate([sa, sb])
    keep = jnp.concatenate([jnp.logical_and(fa, isin(sa, sb, invert=True)),
                            jnp.logical_and(fb, isin(sb, sa, invert=True))])
    if vals.shape[0] == 0:
        return vals
    perm = jnp.lexsort((vals, jnp.logical_not(keep)))  # kept first, by value
    return _select(take(vals, perm, mode="clip"), take(keep, perm, mode="clip"), size,
                   fill_value, "setxor1d")


# ------------------------------------------------------------------ searching

def _less(a, b, inexact):
    """a < b in sort order (NaNs last)."""
    if not inexact:
        return jnp.less(a, b)
    return jnp.logical_or(jnp.less(a, b), jnp.logical_and(jnp.isnan(b),
                                                          jnp.logical_not(jnp.isnan(a))))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Insertion points of v into the sorted 1-D a (NaNs sort last), by a
    branch-free binary search: ceil(log2(n + 1)) vectorised steps."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a = jnp.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got shape {tuple(a.shape)}")
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    v = jnp.asarray(v)
    dt = _dt.result_type(a, v)
    a = jnp.astype(a, dt)
    v = jnp.astype(v, dt)
    inexact = np.issubdtype(dt, np.inexact)
    if np.issubdtype(dt, np.complexfloating):
        raise TypeError("searchsorted: complex values are not supported")
    n = a.shape[0]
    idt = _int_dtype()
    lo = jnp.zeros(v.shape, idt)
    if n == 0:
        return lo
    hi = jnp.full(v.shape, n, idt)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = jnp.floor_divide(lo + hi, 2)
        am = take(a, mid, mode="clip")
        go_right = _less(am, v, inexact) if side == "left" else \
            jnp.logical_not(_less(v, am, inexact))
        go_right = jnp.logical_and(go_right, jnp.less(lo, hi))
        lo = jnp.where(go_right, mid + 1, lo)
        hi = jnp.where(go_right, hi, mid)
    return lo


def digitize(x, bins, right=False):
    """The index of the bin each x falls in (bins increasing or decreasing)."""
    x = jnp.asarray(x)
    bins = jnp.asarray(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-D, got shape {tuple(bins.shape)}")
    if bins.shape[0] == 0:
        return jnp.zeros(x.shape, _int_dtype())
    side = "left" if right else "right"
    inc = searchsorted(bins, x, side)
    dec = bins.shape[0] - searchsorted(bins[::-1], x, side)
    return jnp.where(jnp.greater_equal(bins[-1], bins[0]), inc, dec)


# ------------------------------------------------------------------ counting

def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed weights) of each value in the non-negative int
    array x. length (static; required under jit) fixes the output's size;
    eagerly it is max(x) + 1 or minlength. Values out of range are dropped."""
    x = jnp.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"bincount: x must hold integers, got {x.dtype}")
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {tuple(x.shape)}")
    if length is None:
        xv = _concrete(x, "bincount", "pass length= (a static output size) under jit")
        if xv.size and xv.min() < 0:
            raise ValueError("bincount: x must be non-negative")
        length = max(int(xv.max()) + 1 if xv.size else 0, operator.index(minlength))
    if weights is None:
        w = jnp.ones(x.shape, _int_dtype())
    else:
        w = jnp.asarray(weights)
        if np.issubdtype(w.dtype, np.bool_) or np.issubdtype(w.dtype, np.integer):
            w = jnp.astype(w, _dt.default_float())
    length = operator.index(length)
    x = jnp.where(jnp.less(x, 0), length, x)  # dropped (not counted from the end)
    return _ix.update(jnp.zeros((length,), w.dtype), (x,), w, "add")


def _range_of(a, range_):
    if range_ is not None:
        lo, hi = range_
        return jnp.asarray(lo, _dt.default_float()), jnp.asarray(hi, _dt.default_float())
    a = jnp.ravel(a)
    if a.shape[0] == 0:
        return jnp.asarray(0.0, _dt.default_float()), jnp.asarray(1.0, _dt.default_float())
    return jnp.astype(jnp.min(a), _dt.default_float()), jnp.astype(jnp.max(a), _dt.default_float())


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges histogram uses: bins + 1 evenly spaced edges over range
    (default [min, max], widened by 0.5 each way when min == max), or bins
    itself when it is an array."""
    a = jnp.asarray(a)
    if not isinstance(bins, (int, np.integer)):
        return jnp.asarray(bins)
    lo, hi = _range_of(a, range)
    same = jnp.equal(lo, hi)
    lo = jnp.where(same, lo - 0.5, lo)
    hi = jnp.where(same, hi + 0.5, hi)
    steps = jnp.arange(bins + 1, dtype=lo.dtype) / bins
    return lo + (hi - lo) * steps


def _bin_index(v, edges):
    """The bin of each v between sorted edges (the last bin includes its right
    edge, as NumPy's), or -1 outside them."""
    nb = edges.shape[0] - 1
    i = searchsorted(edges, v, "right") - 1
    i = jnp.where(jnp.equal(v, edges[-1]), nb - 1, i)
    inside = jnp.logical_and(jnp.greater_equal(v, edges[0]), jnp.less_equal(v, edges[-1]))
    return jnp.where(inside, i, -1)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """(counts, edges) as NumPy's histogram (the last bin includes its right edge)."""
    a = jnp.ravel(jnp.asarray(a))
    edges = histogram_bin_edges(a, bins, range, weights)
    nb = edges.shape[0] - 1
    idx = _bin_index(a, edges)
    idx = jnp.where(jnp.less(idx, 0), nb, idx)  # outside: out of bounds, dropped
    if weights is None:
        w = jnp.ones(a.shape, _int_dtype())
    else:
        w = jnp.ravel(jnp.asarray(weights))
    counts = _ix.update(jnp.zeros((nb,), w.dtype), (idx,), w, "add")
    if density:
        widths = edges[1:] - edges[:-1]
        counts = counts / widths / jnp.sum(counts)
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """(counts, [edges per dimension]) of an (n, d) sample."""
    sample = jnp.asarray(sample)
    if sample.ndim == 1:
        sample = sample[:, None]
    n, d = sample.shape
    bins_list = bins if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = range if range is not None else [None] * d
    edges, flat = [], None
    shape = []
    for k in builtins.range(d):
        e = histogram_bin_edges(sample[:, k], bins_list[k], ranges[k])
        nb = e.shape[0] - 1
        i = _bin_index(sample[:, k], e)
        edges.append(e)
        shape.append(nb)
        flat = i if flat is None else jnp.where(jnp.logical_or(flat < 0, i < 0), -1,
                                                 flat * nb + i)
    w = jnp.ones((n,), _int_dtype()) if weights is None else jnp.asarray(weights)
    total = int(np.prod(shape))
    flat = jnp.where(jnp.less(flat, 0), total, flat)  # outside: dropped
    counts = jnp.reshape(_ix.update(jnp.zeros((total,), w.dtype), (flat,), w, "add"), shape)
    if density:
        vol = None
        for k, e in enumerate(edges):
            wk = e[1:] - e[:-1]
            wk = jnp.reshape(wk, [-1 if j == k else 1 for j in builtins.range(d)])
            vol = wk if vol is None else vol * wk
        counts = counts / vol / jnp.sum(counts)
    return counts, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """(counts, xedges, yedges) of points (x, y)."""
    counts, (ex, ey) = histogramdd(jnp.stack([jnp.ravel(jnp.asarray(x)),
                                              jnp.ravel(jnp.asarray(y))], axis=1),
                                   bins, range, weights, density)
    return counts, ex, ey


# ------------------------------------------------------------------ interpolation

def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x, as NumPy's interp."""
    x = jnp.asarray(x)
    xp = jnp.asarray(xp)
    fp = jnp.asarray(fp)
    if xp.ndim != 1 or fp.ndim != 1 or xp.shape[0] != fp.shape[0]:
        raise ValueError(f"interp: xp and fp must be 1-D of one length, got {tuple(xp.shape)} "
                         f"and {tuple(fp.shape)}")
    if xp.shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    if np.issubdtype(fp.dtype, np.complexfloating):
        re = interp(x, xp, jnp.real(fp), None if left is None else np.real(left),
                    None if right is None else np.real(right), period)
        im = interp(x, xp, jnp.imag(fp), None if left is None else np.imag(left),
                    None if right is None else np.imag(right), period)
        return re + 1j * im
    dt = _dt.to_inexact(_dt.result_type(x, xp, fp))
    x, xp, fp = (jnp.astype(t, dt) for t in (x, xp, fp))
    if period is not None:
        if period == 0:
            raise ValueError("interp: period must be a non-zero value")
        period = abs(period)
        x = jnp.remainder(x, period)
        xp = jnp.remainder(xp, period)
        order = jnp.argsort(xp)
        xp = take(xp, order, mode="clip")
        fp = take(fp, order, mode="clip")
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    n = xp.shape[0]
    if n == 1:
        out = jnp.broadcast_to(fp[0], x.shape)
    else:
        i = jnp.clip(searchsorted(xp, x, side="right"), 1, n - 1)
        x0 = take(xp, i - 1, mode="clip")
        x1 = take(xp, i, mode="clip")
        f0 = take(fp, i - 1, mode="clip")
        f1 = take(fp, i, mode="clip")
        dx = x1 - x0
        t = jnp.where(jnp.equal(dx, 0), 0, (x - x0) / jnp.where(jnp.equal(dx, 0), 1, dx))
        out = f0 + t * (f1 - f0)
        out = jnp.where(jnp.equal(x, x1), f1, out)  # exact at the knots (and dx == 0)
    if period is None:
        lv = fp[0] if left is None else jnp.asarray(left, dt)
        rv = fp[-1] if right is None else jnp.asarray(right, dt)
        out = jnp.where(jnp.less(x, xp[0]), lv, out)
        out = jnp.where(jnp.greater(x, xp[-1]), rv, out)
    return out


# ------------------------------------------------------------------ quantiles

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a, q, axis, method, keepdims, ignore_nan, who):
    if method not in _METHODS:
        raise ValueError(f"{who}: method must be one of {_METHODS}, got {method!r}")
    a = jnp.asarray(a)
    if np.issubdtype(a.dtype, np.complexfloating):
        raise TypeError(f"{who}: complex arrays are not supported")
    dt = _dt.to_inexact(a.dtype)
    a = jnp.astype(a, dt)
    q = jnp.asarray(q, dt)
    if not _is_tracer(q):
        qv = np.asarray(q)
        if qv.size and (qv.min() < 0 or qv.max() > 1):
            raise ValueError(f"{who}: quantiles must be in the range [0, 1]")
    nd = a.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(sorted(_norm_axis(ax, nd, who) for ax in
                            (axis if isinstance(axis, (tuple, list)) else (axis,))))
    keep = [d for d in range(nd) if d not in axes]
    moved = jnp.transpose(a, keep + list(axes)) if nd else a
    rest = tuple(a.shape[d] for d in keep)
    m = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    flat = jnp.reshape(moved, rest + (m,))
    s = jnp.sort(flat, axis=-1)  # NaNs last
    nan_count = jnp.sum(jnp.astype(jnp.isnan(flat), _int_dtype()), axis=-1, keepdims=True)
    n_valid = m - nan_count if ignore_nan else jnp.full(rest + (1,), m, _int_dtype())
    qs = jnp.reshape(q, q.shape + (1,) * (len(rest) + 1))
    pos = qs * jnp.astype(jnp.maximum(n_valid - 1, 0), dt)       # q-shape + rest + (1,)
    lo = jnp.floor(pos)
    hi = jnp.ceil(pos)
    if method == "lower":
        pos_lo = pos_hi = lo
    elif method == "higher":
        pos_lo = pos_hi = hi
    elif method == "nearest":
        pos_lo = pos_hi = jnp.round(pos)  # half to even, as NumPy
    else:
        pos_lo, pos_hi = lo, hi
    bshape = q.shape + rest + (1,)
    sb = jnp.broadcast_to(s, q.shape + rest + (m,))

    def at(p):
        i = jnp.broadcast_to(jnp.astype(p, _int_dtype()), bshape)
        return jnp.squeeze(take_along_axis(sb, i, axis=-1, mode="clip"), -1)
    vlo, vhi = at(pos_lo), at(pos_hi)
    if method == "linear":
        frac = jnp.squeeze(pos - lo, -1)
        out = vlo + (vhi - vlo) * frac
        out = jnp.where(jnp.equal(frac, 0), vlo, out)
    elif method == "midpoint":
        out = (vlo + vhi) / 2
    else:
        out = vlo
    if ignore_nan:
        out = jnp.where(jnp.squeeze(jnp.equal(n_valid, 0), -1), np.nan, out)
    else:
        out = jnp.where(jnp.squeeze(jnp.greater(nan_count, 0), -1), np.nan, out)
    if keepdims:
        shape = list(a.shape)
        for d in axes:
            shape[d] = 1
        out = jnp.reshape(out, q.shape + tuple(shape))
    return out


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, interpolation=None):
    """The q-th quantiles of a along axis (q in [0, 1]; q's dims come first).
    Methods: linear, lower, higher, midpoint, nearest. NaN if a slice has one."""
    if out is not None:
        raise NotImplementedError("quantile: out= is not supported")
    return _quantile(a, q, axis, interpolation or method, keepdims, False, "quantile")


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, interpolation=None):
    """quantile ignoring NaNs (NaN for an all-NaN slice)."""
    if out is not None:
        raise NotImplementedError("nanquantile: out= is not supported")
    return _quantile(a, q, axis, interpolation or method, keepdims, True, "nanquantile")


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, interpolation=None):
    """quantile with q in percent."""
    return quantile(a, jnp.asarray(q) / 100, axis, out, overwrite_input, method, keepdims,
                    interpolation=interpolation)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, interpolation=None):
    """nanquantile with q in percent."""
    return nanquantile(a, jnp.asarray(q) / 100, axis, out, overwrite_input, method, keepdims,
                       interpolation=interpolation)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median along axis (NaN if a slice has one)."""
    return quantile(a, 0.5, axis, out, overwrite_input, "linear", keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median ignoring NaNs."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "linear", keepdims)


# ------------------------------------------------------------------ delete / insert

def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """arr without the entries obj (an int, slice or index array; a traced
    scalar int works under jit) along axis (flattened when None)."""
    arr, axis = _flat_or_axis(arr, axis, "delete")
    n = arr.shape[axis]
    if _is_tracer(obj) and jnp.ndim(obj) == 0:
        i = jnp.where(jnp.less(obj, 0), obj + n, obj)
        keep = jnp.arange(n - 1, dtype=_int_dtype())
        keep = jnp.where(jnp.greater_equal(keep, i), keep + 1, keep)
    else:
        if isinstance(obj, slice):
            sel = np.arange(n)[obj]
        else:
            sel = _concrete(obj, "delete", "pass a static obj, or a scalar index")
            if sel.dtype == np.bool_:
                sel = np.nonzero(sel)[0]
        keep = np.delete(np.arange(n), sel)
        keep = _core.asarray(keep.astype(_int_dtype()))
    return take(arr, keep, axis=axis, mode="clip")


def insert(arr, obj, values, axis=None):
    """arr with values inserted before the indices obj along axis (NumPy's
    insert; obj must be concrete)."""
    arr, axis = _flat_or_axis(arr, axis, "insert")
    n = arr.shape[axis]
    if isinstance(obj, slice):
        o = np.arange(n + 1)[obj]
    else:
        o = _concrete(obj, "insert", "obj must be concrete")
    values = jnp.asarray(values, dtype=arr.dtype)
    if np.ndim(o) == 0:
        o = int(o)
        v = values if values.ndim else jnp.reshape(values, (1,))
        if v.ndim < arr.ndim:
            v = jnp.reshape(v, (1,) * (arr.ndim - v.ndim) + tuple(v.shape))
        v = jnp.moveaxis(v, 0, axis) if v.ndim == arr.ndim and arr.ndim > 1 and \
            values.ndim == arr.ndim else v
        k = v.shape[axis]
        shape = list(arr.shape)
        shape[axis] = k
        v = jnp.broadcast_to(v, tuple(shape))
        order = np.insert(np.arange(n), o, np.arange(n, n + k))
    else:
        o = np.asarray(o).ravel()
        k = o.shape[0]
        shape = list(arr.shape)
        shape[axis] = k
        v = values
        if v.ndim == 1 and arr.ndim > 1 and v.shape[0] == k:
            v = jnp.moveaxis(jnp.reshape(v, (k,) + (1,) * (arr.ndim - 1)), 0, axis)
        v = jnp.broadcast_to(v, tuple(shape))
        order = np.insert(np.arange(n), o, np.arange(n, n + k))
    both = jnp.concatenate([arr, v], axis=axis)
    return take(both, _core.asarray(order.astype(_int_dtype())), axis=axis, mode="clip")


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """a with its main diagonal set to val (cycled), as NumPy's fill_diagonal
    (JAX's form: inplace must be False)."""
    if inplace:
        raise ValueError("fill_diagonal: olympus arrays are immutable; pass inplace=False to "
                         "get the updated array")
    a = jnp.asarray(a)
    if a.ndim < 2:
        raise ValueError("fill_diagonal: array must be at least 2-d")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError("fill_diagonal: all dimensions of input must be of equal length")
    shape = a.shape
    if a.ndim == 2:
        step = shape[1] + 1
        end = a.size if wrap else shape[1] * shape[1]
    else:
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = a.size
    idx = np.arange(0, min(end, a.size), step)
    v = jnp.ravel(jnp.asarray(val, dtype=a.dtype))
    if v.shape[0] == 0:
        return a
    v = take(v, _core.asarray((np.arange(idx.shape[0]) % v.shape[0]).astype(np.int32)),
                 mode="clip")
    flat = _ix.update(jnp.ravel(a), (_core.asarray(idx.astype(np.int32)),), v, "set")
    return jnp.reshape(flat, shape)

"""lax.gather and the lax.scatter family: JAX's dimension-number API over the
gather / scatter primitives (src/prims/gather.c), plus the *_in_dim helpers.

The index vector is the last axis of the indices, as in JAX. Out-of-bounds
modes (GatherScatterMode): CLIP clamps the start of each window so it fits;
FILL_OR_DROP reads `fill_value` (gather) or skips the update (scatter);
PROMISE_IN_BOUNDS is the caller's promise, kept safe here as clip (gather)
and drop (scatter). The default (mode=None) is FILL_OR_DROP, as in lax.
"""
import enum
import operator
from typing import NamedTuple, Sequence

import numpy as np

from olympus import _core
from olympus._src import dtypes as _dt

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather",
           "scatter", "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max",
           "scatter_apply", "index_in_dim", "dynamic_index_in_dim", "dynamic_slice_in_dim",
           "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim", "index_take"]


class GatherScatterMode(enum.Enum):
    CLIP = "clip"
    FILL_OR_DROP = "fill_or_drop"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @staticmethod
    def from_any(s):
        """A mode from a GatherScatterMode, one of 'clip', 'fill', 'drop',
        'fill_or_drop', 'promise_in_bounds', or None (FILL_OR_DROP)."""
        if isinstance(s, GatherScatterMode):
            return s
        if s is None or s in ("fill", "drop", "fill_or_drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "clip":
            return GatherScatterMode.CLIP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"Unknown gather mode {s!r}: expected one of 'clip', 'fill', 'drop', "
                         "'promise_in_bounds' or a GatherScatterMode")


class GatherDimensionNumbers(NamedTuple):
    """How gather maps index vectors to operand windows (JAX's fields)."""
    offset_dims: Sequence[int]
    collapsed_slice_dims: Sequence[int]
    start_index_map: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    start_indices_batching_dims: Sequence[int] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How scatter maps index vectors and update windows to the operand (JAX's fields)."""
    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


def _ints(xs):
    return tuple(operator.index(x) for x in xs)


def _check_indices(indices, who):
    dt = _dt.dtype_and_weak(indices)[0]
    if not np.issubdtype(dt, np.integer):
        raise TypeError(f"{who}: indices must have an integer dtype, got {np.dtype(dt).name}")
    return indices if (isinstance(indices, _core.Array) or _core.is_tracer(indices)) \
        else _core.asarray(indices)


def _fill_number(fill_value):
    if fill_value is None:
        return float("nan")  # the dtype's default (NaN, min int, max uint, True)
    v = np.asarray(fill_value)
    if v.shape != ():
        raise ValueError(f"gather: fill_value must be a scalar, got shape {v.shape}")
    return float(v.real) if np.iscomplexobj(v) else float(v)


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """For each index vector (the last axis of start_indices), the window of
    slice_sizes of operand at that start; see GatherDimensionNumbers."""
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError("gather: dimension_numbers must be a GatherDimensionNumbers, got "
                        f"{type(dn).__name__}")
    idx = _check_indices(start_indices, "gather")
    params = {
        "offset_dims": _ints(dn.offset_dims),
        "collapsed_slice_dims": _ints(dn.collapsed_slice_dims),
        "start_index_map": _ints(dn.start_index_map),
        "operand_batching_dims": _ints(dn.operand_batching_dims),
        "start_indices_batching_dims": _ints(dn.start_indices_batching_dims),
        "slice_sizes": _ints(slice_sizes),
        "mode": GatherScatterMode.from_any(mode).value,
        "fill_value": _fill_number(fill_value),
        "indices_are_sorted": bool(indices_are_sorted),
        "unique_indices": bool(unique_indices),
    }
    return _core.bind("gather", (operand, idx), params)


def _scatter(prim, operand, indices, updates, dn, indices_are_sorted, unique_indices, mode):
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"{prim}: dimension_numbers must be a ScatterDimensionNumbers, got "
                        f"{type(dn).__name__}")
    idx = _check_indices(indices, prim)
    odt, oweak = _dt.dtype_and_weak(operand)
    if _dt.dtype_and_weak(updates)[0] != odt:
        updates = _core.bind("convert_element_type", (updates,),
                             {"new_dtype": np.dtype(odt).name, "weak": False})
    params = {
        "update_window_dims": _ints(dn.update_window_dims),
        "inserted_window_dims": _ints(dn.inserted_window_dims),
        "scatter_dims_to_operand_dims": _ints(dn.scatter_dims_to_operand_dims),
        "operand_batching_dims": _ints(dn.operand_batching_dims),
        "scatter_indices_batching_dims": _ints(dn.scatter_indices_batching_dims),
        "mode": GatherScatterMode.from_any(mode).value,
        "indices_are_sorted": bool(indices_are_sorted),
        "unique_indices": bool(unique_indices),
    }
    return _core.bind(prim, (operand, idx, updates), params)


def _scatter_fn(prim, doc):
    def f(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
          unique_indices=False, mode=None):
        return _scatter(prim, operand, scatter_indices, updates, dimension_numbers,
                        indices_are_sorted, unique_indices, mode)
    f.__name__ = f.__qualname__ = prim
    f.__doc__ = doc
    return f


scatter = _scatter_fn("scatter", "operand with the update windows written at the indices "
                      "(with repeated indices the last update in index order wins).")
scatter_add = _scatter_fn("scatter_add", "operand with the update windows added at the indices.")
scatter_mul = _scatter_fn("scatter_mul", "operand with the update windows multiplied in.")
scatter_min = _scatter_fn("scatter_min", "operand with the elementwise minimum of the updates.")
scatter_max = _scatter_fn("scatter_max", "operand with the elementwise maximum of the updates.")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """operand with the update windows subtracted at the indices."""
    neg = _core.bind("neg", (updates,), None)
    return scatter_add(operand, scatter_indices, neg, dimension_numbers,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """operand with the elementwise func applied where the (update_shape-sized)
    windows at the indices land. Each element is transformed once, however
    many windows cover it."""
    from olympus._src import jnp
    touched = _scatter("scatter", jnp.zeros(np.shape(operand), bool), scatter_indices,
                       jnp.ones(tuple(update_shape), bool), dimension_numbers,
                       indices_are_sorted, unique_indices, mode)
    return jnp.where(touched, func(operand), operand)


# ------------------------------------------------------------------ *_in_dim helpers

def _axis(axis, ndim, who):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis} is out of bounds for an operand of rank {ndim}")
    return axis % ndim


def index_in_dim(operand, index, axis=0, keepdims=True):
    """operand's slice at a static index along axis (negative counts from the end)."""
    from olympus import lax
    shape = np.shape(operand)
    axis = _axis(axis, len(shape), "index_in_dim")
    n = shape[axis]
    index = operator.index(index)
    if not -n <= index < n:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
    index %= n
    out = lax.slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else lax.squeeze(out, (axis,))


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """operand[..., start:start+slice_size, ...] along axis (start may be traced; clamped)."""
    from olympus import lax
    shape = np.shape(operand)
    axis = _axis(axis, len(shape), "dynamic_slice_in_dim")
    starts = [np.int32(0)] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = operator.index(slice_size)
    return lax.dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """operand's slice at a (possibly traced, clamped) index along axis."""
    from olympus import lax
    axis = _axis(axis, len(np.shape(operand)), "dynamic_index_in_dim")
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else lax.squeeze(out, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """operand with update written from start_index along axis."""
    from olympus import lax
    axis = _axis(axis, len(np.shape(operand)), "dynamic_update_slice_in_dim")
    starts = [np.int32(0)] * len(np.shape(operand))
    starts[axis] = start_index
    return lax.dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis):
    """operand with update (operand's shape without axis, or with it of size 1)
    written at index along axis."""
    from olympus import lax
    axis = _axis(axis, len(np.shape(operand)), "dynamic_update_index_in_dim")
    if len(np.shape(update)) == len(np.shape(operand)) - 1:
        update = lax.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def index_take(src, idxs, axes):
    """src[idxs[0], idxs[1], ...] along axes (the index arrays broadcast together)."""
    from olympus._src import jnp
    idxs = [jnp.asarray(i) for i in idxs]
    axes = tuple(_axis(a, len(np.shape(src)), "index_take") for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    idxs = jnp.broadcast_arrays(*idxs)
    indices = jnp.stack([jnp.astype(i, np.int32) for i in idxs], axis=-1)
    shape = np.shape(src)
    offset = tuple(range(indices.ndim - 1, indices.ndim - 1 + len(shape) - len(axes)))
    dn = GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=tuple(sorted(axes)),
                                start_index_map=axes)
    sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    return gather(src, indices, dn, sizes, mode="clip")

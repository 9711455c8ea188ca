"""NumPy indexing on olympus arrays: x[key] and x.at[key].set/add/... .

Keys hold ints (static or traced), slices with any step, None, Ellipsis,
integer arrays (NumPy's "advanced" indexing, also lists) and boolean masks.

Basic keys (ints, slices, None) lower to slice / rev / dynamic_slice and
their updates to dynamic_update_slice or pad + select, as before. A key with
an index array, or an update whose static int index is out of bounds, or an
explicit mode=, lowers to one gather (getitem) or one scatter (updates)
through _Indexer, JAX's translation:

- a full slice `:` is a window dim (the whole axis);
- a step-1 partial slice is a window dim of its length with a constant start;
- a strided or reversed slice is an index batch dim (an arange), collapsed;
- index arrays and ints (with an array present, NumPy counts ints as array
  indices) broadcast together into one block of batch dims, placed where the
  first of them stands when they are adjacent in the key, else first;
- None adds a size-1 axis after the gather (updates drop it before the scatter).

Out of bounds (JAX's rules): a gather clamps (mode "clip"; also for static
ints: `arange(10)[11]` is 9), a scatter drops the update ("fill_or_drop");
`.at[...].get(mode="fill", fill_value=...)` reads a fill value instead.
Negative indices count from the end first. Boolean masks need concrete
values (their result's shape depends on them): under jit they raise
NonConcreteBooleanIndexError, except `x.at[mask].set(v)` with a mask of x's
shape and a scalar v, which becomes a select.
"""
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt
from olympus._src import jnp
from olympus._src.slicing import GatherDimensionNumbers, ScatterDimensionNumbers
from olympus.errors import NonConcreteBooleanIndexError

Array = _core.Array


def _is_traced(x):
    return _core.is_tracer(x)


def _is_static_int(k):
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, (int, np.integer)):
        return True
    if isinstance(k, np.ndarray) and k.ndim == 0 and np.issubdtype(k.dtype, np.integer):
        return True
    if isinstance(k, Array) and k.ndim == 0 and np.issubdtype(k.dtype, np.integer):
        return True
    return False


def _is_dynamic_int(k):
    return _is_traced(k) and k.ndim == 0 and np.issubdtype(k.dtype, np.integer)


def _is_array_index(k):
    """An index array (ints or bools) other than a 0-d integer (an int)."""
    if isinstance(k, (list, tuple)):
        return True
    if isinstance(k, (bool, np.bool_)):
        return True
    if isinstance(k, (np.ndarray, Array)) or _is_traced(k):
        return not (k.ndim == 0 and np.issubdtype(k.dtype, np.integer))
    return False


# ------------------------------------------------------------------ keys

def _as_tuple(key):
    return key if isinstance(key, tuple) else (key,)


def _check_entry(k):
    if k is None or k is Ellipsis or isinstance(k, slice):
        return
    if _is_static_int(k) or _is_dynamic_int(k) or _is_array_index(k):
        return
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), None (`None`) and "
                     f"integer or boolean arrays are valid indices, got {k!r}")


def _index_array(k):
    """A list / tuple / array index as an Array or tracer, or a NumPy array."""
    if isinstance(k, (list, tuple)):
        v = np.asarray(k)
        if v.dtype == object:
            raise IndexError(f"an index list must hold integers or booleans, got {k!r}")
        if v.size == 0:
            v = v.astype(np.int32)
        return v
    if isinstance(k, (bool, np.bool_)):
        return np.asarray(k)
    return k


class _BoolScalar:
    """A True / False index: an index array of shape (1,) / (0,) that
    consumes no axis (NumPy treats a bool scalar as a 0-d mask)."""
    def __init__(self, value):
        self.size = 1 if value else 0


class _Gap:
    """Where an Ellipsis that expands to no axis stood: it still separates
    the index arrays around it (NumPy's placement rule)."""


_GAP = _Gap()


def _expand_masks(key, ndim):
    """Replaces boolean masks by their nonzero() arrays (concrete masks only)."""
    out = []
    for k in key:
        if _is_array_index(k):
            k = _index_array(k)
            dt = np.dtype(k.dtype)
            if dt == np.bool_:
                if _is_traced(k) and _core.concrete_value(k) is not None:
                    k = _core.concrete_value(k)  # autodiff outside jit knows it
                if _is_traced(k):
                    raise NonConcreteBooleanIndexError(
                        f"Array boolean indices must be concrete; got a traced bool{list(k.shape)} "
                        "index. Under jit, use jnp.where(mask, x, fill) for a same-shaped result, "
                        "or jnp.nonzero(mask, size=N) / x[jnp.nonzero(mask, size=N)] for a static "
                        "number N of selected elements.")
                m = np.asarray(k)
                if m.ndim == 0:
                    out.append(_BoolScalar(bool(m)))
                else:
                    out.extend(np.nonzero(m))
                continue
            if not np.issubdtype(dt, np.integer):
                raise IndexError(f"index arrays must have an integer or boolean dtype, got {dt.name}")
        out.append(k)
    return out


def _consumes(k):
    return not (k is None or k is Ellipsis or isinstance(k, (_BoolScalar, _Gap)))


def _expand_ellipsis(key, ndim):
    key = list(key)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in key if _consumes(k))
    if consumed > ndim:
        raise IndexError(f"Too many indices for array: {consumed} non-None/Ellipsis indices "
                         f"for dim {ndim}.")
    fill = [slice(None)] * (ndim - consumed)
    if n_ellipsis:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        return key[:i] + (fill or [_GAP]) + key[i + 1:]
    return key + fill


def _prepare(shape, key):
    """The key as a list with one entry per consumed axis, plus None and
    bool-scalar entries; masks expanded; whether it holds an index array."""
    key = _as_tuple(key)
    for k in key:
        _check_entry(k)
    has_mask = any(_is_array_index(k) for k in key)
    key = _expand_masks(key, len(shape)) if has_mask else list(key)
    key = _expand_ellipsis(key, len(shape))
    has_array = any(_is_array_index(k) or isinstance(k, _BoolScalar) for k in key)
    if not has_array:
        key = [k for k in key if k is not _GAP]
    return key, has_array


# ------------------------------------------------------------------ basic indexing

def _parse_basic(shape, key, clamp):
    """Basic key -> per-dim (lo, hi, stride), the dims read backwards, the
    traced int indices (dim, value), the dims indexed by an int and the
    result's shape. Static ints out of bounds clamp (clamp) or raise."""
    starts, limits, strides, rev_dims, dyn, int_dims, final = [], [], [], [], [], [], []
    dim = 0
    for k in key:
        if k is None:
            final.append(1)
            continue
        n = shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            r = range(start, stop, step)
            m = len(r)
            if m == 0:
                lo, hi, st = 0, 0, 1
            elif step > 0:
                lo, hi, st = r[0], r[-1] + 1, step
            else:
                lo, hi, st = r[-1], r[0] + 1, -step
                rev_dims.append(dim)
            final.append(m)
        elif _is_static_int(k):
            i = operator.index(k)
            if n == 0 or (not clamp and not -n <= i < n):
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            i = i + n if i < 0 else i
            i = min(max(i, 0), n - 1)
            lo, hi, st = i, i + 1, 1
            int_dims.append(dim)
        else:  # a traced int
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {dim} with size 0")
            lo, hi, st = 0, n, 1
            dyn.append((dim, k))
            int_dims.append(dim)
        starts.append(lo)
        limits.append(hi)
        strides.append(st)
        dim += 1
    return starts, limits, strides, rev_dims, dyn, int_dims, tuple(final)


def _dynamic_start(k, n):
    """A traced index as an int32 start (negative counts from the end)."""
    if k.dtype != np.int32:
        k = jnp.astype(k, np.int32)
    return lax.select(lax.lt(k, 0), lax.add(k, n), k)


def _in_bounds(dyn, shape):
    """A traced bool: every traced index k of dim d is in [-shape[d], shape[d])."""
    ok = None
    for d, k in dyn:
        n = shape[d]
        inb = jnp.less(k, n)
        if not np.issubdtype(k.dtype, np.unsignedinteger):
            inb = jnp.logical_and(inb, jnp.greater_equal(k, -n))
        ok = inb if ok is None else jnp.logical_and(ok, inb)
    return ok


def _basic_getitem(x, key):
    shape = tuple(x.shape)
    starts, limits, strides, rev_dims, dyn, _, final = _parse_basic(shape, key, clamp=True)
    out = x
    if (starts != [0] * len(shape) or limits != list(shape) or strides != [1] * len(shape)):
        out = lax.slice(out, starts, limits, strides)
    if rev_dims:
        out = lax.rev(out, rev_dims)
    if dyn:
        sliced = tuple(out.shape)
        indices = [np.int32(0)] * len(sliced)
        sizes = list(sliced)
        for d, k in dyn:
            indices[d] = _dynamic_start(k, sliced[d])
            sizes[d] = 1
        out = lax.dynamic_slice(out, indices, sizes)
    if tuple(out.shape) != final:
        out = lax.reshape(out, final)
    return out


_COMBINE = {
    "set": None,
    "add": (jnp.add, 0),
    "subtract": (jnp.subtract, 0),
    "multiply": (jnp.multiply, 1),
    "divide": (jnp.true_divide, 1),
    "power": (jnp.power, 1),
    "min": (jnp.minimum, None),
    "max": (jnp.maximum, None),
}


def _basic_update(x, key, y, op):
    """x with x[key] replaced by op(x[key], y) for a basic key whose static
    ints are in bounds; y has x's dtype."""
    shape = tuple(x.shape)
    starts, limits, strides, rev_dims, dyn, int_dims, final = _parse_basic(shape, key, False)
    region = [(hi - lo + st - 1) // st if hi > lo else 0
              for lo, hi, st in zip(starts, limits, strides)]
    for d, _ in dyn:
        region[d] = 1
    region = tuple(region)
    if 0 in region:
        return x
    y = jnp.broadcast_to(y, final)
    y = lax.reshape(y, region) if tuple(y.shape) != region else y
    if rev_dims:
        y = lax.rev(y, rev_dims)
    combine = _COMBINE[op]
    if all(st == 1 for st in strides):
        idx = [np.int32(lo) for lo in starts]
        for d, k in dyn:
            idx[d] = _dynamic_start(k, shape[d])
        old = lax.dynamic_slice(x, idx, region) if combine is not None or dyn else None
        if combine is not None:
            y = jnp.astype(combine[0](old, y), x.dtype)
        if dyn:
            # JAX drops an update whose traced index is out of bounds; the
            # dynamic_update_slice would clamp it onto another row instead.
            y = lax.select(jnp.broadcast_to(_in_bounds(dyn, shape), region), y, old)
        return lax.dynamic_update_slice(x, y, idx)
    if dyn:
        return None  # strided slices with a traced index: the scatter path
    config = [(lo, n - (lo + (m - 1) * st + 1), st - 1)
              for lo, st, m, n in zip(starts, strides, region, shape)]
    if combine is not None and combine[1] is not None:
        placed = lax.pad(y, np.array(combine[1], x.dtype)[()], config)
        return jnp.astype(combine[0](x, placed), x.dtype)
    placed = lax.pad(y, np.zeros((), x.dtype)[()], config)
    mask = lax.pad(jnp.full(region, True), False, config)
    new = placed if combine is None else combine[0](x, placed)
    return lax.select(mask, new, x)


# ------------------------------------------------------------------ gather / scatter

def _index_dtype(arrays, shape):
    """int32, or int64 when x64 is on and an axis or an index needs it."""
    if _dt.x64_enabled() and (max(shape, default=0) > np.iinfo(np.int32).max or any(
            np.dtype(a.dtype).itemsize == 8 for a in arrays)):
        return np.dtype(np.int64)
    return np.dtype(np.int32)


def _normalized(i, n, dtype):
    """Index array i as dtype with negative entries counted from the end."""
    if isinstance(i, np.ndarray) or (not _is_traced(i) and not isinstance(i, Array)):
        v = np.asarray(i)
        if np.issubdtype(v.dtype, np.signedinteger):
            v = np.where(v < 0, v + n, v)
        big = np.iinfo(dtype)
        return np.clip(v, big.min, big.max).astype(dtype)  # saturate: stays out of bounds
    if np.issubdtype(i.dtype, np.signedinteger):
        i = jnp.where(jnp.less(i, 0), jnp.add(i, n), i)
    if i.dtype != dtype:
        if np.dtype(i.dtype).itemsize > np.dtype(dtype).itemsize:
            info = np.iinfo(dtype)
            hi = min(info.max, np.iinfo(i.dtype).max)
            lo = max(info.min, np.iinfo(i.dtype).min)
            i = jnp.clip(i, lo, hi)
        i = jnp.astype(i, dtype)
    return i


class _Indexer:
    """A key on an array of `shape` as one gather / scatter (see the module
    docstring). Fields: indices (batch shape + (K,)), dnums pieces, slice
    sizes, the gather's output shape, the final shape (with None axes)."""

    def __init__(self, shape, key):
        self.shape = shape
        idt = _index_dtype([k for k in key if hasattr(k, "dtype")], shape)
        # the advanced block: index arrays, ints and bool scalars
        adv_pos = [p for p, k in enumerate(key) if not (
            k is None or k is _GAP or isinstance(k, slice))]
        contiguous = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
        adv = []
        axis = 0
        items = []  # per key entry: (kind, info)
        for k in key:
            if k is None:
                items.append(("new", None))
            elif k is _GAP:
                continue
            elif isinstance(k, _BoolScalar):
                items.append(("adv", None))
                adv.append(np.zeros((k.size,), idt))
            elif isinstance(k, slice):
                n = shape[axis]
                start, stop, step = k.indices(n)
                m = len(range(start, stop, step))
                if step == 1 or m <= 1:
                    items.append(("win", (axis, start if m else 0, m)))
                else:
                    items.append(("bat", (axis, start, step, m)))
                axis += 1
            else:
                items.append(("adv", axis))
                adv.append(_normalized(_index_array(k), shape[axis], idt))
                axis += 1
        adv_shape = jnp.broadcast_shapes(*[np.shape(a) for a in adv]) if adv else ()
        # the gather's output dims in order: ("win", axis, size) / ("bat", key item) / adv block
        order = []
        placed_adv = False
        for kind, info in items:
            if kind == "adv":
                if not placed_adv and contiguous:
                    order.append(("adv",))
                placed_adv = True
            elif kind == "win":
                order.append(("win", info[0], info[2]))
            elif kind == "bat":
                order.append(("bat", info))
            else:
                order.append(("new",))
        if adv and not contiguous:
            order.insert(0, ("adv",))
        final, gather_shape, offset_dims, batch_shape = [], [], [], []
        new_dims = []
        for o in order:
            if o[0] == "new":
                new_dims.append(len(final))
                final.append(1)
            elif o[0] == "win":
                offset_dims.append(len(gather_shape))
                gather_shape.append(o[2])
                final.append(o[2])
            elif o[0] == "bat":
                batch_shape.append(o[1][3])
                gather_shape.append(o[1][3])
                final.append(o[1][3])
            else:
                batch_shape.extend(adv_shape)
                gather_shape.extend(adv_shape)
                final.extend(adv_shape)
        self.final_shape = tuple(final)
        self.gather_shape = tuple(gather_shape)
        self.new_dims = tuple(new_dims)
        # index columns: one per indexed axis (adv arrays, partial and strided slices)
        bat_rank = len(batch_shape)
        adv_at = 0  # where the adv block starts among the batch dims
        pos = 0
        bat_pos = {}
        for o in order:
            if o[0] == "adv":
                adv_at = pos
                pos += len(adv_shape)
            elif o[0] == "bat":
                bat_pos[o[1][0]] = pos
                pos += 1
        columns, start_index_map, collapsed = [], [], []
        slice_sizes = list(shape)
        adv_i = 0
        for kind, info in items:
            if kind == "adv":
                a = adv[adv_i]
                adv_i += 1
                if info is None:
                    continue  # a bool scalar: no axis of x
                col = self._place(a, adv_shape, adv_at, batch_shape)
                columns.append(col)
                start_index_map.append(info)
                collapsed.append(info)
                slice_sizes[info] = 1
            elif kind == "win":
                ax, start, m = info
                slice_sizes[ax] = m
                if m != shape[ax]:
                    columns.append(np.full(batch_shape, start, idt))
                    start_index_map.append(ax)
            elif kind == "bat":
                ax, start, step, m = info
                r = np.arange(start, start + step * m, step, dtype=idt)
                shp = [1] * bat_rank
                shp[bat_pos[ax]] = m
                columns.append(np.broadcast_to(r.reshape(shp), batch_shape))
                start_index_map.append(ax)
                collapsed.append(ax)
                slice_sizes[ax] = 1
        self.empty_axis = any(shape[ax] == 0 for ax in collapsed)
        if all(isinstance(c, np.ndarray) for c in columns):
            cols = [np.broadcast_to(c, batch_shape) for c in columns]
            indices = np.stack(cols, axis=-1) if cols else np.zeros(tuple(batch_shape) + (0,), idt)
            self.indices = _core.asarray(np.ascontiguousarray(indices))
        else:
            cols = [jnp.broadcast_to(c, tuple(batch_shape)) for c in columns]
            self.indices = jnp.stack(cols, axis=-1)
        self.dnums = (tuple(offset_dims), tuple(sorted(collapsed)), tuple(start_index_map))
        self.slice_sizes = tuple(slice_sizes)
        self.trivial = not columns and bat_rank == 0

    @staticmethod
    def _place(a, adv_shape, at, batch_shape):
        """Index array a broadcast to adv_shape, its dims at batch position at."""
        shp = (1,) * at + tuple(adv_shape) + (1,) * (len(batch_shape) - at - len(adv_shape))
        if isinstance(a, np.ndarray):
            return np.broadcast_to(np.broadcast_to(a, adv_shape).reshape(shp), batch_shape)
        return jnp.broadcast_to(jnp.reshape(jnp.broadcast_to(a, adv_shape), shp),
                                tuple(batch_shape))

    def gather(self, x, mode, fill_value, unique_indices=False, indices_are_sorted=False):
        if self.trivial:
            out = x
        elif self.empty_axis:
            if int(np.prod(self.indices.shape[:-1])) != 0:
                raise IndexError("index is out of bounds for an axis with size 0")
            out = jnp.zeros(self.gather_shape, x.dtype)
        else:
            off, col, smap = self.dnums
            dn = GatherDimensionNumbers(offset_dims=off, collapsed_slice_dims=col,
                                        start_index_map=smap)
            out = lax.gather(x, self.indices, dn, self.slice_sizes, mode=mode,
                             fill_value=fill_value, unique_indices=unique_indices,
                             indices_are_sorted=indices_are_sorted)
        if tuple(out.shape) != self.final_shape:
            out = lax.reshape(out, self.final_shape)
        return out

    def scatter(self, prim, x, y, mode, unique_indices=False, indices_are_sorted=False):
        """prim (a lax.scatter* function) of y, broadcast to the indexed shape, into x."""
        y = jnp.broadcast_to(y, self.final_shape)
        if tuple(y.shape) != self.gather_shape:
            y = lax.reshape(y, self.gather_shape)
        if self.empty_axis or 0 in self.gather_shape:
            return x
        off, col, smap = self.dnums
        dn = ScatterDimensionNumbers(update_window_dims=off, inserted_window_dims=col,
                                     scatter_dims_to_operand_dims=smap)
        return prim(x, self.indices, y, dn, mode=mode, unique_indices=unique_indices,
                    indices_are_sorted=indices_are_sorted)


# ------------------------------------------------------------------ entry points

def getitem(x, key, mode=None, fill_value=None, unique_indices=False, indices_are_sorted=False):
    """x[key] (NumPy's rules, JAX's out-of-bounds clamping by default)."""
    shape = tuple(x.shape)
    key, has_array = _prepare(shape, key)
    if not has_array and mode is None and fill_value is None:
        return _basic_getitem(x, key)
    if mode is None:
        mode = "fill" if fill_value is not None else "clip"
    return _Indexer(shape, key).gather(x, mode, fill_value, unique_indices, indices_are_sorted)


def _as_values(x, values):
    if isinstance(values, Array) or _is_traced(values):
        return jnp.astype(values, x.dtype) if values.dtype != x.dtype else values
    return _core.asarray(values, dtype=x.dtype)


def _same_shape_mask(x, key):
    """The traced bool mask of x's shape when key is exactly that, else None."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    if _is_traced(key) and np.dtype(key.dtype) == np.bool_ and tuple(key.shape) == tuple(x.shape):
        return key
    return None


def _needs_scatter(shape, key):
    """A basic key with a static int out of bounds: the scatter drops (or clips) it."""
    dim = 0
    for k in key:
        if k is None:
            continue
        if _is_static_int(k):
            i = operator.index(k)
            if not -shape[dim] <= i < shape[dim]:
                return True
        dim += 1
    return False


_SCATTER = {
    "set": lax.scatter, "add": lax.scatter_add, "multiply": lax.scatter_mul,
    "min": lax.scatter_min, "max": lax.scatter_max,
}


def update(x, key, values, op, mode=None, unique_indices=False, indices_are_sorted=False):
    """x with x[key] replaced by op(x[key], values) (a new array)."""
    shape = tuple(x.shape)
    mask = _same_shape_mask(x, key)
    if mask is not None and op in _COMBINE and np.ndim(values) == 0:
        v = _as_values(x, values)
        new = v if op == "set" else jnp.astype(_COMBINE[op][0](x, v), x.dtype)
        return jnp.where(mask, new, x)
    y = _as_values(x, values)
    key, has_array = _prepare(shape, key)
    if not has_array and mode is None and not _needs_scatter(shape, key):
        out = _basic_update(x, key, y, op)
        if out is not None:
            return out
    idx = _Indexer(shape, key)
    if op == "subtract":
        op, y = "add", jnp.negative(y)
    if op in _SCATTER:
        return idx.scatter(_SCATTER[op], x, y, mode, unique_indices, indices_are_sorted)
    # divide / power: read, combine, write back (an element indexed twice is
    # combined once, with the last of its values)
    old = idx.gather(x, "clip", None)
    new = jnp.astype(_COMBINE[op][0](old, y), x.dtype)
    return idx.scatter(lax.scatter, x, new, mode, unique_indices, indices_are_sorted)


def apply(x, key, func, mode=None, unique_indices=False, indices_are_sorted=False):
    """x with func applied to x[key] (elementwise; each element once)."""
    shape = tuple(x.shape)
    key, _ = _prepare(shape, key)
    touched = _Indexer(shape, key).scatter(lax.scatter, jnp.zeros(shape, bool), True, mode)
    return jnp.where(touched, jnp.astype(func(x), x.dtype), x)


class IndexUpdateRef:
    """x.at[index]: methods returning x with x[index] updated (x is unchanged).
    Each takes JAX's keywords: mode ('clip', 'fill' / 'drop',
    'promise_in_bounds'), indices_are_sorted, unique_indices; get also
    fill_value."""
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None):
        return getitem(self.array, self.index, mode, fill_value, unique_indices,
                       indices_are_sorted)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return apply(self.array, self.index, func, mode, unique_indices, indices_are_sorted)


def _updater(op):
    def f(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        return update(self.array, self.index, values, op, mode, unique_indices,
                      indices_are_sorted)
    f.__name__ = f.__qualname__ = op
    f.__doc__ = f"x with x[index] {op} values (NumPy's x[index] {op}= values, without mutation)."
    return f


for _op in ("set", "add", "subtract", "multiply", "divide", "power", "min", "max"):
    setattr(IndexUpdateRef, _op, _updater(_op))
IndexUpdateRef.mul = IndexUpdateRef.multiply
del _op


class IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"

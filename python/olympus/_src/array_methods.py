"""The Python-level methods of olympus.Array and of tracers: repr/str/format,
indexing, iteration and the NumPy-style methods (sum, reshape, astype, ...).
They are attached to the C heap types `_core.Array` and `_core.Tracer` by
install(); the operators and conversions themselves are C."""
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import api as _api
from olympus._src import jnp
from olympus.sharding import SingleDeviceSharding

Array = _core.Array
Tracer = _core.Tracer


# ------------------------------------------------------------------ printing

def _array_repr(self):
    prefix = "Array("
    dtype_str = f"dtype={self.dtype.name}"
    if self.weak_type:
        dtype_str += ", weak_type=True"
    dtype_str += ")"
    value = np.asarray(self)
    if value.size == 0:
        s = f"[], shape={tuple(self.shape)}"
    else:
        s = np.array2string(value, prefix=prefix, suffix=",", separator=", ")
    last_line_len = len(s) - s.rfind("\n") + 1
    sep = " "
    if last_line_len + len(dtype_str) + 1 > np.get_printoptions()["linewidth"]:
        sep = " " * len(prefix)  # as JAX does
    return f"{prefix}{s},{sep}{dtype_str}"


def _array_str(self):
    return str(np.asarray(self))


def _array_format(self, format_spec):
    value = np.asarray(self)
    if value.ndim == 0:
        return format(value[()], format_spec)
    return format(value, format_spec)


# ------------------------------------------------------------------ indexing

def _is_static_int(k):
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, (int, np.integer)):
        return True
    if isinstance(k, Array) and k.ndim == 0 and np.issubdtype(k.dtype, np.integer):
        return True
    return False


def _is_dynamic_int(k):
    return _core.is_tracer(k) and k.ndim == 0 and np.issubdtype(k.dtype, np.integer)


def _expand_key(key, ndim):
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"Too many indices for array: {consumed} non-None/Ellipsis indices "
                         f"for dim {ndim}.")
    fill = (slice(None),) * (ndim - consumed)
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        return key[:i] + fill + key[i + 1:]
    return key + fill


def _parse_index(shape, key):
    """Basic NumPy index -> per-dim (lo, hi, stride) of the forward slice, the
    dims read backwards (negative steps), the traced int indices (dim, value),
    the dims indexed by an int (dropped), and the shape of the indexed result."""
    key = _expand_key(key, len(shape))
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
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {dim} with size {n}")
            i = i + n if i < 0 else i
            lo, hi, st = i, i + 1, 1
            int_dims.append(dim)
        elif _is_dynamic_int(k):
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {dim} with size 0")
            lo, hi, st = 0, n, 1
            dyn.append((dim, k))
            int_dims.append(dim)
        elif isinstance(k, (bool, np.bool_)) or (hasattr(k, "dtype") and
                                                  np.dtype(k.dtype) == np.bool_):
            raise IndexError("boolean mask indexing is not supported by olympus yet "
                             "(use jnp.where)")
        elif hasattr(k, "shape") or isinstance(k, (list, tuple)):
            raise IndexError("integer array indexing is not supported by olympus yet")
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`) and None "
                             f"(`None`) are valid indices, got {k!r}")
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


def _getitem(self, key):
    """Basic NumPy indexing: ints (also traced ones), slices with any step,
    None and Ellipsis."""
    shape = tuple(self.shape)
    starts, limits, strides, rev_dims, dyn, _, final = _parse_index(shape, key)
    out = self
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


# ------------------------------------------------------------------ x.at[...]

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


def _update(x, key, values, op):
    """x with x[key] replaced by op(x[key], values) (a new array)."""
    shape = tuple(x.shape)
    starts, limits, strides, rev_dims, dyn, int_dims, final = _parse_index(shape, key)
    region = [(hi - lo + st - 1) // st if hi > lo else 0
              for lo, hi, st in zip(starts, limits, strides)]
    for d, _ in dyn:
        region[d] = 1
    region = tuple(region)
    if 0 in region:
        return x
    if isinstance(values, Array) or _core.is_tracer(values):
        values = jnp.astype(values, x.dtype)
    else:
        values = _core.asarray(values, dtype=x.dtype)
    y = jnp.broadcast_to(values, final)
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
        raise NotImplementedError("x.at[...] with a traced index and a strided slice")
    config = [(lo, n - (lo + (m - 1) * st + 1), st - 1)
              for lo, st, m, n in zip(starts, strides, region, shape)]
    if combine is not None and combine[1] is not None:
        placed = lax.pad(y, np.array(combine[1], x.dtype)[()], config)
        return jnp.astype(combine[0](x, placed), x.dtype)
    placed = lax.pad(y, np.zeros((), x.dtype)[()], config)
    mask = lax.pad(jnp.full(region, True), False, config)
    new = placed if combine is None else combine[0](x, placed)
    return lax.select(mask, new, x)


class _IndexUpdateRef:
    """x.at[index]: methods returning x with x[index] updated (x is unchanged)."""
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def get(self):
        return self.array[self.index]

    def set(self, values):
        return _update(self.array, self.index, values, "set")

    def add(self, values):
        return _update(self.array, self.index, values, "add")

    def subtract(self, values):
        return _update(self.array, self.index, values, "subtract")

    def multiply(self, values):
        return _update(self.array, self.index, values, "multiply")

    mul = multiply

    def divide(self, values):
        return _update(self.array, self.index, values, "divide")

    def power(self, values):
        return _update(self.array, self.index, values, "power")

    def min(self, values):
        return _update(self.array, self.index, values, "min")

    def max(self, values):
        return _update(self.array, self.index, values, "max")


class _IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))


# ------------------------------------------------------------------ methods

def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    return jnp.reshape(self, shape, order)


def _transpose(self, *axes):
    if not axes:
        axes = None
    elif len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = axes[0]
    return jnp.transpose(self, axes)


def _item(self, *args):
    return np.asarray(self).item(*args)


def _tolist(self):
    return np.asarray(self).tolist()


def _method(f):
    def m(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    m.__name__ = m.__qualname__ = f.__name__
    m.__doc__ = f.__doc__
    return m


_METHODS = {
    "devices": lambda self: _api._array_devices(self),
    "__getitem__": _getitem,
    "__iter__": _iter,
    "reshape": _reshape,
    "transpose": _transpose,
    "item": _item,
    "tolist": _tolist,
    "astype": lambda self, dtype, copy=False: jnp.astype(self, dtype),
    "copy": lambda self: jnp.array(self, copy=True),
    "flatten": lambda self, order="C": jnp.ravel(self, order),
    "ravel": lambda self, order="C": jnp.ravel(self, order),
    "squeeze": lambda self, axis=None: jnp.squeeze(self, axis),
    "swapaxes": lambda self, axis1, axis2: jnp.swapaxes(self, axis1, axis2),
    "conj": lambda self: jnp.conjugate(self),
    "conjugate": lambda self: jnp.conjugate(self),
    "sum": _method(jnp.sum),
    "prod": _method(jnp.prod),
    "mean": _method(jnp.mean),
    "var": _method(jnp.var),
    "std": _method(jnp.std),
    "max": _method(jnp.max),
    "min": _method(jnp.min),
    "any": _method(jnp.any),
    "all": _method(jnp.all),
    "argmax": _method(jnp.argmax),
    "argmin": _method(jnp.argmin),
    "cumsum": _method(jnp.cumsum),
    "cumprod": _method(jnp.cumprod),
    "sort": _method(jnp.sort),
    "argsort": _method(jnp.argsort),
    "clip": _method(jnp.clip),
    "round": _method(jnp.round),
    "dot": _method(jnp.dot),
}

_PROPERTIES = {
    "T": lambda self: jnp.transpose(self),
    "mT": lambda self: jnp.swapaxes(self, -1, -2),
    "real": lambda self: jnp.real(self),
    "imag": lambda self: jnp.imag(self),
    "nbytes": lambda self: self.size * self.dtype.itemsize,
    "itemsize": lambda self: self.dtype.itemsize,
    "device": lambda self: _api._array_device(self),
    "at": _IndexUpdateHelper,
}

# Operators the C types may not define; each is added only where missing.
_FALLBACK_OPERATORS = {
    "__matmul__": lambda self, other: jnp.matmul(self, other),
    "__rmatmul__": lambda self, other: jnp.matmul(other, self),
    "__floordiv__": lambda self, other: jnp.floor_divide(self, other),
    "__rfloordiv__": lambda self, other: jnp.floor_divide(other, self),
    "__mod__": lambda self, other: jnp.remainder(self, other),
    "__rmod__": lambda self, other: jnp.remainder(other, self),
    "__divmod__": lambda self, other: jnp.divmod(self, other),
    "__rdivmod__": lambda self, other: jnp.divmod(other, self),
    "__pow__": lambda self, other: jnp.power(self, other),
    "__rpow__": lambda self, other: jnp.power(other, self),
    "__lshift__": lambda self, other: jnp.left_shift(self, other),
    "__rlshift__": lambda self, other: jnp.left_shift(other, self),
    "__rshift__": lambda self, other: jnp.right_shift(self, other),
    "__rrshift__": lambda self, other: jnp.right_shift(other, self),
    "__abs__": lambda self: jnp.absolute(self),
    "__invert__": lambda self: jnp.bitwise_not(self),
}


def _array_reduce(self):
    """Pickling: an Array pickles as its value and unpickles as an Array (on
    the default device, as JAX does)."""
    return _api._array_from_pickle, (np.asarray(self),)


def install():
    """Attach the methods to _core.Array and _core.Tracer (idempotent)."""
    for cls in (Array, Tracer):
        for name, f in _METHODS.items():
            setattr(cls, name, f)
        for name, f in _PROPERTIES.items():
            setattr(cls, name, property(f))
        for name, f in _FALLBACK_OPERATORS.items():
            if getattr(cls, name, None) is None:
                setattr(cls, name, f)
        cls.__array_priority__ = 100
    Array.__repr__ = _array_repr
    Array.__str__ = _array_str
    Array.__reduce__ = _array_reduce
    Array.sharding = property(lambda self: SingleDeviceSharding(_api._array_device(self)))
    Array.__format__ = _array_format

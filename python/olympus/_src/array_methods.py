"""The Python-level methods of olympus.Array and of tracers: repr/str/format,
indexing, iteration and the NumPy-style methods (sum, reshape, astype, ...).
They are attached to the C heap types `_core.Array` and `_core.Tracer` by
install(); the operators and conversions themselves are C."""
import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import api as _api
from olympus._src import indexing
from olympus._src import jnp
from olympus._src import jnp_index
from olympus._src import jnp_more
from olympus._src import sharded as _sharded

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

def _getitem(self, key):
    return indexing.getitem(self, key)


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
    "devices": lambda self: _sharded.array_devices(self),
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
    "take": _method(jnp_index.take),
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: jnp_more.diagonal(self, offset, axis1,
                                                                            axis2),
    "trace": lambda self, offset=0, axis1=0, axis2=1, dtype=None: jnp.trace(
        self, offset, axis1, axis2, dtype),
    "repeat": lambda self, repeats, axis=None, *, total_repeat_length=None: jnp_more.repeat(
        self, repeats, axis, total_repeat_length=total_repeat_length),
    "ptp": _method(jnp_more.ptp),
    "argpartition": _method(jnp.argpartition),
    "nonzero": _method(jnp_index.nonzero),
    "searchsorted": _method(jnp_index.searchsorted),
    "compress": lambda self, condition, axis=None, **kw: jnp_index.compress(condition, self,
                                                                           axis, **kw),
    "choose": lambda self, choices, out=None, mode="raise": jnp_index.choose(self, choices, out,
                                                                            mode),
}

_PROPERTIES = {
    "T": lambda self: jnp.transpose(self),
    "mT": lambda self: jnp.swapaxes(self, -1, -2),
    "real": lambda self: jnp.real(self),
    "imag": lambda self: jnp.imag(self),
    "nbytes": lambda self: self.size * self.dtype.itemsize,
    "itemsize": lambda self: self.dtype.itemsize,
    "device": lambda self: _api._array_device(self),
    "at": indexing.IndexUpdateHelper,
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
    Array.sharding = property(_sharded.array_sharding)
    Array.device = property(_sharded.array_device)
    Array.devices = _sharded.array_devices
    Array.addressable_shards = property(_sharded.addressable_shards)
    Array.global_shards = property(_sharded.addressable_shards)
    Array.is_fully_replicated = property(_sharded.is_fully_replicated)
    Array.is_fully_addressable = property(lambda self: True)
    Array.__format__ = _array_format

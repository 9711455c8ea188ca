"""dtype helpers for the Python layer: canonicalisation under the x64 switch,
default types, and result_type over values, dtypes and Python types."""
import builtins

import numpy as np

from olympus import _core

try:  # NumPy has no bfloat16; ml_dtypes provides one where installed.
    import ml_dtypes as _ml_dtypes
    bfloat16 = np.dtype(_ml_dtypes.bfloat16).type
except ImportError:  # pragma: no cover - depends on the installation
    bfloat16 = None

_NARROW = {
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.uint64): np.dtype(np.uint32),
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}

# Python types stand for weak values of their kind (as in JAX's result_type).
_PY_SAMPLE = {builtins.bool: False, builtins.int: 0, builtins.float: 0.0,
              builtins.complex: 0j}


def x64_enabled():
    return bool(_core.x64_enabled())


def canonicalize(dtype):
    """np.dtype(dtype), narrowed to 32 bits when x64 is off."""
    dt = np.dtype(dtype)
    if not x64_enabled():
        return _NARROW.get(dt, dt)
    return dt


def default_float():
    return np.dtype(np.float64 if x64_enabled() else np.float32)


def default_int():
    return np.dtype(np.int64 if x64_enabled() else np.int32)


def default_uint():
    return np.dtype(np.uint64 if x64_enabled() else np.uint32)


def default_complex():
    return np.dtype(np.complex128 if x64_enabled() else np.complex64)


def is_python_scalar(x):
    return type(x) in (builtins.bool, builtins.int, builtins.float, builtins.complex)


def dtype_and_weak(x):
    """(canonical numpy dtype, weak) of a value, a dtype-like or a Python type."""
    if x is None:
        raise TypeError("no dtype for None")
    if isinstance(x, type) and x in _PY_SAMPLE:
        return _core.result_type(_PY_SAMPLE[x])
    if isinstance(x, (np.dtype, str)) or (isinstance(x, type) and issubclass(x, np.generic)):
        return canonicalize(x), False
    if hasattr(x, "dtype") and not hasattr(x, "shape"):  # e.g. dtype-bearing descriptors
        return canonicalize(x.dtype), False
    return _core.result_type(x)


def result_type(*args, return_weak=False):
    """Promoted canonical dtype (JAX lattice with weak Python scalars)."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    conv = []
    for a in args:
        if isinstance(a, type) and a in _PY_SAMPLE:
            conv.append(_PY_SAMPLE[a])
        elif isinstance(a, (np.dtype, str)) or (isinstance(a, type) and issubclass(a, np.generic)):
            conv.append(canonicalize(a))
        elif isinstance(a, (list, tuple)):
            conv.append(_core.asarray(a))
        else:
            conv.append(a)
    dt, weak = _core.result_type(*conv)
    dt = np.dtype(dt)
    return (dt, bool(weak)) if return_weak else dt


def is_inexact(dt):
    return np.issubdtype(dt, np.inexact)


def is_integer(dt):
    return np.issubdtype(dt, np.integer)


def is_bool(dt):
    return np.dtype(dt) == np.bool_


def to_inexact(dt):
    """The float dtype NumPy would compute in for dt: ints/bools -> default float."""
    dt = np.dtype(dt)
    return dt if is_inexact(dt) else default_float()


def real_dtype(dt):
    dt = np.dtype(dt)
    if dt == np.complex64:
        return np.dtype(np.float32)
    if dt == np.complex128:
        return np.dtype(np.float64)
    return dt

"""olympus.numpy: NumPy's API over olympus primitives. Every function works on
concrete Arrays (eagerly) and on Tracers (under jit). Results follow NumPy's
values and dtypes, canonicalised by the x64 switch (x64 off: 64-bit dtypes
become 32-bit ones); Python scalars are weakly typed (they adopt the dtype of
the array they meet)."""
import builtins
import math
import operator

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt

Array = _core.Array
_AxisError = getattr(np, "exceptions", np).AxisError
_is_tracer = _core.is_tracer
_unop = _core.unop

__all__ = []


def _export(f):
    __all__.append(f.__name__)
    return f


# ------------------------------------------------------------------ helpers

def _is_array(x):
    return isinstance(x, Array) or _is_tracer(x)


def _contains_arrays(seq):
    for v in seq:
        if _is_array(v):
            return True
        if isinstance(v, (list, tuple)) and _contains_arrays(v):
            return True
    return False


def _arr(x, dtype=None):
    """x as an Array or Tracer (array-likes converted; Python scalars weak)."""
    if _is_array(x):
        return x if dtype is None else astype(x, dtype)
    if isinstance(x, (list, tuple)) and _contains_arrays(x):
        out = stack([_arr(v) for v in x]) if len(x) else _core.asarray(np.zeros((0,)))
        return out if dtype is None else astype(out, dtype)
    if dtype is not None:
        return _core.asarray(x, dtype=_dt.canonicalize(dtype))
    return _core.asarray(x)


def _shape(x):
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else np.shape(x)


def _ndim(x):
    return len(_shape(x))


def _dtype(x):
    return _dt.dtype_and_weak(x)[0]


def _canon_axis(axis, ndim, who="axis"):
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise _AxisError(f"{who} {a} is out of bounds for array of dimension {ndim}")
    return a + ndim if a < 0 else a


def _canon_axes(axis, ndim):
    """axis None/int/tuple -> sorted tuple of non-negative axes (no repeats)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(_canon_axis(a, ndim) for a in axis)
    else:
        axes = (_canon_axis(axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(axes))


def _convert(x, dtype, weak=False):
    """x with dtype (and weak flag); returns x itself when nothing changes."""
    dtype = np.dtype(dtype)
    cur, cur_weak = _dt.dtype_and_weak(x)
    if cur == dtype and builtins.bool(cur_weak) == builtins.bool(weak) and \
            (_is_array(x) or _dt.is_python_scalar(x)):
        return x
    if not _is_array(x) and not weak:   # a concrete value: convert it now
        return _core.asarray(x, dtype=dtype)
    if not _is_array(x) and not _dt.is_python_scalar(x):
        x = _core.asarray(x)
    return lax.convert_element_type(x, dtype, weak=weak)


def _size(shape):
    return math.prod(shape)


@_export
def broadcast_shapes(*shapes):
    """The NumPy broadcast of the given shapes (the one implementation is C,
    shared with the operators)."""
    return _core.broadcast_shapes(*shapes)


def _broadcast_to(x, shape):
    x = _arr(x)
    shape = tuple(shape)
    xs = _shape(x)
    if xs == shape:
        return x
    if len(xs) > len(shape) or broadcast_shapes(xs, shape) != shape:
        raise ValueError(f"Incompatible shapes for broadcasting: {xs} and requested shape "
                         f"{shape}")
    lead = len(shape) - len(xs)
    keep = [i for i, d in enumerate(xs) if d == shape[lead + i]]
    if len(keep) != len(xs):  # drop the size-1 dims that get expanded
        x = lax.reshape(x, tuple(xs[i] for i in keep))
    return lax.broadcast_in_dim(x, shape, tuple(lead + i for i in keep))


def _promote(*xs, to_inexact=False, broadcast=True, keep_scalars=True):
    """Operands converted to their common dtype (and broadcast to a common shape;
    rank-0 operands stay rank 0 when keep_scalars, which binary primitives accept)."""
    dt, weak = _dt.result_type(*xs, return_weak=True)
    if to_inexact and not _dt.is_inexact(dt):
        dt = _dt.default_float()
    out = [_convert(x, dt, weak) for x in xs]
    if broadcast:
        shape = broadcast_shapes(*[_shape(x) for x in out])
        out = [x if (keep_scalars and _shape(x) == ()) else _broadcast_to(x, shape)
               for x in out]
    return out


def _binop(name, x, y):
    """NumPy's binary operation `name` (promotion and broadcasting as the
    operators do; C)."""
    return _core.binop(name, x, y)


def select(pred, on_true, on_false):
    """on_true where pred (bool, same shape) else on_false."""
    return lax.select_n(pred, on_false, on_true)


def _define(name, f, doc):
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    __all__.append(name)
    return f


def _unary_float(name, prim):
    """NumPy ufunc `name` (the primitive `prim`), computing ints and bools in
    the default float."""
    def f(x, /):
        r = _unop(prim, x, True)   # Arrays and Tracers: promotion and bind in C
        if r is not NotImplemented:
            return r
        x = _arr(x)
        dt, weak = _dt.dtype_and_weak(x)
        if not _dt.is_inexact(dt):
            x = _convert(x, _dt.default_float(), weak)
        return _core.bind(prim, (x,), None)
    return _define(name, f, f"Elementwise {name} (NumPy's np.{name}); ints and bools "
                   "compute in the default float.")


sin = _unary_float("sin", "sin")
cos = _unary_float("cos", "cos")
tan = _unary_float("tan", "tan")
arcsin = _unary_float("arcsin", "asin")
arccos = _unary_float("arccos", "acos")
arctan = _unary_float("arctan", "atan")
sinh = _unary_float("sinh", "sinh")
cosh = _unary_float("cosh", "cosh")
tanh = _unary_float("tanh", "tanh")
arcsinh = _unary_float("arcsinh", "asinh")
arccosh = _unary_float("arccosh", "acosh")
arctanh = _unary_float("arctanh", "atanh")
exp = _unary_float("exp", "exp")
exp2 = _unary_float("exp2", "exp2")
log = _unary_float("log", "log")
log1p = _unary_float("log1p", "log1p")
expm1 = _unary_float("expm1", "expm1")
sqrt = _unary_float("sqrt", "sqrt")
cbrt = _unary_float("cbrt", "cbrt")


@_export
def log2(x, /):
    """Elementwise base-2 logarithm."""
    x = log(x)
    return _core.bind("div", (x, _convert(math.log(2), _dtype(x))), None)


@_export
def log10(x, /):
    """Elementwise base-10 logarithm."""
    x = log(x)
    return _core.bind("div", (x, _convert(math.log(10), _dtype(x))), None)


def _same_dtype_unary(prim, name, allow_bool=True):
    def f(x, /):
        if allow_bool:
            r = _unop(prim, x, False)
            if r is not NotImplemented:
                return r
        x = _arr(x)
        if not allow_bool and _dt.is_bool(_dtype(x)):
            raise TypeError(f"{name} does not accept dtype bool.")
        return _core.bind(prim, (x,), None)
    return _define(name, f, f"Elementwise {name} (NumPy's np.{name}); keeps the dtype.")


square = _same_dtype_unary("square", "square")
absolute = _same_dtype_unary("abs", "absolute")
sign = _same_dtype_unary("sign", "sign", allow_bool=False)
negative = _same_dtype_unary("neg", "negative", allow_bool=False)
abs = absolute
__all__.append("abs")


@_export
def positive(x, /):
    """x itself (as an array)."""
    return _arr(x)


@_export
def conjugate(x, /):
    x = _arr(x)
    return _core.bind("conj", (x,), None) if np.iscomplexobj(np.empty(0, _dtype(x))) else x


conj = conjugate
__all__.append("conj")


@_export
def real(val, /):
    x = _arr(val)
    return _core.bind("real", (x,), None) if np.issubdtype(_dtype(x), np.complexfloating) else x


@_export
def imag(val, /):
    x = _arr(val)
    if np.issubdtype(_dtype(x), np.complexfloating):
        return _core.bind("imag", (x,), None)
    return zeros_like(x)


def _float_or_int_passthrough(prim_fn, name):
    def f(x, /):
        x = _arr(x)
        dt, weak = _dt.dtype_and_weak(x)
        if not _dt.is_inexact(dt):  # NumPy 1.x: floor/ceil/trunc/rint of ints are floats
            x = _convert(x, _dt.default_float(), weak)
        return prim_fn(x)
    return _define(name, f, f"Elementwise {name} (NumPy's np.{name}).")


floor = _float_or_int_passthrough(lambda x: _core.bind("floor", (x,), None), "floor")
ceil = _float_or_int_passthrough(lambda x: _core.bind("ceil", (x,), None), "ceil")
rint = _float_or_int_passthrough(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
                                 "rint")
trunc = _float_or_int_passthrough(
    lambda x: select(lax.lt(x, 0), _core.bind("ceil", (x,), None),
                     _core.bind("floor", (x,), None)), "trunc")
fix = trunc
__all__.append("fix")


@_export
def round(a, decimals=0, out=None):
    """Round half to even to the given number of decimals (ints stay ints)."""
    if out is not None:
        raise NotImplementedError("round: out is not supported")
    x = _arr(a)
    dt = _dtype(x)
    decimals = operator.index(decimals)
    if not _dt.is_inexact(dt):
        if decimals >= 0:
            return x
        f = 10 ** (-decimals)   # round half to even at multiples of f
        q = floor_divide(x, f)
        r2 = multiply(subtract(x, multiply(q, f)), 2)
        up = logical_or(greater(r2, f), logical_and(equal(r2, f), equal(remainder(q, 2), 1)))
        return multiply(where(up, add(q, 1), q), f)
    if np.issubdtype(dt, np.complexfloating):
        raise NotImplementedError("round of complex values")
    if decimals == 0:
        return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)
    f = _convert(10.0 ** decimals, dt)
    scaled = _core.bind("mul", (x, f), None)
    return _core.bind("div", (lax.round(scaled, lax.RoundingMethod.TO_NEAREST_EVEN), f), None)


around = round
round_ = round
__all__ += ["around"]


# ------------------------------------------------------------------ binary ufuncs

def _binary(name):
    """jnp.`name`(x1, x2, /): a builtin function that runs the operation in one C
    call (_core.binary_ufunc): NumPy's promotion and broadcasting, boolean add /
    multiply as or / and, boolean subtract a TypeError."""
    __all__.append(name)
    return _core.binary_ufunc(name, f"Elementwise {name} with NumPy's promotion and "
                              "broadcasting.", __name__.replace("_src.jnp", "numpy"))


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
floor_divide = _binary("floor_divide")
remainder = _binary("remainder")
true_divide = _binary("true_divide")
arctan2 = _binary("arctan2")
nextafter = _binary("nextafter")
divide = true_divide
mod = remainder
__all__ += ["divide", "mod"]


@_export
def bitwise_not(x, /):
    x = _arr(x)
    if _dt.is_inexact(_dtype(x)):
        raise TypeError("bitwise_not is only defined for integer and bool dtypes, got "
                        f"{_dtype(x)}")
    return _core.bind("not", (x,), None)


invert = bitwise_not
__all__.append("invert")


def _to_bool(x):
    x = _arr(x)
    if _dt.is_bool(_dtype(x)):
        return x
    return _core.bind("ne", (x, _convert(0, _dtype(x))), None)


def _logical(prim, name):
    def f(x1, x2, /):
        return _binop(prim, _to_bool(x1), _to_bool(x2))
    return _define(name, f, f"Elementwise {name}: truth values of x1 and x2.")


logical_and = _logical("bitwise_and", "logical_and")
logical_or = _logical("bitwise_or", "logical_or")
logical_xor = _logical("bitwise_xor", "logical_xor")


@_export
def logical_not(x, /):
    return _core.bind("not", (_to_bool(x),), None)


@_export
def hypot(x1, x2, /):
    x1, x2 = _promote(x1, x2, to_inexact=True)
    return sqrt(add(multiply(x1, x1), multiply(x2, x2)))


@_export
def fmod(x1, x2, /):
    """C-style remainder (sign of x1)."""
    x1, x2 = _promote(x1, x2)
    return _core.bind("rem", (x1, x2), None)


@_export
def divmod(x1, x2, /):
    return floor_divide(x1, x2), remainder(x1, x2)


@_export
def power(x1, x2, /):
    """x1 ** x2 with NumPy's promotion (ints stay ints; a static Python int
    exponent uses integer_pow)."""
    if _dt.is_bool(_dt.result_type(x1, x2)):
        x1, x2 = _convert(_arr(x1), _dt.default_int()), _convert(_arr(x2), _dt.default_int())
    if isinstance(x2, int) and not isinstance(x2, bool) and x2 < 0 and \
            not _dt.is_inexact(_dt.result_type(x1)):
        raise ValueError("Integers to negative integer powers are not allowed.")
    return _core.binop("power", _arr(x1), x2)


pow = power
__all__.append("pow")


@_export
def float_power(x1, x2, /):
    x1, x2 = _promote(x1, x2)
    dt = _dt.canonicalize(np.float64)
    if np.issubdtype(_dtype(x1), np.complexfloating):
        dt = _dt.canonicalize(np.complex128)
    return power(_convert(x1, dt), _convert(x2, dt))


@_export
def reciprocal(x, /):
    """1 / x (ints compute in the default float)."""
    x = _arr(x)
    dt, weak = _dt.dtype_and_weak(x)
    if not _dt.is_inexact(dt):
        dt = _dt.default_float()
        x = _convert(x, dt, weak)
    return _core.bind("div", (_convert(1, dt), x), None)


@_export
def where(condition, x=None, y=None, /):
    """x where condition else y, with promotion and broadcasting (the one-argument
    form, which has a data-dependent shape, is not supported)."""
    if x is None or y is None:
        raise ValueError("where: the one-argument form (nonzero) is not supported; "
                         "pass both x and y")
    c = _to_bool(condition)
    x, y = _promote(x, y, broadcast=False)
    shape = broadcast_shapes(_shape(c), _shape(x), _shape(y))
    return lax.select_n(_broadcast_to(c, shape), _broadcast_to(y, shape),
                        _broadcast_to(x, shape))


@_export
def clip(a, a_min=None, a_max=None, *, min=None, max=None):
    """a limited to [a_min, a_max] (either may be None)."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    out = _arr(a)
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out


@_export
def isnan(x, /):
    x = _arr(x)
    if not _dt.is_inexact(_dtype(x)):
        return full(_shape(x), False, np.bool_)
    return _core.bind("ne", (x, x), None)


@_export
def isinf(x, /):
    x = _arr(x)
    dt = _dtype(x)
    if not _dt.is_inexact(dt):
        return full(_shape(x), False, np.bool_)
    if np.issubdtype(dt, np.complexfloating):
        return logical_or(isinf(real(x)), isinf(imag(x)))
    return _core.bind("eq", (_core.bind("abs", (x,), None), _convert(np.inf, dt)), None)


@_export
def isfinite(x, /):
    x = _arr(x)
    dt = _dtype(x)
    if not _dt.is_inexact(dt):
        return full(_shape(x), True, np.bool_)
    if np.issubdtype(dt, np.complexfloating):
        return logical_and(isfinite(real(x)), isfinite(imag(x)))
    return _core.bind("is_finite", (x,), None)


@_export
def signbit(x, /):
    """True where the sign bit is set (-0.0 and -nan included)."""
    x = _arr(x)
    dt = _dtype(x)
    if not _dt.is_inexact(dt):
        return less(x, 0) if np.issubdtype(dt, np.signedinteger) else full(_shape(x), False,
                                                                          np.bool_)
    if not _core.is_tracer(x):
        return _core.asarray(np.signbit(np.asarray(x)))  # reads the bit itself, NaNs too
    # Traced: no bitcast primitive yet, so -0.0 is found through 1/x = -inf;
    # the sign of a traced NaN is not visible.
    return logical_or(less(x, 0), logical_and(equal(x, 0), less(true_divide(1, x), 0)))


# ------------------------------------------------------------------ creation

def _shape_arg(shape):
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def _known(x):
    """x, or for a tracer of a concrete trace (autodiff outside jit) its value."""
    if _is_tracer(x):
        v = _core.concrete_value(x)
        if v is not None:
            return v
    return x


def _check_concrete(name, *xs):
    for x in xs:
        if _is_tracer(x):
            raise _core.ConcretizationTypeError(
                f"Abstract tracer value encountered where concrete value is expected: "
                f"the argument of `{name}` must be a concrete value (a Python scalar or "
                f"array), not a traced one")


@_export
def full(shape, fill_value, dtype=None):
    """An array of shape filled with fill_value (broadcast)."""
    shape = _shape_arg(shape)
    if dtype is None:
        dt = _dtype(fill_value) if not isinstance(fill_value, (list, tuple)) else \
            _dtype(_arr(fill_value))
    else:
        dt = _dt.canonicalize(dtype)
    if isinstance(fill_value, (list, tuple)):
        fill_value = _arr(fill_value)
    return _broadcast_to(_convert(fill_value, dt), shape)


@_export
def zeros(shape, dtype=None):
    """An array of zeros (default dtype: the default float)."""
    return full(shape, 0, _dt.default_float() if dtype is None else dtype)


@_export
def ones(shape, dtype=None):
    """An array of ones (default dtype: the default float)."""
    return full(shape, 1, _dt.default_float() if dtype is None else dtype)


empty = zeros
__all__.append("empty")


@_export
def full_like(a, fill_value, dtype=None, shape=None):
    return full(_shape(a) if shape is None else shape, fill_value,
                _dtype(a) if dtype is None else dtype)


@_export
def zeros_like(a, dtype=None, shape=None):
    return full_like(a, 0, dtype, shape)


@_export
def ones_like(a, dtype=None, shape=None):
    return full_like(a, 1, dtype, shape)


empty_like = zeros_like
__all__.append("empty_like")


@_export
def array(object, dtype=None, copy=True, ndmin=0):
    """An Array from an array-like (nested lists may hold Arrays or tracers)."""
    if _is_array(object):
        out = object if dtype is None else _convert(object, _dt.canonicalize(dtype))
        if copy and out is object and isinstance(object, Array):
            out = _core.bind("copy", (object,), None)
    else:
        out = _arr(object, dtype)
    if ndmin and _ndim(out) < ndmin:
        out = lax.reshape(out, (1,) * (ndmin - _ndim(out)) + _shape(out))
    return out


@_export
def asarray(a, dtype=None, order=None, *, copy=None):
    """a as an Array (Arrays and tracers of the right dtype pass through)."""
    if _is_array(a):
        return a if dtype is None else _convert(a, _dt.canonicalize(dtype))
    return _arr(a, dtype)


@_export
def arange(start, stop=None, step=None, dtype=None):
    """Evenly spaced values in [start, stop) (static arguments); ints give the
    default int, floats the default float."""
    start, stop, step = _known(start), _known(stop), _known(step)
    _check_concrete("arange", start, stop, step)
    if stop is None and step is None and dtype is None and \
            isinstance(start, (int, np.integer)) and not isinstance(start, bool):
        n = builtins.max(operator.index(start), 0)
        _check_fits("arange", n - 1, _dt.default_int())
        return lax.iota(_dt.default_int(), n)
    args = [start] + ([stop] if stop is not None else []) + ([step] if step is not None else [])
    if stop is None and step is not None:
        args = [0, start, step]
    args = [np.asarray(a).item() if isinstance(a, Array) else a for a in args]
    ref = np.arange(*args, dtype=dtype)
    dt = _dt.canonicalize(ref.dtype if dtype is None else dtype)
    if ref.size and np.issubdtype(dt, np.integer):
        _check_fits("arange", ref.min(), dt)
        _check_fits("arange", ref.max(), dt)
    return _core.asarray(ref, dtype=dt)


def _check_fits(who, value, dtype):
    """Raises OverflowError unless the integer value fits dtype (say, int32 with
    x64 off) instead of letting the conversion wrap."""
    info = np.iinfo(dtype)
    if not info.min <= int(value) <= info.max:
        raise OverflowError(f"{who}: value {int(value)} does not fit in {np.dtype(dtype).name} "
                            f"(range [{info.min}, {info.max}]); enable x64 or pass a wider "
                            f"dtype")


@_export
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """num evenly spaced values from start to stop. num, endpoint and axis are
    static; start and stop may be traced (then the values are computed as
    start * (1 - t) + stop * t, t = i / (num - 1), and integer dtypes floor)."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    if _is_tracer(start) or _is_tracer(stop):
        return _linspace_traced(start, stop, num, endpoint, retstep, dtype, axis)
    start_np = np.asarray(start)
    stop_np = np.asarray(stop)
    dt = _dt.canonicalize(dtype) if dtype is not None else \
        _dt.to_inexact(_dt.result_type(_arr(start), _arr(stop)))
    vals, step = np.linspace(start_np.astype(np.float64) if not np.iscomplexobj(start_np)
                             else start_np, stop_np, num, endpoint=endpoint,
                             retstep=True, axis=axis)
    out = _core.asarray(vals.astype(dt), dtype=dt)
    return (out, step) if retstep else out


def _linspace_traced(start, stop, num, endpoint, retstep, dtype, axis):
    start, stop = _arr(start), _arr(stop)
    dt = _dt.canonicalize(dtype) if dtype is not None else \
        _dt.to_inexact(_dt.result_type(start, stop))
    cdt = dt if _dt.is_inexact(dt) else _dt.default_float()
    bshape = broadcast_shapes(_shape(start), _shape(stop))
    ax = _canon_axis(axis, len(bshape) + 1)
    rshape = bshape[:ax] + (1,) + bshape[ax:]
    s = reshape(_broadcast_to(_convert(start, cdt), bshape), rshape)
    e = reshape(_broadcast_to(_convert(stop, cdt), bshape), rshape)
    div = num - 1 if endpoint else num
    rdt = _dt.real_dtype(cdt)
    tshape = [1] * len(rshape)
    tshape[ax] = num
    t = lax.reshape(lax.iota(rdt, num), tuple(tshape))
    if div > 0:
        t = true_divide(t, _convert(float(div), rdt))
    t = _convert(t, cdt)
    out = add(multiply(s, subtract(_convert(1, cdt), t)), multiply(e, t))
    if not _dt.is_inexact(dt):
        out = floor(out)
    out = _convert(out, dt)
    if not retstep:
        return out
    delta = subtract(_convert(stop, cdt), _convert(start, cdt))
    step = true_divide(delta, _convert(float(div), rdt)) if div > 0 else \
        multiply(delta, _convert(np.nan, rdt))
    return out, step


@_export
def eye(N, M=None, k=0, dtype=None):
    """A 2-D array with ones on the k-th diagonal."""
    dt = _dt.canonicalize(dtype) if dtype is not None else _dt.default_float()
    return _core.asarray(np.eye(N, M, k, dtype=dt), dtype=dt)


@_export
def identity(n, dtype=None):
    return eye(n, dtype=dtype)


@_export
def tri(N, M=None, k=0, dtype=None):
    dt = _dt.canonicalize(dtype) if dtype is not None else _dt.default_float()
    return _core.asarray(np.tri(N, M, k, dtype=dt), dtype=dt)


# ------------------------------------------------------------------ dtype conversion

@_export
def astype(x, dtype, /, *, copy=False):
    """x converted to dtype (canonicalised under the x64 switch)."""
    return _convert(_arr(x), _dt.canonicalize(dtype))


# ------------------------------------------------------------------ shape manipulation

@_export
def shape(a):
    return _shape(a)


@_export
def ndim(a):
    return _ndim(a)


@_export
def size(a, axis=None):
    s = _shape(a)
    return _size(s) if axis is None else s[axis]


@_export
def reshape(a, newshape=None, order="C", *, shape=None):
    """a with the same elements in C order in newshape (one dim may be -1)."""
    if newshape is None:
        newshape = shape
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    a = _arr(a)
    old = _shape(a)
    new = list(_shape_arg(newshape))
    n = _size(old)
    if new.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in new:
        i = new.index(-1)
        rest = _size(new[:i] + new[i + 1:])
        if rest == 0 or n % rest:
            raise TypeError(f"cannot reshape array of shape {old} (size {n}) into shape "
                            f"{tuple(newshape)}")
        new[i] = n // rest
    new = tuple(new)
    if builtins.any(d < 0 for d in new) or _size(new) != n:
        raise TypeError(f"cannot reshape array of shape {old} (size {n}) into shape {new} "
                        f"(size {_size(new)})")
    if new == old:
        return a
    return lax.reshape(a, new)


@_export
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


@_export
def transpose(a, axes=None):
    a = _arr(a)
    nd = _ndim(a)
    if axes is None:
        perm = tuple(range(nd))[::-1]
    else:
        perm = tuple(_canon_axis(i, nd) for i in axes)
        if sorted(perm) != list(range(nd)):
            raise ValueError("axes don't match array")
    if perm == tuple(range(nd)):
        return a
    return lax.transpose(a, perm)


@_export
def permute_dims(a, axes):
    return transpose(a, axes)


@_export
def swapaxes(a, axis1, axis2):
    a = _arr(a)
    nd = _ndim(a)
    perm = list(range(nd))
    i, j = _canon_axis(axis1, nd), _canon_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


@_export
def moveaxis(a, source, destination):
    a = _arr(a)
    nd = _ndim(a)
    src = [_canon_axis(s, nd) for s in ((source,) if isinstance(source, int) else source)]
    dst = [_canon_axis(d, nd) for d in
           ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number "
                         "of elements")
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


@_export
def squeeze(a, axis=None):
    """a without size-1 dims (all of them, or the given ones, which must be size 1)."""
    a = _arr(a)
    s = _shape(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(s) if d == 1)
    else:
        axes = _canon_axes(axis, len(s))
        for i in axes:
            if s[i] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 "equal to one")
    if not axes:
        return a
    return lax.reshape(a, tuple(d for i, d in enumerate(s) if i not in axes))


@_export
def expand_dims(a, axis):
    """a with size-1 dims inserted at the given positions of the result."""
    a = _arr(a)
    s = _shape(a)
    axis = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = len(s) + len(axis)
    axes = _canon_axes(axis, nd)
    out = list(s)
    for i in axes:
        out.insert(i, 1)
    return lax.reshape(a, tuple(out))


@_export
def atleast_1d(*arys):
    out = [reshape(_arr(a), (1,)) if _ndim(a) == 0 else _arr(a) for a in arys]
    return out[0] if len(out) == 1 else out


@_export
def atleast_2d(*arys):
    out = []
    for a in arys:
        a = _arr(a)
        nd = _ndim(a)
        out.append(reshape(a, (1,) * (2 - nd) + _shape(a)) if nd < 2 else a)
    return out[0] if len(out) == 1 else out


@_export
def atleast_3d(*arys):
    out = []
    for a in arys:
        a = _arr(a)
        s = _shape(a)
        if len(s) == 0:
            a = reshape(a, (1, 1, 1))
        elif len(s) == 1:
            a = reshape(a, (1, s[0], 1))
        elif len(s) == 2:
            a = reshape(a, s + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


@_export
def broadcast_to(array, shape):
    """array broadcast to shape (NumPy's rules)."""
    return _broadcast_to(_arr(array), _shape_arg(shape))


@_export
def broadcast_arrays(*args):
    args = [_arr(a) for a in args]
    shape = broadcast_shapes(*[_shape(a) for a in args])
    return [_broadcast_to(a, shape) for a in args]


@_export
def concatenate(arrays, axis=0, dtype=None):
    """arrays joined along an existing axis (None: flattened first)."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = _ndim(arrays[0])
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    for a in arrays:
        if _ndim(a) != nd:
            raise ValueError("all the input arrays must have same number of dimensions")
    ax = _canon_axis(axis, nd)
    dt = _dt.result_type(*arrays) if dtype is None else _dt.canonicalize(dtype)
    arrays = [_convert(a, dt) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    return lax.concatenate(arrays, ax)


concat = concatenate
__all__.append("concat")


@_export
def stack(arrays, axis=0, dtype=None):
    """arrays (of equal shape) joined along a new axis."""
    arrays = [_arr(a) for a in arrays]
    if not arrays:
        raise ValueError("need at least one array to stack")
    s = _shape(arrays[0])
    for a in arrays:
        if _shape(a) != s:
            raise ValueError("all input arrays must have the same shape")
    ax = _canon_axis(axis, len(s) + 1)
    return concatenate([expand_dims(a, ax) for a in arrays], ax, dtype)


@_export
def hstack(tup, dtype=None):
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if _ndim(arrs[0]) == 1 else 1, dtype)


@_export
def vstack(tup, dtype=None):
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


@_export
def column_stack(tup):
    arrs = []
    for a in tup:
        a = _arr(a)
        arrs.append(reshape(a, (-1, 1)) if _ndim(a) < 2 else a)
    return concatenate(arrs, 1)


@_export
def flip(m, axis=None):
    """m with the order of elements reversed along axis (all axes if None)."""
    m = _arr(m)
    axes = _canon_axes(axis, _ndim(m))
    return lax.rev(m, axes) if axes else m


@_export
def fliplr(m):
    return flip(m, 1)


@_export
def flipud(m):
    return flip(m, 0)


# ------------------------------------------------------------------ reductions

def _reduction_dtype(dt, dtype, promote_ints):
    if dtype is not None:
        return _dt.canonicalize(dtype)
    if promote_ints:
        if _dt.is_bool(dt):
            return _dt.default_int()
        if np.issubdtype(dt, np.signedinteger) and dt.itemsize < _dt.default_int().itemsize:
            return _dt.default_int()
        if np.issubdtype(dt, np.unsignedinteger) and \
                dt.itemsize < _dt.default_uint().itemsize:
            return _dt.default_uint()
    return dt


def _keepdims(out, in_shape, axes):
    return lax.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(in_shape)))


def _reduce(prim, a, axis, dtype, keepdims, promote_ints, name, identity=True):
    a = _arr(a)
    s = _shape(a)
    axes = _canon_axes(axis, len(s))
    if not identity and builtins.any(s[i] == 0 for i in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no "
                         "identity")
    cur, weak = _dt.dtype_and_weak(a)
    dt = _reduction_dtype(cur, dtype, promote_ints)
    a = _convert(a, dt, weak and dt == cur)
    out = lax._bind(prim, a, axes=axes) if axes else a
    return _keepdims(out, s, axes) if keepdims and axes else out


def _no_out(out, who):
    if out is not None:
        raise NotImplementedError(f"{who}: the 'out' argument is not supported (olympus "
                                  "arrays are immutable)")


def _where_mask(where, shape, who):
    """where (a bool array-like) broadcast to shape, or None."""
    if where is None:
        return None
    w = _arr(where)
    if not _dt.is_bool(_dtype(w)):
        raise TypeError(f"{who}: where must be a bool array, got dtype {_dtype(w)}")
    try:
        return _broadcast_to(w, shape)
    except ValueError:
        raise ValueError(f"{who}: where of shape {_shape(w)} does not broadcast to the "
                         f"operand's shape {shape}") from None


def _masked(a, mask, fill):
    """a where mask else fill (a scalar, in a's dtype)."""
    if mask is None:
        return a
    return lax.select_n(mask, _broadcast_to(_convert(fill, _dtype(a)), _shape(a)), a)


def _with_initial(out, initial, combine):
    """out combined with the scalar initial (cast to out's dtype, as NumPy does)."""
    if initial is None:
        return out
    init = _arr(initial)
    if _ndim(init):
        raise ValueError(f"initial must be a scalar, got shape {_shape(init)}")
    return combine(out, _convert(init, _dtype(out)))


def _sum_like(prim, fill, combine, a, axis, dtype, out, keepdims, initial, where, who):
    _no_out(out, who)
    a = _arr(a)
    if _dt.is_bool(_dtype(a)) and dtype is None:
        a = _convert(a, _dt.default_int())
    a = _masked(a, _where_mask(where, _shape(a), who), fill)
    r = _reduce(prim, a, axis, dtype, keepdims, True, who)
    return _with_initial(r, initial, combine)


@_export
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum over axis (None: all); bools and small ints sum in the default int.
    where= leaves elements out, initial= is added."""
    return _sum_like("reduce_sum", 0, add, a, axis, dtype, out, keepdims, initial, where, "sum")


@_export
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product over axis (None: all); bools and small ints multiply in the default int.
    where= leaves elements out, initial= multiplies in."""
    return _sum_like("reduce_prod", 1, multiply, a, axis, dtype, out, keepdims, initial,
                     where, "prod")


def _extremum(prim, name, bool_prim, combine, a, axis, out, keepdims, initial, where):
    _no_out(out, name)
    a = _arr(a)
    s = _shape(a)
    axes = _canon_axes(axis, len(s))
    mask = _where_mask(where, s, name)
    if mask is not None and initial is None:
        raise ValueError(f"reduction operation '{name}' does not have an identity, so to use "
                         "a where mask one has to specify 'initial'")
    if initial is not None:
        init = _convert(_arr(initial), _dtype(a))
        if _ndim(init):
            raise ValueError(f"initial must be a scalar, got shape {_shape(init)}")
        if builtins.any(s[i] == 0 for i in axes):  # nothing to reduce: initial itself
            shape = tuple(1 if i in axes else d for i, d in enumerate(s)) if keepdims else \
                tuple(d for i, d in enumerate(s) if i not in axes)
            return _broadcast_to(init, shape)
        if mask is not None:
            a = lax.select_n(mask, _broadcast_to(init, s), a)
    if _dt.is_bool(_dtype(a)):
        prim = bool_prim
    r = _reduce(prim, a, axes, None, keepdims, False, name, identity=False)
    return r if initial is None else combine(r, init)


@_export
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum over axis (None: all); with where=, initial= is required."""
    return _extremum("reduce_max", "maximum", "reduce_or", maximum, a, axis, out, keepdims,
                     initial, where)


@_export
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum over axis (None: all); with where=, initial= is required."""
    return _extremum("reduce_min", "minimum", "reduce_and", minimum, a, axis, out, keepdims,
                     initial, where)


amax = max
amin = min
__all__ += ["amax", "amin"]


@_export
def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether any element along axis is true (elements outside where= are not)."""
    _no_out(out, "any")
    a = _to_bool(a)
    a = _masked(a, _where_mask(where, _shape(a), "any"), False)
    return _reduce("reduce_or", a, axis, None, keepdims, False, "any")


@_export
def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """Whether every element along axis is true (elements outside where= are)."""
    _no_out(out, "all")
    a = _to_bool(a)
    a = _masked(a, _where_mask(where, _shape(a), "all"), True)
    return _reduce("reduce_and", a, axis, None, keepdims, False, "all")


def _count(s, axes, mask, keepdims, dt):
    """The number of elements reduced (a Python int, or an array under where=)."""
    if mask is None:
        return _size([s[i] for i in axes])
    return sum(mask, axis=axes, dtype=dt, keepdims=keepdims)


@_export
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean over axis; ints and bools average in the default float.
    where= leaves elements out (an empty selection gives nan)."""
    _no_out(out, "mean")
    a = _arr(a)
    s = _shape(a)
    axes = _canon_axes(axis, len(s))
    if dtype is None:
        dt = _dt.to_inexact(_dtype(a))
    else:
        dt = _dt.canonicalize(dtype)
    mask = _where_mask(where, s, "mean")
    total = sum(_convert(a, dt), axis=axes, dtype=dt, keepdims=keepdims, where=mask)
    n = _count(s, axes, mask, keepdims, _dt.real_dtype(dt) if _dt.is_inexact(dt) else dt)
    if mask is not None:
        return true_divide(total, n)
    return _core.bind("div", (total, _convert(float(n) if n else np.nan, dt)), None) \
        if n else _core.bind("mul", (total, _convert(np.nan, dt)), None)


def _ddof(ddof, correction, who):
    if correction is not None:
        if ddof != 0:
            raise ValueError(f"{who}: ddof and correction can't both be specified")
        return correction
    return ddof


@_export
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Variance over axis (ddof, or the array API's correction: delta degrees of
    freedom); where= leaves elements out."""
    _no_out(out, "var")
    ddof = _ddof(ddof, correction, "var")
    a = _arr(a)
    s = _shape(a)
    axes = _canon_axes(axis, len(s))
    dt = _dt.to_inexact(_dtype(a)) if dtype is None else _dt.canonicalize(dtype)
    a = _convert(a, dt)
    mask = _where_mask(where, s, "var")
    centered = subtract(a, mean(a, axes, keepdims=True, where=mask))
    # left-out elements (nans in nanvar) must not reach the square: 0 * nan
    # in its derivative would poison the gradient
    centered = _masked(centered, mask, 0)
    if np.issubdtype(dt, np.complexfloating):
        sq = real(multiply(centered, conjugate(centered)))
    else:
        sq = multiply(centered, centered)
    total = sum(sq, axes, keepdims=keepdims, where=mask)
    rdt = _dt.real_dtype(dt)
    if mask is None:
        n = builtins.max(_size([s[i] for i in axes]) - ddof, 0)
        return true_divide(total, _convert(float(n), rdt))
    n = maximum(subtract(_count(s, axes, mask, keepdims, rdt), _convert(ddof, rdt)), 0)
    return true_divide(total, n)


@_export
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    """Standard deviation over axis: the square root of var (same arguments)."""
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _arg_reduce(prim, name, a, axis, keepdims):
    a = _arr(a)
    if axis is None:
        s = _shape(a)
        a = ravel(a)
        if _shape(a)[0] == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        out = lax._bind(prim, a, axes=(0,), index_dtype=_dt.default_int())
        return lax.reshape(out, (1,) * len(s)) if keepdims else out
    s = _shape(a)
    ax = _canon_axis(axis, len(s))
    if s[ax] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    out = lax._bind(prim, a, axes=(ax,), index_dtype=_dt.default_int())
    return _keepdims(out, s, (ax,)) if keepdims else out


@_export
def argmax(a, axis=None, out=None, keepdims=False):
    """Index of the first maximum (over the flattened array when axis is None)."""
    return _arg_reduce("argmax", "argmax", a, axis, keepdims)


@_export
def argmin(a, axis=None, out=None, keepdims=False):
    """Index of the first minimum (over the flattened array when axis is None)."""
    return _arg_reduce("argmin", "argmin", a, axis, keepdims)


def _cumulative(prim, name, promote):
    def f(a, axis=None, dtype=None, out=None):
        if out is not None:
            raise NotImplementedError("out= is not supported")
        a = _arr(a)
        if axis is None:
            a = ravel(a)
            axis = 0
        ax = _canon_axis(axis, _ndim(a))
        dt = _reduction_dtype(_dtype(a), dtype, promote)
        return lax._bind(prim, _convert(a, dt), axis=ax, reverse=False)
    return _define(name, f, f"Cumulative {name[3:]} along axis (None: flattened).")


cumsum = _cumulative("cumsum", "cumsum", True)
cumprod = _cumulative("cumprod", "cumprod", True)


# ------------------------------------------------------------------ sorting
# Over the sort primitive: NumPy's order (NaNs last, complex by (real, imag),
# -0.0 == 0.0), always stable. Descending sorts reverse the ascending order
# (NaNs first); argsort keeps ties in index order either way (JAX's rule).

_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _sort_operand(a, axis, kind, order, who):
    if order is not None:
        raise NotImplementedError(f"{who}: 'order' (structured arrays) is not supported")
    if kind not in _SORT_KINDS:
        raise ValueError(f"{who}: kind must be one of {_SORT_KINDS[1:]} or None, got {kind!r}")
    a = _arr(a)
    if axis is None:
        return ravel(a), 0
    return a, _canon_axis(axis, _ndim(a))


@_export
def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """A sorted copy of a along axis (None: flattened); descending reverses it."""
    a, ax = _sort_operand(a, axis, kind, order, "sort")
    out = lax.sort(a, dimension=ax, is_stable=stable)
    return lax.rev(out, (ax,)) if descending else out


@_export
def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Indices that sort a along axis (None: flattened): a sort of (a, iota).
    Equal elements keep their index order, descending too."""
    a, ax = _sort_operand(a, axis, kind, order, "argsort")
    iota = lax.broadcasted_iota(_dt.default_int(), _shape(a), ax)
    if descending:
        a, iota = lax.rev(a, (ax,)), lax.rev(iota, (ax,))
    _, idx = lax.sort((a, iota), ax, stable, 1)
    return lax.rev(idx, (ax,)) if descending else idx


@_export
def lexsort(keys, axis=-1):
    """Indices that sort by several keys: the last key is the primary one."""
    if _is_array(keys) or isinstance(keys, np.ndarray):
        keys = _arr(keys)
        keys = [keys[i] for i in range(_shape(keys)[0])] if _ndim(keys) else [keys]
    keys = [_arr(k) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    shapes = {_shape(k) for k in keys}
    if len(shapes) > 1:
        raise ValueError(f"lexsort: all keys need to be the same shape, got "
                         f"{[_shape(k) for k in keys]}")
    shape = _shape(keys[0])
    if not shape:
        return _core.asarray(0, dtype=_dt.default_int())
    ax = _canon_axis(axis, len(shape))
    iota = lax.broadcasted_iota(_dt.default_int(), shape, ax)
    return lax.sort((*keys[::-1], iota), ax, True, len(keys))[-1]


@_export
def msort(a):
    """a sorted along its first axis."""
    return sort(a, axis=0)


def _check_kth(kth, a, axis, who):
    n = _shape(a)[axis]
    k = operator.index(kth)
    if not -n <= k < n:
        raise ValueError(f"{who}: kth {k} is out of bounds for an axis of size {n}")


@_export
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """a with its kth element where a sort would put it, the smaller ones
    before it and the larger after (here: the whole axis sorted)."""
    a, ax = _sort_operand(a, axis, None, order, "partition")
    _check_kth(kth, a, ax, "partition")
    return lax.sort(a, dimension=ax)


@_export
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices that partition a around its kth element (here: argsort's)."""
    a, ax = _sort_operand(a, axis, None, order, "argpartition")
    _check_kth(kth, a, ax, "argpartition")
    return argsort(a, axis=ax)


@_export
def sort_complex(a):
    """a sorted along its last axis (by real part, then imaginary), as complex
    numbers of its precision (JAX's dtype: float32 -> complex64)."""
    out = sort(a, axis=-1)
    dt = _dtype(out)
    if np.issubdtype(dt, np.complexfloating):
        return out
    if dt == np.float64:
        cdt = np.complex128
    elif np.issubdtype(dt, np.floating) or str(dt) == "bfloat16":
        cdt = np.complex64
    else:
        cdt = _dt.default_complex()
    return _convert(out, _dt.canonicalize(cdt))


# ------------------------------------------------------------------ linear algebra

def _dot_operands(a, b):
    a, b = _promote(_arr(a), _arr(b), broadcast=False)
    dt = _dtype(a)
    if _dt.is_bool(dt):
        return _convert(a, _dt.default_int()), _convert(b, _dt.default_int()), True
    return a, b, False


def _bool_back(out, was_bool):
    return _core.bind("ne", (out, _convert(0, _dtype(out))), None) if was_bool else out


@_export
def dot(a, b):
    """NumPy's dot: sum over the last axis of a and the second-to-last of b."""
    a, b, was_bool = _dot_operands(a, b)
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return _bool_back(multiply(a, b), was_bool)
    rc = 0 if nb == 1 else nb - 2
    out = lax.dot_general(a, b, (((na - 1,), (rc,)), ((), ())))
    return _bool_back(out, was_bool)


@_export
def matmul(a, b):
    """Matrix product with NumPy's broadcasting of the leading (batch) dims."""
    a, b, was_bool = _dot_operands(a, b)
    return _bool_back(_core.binop("matmul", a, b), was_bool)


@_export
def vdot(a, b):
    """Dot product of the flattened arrays, conjugating a."""
    a = ravel(conjugate(_arr(a)))
    return dot(a, ravel(_arr(b)))


@_export
def inner(a, b):
    """Sum over the last axes of a and b."""
    a, b, was_bool = _dot_operands(a, b)
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return _bool_back(multiply(a, b), was_bool)
    return _bool_back(lax.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ()))), was_bool)


@_export
def outer(a, b):
    """a[i] * b[j] of the flattened arrays."""
    a = ravel(_arr(a))
    b = ravel(_arr(b))
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


@_export
def tensordot(a, b, axes=2):
    a, b, was_bool = _dot_operands(a, b)
    na, nb = _ndim(a), _ndim(b)
    if isinstance(axes, int):
        ca, cb = tuple(range(na - axes, na)), tuple(range(axes))
    else:
        ca, cb = axes
        ca = (ca,) if isinstance(ca, int) else tuple(ca)
        cb = (cb,) if isinstance(cb, int) else tuple(cb)
        ca = tuple(_canon_axis(i, na) for i in ca)
        cb = tuple(_canon_axis(i, nb) for i in cb)
    return _bool_back(lax.dot_general(a, b, ((ca, cb), ((), ()))), was_bool)


@_export
def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    a = _arr(a)
    s = _shape(a)
    mask = _core.asarray(np.eye(s[axis1], s[axis2], offset, dtype=bool))
    a = moveaxis(a, (axis1, axis2), (-2, -1))
    return sum(where(mask, a, zeros((), _dtype(a))), axis=(-2, -1), dtype=dtype)

"""olympus.lax: thin wrappers over olympus's primitives. Unlike olympus.numpy,
these do not promote dtypes or broadcast: operands must already agree (a Python
scalar adopts the other operand's dtype)."""
import builtins
import operator

import numpy as np

from olympus import _core
from olympus._src import dtypes as _dt

__all__ = []


def _bind(prim, *args, **params):
    return _core.bind(prim, args, params or None)


def _ints(xs):
    return tuple(operator.index(x) for x in xs)


def _shape_of(x):
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else np.shape(x)


def _dtype_of(x):
    return _dt.dtype_and_weak(x)[0]


def _match_scalars(args):
    """Python scalars take the dtype of the first non-scalar operand (weak)."""
    ref = next((a for a in args if not _dt.is_python_scalar(a)), None)
    if ref is None:
        return args
    dt = _dtype_of(ref)
    return tuple(_scalar_as(a, dt) if _dt.is_python_scalar(a) else a for a in args)


def _scalar_as(v, dt):
    """A Python scalar as an operand of dtype dt: itself (a weak literal) when its
    default dtype is dt already, else a concrete value of dtype dt."""
    if _dtype_of(v) == dt:
        return v
    return _core.asarray(v, dtype=dt)


def _export(f):
    __all__.append(f.__name__)
    return f


# ------------------------------------------------------------------ elementwise

def _unary(prim, name=None):
    def f(x):
        return _core.bind(prim, (x,), None)
    f.__name__ = f.__qualname__ = name or prim
    f.__doc__ = f"Elementwise `{prim}` of x (the `{prim}` primitive)."
    __all__.append(f.__name__)
    return f


neg = _unary("neg")
sign = _unary("sign")
floor = _unary("floor")
ceil = _unary("ceil")
is_finite = _unary("is_finite")
exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log1p = _unary("log1p")
expm1 = _unary("expm1")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
tanh = _unary("tanh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
logistic = _unary("logistic")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
cbrt = _unary("cbrt")
abs = _unary("abs")
square = _unary("square")
bitwise_not = _unary("not", "bitwise_not")
real = _unary("real")
imag = _unary("imag")
conj = _unary("conj")


class RoundingMethod:
    AWAY_FROM_ZERO = "AWAY_FROM_ZERO"
    TO_NEAREST_EVEN = "TO_NEAREST_EVEN"


__all__.append("RoundingMethod")


@_export
def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """Round to the nearest integer value; ties away from zero (0) or to even (1)."""
    if rounding_method in (0, 1):
        rounding_method = ("AWAY_FROM_ZERO", "TO_NEAREST_EVEN")[rounding_method]
    return _bind("round", x, rounding_method=rounding_method)


@_export
def integer_pow(x, y):
    """x ** y for a static Python int y."""
    return _bind("integer_pow", x, y=operator.index(y))


@_export
def convert_element_type(operand, new_dtype, weak=False):
    """operand converted to new_dtype (canonicalised under the x64 switch)."""
    dt = _dt.canonicalize(new_dtype)
    return _bind("convert_element_type", operand, new_dtype=dt, weak_type=bool(weak))


def _binary(prim, name=None):
    def f(x, y):
        x, y = _match_scalars((x, y))
        return _core.bind(prim, (x, y), None)
    f.__name__ = f.__qualname__ = name or prim
    f.__doc__ = (f"Elementwise `{prim}` of x and y (the `{prim}` primitive): equal "
                 "dtypes, and equal shapes or one scalar.")
    __all__.append(f.__name__)
    return f


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
rem = _binary("rem")
pow = _binary("pow")
max = _binary("max")
min = _binary("min")
atan2 = _binary("atan2")
nextafter = _binary("nextafter")
bitwise_and = _binary("and", "bitwise_and")
bitwise_or = _binary("or", "bitwise_or")
bitwise_xor = _binary("xor", "bitwise_xor")
shift_left = _binary("shift_left")
shift_right_arithmetic = _binary("shift_right_arithmetic")
shift_right_logical = _binary("shift_right_logical")
eq = _binary("eq")
ne = _binary("ne")
lt = _binary("lt")
le = _binary("le")
gt = _binary("gt")
ge = _binary("ge")

# special functions (floating-point operands; float16/bfloat16 compute in float32)
erf = _unary("erf")
erfc = _unary("erfc")
erf_inv = _unary("erf_inv")
lgamma = _unary("lgamma")
digamma = _unary("digamma")
bessel_i0e = _unary("bessel_i0e")
bessel_i1e = _unary("bessel_i1e")
igamma = _binary("igamma")                    # igamma(a, x): regularized lower P(a, x)
igammac = _binary("igammac")                  # igammac(a, x): upper Q(a, x) = 1 - P
igamma_grad_a = _binary("igamma_grad_a")      # d/da igamma(a, x)
random_gamma_grad = _binary("random_gamma_grad")  # dx/da of a Gamma(a) sample x
polygamma = _binary("polygamma")              # polygamma(m, x), m a whole number
zeta = _binary("zeta")                        # Hurwitz zeta(x, q)


@_export
def threefry2x32(key0, key1, x0, x1):
    """(y0, y1): the Threefry-2x32 (20 rounds) hash of counters (x0, x1) under key
    (key0, key1); uint32 operands of one shape, rank-0 ones broadcast."""
    return _core.bind("threefry2x32", (key0, key1, x0, x1), None)


@_export
def select_n(which, *cases):
    """cases[which] elementwise: which is bool (two cases) or int32."""
    if not cases:
        raise ValueError("select_n must have at least one case")
    return _core.bind("select_n", (which,) + _match_scalars(cases), None)


@_export
def select(pred, on_true, on_false):
    """on_true where pred else on_false (pred is bool)."""
    return select_n(pred, on_false, on_true)


@_export
def clamp(min, x, max):
    """x clipped to [min, max]."""
    return globals()["min"](globals()["max"](min, x), max)


# ------------------------------------------------------------------ structural

@_export
def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """operand placed in an array of `shape`: operand dim i becomes output dim
    broadcast_dimensions[i] (its size 1 or equal to that dim)."""
    return _bind("broadcast_in_dim", operand, shape=_ints(shape),
                 broadcast_dimensions=_ints(broadcast_dimensions))


@_export
def broadcast(operand, sizes):
    """operand with leading dims `sizes` added."""
    shape = _ints(sizes) + _shape_of(operand)
    nd = len(_shape_of(operand))
    return broadcast_in_dim(operand, shape, range(len(shape) - nd, len(shape)))


@_export
def reshape(operand, new_sizes, dimensions=None):
    """operand with the same elements (C order) in shape new_sizes; dimensions,
    if given, transposes first."""
    if dimensions is not None:
        dims = tuple(int(d) for d in dimensions)
        if sorted(dims) != list(range(len(dims))) or len(dims) != len(operand.shape):
            raise ValueError(f"reshape: dimensions must be a permutation of "
                             f"{tuple(range(len(operand.shape)))}, got {dims}")
        operand = transpose(operand, dims)
    return _bind("reshape", operand, new_sizes=_ints(new_sizes))


@_export
def transpose(operand, permutation):
    return _bind("transpose", operand, permutation=_ints(permutation))


@_export
def squeeze(array, dimensions):
    """array without the listed dims (each of size 1)."""
    return _bind("squeeze", array, dimensions=_ints(dimensions))


@_export
def expand_dims(array, dimensions):
    """array with size-1 dims inserted at the listed output positions."""
    return _bind("expand_dims", array, dimensions=_ints(dimensions))


@_export
def rev(operand, dimensions):
    """operand reversed along the listed dims."""
    return _bind("rev", operand, dimensions=_ints(dimensions))


@_export
def slice(operand, start_indices, limit_indices, strides=None):
    """operand[start:limit:stride] along every dim (static, positive strides)."""
    nd = len(start_indices)
    strides = (1,) * nd if strides is None else strides
    return _bind("slice", operand, start_indices=_ints(start_indices),
                 limit_indices=_ints(limit_indices), strides=_ints(strides))


@_export
def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    shape = _shape_of(operand)
    start = [0] * len(shape)
    limit = list(shape)
    strides = [1] * len(shape)
    start[axis] = 0 if start_index is None else start_index
    limit[axis] = shape[axis] if limit_index is None else limit_index
    strides[axis] = stride
    return slice(operand, start, limit, strides)


@_export
def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start+size] per dim with start indices that may be traced
    (clamped so the slice fits)."""
    return _core.bind("dynamic_slice", (operand,) + tuple(start_indices),
                      {"slice_sizes": _ints(slice_sizes)})


@_export
def dynamic_update_slice(operand, update, start_indices):
    """operand with update written at start_indices (clamped so it fits)."""
    return _core.bind("dynamic_update_slice", (operand, update) + tuple(start_indices), None)


@_export
def concatenate(operands, dimension):
    """operands joined along dimension (equal dtypes, other dims equal)."""
    return _core.bind("concatenate", tuple(operands), {"dimension": operator.index(dimension)})


@_export
def pad(operand, padding_value, padding_config):
    """operand padded with padding_value: padding_config is one (lo, hi,
    interior) per dim; negative lo/hi crop."""
    cfg = [tuple(c) for c in padding_config]
    padding_value = _match_scalars((operand, padding_value))[1]
    return _core.bind("pad", (operand, padding_value),
                      {"lo": _ints(c[0] for c in cfg), "hi": _ints(c[1] for c in cfg),
                       "interior": _ints(c[2] for c in cfg)})


@_export
def iota(dtype, size):
    """[0, 1, ..., size-1] of dtype."""
    return broadcasted_iota(dtype, (size,), 0)


@_export
def broadcasted_iota(dtype, shape, dimension):
    """An array of shape whose value is its index along dimension."""
    return _core.bind("iota", (), {"dtype": _dt.canonicalize(dtype), "shape": _ints(shape),
                                   "dimension": operator.index(dimension)})


@_export
def full(shape, fill_value, dtype=None):
    """An array of shape filled with fill_value (a scalar)."""
    shape = _ints(shape) if not isinstance(shape, int) else (shape,)
    dt = _dt.canonicalize(dtype) if dtype is not None else _dtype_of(fill_value)
    v = convert_element_type(fill_value, dt)
    return broadcast_in_dim(v, shape, ()) if shape else v


@_export
def full_like(x, fill_value, dtype=None, shape=None):
    return full(_shape_of(x) if shape is None else shape, fill_value,
                _dtype_of(x) if dtype is None else dtype)


@_export
def zeros_like_array(x):
    return full_like(x, 0)


# ------------------------------------------------------------------ reductions

def _reducer(prim):
    def f(operand, axes):
        return _bind(prim, operand, axes=_ints(axes))
    f.__name__ = f.__qualname__ = prim
    f.__doc__ = f"`{prim}` of operand over axes."
    __all__.append(prim)
    return f


reduce_sum = _reducer("reduce_sum")
reduce_prod = _reducer("reduce_prod")
reduce_max = _reducer("reduce_max")
reduce_min = _reducer("reduce_min")
reduce_and = _reducer("reduce_and")
reduce_or = _reducer("reduce_or")


@_export
def argmax(operand, axis, index_dtype):
    """Index of the first maximum along axis."""
    return _bind("argmax", operand, axes=(operator.index(axis),),
                 index_dtype=_dt.canonicalize(index_dtype))


@_export
def argmin(operand, axis, index_dtype):
    """Index of the first minimum along axis."""
    return _bind("argmin", operand, axes=(operator.index(axis),),
                 index_dtype=_dt.canonicalize(index_dtype))


def _cumulative(prim):
    def f(operand, axis=0, reverse=False):
        return _bind(prim, operand, axis=operator.index(axis), reverse=bool(reverse))
    f.__name__ = f.__qualname__ = prim
    f.__doc__ = f"Inclusive `{prim}` of operand along axis (from the end if reverse)."
    __all__.append(prim)
    return f


cumsum = _cumulative("cumsum")
cumprod = _cumulative("cumprod")
cummax = _cumulative("cummax")
cummin = _cumulative("cummin")


# ------------------------------------------------------------------ sorting

def _sort_dimension(dimension, ndim):
    """dimension made non-negative when in range (else left for the primitive's
    error, which names the rank)."""
    d = operator.index(dimension)
    return d + ndim if -ndim <= d < 0 else d


@_export
def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sorts operand along dimension (NaNs last; complex by (real, imag)). Given
    a sequence of operands of one shape, sorts them together lexicographically
    by the first num_keys and returns the tuple of sorted operands."""
    if isinstance(operand, (list, tuple)):
        ops = tuple(operand)
        if not ops:
            raise ValueError("sort: expected at least one operand, got an empty sequence")
        num_keys = operator.index(num_keys)
        if not 1 <= num_keys <= len(ops):
            raise ValueError(f"sort: num_keys must be in [1, {len(ops)}] (the number of "
                             f"operands), got {num_keys}")
        dim = _sort_dimension(dimension, len(_shape_of(ops[0])))
        out = _bind("sort", *ops, dimension=dim, is_stable=bool(is_stable), num_keys=num_keys)
        return out if isinstance(out, tuple) else (out,)
    if operator.index(num_keys) != 1:
        raise ValueError(f"sort: num_keys must be 1 for a single operand, got {num_keys}")
    dim = _sort_dimension(dimension, len(_shape_of(operand)))
    return _bind("sort", operand, dimension=dim, is_stable=bool(is_stable), num_keys=1)


@_export
def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """(keys, values) sorted along dimension by keys."""
    return sort((keys, values), dimension, is_stable, 1)


@_export
def top_k(operand, k):
    """(values, int32 indices) of the k largest entries along the last axis,
    in descending order; among equal values the lower index comes first."""
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"top_k: k must be non-negative, got {k}")
    return _bind("top_k", operand, k=k)


# ------------------------------------------------------------------ linear algebra

@_export
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Generalised dot: dimension_numbers = ((lhs_contracting, rhs_contracting),
    (lhs_batch, rhs_batch)). Output dims: batch, lhs free, rhs free."""
    (lc, rc), (lb, rb) = dimension_numbers
    out = _core.bind("dot_general", (lhs, rhs),
                     {"lhs_contracting": _ints(lc), "rhs_contracting": _ints(rc),
                      "lhs_batch": _ints(lb), "rhs_batch": _ints(rb)})
    if preferred_element_type is not None:
        out = convert_element_type(out, preferred_element_type)
    return out


@_export
def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix products of rank-1 or rank-2 operands."""
    nl = len(_shape_of(lhs))
    return dot_general(lhs, rhs, (((nl - 1,), (0,)), ((), ())), precision,
                       preferred_element_type)


# ------------------------------------------------------------------ control flow

from olympus._src.control import (  # noqa: E402
    cond, switch, while_loop, fori_loop, scan, map,
)

__all__ += ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


# ------------------------------------------------------------------ misc

def _make_stop_gradient():
    from olympus._src.ad import custom_jvp

    @custom_jvp
    def stop_gradient_p(x):
        return x

    @stop_gradient_p.defjvp
    def _jvp(primals, tangents):
        from olympus import numpy as jnp
        return primals[0], jnp.zeros_like(tangents[0])
    return stop_gradient_p


_stop_gradient_p = None


@_export
def stop_gradient(x):
    """x itself, with zero derivative: differentiation treats it as a constant
    (every inexact leaf of the pytree x)."""
    global _stop_gradient_p
    if _stop_gradient_p is None:
        _stop_gradient_p = _make_stop_gradient()
    from olympus import tree_util

    def leaf(v):
        dt = _dtype_of(v)
        if not (_dt.is_inexact(np.dtype(dt))):
            return v
        return _stop_gradient_p(v)
    return tree_util.tree_map(leaf, x)


from olympus._src import slicing as _slicing  # noqa: E402
from olympus._src.slicing import *  # noqa: E402,F401,F403 (gather, scatter*, *_in_dim)

__all__ += _slicing.__all__

del builtins


# ------------------------------------------------------------------ fft

import enum as _enum  # noqa: E402


class FftType(_enum.IntEnum):
    """What `fft` computes (JAX's lax.FftType): FFT and IFFT complex to
    complex, RFFT real to half-spectrum complex, IRFFT back to real."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


__all__.append("FftType")


def _complex_of(dt):
    return np.dtype(np.complex128 if dt in (np.float64, np.complex128) else np.complex64)


@_export
def fft(x, fft_type, fft_lengths):
    """The fft primitive (JAX's lax.fft): fft_type (an FftType or its name)
    over the trailing len(fft_lengths) dims of x (1 to 3 of them), batched over
    the others. FFT / IFFT take the trailing dims fft_lengths; RFFT gives a last
    dim of n // 2 + 1; IRFFT takes that and gives fft_lengths. IFFT and IRFFT
    are scaled by 1 / prod(fft_lengths). As JAX's, x is converted first: to a
    complex dtype for FFT / IFFT / IRFFT, to a real one for RFFT (complex input
    is a ValueError; float16 / bfloat16 compute in float32)."""
    typ = FftType[fft_type] if isinstance(fft_type, str) else FftType(fft_type)
    if isinstance(fft_lengths, (int, np.integer)):
        fft_lengths = (fft_lengths,)
    lengths = _ints(fft_lengths)
    dt = np.dtype(_dtype_of(x))
    if typ == FftType.RFFT:
        if np.issubdtype(dt, np.complexfloating):
            raise ValueError("only real valued inputs supported for rfft")
        want = np.dtype(np.float64) if dt == np.float64 else \
            np.dtype(np.float32) if np.issubdtype(dt, np.floating) else _dt.default_float()
    else:
        want = _complex_of(_dt.to_inexact(dt))
    want = _dt.canonicalize(want)
    if dt != want:
        x = convert_element_type(x, want)
    return _bind("fft", x, fft_type=int(typ), fft_lengths=lengths)


# ------------------------------------------------------------------ collectives

from olympus._src.parallel import (  # noqa: E402
    all_gather, all_to_all, axis_index, axis_size, pmax, pmean, pmin, ppermute, pshuffle, psum,
    psum_scatter)

__all__ += ["psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "ppermute",
            "pshuffle", "all_to_all", "axis_index", "axis_size"]

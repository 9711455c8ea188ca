"""olympus.numpy, continued: the rest of jax.numpy's surface that needs no
gather or scatter — splitting, tiling, padding, rolling, diagonals and
triangles, grids and index helpers, comparisons (isclose, select, piecewise),
the nan-reductions and statistics (average, cov, gradient, ...), the
remaining ufuncs (logaddexp, frexp, gcd, ...), bit packing, window functions,
vectorize/ufunc, and NumPy's plain names (dtypes, I/O, print options).

Everything is built from olympus.lax and the functions of jnp.py, so it runs
eagerly and under jit and differentiates through their rules. Shapes must be
static: arguments that decide a shape (split points, repeats, pad widths)
must be concrete, as in JAX. Dtypes follow JAX's promotion (Python scalars
are weak) canonicalised by the x64 switch."""
import builtins
import functools
import math
import operator
import re

import numpy as np

from olympus import _core
from olympus import lax
from olympus._src import dtypes as _dt
from olympus._src.jnp import (  # the helpers and the functions this builds on
    _arr, _shape, _ndim, _dtype, _canon_axis, _canon_axes, _convert, _promote,
    _broadcast_to, _is_array, _is_tracer, _to_bool, _size, _AxisError, _where_mask,
    absolute, add, all, any, arange, argmax, argmin, array, atleast_2d, atleast_3d, arctan2,
    broadcast_arrays, broadcast_shapes, broadcast_to, concatenate, conjugate, cumprod, cumsum,
    equal, exp, exp2, expand_dims, flip, floor, floor_divide, full, greater, greater_equal,
    imag, isfinite, isinf, isnan, left_shift, less, less_equal, linspace, log, log1p, log10,
    logical_and, logical_not, logical_or, matmul, max, maximum, mean, min, minimum, moveaxis,
    multiply, negative, nextafter, not_equal, ones, power, prod, ravel, real, remainder,
    reshape, right_shift, signbit, sin, sqrt, squeeze, stack, std, subtract, sum, swapaxes,
    transpose, true_divide, trunc, var, where, zeros, bitwise_not,
    arccos, arccosh, arcsin, arcsinh, arctan, arctanh, astype,
)

Array = _core.Array

__all__ = []


def _export(f):
    __all__.append(f.__name__)
    return f


def _alias(name, f):
    globals()[name] = f
    __all__.append(name)


# ------------------------------------------------------------------ helpers

def _inexact(*xs):
    """xs converted to their common inexact dtype (not broadcast; weak kept)."""
    out = _promote(*xs, to_inexact=True, broadcast=False)
    return out[0] if len(out) == 1 else out


def _is_complex(dt):
    return np.issubdtype(dt, np.complexfloating)


def _no_complex(x, who):
    if _is_complex(_dtype(x)):
        raise TypeError(f"{who} does not support complex inputs, got dtype {_dtype(x)}")


def _concrete_value(x, who, what):
    """x as a NumPy value; a traced x raises ConcretizationTypeError naming who/what
    (outside jit, autodiff's tracers know their values)."""
    from olympus._src.jnp import _known
    x = [_known(v) for v in x] if isinstance(x, (list, tuple)) else _known(x)
    if _is_tracer(x) or (isinstance(x, (list, tuple)) and builtins.any(_is_tracer(v)
                                                                    for v in x)):
        raise _core.ConcretizationTypeError(
            f"Abstract tracer value encountered where concrete value is expected: {what} of "
            f"`{who}` must be concrete (it decides a shape), not traced")
    return np.asarray(x)


def _static_int(x, who, what):
    v = _concrete_value(x, who, what)
    if v.ndim or not (np.issubdtype(v.dtype, np.integer) or v.dtype == np.bool_):
        raise TypeError(f"{who}: {what} must be an integer, got {x!r}")
    return int(v)


def _slice_axis(x, start, stop, axis, stride=1):
    if start == 0 and stop == _shape(x)[axis] and stride == 1:
        return x
    return lax.slice_in_dim(x, start, stop, stride, axis)


def _zeros_of(x):
    return _broadcast_to(_convert(0, _dtype(x)), _shape(x))


def _int32(x):
    return _convert(_arr(x), np.int32)


_where_fn = where   # for the functions whose where= parameter hides jnp.where


# ------------------------------------------------------------------ array API aliases

for _n, _f in [("acos", arccos), ("acosh", arccosh), ("asin", arcsin), ("asinh", arcsinh),
               ("atan", arctan), ("atanh", arctanh), ("atan2", arctan2),
               ("bitwise_invert", bitwise_not), ("bitwise_left_shift", left_shift),
               ("bitwise_right_shift", right_shift)]:
    _alias(_n, _f)


# ------------------------------------------------------------------ ufuncs

@_export
def fabs(x, /):
    """Absolute value of a real x; ints and bools compute in the default float."""
    x = _inexact(x)
    _no_complex(x, "fabs")
    return absolute(x)


@_export
def deg2rad(x, /):
    """Degrees to radians (ints compute in the default float)."""
    return multiply(_inexact(x), np.pi / 180)


@_export
def rad2deg(x, /):
    """Radians to degrees (ints compute in the default float)."""
    return multiply(_inexact(x), 180 / np.pi)


_alias("radians", deg2rad)
_alias("degrees", rad2deg)


@_export
def heaviside(x1, x2, /):
    """0 where x1 < 0, 1 where x1 > 0, x2 where x1 == 0 (nan where x1 is nan)."""
    x1, x2 = _promote(x1, x2, to_inexact=True)
    _no_complex(x1, "heaviside")
    x1, x2 = broadcast_arrays(x1, x2)
    dt = _dtype(x1)
    one, zero = _convert(1, dt), _convert(0, dt)
    out = where(less(x1, 0), zero, where(greater(x1, 0), one, x2))
    return where(isnan(x1), x1, out)


@_export
def copysign(x1, x2, /):
    """The magnitude of x1 with the sign of x2 (the sign bit: -0.0 counts as negative)."""
    x1, x2 = _promote(x1, x2, to_inexact=True)
    _no_complex(x1, "copysign")
    mag = absolute(x1)
    return where(signbit(x2), negative(mag), mag)


@_export
def isposinf(x, /):
    """x == +inf (False for ints and bools)."""
    x = _arr(x)
    _no_complex(x, "isposinf")
    if not _dt.is_inexact(_dtype(x)):
        return full(_shape(x), False, np.bool_)
    return equal(x, np.inf)


@_export
def isneginf(x, /):
    """x == -inf (False for ints and bools)."""
    x = _arr(x)
    _no_complex(x, "isneginf")
    if not _dt.is_inexact(_dtype(x)):
        return full(_shape(x), False, np.bool_)
    return equal(x, -np.inf)


@_export
def iscomplex(x):
    """True where x has a non-zero imaginary part."""
    x = _arr(x)
    if _is_complex(_dtype(x)):
        return not_equal(imag(x), 0)
    return full(_shape(x), False, np.bool_)


@_export
def isreal(x):
    """True where x has a zero imaginary part (everywhere for real dtypes)."""
    x = _arr(x)
    if _is_complex(_dtype(x)):
        return equal(imag(x), 0)
    return full(_shape(x), True, np.bool_)


@_export
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """x with nan replaced by `nan`, +inf by posinf (default: the largest
    finite value) and -inf by neginf (default: the most negative one); complex
    values are treated part by part; ints pass through."""
    x = _arr(x)
    dt = _dtype(x)
    if not _dt.is_inexact(dt):
        return x
    if _is_complex(dt):
        re = nan_to_num(real(x), nan=nan, posinf=posinf, neginf=neginf)
        im = nan_to_num(imag(x), nan=nan, posinf=posinf, neginf=neginf)
        return add(_convert(re, dt), multiply(_convert(im, dt), _convert(1j, dt)))
    info = np.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(isnan(x), _convert(nan, dt), x)
    out = where(equal(x, np.inf), _convert(posinf, dt), out)
    return where(equal(x, -np.inf), _convert(neginf, dt), out)


def _abs_kink_free(x):
    """|x| whose derivative at 0 is 0 (the mean of the one-sided ones)."""
    z = _zeros_of(x)
    return where(greater(x, 0), x, where(less(x, 0), negative(x), z))


@_export
def i0(x):
    """The modified Bessel function of the first kind, order 0 (real x; ints
    compute in the default float): exp(|x|) * bessel_i0e(x)."""
    x = _inexact(x)
    _no_complex(x, "i0")
    x = _arr(x)
    return multiply(exp(_abs_kink_free(x)), lax.bessel_i0e(x))


@_export
def sinc(x, /):
    """sin(pi x) / (pi x), 1 at 0 (where derivatives come from the Taylor
    series, so grads at 0 are right to fourth order)."""
    x = _arr(_inexact(x))
    zero = equal(x, 0)
    y = multiply(x, np.pi)
    safe = where(zero, 1.0, y)       # Python scalars: a weak x stays weak
    y2 = multiply(y, y)
    taylor = add(subtract(1.0, true_divide(y2, 6)), true_divide(multiply(y2, y2), 120))
    return where(zero, taylor, true_divide(sin(safe), safe))


def _logaddexp(x1, x2, exp_fn, log1p_fn, scale):
    x1, x2 = _promote(x1, x2, to_inexact=True)
    _no_complex(x1, "logaddexp")
    x1, x2 = broadcast_arrays(x1, x2)
    first = greater_equal(x1, x2)    # false on nan
    amax = where(first, x1, x2)
    amin = where(first, x2, x1)
    # amax + log(1 + exp(amin - amax)): the derivatives split evenly at ties
    body = add(amax, multiply(log1p_fn(exp_fn(subtract(amin, amax))), scale))
    return where(isnan(subtract(x1, x2)), add(x1, x2), body)


@_export
def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)) without overflow."""
    return _logaddexp(x1, x2, exp, log1p, 1.0)


@_export
def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) without overflow."""
    return _logaddexp(x1, x2, exp2, log1p, 1 / math.log(2))


@_export
def spacing(x, /):
    """The distance from x to the next representable value away from zero
    (negative for negative x)."""
    x = _arr(_inexact(x))
    _no_complex(x, "spacing")
    return where(less(x, 0), subtract(nextafter(x, -np.inf), x),
                 subtract(nextafter(x, np.inf), x))


def _pow2(k, dt):
    """2.0 ** k (k an int array of whole values, in range for dt) as dt."""
    return exp2(_convert(k, dt))


@_export
def frexp(x, /):
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in
    [0.5, 1) (0, inf and nan give (x, 0)); the exponent is int32."""
    x = _arr(_inexact(x))
    _no_complex(x, "frexp")
    dt = _dtype(x)
    ax = absolute(x)
    special = logical_or(equal(x, 0), logical_not(isfinite(x)))
    safe = where(special, _convert(1, dt), ax)
    e = _convert(add(floor(true_divide(log(safe), math.log(2))), 1), np.int32)
    # scale by 2**-e in two steps so neither factor overflows (denormals)
    h = floor_divide(negative(e), 2)
    m = multiply(multiply(safe, _pow2(h, dt)), _pow2(subtract(negative(e), h), dt))
    # log2 may be off by one near powers of two: move m into [0.5, 1)
    big = greater_equal(m, _convert(1, dt))
    m = where(big, multiply(m, 0.5), m)
    e = where(big, add(e, 1), e)
    small = less(m, _convert(0.5, dt))
    m = where(small, multiply(m, 2), m)
    e = where(small, subtract(e, 1), e)
    m = where(signbit(x), negative(m), m)
    return where(special, x, m), where(special, _convert(0, np.int32), e)


@_export
def ldexp(x1, x2, /):
    """x1 * 2**x2 (x2 integer), rounded once, as NumPy's ldexp."""
    x2 = _arr(x2)
    if not _dt.is_integer(_dtype(x2)) and not _dt.is_bool(_dtype(x2)):
        raise TypeError(f"ldexp: the exponent must be an integer, got dtype {_dtype(x2)}")
    x1 = _arr(_inexact(x1))
    _no_complex(x1, "ldexp")
    x1, x2 = broadcast_arrays(x1, x2)
    dt = _dtype(x1)
    info = np.finfo(dt)
    m, e = frexp(x1)          # x1 = m 2**e, |m| in [0.5, 1)
    lo = int(info.minexp) - int(info.nmant) - 2
    hi = int(info.maxexp) + 2
    # clip x2 first so that e + x2 cannot overflow; beyond [lo, hi] the result is 0 or inf
    idt = _dt.default_int()
    x2c = minimum(maximum(_convert(x2, idt), lo - hi), hi - lo)
    k = _convert(minimum(maximum(add(_convert(e, idt), x2c), lo), hi), np.int32)
    # k > 0: (2m) * 2**(k-1), both exact until overflow; k <= 0: m * 2**k with
    # 2**k exact (or 0 below the denormals): one rounding either way.
    up = greater(k, 0)
    kk = where(up, subtract(k, 1), k)
    mm = where(up, multiply(m, 2), m)
    out = multiply(mm, _pow2(kk, dt))
    special = logical_or(equal(x1, 0), logical_not(isfinite(x1)))
    return where(special, x1, out)


@_export
def modf(x, /):
    """(fractional part, integral part), both with the sign of x."""
    x = _arr(_inexact(x))
    _no_complex(x, "modf")
    whole = trunc(x)
    frac = where(isinf(x), _zeros_of(x), subtract(x, whole))
    return copysign(frac, x), whole


def _int_operands(x1, x2, who):
    x1, x2 = _promote(x1, x2)
    if not _dt.is_integer(_dtype(x1)):
        raise TypeError(f"{who}: arguments must be integers, got dtype {_dtype(x1)}")
    return broadcast_arrays(x1, x2)


@_export
def gcd(x1, x2, /):
    """Greatest common divisor of |x1| and |x2| (Euclid's algorithm in a while_loop)."""
    x1, x2 = _int_operands(x1, x2, "gcd")
    a, b = absolute(x1), absolute(x2)
    zero = _zeros_of(a)

    def body(ab):
        a, b = ab
        nz = not_equal(b, 0)
        safe = where(nz, b, _broadcast_to(_convert(1, _dtype(b)), _shape(b)))
        return where(nz, b, a), where(nz, remainder(a, safe), zero)

    return lax.while_loop(lambda ab: any(not_equal(ab[1], 0)), body, (a, b))[0]


@_export
def lcm(x1, x2, /):
    """Least common multiple of |x1| and |x2| (0 if either is 0)."""
    x1, x2 = _int_operands(x1, x2, "lcm")
    d = gcd(x1, x2)
    nz = not_equal(d, 0)
    safe = where(nz, d, _broadcast_to(_convert(1, _dtype(d)), _shape(d)))
    return where(nz, absolute(multiply(x1, floor_divide(x2, safe))), _zeros_of(d))


@_export
def fmax(x1, x2):
    """Elementwise maximum that ignores a nan operand (nan only if both are)."""
    x1, x2 = _promote(x1, x2)
    x1, x2 = broadcast_arrays(x1, x2)
    if not _dt.is_inexact(_dtype(x1)):
        return maximum(x1, x2)
    return where(isnan(x2), x1, where(isnan(x1), x2, maximum(x1, x2)))


@_export
def fmin(x1, x2):
    """Elementwise minimum that ignores a nan operand (nan only if both are)."""
    x1, x2 = _promote(x1, x2)
    x1, x2 = broadcast_arrays(x1, x2)
    if not _dt.is_inexact(_dtype(x1)):
        return minimum(x1, x2)
    return where(isnan(x2), x1, where(isnan(x1), x2, minimum(x1, x2)))


@_export
def angle(z, deg=False):
    """The argument of z (radians, or degrees if deg); real x gives 0 or pi."""
    z = _arr(z)
    dt = _dtype(z)
    if _is_complex(dt):
        re, im = real(z), imag(z)
    else:
        re = _convert(z, _dt.to_inexact(dt))
        im = _zeros_of(re)
    out = arctan2(im, re)
    return rad2deg(out) if deg else out


@_export
def bitwise_count(x, /):
    """The number of 1 bits in |x| (uint8), as NumPy 2's bitwise_count."""
    x = _arr(x)
    dt = _dtype(x)
    if _dt.is_bool(dt):
        return _convert(x, np.uint8)
    if not _dt.is_integer(dt):
        raise TypeError(f"bitwise_count: expected an integer or bool array, got dtype {dt}")
    v = absolute(x) if np.issubdtype(dt, np.signedinteger) else x
    bits = dt.itemsize * 8
    srl = lax.shift_right_logical
    band = lax.bitwise_and
    for shift, pat in [(1, 0x55), (2, 0x33), (4, 0x0F)]:
        mask = int.from_bytes(bytes([pat]) * dt.itemsize, "little")
        if np.issubdtype(dt, np.signedinteger) and mask >= 1 << (bits - 1):
            mask -= 1 << bits
        mask = _convert(mask, dt)
        v = lax.add(band(v, mask), band(srl(v, _convert(shift, dt)), mask))
    s = 8
    while s < bits:
        v = lax.add(v, srl(v, _convert(s, dt)))
        s *= 2
    return _convert(band(v, _convert(0x7F, dt)), np.uint8)


# ------------------------------------------------------------------ bit packing

def _bitorder(bitorder):
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")
    return bitorder


@_export
def packbits(a, axis=None, bitorder="big"):
    """Truth values of a packed 8 to a uint8 along axis (None: flattened),
    zero-padded to a multiple of 8."""
    a = _arr(a)
    dt = _dtype(a)
    if not (_dt.is_integer(dt) or _dt.is_bool(dt)):
        raise TypeError(f"packbits: expected an input array of integer or boolean data type, "
                        f"got {dt}")
    _bitorder(bitorder)
    bits = _convert(not_equal(a, 0), np.uint8)
    if axis is None:
        bits, axis = ravel(bits), 0
    ax = _canon_axis(axis, _ndim(bits))
    s = _shape(bits)
    n = s[ax]
    rem = (-n) % 8
    if rem:
        cfg = [(0, 0, 0)] * len(s)
        cfg[ax] = (0, rem, 0)
        bits = lax.pad(bits, np.uint8(0), cfg)
    m = (n + rem) // 8
    bits = lax.reshape(bits, s[:ax] + (m, 8) + s[ax + 1:])
    order = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    shifts = _core.asarray(order.astype(np.uint8).reshape((8,) + (1,) * (len(s) - ax - 1)))
    return sum(left_shift(bits, shifts), axis=ax + 1, dtype=np.uint8)


@_export
def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of a uint8 array as uint8 0/1 values along axis (None:
    flattened); count keeps that many (negative: drops from the end)."""
    a = _arr(a)
    if _dtype(a) != np.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte data type, "
                        f"got {_dtype(a)}")
    _bitorder(bitorder)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _canon_axis(axis, _ndim(a))
    s = _shape(a)
    order = np.arange(7, -1, -1) if bitorder == "big" else np.arange(8)
    shifts = _core.asarray(order.astype(np.uint8).reshape((8,) + (1,) * (len(s) - ax - 1)))
    bits = lax.bitwise_and(right_shift(expand_dims(a, ax + 1), shifts), np.uint8(1))
    bits = lax.reshape(bits, s[:ax] + (s[ax] * 8,) + s[ax + 1:])
    if count is None:
        return bits
    n = s[ax] * 8
    count = operator.index(count)
    keep = n + count if count < 0 else count
    if keep < 0:
        raise ValueError(f"unpackbits: count {count} removes more than the {n} bits there are")
    if keep <= n:
        return _slice_axis(bits, 0, keep, ax)
    cfg = [(0, 0, 0)] * len(s)
    cfg[ax] = (0, keep - n, 0)
    return lax.pad(bits, np.uint8(0), cfg)


# ------------------------------------------------------------------ comparisons

@_export
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (infinities equal only to
    themselves; nans equal if equal_nan), computed in the inexact promotion."""
    a, b = _promote(a, b, to_inexact=True)
    a, b = broadcast_arrays(a, b)
    dt = _dt.real_dtype(_dtype(a))
    rtol, atol = _convert(_arr(rtol), dt), _convert(_arr(atol), dt)
    in_range = lax.le(absolute(subtract(a, b)), add(atol, multiply(rtol, absolute(b))))
    out = logical_or(equal(a, b), logical_and(isfinite(b), in_range))
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


@_export
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether isclose holds everywhere (a bool Array)."""
    return all(isclose(a, b, rtol, atol, equal_nan))


@_export
def array_equal(a1, a2, equal_nan=False):
    """Whether a1 and a2 have the same shape and elements (a bool Array)."""
    a1, a2 = _arr(a1), _arr(a2)
    if _shape(a1) != _shape(a2):
        return _core.asarray(False)
    eq = equal(a1, a2)
    if equal_nan and _dt.is_inexact(_dt.result_type(a1, a2)):
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return all(eq)


@_export
def array_equiv(a1, a2):
    """Whether a1 and a2 broadcast together and are equal (a bool Array)."""
    a1, a2 = _arr(a1), _arr(a2)
    try:
        broadcast_shapes(_shape(a1), _shape(a2))
    except ValueError:
        return _core.asarray(False)
    return all(equal(a1, a2))


@_export
def select(condlist, choicelist, default=0):
    """choicelist[i] where condlist[i] is the first true condition, else default."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    choices = _promote(default, *choicelist, broadcast=False)
    conds = [_to_bool(c) for c in condlist]
    shape = broadcast_shapes(*[_shape(c) for c in conds], *[_shape(c) for c in choices])
    conds = stack([_broadcast_to(c, shape) for c in [_core.asarray(False)] + conds])
    idx = _int32(argmax(conds, axis=0))
    return lax.select_n(idx, *[_broadcast_to(c, shape) for c in choices])


@_export
def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i](x) where condlist[i] holds (a later condition wins; an extra
    last function or value is the default, else 0). Each function is applied to
    the whole x and the results selected: they must be elementwise."""
    x = _arr(x)
    # NumPy's rule: a lone condition (a scalar, or one whose first entry is a
    # scalar) is wrapped into a list of one
    if _is_array(condlist) or isinstance(condlist, np.ndarray):
        lone = np.ndim(condlist) == 0 or (np.ndim(condlist) == 1 and _ndim(x) != 0)
    else:
        lone = np.isscalar(condlist) or (_ndim(x) != 0 and not isinstance(
            condlist[0], (list, tuple, np.ndarray)) and not _is_array(condlist[0]))
    if lone:
        condlist = [condlist]
    conds = [_broadcast_to(_to_bool(c), _shape(x)) for c in condlist]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funcs = [funclist[-1]] + list(funclist[:-1])
    elif nf == nc:
        funcs = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    dt = _dtype(x)
    outs = []
    for f in funcs:
        v = f(x, *args, **kw) if callable(f) else f
        outs.append(_broadcast_to(_convert(_arr(v), dt), _shape(x)))
    if nc == 0:
        return outs[0]
    counts = cumsum(stack([_zeros_of(_convert(conds[0], np.int32))] +
                          [_convert(c, np.int32) for c in conds]), axis=0)
    idx = _int32(argmax(counts, axis=0))
    return lax.select_n(idx, *outs)


# ------------------------------------------------------------------ splitting and joining

def _split(who, ary, indices_or_sections, axis, equal_only):
    ary = _arr(ary)
    if _ndim(ary) == 0:
        raise ValueError(f"{who}: the array must have at least one dimension")
    ax = _canon_axis(axis, _ndim(ary))
    n = _shape(ary)[ax]
    ios = _concrete_value(indices_or_sections, who, "indices_or_sections")
    if ios.ndim == 0:
        sections = int(ios)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        if equal_only and n % sections:
            raise ValueError("array split does not result in an equal division")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        points = np.cumsum([0] + sizes).tolist()
    else:
        if ios.ndim != 1 or not (np.issubdtype(ios.dtype, np.integer) or ios.size == 0):
            raise TypeError(f"{who}: indices_or_sections must be an int or a 1-D sequence of "
                            f"ints, got {indices_or_sections!r}")
        points = [0] + [int(i) for i in ios] + [n]
    out = []
    for st, end in zip(points[:-1], points[1:]):
        lo, hi, _ = builtins.slice(st, end).indices(n)
        out.append(_slice_axis(ary, lo, builtins.max(lo, hi), ax))
    return out


@_export
def split(ary, indices_or_sections, axis=0):
    """ary split along axis into equal sections (an int, which must divide the
    axis) or at the given indices; a list of arrays."""
    return _split("split", ary, indices_or_sections, axis, True)


@_export
def array_split(ary, indices_or_sections, axis=0):
    """split, where an int need not divide the axis (the first pieces get one more)."""
    return _split("array_split", ary, indices_or_sections, axis, False)


@_export
def hsplit(ary, indices_or_sections):
    """split along axis 1 (axis 0 for 1-D arrays)."""
    a = _arr(ary)
    if _ndim(a) == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(a, indices_or_sections, 1 if _ndim(a) > 1 else 0)


@_export
def vsplit(ary, indices_or_sections):
    """split along axis 0 (at least 2-D arrays)."""
    a = _arr(ary)
    if _ndim(a) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(a, indices_or_sections, 0)


@_export
def dsplit(ary, indices_or_sections):
    """split along axis 2 (at least 3-D arrays)."""
    a = _arr(ary)
    if _ndim(a) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(a, indices_or_sections, 2)


@_export
def dstack(tup, dtype=None):
    """Arrays (made at least 3-D) joined along axis 2."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


@_export
def unstack(x, /, *, axis=0):
    """The slices of x along axis, as a tuple."""
    x = _arr(x)
    if _ndim(x) == 0:
        raise ValueError("unstack requires an array with at least one dimension")
    ax = _canon_axis(axis, _ndim(x))
    return tuple(lax.squeeze(_slice_axis(x, i, i + 1, ax), (ax,))
                 for i in range(_shape(x)[ax]))


@_export
def append(arr, values, axis=None):
    """values appended to arr along axis (None: both flattened)."""
    arr, values = _arr(arr), _arr(values)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


@_export
def block(arrays):
    """An array assembled from nested lists of blocks: the innermost lists join
    along the last axis, the next ones along the second to last, and so on."""
    def depth(x, path):
        if isinstance(x, tuple):
            raise TypeError(f"block: arrays is a tuple at {path}; only lists may be used to "
                            "arrange blocks")
        if isinstance(x, list):
            if not x:
                raise ValueError(f"block: list at {path} is empty")
            ds = [depth(v, path + [i]) for i, v in enumerate(x)]
            if builtins.any(d != ds[0] for d in ds):
                raise ValueError(f"block: list depths are mismatched at {path}")
            return ds[0] + 1
        return 0

    d = depth(arrays, [])
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for v in x:
                collect(v)
        else:
            leaves.append(_arr(x))

    collect(arrays)
    nd = builtins.max([d] + [_ndim(v) for v in leaves])

    def build(x, level):
        if not isinstance(x, list):
            x = _arr(x)
            return reshape(x, (1,) * (nd - _ndim(x)) + _shape(x))
        parts = [build(v, level + 1) for v in x]
        return concatenate(parts, axis=-(d - level))

    return build(arrays, 0)


# ------------------------------------------------------------------ tiling and repeating

@_export
def tile(A, reps):
    """A repeated reps times along each axis (reps: an int or a tuple, static)."""
    A = _arr(A)
    reps = _concrete_value(reps, "tile", "reps")
    reps = (int(reps),) if reps.ndim == 0 else tuple(int(r) for r in reps)
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    nd = builtins.max(len(reps), _ndim(A))
    reps = (1,) * (nd - len(reps)) + reps
    A = reshape(A, (1,) * (nd - _ndim(A)) + _shape(A))
    s = _shape(A)
    if builtins.all(r == 1 for r in reps):
        return A
    bshape = builtins.sum(((r, n) for r, n in zip(reps, s)), ())
    out = lax.broadcast_in_dim(A, bshape, tuple(2 * i + 1 for i in range(nd)))
    return lax.reshape(out, tuple(r * n for r, n in zip(reps, s)))


def _repeat_static(a, reps, ax):
    """a with element i along ax repeated reps[i] times (reps concrete)."""
    s = _shape(a)
    pieces = []
    i = 0
    n = len(reps)
    while i < n:
        j = i
        while j < n and reps[j] == reps[i]:
            j += 1
        r = int(reps[i])
        if r:
            piece = _slice_axis(a, i, j, ax)
            bshape = s[:ax] + (j - i, r) + s[ax + 1:]
            dims = tuple(range(ax + 1)) + tuple(range(ax + 2, len(s) + 1))
            piece = lax.broadcast_in_dim(piece, bshape, dims)
            pieces.append(lax.reshape(piece, s[:ax] + ((j - i) * r,) + s[ax + 1:]))
        i = j
    if not pieces:
        return _slice_axis(a, 0, 0, ax)
    return pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, ax)


@_export
def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Each element of a repeated along axis (None: flattened) `repeats` times
    (an int or one count per element). Counts must be concrete unless
    total_repeat_length (the output length: longer pads with the last value,
    shorter truncates) is given."""
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _canon_axis(axis, _ndim(a))
    n = _shape(a)[ax]
    if total_repeat_length is not None:
        total_repeat_length = operator.index(total_repeat_length)
        if total_repeat_length < 0:
            raise ValueError("total_repeat_length must be non-negative")
    from olympus._src.jnp import _known
    repeats = _known(repeats)
    traced = _is_tracer(repeats)
    if traced and total_repeat_length is None:
        raise _core.ConcretizationTypeError(
            "Abstract tracer value encountered where concrete value is expected: the repeats "
            "of `repeat` must be concrete (they decide the output shape); pass "
            "total_repeat_length to repeat by traced counts")
    if not traced:
        r = np.asarray(repeats)
        if not (np.issubdtype(r.dtype, np.integer) or r.dtype == np.bool_):
            raise TypeError(f"repeat: repeats must be integers, got dtype {r.dtype}")
        if r.ndim > 1 or (r.ndim == 1 and r.shape[0] not in (1, n)):
            raise ValueError(f"repeat: repeats of shape {r.shape} do not broadcast to the "
                             f"axis of size {n}")
        if (r < 0).any():
            raise ValueError("repeats may not contain negative values")
        r = np.broadcast_to(r, (n,))
        out = _repeat_static(a, r.tolist(), ax)
        total = int(r.sum())
        if total_repeat_length is None or total_repeat_length == total:
            return out
        if total_repeat_length < total:
            return _slice_axis(out, 0, total_repeat_length, ax)
        if total == 0:
            raise ValueError("repeat: cannot pad to total_repeat_length from an empty result")
        last = _slice_axis(out, total - 1, total, ax)
        s = list(_shape(out))
        s[ax] = total_repeat_length - total
        return concatenate([out, _broadcast_to(last, tuple(s))], ax)
    r = _arr(repeats)
    if not _dt.is_integer(_dtype(r)):
        raise TypeError(f"repeat: repeats must be integers, got dtype {_dtype(r)}")
    r = _broadcast_to(ravel(r) if _ndim(r) else r, (n,))
    from olympus._src import jnp_index
    ends = cumsum(r)                                          # element i ends before ends[i]
    k = lax.iota(_dtype(ends), total_repeat_length)
    idx = jnp_index.searchsorted(ends, k, side="right")      # the element output k copies
    idx = minimum(idx, n - 1)                                 # past the end: the last value
    return jnp_index.take(a, idx, axis=ax, mode="clip")


@_export
def resize(a, new_shape):
    """a's elements, repeated in C order as often as needed, in new_shape."""
    a = _arr(a)
    new_shape = (int(new_shape),) if np.ndim(new_shape) == 0 else \
        tuple(operator.index(d) for d in new_shape)
    if builtins.any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    total = _size(new_shape)
    flat = ravel(a)
    n = _shape(flat)[0]
    if n == 0 or total == 0:
        return zeros(new_shape, _dtype(a))
    flat = tile(flat, -(-total // n))
    return reshape(_slice_axis(flat, 0, total, 0), new_shape)


# ------------------------------------------------------------------ padding

def _as_pairs(x, nd, who, as_int):
    """NumPy's pad-argument forms (a scalar, a pair, one pair per axis) as nd
    (before, after) pairs of Python numbers."""
    v = _concrete_value(x, "pad", who)
    if as_int:
        if v.size and not np.issubdtype(v.dtype, np.integer):
            raise TypeError(f"pad: `{who}` must be of integral type, got {x!r}")
        if (v < 0).any():
            raise ValueError(f"pad: index can't contain negative values ({who}={x!r})")
    if v.ndim < 3 and v.size == 1:
        e = v.ravel()[0].item()
        return [(e, e)] * nd
    if v.size == 2 and v.shape != (2, 1):
        e = v.ravel().tolist()
        return [(e[0], e[1])] * nd
    try:
        v = np.broadcast_to(v, (nd, 2))
    except ValueError:
        raise ValueError(f"pad: `{who}` of shape {np.shape(x)} does not give a (before, after) "
                         f"pair for each of the {nd} axes") from None
    return [(p[0].item(), p[1].item()) for p in v]


def _pad_block(x, ax, width, value):
    s = list(_shape(x))
    s[ax] = width
    return _broadcast_to(value, tuple(s))


def _pad_concat(x, ax, before, after):
    parts = ([before] if before is not None else []) + [x] + \
        ([after] if after is not None else [])
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, ax)


def _pad_constant(a, pw, cv):
    dt = _dtype(a)
    if _is_tracer(cv):          # one traced value for every side
        if _ndim(cv):
            raise NotImplementedError("pad: traced constant_values must be a scalar")
        return lax.pad(a, _convert(cv, dt), [(lo, hi, 0) for lo, hi in pw])
    pairs = _as_pairs(cv, _ndim(a), "constant_values", False)
    if len({p for pr in pairs for p in pr}) <= 1:   # one value: a single pad
        value = pairs[0][0] if pairs else 0
        return lax.pad(a, _convert(value, dt), [(lo, hi, 0) for lo, hi in pw])
    # NumPy pads axis by axis, a later axis covering the corners of earlier ones
    for ax, ((lo, hi), (vb, va)) in enumerate(zip(pw, pairs)):
        before = _pad_block(a, ax, lo, _convert(vb, dt)) if lo else None
        after = _pad_block(a, ax, hi, _convert(va, dt)) if hi else None
        a = _pad_concat(a, ax, before, after)
    return a


def _check_extendable(a, ax, lo, hi, mode):
    if _shape(a)[ax] == 0 and (lo or hi):
        raise ValueError(f"can't extend empty axis {ax} using modes other than 'constant' or "
                         f"'empty' (mode {mode!r})")


def _pad_edge(a, pw):
    for ax, (lo, hi) in enumerate(pw):
        _check_extendable(a, ax, lo, hi, "edge")
        n = _shape(a)[ax]
        before = _pad_block(a, ax, lo, _slice_axis(a, 0, 1, ax)) if lo else None
        after = _pad_block(a, ax, hi, _slice_axis(a, n - 1, n, ax)) if hi else None
        a = _pad_concat(a, ax, before, after)
    return a


def _pad_wrap(a, pw):
    for ax, (lo, hi) in enumerate(pw):
        _check_extendable(a, ax, lo, hi, "wrap")
        n = _shape(a)[ax]
        if not (lo or hi):
            continue
        lr, lrem = divmod(lo, n)
        rr, rrem = divmod(hi, n)
        parts = [_slice_axis(a, n - lrem, n, ax)] if lrem else []
        parts += [a] * (lr + rr + 1)
        parts += [_slice_axis(a, 0, rrem, ax)] if rrem else []
        a = lax.concatenate(parts, ax)
    return a


def _pad_reflect(a, pw, mode, reflect_type):
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    for ax, (lo, hi) in enumerate(pw):
        _check_extendable(a, ax, lo, hi, mode)
        size = _shape(a)[ax]
        offset = 1 if (mode == "reflect" and size > 1) else 0
        for before, width in ((True, lo), (False, hi)):
            while width > 0:
                cur = builtins.min(width, size - offset)
                width -= cur
                n = _shape(a)[ax]
                if before:
                    x = _slice_axis(a, offset, offset + cur, ax)
                    edge = _slice_axis(a, 0, 1, ax)
                else:
                    stop = n if (mode == "symmetric" or size == 1) else n - 1
                    x = _slice_axis(a, stop - cur, stop, ax)
                    edge = _slice_axis(a, n - 1, n, ax)
                x = lax.rev(x, (ax,))
                if reflect_type == "odd":
                    x = subtract(multiply(_broadcast_to(edge, _shape(x)), 2), x)
                a = lax.concatenate([x, a] if before else [a, x], ax)
    return a


def _pad_linear_ramp(a, pw, end_values):
    dt = _dtype(a)
    cdt = dt if _dt.is_inexact(dt) else _dt.default_float()
    pairs = _as_pairs(end_values, _ndim(a), "end_values", False)
    for ax, ((lo, hi), (eb, ea)) in enumerate(zip(pw, pairs)):
        _check_extendable(a, ax, lo, hi, "linear_ramp")
        n = _shape(a)[ax]
        nd = _ndim(a)
        parts = []
        for width, ev, edge_at in ((lo, eb, 0), (hi, ea, n - 1)):
            if not width:
                parts.append(None)
                continue
            edge = _convert(_slice_axis(a, edge_at, edge_at + 1, ax), cdt)
            start = _convert(ev, cdt)
            shp = [1] * nd
            shp[ax] = width
            k = lax.reshape(lax.iota(_dt.real_dtype(cdt), width), tuple(shp))
            step = true_divide(subtract(edge, start), float(width))
            ramp = add(multiply(_convert(k, cdt), step), start)
            if edge_at:
                ramp = lax.rev(ramp, (ax,))
            parts.append(_convert(ramp, dt))
        a = _pad_concat(a, ax, parts[0], parts[1])
    return a


def _median_along(x, ax):
    s = lax.sort(x, dimension=ax)
    n = _shape(x)[ax]
    hi = _slice_axis(s, n // 2, n // 2 + 1, ax)
    if n % 2:
        med = hi
    else:
        lo = _slice_axis(s, n // 2 - 1, n // 2, ax)
        med = true_divide(add(_convert(lo, _dt.to_inexact(_dtype(x))), hi), 2)
    if _dt.is_inexact(_dtype(x)):
        med = where(any(isnan(x), axis=ax, keepdims=True), _convert(np.nan, _dtype(med)), med)
    return med


def _pad_stat(a, pw, mode, stat_length):
    dt = _dtype(a)
    pairs = _as_pairs(stat_length, _ndim(a), "stat_length", True) if stat_length is not None \
        else [(None, None)] * _ndim(a)
    for ax, ((lo, hi), (sb, sa)) in enumerate(zip(pw, pairs)):
        _check_extendable(a, ax, lo, hi, mode)
        n = _shape(a)[ax]
        blocks = []
        for width, length, at_start in ((lo, sb, True), (hi, sa, False)):
            if not width:
                blocks.append(None)
                continue
            m = n if length is None else builtins.min(length, n)
            if m == 0 and mode in ("maximum", "minimum"):
                raise ValueError("stat_length of 0 yields no value for padding")
            chunk = _slice_axis(a, 0, m, ax) if at_start else _slice_axis(a, n - m, n, ax)
            if mode == "maximum":
                v = max(chunk, axis=ax, keepdims=True)
            elif mode == "minimum":
                v = min(chunk, axis=ax, keepdims=True)
            elif mode == "mean":
                v = mean(chunk, axis=ax, keepdims=True)
            else:
                v = _median_along(chunk, ax)
            if not _dt.is_inexact(dt) and _dt.is_inexact(_dtype(v)):
                v = lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN)
            blocks.append(_pad_block(a, ax, width, _convert(v, dt)))
        a = _pad_concat(a, ax, blocks[0], blocks[1])
    return a


_PAD_KWARGS = {
    "constant": {"constant_values"}, "edge": set(), "linear_ramp": {"end_values"},
    "maximum": {"stat_length"}, "mean": {"stat_length"}, "median": {"stat_length"},
    "minimum": {"stat_length"}, "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
    "wrap": set(), "empty": set(),
}


@_export
def pad(array, pad_width, mode="constant", **kwargs):
    """array padded as NumPy's pad: pad_width (static) is a width, a (before,
    after) pair or one pair per axis; every NumPy mode is supported (constant,
    edge, linear_ramp, maximum, mean, median, minimum, reflect, symmetric,
    wrap, empty — which pads with zeros), as is a callable mode, which must
    return the padded 1-D vector (JAX's convention) instead of writing into it."""
    a = _arr(array)
    nd = _ndim(a)
    pw = _as_pairs(pad_width, nd, "pad_width", True)
    if callable(mode):
        padded = _pad_constant(a, pw, 0)
        for ax in range(nd):
            padded = apply_along_axis(mode, ax, padded, pw[ax], ax, kwargs)
        return padded
    if mode not in _PAD_KWARGS:
        raise ValueError(f"mode '{mode}' is not supported")
    extra = set(kwargs) - _PAD_KWARGS[mode]
    if extra:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {sorted(extra)}")
    if mode == "constant":
        return _pad_constant(a, pw, kwargs.get("constant_values", 0))
    if mode == "empty":
        return _pad_constant(a, pw, 0)
    if mode == "edge":
        return _pad_edge(a, pw)
    if mode == "wrap":
        return _pad_wrap(a, pw)
    if mode in ("reflect", "symmetric"):
        return _pad_reflect(a, pw, mode, kwargs.get("reflect_type", "even"))
    if mode == "linear_ramp":
        return _pad_linear_ramp(a, pw, kwargs.get("end_values", 0))
    return _pad_stat(a, pw, mode, kwargs.get("stat_length"))


# ------------------------------------------------------------------ rolling and rotating

@_export
def roll(a, shift, axis=None):
    """a shifted by `shift` along axis (None: the flattened array), elements
    wrapping around; shifts may be traced."""
    a = _arr(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    if _is_tracer(shift) and _ndim(shift) == 1:
        shifts = tuple(shift[i] for i in range(_shape(shift)[0]))
    elif _is_tracer(shift):
        shifts = (shift,)
    else:
        sh = np.asarray(shift)
        shifts = (shift,) if sh.ndim == 0 else tuple(sh.tolist())
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift and axis must have the same length, got {len(shifts)} "
                         f"and {len(axes)}")
    for sh, ax in zip(shifts, axes):
        ax = _canon_axis(ax, _ndim(a))
        n = _shape(a)[ax]
        if n == 0:
            continue
        if _is_tracer(sh):
            k = remainder(_int32(sh), np.int32(n))
            doubled = lax.concatenate([a, a], ax)
            starts = [np.int32(0)] * _ndim(a)
            starts[ax] = subtract(np.int32(n), k)
            a = lax.dynamic_slice(doubled, starts, _shape(a))
        else:
            k = operator.index(sh) % n
            if k:
                a = lax.concatenate([_slice_axis(a, n - k, n, ax), _slice_axis(a, 0, n - k, ax)],
                                    ax)
    return a


@_export
def rollaxis(a, axis, start=0):
    """a with axis moved to lie before position start (NumPy's rollaxis)."""
    a = _arr(a)
    n = _ndim(a)
    axis = _canon_axis(axis, n)
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise _AxisError(f"'start' arg requires {-n} <= start < {n + 1}, but {start} was "
                         "passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return transpose(a, axes)


@_export
def rot90(m, k=1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane of axes (from the first
    towards the second)."""
    m = _arr(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    nd = _ndim(m)
    if axes[0] == axes[1] or builtins.abs(axes[0] - axes[1]) == nd:
        raise ValueError("Axes must be different.")
    if not (-nd <= axes[0] < nd and -nd <= axes[1] < nd):
        raise ValueError(f"Axes={axes} out of range for array of ndim={nd}.")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, axes[0]), axes[1])
    perm = list(range(nd))
    a0, a1 = _canon_axis(axes[0], nd), _canon_axis(axes[1], nd)
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, axes[1]), perm)
    return flip(transpose(m, perm), axes[1])


@_export
def matrix_transpose(x, /):
    """x with its last two axes swapped."""
    x = _arr(x)
    if _ndim(x) < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got "
                         f"ndim={_ndim(x)}")
    return swapaxes(x, -1, -2)


# ------------------------------------------------------------------ diagonals and triangles

@_export
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The offset diagonal of the 2-D slices over axis1 and axis2, as the last axis."""
    a = _arr(a)
    nd = _ndim(a)
    if nd < 2:
        raise ValueError("diagonal requires an array of at least two dimensions")
    ax1, ax2 = _canon_axis(axis1, nd), _canon_axis(axis2, nd)
    if ax1 == ax2:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = operator.index(offset)
    a = moveaxis(a, (ax1, ax2), (-2, -1))
    s = _shape(a)
    n, m = s[-2], s[-1]
    if offset >= 0:
        a = _slice_axis(a, builtins.min(offset, m), m, nd - 1)
    else:
        a = _slice_axis(a, builtins.min(-offset, n), n, nd - 2)
    p, q = _shape(a)[-2:]
    length = builtins.min(p, q)
    lead = s[:-2]
    if length == 0:
        return zeros(lead + (0,), _dtype(a))
    a = _slice_axis(a, 0, length, nd - 2)
    flat = lax.reshape(a, lead + (length * q,))
    return _slice_axis(flat, 0, (length - 1) * (q + 1) + 1, nd - 2, q + 1)


@_export
def diag(v, k=0):
    """The k-th diagonal of a 2-D v, or a 2-D array with 1-D v on its k-th diagonal."""
    v = _arr(v)
    k = operator.index(k)
    if _ndim(v) == 2:
        return diagonal(v, k)
    if _ndim(v) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    L = _shape(v)[0]
    n = L + builtins.abs(k)
    if L == 0:
        return zeros((n, n), _dtype(v))
    lo = k if k >= 0 else -k * n
    hi = n * n - lo - ((L - 1) * (n + 1) + 1)
    flat = lax.pad(v, _convert(0, _dtype(v)), [(lo, hi, n)])
    return lax.reshape(flat, (n, n))


@_export
def diagflat(v, k=0):
    """A 2-D array with the flattened v on its k-th diagonal."""
    return diag(ravel(_arr(v)), k)


def _tri_mask(n, m, k):
    i = lax.broadcasted_iota(np.int32, (n, m), 0)
    j = lax.broadcasted_iota(np.int32, (n, m), 1)
    return lax.ge(lax.add(i, np.int32(k)), j)        # j <= i + k


def _triangle(m, k, lower, who):
    m = _arr(m)
    if _ndim(m) < 2:
        raise ValueError(f"{who}: the argument must be at least 2-dimensional, got shape "
                         f"{_shape(m)}")
    k = operator.index(k)
    n, c = _shape(m)[-2:]
    mask = _tri_mask(n, c, k) if lower else logical_not(_tri_mask(n, c, k - 1))
    return lax.select_n(_broadcast_to(mask, _shape(m)), _zeros_of(m), m)


@_export
def tril(m, k=0):
    """m with the elements above the k-th diagonal zeroed (last two axes)."""
    return _triangle(m, k, True, "tril")


@_export
def triu(m, k=0):
    """m with the elements below the k-th diagonal zeroed (last two axes)."""
    return _triangle(m, k, False, "triu")


def _index_arrays(arrs):
    dt = _dt.default_int()
    return tuple(_core.asarray(np.asarray(x).astype(dt), dtype=dt) for x in arrs)


@_export
def tril_indices(n, k=0, m=None):
    """The (row, column) indices of the lower triangle of an (n, m) array."""
    return _index_arrays(np.tril_indices(_static_int(n, "tril_indices", "n"),
                                         _static_int(k, "tril_indices", "k"),
                                         None if m is None else
                                         _static_int(m, "tril_indices", "m")))


@_export
def triu_indices(n, k=0, m=None):
    """The (row, column) indices of the upper triangle of an (n, m) array."""
    return _index_arrays(np.triu_indices(_static_int(n, "triu_indices", "n"),
                                         _static_int(k, "triu_indices", "k"),
                                         None if m is None else
                                         _static_int(m, "triu_indices", "m")))


def _shape2d(arr, who):
    s = _shape(arr)
    if len(s) != 2:
        raise ValueError(f"{who}: input array must be 2-d, got shape {s}")
    return s


@_export
def tril_indices_from(arr, k=0):
    """tril_indices for arr's (2-D) shape."""
    n, m = _shape2d(arr, "tril_indices_from")
    return tril_indices(n, k, m)


@_export
def triu_indices_from(arr, k=0):
    """triu_indices for arr's (2-D) shape."""
    n, m = _shape2d(arr, "triu_indices_from")
    return triu_indices(n, k, m)


@_export
def diag_indices(n, ndim=2):
    """ndim copies of arange(n): the indices of the main diagonal."""
    n = _static_int(n, "diag_indices", "n")
    ndim = _static_int(ndim, "diag_indices", "ndim")
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got {n}, {ndim}")
    return (lax.iota(_dt.default_int(), n),) * ndim


@_export
def diag_indices_from(arr):
    """diag_indices for arr, whose axes (at least 2) must all have one length."""
    s = _shape(arr)
    if len(s) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(s)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(s[0], len(s))


@_export
def mask_indices(n, mask_func, k=0):
    """The indices where mask_func(ones((n, n)), k) is non-zero (it must give a
    concrete result: the count decides the shape)."""
    from olympus._src.api import ensure_compile_time_eval
    with ensure_compile_time_eval():     # the mask is a constant, also under jit
        m = mask_func(ones((n, n), _dt.default_int()), k)
    return _index_arrays(np.nonzero(_concrete_value(m, "mask_indices", "the mask")))


@_export
def trim_zeros(filt, trim="fb", axis=None):
    """filt without its leading ('f') and/or trailing ('b') zeros along each
    axis (all by default). filt must be concrete: the result's shape depends
    on its values."""
    v = _concrete_value(filt, "trim_zeros", "filt")
    a = _arr(filt)
    axes = _canon_axes(axis, v.ndim)
    t = trim.lower()
    if not axes or ("f" not in t and "b" not in t):
        return a
    out = a
    for ax in axes:
        mask = np.any(v != 0, axis=tuple(i for i in range(v.ndim) if i != ax)) if v.ndim > 1 \
            else (v != 0)
        if not mask.any():
            return _slice_axis(out, 0, 0, ax)
        start = int(mask.argmax()) if "f" in t else 0
        stop = v.shape[ax] - int(mask[::-1].argmax()) if "b" in t else v.shape[ax]
        out = _slice_axis(out, start, stop, ax)
    return out


# ------------------------------------------------------------------ grids and index helpers

@_export
def indices(dimensions, dtype=None, sparse=False):
    """An index grid of shape dimensions: stacked (or, sparse, a tuple of
    broadcastable arrays) with arr[i] varying along axis i."""
    dims = tuple(operator.index(d) for d in dimensions)
    dt = _dt.canonicalize(dtype) if dtype is not None else _dt.default_int()
    n = len(dims)
    out = []
    for i, d in enumerate(dims):
        if sparse:
            shp = (1,) * i + (d,) + (1,) * (n - i - 1)
            out.append(lax.broadcasted_iota(dt, shp, i))
        else:
            out.append(lax.broadcasted_iota(dt, dims, i))
    if sparse:
        return tuple(out)
    return stack(out) if out else zeros((0,), dt)


@_export
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors (indexing 'xy':
    Cartesian, the first two axes swapped; 'ij': matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    s0 = (1,) * n
    out = [reshape(ravel(_arr(x)), s0[:i] + (-1,) + s0[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and n > 1:
        out[0] = reshape(out[0], (1, -1) + s0[2:])
        out[1] = reshape(out[1], (-1, 1) + s0[2:])
    if not sparse:
        out = broadcast_arrays(*out)
    return list(out)


@_export
def ix_(*args):
    """An open mesh from 1-D sequences: arg i reshaped to lie along axis i
    (bool sequences, which must be concrete, become their nonzero indices)."""
    n = len(args)
    out = []
    for i, x in enumerate(args):
        if isinstance(x, (list, tuple)) and len(x) == 0:
            x = zeros((0,), _dt.default_int())
        x = _arr(x)
        if _ndim(x) != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if _dt.is_bool(_dtype(x)):
            x = _index_arrays(np.nonzero(_concrete_value(x, "ix_", "a boolean index")))[0]
        elif not _dt.is_integer(_dtype(x)):
            raise TypeError(f"ix_: arguments must be integer or boolean sequences, got dtype "
                            f"{_dtype(x)}")
        out.append(reshape(x, (1,) * i + (-1,) + (1,) * (n - i - 1)))
    return tuple(out)


def _slice_range(k, who):
    if not isinstance(k, builtins.slice):
        raise IndexError(f"{who} takes slices, got {k!r}")
    start = 0 if k.start is None else k.start
    step = 1 if k.step is None else k.step
    for v in (start, k.stop, step):
        _concrete_value(v, who, "each slice bound")
    if isinstance(step, complex) or np.iscomplexobj(step):
        num = int(builtins.abs(step))
        return linspace(start, k.stop, num, endpoint=True), True
    is_float = builtins.any(isinstance(v, (float, np.floating)) for v in (start, k.stop, step))
    return arange(start, k.stop, step), is_float


class _Grid:
    """mgrid / ogrid: grids from slices (a complex step gives that many points)."""

    def __init__(self, sparse, name):
        self.sparse = sparse
        self.__name__ = name

    def __getitem__(self, key):
        single = isinstance(key, builtins.slice)
        keys = (key,) if single else tuple(key)
        ranges = [_slice_range(k, self.__name__) for k in keys]
        dt = _dt.default_float() if builtins.any(f for _, f in ranges) else _dt.default_int()
        arrs = [astype(r, dt) for r, _ in ranges]
        if single:
            return arrs[0]
        if self.sparse:
            return meshgrid(*arrs, indexing="ij", sparse=True)
        if not arrs:
            return zeros((0,), dt)
        return stack(meshgrid(*arrs, indexing="ij"))

    def __repr__(self):
        return f"olympus.numpy.{self.__name__}"


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")
__all__ += ["mgrid", "ogrid"]


class _AxisConcatenator:
    """r_ / c_: concatenation by index syntax (NumPy's AxisConcatenator)."""

    def __init__(self, axis, ndmin, trans1d, name):
        self.axis, self.ndmin, self.trans1d, self.__name__ = axis, ndmin, trans1d, name

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs = []
        for i, item in enumerate(key):
            if isinstance(item, builtins.slice):
                obj = _slice_range(item, self.__name__)[0]
                if ndmin > 1:
                    obj = array(obj, copy=False, ndmin=ndmin)
                    if trans1d != -1:
                        obj = swapaxes(obj, -1, trans1d)
            elif isinstance(item, str):
                if i != 0:
                    raise ValueError("special directives must be the first entry.")
                if item in ("r", "c"):
                    raise NotImplementedError(f"{self.__name__}: the matrix directives 'r' and "
                                              "'c' are not supported (no matrix type)")
                try:
                    vec = [int(p) for p in item.split(",")]
                except ValueError:
                    raise ValueError(f"unknown special directive {item!r}") from None
                axis = vec[0]
                if len(vec) > 1:
                    ndmin = vec[1]
                if len(vec) > 2:
                    trans1d = vec[2]
                if len(vec) > 3:
                    raise ValueError("too many items in the special directive")
                continue
            else:
                item_nd = _ndim(_arr(item))
                obj = array(item, copy=False, ndmin=ndmin)
                if trans1d != -1 and item_nd < ndmin:
                    k2 = ndmin - item_nd
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    defaxes = list(range(ndmin))
                    obj = transpose(obj, defaxes[:k1] + defaxes[k2:] + defaxes[k1:k2])
            objs.append(obj)
        if not objs:
            return zeros((0,), _dt.default_float())
        return concatenate(objs, axis)

    def __len__(self):
        return 0

    def __repr__(self):
        return f"olympus.numpy.{self.__name__}"


r_ = _AxisConcatenator(0, 1, -1, "r_")
c_ = _AxisConcatenator(-1, 2, 0, "c_")
s_ = np.s_
index_exp = np.index_exp
__all__ += ["r_", "c_", "s_", "index_exp"]


@_export
def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """Flat indices of the multi-indices into an array of shape dims. mode:
    'raise' (indices must be concrete and in bounds), 'wrap', 'clip' or 'ignore'."""
    dims = tuple(_static_int(d, "ravel_multi_index", "dims") for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: got {len(multi_index)} index arrays for "
                         f"{len(dims)} dimensions")
    idx = [_arr(i) for i in multi_index]
    for i in idx:
        if not _dt.is_integer(_dtype(i)):
            raise TypeError("only int indices permitted")
    dt = _dt.result_type(int, *idx) if dtype is None else _dt.canonicalize(dtype)
    if not _dt.is_integer(dt):
        raise ValueError(f"ravel_multi_index: dtype={dt} is not an integer type")
    if _size(dims) - 1 > np.iinfo(dt).max:
        raise ValueError(f"ravel_multi_index: dtype={dt} is not large enough to hold a flat "
                         f"index for dims={dims}; pass a wider dtype")
    if mode == "raise":
        for i, d in zip(idx, dims):
            if _is_tracer(i):
                raise _core.ConcretizationTypeError(
                    "Abstract tracer value encountered where concrete value is expected: "
                    "ravel_multi_index with mode='raise' checks its indices, which must be "
                    "concrete; use mode='wrap' or mode='clip' under jit")
            v = np.asarray(i)
            if ((v < 0) | (v >= d)).any():
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        idx = [minimum(maximum(i, 0), d - 1) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [remainder(i, d) for i, d in zip(idx, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                         "'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1]).tolist()
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1].tolist()
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    out = _core.asarray(0, dtype=dt)
    for i, st in zip(idx, strides):
        out = add(out, multiply(_convert(i, dt), _convert(int(st), dt)))
    return out


@_export
def unravel_index(indices, shape):
    """The multi-indices of flat indices into an array of shape, as a tuple.
    As in JAX, negative indices count from the end and out-of-bound ones are
    clipped (NumPy raises)."""
    idx = _arr(indices)
    if not _dt.is_integer(_dtype(idx)):
        raise TypeError(f"unravel_index: only int indices permitted, got dtype {_dtype(idx)}")
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    shape = tuple(_static_int(s, "unravel_index", "shape") for s in shape)
    total = _size(shape)
    if total == 0:
        raise ValueError("unravel_index: cannot unravel into a zero-size shape")
    dt = _dtype(idx)
    idx = where(less(idx, 0), add(idx, _convert(total, dt)), idx)
    idx = minimum(maximum(idx, _convert(0, dt)), _convert(total - 1, dt))
    out = [None] * len(shape)
    for i in range(len(shape) - 1, -1, -1):
        d = _convert(shape[i], dt)
        out[i] = remainder(idx, d)
        idx = floor_divide(idx, d)
    return tuple(out)


# ------------------------------------------------------------------ products

@_export
def kron(a, b):
    """The Kronecker product of a and b."""
    a, b = _promote(_arr(a), _arr(b), broadcast=False)
    nd = builtins.max(_ndim(a), _ndim(b))
    a = reshape(a, (1,) * (nd - _ndim(a)) + _shape(a))
    b = reshape(b, (1,) * (nd - _ndim(b)) + _shape(b))
    sa, sb = _shape(a), _shape(b)
    ar = reshape(a, builtins.sum(((d, 1) for d in sa), ()))
    br = reshape(b, builtins.sum(((1, d) for d in sb), ()))
    return reshape(multiply(ar, br), tuple(x * y for x, y in zip(sa, sb)))


@_export
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-D x: columns x**(N-1), ..., x**0 (or
    increasing powers). Keeps x's dtype (JAX's rule; NumPy widens to int64/float64)."""
    x = _arr(x)
    if _ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    N = _shape(x)[0] if N is None else operator.index(N)
    if N < 0:
        raise ValueError("N must be nonnegative")
    dt = _dtype(x)
    if _dt.is_bool(dt):
        x, dt = _convert(x, _dt.default_int()), _dt.default_int()
    e = lax.iota(np.int32 if not _dt.is_inexact(dt) else dt, N)
    e = lax.rev(e, (0,)) if not increasing else e
    if _dt.is_inexact(dt):
        return power(expand_dims(x, 1), e)
    return _convert(power(expand_dims(x, 1), _convert(e, dt)), dt)


@_export
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 2- or 3-element vectors along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _promote(_arr(a), _arr(b), broadcast=False)
    if _dt.is_bool(_dtype(a)):
        raise TypeError("cross: boolean operands are not supported")
    a = moveaxis(a, _canon_axis(axisa, _ndim(a), "axisa"), -1)
    b = moveaxis(b, _canon_axis(axisb, _ndim(b), "axisb"), -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 "
                         "or 3)")

    def comp(x, i):
        return lax.squeeze(_slice_axis(x, i, i + 1, _ndim(x) - 1), (_ndim(x) - 1,))

    a0, a1 = comp(a, 0), comp(a, 1)
    b0, b1 = comp(b, 0), comp(b, 1)
    c2 = subtract(multiply(a0, b1), multiply(a1, b0))
    if na == 2 and nb == 2:
        return c2
    a2 = comp(a, 2) if na == 3 else None
    b2 = comp(b, 2) if nb == 3 else None
    if a2 is None:
        c0, c1 = multiply(a1, b2), negative(multiply(a0, b2))
    elif b2 is None:
        c0, c1 = negative(multiply(a2, b1)), multiply(a2, b0)
    else:
        c0 = subtract(multiply(a1, b2), multiply(a2, b1))
        c1 = subtract(multiply(a2, b0), multiply(a0, b2))
    cp = stack(broadcast_arrays(c0, c1, c2), -1)
    return moveaxis(cp, -1, _canon_axis(axisc, _ndim(cp), "axisc"))


def _vec_operands(x1, x2, who):
    x1, x2 = _promote(_arr(x1), _arr(x2), broadcast=False)
    if _ndim(x1) < 1 or _ndim(x2) < 1:
        raise ValueError(f"{who}: operands must be at least 1-D, got shapes {_shape(x1)} and "
                         f"{_shape(x2)}")
    return x1, x2


@_export
def vecdot(x1, x2, /, *, axis=-1):
    """sum(conj(x1) * x2) along axis, broadcasting the other axes."""
    x1, x2 = _vec_operands(x1, x2, "vecdot")
    x1 = moveaxis(x1, _canon_axis(axis, _ndim(x1)), -1)
    x2 = moveaxis(x2, _canon_axis(axis, _ndim(x2)), -1)
    if _shape(x1)[-1] != _shape(x2)[-1]:
        raise ValueError(f"vecdot: axis sizes differ: {_shape(x1)[-1]} vs {_shape(x2)[-1]}")
    out = matmul(expand_dims(conjugate(x1), -2), expand_dims(x2, -1))
    return lax.reshape(out, _shape(out)[:-2])


@_export
def matvec(x1, x2, /):
    """Batched matrix-vector products: x1 (..., m, n), x2 (..., n) -> (..., m)."""
    x1, x2 = _vec_operands(x1, x2, "matvec")
    if _ndim(x1) < 2 or _shape(x1)[-1] != _shape(x2)[-1]:
        raise ValueError(f"matvec: expected shapes (..., m, n) and (..., n), got {_shape(x1)} "
                         f"and {_shape(x2)}")
    out = matmul(x1, expand_dims(x2, -1))
    return lax.reshape(out, _shape(out)[:-1])


@_export
def vecmat(x1, x2, /):
    """Batched vector-matrix products: conj(x1) (..., m) @ x2 (..., m, n) -> (..., n)."""
    x1, x2 = _vec_operands(x1, x2, "vecmat")
    if _ndim(x2) < 2 or _shape(x1)[-1] != _shape(x2)[-2]:
        raise ValueError(f"vecmat: expected shapes (..., m) and (..., m, n), got {_shape(x1)} "
                         f"and {_shape(x2)}")
    out = matmul(expand_dims(conjugate(x1), -2), x2)
    s = _shape(out)
    return lax.reshape(out, s[:-2] + s[-1:])


@_export
def top_k(operand, k):
    """(values, indices) of the k largest entries along the last axis (lax.top_k)."""
    return lax.top_k(_arr(operand), k)


# ------------------------------------------------------------------ reductions

@_export
def count_nonzero(a, axis=None, keepdims=False):
    """The number of non-zero elements along axis (the default int)."""
    return sum(not_equal(_arr(a), 0), axis=axis, dtype=_dt.default_int(), keepdims=keepdims)


@_export
def ptp(a, axis=None, out=None, keepdims=False):
    """max - min along axis."""
    return subtract(max(a, axis, out, keepdims), min(a, axis, out, keepdims))


@_export
def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """The (weighted) mean along axis; returned also gives the sum of weights.
    Computes in the inexact promotion of a and weights (JAX's rule)."""
    a = _arr(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        s = _shape(a)
        n = _size([s[i] for i in _canon_axes(axis, len(s))])
        scl = full(_shape(avg), n, _dtype(avg))
    else:
        a, w = _promote(a, _arr(weights), to_inexact=True, broadcast=False)
        if _shape(a) != _shape(w):
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if _ndim(w) != 1:
                raise TypeError("1D weights expected when shapes of a and weights differ.")
            ax = _canon_axis(axis, _ndim(a))
            if _shape(w)[0] != _shape(a)[ax]:
                raise ValueError("Length of weights not compatible with specified axis.")
            w = lax.broadcast_in_dim(w, _shape(a), (ax,))
        scl = sum(w, axis, keepdims=keepdims)
        avg = true_divide(sum(multiply(a, w), axis, keepdims=keepdims), scl)
    if returned:
        if _shape(scl) != _shape(avg):
            scl = broadcast_to(scl, _shape(avg))
        return avg, scl
    return avg


def _cumulative_api(f, identity, who):
    def g(x, /, *, axis=None, dtype=None, include_initial=False):
        x = _arr(x)
        if _ndim(x) == 0:
            raise ValueError(f"{who}: the input must be non-scalar")
        if axis is None:
            if _ndim(x) > 1:
                raise ValueError(f"{who}: axis must be specified for an array with more than "
                                 "one dimension")
            axis = 0
        ax = _canon_axis(axis, _ndim(x))
        out = f(x, axis=ax, dtype=dtype)
        if include_initial:
            s = list(_shape(out))
            s[ax] = 1
            out = concatenate([full(tuple(s), identity, _dtype(out)), out], ax)
        return out
    g.__name__ = g.__qualname__ = who
    g.__doc__ = (f"The array API's {who}: {f.__name__} along axis (required for arrays of "
                 "more than one dimension); include_initial prepends the identity.")
    __all__.append(who)
    return g


cumulative_sum = _cumulative_api(cumsum, 0, "cumulative_sum")
cumulative_prod = _cumulative_api(cumprod, 1, "cumulative_prod")


def _nan_filled(a, fill):
    a = _arr(a)
    if not _dt.is_inexact(_dtype(a)):
        return a
    return where(isnan(a), _convert(fill, _dtype(a)), a)


@_export
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """sum, treating nans as zero."""
    return sum(_nan_filled(a, 0), axis, dtype, out, keepdims, initial, where)


@_export
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """prod, treating nans as one."""
    return prod(_nan_filled(a, 1), axis, dtype, out, keepdims, initial, where)


@_export
def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum, treating nans as zero."""
    return cumsum(_nan_filled(a, 0), axis, dtype, out)


@_export
def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod, treating nans as one."""
    return cumprod(_nan_filled(a, 1), axis, dtype, out)


def _nan_extremum(f, fill, a, axis, out, keepdims, initial, where):
    a = _arr(a)
    if not _dt.is_inexact(_dtype(a)):
        return f(a, axis, out, keepdims, initial, where)
    nan = isnan(a)
    r = f(_where_fn(nan, _convert(fill, _dtype(a)), a), axis, out, keepdims, initial, where)
    mask = logical_not(nan)
    if where is not None:
        mask = logical_and(mask, _where_mask(where, _shape(a), "nan reduction"))
    none = logical_not(any(mask, axis, keepdims=keepdims))
    if initial is not None:
        return r   # the initial value stands in for an all-nan slice
    return _where_fn(none, _convert(np.nan, _dtype(r)), r)


@_export
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """max ignoring nans (nan for an all-nan slice)."""
    return _nan_extremum(max, -np.inf, a, axis, out, keepdims, initial, where)


@_export
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """min ignoring nans (nan for an all-nan slice)."""
    return _nan_extremum(min, np.inf, a, axis, out, keepdims, initial, where)


def _nan_mask(a, where):
    a = _arr(a)
    mask = _where_mask(where, _shape(a), "nan reduction")
    if _dt.is_inexact(_dtype(a)):
        nn = logical_not(isnan(a))
        mask = nn if mask is None else logical_and(mask, nn)
    return mask


@_export
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """mean ignoring nans (nan for an all-nan slice)."""
    return mean(a, axis, dtype, out, keepdims, where=_nan_mask(a, where))


@_export
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    """var ignoring nans."""
    return var(a, axis, dtype, out, ddof, keepdims, where=_nan_mask(a, where))


@_export
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    """std ignoring nans."""
    return std(a, axis, dtype, out, ddof, keepdims, where=_nan_mask(a, where))


def _nan_arg(f, fill, a, axis, out, keepdims):
    a = _arr(a)
    if not _dt.is_inexact(_dtype(a)):
        return f(a, axis, out, keepdims)
    nan = isnan(a)
    r = f(where(nan, _convert(fill, _dtype(a)), a), axis, out, keepdims)
    return where(all(nan, axis, keepdims=keepdims), _convert(-1, _dtype(r)), r)


@_export
def nanargmax(a, axis=None, out=None, keepdims=False):
    """argmax ignoring nans; -1 for an all-nan slice (JAX's rule; NumPy raises)."""
    return _nan_arg(argmax, -np.inf, a, axis, out, keepdims)


@_export
def nanargmin(a, axis=None, out=None, keepdims=False):
    """argmin ignoring nans; -1 for an all-nan slice (JAX's rule; NumPy raises)."""
    return _nan_arg(argmin, np.inf, a, axis, out, keepdims)


# ------------------------------------------------------------------ differences and calculus

@_export
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along axis (bools: not_equal), after
    prepend/append are joined on."""
    a = _arr(a)
    if _ndim(a) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    ax = _canon_axis(axis, _ndim(a))
    parts = []
    for v, first in ((prepend, True), (append, False)):
        if v is None:
            continue
        v = _arr(v)
        if _ndim(v) == 0:
            s = list(_shape(a))
            s[ax] = 1
            v = _broadcast_to(v, tuple(s))
        parts.append((first, v))
    if parts:
        a = concatenate([v for f, v in parts if f] + [a] + [v for f, v in parts if not f], ax)
    for _ in range(n):
        m = _shape(a)[ax]
        if m == 0:
            break
        hi, lo = _slice_axis(a, 1, m, ax), _slice_axis(a, 0, m - 1, ax)
        a = not_equal(hi, lo) if _dt.is_bool(_dtype(a)) else subtract(hi, lo)
    return a


@_export
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences between consecutive elements of the flattened ary, with
    to_begin / to_end (cast to ary's dtype) joined on."""
    a = ravel(_arr(ary))
    n = _shape(a)[0]
    out = subtract(_slice_axis(a, 1, n, 0), _slice_axis(a, 0, n - 1, 0)) if n else a
    parts = []
    if to_begin is not None:
        parts.append(ravel(_convert(_arr(to_begin), _dtype(a))))
    parts.append(out)
    if to_end is not None:
        parts.append(ravel(_convert(_arr(to_end), _dtype(a))))
    return concatenate(parts, 0) if len(parts) > 1 else out


def _gradient_axis(f, ax, h, edge_order):
    n = _shape(f)[ax]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "(edge_order + 1) elements are required.")

    def sl(lo, hi):
        return _slice_axis(f, lo, hi, ax)

    nd = _ndim(f)

    def along(v):   # a 1-D coefficient array lined up with axis ax
        s = [1] * nd
        s[ax] = _shape(v)[0]
        return reshape(v, tuple(s))

    if _ndim(h) == 0:
        interior = true_divide(subtract(sl(2, n), sl(0, n - 2)), multiply(h, 2.0))
        if edge_order == 1:
            first = true_divide(subtract(sl(1, 2), sl(0, 1)), h)
            last = true_divide(subtract(sl(n - 1, n), sl(n - 2, n - 1)), h)
        else:
            first = true_divide(add(add(multiply(sl(0, 1), -1.5), multiply(sl(1, 2), 2.0)),
                                    multiply(sl(2, 3), -0.5)), h)
            last = true_divide(add(add(multiply(sl(n - 3, n - 2), 0.5),
                                       multiply(sl(n - 2, n - 1), -2.0)),
                                   multiply(sl(n - 1, n), 1.5)), h)
    else:
        if _shape(h)[0] != n:
            raise ValueError("when 1d, distances must match the length of the corresponding "
                             "dimension")
        dx = diff(h)
        dx1, dx2 = _slice_axis(dx, 0, n - 2, 0), _slice_axis(dx, 1, n - 1, 0)
        ca = true_divide(negative(dx2), multiply(dx1, add(dx1, dx2)))
        cb = true_divide(subtract(dx2, dx1), multiply(dx1, dx2))
        cc = true_divide(dx1, multiply(dx2, add(dx1, dx2)))
        interior = add(add(multiply(along(ca), sl(0, n - 2)), multiply(along(cb), sl(1, n - 1))),
                       multiply(along(cc), sl(2, n)))
        if edge_order == 1:
            d0, dl = _slice_axis(dx, 0, 1, 0), _slice_axis(dx, n - 2, n - 1, 0)
            first = true_divide(subtract(sl(1, 2), sl(0, 1)), along(d0))
            last = true_divide(subtract(sl(n - 1, n), sl(n - 2, n - 1)), along(dl))
        else:
            d1, d2 = _slice_axis(dx, 0, 1, 0), _slice_axis(dx, 1, 2, 0)
            fa = negative(true_divide(add(multiply(d1, 2.0), d2), multiply(d1, add(d1, d2))))
            fb = true_divide(add(d1, d2), multiply(d1, d2))
            fc = negative(true_divide(d1, multiply(d2, add(d1, d2))))
            first = add(add(multiply(along(fa), sl(0, 1)), multiply(along(fb), sl(1, 2))),
                        multiply(along(fc), sl(2, 3)))
            d1, d2 = _slice_axis(dx, n - 3, n - 2, 0), _slice_axis(dx, n - 2, n - 1, 0)
            la = true_divide(d2, multiply(d1, add(d1, d2)))
            lb = negative(true_divide(add(d2, d1), multiply(d1, d2)))
            lc = true_divide(add(multiply(d2, 2.0), d1), multiply(d2, add(d1, d2)))
            last = add(add(multiply(along(la), sl(n - 3, n - 2)),
                           multiply(along(lb), sl(n - 2, n - 1))),
                       multiply(along(lc), sl(n - 1, n)))
    return concatenate([first, interior, last], ax)


@_export
def gradient(f, *varargs, axis=None, edge_order=None):
    """The gradient of f by central differences in the interior and one-sided
    ones (first or second order: edge_order 1 or 2) at the edges. varargs:
    nothing (unit spacing), one scalar spacing, or one spacing per axis (a
    scalar or the 1-D coordinates). A list for several axes, else one array."""
    f = _arr(_inexact(f))
    axes = _canon_axes(axis, _ndim(f)) if axis is None else \
        tuple(_canon_axis(a, _ndim(f)) for a in ((axis,) if np.ndim(axis) == 0 else axis))
    edge_order = 1 if edge_order is None else operator.index(edge_order)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    if not varargs:
        hs = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        hs = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        hs = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    out = []
    for ax, h in zip(axes, hs):
        h = h if np.ndim(h) == 0 and not _is_array(h) else _arr(h)
        if _is_array(h) and _ndim(h) > 1:
            raise ValueError("distances must be either scalars or 1d")
        if _is_array(h) and _ndim(h) == 1:
            h = _arr(_inexact(h))
        out.append(_gradient_axis(f, ax, h, edge_order))
    return out[0] if len(out) == 1 else out


@_export
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along axis by the trapezoidal rule (sample points x,
    or spacing dx); computes in the inexact promotion."""
    y = _arr(_inexact(y))
    ax = _canon_axis(axis, _ndim(y))
    n = _shape(y)[ax]
    if x is None:
        d = dx
    else:
        x = _arr(x)
        if _ndim(x) != 1 and _ndim(x) != _ndim(y):
            raise ValueError(f"trapezoid: x must be 1-D or have y's rank, got x {_shape(x)} "
                             f"and y {_shape(y)}")
        m = _shape(x)[0 if _ndim(x) == 1 else ax]
        if m != n:
            raise ValueError(f"trapezoid: x has {m} samples along the axis, y has {n}")
        if _ndim(x) == 1:
            d = diff(x)
            s = [1] * _ndim(y)
            s[ax] = _shape(d)[0]
            d = reshape(d, tuple(s))
        else:
            d = diff(x, axis=ax)
    if n == 0:
        return sum(y, ax)
    pair = add(_slice_axis(y, 1, n, ax), _slice_axis(y, 0, n - 1, ax))
    return sum(true_divide(multiply(d, pair), 2.0), ax)


@_export
def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """p with jumps larger than discont (default period / 2) between
    neighbours along axis replaced by their period-complement; computes in the
    inexact promotion (JAX's rule)."""
    p = _arr(_inexact(p))
    ax = _canon_axis(axis, _ndim(p))
    if _shape(p)[ax] == 0:
        return p
    if discont is None:
        discont = period / 2
    interval = true_divide(_arr(period), 2) if _is_array(period) else period / 2
    dd = diff(p, axis=ax)
    ddmod = subtract(remainder(add(dd, interval), period), interval)
    ddmod = where(logical_and(equal(ddmod, negative(interval)), greater(dd, 0)), interval, ddmod)
    correct = where(less(absolute(dd), discont), _zeros_of(dd), subtract(ddmod, dd))
    n = _shape(p)[ax]
    return concatenate([_slice_axis(p, 0, 1, ax),
                        add(_slice_axis(p, 1, n, ax), cumsum(correct, axis=ax))], ax)


@_export
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None):
    """The covariance matrix of the variables in m (rows, or columns if not
    rowvar) and y, optionally with frequency and analytic weights; computes in
    the inexact promotion (JAX's rule; NumPy uses float64)."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    m = _arr(m)
    if _ndim(m) > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None:
        y = _arr(y)
        if _ndim(y) > 2:
            raise ValueError("y has more than 2 dimensions")
        m, y = _promote(m, y, to_inexact=True, broadcast=False)
    else:
        m = _arr(_inexact(m))
    X = atleast_2d(m)
    if not rowvar and _shape(X)[0] != 1:
        X = transpose(X)
    if y is not None:
        yy = atleast_2d(y)
        if not rowvar and _shape(yy)[0] != 1:
            yy = transpose(yy)
        X = concatenate([X, yy], 0)
    if ddof is None:
        ddof = 0 if bias else 1
    nobs = _shape(X)[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        wt = _arr(wt)
        if name == "fweights" and not _dt.is_integer(_dtype(wt)):
            raise TypeError("fweights must be integer")
        if _ndim(wt) > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if _shape(wt)[0] != nobs:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        if not _is_tracer(wt) and (np.asarray(wt) < 0).any():
            raise ValueError(f"{name} cannot be negative")
        wt = _convert(wt, _dtype(X) if not _is_complex(_dtype(X)) else
                      _dt.real_dtype(_dtype(X)))
        w = wt if w is None else multiply(w, wt)
        if name == "aweights":
            aw = wt
    if w is None:
        avg = mean(X, axis=1)
        fact = builtins.max(nobs - ddof, 0)
        fact = _convert(float(fact), _dt.real_dtype(_dtype(X)))
    else:
        avg, w_sum = average(X, axis=1, weights=w, returned=True)
        w_sum = _slice_axis(w_sum, 0, 1, 0)[0] if _ndim(w_sum) else w_sum
        w_sum = real(w_sum) if _is_complex(_dtype(w_sum)) else w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = subtract(w_sum, ddof)
        else:
            fact = subtract(w_sum, true_divide(multiply(ddof, sum(multiply(w, aw))), w_sum))
        fact = maximum(fact, 0)
    X = subtract(X, expand_dims(avg, 1))
    XT = transpose(X) if w is None else transpose(multiply(X, w))
    c = true_divide(matmul(X, conjugate(XT)), fact)
    return squeeze(c)


@_export
def corrcoef(x, y=None, rowvar=True):
    """Pearson correlation coefficients: cov normalised by the standard
    deviations, clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if _ndim(c) == 0:
        return true_divide(c, c)
    d = diagonal(c)
    sd = sqrt(real(d))
    c = true_divide(c, expand_dims(sd, 1))
    c = true_divide(c, expand_dims(sd, 0))
    if _is_complex(_dtype(c)):
        re = minimum(maximum(real(c), -1), 1)
        im = minimum(maximum(imag(c), -1), 1)
        return add(_convert(re, _dtype(c)), multiply(_convert(im, _dtype(c)), 1j))
    return minimum(maximum(c, -1), 1)


# ------------------------------------------------------------------ creation

@_export
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop, num): num points evenly spaced on a log scale
    (start, stop and base may be traced)."""
    num = operator.index(num)
    dt = _dt.canonicalize(dtype) if dtype is not None else \
        _dt.to_inexact(_dt.result_type(_arr(start), _arr(stop)))
    if not (_is_tracer(start) or _is_tracer(stop) or _is_tracer(base)):
        vals = np.logspace(np.asarray(start, np.float64) if not np.iscomplexobj(start) else
                           start, stop, num, endpoint, base, axis=axis)
        return _core.asarray(vals.astype(dt), dtype=dt)
    cdt = dt if _dt.is_inexact(dt) else _dt.default_float()
    lin = linspace(start, stop, num, endpoint, dtype=cdt, axis=axis)
    b = _arr(base)
    if _ndim(b):
        b = expand_dims(b, axis)
    return _convert(power(_convert(b, cdt), lin), dt)


@_export
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """num points from start to stop evenly spaced on a log scale (the ends
    exact; start and stop may be traced, then they must be real and non-zero)."""
    num = operator.index(num)
    dt = _dt.canonicalize(dtype) if dtype is not None else \
        _dt.to_inexact(_dt.result_type(_arr(start), _arr(stop)))
    if not (_is_tracer(start) or _is_tracer(stop)):
        vals = np.geomspace(np.asarray(start) if np.iscomplexobj(start) else
                            np.asarray(start, np.float64), stop, num, endpoint, axis=axis)
        return _core.asarray(vals.astype(dt), dtype=dt)
    cdt = dt if _dt.is_inexact(dt) else _dt.default_float()
    if _is_complex(cdt):
        raise NotImplementedError("geomspace with traced complex endpoints")
    s, e = _convert(_arr(start), cdt), _convert(_arr(stop), cdt)
    sign = lax.sign(s)
    res = multiply(sign, logspace(log10(true_divide(s, sign)), log10(true_divide(e, sign)), num,
                                  endpoint, 10.0, cdt, 0))
    if num > 0:
        parts = [expand_dims(_broadcast_to(s, _shape(res)[1:]), 0)]
        mid_end = num - 1 if (endpoint and num > 1) else num
        if mid_end > 1:
            parts.append(_slice_axis(res, 1, mid_end, 0))
        if endpoint and num > 1:
            parts.append(expand_dims(_broadcast_to(e, _shape(res)[1:]), 0))
        res = concatenate(parts, 0)
    if axis != 0:
        res = moveaxis(res, 0, axis)
    return _convert(res, dt)


def _window(name, npfunc):
    def f(M):
        M = _static_int(M, name, "M")
        dt = _dt.default_float()
        return _core.asarray(npfunc(M).astype(dt), dtype=dt)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"NumPy's {name} window of M points (the default float)."
    __all__.append(name)
    return f


bartlett = _window("bartlett", np.bartlett)
blackman = _window("blackman", np.blackman)
hamming = _window("hamming", np.hamming)
hanning = _window("hanning", np.hanning)


@_export
def kaiser(M, beta):
    """The Kaiser window of M points with shape parameter beta (beta may be traced)."""
    M = _static_int(M, "kaiser", "M")
    dt = _dt.default_float()
    if not _is_tracer(beta):
        return _core.asarray(np.kaiser(M, float(np.asarray(beta))).astype(dt), dtype=dt)
    beta = _convert(_arr(beta), dt)
    if M <= 1:
        return ones((M,), dt)
    alpha = (M - 1) / 2.0
    n = lax.iota(dt, M)
    r = true_divide(subtract(n, alpha), alpha)
    return true_divide(i0(multiply(beta, sqrt(subtract(1.0, multiply(r, r))))), i0(beta))


@_export
def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function(*indices(shape, dtype), **kwargs)."""
    shape = tuple(operator.index(d) for d in shape)
    return function(*indices(shape, dtype, sparse=False), **kwargs) if shape else \
        function(**kwargs)


@_export
def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """An Array of the values in a bytes-like buffer."""
    v = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    return _core.asarray(v.astype(_dt.canonicalize(v.dtype)))


@_export
def fromstring(string, dtype=float, count=-1, *, sep):
    """An Array of the values in a text string separated by sep."""
    v = np.fromstring(string, dtype=dtype, count=count, sep=sep)
    return _core.asarray(v.astype(_dt.canonicalize(v.dtype)))


@_export
def fromfile(*args, **kwargs):
    """Not supported, as in JAX: reading a file is not pure."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be non-pure "
                              "and thus unsafe under jit; use jnp.asarray(np.fromfile(...)).")


@_export
def fromiter(*args, **kwargs):
    """Not supported, as in JAX: an iterator is not pure."""
    raise NotImplementedError("jnp.fromiter() is not implemented because it may be non-pure "
                              "and thus unsafe under jit; use jnp.asarray(np.fromiter(...)).")


@_export
def from_dlpack(x, /, *, device=None, copy=None):
    """An Array from an object exporting DLPack (through NumPy: a copy)."""
    if _is_array(x):
        return x
    v = np.from_dlpack(x)
    return _core.asarray(v.astype(_dt.canonicalize(v.dtype)))


@_export
def load(file, *args, **kwargs):
    """np.load, with an array result as an Array."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == object:
            raise ValueError("load: object arrays are not supported")
        return _core.asarray(out.astype(_dt.canonicalize(out.dtype)))
    return out


@_export
def copy(a, order=None):
    """A copy of a as an Array."""
    return array(a, copy=True)


_DTYPE_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: np.issubdtype(d, np.signedinteger),
    "unsigned integer": lambda d: np.issubdtype(d, np.unsignedinteger),
    "integral": lambda d: np.issubdtype(d, np.integer),
    "real floating": lambda d: np.issubdtype(d, np.floating) or d.name == "bfloat16",
    "complex floating": lambda d: np.issubdtype(d, np.complexfloating),
    "numeric": lambda d: d != np.bool_ and (np.issubdtype(d, np.number) or
                                           d.name == "bfloat16"),
}


@_export
def isdtype(dtype, kind):
    """The array API's isdtype: whether dtype is of kind (a dtype, one of
    'bool', 'signed integer', 'unsigned integer', 'integral', 'real floating',
    'complex floating', 'numeric', or a tuple of these)."""
    d = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _DTYPE_KINDS:
                raise ValueError(f"isdtype: unknown kind {k!r}; expected one of "
                                 f"{sorted(_DTYPE_KINDS)}")
            if _DTYPE_KINDS[k](d):
                return True
        else:
            try:
                if d == np.dtype(k):
                    return True
            except TypeError:
                raise TypeError(f"isdtype: kind must be a dtype, a string or a tuple of them, "
                                f"got {k!r}") from None
    return False


# ------------------------------------------------------------------ functional

@_export
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to the 1-D slices of arr along axis (vmap over the others);
    the dims func1d returns take axis's place."""
    arr = _arr(arr)
    nd = _ndim(arr)
    axis = _canon_axis(axis, nd)
    from olympus._src.ad import vmap

    def func(x):
        return func1d(x, *args, **kwargs)

    for i in range(1, nd - axis):
        func = vmap(func, in_axes=i, out_axes=-1)
    for i in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


@_export
def apply_over_axes(func, a, axes):
    """func(a, axis) applied for each axis in turn, keeping the rank (a
    reduced axis comes back as size 1)."""
    a = _arr(a)
    for axis in ((axes,) if np.ndim(axes) == 0 else axes):
        b = func(a, axis)
        if _ndim(b) == _ndim(a):
            a = b
        elif _ndim(b) == _ndim(a) - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return a


_DIM = r"\w+"
_CORE_DIMS = "(?:{0:}(?:,{0:})*)?".format(_DIM)
_ARG = rf"\({_CORE_DIMS}\)"
_ARGS = "{0:}(?:,{0:})*".format(_ARG)
_SIGNATURE = "^{0:}->{0:}$".format(_ARGS)


def _parse_signature(signature):
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    return [[tuple(re.findall(_DIM, arg)) for arg in re.findall(_ARG, part)]
            for part in sig.split("->")]


def _update_dims(sizes, shape, core, ctx, is_input):
    nc = len(core)
    if is_input and len(shape) < nc:
        raise ValueError(f"input with shape {shape} does not have enough dimensions for all "
                         f"core dimensions {core} {ctx}")
    if not is_input and len(shape) != nc:
        raise ValueError(f"output shape {shape} does not match core dimensions {core} {ctx}")
    for dim, size in zip(core, shape[len(shape) - nc:] if nc else ()):
        if sizes.setdefault(dim, size) != size:
            raise ValueError(f"inconsistent size for core dimension {dim!r}: {size} vs "
                             f"{sizes[dim]} {ctx}")


@_export
def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """pyfunc made to broadcast over leading dimensions like a NumPy
    (generalised) ufunc, through vmap: pyfunc sees scalars (or, with a
    signature such as '(n),(n)->()', the core dimensions). excluded names the
    positional indices or keywords passed through unchanged."""
    if builtins.any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError(f"vectorize can only exclude integer or string arguments, but "
                        f"excluded={excluded!r}")
    if builtins.any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")
    from olympus._src.ad import vmap

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        ctx = f"on vectorized function with excluded={excluded!r} and signature={signature!r}"
        static_pos = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
                      if i < len(args)]
        dyn = [a for i, a in enumerate(args) if i not in excluded]
        static_kw = {k: v for k, v in kwargs.items() if k in excluded}
        dyn_kw = {k: v for k, v in kwargs.items() if k not in excluded}
        if dyn_kw:
            raise NotImplementedError("vectorize: keyword arguments must be excluded (pass the "
                                      "mapped ones positionally)")
        none_pos = [i for i, a in enumerate(dyn) if a is None]

        def call(*xs):
            xs = list(xs)
            for i in none_pos:
                xs.insert(i, None)
            full_args = list(xs)
            for i, v in static_pos:
                full_args.insert(i, v)
            return pyfunc(*full_args, **static_kw)

        dyn = [_arr(a) for a in dyn if a is not None]
        if signature is not None:
            in_core, out_core = _parse_signature(signature)
            if none_pos:
                in_core = [c for i, c in enumerate(in_core) if i not in none_pos]
        else:
            in_core, out_core = [()] * len(dyn), None
        if len(dyn) != len(in_core):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, "
                            f"got {len(dyn)} {ctx}")
        sizes = {}
        shapes = []
        for a, core in zip(dyn, in_core):
            _update_dims(sizes, _shape(a), core, ctx, True)
            shapes.append(_shape(a)[:_ndim(a) - len(core)])
        bshape = broadcast_shapes(*shapes) if shapes else ()
        fn = call
        if out_core is not None:
            def fn(*xs, _inner=call):
                out = _inner(*xs)
                outs = out if isinstance(out, tuple) else (out,)
                if len(out_core) > 1 and not isinstance(out, tuple):
                    raise TypeError(f"output must be a tuple when multiple outputs are "
                                    f"expected, got: {out!r} {ctx}")
                if len(outs) != len(out_core):
                    raise TypeError(f"wrong number of output arguments: expected "
                                    f"{len(out_core)}, got {len(outs)} {ctx}")
                s = dict(sizes)
                for o, core in zip(outs, out_core):
                    _update_dims(s, _shape(o), core, ctx, False)
                return out
        squeezed, rev_filled = [], []
        for a, core in zip(dyn, in_core):
            noncore = _shape(a)[:_ndim(a) - len(core)]
            filled = (1,) * (len(bshape) - len(noncore)) + noncore
            rev_filled.append(filled[::-1])
            squeezed.append(squeeze(a, tuple(i for i, d in enumerate(noncore) if d == 1)))
        expand = []
        for negdim, sizes_at in enumerate(zip(*rev_filled)):
            in_axes = tuple(None if d == 1 else 0 for d in sizes_at)
            if builtins.all(ax is None for ax in in_axes):
                expand.append(len(bshape) - 1 - negdim)
            else:
                fn = vmap(fn, in_axes)
        result = fn(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, expand) for r in result)
        return expand_dims(result, expand)

    return wrapped


class ufunc:
    """A universal function made from a scalar Python function (JAX's
    jnp.ufunc): calls broadcast through vectorize; outer, reduce and
    accumulate and reduceat work for binary ufuncs; at for any."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None):
        self._func = func
        self.nin = operator.index(nin)
        self.nout = operator.index(nout)
        self.nargs = operator.index(nargs or nin)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = func.__doc__

    def __repr__(self):
        return f"<olympus.numpy.ufunc '{self.__name__}'>"

    def __hash__(self):
        return hash((self._func, self.__name__, self.identity, self.nin, self.nout))

    def __eq__(self, other):
        return isinstance(other, ufunc) and (self._func, self.__name__, self.identity,
                                             self.nin, self.nout) == \
            (other._func, other.__name__, other.identity, other.nin, other.nout)

    def __call__(self, *args, out=None, where=None):
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__} takes {self.nin} arguments, got {len(args)}")
        return vectorize(self._func)(*args)

    def _binary(self, what):
        if self.nin != 2:
            raise ValueError(f"{what} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{what} only supported for functions returning a single value")

    def _result_dtype(self, a):
        from olympus._src.ad import eval_shape
        one = _convert(1, _dtype(a))
        return np.dtype(eval_shape(self._func, one, one).dtype)

    def outer(self, A, B, /):
        """func(a, b) for every pair of elements of A and B: shape A.shape + B.shape."""
        self._binary("outer")
        A, B = _arr(A), _arr(B)
        a = reshape(A, _shape(A) + (1,) * _ndim(B))
        return self(a, B)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """func folded over axis (None: the flattened array) with a scan."""
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        a = _arr(a)
        if isinstance(axis, tuple):
            raise NotImplementedError(f"{self.__name__}.reduce over a tuple of axes")
        if initial is None:
            initial = self.identity
        if where is not None and initial is None:
            raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                             "identity, so to use a where mask one has to specify 'initial'.")
        dt = self._result_dtype(a) if dtype is None else _dt.canonicalize(dtype)
        mask = _where_mask(where, _shape(a), f"{self.__name__}.reduce")
        if axis is None:
            final = (1,) * _ndim(a) if keepdims else ()
            a = ravel(a)
            mask = ravel(mask) if mask is not None else None
            ax = 0
        else:
            ax = _canon_axis(axis, _ndim(a))
            s = _shape(a)
            final = s[:ax] + ((1,) if keepdims else ()) + s[ax + 1:]
        a = _convert(moveaxis(a, ax, 0), dt)
        mask = moveaxis(mask, ax, 0) if mask is not None else None
        n = _shape(a)[0]
        if n == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} "
                                 "which has no identity")
            return full(final, initial, dt)
        if initial is None:
            init, xs = a[0], a[1:]
            ms = mask[1:] if mask is not None else None
        else:
            init = _broadcast_to(_convert(_arr(initial), dt), _shape(a)[1:])
            xs, ms = a, mask

        def step(c, xm):
            x, m = xm if ms is not None else (xm, None)
            y = _convert(self._func(c, x), dt)
            return (y if m is None else _where_fn(m, y, c)), None

        res = lax.scan(step, init, (xs, ms) if ms is not None else xs)[0]
        return reshape(res, final)

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running reduce along axis (the first element is kept as it is)."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        a = _arr(a)
        dt = self._result_dtype(a) if dtype is None else _dt.canonicalize(dtype)
        ax = _canon_axis(axis, _ndim(a))
        if _shape(a)[ax] == 0:
            return zeros(_shape(a), dt)
        a = _convert(moveaxis(a, ax, 0), dt)

        def step(c, x):
            y = _convert(self._func(c, x), dt)
            return y, y

        first = a[0]
        rest = lax.scan(step, first, a[1:])[1]
        return moveaxis(concatenate([expand_dims(first, 0), rest], 0), 0, ax)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """a with func applied at a[indices] (with b), unbuffered as NumPy's
        ufunc.at: a repeated index applies again. JAX's form: inplace=False."""
        if inplace:
            raise NotImplementedError(f"{self.__name__}.at: olympus arrays are immutable; pass "
                                      "inplace=False to get the updated array")
        if (b is None) != (self.nin == 1):
            raise ValueError(f"{self.__name__}.at: expected {'no' if self.nin == 1 else 'an'} "
                             "operand b for a ufunc of " + str(self.nin) + " input(s)")
        a = _arr(a)
        shape = _shape(a)
        where_ = reshape(lax.iota(np.int32, _size(shape)), shape)[indices]  # flat positions
        pos = ravel(where_)
        flat = ravel(a)
        if b is not None:
            bv = ravel(_broadcast_to(_arr(b), _shape(where_)))

        def step(f, x):
            i = x[0]
            old = f[i]
            new = self._func(old) if b is None else self._func(old, x[1])
            return f.at[i].set(_convert(new, _dtype(a))), None

        flat = lax.scan(step, flat, (pos,) if b is None else (pos, bv))[0]
        return reshape(flat, shape)

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """NumPy's reduceat: the reduce of a[indices[i]:indices[i+1]] along
        axis (a[indices[i]] where the next index is not larger). indices
        must be concrete (they decide the slices)."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        if _is_tracer(indices):
            raise _core.ConcretizationTypeError(
                f"{self.__name__}.reduceat: indices must be concrete (they decide the slices)")
        a = _arr(a)
        ax = _canon_axis(axis, _ndim(a))
        n = _shape(a)[ax]
        idx = np.asarray(indices).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"{self.__name__}.reduceat: indices must be in [0, {n})")
        parts = []
        for k, i in enumerate(idx.tolist()):
            j = int(idx[k + 1]) if k + 1 < idx.size else n
            piece = _slice_axis(a, i, j if j > i else i + 1, ax)
            parts.append(expand_dims(self.reduce(piece, axis=ax, dtype=dtype), ax))
        if not parts:
            s = list(_shape(a))
            s[ax] = 0
            return zeros(tuple(s), dtype or _dtype(a))
        return concatenate(parts, ax)


__all__.append("ufunc")


@_export
def frompyfunc(func, /, nin, nout, *, identity=None):
    """A ufunc from a scalar function of nin arguments and nout results."""
    return ufunc(func, nin, nout, identity=identity)


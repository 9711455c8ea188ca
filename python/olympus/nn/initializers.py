"""olympus.nn.initializers: functions `init(key, shape, dtype=None) -> Array` for
layer parameters, as `jax.nn.initializers` (Keras' and Sonnet's definitions).

Draws come from `olympus.random`, so a key gives the values JAX's initializer
gives for it (up to the last place of transcendental kernels, docs/random.md).
`orthogonal` is JAX's: the Q of `olympus.numpy.linalg.qr` of a normal draw,
each column times the sign of R's diagonal entry, which makes the result
uniformly (Haar) distributed.
"""
import math
import operator
from typing import Protocol, runtime_checkable

import numpy as np

from olympus import numpy as jnp
from olympus import random
from olympus._src import dtypes as _dt

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
    "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
    "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]


@runtime_checkable
class Initializer(Protocol):
    """What an initializer is: `init(key, shape, dtype=None) -> Array`."""

    def __call__(self, key, shape, dtype=None):
        raise NotImplementedError


def _dtype(dtype):
    return _dt.default_float() if dtype is None else _dt.canonicalize(dtype)


def _shape(shape):
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def zeros(key, shape, dtype=None):
    """An array of zeros (key is ignored)."""
    return jnp.zeros(_shape(shape), _dtype(dtype))


def ones(key, shape, dtype=None):
    """An array of ones (key is ignored)."""
    return jnp.ones(_shape(shape), _dtype(dtype))


def constant(value, dtype=None):
    """An initializer filling with value."""
    def init(key, shape, dtype=dtype):
        return jnp.full(_shape(shape), value, _dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from [0, scale)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.uniform(key, _shape(shape), dtype) * jnp.asarray(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from N(0, stddev^2)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.normal(key, _shape(shape), dtype) * jnp.asarray(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing stddev * (a standard normal truncated to [lower,
    upper]); no variance correction (variance_scaling applies one)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return (random.truncated_normal(key, lower, upper, _shape(shape), dtype)
                * jnp.asarray(stddev, dtype))
    return init


def _axis_size(shape, axes):
    if isinstance(axes, int):
        return shape[axes]
    return math.prod(shape[i] for i in axes)


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    """(fan_in, fan_out) of a weight shape: the in/out axis sizes times the
    receptive field (every axis not in in_axis, out_axis or batch_axis)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size = _axis_size(shape, in_axis)
    out_size = _axis_size(shape, out_axis)
    batch_size = _axis_size(shape, batch_axis)
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def _real(dtype):
    return np.dtype(_dt.real_dtype(dtype))


def _complex_uniform(key, shape, dtype):
    """Uniform on the disk of radius sqrt(2): mean 0, variance 1."""
    key_r, key_theta = random.split(key)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, _real(dtype))).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, _real(dtype)).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """A complex normal of variance 1 with its modulus truncated to upper."""
    key_r, key_theta = random.split(key)
    t = (1 - np.exp(-upper ** 2)) * random.uniform(key_r, shape, _real(dtype)).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, _real(dtype)).astype(dtype)
    return r * jnp.exp(1j * theta)


# The standard deviation of a standard normal truncated to (-2, 2), and of a
# complex standard normal with modulus truncated to 2.
_TRUNC_STD = 0.87962566103423978
_COMPLEX_TRUNC_STD = 0.95311164380491208


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer with variance scale / n, n by mode: "fan_in", "fan_out",
    "fan_avg" (arithmetic mean) or "fan_geo_avg" (geometric mean) of the fans
    (_compute_fans). distribution: "truncated_normal" (at 2 standard deviations,
    rescaled to keep the variance), "normal", or "uniform" (a disk for complex
    dtypes). Axes not in in_axis / out_axis / batch_axis form the receptive
    field of a convolution kernel."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out,
                       "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = scale / denominator
        is_complex = np.issubdtype(dtype, np.complexfloating)
        if distribution == "truncated_normal":
            if not is_complex:
                stddev = np.sqrt(variance) / _TRUNC_STD
                return random.truncated_normal(key, -2, 2, shape, dtype) * \
                    jnp.asarray(stddev, dtype)
            stddev = np.sqrt(variance) / _COMPLEX_TRUNC_STD
            return _complex_truncated_normal(key, 2, shape, dtype) * jnp.asarray(stddev, dtype)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * jnp.asarray(np.sqrt(variance), dtype)
        if not is_complex:
            return random.uniform(key, shape, dtype, -1) * jnp.asarray(np.sqrt(3 * variance),
                                                                       dtype)
        return _complex_uniform(key, shape, dtype) * jnp.asarray(np.sqrt(variance), dtype)
    return init


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(1.0, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(1.0, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(2.0, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of uniformly distributed orthogonal matrices: the shape is
    read as (prod of the other axes) x shape[column_axis]; the matrix has
    orthonormal columns, or orthonormal rows when it is wide."""
    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        wide = n_rows < n_cols
        a = random.normal(key, (n_cols, n_rows) if wide else (n_rows, n_cols), dtype)
        q, r = jnp.linalg.qr(a)
        q = q * jnp.sign(jnp.diagonal(r))   # R's diagonal made positive: Haar measure
        if wide:
            q = q.T
        rest = tuple(d for i, d in enumerate(shape) if i != column_axis % len(shape))
        q = jnp.moveaxis(jnp.reshape(q, rest + (n_cols,)), -1, column_axis)
        return jnp.asarray(scale, dtype) * q
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer for 1-3 D convolution kernels (shape 3-, 4- or 5-D, last
    two axes in <= out): zero except an orthogonal matrix at the spatial centre."""
    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype).at[centre].set(ortho)
    return init

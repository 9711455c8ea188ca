"""olympus.random: JAX's counter-based pseudo-random numbers (`jax.random`).

Keys are Threefry-2x32 keys: raw ``uint32[2]`` arrays (``PRNGKey``) or typed
key arrays (``key``, a small wrapper, see ``PRNGKeyArray``). Every draw is a
pure function of its key, so draws are reproducible, work under ``jit``,
``vmap`` (over keys too) and ``grad`` (samplers that JAX reparameterises:
uniform, normal, gamma and those built on them).

The bits follow JAX's algorithms step for step, so a key gives the values JAX
gives: ``threefry_2x32(key, iota)`` for split and bits (JAX's classic layout,
``jax_threefry_partitionable=False``, its default before 0.5.0; the
partitionable layout is available with ``threefry_partitionable(True)``),
``fold_in``, mantissa filling for floats, ``erf_inv`` for normals, the
two-draw modulus for ``randint``, Marsaglia-Tsang for gamma with JAX's
implicit reparameterisation gradient (``lax.random_gamma_grad``). See
docs/random.md for what differs.
"""
import contextlib
import functools
import math
import operator
import threading
from collections.abc import Sequence

import numpy as np

import olympus
from olympus import _core
from olympus import lax
from olympus import numpy as jnp
from olympus import tree_util
from olympus._src import dtypes as _dt

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone",
    "PRNGKeyArray", "split", "fold_in", "bits", "uniform", "normal", "randint", "bernoulli",
    "categorical", "choice", "permutation", "shuffle", "truncated_normal",
    "multivariate_normal", "exponential", "gamma", "loggamma", "beta", "dirichlet",
    "poisson", "gumbel", "laplace", "logistic", "cauchy", "t", "chisquare", "f",
    "orthogonal", "ball", "generalized_normal", "rademacher", "maxwell",
    "double_sided_maxwell", "pareto", "weibull_min", "geometric", "binomial", "lognormal",
    "rayleigh", "wald", "triangular", "threefry_partitionable",
]

_U32 = np.dtype(np.uint32)
_IMPL = "threefry2x32"

# ------------------------------------------------------------------ the layout switch

_mode = threading.local()


def _partitionable():
    return getattr(_mode, "on", False)


@contextlib.contextmanager
def threefry_partitionable(enabled=True):
    """Within the block, split and bits use JAX's partitionable Threefry layout
    (``jax_threefry_partitionable=True``, JAX's default since 0.5.0): counters
    are the flat indices as (hi, lo) words and 32-bit draws are the xor of the
    two outputs. fold_in is the same in both layouts. A function jitted by the
    caller keeps the layout it was traced under; olympus.random's own jitted
    pieces are cached per layout. Thread-local."""
    old = _partitionable()
    _mode.on = bool(enabled)
    try:
        yield
    finally:
        _mode.on = old


# ------------------------------------------------------------------ small helpers

def _is_tracer(x):
    return _core.is_tracer(x)


def _any_tracer(*xs):
    return any(_is_tracer(leaf) for x in xs for leaf in tree_util.tree_leaves(x))


def _jit(*static):
    """f jitted with `static` argument names (and the layout) static when called
    on concrete values, so eager draws run one cached program; inside a trace
    f is inlined into it."""
    def deco(f):
        jitted = {}

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            # array-likes given as lists are arrays (jit would see pytrees)
            args = tuple(jnp.asarray(a) if isinstance(a, (list, tuple)) else a for a in args)
            if _any_tracer(args, [v for k, v in kwargs.items() if k not in static]):
                return f(*args, **kwargs)
            mode = _partitionable()  # one cache per layout
            jf = jitted.get(mode)
            if jf is None:
                jf = jitted[mode] = olympus.jit(f, static_argnames=static)
            return jf(*args, **kwargs)
        return wrapper
    return deco


def _canon_shape(shape, name="shape"):
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__")
                                                and not isinstance(shape, Sequence)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{name} must contain nonnegative integers, got {shape}")
    return shape


def _shape_of(x):
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else np.shape(x)


def _dtype_of(x):
    return _dt.dtype_and_weak(x)[0]


def _check_shape(name, shape, *param_shapes):
    if param_shapes:
        try:
            got = jnp.broadcast_shapes(shape, *param_shapes)
        except ValueError:
            got = None
        if got != tuple(shape):
            raise ValueError(
                f"{name} parameter shapes must be broadcast-compatible with shape argument, and "
                f"the result of broadcasting the shapes must equal the shape argument, but got "
                f"result {got} for shape argument {tuple(shape)}.")


def _check_broadcast_shapes(name, shape, *args):
    arg_shapes = [_shape_of(a) for a in args]
    if shape is None:
        return tuple(jnp.broadcast_shapes(*arg_shapes)) if arg_shapes else ()
    shape = _canon_shape(shape)
    _check_shape(name, shape, *arg_shapes)
    return shape


def _float_dtype(dtype, name):
    dt = _dt.default_float() if dtype is None else _dt.canonicalize(dtype)
    if not np.issubdtype(dt, np.floating):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dt}")
    return dt


def _int_dtype(dtype, name):
    dt = _dt.default_int() if dtype is None else _dt.canonicalize(dtype)
    if not np.issubdtype(dt, np.integer):
        raise TypeError(f"{name} only accepts integer dtypes, got {dt}")
    return dt


def _finfo(dt):
    dt = np.dtype(dt)
    if _dt.bfloat16 is not None and dt == np.dtype(_dt.bfloat16):
        import ml_dtypes
        return ml_dtypes.finfo(dt)
    return np.finfo(dt)


def _uint(bits):
    return np.dtype(f"uint{bits}")


def _const(x, v):
    """v as a rank-0 constant of x's dtype (not weak)."""
    return np.array(v, _dtype_of(x))


def _convert(x, dt):
    if isinstance(x, (list, tuple)):  # under jit: a list of tracers
        x = jnp.asarray(x)
    return lax.convert_element_type(x, dt)


def _inexact(x):
    """x as an array of an inexact dtype (ints and bools to the default float)."""
    x = jnp.asarray(x)
    return x if _dt.is_inexact(x.dtype) else x.astype(_dt.default_float())


# ------------------------------------------------------------------ keys

class KeyDType:
    """The dtype of typed Threefry keys, printed ``key<fry>`` as in JAX."""
    name = "key<fry>"
    impl = _IMPL
    itemsize = 8

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, KeyDType) or other == self.name

    def __hash__(self):
        return hash(self.name)


_KEY_DTYPE = KeyDType()


class PRNGKeyArray:
    """An array of typed Threefry keys: shape ``s`` over ``uint32[*s, 2]`` key
    data. Supported: ``shape ndim size dtype``, ``len``, iteration, indexing and
    slicing of the key axes, ``reshape``/``ravel``/``flatten``/``squeeze``/``T``,
    ``==``/``!=`` (whole keys), ``block_until_ready``, and passing through
    ``jit``/``vmap``/``grad`` as a pytree (its one leaf is the key data). Keys
    have no arithmetic; ``key_data`` gives the uint32 words."""
    __slots__ = ("_base",)

    def __init__(self, base):
        self._base = base

    @property
    def shape(self):
        return tuple(self._base.shape[:-1])

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def dtype(self):
        return _KEY_DTYPE

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (PRNGKeyArray(self._base[i]) for i in range(self.shape[0]))

    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        if Ellipsis not in idx:
            idx = idx + (Ellipsis,)
        return PRNGKeyArray(self._base[idx + (slice(None),)])

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return PRNGKeyArray(jnp.reshape(self._base, tuple(shape) + (2,)))

    def ravel(self):
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None):
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        return PRNGKeyArray(jnp.squeeze(self._base, axis))

    @property
    def T(self):
        perm = tuple(reversed(range(self.ndim))) + (self.ndim,)
        return PRNGKeyArray(jnp.transpose(self._base, perm))

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.all(self._base == other._base, axis=-1)

    def __ne__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        return jnp.any(self._base != other._base, axis=-1)

    __hash__ = None

    def __array__(self, dtype=None, copy=None):
        raise TypeError("PRNG key arrays have no NumPy value; use olympus.random.key_data(keys) "
                        "for their uint32 data")

    def block_until_ready(self):
        if hasattr(self._base, "block_until_ready"):
            self._base.block_until_ready()
        return self

    def __repr__(self):
        return f"Array({self.shape}, dtype={_KEY_DTYPE}) overlaying:\n{self._base}"


tree_util.register_pytree_node(
    PRNGKeyArray, lambda k: ((k._base,), None), lambda _, children: PRNGKeyArray(children[0]))


def _check_impl(impl, who):
    if impl is None or impl == _IMPL or isinstance(impl, KeyDType):
        return
    raise ValueError(f"{who}: olympus implements the {_IMPL!r} PRNG only, got impl={impl!r}")


def _check_key_data(data):
    if not all(hasattr(data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("olympus encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {data!r}")
    if data.ndim < 1:
        raise TypeError("olympus encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={data.ndim}")
    if tuple(data.shape[-1:]) != (2,):
        raise TypeError("olympus encountered invalid PRNG key data: expected key_data.shape to end "
                        f"with (2,); got shape={tuple(data.shape)} for impl={_IMPL}")
    if np.dtype(data.dtype) != _U32:
        raise TypeError("olympus encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={np.dtype(data.dtype)}")


def _check_prng_key(name, key, allow_batched=False):
    """(uint32[..., 2] key data, wrapped): wrapped says the caller gave raw key
    data (so results go back raw)."""
    if isinstance(key, PRNGKeyArray):
        base, wrapped = key._base, False
    elif isinstance(key, (np.ndarray, np.generic, olympus.Array)) or _is_tracer(key):
        _check_key_data(key)
        base, wrapped = (jnp.asarray(key) if not _is_tracer(key) else key), True
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and base.ndim > 1:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{_shape_of(key)} != (). Use olympus.vmap for batching.")
    return base, wrapped


def _return_keys(wrapped, base):
    return base if wrapped else PRNGKeyArray(base)


def _seed_data(seed):
    """uint32[2] key data for an integer seed, as JAX's threefry_seed: a 64-bit
    seed's (hi, lo) words; a seed of at most 32 bits gives (0, seed). Python ints
    have the default int dtype (int32 with x64 off: 2**31 + 5 wraps, as in JAX
    outside jit)."""
    if _is_tracer(seed):
        dt = np.dtype(seed.dtype)
        if not np.issubdtype(dt, np.integer):
            raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
        lo = _convert(seed, _U32)
        if dt.itemsize == 8:
            hi = _convert(lax.shift_right_logical(seed, np.array(32, dt)), _U32)
        else:
            hi = lax.full((), 0, _U32)
        return jnp.stack([hi, lo])
    if isinstance(seed, (bool, np.bool_)) or (isinstance(seed, (np.ndarray, olympus.Array))
                                             and np.dtype(seed.dtype) == np.bool_):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if isinstance(seed, int):
        v = int(np.int64(seed))  # OverflowError beyond int64, as JAX
        dt = _dt.default_int()
    else:
        arr = np.asarray(seed)
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
        v = int(arr)
        dt = _dt.canonicalize(arr.dtype)
    if dt.itemsize == 8:
        words = ((v % 2**64) >> 32, v % 2**32)
    else:
        words = (0, v % 2**32)
    return jnp.asarray(np.array(words, _U32))


def _seed(name, seed, impl):
    _check_impl(impl, name)
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if len(_shape_of(seed)):
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{_shape_of(seed)} != (). Use olympus.vmap for batching")
    return _seed_data(seed)


def PRNGKey(seed, *, impl=None):
    """A raw key: ``uint32[2]`` data from an integer seed (JAX's seeding: 64-bit
    seeds split into two words, ``PRNGKey(0)`` is ``[0, 0]``)."""
    return _seed("PRNGKey", seed, impl)


def key(seed, *, impl=None, dtype=None):
    """A typed scalar key (``PRNGKeyArray`` of shape ``()``) from an integer seed;
    ``key_data(key(s))`` equals ``PRNGKey(s)``."""
    if dtype is not None:
        if impl is not None:
            raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                             "olympus.random.key")
        impl = dtype
    return PRNGKeyArray(_seed("key", seed, impl))


def key_data(keys):
    """The uint32 data under keys (raw keys are returned as they are)."""
    base, _ = _check_prng_key("key_data", keys, allow_batched=True)
    return base


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Typed keys over ``uint32[..., 2]`` key data."""
    _check_impl(impl if dtype is None else dtype, "wrap_key_data")
    data = key_bits_array
    if not (_is_tracer(data) or isinstance(data, olympus.Array)):
        data = jnp.asarray(data)
    _check_key_data(data)
    return PRNGKeyArray(data)


def key_impl(keys):
    _check_prng_key("key_impl", keys, allow_batched=True)
    return _IMPL


def key_dtype(impl=None):
    _check_impl(impl, "key_dtype")
    return _KEY_DTYPE


def clone(key):
    """key itself (olympus has no key-reuse checking to opt out of)."""
    return key


# ------------------------------------------------------------------ threefry

def _threefry2x32_p(k0, k1, x0, x1):
    return _core.bind("threefry2x32", (k0, k1, x0, x1), None)


def _key_words(key):
    """(key0, key1) as rank-0 uint32 values of key data uint32[2]."""
    return (lax.reshape(lax.slice(key, (0,), (1,)), ()),
            lax.reshape(lax.slice(key, (1,), (2,)), ()))


def threefry_2x32(keypair, count):
    """The Threefry-2x32 hash of count (uint32, any shape) under keypair
    (uint32[2] or a pair of uint32 scalars), as JAX's threefry_2x32: the
    flattened counts (padded to even length) are split in halves that form
    the counter pairs, and the two output halves are concatenated back."""
    if isinstance(keypair, (tuple, list)):
        k0, k1 = (jnp.asarray(k) for k in keypair)
    else:
        k0, k1 = _key_words(jnp.asarray(keypair))
    count = jnp.asarray(count)
    dts = [np.dtype(_dtype_of(x)) for x in (k0, k1, count)]
    if any(d != _U32 for d in dts):
        raise TypeError(f"threefry_2x32 requires uint32 arguments, got {[d.name for d in dts]}")
    shape = _shape_of(count)
    flat = jnp.ravel(count)
    n = flat.shape[0]
    if n == 0:
        return jnp.zeros(shape, _U32)
    if n % 2:
        flat = lax.concatenate([flat, jnp.zeros((1,), _U32)], 0)
    half = flat.shape[0] // 2
    y0, y1 = _threefry2x32_p(k0, k1, lax.slice(flat, (0,), (half,)),
                             lax.slice(flat, (half,), (2 * half,)))
    out = lax.concatenate([y0, y1], 0)
    if n % 2:
        out = lax.slice(out, (0,), (n,))
    return lax.reshape(out, shape)


def _iota_u32(n):
    """lax.iota(uint32, n). A large one is built as rows * 4096 + columns of a
    (rows, 4096) grid: iota's kernel writes element by element, while a
    broadcasted iota copies whole rows, so the grid is several times faster."""
    cols = 4096
    if n < 16 * cols:
        return lax.iota(_U32, n)
    rows = -(-n // cols)
    grid = lax.add(lax.shift_left(lax.broadcasted_iota(_U32, (rows, cols), 0), np.uint32(12)),
                   lax.broadcasted_iota(_U32, (rows, cols), 1))
    flat = lax.reshape(grid, (rows * cols,))
    return flat if rows * cols == n else lax.slice(flat, (0,), (n,))


def _threefry_iota_halves(key, n):
    """(y0, y1) of threefry_2x32(key, iota(n)) before concatenation: the
    counter pairs are (i, h + i), h = ceil(n / 2), the last second counter
    being the padding 0 when n is odd."""
    if n >= 2**32 - 1:
        raise NotImplementedError(f"olympus.random: {n} random words in one draw (the limit is "
                                  "2**32 - 2)")
    h = (n + 1) // 2
    x0 = _iota_u32(h)
    if n % 2:
        x1 = lax.concatenate([lax.add(lax.slice(x0, (0,), (h - 1,)), np.uint32(h)),
                              jnp.zeros((1,), _U32)], 0)
    else:
        x1 = lax.add(x0, np.uint32(h))
    k0, k1 = _key_words(key)
    return _threefry2x32_p(k0, k1, x0, x1)


def _threefry_iota(key, n):
    """threefry_2x32(key, iota(uint32, n)): uint32[n]."""
    if n == 0:
        return jnp.zeros((0,), _U32)
    y0, y1 = _threefry_iota_halves(key, n)
    out = lax.concatenate([y0, y1], 0)
    return out if n % 2 == 0 else lax.slice(out, (0,), (n,))


def _threefry_counts(key, shape):
    """Partitionable layout: threefry of counters (0, i) for the flat index i of
    each element of shape (sizes below 2**32): (bits1, bits2) of that shape."""
    n = math.prod(shape)
    if n >= 2**32:
        raise NotImplementedError(f"olympus.random: {n} random words in one draw")
    lo = lax.reshape(_iota_u32(n), shape)
    k0, k1 = _key_words(key)
    return _threefry2x32_p(k0, k1, np.uint32(0), lo)


def _split(key, shape):
    """Keys uint32[*shape, 2] from key data uint32[2]."""
    n = math.prod(shape)
    if _partitionable():
        b1, b2 = _threefry_counts(key, shape)
        return jnp.stack([b1, b2], axis=len(shape))
    return lax.reshape(_threefry_iota(key, 2 * n), tuple(shape) + (2,))


def _fold_in(key, data):
    k0, k1 = _key_words(key)
    y0, y1 = _threefry2x32_p(k0, k1, np.uint32(0), data)
    return jnp.stack([y0, y1])


def _random_bits(key, bit_width, shape):
    """uint{bit_width} bits of the given shape from key data uint32[2]."""
    shape = tuple(shape)
    size = math.prod(shape)
    dt = _uint(bit_width)
    if size == 0:
        return jnp.zeros(shape, dt)
    if _partitionable():
        b1, b2 = _threefry_counts(key, shape)
        if bit_width == 64:
            return lax.bitwise_or(lax.shift_left(_convert(b1, dt), np.array(32, dt)),
                                  _convert(b2, dt))
        bits = lax.bitwise_xor(b1, b2)
        return bits if bit_width == 32 else _convert(bits, dt)
    if bit_width == 64:
        y0, y1 = _threefry_iota_halves(key, 2 * size)
        bits = lax.bitwise_or(lax.shift_left(_convert(y0, dt), np.array(32, dt)),
                              _convert(y1, dt))
        return lax.reshape(bits, shape)
    max_count = -(-bit_width * size // 32)
    words = _threefry_iota(key, max_count)
    if bit_width == 32:
        return lax.reshape(words, shape)
    per = 32 // bit_width
    shifts = np.arange(0, 32, bit_width, dtype=np.uint32)
    parts = lax.bitwise_and(
        lax.shift_right_logical(lax.broadcast_in_dim(words, (max_count, per), (0,)),
                                lax.broadcast_in_dim(shifts, (max_count, per), (1,))),
        np.uint32(2**bit_width - 1))
    bits = lax.slice(lax.reshape(parts, (max_count * per,)), (0,), (size,))
    return lax.reshape(_convert(bits, dt), shape)


def split(key, num=2):
    """num new keys (an int, or a shape tuple) from one key, along new leading
    axes."""
    base, wrapped = _check_prng_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    shape = _canon_shape(shape, "num")
    return _return_keys(wrapped, _split_jit(base, shape=shape))


@_jit("shape")
def _split_jit(key, shape):
    return _split(key, shape)


def fold_in(key, data):
    """A new key from key and a 32-bit integer (JAX's threefry fold_in:
    threefry_2x32(key, [0, data]))."""
    base, wrapped = _check_prng_key("fold_in", key)
    if len(_shape_of(data)):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {_shape_of(data)} != (). Use olympus.vmap for batching.")
    if isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        data = np.uint32(int(data) % 2**32)
    else:
        data = _convert(data, _U32)
    return _return_keys(wrapped, _fold_in_jit(base, data))


@_jit()
def _fold_in_jit(key, data):
    return _fold_in(key, data)


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers (default uint32; uint64 with x64)."""
    base, _ = _check_prng_key("bits", key)
    dt = _dt.default_uint() if dtype is None else _dt.canonicalize(dtype)
    if not np.issubdtype(dt, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dt}")
    return _bits_jit(base, shape=_canon_shape(shape), bit_width=dt.itemsize * 8)


@_jit("shape", "bit_width")
def _bits_jit(key, shape, bit_width):
    return _random_bits(key, bit_width, shape)


# ------------------------------------------------------------------ uniform and normal

def _static_scalar(v):
    """v as a Python float when it is a concrete real scalar, else None."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.ndim == 0 and np.issubdtype(v.dtype, np.number) \
            and not np.issubdtype(v.dtype, np.complexfloating):
        return float(v)
    return None


def _unit_floats(key, shape, dtype):
    """(m, nmant): m = the random mantissa bits as dtype values (whole numbers
    below 2**nmant). JAX fills a float's mantissa with them under the exponent
    of 1.0 and subtracts 1: that is m * 2**-nmant exactly, which is how it is
    computed here (no bitcast needed)."""
    fi = _finfo(dtype)
    nbits, nmant = fi.bits, fi.nmant
    rng_bits = nbits if nmant >= 8 else 8
    bits_ = _random_bits(key, rng_bits, shape)
    udt = _uint(nbits)
    if rng_bits != nbits:
        bits_ = _convert(bits_, udt)
    m = lax.shift_right_logical(bits_, np.array(rng_bits - nmant, udt))
    return _convert(m, dtype), nmant


def _uniform(key, shape, dtype, minval, maxval):
    """JAX's uniform: floats in [0, 1) from the mantissa bits, scaled by
    (maxval - minval), shifted by minval and clamped below at minval. With
    static scalar bounds the scale is folded into one multiply (exact: the unit
    floats are m * 2**-nmant) and the shift and clamp are left out where they
    cannot change a value."""
    fi = _finfo(dtype)
    lo, hi = _static_scalar(minval), _static_scalar(maxval)
    if lo is not None and hi is not None:
        lo_t, hi_t = np.array(lo, dtype), np.array(hi, dtype)
        with np.errstate(all="ignore"):
            span = hi_t - lo_t
            scale = np.array(span * np.array(2.0 ** -fi.nmant, dtype), dtype)
        if np.isfinite(span) and span > 0 and np.isfinite(lo_t) and \
                abs(scale) >= fi.tiny:
            m, _ = _unit_floats(key, shape, dtype)
            out = lax.mul(m, scale) if scale != 1 else m
            if lo_t != 0:
                out = lax.add(out, lo_t)  # fl(x + lo) >= lo for x >= 0: no clamp
            return out
    m, nmant = _unit_floats(key, shape, dtype)
    floats = lax.mul(m, np.array(2.0 ** -nmant, dtype))
    nd = len(shape)
    lo_a = _convert(jnp.asarray(minval), dtype)
    hi_a = _convert(jnp.asarray(maxval), dtype)
    lo_a = lax.broadcast_in_dim(lo_a, (1,) * (nd - lo_a.ndim) + tuple(lo_a.shape),
                                tuple(range(nd - lo_a.ndim, nd))) if lo_a.ndim < nd else lo_a
    hi_a = lax.broadcast_in_dim(hi_a, (1,) * (nd - hi_a.ndim) + tuple(hi_a.shape),
                                tuple(range(nd - hi_a.ndim, nd))) if hi_a.ndim < nd else hi_a
    y = floats * (hi_a - lo_a) + lo_a
    if tuple(y.shape) != tuple(shape):
        raise ValueError(f"uniform: minval/maxval of shapes {_shape_of(minval)} and "
                         f"{_shape_of(maxval)} do not broadcast to shape {tuple(shape)}")
    return jnp.maximum(lo_a, y)


@_jit("shape", "dtype")
def _uniform_dyn(key, minval, maxval, shape, dtype):
    return _uniform(key, shape, dtype, minval, maxval)


@_jit("shape", "dtype", "lo", "hi")
def _uniform_static(key, shape, dtype, lo, hi):
    return _uniform(key, shape, dtype, lo, hi)


def uniform(key, shape=(), dtype=None, minval=0., maxval=1.):
    """Uniform floats in [minval, maxval) (JAX's bit-level algorithm)."""
    base, _ = _check_prng_key("uniform", key)
    dt = _float_dtype(dtype, "uniform")
    shape = _canon_shape(shape)
    lo, hi = _static_scalar(minval), _static_scalar(maxval)
    if lo is not None and hi is not None:
        return _uniform_static(base, shape=shape, dtype=dt, lo=lo, hi=hi)
    return _uniform_dyn(base, minval, maxval, shape=shape, dtype=dt)


def _normal_real(key, shape, dtype):
    lo = float(np.nextafter(np.array(-1., dtype), np.array(0., dtype)))
    u = _uniform(key, shape, dtype, lo, 1.0)
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def _normal(key, shape, dtype):
    if np.issubdtype(dtype, np.complexfloating):
        sqrt2 = np.array(np.sqrt(2), dtype)
        ks = _split(key, (2,))
        real = _dt.real_dtype(dtype)
        re = _normal_real(ks[0], shape, real).astype(dtype)
        im = _normal_real(ks[1], shape, real).astype(dtype)
        return (re + 1j * im) / sqrt2
    return _normal_real(key, shape, dtype)


@_jit("shape", "dtype")
def _normal_jit(key, shape, dtype):
    return _normal(key, shape, dtype)


def normal(key, shape=(), dtype=None):
    """Standard normal values: sqrt(2) * erf_inv(u), u uniform in (-1, 1)
    (complex dtypes: independent real and imaginary parts, variance 1 in all)."""
    base, _ = _check_prng_key("normal", key)
    dt = _dt.default_float() if dtype is None else _dt.canonicalize(dtype)
    if not _dt.is_inexact(dt):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, got {dt}")
    return _normal_jit(base, shape=_canon_shape(shape), dtype=dt)


# ------------------------------------------------------------------ integers

def _convert_and_clip_integer(val, dtype):
    """val (an integer array) in dtype, clipped to dtype's range instead of
    wrapping."""
    dtype = np.dtype(dtype)
    vdt = np.dtype(val.dtype)
    lo = max(np.iinfo(dtype).min, np.iinfo(vdt).min)
    hi = min(np.iinfo(dtype).max, np.iinfo(vdt).max)
    return jnp.clip(val, np.array(lo, vdt), np.array(hi, vdt)).astype(dtype)


def _randint(key, minval, maxval, shape, dtype):
    _check_shape("randint", shape, _shape_of(minval), _shape_of(maxval))
    minval = jnp.asarray(minval)
    maxval = jnp.asarray(maxval)
    if not np.issubdtype(minval.dtype, np.integer):
        minval = minval.astype(_dt.default_int())
    if not np.issubdtype(maxval.dtype, np.integer):
        maxval = maxval.astype(_dt.default_int())
    info = np.iinfo(dtype)
    maxval_out_of_range = lax.gt(
        maxval, _convert_and_clip_integer(jnp.asarray(np.array(info.max, dtype)), maxval.dtype))
    minval = _convert_and_clip_integer(minval, dtype)
    maxval = _convert_and_clip_integer(maxval, dtype)
    nd = len(shape)
    minval = jnp.reshape(minval, (1,) * (nd - minval.ndim) + tuple(minval.shape))
    maxval = jnp.reshape(maxval, (1,) * (nd - maxval.ndim) + tuple(maxval.shape))
    nbits = info.bits
    udt = _uint(nbits)
    ks = _split(key, (2,))
    higher_bits = _random_bits(ks[0], nbits, shape)
    lower_bits = _random_bits(ks[1], nbits, shape)
    # maxval - minval wraps in the signed type and is read unsigned: computed
    # here in the unsigned type directly (the same bits, no signed overflow)
    umin, umax = _convert(minval, udt), _convert(maxval, udt)
    span = umax - umin
    span = jnp.where(maxval <= minval, np.array(1, udt), span)
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + np.array(1, udt), span)
    span = jnp.broadcast_to(span, shape)
    multiplier = lax.rem(jnp.full(shape, 2 ** (nbits // 2), udt), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    random_offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier),
                            lax.rem(lower_bits, span))
    random_offset = lax.rem(random_offset, span)
    return (jnp.broadcast_to(umin, shape) + random_offset).astype(dtype)


@_jit("shape", "dtype")
def _randint_jit(key, minval, maxval, shape, dtype):
    return _randint(key, minval, maxval, shape, dtype)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval): JAX's method (two draws of the dtype's width
    combined modulo the span; 8- and 16-bit dtypes sample in 32 bits)."""
    base, _ = _check_prng_key("randint", key)
    dt = _int_dtype(dtype, "randint")
    shape = _canon_shape(shape)
    info = np.iinfo(dt)
    sample_dt = dt
    if info.bits < 32:
        sample_dt = np.dtype(np.int32)
        minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min), int(info.max) + 1)
    return _randint_jit(base, minval, maxval, shape=shape, dtype=sample_dt).astype(dt)


# ------------------------------------------------------------------ permutations and choice

def _shuffle(key, x, axis):
    """x shuffled along axis by sorting on fresh random 32-bit keys, enough
    rounds that ties are improbable (JAX's heuristic: ceil(3 ln n / ln 2**32))."""
    size = math.prod(_shape_of(x))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        ks = _split(key, (2,))
        key, subkey = ks[0], ks[1]
        sort_keys = _random_bits(subkey, 32, _shape_of(x))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


@_jit("axis")
def _shuffle_jit(key, x, axis):
    return _shuffle(key, x, axis)


@_jit("axis", "independent")
def _permutation_jit(key, x, axis, independent):
    if independent or jnp.ndim(x) == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, jnp.arange(_shape_of(x)[axis]), 0)
    return jnp.take(x, ind, axis, unique_indices=True)


def _normalize_axis(axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def permutation(key, x, axis=0, independent=False):
    """A random permutation of arange(x) (x an int) or of x along axis (the
    same permutation for every slice, or one per slice with independent)."""
    base, _ = _check_prng_key("permutation", key)
    if not hasattr(x, "shape") and not np.isscalar(x) and not isinstance(x, (list, tuple)):
        raise TypeError(f"permutation requires an array or an int, got {type(x)}")
    if not (_is_tracer(x) or isinstance(x, olympus.Array)):
        x = jnp.asarray(x) if np.ndim(x) else x
    ndim = len(_shape_of(x))
    axis = _normalize_axis(axis, ndim or 1)
    if not ndim:
        if not np.issubdtype(_dtype_of(x), np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        if _is_tracer(x):
            raise olympus.errors.ConcretizationTypeError(
                "argument x of olympus.random.permutation() must be a concrete integer")
        r = operator.index(int(x))
        return _shuffle_jit(base, jnp.arange(r), axis=axis)
    return _permutation_jit(base, x, axis=axis, independent=bool(independent))


def shuffle(key, x, axis=0):
    """x shuffled along axis (JAX's deprecated `random.shuffle`; `permutation(key,
    x, axis, independent=True)` shuffles each slice alone)."""
    base, _ = _check_prng_key("shuffle", key)
    x = x if (_is_tracer(x) or isinstance(x, olympus.Array)) else jnp.asarray(x)
    axis = _normalize_axis(axis, max(1, x.ndim))
    return _shuffle_jit(base, x, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Samples of a (an array, or arange(a) for an int) along axis: with
    replacement by randint (uniform) or inverse CDF (p), without by permutation
    (uniform) or the Gumbel top-k trick (p)."""
    base, _ = _check_prng_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError("shape argument of olympus.random.choice must be a sequence, got "
                        f"{shape}")
    shape = _canon_shape(shape)
    arr = a if (_is_tracer(a) or isinstance(a, olympus.Array)) else jnp.asarray(a)
    if arr.ndim == 0:
        if _is_tracer(a):
            raise olympus.errors.ConcretizationTypeError(
                "The error occurred in olympus.random.choice(): a must be a concrete int")
        n_inputs = operator.index(int(a))
    else:
        axis = _normalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size "
                         f"{n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(base, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            src = n_inputs if arr.ndim == 0 else arr
            perm = permutation(base, src, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis if arr.ndim else 0)
    else:
        p_arr = _inexact(p)
        if tuple(p_arr.shape) != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {tuple(p_arr.shape)} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(base, shape, dtype=p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(_dt.default_int())
        else:
            g = gumbel(base, (n_inputs,), dtype=p_arr.dtype, mode=mode) + jnp.log(p_arr)
            ind = lax.top_k(g, n_draws)[1].astype(_dt.default_int())
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return result.reshape(shape if arr.ndim == 0 else
                          tuple(arr.shape[0:axis]) + shape + tuple(arr.shape[axis + 1:]))


# ------------------------------------------------------------------ simple transforms of uniform

@_jit("shape", "dtype", "mode")
def _bernoulli_jit(key, p, shape, dtype, mode):
    if mode == "high":
        u = _uniform(key, (2,) + shape, dtype, 0., 1.)
        u1, u2 = u[0], u[1]
        u2 = u2 * np.array(2.0 ** -_finfo(dtype).nmant, dtype)
        return u2 < p - u1
    return _uniform(key, shape, dtype, 0., 1.) < p


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability p (uniform < p)."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    base, _ = _check_prng_key("bernoulli", key)
    dt = _dt.canonicalize(_dtype_of(p))
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dt}.")
    if shape is None:
        shape = _shape_of(p)
    else:
        shape = _canon_shape(shape)
        _check_shape("bernoulli", shape, _shape_of(p))
    p = _convert(p, dt) if (_is_tracer(p) or isinstance(p, olympus.Array)) else np.asarray(p, dt)
    return _bernoulli_jit(base, p, shape=tuple(shape), dtype=dt, mode=mode)


def _sampler(name, body, defaults=()):
    """A key -> values sampler with JAX's shape/dtype handling around body(key,
    shape, dtype)."""
    jitted = _jit("shape", "dtype")(lambda key, shape, dtype: body(key, shape, dtype))

    def sample(key, shape=(), dtype=None):
        base, _ = _check_prng_key(name, key)
        return jitted(base, shape=_canon_shape(shape), dtype=_float_dtype(dtype, name))
    sample.__name__ = sample.__qualname__ = name
    return sample


def _exponential(key, shape, dtype):
    u = _uniform(key, shape, dtype, 0., 1.)
    return lax.neg(lax.log1p(lax.neg(u)))  # log of 1 - u: the domain (0, 1]


def _cauchy(key, shape, dtype):
    u = _uniform(key, shape, dtype, float(_finfo(dtype).eps), 1.)
    return lax.tan(lax.mul(_const(u, np.pi), lax.sub(u, _const(u, 0.5))))


def _laplace(key, shape, dtype):
    u = _uniform(key, shape, dtype, -1. + float(_finfo(dtype).epsneg), 1.)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def _logistic(key, shape, dtype):
    x = _uniform(key, shape, dtype, float(_finfo(dtype).tiny), 1.)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def _maxwell(key, shape, dtype):
    x = _normal(key, shape + (3,), dtype)
    return jnp.sqrt(jnp.sum(x * x, axis=-1))


exponential = _sampler("exponential", _exponential)
exponential.__doc__ = "Exponential(1) values: -log1p(-u)."
cauchy = _sampler("cauchy", _cauchy)
cauchy.__doc__ = "Standard Cauchy values: tan(pi (u - 1/2)), u in [eps, 1)."
laplace = _sampler("laplace", _laplace)
laplace.__doc__ = "Laplace(0, 1) values: sign(u) log1p(-|u|), u in (-1, 1)."
logistic = _sampler("logistic", _logistic)
logistic.__doc__ = "Standard logistic values: log(u) - log1p(-u)."
maxwell = _sampler("maxwell", _maxwell)
maxwell.__doc__ = "One-sided Maxwell values: the norm of three standard normals."


def _gumbel(key, shape, dtype, mode):
    fi = _finfo(dtype)
    if mode == "high":
        hl = _uniform(key, (2,) + shape, dtype, 0., 1.)
        high, low = hl[0], hl[1]
        x = jnp.where(high >= 0.5, high,
                      high + 2.0 ** -fi.nmant * low + max(2.0 ** -(2 * fi.nmant + 1),
                                                           float(fi.tiny)))
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, shape, dtype, float(fi.tiny), 1.)))


@_jit("shape", "dtype", "mode")
def _gumbel_jit(key, shape, dtype, mode):
    return _gumbel(key, shape, dtype, mode)


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel values: -log(-log(u)); mode='high' spends two draws per
    value for resolution near u = 0 ('highest' is not supported)."""
    base, _ = _check_prng_key("gumbel", key)
    dt = _float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode == "highest":
        raise NotImplementedError("olympus.random.gumbel: mode='highest' needs a clz primitive "
                                  "olympus does not have; use mode='high'")
    if mode not in ("high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return _gumbel_jit(base, shape=_canon_shape(shape), dtype=dt, mode=mode)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Indices drawn from softmax(logits) along axis: the Gumbel-max trick (with
    replacement) or Gumbel top-k (without)."""
    base, _ = _check_prng_key("categorical", key)
    logits_arr = logits if (_is_tracer(logits) or isinstance(logits, olympus.Array)) \
        else jnp.asarray(logits)
    axis = operator.index(axis)
    ndim = logits_arr.ndim
    _normalize_axis(axis, ndim)
    batch_shape = tuple(np.delete(np.array(logits_arr.shape, dtype=np.int64), axis))
    batch_shape = tuple(int(d) for d in batch_shape)
    if shape is None:
        shape = batch_shape
    else:
        shape = _canon_shape(shape)
        _check_shape("categorical", shape, batch_shape)
    return _categorical_jit(base, logits_arr, shape=shape, batch_shape=batch_shape, axis=axis,
                            replace=bool(replace), mode="low" if mode is None else mode)


@_jit("shape", "batch_shape", "axis", "replace", "mode")
def _categorical_jit(key, logits_arr, shape, batch_shape, axis, replace, mode):
    shape_prefix = shape[:len(shape) - len(batch_shape)]
    ndim = logits_arr.ndim
    if replace:
        if axis >= 0:
            axis -= ndim
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % ndim, logits_arr.shape[axis])
        g = _gumbel(key, (*shape_prefix, *logits_shape), np.dtype(logits_arr.dtype), mode)
        return jnp.argmax(g + jnp.expand_dims(logits_arr, tuple(range(len(shape_prefix)))),
                          axis=axis)
    logits_arr = logits_arr + _gumbel(key, tuple(logits_arr.shape), np.dtype(logits_arr.dtype),
                                      mode)
    k = math.prod(shape_prefix)
    if k > logits_arr.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits_arr.shape[axis]}).")
    _, indices = lax.top_k(jnp.moveaxis(logits_arr, axis, -1), k)
    dimensions = (indices.ndim - 1, *range(indices.ndim - 1))
    return lax.reshape(indices, shape, dimensions)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal values truncated to (lower, upper): the inverse CDF of a
    uniform draw between erf(lower / sqrt2) and erf(upper / sqrt2), clamped
    into the open interval."""
    base, _ = _check_prng_key("truncated_normal", key)
    dt = _float_dtype(dtype, "truncated_normal")
    if shape is None:
        shape = tuple(jnp.broadcast_shapes(_shape_of(lower), _shape_of(upper)))
    else:
        shape = _canon_shape(shape)
        _check_shape("truncated_normal", shape, _shape_of(lower), _shape_of(upper))
    return _truncated_normal_jit(base, lower, upper, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _truncated_normal_jit(key, lower, upper, shape, dtype):
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = _convert(lower, dtype)
    upper = _convert(upper, dtype)
    a = lax.erf(lower / sqrt2)
    b = lax.erf(upper / sqrt2)
    u = _uniform(key, shape, dtype, a, b)
    out = sqrt2 * lax.erf_inv(u)
    return jnp.clip(out,
                    lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


# ------------------------------------------------------------------ gamma family

def _gamma_one(key, alpha, log_space):
    """One Gamma(alpha) sample (Marsaglia and Tsang, "A simple method for
    generating gamma variables", 2000), as JAX's: alpha < 1 is boosted to
    alpha + 1 and the sample multiplied by u**(1/alpha)."""
    dt = np.dtype(alpha.dtype)
    zero, one, two, minus_one = (np.array(v, dt) for v in (0, 1, 2, -1))
    one_over_two, one_over_three = np.array(0.5, dt), np.array(1. / 3., dt)
    squeeze_const = np.array(0.0331, dt)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, one_over_three)
    c = lax.div(one_over_three, lax.sqrt(d))

    def cond_fn(kxvu):
        _, X, V, U = kxvu
        return lax.bitwise_and(
            lax.ge(U, lax.sub(one, lax.mul(squeeze_const, lax.mul(X, X)))),
            lax.ge(lax.log(U), lax.add(lax.mul(X, one_over_two),
                                       lax.mul(d, lax.add(lax.sub(one, V), lax.log(V))))))

    def body_fn(kxvu):
        def next_kxv(kxv):
            ks = _split(kxv[0], (2,))
            x = _normal(ks[1], (), dt)
            return ks[0], x, lax.add(one, lax.mul(x, c))
        ks = _split(kxvu[0], (3,))
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_kxv,
                                 (ks[1], zero, minus_one))
        X = lax.mul(x, x)
        V = lax.mul(lax.mul(v, v), v)
        U = _uniform(ks[2], (), dt, 0., 1.)
        return ks[0], X, V, U

    ks = _split(key, (2,))
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (ks[0], zero, one, two))
    subkey = ks[1]
    if log_space:
        log_samples = lax.neg(_exponential(subkey, (), dt))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, zero)), zero,
                               lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    samples = lax.sub(one, _uniform(subkey, (), dt, 0., 1.))
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, V), boost)


def _gamma_impl(key, a, log_space):
    shape = tuple(a.shape)
    n = math.prod(shape)
    if n == 0:
        return jnp.zeros(shape, a.dtype)
    keys = _split(key, (n,))
    samples = olympus.vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, jnp.ravel(a))
    return jnp.reshape(samples, shape)


def _gamma_grad(sample, a, log_space):
    """d sample / d a at fixed quantile (implicit reparameterisation)."""
    if log_space:
        samples = lax.exp(sample)  # d log x = dx / x; exp may round to 0
        samples = jnp.where(samples == 0, np.array(_finfo(samples.dtype).tiny, samples.dtype),
                            samples)
        return lax.random_gamma_grad(a, samples) / samples
    return lax.random_gamma_grad(a, sample)


def _make_gamma(log_space):
    @olympus.custom_jvp
    def gamma_p(key, a):
        return _gamma_impl(key, a, log_space)

    @gamma_p.defjvp
    def gamma_jvp(primals, tangents):
        key, a = primals
        ta = tangents[1]
        ans = gamma_p(key, a)
        return ans, ta * _gamma_grad(ans, a, log_space)
    return gamma_p


_gamma_p = _make_gamma(False)
_loggamma_p = _make_gamma(True)


def _gamma(key, a, shape, dtype, log_space=False):
    if shape is None:
        shape = _shape_of(a)
    else:
        _check_shape("gamma", shape, _shape_of(a))
    a = _convert(a, dtype)
    if _shape_of(a) != tuple(shape):
        a = jnp.broadcast_to(a, shape)
    return (_loggamma_p if log_space else _gamma_p)(key, a)


@_jit("shape", "dtype", "log_space")
def _gamma_jit(key, a, shape, dtype, log_space):
    return _gamma(key, a, shape, dtype, log_space)


def _check_method(name, method):
    if method not in ("exact",):
        if method == "approximate":
            raise NotImplementedError(f"olympus.random.{name}: method='approximate' is not "
                                      "implemented (only 'exact')")
        raise ValueError(f"method argument to `{name}` must be one of {{'exact', "
                         f"'approximate'}}, got {method!r}")


def gamma(key, a, shape=None, dtype=None, *, method="exact"):
    """Gamma(a, 1) values (Marsaglia-Tsang rejection); differentiable in a by
    implicit reparameterisation (lax.random_gamma_grad), as in JAX."""
    base, _ = _check_prng_key("gamma", key)
    _check_method("gamma", method)
    dt = _float_dtype(dtype, "gamma")
    if shape is not None:
        shape = _canon_shape(shape)
    return _gamma_jit(base, a, shape=shape, dtype=dt, log_space=False)


def loggamma(key, a, shape=None, dtype=None, *, method="exact"):
    """log of Gamma(a, 1) values, computed in log space (accurate for small a)."""
    base, _ = _check_prng_key("loggamma", key)
    _check_method("loggamma", method)
    dt = _float_dtype(dtype, "gamma")
    if shape is not None:
        shape = _canon_shape(shape)
    return _gamma_jit(base, a, shape=shape, dtype=dt, log_space=True)


def beta(key, a, b, shape=None, dtype=None, *, method="exact"):
    """Beta(a, b) values: Ga / (Ga + Gb) from two log-gamma draws."""
    base, _ = _check_prng_key("beta", key)
    _check_method("beta", method)
    dt = _float_dtype(dtype, "beta")
    shape = _check_broadcast_shapes("beta", shape, a, b)
    return _beta_jit(base, a, b, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _beta_jit(key, a, b, shape, dtype):
    a = jnp.broadcast_to(_convert(a, dtype), shape)
    b = jnp.broadcast_to(_convert(b, dtype), shape)
    ks = _split(key, (2,))
    log_gamma_a = _gamma(ks[0], a, shape, dtype, True)
    log_gamma_b = _gamma(ks[1], b, shape, dtype, True)
    log_max = lax.max(log_gamma_a, log_gamma_b)
    gamma_a_scaled = jnp.exp(log_gamma_a - log_max)
    gamma_b_scaled = jnp.exp(log_gamma_b - log_max)
    return gamma_a_scaled / (gamma_a_scaled + gamma_b_scaled)


def _softmax(x, axis):
    """JAX's nn.softmax: exp(x - stop_gradient(max)) / sum."""
    x_max = jnp.max(x, axis, keepdims=True)
    unnormalized = jnp.exp(x - lax.stop_gradient(x_max))
    return unnormalized / jnp.sum(unnormalized, axis, keepdims=True)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors along the last axis: normalised log-gamma draws."""
    base, _ = _check_prng_key("dirichlet", key)
    dt = _float_dtype(dtype, "dirichlet")
    if len(_shape_of(alpha)) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{len(_shape_of(alpha))}")
    if shape is None:
        shape = _shape_of(alpha)[:-1]
    else:
        shape = _canon_shape(shape)
        _check_shape("dirichlet", shape, _shape_of(alpha)[:-1])
    return _dirichlet_jit(base, alpha, shape=tuple(shape), dtype=dt)


@_jit("shape", "dtype")
def _dirichlet_jit(key, alpha, shape, dtype):
    alpha = _convert(alpha, dtype)
    log_gamma_samples = _gamma(key, alpha, shape + tuple(alpha.shape[-1:]), dtype, True)
    return _softmax(log_gamma_samples, -1)


def _t(key, df, shape, dtype):
    df = _convert(df, dtype)
    ks = _split(key, (2,))
    n = _normal(ks[0], shape, dtype)
    half_df = lax.div(df, _const(n, 2))
    half_df = jnp.broadcast_to(half_df, shape)
    g = _gamma(ks[1], half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


@_jit("shape", "dtype")
def _t_jit(key, df, shape, dtype):
    return _t(key, df, shape, dtype)


def t(key, df, shape=(), dtype=None):
    """Student's t values with df degrees of freedom: n sqrt(df / 2 / Gamma(df / 2))."""
    base, _ = _check_prng_key("t", key)
    dt = _float_dtype(dtype, "t")
    shape = _check_broadcast_shapes("t", shape, df)
    return _t_jit(base, df, shape=shape, dtype=dt)


def _chisquare(key, df, shape, dtype):
    df = _convert(df, dtype)
    half_df = lax.div(df, _const(df, 2))
    log_g = _gamma(key, jnp.broadcast_to(half_df, shape), shape, dtype, True)
    return lax.mul(jnp.exp(log_g), _const(df, 2))


@_jit("shape", "dtype")
def _chisquare_jit(key, df, shape, dtype):
    return _chisquare(key, df, shape, dtype)


def chisquare(key, df, shape=(), dtype=None, *, method="exact"):
    """Chi-square values with df degrees of freedom: 2 Gamma(df / 2)."""
    base, _ = _check_prng_key("chisquare", key)
    _check_method("chisquare", method)
    dt = _float_dtype(dtype, "chisquare")
    shape = _check_broadcast_shapes("chisquare", shape, df)
    return _chisquare_jit(base, df, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _f_jit(key, dfnum, dfden, shape, dtype):
    dfden = _convert(dfden, dtype)
    dfnum = _convert(dfnum, dtype)
    ks = _split(key, (2,))
    chi2_dfn = _chisquare(ks[1], dfnum, shape, dtype)
    chi2_dfd = _chisquare(ks[0], dfden, shape, dtype)
    return lax.div(lax.div(chi2_dfn, jnp.broadcast_to(dfnum, shape)),
                   lax.div(chi2_dfd, jnp.broadcast_to(dfden, shape)))


def f(key, dfnum, dfden, shape=(), dtype=None):
    """F-distribution values: (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)."""
    base, _ = _check_prng_key("f", key)
    dt = _float_dtype(dtype, "f")
    shape = _check_broadcast_shapes("f", shape, dfnum, dfden)
    return _f_jit(base, dfnum, dfden, shape=shape, dtype=dt)


def _generalized_normal(key, p, shape, dtype):
    ks = _split(key, (2,))
    g = _gamma(ks[0], jnp.broadcast_to(_convert(1 / p, dtype), shape), shape, dtype)
    r = _rademacher(ks[1], shape, dtype)
    return r * g ** (1 / p)


@_jit("shape", "dtype")
def _generalized_normal_jit(key, p, shape, dtype):
    return _generalized_normal(key, p, shape, dtype)


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalised normal values, density proportional to exp(-|x|**p)."""
    base, _ = _check_prng_key("generalized_normal", key)
    dt = _float_dtype(dtype, "generalized_normal")
    shape = _canon_shape(shape)
    return _generalized_normal_jit(base, p, shape=shape, dtype=dt)


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the unit Lp ball of dimension d: shape + (d,)."""
    base, _ = _check_prng_key("ball", key)
    dt = _float_dtype(dtype, "ball")
    shape = _canon_shape(shape)
    d = operator.index(d)
    return _ball_jit(base, p, d=d, shape=shape, dtype=dt)


@_jit("d", "shape", "dtype")
def _ball_jit(key, p, d, shape, dtype):
    ks = _split(key, (2,))
    g = _generalized_normal(ks[0], p, (*shape, d), dtype)
    e = _exponential(ks[1], shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


# ------------------------------------------------------------------ discrete

def _rademacher(key, shape, dtype):
    b = _bernoulli_jit(key, np.asarray(0.5, _dt.default_float()), shape=shape,
                       dtype=_dt.default_float(), mode="low").astype(dtype)
    return (2 * b - 1).astype(dtype)


@_jit("shape", "dtype")
def _rademacher_jit(key, shape, dtype):
    return _rademacher(key, shape, dtype)


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability (default int dtype)."""
    base, _ = _check_prng_key("rademacher", key)
    dt = _dt.default_int() if dtype is None else _dt.canonicalize(dtype)
    return _rademacher_jit(base, shape=_canon_shape(shape), dtype=dt)


def _poisson_knuth(key, lam, shape, dtype, max_iters):
    def body_fn(carry):
        i, k, rng, log_prod = carry
        ks = _split(rng, (2,))
        k = lax.select(log_prod > -lam, k + np.array(1, dtype), k)
        u = _uniform(ks[1], shape, np.dtype(np.float32), 0., 1.)
        return i + 1, k, ks[0], log_prod + jnp.log(u)

    def cond_fn(carry):
        i, log_prod = carry[0], carry[3]
        return jnp.any(log_prod > -lam) & (i < max_iters)

    k_init = jnp.zeros(shape, dtype)
    log_rate_init = jnp.zeros(shape, np.float32)
    k = lax.while_loop(cond_fn, body_fn, (np.array(0, dtype), k_init, key, log_rate_init))[1]
    return (k - np.array(1, dtype)).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    """Transformed rejection (Hormann, "The transformed rejection method for
    generating Poisson random variables", 1993)."""
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    fdt = np.dtype(lam.dtype)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        ks = _split(key, (3,))
        u = _uniform(ks[1], shape, fdt, 0., 1.) - 0.5
        v = _uniform(ks[2], shape, fdt, 0., 1.)
        u_shifted = 0.5 - jnp.abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t_ = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept2 = s <= t_
        accept = accept1 | (~reject & accept2)
        k_out = lax.select(accept, k, k_out)
        accepted = accepted | accept
        return i + 1, k_out, accepted, ks[0]

    def cond_fn(carry):
        i, _, accepted, _ = carry
        return jnp.any(~accepted) & (i < max_iters)

    k_init = jnp.full(shape, -1, fdt)
    accepted = jnp.zeros(shape, bool)
    k = lax.while_loop(cond_fn, body_fn, (np.array(0, dtype), k_init, accepted, key))[1]
    return k.astype(dtype)


@_jit("shape", "dtype")
def _poisson_jit(key, lam, shape, dtype):
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, jnp.zeros_like(lam))
    lam_rejection = lax.select(use_knuth, jnp.full_like(lam, 1e5), lam)
    max_iters = np.array(np.iinfo(dtype).max, dtype)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                        _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


def poisson(key, lam, shape=None, dtype=None, *, method="exact"):
    """Poisson(lam) counts: Knuth's product of uniforms for lam < 10, Hormann's
    transformed rejection otherwise (as JAX, NumPy and TensorFlow)."""
    base, _ = _check_prng_key("poisson", key)
    _check_method("poisson", method)
    dt = _int_dtype(dtype, "poisson")
    shape = _shape_of(lam) if shape is None else _canon_shape(shape)
    lam = jnp.broadcast_to(jnp.asarray(lam) if not _is_tracer(lam) else lam, shape)
    lam = _convert(lam, np.float32)
    return _poisson_jit(base, lam, shape=tuple(shape), dtype=dt)


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) counts >= 1: floor(log u / log1p(-p)) + 1."""
    base, _ = _check_prng_key("geometric", key)
    dt = _int_dtype(dtype, "geometric")
    shape = _check_broadcast_shapes("geometric", shape, p)
    return _geometric_jit(base, p, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _geometric_jit(key, p, shape, dtype):
    p = _inexact(p)
    u = _uniform(key, shape, np.dtype(p.dtype), 0., 1.)
    u = jnp.where(u == 0, np.array(1, p.dtype), u)  # as JAX: u = 0 read as 1
    log_u = lax.log(u)
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(log_u, log_one_minus_p)) + 1
    return g.astype(dtype)


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_approx_tail(k):
    vals = jnp.asarray(np.array(_STIRLING_TAIL, k.dtype))
    use_tail_values = k <= 9
    k = lax.clamp(_const(k, 0.0), k, _const(k, 9.0))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return lax.select(use_tail_values, vals[k.astype(np.int32)], approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    log1minusprob = jnp.log1p(-prob)
    fdt = np.dtype(prob.dtype)

    def body_fn(carry):
        i, num_geom, geom_sum, key = carry
        ks = _split(key, (2,))
        subkey, key = ks[0], ks[1]
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(subkey, shape, fdt, 0., 1.)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        return i + 1, num_geom_out, geom_sum + geom, key

    def cond_fn(carry):
        i, geom_sum = carry[0], carry[2]
        return jnp.any(geom_sum <= count) & (i < max_iters)

    carry = (np.array(0, dtype), jnp.zeros(shape, fdt), jnp.zeros(shape, fdt), key)
    k = lax.while_loop(cond_fn, body_fn, carry)[1]
    return (k - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    """Transformed rejection with squeeze (Hormann, "The generation of binomial
    random variates", 1993)."""
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)
    fdt = np.dtype(prob.dtype)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        ks = _split(key, (3,))
        u = _uniform(ks[1], shape, fdt, 0., 1.)
        v = _uniform(ks[2], shape, fdt, 0., 1.)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m)
              + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k)
              - _stirling_approx_tail(count - k))
        accept2 = v <= ub
        accept = accept1 | (~reject & accept2)
        k_out = lax.select(accept, k, k_out)
        return i + 1, k_out, accepted | accept, ks[0]

    def cond_fn(carry):
        i, accepted = carry[0], carry[2]
        return jnp.any(~accepted) & (i < max_iters)

    carry = (np.array(0, dtype), jnp.full(shape, -1, fdt), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond_fn, body_fn, carry)[1].astype(dtype)


@_jit("shape", "dtype")
def _binomial_jit(key, count, prob, shape, dtype):
    prob = _inexact(prob)
    count = _convert(count, prob.dtype)
    count = jnp.broadcast_to(count, shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = jnp.isnan(q)
    q_l_0 = q < 0.0
    q = lax.select(q_is_nan | q_l_0, jnp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, jnp.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    # JAX bounds the loops by finfo(dtype).max; as an iteration counter that is
    # the integer type's range of the same width
    max_iters = np.array(np.iinfo(f"int{dtype.itemsize * 8}").max, f"int{dtype.itemsize * 8}")
    samples = lax.select(
        use_inversion,
        _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
        _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & (~invalid), jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats: inversion for n p <= 10, BTRS otherwise
    (as JAX and TensorFlow); NaN for invalid n or p."""
    base, _ = _check_prng_key("binomial", key)
    dt = _float_dtype(dtype, "binomial")
    if shape is None:
        shape = tuple(jnp.broadcast_shapes(_shape_of(n), _shape_of(p)))
    else:
        shape = _canon_shape(shape)
        _check_shape("binomial", shape, _shape_of(n), _shape_of(p))
    return _binomial_jit(base, n, p, shape=shape, dtype=dt)


# ------------------------------------------------------------------ more continuous samplers

def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) values >= 1: exp(Exponential / b)."""
    base, _ = _check_prng_key("pareto", key)
    dt = _float_dtype(dtype, "pareto")
    shape = _check_broadcast_shapes("pareto", shape, b)
    return _pareto_jit(base, b, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _pareto_jit(key, b, shape, dtype):
    b = _convert(b, dtype)
    e = _exponential(key, shape, dtype)
    return lax.exp(e / b)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull values: scale * (-log1p(-u)) ** (1 / concentration)."""
    base, _ = _check_prng_key("weibull_min", key)
    dt = _float_dtype(dtype, "weibull_min")
    return _weibull_jit(base, scale, concentration, shape=_canon_shape(shape), dtype=dt)


@_jit("shape", "dtype")
def _weibull_jit(key, scale, concentration, shape, dtype):
    u = _uniform(key, shape, dtype, 0., 1.)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell values with a random sign, scaled and shifted."""
    base, _ = _check_prng_key("double_sided_maxwell", key)
    dt = _float_dtype(dtype, "double_sided_maxwell")
    params_shape = tuple(jnp.broadcast_shapes(_shape_of(loc), _shape_of(scale)))
    shape = _canon_shape(shape) or params_shape
    return _dsm_jit(base, loc, scale, shape=shape + params_shape, dtype=dt)  # as JAX


@_jit("shape", "dtype")
def _dsm_jit(key, loc, scale, shape, dtype):
    ks = _split(key, (2,))
    maxwell_rvs = _maxwell(ks[0], shape, dtype)
    random_sign = _rademacher(ks[1], shape, dtype)
    return random_sign * maxwell_rvs * scale + loc


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """exp(sigma * normal)."""
    base, _ = _check_prng_key("lognormal", key)
    dt = _float_dtype(dtype, "lognormal")
    shape = _check_broadcast_shapes("lognormal", shape, sigma)
    return _lognormal_jit(base, sigma, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _lognormal_jit(key, sigma, shape, dtype):
    sigma = _convert(sigma, dtype)
    return lax.exp(_normal(key, shape, dtype) * sigma)


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh values: scale * sqrt(-2 log u)."""
    base, _ = _check_prng_key("rayleigh", key)
    dt = _float_dtype(dtype, "rayleigh")
    shape = _check_broadcast_shapes("rayleigh", shape, scale)
    return _rayleigh_jit(base, scale, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _rayleigh_jit(key, scale, shape, dtype):
    u = _uniform(key, shape, dtype, 0., 1.)
    scale = jnp.broadcast_to(_convert(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), _const(u, -2))))


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) values with the given mean and scale 1."""
    base, _ = _check_prng_key("wald", key)
    dt = _float_dtype(dtype, "wald")
    shape = _check_broadcast_shapes("wald", shape, mean)
    return _wald_jit(base, mean, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _wald_jit(key, mean, shape, dtype):
    ks = _split(key, (2,))
    mean = jnp.broadcast_to(_convert(mean, dtype), shape)
    v = _normal(ks[0], shape, dtype)
    z = _uniform(ks[1], shape, dtype, 0., 1.)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular(left, mode, right) values by the inverse CDF."""
    base, _ = _check_prng_key("triangular", key)
    dt = _float_dtype(dtype, "triangular")
    shape = _check_broadcast_shapes("triangular", shape, left, mode, right)
    return _triangular_jit(base, left, mode, right, shape=shape, dtype=dt)


@_jit("shape", "dtype")
def _triangular_jit(key, left, mode, right, shape, dtype):
    left = jnp.broadcast_to(_convert(left, dtype), shape)
    right = jnp.broadcast_to(_convert(right, dtype), shape)
    mode = jnp.broadcast_to(_convert(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = _uniform(key, shape, dtype, 0., 1.)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


# ------------------------------------------------------------------ linear algebra

def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Multivariate normal vectors mean + factor @ z, z standard normal, as JAX:
    factor @ factor^T = cov with factor the Cholesky factor of cov (method
    'cholesky'), v sqrt(w) from cov's eigendecomposition ('eigh'), or
    u sqrt(s) from its SVD ('svd', which also takes a singular cov)."""
    base, _ = _check_prng_key("multivariate_normal", key)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = _inexact(mean), _inexact(cov)
    common = jnp.result_type(mean, cov)
    mean, cov = mean.astype(common), cov.astype(common)
    dt = np.dtype(mean.dtype) if dtype is None else _dt.canonicalize(dtype)
    if not np.issubdtype(dt, np.floating):
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, got {dt}")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {cov.ndim}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but "
                         f"got cov.shape == {tuple(cov.shape)}.")
    if shape is None:
        shape = tuple(jnp.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2])))
    else:
        shape = _canon_shape(shape)
        _check_shape("normal", shape, tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    return _mvn_jit(base, mean, cov, shape=shape, dtype=dt, method=method)


@_jit("shape", "dtype", "method")
def _mvn_jit(key, mean, cov, shape, dtype, method):
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    normal_samples = _normal(key, shape + tuple(mean.shape[-1:]), dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, normal_samples)


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Matrices uniform on O(n) (U(n) for complex dtypes), shape + (n, m); with
    m != n semi-orthogonal (orthonormal rows if n <= m, columns if m <= n).
    As JAX: the Q of the QR factorisation of a normal draw, its columns'
    signs (phases) chosen so that R's diagonal is positive."""
    base, _ = _check_prng_key("orthogonal", key)
    dt = _dt.default_float() if dtype is None else _dt.canonicalize(dtype)
    shape = _canon_shape(shape)
    n = operator.index(n)
    m_ = n if m is None else operator.index(m)
    return _orthogonal_jit(base, n=n, m=m_, shape=shape, dtype=dt)


@_jit("n", "m", "shape", "dtype")
def _orthogonal_jit(key, n, m, shape, dtype):
    z = _normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)   # R's diagonal made positive: Haar measure
    if n < m:
        return jnp.swapaxes(x, -1, -2)
    return x

"""olympus.nn: activations, softmax / logsumexp, one_hot, standardize and a
reference dot_product_attention (as `jax.nn`), pure Python over olympus.numpy
and olympus.lax, so eager, jit, vmap and grad come for free.

Derivatives follow JAX where it chose a value by hand: relu and relu6 have zero
gradient at their kinks; softmax and softplus have custom JVPs, so gradients stay
finite where the naive formula would overflow. `where=` masks (softmax,
log_softmax, logsumexp, standardize) select the elements that take part; masked
outputs are 0 (softmax) or -inf (log_softmax).
"""
import operator

import numpy as np

import olympus
from olympus import _core, lax
from olympus import numpy as jnp
from olympus._src import dtypes as _dt
from olympus._src.ad import custom_jvp
from olympus._src.jnp import _canon_axes, _promote, _shape
from olympus.nn import initializers  # noqa: F401

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_tanh", "identity", "initializers", "leaky_relu", "log1mexp",
    "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6",
    "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
    "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh",
]

tanh = jnp.tanh


def _inexact(x):
    """x as an array of an inexact dtype (ints and bools in the default float;
    Python scalars stay weak)."""
    return _promote(x, to_inexact=True, broadcast=False)[0]


def _array(x):
    return x if isinstance(x, _core.Array) or _core.is_tracer(x) else jnp.asarray(x)


def identity(x):
    """x itself, as an array."""
    return _array(x)


# ------------------------------------------------------------------ activations

@custom_jvp
def relu(x):
    """max(x, 0); the gradient at 0 is 0 (as JAX)."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: lax.select(x > 0, g, lax.full_like(g, 0)))


@custom_jvp
def relu6(x):
    """min(max(x, 0), 6); the gradient at 0 and at 6 is 0."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, ans, x: lax.select((x > 0) & (x < 6), g, lax.full_like(g, 0)))


def sigmoid(x):
    """1 / (1 + exp(-x)) (the logistic primitive)."""
    return lax.logistic(_inexact(x))


@custom_jvp
def softplus(x):
    """log(1 + exp(x)) = logaddexp(x, 0); its derivative is sigmoid(x)
    everywhere (no overflow, 1/2 at 0)."""
    return jnp.logaddexp(_inexact(x), 0)


softplus.defjvps(lambda g, ans, x: g * sigmoid(x))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_inexact(x))


def soft_sign(x):
    """x / (|x| + 1)."""
    x = _inexact(x)
    return x / (jnp.abs(x) + 1)


def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = _inexact(x)
    return x * sigmoid(x)


swish = silu


def mish(x):
    """x * tanh(softplus(x))."""
    x = _inexact(x)
    return x * jnp.tanh(softplus(x))


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2."""
    x, b = _promote(x, b, to_inexact=True)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    x = _inexact(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x):
    """clip((x + 1) / 2, 0, 1): the derivative of sparse_plus."""
    return 0.5 * jnp.clip(_inexact(x) + 1.0, 0.0, 2.0)


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    x = _inexact(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    x = _inexact(x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x otherwise."""
    x = _inexact(x)
    return jnp.where(x >= 0, x, negative_slope * x)


def hard_tanh(x):
    """clip(x, -1, 1)."""
    x = _inexact(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return relu6(_inexact(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish)."""
    x = _inexact(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def gelu(x, approximate=True):
    """The Gaussian error linear unit: x * Phi(x), with Phi the normal CDF;
    approximate=True uses the tanh approximation."""
    x = _inexact(x)
    dt = _dt.dtype_and_weak(x)[0]
    if approximate:
        c = np.sqrt(2 / np.pi).astype(dt)
        return x * (0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x ** 3)))))
    return 0.5 * x * lax.erfc(-x * np.sqrt(0.5).astype(dt))


def glu(x, axis=-1):
    """The gated linear unit: x's two halves along axis, a * sigmoid(b)."""
    x = _array(x)
    axis = operator.index(axis)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: axis size must be divisible by 2, got {size} (axis {axis})")
    a, b = jnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0, accurate on both sides of log 2."""
    x = _inexact(x)
    return jnp.where(x < np.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


log1mexp.defjvps(lambda g, ans, x: g / jnp.expm1(x))


# ------------------------------------------------------------------ masked reductions

def _where(where):
    """A where= mask as bool (JAX's reductions read any truthy mask)."""
    return None if where is None else _array(where).astype(bool)


def _masked(x, where, fill):
    return x if where is None else jnp.where(where, x, fill)


def _max(x, axis, where, keepdims=True):
    """max over axis of the elements where allows (-inf where none)."""
    return jnp.max(x, axis, keepdims=keepdims, where=where, initial=-np.inf)


def _sum(x, axis, where, keepdims=True):
    return jnp.sum(x, axis, keepdims=keepdims, where=where)


# ------------------------------------------------------------------ softmax family

def _softmax_impl(x, axis, where):
    x_max = _max(x, axis, where)
    unnormalized = jnp.exp(_masked(x, where, -np.inf) - x_max)
    result = unnormalized / _sum(unnormalized, axis, where)
    return _masked(result, where, 0)


_softmax = custom_jvp(_softmax_impl, nondiff_argnums=(1, 2))


def _softmax_jvp(axis, where, primals, tangents):
    (x,), (x_dot,) = primals, tangents
    y = _softmax(x, axis, where)
    return y, y * (x_dot - _sum(y * x_dot, axis, where))


_softmax.defjvp(_softmax_jvp)


def _check_axis(axis):
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return tuple(operator.index(a) for a in axis)
    return operator.index(axis)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along axis (an int or a tuple), computed as
    exp(x - max x); where= takes part (masked outputs are 0). Its JVP is
    y * (dx - sum(y * dx)), finite even where exp(x) would overflow."""
    return _softmax(_inexact(x), _check_axis(axis), _where(where))


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along axis, shifted by the (constant) max for stability;
    masked outputs are -inf."""
    x = _inexact(x)
    axis = _check_axis(axis)
    where = _where(where)
    shifted = _masked(x, where, -np.inf) - lax.stop_gradient(_max(x, axis, where))
    result = shifted - jnp.log(_sum(jnp.exp(shifted), axis, where))
    return _masked(result, where, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) along axis, computed as max + log(sum(b * exp(a - max)));
    b scales each term (negative b may make the sum negative: then the result
    is nan, or with return_sign=True the pair (log|sum|, sign(sum))). where=
    selects the terms (an empty selection gives -inf)."""
    axis = _check_axis(axis)
    where = _where(where)
    if where is not None:
        a = jnp.where(where, a, 0)   # masked infs and nans stay out of the gradient
    if b is not None:
        a, b = _promote(a, b, to_inexact=True)
        shape = jnp.broadcast_shapes(_shape(a), _shape(b))
        a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a = _array(_inexact(a))
    dt = _dt.dtype_and_weak(a)[0]
    amax = _max(jnp.real(a), axis, where, keepdims=True)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    exp_a = jnp.exp(a - amax.astype(dt))
    if b is not None:
        exp_a = exp_a * b
    sumexp = _sum(exp_a, axis, where, keepdims=True)
    sign = jnp.sign(sumexp)
    if return_sign or not np.issubdtype(dt, np.complexfloating):
        sumexp = jnp.abs(sumexp)
    out = jnp.log(sumexp) + amax.astype(_dt.dtype_and_weak(sumexp)[0])
    if not keepdims:
        axes = _canon_axes(axis, len(_shape(a)))
        out = lax.squeeze(out, axes)
        sign = lax.squeeze(sign, axes)
    if return_sign:
        return out, sign
    if b is not None and not np.issubdtype(dt, np.complexfloating):
        out = jnp.where(sign < 0, np.nan, out)
    return out


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """log(mean(exp(x))) along axis over the elements where selects."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = jnp.ones(_shape(x), _dt.dtype_and_weak(lse)[0])
    count = jnp.sum(ones, _check_axis(axis), keepdims=keepdims, where=_where(where))
    return lse - jnp.log(count)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """(x - mean) / sqrt(variance + epsilon) along axis; mean and variance are
    computed (over where=) unless given: algorithm "fast" as E[x^2] - E[x]^2
    (clipped at 0), "stable" as E[(x - mean)^2]."""
    x = _inexact(x)
    axis = _check_axis(axis)
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    where = _where(where)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(x - mean), axis, keepdims=True, where=where)
        else:
            variance = jnp.maximum(jnp.mean(jnp.square(x), axis, keepdims=True, where=where)
                                   - jnp.square(mean), 0)
    return (x - mean) * lax.rsqrt(_inexact(variance + epsilon))


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """x's integers as one-hot vectors of length num_classes (a static int) along
    a new axis; out-of-range values give all-zero vectors. dtype defaults to the
    default float."""
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise olympus.errors.ConcretizationTypeError(
            "one_hot: num_classes must be a concrete int, got "
            f"{type(num_classes).__name__}. The error arose in olympus.nn.one_hot argument "
            "`num_classes`.") from None
    x = _array(x)
    dtype = _dt.default_float() if dtype is None else _dt.canonicalize(dtype)
    out_axis = operator.index(axis)
    if not -(x.ndim + 1) <= out_axis <= x.ndim:
        raise ValueError(f"one_hot: axis {axis} is out of bounds for an output of rank "
                         f"{x.ndim + 1}")
    out_axis %= x.ndim + 1
    lhs = lax.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(_dt.dtype_and_weak(x)[0], tuple(rhs_shape), out_axis)
    return (lhs == rhs).astype(dtype)


# ------------------------------------------------------------------ attention

def _large_negative(dtype):
    big = min(float(np.finfo(dtype).max), float(np.finfo(np.float32).max))
    return -0.7 * big


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None):
    """softmax(Q K^T * scale + bias, masked) V over shapes (B, T, N, H) for the
    query and (B, S, K, H) for key and value (the batch may be left out);
    N must be a multiple of K (grouped-query attention). bias and mask (bool,
    True keeps) broadcast to (B, N, T, S); is_causal keeps key s <= query t;
    the sequence lengths mask padding; local_window_size (left, right) keeps
    t - left <= s <= t + right. Logits and softmax are float32 (at least).
    Only the reference ('xla') implementation exists."""
    if implementation not in (None, "xla"):
        if implementation == "cudnn":
            raise NotImplementedError("dot_product_attention: implementation='cudnn' is not "
                                      "available in olympus; use None or 'xla'")
        raise ValueError(f"Unsupported implementation option: {implementation}")
    out_shape = _shape(query)

    def four_d(t):
        t = _array(t)
        return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t
    q, k, v = four_d(query), four_d(key), four_d(value)
    B, S, K, H = k.shape
    if tuple(v.shape) != (B, S, K, H) or v.dtype != k.dtype:
        raise ValueError(f"value shape should be {(B, S, K, H)} and dtype {k.dtype}: but got "
                         f"{tuple(v.shape)} {v.dtype}")
    if q.shape[0] != B or q.shape[3] != H or q.dtype != k.dtype:
        raise ValueError(f"query shape should be {(B, -1, -1, H)} and dtype {k.dtype}: but "
                         f"got {tuple(q.shape)} {q.dtype}")
    T, N = q.shape[1], q.shape[2]
    if N % K:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    logits_dt = np.promote_types(q.dtype, np.float32)
    qg = jnp.reshape(q, (B, T, K, G, H))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", qg, k, preferred_element_type=logits_dt)
    logits = logits * np.asarray(scale, logits_dt)

    def grouped(t):   # (B or 1, N or 1, T or 1, S or 1) -> (B, K, G, T, S) broadcastable
        t = four_d(t)
        tb, tn, tt, ts = t.shape
        if tn == 1:
            return jnp.reshape(t, (tb, 1, 1, tt, ts))
        if tn != N:
            raise ValueError(f"dot_product_attention: bias/mask head dimension must be 1 or "
                             f"{N}, got {tn}")
        return jnp.reshape(t, (tb, K, G, tt, ts))
    if bias is not None:
        logits = (logits + grouped(bias)).astype(logits_dt)
    keep = None

    def both(a, b):
        return b if a is None else jnp.logical_and(a, b)
    if mask is not None:
        m = _array(mask)
        if m.dtype != np.bool_:
            raise ValueError(f"mask dtype should be bool, but got {m.dtype}")
        keep = grouped(m)
    t_pos = lax.broadcasted_iota(np.int32, (T, S), 0)
    s_pos = lax.broadcasted_iota(np.int32, (T, S), 1)
    if is_causal:
        keep = both(keep, s_pos <= t_pos)
    if local_window_size is not None:
        if isinstance(local_window_size, int):
            local_window_size = (local_window_size, local_window_size)
        left, right = local_window_size
        keep = both(keep, (t_pos <= s_pos + left) & (t_pos >= s_pos - right))
    if query_seq_lengths is not None:
        ql = jnp.asarray(query_seq_lengths)
        keep = both(keep, jnp.reshape(jnp.arange(T), (1, 1, 1, T, 1)) <
                    jnp.reshape(ql, (B, 1, 1, 1, 1)))
    if key_value_seq_lengths is not None:
        kl = jnp.asarray(key_value_seq_lengths)
        keep = both(keep, jnp.reshape(jnp.arange(S), (1, 1, 1, 1, S)) <
                    jnp.reshape(kl, (B, 1, 1, 1, 1)))
    if keep is not None:
        logits = jnp.where(keep, logits, _large_negative(logits_dt))
    probs = softmax(logits.astype(np.float32), axis=-1).astype(k.dtype)
    out = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    out = jnp.reshape(out, (B, T, N, H))
    if query_seq_lengths is not None:
        q_keep = jnp.reshape(jnp.arange(T), (1, T, 1, 1)) < jnp.reshape(ql, (B, 1, 1, 1))
        out = out * q_keep.astype(out.dtype)
    return jnp.reshape(out, out_shape)

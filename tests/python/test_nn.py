"""olympus.nn: activations against NumPy/SciPy formulas (float32 and float64),
the derivatives JAX fixes by hand (relu at 0, softmax's stable JVP), masks,
logsumexp against scipy.special, one_hot, standardize, dot_product_attention
against a NumPy reference; nn.initializers on olympus.random: JAX's published
values, shapes, dtypes, determinism per key, the variance of every
variance_scaling mode and distribution against its formula (fixed keys, so the
statistical bounds are deterministic), orthogonality and JAX's QR algorithm."""
import numpy as np
import pytest
import scipy.special as sp

import olympus
import olympus.numpy as jnp
from olympus import nn, random
from olympus.nn import initializers as init
from olympus.test_util import check_grads

TOL = {np.dtype(np.float32): dict(rtol=2e-6, atol=1e-6),
       np.dtype(np.float64): dict(rtol=1e-13, atol=1e-15)}

X = np.array([-30.0, -6.0, -2.5, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.5, 6.0, 30.0])


def _close(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == dtype, (got.dtype, dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, **TOL[np.dtype(dtype)])


def _sigmoid(x):
    return sp.expit(x)


def _softplus(x):
    return np.logaddexp(x, 0)


SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

REFERENCES = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0)),
    ("relu6", nn.relu6, lambda x: np.clip(x, 0, 6)),
    ("sigmoid", nn.sigmoid, _sigmoid),
    ("softplus", nn.softplus, _softplus),
    ("log_sigmoid", nn.log_sigmoid, lambda x: -_softplus(-x)),
    ("soft_sign", nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    ("silu", nn.silu, lambda x: x * _sigmoid(x)),
    ("swish", nn.swish, lambda x: x * _sigmoid(x)),
    ("gelu_tanh", nn.gelu,
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ("gelu_exact", lambda x: nn.gelu(x, approximate=False), lambda x: x * sp.ndtr(x)),
    ("elu", nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    ("elu_alpha", lambda x: nn.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    ("celu", lambda x: nn.celu(x, 2.0),
     lambda x: np.maximum(x, 0) + 2.0 * np.expm1(np.minimum(x, 0) / 2.0)),
    ("selu", nn.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    ("leaky_relu", nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("hard_tanh", nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    ("hard_sigmoid", nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_silu", nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hard_swish", nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("sparse_plus", nn.sparse_plus,
     lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    ("sparse_sigmoid", nn.sparse_sigmoid, lambda x: np.clip((x + 1) / 2, 0, 1)),
    ("squareplus", nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    ("mish", nn.mish, lambda x: x * np.tanh(_softplus(x))),
    ("tanh", nn.tanh, np.tanh),
    ("identity", nn.identity, lambda x: x),
]


@pytest.mark.parametrize("name,f,ref", REFERENCES, ids=[r[0] for r in REFERENCES])
def test_activation_values(name, f, ref, x64):
    dtype = np.dtype(np.float64 if x64 else np.float32)
    x = X.astype(dtype)
    _close(f(x), ref(x.astype(np.float64)), dtype)
    _close(olympus.jit(f)(x), ref(x.astype(np.float64)), dtype)


def test_log1mexp():
    olympus.config.update("olympus_enable_x64", True)
    x = np.array([1e-20, 1e-5, 0.3, np.log(2), 1.0, 5.0, 40.0])
    with np.errstate(divide="ignore"):
        want = np.where(x < np.log(2), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))
    np.testing.assert_allclose(nn.log1mexp(x), want, rtol=1e-14)
    np.testing.assert_allclose(olympus.grad(nn.log1mexp)(1.5), 1 / np.expm1(1.5), rtol=1e-14)


def test_ints_compute_in_the_default_float():
    for f in (nn.sigmoid, nn.gelu, nn.softplus, nn.elu, nn.silu, nn.softmax, nn.log_softmax):
        assert f(jnp.arange(3)).dtype == np.float32
    assert nn.relu(jnp.arange(-2, 2)).dtype == np.int32   # relu keeps ints (max with 0)
    np.testing.assert_array_equal(nn.relu(jnp.arange(-2, 2)), [0, 0, 0, 1])
    assert nn.sigmoid(jnp.ones(2, jnp.float16)).dtype == np.float16


@pytest.mark.parametrize("name,f", [(n, f) for n, f, _ in REFERENCES
                                    if n not in ("identity",)])
def test_activation_grads(name, f):
    olympus.config.update("olympus_enable_x64", True)
    # points away from every kink (0, +-1, -3, 3, 6)
    x = np.array([-4.5, -2.2, -0.7, 0.3, 0.8, 1.7, 4.2, 7.5])
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    g = olympus.vmap(olympus.grad(f))(x)
    h = 1e-6
    fd = (np.asarray(f(x + h)) - np.asarray(f(x - h))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_hand_fixed_derivatives_at_kinks():
    g = olympus.grad
    assert float(g(nn.relu)(0.0)) == 0.0 and float(g(nn.relu)(1e-30)) == 1.0
    assert float(g(nn.relu6)(0.0)) == 0.0 and float(g(nn.relu6)(6.0)) == 0.0
    assert float(g(nn.relu6)(5.9)) == 1.0
    assert float(g(nn.softplus)(0.0)) == 0.5
    assert float(g(nn.softplus)(1000.0)) == 1.0 and float(g(nn.softplus)(-1000.0)) == 0.0
    assert float(g(nn.log_sigmoid)(-1000.0)) == 1.0
    assert float(g(nn.sigmoid)(-1000.0)) == 0.0
    assert np.isfinite(float(g(nn.silu)(-1000.0)))


# ------------------------------------------------------------------ softmax family

def test_softmax_values_axes_and_jit(x64):
    dtype = np.dtype(np.float64 if x64 else np.float32)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 5)) * 5).astype(dtype)
    for axis in (-1, 0, 1, (0, 2), None):
        want = sp.softmax(x.astype(np.float64), axis=axis)
        _close(nn.softmax(x, axis=axis), want, dtype)
        _close(nn.log_softmax(x, axis=axis), sp.log_softmax(x.astype(np.float64), axis=axis),
               dtype)
    _close(olympus.jit(nn.softmax, static_argnums=1)(x, 1), sp.softmax(x, axis=1), dtype)
    _close(olympus.vmap(nn.softmax)(x), sp.softmax(x.astype(np.float64), axis=-1), dtype)


def test_softmax_is_stable_at_large_logits():
    x = jnp.array([1000.0, 0.0, -1000.0])
    np.testing.assert_allclose(nn.softmax(x), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(nn.log_softmax(x), [0.0, -1000.0, -2000.0])
    for f in (nn.softmax, nn.log_softmax):
        jac = olympus.jacrev(f)(x)
        assert np.all(np.isfinite(jac))
    # d softmax_0 / dx = y0 (e0 - y): zero at a saturated softmax
    np.testing.assert_allclose(olympus.grad(lambda v: nn.softmax(v)[0])(x), [0, 0, 0],
                               atol=1e-30)
    np.testing.assert_allclose(olympus.grad(lambda v: nn.log_softmax(v)[1])(x), [-1, 1, 0],
                               atol=1e-30)


def test_softmax_grads():
    olympus.config.update("olympus_enable_x64", True)
    x = np.random.default_rng(1).standard_normal((2, 5))
    check_grads(lambda v: nn.softmax(v, axis=-1), (x,), order=2)
    check_grads(lambda v: nn.log_softmax(v, axis=0), (x,), order=2)
    check_grads(lambda v: nn.logsumexp(v, axis=1), (x,), order=2)
    w = np.array([[True, False, True, True, False], [True] * 5])
    check_grads(lambda v: nn.softmax(v, where=w), (x,), order=1)


def test_where_masks():
    x = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 8.0]], np.float32)
    w = np.array([[True, False, True, False], [False, True, True, True]])
    got = np.asarray(nn.softmax(x, where=w))
    want = np.where(w, np.exp(np.where(w, x.astype(np.float64), -np.inf)), 0)
    want = want / want.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = np.asarray(nn.log_softmax(x, where=w))
    np.testing.assert_allclose(got[w], np.log(want[w]), rtol=1e-6, atol=1e-6)
    assert np.all(got[~w] == -np.inf)
    g = olympus.grad(lambda v: nn.softmax(v, where=w)[0, 0])(x)
    assert np.all(np.asarray(g)[~w] == 0)
    np.testing.assert_allclose(nn.logsumexp(x, axis=1, where=w),
                               sp.logsumexp(np.where(w, x, -np.inf), axis=1), rtol=1e-6)
    np.testing.assert_allclose(nn.logmeanexp(x, axis=1, where=w),
                               sp.logsumexp(np.where(w, x, -np.inf), axis=1) - np.log([2, 3]),
                               rtol=1e-6)
    assert float(nn.logsumexp(x, where=np.zeros_like(w))) == -np.inf


def test_logsumexp_against_scipy(x64):
    dtype = np.dtype(np.float64 if x64 else np.float32)
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((3, 4)) * 30).astype(dtype)
    b = rng.standard_normal((3, 4)).astype(dtype)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            _close(nn.logsumexp(a, axis=axis, keepdims=keepdims),
                   sp.logsumexp(a64, axis=axis, keepdims=keepdims), dtype)
            out, sign = nn.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
            want, want_sign = sp.logsumexp(a64, axis=axis, b=b64, keepdims=keepdims,
                                           return_sign=True)
            _close(out, want, dtype)
            _close(sign, want_sign, dtype)
    with np.errstate(invalid="ignore"):
        want = sp.logsumexp(a64, axis=1, b=b64)
    got = np.asarray(nn.logsumexp(a, axis=1, b=b))
    assert np.array_equal(np.isnan(got), np.isnan(want))   # negative sums are nan
    assert float(nn.logsumexp(jnp.array([-np.inf, -np.inf]))) == -np.inf
    assert float(nn.logsumexp(jnp.array([np.inf, 1.0]))) == np.inf
    assert float(nn.logsumexp(jnp.array([1.0, 2.0]), b=jnp.array([0.0, 0.0]))) == -np.inf
    assert nn.logsumexp(jnp.arange(3)).dtype == dtype


def test_one_hot():
    x = jnp.array([0, 2, -1, 3])
    got = nn.one_hot(x, 3)
    assert got.dtype == np.float32 and got.shape == (4, 3)
    np.testing.assert_array_equal(got, np.eye(3)[[0, 2]].tolist() + [[0, 0, 0]] * 2)
    assert nn.one_hot(x, 3, dtype=jnp.int8).dtype == np.int8
    np.testing.assert_array_equal(nn.one_hot(x, 3, axis=0), np.asarray(got).T)
    m = jnp.array([[1, 0], [2, 1]])
    np.testing.assert_array_equal(nn.one_hot(m, 3, axis=1),
                                  np.moveaxis(np.eye(3)[np.asarray(m)], -1, 1))
    np.testing.assert_array_equal(olympus.jit(lambda v: nn.one_hot(v, 4))(x),
                                  nn.one_hot(x, 4))
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="num_classes"):
        olympus.jit(lambda v, n: nn.one_hot(v, n))(x, 3)
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        nn.one_hot(x, 3, axis=3)


def test_standardize(x64):
    dtype = np.dtype(np.float64 if x64 else np.float32)
    x = np.random.default_rng(3).standard_normal((4, 6)).astype(dtype) * 3 + 1
    x64v = x.astype(np.float64)
    want = (x64v - x64v.mean(-1, keepdims=True)) / np.sqrt(x64v.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.standardize(x), want, rtol=1e-4 if not x64 else 1e-10)
    want0 = (x64v - x64v.mean(0)) / np.sqrt(x64v.var(0) + 1e-5)
    np.testing.assert_allclose(nn.standardize(x, axis=0), want0, rtol=1e-4 if not x64 else 1e-10)
    np.testing.assert_allclose(nn.standardize(x, axis=0, algorithm="stable"), want0,
                               rtol=1e-4 if not x64 else 1e-10)
    with pytest.raises(ValueError, match="Unknown algorithm 'exact'"):
        nn.standardize(x, algorithm="exact")
    np.testing.assert_allclose(nn.standardize(x, mean=1.0, variance=4.0, epsilon=0.0),
                               (x64v - 1) / 2, rtol=1e-6)
    w = np.arange(6) % 2 == 0
    sel = x64v[:, w]
    want_w = (x64v - sel.mean(-1, keepdims=True)) / np.sqrt(sel.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.standardize(x, where=np.broadcast_to(w, x.shape)), want_w,
                               rtol=1e-4 if not x64 else 1e-10)


def test_glu():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4) / 4 - 1
    np.testing.assert_allclose(nn.glu(x), x[:, :2] * sp.expit(x[:, 2:]), rtol=1e-6)
    np.testing.assert_allclose(nn.glu(x.T, axis=0), (x[:, :2] * sp.expit(x[:, 2:])).T, rtol=1e-6)
    with pytest.raises(ValueError, match="divisible by 2"):
        nn.glu(x, axis=0)


# ------------------------------------------------------------------ attention

def _attention_reference(q, k, v, bias=None, mask=None, causal=False, q_len=None, kv_len=None,
                         window=None, scale=None):
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    rep = N // K
    k, v = np.repeat(k, rep, axis=2), np.repeat(v, rep, axis=2)
    scale = 1 / np.sqrt(H) if scale is None else scale
    logits = np.einsum("btnh,bsnh->bnts", q, k).astype(np.float64) * scale
    if bias is not None:
        logits = logits + bias
    keep = np.ones(logits.shape, bool)
    if mask is not None:
        keep &= mask
    t, s = np.arange(T)[:, None], np.arange(S)[None, :]
    if causal:
        keep &= s <= t
    if window is not None:
        keep &= (t - window[0] <= s) & (s <= t + window[1])
    if q_len is not None:
        keep &= (np.arange(T)[None, None, :, None] < q_len[:, None, None, None])
    if kv_len is not None:
        keep &= (np.arange(S)[None, None, None, :] < kv_len[:, None, None, None])
    logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
    p = sp.softmax(logits, axis=-1)
    out = np.einsum("bnts,bsnh->btnh", p, v)
    if q_len is not None:
        out = out * (np.arange(T)[None, :, None, None] < q_len[:, None, None, None])
    return out


def test_dot_product_attention_against_numpy():
    rng = np.random.default_rng(4)
    B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
    q = rng.standard_normal((B, T, N, H)).astype(np.float32)
    k = rng.standard_normal((B, S, K, H)).astype(np.float32)
    v = rng.standard_normal((B, S, K, H)).astype(np.float32)
    bias = rng.standard_normal((1, N, T, S)).astype(np.float32)
    mask = rng.uniform(size=(B, 1, T, S)) > 0.3
    mask[..., 0] = True
    q_len, kv_len = np.array([5, 3], np.int32), np.array([4, 6], np.int32)
    cases = [
        ({}, {}),
        (dict(bias=bias), dict(bias=bias)),
        (dict(mask=mask), dict(mask=mask)),
        (dict(is_causal=True), dict(causal=True)),
        (dict(local_window_size=(1, 0)), dict(window=(1, 0))),
        (dict(local_window_size=1), dict(window=(1, 1))),
        (dict(query_seq_lengths=q_len, key_value_seq_lengths=kv_len),
         dict(q_len=q_len, kv_len=kv_len)),
        (dict(scale=0.5, is_causal=True, bias=bias), dict(scale=0.5, causal=True, bias=bias)),
    ]
    for ours, ref in cases:
        got = nn.dot_product_attention(q, k, v, **ours)
        assert got.shape == q.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, _attention_reference(q, k, v, **ref), rtol=2e-5,
                                   atol=2e-6, err_msg=str(list(ours)))
    got3 = nn.dot_product_attention(q[0], k[0], v[0])   # no batch axis
    np.testing.assert_allclose(got3, _attention_reference(q[:1], k[:1], v[:1])[0], rtol=2e-5,
                               atol=2e-6)
    jitted = olympus.jit(lambda a, b, c: nn.dot_product_attention(a, b, c, is_causal=True))
    np.testing.assert_allclose(jitted(q, k, v), _attention_reference(q, k, v, causal=True),
                               rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(NotImplementedError, match="cudnn"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")


# ------------------------------------------------------------------ initializers

KEY = random.PRNGKey(42)

# JAX's published values: jax.nn.initializers' docstring examples, each
# initializer(jax.random.key(42), (2, 3), jnp.float32) (key(42) holds the bits
# of PRNGKey(42)). The float32 QR rounds differently from XLA's in the last places.
JAX_VALUES = [
    ("uniform", init.uniform(10.0), [[7.298188, 8.691938, 8.7230015],
                                     [2.0818567, 1.8662417, 5.5022564]]),
    ("normal", init.normal(5.0), [[3.0613258, 5.6129413, 5.6866574],
                                  [-4.063663, -4.4520254, 0.63115686]]),
    ("truncated_normal", init.truncated_normal(5.0), [[2.9047365, 5.2338114, 5.29852],
                                                      [-3.836303, -4.192359, 0.6022964]]),
    ("glorot_uniform", init.glorot_uniform(), [[0.50350785, 0.8088631, 0.81566876],
                                               [-0.6393332, -0.6865721, 0.11003882]]),
    ("glorot_normal", init.glorot_normal(), [[0.41770416, 0.75262755, 0.7619329],
                                             [-0.5516644, -0.6028657, 0.08661086]]),
    ("lecun_uniform", init.lecun_uniform(), [[0.56293887, 0.90433645, 0.9119454],
                                             [-0.71479625, -0.7676109, 0.12302713]]),
    ("lecun_normal", init.lecun_normal(), [[0.46700746, 0.8414632, 0.8518669],
                                           [-0.61677957, -0.67402434, 0.09683388]]),
    ("he_uniform", init.he_uniform(), [[0.79611576, 1.2789248, 1.2896855],
                                       [-1.0108745, -1.0855657, 0.17398663]]),
    ("he_normal", init.he_normal(), [[0.6604483, 1.1900088, 1.2047218],
                                     [-0.87225807, -0.95321447, 0.1369438]]),
    ("orthogonal", init.orthogonal(), [[3.9026976e-01, 7.2495741e-01, -5.6756169e-01],
                                       [8.8047469e-01, -4.7409311e-01, -1.3157725e-04]]),
]


@pytest.mark.parametrize("name,make,want", JAX_VALUES, ids=[v[0] for v in JAX_VALUES])
def test_initializers_match_jax_published_values(name, make, want):
    got = make(KEY, (2, 3), jnp.float32)
    assert got.shape == (2, 3) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_delta_orthogonal_matches_jax_published_value():
    w = np.array(init.delta_orthogonal()(KEY, (3, 3, 3), jnp.float32))
    want = [[0.27858758, -0.7949833, -0.53887904], [0.9120717, 0.04322892, 0.40774566],
            [-0.30085585, -0.6050892, 0.73712474]]
    np.testing.assert_allclose(w[1], want, rtol=2e-6, atol=1e-6)
    w[1] = 0
    assert not np.any(w)


def test_constant_initializers():
    z = init.zeros(KEY, (2, 3))
    assert z.shape == (2, 3) and z.dtype == np.float32 and not np.any(np.asarray(z))
    o = init.ones(KEY, (4,), jnp.float16)
    assert o.dtype == np.float16 and np.all(np.asarray(o) == 1)
    c = init.constant(-7.0, jnp.int32)(KEY, (2, 2))
    assert c.dtype == np.int32 and np.all(np.asarray(c) == -7)
    assert init.constant(2.5)(KEY, (1,), jnp.float64).dtype == np.float32   # x64 off
    assert isinstance(init.zeros, init.Initializer)
    assert isinstance(init.glorot_uniform(), init.Initializer)


RANDOM_INITS = [
    ("uniform", init.uniform()), ("normal", init.normal()),
    ("truncated_normal", init.truncated_normal()), ("glorot_uniform", init.glorot_uniform()),
    ("glorot_normal", init.glorot_normal()), ("lecun_uniform", init.lecun_uniform()),
    ("lecun_normal", init.lecun_normal()), ("he_uniform", init.he_uniform()),
    ("he_normal", init.he_normal()), ("orthogonal", init.orthogonal()),
    ("variance_scaling", init.variance_scaling(0.5, "fan_geo_avg", "normal")),
]


@pytest.mark.parametrize("name,make", RANDOM_INITS, ids=[r[0] for r in RANDOM_INITS])
def test_random_initializers_shapes_dtypes_and_determinism(name, make, x64):
    shape = (4, 6)
    default = np.float64 if x64 else np.float32
    out = make(KEY, shape)
    assert out.shape == shape and out.dtype == default
    assert make(KEY, [4, 6], jnp.float32).dtype == np.float32
    assert make(KEY, (3, 2, 5)).shape == (3, 2, 5)
    assert make(KEY, shape, jnp.float64).dtype == default   # canonicalised by x64
    # the same key gives the same values, eagerly and under jit; another key does not
    np.testing.assert_array_equal(make(KEY, shape), out)
    np.testing.assert_array_equal(olympus.jit(lambda k: make(k, shape))(KEY), out)
    other = np.asarray(make(random.PRNGKey(43), shape))
    assert not np.allclose(other, np.asarray(out))
    k1, k2 = random.split(KEY)
    assert not np.allclose(make(k1, shape), make(k2, shape))
    typed = make(random.key(42), shape)              # a typed key holds the same bits
    np.testing.assert_array_equal(typed, out)


def test_float16_and_complex_dtypes():
    for make in (init.normal(), init.uniform(), init.glorot_normal(), init.he_uniform()):
        assert make(KEY, (3, 4), jnp.float16).dtype == np.float16
    for dist in ("normal", "uniform", "truncated_normal"):
        out = init.variance_scaling(1.0, "fan_in", dist, dtype=jnp.complex64)(KEY, (4, 2))
        assert out.dtype == np.complex64 and out.shape == (4, 2)
        assert np.all(np.imag(np.asarray(out)) != 0)


# Draws of shape (5, 5, 40, 60): a conv kernel, receptive field 25, fan_in 1000,
# fan_out 1500, 60000 values: the sample variance's relative standard error is
# sqrt((kurtosis - 1) / n) <= 0.6%; the bound below is five of them.
VS_SHAPE = (5, 5, 40, 60)
VS_FANS = {"fan_in": 1000.0, "fan_out": 1500.0, "fan_avg": 1250.0,
           "fan_geo_avg": np.sqrt(1000.0 * 1500.0)}


@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "uniform"])
@pytest.mark.parametrize("mode", sorted(VS_FANS))
def test_variance_scaling_variance_matches_its_formula(mode, distribution):
    scale = 2.0
    var = scale / VS_FANS[mode]
    x = init.variance_scaling(scale, mode, distribution)(KEY, VS_SHAPE)
    assert x.shape == VS_SHAPE and x.dtype == np.float32
    x = np.asarray(x, np.float64)
    n = x.size
    kurtosis = {"truncated_normal": 2.36, "normal": 3.0, "uniform": 1.8}[distribution]
    assert abs(x.mean()) < 5 * np.sqrt(var / n)
    assert abs(x.var() / var - 1) < 5 * np.sqrt((kurtosis - 1) / n), x.var() / var
    bound = {"truncated_normal": 2 * np.sqrt(var) / 0.87962566103423978,
             "normal": np.inf, "uniform": np.sqrt(3 * var)}[distribution]
    assert np.abs(x).max() <= bound * (1 + 1e-6)
    if distribution != "normal":   # the support is filled up to the bound
        assert np.abs(x).max() > 0.99 * bound


@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "uniform"])
def test_complex_variance_scaling_variance(distribution):
    """E|x|^2 = scale / fan; the modulus is bounded by 2 sqrt(var) / 0.9531...
    (truncated) or sqrt(2 var) (uniform on the disk)."""
    var = 1.0 / 200
    x = np.asarray(init.variance_scaling(1.0, "fan_in", distribution, dtype=jnp.complex64)(
        KEY, (200, 300)), np.complex128)
    m2 = np.mean(np.abs(x) ** 2)
    assert abs(m2 / var - 1) < 0.02, m2 / var
    assert abs(x.mean()) < 5 * np.sqrt(var / x.size)
    bound = {"truncated_normal": 2 * np.sqrt(var) / 0.95311164380491208, "normal": np.inf,
             "uniform": np.sqrt(2 * var)}[distribution]
    assert np.abs(x).max() <= bound * (1 + 1e-5)


@pytest.mark.parametrize("shape,kw,fans", [
    ((3, 5), {}, (3, 5)),                                    # dense: in x out
    ((3, 3, 4, 8), {}, (36, 72)),                            # conv HWIO: receptive field 9
    ((2, 7, 4), dict(in_axis=1, out_axis=2, batch_axis=0), (7, 4)),
    ((5, 6, 2), dict(in_axis=(0, 1), out_axis=-1), (30, 2)),
    ((10,), dict(in_axis=0, out_axis=0), (1, 1)),            # in and out: the same axis
])
@pytest.mark.parametrize("mode", sorted(VS_FANS))
def test_variance_scaling_fans(shape, kw, fans, mode):
    """The draws are the olympus.random sampler's, scaled by the fan formula."""
    fan_in, fan_out = fans
    denom = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": np.sqrt(fan_in * fan_out)}[mode]
    var = 2.0 / denom
    got = init.variance_scaling(2.0, mode, "normal", **kw)(KEY, shape)
    np.testing.assert_allclose(got, np.asarray(random.normal(KEY, shape)) * np.sqrt(var),
                               rtol=1e-6)
    got = init.variance_scaling(2.0, mode, "truncated_normal", **kw)(KEY, shape)
    want = np.asarray(random.truncated_normal(KEY, -2, 2, shape)) * np.sqrt(var) / 0.87962566
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = init.variance_scaling(2.0, mode, "uniform", **kw)(KEY, shape)
    want = np.asarray(random.uniform(KEY, shape, minval=-1.0)) * np.sqrt(3 * var)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_variance_scaling_errors():
    with pytest.raises(ValueError, match="invalid mode"):
        init.variance_scaling(1.0, "fan_sideways", "normal")
    with pytest.raises(ValueError, match="invalid distribution"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="Must be at least 2D"):
        init.glorot_normal()(KEY, (5,))


@pytest.mark.parametrize("shape,column_axis", [
    ((5, 3), -1), ((3, 5), -1), ((4, 4), -1), ((2, 3, 6), -1), ((6, 2, 3), 0)])
def test_orthogonal(shape, column_axis):
    olympus.config.update("olympus_enable_x64", True)
    q = np.asarray(init.orthogonal(scale=2.0, column_axis=column_axis)(KEY, shape)) / 2
    assert q.shape == shape and q.dtype == np.float64
    cols = shape[column_axis]
    m = np.moveaxis(q, column_axis, -1).reshape(-1, cols)
    if m.shape[0] >= m.shape[1]:
        np.testing.assert_allclose(m.T @ m, np.eye(cols), atol=1e-13)
    else:
        np.testing.assert_allclose(m @ m.T, np.eye(m.shape[0]), atol=1e-13)
    # JAX's algorithm: NumPy's QR of the same normal draw, R's diagonal made positive
    n_rows = int(np.prod(shape)) // cols
    draw_shape = (cols, n_rows) if n_rows < cols else (n_rows, cols)
    qr_q, qr_r = np.linalg.qr(np.asarray(random.normal(KEY, draw_shape)))
    qr_q = qr_q * np.sign(np.diag(qr_r))
    if n_rows < cols:
        qr_q = qr_q.T
    np.testing.assert_allclose(m, qr_q, atol=1e-13)


def test_orthogonal_float32_complex_jit_and_errors():
    m = np.asarray(olympus.jit(lambda k: init.orthogonal()(k, (6, 4)))(KEY))
    assert m.dtype == np.float32
    np.testing.assert_allclose(m.T @ m, np.eye(4), atol=1e-5)
    np.testing.assert_array_equal(m, init.orthogonal()(KEY, (6, 4)))
    u = np.asarray(init.orthogonal(dtype=jnp.complex64)(KEY, (5, 3)))
    assert u.dtype == np.complex64
    np.testing.assert_allclose(u.conj().T @ u, np.eye(3), atol=1e-5)
    with pytest.raises(ValueError, match="at least a 2D shape"):
        init.orthogonal()(KEY, (3,))
    assert init.orthogonal()(KEY, (0, 3)).shape == (0, 3)


def test_orthogonal_is_haar_distributed():
    """Without the sign correction Q's diagonal would lean towards R's signs
    (LAPACK's Householder QR makes R's diagonal negative): with it, the mean of
    every entry of many draws is 0 (and its variance 1 / n)."""
    n = 3
    keys = random.split(random.PRNGKey(7), 400)
    qs = np.stack([np.asarray(init.orthogonal()(k, (n, n)), np.float64) for k in keys])
    assert np.all(np.abs(qs.mean(0)) < 5 * np.sqrt(1 / n / len(qs)))
    np.testing.assert_allclose(qs.var(0), 1 / n, rtol=0.25)


def test_delta_orthogonal():
    w = np.array(init.delta_orthogonal()(KEY, (3, 3, 4, 4)))
    centre = w[1, 1]
    np.testing.assert_allclose(centre.T @ centre, np.eye(4), atol=1e-5)
    np.testing.assert_allclose(centre, init.orthogonal()(KEY, (4, 4)), atol=1e-7)
    w[1, 1] = 0
    assert not np.any(w)
    w5 = np.array(init.delta_orthogonal(scale=3.0)(KEY, (2, 3, 4, 2, 5)))
    np.testing.assert_allclose(w5[0, 1, 1], init.orthogonal(3.0)(KEY, (2, 5)), atol=1e-6)
    assert init.delta_orthogonal()(KEY, (5, 2, 3)).shape == (5, 2, 3)
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(KEY, (2, 2))
    with pytest.raises(ValueError, match="fan_in"):
        init.delta_orthogonal()(KEY, (3, 4, 2))

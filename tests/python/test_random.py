"""olympus.random: the threefry2x32 hash against Random123's known answers, the
values JAX publishes for its keys and samplers (the same bits key for key),
seeding, typed keys, shapes and dtypes with x64 off and on, distribution
moments within statistical tolerance (fixed keys), jit == eager, vmap over
keys == a loop, gradients of the reparameterised samplers, and the errors."""
import zlib

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus import random
from olympus.extend import random as xrandom

# ------------------------------------------------------------------ threefry

# Random123's kat_vectors for threefry2x32_20: (key, counter) -> output
KATS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
    ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
    ((0x13198a2e, 0x03707344), (0x243f6a88, 0x85a308d3), (0xc4923a9c, 0x483df7a0)),
]


@pytest.mark.parametrize("key,ctr,want", KATS)
def test_threefry_known_answers(key, ctr, want):
    u = np.uint32
    got = xrandom.threefry_2x32(np.array(key, np.uint32), np.array(ctr, np.uint32))
    assert [hex(int(v)) for v in np.asarray(got)] == [hex(w) for w in want]
    y0, y1 = lax.threefry2x32(u(key[0]), u(key[1]), u(ctr[0]), u(ctr[1]))
    assert (int(y0), int(y1)) == want
    y0, y1 = xrandom.threefry2x32_p.bind(u(key[0]), u(key[1]), u(ctr[0]), u(ctr[1]))
    assert (int(y0), int(y1)) == want


@pytest.mark.parametrize("n", [1, 33, 1000])
def test_threefry_known_answer_broadcast(n):
    """A block of n equal counter pairs (JAX's large-input KAT), jitted too."""
    key, ctr, want = KATS[2]
    count = jnp.concatenate([jnp.full((n,), ctr[0], jnp.uint32),
                             jnp.full((n,), ctr[1], jnp.uint32)])
    k = (np.uint32(key[0]), np.uint32(key[1]))
    for f in (xrandom.threefry_2x32, olympus.jit(xrandom.threefry_2x32)):
        out = np.asarray(f(k, count))
        assert (out[:n] == want[0]).all() and (out[n:] == want[1]).all()


def test_threefry_odd_count_and_shape():
    """Odd counts are padded with a zero counter, as JAX: element i of an odd
    count equals that of the even count with a trailing 0."""
    key = np.array([7, 11], np.uint32)
    odd = xrandom.threefry_2x32(key, np.arange(5, dtype=np.uint32))
    x = np.arange(6, dtype=np.uint32).reshape(2, 3)
    assert xrandom.threefry_2x32(key, x).shape == (2, 3)
    # the padded pairs: (0, 3), (1, 4), (2, 0)
    y0, y1 = lax.threefry2x32(np.uint32(7), np.uint32(11), np.array([0, 1, 2], np.uint32),
                              np.array([3, 4, 0], np.uint32))
    assert list(np.asarray(odd)) == list(np.asarray(y0)) + list(np.asarray(y1))[:2]


def test_threefry_rejects_non_uint32():
    with pytest.raises(TypeError, match="uint32"):
        xrandom.threefry_2x32(np.array([1, 2], np.int32), np.arange(4, dtype=np.uint32))
    with pytest.raises(Exception, match="must be uint32"):
        lax.threefry2x32(np.int32(1), np.uint32(2), np.uint32(3), np.uint32(4))
    with pytest.raises(Exception, match="expected equal shapes"):
        lax.threefry2x32(np.uint32(1), np.uint32(2), np.zeros(3, np.uint32),
                         np.zeros(4, np.uint32))


def test_threefry_vmap_and_jvp():
    k = np.arange(8, dtype=np.uint32).reshape(4, 2)
    x = np.arange(12, dtype=np.uint32).reshape(4, 3)
    f = lambda kk, xx: lax.threefry2x32(kk[0], kk[1], xx, xx + np.uint32(1))
    got = olympus.vmap(f)(k, x)
    for i in range(4):
        want = f(k[i], x[i])
        assert (np.asarray(got[0][i]) == np.asarray(want[0])).all()
        assert (np.asarray(got[1][i]) == np.asarray(want[1])).all()
    # integer outputs: a float function through it has a zero derivative path
    g = lambda s: s * lax.convert_element_type(
        lax.threefry2x32(np.uint32(1), np.uint32(2), np.uint32(3), np.uint32(4))[0], jnp.float32)
    assert float(olympus.grad(g)(1.0)) == float(g(1.0))


# ------------------------------------------------------------------ seeding and keys

SEEDS = [  # (seed, type, key with x64 off, key with x64 on): JAX's test_prng_seeds_and_keys
    (0, int, [0, 0], [0, 0]),
    (1, np.int32, [0, 1], [0, 1]),
    (2, np.uint32, [0, 2], [0, 2]),
    (3, np.int64, [0, 3], [0, 3]),
    (-1, int, [0, 4294967295], [4294967295, 4294967295]),
    (-2, np.int32, [0, 4294967294], [0, 4294967294]),
    (-3, np.int64, [0, 4294967293], [4294967295, 4294967293]),
    (2**31 - 1 + 100, int, [0, 2147483747], [0, 2147483747]),
    (2**31 - 1 + 101, np.uint32, [0, 2147483748], [0, 2147483748]),
    (-2**31 - 100, int, [0, 2147483548], [4294967295, 2147483548]),
    (-2**31 - 101, np.int64, [0, 2147483547], [4294967295, 2147483547]),
]


@pytest.mark.parametrize("seed,typ,off,on", SEEDS)
@pytest.mark.parametrize("make_key", [random.PRNGKey, random.key])
def test_seeds_as_jax(x64, seed, typ, off, on, make_key):
    data = random.key_data(make_key(typ(seed)))
    assert data.dtype == np.uint32 and data.shape == (2,)
    assert list(np.asarray(data)) == (on if x64 else off)
    fits = x64 or typ is not int or -2**31 <= seed < 2**31
    if fits:  # under jit a Python int is a traced int32 (x64 off): out of range is an error
        jitted = random.key_data(olympus.jit(make_key)(typ(seed)))
        assert list(np.asarray(jitted)) == (on if x64 else off)
    else:
        with pytest.raises(OverflowError):
            olympus.jit(make_key)(typ(seed))


def test_seed_beyond_int64_and_bad_seeds():
    with pytest.raises(OverflowError):
        random.PRNGKey(2**64)
    with pytest.raises(TypeError, match="integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="scalar seed"):
        random.PRNGKey(np.arange(3))
    with pytest.raises(TypeError, match="given a PRNG key"):
        random.key(random.key(0))


def test_vmapped_seeding():
    keys = olympus.vmap(random.PRNGKey)(jnp.arange(3))
    assert np.asarray(keys).tolist() == [[0, 0], [0, 1], [0, 2]]
    with olympus.enable_x64():
        keys = olympus.vmap(random.PRNGKey)(jnp.array([-1, 2**40], jnp.int64))
        assert np.asarray(keys).tolist() == [[2**32 - 1, 2**32 - 1], [256, 0]]


def test_typed_keys():
    k = random.key(0)
    assert k.shape == () and k.ndim == 0 and str(k.dtype) == "key<fry>"
    assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    ks = random.split(k, 4)
    assert isinstance(ks, random.PRNGKeyArray) and ks.shape == (4,) and len(ks) == 4
    raw = random.split(random.PRNGKey(0), 4)
    assert (np.asarray(random.key_data(ks)) == np.asarray(raw)).all()
    assert (np.asarray(random.key_data(ks[1])) == np.asarray(raw[1])).all()
    assert [tuple(np.asarray(random.key_data(q))) for q in ks] == \
        [tuple(r) for r in np.asarray(raw)]
    back = random.wrap_key_data(random.key_data(ks))
    assert bool(jnp.all(back == ks)) and not bool(jnp.any(back != ks))
    assert (ks.reshape(2, 2)).shape == (2, 2) and ks.reshape(2, 2)[1, 0].shape == ()
    assert random.key_impl(k) == "threefry2x32"
    # typed keys pass through jit and vmap as pytrees; draws agree with raw keys
    a = olympus.jit(lambda q: random.uniform(q, (3,)))(ks[2])
    assert (np.asarray(a) == np.asarray(random.uniform(raw[2], (3,)))).all()
    b = olympus.vmap(lambda q: random.normal(q, (2,)))(ks)
    assert (np.asarray(b) == np.asarray(olympus.vmap(lambda q: random.normal(q, (2,)))(raw))).all()
    out = olympus.jit(lambda q: random.split(q))(k)
    assert isinstance(out, random.PRNGKeyArray) and out.shape == (2,)
    with pytest.raises(TypeError):
        np.asarray(k)


# ------------------------------------------------------------------ JAX's published values

def test_jax_documented_key_values():
    """PRNGKey(0), split, normal: the values of JAX's "Common Gotchas" notebook."""
    key = random.PRNGKey(0)
    assert np.asarray(key).tolist() == [0, 0]
    np.testing.assert_allclose(random.normal(key, shape=(1,)), [-0.20584226], rtol=1e-6)
    key, subkey = random.split(key)
    assert np.asarray(key).tolist() == [4146024105, 967050713]
    assert np.asarray(subkey).tolist() == [2718843009, 1272950319]
    np.testing.assert_allclose(random.normal(subkey, shape=(1,)), [-1.2515389], rtol=1e-6)
    key, subkey = random.split(key)
    assert np.asarray(key).tolist() == [2384771982, 3928867769]
    assert np.asarray(subkey).tolist() == [1278412471, 2182328957]
    np.testing.assert_allclose(random.normal(subkey, shape=(1,)), [-0.58665055], rtol=1e-6)
    key, *subkeys = random.split(key, 4)
    got = [float(random.normal(s, shape=(1,))[0]) for s in subkeys]
    np.testing.assert_allclose(got, [-0.37533438, 0.98645043, 0.14553197], rtol=1e-6)


@pytest.mark.parametrize("make_key", [random.PRNGKey, random.key])
def test_jax_prng_values(x64, make_key):
    """JAX's testPRNGValues: randint, split and fold_in of seed 0."""
    key = make_key(0)
    assert random.randint(key, (3, 3), 0, 8).dtype == (np.int64 if x64 else np.int32)
    if x64:
        assert np.asarray(random.randint(key, (3, 3), 0, 8, dtype="int64")).tolist() == \
            [[7, 2, 6], [2, 1, 0], [6, 7, 7]]
    assert np.asarray(random.randint(key, (3, 3), 0, 8, dtype="int32")).tolist() == \
        [[2, 1, 3], [6, 1, 5], [6, 3, 4]]
    assert np.asarray(random.key_data(random.split(key, 4))).tolist() == \
        [[2285895361, 1501764800], [1518642379, 4090693311], [433833334, 4221794875],
         [839183663, 3740430601]]
    assert np.asarray(random.key_data(random.fold_in(key, 4))).tolist() == \
        [2285895361, 433833334]


@pytest.mark.parametrize("make_key", [random.PRNGKey, random.key])
def test_jax_random_bits_values(x64, make_key):
    """JAX's testRngRandomBits (seed 1701), and the view property across widths."""
    key = make_key(1701)
    assert np.asarray(random.bits(key, (3,), "uint8")).tolist() == [216, 115, 43]
    assert np.asarray(random.bits(key, (3,), "uint16")).tolist() == [41682, 1300, 55017]
    assert np.asarray(random.bits(key, (3,), "uint32")).tolist() == [56197195, 4200222568,
                                                                      961309823]
    b64 = random.bits(key, (3,), "uint64")
    if x64:
        assert b64.dtype == np.uint64
        assert np.asarray(b64).tolist() == [3982329540505020460, 16822122385914693683,
                                            7882654074788531506]
    else:
        assert b64.dtype == np.uint32 and np.asarray(b64).tolist() == [56197195, 4200222568,
                                                                        961309823]
    views = [np.asarray(random.bits(key, (640 // w,), f"uint{w}")).view(np.uint32)
             for w in (8, 16, 32)]
    assert (views[0] == views[2]).all() and (views[1] == views[2]).all()


# JAX's _RANDOM_VALUES_CASES for threefry2x32 (tests/random_test.py), x64 off
VALUE_CASES = [
    ("bernoulli", (5,), None, {"p": 0.5}, [False, True, True, True, False], None),
    ("beta", (5,), np.float32, {"a": 0.8, "b": 0.9},
     [0.13259, 0.824893, 0.948363, 0.964155, 0.235448], None),
    ("bits", (5,), np.uint8, {}, [10, 158, 82, 54, 158], None),
    ("bits", (5,), np.uint16, {}, [6738, 38161, 50695, 57337, 61600], None),
    ("bits", (5,), np.uint32, {}, [1978747883, 4134381225, 3628107870, 689687174, 2788938207],
     None),
    ("cauchy", (5,), np.float32, {}, [-0.088416, -10.169713, 3.49677, -1.18056, 0.34556], 1e-5),
    ("dirichlet", (2,), np.float32, {"alpha": np.array([0.5, 0.6, 0.7], dtype="float32")},
     [[0.003128, 0.009694, 0.987178], [0.025938, 0.479091, 0.494971]], None),
    ("double_sided_maxwell", (5,), np.float32, {"loc": 1, "scale": 2},
     [-2.408914, -3.370437, 3.235352, -0.907734, -1.708732], None),
    ("exponential", (5,), np.float32, {}, [0.526067, 0.043046, 0.039932, 0.46427, 0.123886],
     None),
    ("gamma", (5,), np.float32, {"a": 0.8}, [0.824221, 1.724476, 0.502882, 5.386132, 0.685543],
     None),
    ("gumbel", (5,), np.float32, {}, [2.06701, 0.911726, 0.145736, 0.185427, -0.00711], None),
    ("laplace", (5,), np.float32, {}, [0.578939, -0.204902, 0.555733, 0.911053, -0.96456], None),
    ("loggamma", (5,), np.float32, {"a": 0.8},
     [0.240559, -3.575443, -0.450946, -2.161372, -2.943277], None),
    ("logistic", (5,), np.float32, {}, [0.19611, -1.709053, -0.274093, -0.208322, -1.675489],
     None),
    ("maxwell", (5,), np.float32, {}, [3.070779, 0.908479, 1.521317, 0.875551, 1.306137], None),
    ("multivariate_normal", (2,), np.float32, {"mean": np.ones((1, 3)), "cov": np.eye(3)},
     [[1.067826, 1.215599, 0.234166], [-0.237534, 1.32591, 1.413987]], None),
    ("normal", (5,), np.float32, {}, [-1.173234, -1.511662, 0.070593, -0.099764, 1.052845], None),
    ("pareto", (5,), np.float32, {"b": 0.5}, [2.751398, 1.281863, 87.85448, 1.254542, 2.824487],
     None),
    ("poisson", (5,), np.int32, {"lam": 5}, [7, 3, 6, 11, 6], None),
    ("rademacher", (5,), np.int32, {}, [-1, -1, -1, -1, 1], None),
    ("randint", (5,), np.int32, {"minval": 0, "maxval": 10}, [0, 5, 7, 7, 5], None),
    ("truncated_normal", (5,), np.float32, {"lower": 0, "upper": 2},
     [0.582807, 1.709771, 0.159513, 0.861376, 0.36148], None),
    ("uniform", (5,), np.float32, {}, [0.298671, 0.073213, 0.873356, 0.260549, 0.412797], None),
    ("weibull_min", (5,), np.float32, {"scale": 1, "concentration": 1},
     [1.605863, 0.841809, 0.224218, 0.4826, 0.027901], None),
]


@pytest.mark.parametrize("name,shape,dtype,params,expected,rtol", VALUE_CASES,
                         ids=[f"{c[0]}-{np.dtype(c[2]).name if c[2] else ''}" for c in VALUE_CASES])
def test_jax_distribution_values(name, shape, dtype, params, expected, rtol):
    key = random.PRNGKey(zlib.adler32((name + "threefry2x32").encode()))
    f = getattr(random, name)
    out = f(key, **params, shape=shape, dtype=dtype) if dtype else f(key, **params, shape=shape)
    expected = np.asarray(expected)
    if expected.dtype.kind in "biu":
        assert np.asarray(out).tolist() == expected.tolist()
    else:
        np.testing.assert_allclose(np.asarray(out), expected, rtol=rtol or 1e-5, atol=1e-6)


def test_jax_partitionable_values():
    """With the partitionable layout (JAX >= 0.5's default): the values of
    jax.experimental.random's doctests and JAX's split / fold_in symmetry."""
    f = lambda i: random.fold_in(random.key(0), i)
    assert np.asarray(random.key_data(f(0))).tolist() == [1797259609, 2579123966]
    assert np.asarray(random.key_data(f(1))).tolist() == [928981903, 3453687069]
    with random.threefry_partitionable(True):
        got = [float(random.uniform(random.fold_in(random.key(42), i), minval=0, maxval=1))
               for i in range(4)]
        np.testing.assert_allclose(got, [0.5302608, 0.72766423, 0.6672406, 0.3890121], rtol=1e-6)
        key = random.key(72)
        splits = random.key_data(random.split(key, 3))
        folds = [random.key_data(random.fold_in(key, i)) for i in range(3)]
        assert np.asarray(splits).tolist() == [np.asarray(x).tolist() for x in folds]
        b = random.bits(key, (7,), "uint8")
        assert b.dtype == np.uint8 and b.shape == (7,)
    # outside the block the classic layout is back
    assert np.asarray(random.split(random.PRNGKey(0))[0]).tolist() == [4146024105, 967050713]


# ------------------------------------------------------------------ shapes and dtypes

@pytest.mark.parametrize("name,args,kind", [
    ("uniform", (), "f"), ("normal", (), "f"), ("exponential", (), "f"), ("gumbel", (), "f"),
    ("laplace", (), "f"), ("logistic", (), "f"), ("cauchy", (), "f"), ("maxwell", (), "f"),
    ("randint", (0, 10), "i"), ("rademacher", (), "i"), ("bits", (), "u"),
])
def test_default_dtypes_and_shapes(x64, name, args, kind):
    f = getattr(random, name)
    k = random.PRNGKey(3)
    for shape in [(), (4,), (2, 3)]:
        out = f(k, shape, *args) if name == "randint" else f(k, shape)
        assert out.shape == shape
        want = {"f": np.float64 if x64 else np.float32, "i": np.int64 if x64 else np.int32,
                "u": np.uint64 if x64 else np.uint32}[kind]
        assert out.dtype == want


def test_explicit_dtypes(x64):
    k = random.PRNGKey(1)
    assert random.uniform(k, (3,), jnp.float16).dtype == np.float16
    assert random.normal(k, (3,), jnp.float64).dtype == (np.float64 if x64 else np.float32)
    assert random.randint(k, (3,), 0, 5, jnp.int8).dtype == np.int8
    assert random.randint(k, (3,), 0, 5, jnp.uint16).dtype == np.uint16
    assert random.normal(k, (3,), jnp.complex64).dtype == np.complex64
    assert random.bernoulli(k, 0.3, (2, 2)).dtype == np.bool_
    assert random.split(k, (2, 3)).shape == (2, 3, 2)
    assert random.gamma(k, jnp.ones((2, 3))).shape == (2, 3)
    assert random.dirichlet(k, jnp.ones(4), (5,)).shape == (5, 4)
    assert random.multivariate_normal(k, jnp.zeros(3), jnp.eye(3), (4,)).shape == (4, 3)
    assert random.orthogonal(k, 3, (2,)).shape == (2, 3, 3)
    assert random.orthogonal(k, 2, m=4).shape == (2, 4)
    assert random.ball(k, 3, shape=(5,)).shape == (5, 3)
    assert random.categorical(k, jnp.zeros((2, 5)), shape=(3, 2)).shape == (3, 2)
    assert random.choice(k, 5, (3,)).shape == (3,)
    assert random.uniform(k, (0,)).shape == (0,)
    assert random.gamma(k, [0.5, 2.0]).shape == (2,)  # lists are arrays
    assert random.dirichlet(k, [0.5, 0.5]).shape == (2,)
    u16 = np.asarray(random.uniform(k, (4000,), jnp.float16))
    assert u16.min() >= 0 and u16.max() < 1
    if x64:
        u = np.asarray(random.uniform(k, (1000,), jnp.float64))
        assert u.dtype == np.float64 and len(np.unique(u)) == 1000
        assert random.randint(k, (3,), 0, 2**40, jnp.int64).dtype == np.int64


# ------------------------------------------------------------------ moments

N = 40000


def _moments(x):
    x = np.asarray(x, np.float64)
    return x.mean(), x.var()


def _check_moments(x, mean, var, k=5.0):
    """Sample mean and variance within k standard errors (fixed keys: the test
    is deterministic). The variance's standard error comes from the sample's
    fourth central moment, so heavy tails get the slack they need."""
    x = np.asarray(x, np.float64).ravel()
    n = x.size
    m, v = _moments(x)
    m4 = np.mean((x - m) ** 4)
    assert abs(m - mean) <= k * np.sqrt(var / n), (m, mean)
    assert abs(v - var) <= k * np.sqrt(max(m4 - v * v, 0.0) / n), (v, var)


@pytest.mark.parametrize("name,args,mean,var", [
    ("uniform", (), 0.5, 1 / 12),
    ("normal", (), 0.0, 1.0),
    ("exponential", (), 1.0, 1.0),
    ("laplace", (), 0.0, 2.0),
    ("logistic", (), 0.0, np.pi ** 2 / 3),
    ("gumbel", (), np.euler_gamma, np.pi ** 2 / 6),
    ("maxwell", (), 2 * np.sqrt(2 / np.pi), 3 - 8 / np.pi),
    ("rademacher", (), 0.0, 1.0),
])
def test_moments_standard(name, args, mean, var):
    _check_moments(getattr(random, name)(random.PRNGKey(11), (N,)), mean, var)


def test_moments_parameterised():
    k = random.PRNGKey(5)
    ks = random.split(k, 12)
    _check_moments(random.uniform(ks[0], (N,), minval=-2.0, maxval=3.0), 0.5, 25 / 12)
    for a in (0.3, 1.0, 4.5):
        _check_moments(random.gamma(ks[1], a, (N,)), a, a)
    _check_moments(jnp.exp(random.loggamma(ks[2], 2.5, (N,))), 2.5, 2.5)
    a, b = 2.0, 3.0
    _check_moments(random.beta(ks[3], a, b, (N,)), a / (a + b),
                   a * b / ((a + b) ** 2 * (a + b + 1)))
    for lam in (3.0, 25.0):
        _check_moments(random.poisson(ks[4], lam, (N,)), lam, lam)
    for n_, p_ in ((8.0, 0.3), (60.0, 0.6)):
        _check_moments(random.binomial(ks[5], n_, p_, (N,)), n_ * p_, n_ * p_ * (1 - p_))
    _check_moments(random.bernoulli(ks[6], 0.3, (N,)), 0.3, 0.21)
    _check_moments(random.geometric(ks[7], 0.25, (N,)), 4.0, 0.75 / 0.0625)
    _check_moments(random.t(ks[8], 10.0, (N,)), 0.0, 10 / 8)
    _check_moments(random.chisquare(ks[9], 4.0, (N,)), 4.0, 8.0)
    _check_moments(random.pareto(ks[10], 5.0, (N,)), 5 / 4, 5 / (16 * 3))
    _check_moments(random.weibull_min(ks[11], 2.0, 1.0, (N,)), 2.0, 4.0)
    ri = np.asarray(random.randint(k, (N,), -3, 7))
    assert ri.min() == -3 and ri.max() == 6
    assert np.all(np.abs(np.bincount(ri + 3) / N - 0.1) < 0.01)


def test_truncated_normal_and_cauchy():
    k = random.PRNGKey(9)
    x = np.asarray(random.truncated_normal(k, -1.0, 2.0, (N,)))
    assert x.min() > -1 and x.max() < 2
    from scipy import stats
    _check_moments(x, *stats.truncnorm.stats(-1, 2, moments="mv"))
    c = np.asarray(random.cauchy(k, (N,)))
    assert abs(np.median(c)) < 0.05 and abs(np.mean(np.abs(c) < 1) - 0.5) < 0.02


def test_dirichlet_mvn_categorical_choice():
    k = random.PRNGKey(21)
    ks = random.split(k, 8)
    alpha = np.array([1.0, 2.0, 5.0])
    d = np.asarray(random.dirichlet(ks[0], alpha, (N,)))
    np.testing.assert_allclose(d.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), alpha / alpha.sum(), atol=0.01)
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    mean = np.array([1.0, -2.0, 0.5])
    x = np.asarray(random.multivariate_normal(ks[1], mean, cov, (N,)))
    np.testing.assert_allclose(x.mean(0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.05)
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    c = np.asarray(random.categorical(ks[2], logits, shape=(N,)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / N, [0.1, 0.2, 0.7], atol=0.01)
    p = np.array([0.5, 0.25, 0.25])
    ch = np.asarray(random.choice(ks[3], 3, (N,), p=p))
    np.testing.assert_allclose(np.bincount(ch, minlength=3) / N, p, atol=0.01)
    picks = np.asarray(random.choice(ks[4], np.arange(10) * 10, (10,), replace=False))
    assert sorted(picks.tolist()) == list(range(0, 100, 10))
    w = np.asarray(random.choice(ks[5], 10, (5,), replace=False, p=np.arange(1, 11.0)))
    assert len(set(w.tolist())) == 5
    nr = np.asarray(random.categorical(ks[6], jnp.zeros((4, 6)), axis=-1, shape=(6, 4),
                                       replace=False))
    assert all(sorted(nr[:, j].tolist()) == list(range(6)) for j in range(4))


_MVN_COV = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
_MVN_MEAN = np.array([1.0, -2.0, 0.5])


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_methods(method):
    """JAX's algorithm: mean + F z with z = normal(key, shape + (n,)) and F the
    Cholesky factor, v sqrt(w) (eigh) or u sqrt(s) (svd) of cov. The
    eigenvectors' signs are the factorisation's choice, so eigh and svd are
    checked through |v^T (x - mean)| = sqrt(w) |z|, which does not depend on
    them; all three get the moments right."""
    olympus.config.update("olympus_enable_x64", True)
    k = random.PRNGKey(5)
    x = np.asarray(random.multivariate_normal(k, _MVN_MEAN, _MVN_COV, (6,), method=method))
    z = np.asarray(random.normal(k, (6, 3), jnp.float64))
    assert x.shape == (6, 3) and x.dtype == np.float64
    if method == "cholesky":
        want = _MVN_MEAN + z @ np.linalg.cholesky(_MVN_COV).T
        np.testing.assert_allclose(x, want, rtol=1e-13, atol=1e-13)
    else:
        w, v = np.linalg.eigh(_MVN_COV)   # distinct eigenvalues: eigh's and svd's bases agree
        if method == "svd":               # up to order: singular values descend
            w, v = w[::-1], v[:, ::-1]
        np.testing.assert_allclose(np.abs((x - _MVN_MEAN) @ v), np.sqrt(w) * np.abs(z),
                                   rtol=1e-12, atol=1e-13)
    jitted = olympus.jit(lambda key: random.multivariate_normal(key, _MVN_MEAN, _MVN_COV, (6,),
                                                                method=method))
    np.testing.assert_allclose(jitted(k), x, rtol=1e-14, atol=1e-14)
    olympus.config.update("olympus_enable_x64", False)
    s = np.asarray(random.multivariate_normal(random.PRNGKey(21), _MVN_MEAN, _MVN_COV, (N,),
                                              method=method))
    assert s.dtype == np.float32
    np.testing.assert_allclose(s.mean(0), _MVN_MEAN, atol=0.03)
    np.testing.assert_allclose(np.cov(s.T), _MVN_COV, atol=0.05)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_batched_covariances(method):
    """A batch of covariances and means broadcast against shape; each batch
    member gets its own factor."""
    covs = np.stack([_MVN_COV, np.diag([4.0, 0.25, 1.0])])
    means = np.array([[0.0, 0.0, 0.0], [5.0, -5.0, 1.0]])
    x = np.asarray(random.multivariate_normal(random.PRNGKey(8), means, covs, (N // 4, 2),
                                              method=method))
    assert x.shape == (N // 4, 2, 3)
    for b in range(2):
        np.testing.assert_allclose(x[:, b].mean(0), means[b], atol=0.06)
        np.testing.assert_allclose(np.cov(x[:, b].T), covs[b], atol=0.1)


def test_multivariate_normal_singular_covariance():
    """A rank-one cov = a a^T: the svd factor is u sqrt(s) with s = (|a|^2, 0, 0),
    so every draw lies on the line mean + t a; Cholesky has no factor (NaN)."""
    olympus.config.update("olympus_enable_x64", True)
    a = np.array([1.0, 2.0, -1.0])
    cov = np.outer(a, a)
    x = np.asarray(random.multivariate_normal(random.PRNGKey(3), _MVN_MEAN, cov, (500,),
                                              method="svd"), np.float64)
    assert np.all(np.isfinite(x))
    d = x - _MVN_MEAN
    off_line = d - np.outer(d @ a / (a @ a), a)
    assert np.abs(off_line).max() < 1e-6
    assert abs(np.var(d @ a / np.linalg.norm(a)) - a @ a) < 0.15 * (a @ a)
    chol = np.asarray(random.multivariate_normal(random.PRNGKey(3), _MVN_MEAN, cov, (2,)))
    assert np.isnan(chol).any()
    with pytest.raises(ValueError, match="method must be one of"):
        random.multivariate_normal(random.PRNGKey(3), _MVN_MEAN, cov, method="lu")


@pytest.mark.parametrize("n,m,dtype", [(4, None, np.float64), (5, 2, np.float64),
                                         (2, 5, np.float64), (3, None, np.complex128)])
def test_orthogonal_is_jax_qr_of_a_normal_draw(n, m, dtype):
    """JAX's algorithm: Q of normal(key, shape + (max, min)) with each column
    times sign(R_jj) (the phase for complex), transposed when n < m; so
    R's diagonal is positive and the draw is Haar distributed."""
    olympus.config.update("olympus_enable_x64", True)
    k = random.PRNGKey(13)
    mm = n if m is None else m
    got = np.asarray(random.orthogonal(k, n, (2,), dtype, m=m))
    assert got.shape == (2, n, mm) and got.dtype == dtype
    z = np.asarray(random.normal(k, (2, max(n, mm), min(n, mm)), dtype))
    for b in range(2):
        q, r = np.linalg.qr(z[b])
        d = np.diagonal(r)
        want = q * (d / np.abs(d))
        np.testing.assert_allclose(got[b], want.T if n < mm else want, atol=1e-12)


def test_permutation_shuffle_orthogonal_ball():
    k = random.PRNGKey(2)
    p = np.asarray(random.permutation(k, 100))
    assert sorted(p.tolist()) == list(range(100)) and p.tolist() != list(range(100))
    x = np.arange(20).reshape(4, 5)
    rows = np.asarray(random.permutation(k, x))
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, x.tolist()))
    cols = np.asarray(random.permutation(k, x, axis=1))
    assert (np.sort(cols, 1) == x).all() and len({tuple(c) for c in cols.T}) == 5
    ind = np.asarray(random.permutation(k, np.tile(np.arange(30), (6, 1)), axis=1,
                                        independent=True))
    assert (np.sort(ind, 1) == np.arange(30)).all() and len({tuple(r) for r in ind}) > 1
    s = np.asarray(random.shuffle(k, np.arange(50)))
    assert sorted(s.tolist()) == list(range(50))
    big = np.asarray(random.permutation(k, 5000))  # two sorting rounds
    assert sorted(big.tolist()) == list(range(5000))
    q = np.asarray(random.orthogonal(k, 4, (3,)))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), (3, 4, 4)),
                               atol=1e-5)
    r = np.asarray(random.orthogonal(k, 2, m=5))
    np.testing.assert_allclose(r @ r.T, np.eye(2), atol=1e-5)
    u = np.asarray(random.orthogonal(k, 3, dtype=jnp.complex64))
    np.testing.assert_allclose(u @ u.conj().T, np.eye(3), atol=1e-5)
    b = np.asarray(random.ball(k, 3, shape=(2000,)))
    nrm = np.linalg.norm(b, axis=-1)
    assert nrm.max() <= 1 and abs(np.mean(nrm ** 3) - 0.5) < 0.05  # |x|^3 ~ U(0, 1)


# ------------------------------------------------------------------ transformations

SAMPLERS = [
    ("uniform", lambda k: random.uniform(k, (5,), minval=-1.0, maxval=2.0)),
    ("normal", lambda k: random.normal(k, (2, 3))),
    ("randint", lambda k: random.randint(k, (6,), -4, 9)),
    ("bits8", lambda k: random.bits(k, (7,), jnp.uint8)),
    ("gamma", lambda k: random.gamma(k, jnp.array([0.4, 1.0, 3.0]))),
    ("beta", lambda k: random.beta(k, 0.5, 2.0, (3,))),
    ("poisson", lambda k: random.poisson(k, jnp.array([2.0, 30.0]))),
    ("binomial", lambda k: random.binomial(k, 20.0, 0.4, (3,))),
    ("permutation", lambda k: random.permutation(k, 9)),
    ("choice", lambda k: random.choice(k, 7, (4,), replace=False)),
    ("categorical", lambda k: random.categorical(k, jnp.array([0.0, 1.0, 2.0]), shape=(4,))),
    ("split", lambda k: random.split(k, 3)),
    ("fold_in", lambda k: random.fold_in(k, 17)),
    ("truncated_normal", lambda k: random.truncated_normal(k, -0.5, 1.5, (4,))),
]


@pytest.mark.parametrize("name,f", SAMPLERS, ids=[s[0] for s in SAMPLERS])
def test_jit_equals_eager_and_vmap_equals_loop(name, f):
    key = random.PRNGKey(123)
    eager = np.asarray(f(key))
    np.testing.assert_array_equal(np.asarray(olympus.jit(f)(key)), eager)
    keys = random.split(key, 4)
    batched = np.asarray(olympus.vmap(f)(keys))
    looped = np.stack([np.asarray(f(keys[i])) for i in range(4)])
    np.testing.assert_array_equal(batched, looped)


def test_vmap_over_fold_in_data_and_typed_keys():
    k = random.key(3)
    got = olympus.vmap(lambda i: random.key_data(random.fold_in(k, i)))(jnp.arange(4))
    want = np.stack([np.asarray(random.key_data(random.fold_in(k, i))) for i in range(4)])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_grad_reparameterised():
    k = random.PRNGKey(0)
    z = random.normal(k, (50,))
    assert float(olympus.grad(lambda mu: jnp.mean(mu + random.normal(k, (50,))))(0.3)) == \
        pytest.approx(1.0)
    np.testing.assert_allclose(
        olympus.grad(lambda s: jnp.mean(s * random.normal(k, (50,))))(2.0), np.mean(z),
        rtol=1e-5)
    u = np.asarray(random.uniform(k, (20,)))
    g = olympus.grad(lambda lo, hi: jnp.sum(random.uniform(k, (20,), minval=lo, maxval=hi)),
                     argnums=(0, 1))(jnp.float32(-1.0), jnp.float32(3.0))
    np.testing.assert_allclose([float(g[0]), float(g[1])], [np.sum(1 - u), np.sum(u)], rtol=1e-4)
    # jit and vmap of grad agree
    f = lambda mu, key: jnp.sum(jnp.exp(mu + random.normal(key, (3,))))
    ks = random.split(k, 3)
    gv = olympus.vmap(olympus.grad(f), in_axes=(None, 0))(0.5, ks)
    gl = [float(olympus.jit(olympus.grad(f))(0.5, ks[i])) for i in range(3)]
    np.testing.assert_allclose(np.asarray(gv), gl, rtol=1e-5)


def _gamma_implicit_grad(a, x, h=1e-6):
    """-(d/da P(a, x)) / (d/dx P(a, x)): the implicit reparameterisation gradient."""
    from scipy import special, stats
    dcdf_da = (special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h)
    return -dcdf_da / stats.gamma.pdf(x, a)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5, 8.0])
def test_gamma_gradient(a):
    k = random.PRNGKey(4)
    with olympus.enable_x64():
        aa = jnp.full((6,), a, jnp.float64)
        x = np.asarray(random.gamma(k, aa, dtype=jnp.float64))
        g = np.asarray(olympus.grad(lambda al: jnp.sum(random.gamma(k, al, dtype=jnp.float64)))(aa))
        np.testing.assert_allclose(g, _gamma_implicit_grad(a, x), rtol=1e-4)
        lg = np.asarray(olympus.grad(
            lambda al: jnp.sum(random.loggamma(k, al, dtype=jnp.float64)))(aa))
        np.testing.assert_allclose(lg, _gamma_implicit_grad(a, x) / x, rtol=1e-4)
    # float32: the same gradient; jvp of loggamma(exp) agrees with gamma's
    g32 = olympus.grad(lambda al: jnp.sum(random.gamma(k, al, (6,))))(jnp.float32(a))
    assert np.isfinite(float(g32))


def test_gradients_through_gamma_family():
    k = random.PRNGKey(8)
    with olympus.enable_x64():
        # beta = sigmoid(log Ga - log Gb): d beta / da = beta (1 - beta) d log Ga / da, where
        # log Ga is beta's first log-gamma draw (key split in two, as JAX)
        a = jnp.full((4,), 1.7, jnp.float64)
        x = np.asarray(random.beta(k, a, 2.0, dtype=jnp.float64))
        ga = np.exp(np.asarray(random.loggamma(random.split(k)[0], a, dtype=jnp.float64)))
        g = np.asarray(olympus.grad(lambda al: jnp.sum(random.beta(k, al, 2.0,
                                                                   dtype=jnp.float64)))(a))
        np.testing.assert_allclose(g, x * (1 - x) * _gamma_implicit_grad(1.7, ga) / ga,
                                   rtol=1e-4)
        for f in (lambda a: random.dirichlet(k, jnp.stack([a, 1.0, 2.0]))[0],
                  lambda a: jnp.sum(random.t(k, a, (4,))),
                  lambda a: jnp.sum(random.chisquare(k, a, (4,)))):
            g = float(olympus.grad(f)(jnp.float64(1.7)))
            assert np.isfinite(g) and g != 0


# ------------------------------------------------------------------ errors

def test_bad_keys():
    with pytest.raises(TypeError, match="shape to end with"):
        random.normal(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match="dtype = uint32"):
        random.normal(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="ndim >= 1"):
        random.uniform(np.uint32(0))
    with pytest.raises(TypeError, match="unexpected PRNG key type"):
        random.normal([0, 0])
    batched = random.split(random.PRNGKey(0), 3)
    with pytest.raises(ValueError, match=r"normal accepts a single key, but was given a key "
                                         r"array of shape \(3, 2\) != \(\)"):
        random.normal(batched)
    with pytest.raises(ValueError, match=r"split accepts a single key.*\(3,\)"):
        random.split(random.split(random.key(0), 3))
    with pytest.raises(TypeError, match="fold_in accepts a scalar"):
        random.fold_in(random.PRNGKey(0), np.arange(2))
    with pytest.raises(TypeError, match="invalid PRNG key data"):
        random.wrap_key_data(np.zeros((2, 3), np.uint32))
    with pytest.raises(ValueError, match="threefry2x32"):
        random.key(0, impl="rbg")


def test_bad_arguments():
    k = random.PRNGKey(0)
    with pytest.raises(ValueError, match="unsigned int dtype"):
        random.bits(k, (3,), jnp.int8)
    with pytest.raises(ValueError, match="must be a float dtype"):
        random.uniform(k, (2,), jnp.int32)
    with pytest.raises(TypeError, match="integer dtypes"):
        random.randint(k, (2,), 0, 3, jnp.float32)
    with pytest.raises(ValueError, match="broadcast-compatible"):
        random.gamma(k, jnp.ones(3), (2,))
    with pytest.raises(ValueError, match="Cannot take a larger sample"):
        random.choice(k, 3, (5,), replace=False)
    with pytest.raises(ValueError, match="p must be None or a 1D vector"):
        random.choice(k, 3, (2,), p=jnp.ones(4) / 4)
    with pytest.raises(ValueError, match="cannot exceed number of categories"):
        random.categorical(k, jnp.zeros(3), shape=(5,), replace=False)
    with pytest.raises(ValueError, match="cov.shape"):
        random.multivariate_normal(k, jnp.zeros(3), jnp.eye(2))
    with pytest.raises(TypeError, match="floating dtype"):
        random.bernoulli(k, 1)
    with pytest.raises(ValueError, match="mode"):
        random.bernoulli(k, 0.5, mode="mid")

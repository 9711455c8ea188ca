"""olympus.extend.random: the Threefry-2x32 PRNG's building blocks, as
`jax.extend.random` has them: the primitive (`threefry2x32_p.bind(key0, key1,
x0, x1)`), the counter hash `threefry_2x32(keypair, count)` and the
implementation's functions (`threefry_prng_impl`: key_shape, seed, split,
random_bits, fold_in). olympus has one PRNG implementation; defining others
(`define_prng_impl`) is not supported."""
from olympus import _core
from olympus import random as _random

__all__ = ["threefry2x32_p", "threefry_2x32", "threefry_prng_impl", "threefry_seed",
           "threefry_split", "threefry_fold_in", "threefry_random_bits", "random_seed"]


class _Primitive:
    """A handle on a registered primitive: `bind(*args, **params)`."""

    def __init__(self, name):
        self.name = name

    def bind(self, *args, **params):
        return _core.bind(self.name, args, params or None)

    def __repr__(self):
        return self.name


threefry2x32_p = _Primitive("threefry2x32")
threefry_2x32 = _random.threefry_2x32


def threefry_seed(seed):
    """uint32[2] key data for an integer seed (JAX's threefry_seed)."""
    return _random._seed_data(seed)


def threefry_split(key, shape):
    """uint32[*shape, 2] keys from uint32[2] key data."""
    return _random._split(key, tuple(shape))


def threefry_fold_in(key, data):
    """uint32[2] key data folded with a uint32 scalar."""
    return _random._fold_in(key, _random._convert(data, _random._U32))


def threefry_random_bits(key, bit_width, shape):
    """uint{bit_width} bits (8, 16, 32, 64) from uint32[2] key data."""
    if bit_width not in (8, 16, 32, 64):
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return _random._random_bits(key, bit_width, tuple(shape))


def random_seed(seeds, impl=None):
    """Typed keys from an integer seed (`olympus.random.key`)."""
    return _random.key(seeds, impl=impl)


class _PRNGImpl:
    """The threefry2x32 implementation's functions, under JAX's names."""
    key_shape = (2,)
    name = "threefry2x32"
    tag = "fry"
    seed = staticmethod(threefry_seed)
    split = staticmethod(threefry_split)
    random_bits = staticmethod(threefry_random_bits)
    fold_in = staticmethod(threefry_fold_in)

    def __repr__(self):
        return f"PRNGImpl({self.name})"


threefry_prng_impl = _PRNGImpl()

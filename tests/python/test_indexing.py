"""NumPy indexing on olympus arrays against NumPy: a property-style test over
random index expressions (ints, slices with any step, None, Ellipsis,
integer arrays and lists, boolean masks, mixed basic/advanced with NumPy's
axis placement), eager and under jit, for x[key] and x.at[key].set / add /
multiply / min / max / get / apply; then JAX's out-of-bounds rules, modes,
boolean masks under jit, gradients and vmap through gathers and scatters."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
import olympus.test_util
from olympus import lax
from olympus.errors import NonConcreteBooleanIndexError


def _random_key(rng, shape):
    """A random valid NumPy key for an array of shape (in-bounds indices)."""
    key = []
    axis = 0
    used_ellipsis = False
    n_arrays = 0
    bshape = tuple(int(s) for s in rng.integers(1, 3, size=rng.integers(0, 3)))
    while axis < len(shape):
        n = shape[axis]
        r = rng.random()
        if r < 0.1:
            key.append(None)
            continue
        if r < 0.15 and not used_ellipsis:
            used_ellipsis = True
            key.append(Ellipsis)
            rest = len(shape) - axis
            skip = int(rng.integers(0, rest + 1))
            axis += skip
            continue
        if r < 0.35 and n > 0:
            key.append(int(rng.integers(-n, n)))
        elif r < 0.6:
            start = rng.choice([None, int(rng.integers(-n - 2, n + 3))])
            stop = rng.choice([None, int(rng.integers(-n - 2, n + 3))])
            step = rng.choice([None, 1, 2, -1, -2, 3])
            key.append(slice(start, stop, step))
        elif r < 0.85 and n > 0 and 0 <= n_arrays < 3:
            n_arrays += 1
            idx = rng.integers(-n, n, size=bshape)
            key.append(idx.tolist() if rng.random() < 0.2 else idx)
        elif n_arrays == 0 and n > 0:
            # a boolean mask over this axis (and maybe the next); its nonzero()
            # arrays have a data-dependent length: no other arrays beside it
            m = 2 if axis + 1 < len(shape) and rng.random() < 0.3 else 1
            mask = rng.random(shape[axis:axis + m]) < 0.5
            n_arrays = -1
            key.append(mask)
            axis += m
            continue
        else:
            key.append(slice(None))
        axis += 1
    if rng.random() < 0.2:
        key.append(None)
    return tuple(key)


def _shapes(rng):
    rank = int(rng.integers(1, 5))
    return tuple(int(s) for s in rng.integers(1, 5, size=rank))


@pytest.mark.parametrize("seed", range(6))
def test_getitem_random_keys_match_numpy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        shape = _shapes(rng)
        x = rng.standard_normal(shape).astype(np.float32)
        key = _random_key(rng, shape)
        want = x[key]
        got = jnp.asarray(x)[key]
        assert got.shape == want.shape, (shape, key)
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=str((shape, key)))


class _Slot:
    """Where a jit argument goes in a key."""
    def __init__(self, i):
        self.i = i


def _split_arrays(key):
    """(template, arrays): integer index arrays become jit arguments."""
    arrays, template = [], []
    for k in key:
        if isinstance(k, np.ndarray) and k.dtype != np.bool_:
            template.append(_Slot(len(arrays)))
            arrays.append(k)
        else:
            template.append(k)
    return tuple(template), arrays


def _rebuild(template, arrays):
    return tuple(arrays[k.i] if isinstance(k, _Slot) else k for k in template)


@pytest.mark.parametrize("seed", range(3))
def test_getitem_random_keys_under_jit(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(15):
        shape = _shapes(rng)
        x = rng.standard_normal(shape).astype(np.float32)
        key = _random_key(rng, shape)
        template, arrays = _split_arrays(key)
        f = olympus.jit(lambda x, *a, t=template: x[_rebuild(t, a)])
        got = f(jnp.asarray(x), *[jnp.asarray(a) for a in arrays])
        np.testing.assert_array_equal(np.asarray(got), x[key], err_msg=str((shape, key)))


_UFUNC_AT = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
@pytest.mark.parametrize("seed", range(3))
def test_update_random_keys_match_numpy(op, seed):
    rng = np.random.default_rng(200 + seed)
    for _ in range(25):
        shape = _shapes(rng)
        x = rng.standard_normal(shape).astype(np.float32)
        key = _random_key(rng, shape)
        vals = rng.standard_normal(x[key].shape).astype(np.float32)
        want = x.copy()
        if op == "set":
            want[key] = vals
        else:
            _UFUNC_AT[op].at(want, key, vals)  # unbuffered: repeated indices combine
        got = getattr(jnp.asarray(x).at[key], op)(vals)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, err_msg=str((shape, key)))


def test_mixed_advanced_axis_placement():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    j = jnp.asarray(x)
    i = np.array([[0, 1], [1, 0]])
    for key in [(i, i), (slice(None), i, i), (i, slice(None), i), (0, slice(None), i),
                (slice(None), 0, slice(None), i), (Ellipsis, i), (i, None, i),
                (slice(None), i, None, i), (None, i, Ellipsis, 1), ([0, 1], [2, 0], [1, 3])]:
        np.testing.assert_array_equal(np.asarray(j[key]), x[key], err_msg=str(key))


def test_out_of_bounds_rules():
    x = jnp.arange(10)
    assert int(x[11]) == 9 and int(x[-20]) == 0                       # gathers clamp
    np.testing.assert_array_equal(np.asarray(x[np.array([0, 12, -1])]), [0, 9, 9])
    np.testing.assert_array_equal(np.asarray(x.at[11].set(5)), np.arange(10))  # dropped
    np.testing.assert_array_equal(np.asarray(x.at[np.array([1, 12])].add(5)),
                                  np.arange(10) + np.eye(10, dtype=int)[1] * 5)
    f = jnp.arange(5.0)
    got = f.at[np.array([0, 7, -1])].get(mode="fill", fill_value=-1.0)
    np.testing.assert_array_equal(np.asarray(got), [0.0, -1.0, 4.0])
    assert np.isnan(float(f.at[9].get(mode="fill")))                  # default fill: NaN
    assert int(jnp.arange(3).at[5].get(mode="fill")) == np.iinfo(np.int32).min
    np.testing.assert_array_equal(np.asarray(x.at[12].set(7, mode="clip")),
                                  [0, 1, 2, 3, 4, 5, 6, 7, 8, 7])
    with pytest.raises(ValueError, match="Unknown gather mode"):
        x.at[1].get(mode="wrap-around")


def test_traced_out_of_bounds_under_jit():
    f = olympus.jit(lambda x, i: (x[i], x.at[i].set(-1)))
    v, u = f(jnp.arange(4), jnp.asarray(np.array([1, 6])))
    np.testing.assert_array_equal(np.asarray(v), [1, 3])
    np.testing.assert_array_equal(np.asarray(u), [0, -1, 2, 3])


def test_boolean_masks():
    x = np.arange(12.0).reshape(3, 4)
    m = x % 3 == 0
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[m]), x[m])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[jnp.asarray(m)]), x[m])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[:, m[0]]), x[:, m[0]])
    assert jnp.asarray(x)[True].shape == (1, 3, 4)
    assert jnp.asarray(x)[False].shape == (0, 3, 4)
    want = x.copy()
    want[m] = 0
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x).at[m].set(0)), want)
    # under jit: a traced mask of x's shape with a scalar becomes a select ...
    f = olympus.jit(lambda x, m: x.at[m].set(0.0))
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), jnp.asarray(m))), want)
    # ... anything else asks for size=
    g = olympus.jit(lambda x, m: x[m])
    with pytest.raises(NonConcreteBooleanIndexError, match="size="):
        g(jnp.asarray(x), jnp.asarray(m))
    with pytest.raises(IndexError):  # it is an IndexError, as in JAX
        g(jnp.asarray(x), jnp.asarray(m))


def test_at_methods_and_dtypes():
    x = jnp.asarray(np.array([1, 2, 3, 4], np.int32))
    i = np.array([0, 0, 2])
    np.testing.assert_array_equal(np.asarray(x.at[i].add(1)), [3, 2, 4, 4])
    np.testing.assert_array_equal(np.asarray(x.at[i].subtract(1)), [-1, 2, 2, 4])
    np.testing.assert_array_equal(np.asarray(x.at[i].mul(3)), [9, 2, 9, 4])
    np.testing.assert_array_equal(np.asarray(x.at[i].min(0)), [0, 2, 0, 4])
    np.testing.assert_array_equal(np.asarray(x.at[i].max(5)), [5, 2, 5, 4])
    np.testing.assert_array_equal(np.asarray(x.at[i].get()), [1, 1, 3])
    np.testing.assert_array_equal(np.asarray(x.at[i].apply(lambda v: v * 10)), [10, 2, 30, 4])
    y = jnp.asarray(np.array([2.0, 4.0, 8.0]))
    np.testing.assert_allclose(np.asarray(y.at[np.array([0, 2])].divide(2.0)), [1.0, 4.0, 4.0])
    np.testing.assert_allclose(np.asarray(y.at[np.array([1])].power(2)), [2.0, 16.0, 8.0])
    assert x.at[i].add(1.7).dtype == x.dtype  # values take x's dtype
    assert x.at[i].set(1).weak_type == x.weak_type


def test_grad_through_gather_and_scatter():
    x = jnp.asarray(np.arange(6.0).reshape(2, 3))
    idx = np.array([1, 1, 0])
    g = olympus.grad(lambda x: jnp.sum(x[:, idx] ** 2))(x)
    want = np.zeros((2, 3))
    np.add.at(want, (slice(None), idx), 2 * np.asarray(x)[:, idx])
    np.testing.assert_allclose(np.asarray(g), want)
    # set: the overwritten elements get no gradient, the updates do
    gx, gv = olympus.grad(lambda x, v: jnp.sum(x.at[0, idx].set(v) ** 2), argnums=(0, 1))(
        x, jnp.asarray([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.asarray(gx), [[0, 0, 4], [6, 8, 10]])  # x[0, 2] stays
    np.testing.assert_allclose(np.asarray(gv), [0, 4, 6])  # repeated index 1: the last wins
    olympus.test_util.check_grads(lambda x: x[np.array([2, 0]), 1:] * 2, (jnp.asarray(
        np.arange(12.0).reshape(3, 4)),), order=2)
    olympus.test_util.check_grads(lambda x, v: x.at[np.array([0, 2])].add(v * v),
                                  (jnp.arange(4.0), jnp.asarray([1.0, -2.0])), order=2)
    olympus.test_util.check_grads(lambda x, v: x.at[np.array([0, 2, 2])].max(v),
                                  (jnp.arange(4.0), jnp.asarray([1.5, -2.0, 3.5])), order=1)


def test_vmap_of_indexing_is_one_gather():
    x = jnp.asarray(np.arange(12.0).reshape(4, 3))
    i = jnp.asarray(np.array([2, 0, 1, 1]))
    f = olympus.vmap(lambda row, k: row[k])
    np.testing.assert_array_equal(np.asarray(f(x, i)), np.asarray(x)[np.arange(4), np.asarray(i)])
    text = str(olympus.make_jaxpr(f)(x, i))
    assert text.count("gather") == 1 and "concatenate" not in text
    g = olympus.vmap(lambda row, k, v: row.at[k].add(v))
    want = np.asarray(x).copy()
    want[np.arange(4), np.asarray(i)] += 1.0
    np.testing.assert_array_equal(np.asarray(g(x, i, jnp.ones(4))), want)


def test_lax_gather_scatter_api():
    x = jnp.asarray(np.arange(12.0).reshape(3, 4))
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
    out = lax.gather(x, jnp.asarray([[2], [0]]), dn, (1, 4))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x)[[2, 0]])
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))
    out = lax.scatter_add(x, jnp.asarray([[1], [1]]), jnp.ones((2, 4)), sdn)
    np.testing.assert_array_equal(np.asarray(out)[1], np.asarray(x)[1] + 2)
    with pytest.raises(TypeError, match="integer dtype"):
        lax.gather(x, jnp.asarray([[1.0]]), dn, (1, 4))
    with pytest.raises(Exception, match="slice_sizes"):
        lax.gather(x, jnp.asarray([[1]]), dn, (1, 5))
    assert float(lax.index_take(x, (np.array([1]), np.array([2])), (0, 1))[0]) == 6.0
    assert lax.dynamic_index_in_dim(x, 1, 0, keepdims=False).shape == (4,)


def test_x64_indices_and_dtypes():
    x = np.arange(20.0).reshape(4, 5)
    i64 = np.array([3, -1, 0], np.int64)
    with olympus.enable_x64():
        j = jnp.asarray(x)
        assert j.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(j[i64]), x[i64])
        np.testing.assert_array_equal(np.asarray(j[:, jnp.asarray(i64)]), x[:, i64])
        got = olympus.jit(lambda a, i: a.at[i, 1].add(1.0))(j, jnp.asarray(i64))
        want = x.copy()
        np.add.at(want, (i64, 1), 1.0)
        np.testing.assert_array_equal(np.asarray(got), want)
        big = np.array([2 ** 40, -(2 ** 40)], np.int64)  # far out of bounds: clamped
        np.testing.assert_array_equal(np.asarray(j[big]), x[[3, 0]])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[np.array([2 ** 40], np.int64)]),
                                  x[[3]])
    u = np.array([1, 3], np.uint8)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[u]), x[u])

"""olympus.lax's collectives under vmap(axis_name=...): psum, pmax, pmin,
pmean, all_gather, psum_scatter, ppermute, pshuffle, all_to_all, axis_index,
axis_size against NumPy; nested named vmaps, jit in both orders, control flow,
derivatives (check_grads, and JAX's values for grad inside vmap) and the
unbound-name errors."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import grad, jit, lax, vmap
from olympus.test_util import check_grads

f32 = np.float32


def rng(*shape, seed=0, dtype=f32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def close(got, want, tol=1e-5):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ------------------------------------------------------------------ reductions

def test_centering_with_pmean():
    x = rng(5, 3)
    close(vmap(lambda v: v - lax.pmean(v, "i"), axis_name="i")(x), x - x.mean(0))


@pytest.mark.parametrize("name,ref", [("psum", np.sum), ("pmax", np.max), ("pmin", np.min),
                                      ("pmean", np.mean)])
def test_reductions_match_numpy(name, ref):
    x = rng(4, 2, 3)
    f = getattr(lax, name)
    out = vmap(lambda v: f(v, "i"), axis_name="i")(x)
    close(out, np.broadcast_to(ref(x, axis=0), x.shape))
    # the result does not vary along the axis: out_axes=None takes it once
    close(vmap(lambda v: f(v, "i"), axis_name="i", out_axes=None)(x), ref(x, axis=0))


def test_psum_batch_axis_not_first_and_pytree():
    x, y = rng(3, 4), rng(4, seed=1)
    out = vmap(lambda a, b: lax.psum({"a": a, "b": (b, 2.0 * b)}, "i"),
               in_axes=(1, 0), axis_name="i")(x, y)
    close(out["a"], np.broadcast_to(x.sum(1), (4, 3)))
    close(out["b"][0], np.full(4, y.sum()))
    close(out["b"][1], np.full(4, 2 * y.sum()))


def test_psum_dtypes_and_constants():
    b = np.array([True, False, True, True])
    out = vmap(lambda v: lax.psum(v, "i"), axis_name="i")(b)
    assert out.dtype == np.int32
    close(out, np.full(4, 3))
    ints = np.arange(4, dtype=np.int32)
    assert vmap(lambda v: lax.psum(v, "i"), axis_name="i")(ints).dtype == np.int32
    m = vmap(lambda v: lax.pmean(v, "i"), axis_name="i")(ints)
    assert np.issubdtype(m.dtype, np.floating)
    close(m, np.full(4, 1.5))
    # a value that does not vary: psum(1) is the axis size, pmax is the value
    sizes = vmap(lambda v: v * 0 + lax.psum(1, "i"), axis_name="i")(ints)
    close(sizes, np.full(4, 4))
    assert vmap(lambda v: lax.psum(1, "i"), axis_name="i", out_axes=None)(ints) == 4
    c = np.float32(2.5)
    close(vmap(lambda v: v + lax.pmax(c, "i"), axis_name="i")(ints.astype(f32)),
          ints + np.float32(2.5))


def test_psum_unbatched_closure_is_scaled():
    w = rng(3, seed=4)
    x = rng(5, 3)
    out = vmap(lambda v: v + lax.psum(jnp.asarray(w), "i"), axis_name="i")(x)
    close(out, x + 5 * w)
    out = jit(lambda ww: vmap(lambda v: v * lax.psum(ww, "i"), axis_name="i")(x))(w)
    close(out, x * 5 * w)


# ------------------------------------------------------------------ data movement

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_all_gather_untiled(axis):
    x = rng(4, 2, 3)
    out = vmap(lambda v: lax.all_gather(v, "i", axis=axis), axis_name="i")(x)
    close(out, np.broadcast_to(np.moveaxis(x, 0, axis % 3), (4,) + np.moveaxis(x, 0, axis % 3).shape))


@pytest.mark.parametrize("axis", [0, 1])
def test_all_gather_tiled(axis):
    x = rng(4, 2, 3)
    out = vmap(lambda v: lax.all_gather(v, "i", axis=axis, tiled=True), axis_name="i")(x)
    want = np.concatenate(list(x), axis=axis)
    close(out, np.broadcast_to(want, (4,) + want.shape))


def test_psum_scatter():
    x = rng(4, 4, 3)
    close(vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(x), x.sum(0))
    y = rng(4, 3, 8, seed=1)
    out = vmap(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True),
               axis_name="i")(y)
    s = y.sum(0)
    close(out, np.stack([s[:, 2 * k:2 * k + 2] for k in range(4)]))
    with pytest.raises(TypeError, match="must equal the axis size 4"):
        vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(rng(4, 3))


def test_ppermute_rotations_and_zeros():
    x = rng(5, 3)
    right = [(k, (k + 1) % 5) for k in range(5)]
    close(vmap(lambda v: lax.ppermute(v, "i", right), axis_name="i")(x), np.roll(x, 1, axis=0))
    left = [(k, (k - 1) % 5) for k in range(5)]
    close(vmap(lambda v: lax.ppermute(v, "i", left), axis_name="i")(x), np.roll(x, -1, axis=0))
    # a shift without wrap-around: index 0 receives nothing, so zeros
    shift = [(k, k + 1) for k in range(4)]
    want = np.concatenate([np.zeros((1, 3), f32), x[:4]])
    close(vmap(lambda v: lax.ppermute(v, "i", shift), axis_name="i")(x), want)
    # an unbatched value sent along a partial permutation varies: zeros where unsent
    c = np.arange(3, dtype=f32)
    out = vmap(lambda v: v * 0 + lax.ppermute(jnp.asarray(c), "i", shift), axis_name="i")(x)
    close(out, np.concatenate([np.zeros((1, 3), f32), np.broadcast_to(c, (4, 3))]))


def test_pshuffle_and_perm_errors():
    x = rng(4, 2)
    perm = [2, 0, 3, 1]
    close(vmap(lambda v: lax.pshuffle(v, "i", perm), axis_name="i")(x), x[perm])
    with pytest.raises(ValueError, match="must be unique"):
        vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]), axis_name="i")(x)
    with pytest.raises(ValueError, match="outside the axis"):
        vmap(lambda v: lax.ppermute(v, "i", [(0, 4)]), axis_name="i")(x)
    with pytest.raises(ValueError, match="does not represent a permutation"):
        vmap(lambda v: lax.pshuffle(v, "i", [0, 0, 1, 2]), axis_name="i")(x)


def a2a_reference(x, split, concat, tiled):
    """all_to_all simulated with one value per index along x's leading axis."""
    n = x.shape[0]
    outs = []
    for k in range(n):
        blocks = [np.split(x[j], n, axis=split)[k] for j in range(n)]
        if tiled:
            outs.append(np.concatenate(blocks, axis=concat))
        else:
            blocks = [np.squeeze(b, axis=split) for b in blocks]
            outs.append(np.stack(blocks, axis=concat))
    return np.stack(outs)


@pytest.mark.parametrize("split,concat", [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (0, 2)])
def test_all_to_all_untiled(split, concat):
    shape = [2, 3, 5]
    shape[split] = 4
    x = rng(4, *shape)
    out = vmap(lambda v: lax.all_to_all(v, "i", split, concat), axis_name="i")(x)
    close(out, a2a_reference(x, split, concat, tiled=False))


@pytest.mark.parametrize("split,concat", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_all_to_all_tiled(split, concat):
    x = rng(4, 8, 12)
    out = vmap(lambda v: lax.all_to_all(v, "i", split, concat, tiled=True), axis_name="i")(x)
    close(out, a2a_reference(x, split, concat, tiled=True))


def test_all_to_all_size_errors():
    with pytest.raises(ValueError, match="equal x.shape"):
        vmap(lambda v: lax.all_to_all(v, "i", 0, 0), axis_name="i")(rng(4, 3))
    with pytest.raises(ValueError, match="divisible"):
        vmap(lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), axis_name="i")(rng(4, 6))


def test_axis_index_and_axis_size():
    x = rng(6, 2)
    out = vmap(lambda v: lax.axis_index("i"), axis_name="i")(x)
    assert out.dtype == np.int32
    close(out, np.arange(6))
    close(vmap(lambda v: v * lax.axis_index("i"), axis_name="i")(x), x * np.arange(6)[:, None])
    assert vmap(lambda v: lax.axis_size("i") + 0 * v, axis_name="i")(x)[0, 0] == 6
    # no mapped input: axis_size gives the size
    out = vmap(lambda _: lax.axis_index("i"), in_axes=None, axis_size=3, axis_name="i")(0)
    close(out, np.arange(3))


# ------------------------------------------------------------------ nesting and jit

def test_nested_named_vmaps():
    x = rng(2, 3, 4)
    inner = lambda f: vmap(f, axis_name="j")  # noqa: E731
    run = lambda f: vmap(inner(f), axis_name="i")(x)  # noqa: E731
    close(run(lambda v: lax.psum(v, "i")), np.broadcast_to(x.sum(0, keepdims=True), x.shape))
    close(run(lambda v: lax.psum(v, "j")), np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    close(run(lambda v: lax.psum(v, ("i", "j"))), np.broadcast_to(x.sum((0, 1)), x.shape))
    close(run(lambda v: lax.pmax(v, ("j", "i"))), np.broadcast_to(x.max((0, 1)), x.shape))
    close(run(lambda v: lax.axis_index("i") + 0 * v[0]), np.broadcast_to(np.arange(2)[:, None], (2, 3)))
    close(run(lambda v: lax.axis_index(("i", "j")) + 0 * v[0]), np.arange(6).reshape(2, 3))
    # gathering over the outer axis inside the inner vmap
    out = run(lambda v: lax.all_gather(v, "i"))
    close(out, np.broadcast_to(np.moveaxis(x, 0, 1)[None], (2, 3, 2, 4)))
    out = run(lambda v: lax.all_gather(v, ("i", "j")))
    close(out, np.broadcast_to(x.reshape(6, 4), (2, 3, 6, 4)))
    out = run(lambda v: lax.all_gather(v, ("i", "j"), tiled=True))
    close(out, np.broadcast_to(x.reshape(24), (2, 3, 24)))
    # a shift along the outer axis, inside the inner one
    out = run(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 0)]))
    close(out, x[::-1])


def test_psum_scatter_over_two_names():
    x = rng(2, 3, 12)
    out = vmap(vmap(lambda v: lax.psum_scatter(v, ("i", "j"), tiled=True), axis_name="j"),
               axis_name="i")(x)
    s = x.sum((0, 1))
    close(out, np.stack([np.stack([s[2 * (3 * a + b):2 * (3 * a + b) + 2] for b in range(3)])
                         for a in range(2)]))


def test_inner_name_shadows_outer():
    x = rng(2, 3)
    out = vmap(vmap(lambda v: lax.psum(v, "i"), axis_name="i"), axis_name="i")(x)
    close(out, np.broadcast_to(x.sum(1, keepdims=True), x.shape))


def test_jit_of_vmap_and_vmap_of_jit():
    x = rng(4, 3)
    f = jit(vmap(lambda v: v - lax.pmean(v, "i"), axis_name="i"))
    close(f(x), x - x.mean(0))
    close(f(x + 1), x - x.mean(0))
    g = jit(lambda v: lax.psum(v, "i") * v)
    close(vmap(g, axis_name="i")(x), x.sum(0) * x)
    h = jit(lambda v: lax.all_gather(v, "i"))
    close(vmap(vmap(h, axis_name="i"), axis_name="j")(rng(2, 4, 3)),
          np.broadcast_to(rng(2, 4, 3)[:, None], (2, 4, 4, 3)))


def test_make_jaxpr_prints_the_collective_until_batched():
    seen = []

    def f(v):
        seen.append(str(olympus.make_jaxpr(lambda u: lax.psum(u, "i") + lax.axis_index("i"))(v)))
        return v
    vmap(f, axis_name="i")(rng(3, 2))
    assert "psum[axes=('i',)]" in seen[0] and "axis_index[axis_name=('i',)]" in seen[0]
    # batched over its own axis nothing collective is left
    text = str(olympus.make_jaxpr(vmap(lambda v: lax.psum(v, "i"), axis_name="i"))(rng(3, 2)))
    assert "psum" not in text and "reduce_sum" in text


def test_control_flow_bodies_see_the_axis():
    x = rng(4, 2)
    out = vmap(lambda v: lax.fori_loop(0, 3, lambda k, c: c + lax.axis_index("i"), 0),
               axis_name="i")(x)
    close(out, 3 * np.arange(4))

    def body(c, xs):
        return c + lax.psum(xs, "i"), c
    carry, ys = vmap(lambda v: lax.scan(body, jnp.zeros(()), v), axis_name="i")(x)
    close(carry, np.full(4, x.sum()))
    close(ys, np.broadcast_to(np.array([0.0, x[:, 0].sum()]), (4, 2)))
    out = vmap(lambda v: lax.cond(lax.axis_index("i") % 2 == 0, lambda u: lax.psum(u, "i"),
                                  lambda u: -u, v), axis_name="i")(x)
    want = np.where((np.arange(4) % 2 == 0)[:, None], x.sum(0), -x)
    close(out, want)


# ------------------------------------------------------------------ derivatives

def test_check_grads_through_collectives():
    x = rng(4, 3, dtype=np.float64)
    w = rng(4, 3, seed=2, dtype=np.float64)
    rot = [(k, (k + 1) % 4) for k in range(4)]
    fs = [
        lambda a: vmap(lambda v: v * lax.psum(v, "i"), axis_name="i")(a),
        lambda a: vmap(lambda v: jnp.sin(lax.all_gather(v, "i")), axis_name="i")(a),
        lambda a: vmap(lambda v: lax.all_gather(v, "i", tiled=True) ** 2, axis_name="i")(a),
        lambda a: vmap(lambda v, u: lax.ppermute(v * u, "i", rot), axis_name="i")(a, w),
        lambda a: vmap(lambda v: lax.pmean(v ** 3, "i") * v, axis_name="i")(a),
        lambda a: vmap(lambda v: lax.all_to_all(jnp.tile(v[:, None], (1, 4)) ** 2, "i", 1, 0),
                       axis_name="i")(a),
        lambda a: vmap(lambda v: lax.pmax(v, "i") * v, axis_name="i")(a),
    ]
    for f in fs:
        check_grads(f, (x,), order=2)


def test_check_grads_psum_scatter():
    x = rng(4, 4, 3, dtype=np.float64)
    check_grads(lambda a: vmap(lambda v: jnp.tanh(lax.psum_scatter(v, "i")), axis_name="i")(a),
                (x,), order=2)


def test_grad_inside_vmap_follows_jax():
    """Differentiating inside the vmap sees the collectives themselves: JAX
    transposes psum to psum, so d/dx_k psum(x ** 2) is 2 x_k times the axis
    size; all_gather transposes to psum_scatter, ppermute to the inverse
    permutation."""
    x = rng(4, 3)
    gi = vmap(grad(lambda v: jnp.sum(lax.psum(v ** 2, "i"))), axis_name="i")(x)
    close(gi, 2 * x * 4)
    w = rng(4, 3, seed=3)
    gi = vmap(grad(lambda v: jnp.sum(lax.all_gather(v, "i") * jnp.asarray(w))), axis_name="i")(x)
    close(gi, 4 * w)
    rot = [(k, (k + 1) % 4) for k in range(4)]
    gi = vmap(lambda v, u: grad(lambda a: jnp.sum(lax.ppermute(a, "i", rot) * u))(v),
              axis_name="i")(x, w)
    close(gi, np.roll(w, -1, axis=0))
    # pmax has no derivative rule (as in JAX); under vmap first it is a reduce_max
    with pytest.raises(NotImplementedError, match="pmax has no JVP rule"):
        vmap(grad(lambda v: jnp.sum(lax.pmax(v, "i"))), axis_name="i")(x)


def test_jvp_inside_vmap():
    x, t = rng(4, 3), rng(4, 3, seed=5)
    p, tout = vmap(lambda a, b: olympus.jvp(lambda v: lax.psum(jnp.sin(v), "i"), (a,), (b,)),
                   axis_name="i")(x, t)
    close(p, np.broadcast_to(np.sin(x).sum(0), x.shape))
    close(tout, np.broadcast_to((np.cos(x) * t).sum(0), x.shape))


# ------------------------------------------------------------------ errors

def test_unbound_axis_name():
    x = rng(3)
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(x, "i")
    with pytest.raises(NameError, match="unbound axis name: k"):
        vmap(lambda v: lax.psum(v, "k"), axis_name="i")(x)
    with pytest.raises(NameError, match="unbound axis name: i"):
        jit(lambda v: lax.all_gather(v, "i"))(x)
    with pytest.raises(NameError, match="unbound axis name: i"):
        vmap(lambda v: lax.axis_index("i"))(x)  # an unnamed vmap binds no name
    with pytest.raises(NameError, match="unbound axis name: j"):
        vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="i")(x)
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.axis_size("i")


def test_axis_name_types():
    with pytest.raises(TypeError, match="axis names are strings"):
        vmap(lambda v: v, axis_name=0)
    with pytest.raises(TypeError, match="axis names are strings"):
        vmap(lambda v: lax.psum(v, 1), axis_name="i")(rng(3))
    # spmd_axis_name is accepted (no mesh yet)
    close(vmap(lambda v: lax.psum(v, "i"), axis_name="i", spmd_axis_name="d")(np.ones(3, f32)),
          np.full(3, 3.0))


def test_jit_cache_is_keyed_by_the_axis_environment():
    """A function traced under a vmap binding i is cached under that binding:
    called where nothing binds i it is traced again and the collective raises
    NameError at trace time; under a vmap of another size it is traced again
    for that size."""
    g = jit(lambda v: lax.all_gather(v, "i"))
    close(vmap(g, axis_name="i")(rng(3, 2)), np.broadcast_to(rng(3, 2), (3, 3, 2)))
    with pytest.raises(NameError, match="unbound axis name: i"):
        g(rng(2))
    close(vmap(g, axis_name="i")(rng(5, 2)), np.broadcast_to(rng(5, 2), (5, 5, 2)))
    close(vmap(g, axis_name="i")(rng(3, 2)), np.broadcast_to(rng(3, 2), (3, 3, 2)))

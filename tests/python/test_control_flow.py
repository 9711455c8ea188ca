"""olympus.lax control flow: cond, switch, while_loop, fori_loop, scan, map —
values against Python loops, closures over traced values, composition with
jit / vmap / grad, and the errors for mismatched bodies."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import grad, jit, lax, vmap

f32 = np.float32


def rng(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(f32)


@pytest.fixture(params=["eager", "jit"])
def run(request):
    return (lambda f: f) if request.param == "eager" else jit


# ---------------------------------------------------------------- cond / switch

def test_cond_both_branches(run):
    f = run(lambda p, x: lax.cond(p, lambda v: v + 1.0, lambda v: v - 1.0, x))
    assert float(f(True, 3.0)) == 4.0
    assert float(f(False, 3.0)) == 2.0
    assert float(f(jnp.int32(5), 3.0)) == 4.0  # nonzero int is true


def test_cond_pytree_operands_and_outputs(run):
    def f(p, d):
        return lax.cond(p, lambda t: {"s": t["a"] + t["b"], "k": t["a"]},
                        lambda t: {"s": t["a"] - t["b"], "k": t["b"]}, d)

    d = {"a": jnp.float32(5.0), "b": jnp.float32(2.0)}
    out = run(f)(True, d)
    assert float(out["s"]) == 7.0 and float(out["k"]) == 5.0
    out = run(f)(False, d)
    assert float(out["s"]) == 3.0 and float(out["k"]) == 2.0


def test_cond_branches_close_over_different_values():
    @jit
    def f(p, x, a, b):
        return lax.cond(p, lambda v: v * a, lambda v: v + b, x)

    assert float(f(True, 2.0, 10.0, 100.0)) == 20.0
    assert float(f(False, 2.0, 10.0, 100.0)) == 102.0


def test_cond_output_type_mismatch_raises():
    with pytest.raises(TypeError, match="identical types"):
        lax.cond(True, lambda x: x, lambda x: jnp.zeros(3), jnp.float32(1.0))
    with pytest.raises(TypeError, match="scalar"):
        lax.cond(jnp.array([True, False]), lambda: 1.0, lambda: 2.0)


def test_switch_and_clamping(run):
    branches = [lambda x: x, lambda x: x * 2.0, lambda x: x * 3.0]
    f = run(lambda i, x: lax.switch(i, branches, x))
    assert [float(f(i, 1.5)) for i in range(3)] == [1.5, 3.0, 4.5]
    assert float(f(7, 1.5)) == 4.5 and float(f(-3, 1.5)) == 1.5


def test_switch_errors():
    with pytest.raises(ValueError, match="Empty branch"):
        lax.switch(0, [], 1.0)
    with pytest.raises(TypeError, match="integer"):
        lax.switch(0.5, [lambda x: x, lambda x: x], 1.0)


def test_vmap_of_cond_batched_predicate_selects():
    x = jnp.arange(5.0)
    out = vmap(lambda v: lax.cond(v > 2, jnp.sin, jnp.cos, v))(x)
    ref = np.where(np.arange(5.0) > 2, np.sin(np.arange(5.0)), np.cos(np.arange(5.0)))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-6)


def test_vmap_of_cond_unbatched_predicate():
    x = jnp.arange(4.0)
    out = vmap(lambda v, p: lax.cond(p, lambda a: a * 2.0, lambda a: a, v),
               in_axes=(0, None))(x, True)
    np.testing.assert_array_equal(np.asarray(out), np.arange(4.0) * 2)


def test_grad_of_cond():
    f = lambda x: lax.cond(x > 0, lambda v: v * v * v, lambda v: -v, x)  # noqa: E731
    assert float(grad(f)(2.0)) == 12.0
    assert float(grad(f)(-2.0)) == -1.0


# ---------------------------------------------------------------- while / fori

def test_while_loop(run):
    f = run(lambda n: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0),
                                     (0, 1.0)))
    i, v = f(10)
    assert int(i) == 10 and float(v) == 1024.0
    i, v = f(0)
    assert int(i) == 0 and float(v) == 1.0


def test_while_loop_closure_in_cond_and_body():
    @jit
    def f(limit, step):
        return lax.while_loop(lambda x: x < limit, lambda x: x + step, 0.0)

    assert float(f(10.0, 3.0)) == 12.0


def test_while_loop_errors():
    with pytest.raises(TypeError, match="boolean scalar"):
        lax.while_loop(lambda x: x, lambda x: x, 1.0)
    with pytest.raises(TypeError, match="identical types"):
        lax.while_loop(lambda x: x < 3.0, lambda x: jnp.zeros(2), 1.0)


def test_fori_loop_static_and_dynamic_bounds():
    assert float(lax.fori_loop(0, 5, lambda i, c: c + i, 0.0)) == 10.0
    f = jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + i, 0.0))
    assert float(f(5)) == 10.0 and float(f(0)) == 0.0
    assert float(lax.fori_loop(3, 1, lambda i, c: c + 1.0, 0.0)) == 0.0
    text = str(olympus.make_jaxpr(lambda: lax.fori_loop(0, 3, lambda i, c: c + i, 0.0))())
    assert "scan" in text
    text = str(olympus.make_jaxpr(lambda n: lax.fori_loop(0, n, lambda i, c: c + i, 0.0))(3))
    assert "while" in text


def test_vmap_of_while_with_batched_predicate():
    n = jnp.array([1, 3, 5, 0])
    out = vmap(lambda k: lax.while_loop(lambda c: c[0] < k, lambda c: (c[0] + 1, c[1] * 2.0),
                                        (0, 1.0))[1])(n)
    np.testing.assert_array_equal(np.asarray(out), [2.0, 8.0, 32.0, 1.0])


def test_grad_of_fori_loop_static():
    f = lambda x: lax.fori_loop(0, 3, lambda i, c: c * x, 1.0)  # noqa: E731
    assert float(grad(f)(2.0)) == 12.0


# ---------------------------------------------------------------- scan / map

def test_scan_cumulative(run):
    xs = rng(6)

    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), 0.0, xs)

    c, ys = run(f)(xs)
    ref_c, ref_ys = 0.0, []
    for x in xs:
        ref_ys.append(ref_c * x)
        ref_c += x
    np.testing.assert_allclose(float(c), ref_c, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ys), ref_ys, rtol=1e-5, atol=1e-6)


def test_scan_reverse_length_and_no_xs():
    c, ys = lax.scan(lambda c, x: (c + x, c), 0.0, jnp.arange(4.0), reverse=True)
    assert float(c) == 6.0
    np.testing.assert_array_equal(np.asarray(ys), [6.0, 5.0, 3.0, 0.0])
    c, ys = lax.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
    assert float(c) == 16.0
    np.testing.assert_array_equal(np.asarray(ys), [1.0, 2.0, 4.0, 8.0])


def test_scan_pytree_carry_and_outputs():
    xs = {"a": jnp.arange(3.0), "b": jnp.ones((3, 2))}

    def body(c, x):
        return {"n": c["n"] + 1, "s": c["s"] + x["a"]}, (x["b"] * c["s"], x["a"])

    c, (y1, y2) = lax.scan(body, {"n": 0, "s": 0.0}, xs)
    assert int(c["n"]) == 3 and float(c["s"]) == 3.0
    np.testing.assert_array_equal(np.asarray(y1), [[0, 0], [0, 0], [1, 1]])
    np.testing.assert_array_equal(np.asarray(y2), [0, 1, 2])


def test_scan_errors():
    with pytest.raises(ValueError, match="no values to scan over"):
        lax.scan(lambda c, x: (c, x), 0.0, None)
    with pytest.raises(ValueError, match="disagrees with leading axis sizes"):
        lax.scan(lambda c, x: (c, x), 0.0, jnp.ones(3), length=4)
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        lax.scan(lambda c, x: (jnp.zeros(2), x), 0.0, jnp.ones(3))
    with pytest.raises(TypeError, match="pair"):
        lax.scan(lambda c, x: c, 0.0, jnp.ones(3))


def test_scan_closure_over_jit_value():
    @jit
    def f(w, xs):
        return lax.scan(lambda c, x: (c + x * w, None), 0.0, xs)[0]

    assert float(f(2.0, jnp.arange(4.0))) == 12.0


def test_grad_of_scan():
    def f(x):
        return lax.scan(lambda c, xi: (c * x + xi, None), 1.0, jnp.arange(3.0))[0]

    # c3 = x^3 + x + 2
    assert float(grad(f)(2.0)) == 13.0
    olympus.config.update("olympus_enable_x64", True)
    xs = np.random.default_rng(3).standard_normal(5)

    def g(w):
        return jnp.sum(lax.scan(lambda c, x: (jnp.sin(c) * w + x, c * c), 0.5, xs)[1])

    def g_np(w):
        c, tot = 0.5, 0.0
        for x in xs:
            tot += c * c
            c = np.sin(c) * w + x
        return tot

    eps = 1e-6
    fd = (g_np(0.7 + eps) - g_np(0.7 - eps)) / (2 * eps)
    np.testing.assert_allclose(float(grad(g)(0.7)), fd, rtol=1e-6)


def test_vmap_of_scan():
    xs = rng(4, 5)
    c, ys = vmap(lambda r: lax.scan(lambda c, x: (c + x, c), 0.0, r))(xs)
    np.testing.assert_allclose(np.asarray(c), xs.sum(1), rtol=1e-5)
    ref = np.concatenate([np.zeros((4, 1), f32), np.cumsum(xs, 1)[:, :-1]], 1)
    np.testing.assert_allclose(np.asarray(ys), ref, rtol=1e-5, atol=1e-6)


def test_map():
    xs = rng(5, 2)
    np.testing.assert_allclose(np.asarray(lax.map(lambda r: jnp.sum(r * r), xs)),
                               (xs * xs).sum(1), rtol=1e-6)


def test_jvp_of_while_forward_mode():
    f = lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * x, 1.0)  # noqa: E731
    y, t = olympus.jvp(f, (3.0,), (1.0,))
    # 1 -> 3 -> 9 -> 27: y = x^3, dy/dx = 3x^2
    assert float(y) == 27.0 and float(t) == 27.0


def test_reverse_mode_of_while_loop_raises():
    f = lambda w: lax.while_loop(lambda c: c < 5.0, lambda c: c + w, 0.0)  # noqa: E731
    with pytest.raises((ValueError, NotImplementedError),
                       match="Reverse-mode differentiation does not work for lax.while_loop"):
        grad(f)(2.0)
    g = lambda w: lax.while_loop(lambda c: c < 5.0, lambda c: c * w + 1.0, 1.0)  # noqa: E731
    with pytest.raises((ValueError, NotImplementedError),
                       match="Reverse-mode differentiation does not work for lax.while_loop"):
        grad(g)(2.0)
    y, t = olympus.jvp(f, (2.0,), (1.0,))  # forward mode works: 0, 2, 4, 6
    assert float(y) == 6.0 and float(t) == 3.0


@pytest.mark.parametrize("x64", [False, True])
def test_weak_initial_carry_takes_the_body_dtype(x64):
    olympus.config.update("olympus_enable_x64", x64)
    xs = jnp.arange(3, dtype=jnp.float32)
    c, ys = lax.scan(lambda c, x: (c + x, c), 0.0, xs)
    assert c.dtype == np.float32 and float(c) == 3.0
    np.testing.assert_array_equal(np.asarray(ys), [0.0, 0.0, 1.0])
    out = lax.fori_loop(0, 3, lambda i, c: c + xs[i], 0.0)
    assert out.dtype == np.float32 and float(out) == 3.0
    out = lax.while_loop(lambda c: c < 3, lambda c: c + jnp.float32(1), 0.0)
    assert out.dtype == np.float32 and float(out) == 3.0
    assert float(lax.scan(lambda c, x: (c + 0.5, c), 0, xs)[0]) == 1.5
    with pytest.raises(TypeError, match="carry input and carry output"):
        lax.scan(lambda c, x: (jnp.int32(1), c), 0.5, xs)

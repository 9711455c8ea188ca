"""Autodiff: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian, linear_transpose and checkpoint, checked against analytic
derivatives and central finite differences (float64 with x64 on)."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import grad, jvp, lax, vjp, vmap

f32 = np.float32


def rng(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(f32)


def fd_grad(f, x, eps=1e-3):
    """Central finite differences of scalar f at float64 x."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def test_grad_scalar_functions():
    assert np.isclose(float(grad(lambda x: x * x * x)(2.0)), 12.0)
    np.testing.assert_allclose(float(grad(jnp.sin)(1.0)), np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(float(grad(lambda x: jnp.exp(x) * jnp.log(x))(2.0)),
                               np.exp(2) * np.log(2) + np.exp(2) / 2, rtol=1e-5)
    np.testing.assert_allclose(float(grad(lambda x: jnp.tanh(x) / (1.0 + x * x))(0.3)),
                               fd_grad(lambda x: np.tanh(x) / (1 + x * x), 0.3), rtol=1e-4)


def test_grad_matches_finite_differences_x64():
    olympus.config.update("olympus_enable_x64", True)
    x = np.random.default_rng(1).standard_normal((3, 2))

    def f(a):
        return jnp.sum(jnp.sin(a) * a ** 2) + jnp.sum(a @ a.T)

    g = grad(f)(x)
    assert g.dtype == np.float64 and g.shape == (3, 2)
    ref = fd_grad(lambda a: np.sum(np.sin(a) * a ** 2) + np.sum(a @ a.T), x, eps=1e-6)
    np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-6, atol=1e-8)


def test_grad_argnums_and_has_aux():
    f = lambda x, y: x * y * y  # noqa: E731
    gx, gy = grad(f, argnums=(0, 1))(3.0, 2.0)
    assert float(gx) == 4.0 and float(gy) == 12.0
    assert float(grad(f, argnums=1)(3.0, 2.0)) == 12.0
    assert float(grad(f, argnums=-1)(3.0, 2.0)) == 12.0
    g, aux = grad(lambda x: (x * x, {"v": x + 1}), has_aux=True)(3.0)
    assert float(g) == 6.0 and float(aux["v"]) == 4.0


def test_value_and_grad():
    v, g = olympus.value_and_grad(lambda x: jnp.sum(x ** 2))(jnp.arange(3.0))
    assert float(v) == 5.0
    np.testing.assert_array_equal(np.asarray(g), [0.0, 2.0, 4.0])
    (v, aux), g = olympus.value_and_grad(lambda x: (x * 2.0, [x]), has_aux=True)(1.5)
    assert float(v) == 3.0 and float(aux[0]) == 1.5 and float(g) == 2.0


def test_grad_pytree_argument():
    params = {"w": jnp.array([1.0, 2.0]), "b": jnp.float32(0.5)}
    g = grad(lambda p, x: jnp.sum(p["w"] * x) + p["b"])(params, jnp.array([3.0, 4.0]))
    np.testing.assert_array_equal(np.asarray(g["w"]), [3.0, 4.0])
    assert float(g["b"]) == 1.0


def test_grad_non_scalar_output_raises():
    with pytest.raises(TypeError, match="Gradient only defined for scalar-output functions"):
        grad(lambda x: x * 2.0)(jnp.ones(3))


def test_grad_integer_input_raises():
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs"):
        grad(lambda x: x * 2)(3)


def test_grad_integer_output_raises():
    with pytest.raises(TypeError, match="real-valued outputs"):
        grad(lambda x: jnp.int32(1), allow_int=True)(1.0)


def test_jvp_values_and_int_inputs_have_zero_tangents():
    y, t = jvp(lambda x: jnp.sin(x) * 3.0, (jnp.float32(0.5),), (jnp.float32(2.0),))
    np.testing.assert_allclose(float(y), 3 * np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(float(t), 6 * np.cos(0.5), rtol=1e-6)
    y, t = jvp(lambda x, n: x * n, (jnp.float32(2.0), jnp.int32(3)),
               (jnp.float32(1.0), jnp.int32(0)))
    assert float(y) == 6.0 and float(t) == 3.0
    y, t = jvp(lambda n: n * 2, (jnp.int32(3),), (jnp.int32(1),))
    assert int(y) == 6 and int(t) == 0


def test_jvp_errors():
    with pytest.raises(TypeError, match="tuples or lists"):
        jvp(jnp.sin, 1.0, 1.0)
    with pytest.raises(ValueError, match="shape"):
        jvp(jnp.sin, (jnp.ones(3),), (jnp.ones(2),))


def test_jvp_has_aux():
    y, t, aux = jvp(lambda x: (x * x, x + 10.0), (3.0,), (1.0,), has_aux=True)
    assert float(y) == 9.0 and float(t) == 6.0 and float(aux) == 13.0


def test_linearize_reuses_the_linear_function():
    x = rng(4)
    y, f_jvp = olympus.linearize(lambda a: jnp.sin(a) * a, x)
    np.testing.assert_allclose(np.asarray(y), np.sin(x) * x, rtol=1e-6)
    for v in (np.ones(4, f32), rng(4, seed=3)):
        np.testing.assert_allclose(np.asarray(f_jvp(v)), (np.cos(x) * x + np.sin(x)) * v,
                                   rtol=1e-5)


def test_vjp_non_scalar():
    x = rng(3)
    y, pb = vjp(lambda a: jnp.exp(a) * 2.0, x)
    ct = rng(3, seed=4)
    (g,) = pb(ct)
    np.testing.assert_allclose(np.asarray(g), 2 * np.exp(x) * ct, rtol=1e-5)
    with pytest.raises(ValueError, match="tree structure"):
        pb((ct, ct))


def test_vjp_int_input_gets_zero_cotangent():
    _, pb = vjp(lambda x, n: x * n, jnp.float32(2.0), jnp.int32(3))
    gx, gn = pb(jnp.float32(1.0))
    assert float(gx) == 3.0 and int(gn) == 0


def test_jacfwd_jacrev_match():
    a = rng(3, 3)

    def f(x):
        return jnp.tanh(a @ x) * x

    x = rng(3, seed=1)
    jf = np.asarray(olympus.jacfwd(f)(x))
    jr = np.asarray(olympus.jacrev(f)(x))
    assert jf.shape == (3, 3) and jr.shape == (3, 3)
    t = np.tanh(a @ x)
    ref = (1 - t ** 2)[:, None] * a * x[:, None] + np.diag(t)
    np.testing.assert_allclose(jf, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jr, ref, rtol=1e-5, atol=1e-6)


def test_jacobian_shapes_matrix_input():
    x = rng(2, 3)
    j = olympus.jacrev(lambda m: jnp.sum(m, axis=1))(x)
    assert j.shape == (2, 2, 3)
    j2 = olympus.jacfwd(lambda m: jnp.sum(m, axis=1))(x)
    np.testing.assert_array_equal(np.asarray(j), np.asarray(j2))
    ref = np.zeros((2, 2, 3), f32)
    ref[0, 0] = ref[1, 1] = 1
    np.testing.assert_array_equal(np.asarray(j), ref)


def test_hessian_of_quadratic_and_cubic():
    a = rng(3, 3)
    sym = a + a.T
    h = olympus.hessian(lambda x: 0.5 * x @ (sym @ x))(rng(3, seed=2))
    np.testing.assert_allclose(np.asarray(h), sym, rtol=1e-5, atol=1e-5)
    h = olympus.hessian(lambda x: x ** 3)(2.0)
    assert float(h) == 12.0


def test_grad_of_grad():
    assert float(grad(grad(lambda x: x ** 4))(2.0)) == 48.0
    np.testing.assert_allclose(float(grad(grad(jnp.sin))(0.7)), -np.sin(0.7), rtol=1e-6)


def test_grad_under_jit_and_jit_under_grad():
    g = olympus.jit(grad(lambda x: jnp.sum(jnp.cos(x))))
    x = rng(4)
    np.testing.assert_allclose(np.asarray(g(x)), -np.sin(x), rtol=1e-6)
    h = grad(olympus.jit(lambda x: jnp.sum(jnp.cos(x) ** 2)))
    np.testing.assert_allclose(np.asarray(h(x)), -2 * np.cos(x) * np.sin(x), rtol=1e-5)


def test_per_example_gradients_vmap_of_grad():
    w = rng(3)
    xs = rng(5, 3, seed=1)
    g = vmap(grad(lambda w, x: jnp.sum(w * x) ** 2), in_axes=(None, 0))(w, xs)
    ref = 2 * (xs @ w)[:, None] * xs
    np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-5)


def test_grad_closes_over_outer_tracer():
    @olympus.jit
    def f(x, s):
        return grad(lambda y: jnp.sum(y * y * s))(x)

    x = rng(3)
    np.testing.assert_allclose(np.asarray(f(x, 3.0)), 6 * x, rtol=1e-6)


def test_linear_transpose():
    a = rng(2, 3)
    ft = olympus.linear_transpose(lambda x: a @ x * 2.0, jnp.zeros(3))
    ct = rng(2, seed=1)
    (out,) = ft(ct)
    np.testing.assert_allclose(np.asarray(out), 2 * a.T @ ct, rtol=1e-5)
    ft2 = olympus.linear_transpose(lambda x, n: x * 3.0, jnp.zeros(2), jnp.int32(1))
    gx, gn = ft2(jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(gx), [3.0, 3.0])
    assert int(gn) == 0


def test_checkpoint_values_and_gradient():
    f = lambda x: jnp.sin(jnp.sin(x)) * x  # noqa: E731
    g1 = grad(f)(0.8)
    g2 = grad(olympus.checkpoint(f))(0.8)
    np.testing.assert_allclose(float(g1), float(g2), rtol=1e-6)
    assert olympus.remat is olympus.checkpoint
    np.testing.assert_allclose(float(olympus.checkpoint(f)(0.8)), float(f(0.8)), rtol=1e-6)


def test_checkpoint_reruns_debug_callback_in_backward_pass(capsys):
    def f(x):
        y = jnp.sin(x)
        olympus.debug.print("y={y:.3f}", y=y)
        return y * y

    grad(f)(1.0)
    assert capsys.readouterr().out == "y=0.841\n"
    g = grad(olympus.checkpoint(f))(1.0)
    assert capsys.readouterr().out == "y=0.841\ny=0.841\n"
    np.testing.assert_allclose(float(g), 2 * np.sin(1) * np.cos(1), rtol=1e-6)


def test_stop_gradient_like_constants_and_closure_constants():
    c = jnp.array([1.0, 2.0])
    g = grad(lambda x: jnp.sum(c * x))(jnp.zeros(2))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 2.0])


def test_stop_gradient():
    assert float(grad(lambda x: x * lax.stop_gradient(x * x))(3.0)) == 9.0
    out = lax.stop_gradient({"a": 2.0, "n": jnp.arange(3)})
    assert float(out["a"]) == 2.0 and out["n"].dtype == np.int32
    np.testing.assert_array_equal(
        np.asarray(vmap(grad(lambda x: x * lax.stop_gradient(x)))(jnp.arange(3.0))), [0, 1, 2])


def test_grad_inside_vmap_closes_over_batched_value():
    xs = jnp.arange(3.0)
    f = lambda x: grad(lambda w: w * w * x)(1.0)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(vmap(f)(xs)), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(olympus.jit(vmap(f))(xs)), [0.0, 2.0, 4.0])


def test_jacobians_has_aux_and_argnums_tuple():
    xs = jnp.arange(3.0)
    j, aux = olympus.jacfwd(lambda x: (x * 2.0, x.sum()), has_aux=True)(xs)
    np.testing.assert_array_equal(np.asarray(j), 2 * np.eye(3))
    assert float(aux) == 3.0
    jx, jy = olympus.jacrev(lambda x, y: x * y, argnums=(0, 1))(xs, 2.0)
    np.testing.assert_array_equal(np.asarray(jx), 2 * np.eye(3))
    np.testing.assert_array_equal(np.asarray(jy), [0.0, 1.0, 2.0])
    h = olympus.hessian(lambda x, y: jnp.sum(x * x * y))(xs, 2.0)
    np.testing.assert_array_equal(np.asarray(h), 4 * np.eye(3))


def test_make_jaxpr_of_grad_is_one_program():
    text = str(olympus.make_jaxpr(grad(lambda x: jnp.sum(x * x)))(jnp.arange(3.0)))
    assert "reduce_sum" in text and "pjit" not in text


def test_checkpoint_is_one_remat_equation_and_composes():
    f = olympus.checkpoint(lambda x: jnp.sin(x) * x)
    text = str(olympus.make_jaxpr(f)(1.0))
    assert "remat" in text and "sin" in text
    ref = np.cos(1.0) * 1.0 + np.sin(1.0)
    y, t = jvp(f, (1.0,), (1.0,))
    np.testing.assert_allclose(float(t), ref, rtol=1e-6)
    np.testing.assert_allclose(float(olympus.jacfwd(f)(1.0)), ref, rtol=1e-6)
    np.testing.assert_allclose(float(olympus.hessian(f)(1.0)),
                               2 * np.cos(1.0) - np.sin(1.0), rtol=1e-5)
    xs = jnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(vmap(f)(xs)), np.sin(np.arange(3.0)) * np.arange(3.0),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vmap(grad(f))(xs)),
                               np.cos(np.arange(3.0)) * np.arange(3.0) + np.sin(np.arange(3.0)),
                               rtol=1e-6)
    g = olympus.checkpoint(lambda x, n: x * n, static_argnums=(1,))
    assert float(grad(g)(2.0, 3)) == 3.0


def test_checkpoint_callbacks_under_jvp_and_jit_grad(capsys):
    def f(x):
        y = jnp.sin(x)
        olympus.debug.print("y={y:.3f}", y=y)
        return y * x

    c = olympus.checkpoint(f)
    jvp(c, (1.0,), (1.0,))
    assert capsys.readouterr().out == "y=0.841\n"  # forward mode: once
    olympus.jit(grad(c))(1.0)
    assert capsys.readouterr().out == "y=0.841\ny=0.841\n"  # forward + recompute


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_of_pytrees(jac):
    f = lambda p: {"s": jnp.sum(p["a"] * p["b"]), "v": p["a"] * 2.0}  # noqa: E731
    p = {"a": jnp.arange(2.0), "b": jnp.ones(2)}
    j = getattr(olympus, jac)(f)(p)
    assert j["s"]["a"].shape == (2,) and j["v"]["b"].shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(j["v"]["a"]), 2 * np.eye(2))
    np.testing.assert_array_equal(np.asarray(j["v"]["b"]), np.zeros((2, 2)))
    np.testing.assert_array_equal(np.asarray(j["s"]["b"]), [0.0, 1.0])
    np.testing.assert_array_equal(np.asarray(j["s"]["a"]), [1.0, 1.0])

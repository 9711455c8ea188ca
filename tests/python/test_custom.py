"""custom_jvp and custom_vjp: the rule is what differentiation uses, it is
traced lazily (only when a transformation needs it, so self-referential
rules terminate), and it composes with jit, vmap and higher order."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import grad, jit, jvp, vmap

f32 = np.float32


def make_softplus():
    traces = []

    @olympus.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    @softplus.defjvp
    def _jvp(primals, tangents):
        traces.append(1)
        (x,), (t,) = primals, tangents
        # deliberately 2x the true derivative, so the test sees the rule is used
        return softplus(x), 2.0 * t / (1.0 + jnp.exp(-x))
    return softplus, traces


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_custom_jvp_primal_does_not_trace_rule():
    sp, traces = make_softplus()
    np.testing.assert_allclose(float(sp(1.0)), np.log1p(np.exp(1.0)), rtol=1e-6)
    np.testing.assert_allclose(float(jit(sp)(1.0)), np.log1p(np.exp(1.0)), rtol=1e-6)
    assert traces == []


def test_custom_jvp_rule_is_used_by_grad_and_jvp():
    sp, traces = make_softplus()
    np.testing.assert_allclose(float(grad(sp)(0.5)), 2 * sigmoid(0.5), rtol=1e-6)
    assert len(traces) >= 1
    y, t = jvp(sp, (0.5,), (3.0,))
    np.testing.assert_allclose(float(t), 6 * sigmoid(0.5), rtol=1e-6)
    np.testing.assert_allclose(float(y), np.log1p(np.exp(0.5)), rtol=1e-6)


def test_custom_jvp_under_jit_and_vmap():
    sp, _ = make_softplus()
    x = np.linspace(-2, 2, 5).astype(f32)
    np.testing.assert_allclose(np.asarray(vmap(sp)(x)), np.log1p(np.exp(x)), rtol=1e-6)
    g = jit(vmap(grad(sp)))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * sigmoid(x), rtol=1e-6)
    g = grad(lambda v: jnp.sum(vmap(sp)(v)))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * sigmoid(x), rtol=1e-6)


def test_custom_jvp_self_referential_rule_second_order():
    @olympus.custom_jvp
    def my_exp(x):
        return jnp.exp(x)

    @my_exp.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        y = my_exp(x)
        return y, y * t

    assert np.isclose(float(grad(grad(grad(my_exp)))(1.0)), np.e, rtol=1e-6)
    assert np.isclose(float(olympus.hessian(my_exp)(0.0)), 1.0)


def test_custom_jvp_defjvps():
    @olympus.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y * 10.0,
              lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)
    gx, gy = grad(f, argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose(float(gx), 10 * np.cos(0.5) * 2, rtol=1e-6)
    np.testing.assert_allclose(float(gy), np.sin(0.5), rtol=1e-6)


def test_custom_jvp_nondiff_argnums_static_function():
    from functools import partial

    @partial(olympus.custom_jvp, nondiff_argnums=(0,))
    def app(fn, x):
        return fn(x)

    @app.defjvp
    def _jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return app(fn, x), t * 7.0

    assert float(app(jnp.sin, 0.0)) == 0.0
    assert float(grad(lambda x: app(jnp.sin, x))(0.3)) == 7.0


def test_custom_jvp_integer_argument_and_where():
    @olympus.custom_jvp
    def f(n, x):
        return x * n

    @f.defjvp
    def _jvp(primals, tangents):
        n, x = primals
        _, t = tangents
        return f(n, x), t * n

    assert float(grad(f, argnums=1)(3, 2.0)) == 3.0


def test_custom_jvp_without_rule_raises():
    f = olympus.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined"):
        f(1.0)


def test_custom_jvp_bad_rule_output_raises_original_error():
    @olympus.custom_jvp
    def f(x):
        return x * 2.0

    @f.defjvp
    def _jvp(primals, tangents):
        return primals[0]  # not a pair

    assert float(f(1.0)) == 2.0
    with pytest.raises(TypeError, match="must produce a pair"):
        grad(f)(1.0)

    @olympus.custom_jvp
    def g(x):
        return x

    @g.defjvp
    def _jvp2(primals, tangents):
        raise KeyError("inside the rule")

    with pytest.raises(KeyError, match="inside the rule"):
        grad(g)(1.0)


# ---------------------------------------------------------------- custom_vjp

def make_clip_grad():
    calls = {"fwd": 0, "bwd": 0}

    @olympus.custom_vjp
    def f(x, y):
        return x * y

    def fwd(x, y):
        calls["fwd"] += 1
        return f(x, y), (x, y)

    def bwd(res, g):
        calls["bwd"] += 1
        x, y = res
        return (jnp.clip(g * y, -1.0, 1.0), g * x * 100.0)

    f.defvjp(fwd, bwd)
    return f, calls


def test_custom_vjp_primal_and_gradients():
    f, calls = make_clip_grad()
    assert float(f(3.0, 4.0)) == 12.0
    assert calls == {"fwd": 0, "bwd": 0}
    gx, gy = grad(f, argnums=(0, 1))(3.0, 4.0)
    assert float(gx) == 1.0 and float(gy) == 300.0
    assert calls["fwd"] >= 1 and calls["bwd"] >= 1


def test_custom_vjp_under_jit_and_vmap():
    f, _ = make_clip_grad()
    g = jit(grad(f))(3.0, 0.25)
    assert float(g) == 0.25
    xs = jnp.array([1.0, 2.0, 3.0])
    gs = vmap(grad(f), in_axes=(0, None))(xs, 0.5)
    np.testing.assert_array_equal(np.asarray(gs), [0.5, 0.5, 0.5])
    ys = vmap(f, in_axes=(0, None))(xs, 2.0)
    np.testing.assert_array_equal(np.asarray(ys), [2.0, 4.0, 6.0])


def test_custom_vjp_bwd_none_means_zero():
    @olympus.custom_vjp
    def f(x, y):
        return jnp.sin(x) + y

    f.defvjp(lambda x, y: (f(x, y), jnp.cos(x)), lambda c, g: (g * c, None))
    gx, gy = grad(f, argnums=(0, 1))(0.5, 1.0)
    np.testing.assert_allclose(float(gx), np.cos(0.5), rtol=1e-6)
    assert float(gy) == 0.0


def test_custom_vjp_wrong_bwd_length_raises():
    @olympus.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (f(x, y), None), lambda r, g: (g,))
    with pytest.raises(TypeError, match="tuple of length equal to the number of arguments"):
        grad(f)(1.0, 2.0)


def test_custom_vjp_pytree_residuals_and_outputs():
    @olympus.custom_vjp
    def f(d):
        return {"y": d["a"] * d["b"]}

    def fwd(d):
        return f(d), {"a": d["a"], "b": d["b"]}

    def bwd(res, ct):
        return ({"a": ct["y"] * res["b"], "b": ct["y"] * res["a"] * 0.0},)

    f.defvjp(fwd, bwd)
    g = grad(lambda d: f(d)["y"])({"a": 2.0, "b": 5.0})
    assert float(g["a"]) == 5.0 and float(g["b"]) == 0.0


def test_custom_vjp_without_rule_raises():
    f = olympus.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="No VJP defined"):
        f(1.0)


def test_custom_vjp_forward_mode_raises():
    f, _ = make_clip_grad()
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jvp(lambda x: f(x, 2.0), (1.0,), (1.0,))


def test_custom_jvp_closure_over_outer_tracer_in_primal():
    @jit
    def h(x, s):
        @olympus.custom_jvp
        def f(y):
            return y * s

        @f.defjvp
        def _jvp(p, t):
            return f(p[0]), t[0] * 5.0

        return f(x), grad(f)(x)

    y, g = h(2.0, 3.0)
    assert float(y) == 6.0 and float(g) == 5.0


def test_custom_vjp_fwd_closure_over_outer_tracer():
    @jit
    def h(x, s):
        @olympus.custom_vjp
        def f(y):
            return y * s

        f.defvjp(lambda y: (f(y), y), lambda r, g: (g * 4.0,))
        return grad(f)(x)

    assert float(h(2.0, 3.0)) == 4.0


# ---------------------------------------------------------------- the _core layer

def test_core_program_layer_rejects_bad_input():
    from olympus import _core
    p, cap = _core.trace(lambda x: [x * 2.0], [((3,), f32)])
    assert cap == [] and p.n_in == 1 and p.n_out == 1
    assert type(p) is type(olympus.make_jaxpr(lambda x: x)(1.0)) is _core.Jaxpr
    (a,) = p.in_avals
    assert (a.shape, a.dtype, a.weak_type, str(a)) == ((3,), np.dtype(f32), False, "f32[3]")
    assert "mul" in str(p)
    np.testing.assert_array_equal(np.asarray(_core.call_program(p, [np.ones(3, f32)])[0]), 2.0)
    bad = [
        (ValueError, "negative dimension", lambda: _core.trace(lambda x: [x], [((-1,), f32)])),
        (ValueError, "exceeds the maximum",
         lambda: _core.trace(lambda x: [x], [((1,) * 17, f32)])),
        (TypeError, "list or tuple", lambda: _core.trace(lambda x: x, [((3,), f32)])),
        (ZeroDivisionError, "", lambda: _core.trace(lambda x: 1 / 0, [((3,), f32)])),
        (ValueError, "expected 1 entries", lambda: _core.vmap_program(p, [0, 0], 3, [0])),
        (ValueError, "outside", lambda: _core.vmap_program(p, [5], 3, [0])),
        (ValueError, "axis_size", lambda: _core.vmap_program(p, [0], -3, [0])),
        (ValueError, "expected 1 entries", lambda: _core.jvp_program(p, [])),
        (ValueError, "n_res", lambda: _core.transpose_program(p, 7)),
        (TypeError, "takes 1 inputs", lambda: _core.call_program(p, [])),
        (TypeError, r"expects f32\[3\]", lambda: _core.call_program(p, [np.ones(4, f32)])),
        (TypeError, "Jaxpr", lambda: _core.call_program(3, [])),
        (ValueError, "out of range", lambda: _core.program_with_inputs(p, [((3,), f32)], [3])),
        (NotImplementedError, "not available", lambda: _core.bind_subs("nope", [], {}, [])),
        (TypeError, "Jaxpr", lambda: _core.bind_subs("cond", [True, np.ones(3, f32)],
                                                       {"n_out": 1}, [p, 3])),
        (TypeError, "must be callable",
         lambda: _core.custom_jvp_call("f", p, 3, [np.ones(3, f32)])),
        (TypeError, "Jaxpr", lambda: olympus.jvp(
            lambda x: _core.custom_jvp_call("f", p, lambda a, n: 3, [x])[0],
            (np.ones(3, f32),), (np.ones(3, f32),))),
        (TypeError, r"nested program expects f32\[3\]",
         lambda: _core.bind_subs("remat", [np.ones(4, f32)], {"name": "r", "n_out": 1}, [p])),
    ]
    for exc, words, fn in bad:
        with pytest.raises(exc, match=words):
            fn()


def test_custom_vjp_nondiff_argnums_static_and_array():
    from functools import partial

    @partial(olympus.custom_vjp, nondiff_argnums=(0, 1))
    def f(scale, offset, x):
        return x * scale + offset

    def fwd(scale, offset, x):
        return f(scale, offset, x), x

    def bwd(scale, offset, x, g):
        return (jnp.sum(g) * scale + jnp.sum(offset) * 0.0 + 100.0,)

    f.defvjp(fwd, bwd)
    off = jnp.array([1.0, 2.0])
    assert float(f(3.0, off, 2.0)[1]) == 8.0
    g = grad(lambda x: jnp.sum(f(3.0, off, x)))(2.0)
    assert float(g) == 2 * 3.0 + 100.0

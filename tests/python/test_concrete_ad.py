"""Autodiff on concrete values (JAX's autodiff cookbook): outside jit, grad,
value_and_grad, vjp, jvp, linearize, jacfwd, jacrev and hessian see the
primal values, so Python control flow on them works; tangents, batched
values (vmap) and anything under jit stay abstract and raise as before.
Derivatives are checked against hand-computed ones and NumPy."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import errors, grad, jacfwd, jacrev, jvp, lax, vjp, vmap

f32 = np.float32


def branchy(x):
    if x < 3:
        return 3. * x ** 2
    else:
        return -4 * x


def doubling(x, n):
    while x < n:
        x = x * 2
    return x


# ------------------------------------------------------------------ the cookbook patterns

def test_python_if_under_grad_takes_each_branch():
    assert float(grad(branchy)(2.)) == 12.0   # 6x
    assert float(grad(branchy)(4.)) == -4.0


def test_python_while_on_a_value_under_grad():
    # 1 -> 2 -> 4 -> 8 -> 16: four doublings, derivative 2**4
    assert float(grad(lambda x: doubling(x, 10.))(1.)) == 16.0
    # 3 -> 6 -> 12: two doublings
    assert float(grad(lambda x: doubling(x, 10.))(3.)) == 4.0
    y, g = olympus.value_and_grad(lambda x: doubling(x, 10.))(3.)
    assert (float(y), float(g)) == (12.0, 4.0)


def test_jvp_vjp_linearize_with_control_flow():
    y, t = jvp(branchy, (2.,), (1.,))
    assert (float(y), float(t)) == (12.0, 12.0)
    y, t = jvp(branchy, (5.,), (2.,))
    assert (float(y), float(t)) == (-20.0, -8.0)
    y, pullback = vjp(branchy, 2.)
    assert float(y) == 12.0 and float(pullback(1.)[0]) == 12.0
    y, f_jvp = olympus.linearize(branchy, 4.)
    assert float(y) == -16.0 and float(f_jvp(3.)) == -12.0


def piecewise_vec(x):
    """x**3 summed where the sum is positive, else sin; a vector -> vector map
    whose Jacobian depends on the branch."""
    if jnp.sum(x) > 0:
        return x ** 3
    return jnp.sin(x)


def test_jacfwd_jacrev_hessian_with_control_flow():
    x = np.array([1., 2., 0.5], f32)
    want = np.diag(3 * x ** 2)
    np.testing.assert_allclose(np.asarray(jacfwd(piecewise_vec)(jnp.asarray(x))), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jacrev(piecewise_vec)(jnp.asarray(x))), want, rtol=1e-6)
    xn = -x
    want = np.diag(np.cos(xn))
    np.testing.assert_allclose(np.asarray(jacfwd(piecewise_vec)(jnp.asarray(xn))), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jacrev(piecewise_vec)(jnp.asarray(xn))), want, rtol=1e-6)

    def f(x):   # x0**3 * x1 when x0 > 0, else x0 * x1**2
        return x[0] ** 3 * x[1] if x[0] > 0 else x[0] * x[1] ** 2
    np.testing.assert_allclose(np.asarray(olympus.hessian(f)(jnp.asarray([2., 3.]))),
                               [[6 * 2 * 3, 3 * 2 ** 2], [3 * 2 ** 2, 0]], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(olympus.hessian(f)(jnp.asarray([-2., 3.]))),
                               [[0, 2 * 3], [2 * 3, 2 * -2]], rtol=1e-6)


def test_grad_of_grad_with_control_flow():
    assert float(grad(grad(branchy))(2.)) == 6.0
    assert float(grad(grad(branchy))(4.)) == 0.0
    assert float(grad(grad(grad(lambda x: x ** 4 if x > 0 else x ** 3)))(2.)) == 48.0
    assert float(grad(grad(grad(lambda x: x ** 4 if x > 0 else x ** 3)))(-2.)) == 6.0

    def g(x):   # control flow on a value computed by an inner grad
        d = grad(branchy)(x)
        return d * x if d > 0 else -x
    assert float(grad(g)(2.)) == 24.0   # d = 6x, so d*x = 6x**2
    assert float(grad(g)(4.)) == -1.0


def test_value_and_grad_with_has_aux_and_control_flow():
    def loss(x):
        steps = 0
        while x < 10.:
            x = x * 3.
            steps += 1
        return x, {"steps": steps, "last": x}
    (v, aux), g = olympus.value_and_grad(loss, has_aux=True)(2.)
    assert float(v) == 18.0 and float(g) == 9.0
    assert int(aux["steps"]) == 2 and float(aux["last"]) == 18.0
    g2, aux2 = grad(loss, has_aux=True)(20.)
    assert float(g2) == 1.0 and int(aux2["steps"]) == 0


def test_per_example_gradients_and_batched_control_flow_raises():
    def loss(w, x, y):
        if jnp.sum(w) > 0:   # on the unbatched weights: concrete
            return (jnp.dot(w, x) - y) ** 2
        return jnp.dot(w, x)
    w = jnp.asarray([1., 2.])
    xs = jnp.asarray(np.ones((4, 2), f32))
    ys = jnp.arange(4.)
    per_example = vmap(grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    want = 2 * (3. - np.arange(4.))[:, None] * np.ones((4, 2))
    np.testing.assert_allclose(np.asarray(per_example), want, rtol=1e-6)

    def batched_branch(w, x, y):   # on the batched example: abstract under vmap
        p = jnp.dot(w, x)
        return (p - y) ** 2 if p > 0 else p
    with pytest.raises(errors.TracerBoolConversionError, match="Abstract tracer value"):
        vmap(grad(batched_branch), in_axes=(None, 0, 0))(w, xs, ys)


def test_hessian_vector_product_with_control_flow():
    def f(x):
        if float(jnp.sum(x)) > 0:
            return jnp.sum(x ** 3)
        return jnp.sum(x ** 2)
    x = jnp.asarray([1., 2., 3.])
    v = jnp.asarray([1., 0., 2.])
    g, hv = jvp(grad(f), (x,), (v,))
    np.testing.assert_allclose(np.asarray(g), 3 * np.asarray(x) ** 2)
    np.testing.assert_allclose(np.asarray(hv), 6 * np.asarray(x) * np.asarray(v))
    g, hv = jvp(grad(f), (-x,), (v,))
    np.testing.assert_allclose(np.asarray(hv), 2 * np.asarray(v))


def test_jacobians_of_pytrees_with_control_flow():
    def f(d):
        out = {"q": d["b"] ** 2}
        out["p"] = d["a"] * d["b"] if d["a"] > 0 else d["b"]
        return out
    for jac in (jacfwd, jacrev):
        j = jac(f)({"a": 2., "b": 3.})
        got = {o: {i: float(j[o][i]) for i in ("a", "b")} for o in ("p", "q")}
        assert got == {"p": {"a": 3., "b": 2.}, "q": {"a": 0., "b": 6.}}
        j = jac(f)({"a": -2., "b": 3.})
        assert (float(j["p"]["a"]), float(j["p"]["b"])) == (0., 1.)


# ------------------------------------------------------------------ conversions

def test_int_float_index_item_and_range_on_primal_values():
    def f(x):
        n = int(x[0])                      # 2
        k = x[1].item()                    # 1.0
        total = 0.
        for i in range(n):                 # range on a Python int from a value
            total = total + x[i] * float(x[2])
        j = jnp.argmax(x)                  # an int32 tracer; index with it as a Python int
        return total + x[[0, 1, 2][j]] * k
    x = jnp.asarray([2., 1., 5.])
    # total = 5 * (x0 + x1) with float(x2) = 5 a constant, plus x2 * 1.0: the
    # Python numbers carry no derivative, as in JAX
    np.testing.assert_allclose(np.asarray(grad(f)(x)), [5., 5., 1.])


def test_integer_valued_tracers_convert():
    def f(x):
        n = jnp.sum(x > 0)                 # an int tracer computed from x
        return x[n - 1] * len(range(n))    # __index__ for indexing and range
    np.testing.assert_allclose(np.asarray(grad(f)(jnp.asarray([1., 2., -1.]))), [0., 2., 0.])


def test_numpy_and_tolist_conversions_still_raise():
    with pytest.raises(errors.TracerArrayConversionError):
        grad(lambda x: np.asarray(x).sum())(1.)
    with pytest.raises(errors.ConcretizationTypeError):
        grad(lambda x: x * len(x.tolist()))(jnp.ones(2))


def test_bool_of_a_many_element_value_is_numpys_error():
    with pytest.raises(ValueError, match="ambiguous"):
        grad(lambda x: jnp.sum(x) if x > 0 else 0.)(jnp.ones(3))


# ------------------------------------------------------------------ what stays abstract

def test_under_jit_control_flow_on_values_raises_as_before():
    with pytest.raises(errors.TracerBoolConversionError):
        olympus.jit(grad(branchy))(2.)
    with pytest.raises(errors.TracerBoolConversionError):
        olympus.jit(lambda: grad(branchy)(2.))()       # grad called inside a jit trace
    with pytest.raises(errors.TracerBoolConversionError):
        olympus.jit(jacfwd(piecewise_vec))(jnp.ones(2))
    with pytest.raises(errors.TracerBoolConversionError):
        olympus.make_jaxpr(grad(branchy))(2.)
    with pytest.raises(errors.TracerBoolConversionError):   # a lax.cond branch is staged
        grad(lambda x: lax.cond(True, lambda: grad(branchy)(2.) * x, lambda: x))(1.)
    with olympus.disable_jit():
        assert float(olympus.jit(grad(branchy))(2.)) == 12.0


MAKE_JAXPR_GRAD = """{ lambda ; a:f32[]. let
    b:f32[] = sin a
    c:f32[] = cos a
    d:f32[] = integer_pow[y=2] a
    e:f32[] = mul a 2.0:f32[]
    f:f32[] = mul b d
    g:f32[] = mul 3.0:f32[] a
    h:f32[] = add f g
    i:f32[] = mul 1.0:f32[] 3.0:f32[]
    j:f32[] = mul 1.0:f32[] b
    k:f32[] = mul 1.0:f32[] d
    l:f32[] = mul j e
    m:f32[] = add i l
    n:f32[] = mul k c
    o:f32[] = add m n
  in (o,) }"""


def test_make_jaxpr_of_grad_is_unchanged():
    """Captured before concrete autodiff existed: staging under make_jaxpr
    traces exactly as it did."""
    def g(x):
        return jnp.sin(x) * x ** 2 + 3.0 * x
    assert str(olympus.make_jaxpr(grad(g))(1.)) == MAKE_JAXPR_GRAD


def test_custom_rules_see_primal_values_not_tangents():
    @olympus.custom_jvp
    def f(x):
        return jnp.sin(x) if x > 0 else jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return f(x), (2 * t if x > 0 else 3 * t)
    assert float(grad(f)(1.)) == 2.0 and float(grad(f)(-1.)) == 3.0

    @olympus.custom_vjp
    def g(x):
        return jnp.sin(x) if x > 0 else jnp.cos(x)
    g.defvjp(lambda x: (g(x), x), lambda x, ct: ((2 * ct if x > 0 else 3 * ct),))
    assert float(grad(g)(1.)) == 2.0 and float(grad(g)(-1.)) == 3.0

    @olympus.custom_jvp
    def h(x):
        return 2 * x

    @h.defjvp
    def h_jvp(primals, tangents):
        return h(primals[0]), (tangents[0] if tangents[0] > 0 else -tangents[0])
    with pytest.raises(errors.TracerBoolConversionError):
        grad(h)(1.)


# ------------------------------------------------------------------ cost and effects

def test_values_are_computed_only_when_asked_for():
    calls = []

    def host():
        calls.append(1)
        return np.float32(2.)
    sds = olympus.ShapeDtypeStruct((), jnp.float32)
    assert float(grad(lambda x: x * olympus.pure_callback(host, sds))(3.)) == 2.0
    assert len(calls) == 1          # only the program ran it
    calls.clear()

    def asks(x):
        c = olympus.pure_callback(host, sds)
        return x * c if c > 0 else x
    assert float(grad(asks)(3.)) == 2.0
    assert len(calls) == 2          # once for `c > 0`, once in the program


def test_effects_run_once_with_primal_values():
    seen = []

    def f(x):
        olympus.debug.callback(lambda v: seen.append(float(v)), x)
        return x ** 2 if x > 0 else -x
    assert float(grad(f)(3.)) == 6.0
    olympus.effects_barrier()
    assert seen == [3.0]


def test_long_python_loops_under_grad():
    def f(x):
        for _ in range(20000):
            x = x * 1.0001
        return x if x > 0 else -x
    want = 1.0001 ** 20000
    np.testing.assert_allclose(float(grad(f)(1.)), want, rtol=1e-3)


def test_asking_for_a_value_while_it_is_computed_fails_cleanly():
    kept = []
    sds = olympus.ShapeDtypeStruct((), jnp.float32)

    def host():   # asks for the value of the very callback being run
        return np.float32(1. if kept and bool(kept[0] > 0) else 2.)

    def f(x):
        c = olympus.pure_callback(host, sds)
        kept.append(c)
        return x * c if c > 0 else x
    with pytest.raises(olympus.CallbackError, match="asked for while it was being computed"):
        grad(f)(1.)


def test_shape_deciding_arguments_use_concrete_values():
    # outside jit, arange / repeat / nonzero take a traced value's known value
    def f(x):
        n = jnp.astype(x * 2, jnp.int32)  # a traced value known to be 4
        k = jnp.sum(jnp.arange(n) * x)
        return k + jnp.sum(jnp.repeat(x, n)) + jnp.sum(jnp.nonzero(jnp.arange(4) > 1)[0] * x)
    g = olympus.grad(f)(2.0)
    assert float(g) == 6.0 + 4.0 + 5.0
    with pytest.raises(olympus.errors.ConcretizationTypeError):
        olympus.jit(lambda x, n: jnp.arange(n) * x)(2.0, 4)


def test_boolean_mask_under_grad_outside_jit():
    # JAX's cookbook style: the mask's values are known outside jit
    g = olympus.grad(lambda x: jnp.sum(x[x > 0] ** 2))(jnp.asarray([-1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.asarray(g), [0.0, 4.0, 6.0])
    with pytest.raises(IndexError):
        olympus.jit(olympus.grad(lambda x: jnp.sum(x[x > 0] ** 2)))(jnp.asarray([1.0, 2.0]))

"""Every callback flavour (pure_callback, io_callback, debug.callback /
debug.print) inside cond / switch / while_loop / fori_loop / scan, under jit,
vmap and grad: values, printed output, call counts and order, and the errors
CALLBACK_SEMANTICS.md §1.2-1.5 prescribe."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import debug, grad, jit, lax, vmap
from olympus.experimental import io_callback

SDS = olympus.ShapeDtypeStruct
f32 = np.float32


class Host:
    """A host function that records the values it was called with."""

    def __init__(self):
        self.calls = []

    def __call__(self, x):
        self.calls.append(float(np.asarray(x).reshape(-1)[0]) if np.size(x) == 1
                          else np.asarray(x).copy())
        return np.sin(x).astype(x.dtype)


def pc(host, x, vmap_method="sequential"):
    return olympus.pure_callback(host, SDS(x.shape, x.dtype), x, vmap_method=vmap_method)


def ioc(host, x, ordered=False):
    return io_callback(host, SDS(x.shape, x.dtype), x, ordered=ordered)


def logger(log):
    def dbg(x):
        debug.callback(lambda v: log.append(float(v)), x)
        return x
    return dbg


# ---------------------------------------------------------------- cond / switch

@pytest.mark.parametrize("flavour", ["pure", "io"])
def test_cond_jit_runs_only_the_taken_branch(flavour):
    h = Host()
    cb = (lambda v: pc(h, v)) if flavour == "pure" else (lambda v: ioc(h, v))
    f = jit(lambda p, v: lax.cond(p, cb, lambda a: a * 2.0, v))
    assert np.isclose(float(f(True, 1.0)), np.sin(1.0))
    assert h.calls == [1.0]
    assert float(f(False, 1.0)) == 2.0
    assert h.calls == [1.0]


def test_switch_io_callback_jit():
    h = Host()
    f = jit(lambda i, v: lax.switch(i, [lambda a: ioc(h, a), lambda a: a * 2.0,
                                         lambda a: a + 100.0], v))
    assert [float(f(i, 1.0)) for i in (1, 2)] == [2.0, 101.0]
    assert h.calls == []
    assert np.isclose(float(f(0, 1.0)), np.sin(1.0)) and h.calls == [1.0]


def test_vmap_of_cond_batched_predicate_pure_callback_runs_both_sides():
    h = Host()
    x = jnp.arange(4.0)
    out = vmap(lambda v: lax.cond(v > 1, lambda a: pc(h, a), lambda a: a * 0.0, v))(x)
    np.testing.assert_allclose(np.asarray(out), [0, 0, np.sin(2), np.sin(3)], rtol=1e-6)
    # the batched predicate turns the cond into a select: the callback sees every lane
    assert h.calls == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("batched_pred", [True, False])
def test_vmap_of_cond_with_io_callback_raises(batched_pred):
    h = Host()
    x = jnp.arange(4.0)
    with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
        vmap(lambda v: lax.cond(v > 1 if batched_pred else True, lambda a: ioc(h, a),
                                lambda a: a, v))(x)
    assert h.calls == []


def test_vmap_of_cond_debug_callback_logs_each_lane():
    log = []
    dbg = logger(log)
    out = vmap(lambda v: lax.cond(v > 1, dbg, lambda a: a * 0.0, v))(jnp.arange(4.0))
    np.testing.assert_array_equal(np.asarray(out), [0, 0, 2, 3])
    assert log == [0.0, 1.0, 2.0, 3.0]


def test_vmap_of_switch_debug_callback():
    log = []
    dbg = logger(log)
    out = vmap(lambda i, v: lax.switch(i, [dbg, lambda a: a * 2.0, lambda a: dbg(a) * 3.0], v))(
        jnp.array([0, 1, 2]), jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 4.0, 9.0])
    assert sorted(log) == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_grad_of_cond_with_callbacks():
    log = []
    dbg = logger(log)
    g = grad(lambda v: lax.cond(v > 1, lambda a: dbg(a) * a, lambda a: a, v))(3.0)
    assert float(g) == 6.0 and log == [3.0]
    h = Host()
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP.*custom_jvp"):
        grad(lambda v: lax.cond(v > 1, lambda a: pc(h, a), lambda a: a, v))(3.0)
    h2 = Host()
    g = grad(lambda v: lax.cond(v > 1, lambda a: (ioc(h2, jnp.float32(1.0)), a * a)[1],
                                lambda a: a, v))(3.0)
    assert float(g) == 6.0 and h2.calls == [1.0]
    h3 = Host()
    with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
        grad(lambda v: lax.cond(v > 1, lambda a: ioc(h3, a), lambda a: a, v))(3.0)


# ---------------------------------------------------------------- scan / fori

def test_scan_callbacks_under_jit_run_per_iteration_in_order():
    h = Host()
    x = jnp.arange(4.0)
    c, _ = jit(lambda xs: lax.scan(lambda c, a: (c + pc(h, a), None), 0.0, xs))(x)
    np.testing.assert_allclose(float(c), np.sin(np.arange(4.0)).sum(), rtol=1e-6)
    assert h.calls == [0.0, 1.0, 2.0, 3.0]
    h2 = Host()
    _, ys = lax.scan(lambda c, a: (c, ioc(h2, a, ordered=True)), None, x)
    np.testing.assert_allclose(np.asarray(ys), np.sin(np.arange(4.0)), rtol=1e-6)
    assert h2.calls == [0.0, 1.0, 2.0, 3.0]


def test_scan_debug_print(capsys):
    lax.scan(lambda c, a: (debug.print("a={}", a) or c + a, None), 0.0, jnp.arange(3.0))
    assert capsys.readouterr().out == "a=0.0\na=1.0\na=2.0\n"


@pytest.mark.parametrize("flavour", ["pure", "io"])
def test_vmap_of_scan_with_callback_counts(flavour):
    h = Host()
    cb = (lambda a: pc(h, a)) if flavour == "pure" else (lambda a: ioc(h, a))
    xs = jnp.arange(6.0).reshape(2, 3)
    c = vmap(lambda r: lax.scan(lambda c, a: (c + cb(a), None), 0.0, r)[0])(xs)
    ref = np.sin(np.arange(6.0).reshape(2, 3)).sum(1)
    np.testing.assert_allclose(np.asarray(c), ref, rtol=1e-6)
    assert len(h.calls) == 6 and sorted(h.calls) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_vmap_of_scan_debug_callback_logs_every_lane_and_step():
    log = []
    dbg = logger(log)
    c = vmap(lambda r: lax.scan(lambda c, a: (c + dbg(a), None), 0.0, r)[0])(
        jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(c), [3.0, 12.0])
    assert log == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]  # per step, one call per lane


def test_vmap_of_scan_ordered_io_raises():
    h = Host()
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        vmap(lambda r: lax.scan(lambda c, a: (c + ioc(h, a, ordered=True), None), 0.0, r)[0])(
            jnp.ones((2, 3)))
    assert h.calls == []


def test_grad_of_scan_debug_callback_sees_primal_values_once():
    log = []
    dbg = logger(log)
    g = grad(lambda w: lax.scan(lambda c, a: (dbg(c) * w + a, None), 1.0, jnp.arange(4.0))[0])(2.0)
    # c: 1, 2, 5, 12 -> 27; d/dw of (((w + 0) w + 1) w + 2) w + 3 = 4w^3 + 3*... at w=2
    assert log == [1.0, 2.0, 5.0, 12.0]
    eps = 1e-3

    def f(w):
        c = 1.0
        for a in range(4):
            c = c * w + a
        return c
    np.testing.assert_allclose(float(g), (f(2 + eps) - f(2 - eps)) / (2 * eps), rtol=1e-4)


def test_grad_of_fori_loop_callbacks():
    h = Host()
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP"):
        grad(lambda w: lax.fori_loop(0, 3, lambda i, c: c + pc(h, w), 0.0))(1.0)
    h2 = Host()
    g = grad(lambda w: lax.fori_loop(0, 3, lambda i, c: (ioc(h2, i * 1.0), c * w)[1], 1.0))(2.0)
    assert float(g) == 12.0 and h2.calls == [0.0, 1.0, 2.0]


def test_custom_jvp_pure_callback_in_scan_under_grad():
    @olympus.custom_jvp
    def host_sin(x):
        return olympus.pure_callback(lambda v: np.sin(v).astype(v.dtype), SDS(x.shape, x.dtype),
                                     x, vmap_method="broadcast_all")

    @host_sin.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), jnp.cos(x) * t

    g = grad(lambda w: lax.scan(lambda c, a: (c + host_sin(a * w), None), 0.0,
                                jnp.arange(3.0))[0])(0.5)
    ref = sum(a * np.cos(a * 0.5) for a in range(3))
    np.testing.assert_allclose(float(g), ref, rtol=1e-6)
    gs = vmap(grad(host_sin))(jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(gs), np.cos(np.arange(3.0)), rtol=1e-6)


# ---------------------------------------------------------------- while

def test_while_debug_callback_jit():
    log = []
    dbg = logger(log)
    out = jit(lambda n: lax.while_loop(lambda i: i < n, lambda i: dbg(i) + 1, 0))(3)
    assert int(out) == 3 and log == [0.0, 1.0, 2.0]


def test_vmap_of_while_batched_predicate_debug_callback():
    log = []
    dbg = logger(log)
    out = vmap(lambda n: lax.while_loop(lambda i: i < n, lambda i: dbg(i) + 1.0, 0.0))(
        jnp.array([1.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 3.0])
    # every lane runs the body until all are done (finished lanes keep their value)
    assert log == [0.0, 0.0, 1.0, 1.0, 1.0, 2.0]


def test_vmap_of_while_io_callback_rules():
    h = Host()
    with pytest.raises(NotImplementedError, match="Unordered IO effects not supported in "
                                                  "while_loop with batched predicate"):
        vmap(lambda n: lax.while_loop(lambda i: i < n, lambda i: ioc(h, i) * 0 + i + 1.0, 0.0))(
            jnp.array([1.0, 3.0]))
    with pytest.raises(Exception, match="Ordered IO effects not supported in vmap"):
        vmap(lambda v: lax.while_loop(lambda c: c[0] < 3,
                                      lambda c: (c[0] + 1, ioc(h, c[1], ordered=True)),
                                      (0, v)))(jnp.array([1.0, 3.0]))
    assert h.calls == []
    i, v = vmap(lambda v: lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, ioc(h, c[1])),
                                         (0, v)))(jnp.array([1.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(i), [2, 2])
    np.testing.assert_allclose(np.asarray(v), np.sin(np.sin([1.0, 3.0])), rtol=1e-6)
    assert len(h.calls) == 4 and h.calls[:2] == [1.0, 3.0]


def test_pure_callback_unused_in_loop_body_is_dropped_under_jit():
    h = Host()

    @jit
    def f(xs):
        def body(c, a):
            pc(h, a)  # result unused: may be elided
            return c + a, None
        return lax.scan(body, 0.0, xs)[0]

    assert float(f(jnp.arange(3.0))) == 3.0
    assert h.calls == []


# ---------------------------------------------------------------- debug.print

def test_nested_vmap_debug_print_inner_loop_outermost(capsys):
    x = jnp.arange(6.0).reshape(2, 3)
    vmap(vmap(lambda v: debug.print("{}", v)))(x)
    # CALLBACK_SEMANTICS §1.4: the inner vmap's loop is outermost in call order
    assert capsys.readouterr().out.split() == ["0.0", "3.0", "1.0", "4.0", "2.0", "5.0"]


def test_vmap_of_fori_loop_debug_print(capsys):
    out = vmap(lambda n: lax.fori_loop(0, 2, lambda i, c: (debug.print("i={} c={}", i, c),
                                                           c + n)[1], 0.0))(
        jnp.array([1.0, 10.0]))
    np.testing.assert_array_equal(np.asarray(out), [2.0, 20.0])
    assert capsys.readouterr().out == "i=0 c=0.0\ni=0 c=0.0\ni=1 c=1.0\ni=1 c=10.0\n"


def test_grad_of_fori_loop_debug_print_forward_only(capsys):
    g = grad(lambda w: lax.fori_loop(0, 3, lambda i, c: (debug.print("c={}", c), c * w)[1],
                                     1.0))(2.0)
    assert float(g) == 12.0
    assert capsys.readouterr().out == "c=1.0\nc=2.0\nc=4.0\n"


def test_vmap_ordered_debug_print_is_allowed(capsys):
    vmap(lambda v: debug.print("o {}", v, ordered=True))(jnp.arange(3))
    assert capsys.readouterr().out == "o 0\no 1\no 2\n"


def test_jit_of_vmap_of_cond_with_debug_print_runs_each_call(capsys):
    f = jit(vmap(lambda v: lax.cond(v > 0, lambda a: (debug.print("pos {}", a), a)[1],
                                    lambda a: -a, v)))
    f(jnp.array([1.0, -2.0]))
    f(jnp.array([3.0, 4.0]))
    assert f._trace_count == 1
    assert capsys.readouterr().out == "pos 1.0\npos -2.0\npos 3.0\npos 4.0\n"


def test_callback_host_function_may_use_transformations():
    def host(x):
        return np.asarray(grad(lambda v: jnp.sin(v) * v)(float(x)), dtype=f32)

    f = jit(lambda x: olympus.pure_callback(host, SDS((), f32), x))
    np.testing.assert_allclose(float(f(1.0)), np.cos(1) + np.sin(1), rtol=1e-6)
    out = vmap(lambda x: olympus.pure_callback(host, SDS((), f32), x,
                                               vmap_method="sequential"))(jnp.arange(3.0))
    a = np.arange(3.0)
    np.testing.assert_allclose(np.asarray(out), np.cos(a) * a + np.sin(a), rtol=1e-6)

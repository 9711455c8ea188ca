"""Defects a bad-input probe found and behaviours where olympus differed from
the reference, each test failing before its fix (ids as in the hardening issue:
F04 F06 F08 F10, debug.log)."""
import sys

import numpy as np
import pytest

import olympus.numpy as jnp


@pytest.mark.parametrize("shape", [(0, 2**63 - 1), (0, 2**62, 4), (2**40, 0, 2**40)])
def test_empty_shape_with_huge_dims_is_too_big(shape):
    with pytest.raises(ValueError):
        np.zeros(shape)        # the oracle agrees
    with pytest.raises(ValueError, match="overflow|too many"):
        jnp.zeros(shape)


def test_empty_shape_reshape_with_huge_dims():
    x = jnp.zeros((0, 2**20))
    assert x.reshape((2**20, 0)).shape == (2**20, 0)
    with pytest.raises(ValueError, match="overflow|too many"):
        x.reshape((2**63 - 1, 0))


# F04: static fori_loop bounds beyond the index dtype raise instead of wrapping.
def test_fori_loop_bounds_beyond_int32_raise():
    from olympus import lax
    with pytest.raises(OverflowError, match="2147483650"):
        lax.fori_loop(2**31 - 3, 2**31 + 2, lambda i, c: jnp.minimum(c, i), 2**31 - 1)
    # in range, up to the last int32: the index never wraps
    r = lax.fori_loop(2**31 - 4, 2**31 - 1, lambda i, c: jnp.minimum(c, i), 2**31 - 1)
    assert int(r) == 2**31 - 4


# F08: duplicate argnums are rejected, not silently half-differentiated.
@pytest.mark.parametrize("who", ["grad", "value_and_grad", "jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [(0, 0), (1, -1)])
def test_duplicate_argnums_raise(who, argnums):
    import olympus
    f = lambda x, y: x * x * y
    with pytest.raises(ValueError, match="duplicates"):
        getattr(olympus, who)(f, argnums=argnums)(2.0, 3.0)
    assert float(olympus.grad(f, argnums=(0, 1))(2.0, 3.0)[1]) == 4.0


# F10: a custom JVP rule's tangent of another dtype than its float primal is a
# TypeError (it used to be converted, and jvp and grad then disagreed).
def test_custom_jvp_tangent_dtype_must_match():
    import olympus

    @olympus.custom_jvp
    def f(x):
        return x * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jnp.asarray(t, dtype=jnp.int32)

    for run in (lambda: olympus.jvp(f, (1.5,), (1.0,)), lambda: olympus.grad(f)(1.5)):
        with pytest.raises(TypeError, match=r"Expected float32\[\] .* but got int32\[\]"):
            run()

    @olympus.custom_jvp
    def g(x):
        return x * 2.0

    @g.defjvp
    def g_jvp(primals, tangents):           # a Python scalar tangent is fine
        return g(primals[0]), 3.0

    assert float(olympus.jvp(g, (1.5,), (1.0,))[1]) == 3.0


# debug.log hands its record to the logger's handlers at the default level (the
# logger's own level does not drop it), attributed to the user's line.
def test_debug_log_reaches_handlers_at_default_level():
    import logging
    import olympus
    from olympus import debug

    got = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record)

    log = logging.getLogger("olympus._src.debugging")
    h = Keep()
    log.addHandler(h)
    try:
        assert log.getEffectiveLevel() > logging.INFO      # INFO is below the default
        debug.log("x = {}", np.float32(1.5)); line = sys._getframe().f_lineno

        @olympus.jit
        def f(x):
            debug.log("y = {y}", y=x * 2)
            return x
        f(np.float32(2.0))
    finally:
        log.removeHandler(h)
    assert [r.getMessage() for r in got] == ["x = 1.5", "y = 4.0"]
    assert got[0].levelno == logging.INFO
    assert got[0].pathname == __file__ and got[0].lineno == line
    assert got[1].funcName == "f"


# io_callback inside checkpoint under grad raises (it used to run twice).
@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_in_checkpoint_under_grad_raises(ordered):
    import olympus
    calls = []

    def host(x):
        calls.append(float(x))
        return np.asarray(x)

    def f(x):
        # the callback does not depend on x, so its JVP is never asked for
        y = olympus.experimental.io_callback(host, olympus.ShapeDtypeStruct((), np.float32),
                                             np.float32(2.0), ordered=ordered)
        return y * jnp.sin(x)

    with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval of "
                                                  "`checkpoint`/`remat`"):
        olympus.grad(olympus.checkpoint(f))(1.0)
    assert calls == []
    # forward mode and the plain function are fine
    p, t = olympus.jvp(olympus.checkpoint(f), (1.0,), (1.0,))
    assert float(p) == pytest.approx(2 * np.sin(1.0), rel=1e-6)
    assert float(t) == pytest.approx(2 * np.cos(1.0), rel=1e-6)
    assert calls == [2.0]
    # debug callbacks may still run again in the backward pass
    assert float(olympus.grad(olympus.checkpoint(lambda x: jnp.sin(x) * 2))(1.0)) == \
        pytest.approx(2 * np.cos(1.0), rel=1e-6)


# F07: a jitted function's cache is bounded (least recently used go first).
def test_jit_cache_is_bounded_lru():
    import olympus
    before = olympus.config.olympus_jit_cache_size
    assert before == 4096
    olympus.config.update("olympus_jit_cache_size", 3)
    try:
        f = olympus.jit(lambda x, k: x * k, static_argnums=1)
        for k in range(10):
            assert float(f(2.0, k)) == 2.0 * k
        assert f._cache_size() == 3 and f._trace_count == 10
        # 7, 8, 9 are cached; keep using 7 while new values come in
        f(1.0, 7)
        f(1.0, 100)          # evicts 8 (7 was used since the last pass)
        f(1.0, 7)
        assert f._trace_count == 11
        f(1.0, 8)            # was evicted: traced again
        assert f._trace_count == 12
        assert f._cache_size() == 3
        olympus.config.update("olympus_jit_cache_size", 0)
        f(1.0, 55)
        f(1.0, 55)
        assert f._trace_count == 14   # nothing kept
        with pytest.raises(ValueError, match=">= 0"):
            olympus.config.update("olympus_jit_cache_size", -1)
    finally:
        olympus.config.update("olympus_jit_cache_size", before)


@pytest.mark.skipif("libasan" in __import__("os").environ.get("LD_PRELOAD", ""),
                    reason="ASan keeps freed memory in quarantine: RSS does not show the bound")
def test_jit_cache_memory_stays_flat_over_many_shapes():
    import resource
    import olympus
    olympus.config.update("olympus_jit_cache_size", 64)
    try:
        f = olympus.jit(lambda x: jnp.sin(x) * 2 + 1)
        for n in range(1, 200):
            f(np.zeros(n, np.float32))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for n in range(200, 8200):
            f(np.zeros(n, np.float32))
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
        assert f._cache_size() == 64
        assert grown_kib < 40 * 1024, grown_kib   # unbounded: about 100 MiB
    finally:
        olympus.config.update("olympus_jit_cache_size", 4096)


# F09: static_argnums / static_argnames that cannot apply are errors.
def test_static_args_out_of_range_raise():
    import olympus

    def f(x, y, *, z=1):
        return x

    with pytest.raises(ValueError, match="static_argnums contains 2.*2 positional"):
        olympus.jit(f, static_argnums=2)
    with pytest.raises(ValueError, match="static_argnums contains -3"):
        olympus.jit(f, static_argnums=(-3,))
    with pytest.raises(ValueError, match="static_argnames contains 'w'"):
        olympus.jit(f, static_argnames="w")
    g = olympus.jit(f, static_argnames=("z",), static_argnums=-1)   # fine
    assert float(g(1.0, 2, z=3)) == 1.0
    # *args / **kwargs accept anything
    olympus.jit(lambda *a: a[0], static_argnums=5)
    olympus.jit(lambda x, **kw: x, static_argnames="anything")


# F03: kernels never walk the rows of an empty result (this used to loop 2**55
# times); run in a child so a regression fails by timeout instead of hanging.
def test_empty_concatenate_with_huge_rows_returns():
    import os
    import subprocess
    import textwrap
    code = textwrap.dedent("""
        import olympus, olympus.numpy as jnp
        a = jnp.zeros((2**55, 0))
        print(jnp.concatenate([a, a], axis=1).shape)
        print(olympus.jit(lambda a: jnp.concatenate([a, a, a], axis=1))(a).shape)
        print(jnp.flip(a, 0).shape, (a + 1).sum(axis=0).shape)
        """)
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.path.join(here, "..", "..", "python") + os.pathsep + \
        env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["(36028797018963968, 0)"] * 2


# F02: the extension's types that wrap core objects cannot be made from Python
# (a Tracer with no trace behind it used to segfault on use or on free).
def test_internal_types_cannot_be_instantiated():
    import olympus
    from olympus import _core
    seen = []

    @olympus.jit
    def f(x):
        seen.append(type(x))
        return x

    f(1.0)
    tracer_type = seen[0]
    assert tracer_type is _core.Tracer
    jaxpr = olympus.make_jaxpr(lambda x: x + 1)(1.0)
    for tp in (_core.Tracer, _core.JitFunction, type(jaxpr), _core.ShapedArray):
        with pytest.raises(TypeError, match="cannot create"):
            tp()
        with pytest.raises(TypeError, match="cannot create|not an acceptable|__new__"):
            tp.__new__(tp)
    assert float(olympus.jit(lambda x: x * 2)(3.0)) == 6.0       # still fine


# F05: a contiguous but unaligned result (np.frombuffer at an odd offset) is
# accepted: results are copied byte-wise.
@pytest.mark.parametrize("jit", [False, True])
def test_callback_returns_unaligned_array(jit):
    import olympus
    raw = bytearray(1 + 4 * 8)

    def host(x):
        a = np.frombuffer(raw, dtype=np.float32, offset=1, count=8)
        assert not a.flags.aligned
        np.copyto(np.frombuffer(memoryview(raw)[1:], dtype=np.uint8),
                  (np.asarray(x) * 2).view(np.uint8))
        return a

    f = lambda x: olympus.pure_callback(host, olympus.ShapeDtypeStruct((8,), np.float32), x)
    if jit:
        f = olympus.jit(f)
    out = f(jnp.arange(8.0))
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0) * 2)


# A failing callback is logged at ERROR with its traceback, as the reference
# does, besides surfacing at the call site.
@pytest.mark.parametrize("api,logger,msg", [
    ("pure", "olympus._src.callback", "olympus.pure_callback failed"),
    ("io", "olympus._src.callback", "olympus.io_callback failed"),
    ("debug", "olympus._src.debugging", "olympus.debug.callback failed"),
])
def test_failing_callback_is_logged(caplog, api, logger, msg):
    import logging
    import olympus

    def host(x):
        raise ZeroDivisionError("boom")

    sds = olympus.ShapeDtypeStruct((), np.float32)
    calls = {"pure": lambda x: olympus.pure_callback(host, sds, x),
             "io": lambda x: olympus.experimental.io_callback(host, sds, x),
             "debug": lambda x: olympus.debug.callback(host, x)}

    @olympus.jit
    def f(x):
        y = calls[api](x)          # a pure callback's result must be used (else DCE)
        return x + 1 if y is None else x + y

    with caplog.at_level(logging.ERROR, logger=logger):
        with pytest.raises(olympus.CallbackError) as info:
            f(np.float32(1))
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    recs = [r for r in caplog.records if r.name == logger]
    assert [r.getMessage() for r in recs] == [msg]
    assert recs[0].levelno == logging.ERROR
    assert "Traceback (most recent call last)" in caplog.text and "boom" in caplog.text


# Outside jit, pure_callback, io_callback and debug.callback hand the callback
# olympus Arrays (as the reference does eagerly); under jit, NumPy views.
def test_eager_callbacks_get_arrays():
    import olympus
    seen = []

    def host(x, pair):
        seen.append((type(x), type(pair[0]), type(pair[1])))
        return np.asarray(x)

    sds = olympus.ShapeDtypeStruct((2,), np.float32)
    x = jnp.ones(2)
    olympus.pure_callback(host, sds, x, (x, x), vmap_method="sequential")
    olympus.experimental.io_callback(host, sds, x, (x, x))
    olympus.debug.callback(lambda x, pair: seen.append((type(x), type(pair[0]), type(pair[1]))),
                           x, (x, "label"))
    A = olympus.Array
    assert seen == [(A, A, A), (A, A, A), (A, A, str)]
    seen.clear()

    @olympus.jit
    def f(x):
        olympus.debug.callback(lambda x, pair: seen.append((type(x), type(pair[0]), pair[1])),
                               x, (x, "label"))
        return olympus.pure_callback(host, sds, x, (x, x))
    f(x)
    N = np.ndarray
    assert seen == [(N, N, "label"), (N, N, N)]


# A debug print in the condition of a while_loop whose predicate is batched
# runs once per iteration on every lane and once before the loop (the
# predicate travels in the carry), as the reference does: lanes x (iterations
# + 1) lines, not twice that.
@pytest.mark.parametrize("jit", [False, True])
def test_batched_while_condition_prints_once_per_iteration(capsys, jit):
    import olympus
    from olympus import lax

    def cond(c):
        olympus.debug.print("c={}", c[0], ordered=True)
        return c[0] < c[1]

    def f(x, lim):
        return lax.while_loop(cond, lambda c: (c[0] + 1, c[1]), (x, lim))[0]

    g = olympus.vmap(f)
    if jit:
        g = olympus.jit(g)
    out = g(jnp.array([0, 1, 4]), jnp.array([3, 5, 2]))
    np.testing.assert_array_equal(np.asarray(out), [3, 5, 4])
    lines = capsys.readouterr().out.split()
    # 4 iterations (lane 1 runs 1 -> 5) + the check before the loop, 3 lanes
    assert len(lines) == 3 * (4 + 1)
    assert lines[:3] == ["c=0", "c=1", "c=4"]        # before the loop, one per lane
    assert lines[-3:] == ["c=3", "c=5", "c=4"]        # finished lanes keep their carry

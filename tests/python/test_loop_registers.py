"""Loops whose bodies are one-element ops run on registers (src/cpu/scalar.c,
src/cpu/loop.c): the same values as the executor gives for the same body on
vectors (which cannot take that path), for carries passed through, swapped,
duplicated or replaced by literals, bool and integer carries, captured
constants, zero-trip loops and nested loops."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax


def both(fn, *init):
    """fn(*scalars) under jit, and fn on the same values broadcast to (2,):
    the second never takes the register path. Returns both as NumPy leaves."""
    s = olympus.jit(fn)(*init)
    v = olympus.jit(fn)(*[jnp.broadcast_to(jnp.asarray(a), (2,)) for a in init])
    sl, _ = olympus.tree_util.tree_flatten(s)
    vl, _ = olympus.tree_util.tree_flatten(v)
    return [np.asarray(a) for a in sl], [np.asarray(b)[0] for b in vl]


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(x, y)


def test_fori_affine_matches_numpy_float32():
    f = olympus.jit(lambda x: lax.fori_loop(0, 1000, lambda i, v: v * np.float32(0.999)
                                            + np.float32(1), x))
    got = np.asarray(f(np.float32(0.5)))
    want = np.float32(0.5)
    for _ in range(1000):
        want = np.float32(want * np.float32(0.999)) + np.float32(1)
    assert got == want
    same(*both(lambda x: lax.fori_loop(0, 1000, lambda i, v: v * np.float32(0.999)
                                       + np.float32(1), x), np.float32(0.5)))


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_fori_counter_used_and_odd_even_trips(n):
    body = lambda i, v: v * 2 + i.astype(jnp.float32) - 1  # noqa: E731
    got, vec = both(lambda x: lax.fori_loop(0, n, body, x), np.float32(0.25))
    same(got, vec)
    want = np.float32(0.25)
    for i in range(n):
        want = np.float32(want * 2 + np.float32(i) - 1)
    assert got[0] == want


def test_swapped_passed_duplicated_and_literal_carries():
    def swap(i, c):
        a, b, k = c
        return (b, a, k)
    got, vec = both(lambda a, b, k: lax.fori_loop(0, 5, swap, (a, b, k)), np.float32(1),
                    np.float32(2), np.int32(3))
    same(got, vec)
    assert [float(g) for g in got] == [2.0, 1.0, 3.0]

    def dup(i, c):
        t = c[0] + 1
        return (t, t, jnp.full_like(c[2], 7))
    got, vec = both(lambda a: lax.fori_loop(0, 4, dup, (a, a, a)), np.float32(0.5))
    same(got, vec)
    assert [float(g) for g in got] == [4.5, 4.5, 7.0]


def test_while_bool_carry_is_the_predicate():
    def body(c):
        go, n, acc = c
        return (n < 9, n + 1, acc * np.float32(1.5))

    def run(a, n, go):
        return lax.while_loop(lambda c: c[0][0] if c[0].ndim else c[0], body, (go, n, a))
    got, vec = both(run, np.float32(1), np.int32(0), np.bool_(True))
    same(got, vec)
    assert not bool(got[0]) and int(got[1]) == 10


def test_while_with_captured_constants_and_zero_trips():
    def run(x, lim, step, z):
        # lim and step are captured: constants of the condition and the body
        pred = (lambda c: c[0] < lim) if jnp.ndim(lim) == 0 else (lambda c: c[0][0] < lim[0])
        return lax.while_loop(pred, lambda c: (c[0] + step, c[1] - c[0] / lim), (z, x))
    same(*both(run, np.float32(3), np.float32(10), np.float32(0.75), np.float32(0)))
    got, vec = both(run, np.float32(3), np.float32(-1), np.float32(0.75), np.float32(0))
    same(got, vec)  # never runs
    assert float(got[1]) == 3.0


def test_integer_semantics_in_loops():
    def body(i, c):
        a, b, q = c
        return (a * 1103515245 + 12345, jnp.maximum(b - 7, a // (i - 3)), q ^ a)
    init = (np.int32(7), np.int32(100), np.int32(-5))
    got, vec = both(lambda a, b, q: lax.fori_loop(0, 50, body, (a, b, q)), *init)
    same(got, vec)


def test_select_convert_and_compare_in_loops(x64):
    ft = np.float64 if x64 else np.float32

    def body(i, c):
        x, n = c
        y = jnp.where(x > 1, x / 3, x * 2 + 0.5)
        return (y, n + (y > x).astype(n.dtype))
    same(*both(lambda x, n: lax.fori_loop(0, 40, body, (x, n)), ft(0.1), np.int32(0)))


def test_body_with_an_op_without_a_register_code():
    """rem has no one-element code: the body runs through the executor, its
    other one-element steps still without kernels; same values."""
    body = lambda i, v: (v * 3 + 1) % 7 - i  # noqa: E731
    same(*both(lambda x: lax.fori_loop(0, 20, body, x), np.float32(2)))


def test_nested_loops_and_reverse_scan():
    def outer(i, v):
        return lax.fori_loop(0, 3, lambda j, w: w * 0.5 + j, v) + i
    same(*both(lambda x: lax.fori_loop(0, 6, outer, x), np.float32(1)))

    def rev(x):
        return lax.scan(lambda c, _: (c * 2 - 1, None), x, None, length=9, reverse=True)[0]
    same(*both(rev, np.float32(1.25)))


def test_many_calls_reuse_nothing_stale():
    f = olympus.jit(lambda x, n: lax.fori_loop(0, n, lambda i, v: v + 1, x))
    for k in range(5):
        assert float(f(np.float32(k), 10)) == k + 10

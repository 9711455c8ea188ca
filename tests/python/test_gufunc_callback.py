"""pure_callback(..., vmap_method="signature:<gufunc signature>"): a host
function that is already vectorised (NumPy gufunc semantics) is called once
per vmap level, with the batch axis leading the loop dims; the signature is
checked against the shapes when the call is traced (docs/beyond.md)."""
import re

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp

SDS = olympus.ShapeDtypeStruct
f32 = np.float32


class Recorder:
    """A gufunc host function that records the shapes of every call."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = []

    def __call__(self, *args):
        self.calls.append(tuple(np.shape(a) for a in args))
        return self.fn(*args)


def dot(x, y):
    return np.sum(x * y, axis=-1)


def matvec(a, v):
    return np.einsum("...ij,...j->...i", a, v)


def cb_dot(rec):
    return lambda x, y: olympus.pure_callback(rec, SDS(np.broadcast_shapes(
        x.shape[:-1], y.shape[:-1]), f32), x, y, vmap_method="signature:(n),(n)->()")


def cb_matvec(rec):
    return lambda a, v: olympus.pure_callback(rec, SDS(a.shape[:-1], f32), a, v,
                                              vmap_method="signature:(m,n),(n)->(m)")


rng = np.random.default_rng(0)
X = rng.standard_normal((4, 3)).astype(f32)
Y = rng.standard_normal((5, 3)).astype(f32)
A = rng.standard_normal((4, 2, 3)).astype(f32)


def test_no_vmap_is_one_plain_call():
    rec = Recorder(dot)
    out = cb_dot(rec)(X[0], Y[0])
    np.testing.assert_allclose(out, dot(X[0], Y[0]), rtol=1e-6)
    assert rec.calls == [((3,), (3,))]


def test_top_level_loop_dims_broadcast():
    rec = Recorder(dot)
    out = cb_dot(rec)(X, Y[0])          # loop dims (4,) and ()
    np.testing.assert_allclose(out, X @ Y[0], rtol=1e-5)
    assert rec.calls == [((4, 3), (3,))]


def test_vmap_one_call_batch_axis_first_unbatched_gets_size_one():
    rec = Recorder(dot)
    out = olympus.vmap(cb_dot(rec), (0, None))(X, Y[0])
    np.testing.assert_allclose(out, X @ Y[0], rtol=1e-5)
    assert rec.calls == [((4, 3), (1, 3))]


@pytest.mark.parametrize("in_axes", [(0, 0), (1, 1), (0, 1), (1, 0)])
def test_vmap_any_in_axes(in_axes):
    rec = Recorder(dot)
    xs = rng.standard_normal((6, 3)).astype(f32)
    ys = rng.standard_normal((6, 3)).astype(f32)
    args = [xs if in_axes[0] == 0 else xs.T.copy(), ys if in_axes[1] == 0 else ys.T.copy()]
    out = olympus.vmap(cb_dot(rec), in_axes)(*args)
    np.testing.assert_allclose(out, np.sum(xs * ys, -1), rtol=1e-5)
    assert rec.calls == [((6, 3), (6, 3))]


def test_nested_vmap_one_call_per_level_with_outer_product_shapes():
    rec = Recorder(dot)
    f = olympus.vmap(olympus.vmap(cb_dot(rec), (0, None)), (None, 0))
    out = f(X, Y)                        # (5, 4): out[j, i] = X[i] . Y[j]
    np.testing.assert_allclose(out, (X @ Y.T).T, rtol=1e-5)
    # inner level: x batched -> (4, 3), y -> (1, 3); outer: y batched -> (5, 1, 3), x -> (1, 4, 3)
    assert rec.calls == [((1, 4, 3), (5, 1, 3))]


def test_nested_vmap_under_jit_runs_once_per_call():
    rec = Recorder(dot)
    f = olympus.jit(olympus.vmap(olympus.vmap(cb_dot(rec))))
    xs = rng.standard_normal((2, 3, 4)).astype(f32)
    out = f(xs, xs)
    np.testing.assert_allclose(out, np.sum(xs * xs, -1), rtol=1e-5)
    f(xs, xs)
    assert rec.calls == [((2, 3, 4), (2, 3, 4))] * 2


def test_matvec_loop_dims_padded_after_the_batch_axis():
    rec = Recorder(matvec)
    v = rng.standard_normal((3,)).astype(f32)
    # a has loop dims (4,) at the top level; v none: under vmap over v the
    # host sees a (1, 4, 2, 3) and v (7, 1, 3)
    vs = rng.standard_normal((7, 3)).astype(f32)
    out = olympus.vmap(cb_matvec(rec), (None, 0))(A, vs)
    np.testing.assert_allclose(out, np.einsum("bij,vj->vbi", A, vs), rtol=1e-5)
    assert rec.calls == [((1, 4, 2, 3), (7, 1, 3))]
    rec.calls.clear()
    out = olympus.vmap(cb_matvec(rec))(A, rng.standard_normal((4, 3)).astype(f32) + 0 * v)
    assert rec.calls == [((4, 2, 3), (4, 3))]


def test_out_axes_and_pytree_and_keyword_arguments():
    calls = []

    def host(p, *, w):
        calls.append((p["x"].shape, w.shape))
        return np.sum(p["x"] * w, -1)

    def f(x, w):
        return olympus.pure_callback(host, SDS((), f32), {"x": x}, w=w,
                                     vmap_method="signature:(n),(n)->()")

    out = olympus.vmap(f, (0, None), out_axes=0)(X, Y[0])
    np.testing.assert_allclose(out, X @ Y[0], rtol=1e-5)
    assert calls == [((4, 3), (1, 3))]


def test_several_results_and_fixed_sizes():
    def host(x):
        return x.sum(-1), x * 2

    def f(x):
        return olympus.pure_callback(host, (SDS((), f32), SDS((3,), f32)), x,
                                     vmap_method="signature:(3)->(),(3)")

    s, d = olympus.vmap(f)(X)
    np.testing.assert_allclose(s, X.sum(-1), rtol=1e-6)
    np.testing.assert_allclose(d, X * 2)


def test_signature_program_prints_the_method():
    text = str(olympus.make_jaxpr(olympus.vmap(cb_dot(Recorder(dot)), (0, None)))(X, Y[0]))
    assert "vmap_method=signature" in text
    assert "reshape[new_sizes=(1, 3)]" in text


def test_spaces_are_allowed_and_normalised():
    out = olympus.vmap(lambda x: olympus.pure_callback(
        lambda a: a.sum(-1), SDS((), f32), x, vmap_method="signature: ( n ) -> ( )"))(X)
    np.testing.assert_allclose(out, X.sum(-1), rtol=1e-6)


def test_callback_returning_wrong_loop_shape_is_a_runtime_error():
    def host(x, y):
        return np.float32(0)            # ignores the batch

    f = lambda x, y: olympus.pure_callback(host, SDS((), f32), x, y,  # noqa: E731
                                           vmap_method="signature:(n),(n)->()")
    with pytest.raises(olympus.CallbackError, match=r"Incorrect output shape for return value "
                                                    r"#0: Expected: \(4,\), Actual: \(\)"):
        olympus.vmap(f, (0, None))(X, Y[0])


# ---------------------------------------------------------------- errors at trace time

def _bad(sig, *args, result=SDS((), f32)):
    calls = []
    with pytest.raises(ValueError) as e:
        olympus.pure_callback(lambda *a: calls.append(1), result, *args,
                              vmap_method="signature:" + sig)
    assert calls == []
    return str(e.value)


def test_error_not_a_signature():
    msg = _bad("(n)(n)->()", X[0], X[0])
    assert msg.startswith("pure_callback: vmap_method='signature:(n)(n)->()' is not a gufunc "
                          "signature; expected 'signature:' followed by one parenthesised group")
    assert "not a gufunc signature" in _bad("(n,)->()", X[0])
    assert "not a gufunc signature" in _bad("n->()", X[0])
    assert "not a gufunc signature" in _bad("(n)", X[0])


def test_error_argument_count():
    assert _bad("(n)->()", X[0], X[0]) == (
        "pure_callback: vmap_method='signature:(n)->()' names 1 argument(s), but the callback "
        "gets 2 array argument(s) (the leaves of (args, kwargs))")


def test_error_result_count():
    assert _bad("(n)->(),()", X[0]) == (
        "pure_callback: vmap_method='signature:(n)->(),()' names 2 result(s), but "
        "result_shape_dtypes declares 1")


def test_error_rank_below_core_rank():
    assert _bad("(m,n)->()", X[0]) == (
        "pure_callback: vmap_method='signature:(m,n)->()': argument #0 has shape (3,), but its "
        "core dimensions (m,n) need at least 2 dimension(s)")


def test_error_core_dim_sizes_disagree():
    assert _bad("(n),(n)->()", X[0], np.ones(4, f32)) == (
        "pure_callback: vmap_method='signature:(n),(n)->()': core dimension 'n' is 3 in "
        "argument #0 but 4 in argument #1 (shape (4,))")


def test_error_result_core_dim_disagrees_with_argument():
    assert _bad("(n)->(n)", X[0], result=SDS((4,), f32)) == (
        "pure_callback: vmap_method='signature:(n)->(n)': core dimension 'n' is 3 in "
        "argument #0 but 4 in result #0 (shape (4,))")


def test_error_fixed_size():
    assert _bad("(2)->()", X[0]) == (
        "pure_callback: vmap_method='signature:(2)->()': argument #0 has shape (3,), but core "
        "dimension 2 of (2) is fixed at 2, not 3")


def test_error_loop_dims_do_not_broadcast():
    assert _bad("(n),(n)->()", X, Y) == (
        "pure_callback: vmap_method='signature:(n),(n)->()': the arguments' loop dimensions "
        "[(4,), (5,)] (the dimensions before their core dimensions) do not broadcast together")


def test_error_result_loop_dims():
    assert _bad("(n),(n)->()", X, Y[0]) == (
        "pure_callback: vmap_method='signature:(n),(n)->()': result #0 is declared with shape "
        "(), but the signature makes it (4,): the broadcast loop dimensions (4,) of the "
        "arguments, then the core dimensions ()")


def test_error_under_vmap_is_raised_while_tracing_with_element_shapes():
    def f(x):
        return olympus.pure_callback(lambda a: a, SDS((), f32), x,
                                     vmap_method="signature:(n,k)->()")
    with pytest.raises(ValueError, match=re.escape("argument #0 has shape (3,), but its core "
                                                   "dimensions (n,k) need at least 2")):
        olympus.vmap(f)(X)


def test_unknown_method_lists_signature():
    with pytest.raises(ValueError, match=re.escape(
            "'legacy_vectorized', 'signature:<gufunc signature>'], but got: sig(n)->()")):
        olympus.pure_callback(lambda: f32(0), SDS((), f32), vmap_method="sig(n)->()")


def test_signature_is_for_pure_callback_only():
    from olympus.experimental.buffer_callback import buffer_callback
    with pytest.raises(ValueError, match="vmap_method must be one of the allowed methods"):
        buffer_callback(lambda ctx, out, x: None, SDS((3,), f32),
                        vmap_method="signature:(n)->(n)")(X[0])


def test_jvp_still_refused():
    f = lambda x: olympus.pure_callback(dot, SDS((), f32), x, x,  # noqa: E731
                                        vmap_method="signature:(n),(n)->()")
    with pytest.raises(Exception, match="Pure callbacks do not support JVP"):
        olympus.grad(f)(jnp.asarray(X[0]))

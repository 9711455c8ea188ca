"""olympus.experimental.buffer_callback (CALLBACK_SEMANTICS §1.8): results written
in place into the program's own buffers, Buffers and their lifetime, the
ExecutionContext, input/output aliases (shared memory or a safe copy), DLPack,
vmap methods, control flow, DCE vs has_side_effect, and every error text."""
import re

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import io_callback
from olympus.experimental.buffer_callback import (Buffer, ExecutionContext, ExecutionStage,
                                                  buffer_callback)

SDS = olympus.ShapeDtypeStruct
f32 = np.float32


def addr(a):
    """The data address of an array-like (np.asarray is a view for Buffers and Arrays)."""
    return np.asarray(a).__array_interface__["data"][0]


# ---------------------------------------------------------------- the seed's example

def test_seed_docstring_example(mode):
    def py_add_one_inplace(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x) + 1

    x = jnp.array(41, dtype=jnp.int32)
    out_type = olympus.ShapeDtypeStruct(x.shape, x.dtype)
    add_one = buffer_callback(py_add_one_inplace, out_type)
    y = mode(add_one)(x)
    assert isinstance(y, olympus.Array)
    assert y.dtype == np.int32 and y.shape == ()
    assert int(y) == 42
    assert int(x) == 41


def test_callback_sees_context_buffers_and_writes_the_result_buffer(mode):
    seen = {}

    def cb(ctx, out, x):
        seen.update(ctx=ctx, stage=ctx.stage, stream=ctx.stream, out=out, x=x,
                    out_shape=out.shape, out_dtype=out.dtype, x_writeable=x.writeable,
                    out_writeable=out.writeable, ndim=out.ndim, size=out.size,
                    out_addr=addr(out), repr=repr(out))
        np.asarray(out)[...] = np.asarray(x) * 2

    x = jnp.arange(6.0).reshape(2, 3)
    y = mode(buffer_callback(cb, SDS((2, 3), f32)))(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(6.0).reshape(2, 3) * 2)
    assert isinstance(seen["ctx"], ExecutionContext)
    assert seen["stage"] is ExecutionStage.EXECUTE and seen["stage"] == 3
    assert seen["stream"] is None
    assert isinstance(seen["out"], Buffer) and isinstance(seen["x"], Buffer)
    assert seen["out_shape"] == (2, 3) and seen["out_dtype"] == np.dtype(f32)
    assert seen["ndim"] == 2 and seen["size"] == 6
    assert seen["out_writeable"] and not seen["x_writeable"]
    assert seen["repr"] == "Buffer(shape=(2, 3), dtype=float32, writeable=True)"
    # no copy anywhere: the Buffer the callback wrote is the result's memory
    assert seen["out_addr"] == addr(y)
    assert "ExecutionStage.EXECUTE" in repr(seen["ctx"])


def test_buffer_and_context_cannot_be_made_from_python():
    with pytest.raises(TypeError):
        Buffer()
    with pytest.raises(TypeError):
        ExecutionContext()
    assert [s.name for s in ExecutionStage] == ["INSTANTIATE", "PREPARE", "INITIALIZE",
                                                "EXECUTE"]
    assert [int(s) for s in ExecutionStage] == [0, 1, 2, 3]


def test_pytree_results_arguments_and_keywords(mode):
    seen = {}

    def cb(ctx, out, a, pair, *, scale):
        seen["types"] = (type(out), sorted(out), type(pair), type(scale))
        np.asarray(out["sum"])[...] = np.asarray(a) + np.asarray(pair[0])
        np.asarray(out["prod"])[...] = np.asarray(pair[1]) * np.asarray(scale)

    a, b, c = jnp.arange(3.0), jnp.ones(3), jnp.full((2,), 3, jnp.int32)
    f = buffer_callback(cb, {"sum": SDS((3,), f32), "prod": SDS((2,), np.int32)})
    r = mode(lambda a, b, c: f(a, (b, c), scale=jnp.int32(2)))(a, b, c)
    assert set(r) == {"sum", "prod"}
    np.testing.assert_array_equal(np.asarray(r["sum"]), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(r["prod"]), [6, 6])
    assert seen["types"] == (dict, ["prod", "sum"], tuple, Buffer)


def test_no_results_and_tuple_results():
    calls = []

    def cb(ctx, out, x):
        calls.append(out)

    assert buffer_callback(cb, (), has_side_effect=True)(jnp.ones(2)) == ()
    assert calls == [()]

    def two(ctx, out, x):
        assert isinstance(out, tuple) and len(out) == 2
        np.asarray(out[0])[...] = np.asarray(x)
        np.asarray(out[1])[...] = -np.asarray(x)

    r = olympus.jit(buffer_callback(two, (SDS((2,), f32), SDS((2,), f32))))(jnp.ones(2))
    assert isinstance(r, tuple)
    np.testing.assert_array_equal(np.asarray(r[1]), [-1.0, -1.0])


def test_python_scalar_and_numpy_arguments():
    def cb(ctx, out, x, y):
        np.asarray(out)[...] = np.asarray(x) * np.asarray(y)

    f = buffer_callback(cb, SDS((3,), f32))
    np.testing.assert_allclose(np.asarray(f(2.0, np.arange(3, dtype=f32))), [0.0, 2.0, 4.0])


def test_shape_dtype_struct_like():
    x = jnp.arange(6.0).reshape(2, 3)
    assert SDS.like(x) == SDS((2, 3), f32)
    assert SDS.like(np.zeros((4,), np.int16)) == SDS((4,), np.int16)
    w = SDS.like(1.0)
    assert w.shape == () and w.dtype == np.dtype(f32) and w.weak_type
    assert SDS.like(SDS((5,), np.uint8)) == SDS((5,), np.uint8)
    seen = []
    olympus.jit(lambda t: seen.append(SDS.like(t)) or t)(x)
    assert seen == [SDS((2, 3), f32)]


# ---------------------------------------------------------------- Buffers: protocols and lifetime

def test_argument_buffers_are_read_only():
    errors = []

    def cb(ctx, out, x):
        for write in (lambda: np.asarray(x).__setitem__(0, 5.0),
                      lambda: memoryview(x).cast("B").__setitem__(0, 1)):
            try:
                write()
            except (ValueError, TypeError) as e:
                errors.append(type(e).__name__)
        assert memoryview(x).readonly and not memoryview(out).readonly
        assert memoryview(out).format == "f" and memoryview(out).shape == (3,)
        np.asarray(out)[...] = np.asarray(x)

    x = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(buffer_callback(cb, SDS.like(x))(x)), [0, 1, 2])
    assert errors == ["ValueError", "TypeError"]
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2])


def test_array_protocol_dtype_and_copy():
    seen = {}

    def cb(ctx, out, x):
        v = x.__array__()
        seen["view"] = (v.dtype, v.flags.writeable, np.shares_memory(v, np.asarray(x)))
        c = x.__array__(np.float64)
        seen["cast"] = (c.dtype, np.shares_memory(c, np.asarray(x)))
        seen["copy"] = np.shares_memory(x.__array__(copy=True), np.asarray(x))
        o = out.__array__()
        seen["out"] = o.flags.writeable
        o[...] = v

    x = jnp.arange(4, dtype=jnp.int32)
    r = buffer_callback(cb, SDS.like(x))(x)
    np.testing.assert_array_equal(np.asarray(r), [0, 1, 2, 3])
    assert seen == {"view": (np.dtype(np.int32), False, True),
                    "cast": (np.dtype(np.float64), False), "copy": False, "out": True}


def test_dlpack_round_trip():
    seen = {}

    def cb(ctx, out, x):
        assert x.__dlpack_device__() == (1, 0) and out.__dlpack_device__() == (1, 0)
        xin = np.from_dlpack(x)
        seen["in"] = (xin.copy(), np.shares_memory(xin, np.asarray(x)))
        o = np.asarray(out)
        o[...] = xin * 3
        back = np.from_dlpack(out)  # sees what was written: the same memory
        seen["out"] = (back.copy(), np.shares_memory(back, o))
        out.__dlpack__()  # a capsule nobody consumes is released with it
        with pytest.raises(BufferError, match="stream must be None"):
            out.__dlpack__(stream=1)
        with pytest.raises(BufferError, match="copy=True"):
            out.__dlpack__(copy=True)

    x = jnp.arange(4.0)
    r = olympus.jit(buffer_callback(cb, SDS.like(x)))(x)
    np.testing.assert_array_equal(seen["in"][0], [0, 1, 2, 3])
    assert seen["in"][1] and seen["out"][1]
    np.testing.assert_array_equal(seen["out"][0], [0, 3, 6, 9])
    np.testing.assert_array_equal(np.asarray(r), [0, 3, 6, 9])


def test_buffer_used_after_the_callback_raises_a_clear_error():
    kept = []

    def cb(ctx, out, x):
        np.asarray(out)[...] = np.asarray(x)
        kept.append(out)
        kept.append(x)

    x = jnp.arange(3.0)
    np.testing.assert_array_equal(np.asarray(buffer_callback(cb, SDS.like(x))(x)), [0, 1, 2])
    for b in kept:
        assert not b.valid
        assert b.shape == (3,) and b.dtype == np.dtype(f32)  # still answer
        assert "released" in repr(b)
        for use in (np.asarray, memoryview, lambda b: b.__array__(), lambda b: b.__dlpack__()):
            with pytest.raises(ValueError, match="no longer valid.*only be used while its "
                                                 "callback runs"):
                use(b)


@pytest.mark.parametrize("how", ["ndarray", "memoryview", "dlpack", "argument"])
def test_a_view_kept_past_the_callback_fails_the_call(how):
    kept = []

    def cb(ctx, out, x):
        np.asarray(out)[...] = 1
        if how == "ndarray":
            kept.append(np.asarray(out))
        elif how == "memoryview":
            kept.append(memoryview(out))
        elif how == "dlpack":
            kept.append(np.from_dlpack(out))
        else:
            kept.append(np.asarray(x))

    x = jnp.arange(3.0)
    with pytest.raises(olympus.CallbackError) as info:
        buffer_callback(cb, SDS.like(x))(x)
    cause = info.value.__cause__
    assert isinstance(cause, BufferError)
    what = "argument #0" if how == "argument" else "output #0"
    assert f"kept a view of its {what}" in str(cause)
    assert "np.array(buf)" in str(cause)
    kept.clear()


def test_views_held_by_a_failing_callback_are_not_reported_as_kept():
    def cb(ctx, out, x):
        view = np.asarray(out)  # alive in the traceback's frame
        view[...] = 0
        raise KeyError("boom")

    with pytest.raises(olympus.CallbackError) as info:
        buffer_callback(cb, SDS((2,), f32))(jnp.ones(2))
    assert isinstance(info.value.__cause__, KeyError)


def test_buffers_of_one_call_do_not_leak_into_the_next():
    shapes = []

    def cb(ctx, out, x):
        shapes.append((out.shape, x.shape, x.writeable, out.writeable))
        np.asarray(out)[...] = np.asarray(x).sum()

    for n in (2, 5, 1):
        f = buffer_callback(cb, SDS((), f32))
        assert float(f(jnp.ones(n))) == n
    assert shapes == [((), (2,), False, True), ((), (5,), False, True), ((), (1,), False, True)]


def test_nested_call_of_the_same_callback():
    depth = []

    def cb(ctx, out, x):
        depth.append(len(depth))
        v = np.asarray(x)
        if len(depth) == 1:
            inner = f(v + 1)  # eager, from inside the callback
            np.asarray(out)[...] = np.asarray(inner) * 10
        else:
            np.asarray(out)[...] = v

    f = buffer_callback(cb, SDS((2,), f32))
    np.testing.assert_array_equal(np.asarray(olympus.jit(f)(jnp.ones(2))), [20.0, 20.0])
    assert depth == [0, 1]


# ---------------------------------------------------------------- aliases

def test_alias_of_a_caller_array_is_a_copy_and_the_array_keeps_its_value(mode):
    seen = {}

    def cb(ctx, out, x):
        o, xi = np.asarray(out), np.asarray(x)
        seen.update(shared=np.shares_memory(o, xi), start=o.copy(), x_addr=addr(xi),
                    out_addr=addr(o))
        o += 10

    x = jnp.arange(4.0)
    before = addr(x)
    f = buffer_callback(cb, SDS.like(x), input_output_aliases={0: 0})
    y = mode(f)(x)
    np.testing.assert_array_equal(np.asarray(y), [10, 11, 12, 13])
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2, 3])  # immutable: unchanged
    assert seen["shared"]  # the callback sees one buffer
    np.testing.assert_array_equal(seen["start"], [0, 1, 2, 3])
    assert seen["x_addr"] == seen["out_addr"] != before
    assert seen["out_addr"] == addr(y)


def _producer_and_updater():
    ptrs = {}

    def produce(ctx, out, x):
        o = np.asarray(out)
        o[...] = np.asarray(x) * 2
        ptrs["y"] = addr(o)

    def update(ctx, out, y):
        o = np.asarray(out)
        ptrs["in"], ptrs["out"] = addr(y), addr(o)
        o += 1

    return ptrs, produce, update


def test_alias_takes_a_dying_intermediate_without_a_copy():
    ptrs, produce, update = _producer_and_updater()
    x = jnp.arange(4.0)
    p = buffer_callback(produce, SDS.like(x))
    u = buffer_callback(update, SDS.like(x), input_output_aliases={0: 0})
    r = olympus.jit(lambda x: u(p(x)) * 3)(x)
    np.testing.assert_array_equal(np.asarray(r), (np.arange(4.0) * 2 + 1) * 3)
    assert ptrs["in"] == ptrs["out"] == ptrs["y"]
    # the aliased output is the function's result: computed in the result buffer
    r = olympus.jit(lambda x: u(p(x)))(x)
    np.testing.assert_array_equal(np.asarray(r), np.arange(4.0) * 2 + 1)
    assert ptrs["in"] == ptrs["out"] == ptrs["y"] == addr(r)
    np.testing.assert_array_equal(np.asarray(x), [0, 1, 2, 3])


def test_alias_of_an_input_used_afterwards_is_a_copy():
    ptrs, produce, update = _producer_and_updater()
    x = jnp.arange(4.0)
    p = buffer_callback(produce, SDS.like(x))
    u = buffer_callback(update, SDS.like(x), input_output_aliases={0: 0})

    def f(x):
        y = p(x)
        return y, u(y), y + 100

    y, z, w = olympus.jit(f)(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(4.0) * 2)
    np.testing.assert_array_equal(np.asarray(z), np.arange(4.0) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(w), np.arange(4.0) * 2 + 100)
    assert ptrs["in"] == ptrs["out"] != ptrs["y"]


def test_alias_of_an_argument_passed_twice_is_a_copy():
    seen = {}

    def cb(ctx, out, a, b):
        o = np.asarray(out)
        seen["b_before"] = np.asarray(b).copy()
        o += 1
        seen["b_after"] = np.asarray(b).copy()
        seen["shares"] = (np.shares_memory(o, np.asarray(a)), np.shares_memory(o, np.asarray(b)))

    x = jnp.arange(3.0)
    f = buffer_callback(cb, SDS.like(x), input_output_aliases={0: 0})
    def g(x):
        y = x * 2
        return f(y, y)

    r = olympus.jit(g)(x)
    np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) * 2 + 1)
    np.testing.assert_array_equal(seen["b_before"], seen["b_after"])
    assert seen["shares"] == (True, False)


def test_aliases_into_pytree_and_keyword_arguments():
    def cb(ctx, out, pair, *, k):
        np.asarray(out[0])[...] *= 2   # aliased to pair[1]
        np.asarray(out[1])[...] += np.asarray(pair[0])  # aliased to k

    a, b, c = jnp.ones(2), jnp.full((3,), 5.0), jnp.full((2,), 7.0)
    f = buffer_callback(cb, (SDS((3,), f32), SDS((2,), f32)), input_output_aliases={1: 0, 2: 1})
    r0, r1 = f((a, b), k=c)
    np.testing.assert_array_equal(np.asarray(r0), [10.0, 10.0, 10.0])
    np.testing.assert_array_equal(np.asarray(r1), [8.0, 8.0])
    np.testing.assert_array_equal(np.asarray(b), [5.0, 5.0, 5.0])


def test_alias_errors_have_the_reference_texts():
    def cb(ctx, out, *args):
        pass

    x, y = jnp.ones(3), jnp.ones(4)
    cases = [
        ({1: 0}, (x,), SDS((3,), f32),
         "input_output_aliases contains the mapping '1:0' with input index 1 outside the "
         "range [0, 1)."),
        ({0: 1}, (x,), SDS((3,), f32),
         "input_output_aliases contains the mapping '0:1' with output index 1 outside the "
         "range [0, 1)."),
        ({1: 0}, (x, y), SDS((3,), f32),
         "input_output_aliases contains the mapping '1:0' referring to an input with abstract "
         "value f32[4] and an output with a different abstract value f32[3]."),
        ({0: 0}, (jnp.ones(3, jnp.int32),), SDS((3,), f32),
         "input_output_aliases contains the mapping '0:0' referring to an input with abstract "
         "value i32[3] and an output with a different abstract value f32[3]."),
        ({-1: 0}, (x,), SDS((3,), f32),
         "input_output_aliases contains the mapping '-1:0' with input index -1 outside the "
         "range [0, 1)."),
        ({0: 0, 1: 0}, (x, x), SDS((3,), f32),
         "input_output_aliases contains the mappings '0:0' and '1:0': output 0 can alias only "
         "one input."),
    ]
    for aliases, args, res, msg in cases:
        f = buffer_callback(cb, res, input_output_aliases=aliases)
        for run in (f, olympus.jit(f)):
            with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
                run(*args)
    # checked when the function is called, sorted by input index
    f = buffer_callback(cb, SDS((3,), f32), input_output_aliases={5: 0, 3: 0})
    with pytest.raises(ValueError, match=re.escape("mapping '3:0' with input index 3")):
        f(x)
    with pytest.raises(TypeError, match="must be a dict"):
        buffer_callback(cb, SDS((3,), f32), input_output_aliases=[(0, 0)])
    with pytest.raises(TypeError, match="must map ints to ints"):
        buffer_callback(cb, SDS((3,), f32), input_output_aliases={"a": 0})


# ---------------------------------------------------------------- other errors

def test_returning_a_value_is_an_error(mode):
    def cb(ctx, out, x):
        np.asarray(out)[...] = 0
        return np.asarray(x)

    with pytest.raises(olympus.CallbackError) as info:
        mode(buffer_callback(cb, SDS((2,), f32)))(jnp.ones(2))
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) == "buffer_callback callback must not return any values."
    assert "buffer_callback failed: cb" in str(info.value)


def test_exception_in_the_callback_is_chained():
    def cb(ctx, out, x):
        raise ZeroDivisionError("nope")

    with pytest.raises(olympus.CallbackError, match="ZeroDivisionError: nope") as info:
        olympus.jit(buffer_callback(cb, SDS((2,), f32)))(jnp.ones(2))
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_jvp_and_transpose_errors():
    f = buffer_callback(lambda ctx, out, x: None, SDS((3,), f32))
    x = jnp.ones(3)
    jvp_msg = ("Buffer callbacks do not support JVP. Please use `olympus.custom_jvp` to use "
               "callbacks while taking gradients.")
    with pytest.raises(ValueError, match=re.escape(jvp_msg)):
        olympus.grad(lambda x: f(x).sum())(x)
    with pytest.raises(ValueError, match=re.escape(jvp_msg)):
        olympus.jvp(f, (x,), (x,))
    with pytest.raises(ValueError, match=re.escape(
            "Buffer callbacks do not support transpose. Please use `olympus.custom_vjp` to use "
            "callbacks while taking gradients.")):
        olympus.linear_transpose(f, x)(x)


def test_custom_jvp_around_a_buffer_callback():
    def cb(ctx, out, x):
        np.asarray(out)[...] = np.sin(np.asarray(x))

    bsin = buffer_callback(cb, SDS((3,), f32))

    @olympus.custom_jvp
    def f(x):
        return bsin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jnp.cos(x) * t

    x = jnp.array([0.1, 0.5, 1.0])
    g = olympus.grad(lambda x: f(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.cos([0.1, 0.5, 1.0]), rtol=1e-6)


def test_bad_arguments():
    with pytest.raises(TypeError, match="must be callable"):
        buffer_callback(3, SDS((), f32))
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        buffer_callback(lambda ctx, out: None, SDS((), f32), vmap_method="loop")
    with pytest.raises(ValueError, match="cannot specify 64-bit types"):
        buffer_callback(lambda ctx, out: None, SDS((), np.float64))
    with pytest.raises(ValueError, match="shape.*dtype"):
        buffer_callback(lambda ctx, out: None, [object()])
    # command_buffer_compatible is accepted and changes nothing on the CPU
    f = buffer_callback(lambda ctx, out, x: np.asarray(out).__setitem__(..., 7),
                        SDS((), f32), command_buffer_compatible=True)
    assert float(olympus.jit(f)(1.0)) == 7.0


# ---------------------------------------------------------------- effects

def test_unused_call_is_removed_unless_it_has_a_side_effect():
    calls = []

    def cb(ctx, out, x):
        calls.append(1)
        np.asarray(out)[...] = np.asarray(x)

    x = jnp.ones(3)
    pure = buffer_callback(cb, SDS.like(x))
    side = buffer_callback(cb, SDS.like(x), has_side_effect=True)
    olympus.jit(lambda x: (pure(x), x * 2)[1])(x)
    assert calls == []
    olympus.jit(lambda x: (side(x), x * 2)[1])(x)
    assert calls == [1]
    olympus.jit(lambda x: pure(x))(x)  # a used result: called
    assert calls == [1, 1]
    assert "has_side_effect=True" in str(olympus.make_jaxpr(lambda x: side(x))(x))


def test_side_effects_keep_program_order():
    order = []

    def tag(name):
        def host(*args):
            order.append(name)
            return np.zeros((), f32)
        return host

    def cb(ctx, out, x):
        order.append("buffer")
        np.asarray(out)[...] = 0

    side = buffer_callback(cb, SDS((), f32), has_side_effect=True)

    def f(x):
        io_callback(tag("io-1"), SDS((), f32), x, ordered=True)
        side(x)
        io_callback(tag("io-2"), SDS((), f32), x, ordered=True)
        return x

    olympus.jit(f)(jnp.float32(1))
    olympus.jit(f)(jnp.float32(2))
    assert order == ["io-1", "buffer", "io-2"] * 2


def test_side_effect_independent_of_the_differentiated_input_runs_under_grad():
    calls = []

    def cb(ctx, out, c):
        calls.append(1)
        np.asarray(out)[...] = 0

    side = buffer_callback(cb, SDS((), f32), has_side_effect=True)
    c = jnp.float32(3)
    g = olympus.grad(lambda x: (side(c), x * x)[1])(jnp.float32(2))
    assert float(g) == 4.0
    assert calls == [1]


# ---------------------------------------------------------------- vmap

def _adder(calls):
    def cb(ctx, out, x, y):
        calls.append((x.shape, y.shape, out.shape))
        np.asarray(out)[...] = np.asarray(x) + np.asarray(y)
    return cb


@pytest.mark.parametrize("method,shapes", [
    ("sequential", [((3,), (3,), (3,))] * 2),
    ("sequential_unrolled", [((3,), (3,), (3,))] * 2),
    ("expand_dims", [((2, 3), (1, 3), (2, 3))]),
    ("broadcast_all", [((2, 3), (2, 3), (2, 3))]),
    ("legacy_vectorized", [((2, 3), (3,), (2, 3))]),
])
def test_vmap_methods(method, shapes):
    calls = []
    f = buffer_callback(_adder(calls), SDS((3,), f32), vmap_method=method)
    xs, y = jnp.arange(6.0).reshape(2, 3), jnp.arange(3.0)
    want = np.arange(6.0).reshape(2, 3) + np.arange(3.0)
    r = olympus.vmap(f, in_axes=(0, None))(xs, y)
    np.testing.assert_array_equal(np.asarray(r), want)
    assert calls == shapes
    calls.clear()
    # batch axis 1, under jit, and out_axes 1
    r = olympus.jit(olympus.vmap(f, in_axes=(1, None), out_axes=1))(xs.T, y)
    np.testing.assert_array_equal(np.asarray(r), want.T)
    assert calls == shapes


def test_vmap_without_a_method_raises_and_unbatched_calls_run_once():
    calls = []
    f = buffer_callback(_adder(calls), SDS((3,), f32))
    with pytest.raises(NotImplementedError, match=re.escape(
            "vmap is only supported for the buffer_callback primitive when vmap_method is one "
            "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            "'legacy_vectorized'. Got vmap_method=None.")):
        olympus.vmap(f)(jnp.ones((2, 3)), jnp.ones((2, 3)))
    assert calls == []
    # nothing batched reaches the callback: it runs once, unbatched
    r = olympus.vmap(lambda z: f(jnp.ones(3), jnp.ones(3)) + z)(jnp.zeros((4, 3)))
    assert r.shape == (4, 3) and calls == [((3,), (3,), (3,))]


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmap_with_aliases(method):
    seen = []

    def cb(ctx, out, c, x):
        seen.append((c.shape, x.shape, np.shares_memory(np.asarray(out), np.asarray(c))))
        np.asarray(out)[...] += np.asarray(x)

    c, xs = jnp.arange(3.0), jnp.ones((2, 3))
    f = buffer_callback(cb, SDS((3,), f32), vmap_method=method, input_output_aliases={0: 0})
    r = olympus.vmap(f, in_axes=(None, 0))(c, xs)
    np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) + np.ones((2, 3)))
    np.testing.assert_array_equal(np.asarray(c), [0, 1, 2])
    assert all(s[2] for s in seen)
    if method.startswith("sequential"):
        assert [s[:2] for s in seen] == [((3,), (3,))] * 2
    else:  # the aliased argument is broadcast to the batch like its output
        assert seen[0][0] == (2, 3) and len(seen) == 1


# ---------------------------------------------------------------- control flow

def _doubler(calls):
    def cb(ctx, out, x):
        calls.append(1)
        np.asarray(out)[...] = np.asarray(x) * 2
    return buffer_callback(cb, SDS((3,), f32))


def test_inside_control_flow(mode):
    calls = []
    h = _doubler(calls)
    x = jnp.arange(3.0)
    r = mode(lambda x: lax.fori_loop(0, 3, lambda i, v: h(v), x))(x)
    np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) * 8)
    assert len(calls) == 3
    calls.clear()
    r = mode(lambda x: lax.cond(x[1] > 0, h, lambda v: v - 1, x))(x)
    np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) * 2)
    r = mode(lambda x: lax.cond(x[1] > 5, h, lambda v: v - 1, x))(x)
    np.testing.assert_array_equal(np.asarray(r), np.arange(3.0) - 1)
    assert len(calls) == 1
    calls.clear()
    carry, ys = mode(lambda x: lax.scan(lambda c, t: (h(c), c.sum() + t), x,
                                        jnp.arange(2.0)))(x)
    np.testing.assert_array_equal(np.asarray(carry), np.arange(3.0) * 4)
    np.testing.assert_array_equal(np.asarray(ys), [3.0, 7.0])
    assert len(calls) == 2
    calls.clear()
    r = mode(lambda x: lax.while_loop(lambda v: v[1] < 10, h, x))(x + 1)
    np.testing.assert_array_equal(np.asarray(r), (np.arange(3.0) + 1) * 8)
    assert len(calls) == 3


def test_aliased_update_in_a_loop_keeps_the_carry_right():
    def cb(ctx, out, v):
        np.asarray(out)[...] += 1

    inc = buffer_callback(cb, SDS((4,), f32), input_output_aliases={0: 0})
    x = jnp.zeros(4)
    r = olympus.jit(lambda x: lax.fori_loop(0, 5, lambda i, v: inc(v * 1) + inc(v), x))(x)
    # each step: (v + 1) + (v + 1)
    want = np.zeros(4)
    for _ in range(5):
        want = 2 * (want + 1)
    np.testing.assert_array_equal(np.asarray(r), want)
    np.testing.assert_array_equal(np.asarray(x), np.zeros(4))


def test_empty_buffers_are_usable_during_the_call():
    seen = []

    def cb(ctx, out, x):
        o = np.asarray(out)
        seen.append((out.valid, o.shape, np.asarray(x).shape, out.shape))

    f = buffer_callback(cb, SDS((0, 3), f32), has_side_effect=True)
    r = olympus.jit(f)(jnp.ones((2, 0)))
    assert r.shape == (0, 3)
    assert seen == [(True, (0, 3), (2, 0), (0, 3))]


def test_calls_from_two_threads():
    import threading

    def cb(ctx, out, x):
        o = np.asarray(out)
        o[...] = np.asarray(x)
        sum(range(50))  # room for the GIL to move to the other thread mid-call
        o *= 2

    f = olympus.jit(buffer_callback(cb, SDS((8,), f32)))
    errors = []

    def work(seed):
        try:
            for i in range(200):
                x = jnp.full((8,), float(seed * 1000 + i))
                if not np.array_equal(np.asarray(f(x)), np.full(8, 2.0 * (seed * 1000 + i))):
                    errors.append((seed, i))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

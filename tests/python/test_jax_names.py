"""Small JAX names users reach for: olympus.errors and which conversion of a
traced value raises which error, disable_jit, enable_x64 / disable_x64 as
context managers, jacobian, pickling arrays, Array.sharding."""
import pickle

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import errors


@pytest.mark.parametrize("convert, error", [
    (lambda x: 1 if x > 0 else 2, errors.TracerBoolConversionError),
    (lambda x: list(range(x)), errors.TracerIntegerConversionError),
    (lambda x: [0, 1, 2][x], errors.TracerIntegerConversionError),
    (lambda x: np.asarray(x), errors.TracerArrayConversionError),
    (lambda x: float(x), errors.ConcretizationTypeError),
])
def test_each_conversion_raises_its_error(convert, error):
    with pytest.raises(error, match="Abstract tracer value encountered") as info:
        olympus.jit(convert)(1)
    assert isinstance(info.value, errors.ConcretizationTypeError)
    assert isinstance(info.value, TypeError)


def test_float_is_not_one_of_the_conversion_subclasses():
    with pytest.raises(errors.ConcretizationTypeError) as info:
        olympus.jit(lambda x: float(x))(1.0)
    assert type(info.value) is errors.ConcretizationTypeError


def test_leaked_tracer_raises_unexpected_tracer_error():
    kept = []
    olympus.jit(lambda x: kept.append(x) or x)(1.0)
    with pytest.raises(errors.UnexpectedTracerError, match="unexpected tracer"):
        kept[0] + 1
    assert issubclass(errors.UnexpectedTracerError, TypeError)
    assert errors.ConcretizationTypeError is olympus.ConcretizationTypeError


def test_disable_jit_runs_python_op_by_op_and_restores():
    seen = []

    @olympus.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2 if x > 0 else -x   # Python control flow on a value

    with olympus.disable_jit():
        assert float(f(3.0)) == 6.0 and float(f(-1.0)) == 1.0
        # under a transformation the body is traced by that transformation
        g = olympus.jit(lambda x: x * x)
        assert float(olympus.grad(g)(3.0)) == 6.0
    assert seen[:2] == ["float", "float"]
    with pytest.raises(errors.TracerBoolConversionError):
        f(1.0)   # compiled again after the block
    with pytest.raises(ZeroDivisionError):
        with olympus.disable_jit():
            1 / 0
    with pytest.raises(errors.TracerBoolConversionError):
        f(2.0)   # restored after an exception too


def test_enable_x64_is_scoped():
    assert jnp.arange(2.0).dtype == np.float32
    with olympus.enable_x64():
        assert jnp.arange(2.0).dtype == np.float64
        assert olympus.config.olympus_enable_x64
        with olympus.disable_x64():
            assert jnp.arange(2.0).dtype == np.float32
        assert jnp.arange(2.0).dtype == np.float64
    assert jnp.arange(2.0).dtype == np.float32
    with pytest.raises(KeyError):
        with olympus.enable_x64():
            raise KeyError("inside")
    assert not olympus.config.olympus_enable_x64


def test_jacobian_is_reverse_mode_jacobian():
    f = lambda x: jnp.sin(x) * x[0]  # noqa: E731
    x = jnp.asarray(np.array([0.5, 1.0, 2.0], np.float32))
    np.testing.assert_allclose(olympus.jacobian(f)(x), olympus.jacfwd(f)(x), rtol=1e-6)
    assert olympus.jacobian is olympus.jacrev


@pytest.mark.parametrize("value", [np.arange(6, dtype=np.float32).reshape(2, 3),
                                   np.int32(7), np.array([True, False]),
                                   np.array([1 + 2j], np.complex64)])
def test_arrays_pickle_as_arrays(value):
    x = jnp.asarray(value)
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, olympus.Array)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_tracers_do_not_pickle():
    def f(x):
        pickle.dumps(x)
        return x
    with pytest.raises(Exception):
        olympus.jit(f)(1.0)


def test_sharding_names_the_device():
    x = jnp.arange(3.0)
    s = x.sharding
    assert s.device_set == {x.device} == x.devices()
    assert s.is_fully_replicated and s.is_fully_addressable
    assert s == olympus.sharding.SingleDeviceSharding(olympus.devices()[0])
    assert repr(s) == "SingleDeviceSharding(device=CpuDevice(id=0))"


def test_lower_as_text_and_compile():
    f = olympus.jit(lambda x, n: x * n, static_argnums=1)
    lowered = f.lower(jnp.ones(3), 2)
    assert lowered.as_text() == str(olympus.make_jaxpr(lambda x: x * 2)(jnp.ones(3)))
    assert [str(a) for a in lowered.in_avals] == ["f32[3]"]
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(jnp.arange(3.0), 2), [0.0, 2.0, 4.0])
    with pytest.raises(TypeError, match=r"leaf 0 is float32\[4\], compiled for float32\[3\]"):
        compiled(jnp.ones(4), 2)
    with pytest.raises(TypeError, match="leaf 1 is static 3, compiled for static 2"):
        compiled(jnp.ones(3), 3)
    with pytest.raises(TypeError, match="argument structure"):
        compiled((jnp.ones(3),), 2)


def test_ensure_compile_time_eval_computes_concrete_values_while_tracing():
    seen = []

    def g(x):
        with olympus.ensure_compile_time_eval():
            y = jnp.sin(np.float32(1.0))       # concrete: computed now
            seen.append(type(y).__name__)
            big = bool(y > 0.5)                # Python control flow on it
            z = x * 2                          # traced: staged as usual
        return z + (1.0 if big else 0.0)

    assert float(olympus.jit(g)(1.0)) == 3.0
    assert seen == ["Array"]
    assert "sin" not in str(olympus.make_jaxpr(g)(1.0))
    with pytest.raises(errors.TracerBoolConversionError):   # off again after the block
        olympus.jit(lambda x: 1.0 if jnp.sin(np.float32(1.0)) > 0.5 else x)(1.0)


def test_check_grads_passes_good_rules_and_catches_wrong_ones():
    from olympus.test_util import check_grads
    check_grads(lambda x: jnp.sin(x) * x, (jnp.arange(3.0),), order=2)
    check_grads(lambda x, y: {"a": x * y, "b": jnp.exp(x)}, (jnp.arange(3.0), 2.0), order=2)
    wrong_jvp = olympus.custom_jvp(lambda x: jnp.sin(x))
    wrong_jvp.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * t[0]))
    with pytest.raises(AssertionError, match="jvp against finite differences"):
        check_grads(wrong_jvp, (jnp.arange(3.0),), order=1, modes="fwd")
    wrong_vjp = olympus.custom_vjp(lambda x: jnp.sin(x))
    wrong_vjp.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (3.0 * g,))
    with pytest.raises(AssertionError, match="vjp against finite differences"):
        check_grads(wrong_vjp, (jnp.arange(3.0),), order=1, modes="rev")
    good_vjp = olympus.custom_vjp(lambda x: jnp.sin(x))
    good_vjp.defvjp(lambda x: (jnp.sin(x), x), lambda r, g: (jnp.cos(r) * g,))
    check_grads(good_vjp, (jnp.arange(3.0),), order=1, modes="rev")
    with olympus.enable_x64():
        check_grads(lambda x: jnp.tanh(x) ** 3, (jnp.arange(3.0),), order=3)
    with pytest.raises(ValueError, match="modes must be"):
        check_grads(jnp.sin, (1.0,), order=1, modes=("sideways",))
    with pytest.raises(TypeError, match="no floating-point leaves"):
        check_grads(lambda i: i, (jnp.arange(3),), order=1)

"""olympus.ffi: native C kernels (tests/python/ffi_kernels.c, built by the
Makefile into $BUILD/libolympus_ffi_test.so) registered from Python and called
from eager and jitted code, under vmap, in control flow and with custom
derivatives; their attributes, errors and call counts; the example in
examples/ffi/."""
import ctypes
import os
import re
import runpy
import shutil
import subprocess
import threading

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import ffi

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("OLYMPUS_EXT_DIR") or os.path.join(ROOT, "build")
LIB_PATH = os.path.join(BUILD, "libolympus_ffi_test.so")
KERNELS = ("axpy", "add", "copy", "tick", "two", "get", "fail", "scale_user", "accumulate")


def _load():
    if not os.path.exists(LIB_PATH):
        pytest.fail(f"{LIB_PATH} is missing: `make` builds it (make test does)")
    lib = ctypes.CDLL(LIB_PATH)
    for name in ("ffi_test_calls", "ffi_test_releases", "ffi_test_last_dim"):
        getattr(lib, name).restype = ctypes.c_long
    lib.ffi_test_log.restype = ctypes.c_double
    for k in KERNELS:
        if k != "scale_user":
            ffi.register_ffi_target(f"test_ffi.{k}", getattr(lib, f"ffi_test_{k}"))
    return lib


lib = None


@pytest.fixture(autouse=True)
def kernels():
    """The library, its targets registered (a no-op after the first time) and
    its counters reset."""
    global lib
    if lib is None:
        lib = _load()
    lib.ffi_test_reset()
    return lib


def sds(shape, dtype=np.float32):
    return olympus.ShapeDtypeStruct(shape, np.dtype(dtype))


def calls():
    return lib.ffi_test_calls()


def last_shape(i):
    return tuple(lib.ffi_test_last_dim(i, d) for d in range(lib.ffi_test_last_rank(i)))


def call_log():
    return [lib.ffi_test_log(i) for i in range(lib.ffi_test_log_len())]


X = np.arange(6, dtype=np.float32)
Y = np.full(6, 0.5, np.float32)


def axpy(x, y, **attrs):
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    return ffi.ffi_call("test_ffi.axpy", sds(np.shape(x), dtype))(x, y, **attrs)


# ---------------------------------------------------------------- registration

@pytest.mark.parametrize("fn", [42, "test_ffi.axpy", lambda u, f: 0, None, ctypes.c_int(3),
                                {"execute": None}])
def test_register_rejects_what_is_not_a_c_function(fn):
    with pytest.raises(TypeError, match="fn must be"):
        ffi.register_ffi_target("test_ffi.bad", fn)


def test_register_checks_name_and_platform():
    with pytest.raises(TypeError, match="name must be a str"):
        ffi.register_ffi_target(1, lib.ffi_test_axpy)
    with pytest.raises(ValueError, match="name is empty"):
        ffi.register_ffi_target("", lib.ffi_test_axpy)
    with pytest.raises(ValueError, match="unknown platform 'cuda'.*'cpu' only"):
        ffi.register_ffi_target("test_ffi.gpu", lib.ffi_test_axpy, platform="cuda")
    with pytest.raises(TypeError, match="platform must be a str"):
        ffi.register_ffi_target("test_ffi.gpu", lib.ffi_test_axpy, platform=None)
    ffi.register_ffi_target("test_ffi.host", lib.ffi_test_axpy, platform="Host")
    assert "test_ffi.host" in olympus._core.ffi_targets()
    ffi.unregister_ffi_target("test_ffi.host")


def test_register_null_function_pointer():
    null = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)()
    with pytest.raises(ValueError, match="NULL function pointer"):
        ffi.register_ffi_target("test_ffi.null", null)
    with pytest.raises(ValueError, match="NULL"):
        ffi.pycapsule(null)
    assert "test_ffi.null" not in olympus._core.ffi_targets()


def test_register_duplicate_is_an_error_unless_identical():
    name = "test_ffi.dup"
    ffi.register_ffi_target(name, lib.ffi_test_axpy)
    ffi.register_ffi_target(name, lib.ffi_test_axpy)  # the same function: a no-op
    with pytest.raises(ValueError, match="already registered"):
        ffi.register_ffi_target(name, lib.ffi_test_add)
    with pytest.raises(ValueError, match="already registered"):
        ffi.register_ffi_target(name, lib.ffi_test_axpy, user_data=(ctypes.c_double * 1)(1.0))
    f = olympus.jit(lambda x, y: ffi.ffi_call(name, sds((6,)))(x, y, a=3.0))
    np.testing.assert_allclose(f(X, Y), 3 * X + Y)
    ffi.unregister_ffi_target(name)
    with pytest.raises(ValueError, match="no FFI target named 'test_ffi.dup'"):
        ffi.ffi_call(name, sds((6,)))(X, Y)
    # the traced program keeps the target it was traced with
    np.testing.assert_allclose(f(X, Y), 3 * X + Y)
    ffi.register_ffi_target(name, lib.ffi_test_add)
    np.testing.assert_allclose(ffi.ffi_call(name, sds((6,)))(X, Y), X + Y)
    ffi.unregister_ffi_target(name)
    with pytest.raises(ValueError, match="no FFI target named"):
        ffi.unregister_ffi_target(name)


def test_register_a_pycapsule():
    cap = ffi.pycapsule(lib.ffi_test_axpy)
    assert type(cap).__name__ == "PyCapsule"
    ffi.register_ffi_target("test_ffi.capsule", cap)
    np.testing.assert_allclose(ffi.ffi_call("test_ffi.capsule", sds((6,)))(X, Y, a=-1),
                               -X + Y)
    ffi.unregister_ffi_target("test_ffi.capsule")
    with pytest.raises(TypeError, match="ctypes function pointer"):
        ffi.pycapsule(12345)


def test_user_data_reaches_the_kernel_and_release_runs_once():
    scale = (ctypes.c_double * 1)(2.5)
    ffi.register_ffi_target("test_ffi.scale", lib.ffi_test_scale_user, user_data=scale,
                            release=lib.ffi_test_release)
    f = ffi.ffi_call("test_ffi.scale", sds((6,)))
    np.testing.assert_allclose(f(X), 2.5 * X)
    scale[0] = -1.0  # the kernel reads the caller's memory, not a copy
    np.testing.assert_allclose(olympus.jit(f)(X), -X)
    ffi.unregister_ffi_target("test_ffi.scale")
    # a target nobody called is released as soon as it is unregistered
    before = lib.ffi_test_releases()
    ffi.register_ffi_target("test_ffi.scale2", lib.ffi_test_scale_user,
                            user_data=ctypes.pointer(ctypes.c_double(4.0)),
                            release=ffi.pycapsule(lib.ffi_test_release))
    assert lib.ffi_test_releases() == before
    ffi.unregister_ffi_target("test_ffi.scale2")
    assert lib.ffi_test_releases() == before + 1


def test_user_data_null_and_bad_types():
    ffi.register_ffi_target("test_ffi.nouser", lib.ffi_test_scale_user)
    with pytest.raises(olympus.CallbackError, match="user_data is NULL"):
        ffi.ffi_call("test_ffi.nouser", sds((6,)))(X)
    ffi.unregister_ffi_target("test_ffi.nouser")
    for bad, exc in (("abc", TypeError), (-1, ValueError), (ctypes.c_double(1.0), TypeError),
                     (True, TypeError)):
        with pytest.raises(exc, match="user_data"):
            ffi.register_ffi_target("test_ffi.baduser", lib.ffi_test_scale_user, user_data=bad)
    with pytest.raises(TypeError, match="release must be"):
        ffi.register_ffi_target("test_ffi.baduser", lib.ffi_test_scale_user, release=print)
    assert "test_ffi.baduser" not in olympus._core.ffi_targets()


def test_include_dir_holds_the_header(monkeypatch, tmp_path):
    d = ffi.include_dir()
    with open(os.path.join(d, "olympus.h")) as f:
        text = f.read()
    assert "oly_ffi_attr_i64" in text and "oly_ffi_fail" in text
    monkeypatch.setenv("OLYMPUS_INCLUDE_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="holds no olympus.h"):
        ffi.include_dir()
    shutil.copy(os.path.join(d, "olympus.h"), tmp_path / "olympus.h")
    assert ffi.include_dir() == str(tmp_path)


KERNEL_SRC = r"""
#include <olympus.h>
oly_status triple(void *user, oly_callback_frame *f);
oly_status triple(void *user, oly_callback_frame *f)
{
    int64_t k;
    oly_status st = oly_ffi_attr_i64(f, "k", &k);
    if (st != OLY_OK) return st;
    const float *x = f->args[0];
    float *y = f->results[0];
    for (int64_t i = 0; i < f->result_avals[0].dims[0]; i++) y[i] = (float)k * x[i];
    return OLY_OK;
}
"""


def test_a_kernel_built_with_include_dir_only(tmp_path):
    """The user's workflow: gcc -I include_dir(), no olympus library to link."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build FFI kernels")
    src = tmp_path / "triple.c"
    src.write_text(KERNEL_SRC)
    so = tmp_path / "libtriple.so"
    subprocess.run([gcc, "-std=c11", "-shared", "-fPIC", "-Wall", "-Werror",
                    "-I", ffi.include_dir(), str(src), "-o", str(so)], check=True)
    tl = ctypes.CDLL(str(so))
    ffi.register_ffi_target("test_ffi.triple", tl.triple)
    f = olympus.jit(lambda x: ffi.ffi_call("test_ffi.triple", sds((6,)))(x, k=3))
    np.testing.assert_allclose(f(X), 3 * X)
    with pytest.raises(olympus.CallbackError, match="attribute 'k' is missing"):
        ffi.ffi_call("test_ffi.triple", sds((6,)))(X)
    ffi.unregister_ffi_target("test_ffi.triple")


# ---------------------------------------------------------------- calls

def test_eager_and_jit_match_numpy(mode):
    f = mode(lambda x, y: axpy(x, y, a=2.0))
    np.testing.assert_allclose(f(X, Y), 2 * X + Y)
    assert calls() == 1
    np.testing.assert_allclose(f(X, Y), 2 * X + Y)
    assert calls() == 2


def test_float64_with_x64(mode):
    olympus.config.update("olympus_enable_x64", True)
    x = np.linspace(0, 1, 5)
    y = np.full(5, 1e-12)
    out = mode(lambda x, y: axpy(x, y, a=np.float64(1 / 3)))(x, y)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, x / 3 + y, rtol=1e-15)


def test_results_come_back_in_the_declared_structure():
    x = np.arange(3, dtype=np.float32)
    s = sds((3,))
    one = ffi.ffi_call("test_ffi.two", [s, s])(x)
    assert isinstance(one, list) and len(one) == 2
    a, b = ffi.ffi_call("test_ffi.two", (s, s))(x)
    np.testing.assert_allclose(a, x + 1)
    np.testing.assert_allclose(b, 2 * x)
    d = olympus.jit(lambda x: ffi.ffi_call("test_ffi.two", {"plus": s, "twice": s})(x))(x)
    assert set(d) == {"plus", "twice"}
    np.testing.assert_allclose(d["twice"], 2 * x)
    single = ffi.ffi_call("test_ffi.copy", s)(x)
    assert isinstance(single, olympus.Array)
    np.testing.assert_allclose(single, x)
    assert ffi.ffi_call("test_ffi.tick", None, has_side_effect=True)(x) is None
    assert ffi.ffi_call("test_ffi.tick", (), has_side_effect=True)(x) == ()


def test_python_scalars_and_numpy_arrays_as_arguments():
    out = ffi.ffi_call("test_ffi.copy", sds(()))(1.5)
    assert float(out) == 1.5
    out = ffi.ffi_call("test_ffi.copy", sds((3,), np.int32))(np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_call_option_errors():
    with pytest.raises(ValueError, match="no FFI target named 'test_ffi.nope'"):
        ffi.ffi_call("test_ffi.nope", sds((6,)))(X)
    with pytest.raises(TypeError, match="target name must be a str"):
        ffi.ffi_call(None, sds((6,)))
    with pytest.raises(ValueError, match="vmap_method must be one of the allowed methods"):
        ffi.ffi_call("test_ffi.axpy", sds((6,)), vmap_method="bogus")
    with pytest.raises(ValueError, match="64-bit types"):
        ffi.ffi_call("test_ffi.axpy", sds((6,), np.float64))
    with pytest.raises(ValueError, match="shape` and `dtype"):
        ffi.ffi_call("test_ffi.axpy", [1, 2])
    with pytest.raises(TypeError, match="input_output_aliases must be a dict or None"):
        ffi.ffi_call("test_ffi.axpy", sds((6,)), input_output_aliases=[(0, 0)])
    with pytest.raises(NotImplementedError, match="has_side_effect=True"):
        ffi.ffi_call("test_ffi.axpy", sds((6,)), has_side_effect=True, vmap_method="expand_dims")
    # the accepted spellings of "no aliases"
    for none in (None, {}):
        np.testing.assert_allclose(
            ffi.ffi_call("test_ffi.axpy", sds((6,)), input_output_aliases=none)(X, Y), X + Y)


def test_a_kernel_checking_its_shapes():
    with pytest.raises(olympus.CallbackError, match="x, y and the result differ"):
        axpy(X, Y[:3])


# ---------------------------------------------------------------- attributes

def get(which, reader, **attrs):
    """What the kernel read from attribute `which` with reader `reader` (f64[4])."""
    olympus.config.update("olympus_enable_x64", True)
    out = ffi.ffi_call("test_ffi.get", sds((4,), np.float64))(which=which, **{"as": reader},
                                                               **attrs)
    return np.asarray(out).tolist()


I8, I64, U64, F16, F32, F64, C64, C128 = 1, 4, 8, 9, 11, 12, 13, 14   # oly_dtype


@pytest.mark.parametrize("value,reader,want", [
    (True, "bool", [1, 0, 0, 0]),
    (False, "bool", [0, 0, 0, 0]),
    (np.bool_(True), "bool", [1, 0, 0, 0]),
    (7, "i64", [7, 0, 0, 0]),
    (-3, "i64", [-3, 0, 0, 0]),
    (2 ** 53, "i64", [2.0 ** 53, 0, 0, 0]),
    (np.int8(-5), "i64", [-5, 0, 0, 0]),
    (np.uint32(4_000_000_000), "i64", [4e9, 0, 0, 0]),
    (2.5, "f64", [2.5, 0, 0, 0]),
    (np.float32(0.25), "f64", [0.25, 0, 0, 0]),
    (np.float16(0.5), "f64", [0.5, 0, 0, 0]),
    (3, "f64", [3.0, 0, 0, 0]),
    (np.array(0.75), "f64", [0.75, 0, 0, 0]),
    ("hello", "str", [5, ord("h"), ord("o"), 1]),
    ("", "str", [0, -1, -1, 1]),
    ("h\u00e9", "str", [3, ord("h"), 0xA9, 1]),
    (np.arange(5, dtype=np.int32), "array_int32", [10, 5, 1, 5]),
    (np.arange(4, dtype=np.int64), "array_int64", [6, 4, 1, 4]),
    (np.full((2, 3), 0.5, np.float32), "array_float32", [3, 6, 2, 2]),
    (np.ones((2, 3)).T, "array_float64", [6, 6, 2, 3]),   # not C order: copied in C order
    (np.arange(3.0).astype(">f8"), "array_float64", [3, 3, 1, 3]),  # other byte order
    (1 + 2j, "find", [0, C128, 0, 2]),
    (np.complex64(1 - 1j), "find", [0, C64, 0, -1]),
    (2 ** 64 - 1, "find", [0, U64, 0, 2.0 ** 64]),
    (np.int8(3), "find", [0, I8, 0, 3]),
    (1, "find", [0, I64, 0, 1]),
    (np.float32(2), "find", [0, F32, 0, 2]),
    (2.0, "find", [0, F64, 0, 2]),
    (np.float16(1.5), "find", [0, F16, 0, 1.5]),
    ("s", "find", [1, -1, -1, 0]),
    (np.zeros((2, 5), np.float32), "find", [2, F32, 2, 0]),
])
def test_attributes_of_every_type(value, reader, want):
    assert get("v", reader, v=value) == pytest.approx(want)


def test_missing_attribute_is_found_as_absent():
    assert get("nope", "find") == [-1, -1, -1, -1]


@pytest.mark.parametrize("value,reader,message", [
    ("text", "f64", "attribute 'v' is a string, expected a float"),
    (True, "i64", "attribute 'v' is a bool scalar, expected an integer scalar"),
    (1.5, "i64", "attribute 'v' is a float64 scalar, expected an integer scalar"),
    (1, "bool", "attribute 'v' is an int64 scalar, expected a bool scalar"),
    (1j, "f64", "attribute 'v' is a complex128 scalar, expected a float"),
    (3, "str", "attribute 'v' is an int64 scalar, expected a string"),
    (np.zeros(3), "array_int32",
     r"attribute 'v' is an array of float64\[3\], expected an array of int32"),
    (4, "array_int32", "attribute 'v' is an int64 scalar, expected an array of int32"),
])
def test_wrong_attribute_type_is_an_error_from_c(value, reader, message):
    with pytest.raises(olympus.CallbackError) as e:
        get("v", reader, v=value)
    text = str(e.value)
    assert "ffi_call to target 'test_ffi.get' failed (OLY_ERR_TYPE)" in text
    assert re.search(message, text), text


def test_missing_attribute_and_out_of_range_are_errors_from_c():
    with pytest.raises(olympus.CallbackError,
                       match=r"failed \(OLY_ERR_INVALID\): attribute 'eps' is missing "
                             r"\(the call has: as, n, which\)"):
        get("eps", "f64", n=1)
    with pytest.raises(olympus.CallbackError,
                       match=r"attribute 'v' is 18446744073709551615, which does not fit in "
                             "int64"):
        get("v", "i64", v=2 ** 64 - 1)
    with pytest.raises(olympus.CallbackError, match="'which' is missing.*no attributes"):
        ffi.ffi_call("test_ffi.get", sds((4,)))()


@pytest.mark.parametrize("value,exc,message", [
    ([1, 2], TypeError, "must be a Python or NumPy scalar, a str or a NumPy array"),
    (None, TypeError, "must be a Python or NumPy scalar"),
    (np.array(["a", "b"]), TypeError, "dtype"),
    (np.zeros(300_000), ValueError, "at most 1048576 bytes"),
    (2 ** 64, OverflowError, "does not fit in 64 bits"),
    (-2 ** 63 - 1, OverflowError, "does not fit in 64 bits"),
    ("a\0b", ValueError, "NUL"),
])
def test_attribute_values_rejected_in_python(value, exc, message):
    with pytest.raises(exc, match=message):
        axpy(X, Y, a=value)


def test_traced_values_are_not_attributes():
    with pytest.raises(TypeError, match="attributes are static values"):
        olympus.jit(lambda x, y, a: axpy(x, y, a=a))(X, Y, 2.0)
    with pytest.raises(TypeError, match="attributes are static values"):
        axpy(X, Y, a=jnp.asarray(2.0))


def test_attributes_are_part_of_the_program():
    f = olympus.jit(lambda x, y, a: axpy(x, y, a=a), static_argnums=2)
    np.testing.assert_allclose(f(X, Y, 2.0), 2 * X + Y)
    np.testing.assert_allclose(f(X, Y, 3.0), 3 * X + Y)
    np.testing.assert_allclose(f(X, Y, 2.0), 2 * X + Y)
    # eagerly too: equal attributes share one binding, others do not
    for a in (1.0, 5.0, 1.0, 5.0):
        np.testing.assert_allclose(axpy(X, Y, a=a), a * X + Y)
    j1 = str(olympus.make_jaxpr(lambda x, y: axpy(x, y, a=2.0))(X, Y))
    j2 = str(olympus.make_jaxpr(lambda x, y: axpy(x, y, a=2.0))(X, Y))
    j3 = str(olympus.make_jaxpr(lambda x, y: axpy(x, y, a=np.float32(2.0)))(X, Y))
    assert j1 == j2
    assert "callback=ffi_call:test_ffi.axpy{a=2.0}" in j1
    assert "callback=ffi_call:test_ffi.axpy{a=float32(2.0)}" in j3   # another attribute


# ---------------------------------------------------------------- effects and DCE

def test_pure_call_is_removed_when_unused():
    def f(x, y, side):
        ffi.ffi_call("test_ffi.axpy", sds((6,)), has_side_effect=side)(x, y)
        return x * 2
    olympus.jit(lambda x, y: f(x, y, False))(X, Y)
    assert calls() == 0
    olympus.jit(lambda x, y: f(x, y, True))(X, Y)
    assert calls() == 1
    assert "io_callback" in str(olympus.make_jaxpr(lambda x, y: f(x, y, True))(X, Y))


def test_side_effect_without_results_runs_in_order():
    def f(x):
        for k in range(3):
            ffi.ffi_call("test_ffi.tick", None, has_side_effect=True)(x + k)
        return x
    olympus.jit(f)(np.float32(10))
    assert calls() == 3
    assert call_log() == [10, 11, 12]
    f(np.float32(20))   # eagerly
    assert call_log()[3:] == [20, 21, 22]


def test_pure_call_runs_eagerly_even_if_unused():
    axpy(X, Y)
    assert calls() == 1


# ---------------------------------------------------------------- vmap

XB = np.arange(12, dtype=np.float32).reshape(4, 3)
Y3 = np.array([0.5, 1.5, 2.5], np.float32)


def batched_add(method):
    def f(x, y):
        return ffi.ffi_call("test_ffi.add", sds(np.shape(x)), vmap_method=method)(x, y)
    return olympus.vmap(f, in_axes=(0, None))


def test_vmap_without_a_method_is_an_error():
    with pytest.raises(NotImplementedError,
                       match=r"ffi_call:test_ffi.add.*Got vmap_method=None"):
        batched_add(None)(XB, Y3)
    # nothing batched: no rule is needed and the kernel runs once
    f = olympus.vmap(lambda i, y: ffi.ffi_call("test_ffi.add", sds((3,)))(y, y) + i,
                     in_axes=(0, None))
    np.testing.assert_allclose(f(np.zeros(4, np.float32), Y3), np.tile(2 * Y3, (4, 1)))
    assert calls() == 1


@pytest.mark.parametrize("method,n_calls,y_shape", [
    ("sequential", 4, (3,)),
    ("sequential_unrolled", 4, (3,)),
    ("expand_dims", 1, (1, 3)),
    ("broadcast_all", 1, (4, 3)),
    ("legacy_vectorized", 1, (3,)),
])
def test_vmap_methods(method, n_calls, y_shape, mode):
    out = mode(batched_add(method))(XB, Y3)
    np.testing.assert_allclose(out, XB + Y3)
    assert calls() == n_calls
    assert last_shape(1) == y_shape
    assert last_shape(0) == ((3,) if n_calls == 4 else (4, 3))
    if n_calls == 4:
        assert call_log() == [0, 3, 6, 9]   # in index order


def test_nested_vmap_sequential():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    f = olympus.vmap(olympus.vmap(
        lambda x, y: ffi.ffi_call("test_ffi.add", sds((3,)), vmap_method="sequential")(x, y),
        in_axes=(0, None)), in_axes=(0, None))
    np.testing.assert_allclose(f(x, Y3), x + Y3)
    assert calls() == 8


def test_vmap_of_a_side_effect_is_sequential():
    f = olympus.vmap(lambda x: ffi.ffi_call("test_ffi.tick", None, has_side_effect=True)(x))
    f(np.arange(5, dtype=np.float32))
    assert call_log() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- control flow

def test_fori_loop(mode):
    def f(x, y):
        return olympus.lax.fori_loop(0, 5, lambda i, v: axpy(v, y, a=0.5), x)
    want = X.astype(np.float64)
    for _ in range(5):
        want = 0.5 * want + Y
    np.testing.assert_allclose(mode(f)(X, Y), want, rtol=1e-6)
    assert calls() == 5


def test_while_loop_and_scan():
    def w(x):
        return olympus.lax.while_loop(lambda v: v[0] < 100,
                                      lambda v: axpy(v, v, a=1.0), x)
    np.testing.assert_allclose(olympus.jit(w)(np.ones(6, np.float32)), np.full(6, 128))
    assert calls() == 7

    def s(c, x):
        y = ffi.ffi_call("test_ffi.two", (sds(()), sds(())))(x)
        return c + y[0], y[1]
    c, ys = olympus.jit(lambda xs: olympus.lax.scan(s, np.float32(0), xs))(X)
    np.testing.assert_allclose(c, np.sum(X + 1))
    np.testing.assert_allclose(ys, 2 * X)


def _affine_f32(x, y, a, n):
    """n steps of x = a * x + y in float32, as the kernel computes them."""
    x, y, a = np.float32(x), np.float32(y), np.float32(a)
    log = []
    for _ in range(n):
        log.append(float(x))
        x = np.float32(a * x + y)
    return x, log


def test_scalar_calls_in_loops_run_every_iteration_in_order():
    """One-element calls make the loop body a register program (its calls'
    frames prepared once per loop): every iteration calls the kernel, in
    order, with the carry of the iteration before."""
    f = olympus.jit(lambda x, y: olympus.lax.fori_loop(
        0, 1000, lambda i, v: axpy(v, y, a=0.5), x))
    want, log = _affine_f32(3.0, 0.25, 0.5, 1000)
    assert f(np.float32(3), np.float32(0.25)) == want
    assert calls() == 1000
    assert call_log()[:20] == log[:20]
    # the counter and the call in one body; the carry an f64 under x64 too
    g = olympus.jit(lambda x: olympus.lax.fori_loop(
        0, 7, lambda i, v: axpy(v, np.float32(1), a=2.0) + i.astype(np.float32), x))
    x, want = np.float32(0.5), np.float32(0.5)
    for i in range(7):
        want = np.float32(np.float32(2 * want + 1) + i)
    assert g(x) == want


def test_scalar_calls_in_a_while_loop_condition_and_body():
    """A call in the condition and one in the body, both on registers."""
    cond = lambda v: axpy(v, np.float32(0), a=1.0) < 100
    body = lambda v: axpy(v, v, a=1.0)
    f = olympus.jit(lambda x: olympus.lax.while_loop(cond, body, x))
    assert f(np.float32(3)) == 192  # 3 6 12 24 48 96 192
    assert calls() == 7 + 6  # seven conditions, six bodies
    assert call_log() == [3, 3, 6, 6, 12, 12, 24, 24, 48, 48, 96, 96, 192]


def test_a_failing_scalar_call_stops_the_loop_and_the_next_call_works():
    def f(x, stop):
        def body(i, v):
            # the kernel fails on the iteration whose carry reaches `stop`
            return olympus.lax.cond(v >= stop,
                                    lambda v: ffi.ffi_call("test_ffi.fail", sds(()))(v, message="too big"),
                                    lambda v: axpy(v, np.float32(1), a=1.0), v)
        return olympus.lax.fori_loop(0, 10, body, x)
    g = olympus.jit(f)
    with pytest.raises(olympus.CallbackError,
                       match=r"^ffi_call to target 'test_ffi.fail' failed \(OLY_ERR_CALLBACK\): "
                             r"too big \(target test_ffi.fail\)$"):
        g(np.float32(0), np.float32(4))
    assert g(np.float32(0), np.float32(100)) == 10
    h = olympus.jit(lambda x: olympus.lax.fori_loop(
        0, 5, lambda i, v: ffi.ffi_call("test_ffi.fail", sds(()))(v, status=99, message="boom"), x))
    lib.ffi_test_reset()
    with pytest.raises(olympus.CallbackError, match=r"failed \(status 99\): boom"):
        h(np.float32(1))
    assert calls() == 1  # the loop stopped at its first failure
    np.testing.assert_allclose(axpy(X, Y), X + Y)


def test_chained_scalar_calls_and_their_statistics():
    """256 chained one-element calls in one jit: a register program calling
    the kernel per step; statistics count every call, in a loop too."""
    from olympus.experimental.callback_profile import collect_callback_stats

    def chain(x):
        for _ in range(256):
            x = axpy(x, np.float32(1), a=0.5)
        return x
    f = olympus.jit(chain)
    want, _ = _affine_f32(0.25, 1, 0.5, 256)
    assert f(np.float32(0.25)) == want
    assert calls() == 256
    loop = olympus.jit(lambda x: olympus.lax.fori_loop(
        0, 50, lambda i, v: axpy(v, np.float32(1), a=0.5), x))
    loop(np.float32(0))
    with collect_callback_stats() as stats:
        f(np.float32(0.25))
        loop(np.float32(0))
    (r,) = [r for r in stats if r.name.startswith("ffi_call:test_ffi.axpy")]
    assert (r.calls, r.errors, r.bytes_in, r.bytes_out) == (306, 0, 306 * 8, 306 * 4)


def test_cond_runs_only_the_taken_branch():
    def f(p, x, y):
        return olympus.lax.cond(p, lambda: axpy(x, y, a=10.0), lambda: x - y)
    jf = olympus.jit(f)
    np.testing.assert_allclose(jf(True, X, Y), 10 * X + Y)
    np.testing.assert_allclose(jf(False, X, Y), X - Y)
    assert calls() == 1


# ---------------------------------------------------------------- differentiation

def test_grad_without_a_rule_names_the_target():
    with pytest.raises(ValueError, match=r"jvp of pure_callback\[callback=ffi_call:"
                                         r"test_ffi.axpy\{a=2.0\}\].*custom_jvp"):
        olympus.grad(lambda x: jnp.sum(axpy(x, Y, a=2.0)))(X)
    with pytest.raises(ValueError, match=r"ffi_call:test_ffi.axpy.*custom_jvp"):
        olympus.jit(olympus.grad(lambda x: jnp.sum(axpy(x, Y))))(X)
    # a call that does not depend on the differentiated input needs no rule
    g = olympus.grad(lambda x: jnp.sum(x * axpy(Y, Y)))(X)
    np.testing.assert_allclose(g, 2 * Y)


def test_transpose_without_a_rule_names_the_target():
    with pytest.raises(ValueError, match=r"transpose of pure_callback\[callback=ffi_call:"
                                         r"test_ffi.axpy\].*custom_vjp"):
        olympus.linear_transpose(lambda x: axpy(x, x), X)


def test_custom_jvp_around_a_kernel():
    @olympus.custom_jvp
    def scaled(x):
        return axpy(x, jnp.zeros_like(x), a=3.0)

    @scaled.defjvp
    def scaled_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled(x), 3.0 * t

    np.testing.assert_allclose(olympus.grad(lambda x: jnp.sum(scaled(x) ** 2))(X), 18 * X)
    np.testing.assert_allclose(olympus.jit(olympus.grad(lambda x: jnp.sum(scaled(x))))(X),
                               np.full(6, 3.0))
    y, t = olympus.jvp(scaled, (X,), (np.ones(6, np.float32),))
    np.testing.assert_allclose(y, 3 * X)
    np.testing.assert_allclose(t, np.full(6, 3.0))


def test_custom_jvp_whose_tangent_is_a_kernel():
    """Forward mode works; reverse mode needs the tangent's transpose, which a
    kernel does not have: the error names it."""
    @olympus.custom_jvp
    def scaled(x):
        return axpy(x, jnp.zeros_like(x), a=3.0)

    @scaled.defjvp
    def scaled_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return scaled(x), axpy(t, jnp.zeros_like(t), a=3.0)

    _, t = olympus.jvp(scaled, (X,), (np.ones(6, np.float32),))
    np.testing.assert_allclose(t, np.full(6, 3.0))
    with pytest.raises(ValueError, match=r"transpose of pure_callback\[callback=ffi_call:"
                                         r"test_ffi.axpy\{a=3.0\}\].*custom_vjp"):
        olympus.grad(lambda x: jnp.sum(scaled(x)))(X)


def example():
    return runpy.run_path(os.path.join(ROOT, "examples", "ffi", "rms_norm.py"),
                          run_name="ffi_example")


def test_example_custom_vjp_grad_matches_numpy():
    ex = example()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    w = rng.standard_normal((3, 7)).astype(np.float32)
    np.testing.assert_allclose(olympus.jit(ex["rms_norm"])(x), ex["rms_norm_np"](x), rtol=1e-5,
                               atol=1e-6)
    g = olympus.jit(olympus.grad(lambda x: jnp.sum(ex["rms_norm"](x, 1e-2) * w)))(x)
    np.testing.assert_allclose(g, ex["rms_norm_vjp_np"](x, w, 1e-2), rtol=1e-4, atol=1e-5)
    # and the same gradient by central differences in float64
    olympus.config.update("olympus_enable_x64", True)
    x64 = x.astype(np.float64)

    def loss(v):
        return float(np.sum(np.asarray(ex["rms_norm"](v, 1e-2)) * w))
    g64 = olympus.grad(lambda v: jnp.sum(ex["rms_norm"](v, 1e-2) * w))(x64)
    e = np.zeros_like(x64)
    e[1, 2] = 1e-6
    fd = (loss(x64 + e) - loss(x64 - e)) / 2e-6
    assert abs(float(np.asarray(g64)[1, 2]) - fd) < 1e-6


def test_example_runs():
    assert example()["main"]() == 0


# ---------------------------------------------------------------- kernel errors

@pytest.mark.parametrize("jit", [False, True])
def test_kernel_error_names_target_status_and_message(jit):
    def f(x):
        return ffi.ffi_call("test_ffi.fail", sds((6,)))(x, status=1, message="negative input")
    g = olympus.jit(f) if jit else f
    with pytest.raises(olympus.CallbackError) as e:
        g(X)
    assert isinstance(e.value, RuntimeError)
    assert str(e.value) == ("ffi_call to target 'test_ffi.fail' failed (OLY_ERR_INVALID): "
                            "negative input (target test_ffi.fail)")
    np.testing.assert_allclose(axpy(X, Y), X + Y)  # the next call works


def test_kernel_error_inside_a_loop_and_without_message():
    def f(x):
        return olympus.lax.fori_loop(
            0, 3, lambda i, v: ffi.ffi_call("test_ffi.fail", sds((6,)))(v, silent=True), x)
    with pytest.raises(olympus.CallbackError,
                       match=r"'test_ffi.fail' failed \(OLY_ERR_CALLBACK\) and gave no message"):
        olympus.jit(f)(X)
    with pytest.raises(olympus.CallbackError, match=r"failed \(status 99\): boom"):
        ffi.ffi_call("test_ffi.fail", sds((6,)))(X, status=99, message="boom")
    with pytest.raises(olympus.CallbackError, match=r"failed \(OLY_ERR_CALLBACK\): ok"):
        ffi.ffi_call("test_ffi.fail", sds((6,)))(X, status=0, message="ok")


def test_kernel_errors_from_threads_keep_their_own_messages():
    """The message travels in each call's frame: concurrent failures do not mix."""
    f = olympus.jit(lambda x, m: ffi.ffi_call("test_ffi.fail", sds((6,)))(x, message=m),
                    static_argnums=1)
    bad = []

    def worker(k):
        for _ in range(50):
            try:
                f(X, f"thread {k}")
                bad.append(f"thread {k}: no error")
            except olympus.CallbackError as e:
                if f"thread {k} (target" not in str(e):
                    bad.append(str(e))
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []


def test_input_output_aliases_update_in_place():
    """An aliased result starts as its input and the kernel sees the two as one
    buffer (updated in place); the buffer plan shares the input's memory only
    when nothing else reads it (test_buffer_callback.py checks the plan), so a
    caller's array and an intermediate read again keep their values."""
    acc = ffi.ffi_call("test_ffi.accumulate", sds((6,)), input_output_aliases={0: 0})
    x = olympus.numpy.asarray(X)
    np.testing.assert_allclose(acc(x, Y), X + Y)
    assert lib.ffi_test_last_in_place() == 1        # one buffer for x and the result
    np.testing.assert_allclose(np.asarray(x), X)    # the caller's array is unchanged

    f = olympus.jit(lambda x, y: acc(x * 2.0, y) + 1.0)
    np.testing.assert_allclose(f(X, Y), 2 * X + Y + 1)
    g = olympus.jit(lambda x, y: (acc(x * 2.0, y), x * 2.0))  # the input is read again
    r, twice = g(X, Y)
    np.testing.assert_allclose(r, 2 * X + Y)
    np.testing.assert_allclose(twice, 2 * X)
    h = olympus.jit(lambda x, y: olympus.lax.fori_loop(0, 3, lambda i, c: acc(c, y), x))
    np.testing.assert_allclose(h(X, Y), X + 3 * Y, rtol=1e-6)


def test_input_output_aliases_errors():
    acc = ffi.ffi_call("test_ffi.accumulate", sds((6,)), input_output_aliases={2: 0})
    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '2:0'"):
        acc(X, Y)
    acc = ffi.ffi_call("test_ffi.accumulate", sds((6,)), input_output_aliases={0: 1})
    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '0:1'"):
        acc(X, Y)
    acc = ffi.ffi_call("test_ffi.accumulate", sds((3,)), input_output_aliases={0: 0})
    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '0:0'"):
        acc(X, Y)


def test_aliased_side_effecting_call_is_kept():
    acc = ffi.ffi_call("test_ffi.accumulate", sds((6,)), has_side_effect=True,
                       input_output_aliases={0: 0})
    olympus.jit(lambda x, y: (acc(x, y), x)[1])(X, Y)   # result unused
    assert calls() == 1
    pure = ffi.ffi_call("test_ffi.accumulate", sds((6,)), input_output_aliases={0: 0})
    olympus.jit(lambda x, y: (pure(x, y), x)[1])(X, Y)
    assert calls() == 1                                   # removed: no side effect

"""olympus.ffi: native C kernels called from olympus programs, as `jax.ffi`.

A kernel is a C function with olympus's host-function ABI (`include/olympus.h`):

    oly_status kernel(void *user_data, oly_callback_frame *frame);

It reads its arguments from `frame->args` (avals in `frame->arg_avals`), fills
`frame->results` (avals in `frame->result_avals`), reads the call's attributes
by name (`oly_ffi_attr_f64(frame, "eps", &eps)` and friends) and reports a
failure with `return oly_ffi_fail(frame, OLY_ERR_INVALID, "...")`. Everything a
kernel needs is inline in the header: build it with
`gcc -shared -fPIC -I<include_dir()> kernel.c -o libkernel.so`, no olympus
library to link.

    lib = ctypes.CDLL("libkernel.so")
    olympus.ffi.register_ffi_target("rms_norm", lib.rms_norm)
    y = olympus.ffi.ffi_call("rms_norm", olympus.ShapeDtypeStruct(x.shape, x.dtype),
                             vmap_method="broadcast_all")(x, eps=1e-5)

The executor calls the kernel directly, with no Python on the path and without
taking the GIL (about a nanosecond more than a C host function of the C API;
docs/performance.md). The call is the
`pure_callback` primitive (or `io_callback` with `has_side_effect=True`) whose
host function is the target bound to the attributes, so it is removed when its
results are unused (unless `has_side_effect`), follows `vmap_method` under
`vmap`, works in control flow and eagerly, and needs `custom_jvp` /
`custom_vjp` to be differentiated. A kernel's failure raises
`olympus.CallbackError` naming the target, the status and the message.

Differences from `jax.ffi`: targets are plain C functions (no XLA handler
bundles, no api_version), attributes arrive in a C struct read by name, and
`unregister_ffi_target` exists so that a target's release hook can run.
"""
import ctypes
import os

from olympus import _core
from olympus._src.callback import _result_avals

__all__ = ["register_ffi_target", "unregister_ffi_target", "ffi_call", "include_dir",
           "pycapsule"]

_VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized")
_PLATFORMS = ("cpu", "host")


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


def _is_cfuncptr(obj):
    return isinstance(obj, ctypes._CFuncPtr)  # noqa: SLF001 - the base of every ctypes function


def _address(obj):
    """The address a ctypes object holds (function pointer, pointer, array,
    c_void_p, c_char_p): what a C function would receive for it."""
    if isinstance(obj, (ctypes.Array, ctypes.Structure, ctypes.Union)):
        return ctypes.addressof(obj)
    return ctypes.cast(obj, ctypes.c_void_p).value or 0


def _pointer(what, obj):
    """A capsule or an int address for the C side (None stays None)."""
    if obj is None or _is_capsule(obj):
        return obj
    if isinstance(obj, bool):
        raise TypeError(f"register_ffi_target: {what} must be a pointer, got a bool")
    if isinstance(obj, int):
        if obj < 0 or obj >= 1 << (8 * ctypes.sizeof(ctypes.c_void_p)):
            raise ValueError(f"register_ffi_target: {what} {obj:#x} is not an address")
        return obj
    if isinstance(obj, ctypes._SimpleCData) and not isinstance(  # noqa: SLF001
            obj, (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p)):
        raise TypeError(f"register_ffi_target: {what} must be a pointer, got a "
                        f"{type(obj).__name__}")
    if isinstance(obj, (ctypes._Pointer, ctypes._SimpleCData, ctypes.Array,  # noqa: SLF001
                        ctypes.Structure, ctypes.Union, ctypes._CFuncPtr)):  # noqa: SLF001
        return _address(obj)
    raise TypeError(f"register_ffi_target: {what} must be a PyCapsule, a ctypes pointer or "
                    f"an int address, got {type(obj).__name__}")


def register_ffi_target(name, fn, platform="cpu", *, user_data=None, release=None):
    """Registers the C function `fn` as the FFI target `name`.

    fn: a `PyCapsule` holding the function's address, or a ctypes function
        pointer (`ctypes.CDLL(path).kernel`), of an `oly_host_call_fn`:
        `oly_status fn(void *user_data, oly_callback_frame *frame)`.
    platform: "cpu" (olympus runs FFI targets on its CPU devices only; "host",
        XLA's name for it, is accepted too, in any case).
    user_data: what `fn` receives as its first argument: None (NULL), a
        `PyCapsule`, a ctypes pointer, array or structure (its address) or an
        int address. olympus does not read it.
    release: None, or a `PyCapsule` / ctypes function pointer of
        `void release(void *user_data)`, called once when the target is gone:
        after `unregister_ffi_target(name)`, once no program that calls it is
        left (a target still registered at exit is not released).

    The objects given (fn, user_data, release) are kept alive as long as the
    target, so a ctypes buffer passed as user_data stays valid. Registering a
    name again with the same function, user data and release is a no-op; with
    anything else it is a ValueError (targets are never replaced behind the
    programs that call them).
    """
    if not isinstance(name, str):
        raise TypeError(f"register_ffi_target: the name must be a str, got {type(name).__name__}")
    if not isinstance(platform, str):
        raise TypeError("register_ffi_target: platform must be a str, got "
                        f"{type(platform).__name__}")
    if platform.lower() not in _PLATFORMS:
        raise ValueError(f"register_ffi_target: unknown platform {platform!r}: olympus runs FFI "
                         "targets on 'cpu' only")
    if isinstance(fn, dict):
        raise TypeError("register_ffi_target: fn must be one C function (olympus has no "
                        "handler bundles with separate instantiate/prepare/execute stages)")
    if _is_capsule(fn):
        fn_ptr = fn
    elif _is_cfuncptr(fn):
        fn_ptr = _address(fn)
        if not fn_ptr:
            raise ValueError(f"register_ffi_target: fn for {name!r} is a NULL function pointer")
    else:
        raise TypeError("register_ffi_target: fn must be a PyCapsule or a ctypes function "
                        "pointer to a C function `oly_status fn(void *user_data, "
                        f"oly_callback_frame *frame)`, got {type(fn).__name__}")
    user_ptr = _pointer("user_data", user_data)
    if release is None or _is_capsule(release):
        rel_ptr = release
    elif _is_cfuncptr(release):
        rel_ptr = _address(release) or None
    else:
        raise TypeError("register_ffi_target: release must be None, a PyCapsule or a ctypes "
                        f"function pointer, got {type(release).__name__}")
    _core.ffi_register(name, fn_ptr, user_ptr, rel_ptr, (fn, user_data, release))


def unregister_ffi_target(name, platform="cpu"):
    """Forgets the target `name` (a ValueError if there is none). Programs
    already traced keep calling it; its release hook runs once none is left.
    The name may then be registered again."""
    if not isinstance(platform, str) or platform.lower() not in _PLATFORMS:
        raise ValueError(f"unregister_ffi_target: unknown platform {platform!r}: olympus runs "
                         "FFI targets on 'cpu' only")
    if not _core.ffi_unregister(name):
        raise ValueError(f"unregister_ffi_target: no FFI target named {name!r} is registered")


def ffi_call(target_name, result_shape_dtypes, *, has_side_effect=False, vmap_method=None,
             input_output_aliases=None):
    """Returns a function calling the FFI target `target_name`.

    `ffi_call(name, result_shape_dtypes, ...)(*args, **attrs)`: `args` are
    arrays (olympus Arrays, tracers, NumPy arrays, scalars), passed to the
    kernel as its read-only argument buffers; `attrs` are static attributes
    (Python bool/int/float/complex, NumPy scalars, str, NumPy arrays of at most
    1 MiB) that the kernel reads by name (see include/olympus.h, "FFI
    kernels"). Attributes are part of the traced program: other values make
    another program.

    result_shape_dtypes: an object with `.shape` and `.dtype`
        (`olympus.ShapeDtypeStruct`, an array), or a pytree (tuple, list, dict)
        of them; the results come back in that structure (one array for one
        object). An empty pytree means no results.
    has_side_effect: False: the call is pure (removed under jit when its
        results are unused; it may run more or fewer times). True: it is an
        effect (never removed, run in program order), as an io_callback.
    vmap_method: how `vmap` batches the call, as for `pure_callback`:
        "sequential" (one call per element, a loop), "sequential_unrolled",
        "expand_dims" (one call; unbatched arguments get a leading axis of
        size 1), "broadcast_all" (one call; unbatched arguments broadcast),
        "legacy_vectorized" (one call; unbatched arguments as they are); for
        the one-call methods the kernel gets the batched shapes and fills
        batched results. None: vmap of a batched call is NotImplementedError.
        With has_side_effect=True only None and the sequential methods are
        available, and a batched call runs once per element.
    input_output_aliases: {input index: output index}. The output starts as
        that (flattened) input and the kernel updates it in place: in the
        input's own memory when nothing else reads the input (an intermediate
        under jit), else in a copy (a caller's array is never changed). Checked
        as buffer_callback checks them.
    """
    if not isinstance(target_name, str):
        raise TypeError("ffi_call: the target name must be a str, got "
                        f"{type(target_name).__name__}")
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method!r}")
    if input_output_aliases is not None and not isinstance(input_output_aliases, dict):
        raise TypeError("ffi_call: input_output_aliases must be a dict or None, got "
                        f"{type(input_output_aliases).__name__}")
    aliases = sorted(input_output_aliases.items()) if input_output_aliases else None
    side = bool(has_side_effect)
    if side and vmap_method not in (None, "sequential", "sequential_unrolled"):
        raise NotImplementedError(
            f"ffi_call: vmap_method={vmap_method!r} with has_side_effect=True is not supported "
            "yet: a side-effecting call is batched one element at a time (use "
            "vmap_method='sequential', or has_side_effect=False)")
    avals, out_tree = _result_avals(result_shape_dtypes)

    def call(*args, **attrs):
        out = _core.ffi_call(target_name, avals, args, attrs, has_side_effect=side,
                             vmap_method=vmap_method, input_output_aliases=aliases)
        return _core.tree_unflatten(out_tree, out)

    call.__name__ = f"ffi_call_{target_name}"
    call.__qualname__ = call.__name__
    return call


def pycapsule(funcptr):
    """A `PyCapsule` holding the address of a ctypes function pointer (as
    `jax.ffi.pycapsule`); `register_ffi_target` takes either."""
    if not _is_cfuncptr(funcptr):
        raise TypeError(f"pycapsule: expected a ctypes function pointer, got "
                        f"{type(funcptr).__name__}")
    return _core.ffi_capsule(_address(funcptr))


def include_dir():
    """The folder holding `olympus.h`, for `gcc -I`: $OLYMPUS_INCLUDE_DIR when
    set (it must hold the header), else the source tree's include/ (next to python/olympus), else an
    include/ folder inside the installed package. FileNotFoundError, naming
    the places looked at, when none holds the header."""
    env = os.environ.get("OLYMPUS_INCLUDE_DIR")
    if env:
        if not os.path.isfile(os.path.join(env, "olympus.h")):
            raise FileNotFoundError(f"olympus.ffi.include_dir: OLYMPUS_INCLUDE_DIR={env!r} "
                                    "holds no olympus.h")
        return os.path.abspath(env)
    here = os.path.dirname(os.path.abspath(__file__))
    places = []
    places.append(os.path.normpath(os.path.join(here, "..", "..", "include")))
    places.append(os.path.join(here, "include"))
    for d in places:
        if os.path.isfile(os.path.join(d, "olympus.h")):
            return d
    raise FileNotFoundError("olympus.ffi.include_dir: olympus.h is in none of "
                            + ", ".join(places) + " (set OLYMPUS_INCLUDE_DIR)")

"""olympus.experimental.host_callback: host functions called from olympus code
without stopping it (`id_tap`, `id_print`) or returning values to it (`call`).

Taps are identities on their argument with a side effect: the tapped values are
handed to a per-device outfeed queue (bounded: OLYMPUS_HOST_CALLBACK_MAX_QUEUE_BYTE_SIZE
bytes; a full queue makes the computation wait, nothing is dropped) and a
receiver thread calls `tap_func(arg, transforms)` in the order the device sent
them, while the computation goes on. A tap function that raises is logged with
its traceback; the receiver keeps going, and the next `barrier_wait()` raises
`CallbackException` (once) chained to that exception. Taps are effects: they run
even when their result is unused, eagerly, under `jit`, in control flow, under
`vmap` (one call with the whole batch; `transforms` gets
`("batch", {"batch_dims": ...})`), `jvp`/`grad` (primal values only; a tap on
values that get transposed reports `("transpose", {})`) and `checkpoint`.

`call(f, arg, result_shape=...)` runs `f(arg)` on the host and returns its
result to the computation (it waits for it); it supports no transformation.
Its exceptions surface at the call site as `olympus.CallbackError`.

Flags (`olympus.config.update` or environment variables):
  olympus_host_callback_inline (OLYMPUS_HOST_CALLBACK_INLINE): outside any
    trace, call tap functions inline in the caller's thread.
  olympus_host_callback_max_queue_byte_size (OLYMPUS_HOST_CALLBACK_MAX_QUEUE_BYTE_SIZE):
    bytes each device's queue holds (default 256e6).
  olympus_host_callback_outfeed (OLYMPUS_HOST_CALLBACK_OUTFEED): accepted; the
    CPU devices always use the outfeed queues.
  olympus_host_callback_legacy (OLYMPUS_HOST_CALLBACK_LEGACY, default True):
    False maps call/id_tap onto io_callback / pure_callback / debug.callback per
    `callback_flavor`, with `transforms` always `()`.
"""
import atexit
import enum
import functools
import logging
import threading

import numpy as np

import olympus
from olympus import _core
from olympus import tree_util
from olympus._src.callback import _bounded_put
from olympus._src.config import config

logger = logging.getLogger(__name__)

__all__ = ["id_tap", "id_print", "call", "barrier_wait", "CallbackException",
           "TapFunctionException", "stop_outfeed_receiver", "CallbackFlavor"]


class CallbackFlavor(enum.Enum):
    """Which callback `call` / `id_tap` use when olympus_host_callback_legacy is False."""
    IO_CALLBACK = 1  # olympus.experimental.io_callback (ordered)
    PURE = 2         # olympus.pure_callback
    DEBUG = 3        # olympus.debug.callback, only without results


class CallbackException(Exception):
    """Raised by `barrier_wait` when a tap function raised since the last barrier."""


TapFunctionException = CallbackException


# ---------------------------------------------------------------- transforms

def _parse_dims(text):
    return tuple(None if d == "None" else int(d) for d in text.split(",") if d)


@functools.lru_cache(maxsize=256)
def _parse_transforms(text):
    """ "batch(0,None);transpose" -> (("batch", {"batch_dims": (0, None)}), ("transpose", {}))."""
    out = []
    for item in filter(None, text.split(";")):
        if item.startswith("batch(") and item.endswith(")"):
            out.append(("batch", {"batch_dims": _parse_dims(item[6:-1])}))
        else:
            out.append((item, {}))
    return tuple(out)


# ---------------------------------------------------------------- the host function

def _aval_str(shape, dtype):
    return f"{np.dtype(dtype).name}{list(shape)}".replace(" ", "")


class _Caller:
    """What the receiver (taps) or the executing thread (call) invokes with the
    device id, the transforms text and the flat arguments: rebuilds `arg`,
    calls the user function, checks `call`'s result. Taps run at the rate of
    the receiver, so the common cases cost little: one leaf needs no
    unflattening, and the parsed transforms are kept for the text object the
    runtime passes again and again."""

    def __init__(self, func, identity, with_device, arg_tree, result_tree, result_avals):
        self.func = func
        self.identity = identity
        self.with_device = with_device
        self.arg_tree = arg_tree
        self.single_leaf = arg_tree == _LEAF
        self.result_tree = result_tree
        self.result_avals = result_avals
        self.parsed = ("", ())  # (transforms text, its parsed form): replaced whole
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        # What the runtime calls: a bound method, made once (calling it is
        # cheaper than calling the instance, and the same object each time
        # keeps the compiled program cached).
        self.entry = self._tap if identity else self._call

    def _tap(self, device, transforms, *leaves):
        arg = leaves[0] if self.single_leaf else tree_util.tree_unflatten(self.arg_tree, leaves)
        parsed = self.parsed
        if parsed[0] is not transforms:
            parsed = self.parsed = (transforms, _parse_transforms(transforms))
        if self.with_device:
            self.func(arg, parsed[1], device=olympus.local_devices()[device])
        else:
            self.func(arg, parsed[1])

    def _call(self, device, transforms, *leaves):
        arg = leaves[0] if self.single_leaf else tree_util.tree_unflatten(self.arg_tree, leaves)
        kw = {"device": olympus.local_devices()[device]} if self.with_device else {}
        res = self.func(arg, **kw)
        flat, tree = tree_util.tree_flatten(res)
        if tree != self.result_tree:
            raise TypeError(f"Callback func {self.func} should have returned a result with "
                            f"pytree {self.result_tree} but returned {tree}")
        flat = [np.asarray(r) for r in flat]
        got = [(r.shape, _canonical(r.dtype)) for r in flat]
        want = [(tuple(s), _canonical(d)) for s, d in self.result_avals]
        if got != want:
            show = lambda avals: tree_util.tree_unflatten(  # noqa: E731
                self.result_tree, [_aval_str(s, d) for s, d in avals])
            raise TypeError(f"Callback func {self.func} should have returned a result with "
                            f"abstract values {show(want)} but returned {show(got)}")
        return flat


_LEAF = tree_util.tree_structure(0)
_core.set_tap_parser(_parse_transforms)
_canonical = _core.canonicalize_dtype  # the dtype after the x64 switch

_callers = {}


def _caller(func, identity, with_device, arg_tree, result_tree, result_avals):
    """One _Caller per distinct request, so eager taps reuse their compiled program."""
    key = (func, identity, with_device, arg_tree, result_tree,
           tuple((tuple(s), str(d)) for s, d in result_avals))
    try:
        hit = _callers.get(key)
    except TypeError:  # an unhashable function or tree: no reuse
        return _Caller(func, identity, with_device, arg_tree, result_tree, result_avals)
    if hit is None:
        hit = _Caller(func, identity, with_device, arg_tree, result_tree, result_avals)
        _bounded_put(_callers, key, hit)
    return hit


# ---------------------------------------------------------------- the receiver's lifetime

_started = False
_start_lock = threading.Lock()


def _start():
    global _started
    with _start_lock:
        if _started:
            return
        _started = True
        atexit.register(_at_exit)


def _at_exit():
    try:
        barrier_wait("at_exit")
    except CallbackException as e:
        logger.error("host_callback: a tap function failed before exit: %s", e.__cause__)
    finally:
        _core.outfeed_stop()


# ---------------------------------------------------------------- the API

def _result_avals(result_shape):
    flat, tree = tree_util.tree_flatten(result_shape)
    try:
        avals = []
        for r in flat:
            if hasattr(r, "shape") and hasattr(r, "dtype"):
                avals.append((tuple(int(d) for d in r.shape), _canonical(r.dtype)))
            elif isinstance(r, (bool, int, float, complex, np.generic)):
                a = np.asarray(r)
                avals.append(((), _canonical(a.dtype)))
            else:
                raise TypeError(r)
    except Exception:
        raise ValueError("result_shape should be a pytree of values with structure matching "
                         "the expected result of the callback function. The values must be "
                         "either numeric scalars, or must have 'shape' and 'dtype' attributes. "
                         f"Got {result_shape}") from None
    return avals, tree


def _as_operand(x):
    if isinstance(x, _core.Array) or _core.is_tracer(x):
        return x
    return _core.asarray(x)


def _call(callback_func, arg, *, result_shape=None, call_with_device=False, identity=False,
          device_index=0, callback_flavor=CallbackFlavor.IO_CALLBACK):
    if not callable(callback_func):
        raise TypeError(f"host_callback: the callback must be callable, got {callback_func!r}")
    n_dev = olympus.device_count()
    if not isinstance(device_index, int) or not 0 <= device_index < n_dev:
        raise ValueError(f"host_callback: device_index must be in [0, {n_dev}), "
                         f"got {device_index!r}")
    flat_args, arg_tree = tree_util.tree_flatten(arg)
    flat_args = [_as_operand(a) for a in flat_args]
    if identity:
        result_avals, result_tree = [], None
    else:
        result_avals, result_tree = _result_avals(result_shape)
    if not config.olympus_host_callback_legacy:
        return _call_new(callback_func, arg, flat_args, arg_tree, identity, result_shape,
                         call_with_device, callback_flavor)
    if identity and config.olympus_host_callback_inline and not _core.tracing():
        host = [np.asarray(a) for a in flat_args]
        kw = {"device": olympus.local_devices()[0]} if call_with_device else {}
        callback_func(tree_util.tree_unflatten(arg_tree, host), (), **kw)
        return tree_util.tree_unflatten(arg_tree, flat_args)
    _start()
    if identity and not call_with_device:  # the runtime calls tap_func(arg, transforms) itself
        outs = _core.callback("outside_call", callback_func, [], tuple(flat_args), identity=True,
                              tap=True, in_tree=None if arg_tree == _LEAF else arg_tree,
                              device_index=device_index,
                              name=getattr(callback_func, "__name__", None))
        return tree_util.tree_unflatten(arg_tree, outs)
    caller = _caller(callback_func, identity, call_with_device, arg_tree, result_tree,
                     result_avals)
    outs = _core.callback("outside_call", caller.entry, result_avals, tuple(flat_args),
                          identity=identity, device_index=device_index, name=caller.__name__)
    if identity:
        return tree_util.tree_unflatten(arg_tree, outs)
    return tree_util.tree_unflatten(result_tree, outs)


def _call_new(callback_func, arg, flat_args, arg_tree, identity, result_shape, with_device,
              flavor):
    """olympus_host_callback_legacy=False: the new callbacks, transforms always ()."""
    if with_device:
        raise NotImplementedError(
            "When using OLYMPUS_HOST_CALLBACK_LEGACY=False, the host_callback APIs do not "
            "support `tap_with_device` and `call_with_device`.")
    if flavor is CallbackFlavor.DEBUG and not identity and result_shape is not None:
        raise NotImplementedError(
            "When using OLYMPUS_HOST_CALLBACK_LEGACY=False you can use the `DEBUG` flavor of "
            "callback only when the `result_shape` is None.")
    arg = tree_util.tree_unflatten(arg_tree, flat_args)

    def host(a):
        return callback_func(a, ()) if identity else callback_func(a)

    if flavor is CallbackFlavor.DEBUG:
        olympus.debug.callback(host, arg)
        return arg
    shape = None
    if not identity:
        avals, tree = _result_avals(result_shape)
        shape = tree_util.tree_unflatten(tree, [olympus.ShapeDtypeStruct(s, d) for s, d in avals])
    if flavor is CallbackFlavor.PURE:
        res = olympus.pure_callback(host, shape, arg, vmap_method="sequential")
    else:
        from olympus.experimental import io_callback
        res = io_callback(host, shape, arg, ordered=True)
    return arg if identity else res


def id_tap(tap_func, arg, *, result=None, tap_with_device=False, device_index=0,
           callback_flavor=CallbackFlavor.IO_CALLBACK, **kwargs):
    """Identity on `arg` (or returns `result` if given) that calls
    `tap_func(arg, transforms)` on the host (plus `device=` with `tap_with_device`),
    without the computation waiting for it. See the module docstring."""
    if kwargs:
        raise TypeError(
            "Support for **kwargs in ``id_tap`` has been removed. Instead, pre-apply keyword "
            "arguments, either by using a closure or by passing "
            "``functools.partial(tap_func, **kwargs)``.")
    call_res = _call(tap_func, arg, call_with_device=tap_with_device, identity=True,
                     device_index=device_index, callback_flavor=callback_flavor)
    return result if result is not None else call_res


def id_print(arg, *, result=None, tap_with_device=False, device_index=0, output_stream=None,
             threshold=None, callback_flavor=CallbackFlavor.IO_CALLBACK, **kwargs):
    """`id_tap` with a printing tap: a line of the keyword arguments (sorted, with
    `transforms` and `device` when present), then the value (arrays through
    `np.array2string(threshold=threshold)`), written to `output_stream` if given."""
    printer = functools.partial(_print_tap_func, output_stream=output_stream,
                                threshold=threshold, **kwargs)
    return id_tap(printer, arg, result=result, tap_with_device=tap_with_device,
                  device_index=device_index, callback_flavor=callback_flavor)


def call(callback_func, arg, *, result_shape=None, call_with_device=False, device_index=0,
         callback_flavor=CallbackFlavor.IO_CALLBACK):
    """Calls `callback_func(arg)` on the host (plus `device=` with
    `call_with_device`) and returns its result, which must match `result_shape`
    (a pytree of numeric scalars or of objects with `shape` and `dtype`; `None`
    or `()` for no result)."""
    if (not config.olympus_host_callback_legacy and callback_flavor is CallbackFlavor.DEBUG
            and result_shape is not None):
        raise NotImplementedError(
            "When using OLYMPUS_HOST_CALLBACK_LEGACY=False you can use the `DEBUG` flavor of "
            "callback only when the `result_shape` is None.")
    return _call(callback_func, arg, result_shape=result_shape,
                 call_with_device=call_with_device, identity=False,
                 device_index=device_index, callback_flavor=callback_flavor)


def barrier_wait(logging_name=None):
    """Waits until every tap issued before it, on every device and from every
    thread, has been processed; then raises `CallbackException` if a tap
    function raised since the previous barrier (chained to that exception)."""
    logger.debug("barrier_wait[%s]: waiting for the taps", logging_name)
    olympus.effects_barrier()  # programs still queued on a device send their taps first
    if not config.olympus_host_callback_legacy:
        return
    try:
        _core.outfeed_barrier()
    except olympus.CallbackError as e:
        cause = e.__cause__ if e.__cause__ is not None else e
        import traceback
        text = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
        raise CallbackException("There were exceptions during callback processing. "
                                f"Last one was: {text}") from cause
    logger.debug("barrier_wait[%s]: done", logging_name)


def stop_outfeed_receiver():
    """Waits for the taps sent so far, then stops the receivers (the next tap
    starts them again)."""
    _core.outfeed_stop()


# ---------------------------------------------------------------- id_print's printer

_print_lock = threading.Lock()


def _pp(arg, threshold):
    if isinstance(arg, tuple):
        return "( " + " ".join(_pp(e, threshold) for e in arg) + " )"
    if isinstance(arg, list):
        return "[ " + " ".join(_pp(e, threshold) for e in arg) + " ]"
    if isinstance(arg, dict):
        return "{ " + " ".join(f"{k}={_pp(v, threshold)}" for k, v in sorted(arg.items())) + " }"
    if isinstance(arg, np.ndarray):
        return np.array2string(arg, threshold=threshold)
    return str(arg)


def _print_tap_func(arg, transforms, *, device=None, output_stream=None, threshold=1024,
                    **kwargs):
    """The tap function of id_print."""
    if threshold is None:
        threshold = 1024
    if transforms:
        kwargs["transforms"] = [(name, params) if params else name
                                for name, params in transforms]
    if device is not None:
        kwargs["device"] = device
    kv_pairs = " ".join(f"{k}: {v}" for k, v in sorted(kwargs.items()))
    text = (kv_pairs + "\n" if kv_pairs else "") + _pp(arg, threshold)
    with _print_lock:
        if output_stream is not None:
            output_stream.write(text + "\n")
        else:
            print(text, flush=True)

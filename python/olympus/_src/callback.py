"""Host callbacks: `olympus.pure_callback`, `olympus.experimental.io_callback`,
`olympus.debug.callback`, `olympus.debug.print` and `olympus.effects_barrier`.

Every flavour goes through one C entry point, `_core.callback(kind, fn,
result_avals, args, ...)`, which binds the callback primitive eagerly or into
the current trace. Eager calls therefore run the same compiled one-primitive
program as jitted ones: results are checked the same way and a failure is the
same `olympus.CallbackError` (a RuntimeError whose __cause__ is the original
exception, traceback included).

This module does the Python-side work: pytree flattening of arguments and
declared results, the 64-bit and `vmap_method` checks, static vs dynamic
arguments of debug callbacks, and the format-string dry run of debug.print.
"""
import logging
import re
import string
import sys

import numpy as np

from olympus import _core

__all__ = ["pure_callback", "io_callback", "debug_callback", "debug_print", "debug_log",
           "effects_barrier"]

_X64_DTYPES = frozenset(np.dtype(t) for t in ("int64", "uint64", "float64", "complex128"))
_CACHE_SIZE = 256


def _bounded_put(cache, key, value):
    if len(cache) >= _CACHE_SIZE:
        try:
            cache.pop(next(iter(cache)))
        except (StopIteration, KeyError, RuntimeError):  # another thread got there first
            pass
    cache[key] = value


def _callable_name(fn):
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


def _check_sharding(api, sharding):
    if sharding is not None:
        raise NotImplementedError(
            f"{api} only supports SingleDeviceSharding, but got {type(sharding)} "
            "(olympus runs callbacks on the calling device; pass sharding=None)")


def _result_avals(result_shape_dtypes):
    """(list of (shape, dtype), PyTreeDef) for a pytree of shape/dtype holders."""
    leaves, tree = _core.tree_flatten(result_shape_dtypes)
    avals = []
    for i, leaf in enumerate(leaves):
        shape = getattr(leaf, "shape", None)
        dtype = getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            raise ValueError(
                "result_shape_dtypes must be a pytree of values with `shape` and `dtype` "
                "attributes (such as olympus.ShapeDtypeStruct, an array or a NumPy scalar), "
                f"but leaf #{i} is {leaf!r} of type {type(leaf).__name__}")
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            pass  # a dtype NumPy does not know (e.g. bfloat16): the extension decides
        if not _core.x64_enabled() and dtype in _X64_DTYPES:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`olympus_enable_x64` is disabled")
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise ValueError(f"result_shape_dtypes: leaf #{i} has a shape that is not a "
                             f"sequence of ints: {shape!r}") from None
        avals.append((shape, dtype))
    return avals, tree


# ---------------------------------------------------------------- pure / io

_flat_trees = {}


def _flat_tree(n):
    """The PyTreeDef of ((x1, ..., xn), {}) with leaves xi: the structure of a
    call with n array arguments and no keywords."""
    tree = _flat_trees.get(n)
    if tree is None:
        tree = _core.tree_flatten(((0,) * n, {}))[1]
        _bounded_put(_flat_trees, n, tree)
    return tree


def _eager_arrays(callback):
    """Called outside any trace, a callback gets olympus Arrays, as the
    reference hands its arrays when called eagerly; under jit the host function
    gets read-only NumPy views (zero-copy: the fast path)."""
    def eager(*args, **kwargs):
        leaves, tree = _core.tree_flatten((args, kwargs))
        leaves = [_core.asarray(x) if isinstance(x, np.ndarray) else x for x in leaves]
        args, kwargs = _core.tree_unflatten(tree, leaves)
        return callback(*args, **kwargs)
    eager.__wrapped__ = callback  # callback statistics name the user's function
    return eager


def _callback(kind, api, callback, result_shape_dtypes, args, kwargs, *, ordered=False,
              vmap_method=None):
    if not callable(callback):
        raise TypeError(f"{api}: the callback must be callable, but got an object of type "
                        f"{type(callback)}")
    avals, out_tree = _result_avals(result_shape_dtypes)
    flat, in_tree = _core.tree_flatten((args, kwargs))
    if isinstance(vmap_method, str) and vmap_method.startswith("signature:"):
        vmap_method = "signature:" + _check_signature(vmap_method[10:], flat, avals, api)
    # The host function calls callback(*flat) itself when the arguments are
    # flat; otherwise it rebuilds (args, kwargs) from in_tree, in C.
    if in_tree == _flat_tree(len(flat)):
        in_tree = None
    name = _callable_name(callback)
    if not _core.tracing():
        callback = _eager_arrays(callback)
    out = _core.callback(kind, callback, avals, tuple(flat), ordered=ordered,
                         vmap_method=vmap_method, name=name, in_tree=in_tree)
    return _core.tree_unflatten(out_tree, out)


# ---------------------------------------------------------------- gufunc signatures

_SIG_DIM = r"\s*(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)\s*"
_SIG_GROUP = rf"\(\s*(?:{_SIG_DIM}(?:,{_SIG_DIM})*)?\)"
_SIG_LIST = rf"\s*(?:{_SIG_GROUP}\s*(?:,\s*{_SIG_GROUP}\s*)*)?"
_SIG_RE = re.compile(rf"^{_SIG_LIST}->{_SIG_LIST}$")


def parse_signature(signature, api="pure_callback"):
    """'(m,n),(n)->(m)' -> ([('m', 'n'), ('n',)], [('m',)]): the core dims of
    each argument and result, names as str and fixed sizes as int (NumPy's
    gufunc signature syntax, without the optional '?' dims)."""
    if not isinstance(signature, str) or not _SIG_RE.match(signature):
        raise ValueError(
            f"{api}: vmap_method='signature:{signature}' is not a gufunc signature; expected "
            "'signature:' followed by one parenthesised group of core dimension names (or "
            "sizes) per argument, '->', and one group per result, e.g. "
            "'signature:(m,n),(n)->(m)'")
    ins, outs = signature.split("->")

    def groups(text):
        return [tuple(int(d) if d.isdigit() else d
                      for d in (x.strip() for x in g.split(",")) if d)
                for g in re.findall(r"\(([^)]*)\)", text)]
    return groups(ins), groups(outs)


def _show_group(g):
    return "(" + ",".join(str(d) for d in g) + ")"


def _check_signature(signature, flat, avals, api):
    """Checks a gufunc signature against the traced arguments and the declared
    results (NumPy's rules): one group per array argument and per result, each
    at least as many dims as its core dims, a name the same size wherever it
    appears, fixed sizes as written, the arguments' loop dims broadcastable and
    every result's loop dims their broadcast shape. Returns the signature
    without spaces; raises ValueError naming what disagrees."""
    in_core, out_core = parse_signature(signature, api)
    sig = "".join(signature.split())
    shapes = [tuple(np.shape(x)) for x in flat]
    where = f"{api}: vmap_method='signature:{sig}'"
    if len(in_core) != len(shapes):
        raise ValueError(f"{where} names {len(in_core)} argument(s), but the callback gets "
                         f"{len(shapes)} array argument(s) (the leaves of (args, kwargs))")
    if len(out_core) != len(avals):
        raise ValueError(f"{where} names {len(out_core)} result(s), but result_shape_dtypes "
                         f"declares {len(avals)}")
    sizes = {}

    def bind(what, shape, core):
        if len(shape) < len(core):
            raise ValueError(f"{where}: {what} has shape {shape}, but its core dimensions "
                             f"{_show_group(core)} need at least {len(core)} dimension(s)")
        tail = shape[len(shape) - len(core):]
        for d, n in zip(core, tail):
            if isinstance(d, int):
                if d != n:
                    raise ValueError(f"{where}: {what} has shape {shape}, but core dimension "
                                     f"{d} of {_show_group(core)} is fixed at {d}, not {n}")
            elif sizes.setdefault(d, (n, what))[0] != n:
                raise ValueError(f"{where}: core dimension '{d}' is {sizes[d][0]} in "
                                 f"{sizes[d][1]} but {n} in {what} (shape {shape})")
        return shape[:len(shape) - len(core)]

    loops = [bind(f"argument #{i}", s, c) for i, (s, c) in enumerate(zip(shapes, in_core))]
    try:
        loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
    except ValueError:
        raise ValueError(f"{where}: the arguments' loop dimensions {loops} (the dimensions "
                         "before their core dimensions) do not broadcast together") from None
    for j, ((shape, _), core) in enumerate(zip(avals, out_core)):
        rloop = bind(f"result #{j}", tuple(shape), core)
        if rloop != loop:
            want = loop + tuple(shape[len(shape) - len(core):])
            raise ValueError(f"{where}: result #{j} is declared with shape {tuple(shape)}, but "
                             f"the signature makes it {want}: the broadcast loop dimensions "
                             f"{loop} of the arguments, then the core dimensions "
                             f"{_show_group(core)}")
    return sig


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """Calls a pure host Python function from olympus code (jitted or not).

    `callback(*args, **kwargs)` is called with every array leaf replaced by a
    read-only NumPy array under `jit` (zero-copy), or by an olympus Array when
    called outside any trace (as the reference does eagerly); it must return a pytree whose leaves match the shapes
    and dtypes of `result_shape_dtypes` (a pytree of objects with `.shape` and
    `.dtype`; `None` or `()` for no result). Under `jit` an unused result may be
    removed, so the call may not happen. `vmap_method` chooses the `vmap` rule:
    one of None, "sequential", "sequential_unrolled", "expand_dims",
    "broadcast_all", "legacy_vectorized", or "signature:<gufunc signature>",
    e.g. "signature:(n),(n)->()": the callback is a gufunc (NumPy's
    broadcasting over the dims before each argument's core dims) and is called
    once per vmap level with the batch axis first among the loop dims (an
    unbatched argument gets a size-1 axis there). The signature has one group
    per array leaf of (args, kwargs) and per result; it is checked against the
    shapes when the call is traced (see docs/beyond.md).

    A failure of the callback (an exception, or a result of the wrong count,
    shape or dtype) raises `olympus.CallbackError` from the original exception.
    """
    if "vectorized" in kwargs:
        raise ValueError("The 'vectorized' argument of olympus.pure_callback was removed "
                         "(as in JAX v0.6.0). Use 'vmap_method' instead.")
    _check_sharding("pure_callback", sharding)
    return _callback("pure_callback", "pure_callback", callback, result_shape_dtypes, args,
                     kwargs, vmap_method=vmap_method)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False, **kwargs):
    """Calls an impure host Python function from olympus code.

    Like `pure_callback`, but the call is an effect: it is never removed under
    `jit`, even when its result is unused. `ordered=True` keeps io callbacks in
    program order (and forbids `vmap`).
    """
    _check_sharding("io_callback", sharding)
    return _callback("io_callback", "io_callback", callback, result_shape_dtypes, args, kwargs,
                     ordered=bool(ordered))


# ---------------------------------------------------------------- debug

def _is_dynamic(x):
    """True for values that become array operands; everything else is static."""
    if isinstance(x, (_core.Array, bool, int, float, complex)):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind in "biufc"
    return bool(_core.is_tracer(x))


_debug_callers = {}


def _debug_caller(callback, in_tree, template, dyn_idx, convert):
    """The host function of a debug callback: rebuilds the (args, kwargs) tree from
    the static leaves (in template) and the dynamic operands, then calls callback."""
    statics = tuple((i, type(x), x) for i, x in enumerate(template) if i not in dyn_idx)
    key = (id(callback), in_tree, dyn_idx, statics, convert)
    try:
        hit = _debug_callers.get(key)
    except Exception:  # unhashable or incomparable static arguments: no reuse
        hit, key = None, None
    if hit is not None and hit[0] is callback:
        return hit[1]

    def call(*dyn):
        leaves = list(template)
        for i, v in zip(dyn_idx, dyn):
            leaves[i] = convert(v) if convert is not None else v
        args, kwargs = _core.tree_unflatten(in_tree, leaves)
        callback(*args, **kwargs)

    call.__wrapped__ = callback  # callback statistics name the user's function
    if key is not None:
        _bounded_put(_debug_callers, key, (callback, call))
    return call


def _debug_callback_impl(callback, args, kwargs, ordered, name, convert=None):
    if convert is None and not _core.tracing():
        convert = _to_array   # eager: the callback gets olympus Arrays
    flat, in_tree = _core.tree_flatten((args, kwargs))
    dyn_idx = tuple(i for i, x in enumerate(flat) if _is_dynamic(x))
    if convert is None and len(dyn_idx) == len(flat):
        # Every leaf is an operand: the host function calls callback itself
        # (rebuilding (args, kwargs) in C unless the arguments are flat).
        if in_tree == _flat_tree(len(flat)):
            in_tree = None
        _core.callback("debug_callback", callback, [], tuple(flat), ordered=bool(ordered),
                       name=name, in_tree=in_tree)
        return
    dyn_set = frozenset(dyn_idx)
    # Dynamic leaves (possibly tracers) are not kept by the host function.
    template = [None if i in dyn_set else x for i, x in enumerate(flat)]
    call = _debug_caller(callback, in_tree, template, dyn_idx, convert)
    _core.callback("debug_callback", call, [], tuple(flat[i] for i in dyn_idx),
                   ordered=bool(ordered), name=name)


def debug_callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
    """Calls `callback(*args, **kwargs)` on the host when the program runs, with
    array leaves as read-only NumPy arrays (olympus Arrays when called outside
    any trace) and other leaves (strings, dtypes, any
    object) passed unchanged. Its return value is ignored; returns None. The call
    is a debug effect: never removed under `jit`.

    Two-call form: `olympus.debug.callback(ordered=True)(fn, *args, **kwargs)`.
    """
    if callback is None:
        if args or kwargs:
            raise TypeError("debug_callback received unexpected arguments in the two-call "
                            f"form: args={args} kwargs={kwargs}")

        def with_options(callback, *args, **kwargs):
            _check_debug_callable(callback)
            _debug_callback_impl(callback, args, kwargs, ordered, _callable_name(callback))

        return with_options
    _check_debug_callable(callback)
    _debug_callback_impl(callback, args, kwargs, ordered, _callable_name(callback))
    return None


def _check_debug_callable(callback):
    if not callable(callback):
        raise TypeError("first argument to olympus.debug.callback must be callable, but got "
                        f"an object of type {type(callback)}")


class _FormatChecker(string.Formatter):
    """Dry-runs a format string at trace time: resolves every field (KeyError,
    IndexError as str.format) and rejects unused arguments; formats nothing."""

    def __init__(self, api):
        super().__init__()
        self.api = api

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused_args = [arg for i, arg in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `{self.api}`: {unused_args}")
        if unused_kwargs:
            raise ValueError(
                f"Unused keyword arguments to `{self.api}`: {unused_kwargs}. You may be "
                f"passing an f-string (i.e, `f\"{{x}}\"`) into `{self.api}` and instead "
                "should pass in a regular string.")


def _has_placeholders(fmt):
    # Every chunk, not only the first: "{{x}} {}" has one.
    try:
        return any(field is not None for _, field, _, _ in string.Formatter().parse(fmt))
    except ValueError:
        return True  # malformed: let str.format report it


def _freeze(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    return x


_formatters = {}


def _formatter(fmt, printoptions, emit):
    """The host function text = fmt.format(...) under printoptions, then emit(text).
    Reused for equal (fmt, options, emit)."""
    try:
        key = (fmt, _freeze(printoptions), emit)
        hash(key)
    except TypeError:
        key = None
    hit = _formatters.get(key) if key is not None else None
    if hit is not None:
        return hit
    placeholders = _has_placeholders(fmt)

    def fmt_callback(*args, **kwargs):
        with np.printoptions(**printoptions):
            if placeholders:
                text = fmt.format(*args, **kwargs)
            else:  # like print(fmt, *args)
                text = " ".join([fmt] + [str(a) for a in args])
        emit(text)

    fmt_callback.__name__ = emit.__name__
    fmt_callback._olympus_stats_label = f"{emit.__name__}({fmt!r})"
    if key is not None:
        _bounded_put(_formatters, key, fmt_callback)
    return fmt_callback


def _to_array(x):
    return _core.asarray(x)


def _debug_format(api, emit, fmt, args, kwargs, ordered, skip_format_check):
    if not isinstance(fmt, str):
        raise TypeError(f"{api}: the format string must be a str, got {type(fmt)}")
    if not skip_format_check:
        _FormatChecker(api).format(fmt, *args, **kwargs)
    fmt_callback = _formatter(fmt, np.get_printoptions(), emit)
    _debug_callback_impl(fmt_callback, args, kwargs, ordered, emit.__name__, convert=_to_array)


def _stdout_write(text):
    sys.stdout.write(text + "\n")


_stdout_write.__name__ = "debug_print"


def debug_print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
                **kwargs):
    """Prints `fmt.format(*args, **kwargs)` and a newline to sys.stdout when the
    program runs. Array arguments are formatted as olympus Arrays (`"{}"` shows
    the values; containers show `Array(..., dtype=...)` reprs); the NumPy print
    options in force at this call are used. The format string is checked
    against the arguments at once (KeyError, IndexError, ValueError for unused
    arguments) unless `skip_format_check`; with no placeholder the arguments are
    appended, space-separated.

    Two-call form: `olympus.debug.print(ordered=True)("x: {x}", x=x)`.
    """
    if fmt is None:
        if args or kwargs:
            raise TypeError("debug_print received unexpected arguments in the two-call form: "
                            f"args={args} kwargs={kwargs}")

        def printer(fmt, *args, **kwargs):
            _debug_format("olympus.debug.print", _stdout_write, fmt, args, kwargs, ordered,
                          skip_format_check)

        return printer
    _debug_format("olympus.debug.print", _stdout_write, fmt, args, kwargs, ordered,
                  skip_format_check)
    return None


_logger = logging.getLogger("olympus._src.debugging")


def _log_sink(site):
    """A sink that hands an INFO record with the formatted text straight to the
    logger's handlers (as the reference does: the logger's own level does not
    drop it), attributed to the user's call site (file, line, function)."""
    filename, lineno, func = site

    def debug_log(text):
        if _logger.disabled:
            return
        record = _logger.makeRecord(_logger.name, logging.INFO, filename, lineno, text,
                                    None, None, func)
        _logger.handle(record)
    return debug_log


def _call_site(depth):
    f = sys._getframe(depth + 1)
    return f.f_code.co_filename, f.f_lineno, f.f_code.co_name


def debug_log(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
              **kwargs):
    """Like `debug_print`, but emits an INFO record on the logger
    `olympus._src.debugging` with the formatted text, attributed to the line
    that called it; the record goes to the logger's handlers whatever the
    logger's level."""
    if fmt is None:
        if args or kwargs:
            raise TypeError("debug_log received unexpected arguments in the two-call form: "
                            f"args={args} kwargs={kwargs}")

        def logger(fmt, *args, **kwargs):
            _debug_format("olympus.debug.log", _log_sink(_call_site(1)), fmt, args, kwargs,
                          ordered, skip_format_check)

        return logger
    _debug_format("olympus.debug.log", _log_sink(_call_site(1)), fmt, args, kwargs, ordered,
                  skip_format_check)
    return None


def effects_barrier():
    """Waits until every effect (callbacks included) issued so far has run."""
    _core.effects_barrier()

"""olympus.experimental.buffer_callback: host callbacks that write their results
in place into the program's own buffers.

`buffer_callback(callback, result_shape_dtypes, ...)` returns a function of
arrays (and pytrees of arrays). When the program runs, it calls
`callback(ctx, out, *args, **kwargs)`:

- `ctx` is an `ExecutionContext` (`ctx.stage` is `ExecutionStage.EXECUTE`,
  `ctx.stream` is None on the CPU);
- `out` has the structure of `result_shape_dtypes`, each leaf a writable
  `Buffer` that *is* the result buffer the program goes on with (no copy);
- `args` / `kwargs` have the structure of the call's arguments, each array leaf
  a read-only `Buffer` over the argument.

The callback writes every output (`np.asarray(out)[...] = ...`, or through
`__dlpack__`) and returns None. A Buffer and every view of it (NumPy array,
memoryview, DLPack tensor) are valid only while the callback runs: afterwards
a Buffer raises ValueError when used, and a view still alive when the callback
returns fails the call with BufferError (keep a copy, `np.array(buf)`, instead).

`input_output_aliases={i: o}` makes output `o` start as a copy of flattened
argument `i` and share its memory during the call (the callback may update it
in place). When the argument is an intermediate value that nothing reads
afterwards, the output is written over it with no copy at all; when it is a
caller's array (olympus arrays are immutable) or is read again later, the
output starts as a copy, so no array ever changes under anyone's feet.
"""
import enum

from olympus import _core
from olympus._src.callback import _callable_name, _flat_tree, _result_avals

__all__ = ["buffer_callback", "Buffer", "ExecutionContext", "ExecutionStage"]

Buffer = _core.Buffer
ExecutionContext = _core.ExecutionContext


class ExecutionStage(enum.IntEnum):
    """The stage of a call a callback runs in; on the CPU always EXECUTE."""
    INSTANTIATE = 0
    PREPARE = 1
    INITIALIZE = 2
    EXECUTE = 3


_core._buffer_set_stage(ExecutionStage)

_VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized")


def _aliases(input_output_aliases):
    """The aliases as (input, output) pairs of ints, sorted by input."""
    if input_output_aliases is None:
        return None
    if not isinstance(input_output_aliases, dict):
        raise TypeError("input_output_aliases must be a dict mapping flattened input indices to "
                        f"flattened output indices, got {type(input_output_aliases).__name__}")
    pairs = []
    for i, o in input_output_aliases.items():
        try:
            pairs.append((int(i), int(o)))
        except (TypeError, ValueError):
            raise TypeError("input_output_aliases must map ints to ints, got "
                            f"{i!r}: {o!r}") from None
    return tuple(sorted(pairs))


def buffer_callback(callback, result_shape_dtypes, *, has_side_effect=False, vmap_method=None,
                    input_output_aliases=None, command_buffer_compatible=False):
    """A callback that operates in place on the program's buffers.

    Example::

        def add_one(ctx, out, x):
            np.asarray(out)[...] = np.asarray(x) + 1

        x = jnp.array(41, dtype=jnp.int32)
        f = buffer_callback(add_one, olympus.ShapeDtypeStruct(x.shape, x.dtype))
        f(x)  # Array(42, dtype=int32)

    Args:
      callback: `callback(ctx, out, *args, **kwargs) -> None` (see the module
        docstring); returning anything but None is an error.
      result_shape_dtypes: a pytree whose leaves have `shape` and `dtype`
        (`olympus.ShapeDtypeStruct`, `ShapeDtypeStruct.like(x)`); `out` has
        its structure.
      has_side_effect: when True the call is an effect: it runs even if its
        results are unused, in program order with the other effects. When
        False an unused call may be removed under `jit`, like `pure_callback`.
      vmap_method: how the call batches under `vmap`, as for
        `olympus.pure_callback` ("sequential", "sequential_unrolled",
        "expand_dims", "broadcast_all", "legacy_vectorized"; None: vmap raises).
        Under a single-call method an aliased argument is broadcast to the
        batch like its output.
      input_output_aliases: `{input_index: output_index}` over the flattened
        arguments (positional, then keyword, each pytree flattened) and the
        flattened outputs; the pair must have the same shape and dtype.
        (The reference bounds the input index by the number of positional
        arguments; olympus by the number of flattened inputs it indexes.)
      command_buffer_compatible: accepted for compatibility: it asks GPU
        backends to capture the call into a command buffer and has no effect
        on the CPU.

    Returns:
      A function of arrays (pytrees allowed) returning arrays with the structure
      of `result_shape_dtypes`. It works eagerly and under `jit`, `vmap`, and
      inside `cond`, `while_loop`, `scan` and `fori_loop`; differentiating
      through it raises (wrap it in `olympus.custom_jvp` or `custom_vjp`).
    """
    if not callable(callback):
        raise TypeError("buffer_callback: the callback must be callable, but got an object of "
                        f"type {type(callback)}")
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(
            "vmap_method must be one of the allowed methods [None, 'sequential', "
            "'sequential_unrolled', 'expand_dims', 'broadcast_all', 'legacy_vectorized'], "
            f"but got: {vmap_method}")
    avals, out_tree = _result_avals(result_shape_dtypes)
    leaf_out = _core.treedef_is_leaf(out_tree)
    aliases = _aliases(input_output_aliases)
    has_side_effect = bool(has_side_effect)
    del command_buffer_compatible  # no effect on the CPU
    name = _callable_name(callback)

    def wrapped(*args, **kwargs):
        flat, in_tree = _core.tree_flatten((args, kwargs))
        if in_tree == _flat_tree(len(flat)):
            in_tree = None
        out = _core.buffer_callback(callback, avals, flat, in_tree=in_tree,
                                    out_tree=None if leaf_out else out_tree,
                                    vmap_method=vmap_method, has_side_effect=has_side_effect,
                                    input_output_aliases=aliases, name=name)
        return _core.tree_unflatten(out_tree, out)

    wrapped.__name__ = name
    wrapped.__qualname__ = getattr(callback, "__qualname__", name)
    wrapped.__doc__ = getattr(callback, "__doc__", None)
    wrapped.__wrapped__ = callback
    return wrapped

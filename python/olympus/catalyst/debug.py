"""olympus.catalyst.debug: Catalyst's runtime printing and callbacks.

- `print(x)` prints a value; `print("fmt {x}", x=x)` / `print("{} {}", a, b)`
  a format string with arguments. Inside compiled code it prints at run time,
  in program order (an ordered debug callback); on concrete values it prints
  at once. `memref=` is accepted and ignored.
- `callback(fn)`: a host function with no result, called as an ordered effect.
"""
import builtins

from olympus import _core
from olympus import debug as _debug
from olympus import tree_util

__all__ = ["print", "callback"]


def _traced(*trees):
    return any(_core.is_tracer(leaf) for t in trees for leaf in tree_util.tree_leaves(t))


def print(fmt_or_value, *args, memref=False, **kwargs):  # noqa: A001 (Catalyst's name)
    """Prints a value, or a format string with arguments, at run time."""
    if isinstance(fmt_or_value, str):
        fmt, args_ = fmt_or_value, args
    else:
        if args or kwargs:
            raise TypeError("catalyst.debug.print: give either one value, or a format string "
                            "with arguments")
        fmt, args_ = "{}", (fmt_or_value,)
    if not _traced(args_, kwargs):
        builtins.print(fmt.format(*args_, **kwargs))
        return
    _debug.print(fmt, *args_, ordered=True, **kwargs)


def callback(func):
    """See olympus.catalyst.callback."""
    from olympus.catalyst import callback as _callback
    return _callback(func)

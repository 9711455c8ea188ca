"""olympus.debug: host callbacks for debugging that run when the program runs.

`callback(fn, *args, ordered=False, **kwargs)` calls `fn` on the host with the
runtime values; `print(fmt, *args, **kwargs)` prints `fmt.format(...)`;
`log(fmt, ...)` emits it as an INFO record on the logger `olympus._src.debugging`.
All three also have a two-call form taking the options first:
`olympus.debug.print(ordered=True)("x = {x}", x=x)`.
"""
from olympus._src.callback import debug_callback as callback
from olympus._src.callback import debug_log as log
from olympus._src.callback import debug_print as print  # noqa: A001 (shadows the builtin on purpose)

__all__ = ["callback", "print", "log"]

"""Callback statistics: how often each host callback ran, for how long, and how
many bytes it moved (docs/beyond.md).

    with olympus.experimental.collect_callback_stats() as stats:
        f(x)
    print(stats)                # a table, one row per callback function
    stats.rows                  # the same as data: CallbackStat tuples

    olympus.experimental.enable_callback_stats()     # or OLYMPUS_CALLBACK_STATS=1
    ...
    print(olympus.experimental.callback_stats())     # everything since enabled

The counting happens where host functions are called (the callback kernel,
src/cpu/callback.c; taps where the outfeed receiver calls them) behind one
relaxed atomic flag: while statistics are off, a callback costs one
predictable branch more than before. A row is a callback function (the Python
callable, through the wrappers olympus puts around it; a C or FFI host
function by its name) with one flavour on one device.

Timings are wall time of the host call: for a Python callback they include
taking the GIL, wrapping the arguments, the function and checking and copying
its result. Taps are delivered asynchronously: a tap is counted when its tap
function has run (`host_callback.barrier_wait()` waits for that).
"""
import atexit
import os
import sys
import threading
from typing import Any, NamedTuple, Optional

from olympus import _core

__all__ = ["callback_stats", "collect_callback_stats", "enable_callback_stats",
           "reset_callback_stats", "CallbackStats", "CallbackStat"]


class CallbackStat(NamedTuple):
    """One callback function's counts (times in seconds, sizes in bytes)."""
    name: str                 # the function's name (debug prints: their format)
    flavour: str              # pure_callback, io_callback, io_callback(ordered),
                              # debug_callback, buffer_callback, ffi_call, id_tap,
                              # host_callback.call
    device: int               # the device id the call ran for
    calls: int
    errors: int               # calls that failed (raised, or a bad result)
    total_s: float
    mean_s: float
    max_s: float
    bytes_in: int             # arguments handed to the function
    bytes_out: int            # results copied back
    function: Optional[Any]   # the Python callable, or None for C / FFI functions


# ---------------------------------------------------------------- rows from the core

def _user_function(fn):
    """The user's callable behind olympus's wrappers (eager array conversion,
    debug callbacks' static arguments, host_callback's caller)."""
    for _ in range(8):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            owner = getattr(fn, "__self__", None)
            inner = getattr(owner, "func", None) if owner is not None and \
                type(owner).__name__ == "_Caller" else None
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


class _Acc:
    __slots__ = ("name", "flavour", "device", "function", "calls", "errors", "total_ns",
                 "max_ns", "bytes_in", "bytes_out")

    def __init__(self, name, flavour, device, function):
        self.name, self.flavour, self.device, self.function = name, flavour, device, function
        self.calls = self.errors = self.total_ns = self.max_ns = 0
        self.bytes_in = self.bytes_out = 0

    def add(self, o):
        self.calls += o.calls
        self.errors += o.errors
        self.total_ns += o.total_ns
        self.max_ns = max(self.max_ns, o.max_ns)
        self.bytes_in += o.bytes_in
        self.bytes_out += o.bytes_out

    def copy(self):
        c = _Acc(self.name, self.flavour, self.device, self.function)
        c.add(self)
        return c


def _rows_from_core(reset):
    """{key: _Acc} of the core's table (emptied with reset)."""
    out = {}
    for (name, flavour, device, calls, errors, total, mx, bin_, bout,
         fn) in _core.callback_stats(reset=reset):
        if fn is not None:
            fn = _user_function(fn)
            label = getattr(fn, "_olympus_stats_label", None)
            if label:
                name = label
        if flavour == "pure_callback" and name.startswith("ffi_call:"):
            flavour = "ffi_call"
        key = (id(fn) if fn is not None else name, flavour, device)
        acc = out.get(key)
        if acc is None:
            acc = out[key] = _Acc(name, flavour, device, fn)
        a = _Acc(name, flavour, device, fn)
        a.calls, a.errors, a.total_ns, a.max_ns = calls, errors, total, mx
        a.bytes_in, a.bytes_out = bin_, bout
        acc.add(a)
    return out


def _merge(into, rows):
    for k, v in rows.items():
        if k in into:
            into[k].add(v)
        else:
            into[k] = v.copy()


# ---------------------------------------------------------------- scopes
#
# The core keeps one table. Python keeps a stack of levels (the process, then
# each open collect_callback_stats block): a level's accumulator holds what was
# counted while it was the innermost one, plus its closed children. Opening a
# block moves the core's table into the innermost level and starts a fresh
# one; closing it moves the table into the block and the block into its
# parent. So every call is counted in every block open when it ran.

_lock = threading.Lock()
_levels = [{}]          # _levels[0]: the process; guarded by _lock


def _drain_into_top():
    _merge(_levels[-1], _rows_from_core(True))


def _total():
    acc = {}
    for level in _levels:
        _merge(acc, level)
    _merge(acc, _rows_from_core(False))
    return acc


def enable_callback_stats(enabled=True):
    """Turns callback statistics on (or off); returns whether they were on."""
    return bool(_core.callback_stats_enable(bool(enabled)))


def reset_callback_stats():
    """Forgets everything counted so far (open blocks included)."""
    with _lock:
        _core.callback_stats(reset=True)
        for level in _levels:
            level.clear()


def callback_stats(*, reset=False):
    """A `CallbackStats` of everything counted since statistics were enabled
    (or last reset). With `reset=True` the counts start again from zero."""
    with _lock:
        stats = CallbackStats(_total().values())
        if reset:
            _core.callback_stats(reset=True)
            for level in _levels:
                level.clear()
    return stats


class collect_callback_stats:
    """Context manager: counts callbacks while the block runs (statistics are
    on inside it, and back to their previous state after) and leaves them in
    the `CallbackStats` it yields, filled when the block exits. Blocks nest;
    a call is counted in every block open when it ran (from any thread).

    Taps are counted when their tap function has run: with `wait=True` the
    exit waits for pending effects and taps (`olympus.effects_barrier()` and
    `host_callback.barrier_wait()`, which raise what failed)."""

    def __init__(self, *, wait=False):
        self.wait = wait
        self.stats = CallbackStats(())
        self._prev = None
        self._level = None

    def __enter__(self):
        with _lock:
            _drain_into_top()
            self._level = {}
            _levels.append(self._level)
            self._prev = _core.callback_stats_enable(True)
        return self.stats

    def __exit__(self, exc_type, exc, tb):
        try:
            if self.wait and exc_type is None:
                import olympus
                from olympus.experimental import host_callback
                olympus.effects_barrier()
                host_callback.barrier_wait("collect_callback_stats")
        finally:
            with _lock:
                _drain_into_top()
                level = self._level
                # the block's level is on the stack (blocks close in order on
                # one thread; another thread's block may sit above it)
                for i in range(len(_levels) - 1, 0, -1):
                    if _levels[i] is level:
                        del _levels[i]
                        _merge(_levels[i - 1], level)
                        break
                if len(_levels) == 1:
                    _core.callback_stats_enable(bool(self._prev))
                self.stats._set(level.values())
        return False


# ---------------------------------------------------------------- the report

def _fmt_time(s):
    if s == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _fmt_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


class CallbackStats:
    """Callback statistics as data (`rows`: `CallbackStat`s, most total time
    first; `as_dicts()`) and as a table (`str()`, `table()`)."""

    def __init__(self, accs):
        self.rows = []
        self._set(accs)

    def _set(self, accs):
        rows = []
        for a in accs:
            if not a.calls:
                continue
            total = a.total_ns * 1e-9
            rows.append(CallbackStat(a.name, a.flavour, a.device, a.calls, a.errors, total,
                                     total / a.calls, a.max_ns * 1e-9, a.bytes_in,
                                     a.bytes_out, a.function))
        rows.sort(key=lambda r: (-r.total_s, r.name, r.flavour, r.device))
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, key):
        """A row by position, or the rows of a function (by name or callable)."""
        if isinstance(key, (int, slice)):
            return self.rows[key]
        found = [r for r in self.rows if r.name == key or
                 (r.function is not None and r.function is key)]
        if not found:
            raise KeyError(key)
        return found

    @property
    def calls(self):
        return sum(r.calls for r in self.rows)

    @property
    def total_s(self):
        return sum(r.total_s for r in self.rows)

    def as_dicts(self):
        """The rows as plain dicts (the callable left out)."""
        return [{k: v for k, v in r._asdict().items() if k != "function"} for r in self.rows]

    def _names(self):
        """Display names: a name shared by different functions gets the
        function's file and line."""
        count = {}
        for r in self.rows:
            count.setdefault(r.name, set()).add(id(r.function))
        names = []
        for r in self.rows:
            name = r.name
            code = getattr(r.function, "__code__", None)
            if len(count[name]) > 1 and code is not None:
                name = f"{name}@{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
            names.append(name)
        return names

    def table(self):
        head = ["callback", "flavour", "device", "calls", "errors", "total", "mean", "max",
                "bytes in", "bytes out"]
        body = [[n, r.flavour, f"cpu:{r.device}", str(r.calls), str(r.errors),
                 _fmt_time(r.total_s), _fmt_time(r.mean_s), _fmt_time(r.max_s),
                 _fmt_bytes(r.bytes_in), _fmt_bytes(r.bytes_out)]
                for n, r in zip(self._names(), self.rows)]
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        left = {0, 1, 2}

        def line(cells):
            return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
        title = (f"callback statistics: {len(self.rows)} callback(s), {self.calls} call(s), "
                 f"{_fmt_time(self.total_s)} in host functions")
        if not self.rows:
            return title
        out = [title, line(head), line(["-" * w for w in widths])]
        out += [line(b) for b in body]
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"<CallbackStats: {len(self.rows)} callback(s), {self.calls} call(s)>"


# ---------------------------------------------------------------- OLYMPUS_CALLBACK_STATS=1

def _report_at_exit():
    stats = callback_stats()
    if stats.rows:
        sys.stderr.write(stats.table() + "\n")


if os.environ.get("OLYMPUS_CALLBACK_STATS", "").strip() not in ("", "0"):
    enable_callback_stats(True)
    atexit.register(_report_at_exit)

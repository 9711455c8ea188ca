"""Progress bars for compiled loops (docs/beyond.md).

Two ways to put a bar on a loop:

    from olympus.experimental import progress, progress_bar

    # keyword: drop-in loops; no cost per iteration (the loop runs in chunks
    # and the host hears from it once per chunk)
    x = progress.fori_loop(0, n, body, x, progress="fit")
    carry, ys = progress.scan(step, carry, xs, progress=progress_bar(desc="epoch"))
    x = progress.while_loop(cond, body, x, progress=progress_bar(total=n))

    # decorator on a fori_loop body (its first argument is the index): the
    # body sends a tap every `every` iterations, a branch on the others
    @progress_bar(n, desc="fit")
    def body(i, x): ...
    x = olympus.lax.fori_loop(0, n, body, x)

Both work eagerly, under jit, under vmap (one bar; the text says how many
batch elements run) and nested (one line per level; a nested bar restarts
with each outer iteration). The device never waits for the host: updates are
host_callback taps, sent at most `updates` times per loop run (plus a start
and an end), delivered by the outfeed's receiver thread; the host redraws at
most every `min_interval` seconds. On a terminal the bar is redrawn in place
(rate and ETA); otherwise plain lines are written at each `text_step` percent.
Bars left open by a failed run are closed by the next start of the same bar,
by `close_all()`, on an uncaught exception, at exit, or when a
`with progress_bar(...) as bar:` block ends.
"""
import atexit
import itertools
import math
import os
import shutil
import sys
import threading
import time

import numpy as np

from olympus import _core

__all__ = ["progress_bar", "fori_loop", "scan", "while_loop", "close_all"]

_uids = itertools.count(1)
# A gate open for every value (stop == start: no upper bound; values of a
# progress tap are counts, never below -1)
_ALWAYS = (1, -(1 << 40), -(1 << 40))
_tls = threading.local()     # .depth: progress loops being traced on this thread


def _depth():
    return getattr(_tls, "depth", 0)


class _traced_level:
    """Marks a progress loop's body being traced: bars inside it are nested."""

    def __enter__(self):
        _tls.depth = _depth() + 1

    def __exit__(self, *exc):
        _tls.depth = _depth() - 1


# ---------------------------------------------------------------- the spec

class progress_bar:
    """A progress bar for a compiled loop: a decorator for a `fori_loop` body,
    or the `progress=` argument of this module's `fori_loop`, `scan` and
    `while_loop`.

    total: iterations per loop run. The keyword loops know it (the decorator
      needs it; a `while_loop` without it shows the count and the rate).
    desc: the label (default: the body's name).
    updates: at most this many updates per loop run (default 100; 10 for a
      nested bar); `every` sets the iterations between updates instead.
    start: the decorator only: the index of the first iteration (the loop's
      lower bound).
    file: where to write (default sys.stderr, looked up when drawing).
    terminal: draw a bar redrawn in place (True), plain lines (False), or
      decide by `file.isatty()` (None, the default).
    min_interval: seconds between redraws on a terminal (default 0.1); plain
      lines are written at each `text_step` percent (default 10), at most one
      a second for a nested bar unless min_interval says otherwise.
    """

    def __init__(self, total=None, *, desc=None, updates=None, every=None, start=0, file=None,
                 terminal=None, min_interval=None, text_step=10):
        if total is not None:
            total = int(total)
            if total < 0:
                raise ValueError(f"progress_bar: total must be >= 0, got {total}")
        if updates is not None and int(updates) < 1:
            raise ValueError(f"progress_bar: updates must be >= 1, got {updates}")
        if every is not None and int(every) < 1:
            raise ValueError(f"progress_bar: every must be >= 1, got {every}")
        if not 0 < float(text_step) <= 100:
            raise ValueError(f"progress_bar: text_step must be in (0, 100], got {text_step}")
        self.total = total
        self.desc = desc
        self.updates = None if updates is None else int(updates)
        self.every = None if every is None else int(every)
        self.start = int(start)
        self.file = file
        self.terminal = terminal
        self.min_interval = min_interval
        self.text_step = float(text_step)
        self.uid = next(_uids)

    # -- device side

    def _stride(self, total, level):
        if self.every is not None:
            return self.every
        updates = self.updates if self.updates is not None else (100 if level == 0 else 10)
        if not total:
            return 1024
        return max(1, math.ceil(total / updates))

    def _tap(self, what, value, level, desc, marker=None, total=None, gate=_ALWAYS):
        """A direct tap of (value[, marker]) to this bar's host side. Every
        progress tap is a gated one (src/cpu/callback.c): sent only when its
        gate is open, and then it lets the GIL go for a moment, so the
        receiver can draw while a run that holds the GIL goes on."""
        fn = _tap_fn(self, what, level, desc, total)
        args = (value,) if marker is None else (value, marker)
        tree = None if marker is None else _PAIR
        kw = {"every": gate[0], "start": gate[1], "stop": gate[2]}
        out = _core.callback("outside_call", fn, [], args, identity=True, tap=True,
                             in_tree=tree, name=f"progress:{desc}", **kw)
        return out

    def __call__(self, body):
        """Decorates a fori_loop body `body(i, x)`: every `every` iterations
        (chosen from `total`) and on the last one, it sends `i` to the bar."""
        if not callable(body):
            raise TypeError(f"progress_bar: decorates a loop body (a callable), got {body!r}")
        if self.total is None:
            raise ValueError("progress_bar used as a decorator needs total= (the number of "
                             "iterations of the fori_loop it decorates the body of)")
        desc = self.desc or getattr(body, "__name__", "loop")
        spec = self

        def wrapped(i, *rest):
            level = _depth()
            k = spec._stride(spec.total, level)
            marker = _marker(rest)
            start, stop = spec.start, spec.start + spec.total
            i_arr = i if hasattr(i, "dtype") else np.asarray(i)
            if not np.issubdtype(np.dtype(i_arr.dtype), np.integer):
                raise TypeError("progress_bar decorates the body of a fori_loop: its first "
                                f"argument must be the integer index, got {i_arr.dtype}")
            spec._tap("gate", i, level, desc, marker=marker, total=spec.total,
                      gate=(k, start, stop))
            with _traced_level():
                return body(i, *rest)

        wrapped.__name__ = getattr(body, "__name__", "body")
        wrapped.__wrapped__ = body
        return wrapped

    # -- the keyword loops, as methods

    def fori_loop(self, lower, upper, body_fun, init_val):
        return fori_loop(lower, upper, body_fun, init_val, progress=self)

    def scan(self, f, init, xs=None, length=None, reverse=False, unroll=1):
        return scan(f, init, xs, length=length, reverse=reverse, unroll=unroll, progress=self)

    def while_loop(self, cond_fun, body_fun, init_val):
        return while_loop(cond_fun, body_fun, init_val, progress=self)

    # -- host side

    def close(self):
        """Waits for the taps sent so far, then closes this bar's open lines."""
        _wait_for_taps()
        _board.close(lambda b: b.uid == self.uid, interrupted=False)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            _wait_for_taps()
        else:
            _wait_for_taps_quietly()  # the taps the failed run sent, then close
        _board.close(lambda b: b.uid == self.uid, interrupted=exc_type is not None)
        return False

    def __repr__(self):
        return f"progress_bar(total={self.total}, desc={self.desc!r})"


def _as_bar(progress, default_desc):
    if progress is None or progress is False:
        return None, None
    if progress is True:
        return progress_bar(), default_desc
    if isinstance(progress, str):
        return progress_bar(desc=progress), progress
    if isinstance(progress, progress_bar):
        return progress, progress.desc or default_desc
    raise TypeError("progress= takes True, a description (str) or a progress_bar, got "
                    f"{progress!r}")


_PAIR = _core.tree_flatten((0, 0))[1]


def _marker(tree):
    """A zero-size value batched exactly when the loop's carry is (None when
    the carry has no array): every dim of the unbatched marker is 0, so under
    vmap its nonzero dims are the batch dims and their product is the number
    of batch elements. One slice (or broadcast) equation."""
    from olympus import lax
    leaves = [x for x in _core.tree_flatten(tree)[0]
              if hasattr(x, "shape") and hasattr(x, "dtype")]
    if not leaves:
        return None
    x = leaves[0]
    if len(x.shape) == 0:
        return lax.broadcast_in_dim(x, (0,), ())
    return lax.slice(x, (0,) * len(x.shape), (0,) * len(x.shape))


_tap_lock = threading.Lock()


def _tap_fn(spec, what, level, desc, total):
    """The host function of one kind of tap of one bar, kept on the bar (so
    equal taps keep their compiled programs, and go with the bar)."""
    key = (what, level, desc, total)
    with _tap_lock:
        fns = spec.__dict__.setdefault("_fns", {})
        fn = fns.get(key)
        if fn is None:
            def fn(arg, transforms):
                _board.tap(spec, what, level, desc, total, arg, transforms)
            fn.__name__ = f"progress_{what}"
            fns[key] = fn
            _ensure_hooks()
    # host_callback sets the parser of direct taps' transforms and stops the
    # receivers at exit
    from olympus.experimental import host_callback
    host_callback._start()
    return fn


# ---------------------------------------------------------------- keyword loops

def _int32(v):
    import olympus.numpy as jnp
    return jnp.asarray(v, dtype=np.int32)


def fori_loop(lower, upper, body_fun, init_val, *, progress=True, unroll=None):
    """`olympus.lax.fori_loop` with a progress bar (`progress`: True, a
    description, a `progress_bar`, or None/False for none). With static
    bounds the loop runs as chunks of `every` iterations and the host hears
    from it between chunks, so an iteration costs what it costs without the
    bar; traced bounds run it as a while_loop (see `while_loop`)."""
    from olympus import lax
    from olympus._src.control import _static_int
    bar, desc = _as_bar(progress, getattr(body_fun, "__name__", "fori_loop"))
    if bar is None:
        return lax.fori_loop(lower, upper, body_fun, init_val)
    level = _depth()
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is None or hi is None:
        import olympus.numpy as jnp
        lower = jnp.asarray(lower)
        upper = jnp.asarray(upper)

        def c(carry):
            return carry[0] < carry[1]

        def b(carry):
            i, u, x = carry
            return i + 1, u, body_fun(i, x)
        total = bar.total
        out = _while(bar, desc, level, c, b, (lower, upper, init_val), total,
                     dyn_total=lambda carry: carry[1] - carry[0])
        return out[2]
    n = max(hi - lo, 0)
    total = n
    k = min(bar._stride(total, level), n) if n else 1
    idt = _dtype_of_bounds(lower, upper)
    import olympus.numpy as jnp

    def inner(carry, _):
        i, x = carry
        return (i + 1, body_fun(i, x)), None

    x = init_val
    bar._tap("start", _int32(total), level, desc, marker=_marker(x), total=total)
    carry = (jnp.asarray(lo, dtype=idt), x)
    n_chunks, rem = divmod(n, k)
    with _traced_level():
        if n_chunks:
            def chunk(c, _):
                c, _ = lax.scan(inner, c, None, length=k)
                bar._tap("update", (c[0] - lo).astype(np.int32), level, desc, total=total)
                return c, None
            carry, _ = lax.scan(chunk, carry, None, length=n_chunks)
        if rem:
            carry, _ = lax.scan(inner, carry, None, length=rem)
    bar._tap("end", _int32(total), level, desc, total=total)
    return carry[1]


def _dtype_of_bounds(lower, upper):
    from olympus._src import dtypes as _dt
    return _dt.result_type(lower, upper)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, *, progress=True):
    """`olympus.lax.scan` with a progress bar: the scan runs as chunks of
    `every` steps (xs reshaped, ys reshaped back) and the host hears from it
    between chunks; an iteration costs what it costs without the bar."""
    from olympus import lax
    import olympus.numpy as jnp
    bar, desc = _as_bar(progress, getattr(f, "__name__", "scan"))
    if bar is None:
        return lax.scan(f, init, xs, length=length, reverse=reverse, unroll=unroll)
    level = _depth()
    x_leaves, x_tree = _core.tree_flatten(xs)
    if length is None:
        if not x_leaves:
            raise ValueError("scan got no values to scan over and `length` not provided.")
        length = int(np.shape(x_leaves[0])[0])
    n = int(length)
    k = min(bar._stride(n, level), n) if n else 1
    n_chunks, rem = divmod(n, k)
    bar._tap("start", _int32(n), level, desc, marker=_marker(init), total=n)

    def xs_part(lo, hi, chunked):
        parts = []
        for leaf in x_leaves:
            leaf = jnp.asarray(leaf)
            part = leaf[lo:hi]
            if chunked:
                part = part.reshape((n_chunks, k) + tuple(leaf.shape[1:]))
            parts.append(part)
        return _core.tree_unflatten(x_tree, parts)

    head = n_chunks * k
    carry = init

    def run_tail(c):
        return lax.scan(f, c, xs_part(head, n, False) if x_leaves else None,
                        length=rem, reverse=reverse)

    with _traced_level():
        if rem and reverse:  # the tail runs first backwards
            carry, ys_tail = run_tail(carry)
        if n_chunks:
            def chunk(c, xc):
                c_in, done = c
                c_out, yc = lax.scan(f, c_in, xc, length=k, reverse=reverse)
                done = done + k
                bar._tap("update", done, level, desc, total=n)
                return (c_out, done), yc
            start_done = _int32(rem if reverse else 0)
            (carry, _), ys_head = lax.scan(chunk, (carry, start_done),
                                           xs_part(0, head, True) if x_leaves else None,
                                           length=n_chunks, reverse=reverse)
        if rem and not reverse:
            carry, ys_tail = run_tail(carry)
    bar._tap("end", _int32(n), level, desc, total=n)
    if n == 0:  # ys of length 0
        return carry, lax.scan(f, init, xs, length=0)[1]
    y_parts = ([_unchunk(ys_head)] if n_chunks else []) + ([ys_tail] if rem else [])
    if len(y_parts) == 1:
        return carry, y_parts[0]
    yl0, yt = _core.tree_flatten(y_parts[0])
    yl1, _ = _core.tree_flatten(y_parts[1])
    return carry, _core.tree_unflatten(yt, [jnp.concatenate([a, b]) for a, b in zip(yl0, yl1)])


def _unchunk(ys):
    leaves, tree = _core.tree_flatten(ys)
    return _core.tree_unflatten(tree, [y.reshape((y.shape[0] * y.shape[1],) + tuple(y.shape[2:]))
                                       for y in leaves])


def while_loop(cond_fun, body_fun, init_val, *, progress=True):
    """`olympus.lax.while_loop` with a progress bar (`total` from the
    `progress_bar`, else the bar shows the count and the rate). The loop runs
    as an outer loop of inner loops of at most `every` iterations; the host
    hears from it between them. Costs per iteration: one counter increment and
    compare; `cond_fun` runs one extra time per chunk."""
    bar, desc = _as_bar(progress, getattr(body_fun, "__name__", "while_loop"))
    if bar is None:
        from olympus import lax
        return lax.while_loop(cond_fun, body_fun, init_val)
    return _while(bar, desc, _depth(), cond_fun, body_fun, init_val, bar.total)


def _while(bar, desc, level, cond_fun, body_fun, init_val, total, dyn_total=None):
    from olympus import lax
    k = bar._stride(total, level)
    zero = _int32(0)
    if dyn_total is not None:
        t0 = dyn_total(init_val).astype(np.int32)
    else:
        t0 = _int32(-1 if total is None else total)
    bar._tap("start", t0, level, desc, marker=_marker(init_val), total=total)

    def ocond(c):
        return cond_fun(c[1])

    def obody(c):
        done, x = c

        def icond(ic):
            return (ic[0] < k) & cond_fun(ic[1])

        def ibody(ic):
            return ic[0] + 1, body_fun(ic[1])
        t, x = lax.while_loop(icond, ibody, (zero, x))
        done = done + t
        bar._tap("update", done, level, desc, total=total)
        return done, x

    with _traced_level():
        done, out = lax.while_loop(ocond, obody, (zero, init_val))
    bar._tap("end", done, level, desc, total=total)
    return out


# ---------------------------------------------------------------- the host side

def _fmt_secs(s):
    if s is None or not math.isfinite(s):
        return "?"
    s = int(round(s))
    h, m, sec = s // 3600, (s // 60) % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _fmt_rate(r):
    if not r or not math.isfinite(r):
        return "? it/s"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if r >= scale:
            return f"{r / scale:.3g}{unit} it/s"
    return f"{r:.3g} it/s"


class _Bar:
    """One bar's state for one loop run (host side)."""

    def __init__(self, spec, level, desc, total, batch, now):
        self.spec = spec
        self.uid = spec.uid
        self.level = level
        self.desc = desc
        self.total = total         # None: unknown
        self.batch = batch         # batch elements (None: not batched)
        self.lanes = None          # (min, max) when the count itself is batched
        self.done = 0
        self.t0 = now
        self.t_last = now
        self.closed = False
        self.last_draw = -math.inf
        self.last_line = -math.inf
        self.next_pct = spec.text_step

    def fraction(self):
        if not self.total:
            return None
        return min(1.0, self.done / self.total)

    def text(self, width, now):
        elapsed = now - self.t0
        rate = self.done / elapsed if elapsed > 0 else None
        extra = ""
        if self.batch:
            extra = f" (batch of {self.batch})"
        if self.lanes is not None and self.lanes[0] != self.lanes[1]:
            # the count itself is batched (a batched while): the slowest lane
            # is shown, and the range of all of them
            extra += f" [lanes {self.lanes[0]}..{self.lanes[1]}]"
        if self.total is None:
            return (f"{'  ' * self.level}{self.desc}: {self.done} it "
                    f"[{_fmt_secs(elapsed)}, {_fmt_rate(rate)}]{extra}")
        frac = self.fraction()
        eta = (self.total - self.done) / rate if rate else None
        left = f"{'  ' * self.level}{self.desc}: {100 * frac:3.0f}%"
        right = (f" {self.done}/{self.total} [{_fmt_secs(elapsed)}<{_fmt_secs(eta)}, "
                 f"{_fmt_rate(rate)}]{extra}")
        if width is None:
            return left + right
        room = width - len(left) - len(right) - 2
        if room < 10:
            return left + right
        room = min(room, 40)
        fill = int(frac * room)
        return f"{left}|{'#' * fill}{' ' * (room - fill)}|{right}"


class _Board:
    """Every bar on the host: which runs are open, and drawing them. Taps
    arrive on outfeed receiver threads (under the GIL); the lock keeps the
    state and the output consistent."""

    def __init__(self):
        self.lock = threading.RLock()
        self.open = []        # open _Bars, outermost first
        self.drawn = {}       # id(file) -> lines of the live block on a terminal
        self.last_text = {}   # (uid, level) -> when its last plain line was written

    # -- taps

    def tap(self, spec, what, level, desc, total, arg, transforms):
        try:
            self._tap(spec, what, level, desc, total, arg, transforms)
        except Exception as e:  # a progress bar never fails a program
            try:
                sys.stderr.write(f"progress bar {desc!r}: {type(e).__name__}: {e}\n")
            except Exception:
                pass

    def _tap(self, spec, what, level, desc, total, arg, transforms):
        now = time.monotonic()
        value, marker = (arg if isinstance(arg, tuple) else (arg, None))
        value = np.asarray(value)
        batch = None
        if marker is not None and any(name == "batch" for name, _ in transforms):
            dims = [d for d in np.shape(marker) if d]
            if dims:
                batch = int(np.prod(dims))
        lanes = None
        if value.ndim:
            flat = value.reshape(-1)
            lanes = (int(flat.min()), int(flat.max()))
            v = int(flat.min())
        else:
            v = int(value)
        with self.lock:
            bar = self._find(spec.uid, level)
            if what == "gate":
                j = v - spec.start
                if j == 0:
                    bar = self._start(spec, level, desc, total, batch, now)
                elif bar is None:
                    return  # closed already (by an exception, close_all)
                if total and j >= total - 1:
                    bar.done = total
                    bar.lanes = lanes
                    self._finish(bar, now)
                    return
                bar.done = j
                bar.lanes = lanes
                self._update(bar, now)
                return
            if what == "start":
                t = total
                if t is None and v >= 0:
                    t = v  # a total known only when the loop runs (traced bounds)
                self._start(spec, level, desc, t, batch, now)
                return
            if bar is None:
                return  # closed already (by an exception, close_all)
            bar.lanes = lanes
            bar.done = v
            if what == "end":
                if bar.total is not None and v >= bar.total:
                    bar.done = bar.total
                self._finish(bar, now)
            else:
                self._update(bar, now)

    def _find(self, uid, level):
        for b in self.open:
            if b.uid == uid and b.level == level:
                return b
        return None

    def _start(self, spec, level, desc, total, batch, now):
        # a bar starting at `level` ends every open bar at its level or deeper
        # (an inner loop's previous run, or a run that never ended)
        for b in [b for b in self.open if b.level >= level]:
            self._finish(b, now, interrupted=b.uid == spec.uid and b.level == level
                         and not self._complete(b))
        bar = _Bar(spec, level, desc, total, batch, now)
        self.open.append(bar)
        self.open.sort(key=lambda b: b.level)
        self._update(bar, now, force=True)
        return bar

    @staticmethod
    def _complete(b):
        return b.total is not None and b.done >= b.total

    def _update(self, bar, now, force=False):
        bar.t_last = now
        f = self._file(bar)
        if self._terminal(bar, f):
            mi = bar.spec.min_interval
            mi = 0.1 if mi is None else mi
            if force or now - bar.last_draw >= mi:
                bar.last_draw = now
                self._redraw(f, now)
        else:
            self._text_line(bar, f, now, "start" if force else "update")

    def _text_line(self, bar, f, now, kind, suffix=""):
        """Plain output: a line at the start, at each text_step percent (every
        second when the total is unknown) and at the end. A nested bar
        (level > 0) writes at most one line a second unless min_interval says
        otherwise; the outermost bar's start and end lines are always written."""
        spec = bar.spec
        mi = spec.min_interval
        if mi is None:
            mi = 0.0 if bar.level == 0 else 1.0
        key = (bar.uid, bar.level)
        last = self.last_text.get(key, -math.inf)
        frac = bar.fraction()
        if kind == "update":
            if frac is None:
                if now - last < max(mi, 1.0):
                    return
            else:
                pct = 100 * frac
                if pct < bar.next_pct or frac >= 1.0:  # 100%: the end's line says it
                    return
                step = spec.text_step
                bar.next_pct = (math.floor(pct / step + 1e-9) + 1) * step
                if now - last < mi:
                    return
        elif not suffix and (bar.level > 0 or kind == "update") and now - last < mi:
            return
        if len(self.last_text) > 4096:  # bars made per trace: keep this bounded
            self.last_text.clear()
        self.last_text[key] = now
        f.write(bar.text(None, now) + suffix + "\n")
        f.flush()

    def _finish(self, bar, now, interrupted=False):
        if bar.closed:
            return
        bar.closed = True
        if bar in self.open:
            self.open.remove(bar)
        f = self._file(bar)
        if self._terminal(bar, f):
            key = id(f)
            if bar.level == 0 or interrupted:
                # the finished bar stays on the screen, above what is still open
                self._redraw(f, now, extra_first=[bar], interrupted=interrupted)
                if not [b for b in self.open if self._file(b) is f]:
                    f.write("\n")
                    f.flush()
                    self.drawn[key] = 0
            else:
                self._redraw(f, now)
        else:
            # an interrupted bar reports up to its last update
            self._text_line(bar, f, bar.t_last if interrupted else now, "end",
                            " (interrupted)" if interrupted else "")

    def _redraw(self, f, now, extra_first=(), interrupted=False):
        key = id(f)
        live = [b for b in self.open if self._file(b) is f]
        width = _width(f)
        lines = [b.text(width, now) + (" (interrupted)" if interrupted else "")
                 for b in extra_first]
        lines += [b.text(width, now) for b in live]
        old = self.drawn.get(key, 0)
        buf = f"\x1b[{old - 1}F" if old > 1 else "\r"
        buf += "\n".join("\x1b[2K" + line for line in lines)
        extra = old - len(lines)
        if extra > 0:
            buf += "\n\x1b[2K" * extra + f"\x1b[{extra}A"
        # finished lines (extra_first) stay: the live block is the lines below them
        self.drawn[key] = len(lines) - len(extra_first)
        f.write(buf)
        f.flush()

    def _file(self, bar):
        return bar.spec.file if bar.spec.file is not None else sys.stderr

    def _terminal(self, bar, f):
        if bar.spec.terminal is not None:
            return bool(bar.spec.terminal)
        try:
            return f.isatty()
        except Exception:
            return False

    # -- closing

    def close(self, which=lambda b: True, interrupted=True):
        with self.lock:
            now = time.monotonic()
            for b in [b for b in self.open if which(b)]:
                self._finish(b, now, interrupted=interrupted and not self._complete(b))


def _width(f):
    try:
        return os.get_terminal_size(f.fileno()).columns
    except Exception:
        return shutil.get_terminal_size((80, 24)).columns


_board = _Board()


def _wait_for_taps():
    """Waits until every tap sent so far was delivered (host_callback's
    barrier: it raises what a tap function raised)."""
    import olympus
    olympus.effects_barrier()
    _core.outfeed_barrier()


def _wait_for_taps_quietly():
    """_wait_for_taps while an exception is already on its way (a failing tap
    would only hide it: host_callback.barrier_wait reports it later)."""
    try:
        _wait_for_taps()
    except Exception:
        pass


def close_all(interrupted=True):
    """Closes every open bar (the line of a bar that did not finish says so)."""
    _board.close(interrupted=interrupted)


_hooks_done = False


def _ensure_hooks():
    """At the first bar: close bars at exit and before an uncaught exception's
    traceback is printed."""
    global _hooks_done
    if _hooks_done:
        return
    _hooks_done = True
    atexit.register(_at_exit)
    previous = sys.excepthook

    def excepthook(tp, value, tb):
        try:
            _wait_for_taps_quietly()
            close_all()
        finally:
            previous(tp, value, tb)
    sys.excepthook = excepthook


def _at_exit():
    _wait_for_taps_quietly()
    close_all()

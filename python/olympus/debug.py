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


def visualize_array_sharding(arr, *, use_color=False, scale=1.0, min_width=9, max_width=80):
    """Prints which devices hold which block of a one- or two-dimensional array,
    as a text grid (one cell per distinct block, naming its devices)."""
    from olympus._src.sharded import array_sharding
    shape = tuple(arr.shape)
    if len(shape) not in (1, 2):
        raise ValueError("visualize_array_sharding can only visualize one- or two-dimensional "
                         f"arrays, got an array of rank {len(shape)}")
    idx_map = array_sharding(arr).devices_indices_map(shape)

    def span(s, n):
        return (s.start or 0, n if s.stop is None else s.stop)

    cells = {}
    for dev, idx in idx_map.items():
        r = span(idx[0], shape[0]) if len(shape) == 2 else (0, 1)
        c = span(idx[-1], shape[-1])
        cells.setdefault((r, c), []).append(dev.id)
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    labels = {k: "CPU " + ",".join(str(i) for i in sorted(v)) for k, v in cells.items()}
    width = max(min_width, max(len(t) for t in labels.values()) + 2)
    width = min(width, max(min_width, max_width // max(1, len(cols))))
    line = "+" + "+".join("-" * width for _ in cols) + "+"
    out = [line]
    for r in rows:
        out.append("|" + "|".join(labels.get((r, c), "").center(width) for c in cols) + "|")
        out.append(line)
    import builtins
    builtins.print("\n".join(out))


__all__.append("visualize_array_sharding")

"""Zero-copy safety check for the lazy argument views and the pooled run state
(bench/profiles/README.md): callbacks that keep their argument (directly, as a
derived view, as a memoryview, through an exception traceback) must read the
values of their own call later, however many runs reuse the executable.

    PYTHONPATH=python OLYMPUS_EXT_DIR=build-perf python3 bench/profiles/check_keep.py
"""
import gc

import numpy as np

import olympus

kept = []


def keep_direct(x):
    kept.append(("direct", float(x), x))
    return x + np.float32(1)


def keep_view(x):
    kept.append(("view", float(x), x[...]))
    return x + np.float32(1)


def keep_memoryview(x):
    kept.append(("memoryview", float(x), memoryview(x)))
    return x + np.float32(1)


def no_keep(x):
    return x + np.float32(1)


sd = olympus.ShapeDtypeStruct((), np.float32)


@olympus.jit
def chain(v):
    for fn in (keep_direct, no_keep, keep_view, no_keep, keep_memoryview, no_keep):
        v = olympus.pure_callback(fn, sd, v)
    return v


for i in range(50):
    out = chain(np.float32(i))
    assert float(out) == i + 6, (i, float(out))
    gc.collect()

bad = 0
for kind, want, obj in kept:
    got = float(np.asarray(obj).reshape(()))
    if got != want:
        bad += 1
        print("MISMATCH", kind, want, got)
    if isinstance(obj, np.ndarray):
        assert not obj.flags.writeable
        try:
            obj.setflags(write=True)
            print("WRITEABLE", kind)
            bad += 1
        except ValueError:
            pass

# Kept through a traceback: the callback raises, the caller keeps the exception.
def raiser(x):
    raise ValueError("boom")


@olympus.jit
def failing(v):
    return olympus.pure_callback(raiser, sd, olympus.pure_callback(no_keep, sd, v))


errs = []
for i in range(5):
    try:
        failing(np.float32(i))
    except Exception as e:  # noqa: BLE001
        errs.append((i + 1.0, e))
for want, e in errs:
    tb = e.__cause__.__traceback__
    while tb.tb_next:
        tb = tb.tb_next
    x = tb.tb_frame.f_locals["x"]
    if float(x) != want:
        bad += 1
        print("MISMATCH traceback", want, float(x))

print(f"{len(kept)} kept arguments, {len(errs)} kept through tracebacks, {bad} bad")
assert bad == 0

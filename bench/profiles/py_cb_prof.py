"""Instruction-count driver for the Python callback rows (bench/run.py rows 1-2).

    valgrind --tool=callgrind python3 bench/profiles/py_cb_prof.py SIDE FLAVOUR N

SIDE: "oly" (256 chained callbacks in one jitted call, as bench/run.py's unroll
driver, called N times) or "floor" (bench/floor.c's py_loop, N*256 calls).
FLAVOUR: pure | io | debug. SHAPE env: "f32" (default) or "f64k" (f64[1000]).
DRIVER env: "unroll" (default) or "fori" (bench/run.py's fori driver: a
lax.fori_loop of 256 callbacks in one jitted call).
Per-callback cost = (Ir(N2) - Ir(N1)) / ((N2 - N1) * 256): run it twice.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build"))
K = 256


def host_identity(x):
    return x


def host_void(x):
    return None


def main():
    side, flavour, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    shape = os.environ.get("SHAPE", "f32")
    if shape == "f64k":
        os.environ["OLYMPUS_ENABLE_X64"] = "1"
        x = np.full(1000, 0.5, np.float64)
    else:
        x = np.float32(0.5).reshape(())
    if side == "floor":
        import _olybench_floor as fl
        fn = host_void if flavour == "debug" else host_identity
        for _ in range(n):
            fl.py_loop(fn, x, K, flavour != "debug")
        return
    import olympus
    from olympus.experimental import io_callback

    def one(v):
        sd = olympus.ShapeDtypeStruct(v.shape, v.dtype)
        if flavour == "pure":
            return olympus.pure_callback(host_identity, sd, v)
        if flavour == "io":
            return io_callback(host_identity, sd, v)
        olympus.debug.callback(host_void, v)
        return v

    def chain(v):
        for _ in range(K):
            v = one(v)
        return v

    if os.environ.get("DRIVER") == "fori":
        jf = olympus.jit(lambda v: olympus.lax.fori_loop(0, K, lambda i, w: one(w), v))
    else:
        jf = olympus.jit(chain)
    xa = olympus.numpy.asarray(x)
    jf(xa)
    for _ in range(n):
        jf(xa)


main()

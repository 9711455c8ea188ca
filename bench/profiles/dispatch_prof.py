"""Instruction-count driver for bench/run.py's dispatch rows.

    valgrind --tool=callgrind python3 bench/profiles/dispatch_prof.py MODE N

MODE: jit (jit(lambda x: x + 1) on an f32[1] Array), jnp_sin (jnp.sin on an
f32[1] Array), bind_sin (_core.bind("sin", (x,), None): the eager path without
the jnp wrapper), np_sin (np.sin on an f32[1] ndarray), np_add (np.add(a, 1)).
Per-call cost = (Ir(N2) - Ir(N1)) / (N2 - N1): run it twice.
"""
import sys

import numpy as np


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    a = np.ones(1, np.float32)
    if mode.startswith("np_"):
        f = (lambda: np.sin(a)) if mode == "np_sin" else (lambda: np.add(a, 1))
    else:
        import olympus
        from olympus import _core
        x = olympus.numpy.asarray(a)
        if mode == "jit":
            jf = olympus.jit(lambda v: v + 1)
            f = lambda: jf(x)  # noqa: E731
        elif mode == "jnp_sin":
            f = lambda: olympus.numpy.sin(x)  # noqa: E731
        else:
            f = lambda: _core.bind("sin", (x,), None)  # noqa: E731
    f()
    for _ in range(n):
        f()


main()

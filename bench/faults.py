"""Page faults and time per call of the chain row, olympus and NumPy.

    PYTHONPATH=python OLYMPUS_EXT_DIR=build /usr/bin/python3 bench/faults.py [N] [CALLS]

Runs sin(x)**2 + cos(x)*y on f32[N] (default 1e7) under jit CALLS times
(default 100) after a warm-up, and the NumPy expression as often, and prints
the minor page faults (getrusage) and the mean time per call of each: what the
buffer pool (src/core/bufpool.c) is for. OLYMPUS_NUM_THREADS and
OLYMPUS_BUFFER_POOL_BYTES apply as usual."""
import resource
import sys
import time

import numpy as np

import olympus
import olympus.numpy as jnp


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(fn, calls):
    fn()
    f0, t0 = faults(), time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls, faults() - f0


def main():
    n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10 ** 7
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    g = np.random.default_rng(0)
    x, y = (g.standard_normal(n).astype(np.float32) for _ in range(2))
    f = olympus.jit(lambda a, b: jnp.sin(a) ** 2 + jnp.cos(a) * b)
    xa, ya = jnp.asarray(x), jnp.asarray(y)
    t, pf = measure(lambda: f(xa, ya).block_until_ready(), calls)
    tn, pfn = measure(lambda: np.sin(x) ** 2 + np.cos(x) * y, calls)
    print(f"f32[{n:.0e}], {calls} calls: olympus {t * 1e3:.2f} ms/call, {pf} faults; "
          f"NumPy {tn * 1e3:.2f} ms/call, {pfn} faults")


if __name__ == "__main__":
    main()

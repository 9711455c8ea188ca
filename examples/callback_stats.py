"""Which callbacks does my program make, how often, and what do they cost?

olympus.experimental.collect_callback_stats() counts every host callback a
block runs — per function, flavour and device: calls, failures, host time
(total / mean / max) and bytes in and out — and gives them back as a table and
as data. Off (the default) it costs a callback one predictable branch.
Setting OLYMPUS_CALLBACK_STATS=1 instead prints the table at exit.

Run: PYTHONPATH=python python3 examples/callback_stats.py
"""
import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import collect_callback_stats, io_callback
from olympus.experimental import host_callback as hcb


def host_norm(x):
    """A pure host function: the norm of each row."""
    return np.linalg.norm(x, axis=-1).astype(x.dtype)


log = []


def host_log(step, loss):
    log.append((int(step), float(loss)))


@olympus.jit
def train(w, data):
    def step(i, w):
        norms = olympus.pure_callback(host_norm, olympus.ShapeDtypeStruct((data.shape[0],),
                                                                          w.dtype), data * w)
        loss = jnp.mean(norms)
        io_callback(host_log, None, i, loss, ordered=True)
        return w * 0.99
    w = lax.fori_loop(0, 20, step, w)
    olympus.debug.print("final w = {w}", w=w)
    hcb.id_tap(lambda x, transforms: None, w)
    return w


def main():
    data = jnp.asarray(np.random.default_rng(0).standard_normal((256, 16)).astype(np.float32))
    w = jnp.ones(16)
    train(w, data)                       # compile outside the measured block
    hcb.barrier_wait()                   # and let its tap arrive before counting starts

    with collect_callback_stats(wait=True) as stats:
        train(w, data)
    print(stats)                         # the table

    row = stats["host_norm"][0]          # the same as data
    print(f"\nhost_norm: {row.calls} calls, mean {row.mean_s * 1e6:.1f} us, "
          f"{row.bytes_in // row.calls} bytes in per call, flavour {row.flavour}")
    print("as dicts:", [d["name"] for d in stats.as_dicts()])


if __name__ == "__main__":
    main()

"""Progress bars for compiled loops: olympus.experimental.progress_bar.

The loop never waits for the host: the bar hears from it through non-blocking
host_callback taps, at most ~100 times per loop run however many iterations
it has, and the host redraws at most 10 times a second. On a terminal the bar
is redrawn in place with rate and ETA; piped into a file it writes plain
lines at every 10%.

Run: PYTHONPATH=python python3 examples/progress_bar.py
"""
import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import progress, progress_bar


def step(i, x):
    return jnp.sin(x) * 0.5 + jnp.cos(x) * 0.25


def main():
    x = jnp.ones(64)

    # 1. keyword form: a drop-in fori_loop; the loop runs in chunks, so an
    #    iteration costs what it costs without the bar
    f = olympus.jit(lambda x: progress.fori_loop(0, 1_000_000, step, x, progress="relax"))
    y = f(x)

    # 2. decorator on the body of lax.fori_loop: the body sends a tap every
    #    total/100 iterations (a branch on the others)
    @progress_bar(200_000, desc="decorated")
    def body(i, x):
        return step(i, x)
    y2 = olympus.jit(lambda x: lax.fori_loop(0, 200_000, body, x))(x)

    # 3. scan and vmap: one bar for the whole batch, which the text mentions
    def epoch(w, batch):
        w = w - 0.01 * (w - batch.mean())
        return w, (w ** 2).sum()
    data = jnp.asarray(np.random.default_rng(0).standard_normal((5000, 8)).astype(np.float32))
    ws, losses = olympus.vmap(lambda w: progress.scan(epoch, w, data, progress="epochs"))(
        jnp.zeros((4, 3)))

    # 4. nested loops: one line per level; the inner bar restarts each time
    def outer(i, x):
        return progress.fori_loop(0, 50_000, step, x, progress="inner")
    y3 = olympus.jit(lambda x: progress.fori_loop(0, 5, outer, x, progress="outer"))(x)

    # 5. a while loop without a known total shows the count and the rate
    n = progress.while_loop(lambda c: c[1] > 1e-3, lambda c: (c[0] + 1, c[1] * 0.9999),
                            (0, jnp.float32(1.0)), progress="converge")[0]

    from olympus.experimental import host_callback
    host_callback.barrier_wait()  # every update drawn before the summary
    print(f"done: y[0]={float(y[0]):.4f} y2[0]={float(y2[0]):.4f} ws={ws.shape} "
          f"losses={losses.shape} y3[0]={float(y3[0]):.4f} while: {int(n)} iterations")


if __name__ == "__main__":
    main()

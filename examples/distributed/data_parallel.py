"""Data-parallel training with olympus.pmap, on one process or on several.

A 2-layer MLP (8 -> 32 -> 1, tanh) learns a smooth function of 8 inputs from a
fixed synthetic dataset (NumPy, seed 0). The parameters are replicated; each
step splits the global batch of 64 rows over every global device (16 rows
each), computes the gradient of the mean squared error on its rows, and
averages gradients and loss with `lax.pmean` inside the pmap, so every
device applies the same SGD update. Process 0 prints the loss per step.

    # one process, 4 CPU devices (set here when OLYMPUS_NUM_CPU_DEVICES is unset)
    PYTHONPATH=python python3 examples/distributed/data_parallel.py

    # two processes with 2 devices each: the same 4 global devices, the same
    # loss curve to rounding (add --oversubscribe on a small machine)
    OLYMPUS_NUM_CPU_DEVICES=2 PYTHONPATH=python mpirun -n 2 \\
        python3 examples/distributed/data_parallel.py

Under mpirun each process passes its own rows (its devices' shards of the
global batch) and gets back its devices' part; the collectives cross
processes over MPI. tests/python/test_data_parallel.py compares the two runs.
"""
import os

UNDER_MPIRUN = any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"))
os.environ.setdefault("OLYMPUS_NUM_CPU_DEVICES", "2" if UNDER_MPIRUN else "4")

import numpy as np  # noqa: E402

import olympus  # noqa: E402
import olympus.numpy as jnp  # noqa: E402
from olympus import lax  # noqa: E402

GLOBAL_BATCH = 64
STEPS = 40
LEARNING_RATE = 0.3


def dataset(n=GLOBAL_BATCH, d=8, seed=0):
    """(x, y): n rows of d standard-normal features and a smooth target."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = rng.standard_normal((d, 1)).astype(np.float32) / np.sqrt(d)
    y = np.sin(2 * x @ w) + 0.05 * rng.standard_normal((n, 1)).astype(np.float32)
    return x, y.astype(np.float32)


def init_params(d=8, hidden=32, seed=1):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.standard_normal((d, hidden)).astype(np.float32) / np.sqrt(d)),
            jnp.zeros((hidden,), jnp.float32),
            jnp.asarray(rng.standard_normal((hidden, 1)).astype(np.float32) / np.sqrt(hidden)),
            jnp.zeros((1,), jnp.float32))


def loss_fn(params, x, y):
    w1, b1, w2, b2 = params
    pred = jnp.tanh(x @ w1 + b1) @ w2 + b2
    return jnp.mean((pred - y) ** 2)


def step(params, x, y):
    """One SGD step on this device's rows; gradients averaged over devices."""
    loss, grads = olympus.value_and_grad(loss_fn)(params, x, y)
    grads = lax.pmean(grads, "batch")
    params = tuple(p - LEARNING_RATE * g for p, g in zip(params, grads))
    return params, lax.pmean(loss, "batch")


def main():
    if UNDER_MPIRUN:
        olympus.distributed.initialize()
    me, n_dev, n_local = olympus.process_index(), olympus.device_count(), \
        olympus.local_device_count()
    x, y = dataset()
    rows = GLOBAL_BATCH // n_dev  # per device
    # this process's devices' shards: global devices me*L .. me*L+L-1
    lo, hi = me * n_local * rows, (me + 1) * n_local * rows
    xs = x[lo:hi].reshape(n_local, rows, -1)
    ys = y[lo:hi].reshape(n_local, rows, -1)
    p_step = olympus.pmap(step, axis_name="batch", in_axes=(None, 0, 0))
    params = init_params()
    if me == 0:
        print(f"{olympus.process_count()} process(es), {n_dev} devices, "
              f"{rows} rows per device")
    for i in range(STEPS):
        params, loss = p_step(params, xs, ys)
        params = tuple(p[0] for p in params)  # replicated: any device's copy
        if me == 0:
            print(f"step {i:3d}  loss {float(loss[0]):.6f}", flush=True)


if __name__ == "__main__":
    main()

"""A small multilayer perceptron trained with plain SGD: olympus end to end.

The task: three interleaved spiral arms in the plane (900 points, made with
NumPy from a fixed seed), one class per arm. The network is 2 -> 64 -> 64 -> 3
with ReLU, its weights drawn by `olympus.nn.initializers.he_normal` (biases
zero) from `olympus.random` keys; the loss is the mean negative log-likelihood
of `nn.log_softmax`. One SGD step is `olympus.value_and_grad` of the loss with
the update applied inside one `olympus.jit` program. Everything is a pure
function of the key, so every run prints the same numbers.

    PYTHONPATH=python OLYMPUS_EXT_DIR=build python3 examples/mlp.py

`make test` runs it; tests/python/test_examples.py checks the final loss.
"""
import time

import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import nn, random

SIZES = (2, 64, 64, 3)
STEPS = 800
LEARNING_RATE = 0.3


def spirals(n_per_class=300, classes=3, seed=0):
    """(x, labels): classes spiral arms of n_per_class noisy points each."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, n_per_class)
        theta = 3 * np.pi * r + 2 * np.pi * c / classes + 0.2 * rng.standard_normal(n_per_class)
        xs.append(np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1))
        ys.append(np.full(n_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int32)


def init_params(key, sizes=SIZES):
    """[(w, b), ...]: He-normal weights for ReLU layers, zero biases."""
    w_init = nn.initializers.he_normal()
    keys = random.split(key, len(sizes) - 1)
    return [(w_init(k, (n_in, n_out)), nn.initializers.zeros(k, (n_out,)))
            for k, n_in, n_out in zip(keys, sizes[:-1], sizes[1:])]


def predict(params, x):
    """Log-probabilities of the classes for a batch of points x."""
    for w, b in params[:-1]:
        x = nn.relu(x @ w + b)
    w, b = params[-1]
    return nn.log_softmax(x @ w + b)


def loss(params, x, labels):
    """The mean negative log-likelihood of the labels."""
    logp = predict(params, x)
    return -jnp.mean(jnp.sum(logp * nn.one_hot(labels, SIZES[-1]), axis=-1))


@olympus.jit
def sgd_step(params, x, labels):
    value, grads = olympus.value_and_grad(loss)(params, x, labels)
    params = olympus.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
    return params, value


def accuracy(params, x, labels):
    return float(jnp.mean(jnp.argmax(predict(params, x), axis=-1) == labels))


def main():
    x, labels = spirals()
    params = init_params(random.PRNGKey(0))
    start = time.perf_counter()
    for step in range(STEPS):
        params, value = sgd_step(params, x, labels)
        if step % 100 == 0:
            print(f"step {step:4d}  loss {float(value):.4f}")
    final = float(loss(params, x, labels))
    print(f"trained {STEPS} steps in {time.perf_counter() - start:.2f} s")
    print(f"accuracy {accuracy(params, x, labels):.3f}")
    print(f"final loss {final:.4f}")


if __name__ == "__main__":
    main()

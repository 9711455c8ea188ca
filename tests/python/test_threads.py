"""Big kernels on the thread pool (OLYMPUS_NUM_THREADS): results match NumPy,
and are the same bytes whatever the thread count; big buffers recycled by the
buffer pool never change an array a user still holds. Each thread count runs
in a subprocess (the pool's size is fixed at first use)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = (1 << 18) + 13  # above the split threshold (64K elements); odd, so shares end mid-vector


def _data():
    g = np.random.default_rng(0)
    x = g.standard_normal(N).astype(np.float32)
    y = g.standard_normal(N).astype(np.float32)
    m = g.standard_normal((512, 600)).astype(np.float32)
    idx = g.integers(0, N, size=N // 2).astype(np.int32)
    return x, y, m, idx


# (name, olympus function, NumPy function, tolerance); every one splits
CASES = [
    ("chain", lambda x, y, m, i: jnp.sin(x) ** 2 + jnp.cos(x) * y,
     lambda x, y, m, i: np.sin(x) ** 2 + np.cos(x) * y, 1e-5),
    ("where", lambda x, y, m, i: jnp.where(x > y, x, y * 2),
     lambda x, y, m, i: np.where(x > y, x, y * 2), 0),
    ("transpose", lambda x, y, m, i: m.T + 1, lambda x, y, m, i: m.T + 1, 0),
    ("broadcast", lambda x, y, m, i: m + m[0], lambda x, y, m, i: m + m[0], 0),
    ("slice", lambda x, y, m, i: x[3:-5:2] * 2, lambda x, y, m, i: x[3:-5:2] * 2, 0),
    ("concat", lambda x, y, m, i: jnp.concatenate([m, m * 2], axis=1),
     lambda x, y, m, i: np.concatenate([m, m * 2], axis=1), 0),
    ("argmax", lambda x, y, m, i: jnp.argmax(m, axis=1), lambda x, y, m, i: np.argmax(m, axis=1), 0),
    ("cumsum", lambda x, y, m, i: jnp.cumsum(m, axis=1), lambda x, y, m, i: np.cumsum(m, axis=1),
     1e-4),
    ("sort", lambda x, y, m, i: jnp.sort(m, axis=1), lambda x, y, m, i: np.sort(m, axis=1), 0),
    ("gather", lambda x, y, m, i: x[i], lambda x, y, m, i: x[i], 0),
    ("astype", lambda x, y, m, i: (x * 100).astype(jnp.int32),
     lambda x, y, m, i: (x * 100).astype(np.int32), 0),
    # leading axes reduced into the trailing ones: shares of columns (600: not whole vectors)
    ("sum0", lambda x, y, m, i: jnp.sum(m, axis=0), lambda x, y, m, i: m.sum(0), 1e-4),
    ("max0nan", lambda x, y, m, i: jnp.max(jnp.where(m > 2.5, jnp.nan, m), axis=0),
     lambda x, y, m, i: np.max(np.where(m > 2.5, np.nan, m), axis=0), 0),
    ("min01", lambda x, y, m, i: jnp.min(m.reshape(8, 64, 600), axis=(0, 1)),
     lambda x, y, m, i: m.min(0), 0),
    ("prod0", lambda x, y, m, i: jnp.prod(1 + m / 1000, axis=0),
     lambda x, y, m, i: np.prod(1 + m / 1000, axis=0), 1e-4),
]


@pytest.mark.parametrize("name,ofn,nfn,tol", CASES, ids=[c[0] for c in CASES])
def test_big_kernels_match_numpy(name, ofn, nfn, tol):
    x, y, m, idx = _data()
    got = np.asarray(olympus.jit(ofn)(jnp.asarray(x), jnp.asarray(y), jnp.asarray(m),
                                      jnp.asarray(idx)))
    want = nfn(x, y, m, idx)
    assert got.shape == want.shape
    if tol:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


_DIGESTS = """
    import hashlib, sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    import olympus, olympus.numpy as jnp
    from test_threads import CASES, _data
    x, y, m, idx = _data()
    args = [jnp.asarray(a) for a in (x, y, m, idx)]
    for name, ofn, _, _ in CASES:
        out = np.ascontiguousarray(np.asarray(olympus.jit(ofn)(*args)))
        print(name, hashlib.sha256(out.tobytes()).hexdigest())
"""


def _digests(threads):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OLYMPUS_NUM_THREADS=threads)
    body = textwrap.dedent(_DIGESTS.format(tests=os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_same_bytes_for_every_thread_count():
    one = _digests("1")
    assert len(one) == len(CASES)
    assert _digests("3") == one
    assert _digests("8") == one


def test_held_outputs_survive_buffer_reuse():
    """Outputs a caller holds keep their values while later calls of the same
    big program run (their blocks are recycled only once released)."""
    f = olympus.jit(lambda a: jnp.sin(a) * 2 + a)
    xs = [np.full(1 << 20, v, np.float32) for v in (0.5, 1.5, -2.0)]
    held = [f(jnp.asarray(v)) for v in xs]
    for _ in range(5):
        f(jnp.asarray(xs[0]))  # released at once: its blocks are reused
    for v, h in zip(xs, held):
        np.testing.assert_allclose(np.asarray(h), np.sin(v) * 2 + v, rtol=1e-6)
    views = [np.asarray(h) for h in held]
    del held
    for _ in range(3):
        f(jnp.asarray(xs[1]))
    for v, view in zip(xs, views):  # a NumPy view keeps its array alive
        np.testing.assert_allclose(view, np.sin(v) * 2 + v, rtol=1e-6)

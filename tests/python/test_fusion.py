"""Fusion and CSE are executable details (src/exec/fuse.c): results are the
same bits with them off (OLYMPUS_FUSION=0 OLYMPUS_CSE=0, read once per
process, so the other side runs in a subprocess), make_jaxpr shows the program
as traced, and OLYMPUS_DEBUG_FUSION=1 prints the groups."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import lax

HERE = os.path.dirname(os.path.abspath(__file__))
OFF = {"OLYMPUS_FUSION": "0", "OLYMPUS_CSE": "0"}

_rng = np.random.default_rng(7)
# 4551 elements: several tiles of 2048 and a short last one (groups under 4096
# elements are not fused).
X = _rng.standard_normal((3, 37, 41)).astype(np.float32)
# with zeros, infinities and NaNs (both signs) for the linear chains
XS = X.copy()
XS.flat[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -3e38]
Y = _rng.standard_normal((3, 37, 41)).astype(np.float32)
ROW = _rng.standard_normal((41,)).astype(np.float32)
I32 = _rng.integers(-1000, 1000, (5000,)).astype(np.int32)
H16 = _rng.standard_normal((6000,)).astype(np.float16)
Z64 = (_rng.standard_normal((5000,)) + 1j * _rng.standard_normal((5000,))).astype(np.complex64)
W = _rng.standard_normal((41, 16)).astype(np.float32)


def _unary_float():
    sys.path.insert(0, HERE)
    import test_numpy
    return test_numpy.UNARY_FLOAT


def _chain32(x):
    for _ in range(16):
        x = x * 0.999 + 0.001
    return x


def _programs():
    """name -> (function, arguments): programs with chains, broadcasts,
    reductions between chains, grads (duplicated work for CSE), every kind
    of elementwise value."""
    progs = {
        "chain": (lambda x, y: jnp.sin(x) ** 2 + jnp.cos(x) * y, (X, Y)),
        "affine": (lambda x, y: (x * 2 + 1) * y - x, (X, Y)),
        "bias_tanh": (lambda x, b: jnp.tanh(x + b), (X, ROW)),
        "leaky_relu": (lambda x: jnp.where(x > 0, x, 0.1 * x), (X,)),
        "softmax": (lambda x: olympus.nn.softmax(x, axis=-1), (X,)),
        "norm": (lambda x: (x - x.mean(axis=-1, keepdims=True)) / jnp.sqrt(x.var(axis=-1, keepdims=True) + 1e-5), (X,)),
        "grad_sincos": (olympus.grad(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x))), (X,)),
        "grad_mlp": (olympus.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)), (W, X[0])),
        "int_chain": (lambda i: ((i * 3 + 7) // 5) % 11 - (i >> 2) ^ (i & 0xF0), (I32,)),
        "compare": (lambda x, y: jnp.where((x < y) & (x > -1), x * y, jnp.maximum(x, y)), (X, Y)),
        "half": (lambda h: jnp.exp(h * 0.5) - h ** 2 + jnp.float16(1), (H16,)),
        "complex": (lambda z: jnp.conj(z * (1 + 2j)) * z + jnp.exp(z) / 3, (Z64,)),
        "convert": (lambda x: (x * 100).astype(jnp.int32).astype(jnp.float32) / 100 + x, (X,)),
        "vmap": (olympus.vmap(lambda x, b: jnp.logaddexp(x, b) * jnp.tanh(b), in_axes=(0, None)), (X, ROW)),
        "empty": (lambda x: jnp.sin(x) * 2 + 1, (np.zeros((0, 3), np.float32),)),
        "scalar": (lambda x: jnp.sin(x) * jnp.cos(x) + 1, (np.float32(0.25),)),
        "erf": (lambda x: olympus.scipy.special.erf(x) * jnp.exp(-x * x), (X,)),
        "scan": (lambda x: lax.scan(lambda c, v: (c * 0.5 + jnp.sin(v), c * v), x[0], x)[0], (X,)),
        # linear chains (value op scalar, in registers): every op, both operand orders
        "chain32": (_chain32, (XS,)),
        "chain_ops": (lambda x, s: -(3 - (2 / (x / s + 0.5) * 1.5 - s)) * s - 1, (XS, np.float32(0.7))),
    }
    for name, data in _unary_float():
        fn = getattr(jnp, name)
        progs[f"unary_{name}"] = (lambda d, fn=fn: fn(d) * 2 + 1, (np.tile(data, (1, 700)).astype(np.float32),))
    return progs


def _results():
    out = {}
    for name, (fn, args) in _programs().items():
        r = olympus.jit(fn)(*[jnp.asarray(a) for a in args])
        out[name] = np.asarray(r)
    return out


def _subprocess(body, env):
    e = dict(os.environ)
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(HERE, "..", "..", "python"), HERE,
                                       e.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=300, env=e, cwd=HERE)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_results_identical_without_fusion_and_cse(tmp_path):
    path = tmp_path / "off.npz"
    _subprocess(f"""
        import numpy as np, test_fusion
        np.savez({str(path)!r}, **test_fusion._results())
        """, OFF)
    off = np.load(path)
    on = _results()
    assert set(off.files) == set(on)
    for name, got in on.items():
        want = off[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        # the same bits (NaNs included)
        assert got.tobytes() == want.tobytes(), name


def test_numpy_suite_passes_without_fusion_and_cse():
    r = _subprocess("""
        import sys, pytest
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "test_numpy.py"]))
        """, OFF)
    assert " passed" in r.stdout and "failed" not in r.stdout


def test_make_jaxpr_is_unchanged():
    # the JVP of sin emits its own cos: CSE merges them in the executable only
    f = olympus.grad(lambda x: jnp.sum(jnp.sin(x) * jnp.cos(x)))
    text = str(olympus.make_jaxpr(f)(X))
    assert text.count("= cos a") == 2 and text.count("= sin a") == 2
    assert "fused" not in text


def test_debug_fusion_prints_groups():
    r = _subprocess("""
        import numpy as np, olympus, olympus.numpy as jnp
        x = np.ones(5000, np.float32)
        olympus.jit(lambda x, y: jnp.sin(x) ** 2 + jnp.cos(x) * y)(x, x).block_until_ready()
        """, {"OLYMPUS_DEBUG_FUSION": "1"})
    assert "5 equations -> 1 steps" in r.stderr
    assert ("sin#0(in->temp) integer_pow#1(temp->temp) cos#2(in->temp) mul#3(temp,in->temp) "
            "add#4(temp,temp->out)") in r.stderr
    assert " chain:" not in r.stderr
    # sin, cos, integer_pow, mul, add on f32 with no broadcast: a register program
    assert "scalars=0 bcasts=0 inplace regs: sin#0" in r.stderr


def test_linear_chains_run_in_registers():
    # value op scalar, op after op: one group run as a chain (and matching
    # NumPy's float32 arithmetic op for op, tail and all)
    r = _subprocess("""
        import numpy as np, olympus, olympus.numpy as jnp, test_fusion
        x = test_fusion.XS.ravel()[:4103]
        got = np.asarray(olympus.jit(test_fusion._chain32)(x))
        want = x.copy()
        for _ in range(16):
            want = want * np.float32(0.999) + np.float32(0.001)
        assert got.tobytes() == want.tobytes()
        """, {"OLYMPUS_DEBUG_FUSION": "1"})
    assert "32 fused in 1 groups" in r.stderr
    assert "scalars=32 bcasts=0 inplace chain:" in r.stderr

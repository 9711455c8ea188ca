"""The CPU kernels' instruction level (olympus._core.cpu_info): OLYMPUS_CPU_LEVEL
picks any supported level, never one above the CPU's best (a message on stderr,
the best used), and every level computes the same results (exact operations
bit for bit, SLEEF functions within their 1-ULP bound). Each level runs in a
subprocess: the level is chosen when the library loads."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import olympus

INFO = olympus._core.cpu_info()

# One program over the level-sensitive kernels; prints its results as JSON.
_PROBE = """
    import json
    import numpy as np
    import olympus
    import olympus.numpy as jnp
    x = np.linspace(-30, 30, 1037).astype(np.float32)
    y = np.cos(np.arange(1037, dtype=np.float32))
    m = np.arange(2 * 37 * 29, dtype=np.float32).reshape(2, 37, 29) / 7 - 100
    z = np.linspace(-3, 3, 5003).astype(np.float32)  # fused, a linear chain in registers
    f = olympus.jit(lambda x, y, m, z: (jnp.sin(x), jnp.exp(x / 4), jnp.tanh(x), x * y + y,
                                      jnp.maximum(x, y), x < y, m.sum(axis=0),
                                      m.max(axis=(0, 1)), m.min(axis=1), m.sum(axis=2),
                                      jnp.where(x < y, x, y), x.astype(jnp.int32),
                                      -(2 / (z * 0.999 + 0.5) - 1.25) * 3))
    out = [np.asarray(o) for o in f(x, y, m, z)]
    print(json.dumps({"info": olympus._core.cpu_info(),
                      "out": [[o.dtype.str, o.tolist()] for o in out]}))
"""


def _run(level, body=_PROBE):
    env = dict(os.environ)
    env.pop("OLYMPUS_NO_SIMD", None)
    if level is None:
        env.pop("OLYMPUS_CPU_LEVEL", None)
    else:
        env["OLYMPUS_CPU_LEVEL"] = level
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_info_is_consistent():
    assert INFO["levels"][0] == "portable"
    assert INFO["levels"][-1] == INFO["max_level"]
    assert INFO["level"] in INFO["levels"]
    want = os.environ.get("OLYMPUS_CPU_LEVEL")
    if want in INFO["levels"]:
        assert INFO["level"] == want


def test_every_level_computes_the_same():
    ref, _ = _run("portable")
    assert ref["info"]["level"] == "portable"
    for level in INFO["levels"][1:]:
        got, err = _run(level)
        assert got["info"]["level"] == level
        assert err == ""
        for i, ((dt, a), (_, b)) in enumerate(zip(ref["out"], got["out"])):
            a, b = np.array(a, dtype=dt), np.array(b, dtype=dt)
            if i < 3:  # sin, exp, tanh: each within 1 ULP of the truth, so 2 of each other
                np.testing.assert_array_max_ulp(a, b, maxulp=4)
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"output {i} at {level}")


def test_default_is_the_best_level():
    got, err = _run(None)
    assert got["info"]["level"] == INFO["max_level"]
    assert err == ""


def test_unknown_level_says_so_and_uses_the_best():
    got, err = _run("avx1024")
    assert got["info"]["level"] == INFO["max_level"]
    assert "OLYMPUS_CPU_LEVEL=avx1024 is not a level" in err


@pytest.mark.skipif(INFO["max_level"] == "avx512", reason="this CPU has every level")
def test_level_above_the_cpu_falls_back():
    got, err = _run("avx512")
    assert got["info"]["level"] == INFO["max_level"]
    assert f"supports at most {INFO['max_level']}" in err

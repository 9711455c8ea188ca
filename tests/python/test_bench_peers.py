"""bench/run.py holds its peers to olympus's forced CPU level (issue 14):
NumPy's dispatch, Numba's CPU and the C floors' -march follow
OLYMPUS_CPU_LEVEL, so an AVX2 row reads as on an AVX2-only CPU."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def _flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _probe(level, extra_env=None, floor=False):
    code = (
        "import importlib.util, json, os, sys\n"
        "assert 'numpy' not in sys.modules\n"
        "spec = importlib.util.spec_from_file_location('olybench_run', sys.argv[1])\n"
        "run = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(run)\n"
        "from numpy.core._multiarray_umath import __cpu_features__ as f\n"
        "out = {'avx512f': bool(f.get('AVX512F')), 'avx2': bool(f.get('AVX2')),\n"
        "       'numba': os.environ.get('NUMBA_CPU_NAME'), 'march': run.floor_march(),\n"
        "       'peers': run.peers_text(), 'level': run.PEER_LEVEL}\n"
        "if len(sys.argv) > 2:\n"
        "    import numpy as np\n"
        "    try:\n"
        "        fl = run.build_floor()\n"
        "    except run.NotAvailable as e:\n"
        "        out['floor'] = 'n/a: ' + str(e)\n"
        "    else:\n"
        "        x = np.linspace(-50, 50, 4096, dtype=np.float32)\n"
        "        y = np.linspace(1, 2, 4096, dtype=np.float32)\n"
        "        o = np.full_like(x, np.nan)\n"
        "        fl.chain_sleef(x, y, o)\n"
        "        want = np.sin(x.astype(np.float64)) ** 2 + np.cos(x.astype(np.float64)) * y\n"
        "        out['floor'] = float(np.nanmax(np.abs(o - want))) if not np.isnan(o).all() else 'nan'\n"
        "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("NPY_DISABLE_CPU_FEATURES", "NUMBA_CPU_NAME", "OLYMPUS_NO_SIMD")}
    env["OLYMPUS_CPU_LEVEL"] = level
    env.update(extra_env or {})
    args = [sys.executable, "-c", code, os.path.join(ROOT, "bench", "run.py")]
    if floor:
        args.append("floor")
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    import json
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


needs_avx512 = pytest.mark.skipif(not {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= _flags(),
                                  reason="the CPU has no AVX-512: nothing to force")


@needs_avx512
def test_forced_avx2_limits_numpy_numba_and_floor():
    got, err = _probe("avx2")
    assert not got["avx512f"], got          # NumPy's AVX-512 loops are off
    assert got["avx2"], got                 # ... and its AVX2 ones still on
    assert got["numba"] == "haswell"
    assert got["march"] == "haswell"
    assert got["level"] == "avx2"
    assert "NumPy dispatch AVX2" in got["peers"] and "-march=haswell" in got["peers"]
    assert "cannot disable" not in err      # no name NumPy refuses


@needs_avx512
def test_best_level_leaves_peers_native():
    got, _ = _probe("avx512")
    assert got["avx512f"] and got["numba"] is None and got["march"] == "native", got
    assert "NumPy dispatch AVX-512" in got["peers"]


@needs_avx512
def test_caller_setting_wins():
    got, _ = _probe("avx2", {"NPY_DISABLE_CPU_FEATURES": "", "NUMBA_CPU_NAME": "skylake"})
    assert got["avx512f"] and got["numba"] == "skylake", got


@needs_avx512
def test_avx2_floor_chain_sleef_matches_numpy():
    got, _ = _probe("avx2", floor=True)
    if isinstance(got["floor"], str) and got["floor"].startswith("n/a"):
        pytest.skip(got["floor"])
    assert got["floor"] != "nan", got       # the AVX2 build computes (None was AVX-512 only)
    assert got["floor"] < 1e-5, got

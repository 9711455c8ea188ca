"""The issue-16 examples run and print what they say (examples/gufunc_callback.py,
examples/callback_stats.py, examples/progress_bar.py)."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(name):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def test_gufunc_example():
    out, _ = run("gufunc_callback.py")
    assert "vmap over 1000 vectors: 1 host call, shapes ((1, 3, 4), (1000, 4))" in out
    assert ("nested vmap -> (5, 1000, 3): 1 host call, shapes ((5, 1, 3, 4), (1, 1000, 4))"
            in out)
    assert "caught: pure_callback: vmap_method='signature:(m,n),(m)->(m)': core dimension 'm'" in out


def test_callback_stats_example():
    out, _ = run("callback_stats.py")
    assert re.search(r"callback statistics: 4 callback\(s\), 42 call\(s\)", out), out
    assert re.search(r"^host_norm +pure_callback +cpu:0 +20 +0 ", out, re.M)
    assert re.search(r"^host_log +io_callback\(ordered\) +cpu:0 +20 +0 ", out, re.M)
    assert re.search(r"^<lambda> +id_tap +cpu:0 +1 +0 ", out, re.M)
    assert "host_norm: 20 calls" in out and "16384 bytes in per call" in out


def test_progress_bar_example():
    out, err = run("progress_bar.py")
    # not a terminal: plain lines on stderr
    for desc, total in (("relax", 1000000), ("decorated", 200000), ("outer", 5),
                        ("epochs", 5000)):
        assert f"{desc}: 100% {total}/{total} [" in err, err
    assert "(batch of 4)" in err
    assert re.search(r"^converge: \d+ it \[", err, re.M)
    assert "done: y[0]=" in out


def test_callback_context_example():
    out, _ = run("callback_context.py")
    lines = re.findall(r"pure_callback on TFRT_CPU_(\d), axis_index=(\{[^}]*\}), "
                       r"batch_index=\(([\d, ]*)\): norm of \[([\d., ]+)\]", out)
    assert len(lines) == 12, out
    nested, pmapped = lines[:4], lines[4:]
    for dev, axes, batch, vals in nested:      # x[i, j] = [4i + 2j, 4i + 2j + 1]
        i, j = (int(t) for t in batch.split(","))
        assert dev == "0" and axes == "{}" and vals == f"{4.0 * i + 2 * j}, {4.0 * i + 2 * j + 1}"
    for dev, axes, batch, vals in pmapped:     # member d on device d, element b of x[d]
        d, b = int(dev), int(batch.strip(", "))
        assert axes == f"{{'devices': {d}}}"
        assert vals == f"{4.0 * d + 2 * b}, {4.0 * d + 2 * b + 1}"
    assert sorted((int(d), b) for d, _, b, _ in pmapped) == \
        [(d, f"{b},") for d in range(4) for b in range(2)]
    assert "outside a host call: None" in out

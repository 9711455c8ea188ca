"""olympus.distributed: processes under mpirun (OpenMPI). Each mpirun test
starts two processes in a subprocess (about 0.3 s of MPI start-up) running a
short script that prints one JSON line per process; skipped where mpirun is
absent or olympus was built without MPI. Root may run mpirun through the
OMPI_ALLOW_RUN_AS_ROOT variables set here."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import olympus
from olympus._src import distributed as dist

MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not olympus._core.mpi_available(),
    reason="mpirun is absent or olympus was built without MPI (libopenmpi-dev, openmpi-bin)")


# Defined in every process mpirun starts: _report(obj) hands obj (a dict with
# "rank") to the test through a file per process (mpirun's forwarding of two
# processes' stdout may interleave long lines).
_PRELUDE = """
def _report(obj):
    import json as _j, os as _o
    d = _o.environ.get("OLY_TEST_RESULTS")
    text = _j.dumps(obj) + "\\n"
    if not d:
        _o.write(1, text.encode())
        return
    with open(_o.path.join(d, _o.environ.get("OMPI_COMM_WORLD_RANK", "0") + ".json"), "a") as f:
        f.write(text)
"""


def mpirun(code, n=2, timeout=60, env=None, per_rank_env=None):
    """Runs code in n processes; returns (returncode, stdout, stderr, seconds).
    What the processes _report comes after stdout."""
    e = dict(os.environ)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1",
              "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    e.update(env or {})
    code = _PRELUDE + code
    with tempfile.TemporaryDirectory() as results:
        e["OLY_TEST_RESULTS"] = results
        if per_rank_env is None:
            cmd = [MPIRUN, "-n", str(n), "--oversubscribe", sys.executable, "-c", code]
        else:  # MPMD: one app context per process, each with its own variables
            cmd = [MPIRUN, "--oversubscribe"]
            for i, extra in enumerate(per_rank_env):
                cmd += ([":"] if i else []) + ["-n", "1"]
                for k, v in extra.items():
                    cmd += ["-x", f"{k}={v}"]
                cmd += [sys.executable, "-c", code]
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
        took = time.monotonic() - t0
        reported = "".join(open(os.path.join(results, f)).read()
                           for f in sorted(os.listdir(results)))
    return r.returncode, r.stdout + "\n" + reported, r.stderr, took


def rows(out):
    """The JSON object of every process, by process index, found anywhere in
    the output: mpirun may forward two processes' lines without the newline
    between them."""
    dec, got, i = json.JSONDecoder(), {}, out.find("{")
    while i >= 0:
        try:
            obj, end = dec.raw_decode(out, i)
        except ValueError:
            end = i + 1
        else:
            if isinstance(obj, dict) and "rank" in obj:
                got[obj["rank"]] = obj
        i = out.find("{", end)
    return got


def test_initialize_without_mpirun_names_mpirun():
    assert not olympus.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="mpirun"):
        olympus.distributed.initialize()
    assert not olympus.distributed.is_initialized()
    assert olympus.process_index() == 0 and olympus.process_count() == 1


def test_single_process_devices_and_transport():
    assert olympus.devices() == olympus.local_devices()
    assert olympus.device_count() == olympus.local_device_count() == len(olympus.devices())
    assert all(d.process_index == 0 for d in olympus.devices())
    assert olympus.local_devices(process_index=1) == []
    with pytest.raises(RuntimeError, match="not initialized|built without MPI"):
        dist._allreduce_for_test(np.ones(3, np.float32))
    olympus.distributed.shutdown()  # not initialized: nothing to do


SCRIPT = r"""
import json, numpy as np, olympus, olympus.numpy as jnp
from olympus._src import distributed as dist
olympus.distributed.initialize(num_processes=2)
me, n = olympus.process_index(), olympus.process_count()
out = {"rank": me, "count": n, "init": olympus.distributed.is_initialized(),
       "devices": [(d.id, d.process_index) for d in olympus.devices()],
       "local": [d.id for d in olympus.local_devices()],
       "other": [d.id for d in olympus.local_devices(process_index=1 - me)],
       "device_count": olympus.device_count(), "local_count": olympus.local_device_count()}
try:
    olympus.distributed.initialize()
except RuntimeError as e:
    out["again"] = str(e)
try:
    olympus.device_put(jnp.ones(2), olympus.local_devices(process_index=1 - me)[0])
except ValueError as e:
    out["put_other"] = str(e)
a = olympus.device_put(jnp.arange(3.0), olympus.local_devices()[1])
out["put_local"] = [a.device.id, float((a * 2).sum())]
# the transport against NumPy: process r holds base + r
bad = []
rng = np.random.default_rng(0)
for dt in ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]:
    base = rng.integers(-20, 20, size=(3, 5))
    parts = [(base + r) % 2 if dt == "bool" else np.abs(base) + r if dt[0] == "u" else base + r
             for r in range(n)]
    parts = [(p + 1j * p).astype(dt) if dt.startswith("complex") else p.astype(dt) for p in parts]
    for op, f in [("sum", np.sum), ("max", np.max), ("min", np.min)]:
        if dt.startswith("complex") and op != "sum":
            continue
        want = f(np.stack(parts), axis=0)
        if dt == "bool" and op == "sum":
            want = np.any(np.stack(parts), axis=0)
        got = dist._allreduce_for_test(parts[me], op)
        if got.dtype != want.astype(dt).dtype or got.shape != want.shape or not np.array_equal(got, want.astype(dt)):
            bad.append((dt, op, str(got), str(want)))
try:
    dist._allreduce_for_test(np.ones(2, np.complex64), "max")
except TypeError as e:
    out["complex_max"] = str(e)
out["bad"] = bad
_report(out)
"""


@needs_mpi
def test_two_processes_devices_and_transport_vs_numpy():
    rc, out, err, _ = mpirun(SCRIPT, env={"OLYMPUS_NUM_CPU_DEVICES": "2"})
    assert rc == 0, err[-3000:]
    got = rows(out)
    assert sorted(got) == [0, 1]
    for me, r in got.items():
        assert r["count"] == 2 and r["init"]
        assert r["devices"] == [[0, 0], [1, 0], [2, 1], [3, 1]]
        assert r["local"] == [2 * me, 2 * me + 1]
        assert r["other"] == [2 * (1 - me), 2 * (1 - me) + 1]
        assert r["device_count"] == 4 and r["local_count"] == 2
        assert "only be called once" in r["again"]
        assert f"belongs to process {1 - me}" in r["put_other"]
        assert r["put_local"] == [2 * me + 1, 6.0]
        assert "complex numbers have no order" in r["complex_max"]
        assert r["bad"] == []


FAIL_SCRIPT = r"""
import json, time, numpy as np, olympus
from olympus._src import distributed as dist
olympus.distributed.initialize()
me = olympus.process_index()
dist._allreduce_for_test(np.ones(2, np.float32))  # both are up

def host(x):
    raise ValueError("boom in process 1")

if me == 1:  # an uncaught exception ends process 1: its peers must not hang
    f = olympus.jit(lambda x: olympus.pure_callback(
        host, olympus.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential"))
    f(np.ones(3, np.float32)).block_until_ready()
t = time.monotonic()
try:
    dist._allreduce_for_test(np.ones(2, np.float32))
except RuntimeError as e:
    _report({"rank": me, "error": str(e), "type": type(e).__name__,
             "seconds": time.monotonic() - t})
"""


@needs_mpi
def test_a_process_failing_in_a_callback_fails_its_peers_without_hanging():
    rc, out, err, secs = mpirun(FAIL_SCRIPT, env={"OLYMPUS_COLLECTIVE_TIMEOUT": "30"})
    assert rc != 0  # process 1 ended with the CallbackError
    assert "ValueError: boom in process 1" in err
    r = rows(out)[0]
    assert r["type"] == "RuntimeError"
    assert "process 1 failed: CallbackError" in r["error"] and "boom in process 1" in r["error"]
    assert r["seconds"] < 10  # the notice, not the 30 s timeout
    assert secs < 25


@needs_mpi
def test_different_local_device_counts_are_refused_on_every_process():
    # the refused process is not initialized: it names its rank from mpirun's environment
    code = ("import os, olympus\n"
            "try:\n    olympus.distributed.initialize()\n"
            "except RuntimeError as e:\n"
            "    _report({'rank': int(os.environ['OMPI_COMM_WORLD_RANK']), 'error': str(e)})\n")
    rc, out, err, _ = mpirun(code, per_rank_env=[{"OLYMPUS_NUM_CPU_DEVICES": "1"},
                                                {"OLYMPUS_NUM_CPU_DEVICES": "2"}])
    assert rc == 0, err[-3000:]
    got = rows(out)
    assert sorted(got) == [0, 1], out
    for r in got.values():
        assert "same number of local devices" in r["error"], r
        assert "process 0 has 1, process 1 has 2" in r["error"], r

"""examples/distributed/data_parallel.py: the same loss curve on one process
(4 CPU devices) and on `mpirun -n 2` (2 devices each; skipped where mpirun is
absent or olympus was built without MPI)."""
import os
import re
import subprocess
import sys

import numpy as np

from test_distributed import mpirun, needs_mpi

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "distributed",
                       "data_parallel.py")


def losses(out):
    return [float(v) for v in re.findall(r"^step +\d+  loss ([0-9.]+)$", out, re.M)]


def run_alone():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("OLYMPUS_NUM_CPU_DEVICES", None)  # the example sets 4
    r = subprocess.run([sys.executable, EXAMPLE], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_data_parallel_alone_trains_on_4_devices():
    out = run_alone()
    assert "1 process(es), 4 devices, 16 rows per device" in out
    curve = losses(out)
    assert len(curve) == 40
    assert curve[-1] < 0.6 * curve[0]


@needs_mpi
def test_data_parallel_on_2_processes_matches_one_process():
    with open(EXAMPLE) as f:
        code = f.read()
    rc, out, err, _ = mpirun(code, env={"OLYMPUS_NUM_CPU_DEVICES": "2"}, timeout=300)
    assert rc == 0, err[-3000:]
    assert "2 process(es), 4 devices, 16 rows per device" in out
    two = losses(out)
    one = losses(run_alone())
    assert len(two) == len(one) == 40  # process 0 alone prints
    np.testing.assert_allclose(two, one, rtol=1e-5)

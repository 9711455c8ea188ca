"""Devices: OLYMPUS_NUM_CPU_DEVICES / olympus_num_cpu_devices, device_put commits
an array, computations run on the device of their committed arguments (eager
and jitted), mixing committed devices is an error, other platforms raise.
Each case with several devices runs in a subprocess (the count is fixed at
first use)."""
import os
import subprocess
import sys
import textwrap

import pytest

import olympus
import olympus.numpy as jnp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(body, env=None):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True,
                       text=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()


def test_default_single_device():
    assert olympus.device_count() == 1
    assert olympus.default_backend() == "cpu"
    (d,) = olympus.devices()
    assert (d.id, d.platform, d.device_kind, repr(d)) == (0, "cpu", "cpu", "CpuDevice(id=0)")
    assert olympus.local_devices() == olympus.devices("cpu")
    x = jnp.arange(3.0)
    assert x.device == d and x.devices() == {d} and not x.committed


@pytest.mark.parametrize("backend", ["gpu", "tpu", "cuda"])
def test_other_platforms_raise(backend):
    with pytest.raises(RuntimeError, match=f"Unknown backend: '{backend}' requested"):
        olympus.devices(backend)


def test_env_gives_n_devices_and_placement():
    out = run("""
    import olympus, olympus.numpy as jnp
    ds = olympus.devices()
    print(len(ds), [d.id for d in ds])
    x = jnp.arange(3.0)
    y = olympus.device_put(x, ds[2])
    print(y.device.id, y.committed, float(y.sum()))
    z = y * 2 + x                     # eager: follows the committed argument
    print(z.device.id, z.committed)
    f = olympus.jit(lambda a, b: a - b)
    print(f(y, x).device.id, f(x, x).device.id, f(x, x).committed)
    w = olympus.device_put({"a": x, "b": 1.0}, ds[1])
    print(w["a"].device.id, w["b"].device.id)
    try:
        f(y, w["a"])
    except ValueError as e:
        print("jit:", e)
    try:
        y + w["a"]
    except ValueError as e:
        print("eager:", e)
    """, {"OLYMPUS_NUM_CPU_DEVICES": "4"})
    assert out[0] == "4 [0, 1, 2, 3]"
    assert out[1] == "2 True 3.0"
    assert out[2] == "2 True"
    assert out[3] == "2 0 False"
    assert out[4] == "1 1"
    assert out[5].startswith("jit: Received incompatible devices for jitted computation")
    assert "committed to device 2" in out[5] and "device 1" in out[5]
    assert out[6].startswith("eager: incompatible devices")


def test_config_sets_count_before_first_use_only():
    out = run("""
    import olympus
    olympus.config.update("olympus_num_cpu_devices", 3)
    print(olympus.device_count(), olympus.config.olympus_num_cpu_devices)
    olympus.config.update("olympus_num_cpu_devices", 3)   # the same count: fine
    try:
        olympus.config.update("olympus_num_cpu_devices", 2)
    except ValueError as e:
        print(e)
    """)
    assert out[0] == "3 3"
    assert "can only be set before the devices are first used" in out[1]


def test_taps_report_the_device_they_ran_on():
    out = run("""
    import olympus, olympus.numpy as jnp
    from olympus.experimental import host_callback as hcb
    got = []
    f = olympus.jit(lambda x: hcb.id_tap(lambda a, t, device: got.append(device.id), x,
                                         tap_with_device=True))
    for d in olympus.devices():
        f(olympus.device_put(jnp.ones(2), d))
    hcb.barrier_wait()
    print(sorted(got))
    """, {"OLYMPUS_NUM_CPU_DEVICES": "3"})
    assert out == ["[0, 1, 2]"]


def test_device_put_rejects_foreign_devices():
    with pytest.raises(TypeError, match="device must be an olympus device"):
        olympus.device_put(jnp.ones(2), "cpu:0")

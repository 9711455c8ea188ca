"""bench/soak_host_callback.py — the host_callback soak in full: 10^6 taps from
4 devices and 2 Python threads through a 64 KiB outfeed queue, with a slow tap
function. Checks that every tap is delivered exactly once and in order per
device and thread, prints the peak queue bytes and the peak RSS, and ends with
barrier_wait and a normal exit (no deadlock). tests/python/test_host_callback.py
runs the same soak in short form.

    OLYMPUS_NUM_CPU_DEVICES=4 PYTHONPATH=python /usr/bin/python3 bench/soak_host_callback.py [N]
"""
import os
import resource
import sys
import threading
import time

os.environ.setdefault("OLYMPUS_NUM_CPU_DEVICES", "4")

import olympus  # noqa: E402
import olympus.numpy as jnp  # noqa: E402
from olympus import lax  # noqa: E402
from olympus.experimental import host_callback as hcb  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
THREADS, DEVICES, PER_CALL = 2, olympus.device_count(), 1000
olympus.config.update("olympus_host_callback_max_queue_byte_size", 1 << 16)

got = {}
lock = threading.Lock()


def slow_tap(x, transforms, *, device):
    t = time.perf_counter() + 2e-6  # a slow consumer: about 2 us of work per tap
    while time.perf_counter() < t:
        pass
    with lock:
        got.setdefault((device.id, int(x[0])), []).append(int(x[1]))


def body(i, c):
    thread, start = c
    hcb.id_tap(slow_tap, jnp.stack([thread, start + i]), tap_with_device=True)
    return c


run = olympus.jit(lambda thread, start: lax.fori_loop(0, PER_CALL, body, (thread, start)))
per_stream = N // (THREADS * DEVICES)


def worker(thread):
    devs = olympus.devices()
    for start in range(0, per_stream, PER_CALL):
        for d in devs:
            run(olympus.device_put(jnp.int32(thread), d), olympus.device_put(jnp.int32(start), d))


t0 = time.perf_counter()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
hcb.barrier_wait()
dt = time.perf_counter() - t0
total = sum(len(v) for v in got.values())
in_order = all(v == list(range(per_stream)) for v in got.values())
peak_q = max(olympus._core.outfeed_peak_bytes(d) for d in range(DEVICES))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"soak: {total} taps ({len(got)} device x thread streams) in {dt:.1f} s "
      f"({total / dt / 1e3:.0f}k taps/s with a ~2 us tap function); "
      f"each exactly once and in order: {in_order and total == per_stream * THREADS * DEVICES}; "
      f"peak queue {peak_q} B of {1 << 16}; peak RSS {rss / 1024:.0f} MiB")
sys.exit(0 if in_order and total == per_stream * THREADS * DEVICES else 1)

"""Which call is this? olympus.experimental.callback_context() inside a host
function: the device that made the call, the pmap member it serves (axis
indices) and, under vmap with one call per element, the batch element.

Run: PYTHONPATH=python python3 examples/callback_context.py
(uses 4 CPU devices: OLYMPUS_NUM_CPU_DEVICES=4 unless set)."""
import os

os.environ.setdefault("OLYMPUS_NUM_CPU_DEVICES", "4")

import numpy as np

import olympus
import olympus.numpy as jnp
from olympus.experimental import callback_context


def host_norm(v):
    """A host function that logs which call it serves."""
    ctx = callback_context()
    print(f"  {ctx.kind} on {ctx.device}, axis_index={ctx.axis_index}, "
          f"batch_index={ctx.batch_index}: norm of {np.asarray(v).tolist()}")
    return np.float32(np.linalg.norm(v))


def norm(v):
    return olympus.pure_callback(host_norm, olympus.ShapeDtypeStruct((), jnp.float32), v,
                                 vmap_method="sequential")


x = jnp.arange(16.0, dtype=jnp.float32).reshape(4, 2, 2)
n = olympus.device_count()

print("vmap of vmap: one call per element, each knows its (outer, inner) index")
print(olympus.vmap(olympus.vmap(norm))(x[0:2]))

print(f"pmap over {n} devices of a vmap: each call knows its device, member and element")
out = olympus.pmap(olympus.vmap(norm), axis_name="devices")(x[:n])
print(out)
np.testing.assert_allclose(np.asarray(out), np.linalg.norm(np.asarray(x[:n]), axis=-1),
                           rtol=1e-6)
print("outside a host call:", callback_context())

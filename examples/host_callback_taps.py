"""Taps from a running computation (olympus.experimental.host_callback): the
module's own examples, run under jit, grad, vmap and a fori_loop, with a tap
function that raises reported by barrier_wait."""
import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import host_callback as hcb


def power3(x):
    y = x * x
    hcb.id_print((x, y), what="x,x^2")
    return y * x


print(olympus.jit(power3)(3.0))                          # what: x,x^2 / ( 3. 9. )
print(olympus.grad(power3)(3.0))                         # the tap sees primal values
olympus.vmap(power3)(np.array([2.0, 3.0], np.float32))   # transforms: [('batch', ...)]
hcb.barrier_wait()

seen = []
olympus.jit(lambda: lax.fori_loop(0, 5, lambda i, c: hcb.id_tap(
    lambda v, t: seen.append(int(v)), c + i), 0))()
hcb.barrier_wait()
print("fori_loop taps:", seen)                           # [0, 1, 3, 6, 10]

eig = hcb.call(np.linalg.eigvalsh, jnp.eye(2) * 2.0, result_shape=jnp.ones(2))
print("call:", eig)                                      # [2. 2.]


def failing(v, transforms):
    raise ValueError("bad value")


olympus.jit(lambda x: hcb.id_tap(failing, x))(1.0)       # the computation goes on
try:
    hcb.barrier_wait()
except hcb.CallbackException as e:
    print("barrier_wait raised CallbackException from", repr(e.__cause__))

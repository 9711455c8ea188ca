"""examples/ffi/rms_norm.py — a native C kernel inside a jitted, differentiated
olympus function, through olympus.ffi.

What it shows:
  1. rms_norm.c holds two C functions with olympus's host-function ABI
     (include/olympus.h): `rms_norm` and its derivative `rms_norm_bwd`. They read
     the attribute `eps` by name and report bad input with oly_ffi_fail. `make`
     builds them into build/examples/ffi/librms_norm.so with gcc and the public
     header only (no olympus library to link; `olympus.ffi.include_dir()` is the
     folder to pass to `gcc -I` when building by hand).
  2. ctypes loads the library; `olympus.ffi.register_ffi_target` registers each
     function under a name.
  3. `olympus.ffi.ffi_call(name, result_shape_dtypes, vmap_method=...)(*args,
     eps=...)` calls a target from olympus code; `olympus.custom_vjp` gives the
     call a derivative (the backward kernel), so `grad` works through it.
  4. Everything runs under `jit`, under `vmap` (one kernel call for the whole
     batch: the kernel treats leading axes as rows) and in a `fori_loop`; the
     executor calls the C functions directly, without Python or the GIL.

Run it from the repository root after `make`:
    PYTHONPATH=python /usr/bin/python3 examples/ffi/rms_norm.py
It prints the results and exits 0 only when they match NumPy.
"""
import ctypes
import functools
import os
import sys

import numpy as np

import olympus
import olympus.numpy as jnp
from olympus import ffi

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_library():
    """build/examples/ffi/librms_norm.so (or under $OLYMPUS_EXT_DIR, the build
    folder of a sanitizer or parallel build)."""
    build = os.environ.get("OLYMPUS_EXT_DIR") or os.path.join(ROOT, "build")
    path = os.path.join(build, "examples", "ffi", "librms_norm.so")
    if not os.path.exists(path):
        sys.exit(f"rms_norm.py: {path} is missing: run `make` first")
    return ctypes.CDLL(path)


lib = load_library()
# Registering the same function again (re-running this file) is a no-op.
ffi.register_ffi_target("rms_norm", lib.rms_norm)
ffi.register_ffi_target("rms_norm_bwd", ffi.pycapsule(lib.rms_norm_bwd))


@functools.partial(olympus.custom_vjp, nondiff_argnums=(1,))
def rms_norm(x, eps=1e-5):
    """x / sqrt(mean(x**2, axis=-1) + eps), computed by the C kernel."""
    return ffi.ffi_call("rms_norm", olympus.ShapeDtypeStruct(x.shape, x.dtype),
                        vmap_method="broadcast_all")(x, eps=eps)


def _rms_norm_fwd(x, eps):
    return rms_norm(x, eps), x          # residual: the input


def _rms_norm_bwd(eps, x, ct):
    dx = ffi.ffi_call("rms_norm_bwd", olympus.ShapeDtypeStruct(x.shape, x.dtype),
                      vmap_method="broadcast_all")(x, ct, eps=eps)
    return (dx,)


rms_norm.defvjp(_rms_norm_fwd, _rms_norm_bwd)


# ---------------------------------------------------------------- NumPy reference

def rms_norm_np(x, eps=1e-5):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def rms_norm_vjp_np(x, ct, eps=1e-5):
    x, ct = np.asarray(x, np.float64), np.asarray(ct, np.float64)
    n = x.shape[-1]
    r = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return r * ct - r ** 3 * x * np.sum(x * ct, axis=-1, keepdims=True) / n


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((4, 8)).astype(np.float32)
    ok = True

    def check(what, got, want, tol=1e-5):
        nonlocal ok
        err = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
        good = err <= tol * max(1.0, float(np.max(np.abs(want))))
        ok &= good
        print(f"{what:42s} max error {err:.2e}  {'ok' if good else 'MISMATCH'}")

    # 1. jitted forward
    y = olympus.jit(rms_norm)(x)
    check("jit(rms_norm)(x)", y, rms_norm_np(x))

    # 2. grad through the custom_vjp: the backward kernel runs
    def loss(x):
        return jnp.sum(rms_norm(x, 1e-3) * w)
    g = olympus.jit(olympus.grad(loss))(x)
    check("jit(grad(sum(rms_norm(x) * w)))", g, rms_norm_vjp_np(x, w, 1e-3))

    # 3. vmap: one kernel call for the batch (broadcast_all)
    yb = olympus.vmap(lambda r: rms_norm(r))(x)
    check("vmap(rms_norm)(x)", yb, rms_norm_np(x))

    # 4. a fori_loop of kernel calls: x <- rms_norm(x) * 2
    def body(i, v):
        return rms_norm(v) * 2.0
    z = olympus.jit(lambda v: olympus.lax.fori_loop(0, 5, body, v))(x)
    want = x.astype(np.float64)
    for _ in range(5):
        want = rms_norm_np(want) * 2
    check("fori_loop(5, rms_norm(v) * 2)", z, want)

    # 5. a kernel's own error: rank 0 is refused by the C code
    try:
        rms_norm(np.float32(1.0))
        print("rms_norm of a scalar: no error (unexpected)")
        ok = False
    except olympus.CallbackError as e:
        print(f"rms_norm of a scalar raised CallbackError: {e}")

    print("all results match NumPy" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

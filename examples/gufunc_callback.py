"""A vectorised host function under vmap: pure_callback with a gufunc signature.

`vmap_method="signature:(m,n),(n)->(m)"` tells olympus which trailing dims of
each argument and result are *core* dims; every dim before them is a loop dim
that the host function broadcasts over, as a NumPy gufunc does. Under `vmap`
olympus then calls the host function once per vmap level, with the batch axis
in front of the loop dims, instead of once per element ("sequential") or with
every argument broadcast to the batch ("broadcast_all").

Run: PYTHONPATH=python python3 examples/gufunc_callback.py
"""
import numpy as np

import olympus
import olympus.numpy as jnp

calls = []


def host_matvec(a, v):
    """An already-vectorised NumPy function: (..., m, n) @ (..., n) -> (..., m)."""
    calls.append((a.shape, v.shape))
    return np.einsum("...ij,...j->...i", a, v)


def matvec(a, v):
    return olympus.pure_callback(host_matvec,
                                 olympus.ShapeDtypeStruct(a.shape[:-1], a.dtype), a, v,
                                 vmap_method="signature:(m,n),(n)->(m)")


def main():
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((3, 4)).astype(np.float32))
    vs = jnp.asarray(rng.standard_normal((1000, 4)).astype(np.float32))

    # one matrix, 1000 vectors: one host call sees a (1, 3, 4) and v (1000, 4)
    out = olympus.jit(olympus.vmap(matvec, in_axes=(None, 0)))(a, vs)
    assert np.allclose(out, np.asarray(vs) @ np.asarray(a).T, atol=1e-5)
    print(f"vmap over 1000 vectors: {len(calls)} host call, shapes {calls[-1]}")

    # nested vmap: 5 matrices x 1000 vectors, still one call (one per level)
    calls.clear()
    ms = jnp.asarray(rng.standard_normal((5, 3, 4)).astype(np.float32))
    table = olympus.vmap(olympus.vmap(matvec, (None, 0)), (0, None))(ms, vs)
    print(f"nested vmap -> {table.shape}: {len(calls)} host call, shapes {calls[-1]}")

    # a wrong signature is caught while tracing, before anything runs
    try:
        olympus.pure_callback(host_matvec, olympus.ShapeDtypeStruct((3,), np.float32), a, vs[0],
                              vmap_method="signature:(m,n),(m)->(m)")
    except ValueError as e:
        print(f"caught: {e}")


if __name__ == "__main__":
    main()

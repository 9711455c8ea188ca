"""olympus.pmap: a function run once per device at the same time, as JAX's
pmap. The body is traced once per member (its axis name bound in the axis
environment, so the lax collectives accept it) and bound as one `pmap`
equation (src/prims/pmap.c) whose kernel runs a group over the devices
(src/rt/group.c); every input and output of that equation carries a leading
member axis. Results mapped at axis 0 are arrays sharded by a PmapSharding
over the members' devices, as JAX's: every member's slice is a view of one
stacked buffer (CPU devices share memory), which a later pmap reads in place."""
import itertools

import numpy as np

from olympus import _core
from olympus._src import parallel as _par
from olympus._src.ad import _aval, _leaf_value

tree_flatten = _core.tree_flatten
tree_unflatten = _core.tree_unflatten

__all__ = ["pmap"]

_anon = itertools.count()


def bind_mesh(body, names, sizes, devices, args):
    """Binds the `pmap` row: `body(*leaves)` (flat leaves in, flat leaves out)
    traced per member with every mesh axis name bound, run once per member of
    the mesh (names, sizes: row-major; devices: one device id per member).
    args: flat arrays or tracers, each with a leading member axis of
    prod(sizes) (under olympus.distributed, devices are global ids and the
    axis holds this process's members only). Returns the flat outputs, each
    with that leading axis. The building block of pmap (and of a shard_map later)."""
    import olympus.numpy as jnp
    n = _local_count(devices) if _core.process_count() > 1 else int(np.prod(sizes))
    avals = [_aval(a) for a in args]
    member = [(tuple(s[1:]), d, w) for s, d, w in avals]
    frames = [_par.axis_frame(nm, sz) for nm, sz in zip(names, sizes)]
    for f in frames:
        f.__enter__()
    try:
        prog, caps = _core.trace(body, member)
    finally:
        for f in reversed(frames):
            f.__exit__(None, None, None)
    caps = [jnp.broadcast_to(c, (n,) + tuple(np.shape(c))) for c in caps]
    params = {"axis_name": _par._text(tuple(names)), "sizes": tuple(int(s) for s in sizes),
              "devices": "(" + ", ".join(str(int(d)) for d in devices) +
                         ("," if len(devices) == 1 else "") + ")",
              "n_out": prog.n_out}
    return list(_core.bind_subs("pmap", list(args) + caps, params, [prog]))


def _local_count(ids):
    """How many of the global device ids are this process's."""
    per, me = int(_core.device_count()), int(_core.process_index())
    return sum(1 for d in ids if d // per == me)


_pmap_shardings = {}


def _sharded_result(o, ids):
    """A concrete result mapped at axis 0, laid out as JAX's: a PmapSharding
    over the members' devices, member k's slice (a view of the stacked buffer)
    on device ids[k]. Traced results (under jit, grad, vmap) stay as they are."""
    if not isinstance(o, _core.Array):
        return o
    from olympus._src import sharded
    key = tuple(ids)
    s = _pmap_shardings.get(key)
    if s is None:  # one PmapSharding per device list, made once
        from olympus._src import api
        from olympus.sharding import PmapSharding
        devs = api.devices()
        s = _pmap_shardings[key] = PmapSharding([devs[i] for i in ids])
    return sharded.unstacked(o, s)


def _flat_out_axes(out_axes, n):
    """out_axes for each of the n flat outputs (an int or None applies to all;
    a tree prefix is flattened; anything else: 0)."""
    if isinstance(out_axes, (int, type(None))):
        return [out_axes] * n
    if isinstance(out_axes, (list, tuple)) and len(out_axes) == n:
        return list(out_axes)
    flat = tree_flatten(out_axes)[0]
    return flat if len(flat) == n else [0] * n


def _axes_for(in_axes, args):
    if isinstance(in_axes, (int, type(None))):
        return [in_axes] * len(args)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple) or len(in_axes) != len(args):
        raise ValueError(f"pmap in_axes specification must be a tree prefix of the "
                         f"corresponding value, got specification {in_axes!r} for value tree "
                         f"of {len(args)} positional arguments")
    return list(in_axes)


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, axis_size=None, donate_argnums=(), backend=None, global_arg_shapes=None):
    """Maps fun over the leading axis of its arguments (in_axes picks
    another; None broadcasts), one member per device, all at the same time;
    collectives over axis_name (psum, all_gather, ...) act across members."""
    import olympus
    import olympus.numpy as jnp
    if axis_name is not None:
        _par.check_axis_name(axis_name)
    static = static_broadcasted_argnums
    static = (static,) if isinstance(static, int) else tuple(static)
    name = axis_name if axis_name is not None else f"_pmap{next(_anon)}"

    def wrapped(*args, **kwargs):
        if kwargs:
            raise NotImplementedError("pmap does not support keyword arguments")
        st = {i % len(args) for i in static} if args else set()
        dyn = [a for i, a in enumerate(args) if i not in st]
        axes = _axes_for(in_axes, dyn) if not isinstance(in_axes, tuple) or \
            len(in_axes) == len(dyn) else _axes_for(
                tuple(a for i, a in enumerate(in_axes) if i not in st), dyn)
        leaves, leaf_axes, trees = [], [], []
        for a, ax in zip(dyn, axes):
            ls, tree = tree_flatten(a)
            trees.append(tree)
            for v in ls:
                v = _leaf_value(v)
                leaves.append(v)
                leaf_axes.append(ax)
        sizes = set()
        for v, ax in zip(leaves, leaf_axes):
            if ax is None:
                continue
            nd = np.ndim(v)
            if not -nd <= ax < nd:
                raise ValueError(f"pmap was requested to map its argument along axis {ax}, "
                                 f"which implies that its rank should be at least {ax + 1}, "
                                 f"but is only {nd} (its shape is {np.shape(v)})")
            sizes.add(np.shape(v)[ax])
        if len(sizes) > 1:
            raise ValueError("pmap got inconsistent sizes for array axes to be mapped: "
                             f"{sorted(sizes)}")
        if sizes:
            n = sizes.pop()
            if axis_size is not None and axis_size != n:
                raise ValueError(f"pmap got axis_size={axis_size} but the mapped axes have "
                                 f"size {n}")
        elif axis_size is not None:
            n = axis_size
        else:
            raise ValueError("pmap requires at least one argument with a mapped axis, or "
                             "axis_size")
        devs = list(devices) if devices is not None else olympus.devices()
        ids = [d.id if hasattr(d, "id") else int(d) for d in devs]
        n_local = _local_count(ids) if olympus.process_count() > 1 else len(ids)
        if n_local != len(ids):  # devices of other processes: this process's slice
            if n != n_local:
                raise ValueError(f"Leading axis size of input to pmapped function must equal "
                                 f"the number of local devices passed to pmap. Got "
                                 f"axis_size={n}, num_local_devices={n_local}.")
            if len(set(ids)) != len(ids):
                raise ValueError(f"pmap got duplicate devices: {ids}")
            n_global = len(ids)
        elif devices is not None and len(devs) != n:
            raise ValueError(f"Leading axis size of input to pmapped function must equal the "
                             f"number of local devices passed to pmap. Got axis_size={n}, "
                             f"num_local_devices={len(devs)}.")
        if n_local == len(ids) and n > len(devs):
            raise ValueError(f"compiling computation that requires {n} logical devices, but "
                             f"only {len(devs)} CPU devices are available (num_replicas={n})")
        if n_local == len(ids):
            ids = ids[:n]
            if len(set(ids)) != len(ids):
                raise ValueError(f"pmap got duplicate devices: {ids}")
            n_global = n
        stacked = []
        for v, ax in zip(leaves, leaf_axes):
            if ax is None:
                v = jnp.broadcast_to(v, (n,) + tuple(np.shape(v)))
            else:
                v = jnp.moveaxis(v, ax, 0) if ax % max(np.ndim(v), 1) != 0 else jnp.asarray(v)
            stacked.append(v)
        out_tree = []

        def body(*flat):
            it = iter(flat)
            rebuilt, k = [], 0
            for tree in trees:
                m = tree.num_leaves
                rebuilt.append(tree_unflatten(tree, list(flat[k:k + m])))
                k += m
            full, j = [], 0
            for i in range(len(args)):
                if i in st:
                    full.append(args[i])
                else:
                    full.append(rebuilt[j])
                    j += 1
            del it
            out = fun(*full)
            ol, ot = tree_flatten(out)
            out_tree.append(ot)
            return ol
        outs = bind_mesh(body, [name], [n_global], ids, stacked)
        res = []
        for o, ax in zip(outs, _flat_out_axes(out_axes, len(outs))):
            if ax is None:
                res.append(o[0])  # the value does not vary (JAX requires it): member 0's
            elif ax != 0:
                res.append(jnp.moveaxis(o, 0, ax))
            elif n_local != len(ids):  # across processes: this process's part, stacked
                res.append(o)
            else:
                res.append(_sharded_result(o, ids))
        return tree_unflatten(out_tree[-1], res)

    # Called on arrays (no tracer among the arguments, no static arguments),
    # the traced pmap is cached as a jitted call: tracing and binding the
    # body again on every call cost ~35 us, the launch itself ~2 us.
    cached = []

    def dispatch(*args, **kwargs):
        if static or kwargs or not args or \
                any(_core.is_tracer(v) for v in tree_flatten(list(args))[0]):
            return wrapped(*args, **kwargs)
        if not cached:
            cached.append(olympus.jit(wrapped))
        # the jitted call's results are plain arrays: lay out those mapped at
        # axis 0 over the members' devices, as the traced path does
        leaves, tree = tree_flatten(cached[0](*args))
        axes = _flat_out_axes(out_axes, len(leaves))
        devs = list(devices) if devices is not None else olympus.devices()
        ids = [d.id if hasattr(d, "id") else int(d) for d in devs]
        if olympus.process_count() > 1 and _local_count(ids) != len(ids):
            return tree_unflatten(tree, leaves)  # across processes: stacked local parts
        return tree_unflatten(tree, [
            _sharded_result(o, ids[:o.shape[0]]) if ax == 0 else o
            for o, ax in zip(leaves, axes)])

    dispatch.__wrapped__ = fun
    dispatch.__name__ = getattr(fun, "__name__", "pmap_fun")
    return dispatch

"""Sharded arrays: device_put with a NamedSharding, the arrays' shard views,
make_array_from_callback / _single_device_arrays, and jit's per-shard runs of
elementwise programs (the hook _core's jit calls when an argument is sharded).

An array laid out by a NamedSharding is an ordinary Array (its global value,
uncommitted) whose `_shards` slot holds (sharding, per-device Arrays in mesh
order; () for a PmapSharding's, made on demand); see docs/design.md, "Sharding"."""
import numpy as np

from olympus import _core
from olympus._src.api import _local_id
from olympus.sharding import (NamedSharding, PartitionSpec, PmapSharding, SingleDeviceSharding,
                              Sharding)


class Shard:
    """One device's part of an array: `device`, `index` (a tuple of slices into
    the global array), `replica_id`, `data` (an Array committed to the device)."""
    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index, replica_id, data):
        self.device = device
        self.index = index
        self.replica_id = replica_id
        self.data = data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


def _starts(index):
    return tuple(0 if s.start is None else s.start for s in index)


def _put_named(a, sharding, who="device_put args"):
    """a (an Array) laid out by sharding: one shard per mesh device."""
    info = a._shards
    if info is not None and info[0] == sharding:
        return a
    shape = a.shape
    sharding._check_shape(shape, who)
    sshape = sharding.shard_shape(shape)
    blocks = {}
    shards = []
    for dev, idx, _ in sharding._layout(shape):
        starts = _starts(idx)
        b = blocks.get(starts)
        if b is None:
            b = blocks[starts] = _core.take_block(a, starts, sshape)
        shards.append(_core.device_put(b, _local_id(dev)))
    glob = a
    if a.committed or info is not None:  # the global value is uncommitted (no device of its own)
        glob = _core.take_block(a, (0,) * len(shape), shape)
    return _core.make_sharded(glob, sharding, tuple(shards))


def unstacked(a, sharding):
    """a (an Array whose leading dimension has one element per device of the
    PmapSharding) with member k's slice on devices[k]: views of a's buffer
    (pmap's results, device_put with a PmapSharding). The views are made when
    asked for (addressable_shards): a pmap result that only flows on pays
    nothing for them."""
    info = a._shards
    if info is not None and info[0] == sharding:
        return a
    shape = tuple(a.shape)
    if sharding.sharded_dim != 0:
        raise NotImplementedError("PmapSharding with sharded_dim != 0")
    sharding._check_shape(shape)
    glob = a
    if a.committed or info is not None:  # the global value is uncommitted (no device of its own)
        glob = _core.take_block(a, (0,) * len(shape), shape)
    return _core.make_sharded(glob, sharding, ())


def _shard_datas(x):
    """The per-device Arrays of a sharded x, in layout order (a PmapSharding's
    views of the global buffer are made here, on demand)."""
    sharding, datas = x._shards
    if datas or not isinstance(sharding, PmapSharding):
        return datas
    shape = tuple(x.shape)
    rest = shape[1:]
    return tuple(_core.device_put(_core.take_block(x, (k,) + (0,) * len(rest), (1,) + rest,
                                                   rest), _local_id(dev))
                 for k, dev in enumerate(sharding._flat))


def put(x, sharding):
    """One leaf: x (array-like) placed by sharding (a NamedSharding,
    PmapSharding or SingleDeviceSharding)."""
    a = x if isinstance(x, _core.Array) else _core.asarray(x)
    if isinstance(sharding, NamedSharding):
        return _put_named(a, sharding)
    if isinstance(sharding, PmapSharding):
        return unstacked(a, sharding)
    if isinstance(sharding, SingleDeviceSharding):
        if a._shards is not None:
            a = _core.take_block(a, (0,) * a.ndim, a.shape)
        return _core.device_put(a, _local_id(sharding._device))
    raise TypeError(f"device_put: expected a device or a sharding, got {sharding!r}")


# ---------------------------------------------------------------- Array properties

def array_sharding(x):
    info = x._shards
    if info is not None:
        return info[0]
    from olympus._src import api
    return SingleDeviceSharding(api._array_device(x))


def array_devices(x):
    info = x._shards
    if info is not None:
        return info[0].device_set
    from olympus._src import api
    return {api._array_device(x)}


def array_device(x):
    info = x._shards
    if info is not None:
        if info[0].num_devices == 1:
            return info[0]._device_assignment[0]
        raise ValueError("Length of devices is greater than 1. Please use `.devices()`.")
    from olympus._src import api
    return api._array_device(x)


def addressable_shards(x):
    info = x._shards
    if info is None:
        d = array_device(x)
        return [Shard(d, tuple(slice(None) for _ in x.shape), 0, x)]
    return [Shard(dev, idx, rep, data)
            for (dev, idx, rep), data in zip(info[0]._layout(x.shape), _shard_datas(x))]


def is_fully_replicated(x):
    info = x._shards
    return True if info is None else info[0].is_fully_replicated


# ---------------------------------------------------------------- constructors

def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """An array of `shape` laid out by `sharding` whose shard on each device is
    `data_callback(index)` (index: a tuple of slices), as JAX's function."""
    shape = tuple(int(d) for d in shape)
    if isinstance(sharding, SingleDeviceSharding):
        idx = tuple(slice(None) for _ in shape)
        return put(_core.asarray(np.asarray(data_callback(idx)), dtype=dtype), sharding)
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"make_array_from_callback: expected a sharding, got {sharding!r}")
    sharding._check_shape(shape, "make_array_from_callback args")
    sshape = sharding.shard_shape(shape)
    got = {}
    shards, blocks = [], []
    for dev, idx, _ in sharding._layout(shape):
        starts = _starts(idx)
        b = got.get(starts)
        if b is None:
            v = data_callback(idx)
            b = v if isinstance(v, _core.Array) else _core.asarray(np.asarray(v), dtype=dtype)
            if dtype is not None and b.dtype != np.dtype(dtype):
                b = _core.asarray(b, dtype=dtype)
            if tuple(b.shape) != sshape:
                raise ValueError(
                    f"make_array_from_callback: the callback returned a shard of shape "
                    f"{tuple(b.shape)} for index {idx}; the sharding {sharding} expects "
                    f"{sshape} for the global shape {shape}")
            got[starts] = b
            blocks.append((b, starts))
        shards.append(_core.device_put(b, _local_id(dev)))
    glob = _core.assemble(shape, blocks)
    return _core.make_sharded(glob, sharding, tuple(shards))


def make_array_from_single_device_arrays(shape, sharding, arrays):
    """An array of `shape` laid out by `sharding` from one array per device of
    the sharding (each the shard that device holds, in any order)."""
    shape = tuple(int(d) for d in shape)
    if not isinstance(sharding, NamedSharding):
        raise TypeError("make_array_from_single_device_arrays: expected a NamedSharding, got "
                        f"{sharding!r}")
    sharding._check_shape(shape, "make_array_from_single_device_arrays args")
    sshape = sharding.shard_shape(shape)
    from olympus._src import api
    by_dev = {}
    for a in arrays:
        if not isinstance(a, _core.Array):
            raise TypeError("make_array_from_single_device_arrays: expected olympus Arrays, got "
                            f"{type(a).__name__}")
        d = api._array_device(a)
        if d in by_dev:
            raise ValueError(f"make_array_from_single_device_arrays: two arrays on {d}")
        by_dev[d] = a
    layout = sharding._layout(shape)
    if set(by_dev) != {dev for dev, _, _ in layout}:
        raise ValueError(
            "make_array_from_single_device_arrays: the arrays are on devices "
            f"{sorted(d.id for d in by_dev)}, the sharding's devices are "
            f"{sorted(d.id for d, _, _ in layout)}")
    shards, blocks = [], []
    for dev, idx, rep in layout:
        a = by_dev[dev]
        if tuple(a.shape) != sshape:
            raise ValueError(f"make_array_from_single_device_arrays: the array on {dev} has shape "
                             f"{tuple(a.shape)}, expected the shard shape {sshape}")
        shards.append(a if a.committed else _core.device_put(a, _local_id(dev)))
        if rep == 0:
            blocks.append((a, _starts(idx)))
    glob = _core.assemble(shape, blocks)
    return _core.make_sharded(glob, sharding, tuple(shards))


# ---------------------------------------------------------------- jit

def _jit_call(jaxpr, leaves, cache):
    """A jitted call with a sharded argument: when every non-scalar argument is
    sharded by one NamedSharding with one shape and the program is elementwise,
    run it once per distinct shard, each on its device, and return arrays with
    that sharding; else NotImplemented (jit then runs on the global values)."""
    sharding = shape = None
    for leaf in leaves:
        if np.ndim(leaf) == 0:
            continue
        info = leaf._shards if isinstance(leaf, _core.Array) else None
        if info is None or not isinstance(info[0], NamedSharding):
            return NotImplemented
        if sharding is None:
            sharding, shape = info[0], tuple(leaf.shape)
        elif info[0] != sharding or tuple(leaf.shape) != shape:
            return NotImplemented
    if sharding is None:
        return NotImplemented
    sshape = sharding.shard_shape(shape)
    prog = cache.get(sshape, cache)
    if prog is cache:
        prog = cache[sshape] = _core.program_for_shard(jaxpr, shape, sshape)
    if prog is None:
        return NotImplemented
    layout = sharding._layout(shape)
    runs, first = [], {}
    for k, (dev, idx, rep) in enumerate(layout):
        if rep:
            continue
        args = [leaf._shards[1][k] if np.ndim(leaf) else leaf for leaf in leaves]
        first[_starts(idx)] = len(runs)
        runs.append((_local_id(dev), args))
    outs = _core.run_on_devices(prog, runs)
    results = []
    scalar_sharding = None
    for j, aval in enumerate(prog.out_avals):
        if not aval.shape:  # a value of scalars only: the same on every device
            if scalar_sharding is None:
                scalar_sharding = NamedSharding(sharding.mesh, PartitionSpec())
            v = outs[0][j]
            glob = _core.take_block(v, (), ())
            results.append(_core.make_sharded(
                glob, scalar_sharding,
                tuple(_core.device_put(glob, _local_id(dev)) for dev in sharding.mesh._flat)))
            continue
        shards, blocks = [], []
        for dev, idx, rep in layout:
            starts = _starts(idx)
            v = outs[first[starts]][j]
            if rep == 0:
                blocks.append((v, starts))
                shards.append(v)
            else:  # a replica: the same buffer committed to this device too (no copy)
                shards.append(_core.device_put(v, _local_id(dev)))
        results.append(_core.make_sharded(_core.assemble(shape, blocks), sharding,
                                          tuple(shards)))
    return results


def check_sharding(s, what):
    if s is not None and not isinstance(s, Sharding):
        raise TypeError(f"{what} must be a Sharding (NamedSharding or SingleDeviceSharding) "
                        f"or None, got {s!r}")


_core.set_shard_hook(_jit_call)


def _is_placement(s):
    from olympus._src.api import CpuDevice
    return s is None or isinstance(s, (Sharding, CpuDevice))


def _place_arg(v, s, where):
    """One leaf of a jit argument laid out by its in_sharding s."""
    if s is None or _core.is_tracer(v):
        return v
    if isinstance(v, _core.Array) and (v.committed or v._shards is not None):
        have = array_sharding(v)
        if have != s:
            raise ValueError(
                f"Sharding passed to jit does not match the sharding on the respective arg. "
                f"Got jit sharding: {s} and arg sharding: {have} for {where}")
        return v
    return put(v, s)


def _place_tree(v, s, where):
    from olympus import tree_util
    if _is_placement(s):
        return tree_util.tree_map(lambda leaf: _place_arg(leaf, s, where), v)
    if isinstance(s, (tuple, list)) and isinstance(v, (tuple, list)) and len(s) == len(v):
        parts = [_place_tree(a, t, f"{where}[{i}]") for i, (a, t) in enumerate(zip(v, s))]
        return type(v)(*parts) if hasattr(v, "_fields") else type(v)(parts)
    if isinstance(s, dict) and isinstance(v, dict) and set(s) == set(v):
        return type(v)((k, _place_tree(v[k], s[k], f"{where}[{k!r}]")) for k in v)
    raise ValueError(f"jit in_shardings specification must be a tree prefix of the positional "
                     f"arguments tuple passed to the function; at {where} it is {s!r} for a "
                     f"value of structure {tree_util.tree_structure(v)}")


class ShardedJit:
    """jit(f, in_shardings=..., out_shardings=...): the jitted function between
    a layout of its arguments and one of its results. Other attributes
    (lower, _cache_size, ...) are the jitted function's."""

    def __init__(self, jitted, in_shardings, out_shardings, static_argnums):
        if in_shardings is not None and not _is_placement(in_shardings):
            if not isinstance(in_shardings, (tuple, list)):
                raise TypeError(f"jit: in_shardings must be a sharding, a tuple of them or "
                                f"None, got {in_shardings!r}")
        self._jitted = jitted
        self._in = in_shardings
        self._out = out_shardings
        self._static = tuple(static_argnums)
        self.__wrapped__ = jitted.__wrapped__
        self.__name__ = getattr(jitted, "__name__", "jitted")
        self.__doc__ = getattr(jitted, "__doc__", None)

    def __getattr__(self, name):
        return getattr(self._jitted, name)

    def __call__(self, *args, **kwargs):
        if self._in is not None:
            n = len(args)
            static = {i % n for i in self._static if -n <= i < n} if n else set()
            dyn = [i for i in range(n) if i not in static]
            if _is_placement(self._in):
                spec = [self._in] * len(dyn)
            else:
                spec = list(self._in)
                if len(spec) != len(dyn):
                    raise ValueError(
                        f"jit in_shardings specification must be a tree prefix of the "
                        f"positional arguments tuple passed to the function, but got "
                        f"{len(spec)} shardings for {len(dyn)} positional arguments")
            args = list(args)
            for i, s in zip(dyn, spec):
                args[i] = _place_tree(args[i], s, f"args[{i}]")
        out = self._jitted(*args, **kwargs)
        if self._out is None:
            return out
        from olympus._src.api import device_put
        return device_put(out, self._out)

"""Arrays and shard_map over meshes that span processes (olympus.distributed),
as JAX's multi-process model: a global array is made from each process's own
data (`make_array_from_process_local_data`) and holds only this process's
shards; shard_map over a mesh of every process's devices runs its body on
this process's members (pmap.bind_mesh with global device ids, collectives
carried across processes by the group runtime's transport) and returns such
arrays; `process_allgather` gathers a global value. See docs/design.md,
"shard_map", "Across processes"."""
import math

import numpy as np

from olympus import _core
from olympus._src.sharded import Shard, _local_id
from olympus.sharding import NamedSharding, _axes_of

__all__ = ["GlobalArray", "make_array_from_process_local_data", "process_allgather",
           "spans_processes"]


def _me():
    return int(_core.process_index())


def spans_processes(mesh):
    """Whether mesh holds devices of processes other than this one."""
    if _core.process_count() <= 1:
        return False
    me = _me()
    return any(d.process_index != me for d in mesh._flat)


def _local_layout(sharding, shape):
    """(member k, device, index, replica_id) of this process's mesh devices,
    in mesh order."""
    me = _me()
    return [(k, dev, idx, rep) for k, (dev, idx, rep) in enumerate(sharding._layout(shape))
            if dev.process_index == me]


def _put(a, dev):
    """a committed to dev, a device of this process."""
    return _core.device_put(a, _local_id(dev))


def _starts(index):
    return tuple(0 if s.start is None else s.start for s in index)


def _stops(index, shape):
    return tuple(d if s.stop is None else s.stop for s, d in zip(index, shape))


_NOT_ADDRESSABLE = (
    "Fetching value for `olympus.Array` that spans non-addressable (non process local) "
    "devices is not possible. You can use "
    "`olympus.experimental.multihost_utils.process_allgather` to print the global array or use "
    "`.addressable_shards` method of olympus.Array to inspect the addressable (process local) "
    "shards.")


class GlobalArray:
    """An array laid out by a NamedSharding whose mesh spans processes: its
    global shape, dtype and sharding, and the shards of this process's devices
    (`addressable_shards`, in mesh order). Its value is not here: np.asarray
    raises JAX's RuntimeError; process_allgather gathers it."""
    __slots__ = ("shape", "dtype", "sharding", "_local")

    def __init__(self, shape, dtype, sharding, shards):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.sharding = sharding
        self._local = list(shards)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    is_fully_addressable = property(lambda self: False)
    is_fully_replicated = property(lambda self: self.sharding.is_fully_replicated)
    addressable_shards = property(lambda self: list(self._local))

    def addressable_data(self, index):
        return self._local[index].data

    def devices(self):
        return self.sharding.device_set

    def block_until_ready(self):
        for s in self._local:
            s.data.block_until_ready()
        return self

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(_NOT_ADDRESSABLE)

    def tolist(self):
        raise RuntimeError(_NOT_ADDRESSABLE)

    def item(self):
        raise RuntimeError(_NOT_ADDRESSABLE)

    def __repr__(self):
        dt = self.dtype.name
        return (f"GlobalArray(shape={self.shape}, dtype={dt}, sharding={self.sharding!r}, "
                f"{len(self._local)} addressable shards)")


def _box(sharding, ndim):
    """This process's part of the layout as a box of blocks: per dimension
    the first block and the number of blocks. NotImplementedError when its
    devices' blocks do not form one box (each process must hold one
    rectangular piece of the global array)."""
    parts = sharding._partitions(ndim)
    blocks = {_starts(idx) for _, _, idx, _ in _local_layout(sharding, tuple(parts))}
    lo = [min(b[i] for b in blocks) for i in range(ndim)]
    hi = [max(b[i] for b in blocks) for i in range(ndim)]
    count = [h - l + 1 for l, h in zip(lo, hi)]
    if len(blocks) != math.prod(count):
        raise NotImplementedError(
            f"make_array_from_process_local_data: the devices of process {_me()} hold blocks "
            f"{sorted(blocks)} of the {tuple(parts)} blocks of {sharding}, which are not one "
            "rectangular piece of the global array; lay the mesh out so that each process's "
            "devices hold one (e.g. the process axis first)")
    return lo, count, parts


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """A global array laid out by sharding (a NamedSharding) from this
    process's part of it: local_data is the piece of the global array that
    this process's devices hold (or, when its shape is global_shape, the whole
    global value, the same on every process). global_shape=None infers it
    from the local shape and the layout. On one process, or when the mesh
    holds this process's devices only, this is device_put(local_data, sharding)."""
    from olympus._src import api
    a = local_data if isinstance(local_data, _core.Array) else _core.asarray(local_data)
    lshape = tuple(a.shape)
    if global_shape is not None:
        global_shape = tuple(int(d) for d in global_shape)
    if not isinstance(sharding, NamedSharding) or not spans_processes(sharding.mesh):
        if global_shape is not None and global_shape != lshape:
            raise ValueError(f"make_array_from_process_local_data: the sharding's devices are "
                             f"all this process's, so local_data is the whole array: its shape "
                             f"{lshape} must equal global_shape {global_shape}")
        return api.device_put(a, sharding)
    ndim = len(lshape)
    if global_shape is not None and len(global_shape) != ndim:
        raise ValueError(f"make_array_from_process_local_data: global_shape {global_shape} has "
                         f"rank {len(global_shape)}, local_data of shape {lshape} rank {ndim}")
    sharding._check_shape(lshape if global_shape is None else global_shape,
                          "make_array_from_process_local_data args")
    if global_shape == lshape:  # the whole value on every process: cut this process's blocks
        origin = (0,) * ndim
    else:
        lo, count, parts = _box(sharding, ndim)
        bad = [i for i in range(ndim) if lshape[i] % count[i]]
        if bad:
            i = bad[0]
            raise ValueError(f"make_array_from_process_local_data: dimension {i} of local_data "
                             f"(shape {lshape}) holds {count[i]} blocks of {sharding} on process "
                             f"{_me()}, but {count[i]} does not divide {lshape[i]}")
        block = [lshape[i] // count[i] for i in range(ndim)]
        inferred = tuple(block[i] * parts[i] for i in range(ndim))
        if global_shape is not None and global_shape != inferred:
            raise ValueError(f"make_array_from_process_local_data: local_data of shape {lshape} "
                             f"on process {_me()} is {count} blocks of {sharding}, so the global "
                             f"shape is {inferred}, but global_shape={global_shape} was given")
        global_shape = inferred
        origin = tuple(lo[i] * block[i] for i in range(ndim))
    sshape = sharding.shard_shape(global_shape)
    shards = []
    for _, dev, idx, rep in _local_layout(sharding, global_shape):
        at = tuple(s - o for s, o in zip(_starts(idx), origin))
        shards.append(Shard(dev, idx, rep, _put(_core.take_block(a, at, sshape), dev)))
    return GlobalArray(global_shape, a.dtype, sharding, shards)


# ---------------------------------------------------------------- shard_map's pieces

def local_stack(v, spec, mesh, who):
    """v's blocks for this process's members of NamedSharding(mesh, spec),
    stacked (local members, *block) in mesh order. v: a GlobalArray (each
    block read from a local shard that holds it), or any other array value,
    taken as the global value (the same on every process)."""
    sharding = NamedSharding(mesh, spec)
    if isinstance(v, GlobalArray):
        shape = v.shape
    else:
        v = v if isinstance(v, _core.Array) else _core.asarray(v)
        shape = tuple(v.shape)
    block = sharding.shard_shape(shape)
    zeros = (0,) * len(block)
    out = []
    for j, (_, dev, idx, _) in enumerate(_local_layout(sharding, shape)):
        starts = _starts(idx)
        if isinstance(v, GlobalArray):
            for s in v._local:
                lo, hi = _starts(s.index), _stops(s.index, shape)
                if all(l <= a and a + b <= h for l, a, b, h in zip(lo, starts, block, hi)):
                    src = s.data
                    at = tuple(a - l for a, l in zip(starts, lo))
                    break
            else:
                raise NotImplementedError(
                    f"{who}: in_specs {spec!r} gives device {dev.id} (process {_me()}) the "
                    f"block {tuple(idx)} of an argument of shape {shape} laid out by "
                    f"{v.sharding}, whose shards on this process do not hold it (data would "
                    f"have to move between processes); pass the argument laid out by "
                    f"NamedSharding(mesh, {spec!r}) (make_array_from_process_local_data)")
        else:
            src, at = v, starts
        out.append((_core.take_block(src, at, block, (1,) + block), (j,) + zeros))
    if not out:
        raise ValueError(f"{who}: the mesh holds none of process {_me()}'s devices")
    return _core.assemble((len(out),) + block, out)


def local_result(o, spec, mesh):
    """A concrete stacked output (local members, *block) as a GlobalArray laid
    out by NamedSharding(mesh, spec): member j's block on its device."""
    ob = tuple(o.shape[1:])
    sharding = NamedSharding(mesh, spec)
    parts = sharding._partitions(len(ob))
    shape = tuple(d * k for d, k in zip(ob, parts))
    zeros = (0,) * len(ob)
    shards = [Shard(dev, idx, rep, _put(
                  _core.take_block(o, (j,) + zeros, (1,) + ob, ob), dev))
              for j, (_, dev, idx, rep) in enumerate(_local_layout(sharding, shape))]
    return GlobalArray(shape, o.dtype, sharding, shards)


def local_unreplicated(mesh, o, spec):
    """check_rep among this process's members: the first mesh axis (with a
    coordinate) along which a member's block differs from the block at
    coordinate 0 of that axis, both members on this process; None if none.
    Pairs with a member on another process are not compared."""
    names, sizes = mesh.axis_names, mesh.shape
    named = {a for e in spec for a in _axes_of(e)}
    me = _me()
    coords = [c for c, d in zip(np.ndindex(*mesh.devices.shape), mesh._flat)
              if d.process_index == me]
    where = {c: j for j, c in enumerate(coords)}
    arr = None
    for i, a in enumerate(names):
        if a in named or sizes[a] == 1:
            continue
        if arr is None:
            arr = np.asarray(o)
        for c, j in where.items():
            first = c[:i] + (0,) + c[i + 1:]
            if c[i] and first in where and arr[j].tobytes() != arr[where[first]].tobytes():
                return a, c[i]
    return None


# ---------------------------------------------------------------- process_allgather

def _gather_rows(x):
    """x (a NumPy array of the same shape and dtype on every process) from
    every process: (process_count, *x.shape), through a pmap all_gather over
    every device (collectives across processes)."""
    import olympus
    from olympus import lax
    L = olympus.local_device_count()
    stacked = np.broadcast_to(x, (L,) + x.shape)
    out = olympus.pmap(lambda v: lax.all_gather(v, "_process_allgather"),
                       "_process_allgather")(stacked)
    return np.asarray(out)[0][::L]


def _allgather_leaf(x, tiled):
    if isinstance(x, GlobalArray):  # the global value: each block from a process holding it
        mine = np.zeros(x.shape, x.dtype)
        for s in x._local:
            mine[s.index] = np.asarray(s.data)
        rows = _gather_rows(mine) if _core.process_count() > 1 else mine[None]
        out = np.empty(x.shape, x.dtype)
        for dev, idx, rep in x.sharding._layout(x.shape):
            if rep == 0:
                out[idx] = rows[dev.process_index][idx]
        return out
    a = np.asarray(x)
    rows = _gather_rows(a) if _core.process_count() > 1 else a[None]
    if tiled:
        if not a.shape:
            raise ValueError("process_allgather(tiled=True) needs arrays of rank >= 1, got a "
                             "scalar")
        return np.concatenate(list(rows), axis=0)
    return rows


def process_allgather(in_tree, tiled=False):
    """JAX's multihost_utils.process_allgather: for each leaf, a global array
    (spanning processes) becomes its global value as a NumPy array; any
    other value is this process's, and the processes' values are stacked on a
    new leading axis (tiled=False) or concatenated along axis 0 (tiled=True).
    Every process must call it with the same tree, shapes and dtypes."""
    leaves, tree = _core.tree_flatten(in_tree)
    return _core.tree_unflatten(tree, [_allgather_leaf(x, tiled) for x in leaves])

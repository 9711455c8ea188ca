"""olympus.sharding: where an array's data lives.

A `SingleDeviceSharding` puts all of an array on one device. A `NamedSharding`
pairs a `Mesh` (an n-dimensional array of devices with a name per axis) with a
`PartitionSpec` (per array dimension: None, one mesh axis name, or a tuple of
names) and lays one shard on each device of the mesh: a dimension mapped to
mesh axes is cut into as many equal blocks as those axes have devices (the
first name major); mesh axes the spec does not name hold copies (replicas).
`olympus.device_put(x, NamedSharding(...))` makes such an array (docs/design.md,
"Sharding")."""
import collections
import math
import operator
import threading

import numpy as np


class Sharding:
    """What every sharding is (SingleDeviceSharding, NamedSharding)."""


class SingleDeviceSharding(Sharding):
    """All of an array on one device."""

    def __init__(self, device):
        self._device = device

    @property
    def device_set(self):
        return {self._device}

    @property
    def addressable_devices(self):
        return {self._device}

    @property
    def is_fully_replicated(self):
        return True

    @property
    def is_fully_addressable(self):
        return True

    @property
    def num_devices(self):
        return 1

    def shard_shape(self, global_shape):
        return tuple(global_shape)

    def devices_indices_map(self, global_shape):
        return {self._device: tuple(slice(None) for _ in global_shape)}

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash(("SingleDeviceSharding", self._device))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r})"


class PmapSharding(Sharding):
    """How olympus.pmap lays out its results (mapped at out_axes=0): dimension
    `sharded_dim` (0) is unstacked over `devices`, member k's slice (without
    that dimension) on devices[k]; the other dimensions are whole."""

    def __init__(self, devices, sharded_dim=0):
        self.devices = np.array(list(devices), dtype=object)
        self.devices.flags.writeable = False
        self.sharded_dim = sharded_dim
        self._flat = tuple(self.devices.flat)

    @classmethod
    def default(cls, shape, sharded_dim=0, devices=None):
        """The sharding of a pmap result of `shape`: one device per element of
        dimension sharded_dim (the first devices of olympus.devices() unless
        given)."""
        from olympus._src.api import devices as all_devices
        n = shape[sharded_dim]
        devs = list(all_devices() if devices is None else devices)
        if len(devs) < n:
            raise ValueError(f"PmapSharding.default: dimension {sharded_dim} of {tuple(shape)} "
                             f"needs {n} devices, got {len(devs)}")
        return cls(devs[:n], sharded_dim)

    @property
    def sharding_spec(self):
        """(('unstacked', n) at sharded_dim, None elsewhere), mesh_mapping: the
        one device axis carries sharded_dim (JAX's ShardingSpec, as plain data)."""
        return {"sharded_dim": self.sharded_dim, "unstacked": len(self._flat),
                "mesh_mapping": (("sharded_axis", 0),)}

    @property
    def device_set(self):
        return set(self._flat)

    @property
    def addressable_devices(self):
        return set(self._flat)

    @property
    def _device_assignment(self):
        return self._flat

    @property
    def num_devices(self):
        return len(self._flat)

    @property
    def is_fully_replicated(self):
        return len(self._flat) == 1

    @property
    def is_fully_addressable(self):
        return True

    def _check_shape(self, global_shape):
        global_shape = tuple(operator.index(d) for d in global_shape)
        d = self.sharded_dim
        if len(global_shape) <= d or global_shape[d] != len(self._flat):
            raise ValueError(f"PmapSharding over {len(self._flat)} devices lays out values whose "
                             f"dimension {d} has size {len(self._flat)}, got shape "
                             f"{global_shape}")
        return global_shape

    def shard_shape(self, global_shape):
        """The shape of each shard: global_shape without sharded_dim."""
        global_shape = self._check_shape(global_shape)
        d = self.sharded_dim
        return global_shape[:d] + global_shape[d + 1:]

    def _layout(self, global_shape):
        """(device, index, replica_id) per device: index is k at sharded_dim
        (an int, as JAX's: the dimension is unstacked) and whole slices elsewhere."""
        global_shape = self._check_shape(global_shape)
        d = self.sharded_dim
        whole = tuple(slice(None) for _ in global_shape)
        return tuple((dev, whole[:d] + (k,) + whole[d + 1:], 0)
                     for k, dev in enumerate(self._flat))

    def devices_indices_map(self, global_shape):
        return {dev: idx for dev, idx, _ in self._layout(global_shape)}

    def addressable_devices_indices_map(self, global_shape):
        return self.devices_indices_map(global_shape)

    def is_equivalent_to(self, other, ndim):
        return self == other

    def __eq__(self, other):
        return (isinstance(other, PmapSharding) and self._flat == other._flat and
                self.sharded_dim == other.sharded_dim)

    def __hash__(self):
        return hash(("PmapSharding", self._flat, self.sharded_dim))

    def __repr__(self):
        return (f"PmapSharding(sharded_dim={self.sharded_dim}, "
                f"devices={[d.id for d in self._flat]})")


# ---------------------------------------------------------------- PartitionSpec

class PartitionSpec(tuple):
    """How each dimension of an array maps to mesh axes: `P('x', None, ('y', 'z'))`
    cuts dimension 0 along mesh axis 'x', keeps dimension 1 whole, and cuts
    dimension 2 along 'y' and 'z' together ('y' major). Dimensions past the
    spec's length are not cut."""

    def __new__(cls, *partitions):
        parts = []
        for p in partitions:
            if isinstance(p, list):
                p = tuple(p)
            if isinstance(p, tuple):
                for name in p:
                    if not isinstance(name, str):
                        raise TypeError(
                            f"PartitionSpec entries must be None, a mesh axis name (str) or a "
                            f"tuple of names; got {p!r}")
                if len(p) == 1:
                    p = p[0]
            elif p is not None and not isinstance(p, str):
                raise TypeError(
                    f"PartitionSpec entries must be None, a mesh axis name (str) or a tuple "
                    f"of names; got {p!r}")
            parts.append(p)
        return super().__new__(cls, parts)

    def __repr__(self):
        return "PartitionSpec" + tuple.__repr__(self)

    __str__ = __repr__

    def __reduce__(self):
        return (PartitionSpec, tuple(self))

    def _normalized(self):
        """The spec without trailing Nones (P('x', None) lays out like P('x'))."""
        parts = list(self)
        while parts and parts[-1] is None:
            parts.pop()
        return tuple(parts)


P = PartitionSpec


def _axes_of(entry):
    return () if entry is None else (entry if isinstance(entry, tuple) else (entry,))


def _show_axes(names):
    return ", ".join(f"`{n}`" for n in names)


# ---------------------------------------------------------------- Mesh

_mesh_stack = threading.local()


class Mesh:
    """An n-dimensional array of devices with a name per axis:
    `Mesh(np.array(olympus.devices()).reshape(2, 4), ('x', 'y'))`. `with mesh:`
    makes it the thread's current mesh (`olympus.sharding.get_mesh()`)."""

    def __init__(self, devices, axis_names):
        from olympus._src.api import CpuDevice
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        devs = np.array(devices, dtype=object) if not isinstance(devices, np.ndarray) else devices
        if devs.ndim != len(axis_names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length "
                f"of its second argument (`axis_names`), but got devices.ndim == {devs.ndim} "
                f"and len(axis_names) == {len(axis_names)}.")
        for n in axis_names:
            if not isinstance(n, str):
                raise TypeError(f"Mesh axis names must be str, got {n!r} in {axis_names!r}")
        if len(set(axis_names)) != len(axis_names):
            dup = sorted({n for n in axis_names if axis_names.count(n) > 1})
            raise ValueError(f"Mesh axis names must be unique, got {axis_names!r} "
                             f"(repeated: {_show_axes(dup)})")
        flat = list(devs.flat)
        for d in flat:
            if not isinstance(d, CpuDevice):
                raise TypeError(f"Mesh devices must be olympus devices, got {d!r}")
        if len(set(flat)) != len(flat):
            raise ValueError(f"Mesh devices must be distinct, got {[d.id for d in flat]}")
        if not flat:
            raise ValueError("Mesh needs at least one device")
        self.devices = devs.copy()
        self.devices.flags.writeable = False
        self.axis_names = axis_names
        self._flat = tuple(flat)

    @property
    def shape(self):
        """OrderedDict axis name -> size."""
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self):
        return tuple(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self):
        return tuple(self.devices.shape)

    @property
    def size(self):
        return len(self._flat)

    @property
    def empty(self):
        return False

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self):
        return list(self._flat)

    @property
    def is_multi_process(self):
        return False

    def __eq__(self, other):
        if self is other:
            return True
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names and
                self.devices.shape == other.devices.shape and self._flat == other._flat)

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape, self._flat))

    def __repr__(self):
        return "Mesh(" + ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple) + ")"

    def __enter__(self):
        stack = getattr(_mesh_stack, "stack", None)
        if stack is None:
            stack = _mesh_stack.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _mesh_stack.stack.pop()
        return False


def get_mesh():
    """The mesh of the innermost `with mesh:` on this thread, or None."""
    stack = getattr(_mesh_stack, "stack", None)
    return stack[-1] if stack else None


def make_mesh(axis_shapes, axis_names, *, devices=None, axis_types=None):
    """A Mesh of the first prod(axis_shapes) devices (default: olympus.devices())
    in the given shape, e.g. `make_mesh((2, 4), ('x', 'y'))`."""
    from olympus._src.api import devices as all_devices
    axis_shapes = tuple(operator.index(s) for s in axis_shapes)
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    axis_names = tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"make_mesh: axis_shapes {axis_shapes} and axis_names {axis_names} "
                         "must have the same length")
    devs = list(all_devices() if devices is None else devices)
    n = math.prod(axis_shapes)
    if n < 1 or n > len(devs):
        raise ValueError(f"Number of devices {len(devs)} must be >= the product of mesh_shape "
                         f"{axis_shapes} (and that product at least 1)")
    return Mesh(np.array(devs[:n], dtype=object).reshape(axis_shapes), axis_names)


# ---------------------------------------------------------------- NamedSharding

class NamedSharding(Sharding):
    """A Mesh and a PartitionSpec: one shard of an array on each device of the
    mesh."""

    def __init__(self, mesh, spec, *, memory_kind=None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a Mesh, got {mesh!r}")
        if spec is None:
            spec = PartitionSpec()
        elif not isinstance(spec, PartitionSpec):
            if not isinstance(spec, (tuple, list)):
                raise TypeError(f"NamedSharding: spec must be a PartitionSpec, got {spec!r}")
            spec = PartitionSpec(*spec)
        counts = collections.Counter(n for e in spec for n in _axes_of(e))
        dup = [n for n, c in counts.items() if c > 1]
        if dup:
            raise ValueError(
                "A single NamedSharding spec specification can map every mesh axis to at most "
                f"one positional dimension, but {spec} has duplicate entries for "
                f"{_show_axes(dup)}")
        for e in spec:
            for n in _axes_of(e):
                if n not in mesh.axis_names:
                    raise ValueError(f"Resource axis: {n} of {spec} is not found in mesh: "
                                     f"{mesh.axis_names}.")
        self.mesh = mesh
        self.spec = spec
        self.memory_kind = memory_kind
        self._key = (mesh, spec._normalized())
        self._maps = {}

    # -- devices
    @property
    def device_set(self):
        return set(self.mesh._flat)

    @property
    def addressable_devices(self):
        return set(self.mesh._flat)

    @property
    def _device_assignment(self):
        return self.mesh._flat

    @property
    def num_devices(self):
        return self.mesh.size

    @property
    def is_fully_addressable(self):
        return True

    @property
    def is_fully_replicated(self):
        sizes = self.mesh.shape
        return math.prod(sizes[n] for e in self.spec for n in _axes_of(e)) == 1

    # -- layout
    def _partitions(self, ndim):
        """Per array dimension, how many blocks it is cut into."""
        sizes = self.mesh.shape
        parts = [1] * ndim
        for i, e in enumerate(self.spec):
            parts[i] = math.prod(sizes[n] for n in _axes_of(e))
        return parts

    def _check_shape(self, global_shape, who=None):
        global_shape = tuple(operator.index(d) for d in global_shape)
        if len(global_shape) < len(self.spec):
            extra = " For scalars the PartitionSpec should be P()" if not global_shape else ""
            raise ValueError(f"Sharding {self} is only valid for values of rank at least "
                             f"{len(self.spec)}, but was applied to a value of rank "
                             f"{len(global_shape)}.{extra}")
        parts = self._partitions(len(global_shape))
        for i, (d, k) in enumerate(zip(global_shape, parts)):
            if d % k:
                if who:
                    raise ValueError(
                        f"One of {who} was given the sharding of {self}, which implies that "
                        f"the global size of its dimension {i} should be divisible by {k}, "
                        f"but it is equal to {d} (full shape: {global_shape})")
                raise ValueError(
                    f"Sharding {self} implies that array axis {i} is partitioned {k} times, "
                    f"but the dimension size is {d} (full shape: {global_shape}, "
                    f"per-dimension tiling factors: {parts} should evenly divide the shape)")
        return global_shape, parts

    def shard_shape(self, global_shape):
        """The shape of each shard of an array of global_shape."""
        global_shape, parts = self._check_shape(global_shape)
        return tuple(d // k for d, k in zip(global_shape, parts))

    def _layout(self, global_shape):
        """(device, index, replica_id) per mesh device in mesh order, cached."""
        global_shape = tuple(operator.index(d) for d in global_shape)
        got = self._maps.get(global_shape)
        if got is not None:
            return got
        global_shape, parts = self._check_shape(global_shape)
        names = self.mesh.axis_names
        sizes = self.mesh.shape
        used = {n for e in self.spec for n in _axes_of(e)}
        unused = [n for n in names if n not in used]
        out = []
        for coords in np.ndindex(*self.mesh.devices.shape):
            at = dict(zip(names, coords))
            index = []
            for i, d in enumerate(global_shape):
                axes = _axes_of(self.spec[i]) if i < len(self.spec) else ()
                if not axes:
                    index.append(slice(None))
                    continue
                block = 0
                for n in axes:  # the first name major
                    block = block * sizes[n] + at[n]
                step = d // parts[i]
                index.append(slice(block * step, (block + 1) * step))
            replica = 0
            for n in unused:
                replica = replica * sizes[n] + at[n]
            out.append((self.mesh.devices[coords], tuple(index), replica))
        out = tuple(out)
        if len(self._maps) < 64:
            self._maps[global_shape] = out
        return out

    def devices_indices_map(self, global_shape):
        """{device: index (a tuple of slices into the global array)}."""
        return {d: idx for d, idx, _ in self._layout(global_shape)}

    def addressable_devices_indices_map(self, global_shape):
        return self.devices_indices_map(global_shape)

    def with_spec(self, spec):
        return NamedSharding(self.mesh, spec)

    def is_equivalent_to(self, other, ndim):
        return self == other

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and (self is other or self._key == other._key)

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"

    def __reduce__(self):
        return (NamedSharding, (self.mesh, self.spec))


__all__ = ["Sharding", "SingleDeviceSharding", "PmapSharding", "NamedSharding", "PartitionSpec", "P", "Mesh", "make_mesh",
           "get_mesh"]

"""olympus's top-level API written in Python: the jit decorator (a thin front for
the C JitFunction), make_jaxpr, ShapeDtypeStruct, devices and helpers."""
import contextlib
import functools
import inspect
import operator

import numpy as np

from olympus import _core

__all__ = ["jit", "make_jaxpr", "ShapeDtypeStruct", "CpuDevice", "devices", "local_devices",
           "device_count", "local_device_count", "process_index", "process_count",
           "block_until_ready", "device_put", "device_get"]


def _int_tuple(x, what):
    if x is None:
        return ()
    if isinstance(x, int):
        return (operator.index(x),)
    try:
        return tuple(operator.index(i) for i in x)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {x!r}") from None


def _str_tuple(x, what):
    if x is None:
        return ()
    if isinstance(x, str):
        return (x,)
    out = tuple(x)
    for s in out:
        if not isinstance(s, str):
            raise TypeError(f"{what} must be a str or a sequence of str, got {x!r}")
    return out


def _static_args(fun, static_argnums, static_argnames):
    """Fill in static_argnames from static_argnums and vice versa through the
    signature (as JAX does when only one of them is given), so that a static
    argument is recognised whether it is passed by position or by name."""
    nums = _int_tuple(static_argnums, "static_argnums")
    names = _str_tuple(static_argnames, "static_argnames")
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return nums, names
    params = list(sig.parameters.values())
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if static_argnums is None or not nums:
        nums = tuple(i for i, p in enumerate(positional)
                     if p.name in names and p.kind == p.POSITIONAL_OR_KEYWORD)
    elif static_argnames is None or not names:
        n = len(positional)
        names = tuple(positional[i].name for i in nums
                      if 0 <= i < n and positional[i].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return nums, names


def jit(fun=None, *, in_shardings=None, out_shardings=None, static_argnums=None,
        static_argnames=None, donate_argnums=None, donate_argnames=None, inline=False,
        keep_unused=False, device=None, backend=None):
    """Compile `fun` with olympus: trace it once per distinct set of argument
    shapes/dtypes (and static argument values), then run the cached program.

    Usable as `@jit`, `jit(f)`, `jit(f, static_argnums=0)`, or
    `functools.partial(jit, static_argnames="n")`. Arguments named in
    static_argnums/static_argnames must be hashable; they are passed to `fun` as
    Python values and a new value means a new trace. `in_shardings` (a sharding,
    or one per positional argument, a pytree prefix; None: as it is) lays out
    the arguments before the call, as device_put; `out_shardings` lays out the
    results. donate_*, inline, keep_unused, device and backend are accepted for
    compatibility and ignored.
    """
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    nums, names = _static_args(fun, static_argnums, static_argnames)
    jitted = _core.jit(fun, static_argnums=nums, static_argnames=names)
    jitted._static_argnums = nums
    if in_shardings is None and out_shardings is None:
        return jitted
    from olympus._src import sharded
    return sharded.ShardedJit(jitted, in_shardings, out_shardings, nums)


class Lowered:
    """`jit(f).lower(*args)`: f traced for these arguments, ahead of a call.
    `as_text()` is the program; `compile()` gives a callable bound to these
    argument types."""

    def __init__(self, jitted, jaxpr, args, kwargs):
        self._jitted = jitted
        self._jaxpr = jaxpr
        self._sig = _arg_signature(jitted, args, kwargs)

    def as_text(self):
        return str(self._jaxpr)

    @property
    def in_avals(self):
        return self._jaxpr.in_avals

    @property
    def out_avals(self):
        return self._jaxpr.out_avals

    def compile(self):
        return Compiled(self)


class Compiled:
    """`jit(f).lower(*args).compile()`: callable with arguments of the types it
    was lowered for (a TypeError names the first that differs)."""

    def __init__(self, lowered):
        self._lowered = lowered

    def as_text(self):
        return self._lowered.as_text()

    def __call__(self, *args, **kwargs):
        lowered = self._lowered
        got = _arg_signature(lowered._jitted, args, kwargs)
        if got != lowered._sig:
            want_tree, want = lowered._sig
            got_tree, have = got
            if got_tree != want_tree:
                detail = f"argument structure {got_tree}, compiled for {want_tree}"
            else:
                k = next(i for i, (a, b) in enumerate(zip(have, want)) if a != b)
                detail = f"leaf {k} is {_sig_str(have[k])}, compiled for {_sig_str(want[k])}"
            raise TypeError("Argument types differ from the types for which this computation "
                            f"was compiled: {detail}")
        return lowered._jitted(*args, **kwargs)


def _sig_str(sig):
    shape, dtype, static = sig
    return f"static {static!r}" if shape is None else f"{np.dtype(dtype).name}{list(shape)}"


def _arg_signature(jitted, args, kwargs):
    """(tree, [(shape, dtype, None) or (None, None, static value)]) of a call."""
    from olympus import tree_util
    nums = getattr(jitted, "_static_argnums", ())
    n = len(args)
    static = {i if i >= 0 else i + n for i in nums}
    marked = [("static", a) if i in static else a for i, a in enumerate(args)]
    leaves, tree = tree_util.tree_flatten((marked, kwargs),
                                          is_leaf=lambda x: isinstance(x, tuple) and len(x) == 2
                                          and x[0] == "static")
    sig = []
    for x in leaves:
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "static":
            sig.append((None, None, x[1]))
        else:
            a = _core.asarray(x) if not hasattr(x, "dtype") else x
            sig.append((tuple(np.shape(a)), _core.canonicalize_dtype(a.dtype), None))
    return tree, sig


def _lower(self, *args, **kwargs):
    """jit(f).lower(*args, **kwargs) -> Lowered (see Lowered)."""
    nums = getattr(self, "_static_argnums", ())
    jaxpr = make_jaxpr(self._fun, static_argnums=nums)(*args, **kwargs)
    return Lowered(self, jaxpr, args, kwargs)


_core.JitFunction.lower = _lower


@contextlib.contextmanager
def ensure_compile_time_eval():
    """`with olympus.ensure_compile_time_eval():` inside a traced function,
    operations on concrete values (none of their arguments traced) run at
    trace time and give concrete arrays, so Python can branch on them;
    operations on traced values are staged as usual."""
    _core.compile_time_eval(True)
    try:
        yield
    finally:
        _core.compile_time_eval(False)


def make_jaxpr(fun, static_argnums=(), *, return_shape=False):
    """`make_jaxpr(f)(*args)` traces f with args and returns the program
    (a Jaxpr; `str()` gives its text, e.g.
    `{ lambda ; a:f32[5]. let b:f32[5] = sin a in (b,) }`). Arguments may be
    arrays or abstract values (objects with .shape and .dtype, such as
    ShapeDtypeStruct). Nothing runs: with return_shape=True the shapes come
    from the traced program."""
    nums = _int_tuple(static_argnums, "static_argnums")
    make = _core.make_jaxpr(fun, static_argnums=nums)

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        jaxpr = _make_abstract(make, nums, args, kwargs)
        if not return_shape:
            return jaxpr
        from olympus import tree_util
        outs = [ShapeDtypeStruct(a.shape, a.dtype) for a in jaxpr.out_avals]
        return jaxpr, tree_util.tree_unflatten(jaxpr.out_tree, outs)
    return traced


def _is_abstract(x):
    """An object standing for an array by its .shape and .dtype alone."""
    return (not isinstance(x, (_core.Array, np.ndarray, np.generic, bool, int, float, complex))
            and not _core.is_tracer(x) and hasattr(x, "shape") and hasattr(x, "dtype"))


def _make_abstract(make, nums, args, kwargs):
    """make(*args, **kwargs), where abstract leaves of the non-static arguments
    become tracers of an enclosing throw-away trace, so that make sees only
    their avals."""
    from olympus import tree_util
    n = len(args)
    static = {i if i >= 0 else i + n for i in nums}
    dyn = [a for i, a in enumerate(args) if i not in static]
    leaves, tree = tree_util.tree_flatten((dyn, kwargs))
    where = [i for i, x in enumerate(leaves) if _is_abstract(x)]
    if not where:
        return make(*args, **kwargs)
    box = []

    def flat(*vals):
        ls = list(leaves)
        for i, v in zip(where, vals):
            ls[i] = v
        d, kw = tree_util.tree_unflatten(tree, ls)
        it = iter(d)
        full = [a if i in static else next(it) for i, a in enumerate(args)]
        box.append(make(*full, **kw))
        return []
    _core.trace(flat, [(tuple(operator.index(s) for s in leaves[i].shape),
                        np.dtype(leaves[i].dtype), bool(getattr(leaves[i], "weak_type", False)))
                       for i in where])
    return box[0]


class ShapeDtypeStruct:
    """A shape and a dtype, standing for an array that does not exist yet (for
    example the declared result of `pure_callback`)."""
    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape, dtype, *, weak_type=False, sharding=None):
        self.shape = tuple(operator.index(d) for d in shape)
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.sharding = sharding

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @classmethod
    def like(cls, x):
        """The ShapeDtypeStruct of x: an array, a tracer, a NumPy array or scalar,
        a Python scalar (its default dtype, weak) or anything with `shape` and
        `dtype`; its weak type is kept. Handy for callback result types:
        `pure_callback(f, ShapeDtypeStruct.like(x), x)`."""
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            x = _core.asarray(x)
        return cls(x.shape, x.dtype, weak_type=bool(getattr(x, "weak_type", False)))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def __eq__(self, other):
        if not isinstance(other, ShapeDtypeStruct):
            return NotImplemented
        return (self.shape, self.dtype, self.weak_type) == (other.shape, other.dtype,
                                                            other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))


class CpuDevice:
    """One CPU device: OLYMPUS_NUM_CPU_DEVICES per process (default 1). Under
    olympus.distributed, process p's local device j has id p * L + j (L local
    devices per process); only a process's own devices run its work."""
    __slots__ = ("id", "process_index")
    platform = "cpu"
    device_kind = "cpu"
    client = None

    def __init__(self, id, process_index=0):
        self.id = id
        self.process_index = process_index

    def __repr__(self):
        return f"CpuDevice(id={self.id})"

    def __str__(self):
        return f"TFRT_CPU_{self.id}"

    def __eq__(self, other):
        return isinstance(other, CpuDevice) and other.id == self.id

    def __hash__(self):
        return hash(("cpu", self.id))


_BACKENDS = ("cpu",)


def _check_backend(backend):
    if backend is None:
        return
    name = getattr(backend, "platform", backend)
    if name not in _BACKENDS:
        raise RuntimeError(f"Unknown backend: '{name}' requested, but no platforms that are "
                           f"instances of {name} are present. Platforms present are: cpu")


def default_backend():
    """The platform of the default device: "cpu"."""
    return "cpu"


def device_count(backend=None):
    """Number of devices of every process (CPU devices: OLYMPUS_NUM_CPU_DEVICES,
    default 1, per process)."""
    return local_device_count(backend) * int(_core.process_count())


def local_device_count(backend=None):
    """Number of this process's devices (OLYMPUS_NUM_CPU_DEVICES, default 1)."""
    _check_backend(backend)
    return int(_core.device_count())


def process_index(backend=None):
    """This process's index: 0, or its rank under olympus.distributed."""
    _check_backend(backend)
    return int(_core.process_index())


def process_count(backend=None):
    """Number of processes: 1, or the mpirun job's size under olympus.distributed."""
    _check_backend(backend)
    return int(_core.process_count())


_device_list = []


def devices(backend=None):
    """The devices of backend (None or "cpu") of every process, as CpuDevice
    objects numbered from 0 (process p's local device j is p * L + j); another
    platform raises RuntimeError."""
    n, nproc = local_device_count(backend), int(_core.process_count())
    if len(_device_list) != n * nproc:
        _device_list[:] = [CpuDevice(p * n + j, p) for p in range(nproc) for j in range(n)]
    return list(_device_list)


def local_devices(process_index=None, backend=None):
    """The devices of one process (default: this one)."""
    p = int(_core.process_index()) if process_index is None else process_index
    return [d for d in devices(backend) if d.process_index == p]


def _local_id(device):
    """The index this process runs device under; ValueError for another
    process's device."""
    me = int(_core.process_index())
    if device.process_index != me:
        raise ValueError(f"{device!r} belongs to process {device.process_index}; this is process "
                         f"{me}, which runs only its own devices (olympus.local_devices())")
    return device.id - me * local_device_count()


def _array_device(x):
    """Array.device: the device the array is on."""
    return local_devices()[x._device_id]


def _array_from_pickle(value):
    """What a pickled Array becomes again (see Array.__reduce__)."""
    import olympus.numpy as jnp
    return jnp.asarray(value)


def block_until_ready(x):
    """Wait until every array in the pytree x is computed; returns x."""
    from olympus import tree_util
    for leaf in tree_util.tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None:
            wait()
    return x


def device_put(x, device=None):
    """Arrays from the leaves of x (array-likes are converted). With a device or
    a SingleDeviceSharding, every leaf is committed to it: computations on
    committed arrays run on their device (mixing devices is an error). With a
    NamedSharding, each leaf is laid out over its mesh, one shard per device
    (olympus.sharding). `device` may also be a pytree of those matching x (a
    prefix of it). Without one, Arrays pass through."""
    from olympus import tree_util
    from olympus.sharding import Sharding
    from olympus._src import sharded

    def put_one(v, where):
        if _core.is_tracer(v):
            return v
        if where is not None and not isinstance(where, (CpuDevice, Sharding)):
            raise TypeError(f"device_put: device must be an olympus device or a sharding, got "
                            f"{where!r}")
        a = v if isinstance(v, _core.Array) else _core.asarray(v)
        if where is None:
            return a
        if isinstance(where, CpuDevice):
            local_id = _local_id(where)
            if a._shards is not None:  # the global value, on that one device
                a = _core.take_block(a, (0,) * a.ndim, a.shape)
            return _core.device_put(a, local_id)
        return sharded.put(a, where)

    def put_tree(v, where):
        if where is None or isinstance(where, (CpuDevice, Sharding)):
            return tree_util.tree_map(lambda leaf: put_one(leaf, where), v)
        # a pytree of devices / shardings: a prefix of the value's structure
        if not isinstance(where, (tuple, list, dict)):
            raise TypeError(f"device_put: device must be an olympus device or a sharding, got "
                            f"{where!r}")
        if isinstance(where, (tuple, list)) and isinstance(v, (tuple, list)) and \
                len(where) == len(v):
            parts = [put_tree(a, w) for a, w in zip(v, where)]
            return type(v)(*parts) if hasattr(v, "_fields") else type(v)(parts)
        if isinstance(where, dict) and isinstance(v, dict) and set(where) == set(v):
            return type(v)((k, put_tree(v[k], where[k])) for k in v)
        raise ValueError(f"device_put: the devices/shardings {where!r} do not match the "
                         f"structure of the value {tree_util.tree_structure(v)}")

    return put_tree(x, device)


def device_get(x):
    """NumPy arrays from the Array leaves of x."""
    from olympus import tree_util
    return tree_util.tree_map(
        lambda v: np.asarray(v) if isinstance(v, _core.Array) else v, x)

"""shard_map: a function run once per device of a Mesh on its block of each
input, as JAX's. Each input is cut into blocks by its PartitionSpec (the
NamedSharding layout: mapped dimensions divided, unnamed mesh axes holding
copies) and stacked along a leading member axis in mesh order; the body is
traced once with every mesh axis name bound and bound as one `pmap` equation
over the mesh (pmap.bind_mesh), so collectives over any subset of the mesh
axes work; each output's per-member blocks are put back together by its
out_spec and returned sharded by NamedSharding(mesh, out_spec). See
docs/design.md, "shard_map"."""
import math

import numpy as np

from olympus import _core
from olympus import tree_util
from olympus._src import multihost as _mh
from olympus._src import pmap as _pmap
from olympus._src import sharded as _sharded
from olympus._src.ad import _leaf_value
from olympus.sharding import Mesh, NamedSharding, PartitionSpec, _axes_of, get_mesh

__all__ = ["shard_map", "experimental_shard_map"]


def _is_spec(s):
    return isinstance(s, PartitionSpec)


def _fun_name(f):
    return getattr(f, "__name__", str(f))


_KINDS = {"f": "f", "i": "i", "u": "u", "c": "c"}


def _short(shape, dtype):
    """JAX's short aval text: f32[8,4]."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        name = "bool"
    elif dt.name == "bfloat16":
        name = "bf16"
    else:
        name = f"{_KINDS.get(dt.kind, dt.name)}{dt.itemsize * 8}"
    return f"{name}[{','.join(str(d) for d in shape)}]"


def _check_specs(kind, specs, mesh):
    """JAX's checks of in_specs / out_specs: PartitionSpec leaves naming mesh
    axes only."""
    if kind == "in" and specs is None:
        raise TypeError(
            "shard_map in_specs argument must be a pytree of `olympus.sharding.PartitionSpec` "
            "instances, but it was None.\nInstead of `in_specs=None`, did you mean "
            "`in_specs=P()`, where `P = olympus.sharding.PartitionSpec`?")
    pairs, _ = tree_util.tree_flatten_with_path(specs, is_leaf=_is_spec)
    bad = [f"  {kind}_specs{tree_util.keystr(k)} is {x!r} of type {type(x).__name__}, "
           for k, x in pairs if not _is_spec(x)]
    if bad:
        raise TypeError(f"shard_map {kind}_specs argument must be a pytree of "
                        f"`olympus.sharding.PartitionSpec` instances, but:\n\n" +
                        "\n\n".join(bad) + f"\n\nCheck the {kind}_specs values passed to "
                        "shard_map.")
    names = set(mesh.axis_names)
    msgs = [f"  {kind}_specs{tree_util.keystr(k)} refers to {n!r}"
            for k, p in pairs for e in p for n in _axes_of(e) if n not in names]
    if msgs:
        raise ValueError(f"shard_map {kind}_specs argument must refer to an axis marked as "
                         f"manual ({frozenset(mesh.axis_names)}), but:\n\n" +
                         "\n\n".join(msgs) + f"\n\nCheck the {kind}_specs values passed to "
                         "shard_map.")
    for k, p in pairs:
        seen = [n for e in p for n in _axes_of(e)]
        dup = sorted({n for n in seen if seen.count(n) > 1})
        if dup:
            raise ValueError(f"shard_map {kind}_specs{tree_util.keystr(k)} is {p!r}, which maps "
                             f"mesh axis {dup[0]!r} to more than one array dimension")


def _broadcast_specs(kind, specs, tree, n_leaves):
    """One (key path, spec) per leaf of tree, specs being a tree prefix of it."""
    pairs, prefix = tree_util.tree_flatten_with_path(specs, is_leaf=_is_spec)
    subtrees = tree_util._flatten_up_to(prefix, tree, f"shard_map {kind}_specs")
    out = []
    for (key, spec), sub in zip(pairs, subtrees):
        out.extend([(key, spec)] * tree_util.tree_structure(sub).num_leaves)
    assert len(out) == n_leaves
    return out


def _parts(spec, mesh, ndim):
    sizes = mesh.shape
    return [math.prod(sizes[n] for n in _axes_of(spec[i])) if i < len(spec) else 1
            for i in range(ndim)]


def _rank_error(kind, f, base, fails):
    name = _fun_name(f)
    msgs = [f"* {kind}_specs{tree_util.keystr(sk)} is {spec!r} which has length {len(spec)}, "
            f"but {base}{tree_util.keystr(lk)} has shape {_short(shape, dt)}, which has rank "
            f"{len(shape)} (and {len(shape)} < {len(spec)})"
            for sk, spec, lk, shape, dt in fails]
    if len(msgs) == 1:
        msgs = [msgs[0][2:]]
    msg = (f"shard_map applied to the function '{name}' was given an {kind}_specs entry which is "
           f"too long to be compatible with the corresponding {kind}put value from the "
           f"function:\n\n" + "\n\n".join(msgs) + "\n\n" +
           f"Entries in {kind}_specs must be of length no greater than the number of axes in "
           f"the corresponding {kind}put value.\n\nEither revise the spec to be shorter, or "
           f"modify '{name}' so that its {kind}puts have sufficient rank.")
    if any(not shape for _, _, _, shape, _ in fails):
        msg += (f"\n\nFor scalar values (rank 0), consider using an {kind}_specs entry of "
                "`P()`, where `P = olympus.sharding.PartitionSpec`.")
    return msg


def _check_args(f, mesh, leaves, keys, specs):
    shapes = [(tuple(np.shape(v)), v.dtype) for v in leaves]
    fails = [(sk, spec, lk, shape, dt) for (sk, spec), lk, (shape, dt)
             in zip(specs, keys, shapes) if len(spec) > len(shape)]
    if fails:
        raise ValueError(_rank_error("in", f, "the passed args", fails))
    msgs = []
    sizes = mesh.shape
    for (sk, spec), lk, (shape, dt) in zip(specs, keys, shapes):
        for d, e in enumerate(spec):
            ns = _axes_of(e)
            sz = math.prod(sizes[n] for n in ns)
            if ns and shape[d] % sz:
                axis = f"axes {ns}" if len(ns) > 1 else f"axis '{ns[0]}'"
                total = "total " if len(ns) > 1 else ""
                msgs.append(
                    f"* the passed args{tree_util.keystr(lk)} of shape {_short(shape, dt)} "
                    f"corresponds to in_specs{tree_util.keystr(sk)} of value {spec!r}, which "
                    f"maps array axis {d} (of size {shape[d]}) to mesh {axis} (of {total}size "
                    f"{sz}), but {sz} does not evenly divide {shape[d]}")
    if msgs:
        if len(msgs) == 1:
            msgs = [msgs[0][2:]]
        name = _fun_name(f)
        raise ValueError(
            f"shard_map applied to the function '{name}' was given argument arrays with axis "
            f"sizes that are not evenly divisible by the corresponding mesh axis sizes:\n\n"
            f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names "
            f"{mesh.axis_names}.\n\n" + "\n\n".join(msgs) + "\n\n"
            "Array arguments' axis sizes must be evenly divisible by the mesh axis or axes "
            "indicated by the corresponding elements of the argument's in_specs entry. "
            "Consider checking that in_specs are correct, and if so consider changing the mesh "
            f"axis sizes or else padding the input and adapting '{name}' appropriately.")


def _leading(spec, mesh, ndim):
    """Whether the stacked layout (members in mesh order, then the block) is
    the global array's own C order: every mesh axis of size > 1 cuts
    dimension 0, in mesh order, and nothing else is cut."""
    sizes = mesh.shape
    big = [n for n in mesh.axis_names if sizes[n] > 1]
    cut = [[n for n in (_axes_of(spec[i]) if i < len(spec) else ()) if sizes[n] > 1]
           for i in range(ndim)]
    if not big:
        return True
    return ndim > 0 and cut[0] == big and not any(cut[1:])


# ---------------------------------------------------------------- inputs

def _stack(v, spec, mesh):
    """v (global) as (members, *block): member k's block of the layout of
    NamedSharding(mesh, spec) at k."""
    import olympus.numpy as jnp
    shape = tuple(np.shape(v))
    parts = _parts(spec, mesh, len(shape))
    block = tuple(d // k for d, k in zip(shape, parts))
    n = mesh.size
    if isinstance(v, _core.Array):
        info = v._shards
        sharding = NamedSharding(mesh, spec)
        if _leading(spec, mesh, len(shape)):  # a view of the global buffer
            glob = v if info is None else _core.take_block(v, (0,) * len(shape), shape)
            return _core.take_block(glob, (0,) * len(shape), shape, (n,) + block)
        zeros = (0,) * len(block)
        if info is not None and info[0] == sharding:  # the array's own shards: one copy
            blocks = [(_core.take_block(s, zeros, block, (1,) + block), (k,) + zeros)
                      for k, s in enumerate(info[1])]
        else:
            blocks = [(_core.take_block(v, tuple(0 if s.start is None else s.start
                                                 for s in idx), block, (1,) + block),
                       (k,) + zeros)
                      for k, (_, idx, _) in enumerate(sharding._layout(shape))]
        return _core.assemble((n,) + block, blocks)
    # traced: the same layout as array operations (jit, grad, vmap see them)
    names, sizes = mesh.axis_names, mesh.shape
    split, where = [], {}
    for i, d in enumerate(shape):
        for a in (_axes_of(spec[i]) if i < len(spec) else ()):
            where[a] = len(split)
            split.append(sizes[a])
        split.append(block[i])
    unnamed = [a for a in names if a not in where]
    u = len(unnamed)
    x = jnp.reshape(v, (1,) * u + tuple(split))
    perm = [unnamed.index(a) if a in unnamed else where[a] + u for a in names]
    mesh_at = set(where.values())
    perm += [j + u for j in range(len(split)) if j not in mesh_at]
    x = jnp.transpose(x, perm)
    x = jnp.broadcast_to(x, tuple(sizes[a] for a in names) + block)
    return jnp.reshape(x, (n,) + block)


# ---------------------------------------------------------------- outputs

def _unstack(o, spec, mesh):
    """The global value of a stacked output (members, *block) by its spec;
    along a mesh axis the spec does not name, the member at coordinate 0."""
    import olympus.numpy as jnp
    ob = tuple(o.shape[1:])
    parts = _parts(spec, mesh, len(ob))
    shape = tuple(d * k for d, k in zip(ob, parts))
    n = mesh.size
    if _leading(spec, mesh, len(ob)):
        if isinstance(o, _core.Array):
            return _core.take_block(o, (0,) * (len(ob) + 1), (n,) + ob, shape)
        return jnp.reshape(o, shape)
    if isinstance(o, _core.Array):
        zeros = (0,) * len(ob)
        blocks = [(_core.take_block(o, (k,) + zeros, (1,) + ob, ob),
                   tuple(0 if s.start is None else s.start for s in idx))
                  for k, (_, idx, rep) in enumerate(NamedSharding(mesh, spec)._layout(shape))
                  if rep == 0]
        return _core.assemble(shape, blocks)
    names, sizes = mesh.axis_names, mesh.shape
    named = [a for e in spec for a in _axes_of(e)]
    unnamed = [a for a in names if a not in named]
    x = jnp.reshape(o, tuple(sizes[a] for a in names) + ob)
    if unnamed:  # replicated along them (the spec promises it): coordinate 0
        front = [names.index(a) for a in unnamed]
        rest = [j for j in range(x.ndim) if j not in front]
        x = jnp.transpose(x, front + rest)
        x = jnp.reshape(x, (math.prod(sizes[a] for a in unnamed),) +
                        tuple(x.shape[len(front):]))[0]
    kept = [a for a in names if a in named]  # the remaining mesh dims, in mesh order
    perm = []
    for i in range(len(ob)):
        perm += [kept.index(a) for a in (_axes_of(spec[i]) if i < len(spec) else ())]
        perm.append(len(kept) + i)
    return jnp.reshape(jnp.transpose(x, perm), shape)


def _check_replicated(f, mesh, o, spec, key):
    """check_rep at run time: along every mesh axis the spec does not name,
    every member's block has the same bits. ValueError (JAX's wording)."""
    names, sizes = mesh.axis_names, mesh.shape
    named = {a for e in spec for a in _axes_of(e)}
    arr = None
    for j, a in enumerate(names):
        if a in named or sizes[a] == 1:
            continue
        if arr is None:
            arr = np.asarray(o).reshape(tuple(sizes[b] for b in names) + tuple(o.shape[1:]))
        first = np.take(arr, 0, axis=j).tobytes()
        for c in range(1, sizes[a]):
            if np.take(arr, c, axis=j).tobytes() != first:
                _replication_error(f, mesh, spec, key, a, c)


def _replication_error(f, mesh, spec, key, a, c):
    raise ValueError(
        f"shard_map applied to the function '{_fun_name(f)}' was given out_specs "
        f"which require replication which the outputs do not have:\n\n"
        f"The mesh given has shape {mesh.axis_sizes} with corresponding axis names "
        f"{mesh.axis_names}.\n\nout_specs{tree_util.keystr(key)} is {spec!r} which "
        f"implies that the corresponding output value is replicated across mesh "
        f"axis '{a}', but it differs between coordinates 0 and {c} of that axis\n\n"
        "Check if these output values are meant to be replicated over those mesh "
        "axes. If not, consider revising the corresponding out_specs entries. If "
        "so, consider disabling the check by passing check_rep=False "
        "(check_vma=False for olympus.shard_map).")


def _result(o, glob, spec, mesh):
    """A concrete output as an Array sharded by NamedSharding(mesh, spec):
    member k's block (a view of the stacked buffer) on mesh device k."""
    ob = tuple(o.shape[1:])
    zeros = (0,) * len(ob)
    if glob.committed:
        glob = _core.take_block(glob, (0,) * glob.ndim, tuple(glob.shape))
    shards = tuple(_core.device_put(_core.take_block(o, (k,) + zeros, (1,) + ob, ob),
                                    _sharded._local_id(dev))
                   for k, dev in enumerate(mesh._flat))
    return _core.make_sharded(glob, NamedSharding(mesh, spec), shards)


# ---------------------------------------------------------------- the transformation

def _shard_map(f, mesh, in_specs, out_specs, check, manual, who):
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, but got {f} of "
                        f"type {type(f)}.")
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map requires a `olympus.sharding.Mesh` instance for its second "
                        f"argument, but got {mesh} of type {type(mesh)}.")

    def wrapped(*args, **kwargs):
        if kwargs:
            raise TypeError(f"{who} does not support keyword arguments; pass {sorted(kwargs)} "
                            "positionally")
        m = mesh if mesh is not None else get_mesh()
        if m is None:
            raise ValueError("shard_map needs a mesh: pass mesh=... or call it inside "
                             "`with mesh:`")
        if manual and frozenset(manual) != frozenset(m.axis_names):
            raise NotImplementedError(
                f"shard_map over a subset of the mesh axes ({sorted(manual)} of "
                f"{m.axis_names}) is not supported: olympus has no automatic partitioner for "
                "the other axes")
        _check_specs("in", in_specs, m)
        _check_specs("out", out_specs, m)
        pairs, in_tree = tree_util.tree_flatten_with_path(args)
        keys = [k for k, _ in pairs]
        across = _mh.spans_processes(m)  # devices of other processes: this process's members
        leaves = [v if isinstance(v, _mh.GlobalArray) else _leaf_value(v) for _, v in pairs]
        specs = _broadcast_specs("in", in_specs, args, len(leaves))
        _check_args(f, m, leaves, keys, specs)
        if across:
            if any(_core.is_tracer(v) for v in leaves):
                raise NotImplementedError(
                    "shard_map over a mesh spanning processes under a transformation (jit, "
                    "grad, vmap) is not supported; call it on arrays")
            stacked = [_mh.local_stack(v, s, m, who) for v, (_, s) in zip(leaves, specs)]
        else:
            stacked = [_stack(v, s, m) for v, (_, s) in zip(leaves, specs)]
        got = []

        def body(*blocks):
            out = f(*tree_util.tree_unflatten(in_tree, list(blocks)))
            opairs, otree = tree_util.tree_flatten_with_path(out)
            ospecs = _broadcast_specs("out", out_specs, out, len(opairs))
            fails = [(sk, s, k, tuple(np.shape(v)), v.dtype)
                     for (sk, s), (k, v) in zip(ospecs, opairs)
                     if len(s) > len(np.shape(v))]
            if fails:
                msg = _rank_error("out", f, f"{_fun_name(f)}(*args)", fails)
                if any(not shape for _, _, _, shape, _ in fails):
                    msg += (" In particular, for rank 0 outputs which are not constant over "
                            "the mesh, add at least one (singleton) axis to them so that they "
                            "can be concatenated using out_specs.")
                raise ValueError(msg)
            got.append((otree, ospecs))
            return [v for _, v in opairs]
        outs = _pmap.bind_mesh(body, list(m.axis_names), list(m.axis_sizes),
                               [d.id for d in m._flat], stacked)
        otree, ospecs = got[-1]
        res = []
        for o, (sk, s) in zip(outs, ospecs):
            concrete = isinstance(o, _core.Array)
            if across:
                if not concrete:
                    raise NotImplementedError(
                        "shard_map over a mesh spanning processes with traced values (jit, "
                        "grad, vmap, closed-over tracers) is not supported")
                if check:
                    bad = _mh.local_unreplicated(m, o, s)
                    if bad:
                        _replication_error(f, m, s, sk, *bad)
                res.append(_mh.local_result(o, s, m))
                continue
            if check and concrete:
                _check_replicated(f, m, o, s, sk)
            glob = _unstack(o, s, m)
            res.append(_result(o, glob, s, m) if concrete else glob)
        return tree_util.tree_unflatten(otree, res)

    wrapped.__wrapped__ = f
    wrapped.__name__ = getattr(f, "__name__", "shard_map_fun")
    wrapped.__doc__ = getattr(f, "__doc__", None)
    return wrapped


def experimental_shard_map(f, mesh, in_specs, out_specs, check_rep=True, auto=frozenset()):
    """olympus.experimental.shard_map.shard_map: f run once per device of mesh
    on one block of each input (cut by in_specs, a tree prefix of the
    arguments of PartitionSpecs), its outputs' blocks put together by
    out_specs; collectives over the mesh axes work inside f. check_rep:
    outputs whose spec leaves out a mesh axis must be the same along it
    (checked at run time on concrete results; trusted under jit / grad)."""
    if auto:
        raise NotImplementedError("shard_map auto= (axes left to an automatic partitioner) is "
                                  "not supported")
    return _shard_map(f, mesh, in_specs, out_specs, check_rep, frozenset(), "shard_map")


def shard_map(f=None, /, *, out_specs, in_specs=None, mesh=None, axis_names=frozenset(),
              check_vma=True, check_rep=None):
    """olympus.shard_map (JAX's newer spelling): keyword-only specs and mesh
    (None: the mesh of the innermost `with mesh:`); usable as a decorator."""
    check = check_vma if check_rep is None else check_rep

    def make(g):
        return _shard_map(g, mesh, in_specs, out_specs, check, frozenset(axis_names),
                          "shard_map")
    return make if f is None else make(f)

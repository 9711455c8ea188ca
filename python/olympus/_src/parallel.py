"""Collectives over named axes: JAX's lax.psum, pmax, pmin, pmean, all_gather,
psum_scatter, ppermute, pshuffle, all_to_all, axis_index and axis_size.

A collective names the mapped axis it acts over. Today the only binder of
names is `olympus.vmap(f, axis_name=...)`: while vmap traces and batches f,
its (name, size) frame is on this thread's axis environment (`axis_frame`),
so a collective naming an axis no enclosing vmap binds raises
`NameError: unbound axis name: i` when it is traced, as in JAX. The
collective itself is a primitive (src/prims/collective.c) whose batch rule,
run by the vmap that binds its name, rewrites it into ordinary array
operations over the batch (docs/design.md, "Collectives").

Axis names are strings (JAX allows any hashable; here they travel to C as the
tuple text "('i',)"). A tuple of names acts over their product, the first
name major: psum, pmax, pmin reduce over every name in one equation;
all_gather, psum_scatter and axis_index are composed from one name at a time;
ppermute and all_to_all take one name. axis_index_groups is not supported
(JAX's vmap does not support it either).
"""
import contextlib
import math
import operator
import threading

import numpy as np

from olympus import _core

__all__ = ["psum", "pmax", "pmin", "pmean", "all_gather", "psum_scatter", "ppermute",
           "pshuffle", "all_to_all", "axis_index", "axis_size"]

# ------------------------------------------------------------------ the axis environment

_env = threading.local()


def _frames():
    frames = getattr(_env, "frames", None)
    if frames is None:
        frames = _env.frames = []
    return frames


def check_axis_name(name):
    """name if it can name an axis (a non-empty str with no quote or backslash)."""
    if not isinstance(name, str):
        raise TypeError(f"olympus axis names are strings, got {name!r} of type "
                        f"{type(name).__name__}")
    if not name or "'" in name or "\\" in name:
        raise ValueError(f"axis name {name!r} must be a non-empty string without quotes or "
                         "backslashes")
    return name


def axis_env():
    """This thread's bound axes, ((name, size), ...), innermost last: part of
    jit's cache key for calls traced inside them."""
    return tuple(_frames())


@contextlib.contextmanager
def axis_frame(name, size):
    """Binds axis `name` of `size` on this thread while the block runs (vmap
    traces and batches its function inside one); name None binds nothing."""
    if name is None:
        yield
        return
    frames = _frames()
    frames.append((name, int(size)))
    try:
        yield
    finally:
        frames.pop()


def _names(axis_name):
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if not names:
        raise ValueError("a collective needs at least one axis name")
    for n in names:
        check_axis_name(n)
    for n in names:
        _size_of(n)
    return names


def _size_of(name):
    for n, size in reversed(_frames()):
        if n == name:
            return size
    raise NameError(f"unbound axis name: {name}")


def _text(names):
    return "(" + ", ".join(f"'{n}'" for n in names) + ("," if len(names) == 1 else "") + ")"


def _no_groups(axis_index_groups, who):
    if axis_index_groups is not None:
        raise NotImplementedError(f"{who}: axis_index_groups is not supported (vmap "
                                  "collectives have none in JAX either)")


def _one_name(axis_name, who):
    names = _names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"{who} over several axis names {names} is not supported; "
                                  "name one axis")
    return names[0]


def _leaves(x):
    return _core.tree_flatten(x)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _is_bool(x):
    dt = getattr(x, "dtype", None)
    return np.dtype(dt if dt is not None else np.result_type(x)) == np.bool_


def _ndim(x):
    s = getattr(x, "shape", None)
    return len(s) if s is not None else np.ndim(x)


def _canonical_axis(axis, ndim, who):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{who}: axis {axis} is out of bounds for rank {ndim}")
    return axis % ndim


# ------------------------------------------------------------------ reductions

def axis_size(axis_name):
    """The size of the mapped axis axis_name (the product over a tuple of names),
    a Python int; NameError when no enclosing vmap binds it."""
    return math.prod(_size_of(n) for n in _names(axis_name))


def _reduction(prim, x, axis_name, axis_index_groups, constant):
    _no_groups(axis_index_groups, prim)
    names = _names(axis_name)
    leaves, tree = _leaves(x)
    if prim == "psum":
        from olympus import lax
        leaves = [lax.convert_element_type(v, np.int32) if _is_bool(v) else v for v in leaves]
    if not leaves:
        return x
    if not any(_core.is_tracer(v) for v in leaves):
        # every index along the axes holds this same value (JAX's constant case)
        size = math.prod(_size_of(n) for n in names)
        return _core.tree_unflatten(tree, [constant(v, size) for v in leaves])
    outs = _core.bind(prim, tuple(leaves), {"axes": _text(names)})
    return _core.tree_unflatten(tree, list(_as_tuple(outs)))


def _times(v, size):
    if isinstance(v, (bool, int, float, complex)):
        return v * size
    return _core.asarray(v) * size


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum of x over the mapped axis axis_name (or a tuple of names), the
    same for every index along it; x may be a pytree. Bool leaves are summed as
    int32. A value that does not vary along the axis (not traced) gives
    axis_size * x without a primitive, so psum(1, 'i') is the axis size."""
    return _reduction("psum", x, axis_name, axis_index_groups, _times)


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum of x over the mapped axis axis_name (not differentiable, as
    in JAX)."""
    return _reduction("pmax", x, axis_name, axis_index_groups, lambda v, size: v)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum of x over the mapped axis axis_name (not differentiable, as
    in JAX)."""
    return _reduction("pmin", x, axis_name, axis_index_groups, lambda v, size: v)


def pmean(x, axis_name, *, axis_index_groups=None):
    """psum(x) / the axis size (a float result for integer x)."""
    _no_groups(axis_index_groups, "pmean")
    total = psum(x, axis_name)
    n = psum(1, axis_name)
    leaves, tree = _leaves(total)
    return _core.tree_unflatten(tree, [v / n for v in leaves])


# ------------------------------------------------------------------ data movement

def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """x of every index along axis_name: stacked on a new dim `axis` of size
    axis_size (untiled) or concatenated along dim `axis` (tiled); the same for
    every index. A tuple of names gathers over their product, the first name
    major."""
    _no_groups(axis_index_groups, "all_gather")
    names = _names(axis_name)
    leaves, tree = _leaves(x)

    def one(v):
        ax = _canonical_axis(axis, _ndim(v) if tiled else _ndim(v) + 1, "all_gather")
        for k, name in enumerate(reversed(names)):
            params = {"all_gather_dimension": ax, "axis_name": _text((name,)),
                      "axis_size": _size_of(name), "tiled": bool(tiled or k > 0)}
            v = _core.bind("all_gather", (v,), params)
        return v
    return _core.tree_unflatten(tree, [one(v) for v in leaves])


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Like psum(x, axis_name), but index k along the axis keeps only block k of
    the sum along scatter_dimension: untiled, that dim must have the axis size
    and is removed; tiled, it must be divisible by it and shrinks (the
    reduce_scatter primitive, as in JAX)."""
    _no_groups(axis_index_groups, "psum_scatter")
    names = _names(axis_name)
    leaves, tree = _leaves(x)

    def one(v):
        sd = _canonical_axis(scatter_dimension, _ndim(v), "psum_scatter")
        for k, name in enumerate(names):
            last = k == len(names) - 1
            params = {"axis_name": _text((name,)), "axis_size": _size_of(name),
                      "scatter_dimension": sd, "tiled": bool(tiled or not last)}
            v = _core.bind("reduce_scatter", (v,), params)
        return v
    return _core.tree_unflatten(tree, [one(v) for v in leaves])


def ppermute(x, axis_name, perm):
    """Index d along axis_name receives x of index s for each pair (s, d) in
    perm; an index no pair sends to receives zeros. Sources must be distinct,
    and destinations too."""
    name = _one_name(axis_name, "ppermute")
    size = _size_of(name)
    pairs = []
    for pair in perm:
        s, d = (operator.index(v) for v in pair)
        if not (0 <= s < size and 0 <= d < size):
            raise ValueError(f"ppermute: pair {(s, d)} is outside the axis {name!r} of size "
                             f"{size}")
        pairs.append((s, d))
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    text = "(" + ", ".join(f"({s}, {d})" for s, d in pairs) + ("," if len(pairs) == 1 else "") + ")"
    params = {"axis_name": _text((name,)), "perm": text}
    leaves, tree = _leaves(x)
    return _core.tree_unflatten(tree, [_core.bind("ppermute", (v,), params) for v in leaves])


def pshuffle(x, axis_name, perm):
    """ppermute with the sources listed by destination: index i receives
    x of index perm[i]; perm must be a permutation of range(axis size)."""
    perm = [operator.index(p) for p in perm]
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Index k along axis_name sends block j of its split_axis to index j, and
    concatenates what it receives along concat_axis in index order. Untiled,
    x.shape[split_axis] must equal the axis size: that dim goes and a new one
    of the axis size appears at concat_axis. Tiled, split_axis is divided by
    the axis size and concat_axis multiplied."""
    _no_groups(axis_index_groups, "all_to_all")
    name = _one_name(axis_name, "all_to_all")
    size = _size_of(name)
    from olympus import lax
    leaves, tree = _leaves(x)

    def one(v):
        nd = _ndim(v)
        split = _canonical_axis(split_axis, nd, "all_to_all")
        concat = _canonical_axis(concat_axis, nd, "all_to_all")
        shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
        if tiled:
            if shape[split] % size:
                raise ValueError(f"The size of all_to_all split_axis ({shape[split]}) has to be "
                                 f"divisible by the size of the named axis {name} ({size})")
        else:
            if shape[split] != size:
                raise ValueError("all_to_all requires the size of the mapped axis axis_name to "
                                 "equal x.shape[split_axis], but they are "
                                 f"{size} and {shape[split]} respectively.")
            if split < concat:
                concat += 1  # concat_axis is a position after split_axis is removed
                v = lax.expand_dims(v, (concat,))
            elif split > concat:
                v = lax.expand_dims(v, (concat,))
                split += 1
        params = {"axis_name": _text((name,)), "axis_size": size, "concat_axis": concat,
                  "split_axis": split}
        r = _core.bind("all_to_all", (v,), params)
        if not tiled and split != concat:
            r = lax.squeeze(r, (split,))
        return r
    return _core.tree_unflatten(tree, [one(v) for v in leaves])


def axis_index(axis_name):
    """The int32 position along the mapped axis axis_name; for a tuple of names,
    the position in their product (the first name major)."""
    names = _names(axis_name)
    index = None
    inner = 1
    for name in reversed(names):
        i = _core.bind("axis_index", (), {"axis_name": _text((name,))})
        term = i * inner if inner != 1 else i
        index = term if index is None else index + term
        inner *= _size_of(name)
    return index

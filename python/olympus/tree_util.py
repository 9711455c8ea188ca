"""Pytrees: nested tuples, lists, dicts (sorted keys), None, namedtuples and
registered types, flattened to a list of leaves and a PyTreeDef. Flattening and
the registry are C (`olympus._core`); this module adds the conveniences."""
import functools

from olympus import _core

PyTreeDef = _core.PyTreeDef
tree_flatten = _core.tree_flatten
tree_unflatten = _core.tree_unflatten
register_pytree_node = _core.register_pytree_node

__all__ = ["PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure",
           "tree_map", "tree_all", "tree_reduce", "register_pytree_node",
           "register_pytree_node_class", "Partial", "treedef_children", "all_leaves"]


tree_leaves = _core.tree_leaves  # (tree, is_leaf=None) -> the leaves, left to right


def tree_structure(tree, is_leaf=None):
    """The PyTreeDef of tree."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_children(treedef):
    return treedef.children()


def tree_map(f, tree, *rest, is_leaf=None):
    """f applied leafwise: `f(leaf, *corresponding leaves of rest)`; every tree in
    rest must have tree's structure."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r, is_leaf)
        if r_def != treedef:
            raise ValueError(f"tree_map: Custom node type mismatch; expected {treedef}, "
                             f"got {r_def}")
        others.append(r_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def tree_all(tree, is_leaf=None):
    return all(tree_leaves(tree, is_leaf))


_NO_INITIAL = object()


def tree_reduce(function, tree, initializer=_NO_INITIAL, is_leaf=None):
    if initializer is _NO_INITIAL:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


def all_leaves(iterable, is_leaf=None):
    """True if every element of iterable is a leaf."""
    return all(tree_structure(x, is_leaf).num_leaves == 1 and
               tree_leaves(x, is_leaf) == [x] for x in iterable)


def register_pytree_node_class(cls):
    """Class decorator: registers cls with its `tree_flatten()` method and its
    `tree_unflatten(aux_data, children)` classmethod. Returns cls."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


class Partial(functools.partial):
    """A functools.partial that is a pytree: the function is static, the bound
    positional and keyword arguments are its children (so it can be passed to
    and returned from jitted functions)."""

    __slots__ = ()


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)

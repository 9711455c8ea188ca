"""olympus.tree: the short names of olympus.tree_util (`olympus.tree.map`,
`olympus.tree.leaves`, ...), as `jax.tree`."""
import dataclasses

from olympus import tree_util as _tu

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]


def all(tree, *, is_leaf=None):
    """True when every leaf is truthy."""
    return _tu.tree_all(tree, is_leaf=is_leaf)


def flatten(tree, is_leaf=None):
    """(leaves, treedef)."""
    return _tu.tree_flatten(tree, is_leaf)


def leaves(tree, is_leaf=None):
    """The leaves, left to right."""
    return _tu.tree_leaves(tree, is_leaf)


def map(f, tree, *rest, is_leaf=None):
    """f(leaf, *corresponding subtrees of rest) at every leaf of tree."""
    return _tu.tree_map(f, tree, *rest, is_leaf=is_leaf)


def reduce(function, tree, initializer=_tu._NO_INITIAL, is_leaf=None):
    """functools.reduce of function over the leaves."""
    return _tu.tree_reduce(function, tree, initializer, is_leaf=is_leaf)


def reduce_associative(operation, tree, *, identity=_tu._NO_INITIAL, is_leaf=None):
    """The leaves combined pairwise (operation must be associative)."""
    return _tu.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def structure(tree, is_leaf=None):
    """The PyTreeDef of tree."""
    return _tu.tree_structure(tree, is_leaf)


def transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """An outer structure of inner structures as an inner structure of outer ones."""
    return _tu.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def unflatten(treedef, leaves):
    """The tree of structure treedef with these leaves."""
    return _tu.tree_unflatten(treedef, leaves)


def flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """([(key_path, leaf)], treedef)."""
    return _tu.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """[(key_path, leaf)], left to right."""
    return _tu.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path)


def map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """f(key_path, leaf, *corresponding subtrees of rest) at every leaf of tree."""
    return _tu.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf,
                                  is_leaf_takes_path=is_leaf_takes_path)


def broadcast(prefix_tree, full_tree, is_leaf=None):
    """full_tree's structure, each leaf replaced by prefix_tree's leaf above it."""
    return _tu.tree_broadcast(prefix_tree, full_tree, is_leaf=is_leaf)


def static(**kwargs):
    """dataclasses.field marked static: register_dataclass makes it aux data."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)

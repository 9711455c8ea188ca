"""Pytrees: nested tuples, lists, dicts (sorted keys), None, namedtuples and
registered types, flattened to a list of leaves and a PyTreeDef. Flattening and
the registry are C (`olympus._core`); this module adds the conveniences: key
paths, prefix matching (`tree_map` over trees that extend the first one),
dataclass / keyed registration, transpose and broadcast.

Key paths are computed here, one level at a time, in the order the C flatten
visits nodes, so `tree_flatten_with_path` and `tree_flatten` always agree on
the leaves. Types registered through this module remember how to name their
children (`register_pytree_with_keys`, `register_dataclass`); types registered
straight through `_core.register_pytree_node` get `FlattenedIndexKey`s.
"""
import collections
import dataclasses
import functools
from typing import Any, Hashable, Tuple

from olympus import _core

PyTreeDef = _core.PyTreeDef
tree_flatten = _core.tree_flatten      # (tree, is_leaf=None) -> (leaves, treedef)
tree_unflatten = _core.tree_unflatten  # (treedef, leaves) -> tree
tree_leaves = _core.tree_leaves        # (tree, is_leaf=None) -> the leaves, left to right
treedef_is_leaf = _core.treedef_is_leaf

__all__ = [
    "PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
    "tree_all", "tree_reduce", "tree_reduce_associative", "tree_transpose", "tree_broadcast",
    "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path", "keystr",
    "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey", "KeyEntry", "KeyPath",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_dataclass", "register_static", "Partial",
    "treedef_children", "treedef_is_leaf", "treedef_tuple", "all_leaves", "flatten_one_level",
    "flatten_one_level_with_keys",
]


# ------------------------------------------------------------------ key entries

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A tuple or list position: prints as `[0]`."""
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """A dict key: prints as `['a']`."""
    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """An attribute (namedtuple field, dataclass field): prints as `.name`."""
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The i-th child of a node registered without keys: prints as `[<flat index 0>]`."""
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


KeyEntry = Any
KeyPath = Tuple[Any, ...]


def _simple_entrystr(key):
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, (DictKey, FlattenedIndexKey)):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return str(key.name)
    return str(key)


def keystr(keys, *, simple=False, separator=""):
    """The key path as text: `"['a'][0].b"`; simple=True drops the brackets
    (`"a/0/b"` with separator="/")."""
    return separator.join(map(_simple_entrystr if simple else str, keys))


# ------------------------------------------------------------------ registry (Python side)

# type -> flatten_with_keys(x) -> (((key, child), ...), aux). Only for types that
# named their children; the C registry holds every registered type.
_key_flatteners = {}
# type -> flatten(x) -> (children, aux), for every type registered through this module.
_flatteners = {}


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Registers nodetype as a pytree node: `flatten_func(x) -> (children, aux_data)`,
    `unflatten_func(aux_data, children) -> x`; aux_data must be hashable and
    comparable (it is part of the PyTreeDef). `flatten_with_keys_func(x) ->
    (((key, child), ...), aux_data)` names the children in key paths; without it
    they are `FlattenedIndexKey(i)`. Raises ValueError for a type registered twice."""
    _core.register_pytree_node(nodetype, flatten_func, unflatten_func)
    _flatteners[nodetype] = flatten_func
    if flatten_with_keys_func is not None:
        _key_flatteners[nodetype] = flatten_with_keys_func


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """register_pytree_node with named children: `flatten_with_keys(x) ->
    (((key, child), ...), aux_data)`. flatten_func (the same children, no keys)
    is a faster path for plain flattening; derived when omitted."""
    if flatten_func is None:
        def flatten_func(x):
            keyed, aux = flatten_with_keys(x)
            return [c for _, c in keyed], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls):
    """Class decorator: registers cls with its `tree_flatten()` method and its
    `tree_unflatten(aux_data, children)` classmethod. Returns cls."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator: registers cls with `tree_flatten_with_keys()`,
    `tree_unflatten(aux_data, children)` and, if defined, `tree_flatten()`."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              flatten)
    return cls


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass (or any class built from keyword arguments) as a
    pytree: data_fields are children (key paths `.name`), meta_fields are static
    aux data (hashable). Without the two lists, nodetype must be a dataclass:
    fields with `metadata={"static": True}` are meta, the rest data, drop_fields
    neither. Returns nodetype, so it works as a class decorator."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            "specified when either is specified. Got "
                            f"data_fields={data_fields!r} meta_fields={meta_fields!r}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required when "
                            f"nodetype is not a dataclass. Got nodetype={nodetype!r}.")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields.difference_update(drop_fields)
        given = {*data_fields, *meta_fields}
        if given != init_fields:
            msg = ("data_fields and meta_fields must include all dataclass fields with "
                   "``init=True`` and only them.")
            if init_fields - given:
                msg += (f" Missing fields: {init_fields - given}. Add them to drop_fields to "
                        "suppress this error.")
            if given - init_fields:
                msg += f" Unexpected fields: {given - init_fields}."
            raise ValueError(msg)
    overlap = set(data_fields) & set(meta_fields)
    if overlap:
        raise ValueError("data_fields and meta_fields must not overlap. Overlapping fields: "
                         f"{overlap}.")

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def register_static(cls):
    """Registers cls as a pytree with no leaves: the instance itself is aux data
    (so it must be hashable), static under jit. Returns cls."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


# ------------------------------------------------------------------ one level of a tree

_NONE = type(None)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _node(x):
    """(kind, keys, children, aux) of the top node of x, or None when x is a
    leaf. kind is the node's type; the children are those the C flatten visits,
    in its order."""
    t = type(x)
    if x is None:
        return _NONE, (), (), None
    if t is tuple or t is list:
        return t, [SequenceKey(i) for i in range(len(x))], list(x), None
    if t is dict:
        keys = sorted(x)
        return dict, [DictKey(k) for k in keys], [x[k] for k in keys], tuple(keys)
    fwk = _key_flatteners.get(t)
    if fwk is not None:
        keyed, aux = fwk(x)
        keyed = list(keyed)
        return t, [k for k, _ in keyed], [c for _, c in keyed], aux
    flat = _flatteners.get(t)
    if flat is not None:
        children, aux = flat(x)
        children = list(children)
        return t, [FlattenedIndexKey(i) for i in range(len(children))], children, aux
    if _is_namedtuple(x):
        return t, [GetAttrKey(f) for f in t._fields], list(x), t
    # A type registered in C only (or a leaf): one level through the C flatten.
    children, td = tree_flatten(x, lambda y: y is not x)
    if treedef_is_leaf(td):
        return None
    return t, [FlattenedIndexKey(i) for i in range(len(children))], children, td


def flatten_one_level(tree):
    """(children, aux_data) of the top node of tree; ValueError for a leaf."""
    node = _node(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return node[2], node[3]


def flatten_one_level_with_keys(tree):
    """(((key, child), ...), aux_data) of the top node of tree; ValueError for a leaf."""
    node = _node(tree)
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return list(zip(node[1], node[2])), node[3]


# ------------------------------------------------------------------ paths

def _flatten_with_path(tree, is_leaf):
    """[(path, leaf)] and the decisions is_leaf(path, x) made, in visiting order."""
    out, decisions = [], []

    def walk(x, path):
        if is_leaf is not None:
            d = bool(is_leaf(path, x))
            decisions.append(d)
            if d:
                out.append((path, x))
                return
        node = _node(x)
        if node is None:
            out.append((path, x))
            return
        for k, c in zip(node[1], node[2]):
            walk(c, path + (k,))
    walk(tree, ())
    return out, decisions


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """([(key_path, leaf)], treedef): tree_flatten with each leaf's key path, a
    tuple of SequenceKey / DictKey / GetAttrKey / FlattenedIndexKey (see keystr).
    is_leaf(x), or is_leaf(path, x) with is_leaf_takes_path, stops the descent."""
    pred = is_leaf
    if is_leaf is not None and not is_leaf_takes_path:
        pred = lambda _, x: is_leaf(x)  # noqa: E731
    pairs, decisions = _flatten_with_path(tree, pred)
    if pred is None:
        treedef = tree_flatten(tree)[1]
    else:  # the C flatten meets the same nodes in the same order: replay the answers
        replay = iter(decisions)
        treedef = tree_flatten(tree, lambda _: next(replay))[1]
    return pairs, treedef


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """[(key_path, leaf)], left to right."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """f(key_path, leaf, *corresponding subtrees of rest) at every leaf of tree;
    tree's structure must be a prefix of each tree in rest."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to(treedef, r, "tree_map_with_path") for r in rest]
    return tree_unflatten(treedef, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


# ------------------------------------------------------------------ prefixes

class _Hole:
    """The leaf of a prefix tree rebuilt from a PyTreeDef."""
    __slots__ = ()

    def __repr__(self):
        return "*"


_HOLE = _Hole()


def _mismatch(kind, p, f):
    if kind is _NONE:
        return f"Expected None, got {f!r}."
    if f is None or _node(f) is None or type(f) is not kind:
        name = {tuple: "tuple", list: "list", dict: "dict"}.get(kind)
        if name is None:
            name = "named tuple" if _is_namedtuple(p) else f"{kind.__name__} node"
        return f"Expected {name}, got {f!r}."
    if kind is tuple or kind is list:
        return (f"{kind.__name__.capitalize()} arity mismatch: {len(f)} != {len(p)}; "
                f"{kind.__name__}: {f!r}.")
    if kind is dict:
        return f"Dict key mismatch; expected keys: {sorted(p)}; dict: {f!r}."
    return f"Custom node type mismatch; expected {tree_structure(p, lambda y: y is not p)}, " \
           f"got {f!r}."


def _flatten_up_to(treedef, tree, who):
    """The subtrees of tree at the leaves of treedef (which must be a prefix of
    tree's structure), left to right; ValueError naming the key path otherwise."""
    leaves, td = tree_flatten(tree)
    if td == treedef:
        return leaves
    out = []

    def walk(p, f, path):
        if p is _HOLE:
            out.append(f)
            return
        pn, fn = _node(p), _node(f)
        ok = fn is not None and pn[0] is fn[0] and len(pn[2]) == len(fn[2])
        if ok and pn[0] is dict:
            ok = pn[3] == fn[3]
        elif ok and pn[0] not in (tuple, list, _NONE):
            ok = tree_structure(p, lambda y: y is not p) == tree_structure(f, lambda y: y is not f)
        if not ok:
            where = f" (at key path {keystr(path) or '()'})" if path else ""
            raise ValueError(f"{who}: {_mismatch(pn[0], p, f)}{where}")
        for k, a, b in zip(pn[1], pn[2], fn[2]):
            walk(a, b, path + (k,))
    walk(tree_unflatten(treedef, [_HOLE] * treedef.num_leaves), tree, ())
    return out


# ------------------------------------------------------------------ the rest of the API

def tree_structure(tree, is_leaf=None):
    """The PyTreeDef of tree."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_children(treedef):
    """The PyTreeDefs of the root's children."""
    return treedef.children()


def treedef_tuple(treedefs):
    """The PyTreeDef of a tuple whose children have these structures."""
    return tree_structure(tuple(tree_unflatten(td, [_HOLE] * td.num_leaves) for td in treedefs))


def tree_map(f, tree, *rest, is_leaf=None):
    """f applied leafwise: `f(leaf, *corresponding subtrees of rest)`; tree's
    structure must be a prefix of each tree in rest (usually they are equal)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return tree_unflatten(treedef, [f(x) for x in leaves])
    others = [_flatten_up_to(treedef, r, "tree_map") for r in rest]
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def tree_all(tree, *, is_leaf=None):
    """True when every leaf is truthy."""
    return all(tree_leaves(tree, is_leaf))


_NO_INITIAL = object()


def tree_reduce(function, tree, initializer=_NO_INITIAL, is_leaf=None):
    """functools.reduce of function over the leaves."""
    if initializer is _NO_INITIAL:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


def tree_reduce_associative(operation, tree, *, identity=_NO_INITIAL, is_leaf=None):
    """The leaves combined pairwise as a balanced tree (operation must be
    associative); identity is returned for a tree without leaves."""
    def reduce(xs):
        if len(xs) == 1:
            return xs[0]
        mid = len(xs) // 2
        return operation(reduce(xs[:mid]), reduce(xs[mid:]))
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIAL:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return reduce(leaves)


def _compose(outer, inner):
    sub = tree_unflatten(inner, [_HOLE] * inner.num_leaves)
    return tree_structure(tree_unflatten(outer, [sub] * outer.num_leaves))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """An outer structure of inner structures turned into an inner structure of
    outer structures; inner_treedef=None takes it from the first subtree."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(
            _flatten_up_to(outer_treedef, pytree_to_transpose, "tree_transpose")[0])
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{_compose(outer_treedef, inner_treedef)}")
    rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
    return tree_unflatten(inner_treedef,
                          [tree_unflatten(outer_treedef, col) for col in zip(*rows)])


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """full_tree's structure with each leaf replaced by the leaf of prefix_tree
    above it."""
    leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to(prefix_def, full_tree, "tree_broadcast")
    out = []
    for x, sub in zip(leaves, subtrees):
        out.extend([x] * tree_structure(sub).num_leaves)
    return tree_unflatten(tree_structure(full_tree), out)


def all_leaves(iterable, is_leaf=None):
    """True if every element of iterable is a leaf."""
    return all(tree_structure(x, is_leaf).num_leaves == 1 and
               tree_leaves(x, is_leaf) == [x] for x in iterable)


# ------------------------------------------------------------------ Partial and the stdlib

class _HashableCallableShim:
    """Hides a functools.partial from functools.partial.__new__ (which would merge
    its arguments into the new one's) while comparing and hashing as it."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self):
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """A functools.partial that is a pytree: the function is static, the bound
    positional and keyword arguments are its children (so it can be passed to
    and returned from jitted functions). A partial passed as the function stays
    static whole: its own bound arguments are not children."""

    __slots__ = ()

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):
            shim = _HashableCallableShim(func)
            out = super().__new__(cls, shim, *args, **kw)
            shim.func, shim.args, shim.keywords = func.func, func.args, func.keywords
            return out
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)

register_pytree_with_keys(
    collections.OrderedDict,
    lambda x: (tuple((DictKey(k), x[k]) for k in x), tuple(x)),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
)


def _flatten_defaultdict_with_keys(d):
    keys = tuple(sorted(d))
    return tuple((DictKey(k), d[k]) for k in keys), (d.default_factory, keys)


register_pytree_with_keys(
    collections.defaultdict,
    _flatten_defaultdict_with_keys,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)),
)

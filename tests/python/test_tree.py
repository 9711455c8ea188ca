"""olympus.tree and the rest of olympus.tree_util: key paths (printed as JAX
prints them), registration with keys and of dataclasses, Partial, prefix
matching in tree_map, transpose, broadcast and the reductions."""
import collections
import dataclasses
import functools

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import tree_util as tu

_core = olympus._core
SK, DK, GK, FK = tu.SequenceKey, tu.DictKey, tu.GetAttrKey, tu.FlattenedIndexKey

Point = collections.namedtuple("Point", "x y")


class Pair:
    """Registered in C only (no keys): children get FlattenedIndexKey."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)


_core.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))


class Named:
    """Registered with keys: children named by DictKey('left') / DictKey('right')."""

    def __init__(self, left, right, tag="t"):
        self.left, self.right, self.tag = left, right, tag

    def __eq__(self, other):
        return type(other) is Named and (self.left, self.right, self.tag) == \
            (other.left, other.right, other.tag)


tu.register_pytree_with_keys(
    Named,
    lambda n: (((DK("left"), n.left), (DK("right"), n.right)), n.tag),
    lambda tag, ch: Named(*ch, tag=tag))


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    act: str = dataclasses.field(default="relu", metadata=dict(static=True))


@functools.partial(tu.register_dataclass, data_fields=["x"], meta_fields=["n"])
@dataclasses.dataclass(frozen=True)
class Explicit:
    x: object
    n: int


@dataclasses.dataclass
class ViaStatic:
    v: object
    name: str = olympus.tree.static(default="s")


tu.register_dataclass(ViaStatic)


@tu.register_pytree_with_keys_class
class Boxed:
    def __init__(self, items):
        self.items = items

    def tree_flatten_with_keys(self):
        return [(GK(f"items[{i}]"), v) for i, v in enumerate(self.items)], len(self.items)

    @classmethod
    def tree_unflatten(cls, n, children):
        return cls(list(children))


@tu.register_static
class Config:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return type(other) is Config and other.name == self.name

    def __hash__(self):
        return hash(self.name)


def _paths(tree, **kw):
    return [p for p, _ in tu.tree_leaves_with_path(tree, **kw)]


# ------------------------------------------------------------------ key paths

def test_keystr_prints_paths_as_jax():
    tree = {"a": [Point(x=1, y=2)], "b": (3, None)}
    got = {tu.keystr(p): v for p, v in tu.tree_leaves_with_path(tree)}
    assert got == {"['a'][0].x": 1, "['a'][0].y": 2, "['b'][0]": 3}
    path = tu.tree_leaves_with_path({"a": [Point(x=1, y=2)]})[0][0]
    assert path == (DK("a"), SK(0), GK("x"))
    assert tu.keystr(path, simple=True, separator="/") == "a/0/x"
    assert repr(path) == "(DictKey(key='a'), SequenceKey(idx=0), GetAttrKey(name='x'))"
    assert str(FK(3)) == "[<flat index 3>]" and repr(FK(3)) == "FlattenedIndexKey(key=3)"
    assert tu.keystr(()) == ""
    assert hash(DK("a")) == hash(DK("a")) and DK("a") != DK("b")


@pytest.mark.parametrize("tree", [
    {"b": [1, {"z": 2, "y": (3,)}], "a": None},
    (Point(1, [2, 3]), [], {}, (None,)),
    [Pair(1, (2, 3)), Named(4, [5, 6]), Layer(w=7, b=8), Explicit(x=[9], n=2)],
    Boxed([1, Boxed([2, 3])]),
    collections.OrderedDict(b=1, a=[2, 3]),
    collections.defaultdict(list, {"k": 1, "j": (2,)}),
    tu.Partial(max, 1, key=2),
    (Config("c"), 1),
    5,
    None,
])
def test_paths_follow_tree_flatten(tree):
    pairs, treedef = tu.tree_flatten_with_path(tree)
    leaves, expected_def = tu.tree_flatten(tree)
    assert [v for _, v in pairs] == leaves
    assert treedef == expected_def
    assert len(set(p for p, _ in pairs)) == len(pairs)  # every leaf has its own path


def test_key_kinds_by_node_type():
    tree = [Pair(1, 2), Named(3, 4), Layer(w=5, b=6), Boxed([7]), ViaStatic(8),
            collections.OrderedDict(z=9)]
    assert _paths(tree) == [
        (SK(0), FK(0)), (SK(0), FK(1)),
        (SK(1), DK("left")), (SK(1), DK("right")),
        (SK(2), GK("w")), (SK(2), GK("b")),
        (SK(3), GK("items[0]")),
        (SK(4), GK("v")),
        (SK(5), DK("z")),
    ]
    assert tu.keystr(_paths(tree)[0]) == "[0][<flat index 0>]"


def test_is_leaf_with_and_without_path():
    tree = {"a": [1, 2], "b": [3, [4, 5]]}
    pairs, td = tu.tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, list))
    assert [tu.keystr(p) for p, _ in pairs] == ["['a']", "['b']"]
    assert td == tu.tree_structure(tree, is_leaf=lambda x: isinstance(x, list))
    pairs, td = tu.tree_flatten_with_path(tree, is_leaf=lambda p, x: len(p) == 2,
                                          is_leaf_takes_path=True)
    assert [v for _, v in pairs] == [1, 2, 3, [4, 5]]
    assert td.num_leaves == 4 and td.unflatten("abcd") == {"a": ["a", "b"], "b": ["c", "d"]}


def test_map_with_path():
    tree = {"w": [1.0, 2.0], "b": 3.0}
    out = tu.tree_map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}", tree,
                                {"w": [10, 20], "b": 30})
    assert out == {"w": ["['w'][0]=11.0", "['w'][1]=22.0"], "b": "['b']=33.0"}
    assert olympus.tree.map_with_path(lambda p, x: len(p), tree) == {"w": [2, 2], "b": 1}


def test_flatten_one_level():
    assert tu.flatten_one_level({"b": 1, "a": [2]}) == ([[2], 1], ("a", "b"))
    assert tu.flatten_one_level(Layer(1, 2))[1] == ("relu",)
    assert tu.flatten_one_level_with_keys((1, 2))[0] == [(SK(0), 1), (SK(1), 2)]
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(3.0)


# ------------------------------------------------------------------ registration

def test_dataclass_round_trip_and_static_meta():
    layer = Layer(w=jnp.ones(2), b=jnp.zeros(2), act="tanh")
    leaves, td = tu.tree_flatten(layer)
    assert len(leaves) == 2
    rebuilt = td.unflatten([1, 2])
    assert rebuilt == Layer(w=1, b=2, act="tanh")
    assert td != tu.tree_structure(Layer(w=1, b=2))   # meta is part of the structure

    seen = []

    @olympus.jit
    def apply(layer, x):
        seen.append(layer.act)     # static: a plain str while tracing
        return layer.w * x + layer.b
    np.testing.assert_allclose(apply(layer, 3.0), [3.0, 3.0])
    apply(Layer(w=jnp.ones(2), b=jnp.zeros(2), act="tanh"), 4.0)
    assert seen == ["tanh"]   # same meta and shapes: one trace
    g = olympus.grad(lambda layer: jnp.sum(layer.w * 2.0 + layer.b))(layer)
    assert isinstance(g, Layer) and g.act == "tanh"
    np.testing.assert_allclose(g.w, [2.0, 2.0])


def test_explicit_fields_and_tree_static():
    e = Explicit(x=[1, 2], n=3)
    assert tu.tree_leaves(e) == [1, 2]
    assert tu.tree_map(lambda v: v * 10, e) == Explicit(x=[10, 20], n=3)
    assert tu.tree_leaves(ViaStatic(v=4, name="q")) == [4]
    assert tu.tree_structure(ViaStatic(1, "q")) != tu.tree_structure(ViaStatic(1, "r"))


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class D:
        a: int
        b: int

    with pytest.raises(TypeError, match="must both be specified"):
        tu.register_dataclass(D, data_fields=["a"])
    with pytest.raises(ValueError, match="Missing fields: {'b'}"):
        tu.register_dataclass(D, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="Unexpected fields: {'c'}"):
        tu.register_dataclass(D, data_fields=["a", "b", "c"], meta_fields=[])

    class NotADataclass:
        pass
    with pytest.raises(TypeError, match="required when nodetype is not a dataclass"):
        tu.register_dataclass(NotADataclass)
    with pytest.raises(ValueError, match="must not overlap"):
        tu.register_dataclass(NotADataclass, data_fields=["a"], meta_fields=["a"])
    tu.register_dataclass(D, data_fields=["a", "b"], meta_fields=[])
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_dataclass(D)


def test_register_pytree_node_with_keys_func_and_node_class():
    class Two:
        def __init__(self, p, q):
            self.p, self.q = p, q

    tu.register_pytree_node(Two, lambda t: ((t.p, t.q), None), lambda _, c: Two(*c),
                            lambda t: (((GK("p"), t.p), (GK("q"), t.q)), None))
    assert [tu.keystr(p) for p in _paths(Two(1, [2]))] == [".p", ".q[0]"]

    @tu.register_pytree_node_class
    class Cls:
        def __init__(self, v):
            self.v = v

        def tree_flatten(self):
            return (self.v,), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    assert tu.tree_map(lambda v: v + 1, Cls(1)).v == 2
    assert _paths(Cls(1)) == [(FK(0),)]


def test_register_static_has_no_leaves():
    c = Config("name")
    leaves, td = tu.tree_flatten(c)
    assert leaves == [] and td.unflatten([]) == c

    @olympus.jit
    def f(x, cfg):
        return x * 2 if cfg.name == "double" else x
    assert float(f(3.0, Config("double"))) == 6.0


def test_partial_is_a_pytree_and_keeps_inner_partials_static():
    p = tu.Partial(jnp.add, jnp.float32(1))
    assert tu.tree_leaves(p) == [p.args[0]]
    assert float(olympus.jit(lambda f, x: f(x))(p, 2.0)) == 3.0
    inner = tu.Partial(max, 10)
    outer = tu.Partial(inner, 20)
    assert tu.tree_leaves(outer) == [20]     # the inner partial's 10 is static
    assert outer(30) == 30 and outer() == 20
    assert tu.tree_map(lambda v: v + 1, outer)() == 21
    plain = functools.partial(max, 1)
    assert tu.tree_leaves(tu.Partial(plain, 2)) == [2]


# ------------------------------------------------------------------ tree_map and prefixes

def test_tree_map_with_prefix_trees():
    out = tu.tree_map(lambda a, b: (a, b), [1, 2], [{"x": 3}, (4, 5)])
    assert out == [(1, {"x": 3}), (2, (4, 5))]
    assert tu.tree_map(lambda a, b: a + b, {"k": 1}, {"k": 2}) == {"k": 3}


@pytest.mark.parametrize("rest, message", [
    ((1, (2, 3, 4)), r"Tuple arity mismatch: 3 != 2; tuple: \(2, 3, 4\)\. \(at key path \[1\]\)"),
    ((1, [2, 3]), r"Expected tuple, got \[2, 3\]\. \(at key path \[1\]\)"),
    ((1, 5), r"Expected tuple, got 5\."),
])
def test_tree_map_mismatch_names_the_key_path(rest, message):
    with pytest.raises(ValueError, match=message):
        tu.tree_map(lambda a, b: a, (1, (2, 3)), rest)


def test_tree_map_other_mismatches():
    with pytest.raises(ValueError, match=r"Dict key mismatch; expected keys: \['a'\]"):
        tu.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="Expected None, got 1"):
        tu.tree_map(lambda a, b: a, [None], [1])
    with pytest.raises(ValueError, match=r"Custom node type mismatch.*\(at key path \[0\]\)"):
        tu.tree_map(lambda a, b: a, [Layer(1, 2)], [Layer(1, 2, act="gelu")])
    with pytest.raises(ValueError, match="tree_map_with_path: List arity mismatch"):
        tu.tree_map_with_path(lambda p, a, b: a, [1], [1, 2])


def test_tree_map_is_leaf_applies_to_the_first_tree():
    tree = [[1, 2], [3]]
    out = tu.tree_map(lambda a, b: (len(a), b), tree, [10, 20],
                      is_leaf=lambda x: isinstance(x, list) and x and not
                      isinstance(x[0], list))
    assert out == [(2, 10), (1, 20)]


def test_transpose():
    outer = tu.tree_structure([0, 0, 0])
    inner = tu.tree_structure({"a": 0, "b": (0,)})
    tree = [{"a": i, "b": (10 * i,)} for i in range(3)]
    expected = {"a": [0, 1, 2], "b": ([0, 10, 20],)}
    assert tu.tree_transpose(outer, inner, tree) == expected
    assert olympus.tree.transpose(outer, None, tree) == expected
    with pytest.raises(TypeError, match="Mismatch"):
        tu.tree_transpose(outer, tu.tree_structure((0, 0, 0)), tree)


def test_broadcast():
    assert tu.tree_broadcast([1, {"a": 2}], [(5, 6), {"a": [7, 8, 9]}]) == \
        [(1, 1), {"a": [2, 2, 2]}]
    assert olympus.tree.broadcast(0, {"x": [1, 2]}) == {"x": [0, 0]}
    with pytest.raises(ValueError, match="tree_broadcast: List arity mismatch"):
        tu.tree_broadcast([1, 2], [1])


def test_reductions():
    tree = {"a": [1, 2], "b": (3, 4)}
    assert tu.tree_reduce(lambda x, y: x * 10 + y, tree) == 1234
    assert tu.tree_reduce(lambda x, y: x + y, [], 7) == 7
    calls = []

    def op(x, y):
        calls.append((x, y))
        return x + y
    assert tu.tree_reduce_associative(op, tree) == 10
    assert calls == [(1, 2), (3, 4), (3, 7)]    # balanced, not left to right
    assert tu.tree_reduce_associative(op, [], identity=0) == 0
    with pytest.raises(TypeError, match="Must specify identity"):
        tu.tree_reduce_associative(op, [])
    assert tu.tree_all([True, (1, "x")]) and not tu.tree_all([True, (0,)])
    assert olympus.tree.all({}) is True
    assert olympus.tree.reduce(lambda x, y: x + y, [1, 2], 10) == 13
    assert olympus.tree.reduce_associative(lambda x, y: x + y, [1, 2, 3]) == 6


def test_stdlib_dicts_are_nodes():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert tu.tree_leaves(od) == [1, 2]                    # insertion order
    assert tu.tree_map(lambda v: v * 2, od) == collections.OrderedDict([("b", 2), ("a", 4)])
    dd = collections.defaultdict(int, {"b": 1, "a": 2})
    out = tu.tree_map(lambda v: v + 1, dd)
    assert type(out) is collections.defaultdict and out.default_factory is int
    assert tu.tree_leaves(dd) == [2, 1]                    # sorted keys


def test_tree_module_aliases():
    tree = {"a": [1, 2], "b": Point(3, 4)}
    leaves, td = olympus.tree.flatten(tree)
    assert leaves == [1, 2, 3, 4] == olympus.tree.leaves(tree)
    assert olympus.tree.structure(tree) == td
    assert olympus.tree.unflatten(td, leaves) == tree
    assert olympus.tree.map(lambda a, b: a - b, tree, tree) == \
        {"a": [0, 0], "b": Point(0, 0)}
    assert olympus.tree.leaves_with_path(tree) == tu.tree_leaves_with_path(tree)
    assert olympus.tree.flatten_with_path(tree)[1] == td
    assert olympus.tree.leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


def test_treedef_helpers():
    td = tu.tree_structure({"a": (1, 2), "b": [3]})
    assert td.num_leaves == 3
    assert [c.num_leaves for c in tu.treedef_children(td)] == [2, 1]
    assert tu.treedef_is_leaf(tu.tree_structure(1.0))
    assert not tu.treedef_is_leaf(td)
    both = tu.treedef_tuple([td, tu.tree_structure([0])])
    assert both == tu.tree_structure(({"a": (1, 2), "b": [3]}, [0]))
    assert tu.all_leaves([1, 2.0, "s"]) and not tu.all_leaves([1, (2,)])

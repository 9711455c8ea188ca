"""Pytrees: olympus.tree_util / olympus._core flatten, unflatten, PyTreeDef."""
import collections
import gc
import weakref
import time

import pytest

import olympus
from olympus import tree_util

_core = olympus._core
tree_flatten = _core.tree_flatten
tree_unflatten = _core.tree_unflatten

Point = collections.namedtuple("Point", "x y")
Other = collections.namedtuple("Other", "x y")


class Box:
    """A registered custom node: children (a, b), aux data `tag`."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return type(other) is Box and (self.a, self.b, self.tag) == (other.a, other.b, other.tag)

    __hash__ = None


_core.register_pytree_node(Box, lambda b: ((b.a, b.b), b.tag),
                           lambda tag, ch: Box(ch[0], ch[1], tag))


def test_builtin_containers_leaves_and_order():
    tree = (1, [2, None, 3], {"b": 5, "a": 4}, Point(6, (7,)), None)
    leaves, td = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5, 6, 7]  # dict children in sorted key order
    assert td.num_leaves == 7
    assert tree_unflatten(td, leaves) == tree
    rebuilt = td.unflatten(list("abcdefg"))
    assert rebuilt == ("a", ["b", None, "c"], {"a": "d", "b": "e"}, Point("f", ("g",)), None)
    assert type(rebuilt[3]) is Point


def test_none_is_an_empty_node_not_a_leaf():
    leaves, td = tree_flatten(None)
    assert leaves == [] and td.num_leaves == 0 and td.num_nodes == 1
    assert tree_unflatten(td, []) is None
    leaves, td = tree_flatten((None, None))
    assert leaves == [] and td.unflatten(()) == (None, None)


def test_everything_else_is_a_leaf():
    class MyList(list):
        pass

    obj = object()
    for leaf in (3, 2.5, "s", obj, MyList([1, 2]), b"x"):
        leaves, td = tree_flatten(leaf)
        assert leaves == [leaf] and leaves[0] is leaf
        assert repr(td) == "PyTreeDef(*)"
        assert _core.treedef_is_leaf(td)
    assert not _core.treedef_is_leaf(tree_flatten([1])[1])


@pytest.mark.parametrize("tree,text", [
    ((1, {"a": 2}), "PyTreeDef((*, {'a': *}))"),
    ([1, 2], "PyTreeDef([*, *])"),
    ((1,), "PyTreeDef((*,))"),
    ((), "PyTreeDef(())"),
    (None, "PyTreeDef(None)"),
    ({"b": [None], "a": 1}, "PyTreeDef({'a': *, 'b': [None]})"),
    (Point(1, 2), "PyTreeDef(Point(x=*, y=*))"),
    (Box(1, [2]), "PyTreeDef(CustomNode(Box['t'], [*, [*]]))"),
])
def test_repr(tree, text):
    assert repr(tree_flatten(tree)[1]) == text


def test_num_nodes_counts_leaves_and_containers():
    _, td = tree_flatten((1, {"a": 2, "b": [3, None]}))
    # leaves 1,2,3 + None + list + dict + tuple
    assert td.num_nodes == 7
    assert td.num_leaves == 3


def test_unflatten_count_mismatch_names_both_counts():
    _, td = tree_flatten((1, 2, [3]))
    with pytest.raises(ValueError, match="expected 3, got 2"):
        td.unflatten([1, 2])
    with pytest.raises(ValueError, match="expected 3, got 4"):
        tree_unflatten(td, [1, 2, 3, 4])
    with pytest.raises(TypeError):
        tree_unflatten("not a treedef", [1])


def test_unflatten_accepts_any_sequence_or_iterable():
    _, td = tree_flatten([1, (2, 3)])
    assert td.unflatten((7, 8, 9)) == [7, (8, 9)]
    assert td.unflatten(iter([7, 8, 9])) == [7, (8, 9)]


def test_children():
    _, td = tree_flatten((1, {"a": 2, "b": 3}, [None]))
    kids = td.children()
    assert [repr(k) for k in kids] == ["PyTreeDef(*)", "PyTreeDef({'a': *, 'b': *})",
                                       "PyTreeDef([None])"]
    assert kids[1].unflatten([5, 6]) == {"a": 5, "b": 6}
    assert tree_flatten(7)[1].children() == []


def test_equality_and_hash():
    def td(t):
        return tree_flatten(t)[1]

    a, b = td((1, {"x": 2})), td(("p", {"x": [3]}))
    assert a != b  # [3] is a list node, not a leaf
    assert td((1, {"x": 2})) == td((5.0, {"x": "q"}))
    assert hash(td((1, {"x": 2}))) == hash(td((5.0, {"x": "q"})))
    assert td({"x": 1}) != td({"y": 1})           # dict keys matter
    assert td((1, 2)) != td([1, 2])               # node types matter
    assert td(Point(1, 2)) != td(Other(1, 2))     # namedtuple type matters
    assert td(Point(1, 2)) != td((1, 2))
    assert td(Box(1, 2, "t")) == td(Box(3, 4, "t"))
    assert td(Box(1, 2, "t")) != td(Box(1, 2, "u"))  # aux data matters
    assert td(None) != td(())
    cache = {td((1, {"x": 2})): "hit"}
    assert cache[td((0, {"x": 0}))] == "hit"
    assert (td((1,)) == 5) is False


def test_custom_node_round_trip_and_nesting():
    tree = [Box(1, {"k": Box(2, 3, "in")}, "out")]
    leaves, td = tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert td.unflatten(leaves) == tree
    assert td.unflatten([4, 5, 6]) == [Box(4, {"k": Box(5, 6, "in")}, "out")]


def test_register_errors():
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        _core.register_pytree_node(Box, lambda b: ((), None), lambda a, c: Box(1, 2))
    with pytest.raises(ValueError, match="Duplicate"):
        _core.register_pytree_node(tuple, lambda b: ((), None), lambda a, c: ())
    with pytest.raises(TypeError):
        _core.register_pytree_node("notatype", lambda b: ((), None), lambda a, c: None)

    class Bad:
        pass

    _core.register_pytree_node(Bad, lambda b: "not a pair", lambda a, c: Bad())
    with pytest.raises(TypeError, match="must return a pair"):
        tree_flatten([Bad()])

    class Raises:
        pass

    def flatten_raises(x):
        raise KeyError("inside flatten")

    _core.register_pytree_node(Raises, flatten_raises, lambda a, c: Raises())
    with pytest.raises(KeyError, match="inside flatten"):
        tree_flatten({"a": Raises()})


def test_is_leaf():
    tree = [1, [2, 3], (4, [5])]
    leaves, td = tree_flatten(tree, is_leaf=lambda x: isinstance(x, list) and x is not tree)
    assert leaves == [1, [2, 3], 4, [5]]
    assert td.unflatten(leaves) == tree
    leaves, _ = tree_flatten(tree, lambda x: x is tree)
    assert leaves == [tree]
    with pytest.raises(ZeroDivisionError):
        tree_flatten(tree, is_leaf=lambda x: 1 / 0)


def test_unsortable_dict_keys_raise_type_error():
    with pytest.raises(TypeError):
        tree_flatten({1: "a", "b": 2})


def test_deep_nesting_raises_recursion_error_not_a_crash():
    deep = []
    for _ in range(200_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        tree_flatten(deep)


def test_treedef_holding_cycle_is_collected():
    class Node:
        pass

    class Aux:  # weak-referenceable aux data
        pass

    _core.register_pytree_node(Node, lambda n: ((), n.aux), lambda aux, ch: Node())
    n = Node()
    n.aux = Aux()
    _, td = tree_flatten(n)
    n.aux.td = td  # aux data -> treedef -> aux data
    alive = weakref.ref(n.aux)
    del td, n
    gc.collect()  # the treedef must traverse its aux data for the cycle to go
    assert alive() is None


def test_tree_util_helpers_use_the_registry():
    tree = {"a": Box(1, 2), "b": (3,)}
    assert tree_util.tree_leaves(tree) == [1, 2, 3]
    assert tree_util.tree_map(lambda v: v * 10, tree) == {"a": Box(10, 20), "b": (30,)}
    assert tree_util.tree_structure(tree) == tree_flatten(tree)[1]


def test_flatten_is_fast_for_builtin_containers():
    tree = ((1, 2.0, 3), {"a": 4, "b": [5, 6]}, None)
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n):
        leaves, td = tree_flatten(tree)
        td.unflatten(leaves)
    per_call = (time.perf_counter() - t0) / n
    assert per_call < 20e-6, f"flatten+unflatten took {per_call * 1e6:.1f} us"

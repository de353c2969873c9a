"""Tests for fnad.tree_util: JAX's jax.tree_util is the oracle where installed."""

import collections
import copy
import dataclasses
import functools
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fnad import tree_util as tu

try:
    import jax.tree_util as jtu
except ImportError:  # the oracle tests skip; everything else still runs
    jtu = None

needs_jax = pytest.mark.skipif(jtu is None, reason="jax not installed")

Point = collections.namedtuple("Point", ["x", "y"])


class Box:
    """A custom node with aux data, registered in both fnad and (if present) JAX."""

    def __init__(self, a, b, tag="t"):
        self.a, self.b, self.tag = a, b, tag

    def __eq__(self, other):
        return isinstance(other, Box) and (self.a, self.b, self.tag) == (
            other.a, other.b, other.tag)

    def __repr__(self):
        return f"Box({self.a!r}, {self.b!r}, {self.tag!r})"


def _box_flatten(box):
    return (box.a, box.b), box.tag


def _box_unflatten(tag, children):
    return Box(*children, tag=tag)


tu.register_pytree_node(Box, _box_flatten, _box_unflatten)


@dataclasses.dataclass
class Layer:
    w: object
    b: object
    name: str = dataclasses.field(default="dense", metadata={"static": True})


tu.register_dataclass(Layer)

if jtu is not None:
    jtu.register_pytree_node(Box, _box_flatten, _box_unflatten)
    jtu.register_dataclass(Layer)


def _od(*pairs):
    return collections.OrderedDict(pairs)


TREES = [
    1,
    None,
    (),
    [],
    {},
    (1,),
    [1, 2, 3],
    {"b": 1, "a": 2, "c": 3},
    {"z": [1, (2, 3)], "a": {"y": 4, "x": None}, "m": (None, 5)},
    [None, 1, [None, [2]]],
    Point(1, (2, 3)),
    {"p": Point(x=[1, 2], y=None)},
    _od(("b", 1), ("a", [2, 3])),
    collections.defaultdict(list, {"b": 1, "a": (2, 3)}),
    Box(1, [2, 3], tag="hello"),
    [Box({"q": 1, "p": 2}, None)],
    Layer(w=[1, 2], b=3, name="l1"),
    {"layers": [Layer(w=1, b=2), Layer(w=3, b=4, name="out")]},
    ((1, 2), [3, {"k": (4,)}], "leaf"),
]


def _paths(flat_with_path):
    return [tu.keystr(p) for p, _ in flat_with_path]


# ---- JAX oracle -------------------------------------------------------------------------

@needs_jax
@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_flatten_matches_jax(tree):
    leaves, treedef = tu.tree_flatten(tree)
    j_leaves, j_treedef = jtu.tree_flatten(tree)
    assert leaves == j_leaves
    assert repr(treedef) == repr(j_treedef)
    assert treedef.num_leaves == j_treedef.num_leaves
    assert treedef.num_nodes == j_treedef.num_nodes
    assert [repr(c) for c in treedef.children()] == [repr(c) for c in j_treedef.children()]


@needs_jax
@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_flatten_with_path_matches_jax(tree):
    ours = tu.tree_flatten_with_path(tree)[0]
    theirs = jtu.tree_flatten_with_path(tree)[0]
    assert _paths(ours) == [jtu.keystr(p) for p, _ in theirs]
    assert [repr(p) for p, _ in ours] == [repr(p) for p, _ in theirs]
    assert [x for _, x in ours] == [x for _, x in theirs]


@needs_jax
@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_tree_map_matches_jax(tree):
    def f(x):
        return (x, "seen")
    assert tu.tree_map(f, tree) == jtu.tree_map(f, tree)
    assert tu.tree_unflatten(tu.tree_structure(tree), tu.tree_leaves(tree)) == tree


@needs_jax
def test_treedef_equality_agrees_with_jax():
    for a in TREES:
        for b in TREES:
            ours = tu.tree_structure(a) == tu.tree_structure(b)
            assert ours == (jtu.tree_structure(a) == jtu.tree_structure(b)), (a, b)


@needs_jax
def test_is_leaf_and_partial_match_jax():
    tree = {"a": [1, None, (2, 3)], "b": None}
    def is_leaf(x):
        return x is None or isinstance(x, tuple)
    assert tu.tree_leaves(tree, is_leaf) == jtu.tree_leaves(tree, is_leaf)
    assert repr(tu.tree_structure(tree, is_leaf)) == repr(jtu.tree_structure(tree, is_leaf))
    p, jp = tu.Partial(max, 1, key=2), jtu.Partial(max, 1, key=2)
    assert repr(tu.tree_structure(p)) == repr(jtu.tree_structure(jp))
    assert _paths(tu.tree_flatten_with_path(p)[0]) == [
        jtu.keystr(k) for k, _ in jtu.tree_flatten_with_path(jp)[0]]


@needs_jax
def test_keystr_simple_matches_jax():
    path = (tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"), tu.FlattenedIndexKey(2))
    jpath = (jtu.DictKey("a"), jtu.SequenceKey(0), jtu.GetAttrKey("x"),
             jtu.FlattenedIndexKey(2))
    assert tu.keystr(path) == jtu.keystr(jpath)
    assert (tu.keystr(path, simple=True, separator="/")
            == jtu.keystr(jpath, simple=True, separator="/") == "a/0/x/2")


_leaf = st.integers(-5, 5) | st.text("ab", max_size=2)
_keys = st.text("abcxyz", min_size=1, max_size=2)
_trees = st.recursive(
    _leaf | st.none(),
    lambda kids: (st.lists(kids, max_size=3) | st.lists(kids, max_size=3).map(tuple)
                  | st.dictionaries(_keys, kids, max_size=3)
                  | st.builds(Point, kids, kids) | st.builds(Box, kids, kids, _keys)),
    max_leaves=12)


@needs_jax
@settings(max_examples=150, deadline=None)
@given(_trees)
def test_random_trees_match_jax(tree):
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == jtu.tree_leaves(tree)
    assert repr(treedef) == repr(jtu.tree_structure(tree))
    assert _paths(tu.tree_flatten_with_path(tree)[0]) == [
        jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    assert treedef.unflatten(leaves) == tree


# ---- structure, roundtrips, treedefs -----------------------------------------------------

@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_roundtrip(tree):
    leaves, treedef = tu.tree_flatten(tree)
    rebuilt = treedef.unflatten(leaves)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    assert tu.tree_structure(rebuilt) == treedef
    assert tu.tree_flatten_with_path(tree)[1] == treedef
    assert tu.tree_structure(tree, is_leaf=lambda x: False) == treedef
    assert treedef.num_leaves == len(leaves)


def test_dict_children_in_sorted_key_order():
    leaves, treedef = tu.tree_flatten({"b": 1, "c": 2, "a": 3})
    assert leaves == [3, 1, 2]
    assert list(treedef.unflatten([10, 20, 30])) == ["a", "b", "c"]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': *, 'c': *})"


def test_ordered_and_default_dicts():
    od = _od(("b", 1), ("a", 2))
    assert tu.tree_leaves(od) == [1, 2]  # insertion order, unlike dict
    assert tu.tree_structure(od) != tu.tree_structure(_od(("a", 1), ("b", 2)))
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    rebuilt = tu.tree_map(lambda x: x * 10, dd)
    assert tu.tree_leaves(dd) == [2, 1]
    assert type(rebuilt) is collections.defaultdict and rebuilt.default_factory is list
    assert rebuilt["missing"] == [] and rebuilt["a"] == 20


def test_none_is_a_node_not_a_leaf():
    assert tu.tree_leaves([None, 1, None]) == [1]
    treedef = tu.tree_structure({"a": None})
    assert repr(treedef) == "PyTreeDef({'a': None})"
    assert treedef.num_leaves == 0 and treedef.num_nodes == 2
    assert tu.tree_map(lambda x: x + 1, [None, 1]) == [None, 2]
    assert not tu.all_leaves([1, None]) and tu.all_leaves([1, "a"])
    assert not tu.all_leaves([1, [2]])


def test_unregistered_subclasses_are_leaves():
    class D(dict):
        pass

    class T(tuple):
        pass
    d, t = D(a=1), T((1, 2))
    assert tu.tree_leaves([d, t]) == [d, t]


def test_treedef_equality_and_hash():
    a = tu.tree_structure({"x": [1, 2], "y": (3,)})
    b = tu.tree_structure({"y": ("other",), "x": ["leaves", "here"]})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != tu.tree_structure({"x": (1, 2), "y": (3,)})  # list vs tuple
    assert a != tu.tree_structure({"x": [1, 2], "z": (3,)})  # keys
    assert tu.tree_structure((1, 2)) != tu.tree_structure(Point(1, 2))
    assert tu.tree_structure(Box(1, 2, "u")) != tu.tree_structure(Box(1, 2, "v"))
    assert tu.tree_structure(Layer(1, 2, "a")) != tu.tree_structure(Layer(1, 2, "b"))
    assert tu.tree_structure([1, [2]]) != tu.tree_structure([1, 2])
    assert a != "not a treedef"
    assert copy.deepcopy(a) == a and copy.deepcopy(tu.tree_structure(Point(1, 2))) == (
        tu.tree_structure(Point(3, 4)))
    cache = {a: "compiled"}
    assert cache[b] == "compiled"


def test_treedef_accessors():
    treedef = tu.tree_structure({"a": (1, 2), "b": [3, None]})
    assert treedef.num_leaves == 3
    assert treedef.num_nodes == 7  # dict, tuple, 2 leaves, list, leaf, None
    assert [repr(c) for c in treedef.children()] == ["PyTreeDef((*, *))", "PyTreeDef([*, None])"]
    assert tu.treedef_is_leaf(tu.tree_structure(1))
    assert not tu.treedef_is_leaf(treedef)
    assert repr(tu.tree_structure((1,))) == "PyTreeDef((*,))"
    assert (repr(tu.tree_structure(Point(1, 2)))
            == "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))")


def test_unflatten_wrong_leaf_count():
    treedef = tu.tree_structure([1, 2])
    with pytest.raises(ValueError, match="Too few leaves.*expected 2, got 1"):
        treedef.unflatten([1])
    with pytest.raises(ValueError, match="Too many leaves.*expected 2, got 3"):
        treedef.unflatten(iter([1, 2, 3]))


def test_unsortable_dict_keys_raise():
    with pytest.raises(ValueError, match="sortable"):
        tu.tree_flatten({1: "a", "b": 2})


def test_is_leaf_stops_descent_including_root():
    tree = [(1, 2), [3]]
    assert tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2), 3]
    assert tu.tree_leaves(tree, is_leaf=lambda x: isinstance(x, list)) == [tree]
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


# ---- registration -----------------------------------------------------------------------

def test_double_registration_is_a_value_error():
    class Once:
        pass
    tu.register_pytree_node(Once, lambda o: ((), None), lambda aux, ch: Once())
    with pytest.raises(ValueError, match="Duplicate.*Once"):
        tu.register_pytree_node(Once, lambda o: ((), None), lambda aux, ch: Once())
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_pytree_node(tuple, lambda o: ((), None), lambda aux, ch: ())


def test_registration_overrides_cached_namedtuple_and_leaf_verdicts():
    Pair = collections.namedtuple("Pair", "first second")

    class Opaque:
        def __init__(self, v):
            self.v = v
    assert tu.tree_leaves(Pair(1, 2)) == [1, 2]
    o = Opaque(5)
    assert tu.tree_leaves(o) == [o]  # cached as a leaf type now
    tu.register_pytree_node(Pair, lambda p: ((p.second,), p.first), lambda f, ch: Pair(f, *ch))
    tu.register_pytree_node(Opaque, lambda x: ((x.v,), None), lambda aux, ch: Opaque(*ch))
    assert tu.tree_leaves(Pair(1, 2)) == [2]
    assert tu.tree_leaves(o) == [5]


def test_register_pytree_node_class_and_with_keys():
    @tu.register_pytree_node_class
    class Pt:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def tree_flatten(self):
            return (self.x, self.y), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    out = tu.tree_map(lambda v: v * 2, Pt(1, [2]))
    assert (out.x, out.y) == (2, [4])
    assert _paths(tu.tree_flatten_with_path(Pt(1, 2))[0]) == [
        "[<flat index 0>]", "[<flat index 1>]"]

    class Named:
        def __init__(self, **kw):
            self.kw = kw
    tu.register_pytree_with_keys(
        Named,
        lambda n: ([(tu.GetAttrKey(k), n.kw[k]) for k in sorted(n.kw)], tuple(sorted(n.kw))),
        lambda keys, ch: Named(**dict(zip(keys, ch, strict=True))))
    flat = tu.tree_flatten_with_path(Named(b=[1], a=2))[0]
    assert _paths(flat) == [".a", ".b[0]"] and [x for _, x in flat] == [2, 1]
    assert tu.tree_map(lambda v: -v, Named(a=1)).kw == {"a": -1}


def test_custom_flatten_may_return_an_iterator():
    class Lazy:
        def __init__(self, *items):
            self.items = items
    tu.register_pytree_node(Lazy, lambda z: (iter(z.items), None), lambda aux, ch: Lazy(*ch))
    leaves, treedef = tu.tree_flatten([Lazy(1, 2), Lazy(Lazy(3))])
    assert leaves == [1, 2, 3] and treedef.num_leaves == 3
    assert treedef.flatten_up_to([Lazy(4, 5), Lazy(Lazy(6))]) == [4, 5, 6]
    assert tu.tree_leaves(treedef.unflatten([7, 8, 9])[1]) == [9]


def test_register_dataclass_variants():
    assert tu.tree_leaves(Layer(w=1, b=2, name="x")) == [1, 2]
    assert _paths(tu.tree_flatten_with_path(Layer(w=[1], b=2))[0]) == [".w[0]", ".b"]

    @functools.partial(tu.register_dataclass, data_fields=["v"], meta_fields=[],
                       drop_fields=["cache"])
    @dataclasses.dataclass
    class Dropped:
        v: int
        cache: object = None
    assert tu.tree_map(lambda v: v + 1, Dropped(1, cache="c")) == Dropped(2)

    class Plain:
        def __init__(self, v, mode):
            self.v, self.mode = v, mode
    tu.register_dataclass(Plain, data_fields=["v"], meta_fields=["mode"])
    assert tu.tree_leaves(Plain(3, "m")) == [3]
    assert tu.tree_structure(Plain(3, "m")) != tu.tree_structure(Plain(3, "n"))

    @dataclasses.dataclass
    class Missing:
        a: int
        b: int
    with pytest.raises(ValueError, match="Missing.*'b'"):
        tu.register_dataclass(Missing, data_fields=["a"], meta_fields=[])
    with pytest.raises(TypeError, match="both"):
        tu.register_dataclass(Missing, data_fields=["a", "b"])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(type("NotDC", (), {}))


# ---- structure mismatches ---------------------------------------------------------------

def test_tree_map_mismatch_names_path_and_structures():
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda a, b: a, {"a": 1, "b": (1, 2)}, {"a": 1, "b": (1, 2, 3)})
    msg = str(info.value)
    assert "['b']" in msg and "rest[0]" in msg
    assert "PyTreeDef({'a': *, 'b': (*, *)})" in msg
    assert "PyTreeDef({'a': *, 'b': (*, *, *)})" in msg


@pytest.mark.parametrize("first, other, words", [
    ([{"x": [1, (2, 3)]}], [{"x": [1, [2, 3]]}], ["[0]['x'][1]", "tuple", "list"]),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}, ["<root>", "keys", "'c'"]),
    ([Point(1, (2,))], [Point(1, (2, 3))], ["[0].y", "length 1"]),
    ([Box(1, 2, "u")], [Box(1, 2, "v")], ["[0]", "'u'", "'v'"]),
    ({"a": None}, {"a": 3}, ["['a']", "None", "int"]),
    ((1, [2]), (1, 5), ["[1]", "list", "leaf of type int"]),
])
def test_mismatch_messages(first, other, words):
    with pytest.raises(ValueError) as info:
        tu.tree_map(lambda *xs: xs, first, other)
    for word in words:
        assert word in str(info.value)


def test_tree_map_prefix_rest_passes_subtrees_whole():
    out = tu.tree_map(lambda a, b: (a, b), [1, 2], [[3, 4], {"k": 5}])
    assert out == [(1, [3, 4]), (2, {"k": 5})]


def test_flatten_up_to():
    treedef = tu.tree_structure({"a": 0, "b": (0, 0)})
    assert treedef.flatten_up_to({"a": [1, 2], "b": ({"x": 3}, None)}) == [[1, 2], {"x": 3}, None]
    with pytest.raises(ValueError, match=r"\['b'\].*tuple of length 2.*list"):
        treedef.flatten_up_to({"a": 1, "b": [1, 2]})
    with pytest.raises(ValueError, match="keys.*'a'.*'b'.*got.*'a'"):
        treedef.flatten_up_to({"a": 1})
    with pytest.raises(ValueError, match="<root>.*leaf of type int"):
        treedef.flatten_up_to(7)
    assert tu.tree_structure(5).flatten_up_to([1, 2]) == [[1, 2]]


# ---- broadcast_prefix -------------------------------------------------------------------

def test_broadcast_prefix_none_covers_subtrees():
    prefix = (0, None, {"a": 1})
    full = (["x", "y"], {"k": ["z", "w"]}, {"a": ("p", "q")})
    assert tu.broadcast_prefix(prefix, full) == [0, 0, None, None, 1, 1]
    assert tu.broadcast_prefix(None, {"a": 1, "b": [2, 3]}) == [None, None, None]
    assert tu.broadcast_prefix(0, [1, None, 2]) == [0, 0]  # None in full has no leaves
    assert tu.broadcast_prefix({"a": 0, "b": None}, {"a": 1, "b": None}) == [0]
    # a None leaf of the full tree stays an empty subtree when None is a prefix leaf
    assert tu.broadcast_prefix((None, 0), ({"a": 1, "n": None}, 2),
                               is_leaf=lambda x: x is None) == [None, 0]


def test_broadcast_prefix_errors_name_path():
    with pytest.raises(ValueError, match=r"<root>.*length 2.*3"):
        tu.broadcast_prefix((0, 0), (1, 2, 3))
    with pytest.raises(ValueError, match=r"\[1\]\['b'\].*keys"):
        tu.broadcast_prefix((0, {"b": {"c": 0}}), (1, {"b": {"d": 2}}))


# ---- Partial and the small utilities ----------------------------------------------------

def test_partial_is_a_pytree():
    def f(a, b, *, scale):
        return (a + b) * scale
    p = tu.Partial(f, 1, scale=2)
    assert p(3) == 8
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1, 2]
    doubled = tu.tree_map(lambda x: x * 10, p)
    assert isinstance(doubled, tu.Partial) and doubled(0) == 200
    assert treedef != tu.tree_structure(tu.Partial(max, 1, scale=2))
    assert hash(treedef) == hash(tu.tree_structure(tu.Partial(f, 5, scale=6)))
    inner = tu.Partial(functools.partial(f, 100), scale=3)  # inner args stay static
    assert tu.tree_leaves(inner) == [3] and inner(1) == 303


def test_reduce_all_transpose():
    tree = {"a": [1, 2], "b": (3,)}
    assert tu.tree_reduce(operator.add, tree) == 6
    assert tu.tree_reduce(operator.add, tree, 10) == 16
    assert tu.tree_reduce(operator.add, {"a": None}, 0) == 0
    assert tu.tree_all([True, (1, "x")]) and not tu.tree_all([True, {"a": 0}])
    out = tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0, 0)),
                            [(1, 2, 3), (4, 5, 6)])
    assert out == ([1, 4], [2, 5], [3, 6])
    composed = tu.tree_structure([0, 0]).compose(tu.tree_structure((0, 0, 0)))
    assert composed == tu.tree_structure([(1, 2, 3), (4, 5, 6)])
    assert hash(composed) == hash(tu.tree_structure([(1, 2, 3), (4, 5, 6)]))
    inferred = tu.tree_transpose(tu.tree_structure([0, 0]), None, [{"u": 1}, {"u": 2}])
    assert inferred == {"u": [1, 2]}
    with pytest.raises(TypeError, match="Mismatch"):
        tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0)), [(1, 2), (3,)])


def test_map_with_path():
    tree = {"b": [1, 2], "a": Point(3, None)}
    out = tu.tree_map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}", tree,
                                {"a": Point(10, None), "b": [20, 30]})
    assert out == {"a": Point("['a'].x=13", None), "b": ["['b'][0]=21", "['b'][1]=32"]}
    assert _paths(tu.tree_leaves_with_path([{"k": 1}])) == ["[0]['k']"]
    pairs = tu.tree_leaves_with_path({"a": [1], "b": [2]},
                                     is_leaf=lambda p, x: p == (tu.DictKey("a"),),
                                     is_leaf_takes_path=True)
    assert [x for _, x in pairs] == [[1], 2]


# ---- one-level flattening, static nodes, broadcasting, associative reduction -------------
def test_one_level_static_broadcast_and_associative_reduce():
    import fnad
    assert tu.is_tree_node(tuple) and tu.is_tree_node(type(None)) and not tu.is_tree_node(int)
    assert tu.flatten_one_level({"a": 1, "b": (2, 3)}) == ([1, (2, 3)], ("a", "b"))
    pairs, aux = tu.flatten_one_level_with_keys({"a": 1, "b": (2, 3)})
    assert pairs == [(tu.DictKey("a"), 1), (tu.DictKey("b"), (2, 3))] and aux == ("a", "b")
    with pytest.raises(ValueError, match="can't tree-flatten"):
        tu.flatten_one_level(1.0)
    assert tu.tree_broadcast((1, 2), ((3, 4), {"a": 5})) == ((1, 1), {"a": 2})
    # as jax: a None in the prefix is a node (matching only None) unless is_leaf says so
    assert fnad.tree.broadcast((1, None), ((3, 4), 5),
                               is_leaf=lambda x: x is None) == ((1, 1), None)
    with pytest.raises(ValueError):
        fnad.tree.broadcast((1, None), ((3, 4), 5))
    calls = []

    def add(a, b):
        calls.append((a, b))
        return a + b
    assert tu.tree_reduce_associative(add, [1, 2, 3, 4, 5]) == 15
    assert calls[:2] == [(1, 2), (3, 4)]                      # pairwise, not left to right
    assert fnad.tree.reduce_associative(add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        tu.tree_reduce_associative(add, {})
    both = tu.treedef_tuple([tu.tree_structure((1, 2)), tu.tree_structure(3)])
    assert both == tu.tree_structure(((1, 2), 3))
    assert tu.treedef_children(both) == both.children()

    @tu.register_static
    class Cfg:
        def __init__(self, n):
            self.n = n

        def __hash__(self):
            return hash(self.n)

        def __eq__(self, other):
            return isinstance(other, Cfg) and other.n == self.n
    leaves, tdef = fnad.tree.flatten([Cfg(3), 1.0])
    assert leaves == [1.0] and fnad.tree.unflatten(tdef, [2.0])[0] == Cfg(3)
    assert fnad.jit(lambda c, x: x * c.n, static_argnums=0)(Cfg(3), 2.0) == 6.0

    @tu.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        op: str = fnad.tree.static(default="add")
    leaves, tdef = fnad.tree.flatten(Op(1.0))
    assert leaves == [1.0] and fnad.tree.unflatten(tdef, [5.0]) == Op(5.0, "add")

    @tu.register_pytree_with_keys_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return [(tu.GetAttrKey("a"), self.a), (tu.GetAttrKey("b"), self.b)], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    paths = [p for p, _ in tu.tree_flatten_with_path(Pair(1, 2))[0]]
    assert paths == [(tu.GetAttrKey("a"),), (tu.GetAttrKey("b"),)]
    assert tu.tree_map(lambda v: v * 2, Pair(1, 2)).b == 4

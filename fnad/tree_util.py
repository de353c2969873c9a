"""Pytrees: flattening nested containers to leaves and back, with JAX's names and semantics.

This module owns the pytree registry (which types are nodes and how they flatten), the
`PyTreeDef` structure object, key paths, and the tree utilities built on them. It is the
bottom layer of fnad and must import nothing from fnad (stdlib only), so any other module
can depend on it. A JAX user ports by swapping `jax.tree_util` for `fnad.tree_util`.

Flatten and unflatten run on every transformed call, so the hot path is a dict lookup on
`type(x)` (namedtuple detection cached per type), leaves handled inline in the parent's
loop, and structures kept as nested tuples so jit-cache hashing and equality run in C.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial",
    "PyTreeDef", "SequenceKey", "all_leaves", "broadcast_prefix", "flatten_one_level",
    "flatten_one_level_with_keys", "is_tree_node", "keystr", "register_dataclass",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_static", "tree_all", "tree_broadcast",
    "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_reduce_associative",
    "tree_structure", "tree_transpose", "tree_unflatten", "treedef_children",
    "treedef_is_leaf", "treedef_tuple",
]


# ---- key paths ------------------------------------------------------------------------
# Frozen dataclasses give JAX's reprs (`DictKey(key='a')`), equality, hashing and
# `match` support for free; `__str__` is the fragment `keystr` joins.

@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """Key path entry for a mapping child: `['key']`."""
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """Key path entry for a tuple/list child: `[idx]`."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Key path entry for an attribute child (namedtuple field, dataclass field): `.name`."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """Key path entry for a custom node registered without keys: its child position."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = Any
KeyPath = tuple[Any, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path, e.g. `['a'][0].x`; `simple=True, separator='/'` gives `a/0/x`."""
    if not simple:
        return separator.join(map(str, keys))
    return separator.join(map(_simple_entrystr, keys))


def _simple_entrystr(k: KeyEntry) -> str:
    match k:
        case DictKey(v) | SequenceKey(v) | GetAttrKey(v) | FlattenedIndexKey(v):
            return str(v)
    return str(k)


# ---- the registry ---------------------------------------------------------------------

class _NodeDef:
    """How one node type flattens; `kind` only steers repr and error messages."""
    __slots__ = ("flatten", "flatten_with_keys", "kind", "name", "type", "unflatten")

    def __init__(self, type_, flatten, unflatten, flatten_with_keys, name, kind):
        self.type = type_
        self.flatten = flatten                  # x -> (children, aux)
        self.unflatten = unflatten              # (aux, children) -> x
        self.flatten_with_keys = flatten_with_keys  # x -> ([(key, child)], aux)
        self.name = name
        self.kind = kind  # "tuple" "list" "dict" "none" "namedtuple" "custom"

    def __deepcopy__(self, memo):
        return self  # treedef equality is by nodedef identity; a copy would break it

    def __reduce__(self):
        return (_nodedef_of, (self.type,))  # pickled by node type: unpickles to the registered one


def _nodedef_of(t: type) -> _NodeDef:
    """The registered _NodeDef of node type `t` (how a pickled treedef finds its nodes)."""
    nd = _dispatch[t]
    if nd is None:
        raise ValueError(f"cannot unpickle a PyTreeDef: {t!r} is not a registered pytree node "
                         "type in this process")
    return nd


def _keys_from_indices(flatten):
    def flatten_with_keys(x):
        children, aux = flatten(x)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux
    return flatten_with_keys


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError(
            f"pytree dict keys must be sortable (children are ordered by sorted key, as in "
            f"JAX); got keys {list(d)!r}") from e


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return list(map(d.__getitem__, keys)), keys


def _defaultdict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _mapping_keys(d, keys):
    return [(DictKey(k), d[k]) for k in keys]


_registry: dict[type, _NodeDef] = {}
_namedtuple_defs: dict[type, _NodeDef] = {}


class _Dispatch(dict):
    """type -> _NodeDef, or None for leaf types; misses resolve once and are cached."""

    def __missing__(self, t):
        nd = _registry.get(t)
        if nd is None and issubclass(t, tuple) and hasattr(t, "_fields"):
            nd = _namedtuple_defs.get(t) or _namedtuple_defs.setdefault(t, _NodeDef(
                t, lambda x: (x, None), lambda aux, ch, t=t: t(*ch),
                lambda x: ([(GetAttrKey(f), v) for f, v in zip(x._fields, x, strict=True)], None),
                f"namedtuple[{t.__name__}]", "namedtuple"))
        self[t] = nd
        return nd


_dispatch = _Dispatch()
_dispatch_get = _dispatch.__getitem__  # bound once: `map` over it runs at C speed


def _register(nd: _NodeDef) -> None:
    if nd.type in _registry:
        raise ValueError(f"Duplicate pytree node registration for {nd.type!r}: the type is "
                         "already registered as a pytree node.")
    _registry[nd.type] = nd
    _dispatch.clear()  # a cached leaf/namedtuple verdict for this type is now stale


_register(_NodeDef(tuple, lambda x: (x, None), lambda aux, ch: tuple(ch),
                   lambda x: ([(SequenceKey(i), c) for i, c in enumerate(x)], None),
                   "tuple", "tuple"))
_register(_NodeDef(list, lambda x: (x, None), lambda aux, ch: list(ch),
                   lambda x: ([(SequenceKey(i), c) for i, c in enumerate(x)], None),
                   "list", "list"))
_register(_NodeDef(dict, _dict_flatten, lambda keys, ch: dict(zip(keys, ch, strict=True)),
                   lambda x: (_mapping_keys(x, k := _sorted_keys(x)), k), "dict", "dict"))
_register(_NodeDef(type(None), lambda x: ((), None), lambda aux, ch: None,
                   lambda x: ((), None), "None", "none"))
_register(_NodeDef(
    collections.OrderedDict, lambda x: (list(x.values()), tuple(x)),
    lambda keys, ch: collections.OrderedDict(zip(keys, ch, strict=True)),
    lambda x: (_mapping_keys(x, k := tuple(x)), k), "OrderedDict", "custom"))
_register(_NodeDef(
    collections.defaultdict, _defaultdict_flatten,
    lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch, strict=True)),
    lambda x: (_mapping_keys(x, k := _sorted_keys(x)), (x.default_factory, k)),
    "defaultdict", "custom"))


def register_pytree_node(nodetype: type[T], flatten_func: Callable[[T], tuple[Iterable, Any]],
                         unflatten_func: Callable[[Any, Iterable], T],
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make `nodetype` a pytree node.

    `flatten_func(x) -> (children, aux_data)`; `unflatten_func(aux_data, children) -> x`.
    `aux_data` is static: it must be hashable and comparable, since it is part of the
    treedef. Without `flatten_with_keys_func`, key paths use `FlattenedIndexKey(i)`.
    Registering a type twice raises ValueError.
    """
    _register(_NodeDef(nodetype, flatten_func, unflatten_func,
                       flatten_with_keys_func or _keys_from_indices(flatten_func),
                       nodetype.__name__, "custom"))


def register_pytree_with_keys(nodetype: type[T], flatten_with_keys: Callable,
                              unflatten_func: Callable[[Any, Iterable], T],
                              flatten_func: Callable | None = None) -> None:
    """Register a node whose flatten returns `([(key_entry, child), ...], aux_data)`."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls: type[T]) -> type[T]:
    """Class decorator: register via `tree_flatten_with_keys()` (-> ([(key, child)], aux))
    and `tree_unflatten(aux, children)`; `tree_flatten()` is used too if defined."""
    flat = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, operator.methodcaller("tree_flatten_with_keys"),
                              cls.tree_unflatten,
                              operator.methodcaller("tree_flatten") if flat else None)
    return cls


def register_static(cls: type[T]) -> type[T]:
    """Class decorator: instances are pytree nodes with no children, the instance itself
    the (static: hashable, comparable) aux data, so transformations pass it through."""
    register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def is_tree_node(typ: type) -> bool:
    """Whether instances of `typ` are pytree nodes (registered, or namedtuples)."""
    return _dispatch_get(typ) is not None


def flatten_one_level(tree: Any) -> tuple[list[Any], Any]:
    """(the children of the root node, its aux data); a leaf is a ValueError."""
    nd = _dispatch_get(type(tree))
    if nd is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, aux = nd.flatten(tree)
    return list(children), aux


def flatten_one_level_with_keys(tree: Any) -> tuple[list[tuple[KeyEntry, Any]], Any]:
    """([(key entry, child)] of the root node, its aux data); a leaf is a ValueError."""
    nd = _dispatch_get(type(tree))
    if nd is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    pairs, aux = nd.flatten_with_keys(tree)
    return list(pairs), aux


def register_pytree_node_class(cls: type[T]) -> type[T]:
    """Class decorator: register via its `tree_flatten()` and `tree_unflatten(aux, ch)`."""
    register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type[T], data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()) -> type[T]:
    """Register a dataclass-like type: `data_fields` are children, `meta_fields` static aux.

    Usable bare as a decorator on a dataclass: fields with `metadata=dict(static=True)` are
    meta, the rest data. Key paths are `GetAttrKey(field)`. Returns `nodetype`.
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            f"given when either is; got {data_fields=} {meta_fields=}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when nodetype is not a dataclass; got {nodetype!r}.")
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    # Frozen copies: the closures below must not see later mutation of the caller's lists.
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields -= set(drop_fields)
        if {*data_fields, *meta_fields} != init_fields:
            raise ValueError(
                "register_dataclass: data_fields and meta_fields must include all dataclass "
                f"fields with init=True and only them. Missing: "
                f"{sorted(init_fields - {*data_fields, *meta_fields})}; unexpected: "
                f"{sorted({*data_fields, *meta_fields} - init_fields)}. Add fields to "
                "drop_fields to leave them out.")
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(f"register_dataclass: fields {sorted(overlap)} are both data and meta.")

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(meta, data):
        kwargs = dict(zip(meta_fields, meta, strict=True))
        kwargs.update(zip(data_fields, data, strict=True))
        return nodetype(**kwargs)

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


# ---- PyTreeDef ------------------------------------------------------------------------
# Internally a structure is a nested tuple, so equality and hashing run at C speed (they
# key the jit cache on every call) and building one costs a tuple, not an object:
#   leaf: None
#   node: (nodedef, aux, kids, num_leaves), kids = an int n when all n children are leaves
#         (canonical, so equal structures are equal tuples), else a tuple of structures.
# _NodeDef has identity equality; each type has exactly one, so comparing it compares types.

def _node(nd: _NodeDef, aux: Any, subs: list) -> tuple:
    """Build a node in canonical form (the int shortcut whenever all children are leaves)."""
    if all(s is None for s in subs):
        return (nd, aux, len(subs), len(subs))
    return (nd, aux, tuple(subs), sum(1 if s is None else s[3] for s in subs))


def _kids(t: tuple) -> tuple:
    return (None,) * t[2] if type(t[2]) is int else t[2]


class PyTreeDef:
    """The structure of a pytree: node types and aux data, with leaves as holes.

    Hashable and comparable: equal iff same node types, aux data and shape, so it can key
    compile caches. Obtain one from `tree_flatten`/`tree_structure`, not the constructor.
    """
    __slots__ = ("_t",)

    def __init__(self, t: tuple | None):
        self._t = t

    @property
    def num_leaves(self) -> int:
        """Number of leaves (holes) in the structure."""
        return 1 if self._t is None else self._t[3]

    @property
    def num_nodes(self) -> int:
        """Number of nodes, leaves and `None`s included."""
        def count(t):
            return 1 if t is None else 1 + sum(map(count, _kids(t)))
        return count(self._t)

    def children(self) -> list[PyTreeDef]:
        """Treedefs of the immediate children (empty for a leaf)."""
        return [] if self._t is None else [PyTreeDef(k) for k in _kids(self._t)]

    def node_data(self) -> tuple[type, Any] | None:
        """`(node type, aux data)` of the root, or None for a leaf."""
        if self._t is None:
            return None
        nd, aux = self._t[0], self._t[1]
        return (nd.type, list(aux) if nd is _DICT else aux)  # JAX gives a dict's keys as a list

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Rebuild a pytree of this structure from `leaves` (in flatten order)."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        n = self.num_leaves
        if len(leaves) != n:
            raise ValueError(f"Too {'few' if len(leaves) < n else 'many'} leaves for "
                             f"PyTreeDef; expected {n}, got {len(leaves)}; treedef: {self!r}")
        if self._t is None:
            return leaves[0]
        return _unflatten(self._t, iter(leaves))

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """Flatten `tree` only down to this treedef's leaves, returning those subtrees.

        This is prefix broadcasting: `tree` must have this structure above the leaves, and
        anything below them is returned whole. A mismatch raises ValueError naming the
        key path and both structures.
        """
        return _flatten_up_to_checked(self, tree, "the tree")

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """The treedef obtained by putting a copy of `inner` at each of this one's leaves."""
        def put(t):
            if t is None:
                return inner._t
            return _node(t[0], t[1], [put(k) for k in _kids(t)])
        return PyTreeDef(put(self._t))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self._t == other._t

    def __hash__(self) -> int:
        return hash(self._t)

    def __repr__(self) -> str:
        return f"PyTreeDef({_repr(self._t)})"


_LEAF = PyTreeDef(None)
_DICT = _registry[dict]


def _repr(t: tuple | None) -> str:
    if t is None:
        return "*"
    nd, aux = t[0], t[1]
    kids = [_repr(k) for k in _kids(t)]
    if nd.kind == "tuple":
        return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
    if nd.kind == "list":
        return "[" + ", ".join(kids) + "]"
    if nd.kind == "dict":
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(aux, kids, strict=True)) + "}"
    if nd.kind == "none":
        return "None"
    if nd.kind == "namedtuple":  # JAX shows no aux for these
        return f"CustomNode({nd.name}, [{', '.join(kids)}])"
    return f"CustomNode({nd.name}[{aux}], [{', '.join(kids)}])"


# ---- flatten / unflatten (hot path) ---------------------------------------------------

def _flatten(nd: _NodeDef, x: Any, leaves: list, is_leaf) -> tuple:
    # x is a node of type nd. Leaf children are handled here rather than by recursion, and
    # an all-leaf node (the common dict-of-arrays case) takes one C-speed pass.
    if nd is _DICT:  # the most common node: inlined to save two calls per dict
        try:
            aux = tuple(sorted(x))
        except TypeError:
            aux = _sorted_keys(x)  # raises the readable error
        children = [x[k] for k in aux]
    else:
        children, aux = nd.flatten(x)
        if type(children) is not list and type(children) is not tuple:
            children = list(children)  # a custom flatten may hand back a one-shot iterator
    if is_leaf is None:
        kinds = list(map(_dispatch_get, map(type, children)))
        if not any(kinds):
            leaves.extend(children)
            return (nd, aux, len(kinds), len(kinds))
        start = len(leaves)
        subs = []
        for c in children:
            cn = _dispatch_get(type(c))
            if cn is None:
                leaves.append(c)
                subs.append(None)
            else:
                subs.append(_flatten(cn, c, leaves, None))
        return (nd, aux, tuple(subs), len(leaves) - start)
    subs = []
    for c in children:
        cn = None if is_leaf(c) else _dispatch[type(c)]
        if cn is None:
            leaves.append(c)
            subs.append(None)
        else:
            subs.append(_flatten(cn, c, leaves, is_leaf))
    return _node(nd, aux, subs)


def _unflatten(t: tuple, it) -> Any:
    nd, aux, kids, n = t
    if type(kids) is int:
        if nd is _DICT:  # the common all-leaf dict, rebuilt without the intermediate list.
            # No strict=True: lengths match by construction, and it would cost ~30% here.
            return dict(zip(aux, itertools.islice(it, n)))  # noqa: B905
        return nd.unflatten(aux, list(itertools.islice(it, n)))
    return nd.unflatten(aux, [next(it) if k is None else _unflatten(k, it) for k in kids])


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list[Any], PyTreeDef]:
    """Flatten a pytree into `(leaves, treedef)`; dict children come in sorted key order.

    `is_leaf(x) -> True` stops descent at `x` (checked on every subtree, root included).
    """
    if is_leaf is not None and is_leaf(tree):
        return [tree], _LEAF
    nd = _dispatch[type(tree)]
    if nd is None:
        return [tree], _LEAF
    leaves: list[Any] = []
    return leaves, PyTreeDef(_flatten(nd, tree, leaves, is_leaf))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Inverse of `tree_flatten`: rebuild a pytree of `treedef`'s structure from leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of `tree`, in flatten order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The treedef of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True if `treedef` has a single node (as in JAX, this includes `None`'s treedef)."""
    return treedef.num_nodes == 1


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every element of `iterable` is a leaf (None is a node, so not a leaf)."""
    if is_leaf is None:
        return all(_dispatch[type(x)] is None for x in iterable)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves, strict=True))


# ---- flatten_up_to and structure errors -----------------------------------------------

class _Mismatch(Exception):
    """Internal: carries the mismatch detail up while frames record child indices."""

    def __init__(self, detail: str):
        self.detail = detail
        self.indices: list[int] = []  # innermost first


def _describe_def(t: tuple | None) -> str:
    if t is None:
        return "a leaf"
    nd = t[0]
    if nd.kind in ("tuple", "list"):
        return f"a {nd.name} of length {len(_kids(t))}"
    return "None" if nd.kind == "none" else f"a {nd.name} node"


def _describe_value(x: Any) -> str:
    nd = _dispatch[type(x)]
    if nd is None:
        return f"a leaf of type {type(x).__name__}"
    if nd.kind in ("tuple", "list"):
        return f"a {nd.name} of length {len(x)}"
    return "None" if x is None else f"a {nd.name} node"


def _up_to(t: tuple, x: Any, out: list) -> None:
    nd, aux_t, kids, _ = t
    if _dispatch_get(type(x)) is not nd:
        want, got = _describe_def(t), _describe_value(x)
        if want == got:  # two node types of one name (e.g. namedtuples)
            got = f"{got} of a different type with the same name, {type(x)!r}"
        raise _Mismatch(f"expected {want}, got {got}")
    children = None
    if nd is _DICT and len(x) == len(aux_t):
        # Same size and every expected key present means the same key set: no sort needed.
        try:
            children = [x[k] for k in aux_t]
        except KeyError:
            pass
    if children is None:
        children, aux = nd.flatten(x)
        if type(children) is not list and type(children) is not tuple:
            children = list(children)
        if aux != aux_t:
            if nd.kind == "dict":
                raise _Mismatch(f"dict keys differ: expected {list(aux_t)!r}, "
                                f"got {list(aux)!r}")
            raise _Mismatch(f"{nd.name} node aux data differ: expected {aux_t!r}, got {aux!r}")
    n = kids if type(kids) is int else len(kids)
    if len(children) != n:
        if nd.kind in ("tuple", "list"):
            raise _Mismatch(f"expected {_describe_def(t)}, got {_describe_value(x)}")
        raise _Mismatch(f"expected {nd.name} with {n} children, got {len(children)}")
    if type(kids) is int:
        out.extend(children)
        return
    for i, (k, c) in enumerate(zip(kids, children, strict=True)):
        if k is None:
            out.append(c)
            continue
        try:
            _up_to(k, c, out)
        except _Mismatch as e:
            e.indices.append(i)
            raise


def _key_path(tree: Any, indices: list[int]) -> KeyPath:
    # Only runs on the error path: re-walk the tree to turn child indices into keys.
    path = []
    for i in reversed(indices):
        pairs, _ = _dispatch[type(tree)].flatten_with_keys(tree)
        key, tree = list(pairs)[i]
        path.append(key)
    return tuple(path)


def _flatten_up_to_checked(td: PyTreeDef, tree: Any, what: str,
                           first: str = "the treedef") -> list[Any]:
    if td._t is None:
        return [tree]
    out: list[Any] = []
    try:
        _up_to(td._t, tree, out)
    except _Mismatch as e:
        where = keystr(_key_path(tree, e.indices)) or "<root>"
        raise ValueError(
            f"pytree structure mismatch: {what} does not match {first} at key path "
            f"{where}: {e.detail}.\n  {first}: {td!r}\n  {what}: {tree_structure(tree)!r}"
        ) from None
    return out


# ---- maps, reductions, paths ----------------------------------------------------------

def tree_map(f: Callable[..., Any], tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply `f` leafwise: `f(leaf, *matching leaves of rest)`; rebuild with `tree`'s structure.

    Each of `rest` must have `tree`'s structure (or have it as a prefix: subtrees below
    `tree`'s leaves are passed whole). A mismatch raises ValueError naming the key path.
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = [_flatten_up_to_checked(treedef, r, f"tree_map rest[{i}]", "the first tree")
              for i, r in enumerate(rest)]
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others, strict=True)])


def _flatten_with_path(x, path, out, is_leaf, takes_path) -> tuple | None:
    if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
        out.append((path, x))
        return None
    nd = _dispatch[type(x)]
    if nd is None:
        out.append((path, x))
        return None
    pairs, aux = nd.flatten_with_keys(x)
    return _node(nd, aux, [_flatten_with_path(c, (*path, k), out, is_leaf, takes_path)
                           for k, c in pairs])


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like `tree_flatten`, but each leaf comes as `(key_path, leaf)`."""
    out: list[tuple[KeyPath, Any]] = []
    return out, PyTreeDef(_flatten_with_path(tree, (), out, is_leaf, is_leaf_takes_path))


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """`[(key_path, leaf), ...]` in flatten order."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """Like `tree_map`, but calls `f(key_path, leaf, *matching leaves of rest)`."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to_checked(treedef, r, f"tree_map_with_path rest[{i}]",
                                     "the first tree") for i, r in enumerate(rest)]
    return treedef.unflatten([f(p, x, *xs) for (p, x), *xs in zip(pairs, *others, strict=True)])


_NO_INIT = object()  # tree_reduce's "no initializer" (None is a valid initializer)


def tree_reduce(function: Callable[[T, Any], T], tree: Any, initializer: Any = _NO_INIT,
                is_leaf: Callable[[Any], bool] | None = None) -> T:
    """`functools.reduce(function, leaves[, initializer])` over the leaves of `tree`."""
    if initializer is _NO_INIT:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


_UNSPECIFIED = object()


def tree_reduce_associative(operation: Callable[[T, T], T], tree: Any, *,
                            identity: Any = _UNSPECIFIED,
                            is_leaf: Callable[[Any], bool] | None = None) -> T:
    """The leaves combined pairwise, a balanced tree of `operation` calls (which must be
    associative); `identity` for a tree without leaves (else a TypeError)."""
    level = tree_leaves(tree, is_leaf)
    if not level:
        if identity is _UNSPECIFIED:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    while len(level) > 1:
        pairs = [operation(a, b) for a, b in zip(level[::2], level[1::2])]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def tree_broadcast(prefix_tree: Any, full_tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """`prefix_tree` spread to the structure of `full_tree`: each of its leaves repeated
    over the leaves of the subtree it covers. Unlike `broadcast_prefix` (and as in JAX),
    a None in the prefix is a node, matching only a None; `is_leaf` can make it a leaf."""
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to_checked(prefix_def, full_tree, "the full tree",
                                      "the prefix tree")
    leaves = [p for p, sub in zip(prefix_leaves, subtrees, strict=True)
              for _ in range(tree_structure(sub).num_leaves)]
    return tree_structure(full_tree).unflatten(leaves)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The treedefs of the root's children."""
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have these treedefs."""
    subs = [t._t for t in treedefs]
    return PyTreeDef(_node(_registry[tuple], None, subs))


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every leaf is truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn an outer-of-inner pytree into inner-of-outer (e.g. list of tuples -> tuple of
    lists). `inner_treedef=None` infers it from the first outer leaf."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
    cols = zip(*rows, strict=True)
    return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in cols])


def broadcast_prefix(prefix_tree: Any, full_tree: Any,
                     is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """For each leaf of `full_tree`, the leaf of `prefix_tree` whose subtree covers it.

    This is how `vmap(in_axes=...)` spreads a prefix spec over the arguments. `None` in
    the prefix is a leaf that covers a whole subtree (so `in_axes=(0, None)` works);
    `is_leaf` says what else is a leaf of the prefix. The full tree's leaves are its
    ordinary ones (`tree_leaves(full_tree)`): a None there is an empty subtree.
    """
    def prefix_leaf(x):
        return x is None or (is_leaf is not None and is_leaf(x))
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, prefix_leaf)
    subtrees = _flatten_up_to_checked(prefix_def, full_tree, "the full tree",
                                      "the prefix tree")
    result: list[Any] = []
    for p, sub in zip(prefix_leaves, subtrees, strict=True):
        result.extend([p] * len(tree_leaves(sub)))
    return result


# ---- Partial --------------------------------------------------------------------------

class _HashableCallableShim:
    """Stands in for a wrapped functools.partial so Partial does not merge its args."""

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
    """A `functools.partial` that is a pytree: bound args and kwargs are children, the
    function is static aux data. Lets a closure-like callable cross jit/grad boundaries.
    """

    def __new__(cls, func, *args, **kw):
        # functools.partial flattens a partial-of-partial into one; that would move the
        # inner partial's args into our children, so hide it behind a shim.
        if isinstance(func, functools.partial):
            original, func = func, _HashableCallableShim(func)
            out = super().__new__(cls, func, *args, **kw)
            func.func, func.args, func.keywords = (original.func, original.args,
                                                   original.keywords)
            return out
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)

"""Typed PRNG key arrays: what `fnad.random.key` returns (jax's key<fry>, key<rbg>, key<urbg>).

A `PRNGKeyArray` of shape S holds the raw keys of one PRNG implementation, its *base*:
uint32[*S, 2] for threefry2x32, uint32[*S, 4] for rbg and unsafe_rbg. Each element is one
key; its dtype names the implementation: `key<fry>`, `key<rbg>`, `key<urbg>`
(fnad.dtypes.KEY_DTYPES). It is a pytree node whose one leaf is the base (the implementation
is its static aux data), so jit, grad, scan, while_loop and cond carry keys through as their
uint32 words. vmap counts a key's axes in the key's own dims (a negative
axis too: batching.py asks `is_key_array`).

What a key array answers: shape, ndim, size, indexing and `.at[...].set`, reshape and the
other layout methods, `==` and `!=` (key by key), iteration. What it refuses, as jax does:
arithmetic, conversion to NumPy, `bool()`, `astype`. fnad.numpy's and fnad.lax's layout
functions (reshape ... concatenate, where, take; lax.slice ... select_n) take keys through
`KEY_RULES`: each rule applies the function to the base with the axes and shapes moved past
the trailing word axis (`install` wraps a namespace's functions with them).

Difference from jax: tree_util sees the base as the leaf (`tree_leaves(key)` is
`[key_data(key)]`, not `[key]`), so a `tree_map` over a tree holding keys maps their words.
Key paths read as jax's: the words' path entry prints as nothing (KeyWordsEntry).
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from fnad import tree_util
from fnad.dtypes import KEY_DTYPE, KEY_DTYPES

__all__ = ["KEY_DTYPE", "PRNGKeyArray", "install", "is_key_array", "wrap"]


class PRNGKeyArray:
    """An array of PRNG keys of one implementation (`impl`, a name of
    fnad.dtypes.KEY_DTYPES), dtype key<fry>, key<rbg> or key<urbg> (see the module
    docstring)."""

    __slots__ = ("_base", "_impl")
    __hash__ = None                           # as jax: key arrays are not hashable

    def __init__(self, base, impl: str = "threefry2x32"):
        self._base = base                     # no checks: tree_unflatten builds these too
        self._impl = impl

    # ---- what it is
    @property
    def dtype(self):
        return KEY_DTYPES[self._impl]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._base.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self._base.shape) - 1

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        try:
            words = str(np.asarray(self._base))
        except Exception:  # noqa: BLE001 - a traced key: its words are not known here
            return f"PRNGKeyArray({self.shape}, dtype={self.dtype}) overlaying {self._base!r}"
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{words}"

    __str__ = __repr__

    # ---- indexing and layout
    def __getitem__(self, index):
        return PRNGKeyArray(self._base[_word_index(index)], self._impl)

    @property
    def at(self):
        return _KeyAt(self)

    def reshape(self, *shape, order: str = "C"):
        if len(shape) == 1 and isinstance(shape[0], Sequence):
            shape = tuple(shape[0])
        return _reshape(self, shape, order)

    def ravel(self, order: str = "C"):
        return _reshape(self, (-1,), order)

    flatten = ravel

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], Sequence)):
            axes = axes[0]
        return _transpose(self, axes or None)

    @property
    def T(self):  # noqa: N802 (NumPy's name)
        return _transpose(self, None)

    def swapaxes(self, axis1: int, axis2: int):
        return _swapaxes(self, axis1, axis2)

    def squeeze(self, axis=None):
        return _squeeze(self, axis)

    def take(self, indices, axis=None, mode=None):
        return _take(self, indices, axis, mode=mode)

    def copy(self):
        from fnad import numpy as jnp
        return PRNGKeyArray(jnp.copy(self._base), self._impl)

    def block_until_ready(self):
        if hasattr(self._base, "block_until_ready"):
            self._base.block_until_ready()
        return self

    # ---- comparisons: key by key
    def __eq__(self, other):
        from fnad import numpy as jnp
        return jnp.all(self._base == _base_of(other, "==", self), axis=-1)

    def __ne__(self, other):
        from fnad import numpy as jnp
        return jnp.any(self._base != _base_of(other, "!=", self), axis=-1)

    # ---- what keys refuse
    def __array__(self, dtype=None, copy=None):
        raise TypeError("An fnad array with PRNGKey dtype cannot be converted to a NumPy "
                        "array. Use fnad.random.key_data(arr) to get its uint32 words.")

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def astype(self, dtype):
        raise TypeError(f"Cannot convert_element_type from {self.dtype} to {dtype}: use "
                        "fnad.random.key_data for a key's uint32 words")

    def __index__(self):
        raise TypeError(f"an array of dtype {self.dtype} cannot be used as an index")

    def __float__(self):
        raise TypeError(f"an array of dtype {self.dtype} cannot be converted to a Python "
                        "number")

    __int__ = __complex__ = __float__


def _refuse(op: str):
    def method(self, *args):
        raise TypeError(f"{op} does not accept dtype {self.dtype}: typed PRNG keys have no "
                        "arithmetic (fnad.random.key_data gives their uint32 words)")
    method.__name__ = f"__{op}__"
    return method


for _op in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
            "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand",
            "or", "ror", "xor", "rxor", "lshift", "rlshift", "rshift", "rrshift", "lt", "le",
            "gt", "ge", "neg", "pos", "abs", "invert"):
    setattr(PRNGKeyArray, f"__{_op}__", _refuse(_op))
del _op


class _KeyAt:
    """`keys.at[index]`: `.get()` and `.set(keys)` (jax's scatter and gather on keys)."""

    __slots__ = ("_keys", "_index")

    def __init__(self, keys, index=None):
        self._keys, self._index = keys, index

    def __getitem__(self, index):
        return _KeyAt(self._keys, index)

    def get(self, **kwargs):
        keys = self._keys
        return PRNGKeyArray(keys._base.at[_word_index(self._index)].get(**kwargs), keys._impl)

    def set(self, values, **kwargs):
        keys = self._keys
        base = keys._base.at[_word_index(self._index)].set(_base_of(values, "set", keys),
                                                            **kwargs)
        return PRNGKeyArray(base, keys._impl)


class KeyWordsEntry:
    """The key-path entry of a key array's words: it prints as nothing, so that the path
    of a key in a tree reads as jax's (`['rng'].count`, not `['rng'][0]`)."""

    __slots__ = ()

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:
        return "KeyWordsEntry()"

    def __eq__(self, other) -> bool:
        return isinstance(other, KeyWordsEntry)

    def __hash__(self) -> int:
        return hash(KeyWordsEntry)


tree_util.register_pytree_node(PRNGKeyArray, lambda k: ((k._base,), k._impl),
                               lambda impl, children: PRNGKeyArray(*children, impl),
                               lambda k: ([(KeyWordsEntry(), k._base)], k._impl))


def is_key_array(x) -> bool:
    return type(x) is PRNGKeyArray


def wrap(base, impl: str = "threefry2x32") -> PRNGKeyArray:
    """Raw keys uint32[..., *key_shape] of PRNG implementation `impl` (checked) as a key
    array of their leading shape."""
    key_shape = KEY_DTYPES[impl].key_shape
    shape, dtype = tuple(np.shape(base)), getattr(base, "dtype", None)
    if len(shape) < len(key_shape) or shape[len(shape) - len(key_shape):] != key_shape:
        raise TypeError(f"fnad encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with {key_shape} for the {impl} PRNG; got shape={shape}")
    if np.dtype(dtype) != np.uint32:
        raise TypeError(f"fnad encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={dtype}")
    return PRNGKeyArray(base, impl)


def _base_of(x, where: str, like: PRNGKeyArray):
    """The base of key array `x`, which must have the dtype of `like`."""
    if type(x) is not PRNGKeyArray or x._impl != like._impl:
        got = getattr(x, "dtype", type(x).__name__)
        raise TypeError(f"{where}: a key array can only be combined with key arrays "
                        f"of its dtype ({like.dtype}), got {got}")
    return x._base


def _words(a: PRNGKeyArray) -> int:
    """The number of uint32 words of each key of `a` (the base's trailing dim)."""
    return a.dtype.key_shape[-1]


def _word_index(index) -> tuple:
    """`index` into a key array as an index into its base (the word axis kept whole)."""
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        return index + (slice(None),)
    return index + (Ellipsis, slice(None))


def _axis(axis: int, ndim: int, name: str) -> int:
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{name}: axis {a} is out of bounds for a key array of rank {ndim}")
    return a % ndim


def _axes(axes, ndim: int, name: str) -> tuple[int, ...]:
    axes = (axes,) if not isinstance(axes, Sequence) else axes
    return tuple(_axis(a, ndim, name) for a in axes)


# ---- the rules: fnad.numpy / fnad.lax functions applied to keys ----------------------------
def _jnp():
    from fnad import numpy as jnp
    return jnp


def _reshape(a, shape, order="C", **_):
    if order != "C":
        raise NotImplementedError(f"reshape of a key array: order={order!r} (only 'C')")
    shape = (shape,) if not isinstance(shape, Sequence) else tuple(shape)
    return PRNGKeyArray(_jnp().reshape(a._base, (*shape, _words(a))), a._impl)


def _transpose(a, axes=None):
    axes = tuple(reversed(range(a.ndim))) if axes is None else _axes(axes, a.ndim, "transpose")
    return PRNGKeyArray(_jnp().transpose(a._base, (*axes, a.ndim)), a._impl)


def _swapaxes(a, axis1, axis2):
    i, j = _axis(axis1, a.ndim, "swapaxes"), _axis(axis2, a.ndim, "swapaxes")
    return PRNGKeyArray(_jnp().swapaxes(a._base, i, j), a._impl)


def _moveaxis(a, source, destination):
    src, dst = _axes(source, a.ndim, "moveaxis"), _axes(destination, a.ndim, "moveaxis")
    return PRNGKeyArray(_jnp().moveaxis(a._base, src, dst), a._impl)


def _squeeze(a, axis=None):
    if axis is None:
        axes = tuple(i for i, n in enumerate(a.shape) if n == 1)
    else:
        axes = _axes(axis, a.ndim, "squeeze")
    return PRNGKeyArray(_jnp().squeeze(a._base, axes), a._impl)


def _expand_dims(a, axis):
    n = a.ndim + (len(axis) if isinstance(axis, Sequence) else 1)
    return PRNGKeyArray(_jnp().expand_dims(a._base, _axes(axis, n, "expand_dims")), a._impl)


def _broadcast_to(a, shape):
    shape = (shape,) if not isinstance(shape, Sequence) else tuple(shape)
    return PRNGKeyArray(_jnp().broadcast_to(a._base, (*shape, _words(a))), a._impl)


def _flip(a, axis=None):
    axes = tuple(range(a.ndim)) if axis is None else _axes(axis, a.ndim, "flip")
    return PRNGKeyArray(_jnp().flip(a._base, axes), a._impl)


def _roll(a, shift, axis=None):
    jnp = _jnp()
    if axis is None:
        flat = jnp.roll(jnp.reshape(a._base, (-1, _words(a))), shift, 0)
        return PRNGKeyArray(jnp.reshape(flat, a._base.shape), a._impl)
    return PRNGKeyArray(jnp.roll(a._base, shift, _axes(axis, a.ndim, "roll")), a._impl)


def _flat_or(a, axis, name):
    """(keys, axis): a raveled with axis 0 where `axis` is None."""
    if axis is None:
        return _reshape(a, (-1,)), 0
    return a, _axis(axis, a.ndim, name)


def _take(a, indices, axis=None, mode=None, fill_value=None, **kwargs):
    if fill_value is not None:
        raise NotImplementedError("take of a key array: fill_value")
    a, ax = _flat_or(a, axis, "take")
    return PRNGKeyArray(_jnp().take(a._base, indices, axis=ax, mode=mode, **kwargs), a._impl)


def _repeat(a, repeats, axis=None, **kwargs):
    a, ax = _flat_or(a, axis, "repeat")
    return PRNGKeyArray(_jnp().repeat(a._base, repeats, axis=ax, **kwargs), a._impl)


def _tile(a, reps):
    reps = (reps,) if not isinstance(reps, Sequence) else tuple(reps)
    reps = (1,) * (a.ndim - len(reps)) + reps
    return PRNGKeyArray(_jnp().tile(a._base, (*reps, 1)), a._impl)


def _split(fn_name):
    def rule(a, indices_or_sections, axis=0):
        ax = _axis(axis, a.ndim, fn_name)
        parts = getattr(_jnp(), fn_name)(a._base, indices_or_sections, axis=ax)
        return [PRNGKeyArray(p, a._impl) for p in parts]
    return rule


def _all_keys(arrays, name):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}: need at least one key array")
    like = next(filter(is_key_array, arrays), arrays[0])
    return [_base_of(x, name, like) for x in arrays], like.ndim


def _concatenate(arrays, axis=0, dtype=None):
    if dtype is not None:
        raise TypeError(f"concatenate of key arrays: dtype={dtype} (keys keep their dtype)")
    if axis is None:
        arrays, axis = [_reshape(x, (-1,)) for x in arrays], 0
    bases, ndim = _all_keys(arrays, "concatenate")
    return PRNGKeyArray(_jnp().concatenate(bases, axis=_axis(axis, ndim, "concatenate")),
                        arrays[0]._impl)


def _stack(arrays, axis=0, out=None, dtype=None):
    if dtype is not None:
        raise TypeError(f"stack of key arrays: dtype={dtype} (keys keep their dtype)")
    bases, ndim = _all_keys(arrays, "stack")
    return PRNGKeyArray(_jnp().stack(bases, axis=_axis(axis, ndim + 1, "stack")),
                        arrays[0]._impl)


def _where(condition, x=None, y=None, **kwargs):
    if x is None or y is None:
        raise ValueError("where of key arrays needs both x and y")
    jnp = _jnp()
    c = jnp.asarray(condition)
    like = x if is_key_array(x) else y
    return PRNGKeyArray(jnp.where(c[..., None], _base_of(x, "where", like),
                                  _base_of(y, "where", like)), like._impl)


def _like(fn_name):
    def rule(a, dtype=None, shape=None, **kwargs):
        if dtype is not None and dtype != a.dtype:
            raise TypeError(f"{fn_name} of a key array: dtype={dtype}")
        base = getattr(_jnp(), fn_name)(a._base, shape=None if shape is None
                                        else (*np.atleast_1d(shape), _words(a)))
        return PRNGKeyArray(base, a._impl)
    return rule


def _full_like(a, fill_value, dtype=None, shape=None, **kwargs):
    shape = a.shape if shape is None else tuple(np.atleast_1d(shape))
    return _broadcast_to(fill_value if is_key_array(fill_value)
                         else wrap(_jnp().asarray(fill_value), a._impl), shape)


def _asarray(a, dtype=None, *args, **kwargs):
    if dtype is not None and dtype != a.dtype:
        raise TypeError(f"Cannot convert_element_type from {a.dtype} to {dtype}: use "
                        "fnad.random.key_data for a key's uint32 words")
    return a


def _array_equal(a1, a2, equal_nan=False):
    if not (is_key_array(a1) and is_key_array(a2)) or a1._impl != a2._impl:
        return _jnp().asarray(False)
    return _jnp().array_equal(a1._base, a2._base)


def _copy(a, *args, **kwargs):
    return a.copy()


# fnad.lax
def _lax():
    from fnad import lax
    return lax


def _lax_slice(a, start_indices, limit_indices, strides=None):
    strides = None if strides is None else (*strides, 1)
    return PRNGKeyArray(_lax().slice(a._base, (*start_indices, 0),
                                     (*limit_indices, _words(a)), strides), a._impl)


def _lax_dynamic_slice(a, start_indices, slice_sizes, **kwargs):
    return PRNGKeyArray(_lax().dynamic_slice(a._base, (*start_indices, 0),
                                             (*slice_sizes, _words(a)), **kwargs), a._impl)


def _lax_dynamic_update_slice(a, update, start_indices, **kwargs):
    return PRNGKeyArray(_lax().dynamic_update_slice(a._base, _base_of(update, "update", a),
                                                    (*start_indices, 0), **kwargs), a._impl)


def _lax_index_fn(fn_name):
    def rule(a, index, axis=0, keepdims=True, **kwargs):
        ax = _axis(axis, a.ndim, fn_name)
        return PRNGKeyArray(getattr(_lax(), fn_name)(a._base, index, ax, keepdims, **kwargs),
                            a._impl)
    return rule


def _lax_reshape(a, new_sizes, dimensions=None, **kwargs):
    if dimensions is not None:
        dimensions = (*dimensions, a.ndim)
    return PRNGKeyArray(_lax().reshape(a._base, (*new_sizes, _words(a)), dimensions,
                                       **kwargs), a._impl)


def _lax_broadcast(a, sizes, **kwargs):
    return PRNGKeyArray(_lax().broadcast(a._base, tuple(sizes), **kwargs), a._impl)


def _lax_broadcast_in_dim(a, shape, broadcast_dimensions, **kwargs):
    return PRNGKeyArray(_lax().broadcast_in_dim(a._base, (*shape, _words(a)),
                                                (*broadcast_dimensions, len(shape)), **kwargs),
                        a._impl)


def _lax_axes_fn(fn_name, rank):
    def rule(a, dimensions, **kwargs):
        dims = _axes(dimensions, rank(a, dimensions), fn_name)
        return PRNGKeyArray(getattr(_lax(), fn_name)(a._base, dims, **kwargs), a._impl)
    return rule


def _lax_transpose(a, permutation):
    perm = _axes(permutation, a.ndim, "transpose")
    return PRNGKeyArray(_lax().transpose(a._base, (*perm, a.ndim)), a._impl)


def _lax_concatenate(operands, dimension):
    bases, ndim = _all_keys(operands, "concatenate")
    return PRNGKeyArray(_lax().concatenate(bases, _axis(dimension, ndim, "concatenate")),
                        operands[0]._impl)


def _lax_select_n(which, *cases):
    jnp = _jnp()
    w = jnp.asarray(which)
    like = next(filter(is_key_array, cases), None)
    bases = [_base_of(c, "select_n", like) for c in cases]
    if w.ndim:
        w = _lax().broadcast_in_dim(w, bases[0].shape, tuple(range(w.ndim)))
    return PRNGKeyArray(_lax().select_n(w, *bases), like._impl)


def _lax_select(pred, on_true, on_false):
    return _lax_select_n(pred, on_false, on_true)


# (namespace, function name) -> rule; `install` puts them in front of the functions.
KEY_RULES: dict[tuple[str, str], Any] = {
    **{("numpy", n): r for n, r in {
        "reshape": _reshape, "ravel": lambda a, order="C": _reshape(a, (-1,), order),
        "transpose": _transpose, "permute_dims": _transpose, "swapaxes": _swapaxes,
        "moveaxis": _moveaxis, "squeeze": _squeeze, "expand_dims": _expand_dims,
        "broadcast_to": _broadcast_to, "flip": _flip, "roll": _roll, "take": _take,
        "repeat": _repeat, "tile": _tile, "split": _split("split"),
        "array_split": _split("array_split"), "concatenate": _concatenate, "stack": _stack,
        "where": _where, "zeros_like": _like("zeros_like"), "ones_like": _like("ones_like"),
        "empty_like": _like("zeros_like"), "full_like": _full_like, "asarray": _asarray,
        "array": _asarray, "copy": _copy, "array_equal": _array_equal}.items()},
    **{("lax", n): r for n, r in {
        "slice": _lax_slice, "dynamic_slice": _lax_dynamic_slice,
        "dynamic_update_slice": _lax_dynamic_update_slice,
        "index_in_dim": _lax_index_fn("index_in_dim"),
        "dynamic_index_in_dim": _lax_index_fn("dynamic_index_in_dim"),
        "reshape": _lax_reshape, "broadcast": _lax_broadcast,
        "broadcast_in_dim": _lax_broadcast_in_dim,
        "squeeze": _lax_axes_fn("squeeze", lambda a, d: a.ndim),
        "expand_dims": _lax_axes_fn("expand_dims", lambda a, d: a.ndim + len(d)),
        "rev": _lax_axes_fn("rev", lambda a, d: a.ndim), "transpose": _lax_transpose,
        "concatenate": _lax_concatenate, "select_n": _lax_select_n,
        "select": _lax_select}.items()},
}

# where a rule's function looks for key arrays: positional argument numbers; a number in
# SEQUENCE_ARGS means "the elements of this argument" (concatenate's and stack's list)
_KEY_ARGS = {"where": (1, 2), "select_n": (1, 2), "select": (1, 2), "full_like": (0, 1)}
_SEQUENCE_ARGS = {"concatenate", "stack"}


def _has_key(name: str, args, kwargs) -> bool:
    if kwargs and any(map(is_key_array, kwargs.values())):
        return True
    if not args:
        return False
    if name in _SEQUENCE_ARGS:
        return isinstance(args[0], (list, tuple)) and any(map(is_key_array, args[0]))
    if name == "select_n":
        return any(map(is_key_array, args[1:]))
    return any(is_key_array(args[i]) for i in _KEY_ARGS.get(name, (0,)) if i < len(args))


def install(namespace: dict, which: str) -> None:
    """Put the key rules of `which` ("numpy" or "lax") in front of the functions of that
    name in `namespace` (a module's globals): a call with a key array goes to the rule."""
    for (space, name), rule in KEY_RULES.items():
        if space != which or name not in namespace:
            continue
        namespace[name] = _dispatching(namespace[name], name, rule)


def _dispatching(fn, name: str, rule):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if _has_key(name, args, kwargs):
            return rule(*args, **kwargs)
        return fn(*args, **kwargs)
    call.__wrapped_for_keys__ = fn
    return call

"""fnad.numpy's whole-array edits and the Array API's spellings of the shape functions:
concat, unstack, append, insert, delete, block, rollaxis, hsplit / vsplit / dsplit, resize.

Each is a composition of _shape's functions, slices, and (insert, delete with traced
indices) the .at scatters, so grad, vmap and jit go through them. Shapes are static:
insert and delete take static positions, or traced ones where the output's size does not
depend on them, as in JAX.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fnad import core, dtypes
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    asarray,
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
)
from fnad.numpy._creation import _concrete, zeros_like
from fnad.numpy._index_routines import _concrete as _concrete_array
from fnad.numpy._index_routines import _is_traced
from fnad.numpy._shape import (
    _as_shape,
    _split,
    concatenate,
    moveaxis,
    ravel,
    reshape,
    tile,
)
from fnad.primitives import shape_ops as so

__all__ = ["append", "block", "concat", "delete", "dsplit", "hsplit", "insert", "resize",
           "rollaxis", "unstack", "vsplit"]


# ---- Array API spellings -----------------------------------------------------------------
def concat(arrays, /, *, axis: int | None = 0) -> Array:
    """The arrays joined along `axis` (the Array API's name for concatenate)."""
    check_arraylike("concat", *arrays)
    return concatenate(arrays, axis=axis)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of `x` along `axis`, as a tuple: [N, ...] -> N arrays of [...]."""
    check_arraylike("unstack", x)
    x = ensure_array(x)
    if x.ndim == 0:
        raise ValueError("unstack requires an array of rank > 0, got a scalar (shape ())")
    axis = canonicalize_axis(axis, x.ndim)
    return tuple(so.squeeze(so.slice_in_dim(x, i, i + 1, 1, axis), (axis,))
                 for i in range(x.shape[axis]))


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Array:
    """`values` joined to the end of `arr` along `axis` (both flattened if axis is None)."""
    check_arraylike("append", arr, values)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis=axis)


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Array:
    """`a` with `axis` moved to sit before position `start` (prefer moveaxis)."""
    check_arraylike("rollaxis", a)
    a = ensure_array(a)
    start = operator.index(_concrete(start, "rollaxis's start"))
    axis = canonicalize_axis(axis, a.ndim)
    if not -a.ndim <= start <= a.ndim:
        raise ValueError(f"start={start} must satisfy {-a.ndim}<=start<={a.ndim}")
    if start < 0:
        start += a.ndim
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


# ---- block -------------------------------------------------------------------------------
def _atleast_nd(x, n: int):
    return x if x.ndim >= n else so.reshape(x, (1,) * (n - x.ndim) + x.shape)


def _block(xs):
    """(the assembled array, the nesting depth of `xs`)."""
    if isinstance(xs, tuple):
        raise ValueError(f"fnad.numpy.block does not allow tuples, got {xs}")
    if isinstance(xs, list):
        if not xs:
            raise ValueError("fnad.numpy.block does not allow empty list arguments")
        parts, depths = zip(*(_block(x) for x in xs), strict=True)
        if any(d != depths[0] for d in depths[1:]):
            raise ValueError(f"Mismatched list depths in fnad.numpy.block: {list(depths)}")
        rank = max(depths[0], max(p.ndim for p in parts))
        parts = [_atleast_nd(p, rank) for p in parts]
        return concatenate(parts, axis=-depths[0]), depths[0] + 1
    check_arraylike("block", xs)
    return ensure_array(xs), 1


def block(arrays) -> Array:
    """An array assembled from nested lists of blocks: the innermost lists are joined along
    the last axis, the next ones along the second-to-last, and so on."""
    return _block(arrays)[0]


# ---- splitting ---------------------------------------------------------------------------
def _split_min_rank(name: str, ary, indices_or_sections, axis: int):
    check_arraylike(name, ary)
    ary = ensure_array(ary)
    if ary.ndim <= axis:
        raise ValueError(f"{name} only works on arrays of {axis + 1} or more dimensions, got "
                         f"shape {ary.shape}")
    return _split(name, ary, indices_or_sections, axis, equal=True)


def hsplit(ary: ArrayLike, indices_or_sections) -> list[Array]:
    """split along axis 1 (axis 0 for 1-D arrays)."""
    check_arraylike("hsplit", ary)
    ary = ensure_array(ary)
    return _split_min_rank("hsplit", ary, indices_or_sections, 0 if ary.ndim == 1 else 1)


def vsplit(ary: ArrayLike, indices_or_sections) -> list[Array]:
    """split along axis 0."""
    return _split_min_rank("vsplit", ary, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections) -> list[Array]:
    """split along axis 2 (depth)."""
    return _split_min_rank("dsplit", ary, indices_or_sections, 2)


# ---- resize ------------------------------------------------------------------------------
def resize(a: ArrayLike, new_shape) -> Array:
    """`a` flattened, repeated (or cut) to fill `new_shape` (zeros if `a` is empty)."""
    check_arraylike("resize", a)
    new_shape = _as_shape(new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError(f"all elements of `new_shape` must be non-negative, got {new_shape}")
    arr = ravel(a)
    new_size = math.prod(new_shape)
    if arr.size == 0 or new_size == 0:
        return zeros_like(arr, shape=new_shape)
    repeats = -(-new_size // arr.size)
    arr = so.slice_in_dim(tile(arr, repeats), 0, new_size, 1, 0)          # [new_size]
    return reshape(arr, new_shape)


# ---- insert and delete -------------------------------------------------------------------
def _index_along(axis: int, idx):
    return (slice(None),) * axis + (idx,)


def delete(arr: ArrayLike, obj, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Array:
    """`arr` without the entries `obj` (an int, a slice, int indices or a boolean mask) along
    `axis` (of the flattened `arr` if None).

    Traced indices need `assume_unique_indices=True`, which lets the output's size be
    known while tracing (as JAX).
    """
    check_arraylike("delete", arr)
    a = ensure_array(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    n = a.shape[axis]
    if not isinstance(obj, (slice, list, tuple)) and np.ndim(obj) == 0 and not _is_traced(obj):
        try:
            i = operator.index(_concrete(obj, "delete's obj"))
        except TypeError:
            pass
        else:
            i = canonicalize_axis(i, n)
            return concatenate([so.slice_in_dim(a, 0, i, 1, axis),
                                so.slice_in_dim(a, i + 1, n, 1, axis)], axis)
    if isinstance(obj, slice):
        obj, assume_unique_indices = np.arange(n)[obj], True
    if isinstance(obj, (list, tuple)):
        obj = np.asarray(obj)
    check_arraylike("delete", a, obj)
    if _is_traced(obj) and not assume_unique_indices:
        raise core.ConcretizationTypeError(
            f"delete with traced indices{core._at_user_line()}: the output's size depends on "
            "how many distinct indices there are. Pass assume_unique_indices=True (the "
            "indices must then be distinct) to delete under jit / vmap.")
    if _is_traced(obj) or (assume_unique_indices and dtypes.is_int(asarray(obj).dtype)):
        return _delete_unique(a, ensure_array(obj), axis, n)
    obj = _concrete_array(obj)
    if obj.dtype == np.bool_:
        if obj.shape != (n,):
            raise ValueError("delete(arr, obj): for boolean indices, obj must be "
                             f"one-dimensional with length {n} (the axis' size), got shape "
                             f"{obj.shape}")
        keep = ~obj
    elif np.issubdtype(obj.dtype, np.integer) or obj.size == 0:
        keep = np.ones(n, bool)
        keep[obj.astype(np.int64)] = False
    else:
        raise ValueError(f"delete(arr, obj): got obj.dtype={obj.dtype}; must be integer or "
                         "bool.")
    return a[_index_along(axis, np.nonzero(keep)[0].astype(np.int32))]


def _delete_unique(a, obj, axis: int, n: int):
    import fnad.numpy as jnp
    if not dtypes.is_int(obj.dtype):
        raise TypeError("delete: traced indices must be integers with "
                        f"assume_unique_indices=True, got {obj.dtype}")
    idx = jnp.ravel(obj)                                                  # [k]
    idx = jnp.clip(jnp.where(idx < 0, idx + n, idx), 0, n)
    idx = jnp.subtract(jnp.sort(idx), jnp.arange(idx.shape[0], dtype=idx.dtype))
    keep = jnp.arange(n - idx.shape[0], dtype=idx.dtype)                 # [n - k]
    keep = keep + jnp.sum(keep[None, :] >= idx[:, None], axis=0, dtype=keep.dtype)
    return a[_index_along(axis, keep)]


def insert(arr: ArrayLike, obj, values: ArrayLike, axis: int | None = None) -> Array:
    """`arr` with `values` inserted before the positions `obj` (an int, a slice or 1-D int
    indices, which may be traced) along `axis` (of the flattened `arr` if None)."""
    import fnad.numpy as jnp
    check_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = ensure_array(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    if isinstance(obj, slice):
        indices = asarray(np.arange(*obj.indices(a.shape[axis])))
    else:
        indices = asarray(obj)
    if indices.ndim > 1:
        raise ValueError("insert: obj must be a slice, a one-dimensional array, or a scalar; "
                         f"got shape {indices.shape}")
    if not dtypes.is_int(indices.dtype):
        if indices.size == 0 and not isinstance(obj, Array):
            indices = asarray(indices, np.int32)
        else:
            raise ValueError(f"insert: index array must be integer typed; got {indices.dtype}")
    values = jnp.array(values, ndmin=a.ndim, dtype=a.dtype)
    if indices.size == 1:
        index = ravel(indices)[0]
        if indices.ndim == 0:
            values = moveaxis(values, 0, axis)
        indices = jnp.full(values.shape[axis], index)
    n_input = a.shape[axis]
    n_insert = broadcast_shapes(indices.shape, (values.shape[axis],), fun_name="insert")[0]
    out_shape = list(a.shape)
    out_shape[axis] += n_insert
    out = zeros_like(a, shape=tuple(out_shape))
    indices = jnp.clip(jnp.where(indices < 0, indices + n_input, indices), 0, n_input)
    # Where each value lands: its index plus the number of values inserted before it.
    values_ind = indices.at[jnp.argsort(indices)].add(
        jnp.arange(n_insert, dtype=indices.dtype))                        # [n_insert]
    arr_mask = jnp.ones(n_input + n_insert, dtype=bool).at[values_ind].set(False)
    arr_ind = jnp.nonzero(arr_mask, size=n_input)[0]                      # [n_input]
    out = out.at[_index_along(axis, values_ind)].set(values)
    return out.at[_index_along(axis, arr_ind)].set(a)

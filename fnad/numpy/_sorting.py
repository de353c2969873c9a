"""Sorting and order statistics: sort, argsort, lexsort, partition, searchsorted, unique,
quantile / percentile / median and their NaN-skipping variants.

All lower to lax.sort (stable, NaNs last as in NumPy) plus gathers; values whose size
depends on the data (unique) need a static `size=` under jit, as in JAX.
Imports fnad.lax, the sort primitives, fnad.numpy._core, fnad.numpy._indexing and
fnad.numpy (its functions looked up at call time).
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import core, dtypes, lax
import fnad.numpy as jnp
from fnad.numpy._core import (
    asarray,
    canonicalize_axis,
    check_arraylike,
    promote_dtypes,
    promote_dtypes_inexact,
)
from fnad.primitives.sorting import sort as lax_sort
from fnad.primitives.sorting import sort_key_val
from fnad.numpy._indexing import (IndexUpdateHelper, _concrete, _is_traced, getitem, nonzero,
                                  take, take_along_axis)

__all__ = ["argpartition", "argsort", "lexsort", "median", "nanmedian", "nanpercentile",
           "nanquantile", "partition", "percentile", "quantile", "searchsorted", "sort",
           "sort_complex", "unique"]


def _ravel(a):
    return lax.reshape(a, (a.size,))


def _move_to_end(a, axes: tuple[int, ...]):
    """`a` with `axes` moved last (in order)."""
    perm = [d for d in range(a.ndim) if d not in axes] + list(axes)
    return a if perm == list(range(a.ndim)) else lax.transpose(a, perm)


def _index_dtype(n: int):
    return dtypes.canonicalize_dtype(np.int32 if n <= np.iinfo(np.int32).max else np.int64)


# ---- sort, argsort, lexsort, partition -----------------------------------------------------
def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """`a` sorted along `axis` (flattened when axis is None); NaNs sort last."""
    if order is not None:
        raise ValueError("The 'order' argument to sort is not supported.")
    check_arraylike("sort", a)
    a = asarray(a)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    out = lax_sort(a, dimension=axis, is_stable=stable)
    return lax.rev(out, (axis,)) if descending else out


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False):
    """Indices that sort `a` along `axis`; ties keep their order (also when descending)."""
    if order is not None:
        raise ValueError("The 'order' argument to argsort is not supported.")
    a = asarray(a)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    iota = lax.broadcasted_iota(_index_dtype(a.shape[axis] if a.ndim else 1), a.shape, axis)
    if descending:           # reverse first so that equal keys keep their order when flipped
        a, iota = lax.rev(a, (axis,)), lax.rev(iota, (axis,))
    _, idx = sort_key_val(a, iota, dimension=axis, is_stable=True)
    return lax.rev(idx, (axis,)) if descending else idx


def sort_complex(a):
    """`a` sorted along its last axis (real part first, then imaginary), as a complex array."""
    a = asarray(a)
    out = sort(a, axis=-1) if a.ndim else a
    dt = a.dtype if dtypes.is_complex(a.dtype) else dtypes.promote_types(a.dtype,
                                                                          np.complex64)
    return lax.convert_element_type(out, dtypes.canonicalize_dtype(dt))


def lexsort(keys, axis: int = -1):
    """Indices sorting by the last key, then the one before it, ... (stable)."""
    if hasattr(keys, "shape") and hasattr(keys, "dtype"):
        keys = tuple(getitem(asarray(keys), i) for i in range(keys.shape[0]))
    keys = tuple(keys)
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    keys = [asarray(k) for k in keys]
    if len({k.shape for k in keys}) != 1:
        raise ValueError("all keys need to be the same shape")
    shape = keys[0].shape
    if not shape:
        return asarray(np.zeros((), _index_dtype(1)))
    axis = canonicalize_axis(axis, len(shape))
    iota = lax.broadcasted_iota(_index_dtype(shape[axis]), shape, axis)
    outs = lax_sort((*keys[::-1], iota), dimension=axis, is_stable=True, num_keys=len(keys))
    return outs[-1]


def partition(a, kth: int, axis: int = -1):
    """A rearranged copy of `a` with its kth element in sorted position along `axis`.

    fnad returns the fully sorted array, which satisfies partition's contract.
    """
    a = asarray(a)
    axis = canonicalize_axis(axis, a.ndim)
    _check_kth(kth, a.shape[axis])
    return sort(a, axis)


def argpartition(a, kth: int, axis: int = -1):
    """Indices that partition `a` around its kth element (fnad: a full stable argsort)."""
    a = asarray(a)
    axis = canonicalize_axis(axis, a.ndim)
    _check_kth(kth, a.shape[axis])
    return argsort(a, axis)


def _check_kth(kth, n: int) -> None:
    kth = operator.index(kth)
    if not -n <= kth < n:
        raise ValueError(f"kth(={kth}) out of bounds ({n})")


# ---- searchsorted ----------------------------------------------------------------------------
def _lt_total(x, y):
    """x < y in NumPy's sort order, where NaN is the largest value."""
    if not dtypes.is_float(x.dtype):
        return lax.lt(x, y)
    return jnp.logical_or(lax.lt(x, y), jnp.logical_and(jnp.isnan(y),
                                                        jnp.logical_not(jnp.isnan(x))))


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """Insertion points of `v` into the sorted 1-D `a` that keep it sorted.

    side "left": first i with v <= a[i]; "right": first i with v < a[i]. method "scan"
    (the default; also "scan_unrolled") is a binary search of ceil(log2(n+1)) vectorized
    steps, "compare_all" compares every pair, "sort" ranks a merged sort.
    """
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of "
                         "['left', 'right']")
    a, v = asarray(a), asarray(v)
    if a.ndim != 1:
        raise ValueError("a should be 1-dimensional")
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    a, v = promote_dtypes(a, v)
    if dtypes.is_complex(a.dtype):
        raise NotImplementedError("searchsorted of complex arrays is not supported")
    n = a.shape[0]
    dtype = _index_dtype(n)
    if n == 0 or v.size == 0:
        return lax.full(v.shape, 0, dtype)
    if method in ("scan", "scan_unrolled"):
        return _searchsorted_bisect(a, v, side, dtype)
    if method == "compare_all":
        if side == "left":
            hits = _lt_total(lax.broadcast_in_dim(a, v.shape + (n,), (v.ndim,)),
                             lax.broadcast_in_dim(v, v.shape + (n,), tuple(range(v.ndim))))
        else:
            hits = jnp.logical_not(_lt_total(
                lax.broadcast_in_dim(v, v.shape + (n,), tuple(range(v.ndim))),
                lax.broadcast_in_dim(a, v.shape + (n,), (v.ndim,))))
        return jnp.sum(hits, axis=-1, dtype=dtype)                   # [*v.shape]
    if method == "sort":
        return _searchsorted_sort(a, v, side, dtype)
    raise ValueError(f"invalid searchsorted method {method!r}; expected 'scan', "
                     "'scan_unrolled', 'compare_all' or 'sort'")


def _searchsorted_bisect(a, v, side, dtype):
    n = a.shape[0]
    low = lax.full(v.shape, 0, dtype)
    high = lax.full(v.shape, n, dtype)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = lax.div(lax.add(low, high), np.array(2, dtype))
        a_mid = take(a, mid, mode="clip")                              # [*v.shape]
        if side == "left":
            go_left = jnp.logical_not(_lt_total(a_mid, v))              # v <= a[mid]
        else:
            go_left = _lt_total(v, a_mid)                               # v < a[mid]
        low, high = lax.select(go_left, low, mid), lax.select(go_left, mid, high)
    return high


def _searchsorted_sort(a, v, side, dtype):
    def rank(x):                    # rank[i] = position of x[i] in a stable sort of x
        order = argsort(x)
        return IndexUpdateHelper(jnp.zeros(x.shape, dtype))[order].set(
            lax.iota(dtype, x.shape[0]))
    q = _ravel(v)
    if side == "left":
        index = lax.slice(rank(lax.concatenate([q, a], 0)), (0,), (q.shape[0],))
    else:
        index = lax.slice(rank(lax.concatenate([a, q], 0)), (a.shape[0],),
                          (a.shape[0] + q.shape[0],))
    return lax.reshape(lax.sub(index, rank(q)), v.shape)


# ---- unique ----------------------------------------------------------------------------------
def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value=None, sorted: bool = True):  # noqa: A002
    """The sorted unique values (or slices along `axis`) of `ar`.

    The number of unique values depends on the data: under jit/vmap pass a static
    `size`; the result then has exactly `size` entries, padded with `fill_value`
    (default: the smallest unique value) or truncated.
    """
    check_arraylike("unique", ar)
    arr = asarray(ar)
    in_shape, flat = arr.shape, axis is None
    if axis is None:
        arr, axis = _ravel(arr), 0
    axis = canonicalize_axis(axis, arr.ndim)
    if arr.shape[axis] == 0 and size and fill_value is None:
        raise ValueError("unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    aux, mask, perm = _unique_sorted_mask(arr, axis, equal_nan)
    n = aux.shape[0]
    if size is None:
        if _is_traced(mask):
            raise core.ConcretizationTypeError(
                f"unique of a traced array{core._at_user_line()}: the number of unique "
                "values is not known while tracing. Pass a static `size=` (and optionally "
                "`fill_value=`) to unique under jit / vmap.")
        ind = asarray(np.nonzero(_concrete(mask))[0].astype(np.int32))
    else:
        size = operator.index(size)
        ind = nonzero(mask, size=size)[0]
    result = take(aux, ind, axis=0, mode="clip") if aux.size else aux
    if size is not None and fill_value is not None:
        fill = lax.convert_element_type(asarray(fill_value), result.dtype)
        if result.shape[0]:
            count = jnp.sum(mask, dtype=np.int32)
            valid = lax.lt(lax.iota(np.int32, size), count)               # [size]
            valid = lax.broadcast_in_dim(valid, result.shape, (0,))
            result = lax.select(valid, result, lax.broadcast_in_dim(fill, result.shape, ()))
        else:
            result = lax.broadcast_in_dim(fill, (size,) + result.shape[1:], ())
    result = jnp.moveaxis(result, 0, axis)
    ret = (result,)
    if return_index:
        ret += (take(perm, ind, mode="clip") if aux.size else perm,)
    if return_inverse:
        if aux.size:
            imask = lax.sub(jnp.cumsum(mask, dtype=perm.dtype), 1)
            inv = IndexUpdateHelper(jnp.zeros(mask.shape, perm.dtype))[perm].set(imask)
        else:
            inv = jnp.zeros(arr.shape[axis], perm.dtype)
        ret += (lax.reshape(inv, in_shape) if flat else inv,)   # NumPy 2: input's shape
    if return_counts:
        if aux.size:
            if size is None:
                idx = np.append(np.nonzero(_concrete(mask))[0], n)
                ret += (asarray(np.diff(idx).astype(np.int32)),)
            else:
                idx = nonzero(mask, size=size + 1)[0]                   # [size + 1]
                tail = lax.slice(idx, (1,), (size + 1,))
                tail = lax.select(lax.ne(tail, 0), tail, lax.full(tail.shape, n, tail.dtype))
                starts = lax.concatenate([lax.slice(idx, (0,), (1,)), tail], 0)
                ret += (lax.sub(tail, lax.slice(starts, (0,), (size,))),)   # padding: 0
        elif arr.shape[axis]:
            ret += (lax.full((1,), arr.shape[axis], np.int32),)
        else:
            ret += (lax.full((0,), 0, np.int32),)
    return ret[0] if len(ret) == 1 else ret


def _unique_sorted_mask(arr, axis: int, equal_nan: bool):
    """(rows of arr along axis sorted, mask of first-of-a-run rows, the sorting perm)."""
    aux = jnp.moveaxis(arr, axis, 0)
    n = aux.shape[0]
    rest = int(np.prod(aux.shape[1:], dtype=np.int64))
    if rest == 0:
        n_sort, perm = 1, asarray(np.zeros(1, np.int32))
    else:
        n_sort = n
        rows = lax.reshape(aux, (n, rest))
        perm = lexsort([getitem(rows, (slice(None), j)) for j in range(rest - 1, -1, -1)])
    if n == 0:
        return aux, jnp.zeros((n_sort if rest == 0 else 0,), bool), perm
    aux = take(aux, perm, axis=0, mode="clip")
    if n == 1 or rest == 0:
        return aux, lax.full((n_sort,), True, np.bool_), perm
    a, b = getitem(aux, slice(1, None)), getitem(aux, slice(None, -1))
    neq = lax.ne(a, b)
    if equal_nan and dtypes.is_inexact(aux.dtype):
        neq = jnp.logical_and(neq, jnp.logical_not(jnp.logical_and(jnp.isnan(a), jnp.isnan(b))))
    if aux.ndim > 1:
        neq = jnp.any(neq, axis=tuple(range(1, aux.ndim)))
    mask = lax.concatenate([lax.full((1,), True, np.bool_), neq], 0)        # [n]
    return aux, mask, perm


# ---- quantiles -------------------------------------------------------------------------------
_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a, q, axis, method, keepdims, squash_nans, name):
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    a, q = promote_dtypes_inexact(asarray(a), asarray(q))
    if dtypes.is_complex(a.dtype):
        raise ValueError(f"{name} does not support complex input")
    if q.ndim > 1:
        raise ValueError(f"q must be zero- or one-dimensional, got shape {q.shape}")
    if not _is_traced(q):
        qv = _concrete(q)
        if np.any((qv < 0) | (qv > 1)):
            raise ValueError("Quantiles must be in the range [0, 1]")
    nd = a.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(canonicalize_axis(d, nd) for d in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: repeated axis in {axis}")
    keep_shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
    out_shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    x = _move_to_end(a, axes)
    n = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    if n == 0:
        out = lax.full(q.shape + (keep_shape if keepdims else out_shape), np.nan, a.dtype)
        return out
    x = lax.reshape(x, out_shape + (n,))                                # [*rest, n]
    xs = lax_sort(x, dimension=x.ndim - 1)                              # NaNs last
    isnan = jnp.isnan(x)
    if squash_nans:
        count = lax.convert_element_type(jnp.sum(jnp.logical_not(isnan), axis=-1,
                                                 keepdims=True), a.dtype)  # [*rest, 1]
    else:
        count = lax.full(out_shape + (1,), n, a.dtype)
    qs = q if q.ndim else lax.reshape(q, (1,))                           # [Q]
    nq = qs.shape[0]
    pos = lax.mul(lax.broadcast_in_dim(qs, out_shape + (nq,), (len(out_shape),)),
                  lax.broadcast_in_dim(lax.sub(count, 1.0), out_shape + (nq,),
                                       tuple(range(len(out_shape) + 1))))   # [*rest, Q]
    pos = lax.max(pos, lax.full((), 0, a.dtype))
    low = lax.floor(pos)
    high = lax.ceil(pos)
    hi_max = lax.broadcast_in_dim(lax.max(lax.sub(count, 1.0), lax.full((), 0, a.dtype)),
                                  pos.shape, tuple(range(len(out_shape) + 1)))
    high = lax.min(high, hi_max)

    def at(p):
        return take_along_axis(xs, lax.convert_element_type(p, np.int32), axis=-1,
                               mode="clip")
    if method == "linear":
        frac = lax.sub(pos, low)
        out = lax.add(lax.mul(at(low), lax.sub(1.0, frac)), lax.mul(at(high), frac))
    elif method == "lower":
        out = at(low)
    elif method == "higher":
        out = at(high)
    elif method == "midpoint":
        out = lax.mul(lax.add(at(low), at(high)), 0.5)
    else:                                                       # nearest, ties to even
        out = at(lax.round(pos, lax.TO_NEAREST_EVEN))
    if squash_nans:
        empty = lax.broadcast_in_dim(lax.eq(count, 0), out.shape, tuple(range(out.ndim)))
    else:
        empty = lax.broadcast_in_dim(jnp.any(isnan, axis=-1, keepdims=True), out.shape,
                                     tuple(range(out.ndim)))
    out = lax.select(empty, lax.full(out.shape, np.nan, out.dtype), out)   # [*rest, Q]
    out = jnp.moveaxis(out, -1, 0)                                        # [Q, *rest]
    if keepdims:
        out = lax.reshape(out, (nq,) + keep_shape)
    if not q.ndim:
        out = lax.reshape(out, out.shape[1:])
    return out


def quantile(a, q, axis=None, out=None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, interpolation=None):
    """The q-th quantiles (q in [0, 1]) of `a` over `axis` (an int, a tuple or None).

    Shape: q.shape + the non-reduced dims of a (kept as 1 with keepdims). NaN if any
    value in a lane is NaN. Methods: linear, lower, higher, midpoint, nearest.
    """
    if out is not None:
        raise ValueError("quantile does not support the 'out' argument")
    return _quantile(a, q, axis, interpolation or method, keepdims, False, "quantile")


def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, interpolation=None):
    """quantile ignoring NaNs (NaN only where a lane is all NaN)."""
    if out is not None:
        raise ValueError("nanquantile does not support the 'out' argument")
    return _quantile(a, q, axis, interpolation or method, keepdims, True, "nanquantile")


def percentile(a, q, axis=None, out=None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, interpolation=None):
    """quantile with q in percent ([0, 100])."""
    q = jnp.true_divide(asarray(q), 100.0)
    return quantile(a, q, axis, out, overwrite_input, method, keepdims,
                    interpolation=interpolation)


def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, interpolation=None):
    """nanquantile with q in percent ([0, 100])."""
    q = jnp.true_divide(asarray(q), 100.0)
    return nanquantile(a, q, axis, out, overwrite_input, method, keepdims,
                       interpolation=interpolation)


def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """The median of `a` over `axis` (the mean of the two middle values for even sizes)."""
    return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """median ignoring NaNs."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)

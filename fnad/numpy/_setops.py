"""fnad.numpy's set operations: isin, the Array API's unique_values / unique_counts /
unique_inverse / unique_all, union1d, intersect1d, setdiff1d, setxor1d.

Built on _sorting's unique and sort, so they share its static-size rule (as JAX): a
result whose length depends on the data needs a static `size=` (padded with
`fill_value`, by default the smallest value found) when its inputs are traced.
Functions of fnad.numpy are looked up at call time.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from fnad import core, dtypes, lax
import fnad.numpy as jnp
from fnad.core import Array
from fnad.numpy._core import ArrayLike, asarray, check_arraylike, ensure_array, promote_dtypes
from fnad.numpy._index_routines import _is_traced
from fnad.numpy._sorting import _unique_sorted_mask, searchsorted, sort, unique
from fnad.primitives.sorting import sort as lax_sort

__all__ = ["intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique_all",
           "unique_counts", "unique_inverse", "unique_values"]


def _require_concrete(name: str, *arrays) -> None:
    if any(_is_traced(a) for a in arrays):
        raise core.ConcretizationTypeError(
            f"{name} of a traced array{core._at_user_line()}: the size of its result depends "
            f"on the values, which are not known while tracing. Pass a static `size=` (and "
            f"optionally `fill_value=`) to {name} under jit / vmap.")


def _static_size(size):
    return None if size is None else operator.index(size)


# ---- isin ------------------------------------------------------------------------------------
def _in1d(ar1, ar2, invert: bool, method: str = "auto"):
    arr1, arr2 = (ensure_array(a) for a in promote_dtypes(ar1, ar2))
    arr1, arr2 = jnp.ravel(arr1), jnp.ravel(arr2)
    if arr1.size == 0 or arr2.size == 0:
        return (jnp.ones if invert else jnp.zeros)(arr1.shape, dtype=bool)
    if method in ("auto", "compare_all"):
        if invert:
            return jnp.all(jnp.not_equal(arr1[:, None], arr2[None, :]), axis=-1)   # [N1]
        return jnp.any(jnp.equal(arr1[:, None], arr2[None, :]), axis=-1)          # [N1]
    if method in ("binary_search", "sort"):
        arr2 = sort(arr2)
        found = jnp.equal(arr1, arr2[searchsorted(arr2, arr1)])
        return jnp.logical_not(found) if invert else found
    raise ValueError(f"method={method!r} is not implemented; options are 'compare_all', "
                     "'binary_search', 'sort', and 'auto'")


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False,
         invert: bool = False, *, method: str = "auto") -> Array:
    """Whether each entry of `element` is in `test_elements` (element's shape).

    method 'auto' / 'compare_all' compares every pair (memory N·M); 'binary_search' and
    'sort' sort test_elements and search it (N log M).
    """
    check_arraylike("isin", element, test_elements)
    element = ensure_array(element)
    return jnp.reshape(_in1d(element, test_elements, invert, method), element.shape)


# ---- the Array API's unique functions -------------------------------------------------------
class _UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class _UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class _UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value=None) -> Array:
    """The sorted unique values of `x` (NaNs are each distinct); see unique for `size`."""
    check_arraylike("unique_values", x)
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: ArrayLike, /, *, size: int | None = None,
                  fill_value=None) -> _UniqueCountsResult:
    """(values, counts): the unique values of `x` and how often each occurs."""
    check_arraylike("unique_counts", x)
    values, counts = unique(x, return_counts=True, equal_nan=False, size=size,
                            fill_value=fill_value)
    return _UniqueCountsResult(values, counts)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None,
                   fill_value=None) -> _UniqueInverseResult:
    """(values, inverse_indices): values[inverse_indices] rebuilds `x` (x's shape)."""
    check_arraylike("unique_inverse", x)
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size,
                             fill_value=fill_value)
    return _UniqueInverseResult(values, inverse)


def unique_all(x: ArrayLike, /, *, size: int | None = None,
               fill_value=None) -> _UniqueAllResult:
    """(values, indices, inverse_indices, counts): unique with every optional output."""
    check_arraylike("unique_all", x)
    values, index, inverse, counts = unique(
        x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False,
        size=size, fill_value=fill_value)
    return _UniqueAllResult(values, index, inverse, counts)


# ---- two-set operations ----------------------------------------------------------------------
def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value=None) -> Array:
    """The sorted unique values found in either array (both flattened)."""
    check_arraylike("union1d", ar1, ar2)
    size = _static_size(size)
    if size is None:
        _require_concrete("union1d", ar1, ar2)
    return unique(jnp.concatenate([ensure_array(ar1), ensure_array(ar2)], axis=None),
                  size=size, fill_value=fill_value)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value=None) -> Array:
    """The sorted unique values of `ar1` that are not in `ar2` (fill_value defaults to 0)."""
    check_arraylike("setdiff1d", ar1, ar2)
    arr1, arr2 = jnp.ravel(ensure_array(ar1)), jnp.ravel(ensure_array(ar2))
    size = _static_size(size)
    if size is None:
        _require_concrete("setdiff1d", arr1)
    fill = jnp.full_like(arr1, 0 if fill_value is None else fill_value, shape=())
    if arr1.size == 0:
        return jnp.full_like(arr1, fill, shape=size or 0)
    if not assume_unique:
        arr1 = unique(arr1, size=size and arr1.size)
    mask = _in1d(arr1, arr2, invert=True)                                    # [N1]
    if size is None:
        return arr1[mask]
    if not assume_unique:                       # unique's padding repeats arr1[0]: drop it
        n_unique = arr1.size + 1 - jnp.sum(jnp.equal(arr1, arr1[0]))
        mask = jnp.where(jnp.arange(arr1.size) < n_unique, mask, False)
    picked = arr1[jnp.nonzero(mask, size=size)[0]]                            # [size]
    return jnp.where(jnp.arange(size) < jnp.sum(mask), picked, fill)


def _sorted_unique_count(arr):
    """(unique(arr, size=arr.size) with fill 0, its indices, the true number of uniques)."""
    values, index = unique(arr, return_index=True, size=arr.size, fill_value=0)
    _, mask, _ = _unique_sorted_mask(arr, 0, True)
    return values, index, jnp.sum(mask, dtype=np.int32)


def _concat_unique(arr1, arr2):
    """([unique(arr1), unique(arr2), 0 ...] of length N1 + N2, and the number of uniques)."""
    u1, _, n1 = _sorted_unique_count(arr1)
    u2, _, n2 = _sorted_unique_count(arr2)
    out = jnp.zeros(arr1.size + arr2.size, dtype=dtypes.result_type(u1, u2))
    out = lax.dynamic_update_slice(out, u1, (0,))
    out = lax.dynamic_update_slice(out, u2, (n1,))
    return out, n1 + n2


def _fill_after(vals, count, fill_value):
    """vals[i] for i < count, then fill_value (default: the smallest of vals[:count])."""
    valid = jnp.arange(vals.shape[0]) < count
    if fill_value is None:
        vals = jnp.where(valid, vals, jnp.max(vals))
        return jnp.where(valid, vals, jnp.min(vals))
    return jnp.where(valid, vals, fill_value)


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value=None) -> Array:
    """The sorted unique values in exactly one of the two arrays (both flattened)."""
    check_arraylike("setxor1d", ar1, ar2)
    arr1, arr2 = (jnp.ravel(ensure_array(a)) for a in promote_dtypes(ar1, ar2))
    size = _static_size(size)
    if size is not None:
        return _setxor1d_size(arr1, arr2, fill_value, assume_unique, size)
    _require_concrete("setxor1d", arr1, arr2)
    if not assume_unique:
        arr1, arr2 = unique(arr1), unique(arr2)
    aux = jnp.concatenate([arr1, arr2])
    if aux.size == 0:
        return aux
    aux = sort(aux)
    flag = jnp.concatenate([asarray([True]), jnp.not_equal(aux[1:], aux[:-1]),
                            asarray([True])])
    return aux[jnp.logical_and(flag[1:], flag[:-1])]


def _setxor1d_size(arr1, arr2, fill_value, assume_unique: bool, size: int):
    if assume_unique:
        aux = sort(jnp.concatenate([arr1, arr2]))
        flag = jnp.concatenate([asarray([aux.size > 0]), jnp.not_equal(aux[1:], aux[:-1]),
                                asarray([True])])
    else:
        arr, num_unique = _concat_unique(arr1, arr2)
        mask = jnp.arange(arr.size + 1) < num_unique + 1                    # [N + 1]
        _, aux = lax_sort((jnp.logical_not(mask[1:]), arr), dimension=0, is_stable=True,
                          num_keys=2)
        flag = jnp.concatenate([asarray([aux.size > 0]), jnp.not_equal(aux[1:], aux[:-1]),
                                asarray([False])])
        flag = jnp.logical_and(mask, flag.at[num_unique].set(True))
    aux_mask = jnp.logical_and(flag[1:], flag[:-1])
    count = jnp.sum(aux_mask)
    if aux.size:
        idx = jnp.nonzero(aux_mask, size=size, fill_value=aux.size)[0]
        vals = aux.at[idx].get(mode="fill", fill_value=0)
    else:
        vals = jnp.zeros(size, aux.dtype)
    return _fill_after(vals, count, fill_value)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None, fill_value=None):
    """The sorted unique values found in both arrays (both flattened); with
    return_indices, also where each first occurs in ar1 and in ar2."""
    check_arraylike("intersect1d", ar1, ar2)
    arr1, arr2 = (jnp.ravel(ensure_array(a)) for a in promote_dtypes(ar1, ar2))
    size = _static_size(size)
    if size is not None:
        return _intersect1d_size(arr1, arr2, fill_value, assume_unique, size, return_indices)
    _require_concrete("intersect1d", arr1, arr2)
    ind1 = ind2 = None
    if not assume_unique:
        if return_indices:
            arr1, ind1 = unique(arr1, return_index=True)
            arr2, ind2 = unique(arr2, return_index=True)
        else:
            arr1, arr2 = unique(arr1), unique(arr2)
    arr = jnp.concatenate([arr1, arr2])
    if return_indices:
        order = jnp.argsort(arr)
        aux = arr[order]
    else:
        aux = sort(arr)
    mask = jnp.equal(aux[1:], aux[:-1])
    int1d = aux[:-1][mask]
    if not return_indices:
        return int1d
    idx1 = order[:-1][mask]
    idx2 = order[1:][mask] - arr1.size
    if ind1 is not None:
        idx1, idx2 = ind1[idx1], ind2[idx2]
    return int1d, idx1, idx2


def _intersect1d_size(arr1, arr2, fill_value, assume_unique, size, return_indices):
    if assume_unique:
        ind1, n1 = jnp.arange(arr1.size), arr1.size
        ind2 = jnp.arange(arr2.size)
        arr = jnp.concatenate([arr1, arr2])
        aux, aux_idx = lax_sort((arr, jnp.arange(arr.size)), dimension=0, is_stable=True,
                                num_keys=1)
        mask = jnp.ones(arr.size, dtype=bool)
    else:
        arr1, ind1, n1 = _sorted_unique_count(arr1)
        arr2, ind2, n2 = _sorted_unique_count(arr2)
        arr = jnp.zeros(arr1.size + arr2.size, dtype=dtypes.result_type(arr1, arr2))
        arr = lax.dynamic_update_slice(arr, arr1, (0,))
        arr = lax.dynamic_update_slice(arr, arr2, (n1,))
        mask = jnp.arange(arr.size) < n1 + n2                                # [N]
        _, aux, aux_idx = lax_sort((jnp.logical_not(mask), arr, jnp.arange(arr.size)),
                                   dimension=0, is_stable=True, num_keys=2)
    # Sorted uniques of both: an intersection value is an adjacent equal pair.
    aux_mask = jnp.logical_and(jnp.equal(aux[1:], aux[:-1]), mask[1:])
    count = jnp.sum(aux_mask)
    if aux.size:
        val_idx = jnp.nonzero(aux_mask, size=size, fill_value=aux.size)[0]   # [size]
        vals = aux.at[val_idx].get(mode="fill", fill_value=0)
    else:
        val_idx = jnp.arange(0)
        vals = jnp.zeros(size, aux.dtype)
    vals = _fill_after(vals, count, fill_value)
    if not return_indices:
        return vals
    valid = jnp.arange(size) < count
    idx1 = jnp.where(valid, _get_or_fill(aux_idx, val_idx, arr1.size), arr1.size)
    idx2 = _get_or_fill(aux_idx, val_idx + 1, arr2.size) - n1
    idx2 = jnp.where(valid, idx2, arr2.size)
    if not assume_unique:
        idx1 = _get_or_fill(ind1, idx1, ind1.size)
        idx2 = _get_or_fill(ind2, idx2, ind2.size)
    return vals, idx1, idx2


def _get_or_fill(arr, idx, fill):
    """arr[idx], `fill` where idx is out of bounds (everywhere if arr is empty)."""
    if arr.shape[0] == 0:
        return jnp.full(idx.shape, fill, arr.dtype)
    return arr.at[idx].get(mode="fill", fill_value=fill)

"""NumPy's indexing routines: take, take_along_axis, nonzero / argwhere / flatnonzero,
compress, and the diag / tril / triu index helpers (x[idx] and x.at are in _indexing).

take and take_along_axis are single gathers; out-of-bounds indices are filled (NaN for
floats) by default, as in JAX. nonzero's result size depends on the data: concrete
inputs are answered in NumPy, traced ones need a static `size=` (a cumsum + scatter).
Imports fnad.core, fnad.lax, the primitive wrappers and fnad.numpy._core only.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import core, dtypes, lax
from fnad.core import Tracer, get_aval
from fnad.numpy._core import asarray, canonicalize_axis, check_arraylike
from fnad.primitives.cumulative import cumsum
from fnad.primitives.indexing import (GatherDimensionNumbers, ScatterDimensionNumbers, gather,
                                      scatter)

__all__ = ["argwhere", "compress", "diag_indices", "diag_indices_from", "flatnonzero", "nonzero",
           "take", "take_along_axis", "tril_indices", "tril_indices_from", "triu_indices",
           "triu_indices_from"]


# ---- helpers shared with _indexing ----------------------------------------------------------
def _is_traced(x) -> bool:
    return isinstance(x, Tracer) and x.to_concrete_value() is None


def _concrete(x) -> np.ndarray:
    """The NumPy value of a non-traced array-like."""
    if isinstance(x, Tracer):
        return np.asarray(x.to_concrete_value())
    return np.asarray(x)


def _ndim(v) -> int:
    return v.ndim if isinstance(v, np.ndarray) else get_aval(v).ndim


def _index_dtype(shape) -> np.dtype:
    big = any(d > np.iinfo(np.int32).max for d in shape)
    return dtypes.canonicalize_dtype(np.int64 if big else np.int32)


def _normalize(i, n: int, wrap: bool):
    """Negative indices count from the end (an int, a NumPy array or a traced array)."""
    if not wrap:
        return i
    if isinstance(i, int):
        return i + n if i < 0 else i
    if isinstance(i, np.ndarray):
        return np.where(i < 0, i + n, i) if i.dtype.kind == "i" else i
    if get_aval(i).dtype.kind == "u":
        return i
    return lax.select(lax.lt(i, 0), lax.add(i, n), i)


def _as_index(i, dtype):
    if isinstance(i, (int, np.ndarray, np.integer)):
        return np.asarray(i).astype(dtype)
    return lax.convert_element_type(i, dtype) if get_aval(i).dtype != dtype else i


def _broadcast_to(a, shape):
    """`a` (NumPy or traced) broadcast to `shape` by NumPy's rules."""
    shape = tuple(shape)
    if isinstance(a, np.ndarray):
        return a if a.shape == shape else np.broadcast_to(a, shape)
    a_shape = get_aval(a).shape
    if a_shape == shape:
        return a
    if len(a_shape) > len(shape):
        a = lax.reshape(a, a_shape[len(a_shape) - len(shape):])
        a_shape = get_aval(a).shape
    lead = len(shape) - len(a_shape)
    return lax.broadcast_in_dim(a, shape, tuple(range(lead, len(shape))))


# ---- take, take_along_axis ---------------------------------------------------------------------
def _index_operand(fun_name: str, indices):
    """Integer indices as a NumPy array (when known now) or a traced array."""
    if _is_traced(indices):
        if not dtypes.is_int(get_aval(indices).dtype):
            raise TypeError(f"{fun_name}: indices must be integers, got "
                            f"{get_aval(indices).dtype.name}")
        return indices
    v = _concrete(indices)
    if v.size == 0 and v.dtype.kind not in "iu":
        v = v.astype(np.int32)
    if v.dtype.kind not in "iu":
        raise TypeError(f"{fun_name}: indices must be integers, got {v.dtype.name}")
    return v


def _gather_mode(fun_name: str, mode, indices, n: int, wrap: bool = True):
    """(gather mode, indices adjusted for it) for take-style `mode` strings."""
    if mode is None or mode in ("fill", "drop"):
        return "fill", _normalize(indices, n, wrap)
    if mode == "clip":
        return "clip", indices
    if mode == "promise_in_bounds":
        return "clip", _normalize(indices, n, wrap)
    if mode == "wrap":
        if isinstance(indices, np.ndarray):
            return "clip", np.mod(indices, n)
        r = lax.rem(indices, n)
        return "clip", lax.select(lax.lt(r, 0), lax.add(r, n), r)
    if mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to {fun_name} is not supported.")
    raise ValueError(f"Invalid mode '{mode}' for {fun_name}")


def take(a, indices, axis: int | None = None, out=None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value=None):
    """Elements of `a` at `indices` along `axis` (of the flattened `a` when axis is None).

    Output shape: a.shape[:axis] + indices.shape + a.shape[axis+1:]. mode "fill" (the
    default) returns `fill_value` (NaN for floats) at out-of-bounds indices, "clip"
    clamps, "wrap" wraps around.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to take is not supported.")
    check_arraylike("take", a)
    a = asarray(a)
    idx = _index_operand("take", indices)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis = 0
    axis = canonicalize_axis(operator.index(axis), a.ndim)
    n = a.shape[axis]
    gmode, idx = _gather_mode("take", mode, idx, n)
    i_shape = idx.shape if isinstance(idx, np.ndarray) else get_aval(idx).shape
    out_shape = a.shape[:axis] + tuple(i_shape) + a.shape[axis + 1:]
    if n == 0:
        if int(np.prod(i_shape)):
            raise IndexError("Cannot do a non-empty take() from an empty axis.")
        return lax.full(out_shape, 0, a.dtype)
    if 0 in out_shape:
        return lax.full(out_shape, 0, a.dtype)
    idx = _as_index(idx, _index_dtype(a.shape))
    idx = idx[..., None] if isinstance(idx, np.ndarray) else lax.expand_dims(idx, (len(i_shape),))
    slice_sizes = a.shape[:axis] + (1,) + a.shape[axis + 1:]
    k = len(i_shape)
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + k, a.ndim + k - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    return gather(a, idx, dnums, slice_sizes, mode=gmode, fill_value=fill_value,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)


def take_along_axis(arr, indices, axis: int | None, mode: str | None = None, fill_value=None):
    """out[..., j, ...] = arr[..., indices[..., j, ...], ...] along `axis`.

    `indices` has arr's rank; the other dims broadcast against arr's. mode "fill" (the
    default) returns `fill_value` (NaN for floats) at out-of-bounds indices; "clip" clamps.
    """
    arr = asarray(arr)
    idx = _index_operand("take_along_axis", indices)
    if axis is None:
        if _ndim(idx) != 1:
            raise ValueError("take_along_axis: when axis is None, indices must be 1-D, got "
                             f"shape {np.shape(idx) if isinstance(idx, np.ndarray) else idx.shape}")
        arr = lax.reshape(arr, (arr.size,))
        axis = 0
    i_shape = idx.shape if isinstance(idx, np.ndarray) else get_aval(idx).shape
    if len(i_shape) != arr.ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{len(i_shape)} vs. {arr.ndim}")
    axis = canonicalize_axis(operator.index(axis), arr.ndim)
    out_shape = []
    for d, (na, ni) in enumerate(zip(arr.shape, i_shape)):
        if d == axis:
            out_shape.append(ni)
        elif na == ni or na == 1 or ni == 1:
            out_shape.append(ni if na == 1 else na)
        else:
            raise ValueError(f"take_along_axis: indices shape {tuple(i_shape)} is not "
                             f"broadcast-compatible with arr shape {arr.shape} along dim {d}")
    out_shape = tuple(out_shape)
    if 0 in out_shape:
        return lax.full(out_shape, 0, arr.dtype)
    # Unlike take (NumPy's clip clamps -1 to 0), negative indices always wrap here (as JAX).
    n = arr.shape[axis]
    gmode, idx = _gather_mode("take_along_axis", mode, _normalize(idx, n, True), n,
                              wrap=False)
    idx = _broadcast_to(_as_index(idx, _index_dtype(arr.shape)), out_shape)
    idx = idx[..., None] if isinstance(idx, np.ndarray) else lax.expand_dims(idx, (arr.ndim,))
    # Dims other than `axis` pair up as batching dims (or, where arr's is 1, collapse).
    batch = tuple(d for d in range(arr.ndim) if d != axis and arr.shape[d] == out_shape[d])
    dnums = GatherDimensionNumbers(
        offset_dims=(), start_index_map=(axis,),
        collapsed_slice_dims=tuple(d for d in range(arr.ndim) if d not in batch),
        operand_batching_dims=batch, start_indices_batching_dims=batch)
    return gather(arr, idx, dnums, (1,) * arr.ndim, mode=gmode, fill_value=fill_value)


# ---- nonzero and friends -----------------------------------------------------------------------
def _pad_to_size(arrs, size, fill_value):
    out = []
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * len(arrs)
    if len(fills) != len(arrs):
        raise ValueError(f"fill_value must be a scalar or a tuple of length {len(arrs)}")
    for a, f in zip(arrs, fills):
        a = a[:size]
        pad = np.full(size - a.shape[0], 0 if f is None else _concrete(f), a.dtype)
        out.append(np.concatenate([a, pad]))
    return out


def nonzero(a, *, size: int | None = None, fill_value=None) -> tuple:
    """Indices of the nonzero elements of `a`, one int array per dimension.

    The result's length depends on the data, so under jit/vmap `size` must be given:
    the first `size` indices are returned, padded with `fill_value` (default 0).
    """
    aval = get_aval(a)
    if aval.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "fnad.numpy.atleast_1d(scalar).nonzero() instead.")
    idx_dtype = dtypes.default_int_dtype()
    if not _is_traced(a):
        nz = [i.astype(idx_dtype) for i in np.nonzero(_concrete(a))]
        if size is not None:
            nz = _pad_to_size(nz, operator.index(size), fill_value)
        return tuple(asarray(i) for i in nz)
    if size is None:
        raise core.ConcretizationTypeError(
            f"nonzero of a traced array {aval.str_short()}{core._at_user_line()}: the number "
            "of nonzero elements is not known while tracing. Pass a static `size=` (and "
            "optionally `fill_value=`) to nonzero / argwhere / flatnonzero / where(cond), or "
            "size= to unique.")
    size = operator.index(size)
    n = aval.size
    flat = lax.reshape(a, (n,))
    mask = flat if dtypes.is_bool(aval.dtype) else lax.ne(flat, lax.full((), 0, aval.dtype))
    if size == 0 or n == 0:
        return tuple(lax.full((size,), 0 if fill_value is None else fill_value, idx_dtype)
                     for _ in aval.shape)
    m = lax.convert_element_type(mask, idx_dtype)
    count = cumsum(m, axis=0)                           # [n] running count
    target = lax.select(mask, lax.sub(count, 1), lax.full((n,), size, idx_dtype))
    dnums = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    flat_idx = scatter(lax.full((size,), 0, idx_dtype), lax.expand_dims(target, (1,)),
                           lax.iota(idx_dtype, n), dnums, mode="drop")   # [size]
    total = lax.slice(count, (n - 1,), (n,))                # [1] number of nonzeros
    valid = lax.lt(lax.iota(idx_dtype, size), lax.broadcast_in_dim(total, (size,), (0,)))
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * aval.ndim
    out = []
    stride = n
    for d, f in zip(aval.shape, fills):
        stride //= d
        coord = lax.rem(lax.div(flat_idx, stride), d) if stride > 1 or d < n else flat_idx
        if f is not None:
            coord = lax.select(valid, coord, lax.full((size,), f, idx_dtype))
        out.append(coord)
    return tuple(out)


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """Indices of the nonzero elements of the flattened `a` (see nonzero for `size`)."""
    a = asarray(a)
    return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size: int | None = None, fill_value=None):
    """[N, a.ndim] indices of the nonzero elements of `a` (see nonzero for `size`)."""
    a = asarray(a)
    ndim = a.ndim
    nz = nonzero(lax.reshape(a, (a.size,)) if ndim == 0 else a, size=size,
                 fill_value=fill_value)
    cols = [lax.expand_dims(i, (1,)) for i in nz]
    out = cols[0] if len(cols) == 1 else lax.concatenate(cols, 1)   # [N, ndim]
    if ndim == 0:
        out = lax.reshape(lax.slice(out, (0, 0), (out.shape[0], 0)), (out.shape[0], 0))
    return out


def compress(condition, a, axis: int | None = None, *, size: int | None = None,
             fill_value=0, out=None):
    """The slices of `a` along `axis` where the 1-D `condition` is true."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to compress is not supported.")
    a = asarray(a)
    cond = asarray(condition)
    if cond.ndim != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        a, axis = lax.reshape(a, (a.size,)), 0
    axis = canonicalize_axis(axis, a.ndim)
    n = a.shape[axis]
    if cond.shape[0] > n:
        if not _is_traced(cond) and _concrete(cond)[n:].any():
            raise ValueError("condition contains entries that are out of bounds")
        cond = lax.slice(cond, (0,), (n,))
    idx = nonzero(cond, size=size, fill_value=n if size is not None else None)[0]
    return take(a, idx, axis=axis, mode="fill", fill_value=fill_value)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """Indices of the main diagonal of an [n]*ndim array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"n and ndim must be non-negative, got n={n}, ndim={ndim}")
    return (asarray(np.arange(n)),) * ndim


def diag_indices_from(arr) -> tuple:
    """diag_indices for an array whose dims are all equal."""
    shape = np.shape(arr) if not isinstance(arr, (core.Array, Tracer)) else arr.shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError("input array must be at least 2-d and all dimensions must be equal")
    return diag_indices(shape[0], len(shape))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """(rows, cols) of the lower triangle (diagonal offset k) of an [n, m] array."""
    return tuple(asarray(i) for i in np.tril_indices(operator.index(n), operator.index(k),
                                                     None if m is None else operator.index(m)))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """(rows, cols) of the upper triangle (diagonal offset k) of an [n, m] array."""
    return tuple(asarray(i) for i in np.triu_indices(operator.index(n), operator.index(k),
                                                     None if m is None else operator.index(m)))


def tril_indices_from(arr, k: int = 0) -> tuple:
    """tril_indices for the shape of the 2-D `arr`."""
    shape = np.shape(arr) if not isinstance(arr, (core.Array, Tracer)) else arr.shape
    if len(shape) != 2:
        raise ValueError("input array must be 2-d")
    return tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr, k: int = 0) -> tuple:
    """triu_indices for the shape of the 2-D `arr`."""
    shape = np.shape(arr) if not isinstance(arr, (core.Array, Tracer)) else arr.shape
    if len(shape) != 2:
        raise ValueError("input array must be 2-d")
    return triu_indices(shape[0], k, shape[1])

"""NumPy implementations of gather and the scatters, by vectorized fancy indexing.

Both build one integer index array per operand dimension that is indexed ("advanced"
dims), laid out as [batch dims of the indices..., window dims...], and leave window
dims that span the whole operand dimension as plain slices (the operand is
permuted so that those come last). An embedding lookup ([V, C] at [B, T, 1]) is
then `operand[idx]`; take_along_axis is `operand[arange, idx]`. Scatters apply
the same index arrays with `ufunc.at` (repeated indices accumulate); `scatter`
(set) keeps the last update, in row-major order of the index batch dims, of each
element written more than once.
"""
from __future__ import annotations

import math

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import indexing as ix

_CLIP, _FILL = ix.GatherScatterMode.CLIP, ix.GatherScatterMode.FILL_OR_DROP


def _signed(indices: np.ndarray) -> np.ndarray:
    """uint64 indices as intp, saturating: np.take and intp arithmetic would wrap them."""
    if indices.dtype == np.uint64:
        return np.minimum(indices, np.iinfo(np.intp).max).astype(np.intp)
    return indices


def _plan(op_shape, indices, window: dict, index_map, obd, ibd, clip: bool):
    """Index arrays for the gather/scatter of windows `window` {operand dim: size}.

    Returns (adv_dims, full_dims, arrays, batch_shape, valid): `arrays[i]` indexes
    operand dim adv_dims[i] and broadcasts to batch_shape + [window sizes of the
    advanced window dims]; full_dims are sliced whole; `valid` (batch_shape bool, or
    None) marks windows fully in bounds, for clip=False (fill / drop).
    """
    batch_shape = indices.shape[:-1]
    nb = len(batch_shape)
    starts, valid = {}, None
    if index_map:
        limit = max(op_shape[d] for d in index_map)
        if indices.dtype.kind not in "iu" or np.iinfo(indices.dtype).max < limit:
            indices = indices.astype(np.intp)          # room to hold the clip bounds
        for k, d in enumerate(index_map):
            hi = op_shape[d] - window.get(d, 1)
            s = indices[..., k]
            if not clip:
                ok = (s >= 0) & (s <= hi)
                valid = ok if valid is None else valid & ok
            starts[d] = np.minimum(np.maximum(s, 0), max(hi, 0))   # np.clip is slower
    full = [d for d, size in window.items() if d not in starts and size == op_shape[d]]
    adv = [d for d in range(len(op_shape)) if d not in full]
    adv_win = [d for d in adv if d in window]
    ones = (1,) * (nb + len(adv_win))
    arrays = []
    for d in adv:
        terms = []
        if d in starts:
            terms.append(starts[d].reshape(batch_shape + (1,) * len(adv_win)))
        if d in obd:
            b = ibd[obd.index(d)]
            terms.append(np.arange(op_shape[d]).reshape(ones[:b] + (-1,) + ones[b + 1:]))
        if d in window:
            w = nb + adv_win.index(d)
            terms.append(np.arange(window[d]).reshape(ones[:w] + (-1,) + ones[w + 1:]))
        a = terms[0] if terms else np.zeros(ones, np.intp)
        for t in terms[1:]:
            a = a + t
        arrays.append(a)
    if not adv:                                        # nothing indexed: index a new unit dim
        arrays.append(np.zeros(ones, np.intp))
    shape = batch_shape + tuple(window[d] for d in adv_win)
    arrays = [np.broadcast_to(a, shape) for a in arrays]
    return adv, adv_win, full, arrays, batch_shape, valid


def _permuted(x, adv, full):
    """x with its dims in the order adv + full; a new leading unit dim if adv is empty."""
    perm = tuple(adv) + tuple(full)
    x = x if perm == tuple(range(x.ndim)) else x.transpose(perm)
    return x if adv else x[None]


def _gather(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
            indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    operand, indices = np.asarray(operand), _signed(np.asarray(indices))
    window = {d: slice_sizes[d] for d in range(operand.ndim)
              if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims}
    win_dims = list(window)
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(win_dims)
    batch_iter, win_iter = iter(batch_shape), iter(window.values())
    out_shape = tuple(next(win_iter) if o in dn.offset_dims else next(batch_iter)
                      for o in range(out_rank))
    if math.prod(out_shape) == 0:
        return np.zeros(out_shape, operand.dtype)
    sim = dn.start_index_map
    if (len(sim) == 1 and sim[0] not in window and not dn.operand_batching_dims
            and all(size == operand.shape[d] for d, size in window.items())):
        # x[idx] along one dim (embedding lookup): np.take clamps and copies whole rows
        adv, adv_win, full = list(sim), [], win_dims
        s = indices[..., 0]
        out = np.take(_permuted(operand, adv, full), s, axis=0, mode="clip")
        valid = None if mode is not _FILL else (s >= 0) & (s < operand.shape[sim[0]])
    else:
        adv, adv_win, full, arrays, batch_shape, valid = _plan(
            operand.shape, indices, window, sim, dn.operand_batching_dims,
            dn.start_indices_batching_dims, clip=mode is not _FILL)
        out = _permuted(operand, adv, full)[tuple(arrays)]  # [batch, adv window, full window]
    nb = len(batch_shape)
    if valid is not None and not valid.all():
        mask = valid.reshape(batch_shape + (1,) * (out.ndim - nb))
        out = np.where(mask, out, np.asarray(fill_value, operand.dtype))
    canon = {d: nb + (adv_win.index(d) if d in adv_win else len(adv_win) + full.index(d))
             for d in win_dims}
    batch_axes, win_axes = iter(range(nb)), iter(canon[d] for d in win_dims)
    perm = tuple(next(win_axes) if o in dn.offset_dims else next(batch_axes)
                 for o in range(out_rank))
    return out if perm == tuple(range(out_rank)) else out.transpose(perm)


def _fresh_copy(x):
    """A writable copy of x; a broadcast scalar (e.g. `full`'s zeros) is not read, only filled."""
    if x.size and x.ndim and not any(x.strides):
        v = x.reshape(-1)[0]
        if v == 0 and (x.dtype.kind in "biu" or not np.signbit(np.real(v).astype(np.float64))):
            return np.zeros(x.shape, x.dtype)            # calloc: pages zeroed on first touch
        return np.full(x.shape, v, x.dtype)
    return np.array(x, copy=True)


def _scatter(combine):
    def impl(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode):
        dn = dimension_numbers
        operand, indices, updates = np.asarray(operand), np.asarray(indices), np.asarray(updates)
        indices = _signed(indices)
        out = _fresh_copy(operand)
        if updates.size == 0 or out.size == 0:
            return out
        win_dims = [d for d in range(operand.ndim)
                    if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
        upd_dim = dict(zip(win_dims, dn.update_window_dims, strict=True))
        window = {d: updates.shape[upd_dim[d]] for d in win_dims}
        adv, adv_win, full, arrays, batch_shape, valid = _plan(
            operand.shape, indices, window, dn.scatter_dims_to_operand_dims,
            dn.operand_batching_dims, dn.scatter_indices_batching_dims, clip=mode is _CLIP)
        scatter_dims = [u for u in range(updates.ndim) if u not in dn.update_window_dims]
        uperm = tuple(scatter_dims + [upd_dim[d] for d in adv_win + full])
        upd = updates if uperm == tuple(range(updates.ndim)) else updates.transpose(uperm)
        if valid is not None and not valid.all():      # drop windows not fully in bounds
            arrays = [a[valid] for a in arrays]
            upd = upd[valid]
        combine(_permuted(out, adv, full), tuple(arrays), upd, unique_indices)
        return out
    return impl


def _set(target, index, upd, unique):
    if not unique and index[0].size:                   # keep the last of repeated elements
        lin = np.ravel_multi_index(tuple(a.reshape(-1) for a in index),
                                   target.shape[:len(index)])
        _, first = np.unique(lin[::-1], return_index=True)
        if first.size != lin.size:
            keep = lin.size - 1 - first
            index = tuple(a.reshape(-1)[keep] for a in index)
            upd = upd.reshape((lin.size,) + target.shape[len(index):])[keep]
    target[index] = upd


ROW_AT_MIN_ROWS = 32            # scattered windows: fewer go through ufunc.at as they are
ROW_AT_MIN_WIDTH = 16           # elements per window: narrower ones too
ROW_AT_MAX_PASSES = 32          # windows landing on one row: more go through ufunc.at


def _ufunc_at(ufunc):
    def combine(target, index, upd, unique):
        if not _rows_at(ufunc, target, index, upd):
            ufunc.at(target, index, upd)
    return combine


def _rows_at(ufunc, target, index, upd) -> bool:
    """ufunc.at(target, index, upd) when every index picks a whole window of `target`'s
    trailing dims (an embedding's gradient: rows of a table), one pass per repeat: pass r
    combines, with one fancy-indexed ufunc call, the r-th window to land on each row. Each
    row sees its windows in their order, so the result is ufunc.at's bit for bit; ufunc.at
    walks such windows element by element (the scatter-add of 1024 rows of 256 into a
    [256, 256] table: 3.4 ms that way, 0.32 ms this way). False (nothing done) where it
    does not apply: few or narrow windows, many on one row, or a target whose rows are not
    one memory block each."""
    k = len(index)
    idx_shape = index[0].shape
    n, width = math.prod(idx_shape), math.prod(target.shape[k:])
    if n < ROW_AT_MIN_ROWS or width < ROW_AT_MIN_WIDTH or upd.shape != idx_shape + target.shape[k:]:
        return False
    try:
        rows = np.reshape(target, (math.prod(target.shape[:k]), width), copy=False)
    except ValueError:                                   # a copy: writes would be lost
        return False
    lin = np.ravel_multi_index(tuple(a.reshape(-1) for a in index), target.shape[:k])
    order = np.argsort(lin, kind="stable")               # equal rows keep their order
    sorted_lin = lin[order]
    run_start = np.concatenate(([True], sorted_lin[1:] != sorted_lin[:-1]))
    starts = np.flatnonzero(run_start)
    repeat = np.arange(n) - starts[np.cumsum(run_start) - 1]    # r: the r-th on its row
    passes = int(repeat.max()) + 1
    if passes > ROW_AT_MAX_PASSES:
        return False
    upd = upd.reshape(n, width)
    for r in range(passes):
        sel = order[repeat == r]
        at = lin[sel]
        rows[at] = ufunc(rows[at], upd[sel])
    return True


impl_rules[ix.gather_p] = _gather
impl_rules[ix.scatter_p] = _scatter(_set)
impl_rules[ix.scatter_add_p] = _scatter(_ufunc_at(np.add))
impl_rules[ix.scatter_mul_p] = _scatter(_ufunc_at(np.multiply))
impl_rules[ix.scatter_min_p] = _scatter(_ufunc_at(np.minimum))
impl_rules[ix.scatter_max_p] = _scatter(_ufunc_at(np.maximum))

"""Structural operations on BCOO arrays, as jax.experimental.sparse's: slice, dynamic_slice,
rev, squeeze, broadcast_in_dim, concatenate, reshape and update_layout.

Each acts on the three groups of dims of a BCOO [*B, *S, *D] separately (bcoo.py's module
doc): batch dims are the leading dims of `data` and `indices`, sparse dims live in the index
columns, dense dims are the trailing dims of `data`. An entry that a slice leaves out, or a
reversal or reshape moves, keeps its slot: its index becomes the padding index (the size of
its dim) or is rewritten, so nse is unchanged unless it exceeds the number of positions of
the new sparse shape (then the entries are compacted, as jax does). Everything is composed
from fnad.numpy / fnad.lax operations, so grad (through data), vmap and jit work as for the
rest of the module.
"""
from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.experimental.sparse.bcoo import (BCOO, _broadcast_batch, _check_bcoo, _fill_value,
                                           _normalize_axis, bcoo_sum_duplicates)

__all__ = ["CuSparseEfficiencyWarning", "SparseEfficiencyError", "SparseEfficiencyWarning",
           "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_dynamic_slice", "bcoo_gather",
           "bcoo_reshape", "bcoo_rev", "bcoo_slice", "bcoo_squeeze", "bcoo_update_layout"]


class SparseEfficiencyError(ValueError):
    """A layout change would store (many) more entries than the array has."""


class SparseEfficiencyWarning(UserWarning):
    """As SparseEfficiencyError, when on_inefficient='warn'."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """jax warns this when an operation falls back from its cuSPARSE kernel; fnad has no
    cuSPARSE path and never raises it. Here so that code filtering it works unchanged."""


def _mark_padding(indices, keep, sizes):
    """indices with the rows where `keep` is False set to the padding index `sizes`."""
    return jnp.where(keep[..., None], indices, jnp.asarray(np.asarray(sizes, indices.dtype)))


def _cap_nse(out: BCOO) -> BCOO:
    """out with nse cut to the number of positions of its sparse shape (entries compacted),
    where nse exceeds it."""
    nb, ns, _, nse = out._layout()
    positions = math.prod(out.shape[nb:nb + ns])
    return bcoo_sum_duplicates(out, nse=positions) if nse > positions else out


# ---- slicing -------------------------------------------------------------------------------
def bcoo_slice(mat: BCOO, *, start_indices: Sequence[int], limit_indices: Sequence[int],
               strides: Sequence[int] | None = None) -> BCOO:
    """mat[start:limit:stride] per dim, as lax.slice (jax.experimental.sparse.bcoo_slice)."""
    _check_bcoo(mat, "bcoo_slice")
    nb, ns, nd, nse = mat._layout()
    start = tuple(operator.index(s) for s in start_indices)
    limit = tuple(operator.index(s) for s in limit_indices)
    strides = (1,) * mat.ndim if strides is None else tuple(operator.index(s) for s in strides)
    if not len(start) == len(limit) == len(strides) == mat.ndim:
        raise ValueError(f"bcoo_slice: start_indices, limit_indices and strides need one entry "
                         f"per dim of shape {mat.shape}, got {start}, {limit}, {strides}")
    for d, (a, b, s, n) in enumerate(zip(start, limit, strides, mat.shape)):
        if not (0 <= a <= b <= n) or s < 1:
            raise ValueError(f"bcoo_slice: dim {d} of size {n}: need 0 <= start <= limit <= "
                             f"size and stride >= 1, got start {a}, limit {b}, stride {s}")
    out_shape = tuple(-(-(b - a) // s) for a, b, s in zip(start, limit, strides))
    data, indices = mat.data, mat.indices
    bslices = [slice(a, b, s) if data.shape[d] != 1 or mat.shape[d] == 1 else slice(None)
               for d, (a, b, s) in enumerate(zip(start[:nb], limit[:nb], strides[:nb]))]
    islices = [slice(a, b, s) if indices.shape[d] != 1 or mat.shape[d] == 1 else slice(None)
               for d, (a, b, s) in enumerate(zip(start[:nb], limit[:nb], strides[:nb]))]
    data = data[(*bslices, slice(None), *(slice(a, b, s) for a, b, s in
                                          zip(start[nb + ns:], limit[nb + ns:],
                                              strides[nb + ns:])))]
    indices = indices[(*islices,)]
    if ns:
        lo = np.asarray(start[nb:nb + ns], np.int64)
        hi = np.asarray(limit[nb:nb + ns], np.int64)
        st = np.asarray(strides[nb:nb + ns], np.int64)
        idx = indices.astype(np.int64) if indices.dtype != np.int64 else indices
        rel = idx - lo
        keep = jnp.all((idx >= lo) & (idx < hi) & (rel % st == 0), axis=-1)
        new = (rel // st).astype(indices.dtype)
        indices = _mark_padding(new, keep, out_shape[nb:nb + ns])
    out = BCOO((data, indices), shape=out_shape, indices_sorted=mat.indices_sorted,
               unique_indices=mat.unique_indices)
    return _cap_nse(out)


def bcoo_dynamic_slice(mat: BCOO, start_indices: Sequence, slice_sizes: Sequence[int]) -> BCOO:
    """lax.dynamic_slice of mat (starts may be traced; a negative start counts from the end,
    then starts are clamped into the array, as lax)."""
    _check_bcoo(mat, "bcoo_dynamic_slice")
    nb, ns, nd, nse = mat._layout()
    sizes = tuple(operator.index(s) for s in slice_sizes)
    if len(start_indices) != mat.ndim or len(sizes) != mat.ndim:
        raise ValueError(f"bcoo_dynamic_slice: start_indices and slice_sizes need one entry "
                         f"per dim of shape {mat.shape}, got {len(start_indices)} and "
                         f"{len(sizes)}")
    for d, (z, n) in enumerate(zip(sizes, mat.shape)):
        if not 0 <= z <= n:
            raise ValueError(f"bcoo_dynamic_slice: slice size {z} of dim {d} does not fit its "
                             f"size {n}")
    starts = []
    for s, n, z in zip(start_indices, mat.shape, sizes):  # negative: from the end, as lax
        s = jnp.asarray(s).astype(np.int32)
        starts.append(jnp.clip(jnp.where(s < 0, s + n, s), 0, n - z))
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    zero = jnp.zeros((), np.int32)
    data = lax.dynamic_slice(data, (*starts[:nb], zero, *starts[nb + ns:]),
                             (*sizes[:nb], nse, *sizes[nb + ns:]))
    indices = lax.dynamic_slice(indices, (*starts[:nb], zero, zero),
                                (*sizes[:nb], nse, ns))
    if ns:
        lo = jnp.stack(starts[nb:nb + ns]).astype(indices.dtype)
        rel = indices - lo
        keep = jnp.all((rel >= 0) & (rel < np.asarray(sizes[nb:nb + ns], indices.dtype)),
                       axis=-1)
        indices = _mark_padding(rel, keep, sizes[nb:nb + ns])
    out = BCOO((data, indices), shape=sizes, indices_sorted=mat.indices_sorted,
               unique_indices=mat.unique_indices)
    return _cap_nse(out)


def bcoo_rev(operand: BCOO, dimensions: Sequence[int]) -> BCOO:
    """lax.rev of a BCOO: the order of the listed dims reversed."""
    _check_bcoo(operand, "bcoo_rev")
    nb, ns, nd, _ = operand._layout()
    dims = sorted({_normalize_axis(d, operand.ndim, "bcoo_rev") for d in dimensions})
    data, indices = _broadcast_batch(operand.data, operand.indices, operand.shape,
                                     operand._layout())
    bdims = [d for d in dims if d < nb]
    ddims = [d - ns + 1 for d in dims if d >= nb + ns]           # data's dim numbers
    if bdims or ddims:
        data = lax.rev(data, (*bdims, *ddims))
    if bdims:
        indices = lax.rev(indices, bdims)
    sdims = [d - nb for d in dims if nb <= d < nb + ns]
    if sdims:
        sizes = np.asarray(operand.shape[nb:nb + ns], indices.dtype)
        flip = np.zeros(ns, bool)
        flip[sdims] = True
        valid = jnp.all(indices < sizes, axis=-1, keepdims=True)
        flipped = jnp.where(flip, sizes - 1 - indices, indices)
        indices = jnp.where(valid, flipped, indices)
    return BCOO((data, indices), shape=operand.shape, unique_indices=operand.unique_indices)


def bcoo_squeeze(arr: BCOO, *, dimensions: Sequence[int]) -> BCOO:
    """lax.squeeze of a BCOO: the listed dims (each of size 1) removed."""
    _check_bcoo(arr, "bcoo_squeeze")
    nb, ns, nd, _ = arr._layout()
    dims = sorted({_normalize_axis(d, arr.ndim, "bcoo_squeeze") for d in dimensions})
    for d in dims:
        if arr.shape[d] != 1:
            raise ValueError(f"bcoo_squeeze: dim {d} of shape {arr.shape} has size "
                             f"{arr.shape[d]}, not 1")
    data, indices = arr.data, arr.indices
    sdims = [d - nb for d in dims if nb <= d < nb + ns]
    if sdims:                                 # entries marked padding there must stay out
        pad = jnp.any(jnp.take(indices, np.asarray(sdims, np.int32), axis=-1) >= 1, axis=-1)
        others = [j for j in range(ns) if j not in sdims]
        indices = jnp.take(indices, np.asarray(others, np.int32), axis=-1) if others else \
            jnp.zeros((*indices.shape[:-1], 0), indices.dtype)
        sizes = np.asarray([arr.shape[nb + j] for j in others], indices.dtype)
        indices = jnp.where(pad[..., None], sizes, indices)
        if not others:                        # no index left to mark padding: zero its data
            data, indices = _broadcast_batch(data, indices, arr.shape, arr._layout())
            pad = jnp.broadcast_to(pad, indices.shape[:-1])
            data = jnp.where(pad.reshape(pad.shape + (1,) * (data.ndim - pad.ndim)), 0, data)
    bdims = [d for d in dims if d < nb]
    ddims = [d - ns + 1 for d in dims if d >= nb + ns]
    if bdims or ddims:
        data = lax.squeeze(data, (*bdims, *ddims))
    if bdims:
        indices = lax.squeeze(indices, bdims)
    shape = tuple(s for d, s in enumerate(arr.shape) if d not in dims)
    return BCOO((data, indices), shape=shape, indices_sorted=arr.indices_sorted,
                unique_indices=arr.unique_indices)


# ---- broadcasting and concatenation --------------------------------------------------------
def bcoo_broadcast_in_dim(mat: BCOO, *, shape: Sequence[int],
                          broadcast_dimensions: Sequence[int], sharding=None) -> BCOO:
    """lax.broadcast_in_dim of a BCOO: new dims before the sparse ones become batch dims, new
    dims after them dense dims; size-1 batch and dense dims may grow. New or growing sparse
    dims are not supported (NotImplementedError, as jax)."""
    _check_bcoo(mat, "bcoo_broadcast_in_dim")
    if sharding is not None:
        raise NotImplementedError("bcoo_broadcast_in_dim: sharding is not supported")
    nb, ns, nd, nse = mat._layout()
    shape = tuple(operator.index(s) for s in shape)
    bdims = tuple(operator.index(d) for d in broadcast_dimensions)
    if len(bdims) != mat.ndim or any(b >= a for a, b in zip(bdims[1:], bdims)) or \
            any(not 0 <= d < len(shape) for d in bdims):
        raise ValueError(f"bcoo_broadcast_in_dim: broadcast_dimensions {bdims} must be "
                         f"{mat.ndim} increasing dims of the new shape {shape}")
    for d, (old, new) in enumerate(zip(mat.shape, (shape[b] for b in bdims))):
        if old not in (1, new):
            raise ValueError(f"bcoo_broadcast_in_dim: dim {d} of size {old} cannot become "
                             f"size {new}")
    if ns:
        lo, hi = bdims[nb], bdims[nb + ns - 1]
        for d in range(lo, hi + 1):
            if d not in bdims:
                raise NotImplementedError(f"bcoo_broadcast_in_dim: a new dim {d} between the "
                                          f"sparse dims (adding sparse dims)")
        for j in range(ns):
            if mat.shape[nb + j] != shape[bdims[nb + j]]:
                raise NotImplementedError(
                    f"bcoo_broadcast_in_dim: sparse dim {nb + j} of size {mat.shape[nb + j]} "
                    f"cannot grow to {shape[bdims[nb + j]]} (adding sparse entries)")
    else:                                 # no sparse dims: new dims before the dense ones
        lo = bdims[nb] if nd else len(shape)              # are batch dims
        hi = lo - 1
    new_b = [d for d in range(len(shape)) if d < lo]
    new_d = [d for d in range(len(shape)) if d > hi]
    B, D = tuple(shape[d] for d in new_b), tuple(shape[d] for d in new_d)
    batch_dims = tuple(new_b.index(b) for b in bdims[:nb])
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    data = lax.broadcast_in_dim(data, (*B, nse, *D), batch_dims + (len(B),) + tuple(
        len(B) + 1 + new_d.index(b) for b in bdims[nb + ns:]))
    indices = lax.broadcast_in_dim(indices, (*B, nse, ns), batch_dims + (len(B), len(B) + 1))
    return BCOO((data, indices), shape=shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def bcoo_concatenate(operands: Sequence[BCOO], *, dimension: int) -> BCOO:
    """lax.concatenate of BCOO arrays of one layout along a batch dim (nse padded to the
    largest) or a sparse dim (entries joined, indices shifted). Along a dense dim:
    NotImplementedError, as jax."""
    operands = list(operands)
    if not operands:
        raise ValueError("bcoo_concatenate: needs at least one operand")
    for op in operands:
        _check_bcoo(op, "bcoo_concatenate")
    first = operands[0]
    nb, ns, nd, _ = first._layout()
    dim = _normalize_axis(dimension, first.ndim, "bcoo_concatenate")
    for op in operands[1:]:
        if (op.n_batch, op.n_dense, op.ndim) != (nb, nd, first.ndim):
            raise ValueError(f"bcoo_concatenate: operands must share one layout (n_batch, "
                             f"n_dense, rank), got {(nb, nd, first.ndim)} and "
                             f"{(op.n_batch, op.n_dense, op.ndim)}")
        if any(a != b for d, (a, b) in enumerate(zip(op.shape, first.shape)) if d != dim):
            raise ValueError(f"bcoo_concatenate: shapes {first.shape} and {op.shape} differ "
                             f"outside dim {dim}")
    if dim >= nb + ns:
        raise NotImplementedError("bcoo_concatenate: concatenation along dense dims")
    shape = list(first.shape)
    shape[dim] = sum(op.shape[dim] for op in operands)
    pairs = [_broadcast_batch(op.data, op.indices, op.shape, op._layout()) for op in operands]
    if dim < nb:
        nse = max(op.nse for op in operands)
        padded = []
        for op, (data, indices) in zip(operands, pairs):
            extra = nse - op.nse
            if extra:
                pad_d = [(0, 0)] * data.ndim
                pad_d[nb] = (0, extra)
                data = jnp.pad(data, pad_d)
                fill = jnp.broadcast_to(_fill_value(op.shape, op._layout(), indices.dtype),
                                        (*indices.shape[:nb], extra, ns))
                indices = jnp.concatenate([indices, fill], axis=nb)
            padded.append((data, indices))
        data = jnp.concatenate([d for d, _ in padded], axis=dim)
        indices = jnp.concatenate([i for _, i in padded], axis=dim)
        return BCOO((data, indices), shape=tuple(shape))
    j = dim - nb                                     # a sparse dim: shift, then join entries
    offset, parts_d, parts_i = 0, [], []
    for op, (data, indices) in zip(operands, pairs):
        shift = np.zeros(ns, indices.dtype)
        shift[j] = offset
        valid = jnp.all(indices < _fill_value(op.shape, op._layout(), indices.dtype), axis=-1)
        new_fill = np.asarray(shape[nb:nb + ns], indices.dtype)
        parts_i.append(jnp.where(valid[..., None], indices + shift, new_fill))
        parts_d.append(data)
        offset += op.shape[dim]
    return BCOO((jnp.concatenate(parts_d, axis=nb), jnp.concatenate(parts_i, axis=nb)),
                shape=tuple(shape))


# ---- reshape and layout --------------------------------------------------------------------
def bcoo_reshape(mat: BCOO, *, new_sizes: Sequence[int],
                 dimensions: Sequence[int] | None = None, sharding=None) -> BCOO:
    """lax.reshape of a BCOO: the batch dims reshaped among themselves and the sparse dims
    among themselves (their flat index unraveled in the new sparse shape); dense dims must
    stay. `dimensions` transposes first, as lax.reshape."""
    _check_bcoo(mat, "bcoo_reshape")
    if sharding is not None:
        raise NotImplementedError("bcoo_reshape: sharding is not supported")
    if dimensions is not None:
        from fnad.experimental.sparse.bcoo import bcoo_transpose
        mat = bcoo_transpose(mat, permutation=tuple(dimensions))
    nb, ns, nd, nse = mat._layout()
    new = tuple(operator.index(s) for s in new_sizes)
    if math.prod(new) != mat.size:
        raise ValueError(f"bcoo_reshape: cannot reshape shape {mat.shape} into {new}")
    B, S, D = mat.shape[:nb], mat.shape[nb:nb + ns], mat.shape[nb + ns:]
    if D and tuple(new[len(new) - nd:]) != D:
        raise ValueError(f"bcoo_reshape: new shape {new} must keep the dense dims {D} of "
                         f"shape {mat.shape} (n_dense={nd})")
    rest = new[:len(new) - nd]
    nbatch_new, acc = 0, 1
    while acc < math.prod(B) and nbatch_new < len(rest):
        acc *= rest[nbatch_new]
        nbatch_new += 1
    while nbatch_new < len(rest) and rest[nbatch_new] == 1 and math.prod(B) == acc and \
            not S:
        nbatch_new += 1
    if acc != math.prod(B):
        raise ValueError(f"bcoo_reshape: new shape cannot mix batch and sparse dimensions; "
                         f"got shape={mat.shape} new_shape={new} with n_batch={nb}")
    B2, S2 = rest[:nbatch_new], rest[nbatch_new:]
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    data = data.reshape((*B2, nse, *D))
    indices = indices.reshape((*B2, nse, ns))
    if tuple(S2) != tuple(S):
        valid = jnp.all(indices < np.asarray(S, indices.dtype), axis=-1)
        flat = jnp.zeros(indices.shape[:-1], np.int64 if math.prod(S) >= 2 ** 31
                         else indices.dtype)
        for j, n in enumerate(S):
            flat = flat * n + indices[..., j].astype(flat.dtype)
        cols = []
        for n in reversed(S2):
            cols.append((flat % n).astype(indices.dtype))
            flat = flat // n
        new_idx = jnp.stack(cols[::-1], axis=-1) if cols else \
            jnp.zeros((*indices.shape[:-1], 0), indices.dtype)
        indices = _mark_padding(new_idx, valid, S2)
    return BCOO((data, indices), shape=new, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def _inefficient(what: str, on_inefficient) -> None:
    if on_inefficient == "error":
        raise SparseEfficiencyError(f"{what} results in inefficient storage. To disable this "
                                    "error, set the on_inefficient argument of "
                                    "bcoo_update_layout to 'warn' or None.")
    if on_inefficient == "warn":
        warnings.warn(f"{what} results in inefficient storage.", SparseEfficiencyWarning,
                      stacklevel=3)
    elif on_inefficient is not None:
        raise ValueError(f"bcoo_update_layout: on_inefficient must be 'error', 'warn' or None, "
                         f"got {on_inefficient!r}")


def bcoo_update_layout(mat: BCOO, *, n_batch: int | None = None, n_dense: int | None = None,
                       on_inefficient: str | None = "error") -> BCOO:
    """mat with n_batch batch and n_dense dense dims (the others sparse). Fewer batch dims
    fold the batch positions into nse (their positions become index columns); fewer dense
    dims split each block into its elements. More batch dims give every new batch position
    all of its group's entries (the others marked padding); more dense dims store a block per
    entry: both store more than needed, so `on_inefficient` decides ('error' raises
    SparseEfficiencyError, 'warn' warns, None allows)."""
    _check_bcoo(mat, "bcoo_update_layout")
    nb, ns, nd, nse = mat._layout()
    n_batch = nb if n_batch is None else operator.index(n_batch)
    n_dense = nd if n_dense is None else operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > mat.ndim:
        raise ValueError(f"bcoo_update_layout: invalid n_batch={n_batch}, n_dense={n_dense} "
                         f"for shape {mat.shape}")
    if n_batch > nb:
        _inefficient(f"For matrix of shape {mat.shape}, increasing n_batch from {nb} to "
                     f"{n_batch}", on_inefficient)
    if n_dense > nd:
        _inefficient(f"For matrix of shape {mat.shape}, increasing n_dense from {nd} to "
                     f"{n_dense}", on_inefficient)
    out = mat
    if n_batch < nb:
        out = _fold_batch(out, n_batch)
    if n_dense < nd:
        out = _split_dense(out, n_dense)
    if n_dense > out.n_dense:
        out = _grow_dense(out, n_dense)
    if n_batch > out.n_batch:
        out = _grow_batch(out, n_batch)
    return out


def _fold_batch(mat: BCOO, n_batch: int) -> BCOO:
    """The batch dims from n_batch on become the leading sparse dims."""
    nb, ns, nd, nse = mat._layout()
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    folded = mat.shape[n_batch:nb]
    cols = [jnp.broadcast_to(lax.broadcasted_iota(indices.dtype, (*mat.shape[:nb], nse), d),
                             (*mat.shape[:nb], nse)) for d in range(n_batch, nb)]
    valid = jnp.all(indices < _fill_value(mat.shape, mat._layout(), indices.dtype), axis=-1)
    sizes = np.asarray(mat.shape[n_batch:nb + ns], indices.dtype)
    indices = jnp.concatenate([jnp.stack(cols, axis=-1), indices], axis=-1) if cols else indices
    indices = _mark_padding(indices, valid, sizes)
    new_nse = nse * math.prod(folded)
    lead = mat.shape[:n_batch]
    data = data.reshape((*lead, new_nse, *data.shape[nb + 1:]))
    indices = indices.reshape((*lead, new_nse, indices.shape[-1]))
    return BCOO((data, indices), shape=mat.shape)


def _split_dense(mat: BCOO, n_dense: int) -> BCOO:
    """The leading dense dims (down to n_dense) become the trailing sparse dims."""
    nb, ns, nd, nse = mat._layout()
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    split = mat.shape[nb + ns:nb + ns + nd - n_dense]
    k = math.prod(split)
    valid = jnp.all(indices < _fill_value(mat.shape, mat._layout(), indices.dtype), axis=-1)
    grid = np.stack(np.unravel_index(np.arange(k), split), axis=-1).astype(indices.dtype) \
        if split else np.zeros((1, 0), indices.dtype)                     # [k, n_split]
    B = mat.shape[:nb]
    new_idx = jnp.concatenate([
        jnp.broadcast_to(indices[..., None, :], (*B, nse, k, ns)),
        jnp.broadcast_to(jnp.asarray(grid), (*B, nse, k, len(split)))], axis=-1)
    sizes = np.asarray(mat.shape[nb:nb + ns + len(split)], indices.dtype)
    new_idx = _mark_padding(new_idx, jnp.broadcast_to(valid[..., None], (*B, nse, k)), sizes)
    rest = mat.shape[nb + ns + len(split):]
    data = data.reshape((*B, nse * k, *rest))
    return BCOO((data, new_idx.reshape((*B, nse * k, ns + len(split)))), shape=mat.shape)


def _grow_dense(mat: BCOO, n_dense: int) -> BCOO:
    """The trailing sparse dims (up to n_dense dense dims) become dense: each entry stores a
    block, its element placed by a one-hot."""
    nb, ns, nd, nse = mat._layout()
    m = n_dense - nd
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    moved = mat.shape[nb + ns - m:nb + ns]
    valid = jnp.all(indices < _fill_value(mat.shape, mat._layout(), indices.dtype), axis=-1)
    onehot = None
    for j, n in enumerate(moved):
        col = indices[..., ns - m + j]
        hot = col[..., None] == jnp.arange(n, dtype=indices.dtype)        # [*B, nse, n]
        shape = (*hot.shape[:-1],) + (1,) * j + (n,) + (1,) * (m - j - 1)
        hot = hot.reshape(shape)
        onehot = hot if onehot is None else onehot & hot
    onehot = onehot & valid.reshape(valid.shape + (1,) * m)
    D = mat.shape[nb + ns:]
    block = onehot.reshape(onehot.shape + (1,) * nd).astype(data.dtype)
    data = block * data.reshape((*data.shape[:nb + 1],) + (1,) * m + D)
    kept = ns - m
    sizes = np.asarray(mat.shape[nb:nb + kept], indices.dtype)
    indices = _mark_padding(indices[..., :kept], valid, sizes)
    return BCOO((data, indices), shape=mat.shape)


def _grow_batch(mat: BCOO, n_batch: int) -> BCOO:
    """The leading sparse dims (up to n_batch batch dims) become batch dims: every new batch
    position gets all nse entries of its group, those of other positions marked padding."""
    nb, ns, nd, nse = mat._layout()
    m = n_batch - nb
    data, indices = _broadcast_batch(mat.data, mat.indices, mat.shape, mat._layout())
    moved = mat.shape[nb:nb + m]
    B = mat.shape[:nb]
    valid = jnp.all(indices < _fill_value(mat.shape, mat._layout(), indices.dtype), axis=-1)
    # [*B, *moved, nse, ...]: position p keeps the entries whose leading columns equal p
    here = valid.reshape((*B,) + (1,) * m + (nse,))
    for j in range(m):
        pos = lax.broadcasted_iota(indices.dtype, (*B, *moved, nse), nb + j)
        col = indices[..., j].reshape((*B,) + (1,) * m + (nse,))
        here = here & (col == pos)
    idx = jnp.broadcast_to(indices[..., m:].reshape((*B,) + (1,) * m + (nse, ns - m)),
                           (*B, *moved, nse, ns - m))
    sizes = np.asarray(mat.shape[nb + m:nb + ns], indices.dtype)
    idx = _mark_padding(idx, here, sizes)
    D = mat.shape[nb + ns:]
    data = jnp.broadcast_to(data.reshape((*B,) + (1,) * m + (nse, *D)), (*B, *moved, nse, *D))
    data = jnp.where(here.reshape(here.shape + (1,) * len(D)), data, 0)
    return BCOO((data, idx), shape=mat.shape)


def bcoo_gather(operand: BCOO, start_indices, dimension_numbers, slice_sizes: Sequence[int], *,
                unique_indices: bool = False, indices_are_sorted: bool = False, mode=None,
                fill_value=None) -> BCOO:
    """lax.gather of a BCOO: one bcoo_dynamic_slice per row of start_indices (vmapped, so the
    rows become a new batch dim), the collapsed dims squeezed, then the dims arranged as
    lax.gather's output. Only mode=None / 'promise_in_bounds' (as jax): starts are clamped
    into the array, as dynamic_slice's."""
    from fnad import eval_shape, vmap
    from fnad.core import ShapeDtypeStruct
    _check_bcoo(operand, "bcoo_gather")
    parsed = lax.GatherScatterMode.from_any(mode) if mode is not None else None
    if parsed not in (None, lax.GatherScatterMode.PROMISE_IN_BOUNDS):
        raise NotImplementedError(f"bcoo_gather: mode={mode!r} is not supported (as in jax); "
                                  "use mode=None or 'promise_in_bounds'")
    start_indices = jnp.asarray(start_indices)
    kwargs = dict(dimension_numbers=dimension_numbers, slice_sizes=tuple(slice_sizes),
                  unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                  mode=mode, fill_value=fill_value)
    out_aval = eval_shape(lambda o, i: lax.gather(o, i, **kwargs),    # validates the arguments
                          ShapeDtypeStruct(operand.shape, operand.dtype),
                          ShapeDtypeStruct(start_indices.shape, start_indices.dtype))
    offset_dims = tuple(dimension_numbers.offset_dims)
    zero = jnp.zeros((), start_indices.dtype)
    starts, in_axes, sizes = [zero] * operand.ndim, [None] * operand.ndim, list(operand.shape)
    for i, d in enumerate(dimension_numbers.start_index_map):
        starts[d] = start_indices[..., i].reshape(-1)
        sizes[d], in_axes[d] = slice_sizes[d], 0
    rows = math.prod(start_indices.shape[:-1])
    if not dimension_numbers.start_index_map:      # nothing indexed: the same slice each row
        starts[0] = jnp.zeros((rows,), start_indices.dtype)
        in_axes[0] = 0
        sizes[0] = slice_sizes[0]

    def one(row_starts):
        piece = bcoo_dynamic_slice(operand, row_starts, sizes)
        return bcoo_squeeze(piece, dimensions=tuple(dimension_numbers.collapsed_slice_dims))
    result = vmap(one, in_axes=(in_axes,))(starts)             # [rows, *slice dims]
    result = bcoo_reshape(result, new_sizes=(*start_indices.shape[:-1], *result.shape[1:]),
                          dimensions=tuple(range(result.ndim)))
    if result.ndim:
        batch_dims = tuple(d for d in range(len(out_aval.shape)) if d not in offset_dims)
        perm = np.zeros(result.ndim, dtype=int)
        perm[np.array(batch_dims + offset_dims, dtype=int)] = np.arange(result.ndim)
        if set(perm[:result.n_batch].tolist()) != set(range(result.n_batch)):
            result = bcoo_update_layout(result, n_batch=0)   # batch dims may not move out
        result = result.transpose(tuple(int(p) for p in perm))
    return result.reshape(out_aval.shape).astype(out_aval.dtype)

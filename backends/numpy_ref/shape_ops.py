"""NumPy implementations of the shape primitives.

Views where NumPy gives them (inputs are immutable, so sharing memory is safe);
dynamic_update_slice writes into a copy. Start indices of the dynamic slices are
clamped so that the block lies inside the operand, as XLA does.
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import shape_ops as so


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = np.shape(x)[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _squeeze(x, *, dimensions):
    return np.squeeze(x, axis=dimensions) if dimensions else x


def _rev(x, *, dimensions):
    return np.flip(x, axis=dimensions) if dimensions else x


def _pad(x, v, *, padding_config):
    # pad with the non-negative parts of low/high into a fresh array, then cut off the
    # negative parts
    x = np.asarray(x)
    lo = [max(low, 0) for low, _, _ in padding_config]
    hi = [max(high, 0) for _, high, _ in padding_config]
    dilated = [0 if n == 0 else n + (n - 1) * i
               for n, (_, _, i) in zip(x.shape, padding_config, strict=True)]
    out = np.full([a + d + b for a, d, b in zip(lo, dilated, hi, strict=True)], v, dtype=x.dtype)
    out[tuple(slice(a, a + d, i + 1)
              for a, d, (_, _, i) in zip(lo, dilated, padding_config, strict=True))] = x
    return out[tuple(slice(max(-low, 0), n - max(-high, 0))
                     for n, (low, high, _) in zip(out.shape, padding_config, strict=True))]


def _slice(x, *, start_indices, limit_indices, strides):
    strides = (1,) * len(start_indices) if strides is None else strides
    index = zip(start_indices, limit_indices, strides, strict=True)
    return np.asarray(x)[tuple(slice(s, lim, st) for s, lim, st in index)]


def _block(shape, idx, sizes) -> tuple:
    """The index of the block of `sizes` at `idx`, each start clamped to [0, n - size]."""
    starts = [min(max(int(i), 0), n - s) for i, n, s in zip(idx, shape, sizes, strict=True)]
    return tuple(slice(s, s + size) for s, size in zip(starts, sizes, strict=True))


def _dynamic_slice(x, *idx, slice_sizes):
    x = np.asarray(x)
    return x[_block(x.shape, idx, slice_sizes)]


def _dynamic_update_slice(x, update, *idx):
    out = np.array(x, copy=True)                   # never write into the operand
    out[_block(out.shape, idx, np.shape(update))] = update
    return out


def dynamic_update_slice_into(x, update, *idx):
    """dynamic_update_slice writing into x's buffer: for a compiled program that owns x and
    reads it no more (the numba driver decides; see codegen._Driver.inplace_updates)."""
    x[_block(x.shape, idx, np.shape(update))] = update
    return x


def _iota(*, dtype, shape, dimension):
    n = shape[dimension]
    line = np.arange(n).astype(dtype).reshape([n if d == dimension else 1
                                               for d in range(len(shape))])
    return np.broadcast_to(line, shape)


impl_rules[so.broadcast_in_dim_p] = _broadcast_in_dim
impl_rules[so.reshape_p] = lambda x, *, new_sizes: np.reshape(x, new_sizes)
impl_rules[so.transpose_p] = lambda x, *, permutation: np.transpose(x, permutation)
impl_rules[so.squeeze_p] = _squeeze
impl_rules[so.rev_p] = _rev
impl_rules[so.concatenate_p] = lambda *xs, dimension: np.concatenate(xs, axis=dimension)
impl_rules[so.pad_p] = _pad
impl_rules[so.slice_p] = _slice
impl_rules[so.dynamic_slice_p] = _dynamic_slice
impl_rules[so.dynamic_update_slice_p] = _dynamic_update_slice
impl_rules[so.iota_p] = _iota

"""XLA lowerings of the shape primitives.

The dynamic slices clamp each start index so that the block lies inside the operand, as
XLA and the numpy reference do; jax.lax.dynamic_slice would first wrap negative indices
NumPy-style, so the starts are clamped here before jax sees them.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import shape_ops as so


def _clamped_starts(idx, shape, sizes) -> list:
    """Each start in [0, n - size], as one signed integer dtype (XLA's clamp, no wrapping)."""
    wide = any(np.dtype(i.dtype).itemsize == 8 for i in idx)
    common = np.dtype(np.int64 if wide else np.int32)
    out = []
    for i, n, s in zip(idx, shape, sizes):
        dt = np.dtype(i.dtype)
        hi = max(n - s, 0)
        if dt.kind == "u":                              # cannot be negative; cap before casting
            i = lax.min(i, np.asarray(min(hi, np.iinfo(dt).max), dt))
        i = lax.convert_element_type(i, common) if dt != common else i
        out.append(lax.clamp(np.zeros((), common), i, np.asarray(hi, common)))
    return out


def _dynamic_slice(x, *idx, slice_sizes):
    return lax.dynamic_slice(x, _clamped_starts(idx, x.shape, slice_sizes), slice_sizes)


def _dynamic_update_slice(x, update, *idx):
    return lax.dynamic_update_slice(x, update, _clamped_starts(idx, x.shape, update.shape))


def _squeeze(x, *, dimensions):
    return lax.squeeze(x, dimensions) if dimensions else x


def _rev(x, *, dimensions):
    return lax.rev(x, dimensions) if dimensions else x


def _iota(*, dtype, shape, dimension):
    return lax.broadcasted_iota(np.dtype(dtype), shape, dimension)


impl_rules[so.broadcast_in_dim_p] = eager(
    lambda x, *, shape, broadcast_dimensions: lax.broadcast_in_dim(x, shape,
                                                                   broadcast_dimensions))
impl_rules[so.reshape_p] = eager(lambda x, *, new_sizes: lax.reshape(x, new_sizes))
impl_rules[so.transpose_p] = eager(lambda x, *, permutation: lax.transpose(x, permutation))
impl_rules[so.squeeze_p] = eager(_squeeze)
impl_rules[so.rev_p] = eager(_rev)
impl_rules[so.concatenate_p] = eager(lambda *xs, dimension: lax.concatenate(xs, dimension))
impl_rules[so.pad_p] = eager(lambda x, v, *, padding_config: lax.pad(x, v, padding_config))
impl_rules[so.slice_p] = eager(
    lambda x, *, start_indices, limit_indices, strides: lax.slice(x, start_indices,
                                                                 limit_indices, strides))
impl_rules[so.dynamic_slice_p] = eager(_dynamic_slice)
impl_rules[so.dynamic_update_slice_p] = eager(_dynamic_update_slice)
impl_rules[so.iota_p] = eager(_iota)

"""XLA lowerings of gather and the scatters: fnad's dimension numbers mirror XLA's field
for field, so each is one jax.lax call.

Modes, as the numpy reference: a gather clamps its indices unless FILL_OR_DROP (which
reads `fill_value` for windows not fully in bounds); a scatter drops such windows unless
CLIP. `scatter` (set) with repeated indices keeps the last update on XLA's CPU backend,
as the reference does; XLA leaves the order open, so on a GPU any of them may win.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import indexing as ix

_FILL = ix.GatherScatterMode.FILL_OR_DROP
_CLIP = ix.GatherScatterMode.CLIP


def _gather(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
            indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    jdn = lax.GatherDimensionNumbers(
        offset_dims=dn.offset_dims, collapsed_slice_dims=dn.collapsed_slice_dims,
        start_index_map=dn.start_index_map, operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.start_indices_batching_dims)
    fill = mode is _FILL
    return lax.gather(operand, indices, jdn, slice_sizes, unique_indices=unique_indices,
                      indices_are_sorted=indices_are_sorted,
                      mode=lax.GatherScatterMode.FILL_OR_DROP if fill
                      else lax.GatherScatterMode.CLIP,
                      fill_value=fill_value if fill else None)


def _scatter(op):
    def lowering(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                 unique_indices, mode):
        dn = dimension_numbers
        jdn = lax.ScatterDimensionNumbers(
            update_window_dims=dn.update_window_dims,
            inserted_window_dims=dn.inserted_window_dims,
            scatter_dims_to_operand_dims=dn.scatter_dims_to_operand_dims,
            operand_batching_dims=dn.operand_batching_dims,
            scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
        if np.prod(updates.shape) == 0:                 # nothing to write
            return operand
        return op(operand, indices, updates, jdn, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices,
                  mode=lax.GatherScatterMode.CLIP if mode is _CLIP
                  else lax.GatherScatterMode.FILL_OR_DROP)
    lowering.__name__ = op.__name__
    return lowering


impl_rules[ix.gather_p] = eager(_gather)
impl_rules[ix.scatter_p] = eager(_scatter(lax.scatter))
impl_rules[ix.scatter_add_p] = eager(_scatter(lax.scatter_add))
impl_rules[ix.scatter_mul_p] = eager(_scatter(lax.scatter_mul))
impl_rules[ix.scatter_min_p] = eager(_scatter(lax.scatter_min))
impl_rules[ix.scatter_max_p] = eager(_scatter(lax.scatter_max))

"""XLA lowerings of gather and the scatters: fnad's dimension numbers mirror XLA's field
for field, so each is one jax.lax call (but for `scatter` with repeated indices: below).

Modes, as the numpy reference: a gather clamps its indices unless FILL_OR_DROP (which
reads `fill_value` for windows not fully in bounds); a scatter drops such windows unless
CLIP.

`scatter` (set) with repeated indices keeps the last update, as the reference (NumPy's
`x[i] = u`) does. XLA leaves that order open, and on a GPU any of the updates may win;
so unless `unique_indices` says otherwise, the lowering finds each element's winner first
(`_scatter_last_wins`): scatter_max of the updates' ordinals, gathered back; the losers
are masked with the sum's identity and the winners added in with scatter_add, which gives
the same numbers in any order.
"""
from __future__ import annotations

import math

import numpy as np
from jax import lax
from jax import numpy as jnp

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import indexing as ix

_FILL = ix.GatherScatterMode.FILL_OR_DROP
_CLIP = ix.GatherScatterMode.CLIP


def _jax_gather_dims(dn: ix.GatherDimensionNumbers) -> lax.GatherDimensionNumbers:
    return lax.GatherDimensionNumbers(
        offset_dims=dn.offset_dims, collapsed_slice_dims=dn.collapsed_slice_dims,
        start_index_map=dn.start_index_map, operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.start_indices_batching_dims)


def _gather(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
            indices_are_sorted, mode, fill_value):
    jdn = _jax_gather_dims(dimension_numbers)
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
        jmode = (lax.GatherScatterMode.CLIP if mode is _CLIP
                 else lax.GatherScatterMode.FILL_OR_DROP)
        if op is lax.scatter and not unique_indices:
            return _scatter_last_wins(operand, indices, updates, dn, jdn, jmode)
        return op(operand, indices, updates, jdn, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=jmode)
    lowering.__name__ = op.__name__
    return lowering


def _scatter_last_wins(operand, indices, updates, dn, jdn, jmode):
    """lax.scatter where the last of the updates to one element wins, on any platform.

    Each update window gets an ordinal (1, 2, ... in the order of the scatter dims);
    scatter_max of the ordinals gives each operand element its winner's (0: none writes
    it), and gathering that back marks each update element as winner or loser. Then
    scatter_add of the winners, with the losers and the overwritten operand elements set
    to the sum's identity (-0.0 for floats, so that -0.0 and NaN come through unchanged)."""
    u_shape = updates.shape
    ids_shape = tuple(1 if d in jdn.update_window_dims else s for d, s in enumerate(u_shape))
    ids = jnp.arange(1, math.prod(ids_shape) + 1, dtype=jnp.int32).reshape(ids_shape)
    ids = jnp.broadcast_to(ids, u_shape)
    winners = lax.scatter_max(jnp.zeros(operand.shape, jnp.int32), indices, ids, jdn,
                              mode=jmode)
    gdn, sizes = ix.inverse_gather_dims(dn, u_shape, operand.ndim)     # as the JVP reads
    won = lax.gather(winners, indices, _jax_gather_dims(gdn), sizes, mode=jmode,
                     fill_value=0) == ids
    dtype = operand.dtype
    as_sum = dtype == np.bool_                            # bool: added as uint8
    if as_sum:
        operand, updates = operand.astype(jnp.uint8), updates.astype(jnp.uint8)
    identity = np.array(complex(-0.0, -0.0) if jnp.issubdtype(dtype, jnp.complexfloating)
                        else -0.0 if jnp.issubdtype(dtype, jnp.floating) else 0, operand.dtype)
    out = lax.scatter_add(jnp.where(winners == 0, operand, identity), indices,
                          jnp.where(won, updates, identity), jdn, mode=jmode)
    return out.astype(dtype) if as_sum else out


impl_rules[ix.gather_p] = eager(_gather)
impl_rules[ix.scatter_p] = eager(_scatter(lax.scatter))
impl_rules[ix.scatter_add_p] = eager(_scatter(lax.scatter_add))
impl_rules[ix.scatter_mul_p] = eager(_scatter(lax.scatter_mul))
impl_rules[ix.scatter_min_p] = eager(_scatter(lax.scatter_min))
impl_rules[ix.scatter_max_p] = eager(_scatter(lax.scatter_max))

"""XLA lowerings of sort and top_k.

sort is always stable, as the numpy reference (a stable sort is also a valid answer when
is_stable=False); lax.sort's order is NumPy's (NaNs last, -0.0 == 0.0). top_k ranks
floats in IEEE total order with the lower index first among equals (XLA's TopK, which
the reference mirrors); booleans go through int8.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import sorting as srt


def _sort(*operands, dimension, is_stable, num_keys):
    return list(lax.sort(operands, dimension=dimension, is_stable=True, num_keys=num_keys))


def _top_k(x, *, k, axis):
    last = x.ndim - 1
    if axis != last:                                   # older jax.lax.top_k: last axis only
        x = lax.transpose(x, [d for d in range(x.ndim) if d != axis] + [axis])
    is_bool = np.dtype(x.dtype) == np.bool_
    values, idx = lax.top_k(lax.convert_element_type(x, np.int8) if is_bool else x, k)
    if is_bool:
        values = lax.convert_element_type(values, np.bool_)
    if axis != last:                                   # the axis back where it was
        perm = list(range(axis)) + [last] + list(range(axis, last))
        values, idx = lax.transpose(values, perm), lax.transpose(idx, perm)
    return [values, lax.convert_element_type(idx, np.int32)]


impl_rules[srt.sort_p] = eager(_sort)
impl_rules[srt.top_k_p] = eager(_top_k)

"""NumPy implementations of sort and top_k.

sort: NumPy's stable sort already has lax.sort's order (NaNs last, -0.0 == 0.0), so a
stable argsort of the key (np.lexsort for several keys) is applied to every operand; a
stable sort is also a valid answer when is_stable=False. top_k ranks floats in IEEE
total order through their bits (as XLA's TopK), the lower index first among equals.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import sorting as srt


def _sort(*operands, dimension, is_stable, num_keys):
    operands = [np.asarray(x) for x in operands]
    keys = [k.astype(np.float32) if dtypes.is_float(k.dtype) and k.dtype.itemsize < 4 else k
            for k in operands[:num_keys]]              # NumPy misorders bfloat16's NaNs
    if num_keys == 1:
        perm = np.argsort(keys[0], axis=dimension, kind="stable")
    else:                                              # lexsort: the last key is the primary
        perm = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(x, perm, axis=dimension) for x in operands]


def _total_order(x: np.ndarray) -> np.ndarray:
    """Integers ordered as `x` in IEEE total order (-NaN < -inf < ... < -0 < +0 < ... < +NaN)."""
    if dtypes.is_float(x.dtype):
        ity = np.dtype(f"i{x.dtype.itemsize}")
        bits = x.view(ity)
        return np.where(bits < 0, bits ^ np.iinfo(ity).max, bits)  # flip negatives' magnitude
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    return x


def _top_k(x, *, k, axis):
    x = np.asarray(x)
    order = np.argsort(~_total_order(x), axis=axis, kind="stable")   # ~ reverses, no overflow
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int32)
    return [np.take_along_axis(x, idx, axis=axis), idx]


impl_rules[srt.sort_p] = _sort
impl_rules[srt.top_k_p] = _top_k

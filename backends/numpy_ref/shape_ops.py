"""NumPy implementations of the shape primitives (views where NumPy gives them)."""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import shape_ops as so


def _broadcast_in_dim(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = np.shape(x)[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


impl_rules[so.broadcast_in_dim_p] = _broadcast_in_dim
impl_rules[so.reshape_p] = lambda x, *, new_sizes: np.reshape(x, new_sizes)

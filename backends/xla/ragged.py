"""XLA lowering of ragged_dot_general (primitives/ragged.py) to jax.lax.ragged_dot_general:
"rows" is its ragged non-contracting mode, "contracting" its ragged contracting mode (whose
group dim jax puts first). Operands in dot_general's compute dtype (float16/bfloat16 in
float32), as the numpy reference."""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.backends.xla.linalg import _compute_dtype, _precision
from fnad.primitives import linalg as la
from fnad.primitives import ragged as rg


def _ragged_dot_general(lhs, rhs, group_sizes, *, mode, precision, preferred_element_type):
    out_dtype = la.dot_general_result_dtype(np.dtype(lhs.dtype), np.dtype(rhs.dtype),
                                            preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if out_dtype == np.bool_:
        cdt = np.dtype(np.int32)
    lhs, rhs = lax.convert_element_type(lhs, cdt), lax.convert_element_type(rhs, cdt)
    sizes = lax.convert_element_type(group_sizes, np.int32)
    params = dict(precision=_precision(precision), preferred_element_type=cdt)
    if mode == "rows":                 # [B, m, k] x [B, g, k, n] -> [B, m, n]
        dims = lax.RaggedDotDimensionNumbers((((2,), (2,)), ((0,), (0,))), [1], [1])
        out = lax.ragged_dot_general(lhs, rhs, sizes, dims, **params)
    else:                              # [B, k, m] x [B, m, n] -> [g, B, k, n]
        dims = lax.RaggedDotDimensionNumbers((((2,), (1,)), ((0,), (0,))), [2], [])
        out = lax.ragged_dot_general(lax.transpose(lhs, (0, 2, 1)), rhs, sizes, dims,
                                     **params)
        out = lax.transpose(out, (1, 0, 2, 3))
    if out_dtype == np.bool_:
        return lax.ne(out, lax.full_like(out, 0))
    return lax.convert_element_type(out, out_dtype)


impl_rules[rg.ragged_dot_general_p] = eager(_ragged_dot_general)

"""NumPy implementation of ragged_dot_general (primitives/ragged.py): one np.matmul per
(batch entry, group), in dot_general's compute dtype (float16/bfloat16 in float32).
`matmul` is a parameter so that the numba backend runs the same loop with its own GEMM."""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.linalg import _compute_dtype
from fnad.primitives import linalg as la
from fnad.primitives import ragged as rg


def ragged_dot_general(lhs, rhs, group_sizes, *, mode, precision, preferred_element_type,
                       matmul=np.matmul):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    out_dtype = la.dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    lhs, rhs = lhs.astype(cdt, copy=False), rhs.astype(cdt, copy=False)
    b, m, k = lhs.shape
    starts, ends = rg.group_ranges(group_sizes, m)
    g = starts.shape[1]
    if mode == "rows":
        out = np.zeros((b, m, rhs.shape[3]), cdt)
        for i in range(b):
            for j in range(g):
                s, e = starts[i, j], ends[i, j]
                if e > s:
                    out[i, s:e] = matmul(lhs[i, s:e], rhs[i, j])
    else:
        out = np.zeros((b, g, k, rhs.shape[2]), cdt)
        for i in range(b):
            for j in range(g):
                s, e = starts[i, j], ends[i, j]
                if e > s:
                    out[i, j] = matmul(lhs[i, s:e].T, rhs[i, s:e])
    return out.astype(out_dtype, copy=False)


impl_rules[rg.ragged_dot_general_p] = ragged_dot_general

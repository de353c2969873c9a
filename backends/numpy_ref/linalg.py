"""NumPy implementation of dot_general: one np.matmul (BLAS for float32/64, complex).

Both operands are permuted to [batch..., M, K] and [batch..., K, N] (views), reshaped
(free when already contiguous: a plain matmul, a batched matmul and [B,T,C]@[C,F]
copy nothing) and multiplied; float16/bfloat16 accumulate in float32, as XLA's CPU
backend does.
"""
from __future__ import annotations

import math

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import linalg as la

_F32 = np.dtype(np.float32)


def _compute_dtype(out_dtype: np.dtype) -> np.dtype:
    if dtypes.is_float(out_dtype) and out_dtype.itemsize < 4:
        return _F32                                     # f16 / bf16: accumulate in f32
    return out_dtype


def _dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)         # buffers may be NumPy scalars
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = la.dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if lhs.dtype != cdt:
        lhs = lhs.astype(cdt)
    if rhs.dtype != cdt:
        rhs = rhs.astype(cdt)
    nl, nr, nb = lhs.ndim, rhs.ndim, len(lb)
    if lb == rb == tuple(range(nb)) and lc == (nl - 1,) and rc == (nb,):
        # the matmul layouts: [b.., M, K] @ [b.., K, N]; [.., K] @ [K, N]; [.., K] @ [K]
        if nl == nr == nb + 2:
            return np.matmul(lhs, rhs).astype(out_dtype, copy=False)
        if nb == 0 and nr == 2:
            out = np.matmul(lhs.reshape(-1, rhs.shape[0]), rhs)          # one GEMM
            return out.reshape(lhs.shape[:-1] + rhs.shape[1:]).astype(out_dtype, copy=False)
        if nb == 0 and nr == 1 and nl >= 1:
            return np.matmul(lhs, rhs).astype(out_dtype, copy=False)
    lf = [i for i in range(nl) if i not in lc and i not in lb]
    rf = [i for i in range(nr) if i not in rc and i not in rb]
    batch = tuple(lhs.shape[i] for i in lb)
    l_free = tuple(lhs.shape[i] for i in lf)
    r_free = tuple(rhs.shape[i] for i in rf)
    K = math.prod(lhs.shape[i] for i in lc)
    M, N = math.prod(l_free), math.prod(r_free)
    lperm, rperm = (*lb, *lf, *lc), (*rb, *rc, *rf)
    a = lhs if lperm == tuple(range(nl)) else lhs.transpose(lperm)
    b = rhs if rperm == tuple(range(nr)) else rhs.transpose(rperm)
    out = np.matmul(a.reshape(batch + (M, K)), b.reshape(batch + (K, N)))  # [batch, M, N]
    return out.reshape(batch + l_free + r_free).astype(out_dtype, copy=False)


impl_rules[la.dot_general_p] = _dot_general

"""NumPy implementations of dot_general and the decompositions (cholesky, triangular_solve,
lu: scipy LAPACK per matrix of the batch, NaNs where cholesky fails, as JAX).

dot_general: one np.matmul (BLAS for float32/64, complex).

Both operands become [batch..., M, K] and [batch..., K, N] arrays (`_as_matmul`): views
where the layout allows, as for a plain or batched matmul, [B,T,C] @ [C,F], x @ W^T and
the weight gradient x^T @ g of [B,T,C] and [B,T,F] (BLAS takes a transposed operand as
is); a copy otherwise. float16/bfloat16 accumulate in float32, as XLA's CPU backend does.
"""
from __future__ import annotations

import math

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import decompositions as dec
from fnad.primitives import linalg as la

_F32 = np.dtype(np.float32)


def _compute_dtype(out_dtype: np.dtype) -> np.dtype:
    if dtypes.is_float(out_dtype) and out_dtype.itemsize < 4:
        return _F32                                     # f16 / bf16: accumulate in f32
    return out_dtype


def _dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    a, b, out_shape, out_dtype = _as_matmul(lhs, rhs, dimension_numbers,
                                            preferred_element_type)
    return np.matmul(a, b).reshape(out_shape).astype(out_dtype, copy=False)


def _as_matmul(lhs, rhs, dimension_numbers, preferred_element_type):
    """(a, b, out_shape, out_dtype): views [batch.., M, K] and [batch.., K, N] of the operands
    (in the compute dtype) such that matmul(a, b).reshape(out_shape) is the dot_general."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)         # buffers may be NumPy scalars
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = la.dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if lhs.dtype != cdt:
        lhs = lhs.astype(cdt)
    if rhs.dtype != cdt:
        rhs = rhs.astype(cdt)
    nl, nr = lhs.ndim, rhs.ndim
    lf = tuple(i for i in range(nl) if i not in lc and i not in lb)
    rf = tuple(i for i in range(nr) if i not in rc and i not in rb)
    batch = tuple(lhs.shape[i] for i in lb)
    l_free = tuple(lhs.shape[i] for i in lf)
    r_free = tuple(rhs.shape[i] for i in rf)
    K = math.prod(lhs.shape[i] for i in lc)
    M, N = math.prod(l_free), math.prod(r_free)
    a = _operand(lhs, lb, lf, lc, batch, M, K)                    # [batch, M, K]
    b = _operand(rhs, rb, rc, rf, batch, K, N)                    # [batch, K, N]
    return a, b, batch + l_free + r_free, out_dtype


def _operand(x, bdims, first, second, batch, rows, cols):
    """x as a [batch.., rows, cols] array whose rows merge the dims `first` and whose
    columns merge `second`: a view where x's layout allows (the dims of each group adjacent
    and in order, the groups in either order: a transposed matrix is a view), else a copy."""
    nb = len(bdims)
    if bdims == tuple(range(nb)):
        if first + second == tuple(range(nb, x.ndim)):          # [b.., rows.., cols..]
            return x.reshape(batch + (rows, cols))
        if second + first == tuple(range(nb, x.ndim)):          # [b.., cols.., rows..]
            return np.swapaxes(x.reshape(batch + (cols, rows)), -1, -2)
    perm = (*bdims, *first, *second)
    return x.transpose(perm).reshape(batch + (rows, cols))


impl_rules[la.dot_general_p] = _dot_general


# ---- decompositions: one LAPACK call per matrix of the batch (scipy, imported lazily) ----
def _per_matrix(batch, fn, *arrays):
    """fn applied to each [..., m, n] matrix of `arrays` over the leading `batch` dims."""
    outs = None
    for idx in np.ndindex(*batch):
        res = fn(*(a[idx] for a in arrays))
        res = res if isinstance(res, tuple) else (res,)
        if outs is None:
            outs = [np.empty(batch + r.shape, r.dtype) for r in res]
        for o, r in zip(outs, res):
            o[idx] = r
    return outs


def _cholesky(x):
    from scipy.linalg import lapack
    x = np.asarray(x)
    if x.size == 0:
        return x.copy()

    def one(a):
        a = a.astype(_compute_dtype(a.dtype), copy=False)
        potrf, = lapack.get_lapack_funcs(("potrf",), (a,))
        c, info = potrf(a, lower=True, clean=True)
        return np.full_like(a, np.nan) if info != 0 else c
    return _per_matrix(x.shape[:-2], one, x)[0].astype(x.dtype, copy=False)


def _triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    # BLAS trsm, as XLA: a zero on the diagonal gives infs/NaNs, not an exception
    from scipy.linalg import blas
    a, b = np.asarray(a), np.asarray(b)
    if b.size == 0:
        return b.copy()
    cdt = _compute_dtype(b.dtype)
    a, bc = a.astype(cdt, copy=False), b.astype(cdt, copy=False)
    if conjugate_a:
        a = np.conj(a)
    trsm, = blas.get_blas_funcs(("trsm",), (a, bc))

    def one(am, bm):                                   # op(a) x = b  or  x op(a) = b
        return trsm(1.0, am, bm, side=0 if left_side else 1, lower=int(lower),
                    trans_a=int(transpose_a), diag=int(unit_diagonal))
    with np.errstate(all="ignore"):
        out = _per_matrix(a.shape[:-2], one, a, bc)[0]
    return out.astype(b.dtype, copy=False)


def _lu(x):
    from scipy.linalg import lapack
    x = np.asarray(x)
    *batch, m, n = x.shape
    k = min(m, n)

    def one(a):
        a = a.astype(_compute_dtype(a.dtype), copy=False)
        if a.size == 0:
            return a.copy(), np.zeros(k, np.int32), np.arange(m, dtype=np.int32)
        getrf, = lapack.get_lapack_funcs(("getrf",), (a,))
        lu, piv, _ = getrf(a)                          # info > 0: singular, still a valid LU
        piv = piv.astype(np.int32)
        perm = np.arange(m, dtype=np.int32)
        for i, p in enumerate(piv):                    # apply the row swaps in order
            perm[i], perm[p] = perm[p], perm[i]
        return lu.astype(a.dtype, copy=False), piv, perm
    if not batch or math.prod(batch) > 0:
        lu, piv, perm = _per_matrix(tuple(batch), one, x)
        return [lu.astype(x.dtype, copy=False), piv, perm]
    return [x.copy(), np.zeros((*batch, k), np.int32), np.zeros((*batch, m), np.int32)]


impl_rules[dec.cholesky_p] = _cholesky
impl_rules[dec.triangular_solve_p] = _triangular_solve
impl_rules[dec.lu_p] = _lu

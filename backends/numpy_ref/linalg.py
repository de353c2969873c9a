"""NumPy implementations of dot_general and the decompositions (cholesky, triangular_solve,
lu, qr, geqrf, eigh, svd, eig, schur: scipy's LAPACK per matrix of the batch, the routines
jax's CPU code calls: potrf, trsm, getrf, geqrf/geqp3 + orgqr/ungqr, syevd/heevd, gesdd, geev,
gees; NaNs where cholesky, eigh, svd, eig or schur fail, as JAX).

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
    out_dtype = la.dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if lhs.dtype != cdt:
        lhs = lhs.astype(cdt)
    if rhs.dtype != cdt:
        rhs = rhs.astype(cdt)
    lhs_layout, rhs_layout, out_shape, _ = matmul_layouts(lhs.shape, rhs.shape,
                                                          dimension_numbers)
    return (apply_layout(lhs, lhs_layout), apply_layout(rhs, rhs_layout), out_shape,
            out_dtype)


def matmul_layouts(lhs_shape, rhs_shape, dimension_numbers) -> tuple:
    """(lhs layout, rhs layout, out_shape, (batch, M, K, N)) of a dot_general on operands of
    these shapes: `operand_layout`s making them [batch.., M, K] and [batch.., K, N], the
    result's shape (batch + lhs free dims + rhs free dims) and the matmul's dims (decided
    from shapes alone: gemm.Product decides once what `_as_matmul` decides at every call)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    lf = tuple(i for i in range(len(lhs_shape)) if i not in lc and i not in lb)
    rf = tuple(i for i in range(len(rhs_shape)) if i not in rc and i not in rb)
    batch = tuple(lhs_shape[i] for i in lb)
    l_free = tuple(lhs_shape[i] for i in lf)
    r_free = tuple(rhs_shape[i] for i in rf)
    K = math.prod(lhs_shape[i] for i in lc)
    M, N = math.prod(l_free), math.prod(r_free)
    return (operand_layout(lhs_shape, lb, lf, lc, batch, M, K),      # [batch, M, K]
            operand_layout(rhs_shape, rb, rc, rf, batch, K, N),      # [batch, K, N]
            batch + l_free + r_free, (batch, M, K, N))


def operand_layout(shape, bdims, first, second, batch, rows, cols) -> tuple:
    """(how, target, perm): how an operand of `shape` becomes a [batch.., rows, cols] array
    whose rows merge the dims `first` and columns the dims `second`. how -1: as it is
    (already that shape); 0: a reshape; 1: a reshape to [batch.., cols, rows] and a swap of
    the last two axes (a transposed matrix); 2: a transpose by `perm` and a reshape. The
    first three are views where the operand's layout allows (the dims of each group adjacent
    and in order, the groups in either order: a transposed matrix is a view); else copies."""
    nb = len(bdims)
    if bdims == tuple(range(nb)):
        if first + second == tuple(range(nb, len(shape))):          # [b.., rows.., cols..]
            target = batch + (rows, cols)
            return (-1 if target == shape else 0), target, None
        if second + first == tuple(range(nb, len(shape))):          # [b.., cols.., rows..]
            return 1, batch + (cols, rows), None
    return 2, batch + (rows, cols), (*bdims, *first, *second)


def apply_layout(x, layout):
    """x made a [batch.., rows, cols] array as `layout` (operand_layout) says."""
    how, target, perm = layout
    if how < 0:
        return x
    if how == 0:
        return x.reshape(target)
    if how == 1:
        return x.reshape(target).swapaxes(-1, -2)
    return x.transpose(perm).reshape(target)


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


def _lapack(name: str, a):
    """scipy's LAPACK routine `name` (its s/d/c/z flavour for a's dtype)."""
    from scipy.linalg import lapack
    return lapack.get_lapack_funcs((name,), (a,))[0]


def _decomposition(x, one):
    """one(matrix) -> tuple of arrays, over the batch of x [..., m, n]; float16/bfloat16
    computed in float32 and the floating results cast back to x's dtype."""
    x = np.asarray(x)
    batch, cdt = x.shape[:-2], _compute_dtype(x.dtype)

    def cast(r):
        return r.astype(x.dtype, copy=False) if r.dtype == cdt else r
    if math.prod(batch) == 0:                          # no matrix: shapes from a zero one
        res = one(np.zeros(x.shape[-2:], cdt))
        return [np.empty(batch + r.shape, cast(r).dtype) for r in res]
    outs = _per_matrix(batch, lambda a: one(a.astype(cdt, copy=False)), x)
    return [cast(o) for o in outs]


def _householder_q(a, taus, cols: int):
    """The first `cols` columns of Q from geqrf's reflectors in a [m, n] (orgqr/ungqr)."""
    m, k = a.shape[0], taus.shape[0]
    if cols > a.shape[1]:                              # full Q of a tall matrix: pad
        a = np.concatenate([a, np.zeros((m, cols - a.shape[1]), a.dtype)], axis=1)
    a = a[:, :cols]
    if k == 0:
        return np.eye(m, cols, dtype=a.dtype)
    orgqr = _lapack("ungqr" if a.dtype.kind == "c" else "orgqr", a)
    q, _, _ = orgqr(a, taus)
    return q


def _qr(x, *, pivoting, full_matrices):
    x = np.asarray(x)
    m, n = x.shape[-2:]
    k = min(m, n)
    kq = m if full_matrices else k

    def one(a):
        if a.size == 0:                                # as jax: q = I, r = 0, p = 0
            res = (np.eye(m, kq, dtype=a.dtype), np.zeros((kq, n), a.dtype))
            return res + (np.zeros(n, np.int32),) if pivoting else res
        if pivoting:
            r, jpvt, taus, _, _ = _lapack("geqp3", a)(a)
        else:
            r, taus, _, _ = _lapack("geqrf", a)(a)
        q = _householder_q(r, taus, kq)
        r = np.triu(r[:kq])
        return (q, r, (jpvt - 1).astype(np.int32)) if pivoting else (q, r)
    return _decomposition(x, one)


def _geqrf(x):
    def one(a):
        if a.size == 0:
            return a.copy(), np.zeros(min(a.shape), a.dtype)
        r, taus, _, _ = _lapack("geqrf", a)(a)
        return r, taus
    return _decomposition(x, one)


def _eigh(x, *, lower, sort_eigenvalues):            # syevd/heevd always sort ascending
    def one(a):
        n = a.shape[0]
        if n == 0:
            return a.copy(), np.zeros(0, np.finfo(a.dtype).dtype)
        w, v, info = _lapack("heevd" if a.dtype.kind == "c" else "syevd", a)(
            a, compute_v=1, lower=int(lower))
        if info != 0:
            v, w = np.full_like(v, np.nan), np.full_like(w, np.nan)
        return v, w
    return _decomposition(x, one)


def _svd(x, *, full_matrices, compute_uv):
    x = np.asarray(x)
    m, n = x.shape[-2:]
    k = min(m, n)

    def one(a):
        real = np.finfo(a.dtype).dtype
        if a.size == 0:                                # as jax: identities where square
            s = np.zeros(0, real)
            if not compute_uv:
                return (s,)
            if full_matrices:
                return s, np.eye(m, dtype=a.dtype), np.eye(n, dtype=a.dtype)
            return s, np.zeros((m, k), a.dtype), np.zeros((k, n), a.dtype)
        u, s, vt, info = _lapack("gesdd", a)(a, compute_uv=int(compute_uv),
                                             full_matrices=int(full_matrices))
        if info != 0:
            u, s, vt = np.full_like(u, np.nan), np.full_like(s, np.nan), np.full_like(vt, np.nan)
        return (s, u, vt) if compute_uv else (s,)
    return _decomposition(x, one)


def _eig(x, *, compute_left_eigenvectors, compute_right_eigenvectors, enable_eigvec_derivs):
    import scipy.linalg
    cl, cr = compute_left_eigenvectors, compute_right_eigenvectors

    def one(a):
        dt = dec._complex_dtype(a.dtype)
        n = a.shape[0]
        nan = complex(np.nan, np.nan)
        nans = (np.full(n, nan),) + (np.full((n, n), nan),) * (cl + cr)
        if not np.isfinite(a).all():                   # NaNs, as jax (geev refuses them)
            res = nans
        else:
            try:
                res = scipy.linalg.eig(a, left=cl, right=cr, check_finite=False)
            except np.linalg.LinAlgError:              # geev did not converge: NaNs (as jax)
                res = nans
        res = res if isinstance(res, tuple) else (res,)
        return tuple(r.astype(dt) for r in res)
    return _decomposition(x, one)


def _schur(x, *, compute_schur_vectors):
    import scipy.linalg

    def one(a):
        if a.shape[0] == 0:
            res = (a.copy(), a.copy())
        elif not np.isfinite(a).all():                 # NaNs (gees would loop on them)
            res = (np.full_like(a, np.nan),) * 2
        else:
            try:
                res = scipy.linalg.schur(a, output="complex" if a.dtype.kind == "c" else "real",
                                         check_finite=False)
            except np.linalg.LinAlgError:              # gees did not converge: NaNs
                res = (np.full_like(a, np.nan),) * 2
        res = tuple(r.astype(a.dtype, copy=False) for r in res)
        return res if compute_schur_vectors else res[:1]
    return _decomposition(x, one)


impl_rules[dec.cholesky_p] = _cholesky
impl_rules[dec.triangular_solve_p] = _triangular_solve
impl_rules[dec.lu_p] = _lu
impl_rules[dec.qr_p] = _qr
impl_rules[dec.geqrf_p] = _geqrf
impl_rules[dec.eigh_p] = _eigh
impl_rules[dec.svd_p] = _svd
impl_rules[dec.eig_p] = _eig
impl_rules[dec.schur_p] = _schur

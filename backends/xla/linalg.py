"""XLA lowerings of dot_general and the decompositions (cholesky, triangular_solve, lu, qr,
geqrf, eigh, svd, eig, schur; eig runs on jax's CPU and GPU only, schur on its CPU only).

dot_general: both operands converted to the result dtype (fnad's rule,
linalg.dot_general_result_dtype), float16/bfloat16 accumulated in float32 as the numpy
reference does. With no precision given (and no jax_default_matmul_precision) float32
matmuls run at Precision.HIGHEST: on GPUs XLA's default would use TF32 (about 3 decimal
digits), which the numpy reference does not; ask for Precision.DEFAULT to get it.

Decompositions: jax.lax.linalg's, with float16/bfloat16 computed in float32 as the
reference (LAPACK has no half precision); cholesky gives NaNs where it fails, as both.
"""
from __future__ import annotations

import numpy as np
from jax import lax
from jax.lax import linalg as lax_linalg

from fnad import dtypes
from fnad.backends.xla import eager, impl_rules
from fnad.primitives import decompositions as dec
from fnad.primitives import linalg as la

_F32 = np.dtype(np.float32)


def _compute_dtype(out_dtype: np.dtype) -> np.dtype:
    if dtypes.is_float(out_dtype) and out_dtype.itemsize < 4:
        return _F32
    return out_dtype


def _precision(precision):
    """fnad's precision param (None, a pair of la.Precision, or a preset name) for jax."""
    if precision is None:
        return lax.Precision.HIGHEST
    if isinstance(precision, tuple):
        return tuple(lax.Precision[p.name] for p in precision)
    preset = getattr(lax, "DotAlgorithmPreset", None)
    if preset is not None and precision in preset.__members__:
        return preset[precision]
    return precision


def _dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    out_dtype = la.dot_general_result_dtype(np.dtype(lhs.dtype), np.dtype(rhs.dtype),
                                            preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if out_dtype == np.bool_:                          # logical: any(a and b), via int32
        cdt = np.dtype(np.int32)
    if lhs.dtype != cdt:
        lhs = lax.convert_element_type(lhs, cdt)
    if rhs.dtype != cdt:
        rhs = lax.convert_element_type(rhs, cdt)
    out = lax.dot_general(lhs, rhs, dimension_numbers, precision=_precision(precision),
                          preferred_element_type=cdt)
    if out_dtype == np.bool_:
        return lax.ne(out, lax.full_like(out, 0))
    return out if out.dtype == out_dtype else lax.convert_element_type(out, out_dtype)


def _in_compute_dtype(fn):
    """fn on float16/bfloat16 operands computed in float32, the result cast back."""
    def lowering(*xs, **params):
        dt = np.dtype(xs[-1].dtype)
        cdt = _compute_dtype(dt)
        if cdt == dt:
            return fn(*xs, **params)
        outs = fn(*[lax.convert_element_type(x, cdt) for x in xs], **params)
        if isinstance(outs, list):                     # lu: only the factors are floats
            return [lax.convert_element_type(outs[0], dt)] + outs[1:]
        return lax.convert_element_type(outs, dt)
    lowering.__name__ = fn.__name__
    return lowering


def _cholesky(x):
    return lax_linalg.cholesky(x, symmetrize_input=False)      # reads the lower triangle


def _triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    return lax_linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                       transpose_a=transpose_a, conjugate_a=conjugate_a,
                                       unit_diagonal=unit_diagonal)


def _lu(x):
    lu, pivots, perm = lax_linalg.lu(x)
    return [lu, lax.convert_element_type(pivots, np.int32),
            lax.convert_element_type(perm, np.int32)]


def _qr(x, *, pivoting, full_matrices):
    outs = lax_linalg.qr(x, pivoting=pivoting, full_matrices=full_matrices)
    if pivoting:
        q, r, p = outs
        return [q, r, lax.convert_element_type(p, np.int32)]
    return list(outs)


def _geqrf(x):                          # jax.lax.linalg has no public geqrf: qr's mode 'raw'
    import jax.numpy as jnp
    a_t, taus = jnp.linalg.qr(x, mode="raw")
    return [jnp.matrix_transpose(a_t), taus]


def _eigh(x, *, lower, sort_eigenvalues):
    v, w = lax_linalg.eigh(x, lower=lower, symmetrize_input=False,
                           sort_eigenvalues=sort_eigenvalues)
    return [v, w]


def _svd(x, *, full_matrices, compute_uv):
    if not compute_uv:
        return [lax_linalg.svd(x, full_matrices=full_matrices, compute_uv=False)]
    u, s, vh = lax_linalg.svd(x, full_matrices=full_matrices, compute_uv=True)
    return [s, u, vh]


def _eig(x, **params):
    return list(lax_linalg.eig(x, **params))


def _schur(x, *, compute_schur_vectors):
    return list(lax_linalg.schur(x, compute_schur_vectors=compute_schur_vectors))


def _floats_in_compute_dtype(fn):
    """fn (several outputs, some real, some integer) on float16/bfloat16 operands computed in
    float32, its float32 outputs cast back to the operand's dtype."""
    def lowering(x, **params):
        dt = np.dtype(x.dtype)
        cdt = _compute_dtype(dt)
        if cdt == dt:
            return fn(x, **params)
        outs = fn(lax.convert_element_type(x, cdt), **params)
        return [lax.convert_element_type(o, dt) if np.dtype(o.dtype) == cdt else o
                for o in outs]
    lowering.__name__ = fn.__name__
    return lowering


impl_rules[la.dot_general_p] = eager(_dot_general)
impl_rules[dec.cholesky_p] = eager(_in_compute_dtype(_cholesky))
impl_rules[dec.triangular_solve_p] = eager(_in_compute_dtype(_triangular_solve))
impl_rules[dec.lu_p] = eager(_in_compute_dtype(_lu))
impl_rules[dec.qr_p] = eager(_floats_in_compute_dtype(_qr))
impl_rules[dec.geqrf_p] = eager(_floats_in_compute_dtype(_geqrf))
impl_rules[dec.eigh_p] = eager(_floats_in_compute_dtype(_eigh))
impl_rules[dec.svd_p] = eager(_floats_in_compute_dtype(_svd))
impl_rules[dec.eig_p] = eager(_floats_in_compute_dtype(_eig))
impl_rules[dec.schur_p] = eager(_floats_in_compute_dtype(_schur))

"""fnad.experimental.sparse.linalg: `spsolve`, as jax.experimental.sparse.linalg's.

jax's spsolve is a sparse QR solver on GPU and calls scipy.sparse.linalg.spsolve on CPU (no
vmap there). fnad's solves the system densely: the CSR matrix is scattered into a dense
[n, n] matrix and solved by LU (fnad.numpy.linalg.solve), so it is differentiable in `data`
and `b` and works under jit and vmap, at dense cost (meant for the moderate sizes a CPU
solves anyway). `lobpcg_standard` is not here.
"""
from __future__ import annotations

import fnad.numpy as jnp
from fnad.experimental.sparse.csr import CSR, csr_todense

__all__ = ["spsolve"]


def spsolve(data, indices, indptr, b, tol: float = 1e-6, reorder: int = 1):
    """The x with A x = b for the square CSR matrix A = (data, indices, indptr) and a vector b
    (x has b's size and the promoted dtype). `tol` and `reorder` (jax's singularity tolerance
    and fill-reducing ordering) do not apply to the dense LU and are accepted and ignored;
    a singular A gives inf/NaN, as the dense solve."""
    del tol, reorder
    data, b = jnp.asarray(data), jnp.asarray(b)
    indptr = jnp.asarray(indptr)
    n = indptr.shape[0] - 1 if indptr.ndim == 1 else -1
    if b.ndim != 1 or b.shape[0] != n:
        raise ValueError(f"spsolve: b must be a vector of the matrix's size {n} (from indptr "
                         f"of shape {tuple(indptr.shape)}), got shape {tuple(b.shape)}")
    a = csr_todense(CSR((data, indices, indptr), shape=(n, n)))
    return jnp.linalg.solve(a, b.astype(a.dtype) if a.dtype != b.dtype else b)

"""fnad.experimental.sparse.linalg: `spsolve` and `lobpcg_standard`, as
jax.experimental.sparse.linalg's.

jax's spsolve is a sparse QR solver on GPU and calls scipy.sparse.linalg.spsolve on CPU (no
vmap there). fnad's solves the system densely: the CSR matrix is scattered into a dense
[n, n] matrix and solved by LU (fnad.numpy.linalg.solve), so it is differentiable in `data`
and `b` and works under jit and vmap, at dense cost (meant for the moderate sizes a CPU
solves anyway).

lobpcg_standard is LOBPCG (Knyazev 2001) for the k largest eigenpairs of a symmetric
operator, in the variant jax uses (Duersch et al. 2018): the blocks X (current Ritz
vectors), P (the last step's direction) and R (residuals) are each kept orthonormal (SVQB,
twice), a zero column standing for a direction dropped as degenerate, and each step is a
Rayleigh-Ritz solve on the 3k-dimensional space [X, P, R]. fnad.numpy / fnad.lax only, in
one lax.while_loop, so it runs under jit.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable

import numpy as np

import fnad.numpy as jnp
from fnad import core, dtypes, lax
from fnad.experimental.sparse._base import JAXSparse
from fnad.experimental.sparse.csr import CSR, csr_todense
from fnad.jit import jit
from fnad.tracing import eval_shape

__all__ = ["lobpcg_standard", "spsolve"]


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


# ---- lobpcg_standard -----------------------------------------------------------------------
def lobpcg_standard(A, X, m: int = 100, tol=None):
    """The k largest eigenvalues of the symmetric [n, n] operator A and their eigenvectors,
    by LOBPCG from the starting block X [n, k] (any linearly independent columns).

    A is a matrix (a dense array or a BCOO/BCSR, used as A @ V) or a function V [n, j] ->
    A V [n, j]; X's dtype (floating) must be A's. Runs at most m iterations, stopping early
    when every pair (λ, v) has ‖A v - λ v‖ < tol · 10 · n · (|λ| + ‖A v‖); tol defaults to
    the dtype's epsilon. Requires 0 < 5k < n, as jax.

    Returns (theta [k] descending, U [n, k] orthonormal, i the iterations run).

    Differences from jax: the first search direction P is X's orthogonal complement applied
    to fixed cosine columns (jax: a block Householder reflector), so iterates and the
    iteration count may differ slightly; the convergence test uses |λ| (jax λ, which never
    passes for negative λ); a column dropped as degenerate sorts below every eigenvalue in
    the Rayleigh-Ritz step (jax: as eigenvalue 0, which can displace negative eigenvalues);
    a sparse matrix A is accepted directly. No gradient (as jax).
    """
    X = jnp.asarray(X)
    m = operator.index(m)
    if isinstance(A, JAXSparse) or not callable(A):
        A = A if isinstance(A, JAXSparse) else jnp.asarray(A)
        _check_lobpcg(lambda v: A @ v, X)
        return _lobpcg_matrix(A, X, tol, m=m)
    _check_lobpcg(A, X)
    try:
        hash(A)
    except TypeError:                         # cannot be a static jit argument: trace inline
        return _lobpcg(A, X, tol, m)
    return _lobpcg_callable(X, tol, A=A, m=m)


def _check_lobpcg(matvec: Callable, X) -> None:
    if X.ndim != 2:
        raise ValueError(f"lobpcg_standard: X must be an [n, k] block, got shape "
                         f"{tuple(X.shape)}")
    n, k = X.shape
    if not dtypes.is_inexact(X.dtype) or dtypes.is_complex(X.dtype):
        raise ValueError(f"lobpcg_standard: X must be real floating point, got dtype "
                         f"{np.dtype(X.dtype).name}")
    if k == 0:
        raise ValueError("lobpcg_standard: X must have at least one column (k > 0)")
    if 5 * k >= n:
        raise ValueError(f"lobpcg_standard: needs 5 * k < n (k={k} columns of X, n={n} "
                         f"rows), got 5 * k = {5 * k}")
    out = eval_shape(matvec, core.ShapeDtypeStruct((n, 1), X.dtype))
    if tuple(out.shape) != (n, 1):
        raise ValueError(f"lobpcg_standard: A must be an [{n}, {n}] operator (X has {n} "
                         f"rows), but A maps [{n}, 1] to {tuple(out.shape)}")
    if out.dtype != X.dtype:
        raise ValueError(f"lobpcg_standard: A and X must have the same dtype, got "
                         f"{np.dtype(out.dtype).name} and {np.dtype(X.dtype).name}")


def _mm(a, b):
    return lax.dot(a, b, precision=lax.Precision.HIGHEST)


def _col_norms(V):
    return jnp.linalg.norm(V, axis=0, keepdims=True)                          # [1, j]


def _eigh_descending(S):
    w, Q = jnp.linalg.eigh(S)
    return w[::-1], Q[:, ::-1]


def _svqb(V):
    """An orthonormal basis of span(V) [n, j] by SVQB (Stathopoulos and Wu 2002): with
    VᵀV = Q diag(w) Qᵀ for the unit-normalized columns, V Q diag(w)^-1/2 is orthonormal.
    Directions with w ≤ eps · max(w) (rank deficiency) come out as zero columns."""
    norms = _col_norms(V)
    V = V / jnp.where(norms == 0, 1, norms)
    w, Q = _eigh_descending(_mm(V.T, V))                                      # [j], [j, j]
    tau = jnp.finfo(V.dtype).eps * w[0]
    keep = (w > tau) & (tau > 0)
    W = _mm(V, Q * jnp.where(keep, jnp.maximum(w, tau), 1)[None, :] ** -0.5)  # [n, j]
    W = W * keep[None, :].astype(W.dtype)
    norms = _col_norms(W)                   # exactly 1 in exact arithmetic; renormalize
    return W / jnp.where(norms == 0, 1, norms)


def _orthonormalize(V):
    return _svqb(_svqb(V))                  # a second pass repairs the first's rounding


def _project_out(basis, U):
    """U's part orthogonal to the orthonormal `basis` (zero columns allowed), orthonormal,
    with any column that is not clearly outside span(basis) zeroed: subtract-and-
    orthonormalize twice, then subtract twice more, as orthonormalizing a nearly-cancelled
    column can bring the basis back in (Duersch et al. 2018, Algorithm 5)."""
    for _ in range(2):
        U = _orthonormalize(U - _mm(basis, _mm(basis.T, U)))
    for _ in range(2):
        U = U - _mm(basis, _mm(basis.T, U))
    return U * (_col_norms(U) >= 0.99).astype(U.dtype)


def _rayleigh_ritz(matvec, S):
    """Eigenpairs (descending) of A restricted to the orthonormal S [n, j]: Sᵀ A S = Q w Qᵀ.
    S's zero columns get an eigenvalue below all others (-1 - the Gershgorin bound) so the
    directions they stand for are never chosen."""
    SAS = _mm(S.T, matvec(S))                                                 # [j, j]
    dead = jnp.all(S == 0, axis=0)                                            # [j]
    floor = -1 - jnp.max(jnp.sum(jnp.abs(SAS), axis=1))
    return _eigh_descending(SAS + jnp.diag(jnp.where(dead, floor, 0).astype(SAS.dtype)))


def _first_directions(X):
    """k directions orthonormal to X [n, k]: cosine columns (a deterministic stand-in for a
    random block) with X projected out."""
    n, k = X.shape
    i = lax.broadcasted_iota(X.dtype, (n, k), 0)
    j = lax.broadcasted_iota(X.dtype, (n, k), 1)
    return _project_out(X, jnp.cos(np.pi * (i + 0.5) * (2 * j + 1) / (2 * n + 1)))


def _lobpcg(matvec: Callable, X, tol, m: int):
    n, k = X.shape
    tol = jnp.finfo(X.dtype).eps if tol is None else jnp.asarray(tol, X.dtype)
    X = _orthonormalize(X)
    P = _first_directions(X)
    AX = matvec(X)
    theta = jnp.sum(X * AX, axis=0)                                           # [k]
    R = AX - theta[None, :] * X

    def cond(state):
        i, _, _, _, converged, _ = state
        return (i < m) & (converged < k)

    def body(state):
        i, X, P, R, _, _ = state
        R = _project_out(jnp.concatenate([X, P], axis=1), R)
        S = jnp.concatenate([X, P, R], axis=1)                                # [n, 3k]
        w, Q = _rayleigh_ritz(matvec, S)                                      # [3k], [3k, 3k]
        X = _mm(S, Q[:, :k] / _col_norms(Q[:, :k]))                           # [n, k]
        X = X / _col_norms(X)
        # P: the part of the old X (coefficients e_1..e_k in S) outside the new X's span,
        # i.e. Q[:, k:] Q[:k, k:]ᵀ, with its columns orthonormalized by a QR of Q[:k, k:]ᵀ.
        q, _ = jnp.linalg.qr(Q[:k, k:].T)                                     # [3k - k, k]
        P = _mm(S, _mm(Q[:, k:], q))                                          # [n, k]
        norms = _col_norms(P)
        P = P / jnp.where(norms == 0, 1, norms)
        AX = matvec(X)
        theta = w[:k]
        R = AX - theta[None, :] * X
        bound = tol * 10 * n * (jnp.linalg.norm(AX, axis=0) + jnp.abs(theta))
        converged = jnp.sum(jnp.linalg.norm(R, axis=0) < bound).astype(np.int32)
        return i + 1, X, P, R, converged, theta

    state = (jnp.asarray(0, np.int32), X, P, R, jnp.asarray(0, np.int32), theta)
    i, X, _, _, _, theta = lax.while_loop(cond, body, state)
    return theta, X, i


@functools.partial(jit, static_argnames=("m",))
def _lobpcg_matrix(A, X, tol, *, m: int):
    return _lobpcg(lambda v: A @ v, X, tol, m)


@functools.partial(jit, static_argnames=("A", "m"))
def _lobpcg_callable(X, tol, *, A: Callable, m: int):
    return _lobpcg(A, X, tol, m)

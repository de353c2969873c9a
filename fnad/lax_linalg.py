"""fnad.lax.linalg, as jax.lax.linalg: the decomposition primitives of
primitives/decompositions.py (cholesky, eig, eigh, lu, qr, schur, svd, triangular_solve, and
fnad's geqrf), and jax.lax.linalg's other functions as compositions of lax operations (so
jit, vmap and every derivative come from their parts):

  lu_pivots_to_permutation  LAPACK's row swaps (row i <-> pivots[i], in order) applied to
                            the identity permutation
  tridiagonal_solve         A X = B for tridiagonal A, by Gaussian elimination with partial
                            pivoting (LAPACK's gtsv, as JAX's CPU code): row i and i+1 swap
                            where |A[i+1, i]| > |A[i, i]|, which fills a second
                            superdiagonal; then back substitution
  householder_product       Q = H_0 H_1 ... H_{k-1} (first n columns), H_i = I - τ_i v_i v_iᴴ
                            with v_i = [0, ..., 0, 1, a[i+1:, i]] (LAPACK's orgqr/ungqr)
  symmetric_product         α A Aᵀ + β C (the whole matrix; symmetrize_output copies the
                            lower triangle up, as JAX's)
  cholesky_update           R' with R'ᴴ R' = Rᴴ R + w wᴴ (R upper triangular), by Givens
                            rotations row by row (real inputs, as JAX's)
"""
from __future__ import annotations

import numpy as np

from fnad.primitives import decompositions as _dec
from fnad.primitives.decompositions import *  # noqa: F401,F403
from fnad.primitives.decompositions import geqrf  # noqa: F401

__all__ = list(_dec.__all__) + ["cholesky_update", "householder_product",
                                "lu_pivots_to_permutation", "symmetric_product",
                                "tridiagonal_solve"]


def __getattr__(name: str):
    """The rest of primitives/decompositions.py (the primitives `*_p`, helpers)."""
    return getattr(_dec, name)


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation perm [..., permutation_size] (int32) with A[perm] = L U, from LU's
    row swaps pivots [..., k] (int32; row i was swapped with row pivots[i], in order)."""
    import fnad.numpy as jnp
    from fnad import lax
    pivots = jnp.asarray(pivots)
    if pivots.dtype != jnp.int32:
        raise TypeError(f"lu_pivots_to_permutation: pivots must be int32, got {pivots.dtype}")
    if pivots.ndim < 1:
        raise ValueError("lu_pivots_to_permutation: pivots must have at least one dimension "
                         f"[..., k], got shape {pivots.shape}")
    k = pivots.shape[-1]
    if int(permutation_size) < k:
        raise ValueError(f"lu_pivots_to_permutation: permutation_size ({permutation_size}) "
                         f"must be at least the number of pivots k = {k}")
    idx = jnp.arange(permutation_size, dtype=jnp.int32)
    perm = jnp.broadcast_to(idx, pivots.shape[:-1] + (permutation_size,))

    def swap(i, perm):                                   # rows i and pivots[i] exchange
        j = lax.dynamic_slice_in_dim(pivots, i, 1, axis=-1)              # [..., 1]
        at_i = lax.dynamic_slice_in_dim(perm, i, 1, axis=-1)
        at_j = jnp.take_along_axis(perm, j, axis=-1)
        return jnp.where(idx == i, at_j, jnp.where(idx == j, at_i, perm))
    return lax.fori_loop(0, k, swap, perm)


def tridiagonal_solve(dl, d, du, b, *, perturb_singular: bool = False):
    """X [..., m, n] with A X = b for the tridiagonal A with sub-, main and superdiagonals
    dl, d, du [..., m] (dl[i] = A[i, i-1], du[i] = A[i, i+1]; dl[0] and du[m-1] are not
    read), by partially pivoted Gaussian elimination (LAPACK's gtsv). A singular A (a zero
    pivot) gives NaNs, as JAX's; perturb_singular=True replaces each zero pivot by
    eps·‖A‖₁ instead (a finite answer to a nearby system, JAX's values). Differentiable through its
    loops (JAX's uses an implicit rule; the values agree)."""
    import fnad.numpy as jnp
    from fnad import lax
    from fnad.numpy._core import promote_dtypes_inexact
    dl, d, du, b = promote_dtypes_inexact(*(jnp.asarray(v) for v in (dl, d, du, b)))
    if not (dl.shape == d.shape == du.shape) or d.ndim < 1:
        raise ValueError(f"tridiagonal_solve: dl, d and du must have one shape [..., m], got "
                         f"{dl.shape}, {d.shape} and {du.shape}")
    if b.ndim != d.ndim + 1 or b.shape[:-1] != d.shape:
        raise ValueError(f"tridiagonal_solve: b must be [..., m, n] with [..., m] = "
                         f"{d.shape}, the diagonals' shape; got {b.shape}")
    m = d.shape[-1]
    if m == 0:
        return b
    if perturb_singular:
        anorm = jnp.max(jnp.abs(d) + jnp.abs(jnp.where(jnp.arange(m) > 0, dl, 0))
                        + jnp.abs(jnp.where(jnp.arange(m) < m - 1, du, 0)), axis=-1,
                        keepdims=True)
        tiny = (jnp.finfo(d.dtype).eps * anorm).astype(d.dtype)           # [..., 1]

        def pivot(p):
            return jnp.where(p == 0, tiny[..., 0], p)
    else:
        def pivot(p):
            return p
    # the diagonals with the row axis first: [m, ...]; b's rows: [m, ..., n]
    DL, D, DU = (jnp.moveaxis(v, -1, 0) for v in (dl, d, du))
    B = jnp.moveaxis(b, -2, 0)

    def eliminate(row, nxt):
        """row i (its current d, du, b) against row i+1 (dl, d, du, b): row i as final
        (d, du, du2, b) and row i+1 as current."""
        cd, cdu, cb = row
        l1, d1, u1, b1 = nxt
        swap = jnp.abs(l1) > jnp.abs(cd)
        keep_f = l1 / pivot(cd)                   # no swap: row i+1 -= f row i
        swap_f = cd / jnp.where(swap, l1, 1)      # swap: rows exchange, then the same
        out = (jnp.where(swap, l1, cd), jnp.where(swap, d1, cdu),
               jnp.where(swap, u1, jnp.zeros_like(u1)),
               jnp.where(swap[..., None], b1, cb))
        new = (jnp.where(swap, cdu - swap_f * d1, d1 - keep_f * cdu),
               jnp.where(swap, -swap_f * u1, u1),
               jnp.where(swap[..., None], cb - swap_f[..., None] * b1,
                         b1 - keep_f[..., None] * cb))
        return new, out
    last, (Dr, DUr, DU2r, Br) = lax.scan(eliminate, (D[0], DU[0], B[0]),
                                         (DL[1:], D[1:], DU[1:], B[1:]))
    d_last, _, b_last = last
    x_last = b_last / pivot(d_last)[..., None]

    def back(carry, row):                        # x_i from x_{i+1}, x_{i+2}
        x1, x2 = carry
        rd, rdu, rdu2, rb = row
        x = (rb - rdu[..., None] * x1 - rdu2[..., None] * x2) / pivot(rd)[..., None]
        return (x, x1), x
    _, X = lax.scan(back, (x_last, jnp.zeros_like(x_last)), (Dr, DUr, DU2r, Br),
                    reverse=True)
    X = jnp.concatenate([X, x_last[None]], axis=0)                     # [m, ..., n]
    # a zero pivot (singular A): all NaN, as LAPACK's error becomes in JAX
    singular = jnp.any(jnp.concatenate([pivot(Dr), pivot(d_last)[None]], 0) == 0, axis=0)
    return jnp.where(singular[..., None, None], np.nan, jnp.moveaxis(X, 0, -2))


def householder_product(a, taus):
    """Q [..., m, n]: the first n columns of H_0 ... H_{k-1}, H_i = I - τ_i v_i v_iᴴ with
    v_i = (0, ..., 0, 1, a[i+1:, i]) (the reflectors below a's diagonal, as geqrf leaves
    them; LAPACK's orgqr/ungqr). a [..., m, n] with m >= n, taus [..., k], k <= n."""
    import fnad.numpy as jnp
    from fnad import lax
    from fnad.numpy._core import promote_dtypes_inexact
    a, taus = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(taus))
    if a.ndim < 2 or taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2]:
        raise ValueError(f"householder_product: a must be [..., m, n] and taus [..., k] with "
                         f"the same batch dims, got {a.shape} and {taus.shape}")
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    if not k <= n <= m:
        raise ValueError(f"householder_product: needs k <= n <= m for a [..., m, n] and taus "
                         f"[..., k], got m={m}, n={n}, k={k}")
    rows = jnp.arange(m)[:, None]                                        # [m, 1]
    q = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)

    def apply(j, q):                             # q <- H_i q, i = k-1 down to 0
        i = k - 1 - j
        col = lax.dynamic_slice_in_dim(a, i, 1, axis=-1)                  # [..., m, 1]
        v = jnp.where(rows > i, col, jnp.where(rows == i, 1, 0).astype(a.dtype))
        tau = lax.dynamic_slice_in_dim(taus, i, 1, axis=-1)[..., None]    # [..., 1, 1]
        return q - tau * v * jnp.sum(jnp.conj(v) * q, axis=-2, keepdims=True)
    return lax.fori_loop(0, k, apply, q) if k else q


def symmetric_product(a_matrix, c_matrix, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False):
    """α A Aᵀ + β C for A [..., m, n], C [..., m, m]. All of it is computed (JAX promises
    only the lower triangle); symmetrize_output copies the lower triangle up."""
    import fnad.numpy as jnp
    a, c = jnp.asarray(a_matrix), jnp.asarray(c_matrix)
    if a.ndim < 2 or c.shape[-2:] != (a.shape[-2], a.shape[-2]):
        raise ValueError(f"symmetric_product: a_matrix must be [..., m, n] and c_matrix "
                         f"[..., m, m], got {a.shape} and {c.shape}")
    out = alpha * jnp.matmul(a, jnp.swapaxes(a, -1, -2)) + beta * c
    if symmetrize_output:
        low = jnp.tril(out)
        out = low + jnp.swapaxes(jnp.tril(out, -1), -1, -2)
    return out


def cholesky_update(r_matrix, w_vector):
    """R' upper triangular with R'ᵀ R' = Rᵀ R + w wᵀ, for R [n, n] upper triangular and
    w [n] (real, as JAX's), by one Givens rotation per row: O(n²)."""
    import fnad.numpy as jnp
    from fnad import lax
    from fnad.numpy._core import promote_dtypes_inexact
    r, w = promote_dtypes_inexact(jnp.asarray(r_matrix), jnp.asarray(w_vector))
    if r.ndim != 2 or r.shape[0] != r.shape[1] or w.shape != r.shape[:1]:
        raise ValueError(f"cholesky_update: r_matrix must be [n, n] and w_vector [n], got "
                         f"{r.shape} and {w.shape}")
    if jnp.iscomplexobj(r):
        raise TypeError("cholesky_update: real inputs only (as jax's), got "
                        f"{r.dtype}")
    n = r.shape[0]
    cols = jnp.arange(n)

    def rotate(i, rw):                           # zero w[i] against R[i, i]
        r, w = rw
        row = lax.dynamic_index_in_dim(r, i, 0, keepdims=False)           # [n]
        rii = lax.dynamic_index_in_dim(row, i, 0, keepdims=False)
        wi = lax.dynamic_index_in_dim(w, i, 0, keepdims=False)
        rho = jnp.sqrt(rii * rii + wi * wi)
        c, s = rii / rho, wi / rho
        right = cols >= i
        new_row = jnp.where(right, c * row + s * w, row)
        new_w = jnp.where(right, c * w - s * row, w)
        return lax.dynamic_update_index_in_dim(r, new_row, i, 0), new_w
    r, _ = lax.fori_loop(0, n, rotate, (r, w))
    return r

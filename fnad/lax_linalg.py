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
  hessenberg                A = Q H Qᴴ in LAPACK's gehrd form (H and the reflectors in one
                            array, taus): xLARFG reflections H_i = I - τ v vᴴ applied as
                            H_iᴴ A H_i, those of fnad.scipy.linalg.hessenberg
  tridiagonal               A = Q T Qᴴ for Hermitian A given by one triangle (LAPACK's
                            sytrd/hetrd form): the Hessenberg reduction of the Hermitian
                            matrix (lower), of the reversed one (upper: from the last column)
  ormqr                     Q c, Qᴴ c, c Q, c Qᴴ for Q = H_0 ... H_{k-1} from geqrf's
                            reflectors: one rank-one update of c per reflector (fori_loop)
  qdwh                      the polar decomposition x = u h by QDWH (Nakatsukasa, Bai & Gygi):
                            static QR-based then Cholesky-based weighted Halley steps, Halley's
                            own in a while_loop until ‖Δu‖_F <= (5 eps)^⅓, one Newton-Schulz
                            step, h = sym(uᴴ x)
Unlike JAX's (CPU-only LAPACK calls), hessenberg, tridiagonal and ormqr are differentiable.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad.primitives import decompositions as _dec
from fnad.primitives.decompositions import *  # noqa: F401,F403
from fnad.primitives.decompositions import geqrf  # noqa: F401

__all__ = list(_dec.__all__) + ["cholesky_update", "hessenberg", "householder_product",
                                "lu_pivots_to_permutation", "ormqr", "qdwh",
                                "symmetric_product", "tridiagonal", "tridiagonal_solve"]


def __getattr__(name: str):
    """The rest of primitives/decompositions.py (the primitives `*_p`, helpers)."""
    return getattr(_dec, name)


def _arrays(name: str, *args):
    """args as arrays; lists and other non-arrays are a TypeError naming `name` (as jax's
    lax functions refuse them)."""
    import fnad.numpy as jnp
    from fnad.numpy._core import check_arraylike
    check_arraylike(f"lax.linalg.{name}", *args)
    return tuple(jnp.asarray(a) for a in args)


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """The permutation perm [..., permutation_size] (int32) with A[perm] = L U, from LU's
    row swaps pivots [..., k] (int32; row i was swapped with row pivots[i], in order)."""
    import fnad.numpy as jnp
    from fnad import lax
    pivots, = _arrays("lu_pivots_to_permutation", pivots)
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
    if k == 0:                                           # no swaps: the identity
        return perm

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
    eps·‖A‖∞ instead (a finite answer to a nearby system). JAX's perturbed solver (xLAGTF /
    xLAGTS: scaled pivoting, pivots below the overflow threshold moved by eps·max|U| with
    their own sign, -0 included) gives the same direction but not the same magnitude or
    sign there. Differentiable through its loops (JAX's uses an implicit rule; the values
    agree)."""
    import fnad.numpy as jnp
    from fnad import lax
    from fnad.numpy._core import promote_dtypes_inexact
    dl, d, du, b = promote_dtypes_inexact(*_arrays("tridiagonal_solve", dl, d, du, b))
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
    a, taus = promote_dtypes_inexact(*_arrays("householder_product", a, taus))
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
    a, c = _arrays("symmetric_product", a_matrix, c_matrix)
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
    r, w = promote_dtypes_inexact(*_arrays("cholesky_update", r_matrix, w_vector))
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


def _map_matrices(fun, x):
    """fun of one matrix [m, n] mapped over x's leading dims [..., m, n] (one fnad.vmap over
    them flattened); fun returns a tuple of arrays, each given x's batch dims back."""
    import fnad.numpy as jnp
    from fnad.batching import vmap
    batch = x.shape[:-2]
    if not batch:
        return fun(x)
    outs = vmap(fun)(jnp.reshape(x, (-1,) + x.shape[-2:]))                # [B, ...] each
    return tuple(jnp.reshape(o, batch + o.shape[1:]) for o in outs)


def _square_matrices(name: str, a):
    """a as an inexact array [..., n, n], or a clear error."""
    from fnad.numpy._core import promote_dtypes_inexact
    a, = promote_dtypes_inexact(*_arrays(name, a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: a must be a square matrix or a batch of them [..., n, n], "
                         f"got shape {a.shape}")
    return a


def hessenberg(a):
    """(a_out, taus) with a = Q H Qᴴ, H upper Hessenberg, for a [..., n, n]: LAPACK's
    xGEHRD form, as jax.lax.linalg.hessenberg. a_out holds H in its upper triangle and first
    subdiagonal, and below that the reflectors' tails: Q = H_0 ... H_{n-2},
    H_i = I - τ_i v_i v_iᴴ with v_i = (0, ..., 0, 1, a_out[i+2:, i]) (1 at row i+1); taus
    [..., n-1]. The reflections are xLARFG's (those of fnad.scipy.linalg.hessenberg), in
    fnad.numpy operations, so it is differentiable too (JAX's is not)."""
    from functools import partial

    from fnad.scipy.linalg import _hessenberg_2d
    a = _square_matrices("hessenberg", a)
    return _map_matrices(partial(_hessenberg_2d, calc_q=False, packed=True), a)


def tridiagonal(a, *, lower: bool = True):
    """(arr, d, e, taus) with A = Q T Qᴴ for the Hermitian A stored in one triangle of a
    [..., n, n] (lower=True: the lower one; the other is not read), T real tridiagonal with
    diagonal d [..., n] and off-diagonal e [..., n-1] (real dtypes), Q a product of n-1
    reflectors H_i = I - τ_i v_i v_iᴴ, taus [..., n-1]: LAPACK's xSYTRD / xHETRD, as
    jax.lax.linalg.tridiagonal. lower=True: Q = H_0 ... H_{n-2}, v_i = (0, .., 0, 1 at row
    i+1, arr[i+2:, i]); arr has d on its diagonal, e below it, the tails under that, and a's
    own strictly upper triangle. lower=False reduces from the last column back: Q = H_{n-2}
    ... H_0, v_i = (arr[:i, i+1], 1 at row i, 0, ..., 0), e above the diagonal, a's strictly
    lower triangle kept. Computed as the Hessenberg reduction (xGEHRD's reflections, the same
    as xSYTRD's) of the Hermitian matrix (of the reversed one for lower=False); the rounding
    of T's Hermitian updates differs from LAPACK's symmetric ones."""
    import fnad.numpy as jnp
    a = _square_matrices("tridiagonal", a)
    n = a.shape[-1]
    if n == 0:
        raise ValueError(f"tridiagonal: a must not be empty, got shape {a.shape}")
    if not lower:                    # A reversed (rows and columns): its upper triangle lands low
        arr, d, e, taus = tridiagonal(jnp.flip(a, (-2, -1)), lower=True)
        return jnp.flip(arr, (-2, -1)), jnp.flip(d, -1), jnp.flip(e, -1), jnp.flip(taus, -1)
    real = jnp.real(a)
    low = jnp.tril(a, -1)
    herm = low + jnp.conj(jnp.swapaxes(low, -1, -2)) \
        + (real * jnp.eye(n, dtype=real.dtype)).astype(a.dtype)   # only the lower triangle read
    packed, taus = hessenberg(herm)
    d = jnp.real(jnp.diagonal(packed, axis1=-2, axis2=-1))                 # [..., n]
    e = jnp.real(jnp.diagonal(packed, offset=-1, axis1=-2, axis2=-1))      # [..., n-1]
    rows, cols = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    arr = jnp.where(rows < cols, a, jnp.where(rows == cols, d[..., None, :].astype(a.dtype),
                                              packed))
    return arr, d, e, taus


def ormqr(a, taus, c, *, left: bool = True, transpose: bool = False):
    """Q c, Qᴴ c (transpose), c Q (left=False) or c Qᴴ, without forming Q = H_0 ... H_{k-1},
    H_i = I - τ_i v_i v_iᴴ, v_i = (0, ..., 0, 1, a[i+1:, i]) (geqrf's reflectors below a's
    diagonal; jnp.linalg.qr(mode='raw') gives them transposed); as jax.lax.linalg.ormqr
    (LAPACK's ormqr/unmqr). a [..., m, n], taus [..., k] (k <= min(m, n)), c [..., m, p]
    (left) or [..., p, m]; the result has c's shape. Each reflection is one rank-one update
    of c, in a fori_loop (reversed for Q c and c Qᴴ); differentiable (JAX's is not)."""
    import fnad.numpy as jnp
    from fnad import lax
    from fnad.numpy._core import promote_dtypes_inexact
    a, taus, c = promote_dtypes_inexact(*_arrays("ormqr", a, taus, c))
    if a.ndim < 2 or taus.ndim != a.ndim - 1 or c.ndim != a.ndim:
        raise ValueError(f"ormqr: a must be [..., m, n], taus [..., k] and c [..., rows, cols] "
                         f"with the same batch dims, got shapes {a.shape}, {taus.shape} and "
                         f"{c.shape}")
    if not a.shape[:-2] == taus.shape[:-1] == c.shape[:-2]:
        raise ValueError(f"ormqr: a, taus and c must have the same batch dims, got shapes "
                         f"{a.shape}, {taus.shape} and {c.shape}")
    m, n = a.shape[-2:]
    k = taus.shape[-1]
    if k > min(m, n):
        raise ValueError(f"ormqr: taus [..., k] needs k <= min(m, n) for a [..., m, n], got "
                         f"k={k}, a shape {a.shape}")
    if (c.shape[-2] if left else c.shape[-1]) != m:
        side = "rows" if left else "columns"
        raise ValueError(f"ormqr with left={left} expects c to have m = {m} {side} (a's rows), "
                         f"got a shape {a.shape} and c shape {c.shape}")
    if k == 0:
        return c
    v_all = jnp.tril(a[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)    # [..., m, k]
    taus = jnp.conj(taus) if transpose else taus                          # Hᴴ = I - τ̄ v vᴴ
    backward = left != transpose                 # Q c = H_0 (... (H_{k-1} c)); c Qᴴ too

    def reflect(j, c):
        i = k - 1 - j if backward else j
        v = lax.dynamic_slice_in_dim(v_all, i, 1, axis=-1)                # [..., m, 1]
        tau = lax.dynamic_slice_in_dim(taus, i, 1, axis=-1)[..., None]    # [..., 1, 1]
        vh = jnp.conj(jnp.swapaxes(v, -1, -2))                            # [..., 1, m]
        if left:                                 # c - τ v (vᴴ c)
            return c - tau * v * jnp.matmul(vh, c)          # [..., 1, m] @ [..., m, p]
        return c - tau * jnp.matmul(c, v) * vh              # [..., p, m] @ [..., m, 1]
    return lax.fori_loop(0, k, reflect, c)


# ---- qdwh --------------------------------------------------------------------------------
_CHOLESKY_CUTOFF = 100          # c above it: the QR-based step (x's conditioning too poor)


def _qdwh_coefficients(eps: float, max_iterations: int):
    """The static weights (a, b, c) of QDWH's steps, from the lower bound l of the scaled
    input's smallest singular value, l₀ = eps, until l is within 5 eps of 1: with
    d = (4 (1 - l²) / l⁴)^⅓, a = √(1 + d) + √(8 - 4d + 8 (2 - l²) / (l² √(1 + d))) / 2,
    b = (a - 1)² / 4, c = a + b - 1, then l <- l (a + b l²) / (1 + c l²). Split into the
    QR-based steps (c > 100), as (e, (a - e)/√c, √c) with e = b/c, and the Cholesky-based
    ones, as (e, a - e, c)."""
    tol_l = 5.0 * eps
    qr_steps, chol_steps = [], []
    l = eps
    while l + tol_l < 1 and len(qr_steps) + len(chol_steps) < max_iterations:
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1.0 + dd) ** 0.5
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** 0.5
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        e = b / c
        if c > _CHOLESKY_CUTOFF:
            qr_steps.append((e, (a - e) / c ** 0.5, c ** 0.5))
        else:
            chol_steps.append((e, a - e, c))
    return qr_steps, chol_steps


def _mask(x, dims, other=0):
    """x where each index along axis i is < dims[i] (the true, unpadded size), else other."""
    import fnad.numpy as jnp
    from fnad import lax
    inside = None
    for axis, d in enumerate(dims):
        if d is None or (isinstance(d, int) and d == x.shape[axis]):
            continue
        here = lax.broadcasted_iota(np.int32, x.shape, axis) < d
        inside = here if inside is None else inside & here
    return x if inside is None else jnp.where(inside, x, other)


def _qdwh_qr_step(u, m, n, step):
    """u <- e u + (a - e)/√c Q₁ Q₂ᴴ with [√c u; I] = [Q₁; Q₂] R (thin QR), m x n the true
    size of u [M, N] (zero outside it; the identity is placed right under row m)."""
    import fnad.numpy as jnp
    from fnad import lax
    e, a_e_sqrt_c, sqrt_c = step
    M, N = u.shape
    eye = jnp.eye(N, dtype=u.dtype)
    if isinstance(m, int) and m == M:
        y = jnp.concatenate([sqrt_c * u, eye], axis=0)                    # [M+N, N]
    else:
        y = jnp.concatenate([sqrt_c * u, jnp.zeros_like(eye)], axis=0)
        y = lax.dynamic_update_slice_in_dim(y, eye, m, axis=0)
    q, _ = _dec.qr(y, full_matrices=False)                                # [M+N, N]
    q1 = _mask(q[:M], (m, n))                                             # [M, N]
    q2 = _mask(lax.dynamic_slice_in_dim(q, m, N, axis=0), (n, n))         # [N, N]
    return e * u + a_e_sqrt_c * jnp.matmul(q1, jnp.conj(q2.T))


def _qdwh_cholesky_step(u, m, n, step):
    """u <- e u + (a - e) u (c uᴴ u + I)⁻¹, by the Cholesky factor L of c uᴴ u + I (the
    identity outside the true n x n block): u L⁻ᴴ L⁻¹, two triangular solves."""
    import fnad.numpy as jnp
    e, a_e, c = step
    N = u.shape[1]
    eye = jnp.eye(N, dtype=u.dtype)
    gram = _mask(c * jnp.matmul(jnp.conj(u.T), u) + eye, (n, n), eye)    # [N, N]
    low = _dec.cholesky(gram, symmetrize_input=False)
    z = _dec.triangular_solve(low, u, left_side=False, lower=True, transpose_a=True,
                              conjugate_a=True)                           # u L⁻ᴴ
    z = _dec.triangular_solve(low, z, left_side=False, lower=True)        # u L⁻ᴴ L⁻¹
    return e * u + a_e * z


def _qdwh_2d(x, m, n, max_iterations: int, eps: float):
    import fnad.numpy as jnp
    from fnad import lax
    real = jnp.finfo(x.dtype).dtype
    one_norm = jnp.linalg.norm(x, ord=1)
    inf_norm = jnp.linalg.norm(x, ord=np.inf)
    scale = jnp.where(one_norm == 0, 1, lax.rsqrt(one_norm) * lax.rsqrt(inf_norm))
    u = x * scale.astype(x.dtype)                # ‖u‖₂ <= 1: ‖x‖₂² <= ‖x‖₁ ‖x‖∞
    tol_norm = (5.0 * eps) ** (1 / 3)
    qr_steps, chol_steps = _qdwh_coefficients(eps, max_iterations)

    def as_steps(steps):                         # [K, 3] -> three [K] arrays
        return tuple(jnp.asarray(np.asarray(steps, real)[:, j]) for j in range(3))

    if qr_steps:
        def qr_body(u, step):
            return _qdwh_qr_step(u, m, n, step), None
        u, _ = lax.scan(qr_body, u, as_steps(qr_steps))

    def chol_update(u, step):                    # the step and whether u still moves
        new = _qdwh_cholesky_step(u, m, n, step)
        return new, jnp.linalg.norm(new - u) > tol_norm

    running = jnp.asarray(True)
    if chol_steps:
        def chol_body(carry, step):
            return chol_update(carry[0], step), None
        (u, running), _ = lax.scan(chol_body, (u, running), as_steps(chol_steps))

    halley = tuple(jnp.asarray(v, real) for v in (1 / 3, 3 - 1 / 3, 3.0))   # a, b, c = 3, 1, 3

    def more(state):
        k, _, running = state
        return running & (k < max_iterations)

    def halley_body(state):                      # l has converged, u not yet: Halley's steps
        k, u, _ = state
        return (k + 1,) + chol_update(u, halley)
    start = jnp.asarray(len(qr_steps) + len(chol_steps))                 # weak, as JAX's
    num_iters, u, running = lax.while_loop(more, halley_body, (start, u, running))
    u = 1.5 * u - 0.5 * jnp.matmul(u, jnp.matmul(jnp.conj(u.T), u))   # one Newton-Schulz step
    h = jnp.matmul(jnp.conj(u.T), x)
    h = (h + jnp.conj(h.T)) / 2
    return u, h, num_iters, ~running


def qdwh(x, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None):
    """(u, h, num_iters, is_converged): the polar decomposition x = u h of a full-rank x
    [..., M, N] (M >= N) by the QR-based dynamically weighted Halley iteration (Nakatsukasa,
    Bai & Gygi 2010), as jax.lax.linalg.qdwh. u [..., M, N] has orthonormal columns, h
    [..., N, N] is Hermitian positive semi-definite.

    x is scaled by 1/√(‖x‖₁ ‖x‖∞) (so ‖x‖₂ <= 1), then u <- e u + (a - e) u (I + c uᴴ u)⁻¹
    with the weights (a, b, c), e = b/c, of _qdwh_coefficients: by a thin QR of [√c u; I]
    while c > 100, then by a Cholesky factor; those steps are static (at most
    max_iterations, default 10); Cholesky steps with Halley's weights (3, 1, 3) follow
    (a while_loop) while ‖u_k - u_{k-1}‖_F > (5 eps)^⅓ and fewer than max_iterations steps
    were taken. Then one Newton-Schulz step u <- 3/2 u - 1/2 u uᴴ u, and h = (uᴴ x + xᴴ u)/2.
    eps defaults to x's machine epsilon; is_hermitian is unused (as JAX's). dynamic_shape
    (m, n): x is padded from its true m x n block (entries outside it are ignored); u and h
    are zero outside m x n and n x n. Unlike JAX's (one matrix) leading batch dims are
    mapped over (num_iters and is_converged then per matrix). Forward-mode differentiable;
    not reverse-mode (the while_loop's trip count is dynamic), as JAX's."""
    import fnad.numpy as jnp
    from fnad.numpy._core import promote_dtypes_inexact
    if not isinstance(is_hermitian, (bool, np.bool_)):
        raise TypeError("qdwh: is_hermitian must be a static bool, got "
                        f"{type(is_hermitian).__name__}")
    max_iterations = 10 if max_iterations is None else operator.index(max_iterations)
    x, = promote_dtypes_inexact(*_arrays("qdwh", x))
    if x.ndim < 2:
        raise ValueError(f"qdwh: x must be a matrix [..., M, N], got shape {x.shape}")
    M, N = x.shape[-2:]
    if M < N:
        raise ValueError(f"qdwh: the input matrix of shape M x N must have M >= N, got "
                         f"shape {x.shape}")
    eps = float(jnp.finfo(x.dtype).eps) if eps is None else float(eps)
    if dynamic_shape is None:
        m, n = M, N
    else:
        m, n = dynamic_shape
        m, n = (int(v) if isinstance(v, (int, np.integer)) else v for v in (m, n))
        if isinstance(m, int) and isinstance(n, int) and not (0 <= n <= N and n <= m <= M):
            raise ValueError(f"qdwh: dynamic_shape {(m, n)} must fit in x's shape {(M, N)} "
                             "with m >= n")
        x = _mask(x, (None,) * (x.ndim - 2) + (m, n))
    return _map_matrices(lambda x: _qdwh_2d(x, m, n, max_iterations, eps), x)

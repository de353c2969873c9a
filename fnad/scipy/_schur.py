"""The Schur-based functions of fnad.scipy.linalg: schur, rsf2csf, sqrtm, funm,
solve_sylvester (re-exported there). Compositions of lax.linalg.schur (the primitive
schur_p, LAPACK's gees) and fnad.numpy/lax operations; every matrix argument may carry
leading batch dimensions [..., n, n].

Math:
  schur            A = Z T Zᴴ, Z unitary; T upper triangular ('complex') or quasi-upper-
                   triangular ('real': 2×2 diagonal blocks for complex-conjugate pairs)
  rsf2csf          real Schur form -> complex: each 2×2 block T[m-1:m+1, m-1:m+1] is
                   triangularized by the Givens rotation G = [[c̄, s], [-s, c]] with
                   (c, s) = (μ, T[m, m-1]) / ‖(μ, T[m, m-1])‖, μ = λ - T[m, m] for the
                   block's eigenvalue λ of positive imaginary part: T <- G T Gᴴ, Z <- Z Gᴴ
                   (m = n-1 down to 1, as SciPy and JAX)
  sqrtm            A = Z T Zᴴ (complex), X = Z U Zᴴ with U upper triangular, U² = T:
                   U_ii = √T_ii, then superdiagonal by superdiagonal (d = j - i = 1, 2, ...)
                   U_ij = (T_ij - Σ_{i<k<j} U_ik U_kj) / (U_ii + U_jj)   (0 where the
                   numerator is 0, as JAX; Björck & Hammarling 1983)
                   derivative (not in JAX): X dX + dX X = dA, a Sylvester equation in dX
  funm             A = Z T Zᴴ, F = Z f(T) Zᴴ; f(T) by the Schur–Parlett recurrence (Golub &
                   Van Loan, Algorithm 11.1.1), superdiagonal by superdiagonal:
                   F_ii = f(T_ii), F_ij = (T_ij (F_jj - F_ii) + Σ_{i<k<j} (T_ik F_kj -
                   F_ik T_kj)) / (T_jj - T_ii)   (the numerator alone where T_jj = T_ii)
  solve_sylvester  A X + X B = C. 'schur' (Bartels–Stewart): A = U R Uᴴ, B = V S Vᴴ complex
                   Schur forms, R Y + Y S = Uᴴ C V solved column by column,
                   (R + S_jj I) y_j = f_j - Σ_{k<j} y_k S_kj (triangular solves), X = U Y Vᴴ;
                   'eigen': A = P diag(a) P⁻¹, B = Q diag(b) Q⁻¹,
                   X = P [(P⁻¹ C Q)_ij / (a_i + b_j)] Q⁻¹. NaNs where some |a_i + b_j| < tol.
                   Inside lax.custom_linear_solve (matvec X -> A X + X B), so it is
                   differentiated implicitly: A dX + dX B = dC - dA X - X dB, and reverse
                   mode solves the transpose Aᵀ Z + Z Bᵀ = W, i.e. B Zᵀ + Zᵀ A = Wᵀ.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.core import Array
from fnad.custom import custom_jvp
from fnad.numpy._core import promote_dtypes_inexact
from fnad.primitives import decompositions as dec

_HIGHEST = lax.Precision.HIGHEST


def _H(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _square(name: str, a, what: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: {what} must be a square matrix or a batch of square "
                         f"matrices with shape [..., n, n], got shape {a.shape}")


def _complex(x):
    return x.astype(dec._complex_dtype(x.dtype))


# ---- schur / rsf2csf -----------------------------------------------------------------------
def schur(a, output: str = "real") -> tuple[Array, Array]:
    """(T, Z) with a = Z T Zᴴ for a [..., n, n]: Z unitary, T upper triangular (output
    'complex', or a complex a) or quasi-upper-triangular with 2×2 diagonal blocks for
    complex-conjugate eigenvalue pairs ('real', a real a). Not differentiable (as JAX); its
    factors are LAPACK's gees', as JAX's on CPU (on the xla backend it runs where jax's
    schur does: CPU only)."""
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    a, = promote_dtypes_inexact(jnp.asarray(a))
    _square("schur", a, "a")
    if output == "complex":
        a = _complex(a)
    return dec.schur(a)


def _rsf2csf_step(m, TZ):
    """Triangularize the 2×2 block at rows/columns m-1, m of T (T [..., n, n] complex)."""
    T, Z = TZ
    n = T.shape[-1]
    rows = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=-2)                 # [..., 2, n]
    blk = lax.dynamic_slice_in_dim(rows, m - 1, 2, axis=-1)               # [..., 2, 2]
    a, b, c, d = blk[..., 0, 0], blk[..., 0, 1], blk[..., 1, 0], blk[..., 1, 1]
    half = (a - d) / 2
    mu = (a + d) / 2 + jnp.sqrt(half * half + b * c) - d       # λ (Im λ >= 0 for a real pair)
    eps = jnp.finfo(T.dtype).eps
    rotate = jnp.abs(c) > eps * (jnp.abs(a) + jnp.abs(d))                 # [...]
    r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(c) ** 2).astype(T.dtype)
    r = jnp.where(rotate, r, 1)
    cs, sn = jnp.where(rotate, mu / r, 1), jnp.where(rotate, c / r, 0)
    G = jnp.stack([jnp.stack([jnp.conj(cs), sn], -1),
                   jnp.stack([-sn, cs], -1)], -2)                         # [..., 2, 2]
    cols = jnp.arange(n) >= m - 1
    rows = jnp.where(cols, _mm(G, rows), rows)                            # G T[m-1:m+1, m-1:]
    T = lax.dynamic_update_slice_in_dim(T, rows, m - 1, axis=-2)
    tcols = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=-1)                # [..., n, 2]
    upper = (jnp.arange(n) < m + 1)[:, None]
    tcols = jnp.where(upper, _mm(tcols, _H(G)), tcols)                    # T[:m+1, m-1:m+1] Gᴴ
    T = lax.dynamic_update_slice_in_dim(T, tcols, m - 1, axis=-1)
    zcols = lax.dynamic_slice_in_dim(Z, m - 1, 2, axis=-1)                # [..., n, 2]
    Z = lax.dynamic_update_slice_in_dim(Z, _mm(zcols, _H(G)), m - 1, axis=-1)
    below = (jnp.arange(n)[:, None] == m) & (jnp.arange(n) == m - 1)     # T[m, m-1] = 0
    return jnp.where(below, 0, T), Z


def rsf2csf(T, Z, check_finite: bool = True) -> tuple[Array, Array]:
    """(T, Z) in complex Schur form from a real Schur form (T quasi-upper-triangular, Z its
    Schur vectors; [..., n, n], batch dims broadcast): the same a = Z T Zᴴ with T upper
    triangular. check_finite is unused (as JAX)."""
    del check_finite
    T, Z = jnp.asarray(T), jnp.asarray(Z)
    _square("rsf2csf", T, "T")
    _square("rsf2csf", Z, "Z")
    if T.shape[-1] != Z.shape[-1]:
        raise ValueError(f"rsf2csf: T and Z must have the same matrix size, got T "
                         f"{T.shape} and Z {Z.shape}")
    T, Z = promote_dtypes_inexact(T, Z)
    T, Z = _complex(T), _complex(Z)
    batch = np.broadcast_shapes(T.shape[:-2], Z.shape[:-2])
    n = T.shape[-1]
    T = jnp.broadcast_to(T, batch + (n, n))
    Z = jnp.broadcast_to(Z, batch + (n, n))
    if n < 2:
        return T, Z
    # m = n-1 down to 1, as SciPy's (the rotations of different blocks do not commute)
    return lax.fori_loop(1, n, lambda i, tz: _rsf2csf_step(n - i, tz), (T, Z))


# ---- the superdiagonal sweeps of sqrtm and funm --------------------------------------------
def _shift_rows(x, d):
    """[..., n, n] -> [..., n, n]: row i is x's row i + d (zeros past the end); d traced."""
    n = x.shape[-1]
    padded = jnp.concatenate([x, jnp.zeros_like(x)], axis=-2)            # [..., 2n, n]
    return lax.dynamic_slice_in_dim(padded, d, n, axis=-2)


def _superdiagonal(x, d):
    """v [..., n]: v_i = x[i, i + d] (0 for i + d >= n)."""
    return jnp.diagonal(_shift_rows(_mT(x), d), axis1=-2, axis2=-1)


def _product_superdiagonal(p, q, d):
    """v [..., n]: v_i = (p q)[i, i + d] = Σ_k p[i, k] q[k, i + d] (0 for i + d >= n)."""
    return jnp.sum(p * _shift_rows(_mT(q), d), axis=-1)


def _set_superdiagonal(x, v, d):
    """x with x[i, i + d] = v_i."""
    n = x.shape[-1]
    on = (jnp.arange(n)[None, :] - jnp.arange(n)[:, None]) == d
    return jnp.where(on, v[..., :, None], x)


def _diag_matrix(v):                                       # [..., n] -> [..., n, n]
    n = v.shape[-1]
    return jnp.where(jnp.eye(n, dtype=bool), v[..., :, None], jnp.zeros_like(v)[..., None])


def _shift(v, d):
    """v [..., n] -> w [..., n], w_i = v_{i + d} (0 past the end)."""
    n = v.shape[-1]
    return lax.dynamic_slice_in_dim(jnp.concatenate([v, jnp.zeros_like(v)], -1), d, n, -1)


def _sqrtm_triu(T):
    """U upper triangular with U² = T, T [..., n, n] upper triangular (complex)."""
    diag = jnp.sqrt(jnp.diagonal(T, axis1=-2, axis2=-1))                 # [..., n]

    def step(d, U):                                  # superdiagonal d from those below it
        num = _superdiagonal(T, d) - _product_superdiagonal(U, U, d)
        val = jnp.where(num == 0, 0, num / (diag + _shift(diag, d)))
        return _set_superdiagonal(U, val, d)
    if T.shape[-1] < 2:
        return _diag_matrix(diag)
    return lax.fori_loop(1, T.shape[-1], step, _diag_matrix(diag))


def _parlett(T, F):
    """(f(T), min |T_jj - T_ii|) for T [..., n, n] upper triangular and F = diag(f(T_ii))."""
    t_diag = jnp.diagonal(T, axis1=-2, axis2=-1)

    def step(d, carry):
        F, minden = carry
        # (T F - F T)_ij with only F's superdiagonals < d filled, j = i + d, is
        # T_ij F_jj - F_ii T_ij + Σ_{i<k<j} (T_ik F_kj - F_ik T_kj): the recurrence's s
        s = _product_superdiagonal(T, F, d) - _product_superdiagonal(F, T, d)
        den = _shift(t_diag, d) - t_diag
        inside = jnp.arange(T.shape[-1]) < T.shape[-1] - d
        minden = jnp.minimum(minden, jnp.min(jnp.where(inside, jnp.abs(den), jnp.inf),
                                             axis=-1))
        return _set_superdiagonal(F, jnp.where(den != 0, s / jnp.where(den != 0, den, 1), s),
                                  d), minden
    if T.shape[-1] < 2:                               # nothing above the diagonal
        return F, jnp.abs(T[..., 0, 0]) if T.shape[-1] else jnp.zeros(T.shape[:-2])
    return lax.fori_loop(1, T.shape[-1], step, (F, jnp.abs(T[..., 0, 0])))


# ---- sqrtm ---------------------------------------------------------------------------------
def _sqrtm_parts(A):
    T, Z = dec.schur(_complex(A))
    U = _sqrtm_triu(T)
    return U, Z


@custom_jvp
def _sqrtm(A):
    U, Z = _sqrtm_parts(A)
    return _mm(_mm(Z, U), _H(Z))


@_sqrtm.defjvp
def _sqrtm_jvp(primals, tangents):                   # X dX + dX X = dA
    (A,), (dA,) = primals, tangents
    X = _sqrtm(A)                                    # differentiable again (higher orders)
    U, Z = _sqrtm_parts(lax.stop_gradient(A))        # X's Schur form: X = Z U Zᴴ
    factor = _schur_factors(U, Z)
    return X, _sylvester_solve(X, X, dA.astype(X.dtype), factor, factor, tol=0.0)


def sqrtm(A, blocksize: int = 1) -> Array:
    """The principal square root X of A [..., n, n] (X @ X = A), complex (as JAX's, also for
    real A), by the complex Schur form and Björck & Hammarling's recurrence. blocksize > 1
    (SciPy's blocked algorithm) is not implemented, as in JAX. Unlike JAX's, differentiable
    (all orders, both modes): dX solves X dX + dX X = dA."""
    if blocksize > 1:
        raise NotImplementedError("sqrtm: the blocked version (blocksize > 1) is not "
                                  "implemented, as in jax; use blocksize=1")
    A, = promote_dtypes_inexact(jnp.asarray(A))
    _square("sqrtm", A, "A")
    return _sqrtm(A)


# ---- funm ----------------------------------------------------------------------------------
def funm(A, func: Callable[[Array], Array], disp: bool = True):
    """f(A) for A [..., n, n] and a scalar function `func` (applied elementwise to the
    eigenvalues: it must map an array to an array of the same shape), by the complex Schur
    form and the Schur–Parlett recurrence; complex, as JAX's. Inaccurate for close
    eigenvalues (it divides by their differences; exact repeats are not divided by). With
    disp=False returns (F, errest), SciPy's error estimate. Not differentiable (as JAX):
    differentiating it raises schur's NotImplementedError."""
    A, = promote_dtypes_inexact(jnp.asarray(A))
    _square("funm", A, "A")
    T, Z = dec.schur(_complex(A))                 # differentiating it: schur's error
    F = _diag_matrix(jnp.asarray(func(jnp.diagonal(T, axis1=-2, axis2=-1))).astype(T.dtype))
    F, minden = _parlett(T, F)
    F = _mm(_mm(Z, F), _H(Z))
    if disp:
        return F
    tol = jnp.finfo(F.dtype).eps
    minden = jnp.where(minden == 0, tol, minden)
    strict = jnp.max(jnp.sum(jnp.abs(jnp.triu(T, 1)), axis=-2), axis=-1,
                     initial=0)                                           # ‖triu(T, 1)‖₁
    err = jnp.minimum(1, jnp.maximum(tol, (tol / minden) * strict))
    err = jnp.where(jnp.any(jnp.isinf(F), axis=(-2, -1)), np.inf, err)
    return F, err


# ---- solve_sylvester -----------------------------------------------------------------------
class _Factors(NamedTuple):
    """M = V D V⁻¹ with D upper triangular (`triangle`, a Schur form: V⁻¹ = Vᴴ) or diagonal
    (triangle None, D = diag(eigenvalues)): what a Sylvester solve needs of one side."""
    vectors: Array                                   # V [..., k, k]
    inverse: Array                                   # V⁻¹
    triangle: Array | None
    eigenvalues: Array                               # [..., k]


def _schur_factors(T, Z) -> _Factors:
    return _Factors(Z, _H(Z), T, jnp.diagonal(T, axis1=-2, axis2=-1))


def _triangular_sylvester(R, S, F):
    """Y [..., m, n] with R Y + Y S = F, R [..., m, m] and S [..., n, n] upper triangular:
    column j solves (R + S_jj I) y_j = f_j - Σ_{k<j} y_k S_kj."""
    m = R.shape[-1]
    if m == 0 or F.shape[-1] == 0:
        return F
    eye = jnp.eye(m, dtype=R.dtype)

    def step(j, Y):
        s_col = lax.dynamic_slice_in_dim(S, j, 1, axis=-1)               # [..., n, 1]
        s_jj = lax.dynamic_slice_in_dim(s_col, j, 1, axis=-2)            # [..., 1, 1]
        f_col = lax.dynamic_slice_in_dim(F, j, 1, axis=-1)               # [..., m, 1]
        rhs = f_col - _mm(Y, s_col)                  # Y's columns >= j are still zero
        y = dec.triangular_solve(R + s_jj * eye, rhs, left_side=True, lower=False)
        return lax.dynamic_update_slice_in_dim(Y, y, j, axis=-1)
    return lax.fori_loop(0, F.shape[-1], step, jnp.zeros_like(F))


def _apply_factors(fa: _Factors, fb: _Factors, c):
    """X with A X + X B = c from the factors of A and B (complex c): with A = U R U⁻¹,
    B = V S V⁻¹ and Y = U⁻¹ X V, R Y + Y S = U⁻¹ C V."""
    F = _mm(_mm(fa.inverse, c), fb.vectors)                               # U⁻¹ C V
    if fa.triangle is not None:
        Y = _triangular_sylvester(fa.triangle, fb.triangle, F)
    else:                                                                 # R, S diagonal
        Y = F / (fa.eigenvalues[..., :, None] + fb.eigenvalues[..., None, :])
    return _mm(_mm(fa.vectors, Y), fb.inverse)                            # U Y V⁻¹


def _sylvester_solve(A, B, C, fa, fb, tol: float):
    """X with A X + X B = C (all [..., ·, ·] with one batch shape; fa, fb: the factors of
    stop_gradient(A) and (B)), implicitly differentiated by lax.custom_linear_solve."""
    ws = fa.eigenvalues[..., :, None] + fb.eigenvalues[..., None, :]      # [..., m, n]
    bad = jnp.any(jnp.abs(ws) < tol, axis=(-2, -1))[..., None, None]

    def finish(x, like):                              # real problems have real solutions
        x = x if jnp.iscomplexobj(like) else jnp.real(x)
        return jnp.where(bad, np.nan, x.astype(like.dtype))

    def solve(_, c):                                  # A X + X B = c
        return finish(_apply_factors(fa, fb, _complex(c)), c)

    def transpose_solve(_, w):                        # Aᵀ Z + Z Bᵀ = w  <=>  B Zᵀ + Zᵀ A = wᵀ
        return finish(_mT(_apply_factors(fb, fa, _complex(_mT(w)))), w)

    def matvec(x):
        return _mm(A, x) + _mm(x, B)
    return lax.custom_linear_solve(matvec, C, solve, transpose_solve)


def _factor(M, method: str) -> _Factors:
    M = _complex(lax.stop_gradient(M))
    if method == "schur":
        return _schur_factors(*dec.schur(M))
    w, P = jnp.linalg.eig(M)
    return _Factors(P, jnp.linalg.inv(P), None, w)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8) -> Array:
    """X [..., m, n] with A X + X B = C; A [..., m, m], B [..., n, n], C [..., m, n] (batch
    dims broadcast). method 'schur' (Bartels–Stewart on the complex Schur forms) or 'eigen'
    (eigendecompositions: faster, inaccurate for non-normal A or B). NaNs where some
    eigenvalues satisfy |λ_i(A) + λ_j(B)| < tol (as JAX). Differentiable in A, B and C, in
    both modes and to every order (JAX's only in C, through its loop): A dX + dX B
    = dC - dA X - X dB."""
    if method not in ("schur", "eigen"):
        raise ValueError(f"solve_sylvester: method must be 'schur' or 'eigen', got "
                         f"{method!r}")
    A, B, C = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    _square("solve_sylvester", A, "A")
    _square("solve_sylvester", B, "B")
    if C.ndim < 2 or C.shape[-2:] != (A.shape[-1], B.shape[-1]):
        raise ValueError(f"solve_sylvester: incompatible shapes A {A.shape}, B {B.shape} "
                         f"and C {C.shape}: C must be [..., {A.shape[-1]}, {B.shape[-1]}]")
    m, n = C.shape[-2:]
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    A = jnp.broadcast_to(A, batch + (m, m))
    B = jnp.broadcast_to(B, batch + (n, n))
    C = jnp.broadcast_to(C, batch + (m, n))
    return _sylvester_solve(A, B, C, _factor(A, method), _factor(B, method), float(tol))

"""fnad.scipy.linalg: jax.scipy.linalg's API, built on the lax decompositions
(primitives/decompositions.py) and fnad.numpy.linalg. No new primitives: every function is
a composition, so its derivatives, batching and jit come from those of its parts.

Math (as JAX unless said):
  cholesky    A = L Lᴴ (lower) or A = Uᴴ U; only that triangle of A is read
  cho_solve   A x = b from A's factor: L y = b, Lᴴ x = y (or Uᴴ y = b, U x = y)
  solve       'gen'/'sym'/'her': LU (jnp.linalg.solve); 'pos': Cholesky of stop_gradient(A)
              inside lax.custom_linear_solve (matvec x -> A x), so the derivative is
              dx = -A⁻¹ dA x + A⁻¹ db, as JAX's, reusing the factor
  lu          A = P L U, P[i, j] = (perm[j] == i); permute_l: (P L, U)
  lu_solve    trans 0: x = U⁻¹ L⁻¹ P b; 1: Aᵀ = Uᵀ Lᵀ P => x = Pᵀ L⁻ᵀ U⁻ᵀ b; 2: the same with Aᴴ
  eigh        A v = w v (A symmetrized, as JAX); with b = L Lᴴ (not in JAX: generalized, as
              SciPy): type 1 A v = w B v: C = L⁻¹ A L⁻ᴴ, v = L⁻ᴴ V; type 2 A B v = w v and
              type 3 B A v = w v: C = Lᴴ A L, v = L⁻ᴴ V (2) or L V (3); C V = V diag(w)
  expm        Padé approximant r_m(A/2^s) = q_m⁻¹ p_m (m = 3, 5, 7, 9, 13 for 64 bits; 3, 5,
              7 for 32) chosen by ‖A‖₁ (Higham 2005, JAX's thresholds), squared s times;
              NaN when s > max_squarings. Differentiated through (lax.switch, lax.cond and
              lax.scan), so expm's JVP is expm_frechet's, exactly as JAX's
  expm_frechet  (expm(A), L(A, E)) = jvp(expm, A, E)
  polar       A = U P from the thin SVD A = W Σ Vᴴ: U = W Vᴴ, P = V Σ Vᴴ (right) or W Σ Wᴴ
              (left). method 'qdwh' is computed by the SVD too (JAX iterates QDWH)
  eigh_tridiagonal  dense eigh of the tridiagonal matrix (JAX: Sturm bisection and inverse
              iteration)
  qr_multiply Q (thin, from qr) times c: c Q (right) or Q c (left); conjugate: conj(Q)
  hessenberg  H = Qᴴ A Q by Householder reflections H_i = I - τ v vᴴ with LAPACK's xGEHRD and
              xLARFG conventions (so JAX's values), in fnad.numpy operations (differentiable)
The special matrices with a static size (hilbert, invhilbert, pascal, invpascal, helmert,
hadamard, dft) are computed exactly on the host (integer binomials) and become constants.
schur, rsf2csf, sqrtm, funm, solve_sylvester: in _schur.py (on lax.linalg.schur), re-exported
here; sqrtm and solve_sylvester are differentiable (JAX's are not).
"""
from __future__ import annotations

import math
import operator
import warnings
from functools import partial
from typing import Any

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, lax
from fnad.ad import jvp
from fnad.batching import vmap
from fnad.core import Array
from fnad.numpy import linalg as jnp_linalg
from fnad.numpy._core import check_arraylike, promote_dtypes, promote_dtypes_inexact
from fnad.primitives import decompositions as dec
from fnad.scipy._schur import funm, rsf2csf, schur, solve_sylvester, sqrtm

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "det", "dft", "eigh", "eigh_tridiagonal", "expm",
           "expm_frechet", "fiedler", "fiedler_companion", "funm", "hadamard", "hankel",
           "helmert", "hessenberg",
           "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu", "lu_factor",
           "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]

_HIGHEST = lax.Precision.HIGHEST


def _inexact(*args):
    return promote_dtypes_inexact(*(jnp.asarray(a) for a in args))


def _H(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _square(name: str, a, what: str = "a") -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: {what} must be a square matrix or a batch of square "
                         f"matrices with shape [..., n, n], got shape {a.shape}")


def _rhs_signature(name: str, a, b) -> bool:
    """True where b holds vectors (one, or JAX's deprecated batch of them), else matrices;
    checks b against a [..., n, n]."""
    n = a.shape[-1]
    if b.ndim == 0:
        raise ValueError(f"{name}: b must be a vector [n] or matrices [..., n, k], got a scalar")
    vector = b.ndim == 1
    if not vector and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]:
        warnings.warn(f"{name}: batched 1D solves with b.ndim > 1 are deprecated (as in "
                      f"JAX), and in the future will be treated as a batched 2D solve. Use "
                      f"b[..., None] and squeeze the result's last axis.", FutureWarning,
                      stacklevel=3)
        vector = True
    rows = b.shape[-1] if vector else b.shape[-2]
    if rows != n:
        raise ValueError(f"{name}: incompatible shapes a {a.shape} and b {b.shape}: b's "
                         f"{'length' if vector else 'dimension -2'} must be {n}")
    return vector


def _vectorize(fun, vector: bool, n_in: int = 2):
    mats = ",".join(["(n,n)"] + ["(n)"] * (n_in - 2))
    sig = f"{mats},(n)->(n)" if vector else f"{mats},(n,k)->(n,k)"
    return jnp.vectorize(fun, signature=sig)


# ---- cholesky / cho_factor / cho_solve ------------------------------------------------------
def cholesky(a, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Array:
    """The Cholesky factor of Hermitian positive-definite a [..., n, n]: L (lower) with
    a = L Lᴴ, else U with a = Uᴴ U. Only that triangle of a is read; NaNs if a is not
    positive definite (as JAX)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    _square("cholesky", a)
    L = dec.cholesky(a if lower else _H(a), symmetrize_input=False)       # [..., n, n]
    return L if lower else _H(L)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Array, bool]:
    """(c, lower): cholesky(a, lower) and the flag, for cho_solve."""
    del overwrite_a, check_finite
    return cholesky(a, lower=lower), lower


def _cho_solve(c, b, lower: bool, vector: bool):
    first = partial(dec.triangular_solve, left_side=True, lower=lower,
                    transpose_a=not lower, conjugate_a=not lower)          # L y = b / Uᴴ y = b
    second = partial(dec.triangular_solve, left_side=True, lower=lower,
                     transpose_a=lower, conjugate_a=lower)                  # Lᴴ x = y / U x = y
    y = _vectorize(first, vector)(c, b)
    return _vectorize(second, vector)(c, y)


def cho_solve(c_and_lower: tuple[Any, bool], b, overwrite_b: bool = False,
              check_finite: bool = True) -> Array:
    """x with A x = b from cho_factor(A) = (c, lower): b [n] or [..., n, k] (batch dims
    broadcast with c's)."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    _square("cho_solve", c, "c")
    return _cho_solve(c, b, bool(lower), _rhs_signature("cho_solve", c, b))


# ---- solve / solve_triangular / inv / det --------------------------------------------------
def _solve_pos(a, b, lower: bool):
    vector = a.ndim == b.ndim + 1                                          # b [..., m]
    core = b.shape[-1:] if vector else b.shape[-2:]
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:b.ndim - len(core)])
    except ValueError:
        raise ValueError(f"solve: batch dimensions of a {a.shape} and b {b.shape} do not "
                         "broadcast") from None
    b = jnp.broadcast_to(b, batch + core)      # custom_linear_solve: A x shaped like b
    factors = cholesky(lax.stop_gradient(a), lower=lower)

    def matvec(x):                                                         # [..., m] -> A x
        return _mm(a, x[..., None])[..., 0]

    def solve_vec(_, x):
        return _cho_solve(factors, x, lower, True)
    custom_solve = partial(lax.custom_linear_solve, matvec, solve=solve_vec, symmetric=True)
    if vector:
        return custom_solve(b)
    return vmap(custom_solve, b.ndim - 1, max(a.ndim, b.ndim) - 1)(b)     # b's columns


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Array:
    """x with a x = b; a [..., m, m], b [..., m] or [..., m, k]. assume_a 'gen', 'sym' and
    'her' use LU; 'pos' the Cholesky factor of the `lower` (or upper) triangle. Batch dims
    broadcast with either (JAX's 'pos' wants b's batch dims to be the broadcast ones)."""
    del overwrite_a, overwrite_b, debug, check_finite
    valid = ["gen", "sym", "her", "pos"]
    if assume_a not in valid:
        raise ValueError(f"Expected assume_a to be one of {valid}; got {assume_a!r}")
    if assume_a != "pos":
        return jnp_linalg.solve(a, b)
    a, b = _inexact(a, b)
    _square("solve", a)
    if b.ndim < 1 or (b.ndim == a.ndim - 1 and b.shape[-1] != a.shape[-1]) or (
            b.ndim != a.ndim - 1 and b.shape[-2:-1] != a.shape[-1:]):
        raise ValueError(f"solve: incompatible shapes a {a.shape} and b {b.shape}: b must be "
                         f"[..., {a.shape[-1]}] or [..., {a.shape[-1]}, k]")
    return _solve_pos(a, b, bool(lower))


_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Array:
    """x with op(a) x = b for triangular a [..., n, n] (only its `lower` or upper triangle
    is read); op by trans: 0/'N' a, 1/'T' aᵀ, 2/'C' aᴴ. b [n] or [..., n, k]."""
    del overwrite_b, debug, check_finite
    if not isinstance(trans, (int, str)) or trans not in _TRANS:
        raise ValueError(f"Invalid 'trans' value {trans!r}: use 0, 1, 2, 'N', 'T' or 'C'")
    transpose_a, conjugate_a = _TRANS[trans]
    a, b = _inexact(a, b)
    _square("solve_triangular", a)
    vector = _rhs_signature("solve_triangular", a, b)
    fun = partial(dec.triangular_solve, left_side=True, lower=bool(lower),
                  transpose_a=transpose_a, conjugate_a=conjugate_a,
                  unit_diagonal=bool(unit_diagonal))
    return _vectorize(fun, vector)(a, b)


def inv(a, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """a⁻¹ for a [..., n, n] (jnp.linalg.inv)."""
    del overwrite_a, check_finite
    return jnp_linalg.inv(a)


def det(a, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """det a for a [..., n, n] (jnp.linalg.det, with its finite gradient at singular a)."""
    del overwrite_a, check_finite
    return jnp_linalg.det(a)


# ---- lu / lu_factor / lu_solve -----------------------------------------------------------
def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """(p, l, u) with a = p l u for a [..., m, n]: p [..., m, m] a permutation, l [..., m, k]
    unit lower, u [..., k, n] upper, k = min(m, n); with permute_l, (p l, u)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    if a.ndim < 2:
        raise ValueError(f"lu: a must be a matrix or a batch of matrices [..., m, n], got "
                         f"shape {a.shape}")
    packed, _, perm = dec.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    p = (perm[..., None, :] == jnp.arange(m, dtype=perm.dtype)[:, None])   # p[i, j]: perm[j] = i
    p = jnp.real(p.astype(a.dtype))
    l_ = jnp.tril(packed, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)  # [..., m, k]
    u = jnp.triu(packed)[..., :k, :]                                       # [..., k, n]
    if permute_l:
        return _mm(p.astype(a.dtype), l_), u
    return p, l_, u


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Array, Array]:
    """(lu, piv) of a [..., m, n]: L below the diagonal (unit), U on and above; row i was
    swapped with row piv[i] (0-based, int32)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    if a.ndim < 2:
        raise ValueError(f"lu_factor: a must be a matrix or a batch of matrices [..., m, n], "
                         f"got shape {a.shape}")
    packed, pivots, _ = dec.lu(a)
    return packed, pivots


def _pivots_to_permutation(pivots, m: int):
    """perm [..., m] with A[perm] = L U from LAPACK's row swaps (row i <-> pivots[i])."""
    from fnad.lax_linalg import lu_pivots_to_permutation
    return lu_pivots_to_permutation(jnp.asarray(pivots).astype(np.int32), m).astype(
        jnp.asarray(pivots).dtype)


def _lu_solve_2d(lu_, perm, b, trans: int):
    if trans == 0:                                                         # x = U⁻¹ L⁻¹ P b
        y = dec.triangular_solve(lu_, b[perm], left_side=True, lower=True, unit_diagonal=True)
        return dec.triangular_solve(lu_, y, left_side=True, lower=False)
    conj = trans == 2                                                      # x = Pᵀ L⁻ᵀ U⁻ᵀ b
    y = dec.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                             conjugate_a=conj)
    x = dec.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                             conjugate_a=conj, unit_diagonal=True)
    return x[jnp.argsort(perm)]


def lu_solve(lu_and_piv: tuple[Any, Any], b, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Array:
    """x with op(A) x = b from lu_factor(A) = (lu, piv); op by trans: 0 A, 1 Aᵀ, 2 Aᴴ.
    b [n] or [..., n, k]."""
    del overwrite_b, check_finite
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: 'trans' value must be 0, 1, or 2, got {trans!r}")
    lu_, pivots = lu_and_piv
    lu_, b = _inexact(lu_, b)
    pivots = jnp.asarray(pivots)
    _square("lu_solve", lu_, "lu")
    if not dtypes.issubdtype(pivots.dtype, np.integer):
        raise TypeError(f"lu_solve: pivots must be integers, got {pivots.dtype}")
    vector = _rhs_signature("lu_solve", lu_, b)
    perm = _pivots_to_permutation(pivots, lu_.shape[-1])
    return _vectorize(partial(_lu_solve_2d, trans=trans), vector, 3)(lu_, perm, b)


# ---- svd / qr / qr_multiply ----------------------------------------------------------------
def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """(u, s, vh) with a = u diag(s) vh for a [..., m, n], or s alone without compute_uv."""
    del overwrite_a, check_finite, lapack_driver
    a, = _inexact(a)
    return dec.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def qr(a, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True):
    """QR of a [..., m, n]: mode 'full' (q [..., m, m], r [..., m, n]), 'economic' (q
    [..., m, k], r [..., k, n]), 'r' ((r,) full) or 'raw' (not in JAX; SciPy's ((h, tau), r):
    LAPACK's Householder form h [..., m, n], tau [..., k], r economic). pivoting adds the
    column permutation p [..., n] (a[..., :, p] = q r)."""
    del overwrite_a, lwork, check_finite
    if mode not in ("full", "r", "economic", "raw"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}' (use 'full', "
                         "'economic', 'r' or 'raw')")
    a, = _inexact(a)
    if a.ndim < 2:
        raise ValueError(f"qr: a must be a matrix or a batch of matrices [..., m, n], got "
                         f"shape {a.shape}")
    q, r, *p = dec.qr(a, pivoting=bool(pivoting),
                      full_matrices=mode in ("full", "r"))
    if mode == "raw":
        ap = jnp.take_along_axis(a, jnp.broadcast_to(p[0][..., None, :], a.shape),
                                 axis=-1) if pivoting else a
        h, tau = dec.geqrf(ap)
        return ((h, tau), r, p[0]) if pivoting else ((h, tau), r)
    if mode == "r":
        return (r, p[0]) if pivoting else (r,)
    return (q, r, p[0]) if pivoting else (q, r)


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
    """(Q c or c Q, r [..., k, n]) with Q the thin Q [..., m, k] of a [..., m, n]: mode
    'left' Q @ c (c [..., k, p] or [k]), 'right' c @ Q (c [..., p, m] or [m]); conjugate
    uses conj(Q); pivoting adds p."""
    del overwrite_a, overwrite_c
    a, c = _inexact(a, c)
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    if a.ndim < 2:
        raise ValueError(f"qr_multiply: a must be a matrix or a batch of matrices, got shape "
                         f"{a.shape}")
    if c.ndim == 0:
        raise ValueError("qr_multiply: c must be at least 1-dimensional, got a scalar")
    onedim = c.ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                         f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} "
                         f"rows (expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                         f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} "
                         f"columns (expected {m}).")
    q, r, *p = dec.qr(a, pivoting=bool(pivoting), full_matrices=False)    # q [..., m, k]
    if conjugate:
        q = jnp.conj(q)
    cq = _mm(q, c) if mode == "left" else _mm(c, q)
    if onedim:
        cq = cq.ravel()
    return (cq, r, p[0]) if pivoting else (cq, r)


# ---- eigh / eigh_tridiagonal ---------------------------------------------------------------
def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,
         check_finite: bool = True):
    """(w [..., n] ascending, v [..., n, n]) of Hermitian a (symmetrized, as JAX), or w
    alone with eigvals_only. With b (Hermitian positive definite; JAX has no b): the
    generalized problem of `type` 1 (a v = w b v), 2 (a b v = w v) or 3 (b a v = w v), v
    normalized as SciPy's (vᴴ b v = I; vᴴ b⁻¹ v = I for type 3). eigvals (lo, hi) keeps the
    eigenpairs lo..hi inclusive (JAX: unsupported)."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if type not in (1, 2, 3):
        raise ValueError(f"eigh: type must be 1, 2 or 3, got {type!r}")
    a, = _inexact(a)
    _square("eigh", a)
    subset = None
    if eigvals is not None:
        lo, hi = (operator.index(i) for i in eigvals)
        subset = (lo, hi + 1)
    if b is None:
        if type != 1:
            raise ValueError("eigh: type 2 and 3 need b (the generalized problem)")
        v, w = dec.eigh(a, lower=bool(lower), subset_by_index=subset)
        return w if eigvals_only else (w, v)
    a, b = _inexact(a, b)
    _square("eigh", b, "b")
    if b.shape[-1] != a.shape[-1]:
        raise ValueError(f"eigh: a {a.shape} and b {b.shape} must have the same size")
    L = dec.cholesky(b)                                                    # b = L Lᴴ
    if type == 1:                                                          # C = L⁻¹ A L⁻ᴴ
        y = dec.triangular_solve(L, a, left_side=True, lower=True)
        c = _H(dec.triangular_solve(L, _H(y), left_side=True, lower=True))
    else:                                                                  # C = Lᴴ A L
        c = _mm(_H(L), _mm(a, L))
    v, w = dec.eigh(c, lower=bool(lower), subset_by_index=subset)
    if eigvals_only:
        return w
    if type == 3:
        v = _mm(L, v)
    else:
        v = dec.triangular_solve(L, v, left_side=True, lower=True, transpose_a=True,
                                 conjugate_a=True)                         # L⁻ᴴ V
    return w, v


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None):
    """Eigenvalues (ascending) and eigenvectors [n, k] (columns) of the Hermitian
    tridiagonal matrix with diagonal d [n] and superdiagonal e [n-1] (subdiagonal conj(e)).
    select 'a' (all) or 'i' (indices select_range, inclusive). Computed by a dense eigh
    (JAX: bisection and inverse iteration); tol and key are accepted and unused."""
    del tol, key
    d, e = jnp.asarray(d), jnp.asarray(e)
    ok = (np.float32, np.float64, np.complex64, np.complex128)
    if d.dtype != e.dtype:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got "
                        f"{d.dtype} and {e.dtype}")
    if d.dtype not in ok:
        raise TypeError(f"Only float32, float64, complex64 and complex128 inputs are "
                        f"supported as inputs to eigh_tridiagonal, got {d.dtype}")
    if d.ndim != 1 or e.ndim != 1 or e.shape[0] != max(d.shape[0] - 1, 0):
        raise ValueError(f"eigh_tridiagonal: d must be [n] and e [n-1], got {d.shape} and "
                         f"{e.shape}")
    n = d.shape[0]
    if select == "a":
        start, end = 0, n
    elif select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        start, end = int(select_range[0]), int(select_range[1]) + 1
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    else:
        raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
    if n <= 1:
        return jnp.real(d) if eigvals_only else (jnp.real(d), jnp.eye(n, dtype=d.dtype))
    t = (jnp.diag(jnp.real(d).astype(d.dtype)) + jnp.diag(e, 1)
         + jnp.diag(jnp.conj(e), -1))                                      # [n, n]
    v, w = dec.eigh(t, subset_by_index=(start, end))
    return w if eigvals_only else (w, v)


# ---- hessenberg ------------------------------------------------------------------------
def _householder(alpha, x):
    """LAPACK's xLARFG: (tau, v [k] with v[0] = 1, beta) with (I - tau v vᴴ)ᴴ [alpha; x] =
    [beta; 0], beta = -sign(Re alpha) ‖[alpha; x]‖ real; tau = 0 (no reflection) where
    x = 0 and alpha is real."""
    xnorm2 = jnp.sum(jnp.real(x * jnp.conj(x)))
    skip = (xnorm2 == 0) & (jnp.imag(alpha) == 0)
    norm = jnp.sqrt(jnp.real(alpha * jnp.conj(alpha)) + xnorm2)
    beta = jnp.where(jnp.real(alpha) >= 0, -norm, norm)
    safe_beta = jnp.where(skip, 1, beta).astype(alpha.dtype)
    tau = jnp.where(skip, 0, (safe_beta - alpha) / safe_beta)
    v = jnp.concatenate([jnp.ones((1,), x.dtype),
                         x / jnp.where(skip, 1, alpha - safe_beta)])
    return tau, v, jnp.where(skip, alpha, safe_beta)


def _hessenberg_2d(a, calc_q: bool, packed: bool = False):
    """H (and Q with calc_q) of a [n, n]; packed: xGEHRD's (a, taus [n-1]) instead, the
    reflectors' tails v[1:] kept below H's first subdiagonal (lax.linalg.hessenberg)."""
    n = a.shape[0]
    q = jnp.eye(n, dtype=a.dtype)
    taus, tails = [], []
    for i in range(n - 1):               # A <- H_iᴴ A H_i, H_i = I - τ v vᴴ (the last: a phase)
        tau, v, beta = _householder(a[i + 1, i], a[i + 2:, i])
        taus.append(tau)
        v = v[:, None]                                                     # [k, 1]
        rows = a[i + 1:, :]                                                # [k, n]
        rows = rows - jnp.conj(tau) * _mm(v, _mm(_H(v), rows))             # H_iᴴ from the left
        a = a.at[i + 1:, :].set(rows)
        cols = a[:, i + 1:]                                                # [n, k]
        a = a.at[:, i + 1:].set(cols - tau * _mm(_mm(cols, v), _H(v)))    # H_i from the right
        a = a.at[i + 2:, i].set(0).at[i + 1, i].set(beta)
        tails.append(v[1:, 0])
        if calc_q:
            qc = q[:, i + 1:]
            q = q.at[:, i + 1:].set(qc - tau * _mm(_mm(qc, v), _H(v)))     # Q H_i
    if packed:                           # the tails once H is done (later steps would mix them)
        for i, tail in enumerate(tails):
            a = a.at[i + 2:, i].set(tail)
        return a, (jnp.stack(taus) if taus else jnp.zeros((0,), a.dtype))
    return (a, q) if calc_q else a


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
    """The upper Hessenberg form h = Qᴴ a Q of square a [..., n, n] (and Q with calc_q), by
    LAPACK's Householder reflections (xGEHRD's conventions: the same h and Q as JAX's).
    Computed with fnad.numpy operations, so it is also differentiable (JAX's is not)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    _square("hessenberg", a)
    if calc_q:
        fun = jnp.vectorize(partial(_hessenberg_2d, calc_q=True),
                            signature="(n,n)->(n,n),(n,n)")
    else:
        fun = jnp.vectorize(partial(_hessenberg_2d, calc_q=False), signature="(n,n)->(n,n)")
    return fun(a)


# ---- polar --------------------------------------------------------------------------------
def _polar_2d(a, side: str):
    u, s, vh = dec.svd(a, full_matrices=False)                             # [m,k] [k] [k,n]
    s = s.astype(u.dtype)
    unitary = _mm(u, vh)                                                   # [m, n]
    if side == "right":
        return unitary, _mm(_H(vh) * s[None, :], vh)                       # [n, n]
    return unitary, _mm(u * s[None, :], _H(u))                             # [m, m]


def polar(a, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Array, Array]:
    """(u, p) with a = u p (side 'right', p [..., n, n]) or a = p u ('left', p [..., m, m])
    for a [..., m, n]: u has orthonormal columns (rows), p Hermitian positive semi-definite.
    Both methods are computed from the SVD (JAX's 'qdwh' iterates; its shape limits are
    kept: 'right' needs m >= n, 'left' m < n)."""
    del eps, max_iterations
    a, = _inexact(a)
    if a.ndim < 2:
        raise ValueError("The input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ValueError("The argument `side` must be either 'right' or 'left'.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method}.")
    m, n = a.shape[-2:]
    if method == "qdwh" and not ((m >= n and side == "right") or (m < n and side == "left")):
        raise NotImplementedError("method='qdwh' only supports mxn matrices where m < n "
                                  "where side='right' and m >= n side='left', got "
                                  f"{a.shape} with side={side!r}")
    sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
    return jnp.vectorize(partial(_polar_2d, side=side), signature=sig)(a)


# ---- expm / expm_frechet -------------------------------------------------------------------
def _pade_u_v(A, b):
    """U (odd part) and V (even part) of the degree-m Padé approximant with coefficients b
    (m = len(b) - 1 in 3, 5, 7, 9): U = A Σ b[2j+1] A^2j, V = Σ b[2j] A^2j (summed from the
    highest power down, as JAX)."""
    ident = jnp.eye(A.shape[0], dtype=A.dtype)
    A2 = _mm(A, A)
    powers = [ident, A2]                                                   # A⁰, A², A⁴, ...
    while len(powers) < len(b) // 2:
        powers.append(_mm(powers[-1], A2))
    top = range(len(b) // 2 - 1, -1, -1)
    U = _mm(A, sum(b[2 * j + 1] * powers[j] for j in top))
    V = sum(b[2 * j] * powers[j] for j in top)
    return U, V


_PADE = {3: (120., 60., 12., 1.),
         5: (30240., 15120., 3360., 420., 30., 1.),
         7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
         9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
             3960., 90., 1.)}
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


def _pade13(A):                      # Higham's evaluation: A⁶ factored out of the high terms
    b = _PADE13
    ident = jnp.eye(A.shape[0], dtype=A.dtype)
    A2 = _mm(A, A)
    A4 = _mm(A2, A2)
    A6 = _mm(A4, A2)
    U = _mm(A, _mm(A6, b[13] * A6 + b[11] * A4 + b[9] * A2)
            + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
    V = (_mm(A6, b[12] * A6 + b[10] * A4 + b[8] * A2)
         + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident)
    return U, V


def _pade_branch(m: int):
    return _pade13 if m == 13 else partial(_pade_u_v, b=_PADE[m])


def _calc_p_q(A):
    """(p_m(A/2^s), q_m(A/2^s), s) with m and s from ‖A‖₁ (JAX's thresholds)."""
    A_L1 = jnp_linalg.norm(A, 1)
    if A.dtype in (np.float64, np.complex128):
        maxnorm = 5.371920351148152
        conds = [1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                 2.097847961257068e+000]
        degrees = (3, 5, 7, 9, 13)
    else:
        maxnorm = 3.925724783138660
        conds = [4.258730016922831e-001, 1.880152677804762e+000]
        degrees = (3, 5, 7)
    n_squarings = jnp.maximum(0, jnp.floor(jnp.log2(A_L1 / maxnorm)))
    A = A / (2 ** n_squarings).astype(A.dtype)
    idx = jnp.digitize(A_L1, jnp.array(conds, dtype=A_L1.dtype))
    U, V = lax.switch(idx, [_pade_branch(m) for m in degrees], A)
    return U + V, -U + V, n_squarings                                      # p_m, q_m, s


def _squaring(R, n_squarings, max_squarings: int):
    def step(c, i):
        return lax.cond(i < n_squarings, lambda x: _mm(x, x), lambda x: x, c), None
    res, _ = lax.scan(step, R, jnp.arange(max_squarings, dtype=n_squarings.dtype))
    return res


def _expm_2d(A, upper_triangular: bool, max_squarings: int):
    P, Q, n_squarings = _calc_p_q(A)

    def nan(args):
        return jnp.full_like(args[0], np.nan)

    def compute(args):
        _, P, Q = args
        if upper_triangular:
            R = dec.triangular_solve(Q, P, left_side=True, lower=False)   # q_m⁻¹ p_m
        else:
            R = jnp_linalg.solve(Q, P)
        return _squaring(R, n_squarings, max_squarings)
    return lax.cond(n_squarings > max_squarings, nan, compute, (A, P, Q))


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16) -> Array:
    """exp(A) for square A [..., n, n] (scaling and squaring with a Padé approximant, as
    JAX); NaN where more than max_squarings squarings would be needed. upper_triangular:
    A is upper triangular (a triangular solve instead of LU)."""
    A, = _inexact(A)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape}.")
    max_squarings = operator.index(max_squarings)
    fun = partial(_expm_2d, upper_triangular=bool(upper_triangular),
                  max_squarings=max_squarings)
    return jnp.vectorize(fun, signature="(n,n)->(n,n)")(A)


def expm_frechet(A, E, *, method: str | None = None, compute_expm: bool = True):
    """(expm(A), L(A, E)) or L(A, E) alone: the Fréchet derivative of expm at A in the
    direction E (the JVP of expm). A and E [..., n, n], the same shape."""
    del method
    A, E = jnp.asarray(A), jnp.asarray(E)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={A.shape}")
    if E.ndim < 2 or E.shape[-1] != E.shape[-2]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={E.shape}")
    if A.shape != E.shape:
        raise ValueError(f"expected A and E to be the same shape, got A.shape={A.shape} "
                         f"E.shape={E.shape}")
    A, = _inexact(A)
    E = E.astype(A.dtype)
    expm_A, frechet = jvp(partial(expm, upper_triangular=False, max_squarings=16), (A,), (E,))
    return (expm_A, frechet) if compute_expm else frechet


# ---- block_diag and the special matrices --------------------------------------------------
def block_diag(*arrs) -> Array:
    """The block-diagonal matrix of the arguments (scalars, vectors as [1, n], matrices)."""
    if len(arrs) == 0:
        arrs = (jnp.zeros((1, 0)),)
    arrs = tuple(promote_dtypes(*(jnp.asarray(a) for a in arrs)))
    bad = [i for i, a in enumerate(arrs) if a.ndim > 2]
    if bad:
        raise ValueError(f"Arguments to block_diag must have at most 2 dimensions, got "
                         f"shape {arrs[bad[0]].shape} at argument {bad[0]}.")
    mats = [jnp.atleast_2d(a) for a in arrs]
    total = sum(a.shape[1] for a in mats)
    rows, col = [], 0
    for a in mats:
        rows.append(jnp.pad(a, ((0, 0), (col, total - col - a.shape[1]))))
        col += a.shape[1]
    return jnp.concatenate(rows, axis=0)


def _toeplitz(c, r):                                                       # [m], [n] -> [m, n]
    m, n = c.shape[0], r.shape[0]
    elems = jnp.concatenate((c[::-1], r[1:]))                              # [m + n - 1]
    idx = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]          # T[i,j] = c[i-j]|r[j-i]
    return elems[idx]


def toeplitz(c, r=None) -> Array:
    """The Toeplitz matrix [..., m, n] with first column c [..., m] and first row r
    [..., n] (r[0] ignored); r defaults to conj(c). Batch dims broadcast."""
    check_arraylike("toeplitz", c, *(() if r is None else (r,)))
    c = jnp.asarray(c)
    r = jnp.conj(c) if r is None else jnp.asarray(r)
    c, r = promote_dtypes(jnp.atleast_1d(c), jnp.atleast_1d(r))
    if c.shape[-1] == 0 or r.shape[-1] == 0:
        batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
        return jnp.zeros(batch + (c.shape[-1], r.shape[-1]), dtype=c.dtype)
    return jnp.vectorize(_toeplitz, signature="(m),(n)->(m,n)")(c, r)


def _hankel(c, r):                                                         # H[i, j] = v[i + j]
    m, n = c.shape[0], r.shape[0]
    v = jnp.concatenate((c, r[1:]))
    return v[np.arange(m)[:, None] + np.arange(n)[None, :]]


def hankel(c, r=None) -> Array:
    """The Hankel matrix [..., m, n] with first column c and last row r (r[0] ignored);
    r defaults to zeros. Batch dims broadcast."""
    check_arraylike("hankel", c, *(() if r is None else (r,)))
    c = jnp.asarray(c)
    r = jnp.zeros_like(c) if r is None else jnp.asarray(r)
    if c.ndim == 0:
        raise ValueError("hankel: c must be at least 1-dimensional, got a scalar.")
    if r.ndim == 0:
        raise ValueError("hankel: r must be at least 1-dimensional, got a scalar.")
    c, r = promote_dtypes(c, r)
    if c.shape[-1] == 0 or r.shape[-1] == 0:
        batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
        return jnp.zeros(batch + (c.shape[-1], r.shape[-1]), dtype=c.dtype)
    return jnp.vectorize(_hankel, signature="(m),(n)->(m,n)")(c, r)


def circulant(c) -> Array:
    """The circulant matrix [..., n, n] with first column c [..., n]: C[i, j] = c[(i-j) % n]."""
    check_arraylike("circulant", c)
    c = jnp.atleast_1d(jnp.asarray(c))
    n = c.shape[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return c[..., idx]


def leslie(f, s) -> Array:
    """The Leslie matrix [..., n, n]: fecundities f [..., n] in the first row, survival
    rates s [..., n-1] on the subdiagonal."""
    f, s = jnp.atleast_1d(jnp.asarray(f)), jnp.atleast_1d(jnp.asarray(s))
    if f.shape[-1] < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape "
                         f"{f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError(f"Incorrect lengths for f and s. The length of s along the last "
                         f"axis must be one less than the length of f; got f shape {f.shape} "
                         f"and s shape {s.shape}.")
    f, s = promote_dtypes(f, s)
    return jnp.vectorize(lambda f, s: jnp.diag(s, k=-1).at[0].set(f),
                         signature="(n),(m)->(n,n)")(f, s)


def companion(a) -> Array:
    """The companion matrix [..., n-1, n-1] of the polynomial coefficients a [..., n]
    (highest degree first): first row -a[1:]/a[0], ones on the subdiagonal."""
    check_arraylike("companion", a)
    a, = _inexact(a)
    a = jnp.atleast_1d(a)
    if a.shape[-1] < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got "
                         f"shape {a.shape}.")

    def one(a):
        first_row = -a[1:] / a[0]
        m = a.shape[0] - 1
        return jnp.eye(m, m, k=-1, dtype=first_row.dtype).at[0].set(first_row)
    return jnp.vectorize(one, signature="(n)->(m,m)")(a)


def fiedler(a) -> Array:
    """The Fiedler matrix |a[i] - a[j]| [..., n, n] of a [..., n]."""
    check_arraylike("fiedler", a)
    a = jnp.atleast_1d(jnp.asarray(a))
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a) -> Array:
    """Fiedler's pentadiagonal companion matrix [..., n-1, n-1] of the polynomial
    coefficients a [..., n] (highest degree first)."""
    check_arraylike("fiedler_companion", a)
    a, = _inexact(a)
    a = jnp.atleast_1d(a)
    if a.shape[-1] == 0:
        raise ValueError(f"fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    n = a.shape[-1] - 1
    if n == 0:
        return jnp.zeros(a.shape[:-1] + (0, 0), dtype=a.dtype)
    a = a / a[..., :1]
    if n == 1:
        return -a[..., 1:, None]
    # (row, col, coefficient index or None for 1): SciPy's layout
    entries = [(0, 0, 1), (1, 0, None)]
    for i in range(n):
        if i % 2 == 0:
            if i + 1 < n:
                entries.append((i, i + 1, i + 2))
            if i + 2 < n:
                entries.append((i, i + 2, None))
            if i >= 2:
                entries.append((i, i - 1, i + 1))
        elif i >= 3:
            entries.append((i, i - 2, None))
    out = jnp.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)
    for i, j, k in entries:
        out = out.at[..., i, j].set(1 if k is None else -a[..., k])
    return out


def convolution_matrix(a, n: int, mode: str = "full") -> Array:
    """The Toeplitz matrix A with A @ v = convolve(a, v, mode) for v [n]; a [..., m]."""
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    a = jnp.asarray(a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    pad = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
    az = jnp.pad(a, pad)
    raz = jnp.pad(jnp.flip(a, axis=-1), pad)
    L = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        tb, te = trim // 2, trim - trim // 2
    elif mode == "valid":
        tb = te = min(n, m) - 1
    else:
        tb = te = 0
    return toeplitz(az[..., tb:L - te], raz[..., L - n - tb:L - tb])


def _size(name: str, n) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be a static integer, got {n!r}") from None
    if n < 0:
        raise ValueError(f"{name}: n must be non-negative, got {n}")
    return n


def _default_float():
    return dtypes.canonicalize_dtype(np.float64)


def hilbert(n: int) -> Array:
    """The Hilbert matrix 1 / (i + j + 1) [n, n] (default float dtype)."""
    n = _size("hilbert", n)
    i = np.arange(n, dtype=np.float64)
    return jnp.asarray(1.0 / (i[:, None] + i[None, :] + 1), dtype=_default_float())


def invhilbert(n: int) -> Array:
    """The exact inverse of hilbert(n) (integers, computed exactly, in the default float
    dtype)."""
    n = _size("invhilbert", n)
    out = np.zeros((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            s = i + j
            out[i, j] = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1)
                         * math.comb(n + j, n - i - 1) * math.comb(s, i) ** 2)
    return jnp.asarray(out.astype(np.float64), dtype=_default_float())


def _pascal_lower(n: int, inverse: bool):
    out = np.zeros((n, n), dtype=object)
    for i in range(n):
        for j in range(i + 1):
            out[i, j] = math.comb(i, j) * ((-1) ** (i - j) if inverse else 1)
    return out


def _kind(kind):
    kind = "symmetric" if kind is None else kind
    valid = ["symmetric", "lower", "upper"]
    if kind not in valid:
        raise ValueError(f"Expected kind to be one of: {valid}; got {kind}")
    return kind


def pascal(n: int, kind: str | None = None) -> Array:
    """The Pascal matrix [n, n]: binomials C(i + j, i) ('symmetric'), lower L[i, j] =
    C(i, j) or its transpose ('upper'); float32 as JAX's (exact here)."""
    kind, n = _kind(kind), _size("pascal", n)
    L = _pascal_lower(n, False)
    out = {"lower": L, "upper": L.T, "symmetric": L.dot(L.T) if n else L}[kind]
    return jnp.asarray(out.astype(np.float64), dtype=np.float32)


def invpascal(n: int, kind: str | None = None) -> Array:
    """The inverse of pascal(n, kind), exact, in the default float dtype."""
    kind, n = _kind(kind), _size("invpascal", n)
    L = _pascal_lower(n, True)
    out = {"lower": L, "upper": L.T, "symmetric": L.T.dot(L) if n else L}[kind]
    return jnp.asarray(out.astype(np.float64), dtype=_default_float())


def helmert(n: int, full: bool = False) -> Array:
    """The Helmert matrix [n-1, n] (or [n, n] with full, whose first row is 1/√n)."""
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    H = np.zeros((n - 1, n))
    for i in range(n - 1):
        k = i + 1
        H[i, :k] = 1.0 / np.sqrt(k * (k + 1))
        H[i, k] = -k / np.sqrt(k * (k + 1))
    if full:
        H = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), H], axis=0)
    return jnp.asarray(H, dtype=_default_float())


def hadamard(n: int, dtype=int) -> Array:
    """The Sylvester-Hadamard matrix [n, n] of ±1, n a power of 2."""
    n = operator.index(n)
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    H = np.ones((1, 1), dtype=np.int64)
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return jnp.asarray(H, dtype=dtype)


def dft(n: int, scale: str | None = None, *, dtype=None) -> Array:
    """The DFT matrix exp(-2πi jk / n) [n, n], scaled by 1/√n ('sqrtn') or 1/n ('n')."""
    n = operator.index(n)
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = dtypes.canonicalize_dtype(np.complex128)
    elif not np.issubdtype(np.dtype(dtype), np.complexfloating):
        raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
    k = np.arange(n)
    w = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "sqrtn":
        w = w / np.sqrt(n)
    elif scale == "n":
        w = w / n
    return jnp.asarray(w, dtype=dtype)

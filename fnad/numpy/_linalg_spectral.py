"""fnad.numpy.linalg's functions built on qr, eigh, svd and eig (primitives/decompositions.py):
qr, eigh, eigvalsh, eig, eigvals, svd, svdvals, pinv, lstsq, matrix_rank, cond, slogdet's
method 'qr', and the matrix norms of order 2, -2 and 'nuc'. linalg.py re-exports them.

Math (as JAX):
  svd(hermitian=True)  from A = V diag(w) Vᴴ: s = |w| sorted descending, u = V's columns in
                       that order, vh = (u · sign(w))ᴴ
  pinv    A⁺ = V diag(1/s) Uᴴ over the s > rtol·s_max (the others dropped); its custom JVP
          (Golub & Pereyra 1973): dA⁺ = -A⁺ dA A⁺ + A⁺A⁺ᴴ dAᴴ (I - A A⁺) + (I - A⁺A) dAᴴ A⁺ᴴ A⁺
  lstsq   x = V diag(1/s) Uᴴ b over the s >= rcond·s_max, s > 0; resid = |b - A x|² per column
  rank    #{s > rtol·s_max}, rtol = max(m, n)·eps by default
  cond    s_max / s_min (p None, 2); else ‖A‖_p ‖A⁻¹‖_p (NaN -> inf where A has no NaN)
  slogdet(method='qr')  A = Q R by Householder: sign = Π sign(Rᵢᵢ) · (-1)^(reflections
          made), log|det| = Σ log|Rᵢᵢ|; d log|det A| = tr(A⁻¹ dA) (a custom JVP: geqrf has
          no derivative)
Derivatives otherwise come from the primitives' rules (eigh's and svd's are infinite at
repeated eigenvalues / singular values, as JAX's).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.core import Array
from fnad.custom import custom_jvp
from fnad.numpy._core import check_arraylike, promote_dtypes_inexact
from fnad.primitives import decompositions as dec

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "cond", "eig", "eigh",
           "eigvals", "eigvalsh", "lstsq", "matrix_rank", "pinv", "qr", "svd", "svdvals"]


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _inexact(name: str, *args):
    """args as inexact arrays; a TypeError naming `name` for lists (as jax)."""
    check_arraylike(f"fnad.numpy.linalg.{name}", *args)
    return promote_dtypes_inexact(*(jnp.asarray(a) for a in args))


def _matrix(name: str, a) -> None:
    if a.ndim < 2:
        raise ValueError(f"{name}: argument must be a matrix or a batch of matrices with shape "
                         f"[..., m, n], got shape {a.shape}")


def _H(x):
    return jnp.conj(jnp.matrix_transpose(x))


def _mm(a, b):
    return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


# ---- qr --------------------------------------------------------------------------------
def qr(a, mode: str = "reduced"):
    """QR of a [..., m, n], as jnp.linalg.qr. mode 'reduced' (or 'full', as jax): (Q [..., m,
    k], R [..., k, n]), k = min(m, n); 'complete': (Q [..., m, m], R [..., m, n]); 'r': R
    alone (reduced); 'raw': LAPACK's Householder form (h [..., n, m], tau [..., k]), as
    numpy and jax, which has no derivative."""
    a, = _inexact("qr", a)
    _matrix("qr", a)
    if mode == "raw":
        h, taus = dec.geqrf(a)
        return QRResult(jnp.matrix_transpose(h), taus)
    if mode in ("reduced", "r", "full"):
        full_matrices = False
    elif mode == "complete":
        full_matrices = True
    else:
        raise ValueError(f"Unsupported QR decomposition mode '{mode}' (use 'reduced', "
                         "'complete', 'r' or 'raw')")
    q, r = dec.qr(a, full_matrices=full_matrices)
    return r if mode == "r" else QRResult(q, r)


# ---- eigh / eigvalsh ----------------------------------------------------------------------
def _lower(uplo) -> bool:
    if uplo is None or uplo == "L":
        return True
    if uplo == "U":
        return False
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {uplo!r}")


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """(eigenvalues [..., n] ascending, eigenvectors [..., n, n] in columns) of Hermitian a
    [..., n, n]. With symmetrize_input, a is replaced by (a + aᴴ)/2 (better derivatives);
    otherwise only its UPLO triangle ('L' or 'U') is read."""
    lower = _lower(UPLO)
    a, = _inexact("eigh", a)
    v, w = dec.eigh(a, lower=lower, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """The eigenvalues [..., n] (ascending) of Hermitian a [..., n, n]."""
    check_arraylike("fnad.numpy.linalg.eigvalsh", a)
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


# ---- eig / eigvals (general square matrices) -------------------------------------------------
def eig(a) -> EigResult:
    """(eigenvalues [..., n], right eigenvectors [..., n, n] in columns) of a [..., n, n],
    both complex (complex64 for 32-bit input, as jax), each vector of norm 1 (LAPACK's
    geev). Like jax's, not differentiable (its eigenvectors' derivative needs
    lax.linalg.eig(..., enable_eigvec_derivs=True)); eigvals is."""
    a, = _inexact("eig", a)
    w, v = dec.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a) -> Array:
    """The eigenvalues [..., n] (complex) of a [..., n, n]; differentiable."""
    a, = _inexact("eigvals", a)
    return dec.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


# ---- svd / svdvals ------------------------------------------------------------------------
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: tuple[int, int] | None = None):
    """SVDResult(U, S, Vh) with a = U diag(S) Vh, or S alone without compute_uv, for
    a [..., m, n]: S [..., k] descending, k = min(m, n); U [..., m, m] and Vh [..., n, n]
    with full_matrices, else [..., m, k] and [..., k, n]. hermitian: from eigh of a
    (symmetrized), as jax."""
    a, = _inexact("svd", a)
    if hermitian:
        v, w = dec.eigh(a, subset_by_index=subset_by_index)
        s = jnp.abs(w)                                                       # [..., k]
        if not compute_uv:
            return jnp.flip(jnp.sort(s, axis=-1), axis=-1)
        idx = jnp.flip(jnp.argsort(s, axis=-1, stable=True), axis=-1)        # descending
        s = jnp.take_along_axis(s, idx, axis=-1)
        sign = jnp.take_along_axis(jnp.sign(w), idx, axis=-1)
        u = jnp.take_along_axis(v, idx[..., None, :], axis=-1)               # [..., n, k]
        return SVDResult(u, s, _H(u * sign[..., None, :].astype(u.dtype)))
    if compute_uv:
        return SVDResult(*dec.svd(a, full_matrices=full_matrices, compute_uv=True,
                                  subset_by_index=subset_by_index))
    return dec.svd(a, full_matrices=full_matrices, compute_uv=False,
                   subset_by_index=subset_by_index)


def svdvals(x, /) -> Array:
    """The singular values [..., k] of x [..., m, n], descending."""
    check_arraylike("fnad.numpy.linalg.svdvals", x)
    return svd(x, compute_uv=False, hermitian=False)


# ---- pinv -----------------------------------------------------------------------------------
def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None) -> Array:
    """The Moore-Penrose pseudo-inverse [..., n, m] of a [..., m, n]: singular values at or
    below rtol·s_max dropped (rtol: a scalar or [...]; default 10·max(m, n)·eps, as jax;
    rcond is its old name). Differentiable with jax's custom JVP."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    check_arraylike("fnad.numpy.linalg.pinv", a)
    return _pinv(a, rtol, bool(hermitian))


def _pinv_value(a, rtol, hermitian):
    a, = _inexact("pinv", a)
    _matrix("pinv", a)
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return jnp.empty(a.shape[:-2] + (n, m), a.dtype)
    arr = jnp.conj(a)
    if rtol is None:
        rtol = 10. * max(m, n) * jnp.array(jnp.finfo(arr.dtype).eps)
    rtol = jnp.asarray(rtol)
    u, s, vh = svd(arr, full_matrices=False, hermitian=hermitian)
    rtol = jnp.expand_dims(rtol[..., None], tuple(range(s.ndim - rtol.ndim - 1)))
    cutoff = rtol * s[..., 0:1]
    s = jnp.where(s > cutoff, s, np.inf).astype(u.dtype)                     # 1/inf = 0
    res = _mm(jnp.matrix_transpose(vh), jnp.divide(jnp.matrix_transpose(u), s[..., None]))
    return res.astype(arr.dtype)


_pinv = custom_jvp(_pinv_value, nondiff_argnums=(1, 2))


@_pinv.defjvp
def _pinv_jvp(rtol, hermitian, primals, tangents):     # Golub & Pereyra, see the docstring
    (a,), (a_dot,) = primals, tangents
    a, a_dot = _inexact("pinv", a, a_dot)
    p = _pinv(a, rtol, hermitian)                                            # [..., n, m]
    if hermitian:                                      # svd(hermitian) symmetrizes its input
        a, a_dot = (a + _H(a)) / 2, (a_dot + _H(a_dot)) / 2
    m, n = a.shape[-2:]
    if m >= n:
        s = _mm(_mm(p, _H(p)), _H(a_dot))                                    # [..., n, m]
        t = _mm(_mm(_H(a_dot), _H(p)), p)
        p_dot = -_mm(_mm(p, a_dot), p) + s - _mm(_mm(s, a), p) + t - _mm(_mm(p, a), t)
    else:
        s = _mm(p, _mm(_H(p), _H(a_dot)))
        t = _mm(_H(a_dot), _mm(_H(p), p))
        p_dot = -_mm(p, _mm(a_dot, p)) + s - _mm(s, _mm(a, p)) + t - _mm(p, _mm(a, t))
    return p, p_dot


# ---- lstsq -----------------------------------------------------------------------------------
def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """(x, resid, rank, s): the least-squares x [n] / [n, k] of a [m, n] x = b [m] / [m, k]
    from a's SVD, singular values below rcond·s_max (default eps·max(m, n)) dropped;
    resid = Σ|b - a x|² per column (always, as jax; numpy_resid=True: empty where NumPy
    gives none, i.e. rank < n or m <= n), rank, and a's singular values."""
    a, b = _inexact("lstsq", a, b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"Leading dimensions of input arrays must match, got a {a.shape} and "
                         f"b {b.shape}")
    b_orig_ndim = b.ndim
    if b_orig_ndim == 1:
        b = b[:, None]
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim != 2:
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = a.shape
    dtype = a.dtype
    if a.size == 0:
        s = jnp.empty(0, dtype=a.dtype)
        rank = jnp.array(0, dtype=int)
        x = jnp.zeros((n, *b.shape[1:]), dtype=a.dtype)
    else:
        eps = float(jnp.finfo(dtype).eps)
        rcond = eps * max(n, m) if rcond is None else jnp.where(rcond < 0, eps, rcond)
        u, s, vt = dec.svd(a, full_matrices=False)
        mask = (s > 0) & (s >= jnp.array(rcond, dtype=s.dtype) * s[0])
        rank = mask.sum()
        safe_s = jnp.where(mask, s, 1).astype(a.dtype)
        s_inv = jnp.where(mask, 1 / safe_s, 0)[:, None]                     # [k, 1]
        utb = _mm(jnp.conj(u).T, b)                                          # [k, K]
        x = _mm(jnp.conj(vt).T, s_inv * utb)                                 # [n, K]
    if numpy_resid and (rank < n or m <= n):
        resid = jnp.asarray([])
    else:
        resid = jnp.linalg.norm(b - _mm(a, x), axis=0) ** 2
    if b_orig_ndim == 1:
        x = x.ravel()
    return x, resid, rank, s


# ---- matrix_rank / cond --------------------------------------------------------------------
def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None) -> Array:
    """The number of singular values of M [..., m, n] above rtol·s_max (default
    max(m, n)·eps; tol is its old name), an int32 [...]; a vector or scalar: 1 unless all 0."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    M, = _inexact("matrix_rank", M)
    if M.ndim < 2:
        return (M != 0).any().astype(np.int32)
    S = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = S.max(-1) * np.array(max(M.shape[-2:]), S.dtype) * jnp.finfo(S.dtype).eps
    rtol = jnp.expand_dims(rtol, np.ndim(rtol))
    return jnp.sum(S > rtol, axis=-1)


def cond(x, p=None) -> Array:
    """The condition number [...] of x [..., m, n] in the norm p (None = 2: s_max/s_min;
    -2: s_min/s_max; 1, -1, inf, -inf, 'fro': ‖x‖‖x⁻¹‖, square x only)."""
    from fnad.numpy.linalg import inv, norm
    check_arraylike("fnad.numpy.linalg.cond", x)
    arr = jnp.asarray(x)
    if arr.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got "
                         f"arr.shape={arr.shape}")
    if arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"jnp.linalg.cond: input array must not be empty; got "
                         f"arr.shape={arr.shape}")
    if p is None or p == 2:
        s = svdvals(x)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svdvals(x)
        r = s[..., -1] / s[..., 0]
    else:
        if arr.shape[-2] != arr.shape[-1]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got "
                             f"arr.shape={arr.shape}")
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    # NaNs (from a singular x) become inf, except where x itself holds a NaN
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(arr).any(axis=(-2, -1)), np.inf, r)


# ---- matrix norms from singular values, slogdet by QR ---------------------------------------
def singular_value_norm(x, ord, axis: tuple[int, int], keepdims: bool) -> Array:
    """The matrix norm ord 2 (s_max), -2 (s_min) or 'nuc' (Σ s) over the two `axis`."""
    s = svd(jnp.moveaxis(x, axis, (-2, -1)), compute_uv=False)
    if ord == 2:
        y = jnp.max(s, axis=-1, initial=0)
    elif ord == -2:
        y = jnp.min(s, axis=-1)
    else:
        y = jnp.sum(s, axis=-1)
    return jnp.expand_dims(y, axis) if keepdims else y


@custom_jvp
def slogdet_qr(a):
    """(sign, log|det a|) of a [..., n, n] from its Householder QR (real a only, as jax)."""
    if jnp.iscomplexobj(a):
        raise NotImplementedError("slogdet method='qr' not implemented for complex inputs "
                                  "(as in jax); use method='lu'")
    n = a.shape[-1]
    h, taus = dec.geqrf(a)
    diag = jnp.diagonal(h, axis1=-2, axis2=-1)                               # Rᵢᵢ
    log_abs_det = jnp.sum(jnp.log(jnp.abs(diag)), axis=-1)
    sign_diag = jnp.prod(jnp.sign(diag), axis=-1)
    # each reflection made (tau != 0) has determinant -1
    sign_taus = jnp.prod(jnp.where(taus[..., :n - 1] != 0, -1, 1), axis=-1)
    return sign_diag * sign_taus.astype(sign_diag.dtype), log_abs_det


@slogdet_qr.defjvp
def _slogdet_qr_jvp(primals, tangents):                # d log|det A| = tr(A⁻¹ dA)
    from fnad.numpy.linalg import solve
    (a,), (a_dot,) = primals, tangents
    sign, logdet = slogdet_qr(a)
    return (sign, logdet), (jnp.zeros_like(sign),
                            jnp.trace(solve(a, a_dot), axis1=-1, axis2=-2))

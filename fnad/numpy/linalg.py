"""fnad.numpy.linalg: jax.numpy.linalg's norm, solve, inv, det, slogdet, cholesky and
matrix_power, built on the lax decompositions (primitives/decompositions.py) and fnad.numpy.

Math (as JAX):
  solve   P A = L U  =>  x = U⁻¹ L⁻¹ P b   (two triangular solves; b a vector or matrices)
  det     sign · exp(logabsdet); the explicit cofactor formula for 2×2 and 3×3 (as JAX)
  slogdet sign = (-1)^(row swaps) · Π sign(Uᵢᵢ), logabsdet = Σ log|Uᵢᵢ|
  norm    vector p-norms (p = 0, ±1, 2, ±inf, any p) and matrix norms (fro, ±1, ±inf)
Derivatives come from the primitives' rules, except det's (n = 1 and n >= 4): as JAX's, a
custom_jvp d det(A) = tr(adj(A) dA) with adj(A) = det(A) A⁻¹ taken from A's LU without
dividing by the last pivot (`_cofactor_solve`), so det's gradient stays finite, and equals
the adjugate, at singular A of rank n-1 (0 for lower rank). slogdet and solve gradients at
a singular matrix are not finite (nor are JAX's).
Not implemented (need an SVD/eigensolver): eigh, eig, svd, qr, pinv, lstsq, matrix_rank,
and norm with ord 2, -2 or 'nuc' over two axes.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad.core import Array
from fnad.custom import custom_jvp
from fnad.numpy._core import canonicalize_axis, promote_dtypes_inexact
from fnad.primitives import decompositions as dec

__all__ = ["SlogdetResult", "cholesky", "det", "inv", "matrix_power", "norm", "slogdet",
           "solve", "vector_norm"]


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def _square(name: str, a) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: argument must be a square matrix or a batch of square "
                         f"matrices with shape [..., n, n], got shape {a.shape}")


def _inexact(name: str, *args):
    return promote_dtypes_inexact(*(jnp.asarray(a) for a in args))


# ---- cholesky ------------------------------------------------------------------------------
def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """L with a = L Lᴴ (or U = Lᴴ with upper=True) for Hermitian positive-definite
    a [..., n, n]; NaNs where the factorization fails (as JAX)."""
    a, = _inexact("cholesky", a)
    _square("cholesky", a)
    L = dec.cholesky(a, symmetrize_input=symmetrize_input)                  # [..., n, n]
    return jnp.conj(jnp.swapaxes(L, -1, -2)) if upper else L


# ---- solve / inv ---------------------------------------------------------------------------
def _lu_solve(lu, perm, b):
    """x with A x = b from A's LU: b [..., m, n] with A's batch dims."""
    m = lu.shape[-1]
    P = (perm[..., :, None] == jnp.arange(m, dtype=perm.dtype)).astype(b.dtype)  # [..., m, m]
    pb = jnp.matmul(P, b, precision="highest")                               # rows of b: P b
    y = dec.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
    return dec.triangular_solve(lu, y, left_side=True, lower=False)          # U⁻¹ L⁻¹ P b


def solve(a, b) -> Array:
    """x with a x = b: a [..., m, m]; b [m] (one vector) or [..., m, n] (batch broadcast)."""
    a, b = _inexact("solve", a, b)
    if a.ndim < 2:
        raise ValueError(f"solve: left hand array must be at least two dimensional; got "
                         f"a.shape={a.shape}")
    _square("solve", a)
    m = a.shape[-1]
    if (b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]
            and a.shape[-1] != b.shape[-2]):
        raise ValueError(f"solve: invalid shapes {a.shape}, {b.shape}: b is not a batch of "
                         "[m, n] matrices (for a batch of vectors use "
                         "solve(a, b[..., None])[..., 0])")
    vector = b.ndim == 1
    if vector:
        if b.shape[0] != m:
            raise ValueError(f"solve: incompatible shapes a {a.shape} and b {b.shape}: b's "
                             f"length must be {m}")
        b = jnp.broadcast_to(b[:, None], a.shape[:-2] + (m, 1))              # [..., m, 1]
    elif b.shape[-2] != m:
        raise ValueError(f"solve: incompatible shapes a {a.shape} and b {b.shape}: b's "
                         f"dimension -2 must be {m}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"solve: batch dimensions of a {a.shape} and b {b.shape} do not "
                         "broadcast") from None
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    lu, _, perm = dec.lu(a)
    x = _lu_solve(lu, perm, b)                                               # [..., m, n]
    return x[..., 0] if vector else x


def inv(a) -> Array:
    """a⁻¹ for a [..., n, n] (solve with the identity)."""
    a, = _inexact("inv", a)
    _square("inv", a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return solve(a, eye)


def matrix_power(a, n: int) -> Array:
    """a raised to the integer power n by repeated squaring (n < 0: of inv(a))."""
    a = jnp.asarray(a)
    _square("matrix_power", a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from None
    if n == 0:
        return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:                                           # binary exponentiation
        if n & 1:
            result = a if result is None else jnp.matmul(result, a)
        n >>= 1
        if n:
            a = jnp.matmul(a, a)
    return result


# ---- det / slogdet -----------------------------------------------------------------------
def slogdet(a, *, method: str | None = None) -> SlogdetResult:
    """(sign, log|det a|) for a [..., n, n] via LU; sign 0 and logabsdet -inf if singular."""
    a, = _inexact("slogdet", a)
    _square("slogdet", a)
    if method not in (None, "lu"):
        if method == "qr":
            raise NotImplementedError("slogdet: method='qr' needs a QR decomposition, which "
                                      "fnad does not implement yet; use method='lu'")
        raise ValueError(f"slogdet: unknown method {method!r}; use 'lu'")
    n = a.shape[-1]
    lu, pivots, _ = dec.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)                              # [..., n]
    is_zero = jnp.any(diag == 0, axis=-1)
    parity = jnp.count_nonzero(pivots != jnp.arange(n, dtype=pivots.dtype), axis=-1)
    if jnp.iscomplexobj(a):
        sign = jnp.prod(diag / jnp.abs(diag).astype(diag.dtype), axis=-1)
    else:
        sign = jnp.array(1, dtype=a.dtype)
        parity = parity + jnp.count_nonzero(diag < 0, axis=-1)
    flip = jnp.array(-2 * (parity % 2) + 1, dtype=a.dtype)
    sign = jnp.where(is_zero, jnp.array(0, dtype=a.dtype), sign * flip)
    logdet = jnp.where(is_zero, jnp.array(-np.inf, dtype=a.dtype),
                       jnp.sum(jnp.log(jnp.abs(diag)).astype(a.dtype), axis=-1))
    return SlogdetResult(sign, jnp.real(logdet))


def _det_2x2(a):
    return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]


def _det_3x3(a):
    return (a[..., 0, 0] * a[..., 1, 1] * a[..., 2, 2] +
            a[..., 0, 1] * a[..., 1, 2] * a[..., 2, 0] +
            a[..., 0, 2] * a[..., 1, 0] * a[..., 2, 1] -
            a[..., 0, 2] * a[..., 1, 1] * a[..., 2, 0] -
            a[..., 0, 0] * a[..., 1, 2] * a[..., 2, 1] -
            a[..., 0, 1] * a[..., 1, 0] * a[..., 2, 2])


def det(a) -> Array:
    """det a for a [..., n, n]: cofactor formula for n = 2, 3, else sign·exp(logabsdet)
    (with a gradient that is finite, the adjugate, at singular matrices)."""
    a, = _inexact("det", a)
    _square("det", a)
    if a.shape[-1] == 2:
        return _det_2x2(a)
    if a.shape[-1] == 3:
        return _det_3x3(a)
    return _det(a)


def _cofactor_solve(a, b):
    """(det a, adj(a) @ b) for a, b [..., n, n], finite when a is singular (JAX's method).

    P a = L U. det(a) a⁻¹ b = det(a) U⁻¹ L⁻¹ P b, and with x = L⁻¹ P b its last row is
    x_n · det(a) / u_nn = x_n · sign · Π_{i<n} u_ii. So u_nn is replaced by
    1 / (sign · Π_{i<n} u_ii) and rows i < n of x scaled by det(a): the triangular solve then
    never divides by a zero last pivot (rank n-1). For rank < n-1 adj(a) = 0: where that
    solve is not finite the result is set to zero. (So a rank n-1 matrix whose zero pivot
    partial pivoting meets before the last column also gets 0, as in JAX.)"""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu, pivots, perm = dec.lu(a)
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    x = jnp.broadcast_to(b, batch + b.shape[-2:])                            # [..., n, n]
    lu = jnp.broadcast_to(lu, batch + lu.shape[-2:])
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)                              # [..., n]
    parity = jnp.count_nonzero(pivots != jnp.arange(n, dtype=pivots.dtype), axis=-1)
    sign = jnp.asarray(-2 * (parity % 2) + 1, dtype=a.dtype)
    partial_det = jnp.cumprod(diag, axis=-1) * sign[..., None]               # [..., n]
    lu = lu.at[..., -1, -1].set(1.0 / partial_det[..., -2])
    ones = jnp.ones(x.shape[:-1], x.dtype)                                   # [..., n]
    probe = dec.triangular_solve(lu, ones, left_side=True, lower=False)
    low_rank = jnp.any(jnp.isnan(probe) | jnp.isinf(probe), axis=-1)         # rank < n - 1
    low_rank = jnp.broadcast_to(low_rank[..., None, None], x.shape)
    x = jnp.where(low_rank, jnp.zeros_like(x), x)
    P = (jnp.broadcast_to(perm, batch + (n,))[..., :, None]
         == jnp.arange(n, dtype=perm.dtype)).astype(x.dtype)                 # [..., n, n]
    x = jnp.matmul(P, x, precision="highest")                                # P b
    x = dec.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = jnp.concatenate([x[..., :-1, :] * partial_det[..., -1, None, None], x[..., -1:, :]],
                        axis=-2)
    x = dec.triangular_solve(lu, x, left_side=True, lower=False)
    x = jnp.where(low_rank, jnp.zeros_like(x), x)
    return partial_det[..., -1], x


@custom_jvp
def _det(a):
    """det a = sign · exp(log|det a|) for a [..., n, n], with JAX's derivative rule."""
    sign, logdet = slogdet(a)
    return sign * jnp.exp(logdet).astype(sign.dtype)


@_det.defjvp
def _det_jvp(primals, tangents):                       # d det(A) = tr(adj(A) dA)
    (a,), (a_dot,) = primals, tangents
    y, z = _cofactor_solve(a, a_dot)
    return y, jnp.trace(z, axis1=-1, axis2=-2)


# ---- norm --------------------------------------------------------------------------------
def _abs2_sum(x, axis, keepdims):
    return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))


def vector_norm(x, *, axis=None, keepdims: bool = False, ord=2) -> Array:
    """The vector p-norm of x over `axis` (all axes if None)."""
    x, = _inexact("vector_norm", x)
    if ord is None or ord == 2:
        return _abs2_sum(x, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm (use jnp.inf / -jnp.inf "
                         "for the max / min norms)")
    if ord == np.inf:
        return jnp.max(jnp.abs(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return jnp.min(jnp.abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:
        real_dt = jnp.finfo(x.dtype).dtype
        return jnp.sum(x != 0, dtype=real_dt, axis=axis, keepdims=keepdims)
    if ord == 1:
        return jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims)
    abs_x = jnp.abs(x)
    p = jnp.array(ord, dtype=abs_x.dtype)
    return jnp.power(jnp.sum(abs_x ** p, axis=axis, keepdims=keepdims),
                     jnp.array(1.0 / ord, dtype=abs_x.dtype))


def norm(x, ord=None, axis=None, keepdims: bool = False) -> Array:
    """Vector norm (one axis) or matrix norm (two axes) of x, as jnp.linalg.norm.

    ord None: 2-norm / Frobenius; vectors also take 0, ±1, ±inf and any real p;
    matrices 'fro', ±1 (max/min column sum), ±inf (max/min row sum). Matrix ord 2, -2
    and 'nuc' need singular values (not implemented)."""
    x, = _inexact("norm", x)
    ndim = x.ndim
    if axis is None:
        if ord is None:                                # any rank: the flattened 2-norm
            return _abs2_sum(x, None, keepdims)
        axis = tuple(range(ndim))
    elif isinstance(axis, tuple):
        axis = tuple(canonicalize_axis(a, ndim) for a in axis)
    else:
        axis = (canonicalize_axis(axis, ndim),)
    if len(axis) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axis, keepdims=keepdims)
    if len(axis) != 2:
        raise ValueError(f"Invalid axis values ({axis}) for jnp.linalg.norm: give one axis "
                         "(vector norm) or two (matrix norm)")
    row_axis, col_axis = axis
    if row_axis == col_axis:
        raise ValueError(f"Duplicate axes given for jnp.linalg.norm: {axis}")
    if ord is None or ord in ("f", "fro"):
        return _abs2_sum(x, axis, keepdims)
    if isinstance(ord, str) and ord != "nuc":
        raise ValueError(f"Invalid order '{ord}' for matrix norm")
    if ord == 1 or ord == -1:
        if not keepdims and col_axis > row_axis:
            col_axis -= 1
        col_sums = jnp.sum(jnp.abs(x), axis=row_axis, keepdims=keepdims)
        if ord == 1:
            return jnp.max(col_sums, axis=col_axis, keepdims=keepdims, initial=0)
        return jnp.min(col_sums, axis=col_axis, keepdims=keepdims)
    if ord == np.inf or ord == -np.inf:
        if not keepdims and row_axis > col_axis:
            row_axis -= 1
        row_sums = jnp.sum(jnp.abs(x), axis=col_axis, keepdims=keepdims)
        if ord == np.inf:
            return jnp.max(row_sums, axis=row_axis, keepdims=keepdims, initial=0)
        return jnp.min(row_sums, axis=row_axis, keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"norm: matrix norm ord={ord!r} needs singular values (an "
                                  "SVD), which fnad does not implement yet; use ord='fro', "
                                  "1, -1, inf or -inf")
    raise ValueError(f"Invalid order '{ord}' for matrix norm")

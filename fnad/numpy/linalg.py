"""fnad.numpy.linalg: jax.numpy.linalg's API, built on the lax decompositions
(primitives/decompositions.py) and fnad.numpy. This module holds norm, solve, inv, det,
slogdet, cholesky, matrix_power and the array-API helpers (matrix_norm, matrix_transpose,
outer, cross, trace, diagonal, vecdot, matmul, tensordot, tensorinv, tensorsolve,
multi_dot); _linalg_spectral.py the ones built on qr, eigh, svd and eig (qr, eigh,
eigvalsh, eig, eigvals, svd, svdvals, pinv, lstsq, matrix_rank, cond), re-exported here.

Math (as JAX):
  solve   P A = L U  =>  x = U⁻¹ L⁻¹ P b   (two triangular solves; b a vector or matrices)
  det     sign · exp(logabsdet); the explicit cofactor formula for 2×2 and 3×3 (as JAX)
  slogdet sign = (-1)^(row swaps) · Π sign(Uᵢᵢ), logabsdet = Σ log|Uᵢᵢ| (method 'qr': from
          Householder QR, _linalg_spectral.slogdet_qr)
  norm    vector p-norms (p = 0, ±1, 2, ±inf, any p) and matrix norms (fro, ±1, ±inf; ±2 and
          nuc from the singular values)
Derivatives come from the primitives' rules, except det's (n = 1 and n >= 4): as JAX's, a
custom_jvp d det(A) = tr(adj(A) dA) with adj(A) = det(A) A⁻¹ taken from A's LU without
dividing by the last pivot (`_cofactor_solve`), so det's gradient stays finite, and equals
the adjugate, at singular A of rank n-1 (0 for lower rank). slogdet and solve gradients at
a singular matrix are not finite (nor are JAX's).
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

import fnad.numpy as jnp
from fnad.core import Array
from fnad.custom import custom_jvp
from fnad.numpy._core import canonicalize_axis, check_arraylike, promote_dtypes_inexact
from fnad.primitives import decompositions as dec

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cond",
           "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot",
           "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
           "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def _square(name: str, a) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: argument must be a square matrix or a batch of square "
                         f"matrices with shape [..., n, n], got shape {a.shape}")


def _arrays(name: str, *args):
    """args as arrays; a TypeError naming `name` for lists and other non-arrays (as jax)."""
    check_arraylike(f"fnad.numpy.linalg.{name}", *args)
    return tuple(jnp.asarray(a) for a in args)


def _inexact(name: str, *args):
    return promote_dtypes_inexact(*_arrays(name, *args))


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
    a, = _arrays("matrix_power", a)
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
    if method == "qr":
        return SlogdetResult(*slogdet_qr(a))
    if method not in (None, "lu"):
        raise ValueError(f"slogdet: unknown method {method!r}; use 'lu' or 'qr'")
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


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2) -> Array:
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
    matrices 'fro', ±1 (max/min column sum), ±inf (max/min row sum), 2 and -2 (largest and
    smallest singular value) and 'nuc' (their sum)."""
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
        return singular_value_norm(x, ord, axis, keepdims)
    raise ValueError(f"Invalid order '{ord}' for matrix norm")


# ---- the array API's linalg names (thin wrappers, as jax) ------------------------------------
def matrix_norm(x, /, *, keepdims: bool = False, ord="fro") -> Array:
    """norm(x, ord, axis=(-2, -1)) of x [..., m, n]."""
    x, = _arrays("matrix_norm", x)
    return norm(x, ord=ord, keepdims=keepdims, axis=(-2, -1))


def matrix_transpose(x, /) -> Array:
    """x [..., m, n] as [..., n, m]."""
    x, = _arrays("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got ndim={x.ndim}")
    return jnp.matrix_transpose(x)


def outer(x1, x2, /) -> Array:
    """x1[:, None] * x2[None, :] of two vectors."""
    x1, x2 = _arrays("outer", x1, x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are "
                         f"x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return x1[:, None] * x2[None, :]


def cross(x1, x2, /, *, axis=-1) -> Array:
    """The cross product of 3-vectors along `axis` (the other axes broadcast)."""
    x1, x2 = _arrays("cross", x1, x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have x1.shape[axis]={x1.shape[axis]} and "
                         f"x2.shape[axis]={x2.shape[axis]}")
    return jnp.cross(x1, x2, axis=axis)


def trace(x, /, *, offset: int = 0, dtype=None) -> Array:
    """The traces [...] of x [..., m, n] (diagonal `offset`)."""
    return jnp.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset: int = 0) -> Array:
    """The diagonals [..., d] of x [..., m, n] (diagonal `offset`)."""
    return jnp.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None) -> Array:
    """Σ conj(x1)·x2 along `axis`."""
    return jnp.vecdot(x1, x2, axis=axis, precision=precision,
                      preferred_element_type=preferred_element_type)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None) -> Array:
    """x1 @ x2 (jnp.matmul)."""
    return jnp.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None) -> Array:
    """jnp.tensordot with `axes` keyword-only, as the array API."""
    return jnp.tensordot(x1, x2, axes=axes, precision=precision,
                         preferred_element_type=preferred_element_type)


def tensorinv(a, ind: int = 2) -> Array:
    """The tensor inverse [*a.shape[ind:], *a.shape[:ind]] of a: inv of a as a square
    [Π shape[:ind], Π shape[ind:]] matrix."""
    a, = _arrays("tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind}")
    contracting_shape, batch_shape = a.shape[:ind], a.shape[ind:]
    flatshape = (math.prod(contracting_shape), math.prod(batch_shape))
    if flatshape[0] != flatshape[1]:
        raise ValueError("tensorinv is only possible when the product of the first `ind` "
                         "dimensions equals that of the remaining dimensions. got "
                         f"a.shape={a.shape} with ind={ind}.")
    return inv(a.reshape(flatshape)).reshape(*batch_shape, *contracting_shape)


def tensorsolve(a, b, axes: tuple[int, ...] | None = None) -> Array:
    """x with tensordot(a, x, x.ndim) = b (after moving a's `axes` to the end)."""
    a, b = _arrays("tensorsolve", a, b)
    if axes is not None:
        a = jnp.moveaxis(a, axes, len(axes) * (a.ndim - 1,))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError("After moving axes to end, leading shape of a must match shape of b. "
                         f"got a.shape={a.shape}, b.shape={b.shape}")
    if b.size != math.prod(out_shape):
        raise ValueError("Input arrays must have prod(a.shape[:b.ndim]) == "
                         f"prod(a.shape[b.ndim:]); got a.shape={a.shape}, b.ndim={b.ndim}.")
    a = a.reshape(b.size, math.prod(out_shape))
    return solve(a, b.ravel()).reshape(out_shape)


def multi_dot(arrays, *, precision=None) -> Array:
    """arrays[0] @ arrays[1] @ ... in the cheapest order (the matrix-chain dynamic program);
    the first and last may be vectors."""
    arrs = list(_arrays("multi_dot", *arrays))
    if len(arrs) < 2:
        raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
    if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2)
            and all(a.ndim == 2 for a in arrs[1:-1])):
        raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the "
                         "first and last array which may be 1 or 2 dimensional. Got array "
                         f"shapes {[a.shape for a in arrs]}")
    if any(a.shape[-1] != b.shape[0] for a, b in zip(arrs[:-1], arrs[1:])):
        raise ValueError("multi_dot: last dimension of each array must match first dimension "
                         f"of following array. Got array shapes {[a.shape for a in arrs]}")
    first_vec, last_vec = arrs[0].ndim == 1, arrs[-1].ndim == 1
    if first_vec:
        arrs[0] = arrs[0][None, :]
    if last_vec:
        arrs[-1] = arrs[-1][:, None]
    dims = [arrs[0].shape[0]] + [a.shape[1] for a in arrs]      # arrs[i] is dims[i] x dims[i+1]
    k = len(arrs)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):                           # the classic O(k³) matrix chain
        for i in range(k - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def product(i, j):
        if i == j:
            return arrs[i]
        s = split[i][j]
        return jnp.matmul(product(i, s), product(s + 1, j), precision=precision)
    out = product(0, k - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


from fnad.numpy._linalg_spectral import (  # noqa: E402
    EigResult, EighResult, QRResult, SVDResult, cond, eig, eigh, eigvals, eigvalsh, lstsq,
    matrix_rank, pinv, qr, singular_value_norm, slogdet_qr, svd, svdvals)

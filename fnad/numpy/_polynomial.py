"""fnad.numpy's polynomials, as 1-D coefficient arrays with the highest power first
(NumPy's poly1d order): polyval, polyadd, polysub, polymul, polydiv, polyder, polyint,
poly (from roots), roots (companion eigenvalues), polyfit (lstsq), vander.

Each is a composition of arithmetic, slices, .at updates and convolve, so derivatives in
the coefficients and in x come from those. The orders (m) and lengths are static.
Functions of fnad.numpy are looked up at call time.
"""
from __future__ import annotations

import operator

import numpy as np

import fnad.numpy as jnp
from fnad import core
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    broadcast_shapes,
    check_arraylike,
    ensure_array,
    promote_dtypes,
    promote_dtypes_inexact,
)
from fnad.numpy._creation import _concrete
from fnad.numpy._index_routines import _is_traced

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul", "polysub",
           "polyval", "roots", "vander"]


def _order(m, name: str) -> int:
    return operator.index(_concrete(m, f"the 'm' argument of fnad.numpy.{name}"))


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Array:
    """p[0]·x^(N-1) + ... + p[N-1], by Horner's rule (`unroll` is accepted for JAX's
    signature; the N steps are always unrolled). p may carry trailing batch dims."""
    check_arraylike("polyval", p, x)
    p, x = (ensure_array(a) for a in promote_dtypes(p, x))
    shape = broadcast_shapes(p.shape[1:], x.shape, fun_name="polyval")
    y = jnp.zeros(shape, x.dtype)
    for i in range(p.shape[0]):
        y = y * x + p[i]                                        # [*shape]
    return y


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The coefficients of the sum of two polynomials (the shorter one aligned right)."""
    check_arraylike("polyadd", a1, a2)
    a1, a2 = (ensure_array(a) for a in promote_dtypes(a1, a2))
    if a2.shape[0] <= a1.shape[0]:
        return a1.at[a1.shape[0] - a2.shape[0]:].add(a2)
    return a2.at[a2.shape[0] - a1.shape[0]:].add(a1)


def polysub(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The coefficients of a1 - a2."""
    check_arraylike("polysub", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    return polyadd(a1, jnp.negative(a2))


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Array:
    """The coefficients of the product: the full convolution of a1 and a2 (inexact dtype).

    trim_leading_zeros drops leading zero coefficients first, which needs concrete inputs
    (the output's length depends on them).
    """
    check_arraylike("polymul", a1, a2)
    a1, a2 = (ensure_array(a) for a in promote_dtypes_inexact(a1, a2))
    if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
        if _is_traced(a1) or _is_traced(a2):
            raise core.ConcretizationTypeError(
                f"polymul with trim_leading_zeros=True of traced coefficients"
                f"{core._at_user_line()}: the output's length depends on their values. "
                "Call it with trim_leading_zeros=False under jit.")
        a1 = a1[len(a1) - len(np.trim_zeros(np.asarray(a1), "f")):]
        a2 = a2[len(a2) - len(np.trim_zeros(np.asarray(a2), "f")):]
    if a1.shape[0] == 0:
        a1 = jnp.zeros(1, a2.dtype)
    if a2.shape[0] == 0:
        a2 = jnp.zeros(1, a1.dtype)
    return jnp.convolve(a1, a2, mode="full")


def polyder(p: ArrayLike, m: int = 1) -> Array:
    """The coefficients of the m-th derivative of p (inexact dtype)."""
    check_arraylike("polyder", p)
    m = _order(m, "polyder")
    (p,) = promote_dtypes_inexact(p)
    if m < 0:
        raise ValueError(f"Order of derivative must be positive, got m={m}")
    if m == 0:
        return p
    n = p.shape[0]
    # coeff[j] = (n-1-j)(n-2-j)...(n-m-j): the falling factorial of each remaining power.
    powers = np.arange(m, n)[None, :] - np.arange(m)[:, None]              # [m, n - m]
    coeff = np.prod(powers, axis=0)[::-1].astype(p.dtype) if n > m else np.zeros(0, p.dtype)
    return p[:n - m] * coeff if n > m else p[:0]


def polyint(p: ArrayLike, m: int = 1, k: ArrayLike | None = None) -> Array:
    """The coefficients of the m-th antiderivative of p, with integration constants `k`
    (a scalar, or m values: the first for the innermost integral)."""
    m = _order(m, "polyint")
    k = 0 if k is None else k
    check_arraylike("polyint", p, k)
    p, k = (ensure_array(a) for a in promote_dtypes_inexact(p, k))
    if m < 0:
        raise ValueError(f"Order of integral must be positive (see polyder), got m={m}")
    k = jnp.atleast_1d(k)
    if k.shape[0] == 1:
        k = jnp.full((m,), k[0])
    if k.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    grid = np.arange(p.shape[0] + m)[None, :] - np.arange(m)[:, None]      # [m, n + m]
    coeff = np.prod(np.maximum(1, grid), axis=0)[::-1].astype(p.dtype)
    return jnp.concatenate([p, k]) / coeff


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """The Vandermonde matrix [len(x), N]: columns x^(N-1), ..., x, 1 (reversed if
    increasing)."""
    check_arraylike("vander", x)
    x = ensure_array(x)
    if x.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array, got shape {x.shape}")
    N = x.shape[0] if N is None else operator.index(_concrete(N, "vander's N"))
    if N < 0:
        raise ValueError(f"N must be nonnegative, got {N}")
    powers = np.arange(N) if increasing else np.arange(N - 1, -1, -1)
    return jnp.power(x[:, None], jnp.asarray(powers, x.dtype)[None, :])     # [len(x), N]


def poly(seq_of_zeros: ArrayLike) -> Array:
    """The coefficients (highest power first, leading 1) of the monic polynomial with the
    given roots; for a square matrix, of its characteristic polynomial (roots = its
    eigenvalues, fnad.numpy.linalg.eigvals)."""
    check_arraylike("poly", seq_of_zeros)
    (z,) = promote_dtypes_inexact(seq_of_zeros)
    z = jnp.atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = jnp.linalg.eigvals(z)
    if z.ndim != 1:
        raise ValueError(f"fnad.numpy.poly: input must be 1-D or a non-empty square 2-D "
                         f"array, got shape {z.shape}")
    a = jnp.ones((1,), z.dtype)
    for k in range(z.shape[0]):                        # multiply in (x - z_k)
        a = jnp.convolve(a, jnp.stack([jnp.ones((), z.dtype), -z[k]]), mode="full")
    return a if z.shape[0] else jnp.ones((), z.dtype)


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False):
    """(quotient, remainder) of the polynomial division u / v by long division; the
    remainder keeps u's length (its leading entries zero) unless `trim_leading_zeros`,
    which drops those below √eps (the values must then be concrete)."""
    check_arraylike("polydiv", u, v)
    u, v = (ensure_array(a) for a in promote_dtypes_inexact(u, v))
    if u.ndim != 1 or v.ndim != 1:
        raise ValueError(f"fnad.numpy.polydiv: u and v must be 1-D, got shapes {u.shape} and "
                         f"{v.shape}")
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    q = jnp.zeros(max(m - n + 1, 1), u.dtype)
    for k in range(m - n + 1):
        d = scale * u[k]
        q = q.at[k].set(d)
        u = u.at[k:k + n + 1].add(-d * v)
    if trim_leading_zeros:
        if _is_traced(u):
            raise core.ConcretizationTypeError(
                "fnad.numpy.polydiv(trim_leading_zeros=True) needs concrete values: the "
                "remainder's length depends on them")
        tol = np.sqrt(np.finfo(u.dtype).eps)
        keep = np.flatnonzero(np.abs(np.asarray(u)) > tol)
        u = u[keep[0]:] if keep.size else u[:0]
    return q, u


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Array:
    """The roots of the polynomial p (highest power first), as complex numbers: the
    eigenvalues of its companion matrix. Leading zeros are stripped (they must then be
    concrete); with strip_zeros=False they are kept and each gives a NaN root at the end,
    so the shape is static (usable under jit)."""
    check_arraylike("roots", p)
    (p,) = promote_dtypes_inexact(p)
    p = jnp.atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    complex_dtype = jnp.result_type(p.dtype, np.complex64)
    if p.shape[0] < 2:
        return jnp.zeros((0,), complex_dtype)
    lead = jnp.where(jnp.all(p == 0), p.shape[0], jnp.argmin(p == 0))
    if strip_zeros:
        if _is_traced(lead):
            raise core.ConcretizationTypeError(
                "fnad.numpy.roots strips leading zeros, so their number must be concrete: "
                "pass strip_zeros=False under jit (leading zeros then give NaN roots)")
        return _roots_of(p[int(np.asarray(lead)):], complex_dtype)
    shifted = jnp.roll(jnp.where(lead == p.shape[0], 1.0, p), -lead)
    r = _roots_of(shifted, complex_dtype)
    r = r[jnp.argsort(r == 0, stable=True)]                    # the zeros of the shift last
    return jnp.where(jnp.arange(r.shape[0]) < r.shape[0] - lead, r, complex(np.nan, np.nan))


def _roots_of(p, complex_dtype):
    n = p.shape[0]
    if n < 2:
        return jnp.zeros((0,), complex_dtype)
    companion = jnp.diag(jnp.ones((n - 2,), p.dtype), -1).at[0, :].set(-p[1:] / p[0])
    return jnp.linalg.eigvals(companion).astype(complex_dtype)


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None,
            full: bool = False, w: ArrayLike | None = None, cov: bool | str = False):
    """The least-squares coefficients (highest power first) of the degree-`deg`
    polynomial through (x, y) (y [M] or [M, K]), by lstsq on the column-scaled Vandermonde
    matrix (weights w multiply the unsquared residuals). full=True also returns (residuals,
    rank, singular values, rcond); cov=True (or "unscaled") the coefficients' covariance."""
    check_arraylike("polyfit", x, y)
    deg = operator.index(_concrete(deg, "polyfit's deg"))
    if deg < 0:
        raise ValueError("expected deg >= 0")
    x, y = (ensure_array(a) for a in promote_dtypes_inexact(x, y))
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    order = deg + 1
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(x.dtype).eps)
    lhs, rhs = jnp.vander(x, order), y
    if w is not None:
        (w,) = promote_dtypes_inexact(w)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = jnp.sqrt(jnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = jnp.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, jnp.asarray(rcond)
    if not cov:
        return c
    base = jnp.linalg.inv(jnp.dot(lhs.T, lhs)) / jnp.outer(scale, scale)
    if cov == "unscaled":
        fac = jnp.asarray(1.0)
    else:
        if x.shape[0] <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")
        fac = resids / (x.shape[0] - order)
    if y.ndim == 1:
        return c, base * jnp.atleast_1d(fac)[None]
    return c, base[:, :, None] * jnp.atleast_1d(fac)[None, None, :]

"""fnad.numpy's polynomials, as 1-D coefficient arrays with the highest power first
(NumPy's poly1d order): polyval, polyadd, polysub, polymul, polydiv, polyder, polyint,
poly (from roots), vander.

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

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyint", "polymul", "polysub", "polyval",
           "vander"]


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
    eigenvalues, which needs fnad.numpy.linalg.eigvals)."""
    check_arraylike("poly", seq_of_zeros)
    (z,) = promote_dtypes_inexact(seq_of_zeros)
    z = jnp.atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        eigvals = getattr(jnp.linalg, "eigvals", None)
        if eigvals is None:
            raise NotImplementedError("fnad.numpy.poly of a matrix needs "
                                      "fnad.numpy.linalg.eigvals, which fnad lacks")
        z = eigvals(z)
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

"""Matrix decompositions and triangular solves, as jax.lax.linalg: cholesky, triangular_solve,
lu. Each maps over leading batch dimensions: an operand is [..., m, n].

Math (JAX's rules):
  cholesky   A = L Lᴴ.  dL = L φ(L⁻¹ dA L⁻ᴴ), φ(X) = tril(X) with the diagonal halved.
  triangular_solve  X = op(A)⁻¹ B (left_side) or B op(A)⁻¹: linear in B, its transpose
             solves with op(A)ᵀ; in A, dX = -op(A)⁻¹ op(dA) X (or -X op(dA) op(A)⁻¹).
  lu         P A = L U.  With Ẋ = L⁻¹ P dA U⁻¹: dL = L tril(Ẋ, -1), dU = triu(Ẋ) U.
Imports only fnad.core, fnad.dtypes and the other primitive families.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives import elementwise as el
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.primitives._util import INEXACT, add_tangents, check_kind
from fnad.primitives.linalg import Precision, batch_matmul

__all__ = ["cholesky", "lu", "triangular_solve"]


# ---- helpers (lax-level, so that rules stay differentiable) ------------------------------
def _T(x):
    """Swap the last two dims: [..., m, n] -> [..., n, m]."""
    nd = get_aval(x).ndim
    return so.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def _H(x):
    return _T(el.conj(x)) if dtypes.is_complex(get_aval(x).dtype) else _T(x)


def _tri_mask(shape, k: int, lower: bool):
    """True on tril(·, k) (lower) or triu(·, k) of the last two dims of `shape`."""
    nd = len(shape)
    row = so.broadcasted_iota(np.int32, shape, nd - 2)
    col = so.broadcasted_iota(np.int32, shape, nd - 1)
    return lg.ge(el.add(row, k), col) if lower else lg.le(el.add(row, k), col)


def _tril(x, k: int = 0):
    return lg.select_n(_tri_mask(get_aval(x).shape, k, True), 0, x)


def _triu(x, k: int = 0):
    return lg.select_n(_tri_mask(get_aval(x).shape, k, False), 0, x)


def _eye_like(shape, dtype):
    """Identity matrices of `shape` [..., m, n] (ones where row == col)."""
    nd = len(shape)
    eq = lg.eq(so.broadcasted_iota(np.int32, shape, nd - 2),
               so.broadcasted_iota(np.int32, shape, nd - 1))
    return lg.convert_element_type(eq, dtype)


def _mm(a, b):                                         # [..., m, k] @ [..., k, n] -> [..., m, n]
    return batch_matmul(a, b, precision=Precision.HIGHEST)


def _check_matrix(name: str, x: ShapedArray, what: str = "", square: bool = True) -> None:
    check_kind(name, x, INEXACT, what)
    if x.ndim < 2:
        raise shape_error(name, f"the operand{what} must have rank >= 2 (a batch of "
                                f"matrices [..., m, n]), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise shape_error(name, f"the operand{what} must be a batch of square matrices "
                                f"[..., n, n], got shape {x.shape}")


# ---- cholesky --------------------------------------------------------------------------
cholesky_p = Primitive("cholesky")
def cholesky(x, *, symmetrize_input: bool = True):
    """Lower L with x = L Lᴴ for Hermitian positive-definite x [..., n, n] (NaNs on failure).

    With symmetrize_input, x is replaced by (x + xᴴ)/2; otherwise only its lower triangle
    is read."""
    if symmetrize_input:
        aval = get_aval(x)
        if (aval.ndim >= 2 and aval.shape[-1] == aval.shape[-2]
                and dtypes.is_inexact(aval.dtype)):      # else the shape rule explains
            x = el.div(el.add(x, _H(x)), 2)
    return _tril(cholesky_p.bind(x))

def cholesky_abstract_eval(x):
    _check_matrix("cholesky", x)
    return ShapedArray(x.shape, x.dtype, x.weak_type)
abstract_eval_rules[cholesky_p] = cholesky_abstract_eval
def cholesky_jvp(primals, tangents):                   # dL = L φ(L⁻¹ dA L⁻ᴴ)
    (x,), (x_dot,) = primals, tangents
    L = _tril(cholesky_p.bind(x))
    if not nonzero(x_dot):
        return L, None
    tmp = triangular_solve(L, x_dot, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)                 # dA L⁻ᴴ
    inner = triangular_solve(L, tmp, left_side=True, lower=True)   # L⁻¹ dA L⁻ᴴ
    aval = get_aval(x)
    # φ: strictly lower part kept, diagonal halved, upper part zero
    phi = lg.select_n(_tri_mask(aval.shape, -1, True), el.mul(_tril(inner), 0.5), inner)
    return L, _mm(L, phi)
jvp_rules[cholesky_p] = cholesky_jvp
def cholesky_batch(vals, dims):                        # one more leading batch dim
    (x,), (d,) = vals, dims
    return cholesky_p.bind(moveaxis(x, d, 0)), 0
batch_rules[cholesky_p] = cholesky_batch


# ---- triangular_solve ----------------------------------------------------------------------
triangular_solve_p = Primitive("triangular_solve")
def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """X with op(a) X = b (left_side) or X op(a) = b; a [..., m, m] triangular (only the
    `lower` or upper triangle is read), b [..., m, n] (left) / [..., n, m], or one rank
    lower (a vector per matrix). op transposes and/or conjugates a."""
    a_aval, b_aval = get_aval(a), get_aval(b)
    conjugate_a = bool(conjugate_a) and dtypes.is_complex(a_aval.dtype)
    singleton = b_aval.ndim == a_aval.ndim - 1
    if singleton:
        b = so.expand_dims(b, (b_aval.ndim if left_side else b_aval.ndim - 1,))
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                  transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                  unit_diagonal=bool(unit_diagonal))
    if singleton:
        nd = b_aval.ndim + 1
        out = so.squeeze(out, (nd - 1 if left_side else nd - 2,))
    return out

def triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                   unit_diagonal):
    _check_matrix("triangular_solve", a, " a")
    check_kind("triangular_solve", b, INEXACT, " (b)")
    if a.dtype != b.dtype:
        raise shape_error("triangular_solve", f"a and b must have the same dtype, got "
                                              f"{a.dtype.name} and {b.dtype.name}")
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
        raise shape_error("triangular_solve", f"b must have a's batch dimensions and rank "
                                              f"(or one less), got a {a.shape} and b {b.shape}")
    common = -2 if left_side else -1
    if a.shape[-1] != b.shape[common]:
        raise shape_error("triangular_solve", f"incompatible shapes a {a.shape} and b "
                                              f"{b.shape}: a's size {a.shape[-1]} must equal "
                                              f"b's dimension {b.ndim + common} (left_side="
                                              f"{left_side})")
    return ShapedArray(b.shape, b.dtype, b.weak_type)
abstract_eval_rules[triangular_solve_p] = triangular_solve_abstract_eval
def triangular_solve_jvp(primals, tangents, **params):
    # dX = op(A)⁻¹ (dB - op(dA) X)  (left), dX = (dB - X op(dA)) op(A)⁻¹  (right)
    (a, b), (a_dot, b_dot) = primals, tangents
    x = triangular_solve_p.bind(a, b, **params)
    x_dot_b = triangular_solve_p.bind(a, b_dot, **params) if nonzero(b_dot) else None
    x_dot_a = None
    if nonzero(a_dot):
        left, k = params["left_side"], 1 if params["unit_diagonal"] else 0
        g = _tril(a_dot, -k) if params["lower"] else _triu(a_dot, k)
        g = el.neg(g)
        g = _T(g) if params["transpose_a"] else g
        g = el.conj(g) if params["conjugate_a"] else g
        m, n = get_aval(b).shape[-2:]
        inv = lambda r: triangular_solve_p.bind(a, r, **params)   # op(A)⁻¹ r  /  r op(A)⁻¹
        if left:                                       # op(A)⁻¹ (-op(dA)) X
            x_dot_a = inv(_mm(g, x)) if m > n else _mm(inv(g), x)
        else:                                          # X (-op(dA)) op(A)⁻¹
            x_dot_a = inv(_mm(x, g)) if m < n else _mm(x, inv(g))
    return x, add_tangents(x_dot_a, x_dot_b)
jvp_rules[triangular_solve_p] = triangular_solve_jvp
def triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):         # b̄ = op(A)⁻ᵀ ct  (left)
    if is_undefined(a):
        raise ValueError("triangular_solve is linear only in b, not in the matrix a")
    if not nonzero(ct):
        return [None, None]
    b_bar = triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                    transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                    unit_diagonal=unit_diagonal)
    return [None, b_bar]
transpose_rules[triangular_solve_p] = triangular_solve_transpose
def triangular_solve_batch(vals, dims, **params):
    (a, b), (ad, bd) = vals, dims
    if ad is None:                                     # one a for all: the members of b
        nd = get_aval(b).ndim                          # become more right-hand sides
        if params["left_side"]:                        # [..., m, n, B] -> [..., m, n·B]
            b = moveaxis(b, bd, -1)
            s = get_aval(b).shape
            flat = so.reshape(b, s[:-2] + (s[-2] * s[-1],))
        else:                                          # [..., n, B, m] -> [..., n·B, m]
            b = moveaxis(b, bd, -2)
            s = get_aval(b).shape
            flat = so.reshape(b, s[:-3] + (s[-3] * s[-2], s[-1]))
        out = so.reshape(triangular_solve_p.bind(a, flat, **params), s)
        return out, nd - 1 if params["left_side"] else nd - 2
    size = get_aval(a).shape[ad]
    a, b = moveaxis(a, ad, 0), bdim_at_front(b, bd, size)   # a leading batch dim on both
    return triangular_solve_p.bind(a, b, **params), 0
batch_rules[triangular_solve_p] = triangular_solve_batch


# ---- lu --------------------------------------------------------------------------------
lu_p = Primitive("lu", multiple_results=True)
def lu(x):
    """(lu, pivots, permutation) of x [..., m, n] with partial pivoting, as jax.lax.linalg.lu:
    lu holds unit-lower L below the diagonal and U on and above it; pivots [..., min(m, n)]
    int32 (row i was swapped with pivots[i]); permutation [..., m] int32 with
    x[..., permutation, :] = L U."""
    return tuple(lu_p.bind(x))

def lu_abstract_eval(x):
    _check_matrix("lu", x, square=False)
    m, n = x.shape[-2:]
    batch = x.shape[:-2]
    return [ShapedArray(x.shape, x.dtype, x.weak_type),
            ShapedArray(batch + (min(m, n),), np.int32),
            ShapedArray(batch + (m,), np.int32)]
abstract_eval_rules[lu_p] = lu_abstract_eval
def lu_jvp(primals, tangents):              # Ẋ = L⁻¹ P dA U⁻¹; dLU = L tril(Ẋ,-1) + triu(Ẋ) U
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, perm = lu_p.bind(a)
    if not nonzero(a_dot):
        return [lu_, pivots, perm], [None, None, None]
    aval = get_aval(a)
    *batch, m, n = aval.shape
    batch, k, dt = tuple(batch), min(m, n), aval.dtype
    nb = len(batch)
    # P dA: one-hot rows [..., m, m] @ dA (linear in dA, so it transposes)
    onehot = lg.eq(so.broadcast_in_dim(perm, batch + (m, m), tuple(range(nb + 1))),
                   so.broadcasted_iota(np.int32, batch + (m, m), nb + 1))
    x = _mm(lg.convert_element_type(onehot, dt), a_dot)             # [..., m, n]
    zero = lg.convert_element_type(0, dt)
    no_pad = [(0, 0, 0)] * nb
    l_ = so.slice(lu_, (0,) * (nb + 2), batch + (m, k))              # [..., m, k]
    l_ = so.pad(_tril(l_, -1), zero, no_pad + [(0, 0, 0), (0, m - k, 0)])   # [..., m, m]
    l_ = el.add(l_, _eye_like(batch + (m, m), dt))
    u_ = so.slice(lu_, (0,) * (nb + 2), batch + (k, n))              # [..., k, n]
    u_ = so.pad(_triu(u_), zero, no_pad + [(0, n - k, 0), (0, 0, 0)])       # [..., n, n]
    if n > k:                                          # identity in the padded corner
        u_eye = so.pad(_eye_like(batch + (n - k, n - k), dt), zero,
                       no_pad + [(k, 0, 0), (k, 0, 0)])
        u_ = el.add(u_, u_eye)
    la = triangular_solve(l_, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u_, la, left_side=False, lower=False)     # [..., m, n]
    lu_dot = el.add(_mm(l_, _tril(lau, -1)), _mm(_triu(lau), u_))
    return [lu_, pivots, perm], [lu_dot, None, None]
jvp_rules[lu_p] = lu_jvp
def lu_batch(vals, dims):                              # one more leading batch dim, 3 outputs
    (x,), (d,) = vals, dims
    return lu_p.bind(moveaxis(x, d, 0)), [0, 0, 0]
batch_rules[lu_p] = lu_batch

"""Matrix decompositions and triangular solves, as jax.lax.linalg: cholesky, triangular_solve,
lu, qr, geqrf, eigh, svd, eig, schur. Each maps over leading batch dimensions: an operand is
[..., m, n].

Math (JAX's rules):
  cholesky   A = L Lᴴ.  dL = L φ(L⁻¹ dA L⁻ᴴ), φ(X) = tril(X) with the diagonal halved.
  triangular_solve  X = op(A)⁻¹ B (left_side) or B op(A)⁻¹: linear in B, its transpose
             solves with op(A)ᵀ; in A, dX = -op(A)⁻¹ op(dA) X (or -X op(dA) op(A)⁻¹).
  lu         P A = L U.  With Ẋ = L⁻¹ P dA U⁻¹: dL = L tril(Ẋ, -1), dU = triu(Ẋ) U.
  qr         A = Q R (A P with pivoting).  m >= n, thin: with C = Qᴴ dA R⁻¹ and Ω = tril(C, -1)
             - tril(C, -1)ᴴ (+ i·Im diag C for complex): dQ = Q(Ω - C) + dA R⁻¹, dR = (C - Ω) R.
             m < n: the square block A₁ = Q R₁ as above, dR₂ = dQᴴ A₂ + Qᴴ dA₂. Full Q of a
             tall A: the extra columns by Roberts & Roberts (arXiv 2409.13374), as JAX.
  geqrf      A's Householder form (LAPACK's): not differentiable, as in JAX.
  eigh       A = V diag(w) Vᴴ.  With Ȧ = Vᴴ dA V: dw = Re diag(Ȧ), dV = V (F ∘ Ȧ),
             F_ij = 1/(w_j - w_i) off the diagonal, 0 on it (infinite for equal eigenvalues).
  svd        A = U diag(s) Vᴴ (thin).  With Ṡ = Uᴴ dA V: ds = Re diag(Ṡ),
             dU = U(F ∘ (Ṡ S + S Ṡᴴ) + ½(Ṡ - Ṡᴴ) S⁻¹) + (I - U Uᴴ) dA V S⁻¹,
             dV = V(F ∘ (S Ṡ + Ṡᴴ S)) + (I - V Vᴴ) dAᴴ U S⁻¹,  F_ij = 1/(s_j² - s_i²) (i ≠ j).
  eig        A V = V diag(w).  With P = V⁻¹ dA V: dw = diag(P), dV = V (F ∘ P) + V diag(c),
             F_ij = 1/(w_j - w_i), c keeping LAPACK's normalization (see _eig_vec_jvp).
  schur      A = Z T Zᴴ (LAPACK's gees): not differentiable, as in JAX (T and Z are not unique).
Imports only fnad.core, fnad.dtypes and the other primitive families.
"""
from __future__ import annotations

import enum

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives import elementwise as el
from fnad.primitives import logic as lg
from fnad.primitives import reductions as rd
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.primitives._util import INEXACT, add_tangents, check_kind
from fnad.primitives.linalg import Precision, batch_matmul

__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "eig",
           "eigh", "lu", "qr", "schur", "svd", "triangular_solve"]  # + geqrf (fnad's)


# jax's choices of algorithm (GPU solvers, Jacobi, QDWH...). On fnad's backends every one of
# them is LAPACK's (NumPy/SciPy) or XLA's default: the same decomposition, accepted so that
# code passing them runs. The member names are jax's.
class EigImplementation(enum.Enum):
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _check_choice(name: str, arg: str, value, enum_type) -> None:
    if value is not None and not isinstance(value, enum_type):
        raise TypeError(f"{name}: {arg} must be None or a {enum_type.__name__} member "
                        f"({', '.join(enum_type.__members__)}), got {value!r}")


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
def _symmetrized(x):
    """(x + xᴴ)/2 of a square x [..., n, n], integers made float first (true division, as
    jax's: its cholesky and eigh of an int matrix are float32); any other x as it is, for
    the shape rule to explain."""
    aval = get_aval(x)
    if aval.ndim < 2 or aval.shape[-1] != aval.shape[-2]:
        return x
    if dtypes.is_int(aval.dtype) or dtypes.is_bool(aval.dtype):
        x = lg.convert_element_type(x, dtypes.to_inexact_dtype(aval.dtype))
    elif not dtypes.is_inexact(aval.dtype):
        return x
    return el.div(el.add(x, _H(x)), 2)


def cholesky(x, *, symmetrize_input: bool = True):
    """Lower L with x = L Lᴴ for Hermitian positive-definite x [..., n, n] (NaNs on failure).

    With symmetrize_input, x is replaced by (x + xᴴ)/2; otherwise only its lower triangle
    is read."""
    if symmetrize_input:
        x = _symmetrized(x)
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


# ---- helpers of qr, eigh and svd ---------------------------------------------------------
def _block(x, rows=None, cols=None):
    """x[..., r0:r1, c0:c1] for rows = (r0, r1), cols = (c0, c1) (None: all)."""
    shape = get_aval(x).shape
    *batch, m, n = shape
    r0, r1 = rows if rows is not None else (0, m)
    c0, c1 = cols if cols is not None else (0, n)
    return so.slice(x, (0,) * len(batch) + (r0, c0), tuple(batch) + (r1, c1))


def _diag(x):                                          # [..., n, n] -> [..., n]
    aval = get_aval(x)
    on_diag = _tri_mask(aval.shape, 0, True)
    on_diag = lg.bitwise_and(on_diag, _tri_mask(aval.shape, 0, False))
    return rd.reduce_sum(lg.select_n(on_diag, 0, x), axes=(aval.ndim - 1,))


def _rows_of(v, n: int):                               # [..., k] -> [..., n, k]: v in every row
    shape = get_aval(v).shape
    nd = len(shape)
    return so.broadcast_in_dim(v, shape[:-1] + (n, shape[-1]), (*range(nd - 1), nd))


def _cols_of(v, n: int):                               # [..., k] -> [..., k, n]: v in every column
    shape = get_aval(v).shape
    nd = len(shape)
    return so.broadcast_in_dim(v, shape + (n,), tuple(range(nd)))


def _as(x, dtype):
    return x if get_aval(x).dtype == dtype else lg.convert_element_type(x, dtype)


def _permutation_matrix(p, n: int, dtype):
    """[..., n, n] one-hot P with P[j, k] = (p[k] == j), so that x P = x[..., :, p]."""
    shape = get_aval(p).shape[:-1] + (n, n)
    rows = so.broadcasted_iota(np.int32, shape, len(shape) - 2)
    return lg.convert_element_type(lg.eq(_rows_of(p, n), rows), dtype)


def _batch_front(prim):
    """The batching rule of a primitive that maps over leading batch dims: one more."""
    def rule(vals, dims, **params):
        (x,), (d,) = vals, dims
        outs = prim.bind(moveaxis(x, d, 0), **params)
        return outs, [0] * len(outs)
    rule.__name__ = f"{prim.name}_batch"
    return rule


# ---- qr --------------------------------------------------------------------------------
qr_p = Primitive("qr", multiple_results=True)
def qr(x, *, pivoting: bool = False, full_matrices: bool = True,
       use_magma: bool | None = None):
    """(q, r), or (q, r, p) with pivoting, of x [..., m, n], as jax.lax.linalg.qr: x = q r
    (x[..., :, p] = q r with pivoting: column pivots, |diag r| non-increasing). q is
    [..., m, m] unitary and r [..., m, n] upper triangular with full_matrices, else
    q [..., m, k] and r [..., k, n], k = min(m, n). p [..., n] int32. `use_magma` (jax's
    GPU choice) is accepted and does nothing here."""
    outs = qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices))
    return tuple(outs)

def qr_abstract_eval(x, *, pivoting, full_matrices):
    _check_matrix("qr", x, square=False)
    *batch, m, n = x.shape
    batch, k = tuple(batch), m if full_matrices else min(m, n)
    outs = [ShapedArray(batch + (m, k), x.dtype, x.weak_type),
            ShapedArray(batch + (k, n), x.dtype, x.weak_type)]
    return outs + [ShapedArray(batch + (n,), np.int32)] if pivoting else outs
abstract_eval_rules[qr_p] = qr_abstract_eval

def _thin_qr_jvp(q, r, dx):
    """(dQ, dR) of the thin QR x = q r, q [..., m, n], r [..., n, n], m >= n."""
    dx_rinv = triangular_solve(r, dx)                  # dA R⁻¹            [..., m, n]
    c = _mm(_H(q), dx_rinv)                            # C = Qᴴ dA R⁻¹     [..., n, n]
    low = _tril(c, -1)
    omega = el.sub(low, _H(low))                       # skew-Hermitian part of C
    dt = get_aval(c).dtype
    if dtypes.is_complex(dt):                          # + i·Im diag(C): Rᵢᵢ stay real
        eye = _eye_like(get_aval(c).shape, dt)
        omega = el.add(omega, el.mul(eye, el.sub(c, _as(el.real(c), dt))))
    dq = el.add(_mm(q, el.sub(omega, c)), dx_rinv)
    dr = _mm(el.sub(c, omega), r)
    return dq, dr

def _lu_solve_h(a, b):
    """x with aᴴ x = b, from a's LU (P a = L U: aᴴ = Uᴴ Lᴴ P, so P x = L⁻ᴴ U⁻ᴴ b)."""
    lu_, _, perm = lu(a)
    y = triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                         conjugate_a=True)
    y = triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                         conjugate_a=True, unit_diagonal=True)
    n = get_aval(a).shape[-1]
    pm = _permutation_matrix(perm, n, get_aval(b).dtype)    # P[j, k] = (perm[k] == j)
    return _mm(pm, y)                                  # x = Pᵀ (P x): x[perm[k]] = y[k]

def qr_jvp(primals, tangents, *, pivoting, full_matrices):
    (x,), (dx,) = primals, tangents
    outs = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices)
    q, r = outs[:2]
    if not nonzero(dx):
        return outs, [None] * len(outs)
    *_, m, n = get_aval(x).shape
    if pivoting:                                       # d(A P) = dA P
        dx = _mm(dx, _permutation_matrix(outs[2], n, get_aval(dx).dtype))
        x = _mm(x, _permutation_matrix(outs[2], n, get_aval(x).dtype))
    if m < n:                                          # [A₁ A₂] = Q [R₁ R₂], A₁ square:
        dq, dr1 = _thin_qr_jvp(q, _block(r, cols=(0, m)), _block(dx, cols=(0, m)))
        dr2 = el.add(_mm(_H(dq), _block(x, cols=(m, n))),        # R₂ = Qᴴ A₂
                     _mm(_H(q), _block(dx, cols=(m, n))))
        dr = so.concatenate([dr1, dr2], get_aval(dr1).ndim - 1)
    else:
        q_mn = _block(q, cols=(0, n)) if full_matrices else q
        r_nn = _block(r, rows=(0, n)) if full_matrices else r
        dq, dr = _thin_qr_jvp(q_mn, r_nn, dx)
        if full_matrices and m > n:                    # arXiv 2409.13374, eqs. 32-33
            nd, dt = get_aval(q).ndim, get_aval(q).dtype
            q_nn, q_pn = _block(q_mn, rows=(0, n)), _block(q_mn, rows=(n, m))
            dq_nn, dq_pn = _block(dq, rows=(0, n)), _block(dq, rows=(n, m))
            eye = _eye_like(get_aval(q_nn).shape, dt)
            z_pn_h = _lu_solve_h(el.sub(q_nn, eye), _H(q_pn))   # Zᴴ = (Q_nn - I)⁻ᴴ Q_pnᴴ
            z_pn = _H(z_pn_h)                                   # [..., m-n, n]
            q_mp = _block(q, cols=(n, m))
            dq_mp = el.sub(_mm(dq, z_pn_h),
                           _mm(el.add(q_mn, _mm(q_mp, z_pn)),
                               _H(el.sub(dq_pn, _mm(z_pn, dq_nn)))))
            dq = so.concatenate([dq, dq_mp], nd - 1)                     # [..., m, m]
            zeros = so.full(get_aval(dr).shape[:-2] + (m - n, n), 0, dt)
            dr = so.concatenate([dr, zeros], nd - 2)                     # [..., m, n]
    return outs, [dq, dr] + [None] * (len(outs) - 2)
jvp_rules[qr_p] = qr_jvp
batch_rules[qr_p] = _batch_front(qr_p)


# ---- geqrf -------------------------------------------------------------------------------
geqrf_p = Primitive("geqrf", multiple_results=True)
def geqrf(x):
    """(a, taus) of x [..., m, n], LAPACK's geqrf as jax.lax.linalg.geqrf: r in the upper
    triangle of a, the Householder vectors below it, their factors in taus [..., min(m, n)]."""
    return tuple(geqrf_p.bind(x))

def geqrf_abstract_eval(x):
    _check_matrix("geqrf", x, square=False)
    m, n = x.shape[-2:]
    return [ShapedArray(x.shape, x.dtype, x.weak_type),
            ShapedArray(x.shape[:-2] + (min(m, n),), x.dtype, x.weak_type)]
abstract_eval_rules[geqrf_p] = geqrf_abstract_eval
def geqrf_jvp(primals, tangents):                      # none, as in JAX
    (x,), (x_dot,) = primals, tangents
    if nonzero(x_dot):
        raise NotImplementedError("geqrf (Householder form) is not differentiable, as in "
                                  "jax; differentiate qr (lax.linalg.qr, jnp.linalg.qr with "
                                  "mode 'reduced', 'complete' or 'r') instead")
    return geqrf_p.bind(x), [None, None]
jvp_rules[geqrf_p] = geqrf_jvp
batch_rules[geqrf_p] = _batch_front(geqrf_p)


# ---- eigh --------------------------------------------------------------------------------
eigh_p = Primitive("eigh", multiple_results=True)
def eigh(x, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: tuple[int, int] | None = None,
         implementation: EighImplementation | None = None):
    """(v, w) of Hermitian x [..., n, n], as jax.lax.linalg.eigh: x v[..., :, i] =
    w[..., i] v[..., :, i], w real and ascending, v unitary (columns of norm 1; their signs
    or phases are LAPACK's). With symmetrize_input, x is replaced by (x + xᴴ)/2; otherwise
    only its `lower` (or upper) triangle is read. subset_by_index (start, end) keeps
    eigenpairs start..end-1 (computed in full, then sliced; jax's CPU code refuses it).
    NaNs where LAPACK fails, as JAX. `implementation` (jax's QR / Jacobi / QDWH) is
    accepted: LAPACK's here."""
    _check_choice("eigh", "implementation", implementation, EighImplementation)
    if symmetrize_input:
        x = _symmetrized(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    if subset_by_index is not None:
        n = get_aval(w).shape[-1]
        start, end = _subset("eigh", subset_by_index, n)
        if (start, end) != (0, n):
            v = _block(v, cols=(start, end))
            w = so.slice_in_dim(w, start, end, axis=get_aval(w).ndim - 1)
    return v, w

def _subset(name: str, subset, k: int) -> tuple[int, int]:
    try:
        start, end = (int(i) for i in subset)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: subset_by_index must be a pair (start, end) of ints, "
                         f"got {subset!r}") from None
    if not 0 <= start < end <= k:
        raise ValueError(f"{name}: subset_by_index {subset!r} must satisfy 0 <= start < end "
                         f"<= {k}")
    return start, end

def eigh_abstract_eval(x, *, lower, sort_eigenvalues):
    _check_matrix("eigh", x)
    real = np.finfo(x.dtype).dtype if dtypes.is_complex(x.dtype) else x.dtype
    return [ShapedArray(x.shape, x.dtype, x.weak_type),
            ShapedArray(x.shape[:-1], real, x.weak_type)]
abstract_eval_rules[eigh_p] = eigh_abstract_eval
def eigh_jvp(primals, tangents, **params):       # dw = Re diag(Vᴴ dA V), dV = V (F ∘ Vᴴ dA V)
    # As jax's rule: it decomposes (A + Aᴴ)/2 and takes dA as it comes. With the default
    # symmetrize_input both are A and a Hermitian dA already; with symmetrize_input=False
    # and a non-Hermitian A, the derivatives (of every order) are jax's.
    (a,), (a_dot,) = primals, tangents
    v, w_real = eigh_p.bind(el.div(el.add(a, _H(a)), 2), **params)
    if not nonzero(a_dot):
        return [v, w_real], [None, None]
    aval = get_aval(a)
    n, dt = aval.shape[-1], aval.dtype
    w = _as(w_real, dt)
    eye = _eye_like(aval.shape, dt)
    # F_ij = 1/(w_j - w_i), i ≠ j, built with 1 on the diagonal so it divides by no zero there
    f = el.sub(el.integer_pow(el.add(eye, el.sub(_rows_of(w, n), _cols_of(w, n))), -1), eye)
    vdag_adot_v = _mm(_mm(_H(v), a_dot), v)            # Ȧ = Vᴴ dA V       [..., n, n]
    dv = _mm(v, el.mul(f, vdag_adot_v))
    dw = _diag(el.real(vdag_adot_v) if dtypes.is_complex(dt) else vdag_adot_v)
    return [v, w_real], [dv, dw]
jvp_rules[eigh_p] = eigh_jvp
batch_rules[eigh_p] = _batch_front(eigh_p)


# ---- svd ---------------------------------------------------------------------------------
svd_p = Primitive("svd", multiple_results=True)
def svd(x, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple[int, int] | None = None, algorithm: SvdAlgorithm | None = None):
    """(u, s, vh), or s alone without compute_uv, of x [..., m, n] as jax.lax.linalg.svd:
    x = u diag(s) vh, s [..., k] real and descending, k = min(m, n); u [..., m, m] and
    vh [..., n, n] with full_matrices, else [..., m, k] and [..., k, n]. subset_by_index
    (start, end) keeps singular triplets start..end-1 (needs full_matrices=False unless it
    is all of them; computed in full, then sliced). NaNs where LAPACK fails, as JAX.
    `algorithm` (jax's SvdAlgorithm) is accepted: LAPACK's gesdd here."""
    _check_choice("svd", "algorithm", algorithm, SvdAlgorithm)
    full_matrices, compute_uv = bool(full_matrices), bool(compute_uv)
    start = end = None
    aval = get_aval(x)
    if subset_by_index is not None and aval.ndim >= 2:       # (else the shape rule explains)
        k = min(aval.shape[-2:])
        start, end = _subset("svd", subset_by_index, k)
        if (start, end) == (0, k):
            start = end = None
        elif full_matrices:
            raise ValueError("svd: full_matrices and subset_by_index cannot both be set "
                             "(use full_matrices=False)")
    outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if start is not None:                              # s, u's columns, vh's rows
        nd = get_aval(outs[0]).ndim
        sliced = [so.slice_in_dim(outs[0], start, end, axis=nd - 1)]
        if compute_uv:
            sliced += [_block(outs[1], cols=(start, end)), _block(outs[2], rows=(start, end))]
        outs = sliced
    if compute_uv:
        s, u, vh = outs
        return u, s, vh
    return outs[0]

def svd_abstract_eval(x, *, full_matrices, compute_uv):
    _check_matrix("svd", x, square=False)
    *batch, m, n = x.shape
    batch, k = tuple(batch), min(m, n)
    real = np.finfo(x.dtype).dtype if dtypes.is_complex(x.dtype) else x.dtype
    s = ShapedArray(batch + (k,), real, x.weak_type)
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, ku), x.dtype, x.weak_type),
            ShapedArray(batch + (kv, n), x.dtype, x.weak_type)]
abstract_eval_rules[svd_p] = svd_abstract_eval
def svd_jvp(primals, tangents, *, full_matrices, compute_uv):   # see the module docstring
    (a,), (da,) = primals, tangents
    aval = get_aval(a)
    *_, m, n = aval.shape
    if not nonzero(da):
        outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv)
        return outs, [None] * len(outs)
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            "svd: the derivative of the singular vectors with full_matrices=True is "
            f"implemented for square matrices only (as in jax), got shape {aval.shape}; "
            "use full_matrices=False")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    dt, k = aval.dtype, min(m, n)
    ut, v = _H(u), _H(vt)
    ds_mat = _mm(_mm(ut, da), v)                       # Ṡ = Uᴴ dA V        [..., k, k]
    ds = _diag(el.real(ds_mat) if dtypes.is_complex(dt) else ds_mat)
    if not compute_uv:
        return [s], [ds]
    s_row, s_col = _rows_of(s, k), _cols_of(s, k)     # [i, j] -> s_j,  s_i
    eye_r = _eye_like(get_aval(s_row).shape, get_aval(s).dtype)
    s_diffs = el.mul(el.add(s_row, s_col), el.sub(s_row, s_col))    # s_j² - s_i²
    f = _as(el.sub(el.div(1, el.add(s_diffs, eye_r)), eye_r), dt)   # 0 on the diagonal
    s_row_c = _as(s_row, dt)
    dss = el.mul(s_row_c, ds_mat)                      # Ṡ S
    sds = el.mul(_as(s_col, dt), ds_mat)               # S Ṡ
    s_zero = lg.convert_element_type(lg.eq(s, 0), get_aval(s).dtype)
    s_inv = el.sub(el.div(1, el.add(s, s_zero)), s_zero)            # 1/s, 0 where s = 0
    s_inv_mat = el.mul(_as(eye_r, dt), _as(_rows_of(s_inv, k), dt))
    dudv_diag = el.mul(el.mul(el.sub(ds_mat, _H(ds_mat)), 0.5), s_inv_mat)
    du = _mm(u, el.add(el.mul(f, el.add(dss, _H(dss))), dudv_diag))
    dv = _mm(v, el.mul(f, el.add(sds, _H(sds))))
    if m > n:                                          # + (I - U Uᴴ) dA V S⁻¹
        dav = _mm(da, v)
        du = el.add(du, el.div(el.sub(dav, _mm(u, _mm(ut, dav))), _as(_rows_of(s, m), dt)))
    if n > m:                                          # + (I - V Vᴴ) dAᴴ U S⁻¹
        dahu = _mm(_H(da), u)
        dv = el.add(dv, el.div(el.sub(dahu, _mm(v, _mm(vt, dahu))), _as(_rows_of(s, n), dt)))
    return [s, u, vt], [ds, du, _H(dv)]
jvp_rules[svd_p] = svd_jvp
batch_rules[svd_p] = _batch_front(svd_p)


# ---- eig ---------------------------------------------------------------------------------
eig_p = Primitive("eig", multiple_results=True)
def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: EigImplementation | None = None,
        use_magma: bool | None = None):
    """[w, vl, vr] of a general square x [..., n, n], as jax.lax.linalg.eig (vl and vr only
    where asked for): x vr[..., :, i] = w[..., i] vr[..., :, i] and vlᴴ x = diag(w) vlᴴ, all
    complex, each vector of norm 1 with its largest component real (LAPACK's geev). The
    eigenvectors' derivatives need enable_eigvec_derivs=True, as in jax (they hold only for
    distinct eigenvalues); the eigenvalues' alone (no vectors asked for) always exist.
    `implementation` and `use_magma` (jax's GPU choices) are accepted: LAPACK's here."""
    _check_choice("eig", "implementation", implementation, EigImplementation)
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))

def _complex_dtype(dt):                                # eig's outputs: complex64 from 32 bits
    if dtypes.is_complex(dt):
        return np.dtype(dt)
    return np.dtype(np.complex128 if np.dtype(dt).itemsize >= 8 else np.complex64)

def eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                      enable_eigvec_derivs):
    _check_matrix("eig", x)
    dt = _complex_dtype(x.dtype)
    count = compute_left_eigenvectors + compute_right_eigenvectors
    return ([ShapedArray(x.shape[:-1], dt, x.weak_type)]
            + [ShapedArray(x.shape, dt, x.weak_type)] * count)
abstract_eval_rules[eig_p] = eig_abstract_eval

def _solve(a, b):                                      # a⁻¹ b from a's LU: x = U⁻¹ L⁻¹ P b
    lu_, _, perm = lu(a)
    pm = _permutation_matrix(perm, get_aval(a).shape[-1], get_aval(b).dtype)
    y = triangular_solve(lu_, _mm(_T(pm), b), left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)

def _eig_vec_jvp(w, v, da):
    """(dw, dv) for A v = v diag(w): with P = V⁻¹ dA V, dw = diag P, dv = V (F ∘ P) + v c,
    F_ij = 1/(w_j - w_i); c fixes geev's normalization (|vⱼ| = 1, its largest component
    real): cⱼ = -Re(vⱼᴴ uⱼ) - i Im(u_kj) / v_kj, k = argmax |vⱼ| (jax's rule)."""
    shape = get_aval(v).shape
    n, dt, nd = shape[-1], get_aval(v).dtype, len(shape)
    eye = _eye_like(shape, dt)
    f = el.sub(el.div(1, el.add(eye, el.sub(_rows_of(w, n), _cols_of(w, n)))), eye)
    p = _mm(_solve(v, da), v)
    u = _mm(v, el.mul(f, p))
    k = rd.argmax(el.abs(v), nd - 2, np.int32)                               # [..., n]
    rows = so.broadcasted_iota(np.int32, shape, nd - 2)
    mask = lg.convert_element_type(lg.eq(rows, _rows_of(k, n)), dt)
    col_sum = lambda z: rd.reduce_sum(z, axes=(nd - 2,))                     # noqa: E731
    c = el.complex(el.neg(el.real(col_sum(el.mul(el.conj(v), u)))),
                   el.div(el.neg(el.imag(col_sum(el.mul(mask, u)))),
                          el.real(col_sum(el.mul(mask, v)))))
    return _diag(p), el.add(u, el.mul(v, _rows_of(c, n)))

def eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
            enable_eigvec_derivs):
    (a,), (da,) = primals, tangents
    cl, cr = compute_left_eigenvectors, compute_right_eigenvectors
    if not nonzero(da):
        outs = eig_p.bind(a, compute_left_eigenvectors=cl, compute_right_eigenvectors=cr,
                          enable_eigvec_derivs=enable_eigvec_derivs)
        return outs, [None] * len(outs)
    if (cl or cr) and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on "
            "the input that fnad (as jax) cannot check; pass enable_eigvec_derivs=True to "
            "lax.linalg.eig to opt in, or differentiate the eigenvalues alone "
            "(jnp.linalg.eigvals)")
    outs = eig_p.bind(a, compute_left_eigenvectors=cl, compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    da = _as(da, get_aval(vr).dtype)
    if not (cl or cr):                                 # dw = diag(V⁻¹ dA V)
        return [w], [_diag(_mm(_solve(vr, da), vr))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if cl:                                             # left vectors: those of Aᴴ, w̄
        _, dvl = _eig_vec_jvp(el.conj(w), outs[1], _H(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if cr:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out
jvp_rules[eig_p] = eig_jvp
batch_rules[eig_p] = _batch_front(eig_p)


# ---- schur -------------------------------------------------------------------------------
schur_p = Primitive("schur", multiple_results=True)
def schur(x, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable=None):
    """(t, z) of a square x [..., n, n], as jax.lax.linalg.schur (LAPACK's gees): x = z t zᴴ
    with z unitary and t upper triangular for complex x, quasi-upper-triangular for real x
    (2×2 diagonal blocks for complex-conjugate eigenvalue pairs). Without
    compute_schur_vectors, (t,) (jax returns a one-element list). Neither t nor z is unique;
    not differentiable, as in jax. sort_eig_vals and select_callable (gees' eigenvalue
    ordering) are not implemented: an error, as jax's for sort_eig_vals."""
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("schur: sort_eig_vals and select_callable (ordering the "
                                  "eigenvalues on t's diagonal) are not implemented, as in "
                                  "jax; reorder t's diagonal blocks yourself if needed")
    return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors)))

def schur_abstract_eval(x, *, compute_schur_vectors):
    _check_matrix("schur", x)
    return [ShapedArray(x.shape, x.dtype, x.weak_type)] * (1 + compute_schur_vectors)
abstract_eval_rules[schur_p] = schur_abstract_eval
def schur_jvp(primals, tangents, *, compute_schur_vectors):   # none, as in JAX
    (x,), (x_dot,) = primals, tangents
    if nonzero(x_dot):
        raise NotImplementedError("schur is not differentiable, as in jax (its factors are "
                                  "not unique); differentiate a function of A that does not "
                                  "depend on the choice of factors (e.g. "
                                  "fnad.scipy.linalg.sqrtm, solve_sylvester), or apply "
                                  "lax.stop_gradient to schur's operand")
    outs = schur_p.bind(x, compute_schur_vectors=compute_schur_vectors)
    return outs, [None] * len(outs)
jvp_rules[schur_p] = schur_jvp
batch_rules[schur_p] = _batch_front(schur_p)

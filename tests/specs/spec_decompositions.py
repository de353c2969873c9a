"""Specs of the decompositions: cholesky, triangular_solve, lu (primitives/decompositions.py).

Matrices are drawn well conditioned: A = M Mᴴ + n·I for cholesky, a random matrix plus n·I
for the triangular and LU factors (so pivots and finite differences are stable).
References are numpy.linalg / scipy.linalg per matrix.
"""
import numpy as np
import scipy.linalg

from fnad.primitives import decompositions as dec
from specs import Arg, Spec

f32, c64 = np.float32, np.complex64


def _rand(rng, shape, dtype):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x


def spd(shape, dtype=f32):
    """Hermitian positive-definite [..., n, n]: M Mᴴ + n·I."""
    def draw(rng):
        m = _rand(rng, shape, dtype)
        n = shape[-1]
        return (m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)).astype(dtype)
    return Arg(shape, dtype, draw)


def well_conditioned(shape, dtype=f32):
    """A random [..., m, n] matrix plus n·I on its leading square block (diagonally dominant)."""
    def draw(rng):
        x = _rand(rng, shape, dtype)
        m, n = shape[-2:]
        return (x + max(m, n) * np.eye(m, n)).astype(dtype)
    return Arg(shape, dtype, draw)


# ---- cholesky ------------------------------------------------------------------------------
def _chol_ref(x):
    return np.linalg.cholesky((x + np.conj(np.swapaxes(x, -1, -2))) / 2).astype(x.dtype)


def chol(shape, dtype=f32, name="", **kw):
    return Spec(dec.cholesky_p, lambda x: dec.cholesky(x), _chol_ref, (spd(shape, dtype),),
                jax_fun=lambda jax, x: jax.lax.linalg.cholesky(x), name=name,
                fd_rtol=1e-4, fd_atol=1e-6, **kw)


# ---- triangular_solve --------------------------------------------------------------------
def _op(a, lower, transpose_a, conjugate_a, unit_diagonal):
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t * (1 - np.eye(n)) + np.eye(n)
    t = np.conj(t) if conjugate_a else t
    return np.swapaxes(t, -1, -2) if transpose_a else t


def ts(a_shape, b_shape, dtype=f32, name="", left_side=False, lower=False, transpose_a=False,
       conjugate_a=False, unit_diagonal=False, **kw):
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    vector = len(b_shape) == len(a_shape) - 1

    def ref(a, b):
        opa = _op(a, lower, transpose_a, conjugate_a and a.dtype.kind == "c", unit_diagonal)
        bb = b[..., None] if vector and left_side else b[..., None, :] if vector else b
        if left_side:                                  # op(a) x = b
            x = np.linalg.solve(opa, bb)
        else:                                          # x op(a) = b
            x = np.swapaxes(np.linalg.solve(np.swapaxes(opa, -1, -2),
                                            np.swapaxes(bb, -1, -2)), -1, -2)
        if vector:
            x = x[..., 0] if left_side else x[..., 0, :]
        return x.astype(b.dtype)

    return Spec(dec.triangular_solve_p, lambda a, b: dec.triangular_solve(a, b, **params), ref,
                (well_conditioned(a_shape, dtype), Arg(b_shape, dtype)),
                jax_fun=lambda jax, a, b: jax.lax.linalg.triangular_solve(a, b, **params),
                linear=(1,), name=name, rtol=1e-4, atol=1e-5, fd_rtol=1e-4, fd_atol=1e-6,
                **kw)


# ---- lu --------------------------------------------------------------------------------
def _lu_ref(x):
    *batch, m, n = x.shape
    lus = np.empty(x.shape, x.dtype)
    pivs = np.empty((*batch, min(m, n)), np.int32)
    perms = np.empty((*batch, m), np.int32)
    for idx in np.ndindex(*batch):
        lu, piv = scipy.linalg.lu_factor(x[idx], check_finite=False)
        perm = np.arange(m)
        for i, p in enumerate(piv):
            perm[[i, p]] = perm[[p, i]]
        lus[idx], pivs[idx], perms[idx] = lu, piv, perm
    return lus, pivs, perms


def lu(shape, dtype=f32, name="", **kw):
    return Spec(dec.lu_p, lambda x: dec.lu(x), _lu_ref, (well_conditioned(shape, dtype),),
                jax_fun=lambda jax, x: jax.lax.linalg.lu(x), name=name, rtol=1e-4, atol=1e-5,
                fd_rtol=1e-4, fd_atol=1e-6, **kw)


def lu_shuffled(shape, dtype=f32, name=""):
    """Rows of a well-conditioned matrix shuffled: pivoting must really permute."""
    def draw(rng):
        x = well_conditioned(shape, dtype).domain(rng)
        return x[..., rng.permutation(shape[-2]), :]
    return Spec(dec.lu_p, lambda x: dec.lu(x), _lu_ref, (Arg(shape, dtype, draw),),
                jax_fun=lambda jax, x: jax.lax.linalg.lu(x), name=name, rtol=1e-4, atol=1e-5,
                fd_rtol=1e-4, fd_atol=1e-6)


SPECS = [
    chol((3, 3), name="3x3"),
    chol((1, 1), name="1x1"),
    chol((2, 4, 4), name="batched"),
    chol((2, 1, 3, 3), name="two-batch-dims"),
    chol((3, 3), c64, name="complex64", rtol=1e-4, atol=1e-5),
    ts((3, 3), (3, 2), name="left-lower", left_side=True, lower=True),
    ts((3, 3), (3, 2), name="left-upper", left_side=True, lower=False),
    ts((3, 3), (4, 3), name="right-upper"),
    ts((3, 3), (4, 3), name="right-lower-T", lower=True, transpose_a=True),
    ts((3, 3), (3, 5), name="left-upper-T-unit", left_side=True, transpose_a=True,
       unit_diagonal=True),
    ts((4, 4), (2, 4), name="right-lower-unit", lower=True, unit_diagonal=True),
    ts((2, 3, 3), (2, 3, 4), name="batched-left-lower", left_side=True, lower=True),
    ts((2, 3, 3), (2, 1, 3), name="batched-right-upper-T", transpose_a=True),
    ts((3, 3), (3,), name="vector-left", left_side=True, lower=True),
    ts((2, 3, 3), (2, 3), name="batched-vector-right", transpose_a=True),
    ts((3, 3), (3, 2), c64, name="complex64-left-lower-conj", left_side=True, lower=True,
       conjugate_a=True),
    ts((3, 3), (2, 3), c64, name="complex64-right-upper-conjT", transpose_a=True,
       conjugate_a=True),
    ts((3, 3), (3, 2), c64, name="complex64-left-upper", left_side=True),
    lu((4, 4), name="4x4"),
    lu_shuffled((4, 4), name="4x4-pivoting"),
    lu_shuffled((2, 3, 3), name="batched-pivoting"),
    lu((3, 5), name="wide"),
    lu_shuffled((5, 3), name="tall-pivoting"),
    lu((1, 1), name="1x1"),
    lu_shuffled((3, 3), c64, name="complex64"),
]

"""Specs of qr, geqrf, eigh, svd, eig and schur (primitives/decompositions.py).

Q and R come out of LAPACK's Householder QR as jax's do (diag R real), so the specs return
them as they are. Eigenvectors and singular vectors are unique only up to a sign (a phase
for complex matrices) per column, so those specs return them with that gauge fixed the
same way in fnad, NumPy and jax: each column of v (of u) times conj(v₀ⱼ)/|v₀ⱼ|, its first
element then real and positive; vh's rows times the conjugate factor, so u diag(s) vh is
unchanged. eig's vectors are normalized by LAPACK's geev (norm 1, largest component real),
and its derivative is that of this choice (jax's), so they are compared as they are.
The extra columns of a full U (m > n) are any basis of the complement of its
first k: their spec returns the projector onto them, which is unique. Schur's T and Z are
not unique either: its spec returns Z T Zᴴ, Zᴴ Z and T below its first subdiagonal, which
are (a, I, 0).
Matrices are drawn with well-separated eigenvalues / singular values (so finite
differences and the 1/(wⱼ - wᵢ) terms are tame). References are numpy.linalg and scipy per
matrix.
"""
import numpy as np
import scipy.linalg

import fnad.numpy as fnp
from fnad import lax
from fnad.primitives import decompositions as dec
from specs import Arg, Spec

f32, f64, c64 = np.float32, np.float64, np.complex64


def _rand(rng, shape, dtype):
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x


def _unitary(rng, batch, n, dtype):
    q, _ = np.linalg.qr(_rand(rng, batch + (n, n), dtype))
    return q


def with_values(shape, values, dtype=f32, hermitian=False):
    """[..., m, n] matrices U diag(values) Vᴴ (U = V for hermitian) with random unitary U, V:
    eigenvalues / singular values as given."""
    def draw(rng):
        *batch, m, n = shape
        batch, k = tuple(batch), min(m, n)
        u = _unitary(rng, batch, m, dtype)[..., :k]
        v = u if hermitian else _unitary(rng, batch, n, dtype)[..., :k]
        x = (u * np.asarray(values)) @ np.conj(np.swapaxes(v, -1, -2))
        return x.astype(dtype)
    return Arg(shape, dtype, draw)


def _mT(np_, x):
    return np_.swapaxes(x, -1, -2)


def _phase(np_, row):                                  # conj(z)/|z|, elementwise
    return np_.conj(row) / np_.abs(row)


def fix_columns(np_, v):
    """v with each column times conj(v₀ⱼ)/|v₀ⱼ| (np_ is numpy, fnad.numpy or jax.numpy)."""
    return v * _phase(np_, v[..., :1, :])


def fix_svd(np_, u, s, vh, k):
    """(u, s, vh) with the gauge of u's first k columns fixed, vh's rows to match; a full
    u's remaining columns (m > k) as the projector onto them."""
    c = _phase(np_, u[..., :1, :k])                    # [..., 1, k]
    out = [u[..., :, :k] * c, s, vh[..., :k, :] * _mT(np_, np_.conj(c))]
    if u.shape[-1] > k:
        rest = u[..., :, k:]
        out.append(rest @ np_.conj(_mT(np_, rest)))
    if vh.shape[-2] > k:
        rest = vh[..., k:, :]
        out.append(np_.conj(_mT(np_, rest)) @ rest)
    return tuple(out)


# ---- qr --------------------------------------------------------------------------------
def _qr_ref(full_matrices, pivoting):
    def ref(x):
        *batch, m, n = x.shape
        outs = None
        for idx in np.ndindex(*batch):
            res = scipy.linalg.qr(x[idx], mode="full" if full_matrices else "economic",
                                  pivoting=pivoting, check_finite=False)
            if pivoting:
                res = res[:2] + (res[2].astype(np.int32),)
            if outs is None:
                outs = [np.empty(tuple(batch) + r.shape, r.dtype) for r in res]
            for o, r in zip(outs, res):
                o[idx] = r
        return tuple(outs)
    return ref


def qr(shape, dtype=f32, name="", full_matrices=True, pivoting=False, against_jax=True, **kw):
    """against_jax=False where jax's JVP is wrong or fails: with pivoting, for a wide matrix
    (its R₂ term reads the unpivoted A₂) and for a batch (it indexes dA with batched
    pivots); finite differences check fnad's there."""
    kwargs = dict(full_matrices=full_matrices, pivoting=pivoting)
    tol = dict(rtol=1e-4, atol=1e-5, fd_rtol=1e-4, fd_atol=1e-6)
    tol.update(kw)
    jax_fun = (lambda jax, x: jax.lax.linalg.qr(x, **kwargs)) if against_jax else None
    return Spec(dec.qr_p, lambda x: dec.qr(x, **kwargs), _qr_ref(full_matrices, pivoting),
                (Arg(shape, dtype, (-1, 1)),), jax_fun=jax_fun, name=name, **tol)


# ---- geqrf: LAPACK's own form, not differentiable (as jax) ----------------------------------
def _geqrf_ref(x):
    *batch, m, n = x.shape
    a, taus = np.empty(x.shape, x.dtype), np.empty(tuple(batch) + (min(m, n),), x.dtype)
    for idx in np.ndindex(*batch):
        (a[idx], taus[idx]), _ = scipy.linalg.qr(x[idx], mode="raw", check_finite=False)
    return a, taus


def geqrf(shape, dtype=f32, name=""):
    """Behind stop_gradient: its JVP raises for any tangent but a symbolic zero
    (tests/numpy/test_linalg_decompositions.py checks that error)."""
    def jax_geqrf(jax, x):
        a_t, taus = jax.numpy.linalg.qr(x, mode="raw")
        return jax.numpy.swapaxes(a_t, -1, -2), taus
    return Spec(dec.geqrf_p, lambda x: dec.geqrf(lax.stop_gradient(x)), _geqrf_ref,
                (Arg(shape, dtype, (-1, 1)),),
                jax_fun=jax_geqrf, diff=(), name=name, rtol=1e-4, atol=1e-5)


# ---- eigh ------------------------------------------------------------------------------
def _eigh_ref(x):
    w, v = np.linalg.eigh((x + np.conj(np.swapaxes(x, -1, -2))) / 2)
    return fix_columns(np, v).astype(x.dtype), w.astype(np.finfo(x.dtype).dtype)


def eigh(n, batch=(), dtype=f32, name="", **kw):
    def fun(x):
        v, w = dec.eigh(x)
        return fix_columns(fnp, v), w

    def jax_fun(jax, x):
        v, w = jax.lax.linalg.eigh(x)
        return fix_columns(jax.numpy, v), w
    values = np.linspace(-n, n, n) + 0.1 * np.sin(np.arange(n))      # gaps >= 1
    tol = dict(rtol=1e-4, atol=1e-5, fd_rtol=1e-4, fd_atol=1e-6)
    tol.update(kw)
    return Spec(dec.eigh_p, fun, _eigh_ref,
                (with_values(batch + (n, n), values, dtype, hermitian=True),),
                jax_fun=jax_fun, name=name, **tol)


def eigh_lower(n, lower, dtype=f32, name=""):
    """symmetrize_input=False: only the `lower` (or upper) triangle is read (the other one
    is garbage here). Values only: the JVP takes dA as it comes, as jax's, which is the
    derivative of the triangle read only for a Hermitian dA."""
    uplo = "L" if lower else "U"
    return Spec(dec.eigh_p, lambda x: dec.eigh(x, lower=lower, symmetrize_input=False)[1],
                lambda x: np.linalg.eigh(x, UPLO=uplo)[0].astype(np.finfo(x.dtype).dtype),
                (Arg((n, n), dtype, (-1, 1)),),
                jax_fun=lambda jax, x: jax.lax.linalg.eigh(x, lower=lower,
                                                           symmetrize_input=False)[1],
                diff=(), name=name, rtol=1e-4, atol=1e-5)


# ---- svd ---------------------------------------------------------------------------------
def _svd_ref(full_matrices, compute_uv):
    def ref(x):
        if not compute_uv:
            return np.linalg.svd(x, compute_uv=False).astype(np.finfo(x.dtype).dtype)
        u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
        k = min(x.shape[-2:])
        outs = fix_svd(np, u, s, vh, k)
        return tuple(o.astype(x.dtype if o is not s else np.finfo(x.dtype).dtype)
                     for o in outs)
    return ref


def svd(shape, dtype=f32, name="", full_matrices=False, compute_uv=True, **kw):
    kwargs = dict(full_matrices=full_matrices, compute_uv=compute_uv)
    k = min(shape[-2:])

    no_jvp = compute_uv and full_matrices and shape[-1] != shape[-2]   # as jax: an error

    def fun(x):
        out = dec.svd(lax.stop_gradient(x) if no_jvp else x, **kwargs)
        return fix_svd(fnp, *out, k) if compute_uv else out

    def jax_fun(jax, x):
        out = jax.lax.linalg.svd(x, **kwargs)
        return fix_svd(jax.numpy, *out, k) if compute_uv else out
    values = 1.0 + 1.5 * np.arange(k)[::-1]                        # 1, 2.5, 4, ...
    tol = dict(rtol=1e-4, atol=1e-5, fd_rtol=1e-4, fd_atol=1e-6)
    tol.update(kw)
    diff = () if no_jvp else None
    return Spec(dec.svd_p, fun, _svd_ref(full_matrices, compute_uv),
                (with_values(shape, values, dtype),), jax_fun=jax_fun, diff=diff, name=name,
                **tol)


# ---- eig ---------------------------------------------------------------------------------
def _eig_ref(left, right):
    def ref(x):
        dt = np.complex128 if x.dtype.itemsize >= 8 and x.dtype != c64 else np.complex64
        *batch, n, _ = x.shape
        outs = [np.empty(tuple(batch) + (n,), dt)]
        outs += [np.empty(x.shape, dt) for _ in range(left + right)]
        for idx in np.ndindex(*batch):
            res = scipy.linalg.eig(x[idx], left=left, right=right, check_finite=False)
            for o, r in zip(outs, res if isinstance(res, tuple) else (res,)):
                o[idx] = r
        return tuple(outs)
    return ref


def eig(shape, dtype=f32, name="", left=False, right=True, **kw):
    kwargs = dict(compute_left_eigenvectors=left, compute_right_eigenvectors=right,
                  enable_eigvec_derivs=True)
    n = shape[-1]
    values = np.linspace(1, 2 * n, n)                   # distinct, real: well separated
    tol = dict(rtol=1e-3, atol=1e-4, fd_rtol=1e-4, fd_atol=1e-6)
    tol.update(kw)

    def draw(rng):                                       # S diag(values) S⁻¹, S well-conditioned
        s = _rand(rng, shape, dtype) + 2 * np.eye(n)
        return ((s * values) @ np.linalg.inv(s)).astype(dtype)
    return Spec(dec.eig_p, lambda x: dec.eig(x, **kwargs), _eig_ref(left, right),
                (Arg(shape, dtype, draw),),
                jax_fun=lambda jax, x: jax.lax.linalg.eig(x, **kwargs), name=name, **tol)


# ---- schur: not unique, not differentiable (as jax) ----------------------------------------
def schur(shape, dtype=f32, name=""):
    """Behind stop_gradient: its JVP raises for any tangent but a symbolic zero
    (tests/test_scipy_linalg_schur.py checks that error)."""
    def parts(np_, t, z):
        zh = np_.conj(_mT(np_, z))
        return z @ t @ zh, zh @ z, np_.tril(t, -2)

    def ref(x):
        eye = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)
        return x, eye, np.zeros_like(x)
    return Spec(dec.schur_p, lambda x: parts(fnp, *dec.schur(lax.stop_gradient(x))), ref,
                (Arg(shape, dtype, (-1, 1)),),
                jax_fun=lambda jax, x: parts(jax.numpy, *jax.lax.linalg.schur(x)),
                diff=(), name=name, rtol=1e-4, atol=1e-5)


SPECS = [
    qr((4, 3), name="tall-reduced", full_matrices=False),
    qr((4, 3), name="tall-full"),
    qr((3, 3), name="square"),
    qr((3, 5), name="wide"),
    qr((3, 5), name="wide-reduced", full_matrices=False),
    qr((2, 5, 3), name="batched-tall-full"),
    qr((2, 1, 3, 4), name="two-batch-dims-wide"),
    qr((4, 3), c64, name="complex64-tall-full"),
    qr((3, 4), c64, name="complex64-wide"),
    qr((3, 3), c64, name="complex64-square-reduced", full_matrices=False),
    qr((5, 3), name="pivoting-tall", pivoting=True),
    qr((3, 5), name="pivoting-wide", pivoting=True, full_matrices=False, against_jax=False),
    qr((4, 4), c64, name="pivoting-complex64", pivoting=True),
    qr((2, 4, 3), c64, name="pivoting-complex64-batched", pivoting=True, against_jax=False),
    geqrf((4, 3), name="tall"),
    geqrf((2, 3, 5), c64, name="complex64-batched-wide"),
    eigh(3, name="3x3"),
    eigh(1, name="1x1"),
    eigh(4, (2,), name="batched"),
    eigh(3, (2, 1), name="two-batch-dims"),
    eigh(4, dtype=c64, name="complex64-hermitian", rtol=1e-3, atol=1e-4),
    eigh(3, (2,), dtype=c64, name="complex64-batched", rtol=1e-3, atol=1e-4),
    eigh_lower(4, True, name="lower-triangle"),
    eigh_lower(4, False, name="upper-triangle"),
    eigh_lower(3, True, c64, name="complex64-lower-triangle"),
    svd((4, 3), name="tall"),
    svd((3, 3), name="values-only", compute_uv=False),
    svd((3, 5), name="wide"),
    svd((3, 3), name="square-full", full_matrices=True),
    svd((4, 2), name="tall-full", full_matrices=True),
    svd((2, 4), name="wide-full", full_matrices=True),
    svd((2, 4, 3), name="batched-values-only", compute_uv=False),
    svd((2, 3, 4), name="batched-wide"),
    svd((3, 2), c64, name="complex64-tall", rtol=1e-3, atol=1e-4),
    svd((2, 3), c64, name="complex64-wide", rtol=1e-3, atol=1e-4),
    svd((3, 3), c64, name="complex64-values-only", compute_uv=False, rtol=1e-3, atol=1e-4),
    eig((3, 3), name="right"),
    eig((4, 4), name="values-only", right=False),
    eig((3, 3), name="left-and-right", left=True),
    eig((2, 3, 3), name="batched-left", left=True, right=False),
    eig((3, 3), c64, name="complex64-right"),
    eig((2, 3, 3), c64, name="complex64-batched-values-only", right=False),
    schur((2, 4, 4), name="batched"),
]

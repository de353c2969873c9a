"""fnad.scipy.sparse.linalg: iterative solvers of A x = b, as jax.scipy.sparse.linalg.

`cg` (A Hermitian positive definite), `bicgstab` and `gmres` (any nonsingular A). A is a
square matrix or a function computing A @ x on a pytree of arrays shaped like b; `M`
(the same kinds) is a preconditioner approximating A⁻¹. Each solve is a `lax.while_loop`
wrapped in `lax.custom_linear_solve`, so it is differentiated implicitly (dx solves
A dx = db - dA x; reverse mode solves with Aᵀ by the same method), not through the loop.
They stop when the residual's norm is at most max(tol·‖b‖, atol), or after `maxiter`
iterations (10 · the size of b by default); as JAX's, `cg` and `bicgstab` return
(x, None) and `gmres` (x, info) with info -1 where x has NaNs, else 0.

The iterations are those of JAX (and SciPy): CG and BiCGSTAB step for step; GMRES builds
the Krylov basis by Arnoldi with two passes of classical Gram-Schmidt per vector and
solves its small least-squares problem either with normal equations after the restart
("batched") or by Givens rotations as the basis grows ("incremental").
"""
from __future__ import annotations

import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax, tree_util
from fnad.core import get_aval

__all__ = ["bicgstab", "cg", "gmres"]


# ---- pytree vector algebra ----------------------------------------------------------------
def _leaves(x):
    return tree_util.tree_leaves(x)


def _add(x, y):
    return tree_util.tree_map(operator.add, x, y)


def _sub(x, y):
    return tree_util.tree_map(operator.sub, x, y)


def _scale(a, x):
    return tree_util.tree_map(lambda v: a * v, x)


def _dot_real(x, y):
    """Re Σ conj(x)·y over the leaves (the imaginary cross terms dropped): a real scalar."""
    def one(u, v):
        out = jnp.vdot(jnp.real(u), jnp.real(v), precision=lax.Precision.HIGHEST)
        if jnp.iscomplexobj(u) or jnp.iscomplexobj(v):
            out = out + jnp.vdot(jnp.imag(u), jnp.imag(v), precision=lax.Precision.HIGHEST)
        return out
    return sum(one(u, v) for u, v in zip(_leaves(x), _leaves(y)))


def _dot(x, y):
    """Σ conj(x)·y over the leaves."""
    return sum(jnp.vdot(u, v, precision=lax.Precision.HIGHEST)
               for u, v in zip(_leaves(x), _leaves(y)))


def _norm(x):
    return jnp.sqrt(_dot_real(x, x))


def _operator(what: str, f):
    """A (a function, a square matrix, or anything with @) as a function of x."""
    if callable(f):
        return f
    shape = getattr(f, "shape", None)
    if shape is None and not isinstance(f, np.ndarray):
        raise TypeError(f"{what}: the linear operator must be a function or a square "
                        f"matrix, got {type(f).__name__}")
    if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
        raise ValueError(f"{what}: the linear operator must be a square matrix, but has "
                         f"shape {tuple(shape)}")
    a = jnp.asarray(f) if isinstance(f, np.ndarray) else f
    return lambda x: jnp.matmul(a, x, precision=lax.Precision.HIGHEST)


def _identity(x):
    return x


def _setup(what: str, A, b, x0, maxiter, M):
    if x0 is None:
        x0 = tree_util.tree_map(jnp.zeros_like, b)
    if tree_util.tree_structure(x0) != tree_util.tree_structure(b):
        raise ValueError(f"{what}: x0 and b must have matching tree structure: "
                         f"{tree_util.tree_structure(x0)} vs {tree_util.tree_structure(b)}")
    shapes = [jnp.shape(v) for v in _leaves(b)]
    if [jnp.shape(v) for v in _leaves(x0)] != shapes:
        raise ValueError(f"{what}: arrays in x0 and b must have matching shapes: "
                         f"{[jnp.shape(v) for v in _leaves(x0)]} vs {shapes}")
    size = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)
    if maxiter is None:
        maxiter = 10 * size                                  # as SciPy
    M = _identity if M is None else _operator(what, M)
    return _operator(what, A), x0, maxiter, M, size


def _dtype_of(tree):
    return jnp.result_type(*_leaves(tree))


# ---- conjugate gradients -------------------------------------------------------------------
def _cg(A, b, x0, *, maxiter, tol, atol, M):
    bb = _dot_real(b, b)
    limit = jnp.maximum(tol ** 2 * bb, atol ** 2)            # on ‖r‖²
    r0 = _sub(b, A(x0))
    z0 = M(r0)
    dtype = _dtype_of(z0)
    gamma0 = _dot_real(r0, z0).astype(dtype)

    def cond(state):
        _, r, gamma, _, k = state
        rr = jnp.real(gamma) if M is _identity else _dot_real(r, r)
        return (rr > limit) & (k < maxiter)

    def body(state):
        x, r, gamma, p, k = state
        ap = A(p)
        alpha = gamma / _dot_real(p, ap).astype(dtype)
        x = _add(x, _scale(alpha, p))
        r = _sub(r, _scale(alpha, ap))
        z = M(r)
        gamma_new = _dot_real(r, z).astype(dtype)
        p = _add(z, _scale(gamma_new / gamma, p))
        return x, r, gamma_new, p, k + 1
    return lax.while_loop(cond, body, (x0, r0, gamma0, z0, 0))[0]


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Conjugate gradients for A x = b, A Hermitian positive definite (jax's cg):
    returns (x, None)."""
    A, x0, maxiter, M, _ = _setup("cg", A, b, x0, maxiter, M)
    real = all(not jnp.iscomplexobj(v) for v in _leaves(b))

    def solve(op, rhs):
        return _cg(op, rhs, x0, maxiter=maxiter, tol=tol, atol=atol, M=M)
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=real)
    return x, None


# ---- BiCGSTAB -------------------------------------------------------------------------------
def _bicgstab(A, b, x0, *, maxiter, tol, atol, M):
    bb = _dot_real(b, b)
    limit = jnp.maximum(tol ** 2 * bb, atol ** 2)
    r0 = _sub(b, A(x0))
    one = jnp.ones((), _dtype_of(b))

    def cond(state):
        _, r, *_, k = state
        return (_dot_real(r, r) > limit) & (k < maxiter) & (k >= 0)

    def body(state):
        x, r, rhat, alpha, omega, rho, p, q, k = state
        rho_new = _dot(rhat, r)
        beta = rho_new / rho * alpha / omega
        p = _add(r, _scale(beta, _sub(p, _scale(omega, q))))
        phat = M(p)
        q = A(phat)
        alpha = rho_new / _dot(rhat, q)
        s = _sub(r, _scale(alpha, q))
        done = _dot_real(s, s) < limit                       # converged half-way
        shat = M(s)
        t = A(shat)
        omega = _dot(t, s) / _dot(t, t)
        half = _add(x, _scale(alpha, phat))
        x = tree_util.tree_map(lambda h, f: jnp.where(done, h, f), half,
                               _add(half, _scale(omega, shat)))
        r = tree_util.tree_map(lambda a, c: jnp.where(done, a, c), s,
                               _sub(s, _scale(omega, t)))
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)   # breakdowns end the loop
        k = jnp.where(rho_new == 0, -10, k)
        return x, r, rhat, alpha, omega, rho_new, p, q, k
    init = (x0, r0, r0, one, one, one, r0, r0, 0)
    return lax.while_loop(cond, body, init)[0]


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """BiCGSTAB for A x = b, any nonsingular A (jax's bicgstab): returns (x, None)."""
    A, x0, maxiter, M, _ = _setup("bicgstab", A, b, x0, maxiter, M)

    def solve(op, rhs):
        return _bicgstab(op, rhs, x0, maxiter=maxiter, tol=tol, atol=atol, M=M)
    return lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve), None


# ---- GMRES ----------------------------------------------------------------------------------
def _normalized(v, thresh=None):
    """(v / ‖v‖, ‖v‖), or (0, 0) where ‖v‖ is at most `thresh` (machine epsilon)."""
    n = _norm(v)
    dtype = _dtype_of(v)
    if thresh is None:
        thresh = jnp.finfo(get_aval(n).dtype).eps
    ok = n > jnp.real(jnp.asarray(thresh)).astype(get_aval(n).dtype)
    safe = jnp.where(ok, n, 1.0).astype(dtype)
    return (tree_util.tree_map(lambda y: jnp.where(ok, y / safe, 0), v),
            jnp.where(ok, n, 0.0))


def _columns_dot(V, v):
    """Vᴴ v: the overlaps of v with the columns (last axis) of the basis V (a pytree)."""
    return sum(jnp.einsum("...n,...->n", jnp.conj(X), y, precision=lax.Precision.HIGHEST)
               for X, y in zip(_leaves(V), _leaves(v)))


def _combine(V, h):
    """V h over the columns of the basis."""
    return tree_util.tree_map(lambda X: jnp.matmul(X, h, precision=lax.Precision.HIGHEST), V)


def _gram_schmidt(V, v, vnorm):
    """v orthogonalized against V's columns by classical Gram-Schmidt, repeated once when
    the first pass cancelled more than half of v (‖v'‖ < ‖v‖/√2), as JAX and SciPy."""
    h = _columns_dot(V, v)
    v = _sub(v, _combine(V, h))
    _, n1 = _normalized(v)
    again = n1 < vnorm / np.sqrt(2.0)
    h2 = jnp.where(again, _columns_dot(V, v), jnp.zeros_like(h))
    return _sub(v, _combine(V, h2)), h + h2


def _arnoldi_step(k, A, M, V, H):
    """Column k+1 of the Krylov basis from M A V[:, k], and its overlaps as row k of H."""
    dtype = _dtype_of(V)
    v = M(A(tree_util.tree_map(lambda X: X[..., k], V)))
    _, n0 = _normalized(v)
    v, h = _gram_schmidt(V, v, n0)
    unit, n1 = _normalized(v, thresh=jnp.finfo(dtype).eps * n0)
    V = tree_util.tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit)
    h = h.at[k + 1].set(n1.astype(dtype))
    return V, H.at[k, :].set(h), n1 == 0


def _basis(residual, restart):
    """The Krylov basis: each leaf with a trailing axis of restart + 1 columns, the first
    the unit residual."""
    return tree_util.tree_map(
        lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)), residual)


def _restart_batched(A, b, x0, unit_r, r_norm, ptol, restart, M):
    """One GMRES cycle: `restart` Arnoldi steps (fewer at a breakdown), then the small
    least-squares problem min ‖β e₁ - Hᵀ y‖ by its normal equations."""
    dtype = _dtype_of(b)
    V = _basis(unit_r, restart)
    H = jnp.eye(restart, restart + 1, dtype=dtype)

    def cond(s):
        return (s[3] < restart) & ~s[2]

    def body(s):
        V, H, _, k = s
        V, H, broke = _arnoldi_step(k, A, M, V, H)
        return V, H, broke, k + 1
    V, H, _, _ = lax.while_loop(cond, body, (V, H, False, 0))
    beta = jnp.zeros((restart + 1,), dtype).at[0].set(r_norm.astype(dtype))
    Ht = H.T
    y = jnp.linalg.solve(jnp.matmul(jnp.conj(H), Ht, precision=lax.Precision.HIGHEST),
                         jnp.matmul(jnp.conj(H), beta, precision=lax.Precision.HIGHEST))
    return _finish(A, b, x0, V, y, M)


def _givens(a, b):
    """(c, s) with [[c̄, -s̄], [s, c]] [a, b] = [r, 0]."""
    b_zero = jnp.abs(b) == 0
    swap = jnp.abs(a) < jnp.abs(b)
    t = -jnp.where(swap, a, b) / jnp.where(swap, b, jnp.where(b_zero, 1, a))
    r = lax.rsqrt(1 + jnp.abs(t) ** 2).astype(get_aval(t).dtype)
    c = jnp.where(b_zero, 1, jnp.where(swap, r * t, r))
    s = jnp.where(b_zero, 0, jnp.where(swap, r, r * t))
    return c, s


def _rotate(v, i, c, s):
    x, y = v[i], v[i + 1]
    v = v.at[i].set(jnp.conj(c) * x - jnp.conj(s) * y)
    return v.at[i + 1].set(s * x + c * y)


def _restart_incremental(A, b, x0, unit_r, r_norm, ptol, restart, M):
    """One GMRES cycle with the QR factorization of H kept by Givens rotations as the
    basis grows, stopping early once the (rotated) residual is below `ptol`."""
    dtype = _dtype_of(b)
    V = _basis(unit_r, restart)
    R = jnp.eye(restart, restart + 1, dtype=dtype)
    rots = jnp.zeros((restart, 2), dtype)
    beta = jnp.zeros((restart + 1,), dtype).at[0].set(r_norm.astype(dtype))

    def cond(s):
        return (s[0] < restart) & (s[1] > ptol)

    def body(s):
        k, _, V, R, beta, rots = s
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row = lax.fori_loop(0, k, lambda i, row: _rotate(row, i, rots[i, 0], rots[i, 1]),
                            H[k, :])
        c, sn = _givens(row[k], row[k + 1])
        rots = rots.at[k, :].set(jnp.stack([c, sn]))
        R = R.at[k, :].set(_rotate(row, k, c, sn))
        beta = _rotate(beta, k, c, sn)
        return k + 1, jnp.abs(beta[k + 1]), V, R, beta, rots
    _, _, V, R, beta, _ = lax.while_loop(cond, body, (0, r_norm, V, R, beta, rots))
    y = lax.linalg.triangular_solve(R[:, :-1], beta[:-1], left_side=True, lower=True,
                                    transpose_a=True)
    return _finish(A, b, x0, V, y, M)


def _finish(A, b, x0, V, y, M):
    x = _add(x0, tree_util.tree_map(
        lambda X: jnp.matmul(X[..., :-1], y, precision=lax.Precision.HIGHEST), V))
    unit_r, r_norm = _normalized(M(_sub(b, A(x))))
    return x, unit_r, r_norm


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """GMRES for A x = b, any nonsingular A (jax's gmres): cycles of `restart` Arnoldi
    steps, at most `maxiter` cycles; returns (x, info), info -1 if x has NaNs else 0."""
    methods = {"batched": _restart_batched, "incremental": _restart_incremental}
    if solve_method not in methods:
        raise ValueError(f"gmres: invalid solve_method {solve_method!r}, must be either "
                         "'incremental' or 'batched'")
    A, x0, maxiter, M, size = _setup("gmres", A, b, x0, maxiter, M)
    restart = min(int(restart), size)
    b_norm = _norm(b)
    atol = jnp.maximum(tol * b_norm, atol)
    ptol = _norm(M(b)) * jnp.minimum(1.0, atol / b_norm)
    cycle = methods[solve_method]

    def solve(op, rhs):
        unit_r, r_norm = _normalized(M(_sub(rhs, op(x0))))

        def cond(s):
            return (s[1] < maxiter) & (s[3] > atol)

        def body(s):
            x, k, u, n = s
            x, u, n = cycle(op, rhs, x, u, n, ptol, restart, M)
            return x, k + 1, u, n
        return lax.while_loop(cond, body, (x0, 0, unit_r, r_norm))[0]
    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, jnp.where(jnp.isnan(_norm(x)), -1, 0)

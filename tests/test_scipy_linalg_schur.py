"""fnad.scipy.linalg's Schur-based functions (fnad/scipy/_schur.py) and lax.linalg.schur.

Values against jax.scipy.linalg (and SciPy): schur by its properties (a = Z T Zᴴ, Z
unitary, T (quasi-)triangular with a's eigenvalues), since its factors are not unique;
rsf2csf elementwise on the same real Schur form; sqrtm (X X = a), funm (exp against expm)
and solve_sylvester (both methods) elementwise. Derivatives of sqrtm and solve_sylvester
(JAX has none in A) against central finite differences in float64, reverse mode against
forward mode (⟨ȳ, J ẋ⟩ = ⟨Jᵀ ȳ, ẋ⟩), a second-order one; jit, vmap, and the errors.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import fnad
import fnad.numpy as fnp
from checks import rand, raises_with, traced, x64_everywhere
from fnad import lax
from fnad.scipy import linalg as fl

jax = pytest.importorskip("jax", reason="jax not installed: the oracle of these tests")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402

f32, f64, c64, c128 = np.float32, np.float64, np.complex64, np.complex128
TOL = {f32: 2e-4, c64: 2e-4, f64: 1e-10, c128: 1e-10}


def _H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _eig_sorted(x):
    w = np.linalg.eigvals(np.asarray(x, np.complex128))
    return np.sort_complex(np.round(w, 6))


def _sylvester_problem(m, n, dtype, seed=0, batch=()):
    """A, B with eigenvalues around m and n (A + B well away from singular), C."""
    A = rand(batch + (m, m), dtype, seed) + m * np.eye(m)
    B = rand(batch + (n, n), dtype, seed + 1) + n * np.eye(n)
    return A.astype(dtype), B.astype(dtype), rand(batch + (m, n), dtype, seed + 2)


# ---- schur and rsf2csf ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype,output", [(f32, "real"), (f32, "complex"), (c64, "real"),
                                          (f64, "real"), (c128, "complex")])
def test_schur_factors_reconstruct_a_and_match_jax_kind(dtype, output):
    with x64_everywhere():
        a = rand((2, 5, 5), dtype, seed=3)
        T, Z = fl.schur(a, output=output)
        jT, jZ = jsl.schur(a[0], output=output)
        T, Z = np.asarray(T), np.asarray(Z)
    assert T.dtype == Z.dtype == jT.dtype and T.shape == a.shape
    tol = TOL[dtype]
    np.testing.assert_allclose(Z @ T @ _H(Z), a, atol=10 * tol)
    np.testing.assert_allclose(_H(Z) @ Z, np.broadcast_to(np.eye(5), a.shape), atol=10 * tol)
    triangular = T.dtype.kind == "c"                  # complex: upper; real: quasi-upper
    assert not np.any(np.tril(T, -1 if triangular else -2))
    if not triangular:                                # 2×2 blocks never touch
        sub = np.diagonal(T, -1, -2, -1) != 0
        assert not np.any(sub[..., 1:] & sub[..., :-1])
    for i in range(2):                                # T's eigenvalues are a's
        np.testing.assert_allclose(_eig_sorted(T[i]), _eig_sorted(a[i]), atol=1e-4)
    np.testing.assert_allclose(_eig_sorted(T[0]), _eig_sorted(jT), atol=1e-4)


def test_lax_schur_without_vectors_and_its_errors():
    a = rand((4, 4), f32)
    t, = lax.linalg.schur(a, compute_schur_vectors=False)
    np.testing.assert_allclose(np.asarray(t), np.asarray(lax.linalg.schur(a)[0]))
    raises_with(lambda: lax.linalg.schur(rand((2, 3), f32)), "schur", "square", "(2, 3)")
    raises_with(lambda: lax.linalg.schur(a, sort_eig_vals=True), "sort_eig_vals",
                exc=NotImplementedError)
    raises_with(lambda: lax.linalg.schur(a, select_callable=lambda w: w.real > 0),
                "select_callable", exc=NotImplementedError)
    for f in (lambda x: fl.schur(x)[0], lambda x: fl.funm(x, fnp.exp)):  # no derivative
        raises_with(lambda: fnad.grad(lambda x: fnp.sum(fnp.real(f(x))))(a),
                    "schur is not differentiable", exc=NotImplementedError)
    raises_with(lambda: fl.schur(a, output="upper"), "'real' or 'complex'", "'upper'",
                exc=ValueError)


@pytest.mark.parametrize("dtype", [f32, f64])
def test_rsf2csf_matches_jax_on_the_same_real_schur_form(dtype):
    with x64_everywhere():
        a = rand((6, 6), dtype, seed=5)                   # complex pairs: 2×2 blocks
        T, Z = sla.schur(a.astype(np.float64))
        T, Z = T.astype(dtype), Z.astype(dtype)
        Tc, Zc = (np.asarray(x) for x in fl.rsf2csf(T, Z))
        jTc, jZc = (np.asarray(x) for x in jsl.rsf2csf(T, Z))
    assert Tc.dtype == jTc.dtype == (c64 if dtype == f32 else c128)
    tol = TOL[dtype]
    np.testing.assert_allclose(Tc, jTc, atol=10 * tol)
    np.testing.assert_allclose(Zc, jZc, atol=10 * tol)
    assert not np.any(np.tril(Tc, -1))
    np.testing.assert_allclose(Zc @ Tc @ _H(Zc), a, atol=10 * tol)
    raises_with(lambda: fl.rsf2csf(T, Z[:5, :5]), "same matrix size", exc=ValueError)
    raises_with(lambda: fl.rsf2csf(T[:, :5], Z), "T must be a square", exc=ValueError)


# ---- sqrtm and funm ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [f32, f64, c64])
def test_sqrtm_squares_to_a_and_matches_jax(dtype):
    with x64_everywhere():
        a = rand((5, 5), dtype, seed=7)
        X = np.asarray(fl.sqrtm(a))
        jX = np.asarray(jsl.sqrtm(a))
    assert X.dtype == jX.dtype
    tol = TOL[dtype]
    np.testing.assert_allclose(X @ X, a, atol=10 * tol)
    np.testing.assert_allclose(X, jX, atol=10 * tol)
    raises_with(lambda: fl.sqrtm(a, blocksize=2), "blocksize", exc=NotImplementedError)
    raises_with(lambda: fl.sqrtm(a[:, :4]), "sqrtm", "square", "(5, 4)", exc=ValueError)


@pytest.mark.parametrize("dtype", [f32, f64])
def test_funm_of_exp_is_expm_and_matches_jax(dtype):
    with x64_everywhere():
        a = rand((5, 5), dtype, seed=11)
        F = np.asarray(fl.funm(a, fnp.exp))
        jF = np.asarray(jsl.funm(a, jnp.exp))
        F2, err = fl.funm(a, fnp.sin, disp=False)
    assert F.dtype == jF.dtype
    tol = TOL[dtype]
    np.testing.assert_allclose(F, sla.expm(a.astype(np.float64)), atol=10 * tol)
    np.testing.assert_allclose(F, jF, atol=10 * tol)
    np.testing.assert_allclose(np.asarray(F2), sla.sinm(a.astype(np.float64)), atol=10 * tol)
    eps = np.finfo(dtype).eps
    assert eps <= float(err) < 1e3 * eps                   # SciPy's estimate, distinct eigs
    raises_with(lambda: fl.funm(a[0], fnp.exp), "funm", "square", exc=ValueError)


# ---- solve_sylvester -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype,method", [(f32, "schur"), (f64, "schur"), (c64, "schur"),
                                          (f64, "eigen")])
def test_solve_sylvester_matches_scipy_and_jax(dtype, method):
    with x64_everywhere():
        A, B, C = _sylvester_problem(4, 3, dtype)
        X = np.asarray(fl.solve_sylvester(A, B, C, method=method))
        jX = np.asarray(jsl.solve_sylvester(A, B, C, method=method))
    assert X.dtype == jX.dtype == np.dtype(dtype)
    tol = TOL[dtype]
    np.testing.assert_allclose(X, sla.solve_sylvester(A, B, C), atol=tol)
    np.testing.assert_allclose(X, jX, atol=tol)


def test_solve_sylvester_nan_where_eigenvalues_cancel_and_shape_errors():
    A, B, C = np.diag([1., 2.]), np.diag([-1., 3.]), np.ones((2, 2))   # λ₁(A) + λ₁(B) = 0
    assert np.all(np.isnan(np.asarray(fl.solve_sylvester(A, B, C))))
    assert np.all(np.isfinite(np.asarray(fl.solve_sylvester(A, B + 1, C))))
    raises_with(lambda: fl.solve_sylvester(A, B, np.ones((2, 3))), "incompatible shapes",
                "[..., 2, 2]", exc=ValueError)
    raises_with(lambda: fl.solve_sylvester(np.ones((2, 3)), B, C), "A must be a square",
                exc=ValueError)
    raises_with(lambda: fl.solve_sylvester(A, B, C, method="lu"), "'schur' or 'eigen'",
                exc=ValueError)


# ---- derivatives (float64) -----------------------------------------------------------------
def _fd(f, args, tangents, eps=1e-6):
    plus = f(*[a + eps * t for a, t in zip(args, tangents)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


CASES = {   # name: (fnad function, SciPy function, argument dtypes)
    "sqrtm": (fl.sqrtm, sla.sqrtm, (f64,)),
    "sqrtm-complex": (fl.sqrtm, sla.sqrtm, (c128,)),
    "solve_sylvester": (fl.solve_sylvester, sla.solve_sylvester, (f64, f64, f64)),
    "solve_sylvester-complex": (fl.solve_sylvester, sla.solve_sylvester, (c128, c128, c128)),
}


@pytest.mark.parametrize("name", CASES)
def test_jvp_matches_finite_differences_and_grad_matches_jvp(name):
    f, ref, kinds = CASES[name]
    with x64_everywhere():
        args = _sylvester_problem(4, 3, kinds[0], seed=13)[:len(kinds)]
        tangents = [rand(a.shape, a.dtype, seed=20 + i) for i, a in enumerate(args)]
        y, y_dot = fnad.jvp(f, tuple(args), tuple(tangents))
        np.testing.assert_allclose(np.asarray(y_dot), _fd(ref, args, tangents),
                                   rtol=1e-6, atol=1e-7)
        w = rand(np.shape(y), np.asarray(y).dtype, seed=30)
        g = fnad.grad(lambda *xs: fnp.sum(fnp.real(f(*xs) * w)),
                      argnums=tuple(range(len(args))))(*args)
    lhs = np.real(np.sum(np.asarray(y_dot) * w))                     # ⟨w, J ẋ⟩
    rhs = sum(np.real(np.sum(np.asarray(gi) * t)) for gi, t in zip(g, tangents))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9)


def test_sqrtm_second_derivative_matches_finite_differences_of_grad():
    with x64_everywhere():
        a = rand((4, 4), f64, seed=17) + 4 * np.eye(4)
        t, w = rand((4, 4), f64, seed=18), rand((4, 4), f64, seed=19)
        grad = fnad.grad(lambda x: fnp.sum(fnp.real(fl.sqrtm(x)) * w))
        _, hvp = fnad.jvp(grad, (a,), (t,))
        np.testing.assert_allclose(np.asarray(hvp), _fd(grad, (a,), (t,)), atol=1e-7)


# ---- jit and vmap ----------------------------------------------------------------------------
FUNS = {
    "schur": lambda a, b, c: fl.schur(a)[0],
    "rsf2csf": lambda a, b, c: fl.rsf2csf(*fl.schur(a))[0],
    "sqrtm": lambda a, b, c: fl.sqrtm(a),
    "funm": lambda a, b, c: fl.funm(a, fnp.exp),
    "solve_sylvester": lambda a, b, c: fl.solve_sylvester(a, b, c),
    "solve_sylvester-eigen": lambda a, b, c: fl.solve_sylvester(a, b, c, method="eigen"),
    "grad-solve_sylvester": fnad.grad(lambda a, b, c: fnp.sum(fl.solve_sylvester(a, b, c) ** 2),
                                      argnums=(0, 1, 2)),
    "grad-sqrtm": lambda a, b, c: fnad.grad(lambda x: fnp.sum(fnp.abs(fl.sqrtm(x)) ** 2))(a),
}


def test_jit_matches_eager():
    A, B, C = _sylvester_problem(4, 3, f32, seed=23)
    for name, f in FUNS.items():
        want = fnad.tree_util.tree_leaves(f(A, B, C))
        got = fnad.tree_util.tree_leaves(traced(f)(A, B, C))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5, err_msg=name)


def test_vmap_matches_python_loop():
    A, B, C = _sylvester_problem(4, 3, f32, seed=29, batch=(3,))
    B = B[0]                                                 # one B for the whole batch
    for name, f in FUNS.items():
        got = fnad.vmap(f, in_axes=(0, None, 0))(A, B, C)
        for i in range(3):
            want = f(A[i], B, C[i])
            for g, w in zip(fnad.tree_util.tree_leaves(got), fnad.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(np.asarray(g)[i], np.asarray(w), atol=1e-5,
                                           err_msg=name)
    X = np.asarray(fl.solve_sylvester(A, B, C))              # batch dims broadcast
    np.testing.assert_allclose(X, np.stack([sla.solve_sylvester(A[i], B, C[i])
                                            for i in range(3)]), atol=2e-4)

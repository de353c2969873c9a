"""fnad.lax.linalg's compositions (fnad/lax_linalg.py) against jax.lax.linalg: values
(float32, float64, complex where jax takes it, batched), gradients in float64, jit on the
test backend, vmap against a loop, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced, x64_everywhere

import fnad
from fnad import lax

jax = pytest.importorskip("jax", reason="jax not installed: the oracle of these tests")
import jax.lax.linalg as JL  # noqa: E402

RNG = np.random.default_rng(0)


def _tridiagonal(batch, m, dtype, diag_scale=0.3):
    """(dl, d, du, b) with a small diagonal, so that the elimination pivots."""
    dl, d, du = (RNG.standard_normal(batch + (m,)) for _ in range(3))
    dl[..., 0] = 0
    du[..., -1] = 0
    b = RNG.standard_normal(batch + (m, 2))
    return tuple(v.astype(dtype) for v in (dl, d * diag_scale, du, b))


def test_lu_pivots_to_permutation_matches_jax():
    a = RNG.standard_normal((3, 5, 5)).astype(np.float32)
    _, piv, perm = JL.lu(a)
    piv = np.asarray(piv)
    got = lax.linalg.lu_pivots_to_permutation(piv, 5)
    np.testing.assert_array_equal(got, perm)
    assert np.asarray(got).dtype == np.int32
    np.testing.assert_array_equal(lax.linalg.lu_pivots_to_permutation(piv[..., :3], 7),
                                  JL.lu_pivots_to_permutation(piv[..., :3], 7))
    np.testing.assert_array_equal(traced(lambda p: lax.linalg.lu_pivots_to_permutation(p, 5))(
        piv), perm)
    raises_with(lambda: lax.linalg.lu_pivots_to_permutation(piv, 4), "permutation_size (4)",
                "k = 5", exc=ValueError)
    raises_with(lambda: lax.linalg.lu_pivots_to_permutation(piv.astype(np.float32), 5),
                "must be int32", exc=TypeError)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_tridiagonal_solve_matches_jax(dtype):
    with x64_everywhere():
        dl, d, du, b = _tridiagonal((2, 3), 7, dtype)
        if np.dtype(dtype).kind == "c":
            d = (d + 0.2j * RNG.standard_normal(d.shape)).astype(dtype)
        got = np.asarray(lax.linalg.tridiagonal_solve(dl, d, du, b))
        want = np.asarray(JL.tridiagonal_solve(dl, d, du, b))
    assert got.dtype == want.dtype and got.shape == want.shape == b.shape
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_tridiagonal_solve_singular_perturbed_gradients_jit_and_vmap():
    b = np.ones((3, 1), np.float32)
    zero_pivot = (np.array([0, 1, 1.], np.float32), np.zeros(3, np.float32) + [0, 0, 1],
                  np.array([0, 1, 0.], np.float32))
    assert np.all(np.isnan(lax.linalg.tridiagonal_solve(*zero_pivot, b)))
    assert np.all(np.isnan(JL.tridiagonal_solve(*zero_pivot, b)))
    diag = (np.zeros(3, np.float32), np.array([1, 0, 1.], np.float32), np.zeros(3, np.float32))
    np.testing.assert_array_equal(lax.linalg.tridiagonal_solve(*diag, b, perturb_singular=True),
                                  JL.tridiagonal_solve(*diag, b, perturb_singular=True))
    with x64_everywhere():
        dl, d, du, b = _tridiagonal((), 6, np.float64)

        def loss(lib, linalg):
            return lambda dl, d, du, b: lib.numpy.sum(
                linalg.tridiagonal_solve(dl, d, du, b) ** 2)
        got = fnad.grad(loss(fnad, lax.linalg), argnums=(0, 1, 2, 3))(dl, d, du, b)
        want = jax.grad(loss(jax, JL), argnums=(0, 1, 2, 3))(dl, d, du, b)
        for i, (g, w) in enumerate(zip(got, want)):
            if i in (0, 2):                          # dl[0] and du[-1] are not read
                w = np.asarray(w).copy()
                w[0 if i == 0 else -1] = 0
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9 * np.abs(w).max())
    dl, d, du, b = _tridiagonal((4,), 5, np.float32)
    f = lax.linalg.tridiagonal_solve
    loop = np.stack([f(dl[i], d[i], du[i], b[i]) for i in range(4)])
    np.testing.assert_allclose(fnad.vmap(f)(dl, d, du, b), loop, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(traced(f)(dl, d, du, b), loop, rtol=1e-6, atol=1e-6)
    raises_with(lambda: f(dl, d[:, :4], du, b), "one shape [..., m]", exc=ValueError)
    raises_with(lambda: f(dl, d, du, b[..., 0]), "b must be [..., m, n]", exc=ValueError)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_householder_product_matches_jax(dtype):
    a = RNG.standard_normal((2, 5, 3)) + (1j * RNG.standard_normal((2, 5, 3))
                                          if np.dtype(dtype).kind == "c" else 0)
    qr_a, taus = (np.asarray(v) for v in lax.linalg.geqrf(a.astype(dtype)))
    for k in (3, 2, 0):
        got = lax.linalg.householder_product(qr_a, taus[..., :k])
        np.testing.assert_allclose(got, JL.householder_product(qr_a, taus[..., :k]),
                                   rtol=1e-5, atol=1e-6)
    q = np.asarray(lax.linalg.householder_product(qr_a, taus))
    np.testing.assert_allclose(np.conj(np.swapaxes(q, -1, -2)) @ q,
                               np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-5)
    raises_with(lambda: lax.linalg.householder_product(qr_a[..., :2, :], taus),
                "k <= n <= m", exc=ValueError)


def test_symmetric_product_and_cholesky_update_match_jax():
    a, c = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((2, 4, 4))
    c = (c + np.swapaxes(c, -1, -2)).astype(np.float32)
    a = a.astype(np.float32)
    for sym in (False, True):
        got = np.asarray(lax.linalg.symmetric_product(a, c, alpha=2.0, beta=0.5,
                                                      symmetrize_output=sym))
        want = np.asarray(JL.symmetric_product(a, c, alpha=2.0, beta=0.5,
                                               symmetrize_output=sym))
        np.testing.assert_allclose(np.tril(got), np.tril(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)       # symmetrized: all of it
    m = RNG.standard_normal((5, 5))
    r = np.linalg.cholesky(m @ m.T + 5 * np.eye(5)).T.astype(np.float32)
    w = RNG.standard_normal(5).astype(np.float32)
    got = np.asarray(lax.linalg.cholesky_update(r, w))
    np.testing.assert_allclose(got, JL.cholesky_update(r, w), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.T @ got, r.T @ r + np.outer(w, w), rtol=1e-5, atol=1e-4)
    assert not np.any(np.tril(got, -1))
    raises_with(lambda: lax.linalg.cholesky_update(r, w[:3]), "w_vector [n]", exc=ValueError)
    raises_with(lambda: lax.linalg.symmetric_product(a, c[..., :3]), "c_matrix",
                exc=ValueError)

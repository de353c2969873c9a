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


def _random(shape, dtype, rng=RNG):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _tol(dtype):
    return 1e-12 if np.dtype(dtype) in (np.float64, np.complex128) else 3e-5


def _assert_like_jax(got, want, tol, what):
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, w.shape, g.dtype,
                                                           w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1, np.abs(w).max()),
                                   err_msg=f"{what}: output {i}")


def _directional_fd(f, x, d, h=1e-6):
    """(f(x + h d) - f(x - h d)) / 2h, f scalar, in float64."""
    return (float(f(x + h * d)) - float(f(x - h * d))) / (2 * h)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_hessenberg_and_tridiagonal_match_jax(dtype):
    with x64_everywhere():
        a = _random((2, 3, 5, 5), dtype)
        got = lax.linalg.hessenberg(a)
        _assert_like_jax(got, JL.hessenberg(a), _tol(dtype), "hessenberg")
        for lower in (True, False):       # a not Hermitian: only the one triangle is read
            _assert_like_jax(lax.linalg.tridiagonal(a, lower=lower),
                             JL.tridiagonal(a, lower=lower), _tol(dtype),
                             f"tridiagonal(lower={lower})")
    # the packed form means what it says: Q = H_0 ... H_{n-2} (as orgqr of the reflectors
    # shifted one row down) gives a = Q H Qᴴ
    packed, taus = (np.asarray(v) for v in got)
    n = a.shape[-1]
    shifted = np.zeros_like(packed)
    shifted[..., 1:, :n - 1] = packed[..., 1:, :n - 1]
    q = np.zeros_like(packed)
    q[..., 0, 0] = 1
    with x64_everywhere():
        q[..., 1:, 1:] = np.asarray(lax.linalg.householder_product(shifted[..., 1:, :n - 1],
                                                                   taus))
    h = np.triu(packed, -1)
    tol = 10 * _tol(dtype)
    np.testing.assert_allclose(q @ h @ np.conj(np.swapaxes(q, -1, -2)), a, rtol=tol,
                               atol=tol * 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_ormqr_matches_jax_in_all_four_modes(dtype):
    with x64_everywhere():
        x = _random((2, 6, 4), dtype)
        h, taus = (np.asarray(v) for v in fnad.numpy.linalg.qr(x, mode="raw"))
        a = np.swapaxes(h, -1, -2)                                         # [2, 6, 4]
        q = np.asarray(fnad.numpy.linalg.qr(x, mode="complete")[0])        # [2, 6, 6]
        qh = np.conj(np.swapaxes(q, -1, -2))
        for left in (True, False):
            c = _random((2, 6, 3) if left else (2, 3, 6), dtype)
            for transpose in (False, True):
                got = lax.linalg.ormqr(a, taus, c, left=left, transpose=transpose)
                want = JL.ormqr(a, taus, c, left=left, transpose=transpose)
                _assert_like_jax([got], [want], _tol(dtype), f"ormqr({left}, {transpose})")
                op = qh if transpose else q
                np.testing.assert_allclose(got, op @ c if left else c @ op,
                                           rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
        # a wide a (m < n) and fewer reflectors than rows
        wide, wtaus = (np.asarray(v) for v in lax.linalg.geqrf(_random((3, 5), dtype)))
        c = _random((3, 2), dtype)
        for k in (3, 1):
            _assert_like_jax([lax.linalg.ormqr(wide, wtaus[:k], c, transpose=True)],
                             [JL.ormqr(wide, wtaus[:k], c, transpose=True)], _tol(dtype),
                             f"ormqr, wide a, k={k}")


def test_hessenberg_tridiagonal_ormqr_gradients_jit_vmap_and_errors():
    rng = np.random.default_rng(3)
    with x64_everywhere():             # central differences (jax differentiates none of them)
        a = rng.standard_normal((5, 5))
        w_h, w_t = rng.standard_normal((5, 5)), rng.standard_normal(4)

        def hess_loss(a):
            packed, taus = lax.linalg.hessenberg(a)
            return fnad.numpy.sum(w_h * packed) + fnad.numpy.sum(w_t * taus)
        x = rng.standard_normal((6, 4))
        h, taus = (np.asarray(v) for v in fnad.numpy.linalg.qr(x, mode="raw"))
        qa, c = h.T, rng.standard_normal((3, 6))
        w_c = rng.standard_normal((3, 6))

        def ormqr_loss(qa, taus, c):
            return fnad.numpy.sum(w_c * lax.linalg.ormqr(qa, taus, c, left=False,
                                                         transpose=True))
        sym = a + a.T

        def tri_loss(s):
            _, d, e, _ = lax.linalg.tridiagonal(s, lower=False)
            return fnad.numpy.sum(d * w_h[0]) + fnad.numpy.sum(e ** 2)
        cases = [(hess_loss, (a,)), (ormqr_loss, (qa, taus, c)), (tri_loss, (sym,))]
        for loss, args in cases:
            grads = fnad.grad(loss, argnums=tuple(range(len(args))))(*args)
            for i, (arg, g) in enumerate(zip(args, grads)):
                d = rng.standard_normal(arg.shape)
                if loss is tri_loss:
                    d = np.triu(d)                    # only the upper triangle is read
                else:
                    d = d if loss is not ormqr_loss or i != 0 else np.tril(d, -1)

                def along(v, i=i, args=args, loss=loss):
                    return loss(*args[:i], v, *args[i + 1:])
                np.testing.assert_allclose(np.sum(np.asarray(g) * d),
                                           _directional_fd(along, arg, d), rtol=1e-6,
                                           err_msg=f"{loss.__name__}, argument {i}")
    a = rng.standard_normal((3, 4, 4)).astype(np.float32)
    x = rng.standard_normal((3, 5, 3)).astype(np.float32)
    qa, taus = (np.asarray(v) for v in lax.linalg.geqrf(x))
    c = rng.standard_normal((3, 5, 2)).astype(np.float32)
    funs = [(lax.linalg.hessenberg, (a,)),
            (lambda a: lax.linalg.tridiagonal(a, lower=False), (a,)),
            (lambda qa, t, c: lax.linalg.ormqr(qa, t, c, transpose=True), (qa, taus, c))]
    for f, args in funs:
        loop = [f(*(v[i] for v in args)) for i in range(3)]
        loop = [np.stack([np.asarray(o[j] if isinstance(o, tuple) else o) for o in loop])
                for j in range(len(loop[0]) if isinstance(loop[0], tuple) else 1)]
        for how, got in (("vmap", fnad.vmap(f)(*args)), ("jit", traced(f)(*args))):
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, loop):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=how)
    raises_with(lambda: lax.linalg.hessenberg(x), "square matrix", "(3, 5, 3)", exc=ValueError)
    raises_with(lambda: lax.linalg.tridiagonal(a[0, :3]), "square matrix", exc=ValueError)
    raises_with(lambda: lax.linalg.ormqr(qa, taus, c[:, :4]), "left=True", "5 rows",
                exc=ValueError)
    raises_with(lambda: lax.linalg.ormqr(qa, taus, c, left=False), "left=False",
                "5 columns", exc=ValueError)
    raises_with(lambda: lax.linalg.ormqr(qa, taus[0], c), "same batch dims", exc=ValueError)
    raises_with(lambda: lax.linalg.ormqr(qa[..., :2], taus, c), "k <= min(m, n)",
                exc=ValueError)


def _conditioned(rng, m, n, cond, dtype):
    """x [m, n] with singular values from 1 down to 1/cond (log-spaced)."""
    u, _ = np.linalg.qr(_random((m, n), dtype, rng))
    v, _ = np.linalg.qr(_random((n, n), dtype, rng))
    return ((u * np.geomspace(1, 1 / cond, n)) @ v).astype(dtype)


@pytest.mark.parametrize("dtype,cond", [(np.float32, 1.0), (np.float32, 1e6),
                                        (np.float64, 1e12), (np.complex64, 1e3)])
def test_qdwh_matches_jax(dtype, cond):
    rng = np.random.default_rng(4)
    with x64_everywhere():
        x = _conditioned(rng, 7, 5, cond, dtype)
        u, h, k, ok = (np.asarray(v) for v in lax.linalg.qdwh(x))
        ju, jh, jk, jok = (np.asarray(v) for v in JL.qdwh(x))
    eps = np.finfo(dtype).eps
    assert u.dtype == h.dtype == np.dtype(dtype) and k.dtype == jk.dtype and ok.dtype == bool
    assert int(k) == int(jk) and bool(ok) and bool(jok)
    tol = 50 * eps
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(5), atol=tol)          # orthonormal
    np.testing.assert_allclose(h, np.conj(h.T), atol=tol)                      # Hermitian
    assert np.linalg.eigvalsh(h).min() > -tol                                  # PSD
    np.testing.assert_allclose(u @ h, x, atol=tol)
    np.testing.assert_allclose(h, jh, atol=tol)
    np.testing.assert_allclose(u, ju, atol=tol * cond)  # u's sensitivity: ~ eps κ(x)


def test_qdwh_jit_vmap_dynamic_shape_iterations_and_errors():
    rng = np.random.default_rng(5)
    xs = np.stack([_conditioned(rng, 6, 4, c, np.float32) for c in (1.0, 1e4)])
    loop = [lax.linalg.qdwh(x) for x in xs]
    for how, got in (("vmap", fnad.vmap(lax.linalg.qdwh)(xs)),
                     ("batched", lax.linalg.qdwh(xs)),
                     ("jit", traced(lax.linalg.qdwh)(xs))):
        for j in range(4):
            np.testing.assert_allclose(got[j], np.stack([np.asarray(o[j]) for o in loop]),
                                       rtol=1e-5, atol=1e-5, err_msg=f"{how}: output {j}")
    np.testing.assert_array_equal(lax.linalg.qdwh(xs)[2], jax.vmap(JL.qdwh)(xs)[2])
    # a padded input: only the true 6 x 4 block is read; the rest of u and h is zero
    padded = np.full((8, 5), 7.0, np.float32)
    padded[:6, :4] = xs[1]
    want = JL.qdwh(padded, dynamic_shape=(6, 4))
    for got in (lax.linalg.qdwh(padded, dynamic_shape=(6, 4)),
                traced(lambda x, m, n: lax.linalg.qdwh(x, dynamic_shape=(m, n)))(padded, 6,
                                                                                  4)):
        u, h = np.asarray(got[0]), np.asarray(got[1])
        assert not np.any(u[6:]) and not np.any(u[:, 4:]) and not np.any(h[4:])
        np.testing.assert_allclose(u, want[0], atol=1e-4)
        np.testing.assert_allclose(h, want[1], atol=1e-5)
        assert int(got[2]) == int(want[2])
    # too few iterations: not converged, as jax
    got, want = lax.linalg.qdwh(xs[1], max_iterations=2), JL.qdwh(xs[1], max_iterations=2)
    assert int(got[2]) == int(want[2]) == 2 and not bool(got[3]) and not bool(want[3])
    np.testing.assert_allclose(got[0], want[0], atol=1e-4)
    raises_with(lambda: lax.linalg.qdwh(xs[0].T), "M >= N", "(4, 6)", exc=ValueError)
    raises_with(lambda: lax.linalg.qdwh(xs[0], is_hermitian=None), "is_hermitian",
                exc=TypeError)
    raises_with(lambda: lax.linalg.qdwh(xs[0], dynamic_shape=(7, 4)), "dynamic_shape",
                exc=ValueError)


def test_decompositions_of_ints_and_jax_algorithm_arguments():
    """cholesky and eigh symmetrize an int matrix by true division, as jax (float32 out);
    jax's implementation / algorithm / use_magma arguments are accepted (LAPACK's here)."""
    a = np.eye(3, dtype=np.int32) * 2 + np.eye(3, k=1, dtype=np.int32)
    for name in ("cholesky", "eigh"):
        got = getattr(lax.linalg, name)(fnad.numpy.asarray(a))
        want = getattr(JL, name)(jax.numpy.asarray(a))
        for g, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            assert np.asarray(g).dtype == np.asarray(w).dtype == np.float32
        np.testing.assert_allclose(np.asarray(got[-1] if name == "eigh" else got),
                                   np.asarray(want[-1] if name == "eigh" else want), rtol=1e-6)
    x = fnad.numpy.asarray(np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32))
    L = lax.linalg
    np.testing.assert_allclose(L.svd(x, algorithm=L.SvdAlgorithm.JACOBI)[1],
                               L.svd(x)[1], rtol=1e-6)
    assert set(L.SvdAlgorithm.__members__) == set(JL.SvdAlgorithm.__members__)
    assert set(L.EighImplementation.__members__) == set(JL.EighImplementation.__members__)
    assert set(L.EigImplementation.__members__) == set(JL.EigImplementation.__members__)
    L.eigh(x @ x.T, implementation=L.EighImplementation.QDWH)
    L.eig(x, implementation=L.EigImplementation.LAPACK, use_magma=False)
    L.qr(x, use_magma=True)
    raises_with(lambda: L.svd(x, algorithm="qr"), "SvdAlgorithm member", exc=TypeError)

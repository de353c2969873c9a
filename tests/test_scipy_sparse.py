"""fnad.scipy.sparse.linalg (cg, bicgstab, gmres) against NumPy's direct solve and
jax.scipy.sparse.linalg: solutions, gradients through the implicit derivative (not the
loop), matrices or functions for A and M, pytrees, complex systems, jit and vmap, errors;
and fnad.flatten_util.ravel_pytree."""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
import fnad.scipy.sparse.linalg as fsl
from fnad.flatten_util import ravel_pytree

try:
    import jax
    import jax.numpy as jnp
    import jax.scipy.sparse.linalg as jsl
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = jsl = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
pytestmark = pytest.mark.usefixtures("x64")
RNG = np.random.default_rng(1)
N = 8
_Q = RNG.standard_normal((N, N))
SPD = _Q @ _Q.T + N * np.eye(N)                         # for cg
GEN = RNG.standard_normal((N, N)) + 3 * np.eye(N)       # for bicgstab and gmres
B = RNG.standard_normal(N)
SOLVERS = [("cg", SPD, {}), ("bicgstab", GEN, {}), ("gmres", GEN, {}),
           ("gmres", GEN, {"solve_method": "incremental"}),
           ("gmres", GEN, {"restart": 3}), ("gmres", GEN, {"restart": 3,
                                                           "solve_method": "incremental"})]
IDS = ["cg", "bicgstab", "gmres", "gmres-incremental", "gmres-restart3",
       "gmres-incremental-restart3"]


@pytest.mark.parametrize("name,a,kw", SOLVERS, ids=IDS)
def test_solution_matches_a_direct_solve(name, a, kw):
    x, info = getattr(fsl, name)(a, B, tol=1e-10, **kw)
    np.testing.assert_allclose(x, np.linalg.solve(a, B), rtol=1e-8, atol=1e-10)
    assert info is None if name != "gmres" else int(info) == 0
    x, _ = getattr(fsl, name)(lambda v: fnp.asarray(a) @ v, B, tol=1e-10, **kw)  # a function
    np.testing.assert_allclose(x, np.linalg.solve(a, B), rtol=1e-8, atol=1e-10)


@needs_jax
@pytest.mark.parametrize("name,a,kw", SOLVERS, ids=IDS)
def test_gradients_match_jax(name, a, kw):
    def loss(lib, mod):
        np_ = fnp if lib is fnad else jnp
        return lambda m, b: np_.sum(np_.sin(getattr(mod, name)(
            lambda v: m @ v, b, tol=1e-12, **kw)[0]))
    got = fnad.grad(loss(fnad, fsl), argnums=(0, 1))(a, B)
    want = jax.grad(loss(jax, jsl), argnums=(0, 1))(a, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name,a,kw", SOLVERS[:3], ids=IDS[:3])
def test_complex_systems(name, a, kw):
    b = B + 1j * RNG.standard_normal(N)
    if name == "cg":
        c = a + 1j * (RNG.standard_normal((N, N)) * 0.1)
        a = c @ c.conj().T + N * np.eye(N)                  # Hermitian positive definite
    else:
        a = a + 1j * RNG.standard_normal((N, N))
    x, _ = getattr(fsl, name)(a, b, tol=1e-10, **kw)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-8, atol=1e-10)


def test_preconditioner_pytree_jit_and_vmap():
    d = np.diag(SPD)
    x, _ = fsl.cg(SPD, B, tol=1e-10, M=np.diag(1 / d))      # Jacobi, as a matrix
    np.testing.assert_allclose(x, np.linalg.solve(SPD, B), rtol=1e-8)
    x, _ = fsl.gmres(GEN, B, tol=1e-10, M=lambda v: v / np.diag(GEN))
    np.testing.assert_allclose(x, np.linalg.solve(GEN, B), rtol=1e-8)
    scale = np.array([1.0, 2.0, 4.0])
    tree = {"u": np.ones(3), "w": np.array([[2.0, 6.0]])}
    sol, _ = fsl.cg(lambda t: {"u": scale * t["u"], "w": 2.0 * t["w"]}, tree, tol=1e-12)
    np.testing.assert_allclose(sol["u"], 1 / scale)
    np.testing.assert_allclose(sol["w"], [[1.0, 3.0]])
    f = traced(lambda a, b: fsl.bicgstab(a, b, tol=1e-10)[0])
    np.testing.assert_allclose(f(GEN, B), np.linalg.solve(GEN, B), rtol=1e-8)
    bs = RNG.standard_normal((3, N))
    got = fnad.vmap(lambda b: fsl.gmres(GEN, b, tol=1e-10)[0])(bs)
    np.testing.assert_allclose(got, np.linalg.solve(GEN, bs.T).T, rtol=1e-8)
    x0 = np.linalg.solve(SPD, B)                             # already the solution
    x, _ = fsl.cg(SPD, B, x0=x0, maxiter=0)
    np.testing.assert_allclose(x, x0)


def test_errors():
    with pytest.raises(ValueError, match="square matrix"):
        fsl.cg(np.ones((3, 4)), np.ones(3))
    with pytest.raises(TypeError, match="function or a square matrix"):
        fsl.cg("A", np.ones(3))
    with pytest.raises(ValueError, match="matching shapes"):
        fsl.cg(np.eye(3), np.ones(3), x0=np.ones(4))
    with pytest.raises(ValueError, match="matching tree structure"):
        fsl.cg(lambda t: t, {"a": np.ones(2)}, x0={"b": np.ones(2)})
    with pytest.raises(ValueError, match="invalid solve_method 'qr'"):
        fsl.gmres(np.eye(3), np.ones(3), solve_method="qr")


# ---- ravel_pytree ---------------------------------------------------------------------------
def test_ravel_pytree_round_trip_and_derivatives():
    tree = {"a": np.arange(6.0).reshape(2, 3), "b": (np.float32(7.0), np.arange(2))}
    flat, unravel = ravel_pytree(tree)
    assert flat.shape == (9,) and flat.dtype == np.float64     # promoted (x64 on)
    np.testing.assert_allclose(flat, [0, 1, 2, 3, 4, 5, 7, 0, 1])
    back = unravel(flat * 2)
    assert back["a"].shape == (2, 3) and back["b"][0].dtype == np.float32
    assert back["b"][1].dtype == np.arange(2).dtype
    np.testing.assert_allclose(back["a"], 2 * tree["a"])
    g = fnad.grad(lambda v: fnp.sum(unravel(v)["a"] ** 2))(flat)
    np.testing.assert_allclose(g, np.r_[2 * np.arange(6.0), 0, 0, 0])
    many = fnad.vmap(unravel)(np.stack([flat, 3 * flat]))
    np.testing.assert_allclose(many["a"][1], 3 * tree["a"])
    empty, unravel_empty = ravel_pytree({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}
    with pytest.raises(ValueError, match=r"expected a vector of shape \(9,\)"):
        unravel(np.ones(8))

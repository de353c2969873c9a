"""lax.custom_linear_solve and lax.custom_root (primitives/solves.py) against jax and
closed forms: values, gradients both ways (with respect to b and to the values matvec or
f close over), JVPs against central differences, the transpose's dot-product test, vmap
of every combination of mapped operands, jit on each backend, pytrees, has_aux, errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
from fnad import lax

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
pytestmark = pytest.mark.usefixtures("x64")
RNG = np.random.default_rng(0)
A = RNG.standard_normal((4, 4)) + 4 * np.eye(4)
B = RNG.standard_normal(4)
AS = RNG.standard_normal((3, 4, 4)) + 4 * np.eye(4)
BS = RNG.standard_normal((3, 4))


def _libs(lib):
    return (fnp, lax) if lib is fnad else (jnp, jax.lax)


def _solve(lib, a, b, symmetric=False, has_aux=False):
    np_, L = _libs(lib)

    def solve(m, v):
        x = np_.linalg.solve(a, v)
        return (x, np_.sum(x)) if has_aux else x

    def tsolve(m, v):
        x = np_.linalg.solve(a.T, v)
        return (x, np_.sum(x)) if has_aux else x
    return L.custom_linear_solve(lambda x: a @ x, b, solve, None if symmetric else tsolve,
                                 symmetric=symmetric, has_aux=has_aux)


def _loss(lib, a, b):
    np_, _ = _libs(lib)
    return np_.sum(np_.sin(_solve(lib, a, b)) * np_.arange(1.0, 5.0))


def test_value_is_the_solution():
    np.testing.assert_allclose(_solve(fnad, A, B), np.linalg.solve(A, B), rtol=1e-12)
    x, aux = _solve(fnad, A, B, has_aux=True)
    np.testing.assert_allclose(aux, np.linalg.solve(A, B).sum(), rtol=1e-12)


@needs_jax
def test_gradients_match_jax():
    got = fnad.grad(lambda a, b: _loss(fnad, a, b), argnums=(0, 1))(A, B)
    want = jax.grad(lambda a, b: _loss(jax, a, b), argnums=(0, 1))(A, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    # the closed form: x = A⁻¹b, b̄ = A⁻ᵀ x̄, Ā = -b̄ xᵀ
    x = np.linalg.solve(A, B)
    xbar = np.cos(x) * np.arange(1.0, 5.0)
    bbar = np.linalg.solve(A.T, xbar)
    np.testing.assert_allclose(got[1], bbar, rtol=1e-10)
    np.testing.assert_allclose(got[0], -np.outer(bbar, x), rtol=1e-10)


def test_symmetric_uses_solve_for_the_transpose():
    s = A @ A.T
    g = fnad.grad(lambda b: fnp.sum(_solve(fnad, s, b, symmetric=True) ** 2))(B)
    x = np.linalg.solve(s, B)
    np.testing.assert_allclose(g, np.linalg.solve(s, 2 * x), rtol=1e-10)


@pytest.mark.parametrize("wrt", ["b", "a", "both"])
def test_jvp_matches_central_differences(wrt):
    da = RNG.standard_normal(A.shape) * (wrt != "b")
    db = RNG.standard_normal(B.shape) * (wrt != "a")
    f = lambda a, b: _solve(fnad, a, b)                        # noqa: E731
    _, tan = fnad.jvp(f, (A, B), (da, db))
    eps = 1e-6
    fd = (np.asarray(f(A + eps * da, B + eps * db)) -
          np.asarray(f(A - eps * da, B - eps * db))) / (2 * eps)
    np.testing.assert_allclose(tan, fd, rtol=1e-6, atol=1e-9)


def test_transpose_dot_product():
    """<A⁻¹ b, y> == <b, A⁻ᵀ y> through linear_transpose of b -> x."""
    y = RNG.standard_normal(4)
    op = lambda b: _solve(fnad, A, b)                           # noqa: E731
    aty, = fnad.linear_transpose(op, B)(y)
    np.testing.assert_allclose(np.vdot(op(B), y), np.vdot(B, aty), rtol=1e-12)


@needs_jax
@pytest.mark.parametrize("axes", [(0, 0), (None, 0), (0, None)])
def test_vmap_matches_jax(axes):
    a = AS if axes[0] == 0 else A
    b = BS if axes[1] == 0 else B
    got = fnad.vmap(lambda a, b: _solve(fnad, a, b), in_axes=axes)(a, b)
    want = jax.vmap(lambda a, b: _solve(jax, a, b), in_axes=axes)(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    got = fnad.vmap(fnad.grad(lambda a, b: _loss(fnad, a, b), argnums=(0, 1)),
                    in_axes=axes)(a, b)
    want = jax.vmap(jax.grad(lambda a, b: _loss(jax, a, b), argnums=(0, 1)),
                    in_axes=axes)(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)


@needs_jax
@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_under_jit_on_each_backend(backend):
    f = fnad.jit(lambda a, b: _solve(fnad, a, b), backend=backend)
    np.testing.assert_allclose(f(A, B), np.linalg.solve(A, B), rtol=1e-10)
    g = fnad.jit(fnad.grad(lambda a, b: _loss(fnad, a, b), argnums=(0, 1)), backend=backend)
    want = jax.grad(lambda a, b: _loss(jax, a, b), argnums=(0, 1))(A, B)
    for u, w in zip(g(A, B), want):
        np.testing.assert_allclose(u, w, rtol=1e-10)


def test_pytree_right_hand_side():
    d = np.array([2.0, 4.0, 8.0])

    def matvec(v):
        return {"u": d * v["u"], "w": 3.0 * v["w"]}

    def solve(m, v):
        return {"u": v["u"] / d, "w": v["w"] / 3.0}
    b = {"u": np.ones(3), "w": np.float64(6.0)}
    x = lax.custom_linear_solve(matvec, b, solve, symmetric=True)
    np.testing.assert_allclose(x["u"], 1 / d)
    np.testing.assert_allclose(x["w"], 2.0)
    g = fnad.grad(lambda s: lax.custom_linear_solve(
        lambda v: {"u": s * d * v["u"], "w": 3.0 * v["w"]}, b,
        lambda m, v: {"u": v["u"] / (s * d), "w": v["w"] / 3.0}, symmetric=True)["u"].sum())
    np.testing.assert_allclose(g(2.0), -np.sum(1 / d) / 4.0, rtol=1e-12)   # d/ds Σ 1/(s d)


def test_errors():
    with pytest.raises(TypeError, match="matvec must return values shaped like b"):
        lax.custom_linear_solve(lambda x: x[:2], B, lambda m, v: v)
    with pytest.raises(TypeError, match="solve must return values shaped like b"):
        lax.custom_linear_solve(lambda x: x, B, lambda m, v: v[:3])
    with pytest.raises(TypeError, match="needs transpose_solve"):
        fnad.grad(lambda b: lax.custom_linear_solve(lambda x: A @ x, b,
                                                    lambda m, v: fnp.linalg.solve(A, v)).sum())(B)
    with pytest.raises(TypeError, match="must return a pair"):
        lax.custom_linear_solve(lambda x: x, B, lambda m, v: v, has_aux=True)


# ---- custom_root -------------------------------------------------------------------------
def _sqrt(lib, a, has_aux=False):
    """A root of x² - a by Newton's method in a loop (not differentiable in reverse mode)."""
    np_, L = _libs(lib)

    def solve(f, x0):
        x = L.fori_loop(0, 40, lambda i, x: x - f(x) / (2 * x), x0)
        return (x, np_.abs(f(x))) if has_aux else x
    return L.custom_root(lambda x: x ** 2 - a, np_.ones_like(a), solve,
                         lambda g, y: y / g(np_.ones_like(y)), has_aux=has_aux)


@needs_jax
def test_custom_root_gradients_match_jax_and_the_closed_form():
    a = np.array([2.0, 9.0, 0.25])
    np.testing.assert_allclose(_sqrt(fnad, a), np.sqrt(a), rtol=1e-12)
    got = fnad.grad(lambda a: fnp.sum(_sqrt(fnad, a) ** 3))(a)
    want = jax.grad(lambda a: jnp.sum(_sqrt(jax, a) ** 3))(a)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(got, 1.5 * np.sqrt(a), rtol=1e-10)      # d a^1.5 / da
    np.testing.assert_allclose(traced(fnad.grad(lambda a: fnp.sum(_sqrt(fnad, a))))(a),
                               0.5 / np.sqrt(a), rtol=1e-10)
    np.testing.assert_allclose(fnad.vmap(fnad.grad(lambda s: _sqrt(fnad, s)))(a),
                               0.5 / np.sqrt(a), rtol=1e-10)
    _, tan = fnad.jvp(lambda a: _sqrt(fnad, a), (a,), (np.ones(3),))
    np.testing.assert_allclose(tan, 0.5 / np.sqrt(a), rtol=1e-10)
    x, res = _sqrt(fnad, a, has_aux=True)
    assert np.all(np.asarray(res) < 1e-12)
    g = fnad.grad(lambda a: _sqrt(fnad, a, has_aux=True)[0].sum())(a)
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-10)


def test_custom_root_pytree_and_errors():
    def solve(f, x0):
        return {"p": x0["p"] * 0 + 2.0, "q": x0["q"] * 0 + 3.0}

    def tangent_solve(g, y):
        return {"p": y["p"] / 4.0, "q": y["q"] / 6.0}       # ∂f/∂x = diag(2p, 2q)

    def root(c):
        f = lambda x: {"p": x["p"] ** 2 - 4.0 * c, "q": x["q"] ** 2 - 9.0}   # noqa: E731
        return lax.custom_root(f, {"p": 1.0, "q": 1.0}, solve, tangent_solve)
    np.testing.assert_allclose(fnad.grad(lambda c: root(c)["p"])(1.0), 1.0)   # 4 / (2·2)
    with pytest.raises(TypeError, match="f must return values shaped like initial_guess"):
        lax.custom_root(lambda x: x[:1], np.ones(2), lambda f, x: x, lambda g, y: y)
    with pytest.raises(TypeError, match="solve must return a pair"):
        lax.custom_root(lambda x: x, np.ones(2), lambda f, x: x, lambda g, y: y,
                        has_aux=True)

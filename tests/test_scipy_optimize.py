"""fnad.scipy.optimize.minimize (BFGS, L-BFGS) and line_search against
jax.scipy.optimize: every result field in float64 where JAX's line search works (the
iterations are JAX's, so they agree to rounding), SciPy's minimizer where JAX's zoom gives up,
float32 within tolerance, jit and vmap, the errors; and
fnad.scipy.integrate.trapezoid against jax.scipy.integrate."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fjnp
from fnad.scipy import integrate, optimize

jax = pytest.importorskip("jax", reason="jax not installed: the oracle of these tests")
import jax.numpy as jjnp  # noqa: E402
from jax.scipy import integrate as jintegrate  # noqa: E402
from jax.scipy import optimize as joptimize  # noqa: E402

LBFGS = "l-bfgs-experimental-do-not-rely-on-this"
A = np.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
B = np.array([1.0, -2.0, 0.3])


def rosen(x, m):
    return m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quadratic(x, a, b, m):
    return 0.5 * x @ (a @ x) - b @ x


# (f, x0, args)
PROBLEMS = {"rosen2": (rosen, [-1.2, 1.0], ()), "rosen4": (rosen, [-1.2, 1.0, 0.5, 2.0], ()),
            "rosen5": (rosen, [1.3, 0.7, 0.8, 1.9, 1.2], ()),
            "quadratic": (quadratic, [0.0, 0.0, 0.0], (A, B)),
            "quadratic3": (quadratic, [1.0, -1.0, 2.0], (A, B))}


def _run(lib, m, name, dtype, method, **options):
    f, x0, args = PROBLEMS[name]
    return lib.minimize(lambda x, *a: f(x, *a, m), np.array(x0, dtype),
                        tuple(a.astype(dtype) for a in args), method=method, options=options)


def _both(name, dtype, method, **options):
    return (_run(optimize, fjnp, name, dtype, method, **options),
            _run(joptimize, jjnp, name, dtype, method, **options))


# cases where JAX's line search never enters a zoom with a reversed bracket (see the
# module docstring): the same iterations, every field
@pytest.mark.parametrize("name,method", [("rosen4", "BFGS"), ("quadratic", "BFGS"),
                                         ("quadratic", LBFGS), ("quadratic3", LBFGS)])
def test_minimize_matches_jax_float64(name, method, x64):
    got, want = _both(name, np.float64, method)
    for field in ("success", "status", "nfev", "njev", "nit"):
        assert np.asarray(getattr(got, field)) == np.asarray(getattr(want, field)), \
            (field, getattr(got, field), getattr(want, field))
    for field in ("x", "fun", "jac", "hess_inv"):
        g, w = getattr(got, field), getattr(want, field)
        if w is None:
            assert g is None
            continue
        assert np.asarray(g).dtype == np.float64, field
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=field)
    assert np.asarray(got.nit).dtype == np.asarray(want.nit).dtype


# cases where JAX's zoom (its signed bracket-width test) gives up; fnad converges to the
# minimizer SciPy's BFGS finds
@pytest.mark.parametrize("name", ["rosen2", "rosen5", "quadratic3"])
def test_minimize_bfgs_converges_where_jax_zoom_gives_up(name, x64):
    scipy_optimize = pytest.importorskip("scipy.optimize", reason="SciPy is the oracle here")
    f, x0, args = PROBLEMS[name]
    got = _run(optimize, fjnp, name, np.float64, "BFGS")
    want = scipy_optimize.minimize(lambda x: f(x, *args, np), np.array(x0), method="BFGS",
                                   jac=lambda x: np.asarray(fnad.grad(
                                       lambda v: f(v, *args, fjnp))(x)))
    assert bool(got.success) and int(got.status) == 0 and want.success
    np.testing.assert_allclose(got.x, want.x, rtol=1e-5, atol=1e-6)
    assert float(np.linalg.norm(got.jac, np.inf)) < 1e-5


def test_minimize_float32_close_to_jax():
    # gtol 1e-3: with the default 1e-5 (near float32's resolution of ∇f) both end in line
    # search failures whose iteration counts depend on rounding
    for name, method in [("rosen4", "BFGS"), ("quadratic", LBFGS)]:
        got, want = _both(name, np.float32, method, gtol=1e-3)
        assert np.asarray(got.x).dtype == np.float32
        assert bool(got.success) and bool(want.success), name
        np.testing.assert_allclose(got.x, want.x, rtol=1e-4, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(got.fun, want.fun, rtol=1e-5, err_msg=name)
        assert abs(int(got.nit) - int(want.nit)) <= (0 if name == "quadratic" else 2), name


def test_minimize_jit_vmap_and_line_search():
    a, b = A.astype(np.float32), B.astype(np.float32)

    def solve(x0, a, b, method):
        return optimize.minimize(quadratic, x0, (a, b, fjnp), method=method,
                                 options={"gtol": 1e-4})

    x0s = np.array([[0.0, 0.0, 0.0], [2.0, -1.0, 0.0]], np.float32)
    for method in ("bfgs", LBFGS):
        eager = solve(x0s[1], a, b, method)
        jitted = traced(lambda x0, a, b, m=method: solve(x0, a, b, m))(x0s[1], a, b)
        np.testing.assert_allclose(jitted.x, eager.x, rtol=1e-6, atol=1e-7)
        assert int(jitted.nit) == int(eager.nit) and int(jitted.status) == int(eager.status)
        batched = fnad.vmap(lambda x0, m=method: solve(x0, a, b, m))(x0s)
        for i, x0 in enumerate(x0s):
            one = solve(x0, a, b, method)
            np.testing.assert_allclose(batched.x[i], one.x, rtol=1e-6, atol=1e-7)
            assert int(batched.nit[i]) == int(one.nit)
        np.testing.assert_allclose(eager.x, np.linalg.solve(a, b), rtol=1e-3)
    # the step found meets the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9)
    x = np.array([-1.2, 1.0], np.float32)
    f = lambda x: rosen(x, fjnp)                                           # noqa: E731
    f0, g0 = fnad.value_and_grad(f)(x)
    p = -np.asarray(g0) / np.linalg.norm(g0)
    res = optimize.line_search(f, x, p)
    a_k = float(res.a_k)
    assert not bool(res.failed) and int(res.status) == 0 and a_k > 0
    np.testing.assert_allclose(res.f_k, f(x + a_k * p), rtol=1e-6)
    assert float(res.f_k) <= float(f0) + 1e-4 * a_k * float(g0 @ p)
    assert abs(float(np.asarray(res.g_k) @ p)) <= 0.9 * abs(float(g0 @ p))


def test_minimize_errors():
    f = lambda x: fjnp.sum(x ** 2)                                         # noqa: E731
    x0 = np.ones(3, np.float32)
    raises_with(lambda: optimize.minimize(f, x0, method="Nelder-Mead"), "Nelder-Mead",
                "BFGS", exc=ValueError)
    raises_with(lambda: optimize.minimize(f, x0, [1.0], method="BFGS"), "args", "tuple",
                exc=TypeError)
    raises_with(lambda: optimize.minimize(f, x0, method="BFGS", options={"maxls": 3}),
                "maxls", "BFGS", exc=TypeError)
    raises_with(lambda: optimize.minimize(f, np.ones((2, 2)), method="BFGS"), "x0", "1-D",
                "(2, 2)", exc=ValueError)


def test_trapezoid_matches_jax():
    y = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    x = np.cumsum(np.linspace(0.1, 1.0, 5)).astype(np.float32)
    for kw in ({}, {"x": x}, {"dx": 0.25}, {"axis": 0, "dx": 2.0}):
        np.testing.assert_allclose(integrate.trapezoid(y, **kw),
                                   jintegrate.trapezoid(y, **kw), rtol=1e-6,
                                   atol=1e-6, err_msg=str(kw))

"""fnad.experimental.ode.odeint against closed forms and jax.experimental.ode.odeint:
values, the adjoint gradients in y0, t and args, pytree states, functions closing over
traced values, vmap, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import TEST_BACKEND

import fnad
import fnad.numpy as fnp
from fnad.experimental.ode import odeint

jax = pytest.importorskip("jax", reason="jax not installed (the oracle)")
import jax.numpy as jnp  # noqa: E402
from jax.experimental.ode import odeint as jax_odeint  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")


@pytest.fixture(autouse=True)
def _jit_on_the_test_backend():
    """odeint is jitted (as jax's): on the test backend, so that each test does not compile
    numba programs (tests/test_jit_backends.py covers the numba code of while and scan)."""
    with fnad.config.override(jax_jit_backend=TEST_BACKEND):
        yield
TS = np.linspace(0.0, 3.0, 7)


def _decay(np_):
    return lambda y, t, a: -a * y + np_.sin(t)


def test_linear_system_against_the_closed_form_and_jax():
    y0, a = np.array([1.0, 2.0]), 0.7
    ys = odeint(_decay(fnp), y0, TS, a)
    # y' = -a y + sin t  =>  y = (y0 + a/(1+a²)) e^{-at} + (a sin t - cos t)/(1+a²) + ...
    c = 1 / (1 + a * a)
    exact = (y0[None] + c)[..., :] * np.exp(-a * TS)[:, None] + \
        (c * (a * np.sin(TS) - np.cos(TS)))[:, None]
    np.testing.assert_allclose(ys, exact, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ys, jax_odeint(_decay(jnp), y0, TS, a), rtol=1e-9, atol=1e-12)


def test_adjoint_gradients_match_jax():
    y0, a = np.array([1.0, 2.0]), 0.7

    def loss(lib, ode):
        np_ = fnp if lib is fnad else jnp
        return lambda y0, a, ts: np_.sum(ode(_decay(np_), y0, ts, a) ** 2)
    got = fnad.grad(loss(fnad, odeint), argnums=(0, 1, 2))(y0, a, TS)
    want = jax.grad(loss(jax, jax_odeint), argnums=(0, 1, 2))(y0, a, TS)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


def _lotka(y, t, p):
    return {"prey": p[0] * y["prey"] - p[1] * y["prey"] * y["pred"],
            "pred": -p[2] * y["pred"] + p[3] * y["prey"] * y["pred"]}


def test_pytree_state_closures_and_vmap():
    p = np.array([1.0, 0.1, 1.5, 0.075])
    y0 = {"prey": 10.0, "pred": 5.0}
    got, want = odeint(_lotka, y0, TS, p), jax_odeint(_lotka, y0, TS, p)
    for k in y0:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-7)
    g = fnad.grad(lambda p: odeint(_lotka, y0, TS, p)["pred"][-1])(p)
    h = jax.grad(lambda p: jax_odeint(_lotka, y0, TS, p)["pred"][-1])(p)
    np.testing.assert_allclose(g, h, rtol=1e-5)

    def closed(scale):                    # func closes over a traced value
        return odeint(lambda y, t: -scale * y, np.ones(1), TS)[-1, 0]
    np.testing.assert_allclose(fnad.grad(closed)(0.5), -3.0 * np.exp(-1.5), rtol=1e-6)
    per = fnad.vmap(lambda a: odeint(_decay(fnp), np.ones(2), TS, a))(np.array([0.5, 1.0]))
    for i, a in enumerate((0.5, 1.0)):
        np.testing.assert_allclose(per[i], odeint(_decay(fnp), np.ones(2), TS, a), rtol=1e-9)


def test_errors():
    with pytest.raises(TypeError, match="t must be an array of floats"):
        odeint(_decay(fnp), np.ones(2), np.arange(3), 0.5)
    with pytest.raises(TypeError, match="must be arrays or scalars"):
        odeint(lambda y, t, s: y, np.ones(2), TS, "slow")

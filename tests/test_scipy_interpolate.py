"""fnad.scipy.interpolate.RegularGridInterpolator and fnad.scipy.cluster.vq.vq against
jax.scipy: both methods, fill values (NaN, a number, None to extrapolate), the forms of
xi, trailing value dimensions, gradients to values and points in float64, the
interpolator as a pytree under jit and vmap, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fnp
from fnad.scipy.cluster import vq as fvq
from fnad.scipy.interpolate import RegularGridInterpolator as FRGI

jax = pytest.importorskip("jax", reason="jax is the oracle")
import jax.numpy as jnp  # noqa: E402
from jax.scipy.cluster import vq as jvq  # noqa: E402
from jax.scipy.interpolate import RegularGridInterpolator as JRGI  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")
RNG = np.random.default_rng(0)
GRID = (np.sort(RNG.uniform(0, 1, 5)), np.sort(RNG.uniform(0, 2, 4)))
VALUES = RNG.standard_normal((5, 4, 3))
XI = np.stack([RNG.uniform(-0.2, 1.2, (6, 7)), RNG.uniform(-0.2, 2.2, (6, 7))], -1)


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_regular_grid_interpolator_matches_jax(method):
    def results(cls, values, xi):
        out = [cls(GRID, values, method=method, fill_value=fill)(xi)
               for fill in (np.nan, None, 1.5)]
        r = cls(GRID, values[..., 0])
        return out + [r(xi, method=method), r((xi[..., 0], xi[..., 1]), method=method),
                      r(xi[0, 0], method=method)]

    wants = jax.jit(lambda v, x: results(JRGI, v, x))(VALUES, XI)
    for i, (got, want) in enumerate(zip(results(FRGI, VALUES, XI), wants)):
        assert got.shape == want.shape and got.dtype == want.dtype, i
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=str(i))
    grid32 = tuple(g.astype(np.float32) for g in GRID)
    f32 = FRGI(grid32, VALUES.astype(np.float32), method=method)(XI.astype(np.float32))
    assert f32.dtype == np.float32
    assert FRGI(GRID, np.arange(20).reshape(5, 4))(XI).dtype == np.float64   # ints: inexact


def test_interpolator_gradients_jit_vmap():
    def loss(cls, np_):
        return lambda v, x: np_.sum(cls(GRID, v, fill_value=None)(x) ** 2)

    got = fnad.grad(loss(FRGI, fnp), argnums=(0, 1))(VALUES, XI)
    want = jax.jit(jax.grad(loss(JRGI, jnp), argnums=(0, 1)))(VALUES, XI)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    r = FRGI(GRID, VALUES)
    np.testing.assert_allclose(traced(lambda r, x: r(x))(r, XI), r(XI), atol=1e-12)
    stacked = np.stack([VALUES, 2 * VALUES])
    batched = fnad.vmap(lambda v: FRGI(GRID, v)(XI))(stacked)
    np.testing.assert_allclose(batched, np.stack([FRGI(GRID, v)(XI) for v in stacked]),
                               atol=1e-12)
    out = fnad.vmap(lambda r, x: r(x), in_axes=(None, 0))(r, XI)        # a pytree argument
    np.testing.assert_allclose(out, r(XI), atol=1e-12)


def test_vq_matches_jax():
    obs, book = RNG.standard_normal((9, 3)), RNG.standard_normal((4, 3))

    def results(vq, o, b):
        return [vq(o, b), vq(o[:, 0], b[:, 0], check_finite=False)]

    wants = jax.jit(lambda o, b: results(jvq.vq, o, b))(obs, book)
    for got, want in zip(results(fvq.vq, obs, book), wants):
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_allclose(g, w, atol=1e-12)

    def loss(vq, np_):
        return lambda o: np_.sum(vq(o, book)[1] ** 2)

    np.testing.assert_allclose(fnad.grad(loss(fvq.vq, fnp))(obs),
                               jax.jit(jax.grad(loss(jvq.vq, jnp)))(obs), rtol=1e-10)
    np.testing.assert_array_equal(traced(lambda o: fvq.vq(o, book)[0])(obs),
                                  fvq.vq(obs, book)[0])


def test_errors():
    raises_with(lambda: FRGI(GRID, VALUES, method="cubic"), "method 'cubic' is not defined",
                exc=ValueError)
    raises_with(lambda: FRGI(GRID, VALUES, bounds_error=True), "bounds_error=True",
                exc=NotImplementedError)
    raises_with(lambda: FRGI(GRID * 2, VALUES), "4 point arrays", "3 dimensions",
                exc=ValueError)
    raises_with(lambda: FRGI((GRID[0], GRID[1][:3]), VALUES), "points[1]", "length "
                "values.shape[1] = 4", exc=ValueError)
    raises_with(lambda: FRGI(GRID, VALUES, fill_value=1j), "fill_value must be None",
                exc=ValueError)
    raises_with(lambda: FRGI(GRID, VALUES)(np.ones((2, 3))), "dimension 3", exc=ValueError)
    raises_with(lambda: FRGI(GRID, VALUES)(XI, method="cubic"), "'cubic'", exc=ValueError)
    raises_with(lambda: fvq.vq(np.ones((3, 2)), np.ones(2)), "same rank", exc=ValueError)
    raises_with(lambda: fvq.vq(np.ones((3, 2, 1)), np.ones((2, 2, 1))), "1-D or 2-D",
                exc=ValueError)
    raises_with(lambda: fvq.vq(np.ones((3, 2)), np.ones((2, 3))), "2 features", "3",
                exc=ValueError)

"""fnad.scipy.signal against scipy.signal (and jax where it agrees with SciPy), and
fnad.scipy.ndimage.map_coordinates against jax.scipy.ndimage: every mode, shapes either
way round, complex inputs, boundary rules, detrend's breakpoints, gradients, errors."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
import fnad.scipy.ndimage as fnd
import fnad.scipy.signal as fs

ss = pytest.importorskip("scipy.signal", reason="scipy not installed (the oracle)")
jax = pytest.importorskip("jax", reason="jax not installed (the oracle)")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.ndimage as jnd  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")
RNG = np.random.default_rng(0)
SHAPES = [((10,), (3,)), ((3,), (10,)), ((6, 7), (3, 2)), ((3, 2), (6, 7)),
          ((5, 4, 3), (2, 3, 2)), ((4,), (4,))]


@pytest.mark.parametrize("sh1,sh2", SHAPES)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate_fftconvolve(sh1, sh2, mode):
    a, b = RNG.standard_normal(sh1), RNG.standard_normal(sh2)
    for name in ("convolve", "correlate"):
        for method in ("direct", "fft", "auto"):
            want = getattr(ss, name)(a, b, mode=mode, method=method)
            got = getattr(fs, name)(a, b, mode=mode, method=method)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-10)
    np.testing.assert_allclose(fs.fftconvolve(a, b, mode=mode),
                               ss.fftconvolve(a, b, mode=mode), atol=1e-10)
    ac = a + 1j * RNG.standard_normal(sh1)
    bc = b + 1j * RNG.standard_normal(sh2)
    np.testing.assert_allclose(fs.correlate(ac, bc, mode), ss.correlate(ac, bc, mode),
                               atol=1e-10)
    np.testing.assert_allclose(fs.fftconvolve(ac, bc, mode), ss.fftconvolve(ac, bc, mode),
                               atol=1e-10)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
def test_convolve2d_correlate2d_boundaries(mode, boundary):
    a, b = RNG.standard_normal((6, 7)), RNG.standard_normal((3, 4))
    for name in ("convolve2d", "correlate2d"):
        for fill in (0, 1.5):
            want = getattr(ss, name)(a, b, mode=mode, boundary=boundary, fillvalue=fill)
            got = getattr(fs, name)(a, b, mode=mode, boundary=boundary, fillvalue=fill)
            np.testing.assert_allclose(got, want, atol=1e-10)
    np.testing.assert_allclose(fs.correlate2d(b, a, "same"), ss.correlate2d(b, a, "same"),
                               atol=1e-10)


def test_gradients_axes_detrend_and_errors():
    a, b = RNG.standard_normal((8,)), RNG.standard_normal((3,))
    import jax.scipy.signal as js
    g = fnad.grad(lambda a, b: fnp.sum(fs.convolve(a, b, "same") ** 2), argnums=(0, 1))(a, b)
    h = jax.grad(lambda a, b: jnp.sum(js.convolve(a, b, "same") ** 2), argnums=(0, 1))(a, b)
    for u, v in zip(g, h):
        np.testing.assert_allclose(u, v, rtol=1e-10)
    x, k = RNG.standard_normal((3, 8)), RNG.standard_normal((1, 3))
    np.testing.assert_allclose(fs.fftconvolve(x, k, axes=1), ss.fftconvolve(x, k, axes=1),
                               atol=1e-10)
    series = RNG.standard_normal((3, 20)) + np.arange(20) * 0.3
    for kind in ("linear", "constant"):
        for bp in (0, [5, 12]):
            np.testing.assert_allclose(fs.detrend(series, type=kind, bp=bp),
                                       ss.detrend(series, type=kind, bp=bp), atol=1e-10)
            np.testing.assert_allclose(fs.detrend(series.T, axis=0, type=kind, bp=bp),
                                       ss.detrend(series.T, axis=0, type=kind, bp=bp),
                                       atol=1e-10)
    with pytest.raises(ValueError, match="mode must be one of"):
        fs.convolve(a, b, mode="middle")
    with pytest.raises(ValueError, match="same number of dimensions"):
        fs.convolve(a, np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least as large as the other"):
        fs.convolve(np.ones((4, 2)), np.ones((2, 4)), mode="valid")
    with pytest.raises(ValueError, match="boundary must be"):
        fs.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="circle")
    with pytest.raises(ValueError, match="trend type"):
        fs.detrend(series, type="quadratic")


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
def test_map_coordinates_matches_jax(order, mode):
    img = RNG.standard_normal((5, 6))
    coords = [RNG.uniform(-2, 7, (4, 3)), RNG.uniform(-2, 8, (4, 3))]
    np.testing.assert_allclose(fnd.map_coordinates(img, coords, order, mode, cval=1.5),
                               jnd.map_coordinates(img, coords, order, mode, cval=1.5),
                               atol=1e-12)
    ints = (img * 10).astype(np.int32)
    np.testing.assert_array_equal(fnd.map_coordinates(ints, coords, order, mode),
                                  jnd.map_coordinates(ints, coords, order, mode))
    if order == 1:
        def loss(mod, np_):
            return lambda im, c0: np_.sum(mod.map_coordinates(im, [c0, coords[1]], 1,
                                                              mode) ** 2)
        got = fnad.grad(loss(fnd, fnp), argnums=(0, 1))(img, coords[0])
        want = jax.grad(loss(jnd, jnp), argnums=(0, 1))(img, coords[0])
        for u, v in zip(got, want):
            np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)


def test_map_coordinates_errors():
    with pytest.raises(ValueError, match="length input.ndim"):
        fnd.map_coordinates(np.ones((3, 3)), [np.zeros(2)], 1)
    with pytest.raises(NotImplementedError, match="order 0 and 1"):
        fnd.map_coordinates(np.ones(3), [np.zeros(2)], 3)
    with pytest.raises(NotImplementedError, match="mode 'grid-wrap'"):
        fnd.map_coordinates(np.ones(3), [np.zeros(2)], 1, mode="grid-wrap")

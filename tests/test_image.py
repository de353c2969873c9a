"""fnad.image (resize, scale_and_translate) against jax.image: every method, up- and
downsampling, with and without antialiasing, integer images, gradients in the image and
in scale/translation, jit and vmap, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.image as fim
import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(0)
IMG = RNG.random((2, 9, 7, 3)).astype(np.float32)
METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]
SHAPES = [(2, 5, 4, 3), (2, 16, 11, 3), (2, 9, 13, 3), (3, 4, 7, 2)]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_jax(method, antialias):
    for shape in SHAPES:
        got = fim.resize(IMG, shape, method, antialias=antialias)
        want = jax.image.resize(IMG, shape, method, antialias=antialias)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, atol=2e-6)
    m = fim.ResizeMethod.from_string(method)
    np.testing.assert_allclose(fim.resize(IMG, SHAPES[0], m),
                               jax.image.resize(IMG, SHAPES[0], method), atol=2e-6)


def test_resize_dtypes_gradients_jit_vmap():
    ints = (IMG * 255).astype(np.uint8)
    assert fim.resize(ints, (2, 4, 4, 3), "nearest").dtype == np.uint8
    assert fim.resize(ints, (2, 4, 4, 3), "linear").dtype == np.float32
    np.testing.assert_allclose(fim.resize(ints, (2, 4, 4, 3), "cubic"),
                               jax.image.resize(ints, (2, 4, 4, 3), "cubic"), atol=1e-4)

    def loss(lib, mod):
        np_ = fnp if lib is fnad else jnp
        return lambda x: np_.sum(np_.sin(mod.resize(x, (2, 5, 12, 3), "lanczos3")))
    np.testing.assert_allclose(fnad.grad(loss(fnad, fim))(IMG),
                               jax.grad(loss(jax, jax.image))(IMG), atol=1e-5)
    f = traced(lambda x: fim.resize(x, (2, 5, 12, 3), "linear"))
    np.testing.assert_allclose(f(IMG), jax.image.resize(IMG, (2, 5, 12, 3), "linear"),
                               atol=2e-6)
    per = fnad.vmap(lambda x: fim.resize(x, (4, 4, 3), "cubic"))(IMG)
    np.testing.assert_allclose(per, jax.image.resize(IMG, (2, 4, 4, 3), "cubic"), atol=2e-6)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area", "cubic-pytorch"])
@pytest.mark.parametrize("antialias", [True, False])
def test_scale_and_translate_values_and_gradients(method, antialias):
    s = np.array([1.7, 0.6], np.float32)
    t = np.array([0.3, -1.2], np.float32)

    def run(mod, s, t):
        return mod.scale_and_translate(IMG, (2, 12, 5, 3), (1, 2), s, t, method,
                                       antialias=antialias)
    np.testing.assert_allclose(run(fim, s, t), run(jax.image, s, t), atol=2e-6)
    got = fnad.grad(lambda s, t: fnp.sum(run(fim, s, t) ** 2), argnums=(0, 1))(s, t)
    want = jax.grad(lambda s, t: jnp.sum(run(jax.image, s, t) ** 2), argnums=(0, 1))(s, t)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-4)


def test_errors():
    with pytest.raises(ValueError, match="shape must have length"):
        fim.resize(IMG, (4, 4), "linear")
    with pytest.raises(ValueError, match='Unknown resize method "bogus"'):
        fim.resize(IMG, (2, 4, 4, 3), "bogus")
    with pytest.raises(ValueError, match="Nearest neighbor"):
        fim.scale_and_translate(IMG, IMG.shape, (1,), [1.0], [0.0], "nearest")
    with pytest.raises(ValueError, match="one entry per spatial dimension"):
        fim.scale_and_translate(IMG, IMG.shape, (1, 2), [1.0], [0.0], "linear")
    assert fnad.image is fim

"""fnad.numpy.ufunc (reduce, accumulate, reduceat, outer, at) on the built-in ufuncs and on
frompyfunc ufuncs, against jax.numpy's: values and dtypes, axes, keepdims, initial, where,
repeated indices in at, gradients, jit, and the errors."""
import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(0)
XI = RNG.integers(-5, 9, (3, 4)).astype(np.int32)
XF = RNG.standard_normal((3, 4)).astype(np.float32)
NAMES = ["add", "multiply", "maximum", "minimum", "subtract", "logaddexp", "logaddexp2",
         "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or",
         "logical_xor"]


def same(got, want):
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _operand(name):
    if name.startswith("logical"):
        return XI > 0
    return XF if name.startswith("logaddexp") else XI


@pytest.mark.parametrize("name", NAMES)
def test_builtin_ufunc_methods_match_jax(name):
    f, j, x = getattr(fnp, name), getattr(jnp, name), _operand(name)
    assert isinstance(f, fnp.ufunc) and f.nin == 2 and f.identity == j.identity
    same(f(x, x[::-1]), j(x, x[::-1]))
    for axis in (0, 1, -1, None):
        same(f.reduce(x, axis=axis), j.reduce(x, axis=axis))
        same(f.reduce(x, axis=axis, keepdims=True), j.reduce(x, axis=axis, keepdims=True))
    for axis in (0, 1):
        same(f.accumulate(x, axis=axis), j.accumulate(x, axis=axis))
    same(f.outer(x[0], x[:, 1]), j.outer(x[0], x[:, 1]))
    idx = np.array([0, 2, 0, 3])                               # 0 twice: combined in turn
    same(f.at(x[0], idx, x[1], inplace=False), j.at(x[0], idx, x[1], inplace=False))
    ind = np.array([0, 2, 1, 3])                               # 2 > 1: just a[2] there
    same(f.reduceat(x, ind, axis=1), j.reduceat(x, ind, axis=1))
    if f.identity is not None:
        same(f.reduce(x, axis=1, where=XI > 0), j.reduce(x, axis=1, where=XI > 0))


def test_initial_where_and_frompyfunc():
    same(fnp.add.reduce(XF, axis=1, initial=2.0), jnp.add.reduce(XF, axis=1, initial=2.0))
    same(fnp.maximum.reduce(XF, axis=1, initial=0.5, where=XF > 0),
         jnp.maximum.reduce(XF, axis=1, initial=0.5, where=XF > 0))
    f = fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    j = jnp.frompyfunc(lambda a, b: a * b + 1, 2, 1)
    same(f(XI, XI), j(XI, XI))
    same(f.reduce(XI, axis=0), j.reduce(XI, axis=0))
    same(f.accumulate(XI, 1), j.accumulate(XI, 1))
    same(f.outer(XI[0], XI[1]), j.outer(XI[0], XI[1]))
    same(f.at(XI[0], np.array([1, 1, 2]), 3, inplace=False),
         j.at(XI[0], np.array([1, 1, 2]), 3, inplace=False))
    same(f.reduceat(XI[0], np.array([0, 2])), j.reduceat(XI[0], np.array([0, 2])))
    same(fnp.negative.at(XI[0], np.array([1, 1]), inplace=False),
         jnp.negative.at(XI[0], np.array([1, 1]), inplace=False))


def test_gradients_and_jit():
    v = XF[0]
    for name in ("multiply", "add", "logaddexp"):
        g = fnad.grad(lambda u: getattr(fnp, name).reduce(u, axis=None))(v)
        h = jax.grad(lambda u: getattr(jnp, name).reduce(u, axis=None))(v)
        np.testing.assert_allclose(g, h, rtol=1e-5)
    g = fnad.grad(lambda u: fnp.frompyfunc(lambda a, b: a * b, 2, 1).accumulate(u).sum())(v)
    h = jax.grad(lambda u: jnp.frompyfunc(lambda a, b: a * b, 2, 1).accumulate(u).sum())(v)
    np.testing.assert_allclose(g, h, rtol=1e-5)
    np.testing.assert_allclose(traced(lambda u: fnp.add.outer(u, u).sum())(v),
                               jnp.add.outer(v, v).sum(), rtol=1e-6)
    assert traced(lambda u, f: f.reduce(u), static_argnums=1)(v, fnp.maximum) == v.max()


def test_errors():
    with pytest.raises(NotImplementedError, match="inplace=False"):
        fnp.add.at(XI[0], np.array([0]), 1)
    with pytest.raises(ValueError, match="binary ufuncs"):
        fnp.negative.reduce(XI)
    with pytest.raises(ValueError, match="does not have an identity"):
        fnp.subtract.reduce(XI, where=XI > 0)
    with pytest.raises(ValueError, match="dtype=bool"):
        fnp.add.reduce(XI, where=XI)
    with pytest.raises(ValueError, match="multiple axes"):
        fnp.add.accumulate(XI, axis=None)
    with pytest.raises(ValueError, match="zero-size array"):
        fnp.subtract.reduce(np.zeros((0,), np.int32))
    with pytest.raises(TypeError, match="takes 2 arguments"):
        fnp.add(1)

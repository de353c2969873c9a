"""Regressions found by differential testing of fnad.nn and fnad.scipy against jax:
gradients at kinks and NaN, result dtypes and weak types, empty reductions, Python
scalar arguments. Each case is compared with jax at test time."""
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
import fnad.scipy.special as fspecial
import fnad.scipy.stats as fstats

jax = pytest.importorskip("jax", reason="jax is the reference")
jnp = jax.numpy
jspecial = pytest.importorskip("jax.scipy.special", reason="jax is the reference")
jstats = pytest.importorskip("jax.scipy.stats", reason="jax is the reference")


def _same(a, b, rtol=1e-6):
    """Same dtype, shape, weak type and values (NaN where jax has NaN)."""
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.aval.weak_type == b.aval.weak_type, (a.aval, b.aval)
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=1e-7)


KINKS = np.array([-np.inf, -3.0, -1.0, 0.0, 0.5, 3.0, 6.0, 7.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name", ["relu", "relu6", "hard_sigmoid", "hard_silu"])
def test_piecewise_activation_value_and_grad_at_kinks_and_nan(name):
    # jax's custom JVPs select the tangent away at the kinks and at NaN: gradient 0 there,
    # while the value at NaN stays NaN
    f, g = getattr(fnad.nn, name), getattr(jax.nn, name)
    _same(f(fnp.asarray(KINKS)), g(jnp.asarray(KINKS)))
    df = fnad.vmap(fnad.grad(f))(fnp.asarray(KINKS))
    dg = jax.vmap(jax.grad(g))(jnp.asarray(KINKS))
    np.testing.assert_allclose(np.asarray(df), np.asarray(dg), rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", ["relu", "relu6", "hard_tanh"])
@pytest.mark.parametrize("x", [np.array([-2, 0, 3, 9], np.int32), np.array([True, False]), 3],
                         ids=["int32", "bool", "pyint"])
def test_activation_dtype_of_integer_inputs(name, x):
    # relu and hard_tanh keep integers; relu6 clips against 6.0 and so gives a weak float
    f, g = getattr(fnad.nn, name), getattr(jax.nn, name)
    fx = fnp.asarray(x) if isinstance(x, np.ndarray) else x
    gx = jnp.asarray(x) if isinstance(x, np.ndarray) else x
    _same(f(fx), g(gx))


@pytest.mark.parametrize("call", [
    lambda nn, x: nn.logsumexp(x),
    lambda nn, x: nn.logsumexp(x, axis=0, keepdims=True),
    lambda nn, x: nn.logsumexp(x, axis=0, return_sign=True)[0],
    lambda nn, x: nn.softmax(x, axis=0),
    lambda nn, x: nn.log_softmax(x, axis=0),
], ids=["lse", "lse_keepdims", "lse_sign", "softmax", "log_softmax"])
def test_reductions_over_empty_axes(call):
    # the max is taken with initial=-inf, as jax's: an empty sum gives log 0 = -inf
    x = np.zeros((0, 3), np.float32)
    _same(call(fnad.nn, fnp.asarray(x)), call(jax.nn, jnp.asarray(x)))


CASES = {
    "poisson.entropy_py": lambda m: m.poisson.entropy(1.5, 1.0),
    "poisson.entropy_pyint": lambda m: m.poisson.entropy(3),
    "chi2.logpdf_f16": lambda m: m.chi2.logpdf(np.float16(1.5), np.float16(3.0)),
    "chi2.pdf_py": lambda m: m.chi2.pdf(1.0, 2.0),
    "wrapcauchy.logpdf_f16": lambda m: m.wrapcauchy.logpdf(np.float16(1.0), np.float16(0.5)),
    "wrapcauchy.pdf_py": lambda m: m.wrapcauchy.pdf(1.0, 0.5),
    "norm.cdf_py": lambda m: m.norm.cdf(1.0),
    "norm.sf_pyint": lambda m: m.norm.sf(1, 1, 2),
    "uniform.cdf_py": lambda m: m.uniform.cdf(0.5),
    "uniform.cdf_f16": lambda m: m.uniform.cdf(np.array([0.5, -1.0, 2.0], np.float16)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_scalar_and_float16_arguments(name):
    # Python scalars are accepted, float16 stays float16 (the constants are weak), and the
    # weak type follows jax's
    _same(CASES[name](fstats), CASES[name](jstats), rtol=2e-3)


def test_ndtr_of_a_python_scalar_is_strongly_typed():
    _same(fspecial.ndtr(2.0), jspecial.ndtr(2.0))

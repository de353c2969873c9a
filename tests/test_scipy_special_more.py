"""The functions fnad.scipy.special gained with lax.betainc, zeta and bessel_i0e/i1e (gamma,
beta, comb, Bessel I, zeta, entropies, Box-Cox, poch, erfcx, dawsn, spence, bernoulli) and
the lax bit primitives' errors: values and dtypes against jax.scipy.special in float32 and
float64 (x64), at edge values (0, negatives and poles, ±inf, NaN); gradients (jax's custom
JVPs) against jax's in float64; jit and vmap; errors. The primitives themselves are in the
spec table (tests/specs/spec_elementwise_special.py).
"""
import numpy as np
import pytest
from checks import jax_at_default_level, traced
from scipy import special as sp_special

import fnad
import fnad.scipy.special as fs
from fnad import lax

try:
    import jax
    import jax.scipy.special as js
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = js = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
f32, f64 = np.float32, np.float64
RNG = np.random.default_rng(0)
EDGE = [0.0, -0.0, 1.0, -1.0, -2.0, 2.0, 0.5, -0.5, 7.5, -7.5, 30.0, 1e-30, np.inf, -np.inf,
        np.nan]
X = np.concatenate([RNG.uniform(-5, 5, 10), EDGE])              # [25]
Y = np.concatenate([RNG.uniform(-5, 5, 10), EDGE[::-1]])        # [25], other pairings
POS = np.concatenate([RNG.uniform(0.05, 6, 10), [0.0, 1e-3, 1.0, 2.0, 20.0]])
UNIT = np.concatenate([RNG.uniform(0.02, 0.98, 10), [0.0, 1.0, 0.5, 1e-4, 0.9999]])

# name: (args as functions of the dtype, what is differentiable, rtol of float32 vs jax)
# jax computes lgamma in float32 (~1e-6 relative, more after exp); fnad's numpy backend in
# float64, rounded: the float32 check against jax allows for jax's error.
CASES = {
    "gammasgn": ((X,), (), 0),
    "gamma": ((X,), (0,), 3e-5),
    "loggamma": ((X,), (0,), 2e-5),
    "beta": ((X, Y), (0, 1), 3e-5),
    "factorial": ((X,), (0,), 3e-5),
    "comb": ((np.abs(X) * 3, np.abs(Y)), (0, 1), 1e-4),
    "i0": ((X,), (0,), 2e-6),
    "i0e": ((X,), (0,), 2e-6),
    "i1": ((X,), (0,), 2e-6),
    "i1e": ((X,), (0,), 2e-6),
    "kl_div": ((X, Y), (0, 1), 2e-6),
    "rel_entr": ((X, Y), (0, 1), 2e-6),
    "boxcox": ((np.abs(X), Y), (0, 1), 2e-6),
    "boxcox1p": ((X, Y), (0, 1), 2e-6),
    "poch": ((X, Y), (0, 1), 3e-5),
    "erfcx": ((X * 3,), (0,), 2e-6),
    "dawsn": ((X * 3,), (0,), 2e-6),
    "spence": ((X * 3,), (), 2e-6),
    "zeta": ((np.abs(X) + 1.1, Y), (0, 1), 2e-6),
    "betainc": ((POS, POS[::-1], UNIT), (2,), 2e-5),
}
# where the derivative is checked: away from poles, branch points and the infinities
GRAD_ARGS = {
    "gamma": (RNG.uniform(0.2, 5, 6),), "loggamma": (RNG.uniform(0.2, 5, 6),),
    "beta": (RNG.uniform(0.2, 5, 6), RNG.uniform(0.2, 5, 6)),
    "factorial": (RNG.uniform(0.2, 5, 6),),
    "comb": (RNG.uniform(5, 9, 6), RNG.uniform(0.5, 4, 6)),
    "i0": (RNG.uniform(-5, 5, 6),), "i0e": (RNG.uniform(-5, 5, 6),),
    "i1": (RNG.uniform(-5, 5, 6),), "i1e": (RNG.uniform(-5, 5, 6),),
    "kl_div": (RNG.uniform(0.1, 3, 6), RNG.uniform(0.1, 3, 6)),
    "rel_entr": (RNG.uniform(0.1, 3, 6), RNG.uniform(0.1, 3, 6)),
    "boxcox": (RNG.uniform(0.1, 3, 6), np.array([0.0, 0.5, -1.0, 2.0, 1e-3, -0.3])),
    "boxcox1p": (RNG.uniform(-0.5, 3, 6), np.array([0.0, 0.5, -1.0, 2.0, 1e-3, -0.3])),
    "poch": (RNG.uniform(0.5, 4, 6), RNG.uniform(-0.4, 3, 6)),
    "erfcx": (np.array([-3.0, -0.5, 0.0, 0.7, 5.0, 30.0]),),
    "dawsn": (np.array([-8.0, -4.0, -1.0, 0.0, 2.0, 5.0]),),
    "zeta": (RNG.uniform(1.5, 6, 6), RNG.uniform(0.5, 4, 6)),
    "betainc": (RNG.uniform(0.5, 5, 6), RNG.uniform(0.5, 5, 6), RNG.uniform(0.05, 0.95, 6)),
}


def _jax(name):
    return jax.jit(getattr(js, name))


def close(got, want, rtol, atol=1e-30):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), \
        ((got.shape, got.dtype), (want.shape, want.dtype))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@needs_jax
@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_values_match_jax(name):
    args, _, rtol = CASES[name]
    args = [a.astype(f32) for a in args]
    got, want = getattr(fs, name)(*args), _jax(name)(*args)
    if name == "erfcx":                                # XLA flushes erfc's subnormal results
        ok = ~((np.abs(args[0]) > 9.2) & (np.abs(args[0]) < 9.42))  # near 9.4 to 0: fnad's
        got, want = np.asarray(got)[ok], np.asarray(want)[ok]       # are right (scipy's)
        close(np.asarray(getattr(fs, name)(*args))[~ok], sp_special.erfcx(args[0][~ok]), 2e-6)
    close(got, want, rtol, atol=1e-6)                  # (jax's loggamma(1) = 4.8e-7)


@needs_jax
@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_values_match_jax(name, x64):
    args, _, _ = CASES[name]
    close(getattr(fs, name)(*args), jax_at_default_level(getattr(js, name))(*args), 1e-9)


@pytest.mark.parametrize("name, ref", [
    ("gamma", sp_special.gamma), ("loggamma", sp_special.loggamma),
    ("i0", sp_special.i0), ("i1", sp_special.i1), ("erfcx", sp_special.erfcx),
    ("dawsn", sp_special.dawsn), ("spence", sp_special.spence)])
def test_values_match_scipy_where_defined(name, ref, x64):
    """Away from jax's conventions (poles, negative spence), scipy's float64 values."""
    x = np.concatenate([RNG.uniform(0.1, 12, 20), [0.3, 1.0, 2.0, 25.0]])
    close(getattr(fs, name)(x), ref(x), 1e-12 if name not in ("dawsn", "spence") else 1e-14,
          atol=1e-300)


@needs_jax
@pytest.mark.parametrize("name", sorted(GRAD_ARGS))
def test_gradients_match_jax(name, x64):
    args = GRAD_ARGS[name]
    argnums = CASES[name][1]
    for i in argnums:
        def ours(*a, i=i):
            return fnad.numpy.sum(getattr(fs, name)(*a) * np.linspace(0.5, 1.5, 6))

        def theirs(*a, i=i):
            return jax.numpy.sum(getattr(js, name)(*a) * np.linspace(0.5, 1.5, 6))
        g = fnad.grad(ours, argnums=i)(*args)
        want = jax.jit(jax.grad(theirs, argnums=i))(*args)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-8, atol=1e-12)


@needs_jax
@pytest.mark.parametrize("name", ["zeta", "erfcx", "dawsn", "poch", "i1e", "gamma"])
def test_second_derivatives_match_jax(name, x64):
    args = GRAD_ARGS[name]
    i = CASES[name][1][-1]

    def ours(*a):
        return fnad.numpy.sum(getattr(fs, name)(*a))

    def theirs(*a):
        return jax.numpy.sum(getattr(js, name)(*a))
    h = fnad.grad(lambda *a: fnad.numpy.sum(fnad.grad(ours, argnums=i)(*a)), argnums=i)(*args)
    want = jax.jit(jax.grad(lambda *a: jax.numpy.sum(jax.grad(theirs, argnums=i)(*a)),
                            argnums=i))(*args)
    np.testing.assert_allclose(np.asarray(h), np.asarray(want), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_and_vmap_agree_with_eager(name):
    args, _, _ = CASES[name]
    args = [np.asarray(a, f32).reshape(5, -1) for a in args]     # [5, n/5]
    fn = getattr(fs, name)
    eager = np.asarray(fn(*args))
    np.testing.assert_allclose(np.asarray(traced(fn)(*args)), eager, rtol=1e-6,
                               equal_nan=True)
    np.testing.assert_allclose(np.asarray(fnad.vmap(fn)(*args)), eager, rtol=1e-6,
                               equal_nan=True)


@needs_jax
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 9, 30])
def test_bernoulli_matches_jax(n):
    close(fs.bernoulli(n), js.bernoulli(n), 1e-6)


def test_bernoulli_values():
    b = np.asarray(fs.bernoulli(12))
    want = [1, -1 / 2, 1 / 6, 0, -1 / 30, 0, 1 / 42, 0, -1 / 30, 0, 5 / 66, 0, -691 / 2730]
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-7)


@needs_jax
def test_comb_with_repetition_matches_jax():
    N, k = np.array([3.0, 5.0, 0.0, 2.5, -1.0], f32), np.array([2.0, 0.0, 0.0, 1.5, 2.0], f32)
    close(fs.comb(N, k, repetition=True), jax.jit(lambda N, k: js.comb(N, k, repetition=True))(
        N, k), 3e-5)


@needs_jax
def test_integer_inputs_promote_as_jax():
    for name in ("gamma", "i0", "factorial", "erfcx", "dawsn"):
        got, want = getattr(fs, name)(np.arange(1, 5)), getattr(js, name)(np.arange(1, 5))
        assert np.asarray(got).dtype == np.asarray(want).dtype == f32
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=3e-5)


# ---- errors --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, nargs", [
    ("gamma", 1), ("gammasgn", 1), ("loggamma", 1), ("beta", 2), ("betainc", 3), ("i0", 1),
    ("i1e", 1), ("kl_div", 2), ("rel_entr", 2), ("poch", 2), ("erfcx", 1), ("dawsn", 1),
    ("zeta", 2)])
def test_complex_inputs_are_rejected(name, nargs):
    with pytest.raises(ValueError, match="complex"):
        getattr(fs, name)(*([np.array([1.0 + 1j], np.complex64)] * nargs))


def test_errors():
    with pytest.raises(NotImplementedError, match="Riemann zeta"):
        fs.zeta(2.0)
    with pytest.raises(NotImplementedError, match="exact=True"):
        fs.factorial(3.0, exact=True)
    with pytest.raises(ValueError, match="non-negative"):
        fs.bernoulli(-1)
    with pytest.raises(TypeError, match="static Python int"):
        fs.bernoulli(2.5)
    with pytest.raises(TypeError, match="not supported"):
        fs.spence(np.arange(3))
    with pytest.raises(ValueError, match="with respect to a and b"):
        fnad.grad(lambda a: fs.betainc(a, 2.0, 0.5))(1.5)
    with pytest.raises(ValueError, match="with respect to x"):
        fnad.grad(lambda x: lax.zeta(x, 2.0))(3.0)
    with pytest.raises(NotImplementedError, match="nextafter is not differentiable"):
        fnad.grad(lambda x: lax.nextafter(x, 2.0))(1.0)


def test_betainc_and_zeta_gradients_in_their_differentiable_arguments(x64):
    """d/dx betainc = x^(a-1)(1-x)^(b-1)/B(a, b); d/dq lax.zeta = -x·zeta(x + 1, q)."""
    a, b, x = 2.5, 1.5, 0.3
    g = fnad.grad(lambda x: fs.betainc(a, b, x))(x)
    np.testing.assert_allclose(g, x ** (a - 1) * (1 - x) ** (b - 1) / sp_special.beta(a, b),
                               rtol=1e-12)
    g = fnad.grad(lambda q: lax.zeta(3.0, q))(1.5)
    np.testing.assert_allclose(g, -3.0 * sp_special.zeta(4.0, 1.5), rtol=1e-12)


def test_lax_bit_primitive_errors():
    x = np.ones((3, 4), f32)
    with pytest.raises(ValueError, match="last axis must hold 4 elements, not 3"):
        lax.bitcast_convert_type(np.ones((4, 3), np.uint8), f32)
    with pytest.raises(TypeError, match="bool"):
        lax.bitcast_convert_type(x, np.bool_)
    with pytest.raises(ValueError, match="exponent_bits must be positive"):
        lax.reduce_precision(x, 0, 3)
    with pytest.raises(ValueError, match="mantissa_bits must be non-negative"):
        lax.reduce_precision(x, 5, -1)
    with pytest.raises(TypeError, match="static"):
        lax.reduce_precision(x, 5.5, 2)
    with pytest.raises(TypeError, match="reduce_precision"):
        lax.reduce_precision(np.arange(3), 5, 2)
    with pytest.raises(TypeError, match="clz"):
        lax.clz(x)
    with pytest.raises(TypeError, match="mulhi"):
        lax.mulhi(x, x)
    with pytest.raises(TypeError, match="nextafter"):
        lax.nextafter(np.arange(3), np.arange(3))


# ---- exponential integrals: against scipy (jax's compile of its vectorized loops takes
# minutes on grids with edge values); jax's values match scipy's at these points
@pytest.mark.parametrize("dtype, rtol", [(f32, 5e-6), (f64, 1e-12)])
def test_exponential_integrals_match_scipy(dtype, rtol, x64):
    x = np.array([-70, -20, -5, -1, -0.1, 1e-8, 0.1, 0.5, 1, 1.5, 3, 6, 12, 20, 40, 60, 80,
                  300], dtype)
    close(fs.expi(x), sp_special.expi(x).astype(dtype), rtol, atol=1e-300)
    pos = np.abs(x)
    close(fs.exp1(pos), sp_special.exp1(pos).astype(dtype), rtol, atol=1e-300)
    for n in (0, 1, 2, 5, 6000):
        close(fs.expn(dtype(n), pos), sp_special.expn(n, pos).astype(dtype), rtol,
              atol=1e-300)
    close(fs.expn(dtype(2), np.array([0.0, -1.0, np.nan], dtype)),
          np.array([0.5, np.nan, np.nan], dtype), 0)  # 1/n at 0 (jax's; scipy: 1/(n-1))


def test_exponential_integral_derivatives(x64):
    """d Ei = e^x/x dx, d Eₙ = -Eₙ₋₁ dx (jax's custom JVPs)."""
    x = np.array([-3.0, -0.5, 0.3, 2.0, 9.0])
    g = fnad.vmap(fnad.grad(fs.expi))(x)
    np.testing.assert_allclose(g, np.exp(x) / x, rtol=1e-12)
    g = fnad.vmap(fnad.grad(lambda v: fs.expn(3.0, v)))(np.abs(x))
    np.testing.assert_allclose(g, -sp_special.expn(2, np.abs(x)), rtol=1e-12)
    np.testing.assert_allclose(traced(fs.exp1)(np.abs(x)), sp_special.exp1(np.abs(x)),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="complex"):
        fs.expi(np.array([1j]))

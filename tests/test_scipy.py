"""fnad.scipy.special and fnad.scipy.stats.norm against jax.scipy: values, dtypes and
gradients, at the special points (poles, ±inf, NaN, 0 and 1, the tails) where jax's
custom derivatives and conventions decide; float64 under x64; jit and vmap once each;
errors. SciPy itself is the reference where jax is missing.
"""
import subprocess
import sys

import numpy as np
import pytest
from checks import traced
from scipy import special as sp_special
from scipy import stats as sp_stats

import fnad
import fnad.numpy as fnp
import fnad.scipy.special as fs
import fnad.scipy.stats.norm as fnorm
from fnad import lax

try:
    import jax
    import jax.scipy.special as js
    import jax.scipy.stats.norm as jnorm
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = js = jnorm = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
f32 = np.float32
RNG = np.random.default_rng(0)
# real line: tails, 0, poles of the gamma family, infinities, NaN
X = np.concatenate([RNG.standard_normal(8) * 3, [-40.0, -12.0, -3.0, -2.5, -1.0, -0.5, 0.0,
                                                  0.3, 1.0, 2.0, 7.5, 12.0, 40.0, 1e6, np.inf,
                                                  -np.inf, np.nan]]).astype(f32)
# probabilities: 0 and 1, tails, outside [0, 1]
P = np.array([0.0, 1e-30, 1e-10, 1e-3, 0.05, 0.1353, 0.3, 0.5, 0.8, 0.95, 0.99, 1 - 1e-7,
              1.0, -0.1, 1.2, np.nan], f32)
# xlogy / xlog1py operands: x = 0 with y = 0, -1, NaN, inf; negative y
XY = (np.array([0, 0, 0, 0, 0, 1, -1, 2, 0.5, 3, 0], f32),
      np.array([0, -1, np.nan, np.inf, 2, 0, 0.5, -0.5, 1e-30, 3, 1e-3], f32))


def close(got, want, rtol=2e-6, atol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def per_element_grad(f, lib, argnums=0):
    """d f / d args[argnums], element by element (vmap of grad of the scalar function);
    jax's jitted (op by op, jax compiles each primitive: seconds per test)."""
    g = lib.vmap(lib.grad(f, argnums=argnums))
    return jax.jit(g) if lib is jax else g


def jit(f, *static_argnames):
    """jax's reference functions, compiled once (see per_element_grad)."""
    return jax.jit(f, static_argnames=static_argnames)


UNARY = {"erf": X, "erfc": X, "erfinv": P * 2 - 1, "expit": X, "logit": P, "gammaln": X,
         "digamma": X, "ndtr": X, "ndtri": P, "log_ndtr": X, "entr": X}


@needs_jax
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_match_jax_with_gradients(name):
    x = UNARY[name]
    close(getattr(fs, name)(x), jit(getattr(js, name))(x))
    g = per_element_grad(getattr(fs, name), fnad)(x)
    gj = per_element_grad(getattr(js, name), jax)(x)
    close(g, gj, rtol=1e-5)


@needs_jax
@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_and_xlog1py_match_jax_at_zero_and_nan(name):
    x, y = XY
    close(getattr(fs, name)(x, y), jit(getattr(js, name))(x, y))
    for argnums in (0, 1):          # jax's custom JVP: x = 0 gives 0 · log y + dy · 0 / y
        close(per_element_grad(getattr(fs, name), fnad, argnums)(x, y),
              per_element_grad(getattr(js, name), jax, argnums)(x, y))
    close(getattr(fs, name)(2.0, np.array([1.0, 3.0], f32)),       # scalars broadcast
          jit(getattr(js, name))(2.0, np.array([1.0, 3.0], f32)))


@needs_jax
def test_gamma_family_matches_jax():
    a = np.array([0.5, 1.0, 3.0, 7.9, 8.1, 10.0, 1e3, 1e6, 0.1], f32)
    b = np.array([2.0, 30.0, 0.1, 7.9, 8.1, 9.0, 1e4, 2e6, 40.0], f32)
    close(fs.betaln(a, b), jit(js.betaln)(a, b), rtol=1e-5)
    g = fnad.grad(lambda a, b: fnp.sum(fs.betaln(a, b)), argnums=(0, 1))(a, b)
    gj = jit(jax.grad(lambda a, b: js.betaln(a, b).sum(), argnums=(0, 1)))(a, b)
    for u, v in zip(g, gj):
        close(u, v, rtol=1e-4)
    for d in (1, 3):
        close(fs.multigammaln(a + 2, d), jit(lambda a: js.multigammaln(a, d))(a + 2),
              rtol=1e-5)
        close(fnad.grad(lambda a: fnp.sum(fs.multigammaln(a, d)))(a + 2),
              jit(jax.grad(lambda a: js.multigammaln(a, d).sum()))(a + 2), rtol=1e-5)
    n = np.array([0, 1, 2, 3], np.int32)
    close(fs.polygamma(n, f32(1.5)), jit(js.polygamma)(n, f32(1.5)))
    close(fs.polygamma(2, X), jit(js.polygamma)(2, X), rtol=1e-5)
    close(per_element_grad(lambda x: fs.polygamma(1, x), fnad)(X),
          per_element_grad(lambda x: js.polygamma(1, x), jax)(X), rtol=1e-5)


@needs_jax
def test_incomplete_gamma_matches_jax_with_gradients():
    """gammainc/gammaincc (lax.igamma/igammac) with jax's values, broadcasting and
    derivatives in a (through lax.igamma_grad_a) and x; the edges 0, inf and NaN too."""
    a = np.array([[0.05], [0.5], [1.0], [3.0], [40.0]], f32)                       # [5, 1]
    x = np.array([0.0, 1e-3, 0.4, 1.0, 2.5, 30.0, 45.0, np.inf, np.nan], f32)      # [9]
    for name in ("gammainc", "gammaincc"):
        close(getattr(fs, name)(a, x), jit(getattr(js, name))(a, x), rtol=1e-5)
        close(getattr(fs, name)(np.array([0.0, -1.0, np.inf], f32), f32(2.0)),
              jit(getattr(js, name))(np.array([0.0, -1.0, np.inf], f32), f32(2.0)))
        xs = x[1:7]
        g = fnad.grad(lambda a, x, n=name: fnp.sum(getattr(fs, n)(a, x)), argnums=(0, 1))
        gj = jit(jax.grad(lambda a, x, n=name: getattr(js, n)(a, x).sum(), argnums=(0, 1)))
        for u, v in zip(g(a, xs), gj(a, xs)):
            close(u, v, rtol=2e-4, atol=1e-6)        # jax's float32 ∂P/∂a loses ~1e-4
    close(fs.gammainc(2, 3), jit(js.gammainc)(2, 3))                # ints -> float32
    close(traced(fnad.vmap(fs.gammaincc))(a[:, 0], x[1:6]),
          jax.vmap(js.gammaincc)(a[:, 0], x[1:6]), rtol=1e-5)


@needs_jax
def test_incomplete_gamma_in_float64_matches_jax_and_scipy(x64):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.01, 50.0, 40)
    x = rng.gamma(a)
    for name, ref in (("gammainc", sp_special.gammainc), ("gammaincc", sp_special.gammaincc)):
        close(getattr(fs, name)(a, x), ref(a, x), rtol=1e-12, atol=1e-300)
        close(getattr(fs, name)(a, x), jit(getattr(js, name))(a, x), rtol=1e-9, atol=1e-300)
    close(lax.igamma_grad_a(a, x), jax.lax.igamma_grad_a(a, x), rtol=1e-9)
    close(lax.random_gamma_grad(a, x), jax.lax.random_gamma_grad(a, x), rtol=1e-9)


def test_igamma_grad_a_against_mpmath(x64):
    """The numpy reference's ∂P/∂a (XLA's series / continued fraction, run in float64)
    against mpmath's derivative of its regularized incomplete gamma at 30 digits, on both
    branches (x <= max(1, a): series; else the fraction) and for large a."""
    mpmath = pytest.importorskip("mpmath", reason="mpmath is the high-precision reference")
    mpmath.mp.dps = 30
    a = np.array([0.02, 0.3, 0.3, 1.0, 2.5, 2.5, 9.0, 80.0, 80.0, 400.0])
    x = np.array([0.01, 0.05, 4.0, 1.0, 0.7, 6.0, 9.5, 70.0, 95.0, 410.0])
    want = [float(mpmath.diff(lambda t, xi=xi: mpmath.gammainc(t, 0, xi, regularized=True),
                              ai)) for ai, xi in zip(a, x)]
    close(lax.igamma_grad_a(a, x), np.array(want), rtol=1e-11, atol=0)
    dp_dx = np.exp((a - 1) * np.log(x) - x - sp_special.gammaln(a))
    close(lax.random_gamma_grad(a, x), -np.array(want) / dp_dx, rtol=1e-11, atol=0)


@needs_jax
def test_lax_gamma_family_in_float64_matches_jax(x64):
    x = X.astype(np.float64)
    close(lax.lgamma(x), jax.lax.lgamma(x), rtol=1e-12)
    close(lax.digamma(x), jax.lax.digamma(x), rtol=1e-12)
    for m in (0.0, 1.0, 2.0, 3.0, 0.5, -1.0):      # m not a whole number >= 0: NaN
        xm = x[x > -7] if m else x               # jax's polygamma is wrong for x < -7
        close(lax.polygamma(m, xm), jax.lax.polygamma(m, xm), rtol=1e-12)
    close(fnad.grad(lambda x: lax.digamma(x))(2.5), jax.grad(jax.lax.digamma)(2.5), rtol=1e-13)


@needs_jax
def test_float64_matches_jax(x64):
    x, p = X.astype(np.float64), P.astype(np.float64)
    for name in ["ndtr", "log_ndtr", "gammaln", "expit", "entr"]:
        close(getattr(fs, name)(x), jit(getattr(js, name))(x), rtol=1e-12, atol=1e-14)
    for name in ["ndtri", "logit"]:
        close(getattr(fs, name)(p), jit(getattr(js, name))(p), rtol=1e-12, atol=1e-14)
    close(per_element_grad(fs.log_ndtr, fnad)(x), per_element_grad(js.log_ndtr, jax)(x),
          rtol=1e-12, atol=1e-14)


@needs_jax
def test_logsumexp_softmax_match_jax():
    a = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [3.0, 2.0, 1.0]], f32)
    b = np.array([[1.0, 2.0, -1.0], [1.0, 1.0, 1.0], [-1.0, 0.5, 0.0]], f32)
    assert fs.logsumexp is fnad.nn.logsumexp
    close(fs.logsumexp(a, axis=1), jit(js.logsumexp, "axis")(a, axis=1))
    close(fnad.grad(lambda a: fnp.sum(fs.logsumexp(a, axis=1)))(a),     # all -inf row: NaN
          jit(jax.grad(lambda a: js.logsumexp(a, axis=1).sum()))(a))
    for got, want in zip(fs.logsumexp(a, axis=1, b=b, return_sign=True),
                         jit(js.logsumexp, "axis", "return_sign")(
                             a, axis=1, b=b, return_sign=True)):
        close(got, want)
    close(fs.logsumexp(a, b=b, keepdims=True), jit(js.logsumexp, "keepdims")(a, b=b, keepdims=True))
    m = np.asarray(X[:12]).reshape(3, 4)
    for name in ["softmax", "log_softmax"]:               # scipy's default: every axis
        close(getattr(fs, name)(m), jit(getattr(js, name))(m))
        close(getattr(fs, name)(m, axis=0), jit(getattr(js, name), "axis")(m, axis=0))


@needs_jax
@pytest.mark.parametrize("name", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"])
def test_norm_matches_jax_with_gradients(name):
    f, fj = getattr(fnorm, name), jit(getattr(jnorm, name))
    close(f(X), fj(X), rtol=1e-5)
    close(f(X, 0.5, 2.0), fj(X, 0.5, 2.0), rtol=1e-5)
    x = X[np.isfinite(X)]
    g = fnad.grad(lambda x, loc, s: fnp.sum(f(x, loc, s)), argnums=(0, 1, 2))(x, f32(0.5), f32(2))
    gj = jit(jax.grad(lambda x, loc, s: fj(x, loc, s).sum(), argnums=(0, 1, 2)))(x, f32(0.5),
                                                                                  f32(2))
    for u, v in zip(g, gj):
        close(u, v, rtol=1e-5, atol=1e-5)


@needs_jax
@pytest.mark.parametrize("name", ["ppf", "isf"])
def test_norm_quantiles_match_jax(name):
    f, fj = getattr(fnorm, name), jit(getattr(jnorm, name))
    close(f(P), fj(P), rtol=1e-5)
    close(f(P, np.ones(P.shape, f32), 3.0), fj(P, np.ones(P.shape, f32), 3.0), rtol=1e-5)
    q = P[(P > 0) & (P < 1)]
    close(per_element_grad(f, fnad)(q), per_element_grad(fj, jax)(q), rtol=1e-4)


@needs_jax
def test_under_jit_and_vmap():
    def make(special, norm):
        def f(x, y):
            return (special.xlogy(x, y) + special.gammaln(y) + special.log_ndtr(x)
                    + norm.logpdf(y, 1.0) + special.polygamma(1, y) + special.entr(y))
        return f
    f, fj = make(fs, fnorm), jit(make(js, jnorm))
    x, y = RNG.standard_normal((2, 5)).astype(f32), RNG.uniform(0.1, 3, (2, 5)).astype(f32)
    close(traced(f)(x, y), fj(x, y), rtol=1e-5)
    close(fnad.vmap(f, in_axes=(0, None))(x, y[0]), jax.vmap(fj, in_axes=(0, None))(x, y[0]),
          rtol=1e-5)
    g = traced(fnad.grad(lambda x, y: fnp.sum(f(x, y)), argnums=(0, 1)))(x, y)
    gj = jit(jax.grad(lambda x, y: fj(x, y).sum(), argnums=(0, 1)))(x, y)
    for u, v in zip(g, gj):
        close(u, v, rtol=1e-5, atol=1e-5)


# ---- without jax: SciPy is the reference where its conventions agree with jax's --------------
def test_values_match_scipy():
    x = X[np.isfinite(X) & (X > 0)]
    for name in ["erf", "erfc", "expit", "gammaln", "digamma", "ndtr", "log_ndtr", "entr"]:
        close(getattr(fs, name)(x), getattr(sp_special, name)(x).astype(f32), rtol=1e-5)
    p = P[(P > 0) & (P < 1)]
    for name in ["logit", "ndtri"]:
        close(getattr(fs, name)(p), getattr(sp_special, name)(p).astype(f32), rtol=1e-5)
    close(fs.xlogy(XY[0], XY[1]), sp_special.xlogy(*XY).astype(f32))
    close(fs.betaln(x, x[::-1]), sp_special.betaln(x, x[::-1]).astype(f32), rtol=1e-4)
    close(fs.multigammaln(x + 2, 3), sp_special.multigammaln(x + 2, 3).astype(f32), rtol=1e-5)
    for name in ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"]:
        close(getattr(fnorm, name)(x, 0.5, 2.0),
              getattr(sp_stats.norm, name)(x, 0.5, 2.0).astype(f32), rtol=1e-5, atol=1e-6)
    close(fnorm.ppf(p, 0.5, 2.0), sp_stats.norm.ppf(p, 0.5, 2.0).astype(f32), rtol=1e-5)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="must be of integer type"):
        fs.polygamma(1.0, 2.0)
    with pytest.raises(ValueError, match="gradient with respect to m is not supported"):
        fnad.grad(lambda m: lax.polygamma(m, 2.0))(1.0)
    with pytest.raises(TypeError, match="int32 is not supported"):
        fs.ndtr(np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError, match="series_order must be <= 30"):
        fs.log_ndtr(1.0, series_order=31)
    with pytest.raises(ValueError, match="complex"):
        fs.entr(np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="lgamma: does not accept dtype int32"):
        lax.lgamma(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="igamma: does not accept dtype int32"):
        lax.igamma(np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="igamma: does not accept dtype complex64"):
        fs.gammainc(np.ones(2, np.complex64), 1.0)
    with pytest.raises(NotImplementedError, match="igamma_grad_a is not differentiable"):
        fnad.grad(fnad.grad(lambda a: fs.gammainc(a, 2.0)))(1.5)
    with pytest.raises(NotImplementedError, match="random_gamma_grad is not differentiable"):
        fnad.jvp(lambda x: lax.random_gamma_grad(1.5, x), (2.0,), (1.0,))


def test_import_fnad_does_not_load_scipy_package():
    code = ("import sys, fnad; assert 'fnad.scipy' not in sys.modules; "
            "assert fnad.scipy.special.gammaln is not None")
    subprocess.run([sys.executable, "-c", code], check=True)

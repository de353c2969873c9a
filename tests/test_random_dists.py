"""fnad.random's distributions beyond uniform/normal (cauchy ... t, gamma, geometric) against
jax.random, the oracle: the same key gives jax's values to a few ulp (fnad's log / erf_inv /
tan differ from XLA's in the last bits); moments on 10k samples; errors; jit and vmap; the
gamma family's gradients in its shape parameters against jax's."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.random as fr

jax = pytest.importorskip("jax", reason="jax.random is the oracle for these samplers")
import jax.random as jr  # noqa: E402

_A = np.array([0.05, 0.5, 1.0, 3.0, 20.0], np.float32)
_MEAN = np.array([1.0, -2.0], np.float32)
_COV = np.array([[2.0, 0.5], [0.5, 1.0]], np.float32)
# name -> sampler written against a random module (fnad.random or jax.random), given a key,
# a dtype name and a shape
SAMPLERS = {
    "cauchy": lambda r, k, dt, s: r.cauchy(k, s, dt),
    "laplace": lambda r, k, dt, s: r.laplace(k, s, dt),
    "logistic": lambda r, k, dt, s: r.logistic(k, s, dt),
    "lognormal": lambda r, k, dt, s: r.lognormal(k, 0.5, s, dt),
    "pareto": lambda r, k, dt, s: r.pareto(k, 3.0, s, dt),
    "rademacher": lambda r, k, dt, s: r.rademacher(k, s),
    "rayleigh": lambda r, k, dt, s: r.rayleigh(k, np.float16(2.0), s, dt),
    "maxwell": lambda r, k, dt, s: r.maxwell(k, s, dt),
    "double_sided_maxwell": lambda r, k, dt, s: r.double_sided_maxwell(k, 1.0, 2.0, s, dt),
    "weibull_min": lambda r, k, dt, s: r.weibull_min(k, 2.0, 1.5, s, dt),
    "triangular": lambda r, k, dt, s: r.triangular(k, -1.0, 0.5, 3.0, s, dt),
    "wald": lambda r, k, dt, s: r.wald(k, 1.5, s, dt),
    "generalized_normal": lambda r, k, dt, s: r.generalized_normal(k, 1.5, s, dt),
    "ball": lambda r, k, dt, s: r.ball(k, 3, 1.5, s, dt),
    "multivariate_normal": lambda r, k, dt, s: r.multivariate_normal(k, _MEAN, _COV, s, dt),
    "multivariate_normal eigh": lambda r, k, dt, s: r.multivariate_normal(
        k, _MEAN, _COV, s, dt, method="eigh"),
    "multivariate_normal svd": lambda r, k, dt, s: r.multivariate_normal(
        k, _MEAN, _COV, s, dt, method="svd"),
    "orthogonal": lambda r, k, dt, s: r.orthogonal(k, 3, s[:1], dt, m=4),
    "gamma": lambda r, k, dt, s: r.gamma(k, 2.5, s, dt),
    "gamma_small_a": lambda r, k, dt, s: r.gamma(k, _A, (*s, 5), dt),
    "loggamma": lambda r, k, dt, s: r.loggamma(k, _A, (*s, 5), dt),
    "beta": lambda r, k, dt, s: r.beta(k, 0.7, 2.0, s, dt),
    "dirichlet": lambda r, k, dt, s: r.dirichlet(k, np.array([0.5, 1.0, 4.0], dt), s, dt),
    "chisquare": lambda r, k, dt, s: r.chisquare(k, 3.0, s, dt),
    "f": lambda r, k, dt, s: r.f(k, 3.0, 5.0, s, dt),
    "t": lambda r, k, dt, s: r.t(k, 4.0, s, dt),
    "geometric": lambda r, k, dt, s: r.geometric(k, np.array(0.3, dt), s),
}
# exactly equal to jax's in every case tried (integers; uniform-only float formulas)
EXACT = {"rademacher", "geometric", "triangular"}


def a(x):
    return np.asarray(x)


def _close(got, want, dt, what):
    got, want = a(got), a(want)
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    # relative to |want|, floored at tiny: gamma's small-a draws are denormal in float32
    # absolute near 0 (log's cancellation; orthogonal's QR against LAPACK's), except for
    # gamma, whose small-a draws are tiny (denormal) and must still agree relatively
    rtol = {"float32": 2e-5, "float16": 1e-2, "bfloat16": 2e-2}[dt]
    atol = float(np.finfo(np.float32).tiny) * 16 if what.startswith("gamma") else \
        {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}[dt]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, err_msg=what)


# the gamma family is slow to run (fnad's eager while loops, jax's compiles): float32 only
SLOW = {"generalized_normal", "ball", "gamma", "gamma_small_a", "loggamma", "beta", "dirichlet",
        "chisquare", "f", "t"}
# (gamma, chisquare, f, dirichlet, generalized_normal, ball run through loggamma/gamma/beta/t's
# code paths; the vmap and x64 tests below cover gamma again)
CASES = [(n, "float32", (2, 7)) for n in sorted(SAMPLERS)
         if n not in SLOW - {"gamma_small_a", "loggamma", "beta", "t", "dirichlet"}] + \
    [(n, "float16", (6,)) for n in sorted(SAMPLERS)
     if n not in SLOW | {"multivariate_normal", "multivariate_normal eigh",
                         "multivariate_normal svd", "orthogonal"}]   # no float16 linalg


@pytest.mark.parametrize("name,dt,shape", CASES)
def test_matches_jax_for_the_same_key(name, dt, shape):
    sampler = SAMPLERS[name]
    for seed in (3,):
        got = sampler(fr, fr.PRNGKey(seed), getattr(fnad.numpy, dt), shape)
        want = sampler(jr, jr.PRNGKey(seed), getattr(jax.numpy, dt), shape)
        if name in EXACT:
            assert a(got).dtype == a(want).dtype
            np.testing.assert_array_equal(a(got), a(want), err_msg=f"{name} seed {seed}")
        else:
            _close(got, want, dt, f"{name} {dt}{list(shape)} seed {seed}")


def test_gamma_many_entries_matches_jax():
    """jax's per-entry key split and rejection loop, replayed: 2000 draws over a range of a."""
    k, jk = fr.PRNGKey(11), jr.PRNGKey(11)
    alpha = np.geomspace(0.02, 50.0, 300).astype(np.float32)
    _close(fr.gamma(k, alpha), jr.gamma(jk, alpha), "float32", "gamma")
    _close(fr.loggamma(k, alpha), jr.loggamma(jk, alpha), "float32", "loggamma")


def test_bfloat16_and_x64():
    k, jk = fr.PRNGKey(2), jr.PRNGKey(2)
    for name in ("laplace",):
        _close(SAMPLERS[name](fr, k, fnad.numpy.bfloat16, (5,)),
               SAMPLERS[name](jr, jk, jax.numpy.bfloat16, (5,)), "bfloat16", name)
    from checks import x64_everywhere
    with x64_everywhere():
        for name in ("gamma", "cauchy"):
            got = SAMPLERS[name](fr, k, None, (5,))
            want = SAMPLERS[name](jr, jk, None, (5,))
            assert a(got).dtype == a(want).dtype == np.float64
            np.testing.assert_allclose(a(got), a(want), rtol=1e-12, err_msg=name)


# ---- distributions ---------------------------------------------------------------------------
# name -> (draw of 10k with fnad, mean, variance)
MOMENTS = {
    "gamma": (lambda k, n: fr.gamma(k, 2.5, (n,)), 2.5, 2.5),
    "gamma_small": (lambda k, n: fr.gamma(k, 0.3, (n,)), 0.3, 0.3),
    "beta": (lambda k, n: fr.beta(k, 2.0, 3.0, (n,)), 0.4, 6 / (25 * 6)),
    "chisquare": (lambda k, n: fr.chisquare(k, 4.0, (n,)), 4.0, 8.0),
    "t": (lambda k, n: fr.t(k, 6.0, (n,)), 0.0, 1.5),
    "laplace": (lambda k, n: fr.laplace(k, (n,)), 0.0, 2.0),
    "logistic": (lambda k, n: fr.logistic(k, (n,)), 0.0, np.pi ** 2 / 3),
    "wald": (lambda k, n: fr.wald(k, 2.0, (n,)), 2.0, 8.0),
    "triangular": (lambda k, n: fr.triangular(k, 0.0, 1.0, 4.0, (n,)), 5 / 3, 13 / 18),
    "geometric": (lambda k, n: fr.geometric(k, 0.25, (n,)), 4.0, 12.0),
    "rayleigh": (lambda k, n: fr.rayleigh(k, 1.0, (n,)), np.sqrt(np.pi / 2), 2 - np.pi / 2),
}


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_mean_and_variance(name):
    draw, mean, var = MOMENTS[name]
    n = 10_000
    x = a(draw(fr.PRNGKey(5), n)).astype(np.float64)
    assert abs(x.mean() - mean) < 5 * np.sqrt(var / n), (x.mean(), mean)
    assert abs(x.var() - var) < 0.1 * var, (x.var(), var)


def test_structured_samples():
    k = fr.PRNGKey(0)
    d = a(fr.dirichlet(k, np.array([1.0, 2.0, 3.0], np.float32), (1000,)))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    b = a(fr.ball(k, 4, 2, (500,)))
    assert np.all(np.linalg.norm(b, axis=-1) <= 1.0)
    q = a(fr.orthogonal(k, 5, (2,)))                                # [2, 5, 5]
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(5), q.shape),
                               atol=1e-5)
    x = a(fr.multivariate_normal(k, _MEAN, _COV, (10_000,)))
    np.testing.assert_allclose(np.cov(x.T), _COV, atol=0.1)
    assert set(np.unique(a(fr.rademacher(k, (100,))))) == {-1, 1}


# ---- keys ------------------------------------------------------------------------------------
def test_key_helpers():
    k = fr.PRNGKey(3)
    assert fr.clone(k) is k
    assert fr.key_impl(k) == str(jr.key_impl(jr.PRNGKey(3))) == "threefry2x32"
    wrapped = fr.wrap_key_data(np.array([0, 3], np.uint32))          # typed, as in jax
    assert wrapped.shape == () and str(wrapped.dtype) == "key<fry>"
    np.testing.assert_array_equal(a(fr.key_data(wrapped)), a(k))
    np.testing.assert_array_equal(a(fr.key_data(fr.wrap_key_data(a(k), impl="threefry2x32"))),
                                  a(k))
    raises_with(lambda: fr.wrap_key_data(a(k), impl="rbg"), "end with (4,)", exc=TypeError)
    assert fr.key_dtype() == wrapped.dtype and str(fr.key_dtype()) == str(jr.key_dtype())


# ---- errors ----------------------------------------------------------------------------------
def test_errors():
    k = fr.PRNGKey(0)
    for name in ("cauchy", "laplace", "logistic", "maxwell"):
        raises_with(lambda: getattr(fr, name)(k, (3,), np.int32),
                    f"dtype argument to `{name}` must be a float dtype", exc=ValueError)
    raises_with(lambda: fr.gamma(k, 1.0, (3,), np.int32), "must be a float dtype",
                exc=ValueError)
    raises_with(lambda: fr.pareto(k, np.ones(2, np.float32), (3,)), "shape", exc=ValueError)
    raises_with(lambda: fr.gamma(k, np.ones((2, 1), np.float32), (2,)),
                "broadcast-compatible with shape", exc=ValueError)
    raises_with(lambda: fr.pareto(k, np.float32(2), (3,), np.float16), "cannot safely cast",
                exc=fnad.dtypes.TypePromotionError)
    raises_with(lambda: fr.geometric(k, 0.5, (3,), np.float32), "must be an int dtype",
                exc=ValueError)
    raises_with(lambda: fr.dirichlet(k, 1.0), "alpha.ndim >= 1", exc=ValueError)
    raises_with(lambda: fr.multivariate_normal(k, _MEAN, _COV[:1]), "cov.shape == (..., n, n)",
                exc=ValueError)
    raises_with(lambda: fr.multivariate_normal(k, 1.0, _COV), "mean.ndim >= 1", exc=ValueError)
    raises_with(lambda: fr.multivariate_normal(k, _MEAN, _COV, method="qr"), "method must be",
                exc=ValueError)
    raises_with(lambda: fr.cauchy(np.zeros(3, np.uint32)), "raw PRNG key", exc=TypeError)
    # the first derivative in `a` is jax's implicit one; random_gamma_grad has none (as jax)
    raises_with(lambda: fnad.grad(fnad.grad(lambda s: fr.gamma(k, s)))(2.0),
                "random_gamma_grad is not differentiable", exc=NotImplementedError)


# ---- transformations -------------------------------------------------------------------------
def test_jit_equals_eager():
    k = fr.PRNGKey(4)
    for name in ("gamma", "wald", "multivariate_normal"):
        def f(k, name=name):
            return SAMPLERS[name](fr, k, fnad.numpy.float32, (3,))
        np.testing.assert_allclose(a(traced(f)(k)), a(f(k)), rtol=1e-6, atol=1e-30,
                                   err_msg=name)


def test_vmap_over_keys_matches_jax_vmap():
    keys, jkeys = fr.split(fr.PRNGKey(0), 6), jr.split(jr.PRNGKey(0), 6)
    for name in ("gamma_small_a", "cauchy", "geometric"):
        got = fnad.vmap(lambda k, name=name: SAMPLERS[name](fr, k, fnad.numpy.float32, (3,)))
        want = jax.vmap(lambda k, name=name: SAMPLERS[name](jr, k, jax.numpy.float32, (3,)))
        _close(got(keys), want(jkeys), "float32", name)


def test_grad_through_location_and_scale_parameters():
    k, jk = fr.PRNGKey(1), jr.PRNGKey(1)
    got = fnad.grad(lambda s: fr.lognormal(k, s, (4,)).sum())(0.7)
    want = jax.grad(lambda s: jr.lognormal(jk, s, (4,)).sum())(0.7)
    np.testing.assert_allclose(a(got), a(want), rtol=1e-5)
    got = fnad.grad(lambda s: fr.gamma(k, fnad.lax.stop_gradient(2.0) * 1.0, (4,)).sum() * s)(
        1.5)
    assert np.isfinite(a(got))


# ---- the gamma family's gradient in its shape parameters -------------------------------------
# jax differentiates a Gamma(a) draw x implicitly: dx/da = -(∂P/∂a)/(∂P/∂x) at fixed key
# (lax.random_gamma_grad); fnad's custom JVP computes the same, so for the same key the
# gradients of losses through gamma, loggamma, beta, dirichlet (and chisquare, t, f, which
# build on them) equal jax's to float32 tolerance.
_W = np.linspace(-1.0, 2.0, 10).reshape(2, 5).astype(np.float32)
GRADS = {
    "gamma": (lambda r, k, x: (r.gamma(k, x, (2, 5)) * _W).sum(), _A),
    "loggamma": (lambda r, k, x: (r.loggamma(k, x, (2, 5)) * _W).sum(), _A),
    "beta": (lambda r, k, x: (r.beta(k, x, x[::-1], (2, 5)) * _W).sum(), _A),
    "dirichlet": (lambda r, k, x: (r.dirichlet(k, x, (2,)) * _W).sum(), _A),
    "chisquare": (lambda r, k, x: (r.chisquare(k, x, (2, 5)) * _W).sum(), 4 * _A),
    "t": (lambda r, k, x: (r.t(k, x, (2, 5)) * _W).sum(), 4 * _A + 1),
    # (jax's f cannot broadcast dfnum to a larger shape: a lax.div of unequal ranks)
    "f": (lambda r, k, x: (r.f(k, x, 3.0) * _W[0]).sum(), 4 * _A + 1),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradient_in_the_shape_parameter_matches_jax(name):
    loss, x = GRADS[name]
    for seed in (0, 9):
        got = fnad.grad(lambda v: loss(fr, fr.PRNGKey(seed), v))(x)
        want = jax.grad(lambda v: loss(jr, jr.PRNGKey(seed), v))(x)
        np.testing.assert_allclose(a(got), a(want), rtol=2e-4, atol=1e-6,
                                   err_msg=f"{name} seed {seed}")


def test_gamma_gradient_is_the_implicit_derivative():
    """dx/da = -(∂P/∂a)/(∂P/∂x) at each draw x, with ∂P/∂a from central differences of
    scipy's gammainc (float64); and, as a reparameterization gradient must, its mean over
    many draws is d/da E[x] = 1 (d/da E[log x] = ψ'(a) for loggamma). It is not the
    derivative of the Marsaglia–Tsang draw at a fixed key: that maps the key's bits to x by
    another path than the inverse CDF."""
    from scipy import special
    from checks import x64_everywhere
    alpha = np.array([0.05, 0.3, 0.9, 1.0, 2.5, 8.0, 60.0])
    with x64_everywhere():
        x, slope = fnad.jvp(lambda v: fr.gamma(fr.PRNGKey(4), v), (alpha,),
                            (np.ones_like(alpha),))
        x, h = a(x), 1e-6 * alpha
        dp_da = (special.gammainc(alpha + h, x) - special.gammainc(alpha - h, x)) / (2 * h)
        dp_dx = np.exp((alpha - 1) * np.log(x) - x - special.gammaln(alpha))
        np.testing.assert_allclose(a(slope), -dp_da / dp_dx, rtol=1e-6)
        want = jax.jvp(lambda v: jr.gamma(jr.PRNGKey(4), v), (alpha,), (np.ones_like(alpha),))
        np.testing.assert_allclose(a(slope), a(want[1]), rtol=1e-9)
    n = 4000
    for name, a0, mean in (("gamma", 2.5, 1.0), ("gamma", 0.4, 1.0),
                           ("loggamma", 0.4, special.polygamma(1, 0.4))):
        _, g = fnad.jvp(lambda v, name=name: getattr(fr, name)(fr.PRNGKey(8), v),
                        (np.full(n, a0, np.float32),), (np.ones(n, np.float32),))
        g = a(g).astype(np.float64)
        assert abs(g.mean() - mean) < 5 * g.std() / np.sqrt(n), (name, a0, g.mean(), mean)


def test_gamma_gradient_under_jit_and_vmap():
    loss = GRADS["beta"][0]
    x = _A[1:3]                                                     # [2] -> a, b [2, 5]

    def g(k, v):
        return fnad.grad(lambda u: loss(fr, k, u[:, None] * np.ones(5, np.float32)))(v)

    def jg(k, v):
        return jax.grad(lambda u: loss(jr, k, u[:, None] * np.ones(5, np.float32)))(v)
    keys, jkeys = fr.split(fr.PRNGKey(2), 2), jr.split(jr.PRNGKey(2), 2)
    want = a(jax.vmap(jg, in_axes=(0, None))(jkeys, x))
    np.testing.assert_allclose(a(fnad.vmap(g, in_axes=(0, None))(keys, x)), want,
                               rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(a(traced(g)(keys[0], x)), want[0], rtol=2e-4, atol=1e-6)
    got = fnad.vmap(fnad.grad(lambda v, k: fr.gamma(k, v)), in_axes=(None, 0))(2.0, keys)
    want = jax.vmap(jax.grad(lambda v, k: jr.gamma(k, v)), in_axes=(None, 0))(2.0, jkeys)
    np.testing.assert_allclose(a(got), a(want), rtol=2e-4)

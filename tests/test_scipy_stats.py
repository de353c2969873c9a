"""fnad.scipy.stats against jax.scipy.stats: every function of every distribution on a grid
of points inside and outside the support, on its boundary and at ±inf/NaN, with parameters
inside and outside their domain (NaN parameters too); float32 and float64 (x64); parameter
broadcasting; per-element gradients in every floating argument (as jax differentiates
them); jit and vmap; mode, rankdata, sem and gaussian_kde; the errors.

The elementwise functions are driven by one table, CASES: for each function, the points x
and a list of parameter tuples; the test evaluates every (x, params) pair at once.
"""
import itertools

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
import fnad.scipy.special as fspecial
import fnad.scipy.stats as fstats
from fnad.config import config as fconfig

try:
    import jax
    import jax.scipy.stats as jstats
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jstats = None

pytestmark = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
nan, inf = np.nan, np.inf
f32 = np.float32

# ---- the table ------------------------------------------------------------------------------
REAL = [-inf, -30, -3, -1, -0.5, 0, 0.25, 0.5, 1, 2, 5, 30, inf, nan]
POS = [-1, 0, 1e-3, 0.3, 1, 1.5, 3, 10, 50, inf, nan]
UNIT = [-0.5, 0, 1e-3, 0.2, 0.5, 0.9, 1, 1.5, nan]
Q = [-0.1, 0, 1e-6, 0.1, 0.5, 0.9, 0.999, 1, 1.1, nan]
K = [-1, 0, 0.5, 1, 2, 3, 7, 10, 40, inf, nan]
CIRC = [-1, 0, 0.5, np.pi, 2 * np.pi, 7, nan]
LOC_SCALE = [(), (0.5, 2.0), (-1.0, 0.5), (0.0, -1.0), (0.0, 0.0), (nan, 1.0), (0.0, nan)]
LOC_SCALE_OK = [(), (0.5, 2.0), (-1.0, 0.5)]


def case(names, xs, params, rtol=1e-5, atol=1e-6):
    return {n: dict(xs=[x for x in xs if x not in XLA_AT_INF.get(n, ())], params=params,
                    rtol=rtol, atol=atol)
            for n in names.split()}


# Where jax's value comes from XLA's exp/atan saturating at ±inf (exp(inf) is the largest
# finite float, atan(-inf) is not -π/2 exactly) rather than from the formula, fnad's is the
# formula's IEEE value; these points are left out of the grid and checked on their own.
XLA_AT_INF = {"cauchy.logcdf": (-inf, inf), "cauchy.logsf": (-inf, inf),
              "gumbel_l.logpdf": (inf,), "gumbel_l.pdf": (inf,), "gumbel_r.logpdf": (-inf,),
              "gumbel_r.pdf": (-inf,)}
IEEE_AT_INF = {"cauchy.logcdf": (-inf, 0), "cauchy.logsf": (0, -inf),
               "gumbel_l.logpdf": (nan,), "gumbel_l.pdf": (nan,), "gumbel_r.logpdf": (nan,),
               "gumbel_r.pdf": (nan,)}


CDFS = "pdf logpdf cdf logcdf sf logsf"
CASES = {
    **case("bernoulli.logpmf bernoulli.pmf", K,
           [(0.3,), (0.0,), (1.0,), (0.7, 1.0), (1.2,), (nan,)]),
    **case("bernoulli.cdf", K, [(0.3,), (0.0,), (1.0,), (1.2,), (nan,)]),
    **case("bernoulli.ppf", Q, [(0.3,), (0.0,), (1.2,), (nan,)]),
    **case("beta.pdf beta.logpdf", UNIT + [2.5],
           [(2.0, 3.0), (0.5, 0.5), (1.0, 1.0), (2.0, 3.0, 1.0, 2.0), (-1.0, 2.0),
            (2.0, 3.0, 0.0, -1.0), (nan, 2.0)]),
    **case("beta.cdf beta.logcdf beta.sf beta.logsf", UNIT + [2.5],
           [(2.0, 3.0), (0.5, 0.5), (1.0, 1.0), (2.0, 3.0, 1.0, 2.0)], rtol=1e-4, atol=1e-5),
    **case("betabinom.logpmf betabinom.pmf", K,
           [(10.0, 2.0, 3.0), (10.0, 0.5, 0.5), (0.0, 1.0, 1.0), (10.0, 2.0, 3.0, 1.0),
            (-1.0, 2.0, 3.0), (10.0, -1.0, 3.0), (10.0, 2.0, 0.0)], rtol=1e-4, atol=1e-6),
    **case("binom.logpmf binom.pmf", K,
           [(10.0, 0.3), (10.0, 0.0), (10.0, 1.0), (0.0, 0.5), (10.0, 0.3, 2.0), (7.5, 0.4)],
           rtol=1e-4),
    **case("cauchy.pdf cauchy.logpdf cauchy.cdf cauchy.sf", REAL, LOC_SCALE),
    # scale = 0 makes z infinite: XLA's atan saturates there too (see XLA_AT_INF)
    **case("cauchy.logcdf cauchy.logsf", REAL, [p for p in LOC_SCALE if p != (0.0, 0.0)]),
    **case("cauchy.ppf cauchy.isf", Q, LOC_SCALE, rtol=1e-4, atol=1e-5),
    **case("chi2.pdf chi2.logpdf", POS, [(1.0,), (2.0,), (5.0,), (3.0, 1.0, 2.0), (-1.0,)],
           rtol=1e-5),
    **case("chi2.cdf chi2.logcdf chi2.sf chi2.logsf", POS,
           [(1.0,), (2.0,), (5.0,), (3.0, 1.0, 2.0), (-1.0,)], rtol=1e-4, atol=1e-6),
    **case("expon.pdf expon.logpdf expon.cdf expon.logcdf expon.sf expon.logsf", POS + [-inf],
           LOC_SCALE),
    **case("expon.ppf", Q, LOC_SCALE),
    **case("gamma.pdf gamma.logpdf", POS, [(1.0,), (0.5,), (3.0,), (2.0, 1.0, 2.0), (-1.0,),
                                           (nan,)]),
    **case("gamma.cdf gamma.logcdf gamma.sf gamma.logsf", POS,
           [(1.0,), (0.5,), (3.0,), (2.0, 1.0, 2.0), (-1.0,)], rtol=1e-4, atol=1e-6),
    **case("gennorm.pdf gennorm.logpdf gennorm.cdf", REAL,
           [(1.0,), (2.0,), (0.5,), (8.0,), (-1.0,), (nan,)], rtol=1e-4),
    **case("geom.logpmf geom.pmf", K, [(0.3,), (1.0,), (0.0,), (0.5, 2.0), (1.5,), (nan,)]),
    **case("gumbel_l." + " gumbel_l.".join(CDFS.split()), REAL, LOC_SCALE),
    **case("gumbel_l.ppf", Q, LOC_SCALE, rtol=1e-4, atol=1e-5),
    **case("gumbel_r." + " gumbel_r.".join(CDFS.split()), REAL, LOC_SCALE),
    **case("gumbel_r.ppf", Q, LOC_SCALE, rtol=1e-4, atol=1e-5),
    **case("laplace.pdf laplace.logpdf laplace.cdf", REAL, LOC_SCALE),
    **case("logistic.pdf logistic.logpdf logistic.cdf logistic.sf", REAL, LOC_SCALE),
    **case("logistic.ppf logistic.isf", Q, LOC_SCALE, rtol=1e-4, atol=1e-5),
    **case("nbinom.logpmf nbinom.pmf", K,
           [(5.0, 0.3), (0.5, 0.5), (5.0, 1.0), (5.0, 0.0), (5.0, 0.3, 2.0), (-1.0, 0.5)],
           rtol=1e-4),
    **case("pareto.pdf pareto.logpdf pareto.cdf pareto.logcdf pareto.sf pareto.logsf",
           POS + [-inf], [(2.0,), (0.5,), (3.0, 1.0, 2.0), (2.0, 0.0, -1.0), (nan,)]),
    **case("pareto.ppf", Q, [(2.0,), (0.5,), (3.0, 1.0, 2.0), (nan,)], rtol=1e-4),
    **case("poisson.logpmf poisson.pmf", K, [(3.0,), (0.0,), (0.5,), (20.0, 2.0), (-1.0,)],
           rtol=1e-4),
    **case("poisson.cdf", K, [(3.0,), (0.5,), (20.0, 2.0)], rtol=1e-4, atol=1e-6),
    **case("t.pdf t.logpdf", REAL, [(1.0,), (3.0,), (30.0, 0.5, 2.0), (0.5,), (-1.0,),
                                    (3.0, 0.0, -1.0), (nan,)], rtol=1e-5),
    **case("truncnorm." + " truncnorm.".join(CDFS.split()), REAL,
           [(-1.0, 2.0), (0.5, 3.0), (-3.0, -1.0), (-inf, 1.0), (1.0, inf), (3.0, 8.0),
            (-10.0, -5.0), (-1.0, 2.0, 1.0, 2.0), (2.0, 1.0), (1.0, 1.0)],
           rtol=1e-4, atol=1e-6),
    **case("uniform.pdf uniform.logpdf uniform.cdf", REAL, LOC_SCALE),
    **case("uniform.ppf", Q, LOC_SCALE),
    **case("vonmises.pdf vonmises.logpdf", CIRC + [30.0],
           [(1.0,), (0.1,), (20.0,), (500.0,), (0.0,), (-1.0,), (nan,)], rtol=1e-4),
    **case("wrapcauchy.pdf wrapcauchy.logpdf", CIRC,
           [(0.5,), (0.01,), (0.99,), (0.0,), (1.0,), (-0.5,), (nan,)], rtol=1e-4),
}
# norm is tested in tests/test_scipy.py; it shares the table's checks here too
CASES.update(case("norm." + " norm.".join(CDFS.split()), REAL, LOC_SCALE))
CASES.update(case("norm.ppf norm.isf", Q, LOC_SCALE, rtol=1e-4, atol=1e-5))

# the functions fnad composes from primitives another change adds (betainc, bessel_i0e)
NEEDS = {"beta.cdf": "betainc", "beta.logcdf": "betainc", "beta.sf": "betainc",
         "beta.logsf": "betainc", "vonmises.pdf": "bessel_i0e",
         "vonmises.logpdf": "bessel_i0e"}


def _has(prim):
    return hasattr(fspecial, prim) if prim == "betainc" else hasattr(fnad.lax, prim)


def needs(name):
    prim = NEEDS.get(name)
    if prim is not None and not _has(prim):
        pytest.skip(f"{name} needs {prim}, not in this fnad (optional piece)")


def fn(lib, name):
    mod, f = name.split(".")
    return getattr(getattr(lib, mod), f)


def grid(spec, dtype):
    """Every x against every parameter tuple: arrays [N] (short tuples pad with nothing:
    each function is called with the tuple's length)."""
    groups = {}
    for params in spec["params"]:
        groups.setdefault(len(params), []).append(params)
    out = []
    for n, plist in groups.items():
        rows = [(x,) + p for x, p in itertools.product(spec["xs"], plist)]
        out.append(tuple(np.array(col, dtype) for col in zip(*rows)) if n else
                   (np.array(spec["xs"], dtype),))
    return out


def close(got, want, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# ---- values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name):
    needs(name)
    spec, f, fj = CASES[name], fn(fstats, name), jax.jit(fn(jstats, name))
    for args in grid(spec, f32):
        close(f(*args), fj(*args), spec["rtol"], spec["atol"])


# float64: every distribution through one of its functions, and the cdfs whose float64
# paths differ (log_ndtr's asymptotic branches, the incomplete gamma/beta); float32 above
# covers every function (the whole table in float64 took minutes of jax compiles).
F64 = sorted({min(n for n in CASES if n.split(".")[0] == d)
              for d in {n.split(".")[0] for n in CASES}} |
             {n for n in CASES if n in ("norm.logcdf", "truncnorm.logsf", "gamma.logcdf",
                                        "chi2.sf", "t.cdf", "beta.cdf", "poisson.cdf",
                                        "binom.logcdf")})


@pytest.mark.parametrize("name", F64)
def test_float64_values_match_jax(name, x64):
    needs(name)
    spec, f, fj = CASES[name], fn(fstats, name), jax.jit(fn(jstats, name))
    for args in grid(spec, np.float64):
        close(f(*args), fj(*args), spec["rtol"] / 10, spec["atol"] / 10)


def test_python_scalars_and_ints_promote_as_jax():
    for name in ["expon.logpdf", "bernoulli.pmf", "poisson.logpmf", "t.logpdf",
                 "gamma.cdf", "pareto.ppf", "uniform.cdf"]:
        f, fj = fn(fstats, name), fn(jstats, name)
        args = (2, 3) if name != "pareto.ppf" else (0.5, 3)
        close(f(*args), fj(*args), 1e-5, 1e-6)
        ints = [np.array([0, 1, 2], np.int32), np.int32(1)]
        close(f(*ints), fj(*ints), 1e-5, 1e-6)


def test_the_points_where_xla_saturates_at_infinity():
    for name, xs in XLA_AT_INF.items():
        close(fn(fstats, name)(np.array(xs, f32)), np.array(IEEE_AT_INF[name], f32), 0, 0)


# ---- gradients --------------------------------------------------------------------------------
# jax 0.10 cannot differentiate these in the argument that reaches xlogy(-1, ·) (its
# xlogy JVP multiplies the integer -1's float0 tangent); fnad can: those derivatives are
# checked against finite differences instead.
JAX_NO_GRAD = {"gumbel_l.logpdf": 2, "gumbel_l.pdf": 2, "gumbel_l.ppf": 0,
               "gumbel_r.logpdf": 2, "gumbel_r.pdf": 2, "gumbel_r.ppf": 0}


# betainc has no derivative in a or b, in jax as in fnad: both raise
NOT_DIFFERENTIABLE = {f"beta.{f}": (1, 2) for f in ["cdf", "logcdf", "sf", "logsf"]}


# Gradients: every distribution's log-density and cdf-side functions (the ones models
# differentiate); the pdf/sf variants share their formulas (values checked above).
GRAD = sorted(n for n in CASES if n.split(".")[1] in ("logpdf", "logpmf", "cdf"))


@pytest.mark.parametrize("name", GRAD)
def test_gradients_match_jax(name):
    """d/d(every argument), element by element, over the whole grid (NaN where jax's is)."""
    needs(name)
    spec, f, fj = CASES[name], fn(fstats, name), fn(jstats, name)
    for args in grid(spec, f32):
        n = len(args)
        no_grad = [i for i in NOT_DIFFERENTIABLE.get(name, ()) if i < n]
        for i in no_grad:
            for lib, g in [(fnad, f), (jax, fj)]:
                with pytest.raises(ValueError, match="gradient with respect to a and b"):
                    lib.grad(g, argnums=i)(*(a[0] for a in args))
        ours = [i for i in range(n) if i not in no_grad]
        got = dict(zip(ours, fnad.vmap(fnad.grad(f, argnums=tuple(ours)))(*args)))
        if JAX_NO_GRAD.get(name, n) < n:
            i = JAX_NO_GRAD[name]
            _check_against_finite_differences(f, args, i, got.pop(i))
        if not got:
            continue
        gj = jax.jit(jax.vmap(jax.grad(fj, argnums=tuple(got))))
        for (i, u), v in zip(got.items(), gj(*args)):
            try:
                close(u, v, max(spec["rtol"], 1e-4) * 10, 1e-4)
            except AssertionError as e:
                raise AssertionError(f"{name} d/d arg {i}: {e}") from None


def _check_against_finite_differences(f, args, i, g):
    """g = d f / d args[i] (float32) against a float64 central difference where finite."""
    with fconfig.override(jax_enable_x64=True):
        a64 = [np.asarray(a, np.float64) for a in args]
        h = 1e-6 * np.maximum(1, np.abs(a64[i]))
        up = [a + h if j == i else a for j, a in enumerate(a64)]
        dn = [a - h if j == i else a for j, a in enumerate(a64)]
        fd = (np.asarray(f(*up)) - np.asarray(f(*dn))) / (2 * h)
    ok = np.isfinite(fd) & np.all([np.isfinite(a) for a in a64], axis=0)
    assert ok.sum() > 3
    np.testing.assert_allclose(np.asarray(g)[ok], fd[ok], rtol=1e-3, atol=1e-4)


# ---- broadcasting, jit, vmap ----------------------------------------------------------------
BROADCAST = {"cauchy.logpdf": 2, "expon.cdf": 2, "gamma.logpdf": 3, "t.logpdf": 3,
             "binom.logpmf": 3, "truncnorm.logcdf": 4, "pareto.ppf": 3, "beta.logpdf": 4,
             "gumbel_r.logsf": 2, "bernoulli.cdf": 1, "poisson.cdf": 2}


@pytest.mark.parametrize("name", sorted(BROADCAST))
def test_parameters_broadcast_as_jax(name):
    """x [4, 1, 1] against parameter arrays [3, 1] and [2]: every function broadcasts."""
    spec, f, fj = CASES[name], fn(fstats, name), fn(jstats, name)
    xs = np.array([v for v in spec["xs"] if np.isfinite(v)][:4], f32).reshape(4, 1, 1)
    ok = [p for p in spec["params"] if len(p) >= BROADCAST[name] - 1 and
          np.all(np.isfinite(p))][:1] or [spec["params"][0]]
    p = np.asarray(ok[0][:BROADCAST[name]], f32)
    params = [p[0] * np.array([1.0, 1.5, 2.0], f32).reshape(3, 1)] + [
        v * np.array([1.0, 0.5], f32) for v in p[1:]]
    got, want = f(xs, *params), jax.jit(fj)(xs, *params)
    assert got.shape == (4, 3, 2) if len(params) > 1 else (4, 3, 1)
    close(got, want, spec["rtol"], spec["atol"])


# (a sample of the kinds; jit on the test backend, `traced`: the numba backend's code for each
# primitive they use is tested in tests/test_jit_backends.py)
JIT_VMAP = ["beta.logpdf", "binom.pmf", "gamma.logcdf", "poisson.logpmf", "truncnorm.sf",
            "vonmises.logpdf"]


@pytest.mark.parametrize("name", JIT_VMAP)
def test_under_jit_and_vmap(name):
    """jit of the function, vmap over x with the parameters fixed, and vmap over one
    parameter with x fixed, on the in-domain part of the grid."""
    needs(name)
    spec, f, fj = CASES[name], fn(fstats, name), fn(jstats, name)
    params = np.asarray(spec["params"][0], f32)
    xs = np.array([v for v in spec["xs"] if np.isfinite(v)], f32)
    tol = spec["rtol"], spec["atol"]
    close(traced(f)(xs, *params), jax.jit(fj)(xs, *params), *tol)
    close(fnad.vmap(f, in_axes=(0,) + (None,) * len(params))(xs, *params),
          jax.vmap(fj, in_axes=(0,) + (None,) * len(params))(xs, *params), *tol)
    if len(params):
        ps = params[0] * np.array([0.5, 1.0, 2.0], f32)
        axes = (None, 0) + (None,) * (len(params) - 1)
        close(traced(fnad.vmap(f, in_axes=axes))(xs, ps, *params[1:]),
              jax.vmap(fj, in_axes=axes)(xs, ps, *params[1:]), *tol)


# ---- the multivariate distributions ---------------------------------------------------------
RNG = np.random.default_rng(0)


def _spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n)).astype(f32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=f32)


@pytest.mark.parametrize("form", ["scalar", "vector_scalar_cov", "matrix", "batched"])
def test_multivariate_normal_matches_jax_with_gradients(form):
    n = 3
    if form == "scalar":
        x, mean, cov = RNG.standard_normal(5).astype(f32), f32(0.5), f32(2.0)
    elif form == "vector_scalar_cov":
        x, mean, cov = RNG.standard_normal((5, n)).astype(f32), np.ones(n, f32), f32(1.5)
    elif form == "matrix":
        x, mean, cov = RNG.standard_normal((5, n)).astype(f32), np.ones(n, f32), _spd(n)
    else:
        x, mean, cov = (RNG.standard_normal((4, 2, n)).astype(f32),
                        RNG.standard_normal((2, n)).astype(f32), _spd(n, (2,)))
    f, fj = fstats.multivariate_normal, jstats.multivariate_normal
    close(f.logpdf(x, mean, cov), fj.logpdf(x, mean, cov), 1e-5, 1e-5)
    close(f.pdf(x, mean, cov), fj.pdf(x, mean, cov), 1e-5, 1e-7)
    g = fnad.grad(lambda *a: fnp.sum(f.logpdf(*a)), argnums=(0, 1, 2))(x, mean, cov)
    gj = jax.grad(lambda *a: fj.logpdf(*a).sum(), argnums=(0, 1, 2))(x, mean, cov)
    for u, v in zip(g, gj):
        close(u, v, 1e-4, 1e-5)
    if form == "matrix":
        close(fnad.vmap(f.logpdf, in_axes=(0, None, None))(x, mean, cov),
              jax.vmap(fj.logpdf, in_axes=(0, None, None))(x, mean, cov), 1e-5, 1e-5)
        close(traced(f.logpdf)(x, mean, cov), fj.logpdf(x, mean, cov), 1e-5, 1e-5)


def test_multivariate_normal_float64(x64):
    x, mean, cov = RNG.standard_normal((5, 3)), np.ones(3), _spd(3).astype(np.float64)
    close(fstats.multivariate_normal.logpdf(x, mean, cov),
          jstats.multivariate_normal.logpdf(x, mean, cov), 1e-12, 1e-12)


def test_dirichlet_matches_jax_with_gradients():
    alpha = np.array([0.5, 2.0, 3.0], f32)
    x = RNG.dirichlet(alpha, 6).T.astype(f32)                              # [3, 6]
    x[:, 1] = [0.0, 0.5, 0.5]                                              # on the boundary
    x[:, 2] = [0.5, 0.6, -0.1]                                             # off the simplex
    x = x / np.where(np.arange(6) == 2, 1, x.sum(0))
    f, fj = fstats.dirichlet, jstats.dirichlet
    for args in [(x, alpha), (x[:2], alpha), (x[:, 0], alpha), (x[:2, 3], alpha)]:
        close(f.logpdf(*args), fj.logpdf(*args), 1e-5, 1e-5)
        close(f.pdf(*args), fj.pdf(*args), 1e-5, 1e-6)
    ok = x[:, 3:]
    g = fnad.grad(lambda *a: fnp.sum(f.logpdf(*a)), argnums=(0, 1))(ok, alpha)
    gj = jax.grad(lambda *a: fj.logpdf(*a).sum(), argnums=(0, 1))(ok, alpha)
    for u, v in zip(g, gj):
        close(u, v, 1e-4, 1e-5)
    close(fnad.vmap(f.logpdf, in_axes=(1, None))(ok, alpha),
          jax.vmap(fj.logpdf, in_axes=(1, None))(ok, alpha), 1e-5, 1e-5)


def test_multinomial_matches_jax_with_gradients():
    p = np.array([0.2, 0.3, 0.5], f32)
    xs = np.array([[2, 3, 5], [0, 0, 10], [1, 1, 1], [10, 0, 0]], np.int32)
    f, fj = fstats.multinomial, jstats.multinomial
    for x in xs:
        close(f.logpmf(x, 10, p), fj.logpmf(x, 10, p), 1e-5, 1e-5)
        close(f.pmf(x, 10, p), fj.pmf(x, 10, p), 1e-5, 1e-7)
    close(f.logpmf(xs[0], 10, np.array([0.0, 0.5, 0.5], f32)),
          fj.logpmf(xs[0], 10, np.array([0.0, 0.5, 0.5], f32)), 1e-5, 1e-5)
    close(fnad.grad(lambda p: f.logpmf(xs[0], 10, p))(p),
          jax.grad(lambda p: fj.logpmf(xs[0], 10, p))(p), 1e-5, 1e-5)
    close(fnad.vmap(f.logpmf, in_axes=(0, None, None))(xs[:1], 10, p),
          jax.vmap(fj.logpmf, in_axes=(0, None, None))(xs[:1], 10, p), 1e-5, 1e-5)


# ---- poisson.entropy --------------------------------------------------------------------------
def test_poisson_entropy_matches_jax():
    mu = np.array([0.0, 1e-3, 0.5, 3.0, 9.9, 10.0, 50.0, 99.0, 100.0, 1e4], f32)
    close(fstats.poisson.entropy(mu), jstats.poisson.entropy(mu), 1e-5, 1e-6)
    loc = np.zeros((2, 1), f32)
    close(fstats.poisson.entropy(mu, loc), jstats.poisson.entropy(mu, loc), 1e-5, 1e-6)
    m = mu[1:]
    g = np.asarray(fnad.vmap(fnad.grad(fstats.poisson.entropy))(m))
    gj = np.asarray(jax.jit(jax.vmap(jax.grad(jstats.poisson.entropy)))(m))
    # jax's is NaN at mu = 99 and 100: a masked-out branch's infinite partial (entr' at a
    # pmf that XLA flushed to 0) meets the zero cotangent where selects; fnad's is finite
    ok = np.isfinite(gj)
    assert not ok[(m == 99) | (m == 100)].any()
    close(g[ok], gj[ok], 1e-4, 1e-5)
    assert np.isfinite(g[(m >= 0.5) & (m <= 100)]).all()
    big = m[(m == 99) | (m == 100)]                     # d/dmu (log(2πe mu)/2 - 1/(12 mu))
    np.testing.assert_allclose(g[(m == 99) | (m == 100)], 0.5 / big + 1 / (12 * big ** 2),
                               rtol=1e-3)


# ---- mode, rankdata, sem ----------------------------------------------------------------------
MODE_DATA = [np.array([1, 2, 2, 3, 3, 0], np.int32),
             np.array([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0], [3.0, nan, nan], [nan, 1, 1]], f32),
             RNG.integers(0, 4, (3, 5, 4)).astype(f32)]


@pytest.mark.parametrize("i", range(len(MODE_DATA)))
@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_mode_matches_jax(i, axis, keepdims):
    a = MODE_DATA[i]
    if axis == 1 and a.ndim < 2:
        axis = 0
    got, want = fstats.mode(a, axis, keepdims=keepdims), jstats.mode(a, axis,
                                                                     keepdims=keepdims)
    close(got.mode, want.mode, 0, 0)
    close(got.count, want.count, 0, 0)


def test_mode_of_an_empty_axis_and_scalar():
    for a, axis in [(np.zeros((0, 3), f32), 0), (f32(2.5), 0), (np.zeros((2, 0), f32), 1)]:
        got, want = fstats.mode(a, axis), jstats.mode(a, axis)
        close(got.mode, want.mode, 0, 0)
        close(got.count, want.count, 0, 0)


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata_matches_jax(method):
    a = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0], f32)
    close(fstats.rankdata(a, method), jstats.rankdata(a, method), 0, 0)
    close(fstats.rankdata(a.astype(np.int32), method),
          jstats.rankdata(a.astype(np.int32), method), 0, 0)
    b = a.reshape(2, 5)
    for axis in [None, 0, 1]:
        close(fstats.rankdata(b, method, axis=axis), jstats.rankdata(b, method, axis=axis),
              0, 0)
    a[3] = nan
    close(fstats.rankdata(a, method), jstats.rankdata(a, method), 0, 0)
    close(traced(lambda a: fstats.rankdata(a, method))(b),
          jstats.rankdata(b, method), 0, 0)


def test_sem_matches_jax_with_gradients():
    a = RNG.standard_normal((4, 5)).astype(f32)
    for kw in [{}, dict(axis=1), dict(axis=None), dict(ddof=0), dict(keepdims=True),
               dict(axis=1, keepdims=True)]:
        close(fstats.sem(a, **kw), jstats.sem(a, **kw), 1e-5, 1e-6)
    b = a.copy()
    b[1, 2] = nan
    close(fstats.sem(b), jstats.sem(b), 1e-5, 1e-6)
    close(fstats.sem(b, nan_policy="omit"), jstats.sem(b, nan_policy="omit"), 1e-5, 1e-6)
    close(fstats.sem(np.arange(6, dtype=np.int32)), jstats.sem(np.arange(6, dtype=np.int32)),
          1e-5, 1e-6)
    close(fnad.grad(lambda a: fnp.sum(fstats.sem(a)))(a),
          jax.grad(lambda a: jstats.sem(a).sum())(a), 1e-5, 1e-6)


# ---- gaussian_kde -----------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("bw", [None, "silverman", 0.3])
@pytest.mark.parametrize("weighted", [False, True])
def test_gaussian_kde_matches_jax(d, bw, weighted):
    data = RNG.standard_normal((d, 20)).astype(f32)
    w = RNG.uniform(0.5, 2.0, 20).astype(f32) if weighted else None
    k, kj = fstats.gaussian_kde(data, bw, w), jstats.gaussian_kde(data, bw, w)
    for attr in ["neff", "dataset", "weights", "covariance", "inv_cov"]:
        close(getattr(k, attr), getattr(kj, attr), 1e-5, 1e-6)
    pts = RNG.standard_normal((d, 7)).astype(f32)
    for m in ["evaluate", "pdf", "logpdf", "__call__"]:
        close(getattr(k, m)(pts), getattr(kj, m)(pts), 1e-4, 1e-6)
    mean, cov = np.full(d, 0.3, f32), 0.5 * np.eye(d, dtype=f32)
    close(k.integrate_gaussian(mean, cov), kj.integrate_gaussian(mean, cov), 1e-5, 1e-6)
    other = RNG.standard_normal((d, 9)).astype(f32)
    close(k.integrate_kde(fstats.gaussian_kde(other)),
          kj.integrate_kde(jstats.gaussian_kde(other)), 1e-5, 1e-6)
    if d == 1:
        close(k.integrate_box_1d(-0.5, 1.0), kj.integrate_box_1d(-0.5, 1.0), 1e-5, 1e-6)
        close(k.pdf(0.25), kj.pdf(0.25), 1e-5, 1e-6)


def test_gaussian_kde_is_a_pytree_and_differentiable():
    data = RNG.standard_normal((2, 15)).astype(f32)
    pts = RNG.standard_normal((2, 4)).astype(f32)
    k = fstats.gaussian_kde(data)
    leaves, tree = fnad.tree_util.tree_flatten(k)
    assert len(leaves) == 5
    close(traced(lambda k, p: k.logpdf(p))(k, pts), k.logpdf(pts), 1e-5, 1e-6)
    g = fnad.grad(lambda data: fnp.sum(fstats.gaussian_kde(data).logpdf(pts)))(data)
    gj = jax.grad(lambda data: jstats.gaussian_kde(data).logpdf(pts).sum())(data)
    close(g, gj, 1e-3, 1e-4)
    s = k.resample(fnad.random.key(0), (1000,))
    assert s.shape == (2, 1000) and s.dtype == np.float32
    np.testing.assert_allclose(np.cov(np.asarray(s)), np.asarray(k.covariance)
                               + np.cov(data, bias=True), rtol=0.3, atol=0.1)
    with pytest.raises(AttributeError, match="immutable"):
        k.neff = 1.0


# ---- errors -----------------------------------------------------------------------------------
def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="`alpha` must be one-dimensional"):
        fstats.dirichlet.logpdf(np.ones(3) / 3, np.ones((3, 1)))
    with pytest.raises(ValueError, match="one entry fewer"):
        fstats.dirichlet.logpdf(np.ones(5) / 5, np.ones(3))
    with pytest.raises(ValueError, match="must be of integer type"):
        fstats.multinomial.logpmf(np.array([1.0, 2.0]), 3, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="incompatible shapes"):
        fstats.multivariate_normal.logpdf(np.ones(3), np.ones(3), np.eye(2))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        fstats.multivariate_normal.logpdf(np.ones(3), np.ones(3), np.eye(3), True)
    with pytest.raises(ValueError, match="Illegal nan_policy value 'bad'"):
        fstats.mode(np.ones(3), nan_policy="bad")
    with pytest.raises(NotImplementedError, match="nans exist in `x` outside"):
        fstats.rankdata(np.ones(3), nan_policy="raise")
    with pytest.raises(NotImplementedError, match="`nan_policy` of omit"):
        fstats.mode(np.ones(3), nan_policy="omit")
    with pytest.raises(ValueError, match="unknown method 'median'"):
        fstats.rankdata(np.ones(3), "median")
    with pytest.raises(ValueError, match="bad is not supported"):
        fstats.sem(np.ones(3), nan_policy="bad")
    with pytest.raises(ValueError, match="should have multiple elements"):
        fstats.gaussian_kde(np.ones(1))
    with pytest.raises(ValueError, match="should be of length n"):
        fstats.gaussian_kde(np.arange(4.0), weights=np.ones(3))
    with pytest.raises(ValueError, match="`bw_method` should be"):
        fstats.gaussian_kde(np.arange(4.0), bw_method="wide")
    k = fstats.gaussian_kde(RNG.standard_normal((2, 5)))
    with pytest.raises(ValueError, match="points have dimension 3, dataset has dimension 2"):
        k.evaluate(np.ones((3, 4)))
    with pytest.raises(ValueError, match="only handles 1D pdfs"):
        k.integrate_box_1d(0.0, 1.0)
    with pytest.raises(NotImplementedError, match="integrate_box_1d"):
        k.integrate_box(0.0, 1.0)
    with pytest.raises(TypeError, match="poisson.entropy"):
        fstats.poisson.entropy([1.0, 2.0])


def test_every_jax_distribution_and_function_is_here():
    import jax.scipy.stats as js
    for mod in [m for m in dir(js) if not m.startswith("_")]:
        assert hasattr(fstats, mod), mod
        jmod = getattr(js, mod)
        if isinstance(jmod, type(js)):
            public = [n for n in dir(jmod) if not n.startswith("_")]
            missing = [n for n in public if not hasattr(getattr(fstats, mod), n)]
            assert not missing, (mod, missing)

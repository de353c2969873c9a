"""fnad.random: the statistics of every sampler against its distribution (scipy.stats).

How strict, and why these tests never flake: each check would fail for a correct sampler
with probability at most ~2e-9 —
  * a sample mean or variance within 6 standard errors of the exact value (CLT; the
    two-sided normal tail beyond 6 SE is 2.0e-9), a count within 6 binomial SE;
  * a chi-square (expected counts >= 5 per cell) or Kolmogorov-Smirnov p-value above
    P_MIN = 2e-9.
No test makes more than 40 checks, so a correct sampler fails a test with probability
< 1e-7 (under the 1e-6 we aim for). Keys are fixed (derived from the test's name), so the
draws, and the outcome, are the same on every run: a failure means a sampler changed.
Power: with N = 2e5 draws a 6-SE band on a mean is ±0.013 σ, so a location or scale
error of 2% (or a bernoulli p off by 1% near 0.9) fails.
"""
from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest
from scipy import stats

import fnad
import fnad.numpy as fnp
import fnad.random as fr

N = 200_000                   # draws per continuous check: SE of a mean is 0.0022 σ
P_MIN = 2e-9                  # p-value threshold of the chi-square and KS checks
Z = 6.0                       # standard errors allowed for a mean / variance / count


def key(*names):
    """A fixed key per test (and per case), different for different names."""
    return fr.PRNGKey(zlib.crc32("/".join(map(str, names)).encode()) % 2 ** 31)


def a64(x):
    return np.asarray(x).astype(np.float64)


@pytest.fixture(params=["float32", "float64"])
def fdtype(request):
    """float32, and float64 with x64 on (fnad and jax) for the test."""
    if request.param == "float64":
        request.getfixturevalue("x64")
    return np.dtype(request.param)


# ---- checks ------------------------------------------------------------------------------
def assert_mean(x, mean, std, what=""):
    """The sample mean within Z standard errors std/sqrt(n) of `mean`."""
    x = a64(x).ravel()
    se = std / math.sqrt(x.size)
    assert abs(x.mean() - mean) <= Z * se, \
        f"{what}: mean {x.mean():.6g}, expected {mean:.6g} ± {Z * se:.3g}"


def assert_var(x, var, mu4, what=""):
    """The sample variance within Z SE of `var`: Var(s²) ≈ (μ4 - σ⁴)/n (μ4 the 4th
    central moment)."""
    x = a64(x).ravel()
    se = math.sqrt((mu4 - var ** 2) / x.size)
    assert abs(x.var() - var) <= Z * se, \
        f"{what}: variance {x.var():.6g}, expected {var:.6g} ± {Z * se:.3g}"


def assert_ks(x, cdf, what=""):
    """Kolmogorov-Smirnov test of the draws against the continuous `cdf`."""
    res = stats.kstest(a64(x).ravel(), cdf)
    assert res.pvalue > P_MIN, f"{what}: KS statistic {res.statistic:.4g}, p = {res.pvalue:.3g}"


def assert_chi2(counts, probs, what=""):
    """Pearson's chi-square test of `counts` (one per category) against `probs`."""
    counts, probs = np.asarray(counts, np.float64).ravel(), np.asarray(probs, np.float64).ravel()
    assert counts.shape == probs.shape, what
    n = counts.sum()
    expected = n * probs / probs.sum()
    assert expected.min() >= 5, f"{what}: too few draws per cell for a chi-square test"
    stat = float(((counts - expected) ** 2 / expected).sum())
    p = stats.chi2.sf(stat, counts.size - 1)
    assert p > P_MIN, f"{what}: chi2 = {stat:.1f} with {counts.size - 1} dof, p = {p:.3g}"


def assert_count(k, n, p, what=""):
    """k successes in n trials within Z binomial standard errors of n·p."""
    se = math.sqrt(n * p * (1 - p))
    assert abs(k - n * p) <= Z * se, f"{what}: {k} of {n}, expected {n * p:.1f} ± {Z * se:.1f}"


# ---- uniform -----------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-3.0, 5.0), (2.0, 2.5)])
def test_uniform(fdtype, lo, hi):
    u = np.asarray(fr.uniform(key("uniform", lo, hi), (N,), fdtype, minval=lo, maxval=hi))
    assert u.dtype == fdtype and u.shape == (N,)
    assert u.min() >= lo and u.max() < hi
    w = hi - lo
    assert_ks(u, stats.uniform(lo, w).cdf, "uniform")
    assert_mean(u, (lo + hi) / 2, w / math.sqrt(12), "uniform")
    assert_var(u, w ** 2 / 12, w ** 4 / 80, "uniform")


def test_uniform_top_bits_are_uniform(fdtype):
    # [0, 1): u·1024 is an exact integer bin (the top 10 of the nmant random bits)
    u = np.asarray(fr.uniform(key("uniform-bins"), (N,), fdtype))
    assert_chi2(np.bincount((u * 1024).astype(np.int64), minlength=1024), np.ones(1024),
                "uniform top 10 bits")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_uniform_low_precision_is_uniform_on_its_grid(dtype):
    # u = m·2^-nmant, m uniform on [0, 2^nmant): a chi-square over every grid point
    dt = getattr(fnp, dtype)
    u = np.asarray(fr.uniform(key("uniform", dtype), (N,), dt))
    assert u.dtype == np.dtype(dt)
    nmant = int(fnp.finfo(dt).nmant)
    m = a64(u) * 2 ** nmant
    assert np.array_equal(m, np.floor(m)) and m.min() >= 0 and m.max() < 2 ** nmant
    assert_chi2(np.bincount(m.astype(np.int64), minlength=2 ** nmant), np.ones(2 ** nmant),
                f"uniform {dtype} grid")


def test_uniform_array_bounds(fdtype):
    lo = np.array([-1.0, 0.0, 2.0], fdtype)
    hi = np.array([0.0, 10.0, 2.5], fdtype)
    u = np.asarray(fr.uniform(key("uniform-array"), (N // 2, 3), fdtype, lo, hi))
    assert u.shape == (N // 2, 3) and u.dtype == fdtype
    for j in range(3):
        col, w = u[:, j], float(hi[j] - lo[j])
        assert col.min() >= lo[j] and col.max() < hi[j]
        assert_ks(col, stats.uniform(float(lo[j]), w).cdf, f"uniform column {j}")
        assert_mean(col, float(lo[j] + hi[j]) / 2, w / math.sqrt(12), f"uniform column {j}")


# ---- normal, exponential, gumbel -----------------------------------------------------------
def test_normal(fdtype):
    z = np.asarray(fr.normal(key("normal"), (N,), fdtype))
    assert z.dtype == fdtype and np.all(np.isfinite(z))
    assert_ks(z, stats.norm.cdf, "normal")
    assert_mean(z, 0.0, 1.0, "normal")
    assert_var(z, 1.0, 3.0, "normal")
    assert_mean(a64(z) ** 3, 0.0, math.sqrt(15.0), "normal skewness E z³")   # E z⁶ = 15
    # the tails, which KS hardly sees: P(|z| > 3)
    assert_count(int(np.sum(np.abs(z) > 3)), N, 2 * stats.norm.sf(3), "normal |z| > 3")


def test_normal_shapes_are_independent_draws(fdtype):
    # a [N/2, 2] draw: the two columns uncorrelated (correlation within 6 SE = 6/sqrt(n))
    z = a64(fr.normal(key("normal-2d"), (N // 2, 2), fdtype))
    assert_mean(z[:, 0] * z[:, 1], 0.0, 1.0, "normal E[z0 z1]")
    assert_ks(z[:, 1], stats.norm.cdf, "normal column 1")


def test_exponential(fdtype):
    e = np.asarray(fr.exponential(key("exponential"), (N,), fdtype))
    assert e.dtype == fdtype and e.min() >= 0 and np.all(np.isfinite(e))
    assert_ks(e, stats.expon.cdf, "exponential")
    assert_mean(e, 1.0, 1.0, "exponential")
    assert_var(e, 1.0, 9.0, "exponential")                     # μ4 = 9 for Exp(1)


def test_gumbel(fdtype):
    g = np.asarray(fr.gumbel(key("gumbel"), (N,), fdtype))
    assert g.dtype == fdtype and np.all(np.isfinite(g))
    var = math.pi ** 2 / 6
    assert_ks(g, stats.gumbel_r.cdf, "gumbel")
    assert_mean(g, np.euler_gamma, math.sqrt(var), "gumbel")
    assert_var(g, var, 5.4 * var ** 2, "gumbel")               # excess kurtosis 12/5


# ---- bernoulli ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_bernoulli(fdtype, p):
    b = np.asarray(fr.bernoulli(key("bernoulli", p), np.asarray(p, fdtype), (N,)))
    assert b.dtype == np.bool_ and b.shape == (N,)
    if p in (0.0, 1.0):
        assert b.all() == (p == 1.0) and b.any() == (p == 1.0)
    else:
        assert_count(int(b.sum()), N, p, f"bernoulli p={p}")


def test_bernoulli_array_p(fdtype):
    p = np.array([0.01, 0.3, 0.5, 0.97], fdtype)
    b = np.asarray(fr.bernoulli(key("bernoulli-array"), p, (N // 4, 4)))
    assert b.shape == (N // 4, 4)
    for j in range(4):
        assert_count(int(b[:, j].sum()), N // 4, float(p[j]), f"bernoulli column {j}")
    # p's own shape when no shape is given: one draw per entry
    assert np.asarray(fr.bernoulli(key("bernoulli-p-shape"), p)).shape == (4,)


# ---- randint -----------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi,dtype", [
    (0, 10, "int32"), (-3, 7, "int32"), (-1000, 1000, "int32"), (0, 2, "int32"),
    (0, 256, "uint8"), (-5, 5, "int8"), (-300, 300, "int16"), (7, 1030, "uint32")])
def test_randint_range_and_uniformity(lo, hi, dtype):
    n = 1_000_000 if hi - lo > 500 else N
    r = np.asarray(fr.randint(key("randint", lo, hi, dtype), (n,), lo, hi, dtype))
    assert r.dtype == np.dtype(dtype) and r.shape == (n,)
    r = r.astype(np.int64)
    assert r.min() == lo and r.max() == hi - 1                   # the whole range, no more
    span = hi - lo
    assert_chi2(np.bincount(r - lo, minlength=span), np.ones(span), f"randint [{lo}, {hi})")
    assert_mean(r, (lo + hi - 1) / 2, math.sqrt((span ** 2 - 1) / 12), f"randint [{lo}, {hi})")


def test_randint_large_span():
    # span 2**31 - 1 (not a power of 2): 64 bins of the offset, exact bin probabilities
    lo, hi = -2 ** 30, 2 ** 31 - 1 - 2 ** 30
    r = np.asarray(fr.randint(key("randint-large"), (N,), lo, hi)).astype(np.int64) - lo
    span = hi - lo
    edges = np.arange(65) * span // 64
    counts = np.histogram(r, bins=edges)[0]
    assert counts.sum() == N
    assert_chi2(counts, np.diff(edges), "randint large span")


def test_randint_int64_span_beyond_32_bits(x64):
    lo, hi = -2 ** 40, 2 ** 40
    r = np.asarray(fr.randint(key("randint-64"), (N,), lo, hi, np.int64))
    assert r.dtype == np.int64 and r.min() >= lo and r.max() < hi
    counts = np.bincount((r - lo) >> 35, minlength=64)             # 64 equal bins
    assert_chi2(counts, np.ones(64), "randint int64 top bits")
    low = np.bincount((r - lo) & 63, minlength=64)                 # and the low bits
    assert_chi2(low, np.ones(64), "randint int64 low bits")


def test_randint_array_bounds():
    lo = np.array([0, 10, -5], np.int32)
    hi = np.array([2, 13, 5], np.int32)
    r = np.asarray(fr.randint(key("randint-array"), (N // 2, 3), lo, hi))
    for j in range(3):
        col = r[:, j] - lo[j]
        span = int(hi[j] - lo[j])
        assert col.min() == 0 and col.max() == span - 1
        assert_chi2(np.bincount(col, minlength=span), np.ones(span), f"randint column {j}")
    # an empty range (traced or array bounds) gives minval, as jax
    same = np.asarray(fr.randint(key("randint-empty"), (5,), np.array(3), np.array(3)))
    assert np.all(same == 3)


# ---- truncated_normal ----------------------------------------------------------------------
@pytest.mark.parametrize("lower,upper", [(-0.5, 1.5), (1.0, 3.0), (-2.0, -1.5),
                                         (-np.inf, 0.5), (-1.0, np.inf)])
def test_truncated_normal(fdtype, lower, upper):
    t = np.asarray(fr.truncated_normal(key("truncnorm", lower, upper), lower, upper, (N,),
                                       fdtype))
    assert t.dtype == fdtype and np.all(np.isfinite(t))
    assert t.min() > lower and t.max() < upper                   # the open interval
    ref = stats.truncnorm(lower, upper)
    mean, var = float(ref.mean()), float(ref.var())
    mu4 = float(ref.expect(lambda x: (x - mean) ** 4))
    assert_ks(t, ref.cdf, f"truncated_normal({lower}, {upper})")
    assert_mean(t, mean, math.sqrt(var), f"truncated_normal({lower}, {upper})")
    assert_var(t, var, mu4, f"truncated_normal({lower}, {upper})")


def test_truncated_normal_array_bounds(fdtype):
    lower = np.array([-1.0, 0.0], fdtype)
    upper = np.array([1.0, 2.0], fdtype)
    t = np.asarray(fr.truncated_normal(key("truncnorm-array"), lower, upper, (N // 2, 2),
                                       fdtype))
    for j in range(2):
        assert t[:, j].min() > lower[j] and t[:, j].max() < upper[j]
        assert_ks(t[:, j], stats.truncnorm(float(lower[j]), float(upper[j])).cdf,
                  f"truncated_normal column {j}")
    # without `shape`: the broadcast shape of the bounds
    assert np.asarray(fr.truncated_normal(key("tn-shape"), np.zeros(3), 1.0)).shape == (3,)


# ---- categorical ---------------------------------------------------------------------------
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_categorical_frequencies(fdtype):
    logits = np.array([0.3, -1.2, 2.0, 0.0, -0.5, 1.1], fdtype)
    c = np.asarray(fr.categorical(key("categorical"), logits, shape=(N,)))
    assert c.shape == (N,) and np.issubdtype(c.dtype, np.integer)
    assert_chi2(np.bincount(c, minlength=6), softmax(a64(logits)), "categorical")


def test_categorical_batched_logits_and_axis(fdtype):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 4)).astype(fdtype)          # 3 distributions over 4
    c = np.asarray(fr.categorical(key("categorical-batch"), logits, shape=(N // 2, 3)))
    assert c.shape == (N // 2, 3)
    for i in range(3):
        assert_chi2(np.bincount(c[:, i], minlength=4), softmax(a64(logits[i])),
                    f"categorical row {i}")
    # axis=0: the categories run down the columns of logits.T
    c0 = np.asarray(fr.categorical(key("categorical-axis0"), logits.T, axis=0,
                                   shape=(N // 2, 3)))
    for i in range(3):
        assert_chi2(np.bincount(c0[:, i], minlength=4), softmax(a64(logits[i])),
                    f"categorical axis=0 column {i}")


def test_categorical_never_picks_minus_inf():
    logits = np.array([0.0, -np.inf, 1.0, -np.inf], np.float32)
    c = np.asarray(fr.categorical(key("categorical-inf"), logits, shape=(N,)))
    assert set(np.unique(c).tolist()) == {0, 2}
    assert_count(int(np.sum(c == 2)), N, float(softmax(np.array([0.0, 1.0]))[1]),
                 "categorical with -inf logits")


# ---- permutation ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 10, 1000, 5000])
def test_permutation_is_a_permutation(n):
    p = np.asarray(fr.permutation(key("perm", n), n))
    assert p.shape == (n,) and np.array_equal(np.sort(p), np.arange(n))


def test_permutation_all_orders_equally_likely():
    # 4! = 24 orders over 48000 keys (vmap): 2000 expected each
    m = 48_000
    perms = np.asarray(fnad.vmap(lambda k: fr.permutation(k, 4))(fr.split(key("perm24"), m)))
    assert perms.shape == (m, 4)
    assert np.all(np.sort(perms, axis=1) == np.arange(4))
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    codes = np.array([index[tuple(row)] for row in perms.tolist()])
    assert_chi2(np.bincount(codes, minlength=24), np.ones(24), "permutation orders of 4")


def test_permutation_positions_are_uniform():
    # value v lands at position i with probability 1/n, for every (i, v)
    n, m = 10, 20_000
    perms = np.asarray(fnad.vmap(lambda k: fr.permutation(k, n))(fr.split(key("perm-pos"), m)))
    for i in range(n):
        assert_chi2(np.bincount(perms[:, i], minlength=n), np.ones(n), f"position {i}")
    # and the same for a large permutation, over one draw: where value v goes is uniform
    big = np.asarray(fr.permutation(key("perm-big"), 100_000))
    assert_chi2(np.bincount(big[:50_000] // 1000, minlength=100), np.ones(100),
                "first half of a permutation of 1e5")


def test_permutation_of_an_array_keeps_rows(fdtype):
    x = np.arange(30, dtype=fdtype).reshape(6, 5)
    p0 = np.asarray(fr.permutation(key("perm-x"), x, axis=0))
    assert p0.dtype == fdtype
    order = (p0[:, 0] // 5).astype(int)                          # which row went where
    assert np.array_equal(np.sort(order), np.arange(6)) and np.array_equal(p0, x[order])
    p1 = np.asarray(fr.permutation(key("perm-x"), x, axis=1))
    cols = p1[0].astype(int)
    assert np.array_equal(np.sort(cols), np.arange(5)) and np.array_equal(p1, x[:, cols])
    v = np.asarray(fr.permutation(key("perm-1d"), np.linspace(0, 1, 50).astype(fdtype)))
    assert np.array_equal(np.sort(v), np.linspace(0, 1, 50).astype(fdtype))


# ---- choice --------------------------------------------------------------------------------
def test_choice_with_replacement_uniform():
    c = np.asarray(fr.choice(key("choice"), 7, (N,)))
    assert c.min() == 0 and c.max() == 6
    assert_chi2(np.bincount(c, minlength=7), np.ones(7), "choice uniform")


def test_choice_with_replacement_and_p(fdtype):
    p = np.array([0.05, 0.4, 0.25, 0.0, 0.3], fdtype)
    c = np.asarray(fr.choice(key("choice-p"), 5, (N,), p=p))
    counts = np.bincount(c, minlength=5)
    assert counts[3] == 0                                        # p = 0: never
    assert_chi2(np.delete(counts, 3), np.delete(a64(p), 3), "choice with p")


def test_choice_from_an_array_along_an_axis():
    arr = np.arange(15, dtype=np.float32).reshape(3, 5)
    c = np.asarray(fr.choice(key("choice-arr"), arr, (N // 2,), axis=1))
    assert c.shape == (3, N // 2)
    cols = (c[0]).astype(int)
    assert np.array_equal(c, arr[:, cols])                       # whole columns of arr
    assert_chi2(np.bincount(cols, minlength=5), np.ones(5), "choice of columns")


def test_choice_without_replacement_uniform():
    m, n, k = 30_000, 5, 3
    c = np.asarray(fnad.vmap(lambda kk: fr.choice(kk, n, (k,), replace=False))(
        fr.split(key("choice-norep"), m)))
    assert c.shape == (m, k)
    assert np.all(np.sort(c, axis=1)[:, 1:] != np.sort(c, axis=1)[:, :-1])   # distinct
    assert_chi2(np.bincount(c[:, 0], minlength=n), np.ones(n), "first draw")
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(n), k))}
    codes = np.array([subsets[tuple(sorted(row))] for row in c.tolist()])
    assert_chi2(np.bincount(codes, minlength=len(subsets)), np.ones(len(subsets)),
                "3-subsets of 5")
    # a sample as large as the population is a permutation
    full = np.asarray(fr.choice(key("choice-full"), 6, (2, 3), replace=False))
    assert full.shape == (2, 3) and np.array_equal(np.sort(full.ravel()), np.arange(6))


def test_choice_without_replacement_and_p(fdtype):
    # sequential sampling without replacement: P(first = i) = p_i and
    # P(second = j) = Σ_{i≠j} p_i p_j / (1 - p_i)
    m = 40_000
    p = np.array([0.1, 0.2, 0.3, 0.15, 0.25], fdtype)
    c = np.asarray(fnad.vmap(lambda kk: fr.choice(kk, 5, (2,), replace=False, p=p))(
        fr.split(key("choice-norep-p"), m)))
    assert np.all(c[:, 0] != c[:, 1])
    p64 = a64(p)
    assert_chi2(np.bincount(c[:, 0], minlength=5), p64, "first draw with p")
    second = np.array([sum(p64[i] * p64[j] / (1 - p64[i]) for i in range(5) if i != j)
                       for j in range(5)])
    assert_chi2(np.bincount(c[:, 1], minlength=5), second, "second draw with p")

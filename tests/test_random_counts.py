"""fnad.random's counting distributions (poisson, binomial, multinomial) against jax.random,
the oracle: the same key gives jax's counts exactly (jax's algorithms and key use), eager,
under jit and under vmap; jax's values at the edges (lam = 0, NaN, inf; n = 0, p = 0 or 1,
NaN, inf); moments; the errors."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from checks import jax_at_default_level, raises_with, traced, x64_everywhere

import fnad
import fnad.random as fr

jax = pytest.importorskip("jax", reason="jax.random is the oracle for these samplers")
import jax.random as jr  # noqa: E402

f32 = np.float32


def a(x):
    return np.asarray(x)


def same(got, want, what=""):
    """Equal shapes, dtypes and values (NaN where jax has NaN)."""
    got, want = a(got), a(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), \
        f"{what}: {got.shape} {got.dtype} vs jax's {want.shape} {want.dtype}"
    np.testing.assert_array_equal(got, want, err_msg=what)


@functools.cache
def _theirs(sampler):
    return jax_at_default_level(lambda key: sampler(jr, key))


def both(sampler, seed=0):
    """sampler(random module, key) with fnad and with jax, for the same seed (jax's code
    compiled at XLA's default optimization level: its rejection tests turn on last bits)."""
    return sampler(fr, fr.PRNGKey(seed)), _theirs(sampler)(jr.PRNGKey(seed))


_LAM = np.array([0.2, 1.5, 4.0, 9.99, 10.0, 25.0, 150.0, 600.0], f32)   # Knuth and PTRS
_N = np.array([1.0, 7.0, 20.0, 60.0, 300.0, 1000.0], f32)
_P = np.array([0.03, 0.5, 0.3, 0.8, 0.1, 0.995], f32)                   # inversion and BTRS
_PK = np.array([[0.2, 0.3, 0.5], [0.05, 0.0, 0.95]], f32)               # a zero category too
# name -> sampler of a random module and a key; values must equal jax's exactly
CASES = {
    "poisson": lambda r, k: r.poisson(k, _LAM),
    "poisson-shape": lambda r, k: r.poisson(k, _LAM, (3, 8)),                # lam broadcast
    "poisson-scalar": lambda r, k: r.poisson(k, 3.5, (50,)),
    "poisson-column": lambda r, k: r.poisson(k, _LAM[:, None], (8, 2)),
    "poisson-int16": lambda r, k: r.poisson(k, _LAM, dtype=np.int16),
    "poisson-f16-lam": lambda r, k: r.poisson(k, _LAM.astype(np.float16)),
    "binomial": lambda r, k: r.binomial(k, _N, _P),
    "binomial-broadcast": lambda r, k: r.binomial(k, _N[:, None], _P[:3]),   # [6, 3]
    "binomial-shape": lambda r, k: r.binomial(k, 30.0, 0.4, (4, 5)),
    "binomial-int-n": lambda r, k: r.binomial(k, np.arange(0, 40, 5), 0.6),
    "binomial-float-n": lambda r, k: r.binomial(k, np.array([3.7, 15.2], f32), 0.7),
    "binomial-f16": lambda r, k: r.binomial(k, _N[:4], _P[:4].astype(np.float16),
                                            dtype=np.float16),
    "multinomial": lambda r, k: r.multinomial(k, 40.0, _PK[0]),
    "multinomial-batch": lambda r, k: r.multinomial(k, np.array([10.0, 500.0], f32), _PK),
    "multinomial-shape": lambda r, k: r.multinomial(k, 25.0, _PK[0], shape=(4, 2, 3)),
    "multinomial-unnormalized": lambda r, k: r.multinomial(k, 30.0, np.array([1, 2, 3, 4])),
    "multinomial-dtype": lambda r, k: r.multinomial(k, 12.0, _PK[1], dtype=np.int32),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax_for_the_same_key(name):
    for seed in (0, 7):
        got, want = both(CASES[name], seed)
        same(got, want, f"{name} seed {seed}")


def test_many_draws_match_jax():
    """A sweep over lam, n and p (both algorithms of each, their switch points)."""
    lam = np.geomspace(0.05, 900.0, 400).astype(f32)
    n = np.round(np.geomspace(1.0, 3000.0, 300)).astype(f32)
    p = np.random.default_rng(0).uniform(0.0, 1.0, 300).astype(f32)
    for seed in (1, 2):
        same(*both(lambda r, k: r.poisson(k, lam), seed), f"poisson seed {seed}")
        same(*both(lambda r, k: r.binomial(k, n, p), seed), f"binomial seed {seed}")


def test_large_lam():
    """For lam in the thousands PTRS's log-density test cancels float32 terms of size
    lgamma(k) ~ 1e4..1e7: their last bit (fnad's lgamma from SciPy, XLA's its own) decides
    a few draws in a hundred there, so eager values match jax's in most draws and stay
    close in the rest; jit on the xla backend computes XLA's lgamma and matches every
    draw."""
    lam = np.geomspace(1e3, 1e6, 600).astype(f32)
    got, want = both(lambda r, k: r.poisson(k, lam), 3)
    assert np.mean(a(got) == a(want)) > 0.95
    assert np.all(np.abs(a(got) - a(want)) < 10 * np.sqrt(lam))
    xla = fnad.jit(lambda k: fr.poisson(k, lam), backend="xla")(fr.PRNGKey(3))
    same(xla, jr.poisson(jr.PRNGKey(3), lam), "poisson under jit on xla (XLA as configured)")


# ---- edges -------------------------------------------------------------------------------------
def test_poisson_edge_values():
    lam = np.array([0.0, np.nan, -1.0, np.inf, 1e9, 3.0], f32)
    got, want = both(lambda r, k: r.poisson(k, lam))
    same(got, want, "poisson edges")
    np.testing.assert_array_equal(a(got)[:4], [0, -1, -1, np.iinfo(np.int32).max])
    assert abs(int(a(got)[4]) - 1e9) < 1e6
    same(*both(lambda r, k: r.poisson(k, np.zeros(4, f32))), "lam = 0")
    same(*both(lambda r, k: r.poisson(k, _LAM, (0, 8))), "empty")


def test_binomial_edge_values():
    n = np.array([0.0, 5.0, 5.0, 5.0, np.nan, -1.0, np.inf, 100.0, 8.0, 50.0], f32)
    p = np.array([0.3, 0.0, 1.0, np.nan, 0.3, 0.3, 0.3, 0.3, -0.2, 1.0], f32)
    got, want = both(lambda r, k: r.binomial(k, n, p))
    same(got, want, "binomial edges")
    np.testing.assert_array_equal(a(got)[:3], [0.0, 0.0, 5.0])
    assert np.isnan(a(got)[3:6]).all() and a(got)[6] == np.inf and np.isnan(a(got)[8])
    assert a(got)[9] == 50.0
    same(*both(lambda r, k: r.multinomial(k, 0.0, _PK[0])), "multinomial n = 0")


# ---- transformations ---------------------------------------------------------------------------
def test_jit_equals_eager_and_jax():
    for name in ("poisson-shape", "binomial-broadcast", "multinomial-batch"):
        got = traced(lambda k, name=name: CASES[name](fr, k))(fr.PRNGKey(4))
        want = jax_at_default_level(lambda k, name=name: CASES[name](jr, k))(jr.PRNGKey(4))
        same(got, want, f"{name} under jit")


def test_vmap_matches_jax_vmap():
    """jax.vmap's batched while loop freezes each member when its own loop is done: fnad's
    vmap does the same, so rejection's keep-the-last-accepted rule gives jax's values."""
    keys, jkeys = fr.split(fr.PRNGKey(0), 3), jr.split(jr.PRNGKey(0), 3)
    for name in ("poisson", "binomial", "multinomial-batch"):
        got = fnad.vmap(lambda k, name=name: CASES[name](fr, k))(keys)
        want = jax_at_default_level(jax.vmap(lambda k, name=name: CASES[name](jr, k)))(jkeys)
        same(got, want, f"{name} under vmap over keys")
    got = fnad.vmap(lambda lam: fr.poisson(fr.PRNGKey(1), lam, (2,)))(_LAM)
    want = jax_at_default_level(jax.vmap(lambda lam: jr.poisson(jr.PRNGKey(1), lam, (2,))))(_LAM)
    same(got, want, "poisson under vmap over lam")
    got = fnad.vmap(lambda n, p: fr.binomial(fr.PRNGKey(1), n, p))(_N, _P)
    want = jax_at_default_level(jax.vmap(lambda n, p: jr.binomial(jr.PRNGKey(1), n, p)))(_N, _P)
    same(got, want, "binomial under vmap over n, p")


def test_x64():
    with x64_everywhere():
        for name in ("poisson", "binomial", "multinomial-batch"):
            got, want = both(CASES[name], 5)
            same(got, want, f"{name} with x64")
        assert a(fr.poisson(fr.PRNGKey(0), 2.0)).dtype == np.int64
        assert a(fr.binomial(fr.PRNGKey(0), 5, 0.5)).dtype == np.float64


# ---- distributions -----------------------------------------------------------------------------
def test_moments():
    n = 10_000
    k = fr.PRNGKey(6)
    for lam in (3.0, 40.0):
        x = a(fr.poisson(k, lam, (n,))).astype(np.float64)
        assert abs(x.mean() - lam) < 5 * np.sqrt(lam / n) and abs(x.var() - lam) < 0.1 * lam
    for cnt, p in ((12, 0.3), (400, 0.65)):
        x = a(fr.binomial(k, cnt, p, (n,))).astype(np.float64)
        mean, var = cnt * p, cnt * p * (1 - p)
        assert abs(x.mean() - mean) < 5 * np.sqrt(var / n) and abs(x.var() - var) < 0.1 * var
    m = a(fr.multinomial(k, 100.0, _PK[0], shape=(2000, 3)))
    np.testing.assert_array_equal(m.sum(-1), 100.0)
    np.testing.assert_allclose(m.mean(0), 100 * _PK[0], rtol=0.02)


# ---- errors ------------------------------------------------------------------------------------
def test_errors():
    k = fr.PRNGKey(0)
    raises_with(lambda: fr.poisson(k, 1.0, (2,), np.float32),
                "dtype argument to `poisson` must be an int dtype", exc=ValueError)
    raises_with(lambda: fr.poisson(k, np.ones(3, f32), (2,)), "lam of shape (3,)",
                "cannot be broadcast to the requested shape (2,)", exc=ValueError)
    raises_with(lambda: fr.binomial(k, 5.0, 0.5, (3,), np.int32),
                "dtype argument to `binomial` must be a float dtype", exc=ValueError)
    raises_with(lambda: fr.binomial(k, np.ones(3, f32), 0.5, (2,)), exc=ValueError)
    raises_with(lambda: fr.binomial(k, np.ones((2, 1), f32), 0.5, (2,)),
                "broadcast-compatible with shape", exc=ValueError)
    raises_with(lambda: fr.multinomial(k, 10.0, _PK[0], shape=(2,)), "p of shape (3,)",
                "cannot be broadcast to the requested shape (2,)", exc=ValueError)
    raises_with(lambda: fr.multinomial(k, np.ones(3, f32), _PK), "n of shape (3,)",
                "requested shape (2,)", exc=ValueError)
    raises_with(lambda: fr.multinomial(k, 10.0, 0.5), "p must have at least one dimension",
                exc=ValueError)
    raises_with(lambda: fr.poisson(np.zeros(3, np.uint32), 1.0), "raw PRNG key", exc=TypeError)
    raises_with(lambda: fr.binomial(k, [5.0], 0.5), "binomial", exc=TypeError)


def test_every_jax_random_name_is_here():
    """Every public name of jax.random but its gamma primitive (fnad's gamma is a custom_jvp
    function, not a primitive)."""
    missing = sorted(n for n in dir(jr) if not n.startswith("_") and not hasattr(fr, n))
    assert missing == ["random_gamma_p"], missing
    assert {"poisson", "binomial", "multinomial"} <= set(fr.__all__)

"""fnad.random: bits against jax.random (the oracle, where installed) and sampler
statistics on 10**5 draws (everywhere)."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.random as fr

try:
    import jax
    import jax.numpy as jjnp  # noqa: F401
except ImportError:                                                    # pragma: no cover
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")

N = 100_000
SEEDS = [0, 1, 42, -1, -7, 2 ** 31, 2 ** 32 + 5, 2 ** 40 + 3, -(2 ** 40), 2 ** 63 - 1]


def a(x):
    return np.asarray(x)


@pytest.fixture
def original_layout():
    """fnad and jax both on jax_threefry_partitionable=False for one test."""
    fr.threefry_partitionable = False
    with jax.threefry_partitionable(False):
        yield
    fr.threefry_partitionable = True


# ---- bit-exact against jax ----------------------------------------------------------------
@needs_jax
def test_partitionable_default_matches_jax():
    assert jax.config.jax_threefry_partitionable is True
    assert fr.threefry_partitionable is True


@needs_jax
def test_threefry2x32_hash_bits():
    from jax._src.random.threefry2x32 import threefry2x32_p, threefry_2x32
    rng = np.random.RandomState(0)
    k = rng.randint(0, 2 ** 32, size=2, dtype=np.uint64).astype(np.uint32)
    x0, x1 = (rng.randint(0, 2 ** 32, size=37, dtype=np.uint64).astype(np.uint32)
              for _ in range(2))
    want = threefry2x32_p.bind(jax.numpy.uint32(k[0]), jax.numpy.uint32(k[1]),
                               jax.numpy.asarray(x0), jax.numpy.asarray(x1))
    got = fr.threefry2x32(fnad.numpy.asarray(k[0]), fnad.numpy.asarray(k[1]), x0, x1)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(a(g), a(w))
    for n in (1, 6, 7):                                               # odd sizes pad
        c = np.arange(n, dtype=np.uint32) * 977
        np.testing.assert_array_equal(
            a(fr.threefry_2x32(k, c)),
            a(threefry_2x32(jax.numpy.asarray(k), jax.numpy.asarray(c))))


@needs_jax
@pytest.mark.parametrize("seed", SEEDS)
def test_prngkey_matches_jax(seed):
    np.testing.assert_array_equal(a(fr.PRNGKey(seed)), a(jax.random.PRNGKey(seed)))
    np.testing.assert_array_equal(a(fr.key(seed)),
                                  a(jax.random.key_data(jax.random.key(seed))))


@needs_jax
@pytest.mark.parametrize("seed", [5, -3, 2 ** 40 + 3, -(2 ** 40)])
def test_prngkey_x64_splits_hi_lo(seed):
    with fnad.config.override(jax_enable_x64=True), jax.enable_x64(True):
        np.testing.assert_array_equal(a(fr.PRNGKey(seed)), a(jax.random.PRNGKey(seed)))
        np.testing.assert_array_equal(a(fr.PRNGKey(np.int64(seed))),
                                      a(jax.random.PRNGKey(np.int64(seed))))


@needs_jax
@pytest.mark.parametrize("layout", ["partitionable", "original"])
def test_split_fold_in_bits_match_jax(layout, request):
    if layout == "original":
        request.getfixturevalue("original_layout")
    k, jk = fr.PRNGKey(42), jax.random.PRNGKey(42)
    for num in (2, 3, (2, 3)):
        np.testing.assert_array_equal(a(fr.split(k, num)), a(jax.random.split(jk, num)))
    for d in (0, 7, 2 ** 31 + 1):
        np.testing.assert_array_equal(a(fr.fold_in(k, d)), a(jax.random.fold_in(jk, d)))
    for shape in [(), (1,), (5,), (3, 4), (2, 0)]:
        for dt in (np.uint8, np.uint16, np.uint32):
            np.testing.assert_array_equal(a(fr.bits(k, shape, dt)),
                                          a(jax.random.bits(jk, shape, dt)))


@needs_jax
@pytest.mark.parametrize("layout", ["partitionable", "original"])
def test_samplers_match_jax(layout, request):
    if layout == "original":
        request.getfixturevalue("original_layout")
    k, jk = fr.PRNGKey(3), jax.random.PRNGKey(3)
    shape = (64, 33)
    # uniform: bit-exact (same mantissa construction, same affine map)
    np.testing.assert_array_equal(a(fr.uniform(k, shape)), a(jax.random.uniform(jk, shape)))
    # other ranges: XLA fuses u * (max - min) + min into one FMA rounding, fnad rounds
    # twice -> within 1 ulp of the product u * (max - min) (|.| <= 7 here)
    got = a(fr.uniform(k, shape, minval=-2.0, maxval=5.0))
    want = a(jax.random.uniform(jk, shape, minval=-2.0, maxval=5.0))
    assert np.all(np.abs(got - want) <= np.spacing(np.float32(4.0)))
    # normal: same uniform, but fnad's and XLA's erf_inv differ by a few ulp in the tails
    got, want = a(fr.normal(k, shape)), a(jax.random.normal(jk, shape))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # integer / boolean samplers: exactly equal
    np.testing.assert_array_equal(a(fr.randint(k, shape, -5, 17)),
                                  a(jax.random.randint(jk, shape, -5, 17)))
    if layout == "partitionable":  # the original layout: test_randint_uint8_original_layout
        np.testing.assert_array_equal(a(fr.randint(k, (50,), 0, 256, np.uint8)),
                                      a(jax.random.randint(jk, (50,), 0, 256, np.uint8)))
    np.testing.assert_array_equal(a(fr.bernoulli(k, 0.3, shape)),
                                  a(jax.random.bernoulli(jk, 0.3, shape)))
    np.testing.assert_array_equal(a(fr.permutation(k, 1000)),
                                  a(jax.random.permutation(jk, 1000)))
    x = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(a(fr.permutation(k, x, axis=1)),
                                  a(jax.random.permutation(jk, x, axis=1)))
    logits = np.random.RandomState(1).randn(8, 5).astype(np.float32)
    np.testing.assert_array_equal(a(fr.categorical(k, logits)),
                                  a(jax.random.categorical(jk, logits)))
    np.testing.assert_array_equal(a(fr.categorical(k, logits, axis=0, shape=(3, 5))),
                                  a(jax.random.categorical(jk, logits, axis=0, shape=(3, 5))))
    # log-based samplers: within a few ulp (log/erf implementations differ)
    for name, args in [("gumbel", (shape,)), ("exponential", (shape,)),
                       ("truncated_normal", (-1.0, 2.0, shape))]:
        got, want = a(getattr(fr, name)(k, *args)), a(getattr(jax.random, name)(jk, *args))
        np.testing.assert_allclose(got, want, rtol=4e-6, atol=4e-7, err_msg=name)


# ---- statistics (no jax needed) ------------------------------------------------------------
def test_uniform_and_normal_statistics():
    k1, k2, k3 = fr.split(fr.PRNGKey(0), 3)
    u = a(fr.uniform(k1, (N,)))
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    v = a(fr.uniform(k2, (N,), minval=-3.0, maxval=-1.0))
    assert v.min() >= -3 and v.max() < -1 and abs(v.mean() + 2) < 0.01
    z = a(fr.normal(k3, (N,)))
    assert z.shape == (N,) and abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.02
    assert a(fr.normal(k3, (3,), np.float16)).dtype == np.float16


def test_exponential_and_gumbel_statistics():
    k1, k2 = fr.split(fr.PRNGKey(1))
    e = a(fr.exponential(k1, (N,)))
    assert e.min() >= 0 and abs(e.mean() - 1) < 0.015 and abs(e.var() - 1) < 0.04
    g = a(fr.gumbel(k2, (N,)))
    assert abs(g.mean() - np.euler_gamma) < 0.015 and abs(g.var() - np.pi ** 2 / 6) < 0.05


def test_randint_and_bernoulli_statistics():
    k1, k2 = fr.split(fr.PRNGKey(2))
    r = a(fr.randint(k1, (N,), -3, 7))
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    assert np.all(np.abs(np.bincount(r + 3) / N - 0.1) < 0.005)
    b = a(fr.bernoulli(k2, 0.25, (N,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.25) < 0.005
    p = np.array([0.1, 0.9], np.float32)
    assert a(fr.bernoulli(k2, p)).shape == (2,)


def test_permutation_is_a_permutation():
    k = fr.PRNGKey(3)
    p = a(fr.permutation(k, 1000))
    assert sorted(p.tolist()) == list(range(1000)) and not np.array_equal(p, np.arange(1000))
    x = np.arange(12).reshape(3, 4)
    px = a(fr.permutation(k, x, axis=1))
    assert sorted(px[0].tolist()) == [0, 1, 2, 3]
    np.testing.assert_array_equal(px, x[:, px[0]])                   # same column order


def test_categorical_and_choice_statistics():
    k1, k2, k3 = fr.split(fr.PRNGKey(4), 3)
    p = np.array([0.2, 0.5, 0.3], np.float32)
    c = a(fr.categorical(k1, np.log(p), shape=(N,)))
    assert c.shape == (N,) and np.all(np.abs(np.bincount(c) / N - p) < 0.01)
    ch = a(fr.choice(k2, 10, (N,)))
    assert ch.min() == 0 and ch.max() == 9
    no_rep = a(fr.choice(k3, 10, (10,), replace=False))
    assert sorted(no_rep.tolist()) == list(range(10))


def test_truncated_normal_within_bounds():
    t = a(fr.truncated_normal(fr.PRNGKey(5), -0.5, 1.5, (N,)))
    assert t.min() > -0.5 and t.max() < 1.5
    # mean of N(0,1) truncated to (a, b): (phi(a) - phi(b)) / (Phi(b) - Phi(a))
    from math import erf, exp, pi, sqrt
    phi = lambda x: exp(-x * x / 2) / sqrt(2 * pi)  # noqa: E731
    Phi = lambda x: 0.5 * (1 + erf(x / sqrt(2)))  # noqa: E731
    assert abs(t.mean() - (phi(-0.5) - phi(1.5)) / (Phi(1.5) - Phi(-0.5))) < 0.01
    assert a(fr.truncated_normal(fr.PRNGKey(5), np.zeros(3), 1.0)).shape == (3,)


def test_keys_are_deterministic_and_split_differs():
    k = fr.PRNGKey(9)
    np.testing.assert_array_equal(a(fr.uniform(k, (4,))), a(fr.uniform(fr.PRNGKey(9), (4,))))
    k1, k2 = fr.split(k)
    assert not np.array_equal(a(fr.uniform(k1, (4,))), a(fr.uniform(k2, (4,))))
    assert not np.array_equal(a(fr.fold_in(k, 1)), a(fr.fold_in(k, 2)))
    np.testing.assert_array_equal(a(fr.key_data(k)), a(k))


# ---- transformations ---------------------------------------------------------------------
def test_grad_through_normal_times_sigma():
    k = fr.PRNGKey(0)
    z = a(fr.normal(k, (5,)))
    g = fnad.grad(lambda sigma: (fr.normal(k, (5,)) * sigma).sum())(2.0)
    np.testing.assert_allclose(a(g), z.sum(), rtol=1e-6)
    g2 = fnad.grad(lambda mu: fr.truncated_normal(k, -1.0, 1.0, (5,)).sum() + mu)(1.0)
    assert float(a(g2)) == 1.0


def test_traced_key_and_seed():
    k = fr.PRNGKey(11)
    f = traced(lambda key: fr.uniform(key, (6,)))
    np.testing.assert_array_equal(a(f(k)), a(fr.uniform(k, (6,))))
    s = traced(lambda seed: fr.PRNGKey(seed))
    np.testing.assert_array_equal(a(s(np.int32(-7))), a(fr.PRNGKey(-7)))
    sp = traced(lambda key: fr.split(key, 3))
    np.testing.assert_array_equal(a(sp(k)), a(fr.split(k, 3)))


# ---- errors ------------------------------------------------------------------------------
def test_errors():
    k = fr.PRNGKey(0)
    raises_with(lambda: fr.uniform(np.zeros(3, np.uint32), (2,)), "shape (2,)",
                "uint32", exc=TypeError)
    raises_with(lambda: fr.split(np.zeros(2, np.int32)), "dtype int32", exc=TypeError)
    raises_with(lambda: fr.randint(k, (3,), 5, 5), "minval", "maxval", exc=ValueError)
    raises_with(lambda: fr.randint(k, (3,), 0, 5, np.float32), "integer", exc=TypeError)
    raises_with(lambda: fr.uniform(k, (3,), minval=np.zeros(4)), "broadcast",
                exc=ValueError)
    raises_with(lambda: fr.bernoulli(k, np.full(3, 0.5), (4,)), "broadcast", exc=ValueError)
    raises_with(lambda: fr.bernoulli(k, 1, (4,)), "floating", exc=TypeError)
    raises_with(lambda: fr.normal(k, (2,), np.int32), "float dtype", exc=ValueError)
    raises_with(lambda: fr.bits(k, (2,), np.int32), "unsigned", exc=ValueError)
    raises_with(lambda: fr.fold_in(k, np.arange(2)), "scalar", exc=TypeError)
    raises_with(lambda: fr.PRNGKey(np.arange(2)), "scalar", exc=TypeError)
    raises_with(lambda: fr.PRNGKey(1.5), "integer", exc=TypeError)
    raises_with(lambda: fr.PRNGKey(2 ** 64), "int64", exc=OverflowError)
    raises_with(lambda: fr.choice(k, 3, (5,), replace=False), "larger sample",
                exc=ValueError)
    raises_with(lambda: fr.categorical(k, np.zeros((2, 3)), shape=(4,)), "broadcast",
                exc=ValueError)


@needs_jax
@pytest.mark.xfail(strict=True, reason="known bug: with jax_threefry_partitionable=False, "
                   "randint to uint8 over [0, 256) differs from jax (uint8 bits do match)")
def test_randint_uint8_original_layout(original_layout):
    k, jk = fr.PRNGKey(3), jax.random.PRNGKey(3)
    np.testing.assert_array_equal(np.asarray(fr.randint(k, (50,), 0, 256, np.uint8)),
                                  np.asarray(jax.random.randint(jk, (50,), 0, 256, np.uint8)))

"""fnad.random: bits and samples against jax.random (the oracle, where installed), eagerly
and under vmap / grad / jvp / tracing; errors. The samplers' statistics are in
tests/test_random_stats.py."""
from __future__ import annotations

import numpy as np
import pytest
from checks import TEST_BACKEND, raises_with, traced, xla_rounds_each_product

import fnad
import fnad.random as fr

try:
    import jax
    import jax.numpy as jjnp  # noqa: F401
except ImportError:                                                    # pragma: no cover
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")

SEEDS = [0, 1, 42, -1, -7, 2 ** 31, 2 ** 32 + 5, 2 ** 40 + 3, -(2 ** 40), 2 ** 63 - 1]


def a(x):
    return np.asarray(x)


@pytest.fixture
def original_layout():
    """fnad and jax both on jax_threefry_partitionable=False for one test."""
    with fnad.threefry_partitionable(False), jax.threefry_partitionable(False):
        yield
    assert fnad.config.jax_threefry_partitionable is True


# ---- bit-exact against jax ----------------------------------------------------------------
@needs_jax
def test_partitionable_default_matches_jax():
    assert jax.config.jax_threefry_partitionable is True
    assert fnad.config.jax_threefry_partitionable is True


def test_partitionable_is_a_config_option_that_jit_keys_on():
    # a jitted sampler traced in one layout must trace again in the other
    draw = fnad.jit(lambda k: fr.bits(k, (4,)))
    key = fr.PRNGKey(3)
    new = np.asarray(draw(key))
    with fnad.threefry_partitionable(False):
        old = np.asarray(draw(key))
        np.testing.assert_array_equal(old, np.asarray(fr.bits(key, (4,))))
    assert not np.array_equal(new, old)
    np.testing.assert_array_equal(np.asarray(draw(key)), new)


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
    np.testing.assert_array_equal(a(fr.key_data(fr.key(seed))),
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


# ---- statistics: tests/test_random_stats.py (every sampler, fixed keys, 6-SE bounds) ---
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


# ---- which samples equal jax's bit for bit (the claim in fnad.random's docstrings) --------
FLOATS = ["float16", "bfloat16", "float32"]
SHAPES = [(), (7,), (2, 3, 4), (64, 33), (3, 0)]


def _ulps(got, want):
    """|got - want| in ulps of want's dtype at max(|want|, 1) (near 0 the error of
    -log(-log u) or erf_inv is absolute, not relative)."""
    w = np.maximum(np.abs(want), want.dtype.type(1))
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / \
        np.spacing(w).astype(np.float64)


def _check_floats_against_jax(dtypes):
    rounds_each = {dt: xla_rounds_each_product(getattr(fnad.numpy, dt)) for dt in dtypes
                   if dt in ("float16", "bfloat16")}
    for seed in (0, 3):
        k, jk = fr.PRNGKey(seed), jax.random.PRNGKey(seed)
        for dt, shape in [(d, s) for d in dtypes for s in SHAPES]:
            fdt, jdt = getattr(fnad.numpy, dt), getattr(jax.numpy, dt)
            where = f"seed {seed}, {dt}{list(shape)}"
            # uniform on [0, 1): bit for bit in every dtype and shape
            got, want = a(fr.uniform(k, shape, fdt)), a(jax.random.uniform(jk, shape, jdt))
            assert got.dtype == want.dtype == np.dtype(fdt), where
            np.testing.assert_array_equal(got, want, err_msg=f"uniform {where}")
            # other ranges: equal in float16/bfloat16 where XLA rounds the product
            # u·(max - min) before adding min, as fnad does; within 1 ulp of the product
            # (|.| < 8 here) where XLA fuses the FMA (float32/64; float16 on a CPU with
            # native f16 arithmetic)
            got = a(fr.uniform(k, shape, fdt, minval=-2.0, maxval=5.0))
            want = a(jax.random.uniform(jk, shape, jdt, minval=-2.0, maxval=5.0))
            if dt in ("float16", "bfloat16") and rounds_each[dt]:
                np.testing.assert_array_equal(got, want, err_msg=f"uniform(-2, 5) {where}")
            else:
                assert np.all(np.abs(got - want) <= np.spacing(got.dtype.type(4.0))), where
            # erf_inv / log based samplers: not bit-exact, within `ulps` of jax's (seen:
            # normal 86 ulp in float32 tails, exponential 64 in float64, gumbel 8 in float16)
            ulps = 16 if dt in ("float16", "bfloat16") else 128
            for name in ("normal", "exponential", "gumbel"):
                got = a(getattr(fr, name)(k, shape, fdt))
                want = a(getattr(jax.random, name)(jk, shape, jdt))
                assert got.dtype == want.dtype, where
                if got.size:
                    assert _ulps(got, want).max() <= ulps, f"{name} {where}: " \
                        f"{_ulps(got, want).max()} ulps"


@needs_jax
@pytest.mark.parametrize("layout", ["partitionable", "original"])
def test_float_samplers_against_jax_by_dtype_and_shape(layout, request):
    if layout == "original":
        request.getfixturevalue("original_layout")
    _check_floats_against_jax(FLOATS)


@needs_jax
@pytest.mark.parametrize("layout", ["partitionable", "original"])
def test_float_samplers_against_jax_x64(layout, request, x64):
    if layout == "original":
        request.getfixturevalue("original_layout")
    _check_floats_against_jax(["float64"])
    k, jk = fr.PRNGKey(7), jax.random.PRNGKey(7)
    for bits in (np.uint64, None):                                # None: uint64 under x64
        got, want = a(fr.bits(k, (9,), bits)), a(jax.random.bits(jk, (9,), bits))
        assert got.dtype == want.dtype == np.uint64
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a(fr.randint(k, (50,), -2 ** 40, 2 ** 40, np.int64)),
                                  a(jax.random.randint(jk, (50,), -2 ** 40, 2 ** 40, np.int64)))


# ---- transformations: vmap -----------------------------------------------------------------
_P = np.array([0.1, 0.2, 0.3, 0.15, 0.25], np.float32)
_LOGITS = np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]], np.float32)
# name -> (sampler written against a random module (fnad.random or jax.random), exact)
SAMPLERS = {
    "uniform": (lambda r, k: r.uniform(k, (3,)), True),
    "uniform_range": (lambda r, k: r.uniform(k, (2, 3), minval=-1.0, maxval=3.0), False),
    "normal": (lambda r, k: r.normal(k, (3,)), False),
    "exponential": (lambda r, k: r.exponential(k, (4,)), False),
    "gumbel": (lambda r, k: r.gumbel(k, (4,)), False),
    "truncated_normal": (lambda r, k: r.truncated_normal(k, -1.0, 2.0, (4,)), False),
    "bits": (lambda r, k: r.bits(k, (5,)), True),
    "split": (lambda r, k: r.split(k, 3), True),
    "fold_in": (lambda r, k: r.fold_in(k, 7), True),
    "bernoulli": (lambda r, k: r.bernoulli(k, 0.3, (6,)), True),
    "randint": (lambda r, k: r.randint(k, (4,), -5, 17), True),
    "randint_uint8": (lambda r, k: r.randint(k, (4,), 0, 256, np.uint8), True),
    "permutation": (lambda r, k: r.permutation(k, 10), True),
    "permutation_array": (lambda r, k: r.permutation(k, np.arange(12.0).reshape(3, 4), axis=1),
                          True),
    "categorical": (lambda r, k: r.categorical(k, _LOGITS), True),
    "categorical_shape": (lambda r, k: r.categorical(k, _LOGITS, axis=0, shape=(2, 3)), True),
    "choice": (lambda r, k: r.choice(k, 10, (3,)), True),
    "choice_no_replace": (lambda r, k: r.choice(k, 10, (3,), replace=False), True),
    "choice_p": (lambda r, k: r.choice(k, 5, (3,), p=_P), True),
    "choice_p_no_replace": (lambda r, k: r.choice(k, 5, (3,), replace=False, p=_P), True),
}


def _assert_like_jax(got, want, exact, what):
    got, want = a(got), a(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:                                              # fnad's erf_inv / log vs XLA's
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_vmap_over_keys_equals_a_loop(name):
    f, _ = SAMPLERS[name]
    keys = fr.split(fr.PRNGKey(0), 8)
    got = a(fnad.vmap(lambda k: f(fr, k))(keys))
    want = np.stack([a(f(fr, keys[i])) for i in range(8)])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # nested: a [3, 4] grid of keys
    grid = fr.split(fr.PRNGKey(1), (3, 4))
    got = a(fnad.vmap(fnad.vmap(lambda k: f(fr, k)))(grid))
    want = np.stack([np.stack([a(f(fr, grid[i, j])) for j in range(4)]) for i in range(3)])
    np.testing.assert_array_equal(got, want)


@needs_jax
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_vmap_over_keys_matches_jax_vmap(name):
    f, exact = SAMPLERS[name]
    keys, jkeys = fr.split(fr.PRNGKey(0), 8), jax.random.split(jax.random.PRNGKey(0), 8)
    np.testing.assert_array_equal(a(keys), a(jkeys))
    _assert_like_jax(fnad.vmap(lambda k: f(fr, k))(keys),
                     jax.vmap(lambda k: f(jax.random, k))(jkeys), exact, name)
    # the vmap axis elsewhere: keys as the columns of a [2, 8] array, out_axes=1
    got = fnad.vmap(lambda k: f(fr, k), in_axes=1, out_axes=-1)(a(keys).T)
    want = jax.vmap(lambda k: f(jax.random, k), in_axes=1, out_axes=-1)(a(jkeys).T)
    _assert_like_jax(got, want, exact, f"{name} in_axes=1")


@needs_jax
def test_vmap_normal_over_split_keys():
    # the canonical example: one normal vector per key
    key, jkey = fr.PRNGKey(42), jax.random.PRNGKey(42)
    got = a(fnad.vmap(lambda k: fr.normal(k, (3,)))(fr.split(key, 8)))
    loop = np.stack([a(fr.normal(k, (3,))) for k in fr.split(key, 8)])
    np.testing.assert_array_equal(got, loop)
    want = a(jax.vmap(lambda k: jax.random.normal(k, (3,)))(jax.random.split(jkey, 8)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got.shape == (8, 3) and len(np.unique(got)) == 24        # 8 different draws


@needs_jax
def test_vmap_over_fold_in_data_and_seeds():
    key, jkey = fr.PRNGKey(3), jax.random.PRNGKey(3)
    data = np.array([0, 1, 7, 2 ** 31 + 5, 2 ** 32 - 1], np.uint32)
    got = a(fnad.vmap(lambda d: fr.fold_in(key, d))(data))
    loop = np.stack([a(fr.fold_in(key, int(d))) for d in data])
    np.testing.assert_array_equal(got, loop)
    np.testing.assert_array_equal(got, a(jax.vmap(lambda d: jax.random.fold_in(jkey, d))(data)))
    # int32 data (negative values wrap as jax's), keys and data both batched
    d32 = np.array([-3, 0, 5, 2 ** 31 - 1], np.int32)
    keys, jkeys = fr.split(key, 4), jax.random.split(jkey, 4)
    np.testing.assert_array_equal(a(fnad.vmap(fr.fold_in)(keys, d32)),
                                  a(jax.vmap(jax.random.fold_in)(jkeys, d32)))
    # then sample from each folded key
    got = fnad.vmap(lambda d: fr.uniform(fr.fold_in(key, d), (2,)))(d32)
    want = jax.vmap(lambda d: jax.random.uniform(jax.random.fold_in(jkey, d), (2,)))(d32)
    np.testing.assert_array_equal(a(got), a(want))
    seeds = np.array([0, 1, -7, 12345], np.int32)
    np.testing.assert_array_equal(a(fnad.vmap(fr.PRNGKey)(seeds)),
                                  a(jax.vmap(jax.random.PRNGKey)(seeds)))


@needs_jax
def test_split_under_vmap():
    keys, jkeys = fr.split(fr.PRNGKey(5), 6), jax.random.split(jax.random.PRNGKey(5), 6)
    got = a(fnad.vmap(lambda k: fr.split(k, 3))(keys))
    assert got.shape == (6, 3, 2)
    np.testing.assert_array_equal(got, np.stack([a(fr.split(k, 3)) for k in keys]))
    np.testing.assert_array_equal(got, a(jax.vmap(lambda k: jax.random.split(k, 3))(jkeys)))

    def step(r, k):                                    # split, then draw with the subkey
        k, sub = r.split(k)
        return r.normal(sub, (2,)), r.split(k, (2, 2))
    (z, ks), (jz, jks) = fnad.vmap(lambda k: step(fr, k))(keys), \
        jax.vmap(lambda k: step(jax.random, k))(jkeys)
    np.testing.assert_allclose(a(z), a(jz), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a(ks), a(jks))


@needs_jax
def test_vmap_with_batched_sampler_parameters():
    k, jk = fr.PRNGKey(2), jax.random.PRNGKey(2)
    lo = np.array([-1.0, 0.0, 10.0], np.float32)
    # the same key, batched bounds: each row the same u, shifted
    got = a(fnad.vmap(lambda m: fr.uniform(k, (4,), minval=m, maxval=m + 1.0))(lo))
    want = a(jax.vmap(lambda m: jax.random.uniform(jk, (4,), minval=m, maxval=m + 1.0))(lo))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    p = np.array([0.1, 0.5, 0.9], np.float32)
    np.testing.assert_array_equal(
        a(fnad.vmap(lambda q: fr.bernoulli(k, q, (50,)))(p)),
        a(jax.vmap(lambda q: jax.random.bernoulli(jk, q, (50,)))(p)))
    keys, jkeys = fr.split(k, 3), jax.random.split(jk, 3)
    logits = np.random.RandomState(0).randn(3, 6).astype(np.float32)
    np.testing.assert_array_equal(
        a(fnad.vmap(lambda kk, lg: fr.categorical(kk, lg, shape=(5,)))(keys, logits)),
        a(jax.vmap(lambda kk, lg: jax.random.categorical(kk, lg, shape=(5,)))(jkeys, logits)))
    hi = np.array([3, 10, 100], np.int32)
    np.testing.assert_array_equal(
        a(fnad.vmap(lambda kk, h: fr.randint(kk, (5,), 0, h))(keys, hi)),
        a(jax.vmap(lambda kk, h: jax.random.randint(kk, (5,), 0, h))(jkeys, hi)))


# ---- transformations: grad / jvp through random numbers -------------------------------------
def dropout_mlp_loss(jr, np_, w, x, key, rate=0.25):
    """A layer with inverted dropout: the mask from bernoulli(key, 1 - rate)."""
    h = np_.tanh(x @ w)                                           # [N, 3] @ [3, 5] -> [N, 5]
    keep = jr.bernoulli(key, 1.0 - rate, h.shape)
    h = np_.where(keep, h / (1.0 - rate), 0.0)
    return np_.mean(h ** 2), keep


def _dropout_args():
    rng = np.random.RandomState(0)
    return rng.randn(3, 5).astype(np.float32), rng.randn(16, 3).astype(np.float32)


@needs_jax
def test_grad_with_dropout_mask_matches_jax():
    w, x = _dropout_args()
    k, jk = fr.PRNGKey(0), jax.random.PRNGKey(0)
    (loss, keep), g = fnad.value_and_grad(
        lambda w_: dropout_mlp_loss(fr, fnad.numpy, w_, x, k), has_aux=True)(w)
    (jloss, jkeep), jg = jax.value_and_grad(
        lambda w_: dropout_mlp_loss(jax.random, jax.numpy, w_, x, jk), has_aux=True)(w)
    np.testing.assert_array_equal(a(keep), a(jkeep))              # the same mask
    assert 0 < a(keep).sum() < keep.size
    np.testing.assert_allclose(a(loss), a(jloss), rtol=1e-6)
    np.testing.assert_allclose(a(g), a(jg), rtol=1e-5, atol=1e-7)
    # dropped units get no gradient: with every unit dropped the gradient is zero
    g0 = fnad.grad(lambda w_: dropout_mlp_loss(fr, fnad.numpy, w_, x, k, rate=1.0 - 1e-9)[0])(w)
    assert np.all(a(g0) == 0)
    # the mask does not depend on w: a finite difference in w agrees with the gradient
    eps = 1e-3
    d = np.zeros_like(w)
    d[1, 2] = eps
    f = lambda w_: float(a(dropout_mlp_loss(fr, fnad.numpy, w_, x, k)[0]))   # noqa: E731
    np.testing.assert_allclose((f(w + d) - f(w - d)) / (2 * eps), a(g)[1, 2], rtol=2e-2,
                               atol=1e-5)


@needs_jax
def test_vmap_of_grad_with_per_example_dropout_keys():
    w, x = _dropout_args()
    keys, jkeys = fr.split(fr.PRNGKey(4), 4), jax.random.split(jax.random.PRNGKey(4), 4)
    xs = np.stack([x, x * 0.5, -x, x + 1.0])                      # [4, N, 3]

    def per_example(jr, np_, grad, k, xb):
        return grad(lambda w_: dropout_mlp_loss(jr, np_, w_, xb, k)[0])(w)
    got = fnad.vmap(lambda k, xb: per_example(fr, fnad.numpy, fnad.grad, k, xb))(keys, xs)
    want = jax.vmap(lambda k, xb: per_example(jax.random, jax.numpy, jax.grad, k, xb))(
        jkeys, xs)
    np.testing.assert_allclose(a(got), a(want), rtol=1e-5, atol=1e-7)
    loop = np.stack([a(per_example(fr, fnad.numpy, fnad.grad, keys[i], xs[i]))
                     for i in range(4)])
    np.testing.assert_allclose(a(got), loop, rtol=1e-6, atol=1e-7)
    # different keys, different masks: the per-example gradients differ
    assert not np.allclose(a(got)[0], a(got)[1] * 2)


@needs_jax
def test_jvp_and_grad_through_sampler_parameters_match_jax():
    k, jk = fr.PRNGKey(1), jax.random.PRNGKey(1)
    for f in (lambda r, lo, hi: r.uniform(k if r is fr else jk, (5,), minval=lo, maxval=hi),
              lambda r, lo, hi: r.truncated_normal(k if r is fr else jk, lo, hi, (5,))):
        g = fnad.grad(lambda lo, hi: f(fr, lo, hi).sum(), (0, 1))(-0.5, 1.5)
        jg = jax.grad(lambda lo, hi: f(jax.random, lo, hi).sum(), (0, 1))(-0.5, 1.5)
        np.testing.assert_allclose(np.array(a(g)), np.array(a(jg)), rtol=1e-5)
        out, t = fnad.jvp(lambda lo: f(fr, lo, 1.5), (-0.5,), (1.0,))
        jout, jt = jax.jvp(lambda lo: f(jax.random, lo, 1.5), (-0.5,), (1.0,))
        np.testing.assert_allclose(a(out), a(jout), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a(t), a(jt), rtol=1e-5, atol=1e-6)


def test_dropout_masks_keep_fraction():
    # bernoulli(key, keep, shape): the kept fraction within 6 binomial SE (a correct
    # sampler fails with probability 2e-9), per key under vmap as well
    for keep in (0.5, 0.8, 0.9):
        m = a(fr.bernoulli(fr.PRNGKey(int(keep * 10)), keep, (500, 400)))
        n = m.size
        assert abs(m.sum() - n * keep) <= 6 * np.sqrt(n * keep * (1 - keep)), keep
    masks = a(fnad.vmap(lambda k: fr.bernoulli(k, 0.8, (20_000,)))(fr.split(fr.PRNGKey(9), 5)))
    for row in masks:
        assert abs(row.sum() - 16_000) <= 6 * np.sqrt(20_000 * 0.8 * 0.2)
    assert len({row.tobytes() for row in masks}) == 5              # a different mask per key


def test_samplers_under_make_jaxpr_equal_eager():
    # jit on the numpy backend runs the eager impls: bit for bit. A compiling backend has
    # its own log/erf_inv (XLA's float32 erf_inv is a polynomial, the reference is
    # scipy's) and XLA contracts a*b + c into one FMA inside a fusion (XLA:CPU always
    # does, no flag turns it off): there float samples agree within 32 ulp (seen: 29 in
    # normal's tails over 200 keys, 1-2 in exponential/gumbel); bits, ints, keys exactly.
    for seed in (8, 1, 2):
        k = fr.PRNGKey(seed)
        for name in sorted(SAMPLERS):
            f, _ = SAMPLERS[name]
            got, want = a(traced(lambda kk: f(fr, kk))(k)), a(f(fr, k))
            where = f"{name}, key {seed}, jit on {TEST_BACKEND}"
            if TEST_BACKEND == "numpy" or got.dtype.kind != "f":
                np.testing.assert_array_equal(got, want, err_msg=where)
            else:
                assert (got.dtype, got.shape) == (want.dtype, want.shape), where
                assert _ulps(got, want).max() <= 32, f"{where}: {_ulps(got, want).max()} ulps"


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
@pytest.mark.parametrize("layout", ["partitionable", "original"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "int32", "uint32"])
def test_randint_small_and_unsigned_dtypes_match_jax(dtype, layout, request):
    # jax samples 8- and 16-bit integers as int32 (bounds clipped to the dtype) and casts
    if layout == "original":
        request.getfixturevalue("original_layout")
    k, jk = fr.PRNGKey(3), jax.random.PRNGKey(3)
    for lo, hi in [(0, 256), (0, 100), (-5, 17), (-300, 300), (250, 260), (0, 2 ** 16),
                   (-2 ** 15, 2 ** 15)]:
        got = a(fr.randint(k, (40,), lo, hi, dtype))
        want = a(jax.random.randint(jk, (40,), lo, hi, dtype))
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"[{lo}, {hi})")
    lo = np.arange(40, dtype=np.int32) - 20                        # array bounds
    np.testing.assert_array_equal(a(fr.randint(k, (40,), lo, 100, dtype)),
                                  a(jax.random.randint(jk, (40,), lo, 100, dtype)))

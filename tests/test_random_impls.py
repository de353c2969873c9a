"""fnad.random's three PRNG implementations (threefry2x32, rbg, unsafe_rbg;
fnad/_prng_impls.py) against jax's, bit for bit: keys, splits and folds, bits and the
samplers, eagerly, under jit and under vmap over keys (where rbg's bits come from the first
key of the batch, as jax's rng_bit_generator batching gives them), with typed keys and with
raw keys read by config jax_default_prng_impl.
"""
import contextlib

import numpy as np
import pytest
from checks import raises_with, traced, x64_everywhere

import fnad
import fnad.numpy as fnp
from fnad import random as fr
from fnad.config import config

jax = pytest.importorskip("jax", reason="jax is the oracle for the PRNG implementations")
jr = jax.random

IMPLS = ["threefry2x32", "rbg", "unsafe_rbg"]
TAGS = {"threefry2x32": "key<fry>", "rbg": "key<rbg>", "unsafe_rbg": "key<urbg>"}
a = np.asarray


def _data(k, lib):
    return a(lib.key_data(k))


def _same_keys(got, want):
    assert str(got.dtype) == str(want.dtype) and got.shape == want.shape
    np.testing.assert_array_equal(_data(got, fr), _data(want, jr))


@contextlib.contextmanager
def default_impl(name):
    """config jax_default_prng_impl = name in fnad and jax for a block."""
    old = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", name)
    try:
        with config.override(jax_default_prng_impl=name):
            yield
    finally:
        jax.config.update("jax_default_prng_impl", old)


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_split_and_fold_in_match_jax(impl):
    for seed in (0, 42, -7):
        k, jk = fr.key(seed, impl=impl), jr.key(seed, impl=impl)
        _same_keys(k, jk)
        np.testing.assert_array_equal(a(fr.PRNGKey(seed, impl=impl)),
                                      a(jr.PRNGKey(seed, impl=impl)))
    assert str(k.dtype) == TAGS[impl] and fr.key_impl(k) == jr.key_impl(jk) == impl
    assert repr(k).startswith(f"Array((), dtype={TAGS[impl]}) overlaying")
    assert fr.key_dtype(impl) == k.dtype and str(fr.key_dtype(impl)) == str(jr.key_dtype(impl))
    assert k.dtype.itemsize == jr.key_dtype(impl).itemsize
    for partitionable in (True, False):
        with fnad.threefry_partitionable(partitionable), \
                jax.threefry_partitionable(partitionable):
            for num in (3, (2, 3)):
                _same_keys(fr.split(k, num), jr.split(jk, num))
            for data in (0, 7, 2 ** 32 - 1):
                _same_keys(fr.fold_in(k, data), jr.fold_in(jk, data))
    ks = fr.split(k, 4)                                   # wrap_key_data / key_data round trip
    back = fr.wrap_key_data(fr.key_data(ks), impl=impl)
    _same_keys(back, jr.wrap_key_data(_data(ks, fr), impl=impl))
    _same_keys(fr.wrap_key_data(a(fr.key_data(ks)), dtype=k.dtype), jr.split(jk, 4))
    # layout functions keep the implementation
    _same_keys(fnp.concatenate([ks[:1], ks[2:]]), jnp_concat(jr.split(jk, 4)))
    _same_keys(fnp.reshape(ks, (2, 2)), jr.split(jk, 4).reshape(2, 2))


def jnp_concat(jks):
    return jax.numpy.concatenate([jks[:1], jks[2:]])


@pytest.mark.parametrize("impl", IMPLS)
def test_bits_and_samplers_match_jax(impl):
    k, jk = fr.key(11, impl=impl), jr.key(11, impl=impl)
    for dtype, shape in ((np.uint32, (5, 3)), (np.uint8, (7,)), (np.uint16, ()),
                         (np.uint32, (0, 2))):
        np.testing.assert_array_equal(a(fr.bits(k, shape, dtype)), a(jr.bits(jk, shape, dtype)))
    with x64_everywhere():
        np.testing.assert_array_equal(a(fr.bits(k, (3,), np.uint64)),
                                      a(jr.bits(jk, (3,), np.uint64)))
        np.testing.assert_array_equal(a(fr.uniform(k, (3,), np.float64)),
                                      a(jr.uniform(jk, (3,), np.float64)))
    exact = [lambda r, k: r.uniform(k, (4, 3)),
             lambda r, k: r.randint(k, (6,), -5, 100),
             lambda r, k: r.bernoulli(k, 0.3, (8,)),
             lambda r, k: r.permutation(k, 12),
             lambda r, k: r.choice(k, 9, (4,), replace=False),
             lambda r, k: r.categorical(k, np.log(np.array([0.2, 0.5, 0.3], np.float32)),
                                        shape=(6,))]
    for f in exact:
        np.testing.assert_array_equal(a(f(fr, k)), a(f(jr, jk)))
    close = [lambda r, k: r.normal(k, (5,)),
             lambda r, k: r.exponential(k, (5,)),
             lambda r, k: r.truncated_normal(k, -1.0, 2.0, (5,)),
             lambda r, k: r.gamma(k, np.array([0.3, 1.0, 4.0], np.float32))]
    for f in close:                             # fnad's erf_inv / log: a few ulp from XLA's
        np.testing.assert_allclose(a(f(fr, k)), a(f(jr, jk)), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_jit_and_vmap_over_keys_match_jax(impl):
    k, jk = fr.key(3, impl=impl), jr.key(3, impl=impl)
    ks, jks = fr.split(k, 3), jr.split(jk, 3)
    np.testing.assert_array_equal(a(traced(lambda k: fr.uniform(k, (4,)))(k)),
                                  a(jr.uniform(jk, (4,))))
    _same_keys(traced(lambda k: fr.split(fr.fold_in(k, 5)))(k), jr.split(jr.fold_in(jk, 5)))
    # rbg: every member's bits from ks[0], with the batch axis added (jax's batching)
    for f in (lambda r, k: r.bits(k, (2,)),
              lambda r, k: r.uniform(k, (2, 2)),
              lambda r, k: r.key_data(r.split(k, 2)),
              lambda r, k: r.randint(k, (3,), 0, 50)):
        np.testing.assert_array_equal(a(fnad.vmap(lambda k: f(fr, k))(ks)),
                                      a(jax.vmap(lambda k: f(jr, k))(jks)))
    np.testing.assert_array_equal(                            # data batched, key not
        a(fnad.vmap(lambda d: fr.key_data(fr.fold_in(k, d)))(fnp.arange(3))),
        a(jax.vmap(lambda d: jr.key_data(jr.fold_in(jk, d)))(jax.numpy.arange(3))))
    kss, jkss = fr.split(k, (2, 3)), jr.split(jk, (2, 3))     # nested, and under jit
    np.testing.assert_array_equal(
        a(traced(fnad.vmap(fnad.vmap(lambda k: fr.bits(k, (2,)))))(kss)),
        a(jax.vmap(jax.vmap(lambda k: jr.bits(k, (2,))))(jkss)))
    if impl != "threefry2x32":               # jax: a loop over rbg keys (threefry: a vmap,
        alphas = np.array([0.5, 3.0], np.float32)            # tested in test_random_dists.py)
        np.testing.assert_allclose(a(fnad.vmap(lambda k: fr.gamma(k, alphas))(ks)),
                                   a(jax.vmap(lambda k: jr.gamma(k, alphas))(jks)), rtol=2e-5)
    grad = fnad.vmap(fnad.grad(lambda m, k: fr.uniform(k, (3,), minval=m).sum()), (None, 0))
    jgrad = jax.vmap(jax.grad(lambda m, k: jr.uniform(k, (3,), minval=m).sum()), (None, 0))
    np.testing.assert_allclose(a(grad(0.5, ks)), a(jgrad(0.5, jks)), rtol=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_raw_keys_follow_the_default_impl(impl):
    with default_impl(impl):
        k, jk = fr.PRNGKey(9), jr.PRNGKey(9)
        np.testing.assert_array_equal(a(k), a(jk))
        assert k.shape == ((2,) if impl == "threefry2x32" else (4,))
        assert fr.key_impl(k) == jr.key_impl(jk) == impl and str(fr.key_dtype()) == TAGS[impl]
        assert str(fr.key(0).dtype) == TAGS[impl]
        np.testing.assert_array_equal(a(fr.split(k, 3)), a(jr.split(jk, 3)))
        np.testing.assert_array_equal(a(fr.fold_in(k, 4)), a(jr.fold_in(jk, 4)))
        np.testing.assert_array_equal(a(fr.uniform(k, (5,))), a(jr.uniform(jk, (5,))))
        np.testing.assert_array_equal(a(traced(lambda k: fr.randint(k, (4,), 0, 9))(k)),
                                      a(jr.randint(jk, (4,), 0, 9)))
        np.testing.assert_array_equal(a(fr.key_data(fr.wrap_key_data(k))), a(k))
        other = np.zeros((4,) if impl == "threefry2x32" else (2,), np.uint32)
        raises_with(lambda: fr.uniform(other, (2,)), impl, f"shape {k.shape}",
                    f"got shape {other.shape}", exc=TypeError)
        raises_with(lambda: fr.key_data(other), impl, exc=TypeError)
        raises_with(lambda: fr.wrap_key_data(other), f"end with {k.shape}", impl,
                    exc=TypeError)


@pytest.mark.parametrize("bad, exc, words", [
    (lambda: fr.key(0, impl="philox4x32"), ValueError,
     ['unrecognized PRNG implementation "philox4x32"', '"rbg"', '"unsafe_rbg"']),
    (lambda: fr.PRNGKey(0, impl="fry"), ValueError, ["PRNGKey", '"fry"']),
    (lambda: fr.wrap_key_data(np.zeros(4, np.uint32), impl="rbgx"), ValueError, ['"rbgx"']),
    (lambda: fr.key_dtype("threefry"), ValueError, ['"threefry"', '"threefry2x32"']),
    (lambda: fr.key(0, impl=3), TypeError, ["unrecognized type int"]),
    (lambda: fr.key(0, impl="rbg", dtype="rbg"), ValueError, ["both `impl` and `dtype`"]),
    (lambda: fr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg"), TypeError,
     ["end with (4,)", "rbg", "shape=(2,)"]),
    (lambda: fr.wrap_key_data(np.zeros((3, 4), np.uint32), impl="threefry2x32"), TypeError,
     ["end with (2,)", "threefry2x32"]),
    (lambda: fnp.concatenate([fr.split(fr.key(0, impl="rbg")), fr.split(fr.key(0))]),
     TypeError, ["key<rbg>", "key<fry>"]),
    (lambda: fr.poisson(fr.key(0, impl="unsafe_rbg"), 3.0), NotImplementedError,
     ["threefry2x32", "unsafe_rbg"]),
    (lambda: fr.threefry_2x32(fr.key(0, impl="rbg"), np.arange(2, dtype=np.uint32)),
     TypeError, ["threefry2x32 key", "key<rbg>"]),
    (lambda: config.update("jax_default_prng_impl", "philox4x32"), ValueError,
     ["jax_default_prng_impl", "unsafe_rbg"]),
])
def test_bad_impls_and_keys_are_refused(bad, exc, words):
    raises_with(bad, *words, exc=exc)
    assert config.jax_default_prng_impl == "threefry2x32"

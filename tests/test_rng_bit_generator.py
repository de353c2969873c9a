"""lax.rng_bit_generator against jax.lax.rng_bit_generator (bit for bit on CPU): both
algorithms, every unsigned dtype, odd, empty and scalar shapes, counters that carry, under
jit and vmap."""
import numpy as np
import pytest

import fnad
from fnad import lax

jax = pytest.importorskip("jax", reason="jax is the oracle for rng_bit_generator's bits")

KEYS = [[1, 2, 3, 4], [0xDEADBEEF, 7, 0xFFFFFFFF, 0xFFFFFFFF], [0, 0, 0xFFFFFFFE, 5]]
SHAPES = [(2, 3), (), (5,), (4, 1, 3), (3, 5), (0,), (2, 0, 3), (7, 3, 5)]


def check(key, shape, dtype, algorithm):
    k = np.array(key, np.uint32)
    jk, jb = jax.lax.rng_bit_generator(jax.numpy.asarray(k), shape, dtype=dtype,
                                       algorithm=jax.lax.RandomAlgorithm(algorithm))
    fk, fb = lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=algorithm)
    np.testing.assert_array_equal(np.asarray(fk), np.asarray(jk))
    assert (np.asarray(fb).dtype, np.asarray(fb).shape) == (np.asarray(jb).dtype,
                                                            np.asarray(jb).shape)
    np.testing.assert_array_equal(np.asarray(fb), np.asarray(jb))


@pytest.mark.parametrize("algorithm", list(lax.RandomAlgorithm))
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_bits_as_jax(algorithm, dtype):
    assert int(algorithm) == int(jax.lax.RandomAlgorithm[algorithm.name])
    for key in KEYS:
        for shape in SHAPES:
            check(key, shape, dtype, algorithm)


@pytest.mark.parametrize("algorithm", list(lax.RandomAlgorithm))
def test_uint64_bits(algorithm):
    with fnad.config.override(jax_enable_x64=True), jax.enable_x64(True):
        for key in KEYS:
            for shape in [(2, 3), (), (5,), (0, 2)]:
                check(key, shape, np.uint64, algorithm)


@pytest.mark.parametrize("algorithm", [1, 2])
def test_jit_vmap_and_chained_keys(algorithm):
    keys = np.array(KEYS, np.uint32)

    def draw(lib, key):
        key, a = lib.lax.rng_bit_generator(key, (3, 2), algorithm=lib.lax.RandomAlgorithm(
            algorithm))
        key, b = lib.lax.rng_bit_generator(key, (5,), algorithm=lib.lax.RandomAlgorithm(
            algorithm))
        return key, a, b
    want = [draw(jax, jax.numpy.asarray(k)) for k in keys]
    got = fnad.vmap(lambda k: draw(fnad, k))(keys)                    # each key its stream
    for i, w in enumerate(want):
        for g, v in zip(got, w, strict=True):
            np.testing.assert_array_equal(np.asarray(g)[i], np.asarray(v))
    for g, v in zip(fnad.jit(lambda k: draw(fnad, k))(keys[1]), want[1], strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(v))


def test_errors():
    key = np.array(KEYS[0], np.uint32)
    with pytest.raises(TypeError, match=r"shape \(4,\)"):
        lax.rng_bit_generator(key[:2], (2,))
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        lax.rng_bit_generator(key, (2,), dtype=np.int32)
    with pytest.raises(ValueError, match="unknown algorithm 7"):
        lax.rng_bit_generator(key, (2,), algorithm=7)
    with pytest.raises(ValueError, match="negative dimension"):
        lax.rng_bit_generator(key, (2, -1))

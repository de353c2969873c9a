"""`lax.rng_bit_generator` and `lax.RandomAlgorithm`: XLA's stateless RngBitGenerator, bit
for bit as jax computes it on CPU.

    new_key, bits = rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RNG_DEFAULT)

`key` is a uint32[4] state (w0, w1, w2, w3). Both algorithms read (w0, w1) as their 64-bit
cipher key and (w2, w3) as a 64-bit counter, and return the key with that counter advanced
by the number of blocks used (w0, w1 unchanged):

    RNG_PHILOX (and RNG_DEFAULT)  Philox4x32-10 on 128-bit counters: block j hashes the
                       counter (w2 | w3 << 32) + j, with (w0 | w1 << 32) as its upper 64 bits
                       (a carry out of the low half goes there). Each block gives four
                       uint32 words, laid out in order; uint64 takes two words per element.
    RNG_THREE_FRY      threefry2x32 (fnad.random's hash) on 64-bit counters. uint32 output:
                       the shape is split in two along its first even dim (else its largest),
                       element i of the half shape hashes counter (w2 | w3 << 32) + i, and the
                       two output words fill the two halves (interleaved along the split
                       dim). uint64: one counter per element, the words joined (x0 | x1 << 32).

uint8 and uint16 take the low bits of the uint32 generation, as XLA does. Everything is
composed from uint32 lax operations (64-bit words as pairs), so it runs on every backend
and under jit and vmap (over keys: each key its own stream).
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from fnad import dtypes
from fnad import lax

__all__ = ["RandomAlgorithm", "rng_bit_generator"]

_U32 = np.dtype(np.uint32)


class RandomAlgorithm(enum.IntEnum):
    """The bit generator of rng_bit_generator (XLA's RandomAlgorithm, same values)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def _const(v):
    return np.uint32(v)


def _add_carry(a, b):
    """(a + b mod 2^32, carry) for uint32 arrays: the carry is 1 where the sum wrapped."""
    s = lax.add(a, b)
    return s, lax.convert_element_type(lax.lt(s, b), _U32)


def _mul_hi_lo(x, k: int):
    """(high, low) 32-bit words of x * k (x uint32, k a 32-bit constant), in uint32 lanes:
    16-bit limbs, so no 64-bit type is needed."""
    mask = _const(0xFFFF)
    xl, xh = lax.bitwise_and(x, mask), lax.shift_right_logical(x, _const(16))
    kl, kh = _const(k & 0xFFFF), _const(k >> 16)
    p0, p1, p2, p3 = lax.mul(xl, kl), lax.mul(xh, kl), lax.mul(xl, kh), lax.mul(xh, kh)
    mid = lax.add(lax.add(lax.shift_right_logical(p0, _const(16)), lax.bitwise_and(p1, mask)),
                 lax.bitwise_and(p2, mask))
    high = lax.add(lax.add(lax.add(p3, lax.shift_right_logical(p1, _const(16))),
                         lax.shift_right_logical(p2, _const(16))),
                  lax.shift_right_logical(mid, _const(16)))
    return high, lax.mul(x, _const(k))


def _philox4x32(x: list, k0, k1) -> list:
    """Ten Philox4x32 rounds on counter words x[0..3] with key words k0, k1."""
    for _ in range(10):
        h0, l0 = _mul_hi_lo(x[0], 0xD2511F53)
        h1, l1 = _mul_hi_lo(x[2], 0xCD9E8D57)
        x = [lax.bitwise_xor(lax.bitwise_xor(h1, x[1]), k0), l1,
             lax.bitwise_xor(lax.bitwise_xor(h0, x[3]), k1), l0]
        k0, k1 = lax.add(k0, _const(0x9E3779B9)), lax.add(k1, _const(0xBB67AE85))
    return x


def _advance(key, n: int):
    """The key with its counter words (w2, w3) advanced by n (mod 2^64)."""
    w = [key[i] for i in range(4)]
    lo, carry = _add_carry(w[2], _const(n & 0xFFFFFFFF))
    hi = lax.add(lax.add(w[3], _const(n >> 32)), carry)
    return lax.concatenate([lax.reshape(v, (1,)) for v in (w[0], w[1], lo, hi)], 0)


def _philox_words(key, n: int):
    """n uint32 words of Philox output (four per 128-bit counter), and the new key."""
    blocks = -(-n // 4)
    w = [key[i] for i in range(4)]
    j = lax.iota(_U32, blocks)
    c0, carry = _add_carry(lax.broadcast_in_dim(w[2], (blocks,), ()), j)
    c1, carry = _add_carry(lax.broadcast_in_dim(w[3], (blocks,), ()), carry)
    c2, carry = _add_carry(lax.broadcast_in_dim(w[0], (blocks,), ()), carry)
    c3 = lax.add(lax.broadcast_in_dim(w[1], (blocks,), ()), carry)
    out = _philox4x32([c0, c1, c2, c3], w[0], w[1])
    words = lax.reshape(lax.concatenate([lax.reshape(o, (blocks, 1)) for o in out], 1),
                       (4 * blocks,))
    return lax.slice(words, (0,), (n,)), _advance(key, blocks)


def _counters64(key, count: int):
    """Low and high uint32 words of the 64-bit counters (w2 | w3 << 32) + i, i < count."""
    i = lax.iota(_U32, count)
    lo, carry = _add_carry(lax.broadcast_in_dim(key[2], (count,), ()), i)
    hi = lax.add(lax.broadcast_in_dim(key[3], (count,), ()), carry)
    return lo, hi


def _join64(lo, hi):
    u64 = np.dtype(np.uint64)
    return lax.bitwise_or(lax.convert_element_type(lo, u64),
                         lax.shift_left(lax.convert_element_type(hi, u64), np.uint64(32)))


def _threefry_bits32(key, shape: tuple):
    from fnad.random import threefry2x32
    if not shape:
        lo, hi = _counters64(key, 1)
        x0, _ = threefry2x32(key[0], key[1], lo, hi)
        return lax.reshape(x0, ()), _advance(key, 1)
    even = [d for d, n in enumerate(shape) if n % 2 == 0]
    split = even[0] if even else max(range(len(shape)), key=lambda d: (shape[d], -d))
    half = (*shape[:split], -(-shape[split] // 2), 1, *shape[split + 1:])
    count = math.prod(half)
    lo, hi = _counters64(key, count)
    x0, x1 = threefry2x32(key[0], key[1], lo, hi)
    both = lax.concatenate([lax.reshape(x0, half), lax.reshape(x1, half)], split + 1)
    full = (*shape[:split], 2 * half[split], *shape[split + 1:])
    out = lax.reshape(both, full)
    if full[split] != shape[split]:
        out = lax.slice(out, (0,) * len(shape), shape)
    return out, _advance(key, count)


def _threefry_bits64(key, shape: tuple):
    from fnad.random import threefry2x32
    count = math.prod(shape)
    lo, hi = _counters64(key, count)
    x0, x1 = threefry2x32(key[0], key[1], lo, hi)
    return lax.reshape(_join64(x0, x1), shape), _advance(key, count)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """(new_key, bits): `shape` random bits of unsigned `dtype` from the uint32[4] state
    `key`, as jax.lax.rng_bit_generator (see the module doc for the algorithms)."""
    from fnad import numpy as jnp
    del out_sharding
    key = jnp.asarray(key)
    if key.shape != (4,) or key.dtype != _U32:
        raise TypeError("rng_bit_generator: key must be a uint32 array of shape (4,), got "
                        f"{key.dtype}{list(key.shape)}")
    try:
        shape = (operator.index(shape),) if np.ndim(shape) == 0 else \
            tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"rng_bit_generator: shape must be a tuple of ints, got {shape!r}") \
            from None
    if any(d < 0 for d in shape):
        raise ValueError(f"rng_bit_generator: negative dimension in shape {shape}")
    dtype = np.dtype(dtypes.canonicalize_dtype(dtype))
    if dtype.kind != "u":
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype.name} (expected uint8, "
                        "uint16, uint32 or uint64)")
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"rng_bit_generator: unknown algorithm {algorithm!r}; use "
                         "lax.RandomAlgorithm") from None
    n = math.prod(shape)
    if algorithm == RandomAlgorithm.RNG_THREE_FRY:
        if dtype.itemsize == 8:
            bits, new_key = _threefry_bits64(key, shape)
            return new_key, bits
        bits, new_key = _threefry_bits32(key, shape)
    elif dtype.itemsize == 8:
        words, new_key = _philox_words(key, 2 * n)
        pairs = lax.reshape(words, (n, 2))
        bits = lax.reshape(_join64(pairs[:, 0], pairs[:, 1]), shape)
        return new_key, bits
    else:
        words, new_key = _philox_words(key, n)
        bits = lax.reshape(words, shape)
    if dtype.itemsize < 4:
        bits = lax.convert_element_type(bits, dtype)           # the low bits, as XLA
    return new_key, bits

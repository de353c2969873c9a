"""The PRNG implementations behind fnad.random: threefry2x32 (the default), rbg and
unsafe_rbg, jax's three, each a `PRNGImpl` row of `PRNG_IMPLS` (name -> key shape, seed,
split, fold_in, random_bits) whose functions act on the raw uint32 words of one key.
fnad.random's samplers draw through the row of their key's implementation.

Imports fnad.lax, fnad.lax_rng, fnad.numpy, fnad.dtypes and fnad.config (fnad.random and
fnad.prng import this module; fnad.custom_batching is imported inside the call).

    threefry2x32  key uint32[2]. seed: the seed's 64 bits as [hi, lo]. The threefry2x32
                  hash of counters (the flat index as hi/lo words, the two outputs xor-ed,
                  under jax_threefry_partitionable=True; or jax's original layout):
                      ks2 = k0 ^ k1 ^ 0x1BD11BDA; x += (k0, k1); 5 times: 4 rounds of
                      (x0 += x1; x1 = rotl(x1, r) ^ x0), rotations (13,15,26,6) /
                      (17,29,16,24) alternating, then x += (ks[i+1 % 3], ks[i+2 % 3] + i + 1)
                  split: the hash of the keys' indices; fold_in: the hash of [0, data].
    rbg           key uint32[4] = two threefry half keys [h0, h1]. seed: [s, s] (s the
                  threefry seed); split and fold_in: threefry's on each half; random_bits:
                  lax.rng_bit_generator(key, shape) (Philox on CPU).
    unsafe_rbg    key, seed and random_bits as rbg. split(key, n): every 10th row of
                  rng_bit_generator(key, (10 n, 4)); fold_in(key, d): key ^ the last row of
                  rng_bit_generator(rbg_seed(d), (10, 4)).

Under vmap, rng_bit_generator's bits come as jax makes them: from the *first* key of the
batch, with the batch axis added to the requested shape (jax's batching rule of
rng_bit_generator, which rbg's and unsafe_rbg's bits, and unsafe_rbg's split and fold_in,
go through). So a vmap over rbg keys gives what jax gives, not one stream per key.
"""
from __future__ import annotations

import math
from typing import NamedTuple
from collections.abc import Callable

import numpy as np

from fnad import lax
from fnad import numpy as jnp
from fnad.config import config
from fnad.dtypes import KEY_DTYPES, KeyDType
from fnad.lax_rng import rng_bit_generator

__all__ = ["PRNG_IMPLS", "PRNGImpl", "default_impl", "resolve_impl", "threefry2x32",
           "threefry_2x32"]

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


class PRNGImpl(NamedTuple):
    """One PRNG implementation: functions of one key's raw words uint32[*key_shape].

    seed(s)                     s: the threefry seed words uint32[2] of an integer seed
    split(key, shape)           -> uint32[*shape, *key_shape]
    fold_in(key, data)          data: a uint32 scalar -> uint32[*key_shape]
    random_bits(key, bit_width, shape) -> unsigned ints of bit_width bits, of `shape`
    """
    name: str
    key_shape: tuple[int, ...]
    seed: Callable
    split: Callable
    fold_in: Callable
    random_bits: Callable

    @property
    def dtype(self) -> KeyDType:
        return KEY_DTYPES[self.name]


# ---- threefry2x32 ----------------------------------------------------------------------------
def _rotl(x, d: int):
    return lax.bitwise_or(lax.shift_left(x, d), lax.shift_right_logical(x, 32 - d))


def threefry2x32(k0, k1, x0, x1):
    """The threefry2x32 block cipher: uint32 key words k0, k1 (scalars) on counter
    words x0, x1 (equal shapes) -> two uint32 arrays of that shape (20 rounds)."""
    for v in (k0, k1, x0, x1):
        if jnp.asarray(v).dtype != _U32:
            raise TypeError("threefry2x32 requires uint32 arguments, got "
                            + ", ".join(str(jnp.asarray(a).dtype) for a in (k0, k1, x0, x1)))
    ks = [k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), 0x1BD11BDA)]
    x = [lax.add(x0, ks[0]), lax.add(x1, ks[1])]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x[0] = lax.add(x[0], x[1])
            x[1] = lax.bitwise_xor(x[0], _rotl(x[1], r))
        x[0] = lax.add(x[0], ks[(i + 1) % 3])
        x[1] = lax.add(lax.add(x[1], ks[(i + 2) % 3]), i + 1)
    return x[0], x[1]


def _words(key):
    """The two words of one threefry key uint32[2], as scalars."""
    return lax.reshape(key[0:1], ()), lax.reshape(key[1:2], ())


def threefry_2x32(key, count):
    """jax's `threefry_2x32`: hash uint32 `count` (any shape) with the raw threefry key
    uint32[2] by halves -> same shape."""
    k0, k1 = _words(key)
    count = jnp.asarray(count)
    n = count.size
    flat = lax.reshape(count, (n,))                                   # [n]
    if n % 2:
        flat = lax.concatenate([flat, jnp.zeros((1,), _U32)], 0)       # [n + 1]
    h = flat.shape[0] // 2
    y0, y1 = threefry2x32(k0, k1, flat[:h], flat[h:])
    out = lax.concatenate([y0, y1], 0)                               # [2h]
    return lax.reshape(out[:n], count.shape)


def _iota_2x32(shape):
    """The row-major flat index over `shape` as uint64, split into (hi, lo) uint32."""
    n = math.prod(shape)
    if n > 2 ** 32:
        raise NotImplementedError("fnad.random: more than 2**32 random values at once")
    lo = lax.reshape(lax.iota(np.uint32, n), shape) if n else jnp.zeros(shape, _U32)
    return jnp.zeros(shape, _U32), lo


def _threefry_seed(s):
    return s


def _threefry_split(key, shape: tuple[int, ...]):
    if config.jax_threefry_partitionable:
        k0, k1 = _words(key)
        c_hi, c_lo = _iota_2x32(shape)
        b0, b1 = threefry2x32(k0, k1, c_hi, c_lo)
        return jnp.stack([b0, b1], axis=len(shape))                 # [*shape, 2]
    n = math.prod(shape)
    return lax.reshape(threefry_2x32(key, lax.iota(np.uint32, 2 * n)), (*shape, 2))


def _threefry_fold_in(key, data):
    return threefry_2x32(key, jnp.stack([jnp.zeros((), _U32), data]))  # seed words of data


def _threefry_random_bits(key, bit_width: int, shape: tuple[int, ...]):
    dtype = _UINT[bit_width]
    if config.jax_threefry_partitionable:
        k0, k1 = _words(key)
        c_hi, c_lo = _iota_2x32(shape)
        b0, b1 = threefry2x32(k0, k1, c_hi, c_lo)
        if bit_width == 64:
            hi = lax.convert_element_type(b0, dtype)
            return lax.bitwise_or(lax.shift_left(hi, 32), lax.convert_element_type(b1, dtype))
        out = lax.bitwise_xor(b0, b1)
        return out if bit_width == 32 else lax.convert_element_type(out, dtype)
    size = math.prod(shape)
    max_count = -(-bit_width * size // 32)
    if max_count >= 2 ** 32 - 1:
        raise NotImplementedError("fnad.random: more than 2**32 random words at once")
    words = threefry_2x32(key, lax.iota(np.uint32, max_count))        # [max_count]
    if bit_width == 64:
        hi, lo = (lax.convert_element_type(w, dtype)
                  for w in (words[:max_count // 2], words[max_count // 2:]))
        return lax.reshape(lax.bitwise_or(lax.shift_left(hi, 32), lo), shape)
    if bit_width in (8, 16):                                          # words.view(dtype)
        per = 32 // bit_width
        shifts = lax.mul(lax.iota(np.uint32, per), bit_width)         # [per]
        parts = lax.shift_right_logical(
            lax.broadcast_in_dim(words, (max_count, per), (0,)),
            lax.broadcast_in_dim(shifts, (max_count, per), (1,)))     # [max_count, per]
        parts = lax.bitwise_and(parts, (1 << bit_width) - 1)
        flat = lax.reshape(parts, (max_count * per,))
        return lax.reshape(lax.convert_element_type(flat, dtype)[:size], shape)
    return lax.reshape(words, shape)


# ---- rbg and unsafe_rbg ----------------------------------------------------------------------
def _rng_bits(key, shape: tuple[int, ...], dtype):
    """rng_bit_generator(key, shape, dtype)'s bits, batched as jax batches them: under vmap
    over keys, the bits of the first key with the batch axis in front of `shape`."""
    from fnad.custom_batching import custom_vmap                    # it imports fnad.random

    @custom_vmap
    def bits(k):
        return rng_bit_generator(k, shape, dtype)[1]

    @bits.def_vmap
    def bits_vmap(axis_size, in_batched, keys):
        if not in_batched[0]:
            return bits(keys), False
        return _rng_bits(keys[0], (axis_size, *shape), dtype), True  # [B, *shape]
    return bits(key)


def _rbg_seed(s):
    return lax.concatenate([s, s], 0)                               # [4]


def _rbg_split(key, shape: tuple[int, ...]):
    halves = [_threefry_split(key[i:i + 2], shape) for i in (0, 2)]  # 2 x [*shape, 2]
    return lax.concatenate(halves, len(shape))                      # [*shape, 4]


def _rbg_fold_in(key, data):
    return lax.concatenate([_threefry_fold_in(key[i:i + 2], data) for i in (0, 2)], 0)


def _rbg_random_bits(key, bit_width: int, shape: tuple[int, ...]):
    return _rng_bits(key, shape, _UINT[bit_width])


def _unsafe_rbg_split(key, shape: tuple[int, ...]):
    n = math.prod(shape)
    rows = _rng_bits(key, (10 * n, 4), _U32)                        # [10 n, 4]: 10 per key
    return lax.reshape(lax.slice(rows, (0, 0), (10 * n, 4), (10, 1)), (*shape, 4))


def _unsafe_rbg_fold_in(key, data):
    seed = _rbg_seed(jnp.stack([jnp.zeros((), _U32), data]))
    rows = _rng_bits(seed, (10, 4), _U32)                           # [10, 4]
    return lax.bitwise_xor(key, lax.reshape(rows[9:10], (4,)))


# ---- the table -------------------------------------------------------------------------------
PRNG_IMPLS: dict[str, PRNGImpl] = {
    "threefry2x32": PRNGImpl("threefry2x32", (2,), _threefry_seed, _threefry_split,
                             _threefry_fold_in, _threefry_random_bits),
    "rbg": PRNGImpl("rbg", (4,), _rbg_seed, _rbg_split, _rbg_fold_in, _rbg_random_bits),
    "unsafe_rbg": PRNGImpl("unsafe_rbg", (4,), _rbg_seed, _unsafe_rbg_split,
                           _unsafe_rbg_fold_in, _rbg_random_bits),
}


def default_impl() -> PRNGImpl:
    """The implementation named by config `jax_default_prng_impl` (raw keys are its)."""
    return PRNG_IMPLS[config.jax_default_prng_impl]


def resolve_impl(spec, where: str = "fnad.random") -> PRNGImpl:
    """The implementation `spec` names: None (the default), a name, a key dtype or a
    PRNGImpl. An unknown name is a ValueError listing the names, as in jax."""
    if spec is None:
        return default_impl()
    if isinstance(spec, PRNGImpl):
        return spec
    if isinstance(spec, KeyDType):
        return PRNG_IMPLS[spec.impl]
    if isinstance(spec, str):
        if spec in PRNG_IMPLS:
            return PRNG_IMPLS[spec]
        names = ", ".join(f'"{n}"' for n in PRNG_IMPLS)
        raise ValueError(f'{where}: unrecognized PRNG implementation "{spec}". Did you mean '
                         f'one of: {names}?')
    raise TypeError(f"{where}: unrecognized type {type(spec).__name__} for specifying a PRNG "
                    f"implementation (a name such as 'rbg', or a key dtype)")

"""NumPy implementations of nextafter, clz, mulhi, bitcast_convert_type and reduce_precision
(primitives/bits.py), exact to the bit as XLA's. Imported by backends/numpy_ref/elementwise.py.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.elementwise import quietly
from fnad.primitives import bits as bt


def _unsigned(dt) -> np.dtype:
    return np.dtype(f"u{np.dtype(dt).itemsize}")


def _clz(x):
    """Leading zeros of the bit pattern: a binary search by shifts (exact for every width)."""
    x = np.asarray(x)
    nbits = 8 * x.dtype.itemsize
    u = x.view(_unsigned(x.dtype)).astype(np.uint64)
    count = np.full(x.shape, nbits, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        if s >= nbits:
            continue
        high = u >> np.uint64(s)
        found = high != 0
        count = np.where(found, count - s, count)
        u = np.where(found, high, u)
    return (count - (u != 0)).astype(x.dtype)


def _mulhi(x, y):
    """(x·y) >> nbits in 2·nbits bits: in int64/uint64 for <= 32 bits; from 32-bit limbs for
    64 bits (then the signed correction hi(x·y) = hi_u(x·y) - [x<0]·y - [y<0]·x mod 2^64)."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    dt = np.result_type(x, y)
    nbits = 8 * dt.itemsize
    if nbits <= 32:
        wide = np.int64 if dt.kind == "i" else np.uint64
        return ((x.astype(wide) * y.astype(wide)) >> wide(nbits)).astype(dt)
    u64, lo32, s32 = np.uint64, np.uint64(0xFFFFFFFF), np.uint64(32)
    ux, uy = x.view(u64), y.view(u64)
    x0, x1, y0, y1 = ux & lo32, ux >> s32, uy & lo32, uy >> s32
    w0 = x0 * y0
    t = x1 * y0 + (w0 >> s32)
    w1 = (t & lo32) + x0 * y1
    hi = x1 * y1 + (t >> s32) + (w1 >> s32)            # the unsigned high half, mod 2^64
    if dt.kind == "i":
        hi = hi - np.where(x < 0, uy, u64(0)) - np.where(y < 0, ux, u64(0))
    return hi.view(dt)


def _bitcast_convert_type(x, *, new_dtype):
    x = np.asarray(x)
    if not x.flags.c_contiguous:                       # (ascontiguousarray makes rank 0 rank 1)
        x = x.copy()
    new_dtype = np.dtype(new_dtype)
    old_size, new_size = x.dtype.itemsize, new_dtype.itemsize
    if old_size == new_size:
        return x.view(new_dtype)
    if old_size > new_size:                            # [..., old/new] little-endian parts
        return x.reshape(*x.shape, 1).view(new_dtype)
    return x.view(new_dtype).reshape(x.shape[:-1])     # [..., new/old] -> [...]


def _reduce_precision(x, *, exponent_bits, mantissa_bits):
    """XLA's ReducePrecision on the bit pattern: round the mantissa to nearest even, then
    exponents beyond the target's range give ±inf and below its smallest normal ±0; NaN
    inputs are returned as they are."""
    x = np.asarray(x)
    info = dtypes.finfo(x.dtype)                       # np.finfo knows no bfloat16
    nbits, src_mant, src_exp = 8 * x.dtype.itemsize, info.nmant, info.nexp
    ut = _unsigned(x.dtype).type
    bits = x.view(ut).copy()
    if mantissa_bits < src_mant:
        last_bit_mask = ut(1 << (src_mant - mantissa_bits))
        base_bias = ut((int(last_bit_mask) >> 1) - 1)
        last_bit = (bits & last_bit_mask) >> ut(src_mant - mantissa_bits)
        truncation_mask = ~ut(int(last_bit_mask) - 1)
        bits = (bits + last_bit + base_bias) & truncation_mask
    if exponent_bits < src_exp:
        sign_mask = ut(1 << (nbits - 1))
        exp_mask = ut(((1 << src_exp) - 1) << src_mant)
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp, min_exp = bias + reduced_bias, bias - reduced_bias
        exponent = bits & exp_mask
        overflows = exponent > ut(max_exp << src_mant)
        underflows = exponent <= ut(min_exp << src_mant)
        signed_zero = bits & sign_mask
        bits = np.where(overflows, signed_zero | exp_mask,
                        np.where(underflows, signed_zero, bits)).astype(ut)
    out = bits.view(x.dtype)
    return np.where(np.isnan(x), x, out) if mantissa_bits < src_mant or \
        exponent_bits < src_exp else out


def _nextafter(x, y):
    return np.nextafter(x, y).astype(np.result_type(x, y), copy=False)


impl_rules[bt.nextafter_p] = quietly(_nextafter)
impl_rules[bt.clz_p] = _clz
impl_rules[bt.mulhi_p] = _mulhi
impl_rules[bt.bitcast_convert_type_p] = _bitcast_convert_type
impl_rules[bt.reduce_precision_p] = _reduce_precision

"""NumPy implementations of comparison, bitwise, selection and conversion primitives."""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.elementwise import quiet_for_bfloat16, quietly
from fnad.primitives import logic as lg


def _bits(x) -> int:
    return np.result_type(x).itemsize * 8


def _shift_left(x, y):                                 # shifts past the width give 0
    bits = _bits(x)
    out = np.left_shift(x, np.clip(y, 0, bits - 1))
    return np.where((y < 0) | (y >= bits), np.zeros((), np.result_type(x)), out)


def _shift_right_arithmetic(x, y):                     # past the width: all sign bits
    dt = np.result_type(x)
    signed = np.dtype(f"i{dt.itemsize}")
    xs = np.asarray(x).view(signed)
    out = np.right_shift(xs, np.clip(y, 0, _bits(x) - 1).astype(signed))
    return np.asarray(out).view(dt)


def _shift_right_logical(x, y):                        # past the width: 0
    dt = np.result_type(x)
    unsigned = np.dtype(f"u{dt.itemsize}")
    xu = np.asarray(x).view(unsigned)
    out = np.right_shift(xu, np.clip(y, 0, _bits(x) - 1).astype(unsigned))
    out = np.where((y < 0) | (y >= _bits(x)), np.zeros((), unsigned), out)
    return np.asarray(out).view(dt)


def _select_n(which, *cases):
    if np.result_type(which) == np.bool_:
        return np.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(which, cases, mode="clip")       # out of range: the first/last (XLA's)


def _convert_element_type(x, *, new_dtype, weak_type):
    x = np.asarray(x)
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = x.real
    if new_dtype == np.bool_:
        return x != 0
    if dtypes.is_float(x.dtype) and new_dtype.kind in "iu":   # bfloat16's kind is "V"
        info = np.iinfo(new_dtype)                     # saturate, nan -> 0, as XLA
        t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
        out = np.clip(t, info.min, info.max)
        res = out.astype(new_dtype)
        res = np.where(t >= float(info.max), np.array(info.max, new_dtype), res)
        return np.where(t <= float(info.min), np.array(info.min, new_dtype), res)
    try:
        return x.astype(new_dtype)
    except TypeError:         # ml_dtypes has no direct cast between some of its floats
        return x.astype(np.float32).astype(new_dtype)


impl_rules[lg.eq_p] = quiet_for_bfloat16(np.equal)
impl_rules[lg.ne_p] = quiet_for_bfloat16(np.not_equal)
impl_rules[lg.lt_p] = quiet_for_bfloat16(np.less)
impl_rules[lg.le_p] = quiet_for_bfloat16(np.less_equal)
impl_rules[lg.gt_p] = quiet_for_bfloat16(np.greater)
impl_rules[lg.ge_p] = quiet_for_bfloat16(np.greater_equal)
impl_rules[lg.is_finite_p] = np.isfinite
impl_rules[lg.and_p] = np.bitwise_and
impl_rules[lg.or_p] = np.bitwise_or
impl_rules[lg.xor_p] = np.bitwise_xor
impl_rules[lg.not_p] = np.invert
impl_rules[lg.shift_left_p] = _shift_left
impl_rules[lg.shift_right_arithmetic_p] = _shift_right_arithmetic
impl_rules[lg.shift_right_logical_p] = _shift_right_logical
def _population_count(x):                              # bits of the two's complement pattern
    dt = np.result_type(x)
    return np.bitwise_count(np.asarray(x).view(f"u{dt.itemsize}")).astype(dt)


impl_rules[lg.population_count_p] = _population_count
impl_rules[lg.select_n_p] = _select_n
impl_rules[lg.clamp_p] = lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi)
impl_rules[lg.convert_element_type_p] = quietly(_convert_element_type)
impl_rules[lg.stop_gradient_p] = lambda x: x

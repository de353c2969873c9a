"""XLA lowerings of comparison, bitwise, selection and conversion primitives.

Shift amounts follow the numpy reference, not XLA's "as unsigned" rule: a negative
amount shifts right-arithmetic by 0 (XLA: by the full width, all sign bits); left and
logical shifts by a negative amount or past the width give 0 (as XLA). float -> int
conversion saturates and maps NaN to 0 on both.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.backends.xla.elementwise import broadcast_scalars, nary
from fnad.primitives import logic as lg


def _bits(x) -> int:
    return np.dtype(x.dtype).itemsize * 8


def _out_of_range(y, bits: int):
    """y < 0 or y >= bits, elementwise."""
    too_big = lax.ge(y, lax.full_like(y, bits))
    if np.dtype(y.dtype).kind == "u":
        return too_big
    return lax.bitwise_or(lax.lt(y, lax.full_like(y, 0)), too_big)


def _shift_left(x, y):                                   # out of range: 0
    x, y = broadcast_scalars(x, y)
    return lax.select(_out_of_range(y, _bits(x)), lax.full_like(x, 0), lax.shift_left(x, y))


def _shift_right_arithmetic(x, y):                       # amount clipped to [0, bits - 1]
    x, y = broadcast_scalars(x, y)                       # (y has x's dtype: fnad's rule)
    dt = np.dtype(x.dtype)
    top = lax.full_like(y, _bits(x) - 1)
    y = lax.min(y, top) if dt.kind == "u" else lax.clamp(lax.full_like(y, 0), y, top)
    if dt.kind == "i":
        return lax.shift_right_arithmetic(x, y)
    signed = np.dtype(f"i{dt.itemsize}")                 # unsigned: shift the bit pattern
    out = lax.shift_right_arithmetic(lax.bitcast_convert_type(x, signed),
                                     lax.bitcast_convert_type(y, signed))
    return lax.bitcast_convert_type(out, dt)


def _shift_right_logical(x, y):                          # out of range: 0
    x, y = broadcast_scalars(x, y)
    return lax.select(_out_of_range(y, _bits(x)), lax.full_like(x, 0),
                      lax.shift_right_logical(x, y))


def _select_n(which, *cases):
    shape = next((c.shape for c in (which, *cases) if c.shape), ())
    cases = [lax.broadcast(c, shape) if c.shape != shape else c for c in cases]
    if len(cases) == 1:
        return cases[0]
    if np.dtype(which.dtype) != np.bool_ and np.dtype(which.dtype) != np.int32:
        which = lax.convert_element_type(which, np.int32)
    if which.shape != shape and which.shape:
        which = lax.broadcast(which, shape)
    return lax.select_n(which, *cases)


def _clamp(lo, x, hi):                                   # min(max(x, lo), hi), NaNs propagate
    lo, x, hi = broadcast_scalars(lo, x, hi)
    return lax.min(lax.max(x, lo), hi)


def _convert_element_type(x, *, new_dtype, weak_type):
    new_dtype = np.dtype(new_dtype)
    if np.dtype(x.dtype).kind == "c" and new_dtype.kind != "c":
        x = lax.real(x)
    if new_dtype == np.bool_:
        return lax.ne(x, lax.full_like(x, 0))
    return lax.convert_element_type(x, new_dtype)        # float -> int: saturating, NaN -> 0


impl_rules[lg.eq_p] = eager(nary(lax.eq))
impl_rules[lg.ne_p] = eager(nary(lax.ne))
impl_rules[lg.lt_p] = eager(nary(lax.lt))
impl_rules[lg.le_p] = eager(nary(lax.le))
impl_rules[lg.gt_p] = eager(nary(lax.gt))
impl_rules[lg.ge_p] = eager(nary(lax.ge))
impl_rules[lg.is_finite_p] = eager(lax.is_finite)
impl_rules[lg.and_p] = eager(nary(lax.bitwise_and))
impl_rules[lg.or_p] = eager(nary(lax.bitwise_or))
impl_rules[lg.xor_p] = eager(nary(lax.bitwise_xor))
impl_rules[lg.not_p] = eager(lax.bitwise_not)
impl_rules[lg.shift_left_p] = eager(_shift_left)
impl_rules[lg.shift_right_arithmetic_p] = eager(_shift_right_arithmetic)
impl_rules[lg.shift_right_logical_p] = eager(_shift_right_logical)
impl_rules[lg.population_count_p] = eager(lax.population_count)
impl_rules[lg.select_n_p] = eager(_select_n)
impl_rules[lg.clamp_p] = eager(_clamp)
impl_rules[lg.convert_element_type_p] = eager(_convert_element_type)
impl_rules[lg.stop_gradient_p] = eager(lambda x: x)

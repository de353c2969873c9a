"""NumPy implementations of the cumulative reductions (cumsum, cumprod, cummax, cummin,
cumlogsumexp); `reverse` accumulates from the end (a flipped view, scanned, flipped back).
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import cumulative as cum


def _cumulative(scan):
    def impl(x, *, axis, reverse):
        x = np.asarray(x)
        with np.errstate(invalid="ignore"):           # NaNs propagate, without warnings
            if reverse:
                return np.flip(scan(np.flip(x, axis), axis), axis)
            return scan(x, axis)
    return impl


def _logcumsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    if x.dtype.kind == "c":                            # no complex logaddexp in NumPy: shift
        if x.shape[axis] == 0:
            return x
        m = np.max(x.real, axis=axis, keepdims=True)   # by the largest real part, if finite
        m = np.where(np.isfinite(m), m, 0)
        return (np.log(np.cumsum(np.exp(x - m), axis=axis)) + m).astype(x.dtype)
    wide = x.astype(np.float32) if x.dtype.itemsize < 4 else x   # float16 / bfloat16
    return np.logaddexp.accumulate(wide, axis=axis).astype(x.dtype)


impl_rules[cum.cumsum_p] = _cumulative(lambda x, a: np.cumsum(x, axis=a, dtype=x.dtype))
impl_rules[cum.cumprod_p] = _cumulative(lambda x, a: np.cumprod(x, axis=a, dtype=x.dtype))
impl_rules[cum.cummax_p] = _cumulative(lambda x, a: np.maximum.accumulate(x, axis=a))
impl_rules[cum.cummin_p] = _cumulative(lambda x, a: np.minimum.accumulate(x, axis=a))
impl_rules[cum.cumlogsumexp_p] = _cumulative(_logcumsumexp)

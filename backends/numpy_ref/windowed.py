"""NumPy implementations of the windowed reductions (reduce_window_sum/max/min).

The operand goes into an array of the padded shape filled with the identity (0, -inf /
the dtype's minimum, +inf / the maximum), at every base_dilation-th place, shifted by the
low padding (negative padding crops); then each of the K window positions is one strided
view of it, combined into the result in row-major window order (np.add / np.maximum /
np.minimum: NaN propagates, integers wrap, the dtype is kept). float16/bfloat16 sums
accumulate in float32 and round once, as the other reductions.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from fnad import dtypes
from fnad.backends.numpy_ref import impl_rules
from fnad.primitives import windowed as win


def _padded(x: np.ndarray, fill, padding, base_dilation) -> np.ndarray:
    """x base-dilated and padded with `fill` (each dim's size P = B + lo + hi >= 0)."""
    dilated = [0 if d == 0 else (d - 1) * b + 1 for d, b in zip(x.shape, base_dilation)]
    shape = [max(n + lo + hi, 0) for n, (lo, hi) in zip(dilated, padding)]
    out = np.full(shape, fill, x.dtype)
    src, dst = [], []
    for d, b, (lo, _), size in zip(x.shape, base_dilation, padding, shape):
        first = max(0, -(lo // b))                     # first element at or after index 0
        stop = min(d, -(-(size - lo) // b))            # elements before index `size`
        if stop <= first:
            return out                                 # nothing of x survives the cropping
        start = first * b + lo
        src.append(slice(first, stop))
        dst.append(slice(start, start + (stop - first - 1) * b + 1, b))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _reduce_window(ufunc, identity):
    def impl(x, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        x = np.asarray(x)
        if ufunc is np.add and dtypes.is_float(x.dtype) and x.dtype.itemsize < 4:
            wide = impl(x.astype(np.float32), window_dimensions=window_dimensions,
                        window_strides=window_strides, padding=padding,
                        base_dilation=base_dilation, window_dilation=window_dilation)
            return wide.astype(x.dtype)
        fill = identity(x.dtype)
        out_shape = win.reduce_window_shape_tuple(x.shape, window_dimensions, window_strides,
                                                  padding, base_dilation, window_dilation)
        if math.prod(out_shape) == 0:
            return np.full(out_shape, fill, x.dtype)
        p = _padded(x, fill, padding, base_dilation)
        out = None
        with np.errstate(all="ignore"):                # NaN/inf propagate, integers wrap
            for offsets in itertools.product(*(range(w) for w in window_dimensions)):
                view = p[tuple(slice(o * wd, o * wd + (n - 1) * s + 1, s)
                               for o, wd, n, s in zip(offsets, window_dilation, out_shape,
                                                      window_strides))]
                out = view.copy() if out is None else ufunc(out, view, out=out)
        return out
    return impl


impl_rules[win.reduce_window_sum_p] = _reduce_window(np.add, lambda dt: np.zeros((), dt))
impl_rules[win.reduce_window_max_p] = _reduce_window(np.maximum, win.max_identity)
impl_rules[win.reduce_window_min_p] = _reduce_window(np.minimum, win.min_identity)

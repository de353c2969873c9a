"""XLA lowerings of the windowed reductions: jax.lax.reduce_window with lax.add / max / min
and the identity as init value (jax's own reduce_window_sum/max/min primitives).

Negative padding is applied first, as a lax.pad with the identity (which also does the
base dilation): XLA's CPU simplifier miscompiles (aborts the process on) a window of ones
whose negative padding shrinks the operand. Programs with an empty output are constants.
float16/bfloat16 sums accumulate in float32, as the numpy reference.
"""
from __future__ import annotations

import math

import numpy as np
from jax import lax

from fnad import dtypes
from fnad.backends.xla import eager, impl_rules
from fnad.primitives import windowed as win


def _reduce_window(op, identity):
    def lowering(x, *, window_dimensions, window_strides, padding, base_dilation,
                 window_dilation):
        dt = np.dtype(x.dtype)
        if op is lax.add and dtypes.is_float(dt) and dt.itemsize < 4:
            wide = lowering(lax.convert_element_type(x, np.float32),
                            window_dimensions=window_dimensions, window_strides=window_strides,
                            padding=padding, base_dilation=base_dilation,
                            window_dilation=window_dilation)
            return lax.convert_element_type(wide, dt)
        init = identity(dt)
        out_shape = win.reduce_window_shape_tuple(x.shape, window_dimensions, window_strides,
                                                  padding, base_dilation, window_dilation)
        if math.prod(out_shape) == 0:
            return lax.full(out_shape, init, dt)
        if any(lo < 0 or hi < 0 for lo, hi in padding):
            config = [(min(lo, 0), min(hi, 0), b - 1) for (lo, hi), b in zip(padding,
                                                                              base_dilation)]
            dilated = [0 if d == 0 else (d - 1) * b + 1 for d, b in zip(x.shape, base_dilation)]
            if any(n + lo + hi < 0 for n, (lo, hi, _) in zip(dilated, config)):
                return lax.full(out_shape, init, dt)   # cropped to nothing: identities only
            x = lax.pad(x, init, config)
            padding = tuple((max(lo, 0), max(hi, 0)) for lo, hi in padding)
            base_dilation = (1,) * x.ndim
        return lax.reduce_window(x, init, op, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation)
    lowering.__name__ = f"reduce_window_{op.__name__}"
    return lowering


impl_rules[win.reduce_window_sum_p] = eager(_reduce_window(lax.add,
                                                           lambda dt: np.zeros((), dt)))
impl_rules[win.reduce_window_max_p] = eager(_reduce_window(lax.max, win.max_identity))
impl_rules[win.reduce_window_min_p] = eager(_reduce_window(lax.min, win.min_identity))

"""XLA lowerings of the cumulative reductions (cumsum, cumprod, cummax, cummin,
cumlogsumexp), `reverse` accumulating from the end.

As the numpy reference: float16/bfloat16 cumlogsumexp accumulates in float32, and the
complex one is log(cumsum(exp(x - m))) + m with m the largest finite real part along the
axis (so its imaginary part is that of one complex log, not a sum of branches).
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import cumulative as cum


def _cumulative(op):
    def lowering(x, *, axis, reverse):
        return op(x, axis=axis, reverse=reverse)
    lowering.__name__ = op.__name__
    return lowering


def _cumlogsumexp(x, *, axis, reverse):
    dt = np.dtype(x.dtype)
    if dt.kind == "c":
        if x.shape[axis] == 0:
            return x
        m = lax.reduce_max(lax.real(x), (axis,))                        # [.. without axis]
        m = lax.select(lax.is_finite(m), m, lax.full_like(m, 0))
        dims = tuple(d for d in range(x.ndim) if d != axis)
        m = lax.convert_element_type(lax.broadcast_in_dim(m, x.shape, dims), dt)
        s = lax.cumsum(lax.exp(lax.sub(x, m)), axis=axis, reverse=reverse)
        return lax.add(lax.log(s), m)
    if dt.itemsize < 4:                                                 # f16 / bf16
        wide = lax.convert_element_type(x, np.float32)
        out = lax.cumlogsumexp(wide, axis=axis, reverse=reverse)
        return lax.convert_element_type(out, dt)
    return lax.cumlogsumexp(x, axis=axis, reverse=reverse)


impl_rules[cum.cumsum_p] = eager(_cumulative(lax.cumsum))
impl_rules[cum.cumprod_p] = eager(_cumulative(lax.cumprod))
impl_rules[cum.cummax_p] = eager(_cumulative(lax.cummax))
impl_rules[cum.cummin_p] = eager(_cumulative(lax.cummin))
impl_rules[cum.cumlogsumexp_p] = eager(_cumlogsumexp)

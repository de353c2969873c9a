"""XLA lowering of fft: jax.lax.fft with the same FftType (by name) and lengths.

A transform with nothing to read or write (a zero length or an empty batch) is zeros of the
shape rule's shape, as the numpy reference: XLA cannot lower an RFFT of length 0.
"""
from __future__ import annotations

import numpy as np
from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.core import ShapedArray
from fnad.primitives import fft as fft_prims


def _fft(x, *, fft_type, fft_lengths):
    out = fft_prims.fft_abstract_eval(ShapedArray(x.shape, np.dtype(x.dtype)),
                                      fft_type=fft_type, fft_lengths=fft_lengths)
    if x.size == 0 or out.size == 0:
        return lax.full(out.shape, 0, out.dtype)
    return lax.fft(x, fft_type.name, fft_lengths)


impl_rules[fft_prims.fft_p] = eager(_fft)

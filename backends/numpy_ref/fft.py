"""NumPy implementation of fft: numpy.fft's n-dimensional transforms over the trailing axes.

numpy.fft (pocketfft) computes float32/complex64 in single precision, and the result is
kept in the dtype the shape rule gives (float32 -> complex64 for RFFT, as jax), never
widened to float64/complex128. numpy.fft is imported on the first call, not with fnad.
A transform with nothing to read or write (a zero length or an empty batch) is an array of
zeros of the shape rule's shape: numpy.fft refuses a zero length (and XLA an RFFT of one).
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.core import ShapedArray
from fnad.primitives import fft as fft_prims
from fnad.primitives.fft import FftType

_NUMPY_FFT = {FftType.FFT: "fftn", FftType.IFFT: "ifftn", FftType.RFFT: "rfftn",
              FftType.IRFFT: "irfftn"}


def _fft(x, *, fft_type, fft_lengths):
    from numpy import fft as np_fft                    # loaded on first use
    x = np.asarray(x)
    out = fft_prims.fft_abstract_eval(ShapedArray(x.shape, x.dtype), fft_type=fft_type,
                                      fft_lengths=fft_lengths)
    if x.size == 0 or out.size == 0:
        return np.zeros(out.shape, out.dtype)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    y = getattr(np_fft, _NUMPY_FFT[fft_type])(x, s=fft_lengths, axes=axes)
    return y.astype(out.dtype, copy=False)


impl_rules[fft_prims.fft_p] = _fft

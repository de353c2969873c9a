"""Fourier transforms: the primitive fft, as jax.lax.fft (FftType FFT, IFFT, RFFT, IRFFT over
the trailing len(fft_lengths) axes, 1 to 3 of them, as XLA's FFT op).

Math. With n the transform's length along an axis and ω = e^{-2πi/n}:
  FFT    y_k = Σ_j x_j ω^{jk}                  (complex -> complex, [..., n] -> [..., n])
  IFFT   y_j = (1/n) Σ_k x_k ω^{-jk}           (complex -> complex)
  RFFT   the first m = n//2 + 1 entries of FFT(x) for real x ([..., n] -> [..., m]): the
         others are their conjugates (Hermitian symmetry), y_{n-k} = conj(y_k)
  IRFFT  the real inverse of RFFT ([..., m] -> [..., n]): the input is read as the first
         half of a Hermitian spectrum, so y_j = (1/n) Σ_{k<m} w_k Re(x_k ω^{-jk}) with
         w_k = 1 for the DC term (k = 0) and, n even, the Nyquist term (k = n/2), w_k = 2
         for the others (each stands for itself and its mirror n - k); the imaginary parts
         of the DC and Nyquist terms are not read.
  Over several axes: FFT/IFFT transform each axis; RFFT is an RFFT of the last axis, then
  an FFT of the others; IRFFT an IFFT of all but the last, then an IRFFT of the last.

Derivatives. Every type is linear (over the reals for RFFT and IRFFT), so the JVP is the
same transform of the tangent. The transposes follow fnad's (and JAX's) convention for
complex values: the bilinear pairing Re Σ ȳ·y, no conjugation, so the transpose of a
complex matrix A is Aᵀ, not Aᴴ (tests/test_primitives.py's dot-product test):
  FFT, IFFT  the DFT matrix F_{kj} = ω^{jk} is symmetric, so FFTᵀ = FFT and IFFTᵀ = IFFT
             (the scaled pair Fᴴ = n·IFFT is the adjoint, which this pairing does not use).
  RFFT       Re Σ_k ȳ_k y_k = Σ_j x_j Re(Σ_{k<m} ȳ_k ω^{jk}), so x̄_j = Re Σ_{k<m} ȳ_k ω^{jk}.
             IRFFT(z)_j = (1/n) Σ_k w_k Re(z_k ω^{-jk}); with z_k = conj(ȳ_k)·n/w_k, each
             term is Re(conj(ȳ_k) ω^{-jk}) = Re(ȳ_k ω^{jk}), so x̄ = IRFFT(conj(ȳ) · n/w).
             (Only the real parts of z_0 and of the Nyquist z are read: x̄ needs only
             Re ȳ_0 there too, since ω^0 and ω^{j·n/2} = ±1 are real.)
  IRFFT      for real ȳ, Σ_j ȳ_j ω^{-jk} = conj(Σ_j ȳ_j ω^{jk}) = conj(RFFT(ȳ)_k), so
             Σ_j ȳ_j y_j = Σ_k Re(x_k · (w_k/n) conj(RFFT(ȳ)_k)): x̄ = conj(RFFT(ȳ)) · w/n.
  Several axes: the transpose of a composition is the composition of the transposes in
  reverse order; the other axes' FFT/IFFT are symmetric and commute with the weights of the
  last axis, so the same formulas hold with n the product N of the lengths:
  RFFTᵀ(ȳ) = IRFFT(conj(ȳ) · N/w), IRFFTᵀ(ȳ) = conj(RFFT(ȳ)) · w/N (w on the last axis).
Batching: fft transforms trailing axes, so a batch axis among the leading ones passes
through; one among the transformed axes is moved to the front.

Imports only fnad.core, fnad.dtypes and the other primitive families.
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       jvp_rules, shape_error, transpose_rules)
from fnad.primitives import elementwise as el
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import moveaxis

__all__ = ["FftType", "fft"]


class FftType(enum.IntEnum):
    """lax.FftType: which transform `fft` computes."""

    FFT = 0        # forward, complex -> complex
    IFFT = 1       # inverse, complex -> complex
    RFFT = 2       # forward, real -> complex (the non-redundant half)
    IRFFT = 3      # inverse, complex (half spectrum) -> real

    def __repr__(self):
        return f"FftType.{self.name}"

    def __str__(self):
        return f"FftType.{self.name}"


_FFT_TYPE_STRINGS = {"fft": FftType.FFT, "FFT": FftType.FFT, "ifft": FftType.IFFT,
                     "IFFT": FftType.IFFT, "rfft": FftType.RFFT, "RFFT": FftType.RFFT,
                     "irfft": FftType.IRFFT, "IRFFT": FftType.IRFFT}
_REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}


def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, str):
        typ = _FFT_TYPE_STRINGS.get(fft_type)
        if typ is None:
            raise ValueError(f"Unknown FFT type '{fft_type}': use one of fnad.lax.FftType "
                             f"(FFT, IFFT, RFFT, IRFFT) or 'fft', 'ifft', 'rfft', 'irfft'")
        return typ
    if isinstance(fft_type, FftType):
        return fft_type
    raise TypeError(f"Unknown FFT type value '{fft_type}': use fnad.lax.FftType or one of "
                    f"the strings 'fft', 'ifft', 'rfft', 'irfft'")


def _to_complex_dtype(dt) -> np.dtype:
    """jax's to_complex_dtype: float64/complex128 (and int64 with x64) -> complex128, else
    complex64."""
    inexact = dtypes.to_inexact_dtype(dt)
    wide = inexact in (np.dtype(np.float64), np.dtype(np.complex128))
    return dtypes.canonicalize_dtype(np.complex128 if wide else np.complex64)


# ---- fft ---------------------------------------------------------------------------------
fft_p = Primitive("fft")
def fft(x, fft_type: FftType | str, fft_lengths) -> object:
    """The Fourier transform `fft_type` of x over its trailing len(fft_lengths) axes (1 to 3).

    FFT/IFFT: x [..., *L] complex (real and integer inputs are converted) -> [..., *L].
    RFFT: x [..., *L] real (integers converted; float32 or float64) -> [..., *L[:-1],
    L[-1]//2 + 1] complex64/complex128. IRFFT: x [..., *L[:-1], L[-1]//2 + 1] complex ->
    [..., *L] real. IFFT and IRFFT divide by the product of the lengths, as numpy.fft.
    Empty fft_lengths returns x converted, as jax."""
    typ = _fft_type(fft_type)
    lengths = tuple(operator.index(n) for n in fft_lengths)
    dt = get_aval(x).dtype
    if typ is FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError("only real valued inputs supported for rfft (fnad.lax.fft with "
                             f"RFFT got {dt.name}; use FFT for complex inputs)")
        new = dtypes.to_inexact_dtype(dt)
    else:
        new = _to_complex_dtype(dt)
    if new != dt:
        x = lg.convert_element_type(x, new)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)

def fft_abstract_eval(x, *, fft_type, fft_lengths):
    if type(fft_type) is not FftType:
        raise shape_error("fft", f"fft_type must be an FftType, got {fft_type!r}")
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise shape_error("fft", f"transforms 1 to 3 trailing dimensions (XLA's FFT), got "
                                 f"fft_lengths {fft_lengths}")
    if any(n < 0 for n in fft_lengths):
        raise shape_error("fft", f"fft_lengths must be non-negative, got {fft_lengths}")
    if k > x.ndim:
        raise shape_error("fft", f"input shape {x.shape} must have at least as many "
                                 f"dimensions as fft_lengths {fft_lengths}")
    lead, minor = x.shape[:-k], x.shape[-k:]
    name = fft_type.name
    if fft_type is FftType.RFFT:
        if x.dtype not in _COMPLEX_OF:
            raise shape_error("fft", f"RFFT input must be float32 or float64, got "
                                     f"{x.dtype.name}")
        if minor != fft_lengths:
            raise shape_error("fft", f"RFFT input shape {x.shape}: its trailing dimensions "
                                     f"must equal fft_lengths {fft_lengths}")
        shape = lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(shape, _COMPLEX_OF[x.dtype], x.weak_type)
    if x.dtype not in _REAL_OF:
        raise shape_error("fft", f"{name} input must be complex64 or complex128, got "
                                 f"{x.dtype.name}")
    if fft_type is FftType.IRFFT:
        want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if minor != want:
            raise shape_error("fft", f"IRFFT input shape {x.shape}: its trailing dimensions "
                                     f"must be {want} (fft_lengths {fft_lengths}, the last "
                                     f"one's n//2 + 1 non-redundant frequencies)")
        return ShapedArray(lead + fft_lengths, _REAL_OF[x.dtype], x.weak_type)
    if minor != fft_lengths:
        raise shape_error("fft", f"{name} input shape {x.shape}: its trailing dimensions "
                                 f"must equal fft_lengths {fft_lengths}")
    return x
abstract_eval_rules[fft_p] = fft_abstract_eval
def fft_jvp(primals, tangents, *, fft_type, fft_lengths):   # d fft(x) = fft(dx): linear
    (x,), (x_dot,) = primals, tangents
    return (fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths),
            fft_p.bind(x_dot, fft_type=fft_type, fft_lengths=fft_lengths))
jvp_rules[fft_p] = fft_jvp
def fft_transpose(ct, x, *, fft_type, fft_lengths):
    # FFTᵀ = FFT, IFFTᵀ = IFFT (symmetric matrices); RFFTᵀ(ȳ) = IRFFT(conj(ȳ)·N/w);
    # IRFFTᵀ(ȳ) = conj(RFFT(ȳ))·w/N (the module docstring derives them)
    N = math.prod(fft_lengths)
    if fft_type is FftType.RFFT:
        z = el.mul(el.conj(ct), _last_axis_weights(ct, fft_lengths[-1], N, inverse=True))
        return [fft_p.bind(z, fft_type=FftType.IRFFT, fft_lengths=fft_lengths)]
    if fft_type is FftType.IRFFT:
        y = el.conj(fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths))
        return [el.mul(y, _last_axis_weights(y, fft_lengths[-1], N, inverse=False))]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
transpose_rules[fft_p] = fft_transpose
def fft_batch(vals, dims, *, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    nd = get_aval(x).ndim
    d %= nd
    if d >= nd - len(fft_lengths):                     # a transformed axis: batch in front
        x, d = moveaxis(x, d, 0), 0
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), d
batch_rules[fft_p] = fft_batch


def _last_axis_weights(like, n: int, N: int, inverse: bool):
    """The Hermitian weights w along the last axis of `like` [..., m] (m = n//2 + 1), as an
    array of its shape and dtype: w/N, or N/w if `inverse`. w_k = 1 for the DC term and,
    n even, the Nyquist term k = n/2; 2 for the others (they stand for their mirror too)."""
    aval = get_aval(like)
    m = aval.shape[-1]
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and m > 1:
        w[-1] = 1.0
    values = (N / w if inverse else w / max(N, 1)).astype(aval.dtype)     # [m]
    return so.broadcast_in_dim(values, aval.shape, (aval.ndim - 1,))      # [..., m]

"""fnad.numpy.fft: jax.numpy.fft, on the fft primitive (primitives/fft.py).

Transforms: fft, ifft, rfft, irfft, hfft, ihfft (one axis, length n); fft2, ifft2, rfft2,
irfft2 (two axes); fftn, ifftn, rfftn, irfftn (several axes, shapes s). Helpers: fftfreq,
rfftfreq, fftshift, ifftshift. The semantics are jax.numpy.fft's, which are NumPy's except
where jax says otherwise (irfft of a single frequency gives an empty array, where NumPy
raises; axis=None in the one-axis functions transforms every axis):

  axes    moved to the end (lax.fft transforms trailing axes), transformed, moved back;
  n / s   the input is cut or zero-padded to that length along each axis first (for the
          inverse real transforms, the last axis to s[-1]//2 + 1 frequencies); without
          them irfft's output length is 2·(m - 1) for m input frequencies;
  norm    "backward" (or None): no scaling forward, 1/N inverse; "ortho": 1/√N both ways;
          "forward": 1/N forward, none inverse (N the product of the lengths);
  >3 axes (lax.fft takes 1 to 3): the last 2 or 3 transformed by one fft, then the others.
hfft(a) = irfft(conj(a))·n and ihfft(a) = conj(rfft(a))/n (with jax's norm handling).
Integer and bool inputs become float32 (real transforms) or complex64; rfft of a complex
input is a ValueError, as jax. Gradients come from the primitive's linear rules.

Imports no numpy.fft (the numpy backend loads it on first use).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes
from fnad.numpy._core import check_arraylike, ensure_array, placed
from fnad.primitives import fft as fp
from fnad.primitives import shape_ops as so
from fnad.primitives.fft import FftType

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
           "rfftn"]

_NORMS = (None, "backward", "ortho", "forward")


def _norm_scale(s: Sequence[int], func_name: str, norm: str, dtype) -> float:
    """The factor `norm` applies to the output of `func_name` (jax's _fft_norm: an inverse
    is a name starting with 'i'), computed in the output's precision as jax does."""
    real = np.dtype(dtype)
    real = np.finfo(real).dtype if dtypes.is_complex(real) else real
    n = np.prod(np.asarray(s, real), dtype=real)
    inverse = func_name.startswith("i")
    if norm == "ortho":
        root = np.sqrt(n)
        return float(root if inverse else real.type(1) / root)
    return float(n if inverse else real.type(1) / n)                      # "forward"


def _fft_core(func_name: str, fft_type: FftType, a, s, axes, norm):
    full_name = f"fnad.numpy.fft.{func_name}"
    check_arraylike(full_name, a)
    arr = ensure_array(a)
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or '
                         f'"forward".')
    if s is not None:
        s = tuple(map(operator.index, s))
        if any(n <= 0 for n in s):
            raise ValueError("Shape should be positive.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    orig_axes = axes
    if axes is None:
        if s is None:
            axes = range(arr.ndim)
        else:
            if len(s) > arr.ndim:
                raise ValueError(f"{full_name}: s={s} names {len(s)} axes, but the input "
                                 f"has only {arr.ndim} (shape {arr.shape})")
            axes = range(arr.ndim - len(s), arr.ndim)
    if len(axes) != len(set(axes)):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")
    if orig_axes is not None:                          # the transformed axes go last
        axes = tuple(range(arr.ndim - len(axes), arr.ndim))
        arr = jnp.moveaxis(arr, orig_axes, axes)
    if s is not None:                                  # cut or zero-pad to the lengths s
        in_s = list(arr.shape)
        for axis, x in zip(axes, s):
            in_s[axis] = x
        if fft_type is FftType.IRFFT:
            in_s[-1] = in_s[-1] // 2 + 1
        if tuple(in_s) != arr.shape:
            zero = np.zeros((), arr.dtype)
            arr = so.pad(arr, zero, [(0, want - have, 0)
                                     for want, have in zip(in_s, arr.shape)])
    elif fft_type is FftType.IRFFT:
        s = [arr.shape[axis] for axis in axes[:-1]]
        if axes:
            s += [max(0, 2 * (arr.shape[axes[-1]] - 1))]
    else:
        s = [arr.shape[axis] for axis in axes]
    if fft_type is FftType.IRFFT and s and arr.shape[-1] == 0:
        # no frequencies: an empty output, as jax (lax.fft wants at least one frequency, so
        # this transforms one zero to length 1 and keeps none of it)
        arr = so.pad(arr, np.zeros((), arr.dtype), [(0, 0, 0)] * (arr.ndim - 1) + [(0, 1, 0)])
        out = _fft_core_nd(arr, fft_type, tuple(s[:-1]) + (1,))[..., :0]
    else:
        out = _fft_core_nd(arr, fft_type, tuple(s))
    if norm is not None and norm != "backward" and out.size:
        out = jnp.multiply(out, _norm_scale(s, func_name, norm, out.dtype))
    if orig_axes is not None:
        out = jnp.moveaxis(out, axes, orig_axes)
    return out


def _fft_core_nd(arr, fft_type: FftType, s: tuple):
    """lax.fft over the trailing len(s) axes; more than 3 as jax splits them: the last 2
    (4 axes) or 3 by one fft, the rest by FFTs (IFFTs first for the inverse transforms)."""
    if len(s) <= 3:
        return fp.fft(arr, fft_type, s)
    n = 2 if len(s) == 4 else 3
    src = tuple(range(arr.ndim - len(s), arr.ndim - n))
    dst = tuple(range(arr.ndim - len(s) + n, arr.ndim))
    if fft_type in (FftType.RFFT, FftType.FFT):
        arr = fp.fft(arr, fft_type, s[-n:])
        arr = jnp.moveaxis(arr, src, dst)
        arr = _fft_core_nd(arr, FftType.FFT, s[:-n])
        return jnp.moveaxis(arr, dst, src)
    arr = jnp.moveaxis(arr, src, dst)
    arr = _fft_core_nd(arr, FftType.IFFT, s[:-n])
    arr = jnp.moveaxis(arr, dst, src)
    return fp.fft(arr, fft_type, s[-n:])


def _axis_check_1d(func_name: str, axis) -> None:
    if isinstance(axis, (list, tuple)):
        full_name = f"fnad.numpy.fft.{func_name}"
        raise ValueError(f"{full_name} does not support multiple axes. Please use "
                         f"{full_name}n. Got axis = {axis!r}.")


def _fft_core_1d(func_name: str, fft_type: FftType, a, n, axis, norm):
    _axis_check_1d(func_name, axis)
    return _fft_core(func_name, fft_type, a, None if n is None else [n],
                     None if axis is None else [axis], norm)


def _fft_core_2d(func_name: str, fft_type: FftType, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"fnad.numpy.fft.{func_name} only supports 2 axes. Got axes = "
                         f"{axes!r}.")
    return _fft_core(func_name, fft_type, a, s, axes, norm)


# ---- one axis ---------------------------------------------------------------------------------
def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The discrete Fourier transform of `a` along `axis` (cut or zero-padded to n):
    [..., n] -> [..., n] complex."""
    return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of fft along `axis`: [..., n] -> [..., n] complex."""
    return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The Fourier transform of a real `a` along `axis`, its n//2 + 1 non-negative
    frequencies: [..., n] -> [..., n//2 + 1] complex."""
    return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of rfft: [..., m] frequencies -> [..., n] real (n = 2(m - 1) if None)."""
    return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The transform of a signal with Hermitian symmetry given by its first half:
    [..., m] -> [..., n] real (n = 2(m - 1) if None); irfft(conj(a)) · n."""
    conj_a = jnp.conj(a)
    _axis_check_1d("hfft", axis)
    nn = (conj_a.shape[axis] - 1) * 2 if n is None else n
    return jnp.multiply(_fft_core_1d("hfft", FftType.IRFFT, conj_a, n, axis, norm), nn)


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """The inverse of hfft: real [..., n] -> [..., n//2 + 1] complex; conj(rfft(a)) / n."""
    _axis_check_1d("ihfft", axis)
    arr = jnp.asarray(a)
    nn = arr.shape[axis] if n is None else n
    out = _fft_core_1d("ihfft", FftType.RFFT, arr, n, axis, norm)
    return jnp.multiply(jnp.conj(out), 1 / nn)


# ---- two axes -------------------------------------------------------------------------------
def fft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None):
    """fftn over two axes (the last two by default)."""
    return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    """ifftn over two axes (the last two by default)."""
    return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    """rfftn over two axes (the last two by default)."""
    return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None):
    """irfftn over two axes (the last two by default)."""
    return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


# ---- several axes ---------------------------------------------------------------------------
def fftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None):
    """The Fourier transform over `axes` (all, or the last len(s), if None), each cut or
    zero-padded to its length in s."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """The inverse of fftn."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """fftn of a real `a`, keeping the s[-1]//2 + 1 non-negative frequencies of the last
    axis: [..., *s] -> [..., *s[:-1], s[-1]//2 + 1] complex."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None):
    """The inverse of rfftn: real output of shape s over `axes` (the last axis 2(m - 1) if
    s is None)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


# ---- frequencies and shifts -------------------------------------------------------------------
def _check_freq_args(name: str, n, d) -> None:
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of fnad.numpy.fft.{name} only takes an int. "
                         f"Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of fnad.numpy.fft.{name} only takes a single "
                         f"value. Got d = {list(d)}.")


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of fft: [0, 1, ..., ⌈n/2⌉ - 1, -⌊n/2⌋, ..., -1] / (d·n)."""
    dtype = dtype or dtypes.default_float_dtype()
    _check_freq_args("fftfreq", n, d)
    out_dtype = dtype
    dtype = dtypes.finfo(dtypes.to_inexact_dtype(dtype)).dtype
    i = jnp.arange(n, dtype=dtype, device=device)
    k = (i + n // 2) % n - n // 2
    result = k.astype(dtype) / jnp.array(d * n, dtype=dtype, device=device)
    return result.astype(out_dtype)


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of rfft: [0, 1, ..., n//2] / (d·n)."""
    dtype = dtype or dtypes.default_float_dtype()
    _check_freq_args("rfftfreq", n, d)
    k = jnp.arange(0, n // 2 + 1, dtype=dtype)
    return placed(k / jnp.array(d * n, dtype=dtype), device)


def fftshift(x, axes: None | int | Sequence[int] = None):
    """`x` rolled so that the zero frequency is in the middle of each of `axes` (all)."""
    check_arraylike("fftshift", x)
    x = ensure_array(x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [dim // 2 for dim in x.shape]
    elif isinstance(axes, int):
        shift = x.shape[axes] // 2
    else:
        shift = [x.shape[ax] // 2 for ax in axes]
    return jnp.roll(x, shift, axes)


def ifftshift(x, axes: None | int | Sequence[int] = None):
    """The inverse of fftshift (they differ for odd lengths)."""
    check_arraylike("ifftshift", x)
    x = ensure_array(x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [-(dim // 2) for dim in x.shape]
    elif isinstance(axes, int):
        shift = -(x.shape[axes] // 2)
    else:
        shift = [-(x.shape[ax] // 2) for ax in axes]
    return jnp.roll(x, shift, axes)

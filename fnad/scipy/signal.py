"""fnad.scipy.signal: convolve, correlate, convolve2d, correlate2d, fftconvolve, detrend,
as jax.scipy.signal.

N-d convolutions are one `lax.conv_general_dilated` (batch and feature dims of size 1)
computing the full result of the larger operand with the flipped smaller one, cropped to
the mode's window: "full" (every overlap, n + k - 1), "same" (the centre, in1's shape:
start (k - 1) // 2, as SciPy) or "valid" (no overlap with the padding, n - k + 1; one input
must be at least as large as the other in every dimension). Correlation is convolution
with the second input flipped and conjugated. fftconvolve multiplies spectra (rfftn for
real inputs) over `axes`. convolve2d/correlate2d also take SciPy's boundary rules "wrap"
and "symm" (JAX: "fill" only), by padding in1 before a valid convolution; correlate2d's
"same" window starts at k // 2, as SciPy's (N-d correlate's at (k - 1) // 2).
"""
from __future__ import annotations

import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend", "fftconvolve"]

_MODES = ("full", "same", "valid")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")


def _operands(name: str, in1, in2):
    a, b = jnp.asarray(in1), jnp.asarray(in2)
    if a.ndim != b.ndim:
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions, got "
                         f"{a.ndim} and {b.ndim}")
    if a.size == 0 or b.size == 0:
        raise ValueError(f"{name}: zero-size arrays are not supported, got shapes {a.shape} "
                         f"and {b.shape}")
    dtype = jnp.result_type(a, b)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(dtype, float)
    return a.astype(dtype), b.astype(dtype)


def _crop(full, shape1, shape2, mode: str, centre_up: bool = False):
    """The mode's window of the full result (shape n + k - 1 per dimension). "same" starts
    at (k - 1) // 2, or at k // 2 with `centre_up` (SciPy's correlate2d)."""
    if mode == "full":
        return full
    if mode == "same":
        starts = [k // 2 if centre_up else (k - 1) // 2 for k in shape2]
        sizes = list(shape1)
    else:
        if not (all(n >= k for n, k in zip(shape1, shape2)) or
                all(n <= k for n, k in zip(shape1, shape2))):
            raise ValueError("For 'valid' mode, one must be at least as large as the other "
                             "in every dimension")
        starts = [min(n, k) - 1 for n, k in zip(shape1, shape2)]
        sizes = [abs(n - k) + 1 for n, k in zip(shape1, shape2)]
    return full[tuple(slice(s, s + z) for s, z in zip(starts, sizes))]


def _full_conv(a, b, precision):
    """The full N-d convolution of a and b (any sizes) by one conv_general_dilated."""
    big, small = (a, b) if a.size >= b.size else (b, a)
    pads = [(k - 1, k - 1) for k in small.shape]
    out = lax.conv_general_dilated(big[None, None], jnp.flip(small)[None, None],
                                   (1,) * big.ndim, pads, precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d convolution of in1 and in2 (SciPy's signal.convolve): "direct" (and "auto")
    as one conv_general_dilated, "fft" as fftconvolve."""
    _check_mode(mode)
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: got method={method!r}; expected 'auto', 'direct' or "
                         "'fft'")
    a, b = _operands("convolve", in1, in2)
    if method == "fft":
        return fftconvolve(a, b, mode=mode)
    if mode == "valid":
        _crop(a, a.shape, b.shape, "valid")                   # the size check only
    return _crop(_full_conv(a, b, precision), a.shape, b.shape, mode)


def correlate(in1, in2, mode: str = "full", method: str = "auto", precision=None):
    """The N-d cross-correlation of in1 and in2: convolution with in2 flipped and
    conjugated (SciPy's signal.correlate)."""
    _check_mode(mode)
    a, b = _operands("correlate", in1, in2)
    return convolve(a, jnp.flip(jnp.conj(b)), mode=mode, method=method, precision=precision)


def _conv2d(name: str, in1, in2, mode, boundary, fillvalue, precision, flip: bool):
    _check_mode(mode)
    if boundary not in ("fill", "wrap", "symm"):
        raise ValueError(f"{name}: boundary must be 'fill', 'wrap' or 'symm', got "
                         f"{boundary!r}")
    a, b = _operands(name, in1, in2)
    if a.ndim != 2:
        raise ValueError(f"{name}: inputs must be 2-D, got rank {a.ndim}")
    if flip:
        b = jnp.flip(jnp.conj(b))
    if mode == "valid":
        return convolve(a, b, "valid", precision=precision)
    if boundary == "fill" and fillvalue == 0:
        full = _full_conv(a, b, precision)
    else:
        pads = [(k - 1, k - 1) for k in b.shape]
        if boundary == "fill":
            padded = jnp.pad(a, pads, constant_values=jnp.asarray(fillvalue, a.dtype))
        else:
            padded = jnp.pad(a, pads, mode="wrap" if boundary == "wrap" else "symmetric")
        full = convolve(padded, b, "valid", precision=precision)
    return _crop(full, a.shape, b.shape, mode, centre_up=flip)


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
               precision=None):
    """The 2-D convolution of in1 and in2 with SciPy's boundary rules ("fill" with
    `fillvalue`, "wrap", "symm")."""
    return _conv2d("convolve2d", in1, in2, mode, boundary, fillvalue, precision, flip=False)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0,
                precision=None):
    """The 2-D cross-correlation of in1 and in2 (SciPy's boundary rules)."""
    return _conv2d("correlate2d", in1, in2, mode, boundary, fillvalue, precision, flip=True)


def fftconvolve(in1, in2, mode: str = "full", axes=None):
    """The convolution of in1 and in2 over `axes` (all by default; the others broadcast)
    by FFT: rfftn for real inputs, fftn for complex."""
    _check_mode(mode)
    a, b = jnp.asarray(in1), jnp.asarray(in2)
    if a.ndim != b.ndim:
        raise ValueError(f"fftconvolve: in1 and in2 must have the same number of "
                         f"dimensions, got {a.ndim} and {b.ndim}")
    if a.size == 0 or b.size == 0:
        return jnp.zeros((0,) * a.ndim, jnp.result_type(a, b, float))
    dtype = jnp.result_type(a, b, float) if not jnp.issubdtype(
        jnp.result_type(a, b), jnp.inexact) else jnp.result_type(a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    axes = tuple(range(a.ndim)) if axes is None else tuple(
        operator.index(x) % a.ndim for x in np.atleast_1d(axes))
    for d in range(a.ndim):
        if d not in axes and a.shape[d] != b.shape[d] and 1 not in (a.shape[d], b.shape[d]):
            raise ValueError(f"fftconvolve: in1 and in2 must have equal or broadcastable "
                             f"sizes on the axes not convolved; axis {d} has {a.shape[d]} "
                             f"and {b.shape[d]}")
    full = [a.shape[d] + b.shape[d] - 1 for d in axes]
    if jnp.iscomplexobj(a) or jnp.iscomplexobj(b):
        out = jnp.fft.ifftn(jnp.fft.fftn(a, full, axes) * jnp.fft.fftn(b, full, axes),
                            full, axes)
    else:
        out = jnp.fft.irfftn(jnp.fft.rfftn(a, full, axes) * jnp.fft.rfftn(b, full, axes),
                             full, axes)
    out = out.astype(dtype)
    if mode == "full":
        return out
    index = [slice(None)] * out.ndim
    for d in axes:
        n, k = a.shape[d], b.shape[d]
        if mode == "same":
            start, size = (k - 1) // 2, n
        else:
            if n < k and any(a.shape[e] > b.shape[e] for e in axes):
                raise ValueError("For 'valid' mode, one must be at least as large as the "
                                 "other in every dimension")
            start, size = min(n, k) - 1, abs(n - k) + 1
        index[d] = slice(start, start + size)
    return out[tuple(index)]


def detrend(data, axis: int = -1, type: str = "linear", bp=0, overwrite_data=None):  # noqa: A002
    """`data` less its mean ("constant") or its least-squares line ("linear"), fitted
    separately on each segment between the breakpoints `bp` along `axis`."""
    if overwrite_data is not None:
        raise NotImplementedError("detrend: overwrite_data is not supported (arrays are "
                                  "immutable)")
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: trend type must be 'linear' or 'constant', got {type!r}")
    x = jnp.asarray(data)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    if type in ("constant", "c"):
        return x - jnp.mean(x, axis=axis, keepdims=True)
    axis = operator.index(axis) % x.ndim
    n = x.shape[axis]
    cuts = np.unique(np.concatenate([[0], np.atleast_1d(np.asarray(bp, int)), [n]]))
    if cuts[0] < 0 or cuts[-1] > n:
        raise ValueError(f"detrend: breakpoints must be in [0, {n}], got {bp}")
    y = jnp.moveaxis(x, axis, -1)
    pieces = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        seg = y[..., lo:hi]
        t = np.arange(hi - lo, dtype=np.float64) + 1.0
        t = (t - t.mean()) if hi - lo > 1 else t * 0                  # centred abscissae
        tt = jnp.asarray(t, seg.dtype if not jnp.iscomplexobj(seg) else
                         jnp.finfo(seg.dtype).dtype)
        mean = jnp.mean(seg, axis=-1, keepdims=True)
        denom = float(np.sum(t * t)) or 1.0
        slope = jnp.sum(seg * tt, axis=-1, keepdims=True) / denom
        pieces.append(seg - mean - slope * tt)
    return jnp.moveaxis(jnp.concatenate(pieces, axis=-1), -1, axis)

"""fnad.scipy.signal: convolve, correlate, convolve2d, correlate2d, fftconvolve, detrend,
and the spectral analysis functions stft, istft, csd and welch, as jax.scipy.signal.

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
import warnings

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import promote_dtypes_inexact
from fnad.scipy import _windows

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend",
           "fftconvolve", "istft", "stft", "welch"]

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


# ---- spectral analysis: stft, istft, csd, welch ---------------------------------------
#
# x [..., L] (the time axis moved last) is cut into segments of nperseg samples that start
# every nstep = nperseg - noverlap samples, [..., S, nperseg]; each is detrended, windowed
# and Fourier transformed (nfft points; rfft unless two-sided), [..., S, F]. stft scales
# by 1/Σw; csd averages conj(X)·Y over the segments, scaled to a density 1/(fs Σw²) or a
# spectrum 1/(Σw)², the one-sided one doubling every bin but 0 (and Nyquist for even
# nfft). istft inverts stft by weighted overlap-add: x = Σ_s w·x_s / Σ_s w².

def _named_or_array_window(name: str, window, nperseg, input_length: int, dtype):
    """(win [nperseg], nperseg): a named window (SciPy's names; of length nperseg, by default
    the whole input as in jax, at most the input length), or an array window."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else nperseg
        if n > input_length:
            warnings.warn(f"{name}: nperseg={n} is greater than the input length "
                          f"{input_length}, using nperseg={input_length}", stacklevel=4)
            n = input_length
        return jnp.asarray(_windows.get_window(window, n), dtype), n
    win = jnp.asarray(window).astype(dtype)
    if win.ndim != 1:
        raise ValueError(f"{name}: window must be 1-D, got shape {win.shape}")
    if win.shape[0] > input_length:
        raise ValueError(f"{name}: the window (length {win.shape[0]}) is longer than the "
                         f"input signal ({input_length})")
    if nperseg is not None and nperseg != win.shape[0]:
        raise ValueError(f"{name}: nperseg={nperseg} differs from the window's length "
                         f"{win.shape[0]}")
    return win, win.shape[0]


def _static_int(name: str, what: str, value) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a static integer, got {value!r}") from None


def _extend(name: str, x, n: int, boundary):
    """x [..., L] extended by n samples at both ends: "even" (mirrored about the end
    sample), "odd" (point-mirrored about it), "constant" (the end sample repeated),
    "zeros", or None (not extended)."""
    if boundary is None or n < 1:
        return x
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "zeros":
        return jnp.pad(x, widths)
    if boundary == "even":
        return jnp.pad(x, widths, mode="reflect")
    if boundary == "constant":
        return jnp.pad(x, widths, mode="edge")
    L = x.shape[-1]
    if n > L - 1:
        raise ValueError(f"{name}: the odd extension length ({n}) must not exceed the "
                         f"signal length - 1 ({L - 1})")
    first, last = x[..., :1], x[..., -1:]
    left = 2 * first - jnp.flip(x[..., 1:n + 1], -1)                    # [..., n]
    right = 2 * last - jnp.flip(x[..., L - n - 1:L - 1], -1)             # [..., n]
    return jnp.concatenate([left, x, right], axis=-1)


def _frames(x, nperseg: int, nstep: int):
    """[..., L] -> [..., S, nperseg]: the segments starting at 0, nstep, 2·nstep, ..."""
    S = (x.shape[-1] - nperseg) // nstep + 1
    idx = np.arange(S)[:, None] * nstep + np.arange(nperseg)             # [S, nperseg]
    return jnp.take(x, idx, axis=-1)


def _overlap_add(frames, nstep: int):
    """[..., S, nperseg] -> [..., (S - 1)·nstep + nperseg]: frame s added at s·nstep (the
    transpose of _frames)."""
    S, nperseg = frames.shape[-2:]
    idx = np.arange(S)[:, None] * nstep + np.arange(nperseg)
    out = jnp.zeros(frames.shape[:-2] + ((S - 1) * nstep + nperseg,), frames.dtype)
    return out.at[..., idx].add(frames)


def _detrend_func(name: str, detrend_type):
    """The per-segment detrend: a type for `detrend`, a callable given the segments
    [..., S, nperseg] (samples last), or False/None for none."""
    if isinstance(detrend_type, str):
        if detrend_type not in ("linear", "l", "constant", "c"):
            raise ValueError(f"{name}: detrend must be 'linear', 'constant', a callable or "
                             f"False, got {detrend_type!r}")
        return lambda seg: detrend(seg, axis=-1, type=detrend_type)
    if callable(detrend_type):
        return detrend_type
    if not detrend_type:
        return lambda seg: seg
    raise ValueError(f"{name}: unsupported detrend {detrend_type!r}")


def _spectral(name: str, x, y, fs, window, nperseg, noverlap, nfft, detrend_type,
              return_onesided: bool, scaling: str, axis, mode: str, boundary=None,
              padded: bool = False):
    """(freqs [F], times [S], result): the windowed FFTs of x's segments along `axis`
    (mode "stft"), or their periodograms conj(X)·Y, or |X|² for y None (mode "psd",
    per segment: result [..., F at axis ..., S])."""
    if boundary not in ("even", "odd", "constant", "zeros", None):
        raise ValueError(f"{name}: unknown boundary option {boundary!r}; expected 'even', "
                         "'odd', 'constant', 'zeros' or None")
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"{name}: scaling must be 'density' or 'spectrum', got "
                         f"{scaling!r}")
    x = jnp.asarray(x)
    axis = _static_int(name, "axis", axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an input of rank "
                         f"{x.ndim}")
    axis %= x.ndim
    if y is None:
        (x,) = promote_dtypes_inexact(x)
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        x, y = promote_dtypes_inexact(x, jnp.asarray(y))
        if x.ndim != y.ndim:
            raise ValueError(f"{name}: x and y must have the same rank, got {x.ndim} and "
                             f"{y.ndim}")
        try:
            outer = np.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:],
                                        y.shape[:axis] + y.shape[axis + 1:])
        except ValueError:
            raise ValueError(f"{name}: x {x.shape} and y {y.shape} cannot be broadcast "
                             f"together off axis {axis}") from None
    result_dtype = jnp.result_type(x.dtype, jnp.complex64)
    freq_dtype = jnp.finfo(result_dtype).dtype
    if nperseg is not None:
        nperseg = _static_int(name, "nperseg", nperseg)
        if nperseg < 1:
            raise ValueError(f"{name}: nperseg must be a positive integer, got {nperseg}")
    if x.size == 0 or (y is not None and y.size == 0):
        n = x.shape[axis] if y is None else min(x.shape[axis], y.shape[axis])
        shape = outer[:axis] + (n,) + outer[axis:]
        return (jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype),
                jnp.zeros(shape, result_dtype))
    win, nperseg = _named_or_array_window(name, window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else _static_int(name, "noverlap", noverlap)
    nfft = nperseg if nfft is None else _static_int(name, "nfft", nfft)
    if nfft < nperseg:
        raise ValueError(f"{name}: nfft ({nfft}) must be at least nperseg ({nperseg})")
    if noverlap >= nperseg:
        raise ValueError(f"{name}: noverlap ({noverlap}) must be less than nperseg "
                         f"({nperseg})")
    nstep = nperseg - noverlap
    detrend_seg = _detrend_func(name, detrend_type)

    x = jnp.moveaxis(x, axis, -1)                                        # [..., L]
    if y is not None:
        y = jnp.moveaxis(y, axis, -1)
        L = max(x.shape[-1], y.shape[-1])                                # zero-pad to match
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, L - x.shape[-1])])
        y = jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, L - y.shape[-1])])
    x = _extend(name, x, nperseg // 2, boundary)
    if y is not None:
        y = _extend(name, y, nperseg // 2, boundary)
    if padded:                       # a whole number of segments: L = nperseg + k·nstep
        nadd = (-(x.shape[-1] - nperseg) % nstep) % nperseg
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        if y is not None:
            y = jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, nadd)])

    two_sided = not return_onesided
    if not two_sided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
        warnings.warn(f"{name}: input data is complex, switching to return_onesided=False",
                      stacklevel=3)
        two_sided = True

    def spectra(v):                                                      # [..., S, F]
        seg = win * detrend_seg(_frames(v, nperseg, nstep))              # [..., S, nperseg]
        if two_sided:
            return jnp.fft.fft(seg, n=nfft)
        return jnp.fft.rfft(jnp.real(seg), n=nfft)

    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    else:
        scale = 1.0 / jnp.sum(win) ** 2
    X = spectra(x)
    if mode == "stft":
        result = X * jnp.sqrt(scale)
    else:
        result = jnp.conj(X) * (X if y is None else spectra(y)) * scale
        if not two_sided:                    # fold the negative frequencies onto positive
            double = np.full(result.shape[-1], 2.0)
            double[0] = 1.0
            if nfft % 2 == 0:
                double[-1] = 1.0
            result = result * jnp.asarray(double, freq_dtype)
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = jnp.real(result)
    result = jnp.moveaxis(result, -1, axis)                              # [..., F@axis, S]

    unit = np.fft.fftfreq(nfft) if two_sided else np.fft.rfftfreq(nfft)
    freqs = jnp.asarray(unit, freq_dtype) * fs
    starts = np.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nstep)
    if boundary is not None:
        starts = starts - nperseg / 2
    times = jnp.asarray(starts, freq_dtype) / fs
    return freqs, times, result


def stft(x, fs=1.0, window="hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend=False, return_onesided: bool = True,
         boundary: str | None = "zeros", padded: bool = True, axis: int = -1):
    """The short-time Fourier transform of x along `axis` (scipy.signal.stft): (f [F],
    t [S], Zxx [..., F, S]) with F = nfft // 2 + 1 (one-sided) or nfft frequencies and S
    segments. `window`: a SciPy window name, a (name, parameter) tuple, or an array;
    `boundary` extends x by nperseg // 2 samples at each end; `padded` zero-pads it to a
    whole number of segments. A callable `detrend` gets the segments [..., S, nperseg]."""
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend="constant",
        return_onesided: bool = True, scaling: str = "density", axis: int = -1,
        average: str = "mean"):
    """The cross power spectral density of x and y by Welch's method
    (scipy.signal.csd): (f [F], Pxy [..., F at axis ...]), the periodograms conj(X)·Y of
    the segments averaged by `average` ("mean", or "median" with its bias divided out).
    y None gives x's PSD (real), as jax. nperseg defaults to the input length, as jax's
    (SciPy's: 256)."""
    if average not in ("mean", "median"):
        raise ValueError(f"csd: average must be 'mean' or 'median', got {average!r}")
    freqs, _, P = _spectral("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, scaling, axis, "psd")
    if y is not None:
        P = P.astype(jnp.result_type(P.dtype, jnp.complex64))
    if P.ndim < 2 or P.size == 0:
        return freqs, P
    S = P.shape[-1]
    if S == 1:
        return freqs, P[..., 0]
    if average == "mean":
        return freqs, jnp.mean(P, axis=-1)
    # median of S periodograms / the mean's: 1 + Σ_{i = 2, 4, ... < S} (1/(i+1) - 1/i)
    bias = 1.0 + sum(1.0 / (i + 1) - 1.0 / i for i in range(2, S, 2))
    if jnp.iscomplexobj(P):
        med = lax.complex(jnp.median(jnp.real(P), axis=-1), jnp.median(jnp.imag(P), axis=-1))
    else:
        med = jnp.median(P, axis=-1)
    return freqs, med / bias


def welch(x, fs=1.0, window="hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, detrend="constant",
          return_onesided: bool = True, scaling: str = "density", axis: int = -1,
          average: str = "mean"):
    """The power spectral density of x by Welch's method (scipy.signal.welch): (f [F],
    Pxx [..., F at axis ...]), real; csd(x, None, ...)."""
    freqs, P = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                   scaling, axis, average)
    return freqs, jnp.real(P)


def istft(Zxx, fs=1.0, window="hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None,
          input_onesided: bool = True, boundary: bool = True, time_axis: int = -1,
          freq_axis: int = -2):
    """The inverse short-time Fourier transform (scipy.signal.istft): (t, x) from
    Zxx [..., F, S], by weighted overlap-add of the inverse FFTs of the segments.
    `boundary` removes the nperseg // 2 samples stft's boundary extension added at each
    end. t counts x.shape[0] samples, as SciPy and jax (for a batched x, its first axis).
    Differences from jax: noverlap=0 means no overlap, and an odd nperseg with a one-sided
    input works (its nfft defaults to nperseg; jax fails there), as SciPy."""
    Z = jnp.asarray(Zxx)
    if Z.ndim < 2:
        raise ValueError(f"istft: the STFT must be at least 2-D, got shape {Z.shape}")
    t_ax, f_ax = (_static_int("istft", what, a) for what, a in
                  (("time_axis", time_axis), ("freq_axis", freq_axis)))
    for a in (t_ax, f_ax):
        if not -Z.ndim <= a < Z.ndim:
            raise ValueError(f"istft: axis {a} is out of bounds for an STFT of rank {Z.ndim}")
    t_ax, f_ax = t_ax % Z.ndim, f_ax % Z.ndim
    if t_ax == f_ax:
        raise ValueError("istft: time_axis and freq_axis must differ")
    Z = Z.astype(jnp.result_type(Z.dtype, jnp.complex64))
    F = Z.shape[f_ax]
    n_default = 2 * (F - 1) if input_onesided else F
    nperseg = n_default if nperseg is None else _static_int("istft", "nperseg", nperseg)
    if nperseg < 1:
        raise ValueError(f"istft: nperseg must be a positive integer, got {nperseg}")
    if nfft is None:
        nfft = n_default + 1 if input_onesided and nperseg == n_default + 1 else n_default
    nfft = _static_int("istft", "nfft", nfft)
    if nfft < nperseg:
        raise ValueError(f"istft: the FFT length ({nfft}) must be at least nperseg "
                         f"({nperseg})")
    noverlap = nperseg // 2 if noverlap is None else _static_int("istft", "noverlap",
                                                                 noverlap)
    if noverlap >= nperseg:
        raise ValueError(f"istft: noverlap ({noverlap}) must be less than nperseg "
                         f"({nperseg})")
    nstep = nperseg - noverlap

    outer = [d for d in range(Z.ndim) if d not in (t_ax, f_ax)]
    Z = jnp.transpose(Z, outer + [t_ax, f_ax])                           # [..., S, F]
    segs = (jnp.fft.irfft(Z, n=nfft) if input_onesided
            else jnp.fft.ifft(Z, n=nfft))[..., :nperseg]                 # [..., S, nperseg]
    real_dtype = jnp.finfo(Z.dtype).dtype
    if isinstance(window, (str, tuple)):
        win = jnp.asarray(_windows.get_window(window, nperseg), real_dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1 or win.shape[0] != nperseg:
            raise ValueError(f"istft: the window must be 1-D of length nperseg "
                             f"({nperseg}), got shape {win.shape}")
    segs = segs * jnp.sum(win)                                           # undo 1/Σw
    x = _overlap_add(segs * win, nstep)                                  # [..., N]
    S = Z.shape[-2]
    norm = _overlap_add(jnp.broadcast_to(win * win, (S, nperseg)), nstep)  # [N]
    if boundary:
        k = nperseg // 2
        x, norm = x[..., k:x.shape[-1] - k], norm[k:norm.shape[0] - k]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and t_ax != Z.ndim - 1:
        x = jnp.moveaxis(x, -1, t_ax - 1 if f_ax < t_ax else t_ax)
    times = jnp.arange(x.shape[0], dtype=jnp.finfo(x.dtype).dtype) / fs
    return times, x

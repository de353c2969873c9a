"""Specs of fft (primitives/fft.py): FFT, IFFT, RFFT and IRFFT over 1, 2 and 3 trailing axes.

The reference is the definition, not numpy.fft (which the numpy backend calls): a product
with the DFT matrix ω^{jk} (ω = e^{∓2πi/n}) along each transformed axis, in complex128;
RFFT keeps the first n//2 + 1 frequencies of the full transform; IRFFT applies the inverse
DFT to the leading axes, then y_j = (1/n) Σ_{k<m} w_k Re(x_k ω^{-jk}) along the last one
(w_k = 1 for DC and an even n's Nyquist term, 2 for the others). Cases: odd and even
lengths, lengths 1 and 2 (where DC and Nyquist are all there is), batch dimensions,
complex64 and float32, an integer input (converted by the wrapper), and every type with
each rank of transform. Each case is linear in x: the dot-product test runs on all.
"""
import numpy as np

from fnad.primitives import fft as fp
from specs import Arg, Spec

f32, c64, i32 = np.float32, np.complex64, np.int32
_OUT = {"fft": None, "ifft": None, "rfft": "complex", "irfft": "real"}


def _dft(x, axis: int, inverse: bool):
    """x transformed along `axis` by the DFT matrix (scaled by 1/n if `inverse`)."""
    n = x.shape[axis]
    j = np.arange(n)
    m = np.exp((2j if inverse else -2j) * np.pi * np.outer(j, j) / n)          # [n, n]
    y = np.moveaxis(np.moveaxis(x, axis, -1) @ m.T, -1, axis)
    return y / n if inverse else y


def _irfft_last(x, n: int):
    """[..., n//2 + 1] -> [..., n]: y_j = (1/n) Σ_k w_k Re(x_k e^{2πijk/n})."""
    m = x.shape[-1]
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    phase = np.exp(2j * np.pi * np.outer(np.arange(m), np.arange(n)) / n)      # [m, n]
    return np.real((x * w)[..., :, None] * phase).sum(-2) / n


def _reference(kind: str, lengths: tuple):
    def ref(x):
        k = len(lengths)
        nd = x.ndim
        axes = range(nd - k, nd)
        z = np.asarray(x).astype(np.complex128)
        if kind == "irfft":
            for a in list(axes)[:-1]:
                z = _dft(z, a, inverse=True)
            y = _irfft_last(z, lengths[-1])
            return y.astype(np.float64 if x.dtype == np.complex128 else np.float32)
        for a in axes:
            z = _dft(z, a, inverse=kind == "ifft")
        if kind == "rfft":
            z = z[..., : lengths[-1] // 2 + 1]
        wide = x.dtype in (np.float64, np.complex128)
        return z.astype(np.complex128 if wide else np.complex64)
    return ref


def fft_spec(kind: str, shape: tuple, lengths: tuple, dtype=None, name: str = "", **kw):
    """A spec of lax.fft(x, kind, lengths) on x of `shape` (its dtype: complex64 for FFT,
    IFFT and IRFFT, float32 for RFFT, unless given)."""
    dtype = dtype or (f32 if kind == "rfft" else c64)
    integer = np.dtype(dtype).kind == "i"
    tol = dict(rtol=1e-4, atol=1e-4 * max(1, int(np.prod(lengths))))
    tol.update(kw)
    return Spec(fp.fft_p, lambda x: fp.fft(x, kind, lengths), _reference(kind, lengths),
                (Arg(shape, dtype, (-4, 4) if integer else (-1.0, 1.0)),),
                # jax's comparison widens inputs to 64 bits first; an integer input stays
                # 32-bit, and its float32 transform is only checked against the reference
                jax_fun=None if integer else lambda jax, x: jax.lax.fft(x, kind, lengths),
                linear=() if integer else (0,), name=name or f"{kind}-{shape}-{lengths}",
                fd_rtol=1e-6, fd_atol=1e-8, **tol)


SPECS = [
    fft_spec("fft", (8,), (8,), name="fft-1d-even"),
    fft_spec("fft", (2, 5), (5,), name="fft-1d-odd-batched"),
    fft_spec("fft", (3, 4), (3, 4), name="fft-2d"),
    fft_spec("fft", (2, 3, 2, 5), (3, 2, 5), name="fft-3d-batched"),
    fft_spec("fft", (1,), (1,), name="fft-length-1"),
    fft_spec("fft", (2, 6), (6,), dtype=f32, name="fft-float32-input"),
    fft_spec("fft", (6,), (6,), dtype=i32, name="fft-int32-input"),
    fft_spec("ifft", (6,), (6,), name="ifft-1d-even"),
    fft_spec("ifft", (3, 7), (7,), name="ifft-1d-odd-batched"),
    fft_spec("ifft", (2, 3, 4), (3, 4), name="ifft-2d-batched"),
    fft_spec("ifft", (2, 3, 3), (2, 3, 3), name="ifft-3d"),
    fft_spec("rfft", (8,), (8,), name="rfft-1d-even"),
    fft_spec("rfft", (3, 7), (7,), name="rfft-1d-odd-batched"),
    fft_spec("rfft", (4, 6), (4, 6), name="rfft-2d-even"),
    fft_spec("rfft", (2, 3, 5), (3, 5), name="rfft-2d-odd-batched"),
    fft_spec("rfft", (2, 3, 4), (2, 3, 4), name="rfft-3d"),
    fft_spec("rfft", (3, 1), (1,), name="rfft-length-1"),
    fft_spec("rfft", (3, 2), (2,), name="rfft-length-2"),
    fft_spec("rfft", (5,), (5,), dtype=i32, name="rfft-int32-input"),
    fft_spec("irfft", (5,), (8,), name="irfft-1d-even"),
    fft_spec("irfft", (3, 4), (7,), name="irfft-1d-odd-batched"),
    fft_spec("irfft", (4, 4), (4, 6), name="irfft-2d-even"),
    fft_spec("irfft", (2, 3, 3), (3, 5), name="irfft-2d-odd-batched"),
    fft_spec("irfft", (2, 3, 3), (2, 3, 4), name="irfft-3d"),
    fft_spec("irfft", (3, 1), (1,), name="irfft-length-1"),
    fft_spec("irfft", (3, 2), (2,), name="irfft-length-2"),
    fft_spec("irfft", (4,), (6,), dtype=f32, name="irfft-float32-input"),
]

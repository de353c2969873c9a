"""fnad.scipy.fft: the discrete cosine transform, dct / idct / dctn / idctn, as
jax.scipy.fft (type 2 only, norm None / "backward" / "ortho").

Composed from fnad.numpy.fft, so grad, vmap and jit need no new primitive. The DCT-II of
x (length N along the axis) is

    X[k] = 2 Σ_n x[n] cos(π k (2n + 1) / 2N)                     ("backward")

computed with one N-point FFT (Makhoul, 1980): v = x[0], x[2], x[4], ..., then the odd
samples reversed; V = fft(v); X[k] = 2 Re(exp(-iπk/2N) V[k]). The inverse undoes each
step: since v is real, V[N-k] = conj(V[k]), so z[k] = exp(-iπk/2N) V[k] follows from two
outputs, z[k] = (X[k] - i X[N-k]) / 2 (X[N] = 0); then v = irfft(V) and the interleave
is undone. "ortho" scales X[0] by 1/√(4N) and the others by 1/√(2N), which makes the
transform orthonormal; idct(dct(x)) == x under either norm. The N-d transforms apply the
1-D one along each axis in turn. Complex inputs transform real and imaginary parts
separately (as jax).

Differences from jax: dctn/idctn reject `s` and `axes` of different lengths (jax pairs
them with zip and drops the extra ones; SciPy raises too) and n or s below 1.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.numpy._core import check_arraylike, promote_dtypes_inexact

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho")


def _check(name: str, type: int, norm) -> None:  # noqa: A002
    if type != 2:
        raise NotImplementedError(f"{name}: type={type!r} is not implemented; only DCT type "
                                  "2 is (as in jax.scipy.fft)")
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm={norm!r} is not implemented; expected None, "
                         "'backward' or 'ortho'")


def _operand(name: str, x):
    check_arraylike(name, x)                       # lists are a TypeError, as jax's
    x = jnp.asarray(x)
    (x,) = promote_dtypes_inexact(x)
    return x


def _axis(name: str, axis, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _resize(name: str, x, n, axis: int):
    """x cut or zero-padded to length n along axis (unchanged for n None)."""
    if n is None:
        return x
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"{name}: the transform length must be at least 1, got {n}")
    m = x.shape[axis]
    if n <= m:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    pads = [(0, n - m if d == axis else 0) for d in range(x.ndim)]
    return jnp.pad(x, pads)


def _along(k, axis: int, ndim: int):
    """A 1-D array k shaped to broadcast along `axis` of a rank-ndim array."""
    return jnp.reshape(k, [-1 if d == axis else 1 for d in range(ndim)])


def _ortho_factors(N: int, dtype):
    """The "ortho" scale of each output: 1/√(4N) for k = 0, 1/√(2N) for the others."""
    f = np.full(N, 1.0 / math.sqrt(2 * N))
    f[0] = 1.0 / math.sqrt(4 * N)
    return jnp.asarray(f, dtype)


def _dct_real(x, axis: int, norm):
    """The DCT-II of a real array along axis (Makhoul's one-FFT algorithm)."""
    N = x.shape[axis]
    evens = lax.slice_in_dim(x, 0, None, 2, axis=axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, None, 2, axis=axis), (axis,))
    v = lax.concatenate([evens, odds], axis)                             # [..., N, ...]
    V = jnp.fft.fft(v, axis=axis)
    k = np.arange(N)
    w = _along(jnp.asarray(np.exp(-0.5j * np.pi * k / N), V.dtype), axis, x.ndim)
    out = 2 * jnp.real(V * w)
    if norm == "ortho":
        out = out * _along(_ortho_factors(N, out.dtype), axis, x.ndim)
    return out


def _idct_real(X, axis: int, norm):
    """The inverse of _dct_real along axis (SciPy's idct of type 2, a scaled DCT-III)."""
    N = X.shape[axis]
    if norm == "ortho":
        X = X / _along(_ortho_factors(N, X.dtype), axis, X.ndim)
    half = N // 2 + 1                                                    # irfft's inputs
    front = lax.slice_in_dim(X, 0, half, axis=axis)                      # X[0 .. N//2]
    # X[N - k] for k = 0 .. N//2, with X[N] = 0
    zero = jnp.zeros_like(lax.slice_in_dim(X, 0, 1, axis=axis))
    back = lax.concatenate([zero, lax.rev(lax.slice_in_dim(X, N - half + 1, N, axis=axis),
                                          (axis,))], axis)
    k = np.arange(half)
    ctype = jnp.result_type(X.dtype, jnp.complex64)
    real = jnp.finfo(ctype).dtype                  # lax.complex takes float32/64 (not float16)
    w_conj = _along(jnp.asarray(np.exp(0.5j * np.pi * k / N), ctype), axis, X.ndim)
    V = w_conj * lax.complex(front.astype(real), -back.astype(real)) / 2  # [..., N//2+1, ...]
    v = jnp.fft.irfft(V, n=N, axis=axis)                                 # [..., N, ...]
    n_even = (N + 1) // 2
    evens = lax.slice_in_dim(v, 0, n_even, axis=axis)
    odds = lax.rev(lax.slice_in_dim(v, n_even, N, axis=axis), (axis,))
    # x[2m] = evens[m], x[2m+1] = odds[m]: interleave by stacking after the axis
    if N % 2:
        odds = jnp.pad(odds, [(0, 1 if d == axis else 0) for d in range(v.ndim)])
    pairs = jnp.stack([evens, odds], axis=axis + 1)                      # [..., ⌈N/2⌉, 2, ...]
    shape = v.shape[:axis] + (2 * n_even,) + v.shape[axis + 1:]
    return lax.slice_in_dim(jnp.reshape(pairs, shape), 0, N, axis=axis)


def _per_part(fn, x, *args):
    """fn applied to a real x, or to the real and imaginary parts of a complex one."""
    if jnp.iscomplexobj(x):
        return lax.complex(fn(jnp.real(x), *args), fn(jnp.imag(x), *args))
    return fn(x, *args)


def dct(x, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
        norm: str | None = None):
    """The discrete cosine transform (type 2) of x along `axis`, x first cut or zero-padded
    to length n (scipy.fft.dct; output shape is x's with n along axis)."""
    _check("dct", type, norm)
    x = _operand("dct", x)
    axis = _axis("dct", axis, x.ndim)
    x = _resize("dct", x, n, axis)
    return _per_part(_dct_real, x, axis, norm)


def idct(x, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
         norm: str | None = None):
    """The inverse of dct (type 2) along `axis`, x first cut or zero-padded to length n
    (scipy.fft.idct): idct(dct(x, norm=m), norm=m) == x."""
    _check("idct", type, norm)
    x = _operand("idct", x)
    axis = _axis("idct", axis, x.ndim)
    x = _resize("idct", x, n, axis)
    return _per_part(_idct_real, x, axis, norm)


def _nd_args(name: str, x, s, axes):
    """(axes, lengths) for dctn/idctn: axes default to the last len(s), or all."""
    if s is not None:
        s = [operator.index(s)] if np.ndim(s) == 0 else [operator.index(v) for v in s]
        if len(s) > x.ndim:
            raise ValueError(f"{name}: s must have at most x.ndim ({x.ndim}) elements, got "
                             f"{len(s)}")
    if axes is None:
        axes = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
    else:
        axes = [_axis(name, a, x.ndim) for a in
                ([axes] if np.ndim(axes) == 0 else axes)]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: repeated axis in axes {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s and axes must have the same length, got s={s} and "
                         f"axes={axes}")
    return axes, (s if s is not None else [None] * len(axes))


def dctn(x, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
         axes: Sequence[int] | None = None, norm: str | None = None):
    """The N-d discrete cosine transform (type 2) over `axes` (scipy.fft.dctn): the 1-D
    transform along each axis, x first cut or zero-padded to s."""
    _check("dctn", type, norm)
    x = _operand("dctn", x)
    axes, lengths = _nd_args("dctn", x, s, axes)
    for axis, n in zip(axes, lengths):
        x = _per_part(_dct_real, _resize("dctn", x, n, axis), axis, norm)
    return x


def idctn(x, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
          axes: Sequence[int] | None = None, norm: str | None = None):
    """The inverse of dctn (type 2) over `axes` (scipy.fft.idctn)."""
    _check("idctn", type, norm)
    x = _operand("idctn", x)
    axes, lengths = _nd_args("idctn", x, s, axes)
    for axis, n in zip(axes, lengths):
        x = _per_part(_idct_real, _resize("idctn", x, n, axis), axis, norm)
    return x

"""fnad.image: image resampling, as jax.image (`resize`, `scale_and_translate`,
`ResizeMethod`).

Pixels are half-centred: pixel j of an axis covers [j, j + 1) and sits at j + 0.5. Scaling
an axis of m pixels by s with translation t samples output pixel i at the input coordinate

    f_i = (i + 0.5 - t) / s - 0.5                    (in pixel-index units)

and weighs input pixel j by k(|f_i - j| / κ), with k the method's kernel and κ = max(1/s, 1)
when antialiasing (the kernel stretched when downsampling, so that it filters), else 1. The
weights of each output pixel are normalized to sum to 1; an output pixel whose sample
falls outside [-0.5, m - 0.5] gets 0 (or, for "cubic-pytorch" without antialiasing, the edge
pixels are repeated instead). "area" weighs each input pixel by the length of its overlap
with the output pixel's footprint [(i - t)/s, (i + 1 - t)/s). Each resampled axis is one
(m × n) weight matrix contracted with the image, so resizing is differentiable in the image
and, for scale_and_translate, in the scale and translation. "nearest" picks pixel
⌊(i + 0.5)·m / n⌋.

Kernels (x ≥ 0): triangle max(0, 1 - x) (linear); Keys cubic (a = -0.5) on [0, 2); OpenCV's
cubic (a = -0.75, "cubic-pytorch"); Lanczos-r, r·sin(πx)·sin(πx/r)/(πx)² on [0, r).
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax
from fnad.core import Tracer, get_aval

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Image resampling methods (jax.image.ResizeMethod)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        names = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
                 "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
                 "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
                 "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
                 "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
                 "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
                 "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"')
        return names[s]


# ---- kernels (of |distance| in input pixels) ----------------------------------------------
def _triangle(x):
    return jnp.maximum(0.0, 1.0 - x)


def _cubic(a: float):
    """The cubic convolution kernel with parameter a (Keys: -0.5; OpenCV: -0.75)."""
    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


def _lanczos(r: float):
    def kernel(x):
        safe = jnp.where(x != 0, x, 1.0)
        y = r * jnp.sin(np.pi * safe) * jnp.sin(np.pi * safe / r) / (np.pi ** 2 * safe * safe)
        return jnp.where(x > r, 0.0, jnp.where(x > 1e-3, y, 1.0))
    return kernel


_AREA = object()
_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _cubic(-0.5)),
            ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)), ResizeMethod.AREA: (1, _AREA)}


def _weights(m: int, n: int, scale, translation, kernel, antialias: bool,
             edge_padding: bool, radius: int):
    """The [m, n] matrix taking an axis of m input pixels to n output pixels."""
    dtype = jnp.result_type(scale, translation)
    inv = 1.0 / scale
    sample = (jnp.arange(n, dtype=dtype) + 0.5) * inv - translation * inv - 0.5     # f_i
    if edge_padding:
        if antialias:
            if isinstance(scale, Tracer) and scale.to_concrete_value() is None:
                raise ValueError("scale_and_translate: antialiasing with edge padding "
                                 "needs a static scale")
            k = math.ceil(radius * max(1.0 / float(np.asarray(scale)), 1.0))
        else:
            k = radius
    else:
        k = 0
    src = jnp.arange(-k, m + k, dtype=dtype)                      # input pixels (padded)
    if kernel is _AREA:
        lo = jnp.arange(n, dtype=dtype) * inv - translation * inv
        w = jnp.maximum(0.0, jnp.minimum((lo + inv)[None, :], (src + 1.0)[:, None]) -
                        jnp.maximum(lo[None, :], src[:, None]))
    else:
        stretch = jnp.maximum(inv, 1.0) if antialias else 1.0
        w = kernel(jnp.abs(sample[None, :] - src[:, None]) / stretch)
    if edge_padding:                                              # fold the pad onto the edges
        clamped = np.clip(np.arange(-k, m + k), 0, m - 1)
        fold = np.zeros((m, m + 2 * k), np.float32)
        fold[clamped, np.arange(m + 2 * k)] = 1.0
        w = jnp.matmul(fold.astype(w.dtype), w, precision=lax.Precision.HIGHEST)
    total = jnp.sum(w, axis=0, keepdims=True)
    w = jnp.where(jnp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps),
                  w / jnp.where(total != 0, total, 1.0), 0.0)
    if not edge_padding:
        inside = (sample >= -0.5) & (sample <= m - 0.5)
        w = jnp.where(inside[None, :], w, 0.0)
    return w


def _resample(x, out_shape, dims, scales, translations, kernel, antialias, precision,
              edge_padding, radius):
    for d, s, t in zip(dims, scales, translations):
        m, n = x.shape[d], out_shape[d]
        w = _weights(m, n, s, t, kernel, antialias, edge_padding, radius).astype(x.dtype)
        y = jnp.tensordot(x, w, axes=([d], [0]), precision=precision)   # d moved last
        x = jnp.moveaxis(y, -1, d)
    return x


def _method(method) -> ResizeMethod:
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a ResizeMethod or a string, got {method!r}")
    return method


def _shape(shape, image) -> tuple:
    shape = tuple(operator.index(d) for d in shape)
    if len(shape) != get_aval(image).ndim:
        raise ValueError(f"shape must have length equal to the number of dimensions of x; "
                         f"{shape} vs {get_aval(image).shape}")
    return shape


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias: bool = True, precision=lax.Precision.HIGHEST):
    """`image` resampled to `shape`: along each of `spatial_dims` (K of them), the output
    pixel at x samples the input at (x - translation[k]) / scale[k] (half-centred pixels);
    samples outside the input give 0. Differentiable in the image, scale and translation."""
    shape = _shape(shape, image)
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for "
                         "scale_and_translate.")
    spatial_dims = tuple(operator.index(d) % len(shape) for d in spatial_dims)
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    if scale.shape != (len(spatial_dims),) or translation.shape != (len(spatial_dims),):
        raise ValueError(f"scale and translation need one entry per spatial dimension "
                         f"({len(spatial_dims)}), got shapes {scale.shape} and "
                         f"{translation.shape}")
    x = jnp.asarray(image)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    st = jnp.promote_types(scale.dtype, translation.dtype)
    if not jnp.issubdtype(st, jnp.inexact):
        st = jnp.result_type(float)
    scale, translation = scale.astype(st), translation.astype(st)
    radius, kernel = _KERNELS[method]
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        radius, kernel = _KERNELS[ResizeMethod.CUBIC]
    edge = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    return _resample(x, shape, spatial_dims, [scale[k] for k in range(len(spatial_dims))],
                     [translation[k] for k in range(len(spatial_dims))], kernel, antialias,
                     precision, edge, radius)


def resize(image, shape, method, antialias: bool = True, precision=lax.Precision.HIGHEST):
    """`image` resampled to `shape` (every axis whose size changes; batch and channel axes
    keep theirs). "nearest" keeps the dtype; the other methods give a float image."""
    shape = _shape(shape, image)
    method = _method(method)
    x = jnp.asarray(image)
    dims = [d for d in range(x.ndim) if x.shape[d] != shape[d]]
    if method is ResizeMethod.NEAREST:
        for d in dims:
            m, n = x.shape[d], shape[d]
            pos = (np.arange(n, dtype=np.float32) + 0.5) * np.float32(m) / np.float32(n)
            x = jnp.take(x, np.floor(pos.astype(np.float32)).astype(np.int32), axis=d)
        return x
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    radius, kernel = _KERNELS[method]
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        radius, kernel = _KERNELS[ResizeMethod.CUBIC]
    edge = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    scales = [1.0 if shape[d] == 0 else shape[d] / x.shape[d] for d in dims]
    return _resample(x, shape, dims, scales, [0.0] * len(dims), kernel, antialias, precision,
                     edge, radius)

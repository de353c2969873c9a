"""fnad.nn.initializers: weight initializers, as jax.nn.initializers.

Each builder returns `init(key, shape, dtype=None) -> array` (dtype None: float32, or
float64 under x64), drawing with fnad.random, whose keys and bits are jax's: initializers
built on `uniform` (uniform, and variance_scaling's "uniform" in float16/bfloat16) give
jax's values bit for bit; the others use fnad's erf_inv, within a few ulp of jax's (see
fnad/random.py), and variance_scaling's "uniform" in float32 may differ by an ulp (XLA
fuses its multiply-add).

    variance_scaling(scale, mode, distribution):  std = sqrt(scale / n), n =
        fan_in | fan_out | (fan_in + fan_out)/2 | sqrt(fan_in · fan_out)   (mode)
        fan_in  = shape[in_axis] · receptive field,  fan_out = shape[out_axis] · receptive
        field, the receptive field being the product of the axes in none of
        in_axis, out_axis, batch_axis
      "truncated_normal": N(0, 1) truncated to (-2, 2), times std / 0.8796... (the std of
                          that truncated normal); complex: a modulus truncated at 2
      "normal":           N(0, 1) · std
      "uniform":          U(-1, 1) · sqrt(3) std; complex: uniform on a disk
    glorot (xavier) = (1, fan_avg),  lecun = (1, fan_in),  he (kaiming) = (2, fan_in);
    *_uniform with "uniform", *_normal with "truncated_normal".
    orthogonal: Q of the QR decomposition of a Gaussian matrix, its columns' signs fixed
        so that diag(R) > 0 (Householder reflections here; LAPACK's in jax: equal to float
        rounding); delta_orthogonal: that matrix at the center of a 3-5D kernel.

Owns no primitive; imports fnad.numpy, fnad.lax, fnad.random and fnad.dtypes.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

import fnad.numpy as jnp
from fnad import dtypes, lax, random

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
           "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
           "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"]

Axes = int | Sequence[int]


@runtime_checkable
class Initializer(Protocol):
    """What the builders return: `init(key, shape, dtype=None) -> array`."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
        raise NotImplementedError


def _dtype(dtype):
    return dtypes.canonicalize_dtype(dtypes.default_float_dtype() if dtype is None else dtype)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def _no_sharding(out_sharding):
    if out_sharding is not None:
        raise NotImplementedError("fnad has no sharding: out_sharding must be None")


# ---- constants -------------------------------------------------------------------------------
def zeros(key, shape: Sequence[int], dtype=None, out_sharding=None):
    """An array of zeros (the key is ignored)."""
    _no_sharding(out_sharding)
    return jnp.zeros(_shape(shape), _dtype(dtype))


def ones(key, shape: Sequence[int], dtype=None, out_sharding=None):
    """An array of ones (the key is ignored)."""
    _no_sharding(out_sharding)
    return jnp.ones(_shape(shape), _dtype(dtype))


def constant(value, dtype=None) -> Initializer:
    """Arrays full of `value`."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        return jnp.full(_shape(shape), value, _dtype(dtype))
    return init


# ---- simple distributions --------------------------------------------------------------------
def uniform(scale=1e-2, dtype=None) -> Initializer:
    """U[0, scale)."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        dtype = _dtype(dtype)
        return random.uniform(key, _shape(shape), dtype) * jnp.array(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
    """N(0, stddev²)."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        dtype = _dtype(dtype)
        return _normal(key, _shape(shape), dtype) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
    """N(0, 1) truncated to (lower, upper), times stddev (no variance correction)."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        dtype = _dtype(dtype)
        return (random.truncated_normal(key, lower, upper, _shape(shape), dtype)
                * jnp.array(stddev, dtype))
    return init


# ---- variance scaling ------------------------------------------------------------------------
def _compute_fans(shape: tuple[int, ...], in_axis: Axes = -2, out_axis: Axes = -1,
                  batch_axis: Axes = ()) -> tuple[float, float]:
    """(fan_in, fan_out): the in and out sizes times the receptive field (the product of
    the axes in none of in_axis, out_axis, batch_axis)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional"
                         " weights tensor with default in_axis. Must be at least 2D or specify"
                         " in_axis explicitly.")

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def _normal(key, shape, dtype):
    """N(0, 1) samples; complex dtypes as jax.random.normal draws them: (re + i·im)/√2."""
    if dtypes.is_float(dtype):
        return random.normal(key, shape, dtype)
    key_re, key_im = random.split(key)
    real = np.finfo(dtype).dtype
    re = random.normal(key_re, shape, real).astype(dtype)
    im = random.normal(key_im, shape, real).astype(dtype)
    return (re + 1j * im) / jnp.array(np.sqrt(2), dtype)


def _complex_uniform(key, shape, dtype):
    """Uniform on the disk of radius √2 (mean 0, variance 1)."""
    key_r, key_theta = random.split(key)
    real = np.finfo(dtype).dtype
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
    """A complex normal of variance 1 with its modulus truncated to `upper`."""
    key_r, key_theta = random.split(key)
    real = np.finfo(dtype).dtype
    t = ((1 - jnp.exp(jnp.array(-(upper ** 2), dtype)))
         * random.uniform(key_r, shape, real).astype(dtype))
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def variance_scaling(scale, mode: str, distribution: str, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (), dtype=None) -> Initializer:
    """Samples of standard deviation sqrt(scale / n), n given by `mode` (see the module
    docstring): mode "fan_in", "fan_out", "fan_avg" or "fan_geo_avg"; distribution
    "truncated_normal", "normal" or "uniform"."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        shape = _shape(shape)
        dtype = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        is_float = dtypes.is_float(dtype)
        if distribution == "truncated_normal":
            if is_float:                   # 0.8796...: the std of N(0, 1) truncated to (-2, 2)
                stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return _normal(key, shape, dtype) * jnp.sqrt(variance)
        if distribution == "uniform":
            if is_float:
                return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                   dtype=None) -> Initializer:
    """variance_scaling(1.0, "fan_avg", "uniform") (Glorot & Bengio, 2010)."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype=None) -> Initializer:
    """variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype=None) -> Initializer:
    """variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                 dtype=None) -> Initializer:
    """variance_scaling(1.0, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
               dtype=None) -> Initializer:
    """variance_scaling(2.0, "fan_in", "uniform") (He et al., 2015)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
              dtype=None) -> Initializer:
    """variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis,
                            dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


# ---- orthogonal ------------------------------------------------------------------------------
def _householder_q(a):
    """Q of a = QR (thin: a [N, M], N >= M -> Q [N, M]) with diag(R) > 0, the unique one.

    Step k reflects rows k.. of column k onto e_k: v = x - α e_k, α = -sign(x_k)‖x‖ (no
    cancellation), a -= 2 v (vᵀ a), so R_kk = α. Q = H_0 ⋯ H_{M-1} I[:, :M], its column k
    times sign(α_k). A fori_loop over masked full-size vectors: one small loop body under
    jit, whatever M is.
    """
    N, M = a.shape
    rows = lax.broadcasted_iota(np.int32, (N,), 0)                              # [N]

    def reflect(k, carry):
        a, vs, signs = carry
        col = lax.dynamic_index_in_dim(a, k, axis=1, keepdims=False)           # [N]
        x = jnp.where(rows >= k, col, 0)
        x_k = lax.dynamic_index_in_dim(col, k, keepdims=False)
        alpha = -jnp.where(x_k >= 0, 1, -1).astype(a.dtype) * jnp.sqrt(jnp.sum(x * x))
        v = x - jnp.where(rows == k, alpha, 0)
        v_norm = jnp.sqrt(jnp.sum(v * v))
        v = v / jnp.where(v_norm == 0, 1, v_norm)
        a = a - 2 * jnp.outer(v, v @ a)                                         # [N, M]
        vs = lax.dynamic_update_index_in_dim(vs, v, k, axis=0)                  # [M, N]
        signs = lax.dynamic_update_index_in_dim(signs, jnp.sign(alpha), k, axis=0)
        return a, vs, signs

    _, vs, signs = lax.fori_loop(0, M, reflect, (a, jnp.zeros((M, N), a.dtype),
                                                 jnp.zeros((M,), a.dtype)))

    def apply(i, q):                                   # H_k q for k = M-1, ..., 0
        v = lax.dynamic_index_in_dim(vs, M - 1 - i, axis=0, keepdims=False)    # [N]
        return q - 2 * jnp.outer(v, v @ q)
    q = lax.fori_loop(0, M, apply, jnp.eye(N, M, dtype=a.dtype))               # [N, M]
    return q * signs[None, :]


def _orthogonal(key, n: int, m: int, dtype):
    """jax.random.orthogonal(key, n, (), dtype, m): an [n, m] matrix with orthonormal
    columns (n >= m) or rows (n < m), from the QR of a [max, min] Gaussian matrix."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q = _householder_q(z)
    return q.T if n < m else q


def orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """Uniformly distributed (semi-)orthogonal matrices: the axes other than
    `column_axis` are flattened into rows; rows or columns, whichever are fewer, come out
    orthonormal. Real dtypes only."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        shape = _shape(shape)
        dtype = _dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if not dtypes.is_float(dtype):
            raise NotImplementedError(f"orthogonal: dtype {dtype} is not supported by fnad, "
                                      "only real floating dtypes are")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        q = _orthogonal(key, n_rows, n_cols, dtype)                     # [n_rows, n_cols]
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.array(scale, dtype) * q
    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype=None) -> Initializer:
    """A 3D, 4D or 5D convolution kernel [*spatial, in, out] that is zero except at the
    spatial center, which holds an orthogonal [in, out] matrix (in <= out) (Xiao et al.,
    2018)."""
    def init(key, shape: Sequence[int], dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding)
        shape = _shape(shape)
        dtype = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        center = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype).at[center].set(ortho)
    return init

"""fnad.numpy's array creation: constants, conversion (astype), ranges (arange ...
geomspace), identity-like matrices, triangles, diagonals, grids, window functions.

Dtype rules follow jax.numpy: float32 is the default (float64 with x64), `full` and the
`*_like` functions keep the fill value's or the prototype's weak type, `arange` takes its
dtype from its arguments. Shapes and sizes are static; `linspace`/`logspace` are
differentiable in `start` and `stop`, and `tril`/`triu`/`diag`/`diagonal` in the array.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from fnad import dtypes
from fnad.core import Array, ConcretizationTypeError, Tracer, _at_user_line
from fnad.numpy._core import (
    ArrayLike,
    DTypeLike,
    _wrap_numpy,
    array,
    asarray,
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    placed,
)
from fnad.numpy._shape import broadcast_to, moveaxis, reshape
from fnad.numpy._ufuncs import add, floor, multiply, power
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so

__all__ = [
    "arange", "array", "asarray", "astype", "bartlett", "blackman", "copy", "diag", "diagonal",
    "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "geomspace", "hamming",
    "hanning", "identity", "indices", "kaiser", "linspace", "logspace", "meshgrid", "ones",
    "ones_like", "tri", "tril", "triu", "zeros", "zeros_like",
]


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__")
                                                and not isinstance(shape, (tuple, list))):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        traced = isinstance(shape, (tuple, list)) and any(isinstance(d, Tracer) for d in shape)
        hint = (" A traced value cannot be a size: under jit, make it a static argument "
                "(static_argnums / static_argnames)." if traced else "")
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, "
                        f"got {shape!r}.{hint}{_at_user_line()}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimensions are not allowed, got shape {out}")
    return out


def _default_dtype(dtype) -> np.dtype:
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


# ---- filled arrays ---------------------------------------------------------------------------
def zeros(shape, dtype: DTypeLike | None = None, *, device=None) -> Array:
    """An array of `shape` filled with 0 (float32 by default)."""
    return placed(so.full(_shape(shape), 0, _default_dtype(dtype)), device)


def ones(shape, dtype: DTypeLike | None = None, *, device=None) -> Array:
    """An array of `shape` filled with 1 (float32 by default)."""
    return placed(so.full(_shape(shape), 1, _default_dtype(dtype)), device)


def empty(shape, dtype: DTypeLike | None = None, *, device=None) -> Array:
    """As zeros: fnad arrays are immutable, so there is nothing to leave uninitialized."""
    return zeros(shape, dtype, device=device)


def full(shape, fill_value: ArrayLike, dtype: DTypeLike | None = None, *, device=None) -> Array:
    """An array of `shape` filled with `fill_value` (its dtype and weak type by default)."""
    check_arraylike("full", fill_value)
    shape = _shape(shape)
    if np.ndim(fill_value) == 0:
        dtype = None if dtype is None else dtypes.canonicalize_dtype(dtype)
        return placed(so.full(shape, _big_int_as(fill_value, dtype), dtype), device)
    return placed(broadcast_to(asarray(fill_value, dtype=dtype), shape), device)


def _big_int_as(value, dtype):
    """A Python int outside int32 as a NumPy scalar of `dtype` (as JAX, which converts the
    fill value to the requested dtype, so `full(s, 2**31, float32)` works); else `value`."""
    if type(value) is int and dtype is not None and not -(1 << 31) <= value < (1 << 31):
        return np.asarray(value).astype(dtype)
    return value


def zeros_like(a: ArrayLike, dtype: DTypeLike | None = None, shape=None, *,
               device=None) -> Array:
    """Zeros with a's shape and dtype (and weak type) unless given."""
    return full_like(a, 0, dtype, shape, device=device)


def ones_like(a: ArrayLike, dtype: DTypeLike | None = None, shape=None, *,
              device=None) -> Array:
    """Ones with a's shape and dtype (and weak type) unless given."""
    return full_like(a, 1, dtype, shape, device=device)


def empty_like(a: ArrayLike, dtype: DTypeLike | None = None, shape=None, *,
               device=None) -> Array:
    """As zeros_like."""
    return full_like(a, 0, dtype, shape, device=device)


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: DTypeLike | None = None,
              shape=None, *, device=None) -> Array:
    """`fill_value` in a's shape and dtype (and weak type) unless given."""
    if not hasattr(a, "aval") or not isinstance(a, (Array, Tracer)):
        check_arraylike("full_like", a)
        a = ensure_array(a)
    check_arraylike("full_like", fill_value)
    shape = None if shape is None else _shape(shape)
    if np.ndim(fill_value) == 0:
        fill_value = _big_int_as(fill_value, dtypes.canonicalize_dtype(dtype or a.dtype))
        return placed(so.full_like(a, fill_value, dtype, shape), device)
    return placed(broadcast_to(asarray(fill_value, dtype=dtype or a.dtype),
                               a.shape if shape is None else shape), device)


def from_dlpack(x, /, *, device=None, copy: bool | None = None) -> Array:
    """An array from any object that exports DLPack on the host (a NumPy array, a CPU
    torch tensor, an fnad Array...), as jax.numpy.from_dlpack; `device` puts it there."""
    return placed(asarray(np.from_dlpack(x, copy=copy)), device)


def copy(a: ArrayLike, order: str | None = None) -> Array:
    """A copy of `a` (fnad arrays are immutable, so it shares the buffer)."""
    check_arraylike("copy", a)
    return array(a, copy=True, order=order)


def astype(x: ArrayLike, dtype: DTypeLike | None, /, *, copy: bool = False,
           device=None) -> Array:
    """`x` converted to `dtype` (the default float if None), as the method x.astype.

    Complex to bool tests x != 0; complex to a real dtype keeps the real part (with a
    warning, as JAX's, since that will become an error there).
    """
    check_arraylike("astype", x)
    x = ensure_array(x)
    dtype = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if dtypes.is_complex(x.dtype):
        if dtype == np.bool_:
            return placed(lg.ne(x, lg.convert_element_type(0, x.dtype)), device)
        if not dtypes.is_complex(dtype):
            warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. "
                          "Please first use fnad.numpy.real or fnad.numpy.imag to take the "
                          "real/imaginary component of your input.", DeprecationWarning,
                          stacklevel=2)
            from fnad.numpy._ufuncs import real
            x = real(x)
    out = x if x.dtype == dtype and not x.aval.weak_type else lg.convert_element_type(x, dtype)
    return placed(out, device)


# ---- ranges ---------------------------------------------------------------------------------
def _concrete(x, what: str):
    """A static Python value for `x` (an arange bound, a size...)."""
    if isinstance(x, Tracer):
        value = x.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(
                f"{what} must be a concrete value, got a traced array {x.aval.str_short()}: "
                "array sizes must be known while tracing. Pass it as a Python number, or mark "
                "the argument static (jit's static_argnums).")
        return np.asarray(value).item()
    if isinstance(x, (Array, np.ndarray, np.generic)):
        return np.asarray(x).item()
    return x


def arange(start: ArrayLike, stop: ArrayLike | None = None, step: ArrayLike | None = None,
           dtype: DTypeLike | None = None, *, device=None) -> Array:
    """Evenly spaced values in [start, stop) (or [0, start)); the dtype follows the args."""
    check_arraylike("arange", start)
    if any(np.iscomplexobj(x) for x in (start, stop, step) if x is not None):
        raise ValueError("fnad.numpy.arange does not take complex start/stop/step (as JAX "
                         "since 0.10); use fnad.numpy.linspace for complex values")
    if dtype is None:
        dtype = dtypes.result_type(start, *(x for x in (stop, step) if x is not None))
    dtype = dtypes.canonicalize_dtype(dtype)
    start = _concrete(start, "arange's start")
    stop = None if stop is None else _concrete(stop, "arange's stop")
    step = None if step is None else _concrete(step, "arange's step")
    if stop is None and step is None:
        n = int(np.ceil(start)) if not isinstance(start, (int, np.integer)) else int(start)
        return placed(so.iota(dtype, max(n, 0)), device)
    return placed(_wrap_numpy(np.arange(start, stop, step, dtype=dtype)), device)


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: DTypeLike | None = None, axis: int = 0, *,
             device=None):
    """`num` evenly spaced values from start to stop (inclusive if endpoint).

    start and stop may be arrays (broadcast together; the new axis goes at `axis`) and
    traced values: the result is differentiable in both.
    """
    num = operator.index(_concrete(num, "linspace's num"))
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    check_arraylike("linspace", start, stop)
    if dtype is None:
        dtype = dtypes.to_inexact_dtype(dtypes.result_type(start, stop, float))
    dtype = dtypes.canonicalize_dtype(dtype)
    comp_dtype = dtypes.to_inexact_dtype(dtype)
    # (a conversion, not asarray(·, dtype): complex bounds with a real dtype keep their real
    # parts, as JAX's astype)
    start = lg.convert_element_type(asarray(start), comp_dtype)
    stop = lg.convert_element_type(asarray(stop), comp_dtype)
    bounds_shape = list(broadcast_shapes(start.shape, stop.shape, fun_name="linspace"))
    b_start, b_stop = broadcast_to(start, bounds_shape), broadcast_to(stop, bounds_shape)
    axis = len(bounds_shape) + axis + 1 if axis < 0 else axis
    bounds_shape.insert(axis, 1)                                # [..., 1 at axis, ...]
    div = num - 1 if endpoint else num
    if num > 1:
        real_dtype = np.finfo(comp_dtype).dtype if dtypes.is_complex(comp_dtype) \
            else comp_dtype
        step_shape = [1] * len(bounds_shape)
        step_shape[axis] = num
        # i / div in the computation dtype, as JAX's iota / div; the last step is exactly 1,
        # so with endpoint the last value is exactly `stop`.
        step = np.arange(num, dtype=real_dtype) / np.asarray(div, real_dtype)
        step = step.astype(comp_dtype).reshape(step_shape)
        one_minus = (np.asarray(1, comp_dtype) - step).astype(comp_dtype)
        out = add(multiply(reshape(b_start, bounds_shape), one_minus),
                  multiply(reshape(b_stop, bounds_shape), step))
        delta = _div(lg.convert_element_type(_sub(stop, start), comp_dtype),
                     np.asarray(div, comp_dtype))
    elif num == 1:
        delta = asarray(np.nan if endpoint else _sub(stop, start), comp_dtype)
        out = reshape(b_start, bounds_shape)
    else:
        empty_shape = list(bounds_shape)
        empty_shape[axis] = 0
        delta = asarray(np.nan, comp_dtype)
        out = _wrap_numpy(np.zeros(empty_shape, dtype))
    if dtypes.is_int(dtype) and not dtypes.is_int(out.dtype):
        out = floor(out)
    result = placed(lg.convert_element_type(out, dtype), device)
    return (result, placed(delta, device)) if retstep else result


def _sub(x, y):
    from fnad.numpy._ufuncs import subtract
    return subtract(x, y)


def _div(x, y):
    from fnad.numpy._ufuncs import true_divide
    return true_divide(x, y)


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
             base: ArrayLike = 10.0, dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    """base ** linspace(start, stop, num): values evenly spaced on a log scale."""
    check_arraylike("logspace", start, stop)
    if dtype is None:
        dtype = dtypes.to_inexact_dtype(dtypes.result_type(start, stop, float))
    dtype = dtypes.canonicalize_dtype(dtype)
    comp_dtype = dtypes.to_inexact_dtype(dtype)
    start = lg.convert_element_type(asarray(start), comp_dtype)   # (a complex bound's real
    stop = lg.convert_element_type(asarray(stop), comp_dtype)     # part for a real dtype)
    lin = linspace(start, stop, num,
                   endpoint=endpoint, axis=axis)
    return lg.convert_element_type(power(base, lin), dtype)


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: DTypeLike | None = None, axis: int = 0) -> Array:
    """`num` values from start to stop evenly spaced on a log scale (a geometric
    progression); start and stop may be negative (of one sign)."""
    num = operator.index(_concrete(num, "geomspace's num"))
    check_arraylike("geomspace", start, stop)
    if dtype is None:
        dtype = dtypes.to_inexact_dtype(dtypes.result_type(start, stop))
    dtype = dtypes.canonicalize_dtype(dtype)
    comp_dtype = dtypes.to_inexact_dtype(dtype)
    from fnad.numpy._ufuncs import log10, sign, true_divide
    start = lg.convert_element_type(asarray(start), comp_dtype)
    stop = lg.convert_element_type(asarray(stop), comp_dtype)
    s = sign(start)
    res = multiply(s, logspace(log10(true_divide(start, s)), log10(true_divide(stop, s)), num,
                               endpoint=endpoint, base=10.0, dtype=comp_dtype, axis=0))
    axis = canonicalize_axis(axis, res.ndim)
    if axis != 0:
        res = moveaxis(res, 0, axis)
    return lg.convert_element_type(res, dtype)


# ---- window functions ------------------------------------------------------------------------
def _window_n(M, name: str):
    """(M, n = 0..M-1 in the default float) or (M, None) when M <= 1 (a window of ones)."""
    M = int(_concrete(M, f"the M argument of fnad.numpy.{name}"))
    if M <= 1:
        return M, None
    return M, so.iota(dtypes.default_float_dtype(), M)


def _cos_term(n, M: int, k: int):
    from fnad.numpy._ufuncs import cos, true_divide
    return cos(true_divide(multiply(2 * k * np.pi, n), M - 1))            # cos(2πkn / (M-1))


def hamming(M: int) -> Array:
    """The Hamming window: 0.54 - 0.46 cos(2πn / (M-1)), n = 0..M-1."""
    M, n = _window_n(M, "hamming")
    if n is None:
        return so.full((max(M, 0),), 1, dtypes.default_float_dtype())
    return add(0.54, multiply(-0.46, _cos_term(n, M, 1)))


def hanning(M: int) -> Array:
    """The Hann window: 0.5 (1 - cos(2πn / (M-1)))."""
    M, n = _window_n(M, "hanning")
    if n is None:
        return so.full((max(M, 0),), 1, dtypes.default_float_dtype())
    return multiply(0.5, add(1, multiply(-1, _cos_term(n, M, 1))))


def blackman(M: int) -> Array:
    """The Blackman window: 0.42 - 0.5 cos(2πn / (M-1)) + 0.08 cos(4πn / (M-1))."""
    M, n = _window_n(M, "blackman")
    if n is None:
        return so.full((max(M, 0),), 1, dtypes.default_float_dtype())
    return add(add(0.42, multiply(-0.5, _cos_term(n, M, 1))), multiply(0.08, _cos_term(n, M, 2)))


def bartlett(M: int) -> Array:
    """The Bartlett (triangular) window: 1 - |2n + 1 - M| / (M-1)."""
    from fnad.numpy._ufuncs import absolute
    M, n = _window_n(M, "bartlett")
    if n is None:
        return so.full((max(M, 0),), 1, dtypes.default_float_dtype())
    return add(1, multiply(absolute(add(multiply(2, n), 1 - M)), -1 / (M - 1)))


def kaiser(M: int, beta: ArrayLike) -> Array:
    """The Kaiser window: i0(beta sqrt(1 - ((n - α)/α)²)) / i0(beta), α = (M-1)/2."""
    from fnad.numpy._ufunc_extras import i0
    from fnad.numpy._ufuncs import sqrt, square, true_divide
    M, n = _window_n(M, "kaiser")
    if n is None:
        return so.full((max(M, 0),), 1, dtypes.default_float_dtype())
    alpha = 0.5 * (M - 1)
    r = square(multiply(add(n, -alpha), 1 / alpha))
    return true_divide(i0(multiply(beta, sqrt(add(1, multiply(r, -1))))), i0(beta))


# ---- identity-like matrices, triangles and diagonals ------------------------------------------
def eye(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None, *,
        device=None) -> Array:
    """An N x M matrix with ones on diagonal k (float32 by default)."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got N={N}, M={M}")
    return placed(_wrap_numpy(np.eye(N, M, operator.index(k), dtype=_default_dtype(dtype))),
                  device)


def identity(n: int, dtype: DTypeLike | None = None) -> Array:
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: DTypeLike | None = None) -> Array:
    """An N x M matrix with ones at and below diagonal k."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    # float32 even with x64, as jax.numpy.tri (eye follows the default float instead).
    dtype = np.float32 if dtype is None else dtypes.canonicalize_dtype(dtype)
    return _wrap_numpy(np.tri(N, M, operator.index(k), dtype=dtype))


def _triangle(name: str, m, k: int, lower: bool):
    check_arraylike(name, m)
    m = ensure_array(m)
    if m.ndim < 2:
        raise ValueError(f"Argument to fnad.numpy.{name} must be at least 2D, got shape "
                         f"{m.shape}")
    N, M = m.shape[-2:]
    k = operator.index(k)
    mask = np.tri(N, M, k, dtype=bool) if lower else ~np.tri(N, M, k - 1, dtype=bool)
    mask = np.broadcast_to(mask, m.shape)
    return lg.select_n(mask, so.full_like(m, 0), m)           # gradient 0 outside the triangle


def tril(m: ArrayLike, k: int = 0) -> Array:
    """m with the elements above diagonal k set to 0 (over the last two axes)."""
    return _triangle("tril", m, k, lower=True)


def triu(m: ArrayLike, k: int = 0) -> Array:
    """m with the elements below diagonal k set to 0 (over the last two axes)."""
    return _triangle("triu", m, k, lower=False)


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The diagonal `offset` of the (axis1, axis2) planes, as the last axis of the result.

    Read as a strided slice of the flattened plane: entry [i, i + offset] of an (n, m)
    plane sits at i·(m + 1) + offset.
    """
    check_arraylike("diagonal", a)
    a = ensure_array(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions, got shape "
                         f"{a.shape}")
    ax1, ax2 = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
    if ax1 == ax2:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = operator.index(offset)
    a = moveaxis(a, (ax1, ax2), (-2, -1))                      # [..., n, m]
    *batch, n, m = a.shape
    d = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    flat = reshape(a, (*batch, n * m))                          # [..., n·m]
    if d == 0:
        return so.slice_in_dim(flat, 0, 0, 1, len(batch))
    start = offset if offset >= 0 else -offset * m
    return so.slice_in_dim(flat, start, start + (d - 1) * (m + 1) + 1, m + 1, len(batch))


def diag(v: ArrayLike, k: int = 0) -> Array:
    """The k-th diagonal of a 2-D `v`, or a square matrix with the 1-D `v` on diagonal k."""
    check_arraylike("diag", v)
    v = ensure_array(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("diag input must be 1d or 2d")
    L = v.shape[0]
    n = L + abs(k)
    if L == 0:
        return so.full((n, n), 0, v.dtype)
    # v's entries interleaved with n zeros land on the diagonal of the flattened n x n.
    lo = k if k >= 0 else -k * n
    hi = n * n - lo - L - (L - 1) * n
    flat = so.pad(v, np.zeros((), v.dtype), [(lo, hi, n)])      # [n·n]
    return so.reshape(flat, (n, n))


# ---- grids -------------------------------------------------------------------------------
def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> list[Array]:
    """Coordinate arrays from 1-D coordinate vectors ('xy': Cartesian, 'ij': matrix order)."""
    check_arraylike("meshgrid", *xi)
    args = [ensure_array(x) for x in xi]
    if any(a.ndim != 1 for a in args):
        raise ValueError("Arguments to fnad.numpy.meshgrid must be 1D, got shapes "
                         f"{[a.shape for a in args]}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    dims = list(range(len(args)))
    if indexing == "xy" and len(args) >= 2:
        dims[0], dims[1] = 1, 0                                  # x varies along columns
    full_shape = [0] * len(args)
    for a, d in zip(args, dims, strict=True):
        full_shape[d] = a.shape[0]
    out = []
    for a, d in zip(args, dims, strict=True):
        shape = [1] * len(args) if sparse else list(full_shape)
        shape[d] = a.shape[0]
        out.append(so.broadcast_in_dim(a, shape, (d,)))
    return out


def indices(dimensions, dtype: DTypeLike = int, sparse: bool = False):
    """Index grids for an array of shape `dimensions`: out[i][..] = the index along axis i."""
    dimensions = _shape(dimensions)
    dtype = dtypes.canonicalize_dtype(dtype)
    n = len(dimensions)
    out = []
    for i, d in enumerate(dimensions):
        shape = [1] * n if sparse else list(dimensions)
        shape[i] = d
        out.append(so.broadcasted_iota(dtype, shape, i))
    if sparse:
        return tuple(out)
    if not out:
        return _wrap_numpy(np.zeros((0,), dtype))
    return so.concatenate([so.reshape(o, (1, *dimensions)) for o in out], 0)


"""fnad.numpy's reductions: sum, prod, max, min, all, any, mean, var, std, argmax, argmin,
cumulative sums and products, count_nonzero, average, ptp.

JAX's dtype rules: sums and products of small ints and bools accumulate in the default int
(`sum(int8)` is int32, `sum(bool)` is int32, `sum(uint8)` is uint32); float16/bfloat16 sums
and means accumulate in float32 and cast back; `mean`/`var` of ints give the default float;
results are never weakly typed. `axis` is None, an int or a tuple (negative counts from the
end); `where=` masks fill with the reduction's identity; `initial` joins the result.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from fnad import dtypes
from fnad.numpy._core import (
    ArrayLike,
    DTypeLike,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_dtypes_inexact,
)
from fnad.numpy._logic import _where
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as so

_B1 = np.dtype(np.bool_)

__all__ = [
    "all", "amax", "amin", "any", "argmax", "argmin", "average", "count_nonzero", "cumprod",
    "cumsum", "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "ptp", "std",
    "sum", "var",
]


# ---- helpers ---------------------------------------------------------------------------------
def reduction_axes(ndim: int, axis) -> tuple[int, ...]:
    """`axis` (None, an int or a sequence) as distinct non-negative axes, in the given order."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list, np.ndarray)):
        axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    else:
        axes = (canonicalize_axis(axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"duplicate value in 'axis': {axis}")
    return axes


def _promote_integer_dtype(dt: np.dtype) -> np.dtype:
    # NumPy promotes to 64 bits; JAX to the default int (int32 unless x64).
    if dt == _B1:
        return dtypes.default_int_dtype()
    if dtypes.issubdtype(dt, np.unsignedinteger):
        default_uint = np.dtype(np.uint64 if dtypes.default_int_dtype() == np.int64
                                else np.uint32)
        return default_uint if dt.itemsize < default_uint.itemsize else dt
    if dtypes.is_int(dt):
        default_int = dtypes.default_int_dtype()
        return default_int if dt.itemsize < default_int.itemsize else dt
    return dt


def _upcast_f16(dt: np.dtype) -> np.dtype:
    if dt in (np.dtype(np.float16), np.dtype(dtypes.bfloat16)):
        return np.dtype(np.float32)
    return dt


def _init_value(dt: np.dtype, init) -> np.ndarray:
    """The identity `init` (0, 1, ±inf, True...) as a value of `dt` (±inf -> int limits)."""
    if dt == _B1:
        return np.array(init > 0, dtype=dt)
    if dtypes.is_int(dt) and np.isinf(init):
        info = np.iinfo(dt)
        return np.array(info.min if init < 0 else info.max, dtype=dt)
    return np.array(init, dtype=dt)


def _as_dtype(x, dt: np.dtype):
    """x as a strongly typed `dt` (reductions never return weak types, as in JAX)."""
    if x.aval.dtype == dt and not x.aval.weak_type:
        return x
    return lg.convert_element_type(x, dt)


def _reduce(name: str, a, reduce_fn, op, init, *, bool_reduce_fn=None, bool_op=None,
            has_identity: bool = True, preproc=None, upcast_f16: bool = False, axis=None,
            dtype=None, keepdims: bool = False, initial=None, where=None,
            promote_integers: bool = False):
    check_arraylike(name, a)
    a = ensure_array(a)
    if where is not None:
        check_arraylike(name, where)
    if initial is None and not has_identity and where is not None:
        raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                         "where mask one has to specify 'initial'")
    if preproc is not None:
        a = preproc(a)
    axes = reduction_axes(a.ndim, axis)
    if initial is None and not has_identity and builtins.any(a.shape[d] == 0 for d in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    if dtype is None:
        result_dtype = a.aval.dtype
        if promote_integers:
            result_dtype = _promote_integer_dtype(result_dtype)
    else:
        result_dtype = dtypes.canonicalize_dtype(dtype)
    comp_dtype = _upcast_f16(result_dtype) if upcast_f16 and dtypes.is_inexact(result_dtype) \
        else result_dtype
    a = _as_dtype(a, comp_dtype)
    if comp_dtype == _B1 and bool_reduce_fn is not None:
        reduce_fn, op = bool_reduce_fn, bool_op
    if where is not None:
        a = _where(where, a, _init_value(comp_dtype, init))
    result = reduce_fn(a, axes) if axes else a
    if initial is not None:
        initial = lg.convert_element_type(initial, comp_dtype)
        if initial.aval.shape:
            raise ValueError(f"initial value must be a scalar. Got array of shape "
                             f"{initial.aval.shape}")
        result = op(initial, result)
    if keepdims and axes:
        result = so.expand_dims(result, sorted(axes))
    return _as_dtype(result, result_dtype)


def _cast_to_numeric(a):
    # bool -> int32 even with x64 (jax's to_numeric_dtype); integer promotion comes after.
    return _as_dtype(a, np.dtype(np.int32)) if a.aval.dtype == _B1 else a


def _cast_to_bool(a):
    if dtypes.is_complex(a.aval.dtype):
        a = ew.real(a)
    return a if a.aval.dtype == _B1 else lg.ne(a, _init_value(a.aval.dtype, 0))


# ---- sum, prod, max, min, all, any ------------------------------------------------------------
def sum(a: ArrayLike, axis=None, dtype: DTypeLike | None = None, out: None = None,  # noqa: A001
        keepdims: bool = False, initial: ArrayLike | None = None,
        where: ArrayLike | None = None, promote_integers: bool = True):
    """Sum over `axis` (all axes by default). Small ints and bools sum in the default int."""
    _no_out("sum", out)
    return _reduce("sum", a, red.reduce_sum, ew.add, 0, preproc=_cast_to_numeric,
                   bool_reduce_fn=lambda x, axes: red.reduce_or(x, axes), bool_op=lg.bitwise_or,
                   upcast_f16=dtype is None, axis=axis, dtype=dtype, keepdims=keepdims,
                   initial=initial, where=where, promote_integers=promote_integers)


def prod(a: ArrayLike, axis=None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, initial: ArrayLike | None = None,
         where: ArrayLike | None = None, promote_integers: bool = True):
    """Product over `axis` (all axes by default)."""
    _no_out("prod", out)
    return _reduce("prod", a, lambda x, axes: red.reduce_prod(x, axes), ew.mul, 1,
                   preproc=_cast_to_numeric,
                   bool_reduce_fn=lambda x, axes: red.reduce_and(x, axes),
                   bool_op=lg.bitwise_and, upcast_f16=dtype is None, axis=axis, dtype=dtype,
                   keepdims=keepdims, initial=initial, where=where,
                   promote_integers=promote_integers)


def max(a: ArrayLike, axis=None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None):
    """Maximum over `axis` (NaN if any element is NaN); `where` needs `initial`."""
    _no_out("max", out)
    return _reduce("max", a, lambda x, axes: red.reduce_max(x, axes), ew.max, -np.inf,
                   has_identity=False, axis=axis, keepdims=keepdims, initial=initial,
                   where=where)


def min(a: ArrayLike, axis=None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None):
    """Minimum over `axis` (NaN if any element is NaN); `where` needs `initial`."""
    _no_out("min", out)
    return _reduce("min", a, lambda x, axes: red.reduce_min(x, axes), ew.min, np.inf,
                   has_identity=False, axis=axis, keepdims=keepdims, initial=initial,
                   where=where)


amax, amin = max, min


def all(a: ArrayLike, axis=None, out: None = None, keepdims: bool = False, *,  # noqa: A001
        where: ArrayLike | None = None):
    """Whether every element over `axis` is true (a bool array)."""
    _no_out("all", out)
    return _reduce("all", a, lambda x, axes: red.reduce_and(x, axes), lg.bitwise_and, True,
                   preproc=_cast_to_bool, axis=axis, keepdims=keepdims, where=where)


def any(a: ArrayLike, axis=None, out: None = None, keepdims: bool = False, *,  # noqa: A001
        where: ArrayLike | None = None):
    """Whether any element over `axis` is true (a bool array)."""
    _no_out("any", out)
    return _reduce("any", a, lambda x, axes: red.reduce_or(x, axes), lg.bitwise_or, False,
                   preproc=_cast_to_bool, axis=axis, keepdims=keepdims, where=where)


def _no_out(name: str, out) -> None:
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to fnad.numpy.{name} is not supported.")


# ---- mean, var, std ------------------------------------------------------------------------
def _count(a, axis, keepdims, where, dtype):
    """The number of elements each reduction over `axis` sees (honouring `where`)."""
    if where is None:
        axes = reduction_axes(a.ndim, axis)
        n = math.prod(a.shape[d] for d in axes)
        return np.array(n, dtype=dtype)
    mask = _broadcast_mask(where, a.shape)
    return sum(mask, axis, dtype=dtype, keepdims=keepdims)


def _broadcast_mask(where, shape):
    from fnad.numpy._shape import broadcast_to
    return broadcast_to(where, shape)


def mean(a: ArrayLike, axis=None, dtype: DTypeLike | None = None, out: None = None,
         keepdims: bool = False, *, where: ArrayLike | None = None):
    """Arithmetic mean over `axis`; integer inputs give the default float."""
    _no_out("mean", out)
    check_arraylike("mean", a)
    a = ensure_array(a)
    if dtype is None:
        result_dtype = dtypes.to_inexact_dtype(a.aval.dtype)
    else:
        result_dtype = dtypes.canonicalize_dtype(dtype)
    comp_dtype = _upcast_f16(result_dtype) if dtypes.is_inexact(result_dtype) else result_dtype
    normalizer = _count(a, axis, keepdims, where, comp_dtype)
    total = sum(a, axis, dtype=comp_dtype, keepdims=keepdims, where=where)
    return _as_dtype(ew.div(total, normalizer), result_dtype)


def _var_promote_types(a_dtype: np.dtype, dtype) -> tuple[np.dtype, np.dtype]:
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtype)
        if not dtypes.is_complex(dtype) and dtypes.is_complex(a_dtype):
            raise ValueError("fnad.numpy.var does not support a real dtype for complex input")
        comp = dtype
    elif not dtypes.is_inexact(a_dtype):
        dtype = comp = dtypes.to_inexact_dtype(a_dtype)
    else:
        dtype = np.finfo(a_dtype).dtype if dtypes.is_complex(a_dtype) else a_dtype
        comp = a_dtype
    return _upcast_f16(comp), np.dtype(dtype)


def var(a: ArrayLike, axis=None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: float | None = None):
    """Variance over `axis`: Σ|x - mean|² / (N - ddof) (NaN when N - ddof <= 0)."""
    _no_out("var", out)
    check_arraylike("var", a)
    if correction is not None:
        if ddof:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    a = ensure_array(a)
    comp_dtype, dtype = _var_promote_types(a.aval.dtype, dtype)
    a = _as_dtype(a, comp_dtype)
    a_mean = (_mean(a, axis, dtype=comp_dtype, keepdims=True, where=where) if mean is None
              else _as_dtype(ensure_array(mean), comp_dtype))
    centered = ew.sub(a, a_mean) if a_mean.aval.shape == a.aval.shape \
        else ew.sub(a, so.broadcast_in_dim(a_mean, a.aval.shape, range(a.ndim)))
    if dtypes.is_complex(comp_dtype):
        centered = ew.real(ew.mul(centered, ew.conj(centered)))
        comp_dtype = centered.aval.dtype
    else:
        centered = ew.square(centered)
    normalizer = _count(a, axis, keepdims, where, comp_dtype)
    normalizer = ew.sub(normalizer, np.array(ddof, dtype=comp_dtype))
    total = sum(centered, axis, dtype=comp_dtype, keepdims=keepdims, where=where)
    result = _as_dtype(ew.div(total, normalizer), dtype)
    # (a weak NaN, as JAX: an integer `dtype` gives a weak default float, not an error)
    return _where(lg.gt(normalizer, np.array(0, comp_dtype)), result, np.nan)


_mean = mean


def std(a: ArrayLike, axis=None, dtype: DTypeLike | None = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: float | None = None):
    """Standard deviation over `axis`: sqrt(var)."""
    if dtype is not None and not dtypes.is_inexact(dtypes.canonicalize_dtype(dtype)):
        raise ValueError(f"dtype argument to fnad.numpy.std must be inexact; got "
                         f"{np.dtype(dtype).name}")
    return ew.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                       correction=correction))


def average(a: ArrayLike, axis=None, weights: ArrayLike | None = None, returned: bool = False,
            keepdims: bool = False):
    """Weighted mean Σ a·w / Σ w over `axis` (with `returned`: also Σ w)."""
    check_arraylike("average", a)
    a = ensure_array(a)
    axes = reduction_axes(a.ndim, axis)
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        avg = mean(a, axis=axis, keepdims=keepdims)
        weights_sum = so.full((), math.prod(a.shape[d] for d in axes), avg.aval.dtype)
    else:
        check_arraylike("average", weights)
        a, weights = map(ensure_array, promote_dtypes_inexact(a, weights))
        if a.shape != weights.shape:
            if axis is None:
                raise ValueError("Axis must be specified when shapes of a and weights differ.")
            if weights.shape != tuple(a.shape[d] for d in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            order = np.argsort(axes)
            weights = so.transpose(weights, tuple(int(i) for i in order))   # axes ascending
            weights = so.broadcast_in_dim(weights, a.shape, sorted(axes))
        weights_sum = sum(weights, axis=axis, keepdims=keepdims)
        avg = ew.div(sum(ew.mul(a, weights), axis=axis, keepdims=keepdims), weights_sum)
    if returned:
        if avg.shape != weights_sum.shape:
            weights_sum = so.broadcast_in_dim(weights_sum, avg.shape, ())
        return avg, weights_sum
    return avg


def ptp(a: ArrayLike, axis=None, out: None = None, keepdims: bool = False):
    """Peak to peak: max - min over `axis`."""
    _no_out("ptp", out)
    return ew.sub(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a: ArrayLike, axis=None, keepdims: bool = False):
    """The number of nonzero elements over `axis` (default int dtype)."""
    check_arraylike("count_nonzero", a)
    a = ensure_array(a)
    nz = lg.ne(a, _init_value(a.aval.dtype, 0))
    return sum(nz, axis=axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


# ---- argmax, argmin ------------------------------------------------------------------------------
def _arg_reduce(name: str, lax_name: str, a, axis, keepdims):
    check_arraylike(name, a)
    a = ensure_array(a)
    if axis is None:
        dims = tuple(range(a.ndim))
        a = so.reshape(a, (a.aval.size,))
        axis = 0
    else:
        axis = canonicalize_axis(axis, a.ndim)
        dims = (axis,)
    if a.shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    result = getattr(red, lax_name)(a, axis, dtypes.default_int_dtype())
    return so.expand_dims(result, dims) if keepdims else result


def argmax(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None):
    """Index of the maximum along `axis` (of the flattened array if None); first on ties."""
    _no_out("argmax", out)
    return _arg_reduce("argmax", "argmax", a, axis, keepdims)


def argmin(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None):
    """Index of the minimum along `axis` (of the flattened array if None); first on ties."""
    _no_out("argmin", out)
    return _arg_reduce("argmin", "argmin", a, axis, keepdims)


# ---- cumulative --------------------------------------------------------------------------------
def _cumulative(name: str, lax_name: str, a, axis, dtype, promote_integers: bool = False):
    from fnad.primitives import cumulative
    check_arraylike(name, a)
    a = ensure_array(a)
    if axis is None or not a.shape:
        a = so.reshape(a, (a.aval.size,))
        axis = 0
    axis = canonicalize_axis(axis, a.ndim)
    if dtype is None:
        result_dtype = a.aval.dtype
        if promote_integers or result_dtype == _B1:
            result_dtype = _promote_integer_dtype(result_dtype)
        comp_dtype = result_dtype
    elif np.dtype(dtype) == _B1:
        result_dtype = _B1          # accumulate truth values as ints, then test them
        if a.aval.dtype != _B1:
            a = lg.ne(a, _init_value(a.aval.dtype, 0))
        comp_dtype = _promote_integer_dtype(_B1)
    else:
        result_dtype = comp_dtype = dtypes.canonicalize_dtype(dtype)
    result = getattr(cumulative, lax_name)(_as_dtype(a, comp_dtype), axis=axis)
    return _as_dtype(result, result_dtype)


def cumsum(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
           out: None = None):
    """Running sum along `axis` (of the flattened array if None)."""
    _no_out("cumsum", out)
    return _cumulative("cumsum", "cumsum", a, axis, dtype)


def cumprod(a: ArrayLike, axis: int | None = None, dtype: DTypeLike | None = None,
            out: None = None):
    """Running product along `axis` (of the flattened array if None)."""
    _no_out("cumprod", out)
    return _cumulative("cumprod", "cumprod", a, axis, dtype)


def _cumulative_api(name, lax_name, identity, x, axis, dtype, include_initial):
    check_arraylike(name, x)
    x = ensure_array(x)
    if not x.shape:
        raise ValueError(f"The input must be non-scalar to take a cumulative {name[11:]}, "
                         f"however a scalar value or scalar array was given.")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"The input array has rank {x.ndim}, however axis was not set "
                             "to an explicit value. The axis argument is only optional for "
                             "one-dimensional arrays.")
        axis = 0
    axis = canonicalize_axis(axis, x.ndim)
    # (as JAX: cumulative_sum promotes small integers to the default int, cumulative_prod
    # keeps them, as cumprod does)
    out = _cumulative(name, lax_name, x, axis, dtype, promote_integers=lax_name == "cumsum")
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        first = so.full(shape, identity, out.aval.dtype)
        out = so.concatenate([first, out], axis)
    return out


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None,
                   dtype: DTypeLike | None = None, include_initial: bool = False):
    """Array API cumulative sum (`include_initial` prepends a 0)."""
    return _cumulative_api("cumulative_sum", "cumsum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None,
                    dtype: DTypeLike | None = None, include_initial: bool = False):
    """Array API cumulative product (`include_initial` prepends a 1)."""
    return _cumulative_api("cumulative_prod", "cumprod", 1, x, axis, dtype, include_initial)


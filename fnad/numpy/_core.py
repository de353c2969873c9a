"""fnad.numpy's shared helpers: array conversion, argument checks, dtype and shape promotion.

Every `fnad.numpy` module (and nn, indexing, sorting, extras) builds on these, with
jax.numpy's semantics: `asarray`/`array`, `check_arraylike`, `promote_dtypes[_inexact]`,
`promote_shapes`, `promote_args[_inexact]`, `canonicalize_axis`, `ensure_array`.

Hot path: `jnp.sin(x)` calls `promote_args_inexact` with one fnad array of a float dtype; that
case, and binary ops on arrays of equal dtype and shape, return after a few type checks.
Imports fnad.core, fnad.dtypes, fnad.config and the primitive wrappers; never the other
fnad.numpy modules.
"""
from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from fnad import dtypes
from fnad.config import config
from fnad.core import Array, ShapedArray, Tracer, _at_user_line, default_backend, get_aval
from fnad.primitives._util import scalar_like
from fnad.primitives.logic import convert_element_type
from fnad.primitives.shape_ops import broadcast_in_dim, reshape

__all__ = [
    "ArrayLike", "DTypeLike", "array", "asarray", "broadcast_shapes", "canonicalize_axis",
    "check_arraylike", "ensure_array", "is_array", "promote_args", "promote_args_inexact",
    "promote_args_numeric", "promote_dtypes", "promote_dtypes_inexact", "promote_dtypes_numeric",
    "promote_shapes", "result_shape",
]

ArrayLike = Any   # an fnad Array or Tracer, a NumPy array or scalar, a Python scalar
DTypeLike = Any

_ARRAY_TYPES = (Array, Tracer)
_PY_SCALARS = (bool, int, float, complex)
_INEXACT = frozenset(np.dtype(t) for t in (dtypes.bfloat16, np.float16, np.float32,
                                           np.float64, np.complex64, np.complex128))


def is_array(x) -> bool:
    """An fnad Array or a Tracer (the values fnad.numpy returns)."""
    return type(x) is Array or isinstance(x, Tracer)


# ---- argument checks ---------------------------------------------------------------------
def _arraylike(x) -> bool:
    t = type(x)
    return (t is Array or t in _PY_SCALARS or isinstance(x, (Tracer, np.ndarray, np.generic))
            or isinstance(x, _PY_SCALARS) or hasattr(x, "__jax_array__"))


def check_arraylike(fun_name: str, *args: Any) -> None:
    """TypeError, as jax.numpy's, when an argument is a list/tuple (or another non-array).

    jax.numpy refuses lists where NumPy would convert them: the conversion is a silent
    per-element copy (and under a trace, one operation per element).
    """
    for pos, arg in enumerate(args):
        if not _arraylike(arg):
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got "
                            f"{type(arg).__name__} at position {pos}.")


def canonicalize_axis(axis, ndim: int) -> int:
    """`axis` in [0, ndim) (negative axes count from the end); AxisError if out of range."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, got {axis!r} of type "
                        f"{type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)   # a ValueError and an IndexError
    return axis + ndim if axis < 0 else axis


# ---- conversion --------------------------------------------------------------------------
def _wrap_numpy(value: np.ndarray, weak_type: bool = False) -> Array:
    backend = default_backend()
    aval = ShapedArray(value.shape, value.dtype, weak_type)
    return Array(backend.device_put(value), aval, backend)


def _leaves(x, out: list) -> list:
    """The leaves of a nested list/tuple (arrays and scalars), in order."""
    if isinstance(x, (list, tuple)):
        for e in x:
            _leaves(e, out)
    else:
        out.append(x)
    return out


def _stack_nested(x, dtype) -> Any:
    """A nested list/tuple holding tracers as one traced array: convert, reshape, concat."""
    if not isinstance(x, (list, tuple)):
        return asarray(x, dtype)
    parts = [_stack_nested(e, dtype) for e in x]
    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"setting an array element with a sequence: the nested sequence is "
                         f"inhomogeneous (element shapes {sorted(shapes)})")
    shape = parts[0].shape if parts else (0,)
    from fnad.primitives.shape_ops import concatenate
    return concatenate([reshape(p, (1, *shape)) for p in parts], 0)   # [len(x), *shape]


def _convert_sequence(x, dtype):
    leaves = _leaves(x, [])
    if dtype is None:
        # jnp: a list's dtype is the promotion of its elements', and never weak.
        if leaves:
            dtype = dtypes.result_type(*(_leaf_for_dtype(e) for e in leaves))
        else:
            dtype = dtypes.canonicalize_dtype(np.asarray(x).dtype)
    if any(isinstance(e, Tracer) for e in leaves):
        return _stack_nested(x, dtype)
    if any(type(e) is Array for e in leaves):
        x = _replace_arrays(x)
    try:
        value = np.array(x, dtype=dtype)
    except ValueError as err:
        raise ValueError(f"cannot convert the nested sequence to an array: {err}") from None
    return _wrap_numpy(value)


def _leaf_for_dtype(e):
    if type(e) is Array or isinstance(e, (Tracer, np.ndarray, np.generic)):
        return e
    if type(e) in _PY_SCALARS:
        return e
    if isinstance(e, _PY_SCALARS) or hasattr(e, "__array__"):
        return get_aval(e).dtype
    raise TypeError(f"fnad.numpy.array: cannot convert element {e!r} of type "
                    f"{type(e).__name__} to an array element")


def _replace_arrays(x):
    if isinstance(x, (list, tuple)):
        return [_replace_arrays(e) for e in x]
    return np.asarray(x) if type(x) is Array else x


def asarray(a: Any, dtype: DTypeLike | None = None, order: str | None = None, *,
            copy: bool | None = None, device=None) -> Any:
    """`a` as an fnad array (a Tracer stays one), as jax.numpy.asarray.

    Python scalars give weakly typed 0-d arrays (`asarray(1.0)` is a weak float32) unless a
    dtype is given; NumPy arrays take fnad's canonical dtype (float64 -> float32 with x64
    off); nested lists/tuples are stacked, also when they hold traced values. `device` (a
    Device, backend name or platform) puts the result there (fnad.device_put).
    """
    if device is not None:
        return placed(asarray(a, dtype, order, copy=copy), device)
    if order not in (None, "C", "K", "A"):
        raise NotImplementedError(f"fnad.numpy.asarray: order={order!r} is not supported")
    t = type(a)
    if t is Array or isinstance(a, Tracer):
        if dtype is None:
            return a
        dt = dtypes.canonicalize_dtype(dtype)
        if dt == a.aval.dtype and not a.aval.weak_type:
            return a
        return convert_element_type(a, dt)
    if hasattr(a, "__jax_array__") and not isinstance(a, np.ndarray):
        return asarray(a.__jax_array__(), dtype)
    if isinstance(a, (list, tuple)):
        return _convert_sequence(a, None if dtype is None else dtypes.canonicalize_dtype(dtype))
    if dtype is None:
        aval = get_aval(a)    # Python scalars: weak; NumPy values: canonical dtype
        dt, weak = aval.dtype, aval.weak_type
    else:
        dt, weak = dtypes.canonicalize_dtype(dtype), False
    if isinstance(a, np.ndarray) and copy is False:
        value = np.asarray(a, dtype=dt)
    else:
        # A private copy: fnad arrays are immutable, and the caller may write to `a` later.
        value = np.array(a, dtype=dt, copy=True)
    return _wrap_numpy(value, weak)


def placed(out, device):
    """`out` on `device` (a Device, a backend name or a platform), as JAX's `device=`
    argument of asarray and the creation functions; where the default backend puts it for
    None (and under a transformation, where placement is jit's)."""
    if device is None:
        return out
    from fnad.devices import device_put
    return device_put(out, device)


def array(object: Any, dtype: DTypeLike | None = None, copy: bool = True, order: str | None = "K",
          ndmin: int = 0, *, device=None) -> Any:
    """A new fnad array from `object`, as jax.numpy.array (`ndmin` prepends 1-dims; `device`
    as asarray's)."""
    out = asarray(object, dtype, None if order == "K" else order, device=device)
    if type(out) is Array and out is object:   # a new object, like jnp.array; buffers are
        out = Array(out._value, out.aval, out._backend)   # immutable, so they may be shared
    if ndmin > out.ndim:
        out = reshape(out, (1,) * (ndmin - out.ndim) + tuple(out.shape))
    return out


def ensure_array(x: Any) -> Any:
    """`x` if it is already an fnad Array or Tracer, else `asarray(x)`."""
    if type(x) is Array or isinstance(x, Tracer):
        return x
    return asarray(x)


# ---- dtype promotion ---------------------------------------------------------------------
def _convert(x, dtype: np.dtype, weak_type: bool):
    """`x` as `dtype`, weakly typed iff `weak_type` (JAX's _convert_element_type).

    Python scalars stay literals: as themselves when their own weak type is the target,
    else as a weak 0-d array (weak target) or a NumPy 0-d value (strong target).
    """
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        aval = x.aval
        # (A strong x never needs to become weak: a weak result means every operand was.)
        if aval.dtype == dtype and (not aval.weak_type or weak_type):
            return x
        return convert_element_type(x, dtype, weak_type)
    if t is int:
        # As JAX: the int must fit the default int dtype (else OverflowError), and then
        # wraps to a narrower integer dtype (`uint8_array + -2` adds 254).
        int_dtype = get_aval(x).dtype
        if dtype.kind in "iu" and dtype != int_dtype:
            x = np.asarray(x, int_dtype).astype(dtype)
            return _wrap_numpy(x, True) if weak_type else x
    if t in _PY_SCALARS:
        if not weak_type:
            return np.asarray(x, dtype=dtype)
        if dtype == dtypes.default_float_dtype() and t is not complex:
            return float(x)
        if dtype == dtypes.default_int_dtype() and t is not float and t is not complex:
            return int(x)
        if dtype == dtypes.default_complex_dtype():
            return complex(x)
        return scalar_like(x, dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype == dtype and not weak_type:
            return x
        return _wrap_numpy(np.asarray(x, dtype=dtype), weak_type)
    return _convert(asarray(x), dtype, weak_type)


def promote_dtypes(*args: Any) -> list:
    """`args` converted to their common dtype by JAX's promotion lattice (weak types kept)."""
    if len(args) < 2:
        return [ensure_array(a) for a in args]
    to_dtype, weak_type = dtypes.result_type(*args, return_weak_type_flag=True)
    return [_convert(a, to_dtype, weak_type) for a in args]


def promote_dtypes_inexact(*args: Any) -> list:
    """As promote_dtypes, then bool/int results become the default inexact dtype."""
    if len(args) == 1:
        x = args[0]
        if (type(x) is Array or isinstance(x, Tracer)) and x.aval.dtype in _INEXACT:
            return [x]
    to_dtype, weak_type = dtypes.result_type(*args, return_weak_type_flag=True)
    to_dtype = dtypes.to_inexact_dtype(to_dtype)
    if len(args) == 1:
        x = args[0]
        return [ensure_array(_convert(x, to_dtype, weak_type))]
    return [_convert(a, to_dtype, weak_type) for a in args]


def promote_dtypes_numeric(*args: Any) -> list:
    """As promote_dtypes, then a bool result becomes int32 (jax's to_numeric_dtype)."""
    to_dtype, weak_type = dtypes.result_type(*args, return_weak_type_flag=True)
    if to_dtype == np.bool_:
        to_dtype = np.dtype(np.int32)
    if len(args) == 1:
        return [ensure_array(_convert(args[0], to_dtype, weak_type))]
    return [_convert(a, to_dtype, weak_type) for a in args]


# ---- shape promotion ---------------------------------------------------------------------
def broadcast_shapes(*shapes: Sequence[int], fun_name: str = "broadcast_shapes") -> tuple:
    """The NumPy broadcast of `shapes`; ValueError naming every shape if incompatible."""
    if len(shapes) == 2 and shapes[0] == shapes[1] and not isinstance(shapes[0], int):
        return tuple(shapes[0])
    shapes = tuple((s,) if isinstance(s, (int, np.integer)) else s for s in shapes)
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            d = operator.index(d)
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                shown = ", ".join(str(tuple(int(e) for e in s)) for s in shapes)
                raise ValueError(f"{fun_name}: incompatible shapes for broadcasting: {shown}"
                                 f"{_at_user_line()}")
    return tuple(out)


def _shape(x) -> tuple:
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        return x.aval.shape
    if t in _PY_SCALARS:
        return ()
    return np.shape(x)


def result_shape(fun_name: str, *args: Any) -> tuple:
    """The broadcast shape of `args` (arrays and scalars)."""
    return broadcast_shapes(*(_shape(a) for a in args), fun_name=fun_name)


def _rank_promotion_check(fun_name: str, shapes) -> None:
    mode = config.jax_numpy_rank_promotion
    if mode == "allow":
        return
    nonscalar = [s for s in shapes if len(s)]
    if len({len(s) for s in nonscalar}) > 1:
        msg = (f"Following NumPy automatic rank promotion for {fun_name} on shapes "
               f"{' '.join(str(tuple(s)) for s in shapes)}. Set the jax_numpy_rank_promotion "
               "config option to 'allow' to disable this message.")
        if mode == "raise":
            raise ValueError("Operands could not be broadcast together with " + msg[0].lower()
                             + msg[1:])
        warnings.warn(msg, stacklevel=3)


def promote_shapes(fun_name: str, *args: Any) -> list:
    """`args` broadcast to their common shape (NumPy rules) with `broadcast_in_dim`.

    Rank-0 operands are left alone: binary primitives accept scalar operands, and a
    broadcast costs an eager dispatch. Respects config `jax_numpy_rank_promotion`.
    """
    if len(args) < 2:
        return list(args)
    shapes = [_shape(a) for a in args]
    first = shapes[0]
    if all(s == first for s in shapes[1:]):
        return list(args)
    out_shape = broadcast_shapes(*shapes, fun_name=fun_name)
    _rank_promotion_check(fun_name, shapes)
    nd = len(out_shape)
    out = []
    for a, s in zip(args, shapes, strict=True):
        if not s or tuple(s) == out_shape:
            out.append(a)
        else:
            out.append(broadcast_in_dim(a, out_shape, tuple(range(nd - len(s), nd))))
    return out


def promote_args(fun_name: str, *args: Any) -> list:
    """check_arraylike, then promote_dtypes and promote_shapes."""
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes(*args))


def promote_args_numeric(fun_name: str, *args: Any) -> list:
    """check_arraylike, then promote_dtypes_numeric and promote_shapes."""
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes_numeric(*args))


def promote_args_inexact(fun_name: str, *args: Any) -> list:
    """check_arraylike, then promote_dtypes_inexact and promote_shapes."""
    if len(args) == 1:
        x = args[0]
        if (type(x) is Array or isinstance(x, Tracer)) and x.aval.dtype in _INEXACT:
            return [x]
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes_inexact(*args))

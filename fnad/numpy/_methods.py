"""Operators and array methods of fnad.Array and of every Tracer, from fnad.numpy.

`install()` (called once, by `import fnad.numpy`) sets the same attributes on both
classes, as JAX does for its Array and Tracer: arithmetic, comparison and bitwise
operators with their reflected forms, `x[idx]` and `x.at[idx]` (from fnad.numpy._indexing),
iteration over the leading axis, and the NumPy-style methods (`x.sum()`, `x.astype(...)`,
`x.reshape(...)`, `x.T` ...). Binary operators return NotImplemented for operand types
fnad does not know (lists, for one), so Python raises its usual TypeError.

`__array_priority__` (set in core) makes NumPy defer to these operators, so
`np.float32(2) * x` and `np_array + x` give fnad arrays, not NumPy ones.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import Array, Tracer
from fnad.numpy import _linalg_ops as la
from fnad.numpy import _logic as lo
from fnad.numpy import _reductions as rd
from fnad.numpy import _shape as sh
from fnad.numpy import _ufuncs as uf
from fnad.numpy._core import placed
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so

_SCALARS = (bool, int, float, complex)
_OPERAND_TYPES = (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex)


def _accepts(other) -> bool:
    t = type(other)
    return t is Array or t in _SCALARS or isinstance(other, _OPERAND_TYPES) or hasattr(
        other, "__jax_array__")


_COMMON = frozenset({Array, float, int, bool})   # operand types that skip _accepts


def _binary(fn):
    def op(self, other):
        if type(other) not in _COMMON and not _accepts(other):
            return NotImplemented
        return fn(self, other)
    op.__name__ = fn.__name__
    return op


def _reflected(fn):
    def op(self, other):
        if type(other) not in _COMMON and not _accepts(other):
            return NotImplemented
        return fn(other, self)
    op.__name__ = "r" + fn.__name__
    return op


def _pow(self, other, mod=None):
    if mod is not None:
        raise NotImplementedError("pow() with a modulus is not supported for fnad arrays")
    if not _accepts(other):
        return NotImplemented
    return uf.power(self, other)


def _rpow(self, other, mod=None):
    if mod is not None:
        raise NotImplementedError("pow() with a modulus is not supported for fnad arrays")
    if not _accepts(other):
        return NotImplemented
    return uf.power(other, self)


def _matmul(self, other):
    if not _accepts(other):
        return NotImplemented
    return la.matmul(self, other)


def _rmatmul(self, other):
    if not _accepts(other):
        return NotImplemented
    return la.matmul(other, self)


# ---- indexing and iteration ----------------------------------------------------------------
def _getitem(self, idx):
    from fnad.numpy import _indexing
    return _indexing.getitem(self, idx)


def _at(self):
    from fnad.numpy import _indexing
    return _indexing.IndexUpdateHelper(self)


def _iter(self):
    if not self.aval.shape:
        raise TypeError("iteration over a 0-d array")
    n = self.aval.shape[0]
    if n == 0:
        return iter(())
    return (so.index_in_dim(self, i, 0, keepdims=False) for i in range(n))


# ---- methods ---------------------------------------------------------------------------------
def _astype(self, dtype, copy: bool = False, device=None):
    """x converted to `dtype` (canonicalized: 64-bit types need jax_enable_x64)."""
    dt = dtypes.canonicalize_dtype(dtype)
    if dtypes.is_complex(self.aval.dtype) and not dtypes.is_complex(dt):
        self = uf.real(self)   # NumPy warns and drops the imaginary part; so does JAX
    return placed(lg.convert_element_type(self, dt), device)


def _reshape(self, *args, order: str = "C", **kwargs):
    """x.reshape(shape) or x.reshape(d0, d1, ...)."""
    if "shape" in kwargs:
        shape = kwargs.pop("shape")
    elif len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        shape = args[0]
    else:
        shape = args
    if kwargs:
        raise TypeError(f"reshape() got unexpected keyword arguments {sorted(kwargs)}")
    return sh.reshape(self, shape, order=order)


def _transpose(self, *axes):
    """x.transpose(), x.transpose(axes) or x.transpose(a0, a1, ...)."""
    if not axes or (len(axes) == 1 and axes[0] is None):
        return sh.transpose(self)
    if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
        axes = axes[0]
    return sh.transpose(self, axes)


def _take(self, indices, axis=None, out=None, mode=None, unique_indices=False,
          indices_are_sorted=False, fill_value=None):
    from fnad.numpy._indexing import take
    return take(self, indices, axis=axis, out=out, mode=mode, unique_indices=unique_indices,
                indices_are_sorted=indices_are_sorted, fill_value=fill_value)


def _sort(self, axis: int | None = -1, *, kind=None, order=None, stable=True,
          descending=False):
    from fnad.numpy._sorting import sort
    return sort(self, axis=axis, kind=kind, order=order, stable=stable, descending=descending)


def _argsort(self, axis: int | None = -1, *, kind=None, order=None, stable=True,
             descending=False):
    from fnad.numpy._sorting import argsort
    return argsort(self, axis=axis, kind=kind, order=order, stable=stable,
                   descending=descending)


def _copy(self):
    from fnad.numpy._creation import copy
    return copy(self)


def _flatten(self, order: str = "C"):
    return sh.ravel(self, order)


def _round(self, decimals: int = 0, out=None):
    return uf.round(self, decimals, out)


def _clip(self, min=None, max=None, *, a_min=None, a_max=None):  # noqa: A002
    return uf.clip(self, min, max, a_min=a_min, a_max=a_max)


def _dunder_round(self, ndigits=None):
    # round(x) gives integers, round(x, n) keeps the dtype (as JAX's operator round).
    out = uf.round(self, 0 if ndigits is None else ndigits)
    return _astype(out, int) if ndigits is None else out


_OPERATORS = {
    "__add__": _binary(uf.add), "__radd__": _reflected(uf.add),
    "__sub__": _binary(uf.subtract), "__rsub__": _reflected(uf.subtract),
    "__mul__": _binary(uf.multiply), "__rmul__": _reflected(uf.multiply),
    "__truediv__": _binary(uf.true_divide), "__rtruediv__": _reflected(uf.true_divide),
    "__floordiv__": _binary(uf.floor_divide), "__rfloordiv__": _reflected(uf.floor_divide),
    "__mod__": _binary(uf.remainder), "__rmod__": _reflected(uf.remainder),
    "__divmod__": _binary(uf.divmod), "__rdivmod__": _reflected(uf.divmod),
    "__pow__": _pow, "__rpow__": _rpow,
    "__matmul__": _matmul, "__rmatmul__": _rmatmul,
    "__and__": _binary(lo.bitwise_and), "__rand__": _reflected(lo.bitwise_and),
    "__or__": _binary(lo.bitwise_or), "__ror__": _reflected(lo.bitwise_or),
    "__xor__": _binary(lo.bitwise_xor), "__rxor__": _reflected(lo.bitwise_xor),
    "__lshift__": _binary(lo.left_shift), "__rlshift__": _reflected(lo.left_shift),
    "__rshift__": _binary(lo.right_shift), "__rrshift__": _reflected(lo.right_shift),
    "__eq__": _binary(lo.equal), "__ne__": _binary(lo.not_equal),
    "__lt__": _binary(lo.less), "__le__": _binary(lo.less_equal),
    "__gt__": _binary(lo.greater), "__ge__": _binary(lo.greater_equal),
    "__neg__": uf.negative, "__pos__": uf.positive, "__abs__": uf.absolute,
    "__invert__": lo.bitwise_not, "__round__": _dunder_round,
    "__getitem__": _getitem, "__iter__": _iter,
}

_METHODS = {
    "astype": _astype, "reshape": _reshape, "transpose": _transpose,
    "sum": rd.sum, "prod": rd.prod, "mean": rd.mean, "var": rd.var, "std": rd.std,
    "max": rd.max, "min": rd.min, "all": rd.all, "any": rd.any, "ptp": rd.ptp,
    "argmax": rd.argmax, "argmin": rd.argmin, "cumsum": rd.cumsum, "cumprod": rd.cumprod,
    "clip": _clip, "round": _round, "conj": uf.conjugate, "conjugate": uf.conjugate,
    "dot": la.dot, "trace": la.trace, "flatten": _flatten, "ravel": sh.ravel,
    "squeeze": sh.squeeze, "swapaxes": sh.swapaxes, "repeat": sh.repeat,
    "diagonal": lambda self, offset=0, axis1=0, axis2=1: _diagonal(self, offset, axis1, axis2),
    "take": _take, "sort": _sort, "argsort": _argsort, "copy": _copy,
}

_PROPERTIES = {
    "T": property(lambda self: sh.transpose(self)),
    "mT": property(la.matrix_transpose),
    "real": property(uf.real),
    "imag": property(uf.imag),
    "at": property(_at),
    "nbytes": property(lambda self: self.aval.size * self.aval.dtype.itemsize),
    "itemsize": property(lambda self: self.aval.dtype.itemsize),
}


def _diagonal(self, offset, axis1, axis2):
    from fnad.numpy._creation import diagonal
    return diagonal(self, offset, axis1, axis2)


def install() -> None:
    """Set the operators, methods and properties on Array and Tracer (idempotent).

    Assigning __eq__ after class creation leaves each class's own __hash__ alone (None
    for Array, a helpful TypeError for Tracer).
    """
    for cls in (Array, Tracer):
        for name, fn in {**_OPERATORS, **_METHODS, **_PROPERTIES}.items():
            setattr(cls, name, fn)

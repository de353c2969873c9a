"""fnad.numpy's selection, comparison, logic and classification: where, comparisons,
isclose, array_equal / array_equiv, logical and bitwise ops, isnan/isinf/isfinite,
iscomplex / isreal, iterable, signbit, nan_to_num, copysign, heaviside, fmax/fmin.

Booleans results carry no tangent; functions that select (where, copysign, heaviside,
fmax, nan_to_num) send the cotangent only to the chosen entries, which is what makes the
double-where trick NaN-safe. Built on the promotion helpers of _core and _ufuncs.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    asarray,
    check_arraylike,
    ensure_array,
    promote_args,
    promote_args_inexact,
    promote_args_numeric,
    promote_dtypes,
    promote_dtypes_inexact,
    promote_shapes,
)
from fnad.numpy._ufuncs import _B1, _binary, _const, _dtype, _full_like, _lax_where
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg

__all__ = [
    "allclose", "array_equal", "array_equiv", "bitwise_and", "bitwise_invert",
    "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "copysign", "equal", "fmax", "fmin", "greater", "greater_equal", "heaviside", "invert",
    "isclose", "iscomplex", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal",
    "iterable", "left_shift", "less", "less_equal", "logical_and", "logical_not", "logical_or",
    "logical_xor", "nan_to_num", "not_equal", "right_shift", "signbit", "where",
]


# ---- fmax / fmin ----------------------------------------------------------------------------
def fmax(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The larger of x1 and x2, ignoring NaNs."""
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The smaller of x1 and x2, ignoring NaNs."""
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


# ---- where -----------------------------------------------------------------------------------
def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, /, *,
          size: int | None = None, fill_value=None) -> Array:
    """x where condition else y, elementwise (broadcasting all three).

    The gradient flows only to the selected entries, so the double-where trick
    `where(ok, f(where(ok, x, safe)), other)` gives NaN-free gradients.
    The one-argument form is nonzero(condition, size=size, fill_value=fill_value): under a
    trace it needs a static `size`, since the number of indices depends on the data.
    """
    if x is None and y is None:
        from fnad.numpy import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided "
                         f"to fnad.numpy.where, got {x} and {y}.")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where.")
    check_arraylike("where", condition, x, y)
    return _where(condition, x, y)


def _where(condition, x, y):
    c = ensure_array(condition)
    if c.aval.dtype != _B1:
        c = lg.ne(c, _const(c, 0))
    x, y = promote_dtypes(x, y)
    if not c.aval.shape:
        x, y = promote_shapes("where", x, y)
    else:
        c, x, y = promote_shapes("where", c, x, y)
    return lg.select_n_p.bind(c, y, x)


# ---- comparisons -------------------------------------------------------------------------------
def equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x == y."""
    return lg.eq_p.bind(*_binary("equal", x, y))


def not_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x != y."""
    return lg.ne_p.bind(*_binary("not_equal", x, y))


def _ordered(prim, x, y):
    # Complex numbers compare lexicographically (real part, then imaginary), as NumPy.
    if dtypes.is_complex(_dtype(x)):
        return _lax_where(lg.eq(ew.real(x), ew.real(y)),
                          prim.bind(ew.imag(x), ew.imag(y)), prim.bind(ew.real(x), ew.real(y)))
    return prim.bind(x, y)


def less(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x < y."""
    return _ordered(lg.lt_p, *_binary("less", x, y))


def less_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x <= y."""
    return _ordered(lg.le_p, *_binary("less_equal", x, y))


def greater(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x > y."""
    return _ordered(lg.gt_p, *_binary("greater", x, y))


def greater_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x >= y."""
    return _ordered(lg.ge_p, *_binary("greater_equal", x, y))


def isclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
            equal_nan: bool = False) -> Array:
    """|a - b| <= atol + rtol·|b| elementwise (infinities equal only to themselves)."""
    a, b = promote_args("isclose", a, b)
    a, b = map(ensure_array, promote_args_inexact("isclose", a, b))
    dt = a.aval.dtype
    if dtypes.is_complex(dt):
        dt = np.finfo(dt).dtype
    rtol = lg.convert_element_type(rtol, dt)
    atol = lg.convert_element_type(atol, dt)
    in_range = lg.le(ew.abs(ew.sub(a, b)), ew.add(atol, ew.mul(rtol, ew.abs(b))))
    out = logical_or(equal(a, b), logical_and(isfinite(b), in_range))
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def allclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
             equal_nan: bool = False) -> Array:
    """Whether every element of a is close to b's (see isclose); a 0-d bool array."""
    from fnad.numpy._reductions import all as _all
    check_arraylike("allclose", a, b)
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array:
    """Whether a1 and a2 have the same shape and elements; a 0-d bool array."""
    from fnad.numpy._reductions import all as _all
    a1, a2 = asarray(a1), asarray(a2)
    if a1.shape != a2.shape:
        return asarray(False)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return _all(eq)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array:
    """Whether a1 and a2 are equal after broadcasting (False if they cannot broadcast); a
    0-d bool array."""
    from fnad.numpy._reductions import all as _all
    a1, a2 = asarray(a1), asarray(a2)
    try:
        eq = equal(a1, a2)
    except ValueError:                                      # shapes do not broadcast
        return asarray(False)
    return _all(eq)


# ---- floating-point classification ---------------------------------------------------------
def isnan(x: ArrayLike, /) -> Array:
    """x is NaN (never for integers)."""
    check_arraylike("isnan", x)
    x = ensure_array(x)
    return lg.ne(x, x)


def isfinite(x: ArrayLike, /) -> Array:
    """x is neither infinite nor NaN."""
    check_arraylike("isfinite", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if dtypes.is_float(dt):
        return lg.is_finite(x)
    if dtypes.is_complex(dt):
        return lg.bitwise_and(lg.is_finite(ew.real(x)), lg.is_finite(ew.imag(x)))
    return _full_like(x, True, np.bool_)


def isinf(x: ArrayLike, /) -> Array:
    """x is +inf or -inf."""
    check_arraylike("isinf", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if dtypes.is_float(dt):                    # (a strong inf: the result is never weak)
        return lg.eq(ew.abs(x), np.array(np.inf, dt))
    if dtypes.is_complex(dt):
        re, im = ew.real(x), ew.imag(x)
        inf = np.array(np.inf, re.aval.dtype)
        return lg.bitwise_or(lg.eq(ew.abs(re), inf), lg.eq(ew.abs(im), inf))
    return _full_like(x, False, np.bool_)


def iscomplex(x: ArrayLike) -> Array:
    """Whether each element has a nonzero imaginary part (False for real dtypes)."""
    check_arraylike("iscomplex", x)
    x = ensure_array(x)
    im = ew.imag(x) if dtypes.is_complex(x.aval.dtype) else _full_like(x, 0)
    return lg.ne(im, _const(im, 0))                 # (weak for a weak x, as jax's)


def isreal(x: ArrayLike) -> Array:
    """Whether each element has a zero imaginary part (True for real dtypes)."""
    check_arraylike("isreal", x)
    x = ensure_array(x)
    im = ew.imag(x) if dtypes.is_complex(x.aval.dtype) else _full_like(x, 0)
    return lg.eq(im, _const(im, 0))                 # (weak for a weak x, as jax's)


def iterable(y) -> bool:
    """Whether `iter(y)` works (a Python bool; a 0-d array is not iterable)."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


def _isposneginf(name, infinity, x):
    check_arraylike(name, x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if dtypes.is_float(dt):                    # (a strong inf: the result is never weak)
        return lg.eq(x, np.array(infinity, dt))
    if dtypes.is_complex(dt):
        raise ValueError("isposinf/isneginf are not well defined for complex types")
    return _full_like(x, False, np.bool_)


def isposinf(x: ArrayLike, /, out: None = None) -> Array:
    """x is +inf."""
    return _isposneginf("isposinf", np.inf, x)


def isneginf(x: ArrayLike, /, out: None = None) -> Array:
    """x is -inf."""
    return _isposneginf("isneginf", -np.inf, x)


def nan_to_num(x: ArrayLike, copy: bool = True, nan: ArrayLike = 0.0,
               posinf: ArrayLike | None = None, neginf: ArrayLike | None = None) -> Array:
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's max), -inf -> `neginf`."""
    check_arraylike("nan_to_num", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if not dtypes.is_inexact(dt):
        return x
    if dtypes.is_complex(dt):
        return ew.complex(nan_to_num(ew.real(x), nan=nan, posinf=posinf, neginf=neginf),
                          nan_to_num(ew.imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(dt)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = _where(isnan(x), asarray(nan, dtype=dt), x)
    out = _where(isposinf(out), asarray(posinf, dtype=dt), out)
    return _where(isneginf(out), asarray(neginf, dtype=dt), out)


def signbit(x: ArrayLike, /) -> Array:
    """Whether the sign bit is set: x < 0, and -0.0 (the sign of a NaN is not seen)."""
    (x,) = promote_args("signbit", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    zero = np.zeros((), dt)                      # strong: the result is never weak, as jax's
    if dtypes.is_int(dt):
        return lg.lt(x, zero)
    if dt == _B1:
        return _full_like(x, False, np.bool_)
    if not dtypes.is_float(dt):
        raise ValueError(f"fnad.numpy.signbit is not well defined for {dt}")
    # Without a bitcast primitive, -0.0 is told from +0.0 by the sign of 1/x = -inf.
    neg_zero = lg.bitwise_and(lg.eq(x, zero), lg.lt(ew.div(_const(x, 1), x), zero))
    return lg.bitwise_or(lg.lt(x, zero), neg_zero)


def copysign(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """|x1| with the sign of x2."""
    x1, x2 = map(ensure_array, promote_args_inexact("copysign", x1, x2))
    if dtypes.is_complex(_dtype(x1)):
        raise TypeError("copysign does not support complex-valued inputs")
    return _where(signbit(x2), ew.neg(ew.abs(x1)), ew.abs(x1))


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    check_arraylike("heaviside", x1, x2)
    x1, x2 = map(ensure_array, promote_dtypes_inexact(x1, x2))
    return _where(lg.lt(x1, 0), _const(x1, 0),
                  _where(lg.gt(x1, 0), _const(x1, 1), _where(isnan(x1), x1, x2)))


# ---- logical and bitwise ---------------------------------------------------------------------
def _to_bool(x):
    x = ensure_array(x)
    return x if x.aval.dtype == _B1 else lg.ne(x, _const(x, 0))


def logical_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x and y, elementwise, on truth values."""
    return lg.and_p.bind(*map(_to_bool, promote_args("logical_and", x, y)))


def logical_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x or y, elementwise, on truth values."""
    return lg.or_p.bind(*map(_to_bool, promote_args("logical_or", x, y)))


def logical_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x xor y, elementwise, on truth values."""
    return lg.xor_p.bind(*map(_to_bool, promote_args("logical_xor", x, y)))


def logical_not(x: ArrayLike, /) -> Array:
    """not x, elementwise, on truth values."""
    return lg.not_p.bind(_to_bool(promote_args("logical_not", x)[0]))


def bitwise_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x & y (logical and for booleans)."""
    return lg.and_p.bind(*_binary("bitwise_and", x, y))


def bitwise_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x | y (logical or for booleans)."""
    return lg.or_p.bind(*_binary("bitwise_or", x, y))


def bitwise_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x ^ y (logical xor for booleans)."""
    return lg.xor_p.bind(*_binary("bitwise_xor", x, y))


def bitwise_not(x: ArrayLike, /) -> Array:
    """~x (logical not for booleans)."""
    return lg.not_p.bind(ensure_array(promote_args("bitwise_not", x)[0]))


invert = bitwise_invert = bitwise_not


def left_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x << y."""
    return lg.shift_left(*promote_args_numeric("left_shift", x, y))


def right_shift(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 >> x2 (arithmetic for signed integers, logical for unsigned)."""
    x1, x2 = promote_args_numeric("right_shift", x1, x2)
    if dtypes.issubdtype(_dtype(x1), np.unsignedinteger):
        return lg.shift_right_logical(x1, x2)
    return lg.shift_right_arithmetic(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift

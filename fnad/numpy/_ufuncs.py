"""fnad.numpy's elementwise arithmetic: +-*/, powers, exponentials and logarithms, trigonometry,
rounding, clip, maximum/minimum, complex parts (comparisons, logic and where: _logic).

Each function promotes its arguments (dtypes by JAX's lattice, shapes by NumPy broadcasting;
see _core) and binds primitives. Derivatives come from the primitives' rules, so each
composition is chosen for its gradient as well as its value: `abs` at 0 has slope 1 (as JAX),
`maximum` splits ties, `where` sends zeros to the unselected branch (the double-where trick
gives NaN-free gradients), `hypot` and `logaddexp` avoid overflow.

Hot path: a unary function on an fnad array of a float dtype, and a binary one on two arrays
of one dtype and shape, go straight to `bind` after a couple of type checks.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fnad import dtypes
from fnad.config import config
from fnad.core import Array, Tracer, is_concrete
from fnad.numpy._core import (
    ArrayLike,
    check_arraylike,
    ensure_array,
    promote_args,
    promote_args_inexact,
    promote_args_numeric,
    promote_dtypes_inexact,
    promote_dtypes_numeric,
    promote_shapes,
)
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg
from fnad.primitives._util import scalar_like
from fnad.primitives.shape_ops import full as _lax_full

__all__ = [
    "abs", "absolute", "acos", "acosh", "add", "angle", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "around", "asin", "asinh", "atan", "atan2", "atanh", "cbrt",
    "ceil", "clip", "conj", "conjugate", "cos", "cosh", "deg2rad", "degrees", "divide", "divmod",
    "exp", "exp2", "expm1", "fabs", "fix", "float_power", "floor", "floor_divide", "fmod", "hypot",
    "imag", "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "maximum", "minimum",
    "mod", "multiply", "negative", "positive", "pow", "power", "rad2deg", "radians", "real",
    "reciprocal", "remainder", "rint", "round", "sign", "sin", "sinc", "sinh", "sqrt", "square",
    "subtract", "tan", "tanh", "true_divide", "trunc",
]

_INEXACT = frozenset(np.dtype(t) for t in (dtypes.bfloat16, np.float16, np.float32,
                                           np.float64, np.complex64, np.complex128))
_B1 = np.dtype(np.bool_)


def _inexact(name: str, x):
    """`x` promoted for a float-valued unary function (fast path: already inexact)."""
    if (type(x) is Array or isinstance(x, Tracer)) and x.aval.dtype in _INEXACT:
        return x
    return promote_args_inexact(name, x)[0]


def _binary(name: str, x, y):
    """`x, y` promoted. Fast paths: two arrays that agree on dtype and shape, and an array
    of the default float or int dtype with a Python number (which stays a literal)."""
    x_arr = type(x) is Array or isinstance(x, Tracer)
    y_arr = type(y) is Array or isinstance(y, Tracer)
    if x_arr and y_arr:
        xa, ya = x.aval, y.aval
        if xa.dtype == ya.dtype and xa.shape == ya.shape and not (
                xa.weak_type and ya.weak_type and xa.dtype == _B1):   # (weak bools: strong)
            return x, y
    elif x_arr and type(y) in _NUMBERS:
        out = _with_literal(x.aval.dtype, y)
        if out is not None:
            return x, out
    elif y_arr and type(x) in _NUMBERS:
        out = _with_literal(y.aval.dtype, x)
        if out is not None:
            return out, y
    return promote_args(name, x, y)


_NUMBERS = (int, float)


def _with_literal(dt: np.dtype, v):
    """v as the Python literal an array of dtype `dt` combines with, or None if it must be
    converted (x64 off: f32 with int/float -> float; i32 with int -> int)."""
    if dt == (_F64 if config.jax_enable_x64 else _F32):
        # (a large int goes the slow way, which raises OverflowError as JAX)
        return float(v) if type(v) is float or -(1 << 31) <= v < (1 << 31) else None
    if type(v) is int and dt == (_I64 if config.jax_enable_x64 else _I32):
        return v
    return None


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)


def _const(x, value):
    """A weakly typed scalar `value` of x's dtype (a literal under a trace)."""
    return scalar_like(value, x.aval.dtype)


def _full_like(x, value, dtype=None):
    """An array of x's shape filled with `value` (x's dtype and weak type by default)."""
    if dtype is None:
        if x.aval.weak_type:
            return _lax_full(x.aval.shape, scalar_like(value, x.aval.dtype))
        dtype = x.aval.dtype
    return _lax_full(x.aval.shape, value, dtype)


def _is_kind(x, kind) -> bool:
    return dtypes.issubdtype(x.aval.dtype, kind)


def _lax_where(c, x, y):
    return lg.select_n(c, y, x)


# ---- arithmetic ---------------------------------------------------------------------------
def add(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x + y elementwise (logical or on booleans)."""
    x, y = _binary("add", x, y)
    if _is_bool(x):
        return lg.or_p.bind(x, y)
    return ew.add_p.bind(x, y)


def subtract(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x - y elementwise."""
    return ew.sub_p.bind(*_binary("subtract", x, y))


def multiply(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x * y elementwise (logical and on booleans)."""
    x, y = _binary("multiply", x, y)
    if _is_bool(x):
        return lg.and_p.bind(x, y)
    return ew.mul_p.bind(x, y)


def _is_bool(x) -> bool:
    """Whether a promoted operand is boolean (cheap for arrays and Python numbers)."""
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        return x.aval.dtype == _B1
    if t is float or t is int or t is complex:
        return False
    return t is bool or np.result_type(x) == _B1


def _dtype(x) -> np.dtype:
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        return x.aval.dtype
    return dtypes.result_type(x)


def true_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 / x2 elementwise, in an inexact dtype (ints divide as floats)."""
    if ((type(x1) is Array or isinstance(x1, Tracer)) and type(x1) is type(x2)
            and x1.aval.dtype == x2.aval.dtype and x1.aval.dtype in _INEXACT
            and x1.aval.shape == x2.aval.shape):
        return ew.div_p.bind(x1, x2)
    return ew.div_p.bind(*promote_args_inexact("true_divide", x1, x2))


divide = true_divide


def floor_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 // x2: the quotient rounded toward -inf, as NumPy (not C's truncation)."""
    x1, x2 = map(ensure_array, promote_args_numeric("floor_divide", x1, x2))
    dt = x1.aval.dtype
    if dtypes.issubdtype(dt, np.unsignedinteger):
        return ew.div(x1, x2)
    if dtypes.issubdtype(dt, np.integer):
        quotient = ew.div(x1, x2)                     # rounds toward zero
        select = lg.bitwise_and(lg.ne(ew.sign(x1), ew.sign(x2)), lg.ne(ew.rem(x1, x2), 0))
        return _lax_where(select, ew.sub(quotient, 1), quotient)
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide does not support complex-valued inputs")
    return _float_divmod(x1, x2)[0]


def _float_divmod(x1, x2):
    # CPython's float_divmod: fix up the C remainder so it takes the sign of the divisor.
    mod = ew.rem(x1, x2)
    x1_corrected = _lax_where(lg.eq(x2, 0), x1, ew.sub(x1, mod))
    div = ew.div(x1_corrected, x2)
    ind = lg.bitwise_and(lg.ne(mod, 0), lg.ne(ew.sign(x2), ew.sign(mod)))
    mod = _lax_where(ind, ew.add(mod, x2), mod)
    div = _lax_where(ind, ew.sub(div, 1.0), div)
    return ew.round(div), mod


def remainder(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 % x2 with the sign of x2 (NumPy/Python semantics, not C's fmod)."""
    x1, x2 = map(ensure_array, promote_args_numeric("remainder", x1, x2))
    if _is_kind(x1, np.integer):
        x2 = _lax_where(lg.eq(x2, 0), _const(x1, 1), x2)   # x % 0 is 0 for ints, not a crash
    trunc_mod = ew.rem(x1, x2)
    do_plus = lg.bitwise_and(lg.ne(lg.lt(trunc_mod, 0), lg.lt(x2, 0)), lg.ne(trunc_mod, 0))
    return _lax_where(do_plus, ew.add(trunc_mod, x2), trunc_mod)


mod = remainder


def fmod(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """C's fmod: the remainder of truncated division, with the sign of x1."""
    x1, x2 = map(ensure_array, promote_args_numeric("fmod", x1, x2))
    if _is_kind(x1, np.integer):
        x2 = _lax_where(lg.eq(x2, 0), _const(x1, 1), x2)
    return ew.rem(x1, x2)


def divmod(x1: ArrayLike, x2: ArrayLike, /) -> tuple[Array, Array]:  # noqa: A001
    """(x1 // x2, x1 % x2)."""
    x1, x2 = map(ensure_array, promote_args_numeric("divmod", x1, x2))
    if _is_kind(x1, np.integer):
        return floor_divide(x1, x2), remainder(x1, x2)
    return _float_divmod(x1, x2)


def power(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """x1 ** x2. A concrete integer exponent uses `integer_pow` (exact, and differentiable
    at x1 = 0); integer bases with integer exponents use binary exponentiation."""
    check_arraylike("power", x1, x2)
    if is_concrete(x2):
        try:
            n = operator.index(x2)
        except TypeError:
            pass
        else:
            (x1,) = promote_dtypes_numeric(x1)
            return ew.integer_pow(x1, n)
    x1, x2 = promote_shapes("power", x1, x2)
    x1_, x2_ = promote_dtypes_numeric(x1, x2)
    x1_ = ensure_array(x1_)
    if _is_kind(x1_, np.integer):
        return _pow_int_int(x1_, ensure_array(x2_))
    d1, d2 = _dtype(x1), _dtype(x2)
    if dtypes.is_inexact(d1) and dtypes.is_int(d2):
        # jax keeps the base's dtype here (lax.pow takes an integer exponent); the result is
        # weak where both are, as jax's.
        return ew.pow(x1, lg.convert_element_type(x2, d1, dtypes.is_weakly_typed(x2)))
    return ew.pow(x1_, x2_)


pow = power  # noqa: A001


def _pow_int_int(x1, x2):
    # Binary exponentiation over the 6 exponent bits that cannot overflow every base > 1.
    one = _const(x2, 1)
    acc = _lax_where(lg.bitwise_and(lg.eq(x1, 0), lg.ne(x2, 0)), _const(x1, 0), _const(x1, 1))
    acc = ew.add(acc, _full_like(x1, 0, x1.aval.dtype)) if acc.aval.shape != x1.aval.shape \
        else acc
    for _ in range(6):
        acc = _lax_where(lg.ne(lg.bitwise_and(x2, one), 0), ew.mul(acc, x1), acc)
        x1 = ew.mul(x1, x1)
        x2 = lg.shift_right_logical(x2, one)
    return lg.convert_element_type(acc, acc.aval.dtype, False)  # strong, as jax's


def float_power(x: ArrayLike, y: ArrayLike, /) -> Array:
    """x ** y in an inexact dtype (float32 with x64 off, as JAX; NumPy uses float64)."""
    return ew.pow(*promote_args_inexact("float_power", x, y))


def negative(x: ArrayLike, /) -> Array:
    """-x."""
    return ew.neg_p.bind(*promote_args("negative", x))


def positive(x: ArrayLike, /) -> Array:
    """+x (a copy of x as an array)."""
    return ensure_array(promote_args("positive", x)[0])


def absolute(x: ArrayLike, /) -> Array:
    """|x|; the derivative at 0 is 0 (complex inputs give their real modulus)."""
    (x,) = promote_args("absolute", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if dt == _B1 or dtypes.issubdtype(dt, np.unsignedinteger):
        return x
    return ew.abs_p.bind(x)


abs = absolute  # noqa: A001


def fabs(x: ArrayLike, /) -> Array:
    """|x| in an inexact dtype (real x only, as NumPy and JAX)."""
    x = _inexact("fabs", x)
    if dtypes.is_complex(x.aval.dtype):
        raise TypeError("fnad.numpy.fabs does not support complex dtypes (use abs)")
    return ew.abs_p.bind(x)


def sign(x: ArrayLike, /) -> Array:
    """-1, 0 or 1 by the sign of x (x/|x| for complex x)."""
    return ew.sign_p.bind(*promote_args("sign", x))


def square(x: ArrayLike, /) -> Array:
    """x * x."""
    check_arraylike("square", x)
    return ew.square_p.bind(*promote_dtypes_numeric(x))


def reciprocal(x: ArrayLike, /) -> Array:
    """1 / x in an inexact dtype."""
    check_arraylike("reciprocal", x)
    return ew.integer_pow(promote_dtypes_inexact(x)[0], -1)


# ---- exponentials, logarithms, roots ---------------------------------------------------
def exp(x: ArrayLike, /) -> Array:
    """e ** x."""
    return ew.exp_p.bind(_inexact("exp", x))


def exp2(x: ArrayLike, /) -> Array:
    """2 ** x."""
    return ew.exp2_p.bind(_inexact("exp2", x))


def expm1(x: ArrayLike, /) -> Array:
    """e ** x - 1, accurate near 0."""
    return ew.expm1_p.bind(_inexact("expm1", x))


def log(x: ArrayLike, /) -> Array:
    """Natural logarithm."""
    return ew.log_p.bind(_inexact("log", x))


def log1p(x: ArrayLike, /) -> Array:
    """log(1 + x), accurate near 0."""
    return ew.log1p_p.bind(_inexact("log1p", x))


def log2(x: ArrayLike, /) -> Array:
    """Base-2 logarithm."""
    x = _inexact("log2", x)
    if dtypes.is_complex(x.aval.dtype):
        r = ew.log(x)
        ln2 = np.asarray(math.log(2), ew.real(r).aval.dtype)       # strong, as JAX's
        return ew.complex(ew.div(ew.real(r), ln2), ew.div(ew.imag(r), ln2))
    # JAX divides by a (strong) constant: the result is never weakly typed.
    return ew.div(ew.log(x), ew.log(np.asarray(2, x.aval.dtype)))


def log10(x: ArrayLike, /) -> Array:
    """Base-10 logarithm."""
    x = _inexact("log10", x)
    if dtypes.is_complex(x.aval.dtype):
        r = ew.log(x)
        inv = np.asarray(1 / math.log(10), ew.real(r).aval.dtype)  # strong, as JAX's
        return ew.complex(ew.mul(ew.real(r), inv), ew.mul(ew.imag(r), inv))
    return ew.mul(ew.log(x), np.asarray(0.4342944819032518, x.aval.dtype))   # 1 / ln 10


def logaddexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """log(exp(x1) + exp(x2)) without overflow: max + log1p(exp(-|x1 - x2|))."""
    x1, x2 = map(ensure_array, promote_args_inexact("logaddexp", x1, x2))
    if dtypes.is_complex(x1.aval.dtype):
        return _complex_logaddexp(x1, x2, ew.exp, 1.0)
    amax = ew.max(x1, x2)
    delta = ew.sub(x1, x2)
    abs_delta = ew.max(delta, ew.neg(delta))           # |δ| with slope 0 at a tie: ∂/∂x1 = 1/2
    return _lax_where(lg.ne(delta, delta), ew.add(x1, x2),    # nan, or infs of one sign
                      ew.add(amax, ew.log1p(ew.exp(ew.neg(abs_delta)))))


def _complex_logaddexp(x1, x2, exp, scale):
    """log(exp(x1) + exp(x2)) for complex x (exp is e** or 2**, scale 1 or 1/ln 2): amax +
    scale·log1p(exp(x1 + x2 - 2 amax)), its phase wrapped into [-π·scale, π·scale] (as
    JAX, whose constants are strong: the result is never weakly typed)."""
    amax = ew.max(x1, x2)                                     # lexicographic max
    delta = ew.sub(ew.add(x1, x2), ew.mul(amax, np.asarray(2, amax.aval.dtype)))
    out = ew.add(amax, ew.mul(ew.log1p(exp(delta)), np.asarray(scale, amax.aval.dtype)))
    im = ew.imag(out)
    dt = im.aval.dtype
    half, period = np.asarray(math.pi * scale, dt), np.asarray(2 * math.pi * scale, dt)
    rem = ew.rem(ew.add(im, half), period)
    rem = _lax_where(lg.lt(rem, np.asarray(0, dt)), ew.add(rem, period), rem)
    return ew.complex(ew.real(out), ew.sub(rem, half))


def logaddexp2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """log2(2**x1 + 2**x2) without overflow."""
    x1, x2 = map(ensure_array, promote_args_inexact("logaddexp2", x1, x2))
    if dtypes.is_complex(x1.aval.dtype):
        return _complex_logaddexp(x1, x2, ew.exp2, 1 / math.log(2))
    amax = ew.max(x1, x2)
    delta = ew.sub(x1, x2)
    abs_delta = ew.max(delta, ew.neg(delta))           # |δ| with slope 0 at a tie
    tail = ew.mul(ew.log1p(ew.exp2(ew.neg(abs_delta))), _const(amax, 1 / math.log(2)))
    return _lax_where(lg.ne(delta, delta), ew.add(x1, x2), ew.add(amax, tail))


def sqrt(x: ArrayLike, /) -> Array:
    """Square root (its derivative at 0 is inf, as JAX's)."""
    return ew.sqrt_p.bind(_inexact("sqrt", x))


def cbrt(x: ArrayLike, /) -> Array:
    """Real cube root."""
    return ew.cbrt_p.bind(_inexact("cbrt", x))


# ---- trigonometric and hyperbolic ------------------------------------------------------------
def sin(x: ArrayLike, /) -> Array:
    """Sine."""
    return ew.sin_p.bind(_inexact("sin", x))


def cos(x: ArrayLike, /) -> Array:
    """Cosine."""
    return ew.cos_p.bind(_inexact("cos", x))


def tan(x: ArrayLike, /) -> Array:
    """Tangent."""
    return ew.tan_p.bind(_inexact("tan", x))


def arcsin(x: ArrayLike, /) -> Array:
    """Inverse sine."""
    return ew.asin_p.bind(_inexact("arcsin", x))


def arccos(x: ArrayLike, /) -> Array:
    """Inverse cosine."""
    return ew.acos_p.bind(_inexact("arccos", x))


def arctan(x: ArrayLike, /) -> Array:
    """Inverse tangent."""
    return ew.atan_p.bind(_inexact("arctan", x))


def arctan2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The angle of the point (x2, x1), in (-pi, pi]."""
    return ew.atan2_p.bind(*promote_args_inexact("arctan2", x1, x2))


def sinh(x: ArrayLike, /) -> Array:
    """Hyperbolic sine."""
    return ew.sinh_p.bind(_inexact("sinh", x))


def cosh(x: ArrayLike, /) -> Array:
    """Hyperbolic cosine."""
    return ew.cosh_p.bind(_inexact("cosh", x))


def tanh(x: ArrayLike, /) -> Array:
    """Hyperbolic tangent."""
    return ew.tanh_p.bind(_inexact("tanh", x))


def arcsinh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic sine."""
    return ew.asinh_p.bind(_inexact("arcsinh", x))


def arccosh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic cosine (NumPy's branch for complex inputs)."""
    out = ew.acosh_p.bind(_inexact("arccosh", x))
    if dtypes.is_complex(out.aval.dtype):
        out = _lax_where(lg.lt(ew.real(out), 0), ew.neg(out), out)
    return out


def arctanh(x: ArrayLike, /) -> Array:
    """Inverse hyperbolic tangent."""
    return ew.atanh_p.bind(_inexact("arctanh", x))


asin, acos, atan, atan2 = arcsin, arccos, arctan, arctan2
asinh, acosh, atanh = arcsinh, arccosh, arctanh


def deg2rad(x: ArrayLike, /) -> Array:
    """Degrees to radians."""
    x = _inexact("deg2rad", x)
    return ew.mul(x, _const(x, math.pi / 180))


def rad2deg(x: ArrayLike, /) -> Array:
    """Radians to degrees."""
    x = _inexact("rad2deg", x)
    return ew.mul(x, _const(x, 180 / math.pi))


radians, degrees = deg2rad, rad2deg


def hypot(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """sqrt(x1² + x2²) without overflow: big · sqrt(1 + (small/big)²)."""
    weak = _all_weak(x1, x2)
    x1, x2 = map(ensure_array, promote_args_inexact("hypot", x1, x2))
    if dtypes.is_complex(x1.aval.dtype):
        raise ValueError("hypot is not well defined for complex-valued inputs; "
                         "convert to real values first, e.g. with abs(x)")
    x1, x2 = ew.abs(x1), ew.abs(x2)
    idx_inf = lg.bitwise_or(lg.eq(x1, np.inf), lg.eq(x2, np.inf))
    big, small = ew.max(x1, x2), ew.min(x1, x2)
    safe_big = _lax_where(lg.eq(big, 0), _const(big, 1), big)
    x = _lax_where(lg.eq(big, 0), big,
                   ew.mul(big, ew.sqrt(ew.add(ew.square(ew.div(small, safe_big)), 1.0))))
    return _weak_as(_lax_where(idx_inf, _const(x, np.inf), x), weak)


def _all_weak(*args) -> bool:
    """Whether every argument is weakly typed (a Python scalar or a weak array)."""
    return all(type(a) in (int, float, complex) or getattr(a, "weak_type", False)
               for a in args)


def _weak_as(x, weak: bool):
    """x, strongly typed unless `weak`: JAX's compositions that select with constants give
    weak results only from weak arguments (hypot(3.0, int_array) is a strong float32)."""
    if x.aval.weak_type and not weak:
        return lg.convert_element_type(x, x.aval.dtype, False)
    return x


def sinc(x: ArrayLike, /) -> Array:
    """sin(pi x) / (pi x), with sinc(0) = 1 and a finite gradient at 0."""
    check_arraylike("sinc", x)
    (x,) = promote_dtypes_inexact(x)
    eq_zero = lg.eq(x, 0)
    pi_x = ew.mul(x, _const(x, math.pi))
    safe_pi_x = _lax_where(eq_zero, _const(x, 1), pi_x)
    # At 0: the constant 1, whose slope 0 is sinc'(0). (Its second derivative is then 0,
    # not -pi²/3: JAX gets that one from a custom_jvp.)
    return _lax_where(eq_zero, _const(x, 1), ew.div(ew.sin(safe_pi_x), safe_pi_x))


# ---- rounding ------------------------------------------------------------------------------
def _keep_if_integral(name, x):
    check_arraylike(name, x)
    x = ensure_array(x)
    return x if (x.aval.dtype == _B1 or dtypes.is_int(x.aval.dtype)) else None


def floor(x: ArrayLike, /) -> Array:
    """The largest integer <= x (integer inputs are returned unchanged)."""
    same = _keep_if_integral("floor", x)
    return same if same is not None else ew.floor_p.bind(_inexact("floor", x))


def ceil(x: ArrayLike, /) -> Array:
    """The smallest integer >= x (integer inputs are returned unchanged)."""
    same = _keep_if_integral("ceil", x)
    return same if same is not None else ew.ceil_p.bind(_inexact("ceil", x))


def trunc(x: ArrayLike) -> Array:
    """x rounded toward zero."""
    same = _keep_if_integral("trunc", x)
    if same is not None:
        return same
    x = ensure_array(x)
    return _lax_where(lg.lt(x, 0), ew.ceil(x), ew.floor(x))


def fix(x: ArrayLike, out: None = None) -> Array:
    """x rounded toward zero."""
    check_arraylike("fix", x)
    x = ensure_array(x)
    return _lax_where(lg.ge(x, 0), floor(x), ceil(x))


def rint(x: ArrayLike, /) -> Array:
    """Round to the nearest integer, halves to even (ints become the default float)."""
    check_arraylike("rint", x)
    x = ensure_array(x)
    dt = x.aval.dtype
    if dt == _B1 or dtypes.is_int(dt):
        return lg.convert_element_type(x, dtypes.default_float_dtype())
    if dtypes.is_complex(dt):
        return ew.complex(rint(ew.real(x)), rint(ew.imag(x)))
    return ew.round(x, ew.TO_NEAREST_EVEN)


def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:  # noqa: A001
    """Round to `decimals` decimal places, halves to even (as NumPy)."""
    check_arraylike("round", a)
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.round is not supported.")
    a = ensure_array(a)
    decimals = operator.index(decimals)
    dt = a.aval.dtype
    if dt == _B1 or dtypes.is_int(dt):
        if decimals < 0:
            raise NotImplementedError("integer round is not implemented for decimals < 0")
        return a

    def round_float(x):
        if decimals == 0:
            return ew.round(x, ew.TO_NEAREST_EVEN)
        # float16 loses too much in x·10^d: round in float32 (as JAX).
        x = lg.convert_element_type(x, np.float32) if dt == np.float16 else x
        factor = _const(x, 10.0 ** decimals)
        out = ew.div(ew.round(ew.mul(x, factor), ew.TO_NEAREST_EVEN), factor)
        return lg.convert_element_type(out, dt) if dt == np.float16 else out

    if decimals > np.log10(float(dtypes.finfo(dt).max)):
        return a                                       # beyond the dtype's precision
    if dtypes.is_complex(dt):
        return ew.complex(round_float(ew.real(a)), round_float(ew.imag(a)))
    return round_float(a)


around = round


def clip(arr: ArrayLike | None = None, /, min: ArrayLike | None = None,  # noqa: A002
         max: ArrayLike | None = None, *, a: ArrayLike | None = None,  # noqa: A002
         a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Array:
    """x limited to [min, max] (either bound may be None); NumPy's a/a_min/a_max accepted."""
    if a is not None:
        if arr is not None:
            raise TypeError("clip: give the array positionally or as a=, not both")
        arr = a
    if a_min is not None:
        if min is not None:
            raise TypeError("clip: give min= or a_min=, not both")
        min = a_min  # noqa: A001
    if a_max is not None:
        if max is not None:
            raise TypeError("clip: give max= or a_max=, not both")
        max = a_max  # noqa: A001
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    check_arraylike("clip", arr)
    if any(t is not None and dtypes.is_complex(_dtype(t)) for t in (arr, min, max)):
        raise ValueError("Clip received a complex value: complex values have no ordering; "
                         "use fnad.numpy.real/imag first.")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return ensure_array(arr)


# ---- minimum / maximum ----------------------------------------------------------------------
def maximum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The larger of x and y (NaN if either is; ties split the gradient evenly)."""
    return ew.max_p.bind(*_binary("maximum", x, y))


def minimum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The smaller of x and y (NaN if either is; ties split the gradient evenly)."""
    return ew.min_p.bind(*_binary("minimum", x, y))


# ---- complex parts -----------------------------------------------------------------------------
def real(val: ArrayLike, /) -> Array:
    """The real part (the input itself for real dtypes)."""
    check_arraylike("real", val)
    val = ensure_array(val)
    return ew.real(val) if dtypes.is_complex(val.aval.dtype) else val


def imag(val: ArrayLike, /) -> Array:
    """The imaginary part (zeros for real dtypes)."""
    check_arraylike("imag", val)
    val = ensure_array(val)
    if dtypes.is_complex(val.aval.dtype):
        return ew.imag(val)
    return _full_like(val, 0)


def conjugate(x: ArrayLike, /) -> Array:
    """The complex conjugate (the input itself for real dtypes)."""
    check_arraylike("conjugate", x)
    x = ensure_array(x)
    return ew.conj(x) if dtypes.is_complex(x.aval.dtype) else x


conj = conjugate


def angle(z: ArrayLike, deg: bool = False) -> Array:
    """The argument of a complex number (0 or pi for reals), in radians or degrees."""
    check_arraylike("angle", z)
    z = ensure_array(z)
    re, im = real(z), imag(z)
    dt = re.aval.dtype
    if not dtypes.is_inexact(dt) or (dtypes.is_float(z.aval.dtype) and not z.aval.shape):
        dt = dtypes.default_float_dtype()
        re = lg.convert_element_type(re, dt)
        im = lg.convert_element_type(im, dt)
    result = ew.atan2(im, re)
    return degrees(result) if deg else result



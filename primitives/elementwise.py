"""Elementwise arithmetic and transcendental primitives.

Binary primitives take operands of one dtype with equal shapes, or a scalar
(rank-0) operand that broadcasts; `fnad.numpy` does NumPy-style broadcasting and
type promotion before it binds. Each block: declaration, wrapper, shape rule,
JVP rule (and transpose rule for the linear ones). Batching rules are added by
fnad.batching; implementations live in backends/.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from fnad import dtypes
from fnad.core import (
    Primitive,
    ShapedArray,
    abstract_eval_rules,
    batch_rules,
    is_undefined,
    jvp_rules,
    nonzero,
    transpose_rules,
)
from fnad.core import get_aval as _get_aval
from fnad.primitives._batching import broadcasting_batch_rule, vectorized_batch_rule
from fnad.primitives._util import (
    ANY,
    COMPLEX,
    FLOAT,
    INEXACT,
    INT,
    NUM,
    add_tangents,
    check_kind,
    naryop_abstract_eval,
    no_tangent_jvp,
    promote_scalars,
    unop_abstract_eval,
)


_SCALARS = frozenset((bool, int, float, complex))


def _unbroadcast(ct, aval: ShapedArray):
    """A cotangent for an operand that was broadcast from a scalar: sum it back."""
    from fnad.primitives.reductions import reduce_sum
    if ct is None or np.shape(ct) == aval.shape:
        return ct
    return reduce_sum(ct, axes=tuple(range(np.ndim(ct))))


def _aval(x) -> ShapedArray:
    return x.aval if is_undefined(x) else _get_aval(x)


def _out_shaped(t, out):
    """A tangent in the shape of `out`: the tangent of a scalar operand of an op on arrays
    (x + c with only c varying) is broadcast."""
    if t is None or np.shape(t) == np.shape(out):
        return t
    from fnad.primitives.shape_ops import broadcast_in_dim
    return broadcast_in_dim(t, np.shape(out), ())



__all__ = [
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "rem",
    "pow",
    "integer_pow",
    "RoundingMethod",
    "square",
    "max",
    "min",
    "abs",
    "sign",
    "floor",
    "ceil",
    "round",
    "exp",
    "exp2",
    "log",
    "log1p",
    "expm1",
    "tanh",
    "logistic",
    "sqrt",
    "rsqrt",
    "cbrt",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "erf_inv",
    "lgamma",
    "digamma",
    "polygamma",
    "igamma",
    "igammac",
    "igamma_grad_a",
    "random_gamma_grad",
    "real",
    "imag",
    "complex",
    "conj",
    "AWAY_FROM_ZERO",
    "TO_NEAREST_EVEN",
]

# ---- add ----------------------------------------------------------------------------
add_p = Primitive("add")
def add(x, y): return add_p.bind(*promote_scalars(x, y))

abstract_eval_rules[add_p] = naryop_abstract_eval("add", NUM)
def add_jvp(primals, tangents):                        # d(x + y) = dx + dy
    (x, y), (x_dot, y_dot) = primals, tangents
    out = add(x, y)
    return out, _out_shaped(add_tangents(x_dot, y_dot), out)
jvp_rules[add_p] = add_jvp
def add_transpose(ct, x, y):                           # x̄ = ct, ȳ = ct
    return [_unbroadcast(ct, _aval(x)) if is_undefined(x) else None,
            _unbroadcast(ct, _aval(y)) if is_undefined(y) else None]
transpose_rules[add_p] = add_transpose
batch_rules[add_p] = broadcasting_batch_rule(add_p)

# ---- add_any: the sum of two tangents (what AD accumulates with) --------------------
add_any_p = Primitive("add_any")
def add_any(x, y): return add_any_p.bind(x, y)

abstract_eval_rules[add_any_p] = naryop_abstract_eval("add_any", NUM)
def add_any_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    out = add_any(x, y)
    return out, _out_shaped(add_tangents(x_dot, y_dot), out)
jvp_rules[add_any_p] = add_any_jvp
transpose_rules[add_any_p] = add_transpose
batch_rules[add_any_p] = broadcasting_batch_rule(add_any_p)

# ---- sub ----------------------------------------------------------------------------
sub_p = Primitive("sub")
def sub(x, y): return sub_p.bind(*promote_scalars(x, y))

abstract_eval_rules[sub_p] = naryop_abstract_eval("sub", NUM)
def sub_jvp(primals, tangents):                        # d(x - y) = dx - dy
    (x, y), (x_dot, y_dot) = primals, tangents
    out = sub(x, y)
    return out, _out_shaped(add_tangents(x_dot, neg(y_dot) if nonzero(y_dot) else None), out)
jvp_rules[sub_p] = sub_jvp
def sub_transpose(ct, x, y):                           # x̄ = ct, ȳ = -ct
    return [_unbroadcast(ct, _aval(x)) if is_undefined(x) else None,
            _unbroadcast(neg(ct), _aval(y)) if is_undefined(y) else None]
transpose_rules[sub_p] = sub_transpose
batch_rules[sub_p] = broadcasting_batch_rule(sub_p)

# ---- mul ----------------------------------------------------------------------------
mul_p = Primitive("mul")
def mul(x, y): return mul_p.bind(*promote_scalars(x, y))

abstract_eval_rules[mul_p] = naryop_abstract_eval("mul", NUM)
def mul_jvp(primals, tangents):                        # d(x·y) = dx·y + x·dy
    (x, y), (x_dot, y_dot) = primals, tangents
    return mul(x, y), add_tangents(mul(x_dot, y) if nonzero(x_dot) else None,
                                   mul(x, y_dot) if nonzero(y_dot) else None)
jvp_rules[mul_p] = mul_jvp
def mul_transpose(ct, x, y):                           # linear in one operand: x̄ = ct·y
    if is_undefined(x):
        return [_unbroadcast(mul(ct, y), x.aval), None]
    return [None, _unbroadcast(mul(x, ct), y.aval)]
transpose_rules[mul_p] = mul_transpose
batch_rules[mul_p] = broadcasting_batch_rule(mul_p)

# ---- div ----------------------------------------------------------------------------
div_p = Primitive("div")
def div(x, y): return div_p.bind(*promote_scalars(x, y))

abstract_eval_rules[div_p] = naryop_abstract_eval("div", NUM)
def div_jvp(primals, tangents):                        # d(x/y) = dx/y - (x/y)·dy/y
    (x, y), (x_dot, y_dot) = primals, tangents
    out = div(x, y)
    return out, add_tangents(div(x_dot, y) if nonzero(x_dot) else None,
                             neg(mul(out, div(y_dot, y))) if nonzero(y_dot) else None)
jvp_rules[div_p] = div_jvp
def div_transpose(ct, x, y):                           # linear in x only: x̄ = ct / y
    if not is_undefined(x) or is_undefined(y):
        raise ValueError("div is linear only in its first operand")
    return [_unbroadcast(div(ct, y), x.aval), None]
transpose_rules[div_p] = div_transpose
batch_rules[div_p] = broadcasting_batch_rule(div_p)

# ---- neg ----------------------------------------------------------------------------
neg_p = Primitive("neg")
def neg(x): return neg_p.bind(x)

abstract_eval_rules[neg_p] = unop_abstract_eval("neg", NUM)
def neg_jvp(primals, tangents):                        # d(-x) = -dx
    return neg(primals[0]), neg(tangents[0])
jvp_rules[neg_p] = neg_jvp
transpose_rules[neg_p] = lambda ct, x: [neg(ct)]       # x̄ = -ct
batch_rules[neg_p] = vectorized_batch_rule(neg_p)

# ---- rem (C fmod semantics: the result has the sign of x) -----------------------------
rem_p = Primitive("rem")
def rem(x, y): return rem_p.bind(*promote_scalars(x, y))

abstract_eval_rules[rem_p] = naryop_abstract_eval("rem", (INT, FLOAT))
def rem_jvp(primals, tangents):                        # x - y·trunc(x/y): dx - trunc(x/y)·dy
    (x, y), (x_dot, y_dot) = primals, tangents
    q = div(x, y)
    trunc_q = mul(sign(q), floor(abs(q)))
    out = rem(x, y)
    return out, _out_shaped(add_tangents(x_dot if nonzero(x_dot) else None,
                                         neg(mul(y_dot, trunc_q)) if nonzero(y_dot) else None),
                            out)
jvp_rules[rem_p] = rem_jvp
batch_rules[rem_p] = broadcasting_batch_rule(rem_p)

# ---- pow ----------------------------------------------------------------------------
pow_p = Primitive("pow")
def pow(x, y):  # noqa: A001  (lax.pow)
    """x ** y elementwise; x inexact, y of x's dtype or an integer array (as jax.lax.pow),
    which is converted to x's dtype."""
    if type(y) not in _SCALARS and dtypes.is_int(_get_aval(y).dtype):
        from fnad.primitives.logic import convert_element_type
        x_dt = dtypes.result_type(x) if type(x) in _SCALARS else _get_aval(x).dtype
        if dtypes.is_inexact(x_dt):                    # a Python float x is strong here
            x = np.asarray(x, x_dt) if type(x) in _SCALARS else x
            y = convert_element_type(y, x_dt)
    return pow_p.bind(*promote_scalars(x, y))

abstract_eval_rules[pow_p] = naryop_abstract_eval("pow", INEXACT)
def pow_jvp(primals, tangents):                        # d(x^y) = y·x^(y-1)·dx + log(x)·x^y·dy
    from fnad.primitives.logic import eq, select_n
    (x, y), (x_dot, y_dot) = primals, tangents
    out = pow(x, y)
    t_x = t_y = None
    if nonzero(x_dot):
        y_zero = eq(y, 0)                              # x^0 = 1 everywhere: its slope is 0
        safe_y = select_n(y_zero, y, 1)
        t_x = mul(x_dot, select_n(y_zero, mul(safe_y, pow(x, sub(safe_y, 1))), 0))
    if nonzero(y_dot):
        safe_x = select_n(eq(x, 0), x, 1)              # log(0)·0^y: take 0, not nan
        t_y = mul(y_dot, mul(log(safe_x), out))
    return out, add_tangents(t_x, t_y)
jvp_rules[pow_p] = pow_jvp
batch_rules[pow_p] = broadcasting_batch_rule(pow_p)

# ---- integer_pow: x ** y for a static integer y ----------------------------------------
integer_pow_p = Primitive("integer_pow")
def integer_pow(x, y: int): return integer_pow_p.bind(x, y=int(y))

def integer_pow_abstract_eval(x, *, y):
    check_kind("integer_pow", x, NUM)
    if y < 0 and x.dtype.kind in "iub":
        raise ValueError(f"integer_pow: negative exponent {y} of an integer array")
    return x
abstract_eval_rules[integer_pow_p] = integer_pow_abstract_eval
def integer_pow_jvp(primals, tangents, *, y):          # d(x^y) = y·x^(y-1)·dx
    (x,), (x_dot,) = primals, tangents
    if y == 0:
        return integer_pow(x, 0), None
    slope = mul(integer_pow(x, y - 1), float(y)) if y != 1 else None
    return integer_pow(x, y), x_dot if slope is None else mul(x_dot, slope)
jvp_rules[integer_pow_p] = integer_pow_jvp
batch_rules[integer_pow_p] = broadcasting_batch_rule(integer_pow_p)

# ---- square -------------------------------------------------------------------------
square_p = Primitive("square")
def square(x): return square_p.bind(x)

abstract_eval_rules[square_p] = unop_abstract_eval("square", NUM)
def square_jvp(primals, tangents):                     # d(x²) = 2x·dx
    (x,), (x_dot,) = primals, tangents
    return square(x), mul(x_dot, mul(x, 2.0))
jvp_rules[square_p] = square_jvp
batch_rules[square_p] = vectorized_batch_rule(square_p)

# ---- max / min (ties split the tangent evenly, as JAX) --------------------------------
max_p = Primitive("max")
def max(x, y): return max_p.bind(*promote_scalars(x, y))  # noqa: A001  (lax.max)

abstract_eval_rules[max_p] = naryop_abstract_eval("max", ANY)
def _minmax_jvp(prim, cmp):
    from fnad.primitives.logic import convert_element_type, eq
    def rule(primals, tangents):                       # dx where x wins, dy where y wins
        (x, y), (x_dot, y_dot) = primals, tangents
        out = prim.bind(x, y)
        dt = _get_aval(out).dtype
        half_tie = mul(convert_element_type(eq(x, y), dt), 0.5)
        x_wins = add(convert_element_type(cmp(x, y), dt), half_tie)
        y_wins = add(convert_element_type(cmp(y, x), dt), half_tie)
        return out, add_tangents(mul(x_dot, x_wins) if nonzero(x_dot) else None,
                                 mul(y_dot, y_wins) if nonzero(y_dot) else None)
    return rule
def max_jvp(primals, tangents):
    from fnad.primitives.logic import gt
    return _minmax_jvp(max_p, gt)(primals, tangents)
jvp_rules[max_p] = max_jvp
batch_rules[max_p] = broadcasting_batch_rule(max_p)

min_p = Primitive("min")
def min(x, y): return min_p.bind(*promote_scalars(x, y))  # noqa: A001  (lax.min)

abstract_eval_rules[min_p] = naryop_abstract_eval("min", ANY)
def min_jvp(primals, tangents):
    from fnad.primitives.logic import lt
    return _minmax_jvp(min_p, lt)(primals, tangents)
jvp_rules[min_p] = min_jvp
batch_rules[min_p] = broadcasting_batch_rule(min_p)

# ---- abs, sign, floor, ceil, round --------------------------------------------------------
abs_p = Primitive("abs")
def abs(x): return abs_p.bind(x)  # noqa: A001  (lax.abs)

def abs_abstract_eval(x):
    check_kind("abs", x, NUM)
    if x.dtype.kind == "c":
        return ShapedArray(x.shape, np.finfo(x.dtype).dtype, x.weak_type)
    return x
abstract_eval_rules[abs_p] = abs_abstract_eval
def abs_jvp(primals, tangents):                        # d|x| = ±dx (slope +1 at 0, as JAX)
    from fnad.primitives.logic import eq, ge, select_n  # complex: Re(conj(x)·dx)/|x|
    (x,), (x_dot,) = primals, tangents
    out = abs(x)
    if _get_aval(x).dtype.kind != "c":
        return out, select_n(ge(x, 0), neg(x_dot), x_dot)
    safe = select_n(eq(out, 0), out, 1)
    return out, div(real(mul(conj(x), x_dot)), safe)
jvp_rules[abs_p] = abs_jvp
batch_rules[abs_p] = vectorized_batch_rule(abs_p)

sign_p = Primitive("sign")
def sign(x): return sign_p.bind(x)

abstract_eval_rules[sign_p] = unop_abstract_eval("sign", NUM)
jvp_rules[sign_p] = no_tangent_jvp(sign_p)
batch_rules[sign_p] = vectorized_batch_rule(sign_p)

floor_p = Primitive("floor")
def floor(x): return floor_p.bind(x)

abstract_eval_rules[floor_p] = unop_abstract_eval("floor", (FLOAT,))
jvp_rules[floor_p] = no_tangent_jvp(floor_p)
batch_rules[floor_p] = vectorized_batch_rule(floor_p)

ceil_p = Primitive("ceil")
def ceil(x): return ceil_p.bind(x)

abstract_eval_rules[ceil_p] = unop_abstract_eval("ceil", (FLOAT,))
jvp_rules[ceil_p] = no_tangent_jvp(ceil_p)
batch_rules[ceil_p] = vectorized_batch_rule(ceil_p)

round_p = Primitive("round")
class RoundingMethod(enum.IntEnum):
    """lax.round's rounding_method, as jax.lax.RoundingMethod."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1
AWAY_FROM_ZERO, TO_NEAREST_EVEN = RoundingMethod.AWAY_FROM_ZERO, RoundingMethod.TO_NEAREST_EVEN
def round(x, rounding_method: int = AWAY_FROM_ZERO):  # noqa: A001  (lax.round)
    """x rounded to an integral value; ties away from zero or to even (a RoundingMethod
    or its int value; anything else is a ValueError, as jax)."""
    return round_p.bind(x, rounding_method=int(RoundingMethod(rounding_method)))

abstract_eval_rules[round_p] = unop_abstract_eval("round", (FLOAT,))
jvp_rules[round_p] = no_tangent_jvp(round_p)
batch_rules[round_p] = vectorized_batch_rule(round_p)

# ---- exp, exp2, log, log1p, expm1 --------------------------------------------------------
exp_p = Primitive("exp")
def exp(x): return exp_p.bind(x)

abstract_eval_rules[exp_p] = unop_abstract_eval("exp", INEXACT)
def exp_jvp(primals, tangents):                        # d eˣ = eˣ dx
    (x,), (x_dot,) = primals, tangents
    y = exp(x)
    return y, mul(x_dot, y)
jvp_rules[exp_p] = exp_jvp
batch_rules[exp_p] = vectorized_batch_rule(exp_p)

exp2_p = Primitive("exp2")
def exp2(x): return exp2_p.bind(x)

abstract_eval_rules[exp2_p] = unop_abstract_eval("exp2", INEXACT)
def exp2_jvp(primals, tangents):                       # d 2ˣ = 2ˣ·ln 2 dx
    (x,), (x_dot,) = primals, tangents
    y = exp2(x)
    return y, mul(x_dot, mul(y, math.log(2.0)))
jvp_rules[exp2_p] = exp2_jvp
batch_rules[exp2_p] = vectorized_batch_rule(exp2_p)

log_p = Primitive("log")
def log(x): return log_p.bind(x)

abstract_eval_rules[log_p] = unop_abstract_eval("log", INEXACT)
def log_jvp(primals, tangents):                        # d ln x = dx / x
    (x,), (x_dot,) = primals, tangents
    return log(x), div(x_dot, x)
jvp_rules[log_p] = log_jvp
batch_rules[log_p] = vectorized_batch_rule(log_p)

log1p_p = Primitive("log1p")
def log1p(x): return log1p_p.bind(x)

abstract_eval_rules[log1p_p] = unop_abstract_eval("log1p", INEXACT)
def log1p_jvp(primals, tangents):                      # d ln(1+x) = dx / (1+x)
    (x,), (x_dot,) = primals, tangents
    return log1p(x), div(x_dot, add(x, 1.0))
jvp_rules[log1p_p] = log1p_jvp
batch_rules[log1p_p] = vectorized_batch_rule(log1p_p)

expm1_p = Primitive("expm1")
def expm1(x): return expm1_p.bind(x)

abstract_eval_rules[expm1_p] = unop_abstract_eval("expm1", INEXACT)
def expm1_jvp(primals, tangents):                      # d(eˣ-1) = (y+1) dx
    (x,), (x_dot,) = primals, tangents
    y = expm1(x)
    return y, mul(x_dot, add(y, 1.0))
jvp_rules[expm1_p] = expm1_jvp
batch_rules[expm1_p] = vectorized_batch_rule(expm1_p)

# ---- tanh, logistic -------------------------------------------------------------------
tanh_p = Primitive("tanh")
def tanh(x): return tanh_p.bind(x)

abstract_eval_rules[tanh_p] = unop_abstract_eval("tanh", INEXACT)
def tanh_jvp(primals, tangents):                       # d tanh x = (1 - y²) dx
    (x,), (x_dot,) = primals, tangents
    y = tanh(x)
    return y, mul(x_dot, sub(1.0, square(y)))
jvp_rules[tanh_p] = tanh_jvp
batch_rules[tanh_p] = vectorized_batch_rule(tanh_p)

logistic_p = Primitive("logistic")
def logistic(x): return logistic_p.bind(x)

abstract_eval_rules[logistic_p] = unop_abstract_eval("logistic", INEXACT)
def logistic_jvp(primals, tangents):                   # dσ = σ(1-σ) dx
    (x,), (x_dot,) = primals, tangents
    y = logistic(x)
    return y, mul(x_dot, mul(y, sub(1.0, y)))
jvp_rules[logistic_p] = logistic_jvp
batch_rules[logistic_p] = vectorized_batch_rule(logistic_p)

# ---- sqrt, rsqrt, cbrt -------------------------------------------------------------------
sqrt_p = Primitive("sqrt")
def sqrt(x): return sqrt_p.bind(x)

abstract_eval_rules[sqrt_p] = unop_abstract_eval("sqrt", INEXACT)
def sqrt_jvp(primals, tangents):                       # d√x = dx / (2√x)
    (x,), (x_dot,) = primals, tangents
    y = sqrt(x)
    return y, div(x_dot, mul(y, 2.0))
jvp_rules[sqrt_p] = sqrt_jvp
batch_rules[sqrt_p] = vectorized_batch_rule(sqrt_p)

rsqrt_p = Primitive("rsqrt")
def rsqrt(x): return rsqrt_p.bind(x)

abstract_eval_rules[rsqrt_p] = unop_abstract_eval("rsqrt", INEXACT)
def rsqrt_jvp(primals, tangents):                      # d x^(-1/2) = -y/(2x) dx
    (x,), (x_dot,) = primals, tangents
    y = rsqrt(x)
    return y, mul(x_dot, mul(div(y, x), -0.5))
jvp_rules[rsqrt_p] = rsqrt_jvp
batch_rules[rsqrt_p] = vectorized_batch_rule(rsqrt_p)

cbrt_p = Primitive("cbrt")
def cbrt(x): return cbrt_p.bind(x)

abstract_eval_rules[cbrt_p] = unop_abstract_eval("cbrt", (FLOAT,))
def cbrt_jvp(primals, tangents):                       # d x^(1/3) = dx / (3 y²)
    (x,), (x_dot,) = primals, tangents
    y = cbrt(x)
    return y, div(x_dot, mul(square(y), 3.0))
jvp_rules[cbrt_p] = cbrt_jvp
batch_rules[cbrt_p] = vectorized_batch_rule(cbrt_p)

# ---- trigonometric and hyperbolic -----------------------------------------------------------
sin_p = Primitive("sin")
def sin(x): return sin_p.bind(x)

abstract_eval_rules[sin_p] = unop_abstract_eval("sin", INEXACT)
def sin_jvp(primals, tangents):                        # d sin x = cos x dx
    (x,), (x_dot,) = primals, tangents
    return sin(x), mul(x_dot, cos(x))
jvp_rules[sin_p] = sin_jvp
batch_rules[sin_p] = vectorized_batch_rule(sin_p)

cos_p = Primitive("cos")
def cos(x): return cos_p.bind(x)

abstract_eval_rules[cos_p] = unop_abstract_eval("cos", INEXACT)
def cos_jvp(primals, tangents):                        # d cos x = -sin x dx
    (x,), (x_dot,) = primals, tangents
    return cos(x), mul(x_dot, neg(sin(x)))
jvp_rules[cos_p] = cos_jvp
batch_rules[cos_p] = vectorized_batch_rule(cos_p)

tan_p = Primitive("tan")
def tan(x): return tan_p.bind(x)

abstract_eval_rules[tan_p] = unop_abstract_eval("tan", INEXACT)
def tan_jvp(primals, tangents):                        # d tan x = (1 + y²) dx
    (x,), (x_dot,) = primals, tangents
    y = tan(x)
    return y, mul(x_dot, add(square(y), 1.0))
jvp_rules[tan_p] = tan_jvp
batch_rules[tan_p] = vectorized_batch_rule(tan_p)

asin_p = Primitive("asin")
def asin(x): return asin_p.bind(x)

abstract_eval_rules[asin_p] = unop_abstract_eval("asin", INEXACT)
def asin_jvp(primals, tangents):                       # d asin x = dx / √(1-x²)
    (x,), (x_dot,) = primals, tangents
    return asin(x), mul(x_dot, rsqrt(sub(1.0, square(x))))
jvp_rules[asin_p] = asin_jvp
batch_rules[asin_p] = vectorized_batch_rule(asin_p)

acos_p = Primitive("acos")
def acos(x): return acos_p.bind(x)

abstract_eval_rules[acos_p] = unop_abstract_eval("acos", INEXACT)
def acos_jvp(primals, tangents):                       # d acos x = -dx / √(1-x²)
    (x,), (x_dot,) = primals, tangents
    return acos(x), neg(mul(x_dot, rsqrt(sub(1.0, square(x)))))
jvp_rules[acos_p] = acos_jvp
batch_rules[acos_p] = vectorized_batch_rule(acos_p)

atan_p = Primitive("atan")
def atan(x): return atan_p.bind(x)

abstract_eval_rules[atan_p] = unop_abstract_eval("atan", INEXACT)
def atan_jvp(primals, tangents):                       # d atan x = dx / (1+x²)
    (x,), (x_dot,) = primals, tangents
    return atan(x), div(x_dot, add(square(x), 1.0))
jvp_rules[atan_p] = atan_jvp
batch_rules[atan_p] = vectorized_batch_rule(atan_p)

atan2_p = Primitive("atan2")
def atan2(x, y): return atan2_p.bind(*promote_scalars(x, y))

abstract_eval_rules[atan2_p] = naryop_abstract_eval("atan2", (FLOAT,))
def atan2_jvp(primals, tangents):                      # d atan2(x,y) = (y dx - x dy)/(x²+y²)
    (x, y), (x_dot, y_dot) = primals, tangents
    denom = add(square(x), square(y))
    return atan2(x, y), add_tangents(mul(x_dot, div(y, denom)) if nonzero(x_dot) else None,
                                     mul(y_dot, neg(div(x, denom))) if nonzero(y_dot) else None)
jvp_rules[atan2_p] = atan2_jvp
batch_rules[atan2_p] = broadcasting_batch_rule(atan2_p)

sinh_p = Primitive("sinh")
def sinh(x): return sinh_p.bind(x)

abstract_eval_rules[sinh_p] = unop_abstract_eval("sinh", INEXACT)
def sinh_jvp(primals, tangents):                       # d sinh x = cosh x dx
    (x,), (x_dot,) = primals, tangents
    return sinh(x), mul(x_dot, cosh(x))
jvp_rules[sinh_p] = sinh_jvp
batch_rules[sinh_p] = vectorized_batch_rule(sinh_p)

cosh_p = Primitive("cosh")
def cosh(x): return cosh_p.bind(x)

abstract_eval_rules[cosh_p] = unop_abstract_eval("cosh", INEXACT)
def cosh_jvp(primals, tangents):                       # d cosh x = sinh x dx
    (x,), (x_dot,) = primals, tangents
    return cosh(x), mul(x_dot, sinh(x))
jvp_rules[cosh_p] = cosh_jvp
batch_rules[cosh_p] = vectorized_batch_rule(cosh_p)

asinh_p = Primitive("asinh")
def asinh(x): return asinh_p.bind(x)

abstract_eval_rules[asinh_p] = unop_abstract_eval("asinh", INEXACT)
def asinh_jvp(primals, tangents):                      # d asinh x = dx / √(x²+1)
    (x,), (x_dot,) = primals, tangents
    return asinh(x), mul(x_dot, rsqrt(add(square(x), 1.0)))
jvp_rules[asinh_p] = asinh_jvp
batch_rules[asinh_p] = vectorized_batch_rule(asinh_p)

acosh_p = Primitive("acosh")
def acosh(x): return acosh_p.bind(x)

abstract_eval_rules[acosh_p] = unop_abstract_eval("acosh", INEXACT)
def acosh_jvp(primals, tangents):                      # d acosh x = dx / √(x²-1)
    (x,), (x_dot,) = primals, tangents
    return acosh(x), mul(x_dot, rsqrt(sub(square(x), 1.0)))
jvp_rules[acosh_p] = acosh_jvp
batch_rules[acosh_p] = vectorized_batch_rule(acosh_p)

atanh_p = Primitive("atanh")
def atanh(x): return atanh_p.bind(x)

abstract_eval_rules[atanh_p] = unop_abstract_eval("atanh", INEXACT)
def atanh_jvp(primals, tangents):                      # d atanh x = dx / (1-x²)
    (x,), (x_dot,) = primals, tangents
    return atanh(x), div(x_dot, sub(1.0, square(x)))
jvp_rules[atanh_p] = atanh_jvp
batch_rules[atanh_p] = vectorized_batch_rule(atanh_p)

# ---- erf family ---------------------------------------------------------------------------
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

erf_p = Primitive("erf")
def erf(x): return erf_p.bind(x)

abstract_eval_rules[erf_p] = unop_abstract_eval("erf", (FLOAT,))
def erf_jvp(primals, tangents):                        # d erf x = 2/√π·e^(-x²) dx
    (x,), (x_dot,) = primals, tangents
    return erf(x), mul(x_dot, mul(exp(neg(square(x))), _TWO_OVER_SQRT_PI))
jvp_rules[erf_p] = erf_jvp
batch_rules[erf_p] = vectorized_batch_rule(erf_p)

erfc_p = Primitive("erfc")
def erfc(x): return erfc_p.bind(x)

abstract_eval_rules[erfc_p] = unop_abstract_eval("erfc", (FLOAT,))
def erfc_jvp(primals, tangents):                       # d erfc x = -2/√π·e^(-x²) dx
    (x,), (x_dot,) = primals, tangents
    return erfc(x), mul(x_dot, mul(exp(neg(square(x))), -_TWO_OVER_SQRT_PI))
jvp_rules[erfc_p] = erfc_jvp
batch_rules[erfc_p] = vectorized_batch_rule(erfc_p)

erf_inv_p = Primitive("erf_inv")
def erf_inv(x): return erf_inv_p.bind(x)

abstract_eval_rules[erf_inv_p] = unop_abstract_eval("erf_inv", (FLOAT,))
def erf_inv_jvp(primals, tangents):                    # d erf⁻¹ x = √π/2·e^(y²) dx
    (x,), (x_dot,) = primals, tangents
    y = erf_inv(x)
    return y, mul(x_dot, mul(exp(square(y)), 1.0 / _TWO_OVER_SQRT_PI))
jvp_rules[erf_inv_p] = erf_inv_jvp
batch_rules[erf_inv_p] = vectorized_batch_rule(erf_inv_p)

# ---- gamma family (floats only, as jax.lax) ------------------------------------------------
lgamma_p = Primitive("lgamma")
def lgamma(x): return lgamma_p.bind(x)

abstract_eval_rules[lgamma_p] = unop_abstract_eval("lgamma", (FLOAT,))
def lgamma_jvp(primals, tangents):                     # d ln|Γ(x)| = ψ(x) dx
    (x,), (x_dot,) = primals, tangents
    return lgamma(x), mul(x_dot, digamma(x))
jvp_rules[lgamma_p] = lgamma_jvp
batch_rules[lgamma_p] = vectorized_batch_rule(lgamma_p)

digamma_p = Primitive("digamma")
def digamma(x): return digamma_p.bind(x)

abstract_eval_rules[digamma_p] = unop_abstract_eval("digamma", (FLOAT,))
def digamma_jvp(primals, tangents):                    # d ψ(x) = ψ⁽¹⁾(x) dx
    (x,), (x_dot,) = primals, tangents
    return digamma(x), mul(x_dot, polygamma(1.0, x))
jvp_rules[digamma_p] = digamma_jvp
batch_rules[digamma_p] = vectorized_batch_rule(digamma_p)

polygamma_p = Primitive("polygamma")
def polygamma(m, x): return polygamma_p.bind(*promote_scalars(m, x))

abstract_eval_rules[polygamma_p] = naryop_abstract_eval("polygamma", (FLOAT,))
def polygamma_jvp(primals, tangents):                  # d ψ⁽ᵐ⁾(x) = ψ⁽ᵐ⁺¹⁾(x) dx; m: none
    (m, x), (m_dot, x_dot) = primals, tangents
    if nonzero(m_dot):                                 # m is an integer order (as jax)
        raise ValueError("polygamma gradient with respect to m is not supported")
    out = polygamma(m, x)
    if not nonzero(x_dot):
        return out, None
    return out, mul(x_dot, polygamma(add(m, 1.0), x))
jvp_rules[polygamma_p] = polygamma_jvp
batch_rules[polygamma_p] = broadcasting_batch_rule(polygamma_p)

# ---- incomplete gamma (floats only, as jax.lax) ---------------------------------------------
#   P(a, x) = γ(a, x)/Γ(a) = 1/Γ(a)·∫₀ˣ t^(a-1)·e^(-t) dt  (igamma),  Q = 1 - P  (igammac)
#   ∂P/∂x = x^(a-1)·e^(-x)/Γ(a) = exp((a - 1)·log x - x - lgamma(a))
#   ∂P/∂a has no closed form: igamma_grad_a (a series or continued fraction, in the backends)
#   random_gamma_grad(a, x) = dx/da along P(a, x) = u fixed, the implicit reparameterization
#   gradient of a Gamma(a) sample x: -(∂P/∂a)/(∂P/∂x)
# igamma_grad_a and random_gamma_grad are not differentiable (jax has no rule either).
def _igamma_partial_x(a, x):                           # ∂P/∂x
    return exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a)))


igamma_p = Primitive("igamma")
def igamma(a, x): return igamma_p.bind(*promote_scalars(a, x))

abstract_eval_rules[igamma_p] = naryop_abstract_eval("igamma", (FLOAT,))
def igamma_jvp(primals, tangents):                     # dP = ∂P/∂a·da + ∂P/∂x·dx
    (a, x), (a_dot, x_dot) = primals, tangents
    out = igamma(a, x)
    return out, _out_shaped(add_tangents(
        mul(a_dot, igamma_grad_a(a, x)) if nonzero(a_dot) else None,
        mul(x_dot, _igamma_partial_x(a, x)) if nonzero(x_dot) else None), out)
jvp_rules[igamma_p] = igamma_jvp
batch_rules[igamma_p] = broadcasting_batch_rule(igamma_p)

igammac_p = Primitive("igammac")
def igammac(a, x): return igammac_p.bind(*promote_scalars(a, x))

abstract_eval_rules[igammac_p] = naryop_abstract_eval("igammac", (FLOAT,))
def igammac_jvp(primals, tangents):                    # dQ = -dP
    (a, x), (a_dot, x_dot) = primals, tangents
    out = igammac(a, x)
    return out, _out_shaped(add_tangents(
        neg(mul(a_dot, igamma_grad_a(a, x))) if nonzero(a_dot) else None,
        neg(mul(x_dot, _igamma_partial_x(a, x))) if nonzero(x_dot) else None), out)
jvp_rules[igammac_p] = igammac_jvp
batch_rules[igammac_p] = broadcasting_batch_rule(igammac_p)


def _not_differentiable(prim):
    def rule(primals, tangents):
        if any(nonzero(t) for t in tangents):
            raise NotImplementedError(
                f"{prim.name} is not differentiable (as in jax), so neither are second "
                f"derivatives through it: of lax.igamma/igammac in a, of gamma-family "
                f"samples in their shape parameter")
        return prim.bind(*primals), None
    return rule


igamma_grad_a_p = Primitive("igamma_grad_a")
def igamma_grad_a(a, x): return igamma_grad_a_p.bind(*promote_scalars(a, x))

abstract_eval_rules[igamma_grad_a_p] = naryop_abstract_eval("igamma_grad_a", (FLOAT,))
jvp_rules[igamma_grad_a_p] = _not_differentiable(igamma_grad_a_p)
batch_rules[igamma_grad_a_p] = broadcasting_batch_rule(igamma_grad_a_p)

random_gamma_grad_p = Primitive("random_gamma_grad")
def random_gamma_grad(a, x): return random_gamma_grad_p.bind(*promote_scalars(a, x))

abstract_eval_rules[random_gamma_grad_p] = naryop_abstract_eval("random_gamma_grad", (FLOAT,))
jvp_rules[random_gamma_grad_p] = _not_differentiable(random_gamma_grad_p)
batch_rules[random_gamma_grad_p] = broadcasting_batch_rule(random_gamma_grad_p)

# ---- complex parts -------------------------------------------------------------------------
real_p = Primitive("real")
def real(x): return real_p.bind(x)

def _complex_part_abstract_eval(name):
    def rule(x):
        check_kind(name, x, (COMPLEX,))
        return ShapedArray(x.shape, np.finfo(x.dtype).dtype, x.weak_type)
    return rule
abstract_eval_rules[real_p] = _complex_part_abstract_eval("real")
jvp_rules[real_p] = lambda primals, tangents: (real(primals[0]), real(tangents[0]))
transpose_rules[real_p] = lambda ct, x: [complex(ct, mul(ct, 0.0))]      # x̄ = ct + 0i
batch_rules[real_p] = vectorized_batch_rule(real_p)

imag_p = Primitive("imag")
def imag(x): return imag_p.bind(x)

abstract_eval_rules[imag_p] = _complex_part_abstract_eval("imag")
jvp_rules[imag_p] = lambda primals, tangents: (imag(primals[0]), imag(tangents[0]))
transpose_rules[imag_p] = lambda ct, x: [complex(mul(ct, 0.0), neg(ct))]  # x̄ = -i·ct
batch_rules[imag_p] = vectorized_batch_rule(imag_p)

complex_p = Primitive("complex")
def complex(x, y): return complex_p.bind(*promote_scalars(x, y))  # noqa: A001

def complex_abstract_eval(x, y):
    out = naryop_abstract_eval("complex", (FLOAT,))(x, y)
    if out.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"complex: operands must be float32 or float64, got {out.dtype.name}")
    cdt = np.complex64 if out.dtype == np.float32 else np.complex128
    return ShapedArray(out.shape, cdt, out.weak_type)
abstract_eval_rules[complex_p] = complex_abstract_eval
def complex_jvp(primals, tangents):                    # d(x + iy) = dx + i dy
    from fnad.primitives.shape_ops import full
    (x, y), (x_dot, y_dot) = primals, tangents
    out = complex(x, y)
    shape = _get_aval(out).shape
    fdt = _get_aval(x).dtype
    xd = x_dot if nonzero(x_dot) else full(shape, 0, fdt)
    yd = y_dot if nonzero(y_dot) else full(shape, 0, fdt)
    return out, complex(xd, yd)
jvp_rules[complex_p] = complex_jvp
def complex_transpose(ct, x, y):                       # x̄ = Re ct, ȳ = -Im ct (JAX's rule)
    return [_unbroadcast(real(ct), _aval(x)) if is_undefined(x) else None,
            _unbroadcast(neg(imag(ct)), _aval(y)) if is_undefined(y) else None]
transpose_rules[complex_p] = complex_transpose
batch_rules[complex_p] = broadcasting_batch_rule(complex_p)

conj_p = Primitive("conj")
def conj(x):
    """The complex conjugate; a float32/float64 x gives x as a complex number (as jax)."""
    aval = _get_aval(x)
    if aval.dtype in (np.float32, np.float64):
        from fnad.primitives.logic import convert_element_type
        cdt = np.complex64 if aval.dtype == np.float32 else np.complex128
        return convert_element_type(x, cdt, aval.weak_type)
    return conj_p.bind(x)

abstract_eval_rules[conj_p] = unop_abstract_eval("conj", (COMPLEX,))
jvp_rules[conj_p] = lambda primals, tangents: (conj(primals[0]), conj(tangents[0]))
transpose_rules[conj_p] = lambda ct, x: [conj(ct)]    # x̄ = conj(ct)
batch_rules[conj_p] = vectorized_batch_rule(conj_p)

# ---- the rest of the family, in their own modules (re-exported here for lax and backends) -----
from fnad.primitives.bits import (  # noqa: E402,F401
    bitcast_convert_type,
    bitcast_convert_type_p,
    clz,
    clz_p,
    mulhi,
    mulhi_p,
    nextafter,
    nextafter_p,
    reduce_precision,
    reduce_precision_p,
)
from fnad.primitives.special import (  # noqa: E402,F401
    bessel_i0e,
    bessel_i0e_p,
    bessel_i1e,
    bessel_i1e_p,
    betainc,
    regularized_incomplete_beta_p,
    zeta,
    zeta_p,
)

__all__ += ["betainc", "zeta", "bessel_i0e", "bessel_i1e", "nextafter", "clz", "mulhi",
            "bitcast_convert_type", "reduce_precision"]

"""XLA lowerings of the elementwise arithmetic and transcendental primitives.

n-ary primitives take equal shapes or rank-0 operands (fnad's rule): rank-0 operands are
broadcast explicitly, since older jax.lax does not. Where XLA and the numpy reference
differ, the reference wins: integer division and remainder by zero give 0 (XLA gives -1
and the dividend).
"""
from __future__ import annotations

from jax import lax

from fnad.backends.xla import eager, impl_rules
from fnad.primitives import elementwise as ew


def broadcast_scalars(*xs):
    """Rank-0 operands broadcast to the shape of the others (fnad's n-ary rule)."""
    shape = next((x.shape for x in xs if x.shape), ())
    if not shape:
        return xs
    return tuple(lax.broadcast(x, shape) if not x.shape else x for x in xs)


def nary(op):
    """`op` on operands of equal shapes after broadcasting the rank-0 ones."""
    def lowering(*xs):
        return op(*broadcast_scalars(*xs))
    lowering.__name__ = getattr(op, "__name__", "nary")
    return lowering


def _is_int(x) -> bool:
    return x.dtype.kind in "iu"


def _div(x, y):
    x, y = broadcast_scalars(x, y)
    if not _is_int(x):
        return lax.div(x, y)
    zero = lax.full_like(y, 0)                         # x / 0 = 0 as NumPy's floor_divide
    by_zero = lax.eq(y, zero)
    q = lax.div(x, lax.select(by_zero, lax.full_like(y, 1), y))   # rounds toward zero
    return lax.select(by_zero, zero, q)


def _rem(x, y):
    x, y = broadcast_scalars(x, y)
    if not _is_int(x):
        return lax.rem(x, y)                           # C fmod: the sign of x
    zero = lax.full_like(y, 0)                         # fmod(x, 0) = 0 as NumPy's
    by_zero = lax.eq(y, zero)
    r = lax.rem(x, lax.select(by_zero, lax.full_like(y, 1), y))
    return lax.select(by_zero, zero, r)


def _round(x, *, rounding_method):
    return lax.round(x, lax.RoundingMethod(rounding_method))


impl_rules[ew.add_p] = eager(nary(lax.add))
impl_rules[ew.add_any_p] = eager(nary(lax.add))
impl_rules[ew.sub_p] = eager(nary(lax.sub))
impl_rules[ew.mul_p] = eager(nary(lax.mul))
impl_rules[ew.div_p] = eager(_div)
impl_rules[ew.neg_p] = eager(lax.neg)
impl_rules[ew.rem_p] = eager(_rem)
impl_rules[ew.pow_p] = eager(nary(lax.pow))
impl_rules[ew.integer_pow_p] = eager(lambda x, *, y: lax.integer_pow(x, y))
impl_rules[ew.square_p] = eager(lambda x: lax.mul(x, x))
impl_rules[ew.max_p] = eager(nary(lax.max))             # NaN-propagating, as np.maximum
impl_rules[ew.min_p] = eager(nary(lax.min))
impl_rules[ew.abs_p] = eager(lax.abs)
impl_rules[ew.sign_p] = eager(lax.sign)
impl_rules[ew.floor_p] = eager(lax.floor)
impl_rules[ew.ceil_p] = eager(lax.ceil)
impl_rules[ew.round_p] = eager(_round)
impl_rules[ew.exp_p] = eager(lax.exp)
impl_rules[ew.exp2_p] = eager(lax.exp2)
impl_rules[ew.log_p] = eager(lax.log)
impl_rules[ew.log1p_p] = eager(lax.log1p)
impl_rules[ew.expm1_p] = eager(lax.expm1)
impl_rules[ew.tanh_p] = eager(lax.tanh)
impl_rules[ew.logistic_p] = eager(lax.logistic)
impl_rules[ew.sqrt_p] = eager(lax.sqrt)
impl_rules[ew.rsqrt_p] = eager(lax.rsqrt)
impl_rules[ew.cbrt_p] = eager(lax.cbrt)
impl_rules[ew.sin_p] = eager(lax.sin)
impl_rules[ew.cos_p] = eager(lax.cos)
impl_rules[ew.tan_p] = eager(lax.tan)
impl_rules[ew.asin_p] = eager(lax.asin)
impl_rules[ew.acos_p] = eager(lax.acos)
impl_rules[ew.atan_p] = eager(lax.atan)
impl_rules[ew.atan2_p] = eager(nary(lax.atan2))
impl_rules[ew.sinh_p] = eager(lax.sinh)
impl_rules[ew.cosh_p] = eager(lax.cosh)
impl_rules[ew.asinh_p] = eager(lax.asinh)
impl_rules[ew.acosh_p] = eager(lax.acosh)
impl_rules[ew.atanh_p] = eager(lax.atanh)
impl_rules[ew.erf_p] = eager(lax.erf)
impl_rules[ew.erfc_p] = eager(lax.erfc)
impl_rules[ew.erf_inv_p] = eager(lax.erf_inv)
impl_rules[ew.lgamma_p] = eager(lax.lgamma)
impl_rules[ew.digamma_p] = eager(lax.digamma)
impl_rules[ew.polygamma_p] = eager(nary(lax.polygamma))  # XLA's: m >= 1 wrong for x < -7
impl_rules[ew.igamma_p] = eager(nary(lax.igamma))
impl_rules[ew.igammac_p] = eager(nary(lax.igammac))
impl_rules[ew.igamma_grad_a_p] = eager(nary(lax.igamma_grad_a))
impl_rules[ew.random_gamma_grad_p] = eager(nary(lax.random_gamma_grad))
impl_rules[ew.real_p] = eager(lax.real)
impl_rules[ew.imag_p] = eager(lax.imag)
impl_rules[ew.complex_p] = eager(nary(lax.complex))
impl_rules[ew.conj_p] = eager(lax.conj)                 # complex operands only (fnad's rule)

# ---- primitives/special.py and primitives/bits.py --------------------------------------------
impl_rules[ew.regularized_incomplete_beta_p] = eager(nary(lax.betainc))
impl_rules[ew.zeta_p] = eager(nary(lax.zeta))
impl_rules[ew.bessel_i0e_p] = eager(lax.bessel_i0e)
impl_rules[ew.bessel_i1e_p] = eager(lax.bessel_i1e)
impl_rules[ew.nextafter_p] = eager(nary(lax.nextafter))
impl_rules[ew.clz_p] = eager(lax.clz)
impl_rules[ew.mulhi_p] = eager(nary(lax.mulhi))
impl_rules[ew.bitcast_convert_type_p] = eager(
    lambda x, *, new_dtype: lax.bitcast_convert_type(x, new_dtype))
impl_rules[ew.reduce_precision_p] = eager(
    lambda x, *, exponent_bits, mantissa_bits: lax.reduce_precision(x, exponent_bits,
                                                                     mantissa_bits))

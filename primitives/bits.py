"""Primitives on the bits of numbers: nextafter, clz, mulhi, bitcast_convert_type,
reduce_precision.

Re-exported by primitives/elementwise.py (so lax, the cost table and the backends'
elementwise modules see them with the rest of the family). Each block: declaration,
wrapper, shape rule, JVP (and transpose for reduce_precision, linear as in jax), batching;
implementations live in backends/.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import (
    Primitive,
    ShapedArray,
    abstract_eval_rules,
    batch_rules,
    jvp_rules,
    nonzero,
    transpose_rules,
)
from fnad.primitives._batching import (
    broadcasting_batch_rule,
    moveaxis,
    vectorized_batch_rule,
)
from fnad.primitives._util import FLOAT, INT, naryop_abstract_eval, no_tangent_jvp, \
    promote_scalars, unop_abstract_eval

__all__ = ["nextafter", "clz", "mulhi", "bitcast_convert_type", "reduce_precision"]


# ---- nextafter: the next representable float after x toward y (C's nextafter) ----------------
# A primitive because both backends have it exactly (np.nextafter, XLA's NextAfter); the
# composite in fnad.numpy rebuilds it from frexp. Not differentiable, as in jax.
nextafter_p = Primitive("nextafter")
def nextafter(x1, x2): return nextafter_p.bind(*promote_scalars(x1, x2))

abstract_eval_rules[nextafter_p] = naryop_abstract_eval("nextafter", (FLOAT,))
def nextafter_jvp(primals, tangents):
    if any(nonzero(t) for t in tangents):
        raise NotImplementedError("nextafter is not differentiable (as in jax)")
    return nextafter(*primals), None
jvp_rules[nextafter_p] = nextafter_jvp
batch_rules[nextafter_p] = broadcasting_batch_rule(nextafter_p)

# ---- clz: the count of leading zero bits of an integer (of its two's-complement pattern) ------
clz_p = Primitive("clz")
def clz(x): return clz_p.bind(x)

abstract_eval_rules[clz_p] = unop_abstract_eval("clz", (INT,))
jvp_rules[clz_p] = no_tangent_jvp(clz_p)
batch_rules[clz_p] = vectorized_batch_rule(clz_p)

# ---- mulhi: the high half of the double-width product of two integers --------------------------
#   mulhi(x, y) = (x·y) >> nbits, the product exact in 2·nbits bits (signed for signed ints)
mulhi_p = Primitive("mulhi")
def mulhi(x, y, /): return mulhi_p.bind(*promote_scalars(x, y))

abstract_eval_rules[mulhi_p] = naryop_abstract_eval("mulhi", (INT,))
jvp_rules[mulhi_p] = no_tangent_jvp(mulhi_p)
batch_rules[mulhi_p] = broadcasting_batch_rule(mulhi_p)


# ---- bitcast_convert_type: the same bits read as another dtype ---------------------------------
#   equal widths: the same shape; to a narrower dtype: a last axis of old/new elements is
#   added (little-endian order, as XLA); to a wider one: the last axis, which must hold
#   new/old elements, is dropped. The tangent is zero (jax's defjvp_zero).
bitcast_convert_type_p = Primitive("bitcast_convert_type")
def bitcast_convert_type(operand, new_dtype):
    """`operand`'s bits as `new_dtype` (canonicalized: 64-bit types need jax_enable_x64)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    return bitcast_convert_type_p.bind(operand, new_dtype=np.dtype(new_dtype))

def bitcast_convert_type_abstract_eval(x, *, new_dtype):
    old_bits, new_bits = 8 * x.dtype.itemsize, 8 * np.dtype(new_dtype).itemsize
    kinds = (np.dtype(x.dtype).kind, np.dtype(new_dtype).kind)
    if ("b" in kinds or "c" in kinds) and np.dtype(x.dtype) != np.dtype(new_dtype):
        raise TypeError(f"bitcast_convert_type: cannot bitcast from or to bool or complex "
                        f"unless both dtypes are the same (from {x.dtype.name} to "
                        f"{np.dtype(new_dtype).name})")
    if old_bits == new_bits:
        shape = x.shape
    elif old_bits > new_bits:
        shape = (*x.shape, old_bits // new_bits)
    else:
        dim_size = x.shape[-1] if x.shape else 1
        if dim_size * old_bits != new_bits:
            raise ValueError(f"bitcast_convert_type: cannot convert an array of shape "
                             f"{x.shape} from {x.dtype.name} ({old_bits} bits) to "
                             f"{np.dtype(new_dtype).name} ({new_bits} bits): the last axis "
                             f"must hold {new_bits // old_bits} elements, not {dim_size}")
        shape = x.shape[:-1]
    return ShapedArray(shape, new_dtype)
abstract_eval_rules[bitcast_convert_type_p] = bitcast_convert_type_abstract_eval
jvp_rules[bitcast_convert_type_p] = no_tangent_jvp(bitcast_convert_type_p)
def bitcast_convert_type_batch(vals, dims, *, new_dtype):  # the batch axis first: the last
    (x,), (d,) = vals, dims                                # axis may change
    if d is None:
        return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), None
    x = moveaxis(x, d, 0)
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), 0
batch_rules[bitcast_convert_type_p] = bitcast_convert_type_batch


# ---- reduce_precision: round to a float format of fewer exponent and mantissa bits -------------
#   round to nearest even in the mantissa; beyond the format's range ±inf, below its
#   smallest normal ±0 (XLA has no subnormals here); NaN stays NaN. jax treats it as linear
#   (deflinear): d R(x) = R(dx), x̄ = R(ct); reproduced here.
reduce_precision_p = Primitive("reduce_precision")
def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    import operator
    try:
        exponent_bits, mantissa_bits = operator.index(exponent_bits), \
            operator.index(mantissa_bits)
    except TypeError:
        raise TypeError(f"reduce_precision: exponent_bits and mantissa_bits must be Python "
                        f"ints (static), got {exponent_bits!r} and {mantissa_bits!r}") from None
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits,
                                   mantissa_bits=mantissa_bits)

def reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got "
                         f"{exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got "
                         f"{mantissa_bits}")
    return unop_abstract_eval("reduce_precision", (FLOAT,))(x)
abstract_eval_rules[reduce_precision_p] = reduce_precision_abstract_eval
def reduce_precision_jvp(primals, tangents, **params):  # d R(x) = R(dx) (jax's deflinear)
    (x,), (x_dot,) = primals, tangents
    return reduce_precision_p.bind(x, **params), reduce_precision_p.bind(x_dot, **params)
jvp_rules[reduce_precision_p] = reduce_precision_jvp
transpose_rules[reduce_precision_p] = lambda ct, x, **params: [    # x̄ = R(ct)
    reduce_precision_p.bind(ct, **params)]
batch_rules[reduce_precision_p] = vectorized_batch_rule(reduce_precision_p)

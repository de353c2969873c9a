"""Comparison, logical/bitwise, selection and conversion primitives.

Comparisons and bitwise ops have no tangent (their outputs are boolean or
integer); `select_n` and `convert_element_type` (between float types) are linear
and carry transpose rules. `stop_gradient` is the identity with a zero tangent.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import (
    Primitive,
    ShapedArray,
    abstract_eval_rules,
    batch_rules,
    get_aval,
    is_undefined,
    jvp_rules,
    nonzero,
    shape_error,
    transpose_rules,
)
from fnad.primitives._batching import broadcasting_batch_rule, vectorized_batch_rule
from fnad.primitives._util import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    ORDERED,
    add_tangents,
    broadcast_shapes,
    check_kind,
    naryop_abstract_eval,
    no_tangent_jvp,
    promote_scalars,
    unop_abstract_eval,
)

__all__ = [
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "is_finite",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "population_count",
    "select_n",
    "clamp",
    "convert_element_type",
    "stop_gradient",
]

# ---- comparisons ---------------------------------------------------------------------
eq_p = Primitive("eq")
def eq(x, y): return eq_p.bind(*promote_scalars(x, y))

abstract_eval_rules[eq_p] = naryop_abstract_eval("eq", ANY, result_dtype=np.bool_)
jvp_rules[eq_p] = no_tangent_jvp(eq_p)
batch_rules[eq_p] = broadcasting_batch_rule(eq_p)

ne_p = Primitive("ne")
def ne(x, y): return ne_p.bind(*promote_scalars(x, y))

abstract_eval_rules[ne_p] = naryop_abstract_eval("ne", ANY, result_dtype=np.bool_)
jvp_rules[ne_p] = no_tangent_jvp(ne_p)
batch_rules[ne_p] = broadcasting_batch_rule(ne_p)

lt_p = Primitive("lt")
def lt(x, y): return lt_p.bind(*promote_scalars(x, y))

abstract_eval_rules[lt_p] = naryop_abstract_eval("lt", ORDERED, result_dtype=np.bool_)
jvp_rules[lt_p] = no_tangent_jvp(lt_p)
batch_rules[lt_p] = broadcasting_batch_rule(lt_p)

le_p = Primitive("le")
def le(x, y): return le_p.bind(*promote_scalars(x, y))

abstract_eval_rules[le_p] = naryop_abstract_eval("le", ORDERED, result_dtype=np.bool_)
jvp_rules[le_p] = no_tangent_jvp(le_p)
batch_rules[le_p] = broadcasting_batch_rule(le_p)

gt_p = Primitive("gt")
def gt(x, y): return gt_p.bind(*promote_scalars(x, y))

abstract_eval_rules[gt_p] = naryop_abstract_eval("gt", ORDERED, result_dtype=np.bool_)
jvp_rules[gt_p] = no_tangent_jvp(gt_p)
batch_rules[gt_p] = broadcasting_batch_rule(gt_p)

ge_p = Primitive("ge")
def ge(x, y): return ge_p.bind(*promote_scalars(x, y))

abstract_eval_rules[ge_p] = naryop_abstract_eval("ge", ORDERED, result_dtype=np.bool_)
jvp_rules[ge_p] = no_tangent_jvp(ge_p)
batch_rules[ge_p] = broadcasting_batch_rule(ge_p)

is_finite_p = Primitive("is_finite")
def is_finite(x): return is_finite_p.bind(x)

abstract_eval_rules[is_finite_p] = unop_abstract_eval("is_finite", (FLOAT,), np.bool_)
jvp_rules[is_finite_p] = no_tangent_jvp(is_finite_p)
batch_rules[is_finite_p] = vectorized_batch_rule(is_finite_p)

# ---- logical and bitwise (booleans: logical; integers: bitwise) -------------------------
and_p = Primitive("and")
def bitwise_and(x, y): return and_p.bind(*promote_scalars(x, y))

abstract_eval_rules[and_p] = naryop_abstract_eval("and", (BOOL, INT))
jvp_rules[and_p] = no_tangent_jvp(and_p)
batch_rules[and_p] = broadcasting_batch_rule(and_p)

or_p = Primitive("or")
def bitwise_or(x, y): return or_p.bind(*promote_scalars(x, y))

abstract_eval_rules[or_p] = naryop_abstract_eval("or", (BOOL, INT))
jvp_rules[or_p] = no_tangent_jvp(or_p)
batch_rules[or_p] = broadcasting_batch_rule(or_p)

xor_p = Primitive("xor")
def bitwise_xor(x, y): return xor_p.bind(*promote_scalars(x, y))

abstract_eval_rules[xor_p] = naryop_abstract_eval("xor", (BOOL, INT))
jvp_rules[xor_p] = no_tangent_jvp(xor_p)
batch_rules[xor_p] = broadcasting_batch_rule(xor_p)

not_p = Primitive("not")
def bitwise_not(x): return not_p.bind(x)

abstract_eval_rules[not_p] = unop_abstract_eval("not", (BOOL, INT))
jvp_rules[not_p] = no_tangent_jvp(not_p)
batch_rules[not_p] = vectorized_batch_rule(not_p)

shift_left_p = Primitive("shift_left")
def shift_left(x, y): return shift_left_p.bind(*promote_scalars(x, y))

abstract_eval_rules[shift_left_p] = naryop_abstract_eval("shift_left", (INT,))
jvp_rules[shift_left_p] = no_tangent_jvp(shift_left_p)
batch_rules[shift_left_p] = broadcasting_batch_rule(shift_left_p)

shift_right_arithmetic_p = Primitive("shift_right_arithmetic")
def shift_right_arithmetic(x, y): return shift_right_arithmetic_p.bind(*promote_scalars(x, y))

abstract_eval_rules[shift_right_arithmetic_p] = naryop_abstract_eval(
    "shift_right_arithmetic", (INT,))
jvp_rules[shift_right_arithmetic_p] = no_tangent_jvp(shift_right_arithmetic_p)
batch_rules[shift_right_arithmetic_p] = broadcasting_batch_rule(shift_right_arithmetic_p)

shift_right_logical_p = Primitive("shift_right_logical")
def shift_right_logical(x, y): return shift_right_logical_p.bind(*promote_scalars(x, y))

abstract_eval_rules[shift_right_logical_p] = naryop_abstract_eval("shift_right_logical", (INT,))
jvp_rules[shift_right_logical_p] = no_tangent_jvp(shift_right_logical_p)
batch_rules[shift_right_logical_p] = broadcasting_batch_rule(shift_right_logical_p)

population_count_p = Primitive("population_count")
def population_count(x): return population_count_p.bind(x)

abstract_eval_rules[population_count_p] = unop_abstract_eval("population_count", (INT,))
jvp_rules[population_count_p] = no_tangent_jvp(population_count_p)
batch_rules[population_count_p] = vectorized_batch_rule(population_count_p)

# ---- select_n: out = cases[which] elementwise ------------------------------------------
select_n_p = Primitive("select_n")
def select_n(which, *cases):
    """cases[which] elementwise; `which` is bool (2 cases) or int32 (n cases)."""
    return select_n_p.bind(which, *promote_scalars(*cases))

def select_n_abstract_eval(which, *cases):
    if not cases:
        raise shape_error("select_n", "needs at least one case")
    if which.dtype != np.bool_ and which.dtype.kind not in "iu":
        raise shape_error("select_n", f"`which` must be bool or integer, got {which.dtype.name}")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise shape_error("select_n", f"a boolean `which` selects between at most 2 cases, "
                                      f"got {len(cases)}")
    if any(c.dtype != cases[0].dtype for c in cases):
        raise shape_error("select_n", "cases must have the same dtypes, got "
                                      + ", ".join(c.dtype.name for c in cases))
    shape = broadcast_shapes("select_n", which, *cases)
    return ShapedArray(shape, cases[0].dtype, all(c.weak_type for c in cases))
abstract_eval_rules[select_n_p] = select_n_abstract_eval
def select_n_jvp(primals, tangents):                   # d cases[w] = case_dots[w]
    from fnad.primitives.shape_ops import full
    which, *cases = primals
    out = select_n(which, *cases)
    aval = get_aval(out)
    if not dtypes.is_inexact(aval.dtype):
        return out, None
    dots = [t if nonzero(t) else full(get_aval(c).shape, 0, aval.dtype)
            for c, t in zip(cases, tangents[1:])]
    return out, select_n(which, *dots)
jvp_rules[select_n_p] = select_n_jvp
def select_n_transpose(ct, which, *cases):             # case ī = ct where which == i, else 0
    from fnad.primitives.elementwise import _unbroadcast
    from fnad.primitives.shape_ops import full
    if is_undefined(which):
        raise ValueError("select_n is not linear in its predicate")
    zeros = full(get_aval(ct).shape, 0, get_aval(ct).dtype)
    cts = [None]
    for i, c in enumerate(cases):
        if not is_undefined(c):
            cts.append(None)
            continue
        picks = [zeros] * len(cases)
        picks[i] = ct
        cts.append(_unbroadcast(select_n(which, *picks), c.aval))
    return cts
transpose_rules[select_n_p] = select_n_transpose
batch_rules[select_n_p] = broadcasting_batch_rule(select_n_p)

# ---- clamp: min(max(x, lo), hi) --------------------------------------------------------
clamp_p = Primitive("clamp")
def clamp(lo, x, hi):
    """min(max(x, lo), hi); lo and hi are scalars or of x's shape (jax's error otherwise: it
    catches clamp(x, lo, hi), the order of np.clip). The primitive itself takes any scalar
    operand, as the other elementwise ones (jit's simplify pass makes such operands)."""
    lo, x, hi = promote_scalars(lo, x, hi)
    x_shape = get_aval(x).shape
    for name, b in (("min", lo), ("max", hi)):
        b_shape = get_aval(b).shape
        if b_shape and b_shape != x_shape:
            raise shape_error("clamp", f"requires {name}.shape == operand.shape or "
                                       f"{name}.shape == (), got {name}.shape={b_shape}, "
                                       f"operand.shape={x_shape} (the order is clamp(min, "
                                       f"x, max))")
    return clamp_p.bind(lo, x, hi)

abstract_eval_rules[clamp_p] = naryop_abstract_eval("clamp", ORDERED)
def clamp_jvp(primals, tangents):                      # the tangent of whichever bound applies
    # Selected, not multiplied by a 0/1 mask: the transpose then gives exactly 0 where
    # another operand applies, even where the cotangent is infinite (0·inf would be NaN).
    from fnad.primitives.shape_ops import broadcast_in_dim, zeros_like_array
    (lo, x, hi), (lo_dot, x_dot, hi_dot) = primals, tangents
    out = clamp_p.bind(lo, x, hi)
    oa = get_aval(out)

    def where(mask, t):
        ta = get_aval(t)
        if (ta.dtype, ta.weak_type) != (oa.dtype, oa.weak_type):
            t = convert_element_type(t, oa.dtype, oa.weak_type)
        if ta.shape != oa.shape:                        # a scalar bound's tangent
            t = broadcast_in_dim(t, oa.shape, ())
        return select_n(mask, zeros_like_array(t), t)
    terms = []
    if nonzero(lo_dot):                                # lo > hi gives hi, not lo
        terms.append(where(bitwise_and(gt(lo, x), lt(lo, hi)), lo_dot))
    if nonzero(x_dot):
        terms.append(where(bitwise_and(gt(x, lo), lt(x, hi)), x_dot))
    if nonzero(hi_dot):                                # hi < max(x, lo) (jax: hi < x only)
        terms.append(where(bitwise_or(lt(hi, x), lt(hi, lo)), hi_dot))
    return out, add_tangents(*terms)
jvp_rules[clamp_p] = clamp_jvp
batch_rules[clamp_p] = broadcasting_batch_rule(clamp_p)

# ---- convert_element_type ------------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")
def convert_element_type(x, new_dtype, weak_type: bool = False):
    """x as `new_dtype` (canonicalized: 64-bit types need jax_enable_x64)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))

def convert_element_type_abstract_eval(x, *, new_dtype, weak_type):
    check_kind("convert_element_type", x, ANY)
    return ShapedArray(x.shape, new_dtype, weak_type)
abstract_eval_rules[convert_element_type_p] = convert_element_type_abstract_eval
def convert_element_type_jvp(primals, tangents, *, new_dtype, weak_type):
    (x,), (x_dot,) = primals, tangents                 # float -> float: d convert(x) = convert(dx)
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if not (dtypes.is_inexact(get_aval(x).dtype) and dtypes.is_inexact(new_dtype)):
        return out, None
    if dtypes.is_complex(get_aval(x).dtype) and not dtypes.is_complex(new_dtype):
        from fnad.primitives.elementwise import real
        x_dot = real(x_dot)
    t_weak = weak_type and get_aval(x_dot).weak_type  # a strong tangent stays strong
    return out, convert_element_type_p.bind(x_dot, new_dtype=new_dtype, weak_type=t_weak)
jvp_rules[convert_element_type_p] = convert_element_type_jvp
def convert_element_type_transpose(ct, x, *, new_dtype, weak_type):
    old = x.aval.dtype                                 # x̄ = convert(ct) back to x's dtype
    if dtypes.is_complex(new_dtype) and not dtypes.is_complex(old):
        from fnad.primitives.elementwise import real
        ct = real(ct)
    return [convert_element_type_p.bind(ct, new_dtype=old, weak_type=x.aval.weak_type)]
transpose_rules[convert_element_type_p] = convert_element_type_transpose
batch_rules[convert_element_type_p] = broadcasting_batch_rule(convert_element_type_p)

# ---- stop_gradient: identity whose tangent is zero -----------------------------------------
stop_gradient_p = Primitive("stop_gradient")
def stop_gradient(x): return stop_gradient_p.bind(x)

abstract_eval_rules[stop_gradient_p] = unop_abstract_eval("stop_gradient", ANY)
jvp_rules[stop_gradient_p] = no_tangent_jvp(stop_gradient_p)
batch_rules[stop_gradient_p] = vectorized_batch_rule(stop_gradient_p)

"""Reduction primitives over static `axes`: reduce_sum, reduce_max, reduce_min, reduce_prod,
reduce_and, reduce_or, reduce_xor, and argmax/argmin (one axis, an integer index dtype).

Each block: declaration, wrapper, shape rule, JVP rule (transpose for reduce_sum, the one
linear reduction). The primitives' `axes` are non-negative and distinct; the wrappers also
accept negative axes (counted from the end), a superset of jax.lax. Reductions over an
empty axis give the identity of the operation (reduce_max: -inf / the dtype's minimum /
False, as lax). Implementations live in backends/. This module imports shape_ops and
cumulative only inside rules: they import it.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       jvp_rules, shape_error, transpose_rules)
from fnad.primitives._batching import axis_param_batch_rule
from fnad.primitives._util import ANY, BOOL, INT, NUM, ORDERED, check_kind, no_tangent_jvp

__all__ = ["argmax", "argmin", "reduce_and", "reduce_max", "reduce_min", "reduce_or",
           "reduce_prod", "reduce_sum", "reduce_xor"]


def _axes(name: str, x, axes) -> tuple[int, ...]:
    """`axes` as non-negative ints (negative ones count from the end); range-checked."""
    ndim = get_aval(x).ndim
    out = []
    for a in ((axes,) if isinstance(axes, (int, np.integer)) else axes):
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise shape_error(name, f"axis {a} is out of bounds for an array of rank {ndim} "
                                    f"(shape {get_aval(x).shape})")
        out.append(a % ndim)
    return tuple(out)


def _reduced_shape(name: str, x: ShapedArray, axes: tuple[int, ...]) -> tuple[int, ...]:
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise shape_error(name, f"axes {axes} must be distinct and in range for an array "
                                f"of rank {x.ndim} (shape {x.shape})")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _reduce_abstract_eval(name: str, kinds: tuple[str, ...], keep_weak: bool = True):
    """Rule for a reduction keeping the operand's dtype, over distinct in-range axes."""
    def rule(x: ShapedArray, *, axes) -> ShapedArray:
        check_kind(name, x, kinds)
        return ShapedArray(_reduced_shape(name, x, axes), x.dtype, keep_weak and x.weak_type)
    return rule


def _kept_dims(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(i for i in range(ndim) if i not in axes)


# ---- reduce_sum --------------------------------------------------------------------------
reduce_sum_p = Primitive("reduce_sum")
def reduce_sum(operand, axes):
    return reduce_sum_p.bind(operand, axes=_axes("reduce_sum", operand, axes))

abstract_eval_rules[reduce_sum_p] = _reduce_abstract_eval("reduce_sum", NUM)
def reduce_sum_jvp(primals, tangents, *, axes):       # d Σx = Σ dx
    return reduce_sum_p.bind(primals[0], axes=axes), reduce_sum_p.bind(tangents[0], axes=axes)
jvp_rules[reduce_sum_p] = reduce_sum_jvp
def reduce_sum_transpose(ct, x, *, axes):              # x̄ = ct broadcast over the summed axes
    from fnad.primitives.shape_ops import broadcast_in_dim
    return [broadcast_in_dim(ct, x.aval.shape, _kept_dims(x.aval.ndim, axes))]
transpose_rules[reduce_sum_p] = reduce_sum_transpose


# ---- reduce_max / reduce_min -------------------------------------------------------------
def _chooser_jvp(prim, primals, tangents, axes):
    """d max(x) = mean of dx over the locations attaining the max (ties split evenly, as JAX);
    a NaN max matches no location and gives a NaN tangent, as in JAX. An empty reduction is
    the constant identity, so its tangent is 0 (JAX's rule gives 0/0 = NaN there)."""
    from fnad.primitives.elementwise import div, mul
    from fnad.primitives.logic import convert_element_type, eq
    from fnad.primitives.shape_ops import broadcast_in_dim, full
    (x,), (x_dot,) = primals, tangents
    ans = prim.bind(x, axes=axes)
    x_aval = get_aval(x)
    if any(x_aval.shape[a] == 0 for a in axes):        # the identity: a constant (JAX: 0/0)
        return ans, full(get_aval(ans).shape, 0, x_aval.dtype)
    at_ans = eq(x, broadcast_in_dim(ans, x_aval.shape, _kept_dims(x_aval.ndim, axes)))
    where = convert_element_type(at_ans, x_aval.dtype)    # location indicators
    counts = reduce_sum_p.bind(where, axes=axes)
    return ans, div(reduce_sum_p.bind(mul(x_dot, where), axes=axes), counts)
batch_rules[reduce_sum_p] = axis_param_batch_rule(reduce_sum_p, "axes")


reduce_max_p = Primitive("reduce_max")
def reduce_max(operand, axes):
    return reduce_max_p.bind(operand, axes=_axes("reduce_max", operand, axes))

abstract_eval_rules[reduce_max_p] = _reduce_abstract_eval("reduce_max", ANY)
def reduce_max_jvp(primals, tangents, *, axes):       # dx at the argmax, split among ties
    return _chooser_jvp(reduce_max_p, primals, tangents, axes)
jvp_rules[reduce_max_p] = reduce_max_jvp
batch_rules[reduce_max_p] = axis_param_batch_rule(reduce_max_p, "axes")

reduce_min_p = Primitive("reduce_min")
def reduce_min(operand, axes):
    return reduce_min_p.bind(operand, axes=_axes("reduce_min", operand, axes))

abstract_eval_rules[reduce_min_p] = _reduce_abstract_eval("reduce_min", ANY)
def reduce_min_jvp(primals, tangents, *, axes):       # dx at the argmin, split among ties
    return _chooser_jvp(reduce_min_p, primals, tangents, axes)
jvp_rules[reduce_min_p] = reduce_min_jvp
batch_rules[reduce_min_p] = axis_param_batch_rule(reduce_min_p, "axes")


# ---- reduce_prod -------------------------------------------------------------------------
reduce_prod_p = Primitive("reduce_prod")
def reduce_prod(operand, axes):
    return reduce_prod_p.bind(operand, axes=_axes("reduce_prod", operand, axes))

abstract_eval_rules[reduce_prod_p] = _reduce_abstract_eval("reduce_prod", NUM)
def reduce_prod_jvp(primals, tangents, *, axes):      # d Πx = Σ_k dx_k·Π_{j<k} x_j·Π_{j>k} x_j
    # The products of the others come from exclusive cumulative products from both ends:
    # no division, so it is exact where x has zeros (one zero or several).
    from fnad.primitives.cumulative import cumprod
    from fnad.primitives.elementwise import mul
    from fnad.primitives.shape_ops import pad, reshape, transpose
    (x,), (x_dot,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    shape, ndim = get_aval(x).shape, get_aval(x).ndim
    kept = _kept_dims(ndim, axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    flat_shape = (n,) + tuple(shape[d] for d in kept)
    x_flat = reshape(transpose(x, axes + kept), flat_shape)       # [n, *kept]
    t_flat = reshape(transpose(x_dot, axes + kept), flat_shape)   # [n, *kept]
    one = np.ones((), get_aval(x).dtype)
    front = [(1, -1, 0)] + [(0, 0, 0)] * len(kept)                 # shift right by one, fill 1
    back = [(-1, 1, 0)] + [(0, 0, 0)] * len(kept)                  # shift left by one, fill 1
    before = pad(cumprod(x_flat, axis=0), one, front)              # Π_{j<k} x_j
    after = pad(cumprod(x_flat, axis=0, reverse=True), one, back)  # Π_{j>k} x_j
    return ans, reduce_sum_p.bind(mul(t_flat, mul(before, after)), axes=(0,))
jvp_rules[reduce_prod_p] = reduce_prod_jvp
batch_rules[reduce_prod_p] = axis_param_batch_rule(reduce_prod_p, "axes")


# ---- reduce_and / reduce_or / reduce_xor (bool: logical; integers: bitwise) --------------
reduce_and_p = Primitive("reduce_and")
def reduce_and(operand, axes):
    return reduce_and_p.bind(operand, axes=_axes("reduce_and", operand, axes))

abstract_eval_rules[reduce_and_p] = _reduce_abstract_eval("reduce_and", (BOOL, INT), False)
jvp_rules[reduce_and_p] = no_tangent_jvp(reduce_and_p)
batch_rules[reduce_and_p] = axis_param_batch_rule(reduce_and_p, "axes")

reduce_or_p = Primitive("reduce_or")
def reduce_or(operand, axes):
    return reduce_or_p.bind(operand, axes=_axes("reduce_or", operand, axes))

abstract_eval_rules[reduce_or_p] = _reduce_abstract_eval("reduce_or", (BOOL, INT), False)
jvp_rules[reduce_or_p] = no_tangent_jvp(reduce_or_p)
batch_rules[reduce_or_p] = axis_param_batch_rule(reduce_or_p, "axes")

reduce_xor_p = Primitive("reduce_xor")
def reduce_xor(operand, axes):
    return reduce_xor_p.bind(operand, axes=_axes("reduce_xor", operand, axes))

abstract_eval_rules[reduce_xor_p] = _reduce_abstract_eval("reduce_xor", (BOOL, INT), False)
jvp_rules[reduce_xor_p] = no_tangent_jvp(reduce_xor_p)


# ---- argmax / argmin: first occurrence; a NaN counts as the extremum (as NumPy and JAX) ---
def _argminmax_abstract_eval(name: str):
    def rule(x: ShapedArray, *, axes, index_dtype) -> ShapedArray:
        check_kind(name, x, ORDERED)
        if len(axes) != 1:
            raise shape_error(name, f"reduces exactly one axis, got axes {axes}")
        (axis,) = axes
        if not 0 <= axis < x.ndim:
            raise shape_error(name, f"axis {axis} is out of bounds for an array of rank "
                                    f"{x.ndim} (shape {x.shape})")
        if x.shape[axis] == 0:
            raise shape_error(name, f"requires a non-empty reduced dimension: operand shape "
                                    f"{x.shape}, axis {axis} has size 0")
        if not dtypes.is_int(index_dtype):
            raise shape_error(name, f"index_dtype must be an integer type, got "
                                    f"{np.dtype(index_dtype).name}")
        return ShapedArray(_reduced_shape(name, x, axes), index_dtype)
    return rule


def _index_dtype(name: str, index_dtype) -> np.dtype:
    dt = dtypes.canonicalize_dtype(index_dtype)
    if not dtypes.is_int(dt):
        raise shape_error(name, f"index_dtype must be an integer type, got {dt.name}")
    return dt
batch_rules[reduce_xor_p] = axis_param_batch_rule(reduce_xor_p, "axes")


argmax_p = Primitive("argmax")
def argmax(operand, axis: int, index_dtype):
    """Index of the first maximum along `axis` (NaN counts as the maximum)."""
    return argmax_p.bind(operand, axes=_axes("argmax", operand, (axis,)),
                         index_dtype=_index_dtype("argmax", index_dtype))

abstract_eval_rules[argmax_p] = _argminmax_abstract_eval("argmax")
jvp_rules[argmax_p] = no_tangent_jvp(argmax_p)
batch_rules[argmax_p] = axis_param_batch_rule(argmax_p, "axes")

argmin_p = Primitive("argmin")
def argmin(operand, axis: int, index_dtype):
    """Index of the first minimum along `axis` (NaN counts as the minimum)."""
    return argmin_p.bind(operand, axes=_axes("argmin", operand, (axis,)),
                         index_dtype=_index_dtype("argmin", index_dtype))

abstract_eval_rules[argmin_p] = _argminmax_abstract_eval("argmin")
jvp_rules[argmin_p] = no_tangent_jvp(argmin_p)
batch_rules[argmin_p] = axis_param_batch_rule(argmin_p, "axes")

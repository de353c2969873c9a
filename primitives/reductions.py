"""Reduction primitives: reduce_sum, ... over static `axes`.

Each block: declaration, wrapper, shape rule, JVP rule (transpose for linear ones).
"""
from __future__ import annotations

from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, jvp_rules, shape_error,
                       transpose_rules)
from fnad.primitives._util import NUM, check_kind


def _reduced_shape(name: str, x: ShapedArray, axes: tuple[int, ...]) -> tuple[int, ...]:
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise shape_error(name, f"axes {axes} must be distinct and in range for an array "
                                f"of rank {x.ndim} (shape {x.shape})")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


# ---- reduce_sum --------------------------------------------------------------------------
reduce_sum_p = Primitive("reduce_sum")
def reduce_sum(x, axes):
    return reduce_sum_p.bind(x, axes=tuple(int(a) for a in axes))

def reduce_sum_abstract_eval(x, *, axes):
    check_kind("reduce_sum", x, NUM)
    return ShapedArray(_reduced_shape("reduce_sum", x, axes), x.dtype, x.weak_type)
abstract_eval_rules[reduce_sum_p] = reduce_sum_abstract_eval
def reduce_sum_jvp(primals, tangents, *, axes):       # d Σx = Σ dx
    return reduce_sum(primals[0], axes), reduce_sum(tangents[0], axes)
jvp_rules[reduce_sum_p] = reduce_sum_jvp
def reduce_sum_transpose(ct, x, *, axes):              # x̄ = ct broadcast over the summed axes
    from fnad.primitives.shape_ops import broadcast_in_dim
    kept = tuple(i for i in range(x.aval.ndim) if i not in axes)
    return [broadcast_in_dim(ct, x.aval.shape, kept)]
transpose_rules[reduce_sum_p] = reduce_sum_transpose

"""Shape primitives: broadcast_in_dim, reshape, ... (all linear: JVP + transpose).

Each block: declaration, wrapper, shape rule, JVP rule, transpose rule.
"""
from __future__ import annotations

import numpy as np

from fnad import core, dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, get_aval, jvp_rules,
                       shape_error, transpose_rules)


def _linear_jvp(prim):
    """JVP of a linear primitive: apply it to the tangent with the same params."""
    def rule(primals, tangents, **params):
        return prim.bind(*primals, **params), prim.bind(*tangents, **params)
    return rule


# ---- broadcast_in_dim ------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")
def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast `x` to `shape`; operand dim i becomes output dim broadcast_dimensions[i]."""
    return broadcast_in_dim_p.bind(x, shape=tuple(int(d) for d in shape),
                                   broadcast_dimensions=tuple(int(d) for d in
                                                              broadcast_dimensions))

def broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    bdims = broadcast_dimensions
    if len(bdims) != x.ndim:
        raise shape_error("broadcast_in_dim", f"broadcast_dimensions {bdims} must have one "
                                              f"entry per operand dimension {x.shape}")
    if any(d < 0 for d in shape):
        raise shape_error("broadcast_in_dim", f"negative dimension in shape {shape}")
    if any(not 0 <= d < len(shape) for d in bdims) or list(bdims) != sorted(set(bdims)):
        raise shape_error("broadcast_in_dim", f"broadcast_dimensions {bdims} must be strictly "
                                              f"increasing and in range for shape {shape}")
    for i, d in enumerate(bdims):
        if x.shape[i] != 1 and x.shape[i] != shape[d]:
            raise shape_error("broadcast_in_dim", f"operand shape {x.shape} cannot be "
                                                  f"broadcast to {shape} along dims {bdims}")
    return ShapedArray(shape, x.dtype, x.weak_type)
abstract_eval_rules[broadcast_in_dim_p] = broadcast_in_dim_abstract_eval
jvp_rules[broadcast_in_dim_p] = _linear_jvp(broadcast_in_dim_p)
def broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    from fnad.primitives.reductions import reduce_sum   # x̄ = ct summed over new/stretched dims
    in_shape = x.aval.shape
    bdims = broadcast_dimensions
    summed = tuple(d for d in range(len(shape)) if d not in bdims)
    stretched = tuple(d for i, d in enumerate(bdims) if in_shape[i] == 1 and shape[d] != 1)
    axes = tuple(sorted(summed + stretched))
    out = reduce_sum(ct, axes=axes) if axes else ct
    return [reshape(out, in_shape) if stretched else out]
transpose_rules[broadcast_in_dim_p] = broadcast_in_dim_transpose


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (weakly typed if dtype is None)."""
    if dtype is None:
        aval = get_aval(fill_value)
        dtype, weak = aval.dtype, aval.weak_type
    else:
        dtype, weak = dtypes.canonicalize_dtype(dtype), False
    if core.is_concrete(fill_value) and not isinstance(fill_value, core.Array):
        scalar = np.array(fill_value, dtype=dtype)
        if weak:
            from fnad.primitives._util import scalar_like
            scalar = scalar_like(fill_value, dtype)
    else:
        from fnad.primitives.logic import convert_element_type
        scalar = convert_element_type(fill_value, dtype, weak)
    return broadcast_in_dim(scalar, shape, ())


# ---- reshape ---------------------------------------------------------------------------
reshape_p = Primitive("reshape")
def reshape(x, new_sizes, dimensions=None):
    """`x` with shape `new_sizes` (row-major); `dimensions` permutes x first (as lax)."""
    if dimensions is not None:
        from fnad.primitives.shape_ops import transpose
        x = transpose(x, dimensions)
    return reshape_p.bind(x, new_sizes=tuple(int(d) for d in new_sizes))

def reshape_abstract_eval(x, *, new_sizes):
    if any(d < 0 for d in new_sizes) or int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise shape_error("reshape", f"cannot reshape array of shape {x.shape} (size {x.size}) "
                                     f"into shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)
abstract_eval_rules[reshape_p] = reshape_abstract_eval
jvp_rules[reshape_p] = _linear_jvp(reshape_p)
transpose_rules[reshape_p] = lambda ct, x, *, new_sizes: [reshape(ct, x.aval.shape)]

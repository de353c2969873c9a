"""Sorting primitives: sort (several operands ordered by their first `num_keys`) and top_k.

sort follows jax.lax.sort: every operand has the same shape and is permuted along
`dimension` by the lexicographic order of the first `num_keys` operands; NaNs sort to
the end and -0.0 equals 0.0; with `is_stable` equal keys keep their order. top_k follows
jax.lax.top_k: the k largest entries along `axis` (IEEE total order, so +NaN is above
+inf, a NaN with its sign bit set below -inf, and +0.0 above -0.0), the lower index first
among equal entries, with their int32 indices.

Derivatives. sort is differentiated by sorting the tangents as extra operands behind the
same keys: both sorts are stable, so the keys move the tangents exactly as they moved the
primals, d sort(x) = sort_by_keys(dx). That second sort is linear in its non-key operands;
its transpose applies the inverse permutation, again by a sort (keyed by the permutation).
top_k's tangent is dx gathered at the returned indices (a batched take-along-axis gather,
as JAX): it cannot disagree with the indices, whose NaN and ±0 order no sort of the
values could reproduce without bit casts.
Each block: declaration, wrapper, shape rule, JVP rule, transpose rule.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives import indexing
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import axis_param_batch_rule
from fnad.primitives._util import ANY, COMPLEX, check_kind

__all__ = ["sort", "sort_key_val", "top_k"]


def _axis(name: str, operand, axis) -> int:
    shape = get_aval(operand).shape
    a = operator.index(axis)
    if not -len(shape) <= a < len(shape):
        raise shape_error(name, f"dimension {a} is out of bounds for an operand of rank "
                                f"{len(shape)} (shape {shape})")
    return a % len(shape)


# ---- sort ----------------------------------------------------------------------------------
sort_p = Primitive("sort", multiple_results=True)
def sort(operand, dimension: int = -1, is_stable: bool = True, num_keys: int = 1):
    """Sort `operand` along `dimension`; or, given a sequence of arrays of one shape, sort
    them all by the lexicographic order of the first `num_keys` (returns a tuple)."""
    single = not isinstance(operand, (tuple, list))
    operands = (operand,) if single else tuple(operand)
    if not operands:
        raise shape_error("sort", "needs at least one operand")
    num_keys = operator.index(num_keys)
    if not 1 <= num_keys <= len(operands):
        raise shape_error("sort", f"num_keys={num_keys} must be at least 1 and at most the "
                                  f"number of operands ({len(operands)})")
    outs = sort_p.bind(*operands, dimension=_axis("sort", operands[0], dimension),
                       is_stable=bool(is_stable), num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension: int = -1, is_stable: bool = True):
    """(keys sorted along `dimension`, `values` permuted the same way)."""
    return sort((keys, values), dimension, is_stable, num_keys=1)

def sort_abstract_eval(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise shape_error("sort", "needs at least one operand")
    if not 1 <= num_keys <= len(operands):
        raise shape_error("sort", f"num_keys={num_keys} must be at least 1 and at most the "
                                  f"number of operands ({len(operands)})")
    shapes = [x.shape for x in operands]
    if any(s != shapes[0] for s in shapes):
        raise shape_error("sort", f"all operands must have the same shape, got shapes "
                                  f"{', '.join(map(str, shapes))}")
    for x in operands:
        check_kind("sort", x, ANY)
    ndim = operands[0].ndim
    if not 0 <= dimension < ndim:
        raise shape_error("sort", f"dimension {dimension} is out of bounds for operands of "
                                  f"rank {ndim} (shape {shapes[0]})")
    return list(operands)
abstract_eval_rules[sort_p] = sort_abstract_eval
def sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):  # d sort(x) = sort_by_keys(dx)
    # Under differentiation the primal sort is stable too (a valid result of an unstable
    # sort), so that it and the tangent sort permute ties identically.
    outs = sort_p.bind(*primals, dimension=dimension, is_stable=True, num_keys=num_keys)
    moving = [i for i, t in enumerate(tangents) if nonzero(t)]
    out_dots: list = [None] * len(primals)
    if moving:
        dots = sort_p.bind(*primals[:num_keys], *[tangents[i] for i in moving],
                           dimension=dimension, is_stable=True, num_keys=num_keys)
        for i, d in zip(moving, dots[num_keys:]):
            out_dots[i] = d
    return outs, out_dots
jvp_rules[sort_p] = sort_jvp
def sort_transpose(cts, *operands, dimension, is_stable, num_keys):  # x̄ = P⁻¹ ct
    # P (out[j] = x[perm[j]]) is the keys' stable sort order; sorting ct by perm as the key
    # sends ct[j] back to position perm[j].
    if any(is_undefined(k) for k in operands[:num_keys]):
        raise ValueError("sort is linear only in its non-key operands: the keys decide the "
                         "permutation")
    back = [i for i, x in enumerate(operands) if is_undefined(x) and nonzero(cts[i])]
    out: list = [None] * len(operands)
    if not back:
        return out
    iota = so.broadcasted_iota(np.int32, operands[back[0]].aval.shape, dimension)
    perm = sort_p.bind(*operands[:num_keys], iota, dimension=dimension, is_stable=True,
                       num_keys=num_keys)[-1]
    moved = sort_p.bind(perm, *[cts[i] for i in back], dimension=dimension, is_stable=True,
                        num_keys=1)
    for i, m in zip(back, moved[1:]):
        out[i] = m
    return out
transpose_rules[sort_p] = sort_transpose
batch_rules[sort_p] = axis_param_batch_rule(sort_p, "dimension")


# ---- top_k ---------------------------------------------------------------------------------
top_k_p = Primitive("top_k", multiple_results=True)
def top_k(operand, k: int, *, axis: int = -1) -> list:
    """[values, indices]: the k largest entries along `axis` in descending order (the lower
    index first among equal ones) and their int32 indices along `axis`."""
    k = operator.index(k)
    if k < 0:
        raise shape_error("top_k", f"k must be non-negative, got {k}")
    if get_aval(operand).ndim == 0:
        raise shape_error("top_k", "the operand must have rank >= 1, got a scalar")
    return top_k_p.bind(operand, k=k, axis=_axis("top_k", operand, axis))

def top_k_abstract_eval(x, *, k, axis):
    check_kind("top_k", x, tuple(kind for kind in ANY if kind != COMPLEX),
               " (top_k does not order complex numbers)")
    if not 0 <= axis < x.ndim:
        raise shape_error("top_k", f"axis {axis} is out of bounds for an operand of rank "
                                   f"{x.ndim} (shape {x.shape})")
    if not 0 <= k <= x.shape[axis]:
        raise shape_error("top_k", f"k={k} must be non-negative and no larger than the size "
                                   f"{x.shape[axis]} of axis {axis} (operand shape {x.shape})")
    if x.shape[axis] > np.iinfo(np.int32).max + 1:
        raise shape_error("top_k", f"axis {axis} of size {x.shape[axis]} overflows the int32 "
                                   "indices")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.int32)]
abstract_eval_rules[top_k_p] = top_k_abstract_eval
def top_k_jvp(primals, tangents, *, k, axis):          # d values = dx at the returned indices
    (x,), (x_dot,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    ndim = get_aval(x).ndim
    batch = tuple(d for d in range(ndim) if d != axis)
    dnums = indexing.GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
        operand_batching_dims=batch, start_indices_batching_dims=batch)
    idx = so.expand_dims(indices, (ndim,))             # [..., k, ..., 1]: one index per entry
    values_dot = indexing.gather(x_dot, idx, dnums, (1,) * ndim, unique_indices=True,
                                 mode=indexing.GatherScatterMode.PROMISE_IN_BOUNDS)
    return [values, indices], [values_dot, None]
jvp_rules[top_k_p] = top_k_jvp
batch_rules[top_k_p] = axis_param_batch_rule(top_k_p, "axis")

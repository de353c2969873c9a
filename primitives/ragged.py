"""Grouped products: ragged_dot_general (under lax.ragged_dot and lax.ragged_dot_general).

One primitive in two canonical forms, each with one leading batch dim B, to which the public
functions reduce by transposes and reshapes (fnad/lax.py). `group_sizes` is an integer
operand [B, g]; group j owns the rows [ends[j-1], ends[j]) of the ragged dim, where ends is
its cumulative sum clipped to the dim's size (sizes are >= 0; rows past the last group
belong to none):

    mode "rows":         lhs [B, m, k], rhs [B, g, k, n] -> [B, m, n]: each row of lhs is
                         multiplied by its group's matrix, rows of no group give 0 (a grouped
                         matmul, as the experts of a mixture-of-experts layer);
    mode "contracting":  lhs [B, m, k], rhs [B, m, n] -> [B, g, k, n]: per group, the rows of
                         lhs it owns, transposed, times the same rows of rhs (the ragged dim
                         is contracted: the rhs gradient of "rows").

Both are bilinear in (lhs, rhs), so the JVP is a sum of two of them, and the transposes stay
within the two forms (ᵀ swaps the last two dims):

    rows(l, w):          l̄ = rows(ct, wᵀ)        w̄ = contracting(l, ct)
    contracting(a, b):   ā = rows(b, ctᵀ)         b̄ = rows(a, ct)

Under vmap the mapped axis joins B (an unmapped operand is broadcast along it). The dtype
rule is dot_general's, `preferred_element_type` included.
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives._util import ANY, INT, add_tangents, check_kind
from fnad.primitives.linalg import dot_general_result_dtype

__all__ = ["MODES", "ragged_dot_general_p"]

MODES = ("rows", "contracting")
ragged_dot_general_p = Primitive("ragged_dot_general")


def group_ranges(group_sizes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) [B, g] of each group's rows in a ragged dim of `size` (for the impls)."""
    ends = np.clip(np.cumsum(np.asarray(group_sizes, np.int64), axis=-1), 0, size)
    starts = np.concatenate([np.zeros_like(ends[..., :1]), ends[..., :-1]], axis=-1)
    return starts, np.maximum(ends, starts)


def ragged_abstract_eval(lhs, rhs, group_sizes, *, mode, precision, preferred_element_type):
    name = "ragged_dot_general"
    check_kind(name, lhs, ANY, " (lhs)")
    check_kind(name, rhs, ANY, " (rhs)")
    check_kind(name, group_sizes, INT, " (group_sizes)")
    if mode not in MODES:
        raise ValueError(f"{name}: mode must be one of {MODES}, got {mode!r}")
    rows = mode == "rows"
    want_rhs = 4 if rows else 3
    if lhs.ndim != 3 or rhs.ndim != want_rhs or group_sizes.ndim != 2:
        raise shape_error(name, f"mode {mode!r} takes lhs [B, m, k], rhs "
                                f"{'[B, g, k, n]' if rows else '[B, m, n]'} and group_sizes "
                                f"[B, g], got shapes {lhs.shape}, {rhs.shape} and "
                                f"{group_sizes.shape}")
    b, m, k = lhs.shape
    g = group_sizes.shape[1]
    if rows:
        ok = rhs.shape[0] == b and rhs.shape[1] == g and rhs.shape[2] == k
        shape = (b, m, rhs.shape[3])
    else:
        ok = rhs.shape[:2] == (b, m)
        shape = (b, g, k, rhs.shape[2])
    if not ok or group_sizes.shape[0] != b:
        raise shape_error(name, f"mode {mode!r}: the shapes do not fit together: lhs "
                                f"{lhs.shape}, rhs {rhs.shape}, group_sizes "
                                f"{group_sizes.shape}")
    dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    weak = preferred_element_type is None and lhs.weak_type and rhs.weak_type
    return ShapedArray(shape, dtype, weak)


def _swap_last(x):
    from fnad.primitives.shape_ops import transpose
    nd = get_aval(x).ndim
    return transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def ragged_jvp(primals, tangents, **params):
    (lhs, rhs, sizes), (lhs_dot, rhs_dot, _) = primals, tangents
    out = ragged_dot_general_p.bind(lhs, rhs, sizes, **params)
    if not dtypes.is_inexact(get_aval(out).dtype):
        return out, None
    return out, add_tangents(
        ragged_dot_general_p.bind(lhs_dot, rhs, sizes, **params) if nonzero(lhs_dot) else None,
        ragged_dot_general_p.bind(lhs, rhs_dot, sizes, **params) if nonzero(rhs_dot) else None)


def _as_aval(x, aval):
    """x converted to aval's dtype (the real part first where x is complex and aval not)."""
    if get_aval(x).dtype == aval.dtype:
        return x
    from fnad.primitives.logic import convert_element_type
    if dtypes.is_complex(get_aval(x).dtype) and not dtypes.is_complex(aval.dtype):
        from fnad.primitives.elementwise import real
        x = real(x)
    return convert_element_type(x, aval.dtype, aval.weak_type)


def ragged_transpose(ct, lhs, rhs, sizes, *, mode, **params):
    if is_undefined(sizes):
        raise TypeError("ragged_dot_general: group_sizes is an integer operand; it has no "
                        "transpose")

    def bind(a, b, m):
        return ragged_dot_general_p.bind(a, b, sizes, mode=m, **params)
    lhs_bar = rhs_bar = None
    if mode == "rows":
        if is_undefined(lhs):
            lhs_bar = bind(ct, _swap_last(rhs), "rows")
        if is_undefined(rhs):
            rhs_bar = bind(lhs, ct, "contracting")
    else:
        if is_undefined(lhs):
            lhs_bar = bind(rhs, _swap_last(ct), "rows")
        if is_undefined(rhs):
            rhs_bar = bind(lhs, ct, "rows")
    if lhs_bar is not None:
        lhs_bar = _as_aval(lhs_bar, lhs.aval)
    if rhs_bar is not None:
        rhs_bar = _as_aval(rhs_bar, rhs.aval)
    return [lhs_bar, rhs_bar, None]


def ragged_batch(vals, dims, **params):
    """The mapped axis (size V) joins the batch dim B: [V, B, ...] -> [V·B, ...] and back."""
    from fnad.primitives._batching import bdim_at_front
    from fnad.primitives.shape_ops import reshape
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    merged = []
    for v, d in zip(vals, dims):
        v = bdim_at_front(v, d, size)
        shape = get_aval(v).shape
        merged.append(reshape(v, (size * shape[1],) + shape[2:]))
    out = ragged_dot_general_p.bind(*merged, **params)
    shape = get_aval(out).shape
    return reshape(out, (size, shape[0] // size) + shape[1:]), 0


abstract_eval_rules[ragged_dot_general_p] = ragged_abstract_eval
jvp_rules[ragged_dot_general_p] = ragged_jvp
transpose_rules[ragged_dot_general_p] = ragged_transpose
batch_rules[ragged_dot_general_p] = ragged_batch

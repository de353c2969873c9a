"""Helpers for batching rules (used by each primitive's block) and vmap's loop fallback.

Below the transformations in the import order: only fnad.core and the shape primitives
(imported where used, as they also register rules here).
"""
from __future__ import annotations

import warnings

import numpy as np

from fnad.core import Tracer, get_aval


def moveaxis(x, src: int, dst: int):
    """x with axis `src` moved to position `dst` (a transpose, or x itself)."""
    from fnad.primitives.shape_ops import transpose
    nd = np.ndim(x) if not isinstance(x, Tracer) else x.ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def bdim_at_front(x, bdim, size: int):
    """x with its batch axis first; an unbatched x is broadcast along a new first axis."""
    from fnad.primitives.shape_ops import broadcast_in_dim
    if bdim is None:
        shape = get_aval(x).shape
        return broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))
    return moveaxis(x, bdim, 0)


def loop_batch(prim, vals, dims, size: int, params):
    """The fallback for a primitive without a batching rule: one call per member."""
    from fnad.primitives.shape_ops import index_in_dim, broadcast_in_dim, concatenate
    warnings.warn(f"vmap: primitive '{prim.name}' has no batching rule; running it once per "
                  f"batch member ({size} calls) and stacking the results", stacklevel=4)
    results = []
    for i in range(size):
        args = [v if d is None else index_in_dim(v, i, d, keepdims=False)
                for v, d in zip(vals, dims)]
        out = prim.bind(*args, **params)
        results.append(out if prim.multiple_results else [out])

    def stack(parts):
        shapes = get_aval(parts[0]).shape
        expanded = [broadcast_in_dim(p, (1,) + shapes, tuple(range(1, len(shapes) + 1)))
                    for p in parts]
        return concatenate(expanded, 0)
    outs = [stack([r[k] for r in results]) for k in range(len(results[0]))]
    if prim.multiple_results:
        return outs, [0] * len(outs)
    return outs[0], 0


def broadcasting_batch_rule(prim):
    """Rule for elementwise primitives whose operands have equal shapes or are scalars."""
    def rule(vals, dims, **params):
        from fnad.primitives.shape_ops import broadcast_in_dim
        size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        ranks = [get_aval(v).ndim - (d is not None) for v, d in zip(vals, dims)]
        shape = ()                                     # the common unbatched shape
        for v, d, r in zip(vals, dims, ranks):
            if r:
                s = get_aval(v).shape
                shape = s[:d] + s[d + 1:] if d is not None else s
                break
        if all(d == dims[0] for d in dims) and all(r == len(shape) for r in ranks):
            return prim.bind(*vals, **params), dims[0]  # nothing to align
        out_shape = (size,) + shape
        args = []
        for v, d, r in zip(vals, dims, ranks):
            if d is None:
                args.append(v if r == 0 else broadcast_in_dim(
                    v, out_shape, tuple(range(1, len(shape) + 1))))
            else:
                v = moveaxis(v, d, 0)
                args.append(v if r == len(shape) else broadcast_in_dim(v, out_shape, (0,)))
        return prim.bind(*args, **params), 0
    return rule


def vectorized_batch_rule(prim):
    """Rule for unary elementwise primitives: the batch axis just passes through."""
    def rule(vals, dims, **params):
        return prim.bind(*vals, **params), dims[0]
    return rule




def axis_param_batch_rule(prim, param: str):
    """Rule for primitives with a static axis parameter (an int or a tuple of ints):
    every operand gets its batch axis first, and the axes shift by one."""
    def shift(ax):
        return ax + 1 if ax >= 0 else ax               # negative axes count from the end

    def rule(vals, dims, **params):
        size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        args = [bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
        ax = params[param]
        params = dict(params, **{param: tuple(map(shift, ax)) if isinstance(ax, tuple)
                                 else shift(ax)})
        out = prim.bind(*args, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    return rule

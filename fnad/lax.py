"""fnad.lax: the primitive-level API, with jax.lax's names and signatures.

Thin re-exports of the wrappers each primitive family defines (its `__all__`),
plus the few lax functions composed of several primitives, and control flow
(cond, switch, scan, map, associative_scan, while_loop, fori_loop:
primitives/control_flow.py).
"""
from __future__ import annotations

import math

from fnad import core
from fnad import dtypes as _dtypes
from fnad import tree_util
from fnad.core import get_aval as _get_aval
from fnad.primitives import decompositions as linalg  # noqa: F401  (as jax.lax.linalg)
from fnad.primitives import logic as _logic
from fnad.primitives.control_flow import *  # noqa: F401,F403
from fnad.primitives.convolution import *  # noqa: F401,F403
from fnad.primitives.cumulative import *  # noqa: F401,F403
from fnad.primitives.elementwise import *  # noqa: F401,F403
from fnad.primitives.indexing import *  # noqa: F401,F403
from fnad.primitives.linalg import *  # noqa: F401,F403
from fnad.primitives.logic import *  # noqa: F401,F403
from fnad.primitives.reductions import *  # noqa: F401,F403
from fnad.primitives.shape_ops import *  # noqa: F401,F403
from fnad.primitives.sorting import *  # noqa: F401,F403
from fnad.primitives.windowed import *  # noqa: F401,F403


def stop_gradient(x):
    """The identity whose derivative is zero, applied to every inexact leaf of `x`."""
    def stop(leaf):
        if _dtypes.is_inexact(_get_aval(leaf).dtype):
            return _logic.stop_gradient(leaf)
        return leaf
    return tree_util.tree_map(stop, x)


def select(pred, on_true, on_false):
    """on_true where pred else on_false (lax.select)."""
    return _logic.select_n(pred, on_false, on_true)


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """Reduce `operands` (an array or a pytree of equal-shape arrays) over `dimensions`
    with `computation` (lax.reduce): a function of two pytrees of arrays like
    (operands, operands) giving one, associative, as XLA requires.

    One operand with add, mul, max, min or the bitwise and/or/xor, and that operation's
    identity as `init_values`, is the matching reduce_* primitive. Anything else is a
    pairwise tree over the reduced elements (left to right, so ties resolve as a
    sequential fold would), combined with `init_values` once, as XLA computes it.
    """
    import operator

    import numpy as np

    from fnad.primitives import elementwise as ew
    from fnad.primitives import reductions as red
    from fnad.primitives import shape_ops as so
    from fnad.primitives.windowed import init_like, max_identity, min_identity

    if out_sharding is not None:
        raise NotImplementedError("lax.reduce: out_sharding is not supported (fnad has no "
                                  "sharding)")
    flat, tree = tree_util.tree_flatten(operands)
    flat_init, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"lax.reduce: operands and init_values must have the same structure, "
                         f"got {tree} and {init_tree}")
    if not flat:
        raise ValueError("lax.reduce: no operands")
    shape = _get_aval(flat[0]).shape
    if any(_get_aval(x).shape != shape for x in flat):
        raise ValueError(f"lax.reduce: the operands must have equal shapes, got "
                         f"{[_get_aval(x).shape for x in flat]}")
    dims = tuple(operator.index(d) for d in dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise ValueError(f"lax.reduce: dimensions {dims} must be distinct and in range for "
                         f"operands of rank {len(shape)}")
    monoids = {ew.add: (red.reduce_sum, lambda dt: np.zeros((), dt)),
               ew.mul: (red.reduce_prod, lambda dt: np.ones((), dt)),
               ew.max: (red.reduce_max, max_identity), ew.min: (red.reduce_min, min_identity),
               _logic.bitwise_and: (red.reduce_and, lambda dt: ~np.zeros((), dt)),
               _logic.bitwise_or: (red.reduce_or, lambda dt: np.zeros((), dt)),
               _logic.bitwise_xor: (red.reduce_xor, lambda dt: np.zeros((), dt))}
    monoids[operator.add], monoids[operator.mul] = monoids[ew.add], monoids[ew.mul]
    try:
        monoid = monoids.get(computation) if len(flat) == 1 else None
    except TypeError:                                   # unhashable: not one of those
        monoid = None
    for i in flat_init:
        if _get_aval(i).shape != ():
            raise ValueError(f"lax.reduce: init values must be scalars, got shape "
                             f"{_get_aval(i).shape}")
    inits = [init_like("lax.reduce", i, _get_aval(x).dtype) for i, x in zip(flat_init, flat)]
    if monoid is not None:
        reducer, identity = monoid
        init, dt = inits[0], _get_aval(flat[0]).dtype
        if not isinstance(init, core.Tracer) and \
                np.array_equal(np.asarray(init, dt), identity(dt)):
            return tree_util.tree_unflatten(tree, [reducer(flat[0], dims)])

    def combine(a: list, b: list) -> list:
        out = computation(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_flat, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"lax.reduce: computation must return the structure of the "
                            f"operands {tree}, got {out_tree}")
        return out_flat

    kept = [d for d in range(len(shape)) if d not in dims]
    rest = tuple(shape[d] for d in kept)
    n = math.prod(shape[d] for d in dims)
    xs = [so.reshape(so.transpose(x, dims + tuple(kept)), (n,) + rest) for x in flat]
    inits = [so.broadcast_in_dim(i, rest, ()) for i in inits]
    if n == 0:
        return tree_util.tree_unflatten(tree, inits)
    while n > 1:                                        # pairs (0, 1), (2, 3), ... and a last
        half = n // 2
        pairs = combine([so.slice_in_dim(x, 0, 2 * half, 2, 0) for x in xs],
                        [so.slice_in_dim(x, 1, 2 * half, 2, 0) for x in xs])
        if n % 2:
            pairs = [so.concatenate([p, so.slice_in_dim(x, n - 1, n, 1, 0)], 0)
                     for p, x in zip(pairs, xs)]
        xs, n = pairs, half + n % 2
    return tree_util.tree_unflatten(tree, combine(inits, [so.reshape(x, rest) for x in xs]))


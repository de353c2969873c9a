"""fnad.lax: the primitive-level API, with jax.lax's names and signatures.

Thin re-exports of the wrappers each primitive family defines (its `__all__`),
plus the few lax functions composed of several primitives, and control flow
(cond, switch, scan, map, associative_scan, while_loop, fori_loop:
primitives/control_flow.py).
"""
from __future__ import annotations

import math as _math
import operator as _operator

import numpy as _np

from fnad import core as _core
from fnad import dtypes as _dtypes
from fnad import tree_util
from fnad.core import get_aval as _get_aval
from fnad.primitives import decompositions as linalg  # noqa: F401  (as jax.lax.linalg)
from fnad.primitives import elementwise as _ew
from fnad.primitives import logic as _logic
from fnad.primitives import reductions as _red
from fnad.primitives import shape_ops as _so
from fnad.primitives.collectives import *  # noqa: F401,F403
from fnad.primitives.control_flow import *  # noqa: F401,F403
from fnad.primitives.convolution import *  # noqa: F401,F403
from fnad.primitives.cumulative import *  # noqa: F401,F403
from fnad.primitives.elementwise import *  # noqa: F401,F403
from fnad.primitives.fft import *  # noqa: F401,F403
from fnad.primitives.indexing import *  # noqa: F401,F403
from fnad.primitives.linalg import *  # noqa: F401,F403
from fnad.primitives.logic import *  # noqa: F401,F403
from fnad.primitives.reductions import *  # noqa: F401,F403
from fnad.primitives.shape_ops import *  # noqa: F401,F403
from fnad.primitives.solves import *  # noqa: F401,F403
from fnad.primitives.sorting import *  # noqa: F401,F403
from fnad.primitives.windowed import *  # noqa: F401,F403
from fnad.primitives.windowed import init_like as _init_like
from fnad.primitives.windowed import max_identity as _max_identity
from fnad.primitives.windowed import min_identity as _min_identity


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


# lax.reduce's monoids: computation -> (its reduce_* primitive, its identity of a dtype)
_MONOIDS = {_ew.add: (_red.reduce_sum, lambda dt: _np.zeros((), dt)),
            _ew.mul: (_red.reduce_prod, lambda dt: _np.ones((), dt)),
            _ew.max: (_red.reduce_max, _max_identity), _ew.min: (_red.reduce_min, _min_identity),
            _logic.bitwise_and: (_red.reduce_and, lambda dt: ~_np.zeros((), dt)),
            _logic.bitwise_or: (_red.reduce_or, lambda dt: _np.zeros((), dt)),
            _logic.bitwise_xor: (_red.reduce_xor, lambda dt: _np.zeros((), dt))}
_MONOIDS[_operator.add], _MONOIDS[_operator.mul] = _MONOIDS[_ew.add], _MONOIDS[_ew.mul]


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """Reduce `operands` (an array or a pytree of equal-shape arrays) over `dimensions`
    with `computation` (lax.reduce): a function of two pytrees of arrays like
    (operands, operands) giving one, associative, as XLA requires.

    One operand with add, mul, max, min or the bitwise and/or/xor, and that operation's
    identity as `init_values`, is the matching reduce_* primitive. Anything else is a
    pairwise tree over the reduced elements (left to right, so ties resolve as a
    sequential fold would), combined with `init_values` once, as XLA computes it.
    """
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
    dims = tuple(_operator.index(d) for d in dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise ValueError(f"lax.reduce: dimensions {dims} must be distinct and in range for "
                         f"operands of rank {len(shape)}")
    try:
        monoid = _MONOIDS.get(computation) if len(flat) == 1 else None
    except TypeError:                                   # unhashable: not one of those
        monoid = None
    for i in flat_init:
        if _get_aval(i).shape != ():
            raise ValueError(f"lax.reduce: init values must be scalars, got shape "
                             f"{_get_aval(i).shape}")
    inits = [_init_like("lax.reduce", i, _get_aval(x).dtype) for i, x in zip(flat_init, flat)]
    if monoid is not None:
        reducer, identity = monoid
        init, dt = inits[0], _get_aval(flat[0]).dtype
        if not isinstance(init, _core.Tracer) and \
                _np.array_equal(_np.asarray(init, dt), identity(dt)):
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
    n = _math.prod(shape[d] for d in dims)
    xs = [_so.reshape(_so.transpose(x, dims + tuple(kept)), (n,) + rest) for x in flat]
    inits = [_so.broadcast_in_dim(i, rest, ()) for i in inits]
    if n == 0:
        return tree_util.tree_unflatten(tree, inits)
    while n > 1:                                        # pairs (0, 1), (2, 3), ... and a last
        half = n // 2
        pairs = combine([_so.slice_in_dim(x, 0, 2 * half, 2, 0) for x in xs],
                        [_so.slice_in_dim(x, 1, 2 * half, 2, 0) for x in xs])
        if n % 2:
            pairs = [_so.concatenate([p, _so.slice_in_dim(x, n - 1, n, 1, 0)], 0)
                     for p, x in zip(pairs, xs)]
        xs, n = pairs, half + n % 2
    return tree_util.tree_unflatten(tree, combine(inits, [_so.reshape(x, rest) for x in xs]))


"""The `pad` modes that compute new values, as jax.numpy's: 'maximum', 'minimum', 'mean',
'median' (stat_length), 'linear_ramp' (end_values), reflect_type='odd' of 'reflect' and
'symmetric', and a callable mode. `_shape.pad` checks the arguments and calls these.

Each pads one axis after another, the later axes seeing the earlier padding, as NumPy.
Imports the other fnad.numpy modules inside the functions (_creation imports _shape).
"""
from __future__ import annotations

import numpy as np

from fnad import dtypes
from fnad.primitives import logic as lg
from fnad.primitives import shape_ops as so


def pairs_of(value, ndim: int, name: str) -> list[tuple]:
    """`value` (a scalar, a pair, or one pair per axis) as ndim (before, after) pairs."""
    v = np.asarray(value, dtype=object if isinstance(value, (list, tuple)) else None)
    if v.ndim == 0 or v.shape in ((1,), (2,), (1, 2), (ndim, 2)):
        return [tuple(p) for p in np.broadcast_to(v, (ndim, 2))]
    raise ValueError(f"pad: {name} with nd={ndim} has unsupported shape {v.shape}. Valid "
                     f"shapes are {(ndim, 2)}, (1, 2), (2,), (1,), or ().")


def _as_array_dtype(x, a):
    """x converted to a's dtype and weak type (integer stats rounded half to even first)."""
    from fnad.numpy._ufuncs import round as round_
    if dtypes.issubdtype(a.dtype, np.integer) and not dtypes.issubdtype(x.dtype, np.integer):
        x = round_(x)
    return lg.convert_element_type(x, a.dtype, a.aval.weak_type)


def pad_stats(a, pairs, mode: str, stat_length):
    """Each side filled with the max/min/mean/median of the stat_length entries next to it
    (the whole axis when stat_length is None)."""
    from fnad.numpy import _reductions, _sorting
    from fnad.numpy._shape import repeat
    stat = {"maximum": _reductions.max, "minimum": _reductions.min, "mean": _reductions.mean,
            "median": _sorting.median}[mode]
    lengths = None if stat_length is None else pairs_of(stat_length, a.ndim, "stat_length")
    for axis, (before, after) in enumerate(pairs):
        n = a.shape[axis]
        if lengths is None:
            s_before = s_after = stat(a, axis=axis, keepdims=True)
        else:
            lb, la = (int(v) for v in lengths[axis])
            if lb <= 0 or la <= 0:
                raise ValueError(f"pad: stat_length must be positive (a length of 0 yields no "
                                 f"value for padding), got {lengths[axis]} for axis {axis}")
            lb, la = min(lb, n), min(la, n)
            s_before = stat(so.slice_in_dim(a, 0, lb, 1, axis), axis=axis, keepdims=True)
            s_after = stat(so.slice_in_dim(a, n - la, n, 1, axis), axis=axis, keepdims=True)
        s_before, s_after = _as_array_dtype(s_before, a), _as_array_dtype(s_after, a)
        a = so.concatenate([repeat(s_before, before, axis=axis), a,
                            repeat(s_after, after, axis=axis)], axis)
    return a


def pad_linear_ramp(a, pairs, end_values):
    """Each side a ramp from its end value to the edge entry (the edge not repeated)."""
    from fnad.numpy._creation import linspace
    from fnad.numpy._shape import flip
    ends = pairs_of(end_values, a.ndim, "end_values")
    for axis, (before, after) in enumerate(pairs):
        n = a.shape[axis]
        edges = (so.slice_in_dim(a, 0, 1, 1, axis), so.slice_in_dim(a, n - 1, n, 1, axis))
        ramps = []
        for count, end, edge in zip((before, after), ends[axis], edges, strict=True):
            ramp = linspace(end, so.squeeze(edge, (axis,)), count, endpoint=False,
                            dtype=a.dtype, axis=axis)
            ramps.append(lg.convert_element_type(ramp, a.dtype, a.aval.weak_type))
        a = so.concatenate([ramps[0], a, flip(ramps[1], axis)], axis)
    return a


def pad_reflect_odd(a, pairs, mode: str):
    """'reflect'/'symmetric' with reflect_type='odd': each mirrored entry x becomes
    2·edge - x, chunk by chunk when the padding is longer than the axis."""
    for axis, (before, after) in enumerate(pairs):
        n = a.shape[axis]
        offset = 1 if (mode == "reflect" and n > 1) else 0
        for at_start, padding in ((True, before), (False, after)):
            m = a.shape[axis]
            edge = (so.slice_in_dim(a, 0, 1, 1, axis) if at_start
                    else so.slice_in_dim(a, m - 1, m, 1, axis))
            while padding > 0:
                m = a.shape[axis]
                step = min(padding, n - offset)
                padding -= step
                if at_start:
                    x = so.slice_in_dim(a, offset, offset + step, 1, axis)
                else:
                    stop = m if (mode == "symmetric" or n == 1) else m - 1
                    x = so.slice_in_dim(a, stop - step, stop, 1, axis)
                x = _odd(so.rev(x, (axis,)), edge)
                if n > 1:
                    edge = (so.slice_in_dim(x, 0, 1, 1, axis) if at_start
                            else so.slice_in_dim(x, step - 1, step, 1, axis))
                a = so.concatenate([x, a] if at_start else [a, x], axis)
    return a


def _odd(x, edge):
    from fnad.numpy._ufuncs import multiply, subtract
    return subtract(multiply(2, edge), x)


def pad_callable(a, pairs, func, kwargs):
    """NumPy's callable mode: zero padding, then func(vector, (before, after), axis, kwargs)
    on every 1-D slice along each axis in turn (func returns the padded vector)."""
    from fnad.numpy._functional import apply_along_axis
    a = so.pad(a, np.zeros((), a.dtype), [(b, e, 0) for b, e in pairs])
    for axis in range(a.ndim):
        a = apply_along_axis(func, axis, a, pairs[axis], axis, kwargs)
    return a

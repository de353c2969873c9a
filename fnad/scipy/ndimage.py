"""fnad.scipy.ndimage: map_coordinates, as jax.scipy.ndimage.

The value of `input` at fractional `coordinates` (one array per input axis, all of one
shape) by nearest (order 0: round half away from zero) or multilinear (order 1)
interpolation: the sum over the 2^d corner pixels of their values times the product of
the per-axis weights. Out-of-range indices follow `mode`: "constant" (cval; JAX's and
SciPy's "grid-constant": only the corner pixels outside take cval), "nearest" (clamped),
"wrap" (periodic; SciPy's "grid-wrap"), "mirror" (… 2 1 | 0 1 2 … n-1 | n-2 …) or
"reflect" (… 1 0 | 0 1 … n-1 | n-1 …). Differentiable in the input and the coordinates
(order 1). Integer inputs give rounded integers.
"""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

import fnad.numpy as jnp
from fnad import lax

__all__ = ["map_coordinates"]


def _mirror(index, size: int):
    period = size - 1                               # a triangle wave of period 2(size - 1)
    if period == 0:
        return jnp.zeros_like(index)
    return jnp.abs((index + period) % (2 * period) - period)


def _reflect(index, size: int):
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_FIX = {"constant": lambda i, n: i, "nearest": lambda i, n: jnp.clip(i, 0, n - 1),
        "wrap": lambda i, n: i % n, "mirror": _mirror, "reflect": _reflect}


def _round_half_away(x):
    return x if jnp.issubdtype(x.dtype, jnp.integer) else lax.round(x)


def map_coordinates(input, coordinates, order: int, mode: str = "constant",  # noqa: A002
                    cval=0.0):
    """`input` interpolated at `coordinates` (see the module docstring)."""
    x = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {x.ndim}")
    if mode not in _FIX:
        raise NotImplementedError(f"map_coordinates does not support mode {mode!r}; the "
                                  f"modes are {sorted(_FIX)}")
    order = operator.index(order)
    if order not in (0, 1):
        raise NotImplementedError("map_coordinates supports order 0 and 1 only")
    cval = jnp.asarray(cval, x.dtype)
    fix = _FIX[mode]
    per_axis = []                               # per axis: [(index, valid, weight), ...]
    for c, n in zip(coords, x.shape):
        if order == 0:
            nodes = [(_round_half_away(c).astype(np.int32), None)]
        else:
            lo = jnp.floor(c)
            frac = c - lo
            i = lo.astype(np.int32)
            nodes = [(i, 1 - frac), (i + 1, frac)]
        per_axis.append([(fix(i, n), (i >= 0) & (i < n) if mode == "constant" else None, w)
                         for i, w in nodes])
    total = None
    for corner in itertools.product(*per_axis):
        idx = tuple(i for i, _, _ in corner)
        valid = [v for _, v, _ in corner if v is not None]
        value = x[idx]
        if valid:
            value = jnp.where(functools.reduce(operator.and_, valid), value, cval)
        weights = [w for _, _, w in corner if w is not None]
        term = value if not weights else functools.reduce(operator.mul, weights) * value
        total = term if total is None else total + term
    if jnp.issubdtype(x.dtype, jnp.integer):
        total = _round_half_away(total)
    return total.astype(x.dtype)

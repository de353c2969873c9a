"""fnad.scipy.interpolate: RegularGridInterpolator, as jax.scipy.interpolate.

Interpolation of values on a rectilinear grid (one strictly increasing 1-D coordinate
array per leading axis of `values`) at points xi [..., D], composed from fnad.numpy
(searchsorted, gathers, where), so grad (to values and to xi), vmap and jit apply. Per
axis d, a point x lies in the cell i = clip(searchsorted(g, x) - 1, 0, n - 2) at the
fraction t = (x - g[i]) / (g[i+1] - g[i]) (outside the grid t < 0 or t > 1, which
extrapolates the end cell):

    linear   Σ over the 2^D cell corners c of values[c] · Π_d (t_d if c_d = i_d + 1
             else 1 - t_d)
    nearest  values[i_d + (t_d > 1/2)]

Points outside the grid get `fill_value` (NaN by default; None extrapolates).

The interpolator is a pytree (grid, values and fill_value are its leaves), so it can be
passed through jit and vmap. As jax: bounds_error=True is a NotImplementedError (it would
need a data-dependent error), and a decreasing grid axis is not detected (it gives wrong
values; SciPy accepts one). Unlike jax, a grid axis whose length does not match `values`,
or that has fewer than two points, is a ValueError.
"""
from __future__ import annotations

import itertools

import numpy as np

import fnad.numpy as jnp
from fnad.numpy._core import promote_dtypes_inexact
from fnad.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _check_method(method) -> None:
    if method not in _METHODS:
        raise ValueError(f"RegularGridInterpolator: method {method!r} is not defined; "
                         f"expected one of {list(_METHODS)}")


class RegularGridInterpolator:
    """Interpolate `values` [n_1, ..., n_D, ...] given on the grid `points` (D strictly
    increasing 1-D arrays of lengths n_1 ... n_D) at points xi (scipy.interpolate.
    RegularGridInterpolator with bounds_error=False). Calling it with xi [..., D] (or a
    tuple of D broadcastable coordinate arrays) gives [..., *values.shape[D:]]."""

    def __init__(self, points, values, method: str = "linear", bounds_error: bool = False,
                 fill_value=np.nan):
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not "
                                      "supported (it cannot act under jit); points outside "
                                      "the grid get fill_value")
        (values,) = promote_dtypes_inexact(jnp.asarray(values))
        if len(points) > values.ndim:
            raise ValueError(f"RegularGridInterpolator: there are {len(points)} point "
                             f"arrays, but values has {values.ndim} dimensions")
        grid = tuple(jnp.asarray(p) for p in points)
        for d, g in enumerate(grid):
            if g.ndim != 1 or g.shape[0] != values.shape[d]:
                raise ValueError(f"RegularGridInterpolator: points[{d}] must be 1-D of length "
                                 f"values.shape[{d}] = {values.shape[d]}, got shape "
                                 f"{g.shape}")
            if g.shape[0] < 2:
                raise ValueError(f"RegularGridInterpolator: points[{d}] has {g.shape[0]} "
                                 "point; at least 2 are needed")
        if fill_value is not None:
            fill_value = jnp.asarray(fill_value)
            if not jnp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError(f"RegularGridInterpolator: fill_value must be None or of a "
                                 f"type compatible with values ({values.dtype}), got "
                                 f"{fill_value.dtype}")
        self.method, self.bounds_error = method, bounds_error
        self.grid, self.values, self.fill_value = grid, values, fill_value

    def __call__(self, xi, method: str | None = None):
        method = self.method if method is None else method
        _check_method(method)
        D = len(self.grid)
        xi = _points(xi, D)
        if xi.shape[-1] != D:
            raise ValueError(f"RegularGridInterpolator: the sample points xi have dimension "
                             f"{xi.shape[-1]}, but the grid has dimension {D}")
        lead = xi.shape[:-1]
        xi = jnp.reshape(xi, (-1, D))                                    # [M, D]
        cells, fracs, outside = [], [], jnp.zeros(xi.shape[:1], bool)
        for d, g in enumerate(self.grid):
            x = xi[:, d]                                                 # [M]
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            lo, hi = g[i], g[i + 1]
            cells.append(i)
            fracs.append((x - lo) / (hi - lo))
            outside = outside | (x < g[0]) | (x > g[-1])
        trailing = (1,) * (self.values.ndim - D)                         # values' extra dims
        if method == "linear":
            out = 0
            for corner in itertools.product((0, 1), repeat=D):
                weight = 1
                for c, t in zip(corner, fracs):
                    weight = weight * (t if c else 1 - t)                # [M]
                at = tuple(i + c for i, c in zip(cells, corner))
                out = out + self.values[at] * jnp.reshape(weight, weight.shape + trailing)
        else:
            at = tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(cells, fracs))
            out = self.values[at]                                        # [M, ...]
        if self.fill_value is not None:
            fill = self.fill_value.astype(out.dtype)
            out = jnp.where(jnp.reshape(outside, outside.shape + trailing), fill, out)
        return jnp.reshape(out, lead + self.values.shape[D:])


def _points(xi, D: int):
    """xi as an array [..., D]: a tuple of coordinate arrays is broadcast and stacked; a
    1-D array is read as points of D coordinates."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = promote_dtypes_inexact(*jnp.broadcast_arrays(*xi))
        return jnp.stack(parts, axis=-1)
    (xi,) = promote_dtypes_inexact(jnp.asarray(xi))
    return jnp.reshape(xi, (-1, D)) if xi.ndim == 1 else xi


def _flatten(r: RegularGridInterpolator):
    return (r.grid, r.values, r.fill_value), (r.method, r.bounds_error)


def _unflatten(aux, children) -> RegularGridInterpolator:
    # Bypasses __init__: transformations rebuild the node from tracers, or from
    # placeholders such as in_axes specs, which its checks would reject.
    r = object.__new__(RegularGridInterpolator)
    r.method, r.bounds_error = aux
    r.grid, r.values, r.fill_value = children
    return r


register_pytree_node(RegularGridInterpolator, _flatten, _unflatten)

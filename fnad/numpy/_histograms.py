"""fnad.numpy's counting and binning: bincount, digitize, histogram_bin_edges, histogram,
histogram2d, histogramdd.

Counts are scatter-adds into a zero array (`.at[bin].add(weight)`), so they are
differentiable in the weights; bins are found with searchsorted. The number of bins is
static: bincount of a traced `x` needs a static `length=`, as in JAX.
Functions of fnad.numpy are looked up at call time.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import core, dtypes
import fnad.numpy as jnp
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    asarray,
    check_arraylike,
    ensure_array,
    promote_dtypes_inexact,
)
from fnad.numpy._creation import _concrete
from fnad.numpy._index_routines import _is_traced
from fnad.numpy._sorting import searchsorted

__all__ = ["bincount", "digitize", "histogram", "histogram2d", "histogram_bin_edges",
           "histogramdd"]

builtins_range = range


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None) -> Array:
    """out[i] = the number of entries of the 1-D non-negative int `x` equal to i (or the sum
    of their `weights`), for i < max(minlength, max(x) + 1).

    The output's length depends on x's values: under jit pass a static `length` (entries
    of x at or beyond it are dropped; negative entries count in bin 0, as JAX).
    """
    check_arraylike("bincount", x)
    x = ensure_array(x)
    if x.dtype == np.bool_:
        x = asarray(x, np.int32)
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError(f"bincount: only 1-dimensional input supported, got shape {x.shape}")
    minlength = operator.index(_concrete(minlength, "bincount's minlength"))
    if length is None:
        if _is_traced(x):
            raise core.ConcretizationTypeError(
                f"bincount of a traced array{core._at_user_line()}: the number of bins "
                "depends on the largest value, which is not known while tracing. Pass a "
                "static `length=` to bincount under jit / vmap.")
        xv = np.asarray(x)
        length = max(minlength, xv.size and int(max(0, xv.max())) + 1)
    else:
        length = operator.index(_concrete(length, "bincount's length"))
    if weights is None:
        weights = np.array(1, dtype=dtypes.default_int_dtype())
        dt = weights.dtype
    else:
        check_arraylike("bincount", x, weights)
        weights = ensure_array(weights)
        if weights.shape != x.shape:
            raise ValueError(f"bincount: weights must have the shape of x, got {weights.shape} "
                             f"and {x.shape}")
        dt = weights.dtype
    return jnp.zeros(length, dt).at[jnp.clip(x, 0)].add(weights, mode="drop")


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *,
             method: str | None = None) -> Array:
    """The index of the bin of each x in the monotonic 1-D `bins`: i with
    bins[i-1] <= x < bins[i] (increasing bins; `right` closes the intervals on the right)."""
    check_arraylike("digitize", x, bins)
    x, bins = ensure_array(x), ensure_array(bins)
    right = bool(_concrete(right, "digitize's right"))
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got shape "
                         f"{bins.shape}")
    if bins.shape[0] == 0:
        return jnp.zeros_like(x, dtype=np.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    return jnp.where(jnp.greater_equal(bins[-1], bins[0]),
                     searchsorted(bins, x, side=side, **kw),
                     bins.shape[0] - searchsorted(bins[::-1], x, side=side, **kw))


def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10, range=None,  # noqa: A002
                        weights: ArrayLike | None = None) -> Array:
    """The edges of the histogram's bins: `bins` itself if 1-D, else bins + 1 evenly spaced
    values over `range` (default: a's min to max; widened by 0.5 each way if empty)."""
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` are not implemented.")
    check_arraylike("histogram_bin_edges", a, bins)
    arr = ensure_array(a)
    dtype = dtypes.to_inexact_dtype(arr.dtype)
    if np.ndim(bins) == 1:
        return asarray(bins, dtype=dtype)
    n_bins = operator.index(_concrete(bins, "histogram_bin_edges's bins"))
    if range is None:
        range = [jnp.min(arr), jnp.max(arr)]  # noqa: A001
    range = asarray(range, dtype=dtype)  # noqa: A001
    if range.shape != (2,):
        raise ValueError(f"`range` must be either None or a sequence of two scalars, got shape "
                         f"{range.shape}")
    empty = jnp.equal(jnp.ptp(range), 0)
    lo = jnp.where(empty, range[0] - 0.5, range[0])
    hi = jnp.where(empty, range[1] + 0.5, range[1])
    return jnp.linspace(lo, hi, n_bins + 1, dtype=dtype)


def histogram(a: ArrayLike, bins: ArrayLike = 10, range=None,  # noqa: A002
              weights: ArrayLike | None = None, density: bool | None = None):
    """(counts, bin_edges) of the values of `a` (flattened) in `bins` (a count or the
    edges); the last bin is closed. `weights` weigh each value; `density` normalizes the
    counts to a probability density (counts / width / total)."""
    check_arraylike("histogram", a, bins)
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        weights = jnp.ones_like(a)
    else:
        check_arraylike("histogram", a, bins, weights)
        if np.shape(a) != np.shape(weights):
            raise ValueError(f"weights should have the same shape as a, got {np.shape(weights)} "
                             f"and {np.shape(a)}")
        a, weights = promote_dtypes_inexact(a, weights)
    edges = histogram_bin_edges(a, bins, range, weights)                    # [B + 1]
    idx = searchsorted(edges, a, side="right")
    idx = jnp.where(jnp.equal(a, edges[-1]), edges.shape[0] - 1, idx)       # last bin closed
    counts = jnp.zeros(edges.shape[0], weights.dtype).at[idx].add(weights)[1:]   # [B]
    if density:
        counts = counts / jnp.diff(edges) / jnp.sum(counts)
    return counts, edges


def histogramdd(sample: ArrayLike, bins=10, range=None,  # noqa: A002
                weights: ArrayLike | None = None, density: bool | None = None):
    """(counts, [edges per dimension]) of the N points `sample` [N, D] (a 1-D sample is N
    points in one dimension): `bins` a count, a list of counts or of edges per dimension;
    `range` a (min, max) pair (or None) per dimension; each dimension's last bin closed."""
    check_arraylike("histogramdd", sample)
    s = ensure_array(sample)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2:
        raise ValueError(f"histogramdd: sample must be [N, D] (or [N]), got shape {s.shape}")
    n, d = s.shape
    if weights is not None:
        check_arraylike("histogramdd", weights)
        if np.shape(weights) != (n,):
            raise ValueError(f"histogramdd: weights must have shape ({n},), got "
                             f"{np.shape(weights)}")
        s, w = promote_dtypes_inexact(s, weights)
    else:                                    # integer counts, as JAX (floats with density)
        (s,) = promote_dtypes_inexact(s)
        w = jnp.ones((n,), dtypes.default_int_dtype())
    per_dim = isinstance(bins, (list, tuple)) or np.ndim(bins) == 1 and len(bins) == d \
        and not isinstance(bins, (Array, np.ndarray))
    bins_list = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if per_dim and len(bins_list) != d:
        raise ValueError(f"histogramdd: got {len(bins_list)} bin specifications for {d} "
                         "dimensions")
    if range is not None and len(range) != d:
        raise ValueError(f"histogramdd: range must have one entry per dimension ({d}), got "
                         f"{len(range)}")
    edges, idx = [], []
    for k in builtins_range(d):
        e = histogram_bin_edges(s[:, k], bins_list[k], None if range is None else range[k])
        i = searchsorted(e, s[:, k], side="right")               # 0 below, len(e) above
        i = jnp.where(jnp.equal(s[:, k], e[-1]), e.shape[0] - 1, i)   # last bin closed
        edges.append(e)
        idx.append(i)
    shape = tuple(e.shape[0] + 1 for e in edges)                 # with an outlier bin each side
    flat = jnp.ravel_multi_index(tuple(idx), shape, mode="clip")
    counts = jnp.zeros(int(np.prod(shape)), w.dtype).at[flat].add(w).reshape(shape)
    counts = counts[tuple(slice(1, -1) for _ in edges)]
    if density:
        volume = edges[0][1:] - edges[0][:-1]
        for e in edges[1:]:
            volume = volume[..., None] * (e[1:] - e[:-1])
        counts = counts / volume / jnp.sum(counts).astype(volume.dtype)
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins=10, range=None,  # noqa: A002
                weights: ArrayLike | None = None, density: bool | None = None):
    """(counts, x edges, y edges) of the points (x[i], y[i]): histogramdd in two
    dimensions (`bins` a count, a pair, edges, or a pair of edges)."""
    check_arraylike("histogram2d", x, y)
    x, y = promote_dtypes_inexact(x, y)
    if np.shape(x) != np.shape(y) or np.ndim(x) != 1:
        raise ValueError(f"histogram2d: x and y must be 1-D of equal length, got shapes "
                         f"{np.shape(x)} and {np.shape(y)}")
    if not isinstance(bins, (list, tuple)) and np.ndim(bins) == 1:
        bins = [bins, bins]                                      # the same edges for both
    counts, (ex, ey) = histogramdd(jnp.stack([x, y], axis=1), bins, range, weights, density)
    return counts, ex, ey

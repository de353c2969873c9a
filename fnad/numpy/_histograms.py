"""fnad.numpy's counting and binning: bincount, digitize, histogram_bin_edges, histogram.

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

__all__ = ["bincount", "digitize", "histogram", "histogram_bin_edges"]


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

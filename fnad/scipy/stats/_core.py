"""fnad.scipy.stats's summary statistics, as jax.scipy.stats: mode, rankdata, sem.

    mode(a)     the most frequent value along axis (the smallest of equally frequent ones;
                NaNs count as equal) and its count; NaN and 0 for an empty axis
    rankdata(a) ranks 1..n with ties broken by `method`; all NaN if a holds a NaN
    sem(a)      std(a, ddof) / √n along axis
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import dtypes, lax
from fnad.numpy._core import canonicalize_axis, check_arraylike, promote_args_inexact

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

_NAN_POLICIES = ("propagate", "omit", "raise")


class ModeResult(NamedTuple):
    mode: object
    count: object


def _check_nan_policy(fun: str, nan_policy: str) -> None:
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                         "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
    if nan_policy == "raise":
        raise NotImplementedError(f"In order to best JIT compile `{fun}`, we cannot know "
                                  "whether `x` contains nans. Please check if nans exist in "
                                  f"`x` outside of the `{fun}` function.")


def _mode_1d(x):                                        # x [n] -> (value, count)
    vals, counts = jnp.unique(x, return_counts=True, size=x.size)
    return vals[jnp.argmax(counts)], jnp.max(counts)


def mode(a, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False):
    """The modal value along `axis` (None: of the flattened array) and its count."""
    check_arraylike("mode", a)
    x = jnp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    if axis is not None:
        axis = canonicalize_axis(axis, x.ndim)
    shape = x.shape
    if keepdims:
        out_shape = tuple(1 if axis is None or i == axis else s for i, s in enumerate(shape))
    else:
        out_shape = () if axis is None else tuple(s for i, s in enumerate(shape) if i != axis)
    if axis is None:
        axis, x = 0, jnp.ravel(x)
    x = jnp.moveaxis(x, axis, 0)
    x = jnp.reshape(x, (x.shape[0], math.prod(x.shape[1:])))              # [n, M]
    if x.shape[0] == 0:
        nan = jnp.full(out_shape, np.nan, dtypes.default_float_dtype())
        return ModeResult(nan, jnp.zeros(out_shape, dtypes.default_float_dtype()))
    vals, counts = fnad.vmap(_mode_1d, in_axes=1)(x)                         # [M], [M]
    return ModeResult(jnp.reshape(vals, out_shape), jnp.reshape(counts, out_shape))


def _rank_1d(a, method: str):                           # a [n] -> ranks [n]
    out_dtype = dtypes.default_float_dtype()
    arr, sorter = lax.sort_key_val(a, jnp.arange(a.size))
    inv = jnp.empty_like(sorter).at[sorter].set(jnp.arange(a.size, dtype=sorter.dtype))
    if method == "ordinal":
        return (inv + 1).astype(out_dtype)
    obs = jnp.concatenate([jnp.array([True]), arr[1:] != arr[:-1]])       # run starts
    dense = jnp.cumsum(obs)[inv]
    if method == "dense":
        return dense.astype(out_dtype)
    count = jnp.nonzero(obs, size=arr.size + 1, fill_value=obs.size)[0].astype(out_dtype)
    if method == "max":
        return count[dense]
    if method == "min":
        return count[dense - 1] + 1
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def rankdata(a, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate"):
    """Ranks of the data (1-based; ties by `method`: average, min, max, dense, ordinal)."""
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"unknown method '{method}'")
    if axis is not None:
        return jnp.apply_along_axis(rankdata, axis, a, method)
    a = jnp.ravel(jnp.asarray(a))
    ranks = _rank_1d(a, method)
    return jnp.where(jnp.any(jnp.isnan(a)), jnp.full_like(ranks, np.nan), ranks)


def sem(a, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False):
    """The standard error of the mean: std(a, ddof) / √n along `axis`."""
    b, = promote_args_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return (jnp.std(b, axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(size).astype(b.dtype))
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(b), axis, keepdims=keepdims)
        return (jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims)
                / jnp.sqrt(count).astype(b.dtype))
    raise ValueError(f"{nan_policy} is not supported")

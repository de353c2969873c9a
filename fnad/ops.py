"""fnad.ops: jax.ops' segment reductions, `segment_sum`, `segment_prod`, `segment_max` and
`segment_min`. No new primitives: each is one scatter (`x.at[ids].add/mul/max/min`) into an
array of the reduction's identity, so grad, vmap and jit come from the scatter rules.

Math, for data [N, ...] and segment_ids [N] (as JAX):
  out[s] = ⊕ { data[i] : segment_ids[i] == s },  out: [num_segments, ...]
  ⊕ is +, ×, max or min; an empty segment holds the identity: 0, 1, -inf / +inf (the
  dtype's min / max for integers, False / True for booleans).
  ids outside [0, num_segments) are dropped (mode FILL_OR_DROP, the default; negative ids
  do not count from the end) or clamped into range (mode "clip").
  bucket_size=b: row i goes to bucket i // b, each bucket is reduced on its own, then the
  buckets are reduced by ⊕ (more accurate sums and products; the same max and min).
  d segment_max: the tangent of the winning row; rows tied for the max share it evenly
  (scatter_max's JVP, as JAX's).

Imports fnad.core and fnad.numpy only.
"""
from __future__ import annotations

import operator

import numpy as np

import fnad.numpy as jnp
from fnad import core, dtypes
from fnad.core import Tracer

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op: str, dtype: np.dtype):
    """The value an empty segment holds: the identity of `op` in `dtype`."""
    if op == "add":
        return 0
    if op == "mul":
        return 1
    largest = op == "min"
    if dtypes.is_bool(dtype):
        return largest
    if dtypes.is_int(dtype):
        info = dtypes.iinfo(dtype)
        return int(info.max) if largest else int(info.min)
    return float("inf") if largest else float("-inf")


def _num_segments(name: str, segment_ids, num_segments) -> int:
    """num_segments as a Python int: given, or max(segment_ids) + 1 from concrete ids."""
    if num_segments is None:
        if isinstance(segment_ids, Tracer):
            concrete = segment_ids.to_concrete_value()
            if concrete is None:
                raise core.ConcretizationTypeError(
                    f"{name}: num_segments=None needs concrete segment_ids (it is "
                    "max(segment_ids) + 1, the size of the output), but segment_ids is traced "
                    "(inside jit or another transformation). Pass num_segments as a Python "
                    "int (static under jit).")
            segment_ids = concrete
        ids = np.asarray(segment_ids)
        if ids.size == 0:
            raise ValueError(f"{name}: segment_ids is empty, so num_segments cannot be "
                             "inferred from it; pass num_segments")
        return int(ids.max()) + 1
    if isinstance(num_segments, Tracer):
        concrete = num_segments.to_concrete_value()
        if concrete is None:
            raise core.ConcretizationTypeError(
                f"{name}: num_segments must be a concrete int (it is the size of the "
                "output), got a traced value. Under jit, make it a static argument.")
        num_segments = concrete
    try:
        n = operator.index(num_segments if not isinstance(num_segments, np.ndarray)
                           else num_segments.item())
    except TypeError:
        raise TypeError(f"{name}: num_segments must be an int, got "
                        f"{num_segments!r}") from None
    if n < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {n}")
    return n


def _segment_reduce(name: str, op: str, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode):
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    if not dtypes.is_int(segment_ids.dtype):
        raise TypeError(f"{name}: segment_ids must have an integer dtype, got "
                        f"{segment_ids.dtype.name}")
    if segment_ids.ndim != 1:
        raise ValueError(f"{name}: segment_ids must be 1-D (one id per row of data), got "
                         f"shape {segment_ids.shape}")
    if data.ndim == 0 or data.shape[0] not in (segment_ids.shape[0], 1):
        raise ValueError(f"{name}: data's leading axis must have one row per segment id "
                         f"({segment_ids.shape[0]}), got data of shape {data.shape}")
    S = _num_segments(name, segment_ids, num_segments)
    dtype = data.dtype
    identity = _identity(op, dtype)
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=mode, wrap_negative_indices=False)
    if bucket_size is None:
        out = jnp.full((S,) + data.shape[1:], identity, dtype=dtype)      # [S, ...]
        return getattr(out.at[segment_ids], op)(data, **kw)
    bucket_size = operator.index(bucket_size)
    if bucket_size < 1:
        raise ValueError(f"{name}: bucket_size must be a positive int, got {bucket_size}")
    N = segment_ids.shape[0]
    num_buckets = -(-N // bucket_size)
    out = jnp.full((num_buckets, S) + data.shape[1:], identity, dtype=dtype)  # [B, S, ...]
    bucket = jnp.arange(N, dtype=segment_ids.dtype) // bucket_size             # [N]
    out = getattr(out.at[bucket, segment_ids], op)(data, **kw)
    reducer = {"add": jnp.sum, "mul": jnp.prod, "max": jnp.max, "min": jnp.min}[op]
    return reducer(out, axis=0).astype(dtype)                                  # [S, ...]


def segment_sum(data, segment_ids, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    """The sums of data's rows by segment: out[s] = Σ data[i] over segment_ids[i] == s.

    data: [N, ...]; segment_ids: [N] integers (any order, repeats allowed); returns
    [num_segments, ...], 0 where a segment is empty. num_segments defaults to
    max(segment_ids) + 1 (so needs concrete ids; give it, as a static int, under jit).
    Ids outside [0, num_segments) are dropped, or clamped with mode="clip". bucket_size
    sums each run of bucket_size rows apart first (as JAX, for accuracy).
    """
    return _segment_reduce("segment_sum", "add", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_prod(data, segment_ids, num_segments: int | None = None,
                 indices_are_sorted: bool = False, unique_indices: bool = False,
                 bucket_size: int | None = None, mode=None):
    """The products of data's rows by segment: out[s] = Π data[i] over segment_ids[i] == s.

    Shapes and arguments as `segment_sum`; 1 where a segment is empty. As JAX, derivatives
    with respect to data (jvp or grad) need unique_indices=True (scatter_mul's rules).
    """
    return _segment_reduce("segment_prod", "mul", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_max(data, segment_ids, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    """The maxima of data's rows by segment: out[s] = max data[i] over segment_ids[i] == s.

    Shapes and arguments as `segment_sum`; -inf where a segment is empty (the dtype's
    minimum for integers, False for booleans). The gradient goes to the maximal rows,
    split evenly among ties (as JAX).
    """
    return _segment_reduce("segment_max", "max", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)


def segment_min(data, segment_ids, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    """The minima of data's rows by segment: out[s] = min data[i] over segment_ids[i] == s.

    Shapes and arguments as `segment_sum`; +inf where a segment is empty (the dtype's
    maximum for integers, True for booleans). The gradient goes to the minimal rows,
    split evenly among ties (as JAX).
    """
    return _segment_reduce("segment_min", "min", data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode)

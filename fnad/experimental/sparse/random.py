"""sparse.random_bcoo: a BCOO array with random entries at random positions, as
jax.experimental.sparse.random_bcoo — the same key gives jax's array (its positions come
from fnad.random.choice and its values from `generator`, both bit-exact with jax's)."""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import dtypes, random
from fnad.experimental.sparse.bcoo import BCOO

__all__ = ["random_bcoo"]


def random_bcoo(key, shape: Sequence[int], *, dtype=None, indices_dtype=None,
                nse: float | int = 0.2, n_batch: int = 0, n_dense: int = 0,
                unique_indices: bool = True, sorted_indices: bool = False,
                generator: Callable = random.uniform, **kwds) -> BCOO:
    """A random BCOO of `shape` with n_batch batch and n_dense dense dims.

    nse is the number of stored entries per batch position, or, when 0 < nse < 1, that
    fraction of the sparse positions (rounded up). Key use: split into one key for the data
    (`generator(key, shape=[*batch, nse, *dense], dtype=dtype, **kwds)`) and one per batch
    position, each drawing nse flat positions with random.choice (without replacement when
    unique_indices). sorted_indices sorts each batch position's indices."""
    shape = tuple(operator.index(s) for s in shape)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"random_bcoo: invalid n_batch={n_batch}, n_dense={n_dense} for "
                         f"shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense = shape[n_batch + n_sparse:]
    positions = math.prod(sparse_shape)
    if not 0 <= nse < positions:
        raise ValueError(f"random_bcoo: nse={nse} must be in [0, {positions}) (the number of "
                         f"sparse positions of shape {shape})")
    if 0 < nse < 1:
        nse = math.ceil(nse * positions)
    nse = operator.index(nse)
    indices_dtype = dtypes.default_int_dtype() if indices_dtype is None else \
        dtypes.canonicalize_dtype(indices_dtype)
    if positions > np.iinfo(indices_dtype).max:
        raise ValueError(f"random_bcoo: indices_dtype={np.dtype(indices_dtype).name} cannot "
                         f"hold the {positions} sparse positions")
    keys = random.split(key, math.prod(batch) + 1)
    data = generator(keys[0], shape=(*batch, nse, *dense),
                     dtype=dtypes.default_float_dtype() if dtype is None else dtype, **kwds)

    def positions_of(k):
        if not sparse_shape:
            return jnp.zeros((nse, 0), indices_dtype)
        flat = random.choice(k, positions, shape=(nse,), replace=not unique_indices)
        return jnp.stack(jnp.unravel_index(flat.astype(indices_dtype), sparse_shape), axis=-1)
    indices = fnad.vmap(positions_of)(keys[1:]).reshape((*batch, nse, n_sparse))
    out = BCOO((data, indices), shape=shape)
    return out.sort_indices() if sorted_indices else out

"""fnad.flatten_util: `ravel_pytree`, as jax.flatten_util.

ravel_pytree(tree) -> (flat, unravel): the leaves raveled and concatenated into one 1-D
array of their common (promoted) dtype, and the function that splits such a vector back
into the tree, each leaf reshaped and cast to its own dtype. Both are differentiable and
work under jit and vmap (unravel of a batched vector maps over it).
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import tree_util
from fnad.core import get_aval

__all__ = ["ravel_pytree"]


def ravel_pytree(tree):
    """(the leaves of `tree` as one 1-D array, a function mapping such an array back)."""
    leaves, treedef = tree_util.tree_flatten(tree)
    avals = [get_aval(x) for x in leaves]
    shapes = [a.shape for a in avals]
    dtypes = [a.dtype for a in avals]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    if not leaves:
        flat = jnp.zeros((0,), np.float32)
    else:
        common = jnp.result_type(*leaves)
        flat = jnp.concatenate([jnp.ravel(jnp.asarray(x)).astype(common) for x in leaves])
    total = sum(sizes)
    splits = list(np.cumsum(sizes)[:-1])

    def unravel(vec):
        if jnp.shape(vec) != (total,):
            raise ValueError(f"unravel: expected a vector of shape ({total},), the size of "
                             f"the raveled tree; got shape {jnp.shape(vec)}")
        parts = jnp.split(vec, splits) if leaves else []
        return tree_util.tree_unflatten(treedef, [
            jnp.reshape(p, s).astype(d) for p, s, d in zip(parts, shapes, dtypes)])
    return flat, unravel

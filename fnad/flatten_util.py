"""fnad.flatten_util: `ravel_pytree`, as jax.flatten_util.

ravel_pytree(tree) -> (flat, unravel): the leaves raveled and concatenated into one 1-D
array of their common (promoted) dtype, and the function that splits such a vector back
into the tree, each leaf reshaped and cast to its own dtype. Both are differentiable and
work under jit and vmap (unravel of a batched vector maps over it). As in JAX, when the
leaves have one dtype unravel casts nothing (a vector of another dtype gives leaves of its
dtype); when they have several, a vector of another dtype than the raveled one is a
TypeError.
"""
from __future__ import annotations

import numpy as np

import fnad.numpy as jnp
from fnad import tree_util
from fnad.core import get_aval

__all__ = ["ravel_pytree"]


def _ravel_as(x, dtype):
    """x as a 1-D array of `dtype`; not cast where it has that dtype (so weak types stay)."""
    x = jnp.ravel(jnp.asarray(x))
    return x if x.dtype == dtype else x.astype(dtype)


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
        flat = jnp.concatenate([_ravel_as(x, common) for x in leaves])
    total = sum(sizes)
    splits = list(np.cumsum(sizes)[:-1])

    def unravel(vec):
        if jnp.shape(vec) != (total,):
            raise ValueError(f"unravel: expected a vector of shape ({total},), the size of "
                             f"the raveled tree; got shape {jnp.shape(vec)}")
        parts = jnp.split(vec, splits) if leaves else []
        if len(set(dtypes)) <= 1:
            return tree_util.tree_unflatten(treedef, [
                jnp.reshape(p, s) for p, s in zip(parts, shapes)])
        if jnp.result_type(vec) != flat.dtype:
            raise TypeError(f"unravel function given array of dtype {jnp.result_type(vec)} "
                            f"but expected dtype {flat.dtype}")
        return tree_util.tree_unflatten(treedef, [
            jnp.reshape(p, s).astype(d) for p, s, d in zip(parts, shapes, dtypes)])
    return flat, unravel

"""fnad.optim.tree_utils: optax.tree_utils' leafwise arithmetic on pytrees of arrays.

The moment updates and bias corrections every optimizer in fnad.optim is built from, with
optax's names and formulas (the same operation order, so float32 results agree with optax
to rounding). Uses fnad.numpy and fnad.tree_util only.
"""
from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import tree_util

__all__ = [
    "tree_add", "tree_add_scale", "tree_bias_correction", "tree_cast", "tree_cast_like",
    "tree_clip",
    "tree_div", "tree_dtype", "tree_full_like", "tree_max", "tree_min", "tree_mul",
    "tree_norm", "tree_ones_like", "tree_random_like", "tree_scale", "tree_size",
    "tree_split_key_like", "tree_sub", "tree_sum", "tree_update_infinity_moment",
    "tree_update_moment", "tree_update_moment_per_elem_norm", "tree_vdot", "tree_where",
    "tree_zeros_like",
]

tree_map = tree_util.tree_map


def tree_add(tree_x: Any, tree_y: Any, *other_trees: Any) -> Any:
    """x + y (+ ...) leafwise."""
    return tree_map(lambda *leaves: sum(leaves[1:], leaves[0]), tree_x, tree_y, *other_trees)


def tree_sub(tree_x: Any, tree_y: Any) -> Any:
    """x - y leafwise."""
    return tree_map(operator.sub, tree_x, tree_y)


def tree_mul(tree_x: Any, tree_y: Any) -> Any:
    """x · y leafwise."""
    return tree_map(operator.mul, tree_x, tree_y)


def tree_div(tree_x: Any, tree_y: Any) -> Any:
    """x / y leafwise."""
    return tree_map(operator.truediv, tree_x, tree_y)


def tree_scale(scalar: Any, tree: Any) -> Any:
    """s · x leafwise."""
    return tree_map(lambda x: scalar * x, tree)


def tree_add_scale(tree_x: Any, scalar: Any, tree_y: Any) -> Any:
    """x + s · y leafwise."""
    return tree_map(lambda x, y: x + scalar * y, tree_x, tree_y)


def tree_vdot(tree_x: Any, tree_y: Any) -> Any:
    """Σ_leaves ⟨x, y⟩ (conjugating x), a scalar."""
    vdots = [jnp.vdot(x, y) for x, y in zip(tree_util.tree_leaves(tree_x),
                                           tree_util.tree_leaves(tree_y))]
    return functools.reduce(operator.add, vdots, 0)


def tree_sum(tree: Any, associative_reduction: bool = False) -> Any:
    """Σ over every element of every leaf; the leaf sums added left to right, or pairwise
    with `associative_reduction=True` (as optax; the rounding may differ slightly)."""
    sums = [jnp.sum(x) for x in tree_util.tree_leaves(tree)]
    if associative_reduction:
        return tree_util.tree_reduce_associative(operator.add, sums, identity=0)
    return functools.reduce(operator.add, sums, 0)


def tree_max(tree: Any) -> Any:
    """The largest element over all leaves (-inf for an empty tree)."""
    return functools.reduce(jnp.maximum, [jnp.max(x) for x in tree_util.tree_leaves(tree)],
                            -float("inf"))


def tree_min(tree: Any) -> Any:
    """The smallest element over all leaves (inf for an empty tree)."""
    return functools.reduce(jnp.minimum, [jnp.min(x) for x in tree_util.tree_leaves(tree)],
                            float("inf"))


def tree_size(tree: Any) -> int:
    """The number of elements over all leaves."""
    return sum(int(np.prod(jnp.shape(x))) for x in tree_util.tree_leaves(tree))


def _square(x):
    return jnp.square(jnp.real(x)) + jnp.square(jnp.imag(x)) if jnp.iscomplexobj(x) \
        else jnp.square(x)


def tree_norm(tree: Any, ord: Any = None, squared: bool = False) -> Any:  # noqa: A002
    """The 2-norm (ord None or 2), 1-norm or inf-norm of all leaves as one vector."""
    if ord is None or ord == 2:
        sq = tree_sum(tree_map(_square, tree))
        return jnp.asarray(sq if squared else jnp.sqrt(sq))
    if ord == 1:
        ret = tree_sum(tree_map(jnp.abs, tree))
    elif ord in (float("inf"), "inf", "infinity"):
        ret = tree_max(tree_map(jnp.abs, tree))
    else:
        raise ValueError(f"tree_norm: unsupported ord {ord!r}; use None, 1, 2 or inf")
    return jnp.asarray(_square(ret) if squared else ret)


def tree_zeros_like(tree: Any, dtype: Any = None) -> Any:
    """Zeros shaped like each leaf (in `dtype` if given)."""
    return tree_map(lambda x: jnp.zeros_like(x, dtype=dtype), tree)


def tree_ones_like(tree: Any, dtype: Any = None) -> Any:
    """Ones shaped like each leaf (in `dtype` if given)."""
    return tree_map(lambda x: jnp.ones_like(x, dtype=dtype), tree)


def tree_full_like(tree: Any, fill_value: Any, dtype: Any = None) -> Any:
    """`fill_value` shaped like each leaf (in `dtype` if given)."""
    return tree_map(lambda x: jnp.full_like(x, fill_value, dtype=dtype), tree)


def tree_clip(tree: Any, min_value: Any = None, max_value: Any = None) -> Any:
    """clip(x, min, max) leafwise."""
    return tree_map(lambda g: jnp.clip(g, min_value, max_value), tree)


def tree_where(condition: Any, tree_x: Any, tree_y: Any) -> Any:
    """where(c, x, y) leafwise, one condition for all leaves."""
    return tree_map(lambda x, y: jnp.where(condition, x, y), tree_x, tree_y)


def tree_cast(tree: Any, dtype: Any) -> Any:
    """Each leaf cast to dtype (unchanged when dtype is None)."""
    if dtype is None:
        return tree
    return tree_map(lambda t: jnp.asarray(t).astype(dtype), tree)


def tree_cast_like(tree: Any, other_tree: Any) -> Any:
    """Each leaf cast to the dtype of the matching leaf of other_tree."""
    return tree_map(lambda x, y: jnp.asarray(x).astype(jnp.asarray(y).dtype), tree, other_tree)


def tree_dtype(tree: Any, mixed_dtype_handler: str | None = None) -> Any:
    """The common dtype of the leaves (as optax): the only one (None), or of several the
    'promote'd one (jnp.promote_types), or the 'highest' / 'lowest' where each pair of
    dtypes is ordered by promotion (a pair neither promotes to, like bfloat16 and float16,
    is a ValueError). An empty tree gives float32."""
    dtypes = [np.dtype(jnp.asarray(x).dtype) for x in tree_util.tree_leaves(tree)]
    if not dtypes:
        return np.dtype(np.float32)
    if mixed_dtype_handler is None:
        if len(set(dtypes)) > 1:
            raise ValueError(f"tree_dtype: the leaves have several dtypes "
                             f"{sorted(set(map(str, dtypes)))}; pass mixed_dtype_handler="
                             f"'promote', 'highest' or 'lowest'")
        return dtypes[0]
    if mixed_dtype_handler == "promote":
        return np.dtype(functools.reduce(jnp.promote_types, dtypes))
    if mixed_dtype_handler == "highest":
        return functools.reduce(lambda a, b: b if _lower_dtype(a, b) == a else a, dtypes)
    if mixed_dtype_handler == "lowest":
        return functools.reduce(_lower_dtype, dtypes)
    raise ValueError(f"tree_dtype: mixed_dtype_handler must be None, 'promote', 'highest' or "
                     f"'lowest', got {mixed_dtype_handler!r}")


def _lower_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """The one of a, b that promotes to the other (jnp's promotion lattice)."""
    promoted = jnp.promote_types(a, b)
    if promoted == a:
        return b
    if promoted == b:
        return a
    raise ValueError(f"tree_dtype: cannot order dtypes {a} and {b}: neither promotes to the "
                     f"other (jnp.promote_types gives {np.dtype(promoted)})")


def tree_split_key_like(rng_key: Any, target_tree: Any) -> Any:
    """One key per leaf of target_tree, from fnad.random.split(rng_key, n_leaves)."""
    treedef = tree_util.tree_structure(target_tree)
    n = len(tree_util.tree_leaves(target_tree))
    keys = fnad.random.split(rng_key, n)
    return tree_util.tree_unflatten(treedef, [keys[i] for i in range(n)])


def tree_random_like(rng_key: Any, target_tree: Any, sampler: Any = None,
                     dtype: Any = None) -> Any:
    """Random leaves shaped like target_tree's: sampler(key_i, shape, dtype) with one split key
    per leaf (default sampler fnad.random.normal). Same bits as optax with jax.random."""
    sampler = sampler or fnad.random.normal
    keys = tree_split_key_like(rng_key, target_tree)
    return tree_map(lambda leaf, k: sampler(k, jnp.shape(leaf), dtype or jnp.asarray(leaf).dtype),
                    target_tree, keys, is_leaf=lambda x: x is None)


# ---- moments --------------------------------------------------------------------------
def tree_update_moment(updates: Any, moments: Any, decay: Any, order: int) -> Any:
    """m' = (1 - β) · g^order + β · m."""
    return tree_map(lambda g, t: (1 - decay) * (g ** order) + decay * t, updates, moments)


def tree_update_infinity_moment(updates: Any, moments: Any, decay: Any, eps: Any) -> Any:
    """u' = max(|g| + ε, β · u)."""
    return tree_map(lambda g, t: jnp.maximum(jnp.abs(g) + eps, decay * t), updates, moments)


def tree_update_moment_per_elem_norm(updates: Any, moments: Any, decay: Any,
                                     order: int) -> Any:
    """v' = (1 - β) · |g|^order + β · v (|g|² = g·ḡ for complex g)."""
    def orderth_norm(g):
        if not jnp.iscomplexobj(g):
            return g ** order
        half = order / 2
        return (jnp.real(g) ** 2 + jnp.imag(g) ** 2) ** (int(half) if half.is_integer()
                                                         else half)
    return tree_map(lambda g, t: (1 - decay) * orderth_norm(g) + decay * t, updates, moments)


def tree_bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    """m̂ = m / (1 - β^t): 1 - β^t in the default float, then cast to each leaf's dtype."""
    bc = 1 - decay ** count
    return tree_map(lambda t: t / jnp.asarray(bc).astype(t.dtype), moment)

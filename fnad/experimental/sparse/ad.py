"""Sparse-aware differentiation: grad, value_and_grad, jacfwd, jacrev and jacobian of
jax.experimental.sparse.

Each wraps fnad's transformation of the same name. A sparse argument (BCOO, BCSR) is
differentiated through its stored `data` only (its indices are integers), so its gradient
lives in the subspace of its sparsity pattern and comes back as a sparse array with the same
indices. For a Jacobian (jacfwd / jacrev) the output's dims lead: the result is a sparse
array with one more batch dim per output dim (the rebuilding is vmapped over them), as in
jax. As jax, the gradients of the differentiated arguments come back as one tuple with the
arguments that have no leaves left out, unpacked when only one remains.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import fnad
from fnad import tree_util
from fnad.experimental.sparse.bcoo import BCOO

__all__ = ["grad", "jacfwd", "jacobian", "jacrev", "value_and_grad"]


def _is_sparse(x) -> bool:
    from fnad.experimental.sparse.bcsr import BCSR
    return isinstance(x, (BCOO, BCSR))


def _argnums(argnums) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _flatten_for_sparse_ad(fun, argnums, args):
    """(fun of the flat buffers, their argnums (a sparse argument's data only), the flat
    buffers, postprocess(grads) -> gradients with sparse arguments rebuilt)."""
    nums = _argnums(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"argnums {argnums} out of range for {len(args)} arguments")
    nums = tuple(i % len(args) for i in nums)
    leaves1, tree1 = tree_util.tree_flatten(args, is_leaf=_is_sparse)
    counts = [tree_util.tree_structure(a, is_leaf=_is_sparse).num_leaves for a in args]
    starts = [sum(counts[:i]) for i in range(len(args))]
    argnums1 = [j for i in nums for j in range(starts[i], starts[i] + counts[i])]
    leaves2, tree2 = tree_util.tree_flatten(leaves1)
    sizes2 = [len(tree_util.tree_leaves(leaf)) for leaf in leaves1]
    starts2 = [sum(sizes2[:j]) for j in range(len(leaves1))]
    argnums2 = tuple(starts2[j] if _is_sparse(leaves1[j]) else k
                     for j in argnums1
                     for k in ([starts2[j]] if _is_sparse(leaves1[j]) else
                               range(starts2[j], starts2[j] + sizes2[j])))

    def fun_flat(*bufs, **kwargs):
        return fun(*tree_util.tree_unflatten(tree1, tree_util.tree_unflatten(tree2, list(bufs))),
                   **kwargs)

    def rebuild(j, g):
        bufs, tree = tree_util.tree_flatten(leaves1[j])
        f = lambda d: tree_util.tree_unflatten(tree, [d, *bufs[1:]])  # noqa: E731
        for _ in range(g.ndim - bufs[0].ndim):
            f = fnad.vmap(f)
        return f(g)

    def postprocess(grads):
        out = [None] * len(leaves1)
        for j, g in zip(argnums1, grads):
            out[j] = rebuild(j, g) if _is_sparse(leaves1[j]) else g
        tree = tree_util.tree_unflatten(tree1, out)
        kept = tuple(t for t in tree if tree_util.tree_leaves(t))
        return kept[0] if len(kept) == 1 else kept
    return fun_flat, argnums2, leaves2, postprocess


def _sparse(transform: Callable, name: str, returns_value: bool = False):
    def make(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
             **kwargs) -> Callable:
        _argnums(argnums)

        @functools.wraps(fun)
        def wrapped(*args, **call_kwargs):
            fun_flat, nums, bufs, post = _flatten_for_sparse_ad(fun, argnums, args)
            out = transform(functools.partial(fun_flat, **call_kwargs), argnums=nums,
                            has_aux=has_aux, **kwargs)(*bufs)
            if returns_value:
                value, grads = out
                return value, post(grads)
            if has_aux:
                return post(out[0]), out[1]
            return post(out)
        wrapped.__doc__ = (f"Sparse-aware {name} of {getattr(fun, '__name__', 'fun')}: "
                           "sparse arguments are differentiated through their data.")
        return wrapped
    make.__name__ = name
    make.__doc__ = (f"Sparse-aware version of fnad.{name} (jax.experimental.sparse.{name}): "
                    "a sparse argument's gradient is a sparse array with its indices.")
    return make


grad = _sparse(fnad.grad, "grad")
value_and_grad = _sparse(fnad.value_and_grad, "value_and_grad", returns_value=True)
jacfwd = _sparse(fnad.jacfwd, "jacfwd")
jacrev = _sparse(fnad.jacrev, "jacrev")
jacobian = jacrev

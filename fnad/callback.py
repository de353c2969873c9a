"""fnad.pure_callback and fnad.experimental.io_callback: host Python functions inside traced
programs, as `jax.pure_callback` and `jax.experimental.io_callback`.

Owns the `pure_callback` and `io_callback` primitives and their rules. pure_callback's
params are the function (fnad.debug's `_Callback`: the function, the operands' pytree and
their non-array leaves, hashed by identity), the results' avals and pytree (from
`result_shape_dtypes`) and `vmap_method`.
The function gets the operands' concrete values as fnad Arrays holding NumPy copies (as
fnad.debug.callback's do; `np.asarray` on one is free) and returns NumPy-like values of the
declared shapes and dtypes; anything else is an error naming the result.

- eagerly (and in every backend's jit program: the numpy interpreter, numba's driver and
  the cuda program run the eager rule, the xla backend lowers it to jax.pure_callback) it
  calls the function;
- it is pure: dead-code elimination drops it when nothing reads its results, and the
  compiled program is not kept on disk (a function is not a value another process has);
- jvp/grad: an error, as in JAX (`fnad.custom_jvp` gives a callback a derivative), unless
  no operand has a tangent;
- vmap follows `vmap_method`: "sequential" (a lax.map over the batch),
  "sequential_unrolled" (one call per member), "expand_dims" (one call; unbatched operands
  get a leading axis of size 1), "broadcast_all" (one call; every operand broadcast to the
  batch), "legacy_vectorized" (one call; unbatched operands as they are); None is JAX's
  NotImplementedError.

io_callback has the same params with `ordered` for `vmap_method`. It is effectful
(`core.effectful_primitives`: DCE keeps it); no JVP; under vmap one call per member (a
lax.map), an error when ordered; the xla backend lowers it to jax's io_callback.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fnad import core, dtypes, tree_util
from fnad.core import Array, Primitive, ShapedArray, Zero, get_aval
from fnad.debug import _Callback, _host_array, _split_args

__all__ = ["io_callback", "pure_callback"]

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")

pure_callback_p = Primitive("pure_callback", multiple_results=True)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes, *args,
                  sharding=None, vmap_method: str | None = None, **kwargs):
    """`callback(*args, **kwargs)` on the host, with concrete values, inside any traced
    program (`jax.pure_callback`). `result_shape_dtypes` is a pytree of anything with a
    `shape` and a `dtype` (ShapeDtypeStruct, an array) that the callback's result must
    match; the result comes back as fnad Arrays in that pytree. The callback must be pure:
    fnad may skip it when nothing reads its result, and calls it per `vmap_method` under
    vmap (see the module docstring). `sharding` is accepted (fnad runs on one device)."""
    _check_callable("pure_callback", callback)
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be None or one of {VMAP_METHODS}, "
                         f"got {vmap_method!r}")
    return _bind(pure_callback_p, callback, result_shape_dtypes, args, kwargs,
                 vmap_method=vmap_method)


def _check_callable(kind: str, callback) -> None:
    if not callable(callback):
        raise TypeError(f"{kind}: callback must be callable, got {type(callback).__name__}")


def _bind(prim, callback, result_shape_dtypes, args, kwargs, **params):
    """Bind a callback primitive (pure_callback, io_callback) on the array leaves of args
    and kwargs; its results in result_shape_dtypes' pytree."""
    result_avals, result_tree = _result_avals(prim.name, result_shape_dtypes)
    in_tree, dyn, static = _split_args(args, kwargs)
    name = getattr(callback, "__name__", type(callback).__name__)
    outs = prim.bind(*dyn, callback=_Callback(callback, in_tree, static, name),
                     result_avals=result_avals, result_tree=result_tree, **params)
    return tree_util.tree_unflatten(result_tree, outs)


def _result_avals(kind: str, result_shape_dtypes) -> tuple[tuple, Any]:
    """The avals and pytree of `result_shape_dtypes` (leaves with a shape and a dtype)."""
    leaves, result_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = []
    for i, leaf in enumerate(leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{kind}: result_shape_dtypes leaf {i} must have a shape "
                            f"and a dtype (a ShapeDtypeStruct), got {type(leaf).__name__}")
        result_avals.append(ShapedArray(tuple(leaf.shape),
                                        dtypes.canonicalize_dtype(leaf.dtype)))
    return tuple(result_avals), result_tree


# ---- rules -----------------------------------------------------------------------------------
def pure_callback_abstract_eval(*avals, callback, result_avals, result_tree, vmap_method):
    return list(result_avals)
core.abstract_eval_rules[pure_callback_p] = pure_callback_abstract_eval


def pure_callback_eager(*args, callback, result_avals, result_tree, vmap_method):
    """Call the function now; its results as NumPy-backend Arrays, checked."""
    return _call("pure_callback", callback, args, result_avals, result_tree)


def _call(kind: str, callback, args, result_avals, result_tree) -> list:
    from fnad.backends import get_backend
    out = callback(*[_host_array(x) for x in args])
    leaves, tree = tree_util.tree_flatten(out)
    if tree != result_tree:
        raise ValueError(f"{kind}: {callback.name} returned a result structured as "
                         f"{tree}, but result_shape_dtypes is structured as {result_tree}")
    host, results = get_backend("numpy"), []
    for i, (leaf, aval) in enumerate(zip(leaves, result_avals)):
        value = np.asarray(leaf)
        if value.shape != aval.shape or dtypes.canonicalize_dtype(value.dtype) != aval.dtype:
            raise ValueError(f"{kind}: result {i} of {callback.name} is "
                             f"{value.dtype}{list(value.shape)}, but result_shape_dtypes "
                             f"says {aval.str_short()}")
        results.append(Array(np.array(value, aval.dtype), aval, host))
    return results
core.eager_rules[pure_callback_p] = pure_callback_eager


def pure_callback_jvp(primals, tangents, **params):
    if any(type(t) is not Zero for t in tangents):
        raise ValueError("Pure callbacks do not support JVP. Please use `fnad.custom_jvp` to "
                         "use callbacks while taking gradients.")
    outs = pure_callback_p.bind(*primals, **params)
    return outs, [Zero(a.to_tangent_aval()) for a in params["result_avals"]]
core.jvp_rules[pure_callback_p] = pure_callback_jvp


def pure_callback_batch(vals, dims, *, callback, result_avals, result_tree, vmap_method):
    from fnad.primitives._batching import moveaxis
    from fnad.primitives.shape_ops import broadcast_in_dim, reshape
    if vmap_method is None:
        raise NotImplementedError(
            f"vmap is only supported for the pure_callback primitive when vmap_method is "
            f"one of {', '.join(map(repr, VMAP_METHODS))}. Got vmap_method=None.")
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    params = dict(callback=callback, result_avals=result_avals, result_tree=result_tree,
                  vmap_method=vmap_method)
    front = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(pure_callback_p, front, dims, size, params,
                           vmap_method == "sequential"), \
            [0] * len(result_avals)
    if vmap_method == "expand_dims":
        front = [v if d is not None else reshape(v, (1,) + get_aval(v).shape)
                 for v, d in zip(front, dims)]
    elif vmap_method == "broadcast_all":
        front = [v if d is not None else broadcast_in_dim(
            v, (size,) + get_aval(v).shape, tuple(range(1, get_aval(v).ndim + 1)))
            for v, d in zip(front, dims)]
    batched_avals = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    outs = pure_callback_p.bind(*front, **dict(params, result_avals=batched_avals))
    return outs, [0] * len(outs)
core.batch_rules[pure_callback_p] = pure_callback_batch


def _sequential(prim, front: list, dims: list, size: int, params: dict, as_map: bool) -> list:
    """One call per batch member (operands with the batch first): a lax.map, or unrolled."""
    from fnad.primitives.control_flow import map as lax_map
    from fnad.primitives.shape_ops import concatenate, index_in_dim, reshape
    batched = [v for v, d in zip(front, dims) if d is not None]

    def member(xs):
        it = iter(xs)
        return prim.bind(*[next(it) if d is not None else v for v, d in zip(front, dims)],
                         **params)
    if as_map or size == 0:
        return list(lax_map(member, batched))
    rows = [member([index_in_dim(v, i, 0, keepdims=False) for v in batched])
            for i in range(size)]
    return [concatenate([reshape(r[k], (1,) + get_aval(r[k]).shape) for r in rows], 0)
            for k in range(len(params["result_avals"]))]


# ---- io_callback ------------------------------------------------------------------------------
io_callback_p = Primitive("io_callback", multiple_results=True)
core.effectful_primitives.add(io_callback_p)      # never dropped, even when nothing reads it


def io_callback(callback: Callable[..., Any], result_shape_dtypes, *args, sharding=None,
                ordered: bool = False, **kwargs):
    """`callback(*args, **kwargs)` on the host for its side effects, inside any traced
    program (`jax.experimental.io_callback`): as pure_callback, but it runs even when its
    results are unused (dead-code elimination keeps it), in program order on fnad's
    backends (which run a program's equations in order, so `ordered` only decides vmap).
    Not differentiable (an error when a tangent reaches it, as in JAX); under vmap an
    unordered callback is called once per batch member, in order, and an ordered one is an
    error (as in JAX). `sharding` is accepted (fnad runs on one device)."""
    _check_callable("io_callback", callback)
    return _bind(io_callback_p, callback, result_shape_dtypes, args, kwargs,
                 ordered=bool(ordered))


def io_callback_abstract_eval(*avals, callback, result_avals, result_tree, ordered):
    return list(result_avals)
core.abstract_eval_rules[io_callback_p] = io_callback_abstract_eval


def io_callback_eager(*args, callback, result_avals, result_tree, ordered):
    return _call("io_callback", callback, args, result_avals, result_tree)
core.eager_rules[io_callback_p] = io_callback_eager


def io_callback_jvp(primals, tangents, **params):
    if any(type(t) is not Zero for t in tangents):
        raise ValueError("IO callbacks do not support JVP.")
    outs = io_callback_p.bind(*primals, **params)
    return outs, [Zero(a.to_tangent_aval()) for a in params["result_avals"]]
core.jvp_rules[io_callback_p] = io_callback_jvp


def io_callback_batch(vals, dims, *, callback, result_avals, result_tree, ordered):
    from fnad.primitives._batching import moveaxis
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    front = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    params = dict(callback=callback, result_avals=result_avals, result_tree=result_tree,
                  ordered=ordered)
    return _sequential(io_callback_p, front, dims, size, params, True), [0] * len(result_avals)
core.batch_rules[io_callback_p] = io_callback_batch

"""fnad.batching: vmap, the vectorizing map, as a trace (BatchTrace).

A BatchTracer is a value with one extra axis, `batch_dim` (None: the same value for
every batch member). Each primitive's batching rule (`batch_rules`, registered in its
block in primitives/) maps batched operands to a batched result in one call. A
primitive without a rule is run once per batch member and the results stacked, with a
warning: correct, but slow.
"""
from __future__ import annotations

import functools
import threading
from typing import Any
from collections.abc import Callable

import numpy as np

from fnad import core, tree_util
from fnad.core import Tracer, batch_rules, collective_rules, get_aval
from fnad.prng import is_key_array
from fnad.primitives._batching import loop_batch, moveaxis
from fnad.tracing import flatten_fun


class BatchTracer(Tracer):
    """`val` carries the batch along axis `batch_dim` (never None for a tracer)."""

    __slots__ = ("val", "batch_dim")

    def __init__(self, trace: BatchTrace, val, batch_dim: int):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        a = get_aval(self.val)
        shape = a.shape[:self.batch_dim] + a.shape[self.batch_dim + 1:]
        return core.ShapedArray(shape, a.dtype, a.weak_type)

    @property
    def _where(self):
        return self._trace.where


class _RuleAxis(threading.local):
    name = None          # the axis name of the BatchTrace whose rule is running


_rule_axis = _RuleAxis()
_INHERIT = object()


class BatchTrace(core.Trace):
    """`axis_name`: the name vmap binds (None: none), for the collectives. A BatchTrace
    made inside another's batching rule (to batch a sub-jaxpr of scan, cond, jit ...)
    maps the same axis, so by default it takes that trace's name."""

    def __init__(self, parent, axis_size: int, description: str, axis_name=_INHERIT):
        super().__init__(parent, description)
        self.axis_size = axis_size
        self.axis_name = _rule_axis.name if axis_name is _INHERIT else axis_name

    def val_bdim(self, x):
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.batch_dim
        if isinstance(x, Tracer):
            self.check_foreign(x)
        return x, None

    def process_primitive(self, prim, args, params):
        vals, dims = zip(*(self.val_bdim(x) for x in args)) if args else ((), ())
        name = self.axis_name
        with core.set_current_trace(self.parent):
            prev, _rule_axis.name = _rule_axis.name, name
            try:
                if name is not None and prim in collective_rules and \
                        name in params["axis_name"]:
                    core.abstract_eval(prim, [get_aval(x) for x in args], params)  # checks
                    out, out_dim = collective_rules[prim](vals, dims, self.axis_size, name,
                                                          **params)
                    return self.pack(out, out_dim)
                if all(d is None for d in dims):
                    if name is None or not _names_axis(params, name):
                        return prim.bind(*vals, **params)
                    # a sub-jaxpr has a collective over this axis: it must be batched
                    vals, dims = _broadcast_first(prim, vals, dims, self.axis_size, name)
                rule = batch_rules.get(prim)
                if rule is None:
                    out, out_dim = loop_batch(prim, vals, dims, self.axis_size, params)
                else:
                    out, out_dim = rule(vals, dims, **params)
            finally:
                _rule_axis.name = prev
        if prim.multiple_results:
            return [self.pack(o, d) for o, d in zip(out, out_dim)]
        return self.pack(out, out_dim)

    def pack(self, val, bdim):
        return val if bdim is None else BatchTracer(self, val, bdim)


def _names_axis(params: dict, name) -> bool:
    """Whether a sub-jaxpr in `params` (a higher-order primitive's) has a collective
    over the axis `name`."""
    from fnad.ir import ClosedJaxpr, Jaxpr

    def jaxprs(v):
        if isinstance(v, ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, Jaxpr):
            yield v
        elif isinstance(v, (tuple, list)):
            for u in v:
                yield from jaxprs(u)

    def names(j) -> bool:
        for eqn in j.eqns:
            if eqn.primitive in collective_rules and name in eqn.params["axis_name"]:
                return True
            if any(names(sub) for p in eqn.params.values() for sub in jaxprs(p)):
                return True
        return False
    return any(names(j) for v in params.values() for j in jaxprs(v))


def _broadcast_first(prim, vals, dims, size: int, name):
    """Operands with the first one batched (broadcast), so that the primitive's batching
    rule runs and batches its sub-jaxprs' collectives over `name`."""
    if not vals:
        raise NotImplementedError(f"vmap: '{prim.name}' without operands holds a collective "
                                  f"over the axis {name!r}; give it an operand")
    shape = get_aval(vals[0]).shape
    from fnad.primitives.shape_ops import broadcast_in_dim
    first = broadcast_in_dim(vals[0], (size,) + shape, tuple(range(1, len(shape) + 1)))
    return (first,) + tuple(vals[1:]), (0,) + tuple(dims[1:])


# ---- vmap --------------------------------------------------------------------------------------
def _name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _check_axis_spec(where: str, ax):
    if ax is not None and not (isinstance(ax, (int, np.integer)) and not isinstance(ax, bool)):
        raise TypeError(f"vmap {where} must be an int, None, or a (nested) tuple/list/dict "
                        f"of those matching the arguments; got {ax!r}")


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name=None,
         axis_size: int | None = None, spmd_axis_name=None) -> Callable:
    """Vectorize `fun` over the axes `in_axes` of its positional arguments.

    `in_axes` is an int, None (not mapped), or a pytree prefix of the argument tuple of
    those; `out_axes` likewise for the outputs. Keyword arguments are mapped over
    axis 0. `axis_size` is needed only when no argument is mapped. `axis_name` names
    the mapped axis for the collectives of fnad.lax (psum, pmean, all_gather, axis_index
    ...) inside `fun`; `spmd_axis_name` is accepted and ignored (it places the axis on
    devices of a mesh, which fnad does not have).
    """
    if not callable(fun):
        raise TypeError(f"vmap: expected a callable value, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)                      # a list at the top level means a tuple
    if not (in_axes is None or isinstance(in_axes, tuple) or
            isinstance(in_axes, (int, np.integer)) and not isinstance(in_axes, bool)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries "
                        "corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes!r}.")
    for ax in tree_util.tree_leaves(in_axes, is_leaf=lambda x: x is None):
        _check_axis_spec("in_axes", ax)
    for ax in tree_util.tree_leaves(out_axes, is_leaf=lambda x: x is None):
        _check_axis_spec("out_axes", ax)

    @functools.wraps(fun)
    def vmapped(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        try:
            axes = tree_util.broadcast_prefix(in_axes, args, is_leaf=lambda x: x is None)
            axes += [0] * len(tree_util.tree_leaves(kwargs))   # keywords: mapped on axis 0
        except ValueError as e:
            raise ValueError(f"vmap in_axes specification must be a tree prefix of the "
                             f"arguments of {_name(fun)}: {e}") from None
        axes = _key_axes(axes, tree_util.tree_leaves((args, kwargs), is_leaf=is_key_array),
                         lambda key: key.ndim, "in_axes")
        axes = [_normalize_axis(ax, x, i) for i, (ax, x) in enumerate(zip(axes, flat))]
        size = _axis_size(fun, flat, axes, axis_size)
        trace = BatchTrace(core.current_trace(), size, f"vmap of {_name(fun)}",
                           axis_name=axis_name)
        flat_fun, out_tree = flatten_fun(fun, in_tree)
        tracers = [x if ax is None else BatchTracer(trace, x, ax) for x, ax in zip(flat, axes)]
        with core.new_trace(trace):
            outs = flat_fun(*tracers)
            pairs = [trace.val_bdim(o) for o in outs]
        tree = out_tree[0]
        try:
            out_specs = tree_util.broadcast_prefix(out_axes, tree_util.tree_unflatten(
                tree, [0] * tree.num_leaves), is_leaf=lambda x: x is None)
        except ValueError as e:
            raise ValueError(f"vmap out_axes specification must be a tree prefix of the "
                             f"outputs of {_name(fun)}: {e}") from None
        owners = tree_util.tree_leaves(tree_util.tree_unflatten(tree, range(len(pairs))),
                                       is_leaf=is_key_array)        # keys over leaf numbers
        out_specs = _key_axes(out_specs, owners, lambda key: _key_rank(*pairs[key._base]),
                              "out_axes")
        results = [_place_output(v, d, ax, size, _name(fun)) for (v, d), ax in
                   zip(pairs, out_specs)]
        return tree_util.tree_unflatten(tree, results)

    return vmapped


def pmap(fun: Callable, axis_name=None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | tuple[int, ...] = (), devices=None,
         backend: str | None = None, axis_size: int | None = None,
         donate_argnums: int | tuple[int, ...] = ()) -> Callable:
    """jax.pmap on one device: `fun` mapped over the axes `in_axes` as by
    `vmap(..., axis_name=axis_name)` (so the collectives of fnad.lax work over it), under
    `jit`. fnad has one device per backend, so the members run vectorized, not one per
    device, and the mapped size is not limited by a device count. `in_axes` has an entry
    per positional argument (or one for all); those of `static_broadcasted_argnums` are
    ignored: these arguments are static (hashable) and passed whole to every member.
    Keyword arguments are mapped over their axis 0, as in JAX."""
    from fnad.jit import _as_tuple, jit
    if devices is not None:
        raise NotImplementedError("pmap: fnad runs a pmap on one device (vectorized); "
                                  "devices= cannot be honoured")
    static = _as_tuple(static_broadcasted_argnums, "static_broadcasted_argnums", int)
    in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes

    def run(*args, **kwargs):
        n = len(args)
        fixed = {i % n for i in static} if n else set()
        dyn = [i for i in range(n) if i not in fixed]
        if isinstance(in_axes, tuple):
            if len(in_axes) != n:
                raise ValueError(f"pmap in_axes must have one entry per positional "
                                 f"argument: got {len(in_axes)} entries for {n} arguments")
            axes = tuple(in_axes[i] for i in dyn)
        else:
            axes = in_axes

        def body(*dyn_args, **kw):
            full = list(args)
            for i, a in zip(dyn, dyn_args):
                full[i] = a
            return fun(*full, **kw)
        body.__name__ = getattr(fun, "__name__", "fun")
        return vmap(body, in_axes=axes, out_axes=out_axes, axis_name=axis_name,
                    axis_size=axis_size)(*[args[i] for i in dyn], **kwargs)
    run.__name__ = f"pmap({getattr(fun, '__name__', 'fun')})"
    run.__doc__ = getattr(fun, "__doc__", None)
    return jit(run, static_argnums=static, backend=backend, donate_argnums=donate_argnums)


def _key_axes(axes: list, owners: list, rank: Callable, what: str) -> list:
    """`axes` (one per leaf) with the axis of each typed PRNG key array's base counted in
    the key's own dims: a negative axis of a key of rank n maps its dim n + axis, which in
    the base (one trailing dim more) is that same nonnegative number. `owners` are the
    leaves with key arrays as leaves (one base leaf each), `rank(key)` a key's rank in the
    mapped result."""
    if not any(map(is_key_array, owners)):
        return axes
    out = list(axes)
    for i, (ax, owner) in enumerate(zip(axes, owners)):
        if ax is None or not is_key_array(owner):
            continue
        n = rank(owner)
        if not -n <= ax < n:
            raise ValueError(f"vmap {what}={ax} is out of range for a key array of rank "
                             f"{n if what == 'in_axes' else n - 1}")
        out[i] = int(ax) % n
    return out


def _key_rank(val, bdim) -> int:
    """The rank of a mapped key output whose base is `val` (batched at `bdim`)."""
    return get_aval(val).ndim - (bdim is not None)


def _normalize_axis(ax, x, i: int):
    if ax is None:
        return None
    nd = get_aval(x).ndim
    if not -nd <= ax < nd:
        raise ValueError(f"vmap was asked to map over axis {ax} of argument leaf {i} with "
                         f"shape {get_aval(x).shape} (rank {nd}); the axis must be in "
                         f"range({-nd}, {nd})" + ("" if nd else " — a scalar cannot be "
                                                   "mapped: pass None for it in in_axes"))
    return int(ax) % nd


def _axis_size(fun, flat, axes, axis_size):
    sizes = {get_aval(x).shape[ax] for x, ax in zip(flat, axes) if ax is not None}
    if axis_size is not None:
        sizes.add(int(axis_size))
    if not sizes:
        raise ValueError(f"vmap of {_name(fun)}: no argument is mapped (in_axes is None for "
                         "every leaf) and axis_size is not given, so the batch size is "
                         "unknown")
    if len(sizes) > 1:
        detail = ", ".join(f"leaf {i} has size {get_aval(x).shape[ax]} along axis {ax}"
                           for i, (x, ax) in enumerate(zip(flat, axes)) if ax is not None)
        extra = f"; axis_size={axis_size}" if axis_size is not None else ""
        raise ValueError(f"vmap got inconsistent sizes for the mapped axis: {detail}{extra}")
    return sizes.pop()


def _place_output(val, bdim, out_axis, size: int, name: str):
    from fnad.primitives.shape_ops import broadcast_in_dim
    if bdim is None:
        try:
            get_aval(val)
        except TypeError:
            raise TypeError(f"vmap of {name} returned {val!r} of type {type(val).__name__}, "
                            "which is not a valid fnad array: the outputs of a vmapped "
                            "function must be arrays (or Python scalars)") from None
    if out_axis is None:
        if bdim is not None:
            raise ValueError(f"vmap of {name} has an output that depends on the mapped axis, "
                             "but out_axes is None for it")
        return val
    nd = get_aval(val).ndim + (bdim is None)          # the rank of the mapped output
    if not -nd <= out_axis < nd:
        raise ValueError(f"vmap out_axes={out_axis} is out of range for an output of rank "
                         f"{nd - 1}")
    if bdim is None:                                  # the same for every member: broadcast
        shape = get_aval(val).shape
        pos = out_axis % nd
        out_shape = shape[:pos] + (size,) + shape[pos:]
        dims = tuple(i for i in range(nd) if i != pos)
        return broadcast_in_dim(val, out_shape, dims)
    return moveaxis(val, bdim, out_axis % nd)


def batch_jaxpr(closed, axis_size: int, in_batched, out_instantiate):
    """vmap of a ClosedJaxpr (no consts) with batch axes at 0, as a new ClosedJaxpr.

    `in_batched[i]`: input i carries a leading batch axis. Outputs are batched along
    axis 0 where they depend on a batched input or `out_instantiate` says so (an
    unbatched output is then broadcast). Returns (batched_closed, out_batched).
    """
    from fnad.primitives.shape_ops import broadcast_in_dim
    from fnad.tracing import trace_to_subjaxpr
    from fnad.ir import eval_jaxpr
    jaxpr = closed.jaxpr
    n_out = len(jaxpr.outvars)
    inst = [out_instantiate] * n_out if isinstance(out_instantiate, bool) \
        else list(out_instantiate)
    box: list = []

    def f(*args):
        trace = BatchTrace(core.current_trace(), axis_size, "vmap of a sub-jaxpr")
        tracers = [BatchTracer(trace, x, 0) if b else x for x, b in zip(args, in_batched)]
        with core.new_trace(trace):
            outs = eval_jaxpr(jaxpr, closed.consts, *tracers)
            pairs = [trace.val_bdim(o) for o in outs]
        out_batched = [d is not None or i for (_, d), i in zip(pairs, inst)]
        box.append(out_batched)
        res = []
        for (v, d), b in zip(pairs, out_batched):
            if d is not None:
                res.append(moveaxis(v, d, 0))
            elif b:
                shape = get_aval(v).shape
                res.append(broadcast_in_dim(v, (axis_size,) + shape,
                                            tuple(range(1, len(shape) + 1))))
            else:
                res.append(v)
        return res

    avals = [core.ShapedArray((axis_size,) + a.shape, a.dtype, a.weak_type) if b else a
             for a, b in zip(closed.in_avals, in_batched)]
    out, consts = trace_to_subjaxpr(f, avals, "vmap of a sub-jaxpr")
    assert not consts, "a sub-jaxpr's batched version closes over nothing"
    return out, box[0]

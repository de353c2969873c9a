"""fnad.tracing: staging Python functions into jaxprs (`make_jaxpr`, `eval_shape`).

Owns JaxprTrace, the trace that records equations instead of running them. In
`forward_known` mode it is partial evaluation on the fly: an equation none of
whose inputs are this trace's tracers runs now on the parent trace ("known"),
and only the rest is staged. `linearize` stages the tangent half of a JVP this
way, with the primal values as the known residuals.
"""
from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fnad import core, tree_util
from fnad.config import config
from fnad.core import Array, ShapedArray, Tracer, abstract_eval, get_aval
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var


class JaxprTracer(Tracer):
    """A staged value: a Var of the jaxpr under construction."""

    __slots__ = ("aval", "jaxpr_var", "_where")

    def __init__(self, trace: JaxprTrace, aval: ShapedArray, var: Var, where: str | None):
        self._trace = trace
        self.aval = aval
        self.jaxpr_var = var               # not `var`: that is the array method x.var()
        self._where = where


class JaxprTrace(core.Trace):
    """Records each primitive application as a JaxprEqn."""

    def __init__(self, parent: core.Trace, description: str, *, forward_known: bool = False):
        super().__init__(parent, description)
        self.forward_known = forward_known
        self.eqns: list[JaxprEqn] = []
        self.invars: list[Var] = []
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self._const_ids: dict[int, Var] = {}

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, aval, var, self.where)

    def is_mine(self, x) -> bool:
        return isinstance(x, JaxprTracer) and x._trace is self

    def to_atom(self, x):
        """The Var or Literal standing for `x` in this jaxpr."""
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x.jaxpr_var
        if isinstance(x, Tracer):
            self.check_foreign(x)          # an ancestor's tracer: a constant here
        elif type(x) in core._scalar_types or (
                isinstance(x, (np.ndarray, np.generic)) and np.ndim(x) == 0):
            aval = get_aval(x)
            return Literal(x if type(x) in core._scalar_types
                           else np.asarray(x, aval.dtype)[()], aval)
        elif type(x) is Array and not x.shape:
            return Literal(np.asarray(x)[()], x.aval)
        var = self._const_ids.get(id(x))
        if var is None:   # constvals keeps x alive, so its id is not reused meanwhile
            var = self._const_ids[id(x)] = Var(get_aval(x))
            self.constvars.append(var)
            self.constvals.append(x)
        return var

    def process_primitive(self, prim, args, params):
        if config.jax_eager_constant_folding and \
                not any(isinstance(x, Tracer) for x in args):
            with core.set_current_trace(core.eval_trace):     # ensure_compile_time_eval
                return prim.bind(*args, **params)
        if self.forward_known:
            for x in args:
                if isinstance(x, JaxprTracer) and x._trace is self:
                    break
            else:                                   # none of the inputs is staged: known
                with core.set_current_trace(self.parent):
                    return prim.bind(*args, **params)
            rule = core.partial_eval_rules.get(prim)
            if rule is not None:
                return rule(self, args, params)
        return self.stage(prim, args, params)

    def stage(self, prim, args, params):
        """Record `prim(*args)` as an equation and return its output tracer(s)."""
        in_avals = []
        all_mine = True                             # every input a tracer of this trace
        for x in args:
            if type(x) is JaxprTracer and x._trace is self:
                in_avals.append(x.aval)
            else:
                in_avals.append(get_aval(x))
                all_mine = False
        out_avals = abstract_eval(prim, in_avals, params)
        invars = [x.jaxpr_var for x in args] if all_mine else [self.to_atom(x) for x in args]
        where = core.user_frame()
        if not prim.multiple_results:
            aval, = out_avals
            var = Var(aval)
            self.eqns.append(JaxprEqn(prim, invars, params, [var], where))
            return JaxprTracer(self, aval, var, where)
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(prim, invars, params, outvars, where))
        return [JaxprTracer(self, a, v, where) for a, v in zip(out_avals, outvars)]

    def to_jaxpr(self, outs: Sequence) -> ClosedJaxpr:
        """The staged program from this trace's args to `outs` (constants inlined)."""
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, self.eqns, outvars)
        return ClosedJaxpr(jaxpr, self.constvals)


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                   description: str) -> ClosedJaxpr:
    """Stage `fun(*flat_args) -> flat outputs` at `in_avals` into a ClosedJaxpr."""
    trace = JaxprTrace(core.current_trace(), description)
    args = [trace.new_arg(a) for a in in_avals]
    with core.new_trace(trace):
        outs = fun(*args)
        return trace.to_jaxpr(outs)


def trace_to_subjaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                      description: str) -> tuple[ClosedJaxpr, list]:
    """Stage `fun` for use inside a higher-order primitive (cond, scan, custom rules, remat).

    Returns (closed, consts): `closed` has no constants of its own; its first
    `len(consts)` invars stand for `consts` (values `fun` closed over, possibly tracers
    of enclosing traces), which the caller passes as explicit operands so that every
    transformation sees them.
    """
    trace = JaxprTrace(core.current_trace(), description)
    args = [trace.new_arg(a) for a in in_avals]
    with core.new_trace(trace):
        outs = fun(*args)
        closed = trace.to_jaxpr(outs)
    jaxpr = closed.jaxpr
    hoisted = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(hoisted, []), list(closed.consts)


def flatten_fun(fun: Callable, in_tree) -> tuple[Callable, list]:
    """`fun` on pytrees as a function of flat leaves; the out treedef lands in the list."""
    out_tree_box: list = []

    def flat_fun(*flat_args):
        args, kwargs = tree_util.tree_unflatten(in_tree, flat_args)
        out = fun(*args, **kwargs)
        leaves, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return leaves

    return flat_fun, out_tree_box


def flatten_fun_nokwargs(fun: Callable, in_tree) -> tuple[Callable, list]:
    """Like flatten_fun, for `in_tree` the treedef of the positional args tuple."""
    out_tree_box: list = []

    def flat_fun(*flat_args):
        out = fun(*tree_util.tree_unflatten(in_tree, flat_args))
        leaves, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        return leaves

    return flat_fun, out_tree_box


def shaped_abstractify(x) -> ShapedArray:
    """An aval for an argument: arrays, Python scalars, ShapeDtypeStructs."""
    if isinstance(x, core.ShapeDtypeStruct):
        return ShapedArray(x.shape, core.dtypes.canonicalize_dtype(x.dtype), x.weak_type)
    if isinstance(x, ShapedArray):
        return x
    return get_aval(x)


class _AxisFrame(core.Trace):
    """Named axes for make_jaxpr(..., axis_env=...): the collectives find `axis_name`
    and `axis_size` on it, as on a vmap's BatchTrace; it maps nothing (staging happens
    in the JaxprTrace above it)."""

    def __init__(self, parent: core.Trace, axis_name, axis_size: int):
        super().__init__(parent, f"axis {axis_name!r}")
        self.axis_name, self.axis_size = axis_name, axis_size

    def process_primitive(self, prim, args, params):
        with core.set_current_trace(self.parent):
            return prim.bind(*args, **params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Inside the block, operations whose operands are all concrete (no tracer among them)
    run at once, even while jit, scan or make_jaxpr trace, so their results are concrete
    values usable in Python control flow (jax.ensure_compile_time_eval); operations on
    tracers are staged as usual."""
    with config.override(jax_eager_constant_folding=True):
        yield


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple] | None = None,
               return_shape: bool = False) -> Callable:
    """`make_jaxpr(f)(*args)` stages `f` at the shapes of `args` into a ClosedJaxpr.

    Printing the result shows the program fnad's transformations see, as JAX does.
    `axis_env`: (name, size) pairs of named axes that collectives in `f` may use, as if
    `f` ran under vmaps binding them.
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    frames = [(name, operator.index(size)) for name, size in (axis_env or ())]

    @functools.wraps(fun)
    def make_jaxpr_f(*args, **kwargs):
        nargs = len(args)
        static_pos = {i % nargs for i in static} if nargs else set()
        dyn = [a for i, a in enumerate(args) if i not in static_pos]

        def f_dyn(*dyn_args, **kw):
            it = iter(dyn_args)
            full = [args[i] if i in static_pos else next(it) for i in range(nargs)]
            return fun(*full, **kw)

        flat, in_tree = tree_util.tree_flatten((tuple(dyn), kwargs))
        flat_fun, out_tree = flatten_fun(f_dyn, in_tree)
        name = getattr(fun, "__name__", "fun")
        avals = [shaped_abstractify(x) for x in flat]
        outer = core.current_trace()
        for axis_name, size in frames:
            outer = _AxisFrame(outer, axis_name, size)
        with core.set_current_trace(outer):
            closed = trace_to_jaxpr(flat_fun, avals, f"make_jaxpr of {name}")
        if return_shape:
            shapes = [core.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                      for a in closed.out_avals]
            return closed, tree_util.tree_unflatten(out_tree[0], shapes)
        return closed

    return make_jaxpr_f


def typeof(x) -> core.ShapedArray:
    """The abstract value (shape, dtype, weak type) of an array, tracer or Python scalar,
    as `jax.typeof`."""
    return core.get_aval(x)


def eval_shape(fun: Callable, *args, **kwargs):
    """The shapes and dtypes `fun(*args)` would return, without computing anything."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    flat_fun, out_tree = flatten_fun(fun, in_tree)
    closed = trace_to_jaxpr(flat_fun, [shaped_abstractify(x) for x in flat],
                            f"eval_shape of {getattr(fun, '__name__', 'fun')}")
    shapes = [core.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
              for a in closed.out_avals]
    return tree_util.tree_unflatten(out_tree[0], shapes)


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """jax.named_call: in JAX, names `fun`'s operations in profiles and HLO. fnad's
    programs carry no name stack, so this returns a function that calls `fun`."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a str, got {type(name).__name__}")

    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    return named


class named_scope:
    """jax.named_scope(name): a context manager that, in JAX, prefixes the names of the
    operations staged inside. fnad's programs carry no name stack: it only checks that
    `name` is a str, so code written for JAX runs unchanged."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise TypeError(f"named_scope: name must be a str, got {type(name).__name__}")
        self.name = name

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False

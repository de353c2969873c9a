"""fnad.experimental.checkify: functionalized runtime checks, as jax.experimental.checkify.

`checkify(f, errors)` traces `f` to a jaxpr and re-runs it equation by equation, binding each
primitive normally and threading an error state through it: a flag and a code per slot
(one per kind of error and payload types, as jax) and a payload per check site. A slot keeps
the first failure that reaches it; the error reported is that of the failed slot whose site
comes first in the program (jax's rule, which in loops need not be the first in time).
`g = checkify(f)` is a pure function of arrays, so
jit, vmap and grad of `g` work. Error sets are frozensets of error classes, combined with
`|` and `-`: `user_checks`, `nan_checks`, `div_checks`, `index_checks`, `float_checks`,
`automatic_checks`, `all_checks`.

Supported: `check` (eager: raises JaxRuntimeError at once; staged without checkify: the
"not functionalized" ValueError at trace time, as jax), NaNs made by any primitive, integer
div/rem by zero, out-of-bounds start indices of dynamic_slice / dynamic_update_slice (fnad's
`x[i]` lowers to dynamic_slice), gather and the scatters (`x[idx]`, `x.at[idx]...`, in
every mode, as jax); checks inside cond/switch branches, scan bodies, while_loop's body
and cond_fun, jit, checkpoint, custom_jvp/custom_vjp functions, and under vmap/grad/jvp
inside the checkified function. Messages are
jax's, "at mapped index i: ..." lines included.
Differences from jax / not supported:
- custom_jvp and custom_vjp bodies are checked, their rules kept for the derivatives (a
  `check` the rule itself runs is dropped: the checked body reports it);
- (as jax) a `check` under vmap *inside* the checkified function reports one member, the
  last failing one; vmap *of* the checkified function reports every failing member;
- format arguments may be Python scalars (jax asks for arrays);
- a jit function first traced inside checkify keeps its staged `check` in jit's cache;
  calling it later outside checkify checks eagerly (JaxRuntimeError when the check fails)
  where jax raises the "not functionalized" ValueError.
"""
from __future__ import annotations

import functools

import numpy as np

import fnad.numpy as jnp
from fnad import core, tree_util
from fnad.core import Primitive, abstract_eval_rules, get_aval
from fnad.ir import ClosedJaxpr, Jaxpr, Var
from fnad.tracing import flatten_fun, trace_to_jaxpr, trace_to_subjaxpr

__all__ = ["JaxRuntimeError", "check", "checkify", "Error", "user_checks", "nan_checks",
           "div_checks", "index_checks", "float_checks", "automatic_checks", "all_checks",
           "FailedCheckError", "NaNError", "DivisionByZeroError", "OOBError"]


class JaxRuntimeError(ValueError):
    """A failed check (`check` called eagerly, or `Error.throw`)."""


class FailedCheckError:
    """A user `check` failed."""


class NaNError:
    """A primitive produced a NaN from inputs without NaNs."""


class DivisionByZeroError:
    """Integer division (or remainder) by zero."""


class OOBError:
    """An out-of-bounds index."""


user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
div_checks = frozenset({DivisionByZeroError})
index_checks = frozenset({OOBError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# ---- check -------------------------------------------------------------------------------
check_p = Primitive("check", multiple_results=True)
_functionalizing = [0]      # > 0 while checkify traces a function: `check` may be staged
_dropping = [0]             # > 0 while a custom rule runs for checkify: `check` is a no-op


def _check_abstract_eval(*avals, msg, fmt_tree):
    if not _functionalizing[0]:
        raise ValueError("Cannot abstractly evaluate a checkify.check which was not "
                         "functionalized. This probably means you tried to stage "
                         "(jit/scan/pmap/...) a `check` without functionalizing it through "
                         "`checkify.checkify`.")
    return []


abstract_eval_rules[check_p] = _check_abstract_eval
core.effectful_primitives.add(check_p)     # no outputs: DCE must keep it


def _check_eager(pred, *fmt_values, msg, fmt_tree):
    pred = np.asarray(pred)
    if not pred.all():
        k = _last_failure(pred.ravel())
        raise JaxRuntimeError(_format(msg, fmt_tree, [_member(v, pred.ndim, k)
                                                      for v in fmt_values]))
    return []


core.eager_rules[check_p] = _check_eager


# Under vmap, `check` is bound with the batch axes leading: pred has shape `batch`, each
# format argument `batch + its own shape`. A failure reports one member, the last failing
# one in row-major order, as jax does.
def _last_failure(flat_pred):
    """The index of the last False in the 1-D `flat_pred` (numpy or traced)."""
    xp = np if isinstance(flat_pred, np.ndarray) else jnp
    n = flat_pred.shape[0]
    return n - 1 - xp.argmax(xp.logical_not(flat_pred)[::-1])


def _member(v, nbatch, k):
    """Member `k` (row-major over the `nbatch` leading batch axes) of format argument `v`."""
    if not nbatch:
        return v
    shape = get_aval(v).shape
    xp = np if isinstance(v, np.ndarray) else jnp
    return xp.reshape(v, (-1,) + tuple(shape[nbatch:]))[k]


def _check_jvp(primals, tangents, **params):
    check_p.bind(*primals, **params)    # a check has no outputs, so no tangents
    return [], []


core.jvp_rules[check_p] = _check_jvp


def _check_batch(vals, dims, **params):
    from fnad.primitives._batching import moveaxis
    from fnad.primitives.shape_ops import broadcast_in_dim
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    front = []
    for v, d in zip(vals, dims):
        if d is None:
            shape = get_aval(v).shape
            v = broadcast_in_dim(v, (size,) + shape, tuple(range(1, len(shape) + 1)))
        else:
            v = moveaxis(v, d, 0)
        front.append(v)
    check_p.bind(*front, **params)
    return [], []


core.batch_rules[check_p] = _check_batch


def _format(msg, fmt_tree, values) -> str:
    args, kwargs = tree_util.tree_unflatten(fmt_tree, [np.asarray(v) for v in values])
    return msg.format(*args, **kwargs) + " (`check` failed)"


def check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Check that the boolean scalar `pred` holds, else fail with `msg.format(*fmt_args, ...)`.

    Called eagerly with a concrete `pred`, raises JaxRuntimeError at once; traced, it must be
    functionalized by `checkify` (staging it otherwise raises ValueError, as jax).
    """
    try:
        aval = get_aval(pred)
    except TypeError:
        aval = None
    if aval is None or aval.shape != () or not np.issubdtype(aval.dtype, np.bool_):
        raise TypeError(f"check takes a scalar pred as argument, got {pred}")
    if not isinstance(msg, str):
        raise TypeError(f"check: msg must be a string, got {type(msg).__name__}")
    leaves, fmt_tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for leaf in leaves:
        try:
            get_aval(leaf)
        except TypeError:
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {leaf!r} of type {type(leaf)}.") from None
    if _dropping[0]:                # the checked body already reports this call's checks
        return
    if core.current_trace() is core.eval_trace and \
            not any(isinstance(x, core.Tracer) for x in [pred, *leaves]):
        if not bool(np.asarray(pred)):
            raise JaxRuntimeError(_format(msg, fmt_tree, leaves))
        return
    check_p.bind(pred, *leaves, msg=msg, fmt_tree=fmt_tree)


# ---- the error value ---------------------------------------------------------------------
class Error:
    """checkify's error value: `get()` the first failure's message (or None), `throw()` it.

    A pytree of arrays: per error slot a flag and the code of the site that set it, then
    every site's payload. As in jax, each kind of error with its payload's types has its
    own slot, which keeps the first failure that reached it; `get()` reports the failed
    slot whose site comes first in the program. Under vmap the leaves carry the batch axes
    and `get()` reports every failing index, one line each ("at mapped index i: ...").
    """

    def __init__(self, leaves, layout):
        self._leaves, self._layout = list(leaves), layout      # layout: (sites, slots)

    def get(self) -> str | None:
        """The message of the first failed check, or None when every check passed."""
        if any(isinstance(x, core.Tracer) for x in self._leaves):
            raise ValueError("checkify Error.get() needs concrete values; call it outside "
                             "jit/vmap/grad (return the Error from the transformed function)")
        sites, slots = self._layout
        if not slots:
            return None
        flags = np.stack([np.asarray(f) for f in self._leaves[0:2 * slots:2]])
        codes = np.stack([np.asarray(c) for c in self._leaves[1:2 * slots:2]])
        codes = np.where(flags, codes, np.iinfo(np.int32).max)
        first, failed = codes.min(axis=0), flags.any(axis=0)
        payloads = self._leaves[2 * slots:]

        def message(idx) -> str:
            site = sites[int(first[idx])]
            return site.render([np.asarray(p)[idx] for p in payloads[site.start:site.stop]])
        if failed.ndim:
            return "\n".join(f"at mapped index {', '.join(map(str, h))}: "
                             + message(tuple(h)) for h in np.argwhere(failed)) or None
        return message(()) if failed else None

    def throw(self) -> None:
        """Raise JaxRuntimeError with the first failure's message, if any."""
        m = self.get()
        if m is not None:
            raise JaxRuntimeError(m)

    def __repr__(self):
        traced = any(isinstance(x, core.Tracer) for x in self._leaves)
        return f"Error({'<traced>' if traced else self.get()})"


tree_util.register_pytree_node(Error, lambda e: (tuple(e._leaves), e._layout),
                               lambda layout, leaves: Error(leaves, layout))


class _Site:
    """One place that can fail: a message template and its payload slots."""

    def __init__(self, kind, render, avals):
        self.kind, self.render, self.avals = kind, render, avals
        self.start = self.stop = 0


# ---- which equations can fail ------------------------------------------------------------
_CALLS = ("jit", "checkpoint")
_INDEX_PRIMS = {"dynamic_slice": 1, "dynamic_update_slice": 2}   # first index operand
_GATHER_SCATTER = ("gather", "scatter", "scatter_add", "scatter_mul", "scatter_min",
                   "scatter_max")


def _is_float(aval):
    return np.issubdtype(aval.dtype, np.inexact)


def _sub_closed(eqn):
    p = eqn.params
    name = eqn.primitive.name
    if name == "cond":
        return list(p["branches"])
    if name == "scan":
        return [p["jaxpr"]]
    if name == "while":
        return [p["cond_jaxpr"], p["body_jaxpr"]]
    if name in _CALLS:
        return [p["jaxpr"]]
    if name in ("custom_jvp_call", "custom_vjp_call"):
        return [p["call_jaxpr"]]
    return []


def _collect(jaxpr: Jaxpr, errors, sites: dict, order: list) -> None:
    """Give every equation of `jaxpr` (and its sub-jaxprs) that can fail its _Site(s)."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        mine = []
        if name == "check":
            if FailedCheckError in errors:
                msg, tree = eqn.params["msg"], eqn.params["fmt_tree"]
                nb = eqn.invars[0].aval.ndim        # batch axes of a check under vmap
                mine.append(_Site(FailedCheckError, functools.partial(_format, msg, tree),
                                  [core.ShapedArray(v.aval.shape[nb:], v.aval.dtype)
                                   for v in eqn.invars[1:]]))
        if name in ("div", "rem") and DivisionByZeroError in errors and \
                np.issubdtype(eqn.invars[1].aval.dtype, np.integer):
            mine.append(_Site(DivisionByZeroError, lambda v: "division by zero", []))
        if OOBError in errors and (name in _INDEX_PRIMS or (
                name in _GATHER_SCATTER and np.prod(eqn.invars[1].aval.shape) > 0)):
            shape = tuple(eqn.invars[0].aval.shape)
            i32 = core.ShapedArray((), np.dtype(np.int32))
            mine.append(_Site(OOBError, functools.partial(_oob_msg, shape), [i32, i32, i32]))
        if NaNError in errors and name != "check" and \
                any(_is_float(v.aval) for v in eqn.outvars):
            mine.append(_Site(NaNError, lambda v, n=name: f"nan generated by primitive: {n}.",
                              []))
        if mine:
            sites[id(eqn)] = mine
            order.extend(mine)
        for sub in _sub_closed(eqn):
            _collect(sub.jaxpr, errors, sites, order)


def _oob_msg(shape, values):
    idx, axis, size = (int(v) for v in values)
    return (f"out-of-bounds indexing for array of shape {shape}: index {idx} is out of "
            f"bounds for axis {axis} with size {size}. ")


# ---- the interpreter ---------------------------------------------------------------------
class _State:
    """The error state threaded through the interpreter, as a flat list of arrays."""

    def __init__(self, ctx, flat):
        self.ctx, self.flat = ctx, list(flat)

    def record(self, site, failed, payload):
        """The first failure reaching `site`'s slot stays: where the slot is clear and
        `failed`, it takes `site`'s code and payload."""
        f, c, base = 2 * site.slot, 2 * site.slot + 1, 2 * self.ctx.slots
        flag = self.flat[f]
        new = jnp.logical_and(failed, jnp.logical_not(flag))
        self.flat[f] = jnp.logical_or(flag, failed)
        self.flat[c] = jnp.where(new, jnp.int32(site.code), self.flat[c])
        for k, v in zip(range(base + site.start, base + site.stop), payload):
            self.flat[k] = jnp.where(new, jnp.asarray(v).astype(self.flat[k].dtype),
                                     self.flat[k])


class _Ctx:
    """The sites (by equation), their codes (program order, as jax numbers them), slots
    (one per error kind and payload types) and the error state's avals."""

    def __init__(self, sites, order):
        self.sites, self.order = sites, order
        slot_of, payload_avals = {}, []
        for code, s in enumerate(order):
            key = (s.kind, tuple((a.shape, a.dtype) for a in s.avals))
            s.code, s.slot = code, slot_of.setdefault(key, len(slot_of))
            s.start = len(payload_avals)
            payload_avals.extend(s.avals)
            s.stop = len(payload_avals)
        self.slots = len(slot_of)
        self.avals = [core.ShapedArray((), np.dtype(t)) for _ in range(self.slots)
                      for t in (np.bool_, np.int32)] + payload_avals

    def init(self):
        return [jnp.zeros(a.shape, a.dtype) for a in self.avals]


def _interpret(ctx, jaxpr: Jaxpr, consts, err: list, args) -> tuple[list, list]:
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    state = _State(ctx, err)
    for eqn in jaxpr.eqns:
        ins = [env[v] if type(v) is Var else v.val for v in eqn.invars]
        mine = ctx.sites.get(id(eqn), [])
        with core.eqn_source(eqn.source_info):
            outs = _bind(ctx, state, eqn, ins, mine)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        env.update(zip(eqn.outvars, outs))
    return state.flat, [env[v] if type(v) is Var else v.val for v in jaxpr.outvars]


def _has_sites(ctx, closed) -> bool:
    """Whether `closed` must be rewritten: it has check sites, or `check`s to drop."""
    return any(id(e) in ctx.sites or e.primitive.name == "check"
               or any(_has_sites(ctx, s) for s in _sub_closed(e)) for e in closed.jaxpr.eqns)


def _wrap(ctx, closed, description="checkify"):
    """`closed` as a sub-jaxpr (err, *ins) -> (err, *outs), plus the consts it closes over."""
    n = len(ctx.avals)

    def fun(*a):
        e, o = _interpret(ctx, closed.jaxpr, closed.consts, list(a[:n]), a[n:])
        return [*e, *o]
    return trace_to_subjaxpr(fun, list(ctx.avals) + list(closed.in_avals), description)


def _bind(ctx, state, eqn, ins, mine):
    name, params = eqn.primitive.name, eqn.params
    n = len(ctx.avals)
    if name == "check":
        pred = jnp.asarray(ins[0])
        flat = jnp.reshape(pred, (-1,))
        k = _last_failure(flat) if pred.ndim else None
        for site in mine:
            state.record(site, jnp.logical_not(jnp.all(flat)),
                         [_member(v, pred.ndim, k) for v in ins[1:]])
        return []
    if name in _CALLS and _has_sites(ctx, params["jaxpr"]):
        closed, consts = _wrap(ctx, params["jaxpr"])
        outs = eqn.primitive.bind(*consts, *state.flat, *ins, **dict(params, jaxpr=closed))
        state.flat, outs = list(outs[:n]), outs[n:]
    elif name == "scan" and _has_sites(ctx, params["jaxpr"]):
        nc = params["num_consts"]
        body = params["jaxpr"]
        # body invars: consts, carry, xs -> reorder so the error state leads the carry
        def fun(*a):
            hc, e, rest = a[:nc], a[nc:nc + n], a[nc + n:]
            e2, o = _interpret(ctx, body.jaxpr, body.consts, list(e), [*hc, *rest])
            return [*e2, *o]
        avals = body.in_avals
        closed, consts = trace_to_subjaxpr(fun, [*avals[:nc], *ctx.avals, *avals[nc:]],
                                           "checkify scan body")
        outs = eqn.primitive.bind(*consts, *ins[:nc], *state.flat, *ins[nc:],
                                  **dict(params, jaxpr=closed, num_consts=len(consts) + nc,
                                         num_carry=params["num_carry"] + n))
        state.flat, outs = list(outs[:n]), outs[n:]
    elif name == "while" and (_has_sites(ctx, params["body_jaxpr"])
                              or _has_sites(ctx, params["cond_jaxpr"])):
        # cond_fun's checks run on the initial carry here and on each new carry at the end
        # of the body (as jax does); the loop's own test drops them.
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cj, bj = params["cond_jaxpr"], params["body_jaxpr"]
        state.flat, _ = _interpret(ctx, cj.jaxpr, cj.consts, state.flat,
                                   [*ins[:cn], *ins[cn + bn:]])

        def cond_fun(*a):                       # cond consts, error state, carry
            _, pred = _interpret(ctx, cj.jaxpr, cj.consts, list(a[cn:cn + n]),
                                 [*a[:cn], *a[cn + n:]])
            return pred

        def body_fun(*a):                       # cond consts, body consts, error state, carry
            k = cn + bn
            e, o = _interpret(ctx, bj.jaxpr, bj.consts, list(a[k:k + n]),
                              [*a[cn:k], *a[k + n:]])
            e, _ = _interpret(ctx, cj.jaxpr, cj.consts, e, [*a[:cn], *o])
            return [*e, *o]
        carry_avals = cj.in_avals[cn:]
        cclosed, cconsts = trace_to_subjaxpr(cond_fun, [*cj.in_avals[:cn], *ctx.avals,
                                                        *carry_avals], "checkify cond")
        bclosed, bconsts = trace_to_subjaxpr(
            body_fun, [*cj.in_avals[:cn], *bj.in_avals[:bn], *ctx.avals, *carry_avals],
            "checkify body")
        outs = eqn.primitive.bind(*cconsts, *ins[:cn], *bconsts, *ins[:cn], *ins[cn:cn + bn],
                                  *state.flat, *ins[cn + bn:],
                                  cond_jaxpr=cclosed, body_jaxpr=bclosed,
                                  cond_nconsts=len(cconsts) + cn,
                                  body_nconsts=len(bconsts) + cn + bn)
        state.flat, outs = list(outs[:n]), outs[n:]
    elif name in ("custom_jvp_call", "custom_vjp_call") and \
            _has_sites(ctx, params["call_jaxpr"]):
        outs = _bind_custom(ctx, state, eqn, ins)
    elif name == "cond" and any(_has_sites(ctx, b) for b in params["branches"]):
        wrapped = [_wrap(ctx, b, description="checkify branch") for b in params["branches"]]
        all_consts = [c for _, cs in wrapped for c in cs]
        branches = []
        for i, (closed, cs) in enumerate(wrapped):
            j = closed.jaxpr
            invars = []
            for k, (_, other) in enumerate(wrapped):
                invars += (j.invars[:len(cs)] if k == i
                           else [Var(get_aval(c)) for c in other])
            invars += j.invars[len(cs):]
            branches.append(ClosedJaxpr(Jaxpr([], invars, j.eqns, j.outvars), []))
        outs = eqn.primitive.bind(ins[0], *all_consts, *state.flat, *ins[1:],
                                  branches=tuple(branches))
        state.flat, outs = list(outs[:n]), outs[n:]
    else:
        outs = eqn.primitive.bind(*ins, **params)
    outs_l = outs if eqn.primitive.multiple_results else [outs]
    for site in mine:
        if site.kind is DivisionByZeroError:
            state.record(site, jnp.any(ins[1] == 0), [])
        elif site.kind is OOBError:
            if eqn.primitive.name in _INDEX_PRIMS:
                _record_oob(state, site, eqn, ins)
            else:
                _record_gather_scatter_oob(state, site, eqn, ins)
        elif site.kind is NaNError:
            made = jnp.any(jnp.array([jnp.any(jnp.isnan(o)) for o in outs_l
                                      if _is_float(get_aval(o))]))
            had = [jnp.any(jnp.isnan(x)) for x in ins if _is_float(get_aval(x))]
            if had:
                made = jnp.logical_and(made, jnp.logical_not(jnp.any(jnp.array(had))))
            state.record(site, made, [])
    return outs


def _bind_custom(ctx, state, eqn, ins):
    """A custom_jvp or custom_vjp call whose body can fail, rebound as one taking and
    returning the error state too: its body interpreted with checks; its rule (the JVP rule,
    or fwd with its bwd) the user's for the outputs and derivatives, plus the checked body's
    error state (which has no tangent). The user's rule may call the function again: its
    checks are dropped there (the checked body reports them)."""
    from fnad.core import Zero
    from fnad.custom import _Rule
    params, n = eqn.params, len(ctx.avals)
    nc, call = params["num_consts"], params["call_jaxpr"]
    jvp = eqn.primitive.name == "custom_jvp_call"
    user_rule = params["jvp" if jvp else "fwd"]
    consts = ins[:nc]

    def body(*a):                               # consts, error state, arguments
        e, o = _interpret(ctx, call.jaxpr, call.consts, list(a[nc:nc + n]),
                          [*a[:nc], *a[nc + n:]])
        return [*e, *o]
    closed, extra = trace_to_subjaxpr(
        body, [*call.in_avals[:nc], *ctx.avals, *call.in_avals[nc:]], "checkify custom call")
    no_tangents = [Zero(a.to_tangent_aval()) for a in ctx.avals]

    def run_user(*rule_args):
        _dropping[0] += 1
        try:
            return user_rule(*rule_args)
        finally:
            _dropping[0] -= 1

    def checked_jvp(primals, tangents):         # primals: error state, arguments
        err, args = list(primals[:n]), list(primals[n:])
        e, _ = _interpret(ctx, call.jaxpr, call.consts, err, [*consts, *args])
        outs, t_outs = run_user(args, list(tangents[n:]))
        return [*e, *outs], [*no_tangents, *t_outs]

    def checked_fwd(primals):
        err, args = list(primals[:n]), list(primals[n:])
        e, _ = _interpret(ctx, call.jaxpr, call.consts, err, [*consts, *args])
        outs, res, user_bwd = run_user(args)

        def bwd(res_, cts):                     # no cotangent for the error state
            return [*no_tangents, *user_bwd(res_, list(cts[n:]))]
        return [*e, *outs], res, bwd
    rule = _Rule(checked_jvp if jvp else checked_fwd, user_rule.name, user_rule.home)
    outs = eqn.primitive.bind(
        *extra, *consts, *state.flat, *ins[nc:],
        **dict(params, call_jaxpr=closed, num_consts=len(extra) + nc,
               **{"jvp" if jvp else "fwd": rule}))
    state.flat = list(outs[:n])
    return outs[n:]


def _record_oob(state, site, eqn, ins):
    first = _INDEX_PRIMS[eqn.primitive.name]
    shape = eqn.invars[0].aval.shape
    if eqn.primitive.name == "dynamic_slice":
        sizes = eqn.params["slice_sizes"]
    else:
        sizes = eqn.invars[1].aval.shape
    failed, idx, axis, size = False, 0, 0, 0
    for ax in reversed(range(len(shape))):     # the lowest failing axis wins
        i = jnp.asarray(ins[first + ax]).astype(np.int32)
        bad = jnp.logical_or(i < 0, i + sizes[ax] > shape[ax])
        idx, axis = jnp.where(bad, i, idx), jnp.where(bad, ax, axis)
        size = jnp.where(bad, shape[ax], size)
        failed = jnp.logical_or(bad, failed)
    state.record(site, failed, [idx, axis, size])


def _window_sizes(eqn) -> tuple:
    """The window size along each operand dim of a gather or scatter equation."""
    if eqn.primitive.name == "gather":
        return tuple(eqn.params["slice_sizes"])
    dn = eqn.params["dimension_numbers"]
    updates = eqn.invars[2].aval.shape
    window = iter(dn.update_window_dims)
    return tuple(1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
                 else updates[next(window)] for d in range(eqn.invars[0].aval.ndim))


def _record_gather_scatter_oob(state, site, eqn, ins):
    """A gather's or scatter's start indices (index vector last) must keep each window
    inside the operand, whatever its `mode` (as jax's checkify); the first failing entry,
    row-major, is reported."""
    dn = eqn.params["dimension_numbers"]
    dims = dn.start_index_map if eqn.primitive.name == "gather" \
        else dn.scatter_dims_to_operand_dims
    shape, sizes = eqn.invars[0].aval.shape, _window_sizes(eqn)
    upper = np.array([shape[d] - sizes[d] for d in dims], np.int64)
    idx = jnp.asarray(ins[1]).astype(np.int64)
    bad = jnp.logical_or(idx < 0, idx > upper)          # upper broadcasts on the last dim
    k = jnp.argmax(jnp.reshape(bad, (-1,)))
    axis = jnp.asarray(np.array(dims, np.int32))[k % len(dims)]
    size = jnp.asarray(np.array(shape, np.int32))[axis]
    state.record(site, jnp.any(bad), [jnp.reshape(idx, (-1,))[k], axis, size])


# ---- the user wrapper --------------------------------------------------------------------
def checkify(f, errors=user_checks):
    """`g` with `g(*args) == (err, f(*args))`: `err` (an Error) holds the first failed check.

    `errors` picks what is checked (a set from this module, e.g. `user_checks |
    nan_checks`); `g` is a pure function of arrays, usable under jit, vmap and grad.
    """
    if not isinstance(errors, frozenset) or not all(
            e in (FailedCheckError, NaNError, DivisionByZeroError, OOBError) for e in errors):
        raise TypeError(f"checkify(errors={errors!r}): errors must be a set such as "
                        "checkify.user_checks | checkify.nan_checks")
    name = getattr(f, "__name__", type(f).__name__)

    @functools.wraps(f)
    def checked(*args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        avals = []
        for leaf in flat:
            try:
                avals.append(get_aval(leaf))
            except TypeError:
                raise TypeError(f"checkify of {name}: argument leaf {leaf!r} of type "
                                f"{type(leaf).__name__} is not an array") from None
        flat_fun, out_tree = flatten_fun(f, in_tree)
        _functionalizing[0] += 1
        try:
            closed = trace_to_jaxpr(flat_fun, avals, f"checkify of {name}")
        finally:
            _functionalizing[0] -= 1
        sites, order = {}, []
        _collect(closed.jaxpr, errors, sites, order)
        ctx = _Ctx(sites, order)
        err, outs = _interpret(ctx, closed.jaxpr, closed.consts, ctx.init(), flat)
        return (Error(err, (tuple(order), ctx.slots)),
                tree_util.tree_unflatten(out_tree[0], outs))

    return checked

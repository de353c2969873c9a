"""`compile`: a whole jaxpr lowered to one function of jax values, then one `jax.jit`.

Each equation becomes the jax calls of its primitive's lowering (`impl_rules[p].lower`,
or a user primitive's own jax impl); the higher-order primitives, found by name, become
jax control flow or are inlined:

    cond             lax.switch(index, branches, *ops)   (index clamped, as fnad's)
    scan             lax.scan over (consts | carry | xs), reverse and unroll kept
    while            lax.while_loop(cond_jaxpr(cconsts, c), body_jaxpr(bconsts, c))
    checkpoint, jit, custom_jvp_call, custom_vjp_call    their jaxpr, inlined
    custom_linear_solve                                 (its solve, `call_jaxpr`)
    custom_vmap_call                                    (its function, `call_jaxpr`)
    name             the identity
    debug_callback   jax.debug.callback, handing the callback fnad Arrays (NumPy backend)
    pure_callback    jax.pure_callback around fnad's eager rule (Arrays in, results checked)
    io_callback      jax.experimental.io_callback likewise

The ClosedJaxpr's consts become device buffers once, passed to the jitted program as
arguments (not baked into the XLA program as literals).
"""
from __future__ import annotations

import numpy as np

import jax
from jax import lax

from fnad import core
from fnad.backends import xla
from fnad.config import config
from fnad.ir import ClosedJaxpr, Jaxpr, Literal, Var


# ---- the interpreter that runs under jax's trace -------------------------------------------
def _literal(lit: Literal):
    return np.asarray(lit.val, lit.aval.dtype)


def _const(value, aval) -> object:
    """A constant of a jaxpr as a jax-ready value (an xla buffer stays as it is)."""
    if type(value) is core.Array:
        if isinstance(value._value, jax.Array):      # on xla (or metal) already
            return value._value
        return np.asarray(value._backend.to_numpy(value._value), aval.dtype)
    return np.asarray(value, aval.dtype)


def eval_jaxpr(jaxpr: Jaxpr, consts, args) -> list:
    """The outputs of `jaxpr` on jax values (tracers under jax.jit)."""
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [env[a] if type(a) is Var else _literal(a) for a in eqn.invars]
        prim = eqn.primitive
        if prim in core.eager_rules:
            lower = _higher_order.get(prim.name)
            if lower is None:
                raise NotImplementedError(
                    f"the xla backend cannot compile the higher-order primitive "
                    f"'{prim.name}'{_where(eqn)}")
            outs = lower(eqn, ins, **eqn.params)
        else:
            impl = xla.impl_rules.get(prim)
            if impl is None:
                raise core.no_impl_error(prim, xla.name)
            out = xla.lowering_of(impl)(*ins, **eqn.params)
            outs = out if prim.multiple_results else [out]
        env.update(zip(eqn.outvars, outs))
    return [env[a] if type(a) is Var else _literal(a) for a in jaxpr.outvars]


def _where(eqn) -> str:
    return f" (staged at {eqn.source_info})" if eqn.source_info else ""


def eval_closed(closed: ClosedJaxpr, args) -> list:
    jaxpr = closed.jaxpr
    consts = [_const(c, v.aval) for c, v in zip(closed.consts, jaxpr.constvars)]
    return eval_jaxpr(jaxpr, consts, list(args))


# ---- higher-order primitives, by name ------------------------------------------------------
def _cond(eqn, ins, *, branches):
    index, *ops = ins
    if len(branches) == 1:
        return eval_closed(branches[0], ops)
    funs = [lambda *o, b=b: eval_closed(b, o) for b in branches]
    return list(lax.switch(index, funs, *ops))


def _scan(eqn, ins, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, carry, xs = ins[:num_consts], ins[num_consts:num_consts + num_carry], \
        ins[num_consts + num_carry:]

    def body(c, x):                                    # carry, y = jaxpr(consts, carry, x)
        outs = eval_closed(jaxpr, [*consts, *c, *x])
        return outs[:num_carry], outs[num_carry:]
    carry, ys = lax.scan(body, list(carry), list(xs), length=length, reverse=reverse,
                         unroll=unroll)
    return list(carry) + list(ys)


def _while(eqn, ins, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts = ins[:cond_nconsts], ins[cond_nconsts:cond_nconsts + body_nconsts]
    carry = ins[cond_nconsts + body_nconsts:]
    return list(lax.while_loop(lambda c: eval_closed(cond_jaxpr, [*cconsts, *c])[0],
                               lambda c: eval_closed(body_jaxpr, [*bconsts, *c]),
                               list(carry)))


def _inline(param: str):
    def lower(eqn, ins, **params):
        return eval_closed(params[param], ins)
    return lower


def _name(eqn, ins, *, name):
    return [ins[0]]


def _host_rule(rule, eqn, params: dict):
    """A function for jax's host callbacks running fnad's eager `rule` (debug_callback's,
    pure_callback's) on the operands as NumPy-backend Arrays of the equation's avals; the
    rule copies what the user's function gets, as it does eagerly."""
    from fnad.backends import get_backend
    host = get_backend("numpy")
    avals = [a.aval for a in eqn.invars]

    def on_host(*vals):
        return rule(*[core.Array(np.asarray(v, a.dtype), a, host)
                      for v, a in zip(vals, avals)], **params)
    return on_host


def _debug_callback(eqn, ins, *, callback, ordered):
    from fnad.debug import debug_callback_eager
    jax.debug.callback(_host_rule(debug_callback_eager, eqn,
                                  dict(callback=callback, ordered=ordered)),
                       *ins, ordered=ordered)
    return []


def _pure_callback(eqn, ins, *, callback, result_avals, result_tree, vmap_method):
    from fnad.callback import pure_callback_eager
    rule = _host_rule(pure_callback_eager, eqn, dict(
        callback=callback, result_avals=result_avals, result_tree=result_tree,
        vmap_method=vmap_method))
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in result_avals]
    return list(jax.pure_callback(lambda *vals: [np.asarray(o._value) for o in rule(*vals)],
                                  shapes, *ins, vmap_method="sequential"))


def _io_callback(eqn, ins, *, callback, result_avals, result_tree, ordered):
    from jax.experimental import io_callback
    from fnad.callback import io_callback_eager
    rule = _host_rule(io_callback_eager, eqn, dict(
        callback=callback, result_avals=result_avals, result_tree=result_tree,
        ordered=ordered))
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in result_avals]
    return list(io_callback(lambda *vals: [np.asarray(o._value) for o in rule(*vals)],
                            shapes, *ins, ordered=ordered))


_higher_order = {
    "cond": _cond,
    "scan": _scan,
    "while": _while,
    "checkpoint": _inline("jaxpr"),
    "jit": _inline("jaxpr"),
    "custom_jvp_call": _inline("call_jaxpr"),
    "custom_vjp_call": _inline("call_jaxpr"),
    "custom_linear_solve": _inline("call_jaxpr"),
    "custom_vmap_call": _inline("call_jaxpr"),
    "name": _name,
    "debug_callback": _debug_callback,
    "pure_callback": _pure_callback,
    "io_callback": _io_callback,
}


# ---- compile ---------------------------------------------------------------------------------
class Compiled:
    """A jaxpr compiled by jax: call it on xla buffers for the list of output buffers.

    `lowered_text` is the StableHLO jax lowers it to (computed on first access)."""

    __slots__ = ("_jitted", "_consts", "_x64", "jaxpr")

    def __init__(self, jitted, consts, x64: bool, jaxpr: Jaxpr):
        self._jitted = jitted
        self._consts = consts
        self._x64 = x64
        self.jaxpr = jaxpr

    def __call__(self, *bufs) -> list:
        if xla.jax_x64() == self._x64:
            return self._jitted(self._consts, *bufs)
        with xla.x64_scope(self._x64):
            return self._jitted(self._consts, *bufs)

    @property
    def lowered_text(self) -> str:
        args = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in self.jaxpr.invars]
        with xla.x64_scope(self._x64):
            return self._jitted.lower(self._consts, *args).as_text()

    def __repr__(self):
        return f"<xla program of {len(self.jaxpr.eqns)} equations>"


def compile(closed: ClosedJaxpr, device=None) -> Compiled:  # noqa: A001
    """One jax.jit of the whole program; `device` places its constants (default: jax's)."""
    jaxpr = closed.jaxpr
    x64 = config.jax_enable_x64
    consts = [_const(c, v.aval) for c, v in zip(closed.consts, jaxpr.constvars)]
    with xla.x64_scope(x64):
        consts = [c if isinstance(c, jax.Array) else jax.device_put(c, device) for c in consts]

    def program(consts, *args):
        return eval_jaxpr(jaxpr, consts, args)
    program.__name__ = "fnad_program"
    return Compiled(jax.jit(program), consts, x64, jaxpr)

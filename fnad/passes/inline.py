"""Inlining: splice the sub-jaxpr of call-like equations into the calling program.

A call-like equation just runs its sub-jaxpr on its operands; inlined, its equations
join the caller's (fresh Vars each time), so the other passes and fusion see across
the call. Which are inlined:

    jit (param `jaxpr`, backend=None)   always: jit's rules are those of its jaxpr, so
                                        nothing any transformation sees changes
  and only with `lowering=True` — for a jaxpr going to a backend's compile, that no
  transformation will see again:
    custom_jvp_call, custom_vjp_call    (param `call_jaxpr`): their rules matter only to AD
    custom_linear_solve                 (param `call_jaxpr`: its `solve` applied to b)
    custom_vmap_call                    (param `call_jaxpr`): its rule matters only to vmap
    checkpoint (param `jaxpr`)          unless prevent_cse and differentiated: that is
                                        the backward pass's recomputation, which stays a
                                        call so CSE cannot merge it into the forward
                                        values (which would undo the remat)
    name, stop_gradient                 identities for values: replaced by their operand

Without `lowering`, inlining a custom rule or a checkpoint into the jaxpr that jit
binds would change what grad(jit(f)) computes, hence the flag. A nested jit with its
own `backend` stays a call. Sub-jaxprs (control-flow bodies) are inlined inside too.
The jit primitive is looked up by name (fnad/jit.py may load after this module).
"""
from __future__ import annotations

from fnad.custom import custom_jvp_call_p, custom_vjp_call_p
from fnad.custom_batching import custom_vmap_call_p
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from fnad.passes._util import (Renamer, call_primitive, has_sub_jaxprs, map_sub_jaxprs,
                               splice)
from fnad.primitives import logic as lg
from fnad.primitives.solves import custom_linear_solve_p
from fnad.remat import name_p, remat_p

__all__ = ["inline"]


def inline(closed: ClosedJaxpr, *, lowering: bool = False) -> ClosedJaxpr:
    """Splice the sub-jaxprs of call-like equations (see the module doc) into the caller."""
    return _inline(closed, lowering, {})


def _call_sub(eqn: JaxprEqn, lowering: bool) -> ClosedJaxpr | None:
    """The sub-jaxpr to inline for `eqn`, or None to keep it."""
    prim, p = eqn.primitive, eqn.params
    if prim.name == "jit" and prim is _jit_p() and p.get("backend") is None:
        return p["jaxpr"]
    if not lowering:
        return None
    if prim is custom_jvp_call_p or prim is custom_vjp_call_p:
        return p["call_jaxpr"]
    if prim is remat_p and not (p.get("prevent_cse") and p.get("differentiated")):
        return p["jaxpr"]
    if prim is custom_linear_solve_p or prim is custom_vmap_call_p:
        return p["call_jaxpr"]
    return None


# Identities for values once no transformation follows (with lowering=True).
_IDENTITIES = frozenset({name_p, lg.stop_gradient_p})


def _jit_p():
    """jit_p, once fnad/jit.py has loaded (looked up by name; only success is cached)."""
    global _jit_prim
    if _jit_prim is None:
        _jit_prim = call_primitive("jit")
    return _jit_prim


_jit_prim = None


def _inline(closed: ClosedJaxpr, lowering: bool, memo: dict) -> ClosedJaxpr:
    j = closed.jaxpr
    ren = Renamer()
    eqns: list[JaxprEqn] = []
    constvars, consts = list(j.constvars), list(closed.consts)
    changed = False

    def bind_out(v: Var, atom) -> None:                # v now stands for `atom`, same type
        if atom.aval == v.aval:
            ren[v] = atom
        else:                                          # weak_type differs: convert to v's
            eqns.append(JaxprEqn(lg.convert_element_type_p, [atom],
                                 {"new_dtype": v.aval.dtype, "weak_type": v.aval.weak_type},
                                 [v], None))

    for eqn in j.eqns:
        new = ren.eqn(eqn)
        if lowering and new.primitive in _IDENTITIES:
            bind_out(new.outvars[0], new.invars[0])
            changed = True
            continue
        sub = _call_sub(new, lowering)
        if sub is None:
            if has_sub_jaxprs(new):
                new = map_sub_jaxprs(new, lambda c: _inline(c, lowering, memo), memo)
            changed = changed or new is not eqn
            eqns.append(new)
            continue
        hit = memo.get(("inlined", id(sub)))
        if hit is None:
            hit = memo[("inlined", id(sub))] = (sub, _inline(sub, lowering, memo))
        sub = hit[1]
        sj = sub.jaxpr
        env: dict[Var, object] = dict(zip(sj.invars, new.invars))
        for v, c in zip(sj.constvars, sub.consts):    # the callee's constants join ours
            env[v] = w = Var(v.aval)
            constvars.append(w)
            consts.append(c)
        spliced, outs = splice(sj, env)
        eqns += spliced
        for v, a in zip(new.outvars, outs):
            bind_out(v, a)
        changed = True
    if not changed:
        return closed
    return ClosedJaxpr(Jaxpr(constvars, j.invars, eqns, [ren(v) for v in j.outvars]), consts)

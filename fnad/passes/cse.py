"""Common subexpression elimination: an equation equal to an earlier one reuses its outputs.

Two equations are equal when they have the same primitive, equal params and the same
operands (the same Vars; Literals of the same bits and type; for commutative
primitives in either order). Params compare by value where hashable; sub-jaxprs
compare by identity (passes map one sub-jaxpr object to one result, so equal stays
equal). Never merged: effectful equations (they must run each time), equations
with unhashable params, and `checkpoint` equations with prevent_cse=True (the
recomputation of a rematerialized block must not be merged with the forward values:
that would undo the remat). Each sub-jaxpr is its own scope: sub-jaxprs are closed,
so nothing merges across a checkpoint, cond, scan, ... boundary.
"""
from __future__ import annotations

from fnad.ir import ClosedJaxpr, JaxprEqn, Literal
from fnad.passes._util import (COMMUTATIVE, Renamer, has_sub_jaxprs, has_effects, literal_key,
                               map_sub_jaxprs, with_eqns)
from fnad.remat import remat_p

__all__ = ["cse"]


def cse(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Reuse the outputs of an earlier equal equation; same signature."""
    return _cse(closed, {})


def _cse(closed: ClosedJaxpr, memo: dict) -> ClosedJaxpr:
    j = closed.jaxpr
    ren = Renamer()
    seen: dict[tuple, JaxprEqn] = {}
    eqns: list[JaxprEqn] = []
    changed = False
    for eqn in j.eqns:
        new = ren.eqn(eqn)
        if has_sub_jaxprs(new):
            new = map_sub_jaxprs(new, lambda c: _cse(c, memo), memo)
        changed = changed or new is not eqn
        key = _key(new)
        if key is not None:
            try:
                first = seen.get(key)
            except TypeError:                          # an unhashable param (a list, an array)
                eqns.append(new)
                continue
            if first is not None and all(a.aval == b.aval
                                         for a, b in zip(first.outvars, new.outvars)):
                for v, w in zip(new.outvars, first.outvars):
                    ren[v] = w
                changed = True
                continue
            if first is None:
                seen[key] = new
        eqns.append(new)
    outvars = [ren(v) for v in j.outvars]
    if not changed and all(a is b for a, b in zip(outvars, j.outvars)):
        return closed
    return with_eqns(closed, eqns, outvars)


def _key(eqn: JaxprEqn) -> tuple | None:
    """What makes `eqn` equal to another, or None if it must never be merged. The key
    may still be unhashable (a list or array param): the caller's lookup tells."""
    prim = eqn.primitive
    if prim is remat_p and eqn.params.get("prevent_cse"):
        return None
    if has_effects(eqn):
        return None
    ins = tuple([literal_key(a) if type(a) is Literal else a for a in eqn.invars])
    if prim in COMMUTATIVE:
        ins = _commuted(ins)
    params = eqn.params
    params = tuple(sorted(params.items())) if len(params) > 1 else tuple(params.items())
    return (prim, params, ins, len(eqn.outvars))


def _commuted(ins: tuple) -> tuple:
    """`ins` sorted by _order; two operands without computing it (a Literal's repr is slow)."""
    if len(ins) == 2:
        a, b = ins
        lit_a, lit_b = type(a) is tuple, type(b) is tuple
        if not lit_a and not lit_b:                    # two Vars: by id
            return (b, a) if id(b) < id(a) else ins
        if lit_a != lit_b:                             # a Var and a Literal: the Var first
            return (b, a) if lit_a else ins
    return tuple(sorted(ins, key=_order))


def _order(a) -> tuple:
    """A total order on operand keys (Vars by id, Literal keys after them)."""
    return (1, repr(a)) if type(a) is tuple else (0, id(a))

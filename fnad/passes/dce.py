"""Dead code elimination: drop the equations no output needs.

An equation is kept when one of its outputs is used or it has effects (a primitive in
`core.effectful_primitives`, itself or inside a sub-jaxpr). The walk goes backwards
once, so when it reaches an equation every use of its outputs is known.

Higher-order equations are pruned inside. Those in `dce_rules` also shrink their own
signature consistently (fewer outputs and operands, the sub-jaxpr rewritten to match):

    cond        unused outputs leave every branch; operands no branch reads go
    scan        unused ys go; a carry goes when neither its output nor the body's used
                part reads it (a fixed point over the carries); unread consts/xs go
    checkpoint, jit   unused outputs and unread operands go
    while, custom_jvp_call, custom_vjp_call: pruned inside only (the loop's carry and the
                custom rules are tied to the signature)

`dce_jaxpr(jaxpr, used_outputs, prune_invars)` is also the DCE of partial evaluation
(fnad/partial_eval.py calls it with recursive=False).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from fnad.core import Primitive
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from fnad.passes._util import has_sub_jaxprs, call_primitive, has_effects, map_sub_jaxprs
from fnad.primitives.control_flow import cond_p, scan_p
from fnad.remat import remat_p

__all__ = ["dce", "dce_jaxpr", "dce_rules", "last_read_at", "last_reads", "live_eqns",
           "read_counts"]


def dce(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Remove equations (and constants) no output needs, in sub-jaxprs too; same signature."""
    j = closed.jaxpr
    eqns, live = _walk(j.eqns, list(j.outvars), True, {})
    keep = [v in live for v in j.constvars]
    if all(keep) and _same(eqns, j.eqns):
        return closed
    return ClosedJaxpr(Jaxpr([v for v, k in zip(j.constvars, keep) if k], j.invars, eqns,
                             j.outvars),
                       [c for c, k in zip(closed.consts, keep) if k])


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool] | None = None,
              prune_invars: bool = False, *, recursive: bool = True,
              _memo: dict | None = None) -> tuple[Jaxpr, list[bool]]:
    """`jaxpr` without the equations no kept output needs.

    Returns the new jaxpr (only the outputs `used_outputs` marks, all if None) and, per
    invar, whether it is still read. With `prune_invars` the unread invars leave the
    signature. `recursive=False` neither looks into nor reshapes higher-order eqns
    (only their effects count).
    """
    outvars = list(jaxpr.outvars) if used_outputs is None else \
        [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    eqns, live = _walk(jaxpr.eqns, outvars, recursive, {} if _memo is None else _memo)
    used_in = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_in) if u] if prune_invars else jaxpr.invars
    return Jaxpr(jaxpr.constvars, invars, eqns, outvars), used_in


def last_read_at(reads: Sequence[Sequence], outputs: Sequence = ()) -> dict[Var, int]:
    """Var -> the position of the last step that reads it, where `reads[i]` are the atoms
    that the i-th step of a straight-line program reads; an output is read at len(reads),
    after every step."""
    last: dict = {}
    for i, atoms in enumerate((*reads, outputs)):
        for a in atoms:
            if type(a) is Var:
                last[a] = i
    return last


def last_reads(reads: Sequence[Sequence], keep: Sequence = ()) -> dict[int, list[Var]]:
    """position -> the Vars read there for the last time (`last_read_at`); Vars in `keep`
    (the outputs) are never listed. The NumPy interpreter and the numba driver release
    values so."""
    out: dict = {}
    for v, i in last_read_at(reads, keep).items():
        if i < len(reads):
            out.setdefault(i, []).append(v)
    return out


def read_counts(reads: Sequence[Sequence], outputs: Sequence = ()) -> dict[Var, int]:
    """Var -> how often it is read, where `reads[i]` are the atoms that the i-th step of a
    straight-line program reads; an output counts as one more read."""
    counts: dict = {}
    for atoms in (*reads, outputs):
        for a in atoms:
            if type(a) is Var:
                counts[a] = counts.get(a, 0) + 1
    return counts


def live_eqns(eqns: Sequence[JaxprEqn], outvars: Sequence) -> tuple[list[JaxprEqn], set[Var]]:
    """The equations of a flat list that `outvars` need, and the effectful ones (in order,
    unchanged: nothing inside is pruned), and every var they or `outvars` read."""
    return _walk(eqns, outvars, False, {})


def _walk(eqns: Sequence[JaxprEqn], outvars: Sequence, recursive: bool, memo: dict
          ) -> tuple[list[JaxprEqn], set[Var]]:
    """The kept eqns (in order) and every var they or `outvars` read."""
    live = {v for v in outvars if type(v) is Var}
    kept = []
    for eqn in reversed(eqns):
        used = [v in live for v in eqn.outvars]
        if not any(used) and not has_effects(eqn):
            continue
        if recursive:
            rule = _rule(eqn.primitive)
            if rule is not None:
                eqn = rule(eqn, used, memo)
            elif has_sub_jaxprs(eqn):
                eqn = map_sub_jaxprs(eqn, lambda c: _dce_closed(c, memo), memo)
        kept.append(eqn)
        for v in eqn.invars:
            if type(v) is Var:
                live.add(v)
    kept.reverse()
    return kept, live


def _dce_closed(closed: ClosedJaxpr, memo: dict) -> ClosedJaxpr:
    """A sub-jaxpr pruned inside, its signature kept (the same object if nothing goes)."""
    j, _ = dce_jaxpr(closed.jaxpr, _memo=memo)
    return closed if _same(j.eqns, closed.jaxpr.eqns) else ClosedJaxpr(j, closed.consts)


def _pruned(closed: ClosedJaxpr, used_outputs: Sequence[bool], keep_in: Sequence[bool],
            memo: dict) -> ClosedJaxpr:
    """`closed` with only the used outputs and the invars `keep_in` marks."""
    j, _ = dce_jaxpr(closed.jaxpr, used_outputs, _memo=memo)
    if all(used_outputs) and all(keep_in) and _same(j.eqns, closed.jaxpr.eqns):
        return closed
    invars = [v for v, k in zip(j.invars, keep_in) if k]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)


def _memoized(key, memo: dict, make):
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = make()
    return hit


# ---- rules: eqn, used outputs -> the eqn with fewer outputs and operands --------------------
dce_rules: dict[Primitive, Callable[[JaxprEqn, list[bool], dict], JaxprEqn]] = {}


def cond_dce(eqn: JaxprEqn, used: list[bool], memo: dict) -> JaxprEqn:
    branches = eqn.params["branches"]

    def make():
        reads = [dce_jaxpr(b.jaxpr, used, _memo=memo)[1] for b in branches]
        keep = [any(r[i] for r in reads) for i in range(len(eqn.invars) - 1)]
        return keep, tuple(_pruned(b, used, keep, memo) for b in branches), branches
    keep, new, _ = _memoized(("cond", id(branches), tuple(used)), memo, make)
    if all(keep) and all(used) and all(a is b for a, b in zip(new, branches)):
        return eqn
    ops = [a for a, k in zip(eqn.invars[1:], keep) if k]
    return eqn.replace(invars=[eqn.invars[0]] + ops, params=dict(eqn.params, branches=new),
                       outvars=[v for v, u in zip(eqn.outvars, used) if u])
dce_rules[cond_p] = cond_dce


def scan_dce(eqn: JaxprEqn, used: list[bool], memo: dict) -> JaxprEqn:
    body = eqn.params["jaxpr"]
    nc, ncar = eqn.params["num_consts"], eqn.params["num_carry"]

    def make():
        carry, ys = list(used[:ncar]), list(used[ncar:])
        while True:                                   # a carry the used part reads is used
            _, reads = dce_jaxpr(body.jaxpr, carry + ys, _memo=memo)
            new = [c or r for c, r in zip(carry, reads[nc:nc + ncar])]
            if new == carry:
                break
            carry = new
        keep = reads[:nc] + carry + reads[nc + ncar:]
        return keep, carry, _pruned(body, carry + ys, keep, memo), body
    keep, carry, new, _ = _memoized(("scan", id(body), tuple(used)), memo, make)
    if new is body:
        return eqn
    outs = [v for v, u in zip(eqn.outvars, carry + list(used[ncar:])) if u]
    return eqn.replace(invars=[a for a, k in zip(eqn.invars, keep) if k], outvars=outs,
                       params=dict(eqn.params, jaxpr=new, num_consts=sum(keep[:nc]),
                                   num_carry=sum(carry)))
dce_rules[scan_p] = scan_dce


def call_dce(eqn: JaxprEqn, used: list[bool], memo: dict) -> JaxprEqn:
    """A primitive that calls params['jaxpr'] on its operands (checkpoint, jit)."""
    sub = eqn.params["jaxpr"]

    def make():
        _, reads = dce_jaxpr(sub.jaxpr, used, _memo=memo)
        return reads, _pruned(sub, used, reads, memo), sub
    keep, new, _ = _memoized(("call", id(sub), tuple(used)), memo, make)
    if new is sub:
        return eqn
    return eqn.replace(invars=[a for a, k in zip(eqn.invars, keep) if k],
                       outvars=[v for v, u in zip(eqn.outvars, used) if u],
                       params=dict(eqn.params, jaxpr=new))


def _rule(prim: Primitive):
    """prim's rule; jit's is registered on first sight (fnad/jit.py may load after us)."""
    rule = dce_rules.get(prim)
    if rule is None and prim.name == "jit" and prim is call_primitive("jit"):
        rule = dce_rules[prim] = call_dce
    return rule


dce_rules[remat_p] = call_dce

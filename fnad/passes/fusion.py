"""Fusion planning: group a jaxpr's equations into loop nests for a codegen backend.

No code is generated here and the jaxpr is not changed: `plan_fusion(jaxpr)` returns
a list of FusionGroup, each a set of equation indices that one kernel can compute.

The plan
--------
Every equation is in exactly one group. Groups are listed in an order in which they can
run (each reads only jaxpr inputs, constants and outputs of earlier groups); the graph
of groups is acyclic, so every group is convex (no path leaves it and comes back). A
value read outside its group (by a later group or as a jaxpr output) is one of the
group's `outputs`; everything else stays inside the kernel.

A fusable group has an iteration shape S (`shape`) and reduced axes R (`reduce_axes`,
empty when there is no reduction). Writing S_out for S without the axes R and S_keep
for S with them set to 1 (the same row-major layout as S_out), each member equation's
output has one `level`:

    "full"    shape S                        (one value per point of the loop nest)
    "row"     shape S_out or S_keep (R != ())  (one value per kept index: the reductions'
                                              outputs and what is computed from them)
    "scalar"  shape ()                       (loop invariant: computed once)

Members are: elementwise primitives (`ELEMENTWISE` in _util.py, and iota); reductions
(`REDUCTIONS`) of a shape-S operand over exactly R; broadcast_in_dim to a full or row
shape — of an outside value (any broadcast: read through its index map), or of an
in-group value along the kept axes (row -> full, S_out -> S_keep, scalar -> anything).

Kinds:

    "elementwise"   no reduction: one loop nest over S
    "reduction"     elementwise (full) producers -> reductions over R -> row epilogue:
                    per kept index, one inner loop over R accumulating, then the row ops
    "softmax-like"  some full-level member reads a row value (reduction -> broadcast ->
                    elementwise, as in softmax, RMSNorm, layer norm): per kept index,
                    phases of inner loops over R; a full value used in a later phase
                    is recomputed or kept in a row buffer, as the codegen chooses
    "single"        anything else, one equation: dot_general, gather, control flow,
                    shape ops other than broadcast_in_dim, multiple-result primitives

The codegen should order a group's members by the dependencies (member order is
program order, which is one valid order); `levels` tell where each sits in the nest.
The plan is over `jaxpr.eqns` of the jaxpr given; plan the bodies of control-flow
equations by calling plan_fusion on their sub-jaxprs.

Grouping is greedy in program order: an equation joins (and merges) the groups of the
operands it reads when their shapes are compatible and no cycle between groups results.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from fnad.passes._util import ELEMENTWISE, REDUCTIONS, broadcast_in_dim_p
from fnad.primitives.shape_ops import iota_p

__all__ = ["FusionGroup", "plan_fusion", "KINDS"]

KINDS = ("elementwise", "reduction", "softmax-like", "single")


@dataclass(frozen=True)
class FusionGroup:
    """One kernel of the plan (see the module doc).

    kind         "elementwise" | "reduction" | "softmax-like" | "single"
    eqns         indices into jaxpr.eqns, ascending (program order)
    levels       per member: "full" | "row" | "scalar" (("single",) for a single group)
    shape        the iteration shape S (None for "single")
    reduce_axes  the axes R of S that the reductions reduce (() if none)
    inputs       Vars the group reads from outside it (jaxpr inputs, constants, outputs
                 of earlier groups), in order of first use; Literals are read inline
    outputs      Vars it defines that are read outside it, in order of definition
    """
    kind: str
    eqns: tuple[int, ...]
    levels: tuple[str, ...]
    shape: tuple[int, ...] | None
    reduce_axes: tuple[int, ...]
    inputs: tuple[Var, ...]
    outputs: tuple[Var, ...]


def plan_fusion(jaxpr: Jaxpr | ClosedJaxpr) -> list[FusionGroup]:
    """Group `jaxpr`'s equations into elementwise / reduction / softmax-like kernels."""
    j = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return _Planner(j).plan()


# ---- group specs: (S, R) -------------------------------------------------------------------
def _row_shapes(shape: tuple, axes: frozenset) -> tuple[tuple, tuple]:
    out = tuple(n for i, n in enumerate(shape) if i not in axes)
    keep = tuple(1 if i in axes else n for i, n in enumerate(shape))
    return out, keep


def _level(t: tuple, shape: tuple, axes: frozenset) -> str | None:
    """The level of a value of shape `t` in a group (shape, axes), or None if none fits."""
    if t == shape:
        return "full"
    if axes and t in _row_shapes(shape, axes):
        return "row"
    if t == ():
        return "scalar"
    return None


def _combine(a, b):
    """The spec of two merged groups, or None if they do not fit one loop nest."""
    if a is None or b is None:
        return a if b is None else b
    (s1, r1), (s2, r2) = a, b
    if s1 == s2:
        if r1 == r2 or not r2:
            return a
        return b if not r1 else None
    if not r2 and (s2 == () or (r1 and s2 in _row_shapes(s1, r1))):
        return a                                       # b's values are rows/scalars of a's
    if not r1 and (s1 == () or (r2 and s1 in _row_shapes(s2, r2))):
        return b
    return None


class _Group:
    __slots__ = ("members", "spec", "succ", "pred", "outside_bcasts")

    def __init__(self, spec):
        self.members: list[int] = []
        # broadcast_in_dim members reading a Var of another group (any index map is fine
        # for those; re-checked if that group merges into this one)
        self.outside_bcasts: list[int] = []
        self.spec = spec                               # (shape, frozenset axes) or None: single
        self.succ: set[_Group] = set()
        self.pred: set[_Group] = set()


class _Planner:
    def __init__(self, jaxpr: Jaxpr):
        self.jaxpr = jaxpr
        self.group_of_eqn: list[_Group] = []
        self.defined_by: dict[Var, int] = {}           # var -> index of its eqn

    # -- what an eqn asks of a group -------------------------------------------------------
    def _own_spec(self, eqn: JaxprEqn):
        """The spec `eqn` alone needs, or None if it cannot be fused at all."""
        prim = eqn.primitive
        if len(eqn.outvars) != 1 or prim.multiple_results:
            return None
        if prim in REDUCTIONS:
            return (eqn.invars[0].aval.shape, frozenset(eqn.params["axes"]))
        if prim in ELEMENTWISE or prim is iota_p or prim is broadcast_in_dim_p:
            return (eqn.outvars[0].aval.shape, frozenset())
        return None

    def _fits(self, eqn: JaxprEqn, spec, in_group) -> bool:
        """Can `eqn` be a member of a group of `spec`? `in_group(v)`: v is computed inside."""
        shape, axes = spec
        prim = eqn.primitive
        if prim in REDUCTIONS:
            return eqn.invars[0].aval.shape == shape and frozenset(eqn.params["axes"]) == axes
        out = eqn.outvars[0].aval.shape
        level = _level(out, shape, axes)
        if level is None:
            return False
        if prim is not broadcast_in_dim_p:
            return True
        x = eqn.invars[0]
        if type(x) is not Var or not in_group(x):      # an outside value: any index map
            return True
        dims = eqn.params["broadcast_dimensions"]
        t = x.aval.shape
        if t == ():
            return True
        s_out, s_keep = _row_shapes(shape, axes)
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        if t == out:
            return dims == tuple(range(len(t)))
        if axes and t == s_out:                        # row (S_out) -> full or S_keep
            return (out == shape or out == s_keep) and dims == kept
        if axes and t == s_keep:                       # row (S_keep) -> full
            return out == shape and dims == tuple(range(len(shape)))
        return False

    def _bcasts_fit(self, merge: list[_Group], spec, in_group) -> bool:
        """The broadcasts of merged groups that read another merged group still fit."""
        if len(merge) < 2:
            return True
        for g in merge:
            for i in g.outside_bcasts:
                if not self._fits(self.jaxpr.eqns[i], spec, in_group):
                    return False
        return True

    # -- cycles ------------------------------------------------------------------------------
    @staticmethod
    def _acyclic(merge: list[_Group], producers: set[_Group]) -> bool:
        """Merging `merge` (and the new eqn, read from `producers`) makes no cycle."""
        inside = set(merge)
        targets = inside | producers
        stack = [s for g in merge for s in g.succ if s not in inside]
        seen = set(stack)
        while stack:
            g = stack.pop()
            if g in targets:
                return False
            for s in g.succ:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return True

    # -- the greedy walk ---------------------------------------------------------------------
    def plan(self) -> list[FusionGroup]:
        for i, eqn in enumerate(self.jaxpr.eqns):
            self._place(i, eqn)
            for v in eqn.outvars:
                self.defined_by[v] = i
        return self._finish()

    def _producers(self, eqn: JaxprEqn) -> list[_Group]:
        groups: list[_Group] = []
        for a in eqn.invars:
            if type(a) is Var and a in self.defined_by:
                g = self.group_of_eqn[self.defined_by[a]]
                if g not in groups:
                    groups.append(g)
        return groups

    def _place(self, i: int, eqn: JaxprEqn) -> None:
        producers = self._producers(eqn)
        own = self._own_spec(eqn)
        chosen: list[_Group] = []
        spec = own
        if own is not None:
            fusable = [g for g in producers if g.spec is not None]
            fusable.sort(key=lambda g: (not g.spec[1], -len(g.members)))
            for g in fusable:
                trial = _combine(spec, g.spec)
                if trial is None:
                    continue
                members = set(chosen) | {g}
                in_group = lambda v, m=members: self.group_of_eqn[self.defined_by[v]] in m \
                    if v in self.defined_by else False  # noqa: E731
                if not self._fits(eqn, trial, in_group) or \
                        not self._bcasts_fit(chosen + [g], trial, in_group):
                    continue
                if not self._acyclic(chosen + [g], set(producers)):
                    continue
                chosen.append(g)
                spec = trial
        group = self._merge(chosen, spec) if chosen else _Group(spec)
        group.members.append(i)
        self.group_of_eqn.append(group)
        if eqn.primitive is broadcast_in_dim_p and group.spec is not None:
            x = eqn.invars[0]
            if type(x) is Var and x in self.defined_by and \
                    self.group_of_eqn[self.defined_by[x]] is not group:
                group.outside_bcasts.append(i)
        for p in self._producers(eqn):                 # as merged now
            if p is not group:
                p.succ.add(group)
                group.pred.add(p)

    def _merge(self, groups: list[_Group], spec) -> _Group:
        keep = max(groups, key=lambda g: len(g.members))
        keep.spec = spec
        for g in groups:
            if g is keep:
                continue
            for m in g.members:
                self.group_of_eqn[m] = keep
            keep.members.extend(g.members)
            for s in g.succ:
                s.pred.discard(g)
                if s is not keep:
                    s.pred.add(keep)
                    keep.succ.add(s)
            for p in g.pred:
                p.succ.discard(g)
                if p is not keep:
                    p.succ.add(keep)
                    keep.pred.add(p)
        keep.succ -= set(groups)
        keep.pred -= set(groups)
        for g in groups:
            if g is not keep:
                keep.outside_bcasts.extend(g.outside_bcasts)
        keep.outside_bcasts = [i for i in keep.outside_bcasts
                               if self.group_of_eqn[self.defined_by[
                                   self.jaxpr.eqns[i].invars[0]]] is not keep]
        return keep

    # -- the plan ----------------------------------------------------------------------------
    def _finish(self) -> list[FusionGroup]:
        groups: list[_Group] = []
        for g in self.group_of_eqn:
            if g not in groups:
                groups.append(g)
        order = _topological(groups)
        eqns = self.jaxpr.eqns
        read_outside: set[Var] = {v for v in self.jaxpr.outvars if type(v) is Var}
        for i, e in enumerate(eqns):
            g = self.group_of_eqn[i]
            for a in e.invars:
                if type(a) is Var and a in self.defined_by and \
                        self.group_of_eqn[self.defined_by[a]] is not g:
                    read_outside.add(a)
        return [self._describe(g, read_outside) for g in order]

    def _describe(self, g: _Group, read_outside: set[Var]) -> FusionGroup:
        eqns = self.jaxpr.eqns
        members = tuple(sorted(g.members))
        inside = set(members)
        inputs: list[Var] = []
        for i in members:
            for a in eqns[i].invars:
                if type(a) is Var and self.defined_by.get(a, -1) not in inside and \
                        a not in inputs:
                    inputs.append(a)
        outputs = tuple(v for i in members for v in eqns[i].outvars if v in read_outside)
        if g.spec is None:
            return FusionGroup("single", members, ("single",), None, (), tuple(inputs), outputs)
        shape, axes = g.spec
        levels = tuple(_level(eqns[i].outvars[0].aval.shape, shape, axes) for i in members)
        return FusionGroup(self._kind(members, levels), members, levels, shape,
                           tuple(sorted(axes)), tuple(inputs), outputs)

    def _kind(self, members: tuple[int, ...], levels: tuple[str, ...]) -> str:
        eqns = self.jaxpr.eqns
        if not any(eqns[i].primitive in REDUCTIONS for i in members):
            return "elementwise"
        after: set[Var] = set()                        # values computed from a reduction
        for i, level in zip(members, levels):
            e = eqns[i]
            reads = any(type(a) is Var and a in after for a in e.invars)
            if reads and level == "full":
                return "softmax-like"
            if reads or e.primitive in REDUCTIONS:
                after.update(e.outvars)
        return "reduction"


def _topological(groups: list[_Group]) -> list[_Group]:
    """Kahn's algorithm, taking the group with the earliest first equation among those ready."""
    first = {g: min(g.members) for g in groups}
    indeg = {g: len(g.pred) for g in groups}
    ready = [(first[g], id(g), g) for g in groups if indeg[g] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, g = heapq.heappop(ready)
        out.append(g)
        for s in g.succ:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, (first[s], id(s), s))
    if len(out) != len(groups):
        raise AssertionError("fusion planning made a cycle between groups")
    return out

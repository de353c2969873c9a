"""Fusion planning for the numba backend: which equations of a flat program share a kernel.

(fnad/passes/fusion.py plans groups on a jaxpr for inspection and tests; this is the numba
backend's own greedy planner, which also decides loop domains and kernel inputs.)

A *group* is one loop nest over a `domain` shape S. Each value the group touches lives on a
subset of the domain's dims, given by its *dmap*: for each of the value's dims, the domain
dim it runs along, or None for a size-1 dim. So `x: f32[4,5]` in domain [4,5] has dmap
(0, 1), `b: f32[5]` broadcast along rows has (1,), a row sum `f32[4]` has (0,), and
`f32[4,1]` has (0, None). A group may hold reductions, all over the same trailing domain dims
(`inner`); the kernel then runs, per outer index, one inner loop per *stage* (softmax: max;
exp and sum; divide), see kernels.py.

Equations, in program order:
  - views (broadcast_in_dim, squeeze, reshapes that only add/drop unit dims, stop_gradient)
    are *virtual*: a group that reads one reads its source instead, at the mapped index; a
    view anything else reads is run in the driver (a NumPy view);
  - an elementwise op or a reduction over trailing dims joins the group of one of its
    operands (first merging the other operand groups of the same domain into it where
    that is legal: `a*b + exp(-a)` is one kernel), else starts a new one (not for scalar
    work, which NumPy does as well without a compile); joining must keep the graph of
    groups and driver equations acyclic;
  - everything else runs in the driver.
Unrelated ops are not fused horizontally: separate small kernels (one AdamW update per
parameter) have the same source and compile once, one wide kernel would compile slowly.

Acyclicity: `anc(v)` is the bitset of groups value v depends on (a group's bits are the ids
it absorbed by merging). An equation may join group G only if none of its outside operands
depends on G. Once some other node has read an output of G, G is *frozen*: it may still
grow, but not take on new dependencies (the ancestor sets already computed from its outputs
stay exact), and it is never merged into another group.

Recomputation (`plan_recomputing`, the numba driver's entry): after a first plan, a group
that reads a cheap elementwise value another group writes gets its own copy of the eqns
computing it (`recompute`), and the program is planned again; the writer then writes it
only where something else still reads it (the forward kernel of SwiGLU: 1 array, not 4).
"""
from __future__ import annotations

import heapq
import math

from fnad.ir import Literal, Var
from fnad.passes.dce import last_read_at, live_eqns
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as so

VIEWS = frozenset({so.broadcast_in_dim_p, so.squeeze_p, so.reshape_p, lg.stop_gradient_p})
REDUCTIONS = frozenset({red.reduce_sum_p, red.reduce_max_p, red.reduce_min_p,
                        red.reduce_prod_p, red.reduce_and_p, red.reduce_or_p})
MAX_GROUP_EQNS = 400           # compile time grows with the loop body (~2 ms per op)


class Group:
    """One fused kernel: member eqns (indices), dmaps of member outputs, inputs."""

    __slots__ = ("gid", "ids", "domain", "inner", "members", "dmaps", "operands", "inputs",
                 "frozen", "deps", "outputs", "unit_reductions")

    def __init__(self, gid: int, domain: tuple):
        self.gid = gid
        self.ids = 1 << gid                           # its own id and those it absorbed
        self.domain = domain
        self.inner: frozenset = frozenset()           # reduced domain dims (trailing)
        self.members: list[int] = []
        self.dmaps: dict = {}                         # member outvar -> dmap
        self.operands: dict = {}                      # eqn index -> resolved operands
        self.inputs: list = []                        # [(Var, dmap)], kernel arguments
        self.frozen = False
        self.deps = 0                                 # bitset of groups this one reads
        self.outputs: list = []                       # member vars read outside the group
        self.unit_reductions: set = set()             # reductions over size-1 dims: copies

    def __repr__(self):
        return f"Group({self.gid}, domain={self.domain}, eqns={self.members})"


def is_view(eqn) -> bool:
    p = eqn.primitive
    if p not in VIEWS:
        return False
    if p is so.reshape_p:
        return _unit_reshape(eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape)
    return True


def _unit_reshape(a: tuple, b: tuple) -> bool:
    return [n for n in a if n != 1] == [n for n in b if n != 1]


def identity_dmap(domain: tuple, shape: tuple):
    """The dmap of a value of `shape` aligned with the domain's dims, or None."""
    if len(shape) != len(domain):
        return None
    if any(s != 1 and s != n for s, n in zip(shape, domain)):
        return None
    return tuple(i if s == n and n != 1 else None for i, (s, n) in enumerate(zip(shape, domain)))


def view_backward(eqn, out_dmap):
    """The dmap the view's operand needs so that the view has `out_dmap` (None: can't)."""
    p, x = eqn.primitive, eqn.invars[0]
    in_shape, out_shape = x.aval.shape, eqn.outvars[0].aval.shape
    if p is lg.stop_gradient_p:
        return out_dmap
    if p is so.broadcast_in_dim_p:
        bd = eqn.params["broadcast_dimensions"]
        return tuple(out_dmap[d] if in_shape[k] == out_shape[d] else None
                     for k, d in enumerate(bd))
    if p is so.squeeze_p:
        dims = eqn.params["dimensions"]
        it = iter(out_dmap)
        return tuple(None if k in dims else next(it) for k in range(len(in_shape)))
    # reshape adding/dropping unit dims: non-unit dims keep their order
    nonunit = iter(d for d, n in zip(out_dmap, out_shape) if n != 1)
    return tuple(None if n == 1 else next(nonunit) for n in in_shape)


def view_forward(eqn, in_dmap, domain):
    """The view's dmap given its operand's (None where the domain can't place it)."""
    p = eqn.primitive
    in_shape, out_shape = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
    if p is lg.stop_gradient_p:
        return in_dmap
    if p is so.broadcast_in_dim_p:
        out = identity_dmap(domain, out_shape)
        if out is None or view_backward(eqn, out) != in_dmap:
            return None
        return out
    if p is so.squeeze_p:
        dims = eqn.params["dimensions"]
        return tuple(d for k, d in enumerate(in_dmap) if k not in dims)
    nonunit = iter(d for d, n in zip(in_dmap, in_shape) if n != 1)
    return tuple(None if n == 1 else next(nonunit) for n in out_shape)


def _trailing(domain: tuple, dims: set) -> bool:
    nonunit = [d for d, n in enumerate(domain) if n != 1]
    return bool(dims) and set(nonunit[len(nonunit) - len(dims):]) == dims


def plan(eqns: list, outvars: list, fusable) -> list:
    """Nodes in a valid execution order: ("group", Group) or ("eqn", index)."""
    P = _Planner(eqns, fusable)
    for i, e in enumerate(eqns):
        P.add(i, e)
    return P.finish(outvars)


def plan_recomputing(eqns: list, outvars: list, fusable) -> tuple[list, list]:
    """(eqns, plan): `plan`'s, after letting kernels recompute cheap values (`recompute`);
    the first plan where a recomputation would not land in its reader's kernel."""
    steps = plan(eqns, outvars, fusable)
    rewritten = recompute(eqns, outvars, steps)
    if rewritten is None:
        return eqns, steps
    new, pairs = rewritten
    new = live_eqns(new, outvars)[0]            # what the readers no longer read
    new_steps = plan(new, outvars, fusable)
    position = {id(e): i for i, e in enumerate(new)}
    group_of = {i: id(g) for kind, g in new_steps if kind == "group" for i in g.members}
    for copy, reader in pairs:
        i = position[id(copy)]                  # (read by `reader`: never dead)
        if not is_view(copy) and group_of.get(i, i) != group_of.get(position[id(reader)]):
            return eqns, steps
    return new, new_steps


MAX_RECOMPUTED = 8             # elementwise eqns a kernel may recompute for one value


def recompute(eqns: list, outvars: list, steps: list) -> tuple[list, list] | None:
    """(`eqns` with each cheap value that one kernel writes and a later one reads computed
    again in the later one from the values it was computed from, [(each copied eqn, the
    eqn reading its value)]); None if there is no such value.

    Reverse mode saves a function's intermediates for the backward pass: the forward
    kernel of SwiGLU's silu(a) * b wrote sigmoid(a), its derivative and silu(a) beside its
    result, three arrays of its size that the backward kernels read back (XLA's fusion
    duplicates such producers into their consumers the same way). A value qualifies when
    its kernel computes it from its inputs by at most MAX_RECOMPUTED elementwise eqns
    (views aside; no reduction), the reading kernel reads it directly (not through a view)
    and then reads at most one array more than before, one that is read later anyway (so
    nothing lives longer). The recomputation repeats the same operations on the same
    values (kernels round as NumPy, no fast-math): bit for bit the stored values. A value
    that the driver or the caller also reads is still written for them."""
    producer = {v: i for i, e in enumerate(eqns) for v in e.outvars}
    last_read = last_read_at([e.invars for e in eqns], outvars)
    readers_of: dict = {}
    for i, e in enumerate(eqns):
        for x in e.invars:
            if type(x) is Var:
                readers_of.setdefault(x, []).append(i)
    group_of = {i: g for kind, g in steps if kind == "group" for i in g.members}

    def inside(x, g) -> bool:                  # computed by g, or a view of such a value
        i = producer.get(x)
        while i is not None and is_view(eqns[i]) and i not in group_of:
            src = eqns[i].invars[0]
            i = producer.get(src) if type(src) is Var else None
        return i is not None and group_of.get(i) is g

    def chain(v, g, out: list) -> bool:
        """Add to `out` the eqns computing v in g from g's inputs; False where one is a
        reduction or there are too many."""
        i = producer[v]
        if i in out:
            return True
        e = eqns[i]
        if not is_view(e) and e.primitive in REDUCTIONS:
            return False
        for x in e.invars:
            if type(x) is Var and inside(x, g) and not chain(x, g, out):
                return False
        out.append(i)
        return sum(not is_view(eqns[j]) for j in out) <= MAX_RECOMPUTED

    inserts: dict = {}                          # eqn index -> copies to insert before it
    renames: dict = {}                          # eqn index -> {Var: its recomputed copy}
    pairs: list = []
    for kind, h in steps:
        if kind != "group":
            continue
        members = set(h.members)
        reads = {w for w, _ in h.inputs}
        memo: dict = {}                         # Var -> its copy computed in h
        candidates = []
        for v in dict.fromkeys(w for w, _ in h.inputs):
            g = group_of.get(producer.get(v))
            direct = [j for j in readers_of.get(v, ()) if j in members]
            via_view = any(is_view(eqns[j]) and any(k in members for o in eqns[j].outvars
                                                    for k in readers_of.get(o, ()))
                           for j in readers_of.get(v, ()))
            if g is not None and g is not h and direct and not via_view:
                candidates.append((direct[0], v, g, direct))
        for first, v, g, direct in sorted(candidates, key=lambda c: c[0]):
            ids: list = []
            if not chain(v, g, ids):
                continue
            ids.sort()
            made = {o for j in ids for o in eqns[j].outvars}
            leaves = {x for j in ids for x in eqns[j].invars if type(x) is Var} - made
            new = [x for x in leaves if x not in reads and x.aval.size > 1]
            if len(new) > 1 or any(x.aval.size > v.aval.size or last_read[x] < first
                                   for x in new):
                continue
            reads.update(new)
            at = inserts.setdefault(first, [])
            for j in ids:
                e = eqns[j]
                if e.outvars[0] in memo:
                    continue
                copy = e.replace(invars=[memo.get(x, x) for x in e.invars],
                                 outvars=[Var(o.aval) for o in e.outvars])
                at.append(copy)
                memo.update(zip(e.outvars, copy.outvars))
                pairs.append((copy, first))
            for j in direct:
                renames.setdefault(j, {})[v] = memo[v]
    if not renames:
        return None
    out, renamed = [], {}
    for i, e in enumerate(eqns):
        out += inserts.get(i, ())
        if i in renames:
            e = renamed[i] = e.replace(invars=[renames[i].get(x, x) if type(x) is Var else x
                                               for x in e.invars])
        out.append(e)
    return out, [(copy, renamed[first]) for copy, first in pairs]


class _Planner:
    def __init__(self, eqns, fusable):
        self.eqns = eqns
        self.fusable = fusable
        self.producer: dict = {}          # Var -> eqn index
        self.group_of: dict = {}          # member outvar -> Group
        self.virtual: dict = {}           # view outvar -> eqn index
        self.vanc: dict = {}              # driver outvar -> ancestor bitset
        self.groups: list[Group] = []
        self.dead: set[int] = set()       # gids of groups merged into others
        self.driver: set[int] = set()
        for i, e in enumerate(eqns):
            for v in e.outvars:
                self.producer[v] = i

    # ---- dependencies ----
    def _root(self, atom):
        while type(atom) is Var and atom in self.virtual:
            atom = self.eqns[self.virtual[atom]].invars[0]
        return atom

    def anc(self, atom) -> int:
        v = self._root(atom)
        if type(v) is not Var:
            return 0
        g = self.group_of.get(v)
        if g is not None:
            return g.ids | g.deps
        return self.vanc.get(v, 0)

    def _freeze_source(self, atom, reader: Group | None):
        v = self._root(atom)
        g = self.group_of.get(v) if type(v) is Var else None
        if g is not None and g is not reader:
            g.frozen = True

    # ---- equations ----
    def add(self, i, e):
        if is_view(e):
            self.virtual[e.outvars[0]] = i
            return
        if self.fusable(e) and self._fuse(i, e):
            return
        self.driver.add(i)
        a = 0
        for x in e.invars:
            a |= self.anc(x)
            self._freeze_source(x, None)
        for v in e.outvars:
            self.vanc[v] = a

    def _fuse(self, i, e) -> bool:
        cands = []
        group_of, virtual = self.group_of, self.virtual
        for x in e.invars:
            if type(x) is not Var:
                continue
            g = group_of.get(self._root(x) if x in virtual else x)
            if g is not None and g not in cands:
                cands.append(g)
        if len(cands) > 1:
            cands.sort(key=lambda g: (not g.frozen, -g.gid))
        for g in cands:
            if g.gid in self.dead:
                continue
            for h in cands:
                if h is not g and h.gid not in self.dead and self._can_merge(g, h):
                    self._merge(g, h)
            if len(g.members) < MAX_GROUP_EQNS and self._join(g, i, e):
                return True
        shape = self._domain_of(e)
        if math.prod(shape) <= 1:
            return False                       # empty, or scalar work: NumPy in the driver
        g = Group(len(self.groups), shape)
        if not self._join(g, i, e):
            return False
        self.groups.append(g)
        return True

    def _can_merge(self, g: Group, h: Group) -> bool:
        """Can h (never read outside yet) become part of g without making a cycle?"""
        if h.frozen or h.domain != g.domain or (g.inner and h.inner and g.inner != h.inner):
            return False
        if len(g.members) + len(h.members) > MAX_GROUP_EQNS:
            return False
        for w, dm in h.inputs:
            if w in g.dmaps:
                if g.dmaps[w] != dm:
                    return False               # h reads g's value at another index map
            elif self.anc(w) & g.ids:
                return False                   # a path g -> outside -> h
        extra = h.deps & ~g.ids
        return not (g.frozen and extra & ~g.deps)

    def _merge(self, g: Group, h: Group) -> None:
        for i in h.members:
            g.operands[i] = [("m", r[1]) if r[0] == "in" and r[1] in g.dmaps else r
                             for r in h.operands[i]]
        g.members = sorted(g.members + h.members)
        g.dmaps.update(h.dmaps)
        for v in h.dmaps:
            self.group_of[v] = g
        g.inputs += [x for x in h.inputs if x[0] not in g.dmaps and x not in g.inputs]
        g.deps |= h.deps & ~g.ids
        g.ids |= h.ids
        g.unit_reductions |= h.unit_reductions
        g.inner = g.inner or h.inner
        self.dead.add(h.gid)

    def _domain_of(self, e):
        """The domain a new group seeded by e would have."""
        if e.primitive in REDUCTIONS:
            return e.invars[0].aval.shape
        return e.outvars[0].aval.shape

    def _forward(self, g: Group, atom):
        """atom's dmap in g if it is (a view of) a member of g, else None."""
        if type(atom) is not Var:
            return None
        if not atom.aval.shape:
            return ()
        chain = []
        v = atom
        while v in self.virtual:
            j = self.virtual[v]
            chain.append(j)
            v = self.eqns[j].invars[0]
            if type(v) is not Var:
                return None
        if v not in g.dmaps:
            return None
        d = g.dmaps[v]
        for j in reversed(chain):
            d = view_forward(self.eqns[j], d, g.domain)
            if d is None:
                return None
        return d

    def _resolve(self, g: Group, atom, want, inputs: list):
        """("lit", Literal) | ("m", Var) | ("in", Var, dmap); None where it can't."""
        if type(atom) is Literal:
            return ("lit", atom)
        if atom in g.dmaps:
            return ("m", atom) if g.dmaps[atom] == want else None
        if atom in self.virtual:
            e = self.eqns[self.virtual[atom]]
            back = view_backward(e, want)
            r = self._resolve(g, e.invars[0], back, inputs)
            if r is not None:
                return r
        if len(want) != len(atom.aval.shape):
            return None
        for d, n in zip(want, atom.aval.shape):
            if (d is None and n != 1) or (d is not None and n != g.domain[d]):
                return None
        inputs.append(atom)
        return ("in", atom, want)

    def _join(self, g: Group, i, e) -> bool:
        domain = g.domain
        new_inner = None
        unit = False                                   # a reduction over size-1 dims only
        if e.primitive in REDUCTIONS:
            x = e.invars[0]
            d_in = self._forward(g, x)
            if d_in is None:
                d_in = identity_dmap(domain, x.aval.shape)
            if d_in is None:
                return False
            axes = e.params["axes"]
            reduced = {d_in[a] for a in axes if d_in[a] is not None}
            if not reduced:
                unit = True
            elif g.inner:
                if reduced != g.inner:
                    return False
            elif not _trailing(domain, reduced):
                return False
            else:
                new_inner = frozenset(reduced)
            d_out = tuple(d for k, d in enumerate(d_in) if k not in axes)
            wants = [d_in]
        else:
            d_out = None
            for x in e.invars:
                if type(x) is Var and x.aval.shape == e.outvars[0].aval.shape:
                    d = self._forward(g, x)
                    if d is None:
                        continue
                    if d_out is None:
                        d_out = d
                    elif d != d_out:
                        return False
            if d_out is None:
                d_out = identity_dmap(domain, e.outvars[0].aval.shape)
            if d_out is None:
                return False
            wants = [d_out if x.aval.shape else () for x in e.invars]
        inputs: list = []
        resolved = []
        for x, w in zip(e.invars, wants):
            r = self._resolve(g, x, w, inputs)
            if r is None:
                return False
            resolved.append(r)
        a_all = 0
        for v in inputs:
            a = self.anc(v)
            if a & g.ids:
                return False                   # v depends on g: joining makes a cycle
            a_all |= a
        if g.frozen and a_all & ~g.deps:
            return False
        # commit
        g.members.append(i)
        g.operands[i] = resolved
        if unit:
            g.unit_reductions.add(i)
        for v in e.outvars:
            g.dmaps[v] = d_out
            self.group_of[v] = g
        for r in resolved:
            if r[0] == "in" and (r[1], r[2]) not in g.inputs:
                g.inputs.append((r[1], r[2]))
        for v in inputs:
            self._freeze_source(v, g)
        g.deps |= a_all
        if new_inner is not None:
            g.inner = new_inner
        return True

    # ---- order ----
    def finish(self, outvars) -> list:
        eqns = self.eqns
        self.groups = [g for g in self.groups if g.gid not in self.dead]
        # views that something outside the groups reads are run in the driver
        needed = set()
        for i in self.driver:
            needed.update(x for x in eqns[i].invars if type(x) is Var)
        for g in self.groups:
            needed.update(v for v, _ in g.inputs)
        needed.update(v for v in outvars if type(v) is Var)
        for v, j in sorted(self.virtual.items(), key=lambda kv: -kv[1]):
            if v in needed:
                self.driver.add(j)
                x = eqns[j].invars[0]
                if type(x) is Var:
                    needed.add(x)
        for g in self.groups:
            g.outputs = [v for i in g.members for v in eqns[i].outvars if v in needed]
        # topological order of groups and driver eqns (Kahn, by first equation index)
        node_of: dict = {}
        nodes = []
        for g in self.groups:
            node_of[g] = len(nodes)
            nodes.append(("group", g))
        for i in sorted(self.driver):
            node_of[i] = len(nodes)
            nodes.append(("eqn", i))

        def src_node(v):
            if type(v) is not Var:
                return None
            g = self.group_of.get(v)
            if g is not None:
                return node_of[g]
            i = self.producer.get(v)
            return node_of.get(i)

        deps = []
        for kind, x in nodes:
            ins = [v for v, _ in x.inputs] if kind == "group" else eqns[x].invars
            deps.append({n for n in map(src_node, ins) if n is not None})
        users: list[list[int]] = [[] for _ in nodes]
        for n, ds in enumerate(deps):
            for d in ds:
                users[d].append(n)
        key = [x.members[0] if kind == "group" else x for kind, x in nodes]
        missing = [len(ds) for ds in deps]
        heap = [(key[n], n) for n in range(len(nodes)) if not missing[n]]
        heapq.heapify(heap)
        order = []
        while heap:
            _, n = heapq.heappop(heap)
            order.append(nodes[n])
            for u in users[n]:
                missing[u] -= 1
                if not missing[u]:
                    heapq.heappush(heap, (key[u], u))
        if len(order) != len(nodes):
            raise RuntimeError("numba fusion planner produced a cycle (a bug): "
                               f"{len(nodes) - len(order)} nodes unscheduled")
        return order

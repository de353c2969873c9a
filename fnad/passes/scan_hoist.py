"""Hoisting work out of scan loops: work that does not depend on the carry runs once for
all steps before the loop, and carries that only sum a product per step are summed by one
product after it.

A scan body runs once per step; each of its products is as small as one step's data, and
on the numba backend each of its equations costs a Python statement per step. Two kinds of
work in a body need not be done step by step:

    work on loop inputs       a dot_general whose operands depend only on the consts and
                              the xs (an RNN's x_t @ W_x), and elementwise, shape and
                              reduction ops of the xs, run before the loop over all steps
                              at once: the body's equations they need, vmapped over the
                              scan's length (fnad.batching.batch_jaxpr, so every
                              primitive's batching rule applies), give new xs operands (a
                              product of consts alone: a new const, computed once). A
                              `lax.map` of such ops is then one vectorized computation:
                              the ys that are only xs passed through are those xs.
    sums of products          a carry whose update is `c + e`, where c is read nowhere else
                              and e is a sum of terms, each a dot_general, a reduce_sum or
                              an xs slice (under transposes and reshapes), is the initial
                              value plus each term summed over the steps. The loop then
                              only stacks the terms' operands as new ys (an xs operand is
                              used as it is), and after it one dot_general contracts the
                              step axis too: the gradient of an RNN's weights, sum_t h_t^T dz_t,
                              becomes H^T DZ, one product over T·B rows, in place of T
                              products of B rows and T additions of a whole weight.

Both trade memory for speed: the stacked values are kept for all steps. A scan is
rewritten only where the new stacked arrays take at most as many bytes as the xs and ys it
already has, or 1 MiB (a gradient-accumulation loop over microbatches, whose per-step
activations are much larger than its xs, is left as it is). Only pure equations move
(nothing with effects or a sub-jaxpr, nothing whose batching would be a loop); DCE then
drops the carries and equations the loop no longer needs. Sums are reassociated (one
product over all steps in place of a running sum), as XLA's and every BLAS's blocking
already does. Same signature as the input program.
"""
from __future__ import annotations

from fnad import core
from fnad.core import ShapedArray
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from fnad.passes._util import (ELEMENTWISE, REDUCTIONS, Renamer, has_sub_jaxprs,
                               map_sub_jaxprs, nbytes, splice, with_eqns)
from fnad.passes.dce import read_counts
from fnad.primitives import elementwise as ew
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as sh
from fnad.primitives.control_flow import scan_p
from fnad.primitives.linalg import dot_general_p

__all__ = ["hoist_scans"]

# ops a per-step term may pass through on its way into the carry: linear, shape only, so
# that sum_t op(x_t) = op(sum_t x_t)
_PULL_THROUGH = frozenset({sh.transpose_p, sh.reshape_p})
_ADDS = frozenset({ew.add_p, ew.add_any_p})
# per-step work that moves out of a loop when it reads the xs (besides dot_general, which
# moves also when it reads consts only): the ops whose batched form is the same op on one
# more leading axis. Other equations move only as what these need.
_STEPWISE = ELEMENTWISE | REDUCTIONS | frozenset({
    sh.broadcast_in_dim_p, sh.reshape_p, sh.transpose_p, sh.squeeze_p})


def hoist_scans(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Work on loop inputs before, sums of per-step products after each scan; same
    signature."""
    return _hoist(closed, {})


def _hoist(closed: ClosedJaxpr, memo: dict) -> ClosedJaxpr:
    j = closed.jaxpr
    ren = Renamer()
    eqns: list[JaxprEqn] = []
    changed = False
    for eqn in j.eqns:
        new = ren.eqn(eqn)
        if has_sub_jaxprs(new):
            new = map_sub_jaxprs(new, lambda c: _hoist(c, memo), memo)
        changed = changed or new is not eqn
        if new.primitive is scan_p and not new.params["jaxpr"].jaxpr.constvars:
            before, after = [], []
            for rewrite in (_products_before, _sums_after, _xs_passed_through):
                out = rewrite(new)
                if out is not None:
                    pre, new, post, rewired = out
                    before += pre
                    after += post
                    for v, a in rewired.items():
                        ren[v] = a
                    changed = True
            eqns += before + [new] + after
            continue
        eqns.append(new)
    outvars = [ren(v) for v in j.outvars]
    if not changed and all(a is b for a, b in zip(outvars, j.outvars)):
        return closed
    return with_eqns(closed, eqns, outvars)


# ---- work on loop inputs --------------------------------------------------------------------
def _products_before(eqn: JaxprEqn):
    """(eqns before, the new scan, eqns after, {}) with the body's dot_generals of consts
    and xs, and its _STEPWISE ops of the xs, computed before the loop, or None where there
    are none (or they would take too much memory)."""
    p = eqn.params
    bj, nc, ncar, length = p["jaxpr"].jaxpr, p["num_consts"], p["num_carry"], p["length"]
    consts, xs = bj.invars[:nc], bj.invars[nc + ncar:]
    variant = set(bj.invars[nc:nc + ncar])          # what depends on the carry (or may not move)
    stepwise = set(xs)                              # what depends on the xs
    producer: dict[Var, JaxprEqn] = {}
    candidates = []
    for e in bj.eqns:
        reads = [a for a in e.invars if type(a) is Var]
        if (any(a in variant for a in reads) or has_sub_jaxprs(e)
                or e.primitive in core.effectful_primitives):
            variant.update(e.outvars)
            continue
        for v in e.outvars:
            producer[v] = e
        if any(a in stepwise for a in reads):
            stepwise.update(e.outvars)
        if e.primitive is dot_general_p or (e.primitive in _STEPWISE
                                            and e.outvars[0] in stepwise):
            candidates.append(e)
    if not candidates:
        return None
    budget = _stacked_bytes(eqn)
    moved: set[int] = set()                        # ids of the body eqns that move
    for cand in candidates:
        need = _ancestors(cand, producer) - moved
        if any(e.primitive not in core.batch_rules for e in bj.eqns if id(e) in need):
            continue                              # (a batch by a loop: no gain)
        cost = sum(nbytes(v.aval) * (length if v in stepwise else 1)
                   for e in bj.eqns if id(e) in need for v in e.outvars)
        if cost > budget:
            continue
        budget -= cost
        moved |= need
    if not moved:
        return None
    body_eqns = [e for e in bj.eqns if id(e) in moved]        # (in program order)
    read = {a for e in body_eqns for a in e.invars if type(a) is Var}
    ins = [v for v in consts + xs if v in read]
    # what the loop still reads of the moved values: they enter it as consts or xs
    used = {a for e in bj.eqns if id(e) not in moved for a in e.invars if type(a) is Var}
    used.update(v for v in bj.outvars if type(v) is Var)
    outs = [v for e in body_eqns for v in e.outvars if v in used]
    if not outs:
        return None
    sub = ClosedJaxpr(Jaxpr([], ins, body_eqns, outs), [])
    from fnad.batching import batch_jaxpr
    batched, out_batched = batch_jaxpr(sub, length, [v in stepwise for v in ins], False)
    outer = dict(zip(bj.invars, eqn.invars))
    before, results = splice(batched.jaxpr,
                             dict(zip(batched.jaxpr.invars, (outer[v] for v in ins))))
    # the new body: each moved value it reads becomes an invar (a const or an xs slice)
    new_consts = [(Var(v.aval), r) for v, r, b in zip(outs, results, out_batched) if not b]
    new_xs = [(Var(v.aval), r) for v, r, b in zip(outs, results, out_batched) if b]
    ren = Renamer()
    it_c, it_x = iter(new_consts), iter(new_xs)
    for v, b in zip(outs, out_batched):
        ren[v] = next(it_x if b else it_c)[0]
    new_body = Jaxpr([], consts + [w for w, _ in new_consts] + bj.invars[nc:] +
                     [w for w, _ in new_xs],
                     [ren.eqn(e) for e in bj.eqns if id(e) not in moved],
                     [ren(v) for v in bj.outvars])
    invars = (eqn.invars[:nc] + [r for _, r in new_consts] + eqn.invars[nc:] +
              [r for _, r in new_xs])
    new = eqn.replace(invars=invars, params=dict(p, jaxpr=ClosedJaxpr(new_body, []),
                                                 num_consts=nc + len(new_consts)))
    return before, new, [], {}


def _xs_passed_through(eqn: JaxprEqn):
    """([], the scan, [], {ys: the xs}) where a ys of the body is one of its xs slices as it
    came in (so the stacked ys are that xs operand), or None. DCE then drops those ys, and a
    scan left with nothing to do (a lax.map whose work all moved before it)."""
    p = eqn.params
    bj, nc, ncar = p["jaxpr"].jaxpr, p["num_consts"], p["num_carry"]
    outer = dict(zip(bj.invars[nc + ncar:], eqn.invars[nc + ncar:]))
    rewired = {}
    for v, y in zip(bj.outvars[ncar:], eqn.outvars[ncar:]):
        x = outer.get(v) if type(v) is Var else None
        if x is not None and x.aval == y.aval:
            rewired[y] = x
    return ([], eqn, [], rewired) if rewired else None


def _ancestors(eqn: JaxprEqn, producer: dict) -> set[int]:
    """ids of `eqn` and the movable body eqns it reads, transitively."""
    seen, todo = set(), [eqn]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        todo += [producer[a] for a in e.invars if type(a) is Var and a in producer]
    return seen


# ---- sums of per-step products --------------------------------------------------------------
def _sums_after(eqn: JaxprEqn):
    """(eqns before, the new scan, eqns after, {carry out: its sum}) with each carry that only
    adds up per-step products computed after the loop from stacked operands, or None."""
    p = eqn.params
    bj, nc, ncar, length = p["jaxpr"].jaxpr, p["num_consts"], p["num_carry"], p["length"]
    consts, carry, xs = bj.invars[:nc], bj.invars[nc:nc + ncar], bj.invars[nc + ncar:]
    producer = {v: e for e in bj.eqns for v in e.outvars}
    reads = read_counts([e.invars for e in bj.eqns], bj.outvars)
    outer = dict(zip(bj.invars, eqn.invars))
    xs_outer = {v: outer[v] for v in xs}
    const_outer = {v: outer[v] for v in consts}
    budget = _stacked_bytes(eqn)
    stacked: dict[Var, Var] = {}                 # body var -> its new ys outvar
    found = []                                   # (carry index, terms)
    for k, (c, out) in enumerate(zip(carry, bj.outvars[:ncar])):
        update = producer.get(out)
        if (reads.get(c, 0) != 1 or update is None or update.primitive not in _ADDS
                or c not in update.invars or update.invars[0] is update.invars[1]):
            continue
        term = update.invars[1] if update.invars[0] is c else update.invars[0]
        terms = _terms(term, producer, out.aval, xs_outer)
        if terms is not None and not any(all(v in const_outer for v in base.invars)
                                         for _, base in terms):   # (loop invariants stay)
            found.append((k, terms))
    # a product's operands are stacked for it; a sum's operand only where it is stacked
    # anyway (an xs; a product's operand, as an RNN's bias gradient is): stacking it for the
    # sum alone would trade the loop's reduction for as much memory traffic
    found.sort(key=lambda kt: not any(b.primitive is dot_general_p for _, b in kt[1]))
    hoisted = []
    for k, terms in found:
        new_ys = list(dict.fromkeys(   # (ordered: the program's text must not vary)
            v for _, base in terms if base.primitive is dot_general_p for v in base.invars
            if v not in xs_outer and v not in const_outer and v not in stacked))
        if not all(v in xs_outer or v in stacked or v in new_ys
                   for _, base in terms if base.primitive is not dot_general_p
                   for v in base.invars):
            continue
        cost = sum(nbytes(v.aval) for v in new_ys) * length
        if cost > budget:
            continue
        budget -= cost
        for v in new_ys:
            stacked[v] = Var(ShapedArray((length,) + v.aval.shape, v.aval.dtype,
                                         v.aval.weak_type))
        hoisted.append((k, terms))
    if not hoisted:
        return None

    def source(v):                               # a body var's value(s) outside the loop
        if v in const_outer:
            return const_outer[v], False
        return (xs_outer[v] if v in xs_outer else stacked[v]), True

    sources: list = []                           # outer atoms the after-computation reads
    index: dict = {}

    def arg(atom):
        if id(atom) not in index:
            index[id(atom)] = len(sources)
            sources.append(atom)
        return index[id(atom)]

    plan = [(arg(eqn.invars[nc + k]),
             [(chain, base, [(arg(source(v)[0]), source(v)[1]) for v in base.invars])
              for chain, base in terms]) for k, terms in hoisted]

    def after(*vals):
        return [_summed(vals[init], terms, vals) for init, terms in plan]

    from fnad.tracing import trace_to_subjaxpr
    closed, consts_ = trace_to_subjaxpr(after, [a.aval for a in sources], "scan sums")
    if consts_:
        return None
    post, results = splice(closed.jaxpr, dict(zip(closed.jaxpr.invars, sources)))
    rewired = {}
    for (k, _), r in zip(hoisted, results):
        if r.aval != eqn.outvars[k].aval:        # (a weak type the sum does not keep)
            return None
        rewired[eqn.outvars[k]] = r
    body = Jaxpr([], bj.invars, bj.eqns, bj.outvars + list(stacked))
    new = eqn.replace(outvars=eqn.outvars + list(stacked.values()),
                      params=dict(p, jaxpr=ClosedJaxpr(body, [])))
    return [], new, post, rewired


def _terms(v: Var, producer: dict, aval: ShapedArray, xs: set):
    """[(chain, base)]: v as a sum of terms, each `base` (a dot_general or reduce_sum eqn)
    under `chain` (transposes and reshapes, innermost first); None where a term is
    anything else. An xs slice itself is a reduce_sum over no axes (an eqn made here, in no
    program: `c + x_t` sums the xs operand over the steps)."""
    if v in xs:
        return [([], JaxprEqn(red.reduce_sum_p, [v], {"axes": ()}, [v], None))]
    e = producer.get(v)
    if e is None:
        return None
    if e.primitive in _ADDS:
        if any(type(a) is not Var or a.aval.shape != aval.shape for a in e.invars):
            return None
        left = _terms(e.invars[0], producer, aval, xs)
        right = _terms(e.invars[1], producer, aval, xs) if left is not None else None
        return None if right is None else left + right
    if e.primitive in _PULL_THROUGH:
        inner = _terms(e.invars[0], producer, e.invars[0].aval, xs)
        return None if inner is None else [(chain + [e], base) for chain, base in inner]
    if e.primitive is dot_general_p or e.primitive is red.reduce_sum_p:
        if any(type(a) is not Var for a in e.invars):
            return None
        return [([], e)]
    return None


def _summed(init, terms, vals):
    """init + each term summed over the loop's steps (traced)."""
    total = None
    for chain, base, args in terms:
        ops = [(vals[i], is_stacked) for i, is_stacked in args]
        if base.primitive is dot_general_p:
            x = _dot_over_steps(base, ops)
        else:                                     # reduce_sum: the step axis too
            (x, _), = ops
            x = red.reduce_sum_p.bind(x, **dict(base.params, axes=(0,) + tuple(
                a + 1 for a in base.params["axes"])))
        for e in chain:
            x = e.primitive.bind(x, **e.params)
        total = x if total is None else ew.add_any_p.bind(total, x)
    return ew.add_any_p.bind(init, total)


def _dot_over_steps(base: JaxprEqn, ops):
    """sum_t dot_general(lhs_t, rhs_t): the step axis contracted in one dot_general where
    both are stacked, else the stacked one summed first."""
    (lhs, lhs_stacked), (rhs, rhs_stacked) = ops
    params = base.params
    if lhs_stacked and rhs_stacked:
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        up = lambda dims: tuple(d + 1 for d in dims)  # noqa: E731
        dims = (((0,) + up(lc), (0,) + up(rc)), (up(lb), up(rb)))
        return dot_general_p.bind(lhs, rhs, **dict(params, dimension_numbers=dims))
    if lhs_stacked:
        lhs = red.reduce_sum_p.bind(lhs, axes=(0,))
    else:
        rhs = red.reduce_sum_p.bind(rhs, axes=(0,))
    return dot_general_p.bind(lhs, rhs, **params)


# ---- shared ------------------------------------------------------------------------------------
SMALL_BYTES = 1 << 20        # stacked arrays a rewrite may add to any scan


def _stacked_bytes(eqn: JaxprEqn) -> int:
    """What a rewrite may add at most: the bytes of the scan's xs operands and ys results,
    or SMALL_BYTES where that is more."""
    p = eqn.params
    xs = eqn.invars[p["num_consts"] + p["num_carry"]:]
    ys = eqn.outvars[p["num_carry"]:]
    return max(SMALL_BYTES, sum(nbytes(a.aval) for a in xs + ys))

"""Control flow: `cond`/`switch`, `scan` (with `map` and static `fori_loop`), `while_loop`.

Each is one primitive whose params hold its bodies as ClosedJaxprs without
constants: values a body closes over are hoisted into explicit leading operands
(tracing.trace_to_subjaxpr), so every transformation sees them. Per primitive:

    cond_p(index, *ops; branches)          out = branches[index](*ops)
    scan_p(*consts, *carry, *xs; jaxpr,    carry, y_i = jaxpr(consts, carry, x_i)
           num_consts, num_carry, length,  for i in range(length) (reversed if reverse);
           reverse, unroll)                returns (carry, stacked ys)
    while_p(*cconsts, *bconsts, *carry;    while cond_jaxpr(cconsts, carry):
            cond_jaxpr, body_jaxpr, ...)       carry = body_jaxpr(bconsts, carry)

and for each: abstract eval, an eager rule (bind the body's primitives on the
arrays), a JVP (the JVP of the body, fnad.ad.jvp_jaxpr), the split into a known
and an unknown part that reverse mode needs (fnad.partial_eval), a transpose
for the linear part (the transposed body runs the loop backwards), and a
batching rule (fnad.batching.batch_jaxpr; a batched `cond` index becomes a
select, a batched `while` predicate runs until every member is done). Reverse
mode through `while_loop` is an error (linearize works; transposing fails): its
trip count is unknown, so the residuals cannot be stored; `fori_loop` with static
bounds lowers to `scan`.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import core, dtypes, tree_util
from fnad.core import (Array, ShapedArray, Tracer, Zero, get_aval, is_undefined,
                       abstract_eval_rules, batch_rules, eager_rules, jvp_rules,
                       partial_eval_rules, transpose_rules)
from fnad.ir import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from fnad.partial_eval import (Split, dce_jaxpr, forward_known_rule, out_map,
                                partial_eval_jaxpr, split_rules)
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.primitives.logic import clamp, convert_element_type, ne, select_n
from fnad.primitives.reductions import reduce_or
from fnad.primitives.shape_ops import broadcast_in_dim, concatenate, full, index_in_dim, \
    reshape
from fnad.tracing import trace_to_subjaxpr

__all__ = ["associative_scan", "cond", "fori_loop", "map", "scan", "switch", "while_loop"]


# ---- helpers ---------------------------------------------------------------------------
def _closed(jaxpr: Jaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, [])


def _permute_invars(closed: ClosedJaxpr, order) -> ClosedJaxpr:
    j = closed.jaxpr
    return _closed(Jaxpr([], [j.invars[i] for i in order], j.eqns, j.outvars))


def _permute_outvars(closed: ClosedJaxpr, order) -> ClosedJaxpr:
    j = closed.jaxpr
    return _closed(Jaxpr([], j.invars, j.eqns, [j.outvars[i] for i in order]))


def _with_extra_invars(closed: ClosedJaxpr, avals, at: int) -> ClosedJaxpr:
    """`closed` taking extra unused inputs of `avals`, inserted at position `at`."""
    j = closed.jaxpr
    new = [Var(a) for a in avals]
    return _closed(Jaxpr([], j.invars[:at] + new + j.invars[at:], j.eqns, j.outvars))


def _split_list(xs, *sizes):
    out, start = [], 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


def _as_arrays(outs, avals):
    """Eager results as Arrays with the avals the abstract eval promised."""
    res = []
    for o, a in zip(outs, avals):
        if type(o) is Array and o.aval == a:
            res.append(o)
        elif type(o) is Array:
            res.append(Array(o._value, a, o._backend))
        else:
            backend = core.default_backend()
            res.append(Array(backend.device_put(np.asarray(o, a.dtype)), a, backend))
    return res


def _zeros(aval: ShapedArray):
    return full(aval.shape, 0, aval.dtype)


def _instantiate(t, aval):
    return _zeros(aval.to_tangent_aval()) if type(t) is Zero else t


def _stack(parts, aval: ShapedArray, length: int):
    """parts[i] (each of `aval`) stacked along a new leading axis of size `length`."""
    if length == 0:
        return _zeros(ShapedArray((0,) + aval.shape, aval.dtype, aval.weak_type))
    dims = tuple(range(1, len(aval.shape) + 1))
    return concatenate([broadcast_in_dim(p, (1,) + aval.shape, dims) for p in parts], 0)


def _type_str(avals) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _stage_flat(fun, in_tree, in_avals, what: str):
    """Stage `fun(*pytree args)` at flat `in_avals`: (ClosedJaxpr, consts, out_tree)."""
    box: list = []

    def flat_fun(*flat):
        out = fun(*tree_util.tree_unflatten(in_tree, list(flat)))
        leaves, tree = tree_util.tree_flatten(out)
        box.append(tree)
        return leaves
    closed, consts = trace_to_subjaxpr(flat_fun, in_avals, what)
    return closed, consts, box[0]


def _promote_weak(init_flat, out_avals):
    """Weakly typed initial values of another dtype than the body gives them take that dtype
    (strongly typed), as JAX. A carry whose types differ only in weak type stays so: the body
    sees the initial value's weak type and the loop returns the body's (JAX's rule)."""
    changed = False
    res = []
    for x, out in zip(init_flat, out_avals):
        a = get_aval(x)
        if a.weak_type and a.dtype != out.dtype:
            x = convert_element_type(x, out.dtype, False)
            changed = True
        res.append(x)
    return res, changed


def _check_carry(what: str, in_tree, out_tree, in_avals, out_avals):
    if in_tree != out_tree:
        raise TypeError(f"{what} must have the same pytree structure as its input carry; "
                        f"the input carry is {in_tree} but the output is {out_tree}")
    for i, (a, b) in enumerate(zip(in_avals, out_avals)):
        if a.shape == b.shape and a.dtype != b.dtype and a.weak_type and \
                dtypes.result_type(a, b) == b.dtype:
            continue                  # a weak initial value: _promote_weak retypes it, as JAX
        if a.shape != b.shape or a.dtype != b.dtype:
            raise TypeError(f"{what} must have the same types as its input carry, but leaf "
                            f"{i} goes in as {a.str_short()} and comes out as "
                            f"{b.str_short()}; the input carry is {_type_str(in_avals)} "
                            f"and the output carry {_type_str(out_avals)}")


def _all_unknown(unknowns, n_out) -> Split:
    return Split(None, [], 0, None, [("in", j) for j in range(len(unknowns))],
                 [("unknown", i) for i in range(n_out)])


# ---- cond / switch -----------------------------------------------------------------------
cond_p = core.Primitive("cond", multiple_results=True)


def switch(index, branches, *operands):
    """branches[index](*operands), with index clamped into range (lax.switch).

    Every branch is traced (they must return the same types); only the chosen one
    runs. Under vmap a batched index evaluates every branch and selects.
    """
    branches = tuple(branches)
    if not branches:
        raise ValueError("switch: branches must be a non-empty sequence of callables")
    for i, b in enumerate(branches):
        if not callable(b):
            raise TypeError(f"switch: branch {i} is not callable: {b!r}")
    aval = get_aval(index)
    if aval.shape:
        raise TypeError(f"switch: the branch index must be a scalar, got shape {aval.shape}")
    if not dtypes.is_int(aval.dtype):
        raise TypeError(f"switch: the branch index must be an integer, got {aval.dtype.name}")
    n = len(branches)
    index = convert_element_type(index, np.dtype(np.int32))
    index = clamp(np.int32(0), index, np.int32(n - 1))
    return _cond_bind(index, branches, operands, "switch")


def cond(pred, true_fun, false_fun, *operands):
    """true_fun(*operands) if pred else false_fun(*operands) (lax.cond).

    `pred` is a scalar bool or number. Both branches are traced and must return the
    same pytree of types; only the chosen one runs (under vmap with a batched pred
    both run and the results are selected, as in JAX).
    """
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun must be callable")
    aval = get_aval(pred)
    if aval.shape:
        raise TypeError(f"cond: the predicate must be a scalar, got an array of shape "
                        f"{aval.shape}; use fnad.numpy.where for an elementwise choice")
    if dtypes.is_bool(aval.dtype):
        index = convert_element_type(pred, np.dtype(np.int32))
    elif dtypes.is_int(aval.dtype) or dtypes.is_float(aval.dtype):
        index = convert_element_type(ne(pred, np.zeros((), aval.dtype)), np.dtype(np.int32))
    else:
        raise TypeError(f"cond: the predicate must be boolean or a real number, got "
                        f"{aval.dtype.name}")
    return _cond_bind(index, (false_fun, true_fun), operands, "cond")


def _cond_bind(index, funs, operands, what: str):
    flat, in_tree = tree_util.tree_flatten(tuple(operands))
    avals = [get_aval(x) for x in flat]
    traced = [_stage_flat(f, in_tree, avals, f"{what} branch {i}") for i, f in enumerate(funs)]
    out_tree = traced[0][2]
    names = ("false_fun", "true_fun") if what == "cond" else \
        tuple(f"branch {i}" for i in range(len(funs)))
    for (_, _, tree), name in zip(traced[1:], names[1:]):
        if tree != out_tree:
            raise TypeError(f"{what}: {names[0]} and {name} must return the same pytree "
                            f"structure, got {out_tree} and {tree}")
    out_avals = [c.out_avals for c, _, _ in traced]
    for avs, name in zip(out_avals[1:], names[1:]):
        for i, (a, b) in enumerate(zip(out_avals[0], avs)):
            if a.shape != b.shape or a.dtype != b.dtype:
                raise TypeError(f"{what}: {names[0]} and {name} must return the same types, "
                                f"but output leaf {i} is {a.str_short()} in one and "
                                f"{b.str_short()} in the other; {names[0]} returns "
                                f"{_type_str(out_avals[0])}, {name} {_type_str(avs)}")
    weak = [all(avs[i].weak_type for avs in out_avals) for i in range(len(out_avals[0]))]
    if any(avs[i].weak_type != w for avs in out_avals for i, w in enumerate(weak)):
        traced = [_stage_flat(_strong_outputs(f, weak), in_tree, avals, f"{what} branch {i}")
                  for i, f in enumerate(funs)]
    # every branch takes all branches' hoisted constants, then the operands
    all_consts = [c for _, consts, _ in traced for c in consts]
    const_avals = [get_aval(c) for c in all_consts]
    branches, start = [], 0
    for closed, consts, _ in traced:
        j = closed.jaxpr
        k = len(consts)
        before = [Var(a) for a in const_avals[:start]]
        after = [Var(a) for a in const_avals[start + k:]]
        branches.append(_closed(Jaxpr([], before + j.invars[:k] + after + j.invars[k:],
                                      j.eqns, j.outvars)))
        start += k
    outs = cond_p.bind(index, *all_consts, *flat, branches=tuple(branches))
    return tree_util.tree_unflatten(out_tree, outs)


def _strong_outputs(fun, weak):
    """`fun` with its strongly typed outputs where some branch returns a strong type."""
    def wrapped(*args):
        out = fun(*args)
        leaves, tree = tree_util.tree_flatten(out)
        leaves = [x if w or not get_aval(x).weak_type else
                  convert_element_type(x, get_aval(x).dtype, False)
                  for x, w in zip(leaves, weak)]
        return tree_util.tree_unflatten(tree, leaves)
    return wrapped


def cond_abstract_eval(index, *ops, branches):
    if index.shape or index.dtype != np.int32:
        raise core.shape_error("cond", f"the index must be an int32 scalar, got "
                               f"{index.str_short()}")
    for i, b in enumerate(branches):
        if [(a.shape, a.dtype) for a in b.in_avals] != [(a.shape, a.dtype) for a in ops]:
            raise core.shape_error("cond", f"branch {i} takes {_type_str(b.in_avals)} but the "
                                   f"operands are {_type_str(ops)}")
    outs = branches[0].out_avals
    return [a.update(weak_type=all(b.out_avals[i].weak_type for b in branches))
            for i, a in enumerate(outs)]


def cond_eager(index, *ops, branches):
    i = min(max(int(np.asarray(index)), 0), len(branches) - 1)
    outs = eval_jaxpr(branches[i].jaxpr, [], *ops)
    return _as_arrays(outs, cond_abstract_eval(get_aval(index),
                                               *[get_aval(x) for x in ops], branches=branches))


def cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    nz = [type(t) is not Zero for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for b in branches:
        _, b_nz, _ = jvp_jaxpr(b, nz, False)
        out_nz = [x or y for x, y in zip(out_nz, b_nz)]
    results = [jvp_jaxpr(b, nz, out_nz) for b in branches]
    # Each branch's JVP takes its own hoisted constants first; every branch is given
    # all of them (the others' unused), so that the branches keep one signature.
    const_avals = [[get_aval(c) for c in r[2]] for r in results]
    jvps = tuple(_with_extra_invars(_with_extra_invars(
        r[0], [a for cs in const_avals[k + 1:] for a in cs], len(const_avals[k])),
        [a for cs in const_avals[:k] for a in cs], 0) for k, r in enumerate(results))
    tans = [t for t, n in zip(tangents[1:], nz) if n]
    consts = [c for r in results for c in r[2]]
    outs = cond_p.bind(index, *consts, *ops, *tans, branches=jvps)
    n = len(out_nz)
    it = iter(outs[n:])
    out_tans = [next(it) if z else Zero(a.to_tangent_aval())
                for z, a in zip(out_nz, branches[0].out_avals)]
    return outs[:n], out_tans


def cond_split(params, unknowns) -> Split:
    branches = params["branches"]
    n_out = len(branches[0].out_avals)
    if unknowns[0]:
        return _all_unknown(unknowns, n_out)
    ops_uk = unknowns[1:]
    out_uk = [False] * n_out
    for b in branches:
        _, _, b_uk, _ = partial_eval_jaxpr(b.jaxpr, ops_uk)
        out_uk = [x or y for x, y in zip(out_uk, b_uk)]
    parts = [partial_eval_jaxpr(b.jaxpr, ops_uk, out_uk) for b in branches]
    res_avals = [v.aval for _, _, _, res in parts for v in res]
    n_res = len(res_avals)
    known_branches, unknown_branches, start = [], [], 0
    for jk, ju, _, res in parts:
        k = len(res)
        n_known = len(jk.outvars) - k
        known_branches.append(_known_branch(jk, n_known, res_avals, start))
        before = [Var(a) for a in res_avals[:start]]
        after = [Var(a) for a in res_avals[start + k:]]
        unknown_branches.append(_closed(Jaxpr([], before + ju.invars[:k] + after +
                                              ju.invars[k:], ju.eqns, ju.outvars)))
        start += k
    known_ins = [0] + [j + 1 for j, u in enumerate(ops_uk) if not u]
    unknown_ins = [("in", 0)] + [("res", r) for r in range(n_res)] + \
        [("in", j + 1) for j, u in enumerate(ops_uk) if u]
    outs = out_map(out_uk)
    known_params = dict(branches=tuple(known_branches)) if not all(out_uk) or n_res else None
    return Split(known_params, known_ins if known_params else [], n_res,
                 dict(branches=tuple(unknown_branches)), unknown_ins, outs)


def _known_branch(jk: Jaxpr, n_known: int, res_avals, start: int) -> ClosedJaxpr:
    """A known branch returning its known outputs, then every branch's residual slots
    (its own filled, the others zeros)."""
    def f(*args):
        outs = eval_jaxpr(jk, [], *args)
        own = outs[n_known:]
        return outs[:n_known] + [_zeros(a) for a in res_avals[:start]] + own + \
            [_zeros(a) for a in res_avals[start + len(own):]]
    closed, consts = trace_to_subjaxpr(f, jk.in_avals, "cond branch (known part)")
    assert not consts
    return closed


def cond_transpose(cts, index, *ops, branches):
    if is_undefined(index):
        raise NotImplementedError("cond: cannot transpose with respect to the index")
    linear = [is_undefined(x) for x in ops]
    nonlin = [x for x in ops if not is_undefined(x)]
    out_avals = branches[0].out_avals
    cts = [_instantiate(ct, a) for ct, a in zip(cts, out_avals)]
    in_avals = [get_aval(x) for x in nonlin] + [get_aval(ct) for ct in cts]
    traced = [trace_to_subjaxpr(transpose_jaxpr_fn(b.jaxpr, linear), in_avals,
                                "transpose of a cond branch") for b in branches]
    # Constants a custom rule's bwd created lead each branch's operands; every branch is
    # given all of them (the others' unused), so that the branches keep one signature.
    const_avals = [[get_aval(c) for c in consts] for _, consts in traced]
    transposed = tuple(_with_extra_invars(_with_extra_invars(
        t, [a for cs in const_avals[k + 1:] for a in cs], len(const_avals[k])),
        [a for cs in const_avals[:k] for a in cs], 0) for k, (t, _) in enumerate(traced))
    hoisted = [c for _, consts in traced for c in consts]
    res = iter(cond_p.bind(index, *hoisted, *nonlin, *cts, branches=transposed))
    return [None] + [next(res) if lin else None for lin in linear]


def cond_batch(vals, dims, *, branches):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    index, ops = vals[0], vals[1:]
    ops = [v if d is None else moveaxis(v, d, 0) for v, d in zip(ops, dims[1:])]
    in_b = [d is not None for d in dims[1:]]
    if dims[0] is not None:                 # a batched index: run every branch, select
        index = moveaxis(index, dims[0], 0)
        outs_per_branch = []
        for b in branches:
            bb, _ = batch_jaxpr(b, size, in_b, True)
            outs_per_branch.append(eval_jaxpr(bb.jaxpr, [], *ops))
        outs = []
        for k in range(len(branches[0].out_avals)):
            cases = [o[k] for o in outs_per_branch]
            shape = get_aval(cases[0]).shape
            which = broadcast_in_dim(index, shape, (0,))
            outs.append(select_n(which, *cases))
        return outs, [0] * len(outs)
    out_b = [False] * len(branches[0].out_avals)
    for b in branches:
        _, bb = batch_jaxpr(b, size, in_b, False)
        out_b = [x or y for x, y in zip(out_b, bb)]
    new = tuple(batch_jaxpr(b, size, in_b, out_b)[0] for b in branches)
    outs = cond_p.bind(index, *ops, branches=new)
    return outs, [0 if b else None for b in out_b]


abstract_eval_rules[cond_p] = cond_abstract_eval
eager_rules[cond_p] = cond_eager
jvp_rules[cond_p] = cond_jvp
split_rules[cond_p] = cond_split
partial_eval_rules[cond_p] = forward_known_rule(cond_p, cond_split)
transpose_rules[cond_p] = cond_transpose
batch_rules[cond_p] = cond_batch


# ---- scan ----------------------------------------------------------------------------------
scan_p = core.Primitive("scan", multiple_results=True)


def scan(f, init, xs=None, length=None, reverse: bool = False, unroll: int | bool = 1,
         _split_transpose: bool = False):
    """Loop `f(carry, x) -> (carry, y)` over the leading axis of `xs` (lax.scan).

    Returns (final carry, ys stacked along a new leading axis). `xs` may be None
    with `length` given; `reverse` runs from the end; `unroll` is accepted for
    compatibility (fnad's eager and jit loops do not unroll). A weakly typed initial carry
    of another dtype than the body returns takes the body's dtype; one that differs only in
    weak type stays weak where the body reads it (so ys computed from it are weak), and the
    final carry has the body's type, as in JAX.
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {f!r}")
    if not isinstance(unroll, (bool, int, np.integer)) or (
            not isinstance(unroll, bool) and unroll < 0):
        raise ValueError(f"scan: unroll must be a non-negative int or a bool, got {unroll!r}")
    xs_flat, xs_tree = tree_util.tree_flatten(xs)
    lengths = set()
    for i, x in enumerate(xs_flat):
        a = get_aval(x)
        if not a.shape:
            raise ValueError(f"scan: every leaf of xs needs a leading axis to scan over, but "
                             f"leaf {i} is a scalar")
        lengths.add(a.shape[0])
    if length is not None:
        length = operator.index(length)
        if lengths and lengths != {length}:
            raise ValueError(f"scan got length={length} but xs has leading axis sizes "
                             f"{sorted(lengths)}")
    elif len(lengths) > 1:
        detail = ", ".join(f"leaf {i}: {get_aval(x).shape[0]}" for i, x in enumerate(xs_flat))
        raise ValueError(f"scan: all leaves of xs must have the same leading axis size, "
                         f"got {detail}")
    elif not lengths:
        raise ValueError("scan: length must be given when xs is None or has no leaves")
    else:
        length = lengths.pop()
    init_flat, init_tree = tree_util.tree_flatten(init)
    x_avals = [get_aval(x).update(shape=get_aval(x).shape[1:]) for x in xs_flat]

    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: the body function {getattr(f, '__name__', f)} must return "
                            f"a pair (carry, y), got {type(out).__name__}")
        return out

    in_tree = tree_util.tree_structure((init, xs))
    for _ in range(2):
        carry_avals = [get_aval(x) for x in init_flat]
        closed, consts, out_tree = _stage_flat(body, in_tree, carry_avals + x_avals,
                                               "scan body")
        carry_tree, y_tree = _pair_trees(out_tree)
        n_carry = len(init_flat)
        out_carry_avals = closed.out_avals[:carry_tree.num_leaves]
        _check_carry("scan: the body function's output carry", init_tree, carry_tree,
                     carry_avals, out_carry_avals)
        init_flat, changed = _promote_weak(init_flat, out_carry_avals)
        if not changed:
            break
    outs = scan_p.bind(*consts, *init_flat, *xs_flat, jaxpr=closed, num_consts=len(consts),
                       num_carry=n_carry, length=length, reverse=bool(reverse),
                       unroll=unroll)
    carry = tree_util.tree_unflatten(init_tree, outs[:n_carry])
    ys = tree_util.tree_unflatten(y_tree, outs[n_carry:])
    return carry, ys


def _pair_trees(tree):
    """The treedefs of the two halves of a (carry, y) output treedef."""
    leaves = list(range(tree.num_leaves))
    carry, y = tree_util.tree_unflatten(tree, leaves)
    c_leaves, c_tree = tree_util.tree_flatten(carry)
    _, y_tree = tree_util.tree_flatten(y)
    return c_tree, y_tree


def scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse, unroll):
    ins = jaxpr.in_avals
    if len(avals) != len(ins):
        raise core.shape_error("scan", f"the body takes {len(ins)} inputs, got {len(avals)}")
    consts, carry, xs = _split_list(avals, num_consts, num_carry)
    for i, (a, b) in enumerate(zip(consts + carry, ins)):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise core.shape_error("scan", f"operand {i} is {a.str_short()} but the body "
                                   f"takes {b.str_short()}")
    for i, (a, b) in enumerate(zip(xs, ins[num_consts + num_carry:])):
        if a.shape != (length,) + b.shape or a.dtype != b.dtype:
            raise core.shape_error("scan", f"xs leaf {i} is {a.str_short()} but the body "
                                   f"takes slices {b.str_short()} over length {length}")
    outs = jaxpr.out_avals
    ys = [ShapedArray((length,) + a.shape, a.dtype, a.weak_type) for a in outs[num_carry:]]
    return list(outs[:num_carry]) + ys


def scan_eager(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    out_avals = scan_abstract_eval(*[get_aval(a) for a in args], jaxpr=jaxpr,
                                   num_consts=num_consts, num_carry=num_carry, length=length,
                                   reverse=reverse, unroll=unroll)
    consts, carry, xs = _split_list(args, num_consts, num_carry)
    steps = []
    for i in (reversed(range(length)) if reverse else range(length)):
        x = [index_in_dim(v, i, 0, keepdims=False) for v in xs]
        outs = eval_jaxpr(jaxpr.jaxpr, [], *consts, *carry, *x)
        carry = outs[:num_carry]
        steps.append(outs[num_carry:])
    if reverse:
        steps.reverse()
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [_stack([s[k] for s in steps], a, length) for k, a in enumerate(y_avals)]
    return _as_arrays(list(carry) + ys, out_avals)


def scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    n_ys = len(jaxpr.out_avals) - num_carry
    nz = [type(t) is not Zero for t in tangents]
    const_nz, init_nz, xs_nz = _split_list(nz, num_consts, num_carry)
    carry_nz = init_nz
    for _ in range(num_carry + 1):                  # carries with a tangent: a fixed point
        _, out_nz, _ = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                 carry_nz + [False] * n_ys)
        new = [a or b for a, b in zip(carry_nz, out_nz[:num_carry])]
        if new == carry_nz:
            break
        carry_nz = new
    jvp, out_nz, hoisted = jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                     carry_nz + [False] * n_ys)
    ys_nz = out_nz[num_carry:]
    # jvp's layout: [hoisted, consts, carry, xs, const tans, carry tans, xs tans] ->
    #               [hoisted, consts, const tans, carry, carry tans, xs, xs tans]
    nh = len(hoisted)
    n_in = num_consts + num_carry + len(xs_nz)
    nc, ncc, nx = sum(const_nz), sum(carry_nz), sum(xs_nz)
    idx = list(range(nh + n_in + nc + ncc + nx))
    p_h, p_c, p_car, p_x, t_c, t_car, t_x = _split_list(idx, nh, num_consts, num_carry,
                                                        len(xs_nz), nc, ncc)
    jvp = _permute_invars(jvp, p_h + p_c + t_c + p_car + t_car + p_x + t_x)
    # outputs: [carry, ys, carry tans, ys tans] -> [carry, carry tans, ys, ys tans]
    o_car, o_y, o_tcar, o_ty = _split_list(list(range(len(jvp.out_avals))), num_carry, n_ys,
                                           ncc)
    jvp = _permute_outvars(jvp, o_car + o_tcar + o_y + o_ty)
    consts, init, xs = _split_list(primals, num_consts, num_carry)
    t_consts, t_init, t_xs = _split_list(tangents, num_consts, num_carry)
    init_avals = jaxpr.in_avals[num_consts:num_consts + num_carry]
    args = (list(hoisted) + consts + [t for t, z in zip(t_consts, const_nz) if z] + init +
            [_instantiate(t, a) for t, a, z in zip(t_init, init_avals, carry_nz) if z] +
            xs + [t for t, z in zip(t_xs, xs_nz) if z])
    outs = scan_p.bind(*args, jaxpr=jvp, num_consts=nh + num_consts + nc,
                       num_carry=num_carry + ncc, length=length, reverse=reverse,
                       unroll=unroll)
    carry, t_carry, ys, t_ys = _split_list(outs, num_carry, ncc, n_ys)
    it_c, it_y = iter(t_carry), iter(t_ys)
    out_avals = scan_abstract_eval(*[get_aval(p) for p in primals], jaxpr=jaxpr,
                                   num_consts=num_consts, num_carry=num_carry, length=length,
                                   reverse=reverse, unroll=unroll)
    tans = [next(it_c) if z else Zero(a.to_tangent_aval())
            for z, a in zip(carry_nz, out_avals[:num_carry])]
    tans += [next(it_y) if z else Zero(a.to_tangent_aval())
             for z, a in zip(ys_nz, out_avals[num_carry:])]
    return carry + ys, tans


def scan_split(params, unknowns) -> Split:
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    body = jaxpr.jaxpr
    n_ys = len(body.outvars) - num_carry
    const_uk, carry_uk, xs_uk = _split_list(unknowns, num_consts, num_carry)
    for _ in range(num_carry + 1):                  # unknown carries: a fixed point
        _, _, out_uk, _ = partial_eval_jaxpr(body, const_uk + carry_uk + xs_uk,
                                             carry_uk + [False] * n_ys)
        new = [a or b for a, b in zip(carry_uk, out_uk[:num_carry])]
        if new == carry_uk:
            break
        carry_uk = new
    in_uk = const_uk + carry_uk + xs_uk
    jk, ju, out_uk, res = partial_eval_jaxpr(body, in_uk, carry_uk + [False] * n_ys)
    # Residuals that are the body's own known consts or xs are passed to the unknown scan
    # directly; every other residual is emitted per iteration by the known scan (a y).
    n_ops = len(unknowns)
    pos = {v: j for j, v in enumerate(body.invars)}
    res_consts, res_xs, stacked = [], [], []
    for v in res:
        j = pos.get(v)
        if j is not None and j < num_consts:
            res_consts.append((v, j))
        elif j is not None and j >= num_consts + num_carry:
            res_xs.append((v, j))
        else:
            stacked.append(v)
    known_out = [v for v, u in zip(body.outvars, out_uk) if not u]
    n_known_carry = num_carry - sum(carry_uk)
    known_body = Jaxpr([], jk.invars, jk.eqns, known_out + stacked)
    known_ins = [j for j in range(n_ops) if not in_uk[j]]
    n_known_consts = num_consts - sum(const_uk)
    known_params = dict(params, jaxpr=_closed(known_body), num_consts=n_known_consts,
                        num_carry=n_known_carry)
    u_invars = ju.invars[len(res):]
    u_consts, u_carry, u_xs = _split_list(u_invars, sum(const_uk), sum(carry_uk))
    unknown_body = Jaxpr([], [v for v, _ in res_consts] + u_consts + u_carry +
                         [v for v, _ in res_xs] + stacked + u_xs, ju.eqns, ju.outvars)
    uk_idx = [j for j in range(n_ops) if in_uk[j]]
    uc, ucar, ux = _split_list(uk_idx, sum(const_uk), sum(carry_uk))
    unknown_ins = ([("in", j) for _, j in res_consts] + [("in", j) for j in uc] +
                   [("in", j) for j in ucar] + [("in", j) for _, j in res_xs] +
                   [("res", r) for r in range(len(stacked))] + [("in", j) for j in ux])
    unknown_params = dict(params, jaxpr=_closed(unknown_body),
                          num_consts=len(res_consts) + len(uc), num_carry=len(ucar))
    outs = out_map(out_uk)
    if all(out_uk) and not stacked:
        known_params, known_ins = None, []
    return Split(known_params, known_ins, len(stacked), unknown_params, unknown_ins, outs)


def scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    consts, init, xs = _split_list(args, num_consts, num_carry)
    const_lin = [is_undefined(c) for c in consts]
    xs_lin = [is_undefined(x) for x in xs]
    out_avals = jaxpr.out_avals
    carry_avals = out_avals[:num_carry]
    y_avals = [ShapedArray((length,) + a.shape, a.dtype, a.weak_type)
               for a in out_avals[num_carry:]]
    cts = [_instantiate(ct, a) for ct, a in zip(cts, carry_avals + y_avals)]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    body_t = transpose_jaxpr_fn(jaxpr.jaxpr, const_lin + [True] * num_carry + xs_lin)
    nl_consts = [c for c, lin in zip(consts, const_lin) if not lin]
    nl_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    lin_const_avals = [a.to_tangent_aval() for a, lin in
                       zip(jaxpr.in_avals[:num_consts], const_lin) if lin]
    n_lc, n_nlc, n_nlx = len(lin_const_avals), len(nl_consts), len(nl_xs)

    def step(*args):
        nlc, acc, ct_c, nlx, ct_y = _split_list(args, n_nlc, n_lc, num_carry, n_nlx)
        outs = body_t(*nlc, *nlx, *ct_c, *ct_y)
        ct_lc, ct_carry_in, ct_lx = _split_list(outs, n_lc, num_carry)
        from fnad.primitives.elementwise import add_any
        return [add_any(a, c) for a, c in zip(acc, ct_lc)] + ct_carry_in + ct_lx

    avals = ([get_aval(c) for c in nl_consts] + lin_const_avals +
             [a.to_tangent_aval() for a in carry_avals] +
             [get_aval(x).update(shape=get_aval(x).shape[1:]) for x in nl_xs] +
             [a.to_tangent_aval() for a in out_avals[num_carry:]])
    closed, hoisted = trace_to_subjaxpr(step, avals, "transpose of a scan body")
    # `hoisted`: constants a custom rule's bwd created in the body: more scan consts
    outs = scan_p.bind(*hoisted, *nl_consts, *[_zeros(a) for a in lin_const_avals],
                       *ct_carry, *nl_xs, *ct_ys, jaxpr=closed,
                       num_consts=len(hoisted) + n_nlc, num_carry=n_lc + num_carry,
                       length=length, reverse=not reverse, unroll=unroll)
    ct_lc, ct_init, ct_lx = _split_list(outs, n_lc, num_carry)
    it_c, it_x = iter(ct_lc), iter(ct_lx)
    return ([next(it_c) if lin else None for lin in const_lin] +
            [ct if is_undefined(x) else None for ct, x in zip(ct_init, init)] +
            [next(it_x) if lin else None for lin in xs_lin])


def scan_batch(vals, dims, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    n_ys = len(jaxpr.out_avals) - num_carry
    const_b, init_b, xs_b = _split_list([d is not None for d in dims], num_consts, num_carry)
    carry_b = init_b
    for _ in range(num_carry + 1):
        _, out_b = batch_jaxpr(jaxpr, size, const_b + carry_b + xs_b, carry_b + [False] * n_ys)
        new = [a or b for a, b in zip(carry_b, out_b[:num_carry])]
        if new == carry_b:
            break
        carry_b = new
    body, out_b = batch_jaxpr(jaxpr, size, const_b + carry_b + xs_b, carry_b + [False] * n_ys)
    consts, init, xs = _split_list(vals, num_consts, num_carry)
    d_consts, d_init, d_xs = _split_list(dims, num_consts, num_carry)
    consts = [v if d is None else moveaxis(v, d, 0) for v, d in zip(consts, d_consts)]
    init = [bdim_at_front(v, d, size) if b else v for v, d, b in zip(init, d_init, carry_b)]
    xs = [v if d is None else moveaxis(v, d, 1) for v, d in zip(xs, d_xs)]
    outs = scan_p.bind(*consts, *init, *xs, jaxpr=body, num_consts=num_consts,
                       num_carry=num_carry, length=length, reverse=reverse, unroll=unroll)
    out_dims = [0 if b else None for b in carry_b] + [1 if b else None for b in out_b[num_carry:]]
    return outs, out_dims


abstract_eval_rules[scan_p] = scan_abstract_eval
eager_rules[scan_p] = scan_eager
jvp_rules[scan_p] = scan_jvp
split_rules[scan_p] = scan_split
partial_eval_rules[scan_p] = forward_known_rule(scan_p, scan_split)
transpose_rules[scan_p] = scan_transpose
batch_rules[scan_p] = scan_batch


def map(f, xs, *, batch_size: int | None = None):
    """[f(x) for x in xs] stacked, as a scan (lax.map); `batch_size` vmaps f over chunks."""
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    from fnad.batching import vmap
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"map: batch_size must be a positive int, got {batch_size}")
    leaves, tree = tree_util.tree_flatten(xs)
    if not leaves:
        raise ValueError("map: xs has no leaves to map over")
    n = get_aval(leaves[0]).shape[0]
    n_full, rem = divmod(n, batch_size)
    main = [reshape(index_slice(x, 0, n_full * batch_size),
                    (n_full, batch_size) + get_aval(x).shape[1:]) for x in leaves]
    ys = scan(lambda _, x: ((), vmap(f)(x)), (), tree_util.tree_unflatten(tree, main))[1]
    ys = tree_util.tree_map(lambda y: reshape(y, (n_full * batch_size,) + get_aval(y).shape[2:]),
                            ys)
    if rem:
        tail = vmap(f)(tree_util.tree_unflatten(
            tree, [index_slice(x, n_full * batch_size, n) for x in leaves]))
        ys = tree_util.tree_map(lambda a, b: concatenate([a, b], 0), ys, tail)
    return ys


def associative_scan(fn, elems, reverse: bool = False, axis: int = 0):
    """The inclusive scan of `elems` along `axis` with the associative `fn`, as
    jax.lax.associative_scan: element i of the result is elems[0] ⊕ ... ⊕ elems[i] (in
    reverse: elems[i] ⊕ ... ⊕ elems[n-1]), where a ⊕ b is `fn(a, b)`, called on whole
    slices. `elems` is a pytree of arrays of one length along `axis`; fn takes and returns
    pytrees of that structure. O(log n) rounds of fn on halves (odd/even recursion): the
    pairs (0,1), (2,3)... are combined and scanned, which gives the odd positions; each
    even position is the odd one before it combined with its own element."""
    from fnad.primitives.shape_ops import expand_dims, rev, slice_in_dim
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems has no arrays to scan")
    shapes = [get_aval(x).shape for x in leaves]
    ndim = len(shapes[0])
    if not -ndim <= axis < ndim or any(len(s) != ndim for s in shapes):
        raise ValueError(f"associative_scan: axis {axis} is not an axis of every array of "
                         f"elems (shapes {shapes})")
    axis = operator.index(axis) % ndim
    lengths = {s[axis] for s in shapes}
    if len(lengths) != 1:
        raise ValueError(f"associative_scan: the arrays of elems must have one length along "
                         f"axis {axis}, got shapes {shapes}")

    def combine(a: list, b: list) -> list:
        out, out_tree = tree_util.tree_flatten(fn(tree_util.tree_unflatten(tree, a),
                                                  tree_util.tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of elems, "
                            f"{tree}; it returned {out_tree}")
        return out

    def part(xs: list, start, stop, stride=1) -> list:
        return [slice_in_dim(x, start, stop, stride, axis) for x in xs]

    def interleave(even, odd):                 # even[0], odd[0], even[1], ...
        n_odd = get_aval(odd).shape[axis]
        head = slice_in_dim(even, 0, n_odd, 1, axis)
        pairs = concatenate([expand_dims(head, (axis + 1,)), expand_dims(odd, (axis + 1,))],
                            axis + 1)
        shape = list(get_aval(odd).shape)
        shape[axis] *= 2
        out = reshape(pairs, tuple(shape))
        if get_aval(even).shape[axis] > n_odd:  # one more even element at the end
            out = concatenate([out, slice_in_dim(even, n_odd, None, 1, axis)], axis)
        return out

    def scan_(xs: list) -> list:
        n = get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        odd = scan_(combine(part(xs, 0, n - 1, 2), part(xs, 1, None, 2)))  # at 1, 3, ...
        even = part(xs, 0, 1)                                                # at 0
        if n > 2:                                                            # at 2, 4, ...
            later = combine(odd if n % 2 else part(odd, 0, -1), part(xs, 2, None, 2))
            even = [concatenate([e, x], axis) for e, x in zip(even, later)]
        return [interleave(e, o) for e, o in zip(even, odd)]

    if reverse:
        leaves = [rev(x, (axis,)) for x in leaves]
    out = scan_(leaves)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(tree, out)


def index_slice(x, start: int, stop: int):
    from fnad.primitives.shape_ops import slice_in_dim
    return slice_in_dim(x, start, stop, 1, 0)


# ---- while_loop / fori_loop ------------------------------------------------------------------
while_p = core.Primitive("while", multiple_results=True)


def while_loop(cond_fun, body_fun, init_val):
    """while cond_fun(val): val = body_fun(val); return val (lax.while_loop).

    Forward-mode differentiable (jvp, and linearize, whose linear function reruns the loop)
    and batchable; reverse mode is an error when the loop's tangents are transposed (the
    trip count is unknown): use scan, or fori_loop with static bounds. As in JAX, a weakly
    typed initial value that the body makes strong (of the same dtype) stays weak where
    the body reads it, and the result takes the body's type.
    """
    if not callable(cond_fun) or not callable(body_fun):
        raise TypeError("while_loop: cond_fun and body_fun must be callable")
    init_flat, init_tree = tree_util.tree_flatten(init_val)
    args_tree = tree_util.tree_structure((init_val,))
    for _ in range(2):
        avals = [get_aval(x) for x in init_flat]
        cond_closed, cond_consts, _ = _stage_flat(lambda v: (cond_fun(v),), args_tree, avals,
                                                  "while_loop cond_fun")
        pred = cond_closed.out_avals
        if len(pred) != 1 or pred[0].shape or not dtypes.is_bool(pred[0].dtype):
            raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got "
                            f"{_type_str(pred)}")
        body_closed, body_consts, body_tree = _stage_flat(
            body_fun, args_tree, avals, "while_loop body_fun")
        _check_carry("while_loop: body_fun's output", init_tree, body_tree, avals,
                     body_closed.out_avals)
        init_flat, changed = _promote_weak(init_flat, body_closed.out_avals)
        if not changed:
            break
    outs = while_p.bind(*cond_consts, *body_consts, *init_flat, cond_jaxpr=cond_closed,
                        body_jaxpr=body_closed, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tree_util.tree_unflatten(init_tree, outs)


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """for i in range(lower, upper): val = body_fun(i, val) (lax.fori_loop).

    With concrete bounds this is a scan (so reverse-mode differentiable); with traced
    bounds, a while_loop.
    """
    if not callable(body_fun):
        raise TypeError("fori_loop: body_fun must be callable")
    dt = _fori_dtype(lower, upper)
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    if static:
        lo, hi = int(np.asarray(lower)), int(np.asarray(upper))

        def step(carry, _):          # i is a weakly typed int, whatever the bounds' dtype,
            i, x = carry             # as JAX's scan path has it
            return (i + 1, body_fun(i, x)), None
        (_, out), _ = scan(step, (lo, init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("fori_loop: unroll needs loop bounds known at trace time (Python or "
                         "NumPy integers, concrete arrays); these are traced")
    # A bound already of the loop's dtype keeps its weak type (so i is weak for a Python
    # int lower bound, as in JAX); the other is converted.
    lo = lower if _canonical_dtype(lower) == dt else convert_element_type(lower, dt)
    hi = upper if _canonical_dtype(upper) == dt else convert_element_type(upper, dt)

    def body(carry):
        i, x = carry
        return i + 1, body_fun(i, x)
    from fnad.primitives.logic import lt
    _, out = while_loop(lambda c: lt(c[0], hi), body, (lo, init_val))
    return out


def _canonical_dtype(x):
    return dtypes.canonicalize_dtype(dtypes.dtype(x))


def _fori_dtype(lower, upper):
    """The loop index's dtype: the bounds' common one (JAX's rule: equal dtypes, or a weakly
    typed signed integer bound that takes the other's)."""
    lo, hi = _canonical_dtype(lower), _canonical_dtype(upper)
    if not (dtypes.is_int(lo) and dtypes.is_int(hi)):
        raise TypeError(f"fori_loop: lower and upper must be integers, got {lo.name} and "
                        f"{hi.name}")
    if lo == hi:
        return lo
    signed = dtypes.issubdtype(lo, np.signedinteger) and dtypes.issubdtype(hi, np.signedinteger)
    lo_weak, hi_weak = dtypes.is_weakly_typed(lower), dtypes.is_weakly_typed(upper)
    if signed and lo_weak != hi_weak:
        return hi if lo_weak else lo
    raise TypeError(f"fori_loop: lower and upper must have equal dtypes, got {lo.name} and "
                    f"{hi.name}")


def while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = avals[cond_nconsts + body_nconsts:]
    for i, (a, b) in enumerate(zip(carry, body_jaxpr.out_avals)):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise core.shape_error("while", f"carry leaf {i} is {a.str_short()} but the body "
                                   f"returns {b.str_short()}")
    return list(body_jaxpr.out_avals)


def while_eager(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = _split_list(args, cond_nconsts, body_nconsts)
    while bool(np.asarray(eval_jaxpr(cond_jaxpr.jaxpr, [], *cconsts, *carry)[0])):
        carry = eval_jaxpr(body_jaxpr.jaxpr, [], *bconsts, *carry)
    return _as_arrays(carry, body_jaxpr.out_avals)


def while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nz = [type(t) is not Zero for t in tangents]
    _, bconst_nz, init_nz = _split_list(nz, cond_nconsts, body_nconsts)
    n = len(init_nz)
    carry_nz = init_nz
    for _ in range(n + 1):
        _, out_nz, _ = jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, carry_nz)
        new = [a or b for a, b in zip(carry_nz, out_nz)]
        if new == carry_nz:
            break
        carry_nz = new
    body, _, hoisted = jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, carry_nz)
    nh = len(hoisted)                                  # the body's new constants lead
    nbc, ncar = sum(bconst_nz), sum(carry_nz)
    idx = list(range(nh + body_nconsts + n + nbc + ncar))
    p_h, p_c, p_car, t_c, t_car = _split_list(idx, nh, body_nconsts, n, nbc)
    body = _permute_invars(body, p_h + p_c + t_c + p_car + t_car)
    car_avals = body_jaxpr.out_avals
    tan_avals = [a.to_tangent_aval() for a, z in zip(car_avals, carry_nz) if z]
    cond = _with_extra_invars(cond_jaxpr, tan_avals, len(cond_jaxpr.in_avals))
    cconsts, bconsts, init = _split_list(primals, cond_nconsts, body_nconsts)
    _, t_bconsts, t_init = _split_list(tangents, cond_nconsts, body_nconsts)
    outs = while_p.bind(*cconsts, *hoisted, *bconsts,
                        *[t for t, z in zip(t_bconsts, bconst_nz) if z],
                        *init, *[_instantiate(t, a) for t, a, z in zip(t_init, car_avals,
                                                                       carry_nz) if z],
                        cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=cond_nconsts,
                        body_nconsts=nh + body_nconsts + nbc)
    it = iter(outs[n:])
    return outs[:n], [next(it) if z else Zero(a.to_tangent_aval())
                      for z, a in zip(carry_nz, car_avals)]


_WHILE_REVERSE = ("Reverse-mode differentiation does not work for lax.while_loop or "
                  "lax.fori_loop with dynamic start/stop values: the number of iterations "
                  "is not known in advance, so the values the backward pass needs cannot be "
                  "stored. Use lax.scan, or lax.fori_loop with static (Python int) bounds.")


def _restricted(closed: ClosedJaxpr, keep_in, keep_out) -> ClosedJaxpr | None:
    """`closed` with only the outputs `keep_out`, taking only the inputs `keep_in`; None
    when those outputs read a dropped input."""
    j, used = dce_jaxpr(closed.jaxpr, keep_out)
    if any(u and not k for u, k in zip(used, keep_in)):
        return None
    return _closed(Jaxpr([], [v for v, k in zip(j.invars, keep_in) if k], j.eqns, j.outvars))


def while_split(params, unknowns) -> Split:
    """The known carries (those no unknown value reaches) loop on their own; the unknown
    equation is the whole loop again, recomputing them (as JAX: linearize works, the loop
    has no transpose)."""
    cond_j, body_j = params["cond_jaxpr"], params["body_jaxpr"]
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    cc_uk, bc_uk, carry_uk = _split_list(unknowns, nc, nb)
    n = len(carry_uk)
    for _ in range(n + 1):
        out_uk = partial_eval_jaxpr(body_j.jaxpr, bc_uk + carry_uk)[2]
        new = [a or b for a, b in zip(carry_uk, out_uk)]
        if new == carry_uk:
            break
        carry_uk = new
    known = [not u for u in carry_uk]
    cond_k = _restricted(cond_j, [not u for u in cc_uk] + known, [True])
    body_k = _restricted(body_j, [not u for u in bc_uk] + known, known)
    if all(carry_uk) or cond_k is None or body_k is None:
        return _all_unknown(unknowns, n)
    known_params = dict(cond_jaxpr=cond_k, body_jaxpr=body_k, cond_nconsts=nc - sum(cc_uk),
                        body_nconsts=nb - sum(bc_uk))
    known_ins = [j for j, u in enumerate(unknowns[:nc + nb]) if not u] + \
        [nc + nb + i for i, k in enumerate(known) if k]
    outs = [("known", sum(known[:i])) if k else ("unknown", i) for i, k in enumerate(known)]
    return Split(known_params, known_ins, 0, params,
                 [("in", j) for j in range(len(unknowns))], outs, num_unknown_outs=n)


def while_transpose(cts, *args, **params):
    raise ValueError(_WHILE_REVERSE + core._at_user_line())


def while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    in_b = [d is not None for d in dims]
    cc_b, bc_b, init_b = _split_list(in_b, cond_nconsts, body_nconsts)
    n = len(init_b)
    carry_b = init_b
    for _ in range(n + 1):
        _, out_b = batch_jaxpr(body_jaxpr, size, bc_b + carry_b, carry_b)
        _, pred_b = batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, False)
        if pred_b[0]:                        # a batched predicate batches the whole carry
            out_b = [True] * n
        new = [a or b for a, b in zip(carry_b, out_b)]
        if new == carry_b:
            break
        carry_b = new
    body, _ = batch_jaxpr(body_jaxpr, size, bc_b + carry_b, carry_b)
    cond, pred_b = batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, False)
    cconsts, bconsts, init = _split_list(vals, cond_nconsts, body_nconsts)
    d_cc, d_bc, d_init = _split_list(dims, cond_nconsts, body_nconsts)
    cconsts = [v if d is None else moveaxis(v, d, 0) for v, d in zip(cconsts, d_cc)]
    bconsts = [v if d is None else moveaxis(v, d, 0) for v, d in zip(bconsts, d_bc)]
    init = [bdim_at_front(v, d, size) if b else v for v, d, b in zip(init, d_init, carry_b)]
    if not pred_b[0]:
        outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=cond, body_jaxpr=body,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return outs, [0 if b else None for b in carry_b]
    # A batched predicate: loop while any member runs; finished members keep their value.
    n_cc = cond_nconsts

    def any_pred(*args):
        return [reduce_or(eval_jaxpr(cond.jaxpr, [], *args)[0], (0,))]

    def masked_body(*args):
        cc, bc, carry = _split_list(args, n_cc, body_nconsts)
        pred = eval_jaxpr(cond.jaxpr, [], *cc, *carry)[0]
        new = eval_jaxpr(body.jaxpr, [], *bc, *carry)
        return [select_n(broadcast_in_dim(pred, get_aval(c).shape, (0,)), c, x)
                for c, x in zip(carry, new)]

    carry_avals = [get_aval(c) for c in init]
    any_cond, c1 = trace_to_subjaxpr(any_pred, cond.in_avals, "while_loop cond (batched)")
    new_body, c2 = trace_to_subjaxpr(masked_body, cond.in_avals[:n_cc] + body.in_avals,
                                     "while_loop body (batched)")
    assert not c1 and not c2 and [a.shape for a in carry_avals] == \
        [a.shape for a in new_body.out_avals]
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=any_cond,
                        body_jaxpr=new_body, cond_nconsts=n_cc,
                        body_nconsts=n_cc + body_nconsts)
    return outs, [0] * n


abstract_eval_rules[while_p] = while_abstract_eval
eager_rules[while_p] = while_eager
jvp_rules[while_p] = while_jvp
split_rules[while_p] = while_split
partial_eval_rules[while_p] = forward_known_rule(while_p, while_split)
transpose_rules[while_p] = while_transpose
batch_rules[while_p] = while_batch


def jvp_jaxpr(closed, nonzeros, instantiate):
    from fnad.ad import jvp_jaxpr as f
    return f(closed, nonzeros, instantiate)


def transpose_jaxpr_fn(jaxpr, linear):
    from fnad.ad import transpose_jaxpr_fn as f
    return f(jaxpr, linear)


def batch_jaxpr(closed, size, in_batched, out_instantiate):
    from fnad.batching import batch_jaxpr as f
    return f(closed, size, in_batched, out_instantiate)

"""fnad.custom_batching: user-defined vmap rules, `custom_vmap` and `sequential_vmap`
(jax.custom_batching's API).

```python
@custom_vmap
def f(x, y):
    return x + y

@f.def_vmap
def f_vmap_rule(axis_size, in_batched, xs, ys):   # in_batched: [bool, bool], like (x, y)
    return xs * ys, True                          # (output, which outputs are batched)
```

Called outside vmap, `f` runs its function; under vmap the rule runs instead, on the
arguments with their batch axis moved to the front (an unbatched argument as it is), and
says which outputs carry the batch axis (at 0); the others come back unbatched.

One primitive, `custom_vmap_call`. Operands: the values the function closes over
(`num_consts`, hoisted by `trace_to_subjaxpr`), then its flattened arguments. Params: the
function staged as a ClosedJaxpr (`call_jaxpr`, what evaluating and the backends run:
the primitive is call-like, inlined by jit's lowering), the rule as a flat callable
`rule(axis_size, in_batched, args) -> (outs, out_batched)` (`_Rule`, run only by the
batching rule), `num_consts`, `name`.

  eval       call_jaxpr on the operands
  batching   the rule, at the parent trace. A batched closed-over value is an error (the
             rule cannot see it), as in JAX. The rule runs under a BatchTrace bound to the
             vmap's axis name in which nothing is batched, so a collective over that name
             in the rule sees unmapped values (psum(x) = axis_size·x), as in JAX.
  JVP        (as JAX, split in two so that reverse mode works)
               y  = custom_vmap_call(call, rule)(x)                      (the primal)
               ẏ  = custom_vmap_call(jvp(call)ₜ, jvp(rule)ₜ)(x, ẋ)        (the tangent)
             jvp(call)ₜ is the JVP of the function's jaxpr keeping the tangent outputs.
             jvp(rule)ₜ, under vmap with x batched as bₓ and ẋ as bₜ: x and ẋ are both
             broadcast to batched where either is (bₓ ∨ bₜ), the rule is called with that
             in_batched and differentiated by jvp; ẏ is batched where the rule says y is.
             (JAX instead calls the rule with bₓ ∧ bₜ and vmaps over the axes only x or
             only ẋ carry; where some arguments are mutually batched and others not, that
             gives an output with the batch axis twice, a wrong shape.)
  transpose  the tangent call is linear in ẋ. Its transpose is again a custom_vmap_call:
               x̄ = custom_vmap_call(transpose(call)ₓ, transpose(rule))(x, ȳ)
             transpose(call)ₓ transposes jvp(call)ₜ's jaxpr with x as constants;
             transpose(rule) is the linear transpose, in ẋ, of jvp(rule)ₜ called with every
             ẋ batched (ȳ broadcast to batched), its cotangents all batched. So grad and
             vmap compose both ways through the rule (JAX has no reverse mode for
             custom_vmap: its linearization fails).

A closed-over value may be differentiated outside vmap (its tangent goes through the
function's jaxpr), not under it (the rule does not see it): a clear error. Second-order
derivatives apply the same rules to the tangent and transposed calls.

Imports the core, the IR, tracing, ad, batching and fnad.custom's helpers; imported by
fnad/__init__ (fnad.custom_batching).
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from fnad import core, tree_util
from fnad.ad import backward_pass, instantiate, jvp, jvp_jaxpr, linear_transpose
from fnad.batching import BatchTrace, _rule_axis
from fnad.core import (Primitive, ShapedArray, Zero, abstract_eval_rules, batch_rules,
                       eager_rules, get_aval, jvp_rules, transpose_rules)
from fnad.custom import _Rule, _aval_of, _check_pair, _match, _name, _resolve_args, _types
from fnad.ir import ClosedJaxpr, Jaxpr, eval_jaxpr
from fnad.primitives._batching import bdim_at_front
from fnad.tracing import trace_to_subjaxpr

__all__ = ["custom_vmap", "sequential_vmap"]


# ---- the API ---------------------------------------------------------------------------------
class custom_vmap:
    """A function with a user-defined vmap rule (jax.custom_batching.custom_vmap).

    `rule(axis_size, in_batched, *args) -> (out, out_batched)`: `in_batched` is a list
    with an entry per argument, a pytree of bools like it (True: that leaf carries the
    batch axis, at 0); `out_batched` is a pytree of bools with `out`'s structure (a single
    bool for a single output).
    """

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable | None = None

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        """Set the vmap rule; returns it unchanged (so it works as a decorator)."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        args = _resolve_args(self.fun, args, kwargs, "custom_vmap")
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                                 "using def_vmap.")
        if core.current_trace() is core.eval_trace:
            return self.fun(*args)                     # nothing to batch or stage
        flat, in_tree = tree_util.tree_flatten(args)
        box: list = []

        def fun_flat(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, list(xs)))
            leaves, out_tree = tree_util.tree_flatten(out)
            box.append(out_tree)
            return leaves

        closed, consts = trace_to_subjaxpr(fun_flat, [get_aval(x) for x in flat],
                                           f"custom_vmap function {name}")
        rule = _Rule(_user_rule(self.vmap_rule, name, in_tree, box[0], closed.out_avals),
                     _name(self.vmap_rule))
        outs = custom_vmap_call_p.bind(*consts, *flat, call_jaxpr=closed, rule=rule,
                                       num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(box[0], outs)


def _user_rule(user_rule: Callable, name: str, in_tree, out_tree, out_avals) -> Callable:
    """The user's rule as a flat rule, its results checked against the function's."""
    rule_name = _name(user_rule)
    who = f"custom_vmap rule {rule_name} for {name}"

    def rule(axis_size: int, in_batched: list, args: list):
        from fnad.numpy import asarray                 # values the user sees are Arrays
        py_args = tree_util.tree_unflatten(in_tree, [asarray(a) for a in args])
        py_batched = tree_util.tree_unflatten(in_tree, list(in_batched))
        pair = user_rule(axis_size, list(py_batched), *py_args)
        _check_pair(pair, who, "(out, out_batched)")
        out, out_batched = pair
        flat, tree = tree_util.tree_flatten(out)
        flat_b, tree_b = tree_util.tree_flatten(out_batched)
        if tree != tree_b:
            raise ValueError(f"{who} returned an output and an output batching specification "
                             f"(out_batched) of different structures: output {tree}, "
                             f"out_batched {tree_b}; out_batched must have a bool for each "
                             "output leaf")
        if tree != out_tree:
            raise ValueError(f"{who} returned an output with structure "
                             f"{_types(tree, [_aval_of(x) for x in flat])} but {name} "
                             f"returns {_types(out_tree, out_avals)}; they must be equal")
        outs = []
        for i, (x, b, a) in enumerate(zip(flat, flat_b, out_avals)):
            if not isinstance(b, bool):
                raise TypeError(f"{who} returned out_batched leaf {i} = {b!r}; each must be "
                                "a bool (True: that output carries the batch axis at 0)")
            expect = a.update(shape=(axis_size,) + a.shape) if b else a
            outs.append(_match(x, expect, lambda got, i=i, b=b, e=expect: (
                f"{who} returned output {i} of type {got.str_short()}, but {name} returns "
                f"{a.str_short()} there and the rule says it is "
                f"{'batched' if b else 'unbatched'} (out_batched {b}), so it must have type "
                f"{e.str_short()}")))
        return outs, list(flat_b)
    return rule


def sequential_vmap(f: Callable) -> custom_vmap:
    """A custom_vmap whose rule maps `f` over the batch in a loop (lax.map): for functions
    that have no batched form. Unbatched arguments are passed whole to every call; every
    output is batched."""
    from fnad.primitives.control_flow import map as lax_map
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        del axis_size
        args = list(args)
        flags = tree_util.tree_leaves(in_batched)
        leaves, tree = tree_util.tree_flatten(args)
        mapped = [x for x, b in zip(leaves, flags) if b]

        def one(xs):
            it = iter(xs)
            return f(*tree_util.tree_unflatten(tree, [next(it) if b else x
                                                      for x, b in zip(leaves, flags)]))
        out = lax_map(one, mapped)
        return out, tree_util.tree_map(lambda _: True, out)
    return f


# ---- the primitive ---------------------------------------------------------------------------
custom_vmap_call_p = Primitive("custom_vmap_call", multiple_results=True)


def custom_vmap_call_abstract_eval(*avals, call_jaxpr, **_):
    return call_jaxpr.out_avals
abstract_eval_rules[custom_vmap_call_p] = custom_vmap_call_abstract_eval
def custom_vmap_call_eager(*args, call_jaxpr, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)
eager_rules[custom_vmap_call_p] = custom_vmap_call_eager


def _closure_error(name: str, what: str = "batched") -> ValueError:
    return ValueError(
        f"custom_vmap function {name} closes over a value that is {what} here; its vmap "
        f"rule cannot see closed-over values. Pass the value into {name} as an argument "
        "(and handle it in the rule).")


# ---- batching: the rule -----------------------------------------------------------------------
def _run_rule(rule: _Rule, size: int, in_batched: list, args: list, name: str):
    """Call the flat rule at the current trace, under a BatchTrace bound to the vmap's axis
    name that batches nothing (collectives over it see unmapped values)."""
    axis_name = _rule_axis.name
    if axis_name is None:
        return rule(size, in_batched, args)
    trace = BatchTrace(core.current_trace(), size, f"vmap rule of custom_vmap {name}",
                       axis_name=axis_name)
    with core.new_trace(trace):
        outs, out_batched = rule(size, in_batched, args)
        pairs = [trace.val_bdim(o) for o in outs]
    if any(d is not None for _, d in pairs):
        raise ValueError(f"the vmap rule {rule.name} of custom_vmap function {name} returned "
                         f"an output that varies along the axis {axis_name!r} (e.g. through "
                         "axis_index); the rule computes the whole batch at once: return "
                         "it batched along axis 0 instead")
    return [v for v, _ in pairs], out_batched


def custom_vmap_call_batch(vals, dims, *, call_jaxpr, rule, num_consts, name):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    if any(d is not None for d in dims[:num_consts]):
        raise _closure_error(name)
    args = [v if d is None else bdim_at_front(v, d, size)
            for v, d in zip(vals[num_consts:], dims[num_consts:])]
    in_batched = [d is not None for d in dims[num_consts:]]
    outs, out_batched = _run_rule(rule, size, in_batched, args, name)
    return outs, [0 if b else None for b in out_batched]
batch_rules[custom_vmap_call_p] = custom_vmap_call_batch


# ---- JVP ----------------------------------------------------------------------------------------
def _jvp_rule(rule: _Rule, n: int, num_consts: int, nonzeros: list, out_nz: list,
              name: str) -> Callable:
    """jvp(rule)ₜ for operands (primals (n, consts first), nonzero tangents): see the
    module doc. Returns the tangents of the outputs in `out_nz`."""
    def tangent_rule(size: int, in_batched: list, args: list):
        ps, ts_nz = list(args[:n]), iter(args[n:])
        pb, tb_nz = in_batched[:n], iter(in_batched[n:])
        ts, tb = [], []
        for nz in nonzeros:
            ts.append(next(ts_nz) if nz else None)
            tb.append(next(tb_nz) if nz else False)
        if any(pb[:num_consts]):
            raise _closure_error(name)
        if any(nonzeros[:num_consts]):
            raise _closure_error(name, "differentiated (vmap of its derivative with "
                                       "respect to a closed-over value)")
        ps, ts, pb, tb = ps[num_consts:], ts[num_consts:], pb[num_consts:], tb[num_consts:]
        both = [a or b for a, b in zip(pb, tb)]       # batched: the primal and its tangent
        p_in = [bdim_at_front(p, None, size) if b and not a else p
                for p, a, b in zip(ps, pb, both)]
        t_in = []
        for p, t, a, b in zip(p_in, ts, tb, both):
            if t is None:
                t_in.append(instantiate(Zero(get_aval(p).strip_weak_type().to_tangent_aval())))
            else:
                t_in.append(bdim_at_front(t, None, size) if b and not a else t)
        box: list = []

        def to_jvp(*xs):
            outs, out_batched = rule(size, both, list(xs))
            box.append(out_batched)
            return list(outs)
        _, t_out = jvp(to_jvp, p_in, t_in)
        return ([t for t, nz in zip(t_out, out_nz) if nz],
                [b for b, nz in zip(box[0], out_nz) if nz])
    return tangent_rule


def custom_vmap_call_jvp(primals, tangents, *, call_jaxpr, rule, num_consts, name):
    outs = custom_vmap_call_p.bind(*primals, call_jaxpr=call_jaxpr, rule=rule,
                                   num_consts=num_consts, name=name)
    nonzeros = [type(t) is not Zero for t in tangents]
    jclosed, out_nz, jconsts = jvp_jaxpr(call_jaxpr, nonzeros, True)
    n_out = len(call_jaxpr.out_avals)
    j = jclosed.jaxpr                                  # keep the tangent outputs only
    tan_closed = ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, j.outvars[n_out:]),
                             jclosed.consts)
    t_rule = _Rule(_jvp_rule(rule, len(primals), num_consts, nonzeros, out_nz, name),
                   f"jvp({rule.name})")
    t_nz = custom_vmap_call_p.bind(*jconsts, *primals, *[t for t in tangents
                                                          if type(t) is not Zero],
                                   call_jaxpr=tan_closed, rule=t_rule,
                                   num_consts=len(jconsts), name=f"jvp({name})")
    it = iter(t_nz)
    return outs, [next(it) if nz else Zero(get_aval(o).strip_weak_type().to_tangent_aval())
                  for o, nz in zip(outs, out_nz)]
jvp_rules[custom_vmap_call_p] = custom_vmap_call_jvp


# ---- transpose ----------------------------------------------------------------------------------
def _transpose_rule(rule: _Rule, lin: list, lin_avals: list) -> Callable:
    """transpose(rule) for the operands (the known ones of `rule`'s, the output
    cotangents): the linear transpose, in the operands `lin` marks, of `rule` called with
    all of those batched (see the module doc). The cotangents come back batched."""
    n_known = len(lin) - sum(lin)

    def transposed_rule(size: int, in_batched: list, args: list):
        known, cts = list(args[:n_known]), list(args[n_known:])
        kb, cb = in_batched[:n_known], in_batched[n_known:]

        def merge(ks, ls):
            ks, ls = iter(ks), iter(ls)
            return [next(ls) if u else next(ks) for u in lin]

        def lin_fn(*ts):
            outs, out_batched = rule(size, merge(kb, [True] * len(ts)), merge(known, ts))
            return [o if b else bdim_at_front(o, None, size)
                    for o, b in zip(outs, out_batched)]
        examples = [ShapedArray((size,) + a.shape, a.dtype) for a in lin_avals]
        cts = [c if b else bdim_at_front(c, None, size) for c, b in zip(cts, cb)]
        out = linear_transpose(lin_fn, *examples)(cts)
        return list(out), [True] * len(out)
    return transposed_rule


def custom_vmap_call_transpose(cts, *args, call_jaxpr, rule, num_consts, name):
    """The call is linear in its undefined operands (a tangent call of the JVP above): its
    transpose is a custom_vmap_call of the transposed jaxpr and the transposed rule."""
    lin = [core.is_undefined(a) for a in args]
    if any(lin[:num_consts]):
        raise NotImplementedError(f"transposing custom_vmap function {name} with respect to "
                                  "a value it closes over is not supported")
    known = [a for a, u in zip(args, lin) if not u]
    lin_avals = [a.aval for a, u in zip(args, lin) if u]
    cts = [instantiate(c, a.strip_weak_type().to_tangent_aval())
           for c, a in zip(cts, call_jaxpr.out_avals)]
    jaxpr = call_jaxpr.jaxpr
    split = Jaxpr(list(jaxpr.constvars) + [v for v, u in zip(jaxpr.invars, lin) if not u],
                  [v for v, u in zip(jaxpr.invars, lin) if u], jaxpr.eqns, jaxpr.outvars)
    n_known = len(known)

    def transposed(*xs):
        cts_in = backward_pass(split, list(call_jaxpr.consts) + list(xs[:n_known]),
                               list(xs[n_known:]))
        return [instantiate(c, a.to_tangent_aval()) for c, a in zip(cts_in, lin_avals)]
    t_closed, t_consts = trace_to_subjaxpr(
        transposed, [get_aval(k) for k in known] + [get_aval(c) for c in cts],
        f"transpose of custom_vmap function {name}")
    t_rule = _Rule(_transpose_rule(rule, lin[num_consts:], lin_avals),
                   f"transpose({rule.name})")
    cts_lin = iter(custom_vmap_call_p.bind(
        *t_consts, *known, *cts, call_jaxpr=t_closed, rule=t_rule,
        num_consts=len(t_consts) + num_consts, name=f"transpose({name})"))
    return [next(cts_lin) if u else None for u in lin]
transpose_rules[custom_vmap_call_p] = custom_vmap_call_transpose

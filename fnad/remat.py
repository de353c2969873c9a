"""fnad.remat: rematerialization (`checkpoint` / `remat`), its policies and `checkpoint_name`.

Owns the `checkpoint` primitive (remat_p) and its rules, the user wrapper
`checkpoint(fun, policy=..., static_argnums=..., static_argnames=...)`, the `checkpoint_policies`
namespace and the `name` primitive behind `checkpoint_name`.

`checkpoint(f)` computes the same values as `f`; what changes is reverse mode.
`f` is staged into a sub-jaxpr held by one `checkpoint` equation, and the
rules below make linearize keep as residuals only the equation's primal inputs
plus the values the policy calls saveable; everything else is recomputed in the
backward pass.

How it fits fnad's reverse mode (linearize = JVPTrace over a forward_known
JaxprTrace, then `backward_pass`):

- jvp: the sub-jaxpr's JVP, staged as a new jaxpr (primals, nonzero tangents)
  -> (primal outs, nonzero tangent outs), is bound as a new checkpoint eqn.
- partial eval (linearize meets that eqn with its tangents staged): the sub-jaxpr
  is split by re-tracing it under a forward_known JaxprTrace whose parent is a
  second JaxprTrace, so known eqns land in a *known* jaxpr and the rest in a
  *staged* one (mixed eqns, nested checkpoints included, go through their usual
  rules). In the known jaxpr the policy picks, walking back from the values the
  staged side reads, which to save (residuals) and which eqns to copy to the
  front of the staged jaxpr (recompute). The known jaxpr runs now, giving the
  primal outputs and the residuals; the staged jaxpr — recompute eqns, then the
  linear tangent eqns — becomes ONE checkpoint eqn of the linear jaxpr whose
  operands are the residuals (constants of the linear jaxpr) and the tangents.
- transpose: that eqn's non-linear operands are its residuals, so its transpose
  is `backward_pass` of its sub-jaxpr with the residuals as constants:
  backward_pass already evaluates eqns that read no linear value forwards (the
  recompute) and transposes the rest. Eagerly this runs directly; under any
  other trace (grad of grad, make_jaxpr, vmap) the transposed program is itself
  staged as a checkpoint eqn, as JAX does, so the recompute stays inside one.
- vmap: the sub-jaxpr's batched version, a new checkpoint eqn.
- eager: the sub-jaxpr is evaluated. `checkpoint(f)(x)` called with no
  transformation active simply calls `f`: there is nothing to save.

Policies have JAX's signature `policy(prim, *in_avals, **params) -> bool`
(True: save this eqn's outputs). `policy=None` saves nothing but the inputs.
Side effects (debug callbacks) inside are replayed by the recompute, as in
JAX. `prevent_cse` is recorded for compilers (a CSE pass must not merge the
recompute with the forward computation); the interpreters ignore it.
"""
from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence

import numpy as np

from fnad import core, tree_util
from fnad.ad import JVPTrace, backward_pass
from fnad.batching import BatchTrace
from fnad.core import (Array, Primitive, Zero, abstract_eval_rules, batch_rules,
                       eager_rules, get_aval, jvp_rules, partial_eval_rules, transpose_rules)
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Var, eval_jaxpr
from fnad.partial_eval import Split, out_map, split_rules
from fnad.primitives.linalg import dot_general_p
from fnad.tracing import JaxprTrace, flatten_fun, trace_to_subjaxpr

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name"]


# ---- the user wrapper ------------------------------------------------------------------
def checkpoint(fun: Callable, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = ()) -> Callable:
    """`fun` with its intermediate values recomputed in the backward pass, not stored.

    Values are unchanged; under grad/vjp/linearize only `fun`'s inputs, and the
    outputs of the equations `policy(prim, *avals, **params)` calls saveable, are
    kept as residuals (see `checkpoint_policies`). `static_argnums` arguments, and
    keyword arguments named in `static_argnames`, are passed as Python values (not
    traced; jax 0.10 accepts `static_argnames` and ignores it unless its remat3 option is
    on). Use per layer: `checkpoint(block)(p, x)`.
    """
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a callable value, got {fun!r}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_names = ((static_argnames,) if isinstance(static_argnames, str)
                    else tuple(static_argnames))
    for i in static:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"checkpoint(static_argnums={static_argnums!r}): static_argnums "
                            "must be an int or a tuple of ints")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint(policy={policy!r}): a policy must be a callable "
                        "policy(prim, *avals, **params) -> bool, e.g. "
                        "fnad.checkpoint_policies.dots_saveable")
    name = getattr(fun, "__name__", type(fun).__name__)

    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):
        nargs = len(args)
        for i in static:
            if not -nargs <= i < nargs:
                raise ValueError(f"checkpoint({name}, static_argnums={static_argnums!r}): "
                                 f"{name} was called with {nargs} positional argument"
                                 f"{'s' * (nargs != 1)}, so each static_argnum must be in "
                                 f"range({-nargs}, {nargs})")
        if core.current_trace() is core.eval_trace:  # no transformation: nothing to save
            return tree_util.tree_map(_as_array, fun(*args, **kwargs))
        static_pos = {i % nargs for i in static}
        dyn = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_kw = {k: v for k, v in kwargs.items() if k in static_names}
        kwargs = {k: v for k, v in kwargs.items() if k not in static_names}

        def f_dyn(*dyn_args, **kw):
            it = iter(dyn_args)
            return fun(*[args[i] if i in static_pos else next(it) for i in range(nargs)],
                       **kw, **static_kw)

        flat, in_tree = tree_util.tree_flatten((dyn, kwargs))
        avals = []
        for leaf in flat:
            try:
                avals.append(get_aval(leaf))
            except TypeError:
                raise TypeError(f"checkpoint of {name}: argument leaf {leaf!r} of type "
                                f"{type(leaf).__name__} is not an array; pass non-array "
                                "arguments through static_argnums") from None
        flat_fun, out_tree = flatten_fun(f_dyn, in_tree)
        closed, consts = trace_to_subjaxpr(flat_fun, avals, f"checkpoint of {name}")
        outs = remat_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=prevent_cse,
                            differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_tree[0], outs)

    return fun_remat


remat = checkpoint


def _as_array(x):
    """An output leaf as jax's traced checkpoint gives it: a Python or NumPy value becomes an
    Array (weak for a Python scalar)."""
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        return core._array_from_numpy(core.canonicalize_value(x), get_aval(x).weak_type)
    return x


# ---- checkpoint_name and the policies ----------------------------------------------------
name_p = Primitive("name")
def checkpoint_name(x, name: str):
    """Tag every array leaf of `x` with `name`, for save_only_these_names and friends."""
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)

abstract_eval_rules[name_p] = lambda x, *, name: x
def name_eager(x, *, name):                            # the identity
    if type(x) is Array:
        return x
    aval = get_aval(x)
    backend = core.default_backend()
    return Array(backend.device_put(core.canonicalize_value(x, aval)), aval, backend)
eager_rules[name_p] = name_eager
def name_jvp(primals, tangents, *, name):              # d name(x) = dx (tangents untagged)
    return name_p.bind(primals[0], name=name), tangents[0]
jvp_rules[name_p] = name_jvp
transpose_rules[name_p] = lambda ct, x, *, name: [ct]  # the identity is its own transpose
batch_rules[name_p] = lambda vals, dims, *, name: (name_p.bind(vals[0], name=name), dims[0])


class _Policy:
    """A named policy callable (so that printed jaxprs show `policy=dots_saveable`)."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str, fn: Callable):
        self.name, self.fn = name, fn

    def __call__(self, prim, *avals, **params) -> bool:
        return bool(self.fn(prim, *avals, **params))

    def __repr__(self):
        return self.name


def _dot_no_batch(prim, *_, **params) -> bool:
    if prim is not dot_general_p:
        return False
    (_, _), (lb, rb) = params["dimension_numbers"]
    return not lb and not rb


def save_only_these_names(*names: str) -> _Policy:
    """Save the values tagged by checkpoint_name with one of `names`; nothing else."""
    keep = frozenset(names)
    return _Policy(f"save_only_these_names{names!r}",
                   lambda prim, *_, **p: prim is name_p and p["name"] in keep)


def save_any_names_but_these(*names: str) -> _Policy:
    """Save every value tagged by checkpoint_name except those with one of `names`."""
    drop = frozenset(names)
    return _Policy(f"save_any_names_but_these{names!r}",
                   lambda prim, *_, **p: prim is name_p and p["name"] not in drop)


def save_anything_except_these_names(*names: str) -> _Policy:
    """Save every value except those tagged by checkpoint_name with one of `names`."""
    drop = frozenset(names)
    return _Policy(f"save_anything_except_these_names{names!r}",
                   lambda prim, *_, **p: not (prim is name_p and p["name"] in drop))


def save_from_both_policies(policy_1: Callable, policy_2: Callable) -> _Policy:
    """Save what either policy saves."""
    return _Policy(f"save_from_both_policies({policy_1!r}, {policy_2!r})",
                   lambda prim, *a, **p: policy_1(prim, *a, **p) or policy_2(prim, *a, **p))


def save_and_offload_only_these_names(*, names_which_can_be_saved: Sequence[str],
                                      names_which_can_be_offloaded: Sequence[str],
                                      offload_src: str, offload_dst: str) -> _Policy:
    """Save the values tagged with one of either list of names. fnad has one memory per
    device, so an offloaded value is simply saved (JAX moves it to `offload_dst`)."""
    names = tuple(names_which_can_be_saved) + tuple(names_which_can_be_offloaded)
    policy = save_only_these_names(*names)
    policy.name = f"save_and_offload_only_these_names{names!r}"
    return policy


def offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> _Policy:
    """dots_with_no_batch_dims_saveable: fnad saves what JAX would offload."""
    return _Policy("offload_dot_with_no_batch_dims", _dot_no_batch)


_dots = _Policy("dots_saveable", lambda prim, *_, **__: prim is dot_general_p)
_dots_no_batch = _Policy("dots_with_no_batch_dims_saveable", _dot_no_batch)
checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_Policy("everything_saveable", lambda *_, **__: True),
    nothing_saveable=_Policy("nothing_saveable", lambda *_, **__: False),
    dots_saveable=_dots,
    checkpoint_dots=_dots,
    dots_with_no_batch_dims_saveable=_dots_no_batch,
    checkpoint_dots_with_no_batch_dims=_dots_no_batch,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
)


# ---- the checkpoint primitive ------------------------------------------------------------
remat_p = Primitive("checkpoint", multiple_results=True)
# params: jaxpr (ClosedJaxpr, no consts: closed-over values are leading operands),
# prevent_cse, differentiated (True once linearize has split it), policy.

def remat_abstract_eval(*avals, jaxpr, **_):
    expect = jaxpr.in_avals
    if len(avals) != len(expect):
        raise TypeError(f"checkpoint: its jaxpr takes {len(expect)} operands, got "
                        f"{len(avals)}")
    for i, (a, e) in enumerate(zip(avals, expect)):
        if a.shape != e.shape or a.dtype != e.dtype:
            raise TypeError(f"checkpoint: operand {i} is {a.str_short()} but its jaxpr "
                            f"expects {e.str_short()}")
    return jaxpr.out_avals
abstract_eval_rules[remat_p] = remat_abstract_eval


def remat_eager(*args, jaxpr, **_):                    # values: just run the program
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
eager_rules[remat_p] = remat_eager


def remat_jvp(primals, tangents, *, jaxpr, **params):  # checkpoint(jvp f): a jvp is a remat
    nz = [type(t) is not Zero for t in tangents]
    jvp_jaxpr, consts, out_nz = _jvp_jaxpr(jaxpr, nz)
    outs = remat_p.bind(*consts, *primals, *[t for t in tangents if type(t) is not Zero],
                        jaxpr=jvp_jaxpr, **params)
    n = len(jaxpr.out_avals)
    nz_outs = iter(outs[n:])
    tangents_out = [next(nz_outs) if z else Zero(a.to_tangent_aval())
                    for z, a in zip(out_nz, jaxpr.out_avals)]
    return outs[:n], tangents_out
jvp_rules[remat_p] = remat_jvp


def _jvp_jaxpr(closed: ClosedJaxpr, nz: list[bool]):
    """(jaxpr: primals, nonzero tangents -> primal outs, nonzero tangent outs;
    its hoisted consts; which tangent outs are nonzero)."""
    n = len(nz)
    out_nz: list[bool] = []

    def jvp_fun(*args):
        primals, tangents = args[:n], iter(args[n:])
        trace = JVPTrace(core.current_trace(), "jvp of checkpoint")
        ins = [trace.pack(p, next(tangents)) if z else p for p, z in zip(primals, nz)]
        with core.new_trace(trace):
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
            pts = [trace.primal_tangent(o) for o in outs]
        out_nz[:] = [type(t) is not Zero for _, t in pts]
        return [p for p, _ in pts] + [t for _, t in pts if type(t) is not Zero]

    avals = closed.in_avals
    tan_avals = [a.to_tangent_aval() for a, z in zip(avals, nz) if z]
    jaxpr, consts = trace_to_subjaxpr(jvp_fun, avals + tan_avals, "jvp of checkpoint")
    return jaxpr, consts, out_nz


def remat_partial_eval(trace: JaxprTrace, args, params):
    """Linearize met a checkpoint eqn with staged (tangent) operands: run its known part
    now, stage one checkpoint eqn that recomputes from the residuals and does the rest."""
    unknown = [trace.is_mine(x) for x in args]
    known, staged, out_unknown = _partial_eval_jaxpr(params["jaxpr"], unknown,
                                                     params["policy"])
    with core.set_current_trace(trace.parent):
        vals = eval_jaxpr(known.jaxpr, known.consts,
                          *[x for x, u in zip(args, unknown) if not u])
    n_known = len(out_unknown) - sum(out_unknown)
    known_outs, residuals = vals[:n_known], vals[n_known:]
    staged_outs = []
    if staged.jaxpr.outvars:
        staged_outs = trace.stage(remat_p, residuals + [x for x, u in zip(args, unknown) if u],
                                  dict(params, jaxpr=staged, differentiated=True))
    k, s = iter(known_outs), iter(staged_outs)
    return [next(s) if u else next(k) for u in out_unknown]
partial_eval_rules[remat_p] = remat_partial_eval


def _partial_eval_jaxpr(closed: ClosedJaxpr, unknown: list[bool], policy):
    """Split `closed` by which inputs are unknown.

    Returns (known: known inputs -> known outputs + residuals,
    staged: residuals + unknown inputs -> unknown outputs, which outputs are unknown).
    Residuals are known inputs, constants and the outputs of eqns `policy` saves; the
    known eqns the staged side needs beyond those are copied into it (recomputed).
    """
    known_trace = JaxprTrace(core.current_trace(), "known part of checkpoint")
    staged_trace = JaxprTrace(known_trace, "staged part of checkpoint", forward_known=True)
    args = [staged_trace.new_arg(a) if u else known_trace.new_arg(a)
            for a, u in zip(closed.in_avals, unknown)]
    with core.new_trace(known_trace), core.new_trace(staged_trace):
        outs = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    out_unknown = [staged_trace.is_mine(o) for o in outs]

    # The staged side, without eqns that feed no unknown output.
    sj = staged_trace.to_jaxpr([o for o, u in zip(outs, out_unknown) if u]).jaxpr
    from fnad.passes._util import has_effects   # fnad.passes imports this module
    from fnad.passes.dce import live_eqns
    staged_eqns, live = live_eqns(sj.eqns, sj.outvars)
    reads = [(c, x) for c, x in zip(sj.constvars, staged_trace.constvals) if c in live]

    # The known side computes the known outputs and every value the staged side reads.
    known_outs = [o for o, u in zip(outs, out_unknown) if not u]
    kj = known_trace.to_jaxpr(known_outs + [x for _, x in reads])
    n_known = len(known_outs)
    read_atoms = kj.jaxpr.outvars[n_known:]

    # Walk back from what the staged side reads: save what the policy allows,
    # recompute the rest from its inputs (and so on, down to the known inputs).
    need = {a for a in read_atoms if type(a) is Var}
    saved: set[Var] = set()
    recompute: list[JaxprEqn] = []
    # Effects (debug callbacks) are replayed with the recompute, as in JAX.
    for eqn in reversed(kj.jaxpr.eqns):
        outs_needed = [v for v in eqn.outvars if v in need]
        effectful = has_effects(eqn)
        if not outs_needed and not effectful:
            continue
        if not effectful and policy is not None and policy(
                eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params):
            saved.update(outs_needed)
        else:
            recompute.append(eqn)
            need.update(a for a in eqn.invars if type(a) is Var)
    recompute.reverse()
    # Residuals: needed inputs and constants, then saved eqn outputs (never recomputed).
    residuals = [v for v in kj.jaxpr.invars + kj.jaxpr.constvars if v in need]
    residuals += [v for eqn in kj.jaxpr.eqns for v in eqn.outvars if v in saved]

    known_outvars = kj.jaxpr.outvars[:n_known] + residuals
    known_eqns, _ = live_eqns(kj.jaxpr.eqns, known_outvars)
    known = ClosedJaxpr(Jaxpr(kj.jaxpr.constvars, kj.jaxpr.invars, known_eqns, known_outvars),
                        kj.consts)

    # The staged side reads the known side's vars directly (residuals or recomputed).
    sub = {c: a for (c, _), a in zip(reads, read_atoms)}
    rename = lambda a: sub.get(a, a) if type(a) is Var else a
    staged_eqns = [e.replace(invars=[rename(a) for a in e.invars]) for e in staged_eqns]
    staged = Jaxpr([], residuals + sj.invars, recompute + staged_eqns,
                   [rename(a) for a in sj.outvars])
    return known, ClosedJaxpr(staged, []), out_unknown


def remat_transpose(cts, *args, jaxpr, **params):
    """Transpose of a staged checkpoint eqn: its non-linear operands are residuals, so
    backward_pass of its sub-jaxpr recomputes (forwards) and transposes (backwards)."""
    lin = [core.is_undefined(a) for a in args]
    inner = jaxpr.jaxpr
    j = Jaxpr(list(inner.constvars) + [v for v, u in zip(inner.invars, lin) if not u],
              [v for v, u in zip(inner.invars, lin) if u], inner.eqns, inner.outvars)
    res = list(jaxpr.consts) + [a for a, u in zip(args, lin) if not u]
    if core.current_trace() is core.eval_trace:
        lin_cts = backward_pass(j, res, cts)
    else:                                              # stage it as a checkpoint of its own
        ct_nz = [type(c) is not Zero and c is not None for c in cts]
        nz_cts = [c for c, z in zip(cts, ct_nz) if z]
        out_nz: list[bool] = []
        n = len(res)

        def transposed(*xs):
            it = iter(xs[n:])
            full = [next(it) if z else Zero(v.aval.to_tangent_aval())
                    for z, v in zip(ct_nz, inner.outvars)]
            outs = backward_pass(j, xs[:n], full)
            out_nz[:] = [type(o) is not Zero for o in outs]
            return [o for o in outs if type(o) is not Zero]

        sub, consts = trace_to_subjaxpr(transposed, [get_aval(x) for x in res + nz_cts],
                                        "transpose of checkpoint")
        outs = iter(remat_p.bind(*consts, *res, *nz_cts, jaxpr=sub,
                                 **dict(params, differentiated=True)))
        lin_cts = [next(outs) if z else Zero(v.aval) for z, v in zip(out_nz, j.invars)]
    it = iter(lin_cts)
    return [next(it) if u else None for u in lin]
transpose_rules[remat_p] = remat_transpose


def remat_batch(vals, dims, *, jaxpr, **params):      # checkpoint(vmap f): batched remat
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    out_dims: list = []

    def batched(*xs):
        trace = BatchTrace(core.current_trace(), size, "vmap of checkpoint")
        with core.new_trace(trace):
            outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts,
                              *[trace.pack(x, d) for x, d in zip(xs, dims)])
            pairs = [trace.val_bdim(o) for o in outs]
        out_dims[:] = [d for _, d in pairs]
        return [v for v, _ in pairs]

    sub, consts = trace_to_subjaxpr(batched, [get_aval(v) for v in vals], "vmap of checkpoint")
    outs = remat_p.bind(*consts, *vals, jaxpr=sub, **params)
    return outs, out_dims
batch_rules[remat_p] = remat_batch



def remat_split(params, unknowns) -> Split:
    """The same split for a checkpoint eqn inside another sub-jaxpr (a scan or cond body
    under reverse mode): a known checkpoint eqn giving the known outputs and residuals,
    and a staged one that recomputes from them."""
    known, staged, out_unknown = _partial_eval_jaxpr(params["jaxpr"], list(unknowns),
                                                     params["policy"])
    n_known = len(out_unknown) - sum(out_unknown)
    n_res = len(known.jaxpr.outvars) - n_known
    outs = out_map(out_unknown)
    known_ins = [j for j, u in enumerate(unknowns) if not u]
    unknown_ins = [("res", r) for r in range(n_res)] + \
        [("in", j) for j, u in enumerate(unknowns) if u]
    known_params = dict(params, jaxpr=known) if known.jaxpr.outvars else None
    return Split(known_params, known_ins if known_params else [], n_res,
                 dict(params, jaxpr=staged, differentiated=True), unknown_ins, outs)
split_rules[remat_p] = remat_split

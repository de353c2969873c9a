"""fnad.partial_eval: splitting a jaxpr into a known part and an unknown part.

Reverse mode runs a function's primal half now and stages its tangent half
(fnad/ad.py `linearize`); for a higher-order primitive (scan, cond, ...) whose
body mixes the two, the same split is done on its sub-jaxpr here:

    jaxpr(known_ins, unknown_ins) = jaxpr_unknown(residuals, unknown_ins)
        where (known_outs, residuals) = jaxpr_known(known_ins)

An equation is known when none of its inputs is unknown. Residuals are the
known values the unknown equations read. A higher-order primitive inside the
jaxpr is split by its entry in `split_rules` (so a scan inside a scan splits
too); any other equation with an unknown input is unknown as a whole.

`forward_known_rule(split)` turns such a split into the on-the-fly rule that
`JaxprTrace` (forward_known mode) uses during `linearize`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fnad import core
from fnad.ir import Jaxpr, JaxprEqn, Var

# Primitives with side effects: never removed as dead code.
effectful_primitives = core.effectful_primitives


# ---- dead code elimination -------------------------------------------------------------
def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool] | None = None,
              prune_invars: bool = False) -> tuple[Jaxpr, list[bool]]:
    """`jaxpr` without the equations no kept output needs.

    Returns the new jaxpr and, per invar, whether it is still read. With
    `prune_invars` the unread invars are dropped from the new jaxpr's signature.
    """
    # The walk lives in the DCE pass, imported late (fnad.passes imports the primitives).
    # Effects inside sub-jaxprs count; higher-order eqns are not pruned inside here.
    from fnad.passes.dce import dce_jaxpr as dce
    return dce(jaxpr, used_outputs, prune_invars, recursive=False)


# ---- splitting one equation --------------------------------------------------------------
@dataclass
class Split:
    """How a higher-order equation splits into a known and an unknown equation.

    The known equation takes the operands `known_ins` (indices into the original
    operands) and returns its known outputs followed by `num_res` residuals. The
    unknown equation's operands are `unknown_ins`: ("in", j) for original operand j,
    ("res", r) for residual r. `outs` maps each original output to ("known", k) or
    ("unknown", u). The unknown equation may return more than the unknown outputs
    (`num_unknown_outs` of them, e.g. a while_loop that recomputes its known carries);
    those no original output maps to are dropped.
    """
    known_params: dict | None            # None: no known equation at all
    known_ins: list[int]
    num_res: int
    unknown_params: dict
    unknown_ins: list[tuple[str, int]]
    outs: list[tuple[str, int]]
    num_unknown_outs: int | None = None  # None: the number of ("unknown", u) in outs


split_rules: dict[core.Primitive, Callable[..., Split]] = {}


def out_map(out_unknowns: Sequence[bool]) -> list[tuple[str, int]]:
    """Split.outs for outputs in order: each the next known or the next unknown one."""
    outs, nk, nu = [], 0, 0
    for u in out_unknowns:
        outs.append(("unknown", nu) if u else ("known", nk))
        nu, nk = nu + u, nk + (not u)
    return outs


def forward_known_rule(prim: core.Primitive, split: Callable[..., Split]):
    """The JaxprTrace (forward_known) rule for `prim`: run the known half now, stage the rest."""
    def rule(trace, args, params):
        unknowns = [trace.is_mine(x) for x in args]
        sp = split(params, unknowns)
        known_outs = []
        if sp.known_params is not None:
            with core.set_current_trace(trace.parent):
                known_outs = prim.bind(*[args[j] for j in sp.known_ins], **sp.known_params)
        num_known = len(known_outs) - sp.num_res
        res = known_outs[num_known:]
        ops = [args[j] if kind == "in" else res[j] for kind, j in sp.unknown_ins]
        unknown_outs = trace.stage(prim, ops, sp.unknown_params)
        return [known_outs[i] if kind == "known" else unknown_outs[i] for kind, i in sp.outs]
    return rule


# ---- splitting a jaxpr ---------------------------------------------------------------------
def partial_eval_jaxpr(jaxpr: Jaxpr, in_unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool] = False
                       ) -> tuple[Jaxpr, Jaxpr, list[bool], list[Var]]:
    """Split `jaxpr` (no constvars) by which inputs are unknown.

    Returns (jaxpr_known, jaxpr_unknown, out_unknowns, residuals):
      jaxpr_known:   known invars -> known outputs + residuals
      jaxpr_unknown: residuals + unknown invars -> unknown outputs
    An output listed in `instantiate` is made unknown even if it is known (its value
    is then passed through as a residual).
    """
    assert not jaxpr.constvars, "partial_eval_jaxpr expects the consts as invars"
    n_out = len(jaxpr.outvars)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    unknown: set[Var] = {v for v, u in zip(jaxpr.invars, in_unknowns) if u}
    known_eqns: list[JaxprEqn] = []
    unknown_eqns: list[JaxprEqn] = []
    for eqn in jaxpr.eqns:
        uks = [type(v) is Var and v in unknown for v in eqn.invars]
        if not any(uks):
            known_eqns.append(eqn)
            continue
        split = split_rules.get(eqn.primitive)
        if split is None:
            unknown_eqns.append(eqn)
            unknown.update(eqn.outvars)
            continue
        sp = split(eqn.params, uks)
        res_vars = [Var(a) for a in _res_avals(eqn, sp)]
        if sp.known_params is not None:
            k_outs = [None] * sum(kind == "known" for kind, _ in sp.outs)
            for (kind, i), v in zip(sp.outs, eqn.outvars):
                if kind == "known":
                    k_outs[i] = v
            known_eqns.append(JaxprEqn(eqn.primitive, [eqn.invars[j] for j in sp.known_ins],
                                       sp.known_params, k_outs + res_vars, eqn.source_info))
        u_ins = [eqn.invars[j] if kind == "in" else res_vars[j] for kind, j in sp.unknown_ins]
        if sp.num_unknown_outs is None:
            u_outs = [v for (kind, _), v in zip(sp.outs, eqn.outvars) if kind == "unknown"]
        else:                               # outputs no original output maps to: unused
            u_avals = core.abstract_eval(eqn.primitive, [v.aval for v in u_ins],
                                         sp.unknown_params)
            u_outs = [Var(a) for a in u_avals]
            for (kind, i), v in zip(sp.outs, eqn.outvars):
                if kind == "unknown":
                    u_outs[i] = v
        unknown_eqns.append(JaxprEqn(eqn.primitive, u_ins, sp.unknown_params, u_outs,
                                     eqn.source_info))
        unknown.update(u_outs)

    out_unknowns = [type(v) is Var and v in unknown or i for v, i in zip(jaxpr.outvars, inst)]
    residuals: list[Var] = []
    seen: set[Var] = set()

    def need(v):
        if type(v) is Var and v not in unknown and v not in seen:
            seen.add(v)
            residuals.append(v)
    for eqn in unknown_eqns:
        for v in eqn.invars:
            need(v)
    for v, u in zip(jaxpr.outvars, out_unknowns):
        if u:
            need(v)

    known_invars = [v for v, u in zip(jaxpr.invars, in_unknowns) if not u]
    known_outs = [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u]
    jaxpr_known, _ = dce_jaxpr(Jaxpr([], known_invars, known_eqns, known_outs + residuals))
    unknown_invars = [v for v, u in zip(jaxpr.invars, in_unknowns) if u]
    unknown_outs = [v for v, u in zip(jaxpr.outvars, out_unknowns) if u]
    jaxpr_unknown, _ = dce_jaxpr(Jaxpr([], residuals + unknown_invars, unknown_eqns,
                                       unknown_outs))
    return jaxpr_known, jaxpr_unknown, out_unknowns, residuals


def _res_avals(eqn: JaxprEqn, sp: Split) -> list[core.ShapedArray]:
    """The avals of a split equation's residuals (from its known half's abstract eval)."""
    if sp.known_params is None:
        return []
    in_avals = [eqn.invars[j].aval for j in sp.known_ins]
    outs = core.abstract_eval(eqn.primitive, in_avals, sp.known_params)
    return outs[len(outs) - sp.num_res:]


__all__ = ["Split", "dce_jaxpr", "effectful_primitives", "forward_known_rule", "out_map",
           "partial_eval_jaxpr", "split_rules"]

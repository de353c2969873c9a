"""fnad.passes: jaxpr -> jaxpr rewrites, and fusion planning for the codegen backends.

Every rewrite takes a ClosedJaxpr and returns one with the same signature (the same
invars, and outputs of exactly the same types), recursing into the sub-jaxprs of
higher-order equations without changing their signatures either (except where a
DCE rule rewrites an equation and its sub-jaxpr together):

    inline            splice call-like sub-jaxprs (jit; with lowering=True also
                      custom_jvp/vjp calls, checkpoint, name, stop_gradient)   inline.py
    simplify          remove identity ops AD and tracing leave behind         simplify.py
    fold_constants    evaluate equations whose inputs are all known           constant_folding.py
    cse               reuse the outputs of equal equations                    cse.py
    hoist_scans       work on loop inputs before a scan, sums of per-step
                      products after it                                     scan_hoist.py
    dce               drop equations no output needs                          dce.py
    plan_fusion       group equations into loop nests (a plan, no rewrite)    fusion.py
    cost_analysis     count flops, transcendentals and bytes (no rewrite)     cost.py

`optimize` chains the rewrites to a fixed point. Results never alias the input:
a pass returns its input object only when it changed nothing.
"""
from __future__ import annotations

from fnad.config import config
from fnad.ir import ClosedJaxpr
from fnad.passes._util import same_program
from fnad.passes.constant_folding import FOLD_LIMIT, fold_constants
from fnad.passes.cse import cse
from fnad.passes.dce import dce, dce_jaxpr, dce_rules
from fnad.passes.fusion import FusionGroup, plan_fusion
from fnad.passes.inline import inline
from fnad.passes.scan_hoist import hoist_scans
from fnad.passes.simplify import simplify, simplify_rules

__all__ = ["FOLD_LIMIT", "FusionGroup", "cse", "dce", "dce_jaxpr", "dce_rules",
           "fold_constants", "hoist_scans", "inline", "optimize", "plan_fusion", "simplify",
           "simplify_rules"]


def optimize(closed: ClosedJaxpr, *, lowering: bool = False, max_rounds: int = 4
             ) -> ClosedJaxpr:
    """inline -> simplify -> fold_constants -> cse -> hoist_scans -> dce, repeated until
    nothing changes (at most `max_rounds` times); hoist_scans where
    `config.jax_hoist_scans` (the default).

    `lowering=False` (what jit does before binding its jaxpr, which grad/vmap may still
    transform) keeps everything AD needs: custom rules, checkpoints, stop_gradient, and
    no new constants (jit's jaxpr takes its constants as operands). `lowering=True` is
    for a backend's compile: call-like equations are inlined and small array constants
    are folded into constvars.
    """
    max_const = FOLD_LIMIT if lowering else 0
    for _ in range(max_rounds):
        before = closed
        closed = inline(closed, lowering=lowering)
        closed = simplify(closed)
        closed = fold_constants(closed, max_const_size=max_const)
        closed = cse(closed)
        if config.jax_hoist_scans:
            closed = hoist_scans(closed)
        closed = dce(closed)
        if closed is before or same_program(closed, before):
            break
    return closed

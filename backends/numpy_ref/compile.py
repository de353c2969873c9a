"""`compile` for the numpy backend: an interpreter over NumPy buffers.

jit on the numpy backend runs the optimized jaxpr equation by equation on raw NumPy
values (no Array wrapping, no dispatch through the traces): the reference semantics
at the lowest interpretive cost. Call-like higher-order primitives (jit, checkpoint,
custom_jvp_call, custom_vjp_call, custom_linear_solve, custom_vmap_call, name) are
inlined; the other higher-order ones (cond, scan, while, debug_callback) run through
their eager rules.
"""
from __future__ import annotations

import numpy as np

from fnad import core
from fnad.config import config
from fnad.core import Array
from fnad.ir import ClosedJaxpr, Jaxpr, Var
from fnad.passes.dce import last_reads

# primitive name -> the param holding the sub-jaxpr that the primitive simply calls
_INLINED = {"jit": "jaxpr", "checkpoint": "jaxpr", "custom_jvp_call": "call_jaxpr",
            "custom_vjp_call": "call_jaxpr", "custom_linear_solve": "call_jaxpr",
            "custom_vmap_call": "call_jaxpr"}


def compile(closed: ClosedJaxpr):
    from fnad.backends import numpy_ref as backend
    return interpreter(closed.jaxpr, [np.asarray(c) for c in closed.consts], backend)


def interpreter(jaxpr: Jaxpr, consts, backend):
    """`run(*buffers)`: `interpret` of `jaxpr` with its `consts` (buffers of `backend`), the
    release points worked out once rather than on every call."""
    dead = _dead_after(jaxpr)

    def run(*bufs):
        return interpret(jaxpr, consts, bufs, backend, dead)
    return run


def interpret(jaxpr: Jaxpr, consts, args, backend, dead: dict | None = None) -> list:
    """The outputs of `jaxpr` on `args`, equation by equation; `dead` is `_dead_after(jaxpr)`
    (computed here when not given)."""
    impls = backend.impl_rules
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    check = config.jax_debug_nans or config.jax_debug_infs
    if dead is None:
        dead = _dead_after(jaxpr)
    for i, eqn in enumerate(jaxpr.eqns):
        ins = [env[v] if type(v) is Var else np.asarray(v.val, v.aval.dtype)
               for v in eqn.invars]
        prim = eqn.primitive
        impl = impls.get(prim)
        if impl is not None:
            outs = impl(*ins, **eqn.params)
            outs = outs if prim.multiple_results else [outs]
        elif prim.name in _INLINED:
            sub = eqn.params[_INLINED[prim.name]]
            outs = interpret(sub.jaxpr, [np.asarray(c) for c in sub.consts], ins, backend)
        elif prim.name == "name":
            outs = ins
        else:
            rule = core.eager_rules.get(prim)
            if rule is None:
                raise core.no_impl_error(prim, backend.name)
            arrays = [Array(x, v.aval, backend) for x, v in zip(ins, eqn.invars)]
            with core.eqn_source(eqn.source_info):
                res = rule(*arrays, **eqn.params)
            outs = [r._value if type(r) is Array else np.asarray(r) for r in res]
        if check:
            with core.eqn_source(eqn.source_info):
                core._check_nans(prim, outs, backend)
        env.update(zip(eqn.outvars, outs))
        for v in dead.get(i, ()):
            del env[v]
    return [env[v] if type(v) is Var else np.asarray(v.val, v.aval.dtype)
            for v in jaxpr.outvars]


def _dead_after(jaxpr: Jaxpr) -> dict:
    """eqn index -> the Vars last read there (not outputs): dropped from the environment
    right after it, so that their memory serves the next buffers. Keeping every value to
    the end, the interpreted first call of benchmarks/gpt_step.py's train step peaked at
    1031 MB of resident memory and took 1.3-2.3 s, most of it faulting in fresh pages
    (about 1 ms per MB on the development machine); now 282 MB and 0.61-0.64 s."""
    return last_reads([eqn.invars for eqn in jaxpr.eqns], jaxpr.outvars)

"""`compile` for the cuda backend: a jaxpr as fused CUDA kernels plus eager device impls.

The program is flattened as for the numba backend (codegen.flatten: jit, checkpoint,
custom_jvp_call, custom_vjp_call and name inlined, dead code dropped, transposed products
folded into dot_general) and planned by its fusion planner (numba_cpu/plan.py) with this
backend's `fusable`: each group becomes one CUDA kernel (kernels.group_kernel), generated
and loaded here, compiled by numba at its first launch. The other equations call the eager
impls (eager.py: dot_general's GEMM, views and strided copies, and the primitives that go
through the host); cond, scan, while and debug_callback run their eager rules, whose bodies
bind primitives on this backend. The result is a list of steps over a slot table, run in
order: a Python loop over a few dozen steps per call, no per-equation dispatch.

Under `jax_debug_nans`/`jax_debug_infs` the program is interpreted equation by equation (as
the numpy backend does), so that the check names the primitive that made the NaN.

`Compiled.source` is the source of the program's kernels (`fnad.jit(f, backend="cuda")
.lower(x).source`).
"""
from __future__ import annotations

import functools

from fnad import core
from fnad.backends.cuda import kernels as kn
from fnad.backends.cuda import runtime as rt
from fnad.backends.cuda.scalar_ops import fusable
from fnad.backends.numba_cpu.codegen import eager_call, flatten
from fnad.backends.numba_cpu.plan import plan
from fnad.config import config
from fnad.core import Array
from fnad.ir import ClosedJaxpr, Literal


class Compiled:
    """A compiled program: call it on device buffers for the list of output buffers."""

    __slots__ = ("_steps", "_nslots", "_in", "_consts", "_out", "source", "n_kernels")

    def __init__(self, steps, nslots, in_slots, consts, out, source, n_kernels):
        self._steps, self._nslots, self._in = steps, nslots, in_slots
        self._consts, self._out = consts, out
        self.source, self.n_kernels = source, n_kernels

    def __call__(self, *bufs) -> list:
        env = [None] * self._nslots
        for slot, b in zip(self._in, bufs):
            env[slot] = rt.to_device(b)
        for slot, c in self._consts:
            env[slot] = c
        for step in self._steps:
            step(env)
        return [env[s] for s in self._out]

    def __repr__(self):
        return f"<cuda program: {len(self._steps)} steps, {self.n_kernels} fused kernels>"


def compile(closed: ClosedJaxpr):  # noqa: A001
    from fnad.backends import cuda as backend
    if config.jax_debug_nans or config.jax_debug_infs:
        from fnad.backends.numpy_ref.compile import interpreter
        run = interpreter(closed.jaxpr, [rt.to_device(_host_value(c)) for c in closed.consts],
                          backend)
        run.source = None
        return run

    invars, const_pairs, eqns, outvars = flatten(closed.jaxpr, closed.consts)
    slots: dict = {}

    def slot(v) -> int:
        s = slots.get(v)
        if s is None:
            s = slots[v] = len(slots)
        return s

    consts = []

    def atom(a) -> int:
        if type(a) is Literal:                   # a device constant, made once
            s = len(slots)
            slots[object()] = s
            consts.append((s, rt.to_device(core.canonicalize_value(a.val, a.aval))))
            return s
        return slot(a)

    in_slots = [slot(v) for v in invars]
    for v, c in const_pairs:
        consts.append((slot(v), rt.to_device(_host_value(c))))
    steps, sources = [], []
    for kind, x in plan(eqns, outvars, fusable):
        if kind == "group":
            gk = kn.group_kernel(x, eqns, f"k{len(sources)}")
            sources.append(gk.source)
            steps.append(_group_step(gk, [slot(v) for v, _ in x.inputs],
                                     [(slot(v), v.aval) for v in x.outputs]))
        else:
            eqn = eqns[x]
            steps.append(_eqn_step(eqn, [atom(a) for a in eqn.invars],
                                   [slot(v) for v in eqn.outvars], backend))
    out = [atom(a) for a in outvars]
    return Compiled(steps, len(slots), in_slots, consts, out, "\n\n".join(sources),
                    len(sources))


def _host_value(c):
    """A jaxpr constant as a host value (an Array of any backend, or a NumPy value)."""
    if type(c) is Array:
        return c._backend.to_numpy(c._value)
    return c


def _group_step(gk, ins: list, outs: list):
    def step(env):
        bufs = [rt.empty(a.shape, a.dtype) for _, a in outs]
        gk([env[s] for s in ins], bufs)
        for (s, _), b in zip(outs, bufs):
            env[s] = b
    return step


def _eqn_step(eqn, ins: list, outs: list, backend):
    prim = eqn.primitive
    impl = backend.impl_rules.get(prim)
    if impl is not None:
        fn = functools.partial(impl, **eqn.params) if eqn.params else impl
        multi = prim.multiple_results
    elif prim in core.eager_rules:
        fn, multi = eager_call(eqn, backend, _buffer_of), True
    else:
        raise core.no_impl_error(prim, backend.name)
    if multi:
        def step(env):
            for s, b in zip(outs, fn(*[env[i] for i in ins])):
                env[s] = b
    else:
        (o,) = outs

        def step(env):
            env[o] = fn(*[env[i] for i in ins])
    return step


def _buffer_of(r, backend):
    """An eager rule's result as a buffer of this backend (Arrays of another one moved)."""
    if type(r) is not Array:
        return rt.to_device(r)
    if r._backend is backend:
        return r._value
    return rt.to_device(r._backend.to_numpy(r._value))

"""fnad.jit: `jit`, one compiled callable per traced program and backend.

`jit(f)(*args)` traces `f` at the avals of its arguments (once per cache key: input
avals and pytree structure, static arguments, backend, config), optimizes the jaxpr
(fnad.passes) and binds the primitive `jit_p` with it. (A backend that keeps compiled
programs on disk may find one by the jaxpr as traced, `load_traced`: an eager call in a
new process then runs it without the passes.) jit_p is a primitive like any other, with
a sub-jaxpr, so every transformation composes with jit:

    eager     compile the jaxpr with the backend (`backend.compile`, cached on the
              ClosedJaxpr) and call it on the argument buffers
    jvp       jit of the JVP of the jaxpr (ad.jvp_jaxpr)
    linearize the known/unknown split (partial_eval): a known jit now, an unknown one
              staged; transpose: jit of the transposed jaxpr (ad.transpose_jaxpr_fn)
    vmap      jit of the batched jaxpr (batching.batch_jaxpr)

so grad(jit(f)), jit(grad(f)), vmap(jit(f)) and jit(vmap(f)) all stay compiled.
`config.jax_disable_jit` (or `fnad.disable_jit()`) runs f eagerly instead;
`jax_log_compiles` logs each trace and which part of the cache key changed.
`jit(f).lower(*args)` gives the optimized jaxpr and, for codegen backends, the
generated source (`.as_text()`, `.source`), for reading in a notebook.
"""
from __future__ import annotations

import functools
import inspect
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fnad import core, profiler, tree_util
from fnad.config import config
from fnad.core import (Array, Tracer, Zero, abstract_eval_rules, batch_rules, eager_rules,
                       get_aval, is_undefined, jvp_rules, partial_eval_rules, transpose_rules)
from fnad.ir import ClosedJaxpr, eval_jaxpr
from fnad.partial_eval import (Split, forward_known_rule, out_map, partial_eval_jaxpr,
                               split_rules)
from fnad.tracing import shaped_abstractify, trace_to_subjaxpr

__all__ = ["Compiled", "Lowered", "Traced", "clear_caches", "jit"]

logger = logging.getLogger("fnad.jit")


# ---- the jit primitive -----------------------------------------------------------------------
jit_p = core.Primitive("jit", multiple_results=True)
# params: jaxpr (ClosedJaxpr, no consts), name (of the user's function), backend (a backend
# name, or None for config.jax_jit_backend)


def _backend(name: str | None):
    from fnad.backends import get_backend
    return get_backend(name or config.jax_jit_backend)


def compiled_for(closed: ClosedJaxpr, backend):
    """backend.compile(closed), once per (jaxpr, backend): kept on the ClosedJaxpr."""
    fn = closed.compiled.get(backend.name)
    if fn is None:
        if not hasattr(backend, "compile"):
            raise NotImplementedError(f"the {backend.name} backend cannot compile (no "
                                      f"`compile`); use it eagerly or jit with another backend")
        with profiler.span(f"jit compile ({backend.name})"):
            fn = closed.compiled[backend.name] = backend.compile(closed)
    return fn


def _check_shardings(what: str, shardings) -> None:
    """Every leaf of `shardings` must be a Sharding, a PartitionSpec or None."""
    from fnad import sharding
    leaves = tree_util.tree_leaves(shardings, is_leaf=lambda x: x is None or isinstance(
        x, (sharding.Sharding, sharding.PartitionSpec)))
    for leaf in leaves:
        if leaf is not None and not isinstance(leaf, (sharding.Sharding,
                                                      sharding.PartitionSpec)):
            raise TypeError(f"jit: {what} must hold Shardings or PartitionSpecs (or None), "
                            f"got {leaf!r} of type {type(leaf).__name__}")


def jit_abstract_eval(*avals, jaxpr, name, backend):
    expect = jaxpr.in_avals
    if len(avals) != len(expect):
        raise core.shape_error("jit", f"{name} takes {len(expect)} operands, got {len(avals)}")
    for i, (a, e) in enumerate(zip(avals, expect)):
        if (a.shape, a.dtype) != (e.shape, e.dtype):
            raise core.shape_error("jit", f"operand {i} of {name} is {a.str_short()} but its "
                                   f"jaxpr takes {e.str_short()}")
    return jaxpr.out_avals


def jit_eager(*args, jaxpr, name, backend):
    if config.jax_disable_jit:
        return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
    be = _backend(backend)
    fn = compiled_for(jaxpr, be)
    bufs = [_to_buffer(x, be) for x in args]
    outs = fn(*bufs)
    home = _home(be)
    return [Array(o, a, home) for o, a in zip(outs, jaxpr.out_avals)]


def _home(be):
    """The backend whose Arrays hold `be`'s buffers: itself, or (numba) the numpy backend,
    whose eager implementations run on the same NumPy buffers."""
    return getattr(be, "eager_backend", be)


def _to_buffer(x, be):
    """x as a buffer of backend `be` (an Array on another backend goes through NumPy)."""
    if type(x) is Array:
        if x._backend is be or x._backend is _home(be):
            return x._value
        return be.device_put(np.asarray(x._backend.to_numpy(x._value)))
    return be.device_put(core.canonicalize_value(x, get_aval(x)))


def jit_jvp(primals, tangents, *, jaxpr, name, backend):
    from fnad.ad import jvp_jaxpr
    nz = [type(t) is not Zero for t in tangents]
    jvp, out_nz, consts = jvp_jaxpr(jaxpr, nz, False)
    outs = jit_p.bind(*consts, *primals, *[t for t in tangents if type(t) is not Zero],
                      jaxpr=jvp, name=f"jvp({name})", backend=backend)
    n = len(jaxpr.out_avals)
    it = iter(outs[n:])
    return outs[:n], [next(it) if z else Zero(a.to_tangent_aval())
                      for z, a in zip(out_nz, jaxpr.out_avals)]


def jit_split(params, unknowns) -> Split:
    jaxpr = params["jaxpr"]
    jk, ju, out_uk, res = partial_eval_jaxpr(jaxpr.jaxpr, unknowns)
    known_ins = [j for j, u in enumerate(unknowns) if not u]
    known_params = dict(params, jaxpr=ClosedJaxpr(jk, [])) if jk.outvars else None
    unknown_ins = [("res", r) for r in range(len(res))] + \
        [("in", j) for j, u in enumerate(unknowns) if u]
    return Split(known_params, known_ins if known_params else [], len(res),
                 dict(params, jaxpr=ClosedJaxpr(ju, [])), unknown_ins, out_map(out_uk))


def jit_transpose(cts, *args, jaxpr, name, backend):
    from fnad.ad import transpose_jaxpr_fn
    linear = [is_undefined(x) for x in args]
    nonlin = [x for x in args if not is_undefined(x)]
    cts = [_zeros_like_aval(a) if type(ct) is Zero else ct
           for ct, a in zip(cts, jaxpr.out_avals)]
    fn = transpose_jaxpr_fn(jaxpr.jaxpr, linear)
    closed, consts = trace_to_subjaxpr(fn, [get_aval(x) for x in nonlin + cts],
                                       f"transpose of {name}")
    outs = iter(jit_p.bind(*consts, *nonlin, *cts, jaxpr=closed, name=f"transpose({name})",
                           backend=backend))
    return [next(outs) if lin else None for lin in linear]


def _zeros_like_aval(aval):
    from fnad.primitives.shape_ops import full
    t = aval.to_tangent_aval()
    return full(t.shape, 0, t.dtype)


def jit_batch(vals, dims, *, jaxpr, name, backend):
    from fnad.batching import batch_jaxpr
    from fnad.primitives._batching import moveaxis
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    batched, out_b = batch_jaxpr(jaxpr, size, [d is not None for d in dims], False)
    outs = jit_p.bind(*vals, jaxpr=batched, name=f"vmap({name})", backend=backend)
    return outs, [0 if b else None for b in out_b]


abstract_eval_rules[jit_p] = jit_abstract_eval
eager_rules[jit_p] = jit_eager
jvp_rules[jit_p] = jit_jvp
split_rules[jit_p] = jit_split
partial_eval_rules[jit_p] = forward_known_rule(jit_p, jit_split)
transpose_rules[jit_p] = jit_transpose
batch_rules[jit_p] = jit_batch


# ---- the user API --------------------------------------------------------------------------
_ALL: weakref.WeakSet = weakref.WeakSet()          # every JitWrapped, for clear_caches


def clear_caches() -> None:
    """Forget every jitted function's traces and compiled programs, as `jax.clear_caches`:
    the next call traces and compiles again (compiled kernels on disk stay there, so the
    numba backend reloads them)."""
    for wrapped in list(_ALL):
        wrapped.clear_cache()


class _Entry:
    """One traced program: the jaxpr as traced, optimized when first needed (`closed`), its
    hoisted constants, the output tree."""

    __slots__ = ("traced", "_closed", "consts", "out_tree", "name", "_placed", "_not_found")

    def __init__(self, traced, consts, out_tree, name):
        self.traced, self.consts, self.out_tree, self.name = traced, consts, out_tree, name
        self._closed = None
        self._placed: dict = {}
        self._not_found: set = set()     # backends whose load_traced found no program

    @property
    def closed(self) -> ClosedJaxpr:
        """The optimized jaxpr (fnad.passes), what jit binds and transformations take."""
        if self._closed is None:
            with core.gc_paused(), profiler.span(f"jit passes {self.name}"):
                self._closed = _optimize(self.traced)
        return self._closed

    def program(self, be) -> ClosedJaxpr:
        """The jaxpr an eager call runs on backend `be`, compiled for it: the optimized one,
        or the jaxpr as traced where the backend found a program compiled from it before
        (`be.load_traced`: the numba backend's disk cache, so a new process running a
        program compiled before skips the passes)."""
        traced, load = self.traced, getattr(be, "load_traced", None)
        if self._closed is None and load is not None and be.name not in self._not_found:
            if be.name not in traced.compiled:
                fn = load(traced)
                if fn is None:
                    self._not_found.add(be.name)
                else:
                    traced.compiled[be.name] = fn
            if be.name in traced.compiled:
                return traced
        closed = self.closed
        if load is not None and be.name not in closed.compiled:
            be.remember_traced(traced, compiled_for(closed, be))
        return closed

    def consts_on(self, be) -> list:
        """The constants as Arrays of backend `be` (or its home): moved there at the first
        call, not at every call. Constants computed while tracing (a RoPE table, a causal
        mask made with NumPy) are Arrays of the default backend or NumPy values, and a
        program for another backend (xla, cuda) would copy them to the device each call."""
        placed = self._placed.get(be)
        if placed is None:
            home = _home(be)

            def place(c):
                if isinstance(c, Tracer) or type(c) is Array and c._backend in (be, home):
                    return c
                aval = c.aval if type(c) is Array else get_aval(c)
                return Array(_to_buffer(c, be), aval, home)
            placed = self._placed[be] = [place(c) for c in self.consts]
        return placed

    def call(self, flat: list, name: str, backend: str | None) -> list:
        """jit_p bound on the argument leaves `flat` (the constants on the program's backend
        when called eagerly): the output leaves."""
        consts = self.consts
        if core._state.trace is core.eval_trace:
            be = _backend(backend)
            jaxpr = self.program(be)
            if consts:
                consts = self.consts_on(be)
        else:
            jaxpr = self.closed
        return jit_p.bind(*consts, *flat, jaxpr=jaxpr, name=name, backend=backend)


class _Stage:
    """What the stages of `jit(f)` for one argument signature share (JAX's
    `jax.stages`): the optimized program (`jaxpr`), the backend, and the pytrees and avals
    of the dynamic arguments (`in_tree`, `in_avals`) and of the outputs (`out_tree`,
    `out_info`)."""

    def __init__(self, entry: _Entry, backend_name: str, name: str, in_tree, in_avals):
        self._entry = entry
        self.jaxpr: ClosedJaxpr = entry.closed
        self.backend, self.fun_name = backend_name, name
        self.in_tree, self.out_tree = in_tree, entry.out_tree
        self._flat_in_avals = tuple(in_avals)

    @property
    def name(self) -> str:
        return self.fun_name

    @property
    def in_avals(self):
        """The (args, kwargs) pytree of the dynamic arguments' avals."""
        return tree_util.tree_unflatten(self.in_tree, list(self._flat_in_avals))

    @property
    def out_info(self):
        """The outputs' pytree of ShapeDtypeStructs."""
        return tree_util.tree_unflatten(self.out_tree, [
            core.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
            for a in self.jaxpr.out_avals])

    @property
    def source(self) -> str | None:
        """The generated source of codegen backends (None for interpreting backends)."""
        return getattr(compiled_for(self.jaxpr, _backend(self.backend)), "source", None)

    def as_text(self) -> str:
        text = f"# {self.fun_name} on the {self.backend} backend\n{self.jaxpr}"
        src = self.source
        return text + (f"\n\n# generated code\n{src}" if src else "")

    def __str__(self):
        return self.as_text()

    def _repr_pretty_(self, p, cycle):
        p.text(self.as_text())

    def cost_analysis(self) -> dict[str, float]:
        """The program's "flops", "transcendentals" and "bytes accessed", counted from its
        jaxpr as XLA counts (bytes as if unfused): fnad.passes.cost."""
        from fnad.passes.cost import cost_analysis
        return cost_analysis(self.jaxpr)

    def _next(self, cls):
        return cls(self._entry, self.backend, self.fun_name, self.in_tree, self._flat_in_avals)


class Traced(_Stage):
    """What `jit(f).trace(*args)` returns: the program traced at these arguments' types.
    Its `jaxpr` is optimized (by fnad.passes, where JAX's Traced holds the jaxpr as
    traced); `lower()` is the next stage."""

    def lower(self) -> Lowered:
        return self._next(Lowered)


class Lowered(_Stage):
    """What `jit(f).lower(*args)` returns: the optimized jaxpr and the backend's code
    (`as_text()`, `source`); `compile()` gives the `Compiled` to call."""

    def compile(self) -> Compiled:
        return self._next(Compiled)


class Compiled(_Stage):
    """What `jit(f).lower(*args).compile()` returns: the program compiled for the lowered
    arguments' types. Call it as the jitted function less its static arguments (JAX's AOT
    rule): the same pytree structure, the same shapes and dtypes, else a TypeError.
    `runtime_executable()` is the backend's own program (raw buffers in, a list out);
    `as_text()` adds the StableHLO on the xla backend."""

    def __init__(self, *args):
        super().__init__(*args)
        self._executable = compiled_for(self.jaxpr, _backend(self.backend))

    def runtime_executable(self):
        return self._executable

    def as_text(self) -> str:
        text = super().as_text()
        hlo = getattr(self._executable, "lowered_text", None)
        return text + (f"\n\n# lowered for XLA\n{hlo}" if hlo else "")

    def __call__(self, *args, **kwargs):
        flat, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"{self.fun_name} was compiled for arguments (args, kwargs) "
                            f"structured as {self.in_tree}, static arguments left out, but "
                            f"was called with {tree}")
        bad = [f"argument {i} compiled for {e.str_short()}, called with {a.str_short()}"
               for i, (x, e) in enumerate(zip(flat, self._flat_in_avals))
               if ((a := shaped_abstractify(x)).shape, a.dtype) != (e.shape, e.dtype)]
        if bad:
            raise TypeError(f"{self.fun_name}: the argument types differ from those it was "
                            f"compiled for: {'; '.join(bad)}")
        outs = self._entry.call(flat, self.fun_name, self.backend)
        return tree_util.tree_unflatten(self.out_tree, outs)


class JitWrapped:
    """A jit-compiled function: call it like `fun`; `.lower(*args)` to inspect it."""

    def __init__(self, fun: Callable, static_argnums, static_argnames, donate_argnums,
                 backend: str | None):
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__: it may hold `fun`
        self.fun = fun
        self.backend = backend
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self.donate_argnums = donate_argnums
        self._cache: dict = {}
        self._fast: dict = {}                       # (config, avals) -> ready-to-call entry
        self._last_key = None
        self._named_nums: set[int] = set()          # static positions that have a name
        self.__name__ = getattr(fun, "__name__", "fun")
        _ALL.add(self)

    def __get__(self, obj, objtype=None):                 # jit on methods
        return self if obj is None else functools.partial(self, obj)

    def _cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast.clear()

    def _split_args(self, args, kwargs):
        n = len(args)
        static_pos = set()
        for i in self.static_argnums:
            if i in self._named_nums and not -n <= i < n:
                continue                                  # passed by keyword, if at all
            if not -n <= i < n:
                raise ValueError(f"jit({self.__name__}): static_argnums={i} but the function "
                                 f"was called with {n} positional arguments")
            static_pos.add(i % n)
        statics = []
        for i in sorted(static_pos):
            statics.append(("arg", i, _hashable(args[i], f"argument {i}", self.__name__)))
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                statics.append(("kw", k, _hashable(v, f"argument {k!r}", self.__name__)))
            else:
                dyn_kwargs[k] = v
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        return static_pos, tuple(statics), dyn_args, dyn_kwargs

    def _entry(self, args, kwargs):
        static_pos, statics, dyn_args, dyn_kwargs = self._split_args(args, kwargs)
        flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        avals = tuple(shaped_abstractify(x) for x in flat)
        backend = self.backend or config.jax_jit_backend
        key = (in_tree, avals, statics, backend, config.values(), _named_axes())
        entry = self._cache.get(key)
        if entry is not None:
            return entry, flat, in_tree, avals
        if config.jax_log_compiles or (config.jax_explain_cache_misses
                                       and self._last_key is not None):
            logger.warning("Compiling %s for %s%s", self.__name__,
                           ", ".join(a.str_short() for a in avals),
                           _why(self._last_key, key))
        self._last_key = key
        static_vals = {i: args[i] for i in static_pos}
        static_kw = {k: kwargs[k] for k in kwargs if k in self.static_argnames}
        n = len(args)
        out_tree_box: list = []

        def flat_fun(*leaves):
            d_args, d_kwargs = tree_util.tree_unflatten(in_tree, list(leaves))
            it = iter(d_args)
            full = [static_vals[i] if i in static_pos else next(it) for i in range(n)]
            out = self.fun(*full, **d_kwargs, **static_kw)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        with core.gc_paused(), profiler.span(f"jit trace {self.__name__}"):
            traced, consts = trace_to_subjaxpr(flat_fun, list(avals),
                                               f"jit of {self.__name__}")
        entry = _Entry(traced, consts, out_tree_box[0], self.__name__)
        if not any(isinstance(c, Tracer) for c in consts):   # closure over a tracer: no cache
            self._cache[key] = entry
        return entry, flat, in_tree, avals

    def __call__(self, *args, **kwargs):
        if config.jax_disable_jit:
            return self.fun(*args, **kwargs)
        key = None
        if core._state.trace is core.eval_trace:
            # The fast path: every argument an Array (or a pytree of Arrays), compiled
            # before for these avals, tree, static values and config (`_fast_key`).
            leaves, key = self._fast_key(args, kwargs)
            fast = self._fast.get(key) if key is not None else None
            if fast is not None:
                fn, consts, be, out_avals, out_tree = fast
                vals = [x._value if x._backend is be else _to_buffer(x, be) for x in leaves]
                if out_tree is None:                        # one output
                    return Array(fn(*consts, *vals)[0], out_avals[0], be)
                outs = [Array(o, a, be) for o, a in zip(fn(*consts, *vals), out_avals)]
                return tree_util.tree_unflatten(out_tree, outs)
        entry, flat, _, _ = self._entry(args, kwargs)
        outs = entry.call(flat, self.__name__, self.backend)
        if key is not None and all(type(c) is Array for c in entry.consts):
            self._remember_fast(key, entry)
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def _fast_key(self, args, kwargs) -> tuple:
        """(the Array leaves, the fast path's key) of a call, or (None, None) where an
        argument leaf is not an Array (or a static one is bad: the general path says so).
        The key holds the config's state, the leaves' avals and, where the arguments are
        not all Arrays, their tree; with static arguments or keywords, the static values
        and the tree of the dynamic (args, kwargs)."""
        if not kwargs and not self.static_argnums:
            leaves, key = args, [config._state_id]
            for x in args:
                if type(x) is not Array:
                    leaves, tree = tree_util.tree_flatten(args)
                    key = [config._state_id, tree]
                    break
        else:
            try:
                _, statics, dyn_args, dyn_kwargs = self._split_args(args, kwargs)
            except (TypeError, ValueError):
                return None, None
            names = sorted(dyn_kwargs)                     # tree_flatten's order for a dict
            leaves = [*dyn_args, *[dyn_kwargs[k] for k in names]]
            if all(type(x) is Array for x in leaves):      # no tree to flatten
                key = [config._state_id, statics, len(dyn_args), tuple(names)]
            else:
                leaves, tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
                key = [config._state_id, statics, tree]
        for x in leaves:
            if type(x) is not Array:
                return None, None
            key.append(x.aval)
        return leaves, tuple(key)

    def _remember_fast(self, key: tuple, entry: _Entry):
        """Keep under `key` (`_fast_key`) what a call with these arguments' avals (tree,
        static values) needs, for `__call__`'s fast path: the program, its constants on its
        backend, the outputs' avals and tree."""
        be = _backend(self.backend)
        jaxpr = entry.program(be)
        fn = compiled_for(jaxpr, be)
        if getattr(fn, "_checked", False):     # numba: its program, past the first-call checks
            fn = fn.run
        consts = [_to_buffer(c, be) for c in entry.consts_on(be)]     # moved there once
        single = entry.out_tree.num_leaves == 1 and tree_util.tree_structure(0) == \
            entry.out_tree
        self._fast[key] = (fn, consts, _home(be), jaxpr.out_avals,
                           None if single else entry.out_tree)

    def trace(self, *args, **kwargs) -> Traced:
        """The program traced (and optimized) at these arguments' types, without running
        it; static arguments are given as in a call."""
        entry, _, in_tree, avals = self._entry(args, kwargs)
        return Traced(entry, self.backend or config.jax_jit_backend, self.__name__, in_tree,
                      avals)

    def lower(self, *args, **kwargs) -> Lowered:
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs):
        return self.trace(*args, **kwargs).out_info


def _named_axes() -> tuple:
    """The axes enclosing vmaps bind by name here, as ((name, size), ...): a function
    using collectives traces differently under each."""
    t = core.current_trace()
    if t is core.eval_trace:
        return ()
    from fnad.primitives.collectives import axis_env
    return tuple(axis_env().items())


def _optimize(closed: ClosedJaxpr) -> ClosedJaxpr:
    """The traced program simplified (fnad.passes): still a program every transformation
    can take, so custom rules are kept; backends lower further in their `compile`."""
    from fnad.passes import optimize
    return optimize(closed)


def _hashable(value, what: str, name: str):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"jit({name}): static {what} must be hashable, but got a "
                        f"{type(value).__name__}: {value!r:.80}. Pass a tuple instead of a "
                        f"list, or make it a (non-static) array argument.") from None
    return value


def _why(old, new) -> str:
    """Which part of the cache key changed since the last compile (for jax_log_compiles and
    jax_explain_cache_misses)."""
    if old is None:
        return " (first call)"
    parts = ("the argument structure", "the argument shapes/dtypes", "the static arguments",
             "the backend", "the config", "the enclosing vmaps' named axes")
    changed = [p for p, a, b in zip(parts, old, new) if a != b]
    if old[4] != new[4]:                  # name the options: config.values() pairs
        names = [n for (n, a), (_, b) in zip(old[4], new[4]) if a != b]
        changed[changed.index("the config")] = f"the config ({', '.join(names)})"
    return f" (because {' and '.join(changed)} changed)" if changed else ""


def _check_static(params, pos: list, nums: tuple, names: tuple) -> None:
    """As jax.jit: static_argnums beyond the positional parameters and static_argnames that
    name no parameter are errors when jit is called (not with *args / **kwargs)."""
    kinds = {p.kind for p in params}
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        bad = [i for i in nums if not -len(pos) <= i < len(pos)]
        if bad:
            raise ValueError(f"Jitted function has static_argnums={nums}, but only accepts "
                             f"{len(pos)} positional arguments.")
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        known = {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
        bad = sorted(set(names) - known)
        if bad:
            raise ValueError(f"Jitted function has invalid argnames {set(bad)} in "
                             f"static_argnames. Function does not take these args.")


def _as_tuple(x, what: str, kind: type) -> tuple:
    """`x` (None, one `kind` value or a sequence of them) as a tuple; a TypeError naming
    the argument otherwise (argnums are ints, argnames strs)."""
    if x is None:
        return ()
    items = (x,) if isinstance(x, (int, np.integer, str)) else x
    try:
        items = tuple(items)
    except TypeError:
        items = (x,)
    for item in items:
        ok = isinstance(item, str) if kind is str else (
            isinstance(item, (int, np.integer)) and not isinstance(item, bool))
        if not ok:
            raise TypeError(f"jit: {what} must be {'a str' if kind is str else 'an int'} or a "
                            f"sequence of them, got {x!r}")
    return tuple(item if kind is str else int(item) for item in items)


def jit(fun: Callable | None = None, in_shardings=None, out_shardings=None, *,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None, backend: str | None = None,
        inline: bool = False, keep_unused: bool = False, device=None,
        compiler_options: dict | None = None) -> Any:
    """Compile `fun` (traced once per argument signature) with a backend.

    As jax.jit: static_argnums/static_argnames are Python values baked into the trace
    (they must be hashable); donate_argnums is accepted (buffers are not reused yet);
    `backend` picks the backend ("numba", "numpy", "xla", ...; a platform, "cpu" or
    "gpu", picks one that runs there: fnad.devices.backend_for), default
    `config.jax_jit_backend`; `device` (an fnad Device) picks its backend. Usable as a
    decorator with or without arguments; `.trace`/`.lower(*args)` and `.compile()` are the
    ahead-of-time stages. `in_shardings`/`out_shardings` (Shardings, PartitionSpecs or
    pytrees of them, checked) and `compiler_options` are accepted: fnad runs on one device,
    where every sharding is the whole array.
    """
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 backend=backend, inline=inline, keep_unused=keep_unused,
                                 device=device, compiler_options=compiler_options)
    if not callable(fun):
        raise TypeError(f"jit: expected a function, got {type(fun).__name__}")
    _check_shardings("in_shardings", in_shardings)
    _check_shardings("out_shardings", out_shardings)
    if compiler_options is not None and not isinstance(compiler_options, dict):
        raise TypeError(f"jit: compiler_options must be a dict, got "
                        f"{type(compiler_options).__name__}")
    nums = _as_tuple(static_argnums, "static_argnums", int)
    names = _as_tuple(static_argnames, "static_argnames", str)
    donate = _as_tuple(donate_argnums, "donate_argnums", int)
    _as_tuple(donate_argnames, "donate_argnames", str)
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):                   # a builtin without a signature
        sig = None
    pos = []
    if sig is not None:
        params = list(sig.parameters.values())
        pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        _check_static(params, pos, nums, names)
        names = tuple(names) + tuple(pos[i] for i in nums if -len(pos) <= i < len(pos)
                                     and pos[i] not in names)
        nums = tuple(nums) + tuple(pos.index(n) for n in names if n in pos
                                   and pos.index(n) not in nums)
    if device is not None:
        if backend is not None:
            raise ValueError(f"jit: pass backend= or device=, not both (got backend={backend!r}"
                             f" and device={device!r})")
        from fnad.devices import Device
        backend = device.backend if isinstance(device, Device) else device
    if backend is not None:
        from fnad.devices import backend_for
        try:
            backend = backend_for(backend, jit=True)
        except ValueError as e:
            raise ValueError(f"jit: {e}") from None
    wrapped = JitWrapped(fun, nums, names, donate, backend)
    wrapped._named_nums = {i for i in nums if 0 <= i < len(pos)}
    return wrapped

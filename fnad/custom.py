"""fnad.custom: user-defined derivative rules, `custom_jvp` and `custom_vjp` (JAX's API).

Owns the decorators and three primitives, each with its rules in the core tables:

- `custom_jvp_call`: operands are the values the function closes over (hoisted by
  `trace_to_subjaxpr`, `num_consts` of them) and then its flattened arguments; params
  hold the function staged as a ClosedJaxpr and the user's JVP rule (a Python callable,
  run lazily, so a rule may call the function itself and be differentiated again).
  Evaluating, staging and batching go through the jaxpr; differentiating calls the rule.
- `custom_vjp_call`: likewise with the fwd/bwd pair. Its JVP runs `fwd` now and emits
  the tangent as `custom_lin`, a linear primitive with no evaluation rule: linearize
  stages it with the residuals as constants and transposing it calls `bwd`. Forward mode
  (evaluating a `custom_lin`) is therefore an error, as in JAX.

Under vmap the jaxpr is batched and each rule is wrapped to run under a fresh BatchTrace
(cotangents of unbatched arguments are summed over the batch); that trace also takes the
vmap's own tracers a rule closed over as batched values, as JAX's shared trace tag does.
Differentiating with respect to a value the function closes over is an error (pass it as
an argument), as in JAX.

Imports the core, the IR, tracing, ad and batching; imported by fnad/__init__ and by user-API
modules that define functions with custom rules (fnad.numpy.linalg.det).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
import numpy as np

from fnad import core, dtypes, tree_util
from fnad.ad import backward_pass, instantiate
from fnad.batching import BatchTrace, BatchTracer
from fnad.core import (Primitive, ShapedArray, Tracer, Zero, abstract_eval_rules, batch_rules,
                       eager_rules, get_aval, jvp_rules, transpose_rules)
from fnad.ir import ClosedJaxpr, Jaxpr, eval_jaxpr
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.tracing import trace_to_subjaxpr

__all__ = ["closure_convert", "custom_gradient", "custom_jvp", "custom_vjp", "SymbolicZero"]

SymbolicZero = Zero   # what a rule defined with symbolic_zeros=True sees for a zero tangent


# ---- helpers ----------------------------------------------------------------------------
def _as_arrays(xs) -> list:
    """Primals as the rules see them: a Python scalar or NumPy value (an input of grad/jvp
    given as a number) becomes an fnad Array of its type (weak for Python scalars), so a
    rule may use .shape and .dtype on every primal."""
    return [x if isinstance(x, (Tracer, core.Array))
            else core._array_from_numpy(core.canonicalize_value(x), get_aval(x).weak_type)
            for x in xs]


class _Rule:
    """A rule callable as a jaxpr param: hashed by identity, printed by its name. `home`
    is the trace current where the function was called (see _RuleBatchTrace). Evaluating
    the jaxpr never calls it (only transformations do): `fingerprint_form` is its form in
    ir.fingerprint, which digests what evaluating a program computes."""

    __slots__ = ("fn", "name", "home")
    fingerprint_form = ("rule",)

    def __init__(self, fn: Callable, name: str, home: core.Trace | None = None):
        self.fn = fn
        self.name = name
        self.home = home

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name


def _name(fn) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _resolve_args(fun: Callable, args: tuple, kwargs: dict, what: str) -> tuple:
    """Keyword arguments moved to their positions and defaults filled in, as in JAX (rules
    see positional arguments only, the defaulted ones included)."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        if not kwargs:
            return args                # no signature, or a bad call that fun itself reports
        raise TypeError(f"The arguments to the {what} function {_name(fun)} could not be "
                        f"resolved to positional arguments: {e}") from None
    passed_kw = sorted(bound.kwargs)   # keyword-only (or **kwargs) arguments the call gave
    if passed_kw:
        raise TypeError(f"The {what} function {_name(fun)} was called with keyword-only "
                        f"arguments {passed_kw}; custom derivative functions "
                        "take positional arguments only")
    bound.apply_defaults()             # keyword-only defaults stay fun's own business
    return bound.args


def _nondiff_positions(fun: Callable, nondiff_argnums: Sequence[int],
                       nondiff_argnames: Sequence[str], what: str) -> tuple[int, ...]:
    """nondiff_argnums plus the positions of the parameters named in nondiff_argnames, sorted
    (as JAX: a named argument is non-differentiable wherever the call passes it, since
    calls are resolved to positional arguments)."""
    nums = {int(i) for i in nondiff_argnums}
    if isinstance(nondiff_argnames, str):
        nondiff_argnames = (nondiff_argnames,)
    if nondiff_argnames:
        params = list(inspect.signature(fun).parameters.values())
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for name in nondiff_argnames:
            if name not in positional:
                raise ValueError(f"{what}: nondiff_argnames names {name!r}, which is not a "
                                 f"positional parameter of {_name(fun)} {positional}")
            nums.add(positional.index(name))
    return tuple(sorted(nums))


def _split_nondiff(nondiff_argnums: tuple[int, ...], args: tuple, name: str, what: str):
    """(static positions, static args, dynamic args) for a call with `args`."""
    n = len(args)
    for i in nondiff_argnums:
        if not -n <= i < n:
            raise ValueError(f"{what} function {name} has nondiff_argnums={nondiff_argnums} "
                             f"but was called with {n} positional argument{'s' * (n != 1)}")
    pos = sorted({i % n for i in nondiff_argnums})
    static = [args[i] for i in pos]
    dyn = tuple(a for i, a in enumerate(args) if i not in pos)
    return pos, static, dyn


def _with_static(pos: list[int], static: list, dyn: Sequence) -> list:
    """The full argument list: `static` at positions `pos`, `dyn` elsewhere."""
    it = iter(dyn)
    full = []
    for i in range(len(pos) + len(dyn)):
        full.append(static[pos.index(i)] if i in pos else next(it))
    return full


def _types(tree, avals) -> str:
    """A pytree of types, printed like `(f32[3], {'a': f32[]})`."""
    return str(tree_util.tree_unflatten(tree, [a.str_short() for a in avals])).replace("'", "")


def _aval_of(x) -> ShapedArray:
    if type(x) is Zero:
        return x.aval
    if isinstance(x, np.ndarray) and x.dtype == dtypes.float0:
        return ShapedArray(x.shape, dtypes.float0)
    return get_aval(x)


def _match(x, expect: ShapedArray, what: Callable[[ShapedArray], str], exc=TypeError):
    """`x` with the type `expect`: a weak-typed value is converted, anything else raises
    `exc` (jax: TypeError for a JVP rule's tangent, ValueError for a bwd rule's cotangent)."""
    aval = _aval_of(x)
    if aval.shape == expect.shape and aval.dtype == expect.dtype:
        return x
    if (aval.shape == expect.shape and aval.weak_type and type(x) is not Zero
            and expect.dtype != dtypes.float0 and dtypes.is_inexact(expect.dtype)):
        from fnad.primitives.logic import convert_element_type
        return convert_element_type(x, expect.dtype)
    raise exc(what(aval))


def _check_pair(pair, rule: str, what: str) -> None:
    """A rule's result must be a tuple/list of two: `what` names them for the error."""
    if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
        length = f" of length {len(pair)}" if isinstance(pair, (tuple, list)) else ""
        raise TypeError(f"{rule} must return a pair {what}, but it returned "
                        f"{type(pair).__name__}{length}")


def _check_primal_out(out, fun_tree, fun_avals, rule: str, fun_name: str, kind: str) -> list:
    """The flat primal outputs of a rule, checked against the function's outputs."""
    flat, tree = tree_util.tree_flatten(out)
    if tree != fun_tree:
        avals = [_aval_of(x) for x in flat]
        raise TypeError(f"{kind} {rule} for {fun_name} returned a primal output with structure "
                        f"{_types(tree, avals)} but {fun_name} returns "
                        f"{_types(fun_tree, fun_avals)}; they must be equal")
    return [_match(x, a, lambda got, i=i, a=a: (
        f"{kind} {rule} for {fun_name} returned primal output {i} of type {got.str_short()} "
        f"but {fun_name} returns {a.str_short()} there (outputs "
        f"{_types(fun_tree, fun_avals)})")) for i, (x, a) in enumerate(zip(flat, fun_avals))]


# ---- custom_jvp ---------------------------------------------------------------------------
class custom_jvp:
    """A function with a user-defined JVP rule, used by every transformation that
    differentiates it (grad, jvp, vjp, linearize, and through them jacfwd/hessian).

    ```python
    @custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return log1pexp(x), x_dot * (1. - 1. / (1. + jnp.exp(x)))   # d/dx = sigmoid(x)
    ```

    Arguments at `nondiff_argnums` (and the parameters named in `nondiff_argnames`) are
    passed to the rule first, as static values: `jvp(*nondiff_args, primals, tangents)`,
    with primals/tangents the other arguments.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames,
                                                  "custom_jvp")
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the rule `jvp(primals, tangents) -> (primal_out, tangent_out)`; returns `jvp`
        (so it works as a decorator). With symbolic_zeros, a tangent that is known to be
        zero is passed as a `SymbolicZero` (with `.aval`) instead of an array of zeros."""
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per argument: `jvps[i](x_i_dot, primal_out, *primals)` is that argument's
        contribution to the tangent (None: the output does not depend on it)."""
        if self.nondiff_argnums:
            raise TypeError("custom_jvp.defjvps cannot be used with nondiff_argnums; use "
                            "defjvp")

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise TypeError(f"custom_jvp function {self.__name__} takes {len(primals)} "
                                f"arguments but defjvps was given {len(jvps)} rules")
            primal_out = self(*primals)
            total: list = [None] * len(tree_util.tree_leaves(primal_out))
            for fn, t in zip(jvps, tangents):
                leaves = tree_util.tree_leaves(t)
                if fn is None or all(type(x) is Zero for x in leaves):
                    continue                           # no contribution: skip the rule
                t = tree_util.tree_map(instantiate, t)
                out_flat, tree = tree_util.tree_flatten(fn(t, primal_out, *primals))
                if len(out_flat) != len(total):
                    raise TypeError(f"custom_jvp rule {_name(fn)} (in defjvps) for "
                                    f"{self.__name__} returned {tree} but {self.__name__} "
                                    f"returns {tree_util.tree_structure(primal_out)}")
                total = [c if s is None else s + c for s, c in zip(total, out_flat)]
            out_leaves, out_tree = tree_util.tree_flatten(primal_out)
            total = [Zero(get_aval(p).strip_weak_type().to_tangent_aval()) if s is None else s
                     for s, p in zip(total, out_leaves)]
            return primal_out, tree_util.tree_unflatten(out_tree, total)

        jvp.__name__ = f"{self.__name__}_jvps"
        self.defjvp(jvp, symbolic_zeros=True)

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_args(self.fun, args, kwargs, "custom_jvp")
        pos, static, dyn = _split_nondiff(self.nondiff_argnums, args, name, "custom_jvp")
        if core.current_trace() is core.eval_trace:
            return self.fun(*args)                     # nothing to differentiate or stage
        static = [_stop_gradient(s) for s in static]   # static args are not differentiated
        flat, in_tree = tree_util.tree_flatten(dyn)
        out_tree_box: list = []

        def fun_flat(*xs):
            out = self.fun(*_with_static(pos, static, tree_util.tree_unflatten(in_tree, xs)))
            leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return leaves

        closed, consts = trace_to_subjaxpr(fun_flat, [get_aval(x) for x in flat],
                                           f"custom_jvp function {name}")
        out_tree, out_avals = out_tree_box[0], closed.out_avals
        user_jvp, rule_name = self.jvp, _name(self.jvp)

        def jvp_flat(primals, tangents):
            py_p = tree_util.tree_unflatten(in_tree, primals)
            py_t = tree_util.tree_unflatten(in_tree, tangents)
            pair = user_jvp(*static, py_p, py_t)
            _check_pair(pair, f"custom_jvp rule {rule_name} for {name}",
                        "(primal_out, tangent_out)")
            p_out = _check_primal_out(pair[0], out_tree, out_avals, rule_name, name,
                                      "custom_jvp rule")
            t_flat, t_tree = tree_util.tree_flatten(pair[1])
            if t_tree != out_tree:
                raise TypeError(
                    f"custom_jvp rule {rule_name} for {name} returned a tangent output with "
                    f"structure {_types(t_tree, [_aval_of(t) for t in t_flat])} but {name} "
                    f"returns {_types(out_tree, out_avals)}; the primal and tangent outputs "
                    "must have the same structure")
            t_out = []
            for i, (t, a) in enumerate(zip(t_flat, out_avals)):
                expect = a.strip_weak_type().to_tangent_aval()
                t_out.append(_match(t, expect, lambda got, i=i, a=a, e=expect: (
                    f"custom_jvp rule {rule_name} for {name} returned tangent output {i} of "
                    f"type {got.str_short()} for a primal output of type {a.str_short()}; "
                    f"the tangent must have type {e.str_short()}")))
            return p_out, t_out

        outs = custom_jvp_call_p.bind(*consts, *flat, call_jaxpr=closed,
                                      jvp=_Rule(jvp_flat, rule_name, core.current_trace()),
                                      num_consts=len(consts),
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out_tree, outs)


def _stop_gradient(x):
    from fnad.primitives.logic import stop_gradient

    def stop(leaf):
        if isinstance(leaf, Tracer) and dtypes.is_inexact(leaf.aval.dtype):
            return stop_gradient(leaf)
        return leaf
    return tree_util.tree_map(stop, x)


# ---- custom_vjp ---------------------------------------------------------------------------
class custom_vjp:
    """A function with a user-defined VJP, used by reverse-mode differentiation (grad, vjp).

    ```python
    @custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, (lo, hi)                      # (output, residuals)

    def bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))    # one cotangent per argument

    clip_gradient.defvjp(fwd, bwd)
    ```

    `fwd` takes the function's arguments; `bwd(*nondiff_args, residuals, ct_out)` returns
    a tuple with a cotangent (or None, meaning zero) per differentiable argument.
    Forward mode (jvp) of a custom_vjp function is an error, as in JAX.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = _nondiff_positions(fun, nondiff_argnums, nondiff_argnames,
                                                  "custom_vjp")
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
        """Set the rules: `fwd(*args) -> (out, residuals)`, `bwd(residuals, ct) -> cts`."""
        if symbolic_zeros:
            raise NotImplementedError("custom_vjp.defvjp(symbolic_zeros=True) is not "
                                      "supported by fnad; omit it (zeros are passed as arrays)")
        self.fwd = fwd
        self.bwd = bwd

    def __call__(self, *args, **kwargs):
        name = _name(self.fun)
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_args(self.fun, args, kwargs, "custom_vjp")
        pos, static, dyn = _split_nondiff(self.nondiff_argnums, args, name, "custom_vjp")
        for i, s in zip(pos, static):
            if any(isinstance(leaf, Tracer) for leaf in tree_util.tree_leaves(s)):
                raise core.UnexpectedTracerError(
                    f"custom_vjp function {name} got a traced value as argument {i}, which "
                    f"nondiff_argnums marks as non-differentiable. Tracers cannot be "
                    "non-differentiable arguments of custom_vjp functions: nondiff_argnums is "
                    "for arguments that are not arrays (functions, shapes, flags). Pass array "
                    "arguments normally and return None as their cotangent from bwd.")
        if core.current_trace() is core.eval_trace:
            return self.fun(*args)
        flat, in_tree = tree_util.tree_flatten(dyn)
        in_avals = [get_aval(x) for x in flat]
        out_tree_box: list = []

        def fun_flat(*xs):
            out = self.fun(*_with_static(pos, static, tree_util.tree_unflatten(in_tree, xs)))
            leaves, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return leaves

        closed, consts = trace_to_subjaxpr(fun_flat, in_avals, f"custom_vjp function {name}")
        out_tree, out_avals = out_tree_box[0], closed.out_avals
        user_fwd, user_bwd = self.fwd, self.bwd
        fwd_name, bwd_name = _name(user_fwd), _name(user_bwd)

        def fwd_flat(primals):
            full = _with_static(pos, static, tree_util.tree_unflatten(in_tree, primals))
            pair = user_fwd(*full)
            _check_pair(pair, f"custom_vjp fwd rule {fwd_name} for {name}",
                        "(primal_out, residuals)")
            outs = _check_primal_out(pair[0], out_tree, out_avals, fwd_name, name,
                                     "custom_vjp fwd rule")
            res, res_tree = tree_util.tree_flatten(pair[1])
            for r in res:
                try:
                    get_aval(r)
                except TypeError:
                    raise TypeError(f"custom_vjp fwd rule {fwd_name} for {name} returned a "
                                    f"residual of type {type(r).__name__}; residuals must be "
                                    "arrays (or pytrees of arrays)") from None

            def bwd_flat(res_flat, cts_flat):
                py_res = tree_util.tree_unflatten(res_tree, res_flat)
                py_ct = tree_util.tree_unflatten(out_tree, cts_flat)
                return _check_bwd_out(user_bwd(*static, py_res, py_ct), in_tree, in_avals,
                                      bwd_name, name)
            return outs, res, bwd_flat

        outs = custom_vjp_call_p.bind(*consts, *flat, call_jaxpr=closed,
                                      fwd=_Rule(fwd_flat, f"{fwd_name}/{bwd_name}",
                                                core.current_trace()),
                                      num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(out_tree, outs)


def _check_bwd_out(cts, in_tree, in_avals, bwd_name: str, fun_name: str) -> list:
    """bwd's output as one cotangent (or Zero) per flat argument, checked."""
    nargs = len(in_tree.children())
    if isinstance(cts, list) and len(cts) == nargs:
        cts = tuple(cts)
    if not isinstance(cts, tuple) or len(cts) != nargs:
        got = (f"a {type(cts).__name__} of length {len(cts)}" if isinstance(cts, (tuple, list))
               else f"a value of type {type(cts).__name__}")
        raise TypeError(f"custom_vjp bwd rule {bwd_name} for {fun_name} must return a tuple "
                        f"with one cotangent (or None) per differentiable argument of "
                        f"{fun_name} ({nargs}), but it returned {got}")
    holes = tree_util.tree_unflatten(in_tree, list(in_avals))
    try:
        leaves = tree_util.broadcast_prefix(cts, holes)
    except ValueError:
        got = tree_util.tree_structure(cts)
        raise TypeError(f"custom_vjp bwd rule {bwd_name} for {fun_name} returned cotangents "
                        f"with structure {got}, which does not match the arguments of "
                        f"{fun_name} {_types(in_tree, in_avals)}") from None
    out = []
    for i, (ct, a) in enumerate(zip(leaves, in_avals)):
        expect = a.strip_weak_type().to_tangent_aval()
        if ct is None or type(ct) is Zero or expect.dtype == dtypes.float0:
            out.append(Zero(expect))
            continue
        out.append(_match(ct, expect, lambda got, i=i, a=a, e=expect: (
            f"custom_vjp bwd rule {bwd_name} for {fun_name} returned a cotangent of type "
            f"{got.str_short()} for argument leaf {i} of type {a.str_short()}; it must have "
            f"type {e.str_short()} (arguments {_types(in_tree, in_avals)})"), ValueError))
    return out


# ---- shared rules --------------------------------------------------------------------------
def _closure_error(kind: str, name: str) -> TypeError:
    rules = "JVP rule only says" if kind == "custom_jvp" else "fwd and bwd rules only say"
    return TypeError(
        f"Detected differentiation of the {kind} function {name} with respect to a "
        f"closed-over value. That isn't supported because its custom {rules} how to "
        f"differentiate {name} with respect to its explicit arguments. Pass the closed-over "
        f"value into {name} as an argument, and adapt the rules.")


def _call_abstract_eval(*avals, call_jaxpr, **_):
    return call_jaxpr.out_avals


def _call_eager(*args, call_jaxpr, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _call_transpose(cts, *args, call_jaxpr, **_):
    """The function applied to linear values (e.g. by a rule to its tangents): transpose
    its jaxpr, with the non-linear operands as constants."""
    jaxpr = call_jaxpr.jaxpr
    lin = [core.is_undefined(a) for a in args]
    known = [v for v, u in zip(jaxpr.invars, lin) if not u]
    linear = [v for v, u in zip(jaxpr.invars, lin) if u]
    split = Jaxpr(list(jaxpr.constvars) + known, linear, jaxpr.eqns, jaxpr.outvars)
    cts_lin = iter(backward_pass(split, list(call_jaxpr.consts) +
                                 [a for a, u in zip(args, lin) if not u], cts))
    return [next(cts_lin) if u else None for u in lin]


def _axis_size(vals, dims) -> int:
    return next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)


def _drop_axis(aval: ShapedArray, d) -> ShapedArray:
    return aval if d is None else aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])


def _add_axis(aval: ShapedArray, size: int, d) -> ShapedArray:
    return aval if d is None else aval.update(shape=aval.shape[:d] + (size,) + aval.shape[d:])


def _batch_jaxpr(closed: ClosedJaxpr, vals, dims, size: int, what: str):
    """`closed` vectorized over operands batched at `dims`; all its outputs batched at 0.
    Returns (ClosedJaxpr, extra leading operands) as trace_to_subjaxpr does."""
    def batched(*xs):
        trace = BatchTrace(core.current_trace(), size, what)
        with core.new_trace(trace):
            outs = eval_jaxpr(closed.jaxpr, closed.consts,
                              *[trace.pack(x, d) for x, d in zip(xs, dims)])
            pairs = [trace.val_bdim(o) for o in outs]
        return [bdim_at_front(v, d, size) for v, d in pairs]
    return trace_to_subjaxpr(batched, [get_aval(v) for v in vals], what)


class _RuleBatchTrace(BatchTrace):
    """vmap of a user rule. The rule may close over batched values of the vmap that is
    batching the call (`origin`, which has finished or is not current when the rule runs):
    its tracers count as this trace's own, as JAX does by sharing the trace's tag."""

    def __init__(self, parent, size: int, description: str, origin: BatchTrace | None):
        super().__init__(parent, size, description)
        self.origin = origin
        if origin is not None:
            self.ancestors = self.ancestors | {origin}

    def val_bdim(self, x):
        if isinstance(x, BatchTracer) and x._trace is self.origin:
            return x.val, x.batch_dim
        return super().val_bdim(x)


def _origin(home: core.Trace | None) -> BatchTrace | None:
    """In a batching rule: the BatchTrace running it (the one whose parent is current),
    found among the traces that were live where the custom function was called."""
    parent, t = core.current_trace(), home
    while t is not None:
        if isinstance(t, BatchTrace) and t.parent is parent and t.alive:
            return t
        t = t.parent
    return None


def _rebind_batched(prim, vals, dims, params, rule_param: str, batch_rule_fn):
    """The call at the batched shapes: batched jaxpr, batched rule, outputs at axis 0."""
    size = _axis_size(vals, dims)
    num_consts, name = params["num_consts"], params["name"]
    old_rule = params[rule_param]
    origin = _origin(old_rule.home)
    closed, extra = _batch_jaxpr(params["call_jaxpr"], vals, dims, size,
                                 f"vmap of {prim.name} {name}")
    new_rule = _Rule(batch_rule_fn(old_rule, size, list(dims[num_consts:]), origin),
                     old_rule.name, old_rule.home)
    new_params = dict(params, call_jaxpr=closed, num_consts=num_consts + len(extra),
                      **{rule_param: new_rule})
    outs = prim.bind(*extra, *vals, **new_params)
    return outs, [0] * len(outs)


# ---- custom_jvp_call ------------------------------------------------------------------------
custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)

abstract_eval_rules[custom_jvp_call_p] = _call_abstract_eval
eager_rules[custom_jvp_call_p] = _call_eager
def custom_jvp_call_jvp(primals, tangents, *, call_jaxpr, jvp, num_consts, symbolic_zeros,
                        name):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closure_error("custom_jvp", name)
    args, tans = _as_arrays(primals[num_consts:]), tangents[num_consts:]
    if not symbolic_zeros:
        tans = [instantiate(t) for t in tans]
    return jvp(args, list(tans))                   # the user's rule: (outs, tangents)
jvp_rules[custom_jvp_call_p] = custom_jvp_call_jvp
transpose_rules[custom_jvp_call_p] = _call_transpose


def _batch_jvp_rule(jvp: _Rule, size: int, dims: list, origin) -> Callable:
    """The rule at batched shapes: run `jvp` under vmap. A tangent is batched like its
    primal; outputs come back batched at axis 0, like the batched jaxpr's."""
    def batched_jvp(primals, tangents):
        trace = _RuleBatchTrace(core.current_trace(), size,
                                f"vmap of custom_jvp rule {jvp.name}", origin)
        with core.new_trace(trace):
            ps = [trace.pack(p, d) for p, d in zip(primals, dims)]
            ts = [Zero(_drop_axis(t.aval, d)) if type(t) is Zero else trace.pack(t, d)
                  for t, d in zip(tangents, dims)]
            p_out, t_out = jvp(ps, ts)
            p_pairs = [trace.val_bdim(p) for p in p_out]
            t_pairs = [t if type(t) is Zero else trace.val_bdim(t) for t in t_out]
        p_out = [bdim_at_front(v, d, size) for v, d in p_pairs]
        t_out = [Zero(_add_axis(t.aval, size, 0)) if type(t) is Zero
                 else bdim_at_front(t[0], t[1], size) for t in t_pairs]
        return p_out, t_out
    return batched_jvp


def custom_jvp_call_batch(vals, dims, **params):
    return _rebind_batched(custom_jvp_call_p, vals, dims, params, "jvp", _batch_jvp_rule)
batch_rules[custom_jvp_call_p] = custom_jvp_call_batch


# ---- custom_vjp_call ------------------------------------------------------------------------
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)

abstract_eval_rules[custom_vjp_call_p] = _call_abstract_eval
eager_rules[custom_vjp_call_p] = _call_eager
def custom_vjp_call_jvp(primals, tangents, *, call_jaxpr, fwd, num_consts, name):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise _closure_error("custom_vjp", name)
    args, tans = _as_arrays(primals[num_consts:]), tangents[num_consts:]
    outs, res, bwd = fwd(args)                           # the forward pass runs now
    mask = tuple(type(t) is not Zero for t in tans)
    out_avals = tuple(get_aval(o).strip_weak_type().to_tangent_aval() for o in outs)
    tans_out = custom_lin_p.bind(*res, *[t for t in tans if type(t) is not Zero],
                                 num_res=len(res), bwd=_Rule(bwd, fwd.name.split("/")[-1]),
                                 out_avals=out_avals, arg_mask=mask, name=name)
    return outs, tans_out
jvp_rules[custom_vjp_call_p] = custom_vjp_call_jvp
transpose_rules[custom_vjp_call_p] = _call_transpose


def _batch_fwd_rule(fwd: _Rule, size: int, dims: list, origin) -> Callable:
    """fwd at batched shapes: outputs at axis 0, residuals where they fall; the bwd it
    returns is batched to match."""
    def batched_fwd(primals):
        trace = _RuleBatchTrace(core.current_trace(), size,
                                f"vmap of custom_vjp fwd {fwd.name}", origin)
        with core.new_trace(trace):
            outs, res, bwd = fwd([trace.pack(p, d) for p, d in zip(primals, dims)])
            o_pairs = [trace.val_bdim(o) for o in outs]
            r_pairs = [trace.val_bdim(r) for r in res]
        outs = [bdim_at_front(v, d, size) for v, d in o_pairs]
        res_dims = [d for _, d in r_pairs]
        return outs, [v for v, _ in r_pairs], _batch_bwd_rule(bwd, size, res_dims, dims)
    return batched_fwd


def _batch_bwd_rule(bwd: Callable, size: int, res_dims: list, arg_dims: list) -> Callable:
    """bwd at batched shapes. Output cotangents arrive batched at 0; an argument that is
    not batched is shared by the whole batch, so its cotangent is summed over it."""
    from fnad.primitives.reductions import reduce_sum

    def batched_bwd(res, cts):
        trace = BatchTrace(core.current_trace(), size, "vmap of custom_vjp bwd")
        with core.new_trace(trace):
            cts_in = bwd([trace.pack(r, d) for r, d in zip(res, res_dims)],
                         [trace.pack(c, 0) for c in cts])
            pairs = [c if type(c) is Zero else trace.val_bdim(c) for c in cts_in]
        out = []
        for c, d in zip(pairs, arg_dims):
            if type(c) is Zero:
                out.append(Zero(_add_axis(c.aval, size, d)))
                continue
            v, cd = c
            if d is None:                                  # Σ over the batch: x̄ = Σ_b x̄_b
                out.append(v if cd is None else reduce_sum(v, axes=(cd,)))
            else:
                out.append(moveaxis(bdim_at_front(v, cd, size), 0, d))
        return out
    return batched_bwd


def custom_vjp_call_batch(vals, dims, **params):
    return _rebind_batched(custom_vjp_call_p, vals, dims, params, "fwd", _batch_fwd_rule)
batch_rules[custom_vjp_call_p] = custom_vjp_call_batch


# ---- custom_lin ------------------------------------------------------------------------------
# The tangent map of a custom_vjp function: linear in its non-residual operands, known only
# through its transpose (bwd). Operands: residuals, then the nonzero argument tangents
# (`arg_mask` says which arguments those are).
custom_lin_p = Primitive("custom_lin", multiple_results=True)


def _forward_mode_error(name: str) -> TypeError:
    return TypeError(f"can't apply forward-mode autodiff (jvp) to a custom_vjp function "
                     f"({name}). It has only a reverse-mode rule: use grad/vjp, or define it "
                     "with custom_jvp to get forward mode.")


def custom_lin_abstract_eval(*avals, out_avals, **_):
    return list(out_avals)
abstract_eval_rules[custom_lin_p] = custom_lin_abstract_eval
def custom_lin_eager(*args, name, **_):
    raise _forward_mode_error(name)
eager_rules[custom_lin_p] = custom_lin_eager
def custom_lin_jvp(primals, tangents, *, name, **_):
    raise _forward_mode_error(name)
jvp_rules[custom_lin_p] = custom_lin_jvp
def custom_lin_batch(vals, dims, *, name, **_):
    raise _forward_mode_error(name)
batch_rules[custom_lin_p] = custom_lin_batch
def custom_lin_transpose(cts, *args, num_res, bwd, out_avals, arg_mask, name):
    res = list(args[:num_res])                        # x̄ = bwd(res, ȳ), per argument
    cts = [instantiate(c, a) for c, a in zip(cts, out_avals)]
    cts_in = bwd(res, cts)
    return [None] * num_res + [c for c, m in zip(cts_in, arg_mask) if m]
transpose_rules[custom_lin_p] = custom_lin_transpose


# ---- user primitives with a VJP ---------------------------------------------------------------
def vjp_as_jvp_rule(prim: Primitive, fwd: Callable, bwd: Callable) -> Callable:
    """The JVP rule of a user primitive declared with `prim.def_vjp(fwd, bwd)`: fwd runs now,
    the tangent is a custom_lin whose transpose calls bwd (so only reverse mode works)."""
    def rule(primals, tangents, **params):
        out, res = fwd(*primals, **params)
        res_flat, res_tree = tree_util.tree_flatten(res)
        outs = list(out) if prim.multiple_results else [out]
        mask = tuple(type(t) is not Zero for t in tangents)
        n_args = len(primals)

        def bwd_flat(res_list, cts):
            r = tree_util.tree_unflatten(res_tree, list(res_list))
            cts_in = bwd(r, cts if prim.multiple_results else cts[0], **params)
            if not isinstance(cts_in, (tuple, list)) or len(cts_in) != n_args:
                raise TypeError(f"the VJP rule {_name(bwd)} of primitive '{prim.name}' must "
                                f"return a tuple of {n_args} cotangents (one per operand), "
                                f"got {type(cts_in).__name__}"
                                + (f" of length {len(cts_in)}"
                                   if isinstance(cts_in, (tuple, list)) else ""))
            return [Zero(get_aval(p).to_tangent_aval()) if c is None else c
                    for c, p in zip(cts_in, primals)]
        out_avals = tuple(get_aval(o).strip_weak_type().to_tangent_aval() for o in outs)
        tans = custom_lin_p.bind(*res_flat, *[t for t in tangents if type(t) is not Zero],
                                 num_res=len(res_flat), bwd=_Rule(bwd_flat, _name(bwd)),
                                 out_avals=out_avals, arg_mask=mask, name=prim.name)
        return out, (tans if prim.multiple_results else tans[0])
    return rule


# ---- custom_gradient and closure_convert (JAX's API, built on the above) -----------------
class _GradRule:
    """custom_gradient's residuals: the user's vjp function staged at the cotangents'
    avals; its leaves are the values the function closed over."""

    def __init__(self, consts, closed: ClosedJaxpr, out_tree):
        self.consts, self.closed, self.out_tree = consts, closed, out_tree


tree_util.register_pytree_node(
    _GradRule, lambda r: (r.consts, (r.closed, r.out_tree)),
    lambda aux, consts: _GradRule(list(consts), *aux))


def custom_gradient(fun: Callable) -> Callable:
    """jax.custom_gradient: `fun(*args)` returns `(value, vjp)`, where `vjp(ct)` gives the
    cotangents of the positional arguments (a tuple of them, or one for one argument).

    ```python
    @custom_gradient
    def log1pexp(x):
        e = jnp.exp(x)
        return jnp.log1p(e), lambda g: g * (1 - 1 / (1 + e))
    ```
    The vjp function may close over values computed in `fun` (here `e`). As a custom_vjp,
    it serves reverse mode only (jvp of it is an error).
    """
    name = _name(fun)

    def primal(*args):
        return fun(*args)[0]
    primal.__name__ = name
    wrapped = custom_vjp(primal)

    def fwd(*args):
        pair = fun(*args)
        _check_pair(pair, f"custom_gradient function {name}", "(value, vjp function)")
        ans, rule = pair
        if not callable(rule):
            raise TypeError(f"custom_gradient function {name} must return (value, vjp "
                            f"function); its second element is a {type(rule).__name__}")
        leaves, ct_tree = tree_util.tree_flatten(ans)
        box: list = []

        def rule_flat(*cts):
            out = rule(tree_util.tree_unflatten(ct_tree, list(cts)))
            flat, out_tree = tree_util.tree_flatten(out)
            box.append(out_tree)
            return flat
        closed, consts = trace_to_subjaxpr(
            rule_flat, [get_aval(x).to_tangent_aval() for x in leaves],
            f"vjp function of custom_gradient {name}")
        return ans, _GradRule(consts, closed, box[0])

    def bwd(res: _GradRule, ct):
        cts = tree_util.tree_leaves(ct)              # custom_vjp gives it the output's tree
        out = tree_util.tree_unflatten(
            res.out_tree, eval_jaxpr(res.closed.jaxpr, [], *res.consts, *cts))
        return out if isinstance(out, tuple) else (out,)

    wrapped.defvjp(fwd, bwd)
    return wrapped


def closure_convert(fun: Callable, *example_args) -> tuple[Callable, list]:
    """jax.closure_convert: `fun` traced at the avals of `example_args`, with the traced
    values it closes over (tracers of enclosing transformations) made explicit. Returns
    `(converted, hoisted)`: `converted(*args, *hoisted)` computes `fun(*args)`. Used to pass
    a closure to a custom_vjp function or a higher-order primitive as an argument. Values
    closed over that are not traced stay closed over."""
    flat, in_tree = tree_util.tree_flatten(example_args)
    box: list = []

    def fun_flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return leaves
    from fnad.tracing import shaped_abstractify
    closed, consts = trace_to_subjaxpr(fun_flat, [shaped_abstractify(x) for x in flat],
                                       f"closure_convert of {_name(fun)}")
    out_tree = box[0]
    traced = [isinstance(c, Tracer) for c in consts]
    hoisted = [c for c, t in zip(consts, traced) if t]

    def converted(*args):
        n = len(args) - len(hoisted)
        if n < 0:
            raise TypeError(f"closure_convert of {_name(fun)}: the converted function takes "
                            f"the arguments and then {len(hoisted)} hoisted constants; got "
                            f"{len(args)} arguments in all")
        it = iter(args[n:])
        all_consts = [next(it) if t else c for c, t in zip(consts, traced)]
        xs, tree = tree_util.tree_flatten(args[:n])
        if tree != in_tree:
            raise TypeError(f"closure_convert of {_name(fun)}: the arguments' structure "
                            f"{tree} differs from the example arguments' {in_tree}")
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(closed.jaxpr, [], *all_consts,
                                                             *xs))
    functools.update_wrapper(converted, fun)
    return converted, hoisted

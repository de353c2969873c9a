"""fnad.ad: forward and reverse mode automatic differentiation.

Forward mode is a trace (JVPTrace) that carries a tangent beside each primal
and applies `jvp_rules`. Reverse mode is linearize + transpose: `linearize` runs
the JVP with the tangents staged into a linear jaxpr (the primal half runs now,
its values become the residuals), and `backward_pass` walks that jaxpr backwards
applying `transpose_rules`. Tangents may be symbolic zeros (core.Zero), so inputs
that do not influence an output cost nothing. Every rule binds primitives on the
current trace, so all of this nests (grad of grad of grad) and composes with the
other transformations.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fnad import core, dtypes, tree_util
from fnad.core import Tracer, Zero, get_aval, jvp_rules, transpose_rules
from fnad.ir import Jaxpr, Literal, Var, eval_jaxpr
from fnad.primitives import elementwise as ew
from fnad.primitives import shape_ops
from fnad.tracing import JaxprTrace, flatten_fun_nokwargs


# ---- forward mode ---------------------------------------------------------------
class JVPTracer(Tracer):
    """A primal value and its tangent (possibly a symbolic Zero)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: JVPTrace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        if isinstance(p, Tracer):
            return p.to_concrete_value()
        return np.asarray(p)

    @property
    def _where(self):
        return self._trace.where


class JVPTrace(core.Trace):
    def primal_tangent(self, x):
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, Tracer):
            self.check_foreign(x)
        return x, Zero(get_aval(x).to_tangent_aval())

    def process_primitive(self, prim, args, params):
        primals, tangents = [], []
        for x in args:
            p, t = self.primal_tangent(x)
            primals.append(p)
            tangents.append(t)
        with core.set_current_trace(self.parent):
            if all(type(t) is Zero for t in tangents):
                return prim.bind(*primals, **params)
            rule = jvp_rules.get(prim)
            if rule is None:
                raise NotImplementedError(
                    f"differentiation rule for '{prim.name}' not implemented")
            primal_out, tangent_out = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [self.pack(p, t) for p, t in zip(primal_out, tangent_out)]
        return self.pack(primal_out, tangent_out)

    def pack(self, primal, tangent):
        """A tracer for (primal, tangent); the bare primal when the tangent is zero."""
        if tangent is None or type(tangent) is Zero:
            return primal
        if not dtypes.is_inexact(get_aval(primal).dtype):
            return primal
        return JVPTracer(self, primal, tangent)


def instantiate(t, aval=None):
    """A real array for a tangent that may be a symbolic Zero."""
    if type(t) is not Zero:
        return t
    aval = t.aval if aval is None else aval
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    return shape_ops.full(aval.shape, 0, aval.dtype)


def _dtype_name(dt) -> str:
    return "float0" if dt == dtypes.float0 else dt.name


def _check_tangent(primal_aval, t, i: int, what: str, cotangent: bool = False):
    """Validate a user-supplied tangent/cotangent against its primal's aval.

    As in JAX, the cotangent of an integer or boolean output may have any dtype (it is
    ignored); a tangent of an integer or boolean input must be float0."""
    expect = primal_aval.to_tangent_aval()
    t_aval = get_aval(t) if not (isinstance(t, np.ndarray) and t.dtype == dtypes.float0) \
        else core.ShapedArray(t.shape, dtypes.float0)
    if t_aval.shape != expect.shape:
        raise ValueError(f"{what}: argument {i} has primal shape {primal_aval.shape} but "
                         f"tangent shape {t_aval.shape}; they must be equal")
    if cotangent and expect.dtype == dtypes.float0:
        return
    if t_aval.dtype != expect.dtype:         # a Python scalar has its default dtype, as in JAX
        hint = (" (integer and boolean primals take float0 tangents)"
                if expect.dtype == dtypes.float0 else "")
        # JAX: a TypeError for jvp's tangents, a ValueError for a vjp or linearized function's
        raise (TypeError if what == "jvp" else ValueError)(
                        f"{what}: argument {i} has primal dtype {primal_aval.dtype.name}, so "
                        f"its tangent must have dtype {_dtype_name(expect.dtype)}{hint}, "
                        f"but got {_dtype_name(t_aval.dtype)}")


def _as_tangent_of(aval, t):
    """A checked tangent `t` for a primal of type `aval`, weak-typed as the primal is (JAX:
    the output tangents' weak types follow the primals')."""
    if not dtypes.is_inexact(aval.dtype):
        return Zero(aval.to_tangent_aval())
    t_aval = get_aval(t)
    if t_aval.weak_type != aval.weak_type or t_aval.dtype != aval.dtype:
        from fnad.primitives.logic import convert_element_type
        t = convert_element_type(t, aval.dtype, aval.weak_type)
    return t


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """(fun(*primals), J·tangents): forward-mode derivative along `tangents`.

    `primals` and `tangents` are tuples/lists of pytrees with the same structure.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples or lists, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    flat_p, tree_p = tree_util.tree_flatten(tuple(primals))
    flat_t, tree_t = tree_util.tree_flatten(tuple(tangents))
    if tree_p != tree_t:
        raise TypeError(f"jvp: primal and tangent arguments must have the same tree "
                        f"structure; got {tree_p} and {tree_t}")
    tans = []
    for i, (p, t) in enumerate(zip(flat_p, flat_t)):
        aval = get_aval(p)
        _check_tangent(aval, t, i, "jvp")
        tans.append(_as_tangent_of(aval, t))
    aux: list = []
    flat_fun, out_tree = flatten_fun_nokwargs(_with_aux(fun, has_aux, aux), tree_p)
    trace = JVPTrace(core.current_trace(), f"jvp of {_name(fun)}")
    with core.new_trace(trace):
        outs = flat_fun(*[trace.pack(p, t) for p, t in zip(flat_p, tans)])
        pt = [trace.primal_tangent(o) for o in outs]
    primals_out = [p for p, _ in pt]
    tangents_out = [_out_tangent(p, t) for p, t in pt]
    out = (tree_util.tree_unflatten(out_tree[0], primals_out),
           tree_util.tree_unflatten(out_tree[0], tangents_out))
    return out + (_strip_aux(aux[0], {trace}),) if has_aux else out


def _out_tangent(p, t):
    """The tangent returned for primal output `p`: float0 zeros for an integer or boolean
    one; a symbolic zero made an array, weak-typed where `p` is (as JAX)."""
    aval = get_aval(p)
    if not dtypes.is_inexact(aval.dtype):
        return np.zeros(aval.shape, dtypes.float0)
    if type(t) is Zero and aval.weak_type:
        from fnad.primitives.logic import convert_element_type
        return convert_element_type(instantiate(t, aval), aval.dtype, True)
    return instantiate(t, aval.to_tangent_aval())


def _with_aux(fun: Callable, has_aux: bool, box: list) -> Callable:
    """With has_aux, `fun` returns (out, aux): keep out, put aux in `box`."""
    if not has_aux:
        return fun

    def fun_out(*args, **kwargs):
        res = fun(*args, **kwargs)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise TypeError(f"has_aux=True requires {_name(fun)} to return a pair "
                            f"(output, aux), but it returned {type(res).__name__}")
        box.append(res[1])
        return res[0]
    return fun_out


def _strip_aux(aux, traces):
    """Auxiliary outputs as plain values: the transformation's tracers removed."""
    def primal_of(x):
        while isinstance(x, JVPTracer) and x._trace in traces:
            x = x.primal
        return x
    return tree_util.tree_map(primal_of, aux)


# ---- linearize ----------------------------------------------------------------------
class LinearFunction:
    """The linear map v -> J·v of a linearization: a jaxpr plus residual constants."""

    def __init__(self, jaxpr: Jaxpr, consts: list, in_tree, out_tree, in_avals):
        self.jaxpr = jaxpr
        self.consts = consts
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.in_avals = in_avals

    def __call__(self, *tangents):
        flat, tree = tree_util.tree_flatten(tangents)
        if tree != self.in_tree:
            raise TypeError(f"linearized function expected tangents with structure "
                            f"{self.in_tree}, got {tree}")
        for i, (aval, t) in enumerate(zip(self.in_avals, flat)):
            _check_tangent(aval, t, i, "linearized function")
        outs = eval_jaxpr(self.jaxpr, self.consts, *flat)
        return tree_util.tree_unflatten(self.out_tree, outs)


def linearize_flat(flat_fun, primals, description):
    """Run `flat_fun` at `primals`, staging its tangent map into a linear jaxpr.

    Returns (primal outputs, ClosedJaxpr tangents_in -> tangents_out). The primal
    computation runs on the current trace; the jaxpr's constants are the residuals.
    """
    parent = core.current_trace()
    pe = JaxprTrace(parent, description, forward_known=True)
    avals = [get_aval(p) for p in primals]
    tangent_args = [pe.new_arg(a.to_tangent_aval()) for a in avals]
    jvp_trace = JVPTrace(pe, description)
    in_tracers = [jvp_trace.pack(p, t) if dtypes.is_inexact(a.dtype) else p
                  for p, t, a in zip(primals, tangent_args, avals)]
    with core.new_trace(jvp_trace):
        outs = flat_fun(*in_tracers)
        pts = [jvp_trace.primal_tangent(o) for o in outs]
    with core.set_current_trace(pe):
        tangents_out = [instantiate(t) if dtypes.is_inexact(get_aval(p).dtype)
                        else Zero(get_aval(p).to_tangent_aval()) for p, t in pts]
        tangents_out = [_float0_zeros(t) if type(t) is Zero else t for t in tangents_out]
        closed = pe.to_jaxpr(tangents_out)
    pe.alive = False
    return [p for p, _ in pts], closed, jvp_trace


def _float0_zeros(z: Zero):
    return np.zeros(z.aval.shape, dtypes.float0)


def linearize(fun: Callable, *primals, has_aux: bool = False):
    """(fun(*primals), f_jvp) where f_jvp(*tangents) is the linear map J·tangents."""
    flat_p, in_tree = tree_util.tree_flatten(primals)
    aux: list = []
    flat_fun, out_tree = flatten_fun_nokwargs(_with_aux(fun, has_aux, aux), in_tree)
    outs, closed, trace = linearize_flat(flat_fun, flat_p, f"linearize of {_name(fun)}")
    lin = LinearFunction(closed.jaxpr, closed.consts, in_tree, out_tree[0],
                         [get_aval(p) for p in flat_p])
    out = tree_util.tree_unflatten(out_tree[0], outs)
    if has_aux:
        return out, lin, _strip_aux(aux[0], {trace})
    return out, lin


# ---- transposition (reverse mode) -------------------------------------------------
def backward_pass(jaxpr: Jaxpr, consts: Sequence, cts_out: Sequence) -> list:
    """Cotangents of `jaxpr`'s inputs given its outputs' cotangents.

    The jaxpr's invars are the linear inputs; an equation reading a linear value is
    transposed, the others (functions of constants only) are evaluated forwards.
    """
    linear: set[Var] = set(jaxpr.invars)
    env: dict[Var, Any] = dict(zip(jaxpr.constvars, consts))
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(type(v) is Var and v in linear for v in eqn.invars):
            linear.update(eqn.outvars)
            linear_eqns.append(eqn)
        else:
            ins = [env[v] if type(v) is Var else v.val for v in eqn.invars]
            with core.eqn_source(eqn.source_info):
                outs = eqn.primitive.bind(*ins, **eqn.params)
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))

    ct_env: dict[Var, Any] = {}

    def add_ct(v, ct):
        if type(v) is Literal or v not in linear or ct is None or type(ct) is Zero:
            return
        prev = ct_env.get(v)
        ct_env[v] = ct if prev is None else ew.add_any(prev, ct)

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for eqn in reversed(linear_eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        cts = [Zero(v.aval.to_tangent_aval()) if ct is None else ct
               for v, ct in zip(eqn.outvars, cts)]
        args = [core.UndefinedPrimal(v.aval) if type(v) is Var and v in linear
                else (env[v] if type(v) is Var else v.val) for v in eqn.invars]
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"reverse-mode differentiation of '{eqn.primitive.name}' is not "
                f"supported: it has no transpose rule (it should be linear in its "
                f"tangent inputs){' at ' + eqn.source_info if eqn.source_info else ''}")
        ct_arg = cts if eqn.primitive.multiple_results else cts[0]
        with core.eqn_source(eqn.source_info, f"while transposing '{eqn.primitive.name}' "
                             "in the backward pass"):
            cts_in = rule(ct_arg, *args, **eqn.params)
        for v, ct in zip(eqn.invars, cts_in):
            add_ct(v, ct)
    return [ct_env.get(v, Zero(v.aval)) for v in jaxpr.invars]


def _flat_cotangent(ct, tree, out_avals, who: str, of: str) -> list:
    """The leaves of a cotangent `ct`, checked: the structure `tree` of `of`, each leaf a
    tangent of the matching output aval."""
    flat_ct, ct_tree = tree_util.tree_flatten(ct)
    if ct_tree != tree:
        raise TypeError(f"{who}: the cotangent must have the structure of {of} {tree}, "
                        f"got {ct_tree}")
    for i, (aval, c) in enumerate(zip(out_avals, flat_ct)):
        _check_tangent(aval, c, i, who, cotangent=True)
    return flat_ct


def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes=()):
    """(fun(*primals), vjp_fn) where vjp_fn(ct) = ctᵀ·J, one cotangent per primal.

    A non-empty `reduce_axes` is a NotImplementedError, as in JAX."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to vjp is deprecated")
    flat_p, in_tree = tree_util.tree_flatten(primals)
    aux: list = []
    flat_fun, out_tree = flatten_fun_nokwargs(_with_aux(fun, has_aux, aux), in_tree)
    outs, closed, trace = linearize_flat(flat_fun, flat_p, f"vjp of {_name(fun)}")
    tree = out_tree[0]
    out_avals = [get_aval(o) for o in outs]
    in_avals = [get_aval(p) for p in flat_p]

    def vjp_fn(ct):
        flat_ct = _flat_cotangent(ct, tree, out_avals, "vjp_fn", "the primal output")
        flat_ct = [Zero(a.to_tangent_aval()) if not dtypes.is_inexact(a.dtype) else c
                   for a, c in zip(out_avals, flat_ct)]
        cts = backward_pass(closed.jaxpr, closed.consts, flat_ct)
        cts = [_on_backend_of(_out_tangent_zero(c, a), p)
               for c, a, p in zip(cts, in_avals, flat_p)]
        return tree_util.tree_unflatten(in_tree, cts)

    out = tree_util.tree_unflatten(tree, outs)
    if has_aux:
        return out, vjp_fn, _strip_aux(aux[0], {trace})
    return out, vjp_fn


def linear_transpose(fun: Callable, *primals, reduce_axes=()):
    """The transpose of the linear function `fun` (jax.linear_transpose): a function of a
    cotangent of fun's output that gives cotangents of its inputs, ctᵀ·A for fun = A·x.

    `primals` give the input shapes and dtypes (arrays or ShapeDtypeStructs; their
    values are not used). fun is staged once, at those shapes, and its jaxpr transposed
    by each call; fun must be linear in all its (floating) inputs: a nonlinear operation
    on them is an error naming it."""
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported (jax has "
                                  "deprecated it)")
    from fnad.tracing import shaped_abstractify, trace_to_jaxpr
    flat_p, in_tree = tree_util.tree_flatten(primals)
    in_avals = [shaped_abstractify(p) for p in flat_p]
    for i, a in enumerate(in_avals):
        if not dtypes.is_inexact(a.dtype):
            raise TypeError(f"linear_transpose: input {i} has dtype {a.dtype.name}; the "
                            "inputs of a linear function must be floating or complex")
    flat_fun, out_tree = flatten_fun_nokwargs(fun, in_tree)
    closed = trace_to_jaxpr(flat_fun, in_avals, f"linear_transpose of {_name(fun)}")
    tree = out_tree[0]
    out_avals = closed.out_avals

    def transposed(ct):
        flat_ct = _flat_cotangent(ct, tree, out_avals, "linear_transpose", "fun's output")
        try:
            cts = backward_pass(closed.jaxpr, closed.consts, flat_ct)
        except (NotImplementedError, TypeError, AttributeError) as e:
            raise TypeError(f"linear_transpose: {_name(fun)} is not linear in its inputs "
                            f"({e})") from None
        cts = [_strong_like(instantiate(c, a), a) for c, a in zip(cts, in_avals)]
        return tree_util.tree_unflatten(in_tree, cts)
    return transposed


def _strong_like(ct, aval):
    """`ct` made strongly typed where the input `aval` is (JAX's jaxpr holds such an input's
    weak literals as strong ones, so its transposes come out strong)."""
    if not aval.weak_type and get_aval(ct).weak_type:
        from fnad.primitives.logic import convert_element_type
        return convert_element_type(ct, aval.dtype, False)
    return ct


def _on_backend_of(ct, primal):
    """A cotangent made on the host (numpy backend) moved to its concrete primal's backend."""
    if type(ct) is core.Array and type(primal) is core.Array and \
            ct._backend is not primal._backend and ct._backend.name == "numpy":
        b = primal._backend
        return core.Array(b.device_put(ct._value), ct.aval, b)
    return ct


def _out_tangent_zero(ct, aval):
    """The cotangent returned for an input of type `aval`: weak if the input was."""
    if not dtypes.is_inexact(aval.dtype):
        return np.zeros(aval.shape, dtypes.float0)
    ct = instantiate(ct, aval.to_tangent_aval()) if type(ct) is Zero else ct
    if get_aval(ct).weak_type != aval.weak_type:
        from fnad.primitives.logic import convert_element_type
        ct = convert_element_type(ct, aval.dtype, aval.weak_type)
    return ct


# ---- grad ------------------------------------------------------------------------------
def _name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _check_argnums(fun_name: str, argnums, nargs: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else argnums
    for i in nums:
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"{what}(argnums={argnums!r}): argnums must be an int or a "
                            "tuple of ints")
        if not -nargs <= i < nargs:
            raise ValueError(f"{what}({fun_name}, argnums={argnums!r}): {fun_name} was called "
                             f"with {nargs} positional argument{'s' * (nargs != 1)}, so "
                             f"argnums must be in range({-nargs}, {nargs})")
    return tuple(int(i) % nargs for i in nums)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False,
                   reduce_axes: Sequence = ()) -> Callable:
    """A function returning (fun(*args), ∇fun(*args)) for scalar real-valued `fun`.

    The gradient is with respect to the positional arguments `argnums` (an int,
    or a tuple giving a tuple of gradients); with has_aux, fun returns
    (value, aux) and the result is ((value, aux), grad). A non-empty `reduce_axes` is a
    NotImplementedError, as in JAX (which has deprecated it).
    """
    if not callable(fun):
        raise TypeError(f"grad: expected a callable value, got {fun!r}")
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to grad is deprecated")
    if isinstance(argnums, np.integer):
        argnums = int(argnums)
    if not isinstance(argnums, int) and not (
            isinstance(argnums, (tuple, list)) and argnums):
        raise TypeError(f"value_and_grad(argnums={argnums!r}): argnums must be an int or a "
                        "non-empty tuple of ints")
    what = "grad"

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        nums = _check_argnums(_name(fun), argnums, len(args), what)
        dyn = tuple(args[i] for i in nums)
        for leaf in tree_util.tree_leaves(dyn):
            dt = get_aval(leaf).dtype
            if holomorphic and not dtypes.is_complex(dt):
                raise TypeError(f"{what} with holomorphic=True requires inputs with complex "
                                f"dtype, but got {dt.name}.")
            if not allow_int and not dtypes.is_inexact(dt):
                raise TypeError(
                    f"{what} requires real- or complex-valued inputs (input dtype that is a "
                    f"sub-dtype of floating or complexfloating), but got {dt.name}. To "
                    "differentiate with respect to integer or boolean inputs use vjp, or "
                    "pass allow_int=True.")

        def f_dyn(*dyn_args):
            full = list(args)
            for i, a in zip(nums, dyn_args):
                full[i] = a
            return fun(*full, **kwargs)
        f_dyn.__name__ = _name(fun)     # errors about fun's outputs name fun

        res = vjp(f_dyn, *dyn, has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        try:
            out_aval = get_aval(out) if not isinstance(out, (tuple, list, dict)) else None
        except TypeError:
            raise TypeError(f"Gradient only defined for scalar-output functions. Output of "
                            f"{_name(fun)} was {out!r}.") from None
        if out_aval is None:
            raise TypeError(f"{what} requires a scalar output, but {_name(fun)} returned a "
                            f"{type(out).__name__}" + (" (use has_aux=True to return "
                                                      "auxiliary data)" if not has_aux else ""))
        if out_aval.shape:
            raise TypeError(f"Gradient only defined for scalar-output functions. Output of "
                            f"{_name(fun)} had shape {out_aval.shape}.")
        dt = out_aval.dtype
        if holomorphic:
            if not dtypes.is_complex(dt):
                raise TypeError(f"{what}(holomorphic=True) requires a complex output, got "
                                f"{dt.name}")
        elif not dtypes.is_float(dt):
            raise TypeError(
                f"{what} requires real-valued outputs (output dtype that is a sub-dtype of "
                f"floating), but {_name(fun)} returned {dt.name}. For holomorphic "
                "differentiation pass holomorphic=True; for other complex or integer "
                "outputs use vjp directly.")
        # the seed ones_like(out): weak if out is, on out's backend when out is concrete
        backend = out._backend if type(out) is core.Array else core.default_backend()
        g = vjp_fn(core.Array(backend.device_put(np.ones((), dt)), out_aval, backend))
        g = g[0] if isinstance(argnums, int) else g
        value = (out, res[2]) if has_aux else out
        return value, g

    return value_and_grad_f


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False,
         reduce_axes: Sequence = ()) -> Callable:
    """∇fun: the gradient of scalar-output `fun` with respect to `argnums`.

    With has_aux, fun returns (value, aux) and grad returns (gradient, aux).
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return grad_f


# ---- jaxpr-level transformations (used by control flow and other higher-order primitives) --
def jvp_jaxpr(closed, nonzeros: Sequence[bool], instantiate_outs: bool | Sequence[bool]):
    """The JVP of a ClosedJaxpr (no consts) as a new ClosedJaxpr.

    Inputs: the hoisted constants, the primals, then a tangent for each input marked in
    `nonzeros`. Outputs: the primal outputs, then a tangent for each output whose tangent
    is not a symbolic zero or is marked in `instantiate_outs` (integer outputs never get
    one). Returns (jvp_closed, out_nonzeros, consts).

    The constants are arrays that custom_jvp/custom_vjp rules create while the JVP is
    traced (the rules are Python, run anew): the caller passes them as leading operands,
    with no tangent, as it does for the values a traced function closes over.
    """
    from fnad.tracing import trace_to_subjaxpr
    jaxpr = closed.jaxpr
    in_avals = [v.aval for v in jaxpr.invars]
    n_out = len(jaxpr.outvars)
    inst = [instantiate_outs] * n_out if isinstance(instantiate_outs, bool) \
        else list(instantiate_outs)
    out_nz_box: list = []

    def f(*args):
        primals, tans = args[:len(in_avals)], iter(args[len(in_avals):])
        tangents = [next(tans) if nz else Zero(a.to_tangent_aval())
                    for a, nz in zip(in_avals, nonzeros)]
        trace = JVPTrace(core.current_trace(), "jvp of a sub-jaxpr")
        with core.new_trace(trace):
            outs = eval_jaxpr(jaxpr, closed.consts,
                              *[trace.pack(p, t) for p, t in zip(primals, tangents)])
            pts = [trace.primal_tangent(o) for o in outs]
        out_nz = [dtypes.is_inexact(get_aval(p).dtype) and (type(t) is not Zero or i)
                  for (p, t), i in zip(pts, inst)]
        out_nz_box.append(out_nz)
        return [p for p, _ in pts] + [instantiate(t, get_aval(p).to_tangent_aval())
                                      for (p, t), nz in zip(pts, out_nz) if nz]

    tan_avals = [a.to_tangent_aval() for a, nz in zip(in_avals, nonzeros) if nz]
    out, consts = trace_to_subjaxpr(f, in_avals + tan_avals, "jvp of a sub-jaxpr")
    return out, out_nz_box[0], consts


def transpose_jaxpr_fn(jaxpr: Jaxpr, linear: Sequence[bool]) -> Callable:
    """A function (nonlinear_ins..., cts_out...) -> cts of the linear inputs (zeros filled).

    `jaxpr` (no constvars) is linear in the invars marked in `linear`; the others are
    known values (residuals). Used to transpose the bodies of scan and cond.
    """
    nonlin_vars = [v for v, lin in zip(jaxpr.invars, linear) if not lin]
    lin_vars = [v for v, lin in zip(jaxpr.invars, linear) if lin]
    body = Jaxpr(nonlin_vars, lin_vars, jaxpr.eqns, jaxpr.outvars)
    n_nonlin = len(nonlin_vars)

    def transposed(*args):
        nonlin, cts = args[:n_nonlin], args[n_nonlin:]
        cts_in = backward_pass(body, nonlin, cts)
        return [instantiate(ct, v.aval.to_tangent_aval()) for ct, v in zip(cts_in, lin_vars)]
    return transposed

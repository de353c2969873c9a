"""fnad.experimental.jet: Taylor-mode automatic differentiation, as jax.experimental.jet.

    primals_out, series_out = jet(fun, primals, series)

`fun` is traced to a jaxpr and its equations run on *jets*: a primal x0 and the K terms
x1 .. xK of a truncated Taylor polynomial x(t) = x0 + x1 t + x2 t²/2! + ... (each term the
k-th derivative along t, as jax's default `factorial_scaled=True`). Each primitive's rule
(`jet_rules`, keyed by primitive) maps input jets to the output jet; the output terms are
the derivatives of fun(x(t)) at t = 0. One pass costs about K² products for the bilinear
rules, instead of 2^K for K nested jvps.

The rules, by kind:

- linear primitives (`_LINEAR`: arithmetic, shape and indexing ops): each term goes
  through the primitive, the operands that are not linear (indices, predicates) as their
  primals;
- bilinear (mul, dot_general, conv, ragged_dot): Leibniz's rule,
  (xy)_k = Σ_j C(k, j) x_j y_{k-j};
- div, exp, log, sqrt, sin/cos, tanh, logistic: the recurrences that follow from their
  ODEs (e.g. y = exp(x): y' = y x', so y_k = Σ_j C(k-1, j-1) x_j y_{k-j});
- piecewise functions (max, min, abs, clamp, reduce_max/min): the pieces active at x0
  carry the terms (ties split evenly, as their JVPs); piecewise-constant and integer ones
  (sign, floor, comparisons, argmax, stop_gradient) have zero terms;
- jit, checkpoint and custom_jvp/custom_vjp calls: their jaxprs are run on the jets (the
  custom rules are not used: Taylor terms of any order need the function itself, as jax);
- every other primitive with a JVP rule (erf, integer_pow, pow, reduce_prod, cumprod, scan,
  while, cond, the decompositions ...): the derivatives of t -> prim(x(t)) by nested
  `fnad.jvp` (`_nested_jvp_rule`: exact, at 2^k evaluations of the primitive for the k-th
  term). jax's jet has no rule for many of these (reduce_prod, scan, custom_jvp functions
  such as relu) and raises.

The terms of a function of the primals that has no series (a constant) are None inside
(never materialized), zeros in the result.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fnad import core, dtypes, tree_util
from fnad import lax
from fnad.ir import Var

__all__ = ["jet", "jet_rules"]

# primitive -> rule(primals, series, **params) -> (primal_out, series_out), where series is
# one entry per operand: None (a constant: all its terms are 0) or a list of K terms; the
# rule returns series_out as a list of K terms, or None (zero), per output (a list of them
# for a multiple-results primitive).
jet_rules: dict = {}


def jet(fun: Callable, primals, series, *, factorial_scaled: bool = True):
    """(fun(*primals), the K Taylor terms of fun along the curve given by primals and series).

    `primals` is a tuple or list with one entry (a pytree) per positional argument of fun;
    `series` has one entry per primal, each a list of K terms of the primal's structure.
    With factorial_scaled=False the terms are the plain Taylor coefficients (x_k / k!) in
    and out, as jax's option of that name."""
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise TypeError(f"jet: primals and series must be tuples or lists, got "
                        f"{type(primals).__name__} and {type(series).__name__}")
    if len(primals) != len(series):
        raise TypeError(f"jet: primals and series must have the same length, got "
                        f"{len(primals)} and {len(series)}")
    flat_p, tree_p = tree_util.tree_flatten(tuple(primals))
    orders = set()
    per_arg = []
    for i, (p, s) in enumerate(zip(primals, series)):
        if not isinstance(s, (tuple, list)):
            raise TypeError(f"jet: series[{i}] must be a list of terms, got "
                            f"{type(s).__name__}")
        orders.add(len(s))
        leaves_p, tree = tree_util.tree_flatten(p)
        terms = []
        for k, term in enumerate(s):
            leaves, t_tree = tree_util.tree_flatten(term)
            if t_tree != tree:
                raise ValueError(f"jet: term {k + 1} of series[{i}] has the structure "
                                 f"{t_tree}, its primal {tree}")
            for lp, lt in zip(leaves_p, leaves):
                if np.shape(lt) != np.shape(lp):
                    raise ValueError(f"jet: term {k + 1} of series[{i}] has a leaf of shape "
                                     f"{np.shape(lt)} where its primal has {np.shape(lp)}")
            terms.append(leaves)
        per_arg.append([list(col) for col in zip(*terms)] if terms else
                       [[] for _ in leaves_p])
    if len(orders) > 1:
        raise ValueError(f"jet: every primal needs the same number of terms, got "
                         f"{sorted(orders)}")
    order = orders.pop() if orders else 0
    flat_s = [col for arg in per_arg for col in arg]           # one list of K per leaf
    if not factorial_scaled:
        flat_s = [[t * math.factorial(k + 1) for k, t in enumerate(col)] for col in flat_s]

    def flat_fun(*leaves):
        args = tree_util.tree_unflatten(tree_p, list(leaves))
        return fun(*args)
    from fnad.tracing import make_jaxpr
    closed, out_shape = make_jaxpr(flat_fun, return_shape=True)(*flat_p)
    import fnad.numpy as jnp
    flat_p = [jnp.asarray(p) for p in flat_p]
    outs = _run(closed.jaxpr, closed.consts, flat_p,   # terms in their primal's dtype
                [[jnp.asarray(t, p.dtype) for t in col] if order else None
                 for p, col in zip(flat_p, flat_s)], order)
    out_tree = tree_util.tree_structure(out_shape)
    primal_out = [p for p, _ in outs]
    series_out = []
    for (p, s) in outs:
        terms = s if s is not None else [_zeros(p)] * order
        if not factorial_scaled:
            terms = [t / math.factorial(k + 1) for k, t in enumerate(terms)]
        series_out.append(terms)
    return (tree_util.tree_unflatten(out_tree, primal_out),
            tree_util.tree_unflatten(out_tree, series_out))


# ---- the interpreter ---------------------------------------------------------------------------
def _zeros(x):
    aval = core.get_aval(x)
    return lax.full(aval.shape, 0, aval.dtype)


def _run(jaxpr, consts, primals, series, order):
    """[(primal, terms or None)] of jaxpr's outputs, from its inputs' jets."""
    env: dict = {}
    for v, c in zip(jaxpr.constvars, consts):
        env[v] = (c, None)
    for v, p, s in zip(jaxpr.invars, primals, series):
        env[v] = (p, s if s and _inexact(p) else None)

    def read(a):
        return env[a] if type(a) is Var else (a.val, None)
    for eqn in jaxpr.eqns:
        ins = [read(a) for a in eqn.invars]
        ps, ss = [p for p, _ in ins], [s for _, s in ins]
        prim = eqn.primitive
        with core.eqn_source(eqn.source_info):
            if all(s is None for s in ss):                  # constants: no terms
                out = prim.bind(*ps, **eqn.params)
                outs = [(o, None) for o in (out if prim.multiple_results else [out])]
            else:
                rule = rule_for(prim)
                if rule is None:
                    raise NotImplementedError(
                        f"jet: the primitive '{prim.name}' has neither a Taylor rule nor a "
                        f"JVP rule (a custom_vjp's linear part, a callback ...)")
                p_out, s_out = rule(ps, ss, order=order, **eqn.params)
                if prim.multiple_results:
                    outs = list(zip(p_out, s_out))
                else:
                    outs = [(p_out, s_out)]
        for v, (p, s) in zip(eqn.outvars, outs):
            env[v] = (p, s if s is not None and _inexact(p) else None)
    return [read(a) for a in jaxpr.outvars]


def _inexact(x) -> bool:
    return dtypes.is_inexact(core.get_aval(x).dtype)


def _terms(x, s, order):
    """s, or K zero terms shaped like x where s is None."""
    return s if s is not None else [_zeros(x)] * order


# ---- linear primitives -----------------------------------------------------------------------
def _linear_rule(prim, linear: tuple | None):
    """Each term through prim; operands not in `linear` (None: all are) pass their primals,
    and a linear operand without terms passes zeros."""
    def rule(ps, ss, *, order, **params):
        out = prim.bind(*ps, **params)
        lin = range(len(ps)) if linear is None else linear
        terms = []
        for k in range(order):
            args = [(_terms(p, s, order)[k] if i in lin else p)
                    for i, (p, s) in enumerate(zip(ps, ss))]
            terms.append(prim.bind(*args, **params))
        if prim.multiple_results:
            return out, [list(col) for col in zip(*terms)]
        return out, terms
    return rule


_ALL = None
_LINEAR = {
    "neg": _ALL, "add": _ALL, "sub": _ALL, "add_any": _ALL, "real": _ALL, "imag": _ALL,
    "conj": _ALL, "complex": _ALL, "reduce_sum": _ALL, "cumsum": _ALL, "transpose": _ALL,
    "reshape": _ALL, "broadcast_in_dim": _ALL, "squeeze": _ALL, "rev": _ALL, "slice": _ALL,
    "concatenate": _ALL, "pad": _ALL, "reduce_window_sum": _ALL, "copy": _ALL,
    "convert_element_type": _ALL, "reduce_precision": _ALL, "fft": _ALL, "psum": _ALL,
    "all_gather": _ALL, "select_n": tuple(range(1, 64)), "dynamic_slice": (0,),
    "dynamic_update_slice": (0, 1), "gather": (0,), "scatter_add": (0, 2), "scatter": (0, 2),
    "name": _ALL,
}
# bilinear: out = f(x, y) linear in each of the two operands (the others pass primals)
_BILINEAR = ("mul", "dot_general", "conv_general_dilated", "ragged_dot_general")


def _prims() -> dict:
    return {n[:-2]: getattr(lax, n) for n in dir(lax) if n.endswith("_p")
            and type(getattr(lax, n)) is core.Primitive}


def _bilinear_rule(prim):
    def rule(ps, ss, *, order, **params):
        x, y, *rest = ps
        sx, sy = ss[0], ss[1]
        out = prim.bind(x, y, *rest, **params)
        xs = [x] + _terms(x, sx, order)
        ys = [y] + _terms(y, sy, order)
        terms = []
        for k in range(1, order + 1):
            acc = None
            for j in range(k + 1):
                if (j and sx is None) or (k - j and sy is None):
                    continue
                term = prim.bind(xs[j], ys[k - j], *rest, **params)
                if math.comb(k, j) != 1:
                    term = lax.mul(term, _const(math.comb(k, j), term))
                acc = term if acc is None else lax.add(acc, term)
            terms.append(acc)
        return out, terms
    return rule


def _const(value, like):
    return lax.full((), value, core.get_aval(like).dtype)


def _scale(c, x):
    return x if c == 1 else lax.mul(x, _const(c, x))


# ---- recurrences --------------------------------------------------------------------------------
def _leibniz(a, b, k):
    """Σ_{j=0..k} C(k, j) a[j] b[k-j] (a, b lists of terms with their primals first)."""
    acc = None
    for j in range(k + 1):
        if a[j] is None or b[k - j] is None:
            continue
        t = _scale(math.comb(k, j), lax.mul(a[j], b[k - j]))
        acc = t if acc is None else lax.add(acc, t)
    return acc


def _ode_rule(prim, g_of):
    """y = f(x) with y' = g·x' where g is given from the jet of y by `g_of` (the jet of g as
    a function of the terms of y computed so far and of x): y_k = Σ_{j=1..k} C(k-1, j-1)
    x_j g_{k-j}."""
    def rule(ps, ss, *, order, **params):
        (x,), (sx,) = ps, ss
        y = prim.bind(x, **params)
        xs = [x] + sx
        ys = [y]
        gs = []
        for k in range(1, order + 1):
            gs = g_of(xs, ys, gs, k - 1)               # g's terms 0 .. k-1
            acc = None
            for j in range(1, k + 1):
                t = _scale(math.comb(k - 1, j - 1), lax.mul(xs[j], gs[k - j]))
                acc = t if acc is None else lax.add(acc, t)
            ys.append(acc)
        return y, ys[1:]
    return rule


def _exp_g(xs, ys, gs, n):                              # exp' = y
    return ys[:n + 1]


def _div_rule(ps, ss, *, order, **params):
    """z = x / y: z_k = (x_k - Σ_{j=1..k} C(k, j) y_j z_{k-j}) / y_0."""
    x, y = ps
    z = lax.div(x, y)
    xs = [x] + _terms(x, ss[0], order)
    ys = [y] + (ss[1] if ss[1] is not None else [None] * order)
    zs = [z]
    for k in range(1, order + 1):
        acc = xs[k]
        for j in range(1, k + 1):
            if ys[j] is not None:
                acc = lax.sub(acc, _scale(math.comb(k, j), lax.mul(ys[j], zs[k - j])))
        zs.append(lax.div(acc, y))
    return z, zs[1:]


def _reciprocal_terms(xs, n):
    """The terms 0..n of 1/x from x's terms (the div recurrence with numerator 1)."""
    r = [lax.div(_const(1, xs[0]), xs[0])]
    for k in range(1, n + 1):
        acc = None
        for j in range(1, k + 1):
            t = _scale(math.comb(k, j), lax.mul(xs[j], r[k - j]))
            acc = t if acc is None else lax.add(acc, t)
        r.append(lax.neg(lax.mul(acc, r[0])))
    return r


def _log_g(xs, ys, gs, n):                              # log: g = 1/x
    return _reciprocal_terms(xs, n)


def _sin_cos_rule(which):
    """s = sin x, c = cos x: s' = c x', c' = -s x' (computed together)."""
    def rule(ps, ss, *, order, **params):
        (x,), (sx,) = ps, ss
        xs = [x] + sx
        s, c = [lax.sin(x)], [lax.cos(x)]
        for k in range(1, order + 1):
            sk = ck = None
            for j in range(1, k + 1):
                w = math.comb(k - 1, j - 1)
                a = _scale(w, lax.mul(xs[j], c[k - j]))
                b = _scale(w, lax.mul(xs[j], s[k - j]))
                sk = a if sk is None else lax.add(sk, a)
                ck = b if ck is None else lax.add(ck, b)
            s.append(sk)
            c.append(lax.neg(ck))
        out = s if which == "sin" else c
        return out[0], out[1:]
    return rule


def _tanh_g(xs, ys, gs, n):                             # tanh' = 1 - y²
    g = [lax.sub(_const(1, ys[0]), lax.mul(ys[0], ys[0]))]
    for k in range(1, n + 1):
        g.append(lax.neg(_leibniz(ys, ys, k)))
    return g


def _logistic_g(xs, ys, gs, n):                         # σ' = σ(1 - σ)
    one_minus = [lax.sub(_const(1, ys[0]), ys[0])] + [lax.neg(t) for t in ys[1:]]
    return [_leibniz(ys, one_minus, k) for k in range(n + 1)]


def _sqrt_g(xs, ys, gs, n):                             # sqrt' = 1 / (2 y)
    r = _reciprocal_terms(ys, n)
    return [_scale(0.5, t) for t in r]


def _nested_jvp_rule(prim):
    """Any primitive: the k-th term of each output is d^k/dt^k prim(x(t)) at t = 0, by k
    nested fnad.jvp's along t (x(t) the Taylor polynomial of each operand with terms; the
    others constant). Exact, at 2^k evaluations of the primitive for the k-th term."""
    def rule(ps, ss, *, order, **params):
        import fnad
        import fnad.numpy as jnp
        moving = [i for i, s in enumerate(ss) if s is not None]

        def curve(t):
            args = list(ps)
            for i in moving:                # Horner: x0 + t(x1 + t/2 (x2 + t/3 (x3 ...)))
                acc = ss[i][-1]
                for k in range(order - 1, 0, -1):
                    acc = ss[i][k - 1] + (t / (k + 1)) * acc
                args[i] = ps[i] + t * acc
            out = prim.bind(*args, **params)
            return list(out) if prim.multiple_results else [out]
        dt = dtypes.to_inexact_dtype(core.get_aval(ps[moving[0]]).dtype)
        t0 = jnp.zeros((), dtypes.finfo(dt).dtype if dtypes.is_complex(dt) else dt)
        derivs = [curve]
        for _ in range(order):
            prev = derivs[-1]
            derivs.append(lambda t, prev=prev: fnad.jvp(prev, (t,), (jnp.ones_like(t),))[1])
        outs = curve(t0)
        terms = [d(t0) for d in derivs[1:]]          # [order][n_out]
        series = [[terms[k][i] for k in range(order)] for i in range(len(outs))]
        series = [s if _inexact(o) else None for o, s in zip(outs, series)]
        if prim.multiple_results:
            return outs, series
        return outs[0], series[0]
    return rule


# ---- piecewise rules ---------------------------------------------------------------------------
def _zero_rule(prim):
    """Piecewise-constant or integer-valued: zero terms."""
    def rule(ps, ss, *, order, **params):
        out = prim.bind(*ps, **params)
        if prim.multiple_results:
            return out, [None] * len(out)
        return out, None
    return rule


def _abs_rule(ps, ss, *, order, **params):
    (x,), (sx,) = ps, ss
    sign = lax.sign(x) if not dtypes.is_complex(core.get_aval(x).dtype) else None
    if sign is None:                                    # |z|: smooth away from 0
        return _nested_jvp_rule(lax.abs_p)(ps, ss, order=order)
    return lax.abs(x), [lax.mul(sign, t) for t in sx]


def _minmax_rule(prim, pick):
    """max/min: the terms of the operand that wins at the primals (ties: the mean)."""
    def rule(ps, ss, *, order, **params):
        import fnad.numpy as jnp
        x, y = ps
        out = prim.bind(x, y)
        wx = jnp.where(pick(x, y), 1.0, jnp.where(x == y, 0.5, 0.0)).astype(
            core.get_aval(out).dtype)
        tx, ty = _terms(x, ss[0], order), _terms(y, ss[1], order)
        return out, [tx[k] * wx + ty[k] * (1 - wx) for k in range(order)]
    return rule


def _reduce_minmax_rule(prim):
    """reduce_max/min over `axes`: the mean of the terms where the extremum is attained."""
    def rule(ps, ss, *, order, axes, **params):
        import fnad.numpy as jnp
        (x,), (sx,) = ps, ss
        out = prim.bind(x, axes=axes, **params)
        keep = [d for d in range(core.get_aval(x).ndim) if d not in axes]
        at = (x == lax.broadcast_in_dim(out, core.get_aval(x).shape, tuple(keep)))
        mask = at.astype(core.get_aval(x).dtype)
        count = jnp.sum(mask, axis=tuple(axes))
        return out, [jnp.sum(t * mask, axis=tuple(axes)) / count for t in sx]
    return rule


def _clamp_rule(ps, ss, *, order, **params):
    """clamp(lo, x, hi): the terms of whichever of the three gives the value."""
    import fnad.numpy as jnp
    lo, x, hi = ps
    out = lax.clamp(lo, x, hi)
    tl, tx, th = (_terms(p, s, order) for p, s in zip(ps, ss))
    below, above = x < lo, x > hi
    return out, [jnp.where(below, tl[k], jnp.where(above, th[k], tx[k]))
                 for k in range(order)]


def _call_rule(param):
    """jit, checkpoint, custom_jvp/vjp calls: run their jaxpr (in `param`) on the jets."""
    def rule(ps, ss, *, order, **params):
        closed = params[param]
        outs = _run(closed.jaxpr, closed.consts, ps, ss, order)
        return [p for p, _ in outs], [s for _, s in outs]
    return rule


def _register() -> None:
    prims = _prims()
    for name, lin in _LINEAR.items():
        if name in prims:
            jet_rules[prims[name]] = _linear_rule(prims[name], lin)
    for name in _BILINEAR:
        jet_rules[prims[name]] = _bilinear_rule(prims[name])
    jet_rules[prims["div"]] = _div_rule
    for name, g_of in (("exp", _exp_g), ("log", _log_g), ("tanh", _tanh_g),
                       ("logistic", _logistic_g), ("sqrt", _sqrt_g)):
        jet_rules[prims[name]] = _ode_rule(prims[name], g_of)
    jet_rules[prims["sin"]] = _sin_cos_rule("sin")
    jet_rules[prims["cos"]] = _sin_cos_rule("cos")
    jet_rules[prims["abs"]] = _abs_rule
    jet_rules[prims["max"]] = _minmax_rule(prims["max"], lambda x, y: x > y)
    jet_rules[prims["min"]] = _minmax_rule(prims["min"], lambda x, y: x < y)
    jet_rules[prims["reduce_max"]] = _reduce_minmax_rule(prims["reduce_max"])
    jet_rules[prims["reduce_min"]] = _reduce_minmax_rule(prims["reduce_min"])
    jet_rules[prims["clamp"]] = _clamp_rule
    for name in ("sign", "floor", "ceil", "round", "stop_gradient", "eq", "ne", "lt", "le",
                 "gt", "ge", "argmax", "argmin", "is_finite", "nextafter"):
        jet_rules[prims[name]] = _zero_rule(prims[name])
    from fnad.custom import custom_jvp_call_p, custom_vjp_call_p
    from fnad.jit import jit_p
    from fnad.remat import remat_p
    jet_rules[jit_p] = _call_rule("jaxpr")
    jet_rules[remat_p] = _call_rule("jaxpr")
    jet_rules[custom_jvp_call_p] = _call_rule("call_jaxpr")
    jet_rules[custom_vjp_call_p] = _call_rule("call_jaxpr")


def rule_for(prim):
    """The jet rule of `prim`: its entry in jet_rules, else nested jvps where prim has a
    JVP rule, else None."""
    rule = jet_rules.get(prim)
    if rule is None and prim in core.jvp_rules:
        rule = _nested_jvp_rule(prim)
    return rule


_register()

"""Pieces the passes share: walking sub-jaxprs, effects, renaming, and the tables of
primitive kinds (elementwise, reductions, commutative) that simplification, constant
folding and fusion planning read.

Imports fnad.core, fnad.ir and the primitive families (never a backend).
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator

import numpy as np

from fnad import core
from fnad.core import ShapedArray
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as sh

# ---- primitive kinds ---------------------------------------------------------------------
# Elementwise: out[i] = f(x[i], y[i], ...) with equal shapes or scalar operands. Every
# primitive of elementwise.py and logic.py is one (convert_element_type and stop_gradient
# included: per-element maps). Shape changes, reductions and control flow are not.
ELEMENTWISE = frozenset({
    ew.add_p, ew.add_any_p, ew.sub_p, ew.mul_p, ew.div_p, ew.neg_p, ew.rem_p, ew.pow_p,
    ew.integer_pow_p, ew.square_p, ew.max_p, ew.min_p, ew.abs_p, ew.sign_p, ew.floor_p,
    ew.ceil_p, ew.round_p, ew.exp_p, ew.exp2_p, ew.log_p, ew.log1p_p, ew.expm1_p, ew.tanh_p,
    ew.logistic_p, ew.sqrt_p, ew.rsqrt_p, ew.cbrt_p, ew.sin_p, ew.cos_p, ew.tan_p, ew.asin_p,
    ew.acos_p, ew.atan_p, ew.atan2_p, ew.sinh_p, ew.cosh_p, ew.asinh_p, ew.acosh_p,
    ew.atanh_p, ew.erf_p, ew.erfc_p, ew.erf_inv_p, ew.lgamma_p, ew.digamma_p,
    ew.polygamma_p, ew.igamma_p, ew.igammac_p, ew.igamma_grad_a_p, ew.random_gamma_grad_p,
    ew.real_p, ew.imag_p, ew.complex_p, ew.conj_p,
    lg.eq_p, lg.ne_p, lg.lt_p, lg.le_p, lg.gt_p, lg.ge_p, lg.is_finite_p, lg.and_p, lg.or_p,
    lg.xor_p, lg.not_p, lg.shift_left_p, lg.shift_right_arithmetic_p,
    lg.shift_right_logical_p, lg.population_count_p, lg.select_n_p, lg.clamp_p,
    lg.convert_element_type_p, lg.stop_gradient_p,
})

# Reductions over `axes` (no keepdims): out[kept] = op over the reduced axes.
REDUCTIONS = frozenset({red.reduce_sum_p, red.reduce_max_p, red.reduce_min_p,
                        red.reduce_prod_p, red.reduce_and_p, red.reduce_or_p})

# f(x, y) == f(y, x): CSE compares their operands as a set.
COMMUTATIVE = frozenset({ew.add_p, ew.add_any_p, ew.mul_p, ew.max_p, ew.min_p, lg.eq_p,
                         lg.ne_p, lg.and_p, lg.or_p, lg.xor_p})

broadcast_in_dim_p = sh.broadcast_in_dim_p


# ---- sub-jaxprs and effects ----------------------------------------------------------------
# Exact types of param values that neither are nor hold a jaxpr: every pass asks about
# every equation's params, and these skip the isinstance tests.
_LEAF_TYPES = frozenset({int, float, bool, str, bytes, type(None), complex}) | \
    core._dtype_classes


def sub_jaxprs(eqn: JaxprEqn) -> Iterator[ClosedJaxpr | Jaxpr]:
    """The jaxprs held by `eqn`'s params (cond's branches, scan's body, ...)."""
    for p in eqn.params.values():
        if type(p) not in _LEAF_TYPES:
            yield from _subs(p)


def _subs(p):
    if isinstance(p, (ClosedJaxpr, Jaxpr)):
        yield p
    elif isinstance(p, tuple):
        for q in p:
            if type(q) not in _LEAF_TYPES:
                yield from _subs(q)


def has_effects(eqn: JaxprEqn) -> bool:
    """Has side effects (a debug callback), itself or anywhere inside its sub-jaxprs."""
    if eqn.primitive in core.effectful_primitives:
        return True
    if not has_sub_jaxprs(eqn):
        return False
    for sub in sub_jaxprs(eqn):
        j = sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub
        if any(has_effects(e) for e in j.eqns):
            return True
    return False


def map_sub_jaxprs(eqn: JaxprEqn, fn: Callable[[ClosedJaxpr], ClosedJaxpr],
                   memo: dict) -> JaxprEqn:
    """`eqn` with `fn` applied to each sub-jaxpr in its params (the same object once:
    `memo` maps id(sub) -> (sub, result), so equal params stay identical for CSE)."""
    def rewrite(p):
        if isinstance(p, ClosedJaxpr):
            hit = memo.get(id(p))
            if hit is None:
                hit = memo[id(p)] = (p, fn(p))           # keep p alive: its id stays unique
            return hit[1]
        if isinstance(p, Jaxpr):
            out = rewrite(ClosedJaxpr(p, []))
            if out.consts:
                raise AssertionError("a pass gave a plain-Jaxpr param constants")
            return out.jaxpr
        if isinstance(p, tuple):
            new = tuple(rewrite(q) for q in p)
            return p if all(a is b for a, b in zip(new, p)) else new
        return p
    params = {k: rewrite(v) if _holds_jaxpr(v) else v for k, v in eqn.params.items()}
    if all(params[k] is eqn.params[k] for k in params):
        return eqn
    return eqn.replace(params=params)


def _holds_jaxpr(p) -> bool:
    if type(p) in _LEAF_TYPES:
        return False
    if isinstance(p, (ClosedJaxpr, Jaxpr)):
        return True
    if isinstance(p, tuple):
        for q in p:
            if type(q) not in _LEAF_TYPES and _holds_jaxpr(q):
                return True
    return False


def has_sub_jaxprs(eqn: JaxprEqn) -> bool:
    """Does one of `eqn`'s params hold a jaxpr (a higher-order primitive)?"""
    h = eqn._has_subs                                  # cached on the eqn (see ir.JaxprEqn)
    if h is None:
        h = False
        for v in eqn.params.values():
            if type(v) not in _LEAF_TYPES and _holds_jaxpr(v):
                h = True
                break
        eqn._has_subs = h
    return h


# ---- atoms -----------------------------------------------------------------------------------
def literal(value, aval: ShapedArray) -> Literal:
    """A scalar Literal of `aval` (its value as a NumPy scalar of aval's dtype)."""
    return Literal(np.asarray(value, aval.dtype)[()], aval)


def literal_key(lit: Literal) -> tuple:
    """A hashable key telling Literals apart by bits (so 0.0 and -0.0 differ; NaN == NaN)."""
    v = np.asarray(lit.val, lit.aval.dtype)
    return ("lit", v.tobytes(), lit.aval.dtype, lit.aval.weak_type)


class Renamer:
    """Var -> atom substitutions, followed through chains (a -> b -> c reads as c)."""

    __slots__ = ("env",)

    def __init__(self):
        self.env: dict[Var, Var | Literal] = {}

    def __call__(self, a):
        if type(a) is not Var:
            return a
        seen = a
        while type(a) is Var and a in self.env:
            a = self.env[a]
        if a is not seen:
            self.env[seen] = a                          # path compression
        return a

    def __setitem__(self, v: Var, a) -> None:
        self.env[v] = a

    def __bool__(self):
        return bool(self.env)

    def eqn(self, eqn: JaxprEqn) -> JaxprEqn:
        """`eqn` reading the substituted atoms."""
        env = self.env
        if not env:
            return eqn
        for a in eqn.invars:
            if type(a) is Var and a in env:
                break
        else:                                           # nothing to substitute
            return eqn
        invars = [self(a) for a in eqn.invars]
        if all(a is b for a, b in zip(invars, eqn.invars)):
            return eqn
        return eqn.replace(invars=invars)


def with_eqns(closed: ClosedJaxpr, eqns: list[JaxprEqn], outvars: list | None = None,
              constvars: list[Var] | None = None, consts: list | None = None) -> ClosedJaxpr:
    """`closed` with new eqns (and optionally outvars / constvars and their values)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars if constvars is None else constvars, j.invars, eqns,
                             j.outvars if outvars is None else outvars),
                       closed.consts if consts is None else consts)


def splice(jaxpr: Jaxpr, env: dict) -> tuple[list[JaxprEqn], list]:
    """(eqns, output atoms): `jaxpr`'s equations reading `env`'s atoms for its invars (and
    constvars), with new Vars for everything they write, so that one jaxpr may be spliced
    into a program in several places."""
    env = dict(env)
    read = lambda a: env[a] if type(a) is Var else a  # noqa: E731
    eqns = []
    for e in jaxpr.eqns:
        outs = [Var(v.aval) for v in e.outvars]
        env.update(zip(e.outvars, outs))
        eqns.append(e.replace(invars=[read(a) for a in e.invars], outvars=outs))
    return eqns, [read(v) for v in jaxpr.outvars]


def nbytes(aval: ShapedArray) -> int:
    """The bytes of an array of type `aval` (0 for a dtype without an itemsize)."""
    return math.prod(aval.shape) * getattr(aval.dtype, "itemsize", 0)


def same_program(a: ClosedJaxpr, b: ClosedJaxpr) -> bool:
    """Cheap fixed-point test: the same eqn objects, outvars and consts (recursively the
    same sub-jaxpr objects, since unchanged eqns are kept as they were)."""
    ja, jb = a.jaxpr, b.jaxpr
    return (len(ja.eqns) == len(jb.eqns) and all(x is y for x, y in zip(ja.eqns, jb.eqns))
            and all(x is y for x, y in zip(ja.outvars, jb.outvars))
            and len(ja.constvars) == len(jb.constvars))


def call_primitive(name: str) -> core.Primitive | None:
    """The call-like primitive `name` ("jit") if its module defines it, else None.

    jit_p lives in fnad/jit.py, which may not exist (or may load after the passes)."""
    if name != "jit":
        raise ValueError(f"unknown call primitive {name!r}")
    try:
        jit_module = importlib.import_module("fnad.jit")
    except ImportError:
        return None
    prim = getattr(jit_module, "jit_p", None)
    return prim if isinstance(prim, core.Primitive) and prim.name == name else None

"""Algebraic simplification: remove the identity ops that AD and tracing leave behind.

One forward walk; each equation goes through its primitive's rule in `simplify_rules`,
which answers one of:

    None        keep the equation
    an atom     the output *is* this Var or Literal: uses are rewired to it, the
                equation goes (dead producers are left to DCE)
    an eqn      a cheaper equation with the same outputs (it is simplified again)
    a list      equations that compute the same outputs, the last one writing them
                (the others write new Vars); each is simplified again

An output is replaced only by an atom of exactly its type (shape, dtype and weak_type),
so jaxpr outputs keep their types and the program's signature never changes. Rules:

    convert_element_type to its own dtype and weak_type      -> x
    reshape to its own shape; reshape of a reshape, or of a broadcast_in_dim that only
    adds size-1 dims                                         -> x; one reshape
    broadcast_in_dim to its own shape (identity dims)        -> x
    broadcast_in_dim of a broadcast_in_dim                   -> one broadcast_in_dim
    transpose by the identity; transpose of a transpose      -> x; one transpose
    squeeze / rev of no dims, reduce_* over no axes          -> x
    reduce_{sum,max,min,prod,and,or} over size-1 axes only   -> reshape
    pad by zeros, full slice / dynamic_slice, concatenate of one operand -> x
    pad(a) + pad(b), zero padding, side by side along one dim  -> pad(concatenate([a, b]))
    pad(a, (0, 1, 1)) + pad(b, (1, 0, 1)) along one dim (an interleave)
                                                  -> reshape(concatenate([a', b'])), a'
                                                     a with a unit dim after that one
    dynamic_update_slice of a full-size update               -> the update
    x + 0, 0 + x, x - 0 (add, add_any, sub), x * 1, 1 * x, x / 1, integer_pow(x, 1),
    neg(neg(x))                                              -> x
    select_n of one case, of equal cases, or with a constant predicate -> that case
    dot_general contracting only size-1 dims (or none), float operands of its result's
    dtype, batch dims leading                      -> mul of the operands broadcast
                                                      (an outer product: no BLAS call,
                                                      and it fuses with its neighbours)
    an elementwise operand broadcast_in_dim(scalar) beside a full-shape operand
                                                             -> the scalar itself

"0" and "1" are literals or broadcasts of literals. x + 0 -> x can turn an output
+0.0 into -0.0 (when x is -0.0), as XLA's simplifier does. stop_gradient and
checkpoint_name's `name` stay (they matter to AD; `inline(lowering=True)` drops them).
Sub-jaxprs are simplified too, their signatures kept.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fnad.core import Primitive
from fnad.ir import ClosedJaxpr, JaxprEqn, Literal, Var
from fnad.passes._util import Renamer, has_sub_jaxprs, map_sub_jaxprs, with_eqns
from fnad.passes.dce import read_counts
from fnad.primitives import elementwise as ew
from fnad.primitives import linalg as la
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as sh

__all__ = ["simplify", "simplify_rules"]


def simplify(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Remove identity ops (and compose reshapes/broadcasts/transposes); same signature."""
    return _simplify(closed, {})


def _simplify(closed: ClosedJaxpr, memo: dict) -> ClosedJaxpr:
    j = closed.jaxpr
    ren = Renamer()
    ctx = _Ctx(j)
    eqns: list[JaxprEqn] = []
    changed = False
    for eqn in j.eqns:
        new = ren.eqn(eqn)
        if has_sub_jaxprs(new):
            new = map_sub_jaxprs(new, lambda c: _simplify(c, memo), memo)
        changed = changed or new is not eqn
        todo = [new]
        while todo:
            e = ren.eqn(todo.pop())
            out = _apply(e, ctx)
            if isinstance(out, list):                  # several eqns, in program order
                todo.extend(reversed(out))
                changed = True
                continue
            if out is not e:
                changed = True
            if isinstance(out, JaxprEqn):
                eqns.append(out)
                if len(out.outvars) == 1:
                    ctx.producer[out.outvars[0]] = out
            else:
                ren[e.outvars[0]] = out
    outvars = [ren(v) for v in j.outvars]
    if not changed and all(a is b for a, b in zip(outvars, j.outvars)):
        return closed
    return with_eqns(closed, eqns, outvars)


def _apply(eqn: JaxprEqn, ctx: _Ctx):
    """`eqn` after its rules: an atom for its single output, or an eqn (maybe `eqn`)."""
    for _ in range(8):                                 # a rewritten eqn may simplify again
        rule = simplify_rules.get(eqn.primitive)
        if rule is None:
            return eqn
        out = rule(eqn, ctx)
        if out is None:
            return eqn
        if isinstance(out, JaxprEqn):
            eqn = out
            continue
        if isinstance(out, list):
            return out
        if out.aval == eqn.outvars[0].aval:            # same shape, dtype and weak_type
            return out
        return eqn
    return eqn


class _Ctx:
    """What rules may ask about the (already simplified) eqns before the current one."""

    __slots__ = ("producer", "uses")

    def __init__(self, jaxpr):
        self.producer: dict[Var, JaxprEqn] = {}
        self.uses: dict[Var, int] = read_counts(        # reads in the jaxpr as given
            [e.invars for e in jaxpr.eqns], jaxpr.outvars)

    def made_by(self, a, prim: Primitive) -> JaxprEqn | None:
        """The eqn of `prim` that produced the Var `a`, if it is one."""
        e = self.producer.get(a) if type(a) is Var else None
        return e if e is not None and e.primitive is prim else None

    def splat(self, a):
        """The scalar value every element of `a` has, if `a` is a Literal or a
        broadcast_in_dim of one; else None."""
        if type(a) is Literal:
            return a.val
        e = self.made_by(a, sh.broadcast_in_dim_p)
        if e is not None and type(e.invars[0]) is Literal:
            return e.invars[0].val
        return None

    def is_value(self, a, value) -> bool:
        s = self.splat(a)
        if s is None:
            return False
        t = type(s)
        if t is float or t is int or t is bool:        # a Python scalar: no NumPy needed
            return s == value
        with np.errstate(all="ignore"):
            if isinstance(s, np.generic):              # a 0-d value: np.all is the value
                return bool(s == value)
            return bool(np.all(np.asarray(s) == value))


simplify_rules: dict[Primitive, Callable[[JaxprEqn, _Ctx], object]] = {}


# ---- identities of shape ops ------------------------------------------------------------------
def convert_element_type_simplify(eqn, ctx):           # same dtype and weak_type: identity
    return eqn.invars[0]
simplify_rules[lg.convert_element_type_p] = convert_element_type_simplify


def reshape_simplify(eqn, ctx):
    x, = eqn.invars
    if x.aval.shape == eqn.params["new_sizes"]:
        return x
    inner = ctx.made_by(x, sh.reshape_p)               # reshape(reshape(y)) = reshape(y)
    if inner is None:                                  # a broadcast that only adds unit dims
        inner = ctx.made_by(x, sh.broadcast_in_dim_p)  # keeps the row-major order too
        if inner is not None and inner.invars[0].aval.size != x.aval.size:
            inner = None
    if inner is not None and inner.invars[0].aval.weak_type == x.aval.weak_type:
        return eqn.replace(invars=[inner.invars[0]])
    return None
simplify_rules[sh.reshape_p] = reshape_simplify


def broadcast_in_dim_simplify(eqn, ctx):
    x, = eqn.invars
    shape, dims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    if x.aval.shape == shape and dims == tuple(range(len(shape))):
        return x
    inner = ctx.made_by(x, sh.broadcast_in_dim_p)
    if inner is not None:                              # y's dim i -> d1[i] -> d2[d1[i]]
        d1 = inner.params["broadcast_dimensions"]
        return eqn.replace(invars=[inner.invars[0]],
                           params=dict(eqn.params, broadcast_dimensions=tuple(dims[i]
                                                                              for i in d1)))
    return None
simplify_rules[sh.broadcast_in_dim_p] = broadcast_in_dim_simplify


def transpose_simplify(eqn, ctx):
    x, = eqn.invars
    perm = eqn.params["permutation"]
    if perm == tuple(range(len(perm))):
        return x
    inner = ctx.made_by(x, sh.transpose_p)             # out dim i = y dim p1[p2[i]]
    if inner is not None:
        p1 = inner.params["permutation"]
        return eqn.replace(invars=[inner.invars[0]],
                           params=dict(eqn.params, permutation=tuple(p1[p] for p in perm)))
    return None
simplify_rules[sh.transpose_p] = transpose_simplify


def no_dims_simplify(param: str):
    """squeeze / rev of no dimensions is the identity."""
    def rule(eqn, ctx):
        return eqn.invars[0] if not eqn.params[param] else None
    return rule
simplify_rules[sh.squeeze_p] = no_dims_simplify("dimensions")
simplify_rules[sh.rev_p] = no_dims_simplify("dimensions")


def reduce_simplify(eqn, ctx):                         # over no axes, or size-1 axes only
    x, = eqn.invars
    axes = eqn.params["axes"]
    if not axes:
        return x
    out = eqn.outvars[0].aval
    if all(x.aval.shape[a] == 1 for a in axes) and x.aval.dtype == out.dtype and \
            x.aval.weak_type == out.weak_type:
        return JaxprEqn(sh.reshape_p, [x], {"new_sizes": out.shape}, eqn.outvars,
                        eqn.source_info)
    return None
simplify_rules[red.reduce_sum_p] = reduce_simplify
simplify_rules[red.reduce_max_p] = reduce_simplify
simplify_rules[red.reduce_min_p] = reduce_simplify
simplify_rules[red.reduce_prod_p] = reduce_simplify
simplify_rules[red.reduce_and_p] = reduce_simplify
simplify_rules[red.reduce_or_p] = reduce_simplify


def pad_simplify(eqn, ctx):
    if all(tuple(c) == (0, 0, 0) for c in eqn.params["padding_config"]):
        return eqn.invars[0]
    return None
simplify_rules[sh.pad_p] = pad_simplify


def slice_simplify(eqn, ctx):
    x, = eqn.invars
    p = eqn.params
    if all(s == 0 for s in p["start_indices"]) and tuple(p["limit_indices"]) == x.aval.shape \
            and (p["strides"] is None or all(s == 1 for s in p["strides"])):
        return x
    return None
simplify_rules[sh.slice_p] = slice_simplify


def dynamic_slice_simplify(eqn, ctx):                  # a full-size slice starts at 0
    x = eqn.invars[0]
    return x if tuple(eqn.params["slice_sizes"]) == x.aval.shape else None
simplify_rules[sh.dynamic_slice_p] = dynamic_slice_simplify


def dynamic_update_slice_simplify(eqn, ctx):           # a full-size update replaces it all
    x, u = eqn.invars[:2]
    return u if u.aval.shape == x.aval.shape else None
simplify_rules[sh.dynamic_update_slice_p] = dynamic_update_slice_simplify


def concatenate_simplify(eqn, ctx):
    return eqn.invars[0] if len(eqn.invars) == 1 else None
simplify_rules[sh.concatenate_p] = concatenate_simplify


# ---- arithmetic identities ----------------------------------------------------------------------
def scalar_operands(eqn, ctx):
    """Operands broadcast_in_dim(scalar, dims=()) read as the scalar itself, when another
    operand has the full output shape (elementwise ops accept scalar operands)."""
    shape = eqn.outvars[0].aval.shape
    if not shape:
        return eqn
    invars = eqn.invars
    for a in invars:
        if a.aval.shape == shape:
            break
    else:
        return eqn
    producer = ctx.producer
    new = None
    for i, a in enumerate(invars):
        b = producer.get(a) if type(a) is Var else None
        if b is None or b.primitive is not sh.broadcast_in_dim_p:
            continue
        x = b.invars[0].aval
        if not x.shape and x.dtype == a.aval.dtype and x.weak_type == a.aval.weak_type:
            if new is None:
                new = list(invars)
            new[i] = b.invars[0]
    if new is None or not any(a.aval.shape == shape for a in new):   # keep one full operand
        return eqn
    return eqn.replace(invars=new)


def elementwise_rule(identity: Callable | None = None):
    """Scalar operands first; then `identity(eqn, ctx)` (an atom or None)."""
    def rule(eqn, ctx):
        new = scalar_operands(eqn, ctx)
        if new is not eqn:
            return new
        return identity(eqn, ctx) if identity is not None else None
    return rule


def add_identity(eqn, ctx):                            # x + 0 = 0 + x = x
    x, y = eqn.invars
    if ctx.is_value(y, 0):
        return x
    if ctx.is_value(x, 0):
        return y
    return None


def add_of_pads(eqn, ctx):
    """pad(a) + pad(b), both padding with zeros, the same along every dim but one, where
    their footprints lie side by side: the values placed together, without the zeros and
    the sum. AD leaves this for every array that is split and used again (the cotangents of
    the slices of `jnp.split` or `x[..., ::2], x[..., 1::2]` are pads, summed)."""
    pa, pb = (ctx.made_by(x, sh.pad_p) for x in eqn.invars)
    if pa is None or pb is None or pa is pb:
        return None
    if any(ctx.uses.get(x, 0) > 1 for x in eqn.invars):   # the pads stay: joining adds work
        return None
    if not (ctx.is_value(pa.invars[1], 0) and ctx.is_value(pb.invars[1], 0)):
        return None
    a, b = pa.invars[0], pb.invars[0]
    out = eqn.outvars[0].aval
    if not (a.aval.dtype == b.aval.dtype == out.dtype
            and a.aval.weak_type == b.aval.weak_type == out.weak_type):
        return None
    ca, cb = (tuple(map(tuple, p.params["padding_config"])) for p in (pa, pb))
    differ = [d for d in range(len(ca)) if ca[d] != cb[d] or a.aval.shape[d] != b.aval.shape[d]]
    if len(differ) != 1:
        return None
    d, = differ
    (la, ha, ia), (lb, hb, ib) = ca[d], cb[d]
    na, nb = a.aval.shape[d], b.aval.shape[d]
    if min(la, ha, lb, hb) < 0:
        return None
    info = eqn.source_info

    def var(shape):
        return Var(out.update(shape=tuple(shape)))

    if ia == ib == 0:                                  # [.. a ..][.. b ..] or b then a
        if la + na == lb:
            first, second, lo, hi = a, b, la, hb
        elif lb + nb == la:
            first, second, lo, hi = b, a, lb, ha
        else:
            return None
        joined = var(a.aval.shape[:d] + (na + nb,) + a.aval.shape[d + 1:])
        config = ca[:d] + ((lo, hi, 0),) + ca[d + 1:]
        return [JaxprEqn(sh.concatenate_p, [first, second], {"dimension": d}, [joined], info),
                JaxprEqn(sh.pad_p, [joined, pa.invars[1]], {"padding_config": config},
                         eqn.outvars, info)]
    if ia == ib == 1 and na == nb and {(la, ha), (lb, hb)} == {(0, 1), (1, 0)} \
            and all(c == (0, 0, 0) for i, c in enumerate(ca) if i != d):
        shape = a.aval.shape                           # out[.., 2k + j, ..] = (a, b)[j][.., k, ..]
        unit = shape[:d + 1] + (1,) + shape[d + 1:]
        ua, ub, stacked = var(unit), var(unit), var(shape[:d + 1] + (2,) + shape[d + 1:])
        first, second = (a, b) if la == 0 else (b, a)
        return [JaxprEqn(sh.reshape_p, [first], {"new_sizes": unit}, [ua], info),
                JaxprEqn(sh.reshape_p, [second], {"new_sizes": unit}, [ub], info),
                JaxprEqn(sh.concatenate_p, [ua, ub], {"dimension": d + 1}, [stacked], info),
                JaxprEqn(sh.reshape_p, [stacked], {"new_sizes": out.shape}, eqn.outvars, info)]
    return None


def add_simplify(eqn, ctx):
    out = add_identity(eqn, ctx)
    return out if out is not None else add_of_pads(eqn, ctx)


def sub_identity(eqn, ctx):                            # x - 0 = x
    x, y = eqn.invars
    return x if ctx.is_value(y, 0) else None


def mul_identity(eqn, ctx):                            # x * 1 = 1 * x = x
    x, y = eqn.invars
    if ctx.is_value(y, 1):
        return x
    if ctx.is_value(x, 1):
        return y
    return None


def div_identity(eqn, ctx):                            # x / 1 = x
    x, y = eqn.invars
    return x if ctx.is_value(y, 1) else None


def select_n_identity(eqn, ctx):                       # cases[which] with which known
    which, *cases = eqn.invars
    if len(cases) == 1 or all(c is cases[0] for c in cases):
        return cases[0]
    w = ctx.splat(which)
    if w is not None:
        i = int(np.asarray(w))
        return cases[min(max(i, 0), len(cases) - 1)]
    return None


simplify_rules[ew.add_p] = elementwise_rule(add_simplify)
simplify_rules[ew.add_any_p] = elementwise_rule(add_simplify)
simplify_rules[ew.sub_p] = elementwise_rule(sub_identity)
simplify_rules[ew.mul_p] = elementwise_rule(mul_identity)
simplify_rules[ew.div_p] = elementwise_rule(div_identity)
simplify_rules[lg.select_n_p] = elementwise_rule(select_n_identity)
simplify_rules[ew.max_p] = elementwise_rule()
simplify_rules[ew.min_p] = elementwise_rule()
simplify_rules[ew.pow_p] = elementwise_rule()
simplify_rules[ew.rem_p] = elementwise_rule()
simplify_rules[ew.atan2_p] = elementwise_rule()
simplify_rules[lg.eq_p] = elementwise_rule()
simplify_rules[lg.ne_p] = elementwise_rule()
simplify_rules[lg.lt_p] = elementwise_rule()
simplify_rules[lg.le_p] = elementwise_rule()
simplify_rules[lg.gt_p] = elementwise_rule()
simplify_rules[lg.ge_p] = elementwise_rule()
simplify_rules[lg.and_p] = elementwise_rule()
simplify_rules[lg.or_p] = elementwise_rule()
simplify_rules[lg.clamp_p] = elementwise_rule()


def dot_general_simplify(eqn, ctx):
    """A product whose contracting dims all have size 1 (or that has none) is an outer
    product: each output element one multiplication, as a BLAS call with K = 1 computes it
    (an RNN's gradient through a [.., 1] read-out: 221 us through the BLAS, a fused kernel's
    loop instead)."""
    lhs, rhs = eqn.invars
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    out = eqn.outvars[0].aval
    a, b = lhs.aval, rhs.aval
    if not (type(lhs) is Var and type(rhs) is Var and a.dtype == b.dtype == out.dtype
            and np.dtype(out.dtype).kind == "f" and not (a.weak_type or b.weak_type
                                                         or out.weak_type)
            and all(a.shape[d] == 1 for d in lc)
            and tuple(lb) == tuple(rb) == tuple(range(len(lb)))):
        return None
    nb, info = len(lb), eqn.source_info
    eqns: list[JaxprEqn] = []

    def spread(x, contracting, dims):             # x without its unit dims, broadcast to out
        keep = tuple(x.aval.shape[d] for d in range(x.aval.ndim) if d not in contracting)
        if keep != x.aval.shape:
            v = Var(x.aval.update(shape=keep))
            eqns.append(JaxprEqn(sh.reshape_p, [x], {"new_sizes": keep}, [v], info))
            x = v
        v = Var(out)
        eqns.append(JaxprEqn(sh.broadcast_in_dim_p, [x], {"shape": out.shape,
                                                          "broadcast_dimensions": dims}, [v],
                             info))
        return v
    n_left = a.ndim - len(lc) - nb
    x = spread(lhs, lc, tuple(range(nb + n_left)))
    y = spread(rhs, rc, tuple(range(nb)) + tuple(range(nb + n_left, out.ndim)))
    return eqns + [JaxprEqn(ew.mul_p, [x, y], {}, eqn.outvars, info)]
simplify_rules[la.dot_general_p] = dot_general_simplify


def integer_pow_simplify(eqn, ctx):                    # x ** 1 = x
    return eqn.invars[0] if eqn.params["y"] == 1 else None
simplify_rules[ew.integer_pow_p] = integer_pow_simplify


def neg_simplify(eqn, ctx):                            # -(-x) = x
    inner = ctx.made_by(eqn.invars[0], ew.neg_p)
    return inner.invars[0] if inner is not None else None
simplify_rules[ew.neg_p] = neg_simplify

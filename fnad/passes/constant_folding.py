"""Constant folding: evaluate, at compile time, the equations whose inputs are all known.

Known values are Literals, small constants (constvars of at most `max_const_size`
elements) and the results of folded equations. An equation whose inputs are all
known runs on the NumPy reference implementation (`fnad.backends.numpy_ref`), and
its result replaces it:

    a scalar                    -> a Literal (of the output's exact type)
    an array of one value       -> broadcast_in_dim of a Literal (any size: for
                                   elementwise ops on such splats only the scalar is
                                   computed)
    any other array of at most `max_const_size` elements, computed from at least one
    array constant              -> a new constvar (top level only; with
                                   max_const_size=0 never)

Other known arrays (an iota, say) keep their equation but still feed folding further
down (e.g. a reduction of them to a scalar). Never folded: effectful equations,
higher-order ones (sub-jaxprs are folded inside, without new constvars: bodies of
control flow take no constants), multiple-result ones, primitives without a NumPy
implementation. `max_const_size` defaults to FOLD_LIMIT = 100_000 elements (400 kB
of float32): larger results are recomputed at run time rather than stored.
"""
from __future__ import annotations

import numpy as np

from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from fnad.passes._util import (ELEMENTWISE, Renamer, has_sub_jaxprs, broadcast_in_dim_p,
                               has_effects, literal, map_sub_jaxprs)

__all__ = ["FOLD_LIMIT", "fold_constants"]

FOLD_LIMIT = 100_000


class _Splat:
    """A known array all of whose elements equal `value` (a 0-d array)."""

    __slots__ = ("value", "shape")

    def __init__(self, value: np.ndarray, shape: tuple):
        self.value, self.shape = value, shape


def fold_constants(closed: ClosedJaxpr, *, max_const_size: int = FOLD_LIMIT) -> ClosedJaxpr:
    """Replace equations with all-known inputs by Literals, splats or constants."""
    return _fold(closed, max_const_size, {})


def _fold(closed: ClosedJaxpr, max_const_size: int, memo: dict) -> ClosedJaxpr:
    from fnad.backends import get_backend
    impls = get_backend("numpy").impl_rules
    j = closed.jaxpr
    limit = max(max_const_size, FOLD_LIMIT)            # what may be computed, not stored
    known: dict[Var, np.ndarray | _Splat] = {}
    is_const: set[Var] = set()
    for v, c in zip(j.constvars, closed.consts):
        if v.aval.size <= limit:
            try:
                known[v] = np.asarray(c, v.aval.dtype)
            except Exception:                           # noqa: BLE001 (a tracer: unknown)
                continue
            is_const.add(v)
    constvars, consts = list(j.constvars), list(closed.consts)
    ren = Renamer()
    eqns: list[JaxprEqn] = []
    changed = False

    def value(a):
        return np.asarray(a.val, a.aval.dtype) if type(a) is Literal else known[a]

    for eqn in j.eqns:
        new = ren.eqn(eqn)
        if has_sub_jaxprs(new):
            new = map_sub_jaxprs(new, lambda c: _fold(c, 0, memo), memo)
            eqns.append(new)
            changed = changed or new is not eqn
            continue
        changed = changed or new is not eqn
        impl = impls.get(new.primitive)
        foldable = impl is not None and len(new.outvars) == 1 and \
            not new.primitive.multiple_results
        if foldable:
            for a in new.invars:                        # every input known?
                if type(a) is not Literal and a not in known:
                    foldable = False
                    break
        if not foldable or has_effects(new):
            eqns.append(new)
            continue
        out_var = new.outvars[0]
        aval = out_var.aval
        ins = [value(a) for a in new.invars]
        splat_ins = new.invars and all(type(x) is _Splat or x.ndim == 0 for x in ins)
        try:
            with np.errstate(all="ignore"):
                if new.primitive in ELEMENTWISE and splat_ins:   # compute one element
                    scalars = [x.value if type(x) is _Splat else x for x in ins]
                    res = np.asarray(impl(*scalars, **new.params), aval.dtype)
                    res = _Splat(res, aval.shape) if aval.shape else res
                elif aval.size <= limit and all(type(x) is not _Splat or
                                                int(np.prod(x.shape)) <= limit for x in ins):
                    arrays = [np.broadcast_to(x.value, x.shape) if type(x) is _Splat else x
                              for x in ins]
                    res = np.asarray(impl(*arrays, **new.params), aval.dtype)
                    if res.shape != aval.shape:
                        raise ValueError("the implementation gave the wrong shape")
                    res = _as_splat(res)
                else:
                    res = None
        except Exception:                               # noqa: BLE001 (keep the eqn)
            res = None
        if res is None:
            eqns.append(new)
            continue
        known[out_var] = res
        if type(res) is _Splat:                         # broadcast_in_dim of a Literal
            lit = literal(res.value, aval.update(shape=()))
            if new.primitive is broadcast_in_dim_p and type(new.invars[0]) is Literal and \
                    not new.params["broadcast_dimensions"]:
                eqns.append(new)                        # already in that form
                continue
            eqns.append(JaxprEqn(broadcast_in_dim_p, [lit],
                                 {"shape": aval.shape, "broadcast_dimensions": ()},
                                 [out_var], new.source_info))
        elif res.ndim == 0:                             # a scalar: a Literal
            ren[out_var] = literal(res, aval)
        elif max_const_size and res.size <= max_const_size and \
                any(type(a) is Var and a in is_const for a in new.invars):
            constvars.append(out_var)                   # the eqn's output becomes a constant
            consts.append(res)
            is_const.add(out_var)
        else:
            eqns.append(new)                            # known, but cheaper to recompute
            continue
        changed = True
    outvars = [ren(v) for v in j.outvars]
    if not changed and all(a is b for a, b in zip(outvars, j.outvars)):
        return closed
    return ClosedJaxpr(Jaxpr(constvars, j.invars, eqns, outvars), consts)


def _as_splat(res: np.ndarray):
    """`res` as a _Splat if all its elements have the same bits (NaN and -0.0 exact)."""
    if res.ndim == 0 or res.size == 0:
        return res
    flat = np.ascontiguousarray(res).reshape(-1)
    rows = flat.view(np.uint8).reshape(flat.size, -1)
    if (rows == rows[0]).all():
        return _Splat(np.asarray(flat[0]), res.shape)
    return res

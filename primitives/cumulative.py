"""Cumulative reductions along one axis: cumsum, cumprod, cummax, cummin, cumlogsumexp.

Params (as jax.lax): `axis` (non-negative in the primitive; the wrappers also accept
negative values) and `reverse` (accumulate from the end). Each block: declaration,
wrapper, shape rule, JVP rule (and transpose for cumsum, the linear one).

cumsum is linear: its transpose is the cumsum in the other direction. The JVPs of the
other four are, as in JAX, the JVP of a parallel prefix scan (`_prefix_scan`: log2(n)
levels of strided slices, one combine per level, pads to interleave) run on
(value, tangent) pairs with each pair combine's own derivative rule. That is exact
everywhere the combine is: cumprod with zeros in the input (no division), cumlogsumexp
over any dynamic range (each combine is a stable logaddexp), cummax/cummin with ties
split as JAX splits them. The tangent map only slices, pads, multiplies by primal values
and adds, so reverse mode transposes it like any other linear jaxpr.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       jvp_rules, shape_error, transpose_rules)
from fnad.primitives import elementwise as ew
from fnad.primitives import logic
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import axis_param_batch_rule
from fnad.primitives._util import FLOAT, INEXACT, INT, NUM, check_kind

__all__ = ["cumlogsumexp", "cummax", "cummin", "cumprod", "cumsum"]


def _axis(name: str, operand, axis) -> int:
    ndim = get_aval(operand).ndim
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise shape_error(name, f"axis {a} is out of bounds for an array of rank {ndim} "
                                f"(shape {get_aval(operand).shape})")
    return a % ndim


def _cumulative_abstract_eval(name: str, kinds: tuple[str, ...]):
    """Rule for a cumulative reduction: same shape and dtype, `axis` in range."""
    def rule(x: ShapedArray, *, axis, reverse) -> ShapedArray:
        check_kind(name, x, kinds)
        if not 0 <= axis < x.ndim:
            raise shape_error(name, f"axis {axis} is out of bounds for an array of rank "
                                    f"{x.ndim} (shape {x.shape})")
        return x
    return rule


# ---- the parallel prefix scan behind the JVPs ---------------------------------------------
def _prefix_scan(combine, elems: list, axis: int, reverse: bool) -> list:
    """Inclusive scan of the arrays `elems` (equal shapes) along `axis` by `combine`.

    `combine(a, b) -> c` maps lists of arrays to a list of arrays and must be associative;
    this is JAX's associative_scan (same tree, so the same tie splits): combine adjacent
    pairs, scan the half-size result recursively, fill in the even positions, interleave.
    """
    if reverse:
        elems = [so.rev(e, (axis,)) for e in elems]

    def sl(e, start, stop, stride=1):
        return so.slice_in_dim(e, start, stop, stride, axis)

    def interleave(a, b):                              # a0 b0 a1 b1 ...; len(a) - len(b) ∈ {0, 1}
        na, nb = get_aval(a).shape[axis], get_aval(b).shape[axis]
        pad_a = [(0, 0, 0)] * get_aval(a).ndim
        pad_b = list(pad_a)
        pad_a[axis] = (0, 1 if na == nb else 0, 1)
        pad_b[axis] = (1, 0 if na == nb else 1, 1)
        zero = np.zeros((), get_aval(a).dtype)
        return ew.add(so.pad(a, zero, pad_a), so.pad(b, zero, pad_b))

    def scan(elems):
        n = get_aval(elems[0]).shape[axis]
        if n < 2:
            return elems
        odd = scan(combine([sl(e, 0, n - 1, 2) for e in elems],
                           [sl(e, 1, n, 2) for e in elems]))
        rest = [sl(e, 2, n, 2) for e in elems]
        if n % 2 == 0:
            even = combine([sl(o, 0, get_aval(o).shape[axis] - 1) for o in odd], rest)
        else:
            even = combine(odd, rest)
        even = [so.concatenate([sl(e, 0, 1), r], axis) for e, r in zip(elems, even)]
        return [interleave(e, o) for e, o in zip(even, odd)]

    out = scan(list(elems))
    return [so.rev(o, (axis,)) for o in out] if reverse else out


def _scan_jvp(prim, pair_jvp, primals, tangents, axis, reverse):
    """(prim(x), the tangent of the prefix scan of (value, tangent) pairs by `pair_jvp`).

    `pair_jvp((a, b), (da, db)) -> (out, d_out)` is a binary JVP rule. The rule runs only
    with a nonzero tangent, and prim has one operand, so x_dot is never a symbolic Zero.
    """
    (x,), (x_dot,) = primals, tangents

    def combine(a, b):
        return list(pair_jvp((a[0], b[0]), (a[1], b[1])))
    _, t_out = _prefix_scan(combine, [x, x_dot], axis, reverse)
    return prim.bind(x, axis=axis, reverse=reverse), t_out


# ---- cumsum ---------------------------------------------------------------------------------
cumsum_p = Primitive("cumsum")
def cumsum(operand, axis: int = 0, reverse: bool = False):
    """Running sum along `axis` (from the end if `reverse`)."""
    return cumsum_p.bind(operand, axis=_axis("cumsum", operand, axis), reverse=bool(reverse))

abstract_eval_rules[cumsum_p] = _cumulative_abstract_eval("cumsum", NUM)
def cumsum_jvp(primals, tangents, *, axis, reverse):   # d cumsum(x) = cumsum(dx)
    return (cumsum_p.bind(primals[0], axis=axis, reverse=reverse),
            cumsum_p.bind(tangents[0], axis=axis, reverse=reverse))
jvp_rules[cumsum_p] = cumsum_jvp
def cumsum_transpose(ct, x, *, axis, reverse):         # x̄_j = Σ_{i≥j} ct_i: the other direction
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]
transpose_rules[cumsum_p] = cumsum_transpose
batch_rules[cumsum_p] = axis_param_batch_rule(cumsum_p, "axis")


# ---- cumprod --------------------------------------------------------------------------------
cumprod_p = Primitive("cumprod")
def cumprod(operand, axis: int = 0, reverse: bool = False):
    """Running product along `axis` (from the end if `reverse`)."""
    return cumprod_p.bind(operand, axis=_axis("cumprod", operand, axis), reverse=bool(reverse))

abstract_eval_rules[cumprod_p] = _cumulative_abstract_eval("cumprod", NUM)
def cumprod_jvp(primals, tangents, *, axis, reverse):  # scan of d(ab) = da·b + a·db
    return _scan_jvp(cumprod_p, jvp_rules[ew.mul_p], primals, tangents, axis, reverse)
jvp_rules[cumprod_p] = cumprod_jvp
batch_rules[cumprod_p] = axis_param_batch_rule(cumprod_p, "axis")


# ---- cummax / cummin ------------------------------------------------------------------------
cummax_p = Primitive("cummax")
def cummax(operand, axis: int = 0, reverse: bool = False):
    """Running maximum along `axis` (from the end if `reverse`); NaN propagates."""
    return cummax_p.bind(operand, axis=_axis("cummax", operand, axis), reverse=bool(reverse))

abstract_eval_rules[cummax_p] = _cumulative_abstract_eval("cummax", (INT, FLOAT))
def cummax_jvp(primals, tangents, *, axis, reverse):   # scan of d max(a, b): the winner's tangent
    return _scan_jvp(cummax_p, jvp_rules[ew.max_p], primals, tangents, axis, reverse)
jvp_rules[cummax_p] = cummax_jvp
batch_rules[cummax_p] = axis_param_batch_rule(cummax_p, "axis")

cummin_p = Primitive("cummin")
def cummin(operand, axis: int = 0, reverse: bool = False):
    """Running minimum along `axis` (from the end if `reverse`); NaN propagates."""
    return cummin_p.bind(operand, axis=_axis("cummin", operand, axis), reverse=bool(reverse))

abstract_eval_rules[cummin_p] = _cumulative_abstract_eval("cummin", (INT, FLOAT))
def cummin_jvp(primals, tangents, *, axis, reverse):   # scan of d min(a, b): the winner's tangent
    return _scan_jvp(cummin_p, jvp_rules[ew.min_p], primals, tangents, axis, reverse)
jvp_rules[cummin_p] = cummin_jvp


# ---- cumlogsumexp ---------------------------------------------------------------------------
def _replace_posinf(x):
    """x with +inf (in the real part) replaced by 0, as JAX's logaddexp JVP does."""
    re = ew.real(x) if get_aval(x).dtype.kind == "c" else x
    return logic.select_n(logic.eq(re, np.inf), x, np.zeros((), get_aval(x).dtype))


def _logaddexp_jvp(primals, tangents):
    """log(eᵃ + eᵇ) = hi + log1p(e^(lo-hi)); d = da·e^(a-out) + db·e^(b-out)."""
    (a, b), (a_dot, b_dot) = primals, tangents
    re_a, re_b = (ew.real(a), ew.real(b)) if get_aval(a).dtype.kind == "c" else (a, b)
    a_hi = logic.ge(re_a, re_b)
    hi, lo = logic.select_n(a_hi, b, a), logic.select_n(a_hi, a, b)
    delta = ew.sub(lo, hi)
    out = logic.select_n(logic.ne(delta, delta), ew.add(hi, ew.log1p(ew.exp(delta))),
                         ew.add(a, b))                 # both ±inf of one sign (or NaN): a + b
    out_ref = _replace_posinf(out)
    return out, ew.add(ew.mul(a_dot, ew.exp(ew.sub(_replace_posinf(a), out_ref))),
                       ew.mul(b_dot, ew.exp(ew.sub(_replace_posinf(b), out_ref))))
batch_rules[cummin_p] = axis_param_batch_rule(cummin_p, "axis")


cumlogsumexp_p = Primitive("cumlogsumexp")
def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """Running log Σ exp along `axis` (from the end if `reverse`), computed stably."""
    return cumlogsumexp_p.bind(operand, axis=_axis("cumlogsumexp", operand, axis),
                               reverse=bool(reverse))

abstract_eval_rules[cumlogsumexp_p] = _cumulative_abstract_eval("cumlogsumexp", INEXACT)
def cumlogsumexp_jvp(primals, tangents, *, axis, reverse):  # scan of the logaddexp JVP
    return _scan_jvp(cumlogsumexp_p, _logaddexp_jvp, primals, tangents, axis, reverse)
jvp_rules[cumlogsumexp_p] = cumlogsumexp_jvp
batch_rules[cumlogsumexp_p] = axis_param_batch_rule(cumlogsumexp_p, "axis")

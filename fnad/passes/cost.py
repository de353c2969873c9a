"""Cost analysis: what a program computes, counted from its jaxpr (no rewrite).

`cost_analysis(closed)` gives the dict that `jit(f).lower(x).compile().cost_analysis()`
returns, with JAX's keys, counted as XLA's HloCostAnalysis counts them:

    flops            2·M·N·K per dot_general (the output's size times its contracted
                     size, times 2); 2·N·O·I per window tap of a convolution that
                     reads an input element (XLA leaves out the pads and the holes of
                     a dilation); one per output element of an elementwise or
                     comparison op (integer_pow(x, y): |y| - 1 multiplies, one more
                     for a negative y); in - out elements for a reduction; one per
                     element for a cumulative op; K - 1 per output element of a
                     windowed reduction of K-element windows (pads and dilation holes
                     included); n·⌈log2 n⌉ per sorted row; n³/3
                     for a Cholesky, 2n³/3 for an LU, n²·m for a triangular solve;
                     8·Π⌊log2 nᵢ⌋ per input element of an FFT over lengths nᵢ (XLA's
                     4 complex multiply-adds per element and level); LAPACK's textbook
                     counts for qr, geqrf, eigh, svd, eig and schur (at their rules; XLA's CPU code
                     calls LAPACK there and counts no flops)
    transcendentals  one per output element of exp, log, tanh, logistic, sqrt, rsqrt,
                     the trigonometric functions, erf, pow ... (not counted in flops);
                     erf_inv, lgamma, digamma and polygamma too, where XLA counts the
                     flops and transcendentals of its polynomial expansion (lgamma: 52
                     and 4 per element; shared terms are counted once after CSE)
    bytes accessed   the bytes each equation reads and writes, summed: the program as
                     if nothing were fused (XLA counts after fusion, so its figure is
                     lower)

Sub-programs count as they run: a jit, custom_jvp/vjp call or checkpoint as its body; a
scan as `length` times its body; a while loop's condition and body once (the trip count
is not known); a cond as its costliest branch. Layout ops (reshape, transpose, slice,
gather ...) and callbacks cost no flops. `cost_rules` holds the rule of each primitive
(eqn -> (flops, transcendentals)); a primitive without one (a user's) counts no flops.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from fnad.core import Primitive
from fnad.ir import ClosedJaxpr, Jaxpr, JaxprEqn
from fnad.passes._util import nbytes
from fnad.primitives import (convolution, cumulative, decompositions, elementwise, linalg, logic,
                             reductions, sorting, windowed)
from fnad.primitives import fft as fft_prims

__all__ = ["cost_analysis", "cost_rules"]

cost_rules: dict[Primitive, Callable[[JaxprEqn], tuple[float, float]]] = {}

_TRANSCENDENTAL = ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sqrt",
                   "rsqrt", "cbrt", "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
                   "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "pow",
                   "lgamma", "digamma", "polygamma")


def _size(aval) -> int:
    return math.prod(aval.shape)


def _out_size(eqn: JaxprEqn) -> int:
    return sum(_size(v.aval) for v in eqn.outvars)


def _in_size(eqn: JaxprEqn) -> int:
    return _size(eqn.invars[0].aval)


def _primitives(module) -> list[Primitive]:
    return [p for p in vars(module).values() if isinstance(p, Primitive)]


def _integer_pow(eqn: JaxprEqn):
    y = eqn.params["y"]
    return max(abs(y) - 1 + (y < 0), 0) * _out_size(eqn), 0      # |y| - 1 products, 1 / x


for _p in _primitives(elementwise) + _primitives(logic):
    if _p.name in _TRANSCENDENTAL:
        cost_rules[_p] = lambda e: (0, _out_size(e))
    elif _p.name == "integer_pow":
        cost_rules[_p] = _integer_pow
    elif _p.name != "stop_gradient":
        cost_rules[_p] = lambda e: (_out_size(e), 0)
for _p in _primitives(reductions):
    cost_rules[_p] = lambda e: (_in_size(e) - _out_size(e), 0)
for _p in _primitives(cumulative):
    cost_rules[_p] = (lambda e: (_in_size(e), _in_size(e))) if _p.name == "cumlogsumexp" \
        else (lambda e: (_in_size(e), 0))


def _dot_general(eqn: JaxprEqn):
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    return 2 * _out_size(eqn) * math.prod(lhs[d] for d in contract), 0


def _window_taps(n: int, k: int, y: int, stride: int, lo: int, ld: int, rd: int) -> int:
    """The (output position, window position) pairs of one spatial dim that read an element
    of the input, not a pad or a dilation hole: what XLA counts."""
    taps = 0
    for i in range(n):                                 # input element i sits at i·ld + lo
        for j in range(k):
            start = i * ld + lo - j * rd               # = out position · stride
            taps += start >= 0 and start % stride == 0 and start // stride < y
    return taps


def _conv_general_dilated(eqn: JaxprEqn):
    lhs, rhs = (v.aval.shape for v in eqn.invars)
    out = eqn.outvars[0].aval.shape
    p = eqn.params
    lspec, rspec, ospec = p["dimension_numbers"]
    taps = math.prod(_window_taps(lhs[ld_], rhs[rd_], out[od], *args)
                     for ld_, rd_, od, *args in zip(
                         lspec[2:], rspec[2:], ospec[2:], p["window_strides"],
                         (lo for lo, _ in p["padding"]), p["lhs_dilation"], p["rhs_dilation"]))
    return 2 * out[ospec[0]] * rhs[rspec[0]] * rhs[rspec[1]] * taps, 0


def _reduce_window(eqn: JaxprEqn):                     # K - 1 combines per window
    return _out_size(eqn) * (math.prod(eqn.params["window_dimensions"]) - 1), 0


def _sorted_rows(axis_param: str):
    def rule(eqn: JaxprEqn):
        shape = eqn.invars[0].aval.shape
        n = shape[eqn.params[axis_param]] if shape else 1
        return (_in_size(eqn) * math.ceil(math.log2(n)) if n > 1 else 0), 0
    return rule


def _cubed(fraction: float):
    def rule(eqn: JaxprEqn):
        shape = eqn.invars[0].aval.shape
        return fraction * math.prod(shape[:-2]) * shape[-1] ** 3, 0
    return rule


def _triangular_solve(eqn: JaxprEqn):
    a, b = (v.aval.shape for v in eqn.invars)
    return math.prod(a[:-2]) * a[-1] ** 2 * b[-1 if eqn.params["left_side"] else -2], 0


def _fft(eqn: JaxprEqn):                               # XLA: 2·4·Π⌊log2 n⌋ per element
    levels = math.prod(max(n, 1).bit_length() - 1 for n in eqn.params["fft_lengths"])
    return 8 * levels * _in_size(eqn), 0


def _householder(m: int, n: int) -> float:          # geqrf of [m, n]: 2mnk - 2k³/3
    k = min(m, n)
    return 2 * m * n * k - 2 * k ** 3 / 3


def _geqrf(eqn: JaxprEqn):
    *batch, m, n = eqn.invars[0].aval.shape
    return math.prod(batch) * _householder(m, n), 0


def _qr(eqn: JaxprEqn):              # geqrf, then orgqr forms Q's kq columns: 4m·kq·k -
    *batch, m, n = eqn.invars[0].aval.shape            # 2(m + kq)k² + 4k³/3 (LAWN 41)
    k, kq = min(m, n), eqn.outvars[0].aval.shape[-1]
    orgqr = 4 * m * kq * k - 2 * (m + kq) * k ** 2 + 4 * k ** 3 / 3
    return math.prod(batch) * (_householder(m, n) + orgqr), 0


def _svd(eqn: JaxprEqn):             # Golub & Van Loan (m >= n): values 4mn² - 4n³/3,
    *batch, m, n = eqn.invars[0].aval.shape            # thin U and V 14mn² + 8n³,
    m, n = max(m, n), min(m, n)                        # full U 4m²n + 8mn² + 9n³
    if not eqn.params["compute_uv"]:
        f = 4 * m * n ** 2 - 4 * n ** 3 / 3
    elif eqn.params["full_matrices"]:
        f = 4 * m ** 2 * n + 8 * m * n ** 2 + 9 * n ** 3
    else:
        f = 14 * m * n ** 2 + 8 * n ** 3
    return math.prod(batch) * f, 0


def _eig(eqn: JaxprEqn):                               # Hessenberg QR: 10n³, 25n³ with
    return _cubed(25 if len(eqn.outvars) > 1 else 10)(eqn)        # eigen- / Schur vectors


cost_rules.update({
    fft_prims.fft_p: _fft,
    linalg.dot_general_p: _dot_general,
    convolution.conv_general_dilated_p: _conv_general_dilated,
    windowed.reduce_window_sum_p: _reduce_window,
    windowed.reduce_window_max_p: _reduce_window,
    windowed.reduce_window_min_p: _reduce_window,
    sorting.sort_p: _sorted_rows("dimension"),
    sorting.top_k_p: _sorted_rows("axis"),
    decompositions.cholesky_p: _cubed(1 / 3),
    decompositions.lu_p: _cubed(2 / 3),
    decompositions.triangular_solve_p: _triangular_solve,
    decompositions.qr_p: _qr,
    decompositions.geqrf_p: _geqrf,
    decompositions.eigh_p: _cubed(9),                 # symmetric QR with vectors: 9n³
    decompositions.svd_p: _svd,
    decompositions.eig_p: _eig,
    decompositions.schur_p: _eig,                     # the same Hessenberg QR iterations
})


def cost_analysis(closed: ClosedJaxpr) -> dict[str, float]:
    """{"flops", "transcendentals", "bytes accessed"} of running `closed` (see above)."""
    flops, trans, nbytes = _jaxpr_cost(closed.jaxpr)
    return {"flops": float(flops), "transcendentals": float(trans),
            "bytes accessed": float(nbytes)}


def _jaxpr_cost(jaxpr: Jaxpr) -> tuple[float, float, float]:
    flops = trans = nbytes = 0.0
    for eqn in jaxpr.eqns:
        f, t, b = _eqn_cost(eqn)
        flops, trans, nbytes = flops + f, trans + t, nbytes + b
    return flops, trans, nbytes


def _eqn_cost(eqn: JaxprEqn) -> tuple[float, float, float]:
    name, params = eqn.primitive.name, eqn.params
    if name == "scan":
        f, t, b = _jaxpr_cost(params["jaxpr"].jaxpr)
        n = params["length"]
        return n * f, n * t, n * b
    if name == "while":
        costs = [_jaxpr_cost(params[k].jaxpr) for k in ("cond_jaxpr", "body_jaxpr")]
        return tuple(sum(c[i] for c in costs) for i in range(3))
    if name == "cond":
        return max((_jaxpr_cost(br.jaxpr) for br in params["branches"]),
                   key=lambda c: (c[0] + c[1], c[2]))
    for key in ("jaxpr", "call_jaxpr"):          # jit, checkpoint, custom_jvp/vjp calls
        sub = params.get(key)
        if isinstance(sub, ClosedJaxpr):
            return _jaxpr_cost(sub.jaxpr)
    rule = cost_rules.get(eqn.primitive)
    f, t = rule(eqn) if rule is not None else (0, 0)
    b = sum(nbytes(v.aval) for v in eqn.invars) + sum(nbytes(v.aval) for v in eqn.outvars)
    return f, t, b

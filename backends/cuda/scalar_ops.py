"""Scalar code for the cuda backend's kernels: the numba backend's emitters, CUDA-safe.

Owns `emit_rules` (primitive -> numba_cpu.scalar_ops.Rule) and `fusable(eqn)`. The table
starts as a copy of the CPU code generator's (backends/numba_cpu/scalar_ops.py: typed
constants, integer casts, NaN-propagating max/min, lax's integer division, select_n,
conversions, reductions' identities and steps), whose expressions are plain Python
arithmetic that numba compiles for a GPU too. The rules below replace the ones whose
expressions call a NumPy function (`np.sqrt`, `np.floor`, `np.abs`, `np.rint`, ...: numba's
CUDA target types no such ufuncs) or fnad's CPU polynomials (mathfns: LLVM intrinsics made
for the CPU), with `math.*` (libdevice on the GPU) and the builtin `abs`; and they add the
functions the CPU backend leaves to NumPy (sin, cos, tan, their inverses, the hyperbolic
ones, atan2, pow), which on a GPU are better done in a kernel than on the host.

The runtime helpers these expressions name (idiv, irem, fmaximum, fminimum, radd, rmaximum,
rminimum) are CUDA device functions in runtime.py.
"""
from __future__ import annotations

import numpy as np

from fnad.backends.numba_cpu import plan as pl
from fnad.backends.numba_cpu import scalar_ops as cpu
from fnad.backends.numba_cpu.scalar_ops import Rule, const, kind, np_name
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg

SUPPORTED = cpu.SUPPORTED                  # bool, (u)int8..64, float32, float64
BIG_INTEGRAL = {np.dtype(np.float32): 2.0 ** 23, np.dtype(np.float64): 2.0 ** 52}


def _cast(dt, expr: str) -> str:
    return f"{np_name(dt)}({expr})"


def _math(fn: str):
    """A libdevice function through `math` (float32 in, float32 out on the GPU)."""
    return Rule("f", lambda E, xs, eqn: _cast(E.out_dtype(eqn), f"math.{fn}({', '.join(xs)})"))


def _exp2(E, xs, eqn):
    dt = E.out_dtype(eqn)
    return _cast(dt, f"math.pow({const(2, dt)}, {xs[0]})")


def _logistic(E, xs, eqn):                     # 1 / (1 + e^-x): 0 and 1 at the ends, no NaN
    dt = E.out_dtype(eqn)
    one = const(1, dt)
    e = E.tmp(_cast(dt, f"math.exp(-{xs[0]})"))
    return f"({one} / ({one} + {e}))"


def _rsqrt(E, xs, eqn):
    dt = E.out_dtype(eqn)
    return _cast(dt, f"({const(1, dt)} / math.sqrt({xs[0]}))")


def _abs(E, xs, eqn):
    return _cast(E.out_dtype(eqn), f"abs({xs[0]})")


def _rem(E, xs, eqn):
    if E.out_kind(eqn) == "f":
        return _cast(E.out_dtype(eqn), f"math.fmod({xs[0]}, {xs[1]})")
    return cpu.emit_rules[ew.rem_p].emit(E, xs, eqn)


def _round(E, xs, eqn):
    x, dt = xs[0], E.out_dtype(eqn)
    if eqn.params["rounding_method"] == ew.TO_NEAREST_EVEN:
        # |x| < 2^23 (f32): (|x| + 2^23) - 2^23 rounds to an integer, ties to even, in IEEE
        # arithmetic (kernels have no fast-math flags); larger |x|, inf and NaN stay as they
        # are. copysign keeps the sign of -0.4 -> -0.
        big = const(BIG_INTEGRAL[dt], dt)
        a = E.tmp(f"abs({x})")
        r = E.tmp(f"(({a} + {big}) - {big})")
        return f"({_cast(dt, f'math.copysign({r}, {x})')} if {a} < {big} else {x})"
    t = E.tmp(_cast(dt, f"math.trunc({x})"))           # halfway cases away from zero
    one, half = const(1, dt), const(0.5, dt)
    step = _cast(dt, f"math.copysign({one}, {x})")
    return f"({t} + {step} if abs({x} - {t}) >= {half} else {t})"


def _integer_pow(E, xs, eqn):
    y, dt = eqn.params["y"], E.out_dtype(eqn)
    if dt.kind == "f" and abs(y) > 8:
        return _cast(dt, f"math.pow({xs[0]}, {const(y, dt)})")
    return cpu.emit_rules[ew.integer_pow_p].emit(E, xs, eqn)


emit_rules: dict = dict(cpu.emit_rules)
emit_rules[ew.abs_p] = Rule("iuf", _abs)
emit_rules[ew.rem_p] = Rule("iuf", _rem)
emit_rules[ew.integer_pow_p] = Rule("iuf", _integer_pow)
emit_rules[ew.floor_p] = _math("floor")
emit_rules[ew.ceil_p] = _math("ceil")
emit_rules[ew.round_p] = Rule("f", _round)
emit_rules[ew.sqrt_p] = _math("sqrt")
emit_rules[ew.rsqrt_p] = Rule("f", _rsqrt)
emit_rules[ew.exp_p] = _math("exp")
emit_rules[ew.exp2_p] = Rule("f", _exp2)
emit_rules[ew.log_p] = _math("log")
emit_rules[ew.log1p_p] = _math("log1p")
emit_rules[ew.expm1_p] = _math("expm1")
emit_rules[ew.tanh_p] = _math("tanh")
emit_rules[ew.logistic_p] = Rule("f", _logistic)
emit_rules[ew.erf_p] = _math("erf")
emit_rules[ew.erfc_p] = _math("erfc")
emit_rules[ew.pow_p] = _math("pow")
emit_rules[ew.sin_p] = _math("sin")
emit_rules[ew.cos_p] = _math("cos")
emit_rules[ew.tan_p] = _math("tan")
emit_rules[ew.asin_p] = _math("asin")
emit_rules[ew.acos_p] = _math("acos")
emit_rules[ew.atan_p] = _math("atan")
emit_rules[ew.atan2_p] = _math("atan2")
emit_rules[ew.sinh_p] = _math("sinh")
emit_rules[ew.cosh_p] = _math("cosh")
emit_rules[ew.asinh_p] = _math("asinh")
emit_rules[ew.acosh_p] = _math("acosh")
emit_rules[ew.atanh_p] = _math("atanh")
emit_rules[lg.is_finite_p] = Rule("f", lambda E, xs, eqn: f"math.isfinite({xs[0]})")
# Not in a kernel (host NumPy, see eager.py): cbrt, erf_inv, the shifts, population_count,
# the complex primitives, and every primitive on float16/bfloat16/complex values.

RED_KINDS = cpu._RED_KINDS


def fusable(eqn) -> bool:
    """Can this equation be computed in a generated CUDA kernel (alone or fused)?"""
    avals = [x.aval for x in eqn.invars] + [v.aval for v in eqn.outvars]
    if any(a.dtype not in SUPPORTED or a.size == 0 for a in avals):
        return False                       # empty values: nothing to launch
    p = eqn.primitive
    if p in pl.REDUCTIONS:
        return kind(eqn.invars[0].aval.dtype) in RED_KINDS[p]
    rule = emit_rules.get(p)
    if rule is None:
        return False
    ref = eqn.invars[-1] if p is lg.select_n_p else eqn.invars[0]
    return kind(ref.aval.dtype) in rule.kinds

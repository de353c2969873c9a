"""Scalar code for the numba backend's kernels: primitive -> typed expression.

Owns `emit_rules` (one rule per elementwise primitive: the dtype kinds it handles and a
function (emitter, operand names, eqn) -> expression), the reductions' identities and
accumulation steps, `fusable(eqn)` (can the equation be a member of a fusion group) and the
typed constants (`const`). kernels.py builds the loop nests around them.

Types follow the jaxpr exactly: every constant is typed (`np.float32(0.5)`: an untyped
`0.5` would make float32 code float64), integer results are cast back to their dtype (numba
widens int32 arithmetic to int64), NaN propagates (fmaximum/fminimum, conversions), and
integer division rounds toward zero with x / 0 = 0 (runtime.idiv), as the NumPy reference.
"""
from __future__ import annotations

import math

import numpy as np

from fnad.backends.numba_cpu import plan as pl
from fnad.primitives import elementwise as ew
from fnad.primitives import logic as lg
from fnad.primitives import reductions as red

# mathfns.py's functions by name and dtype: the names generated kernels import. Here, not in
# mathfns (which defines them with numba), so that planning and writing a kernel does not
# import numba: fnad's own LLVM translator compiles them (llvm_kernels.py). mathfns.FUNCS is
# built from this table.
MATHFNS = {name: {np.float32: f"{name}_f32", np.float64: f"{name}_f64"}
           for name in ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "erf",
                        "erfc")}
# Which entries vectorize inside a loop (the others are scalar libm calls).
VECTORIZES = {(name, dt) for name, by_dt in MATHFNS.items() for dt in by_dt} - {
    ("erf", np.float64), ("erfc", np.float64)}


def func_name(name: str, dtype) -> str:
    """Importable name of mathfns.FUNCS[name][dtype], e.g. ("exp", float32) -> "exp_f32"."""
    dt = np.dtype(dtype).type
    if name not in MATHFNS or dt not in MATHFNS[name]:
        have = ", ".join(f"{n}[{'/'.join(np.dtype(d).name for d in MATHFNS[n])}]"
                         for n in MATHFNS)
        raise KeyError(f"numba mathfns has no {name!r} for dtype {np.dtype(dtype).name}; "
                       f"available: {have}")
    return MATHFNS[name][dt]


SUPPORTED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))
_DTYPE_TYPES = frozenset(type(np.dtype(t)) for t in np.sctypeDict.values())


_np_names: dict = {}                    # dtype -> its name in generated code (dtype.name is slow)


def np_name(dtype) -> str:
    name = _np_names.get(dtype) if type(dtype) in _DTYPE_TYPES else None
    if name is None:
        dt = np.dtype(dtype)
        name = "np.bool_" if dt == np.bool_ else f"np.{dt.name}"
        if type(dtype) in _DTYPE_TYPES:
            _np_names[dtype] = name
    return name


def const(val, dtype) -> str:
    """A typed scalar constant in generated code."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return "True" if bool(val) else "False"
    if dt.kind in "iu":
        return f"{np_name(dt)}({int(val)})"
    v = float(val)
    if math.isnan(v):
        r = "np.nan"
    elif math.isinf(v):
        r = "np.inf" if v > 0 else "-np.inf"
    else:
        r = repr(v)
    return f"{np_name(dt)}({r})"


def _cast(dt, expr: str) -> str:
    return f"{np_name(dt)}({expr})"


# ---- scalar emitters ---------------------------------------------------------------------------
class Rule:
    """kinds: dtype kinds ('b', 'i', 'u', 'f') of the operands the rule emits code for;
    dtypes: None, or a predicate on the output dtype saying where the rule applies."""

    __slots__ = ("kinds", "emit", "dtypes")

    def __init__(self, kinds: str, emit, dtypes=None):
        self.kinds, self.emit, self.dtypes = kinds, emit, dtypes


def _arith(op: str):
    def emit(E, xs, eqn):
        expr = f"({xs[0]} {op} {xs[1]})"
        return expr if E.out_kind(eqn) == "f" else _cast(E.out_dtype(eqn), expr)
    return Rule("iuf", emit)


def _unary_np(fn: str, kinds="f"):
    return Rule(kinds, lambda E, xs, eqn: _cast(E.out_dtype(eqn), f"{fn}({xs[0]})"))


def _mathfn(name: str):
    """A mathfns polynomial, for the dtypes where it has one that vectorizes (VECTORIZES);
    elsewhere the primitive is not fused (NumPy's implementation, in the driver)."""
    def emit(E, xs, eqn):
        fn = func_name(name, E.out_dtype(eqn))
        E.imports.add(fn)
        return f"{fn}({xs[0]})"
    return Rule("f", emit, dtypes=lambda dt: (name, dt.type) in VECTORIZES)


def _cmp(op: str):
    return Rule("biuf", lambda E, xs, eqn: f"({xs[0]} {op} {xs[1]})")


def _maxmin(op: str):
    def emit(E, xs, eqn):
        a, b = xs
        if E.out_kind(eqn) == "f":                     # NaN in either operand wins
            fn = "fmaximum" if op == ">" else "fminimum"
            E.runtime.add(fn)
            return f"{fn}({a}, {b})"
        return f"({a} if {a} {op} {b} else {b})"
    return Rule("biuf", emit)


def _bitwise(op: str):
    def emit(E, xs, eqn):
        expr = f"({xs[0]} {op} {xs[1]})"
        return expr if E.out_kind(eqn) == "b" else _cast(E.out_dtype(eqn), expr)
    return Rule("biu", emit)


def _div(E, xs, eqn):
    if E.out_kind(eqn) == "f":
        return f"({xs[0]} / {xs[1]})"
    fn = "udiv" if E.out_kind(eqn) == "u" else "idiv"
    E.runtime.add(fn)
    return _cast(E.out_dtype(eqn), f"{fn}({xs[0]}, {xs[1]})")


def _rem(E, xs, eqn):
    if E.out_kind(eqn) == "f":
        return _cast(E.out_dtype(eqn), f"np.fmod({xs[0]}, {xs[1]})")
    fn = "urem" if E.out_kind(eqn) == "u" else "irem"
    E.runtime.add(fn)
    return _cast(E.out_dtype(eqn), f"{fn}({xs[0]}, {xs[1]})")


def _neg(E, xs, eqn):
    return f"(-{xs[0]})" if E.out_kind(eqn) == "f" else _cast(E.out_dtype(eqn), f"(-{xs[0]})")


def _integer_pow(E, xs, eqn):
    y, x, dt = eqn.params["y"], xs[0], E.out_dtype(eqn)
    if y == 0:
        return const(1, dt)
    if dt.kind in "iu" and y > 8:                      # by squaring: wraps as NumPy's power
        acc, sq, n = None, x, y
        while n:
            if n & 1:
                acc = sq if acc is None else E.tmp(_cast(dt, f"({acc} * {sq})"))
            n >>= 1
            if n:
                sq = E.tmp(_cast(dt, f"({sq} * {sq})"))
        return acc
    if abs(y) > 8:
        return _cast(dt, f"np.power({x}, {const(y, dt)})")
    p = x
    for _ in range(abs(y) - 1):                        # x*x*...*x, one temp per step
        p = E.tmp(f"({p} * {x})" if dt.kind == "f" else _cast(dt, f"({p} * {x})"))
    return f"({const(1, dt)} / {p})" if y < 0 else p


def _sign(E, xs, eqn):
    """np.sign: 1, -1 or 0 (+0 for -0 as well); NaN stays NaN; 0 or 1 for unsigned."""
    x, dt = xs[0], E.out_dtype(eqn)
    one, zero = const(1, dt), const(0, dt)
    if dt.kind == "u":
        return f"({one} if {x} != {zero} else {zero})"
    rest = f"({zero} if {x} == {zero} else {x})" if dt.kind == "f" else zero
    return f"({one} if {x} > {zero} else ({const(-1, dt)} if {x} < {zero} else {rest}))"


def _square(E, xs, eqn):
    expr = f"({xs[0]} * {xs[0]})"
    return expr if E.out_kind(eqn) == "f" else _cast(E.out_dtype(eqn), expr)


def _abs(E, xs, eqn):
    return _cast(E.out_dtype(eqn), f"np.abs({xs[0]})")


def _round(E, xs, eqn):
    x, dt = xs[0], E.out_dtype(eqn)
    if eqn.params["rounding_method"] == ew.TO_NEAREST_EVEN:
        return _cast(dt, f"np.rint({x})")
    t = E.tmp(_cast(dt, f"np.trunc({x})"))             # halfway cases away from zero
    return _cast(dt, f"({t} + np.sign({x}) if np.abs({x} - {t}) >= {const(0.5, dt)} else {t})")


def _rsqrt(E, xs, eqn):
    dt = E.out_dtype(eqn)
    return _cast(dt, f"({const(1, dt)} / np.sqrt({xs[0]}))")


def _not(E, xs, eqn):
    if E.out_kind(eqn) == "b":
        return f"(not {xs[0]})"
    return _cast(E.out_dtype(eqn), f"(~{xs[0]})")


def _select_n(E, xs, eqn):
    which, cases = xs[0], xs[1:]
    if len(cases) == 1:
        return cases[0]
    if eqn.invars[0].aval.dtype == np.bool_:
        return f"({cases[1]} if {which} else {cases[0]})"
    expr = cases[-1]                     # out of range: the first case below 0, else the last
    for k in range(len(cases) - 2, -1, -1):
        expr = f"({cases[k]} if {which} {'<=' if k == 0 else '=='} {k} else {expr})"
    return expr


def _clamp(E, xs, eqn):
    lo, x, hi = xs
    mx = _maxmin(">").emit(E, [x, lo], eqn)
    m = E.tmp(mx)
    return _maxmin("<").emit(E, [m, hi], eqn)


def _convert(E, xs, eqn):
    x = xs[0]
    src, dst = eqn.invars[0].aval.dtype, E.out_dtype(eqn)
    if dst == np.bool_:
        return f"({x} != {const(0, src)})"
    if src.kind == "f" and dst.kind in "iu":            # saturate, NaN -> 0 (as XLA)
        info = np.iinfo(dst)
        return (f"({const(0, dst)} if {x} != {x} else ({const(info.max, dst)} "
                f"if {x} >= {float(info.max)!r} else ({const(info.min, dst)} "
                f"if {x} <= {float(info.min)!r} else {_cast(dst, x)})))")
    return _cast(dst, x)


emit_rules: dict = {}
emit_rules[ew.add_p] = _arith("+")
emit_rules[ew.add_any_p] = _arith("+")
emit_rules[ew.sub_p] = _arith("-")
emit_rules[ew.mul_p] = _arith("*")
emit_rules[ew.div_p] = Rule("iuf", _div)
emit_rules[ew.rem_p] = Rule("iuf", _rem)
emit_rules[ew.neg_p] = Rule("iuf", _neg)
emit_rules[ew.integer_pow_p] = Rule("iuf", _integer_pow)
emit_rules[ew.square_p] = Rule("iuf", _square)
emit_rules[ew.max_p] = _maxmin(">")
emit_rules[ew.min_p] = _maxmin("<")
emit_rules[ew.abs_p] = Rule("iuf", _abs)
emit_rules[ew.sign_p] = Rule("iuf", _sign)
emit_rules[ew.floor_p] = _unary_np("np.floor")
emit_rules[ew.ceil_p] = _unary_np("np.ceil")
emit_rules[ew.round_p] = Rule("f", _round)
emit_rules[ew.exp_p] = _mathfn("exp")
emit_rules[ew.exp2_p] = _mathfn("exp2")
emit_rules[ew.log_p] = _mathfn("log")
emit_rules[ew.log1p_p] = _mathfn("log1p")
emit_rules[ew.expm1_p] = _mathfn("expm1")
emit_rules[ew.tanh_p] = _mathfn("tanh")
emit_rules[ew.logistic_p] = _mathfn("logistic")
emit_rules[ew.erf_p] = _mathfn("erf")
emit_rules[ew.erfc_p] = _mathfn("erfc")
emit_rules[ew.sqrt_p] = _unary_np("np.sqrt")
emit_rules[ew.rsqrt_p] = Rule("f", _rsqrt)
# Not fused: pow, atan2, cbrt, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh,
# atanh (and erf/erfc where mathfns has no vectorizing version). Inside a numba loop they
# are scalar libm calls, slower than NumPy's SIMD loops and a few ulp away from them; in
# the driver they are NumPy's own, so jit gives the eager result bit for bit. Nor are
# erf_inv, lgamma, digamma and polygamma: numba has no function for them (SciPy computes).
emit_rules[lg.eq_p] = _cmp("==")
emit_rules[lg.ne_p] = _cmp("!=")
emit_rules[lg.lt_p] = _cmp("<")
emit_rules[lg.le_p] = _cmp("<=")
emit_rules[lg.gt_p] = _cmp(">")
emit_rules[lg.ge_p] = _cmp(">=")
emit_rules[lg.is_finite_p] = Rule("f", lambda E, xs, eqn: f"np.isfinite({xs[0]})")
emit_rules[lg.and_p] = _bitwise("&")
emit_rules[lg.or_p] = _bitwise("|")
emit_rules[lg.xor_p] = _bitwise("^")
emit_rules[lg.not_p] = Rule("biu", _not)
emit_rules[lg.select_n_p] = Rule("biuf", _select_n)
emit_rules[lg.clamp_p] = Rule("iuf", _clamp)
emit_rules[lg.convert_element_type_p] = Rule("biuf", _convert)
emit_rules[lg.stop_gradient_p] = Rule("biuf", lambda E, xs, eqn: xs[0])


# ---- reductions: (identity, combine) per primitive --------------------------------------------
def red_identity(prim, dt):
    if prim is red.reduce_sum_p or prim is red.reduce_or_p:
        return 0
    if prim is red.reduce_prod_p:
        return 1
    if prim is red.reduce_and_p:
        return True if dt == np.bool_ else (-1 if dt.kind == "i" else np.iinfo(dt).max)
    big = prim is red.reduce_min_p
    if dt == np.bool_:
        return big
    if dt.kind in "iu":
        return np.iinfo(dt).max if big else np.iinfo(dt).min
    return math.inf if big else -math.inf


_RED_KINDS = {red.reduce_sum_p: "iuf", red.reduce_prod_p: "iuf", red.reduce_max_p: "biuf",
              red.reduce_min_p: "biuf", red.reduce_and_p: "biu", red.reduce_or_p: "biu"}


_kinds: dict = {}                       # dtype -> kind


def kind(dt) -> str:
    k = _kinds.get(dt) if type(dt) in _DTYPE_TYPES else None
    if k is None:
        k = "b" if dt == np.bool_ else dt.kind
        if type(dt) in _DTYPE_TYPES:
            _kinds[dt] = k
    return k


def fusable(eqn) -> bool:
    """Can this equation be a member of a numba fusion group?"""
    for x in eqn.invars:
        if x.aval.dtype not in SUPPORTED:
            return False
    for v in eqn.outvars:
        if v.aval.dtype not in SUPPORTED:
            return False
    p = eqn.primitive
    if p in pl.REDUCTIONS:
        return kind(eqn.invars[0].aval.dtype) in _RED_KINDS[p]
    rule = emit_rules.get(p)
    if rule is None or (rule.dtypes is not None and not rule.dtypes(eqn.outvars[0].aval.dtype)):
        return False
    ref = eqn.invars[-1] if p is lg.select_n_p else eqn.invars[0]
    return kind(ref.aval.dtype) in rule.kinds


def combine(E, prim, acc, x, dt):
    """One step of a reduction: acc <- acc (op) x."""
    k = kind(dt)
    if prim is red.reduce_sum_p and k == "f":       # reassociable: vectorizes
        E.runtime.add("radd")
        E.line(f"{acc} = radd({acc}, {x})")
    elif prim is red.reduce_sum_p or prim is red.reduce_prod_p:
        op = "+" if prim is red.reduce_sum_p else "*"      # a product in order, as NumPy's
        E.line(f"{acc} = {acc} {op} {x}" if k == "f" else f"{acc} = {_cast(dt, f'{acc} {op} {x}')}")
    elif prim is red.reduce_max_p or prim is red.reduce_min_p:
        op = ">" if prim is red.reduce_max_p else "<"
        if k == "b":
            E.line(f"{acc} = {acc} | {x}" if op == ">" else f"{acc} = {acc} & {x}")
        elif k == "f":                              # NaN-propagating, vectorizes
            fn = "rmaximum" if op == ">" else "rminimum"
            E.runtime.add(fn)
            E.line(f"{acc} = {fn}({acc}, {x})")
        else:
            E.line(f"{acc} = {x} if {x} {op} {acc} else {acc}")
    elif prim is red.reduce_and_p or prim is red.reduce_or_p:
        op = "&" if prim is red.reduce_and_p else "|"
        expr = f"{acc} {op} {x}"
        E.line(f"{acc} = {expr}" if k == "b" else f"{acc} = {_cast(dt, expr)}")

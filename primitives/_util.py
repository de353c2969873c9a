"""Pieces shared by the primitive families: dtype-kind checks, standard shape
rules, symbolic-zero tangent sums and scalar operands.

Imports only fnad.core and fnad.dtypes (families import this, never the reverse).
"""
from __future__ import annotations

import numpy as np

from fnad import core, dtypes
from fnad.core import Array, ShapedArray, Zero, shape_error

# ---- dtype kinds ----------------------------------------------------------------------
BOOL, INT, FLOAT, COMPLEX = "bool", "integer", "floating", "complexfloating"
NUM = (INT, FLOAT, COMPLEX)
ANY = (BOOL, INT, FLOAT, COMPLEX)
INEXACT = (FLOAT, COMPLEX)
ORDERED = (BOOL, INT, FLOAT)


def dtype_kind(dt) -> str:
    if dtypes.is_bool(dt):
        return BOOL
    if dtypes.is_int(dt):
        return INT
    if dtypes.is_complex(dt):
        return COMPLEX
    if dtypes.is_float(dt):
        return FLOAT
    return "other"


def check_kind(name: str, aval: ShapedArray, kinds: tuple[str, ...], what: str = "") -> None:
    if dtype_kind(aval.dtype) not in kinds:
        raise shape_error(name, f"does not accept dtype {aval.dtype.name}{what}. Accepted "
                                f"dtypes are subtypes of {', '.join(kinds)}")


# ---- standard shape rules --------------------------------------------------------------
def unop_abstract_eval(name: str, kinds: tuple[str, ...], result_dtype=None):
    """Rule for f(x) -> same shape; dtype kept unless `result_dtype` is given."""
    def rule(x: ShapedArray, **params) -> ShapedArray:
        check_kind(name, x, kinds)
        if result_dtype is None:
            return ShapedArray(x.shape, x.dtype, x.weak_type)
        return ShapedArray(x.shape, result_dtype, False)
    return rule


def broadcast_shapes(name: str, *avals: ShapedArray) -> tuple[int, ...]:
    """Operands of n-ary elementwise primitives have equal shapes, or are scalars."""
    shape = ()
    for a in avals:
        if not a.shape:
            continue
        if not shape:
            shape = a.shape
        elif a.shape != shape:
            shapes = ", ".join(str(b.shape) for b in avals)
            raise shape_error(name, f"incompatible shapes {shapes}: operands of elementwise "
                                    "primitives must have equal shapes or be scalars")
    return shape


def naryop_abstract_eval(name: str, kinds: tuple[str, ...], result_dtype=None):
    """Rule for f(x, y, ...) on equal dtypes and equal shapes (scalars broadcast)."""
    def rule(*args: ShapedArray, **params) -> ShapedArray:
        for a in args:
            check_kind(name, a, kinds)
        if any(a.dtype != args[0].dtype for a in args):
            raise shape_error(name, "requires arguments to have the same dtypes, got "
                                    + ", ".join(a.dtype.name for a in args))
        shape = broadcast_shapes(name, *args)
        if result_dtype is not None:
            return ShapedArray(shape, result_dtype, False)
        return ShapedArray(shape, args[0].dtype, all(a.weak_type for a in args))
    return rule


# ---- tangents -------------------------------------------------------------------------
def add_tangents(*terms):
    """Sum of tangent terms, skipping symbolic zeros (Zero or None); None if all zero."""
    from fnad.primitives.elementwise import add_any
    out = None
    for t in terms:
        if t is None or type(t) is Zero:
            continue
        out = t if out is None else add_any(out, t)
    return out


def no_tangent_jvp(prim):
    """JVP rule for primitives whose output is piecewise constant (or not a float)."""
    def rule(primals, tangents, **params):
        return prim.bind(*primals, **params), None
    return rule


# ---- scalar operands ---------------------------------------------------------------------
_scalar_types = (bool, int, float, complex)


def scalar_like(value, dtype) -> object:
    """A weakly typed scalar of `dtype` for a Python number, to combine with arrays.

    A Python scalar whose own (weak) type is already `dtype` is returned as is, so
    it stays a literal in jaxprs; otherwise a weak 0-d Array of `dtype`.
    """
    dtype = np.dtype(dtype)
    if core.get_aval(value).dtype == dtype:
        return value
    from fnad.backends import get_backend
    return Array(np.asarray(value, dtype), ShapedArray((), dtype, True), get_backend("numpy"))


def promote_scalars(*args):
    """Give Python scalars among `args` the dtype of the first array operand."""
    ref = next((a for a in args if type(a) not in _scalar_types), None)
    if ref is None:
        return args
    dt = core.get_aval(ref).dtype
    return tuple(scalar_like(a, dt) if type(a) in _scalar_types else a for a in args)

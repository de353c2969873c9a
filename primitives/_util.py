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


_kinds: dict = {}


def dtype_kind(dt) -> str:
    kind = _kinds.get(dt)
    if kind is None:
        if dtypes.is_bool(dt):
            kind = BOOL
        elif dtypes.is_int(dt):
            kind = INT
        elif dtypes.is_complex(dt):
            kind = COMPLEX
        elif dtypes.is_float(dt):
            kind = FLOAT
        else:
            kind = "other"
        _kinds[dt] = kind
    return kind


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
            return x                                   # avals are immutable: share it
        return ShapedArray(x.shape, result_dtype, x.weak_type)     # weak stays weak, as jax's
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
        first = args[0]
        dt, shape, weak = first.dtype, first.shape, first.weak_type
        for a in args[1:]:                             # a plain loop: this runs on every op
            if a.dtype is not dt and a.dtype != dt:
                raise shape_error(name, "requires arguments to have the same dtypes, got "
                                        + ", ".join(b.dtype.name for b in args))
            if a.shape != shape:
                if not shape:
                    shape = a.shape
                elif a.shape:
                    broadcast_shapes(name, *args)      # raises, naming every shape
            weak = weak and a.weak_type
        check_kind(name, first, kinds)
        if result_dtype is not None:                   # weak stays weak, as jax's
            return ShapedArray(shape, result_dtype, weak)
        if shape is first.shape and weak == first.weak_type:
            return first
        return ShapedArray(shape, dt, weak)
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
_scalar_types = frozenset((bool, int, float, complex))


def scalar_like(value, dtype) -> object:
    """A weakly typed scalar of `dtype` for a Python number, to combine with arrays.

    A Python scalar whose own (weak) type is already `dtype` is returned as is, so
    it stays a literal in jaxprs; otherwise a weak 0-d Array of `dtype`.
    """
    dtype = np.dtype(dtype)
    if core._python_scalar_aval(value).dtype is dtype:
        return value
    backend = core.default_backend()                   # where eager constants are made
    return Array(backend.device_put(np.asarray(value, dtype)), ShapedArray((), dtype, True),
                 backend)


def promote_scalars(*args):
    """Give Python scalars among `args` the dtype of the first array operand."""
    ref = None
    for a in args:
        if type(a) not in _scalar_types:
            ref = a
            break
    else:                                              # all Python scalars: their common type
        if len({type(a) for a in args}) <= 1:
            return args
        dt = dtypes.result_type(*args)
        return tuple(scalar_like(a, dt) for a in args)
    if len(args) == 2 and type(args[0]) not in _scalar_types and \
            type(args[1]) not in _scalar_types:
        return args                                    # the common case: two arrays
    dt = core.get_aval(ref).dtype
    return tuple(scalar_like(a, dt) if type(a) in _scalar_types else a for a in args)

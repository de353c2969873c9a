"""fnad's dtypes: names, canonicalization for x64 mode, weak types and JAX's promotion lattice.

Owns everything about *which* dtype a value has or an operation produces, with JAX's
semantics: float32 is the default, 64-bit types exist only with ``jax_enable_x64``, and Python
scalars are weakly typed (``x_f16 * 2.0`` stays float16). May import only numpy, ml_dtypes
(for bfloat16; ~6 ms on top of numpy, so imported eagerly) and ``fnad.config``.

Promotion follows JAX's lattice (see JAX's "Type promotion semantics"), not NumPy's rules:

    b1 -> i* -> u8 -> u16 -> u32 -> u64 -> f*
          i* -> i8 -> i16 -> i32 -> i64 -> f*
          u8 -> i16,  u16 -> i32,  u32 -> i64   (u32 -> i32 when x64 is off)
    f* -> bf16 -> f32,  f* -> f16 -> f32,  f32 -> f64 -> c128
    f* -> c* -> c64 -> c128,  f32 -> c64
    i* -> i4, u4, i2, u2, i1, u1      f* -> each float8 / float6 / float4 type

The narrow types of ml_dtypes (float8_e4m3fn ... float4_e2m1fn, int4 ... uint1) are dead
ends, as in JAX: they promote with bool, the weak types and (the floats) any integer, but
with no other type of their size or wider: float8_e4m3fn + float16 is an error, not float16.

``i* f* c*`` are the weak types of Python int/float/complex. The result of promoting a set of
types is their least upper bound on this graph, precomputed for every pair at import.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from fnad.config import config

__all__ = [
    "TypePromotionError", "bfloat16", "bool_", "canonicalize_dtype", "complex64", "complex128",
    "complexfloating", "default_complex_dtype", "default_float_dtype", "default_int_dtype",
    "dtype", "finfo", "float0", "float16", "float32", "float64", "floating", "generic", "iinfo",
    "inexact", "int8", "int16", "int32", "int64", "integer", "is_bool", "is_complex",
    "is_float", "is_inexact", "is_int", "is_weakly_typed", "issubdtype", "itemsize_bits",
    "extended", "number", "prng_key", "scalar_type_of", *(
        "float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e4m3b11fnuz "
        "float8_e3m4 float8_e4m3 float8_e8m0fnu float6_e2m3fn float6_e3m2fn float4_e2m1fn "
        "int4 uint4 int2 uint2 int1 uint1").split(),
    "promote_types", "result_type", "short_name", "signedinteger", "to_inexact_dtype", "uint8",
    "uint16", "uint32", "uint64", "unsignedinteger",
]

# ---- names ---------------------------------------------------------------------------------
bool_ = np.bool_
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
bfloat16 = ml_dtypes.bfloat16
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
# ml_dtypes' narrow types (jax.numpy exports the same): computed by upcasting, element by
# element, and rounding back, on every backend
float8_e4m3fn, float8_e5m2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
float8_e4m3fnuz, float8_e5m2fnuz = ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz
float8_e4m3b11fnuz, float8_e3m4 = ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e3m4
float8_e4m3, float8_e8m0fnu = ml_dtypes.float8_e4m3, ml_dtypes.float8_e8m0fnu
float6_e2m3fn, float6_e3m2fn = ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn
float4_e2m1fn = ml_dtypes.float4_e2m1fn
int4, uint4, int2, uint2 = ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2
int1, uint1 = ml_dtypes.int1, ml_dtypes.uint1

# The tangent dtype of int and bool values: a zero-size struct, so a tangent of an integer
# array carries shape but no data and cannot be mixed into arithmetic by accident.
float0 = np.dtype([("float0", np.void, 0)])

generic, number, inexact = np.generic, np.number, np.inexact
floating, complexfloating = np.floating, np.complexfloating
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger


class TypePromotionError(ValueError):
    """Raised when dtypes have no promotion (e.g. float0 with a number), as in JAX."""


_B1, _U8, _U16, _U32, _U64 = (np.dtype(t) for t in (bool_, uint8, uint16, uint32, uint64))
_I8, _I16, _I32, _I64 = (np.dtype(t) for t in (int8, int16, int32, int64))
_BF16, _F16, _F32, _F64 = (np.dtype(t) for t in (bfloat16, float16, float32, float64))
_C64, _C128 = np.dtype(complex64), np.dtype(complex128)

_NARROW_FLOATS = tuple(np.dtype(t) for t in (
    float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz,
    float8_e3m4, float8_e4m3, float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn))
_NARROW_SIGNED = tuple(np.dtype(t) for t in (int4, int2, int1))
_NARROW_UNSIGNED = tuple(np.dtype(t) for t in (uint4, uint2, uint1))
_NARROW = frozenset(_NARROW_FLOATS + _NARROW_SIGNED + _NARROW_UNSIGNED)

_ALL_DTYPES = (_B1, _U8, _U16, _U32, _U64, _I8, _I16, _I32, _I64,
               _BF16, _F16, _F32, _F64, _C64, _C128,
               *_NARROW_FLOATS, *_NARROW_SIGNED, *_NARROW_UNSIGNED)
# int4 & co. take part in promotion (promote_types answers as jax) but make no arrays yet:
# NumPy's ufuncs on them (ml_dtypes) answer int8 or float16 rather than wrapping.
_SUPPORTED = frozenset(_ALL_DTYPES) - set(_NARROW_SIGNED + _NARROW_UNSIGNED) | {float0}
_TO_32BIT = {_I64: _I32, _U64: _U32, _F64: _F32, _C128: _C64}

_SIGNED = frozenset({_I8, _I16, _I32, _I64, *_NARROW_SIGNED})
_UNSIGNED = frozenset({_U8, _U16, _U32, _U64, *_NARROW_UNSIGNED})
_INTS = _SIGNED | _UNSIGNED
_FLOATS = frozenset({_BF16, _F16, _F32, _F64, *_NARROW_FLOATS})
_COMPLEXES = frozenset({_C64, _C128})

_SHORT_NAMES = {
    _B1: "bool", _U8: "u8", _U16: "u16", _U32: "u32", _U64: "u64",
    _I8: "i8", _I16: "i16", _I32: "i32", _I64: "i64",
    _BF16: "bf16", _F16: "f16", _F32: "f32", _F64: "f64", _C64: "c64", _C128: "c128",
    float0: "float0",
    **{d: {"int4": "i4", "uint4": "u4", "int2": "i2", "uint2": "u2", "int1": "i1",
           "uint1": "u1"}.get(d.name, "f" + d.name[5:]) for d in _NARROW},   # f8_e4m3fn
}

_PY_SCALARS = (bool, int, float, complex)


# ---- defaults and canonicalization ---------------------------------------------------------
def default_int_dtype() -> np.dtype:
    """int32, or int64 with x64: the dtype of a Python int."""
    return _I64 if config.jax_enable_x64 else _I32


def default_float_dtype() -> np.dtype:
    """float32, or float64 with x64: the dtype of a Python float and of ``zeros(n)``."""
    return _F64 if config.jax_enable_x64 else _F32


def default_complex_dtype() -> np.dtype:
    """complex64, or complex128 with x64: the dtype of a Python complex."""
    return _C128 if config.jax_enable_x64 else _C64


def _default_uint_dtype() -> np.dtype:
    return _U64 if config.jax_enable_x64 else _U32


def _python_scalar_dtype(t: type) -> np.dtype:
    if t is bool:
        return _B1
    if t is int:
        return default_int_dtype()
    if t is float:
        return default_float_dtype()
    return default_complex_dtype()


def dtype(x: Any) -> np.dtype:
    """The dtype of ``x``, or of the dtype-like ``x``, as ``np.dtype`` does.

    Differences from ``np.dtype``: Python scalars and the types ``int``/``float``/``complex``
    give fnad's default for the current x64 mode (``dtype(1.0)`` is float32 unless x64 is
    on), arrays/tracers give their ``.dtype`` (or ``.aval.dtype``), and only the dtypes fnad
    supports (the 15 numeric ones and float0) are accepted. The result is otherwise not
    canonicalized: ``dtype("float64")`` is float64 even with x64 off (see canonicalize_dtype).

    Raises TypeError naming ``x`` when it is not a dtype or has none fnad supports.
    """
    if type(x) in _PY_SCALARS:
        return _python_scalar_dtype(type(x))
    if isinstance(x, np.dtype):
        dt = x
    elif isinstance(x, type):
        if x in _PY_SCALARS:
            return _python_scalar_dtype(x)
        dt = _np_dtype_or_error(x)
    elif isinstance(x, str):
        dt = _np_dtype_or_error(x)
    else:
        dt = getattr(x, "dtype", None)
        if dt is None:
            aval = getattr(x, "aval", None)
            dt = getattr(aval, "dtype", None)
        dt = _np_dtype_or_error(x) if dt is None else _np_dtype_or_error(dt, orig=x)
    if dt not in _SUPPORTED:
        if dt in _NARROW:
            raise TypeError(f"fnad does not support arrays of dtype {dt} (from {x!r}) yet: of "
                            "the narrow types it has the 8-, 6- and 4-bit floats, not the 4-, "
                            "2- and 1-bit integers")
        raise TypeError(
            f"fnad does not support dtype {dt} (from {x!r}); supported dtypes are "
            f"{', '.join(sorted(str(d) for d in _SUPPORTED if d is not float0))} and float0."
        )
    return dt


def _np_dtype_or_error(x: Any, orig: Any = None) -> np.dtype:
    if x is None:  # np.dtype(None) is float64, which would silently bypass the defaults
        raise TypeError("Cannot interpret None as a dtype.")
    try:
        return np.dtype(x)
    except (TypeError, ValueError) as err:
        shown = x if orig is None else orig
        raise TypeError(f"Cannot interpret {shown!r} as a dtype.") from err


# One dict per x64 mode, keyed by whatever the caller passed (dtype, scalar type, string);
# indexing by the bool itself avoids building a (dtype, x64) key tuple on the hot path.
_CANONICAL: tuple[dict[Any, np.dtype], dict[Any, np.dtype]] = ({}, {})


def canonicalize_dtype(dt: Any) -> np.dtype:
    """``dtype(dt)`` with 64-bit types mapped to 32-bit ones unless x64 is enabled.

    float64 -> float32, int64 -> int32, uint64 -> uint32, complex128 -> complex64; all other
    dtypes are returned as is. Cached per (input, x64 mode), so cheap to call per operation.
    """
    cache = _CANONICAL[config.jax_enable_x64]
    try:
        return cache[dt]
    except (KeyError, TypeError):  # TypeError: unhashable, e.g. a NumPy array
        pass
    out = dtype(dt)
    if not config.jax_enable_x64:
        out = _TO_32BIT.get(out, out)
    # Only dtype-likes become keys: other hashable inputs (fnad arrays hash by identity)
    # would make the cache grow with every array ever seen.
    if isinstance(dt, (np.dtype, type, str)):
        cache[dt] = out
    return out


# ---- the promotion lattice -----------------------------------------------------------------
# Nodes are ints so that the precomputed tables are plain tuples indexed by two ints.
(_N_B1, _N_U8, _N_U16, _N_U32, _N_U64, _N_I8, _N_I16, _N_I32, _N_I64,
 _N_BF16, _N_F16, _N_F32, _N_F64, _N_C64, _N_C128) = range(15)
_N_NARROW_FLOATS = tuple(range(15, 15 + len(_NARROW_FLOATS)))
_N_NARROW_INTS = tuple(range(_N_NARROW_FLOATS[-1] + 1, len(_ALL_DTYPES)))
_N_IW, _N_FW, _N_CW = range(len(_ALL_DTYPES), len(_ALL_DTYPES) + 3)
_N_NODES = len(_ALL_DTYPES) + 3
_N_WEAK = frozenset({_N_IW, _N_FW, _N_CW})
_NODE_OF = {dt: i for i, dt in enumerate(_ALL_DTYPES)}  # strong nodes only
_NODE_NAMES = ("b1", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64",
               "bf16", "f16", "f32", "f64", "c64", "c128",
               *(_SHORT_NAMES[d] for d in _ALL_DTYPES[15:]), "i*", "f*", "c*")


def _lattice_edges(x64: bool, strict: bool = False) -> dict[int, tuple[int, ...]]:
    """Each node's immediate successors (the types it promotes to directly). The strict
    lattice (``jax_numpy_dtype_promotion="strict"``) links only the weak types: i* to f* and
    to every integer type, f* to c* and every float type, c* to the complex types."""
    if strict:
        edges: dict[int, tuple[int, ...]] = {n: () for n in range(_N_NODES)}
        edges[_N_IW] = (_N_FW, _N_U8, _N_U16, _N_U32, _N_U64, _N_I8, _N_I16, _N_I32, _N_I64,
                        *_N_NARROW_INTS)
        edges[_N_FW] = (_N_CW, _N_BF16, _N_F16, _N_F32, _N_F64, *_N_NARROW_FLOATS)
        edges[_N_CW] = (_N_C64, _N_C128)
        return edges
    return {
        **{n: () for n in _N_NARROW_FLOATS + _N_NARROW_INTS},         # dead ends
        _N_B1: (_N_IW,),
        _N_IW: (_N_U8, _N_I8, *_N_NARROW_INTS),
        _N_U8: (_N_U16, _N_I16),
        _N_U16: (_N_U32, _N_I32),
        # Without x64, u32 meeting a signed int must not create an int64 that canonicalization
        # would then truncate; JAX lets u32 promote to i32 instead.
        _N_U32: (_N_U64, _N_I64 if x64 else _N_I32),
        _N_U64: (_N_FW,),
        _N_I8: (_N_I16,),
        _N_I16: (_N_I32,),
        _N_I32: (_N_I64,),
        _N_I64: (_N_FW,),
        _N_FW: (_N_BF16, _N_F16, _N_CW, *_N_NARROW_FLOATS),
        _N_BF16: (_N_F32,),
        _N_F16: (_N_F32,),
        _N_F32: (_N_F64, _N_C64),
        _N_F64: (_N_C128,),
        _N_CW: (_N_C64,),
        _N_C64: (_N_C128,),
        _N_C128: (),
    }


def _lub_table(x64: bool, strict: bool = False) -> tuple[tuple[int, ...], ...]:
    """table[a][b] = least upper bound of nodes a and b; -1 where there is none (the strict
    lattice, and the narrow types)."""
    edges = _lattice_edges(x64, strict)
    upper: dict[int, set[int]] = {}
    for n in range(_N_NODES):  # transitive closure by graph search
        seen, todo = {n}, [n]
        while todo:
            for m in edges[todo.pop()]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        upper[n] = seen
    table = []
    narrow = set(_N_NARROW_FLOATS + _N_NARROW_INTS)
    for a in range(_N_NODES):
        row = []
        for b in range(_N_NODES):
            common = upper[a] & upper[b]
            # The least common bound is the one every other common bound lies above.
            least = [c for c in common if common <= upper[c]]
            if not least and (strict or a in narrow or b in narrow):
                least = [-1]
            if len(least) != 1:  # guards the edge list above against typos
                raise AssertionError(f"promotion lattice: no unique lub for {a}, {b}")
            row.append(least[0])
        table.append(tuple(row))
    return tuple(table)


# _LUB[strict][x64]; `_strict` follows config.jax_numpy_dtype_promotion (a listener below).
_LUB = ((_lub_table(x64=False), _lub_table(x64=True)),
        (_lub_table(x64=False, strict=True), _lub_table(x64=True, strict=True)))
_strict = config.jax_numpy_dtype_promotion == "strict"


@config.on_change
def _promotion_mode(name: str, value: Any) -> None:
    global _strict
    if name == "jax_numpy_dtype_promotion":
        _strict = value == "strict"


def _no_promotion_path(names: list[str]) -> TypePromotionError:
    if _strict:
        return TypePromotionError(
            f"Input dtypes ({', '.join(names)}) have no available implicit dtype promotion "
            "path when jax_numpy_dtype_promotion='strict'. Cast the inputs explicitly to the "
            "type you want (x.astype(...)), or leave the block of "
            "fnad.numpy_dtype_promotion('strict').")
    return TypePromotionError(
        f"Input dtypes ({', '.join(names)}) have no available implicit dtype promotion path: "
        "the narrow types (8-, 6- and 4-bit floats; 4-, 2- and 1-bit integers) promote only "
        "with bool, Python scalars and (the floats) integers, as in JAX. Cast explicitly, "
        "e.g. x.astype('float32').")


def _weak_node(dt: np.dtype) -> int:
    """The weak lattice node of a weakly typed value of dtype ``dt`` (bool is never weak)."""
    if dt in _FLOATS:
        return _N_FW
    if dt in _INTS:
        return _N_IW
    if dt in _COMPLEXES:
        return _N_CW
    return _NODE_OF[dt]


def _strong_node(dt: np.dtype) -> int:
    try:
        return _NODE_OF[dt]
    except KeyError:
        raise TypePromotionError(f"dtype {dt} does not take part in type promotion.") from None


def _node_dtype(node: int) -> np.dtype:
    """The dtype a node stands for; weak nodes give their kind's canonical default."""
    if node == _N_IW:
        return default_int_dtype()
    if node == _N_FW:
        return default_float_dtype()
    if node == _N_CW:
        return default_complex_dtype()
    dt = _ALL_DTYPES[node]
    return dt if config.jax_enable_x64 else _TO_32BIT.get(dt, dt)


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype a binary op casts ``a`` and ``b`` to, as ``jax.numpy.promote_types``.

    ``a``/``b`` are dtype-likes; the Python types ``int``, ``float``, ``complex`` count as
    weak (so ``promote_types(uint8, int)`` is uint8), ``bool`` does not. Like JAX, the inputs
    and result are not canonicalized (``promote_types(float64, float64)`` is float64 with x64
    off), and a result that is a weak type comes back as ``np.dtype`` of the Python type,
    i.e. 64-bit (``promote_types(int64, uint64)`` is float64). Use ``result_type`` for the
    canonical answer an operation should produce.
    """
    na, nb = _promote_types_node(a), _promote_types_node(b)
    node = _LUB[_strict][config.jax_enable_x64][na][nb]
    if node < 0:
        raise _no_promotion_path([_NODE_NAMES[na], _NODE_NAMES[nb]])
    if node == _N_IW:
        return _I64
    if node == _N_FW:
        return _F64
    if node == _N_CW:
        return _C128
    return _ALL_DTYPES[node]


def _promote_types_node(x: Any) -> int:
    if x is int:
        return _N_IW
    if x is float:
        return _N_FW
    if x is complex:
        return _N_CW
    return _strong_node(_np_dtype_or_error(x))


def is_weakly_typed(x: Any) -> bool:
    """Whether ``x`` is weakly typed: a Python int/float/complex (not bool), or an fnad
    array/tracer whose ``aval.weak_type`` (or ``weak_type``) is set."""
    t = type(x)
    if t is int or t is float or t is complex:
        return True
    aval = getattr(x, "aval", None)
    if aval is not None:
        return bool(getattr(aval, "weak_type", False))
    return bool(getattr(x, "weak_type", False))


def _dtype_and_weak(x: Any) -> tuple[np.dtype, bool]:
    """(canonical dtype, weak) for one argument of result_type."""
    if isinstance(x, np.dtype):  # the common case when called from abstract_eval rules
        return canonicalize_dtype(x), False
    t = type(x)
    if t is int or t is float or t is complex:
        return _python_scalar_dtype(t), True
    if x is int or x is float or x is complex:  # the types themselves, as in JAX
        return _python_scalar_dtype(x), True
    if x is None:  # JAX reads None as "the default float"
        return default_float_dtype(), False
    aval = getattr(x, "aval", None)
    if aval is not None and hasattr(aval, "dtype"):
        return canonicalize_dtype(aval.dtype), bool(getattr(aval, "weak_type", False))
    if isinstance(x, (type, str, np.ndarray, np.generic)):
        return canonicalize_dtype(x), False
    return canonicalize_dtype(x), bool(getattr(x, "weak_type", False))


def result_type(*args: Any, return_weak_type_flag: bool = False) -> Any:
    """The canonical dtype of an operation on ``args``, by JAX's promotion rules.

    Each arg is a dtype-like, a NumPy array or scalar, a Python scalar (int/float/complex
    are weak, bool is not), None (the default float), or an fnad array/tracer carrying
    ``aval.dtype``/``aval.weak_type`` (or ``dtype``/``weak_type``). Inputs are canonicalized
    for the current x64 mode first. If the result is weak (all inputs weak, or a weak type
    won the promotion) its dtype is the default of its kind: ``result_type(2, 3.0)`` is
    float32 and weak. Returns the dtype, or ``(dtype, weak_type)`` with
    ``return_weak_type_flag=True``.
    """
    key = tuple(map(_dtype_and_weak, args))
    cache = _RESULT[_strict][config.jax_enable_x64]
    try:
        out = cache[key]
    except KeyError:
        out = cache[key] = _lattice_result(key)
    return out if return_weak_type_flag else out[0]


# Per promotion mode and x64 mode: (canonical dtype, weak) of every argument -> (dtype,
# weak). Bounded by the number of distinct signatures a program uses, which is small.
_RESULT: tuple[tuple[dict[tuple, tuple[np.dtype, bool]], ...], ...] = (({}, {}), ({}, {}))


def _lattice_result(pairs: tuple[tuple[np.dtype, bool], ...]) -> tuple[np.dtype, bool]:
    if not pairs:
        raise ValueError("result_type needs at least one array or dtype.")
    lub = _LUB[_strict][config.jax_enable_x64]
    if all(w for _, w in pairs) and (not _strict or len(pairs) == 1):
        # Joining the strong counterparts keeps e.g. two weak int16 tracers from landing on
        # a non-canonical weak node; the weak flag is put back below (JAX does the same,
        # except in the strict lattice, where 1 + 1.0 joins i* and f*).
        node = _strong_node(pairs[0][0])
        for dt, _ in pairs[1:]:
            node = lub[node][_strong_node(dt)]
        weak = True
    else:
        node = _weak_node(pairs[0][0]) if pairs[0][1] else _strong_node(pairs[0][0])
        for dt, w in pairs[1:]:
            if node >= 0:
                node = lub[node][_weak_node(dt) if w else _strong_node(dt)]
        if node < 0:
            raise _no_promotion_path([f"weakly typed {dt.name}" if w else dt.name
                                      for dt, w in pairs])
        weak = node in _N_WEAK
    out = _node_dtype(node)
    weak = weak and out is not _B1
    if weak:
        if out in _FLOATS:
            out = default_float_dtype()
        elif out in _SIGNED:
            out = default_int_dtype()
        elif out in _UNSIGNED:
            out = _default_uint_dtype()
        elif out in _COMPLEXES:
            out = default_complex_dtype()
    return out, weak


# ---- predicates and info -------------------------------------------------------------------
# ml_dtypes' types derive from np.generic only: where they sit in NumPy's hierarchy
_ML_PARENTS = {
    **{d.type: frozenset({d.type, np.floating, np.inexact, np.number, np.generic})
       for d in (_BF16, *_NARROW_FLOATS)},
    **{d.type: frozenset({d.type, np.signedinteger, np.integer, np.number, np.generic})
       for d in _NARROW_SIGNED},
    **{d.type: frozenset({d.type, np.unsignedinteger, np.integer, np.number, np.generic})
       for d in _NARROW_UNSIGNED},
}


def issubdtype(a: Any, b: Any) -> bool:
    """``np.issubdtype`` that also knows where ml_dtypes' types sit (bfloat16 and float8_*
    are floating, int4 is a signed integer...).

    ``a``/``b`` are dtype-likes or NumPy's abstract classes (``floating``, ``integer``,
    ``inexact``, ``number``, ...).
    """
    if isinstance(a, KeyDType) or isinstance(b, KeyDType):   # typed PRNG keys
        return isinstance(a, KeyDType) and (a == b or b in (prng_key, extended))
    a_type = a if isinstance(a, type) and issubclass(a, np.generic) else np.dtype(a).type
    if a_type in _ML_PARENTS:
        b_type = b if isinstance(b, type) and issubclass(b, np.generic) else np.dtype(b).type
        return b_type in _ML_PARENTS[a_type]
    return bool(np.issubdtype(a_type, b))


class extended(np.generic):  # noqa: N801  (jax's name)
    """jax.dtypes.extended: the category of JAX's extended dtypes; fnad's one is the
    typed PRNG key dtype (KEY_DTYPE)."""


class prng_key(extended):  # noqa: N801
    """jax.dtypes.prng_key: the category of typed PRNG key dtypes (KEY_DTYPE)."""


class KeyDType:
    """The dtype of typed PRNG key arrays (fnad.prng.PRNGKeyArray) of one PRNG
    implementation: key<fry> (threefry2x32, two uint32 words per key), key<rbg> (rbg) and
    key<urbg> (unsafe_rbg), four words each. Not a NumPy dtype: `np.dtype` of it fails, as
    in jax; key dtypes are equal when their implementations are, and each is a subdtype of
    `prng_key` (but not of another implementation's key dtype)."""

    type = prng_key

    def __init__(self, impl: str = "threefry2x32", tag: str = "fry",
                 key_shape: tuple[int, ...] = (2,)):
        self.impl, self.name, self.key_shape = impl, f"key<{tag}>", key_shape
        self.itemsize = 4 * int(np.prod(key_shape))     # uint32 words per key

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        return isinstance(other, KeyDType) and other.impl == self.impl

    def __hash__(self) -> int:
        return hash((KeyDType, self.impl))


# impl name -> the key dtype of that PRNG implementation (jax's names and tags)
KEY_DTYPES = {"threefry2x32": KeyDType("threefry2x32", "fry", (2,)),
              "rbg": KeyDType("rbg", "rbg", (4,)),
              "unsafe_rbg": KeyDType("unsafe_rbg", "urbg", (4,))}
KEY_DTYPE = KEY_DTYPES["threefry2x32"]


def itemsize_bits(dtype: Any) -> int:
    """The size of one element of `dtype` in bits (jax.dtypes.itemsize_bits)."""
    if dtype is None:
        raise ValueError("itemsize_bits: dtype cannot be None")
    dt = np.dtype(dtype)
    if dt in _NARROW:                                   # float4_e2m1fn: 4, float6_*: 6...
        return (ml_dtypes.finfo if dt in _NARROW_FLOATS else ml_dtypes.iinfo)(dt).bits
    return dt.itemsize * 8


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (bool, int, float or complex) of x's dtype
    (jax.dtypes.scalar_type_of)."""
    dt = np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
    kind = ("f" if dt in _FLOATS else "i" if dt in _INTS  # ml_dtypes' types have kind "V"
            else dt.kind)
    for kinds, t in (("b", bool), ("iu", int), ("f", float), ("c", complex)):
        if kind in kinds:
            return t
    raise TypeError(f"scalar_type_of: invalid scalar value {x!r}")


def _info_dtype(x: Any) -> Any:
    # Arrays and tracers give their dtype; types and strings go to numpy's own parsing, so
    # finfo(float) is float64 as in NumPy and JAX.
    if isinstance(x, (np.dtype, type, str)):
        return x
    dt = getattr(x, "dtype", None)
    return x if dt is None else dt


def finfo(x: Any) -> Any:
    """Machine limits of a floating (or complex) dtype; bfloat16 included, via ml_dtypes."""
    return ml_dtypes.finfo(_info_dtype(x))


def iinfo(x: Any) -> np.iinfo:
    """Machine limits of an integer dtype, as ``np.iinfo`` (int4 & co. via ml_dtypes)."""
    return ml_dtypes.iinfo(_info_dtype(x))


def _as_dtype(dt: Any) -> np.dtype:
    return dt if isinstance(dt, np.dtype) else dtype(dt)


def is_float(dt: Any) -> bool:
    """Real floating point, bfloat16 and float16 included (complex is not)."""
    return _as_dtype(dt) in _FLOATS


def is_complex(dt: Any) -> bool:
    """complex64 or complex128."""
    return _as_dtype(dt) in _COMPLEXES


def is_int(dt: Any) -> bool:
    """A signed or unsigned integer dtype (bool is not)."""
    return _as_dtype(dt) in _INTS


def is_inexact(dt: Any) -> bool:
    """Floating or complex: the dtypes that have a nonzero tangent."""
    d = _as_dtype(dt)
    return d in _FLOATS or d in _COMPLEXES


def is_bool(dt: Any) -> bool:
    """The bool dtype."""
    return _as_dtype(dt) == _B1


# JAX's table: narrow ints become float32 even with x64 on (jnp.sin(int32) is float32), and
# only 64-bit ints ask for float64, which canonicalization may then narrow.
_TO_INEXACT = {_B1: _F32, _U8: _F32, _U16: _F32, _U32: _F32, _U64: _F64,
               _I8: _F32, _I16: _F32, _I32: _F32, _I64: _F64,
               **{d: _F32 for d in _NARROW_SIGNED + _NARROW_UNSIGNED}}


def to_inexact_dtype(dt: Any) -> np.dtype:
    """The dtype an op like ``sin`` computes in for inputs of dtype ``dt``, canonicalized.

    bool and ints up to 32 bits -> float32, 64-bit ints -> float64 (float32 with x64 off);
    floating and complex dtypes are kept.
    """
    d = _as_dtype(dt)
    return canonicalize_dtype(_TO_INEXACT.get(d, d))


def short_name(dt: Any) -> str:
    """JAX's short printing name: ``f32``, ``bf16``, ``i64``, ``u8``, ``c64``, ``bool``,
    ``float0``."""
    d = _as_dtype(dt)
    return _SHORT_NAMES.get(d, d.name)

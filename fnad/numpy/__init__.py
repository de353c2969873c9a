# ruff: noqa: F401, F403  (this module re-exports the public API)
"""fnad.numpy: the NumPy API with jax.numpy's names and semantics.

A JAX user ports code by changing `import jax.numpy as jnp` to
`import fnad.numpy as jnp`. Arrays are immutable (`x.at[i].set(v)` instead of
`x[i] = v`), float32 is the default dtype (64-bit types need jax_enable_x64), Python
scalars are weakly typed, and shapes are static. Importing this package installs the
operators and methods (`x + y`, `x[i]`, `x.sum()` ...) on fnad.Array and on tracers.

Modules: _core (conversion and promotion helpers), _creation, _ufuncs (elementwise
arithmetic), _ufunc_extras (frexp, gcd, i0 ...), _logic (where, comparisons, logic),
_reductions, _shape, _editing (insert, delete, block, concat ...), _linalg_ops (dot,
matmul, einsum ...), _methods (operators), _indexing (x[idx], .at, take), _index_tricks
(r_, ix_, unravel_index, put_along_axis ...), _sorting, _setops (isin, union1d ...),
_histograms (bincount, histogram), _polynomial (polyval ...), _functional (vectorize,
apply_along_axis, piecewise ...), _extras (nan-reductions, diff, gradient, roll, ...),
_io (printing, save/load, frombuffer).
"""
from __future__ import annotations

import builtins as _builtins
import math as _math

import numpy as _np

from fnad import dtypes as _dtypes
from fnad.core import Array as ndarray
from fnad.dtypes import (
    bfloat16,
    bool_,
    complex128,
    complex64,
    complexfloating,
    dtype,
    finfo,
    float16,
    float32,
    float4_e2m1fn,
    float64,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    floating,
    generic,
    iinfo,
    inexact,
    int1,
    int16,
    int2,
    int32,
    int4,
    int64,
    int8,
    integer,
    issubdtype,
    number,
    promote_types,
    result_type,
    signedinteger,
    uint1,
    uint16,
    uint2,
    uint32,
    uint4,
    uint64,
    uint8,
    unsignedinteger,
)
from fnad.numpy import _methods
from fnad.numpy._core import asarray
from fnad.numpy._creation import *  # noqa: F403
from fnad.numpy._editing import *  # noqa: F403
from fnad.numpy._extras import *  # noqa: F403
from fnad.numpy._functional import *  # noqa: F403
from fnad.numpy._histograms import *  # noqa: F403
from fnad.numpy._index_tricks import *  # noqa: F403
from fnad.numpy._indexing import *  # noqa: F403
from fnad.numpy._io import *  # noqa: F403
from fnad.numpy._linalg_ops import *  # noqa: F403
from fnad.numpy._logic import *  # noqa: F403
from fnad.numpy._polynomial import *  # noqa: F403
from fnad.numpy._reductions import *  # noqa: F403
from fnad.numpy._setops import *  # noqa: F403
from fnad.numpy._shape import *  # noqa: F403
from fnad.numpy._sorting import *  # noqa: F403
from fnad.numpy._ufunc_extras import *  # noqa: F403
from fnad.numpy._ufuncs import *  # noqa: F403

pi = _math.pi
e = _math.e
inf = float("inf")
nan = float("nan")
euler_gamma = 0.5772156649015329
newaxis = None
bool = bool_  # noqa: A001  (jnp.bool is the bool dtype)
float_ = float64
int_ = int64
uint = uint64
complex_ = complex128
single, double = float32, float64
csingle, cdouble = complex64, complex128
half = float16
character, flexible, object_ = _np.character, _np.flexible, _np.object_  # NumPy's, as JAX
ComplexWarning = _np.exceptions.ComplexWarning


def can_cast(from_, to, casting: str = "safe") -> bool:
    """Whether `from_` (a dtype or array) can be cast to `to` under NumPy's rule `casting`."""
    src = from_.dtype if isinstance(from_, (ndarray, _np.ndarray)) or hasattr(
        from_, "aval") else from_
    return True if _np.can_cast(_np.dtype(src), _np.dtype(to), casting) else False


def isdtype(dt, kind) -> bool:
    """Array API dtype-kind test: kind is a dtype or 'bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric', or a
    tuple of them."""
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dt, k) for k in kind)
    d = _np.dtype(dt)
    if not isinstance(kind, str):
        return d == _np.dtype(kind)
    tests = {
        "bool": _dtypes.is_bool,
        "signed integer": lambda t: issubdtype(t, signedinteger),
        "unsigned integer": lambda t: issubdtype(t, unsignedinteger),
        "integral": _dtypes.is_int,
        "real floating": _dtypes.is_float,
        "complex floating": _dtypes.is_complex,
        "numeric": lambda t: _dtypes.is_int(t) or _dtypes.is_inexact(t),
    }
    if kind not in tests:
        raise ValueError(f"Unrecognized data type kind: {kind!r}")
    return tests[kind](d)


def iscomplexobj(x) -> bool:
    """Whether x has a complex dtype."""
    return _dtypes.is_complex(_dtypes.result_type(x))


def isrealobj(x) -> bool:
    """Whether x does not have a complex dtype."""
    return not iscomplexobj(x)


def isscalar(element) -> bool:
    """Whether `element` is a scalar (Python/NumPy scalar or a 0-d fnad array)."""
    if hasattr(element, "aval"):
        return element.ndim == 0
    return _np.isscalar(element)


_methods.install()
del annotations
from fnad.numpy import linalg  # noqa: E402,F401
from fnad.numpy import fft  # noqa: E402,F401  (jnp.fft, as jax.numpy.fft)

from fnad.numpy._ufunc_class import _builtin_ufuncs, frompyfunc, ufunc  # noqa: E402
_builtin_ufuncs(globals())    # add, multiply, maximum ... become ufuncs (reduce, at, outer)

from fnad import prng as _prng  # noqa: E402
_prng.install(globals(), "numpy")   # reshape, stack, where ... also take typed PRNG keys

"""fnad.core: abstract values, primitives and `bind`, stackless traces, tracers, errors.

Owns ShapedArray, Primitive, the rule tables keyed by primitive (filled by
`primitives/`, read by the transformations), the one current trace, EvalTrace
(eager execution on a backend), the Tracer and Array classes, symbolic Zero
tangents and the user-facing error types.

Imports nothing from fnad but `dtypes` and `config`; in particular never numba
or jax: a backend module loads on its first use.
"""
from __future__ import annotations

import gc
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from fnad import dtypes
from fnad.config import config

# ---- rule tables ------------------------------------------------------------
# Filled one line per primitive in primitives/*.py; read by the transformations.
abstract_eval_rules: dict[Primitive, Callable] = {}
jvp_rules: dict[Primitive, Callable] = {}
transpose_rules: dict[Primitive, Callable] = {}
batch_rules: dict[Primitive, Callable] = {}
partial_eval_rules: dict[Primitive, Callable] = {}
# Collectives over named axes (primitives/collectives.py): run by the BatchTrace whose
# vmap binds one of the names in params["axis_name"], as
# `rule(vals, dims, axis_size, axis_name_of_the_trace, **params) -> (out, out_dim)`.
collective_rules: dict[Primitive, Callable] = {}
# Higher-order primitives (control flow, custom derivatives, remat) run eagerly by
# binding the primitives of their sub-jaxprs: `eager_rules[prim](*args, **params)`
# gets the operands as Arrays on the eval trace, whatever their backend.
eager_rules: dict[Primitive, Callable] = {}
# Primitives with side effects (fnad.debug's debug_callback): an equation of one
# must survive dead-code elimination even when none of its outputs is used.
effectful_primitives: set[Primitive] = set()


# ---- errors -----------------------------------------------------------------
class JAXTypeError(TypeError):
    """The base of the TypeErrors below (jax.errors.JAXTypeError)."""


class JAXIndexError(IndexError):
    """The base of fnad's JAX-specific IndexErrors (jax.errors.JAXIndexError)."""


class ConcretizationTypeError(JAXTypeError):
    """A Python-level decision (if, int(), indexing a list...) needed a traced value."""


class TracerBoolConversionError(ConcretizationTypeError):
    """`bool(x)` (an `if`, `while`, `and`/`or`) on a traced value."""


class TracerIntegerConversionError(ConcretizationTypeError):
    """`int(x)` / `operator.index(x)` on a traced value."""


class TracerArrayConversionError(JAXTypeError):
    """`np.asarray(x)` on a traced value: NumPy cannot see inside a trace."""


class UnexpectedTracerError(JAXTypeError):
    """A tracer was used after the transformation that made it had returned."""


class ShapeError(TypeError):
    """Operand shapes or dtypes that a primitive does not accept."""


class NoImplementationError(NotImplementedError):
    """A primitive has no implementation on the backend asked to run it."""


# ---- user source lines --------------------------------------------------------
_internal_dirs: tuple[str, ...] | None = None


def _internal_prefixes() -> tuple[str, ...]:
    """Directories whose frames are fnad's own (plus the standard library)."""
    global _internal_dirs
    if _internal_dirs is None:
        here = os.path.dirname(os.path.abspath(__file__))
        dirs = [here + os.sep]
        for name in ("fnad.primitives", "fnad.backends"):
            mod = sys.modules.get(name)
            for p in getattr(mod, "__path__", ()):
                dirs.append(os.path.abspath(p) + os.sep)
        stdlib = sysconfig.get_paths().get("stdlib")
        if stdlib:
            dirs.append(os.path.abspath(stdlib) + os.sep)
        _internal_dirs = tuple(dirs)
    return _internal_dirs


# Tracing asks for the user's line once per staged equation, so the walk is cached: per
# file name whether it is fnad's own, per (code, line) the formatted place (keyed by id
# with the code object kept in the value: code objects compare by content, not by file).
_file_internal: dict[str, bool] = {}           # co_filename -> fnad's own (or stdlib)?
_code_where: dict[tuple, tuple] = {}           # (id(code), line) -> (code, "file:line (fn)")
_WHERE_CACHE_MAX = 20_000                      # entries; cleared when full (exec'd code)


def _is_internal(fname: str) -> bool:
    internal = fname.startswith(_internal_prefixes()) or fname.startswith("<frozen")
    if len(_file_internal) >= _WHERE_CACHE_MAX:
        _file_internal.clear()
    _file_internal[fname] = internal
    return internal


def _where(code, line) -> str:
    hit = _code_where.get((id(code), line))
    if hit is not None and hit[0] is code:
        return hit[1]
    if len(_code_where) >= _WHERE_CACHE_MAX:
        _code_where.clear()
    where = f"{code.co_filename}:{line} ({code.co_name})"
    _code_where[(id(code), line)] = (code, where)
    return where


def _user_source() -> tuple[str | None, str]:
    """(where, note): the innermost user frame, or the source line of the staged equation
    being run (see `eqn_source`) if its interpreter frame comes first on the stack."""
    if _internal_dirs is None:
        _internal_prefixes()
    src = _state.source
    src_frame = src[0] if src is not None else None
    frame = sys._getframe(1)
    known = _file_internal
    while frame is not None:
        if frame is src_frame:
            return src[1], src[2]
        fname = frame.f_code.co_filename
        internal = known.get(fname)
        if internal is None:
            internal = _is_internal(fname)
        if not internal:
            return _where(frame.f_code, frame.f_lineno), ""
        frame = frame.f_back
    return None, ""


def user_frame() -> str | None:
    """'file.py:12 (fn)' of the innermost frame outside fnad, or None.

    While an interpreter runs a staged equation (`eqn_source`), the line that staged it
    stands in for the interpreter's frame and everything above it."""
    return _user_source()[0]


def _at_user_line() -> str:
    where, note = _user_source()
    if not where:
        return ""
    return f" (at {where}, {note})" if note else f" (at {where})"


class eqn_source:
    """Context manager for interpreters of jaxprs (eval_jaxpr, the backward pass): while
    binding an equation, errors (debug_nans, shape errors) and newly staged equations
    name `where`, the user line that staged it, not the interpreter's caller.

    `note` says what is being done with it (e.g. "while transposing 'mul' in the backward
    pass"). `where=None` (an equation without source info) changes nothing. A user frame
    entered below the interpreter (a callback, a custom rule) still wins: the walk in
    `_user_source` stops at whichever comes first.
    """

    __slots__ = ("where", "note", "prev")

    def __init__(self, where: str | None, note: str = ""):
        self.where = where
        self.note = note

    def __enter__(self):
        self.prev = _state.source
        if self.where is not None:
            _state.source = (sys._getframe(1), self.where, self.note)

    def __exit__(self, *exc):
        _state.source = self.prev


# ---- abstract values --------------------------------------------------------
_dtype_classes = frozenset(type(np.dtype(t)) for t in np.sctypeDict.values())
class ShapedArray:
    """The abstract value of an array: shape, dtype and JAX's weak_type flag."""

    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if type(dtype) in _dtype_classes else np.dtype(dtype)
        self.weak_type = weak_type
        self._hash = None                  # computed on first use (jit cache keys)

    def __reduce__(self):                  # pickled without _hash (str hashes vary by process)
        return ShapedArray, (self.shape, self.dtype, self.weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def strip_weak_type(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

    def update(self, shape=None, dtype=None, weak_type=None) -> ShapedArray:
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def to_tangent_aval(self) -> ShapedArray:
        """Tangents of integer and boolean values have JAX's `float0` dtype."""
        if dtypes.is_inexact(self.dtype):
            return self
        return ShapedArray(self.shape, dtypes.float0)

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_short()}{weak})"


class ShapeDtypeStruct:
    """A shape and dtype standing in for an array (for `eval_shape` and friends), as jax's:
    `weak_type` and `sharding` are keyword-only; `sharding` is kept (fnad runs on one
    device) and takes part in equality, as in jax."""

    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape, dtype, *, sharding=None, weak_type: bool = False):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.sharding = sharding

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def update(self, **kwargs) -> ShapeDtypeStruct:
        """A copy with the given fields (shape, dtype, sharding, weak_type) replaced."""
        unknown = set(kwargs) - set(self.__slots__)
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update: unknown fields {sorted(unknown)}; "
                            f"it has {list(self.__slots__)}")
        fields = {name: getattr(self, name) for name in self.__slots__} | kwargs
        return ShapeDtypeStruct(fields.pop("shape"), fields.pop("dtype"), **fields)

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.sharding == other.sharding)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type, self.sharding))

    def __repr__(self):
        sharding = "" if self.sharding is None else f", sharding={self.sharding}"
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{sharding}{weak})"


_scalar_avals: dict = {}   # (Python type, x64) -> aval


def _python_scalar_aval(x) -> ShapedArray:
    t = type(x)
    aval = _scalar_avals.get((t, config.jax_enable_x64))
    if aval is None:
        if t is bool:
            aval = ShapedArray((), np.bool_)
        elif t is int:
            aval = ShapedArray((), dtypes.default_int_dtype(), weak_type=True)
        elif t is float:
            aval = ShapedArray((), dtypes.default_float_dtype(), weak_type=True)
        else:
            aval = ShapedArray((), dtypes.default_complex_dtype(), weak_type=True)
        _scalar_avals[(t, config.jax_enable_x64)] = aval
    if t is int and not -(1 << 31) <= x < (1 << 31) and not (
            config.jax_enable_x64 and -(1 << 63) <= x < (1 << 63)):
        raise OverflowError(f"Python int {x} too large to convert to {aval.dtype.name}")
    return aval


_scalar_types = {bool, int, float, complex}


def get_aval(x: Any) -> ShapedArray:
    """The abstract value of anything fnad accepts as an array."""
    t = type(x)
    if t is Array or isinstance(x, Tracer):
        return x.aval
    if t in _scalar_types:
        return _python_scalar_aval(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype))
    if isinstance(x, (bool, int, float, complex)):   # subclasses, e.g. IntEnum
        return _python_scalar_aval(t.__mro__[-2](x) if t.__mro__[-2] in _scalar_types
                                   else complex(x))
    if hasattr(x, "__array__") or hasattr(x, "__jax_array__"):
        return get_aval(np.asarray(x))
    raise TypeError(f"Value {x!r} of type {t.__name__} is not a valid fnad array "
                    "(expected an fnad/NumPy array or a Python scalar)")


def canonicalize_value(x: Any, aval: ShapedArray | None = None) -> np.ndarray:
    """A NumPy value of `x` with fnad's canonical dtype (x64 off: 64 -> 32 bit)."""
    aval = get_aval(x) if aval is None else aval
    if isinstance(x, np.ndarray) and x.dtype == aval.dtype:
        return x
    return np.asarray(x, dtype=aval.dtype)


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer)


# ---- symbolic zeros -------------------------------------------------------------
class Zero:
    """A tangent or cotangent known to be zero; costs nothing until instantiated."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """In a transpose rule: the linear input whose cotangent is being computed."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x) -> bool:
    return type(x) is UndefinedPrimal


def is_zero(t) -> bool:
    return type(t) is Zero


def nonzero(t) -> bool:
    return type(t) is not Zero


# ---- primitives -----------------------------------------------------------------
class Primitive:
    """A named operation. Its math lives in the rule tables, keyed by the object."""

    __slots__ = ("name", "multiple_results", "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results

    def bind(self, *args, **params):
        return _state.trace.process_primitive(self, args, params)

    # ---- declaring a primitive's rules (the public way for user primitives) ----------------
    def def_abstract_eval(self, rule: Callable) -> Callable:
        """rule(*avals, **params) -> ShapedArray (a list of them if multiple_results)."""
        abstract_eval_rules[self] = rule
        return rule

    def def_impl(self, impl: Callable, backend: str = "numpy") -> Callable:
        """impl(*buffers, **params) -> buffer(s) on `backend` (NumPy arrays for numpy and
        numba — a numba.njit kernel works —, jax arrays for xla). It also serves jit there."""
        from fnad.backends import get_backend
        be = get_backend(backend)
        wrap = getattr(be, "wrap_user_impl", None)
        be.impl_rules[self] = wrap(impl) if wrap is not None else impl
        return impl

    def def_jvp(self, rule: Callable) -> Callable:
        """rule(primals, tangents, **params) -> (primal_out, tangent_out); tangents may be
        symbolic zeros (fnad.core.Zero): use fnad.ad.instantiate to make them arrays."""
        jvp_rules[self] = rule
        return rule

    def def_transpose(self, rule: Callable) -> Callable:
        """rule(ct, *args, **params) -> one cotangent (or None) per arg, for linear prims."""
        transpose_rules[self] = rule
        return rule

    def def_batch(self, rule: Callable) -> Callable:
        """rule(vals, dims, **params) -> (out, out_dim); without one vmap loops (a warning)."""
        batch_rules[self] = rule
        return rule

    def def_vjp(self, fwd: Callable, bwd: Callable) -> None:
        """Reverse-mode rule: fwd(*primals, **params) -> (out, residuals) and
        bwd(residuals, ct, **params) -> a tuple with one cotangent per operand."""
        from fnad.custom import vjp_as_jvp_rule
        jvp_rules[self] = vjp_as_jvp_rule(self, fwd, bwd)

    def __repr__(self):
        return self.name

    def __reduce__(self):
        """fnad's primitives pickle by name (the same object comes back, its rules with it);
        a user's primitive does not pickle: its rules live in this process only."""
        if builtin_primitive(self.name) is not self:
            import pickle
            raise pickle.PicklingError(f"primitive '{self.name}' is not one of fnad's: it "
                                       "cannot be pickled (its rules live in this process)")
        return builtin_primitive, (self.name,)


_builtins: dict[str, Primitive | None] = {}     # name -> fnad's primitive (None: two share it)
_builtins_seen = [0]                             # len(sys.modules) at the last scan


def builtin_primitive(name: str) -> Primitive | None:
    """fnad's own primitive named `name` (a top-level object of a fnad module), or None: a
    user's primitive, or a name two of fnad's share. A program stored on disk names its
    primitives; another process finds fnad's by name, never a user's (whose rules and
    impls are not stored with it)."""
    if name not in _builtins and len(sys.modules) != _builtins_seen[0]:
        _builtins_seen[0] = len(sys.modules)
        found: dict[str, set] = {}
        for modname, mod in list(sys.modules.items()):
            if mod is not None and (modname == "fnad" or modname.startswith("fnad.")):
                for v in list(vars(mod).values()):
                    if type(v) is Primitive:
                        found.setdefault(v.name, set()).add(v)
        _builtins.clear()
        _builtins.update({n: next(iter(ps)) if len(ps) == 1 else None
                          for n, ps in found.items()})
    return _builtins.get(name)


def abstract_eval(prim: Primitive, avals, params) -> list[ShapedArray]:
    """Output avals of `prim` applied to `avals` (always a list)."""
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise NotImplementedError(f"primitive '{prim.name}' has no abstract evaluation rule")
    out = rule(*avals, **params)
    return list(out) if prim.multiple_results else [out]


def shape_error(prim_name: str, msg: str) -> ShapeError:
    """A ShapeError naming the primitive and the user's source line."""
    return ShapeError(f"{prim_name}: {msg}{_at_user_line()}")


# ---- the current trace ----------------------------------------------------------
class Trace:
    """A transformation in progress. `parent` is the trace its rules bind on."""

    def __init__(self, parent: Trace | None, description: str = ""):
        self.parent = parent
        self.ancestors: frozenset = (parent.ancestors | {parent}) if parent else frozenset()
        self.description = description
        self.where = user_frame() if parent is not None else None
        self.alive = True

    def process_primitive(self, prim: Primitive, args, params):
        raise NotImplementedError

    def check_foreign(self, x: Tracer) -> None:
        """`x` is a tracer not of this trace: fine if an ancestor's, else it escaped."""
        if x._trace not in self.ancestors:
            raise escaped_tracer_error(x)

    def __repr__(self):
        return f"{type(self).__name__}({self.description})"


class _TraceState(threading.local):
    trace: Trace  # set below to the eval trace for each thread
    # (interpreter frame, source line, note) of the staged eqn being run: see eqn_source
    source: tuple | None = None


_state = _TraceState()


def current_trace() -> Trace:
    return _state.trace


class set_current_trace:
    """Context manager: make `trace` the current one (a plain class: it is hot)."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _state.trace
        _state.trace = self.trace

    def __exit__(self, *exc):
        _state.trace = self.prev


class new_trace(set_current_trace):
    """Run a transformation's body: make `trace` current, and retire it on exit."""

    __slots__ = ()

    def __enter__(self):
        super().__enter__()
        return self.trace

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.trace.alive = False


class gc_paused:
    """Context manager: no automatic cyclic garbage collection inside (jit's tracing, the
    passes and code generation). They allocate many objects, freed by reference counting,
    and meanwhile the collector would walk the young ones again and again and the whole
    heap now and then. Re-entrant; restores the previous state on exit."""

    __slots__ = ("was_enabled",)

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        if self.was_enabled:
            gc.disable()

    def __exit__(self, *exc):
        if self.was_enabled:
            gc.enable()


def escaped_tracer_error(x: Tracer) -> UnexpectedTracerError:
    trace = x._trace
    state = "has already finished" if not trace.alive else "is not active here"
    made = f" The tracer was created at {x._where}." if getattr(x, "_where", None) else ""
    called = f" (called at {trace.where})" if trace.where else ""
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer {x.aval.str_short()}: it belongs to "
        f"{trace.description or type(trace).__name__}{called}, which {state}.{made} "
        "This usually means a traced value was stored in a global, a closure or an "
        "attribute and used later. Pass values in as arguments and return them as "
        "outputs instead of keeping them as side effects.")


# ---- tracers and arrays ---------------------------------------------------------
class Tracer:
    """A value inside a transformation; subclasses pair one with each Trace kind."""

    __slots__ = ("_trace", "__weakref__")
    __array_priority__ = 100

    aval: ShapedArray  # provided by each subclass

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def to_concrete_value(self):
        """The concrete value behind this tracer if it has one (JVP of eager), else None."""
        return None

    def _concrete(self, what: str, error_type, advice: str):
        value = self.to_concrete_value()
        if value is not None:
            return value
        trace = self._trace
        raise error_type(
            f"Attempted {what} of a traced array {self.aval.str_short()} inside "
            f"{trace.description or type(trace).__name__}{_at_user_line()}. "
            f"Its value is not known while tracing. {advice}")

    def __bool__(self):
        v = self._concrete("boolean conversion (Python `if`, `while`, `and`/`or`)",
                           TracerBoolConversionError,
                           "Use fnad.numpy.where or fnad.lax.cond / fnad.lax.select "
                           "instead of Python control flow on array values, or mark the "
                           "argument static (jit's static_argnums).")
        return bool(v)

    def __int__(self):
        v = self._concrete("int() conversion", TracerIntegerConversionError,
                           "Keep the value an array (x.astype(int) instead of int(x)), "
                           "use lax.dynamic_slice for traced indices, or mark the "
                           "argument static (jit's static_argnums).")
        return int(v)

    def __index__(self):
        v = self._concrete("use as a Python index (operator.index)",
                           TracerIntegerConversionError,
                           "Use lax.dynamic_slice / fnad.numpy.take for traced indices, "
                           "or mark the argument static (jit's static_argnums).")
        return int(v)

    def __float__(self):
        return float(self._concrete("float() conversion", ConcretizationTypeError,
                                    "Keep the value an array instead of a Python float."))

    def __complex__(self):
        return complex(self._concrete("complex() conversion", ConcretizationTypeError,
                                      "Keep the value an array."))

    def item(self):
        return self._concrete(".item()", ConcretizationTypeError,
                              "Keep the value an array inside the function.").item()

    def tolist(self):
        return self._concrete(".tolist()", ConcretizationTypeError,
                              "Keep the value an array inside the function.").tolist()

    def __array__(self, dtype=None, copy=None):
        raise TracerArrayConversionError(
            f"The numpy.ndarray conversion method __array__() was called on a traced "
            f"array {self.aval.str_short()} inside "
            f"{self._trace.description or type(self._trace).__name__}{_at_user_line()}. "
            "NumPy functions cannot run on traced values: use fnad.numpy instead of numpy.")

    def __hash__(self):
        raise TypeError(f"unhashable type: traced array {self.aval.str_short()}")

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"


class _ArrayType(type):
    """Array's metaclass: `isinstance(x, Array)` is also True for a Tracer, as
    `isinstance(tracer, jax.Array)` is in jax (user code tests for arrays so, under
    transformations too). Code that means a concrete array asks `type(x) is Array`."""

    def __instancecheck__(cls, x) -> bool:
        return type.__instancecheck__(cls, x) or isinstance(x, Tracer)


class Array(metaclass=_ArrayType):
    """An fnad array: one backend buffer plus its abstract value."""

    __slots__ = ("_value", "aval", "_backend", "__weakref__")
    __array_priority__ = 100

    def __init__(self, value, aval: ShapedArray, backend):
        self._value = value
        self.aval = aval
        self._backend = backend

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    backend = property(lambda self: self._backend.name)

    def __array__(self, dtype=None, copy=None):
        out = self._backend.to_numpy(self._value)
        if copy:            # np.array(x) asks for a copy: never hand out the buffer itself
            return np.array(out, dtype=dtype, copy=True)
        return out if dtype is None else out.astype(dtype, copy=False)

    def to_concrete_value(self):
        return self._backend.to_numpy(self._value)

    def block_until_ready(self):
        self._backend.block_until_ready(self._value)
        return self

    def devices(self) -> set:
        """The set of Devices the array is on (one: fnad does not shard)."""
        return {self.device}

    @property
    def device(self):
        """The Device the array is on (fnad.devices.Device)."""
        from fnad.devices import device_of
        return device_of(self)

    @property
    def sharding(self):
        """Its sharding: a SingleDeviceSharding of its device (fnad runs on one device, so
        a NamedSharding given to device_put is not kept: every sharding is replicated)."""
        from fnad.sharding import SingleDeviceSharding
        return SingleDeviceSharding(self.device)

    def copy_to_host_async(self) -> None:
        """Accepted as in JAX; `np.asarray(x)` copies when it is called (a no-op here)."""

    def to_device(self, device, /, *, stream=None):
        """The array on `device` (a Device, a backend name or a platform): device_put."""
        from fnad.devices import device_put
        return device_put(self, device)

    is_fully_addressable = property(lambda self: True)     # one process, one device
    is_fully_replicated = property(lambda self: True)

    def addressable_data(self, index: int):
        """The array itself for shard 0: fnad arrays are not sharded."""
        if index != 0:
            raise IndexError(f"addressable_data: an fnad Array has one shard (index 0), "
                             f"got index {index}")
        return self

    def __dlpack__(self, **kwargs):
        """DLPack export of the buffer (NumPy's for host backends, jax's for xla)."""
        value = self._value
        if not hasattr(value, "__dlpack__"):
            value = np.asarray(self)
        return value.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        value = self._value
        if not hasattr(value, "__dlpack_device__"):
            value = np.asarray(self)
        return value.__dlpack_device__()

    def __bool__(self):
        return bool(np.asarray(self))

    def __int__(self):
        return int(np.asarray(self))

    def __index__(self):
        if not dtypes.is_int(self.dtype) or self.shape:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(np.asarray(self))

    def __float__(self):
        return float(np.asarray(self))

    def __complex__(self):
        return complex(np.asarray(self))

    def item(self):
        return np.asarray(self).item()

    def tolist(self):
        return np.asarray(self).tolist()

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    __hash__ = None  # arrays are mutable-looking values in NumPy too

    def __repr__(self):
        body = np.array2string(np.asarray(self), separator=", ", prefix="Array(")
        weak = ", weak_type=True" if self.aval.weak_type else ""
        return f"Array({body}, dtype={self.dtype.name}{weak})"

    def __str__(self):
        return str(np.asarray(self))

    def __format__(self, spec):
        return format(np.asarray(self).item() if not self.shape else np.asarray(self), spec)

    def __reduce__(self):  # pickling: rebuild from a NumPy value on the numpy backend
        return (_array_from_numpy, (np.asarray(self), self.aval.weak_type))


def _array_from_numpy(value, weak_type=False):
    from fnad.backends import get_backend
    aval = ShapedArray(value.shape, value.dtype, weak_type)
    return Array(value, aval, get_backend("numpy"))


# ---- eager evaluation -------------------------------------------------------------
class EvalTrace(Trace):
    """The root trace: run each primitive now, on the backend of its array operands."""

    def __init__(self):
        super().__init__(None, "eager evaluation")

    def process_primitive(self, prim, args, params):
        # Fast path: every operand is an fnad Array on one backend (the common case).
        backend = None
        vals = []
        avals = []
        for x in args:
            if type(x) is not Array:
                return self._process_general(prim, args, params)
            b = x._backend
            if b is not backend:
                if backend is not None:
                    return self._process_general(prim, args, params)
                backend = b
            vals.append(x._value)
            avals.append(x.aval)
        if backend is None:
            return self._process_general(prim, args, params)
        rule = abstract_eval_rules.get(prim)
        impl = backend.impl_rules.get(prim)
        if rule is None or impl is None:
            return self._process_general(prim, args, params)
        out_aval = rule(*avals, **params)
        out = impl(*vals, **params)
        if config.jax_debug_nans or config.jax_debug_infs:
            _check_nans(prim, out if prim.multiple_results else [out], backend)
        if prim.multiple_results:
            return [Array(o, a, backend) for o, a in zip(out, out_aval)]
        return Array(out, out_aval, backend)

    def _process_general(self, prim, args, params):
        """Operands that are Python scalars, NumPy values, or on several backends;
        and the higher-order primitives (`eager_rules`)."""
        eager = eager_rules.get(prim)
        if eager is not None:
            for x in args:
                if isinstance(x, Tracer):
                    raise escaped_tracer_error(x)
            return eager(*args, **params)
        # The operands' backend. Arrays on the numpy backend (host memory, where eager
        # constants and seeds are made) follow the others to theirs, as uncommitted
        # values do in JAX; two other backends in one operation are an error.
        arrays = [x for x in args if type(x) is Array]
        backend = next((x._backend for x in arrays if x._backend.name != "numpy"),
                       arrays[0]._backend if arrays else None)
        vals = []
        avals = []
        for x in args:
            if type(x) is Array:
                b = x._backend
                if b is not backend:
                    if b.name != "numpy":
                        raise ValueError(
                            f"{prim.name}: operands live on different backends "
                            f"({backend.name} and {b.name}){_at_user_line()}; move them "
                            f"with fnad.device_put")
                    vals.append(backend.device_put(x._value))
                else:
                    vals.append(x._value)
                avals.append(x.aval)
            elif isinstance(x, Tracer):
                raise escaped_tracer_error(x)
            else:
                aval = get_aval(x)
                avals.append(aval)
                vals.append(x)
        if backend is None:
            backend = default_backend()
        for i, x in enumerate(vals):
            if type(args[i]) is not Array:
                vals[i] = backend.device_put(canonicalize_value(x, avals[i]))
        out_avals = abstract_eval(prim, avals, params)
        impl = backend.impl_rules.get(prim)
        if impl is None:
            raise no_impl_error(prim, backend.name)
        out = impl(*vals, **params)
        if config.jax_debug_nans or config.jax_debug_infs:
            _check_nans(prim, out if prim.multiple_results else [out], backend)
        if prim.multiple_results:
            return [Array(o, a, backend) for o, a in zip(out, out_avals)]
        return Array(out, out_avals[0], backend)


def no_impl_error(prim: Primitive, backend_name: str) -> NoImplementationError:
    from fnad.backends import backends_with_impl
    have = backends_with_impl(prim)
    listing = ", ".join(have) if have else "none"
    return NoImplementationError(
        f"primitive '{prim.name}' has no implementation on the '{backend_name}' backend "
        f"(backends with one: {listing}){_at_user_line()}")


def _check_nans(prim, outs, backend):
    for out in outs:
        v = backend.to_numpy(out)
        if not dtypes.is_inexact(v.dtype):
            continue
        if config.jax_debug_nans and np.isnan(v).any():
            raise FloatingPointError(
                f"invalid value (nan) encountered in {prim.name}{_at_user_line()}")
        if config.jax_debug_infs and np.isinf(v).any():
            raise FloatingPointError(
                f"invalid value (inf) encountered in {prim.name}{_at_user_line()}")


eval_trace = EvalTrace()
_TraceState.trace = eval_trace


def default_backend():
    from fnad.backends import get_backend
    return get_backend(config.jax_default_backend)

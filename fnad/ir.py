"""fnad.ir: the jaxpr IR: Var, Literal, JaxprEqn, Jaxpr, ClosedJaxpr.

Owns the data structures every transformation and backend reads, their
pretty-printer, the typechecker, `eval_jaxpr` (an interpreter that binds each
equation on the current trace, so evaluating a jaxpr inside grad or vmap
transforms it) and `fingerprint` (a digest of a program that is the same in every
process). Imports only fnad.core and fnad.dtypes.
"""
from __future__ import annotations

import enum
import hashlib
import marshal
from collections.abc import Sequence
from typing import Any

import numpy as np

from fnad import core
from fnad.core import ShapedArray


class Var:
    """A variable: identity is the name; the aval says its type."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val!r}:{self.aval.str_short()})"


Atom = Var | Literal


class JaxprEqn:
    """`outvars = primitive[params](*invars)`, with the user's line that produced it."""

    # `_has_subs`: whether a param holds a jaxpr, computed once by fnad.passes (every pass
    # asks it of every equation); params are never changed in place.
    __slots__ = ("primitive", "invars", "params", "outvars", "source_info", "_has_subs")

    def __init__(self, primitive, invars: list, params: dict, outvars: list[Var],
                 source_info: str | None = None):
        self.primitive = primitive
        self.invars = invars
        self.params = params
        self.outvars = outvars
        self.source_info = source_info
        self._has_subs = None

    def replace(self, **kw) -> JaxprEqn:
        fields = {"primitive": self.primitive, "invars": self.invars, "params": self.params,
                  "outvars": self.outvars, "source_info": self.source_info}
        fields.update(kw)
        new = JaxprEqn(**fields)
        if "params" not in kw:
            new._has_subs = self._has_subs
        return new

    def __repr__(self):
        return pp_eqn(self, _Names()).strip()


class Jaxpr:
    """A program: constvars and invars in, eqns in order, outvars out."""

    __slots__ = ("constvars", "invars", "eqns", "outvars")

    def __init__(self, constvars: list[Var], invars: list[Var], eqns: list[JaxprEqn],
                 outvars: list):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self):
        return pp_jaxpr(self)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):  # IPython / notebooks
        p.text(str(self))


class ClosedJaxpr:
    """A Jaxpr with the values of its constvars (and, once jit compiled it, the compiled
    callables per backend name in `compiled`)."""

    __slots__ = ("jaxpr", "consts", "compiled")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self.compiled: dict = {}

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)


# ---- evaluation ------------------------------------------------------------------
def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence, *args) -> list:
    """Run `jaxpr` by binding each equation on the current trace."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env: dict[Var, Any] = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        ins = [env[v] if type(v) is Var else v.val for v in eqn.invars]
        with core.eqn_source(eqn.source_info):      # errors name the line that staged it
            outs = eqn.primitive.bind(*ins, **eqn.params)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = outs
    return [env[v] if type(v) is Var else v.val for v in jaxpr.outvars]


# ---- typechecking ------------------------------------------------------------------
class JaxprTypeError(TypeError):
    """A jaxpr that is not well formed: names the equation and what is wrong."""


def _compatible(a: ShapedArray, b: ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype


def typecheck_jaxpr(jaxpr: Jaxpr) -> None:
    """Check that vars are bound once before use and that each eqn's types agree
    with its primitive's abstract evaluation. Raises JaxprTypeError."""
    bound: set[Var] = set()

    def bind(v: Var, what: str):
        if v in bound:
            raise JaxprTypeError(f"variable {v} bound twice ({what})")
        bound.add(v)

    def read(a, where: str) -> ShapedArray:
        if type(a) is Literal:
            return a.aval
        if a not in bound:
            raise JaxprTypeError(f"variable {a} used before it is bound, in {where}")
        return a.aval

    for v in jaxpr.constvars:
        bind(v, "constvar")
    for v in jaxpr.invars:
        bind(v, "invar")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i} ({eqn.primitive.name})"
        in_avals = [read(a, where) for a in eqn.invars]
        for param in eqn.params.values():
            for sub in _sub_jaxprs(param):
                typecheck_jaxpr(sub)
        try:
            expected = core.abstract_eval(eqn.primitive, in_avals, eqn.params)
        except TypeError as e:
            raise JaxprTypeError(f"{where}: {e}") from e
        if len(expected) != len(eqn.outvars):
            raise JaxprTypeError(f"{where}: {len(eqn.outvars)} outputs bound, "
                                 f"the rule gives {len(expected)}")
        for v, aval in zip(eqn.outvars, expected):
            if not _compatible(v.aval, aval):
                raise JaxprTypeError(f"{where}: output bound as {v.aval.str_short()} but "
                                     f"the rule gives {aval.str_short()}")
            bind(v, where)
    for a in jaxpr.outvars:
        read(a, "the outputs")


def _sub_jaxprs(param):
    if isinstance(param, ClosedJaxpr):
        yield param.jaxpr
    elif isinstance(param, Jaxpr):
        yield param
    elif isinstance(param, tuple):
        for p in param:
            yield from _sub_jaxprs(p)


# ---- fingerprints ------------------------------------------------------------------
class _Unstable(Exception):
    """A value inside a jaxpr with no form that another process would read the same."""


def fingerprint(closed: ClosedJaxpr) -> bytes | None:
    """A digest of the program `closed` that every process computes the same for the same
    program: its equations (fnad's primitives by name, their params), types, literals and
    constants, variables numbered in order of appearance (source lines are left out). None
    where the program holds something without such a form: a user's primitive (its rules
    live in this process only, core.builtin_primitive), a callable, an object array or an
    object of a type not listed in `_stable`. Two programs with one fingerprint compute
    the same thing, so a compiled program stored on disk can be found by it. (Params that
    only transformations read, such as a custom_jvp's rule, have a fixed form: the
    fingerprint is of what evaluating the program computes.)"""
    if not isinstance(closed, ClosedJaxpr):
        raise TypeError(f"fingerprint takes a ClosedJaxpr (what fnad.make_jaxpr returns), "
                        f"got {type(closed).__name__}")
    try:
        form = _Fingerprint().closed(closed)
    except _Unstable:
        return None
    return hashlib.sha256(marshal.dumps(form, 2)).digest()   # (2: no references, whose
    #                                  use depends on reference counts, only the structure)


class _Fingerprint:
    """Turns a closed jaxpr into nested tuples of ints, floats, strs and bytes (marshal's
    types): every tuple starts with a tag that says what it holds, so no two different
    programs give the same form."""

    def __init__(self):
        self.vars: dict[Var, int] = {}
        self.avals: dict[ShapedArray, tuple] = {}
        self.builtin: dict[core.Primitive, bool] = {}     # fnad's own primitive (once per prim)

    def closed(self, c: ClosedJaxpr) -> tuple:
        return ("closed", self.jaxpr(c.jaxpr), ("tuple", *map(_stable_const, c.consts)))

    def jaxpr(self, j: Jaxpr) -> tuple:
        binder, atom, value, builtin = self.binder, self.atom, self.value, self.builtin
        form = ["jaxpr", ("tuple", *map(binder, j.constvars)),
                ("tuple", *map(binder, j.invars))]
        for e in j.eqns:
            prim = e.primitive
            ok = builtin.get(prim)
            if ok is None:
                ok = builtin[prim] = core.builtin_primitive(prim.name) is prim
            if not ok:
                raise _Unstable
            params = e.params
            form.append(("eqn", prim.name,
                         ("tuple", *[(k, value(params[k])) for k in sorted(params)]),
                         ("tuple", *map(atom, e.invars)), ("tuple", *map(binder, e.outvars))))
        form.append(("tuple", *map(atom, j.outvars)))
        return tuple(form)

    def binder(self, v: Var) -> tuple:
        n = self.vars[v] = len(self.vars)
        return ("var", n, self.aval(v.aval))

    def atom(self, a) -> tuple:
        if type(a) is Literal:
            return ("literal", _stable(a.val), self.aval(a.aval))
        n = self.vars.get(a)
        return self.binder(a) if n is None else ("var", n)

    def aval(self, a: ShapedArray) -> tuple:
        form = self.avals.get(a)
        if form is None:
            if type(a) is not ShapedArray:
                raise _Unstable
            form = self.avals[a] = ("aval", tuple(map(int, a.shape)), _stable_dtype(a.dtype),
                                    bool(a.weak_type))
        return form

    def value(self, x):
        t = type(x)
        if t in _PLAIN:
            return x                               # (as _stable: marshal keeps them apart)
        if t is ShapedArray:
            return self.aval(x)
        if t is tuple and all(type(i) is int for i in x):       # axes, shapes
            return ("tuple", *x)
        if isinstance(x, ClosedJaxpr):
            return self.closed(x)
        if isinstance(x, Jaxpr):
            return self.jaxpr(x)
        return _stable(x, self.value)


_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})
_DTYPE_FORMS: dict = {}                    # np.dtype -> _stable_dtype's form


def _stable_dtype(dt) -> tuple:
    form = _DTYPE_FORMS.get(dt)
    if form is None:
        d = np.dtype(dt)
        if d.hasobject or d.fields is not None:
            raise _Unstable
        form = ("dtype", d.name, d.str)
        if len(_DTYPE_FORMS) < 1024:
            _DTYPE_FORMS[dt] = form
    return form


def _stable_const(c) -> tuple:
    return _stable(np.asarray(c))


def _stable(x, inner=None):
    """x as marshal's types, tagged by kind; `inner` turns the items of containers (it may
    know about jaxprs); raises _Unstable for anything else."""
    inner = inner or _stable
    t = type(x)
    if x is None or t in (bool, int, float, complex, str, bytes):
        return x                               # marshal keeps these types apart
    if t is tuple or t is list:
        return (t.__name__, *map(inner, x))
    if t is dict:
        return ("dict", *sorted(((_stable(k), inner(v)) for k, v in x.items()), key=repr))
    if t is slice:
        return ("slice", inner(x.start), inner(x.stop), inner(x.step))
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return _stable_dtype(x)
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        a = np.ascontiguousarray(x)
        return ("array", _stable_dtype(a.dtype), tuple(a.shape), a.tobytes())
    module = getattr(t, "__module__", "") or ""
    if module == "fnad" or module.startswith("fnad."):         # fnad's own param types
        form = getattr(t, "fingerprint_form", None)            # what evaluation never reads
        if form is not None:
            return form
        if isinstance(x, enum.Enum):
            return ("enum", module, t.__qualname__, x.name)
        if isinstance(x, tuple) and hasattr(t, "_fields"):     # NamedTuple
            return ("namedtuple", module, t.__qualname__, *map(inner, x))
    raise _Unstable


# ---- printing ----------------------------------------------------------------------
class _Names:
    """Letters for vars in order of appearance: a..z, ba, bb, ... as JAX prints."""

    def __init__(self):
        self.names: dict[Var, str] = {}

    def __call__(self, v: Var) -> str:
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = _letters(len(self.names))
        return name


def _letters(n: int) -> str:
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


def _pp_literal(lit: Literal) -> str:
    v = lit.val
    if isinstance(v, np.ndarray):
        v = v.item()
    elif isinstance(v, np.generic):
        v = v.item()
    return f"{v!r}:{lit.aval.str_short()}"


def _pp_atom(a, names: _Names) -> str:
    return _pp_literal(a) if type(a) is Literal else names(a)


def _pp_binder(v: Var, names: _Names) -> str:
    return f"{names(v)}:{v.aval.str_short()}"


def _pp_param(value, names: _Names, indent: int) -> str:
    if isinstance(value, (ClosedJaxpr, Jaxpr)):
        jaxpr = value.jaxpr if isinstance(value, ClosedJaxpr) else value
        return pp_jaxpr(jaxpr, indent=indent + 2, names=names).lstrip()
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, tuple) and any(isinstance(v, (ClosedJaxpr, Jaxpr)) for v in value):
        return "(" + ", ".join(_pp_param(v, names, indent) for v in value) + ")"
    return repr(value)


def pp_eqn(eqn: JaxprEqn, names: _Names, indent: int = 4) -> str:
    lhs = " ".join(_pp_binder(v, names) for v in eqn.outvars) or "_"
    params = ""
    if eqn.params:
        params = "[" + " ".join(f"{k}={_pp_param(v, names, indent)}"
                                for k, v in sorted(eqn.params.items())) + "]"
    rhs = " ".join(_pp_atom(a, names) for a in eqn.invars)
    return f"{' ' * indent}{lhs} = {eqn.primitive.name}{params} {rhs}".rstrip()


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0, names: _Names | None = None) -> str:
    """JAX's layout: `{ lambda consts ; args . let eqns in (outs) }`."""
    names = _Names() if names is None else names
    pad = " " * indent
    consts = " ".join(_pp_binder(v, names) for v in jaxpr.constvars)
    args = " ".join(_pp_binder(v, names) for v in jaxpr.invars)
    lines = [f"{pad}{{ lambda {consts}{' ' if consts else ''}; {args}. let"]
    lines += [pp_eqn(e, names, indent + 4) for e in jaxpr.eqns]
    outs = ", ".join(_pp_atom(a, names) for a in jaxpr.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
    return "\n".join(lines)

"""fnad.debug: printing and Python callbacks that work under every transformation.

Owns the `debug_callback` primitive and its rules, and the user API `fnad.debug.print`
and `fnad.debug.callback` (JAX's `jax.debug.print` / `jax.debug.callback`). The
primitive has no outputs; its only parameter that matters is the Python function to
call (wrapped in `_Callback`, hashed by identity) with the *concrete* values of its
operands, as fnad Arrays holding NumPy copies (`str` of one is NumPy's, `[1. 2.]`):

- eagerly (and when a staged jaxpr is evaluated) it calls the function now;
- under jvp/grad it calls it on the primal values (no tangent outputs); under grad the
  equation's inputs are all known, so linearize runs it during the forward pass, once;
- under vmap it calls it once per batch member, in order (as JAX does);
- under make_jaxpr it stages as `debug_callback[callback=... ordered=...]` and calls
  nothing until the jaxpr is evaluated.

It is listed in `core.effectful_primitives`, so dead-code elimination keeps it. fnad
runs equations in program order, so `ordered=True` and `ordered=False` behave the same.
"""
from __future__ import annotations

import string
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fnad import core, tree_util
from fnad.core import Array, Primitive, get_aval
from fnad.primitives.shape_ops import index_in_dim

__all__ = ["breakpoint", "callback", "print"]


class _Callback:
    """A function taking the flat operand values, as a jaxpr parameter (also
    fnad.callback's; what it returns is the function's result).

    Hashed and compared by identity (functions and treedefs are not values a jaxpr can
    compare); `static` holds the leaves that are not arrays (strings...), passed through
    unchanged as JAX does.
    """

    __slots__ = ("fn", "in_tree", "static", "name", "__weakref__")

    def __init__(self, fn: Callable, in_tree, static: dict[int, Any], name: str):
        self.fn = fn
        self.in_tree = in_tree
        self.static = static
        self.name = name

    def __call__(self, *dyn_vals) -> Any:
        it = iter(dyn_vals)
        n = len(self.static) + len(dyn_vals)
        leaves = [self.static[i] if i in self.static else next(it) for i in range(n)]
        args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return self.name


def _split_args(args: tuple, kwargs: dict) -> tuple[Any, list, dict[int, Any]]:
    """(treedef, array leaves, {position: non-array leaf}) of (args, kwargs)."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    dyn, static = [], {}
    for i, leaf in enumerate(leaves):
        try:
            get_aval(leaf)
        except (TypeError, ValueError, OverflowError):
            static[i] = leaf
        else:
            dyn.append(leaf)
    return in_tree, dyn, static


def _host_array(x) -> Array:
    """An operand as an fnad Array on the NumPy backend, over a copy of its value (JAX
    hands callbacks jax.Arrays on the CPU; this one reprs the same, `Array([1., 2.], ...)`,
    and the callback may keep it)."""
    from fnad.backends import get_backend
    aval = get_aval(x)                       # Python scalars: weakly typed, as in JAX
    value = np.array(x if type(x) is Array else core.canonicalize_value(x, aval), copy=True)
    return Array(value, aval, get_backend("numpy"))


# ---- debug_callback -------------------------------------------------------------------------
debug_callback_p = Primitive("debug_callback", multiple_results=True)
core.effectful_primitives.add(debug_callback_p)


def debug_callback_eager(*args, callback: _Callback, ordered: bool):
    callback(*[_host_array(x) for x in args])
    return []
core.eager_rules[debug_callback_p] = debug_callback_eager


def debug_callback_abstract_eval(*avals, callback: _Callback, ordered: bool):
    return []                                                  # no outputs
core.abstract_eval_rules[debug_callback_p] = debug_callback_abstract_eval


def debug_callback_jvp(primals, tangents, *, callback: _Callback, ordered: bool):
    # Only the primals are printed; the tangents are not values the user asked for.
    debug_callback_p.bind(*primals, callback=callback, ordered=ordered)
    return [], []
core.jvp_rules[debug_callback_p] = debug_callback_jvp
# No transpose rule: the equation has no outputs, so the backward pass never reaches it
# (and under grad its inputs are primals, which linearize runs at once, not staged).


def debug_callback_batch(vals, dims, *, callback: _Callback, ordered: bool):
    # One call per batch member, in order (JAX's rule): unbatched operands are shared.
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    for i in range(size):
        member = [v if d is None else index_in_dim(v, i, d, keepdims=False)
                  for v, d in zip(vals, dims)]
        debug_callback_p.bind(*member, callback=callback, ordered=ordered)
    return [], []
core.batch_rules[debug_callback_p] = debug_callback_batch


def _bind(fn: Callable, name: str, args: tuple, kwargs: dict, ordered: bool) -> None:
    in_tree, dyn, static = _split_args(args, kwargs)
    debug_callback_p.bind(*dyn, callback=_Callback(fn, in_tree, static, name),
                          ordered=bool(ordered))


# ---- user API ---------------------------------------------------------------------------------
def callback(callback: Callable[..., Any] | None = None, *args, ordered: bool = False,
             partitioned: bool = False, **kwargs):
    """Call `callback(*args, **kwargs)` with the concrete values of `args`, under any
    transformation (`jax.debug.callback`).

    Array leaves of the pytrees `args`/`kwargs` arrive as concrete fnad Arrays holding
    NumPy copies (as JAX passes jax.Arrays on the CPU; `np.asarray` on one is free); other
    leaves (strings, ...) arrive unchanged. The return value is
    ignored. Under vmap the callback runs once per batch member; under grad once, on the
    primal values; under make_jaxpr it is staged and runs when the jaxpr is evaluated.
    `ordered` and `partitioned` are accepted for JAX compatibility: fnad runs callbacks
    in program order on one device. Also usable as JAX's two-call form,
    `callback(ordered=True)(fn, *args)`.
    """
    del partitioned

    def _callback(fn: Callable[..., Any], *c_args, **c_kwargs) -> None:
        if not callable(fn):
            raise TypeError("first argument to fnad.debug.callback must be callable, but got "
                            f"an object of type {type(fn).__name__}")
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        _bind(fn, name, c_args, c_kwargs, ordered)

    if callback is not None:
        _callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("fnad.debug.callback received unexpected arguments in the two-call "
                        f"form: args={args} kwargs={kwargs}")
    return _callback


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments without formatting anything."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `fnad.debug.print`: {unused}")
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(
                f"Unused keyword arguments to `fnad.debug.print`: {unused_kw}. You may be "
                "passing an f-string (f\"{x}\") into fnad.debug.print; pass a plain string "
                "and the values as arguments instead (\"{x}\", x=x).")


_checker = _FormatChecker()


def _format_and_write(fmt: str, printoptions: dict, has_placeholders: bool, *args, **kwargs):
    with np.printoptions(**printoptions):
        if has_placeholders:
            msg = fmt.format(*args, **kwargs)
        else:                   # as JAX: no leading field, so the values are appended
            msg = " ".join((fmt, *(str(a) for a in args)))
    sys.stdout.write(msg + "\n")


def print(fmt: str | None = None, *args, ordered: bool = False, partitioned: bool = False,
          skip_format_check: bool = False, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the concrete values, under any
    transformation (`jax.debug.print`).

    Values are formatted as NumPy arrays (`[1. 2.]`), under the NumPy print options in
    force at the call. Not an f-string: write `print("x = {x}", x=x)`. Under vmap one line
    per batch member; under grad/jvp the primal values, once; under make_jaxpr nothing
    until the jaxpr is evaluated. A format string whose first part has no `{}` field gets
    the values appended, separated by spaces, as in JAX. Unused arguments are a
    ValueError (unless `skip_format_check`). `ordered` and `partitioned` are accepted for
    JAX compatibility (fnad prints in program order, on one device). Also usable as JAX's
    two-call form, `print(ordered=True)("x = {x}", x=x)`.
    """
    del partitioned

    def _print(fmt: str, *p_args, **p_kwargs) -> None:
        if not isinstance(fmt, str):
            raise TypeError(f"fnad.debug.print: the format must be a str, got "
                            f"{type(fmt).__name__}")
        if not skip_format_check:
            _checker.format(fmt, *p_args, **p_kwargs)
        has_placeholders = False
        if fmt:
            _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field_name is not None
        printoptions = np.get_printoptions()

        def write(*w_args, **w_kwargs):
            _format_and_write(fmt, printoptions, has_placeholders, *w_args, **w_kwargs)
        _bind(write, f"debug.print({fmt!r})", p_args, p_kwargs, ordered)

    if fmt is not None:
        _print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("fnad.debug.print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _print


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False, token=None, **kwargs):
    """Stop the program here and open a command-line debugger on the concrete values of
    the arrays in scope, under any transformation (jax.debug.breakpoint; fnad/debugger.py
    has the commands). Returns `token` unchanged."""
    from fnad.debugger import breakpoint as _breakpoint
    return _breakpoint(backend=backend, filter_frames=filter_frames, num_frames=num_frames,
                       ordered=ordered, token=token, **kwargs)

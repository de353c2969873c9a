"""fnad.numpy's function-applying routines: vectorize, apply_along_axis, apply_over_axes,
piecewise, fromfunction.

vectorize, apply_along_axis and fromfunction are fnad.vmap over the right axes (not Python
loops), so the function is traced once and the result composes with grad and jit.
piecewise evaluates every branch on all of x and selects, as JAX's vmap of a switch does.
"""
from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable

import numpy as np

from fnad.config import config
from fnad.core import Array
from fnad.numpy._core import ArrayLike, asarray, broadcast_shapes, canonicalize_axis
from fnad.numpy._core import check_arraylike, ensure_array

__all__ = ["apply_along_axis", "apply_over_axes", "fromfunction", "piecewise", "vectorize"]


def _vmap(fun, in_axes=0, out_axes=0):
    from fnad.batching import vmap
    return vmap(fun, in_axes=in_axes, out_axes=out_axes)


# ---- vectorize -------------------------------------------------------------------------------
_DIM = r"\w+"
_CORE_DIMS = f"(?:{_DIM}(?:,{_DIM})*)?"
_ARG = rf"\({_CORE_DIMS}\)"
_ARG_LIST = f"{_ARG}(?:,{_ARG})*"
_SIGNATURE = f"^{_ARG_LIST}->{_ARG_LIST}$"


def _parse_signature(signature: str):
    """'(m,n),(n)->(m)' -> ([('m', 'n'), ('n',)], [('m',)])."""
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    return ([tuple(re.findall(_DIM, arg)) for arg in re.findall(_ARG, part)]
            for part in sig.split("->"))


def _update_dim_sizes(sizes: dict, shape, core_dims, context: str, *, is_input: bool):
    n = len(core_dims)
    if is_input and len(shape) < n:
        raise ValueError(f"input with shape {shape!r} does not have enough dimensions for all "
                         f"core dimensions {core_dims!r} {context}")
    if not is_input and len(shape) != n:
        raise ValueError(f"output shape {shape!r} does not match core dimensions "
                         f"{core_dims!r} {context}")
    for dim, size in zip(core_dims, shape[len(shape) - n:] if n else ()):
        if sizes.setdefault(dim, size) != size:
            raise ValueError(f"inconsistent size for core dimension {dim!r}: {size!r} vs "
                             f"{sizes[dim]!r} {context}")


def _check_output_dims(func, sizes: dict, out_core_dims, context: str):
    def wrapped(*args):
        out = func(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if len(out_core_dims) != len(outs):
            raise TypeError(f"wrong number of output arguments: expected "
                            f"{len(out_core_dims)}, got {len(outs)} {context}")
        sizes_out = dict(sizes)
        for o, dims in zip(outs, out_core_dims):
            _update_dim_sizes(sizes_out, np.shape(o), dims, context, is_input=False)
        return out
    return wrapped


def _apply_excluded(func, excluded, args, kwargs):
    """func of the non-excluded arguments only (excluded ones bound as given)."""
    if not excluded:
        return func, args, kwargs
    dyn_args = [a for i, a in enumerate(args) if i not in excluded]
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
    static_args = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
                   if i < len(args)]
    static_kwargs = {k: v for k, v in kwargs.items() if k in excluded}

    def new_func(*args, **kwargs):
        args = list(args)
        for i, arg in static_args:
            args.insert(i, arg)
        return func(*args, **kwargs, **static_kwargs)
    return new_func, dyn_args, dyn_kwargs


def vectorize(pyfunc: Callable, *, excluded=frozenset(), signature: str | None = None):
    """`pyfunc` made to map over the leading (broadcast) axes of its array arguments with
    fnad.vmap, as jax.numpy.vectorize.

    Without `signature` pyfunc sees scalars; with a gufunc signature such as
    '(m,n),(n)->(m)' it sees the named trailing core dims. `excluded`: positions or
    keyword names of arguments passed through unchanged. Keyword arguments are never
    mapped over.
    """
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError("fnad.numpy.vectorize can only exclude integer or string arguments, "
                        f"but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        context = f"on vectorized function with excluded={excluded!r} and " \
                  f"signature={signature!r}"
        func, args, kwargs = _apply_excluded(pyfunc, excluded, args, kwargs)
        if signature is not None:
            in_core, out_core = _parse_signature(signature)
        else:
            in_core, out_core = [()] * len(args), None
        none_args = {i for i, a in enumerate(args) if a is None}
        if none_args:
            if any(in_core[i] != () for i in none_args):
                raise ValueError(f"Cannot pass None at locations {none_args} with "
                                 f"signature={signature!r}")
            func, args, _ = _apply_excluded(func, none_args, args, {})
            in_core = [d for i, d in enumerate(in_core) if i not in none_args]
        args = tuple(asarray(a) for a in args)
        if len(args) != len(in_core):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, "
                            f"got {len(args)} {context}")
        sizes: dict = {}
        loop_shapes = []
        for a, dims in zip(args, in_core):
            _update_dim_sizes(sizes, a.shape, dims, context, is_input=True)
            loop_shapes.append(a.shape[:a.ndim - len(dims)])
        bshape = broadcast_shapes(*loop_shapes, fun_name="vectorize")
        checked = func if out_core is None else _check_output_dims(func, sizes, out_core,
                                                                    context)
        checked = functools.partial(checked, **kwargs) if kwargs else checked
        if config.jax_numpy_rank_promotion != "allow":
            ranks = {a.ndim - len(d) for a, d in zip(args, in_core) if a.ndim}
            if len(ranks) > 1:
                msg = (f"operands with shapes {[a.shape for a in args]} require rank promotion "
                       f"for fnad.numpy.vectorize function with signature {signature}. Set "
                       "the jax_numpy_rank_promotion config option to 'allow' to disable "
                       "this message.")
                if config.jax_numpy_rank_promotion == "raise":
                    raise ValueError(msg)
                warnings.warn(msg, stacklevel=2)
        # Size-1 loop dims are squeezed and re-added; each other loop dim is one vmap.
        squeezed, rev_filled = [], []
        for a, dims in zip(args, in_core):
            loop = a.shape[:a.ndim - len(dims)]
            rev_filled.append(((1,) * (len(bshape) - len(loop)) + loop)[::-1])
            ones = tuple(i for i, d in enumerate(loop) if d == 1)
            squeezed.append(_squeeze(a, ones))
        vfunc, expand = checked, []
        for negdim, sizes_here in enumerate(zip(*rev_filled)):
            in_axes = tuple(None if s == 1 else 0 for s in sizes_here)
            if all(ax is None for ax in in_axes):
                expand.append(len(bshape) - 1 - negdim)
            else:
                vfunc = _vmap(vfunc, in_axes)
        result = vfunc(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(_expand(r, expand) for r in result)
        return _expand(result, expand)
    return wrapped


def _squeeze(a, axes):
    from fnad.numpy._shape import squeeze
    return squeeze(a, axes) if axes else a


def _expand(r, axes):
    from fnad.numpy._shape import expand_dims
    return expand_dims(ensure_array(r), tuple(sorted(axes)))


# ---- apply_along_axis, apply_over_axes, fromfunction ----------------------------------------
def apply_along_axis(func1d: Callable, axis: int, arr: ArrayLike, *args, **kwargs) -> Array:
    """func1d(1-D slice, *args, **kwargs) for each 1-D slice of `arr` along `axis`; the
    function's output dims replace that axis. Vectorized with fnad.vmap."""
    check_arraylike("apply_along_axis", arr)
    arr = ensure_array(arr)
    axis = canonicalize_axis(axis, arr.ndim)

    def func(a):
        return func1d(a, *args, **kwargs)
    for i in range(1, arr.ndim - axis):
        func = _vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = _vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func: Callable, a: ArrayLike, axes) -> Array:
    """func(a, axis) applied for each axis in turn, each result keeping a's rank (a
    reduced axis is put back with size 1)."""
    from fnad.numpy._shape import expand_dims
    check_arraylike("apply_over_axes", a)
    a = ensure_array(a)
    for axis in axes:
        b = func(a, axis)
        if b.ndim == a.ndim:
            a = b
        elif b.ndim == a.ndim - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError(f"function is not returning an array of the correct shape: got "
                             f"rank {b.ndim} from an input of rank {a.ndim}")
    return a


def fromfunction(function: Callable, shape, *, dtype=float, **kwargs) -> Array:
    """function(i0, i1, ...) over the index grid of `shape`, each index of `dtype`; the
    function is vmapped, so it sees scalar indices."""
    from fnad.numpy._creation import _shape, arange
    shape = _shape(shape)
    for i in range(len(shape)):
        in_axes = [0 if i == j else None for j in range(len(shape))]
        function = _vmap(function, in_axes=tuple(in_axes[::-1]))
    return function(*(arange(s, dtype=dtype) for s in shape), **kwargs)


# ---- piecewise -------------------------------------------------------------------------------
def piecewise(x: ArrayLike, condlist, funclist, *args, **kw) -> Array:
    """funclist[k](x) (or the constant funclist[k]) where condlist[k] is the first true
    condition; an extra last entry of funclist is the default, else 0. Every function
    is evaluated on all of x (vmapped), then one result is selected per element."""
    import fnad.numpy as jnp
    check_arraylike("piecewise", x)
    x = ensure_array(x)
    if isinstance(condlist, (list, tuple)):
        condlist = [asarray(c, bool) for c in condlist]
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    conds = asarray(condlist, dtype=bool)                                   # [nc, *x.shape]
    # Branch k + 1 where condition k is the first true one; 0 (the default) where none is.
    index = jnp.argmax(jnp.cumsum(jnp.concatenate([jnp.zeros_like(conds[:1]), conds], 0),
                                  axis=0), axis=0)                          # [*x.shape]

    def branch(f):
        if callable(f):
            return asarray(vectorize(lambda v: f(v, *args, **kw))(x), x.dtype)
        return jnp.full(x.shape, f, x.dtype)
    return jnp.choose(index, [branch(f) for f in funclist], mode="clip")

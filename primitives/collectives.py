"""Collectives over named axes: psum, pmax, pmin, pmean, all_gather, psum_scatter,
all_to_all, ppermute, axis_index, axis_size (as jax.lax), for `vmap(..., axis_name=...)`.

Under `vmap(f, axis_name="i")`, f runs once per member of the mapped axis, and a
collective over "i" combines the members' values: `psum(x, "i")` gives every member
Σ_j x_j. A BatchTrace bound to "i" holds all members at once (the batch axis), so there
a collective is an ordinary array operation on that axis (`collective_rules`, run by
the BatchTrace whose name the collective names); any other BatchTrace just carries it
through like an elementwise op (`batch_rules`, the axis params shifted by one). A
collective whose name no enclosing vmap binds is a NameError, raised by the wrapper.

Params: `axis_name` is a tuple of names: psum, pmax and pmin take several at once (the
trace of each name reduces its own axis and passes the rest on); the others name one
axis and carry its size (`axis_size`) for their shape rules. As in JAX under vmap,
`axis_index_groups` is not supported.

Derivatives (member-wise, each member's output a function of all members' inputs):
  psum          linear; transpose psum: x̄_j = Σ_i ȳ_i
  all_gather    linear; transpose psum_scatter (member j gets its slice of Σ_i ȳ_i)
  psum_scatter  linear; transpose all_gather
  all_to_all    linear; transpose all_to_all with split and concat axes exchanged
  ppermute      linear; transpose ppermute by the inverse permutation
  pmax, pmin    the tangent of the members holding the extremum, averaged over ties (JAX:
                none)
  axis_index    integer: no tangent
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fnad import core
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules,
                       collective_rules, eager_rules, get_aval, jvp_rules, shape_error,
                       transpose_rules)
from fnad.primitives import elementwise as ew
from fnad.primitives import reductions as red
from fnad.primitives import shape_ops as so
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.primitives._util import NUM, check_kind, no_tangent_jvp

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pmax", "pmean", "pmin",
           "ppermute", "psum", "psum_scatter"]


# ---- the axis environment ----------------------------------------------------------------
def axis_env() -> dict:
    """{name: size} of the axes bound here by enclosing vmaps (the innermost wins)."""
    env: dict = {}
    t = core.current_trace()
    while t is not None:
        name = getattr(t, "axis_name", None)
        if name is not None and name not in env:
            env[name] = t.axis_size
        t = t.parent
    return env


def _unbound(name, env: dict) -> NameError:
    return NameError(f"unbound axis name: {name!r}. The axis names bound here by "
                     f"vmap(..., axis_name=...) are: {sorted(map(str, env))}")


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _sizes(what: str, axis_name, axis_index_groups=None) -> tuple[tuple, tuple]:
    """(names, their sizes) of `axis_name`, each bound by an enclosing vmap."""
    if axis_index_groups is not None:
        raise NotImplementedError(f"{what}: axis_index_groups is not supported under vmap "
                                  "(nor by JAX's vmap)")
    names = _names(axis_name)
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: axis_name {axis_name!r} names an axis twice")
    env = axis_env()
    for n in names:
        if n not in env:
            raise _unbound(n, env)
    return names, tuple(env[n] for n in names)


def _one_axis(what: str, axis_name) -> tuple:
    names, sizes = _sizes(what, axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"{what} over several axes at once ({axis_name!r}) is not "
                                  "supported: name one axis")
    return names[0], sizes[0]


def _tree_map(f, tree):
    from fnad import tree_util
    return tree_util.tree_map(f, tree)


def _unbound_eager(prim: Primitive):
    def rule(*args, **params):
        raise _unbound(_names(params["axis_name"])[0], axis_env())
    eager_rules[prim] = rule


def _rest(names: tuple, mine) -> tuple:
    return tuple(n for n in names if n != mine)


def _axis_arg(what: str, axis, ndim: int, extra: int = 0) -> int:
    a = operator.index(axis)
    if not -(ndim + extra) <= a < ndim + extra:
        raise ValueError(f"{what}: axis {a} is out of range for an operand of rank {ndim}")
    return a % (ndim + extra)


def _linear_jvp(prim: Primitive) -> None:
    """JVP of a linear collective: the same collective of the tangent."""
    def rule(primals, tangents, **params):
        from fnad.ad import instantiate
        return prim.bind(primals[0], **params), prim.bind(instantiate(tangents[0]), **params)
    jvp_rules[prim] = rule


# ---- psum, pmax, pmin: reductions over the members ---------------------------------------
def _reducer(name: str, kinds):
    prim = Primitive(name)

    def abstract_eval(x: ShapedArray, *, axis_name) -> ShapedArray:
        check_kind(name, x, kinds)
        return x
    abstract_eval_rules[prim] = abstract_eval

    def batch(vals, dims, *, axis_name):                # another vmap's axis: elementwise
        return prim.bind(vals[0], axis_name=axis_name), dims[0]
    batch_rules[prim] = batch
    _unbound_eager(prim)
    return prim


psum_p = _reducer("psum", NUM)
pmax_p = _reducer("pmax", NUM)
pmin_p = _reducer("pmin", NUM)


def psum(x, axis_name, *, axis_index_groups=None):
    """Σ of `x` (a pytree) over the members of the named axis (or axes)."""
    names, _ = _sizes("psum", axis_name, axis_index_groups)

    def one(v):
        v = _as_array(v)
        if get_aval(v).dtype == np.bool_:             # a count, as jax: bools sum as int32
            from fnad.primitives.logic import convert_element_type
            v = convert_element_type(v, np.int32)
        return psum_p.bind(v, axis_name=names)
    return _tree_map(one, x)


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum of `x` (a pytree) over the members of the named axis (or axes)."""
    names, _ = _sizes("pmax", axis_name, axis_index_groups)
    return _tree_map(lambda v: pmax_p.bind(_as_array(v), axis_name=names), x)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum of `x` (a pytree) over the members of the named axis (or axes)."""
    names, _ = _sizes("pmin", axis_name, axis_index_groups)
    return _tree_map(lambda v: pmin_p.bind(_as_array(v), axis_name=names), x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of `x` (a pytree) over the members: psum / the number of members
    (integers give floats, as JAX's true division)."""
    names, sizes = _sizes("pmean", axis_name, axis_index_groups)
    n = math.prod(sizes)

    def mean(v):
        from fnad.numpy import true_divide
        return true_divide(psum_p.bind(_as_array(v), axis_name=names), n)
    return _tree_map(mean, x)


def _as_array(v):
    from fnad.numpy import asarray
    return v if isinstance(v, core.Tracer) else asarray(v)


_linear_jvp(psum_p)
def psum_transpose(ct, x, *, axis_name):                 # x̄_j = Σ_i ȳ_i
    return [psum_p.bind(ct, axis_name=axis_name)]
transpose_rules[psum_p] = psum_transpose


def _reduce_members(reduce, scale_unbatched):
    """The rule where the trace binds one of the names: reduce the batch axis (an
    unbatched x is the same in every member), then pass the other names on."""
    def rule(vals, dims, size, name, *, axis_name, prim):
        (x,), (d,) = vals, dims
        if d is None:
            out = ew.mul(x, np.asarray(size, get_aval(x).dtype)) if scale_unbatched else x
        else:
            out = reduce(x, (d,))
        rest = _rest(axis_name, name)
        if rest:
            out = prim.bind(out, axis_name=rest)
        return out, None
    return rule


def _bound(rule, prim):
    def bound(vals, dims, size, name, **params):
        return rule(vals, dims, size, name, prim=prim, **params)
    return bound


def _chooser_jvp(prim):
    """d pmax(x) = the tangent of the member(s) holding the maximum, averaged over ties
    (as reduce_max's JVP; JAX has no derivative for pmax and pmin)."""
    def rule(primals, tangents, *, axis_name):
        from fnad.ad import instantiate
        from fnad.primitives import logic
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis_name=axis_name)
        if type(t) is core.Zero:
            return out, t
        hit = logic.convert_element_type(logic.eq(x, out), get_aval(x).dtype)
        picked = psum_p.bind(ew.mul(instantiate(t), hit), axis_name=axis_name)
        return out, ew.div(picked, psum_p.bind(hit, axis_name=axis_name))
    jvp_rules[prim] = rule


_chooser_jvp(pmax_p)
_chooser_jvp(pmin_p)
collective_rules[psum_p] = _bound(_reduce_members(red.reduce_sum, True), psum_p)
collective_rules[pmax_p] = _bound(_reduce_members(red.reduce_max, False), pmax_p)
collective_rules[pmin_p] = _bound(_reduce_members(red.reduce_min, False), pmin_p)


# ---- all_gather: every member gets the stack (or concatenation) of all ----------------
all_gather_p = Primitive("all_gather")


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """Every member's `x` (a pytree), stacked along a new axis `axis` (tiled:
    concatenated along the existing `axis`)."""
    if axis_index_groups is not None:
        _sizes("all_gather", axis_name, axis_index_groups)
    name, size = _one_axis("all_gather", axis_name)

    def gather(v):
        v = _as_array(v)
        nd = get_aval(v).ndim
        if tiled and nd == 0:
            raise ValueError("all_gather with tiled=True needs an operand of rank >= 1, "
                             "got a scalar")
        a = _axis_arg("all_gather", axis, nd, 0 if tiled else 1)
        return all_gather_p.bind(v, axis_name=(name,), axis_size=size, axis=a, tiled=bool(tiled))
    return _tree_map(gather, x)


def all_gather_abstract_eval(x: ShapedArray, *, axis_name, axis_size, axis, tiled):
    s = x.shape
    if tiled:
        return ShapedArray(s[:axis] + (axis_size * s[axis],) + s[axis + 1:], x.dtype,
                           x.weak_type)
    return ShapedArray(s[:axis] + (axis_size,) + s[axis:], x.dtype, x.weak_type)
abstract_eval_rules[all_gather_p] = all_gather_abstract_eval
_linear_jvp(all_gather_p)
def all_gather_transpose(ct, x, *, axis_name, axis_size, axis, tiled):
    return [psum_scatter_p.bind(ct, axis_name=axis_name, axis_size=axis_size,
                                scatter_dimension=axis, tiled=tiled)]
transpose_rules[all_gather_p] = all_gather_transpose
def all_gather_batch(vals, dims, *, axis, **params):     # another vmap's axis
    x = moveaxis(vals[0], dims[0], 0)
    return all_gather_p.bind(x, axis=axis + 1, **params), 0
batch_rules[all_gather_p] = all_gather_batch
_unbound_eager(all_gather_p)


def all_gather_members(vals, dims, size, name, *, axis_name, axis_size, axis, tiled):
    x = bdim_at_front(vals[0], dims[0], size)            # [members, *shape]
    out = moveaxis(x, 0, axis)                           # the members' axis at `axis`
    if tiled:
        s = get_aval(out).shape
        out = so.reshape(out, s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
    return out, None
collective_rules[all_gather_p] = all_gather_members


# ---- psum_scatter: the sum, each member keeping its own slice ---------------------------
psum_scatter_p = Primitive("psum_scatter")


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """Σ over the members of `x` (a pytree); member i keeps slice i along
    `scatter_dimension` (whose size must equal the axis size; tiled: a multiple of it,
    the dimension is then kept, divided)."""
    if axis_index_groups is not None:
        _sizes("psum_scatter", axis_name, axis_index_groups)
    name, size = _one_axis("psum_scatter", axis_name)

    def scatter(v):
        v = _as_array(v)
        nd = get_aval(v).ndim
        if nd == 0:
            raise ValueError("psum_scatter needs an operand of rank >= 1, got a scalar")
        d = _axis_arg("psum_scatter", scatter_dimension, nd)
        return psum_scatter_p.bind(v, axis_name=(name,), axis_size=size, scatter_dimension=d,
                                   tiled=bool(tiled))
    return _tree_map(scatter, x)


def psum_scatter_abstract_eval(x: ShapedArray, *, axis_name, axis_size, scatter_dimension,
                               tiled):
    check_kind("psum_scatter", x, NUM)
    s, d = x.shape, scatter_dimension
    if tiled:
        if s[d] % axis_size:
            raise shape_error("psum_scatter", f"scatter_dimension {d} has size {s[d]}, not a "
                                              f"multiple of the axis size {axis_size}")
        return ShapedArray(s[:d] + (s[d] // axis_size,) + s[d + 1:], x.dtype, x.weak_type)
    if s[d] != axis_size:
        raise shape_error("psum_scatter", f"scatter_dimension {d} has size {s[d]}, which must "
                                          f"equal the axis size {axis_size} (or use "
                                          "tiled=True)")
    return ShapedArray(s[:d] + s[d + 1:], x.dtype, x.weak_type)
abstract_eval_rules[psum_scatter_p] = psum_scatter_abstract_eval
_linear_jvp(psum_scatter_p)
def psum_scatter_transpose(ct, x, *, axis_name, axis_size, scatter_dimension, tiled):
    return [all_gather_p.bind(ct, axis_name=axis_name, axis_size=axis_size,
                              axis=scatter_dimension, tiled=tiled)]
transpose_rules[psum_scatter_p] = psum_scatter_transpose
def psum_scatter_batch(vals, dims, *, scatter_dimension, **params):
    x = moveaxis(vals[0], dims[0], 0)
    return psum_scatter_p.bind(x, scatter_dimension=scatter_dimension + 1, **params), 0
batch_rules[psum_scatter_p] = psum_scatter_batch
_unbound_eager(psum_scatter_p)


def psum_scatter_members(vals, dims, size, name, *, axis_name, axis_size, scatter_dimension,
                         tiled):
    (x,), (b,) = vals, dims
    d = scatter_dimension
    total = ew.mul(x, np.asarray(size, get_aval(x).dtype)) if b is None \
        else red.reduce_sum(x, (b,))                     # the member's shape
    if tiled:
        s = get_aval(total).shape
        total = so.reshape(total, s[:d] + (size, s[d] // size) + s[d + 1:])
    return moveaxis(total, d, 0), 0                      # member i: slice i
collective_rules[psum_scatter_p] = psum_scatter_members


# ---- all_to_all: member i gets chunk i of every member's split axis ---------------------
all_to_all_p = Primitive("all_to_all")


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Split `x` (a pytree) along `split_axis` into one chunk per member, send chunk i
    to member i, and join what each member receives along `concat_axis` (in member
    order). Untiled, split_axis's size must equal the axis size: it is removed and the
    received chunks form a new axis at `concat_axis`."""
    if axis_index_groups is not None:
        _sizes("all_to_all", axis_name, axis_index_groups)
    name, size = _one_axis("all_to_all", axis_name)

    def exchange(v):
        v = _as_array(v)
        nd = get_aval(v).ndim
        if nd == 0:
            raise ValueError("all_to_all needs an operand of rank >= 1, got a scalar")
        s = _axis_arg("all_to_all", split_axis, nd)
        c = _axis_arg("all_to_all", concat_axis, nd)
        return all_to_all_p.bind(v, axis_name=(name,), axis_size=size, split_axis=s,
                                 concat_axis=c, tiled=bool(tiled))
    return _tree_map(exchange, x)


def all_to_all_abstract_eval(x: ShapedArray, *, axis_name, axis_size, split_axis,
                             concat_axis, tiled):
    s = list(x.shape)
    if tiled:
        if s[split_axis] % axis_size:
            raise shape_error("all_to_all", f"split_axis {split_axis} has size "
                                            f"{s[split_axis]}, not a multiple of the axis "
                                            f"size {axis_size}")
        s[split_axis] //= axis_size
        s[concat_axis] *= axis_size
        return ShapedArray(tuple(s), x.dtype, x.weak_type)
    if s[split_axis] != axis_size:
        raise shape_error("all_to_all", f"split_axis {split_axis} has size {s[split_axis]}, "
                                        f"which must equal the axis size {axis_size} (or "
                                        "use tiled=True)")
    del s[split_axis]
    s.insert(concat_axis, axis_size)
    return ShapedArray(tuple(s), x.dtype, x.weak_type)
abstract_eval_rules[all_to_all_p] = all_to_all_abstract_eval
_linear_jvp(all_to_all_p)
def all_to_all_transpose(ct, x, *, split_axis, concat_axis, **params):
    return [all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis, **params)]
transpose_rules[all_to_all_p] = all_to_all_transpose
def all_to_all_batch(vals, dims, *, split_axis, concat_axis, **params):
    x = moveaxis(vals[0], dims[0], 0)
    return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                             **params), 0
batch_rules[all_to_all_p] = all_to_all_batch
_unbound_eager(all_to_all_p)


def all_to_all_members(vals, dims, size, name, *, axis_name, axis_size, split_axis,
                       concat_axis, tiled):
    x = bdim_at_front(vals[0], dims[0], size)            # [sender j, *shape]
    sa, ca = split_axis + 1, concat_axis + 1
    if not tiled:                          # out_i[.., j at ca, ..] = x_j[.., i at sa, ..]
        x = moveaxis(x, sa, 0)                           # [receiver i, sender j, rest]
        return moveaxis(x, 1, ca), 0
    s = get_aval(x).shape
    chunk = s[sa] // size
    x = so.reshape(x, s[:sa] + (size, chunk) + s[sa + 1:])     # [j, .., i, chunk, ..]
    x = moveaxis(x, sa, 0)                               # [i, j, *shape with chunk at sa]
    x = moveaxis(x, 1, ca)                               # j right before the concat axis
    s = get_aval(x).shape
    return so.reshape(x, s[:ca] + (s[ca] * s[ca + 1],) + s[ca + 2:]), 0   # j major
collective_rules[all_to_all_p] = all_to_all_members


# ---- ppermute: member dst gets member src's value, for each (src, dst) pair --------------
ppermute_p = Primitive("ppermute")


def ppermute(x, axis_name, perm):
    """Member dst gets `x` (a pytree) of member src for each (src, dst) in `perm`; a member
    that is no dst gets zeros. Each source and each destination may appear once."""
    name, size = _one_axis("ppermute", axis_name)
    pairs = tuple((operator.index(s), operator.index(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute: perm {list(perm)} has a source or a destination twice")
    bad = [i for i in srcs + dsts if not 0 <= i < size]
    if bad:
        raise ValueError(f"ppermute: perm {list(perm)} names member {bad[0]}, outside the "
                         f"axis {name!r} of size {size}")
    return _tree_map(lambda v: ppermute_p.bind(_as_array(v), axis_name=(name,), perm=pairs), x)


def ppermute_abstract_eval(x: ShapedArray, *, axis_name, perm):
    return x
abstract_eval_rules[ppermute_p] = ppermute_abstract_eval
_linear_jvp(ppermute_p)
def ppermute_transpose(ct, x, *, axis_name, perm):       # back from each dst to its src
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))]
transpose_rules[ppermute_p] = ppermute_transpose
def ppermute_batch(vals, dims, **params):
    return ppermute_p.bind(vals[0], **params), dims[0]
batch_rules[ppermute_p] = ppermute_batch
_unbound_eager(ppermute_p)


def ppermute_members(vals, dims, size, name, *, axis_name, perm):
    x = bdim_at_front(vals[0], dims[0], size)
    src_of = {d: s for s, d in perm}
    zero = None
    pieces = []
    for i in range(size):                                # runs of consecutive sources
        s = src_of.get(i)
        if s is None:
            if zero is None:
                zero = so.full_like(so.slice_in_dim(x, 0, 1, axis=0), 0)
            pieces.append(zero)
        elif pieces and isinstance(pieces[-1], list) and pieces[-1][1] == s:
            pieces[-1][1] = s + 1
        else:
            pieces.append([s, s + 1])
    parts = [so.slice_in_dim(x, p[0], p[1], axis=0) if isinstance(p, list) else p
             for p in pieces]
    return (parts[0] if len(parts) == 1 else so.concatenate(parts, 0)), 0
collective_rules[ppermute_p] = ppermute_members


# ---- axis_index, axis_size -----------------------------------------------------------------
axis_index_p = Primitive("axis_index")


def axis_index(axis_name):
    """This member's index along the named axis (int32); for several names, the index
    into their product, the first name the most significant."""
    names, sizes = _sizes("axis_index", axis_name)
    out = None
    for n, size_after in zip(names, [math.prod(sizes[k + 1:]) for k in range(len(names))]):
        i = axis_index_p.bind(axis_name=(n,))
        i = i if size_after == 1 else ew.mul(i, np.int32(size_after))
        out = i if out is None else ew.add(out, i)
    return out


def axis_index_abstract_eval(*, axis_name):
    return ShapedArray((), np.dtype(np.int32))
abstract_eval_rules[axis_index_p] = axis_index_abstract_eval
jvp_rules[axis_index_p] = no_tangent_jvp(axis_index_p)
def axis_index_batch(vals, dims, *, axis_name):          # another vmap's axis: unbatched
    return axis_index_p.bind(axis_name=axis_name), None
batch_rules[axis_index_p] = axis_index_batch
_unbound_eager(axis_index_p)


def axis_index_members(vals, dims, size, name, *, axis_name):
    return so.iota(np.dtype(np.int32), size), 0
collective_rules[axis_index_p] = axis_index_members


def axis_size(axis_name) -> int:
    """The number of members of the named axis (the product, for several names)."""
    return math.prod(_sizes("axis_size", axis_name)[1])


COLLECTIVES = frozenset(collective_rules)

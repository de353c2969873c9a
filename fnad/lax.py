"""fnad.lax: the primitive-level API, with jax.lax's names and signatures.

Thin re-exports of the wrappers each primitive family defines (its `__all__`),
plus the few lax functions composed of several primitives, and control flow
(cond, switch, scan, map, associative_scan, while_loop, fori_loop:
primitives/control_flow.py).
"""
from __future__ import annotations

import math as _math
import operator as _operator
import sys as _sys
import typing as _typing

import numpy as _np

from fnad import core as _core
from fnad import dtypes as _dtypes
from fnad import tree_util
from fnad.core import get_aval as _get_aval
from fnad import lax_linalg as linalg  # noqa: F401  (as jax.lax.linalg)
from fnad.primitives import elementwise as _ew
from fnad.primitives import logic as _logic
from fnad.primitives import reductions as _red
from fnad.primitives import shape_ops as _so
from fnad.primitives.collectives import *  # noqa: F401,F403
from fnad.primitives.control_flow import *  # noqa: F401,F403
from fnad.primitives.convolution import *  # noqa: F401,F403
from fnad.primitives.cumulative import *  # noqa: F401,F403
from fnad.primitives.elementwise import *  # noqa: F401,F403
from fnad.primitives.fft import *  # noqa: F401,F403
from fnad.primitives.indexing import *  # noqa: F401,F403
from fnad.primitives.linalg import *  # noqa: F401,F403
from fnad.primitives.logic import *  # noqa: F401,F403
from fnad.primitives.reductions import *  # noqa: F401,F403
from fnad.primitives.shape_ops import *  # noqa: F401,F403
from fnad.primitives.solves import *  # noqa: F401,F403
from fnad.primitives.sorting import *  # noqa: F401,F403
from fnad.primitives.windowed import *  # noqa: F401,F403
from fnad.primitives.windowed import init_like as _init_like
from fnad.primitives.windowed import max_identity as _max_identity
from fnad.primitives.windowed import min_identity as _min_identity
from fnad.sharding import with_sharding_constraint  # noqa: F401

_sys.modules[__name__ + ".linalg"] = linalg   # `import fnad.lax.linalg` works too


def stop_gradient(x):
    """The identity whose derivative is zero, applied to every inexact leaf of `x`."""
    def stop(leaf):
        if _dtypes.is_inexact(_get_aval(leaf).dtype):
            return _logic.stop_gradient(leaf)
        if isinstance(leaf, _core.Tracer):
            return leaf
        from fnad.numpy import asarray              # an Array of the canonical dtype, as jax
        return asarray(leaf)
    return tree_util.tree_map(stop, x)


def select(pred, on_true, on_false):
    """on_true where pred else on_false (lax.select)."""
    return _logic.select_n(pred, on_false, on_true)


# lax.reduce's monoids: computation -> (its reduce_* primitive, its identity of a dtype)
_MONOIDS = {_ew.add: (_red.reduce_sum, lambda dt: _np.zeros((), dt)),
            _ew.mul: (_red.reduce_prod, lambda dt: _np.ones((), dt)),
            _ew.max: (_red.reduce_max, _max_identity), _ew.min: (_red.reduce_min, _min_identity),
            _logic.bitwise_and: (_red.reduce_and, lambda dt: ~_np.zeros((), dt)),
            _logic.bitwise_or: (_red.reduce_or, lambda dt: _np.zeros((), dt)),
            _logic.bitwise_xor: (_red.reduce_xor, lambda dt: _np.zeros((), dt))}
_MONOIDS[_operator.add], _MONOIDS[_operator.mul] = _MONOIDS[_ew.add], _MONOIDS[_ew.mul]


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """Reduce `operands` (an array or a pytree of equal-shape arrays) over `dimensions`
    with `computation` (lax.reduce): a function of two pytrees of arrays like
    (operands, operands) giving one, associative, as XLA requires.

    One operand with add, mul, max, min or the bitwise and/or/xor, and that operation's
    identity as `init_values`, is the matching reduce_* primitive. Anything else is a
    pairwise tree over the reduced elements (left to right, so ties resolve as a
    sequential fold would), combined with `init_values` once, as XLA computes it.
    """
    if out_sharding is not None:
        raise NotImplementedError("lax.reduce: out_sharding is not supported (fnad has no "
                                  "sharding)")
    flat, tree = tree_util.tree_flatten(operands)
    flat_init, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"lax.reduce: operands and init_values must have the same structure, "
                         f"got {tree} and {init_tree}")
    if not flat:
        raise ValueError("lax.reduce: no operands")
    shape = _get_aval(flat[0]).shape
    if any(_get_aval(x).shape != shape for x in flat):
        raise ValueError(f"lax.reduce: the operands must have equal shapes, got "
                         f"{[_get_aval(x).shape for x in flat]}")
    dims = tuple(_operator.index(d) for d in dimensions)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise ValueError(f"lax.reduce: dimensions {dims} must be distinct and in range for "
                         f"operands of rank {len(shape)}")
    try:
        monoid = _MONOIDS.get(computation) if len(flat) == 1 else None
    except TypeError:                                   # unhashable: not one of those
        monoid = None
    for i in flat_init:
        if _get_aval(i).shape != ():
            raise ValueError(f"lax.reduce: init values must be scalars, got shape "
                             f"{_get_aval(i).shape}")
    inits = [_init_like("lax.reduce", i, _get_aval(x).dtype) for i, x in zip(flat_init, flat)]
    if monoid is not None:
        reducer, identity = monoid
        init, dt = inits[0], _get_aval(flat[0]).dtype
        if not isinstance(init, _core.Tracer) and \
                _np.array_equal(_np.asarray(init, dt), identity(dt)):
            return tree_util.tree_unflatten(tree, [reducer(flat[0], dims)])

    def combine(a: list, b: list) -> list:
        out = computation(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_flat, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"lax.reduce: computation must return the structure of the "
                            f"operands {tree}, got {out_tree}")
        return out_flat

    kept = [d for d in range(len(shape)) if d not in dims]
    rest = tuple(shape[d] for d in kept)
    n = _math.prod(shape[d] for d in dims)
    xs = [_so.reshape(_so.transpose(x, dims + tuple(kept)), (n,) + rest) for x in flat]
    inits = [_so.broadcast_in_dim(i, rest, ()) for i in inits]
    if n == 0:
        return tree_util.tree_unflatten(tree, inits)
    while n > 1:                                        # pairs (0, 1), (2, 3), ... and a last
        half = n // 2
        pairs = combine([_so.slice_in_dim(x, 0, 2 * half, 2, 0) for x in xs],
                        [_so.slice_in_dim(x, 1, 2 * half, 2, 0) for x in xs])
        if n % 2:
            pairs = [_so.concatenate([p, _so.slice_in_dim(x, n - 1, n, 1, 0)], 0)
                     for p, x in zip(pairs, xs)]
        xs, n = pairs, half + n % 2
    return tree_util.tree_unflatten(tree, combine(inits, [_so.reshape(x, rest) for x in xs]))



# ---- composites: jax.lax functions built from the primitives above ----------------------
def reciprocal(x):
    """1 / x (integer_pow(x, -1), as JAX)."""
    return integer_pow(x, -1)  # noqa: F405


def broadcast_shapes(*shapes) -> tuple:
    """The shape that arrays of `shapes` broadcast to (NumPy's rules); a ValueError if they
    do not broadcast."""
    try:
        return tuple(_np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        shown = tuple(tuple(s) for s in shapes)              # (this module's `map` is lax's)
        raise ValueError(f"Incompatible shapes for broadcasting: {shown}") from None


def broadcast_like(arr, like_arr):
    """`arr` broadcast to the shape of `like_arr` (numpy-style, trailing dims aligned)."""
    shape = _get_aval(like_arr).shape
    return arr if _get_aval(arr).shape == shape else _broadcast_to(arr, shape)


def _broadcast_to(x, shape):
    aval = _get_aval(x)
    shape = tuple(shape)
    new = broadcast_shapes(aval.shape, shape)
    if new != shape:
        raise ValueError(f"cannot broadcast shape {aval.shape} to {shape}")
    lead = len(shape) - aval.ndim
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))  # noqa: F405


def _axis(what: str, axis, ndim: int) -> int:
    """`axis` in [0, ndim) (negative counts from the end); a ValueError naming `what`."""
    axis = _operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"lax.{what}: axis {axis} is out of range for an operand of rank "
                         f"{ndim}")
    return axis % ndim


def split(operand, sizes, axis: int = 0) -> list:
    """`operand` cut along `axis` into pieces of the given `sizes` (which sum to its size)."""
    aval = _get_aval(operand)
    axis = _axis("split", axis, aval.ndim)
    sizes = [_operator.index(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != aval.shape[axis]:
        raise ValueError(f"lax.split: sizes {sizes} must be non-negative and sum to the size "
                         f"{aval.shape[axis]} of axis {axis}")
    out, start = [], 0
    for s in sizes:
        out.append(slice_in_dim(operand, start, start + s, axis=axis))  # noqa: F405
        start += s
    return out


def tile(operand, reps):
    """`operand` repeated `reps[i]` times along each axis i (len(reps) == its rank)."""
    aval = _get_aval(operand)
    reps = tuple(_operator.index(r) for r in reps)
    if len(reps) != aval.ndim or any(r < 0 for r in reps):
        raise ValueError(f"lax.tile: reps {reps} must have one non-negative entry per "
                         f"dimension of the operand (shape {aval.shape})")
    shape = tuple(d for r, n in zip(reps, aval.shape) for d in (r, n))
    dims = tuple(range(1, 2 * aval.ndim, 2))
    out = broadcast_in_dim(operand, shape, dims)  # noqa: F405
    return reshape(out, tuple(r * n for r, n in zip(reps, aval.shape)))  # noqa: F405


def stack(operands, axis: int = 0):
    """The operands (equal shapes) stacked along a new axis `axis`."""
    operands = list(operands)
    if not operands:
        raise ValueError("lax.stack needs at least one operand")
    nd = _get_aval(operands[0]).ndim
    axis = _operator.index(axis)
    if not -(nd + 1) <= axis <= nd:
        raise ValueError(f"lax.stack: axis {axis} is out of range for operands of rank {nd}")
    axis %= nd + 1
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)  # noqa: F405


def unstack(x, axis: int = 0) -> tuple:
    """The slices of `x` along `axis`, each without that axis."""
    aval = _get_aval(x)
    axis = _axis("unstack", axis, aval.ndim)
    return tuple(index_in_dim(x, i, axis, keepdims=False)  # noqa: F405
                 for i in range(aval.shape[axis]))


def index_take(src, idxs, axes):
    """src indexed along `axes` by the integer arrays `idxs` (one per axis, equal shapes;
    negative and out-of-range indices wrap), a gather."""
    axes = tuple(_operator.index(a) for a in axes)
    idxs = list(idxs)
    if len(idxs) != len(axes):
        raise ValueError(f"lax.index_take: {len(idxs)} index arrays for {len(axes)} axes")
    src_aval = _get_aval(src)
    cols = [expand_dims(i, (1,)) for i in idxs]  # noqa: F405
    indices = concatenate(cols, 1)  # noqa: F405
    ishape = _get_aval(indices).shape
    bounds = broadcast_in_dim(_np.array([src_aval.shape[a] for a in axes],  # noqa: F405
                                        _get_aval(indices).dtype), ishape, (len(ishape) - 1,))
    indices = rem(add(rem(indices, bounds), bounds), bounds)  # noqa: F405
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(src_aval.shape))
    dnums = GatherDimensionNumbers(  # noqa: F405
        offset_dims=tuple(range(1, src_aval.ndim - len(axes) + 1)),
        collapsed_slice_dims=axes, start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes)  # noqa: F405


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """operand with `updates` subtracted at the scattered positions (scatter_add of -updates)."""
    return scatter_add(operand, scatter_indices, neg(updates), dimension_numbers,  # noqa: F405
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """`operand` with the elementwise `func` applied at the scattered positions, once per
    time an index names a position (duplicates apply it again, as XLA's scatter with
    `func` as its update computation). `update_shape` is the shape of the scatter's
    updates; modes as the other scatters.

    Computed as: counts = scatter_add(zeros, scatter_indices, ones(update_shape)); then
    round r = 0, 1, ... < max(counts) applies func where counts > r (a while_loop; one
    round when the indices are unique). `func` must keep operand's dtype and shape.
    """
    shape, dtype = _get_aval(operand).shape, _get_aval(operand).dtype
    counts = scatter_add(full(shape, 0, _np.int32), scatter_indices,  # noqa: F405
                         full(tuple(update_shape), 1, _np.int32),  # noqa: F405
                         dimension_numbers, indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices, mode=mode)

    def body(carry):
        r, x = carry
        fx = func(x)
        got = _get_aval(fx)
        if (got.shape, got.dtype) != (tuple(shape), dtype):
            raise TypeError(f"scatter_apply: func must map the operand ({dtype.name}"
                            f"{list(shape)}) elementwise to the same shape and dtype, got "
                            f"{got.dtype.name}{list(got.shape)}")
        return r + 1, select(gt(counts, r), fx, x)  # noqa: F405
    rounds = reduce_max(counts, tuple(range(len(shape)))) if len(shape) else counts  # noqa: F405
    return while_loop(lambda c: lt(c[0], rounds), body,  # noqa: F405
                      (_np.int32(0), operand))[1]


def composite(decomposition, name: str, version: int = 0):
    """`decomposition` as a named composite op (jax.lax.composite): calling the result with
    positional operands and keyword attributes computes `decomposition(*args, **attrs)`.
    XLA may swap a composite it recognizes for a dedicated kernel; fnad's backends run the
    decomposition, so grad, vmap and jit see its operations."""
    if not isinstance(name, str):
        raise TypeError(f"composite: name must be a str, got {type(name).__name__}")
    if not isinstance(version, int) or version < 0:
        raise ValueError(f"composite: version must be a non-negative int, got {version!r}")
    from fnad.tracing import named_call

    def composite_fn(*args, **attrs):
        return named_call(lambda *a: decomposition(*a, **attrs), name=name)(*args)
    composite_fn.__name__ = getattr(decomposition, "__name__", name)
    composite_fn.__doc__ = getattr(decomposition, "__doc__", None)
    return composite_fn


def optimization_barrier(operand, /):
    """`operand` (a pytree) unchanged. In XLA it keeps computations from moving across it;
    fnad's passes do not move computations across equations in ways this would stop, so
    it is the identity."""
    return operand


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` whose values are unspecified (zeros here)."""
    return full(tuple(shape), 0, dtype)  # noqa: F405


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, indices) of the k largest along `reduction_dimension`, exactly (XLA's CPU
    code computes the exact top k too; `recall_target` is accepted)."""
    return _approx_k(operand, k, reduction_dimension, aggregate_to_topk, largest=True)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(values, indices) of the k smallest along `reduction_dimension`, exactly."""
    return _approx_k(operand, k, reduction_dimension, aggregate_to_topk, largest=False)


def _approx_k(operand, k, dim, aggregate, largest: bool):
    nd = _get_aval(operand).ndim
    dim = _operator.index(dim) % nd
    x = operand if dim == nd - 1 else _moveaxis(operand, dim, nd - 1)
    vals, idx = top_k(x if largest else neg(x), k)  # noqa: F405
    vals = vals if largest else neg(vals)  # noqa: F405
    if dim != nd - 1:
        vals, idx = _moveaxis(vals, nd - 1, dim), _moveaxis(idx, nd - 1, dim)
    return vals, idx


class RaggedDotDimensionNumbers(_typing.NamedTuple):
    """The dims of lax.ragged_dot_general: `dot_dimension_numbers` as dot_general's
    (((lhs contracting), (rhs contracting)), ((lhs batch), (rhs batch))), the lhs's one
    ragged dim, and the rhs's group dim (one, or none where the ragged dim is a contracting
    or batch dim)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: _typing.Sequence[int]
    rhs_group_dimensions: _typing.Sequence[int]


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """lhs [m, k] times rhs[j] [k, n] for each group j of consecutive rows of lhs, the row
    counts in `group_sizes` [g] (they sum to at most m; rows past them give zeros): a grouped
    matmul, as in mixture-of-experts layers. One product per group (no work for rows of other
    groups)."""
    lv, rv = _get_aval(lhs), _get_aval(rhs)
    if lv.ndim != 2 or rv.ndim != 3:
        raise ValueError(f"lax.ragged_dot: expected lhs [m, k] and rhs [g, k, n], got shapes "
                         f"{lv.shape} and {rv.shape}")
    dims = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), [0], [0])
    return ragged_dot_general(lhs, rhs, group_sizes, dims, precision=precision,
                              preferred_element_type=preferred_element_type,
                              group_offset=group_offset, out_sharding=out_sharding)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """dot_general in which the lhs's ragged dim is cut into groups of consecutive entries
    (sizes `group_sizes`, >= 0), as jax.lax.ragged_dot_general. By the kind of that dim:

    - a free dim m: [b..,m..,k..] x [g,b..,k..,n..] -> [b..,m..,n..], each group's slice of
      lhs times the rhs's matrix of that group (entries of no group give 0);
    - a contracting dim k: [b..,m..,k..] x [b..,k..,n..] -> [g,b..,m..,n..], per group the
      contraction over its slice of k only;
    - a batch dim: dot_general itself (jax's CPU result: the sizes change nothing).

    `group_sizes` is [g] or [b.., x.., g] (batch-mode: [x.., g]), x.. being the lhs dims of
    the ragged dim's kind that come before it: the sizes may differ along them. Reduced to
    the two forms of the ragged_dot_general primitive (primitives/ragged.py) by transposes
    and reshapes; a size-per-x group_sizes broadcasts the rhs along x.."""
    if group_offset is not None:
        raise NotImplementedError("lax.ragged_dot_general: group_offset is not supported")
    if out_sharding is not None:
        raise NotImplementedError("lax.ragged_dot_general: out_sharding is not supported "
                                  "(fnad has one device)")
    from fnad.primitives.linalg import canonicalize_precision
    from fnad.primitives.ragged import ragged_dot_general_p
    rdn = ragged_dot_dimension_numbers
    try:
        ((lc, rc), (lb, rb)), ragged, group = rdn
        lc, rc, lb, rb, ragged, group = (tuple(_operator.index(d) for d in x)
                                         for x in (lc, rc, lb, rb, ragged, group))
    except (TypeError, ValueError):
        raise TypeError(f"lax.ragged_dot_general: ragged_dot_dimension_numbers must be a "
                        f"RaggedDotDimensionNumbers(((lhs_contract, rhs_contract), "
                        f"(lhs_batch, rhs_batch)), lhs_ragged_dimensions, "
                        f"rhs_group_dimensions), got {rdn!r}") from None
    lv, rv, gv = _get_aval(lhs), _get_aval(rhs), _get_aval(group_sizes)
    if len(ragged) != 1 or not 0 <= ragged[0] < lv.ndim:
        raise ValueError(f"lax.ragged_dot_general: lhs_ragged_dimensions must name one dim of "
                         f"lhs (shape {lv.shape}), got {list(ragged)}")
    r = ragged[0]
    kind = "contracting" if r in lc else "batch" if r in lb else "rows"
    if (kind == "rows") != (len(group) == 1):
        raise ValueError(f"lax.ragged_dot_general: rhs_group_dimensions must name one dim of "
                         f"rhs exactly when the ragged dim is a free dim of lhs; got "
                         f"{list(group)} for a ragged {kind if kind != 'rows' else 'free'} "
                         f"dim")
    if not _dtypes.is_int(gv.dtype):
        raise TypeError(f"lax.ragged_dot_general: group_sizes must be integers, got dtype "
                        f"{gv.dtype}")
    params = dict(precision=canonicalize_precision(precision),
                  preferred_element_type=None if preferred_element_type is None
                  else _dtypes.canonicalize_dtype(preferred_element_type))
    if kind == "batch":                           # jax's CPU result: group sizes unused
        return dot_general(lhs, rhs, ((lc, rc), (lb, rb)), **params)  # noqa: F405
    rf = tuple(d for d in range(rv.ndim) if d not in rc + rb + group)
    lf = tuple(d for d in range(lv.ndim) if d not in lc + lb)
    bshape = tuple(lv.shape[d] for d in lb)
    for what, ld, rd in (("batch", lb, rb), ("contracting", lc, rc)):
        if tuple(lv.shape[d] for d in ld) != tuple(rv.shape[d] for d in rd):
            raise ValueError(f"lax.ragged_dot_general: the {what} dims of lhs {lv.shape} "
                             f"({list(ld)}) and rhs {rv.shape} ({list(rd)}) differ in size")
    if group and rv.shape[group[0]] != gv.shape[-1]:
        raise ValueError(f"lax.ragged_dot_general: group_sizes {gv.shape} has "
                         f"{gv.shape[-1]} groups, the rhs {rv.shape} "
                         f"{rv.shape[group[0]]} (its dim {group[0]})")
    if kind == "rows":
        (gd,) = group
        xs = tuple(d for d in lf if d < r)        # free dims outer to the ragged dim
        inner = tuple(d for d in lf if d > r)
        tail = lc                                 # lhs [b.., x.., r, inner.., k..]
        rhs_lead = rb + (gd,) + tuple(rc)         # rhs [b.., g, k.., n..]
    else:
        xs = tuple(d for d in lc if d < r)        # contracting dims outer to the ragged dim
        inner = tuple(d for d in lc if d > r)
        tail = lf                                 # lhs [b.., x.., r, inner.., m..]
        pair = dict(zip(lc, rc))
        rhs_lead = rb + tuple(pair[d] for d in xs + (r,) + inner)   # rhs [b.., x.., r, ..]
    g = gv.shape[-1]
    xshape = tuple(lv.shape[d] for d in xs)
    nb, nx = _math.prod(bshape), _math.prod(xshape)
    rows = lv.shape[r] * _math.prod(lv.shape[d] for d in inner)
    scale = rows // lv.shape[r] if lv.shape[r] else 1
    if gv.shape not in ((g,), bshape + xshape + (g,)):
        raise ValueError(f"lax.ragged_dot_general: group_sizes must have shape [g] or "
                         f"{list(bshape + xshape) + ['g']}, got {gv.shape}")
    sizes = broadcast_in_dim(group_sizes, bshape + xshape + (g,),  # noqa: F405
                             tuple(range(len(bshape + xshape) + 1 - gv.ndim,
                                         len(bshape + xshape) + 1)))
    sizes = reshape(sizes, (nb * nx, g))  # noqa: F405
    if scale != 1:
        sizes = mul(sizes, convert_element_type(scale, _get_aval(sizes).dtype))  # noqa: F405
    lhs_t = reshape(transpose(lhs, lb + xs + (r,) + inner + tail),  # noqa: F405
                    (nb * nx, rows, _math.prod(lv.shape[d] for d in tail)))
    rhs_t = transpose(rhs, rhs_lead + rf)  # noqa: F405
    nshape = tuple(rv.shape[d] for d in rf)
    n = _math.prod(nshape)
    if kind == "rows":
        k = _math.prod(lv.shape[d] for d in lc)
        rhs_t = reshape(rhs_t, (nb, g, k, n))  # noqa: F405
        if nx != 1:                                # the same experts for every x
            rhs_t = reshape(broadcast_in_dim(rhs_t, (nb, nx, g, k, n), (0, 2, 3, 4)),  # noqa
                            (nb * nx, g, k, n))
        out = ragged_dot_general_p.bind(lhs_t, rhs_t, sizes, mode="rows", **params)
        mshape = tuple(lv.shape[d] for d in xs + (r,) + inner)
        return reshape(out, bshape + mshape + nshape)  # noqa: F405
    rhs_t = reshape(rhs_t, (nb * nx, rows, n))  # noqa: F405
    out = ragged_dot_general_p.bind(lhs_t, rhs_t, sizes, mode="contracting", **params)
    mshape = tuple(lv.shape[d] for d in lf)
    out = reshape(out, bshape + (nx, g) + mshape + nshape)  # noqa: F405
    out = reduce_sum(out, (len(bshape),))  # noqa: F405      sum over the outer k dims
    nbd = len(bshape)                              # [b.., g, m.., n..] -> [g, b.., m.., n..]
    return transpose(out, (nbd,) + tuple(range(nbd)) + tuple(range(nbd + 1, out.ndim)))  # noqa


def pswapaxes(x, axis_name, axis: int, *, axis_index_groups=None):
    """all_to_all with split and concat along `axis` (tiled): exchange the mapped axis with
    `axis`, whose size must equal the axis size."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups,  # noqa
                      tiled=True)


def pshuffle(x, axis_name, perm):
    """Member i gets member perm[i]'s `x` (ppermute with pairs (perm[i], i))."""
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])  # noqa: F405


def pbroadcast(x, axis_name, source: int):
    """Every member gets member `source`'s `x`."""
    def one(v):
        return index_in_dim(all_gather(v, axis_name), source, 0, keepdims=False)  # noqa
    return tree_util.tree_map(one, x)


def platform_dependent(*args, default=None, **per_platform):
    """The function for fnad's platform ("cpu"; the backends run on the host or, for
    cuda, are dispatched by the array's backend) applied to `args`: per_platform["cpu"],
    else `default`."""
    fn = per_platform.get("cpu", default)
    if fn is None:
        raise NotImplementedError(f"lax.platform_dependent: no function for 'cpu' and no "
                                  f"default (given: {sorted(per_platform)})")
    return fn(*args)


def _moveaxis(x, src: int, dst: int):
    from fnad.primitives._batching import moveaxis
    return moveaxis(x, src, dst)


# Every primitive, under JAX's `<name>_p` (lax.sin_p, lax.dot_general_p, lax.psum_p ...).
def _export_primitives():
    import importlib
    import sys
    here = sys.modules[__name__]
    for family in ("collectives", "control_flow", "convolution", "cumulative",
                   "decompositions", "elementwise", "fft", "indexing", "linalg", "logic",
                   "ragged", "reductions", "shape_ops", "solves", "sorting", "windowed"):
        mod = importlib.import_module(f"fnad.primitives.{family}")
        for name, value in vars(mod).items():
            if name.endswith("_p") and type(value) is _core.Primitive and \
                    not hasattr(here, name):
                setattr(here, name, value)


_export_primitives()
linear_solve_p = custom_linear_solve_p  # noqa: F405  (JAX's name for it)

from fnad.lax_rng import RandomAlgorithm, rng_bit_generator  # noqa: E402,F401

from fnad import prng as _prng  # noqa: E402
_prng.install(globals(), "lax")     # slice, concatenate, select_n ... also take typed keys

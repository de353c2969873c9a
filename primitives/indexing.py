"""Gather and the scatter family (XLA semantics, jax.lax's API).

gather reads a window of `operand` at each index vector (the last dimension of
`start_indices`); the scatters write `updates` windows back at such indices,
combining with what is there by replacing (scatter), adding, multiplying, or
taking the min/max. Dimension numbers are hashable NamedTuples of int tuples;
out-of-bounds handling is a `GatherScatterMode`:

    CLIP               indices clamped so the whole window is in bounds
    FILL_OR_DROP       gather: windows not fully in bounds read `fill_value`;
                       scatter: such windows are dropped
    PROMISE_IN_BOUNDS  the caller promises; fnad clamps gathers and drops scatters (as XLA)

lax.gather's default is PROMISE_IN_BOUNDS, the scatters' default FILL_OR_DROP (as JAX).
Repeated indices: scatter_add/mul/min/max combine every update; `scatter` keeps the
last update in row-major order of the index batch dimensions (XLA leaves it open).
Under vmap the mapped axis goes first and becomes a window dim spanning it (unmapped
indices) or a batching dim pairing operand and indices (mapped indices), as in JAX.
"""
from __future__ import annotations

import enum
import math
from typing import NamedTuple

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives._batching import bdim_at_front, moveaxis
from fnad.primitives._util import ANY, NUM, add_tangents, check_kind

__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
           "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul"]


class GatherDimensionNumbers(NamedTuple):
    """How operand, start_indices and output dims relate (see XLA's Gather).

    offset_dims: output dims holding the window (sorted); collapsed_slice_dims:
    operand dims of window size 1 dropped from the output; start_index_map: the
    operand dim each entry of an index vector starts; operand_batching_dims /
    start_indices_batching_dims: paired dims indexed together (index i of one reads
    index i of the other). The index vector is always the last dim of start_indices.
    """
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """The mirror image of GatherDimensionNumbers for scatters (see XLA's Scatter).

    update_window_dims: updates dims holding the window (sorted); inserted_window_dims:
    operand dims of window size 1 absent from updates; scatter_dims_to_operand_dims:
    the operand dim each entry of an index vector starts; operand_batching_dims /
    scatter_indices_batching_dims: paired batch dims.
    """
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """How gathers and scatters treat out-of-bounds indices (lax.GatherScatterMode)."""
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    def __repr__(self):
        return f"GatherScatterMode.{self.name}"

    @staticmethod
    def from_any(s) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        name = getattr(s, "name", None)                  # a jax.lax.GatherScatterMode
        if isinstance(name, str) and name in GatherScatterMode.__members__:
            return GatherScatterMode[name]
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}" (expected "clip", "fill", "drop", '
                         '"promise_in_bounds" or a GatherScatterMode)')


def _dnums(cls, dn, name: str):
    """`dn` as `cls` with int-tuple fields (hashable; also accepts jax's NamedTuples)."""
    try:
        if isinstance(dn, tuple) and not hasattr(dn, "_fields"):
            fields = list(dn)
        else:
            fields = [getattr(dn, f) if i < 3 else getattr(dn, f, ())
                      for i, f in enumerate(cls._fields)]
        return cls(*(tuple(int(d) for d in f) for f in fields))
    except (TypeError, AttributeError, ValueError):
        raise TypeError(f"{name}: dimension_numbers must be a {cls.__name__}, got "
                        f"{dn!r}") from None


_NAN = float("nan")   # one object: params holding it hash and compare equal (jit caches)


def _fill_param(value):
    value = np.asarray(value).item()
    return _NAN if isinstance(value, float) and value != value else value


def _default_fill_value(dtype: np.dtype):
    if dtypes.is_inexact(dtype):
        return _NAN
    if dtypes.is_bool(dtype):
        return True
    info = dtypes.iinfo(dtype)
    return int(info.min) if dtype.kind == "i" else int(info.max)


# ---- shared validation ----------------------------------------------------------------
def _check_indices(name: str, indices: ShapedArray) -> None:
    if not dtypes.is_int(indices.dtype):
        raise shape_error(name, f"indices must have an integer dtype, got {indices.dtype.name}")
    if indices.ndim < 1:
        raise shape_error(name, "indices must have rank >= 1: their last dimension is the "
                                f"index vector (got shape {indices.shape}); to index with "
                                "scalars add a trailing dimension of size 1")


def _check_dims(name: str, field: str, dims, rank: int, what: str, sort: bool = True):
    if any(not 0 <= d < rank for d in dims):
        raise shape_error(name, f"{field} {dims} out of range for {what} of rank {rank}")
    if len(set(dims)) != len(dims):
        raise shape_error(name, f"{field} must not repeat, got {dims}")
    if sort and list(dims) != sorted(dims):
        raise shape_error(name, f"{field} must be sorted, got {dims}")


def _check_disjoint(name: str, f1: str, d1, f2: str, d2) -> None:
    if set(d1) & set(d2):
        raise shape_error(name, f"{f1} {d1} and {f2} {d2} must be disjoint")


def _check_index_map(name: str, field: str, index_map, obd, ibd, operand, indices) -> None:
    """Checks shared by gather and scatter on the index-side dimension numbers."""
    if len(index_map) != indices.shape[-1]:
        raise shape_error(name, f"{field} {index_map} has {len(index_map)} entries but the "
                                f"index vectors (last dim of indices {indices.shape}) have "
                                f"{indices.shape[-1]}; these must be equal")
    _check_dims(name, field, index_map, operand.ndim, f"operand {operand.shape}", sort=False)
    _check_dims(name, "operand_batching_dims", obd, operand.ndim, f"operand {operand.shape}")
    _check_disjoint(name, field, index_map, "operand_batching_dims", obd)
    _check_dims(name, "indices batching dims", ibd, indices.ndim - 1,
                f"the batch dims of indices {indices.shape} (the last is the index vector)",
                sort=False)
    if len(obd) != len(ibd):
        raise shape_error(name, f"needs as many operand_batching_dims {obd} as indices "
                                f"batching dims {ibd}")
    ob, ib = (tuple(operand.shape[d] for d in obd), tuple(indices.shape[d] for d in ibd))
    if ob != ib:
        raise shape_error(name, f"operand batching dims {obd} of operand {operand.shape} have "
                                f"sizes {ob}, but indices batching dims {ibd} of indices "
                                f"{indices.shape} have sizes {ib}")


# ---- gather -------------------------------------------------------------------------------
gather_p = Primitive("gather")
def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """Windows of `operand` of `slice_sizes` starting at each index vector.

    start_indices: [..., N] integer index vectors; dims per `dimension_numbers`
    (a GatherDimensionNumbers). mode=None is PROMISE_IN_BOUNDS (as lax.gather);
    under FILL_OR_DROP, `fill_value` defaults to NaN (inexact), the minimum
    (signed), the maximum (unsigned) or True (bool).
    """
    parsed = (GatherScatterMode.PROMISE_IN_BOUNDS if mode is None
              else GatherScatterMode.from_any(mode))
    if parsed is GatherScatterMode.FILL_OR_DROP:
        fill_value = (_default_fill_value(get_aval(operand).dtype) if fill_value is None
                      else _fill_param(fill_value))
    else:
        fill_value = None
    return gather_p.bind(operand, start_indices,
                         dimension_numbers=_dnums(GatherDimensionNumbers, dimension_numbers,
                                                  "gather"),
                         slice_sizes=tuple(int(s) for s in slice_sizes),
                         unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=parsed,
                         fill_value=fill_value)

def gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                         indices_are_sorted, mode, fill_value):
    dn = dimension_numbers
    check_kind("gather", operand, ANY)
    _check_indices("gather", indices)
    if len(slice_sizes) != operand.ndim:
        raise shape_error("gather", f"slice_sizes {slice_sizes} must have one entry per "
                                    f"operand dimension: operand {operand.shape} has rank "
                                    f"{operand.ndim}, slice_sizes has {len(slice_sizes)}")
    batch_shape = indices.shape[:-1]
    out_rank = len(dn.offset_dims) + len(batch_shape)
    _check_dims("gather", "offset_dims", dn.offset_dims, out_rank, "the output")
    _check_dims("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, operand.ndim,
                f"operand {operand.shape}")
    _check_index_map("gather", "start_index_map", dn.start_index_map,
                     dn.operand_batching_dims, dn.start_indices_batching_dims, operand, indices)
    _check_disjoint("gather", "collapsed_slice_dims", dn.collapsed_slice_dims,
                    "operand_batching_dims", dn.operand_batching_dims)
    window = [d for d in range(operand.ndim)
              if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    if len(window) != len(dn.offset_dims):
        raise shape_error("gather", f"every operand dim must be an offset dim or collapsed/"
                                    f"batching: operand {operand.shape} has {len(window)} "
                                    f"uncollapsed dims {tuple(window)} but offset_dims is "
                                    f"{dn.offset_dims}")
    if math.prod(indices.shape) != 0:
        for d, (s, n) in enumerate(zip(slice_sizes, operand.shape, strict=True)):
            if not 0 <= s <= n:
                raise shape_error("gather", f"slice_sizes[{d}] = {s} must be in [0, {n}]: "
                                            f"operand {operand.shape} has size {n} in "
                                            f"dimension {d} (slice_sizes {slice_sizes})")
    for field, dims in (("collapsed_slice_dims", dn.collapsed_slice_dims),
                        ("operand_batching_dims", dn.operand_batching_dims)):
        bad = [d for d in dims if slice_sizes[d] != 1]
        if bad:
            raise shape_error("gather", f"{field} must have slice size 1, but slice_sizes "
                                        f"{slice_sizes} has {slice_sizes[bad[0]]} in "
                                        f"dimension {bad[0]}")
    batch = iter(batch_shape)
    win = iter(slice_sizes[d] for d in window)
    shape = tuple(next(win) if o in dn.offset_dims else next(batch) for o in range(out_rank))
    return ShapedArray(shape, operand.dtype, operand.weak_type)
abstract_eval_rules[gather_p] = gather_abstract_eval
def gather_jvp(primals, tangents, **params):           # d gather(x) = gather(dx), filled with 0
    (operand, indices), (operand_dot, _) = primals, tangents
    out = gather_p.bind(operand, indices, **params)
    if not dtypes.is_inexact(get_aval(out).dtype):
        return out, None
    fill = 0 if params["mode"] is GatherScatterMode.FILL_OR_DROP else None
    return out, gather_p.bind(operand_dot, indices, **dict(params, fill_value=fill))
jvp_rules[gather_p] = gather_jvp
def gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                     indices_are_sorted, mode, fill_value):
    from fnad.primitives.shape_ops import full       # x̄ = scatter_add(0, indices, ct)
    if is_undefined(indices) or not is_undefined(operand):
        raise ValueError("gather is linear only in its operand")
    dn = dimension_numbers
    sdn = ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map,
                                  dn.operand_batching_dims, dn.start_indices_batching_dims)
    zeros = full(operand.aval.shape, 0, get_aval(ct).dtype)
    return [scatter_add_p.bind(zeros, indices, ct, dimension_numbers=sdn,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=mode), None]
transpose_rules[gather_p] = gather_transpose
def _shift(dims) -> tuple[int, ...]:
    return tuple(d + 1 for d in dims)
def gather_batch(vals, dims, *, dimension_numbers, slice_sizes, **params):
    # The batch axis goes first everywhere; output batch dim 0 in every case.
    (operand, indices), (od, idd) = vals, dims
    dn = dimension_numbers
    if idd is None:                                    # a window spanning the whole batch axis
        operand = moveaxis(operand, od, 0)
        dn = GatherDimensionNumbers((0,) + _shift(dn.offset_dims),
                                    _shift(dn.collapsed_slice_dims),
                                    _shift(dn.start_index_map), _shift(dn.operand_batching_dims),
                                    dn.start_indices_batching_dims)
        slice_sizes = (get_aval(operand).shape[0],) + slice_sizes
    elif od is None:                                   # one more batch dim of the indices;
        indices = moveaxis(indices, idd, 0)            # members may read the same windows
        dn = dn._replace(offset_dims=_shift(dn.offset_dims),
                         start_indices_batching_dims=_shift(dn.start_indices_batching_dims))
        params = dict(params, unique_indices=False, indices_are_sorted=False)
    else:                                              # member b reads operand[b]: a new
        operand, indices = moveaxis(operand, od, 0), moveaxis(indices, idd, 0)  # batching dim
        dn = GatherDimensionNumbers(_shift(dn.offset_dims), _shift(dn.collapsed_slice_dims),
                                    _shift(dn.start_index_map),
                                    (0,) + _shift(dn.operand_batching_dims),
                                    (0,) + _shift(dn.start_indices_batching_dims))
        slice_sizes = (1,) + slice_sizes
    return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes,
                         **params), 0
batch_rules[gather_p] = gather_batch


# ---- the scatter family: shared shape rule and helpers -------------------------------------
def _scatter_abstract_eval(name: str, kinds: tuple[str, ...]):
    def rule(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
             unique_indices, mode):
        dn = dimension_numbers
        check_kind(name, operand, kinds)
        _check_indices(name, indices)
        if updates.dtype != operand.dtype:
            raise shape_error(name, f"updates must have the operand's dtype "
                                    f"{operand.dtype.name}, got {updates.dtype.name}")
        batch_shape = indices.shape[:-1]
        want_rank = len(batch_shape) + len(dn.update_window_dims)
        if updates.ndim != want_rank:
            raise shape_error(name, f"updates must have rank {want_rank} ({len(batch_shape)} "
                                    f"scatter dims from indices {indices.shape} + "
                                    f"{len(dn.update_window_dims)} update_window_dims), got "
                                    f"updates of shape {updates.shape}")
        _check_dims(name, "update_window_dims", dn.update_window_dims, updates.ndim,
                    f"updates {updates.shape}")
        _check_dims(name, "inserted_window_dims", dn.inserted_window_dims, operand.ndim,
                    f"operand {operand.shape}")
        _check_index_map(name, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                         dn.operand_batching_dims, dn.scatter_indices_batching_dims, operand,
                         indices)
        _check_disjoint(name, "inserted_window_dims", dn.inserted_window_dims,
                        "operand_batching_dims", dn.operand_batching_dims)
        window = [d for d in range(operand.ndim)
                  if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
        if len(window) != len(dn.update_window_dims):
            raise shape_error(name, f"every operand dim must be a window dim or inserted/"
                                    f"batching: operand {operand.shape} has {len(window)} "
                                    f"non-inserted dims {tuple(window)} but update_window_dims "
                                    f"is {dn.update_window_dims}")
        for d, u in zip(window, dn.update_window_dims, strict=True):
            if updates.shape[u] > operand.shape[d]:
                raise shape_error(name, f"updates {updates.shape} do not fit in operand "
                                        f"{operand.shape}: window dimension {u} of updates "
                                        f"has size {updates.shape[u]}, more than operand "
                                        f"dimension {d} of size {operand.shape[d]}")
        scatter_dims = [u for u in range(updates.ndim) if u not in dn.update_window_dims]
        for k, u in enumerate(scatter_dims):
            if updates.shape[u] != batch_shape[k]:
                raise shape_error(name, f"updates {updates.shape} do not match indices "
                                        f"{indices.shape}: updates dimension {u} has size "
                                        f"{updates.shape[u]} but indices dimension {k} has "
                                        f"size {batch_shape[k]}")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return rule


def _scatter_bind(prim: Primitive, operand, indices, updates, dimension_numbers,
                  indices_are_sorted, unique_indices, mode):
    if type(updates) in (int, float, complex, bool):
        updates = np.asarray(updates, get_aval(operand).dtype)
    return prim.bind(operand, indices, updates,
                     dimension_numbers=_dnums(ScatterDimensionNumbers, dimension_numbers,
                                              prim.name),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices), mode=GatherScatterMode.from_any(mode))


def inverse_gather_dims(dn: ScatterDimensionNumbers, updates_shape, operand_ndim: int
                        ) -> tuple[GatherDimensionNumbers, list[int]]:
    """(dimension numbers, slice sizes) of the gather that reads back the windows a scatter
    with `dn` and updates of `updates_shape` writes into an operand of rank `operand_ndim`
    (also used by backends/xla/indexing.py's scatter lowering)."""
    gdn = GatherDimensionNumbers(dn.update_window_dims, dn.inserted_window_dims,
                                 dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
                                 dn.scatter_indices_batching_dims)
    window = iter(updates_shape[u] for u in dn.update_window_dims)
    sizes = [1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
             else next(window) for d in range(operand_ndim)]
    return gdn, sizes


def _inverse_gather(x, indices, dn: ScatterDimensionNumbers, updates_shape, mode, **kw):
    """gather(x) reading back the windows a scatter with `dn` writes (fill 0 if dropped)."""
    gdn, sizes = inverse_gather_dims(dn, updates_shape, get_aval(x).ndim)
    return gather(x, indices, gdn, sizes, mode=mode, fill_value=0, **kw)


def _scatter_batch_rule(prim: Primitive):
    """The batching rule of a scatter: the operand (broadcast if unmapped) and the updates
    get the batch axis first; mapped indices pair it with the operand's as a batching dim,
    else it is one more window dim spanning the whole axis. Each member writes only its own
    operand[b], so unique_indices and indices_are_sorted still hold."""
    def rule(vals, dims, *, dimension_numbers, **params):
        (operand, indices, updates), (od, idd, ud) = vals, dims
        dn = dimension_numbers
        size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        operand, updates = bdim_at_front(operand, od, size), bdim_at_front(updates, ud, size)
        if idd is None:
            dn = ScatterDimensionNumbers((0,) + _shift(dn.update_window_dims),
                                         _shift(dn.inserted_window_dims),
                                         _shift(dn.scatter_dims_to_operand_dims),
                                         _shift(dn.operand_batching_dims),
                                         dn.scatter_indices_batching_dims)
        else:
            indices = moveaxis(indices, idd, 0)
            dn = ScatterDimensionNumbers(_shift(dn.update_window_dims),
                                         _shift(dn.inserted_window_dims),
                                         _shift(dn.scatter_dims_to_operand_dims),
                                         (0,) + _shift(dn.operand_batching_dims),
                                         (0,) + _shift(dn.scatter_indices_batching_dims))
        return prim.bind(operand, indices, updates, dimension_numbers=dn, **params), 0
    return rule


def _zeros_like(x, dtype=None):
    from fnad.primitives.shape_ops import full
    aval = get_aval(x)
    return full(aval.shape, 0, aval.dtype if dtype is None else dtype)


def _instantiate(t, primal):
    return t if nonzero(t) else _zeros_like(primal)


# ---- scatter_add -----------------------------------------------------------------------------
scatter_add_p = Primitive("scatter_add")
def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with `updates` added at the windows `scatter_indices` pick.

    scatter_indices: [..., N] integer index vectors; updates: the scatter dims of
    the indices plus the window dims (ScatterDimensionNumbers); mode=None is FILL_OR_DROP.
    """
    return _scatter_bind(scatter_add_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)

abstract_eval_rules[scatter_add_p] = _scatter_abstract_eval("scatter_add", NUM)
def scatter_add_jvp(primals, tangents, **params):      # d(x + S(u)) = dx + S(du)
    (operand, indices, updates), (operand_dot, _, updates_dot) = primals, tangents
    out = scatter_add_p.bind(operand, indices, updates, **params)
    return out, scatter_add_p.bind(_instantiate(operand_dot, operand), indices,
                                   _instantiate(updates_dot, updates), **params)
jvp_rules[scatter_add_p] = scatter_add_jvp
def scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers,
                          indices_are_sorted, unique_indices, mode):
    if is_undefined(indices):                          # x̄ = ct, ū = gather(ct)
        raise ValueError("scatter_add is not linear in its indices")
    u_shape = updates.aval.shape if is_undefined(updates) else get_aval(updates).shape
    return [ct if is_undefined(operand) else None, None,
            _inverse_gather(ct, indices, dimension_numbers, u_shape, mode,
                            unique_indices=unique_indices,
                            indices_are_sorted=indices_are_sorted)
            if is_undefined(updates) else None]
transpose_rules[scatter_add_p] = scatter_add_transpose
batch_rules[scatter_add_p] = _scatter_batch_rule(scatter_add_p)

# ---- scatter_mul -----------------------------------------------------------------------------
scatter_mul_p = Primitive("scatter_mul")
def scatter_mul(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` multiplied by `updates` at the windows `scatter_indices` pick.

    scatter_indices: [..., N] integer index vectors; updates: the scatter dims of
    the indices plus the window dims (ScatterDimensionNumbers); mode=None is FILL_OR_DROP.
    """
    return _scatter_bind(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)

abstract_eval_rules[scatter_mul_p] = _scatter_abstract_eval("scatter_mul", NUM)
def scatter_mul_jvp(primals, tangents, **params):     # d(x·Πu) = dx·Πu + x·S(du) (unique)
    from fnad.primitives.elementwise import mul
    (operand, indices, updates), (operand_dot, _, updates_dot) = primals, tangents
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    t_updates = None
    if nonzero(updates_dot):
        if not params["unique_indices"]:
            raise NotImplementedError("scatter_mul gradients with respect to updates are only "
                                      "implemented if `unique_indices=True` (as in JAX)")
        t_updates = mul(operand, scatter_add_p.bind(_zeros_like(operand), indices,
                                                    updates_dot, **params))
    t_operand = (scatter_mul_p.bind(operand_dot, indices, updates, **params)
                 if nonzero(operand_dot) else None)
    return out, add_tangents(t_operand, t_updates)
jvp_rules[scatter_mul_p] = scatter_mul_jvp
def scatter_mul_transpose(ct, operand, indices, updates, *, dimension_numbers,
                          indices_are_sorted, unique_indices, mode):
    from fnad.primitives.elementwise import mul        # x̄ = S_mul(ct, u); ū = gather(ct·x)
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    if is_undefined(operand) and is_undefined(updates):
        raise ValueError("scatter_mul is not linear in operand and updates together")
    if is_undefined(operand):
        return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]
    if not unique_indices:
        raise NotImplementedError("scatter_mul gradients are only implemented if "
                                  "`unique_indices=True` (as in JAX)")
    return [None, None, _inverse_gather(mul(ct, operand), indices, dimension_numbers,
                                        updates.aval.shape, mode)]
transpose_rules[scatter_mul_p] = scatter_mul_transpose
batch_rules[scatter_mul_p] = _scatter_batch_rule(scatter_mul_p)


# ---- scatter_min / scatter_max -----------------------------------------------------------------
def _scatter_extremal_jvp(prim):
    """The winner's tangent at each written element; ties split the tangent evenly (JAX)."""
    def rule(primals, tangents, **params):
        from fnad.primitives.elementwise import add, div, mul, sub
        from fnad.primitives.logic import convert_element_type, eq, select_n
        from fnad.primitives.shape_ops import full
        (operand, indices, updates), (operand_dot, _, updates_dot) = primals, tangents
        dn, mode = params["dimension_numbers"], params["mode"]
        out = prim.bind(operand, indices, updates, **params)
        dt = get_aval(out).dtype
        u_shape = get_aval(updates).shape
        read_mode = (GatherScatterMode.CLIP if mode is GatherScatterMode.CLIP
                     else GatherScatterMode.PROMISE_IN_BOUNDS)
        def read(x):                                   # x at each update's target
            return _inverse_gather(x, indices, dn, u_shape, read_mode)
        def count(u):                                  # Σ u over the updates per target
            return read(scatter_add_p.bind(_zeros_like(operand), indices, u, **params))
        initial, target = read(operand), read(out)
        won = convert_element_type(eq(updates, target), dt)       # [updates shape]
        retained = eq(initial, target)
        num_updates = count(won)
        num_refs = count(full(u_shape, 1, dt))
        share_retained = div(1, add(num_updates, 1))
        safe_num = select_n(eq(num_updates, 0), num_updates, 1)
        updates_coef = mul(won, select_n(retained, div(1, safe_num), share_retained))
        operand_coef = div(sub(select_n(retained, 0, share_retained), 1), num_refs)
        tangent_updates = add(mul(read(_instantiate(operand_dot, operand)), operand_coef),
                              mul(_instantiate(updates_dot, updates), updates_coef))
        return out, scatter_add_p.bind(_instantiate(operand_dot, operand), indices,
                                       tangent_updates, **params)
    return rule

scatter_min_p = Primitive("scatter_min")
def scatter_min(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the min of it and `updates` at the windows picked.

    scatter_indices: [..., N] integer index vectors; updates: the scatter dims of
    the indices plus the window dims (ScatterDimensionNumbers); mode=None is FILL_OR_DROP.
    """
    return _scatter_bind(scatter_min_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)

abstract_eval_rules[scatter_min_p] = _scatter_abstract_eval("scatter_min", ANY)
jvp_rules[scatter_min_p] = _scatter_extremal_jvp(scatter_min_p)  # d min = d(winner), ties split
batch_rules[scatter_min_p] = _scatter_batch_rule(scatter_min_p)

scatter_max_p = Primitive("scatter_max")
def scatter_max(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the max of it and `updates` at the windows picked.

    scatter_indices: [..., N] integer index vectors; updates: the scatter dims of
    the indices plus the window dims (ScatterDimensionNumbers); mode=None is FILL_OR_DROP.
    """
    return _scatter_bind(scatter_max_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)

abstract_eval_rules[scatter_max_p] = _scatter_abstract_eval("scatter_max", ANY)
jvp_rules[scatter_max_p] = _scatter_extremal_jvp(scatter_max_p)  # d max = d(winner), ties split
batch_rules[scatter_max_p] = _scatter_batch_rule(scatter_max_p)


# ---- scatter (set) ---------------------------------------------------------------------------
scatter_p = Primitive("scatter")
def scatter(operand, scatter_indices, updates, dimension_numbers, *,
            indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with the picked windows replaced by `updates`.

    scatter_indices: [..., N] integer index vectors; updates: the scatter dims of
    the indices plus the window dims (ScatterDimensionNumbers); mode=None is FILL_OR_DROP.
    """
    return _scatter_bind(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)

abstract_eval_rules[scatter_p] = _scatter_abstract_eval("scatter", ANY)
def scatter_jvp(primals, tangents, **params):
    # d S(x, u) = S(dx, du). With repeated indices, find the update that won each element
    # (the last: the largest of the update ids, by scatter_max), then mask the losers and
    # scatter_add (as JAX, whose ids go through scatter itself).
    from fnad.primitives.logic import eq, select_n
    from fnad.primitives.shape_ops import broadcast_in_dim
    (operand, indices, updates), (operand_dot, _, updates_dot) = primals, tangents
    operand_dot = _instantiate(operand_dot, operand)
    updates_dot = _instantiate(updates_dot, updates)
    if params["unique_indices"]:
        return (scatter_p.bind(operand, indices, updates, **params),
                scatter_p.bind(operand_dot, indices, updates_dot, **params))
    dn = params["dimension_numbers"]
    u_shape = get_aval(updates).shape
    ids_shape = tuple(1 if u in dn.update_window_dims else s for u, s in enumerate(u_shape))
    ids = np.arange(1, math.prod(ids_shape) + 1, dtype=np.int32).reshape(ids_shape)
    update_ids = broadcast_in_dim(ids, u_shape, tuple(range(len(u_shape))))
    scattered_ids = scatter_max_p.bind(_zeros_like(operand, np.int32), indices, update_ids,
                                       **params)
    read_mode = (GatherScatterMode.CLIP if params["mode"] is GatherScatterMode.CLIP
                 else GatherScatterMode.PROMISE_IN_BOUNDS)
    gathered_ids = _inverse_gather(scattered_ids, indices, dn, u_shape, read_mode)
    kept = eq(scattered_ids, 0)                        # operand elements nothing overwrote
    won = eq(update_ids, gathered_ids)                 # updates that were not overwritten
    out = scatter_add_p.bind(select_n(kept, 0, operand), indices,
                             select_n(won, 0, updates), **params)
    out_dot = scatter_add_p.bind(select_n(kept, 0, operand_dot), indices,
                                 select_n(won, 0, updates_dot), **params)
    return out, out_dot
jvp_rules[scatter_p] = scatter_jvp
def scatter_transpose(ct, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                      unique_indices, mode):
    # x̄ = ct with the written windows zeroed; ū = gather(ct)   (unique indices only)
    if not unique_indices:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True (as in JAX)")
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=True, mode=mode)
    u_aval = updates.aval if is_undefined(updates) else get_aval(updates)
    operand_bar = updates_bar = None
    if is_undefined(operand):
        from fnad.primitives.shape_ops import full
        zeros = full(u_aval.shape, 0, get_aval(ct).dtype)
        operand_bar = scatter_p.bind(ct, indices, zeros, **params)
    if is_undefined(updates):
        updates_bar = _inverse_gather(ct, indices, dimension_numbers, u_aval.shape, mode,
                                      indices_are_sorted=indices_are_sorted)
    return [operand_bar, None, updates_bar]
transpose_rules[scatter_p] = scatter_transpose
batch_rules[scatter_p] = _scatter_batch_rule(scatter_p)

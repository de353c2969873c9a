"""NumPy indexing for fnad arrays: `x[idx]` and `x.at[idx]` (take, nonzero ... live in
_index_routines and are re-exported here).

Every index is lowered to primitives, cheapest first (JAX's strategy):

- only static ints, slices, None, ...     -> slice (+ rev, squeeze, expand_dims)
- plus traced scalar ints                 -> dynamic_slice, then the static path
- integer / boolean arrays                -> one gather (XLA dimension numbers)

Updates (`x.at[idx].set/add/...`) are the transposed lowering: a scatter with the
same dimension numbers, or a dynamic_update_slice when `idx` is a static
contiguous block. Boolean masks must be concrete (their result shape depends on
their values); under jit use `where` instead.

Out-of-bounds behaviour is JAX's: a static Python int out of range raises
IndexError (as NumPy, and JAX with jax_check_static_indices); traced and array
indices are clamped by `x[idx]` / `.get()`, filled by take / take_along_axis
and dropped by the scatter updates; `mode=` overrides each.

Imports fnad.core, fnad.lax, the primitive wrappers, fnad.numpy._core and
fnad.numpy._index_routines only.
"""
from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from fnad import core, dtypes, lax
from fnad.core import Tracer, get_aval
from fnad.numpy._core import asarray, promote_dtypes
from fnad.numpy._index_routines import (_as_index, _broadcast_to, _concrete, _index_dtype,
                                        _is_traced, _ndim, _normalize, argwhere, compress,
                                        diag_indices, diag_indices_from, flatnonzero, nonzero,
                                        take, take_along_axis, tril_indices, tril_indices_from,
                                        triu_indices, triu_indices_from)
from fnad.primitives.indexing import (GatherDimensionNumbers, ScatterDimensionNumbers, gather,
                                      scatter, scatter_add, scatter_max, scatter_min,
                                      scatter_mul)

__all__ = ["IndexUpdateHelper", "NonConcreteBooleanIndexError", "argwhere", "compress",
           "diag_indices", "diag_indices_from", "flatnonzero", "getitem", "nonzero", "take",
           "take_along_axis", "tril_indices", "tril_indices_from", "triu_indices",
           "triu_indices_from"]


class NonConcreteBooleanIndexError(core.JAXIndexError):
    """A boolean mask index whose values are not known while tracing."""


# Index entries after parsing: (kind, value).
_NONE, _SLICE, _INT, _ARRAY, _ELLIPSIS, _SCALAR_BOOL = range(6)


def _static_int(v, what: str) -> int | None:
    if v is None:
        return None
    if _is_traced(v):
        raise IndexError(f"Slice entries must be static integers, got a traced {what} "
                         f"{get_aval(v).str_short()}. Use lax.dynamic_slice for slices with "
                         "traced start indices (their size must be static).")
    try:
        return operator.index(_concrete(v) if isinstance(v, (Tracer, core.Array)) else v)
    except TypeError:
        raise TypeError(f"slice indices must be integers or None, got {v!r}") from None


# ---- parsing -------------------------------------------------------------------------------
def _parse(shape: tuple[int, ...], idx) -> tuple[list, bool, tuple[int, ...]]:
    """(entries, advanced indices contiguous?, x dims inserted by scalar booleans).

    Entries cover every dimension of x (with the scalar-bool dims inserted) exactly
    once, except _NONE; _ARRAY values are int NumPy arrays or traced int arrays.
    """
    if not isinstance(idx, tuple):
        if isinstance(idx, (list, range)):        # as JAX: no NumPy guessing game
            what = "arr[tuple(seq)]" if any(
                e is None or e is Ellipsis or isinstance(e, (slice, list, tuple))
                for e in idx) else "arr[array(seq)]"
            raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                            f"allowed; use `{what}` instead of `arr[seq]`.")
        idx = (idx,)
    raw = []
    for pos, e in enumerate(idx):
        raw.extend(_parse_one(pos, e))
    n_ellipsis = sum(k == _ELLIPSIS for k, _ in raw)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    adv_pos = [p for p, (k, v) in enumerate(raw) if k in (_INT, _SCALAR_BOOL)
               or (k == _ARRAY)]
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
    consumed = sum(k in (_SLICE, _INT, _ARRAY) for k, _ in raw)
    if consumed > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but "
                         f"{consumed} were indexed")
    entries = []
    full = [(_SLICE, slice(None))] * (len(shape) - consumed)
    for k, v in raw:
        entries.extend(full if k == _ELLIPSIS else [(k, v)])
    if not n_ellipsis:
        entries.extend(full)
    # A scalar boolean indexes a new axis of size 1 with [0] (True) or [] (False).
    x_axis, inserted, out = 0, [], []
    for k, v in entries:
        if k == _SCALAR_BOOL:
            inserted.append(x_axis)
            k, v = _ARRAY, np.arange(int(v), dtype=np.int32)
        out.append((k, v))
        x_axis += k != _NONE
    return out, contiguous, tuple(inserted)


def _parse_one(pos: int, e) -> list:
    if e is None:
        return [(_NONE, None)]
    if e is Ellipsis:
        return [(_ELLIPSIS, None)]
    if isinstance(e, slice):
        return [(_SLICE, slice(_static_int(e.start, "start"), _static_int(e.stop, "stop"),
                               _static_int(e.step, "step")))]
    if isinstance(e, (bool, np.bool_)):
        return [(_SCALAR_BOOL, bool(e))]
    if isinstance(e, (int, np.integer)):
        return [(_INT, int(e))]
    if isinstance(e, (list, tuple)) and not e:
        return [(_ARRAY, np.zeros((0,), np.int32))]
    if isinstance(e, (list, tuple)) and any(isinstance(t, Tracer) for t in _leaves(e)):
        e = asarray(e)
    if _is_traced(e):
        aval = get_aval(e)
        if dtypes.is_bool(aval.dtype):
            raise NonConcreteBooleanIndexError(
                f"Array boolean indices must be concrete; got a traced boolean mask "
                f"{aval.str_short()} at position {pos}{core._at_user_line()}. The shape of "
                "x[mask] depends on the mask's values, which are unknown under jit/vmap. Use "
                "fnad.numpy.where(mask, x, other) instead, or nonzero(mask, size=...) for a "
                "static result size.")
        if not dtypes.is_int(aval.dtype):
            raise _bad_index_type(pos, aval.dtype, e)
        return [(_ARRAY, e)]
    try:
        v = _concrete(e)
    except (TypeError, ValueError):
        raise TypeError(f"Indexer at position {pos} is not a valid index: {e!r}") from None
    if v.dtype == np.bool_:
        if v.ndim == 0:
            return [(_SCALAR_BOOL, bool(v))]
        return [(_ARRAY, a.astype(np.int32)) for a in np.nonzero(v)] or []
    if v.dtype.kind not in "iu":
        raise _bad_index_type(pos, v.dtype, e)
    return [(_ARRAY, v)]


def _bad_index_type(pos, dt, e) -> TypeError:
    return TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                     f"{np.dtype(dt).name} at position {pos}, indexer value {e!r}")


def _check_bool_shapes(shape, idx) -> None:
    """A boolean mask index must match the shape of the dims it indexes (NumPy's rule)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    x_axis = 0
    n_consumed = sum(0 if (e is None or e is Ellipsis or isinstance(e, (bool, np.bool_)))
                     else np.ndim(e) if _is_bool_array(e) else 1 for e in idx)
    for e in idx:
        if e is Ellipsis:
            x_axis += len(shape) - n_consumed
        elif _is_bool_array(e) and np.ndim(e):
            m_shape = np.shape(e)
            if tuple(shape[x_axis:x_axis + len(m_shape)]) != tuple(m_shape):
                raise IndexError(f"boolean index did not match shape of indexed array in "
                                 f"index {x_axis}: got {m_shape}, expected "
                                 f"{tuple(shape[x_axis:x_axis + len(m_shape)])}")
            x_axis += len(m_shape)
        elif e is not None and not isinstance(e, (bool, np.bool_)):
            x_axis += 1


def _is_bool_array(e) -> bool:
    if isinstance(e, (np.ndarray, core.Array, Tracer)):
        return get_aval(e).dtype == np.bool_
    if isinstance(e, (list, tuple)):
        leaves = _leaves(e)
        return bool(leaves) and all(isinstance(t, (bool, np.bool_)) for t in leaves)
    return False


def _leaves(e) -> list:
    """The elements of a nested list/tuple (without NumPy, which cannot hold tracers)."""
    if isinstance(e, (list, tuple)):
        return [t for sub in e for t in _leaves(sub)]
    return [e]


# ---- broadcasting of integer indices ---------------------------------------------------
def _broadcast_indices(arrays):
    shapes = [np.shape(a) if isinstance(a, np.ndarray) else get_aval(a).shape for a in arrays]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         "with shapes " + " ".join(map(str, shapes))) from None
    return [_broadcast_to(a, shape) for a in arrays], shape


# ---- x[idx] ----------------------------------------------------------------------------------
def getitem(x, idx, *, mode=None, fill_value=None, indices_are_sorted: bool = False,
            unique_indices: bool = False, wrap_negative_indices: bool = True):
    """x[idx] with NumPy's indexing rules (JAX's out-of-bounds semantics; see the module doc).

    mode: None / "promise_in_bounds" / "clip" clamp array and traced indices into range;
    "fill" (or "drop") returns `fill_value` (default NaN, INT_MIN, UINT_MAX or True by
    dtype) for out-of-bounds positions.
    """
    x = x if isinstance(x, (core.Array, Tracer)) else asarray(x)
    t = type(idx)
    if (t is int or t is slice and all(e is None or type(e) is int for e in
                                        (idx.start, idx.stop, idx.step))) and mode is None \
            and x.ndim:                                       # x[i], x[a:b]: no parsing
        rest = [(_SLICE, slice(None))] * (x.ndim - 1)
        if t is slice:
            return _static_take(x, [(_SLICE, idx)] + rest)
        n = x.shape[0]
        i = idx + n if idx < 0 and wrap_negative_indices else idx
        if not 0 <= i < n:
            raise IndexError(f"index {idx} is out of bounds for axis 0 with size {n}")
        return _static_take(x, [(_INT, i)] + rest)
    if (t is np.ndarray or t is core.Array or isinstance(idx, Tracer)) and x.ndim and \
            mode is None and wrap_negative_indices and idx.ndim and dtypes.is_int(idx.dtype):
        return take(x, idx, axis=0, mode="promise_in_bounds",          # x[i]: embeddings
                    unique_indices=unique_indices, indices_are_sorted=indices_are_sorted)
    fill = mode in ("fill", "drop") or _mode_name(mode) == "FILL_OR_DROP"
    if any(_is_bool_array(e) for e in (idx if isinstance(idx, tuple) else (idx,))):
        _check_bool_shapes(x.shape, idx)
    entries, contiguous, inserted = _parse(x.shape, idx)
    if inserted:
        x = lax.expand_dims(x, inserted)
    shape = x.shape
    x_axis = 0
    for j, (k, v) in enumerate(entries):       # static ints: bounds check / normalize
        if k == _INT:
            n = shape[x_axis]
            i = _normalize(v, n, wrap_negative_indices)
            if not 0 <= i < n:
                if mode is None or _mode_name(mode) == "PROMISE_IN_BOUNDS":
                    raise IndexError(f"index {v} is out of bounds for axis {x_axis} with "
                                     f"size {n}")
                if fill:
                    entries[j] = (_ARRAY, np.asarray(i, np.int32))
                    continue
                i = min(max(i, 0), n - 1)
            entries[j] = (_INT, i)
        x_axis += k != _NONE
    arrays = [v for k, v in entries if k == _ARRAY]
    if not arrays:
        return _static_take(x, entries)
    if all(_ndim(v) == 0 for v in arrays) and not fill:
        return _dynamic_take(x, entries, wrap_negative_indices)
    return _gather_take(x, entries, contiguous, mode, fill_value, indices_are_sorted,
                        unique_indices, wrap_negative_indices)


def _mode_name(mode) -> str:
    if mode is None:
        return "PROMISE_IN_BOUNDS"
    if isinstance(mode, str):
        return {"clip": "CLIP", "fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP",
                "promise_in_bounds": "PROMISE_IN_BOUNDS"}.get(mode, mode.upper())
    return getattr(mode, "name", str(mode))


def _slice_bounds(s: slice, n: int) -> tuple[int, int, int, int]:
    """(lo, hi, stride, size) of the elements s selects from range(n), ascending."""
    start, stop, step = s.indices(n)
    size = len(range(start, stop, step))
    if size == 0:
        return 0, 0, 1, 0
    if step > 0:
        return start, start + (size - 1) * step + 1, step, size
    lo = start + (size - 1) * step
    return lo, start + 1, -step, size


def _static_take(x, entries):
    """Static ints (in range), slices and None: slice, rev, squeeze, expand_dims."""
    starts, limits, strides, rev_axes, squeeze_axes, newaxis = [], [], [], [], [], []
    x_axis = out_axis = 0
    shape = x.shape
    for k, v in entries:
        if k == _NONE:
            newaxis.append(out_axis)
            out_axis += 1
            continue
        n = shape[x_axis]
        if k == _INT:
            starts.append(v)
            limits.append(v + 1)
            strides.append(1)
            squeeze_axes.append(x_axis)
        else:
            lo, hi, stride, _ = _slice_bounds(v, n)
            starts.append(lo)
            limits.append(hi)
            strides.append(stride)
            if (v.step or 1) < 0 and hi - lo > 1:
                rev_axes.append(x_axis)
            out_axis += 1
        x_axis += 1
    y = x
    unit = all(s == 1 for s in strides)
    if not unit or any(starts) or limits != list(shape):
        y = lax.slice(y, starts, limits, None if unit else strides)
    if rev_axes:
        y = lax.rev(y, tuple(rev_axes))
    if squeeze_axes:
        y = lax.squeeze(y, tuple(squeeze_axes))
    if newaxis:
        y = lax.expand_dims(y, tuple(newaxis))
    return y


def _dynamic_take(x, entries, wrap):
    """Scalar (possibly traced) ints: one dynamic_slice (clamping), then the static path."""
    starts, sizes, rest = [], [], []
    x_axis = 0
    idx_dtype = _index_dtype(x.shape)
    for k, v in entries:
        if k == _NONE:
            rest.append((k, v))
            continue
        n = x.shape[x_axis]
        if k == _SLICE:
            starts.append(0)
            sizes.append(n)
            rest.append((k, v))
        else:
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {x_axis} with size 0")
            if isinstance(v, (int, np.ndarray)):       # static: normalize and clamp now
                starts.append(min(max(_normalize(int(v), n, wrap), 0), n - 1))
            else:                                      # dynamic_slice wraps and clamps
                starts.append(_as_index(v, idx_dtype))
            sizes.append(1)
            rest.append((_INT, 0))
        x_axis += 1
    if all(isinstance(s, int) for s in starts):
        y = lax.slice(x, starts, [s + sz for s, sz in zip(starts, sizes)])
    else:
        y = lax.dynamic_slice(x, starts, sizes, allow_negative_indices=wrap)
    return _static_take(y, rest)


# ---- the gather lowering (shared with the scatter updates) ---------------------------------
class _GatherPlan(NamedTuple):
    slice_shape: tuple          # shape of x[idx], None dims included
    slice_sizes: tuple          # gather slice_sizes
    indices: Any                # [*batch, k] int array (NumPy when all indices are static)
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    newaxis_dims: tuple         # None dims in slice_shape (absent from the gather output)
    reversed_dims: tuple        # gather-output dims to reverse (negative-step slices)
    advanced: bool              # integer-array indices present (so maybe repeated)


def _gather_plan(shape, entries, contiguous: bool, wrap: bool,
                 scatter: bool = False) -> _GatherPlan:
    """JAX's `_index_to_gather`: one gather computing x[idx] for parsed `entries` (for a
    scatter, index arrays into a size-0 axis are no error: their updates are dropped)."""
    idx_dtype = _index_dtype(shape)
    advanced = any(k == _ARRAY and _ndim(v) > 0 for k, v in entries)
    adv_pos = [p for p, (k, _) in enumerate(entries) if k in (_INT, _ARRAY)] if advanced else []
    adv_axes, adv_arrays, x_axis = [], [], 0
    for k, v in entries:
        if k in (_INT, _ARRAY) and advanced:
            adv_axes.append(x_axis)
            adv_arrays.append(_as_index(_normalize(v, shape[x_axis], wrap), idx_dtype))
        x_axis += k != _NONE
    pieces = []            # (index array, first batch dim it spans)
    batch_shape: list[int] = []
    offset_dims, collapsed, start_map, slice_sizes = [], [], [], []
    slice_shape, newaxis, reversed_dims = [], [], []
    x_axis = y_axis = out_axis = 0
    for pos, (k, v) in enumerate(entries):
        if adv_pos and pos == (adv_pos[0] if contiguous else 0):
            arrays, b_shape = _broadcast_indices(adv_arrays)
            for ax in adv_axes:
                if shape[ax] == 0 and int(np.prod(b_shape)) and not scatter:
                    raise IndexError(f"index is out of bounds for axis {ax} with size 0")
            pieces.extend((a, len(batch_shape)) for a in arrays)
            batch_shape.extend(b_shape)
            start_map.extend(adv_axes)
            collapsed.extend(adv_axes)
            slice_shape.extend(b_shape)
            y_axis += len(b_shape)
            out_axis += len(b_shape)
        if pos in adv_pos:
            slice_sizes.append(1)
            x_axis += 1
            continue
        if k == _NONE:
            slice_shape.append(1)
            newaxis.append(y_axis)
            y_axis += 1
            continue
        n = shape[x_axis]
        if k in (_INT, _ARRAY):                  # a scalar index, not advanced
            if n == 0:
                raise IndexError(f"index is out of bounds for axis {x_axis} with size 0")
            pieces.append((_as_index(_normalize(v, n, wrap), idx_dtype), len(batch_shape)))
            collapsed.append(x_axis)
            start_map.append(x_axis)
            slice_sizes.append(1)
        else:
            start, _, step = v.indices(n)
            size = len(range(start, v.indices(n)[1], step))
            slice_shape.append(size)
            if step == 1:
                if size != n:
                    pieces.append((np.asarray(start, idx_dtype), len(batch_shape)))
                    start_map.append(x_axis)
                slice_sizes.append(size)
                offset_dims.append(out_axis)
            else:                                  # strided: one index per element
                ii = (start + step * np.arange(size)).astype(idx_dtype)
                if step < 0:
                    reversed_dims.append(out_axis)
                    ii = ii[::-1]
                pieces.append((ii, len(batch_shape)))
                batch_shape.append(size)
                start_map.append(x_axis)
                collapsed.append(x_axis)
                slice_sizes.append(1)
            out_axis += 1
            y_axis += 1
        x_axis += 1
    indices = _stack_indices(pieces, batch_shape, idx_dtype)
    return _GatherPlan(tuple(slice_shape), tuple(slice_sizes), indices, tuple(offset_dims),
                       tuple(sorted(collapsed)), tuple(start_map), tuple(newaxis),
                       tuple(reversed_dims), bool(advanced))


def _stack_indices(pieces, batch_shape, idx_dtype):
    """Concatenate index pieces, each broadcast over its batch dims, on a new last axis."""
    full = tuple(batch_shape) + (1,)
    if all(isinstance(a, np.ndarray) for a, _ in pieces):
        cols = [_broadcast_to(np.expand_dims(a, tuple(range(start))
                                             + tuple(range(start + a.ndim, len(full)))), full)
                for a, start in pieces]
        if len(cols) == 1:
            return cols[0].astype(idx_dtype, copy=False)
        return np.concatenate(cols, axis=-1).astype(idx_dtype) if cols else \
            np.zeros(full[:-1] + (0,), idx_dtype)
    cols = [lax.broadcast_in_dim(a, full, tuple(range(start, start + _ndim(a))))
            for a, start in pieces]
    return cols[0] if len(cols) == 1 else lax.concatenate(cols, len(full) - 1)


def _gather_take(x, entries, contiguous, mode, fill_value, sorted_, unique, wrap):
    plan = _gather_plan(x.shape, entries, contiguous, wrap)
    if 0 in plan.slice_shape:
        return lax.full(plan.slice_shape, 0, x.dtype)
    if fill_value is not None and np.ndim(fill_value) != 0:
        raise ValueError("fill_value argument to indexed get() must be a scalar")
    gmode = "clip" if _mode_name(mode) in ("PROMISE_IN_BOUNDS", "CLIP") else mode
    dnums = GatherDimensionNumbers(offset_dims=plan.offset_dims,
                                       collapsed_slice_dims=plan.collapsed_slice_dims,
                                       start_index_map=plan.start_index_map)
    y = gather(x, plan.indices, dnums, plan.slice_sizes,
                   indices_are_sorted=sorted_ or not plan.advanced,
                   unique_indices=unique or not plan.advanced, mode=gmode,
                   fill_value=fill_value)
    if plan.reversed_dims:
        y = lax.rev(y, plan.reversed_dims)
    if plan.newaxis_dims:
        y = lax.expand_dims(y, plan.newaxis_dims)
    return y


# ---- x.at[idx] --------------------------------------------------------------------------------
class IndexUpdateHelper:
    """`x.at`: `x.at[idx].set(v)` and friends, pure versions of NumPy's in-place updates.

    Unlike NumPy's `x[idx] += v`, repeated indices all apply (add, multiply, min, max
    accumulate). Out-of-bounds indices are dropped by the updates and clamped by
    `get()`; `mode="clip" | "drop" | "fill" | "promise_in_bounds"` overrides that.
    Negative indices count from the end unless `wrap_negative_indices=False`.
    """

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """`x.at[idx]`: each method returns an updated copy of x (or, for get, x[idx])."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None,
            fill_value=None, wrap_negative_indices=True):
        """x[idx]."""
        return getitem(self.array, self.index, mode=mode, fill_value=fill_value,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       wrap_negative_indices=wrap_negative_indices)

    def _update(self, values, op, indices_are_sorted, unique_indices, mode, wrap):
        return _scatter_update(self.array, self.index, values, op, indices_are_sorted,
                               unique_indices, mode, wrap)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """x[idx] = values (with repeated indices, one of the values wins)."""
        return self._update(values, "set", indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """x[idx] += values, accumulating over repeated indices."""
        return self._update(values, "add", indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """x[idx] -= values, accumulating over repeated indices."""
        return self._update(lax.neg(asarray(values)), "add", indices_are_sorted,
                            unique_indices, mode, wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
                 wrap_negative_indices=True):
        """x[idx] *= values, accumulating over repeated indices."""
        return self._update(values, "mul", indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
               wrap_negative_indices=True):
        """x[idx] /= values (x divided by the product of the values at each position)."""
        from fnad import numpy as jnp
        x = self.array
        denom = _scatter_update(jnp.ones_like(x), self.index, values, "mul",
                                indices_are_sorted, unique_indices, mode,
                                wrap_negative_indices)
        return jnp.divide(x, denom)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """x[idx] **= values (repeated indices multiply their exponents)."""
        from fnad import numpy as jnp
        x = self.array
        expo = _scatter_update(jnp.ones_like(x), self.index, values, "mul",
                               indices_are_sorted, unique_indices, mode, wrap_negative_indices)
        return jnp.power(x, expo)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """x[idx] = minimum(x[idx], values), over all values at repeated indices."""
        return self._update(values, "min", indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
        """x[idx] = maximum(x[idx], values), over all values at repeated indices."""
        return self._update(values, "max", indices_are_sorted, unique_indices, mode,
                            wrap_negative_indices)

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """x[idx] = func(x[idx]) for an elementwise `func`, applied once per occurrence of
        an index (twice where an index repeats), as JAX's scatter_apply. func's result is
        cast to x's dtype."""
        x = self.array if isinstance(self.array, (core.Array, Tracer)) else asarray(self.array)
        zeros = lax.full(x.shape, 0, np.dtype(np.int32))
        hits = _scatter_update(zeros, self.index, 1, "add", indices_are_sorted,
                               unique_indices, mode, wrap_negative_indices)   # [*x.shape]

        def step(i, y):
            fy = lax.convert_element_type(asarray(func(y)), y.dtype)
            return lax.select(lax.gt(hits, i), fy, y)

        most = lax.reduce_max(hits, tuple(range(hits.ndim))) if hits.ndim else hits
        if isinstance(most, Tracer):
            return lax.fori_loop(0, most, step, x)
        for i in range(int(most)):
            x = step(i, x)
        return x


def _combine(op: str, old, new):
    if op == "set":
        return new
    return {"add": lax.add, "mul": lax.mul, "min": lax.min, "max": lax.max}[op](old, new)


def _scatter_op(op: str):
    return {"set": scatter, "add": scatter_add, "mul": scatter_mul,
            "min": scatter_min, "max": scatter_max}[op]


def _scatter_update(x, idx, y, op: str, sorted_, unique, mode, wrap):
    """x with x[idx] combined with y by `op`: a dynamic_update_slice or a scatter."""
    x = x if isinstance(x, (core.Array, Tracer)) else asarray(x)
    x_dtype, x_weak = x.dtype, x.weak_type
    if (type(y) is int and dtypes.is_int(x_dtype)
            and np.iinfo(x_dtype).min <= y <= np.iinfo(x_dtype).max):
        y = asarray(y, dtype=x_dtype)
    else:
        y = asarray(y)
    if any(_is_bool_array(e) for e in (idx if isinstance(idx, tuple) else (idx,))):
        _check_bool_shapes(x.shape, idx)
    orig_shape = x.shape
    entries, contiguous, inserted = _parse(x.shape, idx)
    xp, yp = promote_dtypes(x, y)
    if inserted:
        xp = lax.expand_dims(xp, inserted)
    out = _block_update(xp, entries, yp, op, wrap)
    if out is None:
        plan = _gather_plan(xp.shape, entries, contiguous, wrap, scatter=True)
        if 0 in plan.slice_shape or 0 in xp.shape:          # nothing to update, as jax's
            return x
        yp = _broadcast_values(yp, plan.slice_shape)
        if plan.newaxis_dims:
            yp = lax.reshape(yp, tuple(d for i, d in enumerate(plan.slice_shape)
                                       if i not in plan.newaxis_dims))
        if plan.reversed_dims:
            yp = lax.rev(yp, plan.reversed_dims)
        dnums = ScatterDimensionNumbers(
            update_window_dims=plan.offset_dims,
            inserted_window_dims=plan.collapsed_slice_dims,
            scatter_dims_to_operand_dims=plan.start_index_map)
        out = _scatter_op(op)(xp, plan.indices, yp, dnums,
                              indices_are_sorted=sorted_ or not plan.advanced,
                              unique_indices=unique or not plan.advanced,
                              mode="drop" if mode is None else mode)
    if inserted:
        out = lax.reshape(out, orig_shape)
    if out.dtype != x_dtype or out.weak_type != x_weak:
        out = lax.convert_element_type(out, x_dtype, x_weak)
    return out


def _broadcast_values(y, shape):
    y_shape = y.shape
    extra = len(y_shape) - len(shape)
    try:
        if extra > 0 and any(d != 1 for d in y_shape[:extra]):
            raise ValueError
        np.broadcast_shapes(y_shape[max(extra, 0):], tuple(shape))
        if np.broadcast_shapes(y_shape[max(extra, 0):], tuple(shape)) != tuple(shape):
            raise ValueError
    except ValueError:
        raise ValueError(f"shape mismatch: value array of shape {y_shape} could not be "
                         f"broadcast to indexing result of shape {tuple(shape)}") from None
    return _broadcast_to(y, shape)


def _block_update(x, entries, y, op, wrap):
    """The update when idx selects one static contiguous block; None otherwise."""
    starts, limits, slice_shape, newaxis = [], [], [], []
    x_axis = 0
    for k, v in entries:
        if k == _NONE:
            newaxis.append(len(slice_shape))
            slice_shape.append(1)
            continue
        n = x.shape[x_axis]
        if k == _ARRAY and isinstance(v, np.ndarray) and v.ndim == 0:
            k, v = _INT, int(v)
        if k == _INT:
            i = _normalize(v, n, wrap)
            if not 0 <= i < n:
                return None
            starts.append(i)
            limits.append(i + 1)
        elif k == _SLICE:
            start, stop, step = v.indices(n)
            size = len(range(start, stop, step))
            if step != 1 and size > 1:
                return None
            starts.append(start if size else 0)
            limits.append(start + size if size else 0)
            slice_shape.append(size)
        else:
            return None
        x_axis += 1
    if 0 in slice_shape:
        return x
    y = _broadcast_values(y, slice_shape)
    block = tuple(hi - lo for lo, hi in zip(starts, limits))
    if y.shape != block:
        y = lax.reshape(y, block)
    if block == x.shape:
        return _combine(op, x, y)
    old = lax.slice(x, starts, limits) if op != "set" else None
    return lax.dynamic_update_slice(x, _combine(op, old, y), starts)

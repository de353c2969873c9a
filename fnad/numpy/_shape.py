"""fnad.numpy's shape manipulation: reshape, transpose, broadcasting, joining, splitting,
tiling, padding, flipping and rotating.

Every function is a composition of shape primitives (reshape, transpose, broadcast_in_dim,
squeeze, rev, concatenate, pad, slice), all linear, so gradients flow through each.
Shapes, axes, split points and repeat counts are static Python values, as in JAX.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence

import numpy as np

from fnad.core import Array, Tracer, _at_user_line
from fnad.numpy._core import (
    ArrayLike,
    DTypeLike,
    asarray,
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
    promote_dtypes,
)
from fnad.numpy import _pad_modes
from fnad.primitives import shape_ops as so

__all__ = [
    "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays",
    "broadcast_shapes", "broadcast_to", "column_stack", "concatenate", "dstack", "expand_dims",
    "flip", "fliplr", "flipud", "hstack", "moveaxis", "ndim", "pad", "permute_dims", "ravel",
    "repeat", "reshape", "rot90", "shape", "size", "split", "squeeze", "stack", "swapaxes",
    "tile", "transpose", "vstack",
]


def _canonical_axes(axes, ndim: int) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)) or hasattr(axes, "__index__"):
        axes = (axes,)
    out = tuple(canonicalize_axis(a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {tuple(axes)}")
    return out


def _as_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__")
                                                and not isinstance(shape, (tuple, list))):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


# ---- reshape, ravel, transpose ------------------------------------------------------------------
def reshape(a: ArrayLike, shape=None, order: str = "C", *, newshape=None, copy=None) -> Array:
    """`a` with a new shape of the same size; one entry may be -1 (inferred).

    order 'C' (row-major) or 'F' (column-major) reads and writes the elements in that order.
    """
    if newshape is not None:
        if shape is not None:
            raise TypeError("reshape: give shape or newshape, not both")
        shape = newshape
    if shape is None:
        raise TypeError("reshape() missing the required argument 'shape'")
    check_arraylike("reshape", a)
    a = ensure_array(a)
    shape = _infer_shape(a.shape, _as_shape(shape))
    if order == "F":
        a = transpose(a)
        return transpose(_reshape_c(a, shape[::-1]))
    if order not in ("C", "A"):
        raise ValueError(f"reshape: order must be 'C', 'F' or 'A', got {order!r}")
    return _reshape_c(a, shape)


def _reshape_c(a, shape):
    return a if a.shape == shape else so.reshape(a, shape)


def _infer_shape(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(old)
    if builtins.sum(d == -1 for d in new) > 1:
        raise ValueError(f"can only specify one unknown dimension (-1), got shape {new}")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape array of shape {old} (size {size}) into shape "
                             f"{new}{_at_user_line()}")
        new = tuple(size // known if d == -1 else d for d in new)
    if builtins.any(d < 0 for d in new) or math.prod(new) != size:
        raise ValueError(f"cannot reshape array of shape {old} (size {size}) into shape {new}"
                         f"{_at_user_line()}")
    return new


def ravel(a: ArrayLike, order: str = "C") -> Array:
    """`a` flattened to one dimension."""
    check_arraylike("ravel", a)
    a = ensure_array(a)
    return reshape(a, (a.size,), order=order)


def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """`a` with its axes permuted (reversed by default): out.shape[i] = a.shape[axes[i]]."""
    check_arraylike("transpose", a)
    a = ensure_array(a)
    nd = a.ndim
    perm = tuple(range(nd - 1, -1, -1)) if axes is None else _canonical_axes(axes, nd)
    if len(perm) != nd:
        raise ValueError(f"axes {tuple(axes)} don't match an array of rank {nd}")
    return a if perm == tuple(range(nd)) else so.transpose(a, perm)


permute_dims = transpose


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Array:
    """`a` with axes axis1 and axis2 exchanged."""
    check_arraylike("swapaxes", a)
    a = ensure_array(a)
    perm = list(range(a.ndim))
    i, j = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a: ArrayLike, source, destination) -> Array:
    """`a` with the axes `source` moved to positions `destination` (others keep order)."""
    check_arraylike("moveaxis", a)
    a = ensure_array(a)
    src = _canonical_axes(source, a.ndim)
    dst = _canonical_axes(destination, a.ndim)
    if len(src) != len(dst):
        raise ValueError("Inconsistent number of elements: "
                         f"{len(src)} vs {len(dst)}")
    perm = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        perm.insert(d, s)
    return transpose(a, perm)


# ---- adding and removing unit axes -------------------------------------------------------------
def expand_dims(a: ArrayLike, axis) -> Array:
    """`a` with size-1 axes inserted at `axis` (positions in the result)."""
    check_arraylike("expand_dims", a)
    a = ensure_array(a)
    axes = _canonical_axes(axis, a.ndim + (1 if np.ndim(axis) == 0 else len(axis)))
    return so.expand_dims(a, axes)


def squeeze(a: ArrayLike, axis=None) -> Array:
    """`a` without its size-1 axes (only those in `axis`, if given)."""
    check_arraylike("squeeze", a)
    a = ensure_array(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = _canonical_axes(axis, a.ndim)
        bad = [i for i in axes if a.shape[i] != 1]
        if bad:
            raise ValueError("cannot select an axis to squeeze out which has size not equal "
                             f"to one, got shape={a.shape} and dimensions={axes}")
    return so.squeeze(a, axes) if axes else a


def atleast_1d(*arys: ArrayLike):
    """Each input as an array of rank >= 1 (a list when given several)."""
    out = [_atleast(a, 1, "atleast_1d") for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys: ArrayLike):
    """Each input as an array of rank >= 2: (N,) becomes (1, N)."""
    out = [_atleast(a, 2, "atleast_2d") for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys: ArrayLike):
    """Each input as an array of rank >= 3: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    out = [_atleast(a, 3, "atleast_3d") for a in arys]
    return out[0] if len(out) == 1 else out


def _atleast(a, n: int, name: str):
    check_arraylike(name, a)
    a = ensure_array(a)
    s = a.shape
    if a.ndim >= n:
        return a
    if n == 3:
        new = {0: (1, 1, 1), 1: (1, s[0], 1) if s else (1, 1, 1), 2: (*s, 1)}[a.ndim]
    else:
        new = (1,) * (n - a.ndim) + s
    return so.reshape(a, new)


# ---- broadcasting ------------------------------------------------------------------------------
def broadcast_to(array: ArrayLike, shape) -> Array:
    """`array` broadcast to `shape` by NumPy's rules (no copy in the eager numpy backend)."""
    check_arraylike("broadcast_to", array)
    a = ensure_array(array)
    shape = _as_shape(shape)
    if a.shape == shape:
        return a
    nd = len(shape)
    ok = a.ndim <= nd and builtins.all(
        d == 1 or d == t for d, t in zip(a.shape, shape[nd - a.ndim:], strict=True))
    if not ok:
        raise ValueError(f"Incompatible shapes for broadcasting: {a.shape} and requested shape "
                         f"{shape}")
    return so.broadcast_in_dim(a, shape, tuple(range(nd - a.ndim, nd)))


def broadcast_arrays(*args: ArrayLike) -> list[Array]:
    """The inputs broadcast to their common shape."""
    check_arraylike("broadcast_arrays", *args)
    args = [ensure_array(a) for a in args]
    shape = broadcast_shapes(*(a.shape for a in args), fun_name="broadcast_arrays")
    return [broadcast_to(a, shape) for a in args]


# ---- joining -----------------------------------------------------------------------------------
def _sequence(name: str, arrays) -> list:
    if isinstance(arrays, (Array, Tracer, np.ndarray)):
        arrays = [arrays[i] for i in range(len(arrays))]
    arrays = list(arrays)
    check_arraylike(name, *arrays)
    return arrays


def concatenate(arrays, axis: int | None = 0, dtype: DTypeLike | None = None) -> Array:
    """The arrays joined along `axis` (flattened first if axis is None)."""
    arrays = _sequence("concatenate", arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    arrays = [ensure_array(a) for a in arrays]
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    if builtins.any(a.ndim == 0 for a in arrays):
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    arrays = [ensure_array(a) for a in promote_dtypes(*arrays)]
    if dtype is not None:
        arrays = [asarray(a, dtype) for a in arrays]
    axis = canonicalize_axis(axis, arrays[0].ndim)
    if len(arrays) == 1:
        return arrays[0]
    shapes = [a.shape[:axis] + a.shape[axis + 1:] for a in arrays]
    if builtins.any(s != shapes[0] or a.ndim != arrays[0].ndim
                    for s, a in zip(shapes, arrays, strict=True)):
        raise ValueError("concatenate: all the input array dimensions except for the "
                         f"concatenation axis must match exactly, got shapes "
                         f"{[a.shape for a in arrays]} along axis {axis}{_at_user_line()}")
    return so.concatenate(arrays, axis)


def stack(arrays, axis: int = 0, out: None = None, dtype: DTypeLike | None = None) -> Array:
    """The arrays (all of one shape) stacked along a new axis."""
    arrays = [ensure_array(a) for a in _sequence("stack", arrays)]
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shape = arrays[0].shape
    if builtins.any(a.shape != shape for a in arrays):
        raise ValueError(f"All input arrays must have the same shape, got "
                         f"{[a.shape for a in arrays]}")
    axis = canonicalize_axis(axis, len(shape) + 1)
    new_shape = shape[:axis] + (1,) + shape[axis:]
    return concatenate([so.reshape(a, new_shape) for a in arrays], axis, dtype=dtype)


def hstack(tup, dtype: DTypeLike | None = None) -> Array:
    """Join along axis 1 (axis 0 for 1-D inputs)."""
    arrs = [atleast_1d(a) for a in _sequence("hstack", tup)]
    return concatenate(arrs, 0 if arrs and arrs[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, dtype: DTypeLike | None = None) -> Array:
    """Join along axis 0, 1-D inputs becoming rows."""
    return concatenate([atleast_2d(a) for a in _sequence("vstack", tup)], 0, dtype=dtype)


def dstack(tup, dtype: DTypeLike | None = None) -> Array:
    """Join along axis 2 (depth), inputs raised to rank 3."""
    return concatenate([atleast_3d(a) for a in _sequence("dstack", tup)], 2, dtype=dtype)


def column_stack(tup) -> Array:
    """1-D inputs as columns of a 2-D array (2-D inputs joined along axis 1)."""
    arrs = [ensure_array(a) for a in _sequence("column_stack", tup)]
    arrs = [a if a.ndim > 1 else reshape(a, (-1, 1)) for a in arrs]
    return concatenate(arrs, 1)


# ---- splitting ---------------------------------------------------------------------------------
def _split(name: str, ary, indices_or_sections, axis: int, equal: bool) -> list[Array]:
    check_arraylike(name, ary)
    ary = ensure_array(ary)
    axis = canonicalize_axis(axis, ary.ndim)
    n = ary.shape[axis]
    if isinstance(indices_or_sections, (tuple, list, np.ndarray, Array)):
        cuts = [operator.index(i) for i in np.asarray(indices_or_sections).tolist()]
        cuts = [builtins.min(builtins.max(c + n if c < 0 else c, 0), n) for c in cuts]
        bounds = [0, *cuts, n]
    else:
        sections = operator.index(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        if equal and n % sections:
            raise ValueError("array split does not result in an equal division: "
                             f"{n} elements along axis {axis} into {sections} sections")
        size, extra = divmod(n, sections)
        sizes = [size + 1] * extra + [size] * (sections - extra)
        bounds = [0, *np.cumsum(sizes).tolist()]
    out = []
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        stop = builtins.max(start, stop)
        out.append(so.slice_in_dim(ary, start, stop, 1, axis))
    return out


def split(ary: ArrayLike, indices_or_sections, axis: int = 0) -> list[Array]:
    """`ary` cut into equal sections (an int) or at the given indices along `axis`."""
    return _split("split", ary, indices_or_sections, axis, equal=True)


def array_split(ary: ArrayLike, indices_or_sections, axis: int = 0) -> list[Array]:
    """As split, but an int need not divide evenly (the first sections get one more)."""
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


# ---- tile and repeat ----------------------------------------------------------------------------
def tile(A: ArrayLike, reps) -> Array:
    """`A` repeated `reps` times along each axis (both padded with leading 1s to one rank)."""
    check_arraylike("tile", A)
    A = ensure_array(A)
    reps = _as_shape(reps)
    a_shape = (1,) * (len(reps) - A.ndim) + A.shape
    reps = (1,) * (len(a_shape) - len(reps)) + reps
    interleaved = [d for s in a_shape for d in (1, s)]          # [1, s0, 1, s1, ...]
    target = [d for pair in zip(reps, a_shape, strict=True) for d in pair]  # [r0, s0, ...]
    out = broadcast_to(so.reshape(A, interleaved), target)
    return so.reshape(out, tuple(r * s for r, s in zip(reps, a_shape, strict=True)))


def repeat(a: ArrayLike, repeats, axis: int | None = None, *,
           total_repeat_length: int | None = None) -> Array:
    """Each element of `a` repeated `repeats` times along `axis` (flattened if None).

    `repeats` is an int or one count per element. Traced counts need a static
    `total_repeat_length` (the output is cut or padded with the last element to it).
    """
    check_arraylike("repeat", a)
    a = ensure_array(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis(axis, a.ndim)
    n = a.shape[axis]
    if isinstance(repeats, Tracer):
        return _repeat_traced(a, repeats, axis, total_repeat_length)
    reps = np.asarray(repeats)
    if reps.ndim == 0 or reps.size == 1:
        r = operator.index(reps.reshape(()).item())
        if r < 0:
            raise ValueError("repeat: repeats may not contain negative values")
        if total_repeat_length is None or total_repeat_length == n * r:
            shape = a.shape[:axis + 1] + (r,) + a.shape[axis + 1:]
            out = so.broadcast_in_dim(a, shape, [d for d in range(a.ndim + 1) if d != axis + 1])
            return so.reshape(out, a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
        reps = np.full(n, r)
    if reps.shape != (n,):
        raise ValueError(f"repeat: repeats must be an int or have one entry per element along "
                         f"the axis ({n}), got shape {reps.shape}")
    if (reps < 0).any():
        raise ValueError("repeat: repeats may not contain negative values")
    idx = np.repeat(np.arange(n), reps)
    if total_repeat_length is not None:
        idx = _fit_length(idx, total_repeat_length)
    return _take_static(a, idx, axis)


def _fit_length(idx: np.ndarray, length: int) -> np.ndarray:
    if len(idx) >= length:
        return idx[:length]
    last = idx[-1] if len(idx) else 0
    return np.concatenate([idx, np.full(length - len(idx), last, idx.dtype)])


def _repeat_traced(a, repeats, axis, total_repeat_length):
    from fnad.numpy import _indexing
    from fnad.numpy._reductions import cumsum, sum
    from fnad.numpy._ufuncs import less_equal, minimum
    if total_repeat_length is None:
        raise ValueError("repeat: traced `repeats` needs a static total_repeat_length (the "
                         "output's length must be known while tracing)")
    n = a.shape[axis]
    ends = cumsum(repeats)                                      # [n]
    pos = np.arange(total_repeat_length)[:, None]               # [L, 1]
    idx = sum(less_equal(so.broadcast_in_dim(ends, (total_repeat_length, n), (1,)), pos),
              axis=1)                                           # [L]: entries ending at or before
    return _indexing.take(a, minimum(idx, n - 1), axis=axis)


def _take_static(a, idx: np.ndarray, axis: int):
    """a's entries at the static indices `idx` along `axis`, as slices of consecutive runs.

    A run of equal indices becomes a broadcast, an increasing run a slice, a decreasing run
    a reversed slice, so padding modes and repeats need only linear shape primitives.
    """
    idx = [int(i) for i in idx]
    if not idx:
        return so.slice_in_dim(a, 0, 0, 1, axis)
    pieces, start = [], 0
    while start < len(idx):
        step = idx[start + 1] - idx[start] if start + 1 < len(idx) else 1
        if step not in (-1, 0, 1):
            step = 1
        end = start + 1
        while end < len(idx) and idx[end] - idx[end - 1] == step:
            end += 1
        first, last, length = idx[start], idx[end - 1], end - start
        if step == 0:
            piece = so.slice_in_dim(a, first, first + 1, 1, axis)
            if length > 1:
                shape = list(a.shape)
                shape[axis] = length
                piece = so.broadcast_in_dim(piece, shape, tuple(range(a.ndim)))
        elif step == 1:
            piece = so.slice_in_dim(a, first, last + 1, 1, axis)
        else:
            piece = so.rev(so.slice_in_dim(a, last, first + 1, 1, axis), (axis,))
        pieces.append(piece)
        start = end
    if len(pieces) == 1 and pieces[0].shape == a.shape and idx == list(range(a.shape[axis])):
        return a
    return so.concatenate(pieces, axis) if len(pieces) > 1 else pieces[0]


# ---- padding -----------------------------------------------------------------------------------
def _pad_pairs(pad_width, ndim: int) -> list[tuple[int, int]]:
    pw = np.asarray(pad_width)
    if not np.issubdtype(pw.dtype, np.integer):
        if pw.size and not np.all(pw == np.round(pw)):
            raise TypeError(f"pad_width must be of integral type, got {pad_width!r}")
        pw = pw.astype(np.int64)
    try:
        pw = np.broadcast_to(pw, (ndim, 2))
    except ValueError:
        raise ValueError(f"pad_width {pad_width!r} cannot be broadcast to ({ndim}, 2) for an "
                         f"array of rank {ndim}") from None
    if (pw < 0).any():
        raise ValueError(f"index can't contain negative values, got pad_width {pad_width!r}")
    return [(int(b), int(e)) for b, e in pw]


def _pad_index(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """The source index of each output position -before .. n + after - 1 along one axis."""
    p = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(p, 0, n - 1)
    if mode == "wrap":
        return p % n
    if mode == "symmetric":
        m = p % (2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    # reflect: mirror about the edge elements, which are not repeated
    if n == 1:
        return np.zeros_like(p)
    m = p % (2 * (n - 1))
    return np.where(m < n, m, 2 * (n - 1) - m)


_PAD_KWARGS = {"constant": {"constant_values"}, "edge": set(), "wrap": set(),
               "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
               "linear_ramp": {"end_values"}, "maximum": {"stat_length"},
               "minimum": {"stat_length"}, "mean": {"stat_length"}, "median": {"stat_length"}}


def pad(array: ArrayLike, pad_width, mode: str = "constant", **kwargs) -> Array:
    """`array` padded by pad_width (an int, a (before, after) pair, or one pair per axis).

    Modes: 'constant' (constant_values: a scalar or per-axis pairs), 'edge', 'reflect' and
    'symmetric' (reflect_type 'even' or 'odd'), 'wrap', 'linear_ramp' (end_values), 'maximum',
    'minimum', 'mean', 'median' (stat_length), 'empty' (zeros, as JAX), or a function
    f(vector, (before, after), axis, kwargs) as NumPy's (see _pad_modes).
    """
    check_arraylike("pad", array)
    a = ensure_array(array)
    pairs = _pad_pairs(pad_width, a.ndim)
    if callable(mode):
        return _pad_modes.pad_callable(a, pairs, mode, kwargs)
    if mode == "empty":
        mode = "constant"
    allowed = _PAD_KWARGS.get(mode)
    if allowed is None:
        raise NotImplementedError(f"pad: unknown mode {mode!r}; the modes are "
                                  f"{', '.join(map(repr, _PAD_KWARGS))} or a function")
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {sorted(unknown)}")
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if builtins.all(p == (0, 0) for p in pairs) or not a.ndim:
        return a
    if mode == "constant":
        return _pad_constant(a, pairs, kwargs.get("constant_values", 0))
    for axis, (before, after) in enumerate(pairs):
        if a.shape[axis] == 0 and (before or after):
            raise ValueError(f"can't pad an empty axis (axis {axis}) in mode '{mode}'")
    if mode == "linear_ramp":
        return _pad_modes.pad_linear_ramp(a, pairs, kwargs.get("end_values", 0))
    if mode in ("maximum", "minimum", "mean", "median"):
        return _pad_modes.pad_stats(a, pairs, mode, kwargs.get("stat_length"))
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
        return _pad_modes.pad_reflect_odd(a, pairs, mode)
    for axis, (before, after) in enumerate(pairs):
        if before or after:
            a = _take_static(a, _pad_index(mode, a.shape[axis], before, after), axis)
    return a


def _pad_constant(a, pairs, constant_values):
    cv = np.asarray(constant_values) if not isinstance(constant_values, (Array, Tracer)) \
        else constant_values
    if np.ndim(cv) == 0:
        value = ensure_array(cv) if not isinstance(cv, np.ndarray) else cv.item()
        return so.pad(a, _pad_value(a, value), [(b, e, 0) for b, e in pairs])
    cv = np.broadcast_to(np.asarray(cv), (a.ndim, 2))
    for axis, (before, after) in enumerate(pairs):
        for (lo, hi), value in (((before, 0), cv[axis, 0]), ((0, after), cv[axis, 1])):
            if lo or hi:
                config = [(0, 0, 0)] * a.ndim
                config[axis] = (lo, hi, 0)
                a = so.pad(a, _pad_value(a, value.item()), config)
    return a


def _pad_value(a, value):
    """The padding value as a scalar of a's dtype (a traced value stays traced)."""
    if isinstance(value, (Array, Tracer)):
        from fnad.primitives.logic import convert_element_type
        return convert_element_type(value, a.dtype)
    return np.array(value).astype(a.dtype)


# ---- flipping and rotating -----------------------------------------------------------------------
def flip(m: ArrayLike, axis=None) -> Array:
    """`m` with the order of elements along `axis` (all axes if None) reversed."""
    check_arraylike("flip", m)
    m = ensure_array(m)
    axes = tuple(range(m.ndim)) if axis is None else _canonical_axes(axis, m.ndim)
    return so.rev(m, axes) if axes else m


def fliplr(m: ArrayLike) -> Array:
    """`m` flipped left-right (axis 1)."""
    m = ensure_array(m)
    if m.ndim < 2:
        raise ValueError("fliplr requires an array of rank >= 2")
    return flip(m, 1)


def flipud(m: ArrayLike) -> Array:
    """`m` flipped up-down (axis 0)."""
    m = ensure_array(m)
    if m.ndim < 1:
        raise ValueError("flipud requires an array of rank >= 1")
    return flip(m, 0)


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """`m` rotated by 90° k times in the plane of `axes` (from the first toward the second)."""
    check_arraylike("rot90", m)
    m = ensure_array(m)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    ax1, ax2 = canonicalize_axis(axes[0], m.ndim), canonicalize_axis(axes[1], m.ndim)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(m.ndim))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    if k == 1:
        return transpose(flip(m, ax2), perm)
    return flip(transpose(m, perm), ax2)


# ---- shape queries -----------------------------------------------------------------------------
def _refuse_sequences(name: str, a) -> None:
    if isinstance(a, (list, tuple)):
        raise TypeError(f"{name} requires ndarray or scalar arguments, got "
                        f"{type(a).__name__} at position 0.")


def shape(a: ArrayLike) -> tuple[int, ...]:
    """The shape of `a` as a tuple of ints."""
    _refuse_sequences("shape", a)
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def ndim(a: ArrayLike) -> int:
    """The number of dimensions of `a`."""
    _refuse_sequences("ndim", a)
    return a.ndim if hasattr(a, "ndim") else np.ndim(a)


def size(a: ArrayLike, axis: int | None = None) -> int:
    """The number of elements of `a` (along `axis`, if given)."""
    _refuse_sequences("size", a)
    s = shape(a)
    return math.prod(s) if axis is None else s[canonicalize_axis(axis, len(s))]

"""fnad.numpy's index arithmetic and index-driven edits: ix_, r_, c_, s_, index_exp,
mgrid, ogrid, unravel_index, ravel_multi_index, choose, extract, fill_diagonal,
put_along_axis, put, place, mask_indices.

Built on x[idx], x.at[idx].set and compress, so gradients flow to the selected or
written entries. Arrays are immutable: fill_diagonal, put_along_axis, put and place return
a new array and require `inplace=False`, as JAX does.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from fnad import core, dtypes
from fnad.core import Array
from fnad.numpy._core import (
    ArrayLike,
    array,
    asarray,
    canonicalize_axis,
    check_arraylike,
    ensure_array,
)
from fnad.numpy._creation import _concrete, arange, linspace
from fnad.numpy._creation import indices as _index_grid
from fnad.numpy._index_routines import _is_traced, compress
from fnad.numpy._shape import broadcast_arrays, broadcast_to, concatenate, expand_dims, ravel
from fnad.numpy._shape import transpose as _transpose
from fnad.primitives import shape_ops as so

__all__ = ["c_", "choose", "extract", "fill_diagonal", "index_exp", "ix_", "mask_indices",
           "mgrid", "ogrid", "place", "put", "put_along_axis", "r_", "ravel_multi_index", "s_",
           "unravel_index"]

s_ = np.s_
index_exp = np.index_exp


# ---- ix_, r_, c_ -----------------------------------------------------------------------------
def ix_(*args: ArrayLike) -> tuple[Array, ...]:
    """An open mesh from N 1-D sequences: the i-th output has shape [1, .., len(args[i]), .., 1],
    so that x[ix_(rows, cols)] picks the cross product of rows and cols."""
    check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = ensure_array(a)
        if a.ndim != 1:
            raise ValueError(f"Arguments to fnad.numpy.ix_ must be 1-dimensional, got shape "
                             f"{a.shape}")
        if a.dtype == np.bool_:
            raise NotImplementedError("Boolean arguments to fnad.numpy.ix_ are not "
                                      "implemented")
        shape = [1] * n
        shape[i] = a.shape[0]
        if a.size == 0:                            # NumPy: an integer index for empty arrays
            out.append(so.full(shape, 0, dtypes.default_int_dtype()))
        else:
            out.append(so.broadcast_in_dim(a, shape, (i,)))
    return tuple(out)


def _grid_from_slice(s: slice, op_name: str) -> Array:
    start = _concrete(s.start, f"the slice start of fnad.numpy.{op_name}") or 0
    stop = _concrete(s.stop, f"the slice stop of fnad.numpy.{op_name}")
    step = _concrete(s.step, f"the slice step of fnad.numpy.{op_name}") or 1
    if np.iscomplex(step):                         # 5j: five points, endpoint included
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _AxisConcat:
    """x_[...]: slices (start:stop:step, or :num_j for linspace), scalars and arrays joined
    along an axis, after an optional directive string 'axis,ndmin,trans1d' or 'r' / 'c'."""
    axis: int
    ndmin: int
    trans1d: int
    op_name: str

    def __getitem__(self, key) -> Array:
        key = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        directive = key[0] if key else None
        if isinstance(directive, str):
            key = key[1:]
            if directive == "r":
                params[-1] = 0
            elif directive == "c":
                params[-1] = 1
            else:
                vec = directive.split(",")
                vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
                try:
                    params = [int(v) for v in vec]
                except ValueError as err:
                    raise ValueError(f"could not understand directive {directive!r}") from err
        axis, ndmin, trans1d, matrix = params
        output = []
        for item in key:
            if isinstance(item, slice):
                obj, item_ndim = _grid_from_slice(item, self.op_name), 0
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                obj = array(item)
                item_ndim = obj.ndim
            obj = array(obj, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                shifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                perm = tuple(range(ndmin))
                obj = _transpose(obj, perm[shifts:] + perm[:shifts])
            output.append(obj)
        res = concatenate(output, axis=axis)
        if matrix != -1 and res.ndim == 1:
            res = expand_dims(res, matrix)
        return res

    def __len__(self) -> int:
        return 0


class RClass(_AxisConcat):
    """r_[...]: join along the first axis (slices become aranges, or linspaces for a complex
    step); `r_['0,2', a, b]` sets the axis and the minimum rank."""
    axis, ndmin, trans1d, op_name = 0, 1, -1, "r_"


class CClass(_AxisConcat):
    """c_[...]: join along the last axis, 1-D inputs as columns (at least 2-D)."""
    axis, ndmin, trans1d, op_name = -1, 2, 0, "c_"


r_ = RClass()
c_ = CClass()


# ---- flat <-> multi-dimensional indices ------------------------------------------------------
def unravel_index(indices: ArrayLike, shape) -> tuple[Array, ...]:
    """The coordinates in an array of `shape` of the flat (C-order) `indices`; out-of-range
    indices are clipped (-1 and below to 0, as JAX; NumPy raises)."""
    import fnad.numpy as jnp
    check_arraylike("unravel_index", indices)
    idx = ensure_array(indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        idx, out[i] = jnp.divmod(idx, s)
    oob_pos = jnp.greater(idx, 0)
    oob_neg = (asarray(False) if dtypes.issubdtype(idx.dtype, np.unsignedinteger)
               else jnp.less(idx, -1))
    return tuple(jnp.where(oob_pos, s - 1, jnp.where(oob_neg, 0, i))
                 for s, i in zip(shape, out, strict=True))


def ravel_multi_index(multi_index, dims, mode: str = "raise", order: str = "C", *,
                      dtype=None) -> Array:
    """The flat indices of the coordinates `multi_index` in an array of shape `dims`.

    mode 'raise' checks the bounds (so needs concrete indices: under jit use 'wrap',
    'clip' or 'ignore'); order 'C' (row-major) or 'F' (column-major).
    """
    import fnad.numpy as jnp
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: len(multi_index)={len(multi_index)} != "
                         f"len(dims)={len(dims)}")
    dims = tuple(operator.index(_concrete(d, "ravel_multi_index's dims")) for d in dims)
    check_arraylike("ravel_multi_index", *multi_index)
    arrs = [ensure_array(i) for i in multi_index]
    dtype = (dtypes.result_type(int, *arrs) if dtype is None
             else dtypes.canonicalize_dtype(dtype))
    if not dtypes.is_int(dtype):
        raise ValueError(f"dtype={dtype} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"ravel_multi_index: dtype={dtype} not large enough to hold flattened "
                         f"index for dims={dims}. Use the dtype argument to pass a suitable "
                         "dtype.")
    for i in arrs:
        if mode == "raise" and _is_traced(i):
            raise core.ConcretizationTypeError(
                f"ravel_multi_index of traced indices with mode='raise'{core._at_user_line()}"
                ": the bounds check needs concrete values. Use mode='wrap' or mode='clip' "
                "(or 'ignore') under jit.")
        if not dtypes.is_int(i.dtype):
            raise TypeError(f"ravel_multi_index: only int indices permitted, got {i.dtype}")
    if mode == "raise":
        if any(np.any((np.asarray(i) < 0) | (np.asarray(i) >= d))
               for i, d in zip(arrs, dims, strict=True)):
            raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        arrs = [jnp.clip(i, 0, d - 1) for i, d in zip(arrs, dims, strict=True)]
    elif mode == "wrap":
        arrs = [jnp.remainder(i, d) for i, d in zip(arrs, dims, strict=True)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                         "'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    result = asarray(0, dtype)
    for i, s in zip(arrs, strides, strict=True):
        result = jnp.add(result, jnp.multiply(asarray(i, dtype), int(s)))
    return result


# ---- selection -------------------------------------------------------------------------------
def choose(a: ArrayLike, choices, out: None = None, mode: str = "raise") -> Array:
    """out[i...] = choices[a[i...]][i...], all broadcast together.

    mode 'raise' checks that a is in [0, len(choices)) (so needs a concrete `a`: under jit
    use 'wrap' or 'clip').
    """
    import fnad.numpy as jnp
    if out is not None:
        raise NotImplementedError("The 'out' argument to fnad.numpy.choose is not supported.")
    if isinstance(choices, (Array, np.ndarray)) or hasattr(choices, "aval"):
        choices = [choices[i] for i in range(choices.shape[0])]
    check_arraylike("choose", a, *choices)
    a = ensure_array(a)
    if not dtypes.is_int(a.dtype):
        raise ValueError(f"`a` array must be integer typed, got {a.dtype}")
    n = len(choices)
    if mode == "raise":
        if _is_traced(a):
            raise core.ConcretizationTypeError(
                f"choose with a traced `a` and mode='raise'{core._at_user_line()}: the bounds "
                "check needs concrete values. Use mode='wrap' or mode='clip' under jit.")
        v = np.asarray(a)
        if np.any((v < 0) | (v >= n)):
            raise ValueError("invalid entry in choice array")
        arr = a
    elif mode == "wrap":
        arr = jnp.remainder(a, n)
    elif mode == "clip":
        arr = jnp.clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    arr, *choices = broadcast_arrays(arr, *choices)
    return jnp.stack(choices)[(arr,) + _index_grid(arr.shape, sparse=True)]


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike = 0) -> Array:
    """The elements of the flattened `arr` where the flattened `condition` is true.

    Its length depends on the data: under jit pass a static `size` (padded with
    `fill_value`, or truncated), as nonzero.
    """
    check_arraylike("extract", condition, arr, fill_value)
    return compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)


# ---- functional writes -----------------------------------------------------------------------
def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *,
                  inplace: bool = True) -> Array:
    """A copy of `a` (all dims equal, or 2-D) with its main diagonal set to `val` (a scalar, or
    values repeated along the diagonal). Pass inplace=False: fnad arrays are immutable."""
    if inplace:
        raise NotImplementedError("fnad arrays are immutable: fill_diagonal returns a new "
                                  "array, call it with inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    check_arraylike("fill_diagonal", a, val)
    a, val = ensure_array(a), ensure_array(val)
    if a.ndim < 2:
        raise ValueError(f"array must be at least 2-d, got shape {a.shape}")
    if a.ndim > 2 and not all(d == a.shape[0] for d in a.shape[1:]):
        raise ValueError(f"All dimensions of input must be of equal length, got {a.shape}")
    n = min(a.shape)
    idx = (asarray(np.arange(n)),) * a.ndim
    if val.ndim:
        flat = ravel(val)
        if flat.shape[0] == 0:
            return a
        reps = -(-n // flat.shape[0])
        val = so.slice_in_dim(so.concatenate([flat] * reps, 0) if reps > 1 else flat,
                              0, n, 1, 0)                                   # [n]
    return a.at[idx].set(val)


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Array:
    """A copy of `arr` with out[..., indices[..., j, ...], ...] = values[..., j, ...] along
    `axis` (the inverse of take_along_axis). Pass inplace=False: arrays are immutable."""
    if inplace:
        raise ValueError("fnad.numpy.put_along_axis cannot modify arrays in-place, because "
                         "fnad arrays are immutable. Pass inplace=False to instead return an "
                         "updated array.")
    check_arraylike("put_along_axis", arr, indices, values)
    arr, idx, values = ensure_array(arr), ensure_array(indices), ensure_array(values)
    original_shape = arr.shape
    if axis is None:
        arr, axis = ravel(arr), 0
    if arr.ndim != idx.ndim:
        raise ValueError("put_along_axis arguments 'arr' and 'indices' must have same ndim. "
                         f"Got arr.ndim={arr.ndim} and indices.ndim={idx.ndim}.")
    axis = canonicalize_axis(axis, arr.ndim)
    try:
        values = broadcast_to(values, idx.shape)
    except ValueError:
        raise ValueError("put_along_axis argument 'values' must be broadcastable to "
                         f"'indices'. Got values.shape={values.shape} and "
                         f"indices.shape={idx.shape}.") from None
    grid = list(_index_grid(arr.shape, sparse=True))
    grid[axis] = idx
    out = arr.at[tuple(grid)].set(values, mode=mode)
    return so.reshape(out, original_shape) if out.shape != original_shape else out


# ---- mgrid, ogrid ----------------------------------------------------------------------------
class _Grid:
    """mgrid[...] / ogrid[...]: the grids of the given slices (start:stop:step, or
    start:stop:Nj for N points with the stop included), dense or open."""
    sparse: bool
    op_name: str

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_from_slice(key, self.op_name)
        if not isinstance(key, tuple) or not all(isinstance(k, slice) for k in key):
            raise TypeError(f"{self.op_name}[...] takes slices, got {key!r}")
        axes = [_grid_from_slice(k, self.op_name) for k in key]
        if not axes:
            return [] if self.sparse else array([])
        dtype = dtypes.result_type(*axes)
        axes = [a.astype(dtype) for a in axes]
        n = len(axes)
        opened = [so.reshape(a, tuple(a.shape[0] if i == k else 1 for i in range(n)))
                  if n > 1 else a for k, a in enumerate(axes)]
        if self.sparse:
            return opened
        from fnad.numpy._shape import stack
        return stack(broadcast_arrays(*opened), 0)

    def __len__(self) -> int:
        return 0


class _MGrid(_Grid):
    """mgrid[0:3, 0:2]: dense coordinate arrays stacked along a first axis."""
    sparse, op_name = False, "mgrid"


class _OGrid(_Grid):
    """ogrid[0:3, 0:2]: open grids (each coordinate varies along its own axis only)."""
    sparse, op_name = True, "ogrid"


mgrid = _MGrid()
ogrid = _OGrid()


# ---- put, place, mask_indices ----------------------------------------------------------------
def _not_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"fnad.numpy.{name} cannot modify arrays in place, because fnad "
                         "arrays are immutable. Pass inplace=False to get the updated array "
                         "instead.")


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *,
        inplace: bool = True) -> Array:
    """a (flattened) with a.flat[ind] = v, v repeated to ind's length; returns the updated
    copy (inplace=False is required). `mode`: 'clip' (the default) or 'wrap' ('raise' is
    not supported: indices are data); repeated indices keep the last value."""
    _not_inplace("put", inplace)
    check_arraylike("put", a, ind, v)
    arr = asarray(a)
    ind_flat = ravel(asarray(ind))
    if not dtypes.issubdtype(ind_flat.dtype, np.integer):
        raise TypeError(f"fnad.numpy.put: indices must be integers, got {ind_flat.dtype}")
    v_flat = ravel(asarray(v, dtype=arr.dtype))
    if ind_flat.size == 0 or v_flat.size == 0:
        return arr
    if v_flat.size < ind_flat.size:                      # repeated, as NumPy
        from fnad.numpy._shape import tile
        v_flat = tile(v_flat, -(-ind_flat.size // v_flat.size))
    v_flat = v_flat[:ind_flat.size]
    n = arr.size
    if mode is None or mode == "clip":
        idx = ind_flat.clip(-n, n - 1) % n if n else ind_flat
    elif mode == "wrap":
        idx = ind_flat % n
    elif mode == "raise":
        raise NotImplementedError("fnad.numpy.put: mode='raise' is not supported (the "
                                  "indices are data); use 'clip' or 'wrap'")
    else:
        raise ValueError(f"fnad.numpy.put: mode must be 'clip', 'wrap' or None, got {mode!r}")
    return ravel(arr).at[idx].set(v_flat, mode="promise_in_bounds").reshape(arr.shape)


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Array:
    """arr with the elements where `mask` is true replaced by `vals` in order (repeated
    when shorter, as NumPy); returns the updated copy (inplace=False is required). The mask
    must be concrete (its count sets the shape), as in JAX."""
    _not_inplace("place", inplace)
    check_arraylike("place", arr, mask, vals)
    data = asarray(arr)
    if _is_traced(mask):
        raise core.ConcretizationTypeError(
            f"fnad.numpy.place: the mask must be concrete, got a traced array "
            f"{core.get_aval(mask).str_short()}: the number of places sets the shapes")
    m = np.asarray(mask.to_concrete_value() if isinstance(mask, core.Tracer) else mask, bool)
    if m.shape != data.shape:
        raise ValueError(f"fnad.numpy.place: mask of shape {m.shape} does not match arr of "
                         f"shape {data.shape}")
    idx = np.flatnonzero(m)
    if idx.size == 0:
        return data
    v = ravel(asarray(vals, dtype=data.dtype))
    if v.size == 0:
        raise ValueError("fnad.numpy.place: cannot place from an empty vals into a "
                         "non-empty selection")
    take = np.arange(idx.size) % v.size
    return ravel(data).at[idx].set(v[take]).reshape(data.shape)


def mask_indices(n: int, mask_func, k: int = 0, *, size: int | None = None):
    """The (row, column) indices where `mask_func(ones((n, n)), k)` is nonzero (for
    mask_func = triu, the upper triangle). `size` pads or cuts them to a static length."""
    from fnad.numpy._creation import ones
    from fnad.numpy._index_routines import nonzero
    return nonzero(mask_func(ones((n, n), dtype=np.int32), k), size=size)

"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate, pad,
slice, dynamic_slice, dynamic_update_slice and iota, plus the jax.lax wrappers built on
them (full, full_like, expand_dims, broadcast, collapse, slice_in_dim, ...).

All but iota are linear in their array operands: the JVP applies the same op to the
tangents and the transpose is the adjoint shape op (slice <-> pad, dynamic_slice <->
dynamic_update_slice, concatenate -> slices). Each block: declaration, wrapper, shape
rule, JVP rule, transpose rule, batching rule (under vmap with batched start indices,
dynamic_slice becomes a gather and dynamic_update_slice a scatter, as in JAX). Rules bind
primitives, never NumPy, so they run on any trace. Implementations live in backends/.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from fnad import core, dtypes
from fnad.core import (Array, Primitive, ShapedArray, Tracer, abstract_eval_rules, batch_rules,
                       get_aval,
                       is_undefined, is_zero, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives import elementwise as _ew
from fnad.primitives import logic as _logic
from fnad.primitives import reductions as _red
from fnad.primitives._batching import axis_param_batch_rule, bdim_at_front, moveaxis
from fnad.primitives._util import NUM, check_kind, no_tangent_jvp, promote_scalars, scalar_like

__all__ = [
    "broadcast", "broadcast_in_dim", "broadcast_to_rank", "broadcasted_iota", "collapse",
    "concatenate", "dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "expand_dims", "full", "full_like", "index_in_dim", "iota", "pad", "reshape", "rev",
    "slice", "slice_in_dim", "squeeze", "transpose", "zeros_like_array",
]


# ---- helpers ---------------------------------------------------------------------------
def _linear_jvp(prim):
    """JVP of a primitive linear in its one operand: the same op on the tangent."""
    def rule(primals, tangents, **params):
        return prim.bind(*primals, **params), prim.bind(*tangents, **params)
    return rule


def _aval(x) -> ShapedArray:
    return x.aval if is_undefined(x) else get_aval(x)


def _is_array(x) -> bool:
    """An fnad value a no-op wrapper may return as is (lax returns jax Arrays unchanged)."""
    return type(x) is Array or isinstance(x, Tracer)


def _ints(values) -> tuple[int, ...]:
    """A static shape-like parameter as a tuple of Python ints (a bare int is a 1-tuple)."""
    if isinstance(values, (int, np.integer)):
        return (operator.index(values),)
    return tuple(operator.index(v) for v in values)


def _axis(name: str, axis, ndim: int) -> int:
    """`axis` in [0, ndim), negative values counting from the end."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise shape_error(name, f"axis {a} is out of bounds for an array of rank {ndim}")
    return a % ndim


def _instantiate(t):
    """A real zero array for a tangent that is a symbolic Zero."""
    return full(t.aval.shape, 0, t.aval.dtype) if is_zero(t) else t


# ---- broadcast_in_dim ------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")
def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """Broadcast `operand` to `shape`; operand dim i becomes output dim broadcast_dimensions[i].

    Unsorted (distinct) broadcast_dimensions transpose the operand first, as jax allows."""
    shape, bdims = _ints(shape), _ints(broadcast_dimensions)
    if len(set(bdims)) == len(bdims) and list(bdims) != sorted(bdims) \
            and len(bdims) == np.ndim(operand) and all(0 <= d < len(shape) for d in bdims) \
            and all(n in (1, shape[d]) for n, d in zip(np.shape(operand), bdims)):
        perm = tuple(int(i) for i in np.argsort(bdims))
        operand, bdims = transpose(operand, perm), tuple(sorted(bdims))
    if _is_array(operand) and operand.shape == shape and bdims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=bdims)

def broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    bdims = broadcast_dimensions
    if len(bdims) != x.ndim:
        raise shape_error("broadcast_in_dim", f"broadcast_dimensions {bdims} must have one "
                                              f"entry per operand dimension {x.shape}")
    if any(d < 0 for d in shape):
        raise shape_error("broadcast_in_dim", f"negative dimension in shape {shape}")
    if any(not 0 <= d < len(shape) for d in bdims) or list(bdims) != sorted(set(bdims)):
        raise shape_error("broadcast_in_dim", f"broadcast_dimensions {bdims} must be strictly "
                                              f"increasing and in range for shape {shape} "
                                              f"(or distinct, each operand dimension 1 or the "
                                              f"size of its target: operand {x.shape})")
    for i, d in enumerate(bdims):
        if x.shape[i] != 1 and x.shape[i] != shape[d]:
            raise shape_error("broadcast_in_dim", f"operand shape {x.shape} cannot be "
                                                  f"broadcast to {shape} along dims {bdims}: "
                                                  f"operand dim {i} has size {x.shape[i]} "
                                                  f"but output dim {d} has size {shape[d]}")
    return ShapedArray(shape, x.dtype, x.weak_type)
abstract_eval_rules[broadcast_in_dim_p] = broadcast_in_dim_abstract_eval
jvp_rules[broadcast_in_dim_p] = _linear_jvp(broadcast_in_dim_p)  # d bcast(x) = bcast(dx)
def broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    in_shape = x.aval.shape                              # x̄ = ct summed over new/stretched dims
    bdims = broadcast_dimensions
    summed = tuple(d for d in range(len(shape)) if d not in bdims)
    stretched = tuple(d for i, d in enumerate(bdims) if in_shape[i] == 1 and shape[d] != 1)
    axes = tuple(sorted(summed + stretched))
    out = _red.reduce_sum(ct, axes=axes) if axes else ct
    return [reshape(out, in_shape) if stretched else out]
transpose_rules[broadcast_in_dim_p] = broadcast_in_dim_transpose
def broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = vals, dims                            # the batch axis leads, in and out
    x = bdim_at_front(x, d, 0)
    return broadcast_in_dim(x, (_aval(x).shape[0],) + shape,
                            (0,) + tuple(b + 1 for b in broadcast_dimensions)), 0
batch_rules[broadcast_in_dim_p] = broadcast_in_dim_batch


def _fill_scalar(fill_value, dtype, weak: bool):
    """`fill_value` as a rank-0 value of `dtype`, weakly typed if `weak`."""
    aval = get_aval(fill_value)
    if aval.shape:
        raise TypeError(f"full must be called with a scalar fill_value, got fill_value "
                        f"of shape {aval.shape}")
    if _is_array(fill_value) and aval.dtype == dtype and aval.weak_type == weak:
        return fill_value
    if weak and type(fill_value) in (bool, int, float, complex):
        return scalar_like(fill_value, dtype)
    if not weak and core.is_concrete(fill_value) and not isinstance(fill_value, Array):
        return np.array(fill_value, dtype=dtype)
    return _logic.convert_element_type(fill_value, dtype, weak)


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with `fill_value` (weakly typed if dtype is None)."""
    if dtype is None:
        aval = get_aval(fill_value)
        dtype, weak = aval.dtype, aval.weak_type
    else:
        dtype, weak = dtypes.canonicalize_dtype(dtype), False
    return broadcast_in_dim(_fill_scalar(fill_value, dtype, weak), _ints(shape), ())


def full_like(x, fill_value, dtype=None, shape=None):
    """An array like `x` (its shape and dtype unless given) filled with `fill_value`."""
    aval = (ShapedArray(x.shape, x.dtype, x.weak_type)
            if isinstance(x, (core.ShapeDtypeStruct, ShapedArray)) else get_aval(x))
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dtypes.canonicalize_dtype(dtype)
    shape = aval.shape if shape is None else _ints(shape)
    return broadcast_in_dim(_fill_scalar(fill_value, dtype, weak), shape, ())


def zeros_like_array(x):
    """Zeros with the shape and dtype of `x`."""
    return full_like(x, 0)


def broadcast(operand, sizes):
    """`operand` with new leading dims `sizes`: shape (*sizes, *operand.shape)."""
    sizes, shape = _ints(sizes), get_aval(operand).shape
    return broadcast_in_dim(operand, sizes + shape,
                            tuple(range(len(sizes), len(sizes) + len(shape))))


def broadcast_to_rank(x, rank: int):
    """`x` with leading dims of size 1 added to give it rank `rank`."""
    return broadcast(x, (1,) * (rank - get_aval(x).ndim))


def expand_dims(array, dimensions):
    """`array` with size-1 dims inserted at `dimensions` (positions in the output)."""
    dimensions = _ints(dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise shape_error("expand_dims", f"repeated axis in dimensions {dimensions}")
    shape = get_aval(array).shape
    ndim_out = len(shape) + len(dimensions)
    dims = {_axis("expand_dims", d, ndim_out) for d in dimensions}
    if len(dims) != len(dimensions):
        raise shape_error("expand_dims", f"repeated axis in dimensions {dimensions} "
                                         f"(for a result of rank {ndim_out})")
    out_shape = list(shape)
    for d in sorted(dims):
        out_shape.insert(d, 1)
    return broadcast_in_dim(array, out_shape, [d for d in range(ndim_out) if d not in dims])


# ---- reshape ---------------------------------------------------------------------------
reshape_p = Primitive("reshape")
def reshape(operand, new_sizes, dimensions=None):
    """`operand` with shape `new_sizes` (row-major); `dimensions` permutes it first (as lax)."""
    if dimensions is not None:
        operand = transpose(operand, dimensions)
    new_sizes = _ints(new_sizes)
    if _is_array(operand) and operand.shape == new_sizes:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes)

def reshape_abstract_eval(x, *, new_sizes):
    if any(d < 0 for d in new_sizes) or math.prod(new_sizes) != x.size:
        raise shape_error("reshape", f"cannot reshape array of shape {x.shape} (size {x.size}) "
                                     f"into shape {new_sizes} (size {math.prod(new_sizes)})")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)
abstract_eval_rules[reshape_p] = reshape_abstract_eval
jvp_rules[reshape_p] = _linear_jvp(reshape_p)            # d reshape(x) = reshape(dx)
def reshape_transpose(ct, x, *, new_sizes):              # x̄ = ct in x's shape
    return [reshape(ct, x.aval.shape)]
transpose_rules[reshape_p] = reshape_transpose
def reshape_batch(vals, dims, *, new_sizes):          # [B, ...] -> [B, *new_sizes]
    x = bdim_at_front(vals[0], dims[0], 0)
    return reshape_p.bind(x, new_sizes=(_aval(x).shape[0],) + new_sizes), 0
batch_rules[reshape_p] = reshape_batch


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """`operand` with dims [start_dimension, stop_dimension) merged into one (row-major)."""
    shape = get_aval(operand).shape
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise shape_error("collapse", f"invalid dimension range for shape {shape}: "
                                      f"[{start_dimension}:{stop_dimension}]")
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


# ---- transpose -------------------------------------------------------------------------
transpose_p = Primitive("transpose")
def transpose(operand, permutation):
    """`operand` with permuted dims: out.shape[i] = operand.shape[permutation[i]]."""
    perm = _ints(permutation)
    if _is_array(operand) and perm == tuple(range(operand.ndim)):
        return operand
    return transpose_p.bind(operand, permutation=perm)

def transpose_abstract_eval(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise shape_error("transpose", f"permutation {permutation} is not a permutation of "
                                       f"the dimensions of an operand of shape {x.shape}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)
abstract_eval_rules[transpose_p] = transpose_abstract_eval
jvp_rules[transpose_p] = _linear_jvp(transpose_p)        # d xᵀ = (dx)ᵀ
def transpose_transpose(ct, x, *, permutation):          # x̄ = ct with the inverse permutation
    return [transpose(ct, _ints(np.argsort(permutation)))]
transpose_rules[transpose_p] = transpose_transpose
def transpose_batch(vals, dims, *, permutation):       # keep the batch axis where it is
    (x,), (d,) = vals, dims
    perm = [p + (p >= d) for p in permutation]
    perm.insert(d, d)
    return transpose_p.bind(x, permutation=tuple(perm)), d
batch_rules[transpose_p] = transpose_batch


# ---- squeeze ---------------------------------------------------------------------------
squeeze_p = Primitive("squeeze")
def squeeze(array, dimensions):
    """`array` without its size-1 dims `dimensions` (negative values count from the end)."""
    ndim = get_aval(array).ndim
    dims = tuple(sorted(_axis("squeeze", d, ndim) for d in _ints(dimensions)))
    if not dims and _is_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dims)

def squeeze_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions):
        raise shape_error("squeeze", f"dimensions {dimensions} are not unique")
    if any(not 0 <= d < x.ndim for d in dimensions):
        raise shape_error("squeeze", f"dimensions {dimensions} out of range for shape {x.shape}")
    for d in dimensions:
        if x.shape[d] != 1:
            raise shape_error("squeeze", f"cannot squeeze dimension {d} of size {x.shape[d]} "
                                         f"(shape {x.shape}): only size-1 dimensions can be "
                                         f"squeezed")
    shape = tuple(n for i, n in enumerate(x.shape) if i not in dimensions)
    return ShapedArray(shape, x.dtype, x.weak_type)
abstract_eval_rules[squeeze_p] = squeeze_abstract_eval
jvp_rules[squeeze_p] = _linear_jvp(squeeze_p)            # d squeeze(x) = squeeze(dx)
def squeeze_transpose(ct, x, *, dimensions):             # x̄ = ct with the size-1 dims back
    return [expand_dims(ct, dimensions)]
transpose_rules[squeeze_p] = squeeze_transpose
batch_rules[squeeze_p] = axis_param_batch_rule(squeeze_p, "dimensions")


# ---- rev -------------------------------------------------------------------------------
rev_p = Primitive("rev")
def rev(operand, dimensions):
    """`operand` reversed along `dimensions`."""
    ndim = get_aval(operand).ndim
    dims = tuple(d % ndim if -ndim <= d < 0 else d for d in _ints(dimensions))
    return rev_p.bind(operand, dimensions=dims)

def rev_abstract_eval(x, *, dimensions):
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < x.ndim for d in dimensions):
        raise shape_error("rev", f"dimensions {dimensions} must be unique and in range for an "
                                 f"operand of shape {x.shape}")
    return x
abstract_eval_rules[rev_p] = rev_abstract_eval
jvp_rules[rev_p] = _linear_jvp(rev_p)                    # d rev(x) = rev(dx)
def rev_transpose(ct, x, *, dimensions):                 # x̄ = rev(ct) (its own adjoint)
    return [rev(ct, dimensions)]
transpose_rules[rev_p] = rev_transpose
batch_rules[rev_p] = axis_param_batch_rule(rev_p, "dimensions")


# ---- concatenate -----------------------------------------------------------------------
concatenate_p = Primitive("concatenate")
def concatenate(operands, dimension: int):
    """`operands` joined along `dimension`; their other dims must be equal."""
    operands = list(operands)
    if not operands:
        raise shape_error("concatenate", "needs a non-empty sequence of arrays")
    if len(operands) == 1 and _is_array(operands[0]):
        return operands[0]
    dimension = operator.index(dimension)
    if dimension < 0:
        dimension += get_aval(operands[0]).ndim
    return concatenate_p.bind(*operands, dimension=dimension)

def concatenate_abstract_eval(*xs, dimension):
    shapes = ", ".join(str(x.shape) for x in xs)
    if not xs:
        raise shape_error("concatenate", "needs at least one operand")
    if len({x.ndim for x in xs}) != 1:
        raise shape_error("concatenate", f"cannot concatenate arrays of different ranks: "
                                         f"shapes {shapes}")
    if not 0 <= dimension < xs[0].ndim:
        raise shape_error("concatenate", f"dimension {dimension} is out of bounds for "
                                         f"operands of shapes {shapes}")
    rest = {x.shape[:dimension] + x.shape[dimension + 1:] for x in xs}
    if len(rest) != 1:
        raise shape_error("concatenate", f"shapes {shapes} differ in dimensions other than "
                                         f"the concatenated dimension {dimension}")
    if len({x.dtype for x in xs}) != 1:
        raise shape_error("concatenate", "operands must have the same dtype, got "
                                         + ", ".join(x.dtype.name for x in xs))
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, xs[0].dtype, all(x.weak_type for x in xs))
abstract_eval_rules[concatenate_p] = concatenate_abstract_eval
def concatenate_jvp(primals, tangents, *, dimension):   # d concat(xs) = concat(dxs)
    dots = [_instantiate(t) for t in tangents]
    return (concatenate_p.bind(*primals, dimension=dimension),
            concatenate_p.bind(*dots, dimension=dimension))
jvp_rules[concatenate_p] = concatenate_jvp
def concatenate_transpose(ct, *xs, dimension):           # x̄_i = the slice of ct where x_i sits
    cts, start = [], 0
    for x in xs:
        size = _aval(x).shape[dimension]
        cts.append(slice_in_dim(ct, start, start + size, axis=dimension)
                   if is_undefined(x) else None)
        start += size
    return cts
transpose_rules[concatenate_p] = concatenate_transpose
batch_rules[concatenate_p] = axis_param_batch_rule(concatenate_p, "dimension")


# ---- pad -------------------------------------------------------------------------------
pad_p = Primitive("pad")
def pad(operand, padding_value, padding_config):
    """`operand` padded with the scalar `padding_value`: one (low, high, interior) per dim.

    low/high elements go before/after each dim (negative values cut elements off);
    `interior` elements go between each pair of neighbours.
    """
    config = tuple(_ints(dim) for dim in padding_config)
    operand, padding_value = promote_scalars(operand, padding_value)
    return pad_p.bind(operand, padding_value, padding_config=config)

def _dilated(n: int, interior: int) -> int:
    return 0 if n == 0 else n + (n - 1) * interior

def pad_abstract_eval(x, v, *, padding_config):
    if v.ndim != 0:
        raise shape_error("pad", f"padding_value must be a scalar, got shape {v.shape}")
    if x.dtype != v.dtype:
        raise shape_error("pad", f"operand and padding_value must have the same dtype, got "
                                 f"{x.dtype.name} and {v.dtype.name}")
    if len(padding_config) != x.ndim or any(len(c) != 3 for c in padding_config):
        raise shape_error("pad", f"padding_config {padding_config} must have one "
                                 f"(low, high, interior) triple per dimension of the operand "
                                 f"of shape {x.shape}")
    if any(i < 0 for _, _, i in padding_config):
        raise shape_error("pad", f"interior padding must be non-negative, got padding_config "
                                 f"{padding_config}")
    shape = tuple(lo + hi + _dilated(n, i)
                  for (lo, hi, i), n in zip(padding_config, x.shape, strict=True))
    if any(d < 0 for d in shape):
        raise shape_error("pad", f"padding_config {padding_config} removes more elements than "
                                 f"the operand of shape {x.shape} has (result shape {shape})")
    return ShapedArray(shape, x.dtype, x.weak_type and v.weak_type)
abstract_eval_rules[pad_p] = pad_abstract_eval
def pad_jvp(primals, tangents, *, padding_config):      # d pad(x, v) = pad(dx, dv)
    (x, v), (x_dot, v_dot) = primals, tangents
    return (pad_p.bind(x, v, padding_config=padding_config),
            pad_p.bind(_instantiate(x_dot), _instantiate(v_dot), padding_config=padding_config))
jvp_rules[pad_p] = pad_jvp
def pad_transpose(ct, x, v, *, padding_config):          # x̄ = ct at x's places; v̄ = Σct - Σx̄
    ct_aval = get_aval(ct)
    zero = np.zeros((), ct_aval.dtype)
    unpad = tuple((-lo, -hi, 0) for lo, hi, _ in padding_config)
    unpadded = pad_p.bind(ct, zero, padding_config=unpad)
    x_bar = slice(unpadded, (0,) * ct_aval.ndim, get_aval(unpadded).shape,
                  tuple(i + 1 for _, _, i in padding_config))
    v_bar = None
    if is_undefined(v):
        every = tuple(range(ct_aval.ndim))
        v_bar = _ew.sub(_red.reduce_sum(ct, every), _red.reduce_sum(x_bar, every))
    return [x_bar if is_undefined(x) else None, v_bar]
transpose_rules[pad_p] = pad_transpose
def pad_batch(vals, dims, *, padding_config):          # a batched pad value: pad with 0,
    (x, v), (xd, vd) = vals, dims                      # then fill the margins with v
    size = _aval(x).shape[xd] if xd is not None else _aval(v).shape[vd]
    x = bdim_at_front(x, xd, size)
    config = ((0, 0, 0),) + padding_config
    if vd is None:
        return pad_p.bind(x, v, padding_config=config), 0
    zero = np.zeros((), _aval(x).dtype)
    padded = pad_p.bind(x, zero, padding_config=config)
    inside = pad_p.bind(full_like(x, True, np.bool_), np.zeros((), np.bool_),
                        padding_config=config)
    v = broadcast_in_dim(bdim_at_front(v, vd, size), _aval(padded).shape, (0,))
    return _logic.select_n(inside, v, padded), 0
batch_rules[pad_p] = pad_batch


# ---- slice -----------------------------------------------------------------------------
slice_p = Primitive("slice")
def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (lax.slice)
    """operand[start:limit:stride] in every dim, with static indices."""
    return slice_p.bind(operand, start_indices=_ints(start_indices),
                        limit_indices=_ints(limit_indices),
                        strides=None if strides is None else _ints(strides))

def slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    starts, limits = start_indices, limit_indices
    strides = (1,) * x.ndim if strides is None else strides
    if not len(starts) == len(limits) == len(strides) == x.ndim:
        raise shape_error("slice", f"start_indices {starts}, limit_indices {limits} and "
                                   f"strides {strides} must each have one entry per dimension "
                                   f"of the operand of shape {x.shape}")
    if any(not 0 <= s <= lim <= n for s, lim, n in zip(starts, limits, x.shape, strict=True)):
        raise shape_error("slice", f"start_indices {starts} and limit_indices {limits} are out "
                                   f"of bounds for an operand of shape {x.shape} (need "
                                   f"0 <= start <= limit <= size in every dimension)")
    if any(s <= 0 for s in strides):
        raise shape_error("slice", f"strides {strides} must be positive")
    shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(starts, limits, strides, strict=True))
    return ShapedArray(shape, x.dtype, x.weak_type)
abstract_eval_rules[slice_p] = slice_abstract_eval
jvp_rules[slice_p] = _linear_jvp(slice_p)                # d x[s] = dx[s]
def slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    shape, out = x.aval.shape, get_aval(ct).shape        # x̄ = ct padded back with zeros
    strides = (1,) * len(shape) if strides is None else strides
    real_limits = [s + (n - 1) * st + 1 if n else s
                   for s, n, st in zip(start_indices, out, strides, strict=True)]
    config = tuple((s, d - lim, st - 1)
                   for s, d, lim, st in zip(start_indices, shape, real_limits, strides,
                                            strict=True))
    return [pad_p.bind(ct, np.zeros((), get_aval(ct).dtype), padding_config=config)]
transpose_rules[slice_p] = slice_transpose
def slice_batch(vals, dims, *, start_indices, limit_indices, strides):
    x = bdim_at_front(vals[0], dims[0], 0)             # take the whole batch axis
    return slice_p.bind(x, start_indices=(0,) + start_indices,
                        limit_indices=(_aval(x).shape[0],) + limit_indices,
                        strides=None if strides is None else (1,) + strides), 0
batch_rules[slice_p] = slice_batch


def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0):
    """operand[..., start:limit:stride, ...] along `axis` (negative indices count from the end)."""
    shape = get_aval(operand).shape
    axis = _axis("slice_in_dim", axis, len(shape))
    n = shape[axis]
    start = 0 if start_index is None else operator.index(start_index)
    limit = n if limit_index is None else operator.index(limit_index)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis] = start + n if start < 0 else start
    limits[axis] = limit + n if limit < 0 else limit
    strides[axis] = operator.index(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """operand[..., index, ...] along `axis` (kept as a size-1 dim if keepdims)."""
    shape = get_aval(operand).shape
    axis = _axis("index_in_dim", axis, len(shape))
    index, n = operator.index(index), shape[axis]
    wrapped = index + n if index < 0 else index
    if not 0 <= wrapped < n:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
    out = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# ---- dynamic_slice ---------------------------------------------------------------------
def _dynamic_indices(name: str, operand, start_indices, allow_negative_indices) -> list:
    """Scalar index operands, one per dim, negative ones counted from the end (as lax).

    Python ints are static (folded now); arrays may be traced. Python ints take the
    dtype of the array indices (int32 by default).
    """
    shape = get_aval(operand).shape
    if not isinstance(start_indices, (list, tuple)):       # a 1-D array of indices
        aval = get_aval(start_indices)
        if aval.ndim != 1:
            raise shape_error(name, f"start_indices must be a sequence of scalars or a 1-D "
                                    f"array, got an array of shape {aval.shape}")
        start_indices = [reshape(slice(start_indices, (i,), (i + 1,)), ())
                         for i in range(aval.shape[0])]
    if len(start_indices) != len(shape):
        raise shape_error(name, f"got {len(start_indices)} start indices for an operand of "
                                f"shape {shape}: give one index per dimension")
    allow = ([allow_negative_indices] * len(shape) if isinstance(allow_negative_indices, bool)
             else list(allow_negative_indices))
    static = [isinstance(i, (int, np.integer)) and not isinstance(i, bool)
              for i in start_indices]
    dyn = [get_aval(i) for i, s in zip(start_indices, static, strict=True) if not s]
    for a in dyn:
        if not dtypes.is_int(a.dtype) or a.ndim:
            raise shape_error(name, f"start indices must be integer scalars, got "
                                    f"{a.str_short()}")
    idx_dtype = dyn[0].dtype if dyn else dtypes.default_int_dtype()
    out = []
    for i, d, is_static, neg in zip(start_indices, shape, static, allow, strict=True):
        if is_static:
            i = operator.index(i)
            if i < 0 and not neg:
                raise shape_error(name, f"index {i} is out of bounds for a dimension of size "
                                        f"{d} with allow_negative_indices=False")
            i = i + d if i < 0 else i
            out.append(np.array(min(max(i, 0), d), idx_dtype))  # clamping to [0, d] is exact
        elif neg and dtypes.issubdtype(get_aval(i).dtype, np.signedinteger):
            size = np.array(d, get_aval(i).dtype)
            out.append(_logic.select_n(_logic.lt(i, 0), i, _ew.add(i, size)))
        else:
            out.append(i)
    return out


def _check_index_operands(name: str, x: ShapedArray, idx) -> None:
    if len(idx) != x.ndim:
        raise shape_error(name, f"got {len(idx)} start indices for an operand of shape "
                                f"{x.shape}: give one index per dimension")
    if any(i.ndim for i in idx) or any(not dtypes.is_int(i.dtype) for i in idx) or \
            len({i.dtype for i in idx}) > 1:
        raise shape_error(name, "start indices must be integer scalars of one dtype, got "
                                + ", ".join(i.str_short() for i in idx))


dynamic_slice_p = Primitive("dynamic_slice")
def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    """The block of `slice_sizes` at `start_indices` (scalars, may be traced).

    As lax: a negative index counts from the end, then each start is clamped to
    [0, size - slice_size] so that the block always lies inside `operand`.
    """
    idx = _dynamic_indices("dynamic_slice", operand, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=_ints(slice_sizes))

def dynamic_slice_abstract_eval(x, *idx, slice_sizes):
    _check_index_operands("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n
                                         for s, n in zip(slice_sizes, x.shape, strict=True)):
        raise shape_error("dynamic_slice", f"slice_sizes {slice_sizes} must have one "
                                           f"non-negative entry per dimension, at most the "
                                           f"operand shape {x.shape}")
    return ShapedArray(slice_sizes, x.dtype, x.weak_type)
abstract_eval_rules[dynamic_slice_p] = dynamic_slice_abstract_eval
def dynamic_slice_jvp(primals, tangents, *, slice_sizes):   # d x[i:i+n] = dx[i:i+n]
    x, *idx = primals
    out = dynamic_slice_p.bind(x, *idx, slice_sizes=slice_sizes)
    x_dot = tangents[0]
    return out, (dynamic_slice_p.bind(x_dot, *idx, slice_sizes=slice_sizes)
                 if nonzero(x_dot) else None)
jvp_rules[dynamic_slice_p] = dynamic_slice_jvp
def dynamic_slice_transpose(ct, x, *idx, slice_sizes):   # x̄ = zeros with ct at [i:i+n]
    zeros = full(x.aval.shape, 0, x.aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)
transpose_rules[dynamic_slice_p] = dynamic_slice_transpose
def _start_vectors(idx, idx_dims, size: int):
    """The scalar start indices as index vectors [B, N] (row b: member b's starts)."""
    return concatenate([broadcast_in_dim(i, (size, 1), () if d is None else (0,))
                        for i, d in zip(idx, idx_dims, strict=True)], 1)
def _zero_index(idx):
    return np.zeros((), _aval(idx[0]).dtype if idx else dtypes.default_int_dtype())
def dynamic_slice_batch(vals, dims, *, slice_sizes):
    (x, *idx), (xd, *idx_dims) = vals, dims
    size = next(_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    if all(d is None for d in idx_dims):               # one block for all: take the whole
        x = bdim_at_front(x, xd, size)                 # batch axis, starting at 0
        return dynamic_slice_p.bind(x, _zero_index(idx), *idx,
                                    slice_sizes=(size,) + slice_sizes), 0
    # batched starts: one gathered window per member; CLIP is dynamic_slice's clamping
    from fnad.primitives import indexing as ix
    starts = _start_vectors(idx, idx_dims, size)       # [B, N]
    window = tuple(range(1, len(slice_sizes) + 1))
    if xd is None:                                     # every member reads the same x
        dn = ix.GatherDimensionNumbers(window, (), tuple(range(len(slice_sizes))))
        return ix.gather(x, starts, dn, slice_sizes, mode=ix.GatherScatterMode.CLIP), 0
    dn = ix.GatherDimensionNumbers(window, (), window, operand_batching_dims=(0,),
                                   start_indices_batching_dims=(0,))
    return ix.gather(moveaxis(x, xd, 0), starts, dn, (1,) + slice_sizes,   # [B, *slice_sizes]
                     unique_indices=True, mode=ix.GatherScatterMode.CLIP), 0
batch_rules[dynamic_slice_p] = dynamic_slice_batch


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """dynamic_slice along one `axis`: operand[..., start:start+slice_size, ...]."""
    shape = get_aval(operand).shape
    axis = _axis("dynamic_slice_in_dim", axis, len(shape))
    starts, sizes, allow = [0] * len(shape), list(shape), [False] * len(shape)
    starts[axis], sizes[axis] = start_index, operator.index(slice_size)
    allow[axis] = allow_negative_indices
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """operand[..., index, ...] along `axis` with a (possibly traced) index."""
    axis = _axis("dynamic_index_in_dim", axis, get_aval(operand).ndim)
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


# ---- dynamic_update_slice --------------------------------------------------------------
dynamic_update_slice_p = Primitive("dynamic_update_slice")
def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    """`operand` with the block at `start_indices` replaced by `update` (clamped as in
    dynamic_slice so that the block always lies inside `operand`)."""
    idx = _dynamic_indices("dynamic_update_slice", operand, start_indices,
                           allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *idx)

def dynamic_update_slice_abstract_eval(x, update, *idx):
    _check_index_operands("dynamic_update_slice", x, idx)
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape, strict=True)):
        raise shape_error("dynamic_update_slice", f"update of shape {update.shape} must have "
                                                  f"the rank of the operand of shape "
                                                  f"{x.shape} and fit inside it")
    if update.dtype != x.dtype:
        raise shape_error("dynamic_update_slice", f"operand and update must have the same "
                                                  f"dtype, got {x.dtype.name} and "
                                                  f"{update.dtype.name}")
    return ShapedArray(x.shape, x.dtype, x.weak_type and update.weak_type)
abstract_eval_rules[dynamic_update_slice_p] = dynamic_update_slice_abstract_eval
def dynamic_update_slice_jvp(primals, tangents):         # d dus(x, u) = dus(dx, du)
    x, u, *idx = primals
    x_dot, u_dot = tangents[:2]
    return (dynamic_update_slice_p.bind(x, u, *idx),
            dynamic_update_slice_p.bind(_instantiate(x_dot), _instantiate(u_dot), *idx))
jvp_rules[dynamic_update_slice_p] = dynamic_update_slice_jvp
def dynamic_update_slice_transpose(ct, x, u, *idx):      # x̄ = ct with the block zeroed; ū = block
    u_aval = _aval(u)
    x_bar = u_bar = None
    if is_undefined(x):
        x_bar = dynamic_update_slice_p.bind(ct, full(u_aval.shape, 0, get_aval(ct).dtype), *idx)
    if is_undefined(u):
        u_bar = dynamic_slice_p.bind(ct, *idx, slice_sizes=u_aval.shape)
    return [x_bar, u_bar] + [None] * len(idx)
transpose_rules[dynamic_update_slice_p] = dynamic_update_slice_transpose
def dynamic_update_slice_batch(vals, dims):
    (x, u, *idx), (xd, ud, *idx_dims) = vals, dims
    size = next(_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    x, u = bdim_at_front(x, xd, size), bdim_at_front(u, ud, size)   # [B, ...] each
    if all(d is None for d in idx_dims):               # the same block in every member
        return dynamic_update_slice_p.bind(x, u, _zero_index(idx), *idx), 0
    # batched starts: a scatter of one window per member (batching dim 0 pairs member b's
    # starts with x[b], so windows never collide); CLIP is the clamping
    from fnad.primitives import indexing as ix
    window = tuple(range(1, len(idx) + 1))
    dn = ix.ScatterDimensionNumbers(window, (), window, operand_batching_dims=(0,),
                                    scatter_indices_batching_dims=(0,))
    return ix.scatter(x, _start_vectors(idx, idx_dims, size), u, dn, indices_are_sorted=True,
                      unique_indices=True, mode=ix.GatherScatterMode.CLIP), 0
batch_rules[dynamic_update_slice_p] = dynamic_update_slice_batch


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """dynamic_update_slice at `start_index` along one `axis` (0 along the others)."""
    ndim = get_aval(operand).ndim
    axis = _axis("dynamic_update_slice_in_dim", axis, ndim)
    starts, allow = [0] * ndim, [False] * ndim
    starts[axis], allow[axis] = start_index, allow_negative_indices
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """Replace operand[..., index, ...] along `axis` by `update` (with or without that dim)."""
    ndim = get_aval(operand).ndim
    axis = _axis("dynamic_update_index_in_dim", axis, ndim)
    if get_aval(update).ndim + 1 == ndim:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# ---- iota ------------------------------------------------------------------------------
iota_p = Primitive("iota")
def iota(dtype, size: int):
    """[0, 1, ..., size - 1] as `dtype`."""
    return broadcasted_iota(dtype, (size,), 0)

def broadcasted_iota(dtype, shape, dimension: int):
    """An array of `shape` whose entries are their index along `dimension`."""
    shape = _ints(shape)
    return iota_p.bind(dtype=dtypes.canonicalize_dtype(dtype), shape=shape,
                       dimension=_axis("broadcasted_iota", dimension, len(shape)))

def iota_abstract_eval(*, dtype, shape, dimension):
    check_kind("iota", ShapedArray((), dtype), NUM)
    if any(d < 0 for d in shape) or not 0 <= dimension < len(shape):
        raise shape_error("iota", f"need a non-negative shape and 0 <= dimension < rank, got "
                                  f"shape {shape} and dimension {dimension}")
    return ShapedArray(shape, dtype)
abstract_eval_rules[iota_p] = iota_abstract_eval
jvp_rules[iota_p] = no_tangent_jvp(iota_p)               # no inputs: nothing to differentiate

"""Contractions: dot_general (and the lax wrappers dot and batch_matmul built on it).

dot_general contracts `lhs` and `rhs` over pairs of dimensions and maps over
shared batch dimensions. Its output dimensions are, in order: the batch
dimensions, lhs's free dimensions, rhs's free dimensions. It is bilinear: the
JVP is a sum of two dot_generals, and each operand's transpose is a
dot_general of the cotangent with the other operand followed by a transpose. Under
vmap the mapped axis becomes a dot batch dim (both operands mapped) or a free dim of
the one mapped operand.
"""
from __future__ import annotations

import enum
import functools

import numpy as np

from fnad import dtypes
from fnad.config import config
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives._util import ANY, add_tangents, check_kind

__all__ = ["Precision", "batch_matmul", "dot", "dot_general"]


class Precision(enum.Enum):
    """lax.Precision: accuracy of float32 matmuls on accelerators (no effect on CPU)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_STRINGS.get(value)

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


_PRECISION_STRINGS = {
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT,
}


def _one_precision(p) -> Precision:
    if isinstance(p, Precision):
        return p
    if isinstance(p, str) and p in _PRECISION_STRINGS:
        return _PRECISION_STRINGS[p]
    name = getattr(p, "name", None)                   # jax.lax.Precision members
    if isinstance(name, str) and name in Precision.__members__:
        return Precision[name]
    raise ValueError(f"dot_general: precision must be None, a lax.Precision, one of "
                     f"{sorted(_PRECISION_STRINGS)} or a pair of those; got {p!r}")


def canonicalize_precision(precision):
    """None, a pair (Precision, Precision), or a dot-algorithm preset name (as JAX)."""
    if precision is None:
        default = config.jax_default_matmul_precision
        if default is None:
            return None
        return (_one_precision(default),) * 2 if default in _PRECISION_STRINGS else default
    if isinstance(precision, (list, tuple)):
        if len(precision) != 2:
            raise ValueError(f"dot_general: a precision pair must have 2 entries, got "
                             f"{precision!r}")
        return (_one_precision(precision[0]), _one_precision(precision[1]))
    return (_one_precision(precision),) * 2


def _int_tuple(name: str, what: str, dims) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in dims)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of ints, got {dims!r}") from None


def _bit_width(dt: np.dtype) -> int:
    if dtypes.is_inexact(dt):
        return dtypes.finfo(dt).bits
    if dtypes.is_int(dt):
        return dtypes.iinfo(dt).bits
    return 1


@functools.cache
def _type_properties(dt: np.dtype) -> tuple:
    """XLA's HigherPrecisionType order: complex > more exponent > more mantissa > wider."""
    real = np.finfo(dt).dtype if dtypes.is_complex(dt) else dt
    fl = dtypes.is_float(real)
    return (dtypes.is_complex(dt), dtypes.finfo(real).maxexp if fl else -1,
            dtypes.finfo(real).nmant if fl else -1, _bit_width(real),
            not (dtypes.is_int(real) and real.kind == "u"))


def dot_general_result_dtype(lhs_dtype, rhs_dtype, preferred_element_type) -> np.dtype:
    """The output dtype of dot_general (JAX's rule; the numpy backend uses it too)."""
    if lhs_dtype == rhs_dtype and (preferred_element_type is None
                                   or preferred_element_type == lhs_dtype):
        return np.dtype(lhs_dtype)
    lp, rp = _type_properties(lhs_dtype), _type_properties(rhs_dtype)
    if lp > rp:
        result = lhs_dtype
    elif rp > lp:
        result = rhs_dtype
    elif lhs_dtype != rhs_dtype:
        raise shape_error("dot_general", f"argument type error: {lhs_dtype.name}, "
                                         f"{rhs_dtype.name}")
    else:
        result = lhs_dtype
    if preferred_element_type is None or preferred_element_type == result:
        return np.dtype(result)
    if (not dtypes.is_float(result)
            and _bit_width(preferred_element_type) < _bit_width(result)):
        raise shape_error("dot_general", f"preferred_element_type must not be narrower than "
                                         f"the original type, got preferred_element_type of "
                                         f"{preferred_element_type.name} for result type of "
                                         f"{np.dtype(result).name}")
    return preferred_element_type


# ---- dot_general ------------------------------------------------------------------------
dot_general_p = Primitive("dot_general")
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contract lhs and rhs; dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch)). Output dims: batch, lhs free, rhs free (as jax.lax)."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting_dims, "
                        "rhs_contracting_dims), (lhs_batch_dims, rhs_batch_dims)), got "
                        f"{dimension_numbers!r}") from None
    what = "each entry of dimension_numbers"
    dnums = ((_int_tuple("dot_general", what, lc), _int_tuple("dot_general", what, rc)),
             (_int_tuple("dot_general", what, lb), _int_tuple("dot_general", what, rb)))
    pet = (None if preferred_element_type is None
           else dtypes.canonicalize_dtype(preferred_element_type))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dnums,
                              precision=canonicalize_precision(precision),
                              preferred_element_type=pet)


def _check_side(side: str, aval: ShapedArray, c: tuple, b: tuple) -> None:
    """Contracting dims `c` and batch dims `b` of one operand: in range, distinct, disjoint."""
    dims = c + b
    if not dims or (min(dims) >= 0 and max(dims) < aval.ndim and len(set(dims)) == len(dims)):
        return                                         # the fast path: all is well
    for kind, d in (("contracting", c), ("batch", b)):
        if any(not 0 <= i < aval.ndim for i in d):
            raise shape_error("dot_general", f"{side} {kind} dimensions {d} must be "
                                             f"nonnegative and less than the rank of {side} "
                                             f"(shape {aval.shape}, rank {aval.ndim})")
        if len(set(d)) != len(d):
            raise shape_error("dot_general", f"{side} {kind} dimensions must be distinct, "
                                             f"got {d}")
    raise shape_error("dot_general", f"{side} batch dimensions {b} and contracting "
                                     f"dimensions {c} must be disjoint")


def dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision,
                              preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    check_kind("dot_general", lhs, ANY, " (lhs)")
    check_kind("dot_general", rhs, ANY, " (rhs)")
    _check_side("lhs", lhs, lc, lb)
    _check_side("rhs", rhs, rc, rb)
    if len(lb) != len(rb):
        raise shape_error("dot_general", f"requires equal numbers of lhs_batch and rhs_batch "
                                         f"dimensions, got lhs_batch {lb} and rhs_batch {rb}")
    if len(lc) != len(rc):
        raise shape_error("dot_general", f"requires equal numbers of lhs and rhs contracting "
                                         f"dimensions, got {lc} and {rc}")
    lbs, rbs = tuple(lhs.shape[d] for d in lb), tuple(rhs.shape[d] for d in rb)
    if lbs != rbs:
        raise shape_error("dot_general", f"batch dimensions must have the same sizes: lhs "
                                         f"{lhs.shape} batch dims {lb} have sizes {lbs}, rhs "
                                         f"{rhs.shape} batch dims {rb} have sizes {rbs}")
    lcs, rcs = tuple(lhs.shape[d] for d in lc), tuple(rhs.shape[d] for d in rc)
    if lcs != rcs:
        raise shape_error("dot_general", f"contracting dimensions must have the same sizes: "
                                         f"lhs {lhs.shape} contracting dims {lc} have sizes "
                                         f"{lcs}, rhs {rhs.shape} contracting dims {rc} have "
                                         f"sizes {rcs}")
    dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    lf = tuple(s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb)  # free dims
    rf = tuple(s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb)
    weak = preferred_element_type is None and lhs.weak_type and rhs.weak_type
    return ShapedArray(lbs + lf + rf, dtype, weak)
abstract_eval_rules[dot_general_p] = dot_general_abstract_eval
def dot_general_jvp(primals, tangents, **params):      # d(l·r) = dl·r + l·dr
    (lhs, rhs), (lhs_dot, rhs_dot) = primals, tangents
    out = dot_general_p.bind(lhs, rhs, **params)
    if not dtypes.is_inexact(get_aval(out).dtype):
        return out, None
    return out, add_tangents(dot_general_p.bind(lhs_dot, rhs, **params) if nonzero(lhs_dot)
                             else None,
                             dot_general_p.bind(lhs, rhs_dot, **params) if nonzero(rhs_dot)
                             else None)
jvp_rules[dot_general_p] = dot_general_jvp
def _ranges_like(*lists):
    start, out = 0, []
    for x in lists:
        out.append(tuple(range(start, start + len(x))))
        start += len(x)
    return out
def _dot_general_transpose_lhs(ct, x_aval, y, *, dimension_numbers, precision,
                               preferred_element_type, swap_ans=False):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    y_ndim = get_aval(y).ndim
    x_kept = [i for i in range(x_aval.ndim) if i not in x_contract and i not in x_batch]
    y_kept = [i for i in range(y_ndim) if i not in y_contract and i not in y_batch]
    if swap_ans:                                       # ct dims: batch, y kept, x kept
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:                                              # ct dims: batch, x kept, y kept
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(y_batch)))
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract, kind="stable")]
    unsorted = list(x_batch) + x_kept + x_contract_by_y   # dims of the dot_general below
    out_axes = tuple(int(a) for a in np.argsort(unsorted))
    x_bar = dot_general_p.bind(ct, y, dimension_numbers=dims, precision=precision,
                               preferred_element_type=preferred_element_type)
    if out_axes != tuple(range(len(out_axes))):
        from fnad.primitives.shape_ops import transpose
        x_bar = transpose(x_bar, out_axes)
    if get_aval(x_bar).dtype != x_aval.dtype:
        from fnad.primitives.logic import convert_element_type
        if dtypes.is_complex(get_aval(x_bar).dtype) and not dtypes.is_complex(x_aval.dtype):
            from fnad.primitives.elementwise import real
            x_bar = real(x_bar)
        x_bar = convert_element_type(x_bar, x_aval.dtype, x_aval.weak_type)
    return x_bar
def dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, precision,
                          preferred_element_type):
    # l̄ = ct·rᵀ over r's free dims, r̄ = lᵀ·ct over l's free dims (each permuted back)
    (lc, rc), (lb, rb) = dimension_numbers
    params = dict(precision=precision, preferred_element_type=preferred_element_type)
    lhs_bar = rhs_bar = None
    if is_undefined(lhs):
        lhs_bar = _dot_general_transpose_lhs(ct, lhs.aval, rhs,
                                             dimension_numbers=dimension_numbers, **params)
    if is_undefined(rhs):
        swapped = ((rc, lc), (rb, lb))
        rhs_bar = _dot_general_transpose_lhs(ct, rhs.aval, lhs, dimension_numbers=swapped,
                                             swap_ans=True, **params)
    return [lhs_bar, rhs_bar]
transpose_rules[dot_general_p] = dot_general_transpose
def _bump(dims, b: int) -> tuple[int, ...]:
    """Unbatched dim numbers renumbered for an operand with a batch axis inserted at b."""
    return tuple(d + (d >= b) for d in dims)
def dot_general_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type):
    (lhs, rhs), (ld, rd) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    if ld is not None and rd is not None:              # both mapped: a new leading dot batch dim
        lc, rc, lb, rb = _bump(lc, ld), _bump(rc, rd), (ld,) + _bump(lb, ld), (rd,) + _bump(rb, rd)
        out_dim = 0
    elif ld is not None:                               # one more lhs free dim
        lc, lb = _bump(lc, ld), _bump(lb, ld)
        free = [d for d in range(get_aval(lhs).ndim) if d not in lc and d not in lb]
        out_dim = len(lb) + free.index(ld)             # out: batch, lhs free, rhs free
    else:                                              # one more rhs free dim
        rc, rb = _bump(rc, rd), _bump(rb, rd)
        free = [d for d in range(get_aval(rhs).ndim) if d not in rc and d not in rb]
        out_dim = get_aval(lhs).ndim - len(lc) + free.index(rd)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)),
                             precision=precision, preferred_element_type=preferred_element_type)
    return out, out_dim
batch_rules[dot_general_p] = dot_general_batch


def dot(lhs, rhs, precision=None, preferred_element_type=None, *, dimension_numbers=None):
    """Vector/matrix dot product (lax.dot): contracts lhs's last dim with rhs's first.

    lhs and rhs have rank 1 or 2: [N]·[N] -> [], [M,N]·[N] -> [M], [M,K]·[K,N] -> [M,N].
    With `dimension_numbers` it is dot_general.
    """
    if dimension_numbers is None:
        ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise shape_error("dot", f"incompatible shapes for dot: got {ls} and {rs} "
                                     "(lhs and rhs must have rank 1 or 2 and lhs's last "
                                     "dimension must equal rhs's first; use dot_general "
                                     "otherwise)")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix multiplication: [..., M, K] @ [..., K, N] -> [..., M, N]."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    if min(len(ls), len(rs)) < 2:
        raise shape_error("batch_matmul", f"arguments must be at least 2D, got shapes {ls} "
                                          f"and {rs}")
    if len(ls) != len(rs):
        raise shape_error("batch_matmul", f"arguments must have the same rank, got shapes "
                                          f"{ls} and {rs}")
    batch = tuple(range(len(ls) - 2))
    return dot_general(lhs, rhs, (((len(ls) - 1,), (len(rs) - 2,)), (batch, batch)),
                       precision=precision)

"""Convolutions: conv_general_dilated, and the lax wrappers built on it (conv,
conv_with_general_padding, conv_transpose, conv_general_dilated_patches).

conv_general_dilated is XLA's convolution. In the canonical layout, lhs [N, C, *S], rhs
[O, I, *K] and out [N', O, *Y] (`dimension_numbers` says where each of these dims sits in
the actual arrays), per spatial dim:

    out[n, o, y] = Σ_{i, k} lhsP[n, g·I + i, y·stride + k·rhs_dilation] · rhs[o, i, k]

where lhsP is lhs dilated by `lhs_dilation` (zeros between its elements) and padded by
`padding` (a negative pad crops), and g is o's feature group: with feature_group_count G,
C = G·I, and the output features O split into G groups, group-major. With
batch_group_count B (only one of G and B may exceed 1), the batch N = B·N' splits into B
groups, group-major, and output feature group b sees batch group b only: N' = N / B.
Spatial sizes: Y = (dilated(S) + lo + hi - dilated(K)) // stride + 1, or 0 when the
window does not fit; dilated(n) = (n - 1)·d + 1.

It is bilinear: the JVP is a sum of two convolutions. Each operand's transpose is a
convolution too (derived in the comments of `_transpose_lhs` / `_transpose_rhs`): the
cotangent correlated with the flipped kernel for lhs, lhs correlated with the cotangent
for rhs, the roles of strides and dilations exchanged, and feature groups turned into
batch groups (and back). Under vmap the mapped axis joins lhs's batch, rhs's output
features, or, both mapped, becomes more groups.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_undefined, jvp_rules, nonzero, shape_error, transpose_rules)
from fnad.primitives import shape_ops as so
from fnad.primitives._util import ANY, add_tangents, check_kind
from fnad.primitives.linalg import canonicalize_precision, dot_general_result_dtype

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv",
           "conv_dimension_numbers", "conv_general_dilated", "conv_general_dilated_local",
           "conv_general_dilated_patches", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose",
           "conv_transpose_shape_tuple", "conv_with_general_padding", "padtype_to_pads"]


class ConvDimensionNumbers(NamedTuple):
    """Where the canonical dims sit: lhs_spec = (batch, feature, spatial...) dims of lhs,
    rhs_spec = (out feature, in feature, spatial...) of rhs, out_spec = (batch, feature,
    spatial...) of the output (jax.lax.ConvDimensionNumbers)."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


# what conv_general_dilated's `dimension_numbers` may be (jax.lax's name for the union)
ConvGeneralDilatedDimensionNumbers = None | ConvDimensionNumbers | tuple[str, str, str]


def _dilate(n: int, d: int) -> int:
    return 0 if n == 0 else 1 + d * (n - 1)


# ---- arguments ----------------------------------------------------------------------------
def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """dimension_numbers as a ConvDimensionNumbers (jax.lax.conv_dimension_numbers).

    None is the default layout (lhs NC..., rhs OI..., out NC...); a triple of strings such
    as ("NHWC", "HWIO", "NHWC") names each array's dims (N, C / O, I, and one letter per
    spatial dim, ordered as in rhs's string); a ConvDimensionNumbers is checked and kept.
    """
    nl, nr = len(lhs_shape), len(rhs_shape)
    if nl != nr:
        raise shape_error("conv_general_dilated", f"lhs and rhs must have the same rank, got "
                                                  f"shapes {tuple(lhs_shape)} and "
                                                  f"{tuple(rhs_shape)}")
    if nl < 2:
        raise shape_error("conv_general_dilated", f"lhs and rhs must have rank at least 2, got "
                                                  f"shapes {tuple(lhs_shape)} and "
                                                  f"{tuple(rhs_shape)}")
    if dimension_numbers is None:
        iota = tuple(range(nl))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        dn = ConvDimensionNumbers(*(tuple(operator.index(d) for d in s)
                                    for s in dimension_numbers))
        for which, spec in zip(("lhs_spec", "rhs_spec", "out_spec"), dn):
            if sorted(spec) != list(range(nl)):
                raise TypeError(f"conv_general_dilated: dimension_numbers.{which} must be a "
                                f"permutation of range({nl}), got {spec}")
        return dn
    dn = ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    for which, spec in zip(("lhs", "rhs", "out"), dimension_numbers):
        if len(spec) != nl:
            raise TypeError(f"conv_general_dilated: the {which} spec {spec!r} has "
                            f"{len(spec)} dimensions, the arrays have rank {nl}")
    return dn


def conv_general_permutations(dimension_numbers) -> tuple[tuple, tuple, tuple]:
    """The dim numbers named by a triple of spec strings such as ("NHWC", "HWIO", "NHWC"):
    (lhs, rhs, out) as (batch, feature, spatial...), spatial dims in rhs's order
    (jax.lax.conv_general_permutations)."""
    try:
        lhs_s, rhs_s, out_s = dimension_numbers
        ok = all(isinstance(s, str) for s in (lhs_s, rhs_s, out_s))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TypeError("conv_general_dilated: dimension_numbers must be None, a "
                        "ConvDimensionNumbers or a triple of strings such as "
                        f"('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    pairs = (("lhs", lhs_s, "NC"), ("rhs", rhs_s, "OI"), ("out", out_s, "NC"))
    for which, spec, (a, b) in pairs:
        if spec.count(a) != 1 or spec.count(b) != 1:
            raise TypeError(f"conv_general_dilated: the {which} spec {spec!r} must contain "
                            f"'{a}' and '{b}' once each")
        if len(set(spec)) != len(spec):
            raise TypeError(f"conv_general_dilated: the {which} spec {spec!r} repeats a "
                            "dimension")
    spatial = [set(s) - set(chars) for _, s, chars in pairs]
    if not spatial[0] == spatial[1] == spatial[2]:
        raise TypeError(f"conv_general_dilated: the specs {dimension_numbers!r} must name the "
                        "same spatial dimensions")
    order = [c for c in rhs_s if c not in "OI"]          # spatial dims in rhs's order

    def spec(s: str, chars: str) -> tuple:
        return (s.index(chars[0]), s.index(chars[1])) + tuple(s.index(c) for c in order)
    return spec(lhs_s, "NC"), spec(rhs_s, "OI"), spec(out_s, "NC")


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list:
    """The (lo, hi) pads of each dim for the padding "SAME", "SAME_LOWER" or "VALID"
    (jax.lax.padtype_to_pads): SAME gives ceil(n / stride) outputs, the extra pad at the
    end (at the start for SAME_LOWER); VALID pads nothing."""
    if not isinstance(padding, str):
        raise TypeError(f"padtype_to_pads: padding must be a string, got {padding!r}")
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padtype_to_pads: unknown padding {padding!r}; expected 'SAME', "
                         "'SAME_LOWER' or 'VALID'")
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        total = max(0, (-(-n // s) - 1) * s + w - n)
        small, big = total // 2, total - total // 2
        pads.append((small, big) if kind == "SAME" else (big, small))
    return pads


def _ints(name: str, what: str, values, n: int) -> tuple[int, ...]:
    try:
        out = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of ints, got {values!r}") from None
    if len(out) != n:
        raise shape_error(name, f"{what} must have one entry per spatial dimension ({n}), "
                                f"got {values!r}")
    return out


def _pads(name: str, padding, n: int) -> tuple[tuple[int, int], ...]:
    try:
        pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence "
                        f"of (low, high) int pairs, got {padding!r}") from None
    if len(pads) != n:
        raise shape_error(name, f"padding must have one (low, high) pair per spatial "
                                f"dimension ({n}), got {padding!r}")
    return pads


# ---- conv_general_dilated -----------------------------------------------------------------
conv_general_dilated_p = Primitive("conv_general_dilated")
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General n-d convolution with strides, padding, dilations, groups (as jax.lax).

    `padding` is 'SAME', 'SAME_LOWER', 'VALID' or a (low, high) pair per spatial dim;
    `lhs_dilation` > 1 is a transposed ("fractionally strided") convolution,
    `rhs_dilation` > 1 an atrous one."""
    name = "conv_general_dilated"
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    n = len(ls) - 2
    strides = _ints(name, "window_strides", window_strides, n)
    lhs_d = (1,) * n if lhs_dilation is None else _ints(name, "lhs_dilation", lhs_dilation, n)
    rhs_d = (1,) * n if rhs_dilation is None else _ints(name, "rhs_dilation", rhs_dilation, n)
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_d):
            raise ValueError(f"{name}: string padding {padding!r} is not defined for a "
                             f"transposed convolution (lhs_dilation {lhs_d}); give the pads, "
                             "or use conv_transpose")
        window = [_dilate(rs[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_d)]
        if any(s <= 0 for s in strides):
            raise shape_error(name, f"window_strides must be positive, got {strides}")
        padding = padtype_to_pads([ls[d] for d in dn.lhs_spec[2:]], window, strides, padding)
    pet = (None if preferred_element_type is None
           else dtypes.canonicalize_dtype(preferred_element_type))
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=strides, padding=_pads(name, padding, n), lhs_dilation=lhs_d,
        rhs_dilation=rhs_d, dimension_numbers=dn,
        feature_group_count=operator.index(feature_group_count),
        batch_group_count=operator.index(batch_group_count),
        precision=canonicalize_precision(precision), preferred_element_type=pet)


def conv_out_spatial(in_sizes, window, *, window_strides, padding, lhs_dilation,
                     rhs_dilation) -> tuple[int, ...]:
    """The output's spatial sizes (0 where the dilated window does not fit)."""
    out = []
    for n, k, s, (lo, hi), ld, rd in zip(in_sizes, window, window_strides, padding,
                                         lhs_dilation, rhs_dilation):
        span = _dilate(n, ld) + lo + hi - _dilate(k, rd)
        out.append(max(0, span // s + 1) if span >= 0 else 0)
    return tuple(out)


def conv_general_dilated_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation,
                                       rhs_dilation, dimension_numbers, feature_group_count,
                                       batch_group_count, precision, preferred_element_type):
    name = "conv_general_dilated"
    check_kind(name, lhs, ANY, " (lhs)")
    check_kind(name, rhs, ANY, " (rhs)")
    if lhs.dtype != rhs.dtype:
        raise shape_error(name, f"requires lhs and rhs to have the same dtype, got "
                                f"{lhs.dtype.name} and {rhs.dtype.name}")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise shape_error(name, f"lhs and rhs must have the same rank, at least 2, got shapes "
                                f"{lhs.shape} and {rhs.shape}")
    lspec, rspec, ospec = dimension_numbers
    for what, vals in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                       ("rhs_dilation", rhs_dilation)):
        if any(v <= 0 for v in vals):
            raise shape_error(name, f"{what} must be positive, got {vals}")
    G, B = feature_group_count, batch_group_count
    if G < 1 or B < 1:
        raise shape_error(name, f"feature_group_count and batch_group_count must be positive, "
                                f"got {G} and {B}")
    if G > 1 and B > 1:
        raise shape_error(name, f"at most one of feature_group_count ({G}) and "
                                f"batch_group_count ({B}) may exceed 1")
    N, C = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    O, I = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    if C % G:
        raise shape_error(name, f"feature_group_count {G} must divide lhs's feature dimension "
                                f"(size {C}, lhs shape {lhs.shape})")
    if C // G != I:
        raise shape_error(name, f"lhs's feature dimension (size {C}) divided by "
                                f"feature_group_count ({G}) must equal rhs's input feature "
                                f"dimension (size {I}); shapes {lhs.shape} and {rhs.shape}")
    if O % G:
        raise shape_error(name, f"feature_group_count {G} must divide rhs's output feature "
                                f"dimension (size {O}, rhs shape {rhs.shape})")
    if N % B or O % B:
        raise shape_error(name, f"batch_group_count {B} must divide lhs's batch dimension "
                                f"(size {N}) and rhs's output feature dimension (size {O})")
    spatial = conv_out_spatial([lhs.shape[d] for d in lspec[2:]],
                               [rhs.shape[d] for d in rspec[2:]], window_strides=window_strides,
                               padding=padding, lhs_dilation=lhs_dilation,
                               rhs_dilation=rhs_dilation)
    canonical = (N // B, O) + spatial
    shape = [0] * lhs.ndim
    for dim, size in zip(ospec, canonical):
        shape[dim] = size
    dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    weak = preferred_element_type is None and lhs.weak_type and rhs.weak_type
    return ShapedArray(tuple(shape), dtype, weak)
abstract_eval_rules[conv_general_dilated_p] = conv_general_dilated_abstract_eval


def conv_general_dilated_jvp(primals, tangents, **params):   # d(l⋆r) = dl⋆r + l⋆dr
    (lhs, rhs), (lhs_dot, rhs_dot) = primals, tangents
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    if not dtypes.is_inexact(get_aval(out).dtype):
        return out, None
    return out, add_tangents(
        conv_general_dilated_p.bind(lhs_dot, rhs, **params) if nonzero(lhs_dot) else None,
        conv_general_dilated_p.bind(lhs, rhs_dot, **params) if nonzero(rhs_dot) else None)
jvp_rules[conv_general_dilated_p] = conv_general_dilated_jvp


# ---- moving a dim into another and back out (transposes and batching) ----------------------
def _merge(x, src: int, dst: int):
    """Dim `src` of x folded into dim `dst` (numbered as if src were gone), as its major
    part: the result has rank ndim - 1 and its dim dst has size x[src] · x[dst]."""
    shape = get_aval(x).shape
    perm = [d for d in range(len(shape)) if d != src]
    perm.insert(dst, src)
    if perm != sorted(perm):
        x = so.transpose(x, perm)
    sizes = [shape[d] for d in perm]
    return so.reshape(x, sizes[:dst] + [sizes[dst] * sizes[dst + 1]] + sizes[dst + 2:])


def _split(x, dim: int, major: int):
    """Dim `dim` of x split into (major, rest)."""
    shape = list(get_aval(x).shape)
    shape[dim:dim + 1] = [major, shape[dim] // major]
    return so.reshape(x, shape)


def _swap(spec: tuple) -> tuple:
    return (spec[1], spec[0]) + tuple(spec[2:])


def _spatial(shape, spec) -> list[int]:
    return [shape[d] for d in spec[2:]]


def _transpose_lhs(ct, lhs_aval, rhs, *, window_strides, padding, lhs_dilation,
                   rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                   precision, preferred_element_type):
    """l̄[n, c, x] = Σ_{o, y, k: y·s + k·rd = x·ld + lo} ct[n, o, y] · rhs[o, c, k].

    With ctD = ct dilated by s, that is Σ_k ctD[x·ld + lo - k·rd] · rhs[k]: with the kernel
    flipped (k' = K-1-k), a convolution of ctD padded by dilated(K) - 1 - lo in front,
    window stride ld, window dilation rd, input and output features exchanged. The pad
    at the end makes the output size S. Feature groups: the kernel's O = G·Og goes to
    (Og, G·I), so group g maps ct's features g·Og.. to l̄'s g·I..; batch groups are
    feature groups here, their result moved from the features back into the batch."""
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count
    groups = max(G, B)
    if groups > 1:                                    # O = groups·Og -> (Og, groups·I)
        rhs = _merge(_split(rhs, rspec[0], groups), rspec[0], rspec[1])
    window = _spatial(get_aval(rhs).shape, rspec)
    ct_sizes = _spatial(get_aval(ct).shape, ospec)
    in_sizes = _spatial(lhs_aval.shape, lspec)
    pads = []
    for n, k, y, s, (lo, _), ld, rd in zip(in_sizes, window, ct_sizes, window_strides,
                                           padding, lhs_dilation, rhs_dilation):
        before = _dilate(k, rd) - 1 - lo
        pads.append((before, _dilate(n, ld) + _dilate(k, rd) - 1 - _dilate(y, s) - before))
    flipped = so.rev(rhs, tuple(rspec[2:]))
    out = conv_general_dilated_p.bind(
        ct, flipped, window_strides=tuple(lhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=ConvDimensionNumbers(ospec, _swap(rspec), lspec),
        feature_group_count=groups, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type)
    if B > 1:                                         # features B·C -> batch B·N'
        out = _merge(_split(out, lspec[1], B), lspec[1], lspec[0])
    return _as_dtype(out, lhs_aval)


def _transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation,
                   rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                   precision, preferred_element_type):
    """r̄[o, c, k] = Σ_{n, y} lhsP[n, c, y·s + k·rd] · ct[n, o, y].

    A convolution of lhs, with its batch and feature dims exchanged, by ct as the kernel
    (ct's N its input features, its O the output features): output position k, window
    stride rd, window dilation s, lhs dilation ld, the same low pad; the high pad makes
    the output size K. lhs's feature groups (C = G·I, ct's O = G·Og) pair up as batch
    groups here, and batch groups (N = B·N', O = B·Og) as feature groups."""
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count
    in_sizes = _spatial(get_aval(lhs).shape, lspec)
    window = _spatial(rhs_aval.shape, rspec)
    ct_sizes = _spatial(get_aval(ct).shape, ospec)
    pads = []
    for n, k, y, s, (lo, _), ld, rd in zip(in_sizes, window, ct_sizes, window_strides,
                                           padding, lhs_dilation, rhs_dilation):
        pads.append((lo, _dilate(y, s) - _dilate(n, ld) + _dilate(k, rd) - 1 - lo))
    if math.prod(get_aval(ct).shape) == 0:            # no output: a zero gradient
        return so.full(rhs_aval.shape, 0, rhs_aval.dtype)
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=ConvDimensionNumbers(_swap(lspec), _swap(ospec), _swap(rspec)),
        feature_group_count=B, batch_group_count=G, precision=precision,
        preferred_element_type=preferred_element_type)
    return _as_dtype(out, rhs_aval)


def _as_dtype(x, aval: ShapedArray):
    if get_aval(x).dtype != aval.dtype:
        from fnad.primitives.logic import convert_element_type
        x = convert_element_type(x, aval.dtype, aval.weak_type)
    return x


def conv_general_dilated_transpose(ct, lhs, rhs, **params):
    lhs_bar = _transpose_lhs(ct, lhs.aval, rhs, **params) if is_undefined(lhs) else None
    rhs_bar = _transpose_rhs(ct, lhs, rhs.aval, **params) if is_undefined(rhs) else None
    return [lhs_bar, rhs_bar]
transpose_rules[conv_general_dilated_p] = conv_general_dilated_transpose


def conv_general_dilated_batch(vals, dims, *, dimension_numbers, feature_group_count,
                               batch_group_count, **params):
    """The mapped axis (size M) joins lhs's batch (lhs mapped), rhs's output features (rhs
    mapped), or both as M times as many groups, as the major part in each case, so that
    groups stay group-major; the output's batch or features are split again."""
    (lhs, rhs), (ld, rd) = vals, dims
    lspec, rspec, ospec = dimension_numbers
    G, B = feature_group_count, batch_group_count

    def bind(lhs, rhs, G, B):
        return conv_general_dilated_p.bind(lhs, rhs, dimension_numbers=dimension_numbers,
                                           feature_group_count=G, batch_group_count=B,
                                           **params)
    if ld is not None and rd is not None:
        M = get_aval(lhs).shape[ld]
        if B > 1:                                     # N = M·B·N': M·B batch groups
            out = bind(_merge(lhs, ld, lspec[0]), _merge(rhs, rd, rspec[0]), G, M * B)
        else:                                         # C = M·G·I: M·G feature groups
            out = bind(_merge(lhs, ld, lspec[1]), _merge(rhs, rd, rspec[0]), M * G, B)
        return _split(out, ospec[1], M), ospec[1]
    if ld is not None:                                # batch N -> (B, M, N') -> M·N'
        M = get_aval(lhs).shape[ld]
        if B > 1:
            x = _split(lhs, lspec[0] + (ld <= lspec[0]), B)     # (.., B, N', ..) and ld
            mapped = ld + (ld > lspec[0])
            x = _merge(x, mapped, lspec[0] + 1)                 # (.., B, M·N', ..)
            x = _merge(x, lspec[0], lspec[0])                   # (.., B·M·N', ..)
        else:
            x = _merge(lhs, ld, lspec[0])
        return _split(bind(x, rhs, G, B), ospec[0], M), ospec[0]
    M = get_aval(rhs).shape[rd]                       # features O -> (groups, M, Og)
    groups = max(G, B)
    if groups > 1:
        w = _split(rhs, rspec[0] + (rd <= rspec[0]), groups)
        mapped = rd + (rd > rspec[0])
        w = _merge(w, mapped, rspec[0] + 1)
        w = _merge(w, rspec[0], rspec[0])
        out = bind(lhs, w, G, B)                      # features (groups, M, Og)
        out = _split(_split(out, ospec[1], groups), ospec[1] + 1, M)
        return _merge(out, ospec[1], ospec[1] + 1), ospec[1]
    out = bind(lhs, _merge(rhs, rd, rspec[0]), G, B)
    return _split(out, ospec[1], M), ospec[1]
batch_rules[conv_general_dilated_p] = conv_general_dilated_batch


# ---- the wrappers ---------------------------------------------------------------------------
def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in the default layout (lhs NC..., rhs OI...), no dilation (lax.conv)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                               preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """Convolution in the default layout with dilations (lax.conv_with_general_padding)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}


def _conv_transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """The pads of a transposed convolution (kernel size k, stride s) that give s·n outputs
    for SAME and s·(n - 1) + max(k, s) for VALID, as jax.lax.conv_transpose."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or a sequence of "
                         f"(low, high) pairs, got {padding!r}")
    return lo, total - lo


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """Transposed convolution (lax.conv_transpose): lhs dilated by `strides`, then a
    convolution with stride 1. Default layouts are channels-last (NHWC, HWIO, NHWC);
    `transpose_kernel=True` flips the kernel and swaps its I and O dims, which makes this
    the gradient of conv_general_dilated with respect to its lhs."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    if dimension_numbers is None:
        if len(ls) not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"conv_transpose: no default dimension_numbers for rank "
                             f"{len(ls)}; give them")
        dimension_numbers = _TRANSPOSE_LAYOUTS[len(ls)]
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    n = len(ls) - 2
    strides = _ints("conv_transpose", "strides", strides, n)
    rhs_d = (1,) * n if rhs_dilation is None else _ints("conv_transpose", "rhs_dilation",
                                                         rhs_dilation, n)
    if isinstance(padding, str):
        window = [_dilate(rs[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_d)]
        padding = [_conv_transpose_pads(k, s, padding) for k, s in zip(window, strides)]
    if transpose_kernel:
        rhs = so.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(len(rs)))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = so.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * n, padding, lhs_dilation=strides,
                                rhs_dilation=rhs_d, dimension_numbers=dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with a kernel of spatial shape `filter_shape` would see
    (im2col; lax.conv_general_dilated_patches): output features C·prod(filter_shape), C
    major, the window's positions in row-major order. A convolution of lhs with a one-hot
    kernel, one feature group per input feature."""
    ls = get_aval(lhs).shape
    dn = conv_dimension_numbers(ls, ls, dimension_numbers)
    filter_shape = tuple(operator.index(k) for k in filter_shape)
    if len(filter_shape) != len(ls) - 2:
        raise shape_error("conv_general_dilated_patches", f"filter_shape {filter_shape} must "
                                                          f"have one size per spatial "
                                                          f"dimension ({len(ls) - 2})")
    C, K = ls[dn.lhs_spec[1]], math.prod(filter_shape)
    onehot = np.eye(K, dtype=get_aval(lhs).dtype).reshape((K, 1) + filter_shape)
    kernel = np.tile(onehot, (C,) + (1,) * (len(ls) - 1))      # [C·K, 1, *filter] in OI...
    perm = [0] * len(ls)                               # the kernel's canonical dims moved to
    for canon, dim in enumerate(dn.rhs_spec):          # where rhs_spec puts them
        perm[dim] = canon
    kernel = np.transpose(kernel, perm)
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation,
                                rhs_dilation, dn, feature_group_count=C, precision=precision,
                                preferred_element_type=preferred_element_type)



# ---- shapes ---------------------------------------------------------------------------------
def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1) -> tuple:
    """The output shape of a convolution of shapes in the default layout (lhs NC...,
    rhs OI...), `pads` a padding string or (low, high) pairs (jax.lax.conv_shape_tuple)."""
    n = len(lhs_shape) - 2
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    pads = _pads("conv_shape_tuple", pads, n)
    for size, (lo, hi) in zip(lhs_shape[2:], pads):
        if size + lo + hi < 0:
            raise ValueError(f"conv_shape_tuple: the negative padding {pads} is larger than "
                             f"the input's spatial shape {tuple(lhs_shape[2:])}")
    spatial = conv_out_spatial(lhs_shape[2:], rhs_shape[2:], window_strides=strides,
                               padding=pads, lhs_dilation=(1,) * n, rhs_dilation=(1,) * n)
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def _canonical(shape, spec) -> tuple:
    return tuple(shape[d] for d in spec)


def _in_layout(canonical, spec) -> tuple:
    shape = [0] * len(spec)
    for size, d in zip(canonical, spec):
        shape[d] = size
    return tuple(shape)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """The output shape of a convolution given spec strings (jax.lax's)."""
    lspec, rspec, ospec = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(_canonical(lhs_shape, lspec), _canonical(rhs_shape, rspec),
                           window_strides, padding)
    return _in_layout(out, ospec)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """The output shape of conv_transpose given spec strings (jax.lax's)."""
    lspec, rspec, ospec = conv_general_permutations(dimension_numbers)
    lc, rc = _canonical(lhs_shape, lspec), _canonical(rhs_shape, rspec)
    n = len(lc) - 2
    if isinstance(padding, str):
        padding = [_conv_transpose_pads(k, s, padding) for k, s in zip(rc[2:], window_strides)]
    spatial = conv_out_spatial(lc[2:], rc[2:], window_strides=(1,) * n,
                               padding=_pads("conv_transpose_shape_tuple", padding, n),
                               lhs_dilation=window_strides, rhs_dilation=(1,) * n)
    return _in_layout((lc[0], rc[0]) + spatial, ospec)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A convolution whose kernel differs at every output position (an unshared, "locally
    connected" layer; jax.lax.conv_general_dilated_local): rhs's spatial dims are the
    output's, its I dim the patch of each position, C·prod(filter_shape), C major as in
    conv_general_dilated_patches. The patches, then one product per output position."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dn, precision)
    lspec, rspec, ospec = dn
    n = len(ls) - 2
    spatial_p = tuple(ospec[2:])                       # patches: [*Y, N, I]
    p = so.transpose(patches, spatial_p + (ospec[0], ospec[1]))
    w = so.transpose(rhs, tuple(rspec[2:]) + (rspec[1], rspec[0]))     # [*Y, I, O]
    if get_aval(p).shape[:n] != get_aval(w).shape[:n]:
        raise shape_error("conv_general_dilated_local", f"rhs's spatial dims "
                                                        f"{get_aval(w).shape[:n]} must be the "
                                                        f"output's {get_aval(p).shape[:n]}")
    batch = tuple(range(n))
    from fnad.primitives.linalg import dot_general
    out = dot_general(p, w, (((n + 1,), (n,)), (batch, batch)), precision=precision)
    return so.transpose(out, tuple(int(d) for d in np.argsort(
        [ospec[2 + i] for i in range(n)] + [ospec[0], ospec[1]])))

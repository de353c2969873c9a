"""NumPy implementation of conv_general_dilated: unfold, then BLAS.

lhs goes to the canonical layout channels-last, [N, *S, C]; it is dilated (zeros between
its elements) and padded (a negative pad crops) into a buffer P. For each position k of the
window, the strided view P[:, k·rd : ... : stride, :] is the [N, *Y, C] slab every output
position reads at that kernel offset. A chunk of images at a time (its patches a few MB),
those slabs are copied side by side into a patch matrix [N·Y, K·C] (im2col), and one
matmul with the kernel as [K·C, O] gives the chunk's output: one GEMM with a long
contraction instead of K short ones. Groups are a batch dim of that matmul:
[groups, rows, K·I] @ [groups, K·I, Og]. float16/bfloat16 accumulate in float32,
as XLA's CPU backend does; integers accumulate in their own dtype (NumPy's matmul),
booleans in int32 (the result is any(lhs and rhs) over the window).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.linalg import _compute_dtype
from fnad.primitives import convolution as cv
from fnad.primitives.linalg import dot_general_result_dtype

_PATCH_BYTES = 8 << 20       # the patches of one chunk of images: a few MB, as BLAS likes


def _dilated_padded(x: np.ndarray, lhs_dilation, padding) -> np.ndarray:
    """x [N, *S, C] dilated along S and padded (negative pads crop)."""
    spatial = x.shape[1:-1]
    if any(d != 1 for d in lhs_dilation):
        sizes = [cv._dilate(n, d) for n, d in zip(spatial, lhs_dilation)]
        z = np.zeros((x.shape[0], *sizes, x.shape[-1]), x.dtype)
        z[(slice(None), *(slice(None, None, d) for d in lhs_dilation), slice(None))] = x
        x = z
    grow = [(0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding] + [(0, 0)]
    if any(g != (0, 0) for g in grow):
        x = np.pad(x, grow)
    crop = []
    for n, (lo, hi) in zip(x.shape[1:-1], padding):
        start = max(-lo, 0)
        crop.append(slice(start, max(start, n - max(-hi, 0))))
    return x[(slice(None), *crop, slice(None))]


def _conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count, precision,
                          preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lspec, rspec, ospec = dimension_numbers
    out_dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if out_dtype == np.bool_:                           # logical: any(a and b), via int32
        cdt = np.dtype(np.int32)
    x = np.transpose(lhs, (lspec[0], *lspec[2:], lspec[1])).astype(cdt, copy=False)
    w = np.transpose(rhs, (*rspec[2:], rspec[1], rspec[0])).astype(cdt, copy=False)
    N, C, O = x.shape[0], x.shape[-1], w.shape[-1]     # w: [*K, I, O]
    window = w.shape[:-2]
    out_sp = cv.conv_out_spatial([lhs.shape[d] for d in lspec[2:]], window,
                                 window_strides=window_strides, padding=padding,
                                 lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
    G, B = feature_group_count, batch_group_count
    groups, Nb = max(G, B), N // B
    I, Og = C // G, O // groups
    Kp, Yp = math.prod(window), math.prod(out_sp)
    if not (Nb and Yp and Og and I and Kp):             # nothing, or sums of nothing
        return _finish(np.zeros((Nb, *out_sp, O), cdt), ospec, out_dtype)
    out = np.empty((Nb, *out_sp, O), cdt)
    P = _dilated_padded(x, lhs_dilation, padding)
    P = P.reshape(B, Nb, *P.shape[1:])                  # batch groups first
    # the kernel as [groups, K·I, Og]: rows in the order of a patch's elements
    wg = w.reshape(Kp, I, groups, Og).transpose(2, 0, 1, 3).reshape(groups, Kp * I, Og)
    step = max(1, _PATCH_BYTES // (B * Yp * Kp * C * P.itemsize))   # images per chunk
    n = len(window)
    for n0 in range(0, Nb, step):
        n1 = min(Nb, n0 + step)
        patches = np.empty((B, n1 - n0, *out_sp, *window, C), cdt)
        if Kp <= Yp:                                    # per window position: all outputs
            for k in itertools.product(*map(range, window)):
                patches[(slice(None),) * (2 + n) + k] = P[(slice(None), slice(n0, n1), *(
                    slice(i * rd, i * rd + (y - 1) * s + 1, s)
                    for i, rd, y, s in zip(k, rhs_dilation, out_sp, window_strides)))]
        else:                                           # per output position: its window
            for y in itertools.product(*map(range, out_sp)):
                patches[(slice(None), slice(None)) + y] = P[(slice(None), slice(n0, n1), *(
                    slice(j * s, j * s + (k - 1) * rd + 1, rd)
                    for j, s, k, rd in zip(y, window_strides, window, rhs_dilation)))]
        rows = (n1 - n0) * Yp
        if G > 1:                                       # [rows, K, G, I] -> [G, rows, K·I]
            a = patches.reshape(rows, Kp, G, I).transpose(2, 0, 1, 3).reshape(G, rows, Kp * I)
        else:                                           # [B, rows, K·C]
            a = patches.reshape(B, rows, Kp * C)
        res = np.matmul(a, wg)                          # [groups, rows, Og]
        out[n0:n1] = res.transpose(1, 0, 2).reshape(n1 - n0, *out_sp, O)
    return _finish(out, ospec, out_dtype)


def _finish(out: np.ndarray, ospec, out_dtype) -> np.ndarray:
    """out [N', *Y, O] in the layout of `ospec`, in the output dtype."""
    n = out.ndim - 2
    out = out.transpose(0, n + 1, *range(1, n + 1))              # [N', O, *Y]
    out = np.transpose(out, tuple(int(d) for d in np.argsort(ospec)))
    if out_dtype == np.bool_:
        return np.ascontiguousarray(out != 0)
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


impl_rules[cv.conv_general_dilated_p] = _conv_general_dilated

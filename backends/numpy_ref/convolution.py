"""NumPy implementation of conv_general_dilated: unfold, then BLAS.

lhs goes to the canonical layout channels-last, [N, *S, C]; it is dilated (zeros between
its elements) and padded (a negative pad crops) into a buffer P. For each position k of the
window, the strided view P[:, k·rd : ... : stride, :] is the [N, *Y, C] slab every output
position reads at that kernel offset; one matmul per position with the kernel's [C, O]
slice at k, accumulated, gives the output (the window positions are few: 9 for a 3×3
kernel; a full im2col buffer would be K times the input). Groups are a batch dim of
those matmuls: [groups, M, I] @ [groups, I, Og]. float16/bfloat16 accumulate in float32,
as XLA's CPU backend does; integers accumulate in their own dtype (NumPy's matmul),
booleans in int32 (the result is any(lhs and rhs) over the window).
"""
from __future__ import annotations

import itertools

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.linalg import _compute_dtype
from fnad.primitives import convolution as cv
from fnad.primitives.linalg import dot_general_result_dtype


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
    M = Nb * int(np.prod(out_sp, dtype=np.int64))
    acc = np.zeros((groups, M, Og), cdt)               # [groups, N'·Y, Og]
    if M and Og and I and all(window):
        P = _dilated_padded(x, lhs_dilation, padding)
        for k in itertools.product(*(range(n) for n in window)):
            view = P[(slice(None),
                      *(slice(j * rd, j * rd + (y - 1) * s + 1, s)
                        for j, rd, y, s in zip(k, rhs_dilation, out_sp, window_strides)),
                      slice(None))]                     # [N, *Y, C]
            if B > 1:                                   # [B, N'·Y, C]
                a = view.reshape(B, M, C)
            else:                                       # [G, N·Y, I]
                a = view.reshape(M, G, I).transpose(1, 0, 2)
            acc += np.matmul(a, w[k].reshape(I, groups, Og).transpose(1, 0, 2))
    n = len(out_sp)
    out = acc.transpose(1, 0, 2).reshape(Nb, *out_sp, O)         # [N', *Y, O]
    out = out.transpose(0, n + 1, *range(1, n + 1))              # [N', O, *Y]
    out = np.transpose(out, tuple(int(d) for d in np.argsort(ospec)))
    if out_dtype == np.bool_:
        return np.ascontiguousarray(out != 0)
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


impl_rules[cv.conv_general_dilated_p] = _conv_general_dilated

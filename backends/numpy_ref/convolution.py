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
from typing import NamedTuple

import numpy as np

from fnad.backends.numpy_ref import impl_rules
from fnad.backends.numpy_ref.linalg import _compute_dtype
from fnad.primitives import convolution as cv
from fnad.primitives.linalg import dot_general_result_dtype

_PATCH_BYTES = 8 << 20       # the patches of one chunk of images: a few MB, as BLAS likes


class _Phase(NamedTuple):
    """The outputs y = first + period·m (m < count) of one spatial dim and the window taps
    that land on input elements for all of them: tap k reads element offsets[k] + step·m
    of the undilated input (out of range: a pad)."""
    first: int
    period: int
    count: int
    taps: tuple
    offsets: tuple
    step: int


def _phases(n: int, k: int, y: int, stride: int, lo: int, ld: int, rd: int) -> list:
    """One spatial dim's outputs split by which taps read input elements and not the holes
    of lhs's dilation: output y, tap j read the dilated, padded position y·stride + j·rd,
    input element (y·stride + j·rd - lo) / ld when that divides. With ld = 1 that is one
    phase with every tap; with ld > 1, period ld / gcd(stride, ld) phases, each with the
    taps of one residue: the zeros between the elements are never multiplied."""
    period = ld // math.gcd(stride, ld)
    step = period * stride // ld
    phases = []
    for first in range(min(period, y)):
        taps = [j for j in range(k) if (first * stride + j * rd - lo) % ld == 0]
        offsets = [(first * stride + j * rd - lo) // ld for j in taps]
        count = len(range(first, y, period))
        live = [j for j, a in zip(taps, offsets)                 # taps that ever read x
                if a + step * (count - 1) >= 0 and a < n]
        if live:
            offsets = [a for j, a in zip(taps, offsets) if j in live]
            phases.append(_Phase(first, period, count, tuple(live), tuple(offsets), step))
    return phases


def _spacing(p: _Phase) -> int:
    """The distance between the input elements of neighbouring taps (they are evenly
    spaced: the taps of one residue, less some at the ends)."""
    return p.offsets[1] - p.offsets[0] if len(p.offsets) > 1 else 1


def conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                         dimension_numbers, feature_group_count, batch_group_count, precision,
                         preferred_element_type, unfold=None, matmul=np.matmul,
                         conv_phase=None, scatter=None):
    """The convolution, phase by phase (`_phases`), im2col then matmul. `unfold(x, dims)`
    (x [B, N', *S, C], dims the phases of each spatial dim) returns
    `fill(n0, n1, phase)`, which gives the patches of images n0..n1 as a [B, rows, K·C]
    matrix (rows: image, then the phase's outputs; columns: the taps, then the features;
    zeros where a tap reads a pad), in whatever memory layout suits it; `matmul`
    multiplies [groups, rows, K·I] @ [groups, K·I, Og]; `conv_phase` (as _conv_phase)
    computes one phase's outputs with them. `scatter(out, x, w, padding, lhs_dilation,
    rhs_dilation)`, for an lhs-dilated convolution at window stride 1 in one group, may
    add all of out [N, *Y, O] (zeros) from its inputs instead (True where it did). The
    numba backend passes its own of all four."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lspec, rspec, ospec = dimension_numbers
    out_dtype = dot_general_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    cdt = _compute_dtype(out_dtype)
    if out_dtype == np.bool_:                           # logical: any(a and b), via int32
        cdt = np.dtype(np.int32)
    x = np.transpose(lhs, (lspec[0], *lspec[2:], lspec[1])).astype(cdt, copy=False)
    w = np.transpose(rhs, (*rspec[2:], rspec[1], rspec[0])).astype(cdt, copy=False)
    N, C, O = x.shape[0], x.shape[-1], w.shape[-1]     # x: [N, *S, C], w: [*K, I, O]
    in_sp, window = x.shape[1:-1], w.shape[:-2]
    out_sp = cv.conv_out_spatial(in_sp, window, window_strides=window_strides,
                                 padding=padding, lhs_dilation=lhs_dilation,
                                 rhs_dilation=rhs_dilation)
    G, B = feature_group_count, batch_group_count
    groups, Nb = max(G, B), N // B
    I, Og = C // G, O // groups
    dims = [_phases(*a) for a in zip(in_sp, window, out_sp, window_strides,
                                     (lo for lo, _ in padding), lhs_dilation, rhs_dilation)]
    covered = all(sum(p.count for p in d) == y for d, y in zip(dims, out_sp))
    scattered = (scatter is not None and groups == 1 and any(d > 1 for d in lhs_dilation)
                 and all(s == 1 for s in window_strides))
    out = (np.empty if covered and not scattered else np.zeros)((Nb, *out_sp, O), cdt)
    if not (Nb and Og and I) or (
            scattered and scatter(out, x, w, padding, lhs_dilation, rhs_dilation)):
        return _finish(out, ospec, out_dtype)                   # nothing, or all of it
    if not all(dims):                                   # sums of nothing
        return _finish(out, ospec, out_dtype)
    fill = (unfold or _unfold)(x.reshape(B, Nb, *in_sp, C), dims)    # batch groups first
    for phase in itertools.product(*dims):
        wp = w[np.ix_(*(p.taps for p in phase))] if len(phase) else w
        (conv_phase or _conv_phase)(out, fill, matmul, wp, phase, B, C, G, I, Og, groups,
                                    cdt.itemsize)
    return _finish(out, ospec, out_dtype)


def _unfold(x: np.ndarray, dims: list):
    """NumPy's patch filler: x padded once so that every phase's reads are in range (a
    negative pad is a part never read), then one strided copy per tap (per output, where
    there are fewer outputs than taps: a weight gradient's window is the larger)."""
    lo_pad = [max(0, -min(p.offsets[0] for p in d)) for d in dims]
    hi_pad = [max(0, max(p.offsets[-1] + p.step * (p.count - 1) for p in d) - (n - 1))
              for d, n in zip(dims, x.shape[2:-1])]
    if any(lo_pad) or any(hi_pad):
        x = np.pad(x, [(0, 0), (0, 0), *zip(lo_pad, hi_pad), (0, 0)])

    def fill(n0, n1, phase):
        n = len(phase)
        counts, taps = [p.count for p in phase], [len(p.taps) for p in phase]
        patches = np.empty((x.shape[0], n1 - n0, *counts, *taps, x.shape[-1]), x.dtype)
        if math.prod(taps) <= math.prod(counts):        # per tap: all of the phase's outputs
            for t in itertools.product(*map(range, taps)):
                patches[(slice(None),) * (2 + n) + t] = x[(slice(None), slice(n0, n1), *(
                    slice(lp + p.offsets[j], lp + p.offsets[j] + p.step * (p.count - 1) + 1,
                          p.step) for p, j, lp in zip(phase, t, lo_pad)))]
        else:                                           # per output: its taps
            for m in itertools.product(*map(range, counts)):
                patches[(slice(None), slice(None)) + m] = x[(slice(None), slice(n0, n1), *(
                    slice(lp + p.offsets[0] + p.step * i,
                          lp + p.offsets[-1] + p.step * i + 1, _spacing(p))
                    for p, i, lp in zip(phase, m, lo_pad)))]
        return patches.reshape(x.shape[0], (n1 - n0) * math.prod(counts), -1)
    return fill


def _conv_phase(out, fill, matmul, w, phase, B, C, G, I, Og, groups, itemsize) -> None:
    """The outputs of one phase (one _Phase per spatial dim): im2col of their taps, a chunk
    of images at a time, then one (grouped) matmul with the taps' kernel."""
    Nb, O = out.shape[0], out.shape[-1]
    counts = [p.count for p in phase]
    taps = [len(p.taps) for p in phase]
    Kp, Yp = math.prod(taps), math.prod(counts)
    # the kernel as [groups, K·I, Og]: rows in the order of a patch's elements
    wg = w.reshape(Kp, I, groups, Og).transpose(2, 0, 1, 3).reshape(groups, Kp * I, Og)
    step = max(1, _PATCH_BYTES // (B * Yp * Kp * C * itemsize))     # images per chunk
    dest = tuple(slice(p.first, None, p.period) for p in phase)
    for n0 in range(0, Nb, step):
        n1 = min(Nb, n0 + step)
        a = fill(n0, n1, phase)                         # [B, rows, K·C]
        rows = (n1 - n0) * Yp
        if G > 1:                                       # [rows, K, G, I] -> [G, rows, K·I]
            a = a.reshape(rows, Kp, G, I).transpose(2, 0, 1, 3).reshape(G, rows, Kp * I)
        # [groups, rows, Og]; one group as a plain 2-D product (which a threaded GEMM
        # can split by rows; a batch of one entry it cannot)
        res = matmul(a[0], wg[0])[None] if groups == 1 else matmul(a, wg)
        out[(slice(n0, n1), *dest)] = res.transpose(1, 0, 2).reshape(n1 - n0, *counts, O)


def _finish(out: np.ndarray, ospec, out_dtype) -> np.ndarray:
    """out [N', *Y, O] in the layout of `ospec`, in the output dtype."""
    n = out.ndim - 2
    out = out.transpose(0, n + 1, *range(1, n + 1))              # [N', O, *Y]
    out = np.transpose(out, tuple(int(d) for d in np.argsort(ospec)))
    if out_dtype == np.bool_:
        return np.ascontiguousarray(out != 0)
    return np.ascontiguousarray(out).astype(out_dtype, copy=False)


impl_rules[cv.conv_general_dilated_p] = conv_general_dilated

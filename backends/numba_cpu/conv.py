"""conv_general_dilated for the numba backend: the NumPy reference's phases and im2col
(numpy_ref/convolution.py), with the patches written by a numba kernel on the backend's
threads and the GEMMs run by gemm.matmul (its chunks, BLAS at one thread).

NumPy writes the patches with one strided copy per tap, after padding the input: for a
3×3 kernel over 32 channels, nine copies of 128-byte runs, at 2-3 GB/s on the 2-core
machine this was written on. The kernel reads the unpadded input (a tap outside it writes
zeros) and copies each run of channels in a loop, the threads claiming blocks of output
positions of one image at a time.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from fnad.backends.numba_cpu.gemm import matmul
from fnad.backends.numba_cpu.runtime import fetch_add, run_threaded
from fnad.backends.numpy_ref import convolution as ref

BLOCK = 64                       # output positions per chunk a thread claims


@numba.njit(nogil=True, cache=True, error_model="numpy", no_cfunc_wrapper=True)
def _unfold_kernel(x, patches, n0, geo, counter, chunks):
    """patches[b, i, y, t, :] = x[b, n0 + i, source(y, t), :], or 0 for a pad.

    x [B, N', S, C] (S the flattened spatial dims), patches [B, n, Y, K, C] (Y, K the
    flattened outputs and taps of one phase). geo[d] for spatial dim d (row-major):
    (input size, output count, input step per output, first tap's input offset, input
    distance between taps, tap count, input stride). Chunk c: image c // blocks, its
    block c % blocks of BLOCK output positions."""
    nimg, Y, K, C = patches.shape[1], patches.shape[2], patches.shape[3], patches.shape[4]
    nd = geo.shape[0]
    blocks = (Y + BLOCK - 1) // BLOCK
    m = np.empty(nd, np.int64)
    while True:
        c = np.int64(fetch_add(counter))
        if c >= chunks:
            break
        img, blk = c // blocks, c % blocks
        b, i = img // nimg, img % nimg
        for y in range(blk * BLOCK, min(Y, (blk + 1) * BLOCK)):
            r = y
            for d in range(nd - 1, -1, -1):
                m[d] = r % geo[d, 1]
                r //= geo[d, 1]
            for t in range(K):
                r = t
                src = 0
                inside = True
                for d in range(nd - 1, -1, -1):
                    q = geo[d, 3] + geo[d, 4] * (r % geo[d, 5]) + geo[d, 2] * m[d]
                    r //= geo[d, 5]
                    if q < 0 or q >= geo[d, 0]:
                        inside = False
                    src += q * geo[d, 6]
                if inside:
                    for ch in range(C):
                        patches[b, i, y, t, ch] = x[b, n0 + i, src, ch]
                else:
                    for ch in range(C):
                        patches[b, i, y, t, ch] = 0


def _unfold(x: np.ndarray, dims: list):
    """The numba patch filler for x [B, N', *S, C] (see numpy_ref.convolution)."""
    B, Nb, C = x.shape[0], x.shape[1], x.shape[-1]
    spatial = x.shape[2:-1]
    flat = np.ascontiguousarray(x).reshape(B, Nb, math.prod(spatial), C)
    strides = [math.prod(spatial[d + 1:]) for d in range(len(spatial))]

    def fill(patches, n0, n1, phase) -> None:
        geo = np.array([(n, p.count, p.step, p.offsets[0], ref._spacing(p), len(p.taps), st)
                        for n, p, st in zip(spatial, phase, strides)], np.int64
                       ).reshape(len(phase), 7)
        Y = math.prod(p.count for p in phase)
        K = math.prod(len(p.taps) for p in phase)
        out = patches.reshape(B, n1 - n0, Y, K, C)
        chunks = B * (n1 - n0) * -(-Y // BLOCK)
        run_threaded(_unfold_kernel, (flat, out, n0, geo), chunks)
    return fill


def conv_general_dilated(lhs, rhs, **params):
    return ref.conv_general_dilated(lhs, rhs, unfold=_unfold, matmul=matmul, **params)

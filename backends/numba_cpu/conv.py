"""conv_general_dilated for the numba backend: the NumPy reference's phases and im2col
(numpy_ref/convolution.py), with the patches written by a numba kernel on the backend's
threads and the GEMMs run by gemm.matmul (its chunks, BLAS at one thread).

NumPy writes the patches with one strided copy per tap, after padding the input (and
copying it to the canonical layout first, if it is not): for a 3×3 kernel over 32
channels, nine copies of 128-byte runs, at 2-3 GB/s on the 2-core machine this was written
on. The kernels read the input unpadded (a tap outside it writes zeros) where it lies, in
any permuted layout, the threads claiming blocks of output positions. Where the images lie
closer together than the features (a weight gradient: the lhs with its batch and feature
dims exchanged, so that the contraction runs along the batch of the forward pass), the
patch matrix is written transposed, features by images, and BLAS reads it so: both the
reads and the writes then run along memory (a copy of that lhs to the canonical layout
took 6 ms of the 11 ms of the CNN benchmark's largest weight gradient).
"""
from __future__ import annotations

import numba
import numpy as np

from fnad.backends.numba_cpu.gemm import matmul
from fnad.backends.numba_cpu.runtime import fetch_add
from fnad.backends.numba_cpu.threads import run_threaded
from fnad.backends.numpy_ref import convolution as ref

BLOCK = 64                       # output positions per chunk a thread claims


_NJIT = dict(nogil=True, cache=True, error_model="numpy", no_cfunc_wrapper=True)


@numba.njit(**_NJIT)
def _unfold_rows(x, strides, patches, n0, sources, counter, chunks):
    """patches[b, i, y, t, :] = x[b, n0 + i, sources[y, t], :] (0 where sources is -1, a
    pad), patches [B, n, Y, K, C] contiguous. x is its memory (1-d), `strides` (b, image,
    feature) in elements. Chunk c: image c // blocks, its block c % blocks of outputs."""
    nimg, Y, K, C = patches.shape[1], patches.shape[2], patches.shape[3], patches.shape[4]
    blocks = (Y + BLOCK - 1) // BLOCK
    while True:
        c = np.int64(fetch_add(counter))
        if c >= chunks:
            break
        img, blk = c // blocks, c % blocks
        b, i = img // nimg, img % nimg
        base = b * strides[0] + (n0 + i) * strides[1]
        step = strides[2]
        for y in range(blk * BLOCK, min(Y, (blk + 1) * BLOCK)):
            for t in range(K):
                src = sources[y, t]
                if src < 0:
                    for ch in range(C):
                        patches[b, i, y, t, ch] = 0
                elif step == 1:                        # channels last: a contiguous run
                    for ch in range(C):
                        patches[b, i, y, t, ch] = x[base + src + ch]
                else:
                    for ch in range(C):
                        patches[b, i, y, t, ch] = x[base + src + ch * step]


@numba.njit(**_NJIT)
def _unfold_columns(x, strides, patches, n0, sources, counter, chunks):
    """The same patches stored as [B, K, C, n, Y] (contiguous), for an x whose images are
    closer together in memory than its features (a weight gradient's lhs, its batch and
    feature dims exchanged): the inner loops run along both. Chunk c: (b, t)."""
    K, C, nimg, Y = patches.shape[1], patches.shape[2], patches.shape[3], patches.shape[4]
    while True:
        c = np.int64(fetch_add(counter))
        if c >= chunks:
            break
        b, t = c // K, c % K
        for ch in range(C):
            for i in range(nimg):
                base = b * strides[0] + ch * strides[2] + (n0 + i) * strides[1]
                for y in range(Y):
                    src = sources[y, t]
                    patches[b, t, ch, i, y] = 0 if src < 0 else x[base + src]


def _sources(spatial, phase, strides) -> np.ndarray:
    """[Y, K]: where output y's tap t reads x (its offset in x's memory, less the image and
    feature), -1 for a pad; outputs and taps row-major over the spatial dims."""
    src, pad = np.zeros((1, 1), np.int64), np.zeros((1, 1), bool)
    for n, p, st in zip(spatial, phase, strides):
        q = (np.asarray(p.offsets, np.int64)[None, :]
             + p.step * np.arange(p.count, dtype=np.int64)[:, None])    # [count, taps]
        Y, K = src.shape
        shape = (Y * p.count, K * q.shape[1])
        src = (src[:, None, :, None] + (q * st)[None, :, None, :]).reshape(shape)
        pad = (pad[:, None, :, None] | ((q < 0) | (q >= n))[None, :, None, :]).reshape(shape)
    return np.where(pad, -1, src)


def _memory(x: np.ndarray):
    """(x's memory as a 1-d array, x's strides in elements): a view where x is a
    permutation of a contiguous array (what the canonical transposes give), else a copy."""
    order = sorted(range(x.ndim), key=lambda d: -x.strides[d])
    size, packed = x.itemsize, True
    for d in reversed(order):
        if x.shape[d] > 1 and x.strides[d] != size:
            packed = False
        size *= x.shape[d]
    if not packed:
        x = np.ascontiguousarray(x)
    flat = x.ravel(order="K")
    return flat, [s // x.itemsize if n > 1 else 0 for s, n in zip(x.strides, x.shape)]


def _unfold(x: np.ndarray, dims: list):
    """The numba patch filler for x [B, N', *S, C] (see numpy_ref.convolution)."""
    B, C = x.shape[0], x.shape[-1]
    spatial = x.shape[2:-1]
    flat, strides = _memory(x)
    outer = np.array([strides[0], strides[1], strides[-1]], np.int64)
    columns = x.shape[1] > 1 and 0 <= strides[1] < strides[-1]

    tables: dict = {}                                  # phase -> its offsets, for every chunk

    def fill(n0, n1, phase):
        sources = tables.get(phase)
        if sources is None:
            sources = tables[phase] = _sources(spatial, phase, strides[2:-1])
        Y, K = sources.shape
        n = n1 - n0
        if columns:
            patches = np.empty((B, K, C, n, Y), flat.dtype)
            run_threaded(_unfold_columns, (flat, outer, patches, n0, sources), B * K)
            return patches.reshape(B, K * C, n * Y).transpose(0, 2, 1)
        patches = np.empty((B, n, Y, K, C), flat.dtype)
        run_threaded(_unfold_rows, (flat, outer, patches, n0, sources), B * n * -(-Y // BLOCK))
        return patches.reshape(B, n * Y, K * C)
    return fill


def conv_general_dilated(lhs, rhs, **params):
    return ref.conv_general_dilated(lhs, rhs, unfold=_unfold, matmul=matmul, **params)

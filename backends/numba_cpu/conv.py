"""conv_general_dilated for the numba backend: the NumPy reference's phases and im2col
(numpy_ref/convolution.py), with the patches written by a kernel on the backend's threads
(compiled as the fused kernels are: by fnad's LLVM translator, without numba, by default)
and the GEMMs run by gemm.matmul (its chunks, BLAS at one thread).

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

import functools
import threading

import numpy as np

from fnad.backends.numba_cpu.gemm import matmul
from fnad.backends.numba_cpu.threads import run_threaded
from fnad.backends.numpy_ref import convolution as ref

BLOCK = 64                       # output positions per chunk a thread claims

# The two patch fillers, in the kernel language of kernels.py (flat arrays, int
# arguments), compiled as the fused kernels are (codegen.load_kernel: fnad's LLVM
# translator, else numba). They move elements without looking at them: x and the patches
# come as unsigned integers of the elements' width, so one compile per width serves every
# dtype (float16 and bfloat16 too, which neither compiler types).
#
# unfold_rows: patches[b, i, y, t, :] = x[b, n0 + i, sources[y, t], :] (0 where sources is
# -1, a pad), patches [B, n, Y, K, C]; x's strides (b, image, feature) in elements are sb,
# si, step. Chunk c: image c // blocks, its block c % blocks of BLOCK outputs.
_UNFOLD_ROWS = f"""
@numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
def kernel(x, patches, sources, n0, sb, si, step, nimg, Y, K, C, counter, chunks):
    ch = np.uint64(chunks)
    u0, usb, usi, ustep = np.uint64(n0), np.uint64(sb), np.uint64(si), np.uint64(step)
    un, uY, uK, uC = np.uint64(nimg), np.uint64(Y), np.uint64(K), np.uint64(C)
    blocks = (uY + np.uint64({BLOCK - 1})) // np.uint64({BLOCK})
    while True:
        c = fetch_add(counter)
        if c >= ch:
            break
        img = c // blocks
        y0 = (c - img * blocks) * np.uint64({BLOCK})
        b = img // un
        base = b * usb + (u0 + img - b * un) * usi
        y1 = y0 + np.uint64({BLOCK})
        if y1 > uY:
            y1 = uY
        for y in range(y0, y1):
            for t in range(uK):
                src = sources[y * uK + t]
                out = ((img * uY + y) * uK + t) * uC
                if src < 0:
                    for i in range(uC):
                        patches[out + i] = 0
                elif ustep == np.uint64(1):
                    at = base + np.uint64(src)
                    for i in range(uC):
                        patches[out + i] = x[at + i]
                else:
                    at = base + np.uint64(src)
                    for i in range(uC):
                        patches[out + i] = x[at + i * ustep]
    return 0
"""

# unfold_columns: the same patches stored as [B, K, C, n, Y], for an x whose images lie
# closer together in memory than its features (a weight gradient's lhs, its batch and
# feature dims exchanged): the inner loops run along both. Chunk c: (b, t). Indices are
# unsigned, as in every kernel (kernels.py).
_UNFOLD_COLUMNS = """
@numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
def kernel(x, patches, sources, n0, sb, si, sf, nimg, Y, K, C, counter, chunks):
    ch = np.uint64(chunks)
    u0, usb, usi, usf = np.uint64(n0), np.uint64(sb), np.uint64(si), np.uint64(sf)
    un, uY, uK, uC = np.uint64(nimg), np.uint64(Y), np.uint64(K), np.uint64(C)
    while True:
        c = fetch_add(counter)
        if c >= ch:
            break
        b = c // uK
        t = c - b * uK
        for f in range(uC):
            for i in range(un):
                base = b * usb + f * usf + (u0 + i) * usi
                out = (((b * uK + t) * uC + f) * un + i) * uY
                for y in range(uY):
                    src = sources[y * uK + t]
                    if src < 0:
                        patches[out + y] = 0
                    else:
                        patches[out + y] = x[base + np.uint64(src)]
    return 0
"""
_WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_lock = threading.Lock()


@functools.cache
def _kernel(source: str):
    from fnad.backends.numba_cpu.codegen import kernel_module, load_kernel
    with _lock:
        return load_kernel(*kernel_module(source, runtime=("fetch_add",)))


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
    """The threaded patch filler for x [B, N', *S, C] (see numpy_ref.convolution); NumPy's
    own for elements of 16 bytes (complex128)."""
    width = _WIDTHS.get(x.itemsize)
    if width is None:
        return ref._unfold(x, dims)
    B, C = x.shape[0], x.shape[-1]
    spatial = x.shape[2:-1]
    flat, strides = _memory(x)
    flat = flat.view(width)
    columns = x.shape[1] > 1 and 0 <= strides[1] < strides[-1]

    tables: dict = {}                                  # phase -> its offsets, for every chunk

    def fill(n0, n1, phase):
        sources = tables.get(phase)
        if sources is None:
            sources = tables[phase] = _sources(spatial, phase, strides[2:-1])
        Y, K = sources.shape
        sources = sources.ravel()
        n = n1 - n0
        if columns:
            patches = np.empty(B * K * C * n * Y, width)
            run_threaded(_kernel(_UNFOLD_COLUMNS), (flat, patches, sources, n0, strides[0],
                                                    strides[1], strides[-1], n, Y, K, C), B * K)
            return patches.view(x.dtype).reshape(B, K * C, n * Y).transpose(0, 2, 1)
        patches = np.empty(B * n * Y * K * C, width)
        run_threaded(_kernel(_UNFOLD_ROWS), (flat, patches, sources, n0, strides[0],
                                             strides[1], strides[-1], n, Y, K, C),
                     B * n * -(-Y // BLOCK))
        return patches.view(x.dtype).reshape(B, n * Y, K * C)
    return fill


def conv_general_dilated(lhs, rhs, **params):
    return ref.conv_general_dilated(lhs, rhs, unfold=_unfold, matmul=matmul, **params)

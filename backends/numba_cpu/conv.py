"""conv_general_dilated for the numba backend: the NumPy reference's phases and im2col
(numpy_ref/convolution.py), with the patches written by kernels (compiled as the fused
kernels are: by fnad's LLVM translator, without numba, by default) on the backend's
threads, each thread multiplying what it unfolded (BLAS at one thread) while it is in its
cache, and an lhs-dilated convolution computed from its inputs.

NumPy writes the patches with one strided copy per tap, after padding the input (and
copying it to the canonical layout first, if it is not): for a 3×3 kernel over 32
channels, nine copies of 128-byte runs, at 2-3 GB/s on the 2-core machine this was written
on. The kernels read the input unpadded (a tap outside it writes zeros) where it lies, in
any permuted layout. Three ways, by what the convolution is (one group; others take the
reference's chunks with these fillers):

    rows          a block of output positions' patches (about TASK_BYTES), then its product
                  with the kernel, straight into the output's rows (_conv_phase): the patch
                  matrix, nine times a 3x3 convolution's input, is never written out whole.
    transposed    where the images lie closer together than the features (a weight
                  gradient: the lhs with its batch and feature dims exchanged, the
                  contraction along the forward pass's batch and the taps), the patches are
                  written transposed, reads and writes along memory; threads take lanes of
                  taps, each summed a block at a time, and the lanes are added in order
                  (_summed_over_taps): the same bits whichever thread takes which lane.
    scattered     an lhs-dilated convolution at window stride 1 (a strided convolution's
                  input gradient): each input position times every tap, one product per
                  block of images, added to the outputs each lands on (_scattered): none of
                  the dilation's zeros is multiplied, and no phases.

The last two sum a convolution's terms in another order than the reference's one product
(docs/differences_from_jax.md, Numerics).
"""
from __future__ import annotations

import functools
import itertools
import math
import threading

import numpy as np

from fnad.backends.numba_cpu.gemm import matmul, one_blas_thread
from fnad.backends.numba_cpu.threads import NUM_THREADS, on_all_threads, run_threaded
from fnad.backends.numpy_ref import convolution as ref

BLOCK = 64                       # output positions per chunk a thread claims

# The two patch fillers, in the kernel language of kernels.py (flat arrays, int
# arguments), compiled as the fused kernels are (codegen.load_kernel: fnad's LLVM
# translator, else numba). They move elements without looking at them: x and the patches
# come as unsigned integers of the elements' width, so one compile per width serves every
# dtype (float16 and bfloat16 too, which neither compiler types).
#
# unfold_rows: patches[b, i, y, t, :] = x[b, n0 + i, sources[y, t], :] (0 where sources is
# -1, a pad), patches [B, n, Y, K, C] less its first r0 rows (a block of rows: its chunks
# only); x's strides (b, image, feature) in elements are sb, si, step. Chunk c: image
# c // blocks, its block c % blocks of BLOCK outputs.
_UNFOLD_ROWS = f"""
@numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
def kernel(x, patches, sources, n0, sb, si, step, nimg, Y, K, C, r0, counter, chunks):
    ch = np.uint64(chunks)
    u0, usb, usi, ustep = np.uint64(n0), np.uint64(sb), np.uint64(si), np.uint64(step)
    un, uY, uK, uC = np.uint64(nimg), np.uint64(Y), np.uint64(K), np.uint64(C)
    ur0 = np.uint64(r0)
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
                out = ((img * uY + y - ur0) * uK + t) * uC
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

# unfold_columns: the same patches transposed, for an x whose images lie closer together in
# memory than its features (a weight gradient's lhs, its batch and feature dims exchanged):
# patches[b, t, f, ...] for tap t's feature f is a block of nimg x Y elements, element (i, y)
# at i * oi + y * oy: [B, K, C, n, Y] (oi = Y, oy = 1: the rows the reference's matmul
# takes) or [B, K, C, Y, n] (oi = 1, oy = n: the images side by side, as they are in x, so
# each (t, f, y) is one run copied along memory; the blocks of taps _summed_over_taps
# multiplies). Less the first t0 taps' (a range of taps: its chunks only). Chunk c: (b, t).
# Indices are unsigned, as in every kernel (kernels.py).
_UNFOLD_COLUMNS = """
@numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
def kernel(x, patches, sources, n0, sb, si, sf, nimg, Y, K, C, t0, oi, oy, counter, chunks):
    ch = np.uint64(chunks)
    u0, usb, usi, usf = np.uint64(n0), np.uint64(sb), np.uint64(si), np.uint64(sf)
    un, uY, uK, uC = np.uint64(nimg), np.uint64(Y), np.uint64(K), np.uint64(C)
    ut0, uoi, uoy = np.uint64(t0), np.uint64(oi), np.uint64(oy)
    while True:
        c = fetch_add(counter)
        if c >= ch:
            break
        b = c // uK
        t = c - b * uK
        for f in range(uC):
            base = b * usb + f * usf + u0 * usi
            block = ((b * uK + t - ut0) * uC + f) * un * uY
            for y in range(uY):
                src = sources[y * uK + t]
                out = block + y * uoy
                if src < 0:
                    for i in range(un):
                        patches[out + i * uoi] = 0
                elif usi == np.uint64(1) and uoi == np.uint64(1):
                    at = base + np.uint64(src)
                    for i in range(un):
                        patches[out + i] = x[at + i]
                else:
                    at = base + np.uint64(src)
                    for i in range(un):
                        patches[out + i * uoi] = x[at + i * usi]
    return 0
"""
# scatter_add: out[i0 + c, dst[j0 + j, k], :] += products[c, j, k, :] for the images i0 + c
# of a block (c: chunks of the counter) and their input positions j0 .. j0 + nj, where dst
# is >= 0: each input position's product with tap k, added to the output it lands on (an
# lhs-dilated convolution, from its inputs). out [N, Y, O], products [n, nj, K, O], flat.
_SCATTER_ADD = """
@numba.njit(error_model='numpy', cache=True, no_cfunc_wrapper=True, nogil=True)
def kernel(out, products, dst, i0, j0, nj, K, Y, O, counter, chunks):
    ch = np.uint64(chunks)
    ui0, uj0, unj = np.uint64(i0), np.uint64(j0), np.uint64(nj)
    uK, uY, uO = np.uint64(K), np.uint64(Y), np.uint64(O)
    while True:
        c = fetch_add(counter)
        if c >= ch:
            break
        for j in range(unj):
            for k in range(uK):
                d = dst[(uj0 + j) * uK + k]
                if d >= 0:
                    at = ((ui0 + c) * uY + np.uint64(d)) * uO
                    src = ((c * unj + j) * uK + k) * uO
                    for o in range(uO):
                        out[at + o] = out[at + o] + products[src + o]
    return 0
"""
_WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_lock = threading.Lock()
SMALL_COPY = 8      # elements: a copy loop this short runs over a constant count


@functools.cache
def _counted(source: str, var: str, n: int) -> str:
    """`source` with its copy loops over `var` elements (`range(var)`) running over the
    constant n where n is at most SMALL_COPY (a kernel per such n): LLVM writes such a copy
    out, where a loop of unknown count becomes a call of memcpy, which costs more than a
    few elements' copy (the first layer of a CNN: 3 channels per tap; alternating rounds,
    its forward convolution 0.77 of the time with the count constant, 8 channels 0.83,
    16 0.96, 32 1.11)."""
    if n > SMALL_COPY:
        return source
    return source.replace(f"range({var})", f"range(np.uint64(0), np.uint64({n}))")


@functools.cache
def _kernel(source: str):
    from fnad.backends.numba_cpu.codegen import kernel_module, load_kernel
    with _lock:
        return load_kernel(*kernel_module(source, runtime=("fetch_add",)))


def _grid(dims) -> np.ndarray:
    """[prod n_d, prod k_d] from each spatial dim's ([n_d, k_d] int values, [n_d, k_d] bool
    valid): the sum of the dims' values, rows and columns row-major over the dims, -1 where
    any dim's is not valid (the tables of _sources and _destinations)."""
    total, valid = np.zeros((1, 1), np.int64), np.ones((1, 1), bool)
    for values, ok in dims:
        shape = (total.shape[0] * values.shape[0], total.shape[1] * values.shape[1])
        total = (total[:, None, :, None] + values[None, :, None, :]).reshape(shape)
        valid = (valid[:, None, :, None] & ok[None, :, None, :]).reshape(shape)
    return np.where(valid, total, -1)


def _sources(spatial, phase, strides) -> np.ndarray:
    """[Y, K]: where output y's tap t reads x (its offset in x's memory, less the image and
    feature), -1 for a pad; outputs and taps row-major over the spatial dims."""
    dims = []
    for n, p, st in zip(spatial, phase, strides):
        q = (np.asarray(p.offsets, np.int64)[None, :]
             + p.step * np.arange(p.count, dtype=np.int64)[:, None])    # [count, taps]
        dims.append((q * st, (q >= 0) & (q < n)))
    return _grid(dims)


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


class _Unfold:
    """The threaded patch filler for x [B, N', *S, C] (see numpy_ref.convolution):
    `fill(n0, n1, phase)` gives the patches of images n0..n1 (on all threads); `rows`
    (where the rows layout is used: `columns` false) and `taps` (the transposed layout)
    write those of a range of chunks into a thread's buffer, on that thread. NumPy's own
    filler for elements of 16 bytes (complex128): `_unfold` below."""

    def __init__(self, x: np.ndarray, width):
        self.B, self.C, self.spatial = x.shape[0], x.shape[-1], x.shape[2:-1]
        self.dtype, self.width = x.dtype, width
        flat, self.strides = _memory(x)
        self.flat = flat.view(width)
        self.columns = x.shape[1] > 1 and 0 <= self.strides[1] < self.strides[-1]
        self.tables: dict = {}                         # phase -> its offsets, for every chunk

    def sources(self, phase) -> np.ndarray:
        """[Y, K] as _sources gives it, per phase."""
        src = self.tables.get(phase)
        if src is None:
            src = self.tables[phase] = _sources(self.spatial, phase, self.strides[2:-1])
        return src

    def __call__(self, n0, n1, phase):
        sources = self.sources(phase)
        Y, K = sources.shape
        B, C, (sb, si, *_, sf), n = self.B, self.C, self.strides, n1 - n0
        if self.columns:
            patches = np.empty(B * K * C * n * Y, self.width)
            run_threaded(_kernel(_counted(_UNFOLD_COLUMNS, "un", n)),
                         (self.flat, patches, sources.ravel(), n0, sb, si, sf, n, Y, K, C, 0,
                          Y, 1), B * K)
            return patches.view(self.dtype).reshape(B, K * C, n * Y).transpose(0, 2, 1)
        patches = np.empty(B * n * Y * K * C, self.width)
        run_threaded(_kernel(_counted(_UNFOLD_ROWS, "uC", C)),
                     (self.flat, patches, sources.ravel(), n0, sb, si, sf, n, Y, K, C, 0),
                     B * n * -(-Y // BLOCK))
        return patches.view(self.dtype).reshape(B, n * Y, K * C)

    def rows(self, patches: np.ndarray, c0: int, c1: int, r0: int, nimg: int, phase) -> None:
        """The patch rows of chunks c0..c1 (r0: the first one's row) of nimg images (B = 1)
        into `patches` (flat, of the filler's width), on this thread."""
        sources = self.sources(phase)
        Y, K = sources.shape
        sb, si, *_, sf = self.strides
        _kernel(_counted(_UNFOLD_ROWS, "uC", self.C))(
            self.flat, patches, sources.ravel(), 0, sb, si, sf, nimg, Y, K, self.C, r0,
            np.array([c0], np.int64), c1)

    def taps(self, patches: np.ndarray, t0: int, t1: int, nimg: int, phase) -> None:
        """The transposed patches of taps t0..t1 of nimg images (B = 1), [t1 - t0, C, Y,
        nimg], into `patches` (flat, of the filler's width), on this thread."""
        sources = self.sources(phase)
        Y, K = sources.shape
        sb, si, *_, sf = self.strides
        _kernel(_counted(_UNFOLD_COLUMNS, "un", nimg))(
            self.flat, patches, sources.ravel(), 0, sb, si, sf, nimg, Y, K, self.C, t0, 1,
            nimg, np.array([t0], np.int64), t1)


def _unfold(x: np.ndarray, dims: list):
    """The patch filler for x [B, N', *S, C] (see numpy_ref.convolution)."""
    width = _WIDTHS.get(x.itemsize)
    return ref._unfold(x, dims) if width is None else _Unfold(x, width)


TASK_BYTES = 1 << 20     # a thread's patch rows, unfolded and multiplied while in its cache


def _conv_phase(out, fill, matmul_, w, phase, B, C, G, I, Og, groups, itemsize) -> None:
    """One phase's outputs (the reference's _conv_phase) in one group: each thread unfolds
    a block of patch rows of about TASK_BYTES into its own buffer and multiplies it (BLAS at
    one thread) into out's rows, while the patches are in its cache: the patch matrix is
    never written out whole (for a 3x3 convolution of 64 channels, nine times the input).
    Blocks are of BLOCK outputs where the phase's outputs are all of out's positions in
    order (no lhs dilation), else of whole images, whose products are then copied to the
    phase's positions. Transposed patches: _summed_over_taps; groups: the reference's
    chunks."""
    if not (isinstance(fill, _Unfold) and B == 1 and groups == 1
            and out.dtype.kind in "fc" and out.flags.c_contiguous):
        return ref._conv_phase(out, fill, matmul_, w, phase, B, C, G, I, Og, groups, itemsize)
    Y, K = fill.sources(phase).shape
    direct = all(p.first == 0 and p.period == 1 for p in phase)
    dest = out if direct else out[(slice(None), *(slice(p.first, None, p.period)
                                                  for p in phase))]
    if fill.columns:
        if not _summed_over_taps(dest, fill, w, phase, C, Og, itemsize):
            ref._conv_phase(out, fill, matmul_, w, phase, B, C, G, I, Og, groups, itemsize)
        return
    n, blocks, row_bytes = out.shape[0], -(-Y // BLOCK), K * C * itemsize
    chunks = n * blocks
    if direct:
        per = max(1, min(TASK_BYTES // (BLOCK * row_bytes), -(-chunks // NUM_THREADS)))
        dest = out.reshape(-1, Og)
    else:
        per = blocks * max(1, min(TASK_BYTES // (Y * row_bytes), -(-n // NUM_THREADS)))
    tasks = -(-chunks // per)
    wg = w.reshape(K * C, Og)

    def row(c):                                     # the first row of chunk c
        return c // blocks * Y + min(c % blocks * BLOCK, Y)
    claim = itertools.count().__next__              # atomic under the GIL

    def work():
        buffer = np.empty(per * BLOCK * K * C, fill.width)
        patches = buffer.view(out.dtype)
        product = None if direct else np.empty((per // blocks * Y, Og), out.dtype)
        while (t := claim()) < tasks:
            c0, c1 = t * per, min(chunks, (t + 1) * per)
            r0, r1 = row(c0), row(c1)
            fill.rows(buffer, c0, c1, r0, n, phase)
            a = patches[:(r1 - r0) * K * C].reshape(r1 - r0, K * C)
            if direct:
                np.matmul(a, wg, out=dest[r0:r1])
            else:                                   # (whole images: c0, c1 divide by blocks)
                res = np.matmul(a, wg, out=product[:r1 - r0])
                dest[c0 // blocks:c1 // blocks] = res.reshape(-1, *dest.shape[1:])
    with one_blas_thread:
        on_all_threads(work)


LANES_PER_THREAD = 2       # the sum over taps: partial sums, claimed by the threads
SUM_BYTES = 64 << 20       # at most this much for those partial sums


def _summed_over_taps(dest, fill, w, phase, C, Og, itemsize) -> bool:
    """One phase's outputs where the patches are transposed (a weight gradient: few outputs,
    a long contraction over taps and the forward pass's batch): its taps in contiguous
    lanes, each a partial sum that a thread computes a block of about TASK_BYTES of
    patches at a time, unfolded into its own buffer and multiplied while in its cache (the
    patch matrix, taps x batch by outputs, is never written out whole; each block's
    product its own slice of the kernel's rows, packed once); out is the lanes' sum, in
    lane order, so that a result does not depend on which thread took which lane. False
    (nothing done) where one tap's block or the partial sums would be too large."""
    Y, K = fill.sources(phase).shape
    n = dest.shape[0]
    rows, tap_bytes = n * Y, C * n * Y * itemsize
    lanes = min(K, LANES_PER_THREAD * NUM_THREADS)
    if tap_bytes > ref._PATCH_BYTES or lanes * rows * Og * itemsize > SUM_BYTES:
        return False
    per = max(1, TASK_BYTES // tap_bytes)
    bounds = [K * j // lanes for j in range(lanes + 1)]
    sums = [None] * lanes
    wg = w.reshape(K * C, Og)
    claim = itertools.count().__next__              # atomic under the GIL

    def work():
        buffer = np.empty(min(per, K) * C * rows, fill.width)
        patches = buffer.view(dest.dtype)
        product = None
        while (j := claim()) < lanes:
            total = None
            for t0 in range(bounds[j], bounds[j + 1], per):
                t1 = min(bounds[j + 1], t0 + per)
                fill.taps(buffer, t0, t1, n, phase)
                a = patches[:(t1 - t0) * C * rows].reshape((t1 - t0) * C, rows).T
                if total is None:
                    total = np.matmul(a, wg[t0 * C:t1 * C])
                else:
                    if product is None:
                        product = np.empty((rows, Og), dest.dtype)
                    total += np.matmul(a, wg[t0 * C:t1 * C], out=product)
            sums[j] = total
    with one_blas_thread:
        on_all_threads(work)
    total = sums[0]
    for s in sums[1:]:
        total += s
    # rows (position, image) -> dest [images, *positions, Og]
    dest[...] = np.moveaxis(total.reshape(*dest.shape[1:-1], n, Og), -2, 0)
    return True


def _destinations(in_sp, window, out_sp, padding, lhs_dilation, rhs_dilation) -> np.ndarray:
    """[J, K]: the output position (row-major over the spatial dims) that input position j
    (row-major) reaches through tap k at window stride 1, -1 where none: output y reads
    the dilated, padded input at y + k * rd, element j where that is j * ld + lo."""
    dims = []
    for d, (n, k, y, (lo, _), ld, rd) in enumerate(zip(in_sp, window, out_sp, padding,
                                                       lhs_dilation, rhs_dilation)):
        pos = (np.arange(n) * ld + lo)[:, None] - (np.arange(k) * rd)[None, :]    # [n, k]
        dims.append((pos * math.prod(out_sp[d + 1:]), (pos >= 0) & (pos < y)))
    return _grid(dims)


def _scattered(out, x, w, padding, lhs_dilation, rhs_dilation) -> bool:
    """An lhs-dilated convolution at window stride 1 in one group (the input gradient of a
    strided convolution; the reference's `scatter`) from its inputs: each input position
    times every tap of the kernel (one product [positions, C] @ [C, K·O], no zeros of the
    dilation multiplied), added to the outputs (out: zeros) each lands on. Each thread
    takes a block of whole images (their products about TASK_BYTES, added while in its
    cache; an image whose products are larger, a block of its positions at a time), so no
    two threads add to one output. False (nothing done) for a dtype the kernels do not
    add: the reference's phases then."""
    if out.dtype not in (np.float32, np.float64):
        return False
    x = np.ascontiguousarray(x)
    N, C, O = x.shape[0], x.shape[-1], w.shape[-1]
    in_sp, window, out_sp = x.shape[1:-1], w.shape[:-2], out.shape[1:-1]
    J, K, Y = math.prod(in_sp), math.prod(window), math.prod(out_sp)
    if not (J and K and Y):                            # sums of nothing
        return True
    dst = _destinations(in_sp, window, out_sp, padding, lhs_dilation, rhs_dilation)
    rows, wk = x.reshape(N * J, C), np.ascontiguousarray(
        np.moveaxis(w.reshape(K, C, O), 1, 0)).reshape(C, K * O)   # [C, K·O]
    row_bytes = K * O * x.itemsize                     # one input position's products
    per = max(1, min(TASK_BYTES // (J * row_bytes), -(-N // NUM_THREADS)))
    part = J if per > 1 else min(J, max(1, TASK_BYTES // row_bytes))
    tasks = -(-N // per)
    add, flat, dst = _kernel(_SCATTER_ADD), out.reshape(-1), dst.ravel()
    claim = itertools.count().__next__                  # atomic under the GIL

    def work():
        products = np.empty((per * part, K * O), out.dtype)
        while (t := claim()) < tasks:
            i0, i1 = t * per, min(N, (t + 1) * per)
            if part == J:                              # whole images
                np.matmul(rows[i0 * J:i1 * J], wk, out=products[:(i1 - i0) * J])
                add(flat, products.reshape(-1), dst, i0, 0, J, K, Y, O,
                    np.zeros(1, np.int64), i1 - i0)
                continue
            for j0 in range(0, J, part):               # (one image, a block at a time)
                nj = min(part, J - j0)
                np.matmul(rows[i0 * J + j0:i0 * J + j0 + nj], wk, out=products[:nj])
                add(flat, products.reshape(-1), dst, i0, j0, nj, K, Y, O,
                    np.zeros(1, np.int64), 1)
    with one_blas_thread:
        on_all_threads(work)
    return True


def conv_general_dilated(lhs, rhs, **params):
    return ref.conv_general_dilated(lhs, rhs, unfold=_unfold, matmul=matmul,
                                    conv_phase=_conv_phase, scatter=_scattered, **params)

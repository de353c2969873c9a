"""dot_general for the numba backend: BLAS GEMMs split into chunks that threads claim.

The layout work (operands permuted and reshaped to [batch, M, K] @ [batch, K, N] views,
f16/bf16 accumulating in f32) is the NumPy reference's (numpy_ref/linalg.py `_as_matmul`).
What differs is who runs the threads. OpenBLAS splits a GEMM into one fixed share per
thread and its threads spin while idle: on a loaded machine a descheduled thread stalls
the whole product (measured on the 2-core machine this was built on, with other
processes running: an MLP train step took 11-65 ms with OpenBLAS's 2 threads against
5.7-7.5 ms with one). Here, where the BLAS library's thread count can be set (OpenBLAS,
found in the process's loaded libraries), a large product runs with BLAS at one thread on
`NUM_THREADS` threads that claim chunks (batch entries or blocks of rows) one at a time:
a late thread simply claims fewer. Small products (< 2^23 multiply-adds) run on the
calling thread alone, also with BLAS at one thread: OpenBLAS's own threads, woken for a
small product, spin afterwards and take the cores the next kernels need (the same MLP
step: 41 ms with them, 6-7 ms without). Elsewhere (macOS Accelerate, MKL) `np.matmul`
runs as is. Independent products that a compiled program runs one after the other (a
weight's two gradients) are instead one `products_together` call: each whole on one
thread, so that no operand is packed twice.

A compiled program's driver calls a `Product` for each dot_general instead of
`dot_general` itself: the same work, with the layout (which views or copies make the
operands [batch, M, K] and [batch, K, N], the dtypes, whether the product is small) decided
once from the operands' shapes, where `dot_general` decides it at every call. A [32, 64] @
[64, 32] product then takes about 5 µs in all instead of 17 (np.matmul alone: 2 µs; 3.7
inside a compiled loop, `one_blas_thread`), which a loop of small steps (an RNN under
`lax.scan`) pays hundreds of times a call.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import math
import os
import threading

import numpy as np

from fnad.backends.numba_cpu.threads import (NUM_THREADS, aligned_empty, on_all_threads,
                                             run_together)
from fnad.backends.numpy_ref.linalg import _as_matmul, apply_layout

# multiply-adds: below this one thread is as fast. Chunks of a product start late on the
# worker (~20 us after the caller's, session 29) and the caller's half runs slower beside
# it: [3200, 64] x [64, 32] (6.5M) took 162 us chunked against 144 on one thread,
# [64, 3200] x [3200, 32] 206 against 162, [32, 512] x [512, 512] (8.4M) 211 against 260.
SMALL = 1 << 23
MIN_ROWS = 32                    # a chunk of rows (columns) is at least this tall (wide)
# Chunks per thread: more balance a late thread, fewer pack the other operand less. A block
# of rows packs all of b again (columns: all of a), so a 2-D product has one per thread:
# in the GPT step (1024x768 @ 768x256 and the like) one against two was 0.947-0.975 of the
# step's time per round (six A/B runs of 20-40 rounds, Sapphire Rapids, 2 threads). Chunks
# of batch entries pack nothing twice: two per thread.
CHUNKS_PER_THREAD = 1
BATCH_CHUNKS_PER_THREAD = 2


def _openblas():
    """(set_num_threads, get_num_threads) of the loaded OpenBLAS, or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:                                   # not Linux
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("openblas", ""), ("scipy_openblas", "64_"),
                               ("scipy_openblas", ""), ("openblas", "64_")):
            set_fn = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            get_fn = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if set_fn is not None and get_fn is not None:
                set_fn.argtypes, set_fn.restype = [ctypes.c_int], None
                get_fn.argtypes, get_fn.restype = [], ctypes.c_int
                return set_fn, get_fn
    return None


_BLAS: tuple | None = None
_found = False
_lock = threading.Lock()         # one chunked product at a time sets the BLAS thread count


def blas_threads():
    global _BLAS, _found
    if not _found:
        np.matmul(np.ones((2, 2)), np.ones((2, 2)))          # numpy's BLAS is loaded
        _BLAS, _found = _openblas(), True
    return _BLAS


def dot_general(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                alone=False):
    """(`alone`: on this thread only, with the BLAS at one thread: products_together.)"""
    a, b, out_shape, out_dtype = _as_matmul(lhs, rhs, dimension_numbers,
                                            preferred_element_type)
    out = matmul(a, b, alone=alone)
    return out.reshape(out_shape).astype(out_dtype, copy=False)


class Product:
    """`dot_general(lhs, rhs, **params)` for operands of the given shapes and dtypes, the
    layout work decided here once (numpy_ref.linalg.matmul_layouts, which _as_matmul runs
    per call): each operand becomes a [batch.., rows, cols] view (or copy) as it is, by one
    reshape, a reshape and a swap of the last two axes, or a transpose and a reshape;
    products below SMALL multiply-adds run on this thread with the BLAS at one thread,
    larger ones as `matmul` runs them. Called with `alone=True` by products_together.
    Operands of other dtypes than planned are cast as dot_general would."""

    __slots__ = ("cdt", "lhs", "rhs", "out_shape", "reshape_out", "scalars", "out_dtype",
                 "small", "blas", "guard", "column_major", "product", "as_is", "__weakref__")

    def __init__(self, lhs_shape, lhs_dtype, rhs_shape, rhs_dtype, *, dimension_numbers,
                 precision=None, preferred_element_type=None):
        from fnad.backends.numpy_ref.linalg import _compute_dtype, matmul_layouts
        from fnad.primitives.linalg import dot_general_result_dtype
        self.out_dtype = np.dtype(dot_general_result_dtype(np.dtype(lhs_dtype),
                                                           np.dtype(rhs_dtype),
                                                           preferred_element_type))
        self.cdt = _compute_dtype(self.out_dtype)
        self.lhs, self.rhs, self.out_shape, (batch, m, k, n) = matmul_layouts(
            lhs_shape, rhs_shape, dimension_numbers)
        self.reshape_out = self.out_shape != batch + (m, n)
        self.scalars = not (lhs_shape and rhs_shape)    # a 0-d buffer may be a NumPy scalar
        self.blas = blas_threads() if self.cdt.kind in "fc" else None
        self.guard = _blas_at_one_thread(self.blas) if self.blas is not None else None
        self.small = NUM_THREADS == 1 or math.prod(batch) * m * k * n < SMALL
        # the result may be a column-major view (`flipped`, where the right operand is a
        # transposed matrix: rhs[0] == 1, or a transposed view the caller made)
        self.column_major = (self.blas is not None and not batch and 1 < m and 8 * m <= n
                             and k >= 128 and self.lhs[0] <= 0 and self.rhs[0] <= 1)
        self.product = _np_matmul if self.column_major else np.matmul   # (flipped: 0.3 us)
        # the small path's common case, taken without the general one's calls (a loop body's
        # [32, 32] products: 1.3 us of each one's 4.4 went to them): operands of the compute
        # dtype used as they are, the right one maybe as a transposed matrix (x @ W^T): no
        # cast, no reshape
        self.as_is = (self.small and self.blas is not None and not self.scalars
                      and not self.reshape_out and self.out_dtype == self.cdt
                      and self.lhs[0] < 0 and (self.rhs[0] < 0 or (
                          self.rhs[0] == 1 and self.rhs[1] == tuple(rhs_shape))))

    def __repr__(self):
        return (f"Product(lhs={self.lhs}, rhs={self.rhs}, compute={self.cdt}, "
                f"out={self.out_shape} {self.out_dtype}, small={self.small})")

    def __call__(self, lhs, rhs, alone=False):
        if self.as_is and not alone and lhs.dtype == rhs.dtype == self.cdt:
            if self.rhs[0] > 0:
                rhs = rhs.swapaxes(-1, -2)
            if one_blas_thread.open:           # (the BLAS is at one thread: see below)
                return self.product(lhs, rhs)
            with self.guard:
                return self.product(lhs, rhs)
        if self.scalars:
            lhs, rhs = np.asarray(lhs), np.asarray(rhs)
        cdt = self.cdt
        if lhs.dtype != cdt:
            lhs = lhs.astype(cdt)
        if rhs.dtype != cdt:
            rhs = rhs.astype(cdt)
        a, b = apply_layout(lhs, self.lhs), apply_layout(rhs, self.rhs)
        if alone or not self.small or self.blas is None:
            out = matmul(a, b, alone=alone)
        else:                                     # matmul's small path, without its checks
            if one_blas_thread.open:              # (inside one_blas_thread: 0.1 us, not 2)
                out = self.product(a, b)
            else:
                with self.guard:
                    out = self.product(a, b)
        if self.reshape_out:
            out = out.reshape(self.out_shape)
        return out if out.dtype == self.out_dtype else out.astype(self.out_dtype)


def products_together(calls: tuple) -> list:
    """[product(lhs, rhs) for product, lhs, rhs, work in calls]: independent products
    (dot_general impls with their params bound), each whole on one thread, the threads
    claiming the next until none is left, where the chunked path would split each across
    the threads. Each thread then packs only its own operands (a block of rows packs all
    of b again): a backward pass's dX and dW of one weight, side by side, took 0.91-0.98
    of their time chunked one after the other (1024x256x768 products, 2 threads). `work`
    is each product's multiply-adds: where whole products cannot share the threads
    evenly (three equal products on two threads: 1.03-1.12), they run chunked."""
    blas = blas_threads()
    works = [c[3] for c in calls]
    if blas is None or NUM_THREADS == 1 or _makespan(works) > 1.1 * sum(works) / NUM_THREADS:
        return [product(lhs, rhs) for product, lhs, rhs, _ in calls]
    order = sorted(range(len(calls)), key=works.__getitem__, reverse=True)   # largest first
    with _blas_at_one_thread(blas):
        done = run_together(tuple((functools.partial(calls[c][0], alone=True), calls[c][1:3])
                                  for c in order))
    results = [None] * len(calls)
    for c, out in zip(order, done):
        results[c] = out
    return results


def _makespan(works: list) -> float:
    """The finish time of `works` claimed largest first by NUM_THREADS threads."""
    loads = [0] * NUM_THREADS
    for w in sorted(works, reverse=True):
        loads[loads.index(min(loads))] += w
    return max(loads)


def flipped(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a @ b runs as (b^T @ a^T)^T: a a C-ordered float matrix with at least eight
    times fewer rows (M > 1) than b has columns (N), b a transposed C-ordered matrix (x @
    W^T), K >= 128. OpenBLAS (the only BLAS this is measured on) is faster that way round
    where M < N: 0.50-0.95 of the time over eight shapes from [8, 512] x [512, 2048] to
    [256, 256] x [256, 1024] at one thread (M > N: 1.07-1.58). The result is a column-major
    view, which costs its reader: flipped, the MLP step's [256, 10] x [10, 512] made the
    step 1.04x slower and the RNN's [32, 128] x [128, 128] 1.025x, where its [32, 512] x
    [512, 512] made it 0.92x; hence the margins (docs/performance.md, session 28)."""
    return (a.ndim == 2 and b.ndim == 2 and 1 < a.shape[0] and 8 * a.shape[0] <= b.shape[1]
            and a.shape[1] >= 128 and a.dtype.kind in "fc" and a.flags.c_contiguous
            and b.flags.f_contiguous and not b.flags.c_contiguous
            and blas_threads() is not None)


def _np_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul(a, b), the other way round where `flipped` says so."""
    if flipped(a, b):
        return np.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2)).swapaxes(-1, -2)
    return np.matmul(a, b)


def matmul(a: np.ndarray, b: np.ndarray, alone: bool = False) -> np.ndarray:
    """np.matmul(a, b) for [batch.., M, K] @ [batch.., K, N] (equal batch dims); `alone`:
    on this thread, the BLAS's thread count as it is (products_together set it to one)."""
    if flipped(a, b):                 # (b^T a^T)^T, a column-major view
        return matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2), alone).swapaxes(-1, -2)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[:-2]
    if alone:
        out = aligned_empty(batch + (m, n), np.result_type(a, b))
        return np.matmul(a, b, out=out)
    blas = blas_threads()
    if blas is None or a.dtype.kind not in "fc":
        return np.matmul(a, b)
    if NUM_THREADS == 1 or math.prod(batch) * m * k * n < SMALL:
        with _blas_at_one_thread(blas):           # this thread alone; BLAS's threads stay idle
            return np.matmul(a, b)
    out = aligned_empty(batch + (m, n), np.result_type(a, b))     # (the next kernels read it)
    pieces = CHUNKS_PER_THREAD * NUM_THREADS
    if batch:                     # chunks of batch entries, indexed in place
        parts = _batch_chunks(batch, BATCH_CHUNKS_PER_THREAD * NUM_THREADS)
    elif m >= n:                  # blocks of rows: each packs all of b again
        size = max(MIN_ROWS, -(-m // pieces))
        parts = [((slice(i, i + size),), (slice(None),)) for i in range(0, m, size)]
    else:                         # blocks of columns: each packs all of a again
        size = max(MIN_ROWS, -(-n // pieces))
        parts = [((slice(None),), (slice(None), slice(i, i + size))) for i in range(0, n, size)]
    claim = itertools.count().__next__                     # atomic under the GIL

    def work_on_chunks():
        while (c := claim()) < len(parts):
            sa, sb = parts[c]
            so = sa if batch else (sa[0], sb[-1])
            np.matmul(a[sa], b[sb], out=out[so])

    with _blas_at_one_thread(blas):
        on_all_threads(work_on_chunks)
    return out


class _OneBlasThread:
    """`with one_blas_thread:` keeps the BLAS (where its thread count can be set) at one
    thread while the block runs, and while any other thread's such block runs (a count of
    open blocks; the first to open saves the BLAS's count, the last to close restores it).
    The compiled drivers run their loops (scan, while) inside one: each small product of
    the body then finds the BLAS at one thread and runs as it is, where setting and
    restoring the count around it took 2 us (half of a [32, 64] @ [64, 32] product's time
    through Product). Whatever else calls the BLAS or LAPACK inside such a loop (an impl
    of a decomposition, a callback) runs at one thread too."""

    def __init__(self):
        self.open = 0
        self.saved = None

    def __enter__(self):
        blas = blas_threads()
        if blas is not None:
            with _lock:
                if self.open == 0:
                    self.saved = blas[1]()
                    blas[0](1)
                self.open += 1
        return self

    def __exit__(self, *exc):
        blas = _BLAS
        if blas is not None:
            with _lock:
                if self.open > 0:              # (0: a section closing in a forked child)
                    self.open -= 1
                    if self.open == 0:
                        blas[0](self.saved)
        return False


one_blas_thread = _OneBlasThread()


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the other threads' sections will never
    close there, and a lock they held would never be released. The child starts with no
    section open, the BLAS's count as it was before the sections, and a new lock."""
    global _lock
    _lock = threading.Lock()
    if one_blas_thread.open and _BLAS is not None:
        _BLAS[0](one_blas_thread.saved)
    one_blas_thread.open = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _blas_at_one_thread:                  # used as `with _blas_at_one_thread(blas):`
    """The BLAS (`blas_threads()`: its setter and getter) at one thread for the block, under
    _lock (one such block at a time), its thread count restored after. A class, not a
    generator context manager: a Product keeps one and enters it for each small product
    (0.3 us against 1.5). Only the holder of _lock is inside, so one object may serve
    several threads."""

    __slots__ = ("blas", "lock", "before")

    def __init__(self, blas):
        self.blas = blas

    def __enter__(self):
        self.lock = lock = _lock                 # (the one acquired: a fork replaces _lock)
        lock.acquire()
        try:
            self.before = self.blas[1]()
            self.blas[0](1)
        except BaseException:
            lock.release()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.blas[0](self.before)
        finally:
            self.lock.release()
        return False


def _batch_chunks(batch: tuple, pieces: int) -> list:
    """About `pieces` chunks of the batch dims, as index tuples (ints for the leading dims,
    a slice of the next) that a, b and out are indexed with as they are. Flattening the
    batch first would copy both operands whenever its dims do not merge, as for q and k^T
    viewed in a [B, T, 3·D] projection (the GPT step's q @ k^T ran at 18 GF/s so)."""
    k = 0                                 # dims before k are indexed one entry at a time
    while k < len(batch) - 1 and math.prod(batch[:k + 1]) < pieces:
        k += 1
    outer = math.prod(batch[:k])
    size = -(-batch[k] // -(-pieces // outer))
    return [(idx + (slice(i, i + size),),) * 2
            for idx in itertools.product(*map(range, batch[:k]))
            for i in range(0, batch[k], size)]

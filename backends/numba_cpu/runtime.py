"""Helpers that the generated modules of the numba backend call inside their kernels.

Owns: `scalar_of` (a rank-0 buffer, 0-d array or NumPy scalar, as a numba scalar), integer
division and remainder with lax's rounding (toward zero; x / 0 gives 0, as the NumPy
reference), `fmaximum`/`fminimum` (LLVM's NaN-propagating maximum/minimum: np.maximum's
semantics, and a max-reduction loop over them vectorizes, where `v if v > m else m` with a
NaN check does not: 1000x1000 f32 row max 59 us against 520 us), the reductions'
accumulation steps `radd`/`rmaximum`/`rminimum` (the only instructions of a kernel with
fast-math flags), `flat` (an array's flat view, cheap to compile: a kernel's rank-0
output), the threaded execution of large kernels (`fetch_add`, `run_threaded`, below) and
of independent small ones (`run_together`), the kernels' arguments (`writable`), the CPUs
this process may use (`usable_cpus`), and `RUNTIME_STAMP`, a hash of this file that the
code generator writes into every generated module (numba's on-disk cache does not see
changes in helper modules, so a change here must change the generated source). Imports only
numpy, numba and llvmlite (numba's arraymath without scipy.linalg: see below).
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import itertools
import os
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload
from numba.np.arrayobj import make_array, populate_array


def _import_arraymath_without_scipy_linalg() -> None:
    """Import numba.np.arraymath, which numba's CPU target loads before it compiles or
    loads any function, without the `scipy.linalg` package it imports on the way.

    arraymath checks at import that BLAS is there by importing scipy.linalg.cython_blas,
    and Python imports a package before its submodule: scipy.linalg's __init__ (its
    decompositions, scipy's array-API layer) took 0.11-0.20 s of the 0.47-0.55 s that
    importing this module and starting numba's CPU target took on the 2-core machine, in
    every process (a warm first call, each compile child); 0.23-0.32 s without it.
    fnad's kernels call no BLAS from numba. Here the cython_blas extension is loaded from
    its file alone (3 ms) and stands in sys.modules while arraymath imports; the entry is
    then removed, so that a later `import scipy.linalg.cython_blas` (numba's np.dot,
    the user's code) imports the package as usual and gets the same extension module.
    Where scipy.linalg (or arraymath) is already imported, or the file is not found, this
    does nothing special."""
    name = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    try:
        scipy = importlib.util.find_spec("scipy")
        where = [os.path.join(d, "linalg") for d in scipy.submodule_search_locations]
        spec = importlib.machinery.PathFinder.find_spec(name, where)
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            raise ImportError(f"{name} is not an extension module here")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    except (ImportError, AttributeError, TypeError, OSError):
        sys.modules.pop(name, None)          # arraymath imports scipy.linalg as usual
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        sys.modules.pop(name, None)


_import_arraymath_without_scipy_linalg()
_njit = numba.njit(error_model="numpy", cache=True, no_cfunc_wrapper=True)   # kernels.py

RUNTIME_STAMP = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:12]


def scalar_of(x):
    """The value of a rank-0 buffer: `x[()]` for a 0-d array, x itself for a scalar."""
    return x[()] if isinstance(x, np.ndarray) else x


@overload(scalar_of, inline="always")
def _scalar_of_overload(x):
    if isinstance(x, types.Array):
        return lambda x: x[()]
    return lambda x: x


@_njit
def idiv(a, b):
    """a / b for integers, rounded toward zero (lax.div); 0 where b == 0."""
    if b == 0:
        return a - a                                   # 0 of a's type
    if b == -1:
        return -a                                      # wraps at the minimum, no trap
    q = a // b
    if q * b != a and (a < 0) != (b < 0):              # floor -> toward zero
        q += 1
    return q


@_njit
def irem(a, b):
    """a - b * idiv(a, b): the remainder with the sign of a (np.fmod); 0 where b == 0."""
    if b == 0 or b == -1:
        return a - a
    return a - b * idiv(a, b)


def _binary_float_intrinsic(llvm_name: str, doc: str, flags: tuple = ()):
    @intrinsic
    def fn(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            t = args[0].type
            f = builder.module.declare_intrinsic(llvm_name, [t], ir.FunctionType(t, [t, t]))
            return builder.call(f, args, fastmath=flags)
        return a(a, b), codegen
    fn.__doc__ = doc
    return fn


def _binary_float_op(op: str, doc: str, flags: tuple):
    @intrinsic
    def fn(typingctx, a, b):
        if a not in (types.float32, types.float64) or a != b:
            return None

        def codegen(context, builder, sig, args):
            return getattr(builder, op)(args[0], args[1], flags=flags)
        return a(a, b), codegen
    fn.__doc__ = doc
    return fn


fmaximum = _binary_float_intrinsic("llvm.maximum", "max(a, b); NaN if either is NaN.")
fminimum = _binary_float_intrinsic("llvm.minimum", "min(a, b); NaN if either is NaN.")

# The accumulation steps of float reductions. Kernels are compiled without fast-math flags
# (so that a fused a*b + c rounds twice, as NumPy does, and x / c is a division), but a
# reduction loop vectorizes only when its accumulator may be reassociated: these carry the
# flags on that one instruction (1000x1000 f32 row sums 44 us against 770 us without;
# a max with `nsz` 60 us against 125 us). NaN still propagates (no `nnan`).
radd = _binary_float_op("fadd", "a + b, reassociable (a sum's accumulation step).",
                        ("reassoc", "nsz"))
rmaximum = _binary_float_intrinsic("llvm.maximum", "fmaximum for a max-reduction's step.",
                                   ("reassoc", "nsz"))
rminimum = _binary_float_intrinsic("llvm.minimum", "fminimum for a min-reduction's step.",
                                   ("reassoc", "nsz"))


@intrinsic
def wide_vectors(typingctx):
    """Called first in a kernel: marks the kernel's LLVM function "prefer-vector-width"="512".
    LLVM tunes for 256-bit vectors on Intel's AVX-512 CPUs (its `prefer-256-bit` tuning, from
    Skylake-SP to Sapphire Rapids), so numba's loops there used half of each zmm register;
    with the mark they use all of it (an inlined exp_f32 loop over 16K f32 in cache 9.4 ->
    6.9 us on Sapphire Rapids). Where 512-bit vectors are not legal (AVX2) LLVM keeps the
    widest that is."""
    def codegen(context, builder, sig, args):
        # llvmlite's FunctionAttributes knows only LLVM's enum attributes; a string attribute
        # is written out as given (set.add skips its check of the name)
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def flat(typingctx, a):
    """A C-contiguous array as a 1-D view of its memory: `a.reshape(-1)` without numba's
    reshape, whose lowering (a call into its no-copy-reshape helper, shape and stride
    buffers) cost ~12 ms of compile time per array a kernel flattens: a third of a small
    kernel's (4 arrays: 190 against 145 ms per kernel). Kernels now get their other arrays
    flat from the driver (codegen._Driver.group) and use this for a rank-0 output only."""
    if not (isinstance(a, types.Array) and a.layout == "C"):
        return None
    flat_type = a.copy(ndim=1, layout="C")

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, value=args[0])
        out = make_array(flat_type)(context, builder)
        populate_array(out, data=src.data, shape=cgutils.pack_array(builder, [src.nitems]),
                       strides=cgutils.pack_array(builder, [src.itemsize]),
                       itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, flat_type, out._getvalue())
    return flat_type(a), codegen


# ---- threads -------------------------------------------------------------------------------
# A large kernel runs in chunks of its outermost loop that threads claim one at a time from
# a shared counter (`fetch_add`): the calling thread and the pool's workers all run the
# same nogil kernel until no chunk is left. Measured on the 2-core machine this was built
# on, numba's `prange` (OpenMP / workqueue) halves a 1M-element kernel when the machine is
# idle but takes 10-15 ms instead of 0.8 ms when other processes keep the cores busy: its
# fork-join waits for a descheduled thread's fixed share. Here the caller simply does the
# chunks a late worker did not claim, and a task that never started is cancelled.
@intrinsic
def fetch_add(typingctx, counter):
    """counter[0] += 1 atomically (an int64 array); returns the old value, as a uint64 (a
    chunk number, computed with the kernel's unsigned sizes)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", arr.data, ir.Constant(ir.IntType(64), 1), "seq_cst")
    return types.uint64(counter), codegen


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                             # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _threads() -> int:
    env = os.environ.get("FNAD_NUM_THREADS")
    return max(1, int(env)) if env else usable_cpus()


NUM_THREADS = _threads()
_pool: ThreadPoolExecutor | None = None


def thread_pool() -> ThreadPoolExecutor:
    """The NUM_THREADS - 1 workers that help the calling thread (kernels, gemm.py)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(NUM_THREADS - 1, thread_name_prefix="fnad-numba")
    return _pool


def on_all_threads(work, *args) -> None:
    """work(*args) on this thread and on the NUM_THREADS - 1 workers, returning when all are
    done; `work` shares its work out itself (a counter that each thread claims from), so a
    worker's task that has not started when the caller is done is cancelled."""
    if NUM_THREADS == 1:
        work(*args)
        return
    pool = thread_pool()
    futures = [pool.submit(work, *args) for _ in range(NUM_THREADS - 1)]
    work(*args)
    for f in futures:
        if not f.cancel():
            f.result()


def run_threaded(kernel, args: tuple, chunks: int) -> None:
    """kernel(*args, counter, chunks) on all threads: each claims chunks from `counter`."""
    on_all_threads(kernel, *args, np.zeros(1, np.int64), chunks)


def run_together(calls: tuple) -> list:
    """[kernel(*args) for kernel, args in calls], the calls shared out among all threads,
    each claiming the next call until none is left. For independent kernels each too small
    to split (AdamW's update of each parameter, RoPE's two halves read from the same strided
    views): kernels are nogil, so they overlap."""
    results = [None] * len(calls)
    claim = itertools.count().__next__                 # atomic under the GIL

    def work():
        while (c := claim()) < len(calls):
            kernel, args = calls[c]
            results[c] = kernel(*args)
    on_all_threads(work)
    return results


# ---- arguments of a kernel --------------------------------------------------------------------
# numba compiles a function again for a read-only array argument (another type), and the
# children that compile a program's kernels (precompile.py) know only the arguments' dtypes
# and ranks. Read-only arrays do reach kernels: a captured constant (the GPT step's causal
# mask), iota's broadcast view, NumPy views of jax arrays. Each then cost a compile in the
# main thread at the first compiled call (about 0.35 s each, two in the GPT step). The driver
# passes the inputs it did not make itself through these (rank-1 arguments of the program
# excepted: codegen._Driver.group): a read-only one is copied.
def writable(x):
    """x as a writable C-contiguous array: x itself where it is one, else a copy."""
    return np.ascontiguousarray(x) if x.flags.writeable else np.array(x, order="C")


def writable_flat(x):
    """writable(x), flat: a view where x is a writable C-contiguous array, else a copy."""
    return x.ravel() if x.flags.writeable else np.array(x, order="C").ravel()


# ---- views read in place -------------------------------------------------------------------
def strided(x) -> tuple:
    """(flat, strides) for a kernel that reads x by strides (kernels.kernel_source): a 1-D
    array over x's memory from its first element to its last, and x's strides in elements.
    A view such as RoPE's x[..., ::2] of a transposed projection is then read where it is
    instead of copied first (the GPT step of benchmarks/gpt_step.py made 64 such copies).
    Negative strides (a reversed view), strides that are not whole elements, or a read-only
    view (np.broadcast_to's: numba would compile the kernel again for read-only arrays):
    a copy."""
    item = x.itemsize
    if not x.flags.writeable or any(s < 0 or s % item for s in x.strides):
        x = np.array(x, order="C")
    steps = tuple(s // item for s in x.strides)
    extent = 1 + sum((n - 1) * s for n, s in zip(x.shape, steps))
    return np.lib.stride_tricks.as_strided(x, (extent,), (item,)), steps

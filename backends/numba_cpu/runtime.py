"""Helpers that the generated modules of the numba backend call inside their kernels.

Owns: `scalar_of` (a rank-0 buffer, 0-d array or NumPy scalar, as a numba scalar), integer
division and remainder with lax's rounding (toward zero; x / 0 gives 0, as the NumPy
reference), `fmaximum`/`fminimum` (LLVM's NaN-propagating maximum/minimum: np.maximum's
semantics, and a max-reduction loop over them vectorizes, where `v if v > m else m` with a
NaN check does not: 1000x1000 f32 row max 59 us against 520 us), the reductions'
accumulation steps `radd`/`rmaximum`/`rminimum` (the only instructions of a kernel with
fast-math flags), `flat` (an array's flat view, cheap to compile: a kernel's rank-0
output), the threaded execution of large kernels (`fetch_add`, `run_threaded`, below) and
of independent small ones (`run_together`) on worker threads that look for the next task
without the GIL before they sleep (`_Workers`, `FNAD_SPIN_US`), the kernels' arguments
(`writable`), the CPUs this process may use (`usable_cpus`), and `RUNTIME_STAMP`, a hash of
this file that the code generator writes into every generated module (numba's on-disk cache
does not see changes in helper modules, so a change here must change the generated source).
It also loads compiled code from numba's disk cache without starting the rest of numba
(`load_cached`) and prepares numba's compiles (`before_compiling`). Imports only numpy, numba
and llvmlite.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import itertools
import math
import os
import pathlib
import platform
import sys
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic, overload


def before_compiling() -> None:
    """Import numba.np.arraymath, which numba's CPU target imports before it compiles any
    function (its `refresh`), without the `scipy.linalg` package it imports on the way.
    Called where fnad is about to compile (Compiled._first when a kernel is not in the disk
    cache, precompile.py): a process that only loads compiled code (load_cached) does not
    import arraymath (15-20 ms here). (It imports numba.np.arrayobj, 25-30 ms: the cached
    environments of kernels that use numba's array helpers name that module.)

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
    does nothing special. Should numba compile without it (a path that does not call it),
    it imports scipy.linalg: slower, the same code."""
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


_njit = numba.njit(error_model="numpy", cache=True, no_cfunc_wrapper=True)   # kernels.py

RUNTIME_STAMP = hashlib.sha256(pathlib.Path(__file__).read_bytes()).hexdigest()[:12]


def load_cached(dispatcher, argtypes: tuple) -> bool:
    """Load `dispatcher`'s machine code for `argtypes` (numba types) from numba's disk
    cache, as `dispatcher.compile(argtypes)` does on a cache hit, without the `refresh` of
    numba's CPU target that numba runs first: importing and registering all of numba's
    typing and lowering (110-150 ms here, once per process), which compiling needs and
    loading compiled code does not. Loaded code links only against numba's helper library
    (installed with the target context) and its runtime (NRT, initialized here). A compile
    later in the process refreshes as usual. True when the code is loaded (or already
    was); False where the cache has no entry for it or numba's internals are not the ones
    this reads (numba 0.6x's `Dispatcher._cache`): the caller's first call then loads or
    compiles it the usual way."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys
    argtypes = tuple(argtypes)
    try:
        if argtypes in dispatcher.overloads:
            return True
        with global_compiler_lock:
            if argtypes in dispatcher.overloads:
                return True
            ctx, cache = dispatcher.targetctx, dispatcher._cache
            rtsys.initialize(ctx)
            with cache._guard_against_spurious_io_errors():
                cres = cache._load_overload(argtypes, ctx)
            if cres is None or cres.objectmode:
                return False
            ctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            dispatcher.add_overload(cres)
            dispatcher._cache_hits[argtypes] += 1
    except (AttributeError, TypeError):
        return False
    return True


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


@_njit
def udiv(a, b):
    """a / b for unsigned integers (lax.div); 0 where b == 0. idiv's comparisons with -1 would
    make numba compute uint64 in float64."""
    if b == 0:
        return a - a
    return a // b


@_njit
def urem(a, b):
    """a % b for unsigned integers (lax.rem); 0 where b == 0."""
    if b == 0:
        return a - a
    return a % b


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
        from numba.np.arrayobj import make_array, populate_array
        src = make_array(sig.args[0])(context, builder, value=args[0])
        out = make_array(flat_type)(context, builder)
        populate_array(out, data=src.data, shape=cgutils.pack_array(builder, [src.nitems]),
                       strides=cgutils.pack_array(builder, [src.itemsize]),
                       itemsize=src.itemsize, meminfo=src.meminfo, parent=src.parent)
        return impl_ret_borrowed(context, builder, flat_type, out._getvalue())
    return flat_type(a), codegen



@intrinsic
def empty(typingctx, size, dtype):
    """np.empty(size, dtype) for an int `size` (a kernel's flat outputs and row buffers) or
    np.empty((), dtype): the array allocated through numba's runtime (NRT, aligned) as
    np.empty's lowering allocates it, but in the kernel's own code. np.empty is implemented
    by functions of numba.np.arrayobj, whose environments a kernel's cached code then
    names: loading it imports that module (25-30 ms of a warm-cache first call here), and
    compiling it compiles them. Sizes come from the program's shapes, so numba's check for
    an overflowing size is left out."""
    if isinstance(dtype, types.NumberClass):
        dt = dtype.instance_type
    elif isinstance(dtype, types.DType):
        dt = dtype.dtype
    else:
        return None
    if isinstance(size, types.Integer):
        ndim = 1
    elif isinstance(size, types.BaseTuple) and len(size) == 0:
        ndim = 0
    else:
        return None
    array_type = types.Array(dt, ndim, "C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import make_array, populate_array
        out = make_array(array_type)(context, builder)
        itemsize = context.get_constant(
            types.intp, context.get_abi_sizeof(context.get_data_type(dt)))
        if ndim:
            n = context.cast(builder, args[0], sig.args[0], types.intp)
            shape, strides, nbytes = [n], [itemsize], builder.mul(n, itemsize)
        else:
            shape, strides, nbytes = [], [], itemsize
        meminfo = context.nrt.meminfo_alloc_aligned(
            builder, size=nbytes, align=context.get_preferred_array_alignment(dt))
        data = context.nrt.meminfo_data(builder, meminfo)
        populate_array(out, data=builder.bitcast(data, out.data.type), shape=shape,
                       strides=strides, itemsize=itemsize, meminfo=meminfo)
        return out._getvalue()
    return array_type(size, dtype), codegen

# ---- threads -------------------------------------------------------------------------------
# A large kernel runs in chunks of its outermost loop that threads claim one at a time from
# a shared counter (`fetch_add`): the calling thread and the pool's workers all run the
# same nogil kernel until no chunk is left. Measured on the 2-core machine this was built
# on, numba's `prange` (OpenMP / workqueue) halves a 1M-element kernel when the machine is
# idle but takes 10-15 ms instead of 0.8 ms when other processes keep the cores busy: its
# fork-join waits for a descheduled thread's fixed share. Here the caller simply does the
# chunks a late worker did not claim, and a worker that comes after the caller is done
# skips the task (`_Workers`).
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


def _env_number(name: str, kind, what: str):
    """The environment variable `name` as a `kind` (int or float), None where it is unset."""
    env = os.environ.get(name)
    if not env:
        return None
    try:
        return kind(env)
    except ValueError:
        raise ValueError(f"{name}={env!r}: expected {what}") from None


def _threads() -> int:
    n = _env_number("FNAD_NUM_THREADS", int, "a whole number of threads, such as 2")
    return max(1, n) if n is not None else usable_cpus()


NUM_THREADS = _threads()
# How long a worker looks for the next task before it sleeps, in microseconds
# (FNAD_SPIN_US; 0: it sleeps at once). Waking a sleeping thread took 50-270 us on the
# 2-core VM this was measured on (a futex wake of an idle vCPU), against 1-2 ms for a
# chunk of the GPT step's products: the worker often started late or not at all. One
# chunked 1024x768 @ 768x256 product: 2.25 ms with sleeping workers, 1.59 ms with these
# looking for 1 ms without the GIL. Per round of the GPT step, in one process:
# spinning against the same workers sleeping 0.97-0.98, the MLP step 0.95
# (benchmarks/worker_spin.py); these workers against the ThreadPoolExecutor they replaced
# 0.84-0.88 (five A/B runs), more than the spinning explains. Budgets of 0.3, 3 and 10 ms
# were within 1% of 1 ms.
SPIN_US = _env_number("FNAD_SPIN_US", float, "microseconds, such as 1000 (0: no spinning)")
SPIN_US = 1000.0 if SPIN_US is None else SPIN_US


@intrinsic
def _look(typingctx, flag):
    """flag[0] (an int64 array) read afresh on every call (an atomic load: LLVM may not keep
    it in a register across a loop), after a `pause` on x86 (the spin-wait hint)."""
    if not (isinstance(flag, types.Array) and flag.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        if platform.machine().lower() in ("x86_64", "amd64"):
            pause = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(pause, [])
        return builder.load_atomic(arr.data, "acquire", 8)
    return types.int64(flag), codegen


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def _spin(flag, value, rounds):
    """Whether flag[0] became other than `value` within `rounds` looks (no GIL held)."""
    for _ in range(rounds):
        if _look(flag) != value:
            return True
    return False


class _Task:
    __slots__ = ("work", "args", "closed", "error")

    def __init__(self, work, args):
        self.work, self.args, self.closed, self.error = work, args, False, None


class _Workers:
    """NUM_THREADS - 1 daemon threads that run each task `run` posts beside the caller.
    After a task a worker spins (without the GIL, `_spin`; once `start_spinning` was called)
    for SPIN_US on the task counter `posted`, then sleeps on a condition; the caller, done
    with its share, spins likewise on `busy` (the workers inside the task) before it
    sleeps. A worker that comes late to a closed task skips it. One caller at a time has
    the workers: another thread's call (or a call from inside a task) runs its work
    alone."""

    def __init__(self, n: int):
        self.posted = np.zeros(1, np.int64)      # tasks posted so far
        self.busy = np.zeros(1, np.int64)        # workers inside the current task
        self.task: _Task | None = None
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.owner = threading.Lock()            # held by the caller whose task runs
        self.sleeping = 0                        # threads waiting on cond
        self.rounds = 0                          # looks in SPIN_US: 0 until _spin is loaded
        self.threads = [threading.Thread(target=self._serve, name=f"fnad-numba-{i}",
                                         daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _calibrate(self) -> None:
        """Load (or compile) _spin in this worker, not in the caller, and count its looks in
        SPIN_US."""
        if SPIN_US <= 0:
            return
        probe, looks = np.zeros(1, np.int64), 20_000
        if not load_cached(_spin, (types.Array(types.int64, 1, "C"), types.int64,
                                   types.int64)):
            before_compiling()
        _spin(probe, 0, 1)
        t = time.perf_counter()
        _spin(probe, 0, looks)
        per_us = looks / max((time.perf_counter() - t) * 1e6, 1.0)
        self.rounds = max(1, int(per_us * SPIN_US))

    def _serve(self) -> None:
        seen, calibrated = 0, False
        while True:
            if _spinning and not calibrated:
                calibrated = True
                try:
                    self._calibrate()
                except Exception:  # noqa: BLE001 - no spinning: threads sleep at once
                    self.rounds = 0
            if not (self.rounds and _spin(self.posted, seen, self.rounds)):
                with self.cond:
                    self.sleeping += 1
                    while self.posted[0] == seen:
                        self.cond.wait()
                    self.sleeping -= 1
            with self.lock:
                seen = int(self.posted[0])
                task = self.task
                if task is None or task.closed:
                    continue
                self.busy[0] += 1
            try:
                task.work(*task.args)
            except BaseException as e:  # noqa: BLE001 - raised in the caller
                task.error = task.error or e
            finally:
                with self.lock:
                    self.busy[0] -= 1
                    if self.sleeping:
                        self.cond.notify_all()

    def run(self, work, args: tuple) -> None:
        if not self.owner.acquire(blocking=False):
            work(*args)
            return
        try:
            with self.lock:
                task = self.task = _Task(work, args)
                self.posted[0] += 1
                if self.sleeping:
                    self.cond.notify_all()
            try:
                work(*args)
            finally:
                with self.lock:
                    task.closed = True
                self._wait_for_workers()
            if task.error is not None:
                raise task.error
        finally:
            self.owner.release()

    def _wait_for_workers(self) -> None:
        busy = self.busy
        while busy[0] > 0:
            if self.rounds and _spin(busy, int(busy[0]), self.rounds):
                continue
            with self.cond:
                self.sleeping += 1
                try:
                    while busy[0] > 0:
                        self.cond.wait()
                finally:                         # (an interrupt while waiting)
                    self.sleeping -= 1


_workers: _Workers | None = None
_workers_lock = threading.Lock()
_spinning = False          # set by start_spinning


def start_spinning() -> None:
    """Let the workers spin from their next task on. The code generator calls it after a
    program's first compiled call: numba's target is then up and `_spin` loads in a few ms.
    Before (the NumPy interpreter of a background compile), loading it would start numba in
    this process, 0.1-0.3 s of GIL-bound work beside the interpreter, and compile `_spin`
    the first time."""
    global _spinning
    _spinning = True


def _forget_workers() -> None:                   # a forked child has none of the threads
    global _workers, _workers_lock
    _workers, _workers_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def workers() -> _Workers:
    """The NUM_THREADS - 1 workers that help the calling thread (kernels, gemm.py)."""
    global _workers
    if _workers is None:
        with _workers_lock:
            if _workers is None:
                _workers = _Workers(NUM_THREADS - 1)
    return _workers


def on_all_threads(work, *args) -> None:
    """work(*args) on this thread and on the NUM_THREADS - 1 workers, returning when all are
    done (an exception in any is raised here); `work` shares its work out itself (a counter
    that each thread claims from), so a worker that has not started when the caller is done
    skips it."""
    if NUM_THREADS == 1:
        work(*args)
        return
    workers().run(work, args)


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


OUTPUT_ALIGN = 64                    # bytes: a cache line (llvm_codegen.OUTPUT_ALIGN too)


def aligned_empty(shape: tuple, dtype) -> np.ndarray:
    """np.empty(shape, dtype) starting on an OUTPUT_ALIGN-byte boundary (a view of a
    slightly larger block), for threaded kernels' outputs and gemm.py's products: vector
    stores into them then do not straddle cache lines, as in numba's own allocations
    (np.empty's large blocks start 16 bytes past a page; llvm_codegen's builtins align
    their outputs alike). 1.5 us against np.empty's 0.15: for large outputs only."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    whole = np.empty(n + OUTPUT_ALIGN // dtype.itemsize, dtype)
    first = (-whole.ctypes.data % OUTPUT_ALIGN) // dtype.itemsize
    return whole[first:first + n].reshape(shape)


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

"""The host side of the numba backend's generated drivers: the threads that run large
kernels in chunks and small independent ones side by side, and the arrays the drivers pass.

Owns the CPUs this process may use (`usable_cpus`, `NUM_THREADS`), the worker threads that
help the calling thread (`_Workers`, `on_all_threads`, `run_threaded`, `run_together`; they
look for the next task without the GIL for a while before they sleep, `FNAD_SPIN_US`), the
kernels' array arguments (`writable`, `writable_flat`, `strided`) and outputs that start on
a cache line (`aligned_empty`). Imports only NumPy and llvmlite (the spin loop is a few
lines of LLVM IR, `_spin`): a program whose kernels fnad's own LLVM translator compiled
(llvm_kernels.py) runs without importing numba, whose import alone took 0.3-0.45 s of a
fresh process's first call. The helpers the kernels themselves call (atomic chunk counters,
the reductions' steps, allocation) are numba intrinsics in runtime.py.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import os
import platform
import threading
import time

import numpy as np


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


class _SpinLoop:
    """`spin(address, value, rounds)`: 1 if the int64 at `address` became other than
    `value` within `rounds` looks, each an atomic load after a `pause` on x86 (the spin-wait
    hint), else 0 (an int64: a C bool's upper bits in a register are not defined).
    Machine code from a few lines of LLVM IR (built at the first call, in the thread that
    makes it: a few ms), called through ctypes, which releases the GIL meanwhile."""

    def __init__(self):
        import llvmlite.binding as llvm
        from llvmlite import ir
        i64 = ir.IntType(64)
        module = ir.Module(name="fnad_spin")
        module.triple = llvm.get_process_triple()
        fn = ir.Function(module, ir.FunctionType(i64, [i64.as_pointer(), i64, i64]), "spin")
        flag, value, rounds = fn.args
        entry, test, look, again, seen, gave_up = (
            fn.append_basic_block(n) for n in ("entry", "test", "look", "again", "seen",
                                               "gave_up"))
        b = ir.IRBuilder(entry)
        b.branch(test)
        b.position_at_end(test)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        b.cbranch(b.icmp_signed("<", i, rounds), look, gave_up)
        b.position_at_end(look)
        if platform.machine().lower() in ("x86_64", "amd64"):
            b.call(ir.Function(module, ir.FunctionType(ir.VoidType(), []),
                               "llvm.x86.sse2.pause"), [])
        now = b.load_atomic(flag, "acquire", 8)
        b.cbranch(b.icmp_signed("!=", now, value), seen, again)
        b.position_at_end(again)
        i.add_incoming(b.add(i, ir.Constant(i64, 1)), again)
        b.branch(test)
        b.position_at_end(seen)
        b.ret(ir.Constant(i64, 1))
        b.position_at_end(gave_up)
        b.ret(ir.Constant(i64, 0))
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        machine = target.create_target_machine(opt=2, jit=True)
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
        self._engine = llvm.create_mcjit_compiler(parsed, machine)
        self._engine.finalize_object()
        self.spin = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_int64)(self._engine.get_function_address("spin"))


_spin_loop: _SpinLoop | None = None
_spin_lock = threading.Lock()


def _spin(flag: np.ndarray, value: int, rounds: int) -> bool:
    """Whether flag[0] (an int64 array) became other than `value` within `rounds` looks,
    without the GIL (`_SpinLoop`)."""
    return bool(_spinner()(flag.ctypes.data, value, rounds))


def _spinner():
    """The compiled spin loop's ctypes function (built at the first call)."""
    global _spin_loop
    if _spin_loop is None:
        with _spin_lock:
            if _spin_loop is None:
                _spin_loop = _SpinLoop()
    return _spin_loop.spin


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
        self.rounds = 0                          # looks in SPIN_US: 0 until calibrated
        self.spin = None                         # _spinner(), once calibrated
        self._posted_at, self._busy_at = self.posted.ctypes.data, self.busy.ctypes.data
        self.threads = [threading.Thread(target=self._serve, name=f"fnad-numba-{i}",
                                         daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _calibrate(self) -> None:
        """Build the spin loop in this worker, not in the caller, and count its looks in
        SPIN_US."""
        if SPIN_US <= 0:
            return
        spin, probe, looks = _spinner(), np.zeros(1, np.int64), 20_000
        spin(probe.ctypes.data, 0, 1)
        t = time.perf_counter()
        spin(probe.ctypes.data, 0, looks)
        per_us = looks / max((time.perf_counter() - t) * 1e6, 1.0)
        self.spin, self.rounds = spin, max(1, int(per_us * SPIN_US))

    def _serve(self) -> None:
        seen, calibrated = 0, False
        while True:
            if _spinning and not calibrated:
                calibrated = True
                try:
                    self._calibrate()
                except Exception:  # noqa: BLE001 - no spinning: threads sleep at once
                    self.rounds = 0
            if not (self.rounds and self.spin(self._posted_at, seen, self.rounds)):
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
            if self.rounds and self.spin(self._busy_at, int(busy[0]), self.rounds):
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
    program's first compiled call. Before (the NumPy interpreter of a background compile,
    which the spinning would slow), the workers sleep between tasks."""
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

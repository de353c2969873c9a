"""Compiling a program's kernels in another process (the numba backend's background compile).

    python -m fnad.backends.numba_cpu.precompile  < job.json

The job names kernel modules in the cache dir and the argument types each kernel is called
with (`spec`s recorded by the code generator: ("array", dtype, ndim) for a C-contiguous
array, ("tuple", n) for a tuple of n ints, ("int64",)). The process imports each module,
compiles each signature (numba's `cache=True` writes the machine code to the disk cache)
and leaves a marker file per (kernel, signature) once it is there. The process that asked
then loads the kernels from the disk cache: compiling never holds its GIL.

A program with many kernels is split between several such processes, one per CPU this
process may use at most (`shares`): each child pays about a second to import numba and fnad
before compiling anything, so each gets at least CHILD_MIN_KERNELS kernels. `start` returns
a `Job` over them, which answers `poll`, `wait` and `returncode` as one process would.

`markers_present` is how a process tells that a program's kernels need no compiling.
`load_when_compiled` loads each kernel into the asking process as soon as a child has it
on disk, so that the first compiled call does not wait for the loading.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import pathlib
import subprocess
import sys
import threading
import time

from fnad.backends.numba_cpu.runtime import before_compiling, load_cached
from fnad.backends.numba_cpu.threads import usable_cpus


def marker(cache: pathlib.Path, name: str, spec: tuple) -> pathlib.Path:
    digest = hashlib.sha256(repr(tuple(map(tuple, spec))).encode()).hexdigest()[:16]
    return cache / f"fnad_{name}.{digest}.ok"


def markers_present(cache: pathlib.Path, signatures: dict) -> bool:
    return all(marker(cache, n, s).exists() for n, specs in signatures.items() for s in specs)


def write_markers(cache: pathlib.Path, signatures: dict) -> None:
    for name, specs in signatures.items():
        for spec in specs:
            marker(cache, name, spec).touch()


CHILD_MIN_KERNELS = 4      # a child's imports cost about as much as compiling 2-3 kernels


def shares(signatures: dict, cost: dict, children: int) -> list[dict]:
    """`signatures` split into at most `children` parts of about equal cost (`cost[name]`
    per signature: longest first, each to the part with the least so far)."""
    parts, load = [{} for _ in range(children)], [0.0] * children
    for name in sorted(signatures, key=lambda n: -cost[n] * len(signatures[n])):
        i = load.index(min(load))
        parts[i][name] = signatures[name]
        load[i] += cost[name] * len(signatures[name])
    return [part for part in parts if part]


class Job:
    """The children compiling one program's kernels, seen as one process: `poll()` is None
    while any runs, then (as `returncode`) the first nonzero exit code, else 0."""

    def __init__(self, procs: list):
        self.procs = procs

    @property
    def returncode(self):
        codes = [p.poll() for p in self.procs]
        if any(c is None for c in codes):
            return None
        return next((c for c in codes if c != 0), 0)

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        for p in self.procs:
            p.wait(timeout)
        return self.returncode


def start(cache: pathlib.Path, signatures: dict) -> Job:
    """Children compiling `signatures` ({kernel name: {spec}}) into `cache`, in parallel
    where there are CPUs and kernels enough (`shares`, weighed by each kernel's source
    length). They run in the cache dir: `python -m` puts its working directory first on
    sys.path, and run from a checkout of fnad (as the README's quickstart is) the source
    tree's `fnad/`, which lacks the installed `fnad.backends`, would shadow the installed
    package."""
    cost = {n: (cache / f"fnad_{n}.py").stat().st_size for n in signatures}
    return Job([_child(cache, part)
                for part in shares(signatures, cost, children(signatures))])


LOAD_POLL = 0.05          # seconds between looks for the markers of compiled kernels


def load_when_compiled(job, kernels, signatures: dict, cache: pathlib.Path) -> threading.Thread:
    """A thread loading each of `kernels` (numba dispatchers, named as in `signatures`) from
    the disk cache at the signatures recorded for it, each as soon as its marker is there,
    until all are loaded or `job` (the children, or one Popen) has ended. The process that
    runs the program interpreted meanwhile then switches to the compiled program without
    paying for the loading at that call (`load`: numba's runtime start-up and a few ms per
    kernel; the GPT step's about 0.1-0.15 s, beside a step of 0.2 s). Loading holds numba's
    compiler lock, so a call of a kernel from the main thread meanwhile waits for it and
    finds it loaded. An error ends the thread: the first compiled call loads again and
    reports it."""
    pending = list(recorded(kernels, signatures))

    def load_pending() -> None:
        try:
            while pending:
                ended = job.poll() is not None   # a last look after the children are done
                for item in list(pending):
                    kernel, spec = item
                    if marker(cache, kernel.__name__, spec).exists():
                        load(kernel, spec)
                        pending.remove(item)
                if ended:
                    return
                time.sleep(LOAD_POLL)
        except Exception:  # noqa: BLE001 - the main thread meets and reports it again
            return

    thread = threading.Thread(target=load_pending, name="fnad-numba-load", daemon=True)
    thread.start()
    return thread


def load(kernel, spec) -> None:
    """Load `kernel` at the signature recorded as `spec` from the disk cache without
    starting the rest of numba (runtime.load_cached), or else through numba's `compile`
    (which loads it the usual way, or compiles it)."""
    sig = numba_signature(spec)
    if not load_cached(kernel, sig):
        before_compiling()
        kernel.compile(sig)


def load_cached_kernels(kernels, signatures: dict) -> bool:
    """Load each of `kernels` at the signatures recorded for it where the disk cache has
    it (runtime.load_cached); the program's first call compiles the others. True when all
    were loaded."""
    loaded = True
    for kernel, spec in recorded(kernels, signatures):
        loaded &= load_cached(kernel, numba_signature(spec))
    return loaded


def recorded(kernels, signatures: dict):
    """(kernel, spec) for each of `kernels` and each signature recorded for it, in order."""
    for kernel in kernels:
        for spec in sorted(signatures.get(kernel.__name__, ())):
            yield kernel, spec


def children(signatures: dict) -> int:
    """How many children `start` splits `signatures` between."""
    return max(1, min(usable_cpus(), math.ceil(len(signatures) / CHILD_MIN_KERNELS)))


def _child(cache: pathlib.Path, signatures: dict) -> subprocess.Popen:
    job = {"dir": str(cache), "kernels": {n: sorted(s) for n, s in signatures.items()}}
    env = dict(os.environ, FNAD_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "fnad.backends.numba_cpu.precompile"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=str(cache))
    proc.stdin.write(json.dumps(job).encode())
    proc.stdin.close()
    return proc


def _numba_type(spec):
    import numba
    import numpy as np
    from numba.core import types
    kind = spec[0]
    if kind == "array":
        return types.Array(numba.from_dtype(np.dtype(spec[1])), spec[2], "C")
    if kind == "tuple":
        return types.UniTuple(types.int64, spec[1])
    if kind == "int64":
        return types.int64
    raise ValueError(f"unknown argument spec {spec!r}")


def numba_signature(specs) -> tuple:
    """The numba argument types of a kernel call recorded as `specs` (one per argument)."""
    return tuple(_numba_type(s) for s in specs)


def main() -> None:
    if hasattr(os, "nice"):     # background work: the program running interpreted meanwhile
        os.nice(10)             # (the user's first calls) gets the CPU first
    from fnad.backends.numba_cpu.codegen import load_module
    from fnad.core import gc_paused
    job = json.load(sys.stdin)
    cache = pathlib.Path(job["dir"])
    before_compiling()
    with gc_paused():         # numba's compiles: 8 % of their time in the cyclic collector
        for name, specs in job["kernels"].items():
            src = (cache / f"fnad_{name}.py").read_text()
            kernel = getattr(load_module(src, name), name)
            for spec in specs:
                kernel.compile(numba_signature(spec))
                marker(cache, name, spec).touch()


if __name__ == "__main__":
    main()

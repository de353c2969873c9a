"""Compiling a program's kernels in another process (the numba backend's background compile).

    python -m fnad.backends.numba_cpu.precompile  < job.json

The job names kernel modules in the cache dir and the argument types each kernel is called
with (`spec`s recorded by the code generator: ("array", dtype, ndim) for a C-contiguous
array, ("tuple", n) for a tuple of n ints, ("int64",)). The process imports each module,
compiles each signature (numba's `cache=True` writes the machine code to the disk cache)
and leaves a marker file per (kernel, signature) once it is there. The process that asked
then loads the kernels from the disk cache: compiling never holds its GIL.

`markers_present` is how a process tells that a program's kernels need no compiling.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys


def marker(cache: pathlib.Path, name: str, spec: tuple) -> pathlib.Path:
    digest = hashlib.sha256(repr(tuple(map(tuple, spec))).encode()).hexdigest()[:16]
    return cache / f"fnad_{name}.{digest}.ok"


def markers_present(cache: pathlib.Path, signatures: dict) -> bool:
    return all(marker(cache, n, s).exists() for n, specs in signatures.items() for s in specs)


def write_markers(cache: pathlib.Path, signatures: dict) -> None:
    for name, specs in signatures.items():
        for spec in specs:
            marker(cache, name, spec).touch()


def start(cache: pathlib.Path, signatures: dict) -> subprocess.Popen:
    """A child process compiling `signatures` ({kernel name: {spec}}) into `cache`. It
    runs in the cache dir: `python -m` puts its working directory first on sys.path, and
    run from a checkout of fnad (as the README's quickstart is) the source tree's `fnad/`,
    which lacks the installed `fnad.backends`, would shadow the installed package."""
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


def main() -> None:
    if hasattr(os, "nice"):     # background work: the program running interpreted meanwhile
        os.nice(10)             # (the user's first calls) gets the CPU first
    from fnad.backends.numba_cpu.codegen import load_module
    job = json.load(sys.stdin)
    cache = pathlib.Path(job["dir"])
    for name, specs in job["kernels"].items():
        src = (cache / f"fnad_{name}.py").read_text()
        kernel = getattr(load_module(src, name), name)
        for spec in specs:
            kernel.compile(tuple(_numba_type(s) for s in spec))
            marker(cache, name, spec).touch()


if __name__ == "__main__":
    main()

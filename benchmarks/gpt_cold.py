"""The GPT step's first call in fresh processes (benchmarks/gpt_step.py's model and step):

    cold     an empty numba disk cache (FNAD_CACHE_DIR a new temp dir): fnad with its
             background compile (the first call runs interpreted) and with it off
             (compile, then run), and jax.jit
             (no persistent cache), each in its own process; `ready` counts up to the
             first result of compiled code (the call after the compile, which loads the
             kernels where that was not done meanwhile), as jax's first call includes its
             first run;
    cached   fresh processes on the now-warm disk cache (target: <= 0.5 s): WARM_RUNS of
             them, the median and the range printed (one process's figure moves by
             +-20 % with the shared machine's phase);
    llvm     the same cold and cached first calls with fnad's default kernel compiler
             (FNAD_KERNEL_COMPILER=llvm): the kernels compiled in this process by fnad's
             translator and llvmlite instead of numba (numba_cpu/llvm_kernels.py), their
             object code kept in the cache dir. The rows above it set
             FNAD_KERNEL_COMPILER=numba.

Each process imports the libraries before the clock starts (numba too where it compiles
the kernels; with the llvm compiler the first call imports no numba, and the clock counts
whatever it does import) and times from the jit call to the first result. Run:

    python benchmarks/gpt_cold.py
"""
from __future__ import annotations

import pathlib
import statistics
import tempfile

from _common import header, in_fresh_process, optional, table

WARM_RUNS = 5

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import gpt_step as g
lib_name = {lib!r}
if lib_name == "jax":
    import jax as lib, jax.numpy as jnp
    nn, jit = lib.nn, lib.jit
else:
    import fnad as lib, fnad.numpy as jnp
    nn, jit = lib.nn, lib.jit
    if {compiler!r} == "numba":   # (which imports it at the first call; outside the clock)
        import numba  # noqa: F401
params, opt, tokens = g.start(lib, jnp, *g.inputs())
step = jit(g.make_step(lib, jnp, nn))
t0 = time.perf_counter()
out = step(params, opt, tokens)
lib.block_until_ready(out)
first = time.perf_counter() - t0
from _common import wait_compiled
ready = first
if lib_name == "fnad" and os.environ["FNAD_BACKGROUND_COMPILE"] == "1":   # ran interpreted
    ready += wait_compiled(step, params, opt, tokens)
    t0 = time.perf_counter()
    lib.block_until_ready(step(params, opt, tokens))  # the first result of compiled code
    ready += time.perf_counter() - t0
print(json.dumps({{"first": first, "ready": ready, "numba": "numba" in sys.modules}}))
"""


def child(lib: str, cache: str, background: bool, compiler: str = "numba") -> dict:
    here = str(pathlib.Path(__file__).resolve().parent)
    return in_fresh_process(CHILD.format(bench=here, lib=lib, compiler=compiler),
                            FNAD_CACHE_DIR=cache, FNAD_KERNEL_COMPILER=compiler,
                            FNAD_BACKGROUND_COMPILE="1" if background else "0")


def main() -> None:
    rows = []
    jax = optional("jax")
    t_jax = None
    if jax is not None:
        t_jax = child("jax", tempfile.mkdtemp(), False)["first"]
        rows.append(("cold: first call", "jax.jit", t_jax, None))
    warm = []
    for background in (True, False):
        cache = tempfile.mkdtemp(prefix="fnad-cold-")
        r = child("fnad", cache, background)
        how = "numba, background compile" if background else "numba, foreground compile"
        rows.append(("cold: first call", f"fnad ({how})", r["first"],
                     None if t_jax is None else r["first"] / t_jax))
        rows.append(("cold: compiled code in use", f"fnad ({how})", r["ready"],
                     None if t_jax is None else r["ready"] / t_jax))
        if not background:
            warm = [child("fnad", cache, background)["first"] for _ in range(WARM_RUNS)]
            rows.append(("disk cache: first call, median", f"fnad numba ({WARM_RUNS} processes)",
                         statistics.median(warm), None))
    cache = tempfile.mkdtemp(prefix="fnad-cold-llvm-")      # FNAD_KERNEL_COMPILER=llvm
    r = child("fnad", cache, False, "llvm")
    rows.append(("cold: first call", "fnad (llvm kernels, default)", r["first"],
                 None if t_jax is None else r["first"] / t_jax))
    llvm_runs = [child("fnad", cache, False, "llvm") for _ in range(WARM_RUNS)]
    warm_llvm = [w["first"] for w in llvm_runs]
    numba_used = r["numba"] or any(w["numba"] for w in llvm_runs)
    rows.append(("disk cache: first call, median", f"fnad llvm ({WARM_RUNS} processes)",
                 statistics.median(warm_llvm), None))
    print(header())
    print(table(rows, "GPT step, first call in a fresh process (ratio = fnad / jax cold)"))
    if warm:
        print(f"disk cache: first call in each of the {WARM_RUNS} processes: "
              + ", ".join(f"{t * 1e3:.0f} ms" for t in warm))
    print("llvm kernel compiler, disk cache (its object code): first call in each process: "
          + ", ".join(f"{t * 1e3:.0f} ms" for t in warm_llvm)
          + f"; numba imported: {'yes' if numba_used else 'no'}")


if __name__ == "__main__":
    main()

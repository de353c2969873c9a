"""The numba backend's two kernel compilers on the same kernels: numba's, and fnad's own LLVM
translator (backends/numba_cpu/llvm_kernels.py, the default). Each case is one fused kernel
over a 1024x768 f32 array (the GPT step's SwiGLU size), jitted twice in one process, once
with each compiler, and timed in rounds (the two alternating, so that the machine's drift
falls on both). Prints each compiler's median time per call and the median of the rounds'
ratios llvm/numba. Run:

    python benchmarks/kernel_compilers.py            # the default thread count
    FNAD_NUM_THREADS=1 python benchmarks/kernel_compilers.py
"""
from __future__ import annotations

import numpy as np
from _common import header, ratio, rounds, table, wait_compiled

import fnad
import fnad.numpy as jnp
from fnad.backends.numba_cpu import llvm_kernels
from fnad.backends.numba_cpu.threads import NUM_THREADS

CASES = {
    "exp(x) + 1": lambda x: jnp.exp(x) + 1.0,
    "sigmoid(x) + 1": lambda x: fnad.nn.sigmoid(x) + 1.0,
    "silu(x) * x": lambda x: fnad.nn.silu(x) * x,
    "tanh(x) + 1": lambda x: jnp.tanh(x) + 1.0,
    "log_softmax over rows": lambda x: fnad.nn.log_softmax(x, axis=-1),
    "softmax over rows": lambda x: fnad.nn.softmax(x, axis=-1),
}


def compiled(f, llvm: bool, x):
    """f jitted with the llvm compiler or numba's (a program of its own: the compiler is
    chosen when its kernels are first loaded)."""
    llvm_kernels.ENABLED = llvm
    try:
        g = fnad.jit(lambda a: f(a) + (0.0 if llvm else -0.0))   # not the other's program
        fnad.block_until_ready(g(x))
        wait_compiled(g, x)                   # numba's: a background compile, maybe
    finally:
        llvm_kernels.ENABLED = True
    return lambda: fnad.block_until_ready(g(x))


def main() -> None:
    print(header())
    if not llvm_kernels.ENABLED:
        print("the llvm kernel compiler is off here (FNAD_KERNEL_COMPILER=numba, or its "
              "self-check failed): nothing to compare")
        return
    x = np.random.default_rng(0).standard_normal((1024, 768)).astype(np.float32)
    rows = []
    for case, f in CASES.items():
        calls = {"numba": compiled(f, False, x), "llvm": compiled(f, True, x)}
        times = rounds(calls, repeat=41, number=5)
        rows.append((case, "numba", float(np.median(times["numba"]))))
        rows.append((case, "llvm (default)", float(np.median(times["llvm"])),
                     ratio(times, "llvm", "numba")))
    print(table(rows, f"kernel compilers, 1024x768 f32, {NUM_THREADS} thread(s) (medians "
                      "of 41 rounds of 5 calls)", ("llvm/numba",)))


if __name__ == "__main__":
    main()

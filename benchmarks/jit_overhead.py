"""jit call overhead: a compiled `x + 1` on 8 floats, fnad (numba and numpy backends) vs
jax.jit, and vs the same op in PyTorch eager (one op's dispatch, no jit) where torch is
installed, in one process; the ratios fnad/jax (target <= 0.5) and fnad/torch. Run:

    python benchmarks/jit_overhead.py
"""
from __future__ import annotations

import numpy as np
from _common import header, median_s, optional, table

import fnad
import fnad.numpy as fnp

from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing


def main() -> None:
    x_np = np.linspace(0, 1, 8, dtype=np.float32)
    rows = []
    jax = optional("jax")
    t_jax = None
    if jax is not None:
        g = jax.jit(lambda x: x + 1.0)
        xj = jax.numpy.asarray(x_np)
        t_jax = median_s(lambda: g(xj).block_until_ready(), number=5000)
        rows.append(("x + 1, 8 x f32", "jax.jit", t_jax, None))
    x = fnp.asarray(x_np)
    t_fnad = {}
    for backend in ("numba", "numpy"):
        f = fnad.jit(lambda x: x + 1.0, backend=backend)
        t_fnad[backend] = median_s(lambda: f(x), number=5000)
    torch = optional("torch")                     # imported after fnad and jax are timed
    t_torch = None
    if torch is not None:
        xt = torch.from_numpy(x_np)
        t_torch = median_s(lambda: xt + 1.0, number=5000)
    for backend, t in t_fnad.items():
        rows.append(("x + 1, 8 x f32", f"fnad.jit ({backend})", t,
                     None if t_jax is None else t / t_jax,
                     None if t_torch is None else t / t_torch))
    if torch is not None:
        rows.append(("x + 1, 8 x f32", "torch eager", t_torch))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    print(table(rows, "jit call overhead", ratios=ratios))


if __name__ == "__main__":
    main()

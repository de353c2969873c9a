"""jit call overhead: a compiled `x + 1` on 8 floats, fnad (numba and numpy backends) vs
jax.jit, in one process; the ratio fnad/jax (target <= 0.5). Run:

    python benchmarks/jit_overhead.py
"""
from __future__ import annotations

import numpy as np
from _common import header, median_s, optional, table

import fnad
import fnad.numpy as fnp


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
    for backend in ("numba", "numpy"):
        f = fnad.jit(lambda x: x + 1.0, backend=backend)
        t = median_s(lambda: f(x), number=5000)
        rows.append(("x + 1, 8 x f32", f"fnad.jit ({backend})", t,
                     None if t_jax is None else t / t_jax))
    print(header())
    print(table(rows, "jit call overhead (ratio = fnad / jax)"))


if __name__ == "__main__":
    main()

"""jit call overhead: a compiled `x + 1` on 8 floats, fnad (numba and numpy backends) vs
jax.jit, and vs the same op in PyTorch eager (one op's dispatch, no jit) where torch is
installed, in one process; the ratios fnad/jax (target <= 0.5) and fnad/torch. A second
row calls it with a static argument and a keyword (`f(x, 1.0, scale=s)`, the first static),
as training code calls a step with `training=True`: fnad (numba) against jax.jit.

fnad and jax are timed in ROUNDS rounds of NUMBER calls of each, the first of each round
rotating (the shared machine's speed drifts within seconds: blocks timed one after another
measured the drift too); the times are the medians over the rounds, the ratios fnad/jax
the medians of the rounds' ratios. torch is imported afterwards and timed likewise against
fnad's numba backend. Run:

    python benchmarks/jit_overhead.py
"""
from __future__ import annotations

import numpy as np
from _common import header, optional, ratio, rounds, table

import fnad
import fnad.numpy as fnp

from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing


ROUNDS, NUMBER = 21, 2000


def main() -> None:
    x_np = np.linspace(0, 1, 8, dtype=np.float32)
    x = fnp.asarray(x_np)
    calls = {}
    for backend in ("numba", "numpy"):
        f = fnad.jit(lambda x: x + 1.0, backend=backend)
        calls[f"fnad.jit ({backend})"] = lambda f=f: f(x)
    def with_static(x, c, scale):
        return x * scale + c
    fs = fnad.jit(with_static, static_argnums=1)
    s = fnp.full(8, 2.0)
    static_calls = {"fnad.jit (numba)": lambda: fs(x, 1.0, scale=s)}
    jax = optional("jax")
    if jax is not None:
        g = jax.jit(lambda x: x + 1.0)
        xj = jax.numpy.asarray(x_np)
        calls["jax.jit"] = lambda: g(xj).block_until_ready()
        gs, sj = jax.jit(with_static, static_argnums=1), jax.numpy.full(8, 2.0)
        static_calls["jax.jit"] = lambda: gs(xj, 1.0, scale=sj).block_until_ready()
    times = rounds(calls, ROUNDS, NUMBER)
    static_times = rounds(static_calls, ROUNDS, NUMBER)
    torch = optional("torch")                     # imported after fnad and jax are timed
    if torch is not None:
        xt = torch.from_numpy(x_np)
        vs_torch = rounds({"fnad.jit (numba)": calls["fnad.jit (numba)"],
                           "torch eager": lambda: xt + 1.0}, ROUNDS, NUMBER)

    rows = []
    if jax is not None:
        rows.append(("x + 1, 8 x f32", "jax.jit", float(np.median(times["jax.jit"]))))
    for backend in ("numba", "numpy"):
        name = f"fnad.jit ({backend})"
        t = times[name]
        r_torch = None
        if torch is not None and backend == "numba":
            r_torch = ratio(vs_torch, name, "torch eager")
        rows.append(("x + 1, 8 x f32", name, float(np.median(t)),
                     None if jax is None else ratio(times, name, "jax.jit"), r_torch))
    if torch is not None:
        rows.append(("x + 1, 8 x f32", "torch eager", float(np.median(vs_torch["torch eager"]))))
    case = "static arg + keyword"
    if jax is not None:
        rows.append((case, "jax.jit", float(np.median(static_times["jax.jit"]))))
    rows.append((case, "fnad.jit (numba)", float(np.median(static_times["fnad.jit (numba)"])),
                 None if jax is None else ratio(static_times, "fnad.jit (numba)", "jax.jit")))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    print(table(rows, f"jit call overhead (medians of {ROUNDS} rounds of {NUMBER} calls)",
                ratios=ratios))


if __name__ == "__main__":
    main()

"""`lax.map` over many small steps: `tanh(x @ w) + x.sum()` for each of 1000 slices
[16, 32] of xs, under jit, written once against a namespace and run by fnad (numba
backend), by fnad with `jax_hoist_scans` off ("as written": a loop of 1000 steps, each a
Python call of the body's compiled function) and by jax.jit, in alternating rounds in one
process. With the option on (the default) jit runs the body's work on all slices at once
(fnad/passes/scan_hoist.py) and no loop is left. Run:

    python benchmarks/scan_map.py
"""
from __future__ import annotations

import numpy as np
from _common import header, optional, ratio, rounds, table

import fnad
import fnad.numpy as fnp
from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing

STEPS, ROWS, WIDTH = 1000, 16, 32
ROUNDS, NUMBER = 15, 5


def make(lib, jnp, w):
    return lambda xs: lib.lax.map(lambda x: jnp.tanh(x @ w) + x.sum(), xs)


def main() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    xs = rng.standard_normal((STEPS, ROWS, WIDTH)).astype(np.float32)
    hoisted, written = fnad.jit(make(fnad, fnp, w)), fnad.jit(make(fnad, fnp, w))

    def as_written():
        with config.override(jax_hoist_scans=False):     # (the option is in jit's key)
            return written(xs)
    want = np.asarray(as_written())
    np.testing.assert_allclose(np.asarray(hoisted(xs)), want, rtol=1e-5, atol=1e-4)
    calls = {"fnad.jit": lambda: hoisted(xs), "fnad.jit, as written": as_written}
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jjnp
        jitted = jax.jit(make(jax, jjnp, w))
        np.testing.assert_allclose(np.asarray(jitted(xs)), want, rtol=1e-5, atol=1e-4)
        calls["jax.jit"] = lambda: jax.block_until_ready(jitted(xs))
    times = rounds(calls, ROUNDS, NUMBER)
    case = f"lax.map, {STEPS} x [{ROWS}, {WIDTH}]"
    rows = [(case, name, float(np.median(t)),
             ratio(times, name, "jax.jit") if jax is not None and name != "jax.jit" else None)
            for name, t in times.items()]
    print(header())
    print(table(rows, f"lax.map(lambda x: tanh(x @ w) + x.sum(), xs) under jit (medians of "
                      f"{ROUNDS} rounds of {NUMBER} calls)", ratios=("fnad/jax",)))


if __name__ == "__main__":
    main()

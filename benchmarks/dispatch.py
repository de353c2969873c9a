"""Eager per-op dispatch time: fnad vs NumPy vs jax (when installed), in one run.

Two cases: a unary op on 8 floats (pure dispatch overhead) and a binary op on
1000x1000 float32 (dominated by memory traffic). The implementations are timed in ROUNDS
rounds of a few calls each, the first of each round rotating (`_common.rounds`: the shared
machine's speed drifts, so blocks timed one after another measured the drift too). Prints
the median microseconds per call and the fnad/jax ratios (the medians of the rounds'
ratios). Run:

    python benchmarks/dispatch.py
"""
from __future__ import annotations

import platform
import sys

import numpy as np
from _common import optional, ratio, rounds

import fnad
import fnad.lax as lax
import fnad.numpy as fnp

ROUNDS = 21
CASES = (("sin, 8 x f32", 2000), ("add, 1000x1000 f32", 5))     # (case, calls per round)


def main() -> None:
    small_np = np.linspace(0, 1, 8, dtype=np.float32)
    big_a = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    big_b = np.random.default_rng(1).standard_normal((1000, 1000)).astype(np.float32)
    small, a, b = fnp.asarray(small_np), fnp.asarray(big_a), fnp.asarray(big_b)
    calls = {
        "sin, 8 x f32": {"fnad.numpy.sin": lambda: fnp.sin(small),
                         "fnad.lax.sin": lambda: lax.sin(small),
                         "numpy.sin": lambda: np.sin(small_np)},
        "add, 1000x1000 f32": {"fnad.numpy.add": lambda: fnp.add(a, b),
                               "fnad: a + b": lambda: a + b,
                               "numpy.add": lambda: np.add(big_a, big_b)},
    }
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jnp
        js, ja, jb = jnp.asarray(small_np), jnp.asarray(big_a), jnp.asarray(big_b)
        calls["sin, 8 x f32"]["jax.numpy.sin"] = lambda: jnp.sin(js).block_until_ready()
        calls["add, 1000x1000 f32"]["jax.numpy.add"] = \
            lambda: jnp.add(ja, jb).block_until_ready()
    times = {case: rounds(calls[case], ROUNDS, number) for case, number in CASES}
    rows = [(case, impl, float(np.median(t)) * 1e6)
            for case, _ in CASES for impl, t in times[case].items()]

    print(f"fnad {fnad.__version__}, numpy {np.__version__}"
          + (f", jax {jax.__version__}" if jax is not None else ", jax not installed")
          + f"; Python {sys.version.split()[0]} on {platform.machine()}")
    print(f"{'case':22s} {'implementation':18s} {'us/call':>10s}   (medians of {ROUNDS} rounds)")
    for case, impl, us in rows:
        print(f"{case:22s} {impl:18s} {us:10.2f}")
    if jax is not None:
        sin = ratio(times["sin, 8 x f32"], "fnad.numpy.sin", "jax.numpy.sin")
        add = ratio(times["add, 1000x1000 f32"], "fnad.numpy.add", "jax.numpy.add")
        print(f"ratio fnad/jax, sin 8 floats: {sin:.2f}  (target <= 0.5; median of "
              f"{ROUNDS} rounds' ratios)")
        print(f"ratio fnad/jax, add 1000x1000: {add:.2f}")


if __name__ == "__main__":
    main()

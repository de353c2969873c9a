"""The GPT train step (benchmarks/gpt_step.py) back to back against after a pause: how much
of the gap between fnad's step alone and fnad's step in gpt_step.py's rounds (where it
follows a jax or torch step) comes from running right after something else.

Each implementation in its own phase of rounds; a round times one step after one of:

    back to back   nothing (the step right after the previous one)
    after a pause  time.sleep(PAUSE): the process idle, the machine's other tenants free
    after jax      one jax.jit step (fnad only; jax installed)

Per round the conditions rotate, so each meets the same drift of the shared machine.
Medians of the rounds; `fnad.jit` also with one thread (FNAD_NUM_THREADS=1 must be set in
the environment for that: the thread count is fixed at import). Run:

    python benchmarks/gpt_after_idle.py [--rounds N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import gpt_step as g
from _common import header, optional, table

PAUSE = 0.1                       # seconds


def conditions(other) -> dict:
    conds = {"back to back": lambda: None, "after a pause": lambda: time.sleep(PAUSE)}
    if other is not None:
        conds["after a jax step"] = other
    return conds


def timed_rounds(step, conds: dict, n_rounds: int) -> dict:
    """{condition: [seconds of the step after it, per round]}, the order rotating."""
    names = list(conds)
    times: dict = {name: [] for name in names}
    for _ in range(2):
        step()
    for r in range(n_rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            step()                                   # the step before: back to back
            conds[name]()
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    return times


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="timed rounds")
    args = parser.parse_args(argv)
    params, tokens = g.inputs()
    import fnad
    import fnad.numpy as fnp
    from fnad.backends.numba_cpu.threads import NUM_THREADS
    _, _, fnad_step, _, _ = g.run(fnad, fnp, fnad.nn, params, tokens, fnad.jit)
    jax = optional("jax")
    jax_step = None
    if jax is not None:
        import jax.numpy as jjnp
        _, _, jax_step, _, _ = g.run(jax, jjnp, jax.nn, params, tokens, jax.jit)
    rows = []
    label = f"fnad.jit ({NUM_THREADS} thread{'s' if NUM_THREADS > 1 else ''})"
    runs = [(label, fnad_step, conditions(jax_step))]
    if jax_step is not None:
        runs.append(("jax.jit", jax_step, conditions(None)))
    for impl, step, conds in runs:
        times = timed_rounds(step, conds, args.rounds)
        base = np.array(times["back to back"])
        for name, ts in times.items():
            rel = None if name == "back to back" else float(np.median(np.array(ts) / base))
            rows.append((f"GPT step, {name}", impl, float(np.median(ts)), rel))
    print(header())
    print(table(rows, f"GPT train step after a pause ({PAUSE * 1e3:.0f} ms) or another "
                      f"step; ratio: the rounds' median over back to back",
                ratios=("/ b2b",)))


if __name__ == "__main__":
    main()

"""Where the GPT train step's time goes under fnad.jit (numba backend): line_profiler on the
generated driver, time per step summed by what each line calls (a numba kernel, or the
impl of an unfused primitive such as `_dot_general`). Needs `pip install line_profiler`.

    python benchmarks/profile_gpt_step.py [top-lines]
"""
from __future__ import annotations

import collections
import linecache
import sys

from line_profiler import LineProfiler

import fnad
import fnad.numpy as fnp
from fnad.backends.numba_cpu import codegen
from fnad.config import config

config.update("jax_background_compile", False)
STEPS = 5


def main() -> None:
    import gpt_step as g
    lp, state, names = LineProfiler(), {"on": False}, {}
    load = codegen.load_driver

    def load_driver(src, kernels, *rest):              # wrap every generated driver's run
        make = load(src, kernels, *rest)

        def wrapped(K):
            run = make(K)
            prof = lp(run)
            names.update({f"K{i}": getattr(getattr(k, "func", k), "__name__", "?")
                          for i, k in enumerate(K)})
            return lambda *a: prof(*a) if state["on"] else run(*a)
        return wrapped
    codegen.load_driver = load_driver

    params, opt, tokens = g.start(fnad, fnp, *g.inputs())
    step = fnad.jit(g.make_step(fnad, fnp, fnad.nn))
    for _ in range(3):
        fnad.block_until_ready(step(params, opt, tokens))
    state["on"] = True
    for _ in range(STEPS):
        fnad.block_until_ready(step(params, opt, tokens))
    stats = lp.get_stats()
    rows = []
    for (fn, _, _), timings in stats.timings.items():
        for lineno, _, t in timings:
            rows.append((t * stats.unit / STEPS, linecache.getline(fn, lineno).strip()))
    by_callee = collections.Counter()
    for t, text in rows:
        callee = text.split("(")[0].split("= ")[-1]
        by_callee[names.get(callee, callee)] += t
    print(f"per step: {sum(t for t, _ in rows) * 1e3:.1f} ms in the driver")
    for callee, t in by_callee.most_common(12):
        print(f"{t * 1e3:9.2f} ms  {callee}")
    for t, text in sorted(rows, reverse=True)[:int(sys.argv[1]) if len(sys.argv) > 1 else 10]:
        print(f"{t * 1e3:9.2f} ms  {text[:120]}")


if __name__ == "__main__":
    main()

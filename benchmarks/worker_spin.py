"""The numba backend's workers spinning before they sleep, against sleeping at once.

    python benchmarks/worker_spin.py [--rounds 30]

One process runs the GPT step (gpt_step.py) and the MLP step (mlp_step.py) compiled once,
alternating rounds with the workers' spin budget at FNAD_SPIN_US (threads.SPIN_US) and at
0 (they sleep after every task, as FNAD_SPIN_US=0 makes them), and prints the medians and
the median of the per-round ratios. Alternating in one process keeps the machine's own
drift out of the ratio.
"""
from __future__ import annotations

import argparse
import time

import gpt_step
import mlp_step
import numpy as np
from _common import header, wait_compiled

import fnad
import fnad.numpy as jnp
from fnad.backends.numba_cpu import threads


def gpt_call():
    rng = np.random.default_rng(0)
    params = gpt_step.init_params(rng)
    tokens = rng.integers(0, gpt_step.VOCAB, (gpt_step.BATCH, gpt_step.SEQ + 1))
    one = gpt_step.run(fnad, jnp, fnad.nn, params, tokens.astype(np.int32), fnad.jit)[2]
    return one                                  # (run waits for a background compile)


def mlp_call():
    params, x, y = mlp_step.data(np.random.default_rng(0))
    params = fnad.tree_util.tree_map(jnp.asarray, params)
    x, y = jnp.asarray(x), jnp.asarray(y)
    step = fnad.jit(mlp_step.make_step(fnad, jnp, fnad.nn))
    wait_compiled(step, params, x, y)
    return lambda: fnad.block_until_ready(step(params, x, y))


def compare(name: str, call, rounds: int, reps: int) -> None:
    workers = threads.workers()
    for _ in range(100):                        # compiled calls; then the workers calibrate
        call()
        if workers.rounds:
            break
        time.sleep(0.01)
    spin = workers.rounds
    if not spin:
        print(f"{name:10s} the workers did not start spinning: nothing to compare")
        return
    arms = {f"spin {threads.SPIN_US:.0f} us": spin, "no spin": 0}
    times: dict[str, list] = {k: [] for k in arms}
    order = list(arms)
    for r in range(rounds):
        for arm in (order if r % 2 == 0 else order[::-1]):
            workers.rounds = arms[arm]
            call()
            t = time.perf_counter()
            for _ in range(reps):
                call()
            times[arm].append((time.perf_counter() - t) / reps)
    workers.rounds = spin
    a, b = (np.array(times[k]) for k in order)
    for arm in order:
        print(f"{name:10s} {arm:14s} median {np.median(times[arm]) * 1e3:8.2f} ms")
    print(f"{name:10s} ratio spin / no spin, median of {rounds} rounds: "
          f"{np.median(a / b):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    if threads.NUM_THREADS < 2 or threads.SPIN_US <= 0:
        print(f"nothing to compare: {threads.NUM_THREADS} thread(s), "
              f"FNAD_SPIN_US={threads.SPIN_US:g}")
        return
    print(header())
    print(f"numba backend: {threads.NUM_THREADS} threads, FNAD_SPIN_US={threads.SPIN_US:g}")
    compare("GPT step", gpt_call(), args.rounds, 1)
    compare("MLP step", mlp_call(), args.rounds, 10)


if __name__ == "__main__":
    main()

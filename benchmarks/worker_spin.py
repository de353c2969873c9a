"""The numba backend's workers spinning before they sleep, against sleeping at once.

    python benchmarks/worker_spin.py [--rounds 30]

One process runs the GPT step (gpt_step.py) and the MLP step (mlp_step.py) compiled once,
alternating rounds with the workers' spin budget at FNAD_SPIN_US (runtime.SPIN_US) and at
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
from _common import header

import fnad
import fnad.numpy as jnp
from fnad.backends.numba_cpu import runtime


def gpt_call():
    rng = np.random.default_rng(0)
    params = fnad.tree_util.tree_map(jnp.asarray, gpt_step.init_params(rng))
    tokens = jnp.asarray(rng.integers(0, gpt_step.VOCAB, (gpt_step.BATCH, gpt_step.SEQ + 1))
                         .astype(np.int32))
    zeros = fnad.tree_util.tree_map(jnp.zeros_like, params)
    opt = {"m": zeros, "v": fnad.tree_util.tree_map(jnp.zeros_like, params),
           "t": jnp.asarray(0, jnp.int32)}
    step = fnad.jit(gpt_step.make_step(fnad, jnp, fnad.nn))
    return lambda: step(params, opt, tokens)


def mlp_call():
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((784, 512)).astype(np.float32) * 0.05,
              "b1": np.zeros(512, np.float32),
              "w2": rng.standard_normal((512, 10)).astype(np.float32) * 0.05,
              "b2": np.zeros(10, np.float32)}
    x = jnp.asarray(rng.standard_normal((256, 784)).astype(np.float32))
    y = jnp.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)])
    params = fnad.tree_util.tree_map(jnp.asarray, params)
    step = fnad.jit(mlp_step.make_step(fnad, jnp, fnad.nn))
    return lambda: step(params, x, y)


def compare(name: str, call, rounds: int, reps: int) -> None:
    for _ in range(3):
        fnad.block_until_ready(call())          # compiled, and the workers calibrated
    workers = runtime.workers()
    spin = workers.rounds
    arms = {f"spin {runtime.SPIN_US:.0f} us": spin, "no spin": 0}
    times: dict[str, list] = {k: [] for k in arms}
    order = list(arms)
    for r in range(rounds):
        for arm in (order if r % 2 == 0 else order[::-1]):
            workers.rounds = arms[arm]
            fnad.block_until_ready(call())
            t = time.perf_counter()
            for _ in range(reps):
                fnad.block_until_ready(call())
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
    if runtime.NUM_THREADS < 2 or runtime.SPIN_US <= 0:
        print(f"nothing to compare: {runtime.NUM_THREADS} thread(s), "
              f"FNAD_SPIN_US={runtime.SPIN_US:g}")
        return
    print(header())
    print(f"numba backend: {runtime.NUM_THREADS} threads, FNAD_SPIN_US={runtime.SPIN_US:g}")
    compare("GPT step", gpt_call(), args.rounds, 1)
    compare("MLP step", mlp_call(), args.rounds, 10)


if __name__ == "__main__":
    main()

"""Where the GPT train step's time goes on a CUDA GPU under fnad.jit.

backend cuda: every step of the compiled program (a fused kernel, or an unfused primitive's
eager impl: GEMM, a strided copy, a primitive through the host) is timed with the device
synchronized before and after it, and the times are summed by what the step runs; then
cProfile of whole steps (no synchronizing inside) gives the Python functions that take the
host's time. backend xla: cProfile of whole steps, against jax.jit's step time. Needs a
CUDA GPU (and jax with its CUDA plugin for xla).

    python benchmarks/profile_gpu_step.py [--backend cuda|xla] [--steps N] [--top N] [--cold]

(`--cold`: cProfile the first call, trace and compile, too.)
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import time


import fnad
import fnad.numpy as fnp
from fnad.config import config


def time_program_steps(program, rt):
    """Wrap cuda program.py's step builders so each step can be timed, synchronized, under
    a label: (labels' seconds, labels' counts, switch)."""
    seconds, counts, on = collections.Counter(), collections.Counter(), [False]

    def timed(label, fn):
        def step(env):
            if not on[0]:
                return fn(env)
            rt.synchronize()
            t0 = time.perf_counter()
            fn(env)
            rt.synchronize()
            seconds[label] += time.perf_counter() - t0
            counts[label] += 1
        return step
    eqn_step, group_step = program._eqn_step, program._group_step
    program._eqn_step = lambda eqn, ins, outs, backend: timed(
        eqn.primitive.name + (" (through the host)" if eqn.primitive in _host() else ""),
        eqn_step(eqn, ins, outs, backend))
    program._group_step = lambda gk, ins, outs: timed(
        f"fused kernel, {len(outs)} output(s)", group_step(gk, ins, outs))
    return seconds, counts, on


def _host():
    from fnad.backends.cuda import eager
    return eager.HOST


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["cuda", "xla"], default="cuda")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--cold", action="store_true", help="profile the first call too")
    args = parser.parse_args(argv)
    import gpt_step as g
    backend = args.backend
    if backend == "cuda":
        try:
            from fnad.backends.cuda import program
            from fnad.backends.cuda import runtime as rt
        except ImportError as e:
            print(f"no CUDA GPU here, nothing to profile: {e}")
            return
        seconds, counts, on = time_program_steps(program, rt)
    with config.override(jax_default_backend=backend):          # made on `backend`
        params, opt, tokens = g.start(fnad, fnp, *g.inputs())
    step = fnad.jit(g.make_step(fnad, fnp, fnad.nn), backend=backend)
    cold = cProfile.Profile() if args.cold else None
    t0 = time.perf_counter()
    if cold is not None:
        cold.enable()
    fnad.block_until_ready(step(params, opt, tokens))
    if cold is not None:
        cold.disable()
    print(f"first call {time.perf_counter() - t0:.2f} s")
    if cold is not None:
        print("cProfile of the first call, by cumulative time:")
        pstats.Stats(cold).sort_stats("cumtime").print_stats(args.top)
    fnad.block_until_ready(step(params, opt, tokens))
    t0 = time.perf_counter()
    for _ in range(args.steps):
        fnad.block_until_ready(step(params, opt, tokens))
    per_step = (time.perf_counter() - t0) / args.steps
    print(f"{backend}: {per_step * 1e3:.2f} ms per step ({args.steps} steps)")
    if backend == "cuda":
        on[0] = True
        for _ in range(args.steps):
            fnad.block_until_ready(step(params, opt, tokens))
        on[0] = False
        total = sum(seconds.values()) / args.steps
        print(f"program steps, each synchronized: {total * 1e3:.2f} ms per step, "
              f"{sum(counts.values()) // args.steps} steps")
        for label, s in seconds.most_common(args.top):
            print(f"{s / args.steps * 1e3:9.3f} ms  {counts[label] // args.steps:5d}x  {label}")
    else:
        jax = __import__("jax")
        import jax.numpy as jjnp
        jstep = jax.jit(g.make_step(jax, jjnp, jax.nn))
        jp, jo, jt = g.start(jax, jjnp, *g.inputs())
        jax.block_until_ready(jstep(jp, jo, jt))
        t0 = time.perf_counter()
        for _ in range(args.steps):
            jax.block_until_ready(jstep(jp, jo, jt))
        print(f"jax.jit: {(time.perf_counter() - t0) / args.steps * 1e3:.2f} ms per step")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        fnad.block_until_ready(step(params, opt, tokens))
    prof.disable()
    stats = pstats.Stats(prof).sort_stats("tottime")
    print(f"cProfile of {args.steps} steps, by own time:")
    stats.print_stats(args.top)


if __name__ == "__main__":
    main()

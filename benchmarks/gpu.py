"""fnad on a CUDA GPU: the fused elementwise chain and the row softmax of jit_elementwise.py
(1000x1000 float32) and the GPT-style train step of gpt_step.py, each run by fnad.jit on the
`cuda` backend (numba CUDA kernels, cuBLAS through CuPy) and on the `xla` backend (jax on
its GPU), by jax.jit and by PyTorch eager on the GPU, in one process. Each case is timed in
rounds (one call of every implementation per round, the first rotating); every call waits
for its results (block_until_ready, torch.cuda.synchronize). Prints the first call of each
(trace + compile), the median time per call, each fnad row's medians of the rounds' ratios
against jax.jit, jax.jit with float32 matmuls at full precision ("jax.jit (f32)": jax
multiplies float32 in TF32 on a GPU by default; fnad's xla backend and torch use float32)
and torch, and the GPT step's first and last losses (which must agree to 1e-3). Without a
CUDA GPU it says so and exits. Run:

    python benchmarks/gpu.py [--rounds N] [--only elementwise|step]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _common import header, optional, ratio, rounds, table
from gpt_step import WARMUP, inputs, run, run_torch
from jit_elementwise import chain   # (which turns the numba backend's background compile off)

import fnad
import fnad.numpy as fnp
from fnad.config import config

ROUNDS = 20
N = 1000                                        # the elementwise cases' arrays are N x N


def softmax_rows(np_mod):
    def f(x):
        e = np_mod.exp(x - np_mod.max(x, axis=-1, keepdims=True))
        return e / np_mod.sum(e, axis=-1, keepdims=True)
    return f


REFS = ("jax.jit", "jax.jit (f32)", "torch eager")
RATIOS = ("fnad/jax", "fnad/jax f32", "fnad/torch")


def fnad_backends(jax) -> list:
    """The fnad backends to run here: cuda, and xla where jax has its GPU."""
    return ["cuda"] + (["xla"] if jax is not None else [])


def ratios_of(times: dict, impl: str) -> list:
    """fnad rows: the medians of the rounds' ratios against each reference (None where it
    did not run); reference rows: none."""
    if not impl.startswith("fnad"):
        return []
    return [ratio(times, impl, ref) if ref in times else None for ref in REFS]


def highest(jax, jitted):
    """`jitted` called with float32 matmuls at full precision: jax's default on a GPU is
    TF32 (about 3 decimal digits), fnad's xla backend and torch's default are float32."""
    def call(*args):
        with jax.default_matmul_precision("highest"):
            return jitted(*args)
    return call


def timed_first(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def elementwise(jax, torch, n_rounds: int) -> list:
    """Rows for the chain and the softmax on every implementation, values checked."""
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(3))
    e = np.exp(a - a.max(-1, keepdims=True))
    want = {"chain": chain(np)(a, b, c), "softmax": e / e.sum(-1, keepdims=True)}
    cases: dict = {"chain": {}, "softmax": {}}
    for be in fnad_backends(jax):
        fa, fb, fc = (fnad.device_put(v, be) for v in (a, b, c))
        f_chain = fnad.jit(chain(fnp), backend=be)
        f_soft = fnad.jit(softmax_rows(fnp), backend=be)
        cases["chain"][f"fnad.jit ({be})"] = \
            lambda f=f_chain, x=(fa, fb, fc): fnad.block_until_ready(f(*x))
        cases["softmax"][f"fnad.jit ({be})"] = \
            lambda f=f_soft, x=fa: fnad.block_until_ready(f(x))
    if jax is not None:
        import jax.numpy as jnp
        ja, jb, jc = (jnp.asarray(v) for v in (a, b, c))
        j_chain, j_soft = jax.jit(chain(jnp)), jax.jit(softmax_rows(jnp))
        cases["chain"]["jax.jit"] = lambda: j_chain(ja, jb, jc).block_until_ready()
        cases["softmax"]["jax.jit"] = lambda: j_soft(ja).block_until_ready()
    if torch is not None:
        ta, tb, tc = (torch.tensor(v, device="cuda") for v in (a, b, c))
        t_chain = chain(torch)

        def torch_call(fn):
            def call():
                out = fn()
                torch.cuda.synchronize()
                return out
            return call
        cases["chain"]["torch eager"] = torch_call(lambda: t_chain(ta, tb, tc))
        cases["softmax"]["torch eager"] = torch_call(lambda: torch.softmax(ta, dim=-1))
    rows = []
    for case, fns in cases.items():
        for impl, fn in fns.items():
            cold, out = timed_first(fn)
            got = out.cpu().numpy() if hasattr(out, "cpu") else np.asarray(out)
            np.testing.assert_allclose(got, want[case], rtol=1e-4, atol=1e-6,
                                       err_msg=f"{case}, {impl}")
            rows.append((f"{case}: first call", impl, cold))
        times = rounds(fns, n_rounds, 1, 2)
        rows += [(case, impl, float(np.median(times[impl])), *ratios_of(times, impl))
                 for impl in fns]
    return rows


def gpt(jax, torch, n_rounds: int) -> tuple[list, dict, dict]:
    """(rows, first-step losses, last losses) of the GPT step on every implementation."""
    params, tokens = inputs()
    rows, steps, states, first = [], {}, {}, {}
    for be in fnad_backends(jax):
        name = f"fnad.jit ({be})"
        with config.override(jax_default_backend=be):        # parameters made on `be`
            cold, _, steps[name], states[name], first[name] = run(
                fnad, fnp, fnad.nn, params, tokens,
                lambda f, be=be: fnad.jit(f, backend=be))
        rows.append(("GPT step: first call", name, cold))
    if jax is not None:
        import jax.numpy as jjnp
        for name, jit in (("jax.jit", jax.jit),
                          ("jax.jit (f32)", lambda f: highest(jax, jax.jit(f)))):
            cold, _, steps[name], states[name], first[name] = run(
                jax, jjnp, jax.nn, params, tokens, jit)
            rows.append(("GPT step: first call", name, cold))
    if torch is not None:
        cold, steps["torch eager"], states["torch eager"], first["torch eager"] = run_torch(
            torch, params, tokens, device="cuda")
        rows.append(("GPT step: first call", "torch eager", cold))
    times = rounds(steps, n_rounds, 1, WARMUP)
    rows += [("GPT step", impl, float(np.median(times[impl])), *ratios_of(times, impl))
             for impl in steps]
    last = {impl: float(state["last"]) for impl, state in states.items()}
    return rows, first, last


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="fnad's cuda and xla backends on a GPU")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="timed rounds per case")
    parser.add_argument("--only", choices=["elementwise", "step"], help="run one part")
    args = parser.parse_args(argv)
    try:
        from fnad.backends.cuda import devices, runtime
    except ImportError as e:
        print(f"no CUDA GPU here, nothing to measure: {e}")
        return 0
    jax = optional("jax")
    if jax is not None and jax.default_backend() != "gpu":
        print(f"jax runs on {jax.default_backend()} here, not a GPU: left out")
        jax = None
    torch = optional("torch")
    if torch is not None and not torch.cuda.is_available():
        print("torch sees no CUDA GPU here: left out")
        torch = None
    print(header())
    print(f"GPU: {devices()[0].name}; fnad's cuda backend: GEMM through "
          f"{'CuPy (cuBLAS)' if runtime.cupy is not None else 'its tiled kernel'}")
    if args.only != "step":
        print(table(elementwise(jax, torch, args.rounds), f"{N}x{N} float32 on the GPU",
                    ratios=RATIOS))
    if args.only != "elementwise":
        rows, first, last = gpt(jax, torch, args.rounds)
        print(table(rows, "GPT-style train step on the GPU, d=256 L=4 H=8 ff=768 V=256 "
                          "B=8 T=128", ratios=RATIOS))
        ref = "fnad.jit (cuda)"
        for impl in first:
            print(f"loss {impl:16s} first step {first[impl]:.6f} "
                  f"(diff {first[impl] - first[ref]:+.1e}), last {last[impl]:.6f} "
                  f"(diff {last[impl] - last[ref]:+.1e})")
        bad = [impl for impl in first if abs(first[impl] - first[ref]) > 1e-3]
        if bad:
            print(f"first-step loss of {', '.join(bad)} differs from fnad's by > 1e-3")
            return 1
    print(f"times: medians of {args.rounds} rounds; ratios: medians of the rounds' ratios")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

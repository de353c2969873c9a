"""jit on the numba backend against jax.jit and PyTorch eager (where torch is installed):
a fused elementwise chain, a row softmax and the exact GELU.

Cases (float32, 1000x1000):
    chain    tanh(a*b + c)*0.5 + c/(1 + exp(-a))   (one fused kernel in fnad)
    softmax  softmax over the rows                 (max, exp+sum, divide: one kernel)
    gelu     exact GELU, x/2 * erfc(-x/sqrt 2)     (nn.gelu(approximate=False); erfc)

All run in this process on the same inputs, in rounds of one call of each (the first of
each round rotating, so that load from other processes hits them alike); the time per call
is the median over the rounds, after a warm-up call (compilation is not timed). PyTorch
runs the same math op by op (torch.tanh, torch.exp, torch.softmax; one kernel per op, its
default thread count). It is imported and timed in a second pass, interleaved with fnad
alone: its OpenMP threads
spin-wait after each op, and on a busy machine that would slow whatever call comes next,
so the first pass (fnad, NumPy, jax) is kept free of it; fnad/torch uses the second pass's
fnad time. Prints a table with the ratios fnad/jax (targets of issue 4: <= 1.0) and
fnad/torch. Run:

    python benchmarks/jit_elementwise.py
"""
from __future__ import annotations

import math
import platform
import sys

import numpy as np
from _common import rounds

import fnad
import fnad.numpy as fnp

from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing


def median_us(fns: dict, repeat: int = 200) -> dict:
    """{name: median us per call} over `repeat` rounds of one call of each function, the
    first of each round rotating (_common.rounds)."""
    return {name: float(np.median(t)) * 1e6 for name, t in rounds(fns, repeat).items()}


def chain(np_mod):
    def f(a, b, c):
        return np_mod.tanh(a * b + c) * 0.5 + c / (1 + np_mod.exp(-a))
    return f


def main() -> None:
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((1000, 1000)).astype(np.float32) for _ in range(3))
    fa, fb, fc = fnp.asarray(a), fnp.asarray(b), fnp.asarray(c)
    f_chain = fnad.jit(chain(fnp), backend="numba")
    f_soft = fnad.jit(lambda x: fnad.nn.softmax(x, axis=-1), backend="numba")
    f_gelu = fnad.jit(lambda x: fnad.nn.gelu(x, approximate=False), backend="numba")

    def fnad_chain():
        return f_chain(fa, fb, fc)

    def fnad_soft():
        return f_soft(fa)

    def fnad_gelu():
        return f_gelu(fa)

    # the same numbers as NumPy (float tolerance), before timing anything
    ref_chain = np.tanh(a * b + c) * 0.5 + c / (1 + np.exp(-a))
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(fnad_chain()), ref_chain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fnad_soft()), e / e.sum(-1, keepdims=True),
                               rtol=1e-5, atol=1e-7)
    ref_gelu = a * 0.5 * (1 + np.vectorize(math.erf)(a.astype(np.float64) / math.sqrt(2)))
    np.testing.assert_allclose(np.asarray(fnad_gelu()), ref_gelu, rtol=1e-5, atol=1e-6)
    cases = {"chain": {"fnad jit (numba)": fnad_chain,
                       "numpy (eager)": lambda: chain(np)(a, b, c)},
             "softmax": {"fnad jit (numba)": fnad_soft},
             "gelu": {"fnad jit (numba)": fnad_gelu}}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        j_chain = jax.jit(chain(jnp))
        j_soft = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
        j_gelu = jax.jit(lambda x: jax.nn.gelu(x, approximate=False))
        ja, jb, jc = jnp.asarray(a), jnp.asarray(b), jnp.asarray(c)
        cases["chain"]["jax.jit"] = lambda: j_chain(ja, jb, jc).block_until_ready()
        cases["softmax"]["jax.jit"] = lambda: j_soft(ja).block_until_ready()
        cases["gelu"]["jax.jit"] = lambda: j_gelu(ja).block_until_ready()
    rows = [(case, impl, us) for case, fns in cases.items()
            for impl, us in median_us(fns).items()]
    try:
        import torch                              # second pass: fnad against PyTorch eager
    except ImportError:
        torch = None
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        t_chain = chain(torch)
        np.testing.assert_allclose(t_chain(ta, tb, tc).numpy(), ref_chain, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(torch.softmax(ta, dim=-1).numpy(),
                                   e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
        torch_cases = {"chain": {"fnad jit, 2nd pass": fnad_chain,
                                 "torch (eager)": lambda: t_chain(ta, tb, tc)},
                       "softmax": {"fnad jit, 2nd pass": fnad_soft,
                                   "torch (eager)": lambda: torch.softmax(ta, dim=-1)},
                       "gelu": {"fnad jit, 2nd pass": fnad_gelu,
                                "torch (eager)": lambda: torch.nn.functional.gelu(ta)}}
        rows += [(case, impl, us) for case, fns in torch_cases.items()
                 for impl, us in median_us(fns).items()]

    print(f"fnad {fnad.__version__}, numpy {np.__version__}"
          + (f", jax {jax.__version__}" if jax is not None else ", jax not installed")
          + (f", torch {torch.__version__} ({torch.get_num_threads()} threads)"
             if torch is not None else ", torch not installed")
          + f"; Python {sys.version.split()[0]} on {platform.machine()}")
    print(f"{'case (1000x1000 f32)':22s} {'implementation':18s} {'us/call':>10s}")
    for case, impl, us in rows:
        print(f"{case:22s} {impl:18s} {us:10.1f}")
    t = {(case, impl): us for case, impl, us in rows}
    for mine, ref, name, target in (
            ("fnad jit (numba)", "jax.jit", "jax", "  (target <= 1.0)"),
            ("fnad jit, 2nd pass", "torch (eager)", "torch", "")):
        for case in ("chain", "softmax", "gelu"):
            if (case, ref) in t:
                ratio = t[(case, mine)] / t[(case, ref)]
                print(f"ratio fnad/{name}, {case:8s}: {ratio:5.2f}"
                      f"{target if case != 'gelu' else ''}")


if __name__ == "__main__":
    main()

"""Convolutions: one 3×3 convolution (batch 32, 32×32, 64 -> 64 channels, NHWC) forward,
and a small CNN's train step (three 3×3 convolutions, the last two strided, relu, a global
mean, a dense layer, softmax cross-entropy, SGD; batch 32 of 32×32×3), each written once
against a namespace and run by fnad (numba backend) and jax.jit in one process, and, where
torch is installed, in PyTorch eager (NCHW, its native layout) against fnad. Timed in
alternating rounds (the ratio: the median of the rounds' ratios). The step's loss must
agree. `--first-call`: the CNN step's first call instead, each in a fresh process (from
the jit call to the result): jax.jit, fnad with an empty disk cache, then fnad in
WARM_RUNS processes on the warm cache, and whether the call imported numba (the patch
fillers of conv.py are kernels fnad's translator compiles: it should not). Run:

    python benchmarks/conv_step.py [--first-call]
"""
from __future__ import annotations

import pathlib
import sys
import tempfile

import numpy as np
from _common import (check_losses, header, in_fresh_process, optional, ratio, rounds,
                     sgd_step, table, torch_sgd_step)

import fnad
import fnad.numpy as fnp
from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing

ROUNDS, NUMBER = 15, 3
DN = ("NHWC", "HWIO", "NHWC")


def make_layer(lax):
    return lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN)


def make_step(lib, jnp, nn):
    def loss(params, x, y):
        h = x
        for name, stride in (("c1", 1), ("c2", 2), ("c3", 2)):
            h = lib.lax.conv_general_dilated(h, params[name], (stride, stride), "SAME",
                                             dimension_numbers=DN)
            h = nn.relu(h + params[name + "_b"])
        logits = jnp.mean(h, axis=(1, 2)) @ params["dense"]      # [B, 10]
        return -jnp.mean(jnp.sum(nn.log_softmax(logits) * y, axis=-1))
    return sgd_step(lib, loss, 0.05)


def make_torch_step(torch):
    F = torch.nn.functional

    def loss(params, x, y):                      # x: NCHW; kernels: OIHW
        h = x
        for name, stride in (("c1", 1), ("c2", 2), ("c3", 2)):
            w = params[name]
            # TF's SAME for 3×3: pad 1 each side at stride 1; (0, 1) at stride 2, even sizes
            h = F.conv2d(F.pad(h, (1, 1, 1, 1) if stride == 1 else (0, 1, 0, 1)), w,
                         stride=stride)
            h = torch.relu(h + params[name + "_b"][:, None, None])
        logits = h.mean(dim=(2, 3)) @ params["dense"]
        return -torch.mean(torch.sum(torch.log_softmax(logits, -1) * y, dim=-1))
    return torch_sgd_step(torch, loss, 0.05)


def data(rng):
    def kernel(cin, cout):
        return (rng.standard_normal((3, 3, cin, cout)) / np.sqrt(9 * cin)).astype(np.float32)
    params = {"c1": kernel(3, 32), "c1_b": np.zeros(32, np.float32),
              "c2": kernel(32, 64), "c2_b": np.zeros(64, np.float32),
              "c3": kernel(64, 64), "c3_b": np.zeros(64, np.float32),
              "dense": (rng.standard_normal((64, 10)) * 0.1).astype(np.float32)}
    x = rng.standard_normal((32, 32, 32, 3)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
    layer = (rng.standard_normal((32, 32, 32, 64)).astype(np.float32),
             (rng.standard_normal((3, 3, 64, 64)) * 0.05).astype(np.float32))
    return params, x, y, layer


def main() -> None:
    params, x, y, (lx, lw) = data(np.random.default_rng(0))
    jax = optional("jax")
    torch = optional("torch")
    rows, losses = [], {}
    for case in ("3×3 conv 64->64, 32×32, batch 32", "CNN train step, batch 32"):
        calls = {}
        if case.startswith("3×3"):
            f = fnad.jit(make_layer(fnad.lax))
            fx, fw = fnp.asarray(lx), fnp.asarray(lw)
            calls["fnad.jit"] = lambda: f(fx, fw)
            if jax is not None:
                j = jax.jit(make_layer(jax.lax))
                jx, jw = jax.numpy.asarray(lx), jax.numpy.asarray(lw)
                calls["jax.jit"] = lambda: j(jx, jw).block_until_ready()
            if torch is not None:
                tx = torch.tensor(lx).permute(0, 3, 1, 2).contiguous()
                tw = torch.tensor(lw).permute(3, 2, 0, 1).contiguous()
                calls["torch eager"] = lambda: torch.nn.functional.conv2d(tx, tw, padding=1)
        else:
            fstep = fnad.jit(make_step(fnad, fnp, fnad.nn))
            pf = fnad.tree_util.tree_map(fnp.asarray, params)
            xf, yf = fnp.asarray(x), fnp.asarray(y)
            losses["fnad.jit"] = float(fstep(pf, xf, yf)[1])
            calls["fnad.jit"] = lambda: fstep(pf, xf, yf)
            if jax is not None:
                jstep = jax.jit(make_step(jax, jax.numpy, jax.nn))
                pj = jax.tree_util.tree_map(jax.numpy.asarray, params)
                xj, yj = jax.numpy.asarray(x), jax.numpy.asarray(y)
                losses["jax.jit"] = float(jstep(pj, xj, yj)[1])
                calls["jax.jit"] = lambda: jax.block_until_ready(jstep(pj, xj, yj))
            if torch is not None:
                tstep = make_torch_step(torch)
                pt = {k: torch.tensor(v.transpose(3, 2, 0, 1) if v.ndim == 4 else v)
                      .requires_grad_() for k, v in params.items()}
                xt, yt = torch.tensor(x.transpose(0, 3, 1, 2)), torch.tensor(y)
                losses["torch eager"] = float(tstep(pt, xt, yt)[1])
                calls["torch eager"] = lambda: tstep(pt, xt, yt)
        times = rounds(calls, ROUNDS, NUMBER)
        for impl in calls:
            rs = ()
            if impl == "fnad.jit":
                rs = (ratio(times, impl, "jax.jit") if jax is not None else None,
                      ratio(times, impl, "torch eager") if torch is not None else None)
            rows.append((case, impl, float(np.median(times[impl])), *rs))
    print(header())
    print(table(rows, f"convolutions (medians of {ROUNDS} rounds of {NUMBER} calls)",
                ratios=("fnad/jax", "fnad/torch")))
    check_losses(losses)


WARM_RUNS = 5
CHILD = r"""
import json, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import conv_step as c
if {lib!r} == "jax":
    import jax as lib, jax.numpy as jnp
else:
    import fnad as lib, fnad.numpy as jnp
params, x, y, _ = c.data(np.random.default_rng(0))
step = lib.jit(c.make_step(lib, jnp, lib.nn))
t0 = time.perf_counter()
lib.block_until_ready(step(params, x, y))
print(json.dumps({{"first": time.perf_counter() - t0, "numba": "numba" in sys.modules}}))
"""


def first_calls() -> None:
    here = str(pathlib.Path(__file__).resolve().parent)

    def child(lib: str, cache: str) -> dict:
        return in_fresh_process(CHILD.format(bench=here, lib=lib), FNAD_CACHE_DIR=cache,
                                FNAD_BACKGROUND_COMPILE="0")

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        jax_cold = child("jax", cache)["first"] if optional("jax") is not None else None
        cold = child("fnad", cache)
        warm = [child("fnad", cache) for _ in range(WARM_RUNS)]
    if jax_cold is not None:
        rows.append(("CNN step, cold: first call", "jax.jit", jax_cold))
    rows.append(("CNN step, cold: first call", "fnad.jit", cold["first"],
                 cold["first"] / jax_cold if jax_cold else None))
    times = sorted(w["first"] for w in warm)
    rows.append((f"CNN step, disk cache: median of {WARM_RUNS}", "fnad.jit",
                 times[WARM_RUNS // 2]))
    print(header())
    print(table(rows, "the CNN train step's first call in a fresh process",
                ratios=("fnad/jax",)))
    print(f"disk cache: first call in each process: {', '.join(f'{t * 1e3:.0f} ms' for t in times)}"
          f"; numba imported: cold {'yes' if cold['numba'] else 'no'}, disk cache "
          f"{'yes' if any(w['numba'] for w in warm) else 'no'}")


if __name__ == "__main__":
    first_calls() if "--first-call" in sys.argv[1:] else main()

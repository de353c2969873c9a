"""A recurrent network's train step: `lax.scan` over 100 time steps of a tanh cell
(h = tanh(x W_x + h W_h + b), batch 32, 64 inputs), a linear read-out of every step, a
mean squared error, value_and_grad and SGD, for hidden sizes 32, 128 and 512. Written once
against a namespace and run by fnad (numba backend) and jax.jit in one process, in
alternating rounds (the ratio: the median of the rounds' ratios), and, where torch is
installed, in PyTorch eager (a Python loop over the steps: eager PyTorch has no scan),
timed likewise against fnad. The losses must agree.

Small hidden sizes measure what a compiled loop costs per step (fnad runs each step's body
as a generated Python function calling BLAS and fused kernels; XLA compiles the whole
loop); the large one, the step's skinny products (32 rows). fnad also runs the step with
`jax_hoist_scans` off in the same rounds ("fnad.jit, as written": x_t W_x and the weight
gradients computed step by step inside the loops, as jax.jit runs them). Run:

    python benchmarks/rnn_step.py
"""
from __future__ import annotations

import numpy as np
from _common import (check_losses, header, optional, ratio, rounds, sgd_step, table,
                     torch_rounds)

import fnad
import fnad.numpy as fnp
from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing

HIDDEN = (32, 128, 512)
B, T, D = 32, 100, 64
ROUNDS, NUMBER = 15, 3


def make_step(lib, jnp):
    def loss(params, xs, ys):
        def cell(h, x):
            h = jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
            return h, h
        h0 = jnp.zeros((xs.shape[1], params["wh"].shape[0]), jnp.float32)
        _, hs = lib.lax.scan(cell, h0, xs)                    # [T, B, H]
        return jnp.mean((hs @ params["wo"] - ys) ** 2)
    return sgd_step(lib, loss, 0.01)


def make_torch_step(torch):
    def step(params, xs, ys):
        h = torch.zeros((xs.shape[1], params["wh"].shape[0]))
        hs = []
        for x in xs:
            h = torch.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
            hs.append(h)
        value = torch.mean((torch.stack(hs) @ params["wo"] - ys) ** 2)
        grads = torch.autograd.grad(value, list(params.values()))
        with torch.no_grad():
            params = {k: (p - 0.01 * g).requires_grad_()
                      for (k, p), g in zip(params.items(), grads)}
        return params, value.detach()
    return step


def data(rng, hidden):
    params = {"wx": rng.standard_normal((D, hidden)).astype(np.float32) * 0.1,
              "wh": rng.standard_normal((hidden, hidden)).astype(np.float32) / hidden ** 0.5,
              "b": np.zeros(hidden, np.float32),
              "wo": rng.standard_normal((hidden, 1)).astype(np.float32) * 0.1}
    xs = rng.standard_normal((T, B, D)).astype(np.float32)
    ys = rng.standard_normal((T, B, 1)).astype(np.float32)
    return params, xs, ys


def main() -> None:
    jax, torch = optional("jax"), None
    rows, all_losses = [], []
    results = []
    for hidden in HIDDEN:
        params, xs, ys = data(np.random.default_rng(0), hidden)
        losses, calls = {}, {}
        if jax is not None:
            import jax.numpy as jjnp
            jstep = jax.jit(make_step(jax, jjnp))
            pj = jax.tree_util.tree_map(jjnp.asarray, params)
            losses["jax.jit"] = float(jstep(pj, xs, ys)[1])
            calls["jax.jit"] = lambda jstep=jstep, pj=pj: jax.block_until_ready(
                jstep(pj, xs, ys))
        fstep = fnad.jit(make_step(fnad, fnp))
        pf = fnad.tree_util.tree_map(fnp.asarray, params)
        losses["fnad.jit"] = float(fstep(pf, xs, ys)[1])
        calls["fnad.jit"] = lambda fstep=fstep, pf=pf: fstep(pf, xs, ys)
        written = fnad.jit(make_step(fnad, fnp))

        def as_written(written=written, pf=pf):
            with config.override(jax_hoist_scans=False):     # (the option is in jit's key)
                return written(pf, xs, ys)
        losses["fnad.jit, as written"] = float(as_written()[1])
        calls["fnad.jit, as written"] = as_written
        results.append((hidden, params, xs, ys, calls, rounds(calls, ROUNDS, NUMBER)))
        all_losses.append(losses)
    torch = optional("torch")                     # imported after fnad and jax are timed
    for (hidden, params, xs, ys, calls, times), losses in zip(results, all_losses):
        case = f"RNN step, hidden {hidden}"
        vs_torch = None
        if torch is not None:
            vs_torch = torch_rounds(torch, make_torch_step(torch), params, (xs, ys),
                                    calls["fnad.jit"], losses, ROUNDS, NUMBER)
        if jax is not None:
            rows.append((case, "jax.jit", float(np.median(times["jax.jit"]))))
        rows.append((case, "fnad.jit (numba)", float(np.median(times["fnad.jit"])),
                     None if jax is None else ratio(times, "fnad.jit", "jax.jit"),
                     None if vs_torch is None else ratio(vs_torch, "fnad.jit", "torch eager")))
        written = "fnad.jit, as written"
        rows.append((case, written, float(np.median(times[written])),
                     None if jax is None else ratio(times, written, "jax.jit"), None))
        if vs_torch is not None:
            rows.append((case, "torch eager", float(np.median(vs_torch["torch eager"]))))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    print(table(rows, f"tanh RNN, lax.scan over {T} steps, batch {B}, {D} inputs: "
                f"value_and_grad + SGD (medians of {ROUNDS} rounds of {NUMBER} steps)",
                ratios=ratios))
    for losses in all_losses:
        check_losses(losses)


if __name__ == "__main__":
    main()

"""MLP 784-512-10, batch 256: value_and_grad + SGD step under jit, written once against a
namespace and run by fnad (numba backend) and jax.jit in one process (target fnad/jax <= 1.0),
and, where torch is installed, the same step in PyTorch eager (autograd and a hand-written
SGD update) from the same inputs, with the ratio fnad/torch. The step's loss must agree.
fnad and jax are timed in ROUNDS alternating rounds of NUMBER steps each (the ratio: the
median of the rounds' ratios); torch is imported afterwards and timed likewise against
fnad. Run:

    python benchmarks/mlp_step.py
"""
from __future__ import annotations

import numpy as np
from _common import (check_losses, header, optional, ratio, rounds, sgd_step, table,
                     torch_rounds, torch_sgd_step)

import fnad
import fnad.numpy as fnp

from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing

ROUNDS, NUMBER = 30, 5


def make_step(lib, jnp, nn):
    def loss(params, x, y):
        h = nn.relu(x @ params["w1"] + params["b1"])             # [B, 512]
        logits = h @ params["w2"] + params["b2"]                 # [B, 10]
        logp = nn.log_softmax(logits)
        return -jnp.mean(jnp.sum(logp * y, axis=-1))
    return sgd_step(lib, loss, 0.01)


def make_torch_step(torch):
    """The same loss and SGD step in PyTorch eager; params: a dict of float32 leaf tensors
    that require grad."""
    def loss(params, x, y):
        h = torch.relu(x @ params["w1"] + params["b1"])          # [B, 512]
        logits = h @ params["w2"] + params["b2"]                 # [B, 10]
        logp = torch.log_softmax(logits, dim=-1)
        return -torch.mean(torch.sum(logp * y, dim=-1))
    return torch_sgd_step(torch, loss, 0.01)


def data(rng):
    """(params, x, y) as NumPy arrays: the weights, a batch of 256 inputs, one-hot labels."""
    params = {"w1": rng.standard_normal((784, 512)).astype(np.float32) * 0.05,
              "b1": np.zeros(512, np.float32),
              "w2": rng.standard_normal((512, 10)).astype(np.float32) * 0.05,
              "b2": np.zeros(10, np.float32)}
    x = rng.standard_normal((256, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    return params, x, y


def main() -> None:
    params, x, y = data(np.random.default_rng(0))
    losses, calls = {}, {}
    jax = optional("jax")
    if jax is not None:
        import jax.numpy as jjnp
        jstep = jax.jit(make_step(jax, jjnp, jax.nn))
        pj = jax.tree_util.tree_map(jjnp.asarray, params)
        xj, yj = jjnp.asarray(x), jjnp.asarray(y)
        losses["jax.jit"] = float(jstep(pj, xj, yj)[1])
        calls["jax.jit"] = lambda: jax.block_until_ready(jstep(pj, xj, yj))
    fstep = fnad.jit(make_step(fnad, fnp, fnad.nn))
    pf = fnad.tree_util.tree_map(fnp.asarray, params)
    xf, yf = fnp.asarray(x), fnp.asarray(y)
    losses["fnad.jit"] = float(fstep(pf, xf, yf)[1])
    calls["fnad.jit"] = lambda: fstep(pf, xf, yf)
    times = rounds(calls, ROUNDS, NUMBER)
    torch = optional("torch")                     # imported after fnad and jax are timed
    if torch is not None:
        vs_torch = torch_rounds(torch, make_torch_step(torch), params, (x, y),
                                calls["fnad.jit"], losses, ROUNDS, NUMBER)
    rows = []
    if jax is not None:
        rows.append(("MLP step, batch 256", "jax.jit", float(np.median(times["jax.jit"]))))
    rows.append(("MLP step, batch 256", "fnad.jit (numba)", float(np.median(times["fnad.jit"])),
                 None if jax is None else ratio(times, "fnad.jit", "jax.jit"),
                 None if torch is None else ratio(vs_torch, "fnad.jit", "torch eager")))
    if torch is not None:
        rows.append(("MLP step, batch 256", "torch eager",
                     float(np.median(vs_torch["torch eager"]))))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    threads = f", torch {torch.get_num_threads()} threads" if torch is not None else ""
    print(table(rows, f"MLP 784-512-10 value_and_grad + SGD{threads} (medians of {ROUNDS} "
                f"rounds of {NUMBER} steps)", ratios=ratios))
    check_losses(losses)


if __name__ == "__main__":
    main()

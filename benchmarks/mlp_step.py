"""MLP 784-512-10, batch 256: value_and_grad + SGD step under jit, written once against a
namespace and run by fnad (numba backend) and jax.jit in one process (target fnad/jax <= 1.0),
and, where torch is installed, the same step in PyTorch eager (autograd and a hand-written
SGD update) from the same inputs, with the ratio fnad/torch. The step's loss must agree.
Run:

    python benchmarks/mlp_step.py
"""
from __future__ import annotations

import numpy as np
from _common import header, median_s, optional, table

import fnad
import fnad.numpy as fnp

from fnad.config import config

config.update("jax_background_compile", False)   # steady state: compile before timing


def make_step(lib, jnp, nn):
    def loss(params, x, y):
        h = nn.relu(x @ params["w1"] + params["b1"])             # [B, 512]
        logits = h @ params["w2"] + params["b2"]                 # [B, 10]
        logp = nn.log_softmax(logits)
        return -jnp.mean(jnp.sum(logp * y, axis=-1))

    def step(params, x, y):
        value, grads = lib.value_and_grad(loss)(params, x, y)
        params = lib.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
        return params, value
    return step


def make_torch_step(torch):
    """The same loss and SGD step in PyTorch eager; params: a dict of float32 leaf tensors
    that require grad."""
    def loss(params, x, y):
        h = torch.relu(x @ params["w1"] + params["b1"])          # [B, 512]
        logits = h @ params["w2"] + params["b2"]                 # [B, 10]
        logp = torch.log_softmax(logits, dim=-1)
        return -torch.mean(torch.sum(logp * y, dim=-1))

    def step(params, x, y):
        value = loss(params, x, y)
        grads = torch.autograd.grad(value, list(params.values()))
        with torch.no_grad():
            params = {k: (p - 0.01 * g).requires_grad_()
                      for (k, p), g in zip(params.items(), grads)}
        return params, value.detach()
    return step


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
    rows, losses = [], {}
    jax = optional("jax")
    t_jax = None
    if jax is not None:
        import jax.numpy as jjnp
        step = jax.jit(make_step(jax, jjnp, jax.nn))
        pj = jax.tree_util.tree_map(jjnp.asarray, params)
        xj, yj = jjnp.asarray(x), jjnp.asarray(y)
        losses["jax.jit"] = float(step(pj, xj, yj)[1])
        t_jax = median_s(lambda: jax.block_until_ready(step(pj, xj, yj)), number=5)
        rows.append(("MLP step, batch 256", "jax.jit", t_jax))
    step = fnad.jit(make_step(fnad, fnp, fnad.nn))
    pf = fnad.tree_util.tree_map(fnp.asarray, params)
    xf, yf = fnp.asarray(x), fnp.asarray(y)
    losses["fnad.jit"] = float(step(pf, xf, yf)[1])
    t = median_s(lambda: step(pf, xf, yf), number=5)
    torch = optional("torch")                     # imported after fnad and jax are timed
    t_torch = None
    if torch is not None:
        step = make_torch_step(torch)
        pt = {k: torch.tensor(v).requires_grad_() for k, v in params.items()}
        xt, yt = torch.tensor(x), torch.tensor(y)
        losses["torch eager"] = float(step(pt, xt, yt)[1])
        t_torch = median_s(lambda: step(pt, xt, yt), number=5)
    rows.append(("MLP step, batch 256", "fnad.jit (numba)", t,
                 None if t_jax is None else t / t_jax,
                 None if t_torch is None else t / t_torch))
    if torch is not None:
        rows.append(("MLP step, batch 256", "torch eager", t_torch))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    threads = f", torch {torch.get_num_threads()} threads" if torch is not None else ""
    print(table(rows, f"MLP 784-512-10 value_and_grad + SGD{threads}",
                ratios=ratios))
    ref = losses["fnad.jit"]
    print("loss: " + ", ".join(f"{impl} {v:.6f}" for impl, v in losses.items()))
    bad = [impl for impl, v in losses.items() if abs(v - ref) > 1e-4]
    if bad:
        raise SystemExit(f"loss of {', '.join(bad)} differs from fnad's by > 1e-4")


if __name__ == "__main__":
    main()

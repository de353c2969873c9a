"""MLP 784-512-10, batch 256: value_and_grad + SGD step under jit, written once against a
namespace and run by fnad (numba backend) and jax.jit in one process (target fnad/jax <= 1.0).
Run:

    python benchmarks/mlp_step.py
"""
from __future__ import annotations

import numpy as np
from _common import header, median_s, optional, table

import fnad
import fnad.numpy as fnp


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


def main() -> None:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((784, 512)).astype(np.float32) * 0.05,
              "b1": np.zeros(512, np.float32),
              "w2": rng.standard_normal((512, 10)).astype(np.float32) * 0.05,
              "b2": np.zeros(10, np.float32)}
    x = rng.standard_normal((256, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    rows = []
    jax = optional("jax")
    t_jax = None
    if jax is not None:
        import jax.numpy as jjnp
        step = jax.jit(make_step(jax, jjnp, jax.nn))
        pj = jax.tree_util.tree_map(jjnp.asarray, params)
        xj, yj = jjnp.asarray(x), jjnp.asarray(y)
        t_jax = median_s(lambda: jax.block_until_ready(step(pj, xj, yj)), number=5)
        rows.append(("MLP step, batch 256", "jax.jit", t_jax, None))
    step = fnad.jit(make_step(fnad, fnp, fnad.nn))
    pf = fnad.tree_util.tree_map(fnp.asarray, params)
    xf, yf = fnp.asarray(x), fnp.asarray(y)
    t = median_s(lambda: step(pf, xf, yf), number=5)
    rows.append(("MLP step, batch 256", "fnad.jit (numba)", t,
                 None if t_jax is None else t / t_jax))
    print(header())
    print(table(rows, "MLP 784-512-10 value_and_grad + SGD (ratio = fnad / jax)"))


if __name__ == "__main__":
    main()

"""A GPT-style train step (RMSNorm, RoPE, causal attention, SwiGLU MLP, AdamW; d=256,
4 layers, 8 heads, ff=768, vocab 256, batch 8, seq 128), written once against a namespace
and run by fnad.jit (numba backend) and jax.jit in one process. Prints time per step,
the cold first call (trace + compile) and the ratio fnad/jax (target <= 0.5). Run:

    python benchmarks/gpt_step.py
"""
from __future__ import annotations

import time

import numpy as np
from _common import header, median_s, optional, table

D, LAYERS, HEADS, FF, VOCAB, BATCH, SEQ = 256, 4, 8, 768, 256, 8, 128


def init_params(rng):
    def w(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    layers = [{"norm1": np.ones(D, np.float32), "wqkv": w(D, 3 * D), "wo": w(D, D),
               "norm2": np.ones(D, np.float32), "w_gate": w(D, FF), "w_up": w(D, FF),
               "w_down": w(FF, D)} for _ in range(LAYERS)]
    return {"embed": w(VOCAB, D), "layers": layers, "norm_f": np.ones(D, np.float32),
            "head": w(D, VOCAB)}


def make_step(lib, jnp, nn):
    def rmsnorm(x, g):                                         # x / rms(x) · g
        return x * lib.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

    def rope(x):                                               # x: [B, H, T, hd]
        hd = x.shape[-1]
        freqs = 1.0 / (10000.0 ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd))
        ang = jnp.arange(x.shape[-2], dtype=jnp.float32)[:, None] * freqs[None, :]
        cos, sin = jnp.cos(ang), jnp.sin(ang)                  # [T, hd/2]
        x1, x2 = x[..., ::2], x[..., 1::2]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    def attention(p, x):                                       # x: [B, T, D]
        b, t, _ = x.shape
        qkv = x @ p["wqkv"]                                    # [B, T, 3D]
        q, k, v = jnp.split(qkv, 3, axis=-1)
        heads = lambda z: z.reshape(b, t, HEADS, D // HEADS).transpose(0, 2, 1, 3)  # noqa
        q, k, v = rope(heads(q)), rope(heads(k)), heads(v)
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(D // HEADS))
        mask = jnp.tril(jnp.ones((t, t), dtype=bool))
        scores = jnp.where(mask, scores, -1e9)
        out = nn.softmax(scores, axis=-1) @ v                  # [B, H, T, hd]
        return out.transpose(0, 2, 1, 3).reshape(b, t, D) @ p["wo"]

    def block(p, x):
        x = x + attention(p, rmsnorm(x, p["norm1"]))
        h = rmsnorm(x, p["norm2"])
        return x + (nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]

    def loss(params, tokens):
        x = params["embed"][tokens[:, :-1]]                   # [B, T, D]
        for p in params["layers"]:
            x = block(p, x)
        logits = rmsnorm(x, params["norm_f"]) @ params["head"]
        logp = nn.log_softmax(logits, axis=-1)
        targets = tokens[:, 1:]
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    def step(params, opt, tokens):
        value, grads = lib.value_and_grad(loss)(params, tokens)
        t = opt["t"] + 1
        b1, b2, lr, wd = 0.9, 0.999, 3e-4, 0.01
        m = lib.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
        v = lib.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = lib.tree_util.tree_map(
            lambda p, m, v: p - lr * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + wd * p),
            params, m, v)
        return params, {"m": m, "v": v, "t": t}, value
    return step


def run(lib, jnp, nn, params, tokens, jit):
    params = lib.tree_util.tree_map(jnp.asarray, params)
    opt = {"m": lib.tree_util.tree_map(jnp.zeros_like, params),
           "v": lib.tree_util.tree_map(jnp.zeros_like, params),
           "t": jnp.asarray(0, jnp.int32)}
    tokens = jnp.asarray(tokens)
    step = jit(make_step(lib, jnp, nn))
    t0 = time.perf_counter()
    out = step(params, opt, tokens)
    lib.block_until_ready(out)
    cold = time.perf_counter() - t0
    state = {"p": params, "o": opt}

    def one():
        p, o, value = step(state["p"], state["o"], tokens)
        lib.block_until_ready(value)
        state["p"], state["o"] = p, o
    return cold, median_s(one, number=1, repeat=7, warmup=1), float(out[2])


def main() -> None:
    rng = np.random.default_rng(0)
    params = init_params(rng)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int32)
    rows = []
    jax = optional("jax")
    t_jax = None
    if jax is not None:
        import jax.numpy as jjnp
        cold, t_jax, loss_j = run(jax, jjnp, jax.nn, params, tokens, jax.jit)
        rows += [("GPT step: first call (compile)", "jax.jit", cold, None),
                 ("GPT step", "jax.jit", t_jax, None)]
    import fnad
    import fnad.numpy as fnp
    cold, t, loss_f = run(fnad, fnp, fnad.nn, params, tokens, fnad.jit)
    rows += [("GPT step: first call (compile)", "fnad.jit (numba)", cold, None),
             ("GPT step", "fnad.jit (numba)", t, None if t_jax is None else t / t_jax)]
    print(header())
    print(table(rows, "GPT-style train step, d=256 L=4 H=8 ff=768 V=256 B=8 T=128 "
                      "(ratio = fnad / jax)"))
    if jax is not None:
        print(f"first-step loss: fnad {loss_f:.6f}, jax {loss_j:.6f}")


if __name__ == "__main__":
    main()

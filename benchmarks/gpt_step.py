"""A GPT-style train step (RMSNorm, RoPE, causal attention, SwiGLU MLP, AdamW; d=256,
4 layers, 8 heads, ff=768, vocab 256, batch 8, seq 128), written once against a namespace
and run by fnad.jit (numba backend) and jax.jit in one process, and, where torch is
installed, the same model and step written in PyTorch eager (autograd, the same hand-written
AdamW, not torch.optim) from the same initial parameters and tokens. The steps are timed
in rounds, one step of each implementation per round (the machine's speed drifts: blocks
timed one after another would measure the drift). Prints the median time per step, the
cold first call (trace + compile), the medians of the rounds' ratios fnad/jax (target
<= 0.5) and fnad/torch, each round's times, and the losses of each (first step and last
timed step, which must agree). A last row
times the step's matrix products alone: the operands fnad's step passed to its GEMM, run
back to back through np.matmul (OpenBLAS with its own threads), a floor for any
implementation that computes them with this BLAS. Run:

    python benchmarks/gpt_step.py [--rounds N] [--without jax] [--without torch]

(`--rounds`: timed rounds, 9 by default; `--without`: leave an implementation out of the
process even where it is installed.)
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _common import header, median_s, optional, ratio, rounds, table, wait_compiled

D, LAYERS, HEADS, FF, VOCAB, BATCH, SEQ = 256, 4, 8, 768, 256, 8, 128
REPEAT, WARMUP = 9, 1          # timed rounds; untimed steps between the first call and them
B1, B2, LR, WD = 0.9, 0.999, 3e-4, 0.01                     # AdamW


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
        b1, b2, lr, wd = B1, B2, LR, WD
        m = lib.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
        v = lib.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = lib.tree_util.tree_map(
            lambda p, m, v: p - lr * ((m / c1) / (jnp.sqrt(v / c2) + 1e-8) + wd * p),
            params, m, v)
        return params, {"m": m, "v": v, "t": t}, value
    return step


def make_torch_step(torch):
    """The same loss and AdamW step as `make_step`, in PyTorch eager: params is the same
    tree (dicts, a list of layers) of float32 leaf tensors, tokens an int64 tensor."""
    def rmsnorm(x, g):                                         # x / rms(x) · g
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * g

    def rope(x):                                               # x: [B, H, T, hd]
        hd = x.shape[-1]
        freqs = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32,
                                                device=x.device) / hd))
        ang = (torch.arange(x.shape[-2], dtype=torch.float32, device=x.device)[:, None]
               * freqs[None, :])
        cos, sin = torch.cos(ang), torch.sin(ang)              # [T, hd/2]
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    def attention(p, x):                                       # x: [B, T, D]
        b, t, _ = x.shape
        q, k, v = torch.split(x @ p["wqkv"], D, dim=-1)        # 3 x [B, T, D]
        heads = lambda z: z.reshape(b, t, HEADS, D // HEADS).permute(0, 2, 1, 3)  # noqa
        q, k, v = rope(heads(q)), rope(heads(k)), heads(v)
        scores = q @ k.transpose(-1, -2) / float(np.float32(np.sqrt(D // HEADS)))
        mask = torch.tril(torch.ones((t, t), dtype=torch.bool, device=x.device))
        scores = torch.where(mask, scores, -1e9)
        out = torch.softmax(scores, dim=-1) @ v                # [B, H, T, hd]
        return out.permute(0, 2, 1, 3).reshape(b, t, D) @ p["wo"]

    def block(p, x):
        x = x + attention(p, rmsnorm(x, p["norm1"]))
        h = rmsnorm(x, p["norm2"])
        return x + (torch.nn.functional.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]

    def loss(params, tokens):
        x = params["embed"][tokens[:, :-1]]                   # [B, T, D]
        for p in params["layers"]:
            x = block(p, x)
        logits = rmsnorm(x, params["norm_f"]) @ params["head"]
        logp = torch.log_softmax(logits, dim=-1)
        targets = tokens[:, 1:]
        return -torch.mean(torch.gather(logp, -1, targets[..., None]))

    def step(params, opt, tokens):
        leaves = tree_leaves(params)
        value = loss(params, tokens)
        grads = tree_like(params, torch.autograd.grad(value, leaves))
        t = opt["t"] + 1
        with torch.no_grad():
            m = tree_map(lambda m, g: B1 * m + (1 - B1) * g, opt["m"], grads)
            v = tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, opt["v"], grads)
            c1, c2 = 1 - B1 ** t, 1 - B2 ** t
            params = tree_map(
                lambda p, m, v: (p - LR * ((m / c1) / (torch.sqrt(v / c2) + 1e-8) + WD * p)
                                 ).requires_grad_(),
                params, m, v)
        return params, {"m": m, "v": v, "t": t}, value.detach()
    return step


def tree_map(f, *trees):
    """f over the leaves of trees of dicts and lists (the params' structure)."""
    t0 = trees[0]
    if isinstance(t0, dict):
        return {k: tree_map(f, *(t[k] for t in trees)) for k in t0}
    if isinstance(t0, list):
        return [tree_map(f, *(t[i] for t in trees)) for i in range(len(t0))]
    return f(*trees)


def tree_leaves(tree) -> list:
    out = []
    tree_map(out.append, tree)
    return out


def tree_like(tree, leaves):
    """The tree `tree` with its leaves replaced, in order, by `leaves`."""
    it = iter(leaves)
    return tree_map(lambda _: next(it), tree)


def run_torch(torch, params, tokens, device="cpu"):
    """(first call, one step, state, first-step loss) of the PyTorch eager step, with the
    protocol of `run`, its tensors on `device` ("cuda": each step waits for the GPU)."""
    params = tree_map(lambda a: torch.tensor(a, device=device).requires_grad_(), params)
    zeros = lambda a: torch.zeros(a.shape, dtype=torch.float32, device=device)  # noqa: E731
    opt = {"m": tree_map(zeros, params), "v": tree_map(zeros, params), "t": 0}
    tokens = torch.tensor(tokens, dtype=torch.int64, device=device)
    step = make_torch_step(torch)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    t0 = time.perf_counter()
    out = step(params, opt, tokens)
    sync()
    cold = time.perf_counter() - t0
    state = {"p": params, "o": opt}

    def one():
        state["p"], state["o"], state["last"] = step(state["p"], state["o"], tokens)
        sync()
    return cold, one, state, float(out[2])


def inputs(seed: int = 0) -> tuple[dict, np.ndarray]:
    """The step's initial parameters and tokens, NumPy arrays (the same in every script)."""
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    return params, rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int32)


def start(lib, jnp, params, tokens) -> tuple:
    """(parameters, AdamW state, tokens) as `lib`'s arrays: the step's first arguments."""
    params = lib.tree_util.tree_map(jnp.asarray, params)
    opt = {"m": lib.tree_util.tree_map(jnp.zeros_like, params),
           "v": lib.tree_util.tree_map(jnp.zeros_like, params),
           "t": jnp.asarray(0, jnp.int32)}
    return params, opt, jnp.asarray(tokens)


def run(lib, jnp, nn, params, tokens, jit):
    """(first call, compiled code ready, one step, state, first-step loss): `one()` runs a
    step from `state` and leaves the new parameters, optimizer state and loss there."""
    params, opt, tokens = start(lib, jnp, params, tokens)
    step = jit(make_step(lib, jnp, nn))
    t0 = time.perf_counter()
    out = step(params, opt, tokens)
    lib.block_until_ready(out)
    cold = time.perf_counter() - t0
    ready = cold + wait_compiled(step, params, opt, tokens)
    state = {"p": params, "o": opt}

    def one():
        p, o, value = step(state["p"], state["o"], tokens)
        lib.block_until_ready(value)
        state["p"], state["o"], state["last"] = p, o, value
    return cold, ready, one, state, float(out[2])


def record_products(run_step) -> list:
    """The (a, b) operands of one fnad step's products, as the numba backend's GEMM received
    them (the same operand views and layouts)."""
    from fnad.backends.numba_cpu import gemm
    pairs, matmul = [], gemm.matmul

    def record(a, b, **how):
        pairs.append((a, b))
        return matmul(a, b, **how)
    gemm.matmul = record
    try:
        run_step()
    finally:
        gemm.matmul = matmul
    return pairs


def gemm_floor(run_step) -> tuple[int, float, float]:
    """(count, GFLOP, seconds): the products of one fnad step (record_products), timed
    through np.matmul alone."""
    pairs = record_products(run_step)

    def all_products():
        for a, b in pairs:
            np.matmul(a, b)
    flops = sum(2 * a.size * b.shape[-1] for a, b in pairs)
    return len(pairs), flops / 1e9, median_s(all_products, repeat=REPEAT, warmup=1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="GPT-style train step: fnad vs jax, torch")
    parser.add_argument("--rounds", type=int, default=REPEAT, help="timed rounds")
    parser.add_argument("--without", action="append", default=[], choices=["jax", "torch"],
                        help="leave this implementation out")
    args = parser.parse_args(argv)
    n_rounds = args.rounds
    params, tokens = inputs()
    rows, steps, states, first = [], {}, {}, {}
    jax = None if "jax" in args.without else optional("jax")
    if jax is not None:
        import jax.numpy as jjnp
        cold, _, steps["jax.jit"], states["jax.jit"], first["jax.jit"] = run(
            jax, jjnp, jax.nn, params, tokens, jax.jit)
        rows.append(("GPT step: first call (compile)", "jax.jit", cold))
    import fnad
    import fnad.numpy as fnp
    cold_f, ready_f, steps["fnad.jit"], states["fnad.jit"], first["fnad.jit"] = run(
        fnad, fnp, fnad.nn, params, tokens, fnad.jit)
    rows += [("GPT step: first call (compile)", "fnad.jit (numba)", cold_f),
             ("GPT step: compiled code ready", "fnad.jit (numba)", ready_f)]
    torch = None if "torch" in args.without else optional("torch")
    if torch is not None:
        cold_t, steps["torch eager"], states["torch eager"], first["torch eager"] = run_torch(
            torch, params, tokens)
        rows.append(("GPT step: first call", "torch eager", cold_t))
    times = rounds(steps, n_rounds, 1, WARMUP)
    med = {name: float(np.median(ts)) for name, ts in times.items()}
    last = {name: float(state["last"]) for name, state in states.items()}
    n_gemm, gflop, t_gemm = gemm_floor(steps["fnad.jit"])

    def per_round(other):                     # the median of the rounds' fnad/other ratios
        return ratio(times, "fnad.jit", other) if other in times else None
    for name in steps:
        ratios = (per_round("jax.jit"), per_round("torch eager")) if name == "fnad.jit" else ()
        rows.append(("GPT step", name if name != "fnad.jit" else "fnad.jit (numba)",
                     med[name], *ratios))
    rows.append((f"its {n_gemm} products alone", "np.matmul (OpenBLAS)", t_gemm,
                 None if "jax.jit" not in med else t_gemm / med["jax.jit"]))
    print(header())
    ratios = ("fnad/jax", "fnad/torch") if torch is not None else ("fnad/jax",)
    threads = f", torch {torch.get_num_threads()} threads" if torch is not None else ""
    print(table(rows, f"GPT-style train step, d=256 L=4 H=8 ff=768 V=256 B=8 T=128{threads}",
                ratios=ratios))
    print(f"step times: medians of {n_rounds} rounds, each round one step of every "
          "implementation; ratios: medians of the rounds' ratios")
    for name, ts in times.items():
        print(f"  {name:12s} " + " ".join(f"{t * 1e3:6.1f}" for t in ts) + " ms")
    print(f"products: {gflop:.1f} GFLOP, {gflop / t_gemm:.0f} GF/s through np.matmul; "
          f"the fnad/jax column of that row is the ratio no step doing them can beat")
    ref_first, ref_last = first["fnad.jit"], last["fnad.jit"]
    for impl in steps:
        print(f"loss {impl:12s} first step {first[impl]:.6f} "
              f"(diff {first[impl] - ref_first:+.1e}), after {1 + WARMUP + n_rounds} steps "
              f"{last[impl]:.6f} (diff {last[impl] - ref_last:+.1e})")
    bad = [impl for impl in steps if abs(first[impl] - ref_first) > 1e-4]
    if bad:
        raise SystemExit(f"first-step loss of {', '.join(bad)} differs from fnad's by > 1e-4")


if __name__ == "__main__":
    main()

"""KV-cache decoding: tokens/s as the sequence grows (32, 128 and 512 tokens), fnad vs jax.

The decode step of the GPT of benchmarks/gpt_step.py (d=256, 4 layers, 8 heads, vocab 256,
batch 1) is written once against a namespace and jit-compiled by fnad (numba backend) and by
jax: it writes the new token's k and v into a preallocated cache [L, 2, B, H, T_max, D] with
`lax.dynamic_update_slice` at a traced position and attends over the whole buffer with the
future masked, so one compiled program serves every position. For each length n the cache
has T_max = n slots and n greedy tokens are generated one by one from a 1-token prompt;
the table gives the time per token over all n, and over the first and the last 16 tokens
(flat per-token time: the cost does not grow with the position). A last row runs the
library's own `fnad.decode.generate` (fnad.models LM of the same size) for 128 tokens. Run:

    python benchmarks/decode.py
"""
from __future__ import annotations

import time

import numpy as np
from _common import header, optional, table
from gpt_step import D, HEADS, LAYERS, VOCAB, init_params

LENGTHS = (32, 128, 512)
HD = D // HEADS


def make_decode_step(lib, jnp, nn):
    lax = lib.lax

    def rmsnorm(x, g):
        return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

    def rope(x, pos):                                          # x: [B, H, 1, hd]
        freqs = 1.0 / (10000.0 ** (jnp.arange(0, HD, 2, dtype=jnp.float32) / HD))
        ang = pos.astype(jnp.float32) * freqs                  # [hd/2]
        cos, sin = jnp.cos(ang), jnp.sin(ang)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    def step(params, cache, token, pos):
        """token [B] int32, pos int32 scalar, cache [L, 2, B, H, T_max, hd]."""
        b = token.shape[0]
        t_max = cache.shape[4]
        x = params["embed"][token][:, None, :]                 # [B, 1, D]
        visible = (jnp.arange(t_max) <= pos)[None, None, None, :]  # [1, 1, 1, T_max]
        for i, p in enumerate(params["layers"]):
            h = rmsnorm(x, p["norm1"])
            q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)     # 3 x [B, 1, D]
            heads = lambda z: z.reshape(b, 1, HEADS, HD).transpose(0, 2, 1, 3)  # noqa
            q, k, v = rope(heads(q), pos), rope(heads(k), pos), heads(v)  # [B, H, 1, hd]
            zero = jnp.zeros((), jnp.int32)
            kv = jnp.stack([k, v])[None]                       # [1, 2, B, H, 1, hd]
            cache = lax.dynamic_update_slice(cache, kv, (i, zero, zero, zero, pos, zero))
            keys, values = cache[i, 0], cache[i, 1]            # [B, H, T_max, hd]
            s = q @ keys.transpose(0, 1, 3, 2) / np.float32(np.sqrt(HD))  # [B, H, 1, T_max]
            s = jnp.where(visible, s, -1e9)
            o = nn.softmax(s, axis=-1) @ values                # [B, H, 1, hd]
            x = x + o.transpose(0, 2, 1, 3).reshape(b, 1, D) @ p["wo"]
            h = rmsnorm(x, p["norm2"])
            x = x + (nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]
        logits = rmsnorm(x, params["norm_f"]) @ params["head"]  # [B, 1, V]
        return jnp.argmax(logits[:, 0], axis=-1).astype(jnp.int32), cache
    return step


def run(lib, jnp, params, n: int):
    """Generate n tokens; returns (tokens, seconds per token for each token)."""
    step = lib.jit(make_decode_step(lib, jnp, lib.nn))
    cache = jnp.zeros((LAYERS, 2, 1, HEADS, n, HD), jnp.float32)
    token = jnp.asarray(np.array([1], np.int32))
    out, times = [], []
    from _common import wait_compiled
    warm_token, warm_cache = step(params, cache, token, np.int32(0))  # compile outside the
    wait_compiled(step, params, cache, token, np.int32(0))             # clock (fnad: wait
    for pos in range(3):                                               # for compiled code)
        warm_token, warm_cache = step(params, warm_cache, token, np.int32(pos))
    lib.block_until_ready(warm_token)
    for pos in range(n):
        t = time.perf_counter()
        token, cache = step(params, cache, token, np.int32(pos))
        token = lib.block_until_ready(token)
        times.append(time.perf_counter() - t)
        out.append(int(np.asarray(token)[0]))
    return out, np.array(times)


def library_generate(n: int) -> float:
    """Seconds per token of fnad.decode.generate on an fnad.models LM of the same size."""
    import fnad
    from fnad import decode
    from fnad.models import transformer
    cfg = transformer.LMConfig(vocab=VOCAB, d_model=D, n_layers=LAYERS, n_heads=HEADS,
                               d_ff=768, max_len=n + 1)
    params = transformer.init_params(fnad.random.PRNGKey(0), cfg)
    prompt = np.array([[1]], np.int32)
    decoder = decode.make_decoder(cfg)
    decode.generate(params, prompt, cfg, max_new_tokens=n, decoder=decoder)  # compile
    t = time.perf_counter()
    decode.generate(params, prompt, cfg, max_new_tokens=n, decoder=decoder)
    return (time.perf_counter() - t) / n


def main() -> None:
    import fnad
    import fnad.numpy as fjnp
    print(header())
    params_np = init_params(np.random.default_rng(0))
    jax = optional("jax")
    rows, rates = [], []
    for n in LENGTHS:
        f_tokens, f_t = run(fnad, fjnp, fnad.tree_util.tree_map(fjnp.asarray, params_np), n)
        j_t = None
        if jax is not None:
            import jax.numpy as jjnp
            j_tokens, j_t = run(jax, jjnp, jax.tree_util.tree_map(jjnp.asarray, params_np), n)
            if j_tokens != f_tokens:
                raise SystemExit(f"decode: fnad and jax generated different tokens at n={n}")
        for what, sl in (("all", slice(None)), ("first 16", slice(0, 16)),
                         ("last 16", slice(-16, None))):
            sec = float(np.mean(f_t[sl]))
            ref = None if j_t is None else float(np.mean(j_t[sl]))
            rows.append((f"n={n}: s/token ({what})", "fnad.jit (numba)", sec,
                         None if ref is None else sec / ref))
            if ref is not None:
                rows.append((f"n={n}: s/token ({what})", "jax.jit", ref))
        rates.append(f"n={n:4d}: fnad {1 / np.mean(f_t):8.1f} tokens/s"
                     + ("" if j_t is None else f", jax {1 / np.mean(j_t):8.1f} tokens/s"))
    gen = library_generate(128)
    rows.append(("fnad.decode.generate, n=128", "fnad.jit (numba)", gen))
    print(table(rows, "KV-cache greedy decoding, batch 1, time per token", ("fnad/jax",)))
    print("\n".join(rates))
    print(f"fnad.decode.generate (fnad.models LM, same size), n=128: {1 / gen:.1f} tokens/s")


if __name__ == "__main__":
    main()

"""Multi-head self-attention with grouped / multi-query KV heads, causal and padding masks,
dropout on the attention weights, RoPE, and the preallocated KV cache used for decoding.

Pure functions of a nested-dict parameter tree, written with fnad's public API only; it must
not import fnad's internals.

Math (H query heads, G kv heads, R = H/G query heads per kv head, D = C/H):
    q_h = x W_q[h],  k_g = x W_k[g],  v_g = x W_v[g]          (RoPE on q and k when given)
    A_h = softmax(q_h k_gᵀ / √D + M),  g = h // R             (M: 0 where allowed, -big not)
    y   = concat_h(dropout(A_h) v_g) W_o
G = H is multi-head attention, G = 1 multi-query, 1 < G < H grouped-query; query heads
h = g·R .. g·R + R − 1 share kv head g (jnp.repeat(k, R, axis=heads) order).

KV cache: cache = {"k", "v"} [B, G, S, D] (S = T_max, preallocated). The T new keys/values
(after RoPE) are written at time `cache_index` (a Python int or a traced int scalar, so one
compiled step serves every position) with lax.dynamic_update_slice — O(T) copied per step,
never a concat of the whole cache — and the T queries at absolute positions
cache_index + t attend over all S slots with slots s > cache_index + t masked out (causal in
absolute positions; the not yet written slots are masked by the same rule).
"""
from __future__ import annotations

import math

import numpy as np

import fnad.numpy as jnp
from fnad import lax, nn, random
from fnad.models.layers import apply_rope, dropout, linear_init

__all__ = ["attention", "attention_init"]


def attention_init(key, C: int, n_heads: int, n_kv_heads: int, *, bias: bool = False,
                   dtype=jnp.float32) -> dict:
    """{"wq": [C, H·D], "wk": [C, G·D], "wv": [C, G·D], "wo": [H·D, C]} with D = C // H,
    plus "bq", "bk", "bv", "bo" (zeros) when `bias`."""
    _check_heads(C, n_heads, n_kv_heads)
    D = C // n_heads
    kq, kk, kv, ko = random.split(key, 4)
    params = {}
    for name, k, c_in, c_out in (("q", kq, C, n_heads * D), ("k", kk, C, n_kv_heads * D),
                                 ("v", kv, C, n_kv_heads * D), ("o", ko, n_heads * D, C)):
        lin = linear_init(k, c_in, c_out, bias=bias, dtype=dtype)
        params["w" + name] = lin["w"]
        if bias:
            params["b" + name] = lin["b"]
    return params


def _check_heads(C: int, H: int, G: int) -> None:
    if H <= 0 or G <= 0:
        raise ValueError(f"attention: n_heads ({H}) and n_kv_heads ({G}) must be positive")
    if C % H:
        raise ValueError(f"attention: the width C={C} must be divisible by n_heads={H}")
    if H % G:
        raise ValueError(f"attention: n_heads={H} must be a multiple of n_kv_heads={G} "
                         "(each kv head serves n_heads/n_kv_heads query heads)")


def _proj(params: dict, name: str, x):
    y = x @ params["w" + name]
    return y + params["b" + name] if "b" + name in params else y


def attention(params: dict, x, *, n_heads: int, n_kv_heads: int, causal: bool = True,
              padding_mask=None, rope=None, dropout_rate: float = 0.0, key=None, cache=None,
              cache_index=None):
    """Self-attention of x [B, T, C] -> (y [B, T, C], new_cache).

    padding_mask: [B, S] bool, True = real token; masks keys (S = T without a cache, the
    cache length T_max with one). rope: (cos, sin) [T, D/2] for the T positions of x.
    dropout_rate > 0 drops attention weights with a mask drawn from `key`.
    cache / cache_index: see the module docstring; new_cache is None without a cache.
    """
    B, T, C = x.shape
    H, G = n_heads, n_kv_heads
    _check_heads(C, H, G)
    if params["wq"].shape[1] % H:
        raise ValueError(f"attention: wq has {params['wq'].shape[1]} outputs, not a multiple "
                         f"of n_heads={H}")
    D = params["wq"].shape[1] // H
    R = H // G
    q = _proj(params, "q", x).reshape(B, T, H, D).transpose(0, 2, 1, 3)   # [B, H, T, D]
    k = _proj(params, "k", x).reshape(B, T, G, D).transpose(0, 2, 1, 3)   # [B, G, T, D]
    v = _proj(params, "v", x).reshape(B, T, G, D).transpose(0, 2, 1, 3)   # [B, G, T, D]
    if rope is not None:
        cos, sin = rope
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    new_cache = None
    if cache is not None:
        if cache_index is None:
            raise ValueError("attention: a cache needs cache_index (the time of x's first "
                             "token)")
        S = cache["k"].shape[2]
        if cache["k"].shape != (B, G, S, D) or cache["v"].shape != (B, G, S, D):
            raise ValueError(f"attention: cache k/v must have shape [B, G, T_max, D] = "
                             f"[{B}, {G}, T_max, {D}], got {cache['k'].shape} and "
                             f"{cache['v'].shape}")
        if T > S:
            raise ValueError(f"attention: {T} new tokens do not fit in a cache of length {S}")
        idx = jnp.asarray(cache_index).astype(jnp.int32)
        zero = jnp.zeros((), jnp.int32)
        start = (zero, zero, idx, zero)
        k = lax.dynamic_update_slice(cache["k"], k.astype(cache["k"].dtype), start)  # [B,G,S,D]
        v = lax.dynamic_update_slice(cache["v"], v.astype(cache["v"].dtype), start)  # [B,G,S,D]
        new_cache = {"k": k, "v": v}
        k, v = k.astype(x.dtype), v.astype(x.dtype)
        q_pos = idx + jnp.arange(T, dtype=jnp.int32)                  # [T] absolute positions
        allowed = jnp.arange(S, dtype=jnp.int32)[None, :] <= q_pos[:, None]  # [T, S]
    else:
        S = T
        allowed = jnp.tril(jnp.ones((T, T), dtype=bool)) if causal else None  # [T, T]

    allowed = None if allowed is None else allowed[None, None, None]  # [1, 1, 1, T, S]
    if padding_mask is not None:
        if padding_mask.shape != (B, S):
            raise ValueError(f"attention: padding_mask must have shape [B, S] = [{B}, {S}] "
                             f"(True = real key), got {padding_mask.shape}")
        pad = padding_mask.astype(bool)[:, None, None, None, :]      # [B, 1, 1, 1, S]
        allowed = pad if allowed is None else jnp.logical_and(allowed, pad)

    qg = q.reshape(B, G, R, T, D)                                     # head h = g·R + r
    scale = np.asarray(1.0 / math.sqrt(D), x.dtype)
    scores = jnp.einsum("bgrtd,bgsd->bgrts", qg, k) * scale          # [B, G, R, T, S]
    if allowed is not None:
        # a large finite negative (not -inf): a fully masked row gets uniform weights, no NaN
        scores = jnp.where(allowed, scores, jnp.full_like(scores, jnp.finfo(x.dtype).min))
    half = x.dtype in (jnp.bfloat16, jnp.float16)                     # softmax in float32
    probs = nn.softmax(scores.astype(jnp.float32) if half else scores, axis=-1)
    probs = probs.astype(x.dtype)                                     # [B, G, R, T, S]
    if dropout_rate > 0.0:
        probs = dropout(key, probs, dropout_rate)
    out = jnp.einsum("bgrts,bgsd->bgrtd", probs, v)                   # [B, G, R, T, D]
    out = out.reshape(B, H, T, D).transpose(0, 2, 1, 3).reshape(B, T, H * D)  # [B, T, H·D]
    return _proj(params, "o", out), new_cache                         # [B, T, C]

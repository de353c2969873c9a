"""Autoregressive decoding for `fnad.models.transformer` LMs: greedy, temperature, top-k and
top-p (nucleus) sampling over a preallocated KV cache.

    prefill   logits, cache = forward_cached(params, prompt[B, P], cache, 0)   one program
    decode    logits, cache = forward_cached(params, token[B, 1], cache, i)    one program,
              next = sample(logits[:, -1])                                     every position

The cache holds k and v for every layer as [B, G, T_max, D], allocated once for
T_max = P + max_new_tokens. Each decode step writes one time slot with
`lax.dynamic_update_slice` at the traced position i and attends over the whole buffer with
the future masked, so every step is the same program with the same shapes: it is compiled
once, and its cost does not grow with the position (no concatenation of the cache, which
would copy O(t) per token and recompile per length; seed 004).

Sampling, on logits z [B, V] with temperature τ:
    greedy       argmax_v z_v
    temperature  v ~ softmax(z / τ)
    top-k        v ~ softmax(z / τ) restricted to the k largest logits
    top-p        v ~ softmax(z / τ) restricted to the smallest set of most likely tokens
                 whose probability reaches p (the most likely token is always kept)
"""
from __future__ import annotations

import numpy as np

import fnad
import fnad.numpy as jnp
from fnad import lax, random
from fnad.models import transformer

__all__ = ["generate", "make_decoder", "sample_logits"]

METHODS = ("greedy", "temperature", "top_k", "top_p")


def sample_logits(logits, key=None, *, method: str = "greedy", temperature: float = 1.0,
                  top_k: int | None = None, top_p: float | None = None):
    """Next tokens [B] (int32) from logits [B, V] by `method` (see the module docstring)."""
    if method not in METHODS:
        raise ValueError(f"sample_logits: unknown method {method!r}; choose one of {METHODS}")
    if method == "greedy":
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if key is None:
        raise ValueError(f"sample_logits: method {method!r} draws random tokens and needs a "
                         f"key (fnad.random.PRNGKey(seed))")
    if not temperature > 0:
        raise ValueError(f"sample_logits: temperature must be > 0, got {temperature} "
                         f"(use method='greedy' for the argmax)")
    z = logits.astype(jnp.float32) / temperature                            # [B, V]
    if method == "top_k":
        V = z.shape[-1]
        if top_k is None or not 1 <= top_k <= V:
            raise ValueError(f"sample_logits: top_k must be in 1..{V}, got {top_k}")
        kth = lax.top_k(z, top_k)[0][:, -1:]                               # [B, 1]
        z = jnp.where(z >= kth, z, -jnp.inf)
    elif method == "top_p":
        if top_p is None or not 0 < top_p <= 1:
            raise ValueError(f"sample_logits: top_p must be in (0, 1], got {top_p}")
        order = jnp.argsort(-z, axis=-1)                                    # [B, V] descending
        sorted_z = jnp.take_along_axis(z, order, axis=-1)
        probs = fnad.nn.softmax(sorted_z, axis=-1)
        before = jnp.cumsum(probs, axis=-1) - probs                         # mass ahead of each
        cutoff = jnp.min(jnp.where(before < top_p, sorted_z, jnp.inf), axis=-1, keepdims=True)
        z = jnp.where(z >= cutoff, z, -jnp.inf)                             # [B, V]
    return random.categorical(key, z, axis=-1).astype(jnp.int32)


def make_decoder(cfg: transformer.LMConfig, *, method: str = "greedy", temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None,
                 backend: str | None = None, jit: bool = True):
    """(prefill, step): jit-compiled programs.

    prefill(params, prompt[B, P], cache, key) -> (next token [B], cache)
    step(params, token[B], cache, index, key) -> (next token [B], cache)   index: int32 scalar
    """
    def pick(logits, key):                                                  # logits [B, V]
        return sample_logits(logits, key, method=method, temperature=temperature,
                             top_k=top_k, top_p=top_p)

    def prefill(params, prompt, cache, key):
        logits, cache = transformer.forward_cached(params, prompt, cache, 0, cfg)  # [B, P, V]
        return pick(logits[:, -1], key), cache

    def step(params, token, cache, index, key):
        logits, cache = transformer.forward_cached(params, token[:, None], cache, index, cfg)
        return pick(logits[:, -1], key), cache                             # [B]
    if not jit:
        return prefill, step
    return fnad.jit(prefill, backend=backend), fnad.jit(step, backend=backend)


def generate(params, prompt, cfg: transformer.LMConfig, *, max_new_tokens: int,
             method: str = "greedy", temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, key=None, backend: str | None = None,
             jit: bool = True, decoder=None):
    """Continue `prompt` [B, P] (int tokens) by `max_new_tokens` tokens; returns them as an
    int32 NumPy array [B, max_new_tokens]. Pass `decoder=make_decoder(...)` to reuse compiled
    programs across calls (the jit caches also do that for equal settings)."""
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or prompt.dtype.kind not in "iu":
        raise ValueError(f"generate: prompt must be a [batch, length] integer array, got "
                         f"{prompt.dtype}{list(prompt.shape)}")
    B, P = prompt.shape
    if P < 1 or max_new_tokens < 1:
        raise ValueError(f"generate: need a prompt of at least one token and max_new_tokens "
                         f">= 1, got length {P} and max_new_tokens {max_new_tokens}")
    if prompt.min() < 0 or prompt.max() >= cfg.vocab:
        raise ValueError(f"generate: prompt tokens must be in [0, {cfg.vocab}), got values in "
                         f"[{prompt.min()}, {prompt.max()}]")
    if method != "greedy" and key is None:
        raise ValueError(f"generate: method {method!r} needs key=fnad.random.PRNGKey(seed)")
    T_max = P + max_new_tokens
    if cfg.pos == "sinusoidal" and T_max > cfg.max_len:
        raise ValueError(f"generate: prompt ({P}) + max_new_tokens ({max_new_tokens}) = "
                         f"{T_max} exceeds the model's max_len {cfg.max_len}")
    prefill, step = decoder or make_decoder(cfg, method=method, temperature=temperature,
                                            top_k=top_k, top_p=top_p, backend=backend, jit=jit)
    keys = (random.split(key, max_new_tokens) if key is not None
            else jnp.zeros((max_new_tokens, 2), jnp.uint32))
    cache = transformer.init_cache(cfg, B, T_max)
    token, cache = prefill(params, jnp.asarray(prompt.astype(np.int32)), cache, keys[0])
    out = [np.asarray(token)]
    for i in range(1, max_new_tokens):
        token, cache = step(params, token, cache, np.int32(P + i - 1), keys[i])
        out.append(np.asarray(token))
    return np.stack(out, axis=1).astype(np.int32)                          # [B, new]

"""The decoder-only language model (seed 001) and the post-norm encoder stack (seed 000),
as pure functions of nested-dict parameter trees: configs, init, forward, loss, KV cache.

Written with fnad's public API only; it must not import fnad's internals.

Decoder (pre-norm), for each of the L blocks, with N = RMSNorm or LayerNorm:
    x = x + Attn(N1(x))          causal, MHA / GQA / MQA, RoPE or sinusoidal positions
    x = x + FFN(N2(x))           dense (GELU / SwiGLU) or MoE (adds its aux loss)
    logits = N_f(x) · W_head     (W_head = Eᵀ when tie_embeddings)
    loss = CE(logits, targets; mask) + Σ_layers aux_l
Encoder (post-norm, seed 000):
    x = E[tokens]·√C + PE;  per block  x = LN(x + MHA(x));  x = LN(x + FFN_gelu(x))

Parameter tree of the LM:
    {"embed": {"table": [V, C]},
     "blocks": [{"norm1": {...}, "attn": {"wq", "wk", "wv", "wo"}, "norm2": {...},
                 "ffn": {...}  or  "moe": {"router", "w_gate", "w_up", "w_down"}}, ...],
     "norm_f": {...}, "head": {"w": [C, V]}  (absent when tie_embeddings)}
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

import fnad.numpy as jnp
from fnad import random, tree_util
from fnad.models.attention import attention, attention_init
from fnad.models.layers import (cross_entropy, dropout, embed, embedding_init, ffn, ffn_init,
                                layer_norm, layer_norm_init, linear_init, rms_norm,
                                rms_norm_init, rope_angles, sinusoidal_positions, unembed)
from fnad.models.moe import moe, moe_init

__all__ = ["EncoderConfig", "LMConfig", "encoder_forward", "encoder_init", "forward",
           "forward_cached", "init_cache", "init_params", "loss"]

_DTYPES = ("float32", "float64", "bfloat16", "float16")


def _fail(cls: str, msg: str):
    raise ValueError(f"{cls}: {msg}")


def _check_common(name: str, cfg) -> None:
    for field in ("vocab", "d_model", "n_layers", "n_heads", "max_len"):
        value = getattr(cfg, field)
        if not isinstance(value, int) or value <= 0:
            _fail(name, f"{field} must be a positive int, got {value!r}")
    if cfg.d_model % cfg.n_heads:
        _fail(name, f"d_model={cfg.d_model} must be divisible by n_heads={cfg.n_heads}")
    if cfg.d_ff is not None and (not isinstance(cfg.d_ff, int) or cfg.d_ff <= 0):
        _fail(name, f"d_ff must be a positive int or None, got {cfg.d_ff!r}")
    if not 0.0 <= cfg.dropout < 1.0:
        _fail(name, f"dropout must be in [0, 1), got {cfg.dropout}")


@dataclasses.dataclass(frozen=True)
class LMConfig:
    """Decoder-only LM hyperparameters (hashable: pass it as a static argument to jit).

    n_kv_heads None means n_heads (MHA); 1 is MQA. d_ff None means 4·d_model, or for
    SwiGLU (dense or MoE experts) 8/3·d_model rounded up to a multiple of 8. n_experts 0
    gives dense FFNs; > 0 MoE FFNs (SwiGLU experts) with top_k, aux_alpha and
    capacity_factor (applied only when train=True, so inference and the KV-cache path see
    every token routed). The resolved values are the properties kv_heads, ff_dim, head_dim.
    max_len bounds the sequence (and KV-cache) length of sinusoidal models; RoPE models may
    run past it (NTK scaling, rope_ntk_factor > 1, is how their context is extended).
    """
    vocab: int = 256
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None
    d_ff: int | None = None
    max_len: int = 256
    norm: str = "rms"
    pos: str = "rope"
    ffn: str = "swiglu"
    n_experts: int = 0
    top_k: int = 2
    aux_alpha: float = 0.01
    capacity_factor: float | None = None
    dropout: float = 0.0
    rope_base: float = 10000.0
    rope_ntk_factor: float = 1.0
    tie_embeddings: bool = False
    dtype: str = "float32"

    def __post_init__(self):
        name = "LMConfig"
        _check_common(name, self)
        if self.n_kv_heads is not None:
            if not isinstance(self.n_kv_heads, int) or self.n_kv_heads <= 0:
                _fail(name, f"n_kv_heads must be a positive int or None, got "
                            f"{self.n_kv_heads!r}")
            if self.n_heads % self.n_kv_heads:
                _fail(name, f"n_heads={self.n_heads} must be a multiple of n_kv_heads="
                            f"{self.n_kv_heads} (each kv head serves n_heads/n_kv_heads query "
                            "heads)")
        for field, choices in (("norm", ("rms", "layer")), ("pos", ("rope", "sinusoidal")),
                               ("ffn", ("swiglu", "gelu", "gelu_tanh")), ("dtype", _DTYPES)):
            if getattr(self, field) not in choices:
                _fail(name, f"{field} must be one of {choices}, got {getattr(self, field)!r}")
        if self.pos == "rope" and self.head_dim % 2:
            _fail(name, f"RoPE needs an even head dim, got d_model/n_heads = {self.head_dim}")
        if self.pos == "sinusoidal" and self.d_model % 2:
            _fail(name, f"sinusoidal positions need an even d_model, got {self.d_model}")
        if not isinstance(self.n_experts, int) or self.n_experts < 0:
            _fail(name, f"n_experts must be an int >= 0 (0 = dense FFN), got "
                        f"{self.n_experts!r}")
        if self.n_experts:
            if self.ffn != "swiglu":
                _fail(name, f"MoE experts are SwiGLU: with n_experts={self.n_experts} ffn must "
                            f"be 'swiglu', got {self.ffn!r}")
            if not isinstance(self.top_k, int) or not 1 <= self.top_k <= self.n_experts:
                _fail(name, f"top_k must be in [1, n_experts={self.n_experts}], got "
                            f"{self.top_k!r}")
            if self.capacity_factor is not None and self.capacity_factor <= 0:
                _fail(name, f"capacity_factor must be positive or None, got "
                            f"{self.capacity_factor}")
        if self.aux_alpha < 0:
            _fail(name, f"aux_alpha must be >= 0, got {self.aux_alpha}")
        if self.rope_base <= 0 or self.rope_ntk_factor <= 0:
            _fail(name, f"rope_base and rope_ntk_factor must be positive, got "
                        f"{self.rope_base} and {self.rope_ntk_factor}")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ff_dim(self) -> int:
        if self.d_ff is not None:
            return self.d_ff
        if self.ffn == "swiglu":
            return 8 * math.ceil(8 * self.d_model / 3 / 8)
        return 4 * self.d_model


def _dtype(name: str):
    return getattr(jnp, name)


def _check_len(where: str, what: str, n: int, cfg: LMConfig) -> None:
    if cfg.pos == "sinusoidal" and n > cfg.max_len:
        raise ValueError(f"{where}: {what}={n} exceeds cfg.max_len={cfg.max_len} (sinusoidal "
                         "positions; RoPE models may run longer)")


def _norm_init(cfg, C):
    return rms_norm_init(C) if cfg.norm == "rms" else layer_norm_init(C)


def _norm(cfg, params, x):
    return rms_norm(params, x) if cfg.norm == "rms" else layer_norm(params, x)


# ---- decoder-only LM ---------------------------------------------------------------------------
def init_params(key, cfg: LMConfig) -> dict:
    """The LM's parameter tree (see the module docstring), in cfg.dtype."""
    C, V = cfg.d_model, cfg.vocab
    k_embed, k_head, *k_blocks = random.split(key, 2 + cfg.n_layers)
    blocks = []
    for kb in k_blocks:
        k_attn, k_ff = random.split(kb)
        block = {"norm1": _norm_init(cfg, C),
                 "attn": attention_init(k_attn, C, cfg.n_heads, cfg.kv_heads),
                 "norm2": _norm_init(cfg, C)}
        if cfg.n_experts:
            block["moe"] = moe_init(k_ff, C, cfg.ff_dim, cfg.n_experts)
        else:
            block["ffn"] = ffn_init(k_ff, C, cfg.ff_dim, kind=cfg.ffn)
        blocks.append(block)
    params = {"embed": embedding_init(k_embed, V, C), "blocks": blocks,
              "norm_f": _norm_init(cfg, C)}
    if not cfg.tie_embeddings:
        params["head"] = linear_init(k_head, C, V, scale=0.02)
    dtype = _dtype(cfg.dtype)
    return tree_util.tree_map(lambda a: a.astype(dtype), params)


def _dropout_keys(key, rate: float, n: int, where: str):
    """n keys for the dropout sites (None each when rate is 0)."""
    if rate == 0.0:
        return [None] * n
    if key is None:
        raise ValueError(f"{where}: train=True with dropout={rate} needs a PRNG key "
                         "(key=...)")
    return list(random.split(key, n))


def _decoder(params, tokens, cfg: LMConfig, positions, *, rate, key, padding_mask, caches,
             index, train):
    """The LM body: (logits [B, T, V], aux, new caches or None)."""
    B, T = tokens.shape
    x = embed(params["embed"], tokens)                                # [B, T, C]
    x = x.astype(_dtype(cfg.dtype))
    # angles in float32 (float64 for a float64 model): bf16 would blur positions beyond ~256
    ang = jnp.float64 if cfg.dtype == "float64" else jnp.float32
    rope = None
    if cfg.pos == "rope":
        rope = rope_angles(positions, cfg.head_dim, base=cfg.rope_base,
                           ntk_factor=cfg.rope_ntk_factor, dtype=ang)  # 2 x [T, D/2]
    else:
        x = x + sinusoidal_positions(positions, cfg.d_model, dtype=ang).astype(x.dtype)
    keys = _dropout_keys(key, rate, 1 + 3 * len(params["blocks"]), "forward")
    x = dropout(keys[0], x, rate)
    acc = jnp.float64 if cfg.dtype == "float64" else jnp.float32      # aux accumulator
    aux = jnp.zeros((), acc)
    new_caches = [] if caches is not None else None
    for i, block in enumerate(params["blocks"]):
        k_attn, k_res1, k_res2 = keys[1 + 3 * i: 4 + 3 * i]
        a, c = attention(block["attn"], _norm(cfg, block["norm1"], x), n_heads=cfg.n_heads,
                         n_kv_heads=cfg.kv_heads, causal=True, padding_mask=padding_mask,
                         rope=rope, dropout_rate=rate, key=k_attn,
                         cache=None if caches is None else caches[i], cache_index=index)
        if new_caches is not None:
            new_caches.append(c)
        x = x + dropout(k_res1, a, rate)                              # [B, T, C]
        h = _norm(cfg, block["norm2"], x)
        if "moe" in block:
            f, aux_l = moe(block["moe"], h, top_k=cfg.top_k, aux_alpha=cfg.aux_alpha,
                           capacity_factor=cfg.capacity_factor if train else None)
            aux = aux + aux_l.astype(acc)
        else:
            f = ffn(block["ffn"], h, kind=cfg.ffn)
        x = x + dropout(k_res2, f, rate)                              # [B, T, C]
    x = _norm(cfg, params["norm_f"], x)
    if cfg.tie_embeddings:
        logits = unembed(params["embed"], x)                          # [B, T, V]
    else:
        logits = x @ params["head"]["w"]                              # [B, T, V]
    return logits, aux, new_caches


def forward(params: dict, tokens, cfg: LMConfig, *, key=None, train: bool = False,
            padding_mask=None):
    """tokens [B, T] int -> (logits [B, T, V], aux): aux is the summed MoE aux loss (0.0 for
    a dense model). padding_mask [B, T] (True = real token) masks padded keys. Dropout and
    MoE capacity apply only when `train` (dropout then needs `key`)."""
    _B, T = tokens.shape
    _check_len("forward", "sequence length T", T, cfg)
    rate = cfg.dropout if train else 0.0
    logits, aux, _ = _decoder(params, tokens, cfg, jnp.arange(T, dtype=jnp.int32), rate=rate,
                              key=key, padding_mask=padding_mask, caches=None, index=None,
                              train=train)
    return logits, aux


def loss(params: dict, tokens, targets, cfg: LMConfig, *, mask=None, key=None,
         train: bool = False):
    """(ce + aux, {"ce": ce, "aux": aux}): cross-entropy of targets [B, T] under the logits of
    tokens [B, T], averaged where `mask` [B, T] is true, plus the MoE aux loss."""
    logits, aux = forward(params, tokens, cfg, key=key, train=train)
    ce = cross_entropy(logits, targets, mask=mask)
    return ce + aux.astype(ce.dtype), {"ce": ce, "aux": aux}


def init_cache(cfg: LMConfig, B: int, T_max: int, dtype=jnp.float32) -> list:
    """Preallocated KV cache: per layer {"k", "v"} zeros [B, G, T_max, D]."""
    _check_len("init_cache", "T_max", T_max, cfg)
    shape = (B, cfg.kv_heads, T_max, cfg.head_dim)
    return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}
            for _ in range(cfg.n_layers)]


def forward_cached(params: dict, tokens, cache: list, index, cfg: LMConfig):
    """tokens [B, T] at positions index .. index+T-1 -> (logits [B, T, V], new_cache).

    Prefill (T > 1, index 0) and decode steps (T = 1): each layer writes its new keys and
    values into the cache at `index` (an int or a traced int32 scalar: under fnad.jit one
    compile serves every position) and attends causally over the cache. No dropout; MoE
    runs without capacity dropping. The caller keeps index + T <= T_max.
    """
    _B, T = tokens.shape
    if len(cache) != len(params["blocks"]):
        raise ValueError(f"forward_cached: the cache has {len(cache)} layers, the model "
                         f"{len(params['blocks'])}")
    T_max = cache[0]["k"].shape[2] if cache else T
    if isinstance(index, (int, np.integer)) and not 0 <= index <= T_max - T:
        raise ValueError(f"forward_cached: tokens at positions {index}..{index + T - 1} do not "
                         f"fit in a cache of length {T_max} (dynamic_update_slice would clamp "
                         f"the write to another position)")
    positions = jnp.asarray(index).astype(jnp.int32) + jnp.arange(T, dtype=jnp.int32)  # [T]
    logits, _, new_cache = _decoder(params, tokens, cfg, positions, rate=0.0, key=None,
                                    padding_mask=None, caches=cache, index=index, train=False)
    return logits, new_cache


# ---- encoder stack (seed 000) ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Post-norm Transformer encoder hyperparameters (seed 000); d_ff None means 4·d_model."""
    vocab: int = 256
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None
    max_len: int = 256
    dropout: float = 0.0

    def __post_init__(self):
        _check_common("EncoderConfig", self)
        if self.d_model % 2:
            _fail("EncoderConfig", f"sinusoidal positions need an even d_model, got "
                                   f"{self.d_model}")

    @property
    def ff_dim(self) -> int:
        return 4 * self.d_model if self.d_ff is None else self.d_ff


def encoder_init(key, cfg: EncoderConfig) -> dict:
    """{"embed": {"table"}, "blocks": [{"attn", "norm1", "ffn" (GELU, biases), "norm2"}]}."""
    k_embed, *k_blocks = random.split(key, 1 + cfg.n_layers)
    blocks = []
    for kb in k_blocks:
        k_attn, k_ff = random.split(kb)
        blocks.append({"attn": attention_init(k_attn, cfg.d_model, cfg.n_heads, cfg.n_heads),
                       "norm1": layer_norm_init(cfg.d_model),
                       "ffn": ffn_init(k_ff, cfg.d_model, cfg.ff_dim, kind="gelu"),
                       "norm2": layer_norm_init(cfg.d_model)})
    return {"embed": embedding_init(k_embed, cfg.vocab, cfg.d_model), "blocks": blocks}


def encoder_forward(params: dict, tokens, cfg: EncoderConfig, *, padding_mask=None, key=None,
                    train: bool = False):
    """tokens [B, T] int -> [B, T, C]: non-causal self-attention; padding_mask [B, T] (True =
    real token) keeps pad tokens out of every real position's output."""
    _B, T = tokens.shape
    if T > cfg.max_len:
        raise ValueError(f"encoder_forward: sequence length {T} exceeds cfg.max_len="
                         f"{cfg.max_len}")
    C = cfg.d_model
    rate = cfg.dropout if train else 0.0
    keys = _dropout_keys(key, rate, 1 + 3 * len(params["blocks"]), "encoder_forward")
    x = embed(params["embed"], tokens) * math.sqrt(C)                 # [B, T, C]
    x = x + sinusoidal_positions(jnp.arange(T, dtype=jnp.int32), C).astype(x.dtype)
    x = dropout(keys[0], x, rate)
    for i, block in enumerate(params["blocks"]):
        k_attn, k_res1, k_res2 = keys[1 + 3 * i: 4 + 3 * i]
        a, _ = attention(block["attn"], x, n_heads=cfg.n_heads, n_kv_heads=cfg.n_heads,
                         causal=False, padding_mask=padding_mask, dropout_rate=rate,
                         key=k_attn)
        x = layer_norm(block["norm1"], x + dropout(k_res1, a, rate))  # [B, T, C]
        f = ffn(block["ffn"], x, kind="gelu")
        x = layer_norm(block["norm2"], x + dropout(k_res2, f, rate))  # [B, T, C]
    return x

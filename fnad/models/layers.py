"""Model building blocks as pure functions of nested-dict parameters: token embedding,
LayerNorm and RMSNorm, linear, GELU / SwiGLU feed-forward, sinusoidal positions, RoPE
(with NTK-aware scaling), dropout and cross-entropy.

Each component is an `*_init(key, ...) -> params` plus an apply function `f(params, x)`.
Written with fnad's public API only (fnad.numpy, fnad.lax, fnad.nn, fnad.random), as a
user would; it must not import fnad's internals (core, primitives, backends).
"""
from __future__ import annotations

import math

import numpy as np

import fnad.numpy as jnp
from fnad import lax, nn, random

__all__ = ["apply_rope", "cross_entropy", "dropout", "embed", "embedding_init", "ffn",
           "ffn_init", "layer_norm", "layer_norm_init", "linear", "linear_init", "rms_norm",
           "rms_norm_init", "rope_angles", "sinusoidal_positions", "unembed"]

FFN_KINDS = ("gelu", "gelu_tanh", "swiglu")


# ---- token embedding ---------------------------------------------------------------------------
# embed:   x[b, t] = E[tokens[b, t]]          (a gather; its gradient scatter-adds into E)
# unembed: logits = x · Eᵀ                    (the tied output head)
def embedding_init(key, V: int, C: int, *, dtype=jnp.float32, scale: float = 0.02) -> dict:
    """{"table": [V, C]} drawn from N(0, scale²)."""
    return {"table": scale * random.normal(key, (V, C), dtype)}


def embed(params: dict, tokens):
    """tokens [B, T] int -> [B, T, C]: rows of the table."""
    return jnp.take(params["table"], tokens, axis=0)                  # [B, T, C]


def unembed(params: dict, x):
    """x [B, T, C] -> logits [B, T, V] with the embedding table as the output head."""
    return x @ params["table"].T                                      # [B,T,C] @ [C,V] -> [B,T,V]


# ---- normalization -----------------------------------------------------------------------------
# LayerNorm: μ = mean(x), σ² = mean((x-μ)²),  y = (x-μ)/√(σ²+ε) · γ + β   (over the last axis)
# RMSNorm:   r = √(mean(x²)+ε),               y = x / r · γ
def layer_norm_init(C: int, *, dtype=jnp.float32) -> dict:
    """{"scale": ones [C], "bias": zeros [C]}."""
    return {"scale": jnp.ones((C,), dtype), "bias": jnp.zeros((C,), dtype)}


def _f32(x):
    """bfloat16 / float16 -> float32 (statistics in half precision under- and overflow: the
    derivative of rsqrt(v) ~ v^-3/2 leaves float16's range for v ~ 1e-3)."""
    return x.astype(jnp.float32) if x.dtype in (jnp.bfloat16, jnp.float16) else x


def layer_norm(params: dict, x, eps: float = 1e-5):
    """LayerNorm over the last axis of x [..., C] (computed in float32 for half inputs)."""
    xf = _f32(x)
    mu = jnp.mean(xf, axis=-1, keepdims=True)                         # [..., 1]
    xc = xf - mu
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)                   # [..., 1]
    y = xc * lax.rsqrt(var + eps)
    return (y * _f32(params["scale"]) + _f32(params["bias"])).astype(x.dtype)


def rms_norm_init(C: int, *, dtype=jnp.float32) -> dict:
    """{"scale": ones [C]}."""
    return {"scale": jnp.ones((C,), dtype)}


def rms_norm(params: dict, x, eps: float = 1e-6):
    """RMSNorm over the last axis of x [..., C] (computed in float32 for half inputs)."""
    xf = _f32(x)
    ms = jnp.mean(xf * xf, axis=-1, keepdims=True)                    # [..., 1]
    return (xf * lax.rsqrt(ms + eps) * _f32(params["scale"])).astype(x.dtype)


# ---- linear ------------------------------------------------------------------------------------
# y = x · W (+ b)
def linear_init(key, C_in: int, C_out: int, *, bias: bool = False, scale: float | None = None,
                dtype=jnp.float32) -> dict:
    """{"w": [C_in, C_out]} ~ N(0, scale²) with scale 1/√C_in by default; "b": zeros [C_out]
    when `bias`."""
    scale = 1.0 / math.sqrt(C_in) if scale is None else scale
    params = {"w": scale * random.normal(key, (C_in, C_out), dtype)}
    if bias:
        params["b"] = jnp.zeros((C_out,), dtype)
    return params


def linear(params: dict, x):
    """x [..., C_in] -> [..., C_out]."""
    y = x @ params["w"]                                               # [..., C_out]
    return y + params["b"] if "b" in params else y


# ---- feed-forward ------------------------------------------------------------------------------
# gelu:      y = W2 · gelu(W1 x + b1) + b2        gelu(u) = u·Φ(u) = u/2·(1 + erf(u/√2))
# gelu_tanh: the same with gelu(u) ≈ u/2·(1 + tanh(√(2/π)·(u + 0.044715 u³)))
# swiglu:    y = W_down · (silu(W_gate x) ⊙ W_up x)     silu(u) = u·σ(u)      (no biases)
def _check_kind(kind: str) -> None:
    if kind not in FFN_KINDS:
        raise ValueError(f"ffn: kind must be one of {FFN_KINDS}, got {kind!r}")


def ffn_init(key, C: int, F: int, *, kind: str, dtype=jnp.float32) -> dict:
    """gelu kinds: {"w1": [C, F], "b1": [F], "w2": [F, C], "b2": [C]};
    swiglu: {"w_gate": [C, F], "w_up": [C, F], "w_down": [F, C]}."""
    _check_kind(kind)
    if kind == "swiglu":
        kg, ku, kd = random.split(key, 3)
        return {"w_gate": linear_init(kg, C, F, dtype=dtype)["w"],
                "w_up": linear_init(ku, C, F, dtype=dtype)["w"],
                "w_down": linear_init(kd, F, C, dtype=dtype)["w"]}
    k1, k2 = random.split(key)
    return {"w1": linear_init(k1, C, F, dtype=dtype)["w"], "b1": jnp.zeros((F,), dtype),
            "w2": linear_init(k2, F, C, dtype=dtype)["w"], "b2": jnp.zeros((C,), dtype)}


def ffn(params: dict, x, *, kind: str):
    """Position-wise feed-forward of x [..., C] -> [..., C] (kind: gelu, gelu_tanh, swiglu)."""
    _check_kind(kind)
    if kind == "swiglu":
        h = nn.silu(x @ params["w_gate"]) * (x @ params["w_up"])     # [..., F]
        return h @ params["w_down"]                                   # [..., C]
    h = nn.gelu(x @ params["w1"] + params["b1"], approximate=(kind == "gelu_tanh"))  # [..., F]
    return h @ params["w2"] + params["b2"]                            # [..., C]


# ---- positions ---------------------------------------------------------------------------------
# sinusoidal (Vaswani): ω_i = 10000^(-2i/C),  PE[p, 2i] = sin(p·ω_i),  PE[p, 2i+1] = cos(p·ω_i)
# RoPE: θ_i = base'^(-2i/D) for i < D/2, with NTK-aware base' = base·s^(D/(D-2)) (s: the
#   context-extension factor; s = 1 is plain RoPE). Each pair (x_2i, x_2i+1) at position p is
#   rotated by the angle p·θ_i:
#     out_2i   = x_2i·cos(pθ_i) − x_2i+1·sin(pθ_i)
#     out_2i+1 = x_2i·sin(pθ_i) + x_2i+1·cos(pθ_i)
#   so ⟨R_p q, R_s k⟩ = ⟨q, R_(s−p) k⟩ depends on positions only through s − p.
def sinusoidal_positions(positions, C: int, *, dtype=jnp.float32):
    """positions [T] int (may be traced) -> [T, C]: sin on even dims, cos on odd dims."""
    if C % 2:
        raise ValueError(f"sinusoidal_positions: the width C must be even, got {C}")
    omega = jnp.asarray(10000.0 ** (-np.arange(0, C, 2) / C), dtype)  # [C/2]
    ang = jnp.asarray(positions).astype(dtype)[:, None] * omega[None, :]  # [T, C/2]
    T = ang.shape[0]
    return jnp.stack([jnp.sin(ang), jnp.cos(ang)], axis=-1).reshape(T, C)  # [T, C/2, 2] -> [T, C]


def rope_angles(positions, D: int, *, base: float = 10000.0, ntk_factor: float = 1.0,
                dtype=jnp.float32):
    """(cos, sin), each [T, D/2], of the RoPE angles p·θ_i for positions [T] (may be traced)."""
    if D % 2 or D < 2:
        raise ValueError(f"rope_angles: the head dim D must be even and >= 2, got {D}")
    if ntk_factor <= 0:
        raise ValueError(f"rope_angles: ntk_factor must be positive, got {ntk_factor}")
    # D = 2 has a single frequency θ_0 = 1 whatever the base, so NTK scaling is moot there
    scaled = base * ntk_factor ** (D / (D - 2)) if D > 2 else base
    theta = jnp.asarray(scaled ** (-np.arange(0, D, 2, dtype=np.float64) / D), dtype)  # [D/2]
    ang = jnp.asarray(positions).astype(dtype)[:, None] * theta[None, :]  # [T, D/2]
    return jnp.cos(ang), jnp.sin(ang)


def apply_rope(x, cos, sin):
    """Rotate the interleaved pairs of x [..., T, D] by the angles (cos, sin) [T, D/2]; the
    output keeps the interleaved layout."""
    cos, sin = cos.astype(x.dtype), sin.astype(x.dtype)
    x1, x2 = x[..., ::2], x[..., 1::2]                                # [..., T, D/2] each
    out = jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [..., T, D/2, 2]
    return out.reshape(x.shape)                                       # [..., T, D]


# ---- dropout -----------------------------------------------------------------------------------
# inverted dropout: m ~ Bernoulli(1 − r) per entry,  y = m ⊙ x / (1 − r)   so  E[y] = x
def dropout(key, x, rate: float, *, deterministic: bool = False):
    """x with each entry zeroed with probability `rate` (the rest scaled by 1/(1-rate)), the
    mask drawn from `key`; rate 0 or `deterministic` returns x unchanged."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1], got {rate}")
    if deterministic or rate == 0.0:
        return x
    if key is None:
        raise ValueError(f"dropout: rate {rate} > 0 needs a PRNG key (or pass "
                         "deterministic=True for evaluation)")
    if rate == 1.0:
        return jnp.zeros_like(x)
    keep = random.bernoulli(key, 1.0 - rate, x.shape)                 # same shape as x
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


# ---- cross-entropy -----------------------------------------------------------------------------
# ℓ_n = −log softmax(z_n)[y_n] = logsumexp(z_n) − z_n[y_n];  loss = Σ_n m_n·ℓ_n / Σ_n m_n
def cross_entropy(logits, labels, *, mask=None):
    """Mean negative log-likelihood of int `labels` [...] under `logits` [..., V], over the
    positions where `mask` [...] is true (all when None). bfloat16/float16 logits are
    promoted to float32 first. A mask with no true entry gives 0."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"cross_entropy: labels shape {labels.shape} must equal the logits "
                         f"shape {logits.shape} without its last (vocab) axis")
    if logits.dtype in (jnp.bfloat16, jnp.float16):
        logits = logits.astype(jnp.float32)
    logp = nn.log_softmax(logits, axis=-1)                            # [..., V]
    nll = -jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]  # [...]
    if mask is None:
        return jnp.mean(nll)
    if mask.shape != labels.shape:
        raise ValueError(f"cross_entropy: mask shape {mask.shape} must equal the labels "
                         f"shape {labels.shape}")
    m = mask.astype(bool)
    total = jnp.sum(jnp.where(m, nll, jnp.zeros_like(nll)))
    count = jnp.sum(m.astype(nll.dtype))
    return total / jnp.maximum(count, 1.0)

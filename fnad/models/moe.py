"""Mixture-of-experts feed-forward layer (seed 001): softmax router, top-k experts with
renormalized weights, SwiGLU experts, the load-balancing aux loss, optional capacity.

Pure functions of a nested-dict parameter tree, written with fnad's public API only; it must
not import fnad's internals.

Math (N = B·T tokens x_n, E experts, K = top_k):
    p_n      = softmax(x_n W_r)                                  router probs  [N, E]
    S_n      = top-k indices of p_n;  w_ne = p_ne / Σ_{j∈S_n} p_nj  for e ∈ S_n, else 0
    expert_e(x) = W_down[e] · (silu(W_gate[e] x) ⊙ W_up[e] x)   (SwiGLU, no biases)
    y_n      = Σ_e w_ne · expert_e(x_n)
    f_i      = (1/(N·K)) Σ_n [i ∈ S_n]        fraction of routed slots that went to i
    P_i      = (1/N) Σ_n p_ni                 mean router prob of i
    aux      = α · E · Σ_i f_i · P_i          (= α when routing is perfectly uniform)
f_i comes from the discrete top-k choice and carries no gradient; the router learns to
balance through P_i.

Capacity (capacity_factor = c, not None): each expert takes at most
cap = ceil(c · N · K / E) token slots. Slots are queued by choice rank first, then token
order (every token's first choice before any second choice, as in GShard); a slot past its
expert's capacity is dropped: its weight w_ne becomes 0, the remaining weights are not
renormalized, and the residual connection around the layer carries the token. f_i is
computed before dropping (the router's choice).

Compute: a sparse dispatch. The N·K (token, expert) slots are sorted by expert, the tokens
gathered in that order, and each SwiGLU matrix applied by one lax.ragged_dot (a grouped
product: expert e multiplies only its own slots, K/E of the dense FLOPs); the slots' outputs,
scaled by w_ne (0 for a dropped slot), are added back to their tokens.
"""
from __future__ import annotations

import math

import fnad.numpy as jnp
from fnad import lax, nn, random

__all__ = ["moe", "moe_init"]


def moe_init(key, C: int, F: int, E: int, *, dtype=jnp.float32) -> dict:
    """{"router": [C, E], "w_gate": [E, C, F], "w_up": [E, C, F], "w_down": [E, F, C]}."""
    if E <= 0:
        raise ValueError(f"moe_init: the number of experts E must be positive, got {E}")
    kr, kg, ku, kd = random.split(key, 4)
    s_in, s_ff = 1.0 / math.sqrt(C), 1.0 / math.sqrt(F)
    return {"router": s_in * random.normal(kr, (C, E), dtype),
            "w_gate": s_in * random.normal(kg, (E, C, F), dtype),
            "w_up": s_in * random.normal(ku, (E, C, F), dtype),
            "w_down": s_ff * random.normal(kd, (E, F, C), dtype)}


def moe(params: dict, x, *, top_k: int, aux_alpha: float = 0.01,
        capacity_factor: float | None = None):
    """x [B, T, C] -> (y [B, T, C], aux_loss scalar); see the module docstring."""
    B, T, C = x.shape
    E = params["router"].shape[1]
    K = top_k
    if not 1 <= K <= E:
        raise ValueError(f"moe: top_k must be in [1, E={E}], got {K}")
    if capacity_factor is not None and capacity_factor <= 0:
        raise ValueError(f"moe: capacity_factor must be positive or None, got "
                         f"{capacity_factor}")
    N = B * T
    xf = x.reshape(N, C)                                              # [N, C]
    probs = nn.softmax(xf @ params["router"], axis=-1)                # [N, E]
    top_p, top_i = lax.top_k(probs, K)                                # [N, K] each
    weights = top_p / jnp.sum(top_p, axis=-1, keepdims=True)          # [N, K] renormalized
    sel = nn.one_hot(top_i, E, dtype=x.dtype)                         # [N, K, E] 0/1

    # aux = α·E·Σ f_i P_i, with f_i from the choice before any capacity drop
    f = jnp.sum(sel, axis=(0, 1)) / (N * K)                           # [E]
    P = jnp.mean(probs, axis=0)                                       # [E]
    aux = aux_alpha * E * jnp.sum(f * P)

    if capacity_factor is not None:
        cap = math.ceil(capacity_factor * N * K / E)
        queue = sel.transpose(1, 0, 2).reshape(K * N, E)              # [K·N, E] rank-major
        position = jnp.cumsum(queue, axis=0).reshape(K, N, E).transpose(1, 0, 2)  # [N, K, E]
        sel = jnp.where(position <= cap, sel, jnp.zeros_like(sel))   # drop slots past cap
    slot_w = (weights * jnp.sum(sel, axis=-1)).reshape(N * K)         # 0 where dropped

    # Sparse dispatch: the N·K (token, expert) slots sorted by expert, one grouped product
    # per weight matrix (lax.ragged_dot: each expert multiplies only its own slots).
    expert = top_i.reshape(N * K)
    order = jnp.argsort(expert, stable=True)                          # [N·K] by expert
    token = order // K
    sizes = jnp.sum(nn.one_hot(expert, E, dtype=jnp.int32), axis=0)  # [E] slots per expert
    xs = xf[token]                                                    # [N·K, C]
    h = nn.silu(lax.ragged_dot(xs, params["w_gate"], sizes)) * \
        lax.ragged_dot(xs, params["w_up"], sizes)                    # [N·K, F]
    out = lax.ragged_dot(h, params["w_down"], sizes)                  # [N·K, C]
    y = jnp.zeros_like(xf).at[token].add(out * slot_w[order][:, None])  # [N, C]
    return y.reshape(B, T, C), aux                                    # [B, T, C]

"""Functions of the kind users write, each written once against a namespace.

Every function takes `(np_, nn_, *args)`: `np_` is `fnad.numpy` or `jax.numpy`, `nn_` is
`fnad.nn` or `jax.nn`, so the same source runs under both libraries and
tests/test_user_functions.py can compare fnad's derivatives with jax's. Each is registered
with `@user_fn(make, ...)` in CASES; `make(rng, dtype)` builds its positional arguments as
NumPy arrays (or pytrees of them) in `dtype`, with integer and boolean arguments as
int32/bool. Inputs stay away from kinks (ties in max/sort, zeros in abs/sqrt/relu, clip
bounds) except where a function is about NaN-safety at such a point.

Shape letters as in STYLE.md: N rows/batch, B batch, T time, C width, H heads, D head dim,
V vocab, K classes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np


@dataclass(frozen=True)
class UserFn:
    """One user function and how to test it.

    diff: the float positional arguments to differentiate (grad uses diff[0], the argnums
    tests the tuple; vjp/jvp/linearize close over the others). scalar: the output is a
    scalar loss (otherwise grad and value_and_grad see `Σ out·w` for fixed random w).
    nan_safe: the derivatives must come out finite although the inputs sit on a
    singular point of a discarded `where` branch.
    """

    name: str
    fn: Callable
    make: Callable[[np.random.Generator, type], tuple]
    diff: tuple[int, ...]
    scalar: bool
    has_aux: bool
    rtol: float
    atol: float
    x64: bool
    nan_safe: bool


CASES: dict[str, UserFn] = {}


def closed_over(fn, args, diff):
    """fn as a function of args[i] for i in diff only; the other arguments are fixed."""
    def g(*dyn):
        full = list(args)
        for i, a in zip(diff, dyn):
            full[i] = a
        return fn(*full)
    return g


def user_fn(make, diff=(0,), *, scalar=True, has_aux=False, rtol=1e-4, atol=1e-5,
            x64=False, nan_safe=False):
    """Register `fn` in CASES under its own name."""
    def register(fn):
        CASES[fn.__name__] = UserFn(fn.__name__, fn, make, tuple(diff), scalar, has_aux,
                                    rtol, atol, x64, nan_safe)
        return fn
    return register


# ---- input helpers ------------------------------------------------------------------------
def normal(rng, dt, *shape, scale=1.0):
    return np.asarray(scale * rng.standard_normal(shape), dt)


def uniform(rng, dt, lo, hi, *shape):
    return rng.uniform(lo, hi, shape).astype(dt)


def away(rng, dt, *shape, gap=0.2, hi=2.0):
    """Values with gap <= |x| <= hi: away from the kink of abs/relu/max at 0."""
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(gap, hi, shape)).astype(dt)


def distinct(rng, dt, *shape):
    """Values whose entries along the last axis are at least 0.1 apart (no ties)."""
    n = shape[-1]
    base = np.arange(n) * 0.3 + rng.uniform(0.0, 0.1, shape)
    return rng.permuted(base, axis=-1).astype(dt)


def labels(rng, k, *shape):
    return rng.integers(0, k, shape).astype(np.int32)


def dense(rng, dt, n_in, n_out):
    return {"w": normal(rng, dt, n_in, n_out, scale=1 / math.sqrt(n_in)),
            "b": normal(rng, dt, n_out, scale=0.1)}


# ---- losses -------------------------------------------------------------------------------
@user_fn(lambda r, dt: ({"w": normal(r, dt, 5, 3), "b": normal(r, dt, 3)},
                        normal(r, dt, 8, 5), normal(r, dt, 8, 3)), diff=(0, 1), x64=True)
def mse(np_, nn_, p, x, y):
    pred = x @ p["w"] + p["b"]                             # [N,5] @ [5,3] -> [N,3]
    return np_.mean((pred - y) ** 2)


@user_fn(lambda r, dt: (normal(r, dt, 4, 2), normal(r, dt, 6, 4), normal(r, dt, 6, 2)),
         diff=(0, 1))
def mae(np_, nn_, w, x, y):
    return np_.mean(np_.abs(x @ w - y))


@user_fn(lambda r, dt: (normal(r, dt, 20, scale=1.5), normal(r, dt, 20)), diff=(0, 1))
def huber(np_, nn_, pred, y):
    delta = 1.0
    d = pred - y
    a = np_.abs(d)
    return np_.mean(np_.where(a <= delta, 0.5 * d ** 2, delta * (a - 0.5 * delta)))


@user_fn(lambda r, dt: (away(r, dt, 12, gap=0.05, hi=4.0),
                        r.integers(0, 2, 12).astype(dt)), diff=(0, 1))
def bce_with_logits(np_, nn_, z, y):
    # max(z, 0) - z·y + log(1 + e^{-|z|}): the stable form of -y·log σ(z) - (1-y)·log(1-σ(z))
    return np_.mean(np_.maximum(z, 0) - z * y + np_.log1p(np_.exp(-np_.abs(z))))


@user_fn(lambda r, dt: (normal(r, dt, 6, 5, scale=2.0), labels(r, 5, 6)), x64=True)
def softmax_xent_take_along_axis(np_, nn_, logits, y):
    logp = nn_.log_softmax(logits, axis=-1)                # [N,K]
    return -np_.mean(np_.take_along_axis(logp, y[:, None], axis=-1))


@user_fn(lambda r, dt: (normal(r, dt, 6, 5, scale=2.0), labels(r, 5, 6)))
def softmax_xent_one_hot(np_, nn_, logits, y):
    onehot = nn_.one_hot(y, logits.shape[-1], dtype=logits.dtype)   # [N,K]
    return -np_.mean(np_.sum(onehot * nn_.log_softmax(logits), axis=-1))


@user_fn(lambda r, dt: (normal(r, dt, 6, 5, scale=2.0), labels(r, 5, 6)))
def label_smoothing_xent(np_, nn_, logits, y):
    K, eps = logits.shape[-1], 0.1
    target = nn_.one_hot(y, K) * (1 - eps) + eps / K      # [N,K]
    return -np_.sum(target * nn_.log_softmax(logits)) / logits.shape[0]


@user_fn(lambda r, dt: (normal(r, dt, 4, 6), normal(r, dt, 4, 6)), diff=(0, 1))
def kl_divergence(np_, nn_, logits_p, logits_q):
    p = nn_.softmax(logits_p, axis=-1)
    logp, logq = nn_.log_softmax(logits_p, axis=-1), nn_.log_softmax(logits_q, axis=-1)
    return np_.mean(np_.sum(p * (logp - logq), axis=-1))


@user_fn(lambda r, dt: (normal(r, dt, 5), normal(r, dt, 16, 5),
                        r.choice([-1.0, 1.0], 16).astype(dt)), diff=(0, 1))
def hinge(np_, nn_, w, x, y):
    s = np_.dot(x, w)                                      # [N]
    return np_.mean(np_.maximum(0.0, 1.0 - y * s)) + 0.5 * np_.mean(np_.maximum(0, -y * s) ** 2)


@user_fn(lambda r, dt: (away(r, dt, 10, gap=0.05), r.integers(0, 2, 10).astype(dt)))
def focal_loss(np_, nn_, z, y):
    p = nn_.sigmoid(z)
    pt = np_.where(y > 0.5, p, 1 - p)
    return -np_.mean((1 - pt) ** 2 * np_.log(pt))


@user_fn(lambda r, dt: (normal(r, dt, 7), normal(r, dt, 7), normal(r, dt, 7)), diff=(0, 1))
def gaussian_nll(np_, nn_, mu, raw_sigma, x):
    sigma = nn_.softplus(raw_sigma) + 1e-3
    return np_.mean(np_.log(sigma) + 0.5 * ((x - mu) / sigma) ** 2 + 0.5 * np_.log(2 * np_.pi))


@user_fn(lambda r, dt: (normal(r, dt, 6, 4), normal(r, dt, 6, 4), normal(r, dt, 6, 4)),
         diff=(0, 1, 2))
def triplet_margin(np_, nn_, anchor, pos, neg):
    d_ap = np_.sum((anchor - pos) ** 2, axis=-1)
    d_an = np_.sum((anchor - neg) ** 2, axis=-1)
    return np_.mean(np_.maximum(d_ap - d_an + 1.0, 0.0))


@user_fn(lambda r, dt: (normal(r, dt, 3, 2), normal(r, dt, 3), normal(r, dt, 9, 2)),
         diff=(0, 1, 2))
def gmm_nll(np_, nn_, means, logit_w, x):
    # -Σ_n log Σ_k π_k N(x_n; μ_k, I), with the mixture weights π = softmax(logit_w)
    d2 = np_.sum((x[:, None, :] - means[None, :, :]) ** 2, axis=-1)        # [N,K]
    log_comp = nn_.log_softmax(logit_w)[None, :] - 0.5 * d2 - np_.log(2 * np_.pi)
    return -np_.mean(nn_.logsumexp(log_comp, axis=1))


# ---- networks ---------------------------------------------------------------------------
def _mlp3_args(r, dt):
    params = {"l1": dense(r, dt, 4, 8), "l2": dense(r, dt, 8, 8), "l3": dense(r, dt, 8, 2)}
    return params, normal(r, dt, 5, 4), normal(r, dt, 5, 2)


@user_fn(_mlp3_args, diff=(0, 1), x64=True)
def mlp_relu(np_, nn_, params, x, y):
    h = nn_.relu(x @ params["l1"]["w"] + params["l1"]["b"])            # [N,8]
    h = nn_.relu(h @ params["l2"]["w"] + params["l2"]["b"])            # [N,8]
    out = h @ params["l3"]["w"] + params["l3"]["b"]                    # [N,2]
    return np_.mean((out - y) ** 2)


def _mlp2_args(r, dt):
    return {"hidden": dense(r, dt, 4, 6), "out": dense(r, dt, 6, 3)}, normal(r, dt, 5, 4), \
        labels(r, 3, 5)


@user_fn(_mlp2_args, diff=(0, 1))
def mlp_gelu_tanh_classifier(np_, nn_, params, x, y):
    h = nn_.gelu(x @ params["hidden"]["w"] + params["hidden"]["b"], approximate=True)
    logits = np_.tanh(h @ params["out"]["w"] + params["out"]["b"]) * 3.0  # [N,K]
    logp = nn_.log_softmax(logits)
    return -np_.mean(logp[np_.arange(x.shape[0]), y])


@user_fn(lambda r, dt: ([dense(r, dt, 3, 5), dense(r, dt, 5, 2)], normal(r, dt, 4, 3)),
         diff=(0, 1), scalar=False)
def mlp_gelu_exact_silu(np_, nn_, layers, x):
    h = nn_.gelu(x @ layers[0]["w"] + layers[0]["b"], approximate=False)
    return nn_.silu(h @ layers[1]["w"] + layers[1]["b"])                # [N,2]


@user_fn(lambda r, dt: ({"w1": normal(r, dt, 4, 6, scale=0.5), "w3": normal(r, dt, 4, 6),
                         "w2": normal(r, dt, 6, 4, scale=0.5)}, normal(r, dt, 2, 3, 4)),
         diff=(0, 1), scalar=False)
def swiglu_ffn(np_, nn_, p, x):
    return (nn_.silu(x @ p["w1"]) * (x @ p["w3"])) @ p["w2"]             # [B,T,F] @ [F,C]


def _rnn_args(r, dt):
    params = {"wx": normal(r, dt, 3, 5, scale=0.5), "wh": normal(r, dt, 5, 5, scale=0.4),
              "b": normal(r, dt, 5, scale=0.1), "wo": normal(r, dt, 5, 2)}
    return params, normal(r, dt, 4, 2, 3), normal(r, dt, 2, 2)


@user_fn(_rnn_args, diff=(0, 1), x64=True)
def rnn_unrolled(np_, nn_, params, xs, y):
    T, B, _ = xs.shape
    h = np_.zeros((B, params["wh"].shape[0]), xs.dtype)               # [B,H]
    outs = []
    for t in range(T):                                                # Python loop: unrolled
        h = np_.tanh(xs[t] @ params["wx"] + h @ params["wh"] + params["b"])
        outs.append(h)
    pred = h @ params["wo"]                                           # [B,2]
    return np_.mean((pred - y) ** 2) + 0.1 * np_.mean(np_.stack(outs) ** 2)


@user_fn(lambda r, dt: (normal(r, dt, 3), normal(r, dt), normal(r, dt, 10, 3),
                        r.integers(0, 2, 10).astype(dt)), diff=(0, 1))
def logistic_regression(np_, nn_, w, b, x, y):
    z = x @ w + b                                           # [N]
    nll = np_.mean(nn_.softplus(z) - y * z)                 # -log σ(z)^y (1-σ(z))^(1-y)
    return nll + 0.01 * np_.sum(w ** 2)


@user_fn(lambda r, dt: (normal(r, dt, 5, 2), normal(r, dt, 4, 2), normal(r, dt, 5, 4),
                        r.random((5, 4)) < 0.6), diff=(0, 1))
def matrix_factorization(np_, nn_, U, V, R, observed):
    err = np_.where(observed, U @ V.T - R, 0.0)             # [n,k] @ [k,m] -> [n,m]
    n_obs = np_.sum(observed)                               # int count
    return np_.sum(err ** 2) / n_obs + 0.01 * (np_.sum(U ** 2) + np_.sum(V ** 2))


# ---- activations and normalization (array outputs) --------------------------------------
@user_fn(lambda r, dt: (normal(r, dt, 4, 6, scale=2.0),), scalar=False)
def softmax(np_, nn_, x):
    return nn_.softmax(x, axis=-1)


@user_fn(lambda r, dt: (normal(r, dt, 3, 5, scale=2.0),), scalar=False)
def log_softmax(np_, nn_, x):
    return nn_.log_softmax(x, axis=0)


@user_fn(lambda r, dt: (normal(r, dt, 4, 6, scale=3.0),), scalar=False)
def logsumexp(np_, nn_, x):
    return nn_.logsumexp(x, axis=-1) + nn_.logsumexp(x, axis=0, keepdims=True).sum()


@user_fn(lambda r, dt: (distinct(r, dt, 4, 6),), scalar=False)
def logsumexp_by_hand(np_, nn_, x):
    m = np_.max(x, axis=-1, keepdims=True)                  # [N,1]
    return np_.log(np_.sum(np_.exp(x - m), axis=-1)) + m[..., 0]


@user_fn(lambda r, dt: (normal(r, dt, 3, 8, scale=2.0), 1 + normal(r, dt, 8, scale=0.1),
                        normal(r, dt, 8, scale=0.1)), diff=(0, 1, 2), scalar=False, x64=True)
def layer_norm(np_, nn_, x, gamma, beta):
    mu = np_.mean(x, axis=-1, keepdims=True)                # [N,1]
    var = np_.var(x, axis=-1, keepdims=True)                # [N,1]
    return (x - mu) / np_.sqrt(var + 1e-5) * gamma + beta


@user_fn(lambda r, dt: (normal(r, dt, 2, 3, 8), 1 + normal(r, dt, 8, scale=0.1)),
         diff=(0, 1), scalar=False)
def rms_norm(np_, nn_, x, g):
    return x / np_.sqrt(np_.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


@user_fn(lambda r, dt: (normal(r, dt, 6, 4, scale=2.0), 1 + normal(r, dt, 4, scale=0.1),
                        normal(r, dt, 4, scale=0.1)), diff=(0, 1, 2), scalar=False)
def batch_norm(np_, nn_, x, gamma, beta):
    x_hat = (x - x.mean(axis=0, keepdims=True)) / (x.std(axis=0, keepdims=True) + 1e-5)
    return gamma * x_hat + beta


# ---- attention ---------------------------------------------------------------------------
def _qkv(r, dt):
    return tuple(normal(r, dt, 2, 5, 4) for _ in range(3))        # [B,T,D] each


@user_fn(_qkv, diff=(0, 1, 2), scalar=False, x64=True)
def causal_attention_neg_inf(np_, nn_, q, k, v):
    T, D = q.shape[-2], q.shape[-1]
    scores = q @ np_.swapaxes(k, -1, -2) / math.sqrt(D)         # [B,T,D] @ [B,D,T] -> [B,T,T]
    mask = np_.tril(np_.ones((T, T), dtype=bool))
    scores = np_.where(mask, scores, -np_.inf)
    return nn_.softmax(scores, axis=-1) @ v                      # [B,T,T] @ [B,T,D] -> [B,T,D]


@user_fn(_qkv, diff=(0, 1, 2), scalar=False)
def causal_attention_large_negative(np_, nn_, q, k, v):
    T = q.shape[1]
    scores = np_.einsum("btd,bsd->bts", q, k) * q.shape[-1] ** -0.5    # [B,T,T]
    causal = np_.arange(T)[:, None] >= np_.arange(T)[None, :]          # [T,T] bool
    scores = np_.where(causal, scores, -1e9)
    weights = np_.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return np_.einsum("bts,bsd->btd", weights, v)


def _mha_args(r, dt):
    C = 8
    params = {name: normal(r, dt, C, C, scale=1 / math.sqrt(C))
              for name in ("wq", "wk", "wv", "wo")}
    return params, normal(r, dt, 2, 4, C)


@user_fn(_mha_args, diff=(0, 1), scalar=False)
def multi_head_attention(np_, nn_, p, x):
    B, T, C = x.shape
    H = 2
    D = C // H

    def heads(w):
        return (x @ w).reshape(B, T, H, D).transpose(0, 2, 1, 3)       # [B,H,T,D]
    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)                    # [B,H,T,T]
    att = np_.where(np_.tril(np_.ones((T, T))) == 1, att, -np_.inf)
    y = nn_.softmax(att, axis=-1) @ v                                   # [B,H,T,D]
    y = y.transpose(0, 2, 1, 3).reshape(B, T, C)                         # [B,T,C]
    return y @ p["wo"]


def _gqa_args(r, dt):
    return normal(r, dt, 1, 4, 3, 2), normal(r, dt, 1, 2, 3, 2), normal(r, dt, 1, 2, 3, 2)


@user_fn(_gqa_args, diff=(0, 1, 2), scalar=False)
def grouped_query_attention(np_, nn_, q, k, v):
    # q [B,H,T,D]; k, v [B,G,T,D] with G KV heads shared by H // G query heads each
    rep = q.shape[1] // k.shape[1]
    k = np_.repeat(k, rep, axis=1)                                      # [B,H,T,D]
    v = np_.repeat(v, rep, axis=1)
    w = nn_.softmax(np_.matmul(q, np_.swapaxes(k, 2, 3)), axis=-1)      # [B,H,T,T]
    return np_.matmul(w, v)


@user_fn(lambda r, dt: (normal(r, dt, 2, 3, 8),), scalar=False)
def rotary_embedding(np_, nn_, x):
    T, D = x.shape[-2:]
    x1, x2 = x[..., ::2], x[..., 1::2]                                  # [B,T,D/2] each
    freqs = 1.0 / 10000 ** (np_.arange(0, D, 2) / D)                    # [D/2]
    angle = np_.arange(T)[:, None] * freqs[None, :]                     # [T,D/2]
    cos, sin = np_.cos(angle), np_.sin(angle)
    rotated = np_.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)   # [B,T,D/2,2]
    return rotated.reshape(x.shape)


# ---- pytrees -------------------------------------------------------------------------------
def _nested_args(r, dt):
    params = {"layers": [dense(r, dt, 3, 4), dense(r, dt, 4, 4)],
              "head": ({"w": normal(r, dt, 4)}, np.asarray(1.5, dt))}
    return params, normal(r, dt, 5, 3)


@user_fn(_nested_args, diff=(0, 1))
def nested_pytree_params(np_, nn_, params, x):
    h = x
    for layer in params["layers"]:                                      # list of dicts
        h = np_.tanh(h @ layer["w"] + layer["b"])
    head, temperature = params["head"]                                  # tuple
    return np_.sum(nn_.softplus(h @ head["w"] / temperature))


@user_fn(lambda r, dt: ((normal(r, dt, 3), normal(r, dt, 3, 3)), [normal(r, dt, 3), normal(r, dt)]),
         diff=(0, 1))
def tuple_and_list_args(np_, nn_, ab, cd):
    a, M = ab
    c, d = cd
    return np_.sum(np_.sin(M @ a) * c) * d + np_.sum(M ** 2)


@user_fn(lambda r, dt: ({"w": normal(r, dt, 3, 4)}, normal(r, dt, 5, 3)), diff=(0, 1),
         scalar=False)
def pytree_output(np_, nn_, p, x):
    h = np_.tanh(x @ p["w"])                                            # [N,4]
    return {"h": h, "stats": (h.mean(), [h.max(axis=0), h.min(axis=1)]), "sq": np_.sum(h ** 2),
            "winner": np_.argmax(h, axis=1)}                        # an int32 leaf: float0 tangent


@user_fn(lambda r, dt: ({"w": normal(r, dt, 3, 4, scale=3.0), "b": normal(r, dt, 4, scale=3.0),
                         "scale": normal(r, dt, scale=3.0)},), scalar=False)
def global_norm_clip(np_, nn_, grads):
    max_norm = 1.0
    g_norm = np_.sqrt(sum(np_.sum(g ** 2) for g in grads.values()))
    scale = np_.minimum(1.0, max_norm / g_norm)
    return {k: g * scale for k, g in grads.items()}


@user_fn(lambda r, dt: (np.asarray(0.4, dt), normal(r, dt, 5, 2), normal(r, dt)),
         diff=(0, 1, 2))
def rotation_matrix_from_angle(np_, nn_, theta, points, shift):
    c, s = np_.cos(theta), np_.sin(theta)
    R = np_.array([[c, -s], [s, c]])                                    # array of tracers
    offset = np_.asarray([shift, 2.0 * shift])
    return np_.sum((points @ R.T + offset) ** 2)


@user_fn(lambda r, dt: (normal(r, dt, 3, 5), 0.7), diff=(0, 1))
def softmax_temperature(np_, nn_, logits, temperature):
    # `temperature` arrives as a Python float, as hyperparameters do
    p = nn_.softmax(logits / temperature, axis=-1)
    return -np_.sum(p * np_.log(p)) + temperature ** 2


# ---- integer and boolean intermediates ------------------------------------------------
@user_fn(lambda r, dt: (distinct(r, dt, 5, 4), normal(r, dt, 5)), diff=(0, 1))
def argmax_as_index(np_, nn_, x, w):
    idx = np_.argmax(x, axis=1)                                         # [N] int
    picked = x[np_.arange(x.shape[0]), idx]                             # the row maxima
    return np_.sum(picked * w) + np_.sum(idx * w)


@user_fn(lambda r, dt: (distinct(r, dt, 5, 4), normal(r, dt, 5, 4)), diff=(0, 1))
def argmax_indexes_other(np_, nn_, scores, values):
    best = np_.argmax(scores, axis=-1)                                  # [N]
    chosen = np_.take_along_axis(values, best[:, None], axis=-1)[:, 0]  # [N]
    return np_.sum(chosen ** 2 * scores.max(axis=-1))


@user_fn(lambda r, dt: (away(r, dt, 10), normal(r, dt, 10)), diff=(0, 1))
def mask_counts(np_, nn_, x, y):
    pos = x > 0                                                         # bool
    n_pos = np_.sum(pos)                                                # int32 count
    frac = np_.mean((x > 0.5) & (y < 0))                                # bool -> float mean
    return np_.sum(np_.where(pos, x ** 2, 0.0)) / n_pos + np_.mean(pos.astype(x.dtype) * y) \
        + frac * np_.sum(y)


@user_fn(lambda r, dt: (normal(r, dt, 4, 5), normal(r, dt, 5), r.random((4, 5)) < 0.7),
         diff=(0, 1))
def dropout_with_mask(np_, nn_, x, w, keep):
    keep_prob = 0.7
    h = np_.where(keep, x / keep_prob, 0.0)
    h2 = x * keep.astype(x.dtype) / keep_prob
    return np_.sum(nn_.relu(h @ w)) + np_.sum(h * h2)


@user_fn(lambda r, dt: (normal(r, dt, 6, 4),), scalar=False)
def sinusoidal_positions(np_, nn_, x):
    T, C = x.shape
    pos = np_.arange(T)[:, None]                                        # [T,1] int
    i = np_.arange(C)[None, :]                                          # [1,C] int
    angle = pos / 10000.0 ** ((2 * (i // 2)).astype(x.dtype) / C)       # [T,C]
    pe = np_.where(i % 2 == 0, np_.sin(angle), np_.cos(angle))
    return x * 2.0 + pe


@user_fn(lambda r, dt: (away(r, dt, 8), labels(r, 3, 8)))
def conditional_constants(np_, nn_, x, y):
    slope = np_.where(x > 0, 2.0, -0.5)                                 # constant branches
    weight = np_.where(y == 1, 3.0, np_.where(y == 2, 0.5, 1.0))
    return np_.sum(slope * x ** 2 * weight)


@user_fn(lambda r, dt: (away(r, dt, 3, 4),), scalar=False)
def leaky_relu(np_, nn_, x):
    return np_.where(x >= 0, x, 0.01 * x) + nn_.relu(-x) * 0.5


def _ties(r, dt):
    x = np.array([[0.0, 1.0, 1.0, -1.0], [2.0, 2.0, 0.5, 0.0]], dt)
    y = np.array([[0.0, 1.0, 0.3, -2.0], [2.0, 1.0, 0.5, 1.0]], dt)
    return x, y


@user_fn(_ties, diff=(0, 1), scalar=False)
def tie_conventions(np_, nn_, x, y):
    # Deliberately on the kinks, where jax picks a convention: maximum splits ties
    # evenly, abs and relu have slope 0 at 0, max shares the slope among equal maxima,
    # clip (a maximum then a minimum) splits at its bounds, sort is stable.
    return {"maximum": np_.maximum(x, y), "abs": np_.abs(x), "relu": nn_.relu(x),
            "max": np_.max(x, axis=-1), "clip": np_.clip(x, -1.0, 1.0),
            "sort": np_.sort(x, axis=-1), "argmax_pick": x[:, np_.argmax(x[0])]}


# ---- NaN-safe where ----------------------------------------------------------------------
def _with_zeros(r, dt, *shape, lo=0.1, hi=2.0):
    x = r.uniform(lo, hi, shape)
    x.flat[::3] = 0.0
    return x.astype(dt)


@user_fn(lambda r, dt: (_with_zeros(r, dt, 9), normal(r, dt, 9)), diff=(0, 1), nan_safe=True,
         x64=True)
def safe_sqrt(np_, nn_, x, w):
    ok = x > 0
    safe_x = np_.where(ok, x, 1.0)                      # the double-where trick: no 0 in sqrt
    return np_.sum(np_.where(ok, np_.sqrt(safe_x), 0.0) * w)


@user_fn(lambda r, dt: (_with_zeros(r, dt, 2, 6, lo=0.05, hi=1.0),), nan_safe=True)
def entropy_safe_log(np_, nn_, p):
    p = p / p.sum(axis=-1, keepdims=True)
    plogp = np_.where(p > 0, p * np_.log(np_.where(p > 0, p, 1.0)), 0.0)
    return -np_.sum(plogp)


def _zero_row(r, dt):
    x = normal(r, dt, 4, 3)
    x[2] = 0.0
    return x, normal(r, dt, 4)


@user_fn(_zero_row, diff=(0, 1), nan_safe=True)
def safe_row_norms(np_, nn_, x, w):
    sq = np_.sum(x ** 2, axis=-1)                                       # [N]; a zero row
    norm = np_.where(sq > 0, np_.sqrt(np_.where(sq > 0, sq, 1.0)), 0.0)
    return np_.sum(norm * w)


@user_fn(lambda r, dt: (normal(r, dt, 5, 3),), nan_safe=True)
def pairwise_distances(np_, nn_, x):
    d2 = np_.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)          # [N,N], 0 on diagonal
    nz = d2 > 0
    d = np_.where(nz, np_.sqrt(np_.where(nz, d2, 1.0)), 0.0)
    return np_.sum(np_.exp(-d))


# ---- norms and similarity --------------------------------------------------------------
@user_fn(lambda r, dt: (normal(r, dt, 5, 4), normal(r, dt, 5, 4)), diff=(0, 1), scalar=False)
def cosine_similarity(np_, nn_, a, b):
    eps = 1e-8
    dot = np_.sum(a * b, axis=-1)
    na = np_.sqrt(np_.sum(a * a, axis=-1))
    nb = np_.sqrt(np_.sum(b * b, axis=-1))
    return dot / np_.maximum(na * nb, eps)


# ---- other math ------------------------------------------------------------------------
@user_fn(lambda r, dt: (normal(r, dt, 5), uniform(r, dt, -1.5, 1.5, 7)), diff=(0, 1),
         scalar=False)
def polynomial_horner(np_, nn_, c, x):
    acc = np_.zeros_like(x) + c[-1]
    for i in range(c.shape[0] - 2, -1, -1):                             # static unrolled loop
        acc = acc * x + c[i]
    return acc


@user_fn(lambda r, dt: (uniform(r, dt, 0.5, 2.0, 6), uniform(r, dt, -1.0, 1.0, 6)),
         diff=(0, 1), scalar=False)
def power_ops(np_, nn_, x, y):
    return x ** 3 + x ** 2.5 + x ** y + np_.power(x, 0.5) * np_.exp(-x) + 2.0 ** y


@user_fn(lambda r, dt: (normal(r, dt, 8, scale=2.0), normal(r, dt, 8)), diff=(0, 1))
def softplus_sigmoid(np_, nn_, x, y):
    return np_.sum(nn_.sigmoid(nn_.softplus(x) - 1.0) * y) + np_.mean(nn_.silu(x * y)) \
        + np_.sum(np_.log(nn_.sigmoid(x)))


def _clip_args(r, dt):
    x = uniform(r, dt, -2.0, 2.0, 12)
    x[np.abs(np.abs(x) - 1.0) < 0.05] = 0.5                              # stay off the bounds
    return (x,)


@user_fn(_clip_args)
def clip_scalar_bounds(np_, nn_, x):
    return np_.sum(np_.clip(x, -1.0, 1.0) ** 2 * np_.arange(x.shape[0]))


def _clip_array_args(r, dt):
    lo, hi = uniform(r, dt, -1.0, -0.5, 10), uniform(r, dt, 0.5, 1.0, 10)
    x = np.concatenate([uniform(r, dt, -2.0, -1.1, 3), uniform(r, dt, -0.4, 0.4, 4),
                        uniform(r, dt, 1.1, 2.0, 3)])
    return x, lo, hi


@user_fn(_clip_array_args, diff=(0, 1, 2), scalar=False)
def clip_array_bounds(np_, nn_, x, lo, hi):
    return np_.clip(x, lo, hi) * 2.0 + np_.minimum(np_.maximum(x, lo), hi)


@user_fn(lambda r, dt: (normal(r, dt, 2, 8), normal(r, dt, 2, 8)), diff=(0, 1), x64=True)
def complex_dft_power(np_, nn_, x, w):
    N = x.shape[-1]
    n = np_.arange(N)
    F = np_.exp(-2j * np_.pi * np_.outer(n, n) / N)                      # [N,N] complex
    X = x.astype(F.dtype) @ F.T                                         # [B,N] complex
    power = np_.real(X * np_.conj(X))                                   # |X|^2, real
    return np_.sum(power * w) / N + np_.sum(np_.abs(X[:, 1:]))


@user_fn(lambda r, dt: (away(r, dt, 6), away(r, dt, 6)), diff=(0, 1))
def complex_modulus(np_, nn_, x, y):
    z = x + 1j * y
    w = z * z + 3.0 * z
    return np_.sum(np_.abs(w)) + np_.sum(np_.real(w * np_.conj(z))) + np_.sum(np_.imag(z ** 3))


@user_fn(lambda r, dt: (normal(r, dt, 4, 3), normal(r, dt, 3, 5), normal(r, dt, 4, 5)),
         diff=(0, 1, 2))
def einsum_bilinear(np_, nn_, x, W, y):
    s = np_.einsum("bi,ij,bj->b", x, W, y)                              # xᵀ W y per row
    sq = np_.einsum("...i,...i->...", x, x)                             # ellipsis: [b]
    return np_.mean(np_.tanh(s)) + np_.einsum("ij,ij->", W, W) * 0.01 + np_.mean(sq * s)


@user_fn(lambda r, dt: (normal(r, dt, 3), normal(r, dt, 4), normal(r, dt, 3, 4)),
         diff=(0, 1, 2), scalar=False)
def outer_and_tensordot(np_, nn_, a, b, M):
    return np_.outer(a, b) * M + np_.tensordot(a, M, axes=1)[None, :] \
        + np_.tensordot(M, M, axes=([0], [0]))[:3]


@user_fn(lambda r, dt: (normal(r, dt, 2, 3, 4), normal(r, dt, 2, 4, 5), normal(r, dt, 5, 2)),
         diff=(0, 1, 2), scalar=False)
def batched_matmul(np_, nn_, A, B, W):
    AB = A @ B                                                  # [b,3,4] @ [b,4,5] -> [b,3,5]
    return np_.matmul(AB, W) + np_.einsum("bij,bjk->bik", A, B)[..., :2]


@user_fn(lambda r, dt: (normal(r, dt, 3, 5), normal(r, dt, 3, 5)), diff=(0, 1))
def cumsum_loss(np_, nn_, x, w):
    return np_.sum(np_.cumsum(x, axis=1) ** 2 * w) + np_.sum(np_.cumsum(x[::-1], axis=0)[-1])


@user_fn(lambda r, dt: (uniform(r, dt, 0.5, 1.5, 2, 5),), scalar=False)
def cumprod(np_, nn_, x):
    return np_.cumprod(x, axis=-1)


@user_fn(lambda r, dt: (normal(r, dt, 2, 3, 4, scale=2.0),), scalar=False)
def moments(np_, nn_, x):
    m = np_.mean(x, axis=0)                                     # [3,4]
    v = np_.var(x, axis=(1, 2), keepdims=True)                 # [2,1,1]
    s = np_.std(x, axis=-1)                                    # [2,3]
    v1 = x.var(axis=1, ddof=1)                                 # [2,4]
    return m.sum() + v * x + s[..., None] + v1[:, None, :] + np_.std(x) * np_.mean(x)


@user_fn(lambda r, dt: (distinct(r, dt, 3, 6), normal(r, dt, 3, 6)), diff=(0, 1))
def sorted_values_loss(np_, nn_, x, target):
    xs = np_.sort(x, axis=-1)
    ts = np_.sort(target, axis=-1)
    top2 = xs[:, -2:]                                           # the two largest per row
    return np_.mean((xs - ts) ** 2) + np_.sum(top2)


@user_fn(lambda r, dt: (distinct(r, dt, 7), normal(r, dt, 7)), diff=(0, 1), scalar=False)
def argsort_permute(np_, nn_, x, y):
    order = np_.argsort(x)                                      # int permutation
    return y[order] * x[order] + np_.take(y, order[:3]).sum()


@user_fn(lambda r, dt: (distinct(r, dt, 3, 8),), scalar=False)
def max_pool_1d(np_, nn_, x):
    N, L = x.shape
    return x.reshape(N, -1, 2).max(axis=-1)                    # [N,4]


@user_fn(lambda r, dt: (distinct(r, dt, 2, 16).reshape(2, 4, 4),), scalar=False)
def max_min_pool_2d(np_, nn_, x):
    B, Hh, W = x.shape
    windows = x.reshape(B, Hh // 2, 2, W // 2, 2)               # [B,2,2,2,2]
    return np_.max(windows, axis=(2, 4)) - 0.5 * windows.min(axis=(2, 4))


@user_fn(lambda r, dt: (normal(r, dt, 6, 4), normal(r, dt, 4, 2),
                        np.array([[0, 3, 3], [5, 0, 1]], np.int32)), diff=(0, 1))
def embedding_getitem(np_, nn_, E, W, idx):
    emb = E[idx]                                                # [B,T,C]; repeated rows
    return np_.sum(np_.tanh(emb.mean(axis=1) @ W))


@user_fn(lambda r, dt: (normal(r, dt, 6, 4), np.array([1, 4, 1, 1, 0], np.int32)),
         scalar=False)
def embedding_take(np_, nn_, E, idx):
    return np_.take(E, idx, axis=0) * 2.0, np_.take(E, idx[:2], axis=1)       # [5,4], [6,2]


@user_fn(lambda r, dt: (normal(r, dt, 6), np.array([0, 2, 2, 5, 0, 2], np.int32)),
         scalar=False)
def scatter_add_histogram(np_, nn_, vals, idx):
    totals = np_.zeros((4 + 2,), vals.dtype).at[idx].add(vals)  # repeated indices accumulate
    return totals ** 2 + vals.at[1].add(10.0)


@user_fn(lambda r, dt: (normal(r, dt, 6), normal(r, dt, 3), np.array([4, 0, 2], np.int32)),
         diff=(0, 1))
def scatter_set_in_loss(np_, nn_, x, y, idx):
    z = x.at[idx].set(y * 2.0)                                  # x's entries at idx are replaced
    z = z.at[-1].multiply(3.0)
    return np_.sum(np_.sin(z) * np_.arange(1, 7))


@user_fn(lambda r, dt: (normal(r, dt, 4, 3), normal(r, dt, 9, 2)), diff=(0, 1), scalar=False)
def concat_stack_features(np_, nn_, x, W):
    feats = np_.concatenate([x, x ** 2, np_.sin(x)], axis=-1)   # [N,9]
    h = feats @ W                                               # [N,2]
    return np_.stack([h, np_.expand_dims(h.sum(-1), -1) * np_.ones_like(h)], axis=0)


@user_fn(lambda r, dt: (normal(r, dt, 3, 3), normal(r, dt, 3)), diff=(0, 1))
def tril_covariance(np_, nn_, A, x):
    L = np_.tril(A)                                             # Cholesky-style parameter
    S = L @ L.T + np_.eye(3, dtype=A.dtype)                     # SPD covariance
    return x @ S @ x + np_.sum(S * np_.eye(3)) + np_.sum(np_.triu(A, 1) ** 2)


@user_fn(lambda r, dt: (distinct(r, dt, 2, 7),))
def total_variation(np_, nn_, x):
    tv = np_.sum(np_.abs(np_.diff(x, axis=-1)))
    return tv + np_.sum((x - np_.roll(x, 1, axis=-1)) ** 2)


@user_fn(lambda r, dt: (normal(r, dt, 2, 6), normal(r, dt, 3)), diff=(0, 1), scalar=False)
def conv1d_pad_slices(np_, nn_, x, w):
    N, L = x.shape
    K = w.shape[0]
    xp = np_.pad(x, ((0, 0), (K // 2, K // 2)))                 # [N, L+K-1]
    return sum(w[k] * xp[:, k:k + L] for k in range(K))         # [N,L]


@user_fn(lambda r, dt: (normal(r, dt, 3, 8),), scalar=False)
def glu_split(np_, nn_, h):
    a, b = np_.split(h, 2, axis=-1)                             # [N,4] each
    return a * nn_.sigmoid(b)


@user_fn(lambda r, dt: (normal(r, dt, 2, 3, 4, 1), normal(r, dt, 4)), diff=(0, 1),
         scalar=False)
def flip_tile_augment(np_, nn_, images, bias):
    x = np_.squeeze(images, axis=-1)                            # [B,H,W]
    both = np_.concatenate([x, np_.flip(x, axis=-1)], axis=0)   # [2B,H,W]
    x_t = np_.moveaxis(both, -1, 0)                             # [W,2B,H]
    tiled = np_.tile(bias[:, None, None], (1, 4, 3))            # [W,4,3]
    return x_t * tiled + np_.broadcast_to(bias[:, None, None], x_t.shape)


@user_fn(lambda r, dt: (uniform(r, dt, 0.5, 2.0, 3, 4),), scalar=False)
def geometric_mean_prod(np_, nn_, x):
    g1 = np_.prod(x, axis=-1) ** (1.0 / x.shape[-1])            # [N]
    g2 = np_.exp(np_.mean(np_.log(x), axis=-1))
    return g1 + 2.0 * g2 + x.prod(axis=0).sum()


def _missing_targets(r, dt):
    y = normal(r, dt, 10)
    y[[1, 4, 7]] = np.nan                                       # missing labels
    return normal(r, dt, 10), y


@user_fn(_missing_targets, nan_safe=True)
def masked_missing_targets(np_, nn_, pred, y):
    observed = ~np_.isnan(y)
    y_safe = np_.where(observed, y, 0.0)
    sq = np_.where(observed, (pred - y_safe) ** 2, 0.0)
    return np_.sum(sq) / np_.sum(observed)


def _interp_args(r, dt):
    xp = np.linspace(-2.0, 2.0, 6).astype(dt)
    x = uniform(r, dt, -1.9, 1.9, 9)
    x[np.min(np.abs(x[:, None] - xp[None, :]), axis=1) < 0.05] = 0.1    # off the knots
    return normal(r, dt, 6), x, xp


@user_fn(_interp_args, diff=(0, 1), scalar=False)
def piecewise_linear_interp(np_, nn_, fp, x, xp):
    i = np_.clip(np_.searchsorted(xp, x), 1, xp.shape[0] - 1)   # right knot, int
    x0, x1 = xp[i - 1], xp[i]
    t = (x - x0) / (x1 - x0)
    return fp[i - 1] * (1 - t) + fp[i] * t


@user_fn(lambda r, dt: (distinct(r, dt, 8), np.array([0, 2, 1, 2, 0, 3, 3, 1], np.int32)),
         scalar=False)
def segment_max_scatter(np_, nn_, vals, seg):
    seg_max = np_.full((4,), -np_.inf, vals.dtype).at[seg].max(vals)   # per-segment max
    seg_min = np_.full((4,), np_.inf, vals.dtype).at[seg].min(vals)
    return seg_max * 2.0 + seg_min, vals.at[seg].get() * 3.0 + vals[seg]   # [4], [8]


@user_fn(lambda r, dt: (distinct(r, dt, 2, 7),), scalar=False)
def median_abs_deviation(np_, nn_, x):
    med = np_.median(x, axis=-1, keepdims=True)                 # odd length: no averaging
    return np_.median(np_.abs(x - med + 0.01), axis=-1)


@user_fn(lambda r, dt: (normal(r, dt, 5), normal(r, dt, 4, 4)), diff=(0, 1))
def unused_argument(np_, nn_, x, unused):
    return np_.sum(np_.sin(x) * x)


def _classifier_args(r, dt):
    return dense(r, dt, 4, 3), normal(r, dt, 6, 4), labels(r, 3, 6)


@user_fn(_classifier_args, diff=(0, 1), has_aux=True)
def has_aux_classifier(np_, nn_, params, x, y):
    logits = x @ params["w"] + params["b"]                      # [N,K]
    logp = nn_.log_softmax(logits)
    loss = -np_.mean(np_.take_along_axis(logp, y[:, None], axis=1))
    pred = np_.argmax(logits, axis=-1)
    return loss, {"accuracy": np_.mean(pred == y), "pred": pred, "logits": logits}


@user_fn(lambda r, dt: (normal(r, dt, 3, 4), normal(r, dt, 4)), diff=(0, 1), has_aux=True,
         scalar=False)
def has_aux_array_output(np_, nn_, W, b):
    h = np_.tanh(W @ b)                                         # [3]
    return h, (np_.sqrt(np_.sum(h ** 2)), [np_.argmax(h)])


# ---- linear algebra (np_.linalg) --------------------------------------------------------
def _well_conditioned(r, dt, n, scale=1.0):
    """Diagonally dominant with shuffled rows (LU pivots): det far from 0."""
    m = r.uniform(-1.0, 1.0, (n, n)) + n * np.eye(n)
    return np.asarray(scale * m[r.permutation(n)], dt)


@user_fn(lambda r, dt: (away(r, dt, 4, 3, gap=0.3), normal(r, dt, 5)), diff=(0, 1), x64=True)
def linalg_norms(np_, nn_, W, v):
    # entries with distinct magnitudes away from 0: no ties in the max / min norms
    return (np_.linalg.norm(W) + 0.5 * np_.linalg.norm(W, "fro")
            + 0.3 * np_.linalg.norm(W, 1) + 0.2 * np_.linalg.norm(W, np_.inf)
            + 0.1 * np_.linalg.norm(W, -1) + np_.sum(np_.linalg.norm(W, axis=1))
            + np_.linalg.norm(v, 3) + 0.1 * np_.linalg.norm(v, 1))


def _ridge_args(r, dt):
    return normal(r, dt, 10, 3), normal(r, dt, 10), np.asarray(np.log(0.5), dt)


@user_fn(_ridge_args, diff=(0, 1, 2), x64=True)
def ridge_closed_form(np_, nn_, X, y, log_lam):
    # w = (XᵀX + λI)⁻¹ Xᵀy, then the training loss plus the penalty at that w
    lam = np_.exp(log_lam)
    A = X.T @ X + lam * np_.eye(X.shape[1], dtype=X.dtype)        # [3,10] @ [10,3] -> [3,3]
    w = np_.linalg.solve(A, X.T @ y)                              # [3]
    return np_.mean((X @ w - y) ** 2) + lam * np_.sum(w ** 2)


def _gp_args(r, dt):
    x = np.sort(r.uniform(-2.0, 2.0, 7)).astype(dt)               # [N] inputs
    y = np.sin(2 * x) + normal(r, dt, 7, scale=0.1)               # [N] targets
    return np.asarray(np.log(0.8), dt), np.asarray(0.0, dt), np.asarray(np.log(0.3), dt), x, y


@user_fn(_gp_args, diff=(0, 1, 2, 3), x64=True)
def gaussian_process_nll(np_, nn_, log_ls, log_sf, log_noise, x, y):
    # K = sf² exp(-(xᵢ-xⱼ)² / 2ℓ²) + σ²I = L Lᵀ;  NLL = ½ yᵀK⁻¹y + Σ log Lᵢᵢ + (N/2) log 2π
    n = x.shape[0]
    d2 = (x[:, None] - x[None, :]) ** 2                          # [N, N]
    K = np_.exp(2 * log_sf) * np_.exp(-0.5 * d2 / np_.exp(2 * log_ls))
    K = K + np_.exp(2 * log_noise) * np_.eye(n, dtype=x.dtype)
    L = np_.linalg.cholesky(K)                                    # [N, N] lower
    # the two triangular solves, written with solve (np_ has no solve_triangular)
    z = np_.linalg.solve(L, y)                                    # L⁻¹ y
    alpha = np_.linalg.solve(L.T, z)                              # L⁻ᵀ L⁻¹ y = K⁻¹ y
    logdet = 2 * np_.sum(np_.log(np_.diagonal(L)))
    return 0.5 * y @ alpha + 0.5 * logdet + 0.5 * n * np_.log(2 * np_.pi)


def _flow_args(r, dt):
    return _well_conditioned(r, dt, 4, 0.5), _well_conditioned(r, dt, 3), normal(r, dt, 6, 4)


@user_fn(_flow_args, diff=(0, 1, 2), x64=True)
def det_slogdet_flow_loss(np_, nn_, W, B, z):
    # a linear normalizing flow x = z W: -log p(x) = ½|z|² - log|det W| (per sample), plus
    # a det(B)² regularizer (3×3: the cofactor formula) and det of a 4×4 (the LU path)
    sign, logabs = np_.linalg.slogdet(W)
    x = z @ W                                                     # [N,4] @ [4,4] -> [N,4]
    nll = 0.5 * np_.mean(np_.sum(x ** 2, axis=-1)) - logabs
    return nll + 0.01 * np_.linalg.det(B) ** 2 + 0.1 * sign * np_.linalg.det(W)


@user_fn(lambda r, dt: (_well_conditioned(r, dt, 4), normal(r, dt, 5, 4)), diff=(0, 1),
         scalar=False, x64=True)
def mahalanobis_inv(np_, nn_, A, x):
    # squared Mahalanobis distances under the SPD metric M = AᵀA: xᵢᵀ M⁻¹ xᵢ (one per row)
    M_inv = np_.linalg.inv(A.T @ A)                               # [4, 4]
    return np_.einsum("ni,ij,nj->n", x, M_inv, x)                 # [N]


@user_fn(lambda r, dt: (_well_conditioned(r, dt, 3, 0.4),), scalar=False)
def matrix_power_and_inverse(np_, nn_, A):
    return np_.linalg.matrix_power(A, 3) + np_.linalg.matrix_power(A, -2)   # [3, 3]

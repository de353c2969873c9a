"""fnad.nn: activation functions, softmax / logsumexp, one_hot and dot_product_attention,
as jax.nn; the weight initializers are `fnad.nn.initializers` (fnad/initializers.py).

Pure functions of arrays composed from fnad.numpy and fnad.lax. Numerics follow
jax.nn: softmax and log_softmax subtract the row max under stop_gradient,
logsumexp handles all -inf rows, softplus is logaddexp(x, 0) (written out so that its
gradient is sigmoid(x) at every x, 0 included); relu and relu6 have
zero gradient at their kinks and at NaN (as JAX's custom JVPs give), written here with
`where` and stop_gradient so that no custom rule is needed.
"""
from __future__ import annotations

import functools
import math
import operator
import sys

import numpy as np

from fnad import dtypes, initializers, lax
from fnad.custom import custom_jvp
import fnad.numpy as jnp
from fnad.numpy._core import asarray, canonicalize_axis, promote_args_inexact

# jax.nn.initializers is a module: `from fnad.nn.initializers import lecun_normal` works too
sys.modules[__name__ + ".initializers"] = initializers

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
           "hard_swish", "hard_tanh", "identity", "initializers", "leaky_relu", "log1mexp",
           "log_sigmoid", "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu",
           "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
           "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]


def _inexact(name, x):
    return promote_args_inexact(name, x)[0]


# ---- elementwise activations ------------------------------------------------------------------
def relu(x):
    """max(x, 0); the gradient is 1 where x > 0 and 0 elsewhere, at 0 and NaN included (as
    jax.nn.relu); relu(NaN) is NaN."""
    x = asarray(x)
    return jnp.where(jnp.greater(x, 0), x, lax.stop_gradient(jnp.maximum(x, 0)))


def relu6(x):
    """min(max(x, 0), 6.0) (a float for integer x, as jax); the gradient is 1 where
    0 < x < 6 and 0 elsewhere, at the kinks and NaN included."""
    x = asarray(x)
    y = lax.stop_gradient(jnp.minimum(jnp.maximum(x, 0), 6.0))
    inside = jnp.logical_and(jnp.greater(x, 0), jnp.less(x, 6))
    return jnp.where(inside, x, y)


def identity(x):
    """x, unchanged (as an array)."""
    return asarray(x)


tanh = jnp.tanh


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return lax.logistic(_inexact("sigmoid", x))


def sparse_sigmoid(x):
    """0 for x <= -1, (x + 1)/2 between, 1 for x >= 1: the derivative of sparse_plus."""
    x = _inexact("sparse_sigmoid", x)
    return jnp.multiply(0.5, jnp.clip(jnp.add(x, 1.0), 0.0, 2.0))


@custom_jvp
def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0: log(-expm1(-x)) below log 2, log1p(-exp(-x)) above
    (Mächler's split, accurate on both sides). d/dx = 1 / expm1(x)."""
    x = _inexact("log1mexp", x)
    return jnp.where(jnp.less(x, math.log(2.0)),
                     jnp.log(jnp.negative(jnp.expm1(jnp.negative(x)))),
                     jnp.log1p(jnp.negative(jnp.exp(jnp.negative(x)))))


log1mexp.defjvps(lambda g, ans, x: jnp.true_divide(g, jnp.expm1(x)))


def softplus(x):
    """log(1 + exp(x)) = logaddexp(x, 0), with the derivative sigmoid(x) everywhere.

    Each branch only sees inputs where its exp cannot overflow (the double-where trick),
    so neither values nor gradients become inf or NaN for large |x|.
    """
    x = _inexact("softplus", x)
    pos = jnp.greater(x, 0)
    x_pos = jnp.where(pos, x, 0.0)                        # x + log(1 + e^-x) for x > 0
    x_neg = jnp.where(pos, 0.0, x)                        # log(1 + e^x) for x <= 0
    return jnp.where(pos, jnp.add(x_pos, jnp.log1p(jnp.exp(jnp.negative(x_pos)))),
                     jnp.log1p(jnp.exp(x_neg)))


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    x = _inexact("sparse_plus", x)
    return jnp.where(jnp.less_equal(x, -1.0), jnp.zeros_like(x),
                     jnp.where(jnp.greater_equal(x, 1.0), x,
                               jnp.true_divide(jnp.square(jnp.add(x, 1.0)), 4)))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    x = _inexact("log_sigmoid", x)
    return jnp.negative(softplus(jnp.negative(x)))


def soft_sign(x):
    """x / (|x| + 1)."""
    x = _inexact("soft_sign", x)
    return jnp.true_divide(x, jnp.add(jnp.abs(x), 1))


def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = _inexact("silu", x)
    return jnp.multiply(x, sigmoid(x))


swish = silu


def mish(x):
    """x * tanh(softplus(x))."""
    x = _inexact("mish", x)
    return jnp.multiply(x, jnp.tanh(softplus(x)))


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2."""
    x = _inexact("squareplus", x)
    return jnp.true_divide(jnp.add(x, jnp.sqrt(jnp.add(jnp.square(x), b))), 2)


def gelu(x, approximate: bool = True):
    """x * Phi(x): the tanh approximation by default (as jax.nn), erf-exact if not."""
    x = _inexact("gelu", x)
    if approximate:
        c = np.sqrt(2 / np.pi).astype(x.dtype)
        inner = jnp.multiply(c, jnp.add(x, jnp.multiply(0.044715, jnp.power(x, 3))))
        return jnp.multiply(x, jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner))))
    half = np.sqrt(0.5).astype(x.dtype)
    return jnp.multiply(jnp.multiply(0.5, x), lax.erfc(jnp.multiply(jnp.negative(x), half)))


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""
    x = _inexact("elu", x)
    safe = jnp.where(jnp.greater(x, 0), jnp.zeros_like(x), x)   # no inf from exp of large x
    return jnp.where(jnp.greater(x, 0), x, jnp.multiply(alpha, jnp.expm1(safe)))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    x = _inexact("celu", x)
    return jnp.add(jnp.maximum(x, 0.0),
                   jnp.multiply(alpha, jnp.expm1(jnp.true_divide(jnp.minimum(x, 0.0), alpha))))


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return jnp.multiply(scale, elu(x, alpha))


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x otherwise."""
    x = _inexact("leaky_relu", x)
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


def hard_tanh(x):
    """x clipped to [-1, 1] (integers stay integers, as jax)."""
    x = asarray(x)
    return jnp.where(jnp.greater(x, 1), 1, jnp.where(jnp.less(x, -1), -1, x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    x = _inexact("hard_sigmoid", x)
    return jnp.true_divide(relu6(jnp.add(x, 3.0)), 6.0)


def hard_silu(x):
    """x * hard_sigmoid(x) (also called hard_swish)."""
    x = _inexact("hard_silu", x)
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def glu(x, axis: int = -1):
    """Gated linear unit: a * sigmoid(b) for the two halves a, b of x along `axis`."""
    x = asarray(x)
    axis = canonicalize_axis(axis, x.ndim)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: axis {axis} of x (shape {x.shape}) must have an even size, "
                         f"got {size}")
    a = lax.slice_in_dim(x, 0, size // 2, axis=axis)
    b = lax.slice_in_dim(x, size // 2, size, axis=axis)
    return jnp.multiply(a, sigmoid(b))


# ---- softmax and friends ----------------------------------------------------------------------
def _axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(canonicalize_axis(a, ndim) for a in axis)
    return (canonicalize_axis(axis, ndim),)


def _masked_max(x, axes, where):
    """max of x over axes (kept), over the positions where `where` holds (-inf if none,
    empty axes included)."""
    if where is not None:
        x = jnp.where(where, x, -np.inf)
    return jnp.max(x, axis=axes, keepdims=True, initial=-np.inf)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) over `axis` (an int, a tuple or None).

    The max is subtracted first, so large inputs do not overflow. Positions where `where`
    is False get 0 and do not count in the sum. Differentiated as JAX's is, through the
    result alone: d softmax = y * (dx - sum(y * dx)), so reverse mode keeps y for the
    backward pass, not the exponentials and their sum.
    """
    x = _inexact("softmax", x)
    return _softmax(x, _axes(axis, x.ndim), where)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x, axes, where):
    x_max = _masked_max(x, axes, where)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(jnp.subtract(x_safe, x_max))
    total = jnp.sum(unnormalized, axis=axes, keepdims=True)
    result = jnp.true_divide(unnormalized, total)
    return result if where is None else jnp.where(where, result, 0)


@_softmax.defjvp
def _softmax_jvp(axes, primals, tangents):
    (x, where), (x_dot, _) = primals, tangents
    y = _softmax(x, axes, where)
    y_x_dot = jnp.multiply(y, x_dot)
    if where is not None:                       # masked positions count for nothing
        y_x_dot = jnp.where(where, y_x_dot, 0)
    return y, jnp.multiply(y, jnp.subtract(x_dot, jnp.sum(y_x_dot, axis=axes, keepdims=True)))


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) over `axis`; stable, with finite gradients for very negative x."""
    x = _inexact("log_softmax", x)
    axes = _axes(axis, x.ndim)
    x_max = lax.stop_gradient(_masked_max(x, axes, where))
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = jnp.subtract(x_safe, x_max)
    lse = jnp.log(jnp.sum(jnp.exp(shifted), axis=axes, keepdims=True))
    result = jnp.subtract(shifted, lse)
    return result if where is None else jnp.where(where, result, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
    """log(sum(b * exp(a))) over `axis`, computed stably.

    Rows that are all -inf give -inf (not NaN). With `b`, a negative sum gives NaN
    unless return_sign=True, which returns (log|sum|, sign(sum)).
    """
    if b is not None:
        a, b = promote_args_inexact("logsumexp", a, b)
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)
    else:
        a = _inexact("logsumexp", a)
    axes = _axes(axis, a.ndim)
    a_real = jnp.real(a) if dtypes.is_complex(a.dtype) else a
    amax = _masked_max(a_real, axes, where)                                 # keepdims
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, jnp.zeros_like(amax)))
    exp_a = jnp.exp(jnp.subtract(a, asarray(amax, a.dtype)))
    if b is not None:
        exp_a = jnp.multiply(exp_a, b)
    if where is not None:
        exp_a = jnp.where(where, exp_a, 0)
    sumexp = jnp.sum(exp_a, axis=axes, keepdims=keepdims)
    sign = jnp.sign(sumexp)
    if return_sign or not dtypes.is_complex(a.dtype):
        sumexp = jnp.abs(sumexp)
    amax_out = amax if keepdims else jnp.squeeze(amax, axis=axes)
    out = jnp.add(jnp.log(sumexp), asarray(amax_out, sumexp.dtype))
    if return_sign:
        return out, sign
    if b is not None and not dtypes.is_complex(out.dtype):
        out = jnp.where(jnp.less(sign, 0), np.nan, out)
    return out


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) over `axis` = logsumexp(x) - log(n), n the number of elements
    reduced (those where `where` holds)."""
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    if where is None:
        shape = np.shape(x)
        n = math.prod(shape[a] for a in _axes(axis, len(shape)))
        return jnp.subtract(lse, np.log(np.asarray(n, lse.dtype)))
    count = jnp.sum(jnp.broadcast_to(where, np.shape(x)), axis=axis, dtype=lse.dtype,
                    keepdims=keepdims)
    return jnp.subtract(lse, jnp.log(count))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon) over `axis`.

    algorithm "fast" (the default, as JAX) uses mean(x^2) - mean(x)^2 clipped at 0;
    "stable" uses mean((x - mean)^2).
    """
    x = asarray(x)
    if mean is None:
        mean = jnp.mean(x, axis=axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis=axis, keepdims=True,
                                where=where)
        elif algorithm == "fast":
            variance = jnp.subtract(jnp.mean(jnp.square(x), axis=axis, keepdims=True,
                                             where=where), jnp.square(mean))
            variance = jnp.maximum(variance, 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.multiply(jnp.subtract(x, mean), lax.rsqrt(jnp.add(variance, epsilon)))


def one_hot(x, num_classes: int, *, dtype=None, axis: int = -1):
    """out[..., c, ...] = (x[...] == c) for c in range(num_classes), along `axis`.

    Out-of-range (and negative) indices give an all-zero row. dtype: float32 by default.
    """
    num_classes = operator.index(num_classes)
    x = asarray(x)
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    out_axis = canonicalize_axis(axis, x.ndim + 1)
    lhs = lax.expand_dims(x, (out_axis,))                         # [..., 1, ...]
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax.broadcasted_iota(x.dtype, rhs_shape, out_axis)       # [1, .., C, .., 1]
    return asarray(jnp.equal(lhs, rhs), dtype)


# ---- attention -------------------------------------------------------------------------------
# softmax(Q Kᵀ · scale + bias, masked) V per head, as jax.nn.dot_product_attention's 'xla'
# implementation: logits in at least float32, masked logits set to -0.7 · max float (not
# -inf: a fully masked row averages V instead of giving NaN), the softmax in float32.
# Query heads N = K · G share the K key/value heads in groups of G (GQA; MQA when K = 1).
def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """Scaled dot-product attention on [B, T, N, H] queries and [B, S, K, H] keys/values
    (the batch axis may be left out), as jax.nn.dot_product_attention.

    bias: added to the logits, 4D, broadcastable to [B, N, T, S]. mask: boolean, 4D,
    broadcastable to [B, N, T, S], True where a query may attend. scale: default
    1/sqrt(H). is_causal: query t sees keys s <= t. query_seq_lengths /
    key_value_seq_lengths: int32 [B], positions at or past them are padding (padded
    queries output 0). local_window_size: (left, right), or an int for both: query t
    sees keys t - left <= s <= t + right. implementation: None or 'xla' ('cudnn' is not
    available in fnad). return_residual: also return the logsumexp of the logits,
    [B, T, N]. Returns [B, T, N, H] (the query's shape).
    """
    if implementation == "cudnn":
        raise NotImplementedError(
            "dot_product_attention: implementation='cudnn' (cuDNN flash attention) is not "
            "available in fnad; use implementation=None or 'xla'")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation}")
    output_shape = asarray(query).shape

    def ensure_4d(t):
        t = asarray(t)
        return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t

    q, k, v = ensure_4d(query), ensure_4d(key), ensure_4d(value)
    bias = None if bias is None else ensure_4d(bias)
    mask = None if mask is None else ensure_4d(mask)
    q_len = None if query_seq_lengths is None else asarray(query_seq_lengths)
    kv_len = None if key_value_seq_lengths is None else asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)

    B, S, K, H = k.shape
    _check_attention_arg(v, (B, S, K, H), k.dtype, "value")
    _check_attention_arg(q, (B, -1, -1, H), k.dtype, "query")
    _check_attention_arg(mask, (-1,) * 4, np.dtype(bool), "mask")
    _check_attention_arg(bias, (-1,) * 4, None, "bias")
    _check_attention_arg(q_len, (B,), np.dtype(np.int32), "query_seq_lengths")
    _check_attention_arg(kv_len, (B,), np.dtype(np.int32), "key_value_seq_lengths")
    T, N = q.shape[1], q.shape[2]
    if N % K:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {N} vs {K}")
    G = N // K
    scale = 1.0 / np.sqrt(H) if scale is None else scale

    q = jnp.reshape(q, (B, T, K, G, H))                                     # [B, T, K, G, H]
    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", q, k,                         # [B, K, G, T, S]
                        preferred_element_type=logits_dtype)
    logits = jnp.multiply(logits, jnp.array(scale, logits_dtype))
    if bias is not None:
        logits = jnp.add(logits, _grouped(bias, K, G, N, "bias")).astype(logits_dtype)
    allowed = _attention_mask(mask, is_causal, local_window_size, q_len, kv_len, T, S, K, G, N)
    if allowed is not None:
        big_negative = -0.7 * min(float(dtypes.finfo(logits_dtype).max),
                                  float(np.finfo(np.float32).max))
        logits = jnp.where(allowed, logits, jnp.array(big_negative, logits_dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)                       # [B, K, G, T, S]
    out = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)                         # [B, T, K, G, H]
    if q_len is not None:                                  # padded queries give 0
        keep = jnp.less(jnp.arange(T)[None, :], q_len[:, None])             # [B, T]
        out = jnp.multiply(out, keep[:, :, None, None, None].astype(out.dtype))
    out = jnp.reshape(out, output_shape)
    if not return_residual:
        return out
    lse = logsumexp(logits, axis=-1).astype(k.dtype)                        # [B, K, G, T]
    lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), output_shape[:-1])  # [B, T, N]
    return out, lax.stop_gradient(lse)


def _check_attention_arg(t, shape, dtype, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"{name} shape should be {list(shape)}: but got {t.shape}")


def _grouped(t, K: int, G: int, N: int, name: str):
    """A [b, n, t, s] bias or mask (n = 1 or N) as [b, K or 1, G or 1, t, s]."""
    b, n, tt, ss = t.shape
    if n == 1:
        return jnp.reshape(t, (b, 1, 1, tt, ss))
    if n != N:
        raise ValueError(f"{name}: axis 1 (heads) must be 1 or {N}, got shape {t.shape}")
    return jnp.reshape(t, (b, K, G, tt, ss))


def _attention_mask(mask, is_causal, window, q_len, kv_len, T, S, K, G, N):
    """Where a query may attend, broadcastable to [B, K, G, T, S]; None if everywhere."""
    allowed = None

    def both(m):
        return m if allowed is None else jnp.logical_and(allowed, m)
    if mask is not None:
        allowed = both(_grouped(mask, K, G, N, "mask"))
    q_pos = jnp.arange(T)[:, None]                                           # [T, 1]
    k_pos = jnp.arange(S)[None, :]                                           # [1, S]
    if is_causal:
        allowed = both(jnp.greater_equal(q_pos, k_pos))                      # tril
    if window is not None:
        left, right = window
        allowed = both(jnp.logical_and(jnp.less_equal(q_pos, k_pos + left),
                                       jnp.greater_equal(q_pos, k_pos - right)))
    if q_len is not None:                                                    # [B, 1, 1, T, 1]
        allowed = both(jnp.less(q_pos[None], q_len[:, None, None])[:, None, None])
    if kv_len is not None:                                                   # [B, 1, 1, 1, S]
        allowed = both(jnp.less(k_pos[None], kv_len[:, None, None])[:, None, None])
    return allowed

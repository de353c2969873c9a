"""fnad.nn against jax.nn: values, dtypes and gradients, with the edge cases that
matter in training (kinks, huge logits, -inf rows, masked softmax).

NumPy formulas are the reference where jax is missing.
"""
import numpy as np
import pytest
from checks import traced

import fnad
import fnad.nn as nn
from fnad.config import config
import fnad.numpy as jnp

try:
    import jax
    import jax.nn as jnn
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover
    jax = jnn = jjnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
RNG = np.random.default_rng(0)
EDGES = [0.0, 6.0, -3.0, 3.0, 1.0, -1.0, 50.0, -50.0, 100.0, -100.0]     # kinks and tails
X = np.concatenate([RNG.standard_normal(20) * 3, EDGES]).astype(np.float32)
M = X.reshape(3, 10)
W = RNG.standard_normal((3, 10)).astype(np.float32)


def close(got, expected, atol=1e-5, rtol=1e-5):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)


ACTIVATIONS = ["relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu",
               "swish", "gelu", "elu", "leaky_relu", "celu", "selu", "hard_tanh",
               "hard_sigmoid", "hard_silu", "mish", "squareplus", "sparse_plus"]


@needs_jax
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_values_and_gradients_match_jax(name):
    close(getattr(nn, name)(X), getattr(jnn, name)(X))
    g = fnad.grad(lambda v: jnp.sum(getattr(nn, name)(v)))(X)
    gj = jax.grad(lambda v: getattr(jnn, name)(v).sum())(X)
    close(g, gj, atol=1e-4)


@needs_jax
def test_exact_gelu_and_glu_match_jax():
    close(nn.gelu(X, approximate=False), jnn.gelu(X, approximate=False))
    close(fnad.grad(lambda v: jnp.sum(nn.gelu(v, approximate=False)))(X),
          jax.grad(lambda v: jnn.gelu(v, approximate=False).sum())(X), atol=1e-5)
    close(nn.glu(M), jnn.glu(M))
    close(nn.glu(M.reshape(6, 5), axis=0), jnn.glu(M.reshape(6, 5), axis=0))
    with pytest.raises(ValueError, match="even size"):
        nn.glu(np.ones((2, 3)))


def test_gradients_at_the_kinks_are_zero_like_jax():
    assert float(fnad.grad(nn.relu)(0.0)) == 0.0
    assert float(fnad.grad(nn.relu)(2.0)) == 1.0
    assert float(fnad.grad(nn.relu6)(0.0)) == 0.0
    assert float(fnad.grad(nn.relu6)(6.0)) == 0.0
    assert float(fnad.grad(nn.softplus)(0.0)) == 0.5
    assert np.isnan(float(nn.relu(np.float32(np.nan))))
    np.testing.assert_array_equal(np.asarray(nn.relu(np.array([-1, 2], np.int32))), [0, 2])


def test_softplus_and_sigmoids_are_stable_at_extremes():
    big = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], np.float32)
    close(nn.softplus(big), np.logaddexp(big, 0).astype(np.float32))
    close(nn.log_sigmoid(big), -np.logaddexp(-big, 0).astype(np.float32))
    g = fnad.grad(lambda v: jnp.sum(nn.softplus(v) + nn.log_sigmoid(v)))(big)
    assert np.isfinite(np.asarray(g)).all()


@needs_jax
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0, None, (0, 1)])
def test_softmax_matches_jax(name, axis):
    close(getattr(nn, name)(M, axis=axis), getattr(jnn, name)(M, axis=axis))
    close(fnad.grad(lambda v: jnp.sum(getattr(nn, name)(v, axis=axis) * W))(M),
          jax.grad(lambda v: (getattr(jnn, name)(v, axis=axis) * W).sum())(M), atol=1e-4)


@needs_jax
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_masked_softmax_and_inf_rows_match_jax(name):
    mask = RNG.random((3, 10)) > 0.3
    close(getattr(nn, name)(M, where=mask), getattr(jnn, name)(M, where=mask))
    close(fnad.grad(lambda v: jnp.sum(jnp.where(mask, getattr(nn, name)(v, where=mask) * W, 0)))(M),
          jax.grad(lambda v: jjnp.where(mask, getattr(jnn, name)(v, where=mask) * W, 0).sum())(M),
          atol=1e-4)
    part_inf = M.copy()
    part_inf[:, :5] = -np.inf
    close(getattr(nn, name)(part_inf), getattr(jnn, name)(part_inf))


@pytest.mark.parametrize("masked", [False, True])
def test_softmax_jvp_matches_central_differences(masked):
    """softmax's JVP rule (y * (dx - sum(y * dx)), JAX's) against central differences in
    float64, and against jax.jvp where jax is installed."""
    x = M.astype(np.float64)
    dx = W.astype(np.float64)
    where = (RNG.random((3, 10)) > 0.3) if masked else None
    f = lambda v: nn.softmax(v, axis=-1, where=where)              # noqa: E731
    with config.override(jax_enable_x64=True):
        y, y_dot = fnad.jvp(f, (x,), (dx,))
        eps = 1e-6
        fd = (np.asarray(f(x + eps * dx)) - np.asarray(f(x - eps * dx))) / (2 * eps)
    close(y_dot, fd, atol=1e-7, rtol=1e-6)
    if jax is not None:
        _, j_dot = jax.jvp(lambda v: jnn.softmax(v, axis=-1, where=where),
                           (M,), (W,))
        close(fnad.jvp(f, (M,), (W,))[1], j_dot, atol=1e-6)


def test_softmax_of_huge_logits_is_finite():
    big = np.array([[-1e30, 0.0, 1.0], [1000.0, 1001.0, -1000.0]], np.float32)
    p = np.asarray(nn.softmax(big))
    np.testing.assert_allclose(p.sum(axis=1), [1.0, 1.0], rtol=1e-6)
    lp = np.asarray(nn.log_softmax(big))
    assert np.isfinite(lp).all()
    g = fnad.grad(lambda v: jnp.sum(nn.log_softmax(v) * W[:2, :3]))(big)
    assert np.isfinite(np.asarray(g)).all()
    # d/dx sum_j w_j log_softmax(x)_j = w - softmax(x) * sum(w)
    w = W[:2, :3]
    np.testing.assert_allclose(np.asarray(g), w - p * w.sum(1, keepdims=True), atol=1e-5)


@needs_jax
@pytest.mark.parametrize("axis", [None, 1, 0, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_jax_including_all_inf_rows(axis, keepdims):
    a = M.copy()
    a[1] = -np.inf
    close(nn.logsumexp(a, axis=axis, keepdims=keepdims),
          jnn.logsumexp(a, axis=axis, keepdims=keepdims))
    close(fnad.grad(lambda v: jnp.sum(nn.logsumexp(v, axis=axis, keepdims=keepdims)))(M),
          jax.grad(lambda v: jnn.logsumexp(v, axis=axis, keepdims=keepdims).sum())(M))


@needs_jax
def test_logsumexp_with_b_sign_and_where_matches_jax():
    b = RNG.standard_normal((3, 10)).astype(np.float32)
    close(nn.logsumexp(M, axis=1, b=b), jnn.logsumexp(M, axis=1, b=b))      # NaN if sum < 0
    out, sign = nn.logsumexp(M, axis=1, b=b, return_sign=True)
    out_j, sign_j = jnn.logsumexp(M, axis=1, b=b, return_sign=True)
    close(out, out_j)
    close(sign, sign_j)
    close(nn.logsumexp(M, axis=1, where=M > 0), jnn.logsumexp(M, axis=1, where=M > 0))
    assert float(nn.logsumexp(np.full(4, -np.inf, np.float32))) == -np.inf


@needs_jax
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_matches_jax(axis):
    labels = np.array([[0, 2], [5, -1]])                 # 5 and -1: all-zero rows
    close(nn.one_hot(labels, 4, axis=axis), jnn.one_hot(labels, 4, axis=axis))
    close(nn.one_hot(labels, 3, dtype=jnp.int32), jnn.one_hot(labels, 3, dtype=jjnp.int32))


@needs_jax
@pytest.mark.parametrize("algorithm", ["fast", "stable"])
def test_standardize_matches_jax(algorithm):
    close(nn.standardize(M, axis=1, algorithm=algorithm),
          jnn.standardize(M, axis=1, algorithm=algorithm), atol=1e-4)
    close(fnad.grad(lambda v: jnp.sum(nn.standardize(v, algorithm=algorithm) * W))(M),
          jax.grad(lambda v: (jnn.standardize(v, algorithm=algorithm) * W).sum())(M), atol=1e-3)
    with pytest.raises(ValueError, match="Unknown algorithm"):
        nn.standardize(M, algorithm="exact")


def test_numpy_references_without_jax():
    """A jax-free check of the main functions against their NumPy formulas."""
    e = np.exp(M - M.max(1, keepdims=True))
    close(nn.softmax(M), (e / e.sum(1, keepdims=True)).astype(np.float32), atol=1e-6)
    lse = np.log(np.exp(M.astype(np.float64)).sum(1)).astype(np.float32)
    close(nn.logsumexp(M, axis=1), lse, rtol=1e-5)
    close(nn.sigmoid(X), (1 / (1 + np.exp(-X.astype(np.float64)))).astype(np.float32))
    close(nn.relu(X), np.maximum(X, 0))
    close(nn.one_hot(np.array([1, 0]), 2), np.eye(2, dtype=np.float32)[[1, 0]])


# ---- identity, tanh, sparse_sigmoid, log1mexp, logmeanexp ------------------------------------
@needs_jax
@pytest.mark.parametrize("name", ["identity", "tanh", "sparse_sigmoid", "log1mexp"])
def test_more_activations_match_jax(name):
    x = np.abs(X) if name == "log1mexp" else X          # log1mexp: x >= 0 (0 gives -inf)
    x = np.concatenate([x, [0.0, 1e-8, np.log(2.0), 0.7, np.inf]]).astype(np.float32)
    close(getattr(nn, name)(x), getattr(jnn, name)(x))
    g = fnad.vmap(fnad.grad(getattr(nn, name)))(x)      # sparse_sigmoid's kinks: jax's 1/4
    close(g, jax.vmap(jax.grad(getattr(jnn, name)))(x))


@needs_jax
@pytest.mark.parametrize("axis,keepdims,masked", [(None, False, False), (1, False, False),
                                                  ((0, 1), True, False), (0, False, True),
                                                  (None, True, True)])
def test_logmeanexp_matches_jax(axis, keepdims, masked):
    where = M > 0 if masked else None
    close(nn.logmeanexp(M, axis=axis, keepdims=keepdims, where=where),
          jnn.logmeanexp(M, axis=axis, keepdims=keepdims, where=where))
    close(fnad.grad(lambda v: jnp.sum(nn.logmeanexp(v, axis, where, keepdims)))(M),
          jax.grad(lambda v: jnn.logmeanexp(v, axis, where, keepdims).sum())(M))


# ---- dot_product_attention -------------------------------------------------------------------
def _qkv(B=2, T=5, S=6, N=4, K=2, H=8, dtype=np.float32):
    r = np.random.default_rng(1)
    return (r.standard_normal((B, T, N, H)).astype(dtype),
            r.standard_normal((B, S, K, H)).astype(dtype),
            r.standard_normal((B, S, K, H)).astype(dtype))


_Q_LEN, _KV_LEN = np.array([3, 5], np.int32), np.array([6, 2], np.int32)
_BIAS = np.random.default_rng(2).standard_normal((1, 4, 5, 6)).astype(np.float32)
_MASK = np.random.default_rng(3).random((2, 1, 5, 6)) < 0.7
ATTENTION = {                                           # name -> (heads N, K), keyword args
    "mha": ((4, 4), {}),
    "gqa-bias-scale": ((4, 2), {"bias": _BIAS, "scale": 0.3}),
    "mqa-mask": ((4, 1), {"mask": _MASK}),
    "causal-window": ((4, 2), {"is_causal": True, "local_window_size": (1, 2)}),
    "seq-lengths": ((4, 2), {"query_seq_lengths": _Q_LEN, "key_value_seq_lengths": _KV_LEN}),
    "everything": ((4, 2), {"bias": _BIAS, "mask": _MASK, "is_causal": True,
                            "local_window_size": 1, "query_seq_lengths": _Q_LEN,
                            "key_value_seq_lengths": _KV_LEN, "implementation": "xla"}),
}


@needs_jax
@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_dot_product_attention_matches_jax(name):
    (N, K), kw = ATTENTION[name]
    q, k, v = _qkv(N=N, K=K)
    close(nn.dot_product_attention(q, k, v, **kw), jnn.dot_product_attention(q, k, v, **kw))

    def loss(lib, total):
        return lambda q, k, v: total(lib.nn.dot_product_attention(q, k, v, **kw) ** 2)
    g = fnad.grad(loss(fnad, jnp.sum), argnums=(0, 1, 2))(q, k, v)
    gj = jax.jit(jax.grad(loss(jax, jjnp.sum), argnums=(0, 1, 2)))(q, k, v)
    for a, b in zip(g, gj):
        close(a, b, atol=1e-5)


@needs_jax
def test_dot_product_attention_residual_3d_and_bfloat16_match_jax():
    q, k, v = _qkv()
    out, lse = nn.dot_product_attention(q, k, v, is_causal=True, return_residual=True,
                                        key_value_seq_lengths=_KV_LEN)
    out_j, lse_j = jnn.dot_product_attention(q, k, v, is_causal=True, return_residual=True,
                                             key_value_seq_lengths=_KV_LEN)
    close(out, out_j)
    close(lse, lse_j)                                   # [B, T, N]
    close(nn.dot_product_attention(q[0], k[0], v[0]), jnn.dot_product_attention(q[0], k[0], v[0]))
    qb, kb, vb = _qkv(dtype=jnp.bfloat16)
    close(nn.dot_product_attention(qb, kb, vb).astype(np.float32),
          jnn.dot_product_attention(qb, kb, vb).astype(np.float32), atol=1e-2)


def test_dot_product_attention_against_numpy():
    q, k, v = _qkv(N=2, K=2)
    B, T, N, H = q.shape
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(H)
    logits = np.where(np.tril(np.ones((T, k.shape[1]), bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = np.einsum("bnts,bsnh->btnh", p, v).astype(np.float32)
    close(nn.dot_product_attention(q, k, v, is_causal=True), want, atol=1e-5)
    jitted = traced(lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True))
    close(jitted(q, k, v), want, atol=1e-5)


def test_dot_product_attention_errors():
    q, k, v = _qkv()
    with pytest.raises(NotImplementedError, match="cudnn.*not available in fnad"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="Unsupported implementation option: flash"):
        nn.dot_product_attention(q, k, v, implementation="flash")
    with pytest.raises(ValueError, match="multiple of key/value heads, but got 3 vs 2"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="mask dtype should be bool"):
        nn.dot_product_attention(q, k, v, mask=_MASK.astype(np.float32))
    with pytest.raises(ValueError, match="value shape should be"):
        nn.dot_product_attention(q, k, v[:, :3])
    with pytest.raises(ValueError, match="key_value_seq_lengths dtype should be int32"):
        nn.dot_product_attention(q, k, v, key_value_seq_lengths=_KV_LEN.astype(np.float32))

"""Tests of fnad/models/layers.py, attention.py and moe.py.

Every component's value and gradient (w.r.t. params and input) against a twin written here
in jax.numpy from the same parameters (float32), and against central finite differences in
float64; plus the properties: GQA head sharing, causal and padding masks, the KV cache under
jit with a traced index, RoPE's relative-position property and NTK scaling, dropout, and
the MoE aux loss / renormalization / capacity against NumPy hand computations.

The jax twins (`j_*`) are also used by tests/test_models_transformer.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as jnp
from fnad import models as M
from fnad import random

try:
    import jax
    import jax.numpy as jjnp
except ImportError:                                   # the tests that need it skip
    jax = jjnp = None


@pytest.fixture
def jx():
    """jax, the oracle for values and gradients; the test skips where it is not installed."""
    return pytest.importorskip("jax", reason="jax (the oracle for these tests) not installed")


# ---- helpers -----------------------------------------------------------------------------------
def rand(rng, *shape, scale=1.0, dtype=np.float32):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def tree_map(f, tree):
    """f over the leaves of dicts / lists / tuples of arrays (library-independent)."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(f, v) for v in tree)
    return f(tree)


def tree_pairs(a, b, path=""):
    """(path, leaf_a, leaf_b) for two trees of the same structure (dict keys matched)."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            yield from tree_pairs(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from tree_pairs(x, y, f"{path}[{i}]")
    else:
        yield path, a, b


def assert_trees_close(a, b, rtol=2e-4, atol=2e-5):
    for path, x, y in tree_pairs(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol,
                                   err_msg=f"at {path or 'root'}")


def to_np(tree):
    return tree_map(np.asarray, tree)


def to_fnad(tree):
    return tree_map(jnp.asarray, tree)


def to_jax(tree):
    return tree_map(jjnp.asarray, tree)


def check_vs_jax(f, f_jax, params, x, *, x_grad=True, rtol=2e-4, atol=2e-5, seed=0):
    """f(params, x) (fnad) vs f_jax(params, x) (jax): values, and the gradients of
    Σ out·ct (a fixed random cotangent) w.r.t. params (and x when x_grad)."""
    out = np.asarray(f(to_fnad(params), jnp.asarray(x)))
    ref = np.asarray(jax.jit(f_jax)(to_jax(params), jjnp.asarray(x)))
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, err_msg="value")
    ct = rand(np.random.default_rng(seed + 100), *out.shape)
    argnums = (0, 1) if x_grad else 0
    g = fnad.grad(lambda p, x: jnp.sum(f(p, x) * ct), argnums=argnums)(to_fnad(params),
                                                                       jnp.asarray(x))
    g_ref = jax.jit(jax.grad(lambda p, x: jjnp.sum(f_jax(p, x) * ct), argnums=argnums))(
        to_jax(params), jjnp.asarray(x))
    assert_trees_close(to_np(g), to_np(g_ref), rtol=rtol, atol=atol)


def check_fd(f, params, x, *, eps=1e-6, rtol=1e-6, atol=1e-8, seed=0):
    """Central finite differences in float64 (call under the x64 fixture): for random
    directions (u_p, u_x), ⟨∇_p s, u_p⟩ + ⟨∇_x s, u_x⟩ = (s(p+εu) − s(p−εu)) / 2ε with
    s = Σ f(p, x)·ct."""
    rng = np.random.default_rng(seed + 200)
    params = tree_map(lambda a: np.asarray(a, np.float64), params)
    x = np.asarray(x, np.float64)
    ct = rng.standard_normal(np.shape(f(to_fnad(params), jnp.asarray(x))))

    def s(p, x):
        return jnp.sum(f(p, x) * ct)
    gp, gx = fnad.grad(s, argnums=(0, 1))(to_fnad(params), jnp.asarray(x))
    assert np.asarray(gx).dtype == np.float64
    up = tree_map(lambda a: rng.standard_normal(np.shape(a)), params)
    ux = rng.standard_normal(x.shape)
    analytic = sum(float(np.sum(np.asarray(g) * u)) for (_, g, u) in tree_pairs(to_np(gp), up))
    analytic += float(np.sum(np.asarray(gx) * ux))

    def shifted(sign):
        p = _tree_axpy(params, up, sign * eps)
        return float(s(to_fnad(p), jnp.asarray(x + sign * eps * ux)))
    numeric = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol)


def _tree_axpy(a, b, alpha):
    """a + alpha·b leafwise (same structure)."""
    if isinstance(a, dict):
        return {k: _tree_axpy(a[k], b[k], alpha) for k in a}
    if isinstance(a, (list, tuple)):
        return type(a)(_tree_axpy(x, y, alpha) for x, y in zip(a, b))
    return a + alpha * b


# ---- jax twins (same parameter trees; independent formulations where natural) -------------------
def j_layer_norm(p, x, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / jjnp.sqrt(x.var(-1, keepdims=True) + eps) \
        * p["scale"] + p["bias"]


def j_rms_norm(p, x, eps=1e-6):
    return x / jjnp.sqrt(jjnp.mean(jjnp.square(x), -1, keepdims=True) + eps) * p["scale"]


def j_ffn(p, x, kind):
    if kind == "swiglu":
        return (jax.nn.silu(x @ p["w_gate"]) * (x @ p["w_up"])) @ p["w_down"]
    return jax.nn.gelu(x @ p["w1"] + p["b1"], approximate=(kind == "gelu_tanh")) @ p["w2"] \
        + p["b2"]


def np_rope_matrices(positions, D, base=10000.0, ntk_factor=1.0):
    """[T, D, D] block-diagonal rotations (NumPy, float64): R[t] rotates pair i by t·θ_i."""
    base = base * ntk_factor ** (D / (D - 2))
    R = np.zeros((len(positions), D, D))
    for t, pos in enumerate(positions):
        for i in range(D // 2):
            a = pos * base ** (-2 * i / D)
            R[t, 2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)],
                                                      [np.sin(a), np.cos(a)]]
    return R


def j_rope(x, R):
    """x [..., T, D] rotated by R [T, D, D]: out[t] = R[t] · x[t]."""
    return jjnp.einsum("ted,...td->...te", R.astype(x.dtype), x)


def j_attention(p, x, H, G, *, causal=True, padding_mask=None, R=None, cache_len=None):
    """Self-attention through jax.nn.dot_product_attention (its own GQA grouping)."""
    B, T, C = x.shape
    D = p["wq"].shape[1] // H

    def proj(n):
        y = x @ p["w" + n]
        return y + p["b" + n] if "b" + n in p else y
    q = proj("q").reshape(B, T, H, D)
    k = proj("k").reshape(B, T, G, D)
    v = proj("v").reshape(B, T, G, D)
    if R is not None:                                  # j_rope works on [..., T, D]
        q = j_rope(q.transpose(0, 2, 1, 3), R).transpose(0, 2, 1, 3)
        k = j_rope(k.transpose(0, 2, 1, 3), R).transpose(0, 2, 1, 3)
    mask = None
    if padding_mask is not None:
        mask = jjnp.asarray(padding_mask)[:, None, None, :]          # [B, 1, 1, S]
    out = jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=causal)  # [B, T, H, D]
    return out.reshape(B, T, H * D) @ p["wo"] + (p["bo"] if "bo" in p else 0.0)


def moe_choice_np(router_probs, K, capacity_factor=None):
    """NumPy: top-k indices [N, K], renormalized weights [N, K] and the kept mask [N, K]
    after capacity dropping, by plain loops (slots queued rank-major, then token order)."""
    N, E = router_probs.shape
    idx = np.argsort(-router_probs, axis=-1, kind="stable")[:, :K]
    w = np.take_along_axis(router_probs, idx, -1)
    w = w / w.sum(-1, keepdims=True)
    keep = np.ones((N, K), bool)
    if capacity_factor is not None:
        cap = math.ceil(capacity_factor * N * K / E)
        used = np.zeros(E, int)
        for k in range(K):
            for n in range(N):
                e = idx[n, k]
                used[e] += 1
                keep[n, k] = used[e] <= cap
    return idx, w, keep


def j_moe(p, x, top_k, capacity_factor=None, aux_alpha=0.01):
    """Sparse formulation: each token runs only its chosen experts (gathered weights); the
    capacity queue by pairwise comparison of the slots in rank-major order."""
    B, T, C = x.shape
    N, E = B * T, p["router"].shape[1]
    xf = x.reshape(N, C)
    probs = jax.nn.softmax(xf @ p["router"], axis=-1)                 # [N, E]
    top, idx = jax.lax.top_k(probs, top_k)                            # [N, K]
    w = top / top.sum(-1, keepdims=True)
    if capacity_factor is not None:
        order = idx.T.reshape(-1)                                     # slot o = k·N + n
        same = order[:, None] == order[None, :]
        earlier = jjnp.arange(N * top_k)[None, :] <= jjnp.arange(N * top_k)[:, None]
        position = jjnp.sum(same & earlier, axis=1).reshape(top_k, N).T   # [N, K], 1-based
        w = jjnp.where(position <= math.ceil(capacity_factor * N * top_k / E), w, 0.0)
    g = jjnp.einsum("nc,nkcf->nkf", xf, p["w_gate"][idx])
    u = jjnp.einsum("nc,nkcf->nkf", xf, p["w_up"][idx])
    y = jjnp.einsum("nkf,nkfc->nkc", jax.nn.silu(g) * u, p["w_down"][idx])  # [N, K, C]
    y = jjnp.sum(w[..., None] * y, axis=1).reshape(B, T, C)
    f = jjnp.sum(jax.nn.one_hot(idx, E), axis=(0, 1)) / (N * top_k)
    aux = aux_alpha * E * jjnp.sum(f * probs.mean(0))
    return y, aux


def j_cross_entropy(logits, labels, mask=None):
    nll = -jjnp.take_along_axis(jax.nn.log_softmax(logits, -1), labels[..., None], -1)[..., 0]
    if mask is None:
        return nll.mean()
    return jjnp.sum(jjnp.where(mask, nll, 0.0)) / jjnp.maximum(mask.sum(), 1)


# ---- embedding, norms, linear, ffn -------------------------------------------------------------
def test_embedding_and_tied_head_vs_jax(jx):
    params = to_np(M.embedding_init(random.PRNGKey(0), 11, 6))
    assert params["table"].shape == (11, 6) and params["table"].dtype == np.float32
    tokens = np.array([[1, 3, 3, 10], [0, 2, 7, 3]], np.int32)
    check_vs_jax(M.embed, lambda p, t: p["table"][t], params, tokens, x_grad=False)
    x = rand(np.random.default_rng(1), 2, 4, 6)
    check_vs_jax(M.unembed, lambda p, x: x @ p["table"].T, params, x)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_norms_vs_jax(jx, kind):
    rng = np.random.default_rng(0)
    C = 8
    params = to_np(M.layer_norm_init(C) if kind == "layer" else M.rms_norm_init(C))
    assert np.all(params["scale"] == 1) and params["scale"].shape == (C,)
    params = tree_map(lambda a: a + rand(rng, *a.shape, scale=0.5), params)  # not 1 / 0
    x = rand(rng, 2, 3, C, scale=2.0) + 1.0
    f, f_jax = (M.layer_norm, j_layer_norm) if kind == "layer" else (M.rms_norm, j_rms_norm)
    check_vs_jax(f, f_jax, params, x)


def test_linear_vs_jax(jx):
    rng = np.random.default_rng(0)
    params = to_np(M.linear_init(random.PRNGKey(1), 5, 7, bias=True))
    assert params["w"].shape == (5, 7) and params["b"].shape == (7,)
    assert "b" not in M.linear_init(random.PRNGKey(1), 5, 7)
    params["b"] = rand(rng, 7)
    check_vs_jax(M.linear, lambda p, x: x @ p["w"] + p["b"], params, rand(rng, 2, 3, 5))


@pytest.mark.parametrize("kind", ["gelu", "gelu_tanh", "swiglu"])
def test_ffn_vs_jax(jx, kind):
    rng = np.random.default_rng(0)
    params = to_np(M.ffn_init(random.PRNGKey(2), 6, 10, kind=kind))
    params = tree_map(lambda a: a + rand(rng, *a.shape, scale=0.3), params)  # nonzero biases
    check_vs_jax(lambda p, x: M.ffn(p, x, kind=kind), lambda p, x: j_ffn(p, x, kind),
                 params, rand(rng, 2, 3, 6))


def test_ffn_exact_and_tanh_gelu_differ():
    params = M.ffn_init(random.PRNGKey(2), 4, 8, kind="gelu")
    x = 2.0 * random.normal(random.PRNGKey(3), (3, 4))
    a, b = M.ffn(params, x, kind="gelu"), M.ffn(params, x, kind="gelu_tanh")
    assert 1e-6 < float(jnp.max(jnp.abs(a - b))) < 1e-2


def test_ffn_kind_error():
    raises_with(lambda: M.ffn_init(random.PRNGKey(0), 4, 8, kind="relu"), "kind", "swiglu",
                "'relu'", exc=ValueError)


# ---- finite differences in float64 for every differentiable component --------------------------
def _fd_cases(rng):
    C, H, G, T = 8, 4, 2, 5
    cos, sin = M.rope_angles(jnp.arange(T), C // H)
    pad = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    return {
        "layer_norm": (M.layer_norm, {"scale": rand(rng, C), "bias": rand(rng, C)}),
        "rms_norm": (M.rms_norm, {"scale": rand(rng, C)}),
        "linear": (M.linear, {"w": rand(rng, C, 3), "b": rand(rng, 3)}),
        "gelu": (lambda p, x: M.ffn(p, x, kind="gelu"),
                 to_np(M.ffn_init(random.PRNGKey(0), C, 12, kind="gelu"))),
        "gelu_tanh": (lambda p, x: M.ffn(p, x, kind="gelu_tanh"),
                      to_np(M.ffn_init(random.PRNGKey(0), C, 12, kind="gelu_tanh"))),
        "swiglu": (lambda p, x: M.ffn(p, x, kind="swiglu"),
                   to_np(M.ffn_init(random.PRNGKey(0), C, 12, kind="swiglu"))),
        "rope": (lambda p, x: M.apply_rope(x * p["s"], *M.rope_angles(jnp.arange(T), C)),
                 {"s": rand(rng, C)}),
        "attention": (lambda p, x: M.attention(
            p, x, n_heads=H, n_kv_heads=G, padding_mask=jnp.asarray(pad),
            rope=(cos, sin))[0],
            to_np(M.attention_init(random.PRNGKey(1), C, H, G, bias=True))),
        "moe": (lambda p, x: sum(M.moe(p, x, top_k=2, aux_alpha=0.5, capacity_factor=1.0)),
                to_np(M.moe_init(random.PRNGKey(2), C, 6, 4))),
        "cross_entropy": (lambda p, x: M.cross_entropy(
            x @ p["w"], jnp.asarray(np.arange(10).reshape(2, 5) % 3),
            mask=jnp.asarray(pad)), {"w": rand(rng, C, 3)}),
    }


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "linear", "gelu", "gelu_tanh",
                                  "swiglu", "rope", "attention", "moe", "cross_entropy"])
def test_components_finite_differences_f64(x64, name):
    rng = np.random.default_rng(7)
    f, params = _fd_cases(rng)[name]
    x = rng.standard_normal((2, 5, 8))
    check_fd(f, params, x)


# ---- positions ---------------------------------------------------------------------------------
def test_sinusoidal_positions_match_the_formula():
    T, C = 7, 10
    pos = np.array([0, 1, 2, 5, 9, 100, 3])
    pe = np.asarray(M.sinusoidal_positions(jnp.asarray(pos), C))
    ref = np.zeros((T, C))
    for t in range(T):                                 # seed 000's loop
        for i in range(0, C, 2):
            ang = pos[t] / 10000.0 ** (i / C)
            ref[t, i], ref[t, i + 1] = np.sin(ang), np.cos(ang)
    np.testing.assert_allclose(pe, ref, rtol=1e-5, atol=2e-5)
    raises_with(lambda: M.sinusoidal_positions(jnp.arange(3), 5), "even", "5", exc=ValueError)


def test_rope_vs_jax_rotation_matrices(jx):
    rng = np.random.default_rng(0)
    D, pos = 8, np.array([0, 3, 1, 17, 4])
    cos, sin = M.rope_angles(jnp.asarray(pos), D, base=500.0, ntk_factor=2.0)
    assert cos.shape == sin.shape == (5, D // 2)
    R = np_rope_matrices(pos, D, base=500.0, ntk_factor=2.0)
    check_vs_jax(lambda p, x: M.apply_rope(x * p["s"], cos, sin),
                 lambda p, x: j_rope(x * p["s"], jjnp.asarray(R)),
                 {"s": rand(rng, D)}, rand(rng, 2, 3, 5, D), rtol=1e-4, atol=1e-5)


def test_rope_scores_depend_only_on_the_offset():
    rng = np.random.default_rng(1)
    D = 16
    q, k = jnp.asarray(rand(rng, 1, D)), jnp.asarray(rand(rng, 1, D))

    def score(p, s):
        cq, sq = M.rope_angles(jnp.asarray([p]), D)
        ck, sk = M.rope_angles(jnp.asarray([s]), D)
        return float(jnp.sum(M.apply_rope(q, cq, sq) * M.apply_rope(k, ck, sk)))
    for p, s in [(0, 3), (5, 1), (2, 2), (10, 40)]:
        for shift in (1, 7, 100):
            assert score(p, s) == pytest.approx(score(p + shift, s + shift), rel=1e-4,
                                                abs=1e-4)
    # ... and it does depend on the offset (the property is not trivially true)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3


def test_rope_ntk_factor():
    D, pos = 8, np.arange(6)
    x = jnp.asarray(rand(np.random.default_rng(2), 2, 6, D))

    def rotated(**kw):
        cos, sin = M.rope_angles(jnp.asarray(pos), D, **kw)
        return np.asarray(M.apply_rope(x, cos, sin))

    def reference(base):                                # plain RoPE (no NTK), in NumPy
        return np.einsum("ted,btd->bte", np_rope_matrices(pos, D, base=base), np.asarray(x))
    np.testing.assert_allclose(rotated(ntk_factor=1.0), reference(10000.0), atol=1e-5)
    np.testing.assert_array_equal(rotated(ntk_factor=1.0), rotated())
    scaled = 10000.0 * 4.0 ** (D / (D - 2))
    np.testing.assert_allclose(rotated(ntk_factor=4.0), reference(scaled), atol=1e-5)
    assert np.max(np.abs(rotated(ntk_factor=4.0) - rotated())) > 1e-3


# ---- dropout -----------------------------------------------------------------------------------
def test_dropout_identity_cases():
    x = random.normal(random.PRNGKey(0), (4, 5))
    key = random.PRNGKey(1)
    assert M.dropout(key, x, 0.0) is x
    assert M.dropout(key, x, 0.5, deterministic=True) is x
    assert M.dropout(None, x, 0.5, deterministic=True) is x
    raises_with(lambda: M.dropout(None, x, 0.5), "key", "deterministic", exc=ValueError)
    raises_with(lambda: M.dropout(key, x, 1.5), "rate", "1.5", exc=ValueError)


def test_dropout_mask_and_expectation():
    rate, n = 0.3, 200_000
    x = jnp.ones((n,))
    y = np.asarray(M.dropout(random.PRNGKey(3), x, rate))
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / (1 - rate), rtol=1e-6)  # inverted scaling
    sigma = math.sqrt(rate * (1 - rate) / n)
    assert abs((1 - kept.mean()) - rate) < 5 * sigma
    assert abs(y.mean() - 1.0) < 5 * sigma / (1 - rate)             # E[y] = x
    # same key, same mask (also for other values); another key, another mask
    x2 = random.normal(random.PRNGKey(4), (n,))
    y2 = np.asarray(M.dropout(random.PRNGKey(3), x2, rate))
    np.testing.assert_array_equal(y2 != 0, kept)
    y3 = np.asarray(M.dropout(random.PRNGKey(5), x, rate))
    assert (y3 != 0).mean() != pytest.approx(1.0) and np.any((y3 != 0) != kept)
    # under jit, the same mask
    y4 = np.asarray(traced(lambda k, x: M.dropout(k, x, rate))(random.PRNGKey(3), x))
    np.testing.assert_array_equal(y4, y)


def test_dropout_gradient_is_the_scaled_mask():
    rate = 0.25
    x = random.normal(random.PRNGKey(0), (50,))
    key = random.PRNGKey(9)
    g = np.asarray(fnad.grad(lambda x: jnp.sum(M.dropout(key, x, rate)))(x))
    kept = np.asarray(M.dropout(key, jnp.ones((50,)), rate)) != 0
    np.testing.assert_allclose(g, kept / (1 - rate), rtol=1e-6)


# ---- cross-entropy -----------------------------------------------------------------------------
@pytest.mark.parametrize("masked", [False, True])
def test_cross_entropy_vs_jax(jx, masked):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 7, (3, 4)).astype(np.int32)
    mask = rng.random((3, 4)) < 0.6 if masked else None
    fm = None if mask is None else jnp.asarray(mask)
    jm = None if mask is None else jjnp.asarray(mask)
    check_vs_jax(lambda p, z: M.cross_entropy(z * p["t"], jnp.asarray(labels), mask=fm),
                 lambda p, z: j_cross_entropy(z * p["t"], jjnp.asarray(labels), jm),
                 {"t": np.float32(1.3)}, rand(rng, 3, 4, 7, scale=3.0))


def test_cross_entropy_mask_semantics():
    logits = random.normal(random.PRNGKey(0), (2, 3, 5))
    labels = jnp.asarray([[0, 1, 2], [3, 4, 0]])
    full = M.cross_entropy(logits, labels)
    ones = M.cross_entropy(logits, labels, mask=jnp.ones((2, 3), bool))
    np.testing.assert_allclose(np.asarray(full), np.asarray(ones), rtol=1e-6)
    # masked-out positions do not count, whatever their logits (even inf)
    mask = jnp.asarray([[1, 1, 0], [1, 0, 0]], bool)
    bad = logits.at[0, 2].set(np.inf).at[1, 1:].set(np.nan)
    a, b = M.cross_entropy(logits, labels, mask=mask), M.cross_entropy(bad, labels, mask=mask)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    assert float(M.cross_entropy(logits, labels, mask=jnp.zeros((2, 3), bool))) == 0.0
    one = jnp.zeros((2, 3), bool).at[1, 2].set(True)     # the mean over a single position
    nll = -np.asarray(fnad.nn.log_softmax(logits, axis=-1))[1, 2, 0]
    np.testing.assert_allclose(float(M.cross_entropy(logits, labels, mask=one)), nll, rtol=1e-6)
    raises_with(lambda: M.cross_entropy(logits, labels[:, :2]), "labels shape", (2, 2).__str__(),
                exc=ValueError)


# ---- attention ---------------------------------------------------------------------------------
HEADS = [(4, 4), (4, 2), (4, 1)]                       # MHA, GQA, MQA


@pytest.mark.parametrize("H,G", HEADS)
def test_attention_vs_jax(jx, H, G):
    rng = np.random.default_rng(H + G)
    B, T, C = 2, 5, 16
    params = to_np(M.attention_init(random.PRNGKey(0), C, H, G, bias=True))
    assert params["wq"].shape == (C, C) and params["wk"].shape == (C, G * C // H)
    assert params["wo"].shape == (C, C) and params["bk"].shape == (G * C // H,)
    params = tree_map(lambda a: a + rand(rng, *a.shape, scale=0.1), params)
    pos = np.arange(T)
    cos, sin = M.rope_angles(jnp.asarray(pos), C // H)
    R = jjnp.asarray(np_rope_matrices(pos, C // H))
    pad = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)        # right padding
    x = rand(rng, B, T, C)
    for causal, mask, rope in [(True, None, True), (True, pad, True), (False, pad, False)]:
        fm = None if mask is None else jnp.asarray(mask)

        def f(p, x, causal=causal, fm=fm, rope=rope):
            return M.attention(p, x, n_heads=H, n_kv_heads=G, causal=causal, padding_mask=fm,
                               rope=(cos, sin) if rope else None)[0]

        def f_jax(p, x, causal=causal, mask=mask, rope=rope):
            return j_attention(p, x, H, G, causal=causal, padding_mask=mask,
                               R=R if rope else None)
        check_vs_jax(f, f_jax, params, x)


def test_gqa_equals_mha_with_each_kv_head_repeated():
    B, T, C, H, G = 2, 4, 16, 4, 2
    D, R = C // H, H // G
    params = M.attention_init(random.PRNGKey(0), C, H, G)
    x = random.normal(random.PRNGKey(1), (B, T, C))

    def repeat(w):                                      # [C, G·D] -> [C, H·D], head h <- g=h//R
        return jnp.repeat(w.reshape(C, G, D), R, axis=1).reshape(C, H * D)
    mha = dict(params, wk=repeat(params["wk"]), wv=repeat(params["wv"]))
    y_gqa, _ = M.attention(params, x, n_heads=H, n_kv_heads=G)
    y_mha, _ = M.attention(mha, x, n_heads=H, n_kv_heads=H)
    np.testing.assert_allclose(np.asarray(y_gqa), np.asarray(y_mha), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("H,G", HEADS)
def test_attention_causal_mask(H, G):
    B, T, C = 1, 6, 8
    params = M.attention_init(random.PRNGKey(0), C, H, G)
    x = random.normal(random.PRNGKey(1), (B, T, C))
    x2 = x.at[:, 4:].set(random.normal(random.PRNGKey(2), (B, 2, C)))   # change the future
    y, _ = M.attention(params, x, n_heads=H, n_kv_heads=G)
    y2, _ = M.attention(params, x2, n_heads=H, n_kv_heads=G)
    np.testing.assert_allclose(np.asarray(y[:, :4]), np.asarray(y2[:, :4]), rtol=1e-6,
                               atol=1e-7)
    assert np.max(np.abs(np.asarray(y[:, 4:] - y2[:, 4:]))) > 1e-3
    # without the causal mask, the past sees the future
    yn, _ = M.attention(params, x, n_heads=H, n_kv_heads=G, causal=False)
    yn2, _ = M.attention(params, x2, n_heads=H, n_kv_heads=G, causal=False)
    assert np.max(np.abs(np.asarray(yn[:, :4] - yn2[:, :4]))) > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_attention_padding_mask(causal):
    B, T, C, H, G = 2, 5, 8, 2, 1
    params = M.attention_init(random.PRNGKey(0), C, H, G)
    x = random.normal(random.PRNGKey(1), (B, T, C))
    pad = jnp.asarray([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    x2 = x.at[0, 1].set(5.0).at[0, 4].set(-3.0)             # change the pad tokens of row 0
    kw = dict(n_heads=H, n_kv_heads=G, causal=causal, padding_mask=pad)
    y, _ = M.attention(params, x, **kw)
    y2, _ = M.attention(params, x2, **kw)
    real = np.asarray(pad)
    np.testing.assert_allclose(np.asarray(y)[real], np.asarray(y2)[real], rtol=1e-6, atol=1e-7)
    # without the mask the change shows at real positions
    y3, _ = M.attention(params, x2, n_heads=H, n_kv_heads=G, causal=causal)
    y1, _ = M.attention(params, x, n_heads=H, n_kv_heads=G, causal=causal)
    assert np.max(np.abs(np.asarray(y3 - y1)[0, 2:4])) > 1e-3
    raises_with(lambda: M.attention(params, x, n_heads=H, n_kv_heads=G,
                                    padding_mask=pad[:, :3]), "padding_mask", "[2, 5]",
                exc=ValueError)


def test_attention_dropout_is_key_driven():
    params = M.attention_init(random.PRNGKey(0), 8, 2, 2)
    x = random.normal(random.PRNGKey(1), (2, 4, 8))
    kw = dict(n_heads=2, n_kv_heads=2)
    plain, _ = M.attention(params, x, **kw)
    zero, _ = M.attention(params, x, dropout_rate=0.0, key=random.PRNGKey(5), **kw)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(zero))
    a, _ = M.attention(params, x, dropout_rate=0.5, key=random.PRNGKey(5), **kw)
    b, _ = M.attention(params, x, dropout_rate=0.5, key=random.PRNGKey(5), **kw)
    c, _ = M.attention(params, x, dropout_rate=0.5, key=random.PRNGKey(6), **kw)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.max(np.abs(np.asarray(a - plain))) > 1e-3
    assert np.max(np.abs(np.asarray(a - c))) > 1e-3
    raises_with(lambda: M.attention(params, x, dropout_rate=0.5, **kw), "key",
                exc=ValueError)


def test_attention_head_errors():
    raises_with(lambda: M.attention_init(random.PRNGKey(0), 10, 4, 4), "C=10", "n_heads=4",
                exc=ValueError)
    raises_with(lambda: M.attention_init(random.PRNGKey(0), 12, 6, 4), "multiple",
                "n_kv_heads=4", exc=ValueError)
    params = M.attention_init(random.PRNGKey(0), 8, 4, 2)
    raises_with(lambda: M.attention(params, jnp.ones((1, 2, 8)), n_heads=4, n_kv_heads=3),
                "n_kv_heads=3", exc=ValueError)


@pytest.mark.parametrize("H,G", [(4, 4), (4, 2), (4, 1)])
def test_attention_kv_cache_prefill_then_steps(H, G):
    B, T, S, C, T0 = 2, 6, 8, 16, 3
    D = C // H
    params = M.attention_init(random.PRNGKey(0), C, H, G)
    x = random.normal(random.PRNGKey(1), (B, T, C))
    cos, sin = M.rope_angles(jnp.arange(T), D)
    full, none = M.attention(params, x, n_heads=H, n_kv_heads=G, rope=(cos, sin))
    assert none is None

    def step(cache, x_new, index):
        pos = index + jnp.arange(x_new.shape[1])
        return M.attention(params, x_new, n_heads=H, n_kv_heads=G, rope=M.rope_angles(pos, D),
                           cache=cache, cache_index=index)
    cache = {"k": jnp.zeros((B, G, S, D)), "v": jnp.zeros((B, G, S, D))}
    y0, cache = step(cache, x[:, :T0], 0)                             # prefill
    outs = [y0]
    jstep = traced(step)
    for t in range(T0, T):                                            # decode, traced index
        y, cache = jstep(cache, x[:, t:t + 1], jnp.asarray(t, jnp.int32))
        outs.append(y)
    assert jstep._cache_size() == 1                                   # one compile for all t
    np.testing.assert_allclose(np.asarray(jnp.concatenate(outs, axis=1)), np.asarray(full),
                               rtol=1e-5, atol=1e-6)
    assert cache["k"].shape == (B, G, S, D)
    np.testing.assert_array_equal(np.asarray(cache["k"])[:, :, T:], 0)  # slots past T unused
    raises_with(lambda: M.attention(params, x, n_heads=H, n_kv_heads=G, cache=cache),
                "cache_index", exc=ValueError)


# ---- MoE ---------------------------------------------------------------------------------------
def _moe_setup(seed=0, B=2, T=5, C=6, F=8, E=4):
    params = to_np(M.moe_init(random.PRNGKey(seed), C, F, E))
    assert params["router"].shape == (C, E) and params["w_gate"].shape == (E, C, F)
    assert params["w_up"].shape == (E, C, F) and params["w_down"].shape == (E, F, C)
    params["router"] = params["router"] * 3.0          # spread the router probs (no near-ties)
    return params, rand(np.random.default_rng(seed), B, T, C)


@pytest.mark.parametrize("top_k,capacity", [(1, None), (2, None), (2, 0.5), (3, 0.75)])
def test_moe_vs_jax(jx, top_k, capacity):
    params, x = _moe_setup()
    for part in (0, 1):                                 # y, then aux (with their gradients)
        check_vs_jax(
            lambda p, x, part=part: M.moe(p, x, top_k=top_k, aux_alpha=0.3,
                                          capacity_factor=capacity)[part],
            lambda p, x, part=part: j_moe(p, x, top_k, capacity, aux_alpha=0.3)[part],
            params, x)


def _silu(u):
    return u / (1 + np.exp(-u))


def _moe_numpy(params, x, top_k, capacity_factor=None, aux_alpha=0.01):
    """MoE output and aux by a loop over tokens and their chosen experts (float64)."""
    p = tree_map(lambda a: np.asarray(a, np.float64), params)
    xf = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
    z = xf @ p["router"]
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    idx, w, keep = moe_choice_np(probs, top_k, capacity_factor)
    y = np.zeros_like(xf)
    for n in range(xf.shape[0]):
        for k in range(top_k):
            if keep[n, k]:
                e = idx[n, k]
                h = _silu(xf[n] @ p["w_gate"][e]) * (xf[n] @ p["w_up"][e])
                y[n] += w[n, k] * (h @ p["w_down"][e])
    E = probs.shape[1]
    f = np.array([np.sum(idx == i) for i in range(E)]) / (xf.shape[0] * top_k)
    P = probs.mean(0)
    return y.reshape(x.shape), aux_alpha * E * np.sum(f * P), probs


@pytest.mark.parametrize("top_k", [1, 2])
def test_moe_output_and_aux_loss_vs_numpy(top_k):
    params, x = _moe_setup(seed=3)
    y, aux = M.moe(to_fnad(params), jnp.asarray(x), top_k=top_k, aux_alpha=0.05)
    y_ref, aux_ref, probs = _moe_numpy(params, x, top_k, aux_alpha=0.05)
    np.testing.assert_allclose(np.asarray(y), y_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(aux), aux_ref, rtol=1e-5)
    # the aux loss is α·E·Σ f_i P_i: α exactly when the routing is uniform, larger when skewed
    assert np.unique(np.argmax(probs, -1)).size > 1


def test_moe_aux_loss_is_alpha_for_uniform_routing():
    params, x = _moe_setup()
    params["router"] = np.zeros_like(params["router"])        # p = 1/E for every token
    E = params["router"].shape[1]
    _, aux = M.moe(to_fnad(params), jnp.asarray(x), top_k=E, aux_alpha=0.2)
    np.testing.assert_allclose(float(aux), 0.2, rtol=1e-6)


@pytest.mark.parametrize("top_k", [1, 2, 4])
def test_moe_topk_weights_are_renormalized(top_k):
    # identical experts: Σ_k w_k · expert(x) = expert(x) iff the k weights sum to 1
    params, x = _moe_setup(seed=5)
    for name in ("w_gate", "w_up", "w_down"):
        params[name] = np.broadcast_to(params[name][:1], params[name].shape).copy()
    y, _ = M.moe(to_fnad(params), jnp.asarray(x), top_k=top_k)
    dense = {"w_gate": params["w_gate"][0], "w_up": params["w_up"][0],
             "w_down": params["w_down"][0]}
    ref = M.ffn(to_fnad(dense), jnp.asarray(x), kind="swiglu")
    np.testing.assert_allclose(np.asarray(y), np.asarray(ref), rtol=1e-5, atol=1e-6)


def test_moe_capacity_drops_tokens_past_capacity():
    params, x = _moe_setup(seed=1, B=1, T=8, E=4)
    # a router that sends every token's first choice to expert 2
    params["router"] = np.zeros_like(params["router"])
    x[..., 0] = np.abs(x[..., 0]) + 1.0
    params["router"][0, 2] = 10.0
    xf, pf = jnp.asarray(x), to_fnad(params)
    y_all, aux_all = M.moe(pf, xf, top_k=1)
    # cap = ceil(1.0 · 8 · 1 / 4) = 2: tokens 0, 1 keep their expert, tokens 2.. get 0
    y_cap, aux_cap = M.moe(pf, xf, top_k=1, capacity_factor=1.0)
    np.testing.assert_allclose(np.asarray(y_cap)[0, :2], np.asarray(y_all)[0, :2], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(y_cap)[0, 2:], 0.0)
    assert np.all(np.abs(np.asarray(y_all)[0, 2:]).max(-1) > 1e-4)
    assert float(aux_cap) == float(aux_all)             # f_i is the router's choice
    # a capacity no expert reaches drops nothing
    y_big, _ = M.moe(pf, xf, top_k=1, capacity_factor=4.0)
    np.testing.assert_array_equal(np.asarray(y_big), np.asarray(y_all))
    # the general case against the loop reference (second choices queue after first ones)
    params, x = _moe_setup(seed=2, B=2, T=6)
    for cf in (0.5, 1.0):
        y, _ = M.moe(to_fnad(params), jnp.asarray(x), top_k=2, capacity_factor=cf)
        np.testing.assert_allclose(np.asarray(y), _moe_numpy(params, x, 2, cf)[0], rtol=1e-4,
                                   atol=1e-5)
    raises_with(lambda: M.moe(pf, xf, top_k=5), "top_k", "E=4", exc=ValueError)
    raises_with(lambda: M.moe(pf, xf, top_k=1, capacity_factor=0.0), "capacity_factor",
                exc=ValueError)


def test_moe_jit_equals_eager():
    params, x = _moe_setup(seed=4)
    pf, xf = to_fnad(params), jnp.asarray(x)
    eager = M.moe(pf, xf, top_k=2, capacity_factor=1.0)
    jitted = traced(lambda p, x: M.moe(p, x, top_k=2, capacity_factor=1.0))(pf, xf)
    assert_trees_close(to_np(jitted), to_np(eager), rtol=1e-5, atol=1e-6)

"""fnad.decode: KV-cache greedy decoding equals the argmax of the full forward pass; the
sampling rules draw from the right sets with the right probabilities; one compiled decode
step serves every position."""
import logging

import numpy as np
import pytest
from checks import raises_with

import fnad
import fnad.numpy as jnp
from fnad import decode
from fnad.models import transformer


@pytest.fixture(scope="module", params=["mha", "gqa"])
def model(request):
    cfg = transformer.LMConfig(vocab=17, d_model=32, n_layers=2, n_heads=4,
                               n_kv_heads=4 if request.param == "mha" else 2, max_len=64)
    params = transformer.init_params(fnad.random.PRNGKey(3), cfg)
    # larger weights than init, so that the argmax is not the same token everywhere
    params = fnad.tree_util.tree_map(lambda p: p * 4.0 if p.ndim >= 2 else p, params)
    return cfg, params


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_greedy_kv_cache_decoding_equals_argmax_of_the_full_forward(model, backend):
    cfg, params = model
    prompt = np.random.default_rng(0).integers(0, cfg.vocab, (3, 5)).astype(np.int32)
    new = decode.generate(params, prompt, cfg, max_new_tokens=12, backend=backend)
    assert new.shape == (3, 12) and new.dtype == np.int32
    seq = np.concatenate([prompt, new], axis=1)                          # [B, 17]
    logits, _ = transformer.forward(params, jnp.asarray(seq), cfg)       # [B, 17, V]
    want = np.argmax(np.asarray(logits), axis=-1)[:, prompt.shape[1] - 1:-1]
    np.testing.assert_array_equal(new, want)
    assert len(set(new.ravel().tolist())) > 1                            # not a constant run


def test_one_compiled_step_serves_every_position(model, caplog):
    cfg, params = model
    prompt = np.zeros((1, 4), np.int32)
    prefill, step = decode.make_decoder(cfg, backend="numpy")
    with fnad.config.override(jax_log_compiles=True), caplog.at_level(logging.WARNING):
        decode.generate(params, prompt, cfg, max_new_tokens=10, decoder=(prefill, step))
    compiles = [r for r in caplog.records if "ompil" in r.getMessage()]
    assert len(compiles) == 2, [r.getMessage() for r in compiles]       # prefill + one step


def _logits():
    rng = np.random.default_rng(1)
    return jnp.asarray(rng.normal(size=(2, 12)).astype(np.float32) * 2)


def test_sampling_draws_from_the_right_set_with_the_right_frequencies():
    z = _logits()
    keys = fnad.random.split(fnad.random.PRNGKey(0), 4000)
    draw = fnad.jit(lambda k, method, **kw: decode.sample_logits(z, k, method=method, **kw),
                    static_argnames=("method", "temperature", "top_k", "top_p"))
    zn = np.asarray(z, np.float64)

    def freqs(**kw):
        out = np.stack([np.asarray(draw(k, **kw)) for k in keys[:1500]])  # [N, B]
        return np.stack([np.bincount(out[:, b], minlength=12) / len(out) for b in range(2)])

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    # temperature: frequencies follow softmax(z / T)
    f = freqs(method="temperature", temperature=0.7)
    np.testing.assert_allclose(f, softmax(zn / 0.7), atol=0.045)
    # top-k: only the k largest logits, renormalized
    f = freqs(method="top_k", top_k=3)
    top3 = np.argsort(-zn, axis=-1)[:, :3]
    want = np.zeros_like(zn)
    for b in range(2):
        want[b, top3[b]] = softmax(zn[b, top3[b]])
    np.testing.assert_allclose(f, want, atol=0.045)
    # top-p: the smallest most-likely set reaching p
    p = softmax(zn)
    f = freqs(method="top_p", top_p=0.6)
    want = np.zeros_like(zn)
    for b in range(2):
        order = np.argsort(-p[b])
        keep = order[: int(np.searchsorted(np.cumsum(p[b, order]), 0.6) + 1)]
        want[b, keep] = p[b, keep] / p[b, keep].sum()
    np.testing.assert_allclose(f, want, atol=0.045)
    assert set(np.nonzero(f[0])[0]) <= set(np.nonzero(want[0])[0])
    # greedy is the argmax; top_p=1 keeps everything
    np.testing.assert_array_equal(decode.sample_logits(z), np.argmax(zn, -1))


def test_decode_errors_say_what_is_wrong(model):
    cfg, params = model
    z = _logits()
    k = fnad.random.PRNGKey(0)
    raises_with(lambda: decode.sample_logits(z, k, method="beam"), "unknown method",
                "greedy", exc=ValueError)
    raises_with(lambda: decode.sample_logits(z, None, method="top_k", top_k=2), "needs a key",
                exc=ValueError)
    raises_with(lambda: decode.sample_logits(z, k, method="top_k", top_k=0), "top_k must be",
                exc=ValueError)
    raises_with(lambda: decode.sample_logits(z, k, method="top_p", top_p=1.5), "top_p must be",
                exc=ValueError)
    raises_with(lambda: decode.sample_logits(z, k, method="temperature", temperature=0.0),
                "temperature must be > 0", exc=ValueError)
    raises_with(lambda: decode.generate(params, np.zeros(4, np.int32), cfg, max_new_tokens=2),
                "[batch, length]", exc=ValueError)
    raises_with(lambda: decode.generate(params, np.full((1, 3), 99), cfg, max_new_tokens=2),
                "prompt tokens must be in [0, 17)", exc=ValueError)
    raises_with(lambda: decode.generate(params, np.zeros((1, 3), np.int32), cfg,
                                        max_new_tokens=2, method="top_k", top_k=2),
                "needs key", exc=ValueError)
    cache = transformer.init_cache(cfg, 1, 4)
    raises_with(lambda: transformer.forward_cached(params, np.zeros((1, 2), np.int32), cache, 3,
                                                   cfg),
                "positions 3..4 do not fit in a cache of length 4", exc=ValueError)

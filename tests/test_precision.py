"""fnad.precision: dtype policies, casting, loss scaling, and 16-bit compute per backend.

A small MLP's loss and gradient under a bfloat16/float16 policy are checked against the
float32 computation with a 16-bit tolerance, on xla (the backend mixed precision is for) and
on numpy and numba (which emulate 16-bit floats through float32: same results, no speedup).
The dynamic loss scale's state machine is checked against a Python transcription, eagerly
and under jit, and end to end in an f16 train step that skips non-finite updates.
"""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, xla_rounds_each_product

import fnad
import fnad.numpy as jnp
from fnad import nn, optim, precision, tree_util

BF16, F16 = np.dtype(jnp.bfloat16), np.dtype(jnp.float16)
# One 16-bit ulp at 1 is 2^-7 (bf16) or 2^-10 (f16); a 2-layer MLP's loss and gradient
# accumulate a few such roundings.
TOL16 = {BF16: dict(rtol=3e-2, atol=3e-3), F16: dict(rtol=5e-3, atol=5e-4)}


def _needs_backend(backend):
    if backend == "xla":
        pytest.importorskip("jax", reason="jax not installed: the xla backend runs on jax")
    if backend == "numba":
        pytest.importorskip("numba", reason="numba not installed")


# ---- a small MLP classifier ----------------------------------------------------------
def mlp_params(seed=0, d=16, h=32, v=8):
    rng = np.random.default_rng(seed)
    f = np.float32
    return {"w1": jnp.asarray((rng.normal(size=(d, h)) / np.sqrt(d)).astype(f)),
            "b1": jnp.asarray((0.1 * rng.normal(size=(h,))).astype(f)),
            "w2": jnp.asarray((rng.normal(size=(h, v)) / np.sqrt(h)).astype(f)),
            "b2": jnp.zeros(v)}


def mlp_data(seed=1, n=64, d=16, v=8):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.normal(size=(n, d)).astype(np.float32)),
            jnp.asarray(rng.integers(0, v, size=(n,)).astype(np.int32)))


def make_loss(pol):
    def loss(params, x, y):
        params, x = pol.cast_to_compute((params, x))              # f32 -> compute dtype
        h = nn.gelu(x @ params["w1"] + params["b1"])               # [N, H]
        logits = pol.cast_to_output(h @ params["w2"] + params["b2"])   # [N, V] in f32
        logp = nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1))
    return loss


F32 = precision.policy("float32")
MIXED = {BF16: precision.policy("params=float32,compute=bfloat16,output=float32"),
         F16: precision.policy("params=float32,compute=float16,output=float32")}


def reference_f32():
    x, y = mlp_data()
    return fnad.value_and_grad(make_loss(F32))(mlp_params(), x, y)


# ---- policies and casting -------------------------------------------------------------
def test_policy_parsing():
    p = precision.policy("params=float32,compute=bfloat16,output=float32")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == (np.float32, BF16, np.float32)
    assert str(p) == "params=float32,compute=bfloat16,output=float32"
    assert precision.policy(str(p)) == p
    assert precision.get_policy("p=f32,c=half,o=f32") == (np.float32, F16, np.float32)
    assert precision.policy("compute=bf16") == (np.float32, BF16, np.float32)
    assert precision.policy("params=bf16") == (BF16, BF16, np.float32)
    assert precision.policy("bf16") == (BF16, BF16, BF16)
    raises_with(lambda: precision.policy("params=float32,compute=float8"), "float8",
                "bfloat16", exc=ValueError)
    raises_with(lambda: precision.policy("weights=float32"), "weights", "compute",
                exc=ValueError)
    raises_with(lambda: precision.policy("c=bf16,compute=f16"), "twice", exc=ValueError)
    raises_with(lambda: precision.policy(np.float32), "string", exc=TypeError)


def test_cast_only_floating_leaves():
    tree = {"w": jnp.ones((2, 2)), "tok": jnp.arange(3), "mask": jnp.asarray([True, False]),
            "np": np.ones(2, np.float64), "py": 1.5, "none": None}
    out = MIXED[BF16].cast_to_compute(tree)
    assert out["w"].dtype == BF16 and out["np"].dtype == BF16
    assert out["tok"].dtype == np.int32 and out["mask"].dtype == np.bool_
    assert out["py"] == 1.5 and out["none"] is None
    back = MIXED[BF16].cast_to_param(out)
    assert back["w"].dtype == np.float32 and back["tok"].dtype == np.int32


def test_grads_come_back_in_param_dtype():
    x, y = mlp_data()
    loss, grads = fnad.value_and_grad(make_loss(MIXED[BF16]))(mlp_params(), x, y)
    assert loss.dtype == np.float32
    assert all(g.dtype == np.float32 for g in tree_util.tree_leaves(grads))
    jaxpr = str(fnad.make_jaxpr(make_loss(MIXED[BF16]))(mlp_params(), x, y))
    assert "bf16[64,32]" in jaxpr, jaxpr                 # the hidden layer runs in bf16


# ---- 16-bit compute on each backend ---------------------------------------------------
@pytest.mark.parametrize("low", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("backend", ["xla", "numpy", "numba"])
def test_mlp_loss_and_grad_under_policy(backend, low):
    """Every backend computes the 16-bit program (no error, no silent f32 fallback) and
    agrees with the float32 result to 16-bit accuracy."""
    _needs_backend(backend)
    x, y = mlp_data()
    ref_loss, ref_grads = reference_f32()
    fn = fnad.jit(fnad.value_and_grad(make_loss(MIXED[low])), backend=backend)
    loss, grads = fn(mlp_params(), x, y)
    assert loss.dtype == np.float32
    np.testing.assert_allclose(float(loss), float(ref_loss), **TOL16[low])
    scale = max(float(np.abs(np.asarray(g)).max()) for g in tree_util.tree_leaves(ref_grads))
    for k in ref_grads:
        assert grads[k].dtype == np.float32
        np.testing.assert_allclose(np.asarray(grads[k]), np.asarray(ref_grads[k]),
                                   rtol=TOL16[low]["rtol"], atol=TOL16[low]["rtol"] * scale,
                                   err_msg=f"{backend} {low} grad {k}")
    # the policy really ran in 16 bits: the result is not the float32 one
    assert float(loss) != float(ref_loss)


@pytest.mark.parametrize("low", [BF16, F16], ids=["bf16", "f16"])
def test_backends_agree_on_16bit_semantics(low):
    """numpy and numba emulate 16-bit floats as xla does (each op computes in f32 and
    rounds to 16 bits): their results agree with xla's to within one 16-bit rounding."""
    _needs_backend("xla")
    _needs_backend("numba")
    x, y = mlp_data()
    f = fnad.value_and_grad(make_loss(MIXED[low]))
    outs = {b: fnad.jit(f, backend=b)(mlp_params(), x, y) for b in ["xla", "numpy", "numba"]}
    ulp = 2.0 ** -8 if low == BF16 else 2.0 ** -11
    for b in ["numpy", "numba"]:
        np.testing.assert_allclose(float(outs[b][0]), float(outs["xla"][0]), rtol=4 * ulp)
        for k in outs[b][1]:
            g, gx = np.asarray(outs[b][1][k]), np.asarray(outs["xla"][1][k])
            np.testing.assert_allclose(g, gx, rtol=4 * ulp, atol=4 * ulp * np.abs(gx).max(),
                                       err_msg=f"{b} vs xla, grad {k}")
    # Elementwise chains round after every op on numpy and numba: bitwise equal results,
    # and equal to xla's where XLA rounds every op too.
    v = jnp.asarray(np.linspace(-3, 3, 257, dtype=np.float32)).astype(low)

    def run(f):
        return [np.asarray(fnad.jit(f, backend=b)(v)).astype(np.float32)
                for b in ["xla", "numpy", "numba"]]
    xla, numpy_, numba_ = run(lambda t: jnp.exp(t * 1.37 + 0.11) * t - jnp.sin(t) * 0.33)
    np.testing.assert_array_equal(numba_, numpy_)
    if xla_rounds_each_product(low):
        np.testing.assert_array_equal(numpy_, xla)
    else:   # one rounding fewer in t * 1.37 + 0.11: within the MLP's tolerance above
        np.testing.assert_allclose(numpy_, xla, rtol=4 * ulp, atol=4 * ulp * np.abs(xla).max())
    # Except that XLA's CPU compiler may keep an f16 intermediate in f32 inside a fusion
    # (here sin(t)/3 before the subtraction): one rounding fewer, so 1 ulp apart at most.
    xla, numpy_, numba_ = run(lambda t: t - jnp.sin(t) / 3.0)
    np.testing.assert_array_equal(numba_, numpy_)
    if low == BF16:
        np.testing.assert_array_equal(numpy_, xla)
    else:
        np.testing.assert_array_max_ulp(numpy_.astype(F16), xla.astype(F16), maxulp=1)


# ---- loss scaling ---------------------------------------------------------------------
def py_loss_scale(flags, s, period, factor, min_scale):
    """The state machine of DynamicLossScale.adjust, in plain Python."""
    c, out = 0, []
    for finite in flags:
        if finite:
            if c == period - 1:
                s2 = s * factor
                s, c = (s2 if np.isfinite(np.float32(s2)) else s), 0
            else:
                c += 1
        else:
            s, c = max(s / factor, min_scale), 0
        out.append((s, c))
    return out


def test_dynamic_loss_scale_state_machine():
    rng = np.random.default_rng(0)
    flags = [bool(f) for f in rng.random(60) > 0.2] + [True] * 8 + [False] * 20
    ls0 = precision.dynamic_loss_scale(2.0 ** 10, period=3, factor=2, min_loss_scale=4.0)
    want = py_loss_scale(flags, 2.0 ** 10, 3, 2, 4.0)
    adjust = fnad.jit(lambda ls, f: ls.adjust(f))
    for step in [lambda ls, f: ls.adjust(jnp.asarray(f)), adjust]:
        ls = ls0
        for i, (f, (s, c)) in enumerate(zip(flags, want)):
            ls = step(ls, jnp.asarray(f))
            assert (float(ls.loss_scale), int(ls.counter)) == (s, c), f"step {i}"
            assert ls.loss_scale.dtype == np.float32 and ls.counter.dtype == np.int32
    assert {s for s, _ in want} >= {4.0, 2.0 ** 10}       # it hit the floor and grew back


def test_dynamic_loss_scale_halves_on_inf_and_grows_after_period():
    ls = precision.dynamic_loss_scale(2.0 ** 15, period=2)
    ls = ls.adjust(precision.all_finite({"g": jnp.asarray([1.0, np.inf])}))
    assert (float(ls.loss_scale), int(ls.counter)) == (2.0 ** 14, 0)
    ls = ls.adjust(precision.all_finite({"g": jnp.asarray([1.0, np.nan])}))
    assert float(ls.loss_scale) == 2.0 ** 13
    ls = ls.adjust(jnp.asarray(True))
    assert (float(ls.loss_scale), int(ls.counter)) == (2.0 ** 13, 1)
    ls = ls.adjust(jnp.asarray(True))
    assert (float(ls.loss_scale), int(ls.counter)) == (2.0 ** 14, 0)
    big = precision.DynamicLossScale(jnp.asarray(np.finfo(np.float32).max / 1.5, np.float32),
                                     period=1)
    assert float(big.adjust(jnp.asarray(True)).loss_scale) == float(big.loss_scale)  # no inf
    raises_with(lambda: ls.adjust(jnp.ones(2, dtype=bool)), "bool scalar", exc=TypeError)


def test_scale_unscale_and_static_and_noop():
    grads = {"w": jnp.asarray([3.0, -1.5]), "i": jnp.arange(2), "h": jnp.ones(2, jnp.float16)}
    for ls in [precision.static_loss_scale(2.0 ** 12), precision.dynamic_loss_scale(2.0 ** 12)]:
        scaled = ls.scale(grads)
        np.testing.assert_array_equal(np.asarray(scaled["w"]), [3.0 * 4096, -1.5 * 4096])
        assert scaled["i"].dtype == np.int32 and scaled["h"].dtype == F16
        back = ls.unscale(scaled)
        for k in grads:
            assert back[k].dtype == grads[k].dtype
            np.testing.assert_array_equal(np.asarray(back[k]), np.asarray(grads[k]))
        assert ls.adjust(jnp.asarray(False)).loss_scale is not None
    s = precision.static_loss_scale(8.0)
    assert float(s.adjust(jnp.asarray(False)).loss_scale) == 8.0       # static never moves
    noop = precision.NoOpLossScale()
    assert noop.scale(grads) is grads and noop.unscale(grads) is grads
    assert float(noop.loss_scale) == 1.0
    raises_with(lambda: precision.static_loss_scale(0.0), "> 0", exc=ValueError)
    raises_with(lambda: precision.dynamic_loss_scale(2.0, period=0), "period", exc=ValueError)


def test_all_finite_and_select_tree():
    assert bool(precision.all_finite({"a": jnp.ones(3), "i": jnp.arange(3)}))
    assert not bool(precision.all_finite([jnp.ones(3), jnp.asarray([np.nan])]))
    assert not bool(precision.all_finite({"h": jnp.asarray([np.inf], jnp.bfloat16)}))
    a, b = {"x": jnp.ones(2), "n": jnp.asarray(3)}, {"x": jnp.zeros(2), "n": jnp.asarray(5)}
    out = fnad.jit(precision.select_tree)(jnp.asarray(False), a, b)
    assert float(out["x"][0]) == 0.0 and int(out["n"]) == 5


def test_loss_scaling_rescues_f16_underflow():
    """A loss whose f16 cotangents underflow: without scaling the gradient is 0, with a
    2^15 loss scale it matches float32."""
    pol = precision.policy("params=float32,compute=float16,output=float32")
    x = jnp.asarray(np.linspace(0.5, 2.0, 8, dtype=np.float32))

    def loss(w):
        h = pol.cast_to_compute(w) * pol.cast_to_compute(x)              # [8] in f16
        return 1e-8 * jnp.sum(pol.cast_to_output(h))                     # d/dh = 1e-8

    w = jnp.ones(8)
    g_plain = fnad.grad(loss)(w)
    assert not np.any(np.asarray(g_plain)), "1e-8 should flush to zero in float16"
    ls = precision.dynamic_loss_scale(2.0 ** 15)
    g = ls.unscale(fnad.grad(lambda w: ls.scale(loss(w)))(w))
    np.testing.assert_allclose(np.asarray(g), 1e-8 * np.asarray(x), rtol=2e-3)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("backend", ["xla", "numpy"])
def test_f16_train_step_skips_nonfinite_updates(backend):
    """A jitted f16 step with a loss scale so large the scaled backward pass overflows: the
    step is skipped (params and optimizer state kept) and S halves until grads are finite,
    after which Adam moves the params."""
    _needs_backend(backend)
    pol = MIXED[F16]
    loss_fn = make_loss(pol)
    x, y = mlp_data()
    tx = optim.adam(1e-2)

    def train_step(params, opt_state, ls):
        loss, grads = fnad.value_and_grad(lambda p: ls.scale(loss_fn(p, x, y)))(params)
        grads = ls.unscale(grads)
        finite = precision.all_finite(grads)
        updates, new_opt = tx.update(grads, opt_state, params)
        params = precision.select_tree(finite, optim.apply_updates(params, updates), params)
        opt_state = precision.select_tree(finite, new_opt, opt_state)
        return params, opt_state, ls.adjust(finite), finite

    step = fnad.jit(train_step, backend=backend)
    params = mlp_params()
    opt_state = tx.init(params)
    ls = precision.dynamic_loss_scale(2.0 ** 24, period=1000)    # f16 max is 65504
    history = []
    for _ in range(14):
        new_params, opt_state, ls, finite = step(params, opt_state, ls)
        moved = any(np.any(np.asarray(a) != np.asarray(b)) for a, b in
                    zip(tree_util.tree_leaves(new_params), tree_util.tree_leaves(params)))
        assert moved == bool(finite), "params must move exactly on finite steps"
        history.append((bool(finite), float(ls.loss_scale), int(opt_state[0].count)))
        params = new_params
    skipped = [h for h in history if not h[0]]
    assert skipped, history                                     # some steps overflowed ...
    assert history[-1][0], history                              # ... then it recovered
    n_skip = len(skipped)
    assert history[n_skip - 1][1] == 2.0 ** (24 - n_skip)     # halved once per skipped step
    assert history[-1][2] == len(history) - n_skip             # adam counted finite steps only
    assert all(not f for f, _, _ in history[:n_skip])          # skips come first, then finite

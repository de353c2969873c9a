"""fnad.passes.cost (what `jit(f).lower(x).compile().cost_analysis()` returns): flops and
transcendentals against XLA's own counts (jax's cost_analysis), sub-programs counted as
they run, and bytes as the unfused program moves them."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax
from fnad.passes.cost import cost_analysis

X = np.ones((4, 8), np.float32)
CASES = {
    "add": lambda np_, a: a + a,
    "mul by scalar": lambda np_, a: a * 3.0,
    "exp": lambda np_, a: np_.exp(a),
    "sqrt": lambda np_, a: np_.sqrt(a),
    "tanh of a product": lambda np_, a: np_.tanh(a @ a.T),
    "sum": lambda np_, a: a.sum(),
    "sum over axis 0": lambda np_, a: a.sum(0),
    "max": lambda np_, a: a.max(1),
    "compare": lambda np_, a: a > 1,
    "cube": lambda np_, a: a ** 3,
    "convert": lambda np_, a: a.astype(np_.int32),
    "transpose": lambda np_, a: a.T,
    "batched product": lambda np_, a: np_.einsum("bij,bjk->bik", a.reshape(2, 2, 8),
                                                  a.reshape(2, 8, 2)),
}


def _ours(f, *args):
    return fnad.jit(f).lower(*args).compile().cost_analysis()


@pytest.mark.parametrize("name", sorted(CASES))
def test_flops_and_transcendentals_match_xla(name):
    jax = pytest.importorskip("jax", reason="the oracle is XLA's cost analysis, through jax")
    import jax.numpy as jnp
    ours = _ours(lambda a: CASES[name](fnp, a), X)
    theirs = jax.jit(lambda a: CASES[name](jnp, a)).lower(X).compile().cost_analysis()
    theirs = theirs[0] if isinstance(theirs, list) else theirs
    assert ours["flops"] == theirs.get("flops", 0.0), (ours, theirs)
    assert ours["transcendentals"] == theirs.get("transcendentals", 0.0), (ours, theirs)


def test_counts_without_jax():
    assert _ours(lambda a, b: a @ b, X, X.T) == {
        "flops": 2 * 4 * 4 * 8, "transcendentals": 0.0,
        "bytes accessed": (32 + 32 + 16) * 4}
    assert _ours(lambda a: fnp.exp(a) + 1.0, X)["transcendentals"] == 32
    assert _ours(lambda a: a ** -2, X)["flops"] == 2 * 32          # a multiply, a divide
    assert fnad.jit(lambda a: a.sum()).lower(X).cost_analysis()["flops"] == 31
    assert cost_analysis(fnad.make_jaxpr(lambda a: a * a)(X))["flops"] == 32   # any jaxpr


def test_sub_programs_count_as_they_run():
    body = _ours(lambda a: a * 2.0 + 1.0, X)["flops"]                       # 64
    with fnad.config.override(jax_hoist_scans=False):   # (else the loop's work moves out)
        scanned = _ours(lambda xs: lax.scan(lambda c, a: (c + (a * 2.0 + 1.0).sum(), None),
                                            0.0, xs)[0], np.ones((5, 4, 8), np.float32))
    assert scanned["flops"] == 5 * (body + 31 + 1)                 # body, its sum, the carry
    cheap, dear = (lambda a: a + 1.0), (lambda a: fnp.tanh(a @ a.T)[:, :1].repeat(8, 1))
    both, alone = _ours(lambda p, a: lax.cond(p, dear, cheap, a), True, X), _ours(dear, X)
    assert both["flops"] == alone["flops"] + 1            # + the predicate made an index
    assert both["transcendentals"] == alone["transcendentals"] == 16
    inner = fnad.jit(lambda a: a * a)
    assert _ours(lambda a: inner(a) + 1.0, X)["flops"] == 64       # a nested jit's body
    once = _ours(lambda a: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0),
                                          (0, a))[1], X)
    assert once["flops"] == 1 + 1 + 32                              # cond, i + 1, c * 2


def test_a_train_step_counts_its_products():
    """The MLP step of benchmarks/mlp_step.py at a small batch: its flops are those of the
    products of the forward and backward passes plus a few per element."""
    w1, w2 = np.ones((16, 8), np.float32), np.ones((8, 4), np.float32)
    x = np.ones((32, 16), np.float32)

    def loss(w1, w2, x):
        return fnad.nn.log_softmax(fnad.nn.relu(x @ w1) @ w2).sum()
    flops = _ours(fnad.grad(loss, argnums=(0, 1)), w1, w2, x)["flops"]
    forward = 2 * 32 * 16 * 8 + 2 * 32 * 8 * 4                    # x @ w1, h @ w2
    backward = 2 * 32 * 4 * 8 + 2 * 8 * 32 * 4 + 2 * 16 * 32 * 8   # dh, dw2, dw1 (no dx)
    assert forward + backward <= flops <= (forward + backward) * 1.1, flops


CONVOLUTIONS = {                                       # lhs shape, rhs shape, params
    "valid": ((2, 3, 9, 8), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="VALID")),
    "same, strided, grouped": ((2, 6, 9, 8), (4, 3, 3, 2), dict(
        window_strides=(2, 1), padding="SAME", feature_group_count=2)),
    "batch groups": ((4, 3, 9, 8), (6, 3, 3, 2), dict(
        window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    "dilated, cropped": ((2, 3, 9, 8), (4, 3, 3, 2), dict(
        window_strides=(2, 1), padding=((2, -1), (1, 3)), lhs_dilation=(2, 1),
        rhs_dilation=(1, 3))),
}


@pytest.mark.parametrize("name", sorted(CONVOLUTIONS))
def test_convolution_flops_match_xla(name):
    """XLA counts only the window taps that land on an input element, not on a pad or a
    hole of lhs's dilation."""
    jax = pytest.importorskip("jax", reason="the oracle is XLA's cost analysis, through jax")
    ls, rs, params = CONVOLUTIONS[name]
    x, w = np.ones(ls, np.float32), np.ones(rs, np.float32)
    ours = _ours(lambda x, w: lax.conv_general_dilated(x, w, **params), x, w)
    theirs = jax.jit(lambda x, w: jax.lax.conv_general_dilated(x, w, **params)).lower(
        x, w).compile().cost_analysis()
    theirs = theirs[0] if isinstance(theirs, list) else theirs
    assert ours["flops"] == theirs["flops"], (ours, theirs)


WINDOWS = {                                            # operand shape, computation, params
    "max pool 2x2 stride 2": ((2, 8, 8, 3), "max", dict(
        window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1), padding="VALID")),
    "avg pool 3x3 stride 2 same": ((2, 9, 9, 3), "add", dict(
        window_dimensions=(1, 3, 3, 1), window_strides=(1, 2, 2, 1), padding="SAME")),
    "min, dilated, cropped": ((6, 9), "min", dict(
        window_dimensions=(2, 3), window_strides=(2, 1), padding=((-1, 1), (2, -1)),
        base_dilation=(2, 1), window_dilation=(1, 2))),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_reduce_window_flops_match_xla(name):
    """XLA counts K - 1 combines per output of a K-element window, pads and holes too."""
    jax = pytest.importorskip("jax", reason="the oracle is XLA's cost analysis, through jax")
    shape, op, params = WINDOWS[name]
    x = np.ones(shape, np.float32)
    init = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
    ours = _ours(lambda x: lax.reduce_window(x, init, getattr(lax, op), **params), x)
    theirs = jax.jit(lambda x: jax.lax.reduce_window(x, init, getattr(jax.lax, op), **params)
                     ).lower(x).compile().cost_analysis()
    theirs = theirs[0] if isinstance(theirs, list) else theirs
    assert ours["flops"] == theirs["flops"], (ours, theirs)
    assert ours["transcendentals"] == theirs.get("transcendentals", 0.0), (ours, theirs)

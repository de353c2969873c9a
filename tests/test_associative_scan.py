"""lax.associative_scan: against a Python loop (every length 1..9, both axes, reverse, a
non-commutative fn on a pytree), against jax (values and gradients), under jit and vmap,
and its errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
from fnad import lax

rng = np.random.default_rng(0)


def affine(first, second):
    """Composing h -> a·h + b maps (first, then second): a linear recurrence's step."""
    a1, b1 = first
    a2, b2 = second
    return a1 * a2, b1 * a2 + b2


def loop_scan(fn, elems: list, reverse: bool = False) -> list:
    """The oracle: elems[0] ⊕ ... ⊕ elems[i] one step at a time (reverse: from the end,
    the later element as fn's first operand, as jax's rule)."""
    order = range(len(elems) - 1, -1, -1) if reverse else range(len(elems))
    out, acc = [None] * len(elems), None
    for i in order:
        acc = elems[i] if acc is None else fn(acc, elems[i])
        out[i] = acc
    return out


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("reverse", [False, True])
def test_sums_and_maxima_match_a_loop(n, reverse):
    x = rng.standard_normal((n, 3)).astype(np.float32)
    got = lax.associative_scan(fnp.add, x, reverse=reverse)
    want = np.cumsum(x[::-1], 0)[::-1] if reverse else np.cumsum(x, 0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    got = lax.associative_scan(fnp.maximum, x.T, reverse=reverse, axis=1)
    want = np.stack(loop_scan(np.maximum, list(x), reverse)).T
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_non_commutative_fn_on_a_pytree(n, reverse):
    a = rng.uniform(0.5, 1.0, (n, 2)).astype(np.float32)
    b = rng.standard_normal((n, 2)).astype(np.float32)
    got_a, got_b = lax.associative_scan(affine, (a, b), reverse=reverse)
    want = loop_scan(affine, list(zip(a, b)), reverse)
    np.testing.assert_allclose(np.asarray(got_a), np.stack([w[0] for w in want]), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_b), np.stack([w[1] for w in want]), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_values_and_gradients_match_jax(reverse):
    jax = pytest.importorskip("jax", reason="the oracle is jax")
    a = rng.uniform(0.5, 1.0, (7, 3)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)

    def loss(lib, a, b):
        _, h = lib.lax.associative_scan(affine, (a, b), reverse=reverse)
        return (h * h).sum()
    ours = traced(fnad.value_and_grad(lambda a, b: loss(fnad, a, b), argnums=(0, 1)))(a, b)
    theirs = jax.value_and_grad(lambda a, b: loss(jax, a, b), argnums=(0, 1))(a, b)
    for o, t in zip(fnad.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=2e-5, atol=1e-5)


def test_under_vmap_and_jit():
    x = rng.standard_normal((4, 6)).astype(np.float32)
    got = traced(fnad.vmap(lambda row: lax.associative_scan(fnp.add, row)))(x)
    np.testing.assert_allclose(np.asarray(got), np.cumsum(x, 1), rtol=1e-5, atol=1e-6)
    got = fnad.vmap(lambda col: lax.associative_scan(fnp.multiply, col), in_axes=1,
                    out_axes=1)(x)
    np.testing.assert_allclose(np.asarray(got), np.cumprod(x, 0), rtol=1e-5, atol=1e-6)


def test_errors():
    x = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="no arrays"):
        lax.associative_scan(fnp.add, ())
    with pytest.raises(ValueError, match="one length along axis 0"):
        lax.associative_scan(affine, (x, np.ones((4, 2), np.float32)))
    with pytest.raises(ValueError, match="axis 2 is not an axis"):
        lax.associative_scan(fnp.add, x, axis=2)
    with pytest.raises(ValueError, match="axis 0 is not an axis"):
        lax.associative_scan(fnp.add, np.float32(1.0))
    with pytest.raises(TypeError, match="must return the structure of elems"):
        lax.associative_scan(lambda p, q: p[0], (x, x))

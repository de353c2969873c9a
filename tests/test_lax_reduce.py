"""lax.reduce against jax.lax.reduce: monoids with their identity become the reduce_*
primitives; any other computation (a non-identity init, a Python function, a pytree of
operands such as an argmax's (value, index) pairs) is a pairwise tree combined with the
init once; gradients, jit and vmap through it; the errors."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
X = np.arange(1.0, 25.0, dtype=np.float32).reshape(2, 3, 4) / 7.0

CASES = {  # name: (fnad computation, jax's, init, dimensions)
    "add, identity": (lax.add, "add", 0.0, (1,)),
    "max, identity": (lax.max, "max", -np.inf, (0, 2)),
    "operator.mul": (operator.mul, operator.mul, 1.0, (0, 1, 2)),
    "a function, init 1": (lambda a, b: a + b, lambda a, b: a + b, 1.0, (0,)),
    "product, init 2, odd length": (lambda a, b: a * b, lambda a, b: a * b, 2.0, (1,)),
}


@needs_jax
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_jax(name):
    comp, jcomp, init, dims = CASES[name]
    jcomp = getattr(jax.lax, jcomp) if isinstance(jcomp, str) else jcomp
    np.testing.assert_allclose(lax.reduce(X, init, comp, dims),
                               jax.lax.reduce(X, init, jcomp, dims), rtol=1e-6)
    if name.startswith("max"):
        return                                        # (jax's generic reduce: no reverse mode)
    ours = fnad.grad(lambda x: lax.reduce(x, init, comp, dims).sum())(X)
    theirs = jax.grad(lambda x: jax.lax.reduce(x, init, jcomp, dims).sum())(X)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_monoids_with_their_identity_bind_one_primitive():
    text = str(fnad.make_jaxpr(lambda x: lax.reduce(x, 0.0, lax.add, (1,)))(X))
    assert "reduce_sum" in text and "add" not in text.replace("reduce_sum", "")
    text = str(fnad.make_jaxpr(lambda x: lax.reduce(x, 1.0, lax.add, (1,)))(X))
    assert "reduce_sum" not in text                   # another init: the general path


@needs_jax
def test_an_argmax_by_a_pytree_of_operands_matches_jax():
    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 9, 3]], np.float32)     # a tie in row 1
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), x.shape)

    def pick(xp):
        return lambda a, b: (xp.maximum(a[0], b[0]), xp.where(a[0] >= b[0], a[1], b[1]))
    ours = lax.reduce((x, idx), (-np.inf, np.int32(0)), pick(fnp), (1,))
    theirs = jax.lax.reduce((x, idx), (-np.inf, np.int32(0)), pick(jnp), (1,))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_under_jit_and_vmap_and_with_an_empty_axis():
    f = lambda x: lax.reduce(x, 0.0, lambda a, b: a + b, (0,))         # noqa: E731
    np.testing.assert_allclose(fnad.jit(f)(X), X.sum(0), rtol=1e-6)
    np.testing.assert_allclose(fnad.vmap(f)(X), X.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(
        lax.reduce(np.zeros((0, 3), np.float32), 5.0, lambda a, b: a + b, (0,)), [5.0] * 3)


@pytest.mark.parametrize("call, exc, message", [
    (lambda: lax.reduce(X, 0.0, lax.add, (3,)), ValueError, "must be distinct and in range"),
    (lambda: lax.reduce((X, X[0]), (0.0, 0.0), lax.add, (0,)), ValueError,
     "must have equal shapes"),
    (lambda: lax.reduce((X, X), 0.0, lax.add, (0,)), ValueError, "the same structure"),
    (lambda: lax.reduce(X, np.float16(0), lambda a, b: a + b, (0,)), TypeError,
     "init_value has dtype float16 but the operand has dtype float32"),
    (lambda: lax.reduce(X, 0.0, lambda a, b: (a, b), (0,)), TypeError,
     "computation must return the structure of the operands"),
])
def test_errors_say_what_is_wrong(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


def test_an_init_value_that_does_not_fit_the_operands_dtype_is_an_error():
    with pytest.raises(TypeError, match="cannot be represented in the operand's dtype int32"):
        lax.reduce(np.arange(6, dtype=np.int32), -np.inf, lax.max, (0,))
    assert int(lax.reduce(np.arange(6, dtype=np.int32), 0, lax.add, (0,))) == 15
    out = lax.reduce(np.arange(1, 5, dtype=np.int8), 1, lambda a, b: a * b, (0,))
    assert out.dtype == np.int8 and int(out) == 24       # the Python 1 taken as an int8


def test_init_values_must_be_scalars():
    with pytest.raises(ValueError, match=r"init values must be scalars, got shape \(4,\)"):
        lax.reduce(X, np.zeros(4, np.float32), lax.add, (0,))

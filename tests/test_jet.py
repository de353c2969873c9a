"""fnad.experimental.jet against jax.experimental.jet (values of the primal and of every
term, both scalings), and, where jax's jet has no rule (custom_jvp functions such as relu
and softplus, reduce_prod, scan), against nested fnad.jvp's along the curve; composition
with jit and grad; errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad.experimental.jet import jet

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle here")
jn = jax.numpy
from jax.experimental.jet import jet as jax_jet  # noqa: E402

RNG = np.random.default_rng(3)


def draw(shapes, order, scale=0.5):
    ps = tuple(RNG.uniform(0.3, 1.5, s).astype(np.float32) for s in shapes)
    ss = tuple([(RNG.standard_normal(s) * scale).astype(np.float32) for _ in range(order)]
               for s in shapes)
    return ps, ss


def assert_close(got, want, rtol=1e-4, atol=1e-5):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# (name, fnad function, jax function, argument shapes, order)
CASES = [
    ("polynomial", lambda x: x * x * x + 2 * x, lambda x: x * x * x + 2 * x, [(4,)], 4),
    ("exp log", lambda x: fnp.exp(x) + fnp.log(x), lambda x: jn.exp(x) + jn.log(x), [(4,)], 5),
    ("sin cos tanh", lambda x: fnp.sin(x) * fnp.cos(x) + fnp.tanh(x),
     lambda x: jn.sin(x) * jn.cos(x) + jn.tanh(x), [(4,)], 4),
    ("logistic sqrt", lambda x: fnad.nn.sigmoid(x) / fnp.sqrt(x),
     lambda x: jax.nn.sigmoid(x) / jn.sqrt(x), [(4,)], 4),
    ("div, pow of two arrays", lambda x, y: x / y + x ** y, lambda x, y: x / y + x ** y,
     [(4,), (4,)], 3),
    ("erf and integer_pow (nested jvps)", lambda x: fnad.scipy.special.erf(x ** 3),
     lambda x: jax.scipy.special.erf(x ** 3), [(4,)], 3),
    ("matmul mlp", lambda a, b: fnp.tanh(a @ b).sum(axis=0),
     lambda a, b: jn.tanh(a @ b).sum(axis=0), [(3, 4), (4, 2)], 3),
    ("max and sum reductions", lambda x: fnp.max(x, axis=1) + fnp.sum(fnp.exp(x), axis=0)[0],
     lambda x: jn.max(x, axis=1) + jn.sum(jn.exp(x), axis=0)[0], [(3, 4)], 3),
    ("softmax, logsumexp", lambda x: fnad.nn.softmax(x) + fnad.nn.logsumexp(x, axis=-1,
                                                                              keepdims=True),
     lambda x: jax.nn.softmax(x) + jax.nn.logsumexp(x, axis=-1, keepdims=True), [(2, 5)], 3),
    ("indexing, concatenate", lambda x: x[1:3] * x[::-1][:2] + fnp.concatenate([x, x])[3],
     lambda x: x[1:3] * x[::-1][:2] + jn.concatenate([x, x])[3], [(5,)], 3),
    ("jit inside", lambda x: fnad.jit(lambda y: fnp.sin(y) * y)(x),
     lambda x: jax.jit(lambda y: jn.sin(y) * y)(x), [(5,)], 3),
    ("gelu, where, abs, min", lambda x: fnp.where(x > 1, fnad.nn.gelu(x), fnp.abs(x - 1.0))
     + fnp.minimum(x, x[::-1]), lambda x: jn.where(x > 1, jax.nn.gelu(x), jn.abs(x - 1.0))
     + jn.minimum(x, x[::-1]), [(6,)], 3),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("scaled", [True, False], ids=["factorial-scaled", "coefficients"])
def test_matches_jax_jet(case, scaled):
    _, f, jf, shapes, order = case
    ps, ss = draw(shapes, order)
    want = jax_jet(jf, ps, ss, factorial_scaled=scaled)
    got = jet(f, ps, ss, factorial_scaled=scaled)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1], rtol=2e-4)


def nested_jvp_terms(f, x, terms):
    """d^k/dt^k f(x + Σ_j terms[j] t^j / j!) at t = 0, k = 1..K, by nested jvps in float64."""
    def curve(t):
        return f(x + sum(term * t ** (j + 1) / math.factorial(j + 1)
                         for j, term in enumerate(terms)))
    fns = [curve]
    for _ in terms:
        prev = fns[-1]
        fns.append(lambda t, prev=prev: fnad.jvp(prev, (t,), (1.0,))[1])
    return [np.asarray(fn(0.0)) for fn in fns[1:]]


BEYOND_JAX = [
    ("relu and softplus (custom_jvp)", lambda x: fnad.nn.relu(x - 1.0) * fnad.nn.softplus(x)),
    ("reduce_prod, cumsum", lambda x: fnp.cumsum(x) * fnp.prod(x)),
    ("scan", lambda x: fnad.lax.scan(lambda c, a: (c * a + fnp.sin(c), c), x[0], x)[0]),
]


@pytest.mark.parametrize("case", BEYOND_JAX, ids=[c[0] for c in BEYOND_JAX])
def test_beyond_jax_matches_nested_jvps(case):
    _, f = case
    with fnad.enable_x64():
        x = RNG.uniform(0.3, 1.5, 4)
        terms = [RNG.standard_normal(4) * 0.5 for _ in range(3)]
        primal, series = jet(f, (x,), (terms,))
        np.testing.assert_allclose(np.asarray(primal), np.asarray(f(x)), rtol=1e-12)
        for got, want in zip(series, nested_jvp_terms(f, x, terms)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-12)


def test_pytrees_jit_and_grad_compose():
    def f(p):
        return {"a": fnp.exp(p["x"]) * p["y"], "b": (fnp.sin(p["x"]),)}
    p = {"x": np.float32(0.3), "y": np.float32(2.0)}
    s = [{"x": np.float32(1.0), "y": np.float32(0.0)}, {"x": np.float32(0.0),
                                                        "y": np.float32(0.0)}]
    primal, series = jet(f, (p,), (s,))
    assert set(series) == {"a", "b"} and len(series["a"]) == 2 and len(series["b"][0]) == 2
    np.testing.assert_allclose(np.asarray(series["a"][1]), 2 * np.exp(0.3), rtol=1e-6)
    second = fnad.jit(lambda x: jet(fnp.sin, (x,), ([1.0, 0.0],))[1][1])
    np.testing.assert_allclose(np.asarray(second(np.float32(0.4))), -np.sin(0.4), rtol=1e-6)
    third = fnad.grad(lambda x: jet(fnp.exp, (x,), ([1.0, 0.0],))[1][1])   # d/dx e^x
    np.testing.assert_allclose(np.asarray(third(np.float32(0.4))), np.exp(0.4), rtol=1e-6)


def test_integer_outputs_and_constants_have_zero_terms():
    x = np.float32(0.7)
    primal, series = jet(lambda v: (fnp.floor(v * 10), v * 0 + 3.0), (x,), ([1.0, 2.0],))
    assert [float(t) for t in series[0]] == [0.0, 0.0]
    assert [float(t) for t in series[1]] == [0.0, 0.0]


def test_errors():
    with pytest.raises(TypeError, match="same length"):
        jet(fnp.sin, (1.0, 2.0), ([1.0],))
    with pytest.raises(ValueError, match="same number of terms"):
        jet(lambda a, b: a * b, (1.0, 2.0), ([1.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="shape"):
        jet(fnp.sin, (np.ones(3, np.float32),), ([np.ones(2, np.float32)],))
    with pytest.raises(TypeError, match="list of terms"):
        jet(fnp.sin, (1.0,), (1.0,))

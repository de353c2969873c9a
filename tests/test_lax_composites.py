"""jax.lax functions fnad builds from its primitives (fnad/lax.py, "composites") against
jax.lax: values, gradients and the errors; and the `<name>_p` exports."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
from fnad import lax

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
jl = jax.lax
RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 6)).astype(np.float32)

CASES = {  # name: f(lax module, x)
    "reciprocal": lambda L, x: L.reciprocal(x + 3.0),
    "split": lambda L, x: L.split(x, (1, 2, 3), axis=1),
    "split axis -2": lambda L, x: L.split(x, (3, 1), axis=-2),
    "tile": lambda L, x: L.tile(x, (2, 3)),
    "stack": lambda L, x: L.stack([x, 2 * x, x * x], axis=1),
    "stack axis -1": lambda L, x: L.stack([x, 2 * x], axis=-1),
    "unstack": lambda L, x: L.unstack(x, axis=1),
    "index_take": lambda L, x: L.index_take(x, (np.array([0, 3, -1, 5]),
                                                np.array([1, 7, 2, 0])), (0, 1)),
    "index_take one axis": lambda L, x: L.index_take(x, (np.array([2, 0]),), (1,)),
    "scatter_sub": lambda L, x: L.scatter_sub(
        x, np.array([[0], [2], [0]]), x[:3] * 2.0, L.ScatterDimensionNumbers(
            update_window_dims=(1,), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0,))),
    "broadcast_like": lambda L, x: L.broadcast_like(x[0], x),
    "approx_max_k": lambda L, x: L.approx_max_k(x, 3),
    "approx_min_k dim 0": lambda L, x: L.approx_min_k(x, 2, reduction_dimension=0),
    "ragged_dot": lambda L, x: L.ragged_dot(x, np.stack([np.eye(6, 3), np.ones((6, 3)),
                                                         -np.eye(6, 3)]).astype(np.float32),
                                            np.array([1, 2, 1], np.int32)),
    "ragged_dot, rows left over": lambda L, x: L.ragged_dot(
        x, np.stack([np.eye(6, 2), np.ones((6, 2))]).astype(np.float32),
        np.array([1, 2], np.int32)),
    "empty": lambda L, x: L.empty((2, 3), np.float32) * 0,
    "optimization_barrier": lambda L, x: L.optimization_barrier((x, 2 * x))[1],
    "composite": lambda L, x: L.composite(lambda a, b, *, k: L.sin(a) * b + k, "sinmul")(
        x, 2 * x, k=1.5),
    "scatter_apply": lambda L, x: L.scatter_apply(      # duplicates apply func again
        x, np.array([[0], [2], [0], [7]]), lambda v: v * 2.0 + 1.0,
        L.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0,)), update_shape=(4, 6)),
    "scatter_apply clip": lambda L, x: L.scatter_apply(
        x, np.array([[1, 5], [3, -2]]), L.exp, L.ScatterDimensionNumbers(
            update_window_dims=(), inserted_window_dims=(0, 1),
            scatter_dims_to_operand_dims=(0, 1)), update_shape=(2,), mode="clip"),
}


def _flat(out):
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name):
    got, want = _flat(CASES[name](lax, X)), _flat(CASES[name](jl, X))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)   # sums in other orders


# jax does not differentiate scatter_apply or composite (fnad's composite: below)
@pytest.mark.parametrize("name", sorted(n for n in CASES if n not in ("empty", "composite")
                                        and not n.startswith("scatter_apply")))
def test_gradients_match_jax(name):
    def loss(L, np_):
        def f(x):
            outs = [o for o in jax.tree_util.tree_leaves(CASES[name](L, x))
                    if np_.issubdtype(o.dtype, np_.floating)]
            return sum(np_.sum(np_.sin(o)) for o in outs)
        return f
    import fnad.numpy as fnp
    import jax.numpy as jnp
    np.testing.assert_allclose(fnad.grad(loss(lax, fnp))(X), jax.grad(loss(jl, jnp))(X),
                               rtol=1e-5, atol=1e-6)


def test_composite_is_its_decomposition_under_transformations():
    tan = lax.composite(lambda x: lax.sin(x) / lax.cos(x), "tangent", version=1)
    x = X[0]
    np.testing.assert_allclose(fnad.grad(lambda v: fnad.numpy.sum(tan(v)))(x),
                               1 / np.cos(x) ** 2, rtol=1e-5)
    np.testing.assert_allclose(fnad.vmap(tan)(X), np.tan(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fnad.jit(tan)(x), np.tan(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="version"):
        lax.composite(np.sin, "s", version=-1)
    x = np.arange(3.0, dtype=np.float32)
    with pytest.raises(TypeError, match="same shape and dtype"):
        lax.scatter_apply(x, np.array([[0]]), lambda v: v[:1], lax.ScatterDimensionNumbers(
            (), (0,), (0,)), update_shape=(1,))


def test_shapes_and_collectives():
    assert lax.broadcast_shapes((3, 1), (1, 4), ()) == jl.broadcast_shapes((3, 1), (1, 4), ())
    with pytest.raises(ValueError, match="Incompatible shapes"):
        lax.broadcast_shapes((3,), (4,))
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    for body in (lambda L, v: L.pswapaxes(v, "i", 0),
                 lambda L, v: L.pshuffle(v, "i", [3, 0, 1, 2]),
                 lambda L, v: L.pbroadcast(v, "i", 2) if hasattr(L, "pbroadcast") else v):
        got = fnad.vmap(lambda v: body(lax, v), axis_name="i")(x)
        want = jax.vmap(lambda v: body(jl, v), axis_name="i")(x)
        np.testing.assert_allclose(got, want)
    got = fnad.vmap(lambda v: lax.pbroadcast(v, "i", 2), axis_name="i")(x)
    np.testing.assert_allclose(got, np.broadcast_to(x[2], x.shape))
    assert lax.platform_dependent(2.0, cpu=lambda v: v + 1, default=lambda v: v) == 3.0
    assert lax.platform_dependent(2.0, cuda=lambda v: v + 1, default=lambda v: v) == 2.0


def test_errors():
    with pytest.raises(ValueError, match="sum to the size 6"):
        lax.split(X, (1, 2), axis=1)
    with pytest.raises(ValueError, match="one non-negative entry per dimension"):
        lax.tile(X, (2,))
    with pytest.raises(ValueError, match="2 index arrays for 1 axes"):
        lax.index_take(X, (np.array([0]), np.array([0])), (0,))
    with pytest.raises(ValueError, match=r"expected lhs \[m, k\] and rhs \[g, k, n\]"):
        lax.ragged_dot(X, X, np.array([4]))
    with pytest.raises(NotImplementedError, match="no function for 'cpu'"):
        lax.platform_dependent(1.0, tpu=lambda v: v)


def test_primitives_are_exported_under_jax_names():
    assert lax.sin_p is fnad.primitives.elementwise.sin_p
    assert lax.psum_p.name == "psum" and lax.linear_solve_p.name == "custom_linear_solve"
    text = str(fnad.make_jaxpr(lambda x: lax.sin(x) * 2)(1.0))
    eqn_prims = [e.primitive for e in fnad.make_jaxpr(lambda x: lax.sin(x))(1.0).jaxpr.eqns]
    assert lax.sin_p in eqn_prims and "sin" in text

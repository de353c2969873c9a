"""lax.ragged_dot / lax.ragged_dot_general (primitives/ragged.py, fnad/lax.py): values of
all three kinds of ragged dim with batch, outer, inner and several contracting dims against
jax, eagerly and under jit on the numba and xla backends; derivatives against jax where jax
has them; vmap of every operand against a Python loop; dtypes; errors. The primitive's own
JVP (finite differences) and transposes (dot-product test) are in tests/specs/spec_ragged.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle here")
jl = jax.lax

f32 = np.float32
RNG = np.random.default_rng(7)


def normal(*shape):
    return RNG.standard_normal(shape).astype(f32)


def sizes(*shape, high=4):
    return RNG.integers(0, high, shape).astype(np.int32)


# (name, lhs, rhs, group_sizes, ((contract), (batch)), ragged dims, group dims)
CASES = [
    ("free: batch, outer, inner, two contracting, group dim in the middle",
     normal(2, 3, 6, 4, 5, 2), normal(2, 5, 3, 7, 2), sizes(2, 3, 3),
     (((4, 5), (1, 4)), ((0,), (0,))), [2], [2]),
    ("free: group_sizes [g] broadcast", normal(2, 3, 6, 4, 5, 2), normal(2, 5, 3, 7, 2),
     sizes(3), (((4, 5), (1, 4)), ((0,), (0,))), [2], [2]),
    ("free: ragged dim last, group dim last", normal(4, 9), normal(4, 5, 3), sizes(3),
     (((0,), (0,)), ((), ())), [1], [2]),
    ("contracting: batch, outer and inner contracting dims", normal(2, 3, 4, 6, 2),
     normal(2, 4, 6, 2, 5), sizes(2, 4, 3), (((2, 3, 4), (1, 2, 3)), ((0,), (0,))), [3], []),
    ("contracting: [g], no batch", normal(3, 8), normal(8, 5), sizes(4),
     (((1,), (0,)), ((), ())), [1], []),
    ("batch: the sizes change nothing", normal(5, 2, 3), normal(5, 3, 4), sizes(2),
     (((2,), (1,)), ((0,), (0,))), [0], []),
]
IDS = [c[0] for c in CASES]


def _dims(mod, case):
    return mod.RaggedDotDimensionNumbers(*case[4:])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_values_match_jax_eager_and_jitted_on_each_backend(case):
    _, lhs, rhs, gs, *_ = case
    want = np.asarray(jl.ragged_dot_general(lhs, rhs, gs, _dims(jl, case)))
    dims = _dims(lax, case)

    def f(a, b, s):
        return lax.ragged_dot_general(a, b, s, dims)
    np.testing.assert_allclose(np.asarray(f(lhs, rhs, gs)), want, rtol=1e-5, atol=1e-5)
    for backend in ("numba", "xla"):
        got = fnad.jit(f, backend=backend)(lhs, rhs, gs)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5,
                                   err_msg=backend)


def _directional_fd(f, args, direction, eps=1e-6):
    """(f(args + eps·d) - f(args - eps·d)) / 2eps in float64."""
    plus = f(*[a + eps * d for a, d in zip(args, direction)])
    minus = f(*[a - eps * d for a, d in zip(args, direction)])
    return (float(plus) - float(minus)) / (2 * eps)


@pytest.mark.parametrize("case", [c for c in CASES if c[5] != [0] or c[6]],
                         ids=[c[0] for c in CASES if c[5] != [0] or c[6]])
def test_gradients_match_jax_or_finite_differences(case):
    """Against jax.grad; jax 0.10 cannot differentiate the ragged-contracting mode, so there
    against a central difference along a random direction, in float64."""
    _, lhs, rhs, gs, *_ = case
    w = normal(*np.shape(jl.ragged_dot_general(lhs, rhs, gs, _dims(jl, case))))

    def ours(a, b):
        return (fnp.sin(lax.ragged_dot_general(a, b, gs, _dims(lax, case))) * w).sum()
    if case[5][0] not in case[4][0][0]:
        def theirs(a, b):
            return (jax.numpy.sin(jl.ragged_dot_general(a, b, gs, _dims(jl, case))) * w).sum()
        want = jax.grad(theirs, (0, 1))(lhs, rhs)
        for got in (fnad.grad(ours, (0, 1))(lhs, rhs),
                    fnad.jit(fnad.grad(ours, (0, 1)))(lhs, rhs)):
            for g, h in zip(got, want):
                np.testing.assert_allclose(np.asarray(g), np.asarray(h), rtol=1e-4, atol=1e-5)
        return
    with fnad.enable_x64():
        args = [a.astype(np.float64) for a in (lhs, rhs)]
        direction = [RNG.standard_normal(a.shape) for a in args]
        grads = fnad.jit(fnad.grad(ours, (0, 1)))(*args)
        along = sum(float((np.asarray(g) * d).sum()) for g, d in zip(grads, direction))
        np.testing.assert_allclose(along, _directional_fd(ours, args, direction), rtol=1e-6)


@pytest.mark.parametrize("mapped", [(0, None, None), (None, 0, None), (None, None, 0),
                                    (1, 0, 0), (0, 2, None)])
def test_vmap_of_each_operand_matches_a_loop(mapped):
    n = 3
    lhs, rhs, gs = normal(7, 3), normal(3, 3, 4), sizes(3)
    args = []
    for x, axis in zip((lhs, rhs, gs), mapped):
        if axis is None:
            args.append(x)
        else:
            stack = np.stack([x + i if x.dtype != np.int32 else (x + i) % 4
                              for i in range(n)])
            args.append(np.moveaxis(stack, 0, axis))
    got = fnad.vmap(lax.ragged_dot, in_axes=mapped)(*args)
    members = [[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, mapped)]
               for i in range(n)]
    want = np.stack([np.asarray(jl.ragged_dot(*m)) for m in members])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    nested = fnad.vmap(fnad.vmap(lax.ragged_dot, in_axes=(0, None, None)),
                       in_axes=(0, None, None))(np.stack([np.stack([lhs] * 2)] * 2), rhs, gs)
    np.testing.assert_allclose(np.asarray(nested)[1, 0], np.asarray(jl.ragged_dot(lhs, rhs, gs)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, pet", [(np.int32, None), (np.int8, np.int32),
                                        ("bfloat16", np.float32), (np.float16, None),
                                        (np.complex64, None)])
def test_dtypes_match_jax(dtype, pet):
    dt = jax.numpy.dtype(dtype)
    lhs = (normal(6, 3) * 3).astype(dt)
    rhs = (normal(2, 3, 4) * 3).astype(dt)
    gs = np.array([2, 3], np.int32)
    want = jl.ragged_dot(lhs, rhs, gs, preferred_element_type=pet)
    got = lax.ragged_dot(lhs, rhs, gs, preferred_element_type=pet)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float64 if dt.kind != "c" else complex),
                               np.asarray(want, np.float64 if dt.kind != "c" else complex),
                               rtol=2e-2)


def test_no_group_work_beyond_the_groups():
    """The rows form multiplies each row by its own group's matrix only: its jaxpr holds one
    ragged_dot_general and no [m, g, n] product of every row with every expert."""
    jaxpr = fnad.make_jaxpr(lax.ragged_dot)(normal(64, 8), normal(16, 8, 32), sizes(16))
    shapes = [tuple(v.aval.shape) for e in jaxpr.jaxpr.eqns for v in e.outvars]
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("ragged_dot_general") == 1
    assert all(np.prod(s) < 64 * 16 * 32 for s in shapes), shapes   # none [m, g, n]


def test_errors_say_what_is_wrong():
    lhs, rhs, gs = normal(6, 3), normal(2, 3, 4), np.array([2, 3], np.int32)
    with pytest.raises(ValueError, match="expected lhs \\[m, k\\] and rhs \\[g, k, n\\]"):
        lax.ragged_dot(lhs, rhs[0], gs)
    with pytest.raises(TypeError, match="group_sizes must be integers"):
        lax.ragged_dot(lhs, rhs, gs.astype(f32))
    with pytest.raises(ValueError, match="group_sizes \\(3,\\) has 3 groups, the rhs"):
        lax.ragged_dot(lhs, rhs, np.array([1, 2, 3], np.int32))
    with pytest.raises(ValueError, match="group_sizes must have shape"):
        lax.ragged_dot(lhs, rhs, np.array([[1, 2]], np.int32))
    with pytest.raises(ValueError, match="contracting dims of lhs"):
        lax.ragged_dot(lhs, normal(2, 4, 4), gs)
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(lhs, rhs, gs, group_offset=np.zeros(1, np.int32))
    free = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), [0], [])
    with pytest.raises(ValueError, match="rhs_group_dimensions must name one dim"):
        lax.ragged_dot_general(lhs, rhs, gs, free)
    with pytest.raises(TypeError, match="RaggedDotDimensionNumbers"):
        lax.ragged_dot_general(lhs, rhs, gs, "rows")
    with pytest.raises(ValueError, match="lhs_ragged_dimensions must name one dim"):
        lax.ragged_dot_general(lhs, rhs, gs, lax.RaggedDotDimensionNumbers(
            (((1,), (1,)), ((), ())), [5], [0]))

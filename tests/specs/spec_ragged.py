"""Specs of ragged_dot_general (lax.ragged_dot and lax.ragged_dot_general's two grouped
forms). The reference loops over the groups with np.matmul; the primitive is bilinear in
(lhs, rhs), so both are checked by the transpose dot-product test. group_sizes are drawn
in [0, 4): some groups are empty and some sums pass the ragged dim (clipped, as jax)."""
import numpy as np

from fnad import lax
from fnad.primitives import ragged as rg
from specs import Arg, Spec

f32, i32 = np.float32, np.int32


def _ends(sizes, m):
    ends = np.clip(np.cumsum(sizes.astype(np.int64), axis=-1), 0, m)
    return np.concatenate([np.zeros_like(ends[..., :1]), ends[..., :-1]], axis=-1), ends


def ragged_dot_ref(lhs, rhs, sizes):
    starts, ends = _ends(sizes, lhs.shape[0])
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.result_type(lhs, rhs))
    for j, (s, e) in enumerate(zip(starts, ends)):
        out[s:e] = lhs[s:e] @ rhs[j]
    return out


def contracting_ref(lhs, rhs, sizes):
    """lhs [b, m, r, k], rhs [b, r, k, n], ragged r (an inner k contracted whole) ->
    [g, b, m, n]."""
    b, g = lhs.shape[0], sizes.shape[-1]
    out = np.zeros((g, b, lhs.shape[1], rhs.shape[3]), np.result_type(lhs, rhs))
    for i in range(b):
        starts, ends = _ends(sizes[i], lhs.shape[2])
        for j, (s, e) in enumerate(zip(starts, ends)):
            out[j, i] = np.einsum("mrk,rkn->mn", lhs[i, :, s:e], rhs[i, s:e])
    return out


def _sizes(shape):
    return Arg(shape, i32, (0, 4))


ROWS = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), [0], [0])
CONTRACT = lax.RaggedDotDimensionNumbers((((2, 3), (1, 2)), ((0,), (0,))), [2], [])


def _jax_dims(jax, dims):
    return jax.lax.RaggedDotDimensionNumbers(*dims)


SPECS = [
    Spec(rg.ragged_dot_general_p, lambda l, r, s: lax.ragged_dot(l, r, s), ragged_dot_ref,
         (Arg((7, 3)), Arg((3, 3, 4)), _sizes((3,))),
         jax_fun=lambda jax, l, r, s: jax.lax.ragged_dot(l, r, s),
         linear=(0, 1), diff=(0, 1), name="ragged_dot"),
    Spec(rg.ragged_dot_general_p,
         lambda l, r, s: lax.ragged_dot_general(l, r, s, ROWS), ragged_dot_ref,
         (Arg((5, 2)), Arg((2, 2, 3)), Arg(domain=lambda rng: np.array([0, 9], i32))),
         jax_fun=lambda jax, l, r, s: jax.lax.ragged_dot_general(l, r, s, _jax_dims(jax, ROWS)),
         linear=(0, 1), diff=(0, 1), name="first-group-empty-sum-past-m"),
    Spec(rg.ragged_dot_general_p,
         lambda l, r, s: lax.ragged_dot_general(l, r, s, CONTRACT), contracting_ref,
         (Arg((2, 3, 6, 2)), Arg((2, 6, 2, 4)), _sizes((2, 3))),
         # jax 0.10 cannot differentiate this mode (no jax_fun: its values are compared in
         # tests/test_ragged.py; derivatives here against finite differences)
         linear=(0, 1), diff=(0, 1), name="ragged-contracting-batched"),
]

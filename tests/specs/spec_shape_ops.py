"""Specs of the shape primitives (and the lax wrappers built on them).

Start indices of the dynamic slices are int32 arguments (traced under jit/make_jaxpr),
drawn out of range on purpose: lax wraps a negative index once and then clamps the
block into bounds, and the NumPy references below do the same.
"""
import numpy as np

from fnad import lax
from fnad.primitives import shape_ops as so
from specs import Arg, Spec

f32, c64, i32, b = np.float32, np.complex64, np.int32, np.bool_


def _fixed(value):
    """An int32 index argument with a fixed value (a traced operand, not a literal)."""
    return Arg((), i32, lambda rng: np.array(value, i32))


IDX = Arg((), i32, (-9, 9))          # in range, wrapped-negative and clamped, at random


def _start(i, n, size):
    i = int(i)
    i = i + n if i < 0 else i
    return min(max(i, 0), n - size)


def _ds_ref(x, idx, sizes):
    starts = [_start(i, n, s) for i, n, s in zip(idx, x.shape, sizes, strict=True)]
    return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))]


def _dus_ref(x, u, idx):
    out = np.array(x, copy=True)
    starts = [_start(i, n, s) for i, n, s in zip(idx, x.shape, u.shape, strict=True)]
    out[tuple(slice(s, s + n) for s, n in zip(starts, u.shape, strict=True))] = u
    return out


def _pad_ref(x, v, config):
    """lax.pad in NumPy: dilate, pad the positive parts, cut off the negative parts."""
    for axis, (lo, hi, interior) in enumerate(config):
        n = x.shape[axis]
        if n and interior:
            idx = np.repeat(np.arange(1, n), interior)
            x = np.insert(x, idx, v, axis=axis)
        x = np.concatenate([np.full(x.shape[:axis] + (max(lo, 0),) + x.shape[axis + 1:], v,
                                    x.dtype), x,
                            np.full(x.shape[:axis] + (max(hi, 0),) + x.shape[axis + 1:], v,
                                    x.dtype)], axis=axis)
        stop = x.shape[axis] - max(-hi, 0)
        x = np.take(x, np.arange(max(-lo, 0), stop), axis=axis)
    return x


def _iota_ref(dtype, shape, dim):
    return np.broadcast_to(np.arange(shape[dim]).astype(dtype).reshape(
        [n if d == dim else 1 for d, n in enumerate(shape)]), shape)


BROADCAST_IN_DIM = [
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_in_dim(x, (3, 4, 5), (0, 2)),
         lambda x: np.broadcast_to(x[:, None, :], (3, 4, 5)), (Arg((3, 1)),),
         jax_fun=lambda jax, x: jax.lax.broadcast_in_dim(x, (3, 4, 5), (0, 2)), linear=(0,),
         name="stretch"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_in_dim(x, (2, 3), ()),
         lambda x: np.broadcast_to(x, (2, 3)), (Arg(()),),
         jax_fun=lambda jax, x: jax.lax.broadcast_in_dim(x, (2, 3), ()), linear=(0,),
         name="rank0"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_in_dim(x, (2, 0, 3), (1, 2)),
         lambda x: np.broadcast_to(x, (2, 0, 3)), (Arg((0, 3)),),
         jax_fun=lambda jax, x: jax.lax.broadcast_in_dim(x, (2, 0, 3), (1, 2)), linear=(0,),
         name="empty"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_in_dim(x, (2, 3), (1,)),
         lambda x: np.broadcast_to(x, (2, 3)), (Arg((3,), b),),
         jax_fun=lambda jax, x: jax.lax.broadcast_in_dim(x, (2, 3), (1,)), diff=(),
         name="bool"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_in_dim(x, (4, 2), (1,)),
         lambda x: np.broadcast_to(x, (4, 2)), (Arg((2,), c64),),
         jax_fun=lambda jax, x: jax.lax.broadcast_in_dim(x, (4, 2), (1,)), linear=(0,),
         name="c64"),
    Spec(so.broadcast_in_dim_p, lambda v: lax.full((2, 3), v), lambda v: np.full((2, 3), v),
         (Arg(()),), jax_fun=lambda jax, v: jax.lax.full((2, 3), v), linear=(0,), name="full"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.full_like(x, 2.5), lambda x: np.full_like(x, 2.5),
         (Arg((2, 3)),), jax_fun=lambda jax, x: jax.lax.full_like(x, 2.5), diff=(),
         name="full_like"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.full_like(x, 7, i32, (3,)),
         lambda x: np.full((3,), 7, i32), (Arg((2, 2)),),
         jax_fun=lambda jax, x: jax.lax.full_like(x, 7, jax.numpy.int32, (3,)), diff=(),
         name="full_like-i32"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.zeros_like_array(x), np.zeros_like,
         (Arg((3,), i32, (0, 5)),), jax_fun=lambda jax, x: jax.numpy.zeros_like(x), diff=(),
         name="zeros_like_array"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.expand_dims(x, (0, -1)),
         lambda x: x[None, :, :, None], (Arg((2, 3)),),
         jax_fun=lambda jax, x: jax.lax.expand_dims(x, (0, -1)), linear=(0,),
         name="expand_dims"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast(x, (2, 1)),
         lambda x: np.broadcast_to(x, (2, 1, 3)), (Arg((3,)),),
         jax_fun=lambda jax, x: jax.lax.broadcast(x, (2, 1)), linear=(0,), name="broadcast"),
    Spec(so.broadcast_in_dim_p, lambda x: lax.broadcast_to_rank(x, 3), lambda x: x[None, None],
         (Arg((4,)),), jax_fun=lambda jax, x: jax.lax.broadcast_to_rank(x, 3), linear=(0,),
         name="broadcast_to_rank"),
]

RESHAPE = [
    Spec(so.reshape_p, lambda x: lax.reshape(x, (6, 4)), lambda x: x.reshape(6, 4),
         (Arg((2, 3, 4)),), jax_fun=lambda jax, x: jax.lax.reshape(x, (6, 4)), linear=(0,)),
    Spec(so.reshape_p, lambda x: lax.reshape(x, (1, 1)), lambda x: x.reshape(1, 1), (Arg(()),),
         jax_fun=lambda jax, x: jax.lax.reshape(x, (1, 1)), linear=(0,), name="rank0"),
    Spec(so.reshape_p, lambda x: lax.reshape(x, (3, 0)), lambda x: x.reshape(3, 0),
         (Arg((0, 3)),), jax_fun=lambda jax, x: jax.lax.reshape(x, (3, 0)), linear=(0,),
         name="empty"),
    Spec(so.reshape_p, lambda x: lax.reshape(x, (6,), (1, 0)), lambda x: x.T.reshape(6),
         (Arg((2, 3)),), jax_fun=lambda jax, x: jax.lax.reshape(x, (6,), (1, 0)), linear=(0,),
         name="dimensions"),
    Spec(so.reshape_p, lambda x: lax.reshape(x, (2, 2)), lambda x: x.reshape(2, 2),
         (Arg((4,), i32, (-5, 5)),), jax_fun=lambda jax, x: jax.lax.reshape(x, (2, 2)),
         diff=(), name="i32"),
    Spec(so.reshape_p, lambda x: lax.reshape(x, (3, 2)), lambda x: x.reshape(3, 2),
         (Arg((6,), c64),), jax_fun=lambda jax, x: jax.lax.reshape(x, (3, 2)), linear=(0,),
         name="c64"),
    Spec(so.reshape_p, lambda x: lax.collapse(x, 1, 3), lambda x: x.reshape(2, 12, 5),
         (Arg((2, 3, 4, 5)),), jax_fun=lambda jax, x: jax.lax.collapse(x, 1, 3), linear=(0,),
         name="collapse"),
    Spec(so.reshape_p, lambda x: lax.collapse(x, 1), lambda x: x.reshape(2, 12),
         (Arg((2, 3, 4)),), jax_fun=lambda jax, x: jax.lax.collapse(x, 1), linear=(0,),
         name="collapse-to-end"),
]

TRANSPOSE = [
    Spec(so.transpose_p, lambda x: lax.transpose(x, (2, 0, 1)),
         lambda x: np.transpose(x, (2, 0, 1)), (Arg((2, 3, 4)),),
         jax_fun=lambda jax, x: jax.lax.transpose(x, (2, 0, 1)), linear=(0,)),
    Spec(so.transpose_p, lambda x: lax.transpose(x, (1, 0)), np.transpose, (Arg((3, 2), c64),),
         jax_fun=lambda jax, x: jax.lax.transpose(x, (1, 0)), linear=(0,), name="c64"),
    Spec(so.transpose_p, lambda x: lax.transpose(x, (1, 0)), np.transpose, (Arg((0, 2)),),
         jax_fun=lambda jax, x: jax.lax.transpose(x, (1, 0)), linear=(0,), name="empty"),
    Spec(so.transpose_p, lambda x: lax.transpose(x, (1, 0)), np.transpose, (Arg((2, 3), b),),
         jax_fun=lambda jax, x: jax.lax.transpose(x, (1, 0)), diff=(), name="bool"),
]

SQUEEZE = [
    Spec(so.squeeze_p, lambda x: lax.squeeze(x, (0, 2)), lambda x: x[0, :, 0],
         (Arg((1, 3, 1)),), jax_fun=lambda jax, x: jax.lax.squeeze(x, (0, 2)), linear=(0,)),
    Spec(so.squeeze_p, lambda x: lax.squeeze(x, (0,)), lambda x: x[0], (Arg((1,)),),
         jax_fun=lambda jax, x: jax.lax.squeeze(x, (0,)), linear=(0,), name="to-rank0"),
    Spec(so.squeeze_p, lambda x: lax.squeeze(x, (-2,)), lambda x: x[:, 0], (Arg((2, 1, 0)),),
         jax_fun=lambda jax, x: jax.lax.squeeze(x, (-2,)), linear=(0,), name="negative-empty"),
    Spec(so.squeeze_p, lambda x: lax.squeeze(x, (1,)), lambda x: x[:, 0],
         (Arg((3, 1), i32, (-5, 5)),), jax_fun=lambda jax, x: jax.lax.squeeze(x, (1,)),
         diff=(), name="i32"),
    Spec(so.squeeze_p, lambda x: lax.index_in_dim(x, -1, 1, keepdims=False),
         lambda x: x[:, -1], (Arg((2, 3)),),
         jax_fun=lambda jax, x: jax.lax.index_in_dim(x, -1, 1, keepdims=False), linear=(0,),
         name="index_in_dim"),
]

REV = [
    Spec(so.rev_p, lambda x: lax.rev(x, (0,)), lambda x: x[::-1], (Arg((3, 4)),),
         jax_fun=lambda jax, x: jax.lax.rev(x, (0,)), linear=(0,)),
    Spec(so.rev_p, lambda x: lax.rev(x, (0, 2)), lambda x: x[::-1, :, ::-1],
         (Arg((2, 3, 4), c64),), jax_fun=lambda jax, x: jax.lax.rev(x, (0, 2)), linear=(0,),
         name="c64"),
    Spec(so.rev_p, lambda x: lax.rev(x, (0, 1)), lambda x: x[::-1, ::-1], (Arg((0, 3)),),
         jax_fun=lambda jax, x: jax.lax.rev(x, (0, 1)), linear=(0,), name="empty"),
    Spec(so.rev_p, lambda x: lax.rev(x, ()), lambda x: x, (Arg(()),),
         jax_fun=lambda jax, x: jax.lax.rev(x, ()), linear=(0,), name="rank0"),
    Spec(so.rev_p, lambda x: lax.rev(x, (0,)), lambda x: x[::-1], (Arg((5,), b),),
         jax_fun=lambda jax, x: jax.lax.rev(x, (0,)), diff=(), name="bool"),
]

CONCATENATE = [
    Spec(so.concatenate_p, lambda x, y, z: lax.concatenate([x, y, z], 1),
         lambda x, y, z: np.concatenate([x, y, z], 1), (Arg((2, 3)), Arg((2, 1)), Arg((2, 4))),
         jax_fun=lambda jax, x, y, z: jax.lax.concatenate([x, y, z], 1), linear=(0, 1, 2)),
    Spec(so.concatenate_p, lambda x, y: lax.concatenate([x, y], 0),
         lambda x, y: np.concatenate([x, y], 0), (Arg((0, 3)), Arg((2, 3))),
         jax_fun=lambda jax, x, y: jax.lax.concatenate([x, y], 0), linear=(0, 1),
         name="empty"),
    Spec(so.concatenate_p, lambda x, y: lax.concatenate([x, y], -1),
         lambda x, y: np.concatenate([x, y], -1), (Arg((2, 2), i32, (-5, 5)),
                                                   Arg((2, 3), i32, (-5, 5))),
         jax_fun=lambda jax, x, y: jax.lax.concatenate([x, y], 1), diff=(), name="i32"),
    Spec(so.concatenate_p, lambda x, y: lax.concatenate([x, y], 0),
         lambda x, y: np.concatenate([x, y], 0), (Arg((1,), b), Arg((2,), b)),
         jax_fun=lambda jax, x, y: jax.lax.concatenate([x, y], 0), diff=(), name="bool"),
    Spec(so.concatenate_p, lambda x, y: lax.concatenate([x, y], 0),
         lambda x, y: np.concatenate([x, y], 0), (Arg((2, 2), c64), Arg((1, 2), c64)),
         jax_fun=lambda jax, x, y: jax.lax.concatenate([x, y], 0), linear=(0, 1), name="c64"),
]


def _pad_spec(name, shape, config, dtype=f32, **kw):
    return Spec(so.pad_p, lambda x, v: lax.pad(x, v, config),
                lambda x, v: _pad_ref(x, v, config), (Arg(shape, dtype), Arg((), dtype)),
                jax_fun=lambda jax, x, v: jax.lax.pad(x, v, config), name=name, **kw)


PAD = [
    _pad_spec("low-high-interior", (3, 4), [(1, 2, 0), (0, 1, 1)], linear=(0, 1)),
    _pad_spec("negative", (5,), [(-1, -2, 0)], linear=(0, 1)),
    _pad_spec("negative-interior", (4, 3), [(-1, 2, 2), (2, -3, 1)], linear=(0, 1)),
    _pad_spec("rank0", (), [], linear=(0, 1)),
    _pad_spec("empty-interior", (0, 3), [(1, 1, 2), (0, 0, 0)], linear=(0, 1)),
    _pad_spec("c64", (2, 2), [(1, 0, 1), (0, 2, 0)], dtype=c64, linear=(0, 1)),
    Spec(so.pad_p, lambda x: lax.pad(x, 0, [(2, -1, 1)]),
         lambda x: _pad_ref(x, i32(0), [(2, -1, 1)]), (Arg((4,), i32, (1, 9)),),
         jax_fun=lambda jax, x: jax.lax.pad(x, jax.numpy.int32(0), [(2, -1, 1)]), diff=(),
         name="i32-python-scalar"),
    Spec(so.pad_p, lambda x: lax.pad(x, 1.5, [(1, 1, 0), (0, 0, 1)]),
         lambda x: _pad_ref(x, x.dtype.type(1.5), [(1, 1, 0), (0, 0, 1)]), (Arg((2, 3)),),
         jax_fun=lambda jax, x: jax.lax.pad(x, jax.numpy.asarray(1.5, x.dtype),
                                            [(1, 1, 0), (0, 0, 1)]),
         name="python-scalar"),
]

SLICE = [
    Spec(so.slice_p, lambda x: lax.slice(x, (1, 2), (4, 6)), lambda x: x[1:4, 2:6],
         (Arg((5, 6)),), jax_fun=lambda jax, x: jax.lax.slice(x, (1, 2), (4, 6)), linear=(0,)),
    Spec(so.slice_p, lambda x: lax.slice(x, (1, 0), (7, 5), (3, 2)), lambda x: x[1:7:3, 0:5:2],
         (Arg((7, 5)),), jax_fun=lambda jax, x: jax.lax.slice(x, (1, 0), (7, 5), (3, 2)),
         linear=(0,), name="strided"),
    Spec(so.slice_p, lambda x: lax.slice(x, (2, 0), (2, 3)), lambda x: x[2:2, 0:3],
         (Arg((4, 3)),), jax_fun=lambda jax, x: jax.lax.slice(x, (2, 0), (2, 3)), linear=(0,),
         name="empty"),
    Spec(so.slice_p, lambda x: lax.slice(x, (), ()), lambda x: x, (Arg(()),),
         jax_fun=lambda jax, x: jax.lax.slice(x, (), ()), linear=(0,), name="rank0"),
    Spec(so.slice_p, lambda x: lax.slice(x, (1,), (6,), (2,)), lambda x: x[1:6:2],
         (Arg((6,), i32, (-9, 9)),), jax_fun=lambda jax, x: jax.lax.slice(x, (1,), (6,), (2,)),
         diff=(), name="i32"),
    Spec(so.slice_p, lambda x: lax.slice(x, (0, 1), (2, 3)), lambda x: x[0:2, 1:3],
         (Arg((3, 3), c64),), jax_fun=lambda jax, x: jax.lax.slice(x, (0, 1), (2, 3)),
         linear=(0,), name="c64"),
    Spec(so.slice_p, lambda x: lax.slice_in_dim(x, -4, None, 2, axis=1), lambda x: x[:, -4::2],
         (Arg((2, 5)),), jax_fun=lambda jax, x: jax.lax.slice_in_dim(x, -4, None, 2, axis=1),
         linear=(0,), name="slice_in_dim"),
    Spec(so.slice_p, lambda x: lax.index_in_dim(x, 2), lambda x: x[2:3], (Arg((4, 2)),),
         jax_fun=lambda jax, x: jax.lax.index_in_dim(x, 2), linear=(0,), name="index_in_dim"),
]

DYNAMIC_SLICE = [
    Spec(so.dynamic_slice_p, lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)),
         lambda x, i, j: _ds_ref(x, (i, j), (2, 3)), (Arg((5, 4)), IDX, IDX),
         jax_fun=lambda jax, x, i, j: jax.lax.dynamic_slice(x, (i, j), (2, 3)),
         linear=(0,), diff=(0,), name="traced"),
    *[Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 3)),
           lambda x, i: _ds_ref(x, (i, 1), (2, 3)), (Arg((5, 4)), _fixed(v)),
           jax_fun=lambda jax, x, i: jax.lax.dynamic_slice(x, (i, np.int32(1)), (2, 3)),
           linear=(0,), diff=(0,), name=name)
      for name, v in [("clamp-high", 9), ("clamp-low", -9), ("negative", -2)]],
    Spec(so.dynamic_slice_p, lambda x: lax.dynamic_slice(x, (1, -1), (2, 2)),
         lambda x: _ds_ref(x, (1, -1), (2, 2)), (Arg((3, 4)),),
         jax_fun=lambda jax, x: jax.lax.dynamic_slice(x, (1, -1), (2, 2)), linear=(0,),
         name="static"),
    Spec(so.dynamic_slice_p, lambda x: lax.dynamic_slice(x, (), ()), lambda x: x, (Arg(()),),
         jax_fun=lambda jax, x: jax.lax.dynamic_slice(x, (), ()), linear=(0,), name="rank0"),
    Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_slice(x, (i, 0), (0, 2)),
         lambda x, i: _ds_ref(x, (i, 0), (0, 2)), (Arg((5, 4)), IDX),
         jax_fun=lambda jax, x, i: jax.lax.dynamic_slice(x, (i, np.int32(0)), (0, 2)),
         linear=(0,), diff=(0,), name="empty"),
    Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_slice(x, (i,), (3,)),
         lambda x, i: _ds_ref(x, (i,), (3,)), (Arg((6,), i32, (-9, 9)), IDX),
         jax_fun=lambda jax, x, i: jax.lax.dynamic_slice(x, (i,), (3,)), diff=(), name="i32"),
    Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_slice(x, (i, i), (2, 2)),
         lambda x, i: _ds_ref(x, (i, i), (2, 2)), (Arg((3, 3), c64), IDX),
         jax_fun=lambda jax, x, i: jax.lax.dynamic_slice(x, (i, i), (2, 2)),
         linear=(0,), diff=(0,), name="c64"),
    Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1),
         lambda x, i: _ds_ref(x, (0, i), (3, 2)), (Arg((3, 5)), IDX),
         jax_fun=lambda jax, x, i: jax.lax.dynamic_slice_in_dim(x, i, 2, axis=1),
         linear=(0,), diff=(0,), name="dynamic_slice_in_dim"),
    Spec(so.dynamic_slice_p, lambda x, i: lax.dynamic_index_in_dim(x, i, keepdims=False),
         lambda x, i: _ds_ref(x, (i, 0), (1, 3))[0], (Arg((4, 3)), IDX),
         jax_fun=lambda jax, x, i: jax.lax.dynamic_index_in_dim(x, i, keepdims=False),
         linear=(0,), diff=(0,), name="dynamic_index_in_dim"),
]

DYNAMIC_UPDATE_SLICE = [
    Spec(so.dynamic_update_slice_p, lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
         lambda x, u, i, j: _dus_ref(x, u, (i, j)), (Arg((5, 4)), Arg((2, 3)), IDX, IDX),
         jax_fun=lambda jax, x, u, i, j: jax.lax.dynamic_update_slice(x, u, (i, j)),
         linear=(0, 1), diff=(0, 1), name="traced"),
    *[Spec(so.dynamic_update_slice_p, lambda x, u, i: lax.dynamic_update_slice(x, u, (1, i)),
           lambda x, u, i: _dus_ref(x, u, (1, i)), (Arg((3, 4)), Arg((2, 2)), _fixed(v)),
           jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_slice(x, u, (np.int32(1), i)),
           linear=(0, 1), diff=(0, 1), name=name)
      for name, v in [("clamp-high", 9), ("clamp-low", -9), ("negative", -1)]],
    Spec(so.dynamic_update_slice_p, lambda x, u: lax.dynamic_update_slice(x, u, ()),
         lambda x, u: u, (Arg(()), Arg(())),
         jax_fun=lambda jax, x, u: jax.lax.dynamic_update_slice(x, u, ()), linear=(0, 1),
         name="rank0"),
    Spec(so.dynamic_update_slice_p, lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
         lambda x, u, i: _dus_ref(x, u, (i, 1)), (Arg((3, 4)), Arg((0, 2)), IDX),
         jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_slice(x, u, (i, np.int32(1))),
         linear=(0, 1), diff=(0, 1), name="empty"),
    Spec(so.dynamic_update_slice_p, lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
         lambda x, u, i: _dus_ref(x, u, (i,)), (Arg((6,), i32, (-9, 9)),
                                               Arg((2,), i32, (-9, 9)), IDX),
         jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_slice(x, u, (i,)), diff=(),
         name="i32"),
    Spec(so.dynamic_update_slice_p, lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
         lambda x, u, i: _dus_ref(x, u, (i,)), (Arg((4,), c64), Arg((2,), c64), IDX),
         jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_slice(x, u, (i,)),
         linear=(0, 1), diff=(0, 1), name="c64"),
    Spec(so.dynamic_update_slice_p,
         lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, axis=1),
         lambda x, u, i: _dus_ref(x, u, (0, i)), (Arg((2, 5)), Arg((2, 2)), IDX),
         jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_slice_in_dim(x, u, i, axis=1),
         linear=(0, 1), diff=(0, 1), name="dynamic_update_slice_in_dim"),
    Spec(so.dynamic_update_slice_p,
         lambda x, u, i: lax.dynamic_update_index_in_dim(x, u, i, 0),
         lambda x, u, i: _dus_ref(x, u[None], (i, 0)), (Arg((3, 4)), Arg((4,)), IDX),
         jax_fun=lambda jax, x, u, i: jax.lax.dynamic_update_index_in_dim(x, u, i, 0),
         linear=(0, 1), diff=(0, 1), name="dynamic_update_index_in_dim"),
]

IOTA = [
    Spec(so.iota_p, lambda: lax.iota(i32, 5), lambda: np.arange(5, dtype=i32), (),
         jax_fun=lambda jax: jax.lax.iota(np.int32, 5), diff=()),
    Spec(so.iota_p, lambda: lax.broadcasted_iota(f32, (2, 3), 1),
         lambda: _iota_ref(f32, (2, 3), 1), (),
         jax_fun=lambda jax: jax.lax.broadcasted_iota(np.float32, (2, 3), 1), diff=(),
         name="broadcasted"),
    Spec(so.iota_p, lambda: lax.broadcasted_iota(i32, (0, 3), 0),
         lambda: _iota_ref(i32, (0, 3), 0), (),
         jax_fun=lambda jax: jax.lax.broadcasted_iota(np.int32, (0, 3), 0), diff=(),
         name="empty"),
    Spec(so.iota_p, lambda: lax.iota(c64, 3), lambda: np.arange(3).astype(c64), (),
         jax_fun=lambda jax: jax.lax.iota(np.complex64, 3), diff=(), name="c64"),
]

SPECS = (BROADCAST_IN_DIM + RESHAPE + TRANSPOSE + SQUEEZE + REV + CONCATENATE + PAD + SLICE
         + DYNAMIC_SLICE + DYNAMIC_UPDATE_SLICE + IOTA)

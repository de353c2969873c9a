"""Specs of the reduction primitives: reduce_{sum,max,min,prod,and,or,xor}, argmax, argmin.

Ties get value-only specs (diff=()): a max with ties is not differentiable, so finite
differences cannot check the even split; tests/test_reductions_errors.py compares that
split with jax directly. A row whose max is NaN has a NaN tangent (as in JAX), which the
finite differences reproduce. reduce_prod gets inputs with one and with several zeros in
a row: its JVP must be exact there.
"""
import numpy as np

from fnad.primitives import reductions as red
from specs import Arg, Spec

f32, c64, i32, b = np.float32, np.complex64, np.int32, np.bool_


def _ties(rng):
    return rng.integers(0, 3, (3, 4)).astype(f32)      # few distinct values: many ties


def _with_nan(rng):
    x = rng.uniform(-2, 2, (3, 4)).astype(f32)
    x[1, 2] = np.nan
    x[2, 0] = x[2, 3] = np.nan                          # two NaNs: argmax picks the first
    return x


def _with_zeros(rng):
    x = rng.uniform(0.5, 2, (4, 5)).astype(f32) * rng.choice([-1, 1], (4, 5))
    x[1, 2] = 0                                         # one zero in row 1
    x[2, 0] = x[2, 3] = 0                               # two zeros in row 2
    x[3, :] = 0                                         # row 3 all zeros
    return x


def _np_max(x, axes):
    init = -np.inf if x.dtype.kind in "fc" else (False if x.dtype == b else np.iinfo(x.dtype).min)
    return np.max(x, axis=axes, initial=init)


def _np_min(x, axes):
    init = np.inf if x.dtype.kind in "fc" else (True if x.dtype == b else np.iinfo(x.dtype).max)
    return np.min(x, axis=axes, initial=init)


def reduction(prim, wrapper, ref, jax_name, cases, **kw):
    """One Spec per (name, Arg, axes, extra Spec kwargs)."""
    out = []
    for name, arg, axes, extra in cases:
        out.append(Spec(prim, lambda x, axes=axes: wrapper(x, axes),
                        lambda x, axes=axes: ref(x, axes), (arg,),
                        jax_fun=lambda jax, x, axes=axes: getattr(jax.lax, jax_name)(
                            x, tuple(a % max(np.ndim(x), 1) for a in axes)),
                        name=name, **{**kw, **extra}))
    return out


REDUCE_SUM = reduction(red.reduce_sum_p, red.reduce_sum,
                       lambda x, axes: np.sum(x, axis=axes, dtype=x.dtype), "reduce_sum", [
    ("f32-axis1", Arg((3, 4)), (1,), {}),
    ("f32-all", Arg((2, 3, 4)), (0, 2), {}),
    ("f32-none", Arg((3, 4)), (), {}),
    ("f32-negative-axis", Arg((3, 4)), (-1,), {}),
    ("rank0", Arg(()), (), {}),
    ("empty", Arg((0, 3)), (0,), {}),
    ("c64", Arg((3, 4), c64), (0,), {}),
    ("i32", Arg((3, 4), i32, (-9, 9)), (1,), {"diff": (), "linear": ()}),
], linear=(0,))

REDUCE_MAX = reduction(red.reduce_max_p, red.reduce_max, _np_max, "reduce_max", [
    ("f32-axis1", Arg((3, 4)), (1,), {}),
    ("f32-two-axes", Arg((2, 3, 4)), (0, 2), {}),
    ("f32-negative-axis", Arg((3, 4)), (-2,), {}),
    ("f32-all", Arg((3, 4)), (0, 1), {}),
    ("rank0", Arg(()), (), {}),
    ("c64", Arg((3, 4), c64), (1,), {}),
    ("empty", Arg((0, 3)), (0,), {"diff": ()}),
    ("ties", Arg((3, 4), f32, _ties), (1,), {"diff": ()}),
    ("nan", Arg((3, 4), f32, _with_nan), (1,), {}),
    ("i32", Arg((3, 4), i32, (-9, 9)), (0,), {"diff": ()}),
    ("bool", Arg((3, 4), b), (1,), {"diff": ()}),
])

REDUCE_MIN = reduction(red.reduce_min_p, red.reduce_min, _np_min, "reduce_min", [
    ("f32-axis1", Arg((3, 4)), (1,), {}),
    ("f32-two-axes", Arg((2, 3, 4)), (2, 0), {}),
    ("f32-negative-axis", Arg((3, 4)), (-1,), {}),
    ("rank0", Arg(()), (), {}),
    ("empty", Arg((2, 0)), (1,), {"diff": ()}),
    ("ties", Arg((3, 4), f32, _ties), (0,), {"diff": ()}),
    ("nan", Arg((3, 4), f32, _with_nan), (1,), {}),
    ("i32", Arg((3, 4), i32, (-9, 9)), (1,), {"diff": ()}),
    ("bool", Arg((3, 4), b), (0,), {"diff": ()}),
])

REDUCE_PROD = reduction(red.reduce_prod_p, red.reduce_prod,
                        lambda x, axes: np.prod(x, axis=axes, dtype=x.dtype), "reduce_prod", [
    ("f32-axis1", Arg((3, 4), f32, (0.5, 1.5)), (1,), {}),
    ("f32-signs", Arg((3, 4)), (0,), {}),
    ("f32-two-axes", Arg((2, 3, 4), f32, (0.5, 1.5)), (0, 2), {}),
    ("f32-negative-axis", Arg((3, 5), f32, (0.5, 1.5)), (-1,), {}),
    ("zeros", Arg((4, 5), f32, _with_zeros), (1,), {}),
    ("zeros-all-axes", Arg((4, 5), f32, _with_zeros), (0, 1), {}),
    ("rank0", Arg(()), (), {}),
    ("empty", Arg((0, 3)), (0,), {}),
    ("c64", Arg((2, 3), c64, (-1.0, 1.0)), (1,), {}),
    ("i32", Arg((3, 4), i32, (-3, 4)), (1,), {"diff": ()}),
])


def _logical(prim, wrapper, ufunc, jax_name):
    def ref(x, axes):
        init = ~np.zeros((), x.dtype) if ufunc is np.bitwise_and else np.zeros((), x.dtype)
        return ufunc.reduce(x, axis=axes, initial=init).astype(x.dtype)
    return reduction(prim, wrapper, ref, jax_name, [
        ("bool", Arg((3, 4), b), (1,), {}),
        ("bool-all", Arg((2, 3, 4), b), (0, 1, 2), {}),
        ("bool-negative-axis", Arg((3, 4), b), (-2,), {}),
        ("i32", Arg((3, 4), i32, (0, 64)), (1,), {}),
        ("i32-rank0", Arg((), i32, (0, 64)), (), {}),
        ("bool-empty", Arg((0, 3), b), (0,), {}),
    ], diff=())


REDUCE_LOGICAL = (_logical(red.reduce_and_p, red.reduce_and, np.bitwise_and, "reduce_and")
                  + _logical(red.reduce_or_p, red.reduce_or, np.bitwise_or, "reduce_or")
                  + _logical(red.reduce_xor_p, red.reduce_xor, np.bitwise_xor, "reduce_xor"))


def _arg(prim, wrapper, np_fn, jax_name):
    out = []
    for name, arg, axis, dt in [
        ("f32-axis1", Arg((3, 4)), 1, i32),
        ("f32-axis0", Arg((3, 4)), 0, i32),
        ("f32-negative-axis", Arg((2, 3, 4)), -1, i32),
        ("rank1", Arg((7,)), 0, i32),
        ("ties-first", Arg((3, 4), f32, _ties), 1, i32),
        ("nan-first", Arg((3, 4), f32, _with_nan), 1, i32),
        ("i32", Arg((3, 4), i32, (-3, 3)), 0, i32),
        ("bool", Arg((3, 4), b), 1, i32),
        ("int64-index", Arg((3, 4)), 1, np.int64),
    ]:
        out.append(Spec(prim, lambda x, axis=axis, dt=dt: wrapper(x, axis, dt),
                        lambda x, axis=axis: np_fn(x, axis=axis).astype(i32), (arg,),
                        jax_fun=lambda jax, x, axis=axis, dt=dt: getattr(jax.lax, jax_name)(
                            x, axis % np.ndim(x), dt),
                        diff=(), name=name))
    return out


ARGMAX = _arg(red.argmax_p, red.argmax, np.argmax, "argmax")
ARGMIN = _arg(red.argmin_p, red.argmin, np.argmin, "argmin")

SPECS = REDUCE_SUM + REDUCE_MAX + REDUCE_MIN + REDUCE_PROD + REDUCE_LOGICAL + ARGMAX + ARGMIN

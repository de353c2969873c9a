"""Specs of sort (one operand, several operands, several keys) and top_k.

sort is linear in its non-key operands (the keys fix the permutation): those get the
dot-product test, which runs sort's transpose. NaN, ±0 and tie cases are value-only
(diff=()): they check the order lax defines (sort: NaNs last, -0.0 == 0.0, stable;
top_k: IEEE total order, the lower index first among equals).
"""
import numpy as np

from fnad.primitives import sorting as srt
from specs import Arg, Spec

f32, c64, i32, b = np.float32, np.complex64, np.int32, np.bool_


def _special(rng):
    """NaNs of both signs, ±0, ±inf and ties, shuffled into a row."""
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
    vals = np.array([np.nan, neg_nan, 0.0, -0.0, 0.0, np.inf, -np.inf, 1.5, 1.5, -2.0], f32)
    return np.stack([rng.permutation(vals) for _ in range(3)])


def _ties(rng):
    return rng.integers(0, 3, (3, 8)).astype(i32)


def _np_sort(operands, dimension, num_keys):
    keys = operands[:num_keys]
    perm = (np.argsort(keys[0], axis=dimension, kind="stable") if num_keys == 1
            else np.lexsort(keys[::-1], axis=dimension))
    return tuple(np.take_along_axis(x, perm, axis=dimension) for x in operands)


def _sort1(name, arg, dimension, is_stable=True, **kw):
    return Spec(srt.sort_p, lambda x: srt.sort(x, dimension, is_stable),
                lambda x: _np_sort((x,), dimension, 1)[0], (arg,),
                jax_fun=lambda jax, x: jax.lax.sort(x, dimension=dimension, is_stable=is_stable),
                name=name, **kw)


def _sortn(name, args, dimension, num_keys, linear=(), first_out=0, **kw):
    """Sort `args` by the first `num_keys`; return the outputs from `first_out` on (the
    dot-product test needs float outputs only: drop integer keys for the linear specs)."""
    return Spec(srt.sort_p, lambda *xs: srt.sort(xs, dimension, True, num_keys)[first_out:],
                lambda *xs: _np_sort(xs, dimension, num_keys)[first_out:], args,
                jax_fun=lambda jax, *xs: jax.lax.sort(xs, dimension=dimension,
                                                      num_keys=num_keys)[first_out:],
                linear=linear, name=name, **kw)


SORT = [
    _sort1("rank1", Arg((7,)), -1),
    _sort1("axis0", Arg((5, 3)), 0),
    _sort1("last-axis", Arg((2, 3, 6)), -1),
    _sort1("middle-axis", Arg((2, 5, 3)), 1),
    _sort1("unstable", Arg((4, 6)), 1, is_stable=False),
    _sort1("empty", Arg((0, 3)), 0),
    _sort1("length1", Arg((3, 1)), 1),
    _sort1("nan-zeros", Arg((3, 10), f32, _special), 1, diff=()),
    _sort1("i32", Arg((3, 5), i32, (-9, 9)), 1, diff=()),
    _sort1("bool", Arg((2, 6), b), 1, diff=()),
    _sortn("key-val", (Arg((3, 6)), Arg((3, 6))), 1, 1, linear=(1,)),
    _sortn("int-key-ties", (Arg((3, 8), i32, _ties), Arg((3, 8)), Arg((3, 8), c64)), 1, 1),
    _sortn("int-key-ties-values", (Arg((3, 8), i32, _ties), Arg((3, 8)), Arg((3, 8), c64)),
           1, 1, linear=(1, 2), first_out=1),
    _sortn("two-keys", (Arg((3, 8), i32, _ties), Arg((3, 8)), Arg((3, 8))), 1, 2),
    _sortn("two-keys-values", (Arg((3, 8), i32, _ties), Arg((3, 8)), Arg((3, 8))), 1, 2,
           linear=(2,), first_out=1),
    _sortn("float-keys-axis0", (Arg((6, 2)), Arg((6, 2)), Arg((6, 2), i32, (0, 9))), 0, 2),
    Spec(srt.sort_p, lambda k, v: srt.sort_key_val(k, v, 0),
         lambda k, v: _np_sort((k, v), 0, 1), (Arg((5, 2)), Arg((5, 2))),
         jax_fun=lambda jax, k, v: jax.lax.sort_key_val(k, v, 0), linear=(1,),
         name="sort_key_val"),
]


def _np_top_k(x, k, axis):
    bits = x.view(np.int32) if x.dtype == f32 else None
    key = (np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits) if bits is not None
           else x.astype(np.int64))
    idx = np.take(np.argsort(~key, axis=axis, kind="stable"), np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(i32)


def _top_k(name, arg, k, axis=-1, **kw):
    return Spec(srt.top_k_p, lambda x: srt.top_k(x, k, axis=axis),
                lambda x: _np_top_k(x, k, axis), (arg,),
                jax_fun=lambda jax, x: jax.lax.top_k(x, k, axis=axis), name=name, **kw)


TOP_K = [
    _top_k("rank1", Arg((7,)), 3),
    _top_k("rows", Arg((3, 6)), 2),
    _top_k("k-all", Arg((2, 5)), 5),
    _top_k("k0", Arg((2, 5)), 0),
    _top_k("axis0", Arg((6, 3)), 2, axis=0),
    _top_k("middle-axis", Arg((2, 5, 3)), 4, axis=1),
    _top_k("nan-zeros", Arg((3, 10), f32, _special), 7, diff=()),
    _top_k("i32-ties", Arg((3, 8), i32, (0, 3)), 5, diff=()),
    _top_k("bool", Arg((2, 6), b), 3, diff=()),
]

SPECS = SORT + TOP_K

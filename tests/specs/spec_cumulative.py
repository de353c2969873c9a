"""Specs of the cumulative reductions: cumsum, cumprod, cummax, cummin, cumlogsumexp.

Odd and even lengths (the prefix scan behind the JVPs pairs elements up level by level),
both directions, negative axes, empty axes; cumprod with zeros (one and several per row:
its JVP must be exact there) and cumlogsumexp over a range far wider than exp's (its JVP
must stay finite and exact). Ties of cummax/cummin are checked against jax in
tests/test_reductions_errors.py.
"""
import numpy as np

from fnad.primitives import cumulative as cum
from specs import Arg, Spec

f32, c64, i32 = np.float32, np.complex64, np.int32


def _with_zeros(rng):
    x = rng.uniform(0.5, 1.5, (4, 6)).astype(f32) * rng.choice([-1, 1], (4, 6))
    x[1, 2] = 0                                         # one zero: nonzero tangents after it
    x[2, 1] = x[2, 4] = 0                               # two zeros: zero tangents after both
    x[3, 0] = 0
    return x


def _wide_range(rng):
    """Values spread over ±300 (exp overflows float64 near 709, underflows below -745):
    prefix sums cannot be formed on one common scale."""
    return (rng.uniform(-1, 1, (2, 7)) * 300).astype(np.float64)


def _nan(rng):
    x = rng.uniform(-2, 2, (3, 5)).astype(f32)
    x[1, 2] = np.nan
    return x


def _np_scan(fn):
    def ref(x, axis, reverse):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis), axis)
        return fn(x, axis)
    return ref


def _np_logcumsumexp(x, axis):
    if x.dtype.kind == "c":
        return np.log(np.cumsum(np.exp(x.astype(np.complex128)), axis=axis)).astype(x.dtype)
    return np.logaddexp.accumulate(x, axis=axis)


def cumulative(prim, wrapper, fn, jax_name, cases, **kw):
    """One Spec per (name, Arg, axis, reverse, extra Spec kwargs)."""
    ref = _np_scan(fn)
    return [Spec(prim, lambda x, axis=axis, rev=rev: wrapper(x, axis, rev),
                 lambda x, axis=axis, rev=rev: ref(x, axis, rev), (arg,),
                 jax_fun=lambda jax, x, axis=axis, rev=rev: getattr(jax.lax, jax_name)(
                     x, axis=axis % np.ndim(x), reverse=rev),
                 name=name, **{**kw, **extra})
            for name, arg, axis, rev, extra in cases]


def _common(dtype=f32, domain=(-2.0, 2.0)):
    return [
        ("axis0", Arg((5, 3), dtype, domain), 0, False, {}),
        ("axis1-even", Arg((3, 6), dtype, domain), 1, False, {}),
        ("axis1-odd-reverse", Arg((3, 7), dtype, domain), 1, True, {}),
        ("negative-axis", Arg((2, 3, 4), dtype, domain), -2, False, {}),
        ("rank1-reverse", Arg((8,), dtype, domain), 0, True, {}),
        ("length1", Arg((1, 3), dtype, domain), 0, False, {}),
        ("empty", Arg((0, 3), dtype, domain), 0, False, {}),
    ]


CUMSUM = cumulative(cum.cumsum_p, cum.cumsum,
                    lambda x, a: np.cumsum(x, axis=a, dtype=x.dtype), "cumsum", [
    *_common(),
    ("c64", Arg((3, 4), c64), 1, True, {}),
    ("i32", Arg((3, 4), i32, (-9, 9)), 1, False, {"diff": (), "linear": ()}),
], linear=(0,))

CUMPROD = cumulative(cum.cumprod_p, cum.cumprod,
                     lambda x, a: np.cumprod(x, axis=a, dtype=x.dtype), "cumprod", [
    *_common(domain=(0.5, 1.5)),
    ("signs", Arg((3, 5)), 1, False, {}),
    ("zeros", Arg((4, 6), f32, _with_zeros), 1, False, {}),
    ("zeros-reverse", Arg((4, 6), f32, _with_zeros), 1, True, {}),
    ("c64", Arg((2, 5), c64, (-1.0, 1.0)), 1, False, {}),
    ("i32", Arg((3, 4), i32, (-3, 4)), 1, False, {"diff": ()}),
])

CUMMAX = cumulative(cum.cummax_p, cum.cummax, lambda x, a: np.maximum.accumulate(x, axis=a),
                    "cummax", [
    *_common(),
    ("nan", Arg((3, 5), f32, _nan), 1, False, {"diff": ()}),
    ("i32", Arg((3, 4), i32, (-9, 9)), 0, True, {"diff": ()}),
])

CUMMIN = cumulative(cum.cummin_p, cum.cummin, lambda x, a: np.minimum.accumulate(x, axis=a),
                    "cummin", [
    *_common(),
    ("nan", Arg((3, 5), f32, _nan), 1, True, {"diff": ()}),
    ("i32", Arg((3, 4), i32, (-9, 9)), 1, False, {"diff": ()}),
])

CUMLOGSUMEXP = cumulative(cum.cumlogsumexp_p, cum.cumlogsumexp, _np_logcumsumexp,
                          "cumlogsumexp", [
    *_common(),
    ("wide-range", Arg((2, 7), np.float64, _wide_range), 1, False, {"fd_eps": 1e-4}),
    ("wide-range-reverse", Arg((2, 7), np.float64, _wide_range), 1, True, {"fd_eps": 1e-4}),
    ("c64", Arg((2, 5), c64, (-1.0, 1.0)), 1, False, {"rtol": 1e-4}),
])

SPECS = CUMSUM + CUMPROD + CUMMAX + CUMMIN + CUMLOGSUMEXP

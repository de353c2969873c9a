"""Specs of the windowed reductions: reduce_window_sum, reduce_window_max, reduce_window_min.

Rank 1 and NHWC pooling (2×2 stride 2, 3×3 stride 2 with 'SAME' padding through the public
lax.reduce_window), base and window dilation, negative padding, an empty output, an empty
operand padded into windows, float64, int32, and float16 (accumulating in float32) and
complex sums. The reference is a plain
NumPy one built differently from the backend's: np.pad and slicing, then a
sliding_window_view reduced by np.sum / np.max / np.min.

Ties and NaNs have no finite-difference derivative (`diff=()`, values only here):
tests/test_reduce_window.py checks their derivatives against jax. jax has no reverse mode
for max/min with window dilation or negative padding, so those specs have no jax_fun (their
JVPs are checked against jax's there).
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fnad import lax
from fnad.primitives import windowed as win
from specs import Arg, Spec

f32, f64, c64, i32 = np.float32, np.float64, np.complex64, np.int32


def np_reduce_window(x, fn, init, dims, strides, padding, base=None, wdil=None):
    """fn over each window: x dilated with `init` holes, np.pad-ed with `init`, negative
    padding sliced off, windows from sliding_window_view (strided, then window-dilated)."""
    n = x.ndim
    base, wdil = base or (1,) * n, wdil or (1,) * n
    dilated = np.full([0 if d == 0 else (d - 1) * b + 1 for d, b in zip(x.shape, base)],
                      init, x.dtype)
    dilated[tuple(slice(None, None, b) for b in base)] = x
    p = np.pad(dilated, [(max(lo, 0), max(hi, 0)) for lo, hi in padding],
               constant_values=init)
    p = p[tuple(slice(max(-lo, 0), p.shape[i] - max(-hi, 0))
                for i, (lo, hi) in enumerate(padding))]
    window = [(w - 1) * d + 1 for w, d in zip(dims, wdil)]
    out_shape = [(m - k) // s + 1 if m >= k else 0
                 for m, k, s in zip(p.shape, window, strides)]
    if 0 in out_shape:
        return np.full(out_shape, init, x.dtype)
    views = sliding_window_view(p, window)             # [*positions, *window]
    views = views[tuple(slice(None, None, s) for s in strides)
                  + tuple(slice(None, None, d) for d in wdil)]
    return np.asarray(fn(views, axis=tuple(range(n, 2 * n))), x.dtype)


def _np_sum(v, axis):
    return np.sum(v, axis=axis, dtype=v.dtype)


KINDS = {  # name: (primitive, fnad wrapper, NumPy fn, identity, jax computation name)
    "sum": (win.reduce_window_sum_p, win.reduce_window_sum, _np_sum,
            lambda dt: np.zeros((), dt), "add"),
    "max": (win.reduce_window_max_p, win.reduce_window_max, np.max, win.max_identity, "max"),
    "min": (win.reduce_window_min_p, win.reduce_window_min, np.min, win.min_identity, "min"),
}


def window_spec(kind, name, arg, dims, strides, padding, base=None, wdil=None,
                with_jax=True, **kw):
    """One Spec of reduce_window_<kind> through its module-level wrapper."""
    prim, wrapper, fn, identity, jax_op = KINDS[kind]

    def jax_fun(jax, x):
        return jax.lax.reduce_window(x, np.asarray(identity(x.dtype)),
                                     getattr(jax.lax, jax_op), dims, strides, padding,
                                     base, wdil)
    return Spec(prim, lambda x: wrapper(x, dims, strides, padding, base, wdil),
                lambda x: np_reduce_window(x, fn, identity(x.dtype), dims, strides, padding,
                                           base, wdil),
                (arg,), jax_fun=jax_fun if with_jax else None, name=name,
                **{"linear": (0,) if kind == "sum" else (), **kw})


def same_spec(kind, name, arg, dims, strides, **kw):
    """A Spec through the public lax.reduce_window with padding='SAME'."""
    prim, _, fn, identity, jax_op = KINDS[kind]
    ours = {"add": lax.add, "max": lax.max, "min": lax.min}[jax_op]

    def pads(x):
        return win.padtype_to_pads(x.shape, dims, strides, "SAME")
    return Spec(prim, lambda x: lax.reduce_window(x, identity(x.dtype).item(), ours, dims,
                                                  strides, "SAME"),
                lambda x: np_reduce_window(x, fn, identity(x.dtype), dims, strides, pads(x)),
                (arg,), jax_fun=lambda jax, x: jax.lax.reduce_window(
                    x, identity(x.dtype).item(), getattr(jax.lax, jax_op), dims, strides,
                    "SAME"),
                name=name, **{"linear": (0,) if kind == "sum" else (), **kw})


def _ties(rng):
    """Windows of equal values: all-zero ones (a ReLU's output) and a repeated maximum."""
    x = np.maximum(rng.uniform(-1, 1, (2, 6, 6, 2)), 0).astype(f32)
    x[0, :2, :2, :] = 0                                # a whole 2×2 window of zeros
    x[1, 2:4, 2:4, 0] = 0.75                           # a window whose four values tie
    return x


def _nan(rng):
    x = rng.uniform(-2, 2, (3, 8)).astype(f32)
    x[0, 1] = x[1, 5] = x[2, 2] = x[2, 3] = np.nan
    return x


def _empty(shape):
    return lambda rng: np.zeros(shape, f32)


NHWC = (2, 4, 4, 3)
POOL = ((1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4)


def _common(kind):
    return [
        window_spec(kind, "1d", Arg((7,)), (3,), (1,), ((0, 0),)),
        window_spec(kind, "nhwc-2x2-stride2", Arg(NHWC), *POOL),
        same_spec(kind, "nhwc-3x3-stride2-same", Arg((1, 5, 5, 2)), (1, 3, 3, 1),
                  (1, 2, 2, 1)),
        window_spec(kind, "base-dilation", Arg((3, 4)), (2, 2), (1, 2), ((1, 0), (0, 1)),
                    (2, 1)),
        window_spec(kind, "negative-padding", Arg((6, 5)), (2, 3), (2, 1),
                    ((-1, 1), (-1, -1)), with_jax=kind == "sum"),
        window_spec(kind, "empty-output", Arg((2, 3)), (3, 1), (1, 1), ((0, 0), (0, 0))),
        window_spec(kind, "f64", Arg((4, 6), f64), (2, 3), (2, 3), ((0, 1), (1, 0))),
        window_spec(kind, "i32", Arg((4, 6), i32, (-9, 9)), (2, 2), (1, 2),
                    ((1, 0), (0, 0)), diff=(), linear=()),
    ]


SUM = _common("sum") + [
    window_spec("sum", "window-dilation", Arg((5, 6)), (2, 2), (1, 1), ((0, 0), (0, 0)),
                None, (2, 3)),
    window_spec("sum", "empty-operand", Arg((0, 3), f32, _empty((0, 3))), (2, 1), (1, 1),
                ((1, 1), (0, 0))),
    window_spec("sum", "c64", Arg((3, 4), c64), (2, 2), (1, 1), ((0, 0), (1, 1))),
    window_spec("sum", "f16", Arg((6, 5), np.float16), (3, 2), (1, 1), ((1, 1), (0, 0)),
                rtol=2e-3, atol=2e-3),
    window_spec("sum", "crop-below-zero", Arg((4, 3)), (1, 2), (1, 1), ((-5, 3), (0, 0))),
]

MAX = _common("max") + [
    window_spec("max", "window-dilation", Arg((5, 6)), (2, 2), (1, 1), ((0, 0), (0, 0)),
                None, (2, 3), with_jax=False),
    window_spec("max", "ties", Arg((2, 6, 6, 2), f32, _ties), *POOL, diff=()),
    window_spec("max", "nan", Arg((3, 8), f32, _nan), (1, 3), (1, 2), ((0, 0), (1, 1)),
                diff=()),
]

MIN = _common("min") + [
    window_spec("min", "ties", Arg((2, 6, 6, 2), f32, _ties), *POOL, diff=()),
    window_spec("min", "nan", Arg((3, 8), f32, _nan), (1, 3), (1, 2), ((0, 0), (1, 1)),
                diff=()),
]

SPECS = SUM + MAX + MIN

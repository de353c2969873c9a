"""Windowed reductions (pooling): reduce_window_sum, reduce_window_max, reduce_window_min,
and lax.reduce_window, which picks one of them by its computation (JAX's monoid rule).

Params (as jax.lax, one entry per operand dim): `window_dimensions`, `window_strides`,
`padding` ((lo, hi) pairs; negative values crop), `base_dilation`, `window_dilation`.
The operand is base-dilated (b - 1 identity elements between neighbours), padded with the
identity, and each window (w elements, window_dilation apart) at every stride reduced:

    dilated base    B = (d - 1)·base_dilation + 1        (0 if d == 0)
    padded          P = B + lo + hi
    dilated window  W = (w - 1)·window_dilation + 1
    out             = (P - W) // stride + 1   if P >= W, else 0

reduce_window_sum is linear: its transpose pads the cotangent (stride - 1 zeros between
elements, edges from the VJP padding below) and sums it over windows again, stepping by
base_dilation. The JVP of max/min is the tangent of the one element XLA selects in each
window (its select-and-scatter, which JAX's gradient uses): window positions in row-major
order, each replacing the running choice unless the choice is >= it (<= for min), so ties
go to the first position. `_window_positions` unfolds the padded operand and its tangent
into the K = Π w positions (strided slices) and `_select_tangent` folds them; the tangent
map only pads, slices and selects, so reverse mode transposes it like any linear jaxpr.
"""
from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from fnad import dtypes
from fnad.core import (Primitive, ShapedArray, abstract_eval_rules, batch_rules, get_aval,
                       is_concrete, jvp_rules, shape_error, transpose_rules)
from fnad.primitives import elementwise as ew
from fnad.primitives import logic
from fnad.primitives import shape_ops as so
from fnad.primitives._util import NUM, ORDERED, check_kind
from fnad.primitives.convolution import padtype_to_pads  # noqa: F401  (lax exports it too)

__all__ = ["padtype_to_pads", "reduce_window", "reduce_window_shape_tuple"]


# ---- identities and shapes ----------------------------------------------------------------
def max_identity(dtype) -> np.ndarray:
    """The identity of max: -inf, the integer dtype's minimum, or False (as lax); for a
    float without infinities (float8_e4m3fn...) its lowest finite value, and NaN for
    float8_e8m0fnu, which has no negatives either (as XLA)."""
    return _extreme(np.dtype(dtype), -1)


def min_identity(dtype) -> np.ndarray:
    """The identity of min: +inf, the integer dtype's maximum, or True (as lax); for a
    float without infinities its largest finite value (NaN for float8_e8m0fnu)."""
    return _extreme(np.dtype(dtype), 1)


def _extreme(dt: np.dtype, sign: int) -> np.ndarray:
    if dtypes.is_bool(dt):
        return np.array(sign > 0)
    if dtypes.is_int(dt):
        info = dtypes.iinfo(dt)
        return np.array(info.max if sign > 0 else info.min, dt)
    inf = np.array(sign * np.inf, np.float32).astype(dt)
    if np.isinf(inf):
        return inf
    info = dtypes.finfo(dt)
    if float(info.min) >= 0:                         # float8_e8m0fnu: no sign bit
        return np.array(np.nan, np.float32).astype(dt)
    return np.array(sign * float(info.max), np.float32).astype(dt)


def _dilate(d: int, dilation: int) -> int:
    return 0 if d == 0 else (d - 1) * dilation + 1


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple[int, ...]:
    """The output shape of a windowed reduction (no checks; see the module docstring)."""
    n = len(operand_shape)
    base_dilation = (1,) * n if base_dilation is None else base_dilation
    window_dilation = (1,) * n if window_dilation is None else window_dilation
    out = []
    for d, w, s, (lo, hi), b, wd in zip(operand_shape, window_dimensions, window_strides,
                                        padding, base_dilation, window_dilation):
        padded, window = _dilate(d, b) + lo + hi, _dilate(w, wd)
        out.append((padded - window) // s + 1 if padded >= window else 0)
    return tuple(out)


def _check_window(name: str, shape: tuple, window_dimensions, window_strides, padding,
                  base_dilation, window_dilation) -> tuple[int, ...]:
    """The output shape, after checking each param has one valid entry per operand dim."""
    n = len(shape)
    for what, v in (("window_dimensions", window_dimensions),
                    ("window_strides", window_strides), ("base_dilation", base_dilation),
                    ("window_dilation", window_dilation)):
        if len(v) != n:
            raise shape_error(name, f"{what} {v} must have one entry per operand dimension: "
                                    f"the operand has shape {shape} (rank {n})")
        if any(i <= 0 for i in v):
            raise shape_error(name, f"{what} must be positive, got {v}")
    if len(padding) != n:
        raise shape_error(name, f"padding {padding} must have one (low, high) pair per "
                                f"operand dimension: the operand has shape {shape} (rank {n})")
    return reduce_window_shape_tuple(shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


def _window_abstract_eval(name: str, kinds: tuple[str, ...]):
    """Rule for a windowed reduction: the shape above, the operand's dtype."""
    def rule(x: ShapedArray, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation) -> ShapedArray:
        check_kind(name, x, kinds)
        shape = _check_window(name, x.shape, window_dimensions, window_strides, padding,
                              base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)
    return rule


def _window_batch_rule(prim):
    """A mapped axis is one more window dim: size 1, stride 1, no padding or dilation."""
    def rule(vals, dims, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        (x,), (d,) = vals, dims

        def ins(params, value):
            return params[:d] + (value,) + params[d:]
        return prim.bind(x, window_dimensions=ins(window_dimensions, 1),
                         window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                         base_dilation=ins(base_dilation, 1),
                         window_dilation=ins(window_dilation, 1)), d
    return rule


# ---- canonical params -----------------------------------------------------------------------
def _ints(name: str, what: str, values, n: int, default: int | None = None) -> tuple[int, ...]:
    if values is None and default is not None:
        return (default,) * n
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of ints, got {values!r}") from None


def _pairs(name: str, padding) -> tuple[tuple[int, int], ...]:
    try:
        pairs = tuple(tuple(operator.index(v) for v in p) for p in padding)
    except TypeError:
        pairs = None
    if pairs is None or any(len(p) != 2 for p in pairs):
        raise TypeError(f"{name}: padding must be 'VALID', 'SAME', 'SAME_LOWER' or a sequence "
                        f"of (low, high) int pairs, got {padding!r}")
    return pairs


def _params(name: str, operand, window_dimensions, window_strides, padding, base_dilation,
            window_dilation) -> dict:
    """The primitive params from jax.lax-style arguments (None means ones), checked."""
    shape = get_aval(operand).shape
    window_dimensions = _ints(name, "window_dimensions", window_dimensions, len(shape))
    n = len(window_dimensions)
    params = dict(window_dimensions=window_dimensions,
                  window_strides=_ints(name, "window_strides", window_strides, n, 1),
                  padding=_pairs(name, padding),
                  base_dilation=_ints(name, "base_dilation", base_dilation, n, 1),
                  window_dilation=_ints(name, "window_dilation", window_dilation, n, 1))
    _check_window(name, shape, **params)
    return params


# ---- the JVP of max / min: the tangent at XLA's choice in each window ---------------------
def _window_positions(x, fill, out_shape, *, window_dimensions, window_strides, padding,
                      base_dilation, window_dilation) -> list:
    """The K = Π window_dimensions arrays [*out_shape] of each window's k-th element (in
    row-major window order) of x base-dilated and padded with `fill`."""
    config = tuple((lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation))
    if any(c != (0, 0, 0) for c in config):
        x = so.pad(x, fill, config)                    # [*padded]
    positions = []
    for offsets in itertools.product(*(range(w) for w in window_dimensions)):
        starts = tuple(o * wd for o, wd in zip(offsets, window_dilation))
        limits = tuple(s + (n - 1) * st + 1 for s, n, st in zip(starts, out_shape,
                                                                 window_strides))
        positions.append(so.slice(x, starts, limits, window_strides))   # [*out_shape]
    return positions


def _select_tangent(keeps, identity, x, x_dot, out_shape, params):
    """The tangent of the element XLA's select-and-scatter picks in each window: the running
    choice stays where keeps(choice, candidate), else the candidate replaces it."""
    dt = get_aval(x).dtype
    vals = _window_positions(x, identity(dt), out_shape, **params)           # K × [*out]
    tans = _window_positions(x_dot, np.zeros((), dt), out_shape, **params)   # K × [*out]
    v_acc, t_acc = vals[0], tans[0]
    for v, t in zip(vals[1:], tans[1:]):
        keep = keeps(v_acc, v)                         # False at a NaN: the candidate wins
        v_acc = logic.select_n(keep, v, v_acc)
        t_acc = logic.select_n(keep, t, t_acc)
    return t_acc


def _chooser_jvp(prim, keeps, identity):
    """JVP rule of reduce_window_max (keeps = ge) or _min (le): the chosen element's dx."""
    def rule(primals, tangents, **params):
        (x,), (x_dot,) = primals, tangents
        out = prim.bind(x, **params)
        out_aval = get_aval(out)
        if math.prod(out_aval.shape) == 0:             # no windows: nothing to select
            return out, so.full(out_aval.shape, 0, out_aval.dtype)
        return out, _select_tangent(keeps, identity, x, x_dot, out_aval.shape, params)
    return rule


# ---- reduce_window_sum --------------------------------------------------------------------
reduce_window_sum_p = Primitive("reduce_window_sum")
def reduce_window_sum(operand, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """Σ over each window (padding and dilation holes count as 0)."""
    return reduce_window_sum_p.bind(operand, **_params(
        "reduce_window_sum", operand, window_dimensions, window_strides, padding,
        base_dilation, window_dilation))

abstract_eval_rules[reduce_window_sum_p] = _window_abstract_eval("reduce_window_sum", NUM)
def reduce_window_sum_jvp(primals, tangents, **params):   # d Σ_window x = Σ_window dx
    return (reduce_window_sum_p.bind(primals[0], **params),
            reduce_window_sum_p.bind(tangents[0], **params))
jvp_rules[reduce_window_sum_p] = reduce_window_sum_jvp
def reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                base_dilation, window_dilation):
    # x̄_i = Σ ct_o over the windows o that hold x_i: ct spread out by the strides and padded
    # so that a window sum stepping by base_dilation lands on x's elements (the window
    # reversed, which a sum does not see)
    shape, dt, out_shape = x.aval.shape, x.aval.dtype, get_aval(ct).shape
    if math.prod(shape) == 0 or math.prod(out_shape) == 0:
        return [so.full(shape, 0, dt)]
    config = []
    for d, w, s, (lo, _), b, wd, n in zip(shape, window_dimensions, window_strides, padding,
                                          base_dilation, window_dilation, out_shape):
        before = _dilate(w, wd) - lo - 1
        after = _dilate(d, b) + _dilate(w, wd) - 1 - _dilate(n, s) - before
        config.append((before, after, s - 1))
    spread = so.pad(ct, np.zeros((), get_aval(ct).dtype), config)
    ones = (1,) * len(shape)
    return [reduce_window_sum_p.bind(spread, window_dimensions=window_dimensions,
                                     window_strides=base_dilation, padding=((0, 0),) * len(shape),
                                     base_dilation=ones, window_dilation=window_dilation)]
transpose_rules[reduce_window_sum_p] = reduce_window_sum_transpose
batch_rules[reduce_window_sum_p] = _window_batch_rule(reduce_window_sum_p)


# ---- reduce_window_max / reduce_window_min -------------------------------------------------
reduce_window_max_p = Primitive("reduce_window_max")
def reduce_window_max(operand, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """max over each window (padding and dilation holes count as -inf); NaN propagates."""
    return reduce_window_max_p.bind(operand, **_params(
        "reduce_window_max", operand, window_dimensions, window_strides, padding,
        base_dilation, window_dilation))

abstract_eval_rules[reduce_window_max_p] = _window_abstract_eval("reduce_window_max", ORDERED)
jvp_rules[reduce_window_max_p] = _chooser_jvp(   # dx at the first max of each window
    reduce_window_max_p, logic.ge, max_identity)
batch_rules[reduce_window_max_p] = _window_batch_rule(reduce_window_max_p)

reduce_window_min_p = Primitive("reduce_window_min")
def reduce_window_min(operand, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """min over each window (padding and dilation holes count as +inf); NaN propagates."""
    return reduce_window_min_p.bind(operand, **_params(
        "reduce_window_min", operand, window_dimensions, window_strides, padding,
        base_dilation, window_dilation))

abstract_eval_rules[reduce_window_min_p] = _window_abstract_eval("reduce_window_min", ORDERED)
jvp_rules[reduce_window_min_p] = _chooser_jvp(   # dx at the first min of each window
    reduce_window_min_p, logic.le, min_identity)
batch_rules[reduce_window_min_p] = _window_batch_rule(reduce_window_min_p)


# ---- lax.reduce_window ----------------------------------------------------------------------
_MONOIDS = {ew.add: "add", operator.add: "add", ew.max: "max", ew.min: "min"}


def _monoid(computation) -> str | None:
    try:
        return _MONOIDS.get(computation)
    except TypeError:                                   # unhashable: not one of those
        return None


_REDUCERS = {"add": (reduce_window_sum, ew.add), "max": (reduce_window_max, ew.max),
             "min": (reduce_window_min, ew.min)}


def _is_identity(kind: str, init, dtype) -> bool:
    """Whether `init` is known now to be the identity of `kind` on `dtype` (JAX's rule)."""
    if not is_concrete(init):
        return False
    identity = {"add": np.zeros((), dtype), "max": max_identity(dtype),
                "min": min_identity(dtype)}[kind]
    return bool(np.asarray(init) == identity)


def init_like(name: str, init_value, dtype):
    """A scalar `init_value` in `dtype`, for reduce_window and lax.reduce: a weakly typed
    value is converted (a Python number only if it fits the dtype); another dtype is an
    error, as jax."""
    aval = get_aval(init_value)
    if aval.dtype == dtype:
        return init_value
    if not aval.weak_type:
        raise TypeError(f"{name}: init_value has dtype {aval.dtype.name} but the operand "
                        f"has dtype {np.dtype(dtype).name}; they must match")
    if is_concrete(init_value):                        # a Python number: must fit the dtype
        value = np.asarray(init_value)
        with np.errstate(invalid="ignore", over="ignore"):
            cast = value.astype(dtype)
        if not (cast == value or (value != value and cast != cast)):
            raise TypeError(f"{name}: init_value {init_value!r} cannot be represented "
                            f"in the operand's dtype {np.dtype(dtype).name}")
    return logic.convert_element_type(init_value, dtype, False)


def _real_elements(shape, out_shape, *, window_dimensions, window_strides, padding,
                   base_dilation, window_dilation) -> list:
    """For each window position k (row-major), a bool [*out] array: whether each window's
    k-th element is an element of the operand (not a pad or a dilation hole)."""
    dilated = [_dilate(d, b) for d, b in zip(shape, base_dilation)]
    real = np.zeros(dilated, bool)
    real[tuple(slice(None, None, b) for b in base_dilation)] = True
    real = np.pad(real, [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    real = real[tuple(slice(max(-lo, 0), real.shape[i] - max(-hi, 0))
                      for i, (lo, hi) in enumerate(padding))]
    masks = []
    for offsets in itertools.product(*(range(w) for w in window_dimensions)):
        masks.append(real[tuple(slice(o * wd, o * wd + (n - 1) * s + 1, s) for o, wd, n, s
                                in zip(offsets, window_dilation, out_shape, window_strides))])
    return masks


def _fold_windows(computation, operand, init, params):
    """Any other computation, as XLA's CPU backend computes it: each window's elements
    folded into `init` in row-major window order, out = f(...f(f(init, w_0), w_1)...),
    pads and dilation holes skipped. Built from K strided slices and K calls of
    `computation` on [*out] arrays (selects where some windows' k-th element is a pad),
    so it differentiates and batches as those do."""
    aval = get_aval(operand)
    out_shape = _check_window("reduce_window", aval.shape, **params)
    acc = so.broadcast_in_dim(init, out_shape, ())
    windows = _window_positions(operand, init, out_shape, **params)
    for window, real in zip(windows, _real_elements(aval.shape, out_shape, **params)):
        if not real.any():
            continue
        new = computation(acc, window)
        if get_aval(new).shape != out_shape or get_aval(new).dtype != aval.dtype:
            raise TypeError(f"reduce_window: computation must map two arrays of shape "
                            f"{out_shape} and dtype {aval.dtype.name} to one of the same "
                            f"shape and dtype; it gave {get_aval(new).str_short()}")
        acc = new if real.all() else logic.select_n(real, acc, new)
    return acc


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """`computation` over each window of `operand` (lax.reduce_window, XLA's ReduceWindow).

    operand [*dims] -> [*out] (out per the module docstring). With lax.add (or
    operator.add), lax.max or lax.min the operand is padded, base-dilated and reduced with
    that operation's identity by the primitive, then combined with `init_value` once per
    window (what XLA computes); any other elementwise `computation` (lax.mul,
    jnp.logaddexp, a function of two arrays) is folded over the window's elements from
    `init_value`, pads and holes skipped (`_fold_windows`). Max pooling of NHWC
    images is
    `reduce_window(x, -inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')`. `padding` is
    'VALID', 'SAME', 'SAME_LOWER' (padtype_to_pads of the operand's shape and the dilated
    window) or one (low, high) pair per dim; strides and dilations default to 1.
    """
    name = "reduce_window"
    if isinstance(operand, (tuple, list, dict)):
        raise NotImplementedError(
            f"{name}: operand must be one array, got a {type(operand).__name__}: fnad does not "
            f"support pytrees of operands (variadic reduce_window); reduce each array "
            f"separately")
    kind = _monoid(computation)
    aval = get_aval(operand)
    if kind is not None:
        check_kind(name, aval, NUM if kind == "add" else ORDERED, f" with lax.{kind}")
    elif not callable(computation):
        raise TypeError(f"{name}: computation must be a function of two arrays, got "
                        f"{computation!r}")
    if get_aval(init_value).ndim != 0:
        raise TypeError(f"{name}: init_value must be a scalar, got shape "
                        f"{get_aval(init_value).shape}")
    if isinstance(padding, str):                       # pads from the dilated window's shape
        dims = _ints(name, "window_dimensions", window_dimensions, aval.ndim)
        strides = _ints(name, "window_strides", window_strides, len(dims), 1)
        base = _ints(name, "base_dilation", base_dilation, len(dims), 1)
        dilation = _ints(name, "window_dilation", window_dilation, len(dims), 1)
        _check_window(name, aval.shape, dims, strides, ((0, 0),) * aval.ndim, base, dilation)
        padding = padtype_to_pads(aval.shape, [_dilate(w, d) for w, d in zip(dims, dilation)],
                                  strides, padding)
    params = _params(name, operand, window_dimensions, window_strides, padding,
                     base_dilation, window_dilation)
    if kind is None:
        return _fold_windows(computation, operand, init_like(name, init_value, aval.dtype),
                             params)
    reducer, combine = _REDUCERS[kind]
    out = reducer(operand, **params)
    if _is_identity(kind, init_value, aval.dtype):
        return out
    return combine(out, init_like(name, init_value, aval.dtype))   # XLA: init ⊕ each window

"""NaN-skipping reductions and assorted array routines: nansum ... nancumprod, diff,
ediff1d, gradient, trapezoid, roll, kron, cross, convolve / correlate, cov / corrcoef,
interp, select, diagflat, trim_zeros, unwrap.

Composed from the other fnad.numpy functions (looked up at call time) and lax.
Imports fnad.lax, the sort primitives, fnad.numpy._core and fnad.numpy._indexing.
"""
from __future__ import annotations

import operator

import numpy as np

from fnad import dtypes, lax
import fnad.numpy as jnp
from fnad.numpy._core import (
    asarray,
    canonicalize_axis,
    check_arraylike,
    promote_dtypes,
    promote_dtypes_inexact,
)
from fnad.primitives.sorting import sort_key_val
from fnad.numpy._indexing import _concrete, _is_traced, getitem, take

__all__ = ["convolve", "corrcoef", "correlate", "cov", "cross", "diagflat", "diff", "ediff1d",
           "gradient", "interp", "kron", "nanargmax", "nanargmin", "nancumprod", "nancumsum",
           "nanmax", "nanmean", "nanmin", "nanprod", "nanstd", "nansum", "nanvar", "roll",
           "select", "trapezoid", "trim_zeros", "unwrap"]


def _has_nans(a) -> bool:
    return dtypes.is_inexact(a.dtype)


def _masked(a, value, where=None):
    """`a` with NaNs (and positions where `where` is False) replaced by `value`."""
    drop = jnp.isnan(a) if _has_nans(a) else None
    if where is not None:
        off = jnp.logical_not(asarray(where))
        drop = off if drop is None else jnp.logical_or(drop, off)
    return a if drop is None else jnp.where(drop, value, a)


# ---- NaN-skipping reductions --------------------------------------------------------------
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """sum treating NaNs as zero."""
    _no_out("nansum", out)
    a = asarray(a)
    # (initial goes to sum, which casts it to the result's dtype, as JAX)
    return jnp.sum(_masked(a, 0, where), axis=axis, dtype=dtype, keepdims=keepdims,
                   initial=initial)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """prod treating NaNs as one."""
    _no_out("nanprod", out)
    a = asarray(a)
    return jnp.prod(_masked(a, 1, where), axis=axis, dtype=dtype, keepdims=keepdims,
                    initial=initial)


def _nan_extremum(name, reduce, fill, a, axis, keepdims, initial, where):
    if where is not None and initial is None:
        raise ValueError(f"fnad.numpy.{name}: reduction operation {name[3:]} does not have an "
                         "identity, so to use a where mask one has to specify 'initial'")
    a = asarray(a)
    # (initial goes to the reduction, which casts it to a's dtype, as JAX)
    if not _has_nans(a) and where is None:
        res = reduce(a, axis=axis, keepdims=keepdims, initial=initial)
    else:
        res = reduce(_masked(a, fill, where), axis=axis, keepdims=keepdims, initial=initial)
        if _has_nans(a) and initial is None:    # all-NaN slices give NaN (NumPy warns)
            all_nan = jnp.all(jnp.isnan(a) if where is None else jnp.logical_or(
                jnp.isnan(a), jnp.logical_not(asarray(where))), axis=axis, keepdims=keepdims)
            res = jnp.where(all_nan, np.nan, res)
    return res


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """max ignoring NaNs; NaN where a slice is all NaN."""
    _no_out("nanmax", out)
    return _nan_extremum("nanmax", jnp.max, -np.inf, a, axis, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """min ignoring NaNs; NaN where a slice is all NaN."""
    _no_out("nanmin", out)
    return _nan_extremum("nanmin", jnp.min, np.inf, a, axis, keepdims, initial, where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """mean over the non-NaN values; NaN where there are none."""
    _no_out("nanmean", out)
    a = asarray(a)
    if not _has_nans(a):
        return jnp.mean(a, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    dtype = dtypes.to_inexact_dtype(a.dtype) if dtype is None else dtype
    valid = jnp.logical_not(jnp.isnan(a))
    if where is not None:
        valid = jnp.logical_and(valid, asarray(where))
    count = jnp.sum(valid, axis=axis, dtype=dtype, keepdims=keepdims)
    total = jnp.sum(jnp.where(valid, a, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return jnp.true_divide(total, count)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """var over the non-NaN values (divisor: count - ddof; NaN where that is <= 0)."""
    _no_out("nanvar", out)
    a = asarray(a)
    if not _has_nans(a):
        return jnp.var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where)
    valid = jnp.logical_not(jnp.isnan(a))
    if where is not None:
        valid = jnp.logical_and(valid, asarray(where))
    mean = nanmean(a, axis=axis, keepdims=True, where=valid)
    centered = jnp.where(valid, jnp.subtract(a, mean), 0)
    sq = jnp.real(jnp.multiply(centered, jnp.conj(centered))) if dtypes.is_complex(a.dtype) \
        else jnp.square(centered)
    count = jnp.sum(valid, axis=axis, keepdims=keepdims)
    norm = jnp.subtract(count, ddof)
    bad = jnp.less_equal(norm, 0)
    total = jnp.sum(sq, axis=axis, keepdims=keepdims)
    res = jnp.true_divide(total, asarray(jnp.where(bad, 1, norm), total.dtype))
    res = jnp.where(bad, np.nan, res)
    return res if dtype is None else asarray(res, dtype)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None):
    """sqrt of nanvar."""
    return jnp.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where))


def _nan_arg(name, arg, fill, a, axis, keepdims):
    a = asarray(a)
    if not _has_nans(a):
        return arg(a, axis=axis, keepdims=keepdims)
    nan_mask = jnp.isnan(a)
    res = arg(jnp.where(nan_mask, fill, a), axis=axis, keepdims=keepdims)
    return jnp.where(jnp.all(nan_mask, axis=axis, keepdims=keepdims), -1, res)


def nanargmax(a, axis=None, out=None, keepdims=False):
    """argmax ignoring NaNs; -1 where a slice is all NaN (as JAX; NumPy raises)."""
    _no_out("nanargmax", out)
    return _nan_arg("nanargmax", jnp.argmax, -np.inf, a, axis, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=False):
    """argmin ignoring NaNs; -1 where a slice is all NaN (as JAX; NumPy raises)."""
    _no_out("nanargmin", out)
    return _nan_arg("nanargmin", jnp.argmin, np.inf, a, axis, keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """cumsum treating NaNs as zero."""
    _no_out("nancumsum", out)
    return jnp.cumsum(_masked(asarray(a), 0), axis=axis, dtype=dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """cumprod treating NaNs as one."""
    _no_out("nancumprod", out)
    return jnp.cumprod(_masked(asarray(a), 1), axis=axis, dtype=dtype)


def _no_out(name, out):
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to {name} is not supported.")


# ---- differences and shifts -----------------------------------------------------------------
def _edge(arr, value, axis):
    """`value` as a slab to concatenate to `arr` along `axis` (scalars broadcast)."""
    value = asarray(value)
    if value.ndim == 0:
        shape = list(arr.shape)
        shape[axis] = 1
        value = jnp.broadcast_to(value, tuple(shape))
    return value


def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The n-th discrete difference a[i+1] - a[i] along `axis` (!= for booleans)."""
    check_arraylike("diff", a)
    arr = asarray(a)
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if arr.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    if n == 0:
        return arr
    axis = canonicalize_axis(axis, arr.ndim)
    parts = ([_edge(arr, prepend, axis)] if prepend is not None else []) + [arr] + \
        ([_edge(arr, append, axis)] if append is not None else [])
    if len(parts) > 1:
        arr = jnp.concatenate(parts, axis=axis)
    op = jnp.not_equal if arr.dtype == np.bool_ else jnp.subtract
    for _ in range(n):
        m = arr.shape[axis]
        if m == 0:
            break
        arr = op(lax.slice_in_dim(arr, 1, m, axis=axis), lax.slice_in_dim(arr, 0, m - 1,
                                                                          axis=axis))
    return arr


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences of the flattened array, with optional values before and after."""
    arr = jnp.ravel(asarray(ary))
    m = arr.shape[0]
    res = jnp.subtract(lax.slice(arr, (1,), (max(m, 1),)), lax.slice(arr, (0,), (max(m - 1, 0),)))
    parts = [res]
    if to_begin is not None:
        parts.insert(0, jnp.ravel(asarray(to_begin, dtype=res.dtype)))
    if to_end is not None:
        parts.append(jnp.ravel(asarray(to_end, dtype=res.dtype)))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def gradient(f, *varargs, axis=None, edge_order: int | None = None):
    """The numerical gradient of `f` along each axis in `axis` (all by default): central
    differences inside, one-sided first differences at the two edges.

    varargs: the spacing, as one scalar for every axis, or one per axis (a scalar, or the
    coordinates along that axis as a 1-D array). One axis gives an array, several a list.
    """
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to fnad.numpy.gradient is not "
                                  "supported.")
    a, *spacing = promote_dtypes_inexact(*(asarray(v) for v in (f, *varargs)))
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(canonicalize_axis(d, a.ndim) for d in axes)
    if not axes:
        return []
    if min(a.shape[d] for d in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         f"2 elements are required along each axis, got shape {a.shape}")
    if not spacing:
        dx = [1.0] * len(axes)
    elif len(spacing) == 1:
        dx = spacing * len(axes)
    elif len(spacing) == len(axes):
        dx = spacing
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    grads = [_gradient_along(a, h, ax) for ax, h in zip(axes, dx)]
    return grads[0] if len(axes) == 1 else grads


def _gradient_along(a, h, axis: int):
    def sl(x, lo, hi):                                               # x[lo:hi] along axis
        return getitem(x, (slice(None),) * axis + (slice(lo, hi),))
    upper = jnp.subtract(sl(a, 1, 2), sl(a, 0, 1))                  # first difference
    lower = jnp.subtract(sl(a, -1, None), sl(a, -2, -1))            # last difference
    if np.ndim(h) == 0:
        inner = jnp.true_divide(jnp.multiply(jnp.subtract(sl(a, 2, None), sl(a, 0, -2)), 0.5), h)
        upper, lower = jnp.true_divide(upper, h), jnp.true_divide(lower, h)
    elif np.ndim(h) == 1:
        if h.shape[0] != a.shape[axis]:
            raise ValueError("Spacing arrays must have the same length as the dimension along "
                             f"which the gradient is calculated: {h.shape[0]} vs "
                             f"{a.shape[axis]} (axis {axis})")
        shape = [1] * a.ndim
        shape[axis] = h.shape[0]
        x = lax.reshape(h, tuple(shape))
        upper = jnp.true_divide(upper, jnp.subtract(sl(x, 1, 2), sl(x, 0, 1)))
        lower = jnp.true_divide(lower, jnp.subtract(sl(x, -1, None), sl(x, -2, -1)))
        dx1 = jnp.subtract(sl(x, 1, -1), sl(x, 0, -2))
        dx2 = jnp.subtract(sl(x, 2, None), sl(x, 1, -1))
        # Second-order differences on an uneven grid (NumPy's formula).
        ca = jnp.true_divide(jnp.negative(dx2), jnp.multiply(dx1, jnp.add(dx1, dx2)))
        cb = jnp.true_divide(jnp.subtract(dx2, dx1), jnp.multiply(dx1, dx2))
        cc = jnp.true_divide(dx1, jnp.multiply(dx2, jnp.add(dx1, dx2)))
        inner = jnp.add(jnp.add(jnp.multiply(ca, sl(a, 0, -2)), jnp.multiply(cb, sl(a, 1, -1))),
                        jnp.multiply(cc, sl(a, 2, None)))
    else:
        raise ValueError(f"Spacing arrays must be 1D arrays or scalars, got shape {h.shape}")
    return jnp.concatenate([upper, inner, lower], axis=axis)


def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """The integral of y along `axis` by the trapezoidal rule, at the sample points `x`
    (1-D, or y's shape) or with the constant spacing `dx`."""
    if x is None:
        (y,) = promote_dtypes_inexact(asarray(y))
        dx_arr = asarray(dx)
        if dx_arr.ndim > 0:
            dx_arr = lax.expand_dims(dx_arr, tuple(range(y.ndim - dx_arr.ndim)))
            dx_arr = jnp.moveaxis(dx_arr, axis, -1)
    else:
        y, x = promote_dtypes_inexact(asarray(y), asarray(x))
        dx_arr = jnp.diff(x) if x.ndim == 1 else jnp.moveaxis(jnp.diff(x, axis=axis), axis, -1)
    y = jnp.moveaxis(y, axis, -1)                                         # [..., N]
    if dx_arr.ndim == 0 or dx_arr.shape[-1] == 1:                         # constant spacing
        d = dx_arr if dx_arr.ndim == 0 else getitem(dx_arr, (Ellipsis, 0))
        ends = jnp.add(getitem(y, (Ellipsis, 0)), getitem(y, (Ellipsis, -1)))
        return jnp.multiply(d, jnp.subtract(jnp.sum(y, axis=-1), jnp.multiply(0.5, ends)))
    mids = jnp.add(getitem(y, (Ellipsis, slice(1, None))), getitem(y, (Ellipsis, slice(None, -1))))
    return jnp.multiply(0.5, jnp.sum(jnp.multiply(dx_arr, mids), axis=-1))


def roll(a, shift, axis=None):
    """Elements of `a` shifted by `shift` along `axis` (wrapping); a flattened roll if None.

    `shift` and `axis` may be tuples (broadcast against each other); a traced shift
    lowers to a dynamic_slice of `a` concatenated with itself.
    """
    arr = asarray(a)
    if axis is None:
        return lax.reshape(roll(jnp.ravel(arr), shift, 0), arr.shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(canonicalize_axis(d, arr.ndim) for d in axes)
    if _is_traced(shift):
        shift = asarray(shift)
        shifts = [shift] if shift.ndim == 0 else [getitem(shift, i)
                                                 for i in range(shift.shape[0])]
    else:
        shifts = [int(s) for s in np.ravel(_concrete(shift))]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"shift and axis must have the same length, got {len(shifts)} and "
                         f"{len(axes)}")
    for s, ax in zip(shifts, axes):
        arr = _roll_one(arr, s, ax)
    return arr


def _roll_one(arr, s, ax):
    n = arr.shape[ax]
    if n == 0:
        return arr
    if isinstance(s, int):
        s %= n
        if s == 0:
            return arr
        return lax.concatenate([lax.slice_in_dim(arr, n - s, n, axis=ax),
                                lax.slice_in_dim(arr, 0, n - s, axis=ax)], ax)
    s = jnp.remainder(s, n)                                   # in [0, n)
    start = jnp.remainder(jnp.subtract(n, s), n)
    both = lax.concatenate([arr, arr], ax)
    return lax.dynamic_slice_in_dim(both, start, n, axis=ax)


# ---- products -------------------------------------------------------------------------------
def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    if a.ndim < b.ndim:
        a = lax.expand_dims(a, tuple(range(b.ndim - a.ndim)))
    elif b.ndim < a.ndim:
        b = lax.expand_dims(b, tuple(range(a.ndim - b.ndim)))
    nd = a.ndim
    a_r = lax.expand_dims(a, tuple(range(1, 2 * nd, 2)))       # [a0, 1, a1, 1, ...]
    b_r = lax.expand_dims(b, tuple(range(0, 2 * nd, 2)))       # [1, b0, 1, b1, ...]
    out_shape = tuple(int(x) * int(y) for x, y in zip(a.shape, b.shape))
    return lax.reshape(jnp.multiply(a_r, b_r), out_shape)


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None):
    """The cross product of 2- or 3-vectors along the given axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a = jnp.moveaxis(asarray(a), axisa, -1)
    b = jnp.moveaxis(asarray(b), axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")

    def comp(v, i):
        if i >= v.shape[-1]:
            return jnp.zeros_like(getitem(v, (Ellipsis, 0)))
        return getitem(v, (Ellipsis, i))
    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    mul, sub = jnp.multiply, jnp.subtract
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return sub(mul(a0, b1), mul(a1, b0))
    c = jnp.stack([sub(mul(a1, b2), mul(a2, b1)), sub(mul(a2, b0), mul(a0, b2)),
                   sub(mul(a0, b1), mul(a1, b0))], axis=-1)
    return jnp.moveaxis(c, -1, axisc)


def _correlate1d(a, v, mode: str, flip_v: bool, name: str):
    a, v = promote_dtypes(asarray(a), asarray(v))
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}() only supports 1-dimensional inputs.")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {a.shape} and {v.shape}.")
    flip_out = False
    if v.shape[0] > a.shape[0]:
        a, v = v, a
        flip_out = not flip_v
    if flip_v:
        v = lax.rev(v, (0,))
    elif dtypes.is_complex(v.dtype):
        if flip_out:
            a = jnp.conj(a)
        else:
            v = jnp.conj(v)
    n, m = a.shape[0], v.shape[0]
    pads = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}
    if mode not in pads:
        raise ValueError(f"mode must be one of ['full', 'same', 'valid'], got {mode!r}")
    lo, hi = pads[mode]
    ap = lax.pad(a, lax.full((), 0, a.dtype), ((lo, hi, 0),))            # [n + lo + hi]
    L = n + lo + hi - m + 1
    windows = take(ap, np.arange(L)[:, None] + np.arange(m)[None, :], mode="clip")  # [L, m]
    out = jnp.sum(jnp.multiply(windows, v), axis=1)                        # [L]
    return lax.rev(out, (0,)) if flip_out else out


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """The discrete 1-D convolution of `a` and `v` (modes full, same, valid)."""
    return _correlate1d(a, v, mode, True, "convolve")


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """The 1-D cross-correlation sum_n a[n + k] * conj(v[n]) (modes full, same, valid)."""
    return _correlate1d(a, v, mode, False, "correlate")


# ---- statistics -----------------------------------------------------------------------------
def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows (columns if not rowvar) of m."""
    if y is not None:
        m, y = promote_dtypes_inexact(asarray(m), asarray(y))
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    else:
        m, = promote_dtypes_inexact(asarray(m))
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    X = jnp.atleast_2d(m)
    if not rowvar and X.shape[0] != 1:
        X = jnp.transpose(X)
    if X.shape[0] == 0:
        return jnp.zeros((0, 0), X.dtype)
    if y is not None:
        Y = jnp.atleast_2d(y)
        if not rowvar and Y.shape[0] != 1:
            Y = jnp.transpose(Y)
        X = jnp.concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 1 if not bias else 0
    w = None
    if fweights is not None:
        w = asarray(fweights)
        if w.ndim != 1 or w.shape[0] != X.shape[1]:
            raise ValueError("fweights must be 1-D with one weight per observation")
    if aweights is not None:
        aw = asarray(aweights)
        if aw.ndim != 1 or aw.shape[0] != X.shape[1]:
            raise ValueError("aweights must be 1-D with one weight per observation")
        w = aw if w is None else jnp.multiply(w, aw)
    if w is None:
        avg = jnp.mean(X, axis=1)                                           # [V]
        f = X.shape[1] - ddof
    else:
        w = asarray(w, X.dtype)
        w_sum = jnp.sum(w)
        avg = jnp.true_divide(jnp.sum(jnp.multiply(X, w), axis=1), w_sum)
        if ddof == 0:
            f = w_sum
        elif aweights is None:
            f = jnp.subtract(w_sum, ddof)
        else:
            f = jnp.subtract(w_sum, jnp.true_divide(
                jnp.multiply(ddof, jnp.sum(jnp.multiply(w, asarray(aweights)))), w_sum))
    X = jnp.subtract(X, lax.expand_dims(avg, (1,)))                          # [V, N]
    Xw = X if w is None else jnp.multiply(X, w)
    c = jnp.matmul(X, jnp.transpose(jnp.conj(Xw)))                                        # [V, V]
    c = jnp.true_divide(c, f)
    return jnp.squeeze(c)


def corrcoef(x, y=None, rowvar: bool = True):
    """Pearson correlation coefficients: cov / (std_i * std_j), clipped to [-1, 1]."""
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return jnp.true_divide(c, c)
    n = c.shape[0]
    d = take(jnp.ravel(c), np.arange(n) * (n + 1))                          # diag(c)
    std = jnp.sqrt(jnp.real(d))
    c = jnp.true_divide(jnp.true_divide(c, lax.expand_dims(std, (1,))), std)
    if dtypes.is_complex(c.dtype):
        return lax.complex(jnp.clip(jnp.real(c), -1, 1), jnp.clip(jnp.imag(c), -1, 1))
    return jnp.clip(c, -1, 1)


# ---- interpolation and selection ------------------------------------------------------------
def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of (xp, fp) at x (xp increasing)."""
    x, xp_arr = promote_dtypes_inexact(asarray(x), asarray(xp))
    fp_arr = asarray(fp)
    if xp_arr.ndim != 1 or fp_arr.ndim != 1 or xp_arr.shape != fp_arr.shape:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    if dtypes.is_complex(fp_arr.dtype):
        fp_arr = asarray(fp_arr, dtypes.promote_types(fp_arr.dtype, x.dtype))
    else:
        fp_arr = asarray(fp_arr, x.dtype)
    if period is not None:
        if np.ndim(period) != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = jnp.abs(period)
        x = jnp.remainder(x, period)
        xp_arr = jnp.remainder(xp_arr, period)
        xp_arr, fp_arr = sort_key_val(xp_arr, fp_arr)
        last, first = slice(-1, None), slice(None, 1)
        xp_arr = jnp.concatenate([jnp.subtract(getitem(xp_arr, last), period), xp_arr,
                                  jnp.add(getitem(xp_arr, first), period)])
        fp_arr = jnp.concatenate([getitem(fp_arr, last), fp_arr, getitem(fp_arr, first)])
    n = xp_arr.shape[0]
    from fnad.numpy._sorting import searchsorted
    i = jnp.clip(searchsorted(xp_arr, x, side="right"), 1, n - 1)
    i0 = jnp.subtract(i, 1)
    fp0, fp1 = take(fp_arr, i0, mode="clip"), take(fp_arr, i, mode="clip")
    xp0, xp1 = take(xp_arr, i0, mode="clip"), take(xp_arr, i, mode="clip")
    df = jnp.subtract(fp1, fp0)
    dx = jnp.subtract(xp1, xp0)
    delta = jnp.subtract(x, xp0)
    eps = np.spacing(np.finfo(np.dtype(xp_arr.dtype)).eps)
    dx0 = jnp.less_equal(jnp.abs(dx), eps)        # avoids NaN gradients for repeated xp
    f = jnp.where(dx0, fp0, jnp.add(fp0, jnp.multiply(jnp.true_divide(
        delta, jnp.where(dx0, 1, dx)), df)))
    if period is None:
        first, last = take(fp_arr, 0), take(fp_arr, n - 1)
        f = jnp.where(jnp.less(x, take(xp_arr, 0)), first if left is None else left, f)
        f = jnp.where(jnp.greater(x, take(xp_arr, n - 1)), last if right is None else right,
                      f)
    return f


def select(condlist, choicelist, default=0):
    """choicelist[k] where condlist[k] is the first true condition, else default."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    choices = promote_dtypes(default, *choicelist)
    out = choices[0]
    for cond, choice in zip(reversed(condlist), reversed(choices[1:])):
        out = jnp.where(asarray(cond, np.bool_), choice, out)
    return out


# ---- diagflat, trim_zeros, unwrap -----------------------------------------------------------
def diagflat(v, k: int = 0):
    """The 2-D array with the flattened `v` on its k-th diagonal."""
    return jnp.diag(jnp.ravel(asarray(v)), k)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """`filt` without its leading ('f') and/or trailing ('b') zeros (along each of `axis`,
    all axes by default: the bounding box of the nonzeros). The values must be concrete:
    the result's shape depends on them, as in JAX."""
    arr = asarray(filt)
    if _is_traced(arr):
        from fnad import core
        raise core.ConcretizationTypeError(
            f"fnad.numpy.trim_zeros of a traced array {core.get_aval(arr).str_short()}: the "
            "result's shape depends on the values")
    trim = trim.lower()
    if any(c not in "fb" for c in trim):
        raise ValueError(f"fnad.numpy.trim_zeros: trim must be made of 'f' and 'b', got "
                         f"{trim!r}")
    if arr.ndim == 0:
        raise ValueError("fnad.numpy.trim_zeros needs an array of rank >= 1, got a scalar")
    values = np.asarray(_concrete(arr))
    axes = range(arr.ndim) if axis is None else (
        [canonicalize_axis(a, arr.ndim) for a in np.atleast_1d(axis)])
    index = [slice(None)] * arr.ndim
    for a in axes:
        nz = np.flatnonzero(np.any(values != 0, axis=tuple(i for i in range(arr.ndim)
                                                            if i != a)))
        if nz.size == 0:
            index[a] = slice(0, 0)
            continue
        index[a] = slice(nz[0] if "f" in trim else 0,
                         nz[-1] + 1 if "b" in trim else values.shape[a])
    return getitem(arr, tuple(index))


def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """`p` with each jump larger than `discont` (default period/2) between neighbours
    along `axis` replaced by its remainder modulo `period` (phases made continuous)."""
    p, period = promote_dtypes(asarray(p), period)
    if dtypes.issubdtype(p.dtype, np.complexfloating):
        raise ValueError("fnad.numpy.unwrap does not support complex inputs")
    axis = canonicalize_axis(axis, p.ndim)
    if p.shape[axis] == 0:
        return p
    if discont is None:
        discont = period / 2
    half = period // 2 if dtypes.issubdtype(p.dtype, np.integer) else period / 2
    d = jnp.diff(p, axis=axis)
    wrapped = jnp.mod(d + half, period) - half                 # in [-half, half)
    wrapped = jnp.where((wrapped == -half) & (d > 0), half, wrapped)
    correction = jnp.where(jnp.abs(d) < discont, 0, wrapped - d)
    first = lax.slice_in_dim(p, 0, 1, axis=axis)
    rest = lax.slice_in_dim(p, 1, None, axis=axis) + jnp.cumsum(correction, axis=axis)
    return jnp.concatenate([first, rest.astype(p.dtype)], axis=axis)

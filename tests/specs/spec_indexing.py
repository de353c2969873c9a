"""Specs of gather and the scatters (embedding lookups, take_along_axis, x[i, :, j],
batching dims, windows, every out-of-bounds mode, repeated indices).

Index arguments are int32 arrays drawn by `domain` callables; `ix.X` builds the
fnad dimension numbers and `_jax_dn` the same ones for jax.lax. References are
plain NumPy fancy indexing and `ufunc.at` loops written independently of the
backend's implementation.
"""
import numpy as np

from fnad.primitives import indexing as ix
from specs import Arg, Spec

f32, c64, i32, b = np.float32, np.complex64, np.int32, np.bool_
GDN, SDN, Mode = ix.GatherDimensionNumbers, ix.ScatterDimensionNumbers, ix.GatherScatterMode


def _jax_dn(jax, dn):
    cls = (jax.lax.GatherDimensionNumbers if isinstance(dn, GDN)
           else jax.lax.ScatterDimensionNumbers)
    return cls(*dn)


def _jax_mode(jax, mode):
    return None if mode is None else jax.lax.GatherScatterMode[Mode.from_any(mode).name]


def idx(shape, lo, hi):
    """int32 indices drawn uniformly from [lo, hi)."""
    return Arg(shape, i32, (lo, hi))


def unique_idx(n, size, trailing=True):
    """n distinct int32 indices into a dim of `size`, shape (n, 1) (or (n,))."""
    shape = (n, 1) if trailing else (n,)
    return Arg(shape, i32, lambda rng: rng.permutation(size)[:n].astype(i32).reshape(shape))


# ---- gather --------------------------------------------------------------------------------
def gather_spec(operand, indices, dn, slice_sizes, ref, name, mode=None, fill_value=None,
                linear=(0,), **kw):
    return Spec(ix.gather_p,
                lambda x, i: ix.gather(x, i, dn, slice_sizes, mode=mode, fill_value=fill_value),
                ref, (operand, indices),
                jax_fun=lambda jax, x, i: jax.lax.gather(
                    x, i, _jax_dn(jax, dn), slice_sizes, mode=_jax_mode(jax, mode),
                    fill_value=fill_value),
                linear=linear, name=name, **kw)


EMBED = GDN(offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,))
ALONG1 = GDN(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
             operand_batching_dims=(0,), start_indices_batching_dims=(0,))
I_COLON_J = GDN(offset_dims=(2,), collapsed_slice_dims=(0, 2), start_index_map=(0, 2))
WINDOW = GDN(offset_dims=(0, 2), collapsed_slice_dims=(), start_index_map=(1, 0))
ROW = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
SCALAR = GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))


def _window_ref(x, i, sizes, clip=True, fill=None):
    """WINDOW: out[h, b, w] = x[i[b,1] + h, i[b,0] + w] (start_index_map (1, 0))."""
    out = np.empty((sizes[0], i.shape[0], sizes[1]), x.dtype)
    for k, (c, r) in enumerate(i):
        lo_r, lo_c = np.clip(r, 0, x.shape[0] - sizes[0]), np.clip(c, 0, x.shape[1] - sizes[1])
        ok = 0 <= r <= x.shape[0] - sizes[0] and 0 <= c <= x.shape[1] - sizes[1]
        block = x[lo_r:lo_r + sizes[0], lo_c:lo_c + sizes[1]]
        out[:, k, :] = block if clip or ok else fill
    return out


def _fill_rows(x, i, fill):
    rows = np.clip(i[..., 0], 0, x.shape[0] - 1)
    ok = (i[..., 0] >= 0) & (i[..., 0] < x.shape[0])
    return np.where(ok[..., None], x[rows], np.asarray(fill, x.dtype))


GATHER_SPECS = [
    gather_spec(Arg((10, 4)), idx((2, 3, 1), 0, 10), EMBED, (1, 4),
                lambda x, i: x[i[..., 0]], "embedding"),
    gather_spec(Arg((10, 4), i32, (-9, 9)), idx((2, 3, 1), 0, 10), EMBED, (1, 4),
                lambda x, i: x[i[..., 0]], "embedding-int32", diff=(), linear=()),
    gather_spec(Arg((6, 3), c64), idx((4, 1), 0, 6), ROW, (1, 3),
                lambda x, i: x[i[:, 0]], "rows-complex64", rtol=0, atol=0),
    gather_spec(Arg((6, 3), b), idx((4, 1), 0, 6), ROW, (1, 3),
                lambda x, i: x[i[:, 0]], "rows-bool", diff=(), linear=()),
    gather_spec(Arg((4, 7)), idx((4, 5, 1), 0, 7), ALONG1, (1, 1),
                lambda x, i: np.take_along_axis(x, i[..., 0], axis=1),
                "take_along_axis-batching-dims"),
    gather_spec(Arg((5, 6, 7)), Arg((2, 3, 2), i32, lambda rng: np.stack(
                    [rng.integers(0, 5, (2, 3)), rng.integers(0, 7, (2, 3))], -1).astype(i32)),
                I_COLON_J, (1, 6, 1), lambda x, i: x[i[..., 0], :, i[..., 1]], "x[i,:,j]"),
    gather_spec(Arg((7,)), idx((1,), 0, 7), SCALAR, (1,), lambda x, i: x[i[0]], "rank0-out"),
    gather_spec(Arg((5, 3)), idx((0, 1), 0, 5), ROW, (1, 3), lambda x, i: x[i[:, 0]],
                "empty-indices"),
    gather_spec(Arg((5, 0)), idx((3, 1), 0, 5), ROW, (1, 0), lambda x, i: x[i[:, 0]],
                "empty-window"),
    gather_spec(Arg((8, 9)), idx((4, 2), 0, 6), WINDOW, (3, 2),
                lambda x, i: _window_ref(x, i, (3, 2)), "window"),
    # out of bounds under PROMISE_IN_BOUNDS (the default): values clamp, but the transpose
    # drops (as in JAX), so there is no dot-product test
    gather_spec(Arg((8, 9)), idx((4, 2), -3, 11), WINDOW, (3, 2),
                lambda x, i: _window_ref(x, i, (3, 2)), "window-default-clamps", linear=()),
    gather_spec(Arg((8, 9)), idx((4, 2), -3, 11), WINDOW, (3, 2),
                lambda x, i: _window_ref(x, i, (3, 2)), "window-clip", mode="clip"),
    gather_spec(Arg((8, 9)), idx((5, 2), -3, 11), WINDOW, (3, 2),
                lambda x, i: _window_ref(x, i, (3, 2), clip=False, fill=np.nan),
                "window-fill-nan", mode=Mode.FILL_OR_DROP, diff=()),
    gather_spec(Arg((8, 9)), idx((5, 2), -3, 11), WINDOW, (3, 2),
                lambda x, i: _window_ref(x, i, (3, 2), clip=False, fill=-1.0),
                "window-fill-value", mode="fill", fill_value=-1.0),
    gather_spec(Arg((6, 2)), idx((3, 4, 1), -4, 10), EMBED, (1, 2),
                lambda x, i: _fill_rows(x, i, np.nan), "embedding-fill-nan", mode="fill",
                diff=()),
    gather_spec(Arg((6, 2), i32, (-9, 9)), idx((3, 4, 1), -4, 10), EMBED, (1, 2),
                lambda x, i: _fill_rows(x, i, np.iinfo(i32).min), "int32-fill-min",
                mode="fill", diff=(), linear=()),
    gather_spec(Arg((6, 2)), idx((3, 4, 1), -4, 10), EMBED, (1, 2),
                lambda x, i: x[np.clip(i[..., 0], 0, 5)], "embedding-promise-oob",
                mode="promise_in_bounds", linear=()),
    gather_spec(Arg((6, 2)), idx((3, 4, 1), 0, 6), EMBED, (1, 2),
                lambda x, i: x[i[..., 0]], "embedding-promise-in-bounds",
                mode="promise_in_bounds"),
]


# ---- scatters --------------------------------------------------------------------------------
def scatter_spec(fn, prim, operand, indices, updates, dn, ref, name, mode=None, unique=False,
                 linear=(), jax_name=None, **kw):
    jax_name = jax_name or fn.__name__
    return Spec(prim, lambda x, i, u: fn(x, i, u, dn, mode=mode, unique_indices=unique), ref,
                (operand, indices, updates),
                jax_fun=lambda jax, x, i, u: getattr(jax.lax, jax_name)(
                    x, i, u, _jax_dn(jax, dn), mode=_jax_mode(jax, mode),
                    unique_indices=unique),
                linear=linear, name=name, **kw)


S_EMBED = SDN(update_window_dims=(2,), inserted_window_dims=(0,),
              scatter_dims_to_operand_dims=(0,))
S_ELEM = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
S_ROW = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
S_ALONG1 = SDN(update_window_dims=(), inserted_window_dims=(1,),
               scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
               scatter_indices_batching_dims=(0,))
S_WINDOW = SDN(update_window_dims=(0, 2), inserted_window_dims=(),
               scatter_dims_to_operand_dims=(1, 0))


def _at(ufunc, drop_oob=True):
    """Reference for 1-D element scatters (S_ELEM): ufunc.at, out-of-bounds dropped."""
    def ref(x, i, u):
        out = np.array(x, copy=True)
        ok = (i[:, 0] >= 0) & (i[:, 0] < x.shape[0]) if drop_oob else slice(None)
        ufunc.at(out, i[ok, 0] if drop_oob else np.clip(i[:, 0], 0, x.shape[0] - 1), u[ok])
        return out
    return ref


def _set_last(x, i, u, drop_oob=True):
    out = np.array(x, copy=True)
    for k in range(i.shape[0]):                      # in order: the last write wins
        j = i[k, 0]
        if 0 <= j < x.shape[0] or not drop_oob:
            out[np.clip(j, 0, x.shape[0] - 1)] = u[k]
    return out


def _at_rows(ufunc, x, i, u):
    """Row scatters (S_ROW, S_EMBED): ufunc.at over the rows i[..., 0] (all in bounds)."""
    out = np.array(x, copy=True)
    ufunc.at(out, i[..., 0], u)
    return out


def _rows_add(x, i, u):
    return _at_rows(np.add, x, i, u)


def _set_rows(x, i, u):
    out = np.array(x, copy=True)
    rows, vals = i[..., 0].reshape(-1), u.reshape((-1,) + x.shape[1:])
    for r, v in zip(rows, vals, strict=True):         # in order: the last write wins
        out[r] = v
    return out


def _along_add(x, i, u):
    out = np.array(x, copy=True)
    np.add.at(out, (np.arange(x.shape[0])[:, None], i[..., 0]), u)
    return out


def _window_op(op, x, i, u, clip=True):
    """S_WINDOW: out[i[b,1] + h, i[b,0] + w] = op(out[...], u[h, b, w]) (op None: set)."""
    out = np.array(x, copy=True)
    H, _, W = u.shape
    for k, (c, r) in enumerate(i):
        ok = 0 <= r <= x.shape[0] - H and 0 <= c <= x.shape[1] - W
        if clip:
            r, c = np.clip(r, 0, x.shape[0] - H), np.clip(c, 0, x.shape[1] - W)
        elif not ok:
            continue
        block = out[r:r + H, c:c + W]
        out[r:r + H, c:c + W] = u[:, k, :] if op is None else op(block, u[:, k, :])
    return out


def _window_add(x, i, u, clip):
    return _window_op(np.add, x, i, u, clip)


SA, SM, SMIN, SMAX, SET = (ix.scatter_add, ix.scatter_mul, ix.scatter_min, ix.scatter_max,
                           ix.scatter)
SCATTER_SPECS = [
    # scatter_add: the embedding gradient, repeated indices accumulate
    scatter_spec(SA, ix.scatter_add_p, Arg((5, 3)), idx((2, 4, 1), 0, 5), Arg((2, 4, 3)),
                 S_EMBED, _rows_add, "embedding-grad-repeated", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((6,)), idx((8, 1), -2, 8), Arg((8,)), S_ELEM,
                 _at(np.add), "elements-oob-dropped", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((6,)), idx((8, 1), -2, 8), Arg((8,)), S_ELEM,
                 _at(np.add, drop_oob=False), "elements-clip", mode="clip", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((4, 7)), idx((4, 5, 1), 0, 7), Arg((4, 5)),
                 S_ALONG1, _along_add, "batching-dims", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((8, 9)), idx((4, 2), -3, 11), Arg((3, 4, 2)),
                 S_WINDOW, lambda x, i, u: _window_add(x, i, u, clip=False),
                 "window-dropped", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((8, 9)), idx((4, 2), -3, 11), Arg((3, 4, 2)),
                 S_WINDOW, lambda x, i, u: _window_add(x, i, u, clip=True),
                 "window-clip", mode="clip", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((5, 3), c64), idx((4, 1), 0, 5), Arg((4, 3), c64),
                 S_ROW, _rows_add, "complex64", linear=(0, 2)),
    scatter_spec(SA, ix.scatter_add_p, Arg((5, 3), i32, (-9, 9)), idx((4, 1), 0, 5),
                 Arg((4, 3), i32, (-9, 9)), S_ROW, _rows_add, "int32", diff=()),
    scatter_spec(SA, ix.scatter_add_p, Arg((5, 3)), idx((0, 1), 0, 5), Arg((0, 3)),
                 S_ROW, _rows_add, "empty-updates", linear=(0, 2)),
    # scatter_mul: linear in the operand; updates gradients need unique indices (as JAX)
    scatter_spec(SM, ix.scatter_mul_p, Arg((6,)), idx((8, 1), -2, 8),
                 Arg(static=np.linspace(-1.5, 2.0, 8)), S_ELEM, _at(np.multiply),
                 "repeated-operand-only", linear=(0,)),
    scatter_spec(SM, ix.scatter_mul_p, Arg((6,)), unique_idx(4, 6), Arg((4,)), S_ELEM,
                 _at(np.multiply), "unique", unique=True, linear=(0,)),
    scatter_spec(SM, ix.scatter_mul_p, Arg((5, 3), c64), unique_idx(3, 5), Arg((3, 3), c64),
                 S_ROW, lambda x, i, u: _at_rows(np.multiply, x, i, u), "complex64-unique",
                 unique=True, linear=(0,)),
    scatter_spec(SM, ix.scatter_mul_p, Arg((5, 3), i32, (-3, 3)), idx((4, 1), 0, 5),
                 Arg((4, 3), i32, (-3, 3)), S_ROW, lambda x, i, u: _at_rows(np.multiply, x, i, u),
                 "int32", diff=()),
    # scatter_min / scatter_max: repeated indices; the winner's tangent
    scatter_spec(SMIN, ix.scatter_min_p, Arg((6,)), idx((9, 1), -1, 7), Arg((9,)), S_ELEM,
                 _at(np.minimum), "repeated"),
    scatter_spec(SMAX, ix.scatter_max_p, Arg((6,)), idx((9, 1), -1, 7), Arg((9,)), S_ELEM,
                 _at(np.maximum), "repeated"),
    scatter_spec(SMAX, ix.scatter_max_p, Arg((5, 3)), idx((2, 4, 1), 0, 5), Arg((2, 4, 3)),
                 S_EMBED, lambda x, i, u: _at_rows(np.maximum, x, i, u), "rows"),
    # in-bounds windows: JAX's min/max JVP counts clipped updates as dropped (fnad clips
    # them consistently; tests/test_indexing_errors.py checks that case by differences)
    scatter_spec(SMIN, ix.scatter_min_p, Arg((8, 9)), idx((4, 2), 0, 6), Arg((3, 4, 2)),
                 S_WINDOW, lambda x, i, u: _window_op(np.minimum, x, i, u), "window-clip",
                 mode="clip"),
    scatter_spec(SMAX, ix.scatter_max_p, Arg((5,), i32, (-9, 9)), idx((6, 1), 0, 5),
                 Arg((6,), i32, (-9, 9)), S_ELEM, _at(np.maximum), "int32", diff=()),
    scatter_spec(SMIN, ix.scatter_min_p, Arg((5,), b), idx((6, 1), 0, 5), Arg((6,), b), S_ELEM,
                 _at(np.minimum), "bool", diff=()),
    # scatter (set): unique and repeated indices (the last update wins)
    scatter_spec(SET, ix.scatter_p, Arg((6,)), unique_idx(4, 6), Arg((4,)), S_ELEM,
                 _set_last, "unique", unique=True),
    scatter_spec(SET, ix.scatter_p, Arg((6,)), idx((9, 1), -1, 7), Arg((9,)), S_ELEM,
                 _set_last, "repeated"),
    scatter_spec(SET, ix.scatter_p, Arg((6,)), idx((9, 1), -1, 7), Arg((9,)), S_ELEM,
                 lambda x, i, u: _set_last(x, i, u, drop_oob=False), "repeated-clip",
                 mode="clip"),
    scatter_spec(SET, ix.scatter_p, Arg((5, 3)), idx((2, 4, 1), 0, 5), Arg((2, 4, 3)),
                 S_EMBED, lambda x, i, u: _set_rows(x, i, u), "rows-repeated"),
    scatter_spec(SET, ix.scatter_p, Arg((8, 9)), idx((4, 2), -3, 11), Arg((3, 4, 2)),
                 S_WINDOW, lambda x, i, u: _window_op(None, x, i, u), "window-overlapping",
                 mode="clip"),
    scatter_spec(SET, ix.scatter_p, Arg((5, 3), c64), unique_idx(3, 5), Arg((3, 3), c64),
                 S_ROW, lambda x, i, u: _set_rows(x, i, u), "complex64-unique", unique=True),
    scatter_spec(SET, ix.scatter_p, Arg((5,), b), idx((6, 1), 0, 5), Arg((6,), b), S_ELEM,
                 _set_last, "bool", diff=()),
]

SPECS = GATHER_SPECS + SCATTER_SPECS

"""fnad.lax primitives against jax.lax on the corner cases a differential search found
wrong: values, dtypes, derivatives, batching and errors, eager and under jit (numba, xla).

Each test is one behaviour, parametrized over its cases; jax is the oracle (central
finite differences where jax's own derivative is wrong, which the test says).
"""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad import lax

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
jnp, jl = jax.numpy, jax.lax
BF16 = jnp.bfloat16
JIT_BACKENDS = ("numba", "xla")


def _run(fn, args, mode):
    """fn(fnad.lax, *args) eagerly or under jit on `mode`'s backend."""
    args = [fnp.asarray(a) for a in args]
    if mode == "eager":
        return fn(lax, *args)
    return fnad.jit(lambda *a: fn(lax, *a), backend=mode)(*args)


def _same(got, want):
    """Equal dtypes, shapes and values (NaNs in the same places)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        wide = np.complex128 if got.dtype.kind == "c" else np.float64
        np.testing.assert_array_equal(got.astype(wide), want.astype(wide))


# ---- convert_element_type: 16-bit floats to integers saturate, NaN -> 0 (XLA's) ----------
SPECIALS = np.array([np.nan, np.inf, -np.inf, -1.5, 0.5, 2.5, 3e9, -3e9, 255.9, -129, 65504],
                    np.float32)


@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("src", (BF16, np.float16), ids=("bf16", "f16"))
@pytest.mark.parametrize("dst", (np.int8, np.int32, np.uint8, np.uint32, np.bool_))
def test_convert_16_bit_floats_to_integers_as_jax(src, dst, mode):
    with np.errstate(over="ignore"):
        x = SPECIALS.astype(src)
    want = jl.convert_element_type(jnp.asarray(x), dst)
    _same(_run(lambda L, a: L.convert_element_type(a, dst), [x], mode), want)


# ---- pow with an integer exponent array (jax.lax.pow allows it) --------------------------------
POW_BASES = {"f32": np.array([2.0, -1.5, 0.0, 0.5, -3.0], np.float32),
             "f16": np.array([2.0, -1.5, 0.0, 0.5, -3.0], np.float16),
             "c64": np.array([1 + 1j, -2, 0.5j, 3, 1], np.complex64)}


@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("base", POW_BASES)
@pytest.mark.parametrize("exp_dtype", (np.int32, np.int8, np.uint32))
def test_pow_with_integer_exponents_as_jax(base, exp_dtype, mode):
    x = POW_BASES[base]
    y = np.array([3, 2, 1, 5, 0], exp_dtype) if exp_dtype == np.uint32 else \
        np.array([3, -2, 1, 5, 0], exp_dtype)
    got = _run(lambda L, a, b: L.pow(a, b), [x, y], mode)
    want = jl.pow(jnp.asarray(x), jnp.asarray(y))
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3)


def test_pow_with_integer_exponents_python_base_grad_and_vmap():
    y = np.array([3, -2, 1, 0], np.int32)
    got = lax.pow(2.0, fnp.asarray(y))
    want = jl.pow(2.0, jnp.asarray(y))
    assert got.dtype == want.dtype and not fnad.core.get_aval(got).weak_type
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    x = np.array([1.5, -2.0, 0.5, 3.0], np.float32)
    g = fnad.grad(lambda a: fnp.sum(lax.pow(a, fnp.asarray(y))))(x)
    np.testing.assert_allclose(g, jax.grad(lambda a: jnp.sum(jl.pow(a, y)))(x), rtol=1e-6)
    v = fnad.vmap(lax.pow, in_axes=(None, 0))(x, fnp.asarray(np.stack([y, y + 1])))
    np.testing.assert_allclose(v, jax.vmap(jl.pow, in_axes=(None, 0))(x, np.stack([y, y + 1])),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="pow"):
        lax.pow(fnp.asarray(y), fnp.asarray(y))     # an integer base stays an error, as jax


# ---- broadcast_in_dim with unsorted broadcast_dimensions (a transpose, as jax allows) -----------
@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("shape, dims", [((4, 3, 2), (2, 1, 0)), ((4, 3, 5, 2), (3, 1, 0)),
                                         ((3, 2, 1, 4), (1, 0, 3))])
def test_broadcast_in_dim_unsorted_dimensions_as_jax(shape, dims, mode):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    if shape == (3, 2, 1, 4):
        x = x[:, :, :1].copy() + 1                    # a size-1 dim stretched
    want = jl.broadcast_in_dim(x, shape, dims)
    _same(_run(lambda L, a: L.broadcast_in_dim(a, shape, dims), [x], mode), want)
    # jax's own reverse mode fails on unsorted dims: the reference transposes first
    w = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    g = fnad.grad(lambda a: fnp.sum(lax.broadcast_in_dim(a, shape, dims) * w))(x)
    perm, sorted_dims = tuple(np.argsort(dims)), tuple(sorted(dims))
    want = jax.grad(lambda a: jnp.sum(jl.broadcast_in_dim(jnp.transpose(a, perm), shape,
                                                          sorted_dims) * w))(x)
    np.testing.assert_allclose(g, want)


# ---- sort of bfloat16 keys with NaNs (NumPy's own bfloat16 sort misorders them) --------------
BF_KEYS = np.array([3, np.nan, -0.0, 0.0, -np.inf, np.inf, 1, np.nan, -1, 3], np.float32)


@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("case", ("one", "with values", "two keys", "top_k"))
def test_sort_bfloat16_with_nans_as_jax(case, mode):
    k = BF_KEYS.astype(BF16)
    v = np.arange(10, dtype=np.int32)
    k2 = np.array([1, 0, 1, 0, 1, 0, 1, 0, 1, 0], np.float32).astype(BF16)
    fn = {"one": lambda L, a, b, c: L.sort(a),
          "with values": lambda L, a, b, c: L.sort((a, b), num_keys=1, is_stable=True),
          "two keys": lambda L, a, b, c: L.sort((c, a, b), num_keys=2, is_stable=True),
          "top_k": lambda L, a, b, c: L.top_k(a, 4)}[case]
    got = _run(fn, [k, v, k2], mode)
    want = fn(jl, jnp.asarray(k), jnp.asarray(v), jnp.asarray(k2))
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        _same(g, w)


# ---- clamp's derivative where lo > hi (the result is hi) --------------------------------------
def _fd_grad(f, args, i, eps=1e-6):
    """Central differences of the scalar f(*args) in args[i] (float64)."""
    out = np.zeros_like(args[i])
    for j in np.ndindex(args[i].shape):
        up, dn = [a.copy() for a in args], [a.copy() for a in args]
        up[i][j] += eps
        dn[i][j] -= eps
        out[j] = (f(*up) - f(*dn)) / (2 * eps)
    return out


def test_clamp_gradient_with_crossed_bounds_is_that_of_hi():
    # x < hi < lo, hi < x < lo and hi < lo < x, then the usual lo < x < hi cases
    lo = np.array([2.0, 2.0, 2.0, -1.0, -1.0, -1.0])
    x = np.array([0.0, 1.5, 3.0, -2.0, 0.5, 2.0])
    hi = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    w = np.arange(1.0, 7.0)

    def f(lo, x, hi):
        return float(np.sum(np.minimum(np.maximum(x, lo), hi) * w))
    with fnad.enable_x64():
        g = fnad.grad(lambda *a: fnp.sum(lax.clamp(*a) * w), argnums=(0, 1, 2))(lo, x, hi)
    for i in range(3):
        np.testing.assert_allclose(g[i], _fd_grad(f, [lo, x, hi], i), atol=1e-6)
    # where lo < hi, or x > hi, jax's rule gives the same (jax's misses x < hi < lo: 0 there)
    lo32, x32, hi32 = (a.astype(np.float32) for a in (lo, x, hi))
    gj = jax.grad(lambda *a: jnp.sum(jl.clamp(*a) * w), argnums=(0, 1, 2))(lo32, x32, hi32)
    g32 = fnad.grad(lambda *a: fnp.sum(lax.clamp(*a) * w), argnums=(0, 1, 2))(lo32, x32, hi32)
    for a, b in zip(g32, gj):
        np.testing.assert_allclose(np.asarray(a)[1:], np.asarray(b)[1:])
    assert g32[2][0] == 1.0 and gj[2][0] == 0.0


# ---- scatter_min/max with clipped indices: jax's JVP gathers in FILL mode (NaN), fnad's clips --
def test_scatter_extremal_gradient_in_clip_mode_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((5, 4, 3))) + rng.standard_normal((5, 4, 3)) * 0.01
    upd = np.round(rng.standard_normal((5, 3))) + rng.standard_normal((5, 3)) * 0.01
    idx = np.array([[0, 1], [5, 2], [3, 3], [-1, 0], [0, 1]], np.int32)  # clipped, repeated
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0, 1),
                                     scatter_dims_to_operand_dims=(0, 1))

    for op in ("scatter_max", "scatter_min"):
        with fnad.enable_x64():
            g = fnad.grad(lambda a, u, op=op: fnp.sum(fnp.sin(getattr(lax, op)(
                a, idx, u, dn, mode="clip"))), argnums=(0, 1))(x, upd)

        def ref(a, u, op=op):
            return _np_scatter(a, u, idx, op)
        np.testing.assert_allclose(g[0], _fd_grad(ref, [x, upd], 0), atol=1e-6)
        np.testing.assert_allclose(g[1], _fd_grad(ref, [x, upd], 1), atol=1e-6)


def _np_scatter(a, u, idx, op):
    """sum(sin(scatter_op(a, clip(idx), u))) in NumPy: the reference for the test above."""
    out = a.copy()
    fn = np.maximum if op == "scatter_max" else np.minimum
    for (i, j), row in zip(idx, u):
        i, j = min(max(i, 0), a.shape[0] - 1), min(max(j, 0), a.shape[1] - 1)
        out[i, j] = fn(out[i, j], row)
    return float(np.sum(np.sin(out)))


# ---- gather/scatter with uint64 indices past intp's range -------------------------------------
@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("op", ("gather", "gather window", "scatter_add", "scatter window"))
@pytest.mark.parametrize("index_mode", ("clip", "fill"))
def test_uint64_indices_as_jax(op, index_mode, mode):
    x = np.arange(5.0)
    idx = np.array([[2**63 + 5], [3], [2**64 - 1]], np.uint64)
    fns = {
        "gather": lambda L, a, i: L.gather(a, i, L.GatherDimensionNumbers(
            offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)), (1,),
            mode=index_mode),
        "gather window": lambda L, a, i: L.gather(a, i, L.GatherDimensionNumbers(
            offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,)), (2,),
            mode=index_mode),
        "scatter_add": lambda L, a, i: L.scatter_add(a, i, L.full((3,), 1.0, a.dtype),
                                                     L.ScatterDimensionNumbers(
            update_window_dims=(), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0,)), mode=index_mode),
        "scatter window": lambda L, a, i: L.scatter(a, i, L.full((3, 2), 7.0, a.dtype),
                                                    L.ScatterDimensionNumbers(
            update_window_dims=(1,), inserted_window_dims=(),
            scatter_dims_to_operand_dims=(0,)), mode=index_mode)}
    with fnad.enable_x64(), jax.enable_x64(True):
        want = fns[op](jl, jnp.asarray(x), jnp.asarray(idx))
        _same(_run(fns[op], [x, idx], mode), want)


# ---- small API gaps: RoundingMethod, conj of real arrays, bitcast errors ----------------------
@pytest.mark.parametrize("method", ("AWAY_FROM_ZERO", "TO_NEAREST_EVEN"))
def test_round_takes_rounding_method_enum(method):
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5], np.float32)
    got = lax.round(x, getattr(lax.RoundingMethod, method))
    _same(got, jl.round(x, getattr(jl.RoundingMethod, method)))
    assert int(lax.RoundingMethod.TO_NEAREST_EVEN) == int(jl.RoundingMethod.TO_NEAREST_EVEN)
    with pytest.raises(ValueError, match="not a valid RoundingMethod"):
        lax.round(x, 2)


@pytest.mark.parametrize("dtype", (np.float32, np.complex64))
def test_conj_of_real_arrays_is_complex_as_jax(dtype):
    x = np.array([1.0, -2.0, 3.0], dtype)
    _same(lax.conj(x), jl.conj(x))
    w = np.array([1 + 2j, 3, -1j], np.complex64)
    g = fnad.grad(lambda a: fnp.sum(lax.real(lax.conj(a) * w)))(x.real.astype(np.float32))
    gj = jax.grad(lambda a: jnp.sum(jl.real(jl.conj(a) * w)))(x.real.astype(np.float32))
    np.testing.assert_allclose(g, gj)
    with pytest.raises(TypeError, match="conj"):
        lax.conj(np.array([1, 2], np.int32))


@pytest.mark.parametrize("src, dst", [(np.complex64, np.float32), (np.float64, np.complex64),
                                      (np.int8, np.bool_), (np.complex64, np.int32)])
def test_bitcast_from_or_to_complex_or_bool_is_an_error_as_jax(src, dst):
    x = np.zeros((2, 2), src)
    with pytest.raises(TypeError):
        jl.bitcast_convert_type(x, dst)
    with pytest.raises(TypeError, match="bitcast_convert_type.*bool or complex"):
        lax.bitcast_convert_type(x, dst)
    _same(lax.bitcast_convert_type(np.array([1 + 2j], np.complex64), np.complex64),
          jl.bitcast_convert_type(np.array([1 + 2j], np.complex64), np.complex64))


# ---- clamp's shapes: bounds are scalars or x's shape; vmap broadcasts x where a bound is batched
@pytest.mark.parametrize("args", [("arr", "scalar", "arr"), ("arr", "scalar", "scalar"),
                                  ("scalar", "scalar", "arr"), ("short", "arr", "scalar")])
def test_clamp_bounds_must_be_scalars_or_of_the_operands_shape(args):
    vals = {"arr": np.arange(5.0, dtype=np.float32), "scalar": np.float32(0.5),
            "short": np.zeros(3, np.float32)}
    lo, x, hi = (vals[a] for a in args)
    with pytest.raises(TypeError, match="clamp requires"):
        jl.clamp(lo, x, hi)
    with pytest.raises(TypeError, match=r"clamp: requires m\w\w\.shape == operand\.shape"):
        lax.clamp(lo, x, hi)


@pytest.mark.parametrize("in_axes", [(0, None, None), (None, None, 0), (0, None, 0),
                                     (1, 0, None), (None, 1, 0)])
def test_clamp_vmap_over_bounds_as_jax(in_axes):
    base = np.array([-2.0, -0.5, 0.25, 1.0, 3.0], np.float32)
    args = [np.float32(-1.0), base, np.float32(1.5)]
    for i, d in enumerate(in_axes):
        if d is not None:
            b = base + (i - 1) * 0.5
            args[i] = np.stack([b, 2 * b, b - 1], axis=d)
    got = fnad.vmap(lax.clamp, in_axes=in_axes)(*args)
    np.testing.assert_array_equal(got, jax.vmap(jl.clamp, in_axes=in_axes)(*args))
    scalar_x = fnad.vmap(lambda lo: lax.clamp(lo, np.float32(0.3), np.float32(1.0)))(
        np.array([-1.0, 0.5, 2.0], np.float32))
    np.testing.assert_array_equal(scalar_x, np.array([0.3, 0.5, 1.0], np.float32))


# ---- select_n with an integer `which` out of range: the first or last case, as XLA --------------
@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("ncases", (2, 3))
def test_select_n_out_of_range_which_picks_first_or_last_case(ncases, mode):
    which = np.array([0, 1, 2, 3, -1, 5, -7], np.int32)
    x = np.arange(-3.0, 4.0, dtype=np.float32)
    cases = [x, -x, 10 * x][:ncases]
    want = jl.select_n(which, *cases)
    _same(_run(lambda L, w, *c: L.select_n(w, *c), [which, *cases], mode), want)


# ---- reduce_precision of 16-bit inputs (np.finfo knows no bfloat16) ----------------------------
@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("dtype", (BF16, np.float16), ids=("bf16", "f16"))
@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23)])
def test_reduce_precision_of_16_bit_floats_as_jax(dtype, bits, mode):
    x = np.array([1.0, 1.0 + 2**-8, 3.14159, 65504, 7e4, 1e30, np.nan, -np.inf, 2**-20, -0.0,
                  6e-5, 1e-7], np.float32)
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    e, m = bits
    want = jl.reduce_precision(jnp.asarray(x), exponent_bits=e, mantissa_bits=m)
    _same(_run(lambda L, a: L.reduce_precision(a, exponent_bits=e, mantissa_bits=m), [x], mode),
          want)


# ---- unsigned div / rem, 64-bit: numba must not go through float64 -------------------------------
@pytest.mark.parametrize("mode", ("eager",) + JIT_BACKENDS)
@pytest.mark.parametrize("op", ("div", "rem"))
def test_uint64_div_rem_as_jax(op, mode):
    a = np.array([2**63 + 12345, 2**62 + 7, 12345678901234567, 5, 0], np.uint64)
    b = np.array([3, 7, 1, 2**63 + 1, 9], np.uint64)    # (x / 0: fnad 0, XLA all ones)
    with fnad.enable_x64(), jax.enable_x64(True):
        want = getattr(jl, op)(a, b)
        _same(_run(lambda L, x, y: getattr(L, op)(x, y), [a, b], mode), want)


def test_stop_gradient_of_integers_is_a_canonical_array_as_jax():
    got, want = lax.stop_gradient(np.arange(3)), jl.stop_gradient(np.arange(3))
    assert isinstance(got, fnad.Array) and got.dtype == want.dtype


def test_psum_of_booleans_counts_as_jax():
    x = np.array([True, False, True])
    got = fnad.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    want = jax.vmap(lambda v: jl.psum(v, "i"), axis_name="i")(x)
    _same(got, want)

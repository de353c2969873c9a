"""Errors and behaviour of dot_general, gather and the scatters that the spec table
(tests/specs/spec_linalg.py, spec_indexing.py) cannot express: error types and
messages, repeated-index semantics, derivative corner cases (ties, clipping,
non-unique scatter_mul) and parameter hygiene.
"""
import numpy as np
import pytest

import fnad
from fnad import ShapeError
from fnad.primitives import indexing as ix
from fnad.primitives import linalg as la

GDN, SDN, Mode = ix.GatherDimensionNumbers, ix.ScatterDimensionNumbers, ix.GatherScatterMode
MATMUL = (((1,), (0,)), ((), ()))
EMBED = GDN(offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,))
S_ELEM = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
S_ROW = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))

try:
    import jax
except ImportError:  # pragma: no cover - only without the dev extra
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")


def f32(*shape):
    return np.ones(shape, np.float32)


# ---- dot_general errors --------------------------------------------------------------------
def test_dot_general_contracting_size_mismatch_names_both_shapes():
    with pytest.raises(ShapeError, match=r"contracting dimensions must have the same sizes") \
            as e:
        la.dot_general(f32(2, 3), f32(4, 5), MATMUL)
    assert "(2, 3)" in str(e.value) and "(4, 5)" in str(e.value)
    assert "test_indexing_errors.py" in str(e.value)          # the user's line


def test_dot_general_batch_size_mismatch():
    with pytest.raises(ShapeError, match=r"batch dimensions must have the same sizes.*"
                                         r"\(2, 3, 4\).*\(5, 4, 6\)"):
        la.dot_general(f32(2, 3, 4), f32(5, 4, 6), (((2,), (1,)), ((0,), (0,))))


def test_dot_general_batch_count_mismatch():
    with pytest.raises(ShapeError, match=r"equal numbers of lhs_batch and rhs_batch"):
        la.dot_general(f32(2, 3, 4), f32(2, 4, 6), (((2,), (1,)), ((0,), ())))


def test_dot_general_dims_out_of_range_and_negative():
    with pytest.raises(ShapeError, match=r"lhs contracting dimensions \(2,\).*rank 2"):
        la.dot_general(f32(2, 3), f32(3, 5), (((2,), (0,)), ((), ())))
    with pytest.raises(ShapeError, match=r"rhs contracting dimensions \(-1,\)"):
        la.dot_general(f32(2, 3), f32(3, 5), (((1,), (-1,)), ((), ())))


def test_dot_general_batch_and_contracting_overlap():
    with pytest.raises(ShapeError, match=r"lhs batch dimensions \(0,\).*disjoint"):
        la.dot_general(f32(3, 3), f32(3, 3), (((0,), (0,)), ((0,), (1,))))


def test_dot_general_bad_dimension_numbers_structure():
    with pytest.raises(TypeError, match=r"dimension_numbers must be"):
        la.dot_general(f32(2, 3), f32(3, 5), ((1,), (0,)))


def test_dot_general_preferred_element_type_narrower_int():
    with pytest.raises(ShapeError, match=r"must not be narrower"):
        la.dot_general(np.ones((2, 3), np.int32), np.ones((3,), np.int32), MATMUL,
                       preferred_element_type=np.int8)


def test_dot_and_batch_matmul_shape_errors():
    with pytest.raises(ShapeError, match=r"incompatible shapes for dot.*\(2, 3\).*\(4,\)"):
        la.dot(f32(2, 3), f32(4))
    with pytest.raises(ShapeError, match=r"at least 2D"):
        la.batch_matmul(f32(3), f32(3, 2))
    with pytest.raises(ShapeError, match=r"same rank"):
        la.batch_matmul(f32(2, 3, 4), f32(4, 5))


def test_precision_is_canonicalized_and_validated():
    jaxpr = fnad.make_jaxpr(lambda a, b: la.dot(a, b, precision="highest"))(f32(2, 3), f32(3))
    (eqn,) = jaxpr.jaxpr.eqns
    assert eqn.params["precision"] == (la.Precision.HIGHEST, la.Precision.HIGHEST)
    with pytest.raises(ValueError, match=r"precision must be"):
        la.dot(f32(2, 3), f32(3), precision="fastest-please")


# ---- dot_general behaviour -------------------------------------------------------------------
def test_dot_general_bf16_accumulates_in_f32_and_cotangents_keep_input_dtype():
    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    a = (np.arange(6).reshape(2, 3) / 7).astype(bf16)
    b = (np.arange(12).reshape(3, 4) / 5).astype(bf16)
    out = la.dot_general(a, b, MATMUL, preferred_element_type=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-6)
    ga, gb = fnad.grad(lambda a, b: fnad.lax.reduce_sum(
        la.dot_general(a, b, MATMUL, preferred_element_type=np.float32), (0, 1)),
        argnums=(0, 1))(a, b)
    assert ga.dtype == bf16 and gb.dtype == bf16
    np.testing.assert_allclose(np.asarray(ga, np.float32),
                               np.ones((2, 4)) @ b.astype(np.float32).T, rtol=1e-2)


def test_dot_general_grad_through_permuted_dims(x64):
    rng = np.random.default_rng(0)
    l, r = rng.standard_normal((3, 2, 4)), rng.standard_normal((4, 5, 2))
    dn = (((2,), (0,)), ((1,), (2,)))                     # batch dims not leading
    w = rng.standard_normal((2, 3, 5))

    def loss(l, r):
        return fnad.lax.reduce_sum(fnad.lax.mul(la.dot_general(l, r, dn), w), (0, 1, 2))
    gl, gr = fnad.grad(loss, argnums=(0, 1))(l, r)
    np.testing.assert_allclose(gl, np.einsum("bik,jkb->ibj", w, r), rtol=1e-12)
    np.testing.assert_allclose(gr, np.einsum("bik,ibj->jkb", w, l), rtol=1e-12)


# ---- gather errors ----------------------------------------------------------------------------
def test_gather_slice_sizes_wrong_length():
    with pytest.raises(ShapeError, match=r"slice_sizes \(1,\) must have one entry per operand "
                                         r"dimension: operand \(10, 4\) has rank 2"):
        ix.gather(f32(10, 4), np.zeros((3, 1), np.int32), EMBED, (1,))


def test_gather_slice_sizes_larger_than_operand():
    with pytest.raises(ShapeError, match=r"slice_sizes\[1\] = 5 must be in \[0, 4\]: operand "
                                         r"\(10, 4\) has size 4 in dimension 1"):
        ix.gather(f32(10, 4), np.zeros((2, 3, 1), np.int32), EMBED, (1, 5))


def test_gather_index_dtype_must_be_integer():
    with pytest.raises(ShapeError, match=r"indices must have an integer dtype, got float32"):
        ix.gather(f32(10, 4), np.zeros((2, 3, 1), np.float32), EMBED, (1, 4))


def test_gather_other_dimension_number_errors():
    idx = np.zeros((3, 1), np.int32)
    with pytest.raises(ShapeError, match=r"indices must have rank >= 1"):
        ix.gather(f32(10, 4), np.int32(0), GDN((0,), (0,), ()), (1, 4))
    with pytest.raises(ShapeError, match=r"start_index_map \(0, 1\) has 2 entries but the "
                                         r"index vectors .* have 1"):
        ix.gather(f32(10, 4), idx, GDN((1,), (0,), (0, 1)), (1, 4))
    with pytest.raises(ShapeError, match=r"collapsed_slice_dims must have slice size 1"):
        ix.gather(f32(10, 4), idx, GDN((1,), (0,), (0,)), (2, 4))
    with pytest.raises(ShapeError, match=r"every operand dim must be an offset dim"):
        ix.gather(f32(10, 4), idx, GDN((), (0,), (0,)), (1, 4))
    with pytest.raises(ShapeError, match=r"offset_dims must be sorted"):
        ix.gather(f32(10, 4, 2), idx, GDN((2, 1), (0,), (0,)), (1, 4, 2))
    with pytest.raises(ShapeError, match=r"operand batching dims \(0,\) of operand \(10, 4\) "
                                         r"have sizes \(10,\), but indices batching dims"):
        ix.gather(f32(10, 4), idx, GDN((), (1,), (1,), (0,), (0,)), (1, 1))


def test_gather_bad_mode_and_dimension_numbers():
    idx = np.zeros((3, 1), np.int32)
    with pytest.raises(ValueError, match=r'Unknown gather mode "wrap"'):
        ix.gather(f32(10, 4), idx, GDN((1,), (0,), (0,)), (1, 4), mode="wrap")
    with pytest.raises(TypeError, match=r"dimension_numbers must be a GatherDimensionNumbers"):
        ix.gather(f32(10, 4), idx, 3, (1, 4))


# ---- scatter errors ----------------------------------------------------------------------------
def test_scatter_updates_of_the_wrong_shape():
    idx = np.zeros((3, 1), np.int32)
    with pytest.raises(ShapeError, match=r"scatter_add: updates \(4, 2\) do not match indices "
                                         r"\(3, 1\): updates dimension 0 has size 4"):
        ix.scatter_add(f32(5, 2), idx, f32(4, 2), S_ROW)
    with pytest.raises(ShapeError, match=r"updates \(3, 3\) do not fit in operand \(5, 2\): "
                                         r"window dimension 1 of updates has size 3"):
        ix.scatter(f32(5, 2), idx, f32(3, 3), S_ROW)
    with pytest.raises(ShapeError, match=r"updates must have rank 2 .* got updates of shape "
                                         r"\(3,\)"):
        ix.scatter_max(f32(5, 2), idx, f32(3), S_ROW)


def test_scatter_dtype_errors():
    idx = np.zeros((3, 1), np.int32)
    with pytest.raises(ShapeError, match=r"updates must have the operand's dtype float32, got "
                                         r"int32"):
        ix.scatter_add(f32(5), idx, np.ones(3, np.int32), S_ELEM)
    with pytest.raises(ShapeError, match=r"indices must have an integer dtype, got float32"):
        ix.scatter_mul(f32(5), idx.astype(np.float32), f32(3), S_ELEM)
    with pytest.raises(ShapeError, match=r"scatter_add: does not accept dtype bool"):
        ix.scatter_add(np.ones(5, bool), idx, np.ones(3, bool), S_ELEM)


# ---- semantics -----------------------------------------------------------------------------------
def test_gather_default_mode_clamps_and_fill_defaults():
    x = np.arange(5.0, dtype=np.float32)
    idx = np.array([[-2], [1], [9]], np.int32)
    dn = GDN((), (0,), (0,))
    np.testing.assert_array_equal(ix.gather(x, idx, dn, (1,)), [0.0, 1.0, 4.0])
    np.testing.assert_array_equal(ix.gather(x, idx, dn, (1,), mode="fill"), [np.nan, 1, np.nan])
    xi = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(ix.gather(xi, idx, dn, (1,), mode="fill"),
                                  [np.iinfo(np.int32).min, 1, np.iinfo(np.int32).min])
    np.testing.assert_array_equal(ix.gather(xi, idx, dn, (1,), mode="fill", fill_value=-7),
                                  [-7, 1, -7])


def test_scatter_repeated_indices_last_update_wins_and_add_accumulates():
    idx = np.array([[1], [3], [1], [1], [3]], np.int32)
    u = np.array([10.0, 20.0, 30.0, 40.0, 50.0], np.float32)
    np.testing.assert_array_equal(ix.scatter(np.zeros(5, np.float32), idx, u, S_ELEM),
                                  [0, 40, 0, 50, 0])
    np.testing.assert_array_equal(ix.scatter_add(np.zeros(5, np.float32), idx, u, S_ELEM),
                                  [0, 80, 0, 70, 0])
    np.testing.assert_array_equal(ix.scatter_max(np.zeros(5, np.float32), idx, u, S_ELEM),
                                  [0, 40, 0, 50, 0])


def test_scatter_never_writes_to_its_inputs():
    x = np.arange(6.0, dtype=np.float32)
    before = x.copy()
    for op in (ix.scatter, ix.scatter_add, ix.scatter_mul, ix.scatter_min, ix.scatter_max):
        op(x, np.array([[0], [2]], np.int32), np.array([9.0, -9.0], np.float32), S_ELEM)
    np.testing.assert_array_equal(x, before)


def test_dimension_numbers_accept_jax_namedtuples_and_params_are_hashable():
    x, idx = f32(10, 4), np.zeros((2, 3, 1), np.int32)
    jaxpr = fnad.make_jaxpr(lambda x: ix.gather(x, idx, EMBED, (1, 4), mode="fill"))(x)
    (eqn,) = jaxpr.jaxpr.eqns
    hash(tuple(eqn.params.items()))
    again = fnad.make_jaxpr(lambda x: ix.gather(x, idx, EMBED, (1, 4), mode="fill",
                                                fill_value=float("nan")))(x)
    assert again.jaxpr.eqns[0].params == eqn.params         # NaN fills compare equal
    if jax is not None:
        jdn = jax.lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(0,),
                                             start_index_map=(0,))
        out = ix.gather(x, idx, jdn, (1, 4), mode=jax.lax.GatherScatterMode.CLIP)
        assert out.shape == (2, 3, 4)


# ---- derivatives beyond the spec table ----------------------------------------------------------
def test_scatter_mul_updates_gradient_needs_unique_indices():
    x, u = np.arange(1.0, 6.0, dtype=np.float32), np.array([2.0, 3.0], np.float32)
    idx = np.array([[1], [1]], np.int32)
    with pytest.raises(NotImplementedError, match=r"unique_indices=True"):
        fnad.jvp(lambda u: ix.scatter_mul(x, idx, u, S_ELEM), (u,), (u,))
    _, t = fnad.jvp(lambda x: ix.scatter_mul(x, idx, u, S_ELEM), (x,), (x,))
    np.testing.assert_allclose(t, [1.0, 12.0, 3.0, 4.0, 5.0])     # linear in the operand


def _fd_jvp(f, args, tangents, eps=1e-6):
    plus = [a + eps * t for a, t in zip(args, tangents, strict=True)]
    minus = [a - eps * t for a, t in zip(args, tangents, strict=True)]
    return (np.asarray(f(*plus)) - np.asarray(f(*minus))) / (2 * eps)


def test_scatter_min_clip_jvp_matches_differences_out_of_bounds(x64):
    # JAX counts clipped windows as dropped in its min/max JVP; fnad clips them consistently
    rng = np.random.default_rng(0)
    x, u = rng.standard_normal((6, 3)), rng.standard_normal((4, 3)) - 1.0
    idx = np.array([[-3], [2], [8], [9]], np.int32)            # rows 0, 2, 5, 5 after clipping

    def f(x, u):
        return ix.scatter_min(x, idx, u, S_ROW, mode="clip")
    tx, tu = rng.standard_normal(x.shape), rng.standard_normal(u.shape)
    _, t = fnad.jvp(f, (x, u), (tx, tu))
    np.testing.assert_allclose(t, _fd_jvp(f, (x, u), (tx, tu)), rtol=1e-6, atol=1e-8)


@needs_jax
@pytest.mark.parametrize("name", ["scatter_min", "scatter_max"])
def test_scatter_min_max_ties_split_the_tangent_as_jax(name, x64):
    x = np.array([1.0, 5.0, 2.0, 0.0])
    u = np.array([5.0, 5.0, 2.0, 7.0, -1.0])                    # ties with x and each other
    idx = np.array([[1], [1], [2], [3], [3]], np.int32)
    tx, tu = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    ours = getattr(ix, name)
    theirs = getattr(jax.lax, name)
    jdn = jax.lax.ScatterDimensionNumbers(*S_ELEM)
    _, t = fnad.jvp(lambda x, u: ours(x, idx, u, S_ELEM), (x, u), (tx, tu))
    _, jt = jax.jvp(lambda x, u: theirs(x, idx, u, jdn), (x, u), (tx, tu))
    np.testing.assert_allclose(t, jt, rtol=1e-12)
    gx, gu = fnad.grad(lambda x, u: fnad.lax.reduce_sum(
        fnad.lax.mul(ours(x, idx, u, S_ELEM), tx), (0,)), argnums=(0, 1))(x, u)
    jgx, jgu = jax.grad(lambda x, u: (theirs(x, idx, u, jdn) * tx).sum(), argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, jgx, rtol=1e-12)
    np.testing.assert_allclose(gu, jgu, rtol=1e-12)


@needs_jax
def test_scatter_set_with_repeated_indices_differentiates_as_jax(x64):
    rng = np.random.default_rng(1)
    x, u = rng.standard_normal((5, 3)), rng.standard_normal((2, 4, 3))
    idx = np.array([[[1], [3], [1], [0]], [[3], [1], [4], [3]]], np.int32)
    dn = SDN(update_window_dims=(2,), inserted_window_dims=(0,),
             scatter_dims_to_operand_dims=(0,))
    w = rng.standard_normal((5, 3))

    def loss(x, u):
        return fnad.lax.reduce_sum(fnad.lax.mul(ix.scatter(x, idx, u, dn), w), (0, 1))
    gx, gu = fnad.grad(loss, argnums=(0, 1))(x, u)
    jloss = lambda x, u: (jax.lax.scatter(x, idx, u, jax.lax.ScatterDimensionNumbers(*dn))
                          * w).sum()
    jgx, jgu = jax.grad(jloss, argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, jgx, rtol=1e-12)
    np.testing.assert_allclose(gu, jgu, rtol=1e-12)
    assert np.count_nonzero(np.abs(gu).sum(-1)) == 4           # only the 4 winning rows


def test_gather_grad_is_a_scatter_add_of_the_cotangent(x64):
    x = np.arange(12.0).reshape(4, 3)
    idx = np.array([[[0], [2]], [[2], [2]]], np.int32)          # row 2 read three times

    def loss(x):
        return fnad.lax.reduce_sum(ix.gather(x, idx, EMBED, (1, 3)), (0, 1, 2))
    g = fnad.grad(loss)(x)
    np.testing.assert_array_equal(g, [[1, 1, 1], [0, 0, 0], [3, 3, 3], [0, 0, 0]])


@pytest.mark.parametrize("op, combine", [(ix.scatter_add, np.add), (ix.scatter_mul, np.multiply),
                                         (ix.scatter_min, np.minimum),
                                         (ix.scatter_max, np.maximum)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_combine_of_whole_rows_matches_a_loop_over_the_updates(op, combine, dtype,
                                                                        monkeypatch):
    # Many windows of whole rows (an embedding's gradient) take numpy_ref's row path, which
    # combines each row's windows in their order: bit for bit the loop's result.
    took = _spy_rows_at(monkeypatch)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((10, 4, 5)) * 3).astype(dtype)
    idx = rng.integers(0, 10, (8, 16, 1)).astype(np.int32)       # 128 windows, repeats
    u = (rng.standard_normal((8, 16, 4, 5)) * 2).astype(dtype)
    dn = SDN(update_window_dims=(2, 3), inserted_window_dims=(0,),
             scatter_dims_to_operand_dims=(0,))
    want = x.copy()
    for i, row in zip(idx.reshape(-1), u.reshape(-1, 4, 5)):
        want[i] = combine(want[i], row)
    np.testing.assert_array_equal(op(x, idx, u, dn), want)
    # the same updates stored transposed (a view) and windows out of bounds dropped
    bad = idx.copy()
    bad[0, :3, 0] = [10, -1, 99]
    keep = np.ones(128, bool)
    keep[:3] = False
    want = x.copy()
    for i, row in zip(bad.reshape(-1)[keep], u.reshape(-1, 4, 5)[keep]):
        want[i] = combine(want[i], row)
    ut = np.ascontiguousarray(u.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    np.testing.assert_array_equal(op(x, bad, ut, dn, mode="drop"), want)
    # more windows on one row than the row path makes passes: ufunc.at, the same result
    same = np.zeros_like(idx)
    same[1] = 3
    want = x.copy()
    for i, row in zip(same.reshape(-1), u.reshape(-1, 4, 5)):
        want[i] = combine(want[i], row)
    np.testing.assert_array_equal(op(x, same, u, dn), want)
    assert took == [True, True, False]


def _spy_rows_at(monkeypatch) -> list:
    """Record, for each scatter combine that numpy_ref runs, whether its row path applied."""
    from fnad.backends.numpy_ref import indexing as ref
    took, rows_at = [], ref._rows_at

    def spy(*args):
        took.append(rows_at(*args))
        return took[-1]
    monkeypatch.setattr(ref, "_rows_at", spy)
    return took


def test_scatter_add_of_windows_not_one_block_falls_back_to_ufunc_at(monkeypatch):
    # windows over dims 0 and 2 scattered along dim 1: each is 4 strided runs of the
    # operand, which no reshape of it can present as one row (a strided column can)
    took = _spy_rows_at(monkeypatch)
    rng = np.random.default_rng(1)
    x = np.zeros((4, 50, 5), np.float32)
    idx = rng.integers(0, 50, (64, 1)).astype(np.int32)
    u = rng.integers(-2, 3, (4, 64, 5)).astype(np.float32)
    dn = SDN(update_window_dims=(0, 2), inserted_window_dims=(1,),
             scatter_dims_to_operand_dims=(1,))
    want = x.copy()
    for k, i in enumerate(idx[:, 0]):
        want[:, i] += u[:, k]
    np.testing.assert_array_equal(ix.scatter_add(x, idx, u, dn), want)
    col = SDN(update_window_dims=(0,), inserted_window_dims=(1,),
              scatter_dims_to_operand_dims=(1,))
    want = np.zeros((20, 50), np.float32)
    for k, i in enumerate(idx[:, 0]):
        want[:, i] += u[0, k, 0] * np.arange(20)
    cols = np.outer(np.arange(20), u[0, :, 0]).astype(np.float32)
    np.testing.assert_array_equal(ix.scatter_add(np.zeros((20, 50), np.float32), idx, cols, col),
                                  want)
    assert took == [False, True]

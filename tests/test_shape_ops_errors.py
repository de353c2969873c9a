"""Shape primitives: error messages (type and the words a user needs), and behaviour the
spec table cannot express (no mutation, views, no-op wrappers, index dtypes, clamping
in jaxprs, gradients of padding values)."""
import re

import numpy as np
import pytest

import fnad
from fnad import lax
from fnad.primitives import shape_ops as so
from checks import raises_with

HERE = "test_shape_ops_errors.py"


_raises = raises_with


x23 = np.zeros((2, 3), np.float32)
x34 = np.zeros((3, 4), np.float32)


# ---- error messages -----------------------------------------------------------------------
def test_reshape_wrong_size_names_both_shapes_and_the_line():
    msg = _raises(lambda: lax.reshape(x23, (4,)), "reshape", "(2, 3)", "(4,)", "size 6")
    assert HERE in msg


def test_reshape_error_is_the_same_under_make_jaxpr():
    msg = _raises(lambda: fnad.make_jaxpr(lambda x: lax.reshape(x, (5, 2)))(x23),
                  "reshape", "(2, 3)", "(5, 2)")
    assert HERE in msg


def test_transpose_non_permutation():
    _raises(lambda: lax.transpose(x23, (0, 0)), "transpose", "(0, 0)", "permutation", "(2, 3)")
    _raises(lambda: lax.transpose(x23, (0, 1, 2)), "not a permutation", "(0, 1, 2)")


def test_squeeze_of_a_non_1_dim():
    _raises(lambda: lax.squeeze(x23, (1,)), "squeeze", "dimension 1", "size 3", "(2, 3)")
    _raises(lambda: lax.squeeze(x23, (2,)), "squeeze", "axis 2", "rank 2")
    _raises(lambda: lax.squeeze(np.zeros((1, 2)), (0, -2)), "not unique")


def test_expand_dims_repeated_axis():
    _raises(lambda: lax.expand_dims(x23, (0, 0)), "expand_dims", "repeated axis")
    _raises(lambda: lax.expand_dims(x23, (1, -3)), "expand_dims", "repeated axis")


def test_concatenate_mismatched_shapes_or_dtypes():
    y = np.zeros((3, 3), np.float32)
    _raises(lambda: lax.concatenate([x23, y], 1), "concatenate", "(2, 3)", "(3, 3)",
            "dimension 1")
    _raises(lambda: lax.concatenate([x23, np.zeros((2, 3), np.int32)], 0), "concatenate",
            "same dtype", "float32", "int32")
    _raises(lambda: lax.concatenate([x23, np.zeros((6,), np.float32)], 0), "different ranks",
            "(2, 3)", "(6,)")
    _raises(lambda: lax.concatenate([x23, x23], 2), "dimension 2", "out of bounds")
    _raises(lambda: lax.concatenate([], 0), "concatenate", "non-empty")


def test_slice_out_of_bounds():
    _raises(lambda: lax.slice(x34, (0, 0), (3, 5)), "slice", "(3, 5)", "(3, 4)", "out of bounds")
    _raises(lambda: lax.slice(x34, (2, 0), (1, 4)), "slice", "(2, 0)", "(1, 4)")
    _raises(lambda: lax.slice(x34, (-1, 0), (2, 4)), "slice", "(-1, 0)")
    _raises(lambda: lax.slice(x34, (0,), (2,)), "slice", "one entry per dimension", "(3, 4)")
    _raises(lambda: lax.slice(x34, (0, 0), (3, 4), (1, 0)), "strides", "positive")


def test_slice_in_dim_and_index_in_dim():
    _raises(lambda: lax.slice_in_dim(x34, 0, 5, axis=1), "slice", "(3, 5)", "(3, 4)")
    _raises(lambda: lax.index_in_dim(x34, 3), "index 3", "axis 0", "size 3", exc=IndexError)
    _raises(lambda: lax.index_in_dim(x34, 0, axis=2), "axis 2", "rank 2")


def test_dynamic_slice_sizes_larger_than_operand():
    _raises(lambda: lax.dynamic_slice(x34, (0, 0), (4, 2)), "dynamic_slice", "(4, 2)", "(3, 4)")
    _raises(lambda: lax.dynamic_slice(x34, (0, 0), (2,)), "dynamic_slice", "(2,)", "(3, 4)")
    _raises(lambda: lax.dynamic_slice(x34, (0, 0), (-1, 2)), "non-negative")


def test_dynamic_slice_wrong_number_of_indices():
    _raises(lambda: lax.dynamic_slice(x34, (0,), (2, 2)), "dynamic_slice", "1 start indices",
            "(3, 4)", "one index per dimension")
    _raises(lambda: lax.dynamic_update_slice(x34, x23, (0, 0, 0)), "dynamic_update_slice",
            "3 start indices")


def test_dynamic_slice_bad_index_types():
    _raises(lambda: lax.dynamic_slice(x34, (np.float32(1.0), 0), (2, 2)), "integer scalars",
            "f32[]")
    _raises(lambda: lax.dynamic_slice(x34, (np.zeros(2, np.int32), 0), (2, 2)),
            "integer scalars", "i32[2]")
    i32, i16 = np.array(0, np.int32), np.array(0, np.int16)
    _raises(lambda: lax.dynamic_slice(x34, (i32, i16), (2, 2)), "one dtype", "i32[]", "i16[]")
    _raises(lambda: lax.dynamic_slice(x34, np.zeros((2, 1), np.int32), (2, 2)), "1-D array")
    _raises(lambda: lax.dynamic_slice(x34, (-1, 0), (2, 2), allow_negative_indices=False),
            "index -1", "allow_negative_indices=False")


def test_dynamic_update_slice_shape_and_dtype():
    _raises(lambda: lax.dynamic_update_slice(x23, x34, (0, 0)), "dynamic_update_slice",
            "(3, 4)", "(2, 3)", "fit inside")
    _raises(lambda: lax.dynamic_update_slice(x34, np.zeros(2, np.float32), (0, 0)), "rank")
    _raises(lambda: lax.dynamic_update_slice(x34, x23.astype(np.int32), (0, 0)), "same dtype",
            "float32", "int32")


def test_pad_config_of_wrong_length():
    _raises(lambda: lax.pad(x23, 0.0, [(1, 1, 0)]), "pad", "padding_config", "(2, 3)",
            "one (low, high, interior) triple per dimension")
    _raises(lambda: lax.pad(x23, 0.0, [(1, 1), (0, 0)]), "pad", "triple")


def test_pad_other_errors():
    _raises(lambda: lax.pad(x23, 0.0, [(0, 0, -1), (0, 0, 0)]), "interior", "non-negative")
    _raises(lambda: lax.pad(x23, 0.0, [(-2, -1, 0), (0, 0, 0)]), "removes more elements",
            "(2, 3)")
    _raises(lambda: lax.pad(x23, np.zeros(2, np.float32), [(0, 0, 0)] * 2), "scalar", "(2,)")
    _raises(lambda: lax.pad(x23, np.int32(0), [(0, 0, 0)] * 2), "same dtype", "float32",
            "int32")


def test_broadcast_in_dim_incompatible_shapes():
    _raises(lambda: lax.broadcast_in_dim(x23, (2, 4), (0, 1)), "broadcast_in_dim", "(2, 3)",
            "(2, 4)", "dim 1")
    _raises(lambda: lax.broadcast_in_dim(x23, (2, 3), (0,)), "one entry per operand dimension")
    _raises(lambda: lax.broadcast_in_dim(x23, (3, 2, 3), (2, 1)), "strictly increasing")
    _raises(lambda: lax.broadcast(x23, (-1,)), "negative dimension")


def test_rev_iota_collapse_full_errors():
    _raises(lambda: lax.rev(x23, (0, 0)), "rev", "unique", "(2, 3)")
    _raises(lambda: lax.rev(x23, (2,)), "rev", "(2,)", "(2, 3)")
    _raises(lambda: lax.iota(np.bool_, 3), "iota", "bool")
    _raises(lambda: lax.broadcasted_iota(np.int32, (2, 3), 2), "axis 2", "rank 2")
    _raises(lambda: lax.collapse(np.zeros((2, 3, 4)), 2, 1), "collapse", "(2, 3, 4)")
    _raises(lambda: lax.full((2,), np.zeros(2)), "scalar fill_value", exc=TypeError)


# ---- behaviour ------------------------------------------------------------------------------
def test_dynamic_update_slice_never_writes_into_its_operand():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = x.copy()
    out = lax.dynamic_update_slice(x, np.ones((2, 2), np.float32), (1, 1))
    np.testing.assert_array_equal(x, before)
    xa = lax.slice(x, (0, 0), (3, 4))                  # an fnad Array
    out2 = lax.dynamic_update_slice(xa, np.ones((1, 1), np.float32), (0, 0))
    np.testing.assert_array_equal(np.asarray(xa), before)
    assert np.asarray(out)[1, 1] == 1 and np.asarray(out2)[0, 0] == 1


def test_views_where_numpy_gives_them():
    x = lax.reshape(np.arange(24, dtype=np.float32), (2, 3, 4))
    base = np.asarray(x)
    for y in (lax.transpose(x, (2, 0, 1)), lax.slice(x, (0, 1, 0), (2, 3, 4), (1, 1, 2)),
              lax.rev(x, (1,)), lax.reshape(x, (6, 4)), lax.dynamic_slice(x, (1, 0, 0), (1, 2, 2))):
        assert np.shares_memory(np.asarray(y), base)


def test_no_op_wrappers_return_the_operand():
    x = lax.reshape(np.arange(6, dtype=np.float32), (2, 3))
    assert lax.reshape(x, (2, 3)) is x
    assert lax.transpose(x, (0, 1)) is x
    assert lax.squeeze(x, ()) is x
    assert lax.concatenate([x], 0) is x
    assert lax.broadcast_in_dim(x, (2, 3), (0, 1)) is x
    assert not fnad.make_jaxpr(lambda x: lax.transpose(lax.reshape(x, (2, 3)), (0, 1)))(x).eqns


def test_static_negative_index_folds_and_traced_index_wraps_in_the_jaxpr():
    closed = fnad.make_jaxpr(lambda x: lax.dynamic_slice(x, (-1, 1), (2, 2)))(x34)
    assert [e.primitive.name for e in closed.eqns] == ["dynamic_slice"]
    assert "2:i32[] 1:i32[]" in str(closed)
    closed = fnad.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)))(x34, np.int32(0))
    assert [e.primitive.name for e in closed.eqns] == ["lt", "add", "select_n", "dynamic_slice"]
    # unsigned indices are never negative: no wrapping
    closed = fnad.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)))(x34, np.uint8(0))
    assert [e.primitive.name for e in closed.eqns] == ["dynamic_slice"]


@pytest.mark.parametrize("i, start", [(-1, 2), (-3, 2), (-6, 0), (-9, 0), (0, 0), (1, 1),
                                      (2, 2), (7, 2)])
def test_dynamic_slice_wraps_negative_once_then_clamps(i, start):
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    for idx in (i, np.int32(i), np.array(i, np.int32)):
        out = lax.dynamic_slice(x, (idx, 0), (3, 4))
        np.testing.assert_array_equal(np.asarray(out), x[start:start + 3])
    f = lambda x, i: lax.dynamic_slice(x, (i, 0), (3, 4))
    closed = fnad.make_jaxpr(f)(x, np.int32(i))
    np.testing.assert_array_equal(np.asarray(closed(x, np.int32(i))[0]), x[start:start + 3])
    u = np.full((3, 4), -1, np.float32)
    out = np.asarray(lax.dynamic_update_slice(x, u, (np.int32(i), 0)))
    expect = x.copy()
    expect[start:start + 3] = -1
    np.testing.assert_array_equal(out, expect)


def test_python_int_indices_take_the_dtype_of_the_array_indices():
    with fnad.config.override(jax_enable_x64=True):
        closed = fnad.make_jaxpr(lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)))(
            x34, np.int32(0))
        assert "1:i32[]" in str(closed)
        closed = fnad.make_jaxpr(lambda x: lax.dynamic_slice(x, (0, 1), (2, 2)))(x34)
        assert "1:i64[]" in str(closed)


def test_one_dimensional_index_array():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = lax.dynamic_slice(x, np.array([1, 3], np.int32), (2, 2))
    np.testing.assert_array_equal(np.asarray(out), x[1:3, 2:4])


def test_gradient_of_the_padding_value_counts_the_padding():
    x = np.ones((4, 3), np.float32)
    config = [(-1, 2, 2), (2, -3, 1)]
    f = lambda x, v: lax.reduce_sum(lax.pad(x, v, config), axes=(0, 1))
    gx, gv = fnad.grad(f, argnums=(0, 1))(x, np.float32(0.0))
    kept = np.asarray(gx)
    # rows 1..3 survive the low -1; columns dilate to [e0 p e1 p e2], then the high -3
    # cuts [e1 p e2]: only column 0 survives
    expect = np.zeros((4, 3), np.float32)
    expect[1:, 0] = 1
    np.testing.assert_array_equal(kept, expect)
    out_size = np.prod(lax.pad(x, 0.0, config).shape)
    assert float(gv) == out_size - expect.sum()


def test_iota_has_no_tangent_and_composes_with_grad():
    f = lambda x: lax.reduce_sum(lax.mul(x, lax.iota(np.float32, 4)), axes=(0,))
    np.testing.assert_array_equal(np.asarray(fnad.grad(f)(np.ones(4, np.float32))),
                                  np.arange(4, dtype=np.float32))
    assert so.iota_p.name == "iota" and not so.iota_p.multiple_results


def test_concatenate_gradient_splits_the_cotangent():
    xs = [np.ones((2, n), np.float32) * (n + 1) for n in (1, 0, 3)]
    w = lax.broadcasted_iota(np.float32, (2, 4), 1)
    f = lambda a, b, c: lax.reduce_sum(lax.mul(lax.concatenate([a, b, c], 1), w), axes=(0, 1))
    ga, gb, gc = fnad.grad(f, argnums=(0, 1, 2))(*xs)
    assert np.asarray(gb).shape == (2, 0)
    np.testing.assert_array_equal(np.asarray(ga), [[0.0], [0.0]])
    np.testing.assert_array_equal(np.asarray(gc), [[1.0, 2.0, 3.0]] * 2)


def test_errors_name_the_primitive_first():
    msg = _raises(lambda: lax.squeeze(x23, (0,)), "squeeze")
    assert re.match(r"squeeze: ", msg)

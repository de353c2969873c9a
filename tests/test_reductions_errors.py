"""Reductions, cumulative reductions and sorting: error messages (type and the words a
user needs), and behaviour the spec table cannot express: derivatives at ties, zeros and
NaNs compared with jax, lax's NaN/±0 orders, the sort transpose, jaxprs."""
import numpy as np
import pytest

import fnad
from fnad.config import config
from fnad.core import UndefinedPrimal, get_aval
from fnad.primitives import cumulative as cum
from fnad.primitives import elementwise as ew
from fnad.primitives import reductions as red
from fnad.primitives import sorting as srt
from checks import raises_with, x64_everywhere

HERE = "test_reductions_errors.py"

x23 = np.arange(6, dtype=np.float32).reshape(2, 3)


_raises = raises_with


@pytest.fixture
def jax():
    jax = pytest.importorskip("jax")
    with x64_everywhere():
        yield jax


def _weighted_sum(out, w):
    return red.reduce_sum(ew.mul(out, w), tuple(range(np.ndim(w))))


# ---- error messages: axes ----------------------------------------------------------------
@pytest.mark.parametrize("fn", [red.reduce_sum, red.reduce_max, red.reduce_min,
                                red.reduce_prod])
def test_reduction_axis_out_of_range(fn):
    msg = _raises(lambda: fn(x23, (2,)), fn.__name__, "axis 2", "out of bounds", "rank 2",
                  "(2, 3)")
    assert HERE in msg
    _raises(lambda: fn(x23, (-3,)), "axis -3", "rank 2")


def test_reduction_repeated_axes():
    _raises(lambda: red.reduce_max(x23, (1, 1)), "reduce_max", "(1, 1)", "distinct")
    _raises(lambda: red.reduce_sum(x23, (0, -2)), "reduce_sum", "(0, 0)", "distinct")


def test_reduction_error_is_the_same_under_make_jaxpr():
    msg = _raises(lambda: fnad.make_jaxpr(lambda x: red.reduce_min(x, (5,)))(x23),
                  "reduce_min", "axis 5", "rank 2")
    assert HERE in msg


def test_bound_primitive_rejects_negative_axes():
    """The wrappers normalize negative axes; the primitives' params must be normalized."""
    _raises(lambda: red.reduce_max_p.bind(x23, axes=(-1,)), "reduce_max", "(-1,)", "in range")


@pytest.mark.parametrize("fn", [cum.cumsum, cum.cumprod, cum.cummax, cum.cummin,
                                cum.cumlogsumexp])
def test_cumulative_axis_out_of_range(fn):
    msg = _raises(lambda: fn(x23, 2), fn.__name__, "axis 2", "out of bounds", "rank 2")
    assert HERE in msg
    _raises(lambda: fn(np.float32(1.0)), fn.__name__, "axis 0", "rank 0")


def test_argmax_axis_and_index_dtype():
    _raises(lambda: red.argmax(x23, 2, np.int32), "argmax", "axis 2", "rank 2")
    _raises(lambda: red.argmin(x23, 0, np.float32), "argmin", "index_dtype", "integer",
            "float32")
    _raises(lambda: red.argmax_p.bind(x23, axes=(0, 1), index_dtype=np.dtype(np.int32)),
            "argmax", "exactly one axis", "(0, 1)")


def test_argmax_on_an_empty_axis():
    empty = np.zeros((2, 0), np.float32)
    msg = _raises(lambda: red.argmax(empty, 1, np.int32), "argmax", "non-empty", "(2, 0)",
                  "axis 1")
    assert HERE in msg
    _raises(lambda: red.argmin(empty, 1, np.int32), "argmin", "non-empty")
    assert red.argmax(empty, 0, np.int32).shape == (0,)      # the other axis is fine


# ---- error messages: dtypes ----------------------------------------------------------------
@pytest.mark.parametrize("fn", [red.reduce_and, red.reduce_or, red.reduce_xor])
def test_logical_reductions_reject_floats(fn):
    msg = _raises(lambda: fn(x23, (0,)), fn.__name__, "float32", "bool", "integer")
    assert HERE in msg


def test_other_dtype_errors():
    bools = np.ones((2, 3), bool)
    _raises(lambda: red.reduce_sum(bools, (0,)), "reduce_sum", "bool")
    _raises(lambda: red.reduce_prod(bools, (0,)), "reduce_prod", "bool")
    _raises(lambda: cum.cumsum(bools), "cumsum", "bool")
    _raises(lambda: cum.cumlogsumexp(np.ones(3, np.int32)), "cumlogsumexp", "int32")
    _raises(lambda: cum.cummax(np.ones(3, np.complex64)), "cummax", "complex64")
    _raises(lambda: red.argmax(np.ones(3, np.complex64), 0, np.int32), "argmax", "complex64")
    _raises(lambda: srt.top_k(np.ones(3, np.complex64), 1), "top_k", "complex64",
            "complex numbers")


# ---- error messages: sort and top_k --------------------------------------------------------
def test_sort_num_keys_larger_than_the_operands():
    msg = _raises(lambda: srt.sort((x23, x23), num_keys=3), "sort", "num_keys=3",
                  "number of operands (2)")
    assert HERE in msg
    _raises(lambda: srt.sort(x23, num_keys=0), "num_keys=0", "at least 1")
    _raises(lambda: srt.sort_p.bind(x23, dimension=0, is_stable=True, num_keys=2),
            "num_keys=2", "(1)")


def test_sort_operand_shapes_and_dimension():
    _raises(lambda: srt.sort((x23, np.zeros((3, 2), np.float32))), "sort", "same shape",
            "(2, 3)", "(3, 2)")
    _raises(lambda: srt.sort(x23, dimension=2), "sort", "dimension 2", "rank 2")
    _raises(lambda: srt.sort(np.float32(1.0)), "sort", "rank 0")
    _raises(lambda: srt.sort(()), "sort", "at least one operand")


def test_top_k_with_k_larger_than_the_axis():
    msg = _raises(lambda: srt.top_k(x23, 4), "top_k", "k=4", "no larger than", "size 3",
                  "(2, 3)")
    assert HERE in msg
    _raises(lambda: srt.top_k(x23, 3, axis=0), "k=3", "size 2", "axis 0")
    _raises(lambda: srt.top_k(x23, -1), "top_k", "non-negative", "-1")
    _raises(lambda: srt.top_k(np.float32(1.0), 1), "top_k", "rank >= 1")
    _raises(lambda: srt.top_k(x23, 1, axis=2), "top_k", "2", "rank 2")


def test_sort_is_not_linear_in_its_keys():
    aval = get_aval(x23)
    with pytest.raises(ValueError, match="non-key operands"):
        srt.sort_transpose([x23, x23], UndefinedPrimal(aval), x23, dimension=1,
                           is_stable=True, num_keys=1)


# ---- values: NaN and ±0 ------------------------------------------------------------------
def test_nan_propagation_and_first_nan_index():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [4.0, -1.0, 4.0, 0.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(red.reduce_max(x, (1,))), [np.nan, 4.0])
    np.testing.assert_array_equal(np.asarray(red.reduce_min(x, (1,))), [np.nan, -1.0])
    np.testing.assert_array_equal(np.asarray(red.argmax(x, 1, np.int32)), [1, 0])
    np.testing.assert_array_equal(np.asarray(red.argmin(x, 1, np.int32)), [1, 1])
    np.testing.assert_array_equal(np.asarray(cum.cummax(x, 1)),
                                  [[1, np.nan, np.nan, np.nan], [4, 4, 4, 4]])


def test_empty_reductions_give_the_identity():
    e = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(red.reduce_max(e, (0,))), [-np.inf, -np.inf])
    np.testing.assert_array_equal(np.asarray(red.reduce_min(np.zeros((0,), np.int32), (0,))),
                                  np.iinfo(np.int32).max)
    assert np.asarray(red.reduce_and(np.zeros((0,), bool), (0,))) == np.True_
    assert np.asarray(red.reduce_prod(e, (0,))).tolist() == [1.0, 1.0]
    _, t = fnad.jvp(lambda a: red.reduce_max(a, (0,)), (e,), (e,))
    np.testing.assert_array_equal(np.asarray(t), [0.0, 0.0])   # a constant: no 0/0


def test_sort_orders_nans_last_and_zeros_as_equal():
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
    x = np.array([np.nan, 1.0, -0.0, neg_nan, 0.0, -np.inf], np.float32)
    keys, idx = srt.sort_key_val(x, np.arange(6, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(idx), [5, 2, 4, 1, 0, 3])  # stable, NaNs last
    assert np.isnan(np.asarray(keys)[-2:]).all()


def test_top_k_uses_ieee_total_order(jax):
    neg_nan = np.copysign(np.float32(np.nan), np.float32(-1))
    x = np.array([1.0, neg_nan, -0.0, np.nan, 0.0, -np.inf, 1.0], np.float32)
    values, idx = srt.top_k(x, 7)
    np.testing.assert_array_equal(np.asarray(idx), [3, 0, 6, 4, 2, 5, 1])
    j_values, j_idx = jax.lax.top_k(x, 7)
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(j_idx))
    np.testing.assert_array_equal(np.signbit(np.asarray(values)), np.signbit(np.asarray(j_values)))


# ---- derivatives where the spec table's finite differences cannot look ------------------------
def test_reduce_max_splits_ties_evenly_like_jax(jax):
    x = np.array([[3.0, 1.0, 3.0, 3.0], [2.0, 2.0, -1.0, 0.0]])
    w = np.array([1.0, 10.0])
    ours = fnad.grad(lambda a: _weighted_sum(red.reduce_max(a, (1,)), w))(x)
    theirs = jax.grad(lambda a: (jax.lax.reduce_max(a, (1,)) * w).sum())(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_allclose(np.asarray(ours)[0], [1 / 3, 0, 1 / 3, 1 / 3])


def test_reduce_prod_derivatives_with_zeros_are_exact(jax):
    x = np.array([[2.0, 0.0, 3.0, 5.0], [0.0, 4.0, 0.0, 1.0], [1.5, -2.0, 0.5, 3.0]])
    g = np.asarray(fnad.grad(lambda a: red.reduce_sum(red.reduce_prod(a, (1,)), (0,)))(x))
    np.testing.assert_array_equal(g[0], [0.0, 30.0, 0.0, 0.0])   # one zero: Π of the others
    np.testing.assert_array_equal(g[1], [0.0, 0.0, 0.0, 0.0])    # two zeros: all zero
    theirs = jax.grad(lambda a: jax.lax.reduce_prod(a, (1,)).sum())(x)
    np.testing.assert_allclose(g, np.asarray(theirs))
    v = np.ones_like(x)                                          # and second order
    hvp = fnad.jvp(fnad.grad(lambda a: red.reduce_sum(red.reduce_prod(a, (1,)), (0,))),
                   (x,), (v,))[1]
    j_hvp = jax.jvp(jax.grad(lambda a: jax.lax.reduce_prod(a, (1,)).sum()), (x,), (v,))[1]
    np.testing.assert_allclose(np.asarray(hvp), np.asarray(j_hvp))


def test_cumprod_derivatives_with_zeros_are_exact(jax):
    x = np.array([2.0, 0.0, 3.0, 0.0, 5.0])
    _, t = fnad.jvp(lambda a: cum.cumprod(a), (x,), (np.array([1.0, 2.0, 3.0, 4.0, 5.0]),))
    np.testing.assert_array_equal(np.asarray(t), [1.0, 4.0, 12.0, 0.0, 0.0])
    w = np.array([1.0, -2.0, 0.5, 3.0, 1.0])
    for rev in (False, True):
        ours = fnad.grad(lambda a, rev=rev: _weighted_sum(cum.cumprod(a, 0, rev), w))(x)
        theirs = jax.grad(lambda a, rev=rev: (jax.lax.cumprod(a, 0, rev) * w).sum())(x)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))


def test_cummax_ties_split_as_jax_splits_them(jax):
    x = np.array([3.0, 1.0, 3.0, 2.0, 3.0])
    t = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    _, ours = fnad.jvp(lambda a: cum.cummax(a), (x,), (t,))
    _, theirs = jax.jvp(jax.lax.cummax, (x,), (t,))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    _, ours = fnad.jvp(lambda a: cum.cummin(a, reverse=True), (x,), (t,))
    _, theirs = jax.jvp(lambda a: jax.lax.cummin(a, reverse=True), (x,), (t,))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))


def test_cumlogsumexp_derivative_across_a_huge_range(jax):
    """A masked prefix (-1e9) far below the rest: one common scale would give 0/0."""
    x = np.array([-1e9, -1e9, 0.0, 1.0, -1e9])
    t = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    _, ours = fnad.jvp(lambda a: cum.cumlogsumexp(a), (x,), (t,))
    _, theirs = jax.jvp(jax.lax.cumlogsumexp, (x,), (t,))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_allclose(np.asarray(ours)[:2], [1.0, 1.5])


def test_sort_tangents_follow_ties_like_the_values(jax):
    keys = np.array([2, 0, 2, 1, 0, 2], np.int32)
    vals = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    for stable in (True, False):
        (k, v), (_, v_dot) = fnad.jvp(
            lambda a, s=stable: srt.sort((keys, a), 0, s), (vals,), (vals * 10,))
        np.testing.assert_array_equal(np.asarray(v_dot), 10 * np.asarray(v))
    w = np.arange(6.0)
    ours = fnad.grad(lambda a: _weighted_sum(srt.sort_key_val(keys, a)[1], w))(vals)
    theirs = jax.grad(lambda a: (jax.lax.sort_key_val(keys, a)[1] * w).sum())(vals)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))


def test_grad_of_top_k_scatters_back_to_the_chosen_entries(jax):
    x = np.array([[0.3, 2.0, -1.0, 5.0], [1.0, 1.0, 0.0, 1.0]])     # ties in row 1
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    ours = fnad.grad(lambda a: _weighted_sum(srt.top_k(a, 2)[0], w))(x)
    theirs = jax.grad(lambda a: (jax.lax.top_k(a, 2)[0] * w).sum())(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_array_equal(np.asarray(ours), [[0, 2, 0, 1], [3, 4, 0, 0]])


def test_sort_jvp_and_transpose_in_jaxprs():
    with config.override(jax_enable_x64=True):
        x = np.array([[3.0, 1.0, 2.0]])
        jaxpr = fnad.make_jaxpr(fnad.grad(lambda a: _weighted_sum(srt.sort(a), x)))(x)
        text = str(jaxpr)
        assert text.count("sort[") >= 3          # primal, tangent, and the transpose's two
        g = fnad.grad(lambda a: _weighted_sum(srt.sort(a), np.array([[1.0, 2.0, 3.0]])))(x)
        np.testing.assert_array_equal(np.asarray(g), [[3.0, 1.0, 2.0]])

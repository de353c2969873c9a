"""fnad.numpy indexing: x[idx], x.at[idx], take, take_along_axis, nonzero and friends.

Values are checked against NumPy (the indexing rules) and jax.numpy (out-of-bounds
semantics, dtypes, gradients); the lowering is checked on jaxprs (basic slices must
not become gathers); every error a user can hit has its message checked.
"""
import inspect
import random
import re
import warnings

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad.numpy import _indexing as ix
from checks import traced

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover
    jax = jjnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")

X_NP = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)




def prims(f, *args) -> list[str]:
    return [e.primitive.name for e in fnad.make_jaxpr(f)(*args).jaxpr.eqns]


def assert_same(got, expected):
    got = np.asarray(got)
    assert got.shape == np.shape(expected)
    np.testing.assert_array_equal(got, expected)


# ---- x[idx] against NumPy --------------------------------------------------------------------
CASES = [
    0, -1, (1, 2), (slice(None), 1), slice(1, None), slice(None, None, -1), (slice(3, 0, -2),),
    (Ellipsis, 1), (None, 0), (0, None, slice(1, 3)), (Ellipsis, None), (), (np.int64(1), -1),
    (slice(5, 10),), (slice(None), slice(2, 2)), (slice(None, None, 3), slice(-1, -5, -3)),
    np.array([0, 1, 1]), np.array([-1, -2]), np.array([], dtype=np.int32),
    (np.array([[0], [1]]), np.array([0, 2])),
    (slice(None), np.array([0, 2]), np.array([1, 3])),                 # adjacent: stay in place
    (slice(None), np.array([0, 2]), slice(None), np.array([1, 3])),    # separated: go first
    (slice(None), 0, slice(None), np.array([1, 2])),                   # an int counts as advanced
    (np.array([1, 0]), Ellipsis, np.array([0, 4])),
    (slice(None), np.array([0]), Ellipsis, np.array([1])),             # empty ... separates
    (slice(None), np.array([0, 2]), None, np.array([1, 3])),           # so does None
    (None, np.array([1]), slice(None), np.array([0])),
    (slice(None, None, 2), np.array([0, 2])),
    (slice(None, None, -1), np.array([0, 2]), slice(4, 0, -2), np.array([[1], [0]])),
    (slice(None), [0, 2]), (1, slice(None), [[0, 1], [2, 3]], 0),
    X_NP > 50, (slice(None), np.array([True, False, True])), (0, X_NP[0] > 30),
    True, False, np.array(True), (slice(None), True, np.array([0, 1])),
]


@pytest.mark.parametrize("idx", CASES, ids=[repr(c)[:60] for c in CASES])
def test_getitem_matches_numpy(idx):
    x = jnp.asarray(X_NP)
    assert_same(x[idx], X_NP[idx])


def test_getitem_random_indices_match_numpy():
    rng = np.random.default_rng(0)
    rnd = random.Random(0)
    shape = (3, 4, 5, 2)
    xn = rng.standard_normal(shape).astype(np.float32)
    x = jnp.asarray(xn)

    def entry(n):
        r = rnd.random()
        if r < 0.2:
            return rnd.randrange(-n, n)
        if r < 0.45:
            return slice(rnd.choice([None, rnd.randrange(-n, n)]),
                         rnd.choice([None, rnd.randrange(-n - 1, n + 1)]),
                         rnd.choice([None, 1, 2, -1, -2, 3]))
        if r < 0.55:
            return None
        if r < 0.9:
            return rng.integers(-n, n, size=rnd.choice([(2,), (1,), (2, 1), (3,)]))
        return Ellipsis
    checked = 0
    for _ in range(600):
        idx, d = [], 0
        for _ in range(rnd.randrange(0, 5)):
            e = entry(shape[min(d, 3)])
            idx.append(e)
            d += e is not None and e is not Ellipsis
        idx = tuple(idx)
        try:
            expected = xn[idx]
        except IndexError:
            continue       # out of range for the axis it landed on, or too many indices
        assert_same(x[idx], expected)
        v = rng.standard_normal(expected.shape).astype(np.float32)
        ref = xn.copy()
        np.add.at(ref, idx, v)
        np.testing.assert_allclose(np.asarray(x.at[idx].add(v)), ref, atol=1e-5)
        checked += 1
    assert checked > 300


def test_getitem_dtype_and_weak_type_kept():
    xi = jnp.asarray(np.arange(6, dtype=np.int32))
    assert xi[np.array([1, 2])].dtype == np.int32
    assert xi[1:3].dtype == np.int32


# ---- lowering ----------------------------------------------------------------------------------
def test_basic_indexing_lowers_to_slices_not_gather():
    x = jnp.ones((3, 4, 5))
    names = prims(lambda x: x[1, ::-2, None, 1:4], x)
    assert "gather" not in names and "dynamic_slice" not in names
    assert {"slice", "rev", "squeeze"} <= set(names)
    assert prims(lambda x: x[...], x) == []


def test_traced_scalar_index_lowers_to_dynamic_slice():
    names = prims(lambda x, i: x[i, 1:3], jnp.ones((3, 4)), np.int32(1))
    assert "dynamic_slice" in names and "gather" not in names


def test_array_index_lowers_to_one_gather():
    names = prims(lambda x, i: x[i, :, 2], jnp.ones((3, 4, 5)), np.array([0, 2], np.int32))
    assert names.count("gather") == 1


def test_block_set_lowers_to_dynamic_update_slice():
    names = prims(lambda x, v: x.at[1:3, 2].set(v), jnp.ones((4, 5)), jnp.ones(2))
    assert "dynamic_update_slice" in names and "scatter" not in names


# ---- traced indices and out of bounds -------------------------------------------------------
def test_traced_scalar_index_clamps_like_jax():
    x = jnp.arange(5.0)
    f = traced(lambda i: x[i])
    assert float(f(np.int32(-2))) == 3.0
    assert float(f(np.int32(10))) == 4.0      # clamped (jit semantics of JAX)
    assert float(f(np.int32(-10))) == 0.0


def test_traced_array_index_matches_numpy():
    xn = X_NP[0]
    f = traced(lambda x, i, j: x[i, :, j])
    i, j = np.array([2, -1, 0], np.int32), np.array([[4], [0]], np.int32)
    assert_same(f(jnp.asarray(xn), i, j), xn[i, :, j])


def test_list_of_traced_scalars_is_an_array_index():
    xn = X_NP[0, 0]
    f = traced(lambda x, i, j: x[:, [i, j]])
    assert_same(f(jnp.asarray(xn), np.int32(1), np.int32(-1)), xn[:, [1, -1]])


@needs_jax
def test_out_of_bounds_array_indices_match_jax():
    xn = np.arange(5.0, dtype=np.float32)
    x, xj = jnp.asarray(xn), jjnp.asarray(xn)
    i = np.array([10, -10, -1, 2])
    assert_same(x[i], np.asarray(xj[i]))                                  # clamp
    assert_same(x.at[i].get(mode="fill", fill_value=-1.0),
                np.asarray(xj.at[i].get(mode="fill", fill_value=-1.0)))
    assert_same(x.at[i].get(mode="fill"), np.asarray(xj.at[i].get(mode="fill")))   # NaN
    assert_same(x.at[i].set(7.0), np.asarray(xj.at[i].set(7.0)))         # dropped
    assert_same(x.at[i].add(7.0, mode="clip"), np.asarray(xj.at[i].add(7.0, mode="clip")))
    assert_same(x.at[10].set(7.0), np.asarray(xj.at[10].set(7.0)))
    assert float(x.at[10].get(mode="clip")) == 4.0
    assert np.isnan(float(x.at[10].get(mode="fill")))


def test_static_out_of_bounds_int_raises_index_error():
    x = jnp.arange(5.0)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        x[5]
    with pytest.raises(IndexError, match="index -6 is out of bounds"):
        x[-6]
    with pytest.raises(IndexError, match="axis 1 with size 3"):
        jnp.ones((2, 3))[:, 3]


# ---- errors ---------------------------------------------------------------------------------
def test_traced_boolean_mask_is_a_clear_error():
    x = jnp.arange(5.0)
    f = traced(lambda m: x[m])
    with pytest.raises(ix.NonConcreteBooleanIndexError, match="must be concrete") as e:
        f(np.array([True, False, True, True, False]))
    assert isinstance(e.value, IndexError)
    assert "where" in str(e.value) and "size=" in str(e.value)


def test_concrete_boolean_mask_works_under_grad():
    xn = np.array([1.0, -2.0, 3.0], np.float32)
    g = fnad.grad(lambda x: jnp.sum(x[x > 0] ** 2))(xn)
    np.testing.assert_allclose(np.asarray(g), [2.0, 0.0, 6.0])


@pytest.mark.parametrize("idx, err, words", [
    ((0, 0, 0), IndexError, "Too many indices: array is 2-dimensional, but 3 were indexed"),
    ((Ellipsis, 0, Ellipsis), IndexError, "single ellipsis"),
    (1.5, TypeError, "Indexer must have integer or boolean type"),
    (np.array([0.0]), TypeError, "Indexer must have integer or boolean type"),
    ([0, 1], TypeError, "use `arr[array(seq)]`"),
    ([slice(None), 0], TypeError, "use `arr[tuple(seq)]`"),
    (np.array([True, False]), IndexError, "boolean index did not match"),
    ((np.array([0, 1]), np.array([0, 1, 2])), IndexError, "could not be broadcast"),
    (slice(0, 1.5), TypeError, "slice indices must be integers"),
])
def test_index_errors(idx, err, words):
    with pytest.raises(err, match=re.escape(words)):
        jnp.ones((3, 4))[idx]


def test_traced_slice_bound_is_an_index_error():
    with pytest.raises(IndexError, match="Slice entries must be static integers"):
        traced(lambda x, i: x[i:])(jnp.ones(4), np.int32(1))


def test_update_shape_mismatch_error():
    with pytest.raises(ValueError, match=r"shape mismatch: value array of shape \(3,\)"):
        jnp.zeros((4, 2)).at[1:3].set(jnp.ones(3))


# ---- x.at[idx] ----------------------------------------------------------------------------------
@needs_jax
@pytest.mark.parametrize("op", ["set", "add", "multiply", "mul", "min", "max", "divide",
                                "power", "subtract", "get"])
def test_at_ops_with_repeated_indices_match_jax(op):
    xn = np.arange(1.0, 6.0, dtype=np.float32)
    idx = np.array([1, 1, 3, -1])
    v = np.array([2.0, -3.0, 0.5, 1.5], np.float32)
    ours = getattr(jnp.asarray(xn).at[idx], op)
    theirs = getattr(jjnp.asarray(xn).at[idx], "multiply" if op == "mul" else op)
    args = () if op == "get" else (v,)
    np.testing.assert_allclose(np.asarray(ours(*args)), np.asarray(theirs(*args)), rtol=1e-6)


@pytest.mark.parametrize("shape, index", [((0,), (np.array([0]),)), ((0, 3), (np.array([0, 1]),)),
                                          ((2, 0), (slice(None), np.array([0])))])
@pytest.mark.parametrize("op, mode", [("add", None), ("add", "drop"), ("set", "clip"),
                                      ("mul", None)])
@needs_jax
def test_scatter_into_an_empty_axis_updates_nothing_as_jax(shape, index, op, mode):
    kw = {} if mode is None else {"mode": mode}
    want = getattr(jjnp.zeros(shape).at[index], "multiply" if op == "mul" else op)(2.0, **kw)
    got = getattr(jnp.zeros(shape).at[index], op)(2.0, **kw)
    assert got.shape == want.shape == shape and got.dtype == want.dtype
    if shape[0] == 0:
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
            jnp.zeros(shape).at[0].add(1.0)          # a static int: an error, as jax's


def test_at_add_accumulates_like_ufunc_at():
    xn = np.zeros((3, 4), np.float32)
    idx = (np.array([0, 2, 0, 0]), slice(None))
    ref = xn.copy()
    np.add.at(ref, idx, 1.0)
    assert_same(jnp.asarray(xn).at[idx].add(1.0), ref)
    ref = np.full((5,), np.inf, np.float32)
    np.minimum.at(ref, [1, 1, 4], [3.0, -2.0, 7.0])
    assert_same(jnp.full((5,), np.inf).at[np.array([1, 1, 4])].min(np.array([3.0, -2.0, 7.0])),
                ref)


@needs_jax
def test_at_updates_cast_to_the_array_dtype_like_jax():
    xi, xj = jnp.arange(5), jjnp.arange(5)
    out = xi.at[2].multiply(1.5)
    assert out.dtype == xi.dtype
    with warnings.catch_warnings():             # jax warns that float -> int is unsafe
        warnings.simplefilter("ignore", FutureWarning)
        assert_same(out, np.asarray(xj.at[2].multiply(1.5)))
        assert_same(xi.at[1:3].add(1.7), np.asarray(xj.at[1:3].add(1.7)))
    xb = jnp.zeros(3, jnp.bfloat16)
    assert xb.at[0].set(1.0).dtype == jnp.bfloat16


def test_at_basic_updates_broadcast_values():
    xn = np.zeros((3, 4, 5), np.float32)
    for idx, v in [((slice(None), 1), np.arange(5.0)), ((0, None, slice(1, 3)), 2.0),
                   ((slice(None, None, -1), 2, slice(None, None, 2)), np.arange(3.0)),
                   ((Ellipsis, np.array([0, 4])), np.ones((4, 2))), (np.s_[1:, ::2], 7.0)]:
        ref = xn.copy()
        ref[idx] = v
        assert_same(jnp.asarray(xn).at[idx].set(v), ref)


def test_at_with_traced_index_drops_out_of_bounds():
    f = traced(lambda x, i, v: x.at[i].set(v))
    x = jnp.zeros(4)
    assert_same(f(x, np.int32(2), np.float32(5.0)), [0, 0, 5, 0])
    assert_same(f(x, np.int32(-1), np.float32(5.0)), [0, 0, 0, 5])
    assert_same(f(x, np.int32(9), np.float32(5.0)), [0, 0, 0, 0])


def test_at_boolean_mask_update():
    xn = np.arange(6.0, dtype=np.float32)
    ref = xn.copy()
    ref[xn > 2] = 0.0
    assert_same(jnp.asarray(xn).at[xn > 2].set(0.0), ref)


# ---- gradients ---------------------------------------------------------------------------------
def _grads_match(f_ours, f_jax, *args, atol=1e-5):
    nums = tuple(range(len(args)))
    ours = fnad.grad(f_ours, argnums=nums)(*args)
    theirs = jax.grad(f_jax, argnums=nums)(*args)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol)


RNG = np.random.default_rng(1)
XG = RNG.standard_normal((4, 5)).astype(np.float32)
VG = RNG.standard_normal((3, 5)).astype(np.float32)
WG = RNG.standard_normal((4, 5)).astype(np.float32)
REPEATED = np.array([1, 1, 3])
X3 = RNG.standard_normal((4, 5, 5)).astype(np.float32)


@needs_jax
@pytest.mark.parametrize("op", ["set", "add", "min", "max"])
def test_at_update_gradients_with_repeated_indices(op):
    _grads_match(lambda x, v: jnp.sum(getattr(x.at[REPEATED], op)(v) * WG),
                 lambda x, v: (getattr(x.at[REPEATED], op)(v) * WG).sum(), XG, VG)


@needs_jax
def test_at_multiply_gradients():
    _grads_match(lambda x: jnp.sum(x.at[REPEATED].multiply(VG) * WG),
                 lambda x: (x.at[REPEATED].multiply(VG) * WG).sum(), XG)
    uniq = np.array([3, 0, 1])
    _grads_match(lambda x, v: jnp.sum(x.at[uniq].multiply(v, unique_indices=True) * WG),
                 lambda x, v: (x.at[uniq].multiply(v, unique_indices=True) * WG).sum(), XG, VG)


@needs_jax
@pytest.mark.parametrize("name, idx", [
    ("advanced+strided", (REPEATED, slice(None, None, -2))),
    ("basic", (slice(1, 3), None, slice(None, None, -2))),
    ("separated", (np.array([0, 3]), slice(1, 4), np.array([[1], [4]]))),
    ("mask", X3 > 0),
])
def test_getitem_gradients(name, idx):
    _grads_match(lambda x: jnp.sum(jnp.sin(x[idx])), lambda x: jjnp.sin(x[idx]).sum(), X3)


@needs_jax
def test_block_update_gradients():
    _grads_match(lambda x, v: jnp.sum(x.at[1:3, 2].set(v) * WG),
                 lambda x, v: (x.at[1:3, 2].set(v) * WG).sum(), XG, VG[0, :2])
    _grads_match(lambda x, v: jnp.sum(x.at[1:3, 2].multiply(v) * WG),
                 lambda x, v: (x.at[1:3, 2].multiply(v) * WG).sum(), XG, VG[0, :2])


@needs_jax
def test_take_along_axis_and_take_gradients():
    idx = np.array([[0, 4, 4]] * 4)
    _grads_match(lambda x: jnp.sum(jnp.take_along_axis(x, idx, axis=1) * WG[:, :3]),
                 lambda x: (jjnp.take_along_axis(x, idx, axis=1) * WG[:, :3]).sum(), XG)
    i = np.array([0, 4, 4, 9])
    _grads_match(lambda x: jnp.sum(jnp.take(x, i) * WG[0, :4]),
                 lambda x: (jjnp.take(x, i) * WG[0, :4]).sum(), XG)


# ---- take, take_along_axis ---------------------------------------------------------------------
@needs_jax
@pytest.mark.parametrize("mode", [None, "fill", "clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_matches_jax(mode, axis):
    xn = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    i = np.array([[0, -1], [5, 2]])
    np.testing.assert_array_equal(np.asarray(jnp.take(xn, i, axis=axis, mode=mode)),
                                  np.asarray(jjnp.take(xn, i, axis=axis, mode=mode)))


def test_take_in_bounds_matches_numpy_and_errors():
    xn = np.arange(24.0).reshape(2, 3, 4)
    i = np.array([[2, 0], [1, 1]])
    assert_same(jnp.take(xn, i, axis=1), np.take(xn, i, axis=1).astype(np.float32))
    assert_same(jnp.take(xn, i, axis=1, mode="fill", fill_value=-1.0),
                np.take(xn, i, axis=1).astype(np.float32))
    with pytest.raises(NotImplementedError, match="'raise' mode"):
        jnp.take(xn, i, mode="raise")
    with pytest.raises(IndexError, match="non-empty take"):
        jnp.take(jnp.zeros((0, 2)), np.array([0]), axis=0)
    with pytest.raises(TypeError, match="indices must be integers"):
        jnp.take(xn, np.array([0.5]))


@pytest.mark.parametrize("shape, ishape, axis", [
    ((3, 4), (3, 2), 1), ((3, 4), (1, 4), 0), ((3, 1, 5), (3, 4, 2), 2), ((6,), (4,), None),
    ((2, 3, 4), (2, 3, 0), 2), ((3, 4), (3, 4), -1)])
def test_take_along_axis_matches_numpy(shape, ishape, axis):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shape).astype(np.float32)
    n = a.size if axis is None else shape[axis]
    i = rng.integers(-n, n, size=ishape)
    expected = np.take_along_axis(a, i, axis=axis)
    assert_same(jnp.take_along_axis(a, i, axis=axis), expected)
    assert_same(traced(lambda a, i: jnp.take_along_axis(a, i, axis=axis))(a, i.astype(np.int32)),
                expected)


@needs_jax
def test_take_along_axis_out_of_bounds_matches_jax():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    i = np.array([[0, 7], [-1, -5], [-9, 4]])     # -5 wraps once, to -1: out of bounds
    for mode in [None, "clip", "fill"]:
        np.testing.assert_array_equal(
            np.asarray(jnp.take_along_axis(a, i, axis=1, mode=mode)),
            np.asarray(jjnp.take_along_axis(a, i, axis=1, mode=mode)))
    with pytest.raises(ValueError, match="same number of dimensions"):
        jnp.take_along_axis(a, np.array([0]), axis=1)


# ---- nonzero, argwhere, flatnonzero, compress, index helpers ---------------------------------
A_NZ = np.array([[0, 1, 0], [2, 0, 3]], np.float32)


def test_nonzero_family_concrete_matches_numpy():
    for got, exp in zip(jnp.nonzero(A_NZ), np.nonzero(A_NZ)):
        assert_same(got, exp)
    assert_same(jnp.argwhere(A_NZ), np.argwhere(A_NZ))
    assert_same(jnp.flatnonzero(A_NZ), np.flatnonzero(A_NZ))
    assert jnp.argwhere(3.0).shape == (1, 0) and jnp.argwhere(0.0).shape == (0, 0)
    assert_same(jnp.nonzero(A_NZ, size=5, fill_value=-1)[0], [0, 1, 1, -1, -1])
    assert_same(jnp.nonzero(A_NZ, size=2)[1], [1, 0])


def test_where_with_one_argument_is_nonzero():
    for got, exp in zip(jnp.where(A_NZ > 0), np.where(A_NZ > 0)):
        assert_same(got, exp)
    got = traced(lambda a: jnp.where(a, size=4, fill_value=-1))(A_NZ)
    assert_same(got[1], [1, 0, 2, -1])


@pytest.mark.parametrize("size, fill", [(5, None), (5, -1), (2, None), (3, (7, 8))])
def test_nonzero_traced_needs_size(size, fill):
    exp = [np.asarray(i) for i in jnp.nonzero(A_NZ, size=size, fill_value=fill)]
    got = traced(lambda a: jnp.nonzero(a, size=size, fill_value=fill))(A_NZ)
    for g, e in zip(got, exp):
        assert_same(g, e)
    got = traced(lambda a: jnp.argwhere(a, size=size, fill_value=fill))(A_NZ)
    assert_same(got, np.stack(exp, axis=1))


def test_nonzero_traced_without_size_is_a_clear_error():
    with pytest.raises(fnad.ConcretizationTypeError, match="Pass a static `size=`"):
        traced(jnp.nonzero)(A_NZ)
    with pytest.raises(ValueError, match="nonzero on 0d arrays"):
        jnp.nonzero(1.0)


def test_compress_and_index_helpers_match_numpy():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    c = np.array([True, False, True])
    assert_same(jnp.compress(c, a, axis=0), np.compress(c, a, axis=0))
    assert_same(jnp.compress(c, a), np.compress(c, a))
    assert_same(jnp.compress(c, a, axis=1, size=3, fill_value=-1.0),
                np.concatenate([np.compress(c, a, axis=1), np.full((3, 1), -1.0)], axis=1))
    for ours, theirs in [(jnp.tril_indices(4, 1), np.tril_indices(4, 1)),
                         (jnp.triu_indices(3, -1, 5), np.triu_indices(3, -1, 5)),
                         (jnp.diag_indices(3, 3), np.diag_indices(3, 3)),
                         (jnp.tril_indices_from(a), np.tril_indices_from(a)),
                         (jnp.diag_indices_from(np.ones((2, 2))), np.diag_indices(2))]:
        for g, e in zip(ours, theirs):
            assert_same(g, e)


def test_public_names_are_exported():
    for name in ["take", "take_along_axis", "nonzero", "argwhere", "flatnonzero", "compress",
                 "tril_indices", "triu_indices", "diag_indices"]:
        # (take is wrapped to also take typed PRNG keys: fnad/prng.py)
        assert inspect.unwrap(getattr(jnp, name)) is getattr(ix, name)
    assert isinstance(jnp.ones(2).at, ix.IndexUpdateHelper)

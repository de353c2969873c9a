"""fnad.numpy's newer functions against jax.numpy: Array-API aliases and shape helpers,
counting / binning / set operations, calculus and polynomials, index arithmetic and
editing, function-applying routines, elementwise extras and window functions.

jax.numpy is the oracle for values, result dtypes, static-size rules and gradients;
each group also runs once under fnad.jit and fnad.vmap.
"""
import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from checks import traced

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jjnp  # noqa: E402

RNG = np.random.default_rng(0)
F = RNG.standard_normal((3, 4)).astype(np.float32)
I = RNG.integers(-3, 5, (3, 4)).astype(np.int32)


def same(got, expected, atol=1e-5, rtol=1e-5):
    """Same shape, dtype and values (NaNs equal); tuples and lists element by element."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), (got, expected)
        for g, e in zip(got, expected):
            same(g, e, atol, rtol)
        return
    g, e = np.asarray(got), np.asarray(expected)
    assert g.shape == e.shape, (g.shape, e.shape)
    assert g.dtype == e.dtype, (g.dtype, e.dtype)
    if e.dtype.kind in "fc":
        np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, e)


_NEEDS_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                   jax.errors.TracerIntegerConversionError,
                   jax.errors.NonConcreteBooleanIndexError)


def compiled(f, *args):
    """f(*args) by jax, compiled as one program where it can be (op-by-op jax compiles each
    operation: that would be most of this file's time), else eagerly (where f needs
    concrete values: no static size=)."""
    try:
        return jax.jit(f)(*args)
    except _NEEDS_CONCRETE:
        return f(*args)


def oracle(name, *args, **kw):
    """jax.numpy.name(*args, **kw), compiled where it can be."""
    return compiled(lambda: getattr(jjnp, name)(*args, **kw))


def both(name, *args, **kw):
    """fnad.numpy.name and jax.numpy.name on the same arguments, compared."""
    same(getattr(jnp, name)(*args, **kw), oracle(name, *args, **kw))


def grads_match(f_fnad, f_jax, *args, argnums=0, atol=1e-4):
    """fnad.grad against jax.grad (compiled: one program, not one per operation)."""
    same(fnad.grad(f_fnad, argnums=argnums)(*args),
         compiled(lambda: jax.grad(f_jax, argnums=argnums)(*args)), atol=atol, rtol=atol)


# ---- 1. Array-API aliases and shape helpers ---------------------------------------------------
@pytest.mark.parametrize("axis", [0, -1, None])
def test_concat_append_unstack(axis):
    both("concat", [F, F[:2] if axis == 0 else F], axis=axis)
    both("append", F, F if axis is not None else I, axis=axis)
    if axis is not None:
        both("unstack", F, axis=axis)
    both("unstack", np.zeros((0, 2), np.float32))
    with pytest.raises(ValueError, match="rank > 0"):
        jnp.unstack(np.float32(1))


def test_astype():
    for dt in [np.int32, np.float16, bool, None]:
        both("astype", F, dt)
    both("astype", np.array([1 + 2j, 0], np.complex64), bool)
    with pytest.warns(DeprecationWarning, match="complex to real"):
        out = jnp.astype(np.array([1 + 2j], np.complex64), np.float32)
    same(out, np.array([1.0], np.float32))


def test_block_rollaxis_splits_resize():
    a, b = np.ones((2, 2), np.float32), np.zeros((2, 3), np.int32)
    both("block", [[a, b], [b[:, :2] + 2, np.full((2, 3), 3.0, np.float32)]])
    both("block", [F, F])
    both("block", np.float32(2))
    for bad, words in [([], "empty list"), ((a, a), "tuples"), ([[a], a], "depths")]:
        with pytest.raises(ValueError, match=words):
            jnp.block(bad)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis, start in [(2, 0), (0, 3), (-1, 1), (1, -1)]:
        both("rollaxis", x, axis, start)
    for name in ["hsplit", "vsplit", "dsplit"]:
        both(name, x, 2 if name != "hsplit" else 3)
        both(name, x, [1])
    both("hsplit", np.arange(6), 3)
    with pytest.raises(ValueError, match="3 or more dimensions"):
        jnp.dsplit(F, 2)
    for shape in [(5,), (2, 7), (0,), (3, 0)]:
        both("resize", F, shape)
    both("resize", np.zeros(0, np.int32), (2, 2))


def test_ix_index_exp_r_c():
    rows, cols = np.array([0, 2]), np.array([1, 3, 0])
    both("ix_", rows, cols)
    same(jnp.asarray(F)[jnp.ix_(rows, cols)], F[np.ix_(rows, cols)])
    both("ix_", np.zeros(0, np.int32), cols)
    assert jnp.s_[1:3, ::2] == jjnp.s_[1:3, ::2] and jnp.index_exp[2] == jjnp.index_exp[2]
    same(jnp.r_[-1:5:1, 0, 0, np.array([1, 2, 3])], jjnp.r_[-1:5:1, 0, 0, np.array([1, 2, 3])])
    same(jnp.r_[-1:1:6j, 0], jjnp.r_[-1:1:6j, 0])
    for d in ["0,2", "0,2,0", "0,2,-2", "r", "c", "1,3"]:
        same(jnp.r_[d, [1, 2, 3], [4, 5, 6]], jjnp.r_[d, [1, 2, 3], [4, 5, 6]])
        same(jnp.c_[d, [1, 2, 3], [4, 5, 6]], jjnp.c_[d, [1, 2, 3], [4, 5, 6]])
    same(jnp.c_[F, F], jjnp.c_[F, F])
    same(jnp.c_[np.arange(3), np.arange(3.0)], jjnp.c_[np.arange(3), np.arange(3.0)])
    with pytest.raises(ValueError, match="directive"):
        jnp.r_["x,y", [1]]


def test_matvec_vecmat_vecdot():
    m = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    v4, v3 = F[0], RNG.standard_normal((5, 1, 3)).astype(np.float32)
    both("matvec", m, v4)
    both("vecmat", v3, m)
    both("vecdot", F, F[1])
    both("vecdot", m, np.ones((3, 1), np.float32), axis=-2)
    c = (F + 1j * F[::-1]).astype(np.complex64)
    both("vecdot", c, c[0])
    both("vecmat", c[0, :3], m.astype(np.complex64))
    both("vecdot", I, I)
    with pytest.raises(ValueError, match="axes must match"):
        jnp.vecdot(F, F[:, :2])
    grads_match(lambda a: jnp.sum(jnp.matvec(m, a) ** 2),
                lambda a: jjnp.sum(jjnp.matvec(m, a) ** 2), v4)
    grads_match(lambda a: jnp.vecdot(a, F).sum(), lambda a: jjnp.vecdot(a, F).sum(), F[1])


def test_array_equiv_iterable_iscomplex_isreal():
    for a, b in [(F, F), (F, F[0]), (F[0], F[0] + 1), (np.zeros(0), np.zeros(0))]:
        both("array_equiv", a, b)
    # Shapes that do not broadcast: False, as NumPy and JAX's docs (jax 0.10 raises TypeError).
    same(jnp.array_equiv(F, F[:2]), np.array_equiv(F, F[:2]))
    for y in [F, 3, [1], "ab", jnp.asarray(3.0), jnp.asarray([1, 2])]:
        assert jnp.iterable(y) == jjnp.iterable(y)
    c = np.array([1 + 0j, 2j, 0, np.nan + 1j], np.complex64)
    for x in [c, F, I, 3.0]:
        both("iscomplex", x)
        both("isreal", x)


def test_group1_under_jit_and_vmap():
    f = traced(lambda x: jnp.block([[x, x], [x, x]]).sum() + jnp.concat(jnp.unstack(x)).sum()
               + jnp.resize(x, (7,)).sum() + jnp.append(x, x).sum())
    g = lambda x: (jjnp.block([[x, x], [x, x]]).sum() + jjnp.concat(jjnp.unstack(x)).sum()
                   + jjnp.resize(x, (7,)).sum() + jjnp.append(x, x).sum())
    same(f(F), g(F), atol=1e-4)
    same(fnad.vmap(lambda r: jnp.vecdot(r, r))(F), jax.vmap(lambda r: jjnp.vecdot(r, r))(F))
    grads_match(lambda x: (jnp.rollaxis(x, 1) ** 2 * jnp.arange(3.0)).sum(),
                lambda x: (jjnp.rollaxis(x, 1) ** 2 * jjnp.arange(3.0)).sum(), F)


# ---- 2. counting, binning, sets -------------------------------------------------------------
def test_bincount():
    x = np.array([0, 1, 1, 3, 2, 1, 7], np.int32)
    w = np.linspace(0, 1, 7, dtype=np.float32)
    both("bincount", x)
    both("bincount", x, w)
    both("bincount", x, minlength=10)
    both("bincount", x, w, length=4)
    both("bincount", np.zeros(0, np.int32))
    both("bincount", np.array([True, False, True]))
    both("bincount", np.array([-2, 1], np.int32))
    same(traced(lambda x, w: jnp.bincount(x, w, length=5))(x, w),
         jjnp.bincount(x, w, length=5))
    with pytest.raises(fnad.ConcretizationTypeError, match="length="):
        traced(jnp.bincount)(x)
    with pytest.raises(TypeError, match="integer"):
        jnp.bincount(w)
    grads_match(lambda w: (jnp.bincount(x, w) ** 2).sum(),
                lambda w: (jjnp.bincount(x, w) ** 2).sum(), w)


def test_digitize_and_histogram():
    x = np.array([-1, 0, 0.5, 1, 2.5, 3, 10], np.float32)
    for bins, right in [(np.array([0, 1, 2, 3.0]), False), (np.array([0, 1, 2, 3.0]), True),
                        (np.array([3, 2, 1, 0.0]), True), (np.zeros(0), False)]:
        both("digitize", x, bins, right)
    both("digitize", np.array([[1, 5], [2, 9]]), np.array([0, 3, 6]))
    a = RNG.standard_normal(50).astype(np.float32)
    w = RNG.random(50).astype(np.float32)
    for kw in [{}, dict(bins=np.array([-2, 0, 0.5, 3])), dict(bins=5, range=(-1, 1)),
               dict(bins=4, weights=w, density=True)]:
        both("histogram", a, **kw)
    both("histogram_bin_edges", np.ones(3, np.int32), 3)
    both("histogram", np.arange(5))
    grads_match(lambda w: (jnp.histogram(a, 4, weights=w)[0] ** 2).sum(),
                lambda w: (jjnp.histogram(a, 4, weights=w)[0] ** 2).sum(), w)
    same(traced(lambda a: jnp.histogram(a, 6))(a), jjnp.histogram(a, 6))


@pytest.mark.parametrize("method", ["auto", "compare_all", "binary_search", "sort"])
def test_isin(method):
    e = np.array([[1, 2, 5], [7, 2, 0]], np.int32)
    t = np.array([2, 7, 9, 2], np.int32)
    for invert in [False, True]:
        both("isin", e, t, invert=invert, method=method)
    both("isin", np.zeros(0), t, method=method)
    both("isin", e, np.zeros(0, np.int32), method=method)
    both("isin", np.array([1.0, np.nan]), np.array([np.nan, 1.0]), method=method)


def test_unique_functions():
    x = np.array([[3, 1, 1], [2, 3, 0]], np.int32)
    xf = np.array([1.0, np.nan, 1.0, np.nan], np.float32)
    for name in ["unique_values", "unique_counts", "unique_inverse", "unique_all"]:
        both(name, xf)
    both("unique_all", x)
    both("unique_counts", np.zeros(0, np.float32))
    both("unique_all", x, size=6)
    both("unique_inverse", x, size=2, fill_value=-1)
    same(traced(lambda x: jnp.unique_all(x, size=5))(x), jjnp.unique_all(x, size=5))
    r = jnp.unique_all(x)
    assert r._fields == jjnp.unique_all(x)._fields and r.counts is r[3]


SETS = [(np.array([1, 2, 3, 2, 5]), np.array([2, 5, 8])),
        (np.array([[4, 1], [1, 0]], np.int32), np.array([7.0, 1.0, 4.0], np.float32)),
        (np.zeros(0, np.int32), np.array([1, 2], np.int32))]


def like_jax(name, *args, **kw):
    """NumPy's result for name(*args, **kw) in the dtypes jax.numpy gives (found by tracing
    the static-size version, which compiles nothing): jax's own eager path without size=
    compiles each operation, which would be most of this file's time."""
    shapes = jax.eval_shape(lambda: getattr(jjnp, name)(*args, size=1, **kw))
    out = getattr(np, name)(*args, **kw)
    if isinstance(out, tuple):
        return tuple(np.asarray(o).astype(s.dtype) for o, s in zip(out, shapes))
    return np.asarray(out).astype(shapes.dtype)


@pytest.mark.parametrize("a, b", SETS)
def test_set_operations(a, b):
    for name in ["union1d", "intersect1d", "setdiff1d", "setxor1d"]:
        same(getattr(jnp, name)(a, b), like_jax(name, a, b))
        for size, fill in [(6, None), (2, -7)] if a is SETS[0][0] else [(5, None)]:
            both(name, a, b, size=size, fill_value=fill)
    if a.size:                          # jax 0.10 fails to gather from the empty indices
        same(jnp.intersect1d(a, b, return_indices=True),
             like_jax("intersect1d", a, b, return_indices=True))
        both("intersect1d", a, b, return_indices=True, size=4)
    else:
        assert [r.shape for r in jnp.intersect1d(a, b, return_indices=True, size=4)] == [(4,)] * 3
    ua, ub = np.unique(a), np.unique(b)
    for name in ["intersect1d", "setdiff1d", "setxor1d"]:
        same(getattr(jnp, name)(ua, ub, assume_unique=True),
             like_jax(name, ua, ub, assume_unique=True))
    both("setxor1d", ua, ub, assume_unique=True, size=5)
    both("intersect1d", ua, ub, assume_unique=True, size=5)


def test_set_operations_under_jit_need_size():
    a, b = SETS[0]
    for name in ["union1d", "intersect1d", "setdiff1d", "setxor1d"]:
        same(traced(lambda a, b: getattr(jnp, name)(a, b, size=4))(a, b),
             getattr(jjnp, name)(a, b, size=4))
        with pytest.raises(fnad.ConcretizationTypeError, match="size="):
            traced(getattr(jnp, name))(a, b)
    same(fnad.vmap(lambda r: jnp.isin(r, b))(np.stack([a, a + 1])),
         jax.vmap(lambda r: jjnp.isin(r, b))(np.stack([a, a + 1])))


# ---- 3. calculus and polynomials ----------------------------------------------------------------
def test_gradient():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    both("gradient", x)
    both("gradient", x, axis=-1)
    both("gradient", x, 0.5)
    both("gradient", x, 2.0, 0.5)
    both("gradient", x, np.array([0, 1, 3, 4.5], np.float32), axis=0)
    both("gradient", x, np.array([0, 1, 3, 4.5], np.float32), np.arange(5.0), axis=(0, 1))
    both("gradient", np.arange(6), axis=0)
    both("gradient", x, axis=())
    with pytest.raises(ValueError, match="at least 2 elements"):
        jnp.gradient(np.ones((1, 3)))
    with pytest.raises(NotImplementedError, match="edge_order"):
        jnp.gradient(x, edge_order=2)
    grads_match(lambda a: (jnp.gradient(a, axis=1) ** 2).sum(),
                lambda a: (jjnp.gradient(a, axis=1) ** 2).sum(), x)


def test_trapezoid():
    y = RNG.standard_normal((3, 5)).astype(np.float32)
    both("trapezoid", y)
    both("trapezoid", y, dx=0.3, axis=0)
    both("trapezoid", y, np.array([0, 1, 1.5, 3, 4], np.float32))
    both("trapezoid", y, np.cumsum(np.abs(y), axis=0), axis=0)
    both("trapezoid", np.arange(5))
    both("trapezoid", y, dx=np.array([1.0, 2.0, 0.5], np.float32)[:, None])
    grads_match(lambda y, x: jnp.trapezoid(y, x), lambda y, x: jjnp.trapezoid(y, x),
                y[0], np.array([0, 1, 1.5, 3, 4], np.float32), argnums=(0, 1))


def test_polynomials():
    p, q = np.array([1.0, -2, 0, 3], np.float32), np.array([2, 1], np.int32)
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    for a in [p, q, np.zeros(0, np.float32)]:
        both("polyval", a, x)
        both("polyval", a, 3)
        for b in [p, q]:
            for name in ["polyadd", "polysub", "polymul"]:
                if a.size or name == "polymul":
                    both(name, a, b)
        for m in [0, 1, 2, 5]:
            if a.size:
                both("polyder", a, m)
            both("polyint", a, m)
    both("polyint", p, 2, k=np.array([1.0, 2.0]))
    both("polyint", q, 3, k=4)
    both("polyval", np.ones((3, 2), np.float32), np.arange(2.0))
    both("polymul", np.array([0, 0, 1.0, 2]), q, trim_leading_zeros=True)
    for n, inc in [(None, False), (3, True), (0, False), (5, False)]:
        both("vander", x, n, inc)
        both("vander", q, n, inc)
    with pytest.raises(ValueError, match="positive"):
        jnp.polyder(p, -1)
    grads_match(lambda p, x: jnp.polyval(p, x).sum(), lambda p, x: jjnp.polyval(p, x).sum(), p, x,
                argnums=(0, 1))
    grads_match(lambda x: jnp.vander(x, 4).sum(), lambda x: jjnp.vander(x, 4).sum(),
                np.array([0.5, 1.5, -2.0], np.float32))
    # At x = 0 jax's gradient of the x^0 column is NaN (0 · 0^-1); fnad's is 0.
    same(fnad.grad(lambda x: jnp.vander(x, 3).sum())(np.zeros(2, np.float32)),
         np.ones(2, np.float32))
    grads_match(lambda p: (jnp.polymul(p, p) ** 2).sum() + jnp.polyint(p).sum()
                + jnp.polyder(p).sum(),
                lambda p: (jjnp.polymul(p, p) ** 2).sum() + jjnp.polyint(p).sum()
                + jjnp.polyder(p).sum(), p)
    same(traced(lambda p, x: jnp.polyval(jnp.polyder(p), x))(p, x),
         jjnp.polyval(jjnp.polyder(p), x))
    same(fnad.vmap(jnp.polyval, in_axes=(None, 0))(p, x), jjnp.polyval(p, x))


# ---- 4. index arithmetic and editing ---------------------------------------------------------
def test_unravel_and_ravel_multi_index():
    idx = np.array([0, 5, 11, 12, -1, -13], np.int32)
    for shape in [(3, 4), (12,), (2, 3, 2), 12]:
        both("unravel_index", idx, shape)
    both("unravel_index", np.uint32(7), (2, 4))
    mi = (np.array([0, 2, 1]), np.array([3, 0, 4]))
    for mode in ["clip", "wrap"]:
        for order in ["C", "F"]:
            both("ravel_multi_index", mi, (3, 4), mode=mode, order=order)
    both("ravel_multi_index", (np.array([0, 2]), np.array([3, 0])), (3, 4))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index(mi, (3, 4))
    with pytest.raises(fnad.ConcretizationTypeError, match="mode='wrap'"):
        traced(lambda i, j: jnp.ravel_multi_index((i, j), (3, 4)))(*mi)
    same(traced(lambda i, j: jnp.ravel_multi_index((i, j), (3, 4), mode="clip"))(*mi),
         jjnp.ravel_multi_index(mi, (3, 4), mode="clip"))
    same(traced(lambda i: jnp.unravel_index(i, (3, 4)))(idx), jjnp.unravel_index(idx, (3, 4)))


@pytest.mark.parametrize("axis", [None, -1])
def test_insert_and_delete(axis):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    objs = [-1, np.array([2, 0, 2]), slice(0, 3, 2), np.array([], np.int32)]
    for obj in objs:
        for values in [9.5, np.array([7, 8, 9])]:
            try:
                expected = oracle("insert", x, obj, values, axis=axis)
            except (ValueError, TypeError):
                continue
            same(jnp.insert(x, obj, values, axis=axis), expected)
        try:
            expected = oracle("delete", x, obj, axis=axis)
        except (ValueError, TypeError, IndexError):
            continue
        same(jnp.delete(x, obj, axis=axis), expected)
    n = x.size if axis is None else x.shape[axis]
    mask = np.arange(n) % 2 == 0
    both("delete", x, mask, axis=axis)
    both("delete", x, np.array([0, 1]), axis=axis, assume_unique_indices=True)


def test_insert_delete_traced_and_grad():
    x = np.arange(6, dtype=np.float32)
    i = np.array([1, 4], np.int32)
    same(traced(lambda x, i: jnp.insert(x, i, 0.5))(x, i), jjnp.insert(x, i, 0.5))
    same(traced(lambda x, i: jnp.delete(x, i, assume_unique_indices=True))(x, i),
         jjnp.delete(x, i, assume_unique_indices=True))
    with pytest.raises(fnad.ConcretizationTypeError, match="assume_unique_indices=True"):
        traced(jnp.delete)(x, i)
    with pytest.raises(TypeError, match="must be integers"):
        traced(lambda x, i: jnp.delete(x, i.astype(np.float32), assume_unique_indices=True))(x, i)
    w = np.arange(1.0, 9.0, dtype=np.float32)
    grads_match(lambda x: (jnp.insert(x, 2, x[:2]) * w).sum(),
                lambda x: (jjnp.insert(x, 2, x[:2]) * w).sum(), x)
    grads_match(lambda x: (jnp.delete(x, [0, 3]) * w[:4]).sum(),
                lambda x: (jjnp.delete(x, jjnp.array([0, 3])) * w[:4]).sum(), x)


def test_fill_diagonal_and_put_along_axis():
    a = np.zeros((4, 3), np.float32)
    for val in [5.0, np.array([1.0, 2.0]), np.arange(6.0)]:
        both("fill_diagonal", a, val, inplace=False)
    both("fill_diagonal", np.zeros((3, 3, 3), np.int32), 7, inplace=False)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.fill_diagonal(a, 1.0)
    with pytest.raises(ValueError, match="equal length"):
        jnp.fill_diagonal(np.zeros((2, 3, 3)), 1.0, inplace=False)
    arr = RNG.standard_normal((3, 4)).astype(np.float32)
    idx = np.argsort(arr, axis=1)[:, :2]
    for axis, ind, vals in [(1, idx, 0.0), (1, idx, np.array([[1.0], [2], [3]])),
                            (0, np.array([[2, 0, 1, 1]]), -1.0),
                            (None, np.array([0, 11, 5]), np.array([7.0, 8, 9]))]:
        both("put_along_axis", arr, ind, vals, axis, inplace=False)
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.put_along_axis(arr, idx, 0.0, 1)
    grads_match(lambda x: (jnp.fill_diagonal(x, 0.0, inplace=False) ** 2).sum(),
                lambda x: (jjnp.fill_diagonal(x, 0.0, inplace=False) ** 2).sum(), arr)
    grads_match(lambda v: (jnp.put_along_axis(arr, idx, v, 1, inplace=False) ** 2).sum(),
                lambda v: (jjnp.put_along_axis(arr, idx, v, 1, inplace=False) ** 2).sum(),
                np.ones((3, 2), np.float32))


def test_choose_and_extract():
    choices = [np.arange(4.0), np.arange(10.0, 14.0), np.full(4, -1.0)]
    a = np.array([0, 2, 1, 2], np.int32)
    both("choose", a, choices)
    both("choose", np.array([[0], [1]]), choices)
    for mode in ["wrap", "clip"]:
        both("choose", np.array([-1, 3, 5, 1]), choices, mode=mode)
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.choose(np.array([3, 0, 0, 0]), choices)
    with pytest.raises(fnad.ConcretizationTypeError, match="mode='wrap'"):
        traced(lambda a: jnp.choose(a, choices))(a)
    cond = F > 0
    both("extract", cond, F)
    both("extract", cond, F, size=8, fill_value=-1.0)
    both("extract", np.zeros(0, bool), np.zeros(0))
    same(traced(lambda c, x: jnp.extract(c, x, size=5))(cond, F), jjnp.extract(cond, F, size=5))
    grads_match(lambda c: jnp.choose(a, [c, 2 * c, c ** 2], mode="clip").sum(),
                lambda c: jjnp.choose(a, [c, 2 * c, c ** 2], mode="clip").sum(), choices[1])


def test_piecewise_fromfunction_apply():
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    conds = [x < -1, x > 1]
    for funcs, args in [([-1.0, 1.0], ()), ([lambda v: v ** 2, lambda v: -v, 0.5], ()),
                        ([lambda v, k: k * v, lambda v, k: v + k], (3.0,))]:
        both("piecewise", x, conds, funcs, *args)
    both("piecewise", np.arange(5), [np.arange(5) > 2], [lambda v: v * 2, 7])
    with pytest.raises(ValueError, match="functions are expected"):
        jnp.piecewise(x, conds, [1.0])
    grads_match(lambda x: jnp.piecewise(x, [x < 0], [lambda v: v ** 2, jnp.sin]).sum(),
                lambda x: jjnp.piecewise(x, [x < 0], [lambda v: v ** 2, jjnp.sin]).sum(), x)
    both("fromfunction", lambda i, j: i * 10 + j, (3, 4))
    both("fromfunction", lambda i: i ** 2, (5,), dtype=np.int32)
    x3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for axis in [0, 1, -1]:
        same(jnp.apply_along_axis(jnp.cumsum, axis, x3),
             jjnp.apply_along_axis(jjnp.cumsum, axis, x3))
        same(jnp.apply_along_axis(lambda v, p: jnp.sum(v ** p), axis, x3, 2),
             jjnp.apply_along_axis(lambda v, p: jjnp.sum(v ** p), axis, x3, 2))
    same(jnp.apply_along_axis(lambda v: jnp.outer(v, v), 1, F),
         jjnp.apply_along_axis(lambda v: jjnp.outer(v, v), 1, F))
    same(jnp.apply_over_axes(jnp.sum, x3, [0, 2]), oracle("apply_over_axes", jjnp.sum, x3, [0, 2]))
    same(jnp.apply_over_axes(jnp.cumsum, x3, (1,)), jjnp.apply_over_axes(jjnp.cumsum, x3, (1,)))
    grads_match(lambda x: jnp.apply_along_axis(lambda v: jnp.max(v) ** 2, 1, x).sum(),
                lambda x: jjnp.apply_along_axis(lambda v: jjnp.max(v) ** 2, 1, x).sum(), x3)


def test_vectorize():
    def f(a, b):
        return a * 2 + b
    same(jnp.vectorize(f)(F, F[0]), jjnp.vectorize(f)(F, F[0]))
    same(jnp.vectorize(f)(np.ones((3, 1)), np.ones((1, 4))),
         jjnp.vectorize(f)(np.ones((3, 1)), np.ones((1, 4))))

    def stats(v):
        return jnp.mean(v), jnp.max(v)
    got = jnp.vectorize(stats, signature="(n)->(),()")(F)
    same(got, jjnp.vectorize(lambda v: (jjnp.mean(v), jjnp.max(v)), signature="(n)->(),()")(F))
    m = RNG.standard_normal((5, 3, 4)).astype(np.float32)
    same(jnp.vectorize(jnp.matmul, signature="(n,m),(m)->(n)")(m, F[0]),
         jjnp.vectorize(jjnp.matmul, signature="(n,m),(m)->(n)")(m, F[0]))

    def scaled(x, scale, mode="add"):
        assert isinstance(mode, str) and isinstance(scale, list)
        return x * scale[0] if mode == "mul" else x + scale[0]
    same(jnp.vectorize(scaled, excluded={1, "mode"})(F, [3.0], mode="mul"), F * 3)
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'm'"):
        jnp.vectorize(jnp.matmul, signature="(n,m),(m)->(n)")(m, F[0, :3])
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(f, signature="(n)->")(F, F)
    with pytest.raises(ValueError, match="output shape"):
        jnp.vectorize(lambda v: v, signature="(n)->()")(F)
    with pytest.raises(TypeError, match="exclude integer or string"):
        jnp.vectorize(f, excluded={1.5})
    grads_match(lambda x: jnp.vectorize(lambda v: jnp.sin(v) * v)(x).sum(),
                lambda x: jjnp.vectorize(lambda v: jjnp.sin(v) * v)(x).sum(), F)
    same(traced(jnp.vectorize(jnp.dot, signature="(n),(n)->()"))(F, F),
         jjnp.vectorize(jjnp.dot, signature="(n),(n)->()")(F, F))


# ---- 5. elementwise extras, windows, geomspace ------------------------------------------------
FLOATS = np.array([0.0, -0.0, 1.0, -1.5, 0.75, 1e-30, 3e38, 2.0 ** -126, 1.5e-45, -7.0e-44,
                   np.inf, -np.inf, np.nan, 1024.0, 3.0, 0.1], np.float32)
NORMAL = FLOATS[~(np.abs(FLOATS) < 2.0 ** -126) | (FLOATS == 0)]   # XLA's CPU flushes subnormals


def test_frexp_ldexp_modf():
    both("frexp", NORMAL)
    m, e = jnp.frexp(FLOATS)                                   # subnormals: as NumPy
    same((m, e), np.frexp(FLOATS))
    both("frexp", np.array([1, -4, 0, 7], np.int32))
    both("modf", FLOATS)
    e = np.array([0, 1, -1, 5, -130, 200, -200, 3, 0, 1, 2, -3, 7, -1, 128, 1000], np.int32)
    both("ldexp", FLOATS, e)
    both("ldexp", np.float32(0.75), np.arange(-155, 130, 7, dtype=np.int32))
    both("ldexp", np.array([3, -1], np.int32), np.int32(4))
    with pytest.raises(ValueError, match="ldexp not supported"):
        jnp.ldexp(FLOATS, FLOATS)
    grads_match(lambda x: (jnp.ldexp(x, 3) + jnp.modf(x)[0] * 2).sum(),
                lambda x: (jjnp.ldexp(x, 3) + jjnp.modf(x)[0] * 2).sum(), F)


def test_nextafter_and_spacing():
    finite = NORMAL[np.isfinite(NORMAL) & (NORMAL != 0)]
    for y in [np.float32(np.inf), np.float32(-np.inf), np.float32(0), finite[::-1]]:
        both("nextafter", finite, y)
    both("nextafter", np.float32(np.nan), np.float32(1))
    both("nextafter", np.float32(0), np.float32(1))
    both("spacing", finite)
    both("spacing", np.array([1.0, -2.0, 65504.0], np.float16))
    both("spacing", np.array([1, 8], np.int32))


def test_gcd_lcm_bitwise_count():
    a = np.array([12, -18, 0, 7, 0, 35, 2 ** 20], np.int32)
    b = np.array([8, 24, 5, 0, 0, -21, 6], np.int32)
    both("gcd", a, b)
    both("lcm", a, b)
    both("gcd", a, np.int32(6))
    both("lcm", np.array([4, 6], np.uint8), np.array([6, 9], np.uint8))
    same(traced(jnp.gcd)(a, b), jjnp.gcd(a, b))
    same(fnad.vmap(jnp.lcm)(a, b), jax.vmap(jjnp.lcm)(a, b))
    with pytest.raises(ValueError, match="must be integers"):
        jnp.gcd(F, F)
    for x in [a, np.array([255, 1, 0], np.uint8), np.array([True, False]),
              np.array([-1, 2 ** 62], np.int64)]:
        both("bitwise_count", x)


def test_i0_sort_complex():
    x = np.array([0, 0.5, -1, 3, 7.9, 8, 8.1, 20, -40], np.float32)
    both("i0", x)
    both("i0", np.arange(4))
    with pytest.raises(ValueError, match="i0"):
        jnp.i0(np.array([1j]))
    grads_match(lambda x: jnp.i0(x).sum(), lambda x: jjnp.i0(x).sum(), x[:-1], atol=2e-4)
    same(fnad.grad(jnp.i0)(0.0), jax.grad(jjnp.i0)(0.0))
    c = np.array([[3 + 1j, 1 - 1j, 1 + 0j], [2j, -2j, 0]], np.complex64)
    for a in [c, F, I, np.array([True, False])]:
        both("sort_complex", a)


@pytest.mark.parametrize("M", [0, 1, 2, 7, 10])
def test_windows(M):
    for name in ["hamming", "hanning", "blackman", "bartlett"]:
        both(name, M)
    both("kaiser", M, 14.0)
    both("kaiser", M, 0.0)


def test_geomspace():
    for start, stop, kw in [(1, 1000, {}), (-1, -1e3, dict(num=4)),
                            (2.0, 3.0, dict(endpoint=False)), (1, 256, dict(num=9, dtype=np.int32)),
                            (np.array([1.0, 2.0]), np.array([10.0, 5.0]), dict(num=3, axis=1)),
                            (1 + 1j, 8 + 8j, dict(num=4))]:
        both("geomspace", start, stop, **kw)
    grads_match(lambda s: jnp.geomspace(s, 10.0, 5).sum(),
                lambda s: jjnp.geomspace(s, 10.0, 5).sum(), 2.0)
    same(traced(lambda a, b: jnp.geomspace(a, b, 6))(np.float32(1), np.float32(9)),
         jjnp.geomspace(np.float32(1), np.float32(9), 6))

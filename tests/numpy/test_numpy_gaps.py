"""fnad.numpy functions added after the first sweep, against jax.numpy (values, dtypes,
gradients) and NumPy where JAX rounds differently: mgrid/ogrid, put/place/mask_indices,
histogram2d/histogramdd, diagflat/trim_zeros/unwrap, packbits/unpackbits, poly/polydiv,
and the printing/file/buffer functions."""
import io

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jjnp  # noqa: E402

RNG = np.random.default_rng(3)


def same(got, expected, rtol=1e-6):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            same(g, e, rtol)
        return
    g, e = np.asarray(got), np.asarray(expected)
    assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
    np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("key", [np.s_[0:3, 0:2], np.s_[0:1:5j], np.s_[0:3],
                                 np.s_[0.0:1.0:0.25, 0:2], np.s_[-1:1:3j, 0:4:2, 1:3]])
def test_mgrid_ogrid(key):
    same(fnp.mgrid[key], jjnp.mgrid[key])
    same(fnp.ogrid[key], jjnp.ogrid[key])
    with pytest.raises(TypeError, match="takes slices"):
        fnp.mgrid[1, 2]


def test_put_place_mask_indices():
    x = np.arange(6.0).reshape(2, 3)
    ind, v = np.array([0, 7, -8, 2]), np.array([9.0, 8.0])
    for mode in (None, "clip", "wrap"):
        same(fnp.put(x, ind, v, mode=mode, inplace=False),
             jjnp.put(x, ind, v, mode=mode, inplace=False))
    g = fnad.grad(lambda v: fnp.put(x, np.array([1, 4]), v, inplace=False).sum())(v)
    np.testing.assert_allclose(g, [1.0, 1.0])
    same(fnp.place(x, x > 1, v, inplace=False), jjnp.place(x, x > 1, v, inplace=False))
    same(fnp.mask_indices(4, fnp.triu, 1), jjnp.mask_indices(4, jjnp.triu, 1))
    same(fnp.mask_indices(4, fnp.tril, size=12), jjnp.mask_indices(4, jjnp.tril, size=12))
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.put(x, ind, v)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.place(x, x > 1, v)
    with pytest.raises(fnad.ConcretizationTypeError, match="mask must be concrete"):
        traced(lambda m: fnp.place(x, m, v, inplace=False))(x > 1)
    with pytest.raises(NotImplementedError, match="mode='raise'"):
        fnp.put(x, ind, v, mode="raise", inplace=False)


@pytest.mark.parametrize("kw", [{}, {"bins": 5}, {"bins": (3, 4)},
                                {"bins": [np.linspace(-2, 2, 4), np.linspace(-3, 3, 6)]},
                                {"density": True, "bins": 4},
                                {"bins": np.linspace(-2, 2, 5)}])
def test_histogram2d_matches_jax(kw):
    x, y = RNG.standard_normal(100), RNG.standard_normal(100)
    same(fnp.histogram2d(x, y, **kw), jjnp.histogram2d(x, y, **kw))


def test_histogramdd_weights_range_density_and_gradient():
    s = RNG.standard_normal((60, 3))
    w = RNG.random(60)
    rng = [(-1, 1), (-2, 2), None]
    got = fnp.histogramdd(s, bins=(2, 3, 4), range=rng, weights=w, density=True)
    want = np.histogramdd(s, bins=(2, 3, 4), range=rng, weights=w, density=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)   # jax's edges round differently
    for g, e in zip(got[1], want[1]):
        np.testing.assert_allclose(g, e, rtol=1e-6)
    counts, _ = fnp.histogramdd(s[:, 0], bins=7)                  # a 1-D sample: N points
    np.testing.assert_allclose(counts, np.histogram(s[:, 0], bins=7)[0])
    g = fnad.grad(lambda w: fnp.histogram2d(s[:, 0], s[:, 1], bins=3, weights=w)[0][1, 1])(w)
    h, ex, ey = np.histogram2d(s[:, 0], s[:, 1], bins=3)
    assert np.asarray(g).sum() == h[1, 1]                     # one per point in that bin
    with pytest.raises(ValueError, match="one entry per dimension"):
        fnp.histogramdd(s, range=[(0, 1)])
    with pytest.raises(ValueError, match="1-D of equal length"):
        fnp.histogram2d(np.ones(3), np.ones(4))


def test_diagflat_trim_zeros_unwrap():
    same(fnp.diagflat(np.array([[1, 2], [3, 4]]), 1), jjnp.diagflat(np.array([[1, 2], [3, 4]]), 1))
    z = np.array([0, 0, 1, 2, 0, 3, 0])
    for t in ("fb", "f", "b", "BF"):
        same(fnp.trim_zeros(z, t), jjnp.trim_zeros(z, t))
    m = np.zeros((4, 5))
    m[1, 2], m[2, 3] = 1.0, 2.0
    same(fnp.trim_zeros(m), jjnp.trim_zeros(m))
    same(fnp.trim_zeros(m, axis=1), jjnp.trim_zeros(m, axis=1))
    same(fnp.trim_zeros(np.zeros(3)), jjnp.trim_zeros(np.zeros(3)))
    with pytest.raises(ValueError, match="'f' and 'b'"):
        fnp.trim_zeros(z, "x")
    with pytest.raises(fnad.ConcretizationTypeError):
        traced(fnp.trim_zeros)(z)
    th = (np.cumsum(RNG.uniform(0, 5, 20)) % (2 * np.pi)).astype(np.float32)
    same(fnp.unwrap(th), jjnp.unwrap(th), rtol=1e-5)
    same(fnp.unwrap(np.stack([th, th]), axis=1, discont=4.0),
         jjnp.unwrap(np.stack([th, th]), axis=1, discont=4.0), rtol=1e-5)
    ti = np.array([0, 350, 10, 20, 300, 5], np.int32)
    same(fnp.unwrap(ti, period=360), jjnp.unwrap(ti, period=360))
    np.testing.assert_allclose(fnad.grad(lambda p: fnp.unwrap(p).sum())(th), np.ones(20))
    with pytest.raises(ValueError, match="complex"):
        fnp.unwrap(th + 1j)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits(axis, bitorder):
    b = RNG.integers(0, 2, (3, 13)).astype(bool)
    packed = np.packbits(b, axis=axis, bitorder=bitorder)
    same(fnp.packbits(b, axis=axis, bitorder=bitorder), packed)
    same(fnp.unpackbits(packed, axis=axis, bitorder=bitorder),
         np.unpackbits(packed, axis=axis, bitorder=bitorder))
    for count in (5, -3, 20, 0):
        same(fnp.unpackbits(packed, axis=axis, count=count, bitorder=bitorder),
             jjnp.unpackbits(packed, axis=axis, count=count, bitorder=bitorder))
    same(traced(lambda v: fnp.packbits(v, axis=axis, bitorder=bitorder))(b), packed)
    with pytest.raises(TypeError, match="uint8"):
        fnp.unpackbits(b.astype(np.int32))
    with pytest.raises(ValueError, match="bitorder"):
        fnp.packbits(b, bitorder="middle")


def test_poly_polydiv():
    same(fnp.poly(np.array([2.0, 3.0, -1.0], np.float32)),
         jjnp.poly(np.array([2.0, 3.0, -1.0], np.float32)))
    same(fnp.poly(np.array([2, 1 + 2j, 1 - 2j], np.complex64)),
         jjnp.poly(np.array([2, 1 + 2j, 1 - 2j], np.complex64)))
    u = np.array([1.0, -3.0, 0.0, 5.0, 2.0], np.float32)
    v = np.array([2.0, 1.0, -1.0], np.float32)
    same(fnp.polydiv(u, v), jjnp.polydiv(u, v))
    q, r = fnp.polydiv(u, v, trim_leading_zeros=True)
    nq, nr = np.polydiv(u, v)
    np.testing.assert_allclose(q, nq, rtol=1e-6)
    np.testing.assert_allclose(r, nr, rtol=1e-6)
    np.testing.assert_allclose(fnad.grad(lambda v: fnp.polydiv(u, v)[0].sum())(v),
                               jax.grad(lambda v: jjnp.polydiv(u, v)[0].sum())(v), rtol=1e-6)


def test_printing_files_and_buffers():
    f = io.BytesIO()
    fnp.save(f, fnp.arange(4, dtype=fnp.bfloat16))
    f.seek(0)
    x = fnp.load(f)
    assert isinstance(x, fnad.Array) and x.dtype == fnp.bfloat16
    assert fnp.array_str(fnp.arange(3.0)) == np.array_str(np.arange(3.0, dtype=np.float32))
    assert fnp.array_repr(fnp.arange(3.0)) == "array([0., 1., 2.], dtype=float32)"
    with fnp.printoptions(precision=2):
        assert fnp.array_str(fnp.asarray([1 / 3])) == "[0.33]"
    same(fnp.frombuffer(b"\x01\x00\x00\x00", dtype=np.int32), np.array([1], np.int32))
    same(fnp.fromstring("1 2", dtype=np.float32, sep=" "), np.array([1.0, 2.0], np.float32))
    path, _ = fnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    assert path == np.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)),
                                  np.ones((4, 5)))[0]
    for name in ("fromiter", "fromfile"):
        with pytest.raises(NotImplementedError, match="outside jitted code"):
            getattr(fnp, name)([1.0], float)
    assert fnp.object_ is np.object_ and fnp.character is np.character


def test_roots_and_polyfit():
    p = np.array([0.0, 0.0, 1.0, -6.0, 11.0, -6.0], np.float32)
    same(fnp.roots(p), jjnp.roots(p), rtol=1e-5)
    same(fnp.roots(p, strip_zeros=False), jjnp.roots(p, strip_zeros=False), rtol=1e-5)
    same(traced(lambda q: fnp.roots(q, strip_zeros=False))(p),
         jjnp.roots(p, strip_zeros=False), rtol=1e-5)
    with pytest.raises(fnad.ConcretizationTypeError, match="strip_zeros=False"):
        traced(fnp.roots)(p)
    same(fnp.poly(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)),
         jjnp.poly(np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)), rtol=1e-5)
    x = np.linspace(0, 1, 20).astype(np.float32)
    y = (3 * x ** 2 - x + 0.5 + 0.01 * RNG.standard_normal(20)).astype(np.float32)
    for kw in ({}, {"full": True}, {"cov": True}, {"cov": "unscaled"},
               {"w": np.linspace(1, 2, 20).astype(np.float32)}):
        got, want = fnp.polyfit(x, y, 2, **kw), jjnp.polyfit(x, y, 2, **kw)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    ys = np.stack([y, 2 * y], 1)
    for g, w in zip(fnp.polyfit(x, ys, 2, cov=True), jjnp.polyfit(x, ys, 2, cov=True)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fnad.grad(lambda v: fnp.polyfit(x, v, 2).sum())(y),
                               jax.grad(lambda v: jjnp.polyfit(x, v, 2).sum())(y),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(ValueError, match="deg >= 0"):
        fnp.polyfit(x, y, -1)
    with pytest.raises(TypeError, match="same length"):
        fnp.polyfit(x, y[:3], 1)

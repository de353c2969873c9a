"""fnad.scipy.special's wofz, fresnel, sici, owens_t, bessel_jn, hyp1f1, hyp2f1 and sph_harm_y
(fnad/scipy/_special_more2.py): values against scipy.special (the reference) and
jax.scipy.special (where jax is accurate) in float32 and float64, at edge values (0, ±inf,
NaN, poles, x < 0); dtypes; derivatives against jax.jvp (float64) and, where jax's are
missing or wrong, central finite differences; jit, vmap; errors. Each check is vectorized
over an array of points.
"""
import numpy as np
import pytest
from checks import traced
from scipy import special as sp

import fnad
import fnad.scipy.special as fs

try:
    import jax
    import jax.scipy.special as js
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = js = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
f32, f64 = np.float32, np.float64
RNG = np.random.default_rng(0)
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -7.5, 1e-3, 40.0, -300.0, 5e4, 2e9, np.inf, -np.inf,
           np.nan]
X = np.concatenate([RNG.uniform(-20, 20, 40), SPECIAL])               # [54]
H = np.concatenate([RNG.uniform(-8, 8, 30), [0, 1, 3, np.inf, np.nan, 2, 0, -np.inf, 1, 30]])
A = np.concatenate([RNG.uniform(-5, 5, 30), [1, np.inf, -1, 1, 1, np.nan, 0, 2, -np.inf, .5]])
Z = RNG.normal(size=40) * 4 + 1j * RNG.normal(size=40) * 4              # [40] complex
Z = np.concatenate([Z, [0, 1j, -1j, 3, -3, 30 + 1j, 1e-3j, 5 - 5j]])
# hyp1f1: a, b > 0 (jax's domain) with x of both signs, polynomials (a a negative integer),
# b - a a negative integer (a polynomial after Kummer); float32 keeps x where e^|x| fits
P_A = np.concatenate([RNG.uniform(0.1, 5, 30), [-3, 2, 1.5, 0, 2, 3, 1]])
P_B = np.concatenate([RNG.uniform(0.1, 5, 30), [2.5, 1, 1.5, 1, 0, 3.5, 1.5]])
P_X = np.concatenate([RNG.uniform(-60, 60, 20), RNG.uniform(-300, 300, 10),
                      [-4, -150, 2, 5, 3, -120, 150]])
# hyp2f1: c > 0, x from -60 to 1: the series, Pfaff's and the 1 - z regions, polynomials
# (and whole c - a - b near 1, or b - a after Pfaff's transformation for x << 0)
Q_A = np.concatenate([RNG.uniform(0.1, 5, 30), [-3, 1, 1, 0.5, 2, 1, 1.5, 0, 1.5, 1.5, 0.25,
                                                2, 1, 3]])
Q_B = np.concatenate([RNG.uniform(0.1, 5, 30), [2.5, 1, 1, -2, 2, 1, 1.5, 1, 2.5, 2.5, 0.75,
                                                2, 1, 1]])
Q_C = np.concatenate([RNG.uniform(0.1, 5, 30), [1.5, 2, 2, 3, 3.5, -2, 1.5, 1, 6, 1, 1, 1.5,
                                                2, 2]])
Q_X = np.concatenate([RNG.uniform(-0.9, 0.9, 12), RNG.uniform(0.9, 0.995, 6),
                      RNG.uniform(-60, -0.9, 12), [-5, 0.95, -50, 0.7, 1, 0.5, 2, 0.3, 0.97,
                                                   0.93, -200, -300, 0.9999, -0.999]])


def close(got, want, rtol, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _sph_args():
    n = np.array([0, 1, 1, 2, 3, 5, 5, 7, 4, 8, 2, 6])
    m = np.array([0, -1, 1, 2, -3, 4, -2, 0, 5, -8, 0, 3])            # |m| > n: 0 (jax's)
    theta = np.concatenate([RNG.uniform(0, np.pi, 10), [0.0, 1e-5]])
    return n, m, theta, RNG.uniform(0, 2 * np.pi, 12)


SPH = _sph_args()


def _sph_scipy(n, m, th, ph):
    return np.where(np.abs(m) > n, 0, sp.sph_harm_y(n, m, th, ph))


# name: (fnad call, scipy call, arguments, float64 rtol, float32 rtol)
CASES = {
    "wofz": (fs.wofz, sp.wofz, (Z,), 1e-12, 2e-5),
    "fresnel": (fs.fresnel, sp.fresnel, (X,), 1e-13, 2e-6),
    "sici": (fs.sici, sp.sici, (X,), 1e-13, 2e-6),
    "owens_t": (fs.owens_t, sp.owens_t, (H, A), 1e-12, 2e-6),
    "bessel_jn": (lambda z: fs.bessel_jn(z, v=4), lambda z: np.stack([sp.jv(k, z) for k in
                  range(5)]), (np.append(np.abs(X[:40]) + 0.01, [0.0, -3.0]),), 1e-14, 1e-5),
    "hyp1f1": (fs.hyp1f1, sp.hyp1f1, (P_A, P_B, P_X), 1e-12, 3e-5),
    "hyp2f1": (fs.hyp2f1, sp.hyp2f1, (Q_A, Q_B, Q_C, Q_X), 1e-11, 5e-5),
    "sph_harm_y": (fs.sph_harm_y, _sph_scipy, SPH, 1e-13, 5e-6),
}


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _cast(args, dtype):
    return [a.astype(dtype) if np.asarray(a).dtype.kind in "fc" else a for a in args]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [f32, f64])
def test_values_match_scipy(name, dtype, request):
    """Values, NaNs and infinities against scipy (float64 on the dtype-rounded inputs);
    the result dtype follows the input (complex for wofz, sph_harm_y)."""
    if dtype == f64:
        request.getfixturevalue("x64")
    ours, ref, args, rtol64, rtol32 = CASES[name]
    args = _cast(args, {f32: np.complex64, f64: np.complex128}[dtype] if name == "wofz" else
                 dtype)
    if dtype == f32 and name in ("hyp1f1", "wofz"):                   # where e^(x) fits f32
        keep = (np.abs(args[-1]) < 80)
        args = [a[keep] for a in args]
    want = _tuple(ref(*[a.astype(np.result_type(a, f64)) if a.dtype.kind in "fc" else a
                        for a in map(np.asarray, args)]))
    got = _tuple(ours(*args))
    out_dtype = {f32: np.complex64, f64: np.complex128}[dtype] if name in (
        "wofz", "sph_harm_y") else dtype
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == out_dtype, (np.asarray(g).dtype, out_dtype)
        atol = (1e-15 if name in ("bessel_jn", "sici") else 1e-30) if dtype == f64 else 1e-6
        close(g, w.astype(np.asarray(g).dtype), rtol64 if dtype == f64 else rtol32, atol=atol)


def test_edge_values(x64):
    """Poles, NaN, the branch point x = 1 and infinities as scipy, and jax's conventions
    (₁F₁ = 1 at a = b = 0, eˣ at a = b) where scipy differs."""
    close(fs.wofz(np.array([np.inf, -np.inf, 1e10j, np.nan])),
          sp.wofz(np.array([np.inf, -np.inf, 1e10j, np.nan])), 1e-13)
    a = np.array([1, 1, np.nan, 1, 2, -2, -3, 0, -2, 1])
    b = np.array([0, -1, 1, np.nan, -2, -3, -2, 0, -2, 1])
    x = np.array([1., 1, 1, 1, 1, 1, 1, 1, 2, -3])
    want = sp.hyp1f1(a, b, x)
    want[7:] = 1, np.exp(2), np.exp(-3)                # jax's: 1 at a = b = 0, eˣ at a = b
    close(fs.hyp1f1(a, b, x), want, 1e-14)
    a, b = np.array([np.nan, 1, 1, -2, 1, 1, 1, 2, 0.5, -2]), np.array([1, 1, 1, 1, 1, 1, 1, 1,
                                                                        0.5, 3])
    c = np.array([2, np.nan, -1, -3, 2, 3.5, 2, 3, 1.0, 0])
    x = np.array([.5, .5, .5, .5, np.nan, 1, 1, 2, -1e3, 0])
    close(fs.hyp2f1(a, b, c, x), sp.hyp2f1(a, b, c, x), 1e-13)
    x = np.array([0.0, -0.0, 1e-300, np.inf, -np.inf, np.nan])
    for g, w in zip(fs.sici(x) + fs.fresnel(x), sp.sici(x) + sp.fresnel(x)):
        close(g, w, 1e-15)


# where jax is accurate (checked against scipy in test_values_match_scipy): its values
JAX_CASES = {
    "wofz": (Z,), "fresnel": (X[:-4],), "sici": (X,), "owens_t": (H[:30], A[:30]),
    "hyp1f1": (P_A[:20], P_B[:20], np.abs(P_X[:20])),
}                                 # (hyp2f1 agrees with jax's to ~1e-14 for |x| < 0.9, but
#                                   jax compiles it for seconds: it is checked against scipy)


@needs_jax
@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_float64_values_match_jax(name, x64):
    args = JAX_CASES[name]
    for g, w in zip(_tuple(getattr(fs, name)(*args)), _tuple(getattr(js, name)(*args))):
        close(g, w, 2e-9, atol=1e-300)


@needs_jax
def test_bessel_jn_and_sph_harm_y_match_jax(x64):
    z = np.concatenate([RNG.uniform(-25, 25, 20), [np.nan]])
    for n_iter in (50, 80):
        close(fs.bessel_jn(z, v=6, n_iter=n_iter),
              jax.jit(lambda z: js.bessel_jn(z, v=6, n_iter=n_iter))(z), 1e-12, atol=1e-15)
    n, m, th, ph = SPH
    close(fs.sph_harm_y(n, m, th, ph, n_max=6), js.sph_harm_y(n, m, th, ph, n_max=6), 1e-10,
          atol=1e-15)                                  # n clipped to n_max = 6, as jax


@needs_jax
def test_integer_inputs_promote_as_jax():
    for name, args in [("fresnel", (np.arange(4),)), ("sici", (np.arange(1, 5),)),
                       ("owens_t", (np.arange(4), 2)), ("wofz", (np.arange(4),)),
                       ("hyp1f1", (1, 2, np.arange(4))), ("hyp2f1", (1, 2, 3, np.arange(4)))]:
        want = jax.eval_shape(getattr(js, name), *args)
        floats = [np.asarray(a, f32) for a in args]
        for g, w, f in zip(_tuple(getattr(fs, name)(*args)), _tuple(want),
                           _tuple(getattr(fs, name)(*floats))):
            assert np.asarray(g).dtype == w.dtype, name
            close(g, f, 0)
    assert np.asarray(fs.bessel_jn(np.arange(1, 4), v=1)).dtype == f32
    assert fs.fresnel(np.float16(0.5))[0].dtype == np.float16


# ---- derivatives -----------------------------------------------------------------------------
GRAD_CASES = {                                         # points away from poles and cuts
    "wofz": (Z[:12],), "fresnel": (np.array([-3.0, -0.5, 0.0, 0.3, 1.2, 2.0, 7.5]),),
    "sici": (np.array([-9.0, -2.0, -0.3, 0.4, 3.9, 4.1, 20.0]),),
    "owens_t": (RNG.uniform(-3, 3, 7), np.array([-3.0, -0.4, 0.2, 0.9, 1.5, 4.0, 0.0])),
    "hyp1f1": (RNG.uniform(0.5, 3, 6), RNG.uniform(0.5, 3, 6), RNG.uniform(0.1, 20, 6)),
}


def _jvps(f, args, i, tangent_type):
    """The derivative of elementwise f in argument i, entry by entry (a jvp with ones)."""
    fn, jvp = f

    def f_i(xi):
        return fn(*args[:i], xi, *args[i + 1:])
    return _tuple(jvp(f_i, (args[i],), (np.ones_like(args[i], dtype=tangent_type),))[1])


@needs_jax
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_derivatives_match_jax(name, x64):
    args = GRAD_CASES[name]
    for i in range(len(args)):
        ours = _jvps((getattr(fs, name), fnad.jvp), args, i, args[i].dtype)
        theirs = _jvps((getattr(js, name), lambda *j: jax.jit(jax.jvp, static_argnums=0)(*j)),
                       args, i, args[i].dtype)        # (jit: jax's eager owens_t trips on
        #                                                a matmul cached in float32)
        for g, w in zip(ours, theirs):
            close(g, w, 1e-8, atol=1e-12)


def _central_difference(f, args, i, h=1e-6):
    lo, hi = list(args), list(args)
    lo[i], hi[i] = args[i] - h, args[i] + h
    return (np.asarray(f(*hi)) - np.asarray(f(*lo))) / (2 * h)


def test_derivatives_where_jax_has_none_match_finite_differences(x64):
    """hyp1f1 for x < 0 (jax sums the alternating series: no digits left), hyp2f1 (x < -1:
    jax's series diverges; jax compiles its derivatives for seconds), bessel_jn (reverse
    mode through the recurrence) and sph_harm_y in theta, phi: against central differences
    of scipy's values (of fnad's for hyp1f1, checked against scipy above)."""
    a, b, x = np.array([0.7, 1.5, 2.0, 3.2]), np.array([1.3, 2.5, 0.6, 4.0]), \
        np.array([-3.0, -25.0, -8.0, -60.0])
    for i in range(3):
        got = _jvps((fs.hyp1f1, fnad.jvp), (a, b, x), i, f64)[0]
        close(got, _central_difference(fs.hyp1f1, (a, b, x), i), 1e-6, atol=1e-12)
        far = (a, b, np.array([150.0, -150.0, 300.0, -400.0]))      # the asymptotic region
        got = _jvps((fs.hyp1f1, fnad.jvp), far, i, f64)[0]
        close(got, _central_difference(sp.hyp1f1, far, i), 1e-6)
    c, x2 = np.array([1.9, 3.1, 2.2, 5.0]), np.array([-3.0, -0.5, -20.0, 0.95])
    got = _jvps((fs.hyp2f1, fnad.jvp), (a, b, c, x2), 3, f64)[0]
    close(got, _central_difference(sp.hyp2f1, (a, b, c, x2), 3), 1e-6)
    x3 = np.array([-0.8, -0.3, 0.5, 0.85])             # a, b, c: their series (|x| < 1)
    for i in range(4):
        got = _jvps((fs.hyp2f1, fnad.jvp), (a, b, c, x3), i, f64)[0]
        close(got, _central_difference(sp.hyp2f1, (a, b, c, x3), i), 1e-6, atol=1e-10)
    z = np.array([0.5, 3.0, 7.0, -12.0])
    g = fnad.grad(lambda z: fnad.numpy.sum(fs.bessel_jn(z, v=3)[3]))(z)
    close(g, (sp.jv(2, z) - sp.jv(4, z)) / 2, 1e-10, atol=1e-12)
    d2 = fnad.vmap(fnad.grad(fnad.grad(fs.hyp1f1, 2), 2))(a, b, x)  # a(a+1)/(b(b+1))·₁F₁(+2)
    close(d2, a * (a + 1) / (b * (b + 1)) * sp.hyp1f1(a + 2, b + 2, x), 1e-9, atol=1e-15)
    n, m, th, ph = (s[:8] for s in SPH)
    for i in (2, 3):
        got = _jvps((lambda *s: fs.sph_harm_y(*s, n_max=7), fnad.jvp), (n, m, th, ph), i, f64)
        close(got[0], _central_difference(lambda *s: sp.sph_harm_y(*s), (n, m, th, ph), i),
              1e-6, atol=1e-9)


# ---- transformations and errors --------------------------------------------------------------
def test_jit_and_vmap_agree_with_eager():
    x = X[:40].astype(f32).reshape(4, 10)                              # [4, 10]
    for fn, args in [(fs.sici, (x,)), (fs.hyp1f1, (np.abs(x) + 1, np.abs(x) + 2, x)),
                     (lambda z: fs.bessel_jn(z, v=2)[2], (np.abs(x) + 1,)),
                     (fs.hyp2f1, (np.abs(x), np.ones_like(x), np.abs(x) + 2, x / 21))]:
        eager = _tuple(fn(*args))
        for g, w in zip(_tuple(traced(fn)(*args)), eager):   # (xla's float32 exp and pow
            close(g, w, 2e-5, atol=1e-7)                       # differ by ulps: a long sum)
        for g, w in zip(_tuple(fnad.vmap(fn)(*args)), eager):
            close(g, w, 2e-6, atol=1e-7)
    n, m, th, ph = SPH
    close(traced(lambda t, p: fs.sph_harm_y(n, m, t, p, n_max=8))(th, ph),
          fs.sph_harm_y(n, m, th, ph), 1e-6)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(TypeError, match="v of bessel_jn must be a static Python int"):
        fs.bessel_jn(np.ones(3), v=1.5)
    with pytest.raises(TypeError, match="v of bessel_jn"):
        traced(lambda z, v: fs.bessel_jn(z, v=v))(np.ones(3), 2)
    with pytest.raises(ValueError, match="0 <= v <= n_iter"):
        fs.bessel_jn(np.ones(3), v=60)
    for name, nargs in [("bessel_jn", 0), ("fresnel", 1), ("sici", 1), ("owens_t", 2),
                        ("hyp1f1", 3), ("hyp2f1", 4)]:
        with pytest.raises(ValueError, match="complex"):
            if nargs == 0:
                fs.bessel_jn(np.ones(2, np.complex64), v=1)
            else:
                getattr(fs, name)(*([np.ones(2, np.complex64)] * nargs))
    with pytest.raises(NotImplementedError, match="diff_n"):
        fs.sph_harm_y(1, 0, 0.5, 0.5, diff_n=1)
    with pytest.raises(TypeError, match="n_max must be given"):
        traced(lambda n: fs.sph_harm_y(n, 0, 0.5, 0.5))(np.array([2]))

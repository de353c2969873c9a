"""fnad.scipy.signal's spectral analysis (stft, istft, csd, welch) against
jax.scipy.signal: windows, boundary extensions, padding, detrending, one- and two-sided
spectra, scalings, mean and median averaging, axes, complex inputs, gradients in float64,
jit on the test backend, vmap, and the errors. SciPy is the oracle for the windows (jax
asks SciPy for them) and where fnad follows SciPy rather than jax (see the docstrings)."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced

import fnad
import fnad.numpy as fnp
import fnad.scipy.signal as fs
from fnad.scipy._windows import get_window

jax = pytest.importorskip("jax", reason="jax is the oracle")
ss = pytest.importorskip("scipy.signal", reason="scipy is the oracle of the windows")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.signal as js  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")
RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 64))


def jax_results(fn, cases, *arrays):
    """jax's fn(*arrays, **kw) for every case from one jitted program: one compile, where
    eager jax would compile each of its operations for each shape."""
    return jax.jit(lambda *a: [fn(*a, **kw) for kw in cases])(*arrays)


def assert_same(got, want, what, atol=1e-10):
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, w.shape, g.dtype,
                                                           w.dtype)
        np.testing.assert_allclose(g, w, atol=atol, err_msg=f"{what} [{i}]")


WINDOWS = ["boxcar", "triang", "bartlett", "hann", "hamming", "blackman", "nuttall",
           "blackmanharris", "flattop", "cosine", "tukey", ("tukey", 0.3), ("tukey", 1.0),
           ("kaiser", 4.0), ("gaussian", 2.5), ("general_hamming", 0.6), "ham"]


def test_windows_match_scipy():
    for window in WINDOWS:
        for n in (1, 2, 7, 16):
            np.testing.assert_allclose(get_window(window, n), ss.get_window(window, n),
                                       atol=1e-14, err_msg=f"{window} {n}")
    raises_with(lambda: get_window("parzen", 8), "'parzen' is not supported", "hann",
                exc=ValueError)
    raises_with(lambda: get_window("kaiser", 8), "takes one parameter", exc=ValueError)
    raises_with(lambda: get_window(("hann", 2), 8), "takes no parameter", exc=ValueError)


STFT_CASES = [dict(nperseg=16), dict(nperseg=16, boundary="even", padded=False),
              dict(nperseg=15, boundary="odd", detrend="linear"),
              dict(nperseg=16, noverlap=3, nfft=20, boundary="constant",
                   return_onesided=False),
              dict(nperseg=16, window=("tukey", 0.3), boundary=None, detrend="constant"),
              dict(nperseg=12, window="hamming", fs=3.0, noverlap=0),
              dict(window=np.hanning(10), nperseg=10, padded=False)]


def test_stft_matches_jax():
    for kw, want in zip(STFT_CASES, jax_results(js.stft, STFT_CASES, X)):
        assert_same(fs.stft(X, **kw), want, kw)
    cases = [dict(nperseg=16, axis=0)]
    assert_same(fs.stft(X.T, **cases[0]), jax_results(js.stft, cases, X.T)[0], "axis 0")
    z = X + 1j * RNG.standard_normal(X.shape)
    with pytest.warns(UserWarning, match="switching to return_onesided=False"):
        got = fs.stft(z, nperseg=16)
    with pytest.warns(UserWarning):
        assert_same(got, jax_results(js.stft, [dict(nperseg=16)], z)[0], "complex")


PSD_CASES = [dict(nperseg=16), dict(nperseg=16, scaling="spectrum", window="blackman"),
             dict(nperseg=17, detrend="linear", nfft=21, noverlap=4),
             dict(nperseg=16, return_onesided=False, detrend=False), dict(fs=10.0),
             dict(nperseg=64)]


@pytest.mark.parametrize("average", ["mean", "median"])
def test_csd_welch_match_jax(average):
    y = RNG.standard_normal((1, 50))                    # shorter, broadcast over x's rows
    cases = [dict(kw, average=average) for kw in PSD_CASES]
    for kw, want in zip(cases, jax_results(js.welch, cases, X)):
        assert_same(fs.welch(X, **kw), want, ("welch", kw))
    for kw, want in zip(cases, jax_results(js.csd, cases, X, y)):
        assert_same(fs.csd(X, y, **kw), want, ("csd", kw))
    cases = [dict(nperseg=16, axis=0, average=average)]
    assert_same(fs.welch(X.T, **cases[0]), jax_results(js.welch, cases, X.T)[0], "axis 0")
    want = jax.jit(lambda x: js.csd(x, None, nperseg=16, average=average))(X)
    assert_same(fs.csd(X, None, nperseg=16, average=average), want, "csd y=None")


def test_istft_matches_jax_and_inverts_stft():
    _, _, Z = ss.stft(X, nperseg=16)
    cases = [dict(nperseg=16), dict(nperseg=16, boundary=False), dict(window="hamming"),
             dict(nperseg=16, noverlap=5)]
    for kw, want in zip(cases, jax_results(js.istft, cases, Z)):
        assert_same(fs.istft(Z, **kw), want, kw)
    Zt = np.moveaxis(Z, 0, -1)                          # [F, S, batch]
    kw = dict(time_axis=1, freq_axis=0)
    assert_same(fs.istft(Zt, **kw), jax_results(js.istft, [kw], Zt)[0], "axes")
    _, _, Z2 = ss.stft(X, nperseg=16, return_onesided=False)
    assert_same(fs.istft(Z2, input_onesided=False),
                jax_results(js.istft, [dict(input_onesided=False)], Z2)[0], "two-sided")
    # where jax departs from SciPy (odd one-sided nperseg, noverlap=0), fnad follows SciPy
    for kw in (dict(nperseg=15), dict(nperseg=16, noverlap=0, window="boxcar")):
        _, _, Zk = ss.stft(X, **kw)
        assert_same(fs.istft(Zk, **kw), ss.istft(Zk, **kw), kw)
        np.testing.assert_allclose(fs.istft(fs.stft(X, **kw)[2], **kw)[1][:, :64], X,
                                   atol=1e-12)


def test_callable_detrend_follows_scipy():
    def detrend(d):
        return d - d[..., :1]

    for name in ("stft", "welch"):
        kw = dict(nperseg=16, detrend=detrend)
        assert_same(getattr(fs, name)(X, **kw), getattr(ss, name)(X, **kw), name)


def test_gradients_jit_vmap():
    w = RNG.standard_normal(9)
    phase = np.exp(1j * RNG.uniform(0, 6, (9, 9)))

    def losses(sig, np_):
        return {
            "stft": lambda x: np_.sum(np_.real(sig.stft(x, nperseg=16)[2]).T @ w[:9]),
            "welch": lambda x: np_.sum(sig.welch(x, nperseg=16, average="median")[1] * w),
            "csd": lambda x: np_.sum(np_.imag(sig.csd(x, x[::-1] ** 2, nperseg=16,
                                                      detrend="linear")[1]) * w),
            "istft": lambda r: np_.sum(sig.istft(r[:, :9] * phase, nperseg=16)[1] ** 3),
        }

    for name, want_fn in losses(js, jnp).items():
        arg = X[0] if name != "istft" else RNG.standard_normal((9, 9))
        np.testing.assert_allclose(fnad.grad(losses(fs, fnp)[name])(arg),
                                   jax.jit(jax.grad(want_fn))(arg), rtol=1e-9, atol=1e-11,
                                   err_msg=name)
    np.testing.assert_allclose(traced(lambda x: fs.welch(x, nperseg=16)[1])(X),
                               fs.welch(X, nperseg=16)[1], atol=1e-12)
    np.testing.assert_allclose(fnad.vmap(lambda x: fs.stft(x, nperseg=16)[2])(X),
                               fs.stft(X, nperseg=16)[2], atol=1e-12)


def test_errors():
    raises_with(lambda: fs.stft(X, nperseg=16, noverlap=16), "stft", "noverlap (16) must be "
                "less than nperseg (16)", exc=ValueError)
    raises_with(lambda: fs.welch(X, nperseg=16, nfft=8), "nfft (8) must be at least nperseg",
                exc=ValueError)
    raises_with(lambda: fs.welch(X, nperseg=0), "nperseg must be a positive", exc=ValueError)
    raises_with(lambda: fs.stft(X, boundary="wrap"), "unknown boundary option 'wrap'",
                exc=ValueError)
    raises_with(lambda: fs.welch(X, scaling="power"), "scaling must be", exc=ValueError)
    raises_with(lambda: fs.welch(X, average="max"), "average must be", exc=ValueError)
    raises_with(lambda: fs.welch(X, detrend="quadratic"), "detrend must be", exc=ValueError)
    raises_with(lambda: fs.csd(X, np.ones((3, 64))), "cannot be broadcast", exc=ValueError)
    raises_with(lambda: fs.welch(X, window=np.ones(8), nperseg=16), "nperseg=16 differs",
                exc=ValueError)
    raises_with(lambda: fs.welch(X, window=np.ones(80)), "longer than the input",
                exc=ValueError)
    with pytest.warns(UserWarning, match="nperseg=256 is greater than the input length 64"):
        fs.stft(X)
    raises_with(lambda: fs.istft(X[0]), "at least 2-D", exc=ValueError)
    raises_with(lambda: fs.istft(X, time_axis=0, freq_axis=-2), "must differ", exc=ValueError)
    raises_with(lambda: fs.istft(X, nperseg=8, nfft=4), "FFT length (4)", exc=ValueError)
    raises_with(lambda: fs.istft(X, window=np.ones(5)), "length nperseg", exc=ValueError)

"""fnad.numpy.fft against jax.numpy.fft, and the fft primitive on every backend under jit.

Every transform (fft, ifft, rfft, irfft, hfft, ihfft, the 2-axis and n-axis ones) in cases
with odd and even lengths, n/s padding and cutting, axes that are not trailing (and in
reversed order), every norm mode, real and complex inputs, more than 3 axes: values and
dtypes against jax in float32 and float64, and gradients of a real loss (Σ w·Re + Σ v·Im
of the output) against jax.grad in both precisions, plus a second-order check (JVP of the
gradient of |f(x)|²). fftfreq, rfftfreq, fftshift and ifftshift against jax; vmap against
a loop; jit on the numpy, numba and xla backends against eager for the primitive's specs
(tests/specs/spec_fft.py) and for the jnp functions; cost_analysis against XLA's count;
the errors a user can hit; and that importing fnad does not import numpy.fft.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from checks import raises_with, traced
from test_primitives import _draw, _split

import fnad
import fnad.lax as lax
import fnad.numpy as jnp
from fnad.core import ShapeError
from fnad.primitives import fft as fp
from specs.spec_fft import SPECS as FFT_SPECS

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jjnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")

R, C = "real", "complex"
# id -> (function name, input shape, input kind, keyword arguments)
CASES = {
    "fft-even": ("fft", (8,), C, {}),
    "fft-odd-axis0": ("fft", (5, 3), C, {"axis": 0}),
    "fft-pad-n": ("fft", (6,), C, {"n": 9}),
    "fft-cut-n-real-input": ("fft", (6,), R, {"n": 4}),
    "fft-ortho": ("fft", (2, 7), C, {"norm": "ortho"}),
    "fft-forward": ("fft", (4,), C, {"norm": "forward"}),
    "fft-backward": ("fft", (3, 4), C, {"norm": "backward"}),
    "fft-axis-none": ("fft", (2, 3), C, {"axis": None}),
    "ifft-odd": ("ifft", (7,), C, {}),
    "ifft-axis0-pad-ortho": ("ifft", (3, 4), C, {"axis": 0, "n": 5, "norm": "ortho"}),
    "ifft-forward-real-input": ("ifft", (6,), R, {"norm": "forward"}),
    "rfft-even": ("rfft", (8,), R, {}),
    "rfft-odd": ("rfft", (7,), R, {}),
    "rfft-axis0": ("rfft", (4, 6), R, {"axis": 0}),
    "rfft-cut-n": ("rfft", (9,), R, {"n": 6}),
    "rfft-pad-n-ortho": ("rfft", (5,), R, {"n": 8, "norm": "ortho"}),
    "rfft-forward-odd": ("rfft", (3, 5), R, {"norm": "forward"}),
    "irfft-even": ("irfft", (5,), C, {}),
    "irfft-odd-n": ("irfft", (5,), C, {"n": 9}),
    "irfft-axis0": ("irfft", (3, 4), C, {"axis": 0}),
    "irfft-cut-ortho": ("irfft", (6,), C, {"n": 5, "norm": "ortho"}),
    "irfft-forward": ("irfft", (4,), C, {"norm": "forward"}),
    "irfft-cut-batched": ("irfft", (2, 5), C, {"n": 4}),
    "irfft-real-input": ("irfft", (4,), R, {"n": 7}),
    "hfft": ("hfft", (5,), C, {}),
    "hfft-odd-ortho": ("hfft", (4,), C, {"n": 7, "norm": "ortho"}),
    "hfft-axis0-forward": ("hfft", (3, 4), C, {"axis": 0, "norm": "forward"}),
    "hfft-real-input": ("hfft", (4,), R, {}),
    "ihfft": ("ihfft", (8,), R, {}),
    "ihfft-cut-ortho": ("ihfft", (7,), R, {"n": 5, "norm": "ortho"}),
    "ihfft-axis0-forward": ("ihfft", (3, 4), R, {"axis": 0, "norm": "forward"}),
    "fft2": ("fft2", (3, 4), C, {}),
    "fft2-axes-0-2": ("fft2", (2, 3, 4), C, {"axes": (0, 2)}),
    "fft2-s-ortho": ("fft2", (3, 4), C, {"s": (4, 6), "norm": "ortho"}),
    "ifft2": ("ifft2", (3, 5), C, {}),
    "ifft2-axes-reversed": ("ifft2", (3, 4, 2), C, {"axes": (1, 0)}),
    "rfft2": ("rfft2", (4, 6), R, {}),
    "rfft2-axes-0-1": ("rfft2", (3, 5, 2), R, {"axes": (0, 1)}),
    "rfft2-s-forward": ("rfft2", (3, 5), R, {"s": (4, 4), "norm": "forward"}),
    "irfft2": ("irfft2", (4, 4), C, {}),
    "irfft2-axes-s": ("irfft2", (4, 3, 2), C, {"axes": (0, 1), "s": (4, 5)}),
    "irfft2-ortho": ("irfft2", (3, 4), C, {"norm": "ortho"}),
    "fftn": ("fftn", (2, 3, 4), C, {}),
    "fftn-axes-reversed": ("fftn", (2, 3, 4), C, {"axes": (2, 0)}),
    "fftn-4d": ("fftn", (2, 2, 3, 2), C, {}),
    "fftn-5d-ortho": ("fftn", (2, 2, 2, 2, 3), C, {"norm": "ortho"}),
    "fftn-s": ("fftn", (3, 4), C, {"s": (2, 5)}),
    "fftn-no-axes": ("fftn", (2, 3), R, {"axes": ()}),
    "ifftn": ("ifftn", (2, 3, 4), C, {}),
    "ifftn-4d-forward": ("ifftn", (2, 2, 2, 3), C, {"norm": "forward"}),
    "rfftn": ("rfftn", (2, 3, 4), R, {}),
    "rfftn-4d": ("rfftn", (2, 2, 3, 4), R, {}),
    "rfftn-axes-0-2": ("rfftn", (3, 4, 5), R, {"axes": (0, 2)}),
    "rfftn-s-ortho": ("rfftn", (4, 6), R, {"s": (3, 8), "norm": "ortho"}),
    "irfftn": ("irfftn", (2, 3, 3), C, {}),
    "irfftn-4d": ("irfftn", (2, 2, 3, 3), C, {}),
    "irfftn-5d-ortho": ("irfftn", (2, 2, 2, 2, 3), C, {"norm": "ortho"}),
    "irfftn-axes-reversed-s": ("irfftn", (3, 4, 5), C, {"axes": (2, 0), "s": (6, 4)}),
    "irfftn-s-odd": ("irfftn", (4, 4), C, {"s": (4, 7)}),
}
PRECISIONS = {"32": (np.float32, np.complex64), "64": (np.float64, np.complex128)}


def _input(kind: str, shape, precision: str, seed: int = 0) -> np.ndarray:
    real, cplx = PRECISIONS[precision]
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape)
    if kind == C:
        return (x + 1j * rng.uniform(-1, 1, shape)).astype(cplx)
    return x.astype(real)


def _fns(name: str):
    fname, shape, kind, kw = CASES[name]
    ours = getattr(jnp.fft, fname)
    theirs = getattr(jjnp.fft, fname) if jjnp is not None else None
    return (lambda x: ours(x, **kw)), (lambda x: theirs(x, **kw)), shape, kind


def _jax_jit(f):
    """jax.jit(f): the oracle compiled once (op by op, each new shape compiles apart)."""
    return jax.jit(f)


def _tols(precision: str, grad: bool = False):
    if precision == "32":
        return (1e-4, 1e-4) if grad else (1e-5, 2e-5)
    return (1e-10, 1e-10)


def _close(ours, theirs, precision: str, grad: bool = False) -> None:
    o, t = np.asarray(ours), np.asarray(theirs)
    assert (o.shape, o.dtype) == (t.shape, t.dtype), f"{o.dtype}{o.shape} != {t.dtype}{t.shape}"
    rtol, atol = _tols(precision, grad)
    scale = max(1.0, float(np.max(np.abs(t), initial=0.0)))
    np.testing.assert_allclose(o, t, rtol=rtol, atol=atol * scale)


@pytest.fixture(params=list(PRECISIONS))
def precision(request):
    """Inputs in 32 bits (jax and fnad x64 off) or 64 bits (both on)."""
    if request.param == "64":
        request.getfixturevalue("x64")
    return request.param


# ---- values and gradients against jax ---------------------------------------------------------
@needs_jax
@pytest.mark.parametrize("name", list(CASES))
def test_value_matches_jax(name, precision):
    f, jf, shape, kind = _fns(name)
    x = _input(kind, shape, precision)
    _close(f(x), _jax_jit(jf)(jjnp.asarray(x)), precision)


def _real_loss(fun, out_shape, complex_out: bool, xp):
    """Σ w·Re f(x) + Σ v·Im f(x) for fixed random w, v: a real scalar through f."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal(out_shape)
    v = rng.standard_normal(out_shape) if complex_out else None

    def loss(x):
        y = fun(x)
        total = xp.sum(xp.real(y) * w)
        if v is not None:
            total = total + xp.sum(xp.imag(y) * v)
        return total
    return loss


@needs_jax
@pytest.mark.parametrize("name", list(CASES))
def test_gradient_matches_jax(name, precision):
    f, jf, shape, kind = _fns(name)
    x = _input(kind, shape, precision, seed=1)
    out = jax.eval_shape(jf, jjnp.asarray(x))
    cplx = np.dtype(out.dtype).kind == "c"
    ours = fnad.grad(_real_loss(f, out.shape, cplx, jnp))(x)
    theirs = _jax_jit(jax.grad(_real_loss(jf, out.shape, cplx, jjnp)))(jjnp.asarray(x))
    _close(ours, theirs, precision, grad=True)


SECOND_ORDER = ["fft-odd-axis0", "ifft-axis0-pad-ortho", "rfft-pad-n-ortho", "irfft-odd-n",
                "irfft-cut-ortho", "hfft-odd-ortho", "ihfft-cut-ortho", "rfft2-s-forward",
                "irfft2-axes-s", "rfftn-4d", "irfftn-axes-reversed-s"]


@needs_jax
@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_matches_jax(name, x64):
    """The JVP of the gradient of Σ|f(x)|²·w (a Hessian-vector product), as jax's."""
    f, jf, shape, kind = _fns(name)
    x = _input(kind, shape, "64", seed=2)
    t = _input(kind, shape, "64", seed=3)
    w = np.random.default_rng(4).uniform(0.5, 1.5, jax.eval_shape(jf, jjnp.asarray(x)).shape)

    def energy(fun, xp):
        return lambda x: xp.sum(xp.abs(fun(x)) ** 2 * w)
    _, ours = fnad.jvp(fnad.grad(energy(f, jnp)), (x,), (t,))
    hvp = _jax_jit(lambda x, t: jax.jvp(jax.grad(energy(jf, jjnp)), (x,), (t,))[1])
    theirs = hvp(jjnp.asarray(x), jjnp.asarray(t))
    _close(ours, theirs, "64", grad=True)


def test_round_trips():
    x = _input(R, (3, 10), "32")
    z = _input(C, (3, 6), "32")
    np.testing.assert_allclose(jnp.fft.irfft(jnp.fft.rfft(x)), x, atol=1e-6)
    np.testing.assert_allclose(jnp.fft.ifft(jnp.fft.fft(z)), z, atol=1e-6)
    np.testing.assert_allclose(jnp.fft.irfftn(jnp.fft.rfftn(x), x.shape), x, atol=1e-6)
    h = z.copy()
    h[:, 0] = h[:, 0].real                             # a Hermitian signal's DC term is real
    np.testing.assert_allclose(jnp.fft.ihfft(jnp.fft.hfft(h, 11), 11), h, atol=1e-5)
    np.testing.assert_allclose(jnp.fft.fft(x, norm="ortho"), np.fft.fft(x, norm="ortho"),
                               rtol=1e-5, atol=1e-5)


# ---- frequencies and shifts -------------------------------------------------------------------
FREQ_CASES = [(8, 1.0, None), (7, 0.1, None), (1, 2.0, None), (6, 0.5, np.int32),
              (5, 0.25, np.float64), (4, 1.0, np.complex64)]


@needs_jax
@pytest.mark.parametrize("fname", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n,d,dtype", FREQ_CASES, ids=[str(c) for c in FREQ_CASES])
def test_frequencies_match_jax(fname, n, d, dtype, x64):
    ours = getattr(jnp.fft, fname)(n, d, dtype=dtype)
    theirs = getattr(jjnp.fft, fname)(n, d, dtype=dtype)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-7)


@needs_jax
def test_frequencies_default_dtype_and_traced_spacing():
    for fname in ("fftfreq", "rfftfreq"):
        ours, theirs = getattr(jnp.fft, fname)(6, 0.3), getattr(jjnp.fft, fname)(6, 0.3)
        assert np.asarray(ours).dtype == np.float32 == np.asarray(theirs).dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)
        fn = getattr(jnp.fft, fname)
        out = traced(lambda d, fn=fn: fn(6, d))(np.float32(0.3))
        np.testing.assert_allclose(out, np.asarray(theirs), rtol=1e-6)


SHIFT_CASES = [((5,), None), ((6,), None), ((3, 4), None), ((3, 4), 1), ((3, 5), (0,)),
               ((2, 3, 5), (2, 0)), ((), None)]


@needs_jax
@pytest.mark.parametrize("fname", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("shape,axes", SHIFT_CASES, ids=[str(c) for c in SHIFT_CASES])
def test_shifts_match_jax(fname, shape, axes):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    ours = getattr(jnp.fft, fname)(x, axes)
    theirs = getattr(jjnp.fft, fname)(x, axes)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_shifts_undo_each_other_and_centre_zero_frequency():
    x = np.arange(35.0, dtype=np.float32).reshape(5, 7)
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(x)), x)
    freqs = jnp.fft.fftshift(jnp.fft.fftfreq(7))
    assert float(freqs[3]) == 0.0 and bool(jnp.all(jnp.diff(freqs) > 0))


# ---- transformations: vmap, jit ---------------------------------------------------------------
def test_vmap_matches_loop():
    xs = _input(R, (3, 4, 6), "32")
    zs = _input(C, (4, 3, 5), "32")
    for f, x, in_axes in [(lambda x: jnp.fft.rfft(x, n=8), xs, 0),
                          (lambda x: jnp.fft.rfft2(x, axes=(1, 0)), xs, 2),
                          (lambda z: jnp.fft.irfft(z, axis=0), zs, 1),
                          (lambda z: jnp.fft.fftn(z, norm="ortho"), zs, 0),
                          (lambda z: jnp.fft.hfft(z, n=5), zs, 2)]:
        got = fnad.vmap(f, in_axes=in_axes)(x)
        want = np.stack([np.asarray(f(np.take(x, i, axis=in_axes)))
                         for i in range(x.shape[in_axes])])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


JIT_CASES = ["fft-odd-axis0", "rfft-pad-n-ortho", "irfft-cut-batched", "hfft-odd-ortho",
             "ihfft-cut-ortho", "rfft2-axes-0-1", "irfftn-axes-reversed-s", "fftn-4d"]


@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_jit_matches_eager(backend):
    if backend == "numba":
        pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")
    if backend == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax (not installed)")
    for name in JIT_CASES:
        f, _, shape, kind = _fns(name)
        x = _input(kind, shape, "32")
        want = f(x)
        got = fnad.jit(f, backend=backend)(x)
        grad_f = fnad.grad(lambda x: jnp.sum(jnp.abs(f(x)) ** 2))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(fnad.jit(grad_f, backend=backend)(x), grad_f(x),
                                   rtol=1e-4, atol=1e-4, err_msg=name)


# every spec on numpy and xla; on numba (a compile each) every fourth
JIT_RUNS = [(s, b) for s in FFT_SPECS for b in ("numpy", "xla")] + \
    [(s, "numba") for s in FFT_SPECS[::4]]


@pytest.mark.parametrize("spec,backend", JIT_RUNS,
                         ids=[f"{s.id}-{b}" for s, b in JIT_RUNS])
def test_every_fft_spec_under_jit(spec, backend):
    """Each spec of the primitive (every FftType, rank and dtype) through jit on `backend`
    (the backends' coverage tests run only the first spec of each primitive)."""
    if backend == "numba":
        pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")
    if backend == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax (not installed)")
    f, dyn, _ = _split(spec, _draw(spec))
    want = f(*dyn)
    got = fnad.jit(f, backend=backend)(*dyn)
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    np.testing.assert_allclose(got, want, rtol=spec.rtol, atol=spec.atol)


# ---- the primitive -------------------------------------------------------------------------
def test_lax_fft_types_and_dtypes():
    x = _input(R, (2, 8), "32")
    assert lax.fft(x, lax.FftType.RFFT, (8,)).dtype == np.complex64
    assert lax.fft(x, "RFFT", [8]).shape == (2, 5)
    assert lax.fft(x, "fft", (8,)).dtype == np.complex64               # real input converted
    assert lax.fft(np.arange(4), "rfft", (4,)).dtype == np.complex64   # so is an integer one
    assert lax.fft(lax.fft(x, "rfft", (8,)), "irfft", (8,)).dtype == np.float32
    same = lax.fft(x, "fft", ())                                       # no axes: converted x
    assert same.dtype == np.complex64 and np.allclose(same, x)
    assert repr(lax.FftType.IRFFT) == "FftType.IRFFT" and lax.FftType.IRFFT == 3
    text = str(fnad.make_jaxpr(lambda x: lax.fft(x, "rfft", (2, 8)))(x))
    assert "fft[fft_lengths=(2, 8) fft_type=FftType.RFFT]" in text


def test_lax_fft_x64_dtypes(x64):
    x = _input(R, (6,), "64")
    assert lax.fft(x, "rfft", (6,)).dtype == np.complex128
    assert lax.fft(lax.fft(x, "rfft", (6,)), "irfft", (6,)).dtype == np.float64
    assert lax.fft(np.arange(4, dtype=np.int64), "fft", (4,)).dtype == np.complex128


@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_empty_transforms_are_zeros(backend):
    """Nothing to read or write: zeros of the right shape, eagerly and under jit (numpy.fft
    refuses a zero length, XLA cannot lower an RFFT of one; jax's irfft of one frequency is
    empty)."""
    if backend != "numpy":
        pytest.importorskip("numba" if backend == "numba" else "jax")
    eager_on = "xla" if backend == "xla" else "numpy"
    cases = [(lambda z: jnp.fft.irfft(z), np.ones(1, np.complex64), (0,)),   # n = 2(1 - 1)
             (lambda z: jnp.fft.fft(z), np.ones((0, 4), np.complex64), (0, 4)),
             (lambda x: lax.fft(x, "rfft", (0,)), np.ones((2, 0), np.float32), (2, 1))]
    for f, x, shape in cases:
        for out in (f(fnad.device_put(x, eager_on)), fnad.jit(f, backend=backend)(x)):
            assert out.shape == shape and not np.any(np.asarray(out))


def test_traces_to_one_fft_eqn():
    x = _input(R, (4, 6), "32")
    eqns = fnad.make_jaxpr(lambda x: jnp.fft.rfft2(x))(x).jaxpr.eqns
    assert [e.primitive for e in eqns] == [fp.fft_p]
    shape = fnad.eval_shape(lambda x: jnp.fft.irfftn(x, s=(3, 7)), _input(C, (5, 4), "32"))
    assert (shape.shape, shape.dtype) == ((3, 7), np.float32)


@needs_jax
@pytest.mark.parametrize("fname,shape,lengths",
                         [("fft", (4, 8), (8,)), ("fft", (3,), (3,)), ("fft2", (4, 8), (4, 8)),
                          ("rfft", (4, 8), (8,)), ("irfft", (4, 5), (8,)),
                          ("rfftn", (2, 4, 16), (2, 4, 16)), ("fft", (1,), (1,))])
def test_cost_analysis_matches_xla(fname, shape, lengths):
    kind = C if fname in ("fft", "fft2", "irfft") else R
    x = _input(kind, shape, "32")
    ours = fnad.jit(getattr(jnp.fft, fname)).lower(x).compile().cost_analysis()
    theirs = jax.jit(getattr(jjnp.fft, fname)).lower(x).compile().cost_analysis()
    theirs = theirs[0] if isinstance(theirs, list) else theirs
    assert ours["flops"] == theirs.get("flops", 0.0), (ours, theirs)


# ---- errors ---------------------------------------------------------------------------------
def test_lax_errors():
    z, x = _input(C, (2, 8), "32"), _input(R, (2, 8), "32")
    raises_with(lambda: lax.fft(z, "rfft", (8,)), "only real valued inputs", "rfft",
                exc=ValueError)
    raises_with(lambda: lax.fft(x, "xfft", (8,)), "Unknown FFT type 'xfft'", exc=ValueError)
    raises_with(lambda: lax.fft(x, 3, (8,)), "Unknown FFT type value '3'", exc=TypeError)
    raises_with(lambda: lax.fft(z, "fft", (5,)), "fft:", "(2, 8)", "must equal fft_lengths",
                "(5,)")
    raises_with(lambda: lax.fft(z, "fft", (2, 2, 8)), "at least as many dimensions",
                "(2, 2, 8)")
    raises_with(lambda: lax.fft(np.ones((1, 2, 2, 2), np.complex64), "fft", (1, 2, 2, 2)),
                "1 to 3 trailing dimensions")
    raises_with(lambda: lax.fft(z, "irfft", (8,)), "IRFFT", "must be (5,)", "n//2 + 1")
    raises_with(lambda: lax.fft(x.astype(np.float16), "rfft", (8,)),
                "RFFT input must be float32 or float64, got float16")
    raises_with(lambda: fp.fft_p.bind(x, fft_type=fp.FftType.FFT, fft_lengths=(8,)),
                "FFT input must be complex64 or complex128, got float32")
    raises_with(lambda: fp.fft_p.bind(x, fft_type="fft", fft_lengths=(8,)),
                "fft_type must be an FftType")
    assert issubclass(ShapeError, TypeError)


def test_numpy_errors():
    x = _input(R, (2, 3, 4), "32")
    raises_with(lambda: jnp.fft.fft(x, n=0), "Shape should be positive.", exc=ValueError)
    raises_with(lambda: jnp.fft.fftn(x, s=(2,), axes=(0, 1)),
                "Shape and axes have different lengths.", exc=ValueError)
    raises_with(lambda: jnp.fft.fftn(x, axes=(0, 0)), "does not support repeated axes",
                "(0, 0)", exc=ValueError)
    raises_with(lambda: jnp.fft.fft(x, axis=(0,)), "fnad.numpy.fft.fft does not support "
                "multiple axes. Please use fnad.numpy.fft.fftn", exc=ValueError)
    raises_with(lambda: jnp.fft.fft2(x, axes=(0, 1, 2)), "fft2 only supports 2 axes",
                exc=ValueError)
    raises_with(lambda: jnp.fft.fft(x, norm="foo"), "Invalid norm value foo",
                '"backward","ortho" or "forward"', exc=ValueError)
    raises_with(lambda: jnp.fft.fft(x, axis=5), "axis 5 is out of bounds", exc=ValueError)
    raises_with(lambda: jnp.fft.fftn(x[0, 0], s=(2, 2)), "s=(2, 2) names 2 axes",
                exc=ValueError)
    raises_with(lambda: jnp.fft.rfft(x + 1j), "only real valued inputs", exc=ValueError)
    raises_with(lambda: jnp.fft.rfft([1.0, 2.0]), "requires ndarray or scalar arguments",
                exc=TypeError)
    raises_with(lambda: jnp.fft.fftfreq([5]), "n argument", "only takes an int",
                exc=ValueError)
    raises_with(lambda: jnp.fft.rfftfreq(5, d=[1.0]), "d argument", "single value",
                exc=ValueError)


# ---- import time ------------------------------------------------------------------------------
def test_importing_fnad_does_not_import_numpy_fft():
    code = ("import sys, fnad, fnad.numpy as jnp; assert 'numpy.fft' not in sys.modules; "
            "jnp.fft.rfft(jnp.ones(4)); assert 'numpy.fft' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)

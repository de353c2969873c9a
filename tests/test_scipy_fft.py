"""fnad.scipy.fft (dct, idct, dctn, idctn) against jax.scipy.fft: every norm, lengths cut
and padded, axes, complex inputs, float32, gradients in float64, jit on the test backend,
vmap against a loop, and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import raises_with, traced, x64_everywhere

import fnad
import fnad.numpy as fnp
import fnad.scipy.fft as ff

jax = pytest.importorskip("jax", reason="jax is the oracle")
import jax.numpy as jnp  # noqa: E402
import jax.scipy.fft as jf  # noqa: E402

RNG = np.random.default_rng(0)
NORMS = [None, "backward", "ortho"]


ONE_AXIS = [dict(), dict(axis=0), dict(n=4), dict(n=11, axis=1), dict(n=1, axis=0)]
N_AXES = [dict(), dict(s=(3, 7), axes=(0, 2)), dict(axes=(1,)), dict(s=4), dict(s=(2, 8)),
          dict(axes=(-1, 0, 1)), dict(s=(5, 3, 9))]


def jax_results(fn, jobs):
    """jax's fn(a, **kw) for every (a, kw) of jobs from one jitted program: one compile,
    where eager jax would compile each of its operations for each shape."""
    arrays = [a for a, _ in jobs]
    return jax.jit(lambda arrays: [fn(a, **kw) for a, (_, kw) in zip(arrays, jobs)])(arrays)


@pytest.mark.parametrize("name", ["dct", "idct", "dctn", "idctn"])
def test_matches_jax(name):
    f, j = getattr(ff, name), getattr(jf, name)
    base = ONE_AXIS if name in ("dct", "idct") else N_AXES
    cases = [dict(norm=norm) for norm in NORMS] + base[1:] + [dict(base[1], norm="ortho")]
    with x64_everywhere():
        x = RNG.standard_normal((4, 5, 6))
        z = x + 1j * RNG.standard_normal(x.shape)                       # complex: 2 cases
        x32 = x[0].astype(np.float32)                                    # float32: 2 cases
        jobs = ([(x, kw) for kw in cases] + [(z, kw) for kw in cases[2:4]] +
                [(x32, kw) for kw in cases[1:3]])
        for (v, kw), want in zip(jobs, jax_results(j, jobs)):
            got = f(v, **kw)
            assert got.dtype == v.dtype, kw
            tol = 2e-5 if v.dtype == np.float32 else 1e-11
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=str(kw))
        inverse = getattr(ff, name[1:] if name.startswith("i") else "i" + name)
        for norm in NORMS:                                               # round trip
            np.testing.assert_allclose(inverse(f(x, norm=norm), norm=norm), x, atol=1e-12)
    assert f(np.arange(5)).dtype == np.float32                          # ints become float


@pytest.mark.parametrize("name", ["dct", "idct", "dctn", "idctn"])
def test_gradients_jit_vmap(name, x64):
    f = getattr(ff, name)
    kw = dict(norm="ortho", **({"n": 6} if name in ("dct", "idct") else {"s": (3, 6)}))
    x = RNG.standard_normal((3, 5))

    def loss(mod, np_):
        fn = getattr(mod, name)
        return lambda x: np_.sum(np_.sin(fn(x, **kw)) * np_.arange(6.0))

    want = jax.jit(jax.grad(loss(jf, jnp)))(x)
    np.testing.assert_allclose(fnad.grad(loss(ff, fnp))(x), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(traced(lambda x: f(x, **kw))(x), f(x, **kw), atol=1e-12)
    if name in ("dct", "idct"):
        batched = fnad.vmap(lambda r: f(r, n=6), in_axes=1, out_axes=1)(x.T)
        np.testing.assert_allclose(batched, np.stack([f(r, n=6) for r in x], 1), atol=1e-12)


def test_errors():
    x = np.ones((3, 4))
    for name in ("dct", "idct", "dctn", "idctn"):
        fn = getattr(ff, name)
        raises_with(lambda: fn(x, type=1), name, "type=1", "only DCT type 2",
                    exc=NotImplementedError)
        raises_with(lambda: fn(x, norm="forward"), name, "norm='forward'", exc=ValueError)
    raises_with(lambda: ff.dct(x, n=0), "dct", "at least 1, got 0", exc=ValueError)
    raises_with(lambda: ff.idct(x, axis=2), "idct", "axis 2 is out of bounds", exc=ValueError)
    raises_with(lambda: ff.dctn(x, s=(2, 3), axes=(0,)), "dctn", "same length",
                exc=ValueError)
    raises_with(lambda: ff.idctn(x, s=(2, 3, 4)), "at most x.ndim (2)", exc=ValueError)
    raises_with(lambda: ff.dctn(x, axes=(1, -1)), "repeated axis", exc=ValueError)

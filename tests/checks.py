"""Helpers shared by several test modules (importable: pytest puts tests/ on the path)."""
from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest

import fnad
from fnad.config import config
from fnad.core import ShapeError


def raises_with(fn, *words, exc=ShapeError) -> str:
    """`fn()` raises `exc` whose message has every word of `words`; returns the message."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


# The backend `traced` compiles with. CI uses numpy (an interpreter: no compile time per
# program); FNAD_TEST_BACKEND=numba or =xla runs the same tests through that compiler.
TEST_BACKEND = os.environ.get("FNAD_TEST_BACKEND", "numpy")


def traced(f, **jit_kwargs):
    """f run through jit on TEST_BACKEND: its arguments become tracers, then compiled."""
    return fnad.jit(f, backend=TEST_BACKEND, **jit_kwargs)


@contextlib.contextmanager
def x64_everywhere():
    """jax_enable_x64 on in fnad and (when installed) jax for a block; both restored after."""
    try:
        import jax
    except ImportError:
        jax = None
    with config.override(jax_enable_x64=True):
        if jax is None:
            yield
            return
        old = jax.config.jax_enable_x64
        jax.config.update("jax_enable_x64", True)
        try:
            yield
        finally:
            jax.config.update("jax_enable_x64", old)


def jax_at_default_level(f):
    """jax.jit(f), compiled at XLA's default optimization level (3) whatever XLA_FLAGS says.

    conftest compiles the suite's jax programs unoptimized (level 0) for speed, which can
    change a result's last bit; oracles whose last bits matter (a sampler's draws compared
    exactly, float64 values to 1e-9) take the code jax's users run. Compiled once per
    argument shapes and dtypes (and x64 setting)."""
    import jax
    jitted, compiled = jax.jit(f), {}

    def run(*args):
        key = (jax.config.jax_enable_x64,
               *((np.shape(a), getattr(a, "dtype", type(a))) for a in args))
        if key not in compiled:
            options = {"xla_backend_optimization_level": 3}
            compiled[key] = jitted.lower(*args).compile(compiler_options=options)
        return compiled[key](*args)
    return run


def xla_rounds_each_product(dtype) -> bool:
    """Whether XLA's CPU code rounds a product to `dtype` before adding to it, as fnad does
    in 16 bits. It does where it computes 16-bit floats in float32 (x86 CPUs without
    AVX512-FP16). With native f16 arithmetic (AVX512-FP16, on Intel Sapphire Rapids) it
    contracts t * a + b into one fused multiply-add: one rounding fewer."""
    import jax
    dtype, f32 = np.dtype(dtype), np.float32
    t = np.linspace(-3, 3, 257, dtype=f32).astype(dtype)
    a, b = dtype.type(1.37), dtype.type(0.11)
    per_op = ((t.astype(f32) * f32(a)).astype(dtype).astype(f32) + f32(b)).astype(dtype)
    return np.array_equal(np.asarray(jax.jit(lambda t: t * a + b)(t)), per_op)


def assert_trees_close(got, want, rtol, atol, what):
    """Leaf by leaf, `got` has `want`'s structure, shapes and dtypes, is finite, and is
    within rtol and atol (scaled by want's largest magnitude, at least 1) of it."""
    got_l, want_l = fnad.tree_util.tree_leaves(got), fnad.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l), f"{what}: {len(got_l)} leaves != {len(want_l)}"
    for i, (g, w) in enumerate(zip(got_l, want_l)):
        g, w = np.asarray(g), np.asarray(w)
        where = f"{what} [{i}]"
        assert g.shape == w.shape, f"{where}: shape {g.shape} != expected {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != expected {w.dtype}"
        assert np.all(np.isfinite(g)), f"{where}: not finite"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)


def rand(shape, dtype=np.float32, seed=0):
    """Uniform in [-1, 1) (real and imaginary parts for complex dtypes)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dtype)


def well_conditioned(shape, dtype=np.float32, seed=0):
    """Diagonally dominant, then rows shuffled so that LU has to pivot."""
    n = shape[-1]
    x = rand(shape, dtype, seed) + n * np.eye(n)
    return x[..., np.random.default_rng(seed + 1).permutation(n), :].astype(dtype)


def spd(shape, dtype=np.float32, seed=0):
    """Symmetric (Hermitian) positive definite: M Mᴴ + n I."""
    m = rand(shape, dtype, seed)
    return (m @ np.conj(np.swapaxes(m, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)

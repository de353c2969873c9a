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


def traced(f):
    """f run through jit on TEST_BACKEND: its arguments become tracers, then compiled."""
    return fnad.jit(f, backend=TEST_BACKEND)


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

"""Numba-backend bugs that the program fuzzer (tests/fuzz_programs.py) found, one test each.

Every program is run by jit on the numba backend and compared with eager execution (the
NumPy reference): same shapes, dtypes and values.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba")

import fnad  # noqa: E402
import fnad.numpy as jnp  # noqa: E402
from fnad import lax  # noqa: E402


def assert_same(got, want):
    g, w = np.asarray(got), np.asarray(want)
    assert (g.shape, g.dtype) == (w.shape, w.dtype)
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6)


def _concat(x):
    return jnp.stack([jnp.exp(x), x > 0], axis=-1)


def _scan_stack(x):
    return lax.scan(lambda c, r: (c + r, c * r), x[0], x)[1]


# bfloat16 buffers the generated driver allocates (a concatenate written in place, a scan's
# stacked outputs) were np.empty(..., '<V2'), bfloat16's dtype.str: a void type.
@pytest.mark.parametrize("f", [_concat, _scan_stack], ids=["concatenate", "scan_ys"])
def test_bfloat16_buffers_of_the_driver(f):
    x = jnp.asarray(np.linspace(-1, 1, 6).reshape(3, 2), "bfloat16")
    assert_same(fnad.jit(f, backend="numba")(x), f(x))

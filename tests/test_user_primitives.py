"""A user primitive built with the public API (fnad.primitives), under grad, vmap and jit on
each backend that has an impl; a missing impl is an error that lists those that do."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad.primitives import Primitive, ShapedArray


def make_softclip():
    """softclip(x, c) = c·tanh(x / c): the whole declaration, in under 30 lines."""
    numba = pytest.importorskip("numba", reason="the numba impl needs numba")
    p = Primitive("softclip")
    p.def_abstract_eval(lambda x, *, c: ShapedArray(x.shape, x.dtype, x.weak_type))
    p.def_impl(lambda x, *, c: (c * np.tanh(x / c)).astype(x.dtype), backend="numpy")

    @numba.njit(cache=False)
    def kernel(x, c):
        out = np.empty_like(x)
        for i in range(x.size):
            out.flat[i] = c * np.tanh(x.flat[i] / c)
        return out
    p.def_impl(lambda x, *, c: kernel(x, x.dtype.type(c)), backend="numba")

    def fwd(x, *, c):
        y = p.bind(x, c=c)
        return y, y
    p.def_vjp(fwd, lambda y, ct, *, c: (ct * (1.0 - (y / c) ** 2),))
    p.def_batch(lambda vals, dims, *, c: (p.bind(vals[0], c=c), dims[0]))
    return p


def test_user_primitive_under_grad_vmap_and_jit():
    p = make_softclip()

    def f(x):
        return jnp.sum(p.bind(x, c=2.0) ** 2)
    x = jnp.asarray(np.linspace(-3, 3, 7), jnp.float32)
    ref_val = np.sum((2 * np.tanh(np.asarray(x) / 2)) ** 2)
    y = 2 * np.tanh(np.asarray(x) / 2)
    ref_grad = 2 * y * (1 - (y / 2) ** 2)
    np.testing.assert_allclose(f(x), ref_val, rtol=1e-6)
    np.testing.assert_allclose(fnad.grad(f)(x), ref_grad, rtol=1e-5)
    xs = jnp.stack([x, -x, 2 * x])
    np.testing.assert_allclose(fnad.vmap(fnad.grad(f))(xs)[1], -ref_grad, rtol=1e-5)
    for backend in ("numpy", "numba"):
        np.testing.assert_allclose(fnad.jit(f, backend=backend)(x), ref_val, rtol=1e-6)
        np.testing.assert_allclose(fnad.jit(fnad.grad(f), backend=backend)(x), ref_grad,
                                   rtol=1e-5)
        np.testing.assert_allclose(fnad.jit(fnad.vmap(fnad.grad(f)), backend=backend)(xs)[2],
                                   fnad.grad(f)(2 * x), rtol=1e-5)


def test_forward_mode_of_a_vjp_only_primitive_is_an_error():
    p = make_softclip()
    with pytest.raises(TypeError, match="forward-mode"):
        fnad.jvp(lambda x: p.bind(x, c=1.0), (jnp.ones(2),), (jnp.ones(2),))


def test_missing_impl_lists_the_backends_that_have_one():
    pytest.importorskip("jax", reason="needs the xla backend to be missing an impl")
    p = make_softclip()
    with pytest.raises(fnad.NoImplementationError,
                       match="'softclip' has no implementation on the 'xla' backend.*numba, "
                             "numpy"):
        fnad.jit(lambda x: p.bind(x, c=1.0), backend="xla")(jnp.ones(2))


def test_loop_fallback_without_a_batching_rule_warns():
    q = Primitive("double_it")
    q.def_abstract_eval(lambda x: x)
    q.def_impl(lambda x: x * 2)
    with pytest.warns(UserWarning, match="'double_it' has no batching rule"):
        out = fnad.vmap(q.bind)(jnp.arange(3.0))
    assert out.tolist() == [0.0, 2.0, 4.0]


def test_a_numpy_impl_registered_after_the_numba_backend_loaded_serves_numba_jit():
    """The numba backend runs NumPy buffers: it falls back to the NumPy table, including
    impls registered after it was first used."""
    fnad.jit(lambda x: x + 1, backend="numba")(np.ones(3, np.float32))   # backend loaded
    triple_p = Primitive("triple_late")
    triple_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    triple_p.def_impl(lambda x: 3 * x, backend="numpy")
    out = fnad.jit(lambda x: triple_p.bind(x) + 1, backend="numba")(np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(out), np.full(3, 4, np.float32))

"""Small parts of the top-level API: fnad.errors and fnad.typing (jax.errors, jax.typing),
fnad.experimental.enable_x64/disable_x64, print_environment_info, float0 and custom_derivatives."""
import contextlib
import importlib

import numpy as np
import pytest

import fnad
import fnad.numpy as fnp


def test_errors_are_the_ones_fnad_raises():
    import fnad.errors as errors
    with pytest.raises(errors.ConcretizationTypeError):
        fnad.jit(lambda x: 1 if x > 0 else 0)(1.0)
    with pytest.raises(errors.TracerBoolConversionError):
        fnad.jit(lambda x: bool(x))(1.0)
    with pytest.raises(errors.ShapeError):
        fnad.lax.add(np.ones(2), np.ones(3))
    assert issubclass(errors.TracerIntegerConversionError, errors.ConcretizationTypeError)
    assert errors.JaxprTypeError.__module__ == "fnad.ir"


def test_typing_and_x64_context():
    from fnad.typing import ArrayLike, DTypeLike

    def f(x: ArrayLike, dtype: DTypeLike = None) -> fnad.Array:
        return fnp.asarray(x, dtype)
    assert f(1.0).dtype == np.float32
    from fnad.experimental import disable_x64, enable_x64
    with enable_x64():
        assert fnp.ones(2, "float64").dtype == np.float64
        assert fnp.asarray(1.0).dtype == np.float64
        with disable_x64():
            assert fnp.asarray(1.0).dtype == np.float32
    assert fnp.asarray(1.0).dtype == np.float32


def test_print_environment_info(capsys):
    text = fnad.print_environment_info(return_string=True)
    assert f"fnad:    {fnad.__version__}" in text and "numpy:" in text
    assert fnad.print_environment_info() is None
    assert "python:" in capsys.readouterr().out


def test_float0_and_custom_derivatives_names():
    """jax.float0 and jax.custom_derivatives under the same names: the integer input's
    gradient with allow_int has dtype float0, and custom_derivatives holds fnad.custom's
    objects; fnad.stages and fnad.lax.linalg import as modules, as jax's do."""
    g = fnad.grad(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert np.asarray(g[1]).dtype == fnad.float0
    assert fnad.custom_derivatives.custom_jvp is fnad.custom_jvp
    assert fnad.custom_derivatives.SymbolicZero is fnad.custom.SymbolicZero
    from fnad.custom_derivatives import custom_vjp, custom_vjp_call_p
    assert custom_vjp is fnad.custom_vjp and custom_vjp_call_p.name == "custom_vjp_call"
    from fnad.stages import Compiled, Lowered, Traced, Wrapped
    assert importlib.import_module("fnad.lax.linalg") is fnad.lax.linalg
    jf = fnad.jit(lambda x: x + 1)
    low = jf.lower(1.0)
    assert isinstance(jf, Wrapped) and isinstance(jf.trace(1.0), Traced)
    assert isinstance(low, Lowered) and isinstance(low.compile(), Compiled)


def test_ensure_compile_time_eval():
    """Concrete operations run at trace time inside the block (usable in Python control
    flow, folded out of the jaxpr); operations on tracers are still staged."""
    @fnad.jit
    def f(x):
        with fnad.ensure_compile_time_eval():
            positive = fnp.sin(fnp.sin(3.0)) > 0
            w = x * 2
        return fnp.sin(x) + w if positive else fnp.cos(x)
    np.testing.assert_allclose(f(1.0), np.sin(1.0) + 2.0, rtol=1e-6)

    def g(x, fold):
        with fnad.ensure_compile_time_eval() if fold else contextlib.nullcontext():
            y = fnad.random.randint(fnad.random.key(0), (4, 4), 0, 100)
        return fnp.sum(y @ y) * x
    folded = fnad.make_jaxpr(lambda x: g(x, True))(1.0)
    staged = fnad.make_jaxpr(lambda x: g(x, False))(1.0)
    assert len(folded.jaxpr.eqns) == 4          # dot_general, reduce_sum, convert, mul
    assert len(staged.jaxpr.eqns) > 20         # the key's threefry rounds are staged
    assert float(fnad.jit(lambda x: g(x, True))(2.0)) == float(g(2.0, False))
    with pytest.raises(ValueError, match="boom"):
        with fnad.ensure_compile_time_eval():
            raise ValueError("boom")
    assert fnad.config.jax_eager_constant_folding is False
    jax = pytest.importorskip("jax", reason="jax is the oracle for the value")
    jy = jax.random.randint(jax.random.key(0), (4, 4), 0, 100)
    assert float(g(2.0, True)) == float((jy @ jy).sum() * 2.0)


def test_enable_x64_effects_barrier_and_make_array_from_callback():
    with fnad.enable_x64():
        assert fnp.asarray(1.0).dtype == np.float64
        with fnad.enable_x64(False):
            assert fnp.asarray(1.0).dtype == np.float32
    assert fnp.asarray(1.0).dtype == np.float32
    seen = []
    fnad.jit(lambda x: (fnad.debug.callback(seen.append, x), x)[1])(2.0)
    fnad.effects_barrier()
    assert [float(v) for v in seen] == [2.0]
    calls = []
    mesh = fnad.make_mesh((1,), ("x",))
    sharding = fnad.NamedSharding(mesh, fnad.P("x"))
    arr = fnad.make_array_from_callback(
        (4, 3), sharding, lambda idx: calls.append(idx) or np.arange(12.0).reshape(4, 3)[idx],
        dtype=np.float32)
    assert calls == [(slice(None), slice(None))] and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, np.arange(12.0).reshape(4, 3))
    with pytest.raises(ValueError, match="expected the shard shape"):
        fnad.make_array_from_callback((2, 2), sharding, lambda idx: np.zeros(3))


def test_dtypes_extras_match_jax():
    jax = pytest.importorskip("jax", reason="jax is the oracle")
    d, jd = fnad.dtypes, jax.dtypes
    for t in (np.float32, np.int8, np.bool_, np.complex64, d.bfloat16, np.uint16):
        assert d.itemsize_bits(t) == jd.itemsize_bits(t)
    for x in (np.float32(1), 3, True, 1j, fnp.ones(2, d.bfloat16), fnp.int32(2)):
        want = jd.scalar_type_of(x if not isinstance(x, fnad.Array) else np.asarray(x))
        assert d.scalar_type_of(x) is want
    # typed keys are of the (extended) key category; raw keys are uint32 arrays
    assert d.issubdtype(fnad.random.key(0).dtype, d.prng_key)
    assert d.issubdtype(fnad.random.key(0).dtype, d.extended)
    assert not d.issubdtype(fnad.random.PRNGKey(0).dtype, d.prng_key)
    assert not d.issubdtype(fnad.random.key(0).dtype, np.integer)
    assert issubclass(d.prng_key, d.extended)

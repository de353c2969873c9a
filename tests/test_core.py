"""fnad.Array, abstract values, the trace context and debug_nans."""
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import fnad
from fnad import core, lax
from fnad.config import config


def test_array_basics():
    x = lax.add(np.arange(6, dtype=np.float32).reshape(2, 3), 0.0)
    assert isinstance(x, fnad.Array)
    assert x.shape == (2, 3) and x.dtype == np.float32 and x.ndim == 2 and x.size == 6
    assert len(x) == 2
    np.testing.assert_array_equal(np.asarray(x), np.arange(6).reshape(2, 3))
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert repr(x) == "Array([[0., 1., 2.],\n       [3., 4., 5.]], dtype=float32)"
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)
    with pytest.raises(ValueError):
        bool(x)                                   # as NumPy: ambiguous truth value
    y = pickle.loads(pickle.dumps(x))
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert y.backend == "numpy"


def test_scalar_array_conversions_and_weak_type_repr():
    s = lax.mul(2.0, 3.0)
    assert s.weak_type and float(s) == 6.0 and s.item() == 6.0 and int(s) == 6
    assert repr(s) == "Array(6., dtype=float32, weak_type=True)"
    assert f"{s:.1f}" == "6.0"
    n = lax.add(np.int32(3), np.int32(4))
    assert [10, 20, 30, 40, 50, 60, 70, 80][n] == 80      # __index__ on integer scalars
    with pytest.raises(TypeError, match="integer scalar"):
        [1, 2][s]


def test_x64_mode_changes_defaults():
    assert core.get_aval(1.0).dtype == np.float32
    assert core.get_aval(np.ones(2, np.float64)).dtype == np.float32    # canonicalized
    with config.override(jax_enable_x64=True):
        assert core.get_aval(1.0).dtype == np.float64
        assert lax.add(np.ones(2), 1.0).dtype == np.float64
    assert lax.add(np.ones(2), 1.0).dtype == np.float32


def test_current_trace_restored_after_errors():
    before = core.current_trace()
    with pytest.raises(ZeroDivisionError):
        fnad.grad(lambda x: 1 / 0)(1.0)
    with pytest.raises(fnad.ShapeError):
        fnad.make_jaxpr(lambda x: lax.add(x, np.ones(4, np.float32)))(np.ones(3, np.float32))
    assert core.current_trace() is before is core.eval_trace


def test_debug_nans_names_primitive_and_line():
    with config.override(jax_debug_nans=True):
        with pytest.raises(FloatingPointError) as e:
            lax.log(lax.neg(np.ones(2, np.float32)))             # log(-1) = nan
        assert re.search(r"nan.*in log.*test_core\.py:\d+", str(e.value))
        lax.log(np.ones(2, np.float32))                          # no nan: fine
    assert np.isnan(np.asarray(lax.log(np.float32(-1.0))))       # off again: quiet NaN


def test_import_fnad_loads_no_compiler_and_no_backend():
    code = ("import sys, fnad; import fnad.numpy, fnad.lax, fnad.nn; "
            "bad = [m for m in ('numba', 'jax', 'fnad.backends.numpy_ref') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tracers_are_instances_of_array():
    """As `isinstance(tracer, jax.Array)` in jax: ported code tests for arrays so."""
    seen = []

    def f(x):
        seen.append(isinstance(x, fnad.Array))
        return x * x

    fnad.jit(f)(fnad.numpy.ones(2))
    fnad.grad(f)(1.0)
    fnad.vmap(f)(fnad.numpy.ones(3))
    assert seen == [True, True, True]
    assert isinstance(fnad.numpy.ones(2), fnad.Array) and not isinstance(1.0, fnad.Array)
    assert not isinstance(np.ones(2), fnad.Array)


def test_shape_dtype_struct_as_jax():
    import fnad
    s = fnad.ShapeDtypeStruct([2, 3], "float32")
    assert (s.shape, s.dtype, s.weak_type, s.sharding, s.ndim, s.size) == (
        (2, 3), np.dtype(np.float32), False, None, 2, 6)
    assert {s: 1}[fnad.ShapeDtypeStruct((2, 3), np.float32)] == 1     # hashable, equal
    weak = s.update(weak_type=True)
    assert weak != s and weak.shape == (2, 3) and weak.weak_type
    assert repr(s) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    assert repr(weak) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32, weak_type=True)"
    assert repr(fnad.eval_shape(lambda x: x < 2.0, 1.0)) == (
        "ShapeDtypeStruct(shape=(), dtype=bool, weak_type=True)")
    with pytest.raises(TypeError):                   # weak_type is keyword-only, as jax's
        fnad.ShapeDtypeStruct((2,), np.float32, True)
    with pytest.raises(ValueError, match="dtype must be specified"):
        fnad.ShapeDtypeStruct((2,), None)
    with pytest.raises(TypeError, match="unknown fields.*'size'"):
        s.update(size=3)

"""fnad.dlpack against jax.dlpack, and round trips with NumPy and torch."""
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp


def test_is_supported_dtype_matches_jax():
    jax = pytest.importorskip("jax", reason="jax is the oracle of the dtype list")
    for dt in (np.bool_, np.int8, np.uint16, np.int64, np.float16, fnp.bfloat16, np.float32,
               np.complex128, fnp.float8_e4m3fn, fnp.int4):
        assert fnad.dlpack.is_supported_dtype(dt) == jax.dlpack.is_supported_dtype(dt), dt
    with pytest.raises(TypeError, match="None"):
        fnad.dlpack.is_supported_dtype(None)


def test_round_trips():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = fnad.dlpack.from_dlpack(x)
    assert isinstance(a, fnad.Array) and a.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(a), x)
    np.testing.assert_array_equal(np.from_dlpack(a * 2), x * 2)     # an fnad Array exports
    with pytest.raises(TypeError, match="does not export DLPack"):
        fnad.dlpack.from_dlpack([1, 2])
    torch = pytest.importorskip("torch", reason="torch not installed: the NumPy trip only")
    t = torch.arange(4, dtype=torch.int32)
    b = fnad.dlpack.from_dlpack(t)
    assert b.dtype == np.int32 and np.asarray(b).tolist() == [0, 1, 2, 3]
    assert torch.from_dlpack(b + 1).tolist() == [1, 2, 3, 4]

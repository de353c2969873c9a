"""fnad.devices, default_backend, device_put (moves between backends), block_until_ready."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp


def test_devices_and_default_backend():
    names = {d.backend for d in fnad.devices()}
    assert {"numpy", "numba"} <= names
    assert fnad.default_backend() == "numpy"
    assert fnad.devices("numpy")[0].platform == "cpu"
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        fnad.devices("nope")


def test_device_put_pytrees_and_numpy_values():
    tree = {"a": np.ones(3, np.float32), "b": (2.0, jnp.arange(2))}
    out = fnad.device_put(tree, "numpy")
    assert all(type(x) is fnad.Array for x in fnad.tree_util.tree_leaves(out))
    assert out["b"][0].weak_type                      # a Python scalar stays weakly typed
    x = jnp.ones(2)
    assert fnad.device_put(x) is x
    assert fnad.block_until_ready(out) is out
    with pytest.raises(TypeError, match="backend name or an fnad Device"):
        fnad.device_put(x, 3)


def test_transfer_to_xla_and_back():
    pytest.importorskip("jax", reason="the xla backend needs jax")
    x = jnp.arange(4.0)
    on_xla = fnad.device_put(x, "xla")
    assert on_xla.backend == "xla" and on_xla.aval == x.aval
    y = on_xla * 2.0 + 1.0                            # eager ops run on xla
    assert y.backend == "xla"
    back = fnad.device_put(y, fnad.devices("numpy")[0])
    assert back.backend == "numpy" and back.tolist() == [1.0, 3.0, 5.0, 7.0]
    g = fnad.grad(lambda v: jnp.sum(v * v))(on_xla)
    assert g.backend == "xla" and g.tolist() == [0.0, 2.0, 4.0, 6.0]
    with pytest.raises(ValueError, match="different backends"):
        on_xla + fnad.device_put(jnp.ones(4), "numba")     # two non-host backends


def test_array_device_and_counts():
    x = jnp.arange(3.0)
    assert x.device == fnad.devices("numpy")[0] and x.devices() == {x.device}
    assert fnad.jit(lambda v: v * 2)(x).device.backend == "numpy"   # numba's: NumPy buffers
    assert x.copy_to_host_async() is None
    assert fnad.device_count() == 1 == fnad.local_device_count()
    assert fnad.local_devices() == fnad.devices()
    with pytest.raises(ValueError, match="one process"):
        fnad.local_devices(process_index=1)


def test_platform_names():
    cpu = fnad.devices("cpu")
    assert [d.backend for d in cpu[:2]] == ["numpy", "numba"]       # eager default, jit's
    assert all(d.platform == "cpu" for d in cpu)
    assert fnad.device_put(np.ones(2), "cpu").backend == "numpy"
    assert fnad.device_count("cpu") == len(cpu)
    with pytest.raises(ValueError, match="unknown backend 'tpu'.*platform"):
        fnad.devices("tpu")


def test_gpu_platform_or_a_clear_error():
    """The platform "gpu" picks a backend with a GPU device where there is one; elsewhere it
    is an error that says what would provide one."""
    if any(d.platform == "gpu" for d in fnad.devices()):
        assert all(d.platform == "gpu" for d in fnad.devices("gpu"))
        backend = fnad.jit(lambda v: v, backend="gpu").lower(np.ones(2)).backend
        assert any(d.platform == "gpu" for d in fnad.devices(backend))
        return
    with pytest.raises(RuntimeError, match="no gpu device.*xla runs where jax has a gpu"):
        fnad.devices("gpu")
    with pytest.raises(RuntimeError, match="no gpu device"):
        fnad.jit(lambda v: v, backend="gpu")


def test_default_device_context():
    numba_device = fnad.devices("numba")[0]
    with fnad.default_device(numba_device):
        assert jnp.ones(2).backend == "numpy"            # numba's arrays are NumPy-backed
        assert fnad.config.jax_jit_backend == "numba"
    with fnad.default_device(fnad.devices("numpy")[0]):
        assert fnad.config.jax_jit_backend == "numba"    # the interpreter is not picked
    with fnad.default_device(None):
        assert fnad.default_backend() == "numpy"


def test_default_device_on_xla():
    pytest.importorskip("jax", reason="the xla backend needs jax")
    xla_device = fnad.devices("xla")[0]
    with fnad.default_device(xla_device):
        x = jnp.arange(3.0)
        assert x.backend == "xla" and x.device == xla_device
        assert fnad.jit(lambda v: v + 1)(x).backend == "xla"
    assert fnad.default_backend() == "numpy" and fnad.config.jax_jit_backend == "numba"
    assert jnp.ones(2).backend == "numpy"


def test_device_get_to_device_and_shards():
    x = jnp.arange(3.0)
    got = fnad.device_get({"x": x, "n": 2, "s": "label"})
    assert type(got["x"]) is np.ndarray and got["x"].tolist() == [0.0, 1.0, 2.0]
    assert got["n"] == 2 and got["s"] == "label"
    assert not got["x"].flags.writeable                   # the immutable buffer itself
    with pytest.raises(fnad.TracerArrayConversionError):
        fnad.jit(lambda v: fnad.device_get(v))(x)
    assert x.to_device("numpy") is x
    assert x.is_fully_addressable and x.is_fully_replicated and x.addressable_data(0) is x
    with pytest.raises(IndexError, match="one shard"):
        x.addressable_data(1)
    assert fnad.typeof(x) == x.aval and fnad.typeof(1.0).weak_type


def test_dlpack_round_trips():
    x = jnp.arange(4.0).reshape(2, 2)
    np.testing.assert_array_equal(np.from_dlpack(x), np.asarray(x))
    y = jnp.from_dlpack(np.arange(3, dtype=np.int32))
    assert type(y) is fnad.Array and y.dtype == np.int32 and y.tolist() == [0, 1, 2]
    assert jnp.from_dlpack(x).tolist() == x.tolist()


def test_creation_device_argument_places_the_result():
    assert jnp.zeros(2, device="cpu").backend == "numpy"
    pytest.importorskip("jax", reason="the xla backend needs jax")
    xla = fnad.devices("xla")[0]
    made = [jnp.zeros(2, device=xla), jnp.ones((2,), device="xla"),
            jnp.full((2,), 3.0, device=xla), jnp.empty(2, device=xla),
            jnp.zeros_like(jnp.ones(2), device=xla), jnp.full_like(np.ones(2), 2, device=xla),
            jnp.arange(3, device=xla), jnp.linspace(0.0, 1.0, 3, device=xla),
            jnp.eye(2, device=xla), jnp.asarray([1, 2], device=xla),
            jnp.array(np.ones(2), device=xla), jnp.ones(2).astype(jnp.int32, device=xla),
            jnp.from_dlpack(np.ones(2), device=xla)]
    assert all(a.backend == "xla" for a in made)
    assert made[7].tolist() == [0.0, 0.5, 1.0] and made[11].dtype == np.int32
    np.testing.assert_array_equal(np.from_dlpack(made[0]), np.zeros(2))
    assert fnad.device_get(made[2]).tolist() == [3.0, 3.0]

"""fnad.nn.initializers against jax.nn.initializers: fnad's keys are jax's, so the same
key gives jax's values (bit for bit where both draw with `uniform`, within a few ulp where
fnad's erf_inv differs from XLA's); the distributions' statistics, shapes and dtypes
without jax; fans over in/out/batch axes; orthogonality; errors.
"""
import numpy as np
import pytest
from checks import traced

import fnad
import fnad.nn.initializers as fi
from fnad.config import config

try:
    import jax
    import jax.nn.initializers as ji
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = ji = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
KEY = np.array([0, 42], np.uint32)          # jax.random.PRNGKey(42)
f32 = np.float32


def _jax_key():
    return jax.random.PRNGKey(42)


def _jax(init, shape, dtype=None):
    """jax's initializer on KEY, eagerly: jax compiles its samplers once per shape and
    dtype (the tests reuse a few shapes), where a jit of each initializer compiles anew."""
    return init(_jax_key(), shape, dtype)


def _same_aval(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    return a, b


# name -> (builder args, shape); the builders draw with uniform: jax's bits. A few shapes
# only: jax compiles each sampler once per shape and dtype (seconds each)
EXACT = {
    "uniform": ((0.5,), (4, 6)),
    "glorot_uniform": ((), (4, 6)),
    "xavier_uniform": ((), (4, 6)),
    "lecun_uniform": ((), (3, 3, 4, 6)),
    "he_uniform": ((), (4, 6)),
    "kaiming_uniform": ((-1, -2), (4, 6)),
}
# drawn with normal / truncated_normal (erf_inv): within a few ulp
CLOSE = {
    "normal": ((0.3,), (6, 4)),
    "truncated_normal": ((1.0, None, -1.0, 3.0), (4, 6)),
    "glorot_normal": ((), (4, 6)),
    "xavier_normal": ((), (4, 6)),
    "lecun_normal": ((), (3, 3, 4, 6)),
    "he_normal": ((), (4, 6)),
    "kaiming_normal": ((), (4, 6)),
    "orthogonal": ((2.0,), (6, 4)),
    "delta_orthogonal": ((), (3, 3, 4, 6)),
}


@needs_jax
@pytest.mark.parametrize("name", sorted(EXACT))
def test_uniform_based_initializers_equal_jax_bit_for_bit(name):
    args, shape = EXACT[name]
    a, b = _same_aval(getattr(fi, name)(*args)(KEY, shape),
                      _jax(getattr(ji, name)(*args), shape))
    np.testing.assert_array_max_ulp(a, b, maxulp=1)      # XLA may fuse u·(hi-lo)+lo: 1 ulp
    if name == "uniform":
        np.testing.assert_array_equal(a, b)


@needs_jax
@pytest.mark.parametrize("name", sorted(CLOSE))
def test_normal_based_initializers_match_jax(name):
    args, shape = CLOSE[name]
    a, b = _same_aval(getattr(fi, name)(*args)(KEY, shape),
                      _jax(getattr(ji, name)(*args), shape))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


@needs_jax
@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg", "fan_geo_avg"])
@pytest.mark.parametrize("distribution", ["truncated_normal", "normal", "uniform"])
def test_variance_scaling_over_axes_matches_jax(mode, distribution):
    init = fi.variance_scaling(0.7, mode, distribution, in_axis=(0, 1), out_axis=3,
                               batch_axis=2)
    jinit = ji.variance_scaling(0.7, mode, distribution, in_axis=(0, 1), out_axis=3,
                                batch_axis=2)
    a, b = _same_aval(init(KEY, (3, 3, 4, 6)), _jax(jinit, (3, 3, 4, 6)))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


@needs_jax
@pytest.mark.parametrize("name,dtype", [("glorot_uniform", np.float16),
                                        ("lecun_normal", "bfloat16"),
                                        ("glorot_uniform", np.complex64),
                                        ("lecun_normal", np.complex64),
                                        ("normal", np.complex64)])
def test_other_dtypes_match_jax(name, dtype):
    dtype = fnad.numpy.bfloat16 if dtype == "bfloat16" else dtype
    a, b = _same_aval(getattr(fi, name)()(KEY, (4, 6), dtype),
                      _jax(getattr(ji, name)(), (4, 6), dtype))
    eps = float(fnad.dtypes.finfo(np.float32 if dtype == np.complex64 else dtype).eps)
    np.testing.assert_allclose(a.astype(np.complex64), b.astype(np.complex64), rtol=0,
                               atol=8 * eps * np.abs(b.astype(np.complex64)).max())


@needs_jax
def test_float64_under_x64_matches_jax(x64):
    for name in ["he_uniform", "orthogonal"]:
        a, b = _same_aval(getattr(fi, name)()(KEY, (6, 4)),
                          _jax(getattr(ji, name)(), (6, 4)))
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# ---- without jax -----------------------------------------------------------------------------
def test_constants_shapes_and_dtypes():
    np.testing.assert_array_equal(fi.zeros(KEY, (2, 3)), np.zeros((2, 3), f32))
    np.testing.assert_array_equal(fi.ones(KEY, (4,), np.float16), np.ones(4, np.float16))
    out = fi.constant(-7.0, np.int32)(KEY, (2, 2))
    assert np.asarray(out).dtype == np.int32 and (np.asarray(out) == -7).all()
    for name in ["uniform", "normal", "truncated_normal", "glorot_uniform", "he_normal",
                 "orthogonal"]:
        init = getattr(fi, name)()
        assert isinstance(init, fi.Initializer)
        out = np.asarray(init(KEY, (3, 4)))
        assert out.shape == (3, 4) and out.dtype == np.float32
    with config.override(jax_enable_x64=True):
        assert np.asarray(fi.lecun_uniform()(KEY, (3, 4))).dtype == np.float64


def test_distribution_statistics():
    n_in, n_out = 256, 128
    shape = (n_in, n_out)                                         # 32768 samples

    def std(name, *args):
        return float(np.asarray(getattr(fi, name)(*args)(KEY, shape)).std())
    tol = 0.03                                                    # ~4 sampling sigmas
    assert abs(std("glorot_uniform") / np.sqrt(2 / (n_in + n_out)) - 1) < tol
    assert abs(std("glorot_normal") / np.sqrt(2 / (n_in + n_out)) - 1) < tol
    assert abs(std("he_normal") / np.sqrt(2 / n_in) - 1) < tol
    assert abs(std("lecun_uniform") / np.sqrt(1 / n_in) - 1) < tol
    assert abs(std("variance_scaling", 3.0, "fan_out", "normal") / np.sqrt(3 / n_out) - 1) < tol
    assert abs(std("normal", 0.5) / 0.5 - 1) < tol
    u = np.asarray(fi.uniform(2.0)(KEY, shape))
    assert u.min() >= 0 and u.max() < 2 and abs(u.mean() - 1) < tol
    bound = np.sqrt(6 / (n_in + n_out))                           # U(-bound, bound)
    g = np.asarray(fi.glorot_uniform()(KEY, shape))
    assert np.abs(g).max() <= bound and np.abs(g).max() > 0.99 * bound
    t = np.asarray(fi.he_normal()(KEY, shape))                    # truncated at 2 stds
    assert np.abs(t).max() <= 2 * np.sqrt(2 / n_in) / 0.87962566103423978 * (1 + 1e-6)
    c = np.asarray(fi.glorot_normal()(KEY, shape, np.complex64))
    assert c.dtype == np.complex64 and abs(c.std() / np.sqrt(2 / (n_in + n_out)) - 1) < tol


def test_fans_follow_in_out_and_batch_axes():
    fan_in, fan_out = fi._compute_fans((3, 3, 16, 32))           # conv kernel HWIO
    assert (fan_in, fan_out) == (3 * 3 * 16, 3 * 3 * 32)
    assert fi._compute_fans((2, 3, 4, 5), in_axis=(0, 1), out_axis=3, batch_axis=2) == (6, 5)
    w = np.asarray(fi.variance_scaling(1.0, "fan_in", "uniform", in_axis=0, out_axis=1,
                                       batch_axis=2)(KEY, (100, 7, 40)))
    assert np.abs(w).max() <= np.sqrt(3 / 100)                   # fan_in = 100


def test_orthogonal_and_delta_orthogonal():
    for shape, col in [((6, 4), -1), ((4, 6), -1), ((3, 2, 5), -1), ((5, 3, 2), 0)]:
        q = np.asarray(fi.orthogonal(scale=1.5, column_axis=col)(KEY, shape))
        assert q.shape == shape
        m = np.moveaxis(q, col, -1).reshape(-1, shape[col]) / 1.5          # [rows, cols]
        small = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(small, np.eye(len(small)), atol=2e-6)
    assert np.asarray(fi.orthogonal()(KEY, (0, 3))).shape == (0, 3)
    w = np.asarray(fi.delta_orthogonal()(KEY, (3, 5, 4, 6)))                # [H, W, I, O]
    center = w[1, 2]
    np.testing.assert_allclose(center @ center.T, np.eye(4), atol=2e-6)
    w[1, 2] = 0
    assert not w.any()


def test_initializers_under_jit_match_eager():
    f = traced(lambda k: (fi.he_normal()(k, (4, 5)), fi.orthogonal()(k, (5, 3))))
    for got, want in zip(f(KEY), (fi.he_normal()(KEY, (4, 5)), fi.orthogonal()(KEY, (5, 3)))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="Must be at least 2D or specify in_axis"):
        fi.glorot_uniform()(KEY, (5,))
    with pytest.raises(ValueError, match="invalid mode for variance scaling"):
        fi.variance_scaling(1.0, "fan_max", "normal")(KEY, (2, 2))
    with pytest.raises(ValueError, match="invalid distribution for variance scaling"):
        fi.variance_scaling(1.0, "fan_in", "cauchy")(KEY, (2, 2))
    with pytest.raises(ValueError, match="at least a 2D shape"):
        fi.orthogonal()(KEY, (4,))
    with pytest.raises(ValueError, match="requires a 3D, 4D or 5D shape"):
        fi.delta_orthogonal()(KEY, (4, 4))
    with pytest.raises(ValueError, match="`fan_in` must be less or equal than `fan_out`"):
        fi.delta_orthogonal()(KEY, (3, 6, 4))
    with pytest.raises(NotImplementedError, match="only real floating dtypes"):
        fi.orthogonal()(KEY, (3, 3), np.complex64)


def test_reachable_as_jax_spells_it():
    from fnad.nn.initializers import lecun_normal
    import fnad.nn
    assert fnad.nn.initializers is fi and lecun_normal is fi.lecun_normal

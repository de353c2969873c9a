"""The narrow floats of ml_dtypes (float8_*, float6_*, float4_e2m1fn) against jax.

Every case runs in jax (jit) and in fnad eagerly and under jit on the numba and xla
backends: the same dtype and shape, and values within one step of the narrow type (each
operation rounds its float32 result to the type, as XLA does; a sum may round at other
points). Promotion itself is tested pair by pair in test_dtypes.py.
"""
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax is the oracle for the narrow float types")
jnp = jax.numpy

DTYPES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e3m4", "float8_e4m3fnuz"]
NO_INF = {"float8_e4m3fn", "float8_e4m3fnuz"}        # -inf and inf convert to NaN
DATA = np.array([0.0, -0.0, 0.3, -1.5, 2.0, 7.0, 100.0, -300.0, np.nan, np.inf, -np.inf, 1e-3],
                np.float32)


def _lib(n):
    return jax if n is jnp else fnad


CASES = {
    "astype_f32": lambda n, x: x.astype(n.float32),
    "astype_i32": lambda n, x: x.astype(n.int32),
    "astype_bool": lambda n, x: x.astype(n.bool_),
    "to_bf16": lambda n, x: x.astype(n.bfloat16),
    "to_e5m2": lambda n, x: x.astype(n.float8_e5m2),
    "add": lambda n, x: x + x,
    "sub_scalar": lambda n, x: x - 1.0,
    "mul_int": lambda n, x: x * 2,
    "div": lambda n, x: x / 3,
    "with_int8": lambda n, x: x + n.int8(3),
    "neg_abs": lambda n, x: n.abs(-x),
    "exp_log": lambda n, x: n.log(n.exp(x) + 1),
    "sqrt_tanh": lambda n, x: n.tanh(n.sqrt(x)),
    "maximum": lambda n, x: n.maximum(x, x[::-1]),
    "compare": lambda n, x: (x < x[::-1]) | (x == 2),
    "where": lambda n, x: n.where(x > 0, x, x * 0),
    "isnan_isinf": lambda n, x: n.isnan(x) | n.isinf(x),
    "sum": lambda n, x: n.sum(n.where(n.isfinite(x), x, 0)),
    "mean_keepdims": lambda n, x: n.mean(x[2:8].reshape(2, 3), axis=1, keepdims=True),
    "max_argmax": lambda n, x: (n.max(x[:8]), n.argmax(x[:8])),
    "matmul": lambda n, x: x[:4].reshape(2, 2) @ x[4:8].reshape(2, 2),
    "dot_f32": lambda n, x: _lib(n).lax.dot(x[:4].reshape(2, 2), x[4:8].reshape(2, 2),
                                            preferred_element_type=n.float32),
    "cumsum": lambda n, x: n.cumsum(x[2:8]),
    "softmax": lambda n, x: _lib(n).nn.softmax(x[2:8]),
    "grad": lambda n, x: _lib(n).grad(lambda y: n.sum(y * y).astype(n.float32))(x[2:8]),
    "vmap": lambda n, x: _lib(n).vmap(lambda y: y * 2 + 1)(x.reshape(3, 4)),
    "creation": lambda n, x: (n.zeros(3, x.dtype), n.full(2, 1.5, x.dtype),
                              n.arange(4, dtype=x.dtype)),
    "finfo": lambda n, x: n.asarray([float(n.finfo(x.dtype).max),
                                     float(n.finfo(x.dtype).eps)]),
    "uniform": lambda n, x: _lib(n).random.uniform(_lib(n).random.key(0), (5,), x.dtype),
    "normal": lambda n, x: _lib(n).random.normal(_lib(n).random.key(1), (5,), x.dtype),
}


def _check(got, want, where):
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _check(g, w, where)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), where
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=where)
    np.testing.assert_allclose(g[~np.isnan(g)], w[~np.isnan(w)], rtol=0.13, err_msg=where)


@pytest.mark.parametrize("case", sorted(CASES))
def test_narrow_floats_match_jax(case):
    fn = CASES[case]
    for dt in DTYPES:
        if case == "softmax" and dt in NO_INF:
            continue          # its -inf start is NaN there; XLA's max then drops the NaN
        want = jax.jit(lambda x, dt=dt: fn(jnp, x))(jnp.asarray(DATA).astype(dt))
        x = fnp.asarray(DATA).astype(dt)
        _check(fn(fnp, x), want, f"{case} {dt} eager")
        for backend in ("numba", "xla"):
            got = fnad.jit(lambda x: fn(fnp, x), backend=backend)(x)
            _check(got, want, f"{case} {dt} jit on {backend}")


def test_narrow_float_conversions_go_through_float32_where_numpy_has_no_cast():
    x = fnp.asarray(np.array([0.25, 1, 4, 300, np.nan], np.float32))
    got = x.astype(fnp.float8_e8m0fnu).astype(fnp.float8_e5m2)    # no direct ml_dtypes cast
    want = jnp.asarray(np.asarray(x)).astype(jnp.float8_e8m0fnu).astype(jnp.float8_e5m2)
    _check(got, want, "e8m0fnu -> e5m2")


def test_narrow_types_refused_or_kept_apart():
    with pytest.raises(TypeError, match="not the 4-, 2- and 1-bit integers"):
        fnp.ones(3, fnp.int4)
    with pytest.raises(fnad.dtypes.TypePromotionError, match="narrow types"):
        fnp.ones(2, fnp.float8_e4m3fn) + fnp.ones(2, fnp.float16)
    with pytest.raises(TypeError, match="8-, 16-, 32-, or 64-bit"):
        fnad.random.uniform(fnad.random.key(0), (2,), fnp.float4_e2m1fn)
    assert fnp.promote_types(fnp.int4, int) == jnp.promote_types(jnp.int4, int)
    assert fnp.issubdtype(fnp.float8_e4m3fn, fnp.floating)
    assert fnad.dtypes.is_inexact(fnp.float8_e5m2)          # differentiable, as in jax

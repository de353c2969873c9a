"""fnad.numpy against jax.numpy: regression tests for mismatches found by differential
testing (values, dtypes, weak types and errors compared with jax at test time)."""
import numpy as np
import pytest

import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax is the oracle for these comparisons")
jnp = pytest.importorskip("jax.numpy", reason="jax is the oracle for these comparisons")


def _both(fn):
    """fn(jnp) and fn(fnp); or the two exception types if jax raises."""
    try:
        want = fn(jnp)
    except Exception as err:  # noqa: BLE001 - any error jax raises, fnad must raise too
        with pytest.raises(Exception) as info:  # noqa: PT011
            fn(fnp)
        return type(err), info.type
    return want, fn(fnp)


def _assert_same(want, got, rtol=1e-6, atol=1e-6):
    """Same dtype, shape, weak type and values (NaNs equal) for each output."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for w, g in zip(want, got, strict=True):
            _assert_same(w, g, rtol, atol)
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert bool(got.weak_type) == bool(want.weak_type), "weak_type"
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# ---- Python ints wrap into narrower integer dtypes; beyond int32 they overflow, as JAX ----
@pytest.mark.parametrize("dtype, op", [(d, o) for d in ["uint8", "int8", "uint32", "float16"]
                                       for o in ["add", "bitwise_and", "fmax", "multiply"]
                                       if not (o == "bitwise_and" and d == "float16")])
@pytest.mark.parametrize("value", [300, -2, 2**31, -(2**31) - 1])
def test_python_int_operands_wrap_or_overflow_as_jax(dtype, value, op):
    x = np.array([0, 1, 100], dtype)
    want, got = _both(lambda m: getattr(m, op)(m.asarray(x), value))
    if isinstance(want, type):
        assert want is OverflowError and issubclass(got, OverflowError)
    else:
        _assert_same(want, got)


def test_float32_plus_huge_python_int_overflows_as_jax():
    x = fnp.ones(2)
    with pytest.raises(OverflowError, match="2199023255552"):
        x + 2**41
    assert (fnp.asarray(np.array([1], np.uint8)) - 2)[0] == 255


# ---- complex logaddexp keeps its phase in [-pi, pi] ----------------------------------------
@pytest.mark.parametrize("op", ["logaddexp", "logaddexp2"])
def test_complex_logaddexp_wraps_the_phase(op):
    x = np.array([1 + 2j, 0.5 - 3j, -2 + 0.1j, 3 + 3j], np.complex64)
    y = np.array([3 - 1j, 0.2 + 1j, 4 + 5j, -1 - 3j], np.complex64)
    want, got = _both(lambda m: getattr(m, op)(m.asarray(x), m.asarray(y)))
    _assert_same(want, got, rtol=1e-5)
    want, got = _both(lambda m: getattr(m, op)(m.asarray(np.arange(3, dtype=np.int8)), 1j))
    _assert_same(want, got, rtol=1e-5)     # strong complex64, as JAX


# ---- weak types of results built with constants ----------------------------------------------
@pytest.mark.parametrize("case", [
    lambda m: m.hypot(3.0, m.arange(3)),
    lambda m: m.hypot(3.0, 4.0),                   # weak only from weak arguments
])
def test_weak_type_of_composite_results(case):
    _assert_same(*_both(case))


# ---- reductions -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["uint8", "int8", "bool", "int32", "float16"])
@pytest.mark.parametrize("op", ["cumulative_sum", "cumulative_prod", "cumsum", "cumprod"])
def test_cumulative_dtypes(dtype, op):
    x = np.array([[1, 0, 2], [3, 1, 1]], dtype)
    _assert_same(*_both(lambda m: getattr(m, op)(m.asarray(x), axis=1)))


# ---- pad modes that compute values -------------------------------------------------------------
_PAD_X = (np.arange(24, dtype=np.int32).reshape(2, 3, 4) * 7) % 11


@pytest.mark.parametrize(("mode", "kwargs"), [
    ("maximum", {}), ("minimum", {"stat_length": 2}), ("mean", {"stat_length": (1, 3)}),
    ("median", {"stat_length": ((1, 2), (2, 1), (3, 4))}), ("mean", {}),
    ("linear_ramp", {}), ("linear_ramp", {"end_values": (-4, 2)}),
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"}),
])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_pad_modes_as_jax(mode, kwargs, dtype):
    x = _PAD_X.astype(dtype)
    pad_width = ((1, 2), (3, 0), (6, 2))      # longer than an axis: reflections repeat
    # An integer ramp is a float ramp floored: XLA's fused float32 ramp can be 1 ulp off
    # fnad's, which the floor turns into 1.
    atol = 1 if (mode, dtype) == ("linear_ramp", "int32") else 1e-6
    _assert_same(*_both(lambda m: m.pad(m.asarray(x), pad_width, mode=mode, **kwargs)),
                 rtol=1e-6, atol=atol)


def test_pad_with_a_function_and_errors():
    def fill(vector, pad_width, axis, kwargs):
        return vector.at[:pad_width[0]].set(kwargs["value"] + axis)

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    _assert_same(*_both(lambda m: m.pad(m.asarray(x), 2, mode=fill, value=7)))
    with pytest.raises(ValueError, match="end_values"):
        fnp.pad(fnp.asarray(x), 1, mode="mean", end_values=2)
    with pytest.raises(ValueError, match="stat_length must be positive"):
        fnp.pad(fnp.asarray(x), 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match="reflect_type"):
        fnp.pad(fnp.asarray(x), 1, mode="reflect", reflect_type="twice")
    with pytest.raises(NotImplementedError, match="'bogus'"):
        fnp.pad(fnp.asarray(x), 1, mode="bogus")
    with pytest.raises(ValueError, match="unsupported shape"):
        fnp.pad(fnp.asarray(x), 1, mode="linear_ramp", end_values=((1, 2, 3),) * 2)


# ---- x.at[idx].apply ---------------------------------------------------------------------------
@pytest.mark.parametrize(("index", "mode"), [
    (np.array([0, 0, 2, -1]), None),          # a repeated index applies func twice, as JAX
    (np.array([0, 0, 7]), "drop"),
    (np.array([0, 0, 7]), "clip"),
    (slice(1, 3), None),
    ((np.array([1, 1]), np.array([2, 2])), None),
])
def test_at_apply_as_jax(index, mode):
    x = np.arange(15, dtype=np.float32).reshape(5, 3)[:, 0] if not isinstance(index, tuple) \
        else np.arange(15, dtype=np.float32).reshape(5, 3)
    _assert_same(*_both(lambda m: m.asarray(x).at[index].apply(lambda t: t * 2 + 1, mode=mode)))


def test_at_apply_traced_and_differentiated():
    import fnad
    f = fnad.jit(lambda x, i: x.at[i].apply(lambda t: t + 1))
    np.testing.assert_array_equal(f(fnp.arange(4.0), fnp.asarray([1, 1, 1, 3])), [0, 4, 2, 4])
    g = fnad.grad(lambda x: x.at[np.array([1, 1])].apply(fnp.sin).sum())(fnp.arange(3.0))
    np.testing.assert_allclose(g, [1, np.cos(np.sin(1.0)) * np.cos(1.0), 1], rtol=1e-6)


# ---- creation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [
    lambda m: m.linspace(1 + 1j, 10 + 10j, 4, dtype="float32"),     # the real parts
    lambda m: m.logspace(1 + 1j, 3 + 2j, 3, dtype="float32"),
    lambda m: m.geomspace(1 + 0j, 100 + 0j, 3, dtype="float32"),
    lambda m: m.full((2,), 2**31, dtype="float32"),                  # converted, not overflow
    lambda m: m.full((2,), 2**31 + 5, dtype="uint32"),
    lambda m: m.full_like(m.zeros(2, "uint32"), 2**31),
])
def test_creation_conversions_as_jax(case):
    _assert_same(*_both(case))


def test_arange_refuses_complex_as_jax():
    with pytest.raises(ValueError, match="complex"):
        fnp.arange(0, 1 + 0j, 0.25)
    with pytest.raises(ValueError):
        jnp.arange(0, 1 + 0j, 0.25)


# ---- einsum's interleaved operand/sublist form -------------------------------------------------
@pytest.mark.parametrize("args", [
    lambda a, b: (a, [0, 1, 2], b, [2, 1], [0]),
    lambda a, b: (a, [Ellipsis, 2], b, [2, 1]),
    lambda a, b: (a, [0, 1, 2]),
])
def test_einsum_sublists(args):
    a = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(12, dtype=np.int32).reshape(4, 3)
    _assert_same(*_both(lambda m: m.einsum(*args(m.asarray(a), m.asarray(b)))))
    with pytest.raises(TypeError, match="sublist"):
        fnp.einsum(fnp.asarray(a), [0, 1, "k"])


@pytest.mark.parametrize("case", [
    lambda m: m.var(m.arange(5.0), dtype="int32"),          # a weak float, as JAX
    lambda m: m.var(m.arange(5.0), dtype="int32", ddof=5),
    lambda m: m.var(m.arange(5), dtype="float16", ddof=7),
    lambda m: m.var(m.arange(4) + 0j),
])
def test_var_dtypes_as_jax(case):
    _assert_same(*_both(case))


def test_std_refuses_an_integer_dtype():
    with pytest.raises(ValueError, match="must be inexact; got int32"):
        fnp.std(fnp.arange(5.0), dtype="int32")


@pytest.mark.parametrize("case", [
    lambda m: m.nansum(m.arange(6).reshape(2, 3), axis=0, initial=-1.5),   # int32, as JAX
    lambda m: m.nansum(m.asarray([True, False]), initial=-1.5),
    lambda m: m.nanprod(m.asarray([[1.0, np.nan], [3.0, 2.0]]), axis=1, initial=3,
                        where=m.asarray([[True, False], [True, True]])),
    lambda m: m.nanmax(m.asarray([1.0, np.nan, 3.0]), initial=2.0,
                       where=m.asarray([True, True, False])),
    lambda m: m.nanmax(m.arange(6).reshape(2, 3), axis=1, initial=-1.5),   # int32
    lambda m: m.nanmin(m.asarray([True, False]), initial=5),                # bool
    lambda m: m.nanmax(m.asarray([[1.0, np.nan], [np.nan, np.nan]]), axis=1, initial=2.0),
    lambda m: m.nanmin(m.zeros((0, 3)), axis=0, initial=1.0),
])
def test_nan_reductions_initial_as_jax(case):
    _assert_same(*_both(case))


def test_nanmax_where_needs_initial():
    with pytest.raises(ValueError, match="initial"):
        fnp.nanmax(fnp.arange(3.0), where=fnp.asarray([True, False, True]))


# ---- gcd at the most negative integer (jax's gcd loops forever there: NumPy is the oracle) --
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
def test_gcd_lcm_over_the_whole_integer_range(dtype):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 200, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 200, endpoint=True).astype(dtype)
    a[:3], b[:3] = [info.min, 0, info.min], [6, info.min, info.min]
    np.testing.assert_array_equal(fnp.gcd(a, b), np.gcd(a, b))
    np.testing.assert_array_equal(fnp.lcm(a % 50, b % 50), np.lcm(a % 50, b % 50))


# ---- lists are refused where jax.numpy refuses them -------------------------------------------
@pytest.mark.parametrize("name", ["sort", "unique", "take", "diff"])
def test_list_arguments_are_a_type_error(name):
    call = {"take": lambda m: m.take([1, 2], 0)}.get(name, lambda m: getattr(m, name)([3, 1]))
    with pytest.raises(TypeError):
        call(jnp)
    with pytest.raises(TypeError, match=f"{name} requires ndarray or scalar arguments"):
        call(fnp)


# ---- unary functions of a Python bool --------------------------------------------------------
@pytest.mark.parametrize("name", ["log2", "log10", "deg2rad", "rad2deg", "sinc", "square"])
def test_unary_of_a_python_bool(name):
    _assert_same(*_both(lambda m: getattr(m, name)(True)), rtol=1e-6)


def test_fabs_refuses_complex():
    with pytest.raises(TypeError, match="complex"):
        fnp.fabs(fnp.asarray([1j]))


@pytest.mark.parametrize("name", ["log2", "log10"])
def test_complex_log2_log10_are_strong(name):
    _assert_same(*_both(lambda m: getattr(m, name)(1j)), rtol=1e-6)

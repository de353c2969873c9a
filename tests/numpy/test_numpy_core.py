"""fnad.numpy against jax.numpy (values, dtypes, weak types; x64 off and on) and NumPy.

Each table row names a function and its arguments as *specs* (a NumPy array, a Python
scalar, or `W(value)` for a weakly typed 0-d array); the same specs become fnad and jax
inputs. JAX tests skip with "jax not installed" where it is missing; the NumPy checks run
everywhere.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fnad
import fnad.numpy as fnp
from fnad.config import config

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)


class W:
    """A weakly typed 0-d array: fnp.asarray(value) / jnp.asarray(value)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"W({self.value!r})"


def to_fnad(spec):
    if isinstance(spec, W):
        return fnp.asarray(spec.value)
    if isinstance(spec, np.ndarray):
        return fnp.asarray(spec)
    return spec


def to_jax(spec):
    if isinstance(spec, W):
        return jnp.asarray(spec.value)
    if isinstance(spec, np.ndarray):
        return jnp.asarray(spec)
    return spec


def arr(shape=(3, 4), dtype=np.float32, lo=-2.0, hi=2.0):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if dtype.kind in "iu":
        lo, hi = (0, 6) if dtype.kind == "u" else (-5, 6)
        return RNG.integers(lo, hi, shape).astype(dtype)
    if dtype.kind == "c":
        return (RNG.uniform(lo, hi, shape) + 1j * RNG.uniform(lo, hi, shape)).astype(dtype)
    return RNG.uniform(lo, hi, shape).astype(dtype)


@pytest.fixture(autouse=True)
def _seed(request):
    """Inputs drawn inside a test depend only on the test, not on which ran before."""
    RNG.bit_generator.state = np.random.default_rng(
        abs(hash(request.node.nodeid)) % 2**32).bit_generator.state


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    """Run with jax_enable_x64 off and on, in fnad and (where installed) jax."""
    prev = jax.config.jax_enable_x64 if jax is not None else None
    with config.override(jax_enable_x64=bool(request.param)):
        if jax is not None:
            jax.config.update("jax_enable_x64", bool(request.param))
        try:
            yield request.param
        finally:
            if jax is not None:
                jax.config.update("jax_enable_x64", prev)


def _tol(dtype):
    dtype = np.dtype(dtype)
    if dtype in (np.dtype(np.float16), BF16, np.dtype(np.complex64)) or dtype.itemsize <= 2:
        return 2e-2
    if dtype in (np.dtype(np.float64), np.dtype(np.complex128)):
        return 1e-10
    return 2e-5


def assert_matches_jax(out_f, out_j, check_weak=True, rtol=None):
    """Same shape, dtype, weak type (not checked for bool: JAX keeps a weak bool flag that
    its promotion then ignores) and values."""
    if isinstance(out_j, (tuple, list)):
        assert isinstance(out_f, (tuple, list)) and len(out_f) == len(out_j)
        for f, j in zip(out_f, out_j, strict=True):
            assert_matches_jax(f, j, check_weak, rtol)
        return
    assert isinstance(out_f, (fnad.Array, fnad.core.Tracer)), type(out_f)
    assert out_f.shape == out_j.shape, (out_f.shape, out_j.shape)
    assert np.dtype(out_f.dtype) == np.dtype(out_j.dtype), (out_f.dtype, out_j.dtype)
    if check_weak and out_j.dtype != np.bool_:
        assert out_f.weak_type == out_j.weak_type, ("weak_type", out_f.weak_type,
                                                     out_j.weak_type)
    f, j = np.asarray(out_f), np.asarray(out_j)
    if f.dtype == BF16:
        f, j = f.astype(np.float32), j.astype(np.float32)
    if f.dtype.kind in "fc":
        tol = _tol(out_j.dtype) if rtol is None else rtol
        np.testing.assert_allclose(f, j, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(f, j)


def run_both(name, specs, kwargs=None, fnad_fn=None, jax_fn=None):
    kwargs = kwargs or {}
    fn_f = fnad_fn or getattr(fnp, name)
    fn_j = jax_fn or getattr(jnp, name)
    out_f = fn_f(*map(to_fnad, specs), **kwargs)
    with jax.disable_jit():      # op by op: compiles each lax op once, not each jnp function
        out_j = fn_j(*map(to_jax, specs), **kwargs)
    return out_f, out_j


# ---- elementwise: unary ------------------------------------------------------------------
UNARY_DOMAIN = {
    "sqrt": (0.1, 3), "log": (0.1, 3), "log2": (0.1, 3), "log10": (0.1, 3),
    "log1p": (-0.5, 3), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9), "arctanh": (-0.9, 0.9),
    "arccosh": (1.1, 3), "reciprocal": (0.5, 2), "cbrt": (-3, 3),
}
UNARY = ["sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
         "arccosh", "arctanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
         "cbrt", "square", "reciprocal", "negative", "positive", "abs", "absolute", "fabs",
         "sign", "floor", "ceil", "trunc", "rint", "round", "around", "deg2rad", "rad2deg",
         "radians", "degrees", "sinc", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
         "signbit", "real", "imag", "conj", "conjugate", "angle", "nan_to_num", "logical_not"]
NO_BOOL = {"negative", "sign", "cbrt", "signbit", "square", "positive", "abs", "absolute",
           "round", "around"}
NO_INT = {"cbrt"}


# Every input kind with x64 off; with x64 on, the kinds whose results x64 changes. (JAX
# compiles each new op/dtype/shape, which dominates these tests' time.)
UNARY_KINDS = [(False, k) for k in ("f32", "i32", "weak_float", "py_float", "py_int", "f16",
                                    "bool", "u8", "bf16")]
UNARY_KINDS += [(True, k) for k in ("f32", "i32", "weak_float", "py_int")]


def _unary_defined(name, kind):
    """Integer kinds for functions undefined on integers, bools where NumPy refuses them."""
    if kind in ("i32", "py_int", "bool", "u8") and name in NO_INT | {"arccosh"}:
        return False
    return not (kind == "bool" and name in NO_BOOL)


UNARY_CASES = [pytest.param(x64, name, kind, id=f"{name}-{'x64' if x64 else 'x32'}-{kind}")
               for name in UNARY for x64, kind in UNARY_KINDS if _unary_defined(name, kind)]


@needs_jax
@pytest.mark.parametrize("x64, name, kind", UNARY_CASES, indirect=["x64"])
def test_unary_matches_jax(x64, name, kind):
    lo, hi = UNARY_DOMAIN.get(name, (-2, 2))
    spec = {
        "f32": arr((5,), np.float32, lo, hi),
        "f16": arr((5,), np.float16, lo, hi),
        "bf16": arr((5,), BF16, lo, hi),
        "i32": np.array([1, 2, 3, 1, 2], np.int32) if lo > 0 else arr((5,), np.int32),
        "u8": np.array([1, 2, 3, 1, 2], np.uint8),
        "bool": np.array([True, False, True, True, False]),
        "weak_float": W(float(np.float32((lo + hi) / 2 + 0.1))),
        "py_float": float(np.float32((lo + hi) / 2 + 0.1)),
        "py_int": 2 if hi > 1.5 else 1,
    }[kind]
    if name in ("arccosh",) and kind != "f32" and not isinstance(spec, np.ndarray):
        spec = 1.5 if kind == "py_float" else W(1.5)
    if name in ("arcsin", "arccos", "arctanh") and kind in ("py_int", "i32", "u8"):
        spec = 0 if kind == "py_int" else np.zeros(5, {"i32": "int32", "u8": "uint8"}[kind])
    out_f, out_j = run_both(name, [spec])
    assert_matches_jax(out_f, out_j, rtol=5e-2 if kind in ("f16", "bf16") else None)


@needs_jax
@pytest.mark.parametrize("name", ["sin", "exp", "abs", "sqrt", "log", "sign", "angle", "real",
                                  "imag", "conj", "isfinite", "isnan", "square", "rint", "round",
                                  "negative", "isinf", "nan_to_num", "arccosh", "log10", "log2"])
def test_unary_complex_matches_jax(x64, name):
    out_f, out_j = run_both(name, [arr((4,), np.complex64, 0.5, 2)])
    assert_matches_jax(out_f, out_j, rtol=1e-4)


@needs_jax
def test_special_values_match_jax(x64):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -2.5, 2.5, 0.5, -0.5], np.float32)
    for name in ["signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "sinc",
                 "nan_to_num", "sign", "rint", "round", "floor", "ceil", "trunc", "abs"]:
        out_f, out_j = run_both(name, [x])
        assert_matches_jax(out_f, out_j)
    out_f, out_j = run_both("nan_to_num", [x], dict(nan=1.0, posinf=2.0, neginf=-3.0))
    assert_matches_jax(out_f, out_j)


# ---- elementwise: binary ------------------------------------------------------------------
BINARY_ALL = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less",
              "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
              "logical_xor"]
BINARY_NUMERIC = ["true_divide", "divide", "floor_divide", "remainder", "mod", "fmod", "power",
                  "float_power", "arctan2", "hypot", "logaddexp", "logaddexp2", "copysign",
                  "heaviside", "fmax", "fmin", "isclose"]
BINARY_INT = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]

PAIRS = {
    "f32,f32": (lambda: arr((5,)), lambda: arr((5,))),
    "f32,py_float": (lambda: arr((5,)), lambda: 1.5),
    "f32,py_int": (lambda: arr((5,)), lambda: 2),
    "py_float,f32": (lambda: -0.75, lambda: arr((5,))),
    "i32,py_int": (lambda: arr((5,), np.int32), lambda: 3),
    "i32,f32": (lambda: arr((5,), np.int32), lambda: arr((5,))),
    "u8,i8": (lambda: arr((5,), np.uint8), lambda: arr((5,), np.int8)),
    "u8,py_int": (lambda: arr((5,), np.uint8), lambda: 3),
    "bool,i32": (lambda: arr((5,), np.bool_), lambda: arr((5,), np.int32)),
    "bool,bool": (lambda: arr((5,), np.bool_), lambda: arr((5,), np.bool_)),
    "f16,py_float": (lambda: arr((5,), np.float16), lambda: 0.5),
    "bf16,f32": (lambda: arr((5,), BF16), lambda: arr((5,))),
    "weak,i32": (lambda: W(1.5), lambda: arr((5,), np.int32)),
    "weak,weak": (lambda: W(2.0), lambda: W(0.75)),
    "weak_int,u8": (lambda: W(3), lambda: arr((5,), np.uint8)),
    "py,py": (lambda: 2.5, lambda: 1.5),
    "bcast": (lambda: arr((2, 1)), lambda: arr((1, 5))),
    "bcast_rank": (lambda: arr((2, 5)), lambda: arr((5,))),
    "scalar_arr,arr": (lambda: arr(()), lambda: arr((5,))),
    "i32,i32": (lambda: arr((5,), np.int32), lambda: np.array([1, 2, -3, 4, -1], np.int32)),
    "f64,f32": (lambda: arr((5,), np.float64), lambda: arr((5,))),
    "c64,f32": (lambda: arr((5,), np.complex64), lambda: arr((5,))),
}
INT_PAIRS = {"i32,py_int", "u8,i8", "u8,py_int", "bool,i32", "bool,bool", "weak_int,u8", "i32,i32"}


def _binary_defined(name, pair):
    """Whether NumPy and JAX define `name` on the operand kinds of `pair`."""
    kinds = pair.split(",")
    if name in BINARY_INT and pair not in INT_PAIRS:
        return False                                  # bitwise ops need integers
    if name in ("left_shift", "right_shift") and "bool" in pair:
        return False                                  # shifts need integers
    if name == "subtract" and pair == "bool,bool":
        return False                                  # numpy refuses boolean subtract
    if "c64" in kinds and name in ("maximum", "minimum", "floor_divide", "remainder", "mod",
                                   "fmod", "arctan2", "hypot", "copysign", "heaviside",
                                   "fmax", "fmin", "logaddexp", "logaddexp2", "less",
                                   "less_equal", "greater", "greater_equal"):
        return False                                  # not defined for complex
    # negative integer powers of integers are undefined
    return not (name == "power" and pair in ("i32,i32", "bool,i32", "u8,i8"))


BINARY_CASES = [(False, p) for p in PAIRS]
BINARY_CASES += [(True, p) for p in ("f32,f32", "i32,py_int", "weak,i32", "py,py", "f64,f32",
                                     "u8,i8", "bool,i32")]


BINARY_PARAMS = [pytest.param(x64, name, pair, id=f"{name}-{'x64' if x64 else 'x32'}-{pair}")
                 for name in BINARY_ALL + BINARY_NUMERIC + BINARY_INT
                 for x64, pair in BINARY_CASES if _binary_defined(name, pair)]


@needs_jax
@pytest.mark.parametrize("x64, name, pair", BINARY_PARAMS, indirect=["x64"])
def test_binary_matches_jax(x64, name, pair):
    a, b = (make() for make in PAIRS[pair])
    if name in ("power", "float_power") and isinstance(a, np.ndarray) and a.dtype.kind == "f":
        a = np.abs(a) + np.asarray(0.5, a.dtype)    # real powers of negative bases are nan
    if name in ("floor_divide", "remainder", "mod", "fmod", "true_divide", "divide") \
            and isinstance(b, np.ndarray) and b.dtype.kind in "iub":
        b = np.where(b == 0, np.ones_like(b), b)
    if name in ("left_shift", "right_shift") and isinstance(b, np.ndarray):
        b = np.abs(b) % 5
    out_f, out_j = run_both(name, [a, b])
    rtol = 5e-2 if ("f16" in pair or "bf16" in pair) else None
    # JAX's hypot/logaddexp2 build constants that are strong for weak non-0-d inputs (here
    # the weak scalar broadcast against an array) but weak for 0-d ones; fnad keeps weak.
    check_weak = not (pair == "weak,i32" and name in ("hypot", "logaddexp2"))
    assert_matches_jax(out_f, out_j, check_weak=check_weak, rtol=rtol)


@needs_jax
@pytest.mark.parametrize("pair", ["f32,f32", "f32,py_int", "i32,py_int", "py,py", "weak,i32"])
def test_divmod_and_int_power_match_jax(x64, pair):
    a, b = (make() for make in PAIRS[pair])
    assert_matches_jax(*run_both("divmod", [a, b]))
    for n in (0, 1, 2, 3, 5):
        assert_matches_jax(*run_both("power", [a, n]))
    base = np.array([-3, -2, 0, 1, 2, 3], np.int32)
    expo = np.array([0, 1, 2, 3, 4, 5], np.int32)
    assert_matches_jax(*run_both("power", [base, expo]))
    assert_matches_jax(*run_both("power", [arr((4,), np.float32, 0.5, 2), np.arange(4)]))


def test_floor_divide_and_remainder_follow_numpy_signs():
    a = np.array([7, -7, 7, -7, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -5], np.int32)
    np.testing.assert_array_equal(fnp.floor_divide(a, b), np.floor_divide(a, b))
    np.testing.assert_array_equal(fnp.remainder(a, b), np.remainder(a, b))
    np.testing.assert_array_equal(fnp.fmod(a, b), np.fmod(a, b))
    af, bf = a.astype(np.float32) + 0.5, b.astype(np.float32)
    np.testing.assert_allclose(fnp.floor_divide(af, bf), np.floor_divide(af, bf))
    np.testing.assert_allclose(fnp.remainder(af, bf), np.remainder(af, bf), rtol=1e-6)
    np.testing.assert_allclose(fnp.mod(af, bf), np.mod(af, bf), rtol=1e-6)
    assert (fnp.asarray(a) // b).tolist() == (a // b).tolist()
    assert (fnp.asarray(a) % b).tolist() == (a % b).tolist()


@needs_jax
@pytest.mark.parametrize("case", [
    ("where", [arr((3, 4), np.bool_), arr((3, 4)), arr((3, 4))]),
    ("where", [arr((3, 1), np.bool_), 1.0, arr((4,))]),
    ("where", [True, 1.0, 2.0]),
    ("where", [arr((4,), np.int32), W(1.0), np.arange(4)]),
    ("where", [arr((2, 3), np.bool_), arr((3,), np.int8), arr((2, 3), np.uint8)]),
    ("clip", [arr((3, 4)), -0.5, 0.5]),
    ("clip", [arr((5,), np.int32), 0, None]),
    ("clip", [W(2.0), 0, 1]),
    ("clip", [arr((5,)), None, arr((5,))]),
    ("isclose", [np.array([1.0, np.nan, np.inf, 1.0 + 1e-6], np.float32),
                 np.array([1.0, np.nan, np.inf, 1.0], np.float32)]),
    ("allclose", [arr((3,)), arr((3,))]),
    ("array_equal", [np.arange(3), np.arange(3)]),
    ("array_equal", [np.arange(3), np.arange(4)]),
    ("logical_not", [arr((4,), np.int32)]),
    ("invert", [arr((4,), np.int8)]),
    ("bitwise_not", [arr((4,), np.bool_)]),
    ("round", [arr((6,), np.float32, -50, 50), 1]),
    ("round", [arr((6,), np.float32, -50, 50), -1]),
    ("round", [arr((6,), np.float16, -5, 5), 2]),
    ("round", [arr((6,), np.int32), 0]),
])
def test_misc_elementwise_match_jax(x64, case):
    name, specs = case
    assert_matches_jax(*run_both(name, specs))


@needs_jax
def test_clip_keyword_forms():
    x = arr((6,))
    assert_matches_jax(fnp.clip(fnp.asarray(x), min=-0.5, max=0.2),
                       jnp.clip(jnp.asarray(x), min=-0.5, max=0.2))
    np.testing.assert_allclose(fnp.clip(x, a_min=-0.5, a_max=0.2), np.clip(x, -0.5, 0.2))
    with pytest.raises(TypeError, match="min= or a_min="):
        fnp.clip(x, min=0.0, a_min=0.0)


def test_where_one_argument_is_nonzero_and_needs_a_size_under_a_trace():
    c = np.array([[True, False], [False, True]])
    for got, want in zip(fnp.where(c), np.where(c), strict=True):
        np.testing.assert_array_equal(got, want)
    got = fnad.make_jaxpr(lambda v: fnp.where(v, size=3, fill_value=-1))(c)
    assert str(got)
    with pytest.raises(Exception, match="size"):
        fnad.make_jaxpr(lambda v: fnp.where(v))(c)


# ---- promotion and broadcasting edge cases --------------------------------------------------
@pytest.mark.parametrize("a, b, dtype, weak", [
    (np.ones(2, np.float16), 2.0, np.float16, False),
    (np.ones(2, np.uint8), np.ones(2, np.int8), np.int16, False),
    (np.ones(2, np.uint8), 3, np.uint8, False),
    (np.ones(2, np.bool_), 2, np.int32, True),                # bool meets a weak int
    (np.ones(2, np.bool_), np.ones(2, np.bool_), np.bool_, False),
    (np.ones(2, np.int32), 2.0, np.float32, True),            # the weak float wins
    (W(1.0), np.ones(2, np.int32), np.float32, True),
    (W(1.0), W(2), np.float32, True),
    (1, 2, np.int32, True),
    (np.ones(2, ml_dtypes.bfloat16), np.ones(2, np.float16), np.float32, False),
    (np.ones(2, np.float64), 1.0, np.float32, False),
])
def test_promotion_table(a, b, dtype, weak):
    out = fnp.add(to_fnad(a), to_fnad(b))
    assert out.dtype == np.dtype(dtype)
    assert out.weak_type == weak


def test_promote_helpers_keep_python_scalars_as_literals():
    from fnad.numpy._core import promote_args, promote_args_inexact, promote_dtypes
    x = fnp.ones((2, 3))
    _, s = promote_dtypes(fnp.asarray(1.0), 2)
    assert type(s) is float                                   # weak result: a float literal
    _, s = promote_dtypes(x, 2)                               # strong result: a strong 0-d
    assert s.shape == () and s.dtype == np.float32 and not fnad.core.get_aval(s).weak_type
    _, s = promote_args("add", fnp.ones(2, np.float16), 2.0)  # strong non-default: 0-d f16
    assert s.dtype == np.float16 and s.shape == ()
    (y,) = promote_args_inexact("sin", 3)
    assert y.dtype == np.float32 and y.weak_type
    for f in (lambda v: v * 2 + 1.5, lambda v: fnp.add(v.astype(np.float16), 2.0)):
        jaxpr = fnad.make_jaxpr(f)(x)
        assert "broadcast_in_dim" not in str(jaxpr)           # scalars need no broadcast
        assert not jaxpr.consts                               # ... and stay literals


def test_promote_shapes_broadcasts_only_what_needs_it():
    from fnad.numpy._core import promote_shapes
    a, b, c = fnp.ones((2, 3)), fnp.ones((3,)), fnp.ones(())
    pa, pb, pc = promote_shapes("f", a, b, c)
    assert pa is a and pc is c and pb.shape == (2, 3)
    same = fnp.ones((2, 3))
    assert all(p is q for p, q in zip(promote_shapes("f", a, same), (a, same), strict=True))


def test_incompatible_broadcast_names_both_shapes():
    with pytest.raises(ValueError, match=r"add.*\(3,\).*\(4,\)"):
        fnp.add(fnp.ones(3), fnp.ones(4))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2,\)"):
        fnp.ones((2, 3)) * fnp.ones(2)
    with pytest.raises(ValueError, match=r"\(3,\).*\(4, 2\)"):
        fnp.broadcast_to(fnp.ones(3), (4, 2))


def test_rank_promotion_config():
    x, y = fnp.ones((2, 3)), fnp.ones(3)
    with config.override(jax_numpy_rank_promotion="raise"):
        with pytest.raises(ValueError, match="rank promotion"):
            fnp.add(x, y)
        fnp.add(x, 1.0)                                       # scalars are fine
        fnp.add(x, fnp.ones((1, 3)))                          # equal ranks are fine
    with config.override(jax_numpy_rank_promotion="warn"):
        with pytest.warns(UserWarning, match="rank promotion"):
            fnp.add(x, y)


def test_check_arraylike_refuses_lists():
    with pytest.raises(TypeError, match=r"sum requires ndarray or scalar arguments, got list "
                                        r"at position 0\."):
        fnp.sum([1, 2])
    with pytest.raises(TypeError, match="add requires ndarray or scalar arguments, got tuple "
                                        "at position 1"):
        fnp.add(fnp.ones(2), (1, 2))
    with pytest.raises(TypeError, match="sin requires"):
        fnp.sin([1.0])
    assert float(fnp.sum(np.arange(3))) == 3.0                # numpy arrays are fine


def test_bad_axis_names_axis_and_ndim():
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        fnp.sum(fnp.ones((2, 3)), axis=2)
    with pytest.raises(IndexError, match="axis -3"):
        fnp.mean(fnp.ones((2, 3)), axis=-3)
    with pytest.raises(ValueError, match="duplicate"):
        fnp.sum(fnp.ones((2, 3)), axis=(0, -2))
    with pytest.raises(ValueError, match="axis 5"):
        fnp.expand_dims(fnp.ones(2), 5)


# ---- array creation -----------------------------------------------------------------------
@needs_jax
@pytest.mark.parametrize("value", [1.0, 1, True, 2.5j, np.float64(2.0), np.arange(3),
                                   np.ones((2, 2), np.float64), [1, 2.5], [[1, 2], [3, 4]],
                                   (True, False), [], np.int64(7), np.uint8(3)])
def test_asarray_matches_jax(x64, value):
    assert_matches_jax(fnp.asarray(value), jnp.asarray(value))
    assert_matches_jax(fnp.array(value), jnp.array(value))
    assert_matches_jax(fnp.array(value, ndmin=3), jnp.array(value, ndmin=3))
    if not isinstance(value, complex):
        assert_matches_jax(fnp.asarray(value, dtype=np.float16),
                           jnp.asarray(value, dtype=np.float16))


def test_asarray_of_list_of_arrays_and_tracers():
    a, b = fnp.ones(3), fnp.zeros(3)
    np.testing.assert_array_equal(fnp.array([a, b]), np.array([np.ones(3), np.zeros(3)]))
    assert fnp.asarray([fnp.asarray(1.0, np.float16), 2.0]).dtype == np.float16

    def f(x):
        return fnp.sum(fnp.array([[x, 2 * x], [x * x, 1.0]]))
    assert float(fnad.grad(f)(3.0)) == pytest.approx(1 + 2 + 6)
    with pytest.raises(ValueError, match="inhomogeneous"):
        fnad.make_jaxpr(lambda x: fnp.array([x, fnp.ones(2)]))(1.0)


def test_asarray_copies_numpy_input_and_array_is_a_new_object():
    src = np.arange(3.0, dtype=np.float32)
    x = fnp.asarray(src)
    src[0] = 100
    assert float(x[0]) == 0.0
    y = fnp.array(x)
    assert y is not x and np.array_equal(y, x)
    assert fnp.asarray(x) is x


CREATION = [
    ("zeros", [(2, 3)], {}), ("zeros", [4], dict(dtype=np.int8)), ("ones", [(2,)], {}),
    ("ones", [(2, 2)], dict(dtype=bool)), ("empty", [(3,)], {}),
    ("full", [(2, 3), 1.5], {}), ("full", [(2,), 7], {}), ("full", [(2,), 7], dict(dtype=float)),
    ("full", [(2, 3), np.arange(3.0)], {}),
    ("arange", [5], {}), ("arange", [2, 10, 3], {}), ("arange", [0.0, 1.0, 0.25], {}),
    ("arange", [5.5], {}), ("arange", [3], dict(dtype=np.float16)), ("arange", [-3, 3], {}),
    ("linspace", [0, 1], {}), ("linspace", [0.0, 1.0, 7], dict(endpoint=False)),
    ("linspace", [0, 10, 5], dict(dtype=int)), ("linspace", [2, 3, 1], {}),
    ("linspace", [2, 3, 0], {}), ("linspace", [0, 1, 5], dict(retstep=True)),
    ("linspace", [np.zeros(2), np.ones(2), 4], dict(axis=-1)),
    ("linspace", [np.zeros((2, 1)), np.arange(3.0), 3], dict(axis=1)),
    ("logspace", [0, 2, 5], {}), ("logspace", [0.0, 1.0, 4], dict(base=2.0, endpoint=False)),
    ("eye", [3], {}), ("eye", [2, 4], dict(k=1)), ("eye", [3, 3, -1], dict(dtype=np.int32)),
    ("identity", [3], {}), ("tri", [3, 4, 1], {}), ("tri", [3], dict(dtype=int)),
]


@needs_jax
@pytest.mark.parametrize("name, args, kwargs", CREATION)
def test_creation_matches_jax(x64, name, args, kwargs):
    assert_matches_jax(*run_both(name, args, kwargs))


@needs_jax
@pytest.mark.parametrize("proto", [W(1.0), W(2), np.arange(3, dtype=np.int8), np.ones((2, 2)),
                                   2.5, True])
@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_functions_match_jax(x64, proto, name):
    assert_matches_jax(*run_both(name, [proto]))
    assert_matches_jax(*run_both(name, [proto], dict(dtype=np.float16)))
    assert_matches_jax(*run_both(name, [proto], dict(shape=(2, 1))))
    assert_matches_jax(*run_both("full_like", [proto, 3]))


@needs_jax
@pytest.mark.parametrize("name, args", [
    ("tril", [arr((4, 5))]), ("tril", [arr((2, 3, 3)), -1]), ("triu", [arr((4, 5)), 2]),
    ("triu", [arr((3, 3), np.int32)]), ("diag", [arr((4,))]), ("diag", [arr((3,)), 2]),
    ("diag", [arr((3,)), -1]), ("diag", [arr((3, 4))]), ("diag", [arr((4, 3)), -2]),
    ("diagonal", [arr((3, 4))]), ("diagonal", [arr((3, 4)), 1]),
    ("diagonal", [arr((2, 3, 4)), -1, 2, 1]), ("diagonal", [arr((3, 4), np.bool_)]),
    ("diagonal", [arr((2, 3)), 5]),
])
def test_triangles_and_diagonals_match_jax(x64, name, args):
    assert_matches_jax(*run_both(name, args))


@needs_jax
@pytest.mark.parametrize("kwargs", [{}, dict(indexing="ij"), dict(sparse=True),
                                    dict(sparse=True, indexing="ij")])
def test_meshgrid_and_indices_match_jax(kwargs):
    specs = [np.arange(3.0), np.arange(4), np.arange(2.0)]
    assert_matches_jax(*run_both("meshgrid", specs, kwargs))
    assert_matches_jax(*run_both("meshgrid", specs[:2], kwargs))
    assert_matches_jax(fnp.indices((2, 3)), jnp.indices((2, 3)))
    assert_matches_jax(fnp.indices((2, 3), sparse=True), jnp.indices((2, 3), sparse=True))


def test_arange_needs_concrete_bounds():
    with pytest.raises(fnad.ConcretizationTypeError, match="arange"):
        fnad.make_jaxpr(lambda n: fnp.arange(n))(3)


# ---- reductions --------------------------------------------------------------------------------
REDUCTIONS = ["sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "all", "any",
              "argmax", "argmin", "ptp", "count_nonzero"]
AXES = [None, 0, 1, -1, (0, 1), (), (-1, 0)]


REDUCTION_DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.bool_, np.float16, "weak"]
REDUCTION_CASES = [pytest.param(name, dtype,
                                id=f"{name}-{dtype if dtype == 'weak' else np.dtype(dtype).name}")
                   for name in REDUCTIONS for dtype in REDUCTION_DTYPES
                   if not (name == "ptp" and dtype == np.bool_)]   # jax refuses ptp of bools


@needs_jax
@pytest.mark.parametrize("name, dtype", REDUCTION_CASES)
def test_reductions_match_jax(x64, name, dtype):
    if name in ("argmax", "argmin"):
        axes = [None, 0, -1]
    elif name in ("ptp",):
        axes = [None, 0, (0, 1)]
    else:
        axes = AXES
    spec = W(2.5) if dtype == "weak" else arr((3, 4), dtype)
    if name in ("prod",) and dtype not in ("weak", np.bool_):
        spec = arr((3, 4), dtype, 0.5, 1.5) if np.dtype(dtype).kind == "f" else \
            np.clip(arr((3, 4), dtype), 0, 2).astype(dtype)
    for axis in axes:
        if isinstance(spec, W) and axis not in (None, ()):
            continue
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims)
            assert_matches_jax(*run_both(name, [spec], kw))


@needs_jax
@pytest.mark.parametrize("name, kwargs", [
    ("sum", dict(dtype=np.float16)), ("sum", dict(initial=10.0)),
    ("sum", dict(promote_integers=False)),
    ("sum", dict(where="mask")), ("prod", dict(where="mask", axis=1)),
    ("max", dict(initial=0.5)), ("max", dict(where="mask", initial=-1.0, axis=0)),
    ("min", dict(where="mask", initial=9.0)), ("mean", dict(where="mask", axis=1)),
    ("mean", dict(dtype=np.float16)), ("var", dict(ddof=1)), ("std", dict(ddof=1, axis=0)),
    ("var", dict(where="mask", axis=1)), ("std", dict(correction=1)),
    ("all", dict(where="mask")), ("any", dict(where="mask", axis=0)),
    ("argmax", dict(axis=None, keepdims=True)), ("argmin", dict(axis=1, keepdims=True)),
    ("cumsum", {}), ("cumsum", dict(axis=0)), ("cumsum", dict(axis=-1, dtype=np.int32)),
    ("cumprod", dict(axis=1)), ("cumsum", dict(dtype=bool, axis=1)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
def test_reduction_options_match_jax(x64, name, kwargs, dtype):
    kwargs = dict(kwargs)
    if kwargs.get("where") == "mask":
        kwargs["where"] = to_fnad(np.array([[True, False, True, True]] * 3))
        kw_j = dict(kwargs, where=jnp.asarray(np.asarray(kwargs["where"])))
    else:
        kw_j = kwargs
    if "initial" in kwargs and dtype != np.float32:
        return
    x = arr((3, 4), dtype)
    out_f = getattr(fnp, name)(to_fnad(x), **kwargs)
    out_j = getattr(jnp, name)(to_jax(x), **kw_j)
    assert_matches_jax(out_f, out_j)


@needs_jax
@pytest.mark.parametrize("name, args, kwargs", [
    ("cumulative_sum", [arr((5,), np.int8)], {}),
    ("cumulative_sum", [arr((3, 4))], dict(axis=1, include_initial=True)),
    ("cumulative_prod", [arr((3, 4), np.float32, 0.5, 1.5)], dict(axis=0)),
    ("average", [arr((3, 4))], {}), ("average", [arr((3, 4), np.int32)], dict(axis=1)),
    ("average", [arr((3, 4)), 1, arr((4,), np.float32, 0.1, 1)], dict(returned=True)),
    ("average", [arr((2, 3, 4)), (0, 2), arr((2, 4), np.float32, 0.1, 1)], {}),
    ("average", [arr((2, 3)), None, arr((2, 3), np.float32, 0.1, 1)], dict(keepdims=True)),
    ("count_nonzero", [arr((3, 4), np.int32)], dict(axis=0)),
    ("trace", [arr((3, 4))], {}), ("trace", [arr((3, 4), np.int8), 1], {}),
    ("trace", [arr((2, 3, 3)), 0, 1, 2], {}),
])
def test_more_reductions_match_jax(x64, name, args, kwargs):
    assert_matches_jax(*run_both(name, args, kwargs))


def test_reduction_errors():
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        fnp.max(fnp.zeros((0, 3)), axis=0)
    with pytest.raises(ValueError, match="where mask one has to specify 'initial'"):
        fnp.min(fnp.ones(3), where=fnp.asarray([True, False, True]))
    with pytest.raises(ValueError, match="empty sequence"):
        fnp.argmax(fnp.zeros((0,)))
    assert float(fnp.max(fnp.zeros((0, 3)), initial=-1.0)) == -1.0


def test_reductions_against_numpy():
    x = arr((3, 4, 5))
    for name in ("sum", "mean", "var", "std", "max", "min", "prod", "ptp"):
        for axis in (None, 0, (1, 2), -1):
            np.testing.assert_allclose(getattr(fnp, name)(x, axis=axis),
                                       getattr(np, name)(x, axis=axis), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(fnp.cumsum(x, axis=1), np.cumsum(x, axis=1), rtol=1e-5)
    np.testing.assert_allclose(fnp.cumprod(x), np.cumprod(x), rtol=1e-4)
    np.testing.assert_array_equal(fnp.argmax(x, axis=2), np.argmax(x, axis=2))
    assert fnp.sum(np.ones(3, bool)).dtype == np.int32
    assert fnp.sum(np.ones(3, np.int8)).dtype == np.int32
    assert fnp.sum(np.ones(3, np.uint8)).dtype == np.uint32
    assert fnp.mean(np.arange(4)).dtype == np.float32
    assert not fnp.sum(fnp.asarray(2.0)).weak_type


# ---- shape manipulation -----------------------------------------------------------------------
SHAPES = [
    ("reshape", [arr((2, 6)), (3, -1)], {}), ("reshape", [arr((2, 6)), (4, 3)], dict(order="F")),
    ("reshape", [arr((2, 3)), -1], {}), ("ravel", [arr((2, 3, 2))], {}),
    ("ravel", [arr((2, 3))], dict(order="F")),
    ("transpose", [arr((2, 3, 4))], {}), ("transpose", [arr((2, 3, 4)), (1, 0, 2)], {}),
    ("transpose", [arr((2, 3, 4)), (-1, 0, 1)], {}),
    ("swapaxes", [arr((2, 3, 4)), 0, -1], {}), ("moveaxis", [arr((2, 3, 4)), 0, -1], {}),
    ("moveaxis", [arr((2, 3, 4, 5)), (0, 1), (3, 1)], {}),
    ("expand_dims", [arr((2, 3)), 0], {}), ("expand_dims", [arr((2, 3)), (0, -1)], {}),
    ("expand_dims", [arr((2, 3)), (1, 3)], {}),
    ("squeeze", [arr((1, 3, 1))], {}), ("squeeze", [arr((1, 3, 1)), -1], {}),
    ("squeeze", [arr((1, 3, 1)), (0, 2)], {}),
    ("broadcast_to", [arr((3, 1)), (2, 3, 4)], {}), ("broadcast_to", [1.5, (2,)], {}),
    ("broadcast_to", [W(2), (2, 2)], {}),
    ("broadcast_arrays", [arr((3, 1)), arr((4,)), 2.0], {}),
    ("concatenate", [[arr((2, 3)), arr((1, 3))]], {}),
    ("concatenate", [[arr((2, 3)), arr((2, 1), np.int32)]], dict(axis=1)),
    ("concatenate", [[arr((2, 3)), arr((4,))]], dict(axis=None)),
    ("concatenate", [[arr((2,), np.uint8), arr((2,), np.int8)]], {}),
    ("stack", [[arr((2, 3)), arr((2, 3))]], {}),
    ("stack", [[arr((2, 3)), arr((2, 3))]], dict(axis=-1)),
    ("stack", [[arr((3,)), arr((3,)), arr((3,))]], dict(axis=1)),
    ("hstack", [[arr((2,)), arr((3,))]], {}), ("hstack", [[arr((2, 1)), arr((2, 3))]], {}),
    ("vstack", [[arr((3,)), arr((2, 3))]], {}), ("dstack", [[arr((3,)), arr((3,))]], {}),
    ("dstack", [[arr((2, 3)), arr((2, 3, 2))]], {}),
    ("column_stack", [[arr((3,)), arr((3, 2))]], {}),
    ("split", [arr((6, 2)), 3], {}), ("split", [arr((6, 2)), [1, 4]], {}),
    ("split", [arr((2, 6)), [2, 4, 4]], dict(axis=1)),
    ("array_split", [arr((7,)), 3], {}), ("array_split", [arr((2, 5)), 4], dict(axis=1)),
    ("tile", [arr((2, 3)), 2], {}), ("tile", [arr((2, 3)), (2, 1, 2)], {}),
    ("tile", [arr((3,)), (2, 2)], {}), ("tile", [1.5, 3], {}),
    ("repeat", [arr((2, 3)), 2], {}), ("repeat", [arr((2, 3)), 2], dict(axis=1)),
    ("repeat", [arr((2, 3)), np.array([1, 0, 3])], dict(axis=1)),
    ("repeat", [arr((2, 3)), np.array([2, 1])], dict(axis=0, total_repeat_length=5)),
    ("repeat", [arr((2, 3)), 2], dict(total_repeat_length=9)),
    ("flip", [arr((2, 3))], {}), ("flip", [arr((2, 3, 4)), (0, 2)], {}),
    ("fliplr", [arr((2, 3))], {}), ("flipud", [arr((2, 3))], {}),
    ("rot90", [arr((2, 3))], {}), ("rot90", [arr((2, 3, 4)), 2], {}),
    ("rot90", [arr((2, 3, 4)), -1, (2, 0)], {}), ("rot90", [arr((2, 3)), 3], {}),
    ("atleast_1d", [2.0], {}), ("atleast_2d", [arr((3,))], {}), ("atleast_3d", [arr((3,))], {}),
    ("atleast_3d", [arr((2, 3))], {}), ("atleast_2d", [1, arr((2,))], {}),
    ("matrix_transpose", [arr((2, 3, 4))], {}),
]


@needs_jax
@pytest.mark.parametrize("name, args, kwargs", SHAPES)
def test_shape_functions_match_jax(x64, name, args, kwargs):
    fn_f, fn_j = getattr(fnp, name), getattr(jnp, name)
    conv_f = [[to_fnad(s) for s in a] if isinstance(a, list) else to_fnad(a) for a in args]
    conv_j = [[to_jax(s) for s in a] if isinstance(a, list) else to_jax(a) for a in args]
    assert_matches_jax(fn_f(*conv_f, **kwargs), fn_j(*conv_j, **kwargs))


PADS = [
    (2, "constant", {}), ((1, 2), "constant", dict(constant_values=3.5)),
    (((1, 0), (0, 2)), "constant", dict(constant_values=((1, 2), (3, 4)))),
    ((2, 3), "edge", {}), (((1, 3), (2, 0)), "reflect", {}), (5, "reflect", {}),
    ((1, 4), "symmetric", {}), (7, "symmetric", {}), (((2, 5), (0, 1)), "wrap", {}),
    (9, "wrap", {}), (0, "edge", {}),
]


@needs_jax
@pytest.mark.parametrize("pad_width, mode, kwargs", PADS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pad_matches_jax_and_numpy(x64, pad_width, mode, kwargs, dtype):
    x = arr((3, 4), dtype)
    out_f = fnp.pad(fnp.asarray(x), pad_width, mode, **kwargs)
    assert_matches_jax(out_f, jnp.pad(jnp.asarray(x), pad_width, mode, **kwargs))
    np.testing.assert_allclose(out_f, np.pad(x, pad_width, mode, **kwargs), rtol=1e-6)


def test_split_points_follow_numpy():
    x = arr((2, 6))
    for points in ([2, -1, 9], [4, 2], [0, 6], [-3]):
        got = fnp.split(fnp.asarray(x), points, axis=1)
        want = np.split(x, points, axis=1)
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_pad_width_forms_follow_numpy():
    x = arr((3, 4))
    for pw in ([[1], [2]], 3, (1, 2), ((1, 2),), [(0, 1), (2, 0)], np.array([1, 2])):
        np.testing.assert_array_equal(fnp.pad(x, pw), np.pad(x, pw))
    with pytest.raises(ValueError, match="negative"):
        fnp.pad(x, -1)


def test_shape_errors():
    with pytest.raises(ValueError, match=r"cannot reshape array of shape \(2, 3\)"):
        fnp.reshape(fnp.ones((2, 3)), (4, 2))
    with pytest.raises(ValueError, match="only specify one unknown dimension"):
        fnp.ones(6).reshape(-1, -1)
    with pytest.raises(ValueError, match="size not equal to one"):
        fnp.squeeze(fnp.ones((2, 1)), 0)
    with pytest.raises(ValueError, match="equal division"):
        fnp.split(fnp.ones(5), 2)
    with pytest.raises(ValueError, match="same shape"):
        fnp.stack([fnp.ones(2), fnp.ones(3)])
    with pytest.raises(ValueError, match="Zero-dimensional"):
        fnp.concatenate([fnp.asarray(1.0), fnp.asarray(2.0)])
    with pytest.raises(NotImplementedError, match="mode 'nonsense'"):
        fnp.pad(fnp.ones(3), 1, mode="nonsense")
    with pytest.raises(TypeError, match="shape requires ndarray"):
        fnp.shape([1, 2])
    assert fnp.shape(fnp.ones((2, 3))) == (2, 3) and fnp.ndim(2.0) == 0
    assert fnp.size(fnp.ones((2, 3))) == 6 and fnp.size(fnp.ones((2, 3)), 1) == 3


# ---- products and einsum ---------------------------------------------------------------------
PRODUCTS = [
    ("dot", [arr((3,)), arr((3,))], {}), ("dot", [arr((2, 3)), arr((3,))], {}),
    ("dot", [arr((2, 3)), arr((3, 4))], {}), ("dot", [arr((2, 2, 3)), arr((4, 3, 5))], {}),
    ("dot", [2.0, arr((3,))], {}), ("dot", [arr((2, 3), np.int32), arr((3,), np.int8)], {}),
    ("matmul", [arr((2, 3)), arr((3, 4))], {}), ("matmul", [arr((3,)), arr((3, 4))], {}),
    ("matmul", [arr((2, 3)), arr((3,))], {}), ("matmul", [arr((3,)), arr((3,))], {}),
    ("matmul", [arr((5, 2, 3)), arr((3, 4))], {}),
    ("matmul", [arr((5, 1, 2, 3)), arr((4, 3, 2))], {}),
    ("matmul", [arr((1, 2, 3)), arr((5, 3, 4))], {}), ("matmul", [arr((3,)), arr((2, 3, 4))], {}),
    ("matmul", [arr((2, 3), np.int32), arr((3, 2), np.float32)], {}),
    ("vdot", [arr((2, 3)), arr((6,))], {}),
    ("vdot", [arr((3,), np.complex64), arr((3,), np.complex64)], {}),
    ("inner", [arr((2, 3)), arr((4, 3))], {}), ("inner", [arr((3,)), 2], {}),
    ("outer", [arr((3,)), arr((2, 2))], {}), ("outer", [arr((3,), np.int32), arr((2,))], {}),
    ("tensordot", [arr((2, 3, 4)), arr((3, 4, 5))], {}),
    ("tensordot", [arr((2, 3, 4)), arr((4, 3))], dict(axes=([1, 2], [1, 0]))),
    ("tensordot", [arr((2, 3)), arr((3, 2))], dict(axes=(0, 1))),
    ("tensordot", [arr((2, 3)), arr((4, 5))], dict(axes=0)),
]


@needs_jax
@pytest.mark.parametrize("name, args, kwargs", PRODUCTS)
def test_products_match_jax(x64, name, args, kwargs):
    assert_matches_jax(*run_both(name, args, kwargs), rtol=1e-4)


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ijk->kj", [(2, 3, 4)]),
    ("i,i->", [(3,), (3,)]), ("i,j->ij", [(3,), (4,)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]), ("...ij,...jk", [(1, 2, 3), (5, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]), ("iij->j", [(3, 3, 4)]),
    ("ij,ij->i", [(2, 3), (2, 3)]), ("i...->...", [(3, 2, 4)]), ("bhqd,bhkd->bhqk",
                                                                  [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i,i->i", [(4,), (4,), (4,)]), ("ab,cd->", [(2, 3), (4, 5)]), ("ijk,k->", [(2, 3, 4), (4,)]),
]


@needs_jax
@pytest.mark.parametrize("subscripts, shapes", EINSUMS)
def test_einsum_matches_jax_and_numpy(x64, subscripts, shapes):
    ops = [arr(s) for s in shapes]
    out_f = fnp.einsum(subscripts, *map(fnp.asarray, ops), optimize="greedy")
    assert_matches_jax(out_f, jnp.einsum(subscripts, *map(jnp.asarray, ops)), rtol=1e-4)
    np.testing.assert_allclose(out_f, np.einsum(subscripts, *ops), rtol=1e-4, atol=1e-5)


def test_einsum_errors():
    with pytest.raises(ValueError, match="incompatible sizes"):
        fnp.einsum("ij,jk->ik", fnp.ones((2, 3)), fnp.ones((4, 5)))
    with pytest.raises(ValueError, match="do not appear in any input"):
        fnp.einsum("ij->ik", fnp.ones((2, 3)))
    with pytest.raises(ValueError, match="subscripts"):
        fnp.einsum("ijk->i", fnp.ones((2, 3)))
    with pytest.raises(ValueError, match="Incompatible shapes for matmul"):
        fnp.matmul(fnp.ones((2, 2, 3)), fnp.ones((3, 3, 4)))


# ---- gradients against jax.grad ---------------------------------------------------------------
def _sum(fn, lib):
    return lambda *a: lib.sum(fn(lib, *a))


GRADS = [
    ("sin", lambda np_, x: np_.sin(x) * x, [arr((4,))]),
    ("sqrt at 0", lambda np_, x: np_.sqrt(x), [np.array([0.0, 1.0, 4.0], np.float32)]),
    ("abs at 0", lambda np_, x: np_.abs(x), [np.array([0.0, -1.0, 2.0], np.float32)]),
    ("maximum ties", lambda np_, x: np_.maximum(x, 1.0), [np.array([1.0, 0.0, 2.0], np.float32)]),
    ("minimum ties", lambda np_, x: np_.minimum(x, x * 0 + 1), [np.array([1.0, 3.0], np.float32)]),
    ("double where", lambda np_, x: np_.where(x > 0, np_.log(np_.where(x > 0, x, 1.0)), 0.0),
     [np.array([0.0, -1.0, 2.0], np.float32)]),
    ("where", lambda np_, x, y: np_.where(x > y, x * y, y ** 2), [arr((5,)), arr((5,))]),
    ("hypot", lambda np_, x, y: np_.hypot(x, y), [arr((5,)), arr((5,))]),
    ("logaddexp", lambda np_, x, y: np_.logaddexp(x, y), [arr((5,)) * 30, arr((5,))]),
    ("logaddexp2", lambda np_, x, y: np_.logaddexp2(x, y), [arr((5,)), arr((5,))]),
    ("logaddexp ties", lambda np_, x: np_.logaddexp(x, x), [arr((3,))]),
    ("power int", lambda np_, x: x ** 3 + np_.power(x, 2),
     [np.array([0.0, -1.5, 2.0], np.float32)]),
    ("power float", lambda np_, x, y: np_.power(x, y),
     [arr((4,), np.float32, 0.5, 2), arr((4,))]),
    ("power int array", lambda np_, x: np_.power(x, np_.arange(4)),
     [np.array([0.0, 1.5, -2.0, 0.5], np.float32)]),
    ("clip", lambda np_, x: np_.clip(x, -0.5, 0.5), [np.array([-1, -0.5, 0, 0.5, 2], np.float32)]),
    ("divide", lambda np_, x, y: x / y + y / 2 - x // 1.5 + x % 1.5,
     [arr((4,)), arr((4,), np.float32, 0.5, 2)]),
    ("exp/log", lambda np_, x: np_.log1p(np_.exp(x)) + np_.expm1(x) * np_.log2(x * x + 1),
     [arr((4,))]),
    ("trig", lambda np_, x: np_.arctan2(np_.tan(x), np_.cosh(x)) + np_.arcsinh(x) * np_.tanh(x),
     [arr((4,))]),
    ("sinc", lambda np_, x: np_.sinc(x), [np.array([0.0, 0.5, -1.5], np.float32)]),
    ("copysign", lambda np_, x, y: np_.copysign(x, y), [arr((4,)), arr((4,))]),
    ("round/floor zero", lambda np_, x: np_.round(x) + np_.floor(x) + np_.ceil(x) + x,
     [arr((4,))]),
    ("sum/mean", lambda np_, x: np_.sum(x, axis=0) + np_.mean(x, axis=1, keepdims=True),
     [arr((3, 4))]),
    ("var/std", lambda np_, x: np_.var(x, axis=0) + np_.std(x, axis=1, ddof=1).sum(),
     [arr((3, 4))]),
    ("max ties", lambda np_, x: np_.max(x, axis=1), [np.array([[1, 3, 3], [2, 0, 1]], np.float32)]),
    ("prod", lambda np_, x: np_.prod(x, axis=0), [arr((3, 4))]),
    ("masked sum", lambda np_, x: np_.sum(x, where=x > 0), [arr((3, 4))]),
    ("cumsum", lambda np_, x: np_.cumsum(x, axis=1) * x, [arr((3, 4))]),
    ("matmul", lambda np_, x, y: x @ y, [arr((2, 3)), arr((3, 4))]),
    ("batched matmul", lambda np_, x, y: np_.matmul(x, y), [arr((5, 2, 3)), arr((3,))]),
    ("einsum", lambda np_, x, y: np_.einsum("bij,jk,bk->bi", x, y, x[:, 0, :2]),
     [arr((3, 2, 4)), arr((4, 2))]),
    ("einsum trace", lambda np_, x: np_.einsum("ii->", x) + np_.trace(x), [arr((3, 3))]),
    ("tensordot", lambda np_, x, y: np_.tensordot(x, y, axes=([0, 1], [1, 0])),
     [arr((2, 3, 4)), arr((3, 2))]),
    ("outer/inner", lambda np_, x, y: np_.outer(x, y) + np_.inner(x, x), [arr((3,)), arr((2,))]),
    ("shape ops", lambda np_, x: np_.concatenate([np_.flip(x, 0), np_.transpose(x)[:3].T,
                                                  np_.tile(x, (1, 1))], axis=0),
     [arr((3, 3))]),
    ("stack/split", lambda np_, x: np_.stack(np_.split(x, 2, axis=1), axis=0) * 2,
     [arr((3, 4))]),
    ("pad modes", lambda np_, x: (np_.pad(x, 2, "reflect") + np_.pad(x, 2, "wrap")
                                  + np_.pad(x, 2, "edge") + np_.pad(x, 2, "symmetric")
                                  + np_.pad(x, 2, constant_values=1.0)), [arr((3, 4))]),
    ("repeat", lambda np_, x: np_.repeat(x, np.array([1, 3, 0]), axis=0), [arr((3, 2))]),
    ("tril/triu/diag", lambda np_, x: np_.tril(x) * 2 + np_.triu(x, 1) + np_.diag(np_.diag(x)),
     [arr((3, 3))]),
    ("diagonal", lambda np_, x: np_.diagonal(x, 1, 0, 2), [arr((3, 2, 4))]),
    ("linspace", lambda np_, a, b: np_.linspace(a, b, 5) * np_.arange(5.0), [np.float32(0.5),
                                                                             np.float32(2.0)]),
    ("rot90/moveaxis", lambda np_, x: np_.moveaxis(np_.rot90(x), 0, -1), [arr((2, 3, 4))]),
    ("nan_to_num", lambda np_, x: np_.nan_to_num(np_.log(x)), [arr((4,))]),
    ("average", lambda np_, x, w: np_.average(x, axis=1, weights=w),
     [arr((3, 4)), arr((4,), np.float32, 0.1, 1.0)]),
]


@needs_jax
@pytest.mark.parametrize("name, fn, args", GRADS, ids=[g[0] for g in GRADS])
def test_grads_match_jax(name, fn, args):
    argnums = tuple(range(len(args)))
    g_f = fnad.grad(_sum(fn, fnp), argnums)(*map(fnp.asarray, args))
    g_j = jax.grad(_sum(fn, jnp), argnums)(*map(jnp.asarray, args))
    for f, j in zip(g_f, g_j, strict=True):
        np.testing.assert_allclose(np.asarray(f), np.asarray(j), rtol=1e-4, atol=1e-5,
                                   equal_nan=True)


def test_grad_at_kinks():
    """Slopes at the kinks: abs at 0 is +1 (the abs primitive follows JAX), maximum/minimum
    ties split evenly, sqrt at 0 is inf (as JAX), and a tie in hypot gives the true slope
    x / r."""
    g = fnad.grad(lambda x: fnp.sum(fnp.abs(x)))(fnp.asarray([0.0, -2.0, 3.0]))
    assert g.tolist() == [1.0, -1.0, 1.0]
    assert float(fnad.grad(lambda x: fnp.maximum(x, 1.0))(1.0)) == 0.5
    assert float(fnad.grad(lambda x: fnp.minimum(1.0, x))(1.0)) == 0.5
    assert float(fnad.grad(fnp.sqrt)(0.0)) == np.inf
    gx, gy = fnad.grad(lambda x, y: fnp.hypot(x, y), (0, 1))(3.0, 3.0)
    assert float(gx) == pytest.approx(2 ** -0.5) and float(gy) == pytest.approx(2 ** -0.5)
    assert float(fnad.grad(fnp.sinc)(0.0)) == 0.0
    # hypot does not overflow at 1e30 (x² would), in value or slope (y / r); jax.grad's
    # slope there is off by 25%, so this one is checked against the formula.
    x, y = fnp.asarray([1e30, 3.0]), fnp.asarray([2e30, 4.0])
    np.testing.assert_allclose(fnp.hypot(x, y), [np.sqrt(5) * 1e30, 5.0], rtol=1e-6)
    gx, gy = fnad.grad(lambda a, b: fnp.sum(fnp.hypot(a, b)), (0, 1))(x, y)
    np.testing.assert_allclose(gx, [5 ** -0.5, 0.6], rtol=1e-6)
    np.testing.assert_allclose(gy, [2 * 5 ** -0.5, 0.8], rtol=1e-6)


# ---- operators and methods on Arrays and tracers ---------------------------------------------
OPS = [
    lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y,
    lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x ** 2, lambda x, y: 2.0 ** x,
    lambda x, y: abs(x) ** y, lambda x, y: x @ y.T, lambda x, y: -x + (+y), lambda x, y: abs(x),
    lambda x, y: 3 - x, lambda x, y: 1.5 / y, lambda x, y: 2 * x, lambda x, y: (x < y) | (x > 0),
    lambda x, y: (x <= y) & (x >= 0), lambda x, y: (x == y) ^ (x != 0), lambda x, y: ~(x > y),
    lambda x, y: divmod(x, y)[1], lambda x, y: round(x), lambda x, y: x.T, lambda x, y: x.mT,
    lambda x, y: x.sum(axis=0) + x.mean() + x.max(1).sum() + x.min() + x.prod(),
    lambda x, y: x.var(ddof=1) + x.std(axis=0), lambda x, y: x.argmax(axis=1) + x.argmin(),
    lambda x, y: x.cumsum(axis=1) + x.cumprod(axis=0), lambda x, y: x.clip(-0.5, 0.5),
    lambda x, y: x.round(1), lambda x, y: x.conj() + x.real + x.imag,
    lambda x, y: x.dot(y.T), lambda x, y: x.flatten() + x.ravel(),
    lambda x, y: x.reshape(4, 3) + x.reshape((4, 3)) + x.reshape(-1, 3),
    lambda x, y: x.transpose() + x.transpose(1, 0) + x.transpose((1, 0)),
    lambda x, y: x.swapaxes(0, 1), lambda x, y: x.repeat(2, axis=0),
    lambda x, y: x.astype(np.int32), lambda x, y: x.astype(np.float16) * 2,
    lambda x, y: x.squeeze(), lambda x, y: x.all() | x.any(axis=0),
    lambda x, y: x.trace() + x.ptp(), lambda x, y: x.diagonal(),
    lambda x, y: (x > 0).astype(int) << 2, lambda x, y: (x > 0).astype(int) >> 1,
]


@needs_jax
@pytest.mark.parametrize("i", range(len(OPS)))
def test_operators_and_methods_match_jax(i):
    op = OPS[i]
    x, y = arr((3, 4)), arr((3, 4), np.float32, 0.5, 2)
    assert_matches_jax(op(fnp.asarray(x), fnp.asarray(y)), op(jnp.asarray(x), jnp.asarray(y)))


@pytest.mark.parametrize("i", range(len(OPS)))
def test_operators_and_methods_work_on_tracers(i):
    op = OPS[i]
    x, y = arr((3, 4)), arr((3, 4), np.float32, 0.5, 2)
    eager = op(fnp.asarray(x), fnp.asarray(y))
    traced = fnad.eval_shape(op, fnp.asarray(x), fnp.asarray(y))
    assert traced.shape == eager.shape and traced.dtype == eager.dtype
    jaxpr = fnad.make_jaxpr(op)(fnp.asarray(x), fnp.asarray(y))
    assert str(jaxpr)

    if eager.dtype.kind == "f":                      # and under grad: tracers all the way
        def loss(a, b):
            return op(a, b).astype(np.float32).sum()
        fnad.grad(loss, (0, 1))(fnp.asarray(x), fnp.asarray(y))


def test_numpy_scalars_and_arrays_defer_to_fnad_operators():
    x = fnp.arange(3.0)
    for out in (np.float32(2) * x, x * np.float32(2), np.ones(3, np.float32) + x,
                np.int32(1) - x, np.float64(2.0) ** x, np.ones((3, 3)) @ x):
        assert isinstance(out, fnad.Array), type(out)
    assert (np.float32(2) * x).dtype == np.float32
    assert np.asarray(np.float32(2) * x).tolist() == [0.0, 2.0, 4.0]


def test_unknown_operands_raise_type_error():
    x = fnp.ones(2)
    with pytest.raises(TypeError):
        x + [1, 2]
    with pytest.raises(TypeError):
        x * "a"
    assert (x == None) is False  # noqa: E711  (NotImplemented -> identity comparison)


def test_iteration_item_tolist_and_properties():
    x = fnp.arange(6.0).reshape(2, 3)
    rows = list(x)
    assert len(rows) == 2 and rows[1].tolist() == [3.0, 4.0, 5.0]
    assert [float(v) for v in x[0]] == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="0-d"):
        iter(fnp.asarray(1.0))
    assert x.nbytes == 24 and x.itemsize == 4
    assert x.sum().item() == 15.0 and x.tolist() == [[0, 1, 2], [3, 4, 5]]
    a, b = fnp.asarray([1.0, 2.0])
    assert float(a) == 1.0 and float(b) == 2.0

    def f(v):
        first, second = v                                   # unpacking a tracer
        return first * second
    assert float(fnad.grad(f)(fnp.asarray([3.0, 4.0]))[0]) == 4.0


def test_getitem_and_at_delegate_to_indexing():
    x = fnp.arange(6.0).reshape(2, 3)
    assert x[1, 2].item() == 5.0
    assert x.at[0, 0].set(9.0)[0, 0].item() == 9.0
    g = fnad.grad(lambda v: (v[1] * 2).sum() + v.at[0].add(1.0).sum())(x)
    assert g.tolist() == [[1, 1, 1], [3, 3, 3]]


def test_methods_under_grad_match_jax():
    if jax is None:
        pytest.skip("jax not installed")
    x = arr((3, 4))

    def f(np_, v):
        return ((v.T @ v).sum() + v.mean(axis=0).max() + v.reshape(-1).std()
                + (v ** 2).var() + abs(v).sum() - v.clip(0, 1).prod())
    g_f = fnad.grad(lambda v: f(fnp, v))(fnp.asarray(x))
    g_j = jax.grad(lambda v: f(jnp, v))(jnp.asarray(x))
    np.testing.assert_allclose(g_f, g_j, rtol=1e-4, atol=1e-5)


def test_fnad_import_installs_numpy():
    import importlib
    mod = importlib.import_module("fnad")
    assert mod.numpy is fnp
    assert fnp.ndarray is fnad.Array
    assert fnp.float32 is np.float32 and fnp.bfloat16 is ml_dtypes.bfloat16
    assert fnp.pi == np.pi and fnp.newaxis is None and np.isnan(fnp.nan)
    assert fnp.issubdtype(fnp.bfloat16, fnp.floating)
    assert fnp.result_type(fnp.ones(2, np.float16), 1.0) == np.float16
    assert fnp.iinfo(fnp.int8).max == 127 and fnp.finfo(fnp.float32).eps > 0
    assert fnp.can_cast(np.int8, np.int32) and not fnp.can_cast(np.float32, np.int8)

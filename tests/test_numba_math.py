"""Accuracy, special values and vectorization of the numba backend's scalar math
(fnad/backends/numba_cpu/mathfns.py).

Every function runs inside an njit loop compiled with the flags the code generator uses, and
is compared with NumPy/SciPy: float32 results against a float64 reference, float64 results
against a long double one (SciPy for the libm-based erf/erfc), in units of the result's ulp.
Vectorization is checked on the LLVM IR (vector types present, no libm call left), never by
timing.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="the numba backend's math needs numba installed")
special = pytest.importorskip("scipy.special", reason="scipy gives the erf/logistic reference")

from fnad.backends.numba_cpu import mathfns, scalar_ops  # noqa: E402

# The fast-math flags the code generator compiles kernels with (no nnan/ninf).
CALLER_FLAGS = {"arcp", "contract", "afn", "reassoc", "nsz"}
F32, F64 = np.float32, np.float64
DTYPES = [F32, F64]

# Max error in ulps each function is held to (the table in mathfns' docstring).
ULP_BOUND = {
    ("exp", F32): 2, ("exp", F64): 2, ("exp2", F32): 2, ("exp2", F64): 2,
    ("log", F32): 2, ("log", F64): 2, ("log1p", F32): 2, ("log1p", F64): 2,
    ("expm1", F32): 3, ("expm1", F64): 3, ("tanh", F32): 3, ("tanh", F64): 3,
    ("logistic", F32): 3, ("logistic", F64): 3,
    ("erf", F32): 3, ("erfc", F32): 1,
    # erf/erfc in float64 are libm's (test_libm_entries): SciPy's Cephes versions, the only
    # float64 reference at hand, are off by up to hundreds of ulps at large x.
}


def _expit_ld(x):
    x = x.astype(np.longdouble)
    return 1 / (1 + np.exp(-x))


def reference(name, x):
    """float64 reference for float32 inputs, long double for float64 (SciPy for erf/erfc)."""
    wide = np.float64 if x.dtype == F32 else np.longdouble
    with np.errstate(all="ignore"):
        xw = x.astype(wide)
        if name == "logistic":
            return special.expit(xw) if wide is np.float64 else _expit_ld(x)
        if name in ("erf", "erfc"):
            return getattr(special, name)(x.astype(np.float64))
        return getattr(np, name)(xw)


# Where each function's interesting behaviour is: a dense grid covers this interval.
CORE = {"exp": (-110.0, 90.0), "exp2": (-155.0, 130.0), "log": (0.0, 4.0),
        "log1p": (-1.0, 4.0), "expm1": (-20.0, 90.0), "tanh": (-12.0, 12.0),
        "logistic": (-110.0, 110.0), "erf": (-5.0, 5.0), "erfc": (-5.0, 11.0)}
CORE_F64 = {"exp": (-750.0, 712.0), "exp2": (-1080.0, 1030.0), "expm1": (-40.0, 712.0),
            "tanh": (-21.0, 21.0), "logistic": (-750.0, 750.0), "erfc": (-6.0, 28.0)}


def samples(name, dtype, n=1_000_000, seed=0):
    """~n points: a dense grid on the core interval, log-uniform magnitudes of both signs
    over the whole finite range, and random bit patterns (subnormals, inf, NaN included)."""
    rng = np.random.default_rng(seed)
    lo, hi = (CORE_F64 if dtype == F64 else {}).get(name, CORE[name])
    fi = np.finfo(dtype)
    grid = np.linspace(lo, hi, n // 2)
    mag = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)),
                             n // 4))
    logu = np.where(rng.random(n // 4) < 0.5, -mag, mag)
    ity = np.uint32 if dtype == F32 else np.uint64
    bits = rng.integers(0, np.iinfo(ity).max, n // 4, dtype=ity, endpoint=True).view(dtype)
    x = np.concatenate([grid.astype(dtype), logu.astype(dtype), bits])
    return x


def ulp_error(y, ref, dtype):
    """|y - ref| in units of the ulp of ref in `dtype` (subnormal spacing at the bottom)."""
    fi = np.finfo(dtype)
    ref = np.asarray(ref)
    _, e = np.frexp(np.abs(ref))
    ulp = np.ldexp(np.ones_like(ref), e - (fi.nmant + 1))
    ulp = np.maximum(ulp, np.asarray(fi.smallest_subnormal, ref.dtype))
    return np.abs(y.astype(ref.dtype) - ref) / ulp


_KERNELS: dict = {}


def kernel(fn, flags=frozenset(CALLER_FLAGS)):
    """An njit loop `out[i] = fn(a[i])` compiled like the code generator's kernels."""
    key = (fn, flags)
    if key not in _KERNELS:
        fm = set(flags) if flags else False

        @numba.njit(fastmath=fm, error_model="numpy")
        def run(a, out):
            for i in range(a.size):
                out[i] = fn(a[i])
        _KERNELS[key] = run
    return _KERNELS[key]


def apply(name, x, flags=frozenset(CALLER_FLAGS)):
    out = np.empty_like(x)
    kernel(mathfns.FUNCS[name][x.dtype.type], flags)(x, out)
    return out


CASES = [(name, dt) for name in mathfns.FUNCS for dt in DTYPES]
LIBM_CASES = [("erf", F64), ("erfc", F64)]
POLY_CASES = [c for c in CASES if c not in LIBM_CASES]


def ids(cases):
    return [f"{n}-{np.dtype(d).name}" for n, d in cases]


@pytest.mark.parametrize("name,dtype", POLY_CASES, ids=ids(POLY_CASES))
def test_accuracy(name, dtype):
    x = samples(name, dtype)
    y = apply(name, x)
    ref = reference(name, x)
    with np.errstate(all="ignore"):
        ref_rounded = ref.astype(dtype)
    nan_ref = np.isnan(ref)
    assert np.array_equal(np.isnan(y), nan_ref), (
        f"{name}[{np.dtype(dtype).name}]: NaN where the reference is not, or the reverse, at "
        f"x={x[np.isnan(y) != nan_ref][:5]}")
    inf_ref = np.isinf(ref_rounded) & ~nan_ref
    assert np.array_equal(y[inf_ref], ref_rounded[inf_ref]), (
        f"{name}: wrong inf/overflow at x={x[inf_ref & (y != ref_rounded)][:5]}")
    fin = ~nan_ref & ~inf_ref
    err = ulp_error(y[fin], ref[fin], dtype)
    worst = int(np.argmax(err))
    bound = ULP_BOUND[(name, dtype)]
    assert err[worst] <= bound, (
        f"{name}[{np.dtype(dtype).name}]: {float(err[worst]):.2f} ulp > {bound} at "
        f"x={x[fin][worst]!r} (got {y[fin][worst]!r}, reference {ref[fin][worst]!r})")


SPECIAL_INPUTS = ["nan", "-nan", "inf", "-inf", "0", "-0", "1", "-1", "0.5", "-0.5",
                  "sub", "-sub", "tiny", "-tiny", "max", "-max", "2", "-2", "30", "-30",
                  "100", "-100", "800", "-800"]


def special_inputs(dtype):
    fi = np.finfo(dtype)
    named = {"sub": fi.smallest_subnormal, "tiny": fi.tiny, "max": fi.max}
    vals = []
    for s in SPECIAL_INPUTS:
        sign = -1 if s.startswith("-") else 1
        v = named.get(s.lstrip("-"), None)
        vals.append(sign * (v if v is not None else float(s.lstrip("-"))))
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=dtype)


@pytest.mark.parametrize("flags", [frozenset(CALLER_FLAGS), frozenset()],
                         ids=["caller-fastmath", "caller-strict"])
@pytest.mark.parametrize("name,dtype", POLY_CASES, ids=ids(POLY_CASES))
def test_special_values(name, dtype, flags):
    """NaN, +-inf, +-0, subnormals, overflow/underflow and domain errors match NumPy/SciPy:
    same NaN-ness, same infinities, same sign of zero results, finite ones within the bound."""
    x = special_inputs(dtype)
    y = apply(name, x, flags)
    ref = reference(name, x)
    with np.errstate(all="ignore"):
        ref_rounded = ref.astype(dtype)
    for xi, yi, ri in zip(x, y, ref_rounded):
        where = f"{name}[{np.dtype(dtype).name}]({xi!r}) = {yi!r}, NumPy/SciPy says {ri!r}"
        if np.isnan(ri):
            assert np.isnan(yi), where
        elif np.isinf(ri) or ri == 0:
            assert yi == ri and np.signbit(yi) == np.signbit(ri), where
    fin = np.isfinite(ref_rounded) & (ref_rounded != 0)
    err = ulp_error(y[fin], ref[fin], dtype)
    bad = err > ULP_BOUND[(name, dtype)]
    assert not bad.any(), f"{name}: beyond {ULP_BOUND[(name, dtype)]} ulp at x={x[fin][bad]}"


# Where exp, exp2 and logistic stop computing and select 0 (mathfns: an underflowing
# product is slow on Intel CPUs): the result at and on both sides of each point, and on
# through the subnormal results just above it, is the reference's.
ZERO_FROM = {("exp", F32): -104.0, ("exp", F64): -746.0, ("exp2", F32): -151.0,
             ("exp2", F64): -1076.0, ("logistic", F32): -104.0, ("logistic", F64): -746.0}


@pytest.mark.parametrize("name,dtype", list(ZERO_FROM), ids=ids(ZERO_FROM))
def test_underflow_edge(name, dtype):
    edge = dtype(ZERO_FROM[(name, dtype)])
    steps = [edge]
    for _ in range(8):
        steps = [np.nextafter(steps[0], dtype(-np.inf))] + steps + \
                [np.nextafter(steps[-1], dtype(0))]
    x = np.concatenate([np.array(steps, dtype), np.linspace(edge - 2, edge + 20, 4001,
                                                             dtype=dtype)])
    if name == "logistic":
        x = np.concatenate([x, -x])
    y, ref = apply(name, x), reference(name, x)
    zero = ref.astype(dtype) == 0
    assert np.all(y[zero] == 0) and not np.signbit(y[zero]).any(), x[zero & (y != 0)][:5]
    err = ulp_error(y[~zero], ref[~zero], dtype)
    assert err.max() <= ULP_BOUND[(name, dtype)], x[~zero][np.argmax(err)]


@pytest.mark.parametrize("name,dtype", LIBM_CASES, ids=ids(LIBM_CASES))
def test_libm_entries(name, dtype):
    """erf/erfc float64 are Python's math.erf/erfc (libm) inside the loop: bit-identical to
    them on every sample (NaN and inf included), and close to SciPy's where SciPy is accurate."""
    import math
    x = samples(name, dtype, n=200_000)
    y = apply(name, x)
    want = np.array([getattr(math, name)(v) for v in x.tolist()])
    same = (y == want) | (np.isnan(y) & np.isnan(want))
    assert same.all(), f"{name}: differs from math.{name} at x={x[~same][:5]}"
    mid = (np.abs(x) < 5) & (np.abs(x) > 1e-300)   # SciPy rounds subnormal erf differently
    np.testing.assert_allclose(y[mid], getattr(special, name)(x[mid]), rtol=1e-13, atol=0)


LIBM_CALL = re.compile(r"call [^@\n]*@(llvm\.(exp|exp2|log|sin|cos|pow)\.|(exp|expf|exp2f?|log|"
                       r"logf|log1pf?|expm1f?|tanhf?|erff?|erfcf?)\b)")
VECTOR = re.compile(r"<(\d+) x (float|double)>")


def loop_ir(fn, dtype):
    k = kernel(fn)
    a = np.ones(16, dtype)
    k(a, np.empty_like(a))
    return "\n".join(k.inspect_llvm().values())


VEC_CASES = sorted(((n, d) for n, d in scalar_ops.VECTORIZES),
                   key=lambda c: (c[0], np.dtype(c[1]).name))


@pytest.mark.parametrize("name,dtype", VEC_CASES,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in VEC_CASES])
def test_vectorizes(name, dtype):
    """The loop around the function is vectorized: the optimized IR has vector float ops and no
    libm call (or call to a separate function) survives in it."""
    ir = loop_ir(mathfns.FUNCS[name][dtype], dtype)
    calls = LIBM_CALL.findall(ir)
    assert not calls, f"{name}[{np.dtype(dtype).name}] still calls {calls[:3]}"
    assert "mathfns" not in "\n".join(re.findall(r"call [^\n]*", ir)), (
        f"{name}[{np.dtype(dtype).name}] was not inlined into the loop")
    widths = {int(w) for w, t in VECTOR.findall(ir) if t == ("float" if dtype == F32 else "double")}
    assert widths and max(widths) >= 2, f"{name}[{np.dtype(dtype).name}]: no vector ops in the loop"


def test_vectorization_check_sees_libm():
    """Control for test_vectorizes: a loop over np.exp keeps its scalar libm call."""
    @numba.njit(fastmath=CALLER_FLAGS, error_model="numpy")
    def np_exp(a, out):
        for i in range(a.size):
            out[i] = np.exp(a[i])
    a = np.ones(16, F32)
    np_exp(a, np.empty_like(a))
    ir = "\n".join(np_exp.inspect_llvm().values())
    assert LIBM_CALL.search(ir), "the libm-call pattern no longer matches numba's np.exp"


def test_table_and_names():
    """scalar_ops' table of names (numba-free) and mathfns' functions agree."""
    assert set(mathfns.FUNCS) == set(scalar_ops.MATHFNS)
    for name, by_dtype in mathfns.FUNCS.items():
        assert set(by_dtype) == {F32, F64}
        for dt, fn in by_dtype.items():
            attr = scalar_ops.func_name(name, dt)
            assert getattr(mathfns, attr) is fn and fn.__name__ == attr
            assert attr.endswith("_f32" if dt == F32 else "_f64")
    assert scalar_ops.func_name("tanh", np.dtype("float32")) == "tanh_f32"
    with pytest.raises(KeyError) as info:
        scalar_ops.func_name("sinh", F32)
    assert "'sinh'" in str(info.value) and "exp[float32/float64]" in str(info.value)
    with pytest.raises(KeyError):
        scalar_ops.func_name("exp", np.float16)

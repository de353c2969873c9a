"""Tests for fnad.dtypes: hand-written key cases, then JAX as the oracle where installed."""

import itertools
import subprocess
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fnad import dtypes
from fnad.config import config

ALL = [np.dtype(t) for t in (
    np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
    ml_dtypes.bfloat16, np.float16, np.float32, np.float64, np.complex64, np.complex128)]
B1, U8, U16, U32, U64, I8, I16, I32, I64, BF16, F16, F32, F64, C64, C128 = ALL
SIXTY_FOUR = {U64, I64, F64, C128}
NARROW_FLOATS = [np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
    "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn")]
NARROW_INTS = [np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2")]
REPO = Path(__file__).resolve().parents[1]


class Aval:
    def __init__(self, dtype, weak_type):
        self.dtype, self.weak_type = np.dtype(dtype), weak_type


class Traced:
    """Stands in for an fnad array/tracer: dtype and weak_type live on `.aval`."""

    def __init__(self, dtype, weak_type=False):
        self.aval = Aval(dtype, weak_type)


class Flat:
    """An object carrying `.dtype` and `.weak_type` directly."""

    def __init__(self, dtype, weak_type=False):
        self.dtype, self.weak_type = np.dtype(dtype), weak_type


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    with config.override(jax_enable_x64=request.param):
        yield request.param


# ---- names, dtype(), canonicalization ------------------------------------------------------
def test_names_are_numpy_scalar_types():
    assert dtypes.float32 is np.float32 and dtypes.bool_ is np.bool_
    assert dtypes.bfloat16 is ml_dtypes.bfloat16
    assert np.dtype(dtypes.bfloat16).itemsize == 2
    assert dtypes.float0 == np.dtype([("float0", np.void, 0)])
    assert dtypes.float0.itemsize == 0
    assert dtypes.floating is np.floating and dtypes.unsignedinteger is np.unsignedinteger


def test_dtype_python_scalars_follow_x64(x64):
    wide = {int: I64, float: F64, complex: C128} if x64 else {int: I32, float: F32, complex: C64}
    assert dtypes.dtype(3) == wide[int] and dtypes.dtype(int) == wide[int]
    assert dtypes.dtype(3.5) == wide[float] and dtypes.dtype(float) == wide[float]
    assert dtypes.dtype(1j) == wide[complex] and dtypes.dtype(complex) == wide[complex]
    assert dtypes.dtype(True) == B1 and dtypes.dtype(bool) == B1


def test_dtype_of_dtype_likes_is_not_canonicalized():
    with config.override(jax_enable_x64=False):
        assert dtypes.dtype("float64") == F64
        assert dtypes.dtype(np.int64) == I64
        assert dtypes.dtype(np.zeros(2, np.float64)) == F64
        assert dtypes.dtype(np.float16(1)) == F16
        assert dtypes.dtype("bfloat16") == BF16
        assert dtypes.dtype(Traced(np.uint8)) == U8
        assert dtypes.dtype(dtypes.float0) == dtypes.float0


@pytest.mark.parametrize("bad, shown", [
    ("nonsense", "'nonsense'"),
    (None, "None"),
    ("U3", "'U3'"),
    (object, "object"),
    (np.zeros(2, "datetime64[s]"), "datetime64"),
])
def test_dtype_rejects_non_dtypes_naming_the_input(bad, shown):
    with pytest.raises(TypeError, match="dtype") as info:
        dtypes.dtype(bad)
    assert shown in str(info.value)


def test_canonicalize_maps_64_to_32_only_without_x64():
    with config.override(jax_enable_x64=False):
        assert [dtypes.canonicalize_dtype(d) for d in (F64, I64, U64, C128)] == [F32, I32, U32, C64]
        assert dtypes.canonicalize_dtype("float64") == F32
        assert dtypes.canonicalize_dtype(float) == F32
        for d in set(ALL) - SIXTY_FOUR:
            assert dtypes.canonicalize_dtype(d) == d
    # The cache is per mode: flipping x64 must change the answer for the same key.
    with config.override(jax_enable_x64=True):
        for d in ALL:
            assert dtypes.canonicalize_dtype(d) == d
        assert dtypes.canonicalize_dtype("float64") == F64
        assert dtypes.canonicalize_dtype(float) == F64
    assert dtypes.canonicalize_dtype(np.float64) == F32
    assert dtypes.canonicalize_dtype(np.zeros(1, np.int64)) == I32  # arrays work, uncached
    assert dtypes.canonicalize_dtype(dtypes.float0) == dtypes.float0


def test_defaults(x64):
    assert dtypes.default_float_dtype() == (F64 if x64 else F32)
    assert dtypes.default_int_dtype() == (I64 if x64 else I32)
    assert dtypes.default_complex_dtype() == (C128 if x64 else C64)


# ---- promotion: hand-written key cases -----------------------------------------------------
# (a, b, result with x64 off, result with x64 on), from JAX's promotion table.
PROMOTE_CASES = [
    (B1, B1, B1, B1),
    (B1, U8, U8, U8),
    (U8, I8, I16, I16),
    (U16, I8, I32, I32),
    (U32, I8, I32, I64),  # no int64 out of 32-bit inputs without x64
    (U32, I32, I32, I64),
    (I64, U64, F64, F64),  # the float* node comes back as np.dtype(float), as in JAX
    (U64, I8, F64, F64),
    (U64, F16, F16, F16),
    (I32, F16, F16, F16),
    (BF16, F16, F32, F32),
    (BF16, F32, F32, F32),
    (I64, BF16, BF16, BF16),
    (F32, C64, C64, C64),
    (F64, C64, C128, C128),
    (BF16, C64, C64, C64),
    (U8, int, U8, U8),
    (F16, float, F16, F16),
    (I8, float, F64, F64),
    (BF16, complex, C64, C64),
    (B1, int, I64, I64),
    (int, float, F64, F64),
]


@pytest.mark.parametrize("a, b, want32, want64", PROMOTE_CASES)
def test_promote_types_key_cases(a, b, want32, want64):
    for x64, want in ((False, want32), (True, want64)):
        with config.override(jax_enable_x64=x64):
            assert dtypes.promote_types(a, b) == want, (a, b, x64)
            assert dtypes.promote_types(b, a) == want, (b, a, x64)


# (args, x64, expected dtype, expected weak flag)
RESULT_CASES = [
    ((2, 3.0), False, F32, True),
    ((2, 3.0), True, F64, True),
    ((2,), False, I32, True),
    ((True,), False, B1, False),  # Python bool is not weak
    ((True, 2), False, I32, True),
    ((I8, True), False, I8, False),
    ((F16, 2.0), False, F16, False),
    ((np.float16(1), 2.0), False, F16, False),
    ((I8, 300), False, I8, False),
    ((U8, 2), True, U8, False),
    ((np.zeros(2, np.int32), 2.0), False, F32, True),  # int array * 2.0 is weak float
    ((np.zeros(2, np.int64), 2.0), True, F64, True),
    ((BF16, 1j), False, C64, False),
    ((F64,), False, F32, False),  # inputs are canonicalized
    ((I64, U64), False, I32, False),  # ... before promotion: i32 v u32 = i32 without x64
    ((I64, U64), True, F64, True),  # JAX's lattice lands on the weak float* node here
    ((None,), False, F32, False),
    ((None, I8), True, F64, False),
    ((int, F16), False, F16, False),
    ((Traced(I16, True), Traced(I16, True)), False, I32, True),  # all weak: default of kind
    ((Traced(I16, True), U8), False, U8, False),
    ((Traced(F16, True), Traced(BF16, True)), True, F64, True),
    ((Traced(U8, True),), False, U32, True),
    ((Traced(F16, False), 2.0), False, F16, False),
    ((Flat(F16, True), Flat(F32, False)), False, F32, False),
    ((Flat(F16, True), Flat(I32, False)), False, F32, True),
    ((Traced(B1, True), 1), False, I32, True),
    ((Traced(B1, True),), False, B1, False),  # a weak flag on bool is dropped, as in JAX
    ((Traced(B1, True), Traced(B1, True)), True, B1, False),
    ((U32, I32, F16), True, F16, False),
    ((I8, U8, 2.0), False, F32, True),
]


@pytest.mark.parametrize("args, x64, want, want_weak", RESULT_CASES)
def test_result_type_key_cases(args, x64, want, want_weak):
    with config.override(jax_enable_x64=x64):
        assert dtypes.result_type(*args, return_weak_type_flag=True) == (want, want_weak)
        assert dtypes.result_type(*args) == want
        assert dtypes.result_type(*args[::-1], return_weak_type_flag=True) == (want, want_weak)


def test_result_type_errors():
    with pytest.raises(ValueError, match="at least one"):
        dtypes.result_type()
    with pytest.raises(dtypes.TypePromotionError, match="float0"):
        dtypes.result_type(dtypes.float0, F32)
    with pytest.raises(dtypes.TypePromotionError, match="float0"):
        dtypes.promote_types(dtypes.float0, F32)
    with pytest.raises(TypeError, match="nonsense"):
        dtypes.result_type("nonsense", F32)


def test_lattice_is_a_join_semilattice():
    # lub must be symmetric, idempotent and associative, else folding over args is wrong.
    # The strict lattice has no lub for most pairs (-1), the standard one for pairs with a
    # narrow type (float8_*, int4...): there, a fold that meets -1 stays failed, and the
    # other grouping must fail too.
    narrow = {dtypes._NODE_OF[d] for d in dtypes._NARROW}
    for strict, by_x64 in enumerate(dtypes._LUB):
        for table in by_x64:
            n = len(table)

            def join(a, b, table=table):
                return -1 if a < 0 or b < 0 else table[a][b]
            for a, b in itertools.product(range(n), repeat=2):
                assert table[a][b] == table[b][a]
                assert table[a][a] == a
                assert strict or table[a][b] >= 0 or {a, b} & narrow
                for c in range(n):
                    assert join(join(a, b), c) == join(a, join(b, c))


def test_weak_python_scalars_never_widen(x64):
    for d in ALL:
        if d == B1:
            continue
        d = dtypes.canonicalize_dtype(d)
        if dtypes.is_inexact(d):
            assert dtypes.result_type(d, 2.0) == d
            assert dtypes.result_type(d, 2) == d
        else:
            assert dtypes.result_type(d, 2) == d


# ---- predicates, info, names ---------------------------------------------------------------
def test_issubdtype_knows_bfloat16():
    assert dtypes.issubdtype(dtypes.bfloat16, dtypes.floating)
    assert dtypes.issubdtype("bfloat16", dtypes.inexact)
    assert dtypes.issubdtype(BF16, dtypes.number)
    assert dtypes.issubdtype(BF16, dtypes.bfloat16)
    assert not dtypes.issubdtype(BF16, dtypes.integer)
    assert not dtypes.issubdtype(BF16, dtypes.complexfloating)
    assert not dtypes.issubdtype(F32, dtypes.bfloat16)
    assert dtypes.issubdtype(np.uint8, dtypes.unsignedinteger)
    assert not dtypes.issubdtype(np.bool_, dtypes.integer)
    assert dtypes.issubdtype(np.bool_, np.bool_)


def test_predicates_partition_the_dtypes():
    for d in ALL:
        kinds = [dtypes.is_bool(d), dtypes.is_int(d), dtypes.is_float(d), dtypes.is_complex(d)]
        assert sum(kinds) == 1, d
        assert dtypes.is_inexact(d) == (dtypes.is_float(d) or dtypes.is_complex(d))
    assert dtypes.is_float(BF16) and dtypes.is_float("float16") and not dtypes.is_float(C64)
    assert dtypes.is_int(np.uint64) and not dtypes.is_int(bool)
    assert not dtypes.is_float(dtypes.float0) and not dtypes.is_inexact(dtypes.float0)


def test_finfo_iinfo():
    assert dtypes.finfo(dtypes.bfloat16).eps == 2.0**-7
    assert dtypes.finfo(BF16).bits == 16
    assert dtypes.finfo(np.zeros(2, np.float16)).eps == np.finfo(np.float16).eps
    assert dtypes.finfo(np.complex64).dtype == F32
    assert dtypes.iinfo(np.int8).max == 127
    assert dtypes.iinfo(np.zeros(1, np.uint16)).max == 65535
    with pytest.raises(ValueError):
        dtypes.iinfo(np.float32)


def test_to_inexact_dtype(x64):
    for d in (B1, U8, U16, U32, I8, I16, I32):
        assert dtypes.to_inexact_dtype(d) == F32  # narrow ints stay float32 even with x64
    assert dtypes.to_inexact_dtype(I64) == (F64 if x64 else F32)
    for d in (BF16, F16, F32, C64):
        assert dtypes.to_inexact_dtype(d) == d
    assert dtypes.to_inexact_dtype(F64) == (F64 if x64 else F32)


def test_short_names():
    names = ["bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64",
             "bf16", "f16", "f32", "f64", "c64", "c128"]
    assert [dtypes.short_name(d) for d in ALL] == names
    assert dtypes.short_name(dtypes.float0) == "float0"
    assert dtypes.short_name(np.float32) == "f32"


def test_import_is_light():
    # Load the modules under a bare `fnad` package so this checks them, not fnad/__init__.py.
    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('fnad'); pkg.__path__ = [{str(REPO / 'fnad')!r}]\n"
        "sys.modules['fnad'] = pkg\n"
        "import fnad.dtypes, fnad.config\n"
        "print(sorted(m for m in ('jax', 'numba', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


# ---- JAX as the oracle ---------------------------------------------------------------------
@pytest.fixture(params=[(False, "standard"), (True, "standard"), (False, "strict"),
                        (True, "strict")], ids=["x32", "x64", "x32-strict", "x64-strict"])
def jax_mode(request):
    """Put fnad and jax in the same x64 mode and dtype-promotion mode (standard, strict);
    give both back their old settings."""
    jax = pytest.importorskip("jax", reason="jax not installed")
    x64, promotion = request.param
    old = jax.config.jax_enable_x64, jax.config.jax_numpy_dtype_promotion
    jax.config.update("jax_enable_x64", x64)
    jax.config.update("jax_numpy_dtype_promotion", promotion)
    try:
        with config.override(jax_enable_x64=x64, jax_numpy_dtype_promotion=promotion), \
                warnings.catch_warnings():
            # jax warns when it truncates an explicit 64-bit dtype without x64; fnad is silent.
            warnings.simplefilter("ignore")
            yield jax
    finally:
        jax.config.update("jax_enable_x64", old[0])
        jax.config.update("jax_numpy_dtype_promotion", old[1])


def _outcome(fn):
    """fn()'s value, or "TypePromotionError" where it raises one (jax's and fnad's are both
    ValueErrors of that name)."""
    try:
        return fn()
    except ValueError as e:
        if type(e).__name__ != "TypePromotionError":
            raise
        return "TypePromotionError"


def test_promote_types_matches_jax_all_pairs(jax_mode):
    jnp = jax_mode.numpy
    nodes = [*ALL, *NARROW_FLOATS, *NARROW_INTS, int, float, complex]
    for a, b in itertools.product(nodes, repeat=2):
        got = _outcome(lambda: dtypes.promote_types(a, b))
        want = _outcome(lambda: jnp.promote_types(a, b))
        assert got == want, (a, b, got, want)


def test_result_type_matches_jax_dtype_and_scalar_pairs(jax_mode):
    jdt = jax_mode.dtypes
    args = [*ALL, *NARROW_FLOATS, int, float, complex, 1, 1.5, 1j, True, None]
    for a, b in itertools.product(args, repeat=2):
        got = _outcome(lambda: dtypes.result_type(a, b, return_weak_type_flag=True))
        want = _outcome(lambda: jdt.result_type(a, b, return_weak_type_flag=True))
        assert got == want, (a, b, got, want)
    for a in args:
        got = dtypes.result_type(a, return_weak_type_flag=True)
        assert got == jdt.result_type(a, return_weak_type_flag=True), a


def _weak_values(jax, x64):
    """(jax value, fnad stand-in) pairs covering every canonical dtype, weak and strong."""
    try:
        from jax._src.lax.lax import _convert_element_type
    except ImportError:
        pytest.skip("jax._src.lax.lax._convert_element_type moved; cannot build weak arrays")
    out = []
    for d, weak in itertools.product(ALL, (False, True)):
        if d in SIXTY_FOUR and not x64:
            continue
        if d == B1 and weak:
            continue  # jax refuses to make weak bools; fnad treats them as strong anyway
        value = _convert_element_type(0, d, weak_type=weak)
        assert value.dtype == d and value.aval.weak_type == weak
        out.append((value, Traced(d, weak)))
    return out


def test_result_type_matches_jax_weak_arrays_pairs_and_triples(jax_mode):
    x64 = config.jax_enable_x64
    values = _weak_values(jax_mode, x64)
    jdt = jax_mode.dtypes
    for k in (1, 2, 3):
        for combo in itertools.product(values, repeat=k):
            theirs = [j for j, _ in combo]
            ours = [f for _, f in combo]
            want = _outcome(lambda: jdt.result_type(*theirs, return_weak_type_flag=True))
            got = _outcome(lambda: dtypes.result_type(*ours, return_weak_type_flag=True))
            assert got == want, ([(o.aval.dtype, o.aval.weak_type) for o in ours], got, want)
            flat = [Flat(o.aval.dtype, o.aval.weak_type) for o in ours]
            assert _outcome(lambda: dtypes.result_type(*flat, return_weak_type_flag=True)) \
                == want


def test_result_type_matches_jax_mixed_triples(jax_mode):
    jdt = jax_mode.dtypes
    args = [*ALL, 1, 1.5, 1j, True]
    for combo in itertools.product(args, repeat=3):
        got = _outcome(lambda: dtypes.result_type(*combo, return_weak_type_flag=True))
        assert got == _outcome(lambda: jdt.result_type(*combo, return_weak_type_flag=True)), \
            combo


def test_canonicalize_and_scalar_dtypes_match_jax(jax_mode):
    jnp = jax_mode.numpy
    for d in ALL:
        assert dtypes.canonicalize_dtype(d) == jax_mode.dtypes.canonicalize_dtype(d)
    for v in (1, 1.5, 1j, True):
        assert dtypes.dtype(v) == jnp.asarray(v).dtype
        assert dtypes.dtype(type(v)) == jnp.zeros((), type(v)).dtype


def test_to_inexact_matches_jnp_sin(jax_mode):
    jnp = jax_mode.numpy
    for d in ALL:
        assert dtypes.to_inexact_dtype(d) == jnp.sin(jnp.zeros(2, d)).dtype, d


def test_issubdtype_matches_jax():
    jax = pytest.importorskip("jax", reason="jax not installed")
    kinds = [np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer,
             np.signedinteger, np.unsignedinteger, np.bool_, *ALL, *NARROW_FLOATS[:2],
             *NARROW_INTS[:2]]
    for a, b in itertools.product(ALL + NARROW_FLOATS + NARROW_INTS, kinds):
        assert dtypes.issubdtype(a, b) == jax.numpy.issubdtype(a, b), (a, b)


def jax_dtypes():
    import jax
    return jax.dtypes


def test_finfo_iinfo_match_jax():
    jnp = pytest.importorskip("jax.numpy", reason="jax not installed")
    for d in (BF16, F16, F32, F64, C64, C128, *NARROW_FLOATS):
        ours, theirs = dtypes.finfo(d), jnp.finfo(d)
        for field in ("bits", "eps", "max", "min", "tiny", "resolution", "dtype"):
            assert getattr(ours, field) == getattr(theirs, field), (d, field)
    for d in (U8, U16, U32, U64, I8, I16, I32, I64, *NARROW_INTS):
        assert (dtypes.iinfo(d).min, dtypes.iinfo(d).max) == (jnp.iinfo(d).min, jnp.iinfo(d).max)
    for d in ALL + NARROW_FLOATS + NARROW_INTS:
        assert dtypes.itemsize_bits(d) == jax_dtypes().itemsize_bits(d), d


def test_short_names_match_jax_printing():
    pytest.importorskip("jax", reason="jax not installed")
    try:
        from jax._src.core import ShapedArray
    except ImportError:
        pytest.skip("jax._src.core.ShapedArray moved")
    for d in [*ALL, *NARROW_FLOATS, dtypes.float0]:
        want = ShapedArray((), d).str_short(short_dtypes=True).removesuffix("[]")
        assert dtypes.short_name(d) == want


# ---- jax_numpy_dtype_promotion="strict" through the numpy API --------------------------------
_STRICT_CASES = {
    "f32 + 1.0": lambda m: m.ones(2, m.float32) + 1.0,
    "i32 + 1.0": lambda m: m.ones(2, m.int32) + 1.0,
    "f32 + f16": lambda m: m.ones(2, m.float32) + m.ones(2, m.float16),
    "i32 + i8": lambda m: m.ones(2, m.int32) + m.ones(2, m.int8),
    "where i8 i16": lambda m: m.where(True, m.ones(2, m.int8), m.ones(2, m.int16)),
    "i32 + 1": lambda m: m.ones(2, m.int32) + 1,
    "concatenate f32 i32": lambda m: m.concatenate([m.ones(2), m.ones(2, m.int32)]),
    "bool + i32": lambda m: m.ones(2, bool) + m.ones(2, m.int32),
    "add(1, 1.0)": lambda m: m.add(1, 1.0),
    "f32 scalar + 1j": lambda m: m.add(m.float32(1), 1j),
    "u8 + 3": lambda m: m.ones(2, m.uint8) + 3,
    "c64 + 1.0": lambda m: m.ones(2, m.complex64) + 1.0,
    "bool + 1": lambda m: m.ones(2, bool) + 1,
    "f32 @ i32": lambda m: m.ones(3) @ m.ones(3, m.int32),
    "mean i32": lambda m: m.mean(m.ones(3, m.int32)),
    "i32 / i32": lambda m: m.ones(2, m.int32) / m.ones(2, m.int32),
    "clip i8 0 5": lambda m: m.clip(m.ones(3, m.int8), 0, 5),
}


@pytest.mark.parametrize("case", list(_STRICT_CASES))
def test_strict_promotion_in_numpy_ops_matches_jax(case):
    jax = pytest.importorskip("jax", reason="jax not installed")
    import fnad
    import fnad.numpy as fnp
    f = _STRICT_CASES[case]

    def outcome(run):
        try:
            out = run()
        except ValueError as e:
            assert type(e).__name__ == "TypePromotionError", e
            return "TypePromotionError"
        return np.dtype(out.dtype), bool(getattr(out, "weak_type", False))
    with jax.numpy_dtype_promotion("strict"):
        want = outcome(lambda: f(jax.numpy))
    with fnad.numpy_dtype_promotion("strict"):
        got = outcome(lambda: f(fnp))
        jitted = outcome(lambda: fnad.jit(lambda: f(fnp))())
    assert got == want and jitted == want
    assert config.jax_numpy_dtype_promotion == "standard"


def test_strict_promotion_error_names_the_dtypes_and_retraces_jit():
    import fnad
    import fnad.numpy as fnp
    add = fnad.jit(lambda a, b: a + b)
    a, b = fnp.ones(2, fnp.float32), fnp.ones(2, fnp.int32)
    assert add(a, b).dtype == F32                     # standard: i32 joins f32
    with fnad.numpy_dtype_promotion("strict"):
        with pytest.raises(dtypes.TypePromotionError,
                           match=r"\(float32, int32\).*strict.*astype"):
            add(a, b)                                 # the cache key holds the mode
        with pytest.raises(dtypes.TypePromotionError, match=r"\(i8, u16\)"):
            dtypes.promote_types(np.int8, np.uint16)
        with pytest.raises(dtypes.TypePromotionError, match="weakly typed float32"):
            dtypes.result_type(np.int32, 1.5)
    assert add(a, b).dtype == F32
    with pytest.raises(ValueError, match="jax_numpy_dtype_promotion.*strict"):
        config.update("jax_numpy_dtype_promotion", "loose")


# Boolean results: comparisons keep their operands' weak type (a weak bool, as jax's); a
# weak bool joined with a weak bool is strong (result_type drops weak on bool); isinf,
# isposinf and signbit are strong whatever their input; isreal/iscomplex follow imag.
WEAK_BOOL_CASES = {
    "lt": lambda np_, lax: lambda x: x < 2.0,
    "lax.lt": lambda np_, lax: lambda x: lax.lt(x, x),
    "ne_self": lambda np_, lax: lambda x: x != x,
    "is_finite": lambda np_, lax: lambda x: lax.is_finite(x * 1.0),
    "isnan": lambda np_, lax: lambda x: np_.isnan(x),
    "isfinite": lambda np_, lax: lambda x: np_.isfinite(x),
    "isinf": lambda np_, lax: lambda x: np_.isinf(x),
    "isposinf": lambda np_, lax: lambda x: np_.isposinf(x * 1.0),
    "signbit": lambda np_, lax: lambda x: np_.signbit(x),
    "isreal": lambda np_, lax: lambda x: np_.isreal(x),
    "iscomplex": lambda np_, lax: lambda x: np_.iscomplex(x * 1j),
    "invert": lambda np_, lax: lambda x: ~(x < 1),
    "and": lambda np_, lax: lambda x: (x < 1) & (x < 2),
    "eq_bools": lambda np_, lax: lambda x: (x < 1) == (x < 2),
    "add_bools": lambda np_, lax: lambda x: (x < 1) + (x < 2),
    "logical_and": lambda np_, lax: lambda x: np_.logical_and(x < 1, x > 0),
    "times_int": lambda np_, lax: lambda x: (x < 2.0) * 2,
    "where": lambda np_, lax: lambda x: np_.where(x < 2.0, 1, 2),
    "where_bools": lambda np_, lax: lambda x: np_.where(x < 1, x < 2, x < 3),
    "sum": lambda np_, lax: lambda x: (x < 1).sum(),
}


@pytest.mark.parametrize("arg", [1.0, 1, np.float32(1)], ids=["float", "int", "f32"])
@pytest.mark.parametrize("case", sorted(WEAK_BOOL_CASES))
def test_weak_type_of_boolean_results_as_jax(case, arg):
    jax = pytest.importorskip("jax", reason="jax not installed")
    import fnad
    import fnad.numpy as fnp
    f = WEAK_BOOL_CASES[case]
    want = jax.eval_shape(f(jax.numpy, jax.lax), arg)
    got = fnad.eval_shape(f(fnp, fnad.lax), arg)
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    want = f(jax.numpy, jax.lax)(jax.numpy.asarray(arg))      # eager, on a (weak) array
    got = f(fnp, fnad.lax)(fnp.asarray(arg))
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)


# Functions whose weak type comes from how jax computes them (a sweep of fnad.numpy against
# jax.numpy on Python scalars found these).
WEAK_RESULT_CASES = {
    "power": lambda np_: lambda x, y: np_.power(x, y),
    "nextafter": lambda np_: lambda x, y: np_.nextafter(x, y),
    "spacing": lambda np_: lambda x, y: np_.spacing(x),
}


@pytest.mark.parametrize("args", [(1.5, 2.0), (2, 3), (1.5, 2), (np.float32(1.5), 2)],
                         ids=["floats", "ints", "float_int", "f32_int"])
@pytest.mark.parametrize("case", sorted(WEAK_RESULT_CASES))
def test_weak_type_of_results_as_jax(case, args):
    jax = pytest.importorskip("jax", reason="jax not installed")
    import fnad
    import fnad.numpy as fnp
    f = WEAK_RESULT_CASES[case]
    want = jax.eval_shape(f(jax.numpy), *args)
    got = fnad.eval_shape(f(fnp), *args)
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)

"""jit on every backend (numpy, numba, xla) against eager execution: the CI-sized check.

The `backend` fixture runs each test under `fnad.jit(f, backend=...)` on numpy (the
reference interpreter), numba (the code generator) and xla (jax.jit; skipped only where jax
is not installed) and compares with eager execution on the numpy backend:

- one spec per primitive of tests/specs (values);
- user functions of tests/user_functions.py: value_and_grad under jit, and grad of a jitted
  loss (jit's JVP and transpose rules on the backend);
- edge programs: literal and passthrough outputs, empty arrays, rank-0 and weakly typed
  values, NaN/inf, integer division, bools, float16/bfloat16 and complex (which numba
  leaves to NumPy), control flow with literal bodies and zero trips.

What "the same numbers" means per backend:

    numpy   bit for bit (the interpreter calls the eager impls).
    numba   bit for bit, except where it computes a function differently from NumPy
            (NUMBA_INEXACT): fnad's own vectorized exp, exp2, log, log1p, expm1, tanh,
            logistic, erf and erfc (≤ 3 ulp, tests/test_numba_math.py), integer_pow with
            |y| >= 3 or y = -2 (repeated multiplication, as XLA, where NumPy calls pow), and
            float sums over the trailing axes of a fused kernel (a vectorized accumulation
            order instead of NumPy's pairwise one); those within the spec's tolerance.
    xla     integers and bools bit for bit; floats within tolerance (XLA's own math
            functions, FMA contraction, its summation order).

The full suites run under jit with FNAD_TEST_BACKEND=numba or =xla (tests/checks.traced);
this module is the part that CI runs on every backend.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from test_primitives import _draw, _split, one_spec_per_primitive
from user_functions import CASES

import fnad
import fnad.lax as lax
import fnad.nn as fnn
import fnad.numpy as fnp
from fnad import tree_util
from fnad.primitives import elementwise as ew
from fnad.primitives import reductions as red

NUMBA_INEXACT = frozenset({ew.exp_p, ew.exp2_p, ew.log_p, ew.log1p_p, ew.expm1_p, ew.tanh_p,
                           ew.logistic_p, ew.erf_p, ew.erfc_p, ew.integer_pow_p,
                           red.reduce_sum_p})


@pytest.fixture(params=["numpy", "numba", "xla"])
def backend(request, monkeypatch):
    """The backend jit compiles with (numba raises on a kernel it cannot compile)."""
    name = request.param
    if name == "numba":
        pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")
        from fnad.backends.numba_cpu import codegen
        monkeypatch.setattr(codegen, "STRICT", True)
    if name == "xla":
        pytest.importorskip("jax", reason="the xla backend needs jax (not installed)")
    return name


def eager(f, *args):
    """f run eagerly on numpy-backend arrays (NumPy arguments would run NumPy's methods);
    Python scalars it returns as arrays (weakly typed), as jit returns them."""
    return tree_util.tree_map(fnp.asarray, f(*tree_util.tree_map(fnp.asarray, args)))


# float tolerance at least a few ulp of the dtype (xla computes float16 math in float32)
MIN_RTOL = {np.dtype(np.float16): 2e-3, np.dtype(fnp.bfloat16): 1.6e-2}


def assert_same(got, want, *, exact: bool, rtol=1e-6, atol=1e-6, scaled=False, what=""):
    """Same tree, shapes, dtypes and weak types; values bit for bit where `exact` (and for
    integers and bools always), else within rtol + atol (atol times max(1, max|want|) if
    `scaled`). NaN matches NaN."""
    g_leaves, g_tree = tree_util.tree_flatten(got)
    w_leaves, w_tree = tree_util.tree_flatten(want)
    assert g_tree == w_tree, f"{what}: tree {g_tree} != eager {w_tree}"
    for i, (g, w) in enumerate(zip(g_leaves, w_leaves)):
        where = f"{what} leaf {i}"
        assert isinstance(g, fnad.Array), f"{where}: jit returned {type(g).__name__}"
        if isinstance(w, fnad.Array):
            assert g.weak_type == w.weak_type, f"{where}: weak_type {g.weak_type} != eager's"
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), \
            f"{where}: {g.dtype}{list(g.shape)} != eager {w.dtype}{list(w.shape)}"
        if exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=where)
        else:
            scale = max(1.0, float(np.max(np.abs(w), initial=0.0))) if scaled else 1.0
            rt = max(rtol, MIN_RTOL.get(g.dtype, 0.0))
            if g.dtype in MIN_RTOL:
                g, w = g.astype(np.float32), w.astype(np.float32)
            np.testing.assert_allclose(g, w, rtol=rt, atol=atol * scale, equal_nan=True,
                                       err_msg=where)


# ---- one spec per primitive ------------------------------------------------------------------
PRIM_SPECS = one_spec_per_primitive()


@pytest.mark.parametrize("spec", PRIM_SPECS, ids=[s.prim.name for s in PRIM_SPECS])
def test_primitive_under_jit_matches_eager(spec, backend):
    f, dyn, _ = _split(spec, _draw(spec))
    want = f(*dyn)
    got = fnad.jit(f, backend=backend)(*dyn)
    exact = backend == "numpy" or (backend == "numba" and spec.prim not in NUMBA_INEXACT)
    assert_same(got, want, exact=exact, rtol=max(spec.rtol, 2e-6), atol=max(spec.atol, 1e-6),
                what=spec.id)


def test_every_primitive_with_a_spec_is_covered():
    assert len(PRIM_SPECS) >= 100                        # tests/specs covers each primitive


# ---- user functions under grad ---------------------------------------------------------------
USER_FUNCTIONS = ["mlp_gelu_tanh_classifier", "layer_norm", "causal_attention_neg_inf",
                  "softmax_xent_take_along_axis", "rnn_unrolled", "safe_sqrt",
                  "scatter_add_histogram", "batch_norm"]


def _loss(case, args):
    """The case as a scalar loss (Σ out·w over float outputs for fixed random w)."""
    fn = functools.partial(case.fn, fnp, fnn)
    if case.scalar:
        return fn
    out = eager(fn, *args)
    out = out[0] if case.has_aux else out
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    weights = [rng.standard_normal(x.shape).astype(x.dtype) for x in tree_util.tree_leaves(out)
               if fnp.issubdtype(x.dtype, fnp.floating)]

    def loss(*a):
        res = fn(*a)
        y, aux = res if case.has_aux else (res, None)
        leaves = [x for x in tree_util.tree_leaves(y) if fnp.issubdtype(x.dtype, fnp.floating)]
        total = sum(fnp.sum(x * w) for x, w in zip(leaves, weights))
        return (total, aux) if case.has_aux else total
    return loss


@pytest.mark.parametrize("name", USER_FUNCTIONS)
def test_user_function_value_and_grad_under_jit(name, backend):
    case = CASES[name]
    args = case.make(np.random.default_rng(zlib.crc32(name.encode())), np.float32)
    loss = _loss(case, args)
    vg = fnad.value_and_grad(loss, case.diff, has_aux=case.has_aux)
    want = eager(vg, *args)
    tol = dict(rtol=case.rtol, atol=case.atol, scaled=True)
    assert_same(fnad.jit(vg, backend=backend)(*args), want, exact=backend == "numpy",
                what=f"jit(vg({name}))", **tol)
    # grad of a jitted loss: linearize and transpose of jit's sub-program, which adds the
    # cotangents in another order than eager grad (so within tolerance on numpy too)
    g = fnad.grad(fnad.jit(loss, backend=backend), case.diff, has_aux=case.has_aux)
    assert_same(eager(g, *args), want[1], exact=False, what=f"grad(jit({name}))", **tol)


def test_user_functions_exist():
    assert set(USER_FUNCTIONS) <= set(CASES)


# ---- edge programs ---------------------------------------------------------------------------
f32, i32, u8 = np.float32, np.int32, np.uint8
_R = np.random.default_rng(7)
_X = _R.standard_normal((4, 6)).astype(f32)
_SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5]] * 3, f32)
_INT = _R.integers(-9, 9, (4, 6)).astype(i32)


def _rnn(h, xs, w):
    def body(h, x):
        h = fnp.maximum(h @ w + x, 0.0)
        return h, h.sum()
    return lax.scan(body, h, xs)


EDGES = {
    # outputs
    "literal-outputs": (lambda x: (x, 2.0, 3, True), [_X]),
    "passthrough-and-duplicate": (lambda x: (x, x * 2, x * 2), [_X]),
    "constant-output": (lambda x: (x + np.arange(6, dtype=f32), np.arange(3, dtype=i32)), [_X]),
    "view-output": (lambda x: (fnp.broadcast_to(x[0], (3, 6)), (x * 2).reshape(24)), [_X]),
    # rank 0, weak types
    "rank0-weak-float": (lambda x: x * 2 + 1, [3.0]),
    "rank0-weak-int": (lambda x: x * 2 + 1, [3]),
    "rank0-array": (lambda x: fnp.maximum(x, 0.5) * x, [np.float32(-2.0)]),
    "weak-scalar-with-uint8": (lambda x: x * 3 + 250, [_R.integers(0, 255, (4, 6)).astype(u8)]),
    # empty arrays
    "empty-chain": (lambda x: fnp.maximum(x * 2 + 1, 0.0), [np.zeros((3, 0), f32)]),
    "empty-reductions": (lambda x: (x.sum(-1), lax.reduce_max(x, (1,)), lax.reduce_min(x, (1,)),
                                    lax.reduce_prod(x, (1,)), (x > 0).any(-1), (x > 0).all(-1)),
                         [np.zeros((3, 0), f32)]),
    "empty-broadcast": (lambda x, y: x * y + y, [np.zeros((0, 6), f32), _X[0]]),
    # a fused product runs in order, as NumPy's; a*b + c and x / c round as NumPy
    "product-and-rounding": (lambda x, y: ((x * 0.01 + 1.0).prod(-1), x * y + x, x / 3.0,
                                           fnp.sqrt(y * y) / (x - y)),
                             [_R.standard_normal((3, 300)).astype(f32),
                              _R.standard_normal((3, 300)).astype(f32)]),
    # NaN and inf
    "nan-inf-max-min": (lambda x, y: (fnp.maximum(x, y), fnp.minimum(x, y), x.max(-1), x.min(-1),
                                      fnp.clip(x, -1.0, 1.0)),
                        [_SPECIAL, _SPECIAL[:, ::-1].copy()]),
    "nan-inf-tests": (lambda x: (fnp.where(fnp.isnan(x), 0.0, x), fnp.isfinite(x), x == x,
                                 fnp.sign(x), fnp.abs(x), fnp.floor(x), fnp.round(x)), [_SPECIAL]),
    "nan-inf-to-int": (lambda x: (x.astype(i32), x.astype(u8), x.astype(bool)), [_SPECIAL]),
    "argmax-nan": (lambda x: (fnp.argmax(x, -1), fnp.argmin(x, -1)), [_SPECIAL]),
    # integers and bools
    "int-div-rem": (lambda x, y: (lax.div(x, y), lax.rem(x, y), x // y, x % y),
                    [_INT, np.where(_INT == 0, 3, _INT).T.copy().reshape(4, 6)]),
    "int-div-by-zero-and-min": (lambda x, y: (lax.div(x, y), lax.rem(x, y)),
                                [np.array([[7, -7, -2**31, -2**31, 0, 5]] * 2, i32),
                                 np.array([[0, 0, -1, 0, 0, -1]] * 2, i32)]),
    "int-pow-wraps": (lambda x: (lax.integer_pow(x, 3), lax.integer_pow(x, 11)),
                      [np.array([[2**20, -7, 3, 2**31 - 1, -2**31, 1]] * 2, i32)]),
    "unsigned-sign-and-neg": (lambda x: (fnp.sign(x), -x, ~x, x >> 1),
                              [np.array([[0, 1, 254, 255, 7, 128]] * 2, u8)]),
    "bool-ops": (lambda x, y: ((x & y) | (x ^ ~y), x.sum(-1), lax.reduce_max(x, (1,)),
                               fnp.where(x, 1, 2)), [_X > 0, _X < 0.5]),
    # dtypes numba leaves to NumPy
    "float16-bfloat16": (lambda x: (x * 2 + 1, fnp.maximum(x, 0.0).sum(-1),
                                    x.astype(fnp.bfloat16) * 3),
                         [_X.astype(np.float16)]),
    "complex64": (lambda x: (x * x + 1j, fnp.abs(x), fnp.real(x) * 2),
                  [(_X + 1j * _X[::-1]).astype(np.complex64)]),
    # control flow
    "cond-literal-branches": (lambda p, x: lax.cond(p, lambda x: (x, 1.0), lambda x: (x * 2, 2.0),
                                                    x), [True, _X]),
    "switch-clamps-index": (lambda i, x: lax.switch(i, [lambda x: x, lambda x: x * 2], x),
                            [np.int32(-5), _X]),
    "scan-zero-length": (lambda c, xs: lax.scan(lambda c, x: (c + x, c * 2), c, xs),
                         [_X[0], np.zeros((0, 6), f32)]),
    "scan-literal-and-passthrough-ys": (lambda c, xs: lax.scan(lambda c, x: (c + x, (c, 1.0)), c,
                                                              xs), [_X[0], _X]),
    "scan-rnn-grad": (fnad.grad(lambda h, xs, w: _rnn(h, xs, w)[1].sum(), (0, 2)),
                      [_X[:2, :5], _R.standard_normal((3, 2, 5)).astype(f32),
                       _R.standard_normal((5, 5)).astype(f32) * 0.5]),
    "while-zero-and-some-trips": (lambda x: (lax.while_loop(lambda c: c[0] < 0,
                                                            lambda c: (c[0] + 1, c[1] * 2), (0, x)),
                                             lax.fori_loop(0, 3, lambda i, x: x * 1.5 + i, x)),
                                  [_X]),
}


# jit sums these in another order than eager: the weight gradient that the loop accumulated
# step by step is one product over all steps after it (fnad/passes/scan_hoist.py)
REASSOCIATED = {"scan-rnn-grad"}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_program_under_jit_matches_eager(name, backend):
    f, args = EDGES[name]
    want = eager(f, *args)
    got = fnad.jit(f, backend=backend)(*args)
    assert_same(got, want, exact=backend != "xla" and name not in REASSOCIATED, rtol=1e-6,
                atol=1e-6, what=name)


def test_float64_and_int64_under_x64(backend, x64):
    def f(x, n):
        return x * 0.1 + 1.0 / 3.0, fnp.maximum(x, 0.0).sum(-1), lax.integer_pow(n, 5), n // 3
    args = [_X.astype(np.float64), np.array([2**40, -2**62 + 1, 7, -7], np.int64)]
    want = eager(f, *args)
    assert np.asarray(want[0]).dtype == np.float64
    assert_same(fnad.jit(f, backend=backend)(*args), want, exact=backend == "numpy",
                rtol=1e-15, atol=1e-15, what="x64")


@pytest.mark.parametrize("name", ["numpy", "numba"])
def test_intermediates_are_released_after_their_last_use(name, scratch_primitives):
    # Programs on NumPy buffers drop each intermediate after its last read (the numpy
    # interpreter and the numba driver, which runs at once: conftest.py turns the
    # background compile off), so that its memory serves the next buffers.
    import weakref

    from fnad.primitives import Primitive, ShapedArray
    if name == "numba":
        pytest.importorskip("numba", reason="the numba backend needs numba (not installed)")
    seen, dead = [], []
    keep, probe = Primitive("keep_ref"), Primitive("probe_refs")
    for p in (keep, probe):
        p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype, x.weak_type))

    def keep_impl(x):
        out = np.array(x, copy=True)
        seen.append(weakref.ref(out))
        return out

    def probe_impl(x):
        dead.append([r() is None for r in seen])
        return np.array(x, copy=True)
    keep.def_impl(keep_impl, backend="numpy")
    probe.def_impl(probe_impl, backend="numpy")

    def f(x):
        a = keep.bind(x)                  # read once, by the sin below
        b = keep.bind(x * 3.0)            # read by the sin and again by the last add
        return probe.bind(fnp.sin(a) * fnp.cos(b)) + b
    x = np.linspace(-1, 1, 4096).astype(np.float32)
    want = np.sin(x) * np.cos(x * 3) + x * 3
    np.testing.assert_allclose(fnad.jit(f, backend=name)(x), want, rtol=1e-6, atol=1e-6)
    assert dead == [[True, False]]

"""The `cuda` backend (backends/cuda) against the numpy backend: buffers, eager kernels, GEMM,
jit with fused kernels, the primitives that go through the host, and the detection error.

Where a CUDA GPU is present these tests run in this process. Elsewhere they run once in numba's
CUDA simulator, in one pytest subprocess with NUMBA_ENABLE_CUDASIM=1
(`test_cases_in_cuda_simulator`): numba reads that variable when it is imported, so the
simulator cannot be switched on inside a process that has imported numba already; in this
process the cases are then skipped, saying so. Skipped altogether only where numba is
missing. The simulator runs a Python thread per CUDA thread, so arrays stay at <= 64
elements and matmuls tiny.

What the simulator cannot check (see backends/cuda): that numba compiles the generated
kernels for a real GPU (its CUDA typing of each expression), libdevice's math (the
simulator's `math` is NumPy's), timing, and the CuPy/cuBLAS path (CuPy is never used under
the simulator; the tiled matmul kernel is).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

numba = pytest.importorskip("numba", reason="the cuda backend needs numba (not installed)")

import fnad  # noqa: E402
import fnad.lax as lax  # noqa: E402
import fnad.nn as fnn  # noqa: E402
import fnad.numpy as fnp  # noqa: E402
from fnad import core, tree_util  # noqa: E402
from fnad.config import config  # noqa: E402
from fnad.primitives import elementwise as ew  # noqa: E402
from fnad.primitives import indexing as ix  # noqa: E402
from fnad.primitives import linalg as la  # noqa: E402
from fnad.primitives import logic as lg  # noqa: E402
from fnad.primitives import reductions as red  # noqa: E402
from fnad.primitives import shape_ops as so  # noqa: E402
from fnad.primitives import sorting as srt  # noqa: E402
from test_primitives import _draw, _split, one_spec_per_primitive  # noqa: E402

SIMULATOR = bool(numba.config.ENABLE_CUDASIM)


def _gpu_here() -> bool:
    if SIMULATOR:
        return False
    from numba import cuda
    try:
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return False


IN_PROCESS = SIMULATOR or _gpu_here()
pytestmark = pytest.mark.gpu
on_cuda = pytest.mark.skipif(
    not IN_PROCESS, reason="no CUDA GPU here: these cases run in numba's CUDA simulator, in "
                           "a subprocess (test_cases_in_cuda_simulator)")


# ---- helpers -----------------------------------------------------------------------------------
def on(name: str, x) -> core.Array:
    """x (a NumPy value or Python scalar) as an Array on backend `name`."""
    from fnad.backends import get_backend
    be = get_backend(name)
    aval = core.get_aval(x)
    return core.Array(be.device_put(core.canonicalize_value(x, aval)), aval, be)


def assert_same(got, want, rtol=2e-6, atol=1e-6, what=""):
    """got (from cuda) has want's structure, avals and values; floats within tolerance."""
    g_leaves, g_tree = tree_util.tree_flatten(got)
    w_leaves, w_tree = tree_util.tree_flatten(want)
    assert g_tree == w_tree, what
    for g, w in zip(g_leaves, w_leaves):
        assert type(g) is core.Array and g.backend == "cuda", f"{what}: {g!r} is not on cuda"
        assert (g.shape, g.dtype, g.weak_type) == (w.shape, w.dtype, w.weak_type), \
            f"{what}: {g.aval} != the numpy backend's {w.aval}"
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, what
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


_counting = [False]             # run_both counts host copies while f runs on cuda


@pytest.fixture
def host_trips(monkeypatch):
    """A list that grows by one each time a device buffer is copied to the host while a
    function runs on cuda in `run_both` (reading results back is not counted)."""
    from fnad.backends.cuda import runtime as rt
    trips = []
    to_host = rt.to_host

    def counting(buf):
        if _counting[0] and rt.is_device(buf):
            trips.append(buf.shape)
        return to_host(buf)
    monkeypatch.setattr(rt, "to_host", counting)
    return trips


def run_both(f, *xs):
    """(f on cuda Arrays, f on numpy-backend Arrays), with new constants on each backend."""
    ins = [on("cuda", x) for x in xs]
    _counting[0] = True
    try:
        with config.override(jax_default_backend="cuda"):
            got = fnad.block_until_ready(f(*ins))
    finally:
        _counting[0] = False
    return got, f(*[on("numpy", x) for x in xs])


rng = np.random.default_rng(0)
f32, i32 = np.float32, np.int32


def normal(*shape, dt=f32):
    return rng.standard_normal(shape).astype(dt)


# ---- buffers -----------------------------------------------------------------------------------
ROUND_TRIP = [np.bool_, np.int8, np.int32, np.uint8, np.uint32, np.float16, np.float32,
              fnp.bfloat16]


@on_cuda
@pytest.mark.parametrize("dt", ROUND_TRIP, ids=lambda d: np.dtype(d).name)
def test_device_put_round_trip(dt):
    from fnad.backends.cuda import runtime as rt
    for shape in [(2, 3), (), (0, 4), (5,)]:
        x = (rng.standard_normal(shape) * 3).astype(dt)
        a = fnad.device_put(x, "cuda")
        assert a.backend == "cuda" and a.shape == shape and a.dtype == np.dtype(dt)
        assert rt.is_device(a._value) == (np.dtype(dt) in rt.ON_DEVICE)
        back = np.asarray(a)
        assert back.dtype == np.dtype(dt) and back.shape == shape
        np.testing.assert_array_equal(back, x)
        host = fnad.device_put(a, "numpy")
        assert host.backend == "numpy"
        np.testing.assert_array_equal(np.asarray(host), x)


@on_cuda
def test_device_put_x64_pytrees_and_devices(x64):
    tree = {"a": np.arange(5, dtype=np.int64),
            "b": (np.float64(2.5), np.ones((2, 2), np.complex64)), "c": 3.0}
    out = fnad.device_put(tree, "cuda")
    for got, want in zip(tree_util.tree_leaves(out), tree_util.tree_leaves(tree)):
        assert got.backend == "cuda"
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert out["c"].weak_type
    assert fnad.block_until_ready(out) is out
    (dev, *_) = fnad.devices("cuda")
    assert dev.backend == "cuda" and dev.platform == "gpu"
    assert fnad.device_put(out["a"], dev) is out["a"]


# ---- eager elementwise -------------------------------------------------------------------------
UNARY = {
    "neg": (lax.neg, None), "abs": (lax.abs, None), "sign": (lax.sign, None),
    "floor": (lax.floor, None), "ceil": (lax.ceil, None), "round": (lax.round, None),
    "exp": (lax.exp, None), "exp2": (fnp.exp2, None), "log": (lax.log, "pos"),
    "log1p": (lax.log1p, "pos"), "expm1": (lax.expm1, None), "tanh": (lax.tanh, None),
    "logistic": (lax.logistic, None), "sqrt": (lax.sqrt, "pos"), "rsqrt": (lax.rsqrt, "pos"),
    "sin": (lax.sin, None), "cos": (lax.cos, None), "tan": (lax.tan, "unit"),
    "asin": (lax.asin, "unit"), "acos": (lax.acos, "unit"), "atan": (lax.atan, None),
    "sinh": (lax.sinh, None), "cosh": (lax.cosh, None), "asinh": (lax.asinh, None),
    "atanh": (lax.atanh, "unit"), "erf": (lax.erf, None), "erfc": (lax.erfc, None),
    "square": (lax.square, None), "is_finite": (lax.is_finite, None),
    "integer_pow": (lambda x: lax.integer_pow(x, 3), None),
}


def _unary_input(domain):
    x = normal(4, 6) * 2
    if domain == "pos":
        x = np.abs(x) + f32(0.1)
    elif domain == "unit":
        x = np.tanh(x) * f32(0.9)
    x[0, :3] = [0.5, -1.5, 2.5]                      # halfway cases of round
    return x


@on_cuda
@pytest.mark.parametrize("name", list(UNARY))
def test_eager_unary_runs_on_device(name, host_trips):
    fn, domain = UNARY[name]
    got, want = run_both(fn, _unary_input(domain))
    assert not host_trips, f"{name} went through the host"
    assert_same(got, want, rtol=4e-6, atol=1e-6, what=name)


BINARY = [("add", lax.add), ("sub", lax.sub), ("mul", lax.mul), ("div", lax.div),
          ("max", lax.max), ("min", lax.min), ("rem", lax.rem), ("pow", lax.pow),
          ("atan2", lax.atan2), ("eq", lax.eq), ("ne", lax.ne), ("lt", lax.lt),
          ("le", lax.le), ("gt", lax.gt), ("ge", lax.ge)]


@on_cuda
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_eager_binary_with_scalar_broadcasting(name, fn, host_trips):
    x, y = normal(3, 5), normal(3, 5)
    if name == "pow":
        x = np.abs(x) + f32(0.5)
    y[0, 0] = x[0, 0]                                          # a tie for the comparisons
    s = f32(0.75)
    for args in [(x, y), (x, s), (s, y)]:
        got, want = run_both(fn, *args)
        assert_same(got, want, rtol=4e-6, what=name)
    assert not host_trips, f"{name} went through the host"


@on_cuda
def test_eager_integer_and_bool_ops_are_exact(host_trips):
    a = np.array([[7, -7, 7, -7, 0, 5], [9, -9, 100, -3, 1, 2]], i32)
    b = np.array([[2, 2, -2, -2, 3, 0], [4, 4, -7, 3, -1, 0]], i32)   # with x / 0 (= 0)
    for fn in [lax.add, lax.sub, lax.mul, lax.div, lax.rem, lax.max, lax.min,
               lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lax.lt, lax.eq,
               lambda u, v: lax.integer_pow(u, 3), lambda u, v: lax.neg(u),
               lambda u, v: lax.bitwise_not(v), lambda u, v: lax.abs(u)]:
        got, want = run_both(fn, a, b)
        assert_same(got, want)
    p, q = a > 0, b > 0
    for fn in [lax.bitwise_and, lax.bitwise_or, lax.bitwise_xor, lambda u, v: lax.bitwise_not(u)]:
        got, want = run_both(fn, p, q)
        assert_same(got, want)
    got, want = run_both(lambda u: u * np.uint8(200), np.arange(6, dtype=np.uint8))   # wraps
    assert_same(got, want)
    assert not host_trips


@on_cuda
def test_eager_select_clamp_casts_and_nan(host_trips):
    x = normal(4, 5) * 4
    x[0, :4] = [np.nan, np.inf, -np.inf, 3e9]
    which = np.arange(20, dtype=i32).reshape(4, 5) % 3
    cases = [
        (lambda w, u: lax.select_n(u > 0, u, -u), which, x),          # bool `which`
        (lambda w, u: lax.select_n(w, u, u * 2, u * 3), which, x),    # int32 `which`, 3 cases
        (lambda w, u: lax.clamp(f32(-1.0), u, f32(2.0)), which, x),
        (lambda w, u: lax.convert_element_type(u, np.int32), which, x),  # saturates; NaN -> 0
        (lambda w, u: lax.convert_element_type(u, np.uint8), which, x),
        (lambda w, u: lax.convert_element_type(u, np.bool_), which, x),
        (lambda w, u: lax.convert_element_type(w, np.float32), which, x),
        (lambda w, u: lax.convert_element_type(u > 1, np.float32), which, x),
        (lambda w, u: lax.max(u, f32(0.5)), which, x),                  # NaN propagates
        (lambda w, u: lax.is_finite(u), which, x),
        (lambda w, u: fnp.where(u > 0, u, 0.0), which, x),
    ]
    for i, (fn, *args) in enumerate(cases):
        got, want = run_both(fn, *args)
        assert_same(got, want, what=f"case {i}")
    assert not host_trips


# ---- reductions --------------------------------------------------------------------------------
@on_cuda
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()], ids=str)
def test_eager_reductions_over_any_axes(axes, host_trips):
    x = normal(2, 3, 4)
    n = (np.arange(24, dtype=i32).reshape(2, 3, 4) * 7) % 11 - 5
    for fn in [lax.reduce_sum, lax.reduce_max, lax.reduce_min, lax.reduce_prod]:
        for v in (x, n):
            got, want = run_both(lambda u, fn=fn: fn(u, axes=axes), v)
            assert_same(got, want, rtol=1e-5, what=f"{fn.__name__} {v.dtype}")
    for fn in [lax.reduce_and, lax.reduce_or]:
        got, want = run_both(lambda u, fn=fn: fn(u > 0, axes=axes), x)
        assert_same(got, want)
    assert not host_trips


@on_cuda
def test_eager_reductions_of_empty_and_nan():
    x = np.ones((0, 3), f32)
    for fn in [lambda u: fnp.sum(u, axis=0), lambda u: fnp.prod(u, axis=0),
               lambda u: lax.reduce_max(u, axes=(0,)), lambda u: fnp.sum(u[:, :0], axis=1)]:
        got, want = run_both(fn, x)
        assert_same(got, want)
    y = normal(3, 4)
    y[1, 2] = np.nan
    got, want = run_both(lambda u: (fnp.max(u, axis=1), fnp.mean(u, axis=0)), y)
    assert_same(got, want)


# ---- dot_general -------------------------------------------------------------------------------
DOTS = [
    ("matmul", lambda a, b: a @ b, (5, 7), (7, 3)),
    ("tiles", lambda a, b: a @ b, (9, 10), (10, 6)),                      # partial tiles
    ("batched", lambda a, b: a @ b, (2, 3, 4), (2, 4, 5)),
    ("transposed", lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))), (4, 3),
     (4, 5)),                                                               # aᵀ @ b
    ("batch_last", lambda a, b: fnp.einsum("mkb,knb->bmn", a, b), (3, 4, 2), (4, 2, 2)),
    ("vector", lambda a, b: fnp.dot(a, b), (6,), (6,)),
    ("matvec", lambda a, b: a @ b, (3, 6), (6,)),
    ("k_zero", lambda a, b: a @ b, (3, 0), (0, 2)),
]


@on_cuda
@pytest.mark.parametrize("name,fn,sa,sb", DOTS, ids=[d[0] for d in DOTS])
def test_dot_general_on_device(name, fn, sa, sb, host_trips):
    got, want = run_both(fn, normal(*sa), normal(*sb))
    assert not host_trips, f"{name} went through the host"
    assert_same(got, want, rtol=1e-5, atol=1e-5, what=name)


@on_cuda
def test_dot_general_integers_and_float16(host_trips):
    a = (np.arange(12, dtype=i32).reshape(3, 4) * 3) % 7 - 3
    b = (np.arange(8, dtype=i32).reshape(4, 2) * 5) % 9 - 4
    got, want = run_both(lambda u, v: u @ v, a, b)
    assert_same(got, want)
    assert not host_trips
    h = normal(3, 4, dt=np.float16), normal(4, 2, dt=np.float16)
    got, want = run_both(lambda u, v: u @ v, *h)                  # computed in float32
    assert_same(got, want, rtol=2e-3, atol=2e-3)


# ---- shape ops ---------------------------------------------------------------------------------
@on_cuda
def test_shape_ops_as_views_and_strided_copies(host_trips):
    x = normal(3, 4, 2)
    fns = [lambda u: fnp.transpose(u, (2, 0, 1)), lambda u: u.reshape(4, 6),
           lambda u: fnp.broadcast_to(u[:, :1, :], (3, 5, 2)), lambda u: u[1:, ::2, 1],
           lambda u: u[::-1, 1:3], lambda u: fnp.flip(u, (0, 2)),
           lambda u: fnp.expand_dims(u, 1).squeeze(1), lambda u: u.T + 1.0,
           lambda u: fnp.broadcast_to(u[0, 0, 0], (2, 3))]
    for i, fn in enumerate(fns):
        got, want = run_both(fn, x)
        assert_same(got, want, what=f"shape op {i}")
    assert not host_trips


@on_cuda
def test_concatenate_pad_dynamic_slices_and_iota_on_device(host_trips):
    x, y = normal(3, 4), normal(3, 2)
    i = np.int32(1)
    fns = [
        (lambda u, v, k: fnp.concatenate([u, v, u], axis=1)),
        (lambda u, v, k: fnp.concatenate([u, u[:1]], axis=0)),
        (lambda u, v, k: lax.pad(u, f32(-1.0), ((1, 2, 0), (0, 1, 1)))),
        (lambda u, v, k: lax.pad(u, f32(9.0), ((-1, 1, 1), (2, -3, 0)))),     # cut-offs
        (lambda u, v, k: lax.dynamic_slice(u, (k, k + 5), (2, 2))),          # start clamped
        (lambda u, v, k: lax.dynamic_update_slice(u, v, (k, k))),
        (lambda u, v, k: lax.dynamic_update_slice(u, v, (-4, 7))),           # both clamped
        (lambda u, v, k: lax.broadcasted_iota(np.int32, (3, 4), 1) + u.astype(np.int32)),
        (lambda u, v, k: lax.broadcasted_iota(np.float32, (2, 3, 2), 0) * 0.5),
    ]
    for n, fn in enumerate(fns):
        got, want = run_both(fn, x, y, i)
        assert_same(got, want, what=f"case {n}")
    # the dynamic ones read only their start indices (rank-0) back to the host
    assert all(shape == () for shape in host_trips), host_trips


# ---- primitives that go through the host -------------------------------------------------------
@on_cuda
def test_unsupported_primitives_go_through_the_host(host_trips):
    from fnad.backends.cuda import eager
    x = normal(3, 5)
    for prim in (srt.sort_p, ix.gather_p, ew.cbrt_p, red.argmax_p):
        assert prim in eager.HOST, prim.name
    for prim in (ew.sin_p, red.reduce_sum_p, la.dot_general_p, lg.select_n_p, so.transpose_p,
                 so.concatenate_p):
        assert prim not in eager.HOST, prim.name
    for fn in [lambda u: fnp.sort(u, axis=1), lambda u: fnp.cumsum(u, axis=0),
               lambda u: u[np.array([2, 0])], lambda u: fnp.cbrt(u),
               lambda u: fnp.argmax(u, axis=1)]:
        host_trips.clear()
        got, want = run_both(fn, x)
        assert host_trips, "expected a copy to the host"
        assert_same(got, want, rtol=1e-6)
    b = fnad.device_put(normal(4).astype(fnp.bfloat16), "cuda")  # bfloat16 lives on the host
    assert isinstance(b._value, np.ndarray) and (b + b).backend == "cuda"


PRIM_SPECS = one_spec_per_primitive()


@on_cuda
@pytest.mark.parametrize("spec", PRIM_SPECS, ids=[s.prim.name for s in PRIM_SPECS])
def test_every_primitive_eagerly_on_cuda(spec):
    """One spec of each primitive (tests/specs), its inputs on cuda: the numpy backend's
    values, on device or through the host."""
    f, dyn, _ = _split(spec, _draw(spec))
    got, want = run_both(f, *dyn)
    assert_same(got, want, rtol=max(spec.rtol, 4e-6), atol=max(spec.atol, 1e-6))


# ---- jit ---------------------------------------------------------------------------------------
def mlp_loss(params, x, y):
    """Mean cross-entropy of a 2-layer MLP: x [N, C] -> [N, F] -> [N, K] logits."""
    h = fnn.gelu(x @ params["w1"] + params["b1"])                       # [N, F]
    logits = h @ params["w2"] + params["b2"]                            # [N, K]
    logp = fnn.log_softmax(logits)
    return -fnp.mean(fnp.take_along_axis(logp, y[:, None], axis=1))


def _mlp_inputs():
    N, C, F, K = 6, 4, 8, 3
    params = {"w1": normal(C, F) * 0.5, "b1": normal(F) * 0.1, "w2": normal(F, K) * 0.5,
              "b2": normal(K) * 0.1}
    return params, normal(N, C), np.array([0, 2, 1, 1, 0, 2], i32)


@on_cuda
def test_jit_mlp_loss_and_grad_on_cuda():
    params, x, y = _mlp_inputs()
    want = fnad.value_and_grad(mlp_loss)(*[tree_util.tree_map(fnp.asarray, a)
                                           for a in (params, x, y)])
    step = fnad.jit(fnad.value_and_grad(mlp_loss), backend="cuda")
    args = fnad.device_put((params, x, y), "cuda")
    got = step(*args)
    assert_same(got, want, rtol=1e-5, atol=1e-6, what="value_and_grad")
    got2 = step(*args)                                        # the cached program again
    assert_same(got2, want, rtol=1e-5, atol=1e-6, what="second call")
    compiled = step.lower(*args).compile().runtime_executable()
    assert compiled.n_kernels >= 3 and "cuda.grid(1)" in compiled.source
    # numpy-backend arguments are moved to the device by jit
    loss = fnad.jit(mlp_loss, backend="cuda")(*[tree_util.tree_map(fnp.asarray, a)
                                               for a in (params, x, y)])
    assert_same(loss, want[0], rtol=1e-5, what="loss from host arguments")


@on_cuda
def test_jit_fuses_softmax_into_one_kernel():
    def softmax_rows(x):                                      # max, exp-sum, divide: 1 kernel
        e = fnp.exp(x - fnp.max(x, axis=1, keepdims=True))
        return e / fnp.sum(e, axis=1, keepdims=True)
    x = normal(4, 7)
    f = fnad.jit(softmax_rows, backend="cuda")
    got = f(fnad.device_put(x, "cuda"))
    assert_same(got, softmax_rows(fnp.asarray(x)), rtol=1e-6)
    assert f.lower(x).compile().runtime_executable().n_kernels == 1


@on_cuda
def test_jit_control_flow_and_debug_nans():
    def f(x):
        c = lax.fori_loop(0, 3, lambda i, c: c * 0.5 + fnp.sin(c), x)
        ys = lax.scan(lambda c, xi: (c + xi, c * xi), fnp.zeros(x.shape[1:]), x)
        return c, ys
    x = normal(3, 4)
    got = fnad.jit(f, backend="cuda")(fnad.device_put(x, "cuda"))
    assert_same(got, f(fnp.asarray(x)), rtol=1e-6)
    with config.override(jax_debug_nans=True):
        g = fnad.jit(lambda u: fnp.log(u) * 2.0, backend="cuda")
        with pytest.raises(FloatingPointError, match="nan"):
            g(fnad.device_put(np.array([1.0, -1.0], f32), "cuda"))


@on_cuda
def test_jit_pure_callback_goes_through_the_host():
    sds = fnad.ShapeDtypeStruct((4,), f32)

    def f(u):
        return fnad.pure_callback(lambda v: np.cos(np.asarray(v)) * 2, sds, u * 3) + 1.0
    x = normal(4)
    got = fnad.jit(f, backend="cuda")(fnad.device_put(x, "cuda"))
    assert got.backend == "cuda"
    assert_same(got, fnp.asarray(np.cos(x * 3.0) * 2 + 1.0), rtol=1e-6)


@on_cuda
def test_numba_cuda_registries_import_without_numpys_row_stack(monkeypatch):
    """numba-cuda <= 0.30.4 overloads np.row_stack at import, which NumPy 2.5 removed: the
    runtime imports those modules with a stand-in there, and takes it away again."""
    from fnad.backends.cuda import runtime as rt
    seen = []
    monkeypatch.delattr(np, "row_stack", raising=False)
    monkeypatch.setattr(rt.importlib, "import_module",
                        lambda name: seen.append((name, callable(getattr(np, "row_stack",
                                                                         None)))))
    rt.import_target_registries()
    assert seen == [(name, True) for name in rt._TARGET_MODULES]
    assert not hasattr(np, "row_stack")
    monkeypatch.setattr(np, "row_stack", np.vstack, raising=False)   # older NumPy: no-op
    seen.clear()
    rt.import_target_registries()
    assert seen == [] and np.row_stack is np.vstack


# ---- detection ---------------------------------------------------------------------------------
def test_no_cuda_device_is_a_clear_import_error(monkeypatch):
    """Without a GPU this is the real error; with one (or the simulator), a machine without
    one is faked by patching numba's availability check."""
    from fnad import backends
    if IN_PROCESS:
        from numba import cuda

        from fnad.backends.cuda import runtime as rt
        monkeypatch.setattr(rt, "SIMULATOR", False)
        monkeypatch.setattr(cuda, "is_available", lambda: False)
    monkeypatch.delitem(sys.modules, "fnad.backends.cuda", raising=False)  # restored after
    monkeypatch.delitem(backends._loaded, "cuda", raising=False)
    words = ("the 'cuda' backend needs an NVIDIA GPU with a CUDA driver and numba-cuda",
             "no CUDA device found")
    for attempt in (lambda: fnad.devices("cuda"),
                    lambda: fnad.device_put(np.ones(2, f32), "cuda"),
                    lambda: fnad.jit(lambda u: u + 1, backend="cuda")(np.ones(2, f32))):
        with pytest.raises(ImportError) as info:
            attempt()
        for w in words:
            assert w in str(info.value)
    assert "cuda" not in {d.backend for d in fnad.devices()}


# ---- the simulator run -------------------------------------------------------------------------
@pytest.mark.skipif(IN_PROCESS, reason="the cases ran in this process (a CUDA GPU or numba's "
                                       "simulator is here)")
def test_cases_in_cuda_simulator():
    """Every case above, in numba's CUDA simulator: one pytest subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(NUMBA_ENABLE_CUDASIM="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "pytest", os.path.abspath(__file__), "-q", "-p",
           "no:cacheprovider", "-k", "not test_cases_in_cuda_simulator"]
    res = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    summary = out.strip().splitlines()[-1] if out.strip() else ""
    assert res.returncode == 0, f"the simulator run failed:\n{out[-6000:]}"
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary \
        and "failed" not in summary, f"unexpected simulator summary: {summary}"

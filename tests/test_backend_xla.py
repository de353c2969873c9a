"""The `xla` backend: eager impls against the numpy reference, `compile` against
eval_jaxpr, x64 mirroring, and the `metal` backend's error where jax-metal is absent.

Eagerly, every spec of the primitive table (tests/specs/) runs with its inputs on the
xla backend and must give the numpy backend's values, shapes and dtypes; a second table
pins the corners where XLA's own semantics differ from NumPy's (division by zero, shift
amounts, out-of-bounds indices, NaN ordering). `compile(closed)` runs whole jaxprs —
scan, cond, while, custom_jvp/vjp, checkpoint, nested jit, debug callbacks, gradients
through them — and must agree with fnad.ir.eval_jaxpr.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax not installed: the xla backend runs on jax")

import fnad  # noqa: E402
import fnad.numpy as fnp  # noqa: E402
from fnad import core, lax, tree_util  # noqa: E402
from fnad.backends import backend_names, backends_with_impl, get_backend  # noqa: E402
from fnad.config import config  # noqa: E402
from fnad.ir import ClosedJaxpr, eval_jaxpr  # noqa: E402
from fnad.primitives import decompositions as dec  # noqa: E402
from fnad.primitives import elementwise as ew  # noqa: E402
from fnad.primitives import indexing as ix  # noqa: E402
from fnad.primitives import reductions as red  # noqa: E402
from fnad.remat import checkpoint_name  # noqa: E402
from test_primitives import IDS, SPECS, _draw, _split  # noqa: E402

XLA = get_backend("xla")
NUMPY = get_backend("numpy")


def on(backend, x) -> core.Array:
    """`x` (a NumPy value or Python scalar) as an fnad Array on `backend`."""
    aval = core.get_aval(x)
    return core.Array(backend.device_put(core.canonicalize_value(x, aval)), aval, backend)


def assert_same(out, ref, rtol=1e-6, atol=1e-6):
    """`out` (from xla) has ref's structure, avals and values; every leaf lives on xla."""
    outs, refs = tree_util.tree_leaves(out), tree_util.tree_leaves(ref)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert type(o) is core.Array and o.backend == "xla", f"{o!r} did not run on xla"
        assert (o.shape, o.dtype, o.weak_type) == (r.shape, r.dtype, r.weak_type), \
            f"{o.aval} != the numpy backend's {r.aval}"
        assert np.asarray(o).dtype == o.dtype, "the jax buffer's dtype differs from the aval"
        o, r = np.asarray(o), np.asarray(r)
        if o.dtype.kind in "biu":
            np.testing.assert_array_equal(o, r)
        else:
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)


# ---- eager: the spec table on xla ------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_spec_on_xla_matches_numpy_backend(spec):
    f, dyn, _ = _split(spec, _draw(spec))
    ref = f(*dyn)                                     # NumPy inputs: the numpy backend
    with config.override(jax_default_backend="xla"):  # constants made inside go to xla too
        out = f(*[on(XLA, x) for x in dyn])
    assert_same(out, ref, rtol=max(spec.rtol, 1e-6), atol=max(spec.atol, 1e-6))


def _first_order():
    return sorted((p for p in core.abstract_eval_rules if p not in core.eager_rules),
                  key=lambda p: p.name)


def test_every_first_order_primitive_has_an_xla_impl():
    missing = [p.name for p in _first_order() if p not in XLA.impl_rules]
    assert not missing, f"primitives without an xla implementation: {missing}"
    assert "xla" in backend_names() and "metal" in backend_names()
    assert "xla" in backends_with_impl(ew.sin_p)


# ---- eager: where XLA's semantics differ from NumPy's, the reference wins ---------------------
f32, i32, u8 = np.float32, np.int32, np.uint8
_nan_mix = np.array([np.nan, -0.0, 0.0, -np.inf, 1.0, np.nan, -1.0, np.inf], f32)
_idx = np.array([[-3], [0], [2], [9]], i32)                      # in and out of bounds
_gdn = ix.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                 start_index_map=(0,))
_sdn = ix.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0,))
CORNERS = {
    "div-int-by-zero": (lambda x, y: lax.div(x, y),
                        [np.array([7, -7, 5, -9, 0], i32), np.array([0, 0, 2, 2, 0], i32)]),
    "rem-int-by-zero": (lambda x, y: lax.rem(x, y),
                        [np.array([7, -7, 5, -9], i32), np.array([0, 0, 3, 4], i32)]),
    "shift-right-arith-neg-amount": (lambda x, y: lax.shift_right_arithmetic(x, y),
                                     [np.array([-8, 8, -1, 64], i32),
                                      np.array([-1, -5, 40, 3], i32)]),
    "shift-right-arith-u8": (lambda x, y: lax.shift_right_arithmetic(x, y),
                             [np.array([200, 7, 255], u8), np.array([1, 9, 3], u8)]),
    "shift-left-out-of-range": (lambda x, y: lax.shift_left(x, y),
                                [np.array([3, 3, 3], i32), np.array([-1, 32, 31], i32)]),
    "shift-right-logical-out-of-range": (lambda x, y: lax.shift_right_logical(x, y),
                                         [np.array([-8, -8, 64], i32),
                                          np.array([-2, 33, 3], i32)]),
    "convert-nan-inf-to-int": (lambda x: lax.convert_element_type(x, np.int32),
                               [np.array([np.nan, np.inf, -np.inf, 3e9, -2.7, 2.7], f32)]),
    "convert-to-uint8": (lambda x: lax.convert_element_type(x, np.uint8),
                         [np.array([np.nan, -5.0, 300.0, 7.9], f32)]),
    "convert-complex-to-bool": (lambda x: lax.convert_element_type(x, np.bool_),
                                [np.array([0j, 1j, 2 + 0j], np.complex64)]),
    "max-min-nan": (lambda x, y: [lax.max(x, y), lax.min(x, y)],
                    [_nan_mix, _nan_mix[::-1].copy()]),
    "clamp-nan": (lambda x: lax.clamp(np.float32(-0.5), x, np.float32(0.5)), [_nan_mix]),
    "reduce-max-empty": (lambda x: [lax.reduce_max(x, axes=(0,)), lax.reduce_min(x, axes=(0,))],
                         [np.zeros((0, 3), i32)]),
    "reduce-max-bool": (lambda x: [lax.reduce_max(x, axes=(1,)), lax.reduce_min(x, axes=(1,))],
                        [np.array([[True, False], [False, False]])]),
    "argmax-nan": (lambda x: [lax.argmax(x, 0, np.int32), lax.argmin(x, 0, np.int32)],
                   [_nan_mix]),
    "sort-nan-signed-zero": (lambda x: lax.sort(x), [_nan_mix]),
    "sort-two-keys": (lambda a, b, c: lax.sort((a, b, c), num_keys=2),
                      [np.array([1, 0, 1, 0, 1], i32), np.array([2.0, 1, 2, 3, 0], f32),
                       np.arange(5, dtype=i32)]),
    "top-k-nan-ties": (lambda x: lax.top_k(x, 8), [_nan_mix]),
    "top-k-axis0-bool": (lambda x: lax.top_k(x, 2, axis=0),
                         [np.array([[True, False], [False, True], [True, True]])]),
    "cummax-nan": (lambda x: [lax.cummax(x, 0), lax.cummin(x, 0, reverse=True)], [_nan_mix]),
    "cumlogsumexp-inf": (lambda x: lax.cumlogsumexp(x, 0),
                         [np.array([-np.inf, -np.inf, 0.0, np.inf, 1.0], f32)]),
    "cumlogsumexp-complex-reverse": (lambda x: lax.cumlogsumexp(x, 0, reverse=True),
                                     [np.array([1 + 3j, 2 - 3j, 0.5 + 2j], np.complex64)]),
    "dynamic-slice-negative-start": (lambda x, i: lax.dynamic_slice(x, (i,), (3,)),
                                     [np.arange(6, dtype=f32), np.int32(-2)]),
    "dynamic-slice-past-end-uint": (lambda x, i: lax.dynamic_slice(x, (i,), (3,)),
                                    [np.arange(6, dtype=f32), np.uint8(250)]),
    "dynamic-update-slice-negative": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i,)),
                                      [np.arange(6, dtype=f32), np.ones(2, f32), np.int32(-4)]),
    "gather-clip": (lambda x, i: lax.gather(x, i, _gdn, (1, 3), mode="clip"),
                    [np.arange(12, dtype=f32).reshape(4, 3), _idx]),
    "gather-promise-clamps": (lambda x, i: lax.gather(x, i, _gdn, (1, 3)),
                              [np.arange(12, dtype=f32).reshape(4, 3), _idx]),
    "gather-fill": (lambda x, i: lax.gather(x, i, _gdn, (1, 3), mode="fill", fill_value=-1),
                    [np.arange(12, dtype=i32).reshape(4, 3), _idx]),
    "scatter-add-drop": (lambda x, i, u: lax.scatter_add(x, i, u, _sdn),
                         [np.zeros((4, 3), f32), _idx, np.ones((4, 3), f32)]),
    "scatter-add-clip": (lambda x, i, u: lax.scatter_add(x, i, u, _sdn, mode="clip"),
                         [np.zeros((4, 3), f32), _idx, np.ones((4, 3), f32)]),
    "scatter-set-repeated-last-wins": (lambda x, i, u: lax.scatter(x, i, u, _sdn),
                                       [np.zeros((4, 3), f32), np.array([[1], [2], [1]], i32),
                                        np.arange(9, dtype=f32).reshape(3, 3)]),
    "dot-bool": (lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ()))),
                 [np.array([[True, False], [False, False]]), np.array([[True], [True]])]),
    "dot-int8-f32-preferred": (lambda a, b: lax.dot_general(
                                   a, b, (((1,), (0,)), ((), ())),
                                   preferred_element_type=np.float32),
                               [np.array([[1, -2]], np.int8), np.array([[0.5], [0.25]], f32)]),
    "dot-f16-accumulates-in-f32": (lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ()))),
                                   [np.full(4096, 1.0, np.float16),
                                    np.full(4096, 0.5, np.float16)]),
    "select-n-int-which": (lambda w, a, b, c: lax.select_n(w, a, b, c),
                           [np.array([0, 2, 1], np.uint8), np.zeros(3, f32), np.ones(3, f32),
                            np.full(3, 2.0, f32)]),
    "select-n-scalar-case": (lambda p, a, b: lax.select_n(p, a, b),
                             [np.array([True, False]), np.float32(3.0), np.ones(2, f32)]),
    "iota-reshape-pad-negative": (lambda: lax.pad(lax.iota(np.int32, 5), np.int32(-1),
                                                  [(-1, 2, 1)]), []),
    "cholesky-not-positive-definite": (lambda a: dec.cholesky(a, symmetrize_input=False),
                                       [np.array([[1.0, 2.0], [2.0, 1.0]], f32)]),
}


@pytest.mark.parametrize("case", sorted(CORNERS))
def test_corner_semantics_match_numpy_backend(case):
    fun, args = CORNERS[case]
    ref = fun(*[on(NUMPY, a) for a in args])
    with config.override(jax_default_backend="xla"):  # for ops without operands (iota)
        out = fun(*[on(XLA, a) for a in args])
    assert_same(out, ref, rtol=0, atol=0)


_reps = np.array([[1], [2], [1], [1]], i32)                      # element 1 written 3 times


def assert_same_bits(got, want):
    """Equal values, signs of zeros included; NaN where want has NaN (of any payload: a
    GPU's arithmetic makes its canonical NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    if want.dtype.kind == "c":                                 # (real, imag) pairs
        got, want = got.view(got.real.dtype), want.view(want.real.dtype)
    np.testing.assert_array_equal(got, want)                  # NaNs compare equal
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got) & ~np.isnan(got),
                                      np.signbit(want) & ~np.isnan(want))


@pytest.mark.parametrize("mode", ["fill", "clip"])
@pytest.mark.parametrize("dtype", [f32, np.float64, np.complex64, np.int32, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_scatter_set_with_repeated_indices_keeps_the_last(dtype, mode, x64):
    """XLA leaves open which of several updates to one element wins (on a GPU any may);
    fnad's lowering picks the last, as the numpy backend does, on every platform: the same
    values, signed zeros and NaNs included, whatever the order of the scatter_add."""
    rng = np.random.default_rng(1)
    operand = (rng.standard_normal((4, 3)) * 3).astype(dtype)
    updates = (rng.standard_normal((4, 3)) * 3).astype(dtype)
    if np.dtype(dtype).kind == "f":
        updates[3, 0], updates[3, 1], updates[1, 2] = -0.0, np.nan, -0.0
        operand[0, 0], operand[3, 2] = -0.0, np.nan                   # left alone
    idx = _reps if mode == "fill" else np.array([[1], [7], [1], [-5]], i32)  # clip: 3 -> 0
    fun = lambda x, i, u: lax.scatter(x, i, u, _sdn, mode=mode)    # noqa: E731
    ref = fun(*[on(NUMPY, a) for a in (operand, idx, updates)])
    out = fun(*[on(XLA, a) for a in (operand, idx, updates)])
    assert_same_bits(out, ref)
    jitted = fnad.jit(fun, backend="xla")(*[on(XLA, a) for a in (operand, idx, updates)])
    assert_same_bits(jitted, ref)


def test_scatter_set_with_repeated_indices_under_vmap_keeps_the_last():
    """vmap gives the scatter batching dims; the winners are found per batch member."""
    x = r(3, 5)
    idx = np.array([[1, 1, 4], [0, 2, 0], [3, 3, 3]], i32)
    u = r(3, 3)
    f = fnad.vmap(lambda xi, ii, ui: xi.at[ii].set(ui))
    assert "operand_batching_dims=(0,)" in str(fnad.make_jaxpr(f)(x, idx, u))
    want = x.copy()
    for b in range(3):
        for j in range(3):
            want[b, idx[b, j]] = u[b, j]                   # NumPy's order: the last wins
    args = [on(XLA, a) for a in (x, idx, u)]
    for out in (f(*args), fnad.jit(f, backend="xla")(*args)):
        assert out.backend == "xla"
        np.testing.assert_array_equal(np.asarray(out), want)


def test_scatter_set_lowering_finds_winners_only_where_indices_may_repeat():
    import jax
    lower = XLA.impl_rules[ix.scatter_p].lower
    args = (np.zeros((4, 3), f32), _reps, np.ones((4, 3), f32))
    for unique, want in ((False, True), (True, False)):
        text = str(jax.make_jaxpr(lambda x, i, u, unique=unique: lower(
            x, i, u, dimension_numbers=_sdn, indices_are_sorted=False,
            unique_indices=unique, mode=None))(*args))
        assert ("scatter_max" in text or "scatter-max" in text) == want, text


def test_eager_impls_are_jitted_once_per_params():
    x = on(XLA, np.arange(6, dtype=f32).reshape(2, 3))
    impl = XLA.impl_rules[red.reduce_sum_p]
    n = len(impl.jitted)
    y1, y2 = lax.reduce_sum(x, axes=(1,)), lax.reduce_sum(x, axes=(1,))
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y2))
    assert len(impl.jitted) <= n + 1                  # one jax.jit for axes=(1,), reused
    lax.reduce_sum(x, axes=(0,))
    assert ((("axes", (1,)),) in impl.jitted and (("axes", (0,)),) in impl.jitted)
    assert callable(impl.lower)                       # the lowering compile() traces


# ---- x64: fnad's flag decides, jax's global flag is left alone --------------------------------
@pytest.fixture
def jax_x64_global():
    """Set jax's own global x64 flag for a test (fnad's is separate), restored after."""
    old = jax.config.jax_enable_x64

    def set_to(value: bool):
        jax.config.update("jax_enable_x64", value)
    yield set_to
    jax.config.update("jax_enable_x64", old)


def test_x64_on_in_fnad_gives_64_bit_buffers_with_jax_x64_off(jax_x64_global):
    jax_x64_global(False)
    with config.override(jax_enable_x64=True):
        x = on(XLA, np.array([1.0, 1e-12]))           # float64
        i = on(XLA, np.array([2**40], np.int64))
        y = (x + 1.0) - 1.0
        assert x._value.dtype == np.float64 and y._value.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(y), np.array([1.0, 1e-12]) + 1.0 - 1.0)
        assert np.asarray(y)[1] != 0                   # float32 would round 1 + 1e-12 to 1
        assert np.asarray(i * 2)[0] == 2**41 and (i * 2)._value.dtype == np.int64
        with config.override(jax_default_backend="xla"):
            assert lax.iota(np.int64, 3)._value.dtype == np.int64
        closed = fnad.make_jaxpr(lambda a: fnp.sum(a * a))(np.array([1.0, 1e-9]))
        out = XLA.compile(closed)(x._value)
        assert out[0].dtype == np.float64
    assert not jax.config.jax_enable_x64, "fnad changed jax's global x64 flag"


def test_x64_off_in_fnad_keeps_32_bit_with_jax_x64_on(jax_x64_global):
    jax_x64_global(True)
    x = on(XLA, np.arange(3, dtype=f32))
    with config.override(jax_default_backend="xla"):
        outs = [x + 1.5, lax.iota(np.int32, 3), lax.argmax(x, 0, np.int32),
                fnp.arange(3), fnp.sum(x), fnp.asarray(2.5)]
    for o in outs:
        assert o.backend == "xla" and np.asarray(o).dtype == o.dtype
        assert o.dtype.itemsize == 4, o
    closed = fnad.make_jaxpr(lambda a: [a * 2.0, fnp.argmax(a)])(np.arange(3, dtype=f32))
    outs = XLA.compile(closed)(x._value)
    assert [o.dtype for o in outs] == [np.float32, np.int32]
    assert jax.config.jax_enable_x64, "fnad changed jax's global x64 flag"


# ---- compile: whole programs against eval_jaxpr ------------------------------------------------
rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape).astype(f32)


@fnad.custom_jvp
def softplus(x):
    return fnp.logaddexp(x, 0.0)


softplus.defjvp(lambda primals, tangents: (softplus(primals[0]),
                                            tangents[0] * fnad.nn.sigmoid(primals[0])))


@fnad.custom_vjp
def clip_grad(x):
    return x


clip_grad.defvjp(lambda x: (x, None), lambda _, g: (fnp.clip(g, -0.1, 0.1),))


def scan_rnn(w, xs):
    def cell(h, x):
        h = fnp.tanh(h @ w + x)
        return h, fnp.sum(h * h)
    h, ys = lax.scan(cell, fnp.zeros(3), xs, reverse=True)
    return fnp.sum(h) + fnp.mean(ys)


def switch3(i, x):
    return lax.switch(i, [lambda v: fnp.sin(v), lambda v: v * 2.0, lambda v: -v], x)


def while_newton(a, n):
    # √a by Newton's method for a traced number of steps: a while_loop
    return lax.fori_loop(0, n, lambda _, y: 0.5 * (y + a / y), fnp.ones_like(a))


def custom_rules(x):
    return fnp.sum(softplus(x) * clip_grad(x))


def remat_block(w, x):
    def block(x):
        h = checkpoint_name(fnp.tanh(x @ w), "h")
        return fnp.sin(h) @ w
    pol = fnad.checkpoint_policies.save_only_these_names("h")
    return fnp.sum(fnad.checkpoint(block, policy=pol)(x) ** 2)


def with_consts_and_literals(x):
    table = np.arange(4, dtype=f32)                   # a NumPy constant
    shift = fnp.asarray([0.5, 0.25, 0.0, 1.0])        # an fnad Array constant
    return [x * table + shift, x, 3.0, x.astype(np.int32)]


def random_normal(key):
    k1, k2 = fnad.random.split(key)
    return [fnad.random.normal(k1, (5,)), fnad.random.randint(k2, (3,), 0, 10)]


PROGRAMS = {   # name: (function, args, higher-order primitives its jaxpr must hold)
    "scan-rnn": (scan_rnn, [r(3, 3), r(4, 3)], {"scan"}),
    "scan-rnn-grad": (fnad.grad(scan_rnn), [r(3, 3), r(4, 3)], {"scan"}),
    "switch-in-range": (switch3, [np.int32(1), r(3)], {"cond"}),
    "switch-clamped-low": (switch3, [np.int32(-4), r(3)], {"cond"}),
    "switch-clamped-high": (switch3, [np.int32(7), r(3)], {"cond"}),
    "cond-grad": (fnad.grad(lambda p, x: lax.cond(p > 0, fnp.sin, fnp.cos, x)),
                  [np.float32(-1.0), np.float32(0.3)], {"cond"}),
    "while-traced-trip-count": (while_newton, [np.array([2.0, 9.0], f32), np.int32(6)],
                                {"while"}),
    "custom-jvp-vjp": (custom_rules, [r(4)], {"custom_jvp_call", "custom_vjp_call"}),
    "custom-jvp-vjp-grad": (fnad.grad(custom_rules), [r(4)], {"custom_jvp_call"}),
    "checkpoint-grad": (fnad.grad(remat_block), [r(3, 3), r(2, 3)], {"checkpoint", "name"}),
    "vmap-of-scan": (fnad.vmap(scan_rnn, in_axes=(None, 0)), [r(3, 3), r(2, 4, 3)], {"scan"}),
    "consts-and-literals": (with_consts_and_literals, [r(4)], set()),
    "random": (random_normal, [np.array([0, 42], np.uint32)], set()),
}


def _higher_order_in(jaxpr, found=None) -> set:
    found = set() if found is None else found
    for e in jaxpr.eqns:
        if e.primitive in core.eager_rules:
            found.add(e.primitive.name)
        for v in e.params.values():
            for sub in v if isinstance(v, tuple) else (v,):
                if isinstance(sub, ClosedJaxpr):
                    _higher_order_in(sub.jaxpr, found)
    return found


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compile_matches_eval_jaxpr(name):
    fun, args, expected = PROGRAMS[name]
    closed = fnad.make_jaxpr(fun)(*args)
    assert _higher_order_in(closed.jaxpr) == expected
    flat = tree_util.tree_leaves(args)
    ref = eval_jaxpr(closed.jaxpr, closed.consts, *flat)
    compiled = XLA.compile(closed)
    outs = compiled(*[XLA.device_put(core.canonicalize_value(a)) for a in flat])
    assert len(outs) == len(ref)
    for o, r_, aval in zip(outs, ref, closed.out_avals):
        assert isinstance(o, jax.Array)
        assert (o.shape, o.dtype) == (aval.shape, aval.dtype)
        np.testing.assert_allclose(np.asarray(o), np.asarray(r_), rtol=2e-6, atol=2e-6)


def test_compile_inlines_nested_jit():
    from fnad.jit import jit
    inner = jit(lambda x: fnp.sin(x) * 2.0, backend="numpy")
    closed = fnad.make_jaxpr(lambda x: inner(x) + inner(x * x))(r(3))
    assert "jit" in {e.primitive.name for e in closed.eqns}
    x = r(3)
    out = XLA.compile(closed)(XLA.device_put(x))
    np.testing.assert_allclose(np.asarray(out[0]), np.sin(x) * 2 + np.sin(x * x) * 2,
                               rtol=1e-6)


def test_jit_moves_constants_made_while_tracing_to_its_backend_once(monkeypatch):
    """A constant made while tracing (here on the numpy backend, the default) is moved to
    xla at the first call, not at every call; its value is the same."""
    def f(tree):                                # a pytree argument: jit's general path
        table = fnp.arange(0, 8, 2, dtype=np.float32)        # concrete: a numpy-backend Array
        mask = np.arange(4) % 3 == 0                          # a NumPy value
        return fnp.where(mask, tree["a"] * table, tree["b"])
    g = fnad.jit(f, backend="xla")
    tree = {"a": on(XLA, r(4)), "b": on(XLA, r(4))}
    puts = []
    put = XLA.device_put
    monkeypatch.setattr(XLA, "device_put", lambda v, *a: puts.append(v) or put(v, *a))
    first = g(tree)
    assert len(puts) == 2                       # the table and the mask
    for _ in range(3):
        out = g(tree)
    assert len(puts) == 2
    a, b = np.asarray(tree["a"]), np.asarray(tree["b"])
    for got in (first, out):
        np.testing.assert_array_equal(np.asarray(got),
                                      np.where(np.arange(4) % 3 == 0, a * f32([0, 2, 4, 6]), b))


@pytest.mark.parametrize("setting,want", [(None, "HIGHEST"), ("float32", "HIGHEST"),
                                          ("tensorfloat32", "HIGH"), ("bfloat16", "DEFAULT")])
def test_matmul_precision_setting_reaches_xla(setting, want):
    """float32 matmuls run at full precision on xla unless jax_default_matmul_precision
    asks for less (on a GPU, "tensorfloat32" is jax's default speed; a CPU ignores it)."""
    import re
    a = on(XLA, r(4, 4))
    with config.override(jax_default_matmul_precision=setting):
        compiled = fnad.jit(lambda x: x @ x, backend="xla").lower(a).compile()
        text = compiled.runtime_executable().lowered_text
        assert text in compiled.as_text()                # after the jaxpr
        out = fnad.jit(lambda x: x @ x, backend="xla")(a)
    assert re.findall(r"precision = \[([A-Z]+), ([A-Z]+)\]", text) == [(want, want)]
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) @ np.asarray(a), rtol=1e-5)


def test_compile_runs_debug_callbacks_with_fnad_arrays():
    seen = []

    def f(x):
        fnad.debug.callback(lambda v: seen.append(v), x * 2.0)
        y = lax.scan(lambda c, v: (c + v, None), 0.0, x)[0]
        fnad.debug.callback(lambda v, w: seen.append((v, w)), y, 7, ordered=True)
        return y

    x = np.arange(3, dtype=f32)
    closed = fnad.make_jaxpr(f)(x)
    compiled = XLA.compile(closed)
    seen.clear()                                      # make_jaxpr does not call them
    out = compiled(XLA.device_put(x))
    jax.effects_barrier()
    assert float(np.asarray(out[0])) == 3.0
    assert len(seen) == 2
    first, (second, seven) = seen
    assert type(first) is core.Array and first.backend == "numpy"
    np.testing.assert_array_equal(np.asarray(first), x * 2)
    assert float(second) == 3.0 and int(seven) == 7 and seven.weak_type


def test_compile_keeps_consts_as_buffers_and_lowers_to_text():
    big = np.arange(1000, dtype=f32)
    closed = fnad.make_jaxpr(lambda x: x + big)(np.float32(1.0))
    compiled = XLA.compile(closed)
    assert all(isinstance(c, jax.Array) for c in compiled._consts)
    text = compiled.lowered_text
    assert "stablehlo.add" in text and "999" not in text    # the table is an argument
    np.testing.assert_array_equal(np.asarray(compiled(XLA.device_put(np.float32(1.0)))[0]),
                                  big + 1)


# ---- metal ---------------------------------------------------------------------------------
def test_metal_without_jax_metal_is_a_clear_error():
    try:
        jax.devices("METAL")
    except RuntimeError:
        pass
    else:  # pragma: no cover - only on an Apple-silicon Mac with jax-metal
        pytest.skip("a METAL device is present: the error path does not apply")
    with pytest.raises(ImportError) as info:
        get_backend("metal")
    msg = str(info.value)
    for words in ("jax-metal", "Apple-silicon Mac", "0.1.1", "0.4.34", "no METAL",
                  jax.__version__, "'xla' backend"):
        assert words in msg, f"{words!r} not in {msg!r}"
    with pytest.raises(ImportError):                  # not cached as a half-loaded backend
        get_backend("metal")
    assert "metal" not in backends_with_impl(ew.sin_p)

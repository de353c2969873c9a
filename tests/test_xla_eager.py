"""Eager execution on the xla backend: user functions with their inputs on xla.

Functions of tests/user_functions.py run op by op (no jit) with every array argument an
fnad Array on the xla backend, under grad, jvp, vjp, vmap and vmap of grad, and must give
what the same calls give on the numpy backend: tree structure, avals (shape, dtype,
weak_type) and values within the case's tolerance. The results live on xla: eager
constants and NumPy probes (weights, cotangents) made on the numpy backend follow their
xla operands there (fnad.core). Also: the control-flow primitives' eager rules and the
random samplers on xla operands, float64 with fnad's x64 on and jax's off, and eager xla
against `jit(backend="xla")` of the same function.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from user_functions import CASES, closed_over

jax = pytest.importorskip("jax", reason="jax not installed: the xla backend runs on jax")

import fnad  # noqa: E402
import fnad.lax as flax  # noqa: E402
import fnad.nn as fnn  # noqa: E402
import fnad.numpy as fnp  # noqa: E402
import fnad.random as fr  # noqa: E402
from fnad import core, dtypes, tree_util  # noqa: E402
from fnad.backends import get_backend  # noqa: E402
from fnad.config import config  # noqa: E402

XLA = get_backend("xla")
NUMPY = get_backend("numpy")

# A spread of what users write: pytrees of params, attention, norms, an unrolled RNN,
# integer labels and gathers, scatter-add, sort, cumsum, complex numbers, linalg, has_aux.
NAMES = ["mlp_relu", "mlp_gelu_tanh_classifier", "multi_head_attention",
         "grouped_query_attention", "rms_norm", "rnn_unrolled", "softmax_xent_take_along_axis",
         "has_aux_classifier", "scatter_add_histogram", "sorted_values_loss", "cumsum_loss",
         "complex_modulus", "gaussian_process_nll", "nested_pytree_params", "max_min_pool_2d",
         "embedding_getitem"]
# (vjp runs grad's eager path and vmap_grad vmap's: tests/test_user_functions.py runs those
# five transforms on the numpy backend, and tests/test_backend_xla.py each primitive on xla)
TRANSFORMS = ["grad", "jvp", "vmap_grad"]


def _rng(*names) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(names).encode()))


def put(tree, backend):
    """NumPy leaves of `tree` as fnad Arrays on `backend`; Python scalars stay as they are."""
    def one(x):
        if not isinstance(x, (np.ndarray, np.generic)) or x.dtype == dtypes.float0:
            return x                                  # float0: integer tangents carry no data
        aval = core.get_aval(x)
        return core.Array(backend.device_put(core.canonicalize_value(x, aval)), aval, backend)
    return tree_util.tree_map(one, tree)


def _is_float(dt) -> bool:
    return dtypes.is_inexact(np.dtype(dt))


def _probes(case, np_args):
    """Fixed random weights (Σ out·w scalarizes an array output), tangents, cotangent."""
    rng = _rng(case.name, "probes")
    res = fnad.eval_shape(functools.partial(case.fn, fnp, fnn), *np_args)
    out = res[0] if case.has_aux else res

    def like(x):
        if not _is_float(x.dtype):
            return np.zeros(x.shape, dtypes.float0)
        return np.asarray(rng.standard_normal(x.shape), x.dtype)
    weights = [like(x) for x in tree_util.tree_leaves(out) if _is_float(x.dtype)]
    tangents = [tree_util.tree_map(like, np_args[i]) for i in case.diff]
    return weights, tangents, tree_util.tree_map(like, out)


def _loss(case, weights):
    """The case as a scalar loss of its arguments (with its aux when it has one)."""
    def loss(*args):
        res = case.fn(fnp, fnn, *args)
        out, aux = res if case.has_aux else (res, None)
        if not case.scalar:
            floats = [x for x in tree_util.tree_leaves(out) if _is_float(x.dtype)]
            out = sum(fnp.sum(fnp.real(x * w)) for x, w in zip(floats, weights))
        return (out, aux) if case.has_aux else out
    return loss


def _batched(case, np_args):
    """Three perturbed copies of the first differentiated argument, stacked on axis 0."""
    i = case.diff[0]
    return tree_util.tree_map(
        lambda x: np.stack([np.asarray(x + 0.01 * k, np.asarray(x).dtype) for k in range(3)]),
        np_args[i])


def run(case, transform, backend, dtype=np.float32):
    """`transform` of `case` with every array argument and probe on `backend`."""
    np_args = case.make(_rng(case.name), dtype)
    weights, tangents, cotangent = _probes(case, np_args)
    args = put(np_args, backend)
    fn = functools.partial(case.fn, fnp, fnn)
    if transform == "grad":
        return fnad.grad(_loss(case, weights), case.diff, has_aux=case.has_aux)(*args)
    g = closed_over(fn, args, case.diff)
    primals = [args[i] for i in case.diff]
    if transform == "jvp":
        return fnad.jvp(g, tuple(primals), tuple(put(tangents, backend)), has_aux=case.has_aux)
    if transform == "vjp":
        out, vjp_fn, *aux = fnad.vjp(g, *primals, has_aux=case.has_aux)
        return out, vjp_fn(put(cotangent, backend)), aux
    i = case.diff[0]
    in_axes = tuple(0 if j == i else None for j in range(len(args)))
    full = list(args)
    full[i] = put(_batched(case, np_args), backend)
    if transform == "vmap":
        return fnad.vmap(fn, in_axes=in_axes)(*full)
    assert transform == "vmap_grad"                               # per-example gradients
    return fnad.vmap(fnad.grad(_loss(case, weights), i, has_aux=case.has_aux),
                     in_axes=in_axes)(*full)


def assert_same(got, want, *, rtol, atol, on="xla", what=""):
    """Same structure and avals; values close; every Array leaf of `got` lives on `on`."""
    assert tree_util.tree_structure(got) == tree_util.tree_structure(want), \
        f"{what}: tree structure differs:\n {got}\n {want}"
    for k, (g, w) in enumerate(zip(tree_util.tree_leaves(got), tree_util.tree_leaves(want))):
        where = f"{what} leaf {k}"
        assert type(g) is type(w), f"{where}: {type(g).__name__} != {type(w).__name__}"
        if type(g) is core.Array:
            assert g.backend == on, f"{where}: computed on {g.backend}, not {on}"
            assert g.aval == w.aval, f"{where}: {g.aval} != {w.aval}"
            assert np.asarray(g).dtype == g.dtype, f"{where}: buffer dtype != aval's"
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype), where
        if g.dtype == dtypes.float0:
            continue
        if not _is_float(g.dtype):
            np.testing.assert_array_equal(g, w, err_msg=where)
            continue
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", NAMES)
def test_user_function_eagerly_on_xla_matches_numpy_backend(name, transform):
    case = CASES[name]
    want = run(case, transform, NUMPY)
    got = run(case, transform, XLA)
    assert_same(got, want, rtol=case.rtol, atol=case.atol, what=f"{name} {transform}")


@pytest.mark.parametrize("transform", ["grad", "vmap_grad"])
@pytest.mark.parametrize("name", ["mlp_relu", "rnn_unrolled", "gaussian_process_nll"])
def test_float64_eagerly_on_xla_with_jax_x64_off(name, transform):
    # fnad's x64 flag decides the dtypes; the backend runs jax under its x64 context
    # whatever jax's own global flag says (left off here)
    case = CASES[name]
    assert not XLA.jax_x64()
    with config.override(jax_enable_x64=True):
        want = run(case, transform, NUMPY, np.float64)
        got = run(case, transform, XLA, np.float64)
    assert not XLA.jax_x64()
    assert_same(got, want, rtol=1e-9, atol=1e-11, what=f"{name} {transform} float64")
    assert all(x.dtype == np.float64 for x in tree_util.tree_leaves(got)
               if _is_float(x.dtype)), got


# grad's output seed is made on the output's backend and each input's cotangent moved to
# that input's backend, so a gradient nothing on xla touches on the way back (a bias added
# last, an argument the loss ignores) still lives on xla.
@pytest.mark.parametrize("name", ["batch_norm", "unused_argument"])
def test_gradients_live_on_their_inputs_backend(name):
    case = CASES[name]
    g = run(case, "grad", XLA)
    assert_same(g, run(case, "grad", NUMPY), rtol=case.rtol, atol=case.atol, what=name)


@pytest.mark.parametrize("name", ["mlp_relu", "multi_head_attention", "gaussian_process_nll"])
def test_eager_xla_equals_jit_xla(name):
    # the same lowerings, once op by op and once as one XLA program: XLA may fuse a*b + c
    # into an FMA inside the program, so equal to float32 rounding, not bit for bit
    case = CASES[name]
    np_args = case.make(_rng(case.name), np.float32)
    weights, _, _ = _probes(case, np_args)
    grad = fnad.value_and_grad(_loss(case, weights), case.diff, has_aux=case.has_aux)
    args = put(np_args, XLA)
    assert_same(fnad.jit(grad, backend="xla")(*args), grad(*args), rtol=1e-5, atol=1e-6,
                what=name)


# ---- control flow and random keys on xla -----------------------------------------------------
def _cond(x):
    return flax.cond(x[0] > 0, lambda v: fnp.sin(v) * v, lambda v: v - 1.0, x).sum()


def _scan(x):
    carry, ys = flax.scan(lambda c, a: (c * a + 1.0, fnp.tanh(c * a)), x[0], x)
    return carry + ys.sum()


def _fori(x):
    return flax.fori_loop(0, 4, lambda i, c: c * fnp.cos(x) + i, x).sum()


def _while(x):
    def body(c):
        return c[0] + 1, c[1] * 0.9 + fnp.sin(c[1])
    return flax.while_loop(lambda c: c[0] < 3, body, (0, x))[1].sum()


def _switch(x):
    i = fnp.argmax(x) % 3
    return flax.switch(i, [lambda v: v.sum(), lambda v: (v * v).sum(), fnp.max], x)


CONTROL = {"cond": _cond, "scan": _scan, "fori": _fori, "while": _while, "switch": _switch}
FORWARD_ONLY = {"while"}                      # reverse mode through while_loop is an error


@pytest.mark.parametrize("name", sorted(CONTROL))
def test_control_flow_eagerly_on_xla(name):
    f = CONTROL[name]
    x = np.array([0.7, -0.3, 1.1, 0.4], np.float32)
    t = np.array([0.5, 1.0, -2.0, 0.25], np.float32)
    xs = np.stack([x, x[::-1], -x])                                      # [3, 4]
    for what, run_on in [("value", lambda b: f(put(x, b))),
                         ("grad", lambda b: fnad.grad(f)(put(x, b))),
                         ("jvp", lambda b: fnad.jvp(f, (put(x, b),), (put(t, b),))),
                         ("vmap", lambda b: fnad.vmap(f)(put(xs, b))),
                         ("vmap_grad", lambda b: fnad.vmap(fnad.grad(f))(put(xs, b)))]:
        if name in FORWARD_ONLY and "grad" in what:
            continue
        assert_same(run_on(XLA), run_on(NUMPY), rtol=1e-5, atol=1e-6, what=f"{name} {what}")


SAMPLERS = {
    "split": lambda k: fr.split(k, 3),
    "bits": lambda k: fr.bits(k, (5,)),
    "uniform": lambda k: fr.uniform(k, (2, 3), minval=-1.0, maxval=3.0),
    "normal": lambda k: fr.normal(k, (6,)),
    "randint": lambda k: fr.randint(k, (4,), -5, 17),
    "permutation": lambda k: fr.permutation(k, 10),
    "categorical": lambda k: fr.categorical(k, np.array([0.3, -1.0, 2.0], np.float32), shape=(5,)),
    "bernoulli": lambda k: fr.bernoulli(k, 0.3, (6,)),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_random_with_key_on_xla(name):
    # threefry is integer arithmetic: keys, bits and integer samples are equal bit for bit;
    # float samples to float32 rounding (XLA's erf_inv is its own polynomial)
    f = SAMPLERS[name]
    for seed in (0, 7):
        key = fr.PRNGKey(seed)
        got, want = f(put(np.asarray(key), XLA)), f(key)
        assert_same(got, want, rtol=1e-5, atol=1e-6, what=f"{name} seed {seed}")
        if not _is_float(got.dtype):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

"""User-level functions (tests/user_functions.py) under every AD entry point, against jax.

Each function is written once against a namespace (`fnad.numpy`/`fnad.nn` or
`jax.numpy`/`jax.nn`) and run, in both libraries, through grad (one argnum and a tuple
of argnums), value_and_grad, vjp (random cotangent), jvp (random tangents), linearize
(the linear map applied to a random tangent and to twice it) and a Hessian-vector
product (jvp of grad). Values, tree structure, shapes, dtypes and weak types must agree.
float32 throughout, plus a subset in float64 with x64 on in both libraries.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from user_functions import CASES, closed_over

import fnad
import fnad.nn as fnn
import fnad.numpy as fnp
from fnad import tree_util

jax = pytest.importorskip("jax", reason="jax not installed")
import jax.numpy as jnp  # noqa: E402

TRANSFORMS = ("grad", "grad_argnums", "value_and_grad", "vjp", "jvp", "linearize", "hvp")
X64_TOL = dict(rtol=1e-9, atol=1e-11)


class Lib:
    """One library's side: its transformations, namespaces and tree utilities."""

    def __init__(self, ad, np_, nn_, tree):
        self.ad, self.np, self.nn, self.tree = ad, np_, nn_, tree

    def to_arrays(self, args):
        """NumPy leaves as this library's arrays; Python scalars stay as the user passed them."""
        return self.tree.tree_map(
            lambda x: self.np.asarray(x) if isinstance(x, np.ndarray) else x, args)


FNAD = Lib(fnad, fnp, fnn, tree_util)
JAX = Lib(jax, jnp, jax.nn, jax.tree_util)


def _rng(*names) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(names).encode()))


def _is_float(dt) -> bool:
    return np.issubdtype(dt, np.floating) or np.issubdtype(dt, np.complexfloating)


def _random_like(rng, tree):
    """Random tangents/cotangents shaped like `tree` (float0 zeros for integer leaves)."""
    def one(x):
        if isinstance(x, (float, int)):                       # a Python scalar argument
            x = jax.ShapeDtypeStruct((), jnp.result_type(x))
        if not _is_float(x.dtype):
            return np.zeros(x.shape, jax.dtypes.float0)
        return np.asarray(rng.standard_normal(x.shape), x.dtype)
    return jax.tree_util.tree_map(one, tree)


def _scalarized(lib: Lib, fn, weights, has_aux: bool):
    """Σ_leaves Σ out·w: a scalar loss made of an array/pytree-valued function."""
    def loss(*args):
        res = fn(*args)
        out, aux = res if has_aux else (res, None)
        leaves = [x for x in lib.tree.tree_leaves(out) if _is_float(x.dtype)]
        total = sum(lib.np.sum(x * lib.np.asarray(w)) for x, w in zip(leaves, weights))
        return (total, aux) if has_aux else total
    return loss


def run(lib: Lib, case, transform: str, np_args, probes):
    """Apply `transform` to `case` with `lib`; a pytree of results to compare."""
    fn = functools.partial(case.fn, lib.np, lib.nn)
    args = lib.to_arrays(np_args)
    aux = case.has_aux
    if transform in ("grad", "grad_argnums", "value_and_grad", "hvp"):
        if not case.scalar:
            fn = _scalarized(lib, fn, probes["weights"], aux)
        if transform == "hvp":                    # forward-over-reverse: jvp of grad
            g = closed_over(fn, args, case.diff)
            grad_g = lib.ad.grad(g, tuple(range(len(case.diff))), has_aux=aux)
            primals = tuple(args[i] for i in case.diff)
            return lib.ad.jvp(grad_g, primals, tuple(probes["tangents"]), has_aux=aux)
        argnums = case.diff[0] if transform == "grad" else case.diff
        if transform == "value_and_grad":
            return lib.ad.value_and_grad(fn, argnums, has_aux=aux)(*args)
        return lib.ad.grad(fn, argnums, has_aux=aux)(*args)
    g = closed_over(fn, args, case.diff)
    primals = [args[i] for i in case.diff]
    if transform == "vjp":
        out, vjp_fn, *rest = lib.ad.vjp(g, *primals, has_aux=aux)
        return out, vjp_fn(probes["cotangent"]), rest
    if transform == "jvp":
        return lib.ad.jvp(g, tuple(primals), tuple(probes["tangents"]), has_aux=aux)
    out, f_lin, *rest = lib.ad.linearize(g, *primals, has_aux=aux)
    tangents = probes["tangents"]
    lin = f_lin(*tangents)
    lin2 = f_lin(*jax.tree_util.tree_map(lambda t: 2 * t, tangents))   # linear: twice as much
    return out, lin, lin2, rest


def make_probes(case, np_args, dtype):
    """Fixed random weights (scalarizing), cotangent and tangents, from jax's output avals."""
    rng = _rng(case.name, np.dtype(dtype).name, "probes")
    res = jax.eval_shape(lambda a: case.fn(jnp, jax.nn, *JAX.to_arrays(a)), np_args)
    out = res[0] if case.has_aux else res
    weights = [np.asarray(rng.standard_normal(x.shape), x.dtype)
               for x in jax.tree_util.tree_leaves(out) if _is_float(x.dtype)]
    tangents = _random_like(rng, [np_args[i] for i in case.diff])
    return {"weights": weights, "cotangent": _random_like(rng, out), "tangents": tangents}


_references: dict = {}


def reference(case, dtype):
    """(arguments, probes, {transform: jax's result}) for `case`, computed once.

    jax runs every transformation of a case in one jit: eager jax compiles each op of each
    shape separately, which made this file take minutes. (fnad runs eagerly.)
    """
    key = (case.name, np.dtype(dtype).name)
    if key not in _references:
        np_args = case.make(_rng(*key), dtype)
        probes = make_probes(case, np_args, dtype)
        every = jax.jit(lambda a: {t: run(JAX, case, t, a, probes) for t in TRANSFORMS})
        _references[key] = np_args, probes, every(np_args)
    return _references[key]


def assert_trees_close(got, want, *, rtol, atol, nan_safe=False, what=""):
    """Same structure, shapes and dtypes; values within rtol + atol·max(1, max|want|)."""
    shape_of = lambda _: 0                                        # noqa: E731
    assert tree_util.tree_map(shape_of, got) == jax.tree_util.tree_map(shape_of, want), \
        f"{what}: tree structure differs:\n fnad {got}\n jax  {want}"
    got_leaves, want_leaves = tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves), what
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        where = f"{what} leaf {i}"
        assert not isinstance(g, fnad.core.Tracer), f"{where}: a tracer escaped: {g!r}"
        g_weak, w_weak = getattr(g, "weak_type", False), getattr(w, "weak_type", False)
        assert g_weak == w_weak, f"{where}: weak_type {g_weak} != jax's {w_weak}"
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{where}: shape {g.shape} != jax's {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != jax's {w.dtype}"
        if g.dtype == jax.dtypes.float0:
            continue
        if not _is_float(w.dtype):
            np.testing.assert_array_equal(g, w, err_msg=where)
            continue
        if nan_safe:
            assert np.all(np.isfinite(g)), f"{where}: not finite: {g}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)


def check(case, transform, dtype, rtol, atol):
    np_args, probes, want = reference(case, dtype)
    got = run(FNAD, case, transform, np_args, probes)
    assert_trees_close(got, want[transform], rtol=rtol, atol=atol, nan_safe=case.nan_safe,
                       what=f"{case.name} {transform}")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_float32(name, transform):
    case = CASES[name]
    check(case, transform, np.float32, case.rtol, case.atol)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.x64))
def test_float64(name, transform, x64):
    check(CASES[name], transform, np.float64, **X64_TOL)


def test_case_table_is_broad():
    assert len(CASES) >= 40
    assert sum(c.x64 for c in CASES.values()) >= 5
    assert any(c.has_aux for c in CASES.values()) and any(c.nan_safe for c in CASES.values())
    assert any(not c.scalar for c in CASES.values())

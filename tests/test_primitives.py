"""The primitive spec table, run for every primitive (tests/specs/spec_*.py).

For each Spec: the numpy-backend value against plain NumPy; abstract evaluation
(eval_shape and the staged jaxpr's types) against the eager result; the JVP
against central finite differences in float64; the dot-product test
Re⟨ȳ, J·ẋ⟩ = Re⟨Jᵀ·ȳ, ẋ⟩ for each linear argument; and, where jax is installed,
values and first and second derivatives against jax. Plus coverage: every
registered primitive has specs, rules and an implementation on every backend.
"""
from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import fnad
import fnad.lax
import specs as specs_pkg
from user_functions import closed_over
from fnad import core, dtypes, tree_util
from fnad.config import config
from fnad.ir import typecheck_jaxpr


def _load_specs():
    out = []
    for m in sorted(pkgutil.iter_modules(specs_pkg.__path__), key=lambda m: m.name):
        if m.name.startswith("spec_"):
            out += importlib.import_module(f"specs.{m.name}").SPECS
    return out


SPECS = _load_specs()


def one_spec_per_primitive() -> list:
    """The first spec of each primitive (the backends' coverage tests run these)."""
    seen, out = set(), []
    for s in SPECS:
        if s.prim not in seen:
            seen.add(s.prim)
            out.append(s)
    return out


_seen: dict[str, int] = {}
IDS = []
for _s in SPECS:
    n = _seen.get(_s.id, 0)
    _seen[_s.id] = n + 1
    IDS.append(_s.id if n == 0 else f"{_s.id}#{n}")


def _split(spec, args):
    """A function of the non-static args only, and those args."""
    dyn_idx = [i for i, a in enumerate(spec.args) if a.static is None]

    def f(*dyn):
        full = list(args)
        for i, d in zip(dyn_idx, dyn):
            full[i] = d
        return spec.fun(*full)
    return f, [args[i] for i in dyn_idx], dyn_idx


def _draw(spec, seed=0):
    rng = np.random.default_rng(seed)
    return [a.draw(rng) for a in spec.args]


def _leaves(x):
    return [np.asarray(v) for v in tree_util.tree_leaves(x)]


def _wide(x):
    """float32/16 -> float64, complex64 -> complex128 (for finite differences)."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if dtypes.is_float(x.dtype):
        return x.astype(np.float64)
    return x


def _diff_positions(spec, dyn_idx, dyn):
    if spec.diff is not None:
        return [dyn_idx.index(i) for i in spec.diff]
    return [k for k, x in enumerate(dyn) if dtypes.is_inexact(np.asarray(x).dtype)]


def _tangent_like(rng, x):
    x = np.asarray(x)
    t = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        t = t + 1j * rng.standard_normal(x.shape)
    return t.astype(x.dtype)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_value_matches_numpy(spec):
    args = _draw(spec)
    out = spec.fun(*args)
    ref = spec.ref(*args)
    outs, refs = _leaves(out), [np.asarray(r) for r in tree_util.tree_leaves(ref)]
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape, f"shape {o.shape} != NumPy's {r.shape}"
        if o.dtype.kind in "biu" or o.dtype == np.bool_:
            np.testing.assert_array_equal(o, r)
        else:
            np.testing.assert_allclose(o, r, rtol=spec.rtol, atol=spec.atol, equal_nan=True)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_abstract_eval_predicts_shape_and_dtype(spec):
    args = _draw(spec)
    f, dyn, _ = _split(spec, args)
    outs = tree_util.tree_leaves(f(*dyn))
    shapes = tree_util.tree_leaves(fnad.eval_shape(f, *dyn))
    assert [(s.shape, s.dtype) for s in shapes] == [(o.shape, o.dtype) for o in outs]
    closed = fnad.make_jaxpr(f)(*dyn)
    typecheck_jaxpr(closed.jaxpr)
    assert spec.prim in {e.primitive for e in closed.jaxpr.eqns}, \
        f"{spec.prim} does not appear in the jaxpr of the spec's function:\n{closed}"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_jvp_matches_finite_differences(spec):
    rng = np.random.default_rng(1)
    with config.override(jax_enable_x64=True):
        args = [a if s.static is not None else _wide(a) for a, s in zip(_draw(spec), spec.args)]
        f, dyn, dyn_idx = _split(spec, args)
        pos = _diff_positions(spec, dyn_idx, dyn)
        tangents = []
        for k, x in enumerate(dyn):
            x = np.asarray(x)
            if not dtypes.is_inexact(x.dtype):
                tangents.append(np.zeros(x.shape, dtypes.float0))
            elif k in pos:
                tangents.append(_tangent_like(rng, x))
            else:
                tangents.append(np.zeros_like(x))
        y, y_dot = fnad.jvp(f, tuple(dyn), tuple(tangents))
        if not pos:
            for t in _leaves(y_dot):
                assert t.dtype == dtypes.float0 or not np.any(t), "expected a zero tangent"
            return
        eps = spec.fd_eps
        plus = [x + eps * t if k in pos else x for k, (x, t) in enumerate(zip(dyn, tangents))]
        minus = [x - eps * t if k in pos else x for k, (x, t) in enumerate(zip(dyn, tangents))]
        for yd, yp, ym in zip(_leaves(y_dot), _leaves(f(*plus)), _leaves(f(*minus))):
            if not dtypes.is_inexact(yp.dtype):
                continue
            with np.errstate(invalid="ignore"):        # inf - inf where a spec puts inf in
                fd = (yp.astype(yd.dtype) - ym.astype(yd.dtype)) / (2 * eps)
                np.testing.assert_allclose(yd, fd, rtol=spec.fd_rtol, atol=spec.fd_atol)


LINEAR = [(s, i) for s in SPECS for i in s.linear]
LINEAR_IDS = [f"{sid}-arg{i}" for s, sid in zip(SPECS, IDS) for i in s.linear]


@pytest.mark.parametrize("spec,i", LINEAR, ids=LINEAR_IDS)
def test_transpose_dot_product(spec, i):
    rng = np.random.default_rng(2)
    with config.override(jax_enable_x64=True):
        args = [a if s.static is not None else _wide(a) for a, s in zip(_draw(spec), spec.args)]

        def g(xi):
            full = list(args)
            full[i] = xi
            return spec.fun(*full)

        x_dot = _tangent_like(rng, args[i])
        y, vjp_fn = fnad.vjp(g, args[i])
        def cotangent(o):                          # integer outputs take float0 cotangents
            o = np.asarray(o)
            if dtypes.is_inexact(o.dtype):
                return _tangent_like(rng, o)
            return np.zeros(o.shape, dtypes.float0)
        y_bar = tree_util.tree_map(cotangent, y)
        (x_bar,) = vjp_fn(y_bar)
        _, jx = fnad.jvp(g, (args[i],), (x_dot,))
        lhs = sum(np.real(np.sum(np.asarray(a) * np.asarray(b)))
                  for a, b in zip(tree_util.tree_leaves(y_bar), tree_util.tree_leaves(jx))
                  if np.asarray(a).dtype != dtypes.float0)
        rhs = np.real(np.sum(np.asarray(x_bar) * x_dot))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-9)


# ---- against jax ---------------------------------------------------------------------------
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")
JAX_SPECS = [(s, sid) for s, sid in zip(SPECS, IDS) if s.jax_fun is not None]


def _scalarize(f, weights, xp):
    """s(x) = Re Σ w·f(x) over the inexact outputs: one scalar to differentiate."""
    def s(*xs):
        terms = [xp.sum(xp.real(xp.multiply(o, w)))
                 for w, o in zip(weights, tree_util.tree_leaves(f(*xs))) if w is not None]
        total = terms[0]
        for t in terms[1:]:
            total = xp.add(total, t)
        return total
    return s


class _LaxOps:
    """sum/real/multiply from fnad.lax, so these tests need nothing above the primitives."""

    @staticmethod
    def sum(x):
        return fnad.lax.reduce_sum(x, axes=tuple(range(np.ndim(x))))

    @staticmethod
    def real(x):
        return fnad.lax.real(x) if core.get_aval(x).dtype.kind == "c" else x

    @staticmethod
    def add(x, y):
        return fnad.lax.add(x, y)

    @staticmethod
    def multiply(x, w):
        return fnad.lax.mul(x, np.asarray(w, core.get_aval(x).dtype))


@needs_jax
@pytest.mark.parametrize("spec", [s for s, _ in JAX_SPECS], ids=[i for _, i in JAX_SPECS])
def test_against_jax(spec, x64):
    rng = np.random.default_rng(3)
    args = [a if s.static is not None else _wide(a) for a, s in zip(_draw(spec), spec.args)]
    f, dyn, dyn_idx = _split(spec, args)

    def jf(*d):
        full = list(args)
        for i, x in zip(dyn_idx, d):
            full[i] = x
        return spec.jax_fun(jax, *full)

    # fnad's side runs eagerly (the path under test) and first: its outputs shape the weights
    # and tangents. jax's side is one jitted program for the value, the gradient and the
    # second order together (one XLA compile per spec, the suite's main cost); eager where
    # an input is not finite: XLA's simplifier is not NaN-faithful (jitted, reduce_max's
    # gradient at a NaN is 0, not NaN)
    ours = _leaves(f(*dyn))
    pos = _diff_positions(spec, dyn_idx, dyn)
    differentiate = bool(pos) and any(dtypes.is_inexact(o.dtype) for o in ours)
    argnums = tuple(pos)
    weights = [_tangent_like(rng, o) if dtypes.is_inexact(o.dtype) else None for o in ours]
    second = differentiate and spec.second_order
    tangents = [_tangent_like(rng, dyn[k]) for k in pos] if second else []
    s_theirs = _scalarize(jf, weights, jnp)

    def oracle(d, t):
        value = jf(*d)
        if not differentiate:
            return value, None, None
        grads = jax.grad(s_theirs, argnums=argnums)(*d)
        if not second:
            return value, grads, None
        _, hvp = jax.jvp(closed_over(jax.grad(s_theirs, argnums=argnums), d, pos),
                         tuple(d[k] for k in pos), tuple(t))
        return value, grads, hvp

    finite = all(np.all(np.isfinite(x)) for x in dyn if dtypes.is_inexact(np.asarray(x).dtype))
    jit = jax.jit if finite else (lambda fn: fn)
    value, g_theirs, h_theirs = jit(oracle)([jnp.asarray(x) for x in dyn],
                                            [jnp.asarray(t) for t in tangents])
    theirs = _leaves(value)
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype, f"dtype {o.dtype} != jax's {t.dtype}"
        np.testing.assert_allclose(o, t, rtol=1e-7, atol=1e-9, equal_nan=True)
    if not differentiate:
        return
    s_ours = _scalarize(f, weights, _LaxOps)
    with np.errstate(invalid="ignore"):                # Σ w·f(x) of a spec with ±inf in it
        g_ours = fnad.grad(s_ours, argnums=argnums)(*dyn)
    for a, b in zip(g_ours, g_theirs):
        with np.errstate(invalid="ignore"):            # inf - inf where a spec puts inf in
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)
    if not second:
        return
    with np.errstate(invalid="ignore"):
        _, h_ours = fnad.jvp(closed_over(fnad.grad(s_ours, argnums=argnums), dyn, pos),
                             tuple(dyn[k] for k in pos), tuple(tangents))
    for a, b in zip(h_ours, h_theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)


# ---- coverage ---------------------------------------------------------------------------------
# Higher-order primitives hold sub-jaxprs (or callbacks) in their params: they run eagerly by
# binding other primitives (core.eager_rules), so the spec table, which feeds arrays to a
# backend impl, does not apply. Each is tested against jax in its own module, named here.
HIGHER_ORDER_TESTS = {
    "cond": "test_control_flow.py", "scan": "test_control_flow.py",
    "while": "test_control_flow.py", "checkpoint": "test_remat.py", "name": "test_remat.py",
    "custom_jvp_call": "test_custom.py", "custom_vjp_call": "test_custom.py",
    "custom_lin": "test_custom.py", "debug_callback": "test_debug.py", "jit": "test_jit.py",
    "pure_callback": "test_callback.py", "io_callback": "test_callback.py",
    "psum": "test_collectives.py",
    "pmax": "test_collectives.py", "pmin": "test_collectives.py",
    "all_gather": "test_collectives.py", "psum_scatter": "test_collectives.py",
    "all_to_all": "test_collectives.py", "ppermute": "test_collectives.py",
    "axis_index": "test_collectives.py", "custom_linear_solve": "test_solves.py",
    "custom_vmap_call": "test_custom_batching.py", "check": "test_checkify.py",
}


def _fnad_primitives() -> frozenset:
    """The primitives fnad itself defines: those registered once every module of the fnad
    package (backends aside) is imported, taken when this module is collected, before any
    test runs; primitives that tests declare (tests/test_user_primitives.py, the release
    probes of tests/test_jit_backends.py) are not fnad's and need no specs."""
    for info in pkgutil.walk_packages(fnad.__path__, "fnad."):
        if not info.name.startswith("fnad.backends"):
            importlib.import_module(info.name)
    return frozenset(core.abstract_eval_rules)


FNAD_PRIMITIVES = _fnad_primitives()


def _all_primitives():
    return sorted((p for p in FNAD_PRIMITIVES if p not in core.eager_rules),
                  key=lambda p: p.name)


def test_every_higher_order_primitive_has_a_test_module():
    import pathlib
    names = sorted(p.name for p in core.eager_rules)
    assert names == sorted(HIGHER_ORDER_TESTS), \
        f"higher-order primitives {names} vs the table {sorted(HIGHER_ORDER_TESTS)}"
    here = pathlib.Path(__file__).parent
    for name, module in HIGHER_ORDER_TESTS.items():
        assert (here / module).exists(), f"{name}: {module} is missing"
    for p in core.eager_rules:
        assert p in core.jvp_rules and p in core.batch_rules, f"{p.name} lacks a rule"


def test_every_primitive_has_specs():
    covered = {s.prim for s in SPECS}
    missing = [p.name for p in _all_primitives() if p not in covered]
    assert not missing, f"primitives without a spec: {missing}"


def test_every_primitive_has_a_jvp_rule():
    missing = [p.name for p in _all_primitives() if p not in core.jvp_rules]
    assert not missing, f"primitives without a JVP rule: {missing}"


@pytest.mark.parametrize("backend", ["numpy"])
def test_every_primitive_has_an_impl_on_each_backend(backend):
    from fnad.backends import get_backend
    impls = get_backend(backend).impl_rules
    missing = [p.name for p in _all_primitives() if p not in impls]
    assert not missing, f"primitives without an implementation on {backend}: {missing}"

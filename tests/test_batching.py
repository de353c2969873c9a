"""vmap: every primitive with a batching rule against a Python loop (spec table, several
in_axes per spec: all mapped, each operand mapped alone, mapped at a non-zero axis), no
built-in primitive falling back to the loop, the in_axes/out_axes API, errors, the loop
fallback, compositions with grad (against jax where installed)."""
import inspect
import warnings

import numpy as np
import pytest
from test_primitives import IDS, SPECS, _draw

import fnad
from fnad import core, lax, tree_util
from fnad.core import Primitive

B = 3
# every spec with an operand to map (iota's have none); a primitive without a batching rule
# fails here (the loop fallback's warning is an error) and in the coverage test below
BATCHED = [(s, i) for s, i in zip(SPECS, IDS) if any(a.static is None for a in s.args)]


def _axes_options(n_dyn):
    """in_axes choices: all at 0; all at their last axis; each operand mapped alone (at its
    last axis for the first, at 0 for the others), the others None; all but the first."""
    opts = [(0,) * n_dyn, (-1,) * n_dyn]
    for k in range(n_dyn):
        opts.append(tuple((-1 if k == 0 else 0) if j == k else None for j in range(n_dyn)))
    if n_dyn > 1:
        opts.append((None,) + (0,) * (n_dyn - 1))
    return list(dict.fromkeys(opts))                   # unique, in order


@pytest.mark.parametrize("spec", [s for s, _ in BATCHED], ids=[i for _, i in BATCHED])
def test_vmap_matches_python_loop(spec):
    dyn_idx = [i for i, a in enumerate(spec.args) if a.static is None]
    members = [_draw(spec, seed) for seed in range(B)]
    base = members[0]

    def f(*dyn):
        full = list(base)
        for i, d in zip(dyn_idx, dyn):
            full[i] = d
        return spec.fun(*full)

    for in_axes in _axes_options(len(dyn_idx)):
        stacked = []
        for k, i in enumerate(dyn_idx):
            ax = in_axes[k]
            if ax is None:
                stacked.append(base[i])
            else:
                stacked.append(np.stack([np.asarray(m[i]) for m in members], axis=ax))
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*has no batching rule")
            got = fnad.vmap(f, in_axes=in_axes)(*stacked)
        per = []
        for b in range(B):
            args = [base[i] if in_axes[k] is None else members[b][i]
                    for k, i in enumerate(dyn_idx)]
            per.append(f(*args))
        for g_leaf, *p_leaves in zip(tree_util.tree_leaves(got),
                                     *[tree_util.tree_leaves(p) for p in per]):
            want = np.stack([np.asarray(p) for p in p_leaves])
            np.testing.assert_allclose(np.asarray(g_leaf), want, rtol=1e-6, atol=1e-6,
                                       err_msg=f"in_axes={in_axes}")
            assert np.asarray(g_leaf).dtype == want.dtype


X = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_in_axes_pytree_prefix_none_and_negative():
    def f(p, x):
        return lax.add(lax.mul(p["w"], x), p["b"])
    p = {"w": np.ones(4, np.float32), "b": np.arange(3, dtype=np.float32)}
    out = fnad.vmap(f, in_axes=({"w": None, "b": 0}, 0))(p, X)
    np.testing.assert_allclose(out, X + p["b"][:, None])
    out = fnad.vmap(f, in_axes=({"w": None, "b": 0}, -1), out_axes=1)(
        {"w": np.ones(3, np.float32), "b": np.arange(4, dtype=np.float32)}, X)
    np.testing.assert_allclose(out, X + np.arange(4))


def test_none_leaves_in_mapped_and_unmapped_arguments():
    """A None in an argument's pytree (a parameter tree with a frozen slot) has no leaves,
    under an in_axes of None or of 0, and in the outputs; the loop is the oracle."""
    p = {"w": np.ones((4, 2), np.float32), "frozen": None}

    def f(p, x, extra):
        return {"y": lax.dot_general(x, p["w"], (((0,), (0,)), ((), ()))), "none": None,
                "e": extra["v"]}
    extra = {"v": np.arange(3, dtype=np.float32), "n": None}
    out = fnad.vmap(f, in_axes=(None, 0, 0))(p, X, extra)
    assert out["none"] is None
    np.testing.assert_allclose(out["y"], X @ p["w"])
    np.testing.assert_allclose(out["e"], extra["v"])
    out = fnad.jit(fnad.vmap(f, in_axes=(None, 0, {"v": 0, "n": None})))(p, X, extra)
    np.testing.assert_allclose(out["y"], X @ p["w"])


def test_out_axes_none_and_unmapped_outputs():
    f = lambda x, c: (lax.sin(x), c)
    s, c = fnad.vmap(f, in_axes=(0, None), out_axes=(0, None))(X, np.float32(2.0))
    np.testing.assert_allclose(s, np.sin(X), rtol=1e-6)
    assert np.shape(c) == ()
    s, c = fnad.vmap(f, in_axes=(0, None))(X, np.float32(2.0))   # unmapped output broadcast
    np.testing.assert_allclose(c, np.full(3, 2.0))


def test_axis_size_without_mapped_args():
    out = fnad.vmap(lambda c: lax.mul(c, 2.0), in_axes=None, axis_size=5)(np.float32(1.5))
    np.testing.assert_allclose(out, np.full(5, 3.0))


def test_nested_vmap_is_an_outer_product():
    f = lambda a, b: lax.mul(a, b)
    a, b = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32)
    out = fnad.vmap(fnad.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    np.testing.assert_allclose(out, np.outer(a, b))


def test_vmap_of_grad_and_grad_through_vmap():
    f = lambda x: lax.mul(lax.sin(x), x)
    per_example = fnad.vmap(fnad.grad(f))(X.ravel())
    np.testing.assert_allclose(per_example, np.cos(X.ravel()) * X.ravel() + np.sin(X.ravel()),
                               rtol=1e-5)
    total = lambda x: lax.reduce_sum(fnad.vmap(f)(x), axes=(0,))
    np.testing.assert_allclose(fnad.grad(total)(X.ravel()), per_example, rtol=1e-5)
    _, t = fnad.jvp(fnad.vmap(f), (X.ravel(),), (np.ones(12, np.float32),))
    np.testing.assert_allclose(t, per_example, rtol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match=r"inconsistent sizes.*size 3 along axis 0.*size 4"):
        fnad.vmap(lax.add)(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"axis 2 .*shape \(3, 4\).*range\(-2, 2\)"):
        fnad.vmap(lax.sin, in_axes=2)(X)
    with pytest.raises(ValueError, match="scalar cannot be mapped"):
        fnad.vmap(lax.sin)(np.float32(1.0))
    with pytest.raises(ValueError, match=r"len\(in_axes\)=1, len\(args\)=2"):
        fnad.vmap(lax.add, in_axes=(0,))(X, X)
    with pytest.raises(TypeError, match="in_axes must be an int, None"):
        fnad.vmap(lax.sin, in_axes="0")
    with pytest.raises(ValueError, match="no argument is mapped"):
        fnad.vmap(lax.sin, in_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes is None"):
        fnad.vmap(lax.sin, out_axes=None)(X)
    with pytest.raises(fnad.TracerBoolConversionError, match="vmap of f"):
        def f(x):
            return x if lax.gt(x, 0.0) else lax.neg(x)   # Python `if` on a batched value
        fnad.vmap(f)(np.ones(3, np.float32))


def test_primitive_without_rule_falls_back_to_a_loop_with_a_warning():
    twice_p = Primitive("twice_for_test")
    core.abstract_eval_rules[twice_p] = lambda x: x
    from fnad.backends import get_backend
    impls = get_backend("numpy").impl_rules
    impls[twice_p] = lambda x: 2 * x
    try:
        with pytest.warns(UserWarning, match="'twice_for_test' has no batching rule"):
            out = fnad.vmap(lambda x: twice_p.bind(x), in_axes=1)(X)
        np.testing.assert_allclose(out, 2 * X.T)
    finally:
        del core.abstract_eval_rules[twice_p], impls[twice_p]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # built-in rules never warn
        fnad.vmap(lax.sin)(X)


# ---- coverage: no built-in primitive falls back to the loop -----------------------------------
def test_every_primitive_with_operands_has_a_batching_rule():
    # iota is the one exception: it has no operands, so nothing of it can be mapped and vmap
    # never asks for its rule. Check that it still takes none, then demand a rule of the rest.
    from fnad.primitives.shape_ops import iota_p
    params = inspect.signature(core.abstract_eval_rules[iota_p]).parameters.values()
    assert all(p.kind is p.KEYWORD_ONLY for p in params), "iota now takes operands"
    missing = sorted(p.name for p in core.abstract_eval_rules
                     if p is not iota_p and p not in core.batch_rules)
    assert not missing, f"primitives without a batching rule: {missing}"


# ---- the new rules under grad, against jax ----------------------------------------------------
_RNG = np.random.default_rng(7)
_V = _RNG.uniform(-1, 1, (5, 4)).astype(np.float32)
_IDX = np.array([0, 4, 9, -9, -2], np.int32)            # in range, clamped, wrapped
_U = _RNG.uniform(-1, 1, (5, 2, 3)).astype(np.float32)
_W = _RNG.uniform(-1, 1, (5, 2, 2)).astype(np.float32)
_A = (_RNG.uniform(-1, 1, (3, 3)) + 3 * np.eye(3)).astype(np.float32)
_AS = (_RNG.uniform(-1, 1, (4, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
_BS = _RNG.uniform(-1, 1, (4, 3, 2)).astype(np.float32)
_M = _RNG.uniform(-1, 1, (3, 4, 5)).astype(np.float32)
_N = _RNG.uniform(-1, 1, (5, 2, 4)).astype(np.float32)


def _sliced(lx, x, idx, w):                 # Σ_b w_b · x[clamp(i_b):+2, clamp(1):+2]
    per = lx.vmap(lambda i: lx.lax.dynamic_slice(x, (i, 1), (2, 2)))(idx)
    return lx.numpy.sum(per * w)


def _updated(lx, x, u, idx):                # Σ_b (x with u_b written at (i_b, 0))²
    per = lx.vmap(lambda u, i: lx.lax.dynamic_update_slice(x, u, (i, 0)))(u, idx)
    return lx.numpy.sum(per * per)


def _contracted(lx, m, n):                  # vmap over m's axis 2 and n's axis 0
    per = lx.vmap(lambda a, b: lx.lax.dot_general(a, b, (((1,), (1,)), ((), ()))),
                  in_axes=(2, 0))(m, n)
    return lx.numpy.sum(lx.numpy.sin(per))


def _solved(lx, a, bs):                     # one a, a batch of right-hand sides
    per = lx.vmap(lambda b: lx.lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
                  in_axes=0)(bs)
    return lx.numpy.sum(per * per)


def _factored(lx, a_s):                     # cholesky of AAᵀ and lu of A, per member
    chol = lx.vmap(lambda a: lx.lax.linalg.cholesky(a @ a.T))(a_s)
    lu = lx.vmap(lambda a: lx.lax.linalg.lu(a)[0], in_axes=1)(a_s)
    return lx.numpy.sum(chol * chol) + lx.numpy.sum(lu * lu)


GRAD_CASES = [
    ("dynamic_slice-batched-starts", _sliced, (_V, _IDX, _W), (0, 2), 1e-5),
    ("dynamic_update_slice-batched-starts", _updated, (_V, _U, _IDX), (0, 1), 1e-5),
    ("dot_general-mapped-free-dims", _contracted, (_M, _N), (0, 1), 1e-5),
    ("triangular_solve-unmapped-a", _solved, (_A, _BS), (0, 1), 1e-4),
    ("cholesky-lu", _factored, (_AS,), (0,), 1e-4),
]


@pytest.mark.parametrize("name,fn,args,argnums,tol", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_of_vmap_matches_jax(name, fn, args, argnums, tol):
    jax = pytest.importorskip("jax", reason="jax is the oracle for these gradients")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*has no batching rule")
        got = fnad.value_and_grad(lambda *a: fn(fnad, *a), argnums=argnums)(*args)
    want = jax.value_and_grad(lambda *a: fn(jax, *a), argnums=argnums)(*args)
    for g, w in zip(tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)

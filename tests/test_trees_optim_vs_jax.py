"""Regressions found by differential testing against jax.tree_util and optax: pytree
broadcasting and node data, fnad.optim's update dtypes (bf16/f16 params with a strongly
typed step size), named_chain, MultiSteps with a low-precision accumulator, losses on
bfloat16 inputs, and inject_hyperparams' error on hyperparameters rounded by bf16.
Each case computes the oracle's answer at test time; skips without jax / optax.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import optim, tree_util

jax = pytest.importorskip("jax", reason="jax is the oracle")


def _leaves(tree, tu):
    return [(tu.keystr(k), np.asarray(v)) for k, v in tu.tree_leaves_with_path(tree)]


def _assert_same(ours, theirs, tol, where):
    """Same key paths, dtypes and shapes, values to `tol` (fnad tree vs jax tree)."""
    a, b = _leaves(ours, tree_util), _leaves(theirs, jax.tree_util)
    assert [k for k, _ in a] == [k for k, _ in b], f"{where}: structure"
    for (k, x), (_, y) in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, f"{where} {k}: {x.dtype} vs {y.dtype}"
        np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64),
                                   err_msg=f"{where} {k}", **tol)


# ---- tree_util ----------------------------------------------------------------------------
@pytest.mark.parametrize("prefix, full, kw", [
    ((1, 2), ((3, 4), {"a": 5}), {}),
    ((1, None), ((3, 4), None), {}),                               # None matches None
    ((1, None), ((3, 4), 5), {}),                                  # ... and nothing else
    ((1, None), ((3, 4), {"a": 5}), {}),
    ((1, None), ((3, 4), {"a": 5}), {"is_leaf": lambda x: x is None}),
    ({"a": 1, "b": 2}, {"a": [3, 4], "b": 5}, {}),
    ((1, 2), ((3, 4),), {}),
])
def test_tree_broadcast_matches_jax(prefix, full, kw):
    def run(f):
        try:
            return f(prefix, full, **kw)
        except ValueError:
            return ValueError
    assert run(fnad.tree.broadcast) == run(jax.tree.broadcast)


@pytest.mark.parametrize("tree", [
    {"b": 1, "a": (2, 3)}, {}, (1, 2), [1], None,
    collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(int, {"b": 1, "a": 2}),
])
def test_node_data_matches_jax(tree):
    assert tree_util.tree_structure(tree).node_data() == \
        jax.tree_util.tree_structure(tree).node_data()


def test_mismatch_of_same_named_types_says_so():
    p1, p2 = collections.namedtuple("P", "x y"), collections.namedtuple("P", "x y")
    with pytest.raises(ValueError):                                  # as jax
        jax.tree.map(lambda a, b: a, p1(1, 2), p2(1, 2))
    with pytest.raises(ValueError, match="different type with the same name"):
        fnad.tree.map(lambda a, b: a, p1(1, 2), p2(1, 2))


# ---- optim --------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:optax.global_norm is deprecated:DeprecationWarning")
@pytest.mark.parametrize("dtypes", [("bfloat16",), ("float16", "float16"),
                                    ("bfloat16", "float32"), ("int32",), ()])
def test_global_norm_dtype_and_value_match_optax(dtypes):
    ox = pytest.importorskip("optax", reason="optax is the oracle")

    def tree(a):
        return [a.arange(1, 4, dtype=d) * (i + 1) for i, d in enumerate(dtypes)]
    ours, theirs = optim.global_norm(tree(jnp)), ox.global_norm(tree(jax.numpy))
    assert jnp.result_type(ours) == theirs.dtype, (jnp.result_type(ours), theirs.dtype)
    np.testing.assert_allclose(np.float64(ours), np.float64(theirs), rtol=1e-2)


def _run_both(build, dtype, steps=3, tol=None, extra=None, jit=False):
    """fnad's and optax's transformation from build(module) for `steps` steps (fnad's under
    fnad.jit if `jit`); compare the updates (values and dtypes) and states after each."""
    ox = pytest.importorskip("optax", reason="optax is the oracle")
    rng = np.random.default_rng(0)

    def tree():
        return {"w": rng.normal(size=(3, 2)).astype(dtype), "s": np.asarray(rng.normal(), dtype)}

    tol = tol or dict(rtol=1e-5, atol=1e-6)
    p0, grads = tree(), [tree() for _ in range(steps)]
    tx, otx = build(optim), build(ox)
    p, op = tree_util.tree_map(jnp.asarray, p0), jax.tree.map(jax.numpy.asarray, p0)
    s, os_ = tx.init(p), otx.init(op)
    update = fnad.jit(tx.update) if jit else tx.update
    for i, g in enumerate(grads):
        kw = extra(i) if extra else {}
        u, s = update(tree_util.tree_map(jnp.asarray, g), s, p, **kw)
        ou, os_ = otx.update(jax.tree.map(jax.numpy.asarray, g), os_, op, **kw)
        _assert_same(u, ou, tol, f"step {i} updates")
        _assert_same(s, os_, tol, f"step {i} state")
        p, op = optim.apply_updates(p, u), ox.apply_updates(op, ou)


def _f32(m):
    return jnp.float32 if m is optim else jax.numpy.float32


def _bf16(m):
    return jnp.bfloat16 if m is optim else jax.numpy.bfloat16


LOW_TOL = dict(rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name, build, dtype", [
    # a strongly typed float32 step size promotes bf16/f16 updates to float32, as optax
    ("scale_f32_array", lambda m: m.scale(np.float32(-0.5)), jnp.bfloat16),
    ("scale_python", lambda m: m.scale(-0.5), np.float16),
    ("inject_schedule", lambda m: m.inject_hyperparams(m.sgd)(
        learning_rate=m.linear_schedule(0.1, 0.01, 2)), np.float16),
    ("inject_schedule_jit", lambda m: m.inject_hyperparams(m.sgd)(   # a traced schedule
        learning_rate=m.linear_schedule(0.1, 0.01, 2)), jnp.bfloat16),  # value stays f32
    ("inject_hp_dtype", lambda m: m.inject_hyperparams(m.adam, hyperparam_dtype=_f32(m))(
        learning_rate=0.1), jnp.bfloat16),
    # optax's newer arguments
    ("lion_smooth", lambda m: m.scale_by_lion(mode="smooth", smooth_beta=2.0), np.float32),
    ("lion_refined", lambda m: m.scale_by_lion(b1=0.5, mode="refined"), np.float32),
    ("lr_default_none", lambda m: m.scale_by_learning_rate(), np.float32),
    # named_chain: an OrderedDict state keyed by name; extra args reach every member
    ("named_chain", lambda m: m.named_chain(("clip", m.clip(0.5)), ("sgd", m.sgd(0.1, 0.9))),
     np.float32),
    ("named_chain_extra", lambda m: m.named_chain(("s", m.scale(0.5)),
                                                  ("polyak", m.polyak_sgd())), np.float32),
    # MultiSteps with a bf16 accumulator rounds the stored mean, not the emitted one
    ("multisteps_bf16_acc", lambda m: m.MultiSteps(m.sgd(0.1, 0.9), 2,
                                                   accumulator_dtype=_bf16(m)), np.float32),
    ("multisteps_sum_bf16_acc", lambda m: m.MultiSteps(m.sgd(0.1), 2, use_grad_mean=False,
                                                       accumulator_dtype=_bf16(m)),
     np.float32),
])
def test_optim_matches_optax(name, build, dtype):
    extra = (lambda i: {"value": 1.0 + i}) if "extra" in name else None
    tol = LOW_TOL if np.dtype(dtype).itemsize < 4 else None
    _run_both(build, dtype, steps=4, tol=tol, extra=extra, jit="jit" in name)


def test_named_chain_state_and_errors():
    ox = pytest.importorskip("optax", reason="optax is the oracle")
    p = {"a": jnp.ones(2)}
    state = optim.named_chain(("first", optim.scale(2.0)), ("adam", optim.adam(0.1))).init(p)
    ostate = ox.named_chain(("first", ox.scale(2.0)), ("adam", ox.adam(0.1))).init(
        {"a": jax.numpy.ones(2)})
    assert type(state) is type(ostate) and list(state) == list(ostate) == ["first", "adam"]
    with pytest.raises(ValueError, match="unique"):
        optim.named_chain(("a", optim.scale(1.0)), ("a", optim.scale(2.0)))
    with pytest.raises(TypeError, match=r"argument 1 must be a \(name, GradientTransformation"):
        optim.named_chain(("a", optim.scale(1.0)), optim.scale(2.0))


@pytest.mark.parametrize("assoc", [False, True])
def test_tree_sum_matches_optax(assoc):
    ox = pytest.importorskip("optax", reason="optax is the oracle")
    tree = [np.arange(3.0, dtype=np.float32), {"a": np.float32(2.5), "b": np.ones((2, 2))}]
    ours = optim.tree_utils.tree_sum(tree, associative_reduction=assoc)
    theirs = ox.tree_utils.tree_sum(jax.tree.map(jax.numpy.asarray, tree),
                                    associative_reduction=assoc)
    assert jnp.result_type(ours) == theirs.dtype and float(ours) == float(theirs)


@pytest.mark.parametrize("dtypes", [("float32", "int32"), ("float16", "int32"),
                                    ("float16", "int8"), ("bfloat16", "float16"),
                                    ("int32", "uint32"), ("bool", "uint8"), ("float32",), ()])
@pytest.mark.parametrize("handler", [None, "promote", "highest", "lowest", "widest"])
def test_tree_dtype_matches_optax(dtypes, handler):
    ox = pytest.importorskip("optax", reason="optax is the oracle")
    tree = [np.ones(2, jnp.dtype(d)) for d in dtypes]

    def run(f):
        try:
            return np.dtype(f(tree, handler))
        except ValueError:
            return ValueError
    assert run(optim.tree_utils.tree_dtype) == run(ox.tree_utils.tree_dtype)


@pytest.mark.parametrize("loss, args", [
    ("l2_loss", ("x", "t")),
    ("softmax_cross_entropy", ("x", "p")),
    ("softmax_cross_entropy_with_integer_labels", ("x", "i")),
    ("sigmoid_binary_cross_entropy", ("x", "p")),
    ("cosine_similarity", ("x", "t")),
])
def test_losses_take_bfloat16_like_optax(loss, args):
    ox = pytest.importorskip("optax", reason="optax is the oracle")
    rng = np.random.default_rng(1)
    p = rng.random((3, 4))
    vals = {"x": rng.normal(size=(3, 4)), "t": rng.normal(size=(3, 4)),
            "p": p / p.sum(-1, keepdims=True), "i": np.array([0, 3, 1], np.int32)}

    def arg(k, a):
        return a.asarray(vals[k]) if k == "i" else a.asarray(vals[k], a.bfloat16)
    ours = getattr(optim.losses, loss)(*[arg(k, jnp) for k in args])
    theirs = getattr(ox.losses, loss)(*[arg(k, jax.numpy) for k in args])
    _assert_same(ours, theirs, dict(rtol=2e-2, atol=2e-2), loss)


def test_inject_hyperparams_bf16_rounding_error_names_the_fix():
    # optax rounds adam's b2=0.999 to bfloat16 1.0 and returns NaN; fnad says what to do
    p = {"w": jnp.ones(3, jnp.bfloat16)}
    with pytest.raises(ValueError, match="b2 must be.*hyperparam_dtype=jnp.float32"):
        optim.inject_hyperparams(optim.adam)(learning_rate=0.1).init(p)

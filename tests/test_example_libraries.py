"""fnad.example_libraries (optimizers, stax) against jax.example_libraries: optimizer
trajectories on a small quadratic (eager and under jit with a traced step), schedules,
l2_norm / clip_grads, the state's pack / unpack round trip; stax networks initialized from
the same key as jax's (fnad's keys are jax's, so the same parameters), applied and
differentiated on jax's parameters; errors.
"""
import numpy as np
import pytest
from checks import assert_trees_close, traced

import fnad
import fnad.numpy as jnp
from fnad.example_libraries import optimizers as fo
from fnad.example_libraries import stax as fs


@pytest.fixture(scope="module")
def jx():
    """(jax, jax.numpy, jax's optimizers, jax's stax); the test skips without jax."""
    jax = pytest.importorskip("jax", reason="jax is the oracle")
    from jax.example_libraries import optimizers, stax
    return jax, jax.numpy, optimizers, stax


# ---- optimizers --------------------------------------------------------------------------------

A = np.array([[3.0, 0.5], [0.5, 1.0]], np.float32)
P0 = {"w": np.array([1.0, -2.0], np.float32),
      "b": [np.array([[0.5, 1.5, -1.0], [2.0, 0.1, 0.3]], np.float32), np.float32(0.7)]}


def _loss(p, np_):
    """½ wᵀ A w + Σ b0⁴/4 + b1²: a quadratic in w, quartic in b0, over a dict/list tree."""
    return 0.5 * (p["w"] @ A @ p["w"]) + np_.sum(p["b"][0] ** 4) / 4 + p["b"][1] ** 2


# name -> builder args; the schedules take fnad's or jax's module (`S`)
OPTIMIZERS = {
    "sgd": lambda S: (S.exponential_decay(0.1, 2, 0.5),),
    "momentum": lambda S: (0.1, 0.9),
    "nesterov": lambda S: (S.inverse_time_decay(0.1, 2, 0.5, staircase=True), 0.8),
    "adagrad": lambda S: (0.2,),
    "rmsprop": lambda S: (S.polynomial_decay(0.05, 3, 0.01, 2.0),),
    "rmsprop_momentum": lambda S: (0.02, 0.8, 1e-6, 0.5),
    "adam": lambda S: (S.piecewise_constant([1, 2], [0.1, 0.05, 0.02]),),
    "adamax": lambda S: (0.1,),
    "sm3": lambda S: (0.1,),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_trajectory_matches_jax(jx, name):
    jax, jjnp, jo, _ = jx
    f_init, f_update, f_params = getattr(fo, name)(*OPTIMIZERS[name](fo))
    j_init, j_update, j_params = getattr(jo, name)(*OPTIMIZERS[name](jo))
    f_grad = fnad.grad(lambda p: _loss(p, jnp))
    j_grad = jax.grad(lambda p: _loss(p, jjnp))
    f_state, j_state = f_init(P0), j_init(P0)
    assert_trees_close(f_params(f_state), P0, 0, 0, f"{name} params_fn(init_fn(p))")
    for i in range(4):
        f_state = f_update(i, f_grad(f_params(f_state)), f_state)
        j_state = j_update(i, j_grad(j_params(j_state)), j_state)
        assert_trees_close(f_params(f_state), j_params(j_state), 1e-5, 1e-6,
                           f"{name} step {i}")


def test_jitted_update_with_traced_step_matches_eager(jx):
    """The state is a pytree (its treedefs static), so a jitted step takes and returns it;
    the step and the schedules' index are traced there."""
    jax, jjnp, jo, _ = jx
    for name in ("adam", "sm3"):
        f_init, f_update, f_params = getattr(fo, name)(*OPTIMIZERS[name](fo))
        j_init, j_update, j_params = getattr(jo, name)(*OPTIMIZERS[name](jo))
        step = traced(lambda i, s: f_update(i, fnad.grad(lambda p: _loss(p, jnp))(f_params(s)),
                                            s))
        f_state, j_state = f_init(P0), j_init(P0)
        for i in range(3):
            f_state = step(np.int32(i), f_state)
            j_state = j_update(i, jax.grad(lambda p: _loss(p, jjnp))(j_params(j_state)),
                               j_state)
        assert_trees_close(f_params(f_state), j_params(j_state), 1e-5, 1e-6, name)


def test_schedules_match_jax(jx):
    _, _, jo, _ = jx
    cases = [("constant", (0.3,)), ("exponential_decay", (0.1, 3, 0.5)),
             ("inverse_time_decay", (0.1, 3, 0.5)), ("inverse_time_decay", (0.1, 3, 0.5, True)),
             ("polynomial_decay", (0.1, 4, 0.01, 0.5)),
             ("piecewise_constant", ([2, 5], [1.0, 0.5, 0.25]))]
    steps = np.arange(8)
    for name, args in cases:
        f, j = getattr(fo, name)(*args), getattr(jo, name)(*args)
        got = np.array([np.asarray(f(i), np.float32) for i in steps])
        want = np.array([np.asarray(j(i), np.float32) for i in steps])
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name}{args}")
    assert fo.make_schedule(0.5)(7) == 0.5
    sched = fo.exponential_decay(1.0, 1, 0.5)
    assert fo.make_schedule(sched) is sched


def test_l2_norm_and_clip_grads_match_jax(jx):
    _, _, jo, _ = jx
    np.testing.assert_allclose(fo.l2_norm(P0), jo.l2_norm(P0), rtol=1e-6)
    for max_norm in (1.0, 100.0):                    # clipped, and left alone
        assert_trees_close(fo.clip_grads(P0, max_norm), jo.clip_grads(P0, max_norm), 1e-6, 0,
                           f"clip_grads to {max_norm}")


def test_pack_unpack_round_trip():
    init, update, params = fo.adam(0.1)
    grads = fnad.tree_util.tree_map(lambda x: 0.5 * jnp.asarray(x), P0)
    state = update(0, grads, init(P0))
    marked = fo.unpack_optimizer_state(state)
    assert isinstance(marked, dict) and isinstance(marked["w"], fo.JoinPoint)
    assert len(marked["w"].subtree) == 3                 # adam's (x, m, v)
    again = fo.pack_optimizer_state(marked)
    assert again.tree_def == state.tree_def and again.subtree_defs == state.subtree_defs
    assert_trees_close(again, state, 0, 0, "packed state")
    assert_trees_close(params(update(1, grads, again)), params(update(1, grads, state)), 0, 0,
                       "an update after the round trip")


def test_optimizer_errors():
    init, update, _ = fo.momentum(0.1, 0.9)
    state = init(P0)
    with pytest.raises(TypeError, match="gradient tree's structure"):
        update(0, {"w": P0["w"]}, state)
    bad = fo.optimizer(lambda: (lambda x: (x, x), lambda i, g, s: s[0], lambda s: s[0]))()
    with pytest.raises(TypeError, match="parameter leaf 0"):
        bad.update_fn(0, {"a": 1.0}, bad.init_fn({"a": 1.0}))
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        fo.pack_optimizer_state({"w": np.ones(2)})
    with pytest.raises(TypeError, match="step size must be a scalar or a schedule"):
        fo.sgd(np.ones(3))
    with pytest.raises(ValueError, match="one more entry than boundaries"):
        fo.piecewise_constant([1, 2], [0.1, 0.2])


# ---- stax --------------------------------------------------------------------------------------

def _cnn(S):
    return S.serial(S.Conv(4, (3, 3), padding="SAME"), S.Relu,
                    S.MaxPool((2, 2), strides=(2, 2)), S.Flatten, S.Dense(5), S.LogSoftmax)


def _residual(S):
    branch = S.serial(S.Dense(6), S.Tanh, S.Dense(6))
    return S.serial(S.Dense(6), S.FanOut(3), S.parallel(branch, S.Identity, S.Sigmoid),
                    S.FanInSum, S.Elu, S.FanOut(2), S.parallel(S.Softplus, S.Gelu),
                    S.FanInConcat(), S.Dense(3), S.Softmax)


def _norm_pool(S):
    return S.serial(S.GeneralConv(("NCHW", "OIHW", "NCHW"), 3, (2, 2), strides=(1, 2)),
                    S.BatchNorm(axis=(0, 2, 3)), S.LeakyRelu,
                    S.AvgPool((2, 2), padding="SAME", spec="NCHW"),
                    S.SumPool((1, 2), strides=(1, 1), spec="NCHW"), S.Flatten, S.Exp)


def _transposed(S):
    return S.serial(S.ConvTranspose(2, (3, 3), strides=(2, 2), padding="SAME"), S.Selu,
                    S.BatchNorm(), S.shape_dependent(lambda shape: S.Dense(shape[-1])),
                    S.Flatten)


def _transposed_1d(S):
    return S.serial(S.Conv1DTranspose(3, (2,), strides=(2,)), S.BatchNorm(axis=(0, 1),
                                                                          center=False))


NETS = {  # name -> (network of a stax module, input shape, init shape)
    "cnn": (_cnn, (3, 8, 8, 2), (-1, 8, 8, 2)),
    "residual": (_residual, (4, 5), (4, 5)),
    "norm_pool": (_norm_pool, (2, 2, 6, 7), (2, 2, 6, 7)),
    "transposed": (_transposed, (2, 3, 4, 1), (2, 3, 4, 1)),
    "transposed_1d": (_transposed_1d, (2, 5, 2), (2, 5, 2)),
}


@pytest.mark.parametrize("name", sorted(NETS))
def test_stax_network_init_apply_grad_match_jax(jx, name):
    """Init: jax's output shape and parameter shapes (the cnn: jax's values from the same
    key). On those parameters: jax's outputs and parameter gradients (the cnn's through
    jit). jax runs jitted (eval_shape for init): op by op it compiles each op anew."""
    jax, _, _, js = jx
    make, x_shape, init_shape = NETS[name]
    f_init, f_apply = make(fs)
    j_init, j_apply = make(js)
    f_shape, params = f_init(fnad.random.PRNGKey(3), init_shape)
    j_out = []
    j_params = jax.eval_shape(lambda k: j_out.append(j_init(k, init_shape)[0]) or
                              j_init(k, init_shape)[1], jax.random.PRNGKey(3))
    if name == "cnn":                   # jax's MaxPool loses the -1 batch size; fnad keeps it
        assert f_shape == (-1, 5)
        j_params = jax.jit(lambda k: j_init(k, init_shape)[1])(jax.random.PRNGKey(3))
        assert_trees_close(params, j_params, 1e-5, 1e-6, f"{name} init")
    else:
        assert tuple(f_shape) == tuple(j_out[0])
        assert fnad.tree_util.tree_structure(params) == fnad.tree_util.tree_structure(
            jax.tree_util.tree_map(lambda s: 0, j_params))
        for f, j in zip(fnad.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(j_params)):
            assert (f.shape, f.dtype) == (j.shape, j.dtype)
    params = fnad.tree_util.tree_map(np.asarray, params)
    x = np.random.default_rng(0).normal(size=x_shape).astype(np.float32)
    f_out = f_apply(params, x)
    assert f_out.shape[1:] == tuple(f_shape[1:])
    w = np.linspace(-1, 1, f_out.size, dtype=np.float32).reshape(f_out.shape)

    def loss(apply, lib):
        def value(p):
            out = apply(p, x)
            return lib.sum(out * w), out
        return value
    (_, j_out), j_grad = jax.jit(jax.value_and_grad(loss(j_apply, jax.numpy), has_aux=True))(
        params)
    assert_trees_close(f_out, j_out, 1e-5, 1e-5, f"{name} apply")
    f_grad = fnad.grad(loss(f_apply, jnp), has_aux=True)
    if name == "cnn":
        f_grad = traced(f_grad)
    assert_trees_close(f_grad(params)[0], j_grad, 1e-4, 1e-5, f"{name} grad")


def test_stax_dropout_matches_jax(jx):
    jax, _, _, js = jx
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    _, f_apply = fs.serial(fs.Relu, fs.Dropout(0.7))
    _, j_apply = js.serial(js.Relu, js.Dropout(0.7))
    got = f_apply([(), ()], x, rng=fnad.random.PRNGKey(5))
    assert_trees_close(got, j_apply([(), ()], x, rng=jax.random.PRNGKey(5)), 1e-6, 0,
                       "dropout")
    assert 0 < np.mean(np.asarray(got) == 0) < 1
    _, eval_apply = fs.Dropout(0.7, mode="test")
    np.testing.assert_array_equal(eval_apply((), x, rng=fnad.random.PRNGKey(5)), x)


def test_stax_errors():
    _, dropout = fs.Dropout(0.5)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        dropout((), np.ones(3, np.float32))
    init, _ = fs.Conv(4, (3, 3))
    with pytest.raises(ValueError, match=r"input shape \(8, 8, 2\) has 3 dims"):
        init(fnad.random.PRNGKey(0), (8, 8, 2))
    with pytest.raises(ValueError, match="filter_shape"):
        fs.Conv(4, (3, 3, 3))
    with pytest.raises(TypeError, match="padding must be"):
        fs.MaxPool((2, 2), padding=((0, 1), (0, 1)))
    with pytest.raises(ValueError, match="spec 'NHW'"):
        fs.AvgPool((2, 2), spec="NHW")
    init, _ = fs.parallel(fs.Relu, fs.Relu)
    with pytest.raises(ValueError, match="2 layers but 1 input shapes"):
        init(fnad.random.PRNGKey(0), [(2, 3)])

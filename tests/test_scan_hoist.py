"""fnad.passes.hoist_scans: products of loop inputs move before a scan, carries that sum a
product per step become one product after it. Each rewrite is checked for what it moved
(the dot_generals left in the loop body), for the same signature and values as the program
it came from (evaluated equation by equation), and for what it must leave alone."""
from __future__ import annotations

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import lax
from fnad.ir import ClosedJaxpr, eval_jaxpr, typecheck_jaxpr
from fnad.passes import dce, hoist_scans, optimize

rng = np.random.default_rng(3)


def rand(*shape):
    return jnp.asarray(rng.standard_normal(shape).astype(np.float32))


def hoisted(fn, *args):
    """(traced, rewritten): fn's jaxpr and the same after hoist_scans and DCE."""
    closed = fnad.make_jaxpr(fn)(*args)
    return closed, dce(hoist_scans(closed))


def values(closed: ClosedJaxpr, *args) -> list:
    leaves = fnad.tree_util.tree_leaves(args)
    return [np.asarray(o) for o in eval_jaxpr(closed.jaxpr, closed.consts, *leaves)]


def check_same(before: ClosedJaxpr, after: ClosedJaxpr, *args, rtol=2e-5, atol=2e-5):
    typecheck_jaxpr(after.jaxpr)
    assert after.jaxpr.invars == before.jaxpr.invars
    assert after.out_avals == before.out_avals         # shapes, dtypes and weak types
    for a, b in zip(values(before, *args), values(after, *args)):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def scans(closed: ClosedJaxpr) -> list:
    return [e for e in closed.jaxpr.eqns if e.primitive.name == "scan"]


def dots_in(eqn) -> int:
    """dot_generals in a scan's body."""
    return sum(e.primitive.name == "dot_general" for e in eqn.params["jaxpr"].jaxpr.eqns)


def rnn_loss(params, xs, ys):
    def cell(h, x):
        h = jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h, h
    h0 = jnp.zeros((xs.shape[1], params["wh"].shape[0]), jnp.float32)
    _, hs = lax.scan(cell, h0, xs)
    return jnp.mean((hs @ params["wo"] - ys) ** 2)


def rnn_args(t=7, b=3, d=4, h=5):
    params = {"wx": rand(d, h), "wh": rand(h, h) * 0.5, "b": rand(h), "wo": rand(h, 1)}
    return params, rand(t, b, d), rand(t, b, 1)


def test_an_rnn_gradient_loops_over_the_state_only():
    args = rnn_args()
    grad = fnad.value_and_grad(rnn_loss)
    before, after = hoisted(grad, *args)
    assert [dots_in(s) for s in scans(before)] == [2, 3]    # x W_x, h W_h; dh, dW_x, dW_h
    forward, backward = scans(after)
    assert dots_in(forward) == 1                              # h W_h: x W_x for all steps before
    assert dots_in(backward) == 1                             # dh W_h^T: the gradients after
    assert forward.params["num_carry"] == backward.params["num_carry"] == 1   # (3 summed ones gone)
    check_same(before, after, *args)
    value, grads = fnad.jit(grad)(*args)                      # the jit's passes do the same
    want_value, want = grad(*args)
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    for g, w in zip(fnad.tree_util.tree_leaves(grads), fnad.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_an_rnn_gradient_matches_jax():
    jax = pytest.importorskip("jax", reason="jax is the oracle of this test")
    import jax.numpy as jjnp
    args = rnn_args(t=9, b=2, d=3, h=4)

    def jax_loss(params, xs, ys):
        def cell(h, x):
            h = jjnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
            return h, h
        _, hs = jax.lax.scan(cell, jjnp.zeros((xs.shape[1], params["wh"].shape[0])), xs)
        return jjnp.mean((hs @ params["wo"] - ys) ** 2)
    got = fnad.jit(fnad.grad(rnn_loss))(*args)
    want = jax.grad(jax_loss)(*fnad.tree_util.tree_map(np.asarray, args))
    for k in got:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [0, 1, 6])
def test_summed_products_with_transposes_two_terms_and_an_initial_value(reverse, length):
    """c + a_t^T b_t + (x_t^T a_t)^T with a carried value a_t, an xs operand x_t and a
    nonzero initial sum; a sum of an xs slice (d + x_t summed over rows)."""
    def f(c0, d0, a0, xs, w):
        def body(carry, x):
            c, d, a = carry
            b = jnp.tanh(a @ w)
            c = c + (a.T @ b + (x.T @ a).T)
            d = d + x.sum(0)
            return (c, d, b * 0.5 + x @ jnp.ones((4, 4), np.float32)), None
        return lax.scan(body, (c0, d0, a0), xs, length=length, reverse=reverse)[0]
    args = rand(4, 4), rand(4), rand(2, 4), rand(length, 2, 4), rand(4, 4)
    before, after = hoisted(f, *args)
    (scan,) = scans(after)
    assert scan.params["num_carry"] == 1                   # only a (the state) is carried
    assert dots_in(scan) == 1                              # a @ w; x @ ones moved before
    check_same(before, after, *args)


def test_products_of_consts_only_run_once_before_the_loop():
    def f(c0, xs, w, v):
        def body(c, x):
            return c * (w @ v) + x, None                    # w @ v: the same every step
        return lax.scan(body, c0, xs)[0]
    args = rand(3, 3), rand(5, 3, 3), rand(3, 3), rand(3, 3)
    before, after = hoisted(f, *args)
    (scan,) = scans(after)
    assert dots_in(scan) == 0
    assert after.jaxpr.eqns[0].primitive.name == "dot_general"
    assert after.jaxpr.eqns[0].outvars[0].aval.shape == (3, 3)    # once, not per step
    check_same(before, after, *args)


def test_what_stays_in_the_loop():
    def read_elsewhere(c0, xs, w):                          # the sum is read by the body too
        def body(c, x):
            return c + x.T @ x + jnp.tanh(c) @ w, None
        return lax.scan(body, c0, xs)[0]

    def invariant(c0, xs, w):              # the term does not vary: w @ w runs once before
        def body(c, x):
            return c + w @ w, x * 2.0
        return lax.scan(body, c0, xs)

    def elementwise_of_state(c, xs):                        # not a product or a sum
        def body(carry, x):
            c, h = carry
            h = jnp.sin(h) + x
            return (c + h * h, h), None
        return lax.scan(body, (c, c), xs)[0]

    def sum_of_state(c, xs):                                # stacked only for its sum
        def body(carry, x):
            c, h = carry
            h = jnp.sin(h) + x
            return (c + h.sum(0), h), None
        return lax.scan(body, (c.sum(0), c), xs)[0]
    cases = [(read_elsewhere, (rand(3, 3), rand(4, 2, 3), rand(3, 3)), 1, 1),
             (invariant, (rand(3, 3), rand(4, 3), rand(3, 3)), 1, 0),
             (elementwise_of_state, (rand(2, 3), rand(4, 2, 3)), 2, 0),
             (sum_of_state, (rand(2, 3), rand(4, 2, 3)), 2, 0)]
    for fn, args, carries, dots in cases:
        before, after = hoisted(fn, *args)
        (scan,) = scans(after)
        assert scan.params["num_carry"] == carries and dots_in(scan) == dots, fn.__name__
        check_same(before, after, *args)


def test_a_map_of_loop_inputs_becomes_one_vectorized_computation():
    """lax.map of products, elementwise ops and reductions of its xs, and a loop that only
    sums a function of its xs: no scan is left, the work runs on all steps at once."""
    w = rand(8, 4)

    def mapped(xs):
        return lax.map(lambda x: jnp.tanh(x @ w) + x.sum(), xs)

    def summed(c, xs):
        return lax.scan(lambda c, x: (c + jnp.sin(x).sum(0), None), c, xs)[0]
    for fn, args in [(mapped, (rand(5, 3, 8),)), (summed, (rand(3), rand(6, 2, 3))),
                     (mapped, (rand(0, 3, 8),))]:
        before, after = hoisted(fn, *args)
        assert scans(before) and not scans(after), fn.__name__
        check_same(before, after, *args)


def test_effects_and_loops_by_a_loop_batch_rule_stay():
    """A debug callback stays in the loop, in its order; a primitive without a batching
    rule (a user primitive: vmap would run it in a loop) is not moved either."""
    import fnad.primitives as fp
    calls = []

    def printing(xs):
        def body(c, x):
            fnad.debug.callback(lambda v: calls.append(float(v)), x.sum())
            return c + x.sum(), x * 2.0
        return lax.scan(body, jnp.float32(0.0), xs)
    xs = rand(3, 4)
    before, after = hoisted(printing, xs)
    (scan,) = scans(after)
    assert "debug_callback" in [e.primitive.name for e in scan.params["jaxpr"].jaxpr.eqns]
    calls.clear()
    values(after, xs)
    np.testing.assert_allclose(calls, np.asarray(xs).sum(1), rtol=1e-6)
    double = fp.Primitive("double_no_batch_rule")
    double.def_abstract_eval(lambda x: fp.ShapedArray(x.shape, x.dtype, x.weak_type))
    double.def_impl(lambda x: x * 2.0, backend="numpy")
    before, after = hoisted(lambda xs: lax.map(lambda x: jnp.sin(double.bind(x)), xs),
                            rand(3, 4))
    (scan,) = scans(after)
    assert [e.primitive.name for e in scan.params["jaxpr"].jaxpr.eqns] == [
        "double_no_batch_rule", "sin"]


def test_gradient_accumulation_over_microbatches_keeps_its_memory():
    """A loop over microbatches whose per-step activations are much larger than its xs:
    stacking them for one product after the loop (4 x 512 KiB) would take more than the
    loop's xs and ys and 1 MiB, so the weight gradient stays a running sum."""
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    def accumulate(w, batches):
        def body(g, idx):
            x = jnp.sin(idx.astype(jnp.float32)[:, None] * jnp.arange(256.0))   # wide from tiny xs
            return g + fnad.grad(loss)(w, x), None
        return lax.scan(body, jnp.zeros_like(w), batches)[0]
    args = rand(256, 64) * 0.1, jnp.arange(4 * 512, dtype=jnp.int32).reshape(4, 512)
    before, after = hoisted(accumulate, *args)
    (scan,) = scans(after)
    assert scan.params["num_carry"] == 1 and dots_in(scan) == dots_in(scans(before)[0])
    check_same(before, after, *args)


def test_a_rewritten_program_transforms_and_is_a_fixed_point():
    """jit's passes run before grad and vmap of the jitted function: the hoisted program is
    differentiated and batched like any other (vmap checked against a Python loop)."""
    args = rnn_args(t=5, b=2, d=3, h=3)
    step = fnad.jit(fnad.grad(rnn_loss))
    closed = optimize(fnad.make_jaxpr(fnad.grad(rnn_loss))(*args))
    assert optimize(closed) is closed
    assert str(optimize(fnad.make_jaxpr(fnad.grad(rnn_loss))(*args))) == str(closed)  # stable
    many = [rnn_args(t=5, b=2, d=3, h=3) for _ in range(3)]
    stacked = fnad.tree_util.tree_map(lambda *v: jnp.stack(v), *many)
    got = fnad.vmap(step)(*stacked)
    for i, one in enumerate(many):
        want = fnad.grad(rnn_loss)(*one)
        for k in want:
            np.testing.assert_allclose(got[k][i], want[k], rtol=1e-5, atol=1e-6)
    outer = fnad.grad(lambda p, xs, ys: sum(jnp.sum(g ** 2) for g in
                                            fnad.tree_util.tree_leaves(step(p, xs, ys))))
    got, want = fnad.jit(outer)(*args), outer(*args)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)


def test_nested_scans_and_a_scan_in_a_cond():
    """An RNN's gradient inside an outer scan (over sequences) and inside a cond branch: the
    inner loops are rewritten where they are, the values kept."""
    args = rnn_args(t=4, b=2, d=3, h=3)

    def outer(params, xss, yss):
        def body(acc, batch):
            return acc + fnad.grad(rnn_loss)(params, *batch)["wh"], None
        return lax.scan(body, jnp.zeros_like(params["wh"]), (xss, yss))[0]

    def branch(p, params, xs, ys):
        return lax.cond(p, lambda: fnad.grad(rnn_loss)(params, xs, ys)["wh"],
                        lambda: params["wh"])
    xss, yss = jnp.stack([args[1]] * 3), jnp.stack([args[2]] * 3)
    before, after = hoisted(outer, args[0], xss, yss)
    inner = [e for e in scans(after)[0].params["jaxpr"].jaxpr.eqns if e.primitive.name == "scan"]
    assert [dots_in(s) for s in inner] == [1, 1]
    check_same(before, after, args[0], xss, yss)
    before, after = hoisted(branch, True, *args)
    assert str(before) != str(after)
    check_same(before, after, True, *args)
    check_same(before, after, False, *args)


def test_the_option_keeps_loops_as_written():
    """config.jax_hoist_scans = False: jit's program keeps every product in its loop and
    (on the numpy backend) gives eager's numbers bit for bit; the option is part of the
    compile cache's keys (also of the numba backend's on disk, which maps a traced program
    to the one compiled from it)."""
    from fnad.backends import numba_cpu
    from fnad.backends.numba_cpu import codegen
    from fnad.config import config
    args = rnn_args()
    traced = fnad.make_jaxpr(fnad.grad(rnn_loss))(*args)
    hoisted_key = codegen._program_key(traced, numba_cpu, True)
    hoisted_text = fnad.jit(fnad.grad(rnn_loss)).lower(*args).as_text()
    with config.override(jax_hoist_scans=False):
        as_written = fnad.jit(fnad.grad(rnn_loss), backend="numpy")
        text = as_written.lower(*args).as_text()
        got = as_written(*args)
        assert codegen._program_key(traced, numba_cpu, True) != hoisted_key
        assert [dots_in(s) for s in scans(optimize(traced))] == [2, 3]
    assert text != hoisted_text
    assert [dots_in(s) for s in scans(optimize(traced))] == [1, 1]
    want = fnad.grad(rnn_loss)(*args)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])

"""Control flow (lax.cond/switch/scan/map/while_loop/fori_loop) against jax.

Each program is written once against a namespace (`lax`, `np`) and run in fnad and
in jax: values, then grad, jvp, vmap (including batched predicates and batched
while-loop termination) and their compositions. Plus the errors and the jaxpr.
"""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
from fnad import lax as flax

jax = pytest.importorskip("jax", reason="jax not installed: control flow is checked against it")
import jax.numpy as jnp  # noqa: E402
from jax import lax as jlax  # noqa: E402

F = dict(lax=flax, np=fnp, lib=fnad)
J = dict(lax=jlax, np=jnp, lib=jax)
rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- the programs: (name, fn(ns) -> f, args) -------------------------------------------------
def rnn(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(params, xs):
        def cell(h, x):
            h = np_.tanh(h @ params["Wh"] + x @ params["Wx"] + params["b"])
            return h, np_.sum(h ** 2)
        h, ys = lax.scan(cell, np_.zeros(3), xs)
        return np_.sum(h) + np_.mean(ys)
    return f


def scan_reverse_pytree(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(a, xs):
        def body(c, x):
            s, p = c
            return (s + x["u"] * a, p * np_.cos(x["v"])), {"o": s * x["u"], "q": np_.sin(p)}
        (s, p), ys = lax.scan(body, (np_.zeros(2), np_.ones(2)), xs, reverse=True)
        return np_.sum(s) + np_.sum(p) + np_.sum(ys["o"]) + np_.sum(ys["q"])
    return f


def scan_no_xs(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, w):
        c, ys = lax.scan(lambda c, _: (np_.sin(c) * w, c), x, None, length=5)
        return np_.sum(c) + np_.sum(ys * ys)
    return f


def nested_scan(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, w):
        def outer(c, row):
            inner_c, _ = lax.scan(lambda ic, v: (ic * np_.cos(v) + w[0], None), c, row)
            return inner_c, inner_c * 2.0
        c, ys = lax.scan(outer, x, np_.reshape(w, (3, 2)) * x)
        return np_.sum(c) + np_.sum(ys)
    return f


def cond_simple(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, y):
        return lax.cond(np_.sum(x) > 0, lambda a, b: np_.sum(np_.sin(a) * b),
                        lambda a, b: np_.sum(a * a - b), x, y)
    return f


def cond_closure(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, y):
        return lax.cond(np_.sum(y) < 0, lambda: np_.sum(x * y), lambda: np_.sum(np_.exp(x)))
    return f


def switch_three(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, y):
        i = (np_.sum(x) > 0).astype(np_.int32) + (np_.sum(y) > 0).astype(np_.int32)
        branches = [lambda a: np_.sum(a * y), lambda a: np_.sum(np_.tanh(a)) * 3.0,
                    lambda a: np_.sum(a ** 3)]
        return lax.switch(i, branches, x)
    return f


def cond_in_scan(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, ws):
        def body(c, w):
            c = lax.cond(w > 0, lambda c: c * w + np_.sin(c), lambda c: c - w * c, c)
            return c, c
        c, ys = lax.scan(body, x, ws)
        return np_.sum(c) + np_.sum(ys)
    return f


def scan_in_cond(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, ws):
        def loop(x):
            return lax.scan(lambda c, w: (np_.sin(c) * w, c), x, ws)[0]
        return np_.sum(lax.cond(np_.sum(ws) > 0, loop, lambda x: x * 2.0, x))
    return f


def fori(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, y):
        return np_.sum(lax.fori_loop(0, 4, lambda i, v: np_.sin(v) * y + i, x))
    return f


def map_fn(ns):
    lax, np_ = ns["lax"], ns["np"]

    def f(x, y):
        return np_.sum(lax.map(lambda row: np_.dot(row, y) * np_.tanh(row), x))
    return f


PROGRAMS = [
    ("rnn", rnn, lambda: ({"Wh": r(3, 3) * 0.5, "Wx": r(2, 3), "b": r(3)}, r(6, 2))),
    ("scan_reverse_pytree", scan_reverse_pytree, lambda: (r(2), {"u": r(4, 2), "v": r(4, 2)})),
    ("scan_no_xs", scan_no_xs, lambda: (r(3), r(3))),
    ("nested_scan", nested_scan, lambda: (r(2), r(6))),
    ("cond_true", cond_simple, lambda: (np.abs(r(3)), r(3))),
    ("cond_false", cond_simple, lambda: (-np.abs(r(3)), r(3))),
    ("cond_closure", cond_closure, lambda: (r(3), -np.abs(r(3)))),
    ("switch_three", switch_three, lambda: (np.abs(r(3)), np.abs(r(3)))),
    ("switch_three_low", switch_three, lambda: (-np.abs(r(3)), -np.abs(r(3)))),
    ("cond_in_scan", cond_in_scan, lambda: (r(2), r(5))),
    ("scan_in_cond", scan_in_cond, lambda: (r(2), np.abs(r(4)))),
    ("fori", fori, lambda: (r(3), r(3))),
    ("map", map_fn, lambda: (r(4, 3), r(3))),
]
IDS = [p[0] for p in PROGRAMS]


def _close(a, b, tol=2e-5):
    fnad.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(
        np.asarray(x), np.asarray(y), rtol=tol, atol=tol), a, b)


def _to_jax(args):
    return jax.tree_util.tree_map(jnp.asarray, args)


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_value(name, prog, make_args):
    args = make_args()
    _close(prog(F)(*args), prog(J)(*_to_jax(args)))
    _close(traced(prog(F))(*args), prog(J)(*_to_jax(args)))


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_grad(name, prog, make_args):
    args = make_args()
    _close(fnad.grad(prog(F), argnums=(0, 1))(*args),
           jax.grad(prog(J), argnums=(0, 1))(*_to_jax(args)), 1e-4)


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_jvp(name, prog, make_args):
    args = make_args()
    tans = jax.tree_util.tree_map(lambda a: r(*np.shape(a)), args)
    _close(fnad.jvp(prog(F), args, tans), jax.jvp(prog(J), _to_jax(args), _to_jax(tans)),
           1e-4)


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_hvp(name, prog, make_args):
    """Second order: jvp of grad (forward over reverse through the loop)."""
    args = make_args()
    tans = jax.tree_util.tree_map(lambda a: r(*np.shape(a)), args)

    def hvp(lib, f):
        return lambda a, t: lib.jvp(lib.grad(f, argnums=(0, 1)), a, t)[1]
    _close(hvp(fnad, prog(F))(args, tans), hvp(jax, prog(J))(_to_jax(args), _to_jax(tans)),
           2e-3)


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0)], ids=str)
def test_vmap_of_grad(name, prog, make_args, in_axes):
    """Per-example gradients: vmap(grad(f)) against jax, and vmap against a Python loop."""
    args = make_args()
    batched = [jax.tree_util.tree_map(lambda a: np.stack([a, a * 0.5 - 0.3, -a]), x)
               if ax == 0 else x for x, ax in zip(args, in_axes)]
    g_f = fnad.vmap(fnad.grad(prog(F), argnums=(0, 1)), in_axes=in_axes)(*batched)
    g_j = jax.vmap(jax.grad(prog(J), argnums=(0, 1)), in_axes=in_axes)(*_to_jax(batched))
    _close(g_f, g_j, 1e-4)
    v_f = fnad.vmap(prog(F), in_axes=in_axes)(*batched)
    loop = [prog(F)(*[jax.tree_util.tree_map(lambda a: a[i], x) if ax == 0 else x
                      for x, ax in zip(batched, in_axes)]) for i in range(3)]
    _close(v_f, np.stack([np.asarray(v) for v in loop]))


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_grad_of_vmap(name, prog, make_args):
    args = make_args()
    batched = jax.tree_util.tree_map(lambda a: np.stack([a, a * 0.5 + 0.1]), args[1])

    def loss(lib, f):
        return lambda a, b: lib.numpy.sum(lib.vmap(f, in_axes=(None, 0))(a, b) ** 2)
    _close(fnad.grad(loss(fnad, prog(F)), argnums=(0, 1))(args[0], batched),
           jax.grad(loss(jax, prog(J)), argnums=(0, 1))(_to_jax(args[0]), _to_jax(batched)),
           1e-4)


# ---- batched predicates and loops --------------------------------------------------------
def test_batched_cond_predicate_becomes_select():
    def f(lib, lax):
        return lambda x: lax.cond(x > 0, lambda v: v * 2.0, lambda v: -v, x)
    xs = np.array([-2.0, 3.0, 0.5, -0.1], np.float32)
    _close(fnad.vmap(f(fnad, flax))(xs), jax.vmap(f(jax, jlax))(xs))
    _close(fnad.vmap(fnad.grad(f(fnad, flax)))(xs), jax.vmap(jax.grad(f(jax, jlax)))(xs))
    assert "select_n" in str(fnad.make_jaxpr(fnad.vmap(f(fnad, flax)))(xs))


def test_batched_switch_index():
    def f(lax, np_):
        return lambda i, x: lax.switch(i, [lambda v: v + 1.0, lambda v: np_.sin(v),
                                           lambda v: v * v], x)
    idx = np.array([0, 2, 1, 5, -3], np.int32)     # out-of-range indices clamp
    xs = r(5)
    _close(fnad.vmap(f(flax, fnp))(idx, xs), jax.vmap(f(jlax, jnp))(idx, xs))
    _close(fnad.vmap(fnad.grad(f(flax, fnp), argnums=1))(idx, xs),
           jax.vmap(jax.grad(f(jlax, jnp), argnums=1))(idx, xs))


def test_batched_while_runs_until_every_member_is_done():
    def f(lax):
        return lambda x, lim: lax.while_loop(lambda c: c[0] < lim,
                                             lambda c: (c[0] * 2.0, c[1] + 1), (x, 0))
    xs = np.array([1.0, 3.0, 100.0, 0.1], np.float32)
    lims = np.array([10.0, 10.0, 10.0, 50.0], np.float32)
    for in_axes in [(0, 0), (0, None), (None, 0)]:
        a = xs if in_axes[0] == 0 else np.float32(1.5)
        b = lims if in_axes[1] == 0 else np.float32(20.0)
        _close(fnad.vmap(f(flax), in_axes=in_axes)(a, b),
               jax.vmap(f(jlax), in_axes=in_axes)(a, b))


def test_while_loop_values_and_forward_mode():
    def f(lax, np_):
        def g(x):
            return lax.while_loop(lambda c: np_.sum(c) < 20.0, lambda c: c * 1.5 + np_.sin(c),
                                  x)
        return g
    x = np.array([1.0, 2.0], np.float32)
    _close(f(flax, fnp)(x), f(jlax, jnp)(x))
    t = np.array([0.3, -1.0], np.float32)
    _close(fnad.jvp(f(flax, fnp), (x,), (t,)), jax.jvp(f(jlax, jnp), (x,), (t,)), 1e-4)
    _close(fnad.jacfwd(f(flax, fnp))(x) if hasattr(fnad, "jacfwd") else 0,
           jax.jacfwd(f(jlax, jnp))(x) if hasattr(fnad, "jacfwd") else 0, 1e-4)


def test_fori_loop_traced_bounds_is_a_while_loop():
    def f(lax):
        return lambda n, x: lax.fori_loop(0, n, lambda i, v: v * 1.5 + i, x)
    closed = fnad.make_jaxpr(f(flax))(3, 1.0)
    assert "while" in str(closed)
    assert "scan" in str(fnad.make_jaxpr(lambda x: f(flax)(3, x))(1.0))
    ns = np.array([1, 2, 5], np.int32)
    _close(fnad.vmap(f(flax), in_axes=(0, None))(ns, np.float32(1.0)),
           jax.vmap(f(jlax), in_axes=(0, None))(ns, np.float32(1.0)))
    _close(fnad.jvp(lambda x: f(flax)(4, x), (2.0,), (1.0,)),
           jax.jvp(lambda x: f(jlax)(4, x), (2.0,), (1.0,)))


def test_scan_values_ys_dtypes_and_integer_carry():
    def f(lax, np_):
        def body(c, x):
            i, s = c
            return (i + 1, s + x * i), (i, np_.sin(x))
        return lambda xs: lax.scan(body, (0, 0.0), xs)
    xs = np.arange(5, dtype=np.float32)
    a, b = f(flax, fnp)(xs), f(jlax, jnp)(xs)
    _close(a, b)
    assert [np.asarray(x).dtype for x in fnad.tree_util.tree_leaves(a)] == \
        [np.asarray(x).dtype for x in jax.tree_util.tree_leaves(b)]


def test_scan_length_zero():
    c, ys = flax.scan(lambda c, x: (c + x, c * x), 1.0, np.zeros((0, 2), np.float32)[:, 0])
    assert float(c) == 1.0 and np.asarray(ys).shape == (0,)


def test_map_batch_size():
    xs = r(7, 3)
    f = lambda v: fnp.sum(v * v)   # noqa: E731
    _close(flax.map(f, xs, batch_size=3), np.sum(xs * xs, axis=1))
    _close(flax.map(f, xs, batch_size=7), np.sum(xs * xs, axis=1))


def test_cond_operands_are_pytrees_and_integer_outputs():
    def f(lax, np_):
        return lambda p, d: lax.cond(p, lambda d: (d["a"] + 1, d["b"] * 2.0),
                                     lambda d: (d["a"] - 1, d["b"] / 2.0), d)
    d = {"a": np.int32(3), "b": r(2)}
    for p in (True, False):
        _close(f(flax, fnp)(p, d), f(jlax, jnp)(p, d))


def test_closed_over_weights_get_gradients():
    """A body that closes over the differentiated weights (hoisted constants)."""
    def f(lax, np_):
        def loss(w, xs):
            return np_.sum(lax.scan(lambda c, x: (np_.tanh(c @ w + x), None), np_.ones(2),
                                    xs)[0])
        return loss
    w, xs = r(2, 2), r(5, 2)
    _close(fnad.grad(f(flax, fnp))(w, xs), jax.grad(f(jlax, jnp))(w, xs), 1e-4)
    _close(fnad.grad(fnad.grad(lambda a: f(flax, fnp)(w * a, xs)))(0.7),
           jax.grad(jax.grad(lambda a: f(jlax, jnp)(w * a, xs)))(0.7), 1e-3)


def test_linearize_and_vjp_through_scan():
    args = ({"Wh": r(3, 3) * 0.5, "Wx": r(2, 3), "b": r(3)}, r(6, 2))
    out_f, lin = fnad.linearize(rnn(F), *args)
    out_j, lin_j = jax.linearize(rnn(J), *_to_jax(args))
    tans = jax.tree_util.tree_map(lambda a: r(*np.shape(a)), args)
    _close(out_f, out_j)
    _close(lin(*tans), lin_j(*_to_jax(tans)), 1e-4)


def test_scan_residuals_do_not_stack_loop_invariant_weights():
    """Reverse mode keeps a closed-over weight matrix once, not once per iteration."""
    w = r(16, 16)
    xs = r(50, 16)

    def loss(h0):
        return fnp.sum(flax.scan(lambda h, x: (fnp.tanh(h @ w + x), None), h0, xs)[0])
    from fnad.ad import linearize_flat
    _, closed, _ = linearize_flat(lambda h: [loss(h)], [fnp.ones(16)], "test")
    sizes = [int(np.prod(np.shape(c))) for c in closed.consts]
    assert max(sizes) <= 50 * 16, sizes        # per-iteration residuals, never 50 × w
    assert sum(s == 16 * 16 for s in sizes) <= 1


# ---- errors ------------------------------------------------------------------------------
def test_reverse_mode_while_loop_is_an_error():
    f = lambda x: flax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)  # noqa: E731
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                       "lax.while_loop.*scan"):
        fnad.grad(f)(1.0)
    g = lambda x, n: flax.fori_loop(0, n, lambda i, v: v * 2.0, x)  # noqa: E731
    ns = fnp.array([1, 3])                                     # traced bounds: a while_loop
    with pytest.raises(ValueError, match="fori_loop with static"):
        fnad.grad(lambda x: fnp.sum(fnad.vmap(lambda n: g(x, n))(ns)))(1.0)
    assert float(fnad.grad(lambda x: g(x, 3))(1.0)) == 8.0     # static bounds: a scan


def test_branch_type_mismatch():
    with pytest.raises(TypeError, match="must return the same types.*f32\\[2\\]"):
        flax.cond(True, lambda: fnp.ones(2), lambda: fnp.ones(3))
    with pytest.raises(TypeError, match="same pytree structure"):
        flax.cond(True, lambda: (1.0, 2.0), lambda: 1.0)
    with pytest.raises(TypeError, match="branch index must be an integer"):
        flax.switch(1.0, [lambda: 1.0], )
    with pytest.raises(TypeError, match="predicate must be a scalar"):
        flax.cond(fnp.ones(2) > 0, lambda: 1.0, lambda: 2.0)


def test_scan_errors():
    with pytest.raises(TypeError, match="output carry must have the same types.*f32\\[3\\]"):
        flax.scan(lambda c, x: (fnp.ones(3), x), fnp.ones(2), fnp.ones(4))
    with pytest.raises(TypeError, match="same pytree structure"):
        flax.scan(lambda c, x: ((c, c), x), 1.0, fnp.ones(4))
    with pytest.raises(TypeError, match="must return a pair"):
        flax.scan(lambda c, x: c, 1.0, fnp.ones(4))
    with pytest.raises(ValueError, match="same leading axis size"):
        flax.scan(lambda c, x: (c, None), 1.0, (fnp.ones(4), fnp.ones(5)))
    with pytest.raises(ValueError, match="length=3 but xs"):
        flax.scan(lambda c, x: (c, None), 1.0, fnp.ones(4), length=3)
    with pytest.raises(ValueError, match="length must be given"):
        flax.scan(lambda c, x: (c, None), 1.0, None)
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        flax.while_loop(lambda c: c, lambda c: c, 1.0)


def test_python_control_flow_on_batched_values_is_an_error():
    def f(x):
        if x > 0:                  # a Python `if` on a batched value
            return x
        return -x
    with pytest.raises(fnad.TracerBoolConversionError):
        fnad.vmap(f)(fnp.array([1.0, -1.0]))
    with pytest.raises(fnad.TracerBoolConversionError):
        fnad.grad(lambda x: flax.scan(lambda c, v: (f(c * v), None), x, fnp.ones(2))[0])(1.0)


def test_make_jaxpr_shows_the_bodies():
    text = str(fnad.make_jaxpr(lambda x: flax.cond(x > 0, fnp.sin, fnp.cos, x))(1.0))
    assert "cond[branches=(" in text and "sin" in text and "cos" in text
    text = str(fnad.make_jaxpr(lambda x: flax.scan(lambda c, v: (c * v, c), x,
                                                   fnp.ones(3)))(1.0))
    assert "scan[jaxpr={ lambda" in text and "length=3" in text


@pytest.mark.parametrize("policy", ["nothing", "dots"])
def test_checkpoint_inside_scan(policy):
    """A checkpointed block as the scan body (per-layer remat), against jax.checkpoint."""
    def f(lib, lax, np_):
        pol = {"nothing": lib.checkpoint_policies.nothing_saveable,
               "dots": lib.checkpoint_policies.dots_saveable}[policy]

        @lib.checkpoint
        def block_plain(h, w):
            return np_.tanh(h @ w) * np_.sin(h)
        block = lib.checkpoint(block_plain, policy=pol)

        def loss(ws, h0):
            h, ys = lax.scan(lambda h, w: (block(h, w), np_.sum(h)), h0, ws)
            return np_.sum(h ** 2) + np_.sum(ys)
        return loss
    ws, h0 = r(4, 3, 3) * 0.7, r(3)
    _close(fnad.grad(f(fnad, flax, fnp), argnums=(0, 1))(ws, h0),
           jax.grad(f(jax, jlax, jnp), argnums=(0, 1))(ws, h0), 1e-4)
    _close(fnad.vmap(fnad.grad(f(fnad, flax, fnp)), in_axes=(None, 0))(ws, np.stack([h0, -h0])),
           jax.vmap(jax.grad(f(jax, jlax, jnp)), in_axes=(None, 0))(ws, np.stack([h0, -h0])),
           1e-4)
    tans = (r(4, 3, 3), r(3))
    hvp = lambda lib, g: lib.jvp(lib.grad(g, argnums=(0, 1)), (ws, h0), tans)[1]  # noqa: E731
    _close(hvp(fnad, f(fnad, flax, fnp)), hvp(jax, f(jax, jlax, jnp)), 1e-3)


def test_custom_rules_inside_scan():
    """custom_vjp and custom_jvp functions as part of a scan body, under grad and vmap."""
    def make(lib, lax, np_):
        @lib.custom_vjp
        def clip_grad(x):
            return x

        clip_grad.defvjp(lambda x: (x, None), lambda _, g: (np_.clip(g, -0.1, 0.1),))

        @lib.custom_jvp
        def softplus(x):
            return np_.log1p(np_.exp(x))

        softplus.defjvps(lambda t, ans, x: t / (1.0 + np_.exp(-x)))

        def loss(w, xs):
            body = lambda h, x: (clip_grad(softplus(h * w + x)), np_.sum(h))  # noqa: E731
            h, ys = lax.scan(body, np_.ones(3), xs)
            return np_.sum(h * h) + np_.sum(ys)
        return loss
    w, xs = r(3), r(5, 3)
    _close(fnad.grad(make(fnad, flax, fnp), argnums=(0, 1))(w, xs),
           jax.grad(make(jax, jlax, jnp), argnums=(0, 1))(w, xs), 1e-4)
    wb = np.stack([w, 2 * w])
    _close(fnad.vmap(fnad.grad(make(fnad, flax, fnp)), in_axes=(0, None))(wb, xs),
           jax.vmap(jax.grad(make(jax, jlax, jnp)), in_axes=(0, None))(wb, xs), 1e-4)


@pytest.mark.parametrize("name,prog,make_args", PROGRAMS, ids=IDS)
def test_staged_programs_typecheck(name, prog, make_args):
    """The jaxprs of f, grad f and vmap f (bodies included) pass the typechecker and run."""
    from fnad.ir import eval_jaxpr, typecheck_jaxpr
    args = make_args()
    batched = (args[0], jax.tree_util.tree_map(lambda a: np.stack([a, a * 2.0]), args[1]))
    for fn, call_args in [(prog(F), args), (fnad.grad(prog(F), argnums=(0, 1)), args),
                          (fnad.vmap(prog(F), in_axes=(None, 0)), batched)]:
        closed = fnad.make_jaxpr(fn)(*call_args)
        typecheck_jaxpr(closed.jaxpr)
        flat = fnad.tree_util.tree_leaves(call_args)
        want = fnad.tree_util.tree_leaves(fn(*call_args))
        _close(eval_jaxpr(closed.jaxpr, closed.consts, *flat), want, 1e-5)


def test_weak_initial_carry_takes_the_body_dtype_as_jax():
    """A weakly typed initial carry (a Python scalar) takes the dtype the body gives it, as in
    jax: float16 here; a strong one of another dtype stays an error."""
    jax = pytest.importorskip("jax", reason="jax not installed: the oracle for dtypes")
    xs = np.ones(3, np.float16)
    for L in (flax, jax.lax):
        out = L.scan(lambda c, a: (c + a, None), 0., xs)[0]
        assert np.asarray(out).dtype == np.float16 and float(out) == 3.0
        w = L.while_loop(lambda c: c < 3, lambda c: c + np.float16(1), 0.)
        assert np.asarray(w).dtype == np.float16 and float(w) == 3.0
    with pytest.raises(TypeError, match="same types as its input carry"):
        flax.scan(lambda c, a: (c + a, None), np.float32(0), xs.astype(np.complex64))

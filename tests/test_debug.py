"""fnad.debug (print, callback under every transformation), debug_nans/debug_infs under
transformations naming the user's line, and disable_jit."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import fnad
import fnad.numpy as jnp
from fnad import core, lax
from fnad.config import Config, config
from fnad.debug import debug_callback_p

X = np.array([1.0, 2.0], np.float32)
XS = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def _line_of(fn, marker: str) -> int:
    """The line number in this file of the line of `fn` carrying the comment `marker`."""
    src, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(src) if f"# {marker}" in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


# ---- debug.print ------------------------------------------------------------------------------
def prints_x(x):
    fnad.debug.print("x = {}", x)
    fnad.debug.print("x = {x}, total = {t:.3f}", x=x, t=jnp.sum(x))
    return jnp.sum(jnp.sin(x))


def _expected(x) -> list[str]:
    x = np.asarray(x)
    return [f"x = {x}", f"x = {x}, total = {x.sum():.3f}"]


def test_print_eager_formats_concrete_values(capsys):
    out = prints_x(X)
    assert _lines(capsys) == _expected(X)
    np.testing.assert_allclose(np.asarray(out), np.sin(X).sum(), rtol=1e-6)


def test_print_under_jvp_and_grad_prints_primals_once(capsys):
    fnad.jvp(prints_x, (X,), (np.ones(2, np.float32),))
    assert _lines(capsys) == _expected(X)
    g = fnad.grad(prints_x)(X)
    assert _lines(capsys) == _expected(X)                    # the forward pass, once
    np.testing.assert_allclose(np.asarray(g), np.cos(X), rtol=1e-6)   # the value is unchanged
    fnad.grad(lambda s: fnad.grad(lambda t: prints_x(t * X))(s))(1.0)
    assert _lines(capsys) == _expected(X)                    # grad of grad: still once


def test_print_under_linearize_and_vjp_runs_in_the_forward_pass(capsys):
    _, f_jvp = fnad.linearize(prints_x, X)
    assert _lines(capsys) == _expected(X)
    f_jvp(np.ones(2, np.float32))                            # the linear map prints nothing
    assert _lines(capsys) == []
    _, f_vjp = fnad.vjp(prints_x, X)
    assert _lines(capsys) == _expected(X)
    f_vjp(np.float32(1.0))
    assert _lines(capsys) == []


def test_print_under_vmap_once_per_member_in_order(capsys):
    fnad.vmap(prints_x)(XS)
    lines = _lines(capsys)
    # the first print's equation runs for each member, then the second's
    assert lines == [_expected(r)[0] for r in XS] + [_expected(r)[1] for r in XS]
    fnad.vmap(prints_x, in_axes=1)(XS.T)
    assert _lines(capsys) == lines


def test_print_under_vmap_unbatched_operands_are_shared(capsys):
    def f(x, y):
        fnad.debug.print("{} {}", x, y)
        fnad.debug.print("only y: {}", y)                    # nothing batched: printed once
        return x
    fnad.vmap(f, in_axes=(0, None))(np.arange(3, dtype=np.float32), np.float32(7))
    assert _lines(capsys) == ["0.0 7.0", "1.0 7.0", "2.0 7.0", "only y: 7.0"]


def test_print_under_nested_vmap_inner_axis_outermost(capsys):
    # the inner vmap unrolls first, so its axis varies slowest (JAX prints in this order too)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    fnad.vmap(fnad.vmap(lambda v: fnad.debug.print("{}", v)))(a)
    assert _lines(capsys) == [str(v) for v in a.T.ravel()]


def test_print_staged_by_make_jaxpr_prints_when_evaluated(capsys):
    closed = fnad.make_jaxpr(prints_x)(X)
    assert _lines(capsys) == []                              # tracing prints nothing
    text = str(closed)
    assert text.count("debug_callback[") == 2 and "debug.print('x = {}')" in text
    assert debug_callback_p in {e.primitive for e in closed.eqns}
    y = np.array([3.0, -1.0], np.float32)
    closed(y)
    closed(X)
    assert _lines(capsys) == _expected(y) + _expected(X)


def test_print_staged_under_grad_and_vmap_keeps_running(capsys):
    closed = fnad.make_jaxpr(fnad.grad(prints_x))(X)
    assert _lines(capsys) == []
    g = closed(X)
    assert _lines(capsys) == _expected(X)
    np.testing.assert_allclose(np.asarray(g[0]), np.cos(X), rtol=1e-6)
    closed = fnad.make_jaxpr(fnad.vmap(prints_x))(XS)        # one equation per member
    assert str(closed).count("debug_callback[") == 2 * len(XS)
    closed(XS)
    assert _lines(capsys) == [_expected(r)[0] for r in XS] + [_expected(r)[1] for r in XS]


def test_print_pytrees_scalars_and_printoptions(capsys):
    fnad.debug.print("{d} {s} {i}", d={"w": lax.mul(X, 2.0)}, s=1.0 / 3.0, i=np.arange(3))
    assert _lines(capsys) == [
        f"{{'w': Array({np.array2string(X * 2, separator=', ')}, dtype=float32)}} "
        f"{np.float32(1 / 3)} {np.arange(3)}"]
    v = np.array([1 / 3, 2 / 3], np.float32)
    with np.printoptions(precision=2):                       # the options at the call count
        closed = fnad.make_jaxpr(lambda x: fnad.debug.print("{}", x))(v)
        fnad.debug.print("{}", v)
    closed(v)
    assert _lines(capsys) == ["[0.33 0.67]"] * 2


def test_print_format_errors_and_forms(capsys):
    with pytest.raises(ValueError, match="Unused keyword arguments.*f-string"):
        fnad.debug.print("no fields", x=X)
    with pytest.raises(ValueError, match="Unused positional arguments"):
        fnad.debug.print("{}", X, X)
    with pytest.raises(TypeError, match="format must be a str"):
        fnad.debug.print(X)
    fnad.debug.print("values:", X, 2, skip_format_check=True)   # JAX appends them
    fnad.debug.print(ordered=True)("two-call {}", X)
    with pytest.raises(TypeError, match="two-call form"):
        fnad.debug.print(None, X)
    assert _lines(capsys) == [f"values: {X} 2", f"two-call {X}"]
    closed = fnad.make_jaxpr(lambda x: fnad.debug.print("{}", x, ordered=True))(X)
    assert "ordered=True" in str(closed)


# ---- debug.callback ---------------------------------------------------------------------------
def test_callback_gets_concrete_arrays_pytrees_and_static_leaves():
    seen = []

    def cb(a, tree, *, tag):
        seen.append((a, tree, tag))

    def f(x):
        fnad.debug.callback(cb, x, {"y": x * 2, "n": (3,)}, tag="t")
        return x

    f(X)
    fnad.grad(lambda x: jnp.sum(f(x)))(X)
    fnad.make_jaxpr(f)(X)(X)
    assert len(seen) == 3
    for a, tree, tag in seen:
        assert isinstance(a, fnad.Array) and not isinstance(a, core.Tracer)
        np.testing.assert_array_equal(np.asarray(a), X)
        assert set(tree) == {"y", "n"} and tag == "t"
        np.testing.assert_array_equal(np.asarray(tree["y"]), X * 2)
        assert int(tree["n"][0]) == 3 and tree["n"][0].weak_type    # a weakly typed int
    seen.clear()
    fnad.vmap(f)(XS)
    assert [np.asarray(a).tolist() for a, _, _ in seen] == XS.tolist()


def test_callback_gets_a_copy_and_errors_propagate():
    x = lax.add(X, 0.0)

    def mutate(a):
        np.asarray(a)[:] = -1                                # the copy, not x's buffer
    fnad.debug.callback(mutate, x)
    np.testing.assert_array_equal(np.asarray(x), X)

    def boom(a):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        fnad.debug.callback(boom, X)
    with pytest.raises(TypeError, match="must be callable"):
        fnad.debug.callback(3, X)
    calls = []
    fnad.debug.callback(ordered=True)(lambda a: calls.append(a), X)    # two-call form
    assert len(calls) == 1


def test_debug_callback_is_effectful_for_dce():
    # a dead-code-elimination pass must keep it although it has no outputs
    assert debug_callback_p in core.effectful_primitives
    assert core.abstract_eval(debug_callback_p, [], {"callback": print, "ordered": False}) == []


# ---- against jax.debug.print ------------------------------------------------------------------
def program(debug, np_, x):
    """The same prints in fnad or jax: `debug`/`np_` are fnad.debug/fnad.numpy or jax's."""
    debug.print("x = {}", x)
    debug.print("x = {x}, total = {t:.3f}, first {f}", x=x, t=np_.sum(x), f=x[0])
    debug.print("tree {} scalar {s:.4f} ints {i}", {"k": x * 2}, s=1.0 / 3.0, i=np_.arange(3))
    debug.print("appended", x, skip_format_check=True)
    return np_.sum(np_.sin(x) * x)


@pytest.mark.parametrize("mode", ["eager", "jvp", "grad", "grad_of_grad", "vmap", "vmap_in1",
                                  "vmap_of_grad", "grad_of_vmap", "nested_vmap"])
def test_print_text_matches_jax(mode, capsys):
    jax = pytest.importorskip("jax", reason="jax is the oracle for debug.print's output")
    import jax.numpy as jax_np

    def run(api, debug, np_):
        f = lambda x: program(debug, np_, x)
        if mode == "eager":
            f(X)
        elif mode == "jvp":
            api.jvp(f, (X,), (X,))
        elif mode == "grad":
            api.grad(f)(X)
        elif mode == "grad_of_grad":
            api.grad(lambda s: api.grad(lambda t: f(t * X))(s))(np.float32(1.5))
        elif mode == "vmap":
            api.vmap(f)(XS)
        elif mode == "vmap_in1":
            api.vmap(f, in_axes=1)(XS.T)
        elif mode == "vmap_of_grad":
            api.vmap(api.grad(f))(XS)
        elif mode == "grad_of_vmap":
            api.grad(lambda xs: api.vmap(f)(xs).sum())(XS)
        else:
            api.vmap(api.vmap(f))(np.arange(12, dtype=np.float32).reshape(2, 3, 2))

    run(fnad, fnad.debug, jnp)
    ours = _lines(capsys)
    run(jax, jax.debug, jax_np)
    jax.effects_barrier()
    theirs = _lines(capsys)
    assert ours and ours == theirs


# ---- debug_nans / debug_infs under transformations -------------------------------------------
def log_of(x):
    y = jnp.log(x)                                           # <log line>
    return jnp.sum(y)


def zero_times_sqrt(x):
    return 0.0 * jnp.sqrt(x)                                 # <sqrt line>


def _check_fp_error(fn, what: str, prim: str, line: int, **flags) -> str:
    with config.override(**flags), pytest.raises(FloatingPointError) as e:
        fn()
    msg = str(e.value)
    assert f"invalid value ({what}) encountered in {prim}" in msg, msg
    assert f"test_debug.py:{line} " in msg, msg
    assert core._state.source is None                        # nothing leaked from jaxpr eval
    return msg


NEG = np.array([1.0, -1.0], np.float32)
LOG_LINE = _line_of(log_of, "<log line>")


def test_debug_nans_eager_jvp_vmap_and_grad_forward_name_the_line():
    _check_fp_error(lambda: log_of(NEG), "nan", "log", LOG_LINE, jax_debug_nans=True)
    _check_fp_error(lambda: fnad.jvp(log_of, (NEG,), (np.ones(2, np.float32),)),
                    "nan", "log", LOG_LINE, jax_debug_nans=True)
    _check_fp_error(lambda: fnad.vmap(log_of)(NEG), "nan", "log", LOG_LINE,
                    jax_debug_nans=True)
    _check_fp_error(lambda: fnad.grad(log_of)(NEG), "nan", "log", LOG_LINE,
                    jax_debug_nans=True)


def test_debug_nans_in_the_backward_pass_names_the_forward_line():
    # d(0·√x) at 0: the forward pass is finite (√0 = 0), the backward pass divides the
    # cotangent 0·1 by 2√0 = 0: 0/0 = nan, in the transpose of the JVP's div.
    line = _line_of(zero_times_sqrt, "<sqrt line>")
    msg = _check_fp_error(lambda: fnad.grad(zero_times_sqrt)(0.0), "nan", "div", line,
                          jax_debug_nans=True)
    assert "(zero_times_sqrt)" in msg and "backward pass" in msg
    # √ alone: 1/(2√0) = inf, only with debug_infs
    here = test_debug_nans_in_the_backward_pass_names_the_forward_line
    _check_fp_error(lambda: fnad.grad(jnp.sqrt)(0.0),  # <grad sqrt>
                    "inf", "div", _line_of(here, "<grad sqrt>"), jax_debug_infs=True)
    with config.override(jax_debug_nans=True):               # an inf is not a nan
        assert np.isinf(np.asarray(fnad.grad(jnp.sqrt)(0.0)))


def test_debug_nans_in_an_evaluated_jaxpr_names_the_staging_line():
    closed = fnad.make_jaxpr(log_of)(X)
    _check_fp_error(lambda: closed(NEG), "nan", "log", LOG_LINE, jax_debug_nans=True)
    # staging an evaluated jaxpr again keeps each equation's source line
    again = fnad.make_jaxpr(lambda x: closed(x)[0])(X)
    assert [e.source_info for e in again.eqns] == [e.source_info for e in closed.eqns]
    _check_fp_error(lambda: again(NEG), "nan", "log", LOG_LINE, jax_debug_nans=True)
    # the linear map from linearize is an evaluated jaxpr too
    _, f_jvp = fnad.linearize(zero_times_sqrt, 0.0)
    _check_fp_error(lambda: f_jvp(1.0), "inf", "div", _line_of(zero_times_sqrt, "<sqrt line>"),
                    jax_debug_infs=True)


def test_debug_nans_a_user_frame_below_the_interpreter_wins():
    def cb(v):
        lax.log(lax.neg(v))                                  # <in callback>
    closed = fnad.make_jaxpr(lambda x: fnad.debug.callback(cb, x))(X)
    _check_fp_error(lambda: closed(X), "nan", "log",
                    _line_of(test_debug_nans_a_user_frame_below_the_interpreter_wins,
                             "<in callback>"), jax_debug_nans=True)


def test_debug_nans_off_raises_nothing():
    assert not config.jax_debug_nans and not config.jax_debug_infs
    assert np.isnan(np.asarray(log_of(NEG)))
    assert np.isnan(np.asarray(fnad.grad(zero_times_sqrt)(0.0)))
    assert np.isinf(np.asarray(fnad.grad(jnp.sqrt)(0.0)))
    assert np.isnan(np.asarray(fnad.vmap(log_of)(NEG))).any()
    assert np.isnan(np.asarray(fnad.make_jaxpr(log_of)(X)(NEG)[0]))


def test_debug_nans_agrees_with_jax_on_the_primitive():
    jax = pytest.importorskip("jax", reason="jax is the oracle for which op debug_nans names")
    old = jax.config.jax_debug_nans
    jax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match=r"nan\) encountered in log"):
            jax.numpy.log(NEG)
        with pytest.raises(FloatingPointError, match=r"nan\) encountered in log"):
            jax.jvp(jax.numpy.log, (NEG,), (np.ones(2, np.float32),))
    finally:
        jax.config.update("jax_debug_nans", old)
    here = test_debug_nans_agrees_with_jax_on_the_primitive
    _check_fp_error(lambda: jnp.log(NEG),  # <ours>
                    "nan", "log", _line_of(here, "<ours>"), jax_debug_nans=True)


# ---- disable_jit ------------------------------------------------------------------------------
def test_disable_jit_context_manager_sets_restores_and_nests():
    assert config.jax_disable_jit is False
    with fnad.disable_jit():
        assert config.jax_disable_jit is True and config.disable_jit is True
        with fnad.disable_jit(False):
            assert config.jax_disable_jit is False
        assert config.jax_disable_jit is True
    assert config.jax_disable_jit is False
    with pytest.raises(KeyError), fnad.disable_jit():
        raise KeyError("restored on error too")
    assert config.jax_disable_jit is False

    @fnad.disable_jit()
    def inside():
        return config.jax_disable_jit
    assert inside() is True and inside() is True and config.jax_disable_jit is False
    with pytest.raises(TypeError, match="jax_disable_jit"), fnad.disable_jit("yes"):
        pass
    assert config.jax_disable_jit is False


def test_disable_jit_option_names_and_env_vars():
    for name in ("jax_disable_jit", "disable_jit"):
        with config.override(**{name: True}):
            assert config.jax_disable_jit is True
        assert config.jax_disable_jit is False
    assert Config(environ={"JAX_DISABLE_JIT": "1"}).jax_disable_jit is True
    assert Config(environ={"JAX_DISABLE_JIT": "1", "FNAD_DISABLE_JIT": "0"}).disable_jit is False
    code = "import fnad; print(fnad.config.jax_disable_jit)"
    env = {k: v for k, v in os.environ.items() if not k.endswith("DISABLE_JIT")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**env, "JAX_DISABLE_JIT": "true"})
    assert out.stdout.strip() == "True"


def test_disable_jit_agrees_with_jax():
    jax = pytest.importorskip("jax", reason="jax is the oracle for disable_jit's semantics")
    with jax.disable_jit(), fnad.disable_jit():
        assert jax.config.jax_disable_jit is config.jax_disable_jit is True
        with jax.disable_jit(False), fnad.disable_jit(False):
            assert jax.config.jax_disable_jit is config.jax_disable_jit is False
        assert jax.config.jax_disable_jit is config.jax_disable_jit is True
    assert jax.config.jax_disable_jit is config.jax_disable_jit is False

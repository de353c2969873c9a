"""make_jaxpr output (checked against expected text), the typechecker, eval_jaxpr,
eval_shape and static arguments."""
import textwrap

import numpy as np
import pytest

import fnad
from fnad import lax
from fnad.core import ShapedArray
from fnad.ir import Jaxpr, JaxprEqn, JaxprTypeError, Var, eval_jaxpr, typecheck_jaxpr
from fnad.primitives import elementwise as ew

X = np.ones(3, np.float32)


def expect(closed, text):
    assert str(closed) == textwrap.dedent(text).strip()


def test_make_jaxpr_with_literal():
    expect(fnad.make_jaxpr(lambda x: lax.mul(lax.sin(x), 2.0))(X), """
        { lambda ; a:f32[3]. let
            b:f32[3] = sin a
            c:f32[3] = mul b 2.0:f32[]
          in (c,) }""")


def test_make_jaxpr_closed_over_array_is_a_constvar():
    c = np.arange(3, dtype=np.float32)
    closed = fnad.make_jaxpr(lambda x: lax.add(x, c))(X)
    expect(closed, """
        { lambda a:f32[3] ; b:f32[3]. let
            c:f32[3] = add b a
          in (c,) }""")
    assert closed.consts[0] is c


def test_make_jaxpr_of_grad_of_pytree_loss():
    def loss(p, x):
        h = lax.tanh(lax.add(lax.mul(p["w"], x), p["b"]))
        return lax.reduce_sum(h, axes=(0,))
    expect(fnad.make_jaxpr(fnad.grad(loss))({"w": X, "b": X}, X), """
        { lambda ; a:f32[3] b:f32[3] c:f32[3]. let
            d:f32[3] = mul b c
            e:f32[3] = add d a
            f:f32[3] = tanh e
            g:f32[3] = square f
            h:f32[3] = sub 1.0:f32[] g
            i:f32[] = reduce_sum[axes=(0,)] f
            j:f32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,)] 1.0:f32[]
            k:f32[3] = mul j h
            l:f32[3] = mul k c
          in (k, l) }""")


def test_make_jaxpr_integer_and_boolean_intermediates():
    f = lambda x, n: (lax.convert_element_type(n, np.float32), lax.lt(x, 1.0))
    expect(fnad.make_jaxpr(f)(X, np.int32(3)), """
        { lambda ; a:f32[3] b:i32[]. let
            c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
            d:bool[3] = lt a 1.0:f32[]
          in (c, d) }""")


def test_make_jaxpr_static_argnums_and_return_shape():
    f = lambda x, k: lax.mul(x, float(k))
    closed, shape = fnad.make_jaxpr(f, static_argnums=1, return_shape=True)(X, 3)
    assert "mul a 3.0:f32[]" in str(closed)
    assert shape.shape == (3,) and shape.dtype == np.float32


def test_jaxpr_evaluates_and_typechecks():
    closed = fnad.make_jaxpr(lambda x, y: lax.mul(lax.exp(x), y))(X, X)
    typecheck_jaxpr(closed.jaxpr)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, X, 2 * X)
    np.testing.assert_allclose(out, np.exp(X) * 2 * X, rtol=1e-6)
    # evaluating a jaxpr under grad differentiates it
    g = fnad.grad(lambda x: lax.reduce_sum(closed(x, X)[0], axes=(0,)))(X)
    np.testing.assert_allclose(g, np.exp(X), rtol=1e-6)


def test_typechecker_rejects_bad_jaxprs():
    a = Var(ShapedArray((3,), np.float32))
    b = Var(ShapedArray((4,), np.float32))
    wrong_out = Var(ShapedArray((3,), np.float32))
    bad = Jaxpr([], [a, b], [JaxprEqn(ew.add_p, [a, b], {}, [wrong_out])], [wrong_out])
    with pytest.raises(JaxprTypeError, match=r"equation 0 \(add\).*\(3,\).*\(4,\)"):
        typecheck_jaxpr(bad)
    unbound = Var(ShapedArray((3,), np.float32))
    out = Var(ShapedArray((3,), np.float32))
    bad2 = Jaxpr([], [a], [JaxprEqn(ew.sin_p, [unbound], {}, [out])], [out])
    with pytest.raises(JaxprTypeError, match="used before it is bound"):
        typecheck_jaxpr(bad2)
    mistyped = Var(ShapedArray((3,), np.int32))
    bad3 = Jaxpr([], [a], [JaxprEqn(ew.sin_p, [a], {}, [mistyped])], [mistyped])
    with pytest.raises(JaxprTypeError, match="bound as i32.3. but the rule gives f32.3."):
        typecheck_jaxpr(bad3)


def test_eval_shape():
    out = fnad.eval_shape(lambda x, y: {"s": lax.add(x, y), "c": lax.lt(x, y)},
                          fnad.ShapeDtypeStruct((2, 5), np.float32), np.ones((2, 5), np.float32))
    assert out["s"].shape == (2, 5) and out["s"].dtype == np.float32
    assert out["c"].dtype == np.bool_


def test_weak_types_are_tracked():
    closed = fnad.make_jaxpr(lambda x: lax.mul(x, 2.0))(1.0)
    assert closed.jaxpr.invars[0].aval.weak_type
    assert closed.jaxpr.outvars[0].aval.weak_type
    strong = fnad.make_jaxpr(lambda x: lax.mul(x, 2.0))(np.float32(1.0))
    assert not strong.jaxpr.outvars[0].aval.weak_type


def test_named_call_and_named_scope_run_the_code_unchanged():
    f = fnad.named_call(lambda x: x * 2.0, name="double")
    with fnad.named_scope("block"):
        y = fnad.jit(f)(np.float32(3.0))
    assert float(y) == 6.0 and f.__name__ == "<lambda>"
    with pytest.raises(TypeError, match="name must be a str"):
        fnad.named_scope(3)
    with pytest.raises(TypeError, match="name must be a str"):
        fnad.named_call(f, name=3)

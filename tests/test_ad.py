"""Forward and reverse mode: jvp, linearize, vjp, grad, value_and_grad, nesting,
symbolic zeros, has_aux, argnums, integer inputs (float0), stop_gradient."""
import numpy as np
import pytest

import fnad
from fnad import dtypes, lax
from fnad.config import config

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover
    jax = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed")


def total(x):
    return lax.reduce_sum(x, axes=tuple(range(np.ndim(x))))


def f_sin_x(x):                                   # Σ sin(x)·x
    return total(lax.mul(lax.sin(x), x))


X = np.array([0.3, -1.2, 2.0], np.float32)


def test_grad_matches_closed_form():
    g = fnad.grad(f_sin_x)(X)
    np.testing.assert_allclose(g, np.cos(X) * X + np.sin(X), rtol=1e-6)
    assert g.dtype == np.float32 and g.shape == (3,)


def test_value_and_grad():
    v, g = fnad.value_and_grad(f_sin_x)(X)
    np.testing.assert_allclose(v, np.sum(np.sin(X) * X), rtol=1e-6)
    np.testing.assert_allclose(g, np.cos(X) * X + np.sin(X), rtol=1e-6)


def test_third_derivative_by_nesting():
    f = lambda x: lax.mul(lax.sin(x), x)          # x sin x
    d3 = fnad.grad(fnad.grad(fnad.grad(f)))(1.0)
    np.testing.assert_allclose(d3, -3 * np.sin(1.0) - np.cos(1.0), rtol=1e-5)


def test_jvp_and_linearize_agree():
    t = np.array([1.0, 0.5, -2.0], np.float32)
    y, y_dot = fnad.jvp(f_sin_x, (X,), (t,))
    y2, f_lin = fnad.linearize(f_sin_x, X)
    np.testing.assert_allclose(y, y2)
    np.testing.assert_allclose(y_dot, f_lin(t), rtol=1e-6)
    np.testing.assert_allclose(f_lin(2 * t), 2 * np.asarray(f_lin(t)), rtol=1e-6)


def test_vjp_is_transpose_of_jvp():
    def f(x, y):
        return lax.mul(lax.exp(x), y), lax.sin(x)
    y = np.array([1.0, 2.0, 3.0], np.float32)
    out, vjp_fn = fnad.vjp(f, X, y)
    ct = (np.array([1.0, -1.0, 0.5], np.float32), np.array([0.2, 0.1, 0.3], np.float32))
    x_bar, y_bar = vjp_fn(ct)
    np.testing.assert_allclose(x_bar, ct[0] * np.exp(X) * y + ct[1] * np.cos(X), rtol=1e-6)
    np.testing.assert_allclose(y_bar, ct[0] * np.exp(X), rtol=1e-6)


def test_argnums_tuple_and_negative():
    f = lambda a, b, c: total(lax.mul(lax.mul(a, b), c))
    a, b, c = (np.full(2, v, np.float32) for v in (2.0, 3.0, 5.0))
    ga, gc = fnad.grad(f, argnums=(0, -1))(a, b, c)
    np.testing.assert_allclose(ga, b * c)
    np.testing.assert_allclose(gc, a * b)


def test_pytree_inputs():
    params = {"w": np.array([1.0, 2.0], np.float32), "b": (np.float32(0.5), [X])}
    def loss(p):
        return lax.add(total(lax.mul(p["w"], p["w"])), lax.mul(p["b"][0], total(p["b"][1][0])))
    g = fnad.grad(loss)(params)
    assert fnad.tree_util.tree_structure(g) == fnad.tree_util.tree_structure(params)
    np.testing.assert_allclose(g["w"], 2 * params["w"])
    np.testing.assert_allclose(g["b"][0], X.sum(), rtol=1e-6)
    np.testing.assert_allclose(g["b"][1][0], np.full(3, 0.5))


def test_has_aux_everywhere():
    def f(x):
        return f_sin_x(x), {"sq": lax.mul(x, x)}
    g, aux = fnad.grad(f, has_aux=True)(X)
    np.testing.assert_allclose(aux["sq"], X * X)
    assert type(aux["sq"]) is fnad.Array                 # no tracer leaks out
    (v, aux2), g2 = fnad.value_and_grad(f, has_aux=True)(X)
    np.testing.assert_allclose(g, g2)
    _, _, aux3 = fnad.vjp(f, X, has_aux=True)
    _, _, aux4 = fnad.jvp(f, (X,), (X,), has_aux=True)
    _, _, aux5 = fnad.linearize(f, X, has_aux=True)
    for a in (aux2, aux3, aux4, aux5):
        np.testing.assert_allclose(a["sq"], X * X)


def test_symbolic_zeros_unused_input_costs_nothing():
    def f(x, unused):
        return total(lax.sin(x))
    big = np.ones((50, 50), np.float32)
    _, f_lin = fnad.linearize(f, X, big)
    used = {v for e in f_lin.jaxpr.eqns for v in e.invars}
    assert f_lin.jaxpr.invars[1] not in used            # no equation reads unused's tangent
    assert all(e.primitive.name not in ("broadcast_in_dim",) or e.params["shape"] != (50, 50)
               for e in f_lin.jaxpr.eqns)
    g = fnad.grad(f, argnums=1)(X, big)
    assert g.shape == (50, 50) and not np.any(np.asarray(g))
    jaxpr = fnad.make_jaxpr(fnad.grad(f, argnums=(0, 1)))(X, big)
    mentions = [e for e in jaxpr.eqns if jaxpr.jaxpr.invars[1] in e.invars]
    assert not mentions, "the unused input must not take part in the backward pass"


def test_integer_inputs_get_float0_tangents():
    def f(x, n):
        return lax.mul(x, lax.convert_element_type(n, np.float32))
    n = np.array([1, 2, 3], np.int32)
    y, y_dot = fnad.jvp(f, (X, n), (np.ones(3, np.float32), np.zeros(3, dtypes.float0)))
    np.testing.assert_allclose(y_dot, n)
    _, vjp_fn = fnad.vjp(f, X, n)
    x_bar, n_bar = vjp_fn(np.ones(3, np.float32))
    assert n_bar.dtype == dtypes.float0 and n_bar.shape == (3,)
    np.testing.assert_allclose(x_bar, n)
    g_int = fnad.grad(lambda x, n: total(f(x, n)), argnums=1, allow_int=True)(X, n)
    assert g_int.dtype == dtypes.float0


def test_jvp_rejects_wrong_tangent_dtype_and_shape():
    with pytest.raises(TypeError, match="float0"):
        fnad.jvp(lambda n: n, (np.array([1], np.int32),), (np.array([1.0], np.float32),))
    with pytest.raises(ValueError, match=r"primal shape \(3,\) but tangent shape \(2,\)"):
        fnad.jvp(lax.sin, (X,), (np.ones(2, np.float32),))


def test_stop_gradient():
    f = lambda x: total(lax.mul(x, lax.stop_gradient(x)))
    np.testing.assert_allclose(fnad.grad(f)(X), X)
    nested = {"a": X, "n": np.array(3, np.int32)}
    out = lax.stop_gradient(nested)
    np.testing.assert_allclose(out["a"], X)


def test_python_control_flow_on_concrete_values_under_grad():
    def f(x):
        if lax.gt(x, 0.0):                        # allowed: grad of eager code is concrete
            return lax.mul(x, x)
        return lax.neg(x)
    assert float(fnad.grad(f)(3.0)) == 6.0
    assert float(fnad.grad(f)(-3.0)) == -1.0


def test_hessian_vector_product_forward_over_reverse():
    g = fnad.grad(f_sin_x)
    v = np.array([1.0, 0.0, -1.0], np.float32)
    _, hv = fnad.jvp(g, (X,), (v,))
    h_diag = 2 * np.cos(X) - X * np.sin(X)        # f is separable: the Hessian is diagonal
    np.testing.assert_allclose(hv, h_diag * v, rtol=1e-5)


def test_reverse_over_reverse_in_float64():
    with config.override(jax_enable_x64=True):
        x = np.array([0.1, 0.7], np.float64)
        f = lambda x: total(lax.exp(lax.sin(x)))
        h = fnad.grad(lambda x: total(fnad.grad(f)(x)))(x)
        expect = np.exp(np.sin(x)) * (np.cos(x) ** 2 - np.sin(x))
        np.testing.assert_allclose(h, expect, rtol=1e-12)
        assert h.dtype == np.float64


def test_weak_type_of_python_scalar_gradient():
    g = fnad.grad(lambda x: lax.mul(x, x))(3.0)
    assert g.dtype == np.float32
    assert float(g) == 6.0


@needs_jax
def test_complex_gradient_convention_matches_jax():
    z = np.complex64(3 + 4j)
    f = lambda z: lax.real(lax.mul(z, lax.conj(z)))  # |z|²
    ours = fnad.grad(f)(z)
    theirs = jax.grad(lambda z: jnp.real(z * jnp.conj(z)))(z)
    np.testing.assert_allclose(ours, theirs)
    h = fnad.grad(lambda z: lax.real(lax.mul(z, z)), holomorphic=False)(z)
    np.testing.assert_allclose(h, jax.grad(lambda z: jnp.real(z * z))(z))
    hol = fnad.grad(lambda z: lax.mul(z, z), holomorphic=True)(z)
    np.testing.assert_allclose(hol, jax.grad(lambda z: z * z, holomorphic=True)(z))


def test_linearized_function_checks_tangent_structure():
    _, f_lin = fnad.linearize(f_sin_x, X)
    with pytest.raises(TypeError, match="structure"):
        f_lin(X, X)


def test_vjp_checks_cotangent_structure():
    _, vjp_fn = fnad.vjp(lambda x: (x, x), X)
    with pytest.raises(TypeError, match="structure"):
        vjp_fn(X)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "rem", "max", "min", "pow",
                                  "atan2"])
@pytest.mark.parametrize("scalar_first", [False, True])
def test_a_scalar_operand_of_an_array_op_has_a_tangent_of_the_output_shape(name,
                                                                           scalar_first):
    """lax.add(x, c) with only the scalar c varying: its tangent is broadcast to x's shape
    (add, sub and rem gave a rank-0 tangent, which the grad's sum then rejected)."""
    x, c = np.array([0.5, 1.5, 2.5], np.float32), np.float32(1.25)
    op = getattr(lax, name)
    f = (lambda c: op(c, x)) if scalar_first else (lambda c: op(x, c))
    _, t = fnad.jvp(f, (c,), (np.float32(1.0),))
    assert np.shape(t) == (3,)
    g = fnad.grad(lambda c: total(f(c)))(c)
    np.testing.assert_allclose(g, np.sum(t), rtol=1e-6)
    if jax is not None:
        jop = getattr(jax.lax, name)
        jf = (lambda c: jop(c, x)) if scalar_first else (lambda c: jop(x, c))
        np.testing.assert_allclose(t, jax.jvp(jf, (c,), (np.float32(1.0),))[1], rtol=1e-6)


def test_linear_transpose_is_the_adjoint():
    """<A x, c> = <x, Aᵀ c> for a linear map of a pytree, primals given as shapes only."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 4)).astype(np.float32)

    def f(x):
        return {"a": lax.dot(A, x["u"]) + 2.0 * x["v"], "b": total(x["u"][::-1] * 3.0)}
    shapes = {"u": fnad.ShapeDtypeStruct((4,), np.float32),
              "v": fnad.ShapeDtypeStruct((3,), np.float32)}
    x = {"u": rng.standard_normal(4).astype(np.float32),
         "v": rng.standard_normal(3).astype(np.float32)}
    c = {"a": rng.standard_normal(3).astype(np.float32), "b": np.float32(1.5)}
    (xt,) = fnad.linear_transpose(f, shapes)(c)
    fx = f(x)
    lhs = float(np.dot(fx["a"], c["a"]) + fx["b"] * c["b"])
    rhs = float(np.dot(x["u"], xt["u"]) + np.dot(x["v"], xt["v"]))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5)
    if jax is not None:
        (jt,) = jax.linear_transpose(
            lambda x: {"a": A @ x["u"] + 2.0 * x["v"], "b": (x["u"][::-1] * 3.0).sum()}, x)(c)
        for k in xt:
            np.testing.assert_allclose(xt[k], jt[k], rtol=1e-5, atol=1e-6)


def test_linear_transpose_rejects_a_nonlinear_function():
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="is not linear in its inputs.*'sin'"):
        fnad.linear_transpose(lax.sin, x)(x)
    with pytest.raises(TypeError, match="is not linear"):
        fnad.linear_transpose(lambda v: lax.mul(v, v), x)(x)
    with pytest.raises(TypeError, match="must be floating or complex"):
        fnad.linear_transpose(lambda v: v, np.ones(3, np.int32))


def test_jacobian_is_jacrev():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(fnad.jacobian(lambda v: lax.sin(v) * v)(x),
                               fnad.jacrev(lambda v: lax.sin(v) * v)(x))


def test_clamp_gives_zero_cotangent_where_clamped_even_if_downstream_is_infinite():
    """clamp's JVP selects the tangent (not a 0/1 mask times it), so reverse mode through
    sqrt(clamp(0, x, 1)) at x < 0 is 0, not 0·inf = NaN (as jax)."""
    from fnad import lax
    import fnad.numpy as jnp
    g = fnad.grad(lambda x: jnp.sum(jnp.sqrt(lax.clamp(0.0, x, 1.0))))(
        np.array([-1.0, 0.25, 3.0], np.float32))
    np.testing.assert_allclose(g, [0.0, 1.0, 0.0])

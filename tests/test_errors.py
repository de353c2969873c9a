"""The errors users meet: each test checks the type and the words a user needs."""
import re

import numpy as np
import pytest

import fnad
from fnad import core, lax
from fnad.core import Primitive, ShapedArray

X3 = np.ones(3, np.float32)
X4 = np.ones(4, np.float32)


def total(x):
    return lax.reduce_sum(x, axes=tuple(range(np.ndim(x))))


def test_shape_mismatch_names_both_shapes_and_user_line():
    with pytest.raises(fnad.ShapeError) as e:
        lax.add(X3, X4)                                           # the line to be named
    msg = str(e.value)
    assert "add" in msg and "(3,)" in msg and "(4,)" in msg
    assert re.search(r"test_errors\.py:\d+ \(test_shape_mismatch", msg), msg
    assert isinstance(e.value, TypeError)


def test_shape_mismatch_while_tracing_names_user_line():
    def f(x, y):
        return lax.mul(x, y)
    with pytest.raises(fnad.ShapeError, match=r"\(3,\).*\(4,\).*test_errors\.py:\d+ \(f\)"):
        fnad.make_jaxpr(f)(X3, X4)
    with pytest.raises(fnad.ShapeError, match=r"test_errors\.py:\d+ \(f\)"):
        fnad.grad(lambda x: total(f(x, X4)))(X3)


def test_numpy_level_shape_errors_name_the_user_line():
    """fnad.numpy's own checks (broadcasting, reshape, concatenate, shapes of new arrays),
    eager and under jit, name the line as the primitives' shape errors do."""
    import fnad.numpy as jnp

    def bad_add(a):
        return a + jnp.ones((3, 2))                               # the line to be named
    for f in (bad_add, fnad.jit(bad_add)):
        with pytest.raises(ValueError, match=r"incompatible shapes for broadcasting: "
                                             r"\(2, 3\), \(3, 2\) \(at .*test_errors\.py:"
                                             r"\d+ \(bad_add\)"):
            f(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"into shape \(4, 2\) \(at .*test_errors\.py"):
        fnad.jit(lambda a: a.reshape(4, 2))(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"along axis 0 \(at .*test_errors\.py"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones(3)])
    with pytest.raises(TypeError, match=r"A traced value cannot be a size: under jit, make it "
                                        r"a static argument.*\(at .*test_errors\.py"):
        fnad.jit(lambda a, n: jnp.zeros(n))(X3, 3)


def test_jit_argnums_and_argnames_must_be_ints_and_strs():
    for kw, words in [({"static_argnums": "a"}, "static_argnums must be an int"),
                      ({"static_argnums": True}, "static_argnums must be an int"),
                      ({"static_argnames": 1}, "static_argnames must be a str"),
                      ({"donate_argnums": [0, "x"]}, "donate_argnums must be an int"),
                      ({"donate_argnames": 3}, "donate_argnames must be a str")]:
        with pytest.raises(TypeError, match=words):
            fnad.jit(lambda a: a, **kw)


def test_dtype_mismatch():
    with pytest.raises(fnad.ShapeError, match="same dtypes, got float32, int32"):
        lax.add(X3, np.ones(3, np.int32))


def test_grad_of_non_scalar_output():
    with pytest.raises(TypeError, match=r"scalar-output functions.*shape \(3,\)"):
        fnad.grad(lax.sin)(X3)


def test_grad_of_integer_output():
    f = lambda x: total(lax.convert_element_type(x, np.int32))
    with pytest.raises(TypeError, match="real-valued outputs.*int32"):
        fnad.grad(f)(X3)


def test_grad_with_respect_to_integer_input():
    with pytest.raises(TypeError, match=r"real- or complex-valued inputs.*int32.*allow_int"):
        fnad.grad(lambda n: total(lax.convert_element_type(n, np.float32)))(
            np.arange(3, dtype=np.int32))


def test_python_if_on_traced_value():
    def f(x):
        if lax.gt(total(x), 0.0):
            return x
        return lax.neg(x)
    with pytest.raises(fnad.ConcretizationTypeError) as e:
        fnad.make_jaxpr(f)(X3)
    assert isinstance(e.value, fnad.TracerBoolConversionError)
    msg = str(e.value)
    assert "where" in msg and "cond" in msg and "static_argnums" in msg
    assert "bool[]" in msg and re.search(r"test_errors\.py:\d+ \(f\)", msg)


def test_int_of_traced_value():
    with pytest.raises(fnad.ConcretizationTypeError, match=r"int\(\).*astype.*static_argnums"):
        fnad.make_jaxpr(lambda x: int(total(x)))(X3)
    with pytest.raises(fnad.TracerIntegerConversionError, match="dynamic_slice"):
        fnad.make_jaxpr(lambda x: [1, 2, 3][lax.convert_element_type(total(x), np.int32)])(X3)


def test_numpy_on_traced_value():
    with pytest.raises(fnad.TracerArrayConversionError, match="use fnad.numpy"):
        fnad.make_jaxpr(lambda x: np.sin(x))(X3)


def test_escaped_tracer_from_grad():
    leaked = []

    def f(x):
        leaked.append(x)
        return total(x)
    fnad.grad(f)(X3)
    with pytest.raises(fnad.UnexpectedTracerError) as e:
        lax.sin(leaked[0])
    msg = str(e.value)
    assert "vjp of f" in msg and "has already finished" in msg
    assert re.search(r"created at .*test_errors\.py:\d+", msg), msg


def test_escaped_tracer_from_make_jaxpr_used_in_another_transformation():
    leaked = []

    def f(x):
        y = lax.sin(x)                                            # where the tracer is made
        leaked.append(y)
        return y
    fnad.make_jaxpr(f)(X3)
    with pytest.raises(fnad.UnexpectedTracerError, match=r"make_jaxpr of f.*test_errors\.py"):
        fnad.grad(lambda x: total(lax.mul(x, leaked[0])))(X3)


def test_wrong_argnums():
    f = lambda x, y: total(lax.mul(x, y))
    with pytest.raises(ValueError, match=r"argnums=2.*2 positional arguments.*range\(-2, 2\)"):
        fnad.grad(f, argnums=2)(X3, X3)
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        fnad.grad(f, argnums=(0, "1"))(X3, X3)
    with pytest.raises(TypeError, match="argnums"):
        fnad.grad(f, argnums=())


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match=r"has_aux=True requires .* pair"):
        fnad.grad(lambda x: total(x), has_aux=True)(X3)


def test_primitive_without_impl_on_backend(scratch_primitives):
    lonely_p = Primitive("lonely")
    core.abstract_eval_rules[lonely_p] = lambda x: x
    with pytest.raises(fnad.NoImplementationError) as e:
        lonely_p.bind(X3)
    msg = str(e.value)
    assert "'lonely'" in msg and "'numpy' backend" in msg
    assert "backends with one: none" in msg


def test_missing_impl_lists_the_backends_that_have_one(scratch_primitives):
    import sys
    import types

    from fnad.backends import register_backend
    mod = types.ModuleType("fake_backend_for_test")
    mod.name, mod.impl_rules = "fake", {}
    solo_p = Primitive("solo")
    core.abstract_eval_rules[solo_p] = lambda x: x
    mod.impl_rules[solo_p] = lambda x: x
    sys.modules["fake_backend_for_test"] = mod
    register_backend("fake", "fake_backend_for_test")
    try:
        with pytest.raises(fnad.NoImplementationError, match=r"backends with one: fake"):
            solo_p.bind(X3)
    finally:
        import fnad.backends as b
        b._modules.pop("fake")
        b._loaded.pop("fake", None)
        del sys.modules["fake_backend_for_test"]


def test_missing_jvp_rule_names_the_primitive(scratch_primitives):
    p = Primitive("no_jvp")
    core.abstract_eval_rules[p] = lambda x: x
    with pytest.raises(NotImplementedError, match="differentiation rule for 'no_jvp'"):
        fnad.jvp(lambda x: p.bind(x), (X3,), (X3,))


def test_not_an_array():
    with pytest.raises(TypeError, match="not a valid fnad array"):
        lax.sin("hello")


def test_python_int_overflow():
    with pytest.raises(OverflowError, match="too large to convert to int32"):
        core.get_aval(2 ** 40)


def test_shaped_array_repr():
    assert repr(ShapedArray((2, 3), np.float32, True)) == "ShapedArray(f32[2,3], weak_type=True)"


def test_error_classes_relate_as_jaxs():
    """Every class of jax.errors is in fnad.errors, with jax's base classes (fnad's
    TracerIntegerConversionError is also a ConcretizationTypeError), and fnad raises them
    where jax does."""
    jax_errors = pytest.importorskip("jax.errors", reason="jax.errors is the oracle")
    from fnad import errors
    names = [n for n in dir(jax_errors) if not n.startswith("_")]
    assert names and all(hasattr(errors, n) for n in names), names
    for a in names:
        for b in names:
            want = issubclass(getattr(jax_errors, a), getattr(jax_errors, b))
            got = issubclass(getattr(errors, a), getattr(errors, b))
            if (a, b) != ("TracerIntegerConversionError", "ConcretizationTypeError"):
                assert got == want, (a, b)
        for base in (TypeError, IndexError, RuntimeError, Exception):
            assert issubclass(getattr(errors, a), base) == issubclass(getattr(jax_errors, a),
                                                                       base), (a, base)
    with pytest.raises(errors.NonConcreteBooleanIndexError):
        fnad.jit(lambda x: x[x > 0])(X3)
    with pytest.raises(errors.JAXIndexError):
        fnad.jit(lambda x: x[x > 0])(X3)
    with pytest.raises(errors.JAXTypeError):
        fnad.jit(lambda x: np.asarray(x))(X3)

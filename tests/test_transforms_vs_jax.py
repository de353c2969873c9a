"""Transformations and pytree plumbing against jax: the behaviours a differential hunt found
different, each compared with jax at test time (values, tree structure, dtypes, weak types,
and whether an error is raised).

Each case is written once against a namespace `lib` (fnad or jax: `lib.api`, `lib.np`,
`lib.lax`, `lib.fu` for flatten_util), so the same source runs in both libraries; a case
runs eagerly and, where it makes sense, under `lib.api.jit` (numba backend for fnad).
"""
from __future__ import annotations

import collections
import functools
import pickle
import types

import numpy as np
import pytest

import fnad
import fnad.flatten_util
import fnad.numpy as fnp

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.flatten_util  # noqa: E402, F811
import jax.numpy as jnp  # noqa: E402

X3 = np.array([1., 2., 3.], np.float32)
A23 = np.arange(6, dtype=np.float32).reshape(2, 3)


def _lib(name: str) -> types.SimpleNamespace:
    api, np_ = (fnad, fnp) if name == "fnad" else (jax, jnp)
    return types.SimpleNamespace(api=api, np=np_, lax=api.lax, fu=api.flatten_util,
                                 tu=api.tree_util, name=name)


FNAD, JAX = _lib("fnad"), _lib("jax")


def _leaf(x):
    """(kind, dtype, shape, weak_type, value) of an output leaf."""
    if isinstance(x, (bool, int, float, complex)) and not hasattr(x, "shape"):
        return ("py", type(x).__name__, (), None, np.asarray(x))
    weak = getattr(x, "weak_type", None)
    if weak is None:
        weak = fnad.core.get_aval(x).weak_type
    return ("array", str(x.dtype), tuple(x.shape), bool(weak), np.asarray(x))


def _same_as_jax(got, want, rtol=2e-5, atol=1e-6):
    """`got` (fnad) has jax's result `want`'s tree structure, dtypes, weak types and values."""
    assert str(fnad.tree_util.tree_structure(got)) == str(jax.tree_util.tree_structure(want))
    for i, (g, w) in enumerate(zip(fnad.tree_util.tree_leaves(got),
                                   jax.tree_util.tree_leaves(want))):
        g, w = _leaf(g), _leaf(w)
        assert g[:4] == w[:4], f"leaf {i}: fnad {g[:4]}, jax {w[:4]}"
        if "V" not in g[1] and "float0" not in g[1]:
            np.testing.assert_allclose(g[4], w[4], rtol=rtol, atol=atol, err_msg=f"leaf {i}")


def _outcome(case, lib, jit: bool):
    """case(lib, wrap)'s result, or the type of the exception it raised."""
    wrap = lib.api.jit if jit else (lambda f: f)
    try:
        return case(lib, wrap)
    except Exception as e:        # noqa: BLE001 (the oracle decides whether it should raise)
        return type(e)


def _check(case, jit: bool):
    want, got = _outcome(case, JAX, jit), _outcome(case, FNAD, jit)
    if isinstance(want, type):
        assert isinstance(got, type), f"jax raised {want.__name__}, fnad returned {got!r}"
    else:
        assert not isinstance(got, type), f"fnad raised {got.__name__}, jax returned {want!r}"
        _same_as_jax(got, want)


# ---- jvp: output tangents are weak-typed as the primals are --------------------------------
JVP_WEAK = {
    "weak_primal_strong_tangent": lambda lib, w: w(
        lambda t: lib.api.jvp(lambda a: a * 2, (1.,), (t,)))(np.float32(1.)),
    "strong_primal_weak_tangent": lambda lib, w: w(
        lambda p: lib.api.jvp(lambda a: a * 2, (p,), (1.,)))(np.float32(1.)),
    "zero_tangent_of_a_weak_output": lambda lib, w: w(
        lambda p: lib.api.jvp(lambda a: a * 0 + 1., (p,), (p,)))(1.),
    "no_inputs": lambda lib, w: lib.api.jvp(lambda: 1., (), ()),
    "sin_weak": lambda lib, w: w(
        lambda p: lib.api.jvp(lib.np.sin, (1.,), (p,)))(np.float32(1.)),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(JVP_WEAK))
def test_jvp_tangent_weak_types_follow_the_primals(name, jit):
    _check(JVP_WEAK[name], jit)


# ---- vjp: the cotangent of an integer or boolean output may have any dtype ----------------
@pytest.mark.parametrize("ct", [np.zeros(3, bool), np.zeros(3, np.int8),
                                np.zeros(3, np.float32), np.zeros(3, jax.dtypes.float0),
                                np.zeros(2, np.int32)], ids=lambda a: f"{a.dtype}{a.shape}")
@pytest.mark.parametrize("out", ["int", "bool"])
def test_cotangent_of_an_integer_output(out, ct):
    def case(lib, w):
        def f(x):
            return x * 2, (x.astype(int) if out == "int" else x > 1)
        _, f_vjp = lib.api.vjp(f, X3)
        return f_vjp((X3, ct))
    _check(case, jit=False)


def test_tangent_dtype_errors_name_float0():
    with pytest.raises(TypeError, match="must have dtype float0 .*but got int32"):
        fnad.jvp(lambda x, n: x * n, (X3, np.arange(3, dtype=np.int32)),
                 (X3, np.zeros(3, np.int32)))


# ---- grad's options --------------------------------------------------------------------------
GRAD_OPTIONS = {
    "reduce_axes_empty": lambda lib, w: w(lib.api.grad(lambda x: (x * x).sum(),
                                                       reduce_axes=()))(X3),
    "reduce_axes_given": lambda lib, w: lib.api.grad(lambda x: x.sum(), reduce_axes=("i",))(X3),
    "vjp_reduce_axes_empty": lambda lib, w: lib.api.vjp(lambda x: x * 2, X3,
                                                        reduce_axes=())[1](X3),
    "numpy_integer_argnums": lambda lib, w: w(lib.api.grad(
        lambda x, y: (x * y).sum(), argnums=np.int64(1)))(X3, X3),
    "holomorphic_real_input": lambda lib, w: w(lib.api.grad(
        lambda z: z * (1 + 1j), holomorphic=True))(1.),
    "holomorphic": lambda lib, w: w(lib.api.grad(
        lambda z: (z * z).sum(), holomorphic=True))(np.complex64([1 + 2j, 3j])),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(GRAD_OPTIONS))
def test_grad_options(name, jit):
    _check(GRAD_OPTIONS[name], jit)


def test_grad_errors_name_the_function():
    def loss(x):
        return x.sum()
    with pytest.raises(TypeError, match="requires loss to return a pair"):
        fnad.grad(loss, has_aux=True)(X3)
    with pytest.raises(NotImplementedError, match="reduce_axes"):
        fnad.value_and_grad(loss, reduce_axes=("i",))
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        fnad.grad(lambda z: z * 1j, holomorphic=True)(1.)


MISUSE = {        # name: (call with lib, words fnad's TypeError must have)
    "grad_of_a_non_callable": (lambda lib: lib.api.grad(3),
                               "grad: expected a callable value, got 3"),
    "vmap_of_a_non_callable": (lambda lib: lib.api.vmap(3), "vmap: expected a callable value"),
    "jacrev_of_a_non_callable": (lambda lib: lib.api.jacrev(3),
                                 "jacrev: expected a callable value"),
    "checkpoint_of_a_non_callable": (lambda lib: lib.api.checkpoint(3)(X3),
                                     "checkpoint: expected a callable value"),
    "grad_of_a_function_returning_None": (lambda lib: lib.api.grad(lambda x: None)(X3),
                                          "scalar-output functions. Output of <lambda> was None"),
    "vmap_of_a_function_returning_a_string": (lambda lib: lib.api.vmap(lambda x: "a")(X3),
                                              "vmap of <lambda> returned 'a' of type str"),
}


@pytest.mark.parametrize("name", sorted(MISUSE))
def test_misuse_is_a_clear_type_error(name):
    run, words = MISUSE[name]
    with pytest.raises(TypeError):                          # jax refuses it too
        run(JAX)
    with pytest.raises(TypeError, match=words):
        run(FNAD)


# ---- vmap's in_axes and out_axes -------------------------------------------------------------
VMAP_AXES = {
    **{f"unmapped_output_out_axes_{ax}": (lambda lib, w, ax=ax: w(lib.api.vmap(
        lambda x: lib.np.ones(3, np.float32) * 2, out_axes=ax))(A23))
       for ax in (-3, -2, -1, 1, 2, 5)},
    **{f"mapped_output_out_axes_{ax}": (lambda lib, w, ax=ax: w(lib.api.vmap(
        lambda x: x * 2, out_axes=ax))(A23)) for ax in (-3, -1, 1, 2)},
    "top_level_dict_in_axes": lambda lib, w: w(lib.api.vmap(
        lambda d: d["a"].sum(), in_axes={"a": 0}))({"a": A23}),
    "nested_dict_in_axes": lambda lib, w: w(lib.api.vmap(
        lambda d: d["a"] * d["b"], in_axes=({"a": 0, "b": None},)))({"a": A23, "b": X3}),
    "kwargs_mapped_with_in_axes_none": lambda lib, w: w(lib.api.vmap(
        lambda x, y=1.: x * y, in_axes=None, axis_size=2))(X3, y=np.ones(2, np.float32)),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(VMAP_AXES))
def test_vmap_axes(name, jit):
    _check(VMAP_AXES[name], jit)


def test_vmap_in_axes_mismatch_names_the_argument_path():
    with pytest.raises(ValueError, match=r"key path \[0\].*expected a tuple") as e:
        fnad.vmap(lambda t: t[0] * t[1], in_axes=((0, None),))([A23, 2.])
    assert "PyTreeDef(((*, *),))" in str(e.value)         # the spec as given, nothing added


# ---- custom_jvp / custom_vjp: defaults and nondiff_argnames ----------------------------------
def _custom_jvp(lib, named: bool):
    @functools.partial(lib.api.custom_jvp, nondiff_argnames=("y",) if named else ())
    def f(x, y=2.0):
        return x * y

    @f.defjvp
    def f_jvp(*args):                     # (y, primals, tangents) when y is nondiff
        if named:
            y, (x,), (tx,) = args
            return x * y, tx * y * 10
        (x, y), (tx, ty) = args
        return x * y, tx * y * 10 + ty * x
    return f


def _custom_vjp(lib, named: bool):
    @functools.partial(lib.api.custom_vjp, nondiff_argnames=("y",) if named else ())
    def f(x, y=2.0):
        return x * y

    def bwd(*args):                       # (y, res, g) when y is nondiff
        (x, y), g = args[-2:]
        return (g * y * 10,) if named else (g * y * 10, g * x)
    f.defvjp(lambda x, y: (x * y, (x, y)), bwd)
    return f


def _custom_case(make, named: bool):
    def case(lib, w):
        def run(x):
            f = make(lib, named)
            return f(x), lib.api.grad(f)(x), lib.api.grad(lambda a: f(a, y=4.))(x)
        return w(run)(3.)
    return case


CUSTOM = {f"{kind}_{'named' if named else 'default'}": _custom_case(make, named)
          for kind, make in (("custom_jvp", _custom_jvp), ("custom_vjp", _custom_vjp))
          for named in (False, True)}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_custom_rules_see_defaults_and_nondiff_argnames(name, jit):
    _check(CUSTOM[name], jit)


def test_nondiff_argnames_must_name_a_positional_parameter():
    with pytest.raises(ValueError, match="nondiff_argnames names 'z'"):
        fnad.custom_jvp(lambda x, y: x * y, nondiff_argnames=("z",))


# ---- checkpoint: static_argnames, the offloading policies, fnad.ad_checkpoint ------------------
def _remat_case(policy_name):
    def case(lib, w):
        adc = __import__(f"{lib.name}.ad_checkpoint", fromlist=["checkpoint_name"])
        cp = adc.checkpoint_policies
        policy = {
            "static_argnames": None,
            "offload_names": cp.save_and_offload_only_these_names(
                names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
                offload_src="device", offload_dst="pinned_host"),
            "offload_dots": cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
        }[policy_name]

        def f(x, w_, *, n):
            h = adc.checkpoint_name(lib.np.sin(x @ w_), "h")
            return (lib.np.tanh(h * n) ** 2).sum()
        g = lib.api.checkpoint(f, policy=policy, static_argnames=("n",))
        return w(lib.api.value_and_grad(lambda x, w_: g(x, w_, n=3.), argnums=(0, 1)))(
            A23 / 7, A23.T / 5)
    return case


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("policy", ["static_argnames", "offload_names", "offload_dots"])
def test_checkpoint_options(policy, jit):
    _check(_remat_case(policy), jit)


def test_checkpoint_static_argnames_are_python_values():
    seen = []

    def f(x, *, n):
        seen.append(type(n))
        return x * n
    fnad.grad(lambda x: fnad.checkpoint(f, static_argnames="n")(x, n=3).sum())(X3)
    assert seen == [int]


# ---- outputs typed as jax types them ---------------------------------------------------------
OUTPUT_TYPES = {
    "linear_transpose_strong_primal_weak_cotangent": lambda lib, w: w(
        lib.api.linear_transpose(lambda x: x * 2., np.float32(1.)))(1.),
    "linear_transpose_weak_primal": lambda lib, w: w(
        lib.api.linear_transpose(lambda x: x * 2., 1.))(np.float32(1.)),
    "checkpoint_python_outputs": lambda lib, w: w(lib.api.checkpoint(
        lambda x, n: (lib.np.sin(x) * n, n * 2, x > 1)))(X3, 3),
    "linear_transpose_weak_primal_and_cotangent": lambda lib, w: w(
        lib.api.linear_transpose(lambda x: x * 2., 1.))(1.),
    # jacrev(allow_int=True)'s zero block of an integer input is weak where the input is
    "jacrev_weak_int_input": lambda lib, w: w(lib.api.jacrev(
        lambda x, n: x * n, argnums=(0, 1), allow_int=True))(X3, 3),
    "jacrev_strong_int_input": lambda lib, w: w(lib.api.jacrev(
        lambda x, n: x * n, argnums=(0, 1), allow_int=True))(X3, np.int32(3)),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(OUTPUT_TYPES))
def test_outputs_are_typed_as_jax(name, jit):
    _check(OUTPUT_TYPES[name], jit)


# ---- ravel_pytree's dtypes ---------------------------------------------------------------------
RAVEL = {
    "weak_scalars": lambda lib, w: (lambda fu: (fu[0], fu[1](fu[0])))(
        lib.fu.ravel_pytree([1., 2.])),
    "weak_and_strong": lambda lib, w: (lambda fu: (fu[0], fu[1](fu[0])))(
        lib.fu.ravel_pytree([1., np.float32(2.)])),
    "one_dtype_other_vector_dtype": lambda lib, w: lib.fu.ravel_pytree(
        {"a": X3, "b": np.float32(1)})[1](np.ones(4, np.float16)),
    "mixed_dtypes_wrong_vector_dtype": lambda lib, w: lib.fu.ravel_pytree(
        [X3, np.float16(1)])[1](np.ones(4, np.float16)),
    "mixed_dtypes": lambda lib, w: (lambda fu: (fu[0], fu[1](fu[0] * 2)))(
        lib.fu.ravel_pytree({"a": X3, "b": (np.float16(2), np.int32(3)), "c": None})),
}


@pytest.mark.parametrize("name", sorted(RAVEL))
def test_ravel_pytree_dtypes(name):
    _check(RAVEL[name], jit=False)


# ---- treedefs pickle, as jax's ------------------------------------------------------------------
Pair = collections.namedtuple("Pair", ["a", "b"])


@pytest.mark.parametrize("tree", [
    {"a": (1, Pair(2, None))}, [None, (), {}], 5,
    collections.OrderedDict(b=1, a=2), collections.defaultdict(list, {"a": 1}),
], ids=["dict_namedtuple", "empty_nodes", "leaf", "OrderedDict", "defaultdict"])
def test_treedef_pickles(tree):
    want = jax.tree_util.tree_structure(tree)
    assert str(pickle.loads(pickle.dumps(want))) == str(want)      # jax's pickles
    td = fnad.tree_util.tree_structure(tree)
    back = pickle.loads(pickle.dumps(td))
    assert back == td and hash(back) == hash(td) and str(back) == str(want)
    assert back.unflatten(range(td.num_leaves)) == td.unflatten(range(td.num_leaves))


# ---- control flow: carry types, fori_loop's index, while_loop under linearize ---------------
def _raises_as_jax(case, jit: bool = False):
    """case(lib, wrap) raises in both libraries, with the same builtin exception type."""
    kinds = []
    for lib in (JAX, FNAD):
        got = _outcome(case, lib, jit)
        assert isinstance(got, type), f"{lib.name} returned {got!r}"
        kinds.append(next(c for c in got.__mro__ if c.__module__ == "builtins"))
    assert kinds[0] is kinds[1], f"jax raised {kinds[0].__name__}, fnad {kinds[1].__name__}"


H3 = np.ones(3, np.float16)


def _while_pow(lib):
    return lambda x: lib.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * x, c[1] + 1),
                                        (x, 0))[0]


def _linearized(f, x, t):
    y, f_lin = f[0].api.linearize(f[1], x)
    return y, f_lin(t)


CONTROL_FLOW = {
    # a weak initial carry the body makes strong stays weak where the body reads it (JAX
    # types the carry by typematch, which ignores weak types), so ys computed from it are
    "scan_weak_carry_in_ys": lambda lib, w: w(lambda x: lib.lax.scan(
        lambda c, xi: (c + xi, c), 0., x))(X3),
    "scan_weak_carry_promotes_with_float16": lambda lib, w: w(lambda x: lib.lax.scan(
        lambda c, xi: (c + xi, c * H3), 0., x))(X3),
    "scan_strong_init_weak_body_output": lambda lib, w: w(lambda x: lib.lax.scan(
        lambda c, xi: (2., c * xi), np.float32(0), x))(X3),
    "scan_weak_carry_vmapped": lambda lib, w: w(lib.api.vmap(lambda w_, x: lib.lax.scan(
        lambda c, xi: ((c[0] + 1, c[1] * w_ + xi), c[1]), (0, 0.), x), (0, None)))(X3, X3),
    "scan_weak_carry_grad": lambda lib, w: w(lib.api.grad(lambda x: lib.lax.scan(
        lambda c, xi: (lib.np.sin(c) * xi + 1., c * 2.), 0., x)[1].sum()))(X3),
    "while_weak_carry_strong_body": lambda lib, w: w(lambda x: lib.lax.while_loop(
        lambda c: c < 3., lambda c: c + x, 0.))(np.float32(1)),
    "while_strong_carry_weak_body": lambda lib, w: w(lambda x: lib.lax.while_loop(
        lambda c: c < 3., lambda c: 5., x))(np.float32(1)),
    "scan_unroll_zero": lambda lib, w: w(lambda x: lib.lax.scan(
        lambda c, xi: (c * xi, c), 1., x, unroll=0))(X3),
    # fori_loop's index is a weak int for a Python int lower bound (scan path eagerly, the
    # while path under jit, where the bound is traced)
    "fori_index_is_weak": lambda lib, w: w(lambda n: lib.lax.fori_loop(
        0, n, lambda i, c: (c[0] + i, c[1] + i), (0, np.int8(0))))(3),
    "fori_index_weak_with_narrow_bound": lambda lib, w: w(lambda x: lib.lax.fori_loop(
        np.int16(1), 4, lambda i, c: c + i * x, 0.))(np.float32(2)),
    "fori_bounds_of_two_dtypes": lambda lib, w: w(lambda n: lib.lax.fori_loop(
        np.int16(0), n, lambda i, c: c + 1., 0.))(np.int32(3)),
    "fori_unsigned_and_python_bound": lambda lib, w: w(lambda n: lib.lax.fori_loop(
        np.uint8(0), n, lambda i, c: c + 1., 0.))(3),
    # linearize through while_loop works (forward mode), as in JAX
    "linearize_while": lambda lib, w: _linearized((lib, _while_pow(lib)), 1.5, 1.),
    "linearize_jit_while": lambda lib, w: _linearized((lib, lib.api.jit(_while_pow(lib))),
                                                      1.5, 1.),
    "linearize_while_in_scan": lambda lib, w: _linearized(
        (lib, lambda x: lib.lax.scan(lambda c, xi: (_while_pow(lib)(c * xi), c), x, X3)[1]),
        1.01, 1.),
    "vjp_while_forward_half": lambda lib, w: lib.api.vjp(_while_pow(lib), 1.5)[0],
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_control_flow_against_jax(name, jit):
    _check(CONTROL_FLOW[name], jit)


ERROR_KINDS = {
    "grad_of_while": lambda lib, w: w(lib.api.grad(_while_pow(lib)))(1.5),
    "vjp_fn_of_while": lambda lib, w: lib.api.vjp(_while_pow(lib), 1.5)[1](1.),
    "fori_bounds_of_two_dtypes": CONTROL_FLOW["fori_bounds_of_two_dtypes"],
    "fori_unroll_with_traced_bounds": lambda lib, w: lib.api.jit(lambda n: lib.lax.fori_loop(
        0, n, lambda i, c: c + 1., 0., unroll=2))(3),
    "vjp_fn_cotangent_dtype": lambda lib, w: lib.api.vjp(lambda x: x * 2, X3)[1](H3),
    "linearized_tangent_dtype": lambda lib, w: lib.api.linearize(lambda x: x * 2, X3)[1](H3),
    "jvp_python_float_tangent_of_float16": lambda lib, w: lib.api.jvp(
        lambda x: x * 2, (np.float16(1),), (1.,)),
    "jvp_python_int_tangent": lambda lib, w: lib.api.jvp(lambda x: x * 2, (np.float32(1),),
                                                         (1,)),
    "jvp_python_complex_tangent_of_float": lambda lib, w: lib.api.jvp(
        lambda x: x * 2, (np.float32(1),), (1j,)),
}


@pytest.mark.parametrize("name", sorted(ERROR_KINDS))
def test_errors_of_the_kind_jax_raises(name):
    _raises_as_jax(ERROR_KINDS[name])


def test_reverse_mode_through_while_names_the_line():
    with pytest.raises(ValueError, match=r"does not work for lax.while_loop.*"
                                         r"test_transforms_vs_jax.py:\d+"):
        fnad.grad(_while_pow(FNAD))(1.5)

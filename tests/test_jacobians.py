"""jacfwd, jacrev and hessian against jax, against Python loops of jvp/vjp, and their errors.

Each function in CASES is written once against a namespace (`fnad.numpy`/`fnad.nn` or
`jax.numpy`/`jax.nn`), so the same source runs in both libraries. For every case, each of
jacfwd, jacrev and hessian must agree with jax's in tree structure, shapes, dtypes, weak
types and values; jacfwd must agree with jacrev. float32 for all, float64 (x64 on in both
libraries) for the cases marked x64. Shape letters: N, M vector sizes, B batch, K classes.
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np
import pytest

import fnad
import fnad.nn as fnn
import fnad.numpy as fnp
from fnad import tree_util

jax = pytest.importorskip("jax", reason="jax not installed: it is the oracle for these tests")
import jax.numpy as jnp  # noqa: E402

TRANSFORMS = ("jacfwd", "jacrev", "hessian")


# ---- the cases ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable                 # fn(np_, nn_, *args)
    make: Callable               # make(rng, dtype) -> tuple of NumPy args (pytrees allowed)
    argnums: int | tuple = 0
    has_aux: bool = False
    x64: bool = False


CASES: dict[str, Case] = {}


def case(make, argnums=0, has_aux=False, x64=False):
    def register(fn):
        CASES[fn.__name__] = Case(fn.__name__, fn, make, argnums, has_aux, x64)
        return fn
    return register


def normal(rng, dt, *shape):
    return np.asarray(rng.standard_normal(shape), dt)


def uniform(rng, dt, lo, hi, *shape):
    return np.asarray(rng.uniform(lo, hi, shape), dt)


@case(lambda r, dt: (normal(r, dt, 5),), x64=True)
def vector_elementwise(np_, nn_, x):                     # [N] -> [N]: a diagonal Jacobian
    return np_.sin(x) * np_.exp(-0.5 * x)


@case(lambda r, dt: (np.asarray(0.7, dt),), x64=True)
def scalar_to_vector(np_, nn_, t):                       # [] -> [3]: a curve
    return np_.stack([np_.cos(t), np_.sin(t), t * t])


@case(lambda r, dt: (normal(r, dt, 4),))
def vector_to_scalar(np_, nn_, x):                       # [N] -> []: the Jacobian is ∇f
    return np_.sum(np_.tanh(x) ** 2) + np_.prod(np_.cos(x))


@case(lambda r, dt: (normal(r, dt, 3, 4), normal(r, dt, 4)), x64=True)
def matrix_input(np_, nn_, w, v):                        # [M, N] -> [M]
    return np_.tanh(w @ v)


@case(lambda r, dt: (normal(r, dt, 3, 3),))
def matrix_to_matrix(np_, nn_, x):                       # [N, N] -> [N, N]
    return x @ x.T + 2.0 * np_.sin(x)


@case(lambda r, dt: ({"w1": normal(r, dt, 3, 4), "b1": normal(r, dt, 4),
                      "w2": normal(r, dt, 4, 2), "b2": normal(r, dt, 2)},
                     normal(r, dt, 2, 3)), x64=True)
def mlp_dict_params(np_, nn_, p, x):                     # {params} -> [B, K]
    h = np_.tanh(x @ p["w1"] + p["b1"])                  # [B, 4]
    return h @ p["w2"] + p["b2"]                         # [B, 2]


@case(lambda r, dt: ((normal(r, dt, 3), normal(r, dt, 2, 3)),))
def tuple_input(np_, nn_, ab):                           # (a, B) -> [2]
    a, b = ab
    return np_.sum(b * a, axis=1) + np_.sum(a ** 3)


@case(lambda r, dt: ([[normal(r, dt, 2), normal(r, dt)], normal(r, dt, 2, 2)],))
def nested_list_input(np_, nn_, lst):                    # [[a, s], M] -> {"u": [2], "v": []}
    (a, s), m = lst
    return {"u": m @ a * s, "v": np_.sum(np_.exp(m)) * s ** 2}


@case(lambda r, dt: (normal(r, dt, 3),), x64=True)
def pytree_output(np_, nn_, x):                          # [N] -> {"sq", "pair": ([], [2])}
    return {"sq": x ** 2, "pair": (np_.sum(np_.sin(x)), x[:2] * x[1:])}


@case(lambda r, dt: ({"w": normal(r, dt, 2, 3), "s": normal(r, dt)}, normal(r, dt, 3),
                     normal(r, dt, 2)), argnums=(0, 2))
def multiple_argnums(np_, nn_, p, c, z):                 # d/d(p, z) of [2]
    return np_.tanh(p["w"] @ c) * p["s"] + z ** 2 * np_.sum(c)


@case(lambda r, dt: (normal(r, dt, 2), normal(r, dt, 3)), argnums=(0, 1), x64=True)
def two_vectors_outer(np_, nn_, u, v):                   # ([M], [N]) -> [M, N]
    return np_.outer(np_.sin(u), v) + np_.outer(u, v ** 2)


@case(lambda r, dt: (normal(r, dt, 4),), has_aux=True)
def with_aux(np_, nn_, x):                               # [N] -> ([N], aux)
    y = np_.sin(x) * x
    return y, {"norm": np_.sum(y ** 2), "first": x[0]}


@case(lambda r, dt: (normal(r, dt, 2), normal(r, dt, 2)), argnums=(0, 1), has_aux=True)
def aux_and_argnums(np_, nn_, a, b):
    return {"p": a * b, "q": np_.exp(a - b)}, np_.max(a)


@case(lambda r, dt: (normal(r, dt, 5),), x64=True)
def softmax(np_, nn_, x):                                # [K] -> [K]
    return nn_.softmax(x)


@case(lambda r, dt: (normal(r, dt, 2, 4),))
def log_softmax_rows(np_, nn_, x):                       # [B, K] -> [B, K]
    return nn_.log_softmax(x, axis=-1)


@case(lambda r, dt: (uniform(r, dt, 0.5, 2.0, 4),))
def normalize(np_, nn_, x):                              # x / |x|
    return x / np_.sqrt(np_.sum(x * x))


@case(lambda r, dt: (normal(r, dt, 3), normal(r, dt, 3, 3)), x64=True)
def quadratic_form(np_, nn_, x, a):                      # xᵀAx + Σ x⁴ (Hessian A + Aᵀ + 12x²)
    return x @ a @ x + np_.sum(x ** 4)


@case(lambda r, dt: (normal(r, dt, 2, 4), uniform(r, dt, 0.5, 1.5, 4), normal(r, dt, 4)),
      argnums=(0, 1, 2))
def layer_norm(np_, nn_, x, gamma, beta):                # [B, C] -> [B, C]
    mu = np_.mean(x, axis=-1, keepdims=True)
    var = np_.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / np_.sqrt(var + 1e-5) * gamma + beta


@case(lambda r, dt: (normal(r, dt, 2), normal(r, dt, 2, 3), normal(r, dt, 3)),
      argnums=(0, 1, 2))
def bilinear_einsum(np_, nn_, u, m, v):                  # uᵀMv, and its diagonal terms
    return np_.stack([np_.einsum("i,ij,j->", u, m, v), np_.sum(m * m)])


@case(lambda r, dt: (np.asarray(r.choice([-1.0, 1.0], 4) * r.uniform(0.3, 1.5, 4), dt),))
def relu_and_where(np_, nn_, x):                         # kinks kept away from the inputs
    return np_.where(x > 0, x ** 2, 0.5 * x) + nn_.relu(x) * x


# ---- running a case in one library ------------------------------------------------------------
def _rng(*names) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(names).encode()))


def run(ad, np_, nn_, c: Case, transform: str, args):
    fn = functools.partial(c.fn, np_, nn_)
    return getattr(ad, transform)(fn, c.argnums, has_aux=c.has_aux)(*args)


_references: dict = {}


def reference(c: Case, dtype):
    """(args, {transform: jax's result}): jax jits every transform of a case at once."""
    key = (c.name, np.dtype(dtype).name)
    if key not in _references:
        args = c.make(_rng(*key), dtype)
        every = jax.jit(lambda a: {t: run(jax, jnp, jax.nn, c, t, a) for t in TRANSFORMS})
        _references[key] = args, every(args)
    return _references[key]


def assert_trees_close(got, want, *, rtol, atol, what=""):
    """Same structure, shapes, dtypes and weak types; values within rtol + atol·max|want|."""
    assert tree_util.tree_structure(tree_util.tree_map(lambda _: 0, got)) == \
        tree_util.tree_structure(jax.tree_util.tree_map(lambda _: 0, want)), \
        f"{what}: tree structure differs:\n fnad {got}\n jax  {want}"
    for i, (g, w) in enumerate(zip(tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
        where = f"{what} leaf {i}"
        assert not isinstance(g, fnad.core.Tracer), f"{where}: a tracer escaped: {g!r}"
        g_weak, w_weak = getattr(g, "weak_type", False), getattr(w, "weak_type", False)
        assert g_weak == w_weak, f"{where}: weak_type {g_weak} != jax's {w_weak}"
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{where}: shape {g.shape} != jax's {w.shape}"
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != jax's {w.dtype}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=where)


def check(c: Case, transform: str, dtype, rtol, atol):
    args, want = reference(c, dtype)
    got = run(fnad, fnp, fnn, c, transform, args)
    assert_trees_close(got, want[transform], rtol=rtol, atol=atol, what=f"{c.name} {transform}")


F32_TOL = dict(rtol=2e-4, atol=2e-5)
F64_TOL = dict(rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax_float32(name, transform):
    check(CASES[name], transform, np.float32, **F32_TOL)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.x64))
def test_against_jax_float64(name, transform, x64):
    check(CASES[name], transform, np.float64, **F64_TOL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jacfwd_equals_jacrev(name):
    c = CASES[name]
    args = c.make(_rng(name, "fwd=rev"), np.float32)
    fwd = run(fnad, fnp, fnn, c, "jacfwd", args)
    rev = run(fnad, fnp, fnn, c, "jacrev", args)
    assert tree_util.tree_structure(fwd) == tree_util.tree_structure(rev)
    for a, b in zip(tree_util.tree_leaves(fwd), tree_util.tree_leaves(rev)):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_case_table_is_broad():
    assert len(CASES) >= 15
    assert sum(c.x64 for c in CASES.values()) >= 5
    assert any(c.has_aux for c in CASES.values())
    assert any(isinstance(c.argnums, tuple) for c in CASES.values())


# ---- independent of jax: a Jacobian is its columns' JVPs and its rows' VJPs ----------------------
def test_jacfwd_columns_are_jvps_and_jacrev_rows_are_vjps():
    p = {"w": np.array([[0.5, -1.0], [2.0, 0.3]], np.float32), "b": np.float32(0.7)}
    f = lambda p: {"y": fnp.tanh(p["w"].sum(0)) * p["b"], "z": fnp.exp(p["w"][0])}  # noqa: E731
    jf, jr = fnad.jacfwd(f)(p), fnad.jacrev(f)(p)
    leaves, tree = tree_util.tree_flatten(p)
    for k, leaf in enumerate(leaves):                      # column block k: J · e_j per entry
        for j in range(np.size(leaf)):
            t = [np.zeros_like(x) for x in leaves]
            t[k] = np.eye(np.size(leaf), dtype=np.float32)[j].reshape(np.shape(leaf))
            _, col = fnad.jvp(f, (p,), (tree_util.tree_unflatten(tree, t),))
            key = ("b", "w")[k]                             # dict leaves come in sorted order
            for out in ("y", "z"):
                block = np.asarray(jf[out][key]).reshape(np.shape(col[out]) + (-1,))
                np.testing.assert_allclose(block[..., j], col[out], rtol=1e-6)
    y, vjp_fn = fnad.vjp(f, p)
    for out, other in (("y", "z"), ("z", "y")):            # row block: e_iᵀ · J per entry
        for i in range(np.size(y[out])):
            ct = {out: np.eye(np.size(y[out]), dtype=np.float32)[i],
                  other: np.zeros(np.shape(y[other]), np.float32)}
            (row,) = vjp_fn(ct)
            for key in ("w", "b"):
                block = np.asarray(jr[out][key]).reshape((np.size(y[out]),) + np.shape(p[key]))
                np.testing.assert_allclose(block[i], row[key], rtol=1e-6)


def test_hessian_of_quadratic_form_is_symmetric_part():
    a = np.array([[1.0, 2.0, 0.0], [-1.0, 3.0, 0.5], [0.0, 4.0, -2.0]], np.float32)
    x = np.array([0.3, -0.2, 1.1], np.float32)
    h = fnad.hessian(lambda x: x @ a @ x)(x)               # ∂²(xᵀAx) = A + Aᵀ
    np.testing.assert_allclose(h, a + a.T, rtol=1e-6)


def test_jacobian_matches_central_differences():
    def f(x):
        return fnp.stack([fnp.sin(x[0]) * x[1], fnp.exp(x[1] - x[2]), x[0] * x[2] ** 2])
    x = np.array([0.4, -0.3, 1.2], np.float64)
    with fnad.config.override(jax_enable_x64=True):
        jf = np.asarray(fnad.jacfwd(f)(x))
        eps = 1e-6
        fd = np.stack([(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps)
                       for e in np.eye(3)], axis=1)         # column j: ∂f/∂x_j
    np.testing.assert_allclose(jf, fd, rtol=1e-7, atol=1e-9)


# ---- details of the semantics, against jax ------------------------------------------------------
def test_python_scalar_input_and_kwargs():
    def f(np_, x, scale=1.0):
        return np_.stack([x * scale, np_.sin(x)])
    for t in TRANSFORMS:
        got = getattr(fnad, t)(functools.partial(f, fnp))(0.5, scale=3.0)
        want = getattr(jax, t)(functools.partial(f, jnp))(0.5, scale=3.0)
        assert_trees_close(got, want, **F32_TOL, what=t)


def test_list_argnums_means_tuple():
    f = lambda np_, a, b: np_.sin(a) * b                   # noqa: E731
    a, b = np.float32(0.3), np.array([1.0, 2.0], np.float32)
    for t in ("jacfwd", "jacrev"):
        got = getattr(fnad, t)(functools.partial(f, fnp), argnums=[0, 1])(a, b)
        want = getattr(jax, t)(functools.partial(f, jnp), argnums=[0, 1])(a, b)
        assert isinstance(got, tuple) and len(got) == 2
        assert_trees_close(got, want, **F32_TOL, what=t)


def test_negative_argnums():
    f = lambda np_, a, b: np_.sin(a) * b                   # noqa: E731
    a, b = np.array([0.3, 0.1], np.float32), np.array([1.0, 2.0], np.float32)
    for t in TRANSFORMS:
        got = getattr(fnad, t)(functools.partial(f, fnp), argnums=-1)(a, b)
        want = getattr(jax, t)(functools.partial(f, jnp), argnums=-1)(a, b)
        assert_trees_close(got, want, **F32_TOL, what=t)


def test_jacfwd_of_integer_output_is_zeros_of_its_dtype():
    f = lambda np_, x: (x * 2, (x * 2).astype(np_.int32))  # noqa: E731
    x = np.array([1.0, 2.0], np.float32)
    got = fnad.jacfwd(functools.partial(f, fnp))(x)
    want = jax.jacfwd(functools.partial(f, jnp))(x)
    assert_trees_close(got, want, **F32_TOL)


def test_jacrev_allow_int_gives_zero_blocks_for_integer_inputs():
    f = lambda np_, x, n: x * n                            # noqa: E731
    x, n = np.array([1.0, 2.0], np.float32), np.array([3, 4], np.int32)
    got = fnad.jacrev(functools.partial(f, fnp), argnums=(0, 1), allow_int=True)(x, n)
    want = jax.jacrev(functools.partial(f, jnp), argnums=(0, 1), allow_int=True)(x, n)
    assert_trees_close(got, want, **F32_TOL)


def test_holomorphic_complex():
    def f(np_, z):
        return z * z + np_.sin(z)
    z = np.array([0.5 + 0.2j, -1.0 + 0.7j], np.complex64)
    for t in ("jacfwd", "jacrev"):
        got = getattr(fnad, t)(functools.partial(f, fnp), holomorphic=True)(z)
        want = getattr(jax, t)(functools.partial(f, jnp), holomorphic=True)(z)
        assert_trees_close(got, want, **F32_TOL, what=t)


def test_jacrev_of_real_function_of_complex_input():
    def f(np_, z):
        return np_.real(z * np_.conj(z)) + np_.imag(z)
    z = np.array([0.5 + 0.2j, -1.0 + 0.7j], np.complex64)
    got = fnad.jacrev(functools.partial(f, fnp))(z)
    want = jax.jacrev(functools.partial(f, jnp))(z)
    assert_trees_close(got, want, **F32_TOL)


def test_results_are_arrays_not_tracers_and_nest():
    x = np.array([0.2, -0.4], np.float32)
    h3 = fnad.jacfwd(fnad.hessian(lambda x: fnp.sum(fnp.sin(x) ** 3)))(x)   # [2, 2, 2]
    want = jax.jacfwd(jax.hessian(lambda x: jnp.sum(jnp.sin(x) ** 3)))(x)
    assert_trees_close(h3, want, **F32_TOL)


# ---- errors -------------------------------------------------------------------------------------
def _raises(fn, exc, *words):
    with pytest.raises(exc) as info:
        fn()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"


SIN = lambda x: fnp.sin(x)                                 # noqa: E731


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_integer_input_is_an_error(transform):
    x = np.array([1, 2], np.int32)
    _raises(lambda: getattr(fnad, transform)(lambda x: x * 2.0)(x), TypeError,
            "real", "int32")


def test_jacrev_integer_input_error_mentions_allow_int():
    _raises(lambda: fnad.jacrev(lambda x: x * 2.0)(np.array([1, 2], np.int32)), TypeError,
            "jacrev", "int32", "allow_int")


def test_jacfwd_complex_input_needs_holomorphic():
    z = np.array([1 + 1j], np.complex64)
    _raises(lambda: fnad.jacfwd(lambda z: z * z)(z), TypeError, "jacfwd", "complex64",
            "holomorphic=True")


def test_holomorphic_needs_complex_input():
    x = np.array([1.0], np.float32)
    for t in ("jacfwd", "jacrev"):
        _raises(lambda: getattr(fnad, t)(SIN, holomorphic=True)(x), TypeError,
                "holomorphic=True", "complex", "float32")


def test_jacrev_complex_output_is_an_error():
    x = np.array([1.0], np.float32)
    _raises(lambda: fnad.jacrev(lambda x: x * (1 + 2j))(x), TypeError,
            "jacrev", "real-valued outputs", "complex64", "holomorphic=True")


def test_jacrev_integer_output_is_an_error():
    x = np.array([1.0], np.float32)
    _raises(lambda: fnad.jacrev(lambda x: (x * 2).astype(fnp.int32))(x), TypeError,
            "jacrev", "int32", "integer outputs")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("argnums", [1.0, (), "0", None, True])
def test_bad_argnums_type(transform, argnums):
    _raises(lambda: getattr(fnad, transform)(SIN, argnums=argnums), TypeError, "argnums")


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_bad_argnums_element(transform):
    f = getattr(fnad, transform)(lambda a, b: a * b, argnums=(0, "b"))
    _raises(lambda: f(np.float32(1.0), np.float32(2.0)), TypeError, "argnums")


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("argnums", [2, -3, (0, 2)])
def test_argnums_out_of_range(transform, argnums):
    f = getattr(fnad, transform)(lambda a, b: a * b, argnums=argnums)
    _raises(lambda: f(np.float32(1.0), np.float32(2.0)), ValueError,
            transform if transform != "hessian" else "jac", "2 positional arguments",
            "range(-2, 2)")


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_has_aux_needs_a_pair(transform):
    f = getattr(fnad, transform)(SIN, has_aux=True)
    _raises(lambda: f(np.array([1.0], np.float32)), TypeError, "has_aux=True", "pair")

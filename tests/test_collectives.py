"""Collectives over vmap's named axes (primitives/collectives.py) against jax: psum, pmax,
pmin, pmean, all_gather, psum_scatter, all_to_all, ppermute, axis_index, axis_size.

Each case is written once against a `lax` module and run by fnad and by jax under
`vmap(..., axis_name="i")`: values with the mapped axis anywhere or unmapped, nested
vmaps and several names, gradients both ways round (vmap of grad: the transposes;
grad of vmap: the batching rules), JVPs against central differences, the dot-product
test of every transpose, collectives inside jit, scan, cond and while under vmap, and
the errors."""
from __future__ import annotations

import numpy as np
import pytest
from checks import traced

import fnad
import fnad.numpy as fnp
from fnad import lax

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised only without the dev extra
    jax = jnp = None

needs_jax = pytest.mark.skipif(jax is None, reason="jax not installed (the oracle)")
pytestmark = pytest.mark.usefixtures("x64")              # float64 in fnad and jax
RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 4, 8))                      # 4 members of (4, 8)

# name: (f(lax, x) for one member, in_axes)
CASES = {
    "psum": (lambda L, x: L.psum(x, "i"), 0),
    "psum, mapped axis 1": (lambda L, x: L.psum(x, "i") * x, 1),
    "psum of an unmapped value": (lambda L, x: L.psum(x, "i"), None),
    "psum of a pytree": (lambda L, x: L.psum({"a": x, "b": (2 * x,)}, "i")["b"][0], 0),
    "psum of a Python int": (lambda L, x: L.psum(1, "i") * x, 0),
    "pmax": (lambda L, x: L.pmax(x, "i") - x, 1),
    "pmin": (lambda L, x: L.pmin(x, "i") + x, 0),
    "pmean": (lambda L, x: L.pmean(x, "i") * x, 0),
    "all_gather": (lambda L, x: L.all_gather(x, "i"), 0),
    "all_gather axis 1": (lambda L, x: L.all_gather(x, "i", axis=1), 1),
    "all_gather axis -1": (lambda L, x: L.all_gather(x, "i", axis=-1), 0),
    "all_gather tiled": (lambda L, x: L.all_gather(x, "i", axis=1, tiled=True), 0),
    "all_gather unmapped": (lambda L, x: L.all_gather(x, "i", axis=1), None),
    "psum_scatter": (lambda L, x: L.psum_scatter(x, "i"), 0),
    "psum_scatter tiled dim 1": (lambda L, x: L.psum_scatter(
        x, "i", scatter_dimension=1, tiled=True), 1),
    "psum_scatter unmapped": (lambda L, x: L.psum_scatter(x, "i"), None),
    "all_to_all 0 -> 1": (lambda L, x: L.all_to_all(x, "i", 0, 1), 0),
    "all_to_all 0 -> 0": (lambda L, x: L.all_to_all(x, "i", 0, 0), 1),
    "all_to_all tiled 1 -> 0": (lambda L, x: L.all_to_all(x, "i", 1, 0, tiled=True), 0),
    "all_to_all tiled 0 -> 1": (lambda L, x: L.all_to_all(x, "i", 0, 1, tiled=True), 1),
    "all_to_all tiled 1 -> 1": (lambda L, x: L.all_to_all(x, "i", 1, 1, tiled=True), 0),
    "ppermute, a cycle": (lambda L, x: L.ppermute(x, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), 0),
    "ppermute, unmapped": (lambda L, x: L.ppermute(x, "i", [(1, 0), (0, 1), (2, 3), (3, 2)]),
                           None),
    "axis_index": (lambda L, x: x * L.axis_index("i"), 0),
    "axis_size": (lambda L, x: x * L.axis_size("i"), 0),
}


def _lax(lib):
    return lax if lib is fnad else jax.lax


def _run(lib, name, x):
    f, in_axes = CASES[name]
    return lib.vmap(lambda v: f(_lax(lib), v), in_axes=in_axes, axis_name="i",
                    axis_size=4)(x)


@needs_jax
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_jax(name):
    got, want = _run(fnad, name, X), _run(jax, name, X)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _loss(lib, name, x):
    np_ = fnp if lib is fnad else jnp
    out = _run(lib, name, x)
    return np_.sum(np_.sin(out) * np_.arange(out.size).reshape(out.shape))


@needs_jax
@pytest.mark.parametrize("name", sorted(n for n in CASES if not n.startswith(
    ("axis_index", "pmax", "pmin"))))                        # JAX: no pmax/pmin JVP
def test_grad_of_vmap_matches_jax(name):
    got = fnad.grad(lambda x: _loss(fnad, name, x))(X)
    want = jax.grad(lambda x: _loss(jax, name, x))(X)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def _member_loss(lib, name):
    """The gradient of one member's loss inside the vmap: the collective's transpose runs
    under the BatchTrace (where pmax/pmin have a JVP that JAX lacks, and the members'
    cotangents flow to the other members)."""
    f, _ = CASES[name]
    np_ = fnp if lib is fnad else jnp

    def member(v):
        out = f(_lax(lib), v)
        return np_.sum(np_.sin(out) * (1.0 + np_.arange(out.size).reshape(out.shape)))
    return lib.vmap(lib.grad(member), axis_name="i")


# JAX has no JVP for pmax and pmin; and jax 0.10 transposes an untiled all_to_all whose
# split and concat axes differ to the wrong shape ("Expected cotangent type f64[4,8,1]
# but got f64[4,1,8]"): fnad's transpose of that one is checked by the dot-product test.
MAPPED = sorted(n for n in CASES if CASES[n][1] is not None and n != "all_to_all 0 -> 1"
                and not n.startswith(("pmax", "pmin", "axis_index")))


@needs_jax
@pytest.mark.parametrize("name", MAPPED)
def test_vmap_of_grad_matches_jax(name):
    np.testing.assert_allclose(_member_loss(fnad, name)(X), _member_loss(jax, name)(X),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("prim", ["pmax", "pmin"])
def test_pmax_pmin_jvp_takes_the_extremal_member_and_splits_ties(prim):
    x = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, -1.0]])      # column 1 ties at 5
    t = np.array([[10.0, 1.0], [20.0, 2.0], [30.0, 3.0]])
    f = fnad.vmap(lambda v: getattr(lax, prim)(v, "i"), axis_name="i")
    out, tan = fnad.jvp(f, (x,), (t,))
    if prim == "pmax":
        np.testing.assert_allclose(out, np.tile([3.0, 5.0], (3, 1)))
        np.testing.assert_allclose(tan, np.tile([20.0, 1.5], (3, 1)))
    else:
        np.testing.assert_allclose(out, np.tile([1.0, -1.0], (3, 1)))
        np.testing.assert_allclose(tan, np.tile([10.0, 3.0], (3, 1)))


@pytest.mark.parametrize("name", sorted(n for n in CASES if "index" not in n))
def test_jvp_matches_central_differences(name):
    t = RNG.standard_normal(X.shape)
    f = lambda x: _run(fnad, name, x)                         # noqa: E731
    _, tan = fnad.jvp(f, (X,), (t,))
    eps = 1e-6
    fd = (np.asarray(f(X + eps * t)) - np.asarray(f(X - eps * t))) / (2 * eps)
    np.testing.assert_allclose(tan, fd, rtol=1e-6, atol=1e-8)


LINEAR = sorted(n for n in CASES if n.startswith(("psum", "all_", "ppermute", "axis_size"))
                and CASES[n][1] is not None and n != "psum, mapped axis 1")


@pytest.mark.parametrize("name", LINEAR)
def test_transpose_dot_product(name):
    """Σ over members <A x, y> == Σ over members <x, Aᵀ y>, Aᵀ by linear_transpose inside
    the vmap (the transpose rules bound under the BatchTrace)."""
    f, _ = CASES[name]
    op = lambda v: f(lax, v)                                  # noqa: E731
    x = RNG.standard_normal(X.shape)
    y = RNG.standard_normal(fnad.vmap(op, axis_name="i")(x).shape)

    def both(xv, yv):
        aty, = fnad.linear_transpose(op, xv)(yv)
        return fnp.vdot(op(xv), yv), fnp.vdot(xv, aty)
    ax, xaty = fnad.vmap(both, axis_name="i")(x, y)
    np.testing.assert_allclose(np.sum(ax), np.sum(xaty), rtol=1e-12)


@needs_jax
def test_nested_names_and_several_at_once():
    x = X[:, :3, :]                                           # (4, 3, 6): members i, j
    for body in (lambda L, v: L.psum(v, ("i", "j")), lambda L, v: L.psum(v, "i") - v,
                 lambda L, v: L.pmax(v, ("j", "i")), lambda L, v: L.pmean(v, ("i", "j")),
                 lambda L, v: v * L.axis_index(("i", "j")),
                 lambda L, v: v * L.axis_index(("j", "i")),
                 lambda L, v: L.all_gather(v, "i"), lambda L, v: L.all_gather(v, "j"),
                 lambda L, v: v * L.axis_size(("i", "j"))):
        def run(lib):
            inner = lib.vmap(lambda v: body(_lax(lib), v), in_axes=1, axis_name="j")
            return lib.vmap(inner, axis_name="i")(x)
        np.testing.assert_allclose(run(fnad), run(jax), rtol=1e-12)
    # the inner of two vmaps with the same name is the one its collectives reduce
    f = fnad.vmap(fnad.vmap(lambda v: lax.psum(v, "i"), axis_name="i"), axis_name="i")
    np.testing.assert_allclose(f(x), np.broadcast_to(x.sum(1, keepdims=True), x.shape))


@needs_jax
@pytest.mark.parametrize("backend", ["numpy", "numba", "xla"])
def test_collectives_inside_jit_and_jit_inside_vmap(backend):
    def member(L, v):
        return L.psum(v, "i") * v + L.all_gather(v, "i", axis=1).sum(1) \
            + L.ppermute(v, "i", [(0, 3), (3, 0), (1, 2), (2, 1)])
    want = jax.vmap(lambda v: member(jax.lax, v), axis_name="i")(X)
    inner = fnad.jit(lambda v: member(lax, v), backend=backend)
    np.testing.assert_allclose(fnad.vmap(inner, axis_name="i")(X), want, rtol=1e-12)
    outer = fnad.jit(fnad.vmap(lambda v: member(lax, v), axis_name="i"), backend=backend)
    np.testing.assert_allclose(outer(X), want, rtol=1e-12)
    g = fnad.jit(fnad.grad(lambda x: fnad.vmap(lambda v: member(lax, v), axis_name="i")(x)
                           .sum()), backend=backend)
    jg = jax.grad(lambda x: jax.vmap(lambda v: member(jax.lax, v), axis_name="i")(x).sum())
    np.testing.assert_allclose(g(X), jg(X), rtol=1e-10)


def test_jit_traces_again_under_another_axis_name():
    f = traced(lambda v: lax.psum(v, "i") + lax.axis_index("i"))
    x = np.arange(3.0)
    np.testing.assert_allclose(fnad.vmap(f, axis_name="i")(x), [3.0, 4.0, 5.0])
    np.testing.assert_allclose(fnad.vmap(f, axis_name="i")(np.arange(5.0)),
                               np.arange(5.0) + 10.0)
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        fnad.vmap(f, axis_name="j")(x)


@needs_jax
def test_collectives_in_control_flow_bodies():
    def member(L, v):
        c, ys = L.scan(lambda c, r: (c + L.psum(r, "i"), L.pmax(r, "i")), 0.0, v)
        w = L.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + L.pmean(s[1], "i")),
                         (0, c))
        k = L.cond(v[0] > 0, lambda: L.psum(1.0, "i"), lambda: L.psum(2.0, "i"))
        u = L.cond(True, lambda: L.psum(3.0, "i"), lambda: 0.0)  # nothing mapped in the cond
        return ys * w[1] + k + u
    x = X[:, :, 0]
    want = jax.vmap(lambda v: member(jax.lax, v), axis_name="i")(x)
    np.testing.assert_allclose(fnad.vmap(lambda v: member(lax, v), axis_name="i")(x), want,
                               rtol=1e-12)


def test_make_jaxpr_with_an_axis_env():
    text = str(fnad.make_jaxpr(lambda x: lax.psum(x, "i") * lax.axis_index("i"),
                               axis_env=[("i", 4)])(1.0))
    assert "psum[axis_name=('i',)]" in text and "axis_index[axis_name=('i',)]" in text
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        fnad.make_jaxpr(lambda x: lax.psum(x, "i"))(1.0)


def test_errors():
    x = np.ones((4, 3))
    with pytest.raises(NameError, match=r"unbound axis name: 'j'.*\['i'\]"):
        fnad.vmap(lambda v: lax.psum(v, "j"), axis_name="i")(x)
    with pytest.raises(NameError, match="unbound axis name: 'i'"):
        lax.pmean(x, "i")
    with pytest.raises(NameError, match="unbound axis name"):
        fnad.vmap(lambda v: lax.axis_index("i"))(x)                 # vmap without a name
    with pytest.raises(NotImplementedError, match="axis_index_groups"):
        fnad.vmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]),
                  axis_name="i")(x)
    with pytest.raises(NotImplementedError, match="several axes"):
        fnad.vmap(fnad.vmap(lambda v: lax.all_gather(v, ("i", "j")), axis_name="j"),
                  axis_name="i")(np.ones((4, 3, 2)))
    with pytest.raises(ValueError, match="names an axis twice"):
        fnad.vmap(lambda v: lax.psum(v, ("i", "i")), axis_name="i")(x)
    with pytest.raises(ValueError, match="a source or a destination twice"):
        fnad.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 1)]), axis_name="i")(x)
    with pytest.raises(ValueError, match="names member 4, outside the axis 'i' of size 4"):
        fnad.vmap(lambda v: lax.ppermute(v, "i", [(0, 4)]), axis_name="i")(x)
    with pytest.raises(fnad.ShapeError, match="split_axis 1 has size 3, which must equal "
                                              "the axis size 4"):
        fnad.vmap(lambda v: lax.all_to_all(v, "i", 1, 0), axis_name="i")(np.ones((4, 4, 3)))
    with pytest.raises(fnad.ShapeError, match="not a multiple of the axis size 4"):
        fnad.vmap(lambda v: lax.psum_scatter(v, "i", tiled=True), axis_name="i")(x)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        fnad.vmap(lambda v: lax.all_gather(v, "i", axis=2), axis_name="i")(x)
    with pytest.raises(ValueError, match="a scalar"):
        fnad.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(np.ones(4))
    counts = fnad.vmap(lambda v: lax.psum(v, "i"), axis_name="i")(np.ones(4, bool))
    assert counts.dtype == np.int32 and list(np.asarray(counts)) == [4] * 4   # as jax


# ---- pmap: vmap with a named axis, under jit ---------------------------------------------
@needs_jax
def test_pmap_is_a_named_vmap_under_jit():
    def member(L, v, scale):
        return L.psum(v, "d") * scale + L.axis_index("d")
    want = jax.vmap(lambda v: member(jax.lax, v, 3.0), axis_name="d")(X)
    f = fnad.pmap(lambda v, s: member(lax, v, s), "d", static_broadcasted_argnums=1)
    np.testing.assert_allclose(f(X, 3.0), want, rtol=1e-12)
    assert f._cache_size() == 1
    f(X, 3.0)
    assert f._cache_size() == 1                                   # compiled once
    np.testing.assert_allclose(f(X, 2.0), jax.vmap(lambda v: member(jax.lax, v, 2.0),
                                                   axis_name="d")(X), rtol=1e-12)
    g = fnad.pmap(lambda a, b, k: a * b + k, "d", in_axes=(1, None, 0))
    want = jax.vmap(lambda a, b, k: a * b + k, in_axes=(1, None, 0))(X, X[0, 0], np.ones(4))
    np.testing.assert_allclose(g(X, X[0, 0], np.ones(4)), want, rtol=1e-12)
    h = fnad.pmap(lambda a, *, w: a * w, "d")                      # keywords: mapped axis 0
    np.testing.assert_allclose(h(X, w=np.arange(4.0)), X * np.arange(4.0)[:, None, None])
    with pytest.raises(ValueError, match="one entry per positional argument"):
        fnad.pmap(lambda a, b: a, in_axes=(0,))(X, X)
    with pytest.raises(NotImplementedError, match="devices"):
        fnad.pmap(lambda a: a, devices=["cpu"])
